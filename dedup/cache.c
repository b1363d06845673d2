/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Region cache: a chained hash on (container, offset) plus an LRU list, and
 * claim placeholders so that a unit is loaded by one thread at a time.
 *
 * Invariants (all under c->lock):
 *  1. A filled entry is in the hash and the LRU list iff `cached`; `bytes`
 *     is the sum of the costs of cached entries and stays <= max_bytes after
 *     every publish.
 *  2. A claim is a placeholder in the hash (`loading`, never in the LRU,
 *     costing nothing), at most one per key, and no filled entry has its
 *     key meanwhile; only its claimer removes it, by publish or abandon
 *     given the claim itself (never looked up by key, which would end
 *     another thread's claim for a caller loading without one), and that
 *     wakes every waiter.
 *  3. A filled entry is let go exactly when it is not cached and its last
 *     reference is released (freed, or kept as a spare); a placeholder is
 *     freed when its claim ends.
 *  4. Spares are entries nobody can reach any more, kept so that the next
 *     new entry reuses memory already faulted in instead of fresh pages
 *     (a page fault per 4 KiB is most of what a new entry costs beside its
 *     decompression); they hold at most spare_max bytes.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "common/macros.h"
#include "dedup/cache.h"

/* What an entry costs beyond its plain bytes and table (the struct and the allocator's share). */
#define ENTRY_OVERHEAD 128u
/* Spares kept: this fraction of the cache's bound. */
#define SPARE_DIVISOR 8u

/* A claim is its placeholder, wrapped so that it can't be handed where an entry is expected, or the reverse. */
struct DedupRegionClaim {
	DedupCachedRegion placeholder;
};

struct DedupRegionCache {
	pthread_mutex_t lock;
	pthread_cond_t loaded; /* a claim ended */
	size_t max_bytes;
	size_t bytes;
	size_t n_buckets; /* power of two */
	DedupCachedRegion **buckets;
	DedupCachedRegion *lru_head, *lru_tail; /* head = most recently used */
	DedupCachedRegion *spare;               /* invariant 4: linked by hash_next */
	size_t spare_bytes, spare_max;
	uint64_t entries, hits, misses, loads, waits, reused;
};

int dedup_region_cache_new(size_t max_bytes, DedupRegionCache **ret) {
	DedupRegionCache *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	/* About one bucket per 32 KiB of data: short chains for regions of 64 KiB and up, and for frames. */
	size_t n = 64;
	while (n < max_bytes / 32768 && n < (SIZE_MAX / 2) / sizeof(void *))
		n *= 2;
	c->buckets = calloc(n, sizeof(*c->buckets));
	if (!c->buckets) {
		free(c);
		return -ENOMEM;
	}
	c->n_buckets = n;
	c->max_bytes = max_bytes;
	c->spare_max = max_bytes / SPARE_DIVISOR;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->loaded, NULL);
	*ret = c;
	return 0;
}

DedupRegionCache *dedup_region_cache_free(DedupRegionCache *c) {
	if (!c)
		return NULL;
	for (DedupCachedRegion *r = c->lru_head, *next; r; r = next) {
		next = r->lru_next;
		free(r);
	}
	for (DedupCachedRegion *r = c->spare, *next; r; r = next) {
		next = r->hash_next;
		free(r);
	}
	free(c->buckets);
	pthread_cond_destroy(&c->loaded);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return NULL;
}

size_t dedup_cached_region_cost(uint32_t count, uint32_t plain_size) {
	return (size_t) plain_size + (size_t) count * (sizeof(uint32_t) + sizeof(DedupChunkId)) + ENTRY_OVERHEAD;
}

/* Under the lock: keeps r (unreachable now) as a spare; returns it if it must be freed instead. */
static DedupCachedRegion *spare_put(DedupRegionCache *c, DedupCachedRegion *r) {
	if (c->spare_bytes + r->alloc > c->spare_max)
		return r;
	r->hash_next = c->spare;
	c->spare = r;
	c->spare_bytes += r->alloc;
	return NULL;
}

/*
 * Under the lock: a spare of at least size bytes and at most a quarter
 * more (the next region of a file is about as large as the last), taken
 * off the list; or NULL.
 */
static DedupCachedRegion *spare_take(DedupRegionCache *c, size_t size) {
	for (DedupCachedRegion **p = &c->spare; *p; p = &(*p)->hash_next) {
		DedupCachedRegion *r = *p;
		if (r->alloc < size || r->alloc - size > size / 4)
			continue;
		*p = r->hash_next;
		c->spare_bytes -= r->alloc;
		c->reused++;
		return r;
	}
	return NULL;
}

DedupCachedRegion *dedup_cached_region_new(DedupRegionCache *c, uint64_t container, uint64_t offset, uint32_t count,
					   uint32_t plain_size) {
	/* The struct, then ids, ends and data in one allocation (ids first: they need the alignment). */
	size_t ids = (size_t) count * sizeof(DedupChunkId), ends = (size_t) count * sizeof(uint32_t);
	size_t size = sizeof(DedupCachedRegion) + ids + ends + plain_size;

	pthread_mutex_lock(&c->lock);
	DedupCachedRegion *r = spare_take(c, size);
	pthread_mutex_unlock(&c->lock);
	if (r)
		size = r->alloc;
	else {
		r = malloc(size);
		if (!r)
			return NULL;
	}
	uint8_t *p = (uint8_t *) (r + 1);
	*r = (DedupCachedRegion) {
		.container = container,
		.offset = offset,
		.plain_size = plain_size,
		.count = count,
		.ids = (DedupChunkId *) p,
		.ends = (uint32_t *) (p + ids),
		.data = p + ids + ends,
		.refs = 1,
		.alloc = size,
	};
	return r;
}

/* What a filled entry counts for in bytes: as dedup_cached_region_cost(), with the slack of a reused spare. */
static size_t entry_cost(const DedupCachedRegion *r) {
	return r->alloc - sizeof(DedupCachedRegion) + ENTRY_OVERHEAD;
}

static size_t bucket_of(const DedupRegionCache *c, uint64_t container, uint64_t offset) {
	uint64_t h = container * UINT64_C(0x9e3779b97f4a7c15) ^ offset;
	h ^= h >> 33;
	h *= UINT64_C(0xff51afd7ed558ccd);
	h ^= h >> 33;
	return (size_t) (h & (c->n_buckets - 1));
}

static DedupCachedRegion *find(DedupRegionCache *c, uint64_t container, uint64_t offset) {
	for (DedupCachedRegion *r = c->buckets[bucket_of(c, container, offset)]; r; r = r->hash_next)
		if (r->container == container && r->offset == offset)
			return r;
	return NULL;
}

static void hash_remove(DedupRegionCache *c, DedupCachedRegion *r) {
	DedupCachedRegion **p = &c->buckets[bucket_of(c, r->container, r->offset)];
	while (*p != r)
		p = &(*p)->hash_next;
	*p = r->hash_next;
	r->hash_next = NULL;
}

static void hash_insert(DedupRegionCache *c, DedupCachedRegion *r) {
	size_t b = bucket_of(c, r->container, r->offset);
	r->hash_next = c->buckets[b];
	c->buckets[b] = r;
}

static void lru_unlink(DedupRegionCache *c, DedupCachedRegion *r) {
	if (r->lru_prev)
		r->lru_prev->lru_next = r->lru_next;
	else
		c->lru_head = r->lru_next;
	if (r->lru_next)
		r->lru_next->lru_prev = r->lru_prev;
	else
		c->lru_tail = r->lru_prev;
	r->lru_prev = r->lru_next = NULL;
}

static void lru_push_front(DedupRegionCache *c, DedupCachedRegion *r) {
	r->lru_prev = NULL;
	r->lru_next = c->lru_head;
	if (c->lru_head)
		c->lru_head->lru_prev = r;
	else
		c->lru_tail = r;
	c->lru_head = r;
}

/* Unlinks a cached entry; returns it if it must be freed now (no references). */
static DedupCachedRegion *uncache(DedupRegionCache *c, DedupCachedRegion *r) {
	hash_remove(c, r);
	lru_unlink(c, r);
	r->cached = false;
	c->bytes -= entry_cost(r);
	c->entries--;
	return r->refs == 0 ? r : NULL;
}

/* Under the lock: the hit, a new claim (with ret_claim), or what is in the way. */
static DedupRegionLookup lookup_locked(DedupRegionCache *c, uint64_t container, uint64_t offset,
				       DedupRegionClaim **ret_claim, DedupCachedRegion **ret) {
	DedupCachedRegion *r = find(c, container, offset);
	*ret = NULL;
	if (ret_claim)
		*ret_claim = NULL;
	if (r && r->loading)
		return DEDUP_REGION_BUSY;
	if (r) {
		r->refs++;
		lru_unlink(c, r);
		lru_push_front(c, r);
		c->hits++;
		*ret = r;
		return DEDUP_REGION_HIT;
	}
	c->misses++;
	if (!ret_claim)
		return DEDUP_REGION_MISS;
	DedupRegionClaim *claim = malloc(sizeof(*claim));
	if (!claim)
		/* Not claiming only costs a possible second load of the unit. */
		return DEDUP_REGION_MISS;
	claim->placeholder = (DedupCachedRegion) { .container = container, .offset = offset, .loading = true };
	hash_insert(c, &claim->placeholder);
	*ret_claim = claim;
	return DEDUP_REGION_CLAIMED;
}

DedupRegionLookup dedup_region_cache_lookup(DedupRegionCache *c, uint64_t container, uint64_t offset,
					    DedupRegionClaim **ret_claim, DedupCachedRegion **ret) {
	pthread_mutex_lock(&c->lock);
	DedupRegionLookup l = lookup_locked(c, container, offset, ret_claim, ret);
	pthread_mutex_unlock(&c->lock);
	return l;
}

DedupRegionLookup dedup_region_cache_wait(DedupRegionCache *c, uint64_t container, uint64_t offset,
					  DedupRegionClaim **ret_claim, DedupCachedRegion **ret) {
	DedupRegionLookup l;
	bool waited = false;

	pthread_mutex_lock(&c->lock);
	while ((l = lookup_locked(c, container, offset, ret_claim, ret)) == DEDUP_REGION_BUSY) {
		if (!waited)
			c->waits++;
		waited = true;
		pthread_cond_wait(&c->loaded, &c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return l;
}

/* Under the lock: ends the caller's claim (invariant 2), if it holds one. */
static void unclaim(DedupRegionCache *c, DedupRegionClaim *claim) {
	if (!claim)
		return;
	hash_remove(c, &claim->placeholder);
	pthread_cond_broadcast(&c->loaded);
}

DedupCachedRegion *dedup_region_cache_publish(DedupRegionCache *c, DedupCachedRegion *r, DedupRegionClaim *claim) {
	DedupCachedRegion *victims = NULL;
	size_t cost = entry_cost(r);

	assert(!claim || (claim->placeholder.container == r->container && claim->placeholder.offset == r->offset));
	pthread_mutex_lock(&c->lock);
	unclaim(c, claim);
	c->loads++;
	/*
	 * Without a claim, the key may be another thread's claim (its claimer's
	 * entry goes there: invariant 2) or an entry published meanwhile (a
	 * load without a claim raced another): either way the first copy stays.
	 */
	if (cost <= c->max_bytes && !find(c, r->container, r->offset)) {
		while (c->bytes + cost > c->max_bytes && c->lru_tail) {
			DedupCachedRegion *dead = uncache(c, c->lru_tail);
			if (dead && (dead = spare_put(c, dead))) {
				dead->hash_next = victims;
				victims = dead;
			}
		}
		hash_insert(c, r);
		lru_push_front(c, r);
		r->cached = true;
		c->bytes += cost;
		c->entries++;
	}
	pthread_mutex_unlock(&c->lock);

	free(claim);
	while (victims) {
		DedupCachedRegion *next = victims->hash_next;
		free(victims);
		victims = next;
	}
	return r;
}

void dedup_region_cache_abandon(DedupRegionCache *c, DedupRegionClaim *claim) {
	if (!claim)
		return;
	pthread_mutex_lock(&c->lock);
	unclaim(c, claim);
	pthread_mutex_unlock(&c->lock);
	free(claim);
}

void dedup_region_cache_release(DedupRegionCache *c, DedupCachedRegion *r) {
	if (!r)
		return;
	pthread_mutex_lock(&c->lock);
	DedupCachedRegion *dead = --r->refs == 0 && !r->cached ? spare_put(c, r) : NULL;
	pthread_mutex_unlock(&c->lock);
	free(dead);
}

void dedup_region_cache_stats(DedupRegionCache *c, DedupRegionCacheStats *ret) {
	pthread_mutex_lock(&c->lock);
	*ret = (DedupRegionCacheStats) {
		.bytes = c->bytes,
		.max_bytes = c->max_bytes,
		.entries = c->entries,
		.hits = c->hits,
		.misses = c->misses,
		.loads = c->loads,
		.waits = c->waits,
		.reused = c->reused,
		.spare_bytes = c->spare_bytes,
	};
	pthread_mutex_unlock(&c->lock);
}

int dedup_cached_region_find(const DedupCachedRegion *r, uint32_t region_offset, uint32_t length,
			     const DedupChunkId *id) {
	/* The first chunk whose end lies past region_offset starts at or before it. */
	size_t lo = 0, hi = r->count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r->ends[mid] <= region_offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == r->count)
		return -1;
	uint32_t start = lo == 0 ? 0 : r->ends[lo - 1];
	if (start != region_offset || r->ends[lo] - start != length || !dedup_chunk_id_equal(&r->ids[lo], id))
		return -1;
	return (int) lo;
}
