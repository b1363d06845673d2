/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Container format: the header and footer layout of docs/FORMAT.md, names,
 * walks of sealed and unsealed containers, and rejection of every
 * single-bit flip and truncation of a small sealed container, of reserved
 * bytes, of an index that disagrees with the frames, and of a trailer forged
 * inside a raw frame's payload.
 */
#include <errno.h>
#include <stdlib.h>
#include <xxhash.h>

#include "common/macros.h"
#include "dedup/container.h"
#include "dedup/le-internal.h"
#include "tests/dedup/dedup-test.h"

static DedupFrameEncoder *enc;
static DedupFrameDecoder *dec;
static DedupHasher *sha;

typedef struct Image {
	uint8_t *buf;
	size_t len;
	DedupContainerEntry entries[64];
	size_t n;
} Image;

/* A container of n chunks (mixed raw and zstd), sealed if asked. */
static Image build(uint64_t id, uint32_t tier, size_t n, bool seal, TestRng *rng) {
	Image im = { .buf = test_malloc(DEDUP_CONTAINER_HEADER_SIZE) };
	dedup_container_header_format(id, tier, im.buf);
	im.len = DEDUP_CONTAINER_HEADER_SIZE;
	ASSERT(n <= ELEMENTSOF(im.entries));
	for (size_t i = 0; i < n; i++) {
		size_t plain = 100 + (size_t) (test_rng_next(rng) % 3000);
		uint8_t *data = test_malloc(plain);
		if (i % 2)
			test_rng_fill(rng, data, plain);
		else
			memset(data, 'a' + (int) i, plain);
		DedupChunkId cid;
		size_t fs;
		ASSERT_OK(dedup_hasher_digest(sha, data, plain, &cid));
		im.buf = realloc(im.buf, im.len + dedup_frame_size_bound(plain));
		ASSERT(im.buf);
		ASSERT_OK(dedup_frame_encode(enc, &cid, data, plain, im.buf + im.len, dedup_frame_size_bound(plain), &fs));
		im.entries[i] = (DedupContainerEntry) { .offset = im.len, .frame_size = (uint32_t) fs, .plain_size = (uint32_t) plain, .id = cid };
		im.len += fs;
		im.n++;
		free(data);
	}
	if (seal) {
		uint64_t t = dedup_container_trailer_size(n);
		im.buf = realloc(im.buf, im.len + t);
		ASSERT(im.buf);
		ASSERT_OK(dedup_container_trailer_format(id, im.len, im.entries, n, im.buf + im.len, (size_t) t));
		im.len += t;
	}
	return im;
}

typedef struct Seen {
	const Image *im;
	size_t i;
} Seen;

static int check_entry(const DedupContainerEntry *e, void *userdata) {
	Seen *s = userdata;
	const DedupContainerEntry *want = s->im->entries + s->i++;
	ASSERT(e->offset == want->offset && e->frame_size == want->frame_size && e->plain_size == want->plain_size);
	ASSERT(dedup_chunk_id_equal(&e->id, &want->id));
	return 0;
}

static int walk(const Image *im, DedupContainerExpect expect, DedupContainerInfo *info) {
	Seen s = { .im = im };
	int r = dedup_container_walk(im->buf, im->len, expect, dec, sha, check_entry, &s, info);
	if (r >= 0)
		ASSERT(s.i == im->n);
	return r;
}

static void test_layout(void) {
	uint8_t h[DEDUP_CONTAINER_HEADER_SIZE];
	DedupContainerHeader ph;
	dedup_container_header_format(0x0102030405060708ull, 7, h);
	ASSERT(memcmp(h, "\x89" "FCH\x01\0\0\0\x08\x07\x06\x05\x04\x03\x02\x01\x07\0\0\0", 20) == 0);
	for (size_t i = 20; i < 56; i++)
		ASSERT(h[i] == 0);
	ASSERT(le64_get(h + 56) == XXH3_64bits(h, 56));
	ASSERT_OK(dedup_container_header_parse(h, sizeof(h), &ph));
	ASSERT(ph.id == 0x0102030405060708ull && ph.tier == 7);

	char name[DEDUP_CONTAINER_NAME_MAX];
	uint64_t id;
	ASSERT(strcmp(dedup_container_name(0x1234abcd, name), "c/cd/000000001234abcd.ftc") == 0);
	ASSERT_OK(dedup_container_name_parse(name, &id));
	ASSERT(id == 0x1234abcd);
	ASSERT(strcmp(dedup_container_name(UINT64_MAX, name), "c/ff/ffffffffffffffff.ftc") == 0);
	ASSERT_OK(dedup_container_name_parse(name, &id));
	ASSERT(id == UINT64_MAX);
	static const char *const bad[] = { "c/cd/000000001234ABCD.ftc", "c/ce/000000001234abcd.ftc",
					   "c/cd/000000001234abcd.ft", "c/cd/000000001234abcd.ftcx",
					   "d/cd/000000001234abcd.ftc", "c/cd/00000000g234abcd.ftc", "", "c" };
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		ASSERT_RET(dedup_container_name_parse(bad[i], &id), -EINVAL);

	/* Reserved bytes must be zero even with a good checksum; id 0 is invalid; versions. */
	h[30] = 1;
	le64_put(h + 56, XXH3_64bits(h, 56));
	ASSERT_RET(dedup_container_header_parse(h, sizeof(h), &ph), -EBADMSG);
	dedup_container_header_format(0, 1, h);
	ASSERT_RET(dedup_container_header_parse(h, sizeof(h), &ph), -EBADMSG);
	dedup_container_header_format(5, 1, h);
	h[4] = 2;
	le64_put(h + 56, XXH3_64bits(h, 56));
	ASSERT_RET(dedup_container_header_parse(h, sizeof(h), &ph), -EPROTONOSUPPORT);
	h[4] = 0;
	le64_put(h + 56, XXH3_64bits(h, 56));
	ASSERT_RET(dedup_container_header_parse(h, sizeof(h), &ph), -EBADMSG);
	ASSERT_RET(dedup_container_header_parse(h, 63, &ph), -EBADMSG);
}

static void test_walks(void) {
	TestRng rng = { 1 };
	DedupContainerInfo info;

	Image sealed = build(42, 3, 20, true, &rng);
	ASSERT_OK(walk(&sealed, DEDUP_CONTAINER_SEALED, &info));
	ASSERT(info.sealed && info.count == 20 && info.header.id == 42 && info.header.tier == 3);
	ASSERT(info.frames_end == sealed.entries[19].offset + sealed.entries[19].frame_size);
	ASSERT_OK(walk(&sealed, DEDUP_CONTAINER_ANY, &info));
	ASSERT(info.sealed);
	ASSERT(walk(&sealed, DEDUP_CONTAINER_UNSEALED, &info) < 0);

	Image open = build(43, 3, 20, false, &rng);
	ASSERT_OK(walk(&open, DEDUP_CONTAINER_UNSEALED, &info));
	ASSERT(!info.sealed && info.count == 20 && info.frames_end == open.len);
	ASSERT_OK(walk(&open, DEDUP_CONTAINER_ANY, &info));
	ASSERT(!info.sealed);
	ASSERT(walk(&open, DEDUP_CONTAINER_SEALED, &info) < 0);

	/* Empty containers: just a header; sealed with an empty index. */
	Image empty = build(44, 0, 0, false, &rng);
	ASSERT_OK(walk(&empty, DEDUP_CONTAINER_ANY, &info));
	ASSERT(!info.sealed && info.count == 0);
	Image empty_sealed = build(45, 0, 0, true, &rng);
	ASSERT_OK(walk(&empty_sealed, DEDUP_CONTAINER_SEALED, &info));
	ASSERT(info.sealed && info.count == 0);

	/* The footer names another container: refused. */
	Image other = build(46, 0, 3, false, &rng);
	uint64_t t = dedup_container_trailer_size(3);
	other.buf = realloc(other.buf, other.len + t);
	ASSERT_OK(dedup_container_trailer_format(47, other.len, other.entries, 3, other.buf + other.len, (size_t) t));
	other.len += t;
	ASSERT_RET(walk(&other, DEDUP_CONTAINER_SEALED, &info), -EBADMSG);

	/* An index listing one frame too few (index and footer consistent with each other). */
	Image few = build(48, 0, 4, false, &rng);
	t = dedup_container_trailer_size(3);
	few.buf = realloc(few.buf, few.len + t);
	ASSERT_RET(dedup_container_trailer_format(48, few.len, few.entries, 3, few.buf + few.len, (size_t) t), -EINVAL);
	uint64_t end3 = few.entries[3].offset;
	ASSERT_OK(dedup_container_trailer_format(48, end3, few.entries, 3, few.buf + few.len, (size_t) t));
	few.len += t;
	ASSERT_RET(walk(&few, DEDUP_CONTAINER_SEALED, &info), -EBADMSG);

	/* An index entry with a wrong id (checksums recomputed). */
	Image wrong = build(49, 0, 5, true, &rng);
	size_t index = (size_t) wrong.entries[4].offset + wrong.entries[4].frame_size;
	uint8_t *entry2 = wrong.buf + index + DEDUP_CONTAINER_INDEX_HEADER_SIZE + 2 * DEDUP_CONTAINER_INDEX_ENTRY_SIZE;
	entry2[20] ^= 1;
	size_t index_size = DEDUP_CONTAINER_INDEX_HEADER_SIZE + 5 * DEDUP_CONTAINER_INDEX_ENTRY_SIZE;
	uint8_t *footer = wrong.buf + wrong.len - DEDUP_CONTAINER_FOOTER_SIZE;
	le64_put(footer + 32, XXH3_64bits(wrong.buf + index, index_size));
	le64_put(footer + 56, XXH3_64bits(footer, 56));
	ASSERT_RET(walk(&wrong, DEDUP_CONTAINER_SEALED, &info), -EBADMSG);

	free(sealed.buf);
	free(open.buf);
	free(empty.buf);
	free(empty_sealed.buf);
	free(other.buf);
	free(few.buf);
	free(wrong.buf);
}

/* A raw chunk whose last bytes are a valid-looking trailer does not make an open container sealed. */
static void test_forged_trailer(void) {
	TestRng rng = { 2 };
	DedupContainerInfo info;
	Image im = build(50, 0, 2, false, &rng);

	/* Chunk: random filler, then a trailer for a fake index claiming 0 frames at its own start. */
	size_t plain = 400;
	uint8_t *data = test_malloc(plain);
	test_rng_fill(&rng, data, plain);
	uint64_t frame_at = im.len;
	uint64_t trailer_at = frame_at + DEDUP_FRAME_HEADER_SIZE + plain - dedup_container_trailer_size(0);
	DedupContainerEntry none[1];
	ASSERT_RET(dedup_container_trailer_format(50, trailer_at, none, 0, data, plain), -EINVAL);
	/* Index offsets must match the frames, so a forged trailer can only claim what the walk disproves. */
	uint8_t fake[DEDUP_CONTAINER_INDEX_HEADER_SIZE + DEDUP_CONTAINER_FOOTER_SIZE];
	memcpy(fake, "\x89" "FCI", 4);
	le32_put(fake + 4, 0);
	uint8_t *f = fake + DEDUP_CONTAINER_INDEX_HEADER_SIZE;
	memset(f, 0, DEDUP_CONTAINER_FOOTER_SIZE);
	memcpy(f, "\x89" "FCF\x01", 5);
	le64_put(f + 8, 50);
	le64_put(f + 16, trailer_at);
	le64_put(f + 32, XXH3_64bits(fake, DEDUP_CONTAINER_INDEX_HEADER_SIZE));
	le64_put(f + 56, XXH3_64bits(f, 56));
	memcpy(data + plain - sizeof(fake), fake, sizeof(fake));

	DedupChunkId cid;
	size_t fs;
	ASSERT_OK(dedup_hasher_digest(sha, data, plain, &cid));
	im.buf = realloc(im.buf, im.len + dedup_frame_size_bound(plain));
	ASSERT_OK(dedup_frame_encode(enc, &cid, data, plain, im.buf + im.len, dedup_frame_size_bound(plain), &fs));
	ASSERT(fs == DEDUP_FRAME_HEADER_SIZE + plain); /* stored raw */
	im.entries[im.n++] = (DedupContainerEntry) { .offset = im.len, .frame_size = (uint32_t) fs, .plain_size = (uint32_t) plain, .id = cid };
	im.len += fs;

	DedupContainerFooter ft;
	ASSERT_OK(dedup_container_footer_parse(im.buf + im.len - 64, 64, &ft));
	ASSERT_RET(dedup_container_walk(im.buf, im.len, DEDUP_CONTAINER_SEALED, NULL, NULL, NULL, NULL, &info), -EBADMSG);
	ASSERT_OK(walk(&im, DEDUP_CONTAINER_ANY, &info));
	ASSERT(!info.sealed && info.count == 3);
	free(data);
	free(im.buf);
}

static void test_bit_flips_and_truncation(void) {
	TestRng rng = { 3 };
	DedupContainerInfo info;
	Image im = build(60, 1, 6, true, &rng);

	for (size_t i = 0; i < im.len * 8; i++) {
		im.buf[i / 8] ^= (uint8_t) (1u << (i % 8));
		int r = dedup_container_walk(im.buf, im.len, DEDUP_CONTAINER_SEALED, dec, NULL, NULL, NULL, &info);
		ASSERT(r == -EBADMSG || r == -EPROTONOSUPPORT);
		im.buf[i / 8] ^= (uint8_t) (1u << (i % 8));
	}
	for (size_t len = 0; len < im.len; len++) {
		int r = dedup_container_walk(im.buf, len, DEDUP_CONTAINER_SEALED, dec, NULL, NULL, NULL, &info);
		ASSERT(r == -EBADMSG);
	}
	/* Cut right after a frame, an unsealed walk succeeds with the frames before the cut. */
	ASSERT_OK(dedup_container_walk(im.buf, im.entries[3].offset, DEDUP_CONTAINER_ANY, dec, NULL, NULL, NULL, &info));
	ASSERT(!info.sealed && info.count == 3);
	ASSERT_OK(walk(&im, DEDUP_CONTAINER_SEALED, &info));
	free(im.buf);
}

int main(void) {
	ASSERT_OK(dedup_frame_encoder_new(3, false, &enc));
	ASSERT_OK(dedup_frame_decoder_new(&dec));
	ASSERT_OK(dedup_hasher_new(&sha));
	test_layout();
	test_walks();
	test_forged_trailer();
	test_bit_flips_and_truncation();
	dedup_frame_encoder_free(enc);
	dedup_frame_decoder_free(dec);
	dedup_hasher_free(sha);
	return 0;
}
