/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store-gc.c — the collector of one tier: dead chunks, empty and orphaned
 * containers, compaction.
 *
 * Invariants:
 *  1. A chunk is deleted only while no writer is alive (writer exclusion):
 *     a writer may have found any chunk, even a dead one, and will take a
 *     reference on it at commit.  The locality cache, which may name deleted
 *     chunks, is cleared before writers are let in again.
 *  2. A container row is deleted before its object is unlinked, and an
 *     object is unlinked only under io_lock exclusive with the epoch bumped
 *     (store_unlink_containers()): no reader reads a deleted object.  A crash
 *     in between leaves an object without a row: an orphan, removed by the
 *     next collection (objects are listed before rows are read, and a row is
 *     always created before its object, so a listed object without a row is
 *     never one being created).
 *  3. Compaction checks every unit it copies (decoded, and each chunk where
 *     the catalog says), copies a region whose chunks all live byte for
 *     byte and compresses the live chunks of the others (and of version 1
 *     frames) into new regions, at the level the region had (frames: the
 *     store's level), fsyncs the copies, moves the chunks and deletes the
 *     old row in one transaction, makes that transaction durable
 *     (catalog_sync()), and only then unlinks the old object.  A crash at
 *     any point leaves the chunks either all in the old container or all in
 *     the new one; the other copy is garbage.
 *  4. Only containers that are neither open nor pinned are compacted: a
 *     container that is not open never gets new frames, so none can appear
 *     in it while it is being copied.
 *  5. A rekey is compaction of the containers recorded under another key
 *     than the store's (dedup_store_rekey()): the same copy, the same
 *     switch; their chunks are gathered again into regions sealed under
 *     the store's key where they land, and the new container is recorded
 *     under it (a store never appends to a container of another key).
 *  6. On a store doing global dedup no container is deleted or unlinked
 *     here: one left without chunks (by phase 1, or emptied by compaction,
 *     which keeps its row) is condemned, and store_global_collect()
 *     deletes it once every other host released it (store-global.c,
 *     invariant 7).
 *
 * Steps of one collection:
 *
 *   exclusive_begin --> list objects --> delete dead chunks (batches) -->
 *   remove orphan objects --> remove containers without chunks --> rebuild
 *   the filter if full --> exclusive_end --> compact each sparse container
 *   (copy or compress again, fsync, move + delete row, sync, unlink)
 *
 * With global dedup, "remove containers without chunks" is "condemn" and
 * exclusive_end is followed by store_global_collect() (write the
 * condemnation, publish references, delete what the other hosts
 * released); compaction keeps the row and skips the unlink, and the moved
 * chunks are published again after the collection.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/macros.h"
#include "dedup/frame.h"
#include "dedup/store-internal.h"

/* Chunks deleted per transaction: keeps the catalog lock short for everyone else. */
#define GC_DELETE_BATCH 1024u

typedef struct IdVec {
	uint64_t *ids;
	size_t n, cap;
} IdVec;

static int idvec_push(IdVec *v, uint64_t id) {
	if (ARRAY_RESERVE_ONE(v->ids, v->cap, v->n, 256) < 0)
		return -ENOMEM;
	v->ids[v->n++] = id;
	return 0;
}

static int collect_dead(const CatalogChunk *ch, void *userdata) {
	return idvec_push(userdata, ch->id);
}

static int collect_object(const char *name, void *userdata) {
	uint64_t id;
	if (dedup_container_name_parse(name, &id) < 0)
		return 0; /* not a container this store made: not ours to judge */
	return idvec_push(userdata, id);
}

static int delete_dead_chunks(DedupStore *s, DedupGcStats *st) {
	IdVec dead = {};
	int r;

	r = catalog_chunks_foreach_dead(s->catalog, s->tier, collect_dead, &dead);
	for (size_t i = 0; r >= 0 && i < dead.n; i += GC_DELETE_BATCH) {
		size_t n = MIN(dead.n - i, (size_t) GC_DELETE_BATCH), deleted = 0;
		r = catalog_begin(s->catalog);
		if (r < 0)
			break;
		for (size_t k = i; k < i + n; k++) {
			r = catalog_chunk_delete(s->catalog, dead.ids[k]);
			if (r == -EBUSY) {
				/* Referenced again since the scan (cannot happen under exclusion; harmless). */
				r = 0;
				continue;
			}
			if (r < 0)
				break;
			deleted++;
		}
		if (r < 0) {
			catalog_rollback(s->catalog);
			break;
		}
		r = catalog_commit(s->catalog);
		if (r >= 0)
			st->chunks_deleted += deleted;
	}
	free(dead.ids);
	return r;
}

/*
 * Global dedup, under writer exclusion: seals and condemns this host's
 * containers left without chunks (store-global.c, invariant 7).  No writer
 * is alive, so none is pinned; the open one is closed for good if empty.
 */
static int condemn_empty(DedupStore *s) {
	StoreContainerList l = {};
	int r = store_containers_list(s, &l);
	for (size_t i = 0; r >= 0 && i < l.n; i++) {
		CatalogContainer ct = l.items[i];
		if (ct.live_bytes > 0 || store_global_condemned_own(s, ct.id))
			continue;
		r = store_container_has_chunks(s, ct.id);
		if (r != 0)
			continue; /* dead chunks a drop made after the scan: next time */
		store_container_forget(s, ct.id);
		if (!ct.full) {
			ct.full = true;
			r = catalog_begin(s->catalog);
			if (r < 0)
				break;
			r = catalog_container_update(s->catalog, &ct);
			if (r < 0) {
				catalog_rollback(s->catalog);
				break;
			}
			r = catalog_commit(s->catalog);
		}
		if (r >= 0)
			r = store_global_condemn(s, ct.id);
	}
	free(l.items);
	return r;
}

/* Phase 1, under writer exclusion: everything that deletes. */
static int collect(DedupStore *s, DedupGcStats *st) {
	IdVec objects = {}, unlink = {};
	StoreContainerList l = {};
	int r;

	/* Invariant 2: objects first, rows after. */
	r = dedup_backend_list(s->backend, "c", collect_object, &objects);
	if (r < 0)
		goto out;

	r = delete_dead_chunks(s, st);
	if (st->chunks_deleted > 0)
		dedup_locality_clear(s->locality); /* invariant 1, even after a partial failure */
	if (r < 0)
		goto out;

	for (size_t i = 0; i < objects.n; i++) {
		CatalogContainer ct;
		r = catalog_container_get(s->catalog, objects.ids[i], &ct);
		if (r == -ENOENT) {
			r = idvec_push(&unlink, objects.ids[i]);
			if (r < 0)
				goto out;
			st->orphans_deleted++;
			continue;
		}
		if (r < 0)
			goto out;
	}

	if (s->global) {
		/*
		 * Global dedup: another host may reference any container this one
		 * published.  One left without chunks is condemned here, and
		 * deleted after this phase only once every other host released
		 * it (invariant 6).  Rows of other hosts' containers no chunk
		 * points into any more go.
		 */
		r = catalog_containers_foreign_prune(s->catalog, s->tier, NULL);
		if (r >= 0)
			r = condemn_empty(s);
		goto filter;
	}
	r = store_containers_list(s, &l);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < l.n; i++) {
		const CatalogContainer *ct = l.items + i;
		if (ct->live_bytes > 0)
			continue;
		r = store_container_has_chunks(s, ct->id);
		if (r < 0)
			goto out;
		if (r > 0)
			continue; /* dead chunks a drop made after the scan: next time */
		/* No writer is alive, so nothing is pinned; the open container goes too if empty. */
		store_container_forget(s, ct->id);
		r = catalog_container_delete(s->catalog, ct->id);
		if (r < 0)
			goto out;
		r = idvec_push(&unlink, ct->id);
		if (r < 0)
			goto out;
		st->containers_deleted++;
		st->bytes_freed += ct->size;
	}

filter:
	if (r >= 0 && dedup_bloom_count(s->filter) > dedup_bloom_capacity(s->filter))
		r = store_filter_rebuild(s);
out:
	{
		int q = store_unlink_containers(s, unlink.ids, unlink.n);
		if (r >= 0)
			r = q;
	}
	free(objects.ids);
	free(unlink.ids);
	free(l.items);
	return r;
}

static int collect_chunk(const CatalogChunk *ch, void *userdata) {
	StoreChunkVec *v = userdata;
	if (ARRAY_RESERVE_ONE(v->items, v->cap, v->n, 256) < 0)
		return -ENOMEM;
	v->items[v->n++] = *ch;
	return 0;
}

/* One compaction: the live chunks of a container going into new regions. */
typedef struct Compaction {
	DedupStore *s;
	StoreChunkVec v;          /* the container's chunks, by unit and offset in it */
	CatalogChunk *to;         /* where each goes: v.items[k] -> to[k] */
	size_t *pending;          /* indexes into v of the chunks in the builder (gathered or encoded) */
	size_t n_pending, n_gathered_from; /* [n_gathered_from, n_pending) are in the region being gathered */
	StoreRegionBuilder builder;
	int level;                /* the builder's level, or INT_MIN before its first chunk */
	StorePins pins;
	StoreDecoded dec;
	uint8_t *buf;             /* one unit read from the old container */
	DedupGcStats *st;
} Compaction;

/* Appends the builder's encoded regions and records where their chunks went. */
static int compaction_flush(Compaction *c) {
	StoreRegionBuilder *b = &c->builder;
	if (b->n_units == 0)
		return 0;
	int r = store_append(c->s, b->units, b->n_units, &c->pins);
	if (r < 0)
		return r;
	for (size_t i = 0; i < c->n_gathered_from; i++) {
		CatalogChunk *to = c->to + c->pending[i];
		const StoreUnit *u = b->units + to->container; /* the unit index, until now */
		to->container = u->container;
		to->offset = u->offset;
	}
	memmove(c->pending, c->pending + c->n_gathered_from, (c->n_pending - c->n_gathered_from) * sizeof(size_t));
	c->n_pending -= c->n_gathered_from;
	c->n_gathered_from = 0;
	store_builder_reset_output(b);
	return 0;
}

/* Encodes the region being gathered; its chunks learn their unit (in to->container, for now) and share. */
static int compaction_encode(Compaction *c) {
	StoreRegionBuilder *b = &c->builder;
	size_t unit;
	int r = store_builder_encode(b, &unit);
	if (r == -ENOBUFS) {
		r = compaction_flush(c);
		if (r >= 0)
			r = store_builder_encode(b, &unit);
	}
	if (r <= 0)
		return r;
	for (size_t i = c->n_gathered_from; i < c->n_pending; i++) {
		CatalogChunk *to = c->to + c->pending[i];
		to->container = unit;
		to->frame_size = b->shares[i - c->n_gathered_from];
		to->region_size = b->units[unit].size;
	}
	c->n_gathered_from = c->n_pending;
	c->st->regions_rewritten++;
	return 0;
}

/* Compresses the live chunk v.items[k] (its bytes in c->dec) again, into the region being gathered. */
static int compaction_gather(Compaction *c, size_t k, const uint8_t *data, int level) {
	StoreRegionBuilder *b = &c->builder;
	uint32_t len = c->v.items[k].plain_size;
	int r;

	if (level != c->level || store_builder_is_full(b, len)) {
		r = compaction_encode(c);
		if (r < 0)
			return r;
		if (level != c->level) {
			r = dedup_region_encoder_set_level(b->encoder, level);
			if (r < 0)
				return r;
			c->level = level;
		}
	}
	c->to[k].region_offset = store_builder_add(b, (const DedupChunkId *) c->v.items[k].digest, data, len);
	c->pending[c->n_pending++] = k;
	return 0;
}

/*
 * A region whose chunks all live goes as it is: after what was gathered
 * before it (so the order of chunks is kept), byte for byte.
 */
static int compaction_copy(Compaction *c, size_t k0, size_t k1, const uint8_t *unit, uint32_t size) {
	StoreRegionBuilder *b = &c->builder;
	int r = compaction_encode(c);
	if (r >= 0 && (b->out_cap - b->out_len < size || b->n_units == b->cap_units))
		r = compaction_flush(c);
	if (r < 0)
		return r;
	if (ARRAY_RESERVE_ONE(b->units, b->cap_units, b->n_units, 64) < 0)
		return -ENOMEM;
	size_t unit_index = b->n_units++;
	b->units[unit_index] = (StoreUnit) {
		.data = b->out + b->out_len,
		.size = size,
		.count = c->dec.count,
		.plain_size = c->dec.plain_size,
	};
	memcpy(b->out + b->out_len, unit, size);
	b->out_len += size;
	for (size_t k = k0; k < k1; k++) {
		c->to[k].container = unit_index;
		c->pending[c->n_pending++] = k;
	}
	c->n_gathered_from = c->n_pending;
	return 0;
}

/*
 * Reads, checks and copies (or compresses again) the unit of chunks
 * v.items[k0, k1) (all in one unit).  -EIO if the unit or a chunk fails its
 * checks.
 */
static int compaction_unit(Compaction *c, uint64_t container, size_t k0, size_t k1) {
	DedupStore *s = c->s;
	const CatalogChunk *first = c->v.items + k0;
	uint32_t size = store_chunk_unit_size(first);
	bool region = first->region_size > 0;
	char name[DEDUP_CONTAINER_NAME_MAX];
	int r;

	if (size <= DEDUP_FRAME_HEADER_SIZE || size > DEDUP_REGION_SIZE_MAX)
		return -EIO;
	/* Only the collector moves or unlinks containers, and it is the caller: no epoch check. */
	pthread_rwlock_rdlock(&s->io_lock);
	r = dedup_backend_pread_full(s->backend, dedup_container_name(container, name), c->buf, size, first->offset);
	pthread_rwlock_unlock(&s->io_lock);
	if (r < 0)
		return r == -ENOMEM ? r : -EIO;
	r = store_unit_decode(region, c->buf, size, container, first->offset, s->verify_content, &c->dec);
	if (r < 0)
		return r;
	c->st->bytes_copied += size;

	/*
	 * A sealed region is bound to where it lies (docs/FORMAT.md, "Sealed
	 * region"): it cannot move byte for byte, its chunks are gathered
	 * again and sealed where they go.
	 */
	bool all = region && c->dec.count == k1 - k0 && !c->dec.sealed;
	for (size_t k = k0; k < k1; k++) {
		const CatalogChunk *ch = c->v.items + k;
		DedupCachedRegion view = {
			.count = c->dec.count,
			.ends = c->dec.ends,
			.ids = c->dec.ids,
		};
		if (store_chunk_unit_size(ch) != size || (ch->region_size > 0) != region ||
		    dedup_cached_region_find(&view, ch->region_offset, ch->plain_size,
					     (const DedupChunkId *) ch->digest) < 0)
			return -EIO;
		c->to[k] = *ch;
	}
	if (all)
		return compaction_copy(c, k0, k1, c->buf, size);
	int level = region ? c->dec.level : s->opts.zstd_level;
	for (size_t k = k0; k < k1; k++) {
		r = compaction_gather(c, k, c->dec.plain + c->v.items[k].region_offset, level);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Global dedup: where the moved chunks are now, for the next segment (without memory: unpublished, not lost). */
static void compaction_publish(DedupStore *s, const Compaction *c) {
	for (size_t k = 0; k < c->v.n; k++) {
		const CatalogChunk *to = c->to + k;
		DedupSegmentEntry e = {
			.container = to->container,
			.offset = to->offset,
			.region_size = to->region_size,
			.region_offset = to->region_offset,
			.plain_size = to->plain_size,
			.frame_size = to->frame_size,
		};
		memcpy(e.id.bytes, to->digest, DEDUP_CHUNK_ID_SIZE);
		(void) store_global_note(s, &e, 1);
	}
}

static void compaction_done(Compaction *c) {
	store_pins_release(c->s, &c->pins);
	free(c->pins.pins);
	store_builder_done(&c->builder);
	store_decoded_done(&c->dec);
	free(c->to);
	free(c->pending);
	free(c->buf);
	free(c->v.items);
}

/*
 * Copies the live chunks of ct into the open container and moves them there
 * (invariant 3).  Returns 0, -EIO if a unit failed its checks (ct is then
 * left alone), or another error.
 */
static int compact_one(DedupStore *s, const CatalogContainer *ct, DedupGcStats *st) {
	Compaction c = {
		.s = s,
		.st = st,
		.level = INT_MIN,
	};
	store_decoded_keys(s, &c.dec);
	int r;

	r = catalog_chunks_foreach_in_container(s->catalog, ct->id, collect_chunk, &c.v);
	if (r < 0 || c.v.n == 0)
		goto out;
	c.to = calloc(c.v.n, sizeof(*c.to));
	c.pending = calloc(c.v.n, sizeof(*c.pending));
	c.buf = malloc(DEDUP_REGION_SIZE_MAX);
	if (!c.to || !c.pending || !c.buf) {
		r = -ENOMEM;
		goto out;
	}
	/* Version 1 frames hold chunks of up to 4 MiB: the builder takes any chunk. */
	r = store_builder_init(&c.builder, s->opts.zstd_level, s->opts.id_key != NULL, s->opts.region_size, DEDUP_CHUNK_SIZE_LIMIT_MIN,
			       DEDUP_CHUNK_SIZE_LIMIT_MAX);
	if (r < 0)
		goto out;
	c.level = s->opts.zstd_level;

	for (size_t k0 = 0; k0 < c.v.n;) {
		size_t k1 = k0 + 1;
		while (k1 < c.v.n && c.v.items[k1].offset == c.v.items[k0].offset)
			k1++;
		r = compaction_unit(&c, ct->id, k0, k1);
		if (r < 0)
			goto out;
		k0 = k1;
	}
	r = compaction_encode(&c);
	if (r >= 0)
		r = compaction_flush(&c);
	if (r >= 0)
		r = store_pins_sync(s, &c.pins);
	if (r < 0)
		goto out;

	r = catalog_begin(s->catalog);
	if (r < 0)
		goto out;
	for (size_t k = 0; r >= 0 && k < c.v.n; k++)
		r = catalog_chunk_move(s->catalog, &c.to[k]);
	if (r >= 0)
		r = store_pins_commit_sizes(s, &c.pins);
	/* Global dedup: other hosts may reference it; the next collection condemns it, emptied (store-global.c, invariant 7). */
	if (r >= 0 && !s->global)
		r = catalog_container_delete(s->catalog, ct->id);
	if (r < 0) {
		catalog_rollback(s->catalog);
		goto out;
	}
	r = catalog_commit(s->catalog);
	if (r >= 0)
		r = catalog_sync(s->catalog);
	if (r < 0)
		goto out;
	store_pins_release(s, &c.pins);

	st->containers_compacted++;
	if (s->global) {
		compaction_publish(s, &c);
		goto out;
	}
	st->bytes_freed += ct->size;
	r = store_unlink_containers(s, &ct->id, 1);
out:
	compaction_done(&c);
	return r;
}

/* Empty ones are phase 1's (invariant 1 forbids deleting their dead chunks here). */
static bool is_candidate(const CatalogContainer *ct, const DedupGcOptions *o) {
	return ct->size > 0 && ct->live_bytes > 0 && (double) ct->live_bytes < o->live_threshold * (double) ct->size;
}

/* Phase 2, beside writers and readers. */
static int compact(DedupStore *s, const DedupGcOptions *o, DedupGcStats *st) {
	StoreContainerList l;
	int r;

	r = store_containers_list(s, &l);
	if (r < 0)
		return r;
	uint64_t total = 0, done = 0;
	for (size_t i = 0; i < l.n; i++)
		if (is_candidate(&l.items[i], o))
			total += l.items[i].live_bytes;
	if (o->progress)
		r = o->progress(0, total, o->userdata);
	for (size_t i = 0; r >= 0 && i < l.n; i++) {
		const CatalogContainer *ct = l.items + i;
		if (o->max_copy_bytes > 0 && st->bytes_copied >= o->max_copy_bytes)
			break;
		if (!is_candidate(ct, o))
			continue;
		if (store_container_is_busy(s, ct->id)) /* invariant 4 */
			continue;
		r = compact_one(s, ct, st);
		if (r == -EIO) {
			st->containers_skipped++;
			r = 0;
		}
		done += ct->live_bytes;
		if (r >= 0 && o->progress)
			r = o->progress(done, total, o->userdata);
	}
	free(l.items);
	return r;
}

/* Recorded under a key other than the one s seals with (invariant 5). */
static bool is_rekey_candidate(DedupStore *s, const CatalogContainer *ct) {
	return ct->keyed && !store_container_is_current(s, ct);
}

int dedup_store_rekey(DedupStore *s, uint64_t max_bytes, int (*progress)(uint64_t done, uint64_t total, void *userdata),
		      void *userdata, uint64_t *ret_rewritten, uint64_t *ret_skipped, uint64_t *ret_left) {
	StoreContainerList l = {};
	DedupGcStats st = {};
	uint64_t total = 0, done = 0, left = 0;
	bool cut = false;
	int r;

	/* Other hosts may reference any container of a store doing global dedup (see dedup_store_gc()). */
	if (s->global)
		return -EOPNOTSUPP;
	pthread_mutex_lock(&s->gc_lock);
	r = store_containers_list(s, &l);
	for (size_t i = 0; r >= 0 && i < l.n; i++)
		if (is_rekey_candidate(s, &l.items[i]))
			total += l.items[i].size;
	if (r >= 0 && progress)
		r = progress(0, total, userdata);
	for (size_t i = 0; r >= 0 && i < l.n; i++) {
		const CatalogContainer *ct = l.items + i;
		if (!is_rekey_candidate(s, ct))
			continue;
		if (max_bytes > 0 && done >= max_bytes) {
			cut = true;
			left++;
			continue;
		}
		if (store_container_is_busy(s, ct->id)) { /* invariant 4 */
			left++;
			continue;
		}
		r = store_container_has_chunks(s, ct->id);
		if (r == 0) {
			left++; /* the collector's: it removes the row with the object */
			continue;
		}
		if (r > 0)
			r = compact_one(s, ct, &st);
		if (r == -EIO) {
			st.containers_skipped++;
			left++;
			r = 0;
		}
		done += ct->size;
		if (r >= 0 && progress)
			r = progress(done, total, userdata);
	}
	/* What a stop or an error left: counted again from the catalog. */
	if (r < 0) {
		left = 0;
		free(l.items);
		l = (StoreContainerList) {};
		if (store_containers_list(s, &l) >= 0)
			for (size_t i = 0; i < l.n; i++)
				left += is_rekey_candidate(s, &l.items[i]);
	}
	pthread_mutex_unlock(&s->gc_lock);
	free(l.items);
	if (ret_rewritten)
		*ret_rewritten = st.containers_compacted;
	if (ret_skipped)
		*ret_skipped = st.containers_skipped;
	if (ret_left)
		*ret_left = left;
	return r < 0 ? r : cut;
}

int dedup_store_gc(DedupStore *s, const DedupGcOptions *o, DedupGcStats *ret) {
	DedupGcOptions opts = o ? *o : DEDUP_GC_OPTIONS_DEFAULT;
	DedupGcStats st = {};
	int r;

	if (!(opts.live_threshold >= 0.0 && opts.live_threshold <= 1.0))
		return -EINVAL;

	pthread_mutex_lock(&s->gc_lock);
	store_exclusive_begin(s);
	r = collect(s, &st);
	store_exclusive_end(s);
	/* Global dedup: what phase 1 condemned, and what the other hosts released. */
	if (r >= 0 && s->global)
		r = store_global_collect(s, &st);
	if (r >= 0 && opts.live_threshold > 0.0)
		r = compact(s, &opts, &st);
	pthread_mutex_unlock(&s->gc_lock);
	/* Where compaction moved chunks to, for the other hosts now (a failure waits for the next publication). */
	if (s->global && st.containers_compacted > 0)
		(void) dedup_store_publish(s);
	/*
	 * The rows deleted free catalog pages: give them back now (best effort,
	 * space only; a reader holding the WAL makes it wait for the next time).
	 */
	(void) catalog_checkpoint(s->catalog);

	if (ret)
		*ret = st;
	return r;
}
