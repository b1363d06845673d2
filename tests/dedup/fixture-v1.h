/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * What tests/dedup/fixture-store-v1/ holds: a chunk store (catalog and
 * tier 0 containers) written by fratier's first store format (chunk frames,
 * container version 1) before compression regions existed.  The files'
 * bytes are generated again here, so test-store-v1 can check every one of
 * them byte for byte.  Inode FIXTURE_V1_INO(i) is file i; file
 * FIXTURE_V1_DROPPED was dropped after its commit (dead chunks, not
 * collected), and the last container was left open.
 */

#include "tests/dedup/store-test.h"

#define FIXTURE_V1_FILES 6u
#define FIXTURE_V1_DROPPED 4u
#define FIXTURE_V1_CONTAINER_SIZE (16 * KiB)
#define FIXTURE_V1_INO(i) ((uint64_t) (i) + 2)
/* What fixture_v1_fill() needs of its buffer (more than the largest file: file 1 is built in place). */
#define FIXTURE_V1_BUFFER (208 * KiB)

static inline size_t fixture_v1_size(unsigned i) {
	static const size_t sizes[FIXTURE_V1_FILES] = { 160 * KiB, 128 * KiB, 208 * KiB, 24 * KiB, 64 * KiB, 48 * KiB };
	return sizes[i];
}

/* File 5 is cut into fixed 8 KiB chunks (as image copies are); the others with the default CDC. */
static inline DedupChunkerParams fixture_v1_params(unsigned i) {
	return i == 5 ? DEDUP_CHUNKER_PARAMS_FIXED(8 * KiB) : DEDUP_CHUNKER_PARAMS_DEFAULT;
}

static inline void fixture_v1_text(uint64_t seed, uint8_t *buf, size_t len) {
	TestRng rng = { seed };
	fill_text(&rng, buf, len);
}

/* Fills buf (FIXTURE_V1_BUFFER bytes) with the fixture_v1_size(i) bytes of file i. */
static inline void fixture_v1_fill(unsigned i, uint8_t *buf) {
	switch (i) {
	case 0:
		fixture_v1_text(101, buf, 160 * KiB);
		break;
	case 1: /* half of it repeats file 0: deduplicated against it */
		fixture_v1_text(102, buf, 64 * KiB);
		fixture_v1_text(101, buf + 64 * KiB, 96 * KiB); /* file 0's first 96 KiB ... */
		memmove(buf + 64 * KiB, buf + 96 * KiB, 64 * KiB); /* ... of which [32, 96) KiB */
		break;
	case 2: /* zero runs: never stored */
		fixture_v1_text(103, buf, 40 * KiB);
		memset(buf + 40 * KiB, 0, 128 * KiB);
		fixture_v1_text(104, buf + 168 * KiB, 40 * KiB);
		break;
	case 3: { /* incompressible: raw frames */
		TestRng rng = { 105 };
		test_rng_fill(&rng, buf, 24 * KiB);
		break;
	}
	case 4:
		fixture_v1_text(106, buf, 64 * KiB);
		break;
	case 5:
		fixture_v1_text(107, buf, 48 * KiB);
		break;
	}
}
