/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Decodes arbitrary bytes as a chunk frame, with and without content
 * verification.  Garbage must be rejected with an error; a frame that is
 * accepted must be internally consistent.  Never crash, never read or write
 * out of bounds.
 *
 * Random bytes rarely get past the checksums, but a hostile writer (a shared
 * NFS tier) can compute them, so each input is also decoded a second time with
 * both checksums recomputed: that drives the field checks and zstd itself.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dedup/frame.h"
#include "tests/fuzz/fuzz.h"

static DedupFrameDecoder *dec;
static DedupHasher *sha;
static uint8_t *out, *copy;
static XXH3_state_t *xxh;

static void setup(void) {
	if (dedup_frame_decoder_new(&dec) < 0 || dedup_hasher_new(&sha) < 0)
		abort();
	out = malloc(DEDUP_CHUNK_SIZE_LIMIT_MAX);
	xxh = XXH3_createState();
	if (!out || !xxh)
		abort();
}

/* Makes both checksums of a copy of data right for the stored_size it claims (docs/FORMAT.md). */
static uint8_t *reseal(const uint8_t *data, size_t size) {
	uint32_t stored;
	uint64_t sum;

	copy = realloc(copy, size);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	memcpy(&stored, copy + 12, 4);
	stored = le32toh(stored);
	if (stored > size - 64)
		stored = (uint32_t) (size - 64);

	XXH3_64bits_reset(xxh);
	XXH3_64bits_update(xxh, copy, 48);
	XXH3_64bits_update(xxh, copy + 64, stored);
	sum = htole64(XXH3_64bits_digest(xxh));
	memcpy(copy + 48, &sum, 8);
	sum = htole64(XXH3_64bits(copy, 56));
	memcpy(copy + 56, &sum, 8);
	return copy;
}

static void check_result(int r, const DedupFrameHeader *h, size_t size) {
	if (r == 0) {
		if (h->plain_size == 0 || h->plain_size > DEDUP_CHUNK_SIZE_LIMIT_MAX ||
		    dedup_frame_header_frame_size(h) > size)
			abort();
		return;
	}
	if (r != -EBADMSG && r != -EPROTONOSUPPORT && r != -ENOKEY)
		abort();
}

static void decode_both(const uint8_t *data, size_t size) {
	DedupFrameHeader h, hv;
	int r, rv;

	r = dedup_frame_decode(dec, data, size, NULL, out, DEDUP_CHUNK_SIZE_LIMIT_MAX, &h);
	check_result(r, &h, size);

	rv = dedup_frame_decode(dec, data, size, sha, out, DEDUP_CHUNK_SIZE_LIMIT_MAX, &hv);
	check_result(rv, &hv, size);
	/* Verification can only reject more, never accept what the checksums refused. */
	if (rv == 0 && r != 0)
		abort();
	if (rv == 0) {
		DedupChunkId id;
		if (dedup_hasher_digest(sha, out, hv.plain_size, &id) < 0 || !dedup_chunk_id_equal(&id, &hv.id))
			abort();
	}

	/* The header parser alone accepts everything decode accepts. */
	if (r == 0 && dedup_frame_header_parse(data, size, &hv) < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	if (!dec)
		setup();

	decode_both(data, size);
	if (size >= DEDUP_FRAME_HEADER_SIZE)
		decode_both(reseal(data, size), size);
	return 0;
}
