/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The chunk store's in-memory parts on their own: the chunk filter (no false
 * negatives, a false-positive rate near the design's at capacity), the
 * locality cache (exact hits, whole-container eviction within its bound,
 * ids listed under two containers) and the chunk cache (byte bound, LRU
 * order, entries surviving eviction while referenced).
 */
#include <errno.h>
#include <stdlib.h>

#include "common/macros.h"
#include "dedup/bloom.h"
#include "dedup/cache.h"
#include "dedup/locality.h"
#include "tests/dedup/dedup-test.h"

static DedupChunkId random_id(TestRng *rng) {
	DedupChunkId id;
	test_rng_fill(rng, id.bytes, sizeof(id.bytes));
	return id;
}

static void test_bloom(void) {
	TestRng rng = { 1 };
	DedupBloom *b;
	uint64_t n = DEDUP_BLOOM_CAPACITY_MIN, fp = 0;

	ASSERT_RET(dedup_bloom_new(DEDUP_BLOOM_CAPACITY_MAX + 1, &b), -EINVAL);
	ASSERT_OK(dedup_bloom_new(10, &b));
	ASSERT(dedup_bloom_capacity(b) == DEDUP_BLOOM_CAPACITY_MIN);
	ASSERT(dedup_bloom_bytes(b) == DEDUP_BLOOM_CAPACITY_MIN * DEDUP_BLOOM_BITS_PER_CHUNK / 8);
	for (uint64_t i = 0; i < n; i++) {
		DedupChunkId id = random_id(&rng);
		dedup_bloom_add(b, &id);
	}
	ASSERT(dedup_bloom_count(b) == n);
	rng.state = 1;
	for (uint64_t i = 0; i < n; i++) {
		DedupChunkId id = random_id(&rng);
		ASSERT(dedup_bloom_maybe_contains(b, &id));
	}
	for (uint64_t i = 0; i < 200000; i++) {
		DedupChunkId id = random_id(&rng);
		fp += dedup_bloom_maybe_contains(b, &id);
	}
	/* 10 bits and 7 probes per id: about 0.8% at capacity. */
	ASSERT(fp < 200000 / 50);
	dedup_bloom_free(b);
}

static void test_locality(void) {
	TestRng rng = { 2 };
	DedupLocality *l;
	DedupLocalityEntry e[300];
	uint64_t chunk;

	ASSERT_RET(dedup_locality_new(0, &l), -EINVAL);
	ASSERT_OK(dedup_locality_new(1000, &l));
	for (size_t i = 0; i < ELEMENTSOF(e); i++)
		e[i] = (DedupLocalityEntry) { .id = random_id(&rng), .chunk = 1000 + i };

	/* Containers 1..3 of 300 ids fill 900 of 1000: all found. */
	for (uint64_t c = 1; c <= 3; c++) {
		for (size_t i = 0; i < ELEMENTSOF(e); i++)
			e[i].id.bytes[31] = (uint8_t) c, e[i].chunk = c * 1000 + i;
		dedup_locality_load(l, c, e, ELEMENTSOF(e));
	}
	for (uint64_t c = 1; c <= 3; c++) {
		ASSERT(dedup_locality_has_container(l, c));
		for (size_t i = 0; i < ELEMENTSOF(e); i++) {
			e[i].id.bytes[31] = (uint8_t) c;
			ASSERT(dedup_locality_find(l, &e[i].id, &chunk) && chunk == c * 1000 + i);
		}
	}
	/* Touch 2 and 3; loading 4 evicts 1, the least recently used. */
	e[0].id.bytes[31] = 2;
	ASSERT(dedup_locality_find(l, &e[0].id, &chunk));
	e[0].id.bytes[31] = 3;
	ASSERT(dedup_locality_find(l, &e[0].id, &chunk));
	for (size_t i = 0; i < ELEMENTSOF(e); i++)
		e[i].id.bytes[31] = 4, e[i].chunk = 4000 + i;
	dedup_locality_load(l, 4, e, ELEMENTSOF(e));
	ASSERT(!dedup_locality_has_container(l, 1));
	ASSERT(dedup_locality_has_container(l, 2) && dedup_locality_has_container(l, 3));
	for (size_t i = 0; i < ELEMENTSOF(e); i++) {
		uint64_t dummy;
		e[i].id.bytes[31] = 1;
		ASSERT(!dedup_locality_find(l, &e[i].id, &dummy));
		e[i].id.bytes[31] = 4;
		ASSERT(dedup_locality_find(l, &e[i].id, &chunk) && chunk == 4000 + i);
	}

	/* An id already held under another container keeps its first entry; reloading replaces. */
	dedup_locality_add(l, 5, &e[0].id, 4000);
	ASSERT(dedup_locality_find(l, &e[0].id, &chunk) && chunk == 4000);
	dedup_locality_load(l, 4, e, 10);
	for (size_t i = 10; i < ELEMENTSOF(e); i++) {
		uint64_t dummy;
		ASSERT(!dedup_locality_find(l, &e[i].id, &dummy));
	}
	/* Too big for the cache: not cached at all. */
	DedupLocalityEntry *big = test_malloc(1001 * sizeof(*big));
	for (size_t i = 0; i < 1001; i++)
		big[i] = (DedupLocalityEntry) { .id = random_id(&rng), .chunk = i + 1 };
	dedup_locality_load(l, 6, big, 1001);
	ASSERT(!dedup_locality_has_container(l, 6));

	/* Many small containers: evicted by count, every lookup still exact. */
	for (uint64_t c = 10; c < 10 + 2 * DEDUP_LOCALITY_CONTAINERS_MAX; c++) {
		big[0].id.bytes[0] = (uint8_t) c;
		big[0].id.bytes[1] = (uint8_t) (c >> 8);
		big[0].chunk = c;
		dedup_locality_add(l, c, &big[0].id, c);
		ASSERT(dedup_locality_find(l, &big[0].id, &chunk) && chunk == c);
	}
	dedup_locality_clear(l);
	ASSERT(!dedup_locality_find(l, &big[0].id, &chunk));
	free(big);
	dedup_locality_free(l);
}

static void test_chunk_cache(void) {
	DedupChunkCache *c;
	ASSERT_OK(dedup_chunk_cache_new(10000, &c));

	for (uint64_t id = 1; id <= 5; id++) {
		DedupCachedChunk *ch = dedup_cached_chunk_new(id, 3000);
		ASSERT(ch);
		memset(ch->data, (int) id, ch->size);
		DedupCachedChunk *in = dedup_chunk_cache_insert(c, ch);
		ASSERT(in == ch);
		dedup_chunk_cache_release(c, in);
		ASSERT(dedup_chunk_cache_bytes(c) <= 10000);
	}
	/* 3 of 3000 bytes fit: 3, 4, 5 remain. */
	ASSERT(!dedup_chunk_cache_contains(c, 1) && !dedup_chunk_cache_contains(c, 2));
	ASSERT(dedup_chunk_cache_contains(c, 3) && dedup_chunk_cache_contains(c, 5));

	/* Holding 4, then using 3 and 5, leaves 4 the oldest; a held entry outlives its eviction. */
	DedupCachedChunk *four = dedup_chunk_cache_get(c, 4);
	DedupCachedChunk *three = dedup_chunk_cache_get(c, 3);
	dedup_chunk_cache_release(c, three);
	dedup_chunk_cache_release(c, dedup_chunk_cache_get(c, 5));
	ASSERT(three && four && four->data[0] == 4);
	DedupCachedChunk *six = dedup_cached_chunk_new(6, 3000);
	six = dedup_chunk_cache_insert(c, six);
	dedup_chunk_cache_release(c, six);
	ASSERT(!dedup_chunk_cache_contains(c, 4) && dedup_chunk_cache_contains(c, 3));
	ASSERT(four->data[2999] == 4);
	dedup_chunk_cache_release(c, four);

	/* A second insert of an id returns the cached one. */
	DedupCachedChunk *dup = dedup_cached_chunk_new(6, 3000);
	DedupCachedChunk *got = dedup_chunk_cache_insert(c, dup);
	ASSERT(got != dup && got->id == 6);
	dedup_chunk_cache_release(c, got);
	/* Bigger than the cache: returned, not cached. */
	DedupCachedChunk *huge = dedup_cached_chunk_new(7, 20000);
	got = dedup_chunk_cache_insert(c, huge);
	ASSERT(got == huge && !dedup_chunk_cache_contains(c, 7));
	dedup_chunk_cache_release(c, got);
	dedup_chunk_cache_free(c);
}

int main(void) {
	test_bloom();
	test_locality();
	test_chunk_cache();
	return 0;
}
