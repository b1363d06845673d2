/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target for a lower tier's description, as disaster recovery reads it
 * back from a tier nobody vouches for: the description object
 * (dedup/describe.c) and each record's attributes blob (tier/file-attrs.c).
 * Garbage must be rejected with -EBADMSG or -EPROTONOSUPPORT; a record
 * handed over must keep every promise of describe.h (entries adding up to
 * its size, zero runs with zero ids, literals only with Oracle chunking,
 * limits), and an attributes blob that
 * parses must format back to exactly the same bytes (one encoding each).
 * Each input is parsed a second time with every checksum recomputed, so the
 * field checks run on arbitrary values.  Each is also opened as a sealed
 * description (version 3, docs/FORMAT.md "Sealed description") under a
 * fixed key, its envelope checksum recomputed: garbage must fail cleanly
 * (the tag), and what opens is parsed as above.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dedup/describe.h"
#include "dedup/le-internal.h"
#include "dedup/recipe.h"
#include "tier/file-attrs.h"
#include "tests/fuzz/fuzz.h"

static uint8_t *copy, *again;

static void check(bool ok) {
	if (!ok)
		abort();
}

static int visit(const DedupDescribedFile *f, void *userdata) {
	check(f->attrs_len <= DEDUP_DESCRIPTION_ATTRS_MAX);
	if (f->has_recipe) {
		uint64_t total = 0;
		check(dedup_chunker_params_validate(&f->params) >= 0);
		for (size_t i = 0; i < f->n_entries; i++) {
			const DedupDescribedEntry *e = &f->entries[i];
			check(e->length > 0);
			check(!(e->zero && e->literal));
			if (e->zero) {
				static const DedupChunkId zero;
				check(e->length <= DEDUP_RECIPE_ZERO_RUN_MAX && dedup_chunk_id_equal(&e->id, &zero));
			} else if (e->literal) {
				/* Only with Oracle chunking; the bytes past the literal's length are zero. */
				check(f->params.mode == DEDUP_CHUNKER_ORACLE && e->length <= DEDUP_RECIPE_LITERAL_MAX);
				for (size_t k = e->length; k < DEDUP_CHUNK_ID_SIZE; k++)
					check(e->id.bytes[k] == 0);
			} else
				check(e->length <= DEDUP_CHUNK_SIZE_LIMIT_MAX);
			total += e->length;
		}
		check(total == f->size);
	} else
		check(f->n_entries == 0 && f->size == 0);

	TierFileAttrs *a = malloc(sizeof(*a));
	check(a);
	int r = tier_file_attrs_parse(f->attrs, f->attrs_len, a);
	if (r >= 0) {
		size_t len;
		again = realloc(again, TIER_FILE_ATTRS_SIZE_MAX);
		check(again);
		check(tier_file_attrs_format(a, again, TIER_FILE_ATTRS_SIZE_MAX, &len) >= 0);
		check(len == f->attrs_len && memcmp(again, f->attrs, len) == 0);
	} else
		check(r == -EBADMSG || r == -EPROTONOSUPPORT);
	free(a);
	return 0;
}

static void parse(const uint8_t *data, size_t size) {
	DedupDescriptionInfo info;
	int r = dedup_description_parse(data, size, visit, NULL, &info);
	check(r >= 0 || r == -EBADMSG || r == -EPROTONOSUPPORT || r == -ENOMEM);
}

/* Recomputes the checksums of a description image in place, as far as its lengths allow. */
static void rechecksum(uint8_t *p, size_t size) {
	if (size < DEDUP_DESCRIPTION_HEADER_SIZE + DEDUP_DESCRIPTION_TRAILER_SIZE)
		return;
	le64_put(p + 56, XXH3_64bits(p, 56));
	size_t end = size - DEDUP_DESCRIPTION_TRAILER_SIZE;
	for (size_t off = DEDUP_DESCRIPTION_HEADER_SIZE; end - off >= 12;) {
		size_t body = le32_get(p + off);
		if (body > end - off - 12)
			break;
		le64_put(p + off + 4 + body, XXH3_64bits(p + off, 4 + body));
		off += 4 + body + 8;
	}
	le64_put(p + end + 16, XXH3_64bits(p, end));
	le64_put(p + end + 24, XXH3_64bits(p + end, 24));
}

static void unseal(const uint8_t *data, size_t size) {
	static const uint8_t key[32] = "fratier fuzz description key 32";
	size_t len;
	memcpy(copy, data, size);
	if (size >= DEDUP_DESCRIPTION_HEADER_SIZE && copy[4] == DEDUP_DESCRIPTION_VERSION_SEALED)
		le64_put(copy + 56, XXH3_64bits(copy, 56));
	int r = dedup_description_unseal(copy, size, key, &len);
	check(r == 0 || r == -EBADMSG || r == -ENOMEM);
	if (r == 0) {
		check(len <= size);
		parse(copy, len);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	parse(data, size);
	copy = realloc(copy, size ? size : 1);
	check(copy);
	unseal(data, size);
	memcpy(copy, data, size);
	rechecksum(copy, size);
	parse(copy, size);
	return 0;
}
