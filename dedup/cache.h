/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The region cache: decompressed, checked storage units (compression
 * regions, or chunk frames of version 1 containers, which are units of one
 * chunk) by where they are stored (container id, offset), least recently
 * used evicted first, bounded by the bytes it holds (plain bytes and
 * tables).  Container ids are never reused and a container's bytes never
 * change, so an entry can never go stale: a unit the collector moved is
 * simply looked up at its new place.
 *
 * So that a sequential reader, or several read-ahead threads, decompress
 * each unit once, a miss may *claim* the unit: the claimer loads it and
 * publishes it (or abandons the claim), and other threads asking for it
 * meanwhile wait for that instead of loading it a second time.  A thread
 * must not wait while it holds claims of its own (load yours first).  A
 * claim is ended only by the DedupRegionClaim its claimer was handed, never
 * by the unit's key: a thread loading a unit without a claim (it asked for
 * none, or there was no memory for one) can't end another thread's claim on
 * it.
 *
 * Entries are reference counted: a reader holds a reference while it copies
 * out of one, and eviction only unlinks an entry, which is let go of when
 * its last reference goes: kept as a spare for the next new entry of about
 * its size (up to an eighth of the bound in all), else freed.  All calls are thread-safe (one internal mutex and
 * condition variable, a leaf lock: nothing else is taken while it is held).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/fingerprint.h"

typedef struct DedupRegionCache DedupRegionCache;

typedef struct DedupCachedRegion {
	uint64_t container;
	uint64_t offset;
	uint32_t plain_size; /* bytes in data */
	uint32_t count;      /* chunks: entries of ends and ids */
	uint32_t *ends;      /* ends[i]: where chunk i ends in data (starts at ends[i - 1], or 0) */
	DedupChunkId *ids;
	/* Private to cache.c: */
	unsigned refs;
	bool cached, loading;
	size_t alloc; /* bytes of its allocation, 0 for a claim's placeholder */
	struct DedupCachedRegion *hash_next, *lru_prev, *lru_next;
	uint8_t *data; /* plain_size bytes, in the same allocation */
} DedupCachedRegion;

typedef struct DedupRegionCacheStats {
	size_t bytes;      /* held by cached entries now */
	size_t max_bytes;  /* the bound */
	uint64_t entries;  /* cached now */
	uint64_t hits;     /* lookups answered from the cache */
	uint64_t misses;   /* lookups that were not */
	uint64_t loads;    /* units published (decompressed and checked) */
	uint64_t waits;    /* lookups that waited for another thread's load */
	uint64_t reused;   /* new entries made in the memory of an old one (no fresh pages) */
	size_t spare_bytes; /* kept for reuse now, beside bytes: at most max_bytes / 8 */
} DedupRegionCacheStats;

/* Returns: 0, -ENOMEM. */
int dedup_region_cache_new(size_t max_bytes, DedupRegionCache **ret);
/* Every reference and claim must have been released.  Accepts NULL; returns NULL. */
DedupRegionCache *dedup_region_cache_free(DedupRegionCache *c);

/* Bytes an entry of count chunks and plain_size bytes accounts for. */
size_t dedup_cached_region_cost(uint32_t count, uint32_t plain_size);

/*
 * A new entry for the unit at (container, offset) with room for count
 * chunks and plain_size bytes, one reference held by the caller, to fill
 * (data, ends, ids) before dedup_region_cache_publish(); NULL on OOM.
 * Made in the memory of an entry c let go of, when one of about that size
 * is kept (at most an eighth of c's bound is kept so).
 */
DedupCachedRegion *dedup_cached_region_new(DedupRegionCache *c, uint64_t container, uint64_t offset, uint32_t count,
					   uint32_t plain_size);

/* A claim on a unit, held by the thread that made it until it publishes or abandons it; opaque. */
typedef struct DedupRegionClaim DedupRegionClaim;

typedef enum DedupRegionLookup {
	DEDUP_REGION_HIT,     /* *ret holds the entry, with a reference */
	DEDUP_REGION_CLAIMED, /* not cached, *ret_claim is the caller's: it loads it, then publishes or abandons */
	DEDUP_REGION_BUSY,    /* another thread is loading it: wait (holding no claim) or skip it */
	DEDUP_REGION_MISS,    /* not cached and not claimed (none asked for, or no memory for one): load it
			       * without a claim if it is wanted (publish with none), at worst a second time */
} DedupRegionLookup;

/*
 * Looks up the unit at (container, offset).  With ret_claim, a miss claims
 * it (CLAIMED) unless there is no memory for the claim (MISS); *ret_claim
 * is the claim or NULL.  Without, a miss is MISS.  Can't fail.
 */
DedupRegionLookup dedup_region_cache_lookup(DedupRegionCache *c, uint64_t container, uint64_t offset,
					    DedupRegionClaim **ret_claim, DedupCachedRegion **ret);

/*
 * Waits until no thread is loading the unit, then looks it up as
 * dedup_region_cache_lookup() with ret_claim: HIT, CLAIMED (the loader gave
 * up, or it was evicted since: load it yourself), or MISS (so, but no
 * memory for a claim: load it without one).  The caller must hold no claim.
 * Can't fail.
 */
DedupRegionLookup dedup_region_cache_wait(DedupRegionCache *c, uint64_t container, uint64_t offset,
					  DedupRegionClaim **ret_claim, DedupCachedRegion **ret);

/*
 * Inserts the filled entry r (made by dedup_cached_region_new(), the
 * caller's reference kept) in place of claim, the caller's claim on its
 * unit, and wakes the threads waiting for it.  Without a claim (NULL), r is
 * inserted only if nothing has its unit's key: never over another thread's
 * claim, nor over an entry already published.  An entry larger than the
 * whole cache is not inserted.  Returns r, inserted or not.  Can't fail.
 */
DedupCachedRegion *dedup_region_cache_publish(DedupRegionCache *c, DedupCachedRegion *r, DedupRegionClaim *claim);

/* Ends the caller's claim, waking its waiters.  Accepts NULL (no claim held: nothing happens). */
void dedup_region_cache_abandon(DedupRegionCache *c, DedupRegionClaim *claim);

/* Drops a reference from lookup/wait/new/publish.  Accepts NULL. */
void dedup_region_cache_release(DedupRegionCache *c, DedupCachedRegion *r);

/* Can't fail. */
void dedup_region_cache_stats(DedupRegionCache *c, DedupRegionCacheStats *ret);

/*
 * Index of the chunk of r that starts at region_offset and is length bytes
 * long with id `id`, or -1 if r has no such chunk (the catalog and the
 * stored unit disagree: damage).
 */
int dedup_cached_region_find(const DedupCachedRegion *r, uint32_t region_offset, uint32_t length,
			     const DedupChunkId *id);
