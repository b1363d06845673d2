/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Chunk frame: how one chunk is stored.  A 64-byte little-endian header
 * followed by the payload (the chunk raw or as one zstd frame).  The layout,
 * byte by byte, is in docs/FORMAT.md; in short:
 *
 *   0  magic "\x89FTC"   4  version   5  codec   6  flags (u16)
 *   8  plain_size (u32)  12 stored_size (u32)    16 id (32 bytes)
 *   48 checksum (u64): XXH3-64 of bytes 0..47 followed by the payload
 *   56 header_checksum (u64): XXH3-64 of bytes 0..55
 *   64 payload (stored_size bytes)
 *
 * Decoding validates every header field and both checksums before the payload
 * is interpreted, so corrupt or hostile bytes give an error, never wrong data.
 *
 * Errors (negative errno), the same everywhere below:
 *   -EBADMSG          corrupt: bad magic, impossible field, checksum or
 *                     content-hash mismatch, truncated frame, broken zstd data
 *   -EPROTONOSUPPORT  version byte > 1: a frame from a newer fratier (a bit
 *                     flip in that byte reads the same; both mean unreadable)
 *   -ENOBUFS          the caller's output buffer is too small
 *   -ENOKEY           verification asked of a hasher of the other kind (plain
 *                     vs keyed) than the frame's id
 *   -EINVAL           bad arguments (not bad data)
 *   -ENOMEM, -EIO     allocation / library failure
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/fingerprint.h"
#include "dedup/limits.h"

#define DEDUP_FRAME_VERSION 1
#define DEDUP_FRAME_HEADER_SIZE 64u
/* Payloads never exceed the plain size (incompressible chunks are stored raw). */
#define DEDUP_FRAME_SIZE_MAX (DEDUP_FRAME_HEADER_SIZE + DEDUP_CHUNK_SIZE_LIMIT_MAX)

/* Levels accepted by the encoder; 0 means zstd's default (3). */
#define DEDUP_FRAME_LEVEL_MIN (-7)
#define DEDUP_FRAME_LEVEL_MAX 19

typedef enum DedupFrameCodec {
	DEDUP_FRAME_CODEC_RAW = 0,
	DEDUP_FRAME_CODEC_ZSTD = 1,
	_DEDUP_FRAME_CODEC_MAX,
	_DEDUP_FRAME_CODEC_INVALID = -22, /* -EINVAL */
} DedupFrameCodec;

/* The id is HMAC-SHA-256 under a key not stored with the frame. */
#define DEDUP_FRAME_FLAG_KEYED_ID 0x0001u
#define DEDUP_FRAME_FLAGS_KNOWN DEDUP_FRAME_FLAG_KEYED_ID

/* A parsed, validated header. */
typedef struct DedupFrameHeader {
	uint8_t version;
	DedupFrameCodec codec;
	uint16_t flags;
	uint32_t plain_size;
	uint32_t stored_size;
	DedupChunkId id;
	uint64_t checksum;
	uint64_t header_checksum;
} DedupFrameHeader;

/* Bytes the whole frame occupies: header plus payload. */
static inline size_t dedup_frame_header_frame_size(const DedupFrameHeader *h) {
	return DEDUP_FRAME_HEADER_SIZE + h->stored_size;
}

/* Output capacity that always suffices to encode plain_size bytes. */
static inline size_t dedup_frame_size_bound(size_t plain_size) {
	return DEDUP_FRAME_HEADER_SIZE + plain_size;
}

/*
 * Parses and validates the header at the start of buf[0, len) alone (magic,
 * version, header checksum, codec, flags, sizes), without reading the payload,
 * so a container can be walked frame by frame.  The payload checksum is only
 * checked by dedup_frame_decode().
 * Returns: 0 and *ret filled, -EBADMSG (also when len < 64), -EPROTONOSUPPORT.
 */
int dedup_frame_header_parse(const void *buf, size_t len, DedupFrameHeader *ret);

typedef struct DedupFrameEncoder DedupFrameEncoder;

/*
 * An encoder compressing at zstd `level` (DEDUP_FRAME_LEVEL_MIN..MAX, 0 =
 * default), marking ids as keyed if keyed_ids.  It owns a ZSTD_CCtx reused by
 * every encode; not thread-safe.
 * Returns: 0, -EINVAL (level), -ENOMEM.
 */
int dedup_frame_encoder_new(int level, bool keyed_ids, DedupFrameEncoder **ret);
DedupFrameEncoder *dedup_frame_encoder_free(DedupFrameEncoder *e);
/* Returns: 0 or -EINVAL (then the level is unchanged). */
int dedup_frame_encoder_set_level(DedupFrameEncoder *e, int level);

/*
 * Encodes the chunk plain[0, plain_size), whose id the caller computed, into
 * buf[0, size), which must hold dedup_frame_size_bound(plain_size) bytes.  The
 * payload is zstd if that saves at least 1/32 of plain_size (and one byte),
 * else the raw bytes.  *ret_size gets the frame's length.
 * Returns: 0, -EINVAL (plain_size 0 or > DEDUP_CHUNK_SIZE_LIMIT_MAX),
 * -ENOBUFS (size too small), -ENOMEM, -EIO.  On error buf holds garbage.
 */
int dedup_frame_encode(DedupFrameEncoder *e, const DedupChunkId *id, const void *plain, size_t plain_size,
		       void *buf, size_t size, size_t *ret_size);

typedef struct DedupFrameDecoder DedupFrameDecoder;

/* Owns a ZSTD_DCtx reused by every decode; not thread-safe. Returns: 0, -ENOMEM. */
int dedup_frame_decoder_new(DedupFrameDecoder **ret);
DedupFrameDecoder *dedup_frame_decoder_free(DedupFrameDecoder *d);

/*
 * Decodes the frame at the start of frame[0, frame_len) (bytes after it are
 * ignored: a frame may be read out of a larger buffer) into buf[0, size).
 * If verify is not NULL, the plain bytes are re-hashed with it and must equal
 * the frame's id.  ret_header (optional) gets the validated header: its
 * plain_size is the number of bytes written to buf, and
 * dedup_frame_header_frame_size() the number of frame bytes used.
 * Returns: 0, or one of the errors listed at the top; -ENOBUFS is checked
 * before anything is written to buf.  On error buf may hold garbage and must
 * not be used.
 */
int dedup_frame_decode(DedupFrameDecoder *d, const void *frame, size_t frame_len, DedupHasher *verify,
		       void *buf, size_t size, DedupFrameHeader *ret_header);
