/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Chunk frames: encode a chunk (zstd or raw) behind a checksummed header, and
 * decode one back, trusting nothing.  Format: docs/FORMAT.md.
 *
 * Invariants:
 *  1. decode interprets no header field before magic, version and the header
 *     checksum are good, and no payload byte before every size is within the
 *     format's limits, inside the caller's buffer, and the payload checksum
 *     matches.
 *  2. decode writes at most plain_size bytes to the caller's buffer, and
 *     succeeds only if exactly plain_size bytes came out of the payload.
 *  3. stored_size < plain_size for zstd and == for raw, so a frame is never
 *     larger than dedup_frame_size_bound(plain_size).
 *  4. zstd's size_t error codes are translated here and never returned.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "common/macros.h"
#include "dedup/frame.h"

static const uint8_t frame_magic[4] = { 0x89, 'F', 'T', 'C' };

/* Header offsets (docs/FORMAT.md). */
enum {
	OFF_MAGIC = 0,
	OFF_VERSION = 4,
	OFF_CODEC = 5,
	OFF_FLAGS = 6,
	OFF_PLAIN_SIZE = 8,
	OFF_STORED_SIZE = 12,
	OFF_ID = 16,
	OFF_CHECKSUM = 48,
	OFF_HEADER_CHECKSUM = 56,
};
_Static_assert(OFF_HEADER_CHECKSUM + 8 == DEDUP_FRAME_HEADER_SIZE, "header layout");
_Static_assert(OFF_ID + DEDUP_CHUNK_ID_SIZE == OFF_CHECKSUM, "header layout");
_Static_assert(DEDUP_CHUNK_SIZE_LIMIT_MAX <= UINT32_MAX, "sizes are stored as u32");

struct DedupFrameEncoder {
	ZSTD_CCtx *cctx;
	XXH3_state_t *xxh;
	int level;
	bool keyed_ids;
};

struct DedupFrameDecoder {
	ZSTD_DCtx *dctx;
	XXH3_state_t *xxh;
};

DEFINE_CLEANUP_FUNC(DedupFrameEncoder, dedup_frame_encoder_free);
DEFINE_CLEANUP_FUNC(DedupFrameDecoder, dedup_frame_decoder_free);

static uint16_t get_le16(const uint8_t *p) {
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static uint32_t get_le32(const uint8_t *p) {
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint64_t get_le64(const uint8_t *p) {
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static void put_le16(uint8_t *p, uint16_t v) {
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static void put_le32(uint8_t *p, uint32_t v) {
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static void put_le64(uint8_t *p, uint64_t v) {
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

/*
 * XXH3-64 (seed 0) of header bytes [0, 48) followed by the payload: the
 * payload checksum also pins every header field it follows.
 */
static uint64_t payload_checksum(XXH3_state_t *xxh, const uint8_t *header, const uint8_t *payload,
				 size_t stored_size) {
	/* Reset and update only fail for NULL arguments, which cannot happen here. */
	(void) XXH3_64bits_reset(xxh);
	(void) XXH3_64bits_update(xxh, header, OFF_CHECKSUM);
	(void) XXH3_64bits_update(xxh, payload, stored_size);
	return XXH3_64bits_digest(xxh);
}

static bool level_is_valid(int level) {
	return level >= DEDUP_FRAME_LEVEL_MIN && level <= DEDUP_FRAME_LEVEL_MAX;
}

DedupFrameEncoder *dedup_frame_encoder_free(DedupFrameEncoder *e) {
	if (!e)
		return NULL;
	ZSTD_freeCCtx(e->cctx);
	XXH3_freeState(e->xxh);
	free(e);
	return NULL;
}

int dedup_frame_encoder_new(int level, bool keyed_ids, DedupFrameEncoder **ret) {
	if (!level_is_valid(level))
		return -EINVAL;

	_cleanup_(dedup_frame_encoder_freep) DedupFrameEncoder *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->level = level;
	e->keyed_ids = keyed_ids;
	e->cctx = ZSTD_createCCtx();
	e->xxh = XXH3_createState();
	if (!e->cctx || !e->xxh)
		return -ENOMEM;

	*ret = TAKE_PTR(e);
	return 0;
}

int dedup_frame_encoder_set_level(DedupFrameEncoder *e, int level) {
	if (!level_is_valid(level))
		return -EINVAL;
	e->level = level;
	return 0;
}

int dedup_frame_encode(DedupFrameEncoder *e, const DedupChunkId *id, const void *plain, size_t plain_size,
		       void *buf, size_t size, size_t *ret_size) {
	if (!id || !plain || plain_size == 0 || plain_size > DEDUP_CHUNK_SIZE_LIMIT_MAX)
		return -EINVAL;
	if (size < dedup_frame_size_bound(plain_size))
		return -ENOBUFS;

	uint8_t *out = buf, *payload = out + DEDUP_FRAME_HEADER_SIZE;
	DedupFrameCodec codec = DEDUP_FRAME_CODEC_RAW;
	size_t stored_size = plain_size;

	/*
	 * Give zstd only as much room as a worthwhile result needs: if it does
	 * not fit, zstd stops with dstSize_tooSmall and the chunk goes raw,
	 * without a scratch buffer or a second pass.
	 */
	size_t stored_max = plain_size - MAX(plain_size / 32, (size_t) 1);
	if (stored_max > 0) {
		size_t z = ZSTD_compressCCtx(e->cctx, payload, stored_max, plain, plain_size, e->level);
		if (!ZSTD_isError(z)) {
			codec = DEDUP_FRAME_CODEC_ZSTD;
			stored_size = z;
		} else if (ZSTD_getErrorCode(z) == ZSTD_error_memory_allocation)
			return -ENOMEM;
		else if (ZSTD_getErrorCode(z) != ZSTD_error_dstSize_tooSmall)
			return -EIO;
	}
	if (codec == DEDUP_FRAME_CODEC_RAW)
		memcpy(payload, plain, plain_size);

	memcpy(out + OFF_MAGIC, frame_magic, sizeof(frame_magic));
	out[OFF_VERSION] = DEDUP_FRAME_VERSION;
	out[OFF_CODEC] = (uint8_t) codec;
	put_le16(out + OFF_FLAGS, e->keyed_ids ? DEDUP_FRAME_FLAG_KEYED_ID : 0);
	put_le32(out + OFF_PLAIN_SIZE, (uint32_t) plain_size);
	put_le32(out + OFF_STORED_SIZE, (uint32_t) stored_size);
	memcpy(out + OFF_ID, id->bytes, DEDUP_CHUNK_ID_SIZE);
	put_le64(out + OFF_CHECKSUM, payload_checksum(e->xxh, out, payload, stored_size));
	put_le64(out + OFF_HEADER_CHECKSUM, XXH3_64bits(out, OFF_HEADER_CHECKSUM));

	*ret_size = DEDUP_FRAME_HEADER_SIZE + stored_size;
	return 0;
}

int dedup_frame_header_parse(const void *buf, size_t len, DedupFrameHeader *ret) {
	const uint8_t *p = buf;

	if (!p || len < DEDUP_FRAME_HEADER_SIZE)
		return -EBADMSG;
	if (memcmp(p + OFF_MAGIC, frame_magic, sizeof(frame_magic)) != 0)
		return -EBADMSG;

	/* Magic and version stay at offsets 0..4 in every version; nothing else is known to. */
	if (p[OFF_VERSION] == 0)
		return -EBADMSG;
	if (p[OFF_VERSION] > DEDUP_FRAME_VERSION)
		return -EPROTONOSUPPORT;

	DedupFrameHeader h = {
		.version = p[OFF_VERSION],
		.flags = get_le16(p + OFF_FLAGS),
		.plain_size = get_le32(p + OFF_PLAIN_SIZE),
		.stored_size = get_le32(p + OFF_STORED_SIZE),
		.checksum = get_le64(p + OFF_CHECKSUM),
		.header_checksum = get_le64(p + OFF_HEADER_CHECKSUM),
	};
	memcpy(h.id.bytes, p + OFF_ID, DEDUP_CHUNK_ID_SIZE);

	if (XXH3_64bits(p, OFF_HEADER_CHECKSUM) != h.header_checksum)
		return -EBADMSG;

	/* A good checksum only proves these fields were written so: check them anyway. */
	if (h.flags & ~DEDUP_FRAME_FLAGS_KNOWN)
		return -EBADMSG;
	if (h.plain_size == 0 || h.plain_size > DEDUP_CHUNK_SIZE_LIMIT_MAX)
		return -EBADMSG;
	switch (p[OFF_CODEC]) {
	case DEDUP_FRAME_CODEC_RAW:
		if (h.stored_size != h.plain_size)
			return -EBADMSG;
		break;
	case DEDUP_FRAME_CODEC_ZSTD:
		if (h.stored_size == 0 || h.stored_size >= h.plain_size)
			return -EBADMSG;
		break;
	default:
		return -EBADMSG;
	}
	h.codec = (DedupFrameCodec) p[OFF_CODEC];

	*ret = h;
	return 0;
}

DedupFrameDecoder *dedup_frame_decoder_free(DedupFrameDecoder *d) {
	if (!d)
		return NULL;
	ZSTD_freeDCtx(d->dctx);
	XXH3_freeState(d->xxh);
	free(d);
	return NULL;
}

int dedup_frame_decoder_new(DedupFrameDecoder **ret) {
	_cleanup_(dedup_frame_decoder_freep) DedupFrameDecoder *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->dctx = ZSTD_createDCtx();
	d->xxh = XXH3_createState();
	if (!d->dctx || !d->xxh)
		return -ENOMEM;

	*ret = TAKE_PTR(d);
	return 0;
}

static int decompress(DedupFrameDecoder *d, const DedupFrameHeader *h, const uint8_t *payload, void *buf) {
	if (h->codec == DEDUP_FRAME_CODEC_RAW) {
		memcpy(buf, payload, h->plain_size);
		return 0;
	}

	/*
	 * Capacity is exactly plain_size: a payload that would expand further
	 * fails inside zstd (dstSize_tooSmall) instead of writing past it.
	 */
	size_t n = ZSTD_decompressDCtx(d->dctx, buf, h->plain_size, payload, h->stored_size);
	if (ZSTD_isError(n))
		return ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation ? -ENOMEM : -EBADMSG;
	if (n != h->plain_size)
		return -EBADMSG;
	return 0;
}

int dedup_frame_decode(DedupFrameDecoder *d, const void *frame, size_t frame_len, DedupHasher *verify,
		       void *buf, size_t size, DedupFrameHeader *ret_header) {
	const uint8_t *p = frame;
	DedupFrameHeader h;
	size_t end;
	int r;

	r = dedup_frame_header_parse(frame, frame_len, &h);
	if (r < 0)
		return r;

	if (__builtin_add_overflow((size_t) DEDUP_FRAME_HEADER_SIZE, (size_t) h.stored_size, &end) ||
	    end > frame_len)
		return -EBADMSG;
	if (payload_checksum(d->xxh, p, p + DEDUP_FRAME_HEADER_SIZE, h.stored_size) != h.checksum)
		return -EBADMSG;

	if (verify && dedup_hasher_is_keyed(verify) != !!(h.flags & DEDUP_FRAME_FLAG_KEYED_ID))
		return -ENOKEY;
	if (!buf || size < h.plain_size)
		return -ENOBUFS;

	r = decompress(d, &h, p + DEDUP_FRAME_HEADER_SIZE, buf);
	if (r < 0)
		return r;

	if (verify) {
		DedupChunkId id;
		r = dedup_hasher_digest(verify, buf, h.plain_size, &id);
		if (r < 0)
			return r;
		if (!dedup_chunk_id_equal(&id, &h.id))
			return -EBADMSG;
	}

	if (ret_header)
		*ret_header = h;
	return 0;
}
