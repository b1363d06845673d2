/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store-global.c — global dedup on a tier shared by many hosts
 * (docs/SHARED.md, "Global dedup"): the index segments this host
 * publishes of the chunks it stores there, the merged lookup over every
 * other host's segments, and the foreign containers this host's chunks
 * point into.
 *
 * Invariants:
 *  1. A segment lists only chunks whose registration committed (their
 *     regions durable below the committed size of their container), and
 *     is named only once durable (written as .tmp, synced, renamed).
 *     Epochs only grow: the next one is past every segment of this host at
 *     open, and one publication runs at a time.
 *  2. The merged lookup holds only entries of segments that parsed
 *     (dedup/segment.h), name the host whose directory holds them and the
 *     epoch of their name, and were made under this host's keys.  An entry
 *     is only a hint: the writer checks its plain size against the chunk,
 *     and every read of a foreign chunk verifies its id after
 *     decompression, so a lying segment gives EIO, never wrong bytes.
 *  3. A foreign container enters the map only after the catalog committed
 *     its row: a rolled-back row's id may be handed to a container of this
 *     host later, which must never be read from another host's directory.
 *  4. The merged lookup is bounded (opts.global_entries): segments past the
 *     bound are not loaded, and counted, never half loaded.
 *  5. Reads of other hosts' objects go through opts.shared->root and
 *     nothing is ever written, renamed or unlinked there.
 *  6. Collection across hosts (docs/SHARED.md, "Safe collection"): a
 *     host's condemnations are loaded in epoch order without a gap, and
 *     its segments only once every condemnation listed is (so no entry of
 *     a condemned container is ever usable before its condemnation);
 *     k_ack is the last epoch of the unbroken run.  A foreign chunk is
 *     recorded only if its container is not condemned, under refs_lock
 *     shared until the row committed; a reference publication reads the
 *     acks under refs_lock exclusive, then the catalog's foreign
 *     containers: every reference committed before is listed, every one
 *     after was checked against at least what it acknowledges.
 *  7. This host's condemned containers are emptied and sealed in the
 *     catalog before they are condemned (under writer exclusion: nothing
 *     is added to them after), their chunks are never published after,
 *     and one is deleted only when every other host that is not retired
 *     has a reference publication acknowledging its condemnation and not
 *     listing it (a host without one, or whose one does not parse, holds
 *     everything).  A condemned id is never forgotten: a condemnation is
 *     removed only once a merged one holds its ids (invariant 10), and
 *     the segments naming those containers stay.
 *  8. A reference publication is named only once durable, and older ones
 *     are removed only after that.
 *  9. After a restart the loaded set starts empty while this host's last
 *     publication still speaks for it: another host's segments load only
 *     once the run of its condemnations reaches the ack that publication
 *     gave it (the floor), and publications say at least the floor.  So
 *     an ack is never ahead of what was loaded once that host's segments
 *     are, and before that no reference into its containers can be taken.
 *     A listing that misses objects (another host merging meanwhile, an
 *     NFS READDIR across its renames and unlinks) only delays the load.
 * 10. A merged condemnation k/M.ftm holds the ids of every condemnation
 *     1..M of its host; it is written from all of them (none missing or
 *     damaged), named only once durable, and only then are the single
 *     ones up to M and the older merged ones removed.  A reader that
 *     loads it has loaded 1..M: its ack may say M.
 *
 * The merged lookup keeps 56 bytes per entry: the first 16 bytes of the id
 * (the filter's probes and the search key; 128 bits make a false match
 * negligible, and would only cost an EIO, invariant 2), the location and
 * the host.  One sorted array, merged with each batch of new segments, and
 * a Bloom filter in front: a chunk no host published costs a few probes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "common/array.h"
#include "common/clock.h"
#include "common/macros.h"
#include "common/strvec.h"
#include "dedup/refs.h"
#include "dedup/store-internal.h"

#define GLOBAL_ID_PREFIX 16u
/* Hosts on one tier at most (the merged lookup keeps a 32-bit index). */
#define GLOBAL_HOSTS_MAX 4096u

typedef struct GlobalEntry {
	uint8_t id[GLOBAL_ID_PREFIX];
	uint64_t container;
	uint64_t offset;
	uint32_t region_size, region_offset, plain_size, frame_size;
	uint32_t host;
} GlobalEntry;

/*
 * A host seen on the tier, the epochs of its segments already handled
 * (loaded or skipped for good), and the containers it condemned.
 */
typedef struct GlobalHost {
	char name[DEDUP_SEGMENT_HOST_MAX + 1];
	uint64_t *seen; /* sorted */
	size_t n_seen, cap_seen;
	uint64_t *condemned; /* sorted: its containers of every condemnation 1..k_ack */
	size_t n_condemned, cap_condemned;
	uint64_t k_ack; /* every condemnation of it up to this epoch is loaded (invariant 6) */
} GlobalHost;

typedef struct GlobalForeign {
	uint64_t local, remote;
	uint32_t host;
} GlobalForeign;

struct StoreGlobal {
	uint8_t keys[DEDUP_SEGMENT_KEYS_SIZE];
	bool keyed;

	pthread_mutex_t publish_lock;
	uint64_t next_epoch; /* protected by publish_lock */

	pthread_mutex_t pending_lock;
	DedupSegmentEntry *pending; /* protected by pending_lock */
	size_t n_pending, cap_pending;

	pthread_mutex_t refresh_lock;
	uint64_t refreshed_ms; /* protected by refresh_lock: the last listing */

	pthread_rwlock_t lookup_lock;
	GlobalHost *hosts; /* protected by lookup_lock; names never change once added */
	size_t n_hosts, cap_hosts;
	GlobalEntry *entries; /* protected by lookup_lock: sorted by id prefix */
	size_t n_entries;
	DedupBloom *filter; /* protected by lookup_lock (replaced); bits set atomically */

	pthread_mutex_t map_lock;
	GlobalForeign *map; /* protected by map_lock: sorted by local */
	size_t n_map, cap_map;

	pthread_rwlock_t refs_lock; /* see store_global_refs_enter() */

	pthread_mutex_t own_lock;
	uint64_t *own_ids, *own_epochs; /* protected by own_lock: this host's condemned containers by id (epoch 0: not written yet) */
	size_t n_own, cap_own;
	uint64_t next_k, next_r;        /* protected by gc_lock */
	uint64_t last_refs;             /* protected by gc_lock: what the last publication said (a hash), 0 before one */
	char blocked_by[DEDUP_SEGMENT_HOST_MAX + 1]; /* protected by own_lock: a host the last collection waited for */
	uint64_t waiting;               /* protected by own_lock: condemned containers the last collection kept */
	DedupRefsEntry *floor;          /* acks of this host's latest publication at open, by host; then read only */
	size_t n_floor;

	/* Counters: atomic. */
	uint64_t published, loaded, other_key, bad, over_bound, hits, hit_bytes, loaded_hosts, refused, condemned_bad;
};

static int prefix_compare(const uint8_t *a, const uint8_t *b) {
	return memcmp(a, b, GLOBAL_ID_PREFIX);
}

static int u64_push(uint64_t **v, size_t *n, size_t *cap, uint64_t x) {
	if (ARRAY_RESERVE_ONE(*v, *cap, *n, 64) < 0)
		return -ENOMEM;
	(*v)[(*n)++] = x;
	return 0;
}

static bool u64_find(const uint64_t *v, size_t n, uint64_t x, size_t *ret) {
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (ret)
		*ret = lo;
	return lo < n && v[lo] == x;
}

static int u64_cmp(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
	return x < y ? -1 : x > y;
}

/* ---- foreign containers ---- */

static int map_insert(StoreGlobal *g, uint64_t local, uint32_t host, uint64_t remote) {
	size_t lo = 0, hi = g->n_map;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (g->map[mid].local < local)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < g->n_map && g->map[lo].local == local)
		return 0;
	if (ARRAY_RESERVE_ONE(g->map, g->cap_map, g->n_map, 64) < 0)
		return -ENOMEM;
	memmove(g->map + lo + 1, g->map + lo, (g->n_map - lo) * sizeof(*g->map));
	g->map[lo] = (GlobalForeign) { .local = local, .remote = remote, .host = host };
	g->n_map++;
	return 0;
}

/* The index of host in g->hosts, added if new.  Under lookup_lock exclusive. */
static int host_index(StoreGlobal *g, const char *name, uint32_t *ret) {
	for (size_t i = 0; i < g->n_hosts; i++)
		if (strcmp(g->hosts[i].name, name) == 0) {
			*ret = (uint32_t) i;
			return 0;
		}
	/*
	 * (!) Names are read without the lock through pointers handed out
	 * (StoreGlobalHit.host, store_global_container()): the array never
	 * moves, it is allocated at its largest once (store_global_open()).
	 */
	if (g->n_hosts >= g->cap_hosts || strlen(name) > DEDUP_SEGMENT_HOST_MAX)
		return -E2BIG;
	GlobalHost *h = g->hosts + g->n_hosts;
	*h = (GlobalHost) {};
	memcpy(h->name, name, strlen(name) + 1);
	*ret = (uint32_t) g->n_hosts++;
	return 0;
}

int store_global_map_add(DedupStore *s, uint64_t local, const char *host, uint64_t remote) {
	StoreGlobal *g = s->global;
	uint32_t h;
	pthread_rwlock_wrlock(&g->lookup_lock);
	int r = host_index(g, host, &h);
	pthread_rwlock_unlock(&g->lookup_lock);
	if (r < 0)
		return r;
	pthread_mutex_lock(&g->map_lock);
	r = map_insert(g, local, h, remote);
	pthread_mutex_unlock(&g->map_lock);
	return r;
}

int store_global_container(DedupStore *s, uint64_t local, DedupBackend **ret_root,
			   char ret_name[static DEDUP_BACKEND_NAME_MAX + 1], uint64_t *ret_remote) {
	StoreGlobal *g = s->global;
	GlobalForeign f = {};
	bool found = false;

	if (!g)
		return 0;
	pthread_mutex_lock(&g->map_lock);
	size_t lo = 0, hi = g->n_map;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (g->map[mid].local < local)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < g->n_map && g->map[lo].local == local) {
		f = g->map[lo];
		found = true;
	}
	pthread_mutex_unlock(&g->map_lock);
	if (!found)
		return 0;

	char name[DEDUP_CONTAINER_NAME_MAX];
	/* hosts[] never moves and a name never changes once added (host_index()). */
	int r = s->opts.shared->object_name(g->hosts[f.host].name, dedup_container_name(f.remote, name), ret_name);
	if (r < 0)
		return r;
	*ret_root = s->opts.shared->root;
	*ret_remote = f.remote;
	return 1;
}

typedef struct MapLoad {
	DedupStore *s;
	uint64_t *locals, *remotes;
	char (*hosts)[CATALOG_HOST_MAX + 1];
	size_t n, cap;
} MapLoad;

static int map_load_one(uint64_t id, const char *host, uint64_t remote, void *userdata) {
	MapLoad *m = userdata;
	if (m->n == m->cap) {
		size_t cap = MAX(m->cap * 2, (size_t) 64);
		uint64_t *a = realloc(m->locals, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		m->locals = a;
		a = realloc(m->remotes, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		m->remotes = a;
		char (*h)[CATALOG_HOST_MAX + 1] = realloc(m->hosts, cap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		m->hosts = h;
		m->cap = cap;
	}
	m->locals[m->n] = id;
	m->remotes[m->n] = remote;
	snprintf(m->hosts[m->n], sizeof(m->hosts[m->n]), "%s", host);
	m->n++;
	return 0;
}

/* ---- publication ---- */

int store_global_note(DedupStore *s, const DedupSegmentEntry *entries, size_t n) {
	StoreGlobal *g = s->global;
	int r = 0;
	if (!g || n == 0)
		return 0;
	pthread_mutex_lock(&g->pending_lock);
	if (g->n_pending + n > g->cap_pending) {
		size_t cap = MAX(MAX(g->cap_pending * 2, g->n_pending + n), (size_t) 1024);
		DedupSegmentEntry *p = realloc(g->pending, cap * sizeof(*p));
		if (!p) {
			r = -ENOMEM;
			goto out;
		}
		g->pending = p;
		g->cap_pending = cap;
	}
	memcpy(g->pending + g->n_pending, entries, n * sizeof(*entries));
	g->n_pending += n;
out:
	pthread_mutex_unlock(&g->pending_lock);
	return r;
}

/* Puts entries back in front of what was noted meanwhile (a publication that failed). */
static void pending_restore(StoreGlobal *g, DedupSegmentEntry *entries, size_t n) {
	pthread_mutex_lock(&g->pending_lock);
	size_t total = g->n_pending + n;
	DedupSegmentEntry *p = malloc(MAX(total, (size_t) 1) * sizeof(*p));
	if (p) {
		memcpy(p, entries, n * sizeof(*p));
		if (g->n_pending > 0)
			memcpy(p + n, g->pending, g->n_pending * sizeof(*p));
		free(g->pending);
		g->pending = p;
		g->n_pending = g->cap_pending = total;
	}
	/* Without memory the chunks go unpublished: other hosts store their own copies, nothing is lost. */
	pthread_mutex_unlock(&g->pending_lock);
}

/* Writes buf as object name of the store's own view: .tmp, synced, renamed (invariants 1 and 8). */
static int object_write(DedupStore *s, const char *name, const uint8_t *buf, size_t size) {
	char tmp[DEDUP_BACKEND_NAME_MAX + 1];
	DedupBackendFile *f = NULL;

	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	int r = dedup_backend_open_write(s->backend, tmp, true, 0, &f);
	if (r < 0)
		return r;
	r = dedup_backend_file_pwrite(s->backend, f, buf, size, 0);
	if (r >= 0)
		r = dedup_backend_file_sync(s->backend, f);
	dedup_backend_file_close(s->backend, f);
	if (r >= 0)
		r = dedup_backend_rename(s->backend, tmp, name);
	if (r < 0) {
		(void) dedup_backend_unlink(s->backend, tmp);
		return r;
	}
	__atomic_add_fetch(&s->bytes_sent, size, __ATOMIC_RELAXED);
	return 0;
}

int dedup_store_publish(DedupStore *s) {
	StoreGlobal *g = s->global;
	int r = 0;

	if (!g)
		return 0;
	pthread_mutex_lock(&g->publish_lock);
	pthread_mutex_lock(&g->pending_lock);
	DedupSegmentEntry *entries = TAKE_PTR(g->pending);
	size_t n = g->n_pending;
	g->n_pending = g->cap_pending = 0;
	pthread_mutex_unlock(&g->pending_lock);

	/* Invariant 7: nothing of a condemned container (its chunks died after they were noted). */
	pthread_mutex_lock(&g->own_lock);
	size_t kept = 0;
	for (size_t i = 0; i < n; i++)
		if (!u64_find(g->own_ids, g->n_own, entries[i].container, NULL))
			entries[kept++] = entries[i];
	n = kept;
	pthread_mutex_unlock(&g->own_lock);

	for (size_t i = 0; i < n && r >= 0; i += DEDUP_SEGMENT_ENTRIES_MAX) {
		size_t k = dedup_segment_entries_sort(entries + i, MIN(n - i, (size_t) DEDUP_SEGMENT_ENTRIES_MAX));
		DedupSegmentHeader h = {
			.flags = g->keyed ? DEDUP_SEGMENT_FLAG_KEYED_IDS : 0,
			.epoch = g->next_epoch,
		};
		memcpy(h.keys, g->keys, sizeof(h.keys));
		snprintf(h.host, sizeof(h.host), "%s", s->opts.shared->host);
		_cleanup_free_ uint8_t *buf = NULL;
		/* Sealed with the regions: its entries would give their tables back (dedup/segment.h). */
		const uint8_t *seal_key = s->opts.encrypt ? s->opts.content_key : NULL;
		r = dedup_segment_format(&h, entries + i, k, seal_key, &buf);
		char name[DEDUP_SEGMENT_NAME_MAX];
		if (r >= 0)
			r = object_write(s, dedup_segment_name(h.epoch, name), buf,
					 (size_t) dedup_segment_size(k, seal_key != NULL));
		if (r < 0) {
			pending_restore(g, entries + i, n - i);
			break;
		}
		g->next_epoch++;
		__atomic_add_fetch(&g->published, 1, __ATOMIC_RELAXED);
	}
	free(entries);
	pthread_mutex_unlock(&g->publish_lock);
	return r;
}

/* ---- the merged lookup ---- */

static bool epoch_seen(const GlobalHost *h, uint64_t epoch) {
	size_t lo = 0, hi = h->n_seen;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (h->seen[mid] < epoch)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < h->n_seen && h->seen[lo] == epoch;
}

static int epoch_mark(GlobalHost *h, uint64_t epoch) {
	size_t lo = 0, hi = h->n_seen;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (h->seen[mid] < epoch)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < h->n_seen && h->seen[lo] == epoch)
		return 0;
	if (ARRAY_RESERVE_ONE(h->seen, h->cap_seen, h->n_seen, 64) < 0)
		return -ENOMEM;
	memmove(h->seen + lo + 1, h->seen + lo, (h->n_seen - lo) * sizeof(*h->seen));
	h->seen[lo] = epoch;
	h->n_seen++;
	return 0;
}

typedef struct Loaded {
	GlobalEntry *items;
	size_t n, cap;
	/* (host, epoch) of every segment handled, to mark once merged */
	uint32_t *hosts;
	uint64_t *epochs;
	size_t n_marks, cap_marks;
} Loaded;

static int loaded_mark(Loaded *l, uint32_t host, uint64_t epoch) {
	if (l->n_marks == l->cap_marks) {
		size_t cap = MAX(l->cap_marks * 2, (size_t) 64);
		uint32_t *h = realloc(l->hosts, cap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		l->hosts = h;
		uint64_t *e = realloc(l->epochs, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		l->epochs = e;
		l->cap_marks = cap;
	}
	l->hosts[l->n_marks] = host;
	l->epochs[l->n_marks++] = epoch;
	return 0;
}

/*
 * Reads and checks one segment of host (invariant 2) and appends its
 * entries to l.  Returns 0 (loaded, or skipped for good and counted),
 * -E2BIG (over the bound: not loaded), or an error to try again later.
 */
static int segment_load(DedupStore *s, const char *object, const char *host, uint32_t host_ix, uint64_t epoch,
			size_t room, Loaded *l) {
	StoreGlobal *g = s->global;
	DedupBackend *root = s->opts.shared->root;
	DedupSegmentHeader h;
	uint64_t size;

	int r = dedup_backend_size(root, object, &size);
	if (r < 0)
		return r;
	/* Its entries by its size, sealed (a tag more) or not: the two never agree. */
	bool sealed = size >= dedup_segment_size(0, true) &&
		      (size - dedup_segment_size(0, true)) % DEDUP_SEGMENT_ENTRY_SIZE == 0;
	if (size < dedup_segment_size(0, sealed) || size > dedup_segment_size(DEDUP_SEGMENT_ENTRIES_MAX, sealed) ||
	    (size - dedup_segment_size(0, sealed)) % DEDUP_SEGMENT_ENTRY_SIZE != 0) {
		__atomic_add_fetch(&g->bad, 1, __ATOMIC_RELAXED);
		return 0;
	}
	if ((size - dedup_segment_size(0, sealed)) / DEDUP_SEGMENT_ENTRY_SIZE > room)
		return -E2BIG;
	_cleanup_free_ uint8_t *buf = malloc((size_t) size);
	if (!buf)
		return -ENOMEM;
	r = dedup_backend_pread_full(root, object, buf, (size_t) size, 0);
	if (r < 0)
		return r;
	if (dedup_segment_parse(buf, (size_t) size, &h) < 0 || strcmp(h.host, host) != 0 || h.epoch != epoch) {
		__atomic_add_fetch(&g->bad, 1, __ATOMIC_RELAXED);
		return 0;
	}
	if (memcmp(h.keys, g->keys, sizeof(h.keys)) != 0 || !!(h.flags & DEDUP_SEGMENT_FLAG_KEYED_IDS) != g->keyed) {
		__atomic_add_fetch(&g->other_key, 1, __ATOMIC_RELAXED);
		return 0;
	}
	/* The same keys: its content subkey is this store's. */
	if (h.sealed && dedup_segment_open(buf, (size_t) size, s->opts.content_key) < 0) {
		__atomic_add_fetch(&g->bad, 1, __ATOMIC_RELAXED);
		return 0;
	}
	if (l->n + h.count > l->cap) {
		size_t cap = MAX(MAX(l->cap * 2, l->n + (size_t) h.count), (size_t) 1024);
		GlobalEntry *p = realloc(l->items, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		l->items = p;
		l->cap = cap;
	}
	for (uint64_t i = 0; i < h.count; i++) {
		DedupSegmentEntry e;
		dedup_segment_entry_get(buf, i, &e);
		GlobalEntry *x = l->items + l->n++;
		*x = (GlobalEntry) {
			.container = e.container,
			.offset = e.offset,
			.region_size = e.region_size,
			.region_offset = e.region_offset,
			.plain_size = e.plain_size,
			.frame_size = e.frame_size,
			.host = host_ix,
		};
		memcpy(x->id, e.id.bytes, GLOBAL_ID_PREFIX);
	}
	__atomic_add_fetch(&g->loaded, 1, __ATOMIC_RELAXED);
	return 0;
}

static int entry_compare(const void *a, const void *b) {
	return prefix_compare(((const GlobalEntry *) a)->id, ((const GlobalEntry *) b)->id);
}

static void filter_add(DedupBloom *f, const GlobalEntry *e) {
	DedupChunkId id = {};
	memcpy(id.bytes, e->id, GLOBAL_ID_PREFIX); /* the filter probes the first 16 bytes only */
	dedup_bloom_add(f, &id);
}

/* Merges l's entries into the lookup, and marks every segment handled. */
static int merge(StoreGlobal *g, Loaded *l) {
	DedupBloom *filter = NULL;
	GlobalEntry *merged = NULL;
	int r;

	if (l->n > 0) /* only skipped segments (another key, damaged) may have been handled */
		qsort(l->items, l->n, sizeof(*l->items), entry_compare);

	pthread_rwlock_rdlock(&g->lookup_lock);
	size_t n_old = g->n_entries;
	bool grow = !g->filter || dedup_bloom_capacity(g->filter) < n_old + l->n;
	pthread_rwlock_unlock(&g->lookup_lock);

	/* Only this thread (refresh_lock) replaces entries and filter: reading them unlocked here is safe. */
	merged = malloc(MAX(n_old + l->n, (size_t) 1) * sizeof(*merged));
	if (!merged)
		return -ENOMEM;
	size_t i = 0, j = 0, k = 0;
	while (i < n_old || j < l->n) {
		if (j == l->n || (i < n_old && prefix_compare(g->entries[i].id, l->items[j].id) <= 0))
			merged[k++] = g->entries[i++];
		else
			merged[k++] = l->items[j++];
	}
	if (grow) {
		r = dedup_bloom_new(MAX((uint64_t) k * 2, DEDUP_BLOOM_CAPACITY_MIN), &filter);
		if (r < 0) {
			free(merged);
			return r;
		}
		for (size_t x = 0; x < k; x++)
			filter_add(filter, merged + x);
	}

	pthread_rwlock_wrlock(&g->lookup_lock);
	if (!grow)
		for (size_t x = 0; x < l->n; x++)
			filter_add(g->filter, l->items + x);
	else {
		dedup_bloom_free(g->filter);
		g->filter = filter;
	}
	free(g->entries);
	g->entries = merged;
	g->n_entries = k;
	r = 0;
	for (size_t x = 0; x < l->n_marks && r >= 0; x++)
		r = epoch_mark(g->hosts + l->hosts[x], l->epochs[x]);
	pthread_rwlock_unlock(&g->lookup_lock);
	return r;
}

/* ---- condemnations ---- */

typedef struct Epochs {
	uint64_t *v;
	size_t n, cap;
	uint64_t past; /* only epochs past this one */
	int (*parse)(const char *name, uint64_t *ret);
} Epochs;

static int epochs_collect(const char *name, void *userdata) {
	Epochs *e = userdata;
	const char *slash = strrchr(name, '/');
	uint64_t epoch;
	if (e->parse(slash ? slash + 1 : name, &epoch) < 0 || epoch <= e->past)
		return 0; /* a .tmp being written, or not ours to judge */
	return u64_push(&e->v, &e->n, &e->cap, epoch);
}

/* Reads object of root whole (at most max bytes) into a new buffer. */
static int object_read(DedupBackend *b, const char *object, uint64_t max, uint8_t **ret, size_t *ret_size) {
	uint64_t size;
	int r = dedup_backend_size(b, object, &size);
	if (r < 0)
		return r;
	if (size > max)
		return -EBADMSG;
	uint8_t *buf = malloc(MAX((size_t) size, (size_t) 1));
	if (!buf)
		return -ENOMEM;
	r = dedup_backend_pread_full(b, object, buf, (size_t) size, 0);
	if (r < 0) {
		free(buf);
		return r;
	}
	*ret = buf;
	*ret_size = (size_t) size;
	return 0;
}

/* The condemnations of one host's k/: single ones past a given epoch, every merged one, and temporaries. */
typedef struct CondemnObjects {
	Epochs single;
	Epochs merged;
	StrVec tmp; /* "k/....tmp" left by a crash: only the owner's open asks for them */
	bool want_tmp;
} CondemnObjects;

static int condemn_objects_collect(const char *name, void *userdata) {
	CondemnObjects *c = userdata;
	const char *slash = strrchr(name, '/');
	size_t len = strlen(name);
	uint64_t epoch;
	if (dedup_condemn_merged_name_parse(slash ? slash + 1 : name, &epoch) >= 0)
		return u64_push(&c->merged.v, &c->merged.n, &c->merged.cap, epoch);
	if (c->want_tmp && len > 4 && strcmp(name + len - 4, ".tmp") == 0)
		return strvec_push(&c->tmp, name);
	return epochs_collect(name, &c->single);
}

static uint64_t epochs_max(const Epochs *e) {
	uint64_t m = 0;
	for (size_t i = 0; i < e->n; i++)
		m = MAX(m, e->v[i]);
	return m;
}

/*
 * Reads host's condemnation (merged or not) of this epoch into *ret_buf
 * (free it) and *ret_h: -EBADMSG when it does not parse or is not host's
 * of that epoch, else the error of reading.
 */
static int condemn_read(DedupBackend *b, const DedupShared *sh, const char *host, uint64_t epoch, bool merged,
			uint8_t **ret_buf, DedupCondemnHeader *ret_h) {
	char name[DEDUP_REFS_NAME_MAX], object[DEDUP_BACKEND_NAME_MAX + 1];
	uint8_t *buf = NULL;
	size_t size;

	if (merged)
		dedup_condemn_merged_name(epoch, name);
	else
		dedup_condemn_name(epoch, name);
	/* sh: another host's, through the root; none: this host's own view. */
	int r = sh ? sh->object_name(host, name, object) : 0;
	if (r >= 0)
		r = object_read(b, sh ? object : name, dedup_condemn_size(DEDUP_REFS_MAX), &buf, &size);
	if (r >= 0 && (dedup_condemn_parse(buf, size, ret_h) < 0 || strcmp(ret_h->host, host) != 0 ||
		       ret_h->epoch != epoch))
		r = -EBADMSG;
	if (r < 0) {
		free(buf);
		return r;
	}
	*ret_buf = buf;
	return 0;
}

/* Adds the ids of a condemnation that parsed to h's condemned set; the run of h now ends at epoch. */
static int condemned_add(StoreGlobal *g, GlobalHost *h, const uint8_t *buf, const DedupCondemnHeader *k, uint64_t epoch) {
	/* The merged array, built beside the old one: the writers' checks go on meanwhile. */
	uint64_t *merged = malloc((h->n_condemned + (size_t) k->count) * sizeof(*merged));
	size_t n = 0, a = 0;
	uint64_t b = 0;
	if (!merged)
		return -ENOMEM;
	while (a < h->n_condemned || b < k->count) {
		uint64_t x = b < k->count ? dedup_condemn_get(buf, b) : UINT64_MAX;
		if (a < h->n_condemned && h->condemned[a] <= x) {
			if (h->condemned[a] == x)
				b++;
			merged[n++] = h->condemned[a++];
		} else {
			merged[n++] = x;
			b++;
		}
	}
	pthread_rwlock_wrlock(&g->lookup_lock);
	free(h->condemned);
	h->condemned = merged;
	h->n_condemned = h->cap_condemned = n;
	h->k_ack = epoch;
	pthread_rwlock_unlock(&g->lookup_lock);
	return 0;
}

/* What this host's own latest publication acknowledged of host (at open), 0 for nothing. */
static uint64_t floor_of(const StoreGlobal *g, const char *host) {
	for (size_t i = 0; i < g->n_floor; i++)
		if (strcmp(g->floor[i].host, host) == 0)
			return g->floor[i].value;
	return 0;
}

/*
 * Loads host's condemnations past its k_ack (invariant 6): its newest
 * merged one first when it is past k_ack, then the single ones in epoch
 * order.  Returns 0 when every one listed is loaded and the run reaches
 * what this host's last publication before its start acknowledged of
 * host; <0 when one is missing from the run, damaged or unreadable, or
 * the run is short of that (its segments wait: tried again later).  Only
 * the refreshing thread (refresh_lock) changes condemned and k_ack.
 */
static int condemnations_load(DedupStore *s, const char *host, uint32_t ix) {
	StoreGlobal *g = s->global;
	const DedupShared *sh = s->opts.shared;
	char dir[DEDUP_BACKEND_NAME_MAX + 1];
	GlobalHost *h = g->hosts + ix;
	CondemnObjects c = { .single = { .past = h->k_ack, .parse = dedup_condemn_name_parse } };

	int r = sh->object_name(host, "k", dir);
	if (r >= 0)
		r = dedup_backend_list(sh->root, dir, condemn_objects_collect, &c);
	if (r >= 0 && c.single.n > 0)
		qsort(c.single.v, c.single.n, sizeof(*c.single.v), u64_cmp);
	uint64_t merged = epochs_max(&c.merged);
	if (r >= 0 && merged > h->k_ack) {
		DedupCondemnHeader k;
		uint8_t *buf = NULL;
		/* Replaced by a newer one meanwhile (ENOENT): the next refresh finds that one. */
		r = condemn_read(sh->root, sh, host, merged, true, &buf, &k);
		if (r == -EBADMSG)
			__atomic_add_fetch(&g->condemned_bad, 1, __ATOMIC_RELAXED);
		if (r >= 0)
			r = condemned_add(g, h, buf, &k, merged);
		free(buf);
	}
	for (size_t i = 0; r >= 0 && i < c.single.n; i++) {
		DedupCondemnHeader k;
		uint8_t *buf = NULL;
		if (c.single.v[i] <= h->k_ack)
			continue; /* covered by the merged one: left by a crash before their removal */
		if (c.single.v[i] != h->k_ack + 1) {
			r = -EBADMSG; /* a gap: never made by a host (epochs only grow by one), so damage */
			break;
		}
		r = condemn_read(sh->root, sh, host, c.single.v[i], false, &buf, &k);
		if (r == -EBADMSG)
			__atomic_add_fetch(&g->condemned_bad, 1, __ATOMIC_RELAXED);
		if (r >= 0)
			r = condemned_add(g, h, buf, &k, c.single.v[i]);
		free(buf);
	}
	/* Invariant 9: short of what this host acknowledged before its start (a listing that missed objects). */
	if (r >= 0 && h->k_ack < floor_of(g, host))
		r = -EAGAIN;
	free(c.single.v);
	free(c.merged.v);
	return r;
}

void store_global_refs_enter(DedupStore *s) {
	if (s->global)
		pthread_rwlock_rdlock(&s->global->refs_lock);
}

void store_global_refs_leave(DedupStore *s) {
	if (s->global)
		pthread_rwlock_unlock(&s->global->refs_lock);
}

bool store_global_condemned(DedupStore *s, const StoreGlobalHit *hit) {
	StoreGlobal *g = s->global;
	pthread_rwlock_rdlock(&g->lookup_lock);
	const GlobalHost *h = g->hosts + hit->host_ix;
	bool found = u64_find(h->condemned, h->n_condemned, hit->container, NULL);
	pthread_rwlock_unlock(&g->lookup_lock);
	if (found)
		__atomic_add_fetch(&g->refused, 1, __ATOMIC_RELAXED);
	return found;
}

/* Adds (id, epoch) to this host's condemned set, or sets the epoch of one there.  Under own_lock. */
static int own_add(StoreGlobal *g, uint64_t id, uint64_t epoch) {
	size_t at;
	if (u64_find(g->own_ids, g->n_own, id, &at)) {
		g->own_epochs[at] = epoch;
		return 0;
	}
	if (g->n_own == g->cap_own) {
		size_t cap = MAX(g->cap_own * 2, (size_t) 64);
		uint64_t *a = realloc(g->own_ids, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		g->own_ids = a;
		a = realloc(g->own_epochs, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		g->own_epochs = a;
		g->cap_own = cap;
	}
	memmove(g->own_ids + at + 1, g->own_ids + at, (g->n_own - at) * sizeof(*g->own_ids));
	memmove(g->own_epochs + at + 1, g->own_epochs + at, (g->n_own - at) * sizeof(*g->own_epochs));
	g->own_ids[at] = id;
	g->own_epochs[at] = epoch;
	g->n_own++;
	return 0;
}

bool store_global_condemned_own(DedupStore *s, uint64_t id) {
	StoreGlobal *g = s->global;
	if (!g)
		return false;
	pthread_mutex_lock(&g->own_lock);
	bool found = u64_find(g->own_ids, g->n_own, id, NULL);
	pthread_mutex_unlock(&g->own_lock);
	return found;
}

int store_global_condemn(DedupStore *s, uint64_t id) {
	StoreGlobal *g = s->global;
	pthread_mutex_lock(&g->own_lock);
	int r = own_add(g, id, 0);
	pthread_mutex_unlock(&g->own_lock);
	return r;
}

/* The condemnation of every container store_global_condemn() took since the last one.  Under gc_lock. */
static int condemn_write(DedupStore *s, DedupGcStats *st) {
	StoreGlobal *g = s->global;
	uint64_t *ids = NULL;
	size_t n = 0, cap = 0;
	int r = 0;

	pthread_mutex_lock(&g->own_lock);
	for (size_t i = 0; r >= 0 && i < g->n_own; i++)
		if (g->own_epochs[i] == 0)
			r = u64_push(&ids, &n, &cap, g->own_ids[i]);
	pthread_mutex_unlock(&g->own_lock);
	for (size_t i = 0; r >= 0 && i < n; i += DEDUP_REFS_MAX) {
		size_t k = MIN(n - i, (size_t) DEDUP_REFS_MAX);
		DedupCondemnHeader h = { .epoch = g->next_k };
		char name[DEDUP_REFS_NAME_MAX];
		uint8_t *buf = NULL;
		snprintf(h.host, sizeof(h.host), "%s", s->opts.shared->host);
		r = dedup_condemn_format(&h, ids + i, k, &buf);
		if (r >= 0)
			r = object_write(s, dedup_condemn_name(h.epoch, name), buf, (size_t) dedup_condemn_size(k));
		free(buf);
		if (r < 0)
			break; /* they stay at epoch 0: condemned by the next collection */
		g->next_k++;
		pthread_mutex_lock(&g->own_lock);
		for (size_t x = i; x < i + k; x++)
			(void) own_add(g, ids[x], h.epoch); /* there already: no allocation */
		pthread_mutex_unlock(&g->own_lock);
		st->containers_condemned += k;
	}
	free(ids);
	return r;
}

typedef struct RefsBuild {
	DedupRefsEntry *v;
	size_t n, cap;
} RefsBuild;

static int refs_push(RefsBuild *b, const char *host, uint64_t value) {
	if (ARRAY_RESERVE_ONE(b->v, b->cap, b->n, 64) < 0)
		return -ENOMEM;
	DedupRefsEntry *e = b->v + b->n++;
	*e = (DedupRefsEntry) { .value = value };
	snprintf(e->host, sizeof(e->host), "%s", host);
	return 0;
}

static int refs_collect(uint64_t id, const char *host, uint64_t remote, void *userdata) {
	(void) id;
	return refs_push(userdata, host, remote);
}

/* This host's reference publication r/EPOCH.ftr (invariants 6 and 8).  Under gc_lock. */
static int refs_publish(DedupStore *s) {
	StoreGlobal *g = s->global;
	RefsBuild acks = {}, refs = {};
	uint8_t *buf = NULL;
	int r = 0;

	pthread_rwlock_wrlock(&g->refs_lock);
	pthread_rwlock_rdlock(&g->lookup_lock);
	/*
	 * Invariant 9: below the floor no segment of that host is loaded, so no
	 * reference into its containers can be taken: the floor may be said
	 * again, and must be, or a second restart would start from a lower one.
	 */
	for (size_t i = 0; r >= 0 && i < g->n_hosts; i++) {
		uint64_t ack = MAX(g->hosts[i].k_ack, floor_of(g, g->hosts[i].name));
		if (ack > 0)
			r = refs_push(&acks, g->hosts[i].name, ack);
	}
	for (size_t i = 0; r >= 0 && i < g->n_floor; i++) {
		size_t k;
		for (k = 0; k < g->n_hosts && strcmp(g->hosts[k].name, g->floor[i].host) != 0; k++)
			;
		if (k == g->n_hosts)
			r = refs_push(&acks, g->floor[i].host, g->floor[i].value);
	}
	pthread_rwlock_unlock(&g->lookup_lock);
	pthread_rwlock_unlock(&g->refs_lock);
	if (r >= 0)
		r = catalog_containers_foreach_foreign(s->catalog, s->tier, refs_collect, &refs);
	if (r < 0)
		goto out;
	DedupRefsHeader h = {
		.epoch = g->next_r,
		.written = (uint64_t) time(NULL),
		.n_acks = (uint32_t) dedup_refs_entries_sort(acks.v, acks.n),
		.n_refs = (uint32_t) dedup_refs_entries_sort(refs.v, refs.n),
	};
	h.lease_until = h.written + s->opts.shared->lease_s;
	snprintf(h.host, sizeof(h.host), "%s", s->opts.shared->host);
	char name[DEDUP_REFS_NAME_MAX];
	r = dedup_refs_format(&h, acks.v, refs.v, &buf);
	if (r < 0)
		goto out;
	/* The same acks and references as the last one: it says it all already (no new object each collection). */
	size_t size = (size_t) dedup_refs_size(h.n_acks, h.n_refs);
	uint64_t said = XXH3_64bits_withSeed(buf + DEDUP_REFS_HEADER_SIZE, size - DEDUP_REFS_HEADER_SIZE - DEDUP_REFS_TRAILER_SIZE,
					     (uint64_t) h.n_acks << 32 | h.n_refs) | 1;
	if (said == g->last_refs)
		goto out;
	r = object_write(s, dedup_refs_name(h.epoch, name), buf, size);
	if (r < 0)
		goto out;
	g->next_r++;
	g->last_refs = said;

	/* Invariant 8: the older ones only now. */
	Epochs old = { .parse = dedup_refs_name_parse };
	if (dedup_backend_list(s->backend, "r", epochs_collect, &old) >= 0)
		for (size_t i = 0; i < old.n; i++)
			if (old.v[i] < h.epoch)
				(void) dedup_backend_unlink(s->backend, dedup_refs_name(old.v[i], name));
	free(old.v);
out:
	free(buf);
	free(acks.v);
	free(refs.v);
	return r;
}

/* What another host's latest reference publication says of this host. */
typedef struct Holder {
	char host[DEDUP_SEGMENT_HOST_MAX + 1];
	bool published;    /* a publication that parsed */
	uint64_t ack;      /* of this host's condemnations */
	uint64_t *refs;    /* this host's containers it references, sorted */
	size_t n_refs, cap_refs;
} Holder;

typedef struct Holders {
	Holder *v;
	size_t n, cap;
	const char *self;
} Holders;

static int holder_collect(const char *host, void *userdata) {
	Holders *h = userdata;
	if (strcmp(host, h->self) == 0)
		return 0;
	if (ARRAY_RESERVE_ONE(h->v, h->cap, h->n, 16) < 0)
		return -ENOMEM;
	Holder *x = h->v + h->n++;
	*x = (Holder) {};
	snprintf(x->host, sizeof(x->host), "%s", host);
	return 0;
}

/*
 * Reads host's latest reference publication from sh->root into *ret_buf
 * (free it; NULL when there is none that parses: missing, replaced
 * meanwhile, damaged, or another host's or epoch's inside) and *ret_h.
 * Returns 0 or the error of listing or reading.
 */
static int latest_refs_read(const DedupShared *sh, const char *host, uint8_t **ret_buf, DedupRefsHeader *ret_h) {
	char dir[DEDUP_BACKEND_NAME_MAX + 1], name[DEDUP_REFS_NAME_MAX], object[DEDUP_BACKEND_NAME_MAX + 1];
	Epochs e = { .parse = dedup_refs_name_parse };
	uint8_t *buf = NULL;
	size_t size;

	*ret_buf = NULL;
	if (!dedup_host_name_is_valid(host))
		return 0; /* a record's name dedup/ cannot use */
	int r = sh->object_name(host, "r", dir);
	if (r >= 0)
		r = dedup_backend_list(sh->root, dir, epochs_collect, &e);
	if (r < 0 || e.n == 0)
		goto out;
	uint64_t latest = 0;
	for (size_t i = 0; i < e.n; i++)
		latest = MAX(latest, e.v[i]);
	r = sh->object_name(host, dedup_refs_name(latest, name), object);
	if (r >= 0)
		r = object_read(sh->root, object, dedup_refs_size(DEDUP_REFS_ACKS_MAX, DEDUP_REFS_MAX), &buf, &size);
	if (r == -ENOENT || r == -EBADMSG)
		r = 0; /* replaced meanwhile, or too large to be one: unpublished this time */
	if (r < 0 || !buf || dedup_refs_parse(buf, size, ret_h) < 0 || strcmp(ret_h->host, host) != 0 ||
	    ret_h->epoch != latest)
		goto out;
	*ret_buf = TAKE_PTR(buf);
out:
	free(buf);
	free(e.v);
	return r;
}

/* Reads holder's latest publication; one that is missing or does not parse leaves it unpublished (it holds all). */
static int holder_read(DedupStore *s, Holder *x) {
	const DedupShared *sh = s->opts.shared;
	DedupRefsHeader h;
	uint8_t *buf = NULL;

	int r = latest_refs_read(sh, x->host, &buf, &h);
	if (r < 0 || !buf)
		return r;
	for (uint32_t i = 0; i < h.n_acks; i++) {
		DedupRefsEntry a;
		dedup_refs_ack_get(buf, i, &a);
		if (strcmp(a.host, sh->host) == 0)
			x->ack = a.value;
	}
	for (uint32_t i = 0; r >= 0 && i < h.n_refs; i++) {
		DedupRefsEntry a;
		dedup_refs_ref_get(buf, &h, i, &a);
		if (strcmp(a.host, sh->host) == 0)
			r = u64_push(&x->refs, &x->n_refs, &x->cap_refs, a.value); /* ascending: the entries are sorted */
	}
	if (r >= 0)
		x->published = true;
	free(buf);
	return r;
}

int dedup_shared_references_foreach(const DedupShared *sh, const char *host,
				    int (*cb)(const char *owner, uint64_t container, void *userdata), void *userdata) {
	DedupRefsHeader h;
	uint8_t *buf = NULL;

	int r = latest_refs_read(sh, host, &buf, &h);
	for (uint32_t i = 0; r >= 0 && buf && i < h.n_refs; i++) {
		DedupRefsEntry a;
		dedup_refs_ref_get(buf, &h, i, &a);
		r = cb(a.host, a.value, userdata);
	}
	free(buf);
	return r;
}

/*
 * Deletes this host's condemned containers every other host released
 * (invariant 7): rows first, then objects (store-gc.c, invariant 2).
 */
static int condemned_release(DedupStore *s, DedupGcStats *st) {
	StoreGlobal *g = s->global;
	const DedupShared *sh = s->opts.shared;
	Holders hs = { .self = sh->host };
	uint64_t *ids = NULL, *epochs = NULL, *gone = NULL;
	size_t n = 0, cap = 0, n_gone = 0, cap_gone = 0, waiting = 0;
	char blocked[DEDUP_SEGMENT_HOST_MAX + 1] = "";
	int r = 0;

	pthread_mutex_lock(&g->own_lock);
	if (g->n_own > 0) {
		ids = malloc(g->n_own * sizeof(*ids));
		epochs = malloc(g->n_own * sizeof(*epochs));
		if (ids && epochs) {
			memcpy(ids, g->own_ids, g->n_own * sizeof(*ids));
			memcpy(epochs, g->own_epochs, g->n_own * sizeof(*epochs));
			n = cap = g->n_own;
		} else
			r = -ENOMEM;
	}
	pthread_mutex_unlock(&g->own_lock);
	if (r < 0 || n == 0)
		goto out;

	r = sh->holders(sh->root, holder_collect, &hs);
	for (size_t i = 0; r >= 0 && i < hs.n; i++)
		r = holder_read(s, hs.v + i);
	if (r < 0)
		goto out;

	r = catalog_begin(s->catalog);
	if (r < 0)
		goto out;
	for (size_t i = 0; r >= 0 && i < n; i++) {
		const char *holder = NULL;
		CatalogContainer ct;
		if (epochs[i] == 0)
			continue; /* not condemned yet: its condemnation failed to be written */
		for (size_t k = 0; !holder && k < hs.n; k++) {
			const Holder *x = hs.v + k;
			if (!x->published || x->ack < epochs[i] || u64_find(x->refs, x->n_refs, ids[i], NULL))
				holder = x->host;
		}
		r = catalog_container_get(s->catalog, ids[i], &ct);
		if (r == -ENOENT) {
			r = u64_push(&gone, &n_gone, &cap_gone, ids[i]); /* deleted before a crash: only the object may be left */
			continue;
		}
		if (r < 0)
			break;
		if (holder) {
			if (waiting++ == 0)
				snprintf(blocked, sizeof(blocked), "%s", holder);
			continue;
		}
		r = catalog_container_delete(s->catalog, ids[i]);
		if (r >= 0)
			r = u64_push(&gone, &n_gone, &cap_gone, ids[i]);
		if (r >= 0) {
			st->containers_deleted++;
			st->bytes_freed += ct.size;
		}
	}
	if (r < 0) {
		catalog_rollback(s->catalog);
		goto out;
	}
	r = catalog_commit(s->catalog);
	if (r >= 0)
		r = store_unlink_containers(s, gone, n_gone);
	if (r >= 0) {
		pthread_mutex_lock(&g->own_lock);
		for (size_t i = 0; i < n_gone; i++) {
			size_t at;
			if (!u64_find(g->own_ids, g->n_own, gone[i], &at))
				continue;
			memmove(g->own_ids + at, g->own_ids + at + 1, (g->n_own - at - 1) * sizeof(*g->own_ids));
			memmove(g->own_epochs + at, g->own_epochs + at + 1, (g->n_own - at - 1) * sizeof(*g->own_epochs));
			g->n_own--;
		}
		pthread_mutex_unlock(&g->own_lock);
	}
out:
	pthread_mutex_lock(&g->own_lock);
	g->waiting = waiting;
	memcpy(g->blocked_by, blocked, sizeof(blocked));
	pthread_mutex_unlock(&g->own_lock);
	st->containers_waiting += waiting;
	for (size_t i = 0; i < hs.n; i++)
		free(hs.v[i].refs);
	free(hs.v);
	free(ids);
	free(epochs);
	free(gone);
	return r;
}

typedef struct HostList {
	StrVec names;
	const char *self;
} HostList;

static int host_collect(const char *host, void *userdata) {
	HostList *h = userdata;
	if (strcmp(host, h->self) == 0)
		return 0;
	return strvec_push(&h->names, host);
}

static void refresh(DedupStore *s, bool force) {
	StoreGlobal *g = s->global;
	Loaded l = {};

	if (!g)
		return;
	const DedupShared *sh = s->opts.shared;
	HostList hosts = { .self = sh->host };
	/*
	 * A writer waits for a refresh under way rather than skip it: the
	 * collector's may have listed the hosts before what the writer's file
	 * needs was published, and a writer refreshes only as it starts.
	 */
	pthread_mutex_lock(&g->refresh_lock);
	/*
	 * The collector's refresh (force) leaves the writers' pace alone: a
	 * writer starting right after it still loads what was published since.
	 */
	if (!force) {
		uint64_t now = monotonic_ms();
		if (g->refreshed_ms != 0 && now - g->refreshed_ms < DEDUP_STORE_GLOBAL_REFRESH_MS)
			goto out;
		g->refreshed_ms = now;
	}

	/* Best effort throughout: what cannot be read now is tried at the next refresh. */
	if (sh->hosts(sh->root, host_collect, &hosts) < 0)
		goto out;
	pthread_rwlock_rdlock(&g->lookup_lock);
	size_t room = s->opts.global_entries - MIN(g->n_entries, s->opts.global_entries);
	pthread_rwlock_unlock(&g->lookup_lock);
	for (size_t i = 0; i < hosts.names.n; i++) {
		const char *host = hosts.names.names[i];
		char dir[DEDUP_BACKEND_NAME_MAX + 1];
		StrVec objects = {};
		uint32_t ix;

		pthread_rwlock_wrlock(&g->lookup_lock);
		int r = host_index(g, host, &ix);
		pthread_rwlock_unlock(&g->lookup_lock);
		/* Invariant 6: no segment of a host whose condemnations are not all loaded. */
		if (r < 0 || condemnations_load(s, host, ix) < 0 || sh->object_name(host, "i", dir) < 0 ||
		    dedup_backend_list(sh->root, dir, strvec_collect, &objects) < 0) {
			strvec_done(&objects);
			continue;
		}
		size_t dir_len = strlen(dir);
		for (size_t k = 0; k < objects.n; k++) {
			const char *object = objects.names[k];
			uint64_t epoch;
			if (strncmp(object, dir, dir_len) != 0 || object[dir_len] != '/' ||
			    dedup_segment_name_parse(object + dir_len + 1, &epoch) < 0)
				continue; /* a .tmp being written, or not ours to judge */
			pthread_rwlock_rdlock(&g->lookup_lock);
			bool seen = epoch_seen(g->hosts + ix, epoch);
			pthread_rwlock_unlock(&g->lookup_lock);
			if (seen)
				continue;
			size_t before = l.n;
			r = segment_load(s, object, host, ix, epoch, room, &l);
			if (r == -E2BIG) {
				__atomic_add_fetch(&g->over_bound, 1, __ATOMIC_RELAXED);
				continue;
			}
			if (r < 0 || loaded_mark(&l, ix, epoch) < 0) {
				l.n = before;
				continue;
			}
			room -= l.n - before;
		}
		strvec_done(&objects);
	}
	if (l.n_marks > 0)
		(void) merge(g, &l);
	pthread_rwlock_rdlock(&g->lookup_lock);
	uint64_t with = 0;
	for (size_t i = 0; i < g->n_hosts; i++)
		with += g->hosts[i].n_seen > 0;
	pthread_rwlock_unlock(&g->lookup_lock);
	__atomic_store_n(&g->loaded_hosts, with, __ATOMIC_RELAXED);
out:
	free(l.items);
	free(l.hosts);
	free(l.epochs);
	strvec_done(&hosts.names);
	pthread_mutex_unlock(&g->refresh_lock);
}

void store_global_refresh(DedupStore *s) {
	refresh(s, false);
}

/*
 * Once DEDUP_CONDEMN_MERGE_AT condemnations follow the newest merged one
 * (or the start), writes their union with it as one merged condemnation of
 * the last one's epoch, then removes what it covers (docs/SHARED.md,
 * "Merged condemnations").  Merges nothing when one of them is missing or
 * does not parse: they stay as they are.  Under gc_lock.
 */
static int condemnations_merge(DedupStore *s) {
	const char *host = s->opts.shared->host;
	CondemnObjects c = { .single = { .parse = dedup_condemn_name_parse } };
	uint64_t *ids = NULL;
	size_t n = 0, cap = 0;
	char name[DEDUP_REFS_NAME_MAX];

	int r = dedup_backend_list(s->backend, "k", condemn_objects_collect, &c);
	uint64_t from = epochs_max(&c.merged), to = epochs_max(&c.single);
	size_t past = 0;
	for (size_t i = 0; i < c.single.n; i++)
		past += c.single.v[i] > from;
	/* Every one of from+1 .. to there: epochs are distinct, so past counts them. */
	if (r < 0 || to <= from || past < DEDUP_CONDEMN_MERGE_AT || past != to - from)
		goto out;
	for (uint64_t e = from == 0 ? 1 : from; r >= 0 && e <= to; e++) {
		DedupCondemnHeader h;
		uint8_t *buf = NULL;
		r = condemn_read(s->backend, NULL, host, e, e == from, &buf, &h);
		for (uint64_t x = 0; r >= 0 && x < h.count; x++)
			r = u64_push(&ids, &n, &cap, dedup_condemn_get(buf, x));
		free(buf);
	}
	if (r == -EBADMSG)
		r = 0; /* damage: leave them, and it, as they are */
	if (r < 0 || n == 0)
		goto out;
	qsort(ids, n, sizeof(*ids), u64_cmp);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (u == 0 || ids[u - 1] != ids[i])
			ids[u++] = ids[i];
	if (u > DEDUP_REFS_MAX)
		goto out; /* too many for one object: they stay single */
	DedupCondemnHeader h = { .epoch = to };
	uint8_t *buf = NULL;
	snprintf(h.host, sizeof(h.host), "%s", host);
	r = dedup_condemn_format(&h, ids, u, &buf);
	if (r >= 0)
		r = object_write(s, dedup_condemn_merged_name(to, name), buf, (size_t) dedup_condemn_size(u));
	free(buf);
	if (r < 0)
		goto out;
	/* Invariant 10: only once the merged one is durable under its name. */
	for (size_t i = 0; i < c.single.n; i++)
		if (c.single.v[i] <= to)
			(void) dedup_backend_unlink(s->backend, dedup_condemn_name(c.single.v[i], name));
	for (size_t i = 0; i < c.merged.n; i++)
		if (c.merged.v[i] < to)
			(void) dedup_backend_unlink(s->backend, dedup_condemn_merged_name(c.merged.v[i], name));
out:
	free(ids);
	free(c.single.v);
	free(c.merged.v);
	return r;
}

int store_global_collect(DedupStore *s, DedupGcStats *st) {
	int r = condemn_write(s, st);
	if (r >= 0)
		r = condemnations_merge(s);
	/* The others' newest condemnations first: what this publication acknowledges. */
	refresh(s, true);
	int q = refs_publish(s);
	if (r >= 0)
		r = q;
	q = condemned_release(s, st);
	return r < 0 ? r : q;
}

int store_global_lookup(DedupStore *s, const DedupChunkId *id, StoreGlobalHit *ret) {
	StoreGlobal *g = s->global;
	int found = 0;

	if (!g)
		return 0;
	pthread_rwlock_rdlock(&g->lookup_lock);
	if (g->filter && dedup_bloom_maybe_contains(g->filter, id)) {
		size_t lo = 0, hi = g->n_entries;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (prefix_compare(g->entries[mid].id, id->bytes) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < g->n_entries && prefix_compare(g->entries[lo].id, id->bytes) == 0) {
			/*
			 * A chunk its host moved (compaction) is listed at its old
			 * place, condemned, and at its new one: the latter, if loaded.
			 */
			size_t at = lo;
			for (size_t x = lo; x < g->n_entries && prefix_compare(g->entries[x].id, id->bytes) == 0; x++) {
				const GlobalHost *h = g->hosts + g->entries[x].host;
				if (!u64_find(h->condemned, h->n_condemned, g->entries[x].container, NULL)) {
					at = x;
					break;
				}
			}
			const GlobalEntry *e = g->entries + at;
			*ret = (StoreGlobalHit) {
				.host = g->hosts[e->host].name,
				.container = e->container,
				.offset = e->offset,
				.region_size = e->region_size,
				.region_offset = e->region_offset,
				.plain_size = e->plain_size,
				.frame_size = e->frame_size,
				.host_ix = e->host,
			};
			found = 1;
		}
	}
	pthread_rwlock_unlock(&g->lookup_lock);
	return found;
}

void store_global_count_hit(DedupStore *s, uint32_t plain_size) {
	__atomic_add_fetch(&s->global->hits, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&s->global->hit_bytes, plain_size, __ATOMIC_RELAXED);
}

/* ---- open, free, stats ---- */

/*
 * This host's condemnations: the containers still in the catalog wait for
 * release at their epoch (those of a merged condemnation at its epoch: at
 * least theirs, so never released sooner); the next epochs are past every
 * condemnation, merged or not, and publication there.  A condemnation of
 * its own that does not parse condemns nothing more (its containers are
 * condemned again, under a new epoch, by the next collection).  The acks
 * of this host's latest publication become the floor of invariant 9.
 */
static int own_load(DedupStore *s) {
	StoreGlobal *g = s->global;
	CondemnObjects c = { .single = { .parse = dedup_condemn_name_parse }, .want_tmp = true };
	Epochs rr = { .parse = dedup_refs_name_parse };

	int r = dedup_backend_list(s->backend, "k", condemn_objects_collect, &c);
	/*
	 * Temporaries a crash left, none being written yet: a merge killed
	 * before its rename leaves one of an epoch that may never come again
	 * (the next merge covers one more), which nothing would overwrite.
	 */
	for (size_t i = 0; r >= 0 && i < c.tmp.n; i++)
		(void) dedup_backend_unlink(s->backend, c.tmp.names[i]);
	if (r >= 0)
		r = dedup_backend_list(s->backend, "r", epochs_collect, &rr);
	g->next_k = MAX(epochs_max(&c.single), epochs_max(&c.merged)) + 1;
	g->next_r = epochs_max(&rr) + 1;
	for (size_t i = 0; r >= 0 && i < c.single.n + c.merged.n; i++) {
		bool merged = i >= c.single.n;
		uint64_t epoch = merged ? c.merged.v[i - c.single.n] : c.single.v[i];
		DedupCondemnHeader h;
		uint8_t *buf = NULL;
		r = condemn_read(s->backend, NULL, s->opts.shared->host, epoch, merged, &buf, &h);
		if (r == -EBADMSG) {
			__atomic_add_fetch(&g->condemned_bad, 1, __ATOMIC_RELAXED);
			r = 0;
			continue;
		}
		for (uint64_t x = 0; r >= 0 && x < h.count; x++) {
			CatalogContainer ct;
			uint64_t id = dedup_condemn_get(buf, x);
			r = catalog_container_get(s->catalog, id, &ct);
			if (r == -ENOENT) {
				r = 0; /* released */
				continue;
			}
			size_t at;
			/* A single condemnation and a merged one left side by side by a crash: the later epoch holds. */
			pthread_mutex_lock(&g->own_lock);
			bool known = u64_find(g->own_ids, g->n_own, id, &at) && g->own_epochs[at] >= epoch;
			if (r >= 0 && !known)
				r = own_add(g, id, epoch);
			pthread_mutex_unlock(&g->own_lock);
		}
		free(buf);
	}
	if (r >= 0) {
		DedupRefsHeader h;
		uint8_t *buf = NULL;
		r = latest_refs_read(s->opts.shared, s->opts.shared->host, &buf, &h);
		if (r >= 0 && buf && h.n_acks > 0) {
			g->floor = calloc(h.n_acks, sizeof(*g->floor));
			if (!g->floor)
				r = -ENOMEM;
			for (uint32_t i = 0; r >= 0 && i < h.n_acks; i++)
				dedup_refs_ack_get(buf, i, &g->floor[g->n_floor++]);
		}
		free(buf);
	}
	free(c.single.v);
	free(c.merged.v);
	strvec_done(&c.tmp);
	free(rr.v);
	return r;
}

static int max_epoch(const char *name, void *userdata) {
	uint64_t epoch;
	if (dedup_segment_name_parse(name, &epoch) >= 0 && epoch >= *(uint64_t *) userdata)
		*(uint64_t *) userdata = epoch + 1;
	return 0;
}

int store_global_open(DedupStore *s) {
	const DedupShared *sh = s->opts.shared;
	MapLoad m = { .s = s };
	int r;

	if (!sh)
		return 0;
	if (!sh->host || !sh->root || !sh->object_name || !sh->hosts || !sh->holders)
		return -EINVAL;
	StoreGlobal *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	pthread_mutex_init(&g->publish_lock, NULL);
	pthread_mutex_init(&g->pending_lock, NULL);
	pthread_mutex_init(&g->refresh_lock, NULL);
	pthread_rwlock_init(&g->lookup_lock, NULL);
	pthread_mutex_init(&g->map_lock, NULL);
	pthread_rwlock_init(&g->refs_lock, NULL);
	pthread_mutex_init(&g->own_lock, NULL);
	s->global = g;

	g->keyed = s->opts.id_key != NULL;
	r = dedup_segment_keys(s->opts.id_key, s->opts.content_key, g->keys);
	if (r < 0)
		return r;
	g->cap_hosts = GLOBAL_HOSTS_MAX;
	g->hosts = calloc(g->cap_hosts, sizeof(*g->hosts));
	if (!g->hosts)
		return -ENOMEM;

	/* Invariant 1: past every segment of this host, whatever a crash left. */
	g->next_epoch = 1;
	r = dedup_backend_list(s->backend, "i", max_epoch, &g->next_epoch);
	if (r < 0)
		return r;
	r = own_load(s);
	if (r < 0)
		return r;

	r = catalog_containers_foreach_foreign(s->catalog, s->tier, map_load_one, &m);
	for (size_t i = 0; r >= 0 && i < m.n; i++)
		r = store_global_map_add(s, m.locals[i], m.hosts[i], m.remotes[i]);
	free(m.locals);
	free(m.remotes);
	free(m.hosts);
	return r;
}

void store_global_free(DedupStore *s) {
	StoreGlobal *g = s->global;
	if (!g)
		return;
	if (g->hosts)
		for (size_t i = 0; i < g->n_hosts; i++) {
			free(g->hosts[i].seen);
			free(g->hosts[i].condemned);
		}
	free(g->hosts);
	free(g->entries);
	dedup_bloom_free(g->filter);
	free(g->pending);
	free(g->map);
	free(g->own_ids);
	free(g->floor);
	free(g->own_epochs);
	pthread_mutex_destroy(&g->own_lock);
	pthread_rwlock_destroy(&g->refs_lock);
	pthread_mutex_destroy(&g->map_lock);
	pthread_rwlock_destroy(&g->lookup_lock);
	pthread_mutex_destroy(&g->refresh_lock);
	pthread_mutex_destroy(&g->pending_lock);
	pthread_mutex_destroy(&g->publish_lock);
	free(g);
	s->global = NULL;
}

void dedup_store_global_stats(DedupStore *s, DedupGlobalStats *ret) {
	StoreGlobal *g = s->global;
	*ret = (DedupGlobalStats) { .bytes_sent = __atomic_load_n(&s->bytes_sent, __ATOMIC_RELAXED) };
	if (!g)
		return;
	ret->shared = true;
	ret->segments_published = __atomic_load_n(&g->published, __ATOMIC_RELAXED);
	ret->segments_loaded = __atomic_load_n(&g->loaded, __ATOMIC_RELAXED);
	ret->segments_other_key = __atomic_load_n(&g->other_key, __ATOMIC_RELAXED);
	ret->segments_bad = __atomic_load_n(&g->bad, __ATOMIC_RELAXED);
	ret->segments_over_bound = __atomic_load_n(&g->over_bound, __ATOMIC_RELAXED);
	ret->foreign_hits = __atomic_load_n(&g->hits, __ATOMIC_RELAXED);
	ret->foreign_bytes = __atomic_load_n(&g->hit_bytes, __ATOMIC_RELAXED);
	ret->hosts = __atomic_load_n(&g->loaded_hosts, __ATOMIC_RELAXED);
	pthread_mutex_lock(&g->pending_lock);
	ret->chunks_unpublished = g->n_pending;
	pthread_mutex_unlock(&g->pending_lock);
	pthread_rwlock_rdlock(&g->lookup_lock);
	ret->entries = g->n_entries;
	ret->memory_bytes = g->n_entries * sizeof(GlobalEntry) + (g->filter ? dedup_bloom_bytes(g->filter) : 0) +
			    g->cap_hosts * sizeof(GlobalHost);
	pthread_rwlock_unlock(&g->lookup_lock);
	pthread_mutex_lock(&g->map_lock);
	ret->foreign_containers = g->n_map;
	pthread_mutex_unlock(&g->map_lock);
	ret->foreign_refused = __atomic_load_n(&g->refused, __ATOMIC_RELAXED);
	ret->condemnations_bad = __atomic_load_n(&g->condemned_bad, __ATOMIC_RELAXED);
	pthread_mutex_lock(&g->own_lock);
	ret->condemned_waiting = g->waiting;
	memcpy(ret->blocked_by, g->blocked_by, sizeof(ret->blocked_by));
	pthread_mutex_unlock(&g->own_lock);
}
