/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The chunk filter: a Bloom filter over the chunk ids of one tier, kept in
 * RAM so that a chunk never stored before (the common case when new data
 * arrives) is known to be new without touching the on-disk index.  It answers
 * "maybe stored" or "certainly not"; at DEDUP_BLOOM_BITS_PER_CHUNK bits per
 * chunk and DEDUP_BLOOM_HASHES probes, all in one cache line of the filter,
 * about 1% of new chunks get a "maybe" while the filter holds at most its
 * capacity (0.03% at half of it, where a store opens it).  Past the capacity it still
 * answers correctly, only with more false "maybe"s; the store rebuilds it
 * bigger.
 *
 * Chunk ids are SHA-256 (or HMAC) outputs, uniformly distributed, so the
 * probes are taken from the id's own bytes: no hashing.
 *
 * Thread-safety: add() and maybe_contains() may run concurrently from any
 * threads (bits are set with atomic OR); new/free are not concurrent with
 * anything.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/fingerprint.h"

#define DEDUP_BLOOM_BITS_PER_CHUNK 10u
#define DEDUP_BLOOM_HASHES 7u
/* Smallest capacity a filter is built with (1.25 MB of bits). */
#define DEDUP_BLOOM_CAPACITY_MIN (UINT64_C(1) << 20)
/* Largest (40 GB of bits): far past any single host's chunk count. */
#define DEDUP_BLOOM_CAPACITY_MAX (UINT64_C(1) << 35)

typedef struct DedupBloom DedupBloom;

/*
 * A filter for `capacity` ids (raised to DEDUP_BLOOM_CAPACITY_MIN).
 * Returns: 0, -EINVAL (capacity above the maximum), -ENOMEM.
 */
int dedup_bloom_new(uint64_t capacity, DedupBloom **ret);
DedupBloom *dedup_bloom_free(DedupBloom *b);

void dedup_bloom_add(DedupBloom *b, const DedupChunkId *id);
/* false: id was never added.  true: it may have been. */
bool dedup_bloom_maybe_contains(const DedupBloom *b, const DedupChunkId *id);

/* Ids added so far (with repeats), the capacity, and the bytes of bits held. */
uint64_t dedup_bloom_count(const DedupBloom *b);
uint64_t dedup_bloom_capacity(const DedupBloom *b);
size_t dedup_bloom_bytes(const DedupBloom *b);
