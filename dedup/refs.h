/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The two objects of collection across hosts on a shared tier
 * (docs/SHARED.md, "Safe collection"; docs/FORMAT.md): a host's reference
 * publication "r/EPOCH.ftr" (the other hosts' containers it references,
 * and the condemnations of each other host it had loaded) and its
 * condemnations "k/EPOCH.ftk" (its own containers it will delete once
 * every host acknowledged them).  Both are immutable once named, read by
 * other hosts from a filer nobody vouches for.
 *
 * Reference publication, little endian:
 *   header (80 bytes)
 *     magic "FRTREFS1" | version u32 (1) | reserved u32 (0) | epoch u64 |
 *     written u64 (seconds since the epoch) | lease_until u64 |
 *     n_acks u32 | n_refs u32 | host[32] (the writer, NUL-padded)
 *   n_acks acks (40 bytes each), strictly ascending by host:
 *     host[32] | epoch u64 (every condemnation of that host up to it loaded)
 *   n_refs refs (40 bytes each), strictly ascending by (host, container):
 *     host[32] | container u64 (its id on that host)
 *   checksum u64: XXH3-64 of everything before it
 *
 * Condemnation, little endian:
 *   header (64 bytes)
 *     magic "FRTCOND1" | version u32 (1) | reserved u32 (0) | epoch u64 |
 *     count u64 | host[32]
 *   count container ids u64, strictly ascending, none 0
 *   checksum u64: XXH3-64 of everything before it
 *
 * Merged condemnation "k/EPOCH.ftm": a condemnation (the same format,
 * epoch EPOCH) whose ids are the union of every condemnation of its host
 * from epoch 1 to EPOCH.  The host writes one once DEDUP_CONDEMN_MERGE_AT
 * condemnations follow its newest merged one, and only then removes them
 * (docs/SHARED.md, "Merged condemnations").
 *
 * The parsers check exact length, magic, version, reserved fields, the
 * checksum, valid host names with NUL padding only, strict order, no
 * entry naming the writer itself, and no ack of epoch 0: whatever parses
 * formats back to the same bytes.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/segment.h"

#define DEDUP_REFS_HEADER_SIZE 80u
#define DEDUP_REFS_ENTRY_SIZE 40u
#define DEDUP_CONDEMN_HEADER_SIZE 64u
#define DEDUP_REFS_TRAILER_SIZE 8u
#define DEDUP_REFS_VERSION 1u
/* Acks of one publication at most: hosts on one tier. */
#define DEDUP_REFS_ACKS_MAX 4096u
/* Referenced containers of one publication, and condemned of one condemnation, at most. */
#define DEDUP_REFS_MAX (UINT32_C(1) << 24)
/* "r/" + 16 hex digits + ".ftr" (+ ".tmp" while written) */
#define DEDUP_REFS_NAME_MAX 32u

typedef struct DedupRefsEntry {
	char host[DEDUP_SEGMENT_HOST_MAX + 1];
	uint64_t value; /* acks: a condemnation epoch; refs: a container id on host */
} DedupRefsEntry;

typedef struct DedupRefsHeader {
	char host[DEDUP_SEGMENT_HOST_MAX + 1];
	uint64_t epoch;
	uint64_t written, lease_until;
	uint32_t n_acks, n_refs;
} DedupRefsHeader;

static inline uint64_t dedup_refs_size(uint64_t n_acks, uint64_t n_refs) {
	return DEDUP_REFS_HEADER_SIZE + (n_acks + n_refs) * DEDUP_REFS_ENTRY_SIZE + DEDUP_REFS_TRAILER_SIZE;
}

/* Sorts entries by (host, value) and drops repeats.  Returns the new count.  Can't fail. */
size_t dedup_refs_entries_sort(DedupRefsEntry *entries, size_t n);

/*
 * Encodes a publication of h (n_acks, n_refs as given) into a new buffer
 * *ret of dedup_refs_size() bytes.  acks: sorted, one per host, epochs > 0;
 * refs: sorted, distinct; no entry of h->host.  Returns 0, -EINVAL, -ENOMEM.
 */
int dedup_refs_format(const DedupRefsHeader *h, const DedupRefsEntry *acks, const DedupRefsEntry *refs, uint8_t **ret);
/* Checks a whole publication (see above): 0 and *ret, or -EBADMSG. */
int dedup_refs_parse(const void *buf, size_t len, DedupRefsHeader *ret);
/* Ack i (< n_acks) and ref i (< n_refs) of a publication that parsed.  Can't fail. */
void dedup_refs_ack_get(const void *buf, uint64_t i, DedupRefsEntry *ret);
void dedup_refs_ref_get(const void *buf, const DedupRefsHeader *h, uint64_t i, DedupRefsEntry *ret);

typedef struct DedupCondemnHeader {
	char host[DEDUP_SEGMENT_HOST_MAX + 1];
	uint64_t epoch;
	uint64_t count;
} DedupCondemnHeader;

static inline uint64_t dedup_condemn_size(uint64_t count) {
	return DEDUP_CONDEMN_HEADER_SIZE + count * 8 + DEDUP_REFS_TRAILER_SIZE;
}

/* Encodes a condemnation of h (count from n) and ids[0, n) (ascending, none 0, n >= 1).  0, -EINVAL, -ENOMEM. */
int dedup_condemn_format(const DedupCondemnHeader *h, const uint64_t *ids, size_t n, uint8_t **ret);
/* Checks a whole condemnation: 0 and *ret, or -EBADMSG. */
int dedup_condemn_parse(const void *buf, size_t len, DedupCondemnHeader *ret);
/* Container i (< count) of a condemnation that parsed. */
uint64_t dedup_condemn_get(const void *buf, uint64_t i);

/* Condemnations past the newest merged one that make the next collection merge them. */
#define DEDUP_CONDEMN_MERGE_AT 16u

/* "r/%016" PRIx64 ".ftr", "k/%016" PRIx64 ".ftk" and "k/%016" PRIx64 ".ftm"; return buf. */
char *dedup_refs_name(uint64_t epoch, char buf[static DEDUP_REFS_NAME_MAX]);
char *dedup_condemn_name(uint64_t epoch, char buf[static DEDUP_REFS_NAME_MAX]);
char *dedup_condemn_merged_name(uint64_t epoch, char buf[static DEDUP_REFS_NAME_MAX]);
/* The epoch of such a name (the directory part optional), or -EINVAL. */
int dedup_refs_name_parse(const char *name, uint64_t *ret);
int dedup_condemn_name_parse(const char *name, uint64_t *ret);
int dedup_condemn_merged_name_parse(const char *name, uint64_t *ret);
