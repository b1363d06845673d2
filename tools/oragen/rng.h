/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Deterministic randomness for oragen.  Every generated object draws from its
 * own stream, seeded by hashing (seed, what, which...), so an object's bytes
 * depend only on its identity and never on the order of generation.
 */

#include <stdbool.h>
#include <stdint.h>

/* splitmix64 finalizer: a bijective 64-bit mix. */
static inline uint64_t mix64(uint64_t x) {
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static inline uint64_t hash2(uint64_t a, uint64_t b) {
	return mix64(a ^ mix64(b + 0x9e3779b97f4a7c15ull));
}

static inline uint64_t hash3(uint64_t a, uint64_t b, uint64_t c) {
	return hash2(hash2(a, b), c);
}

static inline uint64_t hash4(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
	return hash2(hash3(a, b, c), d);
}

/* xoshiro256** */
typedef struct Rng {
	uint64_t s[4];
} Rng;

static inline void rng_seed(Rng *r, uint64_t seed) {
	for (unsigned i = 0; i < 4; i++) {
		seed += 0x9e3779b97f4a7c15ull;
		r->s[i] = mix64(seed);
	}
}

static inline uint64_t rng_rotl(uint64_t x, int k) {
	return (x << k) | (x >> (64 - k));
}

static inline uint64_t rng_next(Rng *r) {
	uint64_t *s = r->s;
	uint64_t result = rng_rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rng_rotl(s[3], 45);
	return result;
}

/* Uniform in [0, n), n > 0 (multiply-shift; bias is below 2^-32). */
static inline uint32_t rng_below(Rng *r, uint32_t n) {
	return (uint32_t) (((rng_next(r) >> 32) * (uint64_t) n) >> 32);
}

/* True with probability pct/100. */
static inline bool rng_pct(Rng *r, unsigned pct) {
	return rng_below(r, 100) < pct;
}
