/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * segment.c — the index segment format (dedup/segment.h): encoding, and the
 * parser every host runs over other hosts' segments, read from a filer
 * nobody vouches for (fuzzed by tests/fuzz/fuzz-index-segment.c).
 *
 * Invariants:
 *  1. A segment that parses (and, sealed, opens) has exactly
 *     dedup_segment_size(count, sealed) bytes, its checksum matches, and
 *     its entries are strictly ascending by id with every field within the
 *     limits of a stored region or frame: a reader can use any entry
 *     without further bounds checks.
 *  2. One encoding per plain segment: the reserved fields and the host's
 *     padding are zero, so a segment that parses formats back to the same
 *     bytes.  A sealed one differs only by its nonce (and so its
 *     ciphertext and tag).
 *  3. A sealed segment's header, nonce included, is its associated data:
 *     its entries open only under the host, epoch, keys and count it was
 *     written with.
 */
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dedup/container.h"
#include "dedup/frame.h"
#include "dedup/key.h"
#include "dedup/le-internal.h"
#include "dedup/region.h"
#include "dedup/segment.h"

static const uint8_t segment_magic[8] = { 'F', 'R', 'T', 'S', 'E', 'G', 'M', '1' };

/* Header fields. */
#define H_MAGIC 0
#define H_VERSION 8
#define H_FLAGS 12
#define H_EPOCH 16
#define H_COUNT 24
#define H_KEYS 32
#define H_HOST 48
#define H_RESERVED 80
#define H_RESERVED2 88
/* Version 2: the nonce, then 4 reserved bytes. */
#define H_NONCE 80
#define H_RESERVED_SEALED 92
_Static_assert(H_HOST + DEDUP_SEGMENT_HOST_MAX == H_RESERVED, "header layout");
_Static_assert(H_RESERVED2 + 8 == DEDUP_SEGMENT_HEADER_SIZE, "header layout");
_Static_assert(H_NONCE + DEDUP_SEGMENT_NONCE_SIZE == H_RESERVED_SEALED, "header layout");
_Static_assert(H_RESERVED_SEALED + 4 == DEDUP_SEGMENT_HEADER_SIZE, "header layout");
_Static_assert(DEDUP_SEGMENT_NONCE_SIZE == DEDUP_GCM_NONCE_SIZE && DEDUP_SEGMENT_TAG_SIZE == DEDUP_GCM_TAG_SIZE,
	       "AES-256-GCM as dedup_gcm_seal() does it");

/* Entry fields. */
#define E_ID 0
#define E_CONTAINER 32
#define E_OFFSET 40
#define E_REGION_SIZE 48
#define E_REGION_OFFSET 52
#define E_PLAIN_SIZE 56
#define E_FRAME_SIZE 60
_Static_assert(E_FRAME_SIZE + 4 == DEDUP_SEGMENT_ENTRY_SIZE, "entry layout");

int dedup_segment_keys(const uint8_t *id_key, const uint8_t *content_key, uint8_t ret[static DEDUP_SEGMENT_KEYS_SIZE]) {
	static const char label[] = "fratier index segment keys 1";
	uint8_t in[sizeof(label) + 2 + 2 * 32] = {};
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned md_len = 0;
	size_t n = sizeof(label);

	memcpy(in, label, sizeof(label));
	in[n++] = id_key != NULL;
	if (id_key) {
		memcpy(in + n, id_key, 32);
		n += 32;
	}
	in[n++] = content_key != NULL;
	if (content_key) {
		memcpy(in + n, content_key, 32);
		n += 32;
	}
	int ok = EVP_Digest(in, n, md, &md_len, EVP_sha256(), NULL);
	OPENSSL_cleanse(in, sizeof(in));
	if (ok != 1 || md_len < DEDUP_SEGMENT_KEYS_SIZE)
		return -EIO;
	memcpy(ret, md, DEDUP_SEGMENT_KEYS_SIZE);
	return 0;
}

static int entry_compare(const void *a, const void *b) {
	return memcmp(((const DedupSegmentEntry *) a)->id.bytes, ((const DedupSegmentEntry *) b)->id.bytes,
		      DEDUP_CHUNK_ID_SIZE);
}

size_t dedup_segment_entries_sort(DedupSegmentEntry *entries, size_t n) {
	if (n == 0)
		return 0;
	qsort(entries, n, sizeof(*entries), entry_compare);
	size_t k = 1;
	for (size_t i = 1; i < n; i++)
		if (!dedup_chunk_id_equal(&entries[i].id, &entries[k - 1].id))
			entries[k++] = entries[i];
	return k;
}

/* Invariant 1: what a stored region or frame can be. */
static bool entry_is_valid(const DedupSegmentEntry *e) {
	if (e->container == 0 || e->offset < DEDUP_CONTAINER_HEADER_SIZE || e->offset > DEDUP_CONTAINER_SIZE_MAX ||
	    e->plain_size == 0 || e->frame_size == 0)
		return false;
	if (e->region_size == 0)
		return e->frame_size > DEDUP_FRAME_HEADER_SIZE && e->frame_size <= DEDUP_FRAME_SIZE_MAX &&
		       e->region_offset == 0 && e->plain_size <= DEDUP_REGION_PLAIN_MAX;
	return e->region_size > DEDUP_REGION_HEADER_SIZE && e->region_size <= DEDUP_REGION_SIZE_MAX &&
	       e->frame_size <= e->region_size && (uint64_t) e->region_offset + e->plain_size <= DEDUP_REGION_PLAIN_MAX;
}

bool dedup_host_name_is_valid(const char *host) {
	size_t n = strlen(host);
	if (n == 0 || n > DEDUP_SEGMENT_HOST_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = host[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* AES-256-GCM of the n entries after buf's header, in place, the header as associated data (invariant 3). */
static int entries_gcm(uint8_t *buf, size_t n, const uint8_t *key, bool seal) {
	uint8_t *entries = buf + DEDUP_SEGMENT_HEADER_SIZE, *tag = entries + n * DEDUP_SEGMENT_ENTRY_SIZE;
	size_t len = n * DEDUP_SEGMENT_ENTRY_SIZE;
	return seal ? dedup_gcm_seal(key, buf + H_NONCE, buf, DEDUP_SEGMENT_HEADER_SIZE, entries, len, tag)
		    : dedup_gcm_open(key, buf + H_NONCE, buf, DEDUP_SEGMENT_HEADER_SIZE, entries, len, tag);
}

int dedup_segment_format(const DedupSegmentHeader *h, const DedupSegmentEntry *entries, size_t n,
			 const uint8_t *seal_key, uint8_t **ret) {
	if (n > DEDUP_SEGMENT_ENTRIES_MAX || (h->flags & ~DEDUP_SEGMENT_FLAG_KEYED_IDS) || !dedup_host_name_is_valid(h->host))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!entry_is_valid(entries + i) ||
		    (i > 0 && memcmp(entries[i - 1].id.bytes, entries[i].id.bytes, DEDUP_CHUNK_ID_SIZE) >= 0))
			return -EINVAL;

	bool sealed = seal_key != NULL;
	size_t size = (size_t) dedup_segment_size(n, sealed);
	uint8_t *buf = calloc(1, size);
	if (!buf)
		return -ENOMEM;
	memcpy(buf + H_MAGIC, segment_magic, sizeof(segment_magic));
	le32_put(buf + H_VERSION, sealed ? DEDUP_SEGMENT_VERSION_SEALED : DEDUP_SEGMENT_VERSION);
	/* A random nonce, as a sealed region's: segments of one key come from many hosts, which share no counter. */
	if (sealed && RAND_bytes(buf + H_NONCE, DEDUP_SEGMENT_NONCE_SIZE) != 1) {
		free(buf);
		return -EIO;
	}
	le32_put(buf + H_FLAGS, h->flags);
	le64_put(buf + H_EPOCH, h->epoch);
	le64_put(buf + H_COUNT, n);
	memcpy(buf + H_KEYS, h->keys, DEDUP_SEGMENT_KEYS_SIZE);
	memcpy(buf + H_HOST, h->host, strlen(h->host));
	for (size_t i = 0; i < n; i++) {
		uint8_t *p = buf + DEDUP_SEGMENT_HEADER_SIZE + i * DEDUP_SEGMENT_ENTRY_SIZE;
		const DedupSegmentEntry *e = entries + i;
		memcpy(p + E_ID, e->id.bytes, DEDUP_CHUNK_ID_SIZE);
		le64_put(p + E_CONTAINER, e->container);
		le64_put(p + E_OFFSET, e->offset);
		le32_put(p + E_REGION_SIZE, e->region_size);
		le32_put(p + E_REGION_OFFSET, e->region_offset);
		le32_put(p + E_PLAIN_SIZE, e->plain_size);
		le32_put(p + E_FRAME_SIZE, e->frame_size);
	}
	if (sealed && entries_gcm(buf, n, seal_key, true) < 0) {
		free(buf);
		return -EIO;
	}
	le64_put(buf + size - DEDUP_SEGMENT_TRAILER_SIZE, XXH3_64bits(buf, size - DEDUP_SEGMENT_TRAILER_SIZE));
	*ret = buf;
	return 0;
}

void dedup_segment_entry_get(const void *buf, uint64_t i, DedupSegmentEntry *ret) {
	const uint8_t *p = (const uint8_t *) buf + DEDUP_SEGMENT_HEADER_SIZE + i * DEDUP_SEGMENT_ENTRY_SIZE;
	memcpy(ret->id.bytes, p + E_ID, DEDUP_CHUNK_ID_SIZE);
	ret->container = le64_get(p + E_CONTAINER);
	ret->offset = le64_get(p + E_OFFSET);
	ret->region_size = le32_get(p + E_REGION_SIZE);
	ret->region_offset = le32_get(p + E_REGION_OFFSET);
	ret->plain_size = le32_get(p + E_PLAIN_SIZE);
	ret->frame_size = le32_get(p + E_FRAME_SIZE);
}

/* Invariant 1: the entries of buf, in the clear, each valid and strictly ascending. */
static bool entries_are_valid(const void *buf, uint64_t count) {
	DedupSegmentEntry prev = {}, e;
	for (uint64_t i = 0; i < count; i++) {
		dedup_segment_entry_get(buf, i, &e);
		if (!entry_is_valid(&e) || (i > 0 && memcmp(prev.id.bytes, e.id.bytes, DEDUP_CHUNK_ID_SIZE) >= 0))
			return false;
		prev = e;
	}
	return true;
}

int dedup_segment_parse(const void *buf, size_t len, DedupSegmentHeader *ret) {
	const uint8_t *p = buf;
	DedupSegmentHeader h = {};

	if (len < dedup_segment_size(0, false) || memcmp(p + H_MAGIC, segment_magic, sizeof(segment_magic)) != 0)
		return -EBADMSG;
	uint32_t version = le32_get(p + H_VERSION);
	if (version != DEDUP_SEGMENT_VERSION && version != DEDUP_SEGMENT_VERSION_SEALED)
		return -EBADMSG;
	h.sealed = version == DEDUP_SEGMENT_VERSION_SEALED;
	h.flags = le32_get(p + H_FLAGS);
	h.epoch = le64_get(p + H_EPOCH);
	h.count = le64_get(p + H_COUNT);
	if ((h.flags & ~DEDUP_SEGMENT_FLAG_KEYED_IDS) || h.count > DEDUP_SEGMENT_ENTRIES_MAX ||
	    dedup_segment_size(h.count, h.sealed) != len)
		return -EBADMSG;
	if (h.sealed ? le32_get(p + H_RESERVED_SEALED) != 0
		     : (le64_get(p + H_RESERVED) != 0 || le64_get(p + H_RESERVED2) != 0))
		return -EBADMSG;
	if (XXH3_64bits(p, len - DEDUP_SEGMENT_TRAILER_SIZE) != le64_get(p + len - DEDUP_SEGMENT_TRAILER_SIZE))
		return -EBADMSG;
	memcpy(h.keys, p + H_KEYS, DEDUP_SEGMENT_KEYS_SIZE);

	/* Invariant 2: the name, then only NULs. */
	size_t host_len = strnlen((const char *) p + H_HOST, DEDUP_SEGMENT_HOST_MAX);
	for (size_t i = host_len; i < DEDUP_SEGMENT_HOST_MAX; i++)
		if (p[H_HOST + i] != 0)
			return -EBADMSG;
	memcpy(h.host, p + H_HOST, host_len);
	if (!dedup_host_name_is_valid(h.host))
		return -EBADMSG;
	if (!h.sealed && !entries_are_valid(buf, h.count))
		return -EBADMSG;
	*ret = h;
	return 0;
}

int dedup_segment_open(void *buf, size_t len, const uint8_t *key) {
	DedupSegmentHeader h;
	if (!key || dedup_segment_parse(buf, len, &h) < 0 || !h.sealed)
		return -EBADMSG;
	if (entries_gcm(buf, (size_t) h.count, key, false) < 0 || !entries_are_valid(buf, h.count))
		return -EBADMSG;
	return 0;
}

char *dedup_epoch_name(char dir, const char *ext, uint64_t epoch, char buf[static DEDUP_SEGMENT_NAME_MAX]) {
	snprintf(buf, DEDUP_SEGMENT_NAME_MAX, "%c/%016" PRIx64 ".%s", dir, epoch, ext);
	return buf;
}

int dedup_epoch_name_parse(const char *name, char dir, const char *ext, uint64_t *ret) {
	uint64_t v = 0;
	if (name[0] == dir && name[1] == '/')
		name += 2;
	if (strlen(name) != 16 + 4 || name[16] != '.' || strcmp(name + 17, ext) != 0)
		return -EINVAL;
	for (size_t i = 0; i < 16; i++) {
		char c = name[i];
		if (c >= '0' && c <= '9')
			v = v << 4 | (uint64_t) (c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint64_t) (c - 'a' + 10);
		else
			return -EINVAL;
	}
	*ret = v;
	return 0;
}

char *dedup_segment_name(uint64_t epoch, char buf[static DEDUP_SEGMENT_NAME_MAX]) {
	return dedup_epoch_name('i', "fti", epoch, buf);
}

int dedup_segment_name_parse(const char *name, uint64_t *ret) {
	return dedup_epoch_name_parse(name, 'i', "fti", ret);
}
