/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Walks arbitrary bytes as a container (either version: frames or
 * regions), as it might be found on a shared or damaged tier: every
 * expectation, with full decoding and content verification, and with
 * none (structure only, as a salvage reader without the key walks sealed
 * regions: a version 4 region then stands for all its chunks).  Garbage must
 * be rejected; what is accepted must be consistent (units back to back
 * inside the image, chunks back to back inside their region, counts
 * matching).
 *
 * Random bytes rarely pass the checksums, but whoever can write a tier can
 * compute them, so each input is walked a second time with every checksum
 * it appears to have (header, frames, regions, index, footer) recomputed:
 * that drives the field checks, the index comparison and zstd.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dedup/container.h"
#include "dedup/le-internal.h"
#include "tests/fuzz/fuzz.h"

static DedupFrameDecoder *dec;
static DedupRegionDecoder *rdec;
static DedupHasher *sha;
static uint8_t *copy;

typedef struct Walked {
	uint64_t next;        /* where the next unit starts */
	uint64_t unit;        /* the current region's offset */
	uint32_t in_region;   /* plain bytes of the current region seen so far */
	uint32_t count, chunks;
} Walked;

static int on_chunk(const DedupContainerEntry *e, void *userdata) {
	Walked *w = userdata;
	if (e->plain_size == 0 || (e->sealed_count > 0 && (!e->region || e->region_offset != 0)))
		abort();
	if (e->region && e->region_offset > 0) {
		/* The next chunk of the same region, right after the previous one. */
		if (e->offset != w->unit || e->region_offset != w->in_region)
			abort();
	} else {
		if (e->offset != w->next || e->frame_size <= DEDUP_FRAME_HEADER_SIZE || e->region_offset != 0)
			abort();
		w->unit = e->offset;
		w->next += e->frame_size;
		w->in_region = 0;
		w->count++;
	}
	w->in_region += e->plain_size;
	w->chunks += e->sealed_count > 0 ? e->sealed_count : 1;
	return 0;
}

static void walk(const uint8_t *data, size_t size) {
	for (int expect = 0; expect < 2 * _DEDUP_CONTAINER_EXPECT_MAX; expect++) {
		DedupContainerInfo info;
		Walked w = { .next = DEDUP_CONTAINER_HEADER_SIZE };
		bool decode = expect < _DEDUP_CONTAINER_EXPECT_MAX;
		DedupContainerExpect want = (DedupContainerExpect) (expect % _DEDUP_CONTAINER_EXPECT_MAX);
		int r = dedup_container_walk(data, size, want,
					     decode ? dec : NULL, decode ? rdec : NULL, decode ? sha : NULL, on_chunk,
					     &w, &info);
		if (r < 0)
			continue;
		if (w.count != info.count || w.chunks != info.chunks || w.next != info.frames_end ||
		    info.frames_end > size)
			abort();
		if ((want == DEDUP_CONTAINER_SEALED && !info.sealed) || (want == DEDUP_CONTAINER_UNSEALED && info.sealed))
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
	while (off + DEDUP_FRAME_HEADER_SIZE <= end &&
	       (memcmp(p + off, "\x89" "FTC", 4) == 0 || memcmp(p + off, "\x89" "FTR", 4) == 0)) {
		/* A frame's payload, or a region's table and payload, follows its 64-byte header. */
		uint64_t stored = p[off + 3] == 'C' ? le32_get(p + off + 12)
						    : (uint64_t) le32_get(p + off + 12) * DEDUP_REGION_ENTRY_SIZE +
							      le32_get(p + off + 20);
		if (stored > end - off - DEDUP_FRAME_HEADER_SIZE)
			stored = end - off - DEDUP_FRAME_HEADER_SIZE;
		XXH3_state_t *st = XXH3_createState();
		if (!st)
			abort();
		XXH3_64bits_reset(st);
		XXH3_64bits_update(st, p + off, 48);
		XXH3_64bits_update(st, p + off + 64, (size_t) stored);
		le64_put(p + off + 48, XXH3_64bits_digest(st));
		XXH3_freeState(st);
		le64_put(p + off + 56, XXH3_64bits(p + off, 56));
		off += DEDUP_FRAME_HEADER_SIZE + stored;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	if (!dec && (dedup_frame_decoder_new(&dec) < 0 || dedup_region_decoder_new(&rdec) < 0 ||
		     dedup_hasher_new(&sha) < 0))
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
