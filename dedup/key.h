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

/* Wipes and frees k; NULL-tolerant; returns NULL. */
DedupKey *dedup_key_free(DedupKey *k);

/* The key id as 64 lowercase hex digits; returns buf.  Can't fail. */
char *dedup_key_id_to_string(const uint8_t id[static DEDUP_KEY_ID_SIZE], char buf[static DEDUP_KEY_ID_STRING_MAX]);
