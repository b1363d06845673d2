/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Chunk ids through OpenSSL 3 EVP: SHA-256 (EVP_MD) or HMAC-SHA-256 (EVP_MAC).
 *
 * Invariants:
 *  1. The algorithm is fetched and the context allocated once, in the
 *     constructor; a digest only re-initialises the context (the HMAC key
 *     schedule is kept by OpenSSL across EVP_MAC_init(ctx, NULL, 0, NULL)).
 *  2. OpenSSL's 0/1 results become -EIO here and never leave this file.
 */
#include <errno.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "dedup/fingerprint.h"

struct DedupHasher {
	bool keyed;
	EVP_MD *md;         /* plain: SHA-256 */
	EVP_MD_CTX *md_ctx; /* plain */
	EVP_MAC *mac;       /* keyed: HMAC */
	EVP_MAC_CTX *mac_ctx;
};

DEFINE_CLEANUP_FUNC(DedupHasher, dedup_hasher_free);

DedupHasher *dedup_hasher_free(DedupHasher *h) {
	if (!h)
		return NULL;
	EVP_MD_CTX_free(h->md_ctx);
	EVP_MD_free(h->md);
	EVP_MAC_CTX_free(h->mac_ctx); /* cleanses the key */
	EVP_MAC_free(h->mac);
	free(h);
	return NULL;
}

int dedup_hasher_new(DedupHasher **ret) {
	_cleanup_(dedup_hasher_freep) DedupHasher *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;

	h->md = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (!h->md)
		return -EIO;
	h->md_ctx = EVP_MD_CTX_new();
	if (!h->md_ctx)
		return -ENOMEM;

	*ret = TAKE_PTR(h);
	return 0;
}

int dedup_hasher_new_keyed(const void *key, size_t key_len, DedupHasher **ret) {
	if (!key || key_len == 0 || key_len > DEDUP_HASHER_KEY_SIZE_MAX)
		return -EINVAL;

	_cleanup_(dedup_hasher_freep) DedupHasher *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->keyed = true;

	h->mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	if (!h->mac)
		return -EIO;
	h->mac_ctx = EVP_MAC_CTX_new(h->mac);
	if (!h->mac_ctx)
		return -ENOMEM;

	char digest[] = "SHA256";
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
		OSSL_PARAM_construct_end(),
	};
	if (EVP_MAC_init(h->mac_ctx, key, key_len, params) != 1)
		return -EIO;

	*ret = TAKE_PTR(h);
	return 0;
}

bool dedup_hasher_is_keyed(const DedupHasher *h) {
	return h->keyed;
}

int dedup_hasher_begin(DedupHasher *h) {
	int ok = h->keyed ? EVP_MAC_init(h->mac_ctx, NULL, 0, NULL) : EVP_DigestInit_ex2(h->md_ctx, h->md, NULL);
	return ok == 1 ? 0 : -EIO;
}

int dedup_hasher_update(DedupHasher *h, const void *buf, size_t len) {
	if (len == 0)
		return 0;
	int ok = h->keyed ? EVP_MAC_update(h->mac_ctx, buf, len) : EVP_DigestUpdate(h->md_ctx, buf, len);
	return ok == 1 ? 0 : -EIO;
}

int dedup_hasher_finish(DedupHasher *h, DedupChunkId *ret) {
	uint8_t out[EVP_MAX_MD_SIZE];
	int ok;

	if (h->keyed) {
		size_t n = 0;
		ok = EVP_MAC_final(h->mac_ctx, out, &n, sizeof(out)) == 1 && n == DEDUP_CHUNK_ID_SIZE;
	} else {
		unsigned n = 0;
		ok = EVP_DigestFinal_ex(h->md_ctx, out, &n) == 1 && n == DEDUP_CHUNK_ID_SIZE;
	}
	if (!ok)
		return -EIO;

	memcpy(ret->bytes, out, DEDUP_CHUNK_ID_SIZE);
	return 0;
}

int dedup_hasher_digest(DedupHasher *h, const void *buf, size_t len, DedupChunkId *ret) {
	int r = dedup_hasher_begin(h);
	if (r < 0)
		return r;
	r = dedup_hasher_update(h, buf, len);
	if (r < 0)
		return r;
	return dedup_hasher_finish(h, ret);
}

char *dedup_chunk_id_to_string(const DedupChunkId *id, char buf[static DEDUP_CHUNK_ID_STRING_MAX]) {
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < DEDUP_CHUNK_ID_SIZE; i++) {
		buf[2 * i] = hex[id->bytes[i] >> 4];
		buf[2 * i + 1] = hex[id->bytes[i] & 15];
	}
	buf[DEDUP_CHUNK_ID_SIZE * 2] = '\0';
	return buf;
}

static int unhex(char c) {
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -EINVAL;
}

int dedup_chunk_id_from_string(const char *s, DedupChunkId *ret) {
	DedupChunkId id;

	if (!s || strnlen(s, DEDUP_CHUNK_ID_STRING_MAX) != DEDUP_CHUNK_ID_SIZE * 2)
		return -EINVAL;
	for (size_t i = 0; i < DEDUP_CHUNK_ID_SIZE; i++) {
		int hi = unhex(s[2 * i]), lo = unhex(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		id.bytes[i] = (uint8_t) (hi << 4 | lo);
	}
	*ret = id;
	return 0;
}

static inline uint64_t load64(const uint8_t *p) {
	uint64_t v;
	memcpy(&v, p, sizeof(v)); /* unaligned-safe; compiles to one load */
	return v;
}

bool dedup_is_all_zero(const void *buf, size_t len) {
	const uint8_t *p = buf;
	size_t i = 0;

	/*
	 * OR four words before branching: a zero chunk is read to the end, and
	 * one branch per 32 bytes keeps that near memory bandwidth.
	 */
	for (; i + 32 <= len; i += 32)
		if (load64(p + i) | load64(p + i + 8) | load64(p + i + 16) | load64(p + i + 24))
			return false;
	for (; i + 8 <= len; i += 8)
		if (load64(p + i))
			return false;
	for (; i < len; i++)
		if (p[i])
			return false;
	return true;
}
