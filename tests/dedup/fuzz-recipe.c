/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Decodes arbitrary bytes as a recipe segment, as read back from a damaged
 * catalog or a lower tier.  Garbage must be rejected; an accepted segment
 * must be consistent, and re-encode to exactly the same bytes when it is of
 * the version written today (the format has one encoding per segment), or
 * to one that decodes to the same entries when it is of an older one.  Each
 * input is decoded a second time with its checksum recomputed, so the field
 * checks run on arbitrary values.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dedup/le-internal.h"
#include "dedup/recipe.h"
#include "tests/fuzz/fuzz.h"

static uint8_t *copy, *again;

static void decode(const uint8_t *data, size_t size) {
	DedupRecipeSegment *seg;
	if (dedup_recipe_segment_decode(data, size, &seg) < 0)
		return;

	uint64_t total = 0;
	for (size_t i = 0; i < seg->n_entries; i++)
		total += seg->entries[i].length;
	if (total != seg->length || seg->start + seg->length > DEDUP_RECIPE_FILE_SIZE_MAX)
		abort();

	size_t n;
	again = realloc(again, DEDUP_RECIPE_SEGMENT_SIZE_MAX);
	if (!again)
		abort();
	if (dedup_recipe_segment_encode(&seg->params, seg->start, seg->entries, seg->n_entries, again,
					DEDUP_RECIPE_SEGMENT_SIZE_MAX, &n) < 0)
		abort();
	if (data[4] == DEDUP_RECIPE_VERSION && (n != size || memcmp(again, data, size) != 0))
		abort();
	DedupRecipeSegment *back;
	if (dedup_recipe_segment_decode(again, n, &back) < 0 || back->n_entries != seg->n_entries ||
	    back->start != seg->start || back->length != seg->length)
		abort();
	for (size_t i = 0; i < seg->n_entries; i++) {
		const DedupRecipeEntry *a = seg->entries + i, *b = back->entries + i;
		if (a->chunk != b->chunk || a->length != b->length ||
		    (a->chunk == DEDUP_RECIPE_LITERAL && memcmp(a->literal, b->literal, a->length) != 0))
			abort();
	}
	free(back);
	free(seg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	decode(data, size);
	if (size < DEDUP_RECIPE_HEADER_SIZE)
		return 0;
	copy = realloc(copy, size);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	le64_put(copy + 32, XXH3_64bits_withSeed(copy + 40, size - 40, XXH3_64bits(copy, 32)));
	decode(copy, size);
	return 0;
}
