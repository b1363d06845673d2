/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Walks arbitrary bytes as a container, as it might be found on a shared or
 * damaged tier: every expectation, with full frame decoding and content
 * verification.  Garbage must be rejected; what is accepted must be
 * consistent (frames back to back inside the image, counts matching).
 *
 * Random bytes rarely pass the checksums, but whoever can write a tier can
 * compute them, so each input is walked a second time with every checksum
 * it appears to have (header, frames, index, footer) recomputed: that drives
 * the field checks, the index comparison and zstd.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dedup/container.h"
#include "dedup/le-internal.h"
#include "tests/fuzz/fuzz.h"

static DedupFrameDecoder *dec;
static DedupHasher *sha;
static uint8_t *copy;

typedef struct Walked {
	uint64_t next;
	uint32_t count;
} Walked;

static int on_frame(const DedupContainerEntry *e, void *userdata) {
	Walked *w = userdata;
	if (e->offset != w->next || e->frame_size <= DEDUP_FRAME_HEADER_SIZE || e->plain_size == 0)
		abort();
	w->next += e->frame_size;
	w->count++;
	return 0;
}

static void walk(const uint8_t *data, size_t size) {
	for (int expect = 0; expect < _DEDUP_CONTAINER_EXPECT_MAX; expect++) {
		DedupContainerInfo info;
		Walked w = { .next = DEDUP_CONTAINER_HEADER_SIZE };
		int r = dedup_container_walk(data, size, (DedupContainerExpect) expect, dec, sha, on_frame, &w, &info);
		if (r < 0)
			continue;
		if (w.count != info.count || w.next != info.frames_end || info.frames_end > size)
			abort();
		if ((expect == DEDUP_CONTAINER_SEALED && !info.sealed) || (expect == DEDUP_CONTAINER_UNSEALED && info.sealed))
			abort();
		if (!info.sealed && info.frames_end != size)
			abort();
	}
}

/* Recomputes every checksum the bytes appear to carry (docs/FORMAT.md). */
static void reseal(uint8_t *p, size_t size) {
	if (size < DEDUP_CONTAINER_HEADER_SIZE)
		return;
	le64_put(p + 56, XXH3_64bits(p, 56));

	size_t end = size;
	if (size >= 2 * DEDUP_CONTAINER_FOOTER_SIZE && memcmp(p + size - 64, "\x89" "FCF", 4) == 0) {
		uint8_t *f = p + size - 64;
		uint64_t index = le64_get(f + 16);
		if (index >= DEDUP_CONTAINER_HEADER_SIZE && index < size - 64) {
			le64_put(f + 32, XXH3_64bits(p + index, (size_t) (size - 64 - index)));
			end = (size_t) index;
		}
		le64_put(f + 56, XXH3_64bits(f, 56));
	}

	size_t off = DEDUP_CONTAINER_HEADER_SIZE;
	while (off + DEDUP_FRAME_HEADER_SIZE <= end && memcmp(p + off, "\x89" "FTC", 4) == 0) {
		size_t stored = le32_get(p + off + 12);
		if (stored > end - off - DEDUP_FRAME_HEADER_SIZE)
			stored = end - off - DEDUP_FRAME_HEADER_SIZE;
		XXH3_state_t *st = XXH3_createState();
		if (!st)
			abort();
		XXH3_64bits_reset(st);
		XXH3_64bits_update(st, p + off, 48);
		XXH3_64bits_update(st, p + off + 64, stored);
		le64_put(p + off + 48, XXH3_64bits_digest(st));
		XXH3_freeState(st);
		le64_put(p + off + 56, XXH3_64bits(p + off, 56));
		off += DEDUP_FRAME_HEADER_SIZE + stored;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	if (!dec && (dedup_frame_decoder_new(&dec) < 0 || dedup_hasher_new(&sha) < 0))
		abort();
	walk(data, size);

	copy = realloc(copy, size ? size : 1);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	reseal(copy, size);
	walk(copy, size);
	return 0;
}
