/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Recipe segments: the layout of docs/FORMAT.md, round trips, the limits
 * (entry count, lengths, zero runs, literals, file size), and rejection of
 * every single-bit flip, every truncation, and impossible values behind a
 * good checksum.  Version 3 (varints) is what is written; versions 1 and 2
 * (fixed-width entries, written by earlier releases) are built here byte by
 * byte as docs/FORMAT.md lays them out, and must still read.
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

/*
 * A version 1 or 2 segment (fixed-width entries, literals after them), as
 * releases before version 3 wrote it: version 2 exactly with Oracle chunking.
 */
static size_t fixed_segment(const DedupChunkerParams *p, uint64_t start, const DedupRecipeEntry *e, size_t n,
			    uint8_t *b) {
	memcpy(b, "\x89" "FRS", 4);
	b[4] = p->mode == DEDUP_CHUNKER_ORACLE ? 2 : 1;
	b[5] = (uint8_t) p->mode;
	le16_put(b + 6, 0);
	le32_put(b + 8, (uint32_t) p->min_size);
	le32_put(b + 12, (uint32_t) p->avg_size);
	le32_put(b + 16, (uint32_t) p->max_size);
	le32_put(b + 20, (uint32_t) n);
	le64_put(b + 24, start);
	size_t len = 40 + 12 * n;
	for (size_t i = 0; i < n; i++) {
		le64_put(b + 40 + 12 * i, e[i].chunk);
		le32_put(b + 48 + 12 * i, e[i].length);
		if (e[i].chunk == DEDUP_RECIPE_LITERAL) {
			memcpy(b + len, e[i].literal, e[i].length);
			len += e[i].length;
		}
	}
	reseal(b, len);
	return len;
}

/* Version 3: length << 2 | kind, then the chunk id's zigzag difference from the previous chunk's. */
static void test_layout(void) {
	DedupRecipeEntry e[] = { { 7, 100 }, { 0, 5000 }, { 8, 16384 }, { 3, 64 }, { 0xffffffffffull, 4u << 20 } };
	uint8_t buf[DEDUP_RECIPE_HEADER_SIZE + 5 * DEDUP_RECIPE_ENTRY_SIZE_MAX];
	size_t size;
	ASSERT_OK(dedup_recipe_segment_encode(&cdc, 1000, e, 5, buf, sizeof(buf), &size));
	ASSERT(memcmp(buf, "\x89" "FRS\x03\x00\x00\x00", 8) == 0);
	ASSERT(le32_get(buf + 8) == 4096 && le32_get(buf + 12) == 16384 && le32_get(buf + 16) == 65536);
	ASSERT(le32_get(buf + 20) == 5 && le64_get(buf + 24) == 1000);
	static const uint8_t entries[] = {
		0x90, 0x03, 0x0e,             /* 100 << 2 = 400; chunk 7: +7, zigzag 14 */
		0xa1, 0x9c, 0x01,             /* 5000 << 2 | 1: zeros */
		0x80, 0x80, 0x04, 0x02,       /* 16384 << 2; chunk 8: +1, zigzag 2 */
		0x80, 0x02, 0x09,             /* 64 << 2; chunk 3: -5, zigzag 9 */
		0x80, 0x80, 0x80, 0x08,       /* 4 MiB << 2; chunk 2^40 - 1: + 2^40 - 4 */
		0xf8, 0xff, 0xff, 0xff, 0xff, 0x3f,
	};
	ASSERT(size == 40 + sizeof(entries) && memcmp(buf + 40, entries, sizeof(entries)) == 0);

	DedupRecipeSegment *seg;
	ASSERT_OK(dedup_recipe_segment_decode(buf, size, &seg));
	ASSERT(seg->start == 1000 && seg->length == 100 + 5000 + 16384 + 64 + (4u << 20) && seg->n_entries == 5);
	ASSERT(seg->params.mode == DEDUP_CHUNKER_CDC && seg->params.avg_size == 16384);
	for (size_t i = 0; i < 5; i++)
		ASSERT(seg->entries[i].chunk == e[i].chunk && seg->entries[i].length == e[i].length);
	free(seg);

	DedupChunkerParams fixed = DEDUP_CHUNKER_PARAMS_FIXED(8192);
	ASSERT_OK(dedup_recipe_segment_encode(&fixed, 0, e, 1, buf, sizeof(buf), &size));
	ASSERT_OK(dedup_recipe_segment_decode(buf, size, &seg));
	ASSERT(seg->params.mode == DEDUP_CHUNKER_FIXED && seg->params.min_size == 8192);
	free(seg);

	/* What version 3 is for: a file's new chunks (consecutive ids) take four bytes each, a third of version 1's. */
	DedupRecipeEntry run[256];
	for (size_t i = 0; i < ELEMENTSOF(run); i++)
		run[i] = (DedupRecipeEntry) { .chunk = 1000000 + i, .length = 8000 + (uint32_t) i };
	uint8_t big[DEDUP_RECIPE_HEADER_SIZE + ELEMENTSOF(run) * DEDUP_RECIPE_ENTRY_SIZE_MAX];
	ASSERT_OK(dedup_recipe_segment_encode(&cdc, 0, run, ELEMENTSOF(run), big, sizeof(big), &size));
	ASSERT(size - 40 <= ELEMENTSOF(run) * 4 + 2);
}

/* Versions 1 and 2 as earlier releases wrote them: still read, entry for entry. */
static void test_fixed_versions(void) {
	DedupRecipeEntry e[] = { { 7, 100 }, { 0, 5000 }, { 0xffffffffffull, 4u << 20 } };
	uint8_t b[40 + 3 * 12 + 19];
	DedupRecipeSegment *seg;
	size_t size = fixed_segment(&cdc, 1000, e, 3, b);
	ASSERT(size == 40 + 3 * 12 && b[4] == 1);
	ASSERT_OK(dedup_recipe_segment_decode(b, size, &seg));
	ASSERT(seg->start == 1000 && seg->length == 100 + 5000 + (4u << 20) && seg->n_entries == 3);
	for (size_t i = 0; i < 3; i++)
		ASSERT(seg->entries[i].chunk == e[i].chunk && seg->entries[i].length == e[i].length);
	free(seg);

	DedupRecipeEntry o[] = {
		{ .chunk = 5, .length = 8192 },
		{ .chunk = DEDUP_RECIPE_LITERAL, .length = 16, .literal = (const uint8_t *) "frame one ......" },
		{ .chunk = DEDUP_RECIPE_LITERAL, .length = 3, .literal = (const uint8_t *) "end" },
	};
	size = fixed_segment(&oracle, 64, o, 3, b);
	ASSERT(size == sizeof(b) && b[4] == 2);
	ASSERT_OK(dedup_recipe_segment_decode(b, size, &seg));
	ASSERT(seg->n_entries == 3 && seg->length == 8192 + 19);
	ASSERT(memcmp(seg->entries[1].literal, "frame one ......", 16) == 0 && memcmp(seg->entries[2].literal, "end", 3) == 0);
	free(seg);

	/* Version 2 where version 1 says it all, and the reverse: neither was ever written. */
	size = fixed_segment(&cdc, 0, e, 1, b);
	b[4] = 2;
	reseal(b, size);
	ASSERT_RET(dedup_recipe_segment_decode(b, size, &seg), -EBADMSG);
	size = fixed_segment(&oracle, 0, o, 1, b);
	b[4] = 1;
	reseal(b, size);
	ASSERT_RET(dedup_recipe_segment_decode(b, size, &seg), -EBADMSG);
	/* A literal byte too many or too few behind a good checksum. */
	size = fixed_segment(&oracle, 64, o, 3, b);
	reseal(b, size - 1);
	ASSERT_RET(dedup_recipe_segment_decode(b, size - 1, &seg), -EBADMSG);
	size = fixed_segment(&oracle, 64, o, 2, b);
	b[size] = 'x';
	reseal(b, size + 1);
	ASSERT_RET(dedup_recipe_segment_decode(b, size + 1, &seg), -EBADMSG);
	/* An empty entry, a chunk too long, a zero run too long. */
	static const uint32_t bad_lengths[] = { 0, (4u << 20) + 1 };
	for (size_t i = 0; i < ELEMENTSOF(bad_lengths); i++) {
		size = fixed_segment(&cdc, 0, e, 2, b);
		le32_put(b + 48, bad_lengths[i]);
		reseal(b, size);
		ASSERT_RET(dedup_recipe_segment_decode(b, size, &seg), -EBADMSG);
	}
	size = fixed_segment(&cdc, 0, e, 2, b);
	le32_put(b + 60, DEDUP_RECIPE_ZERO_RUN_MAX + 1);
	reseal(b, size);
	ASSERT_RET(dedup_recipe_segment_decode(b, size, &seg), -EBADMSG);
	/* Every bit flip and every truncation. */
	size = fixed_segment(&oracle, 64, o, 3, b);
	for (size_t i = 0; i < size * 8; i++) {
		b[i / 8] ^= (uint8_t) (1u << (i % 8));
		int r = dedup_recipe_segment_decode(b, size, &seg);
		ASSERT(r == -EBADMSG || r == -EPROTONOSUPPORT);
		b[i / 8] ^= (uint8_t) (1u << (i % 8));
	}
	for (size_t len = 0; len < size; len++)
		ASSERT_RET(dedup_recipe_segment_decode(b, len, &seg), -EBADMSG);
}

/* Version 3's entries behind a good checksum: each must decode to exactly one thing, or be refused. */
static void test_bad_varints(void) {
	DedupRecipeEntry e[] = { { 1, 4096 } };
	uint8_t b[64];
	DedupRecipeSegment *seg;
	size_t size;
	ASSERT_OK(dedup_recipe_segment_encode(&cdc, 0, e, 1, b, sizeof(b), &size));
	ASSERT(size == 44 && memcmp(b + 40, "\x80\x80\x01\x02", 4) == 0);

	struct {
		const char *why;
		uint8_t bytes[16];
		size_t n;
		int want;
		uint64_t chunk, length; /* what a good one decodes to */
	} cases[] = {
		{ "good", { 0x80, 0x80, 0x01, 0x02 }, 4, 0, 1, 4096 },
		{ "the longest zero run", { 0x81, 0x80, 0x80, 0x80, 0x10 }, 5, 0, 0, DEDUP_RECIPE_ZERO_RUN_MAX },
		{ "kind 3", { 0x83, 0x80, 0x01, 0x02 }, 4, -EBADMSG },
		{ "length 0", { 0x00, 0x02 }, 2, -EBADMSG },
		{ "length not minimal", { 0x80, 0x80, 0x81, 0x00, 0x02 }, 5, -EBADMSG },
		{ "id not minimal", { 0x80, 0x80, 0x01, 0x82, 0x00 }, 5, -EBADMSG },
		{ "chunk id 0", { 0x80, 0x80, 0x01, 0x00 }, 4, -EBADMSG },
		{ "chunk id 2^64 - 1", { 0x80, 0x80, 0x01, 0x01 }, 4, -EBADMSG },
		{ "a byte after the last entry", { 0x80, 0x80, 0x01, 0x02, 0x00 }, 5, -EBADMSG },
		{ "cut inside a varint", { 0x80, 0x80, 0x01, 0x82 }, 4, -EBADMSG },
		{ "an id past 64 bits", { 0x80, 0x80, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02 }, 13,
		  -EBADMSG },
		{ "a length past 32 bits", { 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x02 }, 7, -EBADMSG },
		{ "a literal without Oracle chunking", { 0x06, 'x' }, 2, -EBADMSG },
		{ "zeros beyond a zero run", { 0x85, 0x80, 0x80, 0x80, 0x10 }, 5, -EBADMSG },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		memcpy(b + 40, cases[i].bytes, cases[i].n);
		reseal(b, 40 + cases[i].n);
		int r = dedup_recipe_segment_decode(b, 40 + cases[i].n, &seg);
		if (r != cases[i].want) {
			fprintf(stderr, "varint case %zu (%s): %d\n", i, cases[i].why, r);
			abort();
		}
		if (r == 0) {
			ASSERT(seg->entries[0].chunk == cases[i].chunk && seg->entries[0].length == cases[i].length);
			free(seg);
		}
	}
}

static void test_limits(void) {
	size_t size;
	uint8_t *buf = test_malloc(DEDUP_RECIPE_SEGMENT_SIZE_MAX + 100);
	DedupRecipeEntry *e = test_malloc((DEDUP_RECIPE_SEGMENT_ENTRIES_MAX + 1) * sizeof(*e));
	for (size_t i = 0; i <= DEDUP_RECIPE_SEGMENT_ENTRIES_MAX; i++)
		e[i] = (DedupRecipeEntry) { .chunk = i + 1, .length = 1 };

	ASSERT_OK(dedup_recipe_segment_encode(&cdc, 0, e, DEDUP_RECIPE_SEGMENT_ENTRIES_MAX, buf,
					      DEDUP_RECIPE_SEGMENT_SIZE_MAX, &size));
	ASSERT(size == 40 + 2 * DEDUP_RECIPE_SEGMENT_ENTRIES_MAX);
	/* The largest: every entry a literal of the most bytes. */
	uint8_t lit[DEDUP_RECIPE_LITERAL_MAX + 1] = "0123456789abcdef0123456789abcdefX";
	for (size_t i = 0; i < DEDUP_RECIPE_SEGMENT_ENTRIES_MAX; i++)
		e[i] = (DedupRecipeEntry) { .chunk = DEDUP_RECIPE_LITERAL, .length = DEDUP_RECIPE_LITERAL_MAX, .literal = lit };
	ASSERT_OK(dedup_recipe_segment_encode(&oracle, 0, e, DEDUP_RECIPE_SEGMENT_ENTRIES_MAX, buf,
					      DEDUP_RECIPE_SEGMENT_SIZE_MAX, &size));
	ASSERT(size == 40 + (2 + DEDUP_RECIPE_LITERAL_MAX) * DEDUP_RECIPE_SEGMENT_ENTRIES_MAX &&
	       size <= DEDUP_RECIPE_SEGMENT_SIZE_MAX);
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
	ASSERT_RET(dedup_recipe_segment_encode(&cdc, 0, e, 2, buf, 40 + 15 * 2 - 1, &size), -ENOBUFS);

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

/* Impossible header values with the checksum made right: the field checks themselves must refuse them. */
static void test_bad_fields(void) {
	DedupRecipeEntry e[] = { { 1, 4096 }, { 0, 100 } };
	uint8_t good[DEDUP_RECIPE_HEADER_SIZE + 2 * DEDUP_RECIPE_ENTRY_SIZE_MAX], b[sizeof(good)];
	DedupRecipeSegment *seg;
	size_t size;
	ASSERT_OK(dedup_recipe_segment_encode(&cdc, 0, e, 2, good, sizeof(good), &size));
	ASSERT(size == 46);

	struct {
		size_t off, width;
		uint64_t value;
		int want;
	} cases[] = {
		{ 4, 1, 0, -EBADMSG },                    /* version 0 */
		{ 4, 1, 1, -EBADMSG },                    /* version 1's layout over version 3's bytes */
		{ 4, 1, 2, -EBADMSG },                    /* version 2's, and not Oracle chunking */
		{ 4, 1, 4, -EPROTONOSUPPORT },            /* a newer version */
		{ 5, 1, 3, -EBADMSG },                    /* chunker mode */
		{ 6, 2, 1, -EBADMSG },                    /* flags */
		{ 12, 4, 10000, -EBADMSG },               /* avg not a power of two */
		{ 8, 4, 1u << 20, -EBADMSG },             /* min > avg */
		{ 16, 4, 8u << 20, -EBADMSG },            /* max beyond the chunk limit */
		{ 20, 4, 3, -EBADMSG },                   /* count vs length */
		{ 20, 4, 1, -EBADMSG },                   /* count vs length */
		{ 20, 4, 0, -EBADMSG },                   /* no entries */
		{ 24, 8, UINT64_MAX, -EBADMSG },          /* start beyond any file */
		{ 24, 8, INT64_MAX - 4000, -EBADMSG },    /* start + lengths overflow the file size */
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		memcpy(b, good, size);
		if (cases[i].width == 1)
			b[cases[i].off] = (uint8_t) cases[i].value;
		else if (cases[i].width == 2)
			le16_put(b + cases[i].off, (uint16_t) cases[i].value);
		else if (cases[i].width == 4)
			le32_put(b + cases[i].off, (uint32_t) cases[i].value);
		else
			le64_put(b + cases[i].off, cases[i].value);
		reseal(b, size);
		int r = dedup_recipe_segment_decode(b, size, &seg);
		if (r != cases[i].want) {
			fprintf(stderr, "case %zu: %d\n", i, r);
			abort();
		}
	}
	/* And a good one with the checksum made right decodes. */
	memcpy(b, good, size);
	reseal(b, size);
	ASSERT_OK(dedup_recipe_segment_decode(b, size, &seg));
	free(seg);
}

static void test_flips_and_truncation(void) {
	DedupRecipeEntry e[] = { { 9, 70000 }, { 0, 1 }, { 12, 64 }, { 9, 70000 } };
	uint8_t b[DEDUP_RECIPE_HEADER_SIZE + 4 * DEDUP_RECIPE_ENTRY_SIZE_MAX];
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

/* Oracle chunking: literals in line, each after its entry. */
static void test_literals(void) {
	DedupRecipeEntry e[] = {
		{ .chunk = 5, .length = 8192 },
		{ .chunk = DEDUP_RECIPE_LITERAL, .length = 16, .literal = (const uint8_t *) "frame one ......" },
		{ .chunk = 6, .length = 8192 },
		{ .chunk = DEDUP_RECIPE_LITERAL, .length = 3, .literal = (const uint8_t *) "end" },
		{ .chunk = 0, .length = 100 },
	};
	uint8_t b[DEDUP_RECIPE_HEADER_SIZE + 5 * DEDUP_RECIPE_ENTRY_SIZE_MAX + 19], c[sizeof(b) + 40];
	DedupRecipeSegment *seg;
	size_t size;
	ASSERT_OK(dedup_recipe_segment_encode(&oracle, 64, e, 5, b, sizeof(b), &size));
	ASSERT(size == 40 + 4 + 17 + 4 + 4 + 2);
	ASSERT(b[4] == 3 && b[5] == DEDUP_CHUNKER_ORACLE);
	ASSERT(b[44] == (16 << 2 | 2) && memcmp(b + 45, "frame one ......", 16) == 0);
	ASSERT(b[65] == (3 << 2 | 2) && memcmp(b + 66, "end", 3) == 0);
	ASSERT_OK(dedup_recipe_segment_decode(b, size, &seg));
	ASSERT(seg->n_entries == 5 && seg->length == 8192 * 2 + 19 + 100 && seg->params.mode == DEDUP_CHUNKER_ORACLE);
	ASSERT(memcmp(seg->entries[1].literal, "frame one ......", 16) == 0 && memcmp(seg->entries[3].literal, "end", 3) == 0);
	ASSERT(seg->entries[2].chunk == 6);
	ASSERT(!dedup_recipe_entry_is_chunk(&seg->entries[1]) && !dedup_recipe_entry_is_chunk(&seg->entries[4]) &&
	       dedup_recipe_entry_is_chunk(&seg->entries[0]));
	free(seg);

	/* A byte too many, or too few, behind a good checksum. */
	memcpy(c, b, size);
	c[size] = 'x';
	reseal(c, size + 1);
	ASSERT_RET(dedup_recipe_segment_decode(c, size + 1, &seg), -EBADMSG);
	memcpy(c, b, size);
	reseal(c, size - 1);
	ASSERT_RET(dedup_recipe_segment_decode(c, size - 1, &seg), -EBADMSG);
	/* A literal longer than allowed, or in a CDC segment. */
	memcpy(c, b, 40);
	le32_put(c + 20, 1);
	c[40] = (DEDUP_RECIPE_LITERAL_MAX + 1) << 2 | 2;
	c[41] = 1;
	memset(c + 42, 'x', DEDUP_RECIPE_LITERAL_MAX + 1);
	reseal(c, 42 + DEDUP_RECIPE_LITERAL_MAX + 1);
	ASSERT_RET(dedup_recipe_segment_decode(c, 42 + DEDUP_RECIPE_LITERAL_MAX + 1, &seg), -EBADMSG);
	c[40] = (DEDUP_RECIPE_LITERAL_MAX << 2 | 2 | 0x80) & 0xff; /* two varint bytes */
	reseal(c, 42 + DEDUP_RECIPE_LITERAL_MAX);
	ASSERT_OK(dedup_recipe_segment_decode(c, 42 + DEDUP_RECIPE_LITERAL_MAX, &seg));
	free(seg);
	memcpy(c, b, size);
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
	test_fixed_versions();
	test_bad_varints();
	test_literals();
	test_limits();
	test_bad_fields();
	test_flips_and_truncation();
	return 0;
}
