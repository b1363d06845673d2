/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Sealed regions (region versions 2, 3 and 4, docs/FORMAT.md "Sealed region")
 * from arbitrary bytes, both ways:
 *
 *  - opened as a region stored at container 7, offset 64 with a key ring of
 *    two fixed content keys: the older one (which opens version 2 regions,
 *    and version 3 ones naming its tag) and the newest (the corpus holds
 *    regions sealed there under each, and one naming a key not given), with and without
 *    content verification, as found on a tier someone else can write:
 *    garbage must be rejected cleanly, what is accepted must be consistent,
 *    and a region accepted there must fail at any other place.  Each input
 *    is opened a second time with the header checksum recomputed (whoever
 *    can write a tier can do that), which drives the tag check itself;
 *  - the rest of the input encoded as the chunks of a region, sealed at a
 *    place the input picks, opened there (the bytes must come back
 *    identical), opened at the next container and the next offset (that
 *    must fail), then opened again with one bit the input picks flipped:
 *    that must fail too.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dedup/frame.h"
#include "dedup/region.h"
#include "tests/fuzz/fuzz.h"

static const uint8_t key[DEDUP_REGION_KEY_SIZE] = "fratier fuzz content key 32 byt";
static const uint8_t newest[DEDUP_REGION_KEY_SIZE] = "fratier fuzz newest key 32 byte";
#define OLD_TAG 0x0a0b0c0du
#define NEWEST_TAG 0x01020304u
static const DedupOldKeys old = { .n = 1, .keys = { { .tag = OLD_TAG, .content = key } } };

static DedupRegionEncoder *enc;
static DedupRegionDecoder *dec;
static DedupHasher *hasher;
static uint8_t *region, *plain, *copy;
static uint32_t *lengths;
static DedupChunkId *ids;

static void setup(void) {
	if (dedup_region_encoder_new(3, true, &enc) < 0 || dedup_region_decoder_new(&dec) < 0 ||
	    dedup_hasher_new_keyed("fuzz", 4, &hasher) < 0)
		abort();
	region = malloc(DEDUP_REGION_SIZE_MAX);
	plain = malloc(DEDUP_REGION_PLAIN_MAX);
	lengths = malloc(DEDUP_REGION_CHUNKS_MAX * sizeof(*lengths));
	ids = malloc(DEDUP_REGION_CHUNKS_MAX * sizeof(*ids));
	if (!region || !plain || !lengths || !ids)
		abort();
}

static int open_at(const uint8_t *data, size_t size, uint64_t container, uint64_t offset, DedupHasher *verify,
		   DedupRegionHeader *ret) {
	DedupRegionPlace place = { .key = newest, .key_tag = NEWEST_TAG, .old = &old, .container = container, .offset = offset };
	int r = dedup_region_decode(dec, data, size, &place, verify, plain, DEDUP_REGION_PLAIN_MAX, lengths, ids,
				    DEDUP_REGION_CHUNKS_MAX, ret);
	if (r != 0 && r != -EBADMSG && r != -EPROTONOSUPPORT && r != -ENOKEY)
		abort();
	if (r == 0) {
		uint64_t sum = 0;
		for (size_t i = 0; i < ret->count; i++)
			sum += lengths[i];
		if (ret->count == 0 || ret->count > DEDUP_REGION_CHUNKS_MAX || sum != ret->plain_size ||
		    dedup_region_header_region_size(ret) > size || ret->stored_size > ret->plain_size)
			abort();
	}
	return r;
}

static void open_all(const uint8_t *data, size_t size) {
	DedupRegionHeader h, hv;
	int r = open_at(data, size, 7, 64, NULL, &h);
	int rv = open_at(data, size, 7, 64, hasher, &hv);
	/* Verification can only reject more. */
	if (rv == 0 && r != 0)
		abort();
	if (r == 0 && dedup_region_header_is_sealed(&h)) {
		/* Bound to its place: anywhere else, the tag fails. */
		if (open_at(data, size, 8, 64, NULL, &hv) != -EBADMSG || open_at(data, size, 7, 65, NULL, &hv) != -EBADMSG)
			abort();
		/* Without the key it is not opened at all. */
		if (dedup_region_decode(dec, data, size, NULL, NULL, plain, DEDUP_REGION_PLAIN_MAX, NULL, NULL, 0, &hv) !=
		    -ENOKEY)
			abort();
	}
}

static void roundtrip(const uint8_t *data, size_t size) {
	if (size < 5 || size - 4 > DEDUP_REGION_PLAIN_MAX)
		return;
	const uint8_t *in = data + 4;
	size_t in_size = size - 4, count = 1 + data[0] % 64, size_out;
	uint64_t container = 1 + data[1], offset = 64 + (uint64_t) data[2] * 4096;
	if (count > in_size)
		count = in_size;
	size_t at = 0;
	for (size_t i = 0; i < count; i++) {
		lengths[i] = (uint32_t) (in_size / count + (i < in_size % count));
		if (dedup_hasher_digest(hasher, in + at, lengths[i], &ids[i]) < 0)
			abort();
		at += lengths[i];
	}
	if (dedup_region_encode(enc, ids, lengths, count, in, in_size, region, DEDUP_REGION_SIZE_MAX, &size_out) < 0)
		abort();
	/* Under the newest key or the older one, as the input says; both open with the ring. */
	DedupRegionPlace place = { .key = newest, .key_tag = NEWEST_TAG, .old = &old, .container = container, .offset = offset };
	if (data[0] & 0x80) {
		place.key = key;
		place.key_tag = OLD_TAG;
	}
	if (dedup_region_seal(region, size_out, &place) < 0)
		abort();
	/* Version 4: the table is ciphertext too, no id in clear. */
	for (size_t i = 0; i < count; i++)
		if (memmem(region, size_out, ids[i].bytes, DEDUP_CHUNK_ID_SIZE))
			abort();
	DedupRegionHeader h;
	memset(plain, 0xa5, in_size);
	place.key = newest;
	place.key_tag = NEWEST_TAG;
	if (dedup_region_decode(dec, region, size_out, &place, hasher, plain, in_size, lengths, ids, count, &h) < 0 ||
	    !dedup_region_header_is_sealed(&h) || h.plain_size != in_size || memcmp(plain, in, in_size) != 0)
		abort();
	/* Only there: one container or one byte further, the tag fails. */
	DedupRegionPlace other = place;
	other.container++;
	if (dedup_region_decode(dec, region, size_out, &other, NULL, plain, in_size, NULL, NULL, 0, &h) != -EBADMSG)
		abort();
	other = place;
	other.offset++;
	if (dedup_region_decode(dec, region, size_out, &other, NULL, plain, in_size, NULL, NULL, 0, &h) != -EBADMSG)
		abort();
	/* Without the key it names (the ring lacks it), not opened at all. */
	other = place;
	other.old = NULL;
	if ((data[0] & 0x80) &&
	    dedup_region_decode(dec, region, size_out, &other, NULL, plain, in_size, NULL, NULL, 0, &h) != -ENOKEY)
		abort();
	/* One bit anywhere but the header checksum (which a forger recomputes), recomputed: the tag fails (or, in the key tag, no key is found). */
	size_t bit = ((size_t) data[3] * 7919u) % (size_out * 8);
	if (bit / 8 >= 56 && bit / 8 < 64)
		bit -= 64;
	region[bit / 8] ^= (uint8_t) (1u << (bit % 8));
	uint64_t sum = htole64(XXH3_64bits(region, 56));
	memcpy(region + 56, &sum, 8);
	int r = dedup_region_decode(dec, region, size_out, &place, NULL, plain, in_size, NULL, NULL, 0, &h);
	/*
	 * A grown plain_size asks for more room than the input's bytes: in
	 * version 4 no clear table contradicts it first, so it is -ENOBUFS.
	 */
	if (r != -EBADMSG && r != -EPROTONOSUPPORT && !(r == -ENOKEY && bit / 8 >= 52 && bit / 8 < 56) &&
	    !(r == -ENOBUFS && bit / 8 >= 16 && bit / 8 < 20))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	if (!dec)
		setup();
	open_all(data, size);
	if (size >= DEDUP_REGION_HEADER_SIZE) {
		copy = realloc(copy, size);
		if (!copy)
			abort();
		memcpy(copy, data, size);
		uint64_t sum = htole64(XXH3_64bits(copy, 56));
		memcpy(copy + 56, &sum, 8);
		open_all(copy, size);
	}
	roundtrip(data, size);
	return 0;
}
