/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Chunk ids: SHA-256 (FIPS 180-2 examples), HMAC-SHA-256 (RFC 4231), reuse of
 * one hasher, streaming == one-shot, hex formatting/parsing, zero detection.
 */
#include <errno.h>
#include <stdlib.h>

#include "dedup/fingerprint.h"
#include "tests/dedup/dedup-test.h"

static size_t unhex(const char *hex, uint8_t *out, size_t max) {
	size_t n = strlen(hex) / 2;
	ASSERT(n <= max);
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		ASSERT(sscanf(hex + 2 * i, "%2x", &v) == 1);
		out[i] = (uint8_t) v;
	}
	return n;
}

static void assert_id(const DedupChunkId *id, const char *hex) {
	char s[DEDUP_CHUNK_ID_STRING_MAX];
	dedup_chunk_id_to_string(id, s);
	if (strcmp(s, hex) != 0) {
		fprintf(stderr, "got      %s\nexpected %s\n", s, hex);
		ASSERT(!"id mismatch");
	}
}

static void test_sha256(void) {
	static const struct {
		const char *msg;
		const char *hex;
	} v[] = {
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
		{ "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
		  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1" },
	};
	DedupHasher *h;
	DedupChunkId id;

	ASSERT_OK(dedup_hasher_new(&h));
	ASSERT(!dedup_hasher_is_keyed(h));
	/* Twice over, so a context that is not properly re-initialised shows. */
	for (int round = 0; round < 2; round++)
		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
			ASSERT_OK(dedup_hasher_digest(h, v[i].msg, strlen(v[i].msg), &id));
			assert_id(&id, v[i].hex);
		}

	/* One million 'a', in uneven pieces through the streaming calls. */
	char *a = test_malloc(1000000);
	memset(a, 'a', 1000000);
	ASSERT_OK(dedup_hasher_begin(h));
	for (size_t off = 0, piece = 1; off < 1000000; off += piece, piece = piece * 3 + 1) {
		if (piece > 1000000 - off)
			piece = 1000000 - off;
		ASSERT_OK(dedup_hasher_update(h, a + off, piece));
	}
	ASSERT_OK(dedup_hasher_update(h, a, 0));
	ASSERT_OK(dedup_hasher_finish(h, &id));
	assert_id(&id, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	ASSERT_OK(dedup_hasher_digest(h, a, 1000000, &id));
	assert_id(&id, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

	/* An abandoned digest does not leak into the next one. */
	ASSERT_OK(dedup_hasher_begin(h));
	ASSERT_OK(dedup_hasher_update(h, "garbage", 7));
	ASSERT_OK(dedup_hasher_digest(h, "abc", 3, &id));
	assert_id(&id, v[1].hex);

	free(a);
	ASSERT(dedup_hasher_free(h) == NULL);
	ASSERT(dedup_hasher_free(NULL) == NULL);
}

/* RFC 4231, section 4: HMAC-SHA-256 test cases 1-7 (case 5 is truncated to 128 bits). */
static void test_hmac(void) {
	static const struct {
		const char *key_hex;
		const char *data_hex;
		const char *mac_hex;
	} v[] = {
		{ "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "4869205468657265",
		  "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7" },
		{ "4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
		  "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843" },
		{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		  "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd",
		  "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe" },
		{ "0102030405060708090a0b0c0d0e0f10111213141516171819",
		  "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd",
		  "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b" },
		{ "0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c", "546573742057697468205472756e636174696f6e",
		  "a3b6167473100ee06e0c796c2955552b" },
		{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		  "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669727374",
		  "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54" },
		{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		  "5468697320697320612074657374207573696e672061206c6172676572207468616e20626c6f636b2d73697a65206b657920616e642061206c6172676572207468616e20626c6f636b2d73697a6520646174612e20546865206b6579206e6565647320746f20626520686173686564206265666f7265206265696e6720757365642062792074686520484d414320616c676f726974686d2e",
		  "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2" },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		uint8_t key[256], data[256], mac[32];
		size_t key_len = unhex(v[i].key_hex, key, sizeof(key));
		size_t data_len = unhex(v[i].data_hex, data, sizeof(data));
		size_t mac_len = unhex(v[i].mac_hex, mac, sizeof(mac));
		DedupHasher *h;
		DedupChunkId id;

		ASSERT_OK(dedup_hasher_new_keyed(key, key_len, &h));
		ASSERT(dedup_hasher_is_keyed(h));
		/* The key must survive re-initialisation for the next digest. */
		for (int round = 0; round < 3; round++) {
			ASSERT_OK(dedup_hasher_digest(h, data, data_len, &id));
			ASSERT(memcmp(id.bytes, mac, mac_len) == 0);
		}
		ASSERT_OK(dedup_hasher_begin(h));
		ASSERT_OK(dedup_hasher_update(h, data, 1));
		ASSERT_OK(dedup_hasher_update(h, data + 1, data_len - 1));
		ASSERT_OK(dedup_hasher_finish(h, &id));
		ASSERT(memcmp(id.bytes, mac, mac_len) == 0);
		dedup_hasher_free(h);
	}

	DedupHasher *h = NULL;
	uint8_t big[DEDUP_HASHER_KEY_SIZE_MAX + 1] = { 0 };
	ASSERT_RET(dedup_hasher_new_keyed("", 0, &h), -EINVAL);
	ASSERT_RET(dedup_hasher_new_keyed(NULL, 16, &h), -EINVAL);
	ASSERT_RET(dedup_hasher_new_keyed(big, sizeof(big), &h), -EINVAL);
	ASSERT(h == NULL);
	ASSERT_OK(dedup_hasher_new_keyed(big, DEDUP_HASHER_KEY_SIZE_MAX, &h));
	dedup_hasher_free(h);
}

static void test_hex(void) {
	DedupChunkId id, back;
	char s[DEDUP_CHUNK_ID_STRING_MAX];
	TestRng rng = { 11 };

	for (int i = 0; i < 100; i++) {
		test_rng_fill(&rng, id.bytes, sizeof(id.bytes));
		ASSERT(dedup_chunk_id_to_string(&id, s) == s);
		ASSERT(strlen(s) == 64);
		ASSERT_OK(dedup_chunk_id_from_string(s, &back));
		ASSERT(dedup_chunk_id_equal(&id, &back));
	}

	const char *good = "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855";
	ASSERT_OK(dedup_chunk_id_from_string(good, &id));
	assert_id(&id, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

	static const char *bad[] = {
		"",
		"e3b0",
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85",   /* 63 */
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b8555", /* 65 */
		"g3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85 ",
		" e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85",
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b8:5",
		NULL,
	};
	memset(&back, 0x5a, sizeof(back));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ASSERT_RET(dedup_chunk_id_from_string(bad[i], &id), -EINVAL);
	}
	/* A failed parse leaves the output alone. */
	id = back;
	ASSERT_RET(dedup_chunk_id_from_string("zz", &id), -EINVAL);
	ASSERT(dedup_chunk_id_equal(&id, &back));
}

static void test_all_zero(void) {
	uint8_t *buf = calloc(1, 4096 + 64);
	ASSERT(buf);

	ASSERT(dedup_is_all_zero(buf, 0));
	ASSERT(dedup_is_all_zero(NULL, 0));
	/* Every start alignment, every length up to 200, a set byte at every position. */
	for (size_t start = 0; start < 16; start++)
		for (size_t len = 1; len <= 200; len++) {
			uint8_t *p = buf + start;
			ASSERT(dedup_is_all_zero(p, len));
			for (size_t k = 0; k < len; k++) {
				p[k] = 0x80;
				ASSERT(!dedup_is_all_zero(p, len));
				p[k] = 0;
			}
			/* Bytes just outside the range do not count. */
			if (start > 0)
				p[-1] = 1;
			p[len] = 1;
			ASSERT(dedup_is_all_zero(p, len));
			if (start > 0)
				p[-1] = 0;
			p[len] = 0;
		}

	buf[4095] = 1;
	ASSERT(!dedup_is_all_zero(buf, 4096));
	ASSERT(dedup_is_all_zero(buf, 4095));
	free(buf);
}

int main(void) {
	test_sha256();
	test_hmac();
	test_hex();
	test_all_zero();
	printf("test-fingerprint: ok\n");
	return EXIT_SUCCESS;
}
