/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target for index segments (dedup/segment.c), as every host reads the
 * others' from a filer nobody vouches for:
 *
 *  - parsed as found: garbage is -EBADMSG; a segment that parses has only
 *    valid, strictly ascending entries and formats back to exactly the same
 *    bytes (one encoding per segment).  Whoever can write the tier can
 *    compute the checksum, so each input is parsed a second time with its
 *    checksum recomputed: that drives the header and entry checks;
 *  - the input cut into entries, sorted, formatted and parsed again: the
 *    entries must come back identical.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dedup/segment.h"
#include "tests/fuzz/fuzz.h"

static void check_parsed(const uint8_t *data, size_t size) {
	DedupSegmentHeader h;
	int r = dedup_segment_parse(data, size, &h);
	if (r == -EBADMSG)
		return;
	if (r < 0 || dedup_segment_size(h.count) != size)
		abort();
	DedupSegmentEntry *e = malloc((size_t) h.count * sizeof(*e) + 1);
	if (!e)
		abort();
	for (uint64_t i = 0; i < h.count; i++)
		dedup_segment_entry_get(data, i, e + i);
	uint8_t *again = NULL;
	if (dedup_segment_format(&h, e, (size_t) h.count, &again) < 0 || memcmp(again, data, size) != 0)
		abort();
	free(again);
	free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	check_parsed(data, size);
	if (size >= dedup_segment_size(0) && size <= dedup_segment_size(64)) {
		uint8_t *copy = malloc(size);
		if (!copy)
			abort();
		memcpy(copy, data, size);
		uint64_t sum = XXH3_64bits(copy, size - DEDUP_SEGMENT_TRAILER_SIZE);
		memcpy(copy + size - DEDUP_SEGMENT_TRAILER_SIZE, &sum, sizeof(sum)); /* little endian hosts only */
		check_parsed(copy, size);
		free(copy);
	}

	/* Round trip: each 40 bytes of input one entry (an id, then fields bent into range). */
	size_t n = size / 40;
	DedupSegmentEntry *e = calloc(n + 1, sizeof(*e));
	if (!e)
		abort();
	for (size_t i = 0; i < n; i++) {
		const uint8_t *p = data + i * 40;
		uint32_t v;
		memcpy(e[i].id.bytes, p, 32);
		memcpy(&v, p + 32, 4);
		e[i].container = 1 + v % 1000;
		e[i].offset = 64 + (uint64_t) v % (UINT64_C(1) << 30);
		memcpy(&v, p + 36, 4);
		e[i].plain_size = 1 + v % 65536;
		e[i].region_size = 65 + e[i].plain_size;
		e[i].region_offset = v % 4096;
		e[i].frame_size = 1 + v % e[i].region_size;
	}
	n = dedup_segment_entries_sort(e, n);
	DedupSegmentHeader h = { .epoch = size, .flags = size % 2 ? DEDUP_SEGMENT_FLAG_KEYED_IDS : 0 };
	memcpy(h.host, "db01", 5);
	if (size >= 16)
		memcpy(h.keys, data, sizeof(h.keys));
	uint8_t *buf = NULL;
	if (dedup_segment_format(&h, e, n, &buf) < 0)
		abort();
	DedupSegmentHeader got;
	if (dedup_segment_parse(buf, (size_t) dedup_segment_size(n), &got) < 0 || got.count != n ||
	    got.epoch != h.epoch || got.flags != h.flags || strcmp(got.host, "db01") != 0 ||
	    memcmp(got.keys, h.keys, sizeof(h.keys)) != 0)
		abort();
	for (size_t i = 0; i < n; i++) {
		DedupSegmentEntry x;
		dedup_segment_entry_get(buf, i, &x);
		if (memcmp(&x, e + i, sizeof(x)) != 0)
			abort();
	}
	free(buf);
	free(e);
	return 0;
}
