/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Compression regions: the byte layout of docs/FORMAT.md, round trips at
 * every level and shape, and rejection of every corrupted field (with
 * checksums recomputed, so the field check itself is what is tested),
 * every single-bit flip (header, table, payload, checksums) and every
 * truncation; content verification against the table's ids.
 */
#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <xxhash.h>
#include <openssl/evp.h>
#include <zstd.h>

#include "common/macros.h"
#include "dedup/frame.h"
#include "dedup/region.h"
#include "tests/dedup/dedup-test.h"

#define KiB ((size_t) 1 << 10)

static DedupRegionEncoder *enc;
static DedupRegionDecoder *dec;
static DedupHasher *sha;

typedef struct Region {
	uint8_t *buf;
	size_t len;
	size_t count;
	uint8_t *plain;
	size_t plain_size;
	uint32_t lengths[64];
	DedupChunkId ids[64];
} Region;

/* count chunks of the given lengths (0: random 1..4000), compressible or random bytes. */
static Region make(size_t count, const uint32_t *lengths, bool random, TestRng *rng) {
	Region r = { .count = count };
	ASSERT(count <= ELEMENTSOF(r.lengths));
	for (size_t i = 0; i < count; i++) {
		r.lengths[i] = lengths ? lengths[i] : 1 + (uint32_t) (test_rng_next(rng) % 4000);
		r.plain_size += r.lengths[i];
	}
	r.plain = test_malloc(r.plain_size);
	if (random)
		test_rng_fill(rng, r.plain, r.plain_size);
	else
		for (size_t i = 0; i < r.plain_size; i++)
			r.plain[i] = (uint8_t) ("redo block SCN 0x00A3 "[i % 22] + (test_rng_next(rng) % 64 == 0));
	size_t at = 0;
	for (size_t i = 0; i < count; i++) {
		ASSERT_OK(dedup_hasher_digest(sha, r.plain + at, r.lengths[i], &r.ids[i]));
		at += r.lengths[i];
	}
	r.buf = test_malloc(dedup_region_size_bound(count, r.plain_size));
	ASSERT_OK(dedup_region_encode(enc, r.ids, r.lengths, count, r.plain, r.plain_size, r.buf,
				      dedup_region_size_bound(count, r.plain_size), &r.len));
	return r;
}

static void region_free(Region *r) {
	free(r->buf);
	free(r->plain);
}

static void set_le(uint8_t *p, uint64_t v, size_t n) {
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

static uint64_t le_at(const uint8_t *p, size_t n) {
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t) p[i] << (8 * i);
	return v;
}

/* Recomputes both checksums, from docs/FORMAT.md: the region checksum over 0..47, table and payload. */
static void reseal(uint8_t *b, size_t len) {
	uint8_t *tmp = test_malloc(len);
	memcpy(tmp, b, 48);
	memcpy(tmp + 48, b + 64, len - 64);
	set_le(b + 48, XXH3_64bits(tmp, len - 16), 8);
	set_le(b + 56, XXH3_64bits(b, 56), 8);
	free(tmp);
}

static uint8_t *out_plain;
static uint32_t *out_lengths;
static DedupChunkId *out_ids;

static int decode(const uint8_t *b, size_t len, DedupHasher *verify) {
	return dedup_region_decode(dec, b, len, NULL, verify, out_plain, DEDUP_REGION_PLAIN_MAX, out_lengths, out_ids,
				   DEDUP_REGION_CHUNKS_MAX, NULL);
}

static void roundtrip(Region *r) {
	DedupRegionHeader h;
	uint8_t *plain = test_malloc(r->plain_size);
	uint32_t lengths[64];
	DedupChunkId ids[64];

	ASSERT_OK(dedup_region_decode(dec, r->buf, r->len, NULL, sha, plain, r->plain_size, lengths, ids, r->count, &h));
	ASSERT(h.count == r->count && h.plain_size == r->plain_size && dedup_region_header_region_size(&h) == r->len);
	ASSERT(memcmp(plain, r->plain, r->plain_size) == 0);
	for (size_t i = 0; i < r->count; i++)
		ASSERT(lengths[i] == r->lengths[i] && dedup_chunk_id_equal(&ids[i], &r->ids[i]));
	/* Without the table, without verification; bytes after the region are ignored. */
	uint8_t *longer = test_malloc(r->len + 10);
	memcpy(longer, r->buf, r->len);
	ASSERT_OK(dedup_region_decode(dec, longer, r->len + 10, NULL, NULL, plain, r->plain_size, NULL, NULL, 0, &h));
	ASSERT_OK(dedup_region_check(longer, r->len + 10, &h));
	for (size_t i = 0; i < r->count; i++) {
		uint32_t n;
		DedupChunkId id;
		dedup_region_table_get(longer, i, &n, &id);
		ASSERT(n == r->lengths[i] && dedup_chunk_id_equal(&id, &r->ids[i]));
	}
	ASSERT(h.stored_size <= r->plain_size);
	free(longer);
	free(plain);
}

static void test_layout(void) {
	TestRng rng = { 1 };
	uint32_t lengths[3] = { 1000, 2000, 3000 };
	Region r = make(3, lengths, false, &rng);
	const uint8_t *b = r.buf;

	ASSERT(memcmp(b, "\x89" "FTR\x01\x01\0\0\x03\0\0\0", 12) == 0); /* magic, version, zstd, flags, level 3 */
	ASSERT(le_at(b + 12, 4) == 3 && le_at(b + 16, 4) == 6000);
	uint32_t stored = (uint32_t) le_at(b + 20, 4);
	ASSERT(stored > 0 && stored < 6000 && r.len == 64 + 3 * 36 + stored);
	for (size_t i = 24; i < 48; i++)
		ASSERT(b[i] == 0);
	for (size_t i = 0; i < 3; i++) {
		ASSERT(le_at(b + 64 + 36 * i, 4) == lengths[i]);
		ASSERT(memcmp(b + 64 + 36 * i + 4, r.ids[i].bytes, 32) == 0);
	}
	/* The payload is one standard zstd frame of the chunks back to back. */
	uint8_t *plain = test_malloc(6000);
	ASSERT(ZSTD_decompress(plain, 6000, b + 64 + 108, stored) == 6000);
	ASSERT(memcmp(plain, r.plain, 6000) == 0);
	free(plain);
	uint8_t *tmp = test_malloc(r.len);
	memcpy(tmp, b, 48);
	memcpy(tmp + 48, b + 64, r.len - 64);
	ASSERT(le_at(b + 48, 8) == XXH3_64bits(tmp, r.len - 16));
	ASSERT(le_at(b + 56, 8) == XXH3_64bits(b, 56));
	free(tmp);
	region_free(&r);

	/* Incompressible bytes are stored raw; a negative level is recorded as such. */
	ASSERT_OK(dedup_region_encoder_set_level(enc, -5));
	r = make(2, NULL, true, &rng);
	ASSERT(r.buf[5] == 0 && (int8_t) r.buf[8] == -5 && r.len == 64 + 72 + r.plain_size);
	ASSERT(memcmp(r.buf + 64 + 72, r.plain, r.plain_size) == 0);
	roundtrip(&r);
	region_free(&r);
	ASSERT_OK(dedup_region_encoder_set_level(enc, 3));
	ASSERT_RET(dedup_region_encoder_set_level(enc, 20), -EINVAL);
	ASSERT(dedup_region_encoder_level(enc) == 3);
}

static void test_roundtrips(void) {
	TestRng rng = { 2 };
	static const int levels[] = { -7, 1, 3, 9, 19 };
	for (size_t l = 0; l < ELEMENTSOF(levels); l++) {
		ASSERT_OK(dedup_region_encoder_set_level(enc, levels[l]));
		for (size_t count = 1; count <= 40; count += 13)
			for (int random = 0; random <= 1; random++) {
				Region r = make(count, NULL, random, &rng);
				roundtrip(&r);
				region_free(&r);
			}
	}
	ASSERT_OK(dedup_region_encoder_set_level(enc, 3));

	/* The largest region: one chunk of 4 MiB. */
	uint32_t big = DEDUP_REGION_PLAIN_MAX;
	Region r = make(1, &big, false, &rng);
	roundtrip(&r);
	region_free(&r);
}

static void test_encode_errors(void) {
	TestRng rng = { 3 };
	Region r = make(2, NULL, false, &rng);
	uint8_t *buf = test_malloc(dedup_region_size_bound(2, r.plain_size));
	size_t size, bound = dedup_region_size_bound(2, r.plain_size);
	uint32_t bad[2] = { r.lengths[0], r.lengths[1] + 1 };

	ASSERT_RET(dedup_region_encode(enc, r.ids, r.lengths, 0, r.plain, r.plain_size, buf, bound, &size), -EINVAL);
	ASSERT_RET(dedup_region_encode(enc, r.ids, bad, 2, r.plain, r.plain_size, buf, bound, &size), -EINVAL);
	bad[1] = 0;
	ASSERT_RET(dedup_region_encode(enc, r.ids, bad, 2, r.plain, r.lengths[0], buf, bound, &size), -EINVAL);
	ASSERT_RET(dedup_region_encode(enc, r.ids, r.lengths, 2, r.plain, r.plain_size, buf, bound - 1, &size), -ENOBUFS);
	ASSERT_RET(dedup_region_encode(enc, r.ids, r.lengths, DEDUP_REGION_CHUNKS_MAX + 1, r.plain, r.plain_size, buf,
				       bound, &size),
		   -EINVAL);

	/* Decoding into buffers too small: nothing written, -ENOBUFS. */
	uint8_t *plain = test_malloc(r.plain_size);
	uint32_t lengths[2];
	ASSERT_RET(dedup_region_decode(dec, r.buf, r.len, NULL, NULL, plain, r.plain_size - 1, NULL, NULL, 0, NULL), -ENOBUFS);
	ASSERT_RET(dedup_region_decode(dec, r.buf, r.len, NULL, NULL, plain, r.plain_size, lengths, NULL, 1, NULL), -ENOBUFS);
	free(plain);
	free(buf);
	region_free(&r);
}

/* Sets a field (n bytes at off) to v, reseals, and expects want. */
static void field(const Region *r, size_t off, size_t n, uint64_t v, int want) {
	uint8_t *b = test_malloc(r->len);
	memcpy(b, r->buf, r->len);
	set_le(b + off, v, n);
	reseal(b, r->len);
	int got = decode(b, r->len, NULL);
	if (got != want) {
		fprintf(stderr, "field at %zu = %llu: %d, expected %d\n", off, (unsigned long long) v, got, want);
		abort();
	}
	free(b);
}

static void test_fields(void) {
	TestRng rng = { 4 };
	Region z = make(3, NULL, false, &rng), raw = make(3, NULL, true, &rng);
	uint32_t stored = (uint32_t) le_at(z.buf + 20, 4);

	field(&z, 4, 1, 0, -EBADMSG);               /* version 0 */
	field(&z, 4, 1, 2, -EBADMSG);               /* sealed, but plain ids: never written */
	field(&z, 4, 1, 3, -EBADMSG);               /* sealed (naming its key), but plain ids: never written */
	field(&z, 4, 1, 4, -EBADMSG);               /* sealed (table too), but plain ids: never written */
	field(&z, 4, 1, 5, -EPROTONOSUPPORT);       /* a newer version */
	field(&z, 5, 1, 2, -EBADMSG);               /* codec */
	field(&z, 6, 2, 2, -EBADMSG);               /* an unknown flag */
	field(&z, 8, 1, 20, -EBADMSG);              /* level above 19 */
	field(&z, 8, 1, (uint8_t) -8, -EBADMSG);    /* level below -7 */
	field(&z, 8, 1, 19, 0);                     /* any valid level decodes */
	field(&z, 9, 1, 1, -EBADMSG);               /* reserved */
	field(&z, 30, 1, 1, -EBADMSG);              /* reserved */
	field(&z, 12, 4, 0, -EBADMSG);              /* count 0 */
	field(&z, 12, 4, DEDUP_REGION_CHUNKS_MAX + 1, -EBADMSG);
	field(&z, 12, 4, 4, -EBADMSG);              /* count beyond the region */
	field(&z, 16, 4, 2, -EBADMSG);              /* plain_size below count */
	field(&z, 16, 4, DEDUP_REGION_PLAIN_MAX + 1, -EBADMSG);
	field(&z, 16, 4, z.plain_size + 1, -EBADMSG); /* table does not add up */
	field(&z, 20, 4, 0, -EBADMSG);              /* zstd with no payload */
	field(&z, 20, 4, z.plain_size, -EBADMSG);   /* zstd not smaller */
	field(&z, 20, 4, stored - 1, -EBADMSG);     /* payload cut */
	field(&z, 20, 4, stored + 1, -EBADMSG);     /* beyond the region */
	field(&z, 64, 4, 0, -EBADMSG);              /* a chunk of 0 bytes */
	field(&z, 64, 4, DEDUP_CHUNK_SIZE_LIMIT_MAX + 1, -EBADMSG);
	field(&z, 64, 4, z.lengths[0] + 1, -EBADMSG); /* lengths do not add up */
	field(&raw, 5, 1, 1, -EBADMSG);             /* raw bytes claimed as zstd */
	field(&raw, 20, 4, raw.plain_size - 1, -EBADMSG);
	{
		/* A table whose lengths move a boundary (but add up): decodes, and each id then fails verification. */
		uint8_t *b = test_malloc(z.len);
		memcpy(b, z.buf, z.len);
		set_le(b + 64, z.lengths[0] - 1, 4);
		set_le(b + 64 + 36, z.lengths[1] + 1, 4);
		reseal(b, z.len);
		ASSERT_OK(decode(b, z.len, NULL));
		ASSERT_RET(decode(b, z.len, sha), -EBADMSG);
		/* An id swapped: the same. */
		memcpy(b, z.buf, z.len);
		b[64 + 36 + 4] ^= 1;
		reseal(b, z.len);
		ASSERT_OK(decode(b, z.len, NULL));
		ASSERT_RET(decode(b, z.len, sha), -EBADMSG);
		free(b);
	}

	/* Keyed ids need a keyed hasher and the other way round. */
	DedupHasher *keyed;
	ASSERT_OK(dedup_hasher_new_keyed("key", 3, &keyed));
	ASSERT_RET(decode(z.buf, z.len, keyed), -ENOKEY);
	field(&z, 6, 2, DEDUP_REGION_FLAG_KEYED_IDS, 0);
	{
		uint8_t *b = test_malloc(z.len);
		memcpy(b, z.buf, z.len);
		set_le(b + 6, DEDUP_REGION_FLAG_KEYED_IDS, 2);
		reseal(b, z.len);
		ASSERT_RET(decode(b, z.len, sha), -ENOKEY);
		ASSERT_RET(decode(b, z.len, keyed), -EBADMSG); /* the ids are plain SHA-256 */
		free(b);
	}
	dedup_hasher_free(keyed);
	region_free(&z);
	region_free(&raw);
}

static void test_flips_and_truncation(void) {
	TestRng rng = { 5 };
	for (int random = 0; random <= 1; random++) {
		Region r = make(4, NULL, random, &rng);
		for (size_t i = 0; i < r.len * 8; i++) {
			r.buf[i / 8] ^= (uint8_t) (1u << (i % 8));
			int got = decode(r.buf, r.len, NULL);
			ASSERT(got == -EBADMSG || got == -EPROTONOSUPPORT);
			r.buf[i / 8] ^= (uint8_t) (1u << (i % 8));
		}
		for (size_t len = 0; len < r.len; len++)
			ASSERT_RET(decode(r.buf, len, NULL), -EBADMSG);
		ASSERT_OK(decode(r.buf, r.len, sha));
		region_free(&r);
	}
}

/* Recomputes only the header checksum (bytes 0..55), as whoever edits a sealed region can. */
static void reseal_header(uint8_t *b) {
	set_le(b + 56, XXH3_64bits(b, 56), 8);
}

/*
 * Seals the version 1 region b[0, len) as version 4 the way docs/FORMAT.md
 * says, with OpenSSL directly and whatever its table holds: what only a
 * key holder could write, and a second implementation of the format.
 */
static void forge_v4(uint8_t *b, size_t len, const uint8_t *key, uint32_t key_tag, uint64_t container,
		     uint64_t offset) {
	uint8_t where[16];
	int n;
	b[4] = 4;
	set_le(b + 6, DEDUP_REGION_FLAG_KEYED_IDS, 2);
	memset(b + 24, 0x5a, 12); /* the nonce */
	set_le(b + 52, key_tag, 4);
	set_le(where, container, 8);
	set_le(where + 8, offset, 8);
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	ASSERT(ctx && EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, b + 24) == 1);
	ASSERT(EVP_EncryptUpdate(ctx, NULL, &n, b, 24) == 1 && EVP_EncryptUpdate(ctx, NULL, &n, b + 52, 4) == 1 &&
	       EVP_EncryptUpdate(ctx, NULL, &n, where, sizeof(where)) == 1);
	ASSERT(EVP_EncryptUpdate(ctx, b + 64, &n, b + 64, (int) (len - 64)) == 1 &&
	       EVP_EncryptFinal_ex(ctx, b + 64 + n, &n) == 1);
	ASSERT(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, b + 36) == 1);
	EVP_CIPHER_CTX_free(ctx);
	reseal_header(b);
}

static const uint8_t content_key[DEDUP_REGION_KEY_SIZE] = "0123456789abcdef0123456789abcdef";

#define KEY_TAG 0xa1b2c3d4u

static uint8_t *test_read_file(const char *path, size_t *ret_len) {
	FILE *f = fopen(path, "rb");
	ASSERT(f);
	uint8_t *b = test_malloc(DEDUP_REGION_SIZE_MAX);
	*ret_len = fread(b, 1, DEDUP_REGION_SIZE_MAX, f);
	fclose(f);
	return b;
}

static int open_at(const uint8_t *b, size_t len, const uint8_t *key, uint64_t container, uint64_t offset,
		   DedupHasher *verify) {
	DedupRegionPlace place = { .key = key, .key_tag = KEY_TAG, .container = container, .offset = offset };
	return dedup_region_decode(dec, b, len, &place, verify, out_plain, DEDUP_REGION_PLAIN_MAX, out_lengths,
				   out_ids, DEDUP_REGION_CHUNKS_MAX, NULL);
}

/*
 * Sealed regions (version 4): the layout, a round trip only at the place
 * and under the key it was sealed with, and every bit flip, with the
 * header checksum recomputed (an attacker can), an authentication failure.
 */
static void test_sealed(void) {
	TestRng rng = { 6 };
	DedupRegionEncoder *kenc;
	DedupHasher *keyed;
	ASSERT_OK(dedup_region_encoder_new(3, true, &kenc));
	ASSERT_OK(dedup_hasher_new_keyed(content_key, 7, &keyed));
	DedupRegionEncoder *plain_enc = enc;
	DedupHasher *plain_sha = sha;
	enc = kenc;
	sha = keyed;

	for (int random = 0; random <= 1; random++) {
		Region r = make(4, NULL, random, &rng);
		uint8_t *copy = test_malloc(r.len);
		memcpy(copy, r.buf, r.len);
		DedupRegionPlace place = { .key = content_key, .key_tag = KEY_TAG, .container = 7, .offset = 4096 };
		ASSERT_OK(dedup_region_seal(r.buf, r.len, &place));
		/* Header: version 4, the fields before the nonce as they were, the key's tag at 52..55. */
		ASSERT(r.buf[4] == 4);
		ASSERT(memcmp(r.buf, copy, 4) == 0 && memcmp(r.buf + 5, copy + 5, 24 - 5) == 0);
		ASSERT(le_at(r.buf + 52, 4) == KEY_TAG);
		ASSERT(le_at(r.buf + 56, 8) == XXH3_64bits(r.buf, 56));
		/* Neither the table (keyed ids, lengths) nor the payload in clear. */
		size_t table = 64 + 36 * r.count;
		ASSERT(memcmp(r.buf + table, copy + table, r.len - table) != 0);
		for (size_t i = 0; i < r.count; i++) {
			ASSERT(memmem(r.buf, r.len, r.ids[i].bytes, DEDUP_CHUNK_ID_SIZE) == NULL);
			ASSERT(memcmp(r.buf + 64 + 36 * i, copy + 64 + 36 * i, 4) != 0);
		}
		if (random)
			ASSERT(memmem(r.buf, r.len, r.plain, 64) == NULL);

		/* Without the key, only the structure checks: the header's sizes and counts. */
		DedupRegionHeader h;
		ASSERT_OK(dedup_region_check(r.buf, r.len, &h));
		ASSERT(dedup_region_header_is_sealed(&h) && dedup_region_header_table_is_sealed(&h) &&
		       dedup_region_header_region_size(&h) == r.len && h.count == r.count && h.plain_size == r.plain_size);
		ASSERT_OK(open_at(r.buf, r.len, content_key, 7, 4096, keyed));
		ASSERT(memcmp(out_plain, r.plain, r.plain_size) == 0);
		for (size_t i = 0; i < r.count; i++)
			ASSERT(out_lengths[i] == r.lengths[i] && dedup_chunk_id_equal(&out_ids[i], &r.ids[i]));

		/* Without a key; under another key; at another place (swapped, moved, copied). */
		ASSERT_RET(decode(r.buf, r.len, NULL), -ENOKEY);
		uint8_t other[DEDUP_REGION_KEY_SIZE];
		memcpy(other, content_key, sizeof(other));
		other[31] ^= 1;
		ASSERT_RET(open_at(r.buf, r.len, other, 7, 4096, NULL), -EBADMSG);
		ASSERT_RET(open_at(r.buf, r.len, content_key, 8, 4096, NULL), -EBADMSG);
		ASSERT_RET(open_at(r.buf, r.len, content_key, 7, 4096 + r.len, NULL), -EBADMSG);
		/*
		 * A ring: the newest key another, this one older, found by the
		 * tag the region names; a ring without it does not try any key.
		 */
		DedupOldKeys old = { .n = 1, .keys = { { .tag = KEY_TAG, .content = content_key } } };
		DedupRegionPlace ring = { .key = other, .key_tag = KEY_TAG + 1, .old = &old, .container = 7, .offset = 4096 };
		ASSERT_OK(dedup_region_decode(dec, r.buf, r.len, &ring, keyed, out_plain, DEDUP_REGION_PLAIN_MAX,
					      out_lengths, out_ids, DEDUP_REGION_CHUNKS_MAX, NULL));
		ASSERT(memcmp(out_plain, r.plain, r.plain_size) == 0);
		ring.old = NULL;
		ASSERT_RET(dedup_region_decode(dec, r.buf, r.len, &ring, NULL, out_plain, DEDUP_REGION_PLAIN_MAX, NULL,
					       NULL, 0, NULL),
			   -ENOKEY);
		/* The tag names the key, the tag of the region checks it: another key under this tag fails. */
		old.keys[0].content = other;
		ring.old = &old;
		ASSERT_RET(dedup_region_decode(dec, r.buf, r.len, &ring, NULL, out_plain, DEDUP_REGION_PLAIN_MAX, NULL,
					       NULL, 0, NULL),
			   -EBADMSG);
		/* A failed open leaves no plaintext behind (raw payloads decrypt straight into the output). */
		if (!h.codec)
			for (size_t i = 0; i < r.plain_size; i++)
				ASSERT(out_plain[i] == 0);

		/* Every bit, header checksum recomputed: the tag, not the XXH3, catches it. */
		for (size_t i = 0; i < r.len * 8; i++) {
			if (i / 8 >= 56 && i / 8 < 64)
				continue;
			r.buf[i / 8] ^= (uint8_t) (1u << (i % 8));
			uint64_t hc = le_at(r.buf + 56, 8);
			reseal_header(r.buf);
			int got = open_at(r.buf, r.len, content_key, 7, 4096, NULL);
			/* A flipped key tag names a key not given: not opened at all. */
			if (got != -EBADMSG && got != -EPROTONOSUPPORT && !(got == -ENOKEY && i / 8 >= 52 && i / 8 < 56)) {
				fprintf(stderr, "sealed: bit %zu flipped: %d\n", i, got);
				abort();
			}
			r.buf[i / 8] ^= (uint8_t) (1u << (i % 8));
			set_le(r.buf + 56, hc, 8);
		}
		for (size_t len = 0; len < r.len; len++)
			ASSERT_RET(open_at(r.buf, len, content_key, 7, 4096, NULL), -EBADMSG);
		ASSERT_OK(open_at(r.buf, r.len, content_key, 7, 4096, keyed));

		/* Sealing is for fresh version 1 regions of keyed ids only; a nonce is never reused. */
		ASSERT_RET(dedup_region_seal(r.buf, r.len, &place), -EINVAL);
		uint8_t *again = test_malloc(r.len);
		memcpy(again, copy, r.len);
		ASSERT_OK(dedup_region_seal(again, r.len, &place));
		ASSERT(memcmp(again + 24, r.buf + 24, 12) != 0);
		free(again);
		free(copy);
		region_free(&r);
	}

	/*
	 * Version 4 as FORMAT.md specifies it, written independently: it opens;
	 * and a table that does not add up, which only the key could seal,
	 * fails after the tag, before anything is decompressed.
	 */
	for (int bad = 0; bad <= 1; bad++) {
		Region f = make(3, NULL, false, &rng);
		if (bad) {
			set_le(f.buf + 64, f.lengths[0] + 1, 4);
			set_le(f.buf + 64 + 36, f.lengths[1] + 1, 4);
		}
		forge_v4(f.buf, f.len, content_key, KEY_TAG, 9, 128);
		DedupRegionHeader h;
		ASSERT_OK(dedup_region_check(f.buf, f.len, &h));
		if (bad)
			ASSERT_RET(open_at(f.buf, f.len, content_key, 9, 128, NULL), -EBADMSG);
		else {
			ASSERT_OK(open_at(f.buf, f.len, content_key, 9, 128, keyed));
			ASSERT(memcmp(out_plain, f.plain, f.plain_size) == 0);
			for (size_t i = 0; i < f.count; i++)
				ASSERT(out_lengths[i] == f.lengths[i] && dedup_chunk_id_equal(&out_ids[i], &f.ids[i]));
		}
		region_free(&f);
	}

	enc = plain_enc;
	sha = plain_sha;
	Region u = make(2, NULL, false, &rng);
	DedupRegionPlace place = { .key = content_key, .container = 1, .offset = 64 };
	ASSERT_RET(dedup_region_seal(u.buf, u.len, &place), -EINVAL); /* plain ids */
	region_free(&u);

	/*
	 * Regions of version 2 (sealed before rotation, naming no key) open
	 * with the oldest key of a ring; the fuzz corpus holds some, sealed at
	 * container 7, offset 64, as it holds version 3 and 4 ones.
	 */
	static const uint8_t fuzz_key[DEDUP_REGION_KEY_SIZE] = "fratier fuzz content key 32 byt";
	static const uint8_t fuzz_newest[DEDUP_REGION_KEY_SIZE] = "fratier fuzz newest key 32 byte";
	DedupOldKeys fuzz_old = { .n = 1, .keys = { { .tag = 0x0a0b0c0du, .content = fuzz_key } } };
	static const struct {
		const char *name;
		int version, with_ring, without_ring;
	} corpus[] = {
		{ "sealed-raw", 2, 0, -EBADMSG },        /* without older keys, the newest is tried: not it */
		{ "sealed-zstd", 2, 0, -EBADMSG },
		{ "v3-newest-raw", 3, 0, 0 },
		{ "v3-newest-zstd", 3, 0, 0 },
		{ "v3-older-key", 3, 0, -ENOKEY },
		{ "v3-unknown-key", 3, -ENOKEY, -ENOKEY },
		{ "v3-tag-of-other-key", 3, -EBADMSG, -EBADMSG },
		/* Version 4: the table sealed too; a changed table byte (id or length) fails the tag. */
		{ "v4-newest-raw", 4, 0, 0 },
		{ "v4-newest-zstd", 4, 0, 0 },
		{ "v4-older-key", 4, 0, -ENOKEY },
		{ "v4-sealed-elsewhere", 4, -EBADMSG, -EBADMSG },
		{ "v4-table-flipped", 4, -EBADMSG, -EBADMSG },
		{ "v4-length-flipped", 4, -EBADMSG, -EBADMSG },
	};
	for (size_t i = 0; i < ELEMENTSOF(corpus); i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/tests/dedup/corpus-region-sealed/%s", getenv("FRATIER_SOURCE_ROOT") ?: ".",
			 corpus[i].name);
		size_t n;
		uint8_t *b = test_read_file(path, &n);
		DedupRegionHeader h;
		ASSERT_OK(dedup_region_check(b, n, &h));
		ASSERT(h.version == corpus[i].version);
		DedupRegionPlace at = { .key = fuzz_newest, .key_tag = 0x01020304u, .old = &fuzz_old, .container = 7, .offset = 64 };
		ASSERT_RET(dedup_region_decode(dec, b, n, &at, NULL, out_plain, DEDUP_REGION_PLAIN_MAX, NULL, NULL, 0, NULL),
			   corpus[i].with_ring);
		at.old = NULL;
		ASSERT_RET(dedup_region_decode(dec, b, n, &at, NULL, out_plain, DEDUP_REGION_PLAIN_MAX, NULL, NULL, 0, NULL),
			   corpus[i].without_ring);
		free(b);
	}
	dedup_region_encoder_free(kenc);
	dedup_hasher_free(keyed);
}

int main(void) {
	ASSERT_OK(dedup_region_encoder_new(3, false, &enc));
	ASSERT_OK(dedup_region_decoder_new(&dec));
	ASSERT_OK(dedup_hasher_new(&sha));
	out_plain = test_malloc(DEDUP_REGION_PLAIN_MAX);
	out_lengths = test_malloc(DEDUP_REGION_CHUNKS_MAX * sizeof(*out_lengths));
	out_ids = test_malloc(DEDUP_REGION_CHUNKS_MAX * sizeof(*out_ids));
	ASSERT_RET(dedup_region_encoder_new(DEDUP_FRAME_LEVEL_MAX + 1, false, &enc), -EINVAL);
	test_layout();
	test_roundtrips();
	test_encode_errors();
	test_fields();
	test_flips_and_truncation();
	test_sealed();
	dedup_region_encoder_free(enc);
	dedup_region_decoder_free(dec);
	dedup_hasher_free(sha);
	free(out_plain);
	free(out_lengths);
	free(out_ids);
	return 0;
}
