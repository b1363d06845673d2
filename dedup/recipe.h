/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Recipe segments: how a sealed file's bytes are put back together.  A file's
 * recipe is the ordered list of its pieces, each a stored chunk (referenced
 * by its catalog chunk id), a run of zero bytes, which is never stored, or
 * a literal: up to DEDUP_RECIPE_LITERAL_MAX bytes kept in the recipe itself
 * (what lies between two Oracle blocks cut by DEDUP_CHUNKER_ORACLE).  The list is cut into segments of at most
 * DEDUP_RECIPE_SEGMENT_ENTRIES_MAX entries; each is one blob in the catalog,
 * keyed by the file offset of its first byte, and opaque to it.  Layout:
 * docs/FORMAT.md, "Recipes".
 *
 * The decoder trusts nothing: magic, version, checksum, chunker parameters,
 * entry count against the length, every entry's length, and the sum of the
 * lengths added to the start (overflow-checked, within a file size limit).
 * Errors: -EBADMSG (corrupt), -EPROTONOSUPPORT (newer version), -EINVAL
 * (bad arguments to the encoder), -ENOBUFS, -ENOMEM.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/chunker.h"

/*
 * Version 3, the one written: entries as varints, chunk ids as the
 * difference from the previous chunk's (a file's new chunks get consecutive
 * ids): a third of the fixed width or less.  Versions 1 (12-byte entries)
 * and 2 (the same with Oracle literals) stay readable.
 */
#define DEDUP_RECIPE_VERSION 3
#define DEDUP_RECIPE_HEADER_SIZE 40u
/* The most bytes one entry takes, its literal aside: fixed width in versions 1-2, two varints in 3. */
#define DEDUP_RECIPE_ENTRY_SIZE 12u
#define DEDUP_RECIPE_ENTRY_SIZE_MAX 15u
#define DEDUP_RECIPE_SEGMENT_ENTRIES_MAX 4096u
/* The chunk id of a literal entry (no catalog id is ever this), and the most bytes one holds. */
#define DEDUP_RECIPE_LITERAL UINT64_MAX
#define DEDUP_RECIPE_LITERAL_MAX DEDUP_ORACLE_LITERAL_MAX
/* Longest zero run one entry may describe (longer runs take several entries). */
#define DEDUP_RECIPE_ZERO_RUN_MAX (UINT32_C(1) << 30)
/* Files end before 2^63: every offset fits off_t. */
#define DEDUP_RECIPE_FILE_SIZE_MAX ((uint64_t) INT64_MAX)
#define DEDUP_RECIPE_SEGMENT_SIZE_MAX \
	(DEDUP_RECIPE_HEADER_SIZE + DEDUP_RECIPE_SEGMENT_ENTRIES_MAX * (DEDUP_RECIPE_ENTRY_SIZE_MAX + DEDUP_RECIPE_LITERAL_MAX))

/*
 * chunk == 0: `length` zero bytes; DEDUP_RECIPE_LITERAL: the `length` bytes
 * at `literal`; else `length` bytes of catalog chunk `chunk`.
 */
typedef struct DedupRecipeEntry {
	uint64_t chunk;
	uint32_t length;
	const uint8_t *literal; /* literals only; in a decoded segment, inside its allocation */
} DedupRecipeEntry;

/* Whether the entry names a stored chunk (not zeros, not a literal). */
static inline bool dedup_recipe_entry_is_chunk(const DedupRecipeEntry *e) {
	return e->chunk != 0 && e->chunk != DEDUP_RECIPE_LITERAL;
}

typedef struct DedupRecipeSegment {
	DedupChunkerParams params; /* what the file was chunked with */
	uint64_t start;            /* file offset of the first entry */
	uint64_t length;           /* sum of the entry lengths */
	size_t n_entries;          /* 1 .. DEDUP_RECIPE_SEGMENT_ENTRIES_MAX */
	DedupRecipeEntry entries[];
} DedupRecipeSegment;

/*
 * Encodes entries[0, n) (1 <= n <= DEDUP_RECIPE_SEGMENT_ENTRIES_MAX; lengths
 * >= 1, chunk entries at most DEDUP_CHUNK_SIZE_LIMIT_MAX, zero runs at most
 * DEDUP_RECIPE_ZERO_RUN_MAX, literals at most DEDUP_RECIPE_LITERAL_MAX and
 * only with p's mode DEDUP_CHUNKER_ORACLE; start + total within
 * DEDUP_RECIPE_FILE_SIZE_MAX) of a file chunked with p, starting at file
 * offset start, into buf[0, size), which DEDUP_RECIPE_SEGMENT_SIZE_MAX
 * always suffices for.  *ret_size gets the segment's length.
 * Returns: 0, -EINVAL, -ENOBUFS.
 */
int dedup_recipe_segment_encode(const DedupChunkerParams *p, uint64_t start, const DedupRecipeEntry *entries,
				size_t n, void *buf, size_t size, size_t *ret_size);

/*
 * Decodes and validates the segment blob buf[0, len) into a newly allocated
 * segment (free() it).
 * Returns: 0, -EBADMSG, -EPROTONOSUPPORT, -ENOMEM.  On error nothing is
 * returned.
 */
int dedup_recipe_segment_decode(const void *buf, size_t len, DedupRecipeSegment **ret);
