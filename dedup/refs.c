/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * refs.c — reference publications and condemnations of a shared tier
 * (dedup/refs.h): encoding, and the parsers every collector runs over
 * other hosts' objects (fuzzed by tests/fuzz/fuzz-host-refs.c and
 * fuzz-condemnation.c).
 *
 * Invariants:
 *  1. What parses has exactly the size its counts say, its checksum
 *     matches, its entries are strictly ascending and valid (host names,
 *     no entry of the writer, ids and ack epochs not 0): a collector uses
 *     any entry without further checks.
 *  2. One encoding per object: reserved fields and name padding are zero.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dedup/le-internal.h"
#include "dedup/refs.h"
#include "dedup/segment.h"

_Static_assert(DEDUP_REFS_NAME_MAX == DEDUP_SEGMENT_NAME_MAX, "refs and condemnations are named by dedup_epoch_name()");

static const uint8_t refs_magic[8] = { 'F', 'R', 'T', 'R', 'E', 'F', 'S', '1' };
static const uint8_t condemn_magic[8] = { 'F', 'R', 'T', 'C', 'O', 'N', 'D', '1' };

#define R_EPOCH 16
#define R_WRITTEN 24
#define R_LEASE 32
#define R_ACKS 40
#define R_REFS 44
#define R_HOST 48
_Static_assert(R_HOST + DEDUP_SEGMENT_HOST_MAX == DEDUP_REFS_HEADER_SIZE, "header layout");
#define K_EPOCH 16
#define K_COUNT 24
#define K_HOST 32
_Static_assert(K_HOST + DEDUP_SEGMENT_HOST_MAX == DEDUP_CONDEMN_HEADER_SIZE, "header layout");

/* Invariant 2: the name, then only NULs. */
static int host_get(const uint8_t *p, char ret[static DEDUP_SEGMENT_HOST_MAX + 1]) {
	size_t n = strnlen((const char *) p, DEDUP_SEGMENT_HOST_MAX);
	for (size_t i = n; i < DEDUP_SEGMENT_HOST_MAX; i++)
		if (p[i] != 0)
			return -EBADMSG;
	memcpy(ret, p, n);
	ret[n] = '\0';
	return dedup_host_name_is_valid(ret) ? 0 : -EBADMSG;
}

static void host_put(uint8_t *p, const char *host) {
	memcpy(p, host, strlen(host));
}

static int entry_compare(const DedupRefsEntry *a, const DedupRefsEntry *b) {
	int c = strcmp(a->host, b->host);
	if (c != 0)
		return c;
	return a->value < b->value ? -1 : a->value > b->value;
}

static int entry_qsort(const void *a, const void *b) {
	return entry_compare(a, b);
}

size_t dedup_refs_entries_sort(DedupRefsEntry *entries, size_t n) {
	if (n == 0)
		return 0;
	qsort(entries, n, sizeof(*entries), entry_qsort);
	size_t k = 1;
	for (size_t i = 1; i < n; i++)
		if (entry_compare(entries + i, entries + k - 1) != 0)
			entries[k++] = entries[i];
	return k;
}

/* Invariant 1 for entry e after prev (NULL for the first); acks: one per host. */
static bool entry_is_valid(const char *self, const DedupRefsEntry *prev, const DedupRefsEntry *e, bool ack) {
	if (!dedup_host_name_is_valid(e->host) || strcmp(e->host, self) == 0 || e->value == 0)
		return false;
	if (!prev)
		return true;
	return ack ? strcmp(prev->host, e->host) < 0 : entry_compare(prev, e) < 0;
}

static void entry_put(uint8_t *p, const DedupRefsEntry *e) {
	host_put(p, e->host);
	le64_put(p + DEDUP_SEGMENT_HOST_MAX, e->value);
}

static int entry_get(const uint8_t *p, DedupRefsEntry *ret) {
	*ret = (DedupRefsEntry) {};
	ret->value = le64_get(p + DEDUP_SEGMENT_HOST_MAX);
	return host_get(p, ret->host);
}

int dedup_refs_format(const DedupRefsHeader *h, const DedupRefsEntry *acks, const DedupRefsEntry *refs, uint8_t **ret) {
	if (!dedup_host_name_is_valid(h->host) || h->n_acks > DEDUP_REFS_ACKS_MAX || h->n_refs > DEDUP_REFS_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < h->n_acks; i++)
		if (!entry_is_valid(h->host, i > 0 ? acks + i - 1 : NULL, acks + i, true))
			return -EINVAL;
	for (uint32_t i = 0; i < h->n_refs; i++)
		if (!entry_is_valid(h->host, i > 0 ? refs + i - 1 : NULL, refs + i, false))
			return -EINVAL;

	size_t size = (size_t) dedup_refs_size(h->n_acks, h->n_refs);
	uint8_t *buf = calloc(1, size);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, refs_magic, sizeof(refs_magic));
	le32_put(buf + 8, DEDUP_REFS_VERSION);
	le64_put(buf + R_EPOCH, h->epoch);
	le64_put(buf + R_WRITTEN, h->written);
	le64_put(buf + R_LEASE, h->lease_until);
	le32_put(buf + R_ACKS, h->n_acks);
	le32_put(buf + R_REFS, h->n_refs);
	host_put(buf + R_HOST, h->host);
	uint8_t *p = buf + DEDUP_REFS_HEADER_SIZE;
	for (uint32_t i = 0; i < h->n_acks; i++, p += DEDUP_REFS_ENTRY_SIZE)
		entry_put(p, acks + i);
	for (uint32_t i = 0; i < h->n_refs; i++, p += DEDUP_REFS_ENTRY_SIZE)
		entry_put(p, refs + i);
	le64_put(p, XXH3_64bits(buf, size - DEDUP_REFS_TRAILER_SIZE));
	*ret = buf;
	return 0;
}

int dedup_refs_parse(const void *buf, size_t len, DedupRefsHeader *ret) {
	const uint8_t *p = buf;
	DedupRefsHeader h = {};

	if (len < dedup_refs_size(0, 0) || memcmp(p, refs_magic, sizeof(refs_magic)) != 0 ||
	    le32_get(p + 8) != DEDUP_REFS_VERSION || le32_get(p + 12) != 0)
		return -EBADMSG;
	h.epoch = le64_get(p + R_EPOCH);
	h.written = le64_get(p + R_WRITTEN);
	h.lease_until = le64_get(p + R_LEASE);
	h.n_acks = le32_get(p + R_ACKS);
	h.n_refs = le32_get(p + R_REFS);
	if (h.n_acks > DEDUP_REFS_ACKS_MAX || h.n_refs > DEDUP_REFS_MAX || dedup_refs_size(h.n_acks, h.n_refs) != len)
		return -EBADMSG;
	if (XXH3_64bits(p, len - DEDUP_REFS_TRAILER_SIZE) != le64_get(p + len - DEDUP_REFS_TRAILER_SIZE))
		return -EBADMSG;
	if (host_get(p + R_HOST, h.host) < 0)
		return -EBADMSG;

	DedupRefsEntry prev, e;
	const uint8_t *q = p + DEDUP_REFS_HEADER_SIZE;
	for (uint32_t i = 0; i < h.n_acks; i++, q += DEDUP_REFS_ENTRY_SIZE) {
		if (entry_get(q, &e) < 0 || !entry_is_valid(h.host, i > 0 ? &prev : NULL, &e, true))
			return -EBADMSG;
		prev = e;
	}
	for (uint32_t i = 0; i < h.n_refs; i++, q += DEDUP_REFS_ENTRY_SIZE) {
		if (entry_get(q, &e) < 0 || !entry_is_valid(h.host, i > 0 ? &prev : NULL, &e, false))
			return -EBADMSG;
		prev = e;
	}
	*ret = h;
	return 0;
}

void dedup_refs_ack_get(const void *buf, uint64_t i, DedupRefsEntry *ret) {
	(void) entry_get((const uint8_t *) buf + DEDUP_REFS_HEADER_SIZE + i * DEDUP_REFS_ENTRY_SIZE, ret);
}

void dedup_refs_ref_get(const void *buf, const DedupRefsHeader *h, uint64_t i, DedupRefsEntry *ret) {
	(void) entry_get((const uint8_t *) buf + DEDUP_REFS_HEADER_SIZE + (h->n_acks + i) * DEDUP_REFS_ENTRY_SIZE, ret);
}

int dedup_condemn_format(const DedupCondemnHeader *h, const uint64_t *ids, size_t n, uint8_t **ret) {
	if (!dedup_host_name_is_valid(h->host) || n == 0 || n > DEDUP_REFS_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (ids[i] == 0 || (i > 0 && ids[i - 1] >= ids[i]))
			return -EINVAL;
	size_t size = (size_t) dedup_condemn_size(n);
	uint8_t *buf = calloc(1, size);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, condemn_magic, sizeof(condemn_magic));
	le32_put(buf + 8, DEDUP_REFS_VERSION);
	le64_put(buf + K_EPOCH, h->epoch);
	le64_put(buf + K_COUNT, n);
	host_put(buf + K_HOST, h->host);
	for (size_t i = 0; i < n; i++)
		le64_put(buf + DEDUP_CONDEMN_HEADER_SIZE + i * 8, ids[i]);
	le64_put(buf + size - DEDUP_REFS_TRAILER_SIZE, XXH3_64bits(buf, size - DEDUP_REFS_TRAILER_SIZE));
	*ret = buf;
	return 0;
}

int dedup_condemn_parse(const void *buf, size_t len, DedupCondemnHeader *ret) {
	const uint8_t *p = buf;
	DedupCondemnHeader h = {};

	if (len < dedup_condemn_size(1) || memcmp(p, condemn_magic, sizeof(condemn_magic)) != 0 ||
	    le32_get(p + 8) != DEDUP_REFS_VERSION || le32_get(p + 12) != 0)
		return -EBADMSG;
	h.epoch = le64_get(p + K_EPOCH);
	h.count = le64_get(p + K_COUNT);
	if (h.count == 0 || h.count > DEDUP_REFS_MAX || dedup_condemn_size(h.count) != len)
		return -EBADMSG;
	if (XXH3_64bits(p, len - DEDUP_REFS_TRAILER_SIZE) != le64_get(p + len - DEDUP_REFS_TRAILER_SIZE))
		return -EBADMSG;
	if (host_get(p + K_HOST, h.host) < 0)
		return -EBADMSG;
	uint64_t prev = 0;
	for (uint64_t i = 0; i < h.count; i++) {
		uint64_t id = dedup_condemn_get(buf, i);
		if (id <= prev)
			return -EBADMSG;
		prev = id;
	}
	*ret = h;
	return 0;
}

uint64_t dedup_condemn_get(const void *buf, uint64_t i) {
	return le64_get((const uint8_t *) buf + DEDUP_CONDEMN_HEADER_SIZE + i * 8);
}

char *dedup_refs_name(uint64_t epoch, char buf[static DEDUP_REFS_NAME_MAX]) {
	return dedup_epoch_name('r', "ftr", epoch, buf);
}

char *dedup_condemn_name(uint64_t epoch, char buf[static DEDUP_REFS_NAME_MAX]) {
	return dedup_epoch_name('k', "ftk", epoch, buf);
}

int dedup_refs_name_parse(const char *name, uint64_t *ret) {
	return dedup_epoch_name_parse(name, 'r', "ftr", ret);
}

int dedup_condemn_name_parse(const char *name, uint64_t *ret) {
	return dedup_epoch_name_parse(name, 'k', "ftk", ret);
}

char *dedup_condemn_merged_name(uint64_t epoch, char buf[static DEDUP_REFS_NAME_MAX]) {
	return dedup_epoch_name('k', "ftm", epoch, buf);
}

int dedup_condemn_merged_name_parse(const char *name, uint64_t *ret) {
	return dedup_epoch_name_parse(name, 'k', "ftm", ret);
}
