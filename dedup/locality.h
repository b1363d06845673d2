/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The locality cache: chunk ids -> catalog chunk ids for the containers a
 * writer recently found duplicates in.  Data that was stored together tends
 * to come back together (a second full backup repeats the first one's
 * order), so when one chunk is found in container X, all of X's ids are
 * loaded at once and the chunks that follow mostly hit memory instead of the
 * on-disk index.  Bounded by the number of ids held; whole containers are
 * evicted, least recently used first.
 *
 * A hit is exact (whole ids are compared) but may be stale: the chunk may
 * have been deleted since.  The store clears the cache whenever it deletes
 * chunks, under its writers' exclusion.
 *
 * All calls are thread-safe (one internal mutex, a leaf lock).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/fingerprint.h"

/* Containers tracked at most (eviction scans them linearly). */
#define DEDUP_LOCALITY_CONTAINERS_MAX 256u
/* Largest id count a cache may be created for. */
#define DEDUP_LOCALITY_CHUNKS_MAX (UINT32_C(1) << 30)

typedef struct DedupLocality DedupLocality;

typedef struct DedupLocalityEntry {
	DedupChunkId id;
	uint64_t chunk;
} DedupLocalityEntry;

/* Returns: 0, -EINVAL (max_chunks 0 or too large), -ENOMEM. */
int dedup_locality_new(size_t max_chunks, DedupLocality **ret);
DedupLocality *dedup_locality_free(DedupLocality *l);

/* Looks id up; on a hit sets *ret_chunk and marks its container recently used. */
bool dedup_locality_find(DedupLocality *l, const DedupChunkId *id, uint64_t *ret_chunk);

/*
 * Replaces what is cached for container by entries[0, n), evicting other
 * containers as needed.  A container with more ids than the cache holds is
 * not cached (and any old entries of it are dropped).  Can't fail.
 */
void dedup_locality_load(DedupLocality *l, uint64_t container, const DedupLocalityEntry *entries, size_t n);

/* Adds one id to container's entries (creating them if needed), evicting as needed. */
void dedup_locality_add(DedupLocality *l, uint64_t container, const DedupChunkId *id, uint64_t chunk);

/* Whether container's ids are cached. */
bool dedup_locality_has_container(DedupLocality *l, uint64_t container);

void dedup_locality_clear(DedupLocality *l);

/* Bytes allocated. */
size_t dedup_locality_bytes(const DedupLocality *l);
