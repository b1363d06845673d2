/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Chunk identity: SHA-256 of the chunk's plain bytes, or, for stores whose ids
 * must reveal nothing about the content (encryption at rest), HMAC-SHA-256 of
 * them under a secret key.  Both are 32 bytes and compared bytewise.
 *
 * A DedupHasher owns one OpenSSL context that is set up once and reused for
 * every digest, so hashing a chunk allocates nothing.  A hasher is not
 * thread-safe: use one per thread.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define DEDUP_CHUNK_ID_SIZE 32
/* 64 lowercase hex digits and a NUL. */
#define DEDUP_CHUNK_ID_STRING_MAX (DEDUP_CHUNK_ID_SIZE * 2 + 1)
/* HMAC keys longer than this are refused (RFC 2104 hashes them down anyway). */
#define DEDUP_HASHER_KEY_SIZE_MAX 1024

typedef struct DedupChunkId {
	uint8_t bytes[DEDUP_CHUNK_ID_SIZE];
} DedupChunkId;

static inline bool dedup_chunk_id_equal(const DedupChunkId *a, const DedupChunkId *b) {
	return memcmp(a->bytes, b->bytes, DEDUP_CHUNK_ID_SIZE) == 0;
}

/* Writes id as 64 lowercase hex digits plus NUL into buf; returns buf. Can't fail. */
char *dedup_chunk_id_to_string(const DedupChunkId *id, char buf[static DEDUP_CHUNK_ID_STRING_MAX]);

/*
 * Parses exactly 64 hex digits (either case), NUL-terminated, nothing else.
 * Returns: 0, or -EINVAL (then *ret is untouched).
 */
int dedup_chunk_id_from_string(const char *s, DedupChunkId *ret);

typedef struct DedupHasher DedupHasher;

/* Returns: 0, -ENOMEM, or -EIO if OpenSSL cannot provide SHA-256. */
int dedup_hasher_new(DedupHasher **ret);

/*
 * A hasher whose ids are HMAC-SHA-256 under key[0, key_len).  The key is
 * copied into OpenSSL's context; the caller may wipe its own copy.
 * Returns: 0, -EINVAL for an empty or overlong key, -ENOMEM, -EIO.
 */
int dedup_hasher_new_keyed(const void *key, size_t key_len, DedupHasher **ret);

/* NULL-tolerant; returns NULL. */
DedupHasher *dedup_hasher_free(DedupHasher *h);

bool dedup_hasher_is_keyed(const DedupHasher *h);

/*
 * The id of buf[0, len).  Any len, including 0.
 * Returns: 0, or -EIO if OpenSSL fails (then *ret is untouched).
 */
int dedup_hasher_digest(DedupHasher *h, const void *buf, size_t len, DedupChunkId *ret);

/*
 * The same in pieces: begin, update any number of times, finish.  Starting a
 * new digest (begin or dedup_hasher_digest) abandons an unfinished one.
 * Returns: 0 or -EIO.
 */
int dedup_hasher_begin(DedupHasher *h);
int dedup_hasher_update(DedupHasher *h, const void *buf, size_t len);
int dedup_hasher_finish(DedupHasher *h, DedupChunkId *ret);

/* Whether buf[0, len) is all zero bytes (true for len 0).  Can't fail. */
bool dedup_is_all_zero(const void *buf, size_t len);
