/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Assertions and deterministic pseudo-random data for the dedup unit tests.
 * A failed check prints where and why and aborts, so the test fails under
 * meson and stops in a debugger at the first problem.
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ASSERT(expr)                                                                                \
	do {                                                                                        \
		if (!(expr)) {                                                                      \
			fprintf(stderr, "%s:%d: %s: assertion failed: %s\n", __FILE__, __LINE__,    \
				__func__, #expr);                                                   \
			abort();                                                                    \
		}                                                                                   \
	} while (0)

/* Evaluates expr once; it must return the errno `want` (0 or negative). */
#define ASSERT_RET(expr, want)                                                                      \
	do {                                                                                        \
		int _r = (expr), _w = (want);                                                       \
		if (_r != _w) {                                                                     \
			fprintf(stderr, "%s:%d: %s: %s returned %d (%s), expected %d (%s)\n",       \
				__FILE__, __LINE__, __func__, #expr, _r, strerror(_r < 0 ? -_r : _r), \
				_w, strerror(_w < 0 ? -_w : _w));                                   \
			abort();                                                                    \
		}                                                                                   \
	} while (0)

#define ASSERT_OK(expr) ASSERT_RET(expr, 0)

/* splitmix64: small, fast and identical everywhere, so failures replay. */
typedef struct TestRng {
	uint64_t state;
} TestRng;

static inline uint64_t test_rng_next(TestRng *r) {
	uint64_t z = (r->state += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static inline void test_rng_fill(TestRng *r, void *buf, size_t len) {
	uint8_t *p = buf;
	while (len > 0) {
		uint64_t v = test_rng_next(r);
		size_t n = len < 8 ? len : 8;
		memcpy(p, &v, n);
		p += n;
		len -= n;
	}
}

static inline void *test_malloc(size_t n) {
	void *p = malloc(n ? n : 1);
	ASSERT(p);
	return p;
}
