/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Containers: the objects chunk frames are stored in on a tier.  A container
 * is a 64-byte header followed by chunk frames back to back; when the store
 * closes it for appends ("seals" it) it appends an index trailer (offset,
 * frame size, plain size and id of every frame) and a 64-byte footer, so a
 * sealed container describes itself without reading any payload, and a tier
 * can be rebuilt from its containers alone.  Layout: docs/FORMAT.md,
 * "Containers".
 *
 *   0                64                                T               end
 *   | header (64)    | frame | frame | ... | frame     | index | footer(64)|
 *                                                      ^ index_offset
 *
 * An unsealed container is header + frames only; frames are self-delimiting,
 * so it can still be walked.
 *
 * Parsers take (buf, len), check every field and do overflow-checked
 * arithmetic; errors: -EBADMSG (corrupt), -EPROTONOSUPPORT (a newer version).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/fingerprint.h"
#include "dedup/frame.h"

#define DEDUP_CONTAINER_VERSION 1
#define DEDUP_CONTAINER_HEADER_SIZE 64u
#define DEDUP_CONTAINER_FOOTER_SIZE 64u
#define DEDUP_CONTAINER_INDEX_HEADER_SIZE 8u
#define DEDUP_CONTAINER_INDEX_ENTRY_SIZE 48u
/* Most frames one container may hold (its index is then 48 MiB). */
#define DEDUP_CONTAINER_FRAMES_MAX (1u << 20)
/* No container object is ever larger (4 GiB): a claim beyond it is corrupt. */
#define DEDUP_CONTAINER_SIZE_MAX (UINT64_C(1) << 32)
/* "c/xx/" + 16 hex digits + ".ftc" + NUL */
#define DEDUP_CONTAINER_NAME_MAX 32

typedef struct DedupContainerHeader {
	uint64_t id;   /* the catalog's container id, >= 1 */
	uint32_t tier;
} DedupContainerHeader;

typedef struct DedupContainerFooter {
	uint64_t id;
	uint64_t index_offset;   /* where the index starts: the end of the last frame */
	uint32_t count;          /* frames (and index entries) */
	uint64_t index_checksum; /* XXH3-64 of the index (header and entries) */
} DedupContainerFooter;

/* One frame of a container, as its index records it. */
typedef struct DedupContainerEntry {
	uint64_t offset;
	uint32_t frame_size;
	uint32_t plain_size;
	DedupChunkId id;
} DedupContainerEntry;

/* Writes the object name of container id into buf: "c/<id & 0xff as 2 hex>/<id as 16 hex>.ftc". */
char *dedup_container_name(uint64_t id, char buf[static DEDUP_CONTAINER_NAME_MAX]);

/*
 * Parses an object name made by dedup_container_name() (exactly that form,
 * lowercase) back into its id.  Returns: 0, or -EINVAL for any other name.
 */
int dedup_container_name_parse(const char *name, uint64_t *ret_id);

/* Formats the header of container id on tier into buf. Can't fail. */
void dedup_container_header_format(uint64_t id, uint32_t tier, uint8_t buf[static DEDUP_CONTAINER_HEADER_SIZE]);

/* Parses and validates the header at the start of buf[0, len). */
int dedup_container_header_parse(const void *buf, size_t len, DedupContainerHeader *ret);

/* Bytes of the trailer (index + footer) of a container of n frames. */
static inline uint64_t dedup_container_trailer_size(uint64_t n) {
	return DEDUP_CONTAINER_INDEX_HEADER_SIZE + n * DEDUP_CONTAINER_INDEX_ENTRY_SIZE + DEDUP_CONTAINER_FOOTER_SIZE;
}

/*
 * Formats the trailer of container id whose frames end at index_offset and
 * are entries[0, n) (in offset order, back to back from the header) into
 * buf[0, size), which must hold dedup_container_trailer_size(n) bytes.
 * Returns: 0, -EINVAL (entries not back to back, n too large), -ENOBUFS.
 */
int dedup_container_trailer_format(uint64_t id, uint64_t index_offset, const DedupContainerEntry *entries,
				   size_t n, void *buf, size_t size);

/* Parses and validates a footer: buf[0, len) must be exactly its 64 bytes. */
int dedup_container_footer_parse(const void *buf, size_t len, DedupContainerFooter *ret);

typedef enum DedupContainerExpect {
	DEDUP_CONTAINER_ANY,      /* sealed if the trailer checks out, else unsealed */
	DEDUP_CONTAINER_SEALED,   /* must carry a valid trailer */
	DEDUP_CONTAINER_UNSEALED, /* header and frames to the last byte, no trailer */
	_DEDUP_CONTAINER_EXPECT_MAX,
} DedupContainerExpect;

typedef struct DedupContainerInfo {
	DedupContainerHeader header;
	bool sealed;
	uint32_t count;      /* frames */
	uint64_t frames_end; /* end of the last frame (the index offset when sealed) */
} DedupContainerInfo;

/*
 * Walks the complete container image buf[0, len): validates the header, every
 * frame header (each frame wholly inside the frame area, back to back) and,
 * when sealed, the footer, the index and that the index lists exactly the
 * frames found.  With a decoder, every frame is also decoded (payload
 * checksum, decompression) and, with verify, re-hashed against its id.  cb
 * (optional) is called for every frame in order, after the whole container
 * has been validated; its negative return stops the walk and is returned.
 * ret (optional) gets what was found.
 * Returns: 0, -EBADMSG, -EPROTONOSUPPORT, -ENOKEY (verify of the wrong kind),
 * -ENOMEM, or cb's error.
 */
int dedup_container_walk(const void *buf, size_t len, DedupContainerExpect expect, DedupFrameDecoder *decoder,
			 DedupHasher *verify, int (*cb)(const DedupContainerEntry *e, void *userdata), void *userdata,
			 DedupContainerInfo *ret);
