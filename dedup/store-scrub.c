/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store-scrub.c — verifying a tier's stored chunks, and what a sealed file
 * costs (for tierctl's reports).
 *
 * Scrub reads every unit (region, or version 1 frame) holding a chunk the
 * catalog lists, in every container of the tier, and runs the full read
 * check on it: checksums, decompression, the SHA-256 content hash of every
 * chunk in it against its id, and that each chunk is where the catalog
 * says.  A unit that fails damages every chunk the catalog lists in it.  A chunk that fails is retired (catalog_chunk_retire()), so new
 * data is stored afresh instead of deduplicated against it, and its id is
 * reported so the caller can name the files that reference it.
 *
 * Invariants:
 *  1. One container is verified under gc_lock: the collector can neither
 *     compact nor delete it meanwhile, and waits at most for one container.
 *     Preads run under io_lock shared, as every reader's do.
 *  2. Only the committed part of a container is read: appends past it may
 *     be in flight.  A container the catalog no longer knows is skipped.
 *  3. Scrub changes nothing but the digests of chunks that failed their
 *     checks; stopping it at any point leaves the store consistent.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "dedup/frame.h"
#include "dedup/store-internal.h"

static int chunk_push(const CatalogChunk *ch, void *userdata) {
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

static int damaged_push(DedupScrubResult *res, uint64_t id) {
	if (res->n_damaged == res->cap_damaged) {
		size_t cap = MAX(res->cap_damaged * 2, (size_t) 16);
		uint64_t *p = realloc(res->damaged, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		res->damaged = p;
		res->cap_damaged = cap;
	}
	res->damaged[res->n_damaged++] = id;
	return 0;
}

static int chunk_damaged(DedupStore *s, DedupScrubResult *res, const CatalogChunk *ch) {
	int r = catalog_chunk_retire(s->catalog, ch->id);
	if (r < 0 && r != -ENOENT)
		return r;
	dedup_locality_clear(s->locality);
	res->damaged_chunks++;
	return damaged_push(res, ch->id);
}

/* Whether the container's header (and, when full, its footer) name it. */
static bool container_frame_is_sane(DedupStore *s, const CatalogContainer *ct, const char *name) {
	uint8_t buf[DEDUP_CONTAINER_HEADER_SIZE];
	DedupContainerHeader h;
	DedupContainerFooter f;

	pthread_rwlock_rdlock(&s->io_lock);
	int r = dedup_backend_pread_full(s->backend, name, buf, sizeof(buf), 0);
	pthread_rwlock_unlock(&s->io_lock);
	if (r < 0 || dedup_container_header_parse(buf, sizeof(buf), &h) < 0 || h.id != ct->id || h.tier != s->tier)
		return false;
	if (!ct->full)
		return true;
	if (ct->size < DEDUP_CONTAINER_HEADER_SIZE + DEDUP_CONTAINER_FOOTER_SIZE)
		return false;
	pthread_rwlock_rdlock(&s->io_lock);
	r = dedup_backend_pread_full(s->backend, name, buf, DEDUP_CONTAINER_FOOTER_SIZE,
				     ct->size - DEDUP_CONTAINER_FOOTER_SIZE);
	pthread_rwlock_unlock(&s->io_lock);
	return r >= 0 && dedup_container_footer_parse(buf, DEDUP_CONTAINER_FOOTER_SIZE, &f) >= 0 && f.id == ct->id;
}

/* Verifies one container (gc_lock held). */
static int scrub_container(DedupStore *s, uint64_t id, StoreDecoded *dec, uint8_t *buf, DedupScrubResult *res) {
	StoreChunkVec v = {};
	CatalogContainer ct;
	char name[DEDUP_CONTAINER_NAME_MAX];
	int r;

	r = catalog_container_get(s->catalog, id, &ct);
	if (r == -ENOENT)
		return 0; /* invariant 2 */
	if (r < 0)
		return r;
	r = catalog_chunks_foreach_in_container(s->catalog, id, chunk_push, &v);
	if (r < 0)
		goto out;
	dedup_container_name(id, name);
	res->containers++;
	res->bytes += ct.size;

	if (!container_frame_is_sane(s, &ct, name)) {
		res->damaged_containers++;
		for (size_t i = 0; r >= 0 && i < v.n; i++)
			r = chunk_damaged(s, res, &v.items[i]);
		goto out;
	}

	for (size_t i = 0; r >= 0 && i < v.n;) {
		/* The chunks of one unit. */
		size_t j = i + 1;
		while (j < v.n && v.items[j].offset == v.items[i].offset)
			j++;
		uint32_t size = store_chunk_unit_size(&v.items[i]);
		bool region = v.items[i].region_size > 0;
		bool good = size > DEDUP_FRAME_HEADER_SIZE && size <= DEDUP_REGION_SIZE_MAX &&
			    v.items[i].offset + size <= ct.size;
		if (good) {
			pthread_rwlock_rdlock(&s->io_lock);
			good = dedup_backend_pread_full(s->backend, name, buf, size, v.items[i].offset) >= 0;
			pthread_rwlock_unlock(&s->io_lock);
		}
		if (good) {
			int q = store_unit_decode(region, buf, size, id, v.items[i].offset, true, dec);
			/* A key missing: the scrub cannot judge (nor retire) what it sealed. */
			if (q == -ENOMEM || q == -ENOKEY) {
				r = q;
				break;
			}
			good = q >= 0;
		}
		DedupCachedRegion view = { .count = dec->count, .ends = dec->ends, .ids = dec->ids };
		for (size_t k = i; r >= 0 && k < j; k++) {
			const CatalogChunk *ch = &v.items[k];
			res->chunks++;
			if (!good || store_chunk_unit_size(ch) != size || (ch->region_size > 0) != region ||
			    dedup_cached_region_find(&view, ch->region_offset, ch->plain_size,
						     (const DedupChunkId *) ch->digest) < 0)
				r = chunk_damaged(s, res, ch);
		}
		i = j;
	}
out:
	free(v.items);
	return r;
}

int dedup_store_scrub(DedupStore *s, int (*progress)(const DedupScrubResult *res, uint64_t total, void *userdata),
		      void *userdata, DedupScrubResult *ret) {
	_cleanup_free_ uint8_t *buf = NULL;
	StoreDecoded dec = {};
	StoreContainerList l = {};
	DedupScrubResult res = {};
	store_decoded_keys(s, &dec);
	uint64_t total = 0;
	int r;

	*ret = (DedupScrubResult) {};
	buf = malloc(DEDUP_REGION_SIZE_MAX);
	if (!buf)
		return -ENOMEM;
	r = store_containers_list(s, &l);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < l.n; i++)
		total += l.items[i].size;

	for (size_t i = 0; r >= 0 && i < l.n; i++) {
		pthread_mutex_lock(&s->gc_lock);
		r = scrub_container(s, l.items[i].id, &dec, buf, &res);
		pthread_mutex_unlock(&s->gc_lock);
		/* Containers appended since the list was made grow the total as we go. */
		total = MAX(total, res.bytes);
		if (r >= 0 && progress)
			r = progress(&res, total, userdata);
	}
out:
	free(l.items);
	store_decoded_done(&dec);
	*ret = res;
	return r;
}

void dedup_scrub_result_done(DedupScrubResult *res) {
	free(res->damaged);
	*res = (DedupScrubResult) {};
}
