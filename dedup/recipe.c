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

/* Version 3's entry kinds, in the low bits of an entry's first varint. */
enum { KIND_CHUNK = 0, KIND_ZEROS = 1, KIND_LITERAL = 2, KIND_BITS = 2 };

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

static uint8_t *varint_put(uint8_t *p, uint64_t v) {
	for (; v >= 0x80; v >>= 7)
		*p++ = (uint8_t) (v | 0x80);
	*p++ = (uint8_t) v;
	return p;
}

/*
 * Reads a varint from *p, before end; moves *p past it.  Only the shortest
 * encoding of a value is accepted (no trailing zero groups), so that every
 * segment has one encoding.
 */
static bool varint_get(const uint8_t **p, const uint8_t *end, uint64_t *ret) {
	uint64_t v = 0;
	for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t byte = *(*p)++;
		if (shift == 63 && byte > 1)
			return false; /* past 64 bits */
		v |= (uint64_t) (byte & 0x7f) << shift;
		if (!(byte & 0x80)) {
			*ret = v;
			return byte != 0 || shift == 0;
		}
	}
	return false;
}

/* A chunk id as the difference from the previous one, small in either direction: zigzag. */
static uint64_t zigzag(uint64_t delta) {
	return (delta << 1) ^ (uint64_t) -(int64_t) (delta >> 63);
}

static uint64_t unzigzag(uint64_t z) {
	return (z >> 1) ^ (uint64_t) -(int64_t) (z & 1);
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
	/* The bound, not the size: what the varints take is known once written. */
	if (size < DEDUP_RECIPE_HEADER_SIZE + n * DEDUP_RECIPE_ENTRY_SIZE_MAX + literals)
		return -ENOBUFS;

	uint8_t *b = buf, *e = b + R_ENTRIES;
	memcpy(b + R_MAGIC, recipe_magic, sizeof(recipe_magic));
	b[R_VERSION] = DEDUP_RECIPE_VERSION;
	b[R_MODE] = (uint8_t) p->mode;
	le16_put(b + R_FLAGS, 0);
	le32_put(b + R_MIN, (uint32_t) p->min_size);
	le32_put(b + R_AVG, (uint32_t) p->avg_size);
	le32_put(b + R_MAX, (uint32_t) p->max_size);
	le32_put(b + R_COUNT, (uint32_t) n);
	le64_put(b + R_START, start);
	uint64_t prev = 0;
	for (size_t i = 0; i < n; i++) {
		const DedupRecipeEntry *x = entries + i;
		unsigned kind = x->chunk == 0 ? KIND_ZEROS : x->chunk == DEDUP_RECIPE_LITERAL ? KIND_LITERAL : KIND_CHUNK;
		e = varint_put(e, (uint64_t) x->length << KIND_BITS | kind);
		if (kind == KIND_CHUNK) {
			e = varint_put(e, zigzag(x->chunk - prev));
			prev = x->chunk;
		} else if (kind == KIND_LITERAL) {
			memcpy(e, x->literal, x->length);
			e += x->length;
		}
	}
	size_t len = (size_t) (e - b);
	le64_put(b + R_CHECKSUM, checksum(b, len));
	*ret_size = len;
	return 0;
}

/* Versions 1 and 2: 12-byte entries (chunk id, length), then the literals back to back. */
static int decode_fixed(const uint8_t *b, size_t len, size_t n, bool oracle, DedupRecipeSegment *s, uint64_t *end) {
	size_t table = DEDUP_RECIPE_HEADER_SIZE + n * DEDUP_RECIPE_ENTRY_SIZE;
	if (len < table)
		return -EBADMSG;
	size_t literals = len - table;
	uint8_t *lit = (uint8_t *) (s->entries + n);
	memcpy(lit, b + table, literals);
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *e = b + R_ENTRIES + i * DEDUP_RECIPE_ENTRY_SIZE;
		s->entries[i] = (DedupRecipeEntry) { .chunk = le64_get(e), .length = le32_get(e + 8) };
		if (!entry_is_valid(s->entries + i, oracle) || __builtin_add_overflow(*end, s->entries[i].length, end) ||
		    *end > DEDUP_RECIPE_FILE_SIZE_MAX)
			return -EBADMSG;
		if (s->entries[i].chunk == DEDUP_RECIPE_LITERAL) {
			if (s->entries[i].length > literals - used)
				return -EBADMSG;
			s->entries[i].literal = lit + used;
			used += s->entries[i].length;
		}
	}
	/* Every literal byte belongs to a literal entry. */
	return used == literals ? 0 : -EBADMSG;
}

/* Version 3: per entry, varint length << 2 | kind, then a chunk's zigzag id difference or a literal's bytes. */
static int decode_varint(const uint8_t *b, size_t len, size_t n, bool oracle, DedupRecipeSegment *s, uint64_t *end) {
	const uint8_t *p = b + R_ENTRIES, *stop = b + len;
	uint8_t *lit = (uint8_t *) (s->entries + n);
	uint64_t prev = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t lk, z;
		if (!varint_get(&p, stop, &lk) || lk >> KIND_BITS > UINT32_MAX)
			return -EBADMSG;
		DedupRecipeEntry *x = s->entries + i;
		*x = (DedupRecipeEntry) { .length = (uint32_t) (lk >> KIND_BITS) };
		switch (lk & ((1u << KIND_BITS) - 1)) {
		case KIND_CHUNK:
			if (!varint_get(&p, stop, &z))
				return -EBADMSG;
			x->chunk = prev + unzigzag(z);
			/* Zeros and literals have kinds of their own: ids 0 and 2^64 - 1 name no chunk. */
			if (!dedup_recipe_entry_is_chunk(x))
				return -EBADMSG;
			prev = x->chunk;
			break;
		case KIND_ZEROS:
			break;
		case KIND_LITERAL:
			x->chunk = DEDUP_RECIPE_LITERAL;
			if (x->length > (size_t) (stop - p))
				return -EBADMSG;
			memcpy(lit, p, x->length);
			x->literal = lit;
			lit += x->length;
			p += x->length;
			break;
		default:
			return -EBADMSG;
		}
		if (!entry_is_valid(x, oracle) || __builtin_add_overflow(*end, x->length, end) ||
		    *end > DEDUP_RECIPE_FILE_SIZE_MAX)
			return -EBADMSG;
	}
	/* Nothing after the last entry. */
	return p == stop ? 0 : -EBADMSG;
}

int dedup_recipe_segment_decode(const void *buf, size_t len, DedupRecipeSegment **ret) {
	const uint8_t *b = buf;

	if (!b || len < DEDUP_RECIPE_HEADER_SIZE || memcmp(b + R_MAGIC, recipe_magic, sizeof(recipe_magic)) != 0)
		return -EBADMSG;
	uint8_t version = b[R_VERSION];
	if (version == 0)
		return -EBADMSG;
	if (version > DEDUP_RECIPE_VERSION)
		return -EPROTONOSUPPORT;

	/* Every entry takes at least one byte and at most the widest entry and literal. */
	uint32_t n = le32_get(b + R_COUNT);
	if (n == 0 || n > DEDUP_RECIPE_SEGMENT_ENTRIES_MAX || len < DEDUP_RECIPE_HEADER_SIZE + n ||
	    len > DEDUP_RECIPE_HEADER_SIZE + (size_t) n * (DEDUP_RECIPE_ENTRY_SIZE_MAX + DEDUP_RECIPE_LITERAL_MAX))
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
	/* Versions 1 and 2 were canonical too: version 2 exactly for Oracle chunking (the only one with literals). */
	bool oracle = p.mode == DEDUP_CHUNKER_ORACLE;
	if (dedup_chunker_params_validate(&p) < 0 || (version < 3 && version != (oracle ? 2 : 1)))
		return -EBADMSG;

	uint64_t start = le64_get(b + R_START), end = start;
	if (start > DEDUP_RECIPE_FILE_SIZE_MAX)
		return -EBADMSG;

	/* The literals take fewer bytes than the segment: room for them whatever the version. */
	DedupRecipeSegment *s = malloc(sizeof(*s) + (size_t) n * sizeof(DedupRecipeEntry) + len);
	if (!s)
		return -ENOMEM;
	int r = version < 3 ? decode_fixed(b, len, n, oracle, s, &end) : decode_varint(b, len, n, oracle, s, &end);
	if (r < 0) {
		free(s);
		return r;
	}
	s->params = p;
	s->start = start;
	s->length = end - start;
	s->n_entries = n;
	*ret = s;
	return 0;
}
