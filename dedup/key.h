/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The mount's key: 32 random bytes in a key file readable by its owner only
 * (docs/FORMAT.md, "Key file"), and the subkeys derived from it with
 * HKDF-SHA-256, one per use, so that no two uses ever share key material:
 *
 *   id          HMAC-SHA-256 key of chunk ids (dedup/fingerprint.h)
 *   content     AES-256-GCM key of regions on encrypted tiers
 *   description AES-256-GCM key of tier descriptions
 *   key id      not a key: a fingerprint the catalog records so that a
 *               mount with another key fails at once instead of reading
 *               garbage; it reveals nothing about the key (HKDF is a PRF)
 *
 * The master key and subkeys live in one DedupKey, wiped when freed.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DEDUP_KEY_SIZE 32
#define DEDUP_KEY_ID_SIZE 32
/* 64 lowercase hex digits and a NUL. */
#define DEDUP_KEY_ID_STRING_MAX (DEDUP_KEY_ID_SIZE * 2 + 1)
/* "fratier-key-1\n", 64 hex digits of the key, " ", 16 of a check, "\n". */
#define DEDUP_KEY_FILE_SIZE 96

typedef struct DedupKey {
	uint8_t master[DEDUP_KEY_SIZE];
	uint8_t id[DEDUP_KEY_SIZE];
	uint8_t content[DEDUP_KEY_SIZE];
	uint8_t description[DEDUP_KEY_SIZE];
	uint8_t key_id[DEDUP_KEY_ID_SIZE];
} DedupKey;

/*
 * Parses a key file's bytes (exactly its DEDUP_KEY_FILE_SIZE bytes, nothing
 * else) into the 32 bytes of the key.  The check (the first 8 bytes of
 * SHA-256 over the header line and the key) catches a damaged or edited
 * file, which would otherwise look like a wrong key.
 * Returns: 0, -EBADMSG (not a key file, or damaged), -EIO (OpenSSL).
 */
int dedup_key_file_parse(const void *buf, size_t len, uint8_t ret[static DEDUP_KEY_SIZE]);

/* Formats key into buf, exactly DEDUP_KEY_FILE_SIZE bytes.  Returns: 0 or -EIO. */
int dedup_key_file_format(const uint8_t key[static DEDUP_KEY_SIZE], char buf[static DEDUP_KEY_FILE_SIZE]);

/*
 * Creates path with a new random key: refuses an existing file (O_EXCL),
 * mode 0400 from the start, fsynced with its directory.
 * Returns: 0, -EEXIST, -EIO (no randomness), or -errno.
 */
int dedup_key_file_make(const char *path);

/*
 * Loads and derives the key of path.  The file must be a regular file owned
 * by the caller's effective uid that neither group nor others can read or
 * write (-EPERM otherwise): a key anyone can read protects nothing.
 * *ret_error, when set, says why in one line (the caller frees it).
 * Returns: 0 and *ret (free with dedup_key_free), -EPERM, -EBADMSG, -ENOMEM,
 * -EIO, or -errno of open/read.
 */
int dedup_key_load(const char *path, DedupKey **ret, char **ret_error);

/* Derives the subkeys and the key id of master into *ret.  Returns: 0 or -EIO. */
int dedup_key_derive(const uint8_t master[static DEDUP_KEY_SIZE], DedupKey *ret);

#define DEDUP_GCM_NONCE_SIZE 12
#define DEDUP_GCM_TAG_SIZE 16

/*
 * AES-256-GCM of buf[0, len) in place under key and nonce, aad[0, aad_len)
 * authenticated with it, as sealed descriptions and index segments are
 * made (sealed regions keep a context per decoder instead): seal() writes
 * the tag, open() checks it and, when it does not match (another key, a
 * byte changed), leaves no plaintext behind: buf is zeroed.
 * Returns: 0; -EBADMSG (open: the tag does not match); -EINVAL (len or
 * aad_len past INT_MAX); -ENOMEM, -EIO (OpenSSL).
 */
int dedup_gcm_seal(const uint8_t key[static DEDUP_KEY_SIZE], const uint8_t nonce[static DEDUP_GCM_NONCE_SIZE],
		   const void *aad, size_t aad_len, void *buf, size_t len, uint8_t tag[static DEDUP_GCM_TAG_SIZE]);
int dedup_gcm_open(const uint8_t key[static DEDUP_KEY_SIZE], const uint8_t nonce[static DEDUP_GCM_NONCE_SIZE],
		   const void *aad, size_t aad_len, void *buf, size_t len, const uint8_t tag[static DEDUP_GCM_TAG_SIZE]);

/* Wipes and frees k; NULL-tolerant; returns NULL. */
DedupKey *dedup_key_free(DedupKey *k);

/*
 * Key rings: several keys of one data directory, for rotation (docs/FORMAT.md,
 * "Key ring"; docs/SECURITY.md, "Key rotation").  The newest key seals what
 * is written now; the older ones only open what they sealed.  Every key of a
 * ring shares one chunk-id key (the id subkey of the data directory's first
 * key), kept in the ring itself so that the first key can be dropped: chunk
 * ids, and with them deduplication against stored chunks, never change.
 */
#define DEDUP_KEYRING_MAX 8u
/* "fratier-keyring-1\n", "id " + 64 hex + "\n", per key "key " + 64 hex + "\n", "check " + 16 hex + "\n". */
#define DEDUP_KEYRING_FILE_SIZE(n) (18u + 68u + 69u * (n) + 23u)
#define DEDUP_KEYRING_FILE_MAX DEDUP_KEYRING_FILE_SIZE(DEDUP_KEYRING_MAX)

/* The tag a sealed region names its key by: the first 4 bytes of the key id, little-endian. */
static inline uint32_t dedup_key_tag(const uint8_t key_id[static DEDUP_KEY_ID_SIZE]) {
	return (uint32_t) key_id[0] | (uint32_t) key_id[1] << 8 | (uint32_t) key_id[2] << 16 | (uint32_t) key_id[3] << 24;
}

/* An older key of a ring, by reference into it: what it sealed can still be opened. */
typedef struct DedupOldKey {
	uint32_t tag;
	const uint8_t *key_id;      /* DEDUP_KEY_ID_SIZE bytes */
	const uint8_t *content;     /* DEDUP_KEY_SIZE bytes each */
	const uint8_t *description;
} DedupOldKey;

/* Older keys, oldest first (the first opens sealed regions of version 2, which name no key). */
typedef struct DedupOldKeys {
	size_t n;
	DedupOldKey keys[DEDUP_KEYRING_MAX];
} DedupOldKeys;

typedef struct DedupKeyRing {
	size_t n;                          /* 1 .. DEDUP_KEYRING_MAX */
	DedupKey keys[DEDUP_KEYRING_MAX];  /* oldest first; keys[n - 1] seals; every .id is the ring's id key */
	DedupOldKeys old;                  /* keys[0 .. n - 2] */
} DedupKeyRing;

static inline const DedupKey *dedup_keyring_newest(const DedupKeyRing *k) {
	return &k->keys[k->n - 1];
}

/*
 * Parses a key ring file's bytes, or a key file's (a ring of that one key,
 * its id key derived from it), into the id key and the n masters, oldest
 * first.  Refuses (-EBADMSG) anything but the exact format, a wrong check,
 * no key, more than DEDUP_KEYRING_MAX, two keys alike or with one tag.
 * Returns: 0, -EBADMSG, -EIO (OpenSSL).
 */
int dedup_keyring_parse(const void *buf, size_t len, uint8_t ret_id[static DEDUP_KEY_SIZE],
			uint8_t ret_masters[static DEDUP_KEYRING_MAX][DEDUP_KEY_SIZE], size_t *ret_n);
/* Formats a ring into buf (DEDUP_KEYRING_FILE_SIZE(n) bytes).  Returns: 0, -EINVAL (n), -EIO. */
int dedup_keyring_format(const uint8_t id[static DEDUP_KEY_SIZE], const uint8_t masters[][DEDUP_KEY_SIZE], size_t n,
			 char *buf, size_t cap, size_t *ret_len);
/*
 * Loads path, a key ring or a key file, checked as dedup_key_load() checks
 * a key file, and derives every key.  Returns as dedup_key_load(); *ret is
 * freed with dedup_keyring_free().
 */
int dedup_keyring_load(const char *path, DedupKeyRing **ret, char **ret_error);
DedupKeyRing *dedup_keyring_free(DedupKeyRing *k);
/*
 * Adds a new random key to path (a key file becomes a ring; mode 0400; the
 * new file is written beside it, synced, and renamed over it, so a crash
 * leaves the old or the new ring, never neither).  *ret_key_id gets the new
 * key's id.  Returns: 0, -E2BIG (DEDUP_KEYRING_MAX keys already), or as
 * dedup_keyring_load() (*ret_error then says why), -EIO, -errno.
 */
int dedup_keyring_file_add(const char *path, uint8_t ret_key_id[static DEDUP_KEY_ID_SIZE], char **ret_error);
/*
 * Removes the key whose id starts with the hex digits key_id (at least 8)
 * from the ring at path, as dedup_keyring_file_add() writes.  Refuses the
 * newest key (-EBUSY), an unknown or ambiguous prefix (-ENOENT, -EINVAL).
 * It cannot know whether data still needs the key: the daemon refuses to
 * start without such a key (and names it), tierctl status shows its bytes.
 */
int dedup_keyring_file_drop(const char *path, const char *key_id, char **ret_error);

/* The key id as 64 lowercase hex digits; returns buf.  Can't fail. */
char *dedup_key_id_to_string(const uint8_t id[static DEDUP_KEY_ID_SIZE], char buf[static DEDUP_KEY_ID_STRING_MAX]);
