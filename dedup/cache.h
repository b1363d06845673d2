/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The chunk cache: decompressed, verified chunks by catalog chunk id, least
 * recently used evicted first, bounded by the bytes of chunk data it holds.
 * A chunk's content never changes while its id exists and ids are never
 * reused, so entries need no invalidation.
 *
 * Entries are reference counted: a reader holds a reference while it copies
 * out of one, and eviction only unlinks an entry, which is freed when its
 * last reference goes.  All calls are thread-safe (one internal mutex, a leaf
 * lock: nothing else is taken while it is held).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct DedupChunkCache DedupChunkCache;

typedef struct DedupCachedChunk {
	uint64_t id;
	uint32_t size;
	/* Private to cache.c: */
	unsigned refs;
	bool cached;
	struct DedupCachedChunk *hash_next, *lru_prev, *lru_next;
	uint8_t data[]; /* size bytes */
} DedupCachedChunk;

/* Returns: 0, -ENOMEM. */
int dedup_chunk_cache_new(size_t max_bytes, DedupChunkCache **ret);
/* Every reference must have been released.  Accepts NULL; returns NULL. */
DedupChunkCache *dedup_chunk_cache_free(DedupChunkCache *c);

/* A new chunk of `size` bytes for id, one reference held by the caller, data to fill; NULL on OOM. */
DedupCachedChunk *dedup_cached_chunk_new(uint64_t id, uint32_t size);

/*
 * Inserts ch (filled) and returns the entry the caller now holds a
 * reference on: ch itself, or an entry for the same id that was cached
 * meanwhile (ch is then released).  A chunk larger than the whole cache is
 * not inserted, but still returned.  Can't fail.
 */
DedupCachedChunk *dedup_chunk_cache_insert(DedupChunkCache *c, DedupCachedChunk *ch);

/* The entry for id with a reference taken, or NULL. */
DedupCachedChunk *dedup_chunk_cache_get(DedupChunkCache *c, uint64_t id);
bool dedup_chunk_cache_contains(DedupChunkCache *c, uint64_t id);

/* Drops a reference from get/insert/new.  Accepts NULL. */
void dedup_chunk_cache_release(DedupChunkCache *c, DedupCachedChunk *ch);

/* Bytes of chunk data currently cached. */
size_t dedup_chunk_cache_bytes(DedupChunkCache *c);
