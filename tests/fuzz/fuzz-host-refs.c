/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target for reference publications (dedup/refs.c, h/NAME/r/EPOCH.ftr),
 * as every collector of a shared tier reads the others' from a filer nobody
 * vouches for: garbage is -EBADMSG, and a publication that parses formats
 * back to exactly the same bytes.  Whoever can write the tier can compute
 * the checksum, so each input is parsed a second time with it recomputed:
 * that drives the header and entry checks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dedup/refs.h"
#include "tests/fuzz/fuzz.h"

static void check_parsed(const uint8_t *data, size_t size) {
	DedupRefsHeader h;
	int r = dedup_refs_parse(data, size, &h);
	if (r == -EBADMSG)
		return;
	if (r < 0 || dedup_refs_size(h.n_acks, h.n_refs) != size)
		abort();
	DedupRefsEntry *acks = calloc((size_t) h.n_acks + 1, sizeof(*acks));
	DedupRefsEntry *refs = calloc((size_t) h.n_refs + 1, sizeof(*refs));
	if (!acks || !refs)
		abort();
	for (uint32_t i = 0; i < h.n_acks; i++)
		dedup_refs_ack_get(data, i, acks + i);
	for (uint32_t i = 0; i < h.n_refs; i++)
		dedup_refs_ref_get(data, &h, i, refs + i);
	uint8_t *again = NULL;
	if (dedup_refs_format(&h, acks, refs, &again) < 0 || memcmp(again, data, size) != 0)
		abort();
	free(again);
	free(acks);
	free(refs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	check_parsed(data, size);
	if (size >= dedup_refs_size(0, 0) && size <= dedup_refs_size(0, 256)) {
		uint8_t *copy = malloc(size);
		if (!copy)
			abort();
		memcpy(copy, data, size);
		uint64_t sum = XXH3_64bits(copy, size - DEDUP_REFS_TRAILER_SIZE);
		memcpy(copy + size - DEDUP_REFS_TRAILER_SIZE, &sum, sizeof(sum)); /* little endian hosts only */
		check_parsed(copy, size);
		free(copy);
	}
	return 0;
}
