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
 *  3. Compaction copies frames byte for byte after checking each one, fsyncs
 *     the copies, moves the chunks and deletes the old row in one
 *     transaction, makes that transaction durable (catalog_sync()), and only
 *     then unlinks the old object.  A crash at any point leaves the chunks
 *     either all in the old container or all in the new one; the other copy
 *     is garbage.
 *  4. Only containers that are neither open nor pinned are compacted: a
 *     container that is not open never gets new frames, so none can appear
 *     in it while it is being copied.
 *
 * Steps of one collection:
 *
 *   exclusive_begin --> list objects --> delete dead chunks (batches) -->
 *   remove orphan objects --> remove containers without chunks --> rebuild
 *   the filter if full --> exclusive_end --> compact each sparse container
 *   (copy, fsync, move + delete row, sync, unlink)
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "dedup/store-internal.h"

/* Chunks deleted per transaction: keeps the catalog lock short for everyone else. */
#define GC_DELETE_BATCH 1024u

typedef struct IdVec {
	uint64_t *ids;
	size_t n, cap;
} IdVec;

static int idvec_push(IdVec *v, uint64_t id) {
	if (v->n == v->cap) {
		size_t cap = MAX(v->cap * 2, (size_t) 256);
		uint64_t *p = realloc(v->ids, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		v->ids = p;
		v->cap = cap;
	}
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

	if (dedup_bloom_count(s->filter) > dedup_bloom_capacity(s->filter))
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
	if (v->n == v->cap) {
		size_t cap = MAX(v->cap * 2, (size_t) 256);
		CatalogChunk *p = realloc(v->items, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		v->items = p;
		v->cap = cap;
	}
	v->items[v->n++] = *ch;
	return 0;
}

/*
 * Copies the frames of ct's chunks into the open container and moves the
 * chunks there (invariant 3).  Returns 0, -EIO if a frame failed its checks
 * (ct is then left alone), or another error.
 */
static int compact_one(DedupStore *s, const CatalogContainer *ct, DedupGcStats *st) {
	StoreChunkVec v = {};
	StorePins pins = {};
	StoreFrame *frames = NULL;
	uint8_t *buf = NULL;
	uint64_t copied = 0;
	int r;

	r = catalog_chunks_foreach_in_container(s->catalog, ct->id, collect_chunk, &v);
	if (r < 0 || v.n == 0)
		goto out;
	frames = calloc(v.n, sizeof(*frames));
	buf = malloc(STORE_RUN_MAX + DEDUP_FRAME_SIZE_MAX);
	if (!frames || !buf) {
		r = -ENOMEM;
		goto out;
	}

	for (size_t i = 0; i < v.n;) {
		size_t j = i + 1, bytes = v.items[i].frame_size;
		while (j < v.n && bytes + v.items[j].frame_size <= STORE_RUN_MAX)
			bytes += v.items[j++].frame_size;
		for (size_t k = i; k < j; k++) {
			if (v.items[k].frame_size <= DEDUP_FRAME_HEADER_SIZE || v.items[k].frame_size > DEDUP_FRAME_SIZE_MAX) {
				r = -EIO;
				goto out;
			}
		}
		r = store_read_container_frames(s, ct->id, v.items + i, j - i, buf);
		if (r < 0)
			goto out;
		for (size_t k = i; k < j; k++) {
			frames[k] = (StoreFrame) { .frame_size = v.items[k].frame_size, .plain_size = v.items[k].plain_size };
			memcpy(frames[k].id.bytes, v.items[k].digest, DEDUP_CHUNK_ID_SIZE);
		}
		r = store_append(s, buf, frames + i, j - i, &pins);
		if (r < 0)
			goto out;
		copied += bytes;
		i = j;
	}
	r = store_pins_sync(s, &pins);
	if (r < 0)
		goto out;

	r = catalog_begin(s->catalog);
	if (r < 0)
		goto out;
	for (size_t k = 0; r >= 0 && k < v.n; k++)
		r = catalog_chunk_move(s->catalog, v.items[k].id, frames[k].container, frames[k].offset);
	if (r >= 0)
		r = store_pins_commit_sizes(s, &pins);
	if (r >= 0)
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
	store_pins_release(s, &pins);

	st->containers_compacted++;
	st->bytes_copied += copied;
	st->bytes_freed += ct->size;
	r = store_unlink_containers(s, &ct->id, 1);
out:
	store_pins_release(s, &pins);
	free(pins.pins);
	free(frames);
	free(buf);
	free(v.items);
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
	if (r >= 0 && opts.live_threshold > 0.0)
		r = compact(s, &opts, &st);
	pthread_mutex_unlock(&s->gc_lock);

	if (ret)
		*ret = st;
	return r;
}
