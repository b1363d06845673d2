/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Containers: the objects chunks are stored in on a tier.  A container is a
 * 64-byte header followed by stored units back to back: compression
 * regions (dedup/region.h) in version 2, which fratier writes, or chunk
 * frames (dedup/frame.h) in version 1, which it wrote before regions and
 * reads forever.  When the store closes a container for appends ("seals"
 * it) it appends an index trailer (where each unit is) and a 64-byte
 * footer, so a sealed container describes itself and a tier can be rebuilt
 * from its containers alone.  Layout: docs/FORMAT.md, "Containers".
 *
 *   0                64                                T               end
 *   | header (64)    | unit | unit | ... | unit        | index | footer(64)|
 *                                                      ^ index_offset
 *
 * An unsealed container is header + units only; units are self-delimiting,
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
#include "dedup/region.h"

/* The version the store writes (regions); version 1 (chunk frames) is still read. */
#define DEDUP_CONTAINER_VERSION 2
#define DEDUP_CONTAINER_VERSION_FRAMES 1
#define DEDUP_CONTAINER_HEADER_SIZE 64u
#define DEDUP_CONTAINER_FOOTER_SIZE 64u
#define DEDUP_CONTAINER_INDEX_HEADER_SIZE 8u
/* Index entries: one per region in version 2, one per chunk frame in version 1. */
#define DEDUP_CONTAINER_INDEX_ENTRY_SIZE 24u
#define DEDUP_CONTAINER_INDEX_ENTRY_SIZE_FRAMES 48u
/* Most units one container may hold (a version 1 index is then 48 MiB). */
#define DEDUP_CONTAINER_FRAMES_MAX (1u << 20)
/* No container object is ever larger (4 GiB): a claim beyond it is corrupt. */
#define DEDUP_CONTAINER_SIZE_MAX (UINT64_C(1) << 32)
/* "c/xx/" + 16 hex digits + ".ftc" + NUL */
#define DEDUP_CONTAINER_NAME_MAX 32

typedef struct DedupContainerHeader {
	uint8_t version; /* DEDUP_CONTAINER_VERSION_FRAMES or DEDUP_CONTAINER_VERSION */
	uint64_t id;     /* the catalog's container id, >= 1 */
	uint32_t tier;
} DedupContainerHeader;

typedef struct DedupContainerFooter {
	uint8_t version;
	uint64_t id;
	uint64_t index_offset;   /* where the index starts: the end of the last unit */
	uint32_t count;          /* units (and index entries) */
	uint64_t index_checksum; /* XXH3-64 of the index (header and entries) */
} DedupContainerFooter;

/* One region of a version 2 container, as its index records it. */
typedef struct DedupContainerRegion {
	uint64_t offset;
	uint32_t size;       /* header, table and payload */
	uint32_t count;      /* chunks */
	uint32_t plain_size; /* their bytes */
} DedupContainerRegion;

/* One chunk of a container, as a walk finds it. */
typedef struct DedupContainerEntry {
	uint64_t offset;        /* where the chunk's frame or region starts */
	uint32_t frame_size;    /* bytes of that frame or region */
	uint32_t plain_size;    /* the chunk's length */
	DedupChunkId id;
	bool region;            /* in a region (version 2), not a frame of its own (version 1) */
	uint32_t region_offset; /* regions: where the chunk starts in the region's plain bytes */
	/*
	 * Not 0: the entry stands for a whole region of this many chunks whose
	 * table is sealed (version 4): id unknown (zero), plain_size the
	 * region's, region_offset 0.  Only its key opens it (dedup/region.h).
	 */
	uint32_t sealed_count;
} DedupContainerEntry;

/* Writes the object name of container id into buf: "c/<id & 0xff as 2 hex>/<id as 16 hex>.ftc". */
char *dedup_container_name(uint64_t id, char buf[static DEDUP_CONTAINER_NAME_MAX]);

/*
 * Parses an object name made by dedup_container_name() (exactly that form,
 * lowercase) back into its id.  Returns: 0, or -EINVAL for any other name.
 */
int dedup_container_name_parse(const char *name, uint64_t *ret_id);

/* Formats the header of a new (version 2) container id on tier into buf. Can't fail. */
void dedup_container_header_format(uint64_t id, uint32_t tier, uint8_t buf[static DEDUP_CONTAINER_HEADER_SIZE]);

/* Parses and validates the header (version 1 or 2) at the start of buf[0, len). */
int dedup_container_header_parse(const void *buf, size_t len, DedupContainerHeader *ret);

/* Bytes of the trailer (index + footer) of a version 2 container of n regions. */
static inline uint64_t dedup_container_trailer_size(uint64_t n) {
	return DEDUP_CONTAINER_INDEX_HEADER_SIZE + n * DEDUP_CONTAINER_INDEX_ENTRY_SIZE + DEDUP_CONTAINER_FOOTER_SIZE;
}

/*
 * Formats the trailer of version 2 container id whose regions end at
 * index_offset and are regions[0, n) (in offset order, back to back from
 * the header) into buf[0, size), which must hold
 * dedup_container_trailer_size(n) bytes.
 * Returns: 0, -EINVAL (regions not back to back, n too large), -ENOBUFS.
 */
int dedup_container_trailer_format(uint64_t id, uint64_t index_offset, const DedupContainerRegion *regions,
				   size_t n, void *buf, size_t size);

/* Parses and validates a footer (either version): buf[0, len) must be exactly its 64 bytes. */
int dedup_container_footer_parse(const void *buf, size_t len, DedupContainerFooter *ret);

typedef enum DedupContainerExpect {
	DEDUP_CONTAINER_ANY,      /* sealed if the trailer checks out, else unsealed */
	DEDUP_CONTAINER_SEALED,   /* must carry a valid trailer */
	DEDUP_CONTAINER_UNSEALED, /* header and units to the last byte, no trailer */
	_DEDUP_CONTAINER_EXPECT_MAX,
} DedupContainerExpect;

typedef struct DedupContainerInfo {
	DedupContainerHeader header;
	bool sealed;
	uint32_t count;      /* units: frames (version 1) or regions (version 2) */
	uint32_t chunks;     /* chunks in them */
	uint64_t frames_end; /* end of the last unit (the index offset when sealed) */
} DedupContainerInfo;

/*
 * Walks the complete container image buf[0, len): validates the header,
 * every unit (frame headers; regions' headers, checksums and tables), each
 * unit wholly inside the unit area, back to back, and, when sealed, the
 * footer, the index and that the index lists exactly the units found.
 * With a frame decoder (version 1) or a region decoder (version 2), every
 * unit is also decoded (payload checksum, decompression) and, with
 * verify, its chunks re-hashed against their ids.  cb (optional) is called
 * for every chunk in order, after the whole container has been validated;
 * its negative return stops the walk and is returned.  ret (optional) gets
 * what was found.  (!) A sealed region's table and payload are checked
 * only for structure: the walk has no key, and decoding one fails; a
 * region whose table is sealed gets one cb call (sealed_count).
 * Returns: 0, -EBADMSG, -EPROTONOSUPPORT, -ENOKEY (verify of the wrong
 * kind, or a sealed region given a decoder), -ENOMEM, or cb's error.
 */
int dedup_container_walk(const void *buf, size_t len, DedupContainerExpect expect, DedupFrameDecoder *frame_decoder,
			 DedupRegionDecoder *region_decoder, DedupHasher *verify,
			 int (*cb)(const DedupContainerEntry *e, void *userdata), void *userdata,
			 DedupContainerInfo *ret);

/*
 * The chunks of one unit found at the start of buf[0, len) in a container
 * of `version`, whose offset in the container is `offset`: calls cb for
 * each chunk, as dedup_container_walk() would (once for a region whose
 * table is sealed, see DedupContainerEntry.sealed_count).  The unit is checked first
 * (a frame's header; a region's header, checksum and table), nothing is
 * decompressed.  *ret_size gets the unit's length.
 * Returns: 0, -EBADMSG, -EPROTONOSUPPORT, or cb's error.
 */
int dedup_container_unit_parse(uint8_t version, uint64_t offset, const void *buf, size_t len,
			       int (*cb)(const DedupContainerEntry *e, void *userdata), void *userdata,
			       size_t *ret_size);
