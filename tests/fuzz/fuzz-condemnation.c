/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target for condemnations (dedup/refs.c, h/NAME/k/EPOCH.ftk, and the
 * merged ones k/EPOCH.ftm, which have the same format), as every
 * host doing global dedup reads the others' from a filer nobody vouches
 * for: garbage is -EBADMSG, and a condemnation that parses has ascending
 * ids and formats back to exactly the same bytes.  Each input is parsed a
 * second time with its checksum recomputed, as fuzz-host-refs does.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dedup/refs.h"
#include "tests/fuzz/fuzz.h"

static void check_parsed(const uint8_t *data, size_t size) {
	DedupCondemnHeader h;
	int r = dedup_condemn_parse(data, size, &h);
	if (r == -EBADMSG)
		return;
	if (r < 0 || dedup_condemn_size(h.count) != size || h.count == 0)
		abort();
	uint64_t *ids = malloc((size_t) h.count * sizeof(*ids));
	if (!ids)
		abort();
	for (uint64_t i = 0; i < h.count; i++) {
		ids[i] = dedup_condemn_get(data, i);
		if (ids[i] == 0 || (i > 0 && ids[i] <= ids[i - 1]))
			abort();
	}
	uint8_t *again = NULL;
	if (dedup_condemn_format(&h, ids, (size_t) h.count, &again) < 0 || memcmp(again, data, size) != 0)
		abort();
	free(again);
	free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	check_parsed(data, size);
	if (size >= dedup_condemn_size(1) && size <= dedup_condemn_size(1024)) {
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
