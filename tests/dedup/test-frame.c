/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Chunk frames: the byte layout of docs/FORMAT.md, round trips, and rejection
 * of every corrupted field (with checksums recomputed, so the field check
 * itself is what is tested), every single-bit flip and every truncation.
 */
#include <errno.h>
#include <stdlib.h>
#include <xxhash.h>
#include <zstd.h>

#include "common/macros.h"
#include "dedup/frame.h"
#include "tests/dedup/dedup-test.h"

#define KiB ((size_t) 1 << 10)
#define MiB ((size_t) 1 << 20)
/* For tiny chunks whether zstd wins depends on zstd's framing: accept either. */
#define ANY_CODEC _DEDUP_FRAME_CODEC_INVALID

static DedupFrameEncoder *enc;
static DedupFrameDecoder *dec;
static DedupHasher *sha;

typedef struct Frame {
	uint8_t *buf;
	size_t len;
	DedupChunkId id;
} Frame;

static Frame encode(const void *plain, size_t len) {
	Frame f = { .buf = test_malloc(dedup_frame_size_bound(len)) };
	ASSERT_OK(dedup_hasher_digest(sha, plain, len, &f.id));
	ASSERT_OK(dedup_frame_encode(enc, &f.id, plain, len, f.buf, dedup_frame_size_bound(len), &f.len));
	ASSERT(f.len >= DEDUP_FRAME_HEADER_SIZE && f.len <= dedup_frame_size_bound(len));
	return f;
}

static int decode(const void *frame, size_t len, DedupHasher *verify, size_t plain_len) {
	uint8_t *out = test_malloc(plain_len);
	int r = dedup_frame_decode(dec, frame, len, verify, out, plain_len, NULL);
	free(out);
	return r;
}

/* Little-endian field access, written from docs/FORMAT.md rather than frame.c. */
static uint32_t le32_at(const uint8_t *p) {
	return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

static void set_le(uint8_t *p, uint64_t v, size_t n) {
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

static uint64_t le64_at(const uint8_t *p) {
	uint64_t v = 0;
	for (size_t i = 0; i < 8; i++)
		v |= (uint64_t) p[i] << (8 * i);
	return v;
}

/* Recomputes both checksums of a frame whose payload is payload_len bytes. */
static void reseal(uint8_t *f, size_t payload_len) {
	uint8_t *tmp = test_malloc(48 + payload_len);
	memcpy(tmp, f, 48);
	memcpy(tmp + 48, f + 64, payload_len);
	set_le(f + 48, XXH3_64bits(tmp, 48 + payload_len), 8);
	set_le(f + 56, XXH3_64bits(f, 56), 8);
	free(tmp);
}

static void roundtrip(const char *what, const void *plain, size_t len, DedupFrameCodec want_codec) {
	Frame f = encode(plain, len);
	DedupFrameHeader h;
	uint8_t *out = test_malloc(len + 1);

	ASSERT_OK(dedup_frame_header_parse(f.buf, f.len, &h));
	if (want_codec != ANY_CODEC && h.codec != want_codec) {
		fprintf(stderr, "%s: codec %d, expected %d\n", what, h.codec, want_codec);
		ASSERT(h.codec == want_codec);
	}
	ASSERT(h.version == DEDUP_FRAME_VERSION && h.flags == 0);
	ASSERT(h.plain_size == len && dedup_frame_header_frame_size(&h) == f.len);
	ASSERT(dedup_chunk_id_equal(&h.id, &f.id));
	if (h.codec == DEDUP_FRAME_CODEC_ZSTD)
		ASSERT(h.stored_size <= len - MAX(len / 32, 1));
	else
		ASSERT(h.stored_size == len);

	/* With and without content verification, exact-size and roomier buffers. */
	memset(out, 0xee, len + 1);
	ASSERT_OK(dedup_frame_decode(dec, f.buf, f.len, sha, out, len, &h));
	ASSERT(memcmp(out, plain, len) == 0);
	ASSERT(h.plain_size == len && dedup_frame_header_frame_size(&h) == f.len);
	memset(out, 0xee, len + 1);
	ASSERT_OK(dedup_frame_decode(dec, f.buf, f.len, NULL, out, len + 1, NULL));
	ASSERT(memcmp(out, plain, len) == 0);
	ASSERT(out[len] == 0xee);

	/* A frame read out of a larger buffer: trailing bytes are not its business. */
	uint8_t *big = test_malloc(f.len + 100);
	memcpy(big, f.buf, f.len);
	memset(big + f.len, 0x89, 100);
	ASSERT_OK(dedup_frame_decode(dec, big, f.len + 100, sha, out, len, &h));
	ASSERT(dedup_frame_header_frame_size(&h) == f.len);
	ASSERT(memcmp(out, plain, len) == 0);

	/* The caller's buffer is checked before anything is written to it. */
	if (len > 1) {
		memset(out, 0xee, len + 1);
		ASSERT_RET(dedup_frame_decode(dec, f.buf, f.len, sha, out, len - 1, NULL), -ENOBUFS);
		for (size_t i = 0; i < len + 1; i++)
			ASSERT(out[i] == 0xee);
	}
	ASSERT_RET(dedup_frame_decode(dec, f.buf, f.len, sha, NULL, 0, NULL), -ENOBUFS);

	free(big);
	free(out);
	free(f.buf);
}

static void test_roundtrip(void) {
	TestRng rng = { 21 };
	uint8_t *buf = test_malloc(DEDUP_CHUNK_SIZE_LIMIT_MAX);
	static const size_t sizes[] = { 1, 2, 31, 32, 33, 63, 64, 65, 100, 4 * KiB, 16 * KiB, 64 * KiB,
					DEDUP_CHUNK_SIZE_LIMIT_MAX };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];

		test_rng_fill(&rng, buf, n);
		roundtrip("random", buf, n, DEDUP_FRAME_CODEC_RAW);

		DedupFrameCodec compressible = n >= 100 ? DEDUP_FRAME_CODEC_ZSTD : ANY_CODEC;
		memset(buf, 0, n);
		roundtrip("zero", buf, n, compressible);

		/* Text-like: words from a small vocabulary, as in a redo log's SQL. */
		static const char *words[] = { "INSERT ", "INTO ", "ORDERS ", "VALUES ", "(42, ", "'SCOTT'", ");\n" };
		for (size_t k = 0; k < n;) {
			const char *w = words[test_rng_next(&rng) % 7];
			size_t l = MIN(strlen(w), n - k);
			memcpy(buf + k, w, l);
			k += l;
		}
		roundtrip("text", buf, n, compressible);

		/* Half random, half zero: compresses by about half. */
		test_rng_fill(&rng, buf, n / 2);
		memset(buf + n / 2, 0, n - n / 2);
		roundtrip("half", buf, n, compressible);
	}

	/* Levels at both ends of the range and zstd's default. */
	static const int levels[] = { DEDUP_FRAME_LEVEL_MIN, 0, 1, DEDUP_FRAME_LEVEL_MAX };
	memset(buf, 'x', 64 * KiB);
	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		ASSERT_OK(dedup_frame_encoder_set_level(enc, levels[i]));
		roundtrip("level", buf, 64 * KiB, DEDUP_FRAME_CODEC_ZSTD);
	}
	ASSERT_OK(dedup_frame_encoder_set_level(enc, 3));
	free(buf);
}

/*
 * zstd is kept only if it saves at least 1/32 of the chunk: mostly random
 * chunks with a growing zero tail cross that line, and the codec must follow
 * zstd's own result (at the encoder's level) on each side of it.
 */
static void test_threshold(void) {
	size_t n = 64 * KiB, cap = ZSTD_compressBound(n);
	uint8_t *buf = test_malloc(n), *z = test_malloc(cap);
	unsigned raw = 0, zstd = 0;
	TestRng rng = { 61 };

	for (size_t zeros = 0; zeros <= n / 10; zeros += n / 400) {
		test_rng_fill(&rng, buf, n - zeros);
		memset(buf + n - zeros, 0, zeros);
		size_t zn = ZSTD_compress(z, cap, buf, n, 3);
		ASSERT(!ZSTD_isError(zn));

		Frame f = encode(buf, n);
		DedupFrameHeader h;
		ASSERT_OK(dedup_frame_header_parse(f.buf, f.len, &h));
		if (zn <= n - n / 32) {
			ASSERT(h.codec == DEDUP_FRAME_CODEC_ZSTD && h.stored_size == zn);
			zstd++;
		} else {
			ASSERT(h.codec == DEDUP_FRAME_CODEC_RAW);
			raw++;
		}
		free(f.buf);
	}
	ASSERT(raw >= 5 && zstd >= 5);
	free(z);
	free(buf);
}

/* Keyed ids: flagged in the header; verification needs a hasher of the same kind. */
static void test_keyed(void) {
	DedupFrameEncoder *kenc;
	DedupHasher *hmac;
	DedupFrameHeader h;
	DedupChunkId id;
	uint8_t plain[5000], out[5000], frame[5000 + DEDUP_FRAME_HEADER_SIZE];
	size_t len;

	memset(plain, 'k', sizeof(plain));
	ASSERT_OK(dedup_frame_encoder_new(3, true, &kenc));
	ASSERT_OK(dedup_hasher_new_keyed("secret", 6, &hmac));
	ASSERT_OK(dedup_hasher_digest(hmac, plain, sizeof(plain), &id));
	ASSERT_OK(dedup_frame_encode(kenc, &id, plain, sizeof(plain), frame, sizeof(frame), &len));

	ASSERT_OK(dedup_frame_header_parse(frame, len, &h));
	ASSERT(h.flags == DEDUP_FRAME_FLAG_KEYED_ID);
	ASSERT_OK(dedup_frame_decode(dec, frame, len, hmac, out, sizeof(out), NULL));
	ASSERT(memcmp(out, plain, sizeof(plain)) == 0);
	ASSERT_OK(dedup_frame_decode(dec, frame, len, NULL, out, sizeof(out), NULL));
	ASSERT_RET(dedup_frame_decode(dec, frame, len, sha, out, sizeof(out), NULL), -ENOKEY);

	/* The wrong key is a content mismatch. */
	DedupHasher *other;
	ASSERT_OK(dedup_hasher_new_keyed("Secret", 6, &other));
	ASSERT_RET(dedup_frame_decode(dec, frame, len, other, out, sizeof(out), NULL), -EBADMSG);

	/* A plain frame verified with a keyed hasher. */
	Frame f = encode(plain, sizeof(plain));
	ASSERT_RET(dedup_frame_decode(dec, f.buf, f.len, hmac, out, sizeof(out), NULL), -ENOKEY);

	free(f.buf);
	dedup_hasher_free(other);
	dedup_hasher_free(hmac);
	dedup_frame_encoder_free(kenc);
}

/* The exact bytes of a small raw frame, built from docs/FORMAT.md by hand. */
static void test_layout(void) {
	const char plain[] = "fratier";
	uint8_t want[64 + 7] = { 0x89, 'F', 'T', 'C', 1, 0, 0, 0, 7, 0, 0, 0, 7, 0, 0, 0 };
	Frame f = encode(plain, 7);

	ASSERT(f.len == sizeof(want));
	memcpy(want + 16, f.id.bytes, 32);
	memcpy(want + 64, plain, 7);
	reseal(want, 7);
	ASSERT(memcmp(f.buf, want, sizeof(want)) == 0);
	/* The payload checksum covers header bytes 0..47, then the payload. */
	uint8_t covered[48 + 7];
	memcpy(covered, want, 48);
	memcpy(covered + 48, plain, 7);
	ASSERT(le64_at(f.buf + 48) == XXH3_64bits(covered, sizeof(covered)));
	ASSERT(le64_at(f.buf + 56) == XXH3_64bits(f.buf, 56));
	free(f.buf);

	/* A zstd payload is one standard zstd frame with the content size in it. */
	char zeros[4096] = { 0 };
	f = encode(zeros, sizeof(zeros));
	ASSERT(f.buf[5] == DEDUP_FRAME_CODEC_ZSTD);
	ASSERT(le32_at(f.buf + 8) == 4096 && le32_at(f.buf + 12) == f.len - 64);
	ASSERT(le32_at(f.buf + 64) == 0xFD2FB528u);
	free(f.buf);
}

static void test_encode_args(void) {
	DedupFrameEncoder *e = NULL;
	DedupChunkId id = { { 0 } };
	uint8_t buf[512];
	size_t len = 0;

	ASSERT_RET(dedup_frame_encoder_new(DEDUP_FRAME_LEVEL_MIN - 1, false, &e), -EINVAL);
	ASSERT_RET(dedup_frame_encoder_new(DEDUP_FRAME_LEVEL_MAX + 1, false, &e), -EINVAL);
	ASSERT(e == NULL);
	ASSERT_RET(dedup_frame_encoder_set_level(enc, DEDUP_FRAME_LEVEL_MAX + 1), -EINVAL);
	ASSERT_RET(dedup_frame_encoder_set_level(enc, DEDUP_FRAME_LEVEL_MIN - 1), -EINVAL);

	ASSERT_RET(dedup_frame_encode(enc, &id, buf, 0, buf, sizeof(buf), &len), -EINVAL);
	ASSERT_RET(dedup_frame_encode(enc, &id, NULL, 10, buf, sizeof(buf), &len), -EINVAL);
	ASSERT_RET(dedup_frame_encode(enc, NULL, buf, 10, buf, sizeof(buf), &len), -EINVAL);
	ASSERT_RET(dedup_frame_encode(enc, &id, buf, DEDUP_CHUNK_SIZE_LIMIT_MAX + 1, buf,
				      SIZE_MAX, &len),
		   -EINVAL);
	/* The bound is required even when the chunk would compress. */
	memset(buf, 0, 100);
	ASSERT_RET(dedup_frame_encode(enc, &id, buf, 100, buf + 100, 64 + 99, &len), -ENOBUFS);
	ASSERT(len == 0);
	ASSERT_OK(dedup_frame_encode(enc, &id, buf, 100, buf + 100, 64 + 100, &len));

	ASSERT(dedup_frame_encoder_free(NULL) == NULL);
	ASSERT(dedup_frame_decoder_free(NULL) == NULL);
}

/*
 * Every header field set to an impossible value, with both checksums
 * recomputed so that only the field check stands between it and the caller.
 */
static void test_bad_fields(void) {
	uint8_t plain[3000], raw_plain[300];
	TestRng rng = { 31 };
	memset(plain, 'z', sizeof(plain));
	test_rng_fill(&rng, raw_plain, sizeof(raw_plain));
	Frame z = encode(plain, sizeof(plain));
	Frame r = encode(raw_plain, sizeof(raw_plain));
	size_t zstored = z.len - 64;
	ASSERT(z.buf[5] == DEDUP_FRAME_CODEC_ZSTD && r.buf[5] == DEDUP_FRAME_CODEC_RAW);

	uint8_t *f = test_malloc(r.len + 64);

	/*
	 * The payload checksum is recomputed over the stored_size the header now
	 * claims, as far as the bytes go, so a changed size is caught by the size
	 * checks or by zstd, not by the checksum.  The output buffer has room to
	 * spare, so a grown plain_size is not merely -ENOBUFS.
	 */
#define CHECK_WITH(verify, base, expect, ...)                                                      \
	do {                                                                                       \
		memcpy(f, (base).buf, (base).len);                                                 \
		__VA_ARGS__;                                                                       \
		reseal(f, MIN((size_t) le32_at(f + 12), (base).len - 64));                         \
		ASSERT_RET(decode(f, (base).len, (verify), sizeof(plain) + 64), (expect));         \
	} while (0)
	/* Without content verification: the field checks must stand on their own. */
#define CHECK(base, expect, ...) CHECK_WITH(NULL, base, expect, __VA_ARGS__)
#define CHECKV(base, expect, ...) CHECK_WITH(sha, base, expect, __VA_ARGS__)

	/* Untouched (resealed) frames still decode: the harness itself is right. */
	CHECK(z, 0, (void) 0);
	CHECK(r, 0, (void) 0);

	for (size_t i = 0; i < 4; i++) {
		CHECK(z, -EBADMSG, f[i] ^= 0x20);
		CHECK(r, -EBADMSG, f[i] = 0);
	}

	CHECK(z, -EBADMSG, f[4] = 0);
	CHECK(z, -EPROTONOSUPPORT, f[4] = 2);
	CHECK(z, -EPROTONOSUPPORT, f[4] = 255);

	CHECK(z, -EBADMSG, f[5] = 2);
	CHECK(z, -EBADMSG, f[5] = 255);
	CHECK(z, -EBADMSG, f[5] = DEDUP_FRAME_CODEC_RAW); /* zstd bytes as raw: sizes disagree */
	CHECK(r, -EBADMSG, f[5] = DEDUP_FRAME_CODEC_ZSTD); /* raw bytes as zstd: stored == plain */

	for (unsigned bit = 1; bit < 16; bit++)
		CHECK(z, -EBADMSG, set_le(f + 6, 1u << bit, 2));
	CHECKV(z, -ENOKEY, set_le(f + 6, DEDUP_FRAME_FLAG_KEYED_ID, 2));

	CHECK(z, -EBADMSG, set_le(f + 8, 0, 4));
	CHECK(z, -EBADMSG, set_le(f + 8, DEDUP_CHUNK_SIZE_LIMIT_MAX + 1, 4));
	CHECK(z, -EBADMSG, set_le(f + 8, UINT32_MAX, 4));
	CHECK(z, -EBADMSG, set_le(f + 8, sizeof(plain) - 1, 4)); /* zstd yields more */
	CHECK(z, -EBADMSG, set_le(f + 8, sizeof(plain) + 1, 4)); /* zstd yields less */
	CHECK(z, -EBADMSG, set_le(f + 8, zstored, 4));           /* not smaller than stored */
	CHECK(r, -EBADMSG, set_le(f + 8, sizeof(raw_plain) - 1, 4));
	CHECK(r, -EBADMSG, set_le(f + 8, sizeof(raw_plain) + 1, 4));

	CHECK(z, -EBADMSG, set_le(f + 12, 0, 4));
	CHECK(z, -EBADMSG, set_le(f + 12, zstored - 1, 4));     /* payload cut short */
	CHECK(z, -EBADMSG, set_le(f + 12, zstored + 1, 4));     /* beyond the bytes given */
	CHECK(z, -EBADMSG, set_le(f + 12, sizeof(plain), 4));   /* zstd must be smaller */
	CHECK(z, -EBADMSG, set_le(f + 12, UINT32_MAX, 4));
	CHECK(r, -EBADMSG, set_le(f + 12, sizeof(raw_plain) - 1, 4));
	CHECK(r, -EBADMSG, set_le(f + 12, sizeof(raw_plain) + 1, 4));

	/* A wrong id passes the checksums; only content verification can tell. */
	CHECKV(z, -EBADMSG, f[16] ^= 1);
	CHECKV(z, -EBADMSG, f[47] ^= 0x80);
	CHECKV(r, -EBADMSG, memset(f + 16, 0, 32));
	memcpy(f, z.buf, z.len);
	f[30] ^= 4;
	reseal(f, zstored);
	ASSERT_RET(decode(f, z.len, NULL, sizeof(plain)), 0);

	CHECKV(r, -EBADMSG, f[64] ^= 1);

#undef CHECKV
#undef CHECK
#undef CHECK_WITH

	/*
	 * A well-formed zstd payload that does not save anything is still
	 * refused: codec zstd requires stored_size < plain_size (format rule).
	 */
	uint8_t zf[64 + 256];
	size_t zn = ZSTD_compress(zf + 64, sizeof(zf) - 64, raw_plain, 100, 3);
	ASSERT(!ZSTD_isError(zn) && zn >= 100);
	memcpy(zf, r.buf, 64);
	zf[5] = DEDUP_FRAME_CODEC_ZSTD;
	set_le(zf + 8, 100, 4);
	set_le(zf + 12, zn, 4);
	DedupChunkId zid;
	ASSERT_OK(dedup_hasher_digest(sha, raw_plain, 100, &zid));
	memcpy(zf + 16, zid.bytes, 32);
	reseal(zf, zn);
	ASSERT_RET(decode(zf, 64 + zn, sha, 100), -EBADMSG);
	/* Claiming a larger chunk gets it past the header checks; then zstd yields too few bytes. */
	set_le(zf + 8, zn + 1, 4);
	reseal(zf, zn);
	ASSERT_RET(decode(zf, 64 + zn, NULL, zn + 1), -EBADMSG);

	/*
	 * zstd payload bytes changed behind resealed checksums: zstd or the
	 * content hash objects, or the change was one zstd ignores (its frame
	 * header's unused bit) and the bytes that come out are right.
	 */
	uint8_t out[sizeof(plain)];
	for (size_t i = 64; i < z.len; i++)
		for (unsigned bit = 0; bit < 8; bit++) {
			memcpy(f, z.buf, z.len);
			f[i] ^= (uint8_t) (1u << bit);
			reseal(f, zstored);
			int ret = dedup_frame_decode(dec, f, z.len, sha, out, sizeof(out), NULL);
			ASSERT(ret == -EBADMSG || (ret == 0 && memcmp(out, plain, sizeof(plain)) == 0));
		}

	/* The checksums themselves. */
	memcpy(f, z.buf, z.len);
	f[48] ^= 1;
	ASSERT_RET(decode(f, z.len, sha, sizeof(plain)), -EBADMSG);
	set_le(f + 56, XXH3_64bits(f, 56), 8); /* a consistent header over a wrong payload checksum */
	ASSERT_RET(decode(f, z.len, sha, sizeof(plain)), -EBADMSG);
	memcpy(f, z.buf, z.len);
	f[63] ^= 0x40;
	ASSERT_RET(decode(f, z.len, sha, sizeof(plain)), -EBADMSG);

	free(f);
	free(z.buf);
	free(r.buf);
}

/* Corruption without an accomplice: checksums alone (no verify) reject every flip. */
static void test_bit_flips(void) {
	uint8_t raw_plain[700], text[8192];
	TestRng rng = { 41 };
	test_rng_fill(&rng, raw_plain, sizeof(raw_plain));
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = (uint8_t) ("ORA-00257: archiver error. Connect internal only\n"[i % 50]);

	Frame frames[] = { encode(raw_plain, sizeof(raw_plain)), encode(text, sizeof(text)) };
	ASSERT(frames[1].buf[5] == DEDUP_FRAME_CODEC_ZSTD);

	for (size_t k = 0; k < 2; k++) {
		Frame *fr = &frames[k];
		uint8_t *f = test_malloc(fr->len), out[8192];

		memcpy(f, fr->buf, fr->len);
		for (size_t bit = 0; bit < fr->len * 8; bit++) {
			f[bit / 8] ^= (uint8_t) (1u << (bit % 8));
			int r = dedup_frame_decode(dec, f, fr->len, NULL, out, sizeof(out), NULL);
			if (r != -EBADMSG && !(bit / 8 == 4 && r == -EPROTONOSUPPORT)) {
				fprintf(stderr, "frame %zu: flip of bit %zu gave %d\n", k, bit, r);
				ASSERT(!"bit flip not rejected");
			}
			f[bit / 8] ^= (uint8_t) (1u << (bit % 8));
		}
		ASSERT_OK(dedup_frame_decode(dec, f, fr->len, sha, out, sizeof(out), NULL));
		free(f);
		free(fr->buf);
	}
}

static void test_truncation(void) {
	uint8_t raw_plain[500], text[20000];
	TestRng rng = { 51 };
	test_rng_fill(&rng, raw_plain, sizeof(raw_plain));
	memset(text, 0, sizeof(text));
	for (size_t i = 0; i < sizeof(text); i += 97)
		text[i] = (uint8_t) i;

	Frame frames[] = { encode(raw_plain, sizeof(raw_plain)), encode(text, sizeof(text)) };
	for (size_t k = 0; k < 2; k++) {
		Frame *fr = &frames[k];
		DedupFrameHeader h;

		for (size_t len = 0; len < fr->len; len++) {
			/* Exactly len bytes, so ASan sees any read past them. */
			uint8_t *f = test_malloc(len);
			memcpy(f, fr->buf, len);
			ASSERT_RET(decode(f, len, sha, sizeof(text)), -EBADMSG);
			if (len < DEDUP_FRAME_HEADER_SIZE)
				ASSERT_RET(dedup_frame_header_parse(f, len, &h), -EBADMSG);
			else
				ASSERT_OK(dedup_frame_header_parse(f, len, &h));
			free(f);
		}
		ASSERT_OK(decode(fr->buf, fr->len, sha, sizeof(text)));
		free(fr->buf);
	}
	ASSERT_RET(dedup_frame_header_parse(NULL, 0, &(DedupFrameHeader) { 0 }), -EBADMSG);
}

int main(void) {
	ASSERT_OK(dedup_frame_encoder_new(3, false, &enc));
	ASSERT_OK(dedup_frame_decoder_new(&dec));
	ASSERT_OK(dedup_hasher_new(&sha));

	test_layout();
	test_roundtrip();
	test_threshold();
	test_keyed();
	test_encode_args();
	test_bad_fields();
	test_bit_flips();
	test_truncation();

	dedup_hasher_free(sha);
	dedup_frame_decoder_free(dec);
	dedup_frame_encoder_free(enc);
	printf("test-frame: ok\n");
	return EXIT_SUCCESS;
}
