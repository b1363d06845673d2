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
#include <limits.h>
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

int dedup_gcm_seal(const uint8_t key[static DEDUP_KEY_SIZE], const uint8_t nonce[static DEDUP_GCM_NONCE_SIZE],
		   const void *aad, size_t aad_len, void *buf, size_t len, uint8_t tag[static DEDUP_GCM_TAG_SIZE]) {
	if (len > INT_MAX || aad_len > INT_MAX)
		return -EINVAL;
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	if (!ctx)
		return -ENOMEM;
	int out = 0, fin = 0;
	bool ok = EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, nonce) == 1 &&
		  EVP_EncryptUpdate(ctx, NULL, &out, aad, (int) aad_len) == 1 &&
		  EVP_EncryptUpdate(ctx, buf, &out, buf, (int) len) == 1 &&
		  EVP_EncryptFinal_ex(ctx, (uint8_t *) buf + out, &fin) == 1 &&
		  EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, DEDUP_GCM_TAG_SIZE, tag) == 1;
	EVP_CIPHER_CTX_free(ctx);
	return ok ? 0 : -EIO;
}

int dedup_gcm_open(const uint8_t key[static DEDUP_KEY_SIZE], const uint8_t nonce[static DEDUP_GCM_NONCE_SIZE],
		   const void *aad, size_t aad_len, void *buf, size_t len, const uint8_t tag[static DEDUP_GCM_TAG_SIZE]) {
	if (len > INT_MAX || aad_len > INT_MAX)
		return -EINVAL;
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	if (!ctx)
		return -ENOMEM;
	/* OpenSSL takes a tag it may not write to, but its prototype says void *. */
	uint8_t expected[DEDUP_GCM_TAG_SIZE];
	memcpy(expected, tag, sizeof(expected));
	int out = 0, fin = 0, r = 0;
	if (EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, nonce) != 1 ||
	    EVP_DecryptUpdate(ctx, NULL, &out, aad, (int) aad_len) != 1 ||
	    EVP_DecryptUpdate(ctx, buf, &out, buf, (int) len) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, sizeof(expected), expected) != 1)
		r = -EIO;
	else if (EVP_DecryptFinal_ex(ctx, (uint8_t *) buf + out, &fin) != 1)
		r = -EBADMSG;
	EVP_CIPHER_CTX_free(ctx);
	/* The bytes were decrypted before the tag was checked: none of them may outlive a failure. */
	if (r < 0)
		OPENSSL_cleanse(buf, len);
	return r;
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

/*
 * Reads the key file or ring at path into buf[0, cap) after checking what
 * it is (invariant 2).  Reads one byte more than the caller can use, so a
 * longer file is refused whatever it starts with.
 */
static int key_file_read(const char *path, char *buf, size_t cap, size_t *ret_len, char **ret_error) {
	struct stat st;
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
	size_t got = 0;
	while (got < cap) {
		ssize_t n = read(fd, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			OPENSSL_cleanse(buf, got);
			return r;
		}
		if (n == 0)
			break;
		got += (size_t) n;
	}
	*ret_len = got;
	return 0;
}

static int damaged(const char *path, char **ret_error) {
	if (asprintf(ret_error, "key file %s is damaged or not a fratier key file (fratierfs --make-key makes one)",
		     path) < 0)
		*ret_error = NULL;
	return -EBADMSG;
}

int dedup_key_load(const char *path, DedupKey **ret, char **ret_error) {
	char buf[DEDUP_KEY_FILE_SIZE + 1];
	uint8_t master[DEDUP_KEY_SIZE];
	size_t got = 0;
	int r;

	r = key_file_read(path, buf, sizeof(buf), &got, ret_error);
	if (r < 0)
		return r;
	r = dedup_key_file_parse(buf, got, master);
	OPENSSL_cleanse(buf, sizeof(buf));
	if (r == -EBADMSG)
		return damaged(path, ret_error);
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

#define RING_HEADER "fratier-keyring-1\n"
#define RING_HEADER_LEN (sizeof(RING_HEADER) - 1)

/* The first 8 bytes of SHA-256 of buf[0, len): the ring's check, over everything before its line. */
static int ring_check(const char *buf, size_t len, uint8_t ret[static KEY_FILE_CHECK_SIZE]) {
	uint8_t md[32];
	unsigned md_len = 0;
	if (EVP_Digest(buf, len, md, &md_len, EVP_sha256(), NULL) != 1 || md_len != sizeof(md))
		return -EIO;
	memcpy(ret, md, KEY_FILE_CHECK_SIZE);
	return 0;
}

/* Parses "<word> <2n hex digits>\n" at *p (within end) into out. */
static int ring_line(const char **p, const char *end, const char *word, size_t n, uint8_t *out) {
	size_t w = strlen(word);
	if ((size_t) (end - *p) < w + 1 + 2 * n + 1 || memcmp(*p, word, w) != 0 || (*p)[w] != ' ' ||
	    (*p)[w + 1 + 2 * n] != '\n')
		return -EBADMSG;
	int r = hex_get(*p + w + 1, n, out);
	if (r < 0)
		return r;
	*p += w + 1 + 2 * n + 1;
	return 0;
}

/* Derives the key ids of masters[0, n) and checks that no two share a tag (and so no two are alike). */
static int ring_tags_check(const uint8_t masters[][DEDUP_KEY_SIZE], size_t n) {
	uint32_t tags[DEDUP_KEYRING_MAX];
	for (size_t i = 0; i < n; i++) {
		DedupKey k;
		int r = dedup_key_derive(masters[i], &k);
		tags[i] = dedup_key_tag(k.key_id);
		OPENSSL_cleanse(&k, sizeof(k));
		if (r < 0)
			return r;
		for (size_t j = 0; j < i; j++)
			if (tags[j] == tags[i])
				return -EBADMSG;
	}
	return 0;
}

int dedup_keyring_parse(const void *buf, size_t len, uint8_t ret_id[static DEDUP_KEY_SIZE],
			uint8_t ret_masters[static DEDUP_KEYRING_MAX][DEDUP_KEY_SIZE], size_t *ret_n) {
	const char *s = buf, *p = s, *end = s + len;
	uint8_t id[DEDUP_KEY_SIZE], masters[DEDUP_KEYRING_MAX][DEDUP_KEY_SIZE];
	uint8_t check[KEY_FILE_CHECK_SIZE], want[KEY_FILE_CHECK_SIZE];
	size_t n = 0;
	int r;

	if (len >= KEY_FILE_HEADER_LEN && memcmp(s, KEY_FILE_HEADER, KEY_FILE_HEADER_LEN) == 0) {
		/* A key file: a ring of one, the id key its own. */
		DedupKey k;
		r = dedup_key_file_parse(buf, len, masters[0]);
		if (r >= 0)
			r = dedup_key_derive(masters[0], &k);
		if (r >= 0) {
			memcpy(ret_id, k.id, DEDUP_KEY_SIZE);
			memcpy(ret_masters[0], masters[0], DEDUP_KEY_SIZE);
			*ret_n = 1;
			OPENSSL_cleanse(&k, sizeof(k));
		}
		OPENSSL_cleanse(masters, sizeof(masters));
		return r;
	}
	if (len < RING_HEADER_LEN || len > DEDUP_KEYRING_FILE_MAX || memcmp(s, RING_HEADER, RING_HEADER_LEN) != 0)
		return -EBADMSG;
	p += RING_HEADER_LEN;
	r = ring_line(&p, end, "id", DEDUP_KEY_SIZE, id);
	while (r >= 0 && end - p >= 4 && memcmp(p, "key ", 4) == 0) {
		if (n == DEDUP_KEYRING_MAX) {
			r = -EBADMSG;
			break;
		}
		r = ring_line(&p, end, "key", DEDUP_KEY_SIZE, masters[n]);
		if (r >= 0)
			n++;
	}
	const char *check_at = p;
	if (r >= 0)
		r = ring_line(&p, end, "check", KEY_FILE_CHECK_SIZE, check);
	if (r >= 0 && (p != end || n == 0))
		r = -EBADMSG;
	if (r >= 0)
		r = ring_check(s, (size_t) (check_at - s), want);
	if (r >= 0 && CRYPTO_memcmp(check, want, sizeof(want)) != 0)
		r = -EBADMSG;
	if (r >= 0)
		r = ring_tags_check((const uint8_t (*)[DEDUP_KEY_SIZE]) masters, n);
	if (r >= 0) {
		memcpy(ret_id, id, DEDUP_KEY_SIZE);
		memcpy(ret_masters, masters, n * DEDUP_KEY_SIZE);
		*ret_n = n;
	}
	OPENSSL_cleanse(id, sizeof(id));
	OPENSSL_cleanse(masters, sizeof(masters));
	return r;
}

int dedup_keyring_format(const uint8_t id[static DEDUP_KEY_SIZE], const uint8_t masters[][DEDUP_KEY_SIZE], size_t n,
			 char *buf, size_t cap, size_t *ret_len) {
	if (n == 0 || n > DEDUP_KEYRING_MAX || cap < DEDUP_KEYRING_FILE_SIZE(n))
		return -EINVAL;
	char *p = buf;
	memcpy(p, RING_HEADER, RING_HEADER_LEN);
	p += RING_HEADER_LEN;
	memcpy(p, "id ", 3);
	hex_put(id, DEDUP_KEY_SIZE, p + 3);
	p += 3 + 2 * DEDUP_KEY_SIZE;
	*p++ = '\n';
	for (size_t i = 0; i < n; i++) {
		memcpy(p, "key ", 4);
		hex_put(masters[i], DEDUP_KEY_SIZE, p + 4);
		p += 4 + 2 * DEDUP_KEY_SIZE;
		*p++ = '\n';
	}
	uint8_t check[KEY_FILE_CHECK_SIZE];
	int r = ring_check(buf, (size_t) (p - buf), check);
	if (r < 0)
		return r;
	memcpy(p, "check ", 6);
	hex_put(check, KEY_FILE_CHECK_SIZE, p + 6);
	p += 6 + 2 * KEY_FILE_CHECK_SIZE;
	*p++ = '\n';
	*ret_len = (size_t) (p - buf);
	return 0;
}

DedupKeyRing *dedup_keyring_free(DedupKeyRing *k) {
	if (!k)
		return NULL;
	OPENSSL_cleanse(k, sizeof(*k));
	free(k);
	return NULL;
}

DEFINE_CLEANUP_FUNC(DedupKeyRing, dedup_keyring_free);

/* Reads and parses the ring at path; *ret_error says why it cannot. */
static int ring_read(const char *path, uint8_t id[static DEDUP_KEY_SIZE], uint8_t masters[][DEDUP_KEY_SIZE],
		     size_t *ret_n, char **ret_error) {
	char buf[DEDUP_KEYRING_FILE_MAX + 1];
	size_t got = 0;
	int r = key_file_read(path, buf, sizeof(buf), &got, ret_error);
	if (r < 0)
		return r;
	r = dedup_keyring_parse(buf, got, id, masters, ret_n);
	OPENSSL_cleanse(buf, sizeof(buf));
	if (r == -EBADMSG)
		return damaged(path, ret_error);
	return r;
}

int dedup_keyring_load(const char *path, DedupKeyRing **ret, char **ret_error) {
	uint8_t id[DEDUP_KEY_SIZE], masters[DEDUP_KEYRING_MAX][DEDUP_KEY_SIZE];
	size_t n = 0;
	int r;

	r = ring_read(path, id, masters, &n, ret_error);
	_cleanup_(dedup_keyring_freep) DedupKeyRing *k = r >= 0 ? calloc(1, sizeof(*k)) : NULL;
	if (r >= 0 && !k)
		r = -ENOMEM;
	for (size_t i = 0; r >= 0 && i < n; i++) {
		r = dedup_key_derive(masters[i], &k->keys[i]);
		memcpy(k->keys[i].id, id, DEDUP_KEY_SIZE);
	}
	OPENSSL_cleanse(id, sizeof(id));
	OPENSSL_cleanse(masters, sizeof(masters));
	if (r < 0)
		return r;
	k->n = n;
	k->old.n = n - 1;
	for (size_t i = 0; i + 1 < n; i++)
		k->old.keys[i] = (DedupOldKey) {
			.tag = dedup_key_tag(k->keys[i].key_id),
			.key_id = k->keys[i].key_id,
			.content = k->keys[i].content,
			.description = k->keys[i].description,
		};
	*ret = TAKE_PTR(k);
	return 0;
}

/* Replaces path with the ring (id, masters[0, n)): a new file beside it, synced, renamed over it, the directory synced. */
static int ring_write(const char *path, const uint8_t id[static DEDUP_KEY_SIZE], const uint8_t masters[][DEDUP_KEY_SIZE],
		      size_t n) {
	char buf[DEDUP_KEYRING_FILE_MAX];
	size_t len = 0;
	int r = dedup_keyring_format(id, masters, n, buf, sizeof(buf), &len);
	if (r < 0)
		return r;
	_cleanup_free_ char *tmp = NULL;
	if (asprintf(&tmp, "%s.new", path) < 0) {
		OPENSSL_cleanse(buf, sizeof(buf));
		return -ENOMEM;
	}
	/* A leftover of an interrupted change is ours and holds no key the ring at path lacks. */
	(void) unlink(tmp);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
	if (fd < 0) {
		r = -errno;
		OPENSSL_cleanse(buf, sizeof(buf));
		return r;
	}
	ssize_t w = write(fd, buf, len);
	OPENSSL_cleanse(buf, sizeof(buf));
	if (w != (ssize_t) len)
		r = w < 0 ? -errno : -EIO;
	else if (fsync(fd) < 0 || rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		(void) unlink(tmp);
		return r;
	}
	_cleanup_free_ char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	_cleanup_close_ int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0)
		return -errno;
	return 0;
}

int dedup_keyring_file_add(const char *path, uint8_t ret_key_id[static DEDUP_KEY_ID_SIZE], char **ret_error) {
	uint8_t id[DEDUP_KEY_SIZE], masters[DEDUP_KEYRING_MAX][DEDUP_KEY_SIZE];
	size_t n = 0;
	int r;

	r = ring_read(path, id, masters, &n, ret_error);
	if (r < 0)
		return r;
	if (n == DEDUP_KEYRING_MAX) {
		r = -E2BIG;
		if (asprintf(ret_error, "key ring %s holds %u keys already: drop an old one first", path,
			     DEDUP_KEYRING_MAX) < 0)
			*ret_error = NULL;
		goto out;
	}
	/* A new key whose tag no other key of the ring has: regions name their key by it. */
	for (;;) {
		if (RAND_priv_bytes(masters[n], DEDUP_KEY_SIZE) != 1) {
			r = -EIO;
			goto out;
		}
		r = ring_tags_check((const uint8_t (*)[DEDUP_KEY_SIZE]) masters, n + 1);
		if (r != -EBADMSG)
			break;
	}
	if (r < 0)
		goto out;
	DedupKey k;
	r = dedup_key_derive(masters[n], &k);
	if (r >= 0)
		memcpy(ret_key_id, k.key_id, DEDUP_KEY_ID_SIZE);
	OPENSSL_cleanse(&k, sizeof(k));
	if (r >= 0)
		r = ring_write(path, id, (const uint8_t (*)[DEDUP_KEY_SIZE]) masters, n + 1);
out:
	OPENSSL_cleanse(id, sizeof(id));
	OPENSSL_cleanse(masters, sizeof(masters));
	return r;
}

int dedup_keyring_file_drop(const char *path, const char *key_id, char **ret_error) {
	uint8_t id[DEDUP_KEY_SIZE], masters[DEDUP_KEYRING_MAX][DEDUP_KEY_SIZE];
	size_t n = 0, len = strlen(key_id), found = SIZE_MAX;
	int r;

	if (len < 8 || len > 2 * DEDUP_KEY_ID_SIZE || strspn(key_id, hexdigits) != len) {
		if (asprintf(ret_error, "'%s' is not a key id (8 to 64 lowercase hex digits, as tierctl status shows)",
			     key_id) < 0)
			*ret_error = NULL;
		return -EINVAL;
	}
	r = ring_read(path, id, masters, &n, ret_error);
	if (r < 0)
		return r;
	for (size_t i = 0; r >= 0 && i < n; i++) {
		DedupKey k;
		char s[DEDUP_KEY_ID_STRING_MAX];
		r = dedup_key_derive(masters[i], &k);
		dedup_key_id_to_string(k.key_id, s);
		OPENSSL_cleanse(&k, sizeof(k));
		if (r >= 0 && strncmp(s, key_id, len) == 0) {
			if (found != SIZE_MAX)
				r = -EINVAL;
			found = i;
		}
	}
	if (r >= 0 && found == SIZE_MAX)
		r = -ENOENT;
	else if (r >= 0 && found == n - 1)
		r = -EBUSY;
	bool searched = r == -ENOENT || r == -EBUSY || r == -EINVAL;
	if (r >= 0) {
		memmove(masters[found], masters[found + 1], (n - found - 1) * DEDUP_KEY_SIZE);
		r = ring_write(path, id, (const uint8_t (*)[DEDUP_KEY_SIZE]) masters, n - 1);
	}
	if (searched) {
		const char *why = r == -ENOENT ? "has no key with this id"
				  : r == -EBUSY ? "holds it as the newest key, the one new data is written under: add a "
						  "new key first (fratierfs --add-key)"
						: "holds more than one key with an id starting so: give more digits";
		if (asprintf(ret_error, "cannot drop key %s: %s %s", key_id, path, why) < 0)
			*ret_error = NULL;
	}
	OPENSSL_cleanse(id, sizeof(id));
	OPENSSL_cleanse(masters, sizeof(masters));
	return r;
}

char *dedup_key_id_to_string(const uint8_t id[static DEDUP_KEY_ID_SIZE], char buf[static DEDUP_KEY_ID_STRING_MAX]) {
	hex_put(id, DEDUP_KEY_ID_SIZE, buf);
	buf[2 * DEDUP_KEY_ID_SIZE] = '\0';
	return buf;
}
