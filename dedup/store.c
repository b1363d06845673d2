/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store.c — the chunk store of one tier: opening and crash recovery,
 * containers (create, append, seal), writer exclusion, statistics.  Writers
 * are in store-write.c, reads and drops in store-read.c, the collector in
 * store-gc.c; the lock order is in store-internal.h.
 *
 * Invariants:
 *  1. The catalog never points at a region that is not durable: a chunk is
 *     registered, and a container's committed size raised over it, only in a
 *     transaction that starts after the region's container was fsynced
 *     (store_pins_sync() before store_pins_commit_sizes()).
 *  2. A container's committed size only grows, except when the store opens
 *     it for appends: then the bytes past the committed size are regions
 *     nobody registered, and are cut off.  Bytes up to the committed size
 *     are complete regions (possibly of unreferenced chunks), so a
 *     container can always be walked region by region from its header.
 *  3. Regions are appended only to s->open, under append_lock, back to
 *     back; a failed append is taken back (truncate) before anything else is
 *     appended, or the container is retired.
 *  4. A container is marked full in the catalog only after its trailer is
 *     durable; the trailer lists every region in it.  A retired container is
 *     never appended to again by this process.
 *  7. Only version 2 containers (regions) are written.  A version 1
 *     container (chunk frames, written before regions) is never appended
 *     to, cut or sealed: opening the store leaves it exactly as it is, and
 *     only compaction ever moves its chunks (into regions).
 *  5. A StoreContainer lives while it is s->open or pinned; its file stays
 *     open as long, so writers can fsync what they appended.
 *  6. After a failed fsync the store refuses further appends (sticky
 *     write_error, -EIO): what the container holds past its synced size is
 *     unknown, and a later fsync of it may wrongly succeed (Linux reports a
 *     writeback error once; the NFS backend fails such a file for good).
 *     It takes appends again once no container is pinned: every writer
 *     that had appended bytes not yet synced has let go of them (its batch
 *     failed, so nothing registered points there), the open container is
 *     retired, never to be appended to or synced again (a reopen cuts it
 *     at its committed size), and the next append starts a new one.  So a
 *     filer that comes back after a crash takes new data without a remount.
 *
 * A container's life:
 *
 *   (none) --container_create()--> open --container_seal()--> sealed (full)
 *                                   |                            |
 *                                   | append error, seal error   | compaction / no chunks left
 *                                   v                            v
 *                                retired (not full) ---------> deleted (store-gc.c)
 *
 *   open/retired, after a crash --dedup_store_open()--> truncated to its
 *   committed size, then resumed as open (the newest with room) or sealed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "dedup/store-internal.h"

const uint8_t *dedup_store_description_key(const DedupStore *s) {
	return s->opts.description_key;
}

const DedupOldKeys *dedup_store_old_keys(const DedupStore *s) {
	return s->opts.old_keys;
}

/* The tag sealed regions of s name their key by (0 without a key id: a store of the tests). */
static uint32_t store_key_tag(const DedupStore *s) {
	return s->opts.key_id ? dedup_key_tag(s->opts.key_id) : 0;
}

/* The key the containers this store creates now are recorded under: the one it seals with, or none. */
static const uint8_t *store_sealing_key_id(const DedupStore *s) {
	return s->opts.encrypt ? s->opts.key_id : NULL;
}

bool store_container_is_current(const DedupStore *s, const CatalogContainer *ct) {
	const uint8_t *k = store_sealing_key_id(s);
	return k ? ct->keyed && memcmp(ct->key_id, k, sizeof(ct->key_id)) == 0 : !ct->keyed;
}

void store_decoded_keys(const DedupStore *s, StoreDecoded *d) {
	d->id_key = s ? s->opts.id_key : NULL;
	d->content_key = s ? s->opts.content_key : NULL;
	d->key_tag = s ? store_key_tag(s) : 0;
	d->old_keys = s ? s->opts.old_keys : NULL;
}

/*
 * Seals units[i, j), about to be written back to back at `at` in c: a
 * sealed region is bound to its place, which is known only here, under
 * append_lock (docs/FORMAT.md, "Sealed region").
 */
static int units_seal(DedupStore *s, StoreContainer *c, StoreUnit *units, size_t i, size_t j, uint64_t at) {
	for (size_t k = i; k < j; k++) {
		DedupRegionPlace place = {
			.key = s->opts.content_key,
			.key_tag = store_key_tag(s),
			.container = c->id,
			.offset = at,
		};
		int r = dedup_region_seal(units[k].data, units[k].size, &place);
		if (r < 0)
			return r;
		at += units[k].size;
	}
	return 0;
}

void store_writers_enter(DedupStore *s) {
	pthread_mutex_lock(&s->writers_lock);
	while (s->exclusive)
		pthread_cond_wait(&s->writers_cond, &s->writers_lock);
	s->n_writers++;
	pthread_mutex_unlock(&s->writers_lock);
}

void store_writers_leave(DedupStore *s) {
	pthread_mutex_lock(&s->writers_lock);
	if (--s->n_writers == 0)
		pthread_cond_broadcast(&s->writers_cond);
	pthread_mutex_unlock(&s->writers_lock);
}

void store_exclusive_begin(DedupStore *s) {
	/*
	 * New writers may still enter while this waits (they may be nested in one
	 * thread, which must not deadlock); the collector waits for a moment
	 * with none.
	 */
	pthread_mutex_lock(&s->writers_lock);
	while (s->n_writers > 0 || s->exclusive)
		pthread_cond_wait(&s->writers_cond, &s->writers_lock);
	s->exclusive = true;
	pthread_mutex_unlock(&s->writers_lock);
}

bool store_exclusive_try_begin(DedupStore *s) {
	pthread_mutex_lock(&s->writers_lock);
	bool got = s->n_writers == 0 && !s->exclusive;
	if (got)
		s->exclusive = true;
	pthread_mutex_unlock(&s->writers_lock);
	return got;
}

void store_exclusive_end(DedupStore *s) {
	pthread_mutex_lock(&s->writers_lock);
	s->exclusive = false;
	pthread_cond_broadcast(&s->writers_cond);
	pthread_mutex_unlock(&s->writers_lock);
}

static StoreContainer *container_new(uint64_t id) {
	StoreContainer *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->id = id;
	dedup_container_name(id, c->name);
	return c;
}

static void container_free(DedupStore *s, StoreContainer *c) {
	if (!c)
		return;
	dedup_backend_file_close(s->backend, c->file);
	free(c->index);
	free(c);
}

/* append_lock held.  Frees c if nothing needs it any more (invariant 5). */
static void container_maybe_free(DedupStore *s, StoreContainer *c) {
	if (c == s->open || c->pins > 0)
		return;
	for (StoreContainer **p = &s->containers; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	container_free(s, c);
}

static int index_reserve(StoreContainer *c, size_t more) {
	if (c->n_index + more <= c->cap_index)
		return 0;
	size_t cap = MAX(c->cap_index * 2, c->n_index + more);
	cap = MAX(cap, (size_t) 256);
	DedupContainerRegion *p = realloc(c->index, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	c->index = p;
	c->cap_index = cap;
	return 0;
}

/* append_lock held.  A new container: catalog row first, then the object (see the collector's orphan sweep). */
static int container_create(DedupStore *s, StoreContainer **ret) {
	uint8_t header[DEDUP_CONTAINER_HEADER_SIZE];
	uint64_t id;
	int r;

	r = catalog_container_new_keyed(s->catalog, s->tier, store_sealing_key_id(s), &id);
	if (r < 0)
		return r;
	/* From here on a failure leaves an empty row (size 0): the collector removes it. */
	StoreContainer *c = container_new(id);
	if (!c)
		return -ENOMEM;
	r = dedup_backend_open_write(s->backend, c->name, true, 0, &c->file);
	if (r >= 0) {
		dedup_container_header_format(id, s->tier, header);
		r = dedup_backend_file_pwrite(s->backend, c->file, header, sizeof(header), 0);
		if (r >= 0)
			__atomic_add_fetch(&s->bytes_sent, sizeof(header), __ATOMIC_RELAXED);
	}
	if (r < 0) {
		container_free(s, c);
		return r;
	}
	c->size = DEDUP_CONTAINER_HEADER_SIZE;
	c->next = s->containers;
	s->containers = c;
	*ret = c;
	return 0;
}

/*
 * Writes c's trailer, fsyncs, and marks c full in a transaction of its own.
 * c is retired whatever happens.  Without append_lock only during
 * dedup_store_open() (nothing else runs then).
 */
static int container_seal(DedupStore *s, StoreContainer *c) {
	CatalogContainer ct;
	int r;

	c->retired = true;
	if (s->open == c)
		s->open = NULL;

	uint64_t trailer = dedup_container_trailer_size(c->n_index);
	_cleanup_free_ uint8_t *buf = malloc((size_t) trailer);
	if (!buf)
		return -ENOMEM;
	r = dedup_container_trailer_format(c->id, c->size, c->index, c->n_index, buf, (size_t) trailer);
	if (r < 0)
		return r;
	r = dedup_backend_file_pwrite(s->backend, c->file, buf, (size_t) trailer, c->size);
	if (r >= 0)
		__atomic_add_fetch(&s->bytes_sent, trailer, __ATOMIC_RELAXED);
	if (r < 0)
		return r;
	r = dedup_backend_file_sync(s->backend, c->file);
	if (r < 0) {
		s->write_error = -EIO;
		return -EIO;
	}
	c->synced = c->size;

	r = catalog_begin(s->catalog);
	if (r < 0)
		return r;
	r = catalog_container_get(s->catalog, c->id, &ct);
	if (r >= 0) {
		ct.size = c->size + trailer;
		ct.full = true;
		r = catalog_container_update(s->catalog, &ct);
	}
	if (r < 0) {
		catalog_rollback(s->catalog);
		return r;
	}
	r = catalog_commit(s->catalog);
	if (r < 0)
		return r;

	/* The index is in the trailer now; the frames are never appended to again. */
	free(c->index);
	c->index = NULL;
	c->n_index = c->cap_index = 0;
	return 0;
}

static int pins_reserve(StorePins *pins) {
	if (pins->n < pins->cap)
		return 0;
	size_t cap = MAX(pins->cap * 2, (size_t) 4);
	StorePin *p = realloc(pins->pins, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	pins->pins = p;
	pins->cap = cap;
	return 0;
}

/* append_lock held; pins_reserve() done. */
static void pin(StorePins *pins, StoreContainer *c, uint64_t end) {
	for (size_t i = 0; i < pins->n; i++)
		if (pins->pins[i].container == c) {
			pins->pins[i].end = MAX(pins->pins[i].end, end);
			return;
		}
	pins->pins[pins->n++] = (StorePin) { .container = c, .end = end };
	c->pins++;
}

/* append_lock held.  Invariant 6, and the way back from it: 0 once appends may go on, in a new container. */
static int write_error_locked(DedupStore *s) {
	if (s->write_error == 0)
		return 0;
	for (StoreContainer *c = s->containers; c; c = c->next)
		if (c->pins > 0)
			return s->write_error;
	StoreContainer *c = s->open;
	if (c) {
		c->retired = true;
		s->open = NULL;
		container_maybe_free(s, c);
	}
	s->write_error = 0;
	return 0;
}

int store_write_error(DedupStore *s) {
	pthread_mutex_lock(&s->append_lock);
	int r = write_error_locked(s);
	pthread_mutex_unlock(&s->append_lock);
	return r;
}

int store_append(DedupStore *s, StoreUnit *units, size_t n, StorePins *pins) {
	size_t i = 0;
	int r = 0;

	pthread_mutex_lock(&s->append_lock);
	r = write_error_locked(s);
	if (r < 0)
		goto out;
	while (i < n) {
		StoreContainer *c = s->open;
		if (!c) {
			r = container_create(s, &c);
			if (r < 0)
				goto out;
			s->open = c;
		}

		/*
		 * The longest run of regions back to back in memory that fits; the
		 * first region of a container always does.
		 */
		size_t j = i;
		uint64_t run = 0;
		while (j < n && c->n_index + (j - i) < DEDUP_CONTAINER_FRAMES_MAX) {
			uint64_t size = units[j].size;
			if (j > i && units[j].data != units[i].data + run)
				break;
			if (c->n_index + (j - i) > 0 && c->size + run + size > s->opts.container_size)
				break;
			run += size;
			j++;
		}
		if (j == i) {
			r = container_seal(s, c);
			container_maybe_free(s, c);
			if (r < 0)
				goto out;
			continue;
		}

		/* Reserve first, so nothing can fail between the write and its bookkeeping. */
		r = index_reserve(c, j - i);
		if (r >= 0)
			r = pins_reserve(pins);
		if (r >= 0 && s->opts.encrypt)
			r = units_seal(s, c, units, i, j, c->size);
		if (r < 0)
			goto out;
		r = dedup_backend_file_pwrite(s->backend, c->file, units[i].data, (size_t) run, c->size);
		if (r < 0) {
			/* Invariant 3: take the partial write back, or never append here again. */
			if (dedup_backend_file_truncate(s->backend, c->file, c->size) < 0) {
				c->retired = true;
				s->open = NULL;
				container_maybe_free(s, c);
			}
			goto out;
		}
		__atomic_add_fetch(&s->bytes_sent, run, __ATOMIC_RELAXED);
		uint64_t at = c->size;
		for (size_t k = i; k < j; k++) {
			c->index[c->n_index++] = (DedupContainerRegion) {
				.offset = at,
				.size = units[k].size,
				.count = units[k].count,
				.plain_size = units[k].plain_size,
			};
			units[k].container = c->id;
			units[k].offset = at;
			at += units[k].size;
		}
		c->size = at;
		pin(pins, c, c->size);
		i = j;

		if (c->size >= s->opts.container_size || c->n_index >= DEDUP_CONTAINER_FRAMES_MAX) {
			r = container_seal(s, c);
			container_maybe_free(s, c);
			if (r < 0)
				goto out;
		}
	}
out:
	pthread_mutex_unlock(&s->append_lock);
	return r;
}

int store_pins_sync(DedupStore *s, StorePins *pins) {
	for (size_t i = 0; i < pins->n; i++) {
		StorePin *p = pins->pins + i;
		pthread_mutex_lock(&s->append_lock);
		bool need = p->container->synced < p->end;
		int r = s->write_error;
		pthread_mutex_unlock(&s->append_lock);
		if (r < 0)
			return r;
		if (!need)
			continue;

		/* Pinned: the file stays open; fsync runs outside the lock, beside other appends. */
		r = dedup_backend_file_sync(s->backend, p->container->file);
		pthread_mutex_lock(&s->append_lock);
		if (r < 0)
			s->write_error = -EIO; /* invariant 6 */
		else if (p->container->synced < p->end)
			p->container->synced = p->end;
		pthread_mutex_unlock(&s->append_lock);
		if (r < 0)
			return -EIO;
	}
	return 0;
}

int store_pins_commit_sizes(DedupStore *s, const StorePins *pins) {
	for (size_t i = 0; i < pins->n; i++) {
		CatalogContainer ct;
		int r = catalog_container_get(s->catalog, pins->pins[i].container->id, &ct);
		if (r < 0)
			return r;
		if (ct.size >= pins->pins[i].end)
			continue;
		ct.size = pins->pins[i].end;
		r = catalog_container_update(s->catalog, &ct);
		if (r < 0)
			return r;
	}
	return 0;
}

void store_pins_release(DedupStore *s, StorePins *pins) {
	if (pins->n == 0)
		return;
	pthread_mutex_lock(&s->append_lock);
	for (size_t i = 0; i < pins->n; i++) {
		StoreContainer *c = pins->pins[i].container;
		c->pins--;
		container_maybe_free(s, c);
	}
	pthread_mutex_unlock(&s->append_lock);
	pins->n = 0;
}

bool store_container_is_busy(DedupStore *s, uint64_t id) {
	bool busy = false;
	pthread_mutex_lock(&s->append_lock);
	for (StoreContainer *c = s->containers; c; c = c->next)
		if (c->id == id) {
			busy = c == s->open || c->pins > 0;
			break;
		}
	pthread_mutex_unlock(&s->append_lock);
	return busy;
}

void store_container_forget(DedupStore *s, uint64_t id) {
	pthread_mutex_lock(&s->append_lock);
	StoreContainer *c = s->open;
	if (c && c->id == id) {
		c->retired = true;
		s->open = NULL;
		container_maybe_free(s, c);
	}
	pthread_mutex_unlock(&s->append_lock);
}

int store_unlink_containers(DedupStore *s, const uint64_t *ids, size_t n) {
	char name[DEDUP_CONTAINER_NAME_MAX];
	int r = 0;

	if (n == 0)
		return 0;
	pthread_rwlock_wrlock(&s->io_lock);
	__atomic_add_fetch(&s->epoch, 1, __ATOMIC_SEQ_CST);
	for (size_t i = 0; i < n; i++) {
		int q = dedup_backend_unlink(s->backend, dedup_container_name(ids[i], name));
		if (q < 0 && q != -ENOENT && r >= 0)
			r = q;
	}
	pthread_rwlock_unlock(&s->io_lock);
	return r;
}

static int add_chunk(const uint8_t digest[CATALOG_DIGEST_SIZE], void *userdata) {
	DedupChunkId id;
	memcpy(id.bytes, digest, DEDUP_CHUNK_ID_SIZE);
	dedup_bloom_add(userdata, &id);
	return 0;
}

int store_filter_rebuild(DedupStore *s) {
	DedupBloom *b = NULL;
	uint64_t n = 0;
	int r;

	r = catalog_chunks_count(s->catalog, s->tier, &n);
	if (r < 0)
		return r;
	/* Twice the chunks there are: room to grow before the next rebuild. */
	r = dedup_bloom_new(MIN(n * 2, DEDUP_BLOOM_CAPACITY_MAX), &b);
	if (r < 0)
		return r;
	r = catalog_chunk_digests_foreach(s->catalog, s->tier, add_chunk, b);
	if (r < 0) {
		dedup_bloom_free(b);
		return r;
	}
	dedup_bloom_free(s->filter);
	s->filter = b;
	return 0;
}

static int id_cmp(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
	return x < y ? -1 : x > y;
}

int store_refs_apply(DedupStore *s, uint64_t *ids, size_t n, int sign) {
	return store_catalog_refs_apply(s->catalog, ids, n, sign);
}

int store_catalog_refs_apply(Catalog *c, uint64_t *ids, size_t n, int sign) {
	if (n == 0)
		return 0;
	_cleanup_free_ int64_t *deltas = malloc(n * sizeof(*deltas));
	if (!deltas)
		return -ENOMEM;
	qsort(ids, n, sizeof(*ids), id_cmp);
	/* The distinct ids, in place, each with its occurrences. */
	size_t m = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && ids[j] == ids[i])
			j++;
		ids[m] = ids[i];
		deltas[m++] = sign * (int64_t) (j - i);
		i = j;
	}
	int r = catalog_chunks_ref(c, ids, deltas, m);
	return r == -ENOENT ? -EUCLEAN : r;
}

int store_catalog_stored_distinct(Catalog *c, uint64_t *ids, size_t n, uint64_t *ret) {
	uint64_t sum = 0;
	qsort(ids, n, sizeof(*ids), id_cmp);
	for (size_t i = 0; i < n; i++) {
		CatalogChunk ch;
		if (i > 0 && ids[i] == ids[i - 1])
			continue;
		int r = catalog_chunk_get(c, ids[i], &ch);
		if (r < 0)
			return r == -ENOENT ? -EIO : r;
		sum += ch.frame_size;
	}
	*ret = sum;
	return 0;
}

/* ---- opening and recovery ---- */

static int collect_container(const CatalogContainer *ct, void *userdata) {
	StoreContainerList *l = userdata;
	if (l->n == l->cap) {
		size_t cap = MAX(l->cap * 2, (size_t) 64);
		CatalogContainer *p = realloc(l->items, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		l->items = p;
		l->cap = cap;
	}
	l->items[l->n++] = *ct;
	return 0;
}

static int found_chunk(const CatalogChunk *ch, void *userdata) {
	return -ECANCELED; /* one is enough */
}

int store_containers_list(DedupStore *s, StoreContainerList *ret) {
	*ret = (StoreContainerList) {};
	int r = catalog_containers_foreach(s->catalog, s->tier, collect_container, ret);
	if (r < 0) {
		free(ret->items);
		*ret = (StoreContainerList) {};
	}
	return r;
}

int store_container_has_chunks(DedupStore *s, uint64_t id) {
	int r = catalog_chunks_foreach_in_container(s->catalog, id, found_chunk, NULL);
	if (r == -ECANCELED)
		return 1;
	return r < 0 ? r : 0;
}

/*
 * Rebuilds c's region index from the object (committed part only,
 * invariant 2): the header must name c, and regions must run back to back
 * to size.  Only for version 2 containers (invariant 7).
 */
static int container_scan(DedupStore *s, StoreContainer *c, uint64_t size) {
	uint8_t buf[DEDUP_REGION_HEADER_SIZE];
	DedupContainerHeader h;
	int r;

	r = dedup_backend_pread_full(s->backend, c->name, buf, DEDUP_CONTAINER_HEADER_SIZE, 0);
	if (r < 0)
		return r;
	r = dedup_container_header_parse(buf, DEDUP_CONTAINER_HEADER_SIZE, &h);
	if (r < 0)
		return r;
	if (h.id != c->id || h.tier != s->tier || h.version != DEDUP_CONTAINER_VERSION)
		return -EBADMSG;

	uint64_t off = DEDUP_CONTAINER_HEADER_SIZE;
	while (off < size) {
		DedupRegionHeader rh;
		if (size - off < DEDUP_REGION_HEADER_SIZE || c->n_index >= DEDUP_CONTAINER_FRAMES_MAX)
			return -EBADMSG;
		r = dedup_backend_pread_full(s->backend, c->name, buf, sizeof(buf), off);
		if (r < 0)
			return r;
		r = dedup_region_header_parse(buf, sizeof(buf), &rh);
		if (r < 0)
			return r;
		uint64_t rs = dedup_region_header_region_size(&rh);
		if (rs > size - off)
			return -EBADMSG;
		r = index_reserve(c, 1);
		if (r < 0)
			return r;
		c->index[c->n_index++] = (DedupContainerRegion) {
			.offset = off,
			.size = (uint32_t) rs,
			.count = rh.count,
			.plain_size = rh.plain_size,
		};
		off += rs;
	}
	c->size = c->synced = size;
	return 0;
}

/* The version of container ct, from its header; -EIO if it cannot be read. */
static int container_version(DedupStore *s, const CatalogContainer *ct) {
	uint8_t buf[DEDUP_CONTAINER_HEADER_SIZE];
	char name[DEDUP_CONTAINER_NAME_MAX];
	DedupContainerHeader h;

	if (dedup_backend_pread_full(s->backend, dedup_container_name(ct->id, name), buf, sizeof(buf), 0) < 0 ||
	    dedup_container_header_parse(buf, sizeof(buf), &h) < 0)
		return -EIO;
	return h.version;
}

/* Removes an unused, empty container (committed size 0): row, then object. */
static int container_drop_empty(DedupStore *s, uint64_t id) {
	char name[DEDUP_CONTAINER_NAME_MAX];
	int r = store_container_has_chunks(s, id);
	if (r != 0)
		return r;
	r = catalog_container_delete(s->catalog, id);
	if (r < 0)
		return r;
	r = dedup_backend_unlink(s->backend, dedup_container_name(id, name));
	return r == -ENOENT ? 0 : r;
}

/* Invariant 2 after a crash; see dedup_store_open(). */
static int recover(DedupStore *s) {
	StoreContainerList l;
	StoreContainer *resume = NULL;
	int r;

	r = store_containers_list(s, &l);
	if (r < 0)
		return r;

	for (size_t i = 0; i < l.n; i++) {
		const CatalogContainer *ct = l.items + i;
		if (ct->full)
			continue;
		if (ct->size == 0) {
			r = container_drop_empty(s, ct->id);
			if (r < 0)
				goto out;
			continue;
		}
		if (ct->size < DEDUP_CONTAINER_HEADER_SIZE)
			continue; /* damaged: leave it for reads to report */
		/* Invariant 7: not one byte of it changes (and an unreadable one is left for reads to report). */
		if (container_version(s, ct) != DEDUP_CONTAINER_VERSION)
			continue;

		StoreContainer *c = container_new(ct->id);
		if (!c) {
			r = -ENOMEM;
			goto out;
		}
		if (dedup_backend_open_write(s->backend, c->name, false, ct->size, &c->file) < 0 ||
		    container_scan(s, c, ct->size) < 0) {
			/* Missing, short or corrupt: nothing to resume; reads of its chunks fail with -EIO. */
			container_free(s, c);
			continue;
		}
		/*
		 * Resume the newest with room; seal the one resumed before it.  Not
		 * one written under another key (or sealing or not, as the tier
		 * chose then): a container is recorded under one key, which a
		 * rekey rewrites it away from.
		 */
		StoreContainer *seal = c;
		if (ct->size < s->opts.container_size && c->n_index < DEDUP_CONTAINER_FRAMES_MAX &&
		    store_container_is_current(s, ct)) {
			seal = resume;
			resume = c;
		}
		if (seal) {
			/*
			 * Best effort: a container that cannot be sealed now (a full tier)
			 * stays as it is, readable, and is tried again at the next open.
			 */
			(void) container_seal(s, seal);
			container_free(s, seal);
		}
	}
	if (resume)
		s->open = s->containers = TAKE_PTR(resume);
	r = 0;
out:
	container_free(s, resume);
	free(l.items);
	return r;
}

static int options_resolve(const DedupStoreOptions *in, DedupStoreOptions *ret) {
	DedupStoreOptions o = in ? *in : (DedupStoreOptions) {};

	if (o.container_size == 0)
		o.container_size = DEDUP_STORE_CONTAINER_SIZE_DEFAULT;
	if (o.region_cache_bytes == 0)
		o.region_cache_bytes = DEDUP_STORE_REGION_CACHE_DEFAULT;
	if (o.region_size == 0)
		o.region_size = DEDUP_REGION_TARGET_DEFAULT;
	if (o.locality_cache_chunks == 0)
		o.locality_cache_chunks = DEDUP_STORE_LOCALITY_CHUNKS_DEFAULT;
	if (o.segment_cache == 0)
		o.segment_cache = DEDUP_STORE_SEGMENT_CACHE_DEFAULT;
	if (o.readahead_bytes == 0)
		o.readahead_bytes = DEDUP_STORE_READAHEAD_DEFAULT;
	if (o.sync_bytes == 0)
		o.sync_bytes = DEDUP_STORE_SYNC_BYTES_DEFAULT;
	if (o.global_entries == 0)
		o.global_entries = DEDUP_STORE_GLOBAL_ENTRIES_DEFAULT;

	if (o.container_size < DEDUP_STORE_CONTAINER_SIZE_MIN || o.container_size > DEDUP_STORE_CONTAINER_SIZE_MAX ||
	    o.locality_cache_chunks > DEDUP_LOCALITY_CHUNKS_MAX || o.segment_cache > DEDUP_STORE_SEGMENT_CACHE_MAX ||
	    o.readahead_bytes > DEDUP_STORE_READAHEAD_MAX || o.zstd_level < DEDUP_FRAME_LEVEL_MIN ||
	    o.zstd_level > DEDUP_FRAME_LEVEL_MAX || o.region_size < DEDUP_REGION_TARGET_MIN ||
	    o.region_size > DEDUP_REGION_TARGET_MAX || o.verify >= _DEDUP_VERIFY_MAX ||
	    o.encode_workers > DEDUP_STORE_ENCODE_WORKERS_MAX || o.global_entries > DEDUP_STORE_GLOBAL_ENTRIES_MAX || o.encode_nice < -20 || o.encode_nice > 19 ||
	    (o.encrypt && (!o.id_key || !o.content_key || !o.description_key)))
		return -EINVAL;
	*ret = o;
	return 0;
}

DedupStore *dedup_store_free(DedupStore *s) {
	if (!s)
		return NULL;
	/* Best effort: what is not published now is stored again by other hosts, never lost. */
	if (s->global)
		(void) dedup_store_publish(s);
	store_global_free(s);
	while (s->containers) {
		StoreContainer *c = s->containers;
		s->containers = c->next;
		container_free(s, c);
	}
	store_encoders_stop(s);
	store_read_done(s);
	store_flights_done(s);
	dedup_bloom_free(s->filter);
	dedup_locality_free(s->locality);
	dedup_region_cache_free(s->cache);
	pthread_rwlock_destroy(&s->io_lock);
	pthread_mutex_destroy(&s->append_lock);
	pthread_cond_destroy(&s->writers_cond);
	pthread_mutex_destroy(&s->writers_lock);
	pthread_mutex_destroy(&s->gc_lock);
	free(s);
	return NULL;
}

DEFINE_CLEANUP_FUNC(DedupStore, dedup_store_free);

int dedup_store_open(Catalog *catalog, uint32_t tier, DedupBackend *backend, const DedupStoreOptions *opts,
		     DedupStore **ret) {
	pthread_rwlockattr_t attr;
	int r;

	if (!catalog || !backend || !ret)
		return -EINVAL;

	_cleanup_(dedup_store_freep) DedupStore *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	/* Locks first: dedup_store_free() destroys them whatever fails below. */
	pthread_mutex_init(&s->gc_lock, NULL);
	pthread_mutex_init(&s->writers_lock, NULL);
	pthread_cond_init(&s->writers_cond, NULL);
	pthread_mutex_init(&s->append_lock, NULL);
	/* Writer-preferring: a collector about to unlink is not starved by a stream of reads. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&s->io_lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	store_read_init(s);
	r = store_flights_init(s);
	if (r < 0)
		return r;

	r = options_resolve(opts, &s->opts);
	if (r < 0)
		return r;
	s->catalog = catalog;
	s->backend = backend;
	s->tier = tier;
	s->verify_content = s->opts.verify == DEDUP_VERIFY_CONTENT || (s->opts.verify == DEDUP_VERIFY_AUTO && tier != 0);
	s->epoch = 1;

	r = store_read_setup(s);
	if (r < 0)
		return r;
	r = dedup_locality_new(s->opts.locality_cache_chunks, &s->locality);
	if (r < 0)
		return r;
	r = dedup_region_cache_new(s->opts.region_cache_bytes, &s->cache);
	if (r < 0)
		return r;

	r = recover(s);
	if (r < 0)
		return r;
	r = store_global_open(s);
	if (r < 0)
		return r;
	r = store_filter_rebuild(s);
	if (r < 0)
		return r;
	store_encoders_init(s);

	*ret = TAKE_PTR(s);
	return 0;
}

/* ---- statistics ---- */

static int stats_container(const CatalogContainer *ct, void *userdata) {
	DedupStoreStats *st = userdata;
	st->containers++;
	st->stored_bytes += ct->size;
	st->live_bytes += ct->live_bytes;
	return 0;
}

static int stats_chunk(const CatalogChunk *ch, void *userdata) {
	DedupStoreStats *st = userdata;
	st->chunks++;
	if (ch->refs == 0)
		st->dead_chunks++;
	else
		st->live_plain_bytes += ch->plain_size;
	st->referenced_bytes += (uint64_t) ch->plain_size * ch->refs;
	return 0;
}

void dedup_store_cache_stats(DedupStore *s, DedupRegionCacheStats *ret) {
	dedup_region_cache_stats(s->cache, ret);
}

int dedup_store_stats(DedupStore *s, DedupStoreStats *ret) {
	DedupStoreStats st = {};
	int r;

	r = catalog_containers_foreach(s->catalog, s->tier, stats_container, &st);
	if (r < 0)
		return r;
	r = catalog_chunks_foreach(s->catalog, s->tier, stats_chunk, &st);
	if (r < 0)
		return r;

	/* The filter is only replaced under writer exclusion: hold it for the two reads. */
	store_writers_enter(s);
	st.filter_bytes = dedup_bloom_bytes(s->filter);
	st.filter_capacity = dedup_bloom_capacity(s->filter);
	store_writers_leave(s);
	st.locality_bytes = dedup_locality_bytes(s->locality);
	DedupRegionCacheStats cs;
	dedup_region_cache_stats(s->cache, &cs);
	st.region_cache_bytes = cs.bytes;
	*ret = st;
	return 0;
}

int dedup_store_container_object_parse(const char *name, uint64_t *ret_id) {
	return dedup_container_name_parse(name, ret_id);
}
