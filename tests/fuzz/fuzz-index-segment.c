/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target for index segments (dedup/segment.c), as every host reads the
 * others' from a filer nobody vouches for:
 *
 *  - parsed as found: garbage is -EBADMSG; a plain segment that parses has
 *    only valid, strictly ascending entries and formats back to exactly the
 *    same bytes (one encoding per segment); a sealed one is opened under
 *    FUZZ_KEY (the key corpus-index-segment/sealed-* were written under),
 *    and what opens has valid entries that format back, plain, to a
 *    segment that parses with the same entries.  Whoever can write the
 *    tier can compute the checksum, so each input is parsed a second time
 *    with its checksum recomputed: that drives the header and entry checks
 *    (and, sealed, the tag's);
 *  - the input cut into entries, sorted, formatted (sealed for every other
 *    input) and parsed again: the entries must come back identical, and a
 *    sealed segment with any one byte of its header, entries or tag
 *    changed (the checksum recomputed) must not open.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dedup/segment.h"
#include "tests/fuzz/fuzz.h"

static const uint8_t FUZZ_KEY[32] = "fratier fuzz-index-segment key!";

static void checksum_again(uint8_t *buf, size_t size) {
	uint64_t sum = XXH3_64bits(buf, size - DEDUP_SEGMENT_TRAILER_SIZE);
	memcpy(buf + size - DEDUP_SEGMENT_TRAILER_SIZE, &sum, sizeof(sum)); /* little endian hosts only */
}

static DedupSegmentEntry *entries_of(const uint8_t *buf, uint64_t count) {
	DedupSegmentEntry *e = malloc((size_t) count * sizeof(*e) + 1);
	if (!e)
		abort();
	for (uint64_t i = 0; i < count; i++)
		dedup_segment_entry_get(buf, i, e + i);
	return e;
}

static void check_parsed(const uint8_t *data, size_t size) {
	DedupSegmentHeader h;
	int r = dedup_segment_parse(data, size, &h);
	if (r == -EBADMSG)
		return;
	if (r < 0 || dedup_segment_size(h.count, h.sealed) != size)
		abort();
	uint8_t *opened = NULL;
	if (h.sealed) {
		opened = malloc(size);
		if (!opened)
			abort();
		memcpy(opened, data, size);
		if (dedup_segment_open(opened, size, FUZZ_KEY) < 0) {
			free(opened);
			return;
		}
		data = opened;
	}
	DedupSegmentEntry *e = entries_of(data, h.count);
	uint8_t *again = NULL;
	if (dedup_segment_format(&h, e, (size_t) h.count, NULL, &again) < 0)
		abort();
	DedupSegmentHeader got;
	if (!h.sealed && memcmp(again, data, size) != 0)
		abort();
	if (h.sealed) {
		if (dedup_segment_parse(again, (size_t) dedup_segment_size(h.count, false), &got) < 0 || got.count != h.count)
			abort();
		for (uint64_t i = 0; i < h.count; i++) {
			DedupSegmentEntry x;
			dedup_segment_entry_get(again, i, &x);
			if (memcmp(&x, e + i, sizeof(x)) != 0)
				abort();
		}
	}
	free(again);
	free(e);
	free(opened);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	check_parsed(data, size);
	if (size >= dedup_segment_size(0, false) && size <= dedup_segment_size(64, true)) {
		uint8_t *copy = malloc(size);
		if (!copy)
			abort();
		memcpy(copy, data, size);
		checksum_again(copy, size);
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
	bool sealed = size % 2 == 0;
	size_t len = (size_t) dedup_segment_size(n, sealed);
	uint8_t *buf = NULL;
	if (dedup_segment_format(&h, e, n, sealed ? FUZZ_KEY : NULL, &buf) < 0)
		abort();
	DedupSegmentHeader got;
	if (dedup_segment_parse(buf, len, &got) < 0 || got.count != n || got.sealed != sealed ||
	    got.epoch != h.epoch || got.flags != h.flags || strcmp(got.host, "db01") != 0 ||
	    memcmp(got.keys, h.keys, sizeof(h.keys)) != 0)
		abort();
	if (sealed) {
		/* Any byte but the checksum's changed, the checksum made to match: it must not open. */
		size_t at = (size_t) h.epoch * 7919 % (len - DEDUP_SEGMENT_TRAILER_SIZE);
		uint8_t *bent = malloc(len);
		if (!bent)
			abort();
		memcpy(bent, buf, len);
		bent[at] ^= 1;
		checksum_again(bent, len);
		if (dedup_segment_open(bent, len, FUZZ_KEY) == 0)
			abort();
		free(bent);
		if (dedup_segment_open(buf, len, FUZZ_KEY) < 0)
			abort();
	}
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
