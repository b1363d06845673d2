/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Key files and HKDF-SHA-256 subkeys through OpenSSL 3 (EVP_KDF).
 *
 * Invariants:
 *  1. A key never leaves this module but in a DedupKey, which is wiped with
 *     OPENSSL_cleanse() when freed; buffers that held key bytes on the stack
 *     are wiped before return.
 *  2. The key file is checked before its bytes are trusted: owner, mode and
 *     type first (fstat of the descriptor read, not of the name, so a rename
 *     in between changes nothing), then the check digest.
 *  3. OpenSSL's 0/1 results become -EIO here and never leave this file.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macros.h"
#include "dedup/key.h"

#define KEY_FILE_HEADER "fratier-key-1\n"
#define KEY_FILE_HEADER_LEN (sizeof(KEY_FILE_HEADER) - 1)
#define KEY_FILE_CHECK_SIZE 8

static const char hexdigits[] = "0123456789abcdef";

static void hex_put(const uint8_t *in, size_t n, char *out) {
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hexdigits[in[i] >> 4];
		out[2 * i + 1] = hexdigits[in[i] & 15];
	}
}

/* Lowercase only: the file is written by dedup_key_file_format(), one spelling per key. */
static int hex_get(const char *in, size_t n, uint8_t *out) {
	for (size_t i = 0; i < 2 * n; i++) {
		const char *p = in[i] ? memchr(hexdigits, in[i], 16) : NULL;
		if (!p)
			return -EBADMSG;
		unsigned v = (unsigned) (p - hexdigits);
		out[i / 2] = (uint8_t) (i % 2 ? (out[i / 2] << 4) | v : v);
	}
	return 0;
}

static int key_check(const uint8_t key[static DEDUP_KEY_SIZE], uint8_t ret[static KEY_FILE_CHECK_SIZE]) {
	uint8_t in[KEY_FILE_HEADER_LEN + DEDUP_KEY_SIZE], md[32];
	unsigned md_len = 0;
	memcpy(in, KEY_FILE_HEADER, KEY_FILE_HEADER_LEN);
	memcpy(in + KEY_FILE_HEADER_LEN, key, DEDUP_KEY_SIZE);
	int ok = EVP_Digest(in, sizeof(in), md, &md_len, EVP_sha256(), NULL);
	OPENSSL_cleanse(in, sizeof(in));
	if (ok != 1 || md_len != sizeof(md))
		return -EIO;
	memcpy(ret, md, KEY_FILE_CHECK_SIZE);
	return 0;
}

int dedup_key_file_format(const uint8_t key[static DEDUP_KEY_SIZE], char buf[static DEDUP_KEY_FILE_SIZE]) {
	uint8_t check[KEY_FILE_CHECK_SIZE];
	int r = key_check(key, check);
	if (r < 0)
		return r;
	char *p = buf;
	memcpy(p, KEY_FILE_HEADER, KEY_FILE_HEADER_LEN);
	p += KEY_FILE_HEADER_LEN;
	hex_put(key, DEDUP_KEY_SIZE, p);
	p += 2 * DEDUP_KEY_SIZE;
	*p++ = ' ';
	hex_put(check, KEY_FILE_CHECK_SIZE, p);
	p += 2 * KEY_FILE_CHECK_SIZE;
	*p = '\n';
	return 0;
}

int dedup_key_file_parse(const void *buf, size_t len, uint8_t ret[static DEDUP_KEY_SIZE]) {
	const char *s = buf;
	uint8_t key[DEDUP_KEY_SIZE], check[KEY_FILE_CHECK_SIZE], want[KEY_FILE_CHECK_SIZE];
	int r;

	if (len != DEDUP_KEY_FILE_SIZE || memcmp(s, KEY_FILE_HEADER, KEY_FILE_HEADER_LEN) != 0)
		return -EBADMSG;
	s += KEY_FILE_HEADER_LEN;
	if (s[2 * DEDUP_KEY_SIZE] != ' ' || s[2 * DEDUP_KEY_SIZE + 1 + 2 * KEY_FILE_CHECK_SIZE] != '\n')
		return -EBADMSG;
	r = hex_get(s, DEDUP_KEY_SIZE, key);
	if (r >= 0)
		r = hex_get(s + 2 * DEDUP_KEY_SIZE + 1, KEY_FILE_CHECK_SIZE, check);
	if (r >= 0)
		r = key_check(key, want);
	if (r >= 0 && CRYPTO_memcmp(check, want, KEY_FILE_CHECK_SIZE) != 0)
		r = -EBADMSG;
	if (r >= 0)
		memcpy(ret, key, DEDUP_KEY_SIZE);
	OPENSSL_cleanse(key, sizeof(key));
	return r;
}

int dedup_key_file_make(const char *path) {
	uint8_t key[DEDUP_KEY_SIZE];
	char buf[DEDUP_KEY_FILE_SIZE];
	int r = 0;

	if (RAND_priv_bytes(key, sizeof(key)) != 1)
		return -EIO;
	r = dedup_key_file_format(key, buf);
	OPENSSL_cleanse(key, sizeof(key));
	if (r < 0)
		return r;

	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
	if (fd < 0) {
		r = -errno;
		OPENSSL_cleanse(buf, sizeof(buf));
		return r;
	}
	ssize_t n = write(fd, buf, sizeof(buf));
	if (n != (ssize_t) sizeof(buf))
		r = n < 0 ? -errno : -EIO;
	else if (fsync(fd) < 0)
		r = -errno;
	OPENSSL_cleanse(buf, sizeof(buf));
	if (r < 0) {
		(void) unlink(path);
		return r;
	}

	/* The name too must survive a crash, or the next start finds no key for data written under it. */
	_cleanup_free_ char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	_cleanup_close_ int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0)
		return -errno;
	return 0;
}

static int hkdf(const uint8_t master[static DEDUP_KEY_SIZE], const char *info, uint8_t ret[static DEDUP_KEY_SIZE]) {
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	if (!kdf)
		return -EIO;
	EVP_KDF_CTX *ctx = EVP_KDF_CTX_new(kdf);
	EVP_KDF_free(kdf);
	if (!ctx)
		return -ENOMEM;
	char digest[] = "SHA256";
	static const char salt[] = "fratier";
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *) master, DEDUP_KEY_SIZE),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *) salt, sizeof(salt) - 1),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *) info, strlen(info)),
		OSSL_PARAM_construct_end(),
	};
	int ok = EVP_KDF_derive(ctx, ret, DEDUP_KEY_SIZE, params);
	EVP_KDF_CTX_free(ctx);
	return ok == 1 ? 0 : -EIO;
}

int dedup_key_derive(const uint8_t master[static DEDUP_KEY_SIZE], DedupKey *ret) {
	int r;
	memcpy(ret->master, master, DEDUP_KEY_SIZE);
	/* The info strings are part of the format (docs/FORMAT.md): changing one orphans all data. */
	if ((r = hkdf(master, "fratier chunk id", ret->id)) < 0 ||
	    (r = hkdf(master, "fratier content", ret->content)) < 0 ||
	    (r = hkdf(master, "fratier description", ret->description)) < 0 ||
	    (r = hkdf(master, "fratier key id", ret->key_id)) < 0) {
		OPENSSL_cleanse(ret, sizeof(*ret));
		return r;
	}
	return 0;
}

DedupKey *dedup_key_free(DedupKey *k) {
	if (!k)
		return NULL;
	OPENSSL_cleanse(k, sizeof(*k));
	free(k);
	return NULL;
}

DEFINE_CLEANUP_FUNC(DedupKey, dedup_key_free);

int dedup_key_load(const char *path, DedupKey **ret, char **ret_error) {
	struct stat st;
	char buf[DEDUP_KEY_FILE_SIZE + 1];
	uint8_t master[DEDUP_KEY_SIZE];
	int r;

	*ret_error = NULL;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		r = -errno;
		if (asprintf(ret_error, "cannot open key file %s: %s", path, strerror(-r)) < 0)
			*ret_error = NULL;
		return r;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		if (asprintf(ret_error, "key file %s is not a regular file", path) < 0)
			*ret_error = NULL;
		return -EPERM;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 077)) {
		if (asprintf(ret_error,
			     "key file %s must be owned by uid %u and readable by its owner only (it is uid %u, "
			     "mode %04o): chmod 0400 it, and if others could read it, make a new key",
			     path, (unsigned) geteuid(), (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777)) < 0)
			*ret_error = NULL;
		return -EPERM;
	}
	/* One byte more than a key file: a longer file is not one, whatever it starts with. */
	size_t got = 0;
	while (got < sizeof(buf)) {
		ssize_t n = read(fd, buf + got, sizeof(buf) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t) n;
	}
	r = dedup_key_file_parse(buf, got, master);
	OPENSSL_cleanse(buf, sizeof(buf));
	if (r == -EBADMSG) {
		if (asprintf(ret_error, "key file %s is damaged or not a fratier key file (fratierfs --make-key makes one)",
			     path) < 0)
			*ret_error = NULL;
		return r;
	}
	if (r < 0)
		return r;

	_cleanup_(dedup_key_freep) DedupKey *k = malloc(sizeof(*k));
	if (!k) {
		OPENSSL_cleanse(master, sizeof(master));
		return -ENOMEM;
	}
	r = dedup_key_derive(master, k);
	OPENSSL_cleanse(master, sizeof(master));
	if (r < 0)
		return r;
	*ret = TAKE_PTR(k);
	return 0;
}

char *dedup_key_id_to_string(const uint8_t id[static DEDUP_KEY_ID_SIZE], char buf[static DEDUP_KEY_ID_STRING_MAX]) {
	hex_put(id, DEDUP_KEY_ID_SIZE, buf);
	buf[2 * DEDUP_KEY_ID_SIZE] = '\0';
	return buf;
}
