/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Bloom filter over chunk ids.
 *
 * Invariants:
 *  1. No false negatives: every id added answers true forever after, from
 *     every thread (bits are only ever set, with atomic OR; readers load
 *     with at least relaxed atomics).
 *  2. The k probes of an id use double hashing on two 64-bit words of the id
 *     (h1 + i*h2, h2 odd), mapped onto the m bits by multiply-shift, so m
 *     need not be a power of two and the filter holds exactly
 *     DEDUP_BLOOM_BITS_PER_CHUNK bits per id of capacity (rounded to 64).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/bloom.h"

struct DedupBloom {
	uint64_t capacity;
	uint64_t bits;  /* m, a multiple of 64 */
	uint64_t count; /* atomic */
	uint64_t *words;
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
	b->bits = (capacity * DEDUP_BLOOM_BITS_PER_CHUNK + 63) / 64 * 64;
	b->words = calloc((size_t) (b->bits / 64), sizeof(uint64_t));
	if (!b->words) {
		free(b);
		return -ENOMEM;
	}
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

static void probes(const DedupBloom *b, const DedupChunkId *id, uint64_t ret[static DEDUP_BLOOM_HASHES]) {
	uint64_t h1, h2;
	memcpy(&h1, id->bytes, sizeof(h1));
	memcpy(&h2, id->bytes + 8, sizeof(h2));
	h2 |= 1;
	for (unsigned i = 0; i < DEDUP_BLOOM_HASHES; i++) {
		uint64_t h = h1 + i * h2;
		ret[i] = (uint64_t) (((unsigned __int128) h * b->bits) >> 64);
	}
}

void dedup_bloom_add(DedupBloom *b, const DedupChunkId *id) {
	uint64_t p[DEDUP_BLOOM_HASHES];
	probes(b, id, p);
	for (unsigned i = 0; i < DEDUP_BLOOM_HASHES; i++)
		__atomic_fetch_or(&b->words[p[i] / 64], UINT64_C(1) << (p[i] % 64), __ATOMIC_RELAXED);
	__atomic_fetch_add(&b->count, 1, __ATOMIC_RELAXED);
}

bool dedup_bloom_maybe_contains(const DedupBloom *b, const DedupChunkId *id) {
	uint64_t p[DEDUP_BLOOM_HASHES];
	probes(b, id, p);
	for (unsigned i = 0; i < DEDUP_BLOOM_HASHES; i++) {
		uint64_t w = __atomic_load_n(&b->words[p[i] / 64], __ATOMIC_RELAXED);
		if (!(w & (UINT64_C(1) << (p[i] % 64))))
			return false;
	}
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
