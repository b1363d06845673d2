/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Compression regions: encode consecutive chunks as one compressed payload
 * behind a checksummed header and a table of their ids, and decode one
 * back, trusting nothing.  Format: docs/FORMAT.md, "Compression region".
 *
 * Invariants:
 *  1. decode interprets no header field before magic, version and the
 *     header checksum are good, no table entry before the region checksum
 *     (which covers the table and the payload) is good, and no payload byte
 *     before the table adds up to plain_size within the format's limits.
 *  2. decode writes at most plain_size bytes and count table entries to the
 *     caller's buffers, and succeeds only if exactly plain_size bytes came
 *     out of the payload (and, when asked, every chunk hashes to its id).
 *  3. stored_size < plain_size for zstd and == for raw, so a region never
 *     exceeds dedup_region_size_bound() of its contents.
 *  4. zstd's size_t error codes are translated here and never returned;
 *     OpenSSL's 0/1 become -EIO (or -EBADMSG for a tag that does not match).
 *  5. Nothing of a sealed region's payload is decompressed, and nothing of
 *     it or its table is handed out, before its tag checked out under the
 *     key and the place the caller read it from.
 *  6. A version 4 region's table is read only from its decrypted copy, and
 *     checked (lengths adding up to plain_size) as a clear one is, after
 *     the tag and before the payload is decompressed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>
#include <zstd.h>
#include <zstd_errors.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "common/macros.h"
#include "dedup/frame.h"
#include "dedup/le-internal.h"
#include "dedup/region.h"

static const uint8_t region_magic[4] = { 0x89, 'F', 'T', 'R' };

/* Header offsets (docs/FORMAT.md). */
enum {
	OFF_MAGIC = 0,
	OFF_VERSION = 4,
	OFF_CODEC = 5,
	OFF_FLAGS = 6,
	OFF_LEVEL = 8,
	OFF_RESERVED1 = 9,
	OFF_COUNT = 12,
	OFF_PLAIN_SIZE = 16,
	OFF_STORED_SIZE = 20,
	OFF_RESERVED2 = 24,
	OFF_CHECKSUM = 48,
	OFF_HEADER_CHECKSUM = 56,
	/* Version 2 (sealed): the nonce and the tag take the reserved bytes and the checksum. */
	OFF_NONCE = 24,
	OFF_TAG = 36,
	OFF_RESERVED3 = 52, /* version 2; versions 3 and 4: the key tag */
	OFF_KEY_TAG = 52,
	/* Header bytes of the associated data: every field but the nonce, tag and checksums. */
	AAD_HEADER = 24,
};
_Static_assert(OFF_NONCE + DEDUP_REGION_NONCE_SIZE == OFF_TAG, "sealed header layout");
_Static_assert(OFF_TAG + DEDUP_REGION_TAG_SIZE + 4 == OFF_HEADER_CHECKSUM, "sealed header layout");
_Static_assert(OFF_HEADER_CHECKSUM + 8 == DEDUP_REGION_HEADER_SIZE, "header layout");
_Static_assert(4 + DEDUP_CHUNK_ID_SIZE == DEDUP_REGION_ENTRY_SIZE, "table entry layout");
_Static_assert(DEDUP_REGION_SIZE_MAX <= UINT32_MAX, "a region's size fits u32");

struct DedupRegionEncoder {
	ZSTD_CCtx *cctx;
	int level;
	bool keyed_ids;
};

struct DedupRegionDecoder {
	ZSTD_DCtx *dctx;
	/*
	 * Set up for AES-256-GCM once: a region then only sets its nonce, and
	 * its key when it is not the last one's.  Fetching the cipher and
	 * expanding the key again for every region cost as much as decrypting
	 * a 32 KiB payload (bench/README.md, "Encryption on and off").
	 */
	EVP_CIPHER_CTX *cipher;
	uint8_t cipher_key[DEDUP_REGION_KEY_SIZE];
	bool cipher_keyed; /* cipher_key is the key cipher is set up with */
	uint8_t *scratch; /* a sealed zstd payload, decrypted before it is decompressed */
	size_t scratch_cap;
	uint8_t *table; /* a version 4 region's table, decrypted */
	size_t table_cap;
};

DEFINE_CLEANUP_FUNC(DedupRegionEncoder, dedup_region_encoder_free);
DEFINE_CLEANUP_FUNC(DedupRegionDecoder, dedup_region_decoder_free);

/* XXH3-64 of header bytes [0, 48), then the table and the payload (contiguous after the header). */
static uint64_t region_checksum(const uint8_t *region, size_t rest) {
	XXH3_state_t st;
	XXH3_INITSTATE(&st);
	/* Reset and update only fail for NULL arguments, which cannot happen here. */
	(void) XXH3_64bits_reset(&st);
	(void) XXH3_64bits_update(&st, region, OFF_CHECKSUM);
	(void) XXH3_64bits_update(&st, region + DEDUP_REGION_HEADER_SIZE, rest);
	return XXH3_64bits_digest(&st);
}

static bool level_is_valid(int level) {
	return level >= DEDUP_FRAME_LEVEL_MIN && level <= DEDUP_FRAME_LEVEL_MAX;
}

DedupRegionEncoder *dedup_region_encoder_free(DedupRegionEncoder *e) {
	if (!e)
		return NULL;
	ZSTD_freeCCtx(e->cctx);
	free(e);
	return NULL;
}

int dedup_region_encoder_new(int level, bool keyed_ids, DedupRegionEncoder **ret) {
	if (!level_is_valid(level))
		return -EINVAL;

	_cleanup_(dedup_region_encoder_freep) DedupRegionEncoder *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->level = level;
	e->keyed_ids = keyed_ids;
	e->cctx = ZSTD_createCCtx();
	if (!e->cctx)
		return -ENOMEM;

	*ret = TAKE_PTR(e);
	return 0;
}

int dedup_region_encoder_set_level(DedupRegionEncoder *e, int level) {
	if (!level_is_valid(level))
		return -EINVAL;
	e->level = level;
	return 0;
}

int dedup_region_encoder_level(const DedupRegionEncoder *e) {
	return e->level;
}

int dedup_region_encode(DedupRegionEncoder *e, const DedupChunkId *ids, const uint32_t *lengths, size_t count,
			const void *plain, size_t plain_size, void *buf, size_t size, size_t *ret_size) {
	if (!ids || !lengths || !plain || count == 0 || count > DEDUP_REGION_CHUNKS_MAX || plain_size == 0 ||
	    plain_size > DEDUP_REGION_PLAIN_MAX)
		return -EINVAL;
	size_t sum = 0;
	for (size_t i = 0; i < count; i++) {
		if (lengths[i] == 0 || lengths[i] > DEDUP_CHUNK_SIZE_LIMIT_MAX)
			return -EINVAL;
		sum += lengths[i];
	}
	if (sum != plain_size)
		return -EINVAL;
	if (size < dedup_region_size_bound(count, plain_size))
		return -ENOBUFS;

	uint8_t *out = buf, *table = out + DEDUP_REGION_HEADER_SIZE, *payload = table + count * DEDUP_REGION_ENTRY_SIZE;
	DedupRegionCodec codec = DEDUP_REGION_CODEC_RAW;
	size_t stored_size = plain_size;

	/* As for chunk frames: zstd only if it saves 1/32, found out in one pass without a scratch buffer. */
	size_t stored_max = plain_size - MAX(plain_size / 32, (size_t) 1);
	if (stored_max > 0) {
		size_t z = ZSTD_compressCCtx(e->cctx, payload, stored_max, plain, plain_size, e->level);
		if (!ZSTD_isError(z)) {
			codec = DEDUP_REGION_CODEC_ZSTD;
			stored_size = z;
		} else if (ZSTD_getErrorCode(z) == ZSTD_error_memory_allocation)
			return -ENOMEM;
		else if (ZSTD_getErrorCode(z) != ZSTD_error_dstSize_tooSmall)
			return -EIO;
	}
	if (codec == DEDUP_REGION_CODEC_RAW)
		memcpy(payload, plain, plain_size);

	for (size_t i = 0; i < count; i++) {
		le32_put(table + i * DEDUP_REGION_ENTRY_SIZE, lengths[i]);
		memcpy(table + i * DEDUP_REGION_ENTRY_SIZE + 4, ids[i].bytes, DEDUP_CHUNK_ID_SIZE);
	}
	memset(out, 0, DEDUP_REGION_HEADER_SIZE);
	memcpy(out + OFF_MAGIC, region_magic, sizeof(region_magic));
	out[OFF_VERSION] = DEDUP_REGION_VERSION;
	out[OFF_CODEC] = (uint8_t) codec;
	le16_put(out + OFF_FLAGS, e->keyed_ids ? DEDUP_REGION_FLAG_KEYED_IDS : 0);
	out[OFF_LEVEL] = (uint8_t) (int8_t) e->level;
	le32_put(out + OFF_COUNT, (uint32_t) count);
	le32_put(out + OFF_PLAIN_SIZE, (uint32_t) plain_size);
	le32_put(out + OFF_STORED_SIZE, (uint32_t) stored_size);
	le64_put(out + OFF_CHECKSUM, region_checksum(out, count * DEDUP_REGION_ENTRY_SIZE + stored_size));
	le64_put(out + OFF_HEADER_CHECKSUM, XXH3_64bits(out, OFF_HEADER_CHECKSUM));

	*ret_size = dedup_region_size_bound(count, stored_size);
	return 0;
}

int dedup_region_header_parse(const void *buf, size_t len, DedupRegionHeader *ret) {
	const uint8_t *p = buf;

	if (!p || len < DEDUP_REGION_HEADER_SIZE)
		return -EBADMSG;
	if (memcmp(p + OFF_MAGIC, region_magic, sizeof(region_magic)) != 0)
		return -EBADMSG;
	/* Magic and version stay at offsets 0..4 in every version; nothing else is known to. */
	if (p[OFF_VERSION] == 0)
		return -EBADMSG;
	if (p[OFF_VERSION] > DEDUP_REGION_VERSION_SEALED)
		return -EPROTONOSUPPORT;
	if (XXH3_64bits(p, OFF_HEADER_CHECKSUM) != le64_get(p + OFF_HEADER_CHECKSUM))
		return -EBADMSG;
	bool sealed = p[OFF_VERSION] >= DEDUP_REGION_VERSION_SEALED_V2;

	DedupRegionHeader h = {
		.version = p[OFF_VERSION],
		.flags = le16_get(p + OFF_FLAGS),
		.level = (int8_t) p[OFF_LEVEL],
		.count = le32_get(p + OFF_COUNT),
		.plain_size = le32_get(p + OFF_PLAIN_SIZE),
		.stored_size = le32_get(p + OFF_STORED_SIZE),
		.checksum = sealed ? 0 : le64_get(p + OFF_CHECKSUM),
		.key_tag = p[OFF_VERSION] >= DEDUP_REGION_VERSION_SEALED_V3 ? le32_get(p + OFF_KEY_TAG) : 0,
	};
	/* A good checksum only proves these fields were written so: check them anyway. */
	if (h.flags & ~DEDUP_REGION_FLAGS_KNOWN)
		return -EBADMSG;
	/* Only a mount with a key seals, and a key always keys the ids. */
	if (sealed && !(h.flags & DEDUP_REGION_FLAG_KEYED_IDS))
		return -EBADMSG;
	if (!le_is_zero(p + OFF_RESERVED1, OFF_COUNT - OFF_RESERVED1))
		return -EBADMSG;
	if (p[OFF_VERSION] == DEDUP_REGION_VERSION_SEALED_V2
		    ? !le_is_zero(p + OFF_RESERVED3, OFF_HEADER_CHECKSUM - OFF_RESERVED3)
		    : !sealed && !le_is_zero(p + OFF_RESERVED2, OFF_CHECKSUM - OFF_RESERVED2))
		return -EBADMSG;
	if (!level_is_valid(h.level))
		return -EBADMSG;
	if (h.count == 0 || h.count > DEDUP_REGION_CHUNKS_MAX)
		return -EBADMSG;
	/* Every chunk has at least one byte. */
	if (h.plain_size < h.count || h.plain_size > DEDUP_REGION_PLAIN_MAX)
		return -EBADMSG;
	switch (p[OFF_CODEC]) {
	case DEDUP_REGION_CODEC_RAW:
		if (h.stored_size != h.plain_size)
			return -EBADMSG;
		break;
	case DEDUP_REGION_CODEC_ZSTD:
		if (h.stored_size == 0 || h.stored_size >= h.plain_size)
			return -EBADMSG;
		break;
	default:
		return -EBADMSG;
	}
	h.codec = (DedupRegionCodec) p[OFF_CODEC];

	*ret = h;
	return 0;
}

/*
 * Feeds the associated data of the sealed region at p to a GCM context set
 * up for it: header bytes 0..23 (every field but the nonce, tag and
 * checksums: version, codec, flags, level, count and sizes), from version
 * 3 the key tag (bytes 52..55), in versions 2 and 3 the table (version 4
 * encrypts it with the payload instead), and the place, container id then
 * offset, as u64 LE.  The tag thus fails for a region whose header or
 * table was changed, or that is read from a place other than where it was
 * sealed (swapped, moved, copied into another container).
 */
static int place_aad(EVP_CIPHER_CTX *ctx, bool encrypt, const uint8_t *p, size_t table_size,
		     const DedupRegionPlace *place) {
	uint8_t where[16];
	int n;
	le64_put(where, place->container);
	le64_put(where + 8, place->offset);
	int (*update)(EVP_CIPHER_CTX *, unsigned char *, int *, const unsigned char *, int) =
		encrypt ? EVP_EncryptUpdate : EVP_DecryptUpdate;
	if (update(ctx, NULL, &n, p, AAD_HEADER) != 1 ||
	    (p[OFF_VERSION] >= DEDUP_REGION_VERSION_SEALED_V3 && update(ctx, NULL, &n, p + OFF_KEY_TAG, 4) != 1) ||
	    (p[OFF_VERSION] < DEDUP_REGION_VERSION_SEALED &&
	     update(ctx, NULL, &n, p + DEDUP_REGION_HEADER_SIZE, (int) table_size) != 1) ||
	    update(ctx, NULL, &n, where, sizeof(where)) != 1)
		return -EIO;
	return 0;
}

static int gcm_seal_init(EVP_CIPHER_CTX *ctx, const uint8_t *key, const uint8_t *nonce) {
	/* The nonce length is GCM's default, 12 bytes: no EVP_CTRL_GCM_SET_IVLEN. */
	_Static_assert(DEDUP_REGION_NONCE_SIZE == 12, "GCM's default IV length");
	if (EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, nonce) != 1)
		return -EIO;
	return 0;
}

int dedup_region_seal(void *region, size_t len, const DedupRegionPlace *place) {
	uint8_t *p = region;
	DedupRegionHeader h;
	int n, r;

	if (!place || !place->key || dedup_region_check(region, len, &h) < 0 || h.version != DEDUP_REGION_VERSION ||
	    !(h.flags & DEDUP_REGION_FLAG_KEYED_IDS))
		return -EINVAL;
	/* Version 4: the table is encrypted with the payload, which follows it. */
	size_t sealed_size = (size_t) h.count * DEDUP_REGION_ENTRY_SIZE + h.stored_size;
	uint8_t *sealed = p + DEDUP_REGION_HEADER_SIZE;

	/*
	 * A fresh random 96-bit nonce per region (docs/FORMAT.md, "Sealed
	 * region"): a place is not unique over time (a container's tail is cut
	 * back after a crash and written again; hosts sharing a tier number
	 * their containers alike), a random nonce needs no state to stay unique.
	 */
	uint8_t nonce[DEDUP_REGION_NONCE_SIZE];
	if (RAND_bytes(nonce, sizeof(nonce)) != 1)
		return -EIO;
	p[OFF_VERSION] = DEDUP_REGION_VERSION_SEALED;
	memset(p + OFF_NONCE, 0, OFF_HEADER_CHECKSUM + 8 - OFF_NONCE);
	memcpy(p + OFF_NONCE, nonce, sizeof(nonce));
	le32_put(p + OFF_KEY_TAG, place->key_tag);

	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	if (!ctx)
		return -EIO;
	r = gcm_seal_init(ctx, place->key, nonce);
	if (r >= 0)
		r = place_aad(ctx, true, p, 0, place);
	if (r >= 0 && EVP_EncryptUpdate(ctx, sealed, &n, sealed, (int) sealed_size) != 1)
		r = -EIO;
	if (r >= 0 && EVP_EncryptFinal_ex(ctx, sealed + n, &n) != 1)
		r = -EIO;
	if (r >= 0 && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, DEDUP_REGION_TAG_SIZE, p + OFF_TAG) != 1)
		r = -EIO;
	EVP_CIPHER_CTX_free(ctx);
	if (r < 0)
		return r;
	le64_put(p + OFF_HEADER_CHECKSUM, XXH3_64bits(p, OFF_HEADER_CHECKSUM));
	return 0;
}

/* The content key that sealed a region of header h (see DedupRegionPlace), or NULL: not given. */
static const uint8_t *place_key(const DedupRegionPlace *place, const DedupRegionHeader *h) {
	if (h->version == DEDUP_REGION_VERSION_SEALED_V2)
		return place->old && place->old->n > 0 ? place->old->keys[0].content : place->key;
	if (place->key && h->key_tag == place->key_tag)
		return place->key;
	for (size_t i = 0; place->old && i < place->old->n; i++)
		if (place->old->keys[i].tag == h->key_tag)
			return place->old->keys[i].content;
	return NULL;
}

/*
 * Decrypts the payload of the sealed region p (checked) into out, and in
 * version 4 its table into d->table first, and checks its tag; wipes both
 * if it fails.
 */
static int region_open(DedupRegionDecoder *d, const uint8_t *p, const DedupRegionHeader *h, const uint8_t *key,
		       const DedupRegionPlace *place, uint8_t *out) {
	size_t table_size = (size_t) h->count * DEDUP_REGION_ENTRY_SIZE;
	const uint8_t *payload = p + DEDUP_REGION_HEADER_SIZE + table_size;
	bool table_sealed = dedup_region_header_table_is_sealed(h);
	uint8_t tag[DEDUP_REGION_TAG_SIZE];
	int n, r;

	memcpy(tag, p + OFF_TAG, sizeof(tag));
	if (d->cipher_keyed && CRYPTO_memcmp(d->cipher_key, key, sizeof(d->cipher_key)) == 0)
		key = NULL;
	/* A failed init leaves no key set up for certain: set it again next time. */
	d->cipher_keyed = false;
	r = EVP_DecryptInit_ex(d->cipher, NULL, NULL, key, p + OFF_NONCE) == 1 ? 0 : -EIO;
	if (r >= 0) {
		if (key)
			memcpy(d->cipher_key, key, sizeof(d->cipher_key));
		d->cipher_keyed = true;
	}
	if (r >= 0)
		r = place_aad(d->cipher, false, p, table_size, place);
	/* GCM is a stream: the table and the payload decrypt in two steps, each where it is wanted. */
	if (r >= 0 && table_sealed &&
	    EVP_DecryptUpdate(d->cipher, d->table, &n, p + DEDUP_REGION_HEADER_SIZE, (int) table_size) != 1)
		r = -EIO;
	if (r >= 0 && EVP_DecryptUpdate(d->cipher, out, &n, payload, (int) h->stored_size) != 1)
		r = -EIO;
	if (r >= 0 && EVP_CIPHER_CTX_ctrl(d->cipher, EVP_CTRL_GCM_SET_TAG, sizeof(tag), tag) != 1)
		r = -EIO;
	/* Final fails exactly when the tag does not match: the region was changed, moved or is not ours. */
	if (r >= 0 && EVP_DecryptFinal_ex(d->cipher, out + n, &n) != 1)
		r = -EBADMSG;
	if (r < 0) {
		OPENSSL_cleanse(out, h->stored_size);
		if (table_sealed)
			OPENSSL_cleanse(d->table, table_size);
	}
	return r;
}

DedupRegionDecoder *dedup_region_decoder_free(DedupRegionDecoder *d) {
	if (!d)
		return NULL;
	ZSTD_freeDCtx(d->dctx);
	EVP_CIPHER_CTX_free(d->cipher);
	OPENSSL_cleanse(d->cipher_key, sizeof(d->cipher_key));
	free(d->scratch);
	free(d->table);
	free(d);
	return NULL;
}

int dedup_region_decoder_new(DedupRegionDecoder **ret) {
	_cleanup_(dedup_region_decoder_freep) DedupRegionDecoder *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->dctx = ZSTD_createDCtx();
	d->cipher = EVP_CIPHER_CTX_new();
	if (!d->dctx || !d->cipher)
		return -ENOMEM;
	/* The cipher alone, no key or nonce yet: every region sets those (region_open()). */
	if (EVP_DecryptInit_ex(d->cipher, EVP_aes_256_gcm(), NULL, NULL, NULL) != 1)
		return -ENOMEM;

	*ret = TAKE_PTR(d);
	return 0;
}

/* Whether a table's lengths are each 1 .. DEDUP_CHUNK_SIZE_LIMIT_MAX and add up to h's plain_size. */
static int table_check(const uint8_t *table, const DedupRegionHeader *h) {
	uint64_t sum = 0;
	for (size_t i = 0; i < h->count; i++) {
		uint32_t n = le32_get(table + i * DEDUP_REGION_ENTRY_SIZE);
		if (n == 0 || n > DEDUP_CHUNK_SIZE_LIMIT_MAX)
			return -EBADMSG;
		sum += n;
	}
	return sum == h->plain_size ? 0 : -EBADMSG;
}

static void entry_get(const uint8_t *table, size_t i, uint32_t *ret_length, DedupChunkId *ret_id) {
	const uint8_t *e = table + i * DEDUP_REGION_ENTRY_SIZE;
	*ret_length = le32_get(e);
	memcpy(ret_id->bytes, e + 4, DEDUP_CHUNK_ID_SIZE);
}

/* Makes *buf hold at least size bytes (what it held is not kept). */
static int buffer_reserve(uint8_t **buf, size_t *cap, size_t size) {
	if (*cap >= size)
		return 0;
	uint8_t *b = realloc(*buf, size);
	if (!b)
		return -ENOMEM;
	*buf = b;
	*cap = size;
	return 0;
}

int dedup_region_check(const void *region, size_t len, DedupRegionHeader *ret) {
	const uint8_t *p = region;
	DedupRegionHeader h;
	int r;

	r = dedup_region_header_parse(region, len, &h);
	if (r < 0)
		return r;
	/* count and stored_size are bounded by the parse: no overflow. */
	size_t table_size = (size_t) h.count * DEDUP_REGION_ENTRY_SIZE;
	if (dedup_region_header_region_size(&h) > len)
		return -EBADMSG;
	if (!dedup_region_header_is_sealed(&h) && region_checksum(p, table_size + h.stored_size) != h.checksum)
		return -EBADMSG;
	if (!dedup_region_header_table_is_sealed(&h)) {
		r = table_check(p + DEDUP_REGION_HEADER_SIZE, &h);
		if (r < 0)
			return r;
	}
	*ret = h;
	return 0;
}

void dedup_region_table_get(const void *region, size_t i, uint32_t *ret_length, DedupChunkId *ret_id) {
	entry_get((const uint8_t *) region + DEDUP_REGION_HEADER_SIZE, i, ret_length, ret_id);
}

int dedup_region_decode(DedupRegionDecoder *d, const void *region, size_t len, const DedupRegionPlace *place,
			DedupHasher *verify, void *plain, size_t plain_cap, uint32_t *lengths, DedupChunkId *ids,
			size_t entries_cap, DedupRegionHeader *ret_header) {
	DedupRegionHeader h;
	int r;

	r = dedup_region_check(region, len, &h);
	if (r < 0)
		return r;
	if (verify && dedup_hasher_is_keyed(verify) != !!(h.flags & DEDUP_REGION_FLAG_KEYED_IDS))
		return -ENOKEY;
	bool sealed = dedup_region_header_is_sealed(&h);
	const uint8_t *key = sealed && place ? place_key(place, &h) : NULL;
	if (sealed && !key)
		return -ENOKEY;
	if (!plain || plain_cap < h.plain_size || ((lengths || ids) && entries_cap < h.count))
		return -ENOBUFS;

	const uint8_t *table = (const uint8_t *) region + DEDUP_REGION_HEADER_SIZE;
	const uint8_t *payload = table + (size_t) h.count * DEDUP_REGION_ENTRY_SIZE;
	bool table_sealed = dedup_region_header_table_is_sealed(&h);
	if (table_sealed) {
		r = buffer_reserve(&d->table, &d->table_cap, (size_t) h.count * DEDUP_REGION_ENTRY_SIZE);
		if (r < 0)
			return r;
		table = d->table;
	}
	if (sealed && h.codec == DEDUP_REGION_CODEC_RAW)
		/* Invariant 5: the tag is checked before the caller gets a byte. */
		r = region_open(d, region, &h, key, place, plain);
	else if (sealed) {
		r = buffer_reserve(&d->scratch, &d->scratch_cap, h.stored_size);
		if (r < 0)
			return r;
		r = region_open(d, region, &h, key, place, d->scratch);
		payload = d->scratch;
	}
	/* Invariant 6: only a key holder could have written a bad table here, but it is checked all the same. */
	if (r >= 0 && table_sealed)
		r = table_check(table, &h);
	if (r < 0)
		return r;
	if (h.codec == DEDUP_REGION_CODEC_RAW) {
		if (!sealed)
			memcpy(plain, payload, h.plain_size);
	} else {
		/* Capacity exactly plain_size: a payload that would expand further fails inside zstd. */
		size_t n = ZSTD_decompressDCtx(d->dctx, plain, h.plain_size, payload, h.stored_size);
		if (ZSTD_isError(n))
			return ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation ? -ENOMEM : -EBADMSG;
		if (n != h.plain_size)
			return -EBADMSG;
	}

	const uint8_t *at = plain;
	for (size_t i = 0; i < h.count; i++) {
		DedupChunkId want;
		uint32_t n;
		entry_get(table, i, &n, &want);
		if (verify) {
			DedupChunkId id;
			r = dedup_hasher_digest(verify, at, n, &id);
			if (r < 0)
				return r;
			if (!dedup_chunk_id_equal(&id, &want))
				return -EBADMSG;
		}
		if (lengths)
			lengths[i] = n;
		if (ids)
			ids[i] = want;
		at += n;
	}

	if (ret_header)
		*ret_header = h;
	return 0;
}
