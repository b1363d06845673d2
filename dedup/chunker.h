/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Chunker: splits a byte stream into chunks, either content-defined (FastCDC:
 * gear hash, normalized chunking with two masks) or at fixed offsets.
 *
 * Boundaries are part of the on-disk format: the same bytes and parameters
 * must give the same chunks in every version, or dedup against stored data
 * silently stops working.  The algorithm, the gear table and its seed are
 * specified in docs/FORMAT.md and never change.
 *
 * The chunker keeps no copy of the data: it remembers only how far into the
 * current chunk it is and the rolling hash, so a stream can be fed in pieces of
 * any size (writes as they arrive) and the caller decides where the bytes live.
 * A DedupChunker is a plain struct with no heap state; it can live on the stack
 * and needs no destructor.  One chunker serves one stream at a time and is not
 * thread-safe.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/limits.h"

typedef enum DedupChunkerMode {
	DEDUP_CHUNKER_CDC,    /* content-defined (FastCDC) */
	DEDUP_CHUNKER_FIXED,  /* every chunk avg_size bytes, the last one shorter */
	DEDUP_CHUNKER_ORACLE, /* every Oracle block a chunk of its own, CDC between them (see below) */
	_DEDUP_CHUNKER_MODE_MAX,
	_DEDUP_CHUNKER_MODE_INVALID = -22, /* -EINVAL */
} DedupChunkerMode;

/*
 * CDC: DEDUP_CHUNK_SIZE_LIMIT_MIN <= min_size <= avg_size <= max_size <=
 * DEDUP_CHUNK_SIZE_LIMIT_MAX and avg_size a power of two.  No cut before
 * min_size; up to avg_size a cut is taken at each byte with probability
 * 1/(4*avg_size), after it 4/avg_size; max_size always cuts.
 * FIXED: min_size == avg_size == max_size, any value within the limits.
 * ORACLE: the parameters (as CDC's) of the CDC that cuts what lies between
 * Oracle blocks.
 * Chunks are not tagged with the parameters: record them with the recipe.
 */
typedef struct DedupChunkerParams {
	DedupChunkerMode mode;
	size_t min_size;
	size_t avg_size;
	size_t max_size;
} DedupChunkerParams;

#define DEDUP_CHUNKER_PARAMS_CDC(avg)                                                   \
	((DedupChunkerParams) { .mode = DEDUP_CHUNKER_CDC,                               \
				.min_size = (avg) / 4,                                   \
				.avg_size = (avg),                                       \
				.max_size = (avg) * 4 })
#define DEDUP_CHUNKER_PARAMS_FIXED(size)                                                \
	((DedupChunkerParams) { .mode = DEDUP_CHUNKER_FIXED,                             \
				.min_size = (size),                                      \
				.avg_size = (size),                                      \
				.max_size = (size) })

/* 4 KiB / 16 KiB / 64 KiB: two Oracle 8 KiB blocks on average. */
#define DEDUP_CHUNKER_AVG_SIZE_DEFAULT (16u << 10)
#define DEDUP_CHUNKER_PARAMS_DEFAULT DEDUP_CHUNKER_PARAMS_CDC(DEDUP_CHUNKER_AVG_SIZE_DEFAULT)

/* Seed of the splitmix64 stream the gear table was generated from ("fratier1"). */
#define DEDUP_CHUNKER_GEAR_SEED UINT64_C(0x6672617469657231)

typedef struct DedupChunker {
	DedupChunkerParams params;
	uint64_t mask_small; /* tested for chunk lengths in [min_size, avg_size) */
	uint64_t mask_large; /* tested for chunk lengths in [avg_size, max_size) */
	size_t pos;          /* bytes of the current chunk seen so far */
	uint64_t hash;       /* gear hash over the last (up to) 64 bytes seen */
} DedupChunker;

/*
 * Checks p against the rules above.
 * Returns: 0, or -EINVAL naming nothing more specific (callers validating a
 * config report the values they were given).  Can't fail otherwise.
 */
int dedup_chunker_params_validate(const DedupChunkerParams *p);

/*
 * Sets up c for a new stream with parameters p.
 * Returns: 0, or -EINVAL if p is invalid (c is then left untouched).
 */
int dedup_chunker_init(DedupChunker *c, const DedupChunkerParams *p);

/* Forgets the current chunk: the next byte scanned starts a new stream. */
void dedup_chunker_reset(DedupChunker *c);

/*
 * Scans buf[0, len) as the continuation of the stream.  Sets *ret_n to the
 * number of bytes consumed and returns true if those bytes end the current
 * chunk (*ret_n is then in [1, len]; call again with the rest of buf), false if
 * all of buf was consumed without reaching a boundary (*ret_n == len).  At the
 * end of the stream, whatever was consumed since the last boundary is the last
 * chunk (it may be shorter than min_size); see dedup_chunker_pending().
 * Can't fail.
 */
bool dedup_chunker_scan(DedupChunker *c, const void *buf, size_t len, size_t *ret_n);

/* Bytes consumed since the last boundary: the length of the unfinished chunk. */
static inline size_t dedup_chunker_pending(const DedupChunker *c) {
	return c->pos;
}

/*
 * One-shot: the chunk lengths of the complete stream buf[0, len), in order, in
 * a newly allocated array the caller frees (NULL and 0 for an empty stream).
 * Returns: 0, -EINVAL for invalid p, -ENOMEM.  On error nothing is returned.
 */
int dedup_chunker_split(const DedupChunkerParams *p, const void *buf, size_t len, size_t **ret_sizes,
			size_t *ret_n);

/*
 * Oracle-aware cutting (DEDUP_CHUNKER_ORACLE): an RMAN backup piece and an
 * image copy of the same datafile hold the same Oracle blocks, but the piece
 * puts other bytes between them (headers, per-block framing) and skips
 * never-formatted ones, so no chunk of several blocks is ever the same in
 * both.  Cut every Oracle block out as a chunk of its own (found by its
 * cache header and tail, as Oracle checks them: type != 0, format 0xa2,
 * two zero bytes, and a tail of the SCN's low 16 bits, type and sequence)
 * and both classes store each block once.  What lies between two blocks (a
 * *gap*) is kept in the recipe when it is at most DEDUP_ORACLE_LITERAL_MAX
 * bytes (a literal: per-block framing costs no chunk), else cut by CDC
 * with the recipe's parameters, ending at the next block.
 *
 * Whether a block starts at an offset depends on the 8 KiB from there only,
 * and the first block at or after the end of the previous one is taken, so
 * the pieces depend only on the bytes, never on how the stream was fed.
 * The format fixes this for good, as it fixes CDC (docs/FORMAT.md).
 */
#define DEDUP_ORACLE_BLOCK_SIZE 8192u
#define DEDUP_ORACLE_LITERAL_MAX 32u

/* Whether an Oracle block starts at p (DEDUP_ORACLE_BLOCK_SIZE bytes readable). */
bool dedup_oracle_block_at(const uint8_t *p);

typedef enum DedupOraclePieceKind {
	DEDUP_ORACLE_BLOCK,   /* an Oracle block: one chunk */
	DEDUP_ORACLE_LITERAL, /* a whole gap of 1 .. DEDUP_ORACLE_LITERAL_MAX bytes: kept in the recipe */
	DEDUP_ORACLE_GAP,     /* bytes of a longer gap: CDC's; gap_end: the gap ends with them (cut there) */
	_DEDUP_ORACLE_PIECE_MAX,
} DedupOraclePieceKind;

typedef struct DedupOraclePiece {
	DedupOraclePieceKind kind;
	size_t len;
	bool gap_end;
} DedupOraclePiece;

/* What the splitter remembers between pieces: no data, only how much of the current gap it handed out. */
typedef struct DedupOracleSplitter {
	uint64_t gap;
} DedupOracleSplitter;

/* Bytes of lookahead that always let dedup_oracle_next() decide (before the end of the stream). */
#define DEDUP_ORACLE_LOOKAHEAD (DEDUP_ORACLE_BLOCK_SIZE + DEDUP_ORACLE_LITERAL_MAX + 1)

static inline void dedup_oracle_splitter_init(DedupOracleSplitter *s) {
	s->gap = 0;
}

/*
 * The next piece of the stream, whose bytes from the end of the previous
 * piece are buf[0, len); final: no byte follows them.  Returns true and
 * *ret (len >= 1), or false if more bytes are needed to decide: never with
 * final, nor with len >= DEDUP_ORACLE_LOOKAHEAD.  Can't fail.
 */
bool dedup_oracle_next(DedupOracleSplitter *s, const uint8_t *buf, size_t len, bool final, DedupOraclePiece *ret);

/*
 * One-shot, for whole buffers (tests and tools): the pieces of buf[0, len)
 * cut with p (mode DEDUP_CHUNKER_ORACLE), each a chunk (kind BLOCK, or GAP
 * for a CDC chunk of a gap) or a literal, in a newly allocated array.
 * Returns: 0, -EINVAL, -ENOMEM.
 */
int dedup_oracle_split(const DedupChunkerParams *p, const void *buf, size_t len, DedupOraclePiece **ret_pieces,
		       size_t *ret_n);

/*
 * The 256-entry gear table (read-only, static lifetime).  Exposed because it is
 * part of the format: tests and external tools check it against its definition.
 */
const uint64_t *dedup_chunker_gear_table(void);
