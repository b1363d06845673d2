/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Encodes arbitrary bytes as a chunk and decodes the frame again; aborts
 * unless the bytes come back identical.  The first input byte picks the zstd
 * level and whether ids are keyed; the rest is the chunk.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/frame.h"
#include "tests/fuzz/fuzz.h"

static const int levels[] = { DEDUP_FRAME_LEVEL_MIN, -1, 0, 1, 3, 9, DEDUP_FRAME_LEVEL_MAX };

static DedupFrameEncoder *enc[2];
static DedupFrameDecoder *dec;
static DedupHasher *hasher[2];
static uint8_t *frame, *out;

static void setup(void) {
	if (dedup_frame_encoder_new(3, false, &enc[0]) < 0 || dedup_frame_encoder_new(3, true, &enc[1]) < 0 ||
	    dedup_frame_decoder_new(&dec) < 0 || dedup_hasher_new(&hasher[0]) < 0 ||
	    dedup_hasher_new_keyed("fuzz", 4, &hasher[1]) < 0)
		abort();
	frame = malloc(DEDUP_FRAME_SIZE_MAX);
	out = malloc(DEDUP_CHUNK_SIZE_LIMIT_MAX);
	if (!frame || !out)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	DedupFrameHeader h;
	DedupChunkId id;
	size_t len;

	if (!dec)
		setup();
	if (size < 1)
		return 0;

	unsigned keyed = data[0] >> 7;
	int level = levels[(data[0] & 0x7f) % (sizeof(levels) / sizeof(levels[0]))];
	const uint8_t *plain = data + 1;
	size_t plain_size = size - 1;
	if (plain_size > DEDUP_CHUNK_SIZE_LIMIT_MAX)
		return 0;

	if (dedup_frame_encoder_set_level(enc[keyed], level) < 0 ||
	    dedup_hasher_digest(hasher[keyed], plain, plain_size, &id) < 0)
		abort();

	int r = dedup_frame_encode(enc[keyed], &id, plain, plain_size, frame, DEDUP_FRAME_SIZE_MAX, &len);
	if (plain_size == 0) {
		if (r != -EINVAL)
			abort();
		return 0;
	}
	if (r < 0 || len > dedup_frame_size_bound(plain_size))
		abort();

	/* Exactly the frame's bytes and exactly the plain size: no slack hides an overrun. */
	memset(out, 0xa5, plain_size);
	if (dedup_frame_decode(dec, frame, len, hasher[keyed], out, plain_size, &h) < 0)
		abort();
	if (h.plain_size != plain_size || dedup_frame_header_frame_size(&h) != len ||
	    !dedup_chunk_id_equal(&h.id, &id) || memcmp(out, plain, plain_size) != 0)
		abort();
	if ((h.codec == DEDUP_FRAME_CODEC_ZSTD) != (h.stored_size < plain_size))
		abort();
	return 0;
}
