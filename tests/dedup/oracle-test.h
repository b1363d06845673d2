/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Oracle-like streams for the tests of Oracle chunking: datafile blocks
 * with Oracle's cache header and tail (the fields dedup_oracle_block_at()
 * checks, written from Oracle's layout, not from chunker.c), an image copy
 * of a small datafile (an OS header block, formatted blocks, never
 * formatted ones all zero) and a backup piece of the same blocks as RMAN
 * lays them out: a header block, then each formatted block behind a
 * 16-byte frame, never-formatted ones skipped.
 */

#include "tests/dedup/dedup-test.h"

#define ORA_BLOCK 8192u
#define ORA_FRAME 16u

/* A formatted block: type, format 0xa2, rdba, SCN, sequence, tail; the body from rng. */
static inline void ora_block(uint8_t *b, uint8_t type, uint32_t rdba, uint32_t scn, uint8_t seq, TestRng *rng) {
	test_rng_fill(rng, b, ORA_BLOCK);
	/* Text-like bodies compress, as rows do. */
	for (size_t i = 20; i < ORA_BLOCK - 4; i++)
		if (b[i] & 1)
			b[i] = 'a' + (b[i] >> 4);
	b[0] = type;
	b[1] = 0xa2;
	b[2] = b[3] = 0;
	memcpy(b + 4, &rdba, 4);
	memcpy(b + 8, &scn, 4);
	b[12] = b[13] = 0;
	b[14] = seq;
	uint32_t tail = (scn & 0xffff) << 16 | (uint32_t) type << 8 | seq;
	memcpy(b + ORA_BLOCK - 4, &tail, 4);
}

typedef struct OraFile {
	uint8_t *image;   /* the image copy: blocks 0 .. n-1 */
	size_t image_len;
	uint8_t *piece;   /* a backup piece of it */
	size_t piece_len;
	size_t formatted; /* blocks in the piece */
} OraFile;

/* A datafile of n blocks, every fifth never formatted, block 0 the OS header; its image copy and a piece. */
static inline OraFile ora_file(size_t n, uint32_t day, TestRng *rng) {
	OraFile f = { .image = test_malloc(n * ORA_BLOCK), .image_len = n * ORA_BLOCK };
	f.piece = test_malloc(ORA_BLOCK + n * (ORA_BLOCK + ORA_FRAME));
	memset(f.image, 0, ORA_BLOCK);
	f.image[1] = 0xa2; /* block 0: type 0, not a cache header */
	ora_block(f.piece, 0x1c, 0, day, 1, rng); /* the piece's header block */
	f.piece_len = ORA_BLOCK;
	for (size_t i = 1; i < n; i++) {
		uint8_t *b = f.image + i * ORA_BLOCK;
		if (i % 5 == 0) {
			memset(b, 0, ORA_BLOCK);
			continue;
		}
		ora_block(b, 0x06, (uint32_t) i, 1000 + day, (uint8_t) (1 + i % 250), rng);
		uint8_t *frame = f.piece + f.piece_len;
		memcpy(frame, "FRM", 3);
		memcpy(frame + 4, b + 4, 8);
		frame[3] = (uint8_t) i;
		memset(frame + 12, 0, 4);
		memcpy(f.piece + f.piece_len + ORA_FRAME, b, ORA_BLOCK);
		f.piece_len += ORA_FRAME + ORA_BLOCK;
		f.formatted++;
	}
	return f;
}

static inline void ora_file_free(OraFile *f) {
	free(f->image);
	free(f->piece);
}
