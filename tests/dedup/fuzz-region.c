/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Compression regions from arbitrary bytes, both ways:
 *
 *  - decoded as a region, with and without content verification, as it
 *    might be found on a shared or damaged tier: garbage must be rejected,
 *    what is accepted must be consistent (table adding up, ids matching
 *    when verified).  Random bytes rarely pass the checksums, but whoever
 *    can write a tier can compute them, so each input is decoded a second
 *    time with both checksums recomputed: that drives the field checks, the
 *    table checks and zstd itself;
 *  - encoded as the chunks of a region and decoded again (the first byte
 *    picks the level and whether ids are keyed, the second the number of
 *    chunks the rest is cut into): the bytes must come back identical.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dedup/frame.h"
#include "dedup/region.h"
#include "tests/fuzz/fuzz.h"

static const int levels[] = { DEDUP_FRAME_LEVEL_MIN, -1, 0, 1, 3, 9, DEDUP_FRAME_LEVEL_MAX };

static DedupRegionEncoder *enc[2];
static DedupRegionDecoder *dec;
static DedupHasher *hasher[2];
static uint8_t *region, *plain, *copy;
static uint32_t *lengths;
static DedupChunkId *ids;

static void setup(void) {
	if (dedup_region_encoder_new(3, false, &enc[0]) < 0 || dedup_region_encoder_new(3, true, &enc[1]) < 0 ||
	    dedup_region_decoder_new(&dec) < 0 || dedup_hasher_new(&hasher[0]) < 0 ||
	    dedup_hasher_new_keyed("fuzz", 4, &hasher[1]) < 0)
		abort();
	region = malloc(DEDUP_REGION_SIZE_MAX);
	plain = malloc(DEDUP_REGION_PLAIN_MAX);
	lengths = malloc(DEDUP_REGION_CHUNKS_MAX * sizeof(*lengths));
	ids = malloc(DEDUP_REGION_CHUNKS_MAX * sizeof(*ids));
	if (!region || !plain || !lengths || !ids)
		abort();
}

/* Makes both checksums of a copy of data right for the sizes it claims (docs/FORMAT.md). */
static uint8_t *reseal(const uint8_t *data, size_t size) {
	uint32_t count, stored;
	copy = realloc(copy, size);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	memcpy(&count, copy + 12, 4);
	memcpy(&stored, copy + 20, 4);
	uint64_t rest = (uint64_t) le32toh(count) * DEDUP_REGION_ENTRY_SIZE + le32toh(stored);
	if (rest > size - 64)
		rest = size - 64;
	XXH3_state_t *st = XXH3_createState();
	if (!st)
		abort();
	XXH3_64bits_reset(st);
	XXH3_64bits_update(st, copy, 48);
	XXH3_64bits_update(st, copy + 64, (size_t) rest);
	uint64_t sum = htole64(XXH3_64bits_digest(st));
	XXH3_freeState(st);
	memcpy(copy + 48, &sum, 8);
	sum = htole64(XXH3_64bits(copy, 56));
	memcpy(copy + 56, &sum, 8);
	return copy;
}

static void check(int r, const DedupRegionHeader *h, size_t size) {
	if (r == 0) {
		uint64_t sum = 0;
		for (size_t i = 0; i < h->count; i++)
			sum += lengths[i];
		if (h->count == 0 || h->count > DEDUP_REGION_CHUNKS_MAX || sum != h->plain_size ||
		    h->plain_size > DEDUP_REGION_PLAIN_MAX || dedup_region_header_region_size(h) > size ||
		    h->stored_size > h->plain_size)
			abort();
		return;
	}
	if (r != -EBADMSG && r != -EPROTONOSUPPORT && r != -ENOKEY)
		abort();
}

static void decode_all(const uint8_t *data, size_t size) {
	DedupRegionHeader h, hv;
	int r = dedup_region_decode(dec, data, size, NULL, NULL, plain, DEDUP_REGION_PLAIN_MAX, lengths, ids,
				    DEDUP_REGION_CHUNKS_MAX, &h);
	check(r, &h, size);
	for (unsigned k = 0; k < 2; k++) {
		int rv = dedup_region_decode(dec, data, size, NULL, hasher[k], plain, DEDUP_REGION_PLAIN_MAX, lengths, ids,
					     DEDUP_REGION_CHUNKS_MAX, &hv);
		check(rv, &hv, size);
		/* Verification can only reject more, never accept what the checksums refused. */
		if (rv == 0 && r != 0)
			abort();
		const uint8_t *at = plain;
		for (size_t i = 0; rv == 0 && i < hv.count; i++) {
			DedupChunkId id;
			if (dedup_hasher_digest(hasher[k], at, lengths[i], &id) < 0 || !dedup_chunk_id_equal(&id, &ids[i]))
				abort();
			at += lengths[i];
		}
	}
	/* The header parser and the check alone accept everything decode accepts. */
	if (r == 0 && (dedup_region_header_parse(data, size, &hv) < 0 || dedup_region_check(data, size, &hv) < 0))
		abort();
}

static void roundtrip(const uint8_t *data, size_t size) {
	if (size < 3 || size - 2 > DEDUP_REGION_PLAIN_MAX)
		return;
	unsigned keyed = data[0] >> 7;
	int level = levels[(data[0] & 0x7f) % (sizeof(levels) / sizeof(levels[0]))];
	const uint8_t *in = data + 2;
	size_t in_size = size - 2, count = 1 + data[1] % 64, size_out;
	if (count > in_size)
		count = in_size;

	if (dedup_region_encoder_set_level(enc[keyed], level) < 0)
		abort();
	size_t at = 0;
	for (size_t i = 0; i < count; i++) {
		lengths[i] = (uint32_t) (in_size / count + (i < in_size % count));
		if (dedup_hasher_digest(hasher[keyed], in + at, lengths[i], &ids[i]) < 0)
			abort();
		at += lengths[i];
	}
	DedupChunkId want[64];
	memcpy(want, ids, count * sizeof(*ids));
	if (dedup_region_encode(enc[keyed], ids, lengths, count, in, in_size, region, DEDUP_REGION_SIZE_MAX, &size_out) <
		    0 ||
	    size_out > dedup_region_size_bound(count, in_size))
		abort();

	/* Exactly the region's bytes and exactly the plain size: no slack hides an overrun. */
	DedupRegionHeader h;
	memset(plain, 0xa5, in_size);
	if (dedup_region_decode(dec, region, size_out, NULL, hasher[keyed], plain, in_size, lengths, ids, count, &h) < 0)
		abort();
	if (h.count != count || h.plain_size != in_size || dedup_region_header_region_size(&h) != size_out ||
	    h.level != level || memcmp(plain, in, in_size) != 0 || memcmp(ids, want, count * sizeof(*ids)) != 0)
		abort();
	if ((h.codec == DEDUP_REGION_CODEC_ZSTD) != (h.stored_size < in_size))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	if (!dec)
		setup();
	decode_all(data, size);
	if (size >= DEDUP_REGION_HEADER_SIZE)
		decode_all(reseal(data, size), size);
	roundtrip(data, size);
	return 0;
}
