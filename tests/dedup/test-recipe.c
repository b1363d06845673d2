/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Recipe segments: the layout of docs/FORMAT.md, round trips, the limits
 * (entry count, lengths, zero runs, literals, file size), and rejection of
 * every single-bit flip, every truncation, and impossible values behind a
 * good checksum; version 2 (Oracle chunking, literals) exactly when needed.
 */
#include <errno.h>
#include <stdlib.h>
#include <xxhash.h>

#include "common/macros.h"
#include "dedup/le-internal.h"
#include "dedup/recipe.h"
#include "tests/dedup/dedup-test.h"

static const DedupChunkerParams cdc = DEDUP_CHUNKER_PARAMS_DEFAULT;
static const DedupChunkerParams oracle = { DEDUP_CHUNKER_ORACLE, 2048, 8192, 32768 };

static void reseal(uint8_t *b, size_t len) {
	le64_put(b + 32, XXH3_64bits_withSeed(b + 40, len - 40, XXH3_64bits(b, 32)));
}

static void test_layout(void) {
	DedupRecipeEntry e[] = { { 7, 100 }, { 0, 5000 }, { 0xffffffffffull, 4u << 20 } };
	uint8_t buf[DEDUP_RECIPE_HEADER_SIZE + 3 * DEDUP_RECIPE_ENTRY_SIZE];
	size_t size;
	ASSERT_OK(dedup_recipe_segment_encode(&cdc, 1000, e, 3, buf, sizeof(buf), &size));
	ASSERT(size == sizeof(buf));
	ASSERT(memcmp(buf, "\x89" "FRS\x01\x00\x00\x00", 8) == 0);
	ASSERT(le32_get(buf + 8) == 4096 && le32_get(buf + 12) == 16384 && le32_get(buf + 16) == 65536);
	ASSERT(le32_get(buf + 20) == 3 && le64_get(buf + 24) == 1000);
	ASSERT(le64_get(buf + 40) == 7 && le32_get(buf + 48) == 100);
	ASSERT(le64_get(buf + 52) == 0 && le32_get(buf + 60) == 5000);

	DedupRecipeSegment *seg;
	ASSERT_OK(dedup_recipe_segment_decode(buf, size, &seg));
	ASSERT(seg->start == 1000 && seg->length == 100 + 5000 + (4u << 20) && seg->n_entries == 3);
	ASSERT(seg->params.mode == DEDUP_CHUNKER_CDC && seg->params.avg_size == 16384);
	for (size_t i = 0; i < 3; i++)
		ASSERT(seg->entries[i].chunk == e[i].chunk && seg->entries[i].length == e[i].length);
	free(seg);

	DedupChunkerParams fixed = DEDUP_CHUNKER_PARAMS_FIXED(8192);
	ASSERT_OK(dedup_recipe_segment_encode(&fixed, 0, e, 1, buf, sizeof(buf), &size));
	ASSERT_OK(dedup_recipe_segment_decode(buf, size, &seg));
	ASSERT(seg->params.mode == DEDUP_CHUNKER_FIXED && seg->params.min_size == 8192);
	free(seg);
}

static void test_limits(void) {
	size_t size;
	uint8_t *buf = test_malloc(DEDUP_RECIPE_SEGMENT_SIZE_MAX + 100);
	DedupRecipeEntry *e = test_malloc((DEDUP_RECIPE_SEGMENT_ENTRIES_MAX + 1) * sizeof(*e));
	for (size_t i = 0; i <= DEDUP_RECIPE_SEGMENT_ENTRIES_MAX; i++)
		e[i] = (DedupRecipeEntry) { .chunk = i + 1, .length = 1 };

	ASSERT_OK(dedup_recipe_segment_encode(&cdc, 0, e, DEDUP_RECIPE_SEGMENT_ENTRIES_MAX, buf,
					      DEDUP_RECIPE_SEGMENT_SIZE_MAX, &size));
	ASSERT(size == dedup_recipe_segment_size(DEDUP_RECIPE_SEGMENT_ENTRIES_MAX, 0));
	/* The largest: every entry a literal of the most bytes. */
	uint8_t lit[DEDUP_RECIPE_LITERAL_MAX + 1] = "0123456789abcdef0123456789abcdefX";
	for (size_t i = 0; i < DEDUP_RECIPE_SEGMENT_ENTRIES_MAX; i++)
		e[i] = (DedupRecipeEntry) { .chunk = DEDUP_RECIPE_LITERAL, .length = DEDUP_RECIPE_LITERAL_MAX, .literal = lit };
	ASSERT_OK(dedup_recipe_segment_encode(&oracle, 0, e, DEDUP_RECIPE_SEGMENT_ENTRIES_MAX, buf,
					      DEDUP_RECIPE_SEGMENT_SIZE_MAX, &size));
	ASSERT(size == DEDUP_RECIPE_SEGMENT_SIZE_MAX);
	e[0].length = DEDUP_RECIPE_LITERAL_MAX + 1; /* a literal too long */
	ASSERT_RET(dedup_recipe_segment_encode(&oracle, 0, e, 1, buf, DEDUP_RECIPE_SEGMENT_SIZE_MAX, &size), -EINVAL);
	e[0].length = 5; /* literals only with Oracle chunking */
	ASSERT_RET(dedup_recipe_segment_encode(&cdc, 0, e, 1, buf, DEDUP_RECIPE_SEGMENT_SIZE_MAX, &size), -EINVAL);
	e[0].literal = NULL;
	ASSERT_RET(dedup_recipe_segment_encode(&oracle, 0, e, 1, buf, DEDUP_RECIPE_SEGMENT_SIZE_MAX, &size), -EINVAL);
	for (size_t i = 0; i <= DEDUP_RECIPE_SEGMENT_ENTRIES_MAX; i++)
		e[i] = (DedupRecipeEntry) { .chunk = i + 1, .length = 1 };
	ASSERT_RET(dedup_recipe_segment_encode(&cdc, 0, e, DEDUP_RECIPE_SEGMENT_ENTRIES_MAX + 1, buf,
					       DEDUP_RECIPE_SEGMENT_SIZE_MAX + 100, &size), -EINVAL);
	ASSERT_RET(dedup_recipe_segment_encode(&cdc, 0, e, 0, buf, 100, &size), -EINVAL);
	ASSERT_RET(dedup_recipe_segment_encode(&cdc, 0, e, 2, buf, 40 + 12 * 2 - 1, &size), -ENOBUFS);

	DedupRecipeEntry bad[][1] = {
		{ { 1, 0 } },                                  /* empty entry */
		{ { 1, (4u << 20) + 1 } },                     /* chunk longer than any chunk */
		{ { 0, DEDUP_RECIPE_ZERO_RUN_MAX + 1 } },      /* zero run too long */
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		ASSERT_RET(dedup_recipe_segment_encode(&cdc, 0, bad[i], 1, buf, 100, &size), -EINVAL);
	DedupRecipeEntry z = { 0, DEDUP_RECIPE_ZERO_RUN_MAX };
	ASSERT_OK(dedup_recipe_segment_encode(&cdc, 0, &z, 1, buf, 100, &size));
	/* Past the largest file size. */
	ASSERT_RET(dedup_recipe_segment_encode(&cdc, DEDUP_RECIPE_FILE_SIZE_MAX, &z, 1, buf, 100, &size), -EINVAL);
	ASSERT_OK(dedup_recipe_segment_encode(&cdc, DEDUP_RECIPE_FILE_SIZE_MAX - DEDUP_RECIPE_ZERO_RUN_MAX, &z, 1, buf, 100,
					      &size));
	DedupChunkerParams badp = { .mode = DEDUP_CHUNKER_CDC, .min_size = 64, .avg_size = 100, .max_size = 400 };
	ASSERT_RET(dedup_recipe_segment_encode(&badp, 0, e, 1, buf, 100, &size), -EINVAL);
	free(buf);
	free(e);
}

/* Impossible values with the checksum made right: the field checks themselves must refuse them. */
static void test_bad_fields(void) {
	DedupRecipeEntry e[] = { { 1, 4096 }, { 0, 100 } };
	uint8_t good[DEDUP_RECIPE_HEADER_SIZE + 2 * DEDUP_RECIPE_ENTRY_SIZE], b[sizeof(good)];
	DedupRecipeSegment *seg;
	size_t size;
	ASSERT_OK(dedup_recipe_segment_encode(&cdc, 0, e, 2, good, sizeof(good), &size));

	struct {
		size_t off, width;
		uint64_t value;
		int want;
	} cases[] = {
		{ 4, 1, 0, -EBADMSG },                    /* version 0 */
		{ 4, 1, 2, -EBADMSG },                    /* version 2 where version 1 says it all (not canonical) */
		{ 4, 1, 3, -EPROTONOSUPPORT },            /* a newer version */
		{ 5, 1, 2, -EBADMSG },                    /* Oracle chunking in version 1 */
		{ 5, 1, 3, -EBADMSG },                    /* chunker mode */
		{ 6, 2, 1, -EBADMSG },                    /* flags */
		{ 12, 4, 10000, -EBADMSG },               /* avg not a power of two */
		{ 8, 4, 1u << 20, -EBADMSG },             /* min > avg */
		{ 16, 4, 8u << 20, -EBADMSG },            /* max beyond the chunk limit */
		{ 20, 4, 3, -EBADMSG },                   /* count vs length */
		{ 20, 4, 0, -EBADMSG },                   /* no entries */
		{ 24, 8, UINT64_MAX, -EBADMSG },          /* start beyond any file */
		{ 24, 8, INT64_MAX - 4000, -EBADMSG },    /* start + lengths overflow the file size */
		{ 48, 4, 0, -EBADMSG },                   /* empty chunk entry */
		{ 48, 4, (4u << 20) + 1, -EBADMSG },      /* chunk too long */
		{ 60, 4, 0, -EBADMSG },                   /* empty zero run */
		{ 60, 4, DEDUP_RECIPE_ZERO_RUN_MAX + 1, -EBADMSG },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		memcpy(b, good, sizeof(b));
		if (cases[i].width == 1)
			b[cases[i].off] = (uint8_t) cases[i].value;
		else if (cases[i].width == 2)
			le16_put(b + cases[i].off, (uint16_t) cases[i].value);
		else if (cases[i].width == 4)
			le32_put(b + cases[i].off, (uint32_t) cases[i].value);
		else
			le64_put(b + cases[i].off, cases[i].value);
		reseal(b, sizeof(b));
		int r = dedup_recipe_segment_decode(b, sizeof(b), &seg);
		if (r != cases[i].want) {
			fprintf(stderr, "case %zu: %d\n", i, r);
			abort();
		}
	}
	/* And a good one with the checksum made right decodes. */
	memcpy(b, good, sizeof(b));
	reseal(b, sizeof(b));
	ASSERT_OK(dedup_recipe_segment_decode(b, sizeof(b), &seg));
	free(seg);
}

static void test_flips_and_truncation(void) {
	DedupRecipeEntry e[] = { { 9, 70000 }, { 0, 1 }, { 12, 64 }, { 9, 70000 } };
	uint8_t b[DEDUP_RECIPE_HEADER_SIZE + 4 * DEDUP_RECIPE_ENTRY_SIZE];
	DedupRecipeSegment *seg;
	size_t size;
	ASSERT_OK(dedup_recipe_segment_encode(&cdc, 12345, e, 4, b, sizeof(b), &size));
	for (size_t i = 0; i < size * 8; i++) {
		b[i / 8] ^= (uint8_t) (1u << (i % 8));
		int r = dedup_recipe_segment_decode(b, size, &seg);
		ASSERT(r == -EBADMSG || r == -EPROTONOSUPPORT);
		b[i / 8] ^= (uint8_t) (1u << (i % 8));
	}
	for (size_t len = 0; len < size; len++)
		ASSERT_RET(dedup_recipe_segment_decode(b, len, &seg), -EBADMSG);
	ASSERT_RET(dedup_recipe_segment_decode(NULL, 0, &seg), -EBADMSG);
	ASSERT_OK(dedup_recipe_segment_decode(b, size, &seg));
	ASSERT(seg->length == 140065);
	free(seg);
}

/* Oracle chunking: version 2, literal bytes after the entries, in order. */
static void test_literals(void) {
	DedupRecipeEntry e[] = {
		{ .chunk = 5, .length = 8192 },
		{ .chunk = DEDUP_RECIPE_LITERAL, .length = 16, .literal = (const uint8_t *) "frame one ......" },
		{ .chunk = 6, .length = 8192 },
		{ .chunk = DEDUP_RECIPE_LITERAL, .length = 3, .literal = (const uint8_t *) "end" },
		{ .chunk = 0, .length = 100 },
	};
	uint8_t b[DEDUP_RECIPE_HEADER_SIZE + 5 * DEDUP_RECIPE_ENTRY_SIZE + 19 + 1], c[sizeof(b)];
	DedupRecipeSegment *seg;
	size_t size;
	ASSERT_OK(dedup_recipe_segment_encode(&oracle, 64, e, 5, b, sizeof(b), &size));
	ASSERT(size == sizeof(b) - 1 && size == dedup_recipe_segment_size(5, 19));
	ASSERT(b[4] == 2 && b[5] == DEDUP_CHUNKER_ORACLE);
	ASSERT(le64_get(b + 40 + 12) == UINT64_MAX && le32_get(b + 40 + 12 + 8) == 16);
	ASSERT(memcmp(b + 40 + 5 * 12, "frame one ......end", 19) == 0);
	ASSERT_OK(dedup_recipe_segment_decode(b, size, &seg));
	ASSERT(seg->n_entries == 5 && seg->length == 8192 * 2 + 19 + 100 && seg->params.mode == DEDUP_CHUNKER_ORACLE);
	ASSERT(memcmp(seg->entries[1].literal, "frame one ......", 16) == 0 && memcmp(seg->entries[3].literal, "end", 3) == 0);
	ASSERT(!dedup_recipe_entry_is_chunk(&seg->entries[1]) && !dedup_recipe_entry_is_chunk(&seg->entries[4]) &&
	       dedup_recipe_entry_is_chunk(&seg->entries[0]));
	free(seg);

	/* Without literals, still version 2 with Oracle chunking. */
	ASSERT_OK(dedup_recipe_segment_encode(&oracle, 0, e, 1, c, sizeof(c), &size));
	ASSERT(c[4] == 2 && size == dedup_recipe_segment_size(1, 0));

	/* A literal byte too many, or too few, behind a good checksum. */
	size = dedup_recipe_segment_size(5, 19);
	memcpy(c, b, size);
	c[size] = 'x';
	reseal(c, size + 1);
	ASSERT_RET(dedup_recipe_segment_decode(c, size + 1, &seg), -EBADMSG);
	memcpy(c, b, size);
	reseal(c, size - 1);
	ASSERT_RET(dedup_recipe_segment_decode(c, size - 1, &seg), -EBADMSG);
	/* A literal longer than allowed, or in a CDC segment. */
	memcpy(c, b, size);
	le32_put(c + 40 + 12 + 8, DEDUP_RECIPE_LITERAL_MAX + 1);
	reseal(c, size);
	ASSERT_RET(dedup_recipe_segment_decode(c, size, &seg), -EBADMSG);
	memcpy(c, b, size);
	c[4] = 1;
	c[5] = DEDUP_CHUNKER_CDC;
	reseal(c, size);
	ASSERT_RET(dedup_recipe_segment_decode(c, size, &seg), -EBADMSG);

	/* Every bit flip and every truncation. */
	for (size_t i = 0; i < size * 8; i++) {
		b[i / 8] ^= (uint8_t) (1u << (i % 8));
		int r = dedup_recipe_segment_decode(b, size, &seg);
		ASSERT(r == -EBADMSG || r == -EPROTONOSUPPORT);
		b[i / 8] ^= (uint8_t) (1u << (i % 8));
	}
	for (size_t len = 0; len < size; len++)
		ASSERT_RET(dedup_recipe_segment_decode(b, len, &seg), -EBADMSG);
}

int main(void) {
	test_layout();
	test_literals();
	test_limits();
	test_bad_fields();
	test_flips_and_truncation();
	return 0;
}
