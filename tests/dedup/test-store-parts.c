/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The chunk store's in-memory parts on their own: the chunk filter (no false
 * negatives, a false-positive rate near the design's at capacity), the
 * locality cache (exact hits, whole-container eviction within its bound,
 * ids listed under two containers) and the region cache (byte bound, LRU
 * order, entries surviving eviction while referenced, claims: one load per
 * unit whatever the number of threads asking, ended by their claimer only).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

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
	/* 10 bits and 7 probes per id, in one 512-bit block: about 1% at capacity. */
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

static DedupCachedRegion *region_new(DedupRegionCache *c, uint64_t container, uint64_t offset, uint32_t count,
				     uint32_t size) {
	DedupCachedRegion *r = dedup_cached_region_new(c, container, offset, count, size);
	ASSERT(r);
	memset(r->data, (int) offset, size);
	for (uint32_t i = 0; i < count; i++) {
		r->ends[i] = size / count * (i + 1);
		memset(r->ids[i].bytes, (int) i + 1, sizeof(r->ids[i].bytes));
	}
	r->ends[count - 1] = size;
	return r;
}

static bool cached(DedupRegionCache *c, uint64_t container, uint64_t offset) {
	DedupCachedRegion *r;
	if (dedup_region_cache_lookup(c, container, offset, NULL, &r) != DEDUP_REGION_HIT)
		return false;
	dedup_region_cache_release(c, r);
	return true;
}

static void test_region_cache(void) {
	size_t cost = dedup_cached_region_cost(4, 3000);
	DedupRegionCacheStats st;
	DedupRegionCache *c;
	DedupRegionClaim *claim, *other;
	DedupCachedRegion *r;
	ASSERT_OK(dedup_region_cache_new(3 * cost + cost / 2, &c));

	for (uint64_t off = 1; off <= 5; off++) {
		ASSERT(dedup_region_cache_lookup(c, 7, off, &claim, &r) == DEDUP_REGION_CLAIMED && claim && !r);
		/* Claimed: another lookup is told to wait, not to load it too. */
		ASSERT(dedup_region_cache_lookup(c, 7, off, &other, &r) == DEDUP_REGION_BUSY && !other);
		r = dedup_region_cache_publish(c, region_new(c, 7, off, 4, 3000), claim);
		dedup_region_cache_release(c, r);
		dedup_region_cache_stats(c, &st);
		ASSERT(st.bytes <= st.max_bytes);
	}
	/* 3 of them fit: 3, 4, 5 remain; the same offset in another container is another unit. */
	ASSERT(!cached(c, 7, 1) && !cached(c, 7, 2) && cached(c, 7, 3) && cached(c, 7, 5));
	ASSERT(dedup_region_cache_lookup(c, 8, 5, NULL, &r) == DEDUP_REGION_MISS);

	/* Holding 4, then using 3 and 5, leaves 4 the oldest; a held entry outlives its eviction. */
	DedupCachedRegion *four, *three;
	ASSERT(dedup_region_cache_lookup(c, 7, 4, NULL, &four) == DEDUP_REGION_HIT);
	ASSERT(dedup_region_cache_lookup(c, 7, 3, NULL, &three) == DEDUP_REGION_HIT);
	dedup_region_cache_release(c, three);
	ASSERT(cached(c, 7, 5));
	dedup_region_cache_release(c, dedup_region_cache_publish(c, region_new(c, 7, 6, 4, 3000), NULL));
	ASSERT(!cached(c, 7, 4) && cached(c, 7, 3) && cached(c, 7, 6));
	ASSERT(four->data[2999] == 4 && four->ends[3] == 3000);
	dedup_region_cache_release(c, four);

	/* The chunks of an entry: by offset in the region, length and id. */
	ASSERT(dedup_region_cache_lookup(c, 7, 6, NULL, &r) == DEDUP_REGION_HIT);
	DedupChunkId id2;
	memset(id2.bytes, 2, sizeof(id2.bytes));
	ASSERT(dedup_cached_region_find(r, 750, 750, &id2) == 1);
	ASSERT(dedup_cached_region_find(r, 750, 751, &id2) == -1);
	ASSERT(dedup_cached_region_find(r, 751, 749, &id2) == -1);
	ASSERT(dedup_cached_region_find(r, 0, 750, &id2) == -1);
	ASSERT(dedup_cached_region_find(r, 3000, 1, &id2) == -1);
	dedup_region_cache_release(c, r);

	/* An abandoned claim can be claimed again; bigger than the cache: handed over, not cached. */
	ASSERT(dedup_region_cache_lookup(c, 9, 1, &claim, &r) == DEDUP_REGION_CLAIMED);
	dedup_region_cache_abandon(c, claim);
	ASSERT(dedup_region_cache_wait(c, 9, 1, &claim, &r) == DEDUP_REGION_CLAIMED);
	DedupCachedRegion *huge = region_new(c, 9, 1, 1, 20000);
	ASSERT(dedup_region_cache_publish(c, huge, claim) == huge && !cached(c, 9, 1));
	dedup_region_cache_release(c, huge);
	dedup_region_cache_free(c);
}

/*
 * A claim is ended by its claimer only: a reader loading a unit without a
 * claim (a direct read, or no memory for one) ends no other thread's claim
 * on it, neither by publishing its copy nor by giving up.
 */
static void test_region_cache_claim_owner(void) {
	DedupRegionClaim *a, *b;
	DedupRegionCache *c;
	DedupCachedRegion *r;
	ASSERT_OK(dedup_region_cache_new(1 << 20, &c));

	/* B misses without claiming; A claims it since, and C waits for A. */
	ASSERT(dedup_region_cache_lookup(c, 10, 1, NULL, &r) == DEDUP_REGION_MISS && !r);
	ASSERT(dedup_region_cache_lookup(c, 10, 1, &a, &r) == DEDUP_REGION_CLAIMED && a);
	DedupCachedRegion *copy_b = region_new(c, 10, 1, 2, 1000);
	copy_b->data[0] = 0xbb;
	/* B's copy is handed back, not cached over A's claim, which still holds C off. */
	ASSERT(dedup_region_cache_publish(c, copy_b, NULL) == copy_b && copy_b->data[0] == 0xbb);
	ASSERT(dedup_region_cache_lookup(c, 10, 1, &b, &r) == DEDUP_REGION_BUSY && !b && !r);
	dedup_region_cache_abandon(c, NULL);
	ASSERT(dedup_region_cache_lookup(c, 10, 1, &b, &r) == DEDUP_REGION_BUSY && !b && !r);
	/* A's copy is the one cached, and C finds it. */
	DedupCachedRegion *copy_a = region_new(c, 10, 1, 2, 1000);
	dedup_region_cache_release(c, dedup_region_cache_publish(c, copy_a, a));
	ASSERT(dedup_region_cache_wait(c, 10, 1, &b, &r) == DEDUP_REGION_HIT && r == copy_a && !b);
	ASSERT(r->data[0] == 1);
	dedup_region_cache_release(c, r);
	dedup_region_cache_release(c, copy_b);

	/* With nothing in the way, a copy loaded without a claim is cached. */
	ASSERT(dedup_region_cache_lookup(c, 10, 2, NULL, &r) == DEDUP_REGION_MISS);
	dedup_region_cache_release(c, dedup_region_cache_publish(c, region_new(c, 10, 2, 2, 1000), NULL));
	ASSERT(cached(c, 10, 2));
	dedup_region_cache_free(c);
}

typedef struct Loader {
	DedupRegionCache *c;
	unsigned *loads;
	pthread_mutex_t *lock;
	uint64_t units;
} Loader;

/* Every thread reads every unit; whoever claims one loads it (slowly), the others wait for it. */
static void *loader_main(void *userdata) {
	Loader *l = userdata;
	for (uint64_t off = 1; off <= l->units; off++) {
		DedupCachedRegion *r;
		DedupRegionClaim *claim;
		DedupRegionLookup got = dedup_region_cache_lookup(l->c, 1, off, &claim, &r);
		if (got == DEDUP_REGION_BUSY)
			got = dedup_region_cache_wait(l->c, 1, off, &claim, &r);
		if (got == DEDUP_REGION_CLAIMED) {
			pthread_mutex_lock(l->lock);
			l->loads[off]++;
			pthread_mutex_unlock(l->lock);
			usleep(200);
			r = dedup_region_cache_publish(l->c, region_new(l->c, 1, off, 2, 1000), claim);
		}
		ASSERT(r && r->offset == off && r->data[999] == (uint8_t) off);
		dedup_region_cache_release(l->c, r);
	}
	return NULL;
}

static void test_region_cache_threads(void) {
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	unsigned loads[65] = {};
	pthread_t t[4];
	DedupRegionCache *c;
	ASSERT_OK(dedup_region_cache_new(1 << 20, &c));
	Loader l = { .c = c, .loads = loads, .lock = &lock, .units = 64 };
	for (size_t i = 0; i < ELEMENTSOF(t); i++)
		ASSERT(pthread_create(&t[i], NULL, loader_main, &l) == 0);
	for (size_t i = 0; i < ELEMENTSOF(t); i++)
		pthread_join(t[i], NULL);
	/* Each unit decoded once, whatever the number of threads that needed it. */
	for (uint64_t off = 1; off <= l.units; off++)
		ASSERT(loads[off] == 1);
	DedupRegionCacheStats st;
	dedup_region_cache_stats(c, &st);
	ASSERT(st.loads == l.units && st.entries == l.units && st.hits + st.misses >= 4 * l.units);
	dedup_region_cache_free(c);
}

/* Entries let go of are kept, up to an eighth of the bound, and new entries of about their size reuse them. */
static void test_region_cache_spares(void) {
	size_t cost = dedup_cached_region_cost(4, 100000);
	DedupRegionCacheStats st;
	DedupRegionCache *c;
	ASSERT_OK(dedup_region_cache_new(16 * cost, &c));

	for (uint64_t off = 1; off <= 16; off++)
		dedup_region_cache_release(c, dedup_region_cache_publish(c, region_new(c, 7, off, 4, 100000), NULL));
	dedup_region_cache_stats(c, &st);
	ASSERT(st.entries == 16 && st.spare_bytes == 0 && st.reused == 0);
	/* The 17th evicts the oldest, which becomes a spare; the 18th is made in it. */
	DedupCachedRegion *one;
	ASSERT(dedup_region_cache_lookup(c, 7, 1, NULL, &one) == DEDUP_REGION_HIT);
	dedup_region_cache_release(c, one);
	dedup_region_cache_release(c, dedup_region_cache_publish(c, region_new(c, 7, 17, 4, 100000), NULL));
	dedup_region_cache_stats(c, &st);
	ASSERT(st.spare_bytes > 0 && st.reused == 0 && !cached(c, 7, 2));
	DedupCachedRegion *r = region_new(c, 7, 18, 4, 99000);
	dedup_region_cache_stats(c, &st);
	ASSERT(st.reused == 1 && st.spare_bytes == 0);
	ASSERT(dedup_region_cache_publish(c, r, NULL) == r && r->data[98999] == 18 && r->ends[3] == 99000);
	dedup_region_cache_release(c, r);
	ASSERT(cached(c, 7, 18) && cached(c, 7, 1) && !cached(c, 7, 3));

	/* (Publishing 18 evicted 3: a spare, taken by the next entry.)  Too small for a spare: a new allocation. */
	dedup_region_cache_release(c, region_new(c, 8, 1, 4, 100000));
	dedup_region_cache_stats(c, &st);
	ASSERT(st.reused == 2 && st.spare_bytes > 0);
	dedup_region_cache_release(c, region_new(c, 8, 2, 1, 1000));
	dedup_region_cache_stats(c, &st);
	ASSERT(st.reused == 2 && st.spare_bytes > 0);

	/* Never more than an eighth of the bound kept: the third of these is freed. */
	dedup_region_cache_release(c, region_new(c, 8, 3, 4, 100000));
	dedup_region_cache_release(c, region_new(c, 8, 4, 4, 100000));
	DedupCachedRegion *a = region_new(c, 8, 5, 4, 100000), *b = region_new(c, 8, 6, 4, 100000);
	DedupCachedRegion *x = region_new(c, 8, 7, 4, 100000);
	dedup_region_cache_release(c, a);
	dedup_region_cache_release(c, b);
	dedup_region_cache_release(c, x);
	dedup_region_cache_stats(c, &st);
	ASSERT(st.spare_bytes > 0 && st.spare_bytes <= st.max_bytes / 8 && st.bytes <= st.max_bytes);
	dedup_region_cache_free(c);
}

typedef struct Churner {
	DedupRegionCache *c;
	unsigned seed;
} Churner;

/* Units of many sizes through a cache of a few entries: evicted entries are reused while others read theirs. */
static void *churner_main(void *userdata) {
	Churner *ch = userdata;
	TestRng rng = { ch->seed };
	for (unsigned k = 0; k < 3000; k++) {
		uint64_t off = 1 + test_rng_next(&rng) % 40;
		uint32_t size = 20000 + (uint32_t) (off * 500);
		DedupCachedRegion *r;
		DedupRegionClaim *claim;
		DedupRegionLookup got = dedup_region_cache_lookup(ch->c, 1, off, &claim, &r);
		if (got == DEDUP_REGION_BUSY)
			got = dedup_region_cache_wait(ch->c, 1, off, &claim, &r);
		if (got == DEDUP_REGION_CLAIMED)
			r = dedup_region_cache_publish(ch->c, region_new(ch->c, 1, off, 2, size), claim);
		ASSERT(r && r->offset == off && r->plain_size == size && r->ends[1] == size);
		for (uint32_t i = 0; i < size; i += 997)
			ASSERT(r->data[i] == (uint8_t) off);
		ASSERT(r->data[size - 1] == (uint8_t) off);
		dedup_region_cache_release(ch->c, r);
	}
	return NULL;
}

static void test_region_cache_spares_threads(void) {
	DedupRegionCache *c;
	pthread_t t[4];
	Churner ch[ELEMENTSOF(t)];
	ASSERT_OK(dedup_region_cache_new(8 * dedup_cached_region_cost(2, 40000), &c));
	for (size_t i = 0; i < ELEMENTSOF(t); i++) {
		ch[i] = (Churner) { .c = c, .seed = (unsigned) i + 1 };
		ASSERT(pthread_create(&t[i], NULL, churner_main, ch + i) == 0);
	}
	for (size_t i = 0; i < ELEMENTSOF(t); i++)
		pthread_join(t[i], NULL);
	DedupRegionCacheStats st;
	dedup_region_cache_stats(c, &st);
	ASSERT(st.reused > 0 && st.bytes <= st.max_bytes && st.spare_bytes <= st.max_bytes / 8);
	dedup_region_cache_free(c);
}

int main(void) {
	test_bloom();
	test_locality();
	test_region_cache();
	test_region_cache_claim_owner();
	test_region_cache_threads();
	test_region_cache_spares();
	test_region_cache_spares_threads();
	return 0;
}
