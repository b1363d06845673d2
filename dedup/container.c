/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Container format: header, trailer (index + footer), names, and a walker
 * that validates a whole container image.  Format: docs/FORMAT.md.
 *
 * Invariants:
 *  1. Nothing is interpreted before its magic, version and checksum pass;
 *     reserved bytes must be zero, so a future version can use them only
 *     behind a new version number.
 *  2. Every offset and size read from the bytes is checked against len with
 *     overflow-checked arithmetic before it is used.
 *  3. A sealed container's index must list exactly the frames a walk from
 *     the header finds, in order: the trailer can be trusted as an index of
 *     the container only because it is proven against the frames.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/macros.h"
#include "dedup/container.h"
#include "dedup/le-internal.h"

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

	E_OFFSET = 0,
	E_FRAME_SIZE = 8,
	E_PLAIN_SIZE = 12,
	E_ID = 16,

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
_Static_assert(E_ID + DEDUP_CHUNK_ID_SIZE == DEDUP_CONTAINER_INDEX_ENTRY_SIZE, "index entry layout");
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
	*ret = (DedupContainerHeader) { .id = id, .tier = le32_get(p + H_TIER) };
	return 0;
}

int dedup_container_trailer_format(uint64_t id, uint64_t index_offset, const DedupContainerEntry *entries,
				   size_t n, void *buf, size_t size) {
	if (n > DEDUP_CONTAINER_FRAMES_MAX || id == 0)
		return -EINVAL;
	uint64_t expect = DEDUP_CONTAINER_HEADER_SIZE;
	for (size_t i = 0; i < n; i++) {
		if (entries[i].offset != expect || entries[i].frame_size <= DEDUP_FRAME_HEADER_SIZE)
			return -EINVAL;
		expect += entries[i].frame_size;
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
		le64_put(e + E_OFFSET, entries[i].offset);
		le32_put(e + E_FRAME_SIZE, entries[i].frame_size);
		le32_put(e + E_PLAIN_SIZE, entries[i].plain_size);
		memcpy(e + E_ID, entries[i].id.bytes, DEDUP_CHUNK_ID_SIZE);
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

typedef struct WalkState {
	DedupFrameDecoder *decoder;
	DedupHasher *verify;
	uint8_t *scratch; /* decode output, grown to the largest chunk seen */
	size_t scratch_size;
} WalkState;

static void walk_state_done(WalkState *w) {
	free(w->scratch);
}

/*
 * Walks the frames in p[start, end): each frame header valid, each frame
 * wholly inside, back to back to exactly end.  Calls step (optional) for
 * each.  Returns the frame count or a negative errno.
 */
static int walk_frames(WalkState *w, const uint8_t *p, uint64_t start, uint64_t end,
		       int (*step)(const DedupContainerEntry *e, size_t i, void *userdata), void *userdata) {
	uint64_t off = start;
	size_t i = 0;
	int r;

	while (off < end) {
		DedupFrameHeader h;
		if (i >= DEDUP_CONTAINER_FRAMES_MAX)
			return -EBADMSG;
		r = dedup_frame_header_parse(p + off, (size_t) (end - off), &h);
		if (r < 0)
			return r;
		uint64_t size = dedup_frame_header_frame_size(&h);
		if (size > end - off)
			return -EBADMSG;
		if (w->decoder) {
			if (w->scratch_size < h.plain_size) {
				uint8_t *b = realloc(w->scratch, h.plain_size);
				if (!b)
					return -ENOMEM;
				w->scratch = b;
				w->scratch_size = h.plain_size;
			}
			r = dedup_frame_decode(w->decoder, p + off, (size_t) size, w->verify, w->scratch, w->scratch_size,
					       NULL);
			if (r < 0)
				return r;
		}
		DedupContainerEntry e = {
			.offset = off,
			.frame_size = (uint32_t) size,
			.plain_size = h.plain_size,
			.id = h.id,
		};
		if (step) {
			r = step(&e, i, userdata);
			if (r < 0)
				return r;
		}
		off += size;
		i++;
	}
	return (int) i;
}

typedef struct IndexCheck {
	const uint8_t *index; /* entries of the index */
	uint32_t count;
} IndexCheck;

static int index_step(const DedupContainerEntry *e, size_t i, void *userdata) {
	IndexCheck *c = userdata;
	if (i >= c->count)
		return -EBADMSG;
	const uint8_t *x = c->index + i * DEDUP_CONTAINER_INDEX_ENTRY_SIZE;
	if (le64_get(x + E_OFFSET) != e->offset || le32_get(x + E_FRAME_SIZE) != e->frame_size ||
	    le32_get(x + E_PLAIN_SIZE) != e->plain_size || memcmp(x + E_ID, e->id.bytes, DEDUP_CHUNK_ID_SIZE) != 0)
		return -EBADMSG;
	return 0;
}

/* Checks the trailer of a container claiming to be sealed and the frames against its index. */
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
	if (f.id != h->id)
		return -EBADMSG;
	/* count <= FRAMES_MAX and index_offset <= SIZE_MAX: no overflow in u64. */
	index_size = DEDUP_CONTAINER_INDEX_HEADER_SIZE + (uint64_t) f.count * DEDUP_CONTAINER_INDEX_ENTRY_SIZE;
	end = f.index_offset + index_size + DEDUP_CONTAINER_FOOTER_SIZE;
	if (end != len)
		return -EBADMSG;

	const uint8_t *index = p + f.index_offset;
	if (memcmp(index + I_MAGIC, index_magic, sizeof(index_magic)) != 0 || le32_get(index + I_COUNT) != f.count)
		return -EBADMSG;
	if (XXH3_64bits(index, (size_t) index_size) != f.index_checksum)
		return -EBADMSG;

	IndexCheck c = { .index = index + DEDUP_CONTAINER_INDEX_HEADER_SIZE, .count = f.count };
	r = walk_frames(w, p, DEDUP_CONTAINER_HEADER_SIZE, f.index_offset, index_step, &c);
	if (r < 0)
		return r;
	if ((uint32_t) r != f.count)
		return -EBADMSG;

	*info = (DedupContainerInfo) { .header = *h, .sealed = true, .count = f.count, .frames_end = f.index_offset };
	return 0;
}

typedef struct Emit {
	int (*cb)(const DedupContainerEntry *e, void *userdata);
	void *userdata;
} Emit;

static int emit_step(const DedupContainerEntry *e, size_t i, void *userdata) {
	Emit *emit = userdata;
	return emit->cb(e, emit->userdata);
}

int dedup_container_walk(const void *buf, size_t len, DedupContainerExpect expect, DedupFrameDecoder *decoder,
			 DedupHasher *verify, int (*cb)(const DedupContainerEntry *e, void *userdata), void *userdata,
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
	_cleanup_(walk_state_done) WalkState w = { .decoder = decoder, .verify = verify };

	r = -EBADMSG;
	if (expect != DEDUP_CONTAINER_UNSEALED)
		r = check_trailer(&w, p, len, &h, &info);
	if (r < 0 && expect != DEDUP_CONTAINER_SEALED) {
		/*
		 * (!) A raw frame's payload is chosen by whoever wrote the file, so an
		 * unsealed container may end in bytes that look like a trailer; that
		 * is why a failed trailer falls back to a plain walk under ANY.
		 */
		int q = walk_frames(&w, p, DEDUP_CONTAINER_HEADER_SIZE, len, NULL, NULL);
		if (q >= 0) {
			info = (DedupContainerInfo) { .header = h, .count = (uint32_t) q, .frames_end = len };
			r = 0;
		} else if (expect == DEDUP_CONTAINER_UNSEALED || r == -EBADMSG)
			r = q;
	}
	if (r < 0)
		return r;

	if (cb) {
		/* Headers only this time: everything was validated above. */
		WalkState again = {};
		Emit emit = { .cb = cb, .userdata = userdata };
		r = walk_frames(&again, p, DEDUP_CONTAINER_HEADER_SIZE, info.frames_end, emit_step, &emit);
		if (r < 0)
			return r;
	}
	if (ret)
		*ret = info;
	return 0;
}
