/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Index segments of a shared tier (docs/SHARED.md, "Global dedup";
 * docs/FORMAT.md, "Index segment"): what one host publishes of the chunks
 * it committed there, so that other hosts reference them instead of
 * storing them again.  A segment is immutable once named
 * ("i/EPOCH.fti" in the host's own directory of the tier).
 *
 * Layout, little endian:
 *
 *   header (96 bytes)
 *     magic "FRTSEGM1" | version u32 (1, 2: sealed) | flags u32 (bit 0: keyed ids)
 *     epoch u64 | count u64 | keys[16]: dedup_segment_keys() of the writer
 *     host[32]: the writer's host name, NUL-padded |
 *     version 1: reserved u64 (0) | reserved u64 (0)
 *     version 2: nonce[12] | reserved u32 (0)
 *   count entries (64 bytes each), strictly ascending by id
 *     id[32] | container u64 | offset u64 | region_size u32 |
 *     region_offset u32 | plain_size u32 | frame_size u32
 *     (version 2: AES-256-GCM ciphertext of them, the header as associated data)
 *   version 2: tag[16]
 *   checksum u64: XXH3-64 of everything before it
 *
 * A store that seals its regions seals its segments (version 2), under the
 * same content subkey: every entry names a chunk's keyed id, region, start
 * and length, which would give back the region tables that sealed regions
 * keep out of view (docs/SECURITY.md).  Hosts that may use each other's
 * chunks share that subkey already (the segment's keys fingerprint).
 *
 * The parser checks everything it can without reading a container: exact
 * length, magic, version, flags, the checksum, a valid host name, strict
 * order, and every entry's fields within the limits of a region
 * (dedup/region.h) or frame.  What it cannot check (that the container
 * holds that chunk there) is checked by every read of a foreign chunk:
 * its id is verified after decompression, so a segment that lies gives
 * EIO, never wrong bytes.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/fingerprint.h"

#define DEDUP_SEGMENT_HEADER_SIZE 96u
#define DEDUP_SEGMENT_ENTRY_SIZE 64u
#define DEDUP_SEGMENT_TRAILER_SIZE 8u
#define DEDUP_SEGMENT_VERSION 1u
#define DEDUP_SEGMENT_VERSION_SEALED 2u
#define DEDUP_SEGMENT_NONCE_SIZE 12u
#define DEDUP_SEGMENT_TAG_SIZE 16u
#define DEDUP_SEGMENT_FLAG_KEYED_IDS 0x1u
#define DEDUP_SEGMENT_KEYS_SIZE 16u
#define DEDUP_SEGMENT_HOST_MAX 32u
/* Entries of one segment at most (64 MiB of segment). */
#define DEDUP_SEGMENT_ENTRIES_MAX (UINT64_C(1) << 20)
/* "i/" + 16 hex digits + ".fti" (+ ".tmp" while written) */
#define DEDUP_SEGMENT_NAME_MAX 32u

typedef struct DedupSegmentEntry {
	DedupChunkId id;
	uint64_t container; /* the container's id in its host's catalog (and in its name) */
	uint64_t offset;    /* of the region (or frame) in it */
	uint32_t region_size; /* 0: a version 1 frame of frame_size bytes */
	uint32_t region_offset;
	uint32_t plain_size;
	uint32_t frame_size;
} DedupSegmentEntry;

typedef struct DedupSegmentHeader {
	uint32_t flags;
	uint64_t epoch;
	uint64_t count;
	uint8_t keys[DEDUP_SEGMENT_KEYS_SIZE];
	char host[DEDUP_SEGMENT_HOST_MAX + 1];
	bool sealed;          /* version 2: the entries are ciphertext until dedup_segment_open() */
} DedupSegmentHeader;

/* A host name on a shared tier, as common/config.h's config_host_name_is_valid() (not linked into dedup/). */
bool dedup_host_name_is_valid(const char *host);

/* The stored size of a segment of count entries, sealed or not. */
static inline uint64_t dedup_segment_size(uint64_t count, bool sealed) {
	return DEDUP_SEGMENT_HEADER_SIZE + count * DEDUP_SEGMENT_ENTRY_SIZE + (sealed ? DEDUP_SEGMENT_TAG_SIZE : 0) +
	       DEDUP_SEGMENT_TRAILER_SIZE;
}

/*
 * A fingerprint of the keys a host's ids and regions are made under (the
 * id subkey and the content subkey, each may be NULL: plain SHA-256 ids,
 * no sealed regions).  Hosts whose fingerprints differ cannot use each
 * other's chunks: their ids differ, or their regions do not open.  It is a
 * one-way function of subkeys that are themselves HKDF outputs, so it
 * reveals nothing of them.  Returns: 0 or -EIO (OpenSSL).
 */
int dedup_segment_keys(const uint8_t *id_key, const uint8_t *content_key, uint8_t ret[static DEDUP_SEGMENT_KEYS_SIZE]);

/* Sorts entries by id and drops repeated ids (the first kept).  Returns the new count.  Can't fail. */
size_t dedup_segment_entries_sort(DedupSegmentEntry *entries, size_t n);

/*
 * Encodes a segment of h (count set from n; h->sealed ignored) and
 * entries[0, n) (sorted, distinct: dedup_segment_entries_sort()) into a
 * new buffer *ret of dedup_segment_size(n, seal_key != NULL) bytes (free
 * it), sealed under seal_key (DEDUP_KEY_SIZE bytes, a random nonce) if not
 * NULL.  Returns: 0, -EINVAL (unsorted, too many, a bad host name or
 * field), -ENOMEM, -EIO (OpenSSL).
 */
int dedup_segment_format(const DedupSegmentHeader *h, const DedupSegmentEntry *entries, size_t n,
			 const uint8_t *seal_key, uint8_t **ret);

/*
 * Parses the header of buf[0, len) and checks the whole segment (see
 * above), a sealed one but for its entries.  Returns: 0 and *ret, or
 * -EBADMSG for anything else.  The entries of a segment not sealed are
 * then read with dedup_segment_entry_get(); a sealed one is opened first.
 */
int dedup_segment_parse(const void *buf, size_t len, DedupSegmentHeader *ret);

/*
 * Opens sealed segment buf[0, len), which passed dedup_segment_parse(),
 * under key (DEDUP_KEY_SIZE bytes): checks its tag, decrypts its entries
 * in place and checks them as a plain segment's.  Returns: 0 (entries
 * readable with dedup_segment_entry_get()), or -EBADMSG (another key, or
 * a byte changed: buf's entries are then garbage).
 */
int dedup_segment_open(void *buf, size_t len, const uint8_t *key);

/* Entry i of a segment that passed dedup_segment_parse() (and _open(), if sealed; i < count).  Can't fail. */
void dedup_segment_entry_get(const void *buf, uint64_t i, DedupSegmentEntry *ret);

/*
 * The name of an epoch's object in directory DIR with extension EXT (3
 * letters), "DIR/%016" PRIx64 ".EXT", as index segments, reference
 * publications and condemnations are named; returns buf.
 */
char *dedup_epoch_name(char dir, const char *ext, uint64_t epoch, char buf[static DEDUP_SEGMENT_NAME_MAX]);
/* The epoch of such a name ("DIR/" optional), or -EINVAL. */
int dedup_epoch_name_parse(const char *name, char dir, const char *ext, uint64_t *ret);

/* The name of the segment of epoch: "i/%016" PRIx64 ".fti"; returns buf. */
char *dedup_segment_name(uint64_t epoch, char buf[static DEDUP_SEGMENT_NAME_MAX]);
/* The epoch of a segment name as dedup_segment_name() makes them ("i/" optional), or -EINVAL. */
int dedup_segment_name_parse(const char *name, uint64_t *ret);
