/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Container format: header, trailer (index + footer), names, and a walker
 * that validates a whole container image, of either version: 2 (regions,
 * what the store writes) or 1 (chunk frames, read forever).  Format:
 * docs/FORMAT.md.
 *
 * Invariants:
 *  1. Nothing is interpreted before its magic, version and checksum pass;
 *     reserved bytes must be zero, so a future version can use them only
 *     behind a new version number.
 *  2. Every offset and size read from the bytes is checked against len with
 *     overflow-checked arithmetic before it is used.
 *  3. A sealed container's index must list exactly the units a walk from
 *     the header finds, in order: the trailer can be trusted as an index of
 *     the container only because it is proven against the units.
 *  4. The header, the footer and every unit of one container agree on the
 *     version: a version 1 container holds frames only, a version 2 one
 *     regions only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/macros.h"
#include "dedup/container.h"
#include "dedup/le-internal.h"
#include "dedup/region.h"

static const uint8_t header_magic[4] = { 0x89, 'F', 'C', 'H' };
static const uint8_t index_magic[4] = { 0x89, 'F', 'C', 'I' };
static const uint8_t footer_magic[4] = { 0x89, 'F', 'C', 'F' };

/* Header and footer offsets (docs/FORMAT.md). */
enum {
	H_MAGIC = 0,
	H_VERSION = 4,
	H_ID = 8,
	H_TIER = 16,
	H_RESERVED = 20,
	H_CHECKSUM = 56,

	I_MAGIC = 0,
	I_COUNT = 4,

	/* Version 1 index entries (one per frame). */
	E_OFFSET = 0,
	E_FRAME_SIZE = 8,
	E_PLAIN_SIZE = 12,
	E_ID = 16,

	/* Version 2 index entries (one per region). */
	R_OFFSET = 0,
	R_SIZE = 8,
	R_COUNT = 12,
	R_PLAIN_SIZE = 16,
	R_RESERVED = 20,

	F_MAGIC = 0,
	F_VERSION = 4,
	F_ID = 8,
	F_INDEX_OFFSET = 16,
	F_COUNT = 24,
	F_RESERVED1 = 28,
	F_INDEX_CHECKSUM = 32,
	F_RESERVED2 = 40,
	F_CHECKSUM = 56,
};
_Static_assert(E_ID + DEDUP_CHUNK_ID_SIZE == DEDUP_CONTAINER_INDEX_ENTRY_SIZE_FRAMES, "index entry layout");
_Static_assert(R_RESERVED + 4 == DEDUP_CONTAINER_INDEX_ENTRY_SIZE, "index entry layout");
_Static_assert(H_CHECKSUM + 8 == DEDUP_CONTAINER_HEADER_SIZE, "header layout");
_Static_assert(F_CHECKSUM + 8 == DEDUP_CONTAINER_FOOTER_SIZE, "footer layout");

char *dedup_container_name(uint64_t id, char buf[static DEDUP_CONTAINER_NAME_MAX]) {
	snprintf(buf, DEDUP_CONTAINER_NAME_MAX, "c/%02x/%016llx.ftc", (unsigned) (id & 0xff),
		 (unsigned long long) id);
	return buf;
}

static int hex_digit(char c) {
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int dedup_container_name_parse(const char *name, uint64_t *ret_id) {
	/* "c/xx/" 16 hex ".ftc" */
	if (strnlen(name, DEDUP_CONTAINER_NAME_MAX) != 25 || memcmp(name, "c/", 2) != 0 || name[4] != '/' ||
	    memcmp(name + 21, ".ftc", 4) != 0)
		return -EINVAL;
	uint64_t id = 0;
	for (size_t i = 5; i < 21; i++) {
		int d = hex_digit(name[i]);
		if (d < 0)
			return -EINVAL;
		id = id << 4 | (uint64_t) d;
	}
	int hi = hex_digit(name[2]), lo = hex_digit(name[3]);
	if (hi < 0 || lo < 0 || (uint64_t) (hi << 4 | lo) != (id & 0xff))
		return -EINVAL;
	*ret_id = id;
	return 0;
}

void dedup_container_header_format(uint64_t id, uint32_t tier, uint8_t buf[static DEDUP_CONTAINER_HEADER_SIZE]) {
	memset(buf, 0, DEDUP_CONTAINER_HEADER_SIZE);
	memcpy(buf + H_MAGIC, header_magic, sizeof(header_magic));
	buf[H_VERSION] = DEDUP_CONTAINER_VERSION;
	le64_put(buf + H_ID, id);
	le32_put(buf + H_TIER, tier);
	le64_put(buf + H_CHECKSUM, XXH3_64bits(buf, H_CHECKSUM));
}

/* Magic, then version (0 corrupt, newer unsupported), as for frames. */
static int check_magic_version(const uint8_t *p, const uint8_t magic[static 4]) {
	if (memcmp(p, magic, 4) != 0)
		return -EBADMSG;
	if (p[4] == 0)
		return -EBADMSG;
	if (p[4] > DEDUP_CONTAINER_VERSION)
		return -EPROTONOSUPPORT;
	return 0;
}

int dedup_container_header_parse(const void *buf, size_t len, DedupContainerHeader *ret) {
	const uint8_t *p = buf;
	int r;

	if (!p || len < DEDUP_CONTAINER_HEADER_SIZE)
		return -EBADMSG;
	r = check_magic_version(p + H_MAGIC, header_magic);
	if (r < 0)
		return r;
	if (XXH3_64bits(p, H_CHECKSUM) != le64_get(p + H_CHECKSUM))
		return -EBADMSG;
	if (!le_is_zero(p + 5, 3) || !le_is_zero(p + H_RESERVED, H_CHECKSUM - H_RESERVED))
		return -EBADMSG;
	uint64_t id = le64_get(p + H_ID);
	if (id == 0)
		return -EBADMSG;
	*ret = (DedupContainerHeader) { .version = p[H_VERSION], .id = id, .tier = le32_get(p + H_TIER) };
	return 0;
}

int dedup_container_trailer_format(uint64_t id, uint64_t index_offset, const DedupContainerRegion *regions,
				   size_t n, void *buf, size_t size) {
	if (n > DEDUP_CONTAINER_FRAMES_MAX || id == 0)
		return -EINVAL;
	uint64_t expect = DEDUP_CONTAINER_HEADER_SIZE;
	for (size_t i = 0; i < n; i++) {
		if (regions[i].offset != expect || regions[i].size <= DEDUP_REGION_HEADER_SIZE)
			return -EINVAL;
		expect += regions[i].size;
	}
	if (expect != index_offset)
		return -EINVAL;
	uint64_t need = dedup_container_trailer_size(n);
	if (size < need)
		return -ENOBUFS;

	uint8_t *p = buf;
	size_t index_size = DEDUP_CONTAINER_INDEX_HEADER_SIZE + n * DEDUP_CONTAINER_INDEX_ENTRY_SIZE;
	memcpy(p + I_MAGIC, index_magic, sizeof(index_magic));
	le32_put(p + I_COUNT, (uint32_t) n);
	for (size_t i = 0; i < n; i++) {
		uint8_t *e = p + DEDUP_CONTAINER_INDEX_HEADER_SIZE + i * DEDUP_CONTAINER_INDEX_ENTRY_SIZE;
		le64_put(e + R_OFFSET, regions[i].offset);
		le32_put(e + R_SIZE, regions[i].size);
		le32_put(e + R_COUNT, regions[i].count);
		le32_put(e + R_PLAIN_SIZE, regions[i].plain_size);
		le32_put(e + R_RESERVED, 0);
	}

	uint8_t *f = p + index_size;
	memset(f, 0, DEDUP_CONTAINER_FOOTER_SIZE);
	memcpy(f + F_MAGIC, footer_magic, sizeof(footer_magic));
	f[F_VERSION] = DEDUP_CONTAINER_VERSION;
	le64_put(f + F_ID, id);
	le64_put(f + F_INDEX_OFFSET, index_offset);
	le32_put(f + F_COUNT, (uint32_t) n);
	le64_put(f + F_INDEX_CHECKSUM, XXH3_64bits(p, index_size));
	le64_put(f + F_CHECKSUM, XXH3_64bits(f, F_CHECKSUM));
	return 0;
}

int dedup_container_footer_parse(const void *buf, size_t len, DedupContainerFooter *ret) {
	const uint8_t *p = buf;
	int r;

	if (!p || len != DEDUP_CONTAINER_FOOTER_SIZE)
		return -EBADMSG;
	r = check_magic_version(p + F_MAGIC, footer_magic);
	if (r < 0)
		return r;
	if (XXH3_64bits(p, F_CHECKSUM) != le64_get(p + F_CHECKSUM))
		return -EBADMSG;
	if (!le_is_zero(p + 5, 3) || !le_is_zero(p + F_RESERVED1, 4) ||
	    !le_is_zero(p + F_RESERVED2, F_CHECKSUM - F_RESERVED2))
		return -EBADMSG;

	DedupContainerFooter f = {
		.version = p[F_VERSION],
		.id = le64_get(p + F_ID),
		.index_offset = le64_get(p + F_INDEX_OFFSET),
		.count = le32_get(p + F_COUNT),
		.index_checksum = le64_get(p + F_INDEX_CHECKSUM),
	};
	if (f.id == 0 || f.count > DEDUP_CONTAINER_FRAMES_MAX || f.index_offset < DEDUP_CONTAINER_HEADER_SIZE ||
	    f.index_offset > DEDUP_CONTAINER_SIZE_MAX)
		return -EBADMSG;
	*ret = f;
	return 0;
}

static size_t index_entry_size(uint8_t version) {
	return version == DEDUP_CONTAINER_VERSION_FRAMES ? DEDUP_CONTAINER_INDEX_ENTRY_SIZE_FRAMES
							 : DEDUP_CONTAINER_INDEX_ENTRY_SIZE;
}

int dedup_container_unit_parse(uint8_t version, uint64_t offset, const void *buf, size_t len,
			       int (*cb)(const DedupContainerEntry *e, void *userdata), void *userdata,
			       size_t *ret_size) {
	int r;

	if (version == DEDUP_CONTAINER_VERSION_FRAMES) {
		DedupFrameHeader h;
		r = dedup_frame_header_parse(buf, len, &h);
		if (r < 0)
			return r;
		size_t size = dedup_frame_header_frame_size(&h);
		if (size > len)
			return -EBADMSG;
		if (cb) {
			DedupContainerEntry e = {
				.offset = offset,
				.frame_size = (uint32_t) size,
				.plain_size = h.plain_size,
				.id = h.id,
			};
			r = cb(&e, userdata);
			if (r < 0)
				return r;
		}
		*ret_size = size;
		return 0;
	}
	if (version != DEDUP_CONTAINER_VERSION)
		return -EBADMSG;

	DedupRegionHeader h;
	r = dedup_region_check(buf, len, &h);
	if (r < 0)
		return r;
	size_t size = dedup_region_header_region_size(&h);
	if (cb && dedup_region_header_table_is_sealed(&h)) {
		DedupContainerEntry e = {
			.offset = offset,
			.frame_size = (uint32_t) size,
			.plain_size = h.plain_size,
			.region = true,
			.sealed_count = h.count,
		};
		r = cb(&e, userdata);
		if (r < 0)
			return r;
		*ret_size = size;
		return 0;
	}
	uint32_t at = 0;
	for (size_t i = 0; cb && i < h.count; i++) {
		DedupContainerEntry e = {
			.offset = offset,
			.frame_size = (uint32_t) size,
			.region = true,
			.region_offset = at,
		};
		dedup_region_table_get(buf, i, &e.plain_size, &e.id);
		at += e.plain_size;
		r = cb(&e, userdata);
		if (r < 0)
			return r;
	}
	*ret_size = size;
	return 0;
}

typedef struct WalkState {
	uint8_t version;
	DedupFrameDecoder *frame_decoder;
	DedupRegionDecoder *region_decoder;
	DedupHasher *verify;
	uint8_t *scratch; /* decode output, grown to the largest unit seen */
	size_t scratch_size;
	uint32_t chunks;  /* counted by the last walk_units() */
} WalkState;

static void walk_state_done(WalkState *w) {
	free(w->scratch);
}

static int scratch_reserve(WalkState *w, size_t size) {
	if (w->scratch_size >= size)
		return 0;
	uint8_t *b = realloc(w->scratch, size);
	if (!b)
		return -ENOMEM;
	w->scratch = b;
	w->scratch_size = size;
	return 0;
}

/* Decodes the unit at p[0, size) when the walk was given a decoder for its kind. */
static int unit_decode(WalkState *w, const uint8_t *p, size_t size) {
	int r;

	if (w->version == DEDUP_CONTAINER_VERSION_FRAMES) {
		DedupFrameHeader h;
		if (!w->frame_decoder)
			return 0;
		r = dedup_frame_header_parse(p, size, &h);
		if (r >= 0)
			r = scratch_reserve(w, h.plain_size);
		if (r >= 0)
			r = dedup_frame_decode(w->frame_decoder, p, size, w->verify, w->scratch, w->scratch_size, NULL);
		return r;
	}
	DedupRegionHeader h;
	if (!w->region_decoder)
		return 0;
	r = dedup_region_header_parse(p, size, &h);
	if (r >= 0)
		r = scratch_reserve(w, h.plain_size);
	if (r >= 0)
		/* Without the key a sealed region cannot be decoded: -ENOKEY (a walk checks structure only). */
		r = dedup_region_decode(w->region_decoder, p, size, NULL, w->verify, w->scratch, w->scratch_size, NULL,
					NULL, 0, NULL);
	return r;
}

typedef struct Step {
	int (*unit)(uint64_t offset, uint32_t size, uint32_t chunks, uint32_t plain_size, size_t i, void *userdata);
	int (*chunk)(const DedupContainerEntry *e, void *userdata);
	void *userdata;
	uint32_t chunks;
	uint32_t plain_size;
} Step;

static int count_chunk(const DedupContainerEntry *e, void *userdata) {
	Step *st = userdata;
	st->chunks += e->sealed_count ? e->sealed_count : 1;
	st->plain_size += e->plain_size;
	return st->chunk ? st->chunk(e, st->userdata) : 0;
}

/*
 * Walks the units in p[start, end): each valid, wholly inside, back to back
 * to exactly end.  For each, calls unit (optional) and then chunk
 * (optional) per chunk.  Returns the unit count or a negative errno.
 */
static int walk_units(WalkState *w, const uint8_t *p, uint64_t start, uint64_t end,
		      int (*unit)(uint64_t offset, uint32_t size, uint32_t chunks, uint32_t plain_size, size_t i,
				  void *userdata),
		      int (*chunk)(const DedupContainerEntry *e, void *userdata), void *userdata) {
	uint64_t off = start;
	size_t i = 0;
	int r;

	w->chunks = 0;
	while (off < end) {
		Step st = { .chunk = chunk, .userdata = userdata };
		size_t size;
		if (i >= DEDUP_CONTAINER_FRAMES_MAX)
			return -EBADMSG;
		r = dedup_container_unit_parse(w->version, off, p + off, (size_t) (end - off), count_chunk, &st, &size);
		if (r < 0)
			return r;
		r = unit_decode(w, p + off, size);
		if (r < 0)
			return r;
		if (unit) {
			r = unit(off, (uint32_t) size, st.chunks, st.plain_size, i, userdata);
			if (r < 0)
				return r;
		}
		w->chunks += st.chunks;
		off += size;
		i++;
	}
	return (int) i;
}

typedef struct IndexCheck {
	uint8_t version;
	const uint8_t *index; /* entries of the index */
	uint32_t count;
	DedupChunkId id; /* version 1: the id of the frame's chunk */
} IndexCheck;

static int index_chunk(const DedupContainerEntry *e, void *userdata) {
	IndexCheck *c = userdata;
	c->id = e->id;
	return 0;
}

static int index_unit(uint64_t offset, uint32_t size, uint32_t chunks, uint32_t plain_size, size_t i,
		      void *userdata) {
	IndexCheck *c = userdata;
	if (i >= c->count)
		return -EBADMSG;
	const uint8_t *x = c->index + i * index_entry_size(c->version);
	if (c->version == DEDUP_CONTAINER_VERSION_FRAMES)
		return le64_get(x + E_OFFSET) == offset && le32_get(x + E_FRAME_SIZE) == size &&
				       le32_get(x + E_PLAIN_SIZE) == plain_size &&
				       memcmp(x + E_ID, c->id.bytes, DEDUP_CHUNK_ID_SIZE) == 0
			       ? 0
			       : -EBADMSG;
	return le64_get(x + R_OFFSET) == offset && le32_get(x + R_SIZE) == size && le32_get(x + R_COUNT) == chunks &&
			       le32_get(x + R_PLAIN_SIZE) == plain_size && le32_get(x + R_RESERVED) == 0
		       ? 0
		       : -EBADMSG;
}

/* Checks the trailer of a container claiming to be sealed and the units against its index. */
static int check_trailer(WalkState *w, const uint8_t *p, size_t len, const DedupContainerHeader *h,
			 DedupContainerInfo *info) {
	DedupContainerFooter f;
	uint64_t index_size, end;
	int r;

	if (len < DEDUP_CONTAINER_HEADER_SIZE + DEDUP_CONTAINER_INDEX_HEADER_SIZE + DEDUP_CONTAINER_FOOTER_SIZE)
		return -EBADMSG;
	r = dedup_container_footer_parse(p + len - DEDUP_CONTAINER_FOOTER_SIZE, DEDUP_CONTAINER_FOOTER_SIZE, &f);
	if (r < 0)
		return r;
	if (f.id != h->id || f.version != h->version)
		return -EBADMSG;
	/* count <= FRAMES_MAX and index_offset <= SIZE_MAX: no overflow in u64. */
	index_size = DEDUP_CONTAINER_INDEX_HEADER_SIZE + (uint64_t) f.count * index_entry_size(h->version);
	end = f.index_offset + index_size + DEDUP_CONTAINER_FOOTER_SIZE;
	if (end != len)
		return -EBADMSG;

	const uint8_t *index = p + f.index_offset;
	if (memcmp(index + I_MAGIC, index_magic, sizeof(index_magic)) != 0 || le32_get(index + I_COUNT) != f.count)
		return -EBADMSG;
	if (XXH3_64bits(index, (size_t) index_size) != f.index_checksum)
		return -EBADMSG;

	IndexCheck c = { .version = h->version, .index = index + DEDUP_CONTAINER_INDEX_HEADER_SIZE, .count = f.count };
	r = walk_units(w, p, DEDUP_CONTAINER_HEADER_SIZE, f.index_offset, index_unit, index_chunk, &c);
	if (r < 0)
		return r;
	if ((uint32_t) r != f.count)
		return -EBADMSG;

	*info = (DedupContainerInfo) {
		.header = *h,
		.sealed = true,
		.count = f.count,
		.chunks = w->chunks,
		.frames_end = f.index_offset,
	};
	return 0;
}

int dedup_container_walk(const void *buf, size_t len, DedupContainerExpect expect, DedupFrameDecoder *frame_decoder,
			 DedupRegionDecoder *region_decoder, DedupHasher *verify,
			 int (*cb)(const DedupContainerEntry *e, void *userdata), void *userdata,
			 DedupContainerInfo *ret) {
	const uint8_t *p = buf;
	DedupContainerHeader h;
	DedupContainerInfo info = {};
	int r;

	if (expect < 0 || expect >= _DEDUP_CONTAINER_EXPECT_MAX)
		return -EINVAL;
	if (len > DEDUP_CONTAINER_SIZE_MAX)
		return -EBADMSG;
	r = dedup_container_header_parse(buf, len, &h);
	if (r < 0)
		return r;
	_cleanup_(walk_state_done) WalkState w = {
		.version = h.version,
		.frame_decoder = frame_decoder,
		.region_decoder = region_decoder,
		.verify = verify,
	};

	r = -EBADMSG;
	if (expect != DEDUP_CONTAINER_UNSEALED)
		r = check_trailer(&w, p, len, &h, &info);
	if (r < 0 && expect != DEDUP_CONTAINER_SEALED) {
		/*
		 * (!) A raw unit's payload is chosen by whoever wrote the file, so an
		 * unsealed container may end in bytes that look like a trailer; that
		 * is why a failed trailer falls back to a plain walk under ANY.
		 */
		int q = walk_units(&w, p, DEDUP_CONTAINER_HEADER_SIZE, len, NULL, NULL, NULL);
		if (q >= 0) {
			info = (DedupContainerInfo) {
				.header = h,
				.count = (uint32_t) q,
				.chunks = w.chunks,
				.frames_end = len,
			};
			r = 0;
		} else if (expect == DEDUP_CONTAINER_UNSEALED || r == -EBADMSG)
			r = q;
	}
	if (r < 0)
		return r;

	if (cb) {
		/* Headers and tables only this time: everything was validated above. */
		WalkState again = { .version = h.version };
		r = walk_units(&again, p, DEDUP_CONTAINER_HEADER_SIZE, info.frames_end, NULL, cb, userdata);
		if (r < 0)
			return r;
	}
	if (ret)
		*ret = info;
	return 0;
}
