/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Bloom filter over chunk ids.
 *
 * Invariants:
 *  1. No false negatives: every id added answers true forever after, from
 *     every thread (bits are only ever set, with atomic OR; readers load
 *     with at least relaxed atomics).
 *  2. Blocked: all k probes of an id fall in one 512-bit block (a cache
 *     line), chosen by the id's first 64-bit word mapped onto the blocks by
 *     multiply-shift; the probes within it are k 9-bit fields of its second
 *     word.  A look-up or an add then costs one cache (and TLB) miss
 *     instead of up to k: in a filter of hundreds of MiB, that miss is what
 *     a new chunk pays for it (bench/README.md, index-scale).  The filter
 *     holds DEDUP_BLOOM_BITS_PER_CHUNK bits per id of capacity, rounded up
 *     to a block.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/bloom.h"

#define BLOCK_WORDS 8u /* 512 bits: one cache line */
#define BLOCK_BITS (BLOCK_WORDS * 64u)
_Static_assert(DEDUP_BLOOM_HASHES * 9 <= 64, "the probes within a block fit in one 64-bit word of the id");

struct DedupBloom {
	uint64_t capacity;
	uint64_t bits;   /* m, a multiple of BLOCK_BITS */
	uint64_t blocks; /* m / BLOCK_BITS */
	uint64_t count;  /* atomic */
	uint64_t *words; /* aligned to a cache line */
};

int dedup_bloom_new(uint64_t capacity, DedupBloom **ret) {
	if (capacity > DEDUP_BLOOM_CAPACITY_MAX)
		return -EINVAL;
	if (capacity < DEDUP_BLOOM_CAPACITY_MIN)
		capacity = DEDUP_BLOOM_CAPACITY_MIN;

	DedupBloom *b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->capacity = capacity;
	b->blocks = (capacity * DEDUP_BLOOM_BITS_PER_CHUNK + BLOCK_BITS - 1) / BLOCK_BITS;
	b->bits = b->blocks * BLOCK_BITS;
	size_t bytes = (size_t) (b->bits / 8);
	if (posix_memalign((void **) &b->words, BLOCK_WORDS * sizeof(uint64_t), bytes) != 0) {
		free(b);
		return -ENOMEM;
	}
	memset(b->words, 0, bytes);
	*ret = b;
	return 0;
}

DedupBloom *dedup_bloom_free(DedupBloom *b) {
	if (!b)
		return NULL;
	free(b->words);
	free(b);
	return NULL;
}

/* The id's block (its first word) and the k bits within it (its second word): invariant 2. */
static uint64_t *block_of(const DedupBloom *b, const DedupChunkId *id, uint64_t *ret_mask) {
	uint64_t h1, h2, mask[BLOCK_WORDS] = {};
	memcpy(&h1, id->bytes, sizeof(h1));
	memcpy(&h2, id->bytes + 8, sizeof(h2));
	for (unsigned i = 0; i < DEDUP_BLOOM_HASHES; i++) {
		unsigned bit = (unsigned) (h2 >> (9 * i)) & (BLOCK_BITS - 1);
		mask[bit / 64] |= UINT64_C(1) << (bit % 64);
	}
	memcpy(ret_mask, mask, sizeof(mask));
	return b->words + (uint64_t) (((unsigned __int128) h1 * b->blocks) >> 64) * BLOCK_WORDS;
}

void dedup_bloom_add(DedupBloom *b, const DedupChunkId *id) {
	uint64_t mask[BLOCK_WORDS];
	uint64_t *w = block_of(b, id, mask);
	for (unsigned i = 0; i < BLOCK_WORDS; i++)
		if (mask[i])
			__atomic_fetch_or(&w[i], mask[i], __ATOMIC_RELAXED);
	__atomic_fetch_add(&b->count, 1, __ATOMIC_RELAXED);
}

bool dedup_bloom_maybe_contains(const DedupBloom *b, const DedupChunkId *id) {
	uint64_t mask[BLOCK_WORDS];
	const uint64_t *w = block_of(b, id, mask);
	for (unsigned i = 0; i < BLOCK_WORDS; i++)
		if ((__atomic_load_n(&w[i], __ATOMIC_RELAXED) & mask[i]) != mask[i])
			return false;
	return true;
}

uint64_t dedup_bloom_count(const DedupBloom *b) {
	return __atomic_load_n(&b->count, __ATOMIC_RELAXED);
}

uint64_t dedup_bloom_capacity(const DedupBloom *b) {
	return b->capacity;
}

size_t dedup_bloom_bytes(const DedupBloom *b) {
	return (size_t) (b->bits / 8);
}
