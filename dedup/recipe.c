/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Recipe segment encoding.  Format: docs/FORMAT.md, "Recipes".
 *
 * Invariants:
 *  1. encode and decode accept exactly the same set of segments: whatever
 *     encode produces decodes to the same entries, and decode refuses every
 *     segment encode would refuse to write.
 *  2. No field is used before the checksum over the whole blob passes, and
 *     every field is range-checked after it anyway (a hostile writer can
 *     compute checksums).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dedup/le-internal.h"
#include "dedup/recipe.h"

static const uint8_t recipe_magic[4] = { 0x89, 'F', 'R', 'S' };

enum {
	R_MAGIC = 0,
	R_VERSION = 4,
	R_MODE = 5,
	R_FLAGS = 6,
	R_MIN = 8,
	R_AVG = 12,
	R_MAX = 16,
	R_COUNT = 20,
	R_START = 24,
	R_CHECKSUM = 32,
	R_ENTRIES = 40,
};
_Static_assert(R_ENTRIES == DEDUP_RECIPE_HEADER_SIZE, "recipe header layout");
_Static_assert(DEDUP_RECIPE_SEGMENT_SIZE_MAX <= (1u << 20), "a segment fits CATALOG_RECIPE_SEGMENT_MAX");

static bool entry_is_valid(const DedupRecipeEntry *e, bool oracle) {
	if (e->length == 0)
		return false;
	if (e->chunk == 0)
		return e->length <= DEDUP_RECIPE_ZERO_RUN_MAX;
	if (e->chunk == DEDUP_RECIPE_LITERAL)
		return oracle && e->length <= DEDUP_RECIPE_LITERAL_MAX;
	return e->length <= DEDUP_CHUNK_SIZE_LIMIT_MAX;
}

/* XXH3-64 of the entries and literals, seeded with XXH3-64 of header bytes 0..31: covers every byte but itself. */
static uint64_t checksum(const uint8_t *p, size_t len) {
	return XXH3_64bits_withSeed(p + R_ENTRIES, len - R_ENTRIES, XXH3_64bits(p, R_CHECKSUM));
}

int dedup_recipe_segment_encode(const DedupChunkerParams *p, uint64_t start, const DedupRecipeEntry *entries,
				size_t n, void *buf, size_t size, size_t *ret_size) {
	uint64_t end = start;
	size_t literals = 0;

	if (!p || dedup_chunker_params_validate(p) < 0 || n == 0 || n > DEDUP_RECIPE_SEGMENT_ENTRIES_MAX)
		return -EINVAL;
	bool oracle = p->mode == DEDUP_CHUNKER_ORACLE;
	for (size_t i = 0; i < n; i++) {
		if (!entry_is_valid(entries + i, oracle) || __builtin_add_overflow(end, entries[i].length, &end))
			return -EINVAL;
		if (entries[i].chunk == DEDUP_RECIPE_LITERAL) {
			if (!entries[i].literal)
				return -EINVAL;
			literals += entries[i].length;
		}
	}
	if (end > DEDUP_RECIPE_FILE_SIZE_MAX)
		return -EINVAL;
	size_t need = dedup_recipe_segment_size(n, literals);
	if (size < need)
		return -ENOBUFS;

	uint8_t *b = buf, *lit = b + R_ENTRIES + n * DEDUP_RECIPE_ENTRY_SIZE;
	memcpy(b + R_MAGIC, recipe_magic, sizeof(recipe_magic));
	/* Version 1 for what version 1 can say: older readers still read it, and the encoding stays canonical. */
	b[R_VERSION] = oracle ? 2 : 1;
	b[R_MODE] = (uint8_t) p->mode;
	le16_put(b + R_FLAGS, 0);
	le32_put(b + R_MIN, (uint32_t) p->min_size);
	le32_put(b + R_AVG, (uint32_t) p->avg_size);
	le32_put(b + R_MAX, (uint32_t) p->max_size);
	le32_put(b + R_COUNT, (uint32_t) n);
	le64_put(b + R_START, start);
	for (size_t i = 0; i < n; i++) {
		uint8_t *e = b + R_ENTRIES + i * DEDUP_RECIPE_ENTRY_SIZE;
		le64_put(e, entries[i].chunk);
		le32_put(e + 8, entries[i].length);
		if (entries[i].chunk == DEDUP_RECIPE_LITERAL) {
			memcpy(lit, entries[i].literal, entries[i].length);
			lit += entries[i].length;
		}
	}
	le64_put(b + R_CHECKSUM, checksum(b, need));
	*ret_size = need;
	return 0;
}

int dedup_recipe_segment_decode(const void *buf, size_t len, DedupRecipeSegment **ret) {
	const uint8_t *b = buf;

	if (!b || len < DEDUP_RECIPE_HEADER_SIZE || memcmp(b + R_MAGIC, recipe_magic, sizeof(recipe_magic)) != 0)
		return -EBADMSG;
	if (b[R_VERSION] == 0)
		return -EBADMSG;
	if (b[R_VERSION] > DEDUP_RECIPE_VERSION)
		return -EPROTONOSUPPORT;

	uint32_t n = le32_get(b + R_COUNT);
	if (n == 0 || n > DEDUP_RECIPE_SEGMENT_ENTRIES_MAX || len < dedup_recipe_segment_size(n, 0) ||
	    len > dedup_recipe_segment_size(n, (size_t) n * DEDUP_RECIPE_LITERAL_MAX))
		return -EBADMSG;
	if (checksum(b, len) != le64_get(b + R_CHECKSUM))
		return -EBADMSG;
	if (le16_get(b + R_FLAGS) != 0 || b[R_MODE] >= _DEDUP_CHUNKER_MODE_MAX)
		return -EBADMSG;

	DedupChunkerParams p = {
		.mode = (DedupChunkerMode) b[R_MODE],
		.min_size = le32_get(b + R_MIN),
		.avg_size = le32_get(b + R_AVG),
		.max_size = le32_get(b + R_MAX),
	};
	/* Canonical: version 2 exactly for Oracle chunking (the only one with literals). */
	bool oracle = p.mode == DEDUP_CHUNKER_ORACLE;
	if (dedup_chunker_params_validate(&p) < 0 || b[R_VERSION] != (oracle ? 2 : 1))
		return -EBADMSG;

	uint64_t start = le64_get(b + R_START), end = start;
	if (start > DEDUP_RECIPE_FILE_SIZE_MAX)
		return -EBADMSG;

	size_t literals = len - dedup_recipe_segment_size(n, 0);
	DedupRecipeSegment *s = malloc(sizeof(*s) + (size_t) n * sizeof(DedupRecipeEntry) + literals);
	if (!s)
		return -ENOMEM;
	uint8_t *lit = (uint8_t *) (s->entries + n);
	memcpy(lit, b + dedup_recipe_segment_size(n, 0), literals);
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *e = b + R_ENTRIES + i * DEDUP_RECIPE_ENTRY_SIZE;
		s->entries[i] = (DedupRecipeEntry) { .chunk = le64_get(e), .length = le32_get(e + 8) };
		bool ok = entry_is_valid(s->entries + i, oracle) && !__builtin_add_overflow(end, s->entries[i].length, &end) &&
			  end <= DEDUP_RECIPE_FILE_SIZE_MAX;
		if (ok && s->entries[i].chunk == DEDUP_RECIPE_LITERAL) {
			ok = s->entries[i].length <= literals - used;
			s->entries[i].literal = lit + used;
			used += s->entries[i].length;
		}
		if (!ok) {
			free(s);
			return -EBADMSG;
		}
	}
	/* Every literal byte belongs to a literal entry. */
	if (used != literals) {
		free(s);
		return -EBADMSG;
	}
	s->params = p;
	s->start = start;
	s->length = end - start;
	s->n_entries = n;
	*ret = s;
	return 0;
}
