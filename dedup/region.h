/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Compression regions: how chunks are stored since container version 2.
 * A region holds consecutive new chunks of one file, compressed together as
 * one zstd frame (small chunks alone lose the context zstd needs), while a
 * table names every chunk by its id so each is still deduplicated, indexed
 * and verified alone.  A 64-byte little-endian header, the table, then the
 * payload; byte by byte in docs/FORMAT.md ("Compression region"):
 *
 *   0  magic "\x89FTR"   4  version   5  codec   6  flags (u16)
 *   8  level (i8)        9  reserved (3)
 *   12 count (u32)       16 plain_size (u32)    20 stored_size (u32)
 *   24 reserved (24)
 *   48 checksum (u64): XXH3-64 of bytes 0..47, the table and the payload
 *   56 header_checksum (u64): XXH3-64 of bytes 0..55
 *   64 table: count x (length u32, id 32 bytes), in plain order
 *   64 + 36 x count: payload (stored_size bytes): the chunks' bytes back to
 *      back, raw or as one zstd frame
 *
 * Decoding checks every header field, both checksums, the table and the
 * exact decompressed size before anything is handed back, and with a hasher
 * re-hashes every chunk against its id: corrupt or hostile bytes give an
 * error, never wrong data.
 *
 * Errors (negative errno), the same as chunk frames' (dedup/frame.h):
 * -EBADMSG (corrupt), -EPROTONOSUPPORT (a newer version), -ENOBUFS (the
 * caller's buffer), -ENOKEY (a hasher of the other kind), -EINVAL (bad
 * arguments), -ENOMEM, -EIO.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/fingerprint.h"
#include "dedup/key.h"
#include "dedup/limits.h"

/* What the encoder writes; dedup_region_seal() makes it DEDUP_REGION_VERSION_SEALED. */
#define DEDUP_REGION_VERSION 1
/* AES-256-GCM of the payload under the content subkey, bound to its place (docs/FORMAT.md); still read. */
#define DEDUP_REGION_VERSION_SEALED_V2 2
/* As version 2, naming the key that sealed it (its tag, authenticated); still read. */
#define DEDUP_REGION_VERSION_SEALED_V3 3
/* As version 3 with the table encrypted along with the payload: what dedup_region_seal() writes. */
#define DEDUP_REGION_VERSION_SEALED 4
#define DEDUP_REGION_KEY_SIZE 32u
#define DEDUP_REGION_NONCE_SIZE 12u
#define DEDUP_REGION_TAG_SIZE 16u
#define DEDUP_REGION_HEADER_SIZE 64u
#define DEDUP_REGION_ENTRY_SIZE 36u
/* Most chunks in one region: a 1 MiB region of 64-byte chunks (the smallest CDC allows). */
#define DEDUP_REGION_CHUNKS_MAX 16384u
/* Most plain bytes in one region: a region may always hold one chunk of the largest size. */
#define DEDUP_REGION_PLAIN_MAX DEDUP_CHUNK_SIZE_LIMIT_MAX
#define DEDUP_REGION_SIZE_MAX \
	(DEDUP_REGION_HEADER_SIZE + DEDUP_REGION_CHUNKS_MAX * DEDUP_REGION_ENTRY_SIZE + DEDUP_REGION_PLAIN_MAX)

/* Region sizes a store accepts (what writers gather before they compress). */
#define DEDUP_REGION_TARGET_MIN (4u << 10)
#define DEDUP_REGION_TARGET_MAX (1u << 20)
#define DEDUP_REGION_TARGET_DEFAULT (128u << 10)

typedef enum DedupRegionCodec {
	DEDUP_REGION_CODEC_RAW = 0,
	DEDUP_REGION_CODEC_ZSTD = 1,
	_DEDUP_REGION_CODEC_MAX,
	_DEDUP_REGION_CODEC_INVALID = -22, /* -EINVAL */
} DedupRegionCodec;

/* The ids are HMAC-SHA-256 under a key not stored with the region. */
#define DEDUP_REGION_FLAG_KEYED_IDS 0x0001u
#define DEDUP_REGION_FLAGS_KNOWN DEDUP_REGION_FLAG_KEYED_IDS

/* A parsed, validated header. */
typedef struct DedupRegionHeader {
	uint8_t version;
	DedupRegionCodec codec;
	uint16_t flags;
	int level;            /* zstd level the encoder ran at (also for raw payloads) */
	uint32_t count;       /* chunks */
	uint32_t plain_size;  /* their bytes */
	uint32_t stored_size; /* payload bytes */
	uint64_t checksum;    /* version 1 only */
	uint32_t key_tag;     /* versions 3 and 4: the tag of the key that sealed it (dedup_key_tag()) */
} DedupRegionHeader;

/* A sealed region's payload is AES-256-GCM ciphertext: reading it needs the key and its place. */
static inline bool dedup_region_header_is_sealed(const DedupRegionHeader *h) {
	return h->version >= DEDUP_REGION_VERSION_SEALED_V2;
}

/*
 * A version 4 region's table (chunk lengths and ids) is ciphertext: only
 * dedup_region_decode() with its key reads it; a walk without the key
 * knows the region's size, count and plain size from its header alone.
 */
static inline bool dedup_region_header_table_is_sealed(const DedupRegionHeader *h) {
	return h->version >= DEDUP_REGION_VERSION_SEALED;
}

/*
 * Where a sealed region lies and the keys to open it with.  The container
 * id and the region's offset in it are authenticated with the region, so a
 * region moved elsewhere (another offset, another container) fails to open
 * even though it was once genuine.  A region of version 3 or 4 names the key
 * that sealed it by its tag: key if key_tag is it, else the older key of
 * old with that tag; one of version 2 (before rotation) was sealed under
 * the data directory's first key: old's oldest, or key when old is empty.
 */
typedef struct DedupRegionPlace {
	const uint8_t *key;       /* DEDUP_REGION_KEY_SIZE bytes: the content subkey (dedup/key.h) that seals */
	uint32_t key_tag;         /* its key's tag (dedup_key_tag()) */
	const DedupOldKeys *old;  /* older keys that only open, or NULL */
	uint64_t container;
	uint64_t offset;
} DedupRegionPlace;

/* Bytes the whole region occupies: header, table and payload. */
static inline size_t dedup_region_header_region_size(const DedupRegionHeader *h) {
	return DEDUP_REGION_HEADER_SIZE + (size_t) h->count * DEDUP_REGION_ENTRY_SIZE + h->stored_size;
}

/* Output capacity that always suffices to encode count chunks of plain_size bytes in all. */
static inline size_t dedup_region_size_bound(size_t count, size_t plain_size) {
	return DEDUP_REGION_HEADER_SIZE + count * DEDUP_REGION_ENTRY_SIZE + plain_size;
}

/*
 * Parses and validates the header at the start of buf[0, len) alone (magic,
 * version, header checksum, codec, flags, level, counts, sizes, reserved
 * bytes), without the table or the payload, so a container can be walked
 * region by region.  Returns: 0 and *ret, -EBADMSG (also when len < 64),
 * -EPROTONOSUPPORT.
 */
int dedup_region_header_parse(const void *buf, size_t len, DedupRegionHeader *ret);

/*
 * Checks a whole region at the start of region[0, len) without
 * decompressing it: the header, that the region fits in len, its checksum
 * (which covers the table and the payload) and the table (lengths of 1 ..
 * DEDUP_CHUNK_SIZE_LIMIT_MAX adding up to plain_size).  Its table may then
 * be read with dedup_region_table_get(), unless it is sealed.
 * (!) A sealed region has no checksum a reader without the key could
 * check: its table and payload are authenticated only by opening it
 * (dedup_region_decode() with its place); here only its structure is, and
 * of version 4 not even its table (dedup_region_header_table_is_sealed()).
 * Returns: 0 and *ret, -EBADMSG, -EPROTONOSUPPORT.
 */
int dedup_region_check(const void *region, size_t len, DedupRegionHeader *ret);

/*
 * Entry i (< count) of the table of a region that passed
 * dedup_region_check() and whose table is not sealed.  Can't fail.
 */
void dedup_region_table_get(const void *region, size_t i, uint32_t *ret_length, DedupChunkId *ret_id);

typedef struct DedupRegionEncoder DedupRegionEncoder;

/*
 * An encoder compressing at zstd `level` (DEDUP_FRAME_LEVEL_MIN..MAX of
 * dedup/frame.h, 0 = zstd's default), marking ids as keyed if keyed_ids.
 * Owns a ZSTD_CCtx reused by every encode; not thread-safe.
 * Returns: 0, -EINVAL (level), -ENOMEM.
 */
int dedup_region_encoder_new(int level, bool keyed_ids, DedupRegionEncoder **ret);
DedupRegionEncoder *dedup_region_encoder_free(DedupRegionEncoder *e);
/* Returns: 0 or -EINVAL (then the level is unchanged). */
int dedup_region_encoder_set_level(DedupRegionEncoder *e, int level);
int dedup_region_encoder_level(const DedupRegionEncoder *e);

/*
 * Encodes the count chunks ids[i] / lengths[i], whose bytes are plain[0,
 * plain_size) back to back (lengths add up to plain_size), into buf[0,
 * size), which must hold dedup_region_size_bound(count, plain_size) bytes.
 * The payload is zstd if that saves at least 1/32 of plain_size (and one
 * byte), else the raw bytes.  *ret_size gets the region's length.
 * Returns: 0, -EINVAL (count 0 or above DEDUP_REGION_CHUNKS_MAX, a length
 * of 0 or above DEDUP_CHUNK_SIZE_LIMIT_MAX, lengths not adding up,
 * plain_size above DEDUP_REGION_PLAIN_MAX), -ENOBUFS, -ENOMEM, -EIO.  On
 * error buf holds garbage.
 */
int dedup_region_encode(DedupRegionEncoder *e, const DedupChunkId *ids, const uint32_t *lengths, size_t count,
			const void *plain, size_t plain_size, void *buf, size_t size, size_t *ret_size);

/*
 * Seals the version 1 region at the start of region[0, len) (just encoded,
 * keyed ids) in place into version 4, as the region of container
 * `place->container` at `place->offset`: a fresh random nonce, the table
 * and the payload encrypted with AES-256-GCM under place->key, the
 * header's fields (with place->key_tag) and the place authenticated as
 * associated data.  Its size does not change.
 * Returns: 0, -EINVAL (not a good version 1 region of keyed ids), -EIO
 * (OpenSSL, or no randomness).  After -EINVAL the region is unchanged;
 * after -EIO it holds garbage.
 */
int dedup_region_seal(void *region, size_t len, const DedupRegionPlace *place);

typedef struct DedupRegionDecoder DedupRegionDecoder;

/* Owns a ZSTD_DCtx reused by every decode; not thread-safe. Returns: 0, -ENOMEM. */
int dedup_region_decoder_new(DedupRegionDecoder **ret);
DedupRegionDecoder *dedup_region_decoder_free(DedupRegionDecoder *d);

/*
 * Decodes the region at the start of region[0, len) (bytes after it are
 * ignored) into plain[0, plain_cap) and, when not NULL, its table into
 * lengths[0, entries_cap) and ids[0, entries_cap).  A sealed region is
 * opened with place (its key and where it was read from): any change to
 * it, or a region read from anywhere but where it was sealed, fails
 * authentication (-EBADMSG) before a byte of it is decompressed.  With
 * verify, every chunk is re-hashed and must equal its id.  ret_header
 * (optional) gets the validated header: plain_size bytes were written to
 * plain and count entries to the table arrays.
 * Returns: 0, or one of the errors at the top; -ENOKEY also for a sealed
 * region without place or without the key it names; -ENOBUFS (plain_cap below plain_size, or
 * entries_cap below count with arrays given) is checked before anything
 * is written.  On error the outputs hold garbage (never bytes of a sealed
 * region that failed authentication: those are wiped).
 */
int dedup_region_decode(DedupRegionDecoder *d, const void *region, size_t len, const DedupRegionPlace *place,
			DedupHasher *verify, void *plain, size_t plain_cap, uint32_t *lengths, DedupChunkId *ids,
			size_t entries_cap, DedupRegionHeader *ret_header);
