/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Container format: the header and footer layout of docs/FORMAT.md, names,
 * walks of sealed and unsealed containers of regions (version 2), and
 * rejection of every single-bit flip and truncation of a small sealed
 * container, of reserved bytes, of an index that disagrees with the
 * regions, and of a trailer forged inside a raw region's payload.  Version
 * 1 containers (chunk frames) written by fratier before regions
 * (tests/dedup/fixture-store-v1) still walk, and every bit flip of one is
 * still caught.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/macros.h"
#include "dedup/container.h"
#include "dedup/le-internal.h"
#include "tests/dedup/dedup-test.h"

static DedupRegionEncoder *enc;
static DedupRegionDecoder *rdec;
static DedupFrameDecoder *fdec;
static DedupHasher *sha;

typedef struct Image {
	uint8_t *buf;
	size_t len;
	DedupContainerEntry entries[256]; /* one per chunk */
	size_t n;
	DedupContainerRegion regions[64];
	size_t n_regions;
} Image;

/* Appends a region of n chunks (compressible or random, raw then) to im. */
static void add_region(Image *im, size_t n, bool random, TestRng *rng) {
	DedupChunkId ids[16];
	uint32_t lengths[16];
	uint8_t *plain = NULL;
	size_t plain_size = 0, size;

	ASSERT(n <= ELEMENTSOF(ids) && im->n + n <= ELEMENTSOF(im->entries) && im->n_regions < ELEMENTSOF(im->regions));
	for (size_t i = 0; i < n; i++) {
		lengths[i] = 100 + (uint32_t) (test_rng_next(rng) % 3000);
		plain = realloc(plain, plain_size + lengths[i]);
		ASSERT(plain);
		if (random)
			test_rng_fill(rng, plain + plain_size, lengths[i]);
		else
			memset(plain + plain_size, 'a' + (int) (test_rng_next(rng) % 26), lengths[i]);
		ASSERT_OK(dedup_hasher_digest(sha, plain + plain_size, lengths[i], &ids[i]));
		im->entries[im->n + i] = (DedupContainerEntry) {
			.offset = im->len,
			.plain_size = lengths[i],
			.id = ids[i],
			.region = true,
			.region_offset = (uint32_t) plain_size,
		};
		plain_size += lengths[i];
	}
	im->buf = realloc(im->buf, im->len + dedup_region_size_bound(n, plain_size));
	ASSERT(im->buf);
	ASSERT_OK(dedup_region_encode(enc, ids, lengths, n, plain, plain_size, im->buf + im->len,
				      dedup_region_size_bound(n, plain_size), &size));
	for (size_t i = 0; i < n; i++)
		im->entries[im->n + i].frame_size = (uint32_t) size;
	im->regions[im->n_regions++] = (DedupContainerRegion) {
		.offset = im->len,
		.size = (uint32_t) size,
		.count = (uint32_t) n,
		.plain_size = (uint32_t) plain_size,
	};
	im->n += n;
	im->len += size;
	free(plain);
}

/* A container of n regions (mixed raw and zstd, of 1 to 5 chunks), sealed if asked. */
static Image build(uint64_t id, uint32_t tier, size_t n, bool seal, TestRng *rng) {
	Image im = { .buf = test_malloc(DEDUP_CONTAINER_HEADER_SIZE) };
	dedup_container_header_format(id, tier, im.buf);
	im.len = DEDUP_CONTAINER_HEADER_SIZE;
	for (size_t i = 0; i < n; i++)
		add_region(&im, 1 + (size_t) (test_rng_next(rng) % 5), i % 2, rng);
	if (seal) {
		uint64_t t = dedup_container_trailer_size(n);
		im.buf = realloc(im.buf, im.len + t);
		ASSERT(im.buf);
		ASSERT_OK(dedup_container_trailer_format(id, im.len, im.regions, n, im.buf + im.len, (size_t) t));
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
	ASSERT(e->region == want->region && e->region_offset == want->region_offset);
	ASSERT(dedup_chunk_id_equal(&e->id, &want->id));
	return 0;
}

static int walk(const Image *im, DedupContainerExpect expect, DedupContainerInfo *info) {
	Seen s = { .im = im };
	int r = dedup_container_walk(im->buf, im->len, expect, fdec, rdec, sha, check_entry, &s, info);
	if (r >= 0)
		ASSERT(s.i == im->n && info->chunks == im->n);
	return r;
}

static void test_layout(void) {
	uint8_t h[DEDUP_CONTAINER_HEADER_SIZE];
	DedupContainerHeader ph;
	dedup_container_header_format(0x0102030405060708ull, 7, h);
	ASSERT(memcmp(h, "\x89" "FCH\x02\0\0\0\x08\x07\x06\x05\x04\x03\x02\x01\x07\0\0\0", 20) == 0);
	for (size_t i = 20; i < 56; i++)
		ASSERT(h[i] == 0);
	ASSERT(le64_get(h + 56) == XXH3_64bits(h, 56));
	ASSERT_OK(dedup_container_header_parse(h, sizeof(h), &ph));
	ASSERT(ph.id == 0x0102030405060708ull && ph.tier == 7 && ph.version == 2);

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
	h[4] = 3;
	le64_put(h + 56, XXH3_64bits(h, 56));
	ASSERT_RET(dedup_container_header_parse(h, sizeof(h), &ph), -EPROTONOSUPPORT);
	h[4] = 1;
	le64_put(h + 56, XXH3_64bits(h, 56));
	ASSERT_OK(dedup_container_header_parse(h, sizeof(h), &ph));
	ASSERT(ph.version == 1);
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
	ASSERT(info.frames_end == sealed.regions[19].offset + sealed.regions[19].size);
	ASSERT_OK(walk(&sealed, DEDUP_CONTAINER_ANY, &info));
	ASSERT(info.sealed);
	ASSERT(walk(&sealed, DEDUP_CONTAINER_UNSEALED, &info) < 0);

	Image open = build(43, 3, 20, false, &rng);
	ASSERT_OK(walk(&open, DEDUP_CONTAINER_UNSEALED, &info));
	ASSERT(!info.sealed && info.count == 20 && info.frames_end == open.len);
	ASSERT_OK(walk(&open, DEDUP_CONTAINER_ANY, &info));
	ASSERT(!info.sealed);
	ASSERT(walk(&open, DEDUP_CONTAINER_SEALED, &info) < 0);

	/* One unit at a time, as a torn container is salvaged. */
	Seen s = { .im = &open };
	for (uint64_t off = DEDUP_CONTAINER_HEADER_SIZE; off < open.len;) {
		size_t size;
		ASSERT_OK(dedup_container_unit_parse(2, off, open.buf + off, open.len - off, check_entry, &s, &size));
		off += size;
	}
	ASSERT(s.i == open.n);

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
	ASSERT_OK(dedup_container_trailer_format(47, other.len, other.regions, 3, other.buf + other.len, (size_t) t));
	other.len += t;
	ASSERT_RET(walk(&other, DEDUP_CONTAINER_SEALED, &info), -EBADMSG);

	/* An index listing one region too few (index and footer consistent with each other). */
	Image few = build(48, 0, 4, false, &rng);
	t = dedup_container_trailer_size(3);
	few.buf = realloc(few.buf, few.len + t);
	ASSERT_RET(dedup_container_trailer_format(48, few.len, few.regions, 3, few.buf + few.len, (size_t) t), -EINVAL);
	uint64_t end3 = few.regions[3].offset;
	ASSERT_OK(dedup_container_trailer_format(48, end3, few.regions, 3, few.buf + few.len, (size_t) t));
	few.len += t;
	ASSERT_RET(walk(&few, DEDUP_CONTAINER_SEALED, &info), -EBADMSG);

	/* An index entry with a wrong chunk count, or reserved bytes set (checksums recomputed). */
	for (size_t field = 12; field <= 20; field += 8) {
		Image wrong = build(49, 0, 5, true, &rng);
		size_t index = (size_t) wrong.regions[4].offset + wrong.regions[4].size;
		uint8_t *entry2 = wrong.buf + index + DEDUP_CONTAINER_INDEX_HEADER_SIZE + 2 * DEDUP_CONTAINER_INDEX_ENTRY_SIZE;
		entry2[field] ^= 1;
		size_t index_size = DEDUP_CONTAINER_INDEX_HEADER_SIZE + 5 * DEDUP_CONTAINER_INDEX_ENTRY_SIZE;
		uint8_t *footer = wrong.buf + wrong.len - DEDUP_CONTAINER_FOOTER_SIZE;
		le64_put(footer + 32, XXH3_64bits(wrong.buf + index, index_size));
		le64_put(footer + 56, XXH3_64bits(footer, 56));
		ASSERT_RET(walk(&wrong, DEDUP_CONTAINER_SEALED, &info), -EBADMSG);
		free(wrong.buf);
	}

	free(sealed.buf);
	free(open.buf);
	free(empty.buf);
	free(empty_sealed.buf);
	free(other.buf);
	free(few.buf);
}

/* A raw chunk whose last bytes are a valid-looking trailer does not make an open container sealed. */
static void test_forged_trailer(void) {
	TestRng rng = { 2 };
	DedupContainerInfo info;
	Image im = build(50, 0, 2, false, &rng);

	/* Chunk: random filler, then a trailer for a fake index claiming 0 regions at its own start. */
	size_t plain = 400, size;
	uint8_t *data = test_malloc(plain);
	test_rng_fill(&rng, data, plain);
	uint64_t region_at = im.len;
	uint64_t trailer_at = region_at + dedup_region_size_bound(1, plain) - dedup_container_trailer_size(0);
	ASSERT_RET(dedup_container_trailer_format(50, trailer_at, NULL, 0, data, plain), -EINVAL);
	/* Index offsets must match the regions, so a forged trailer can only claim what the walk disproves. */
	uint8_t fake[DEDUP_CONTAINER_INDEX_HEADER_SIZE + DEDUP_CONTAINER_FOOTER_SIZE];
	memcpy(fake, "\x89" "FCI", 4);
	le32_put(fake + 4, 0);
	uint8_t *f = fake + DEDUP_CONTAINER_INDEX_HEADER_SIZE;
	memset(f, 0, DEDUP_CONTAINER_FOOTER_SIZE);
	memcpy(f, "\x89" "FCF\x02", 5);
	le64_put(f + 8, 50);
	le64_put(f + 16, trailer_at);
	le64_put(f + 32, XXH3_64bits(fake, DEDUP_CONTAINER_INDEX_HEADER_SIZE));
	le64_put(f + 56, XXH3_64bits(f, 56));
	memcpy(data + plain - sizeof(fake), fake, sizeof(fake));

	DedupChunkId cid;
	uint32_t len32 = (uint32_t) plain;
	ASSERT_OK(dedup_hasher_digest(sha, data, plain, &cid));
	im.buf = realloc(im.buf, im.len + dedup_region_size_bound(1, plain));
	ASSERT_OK(dedup_region_encode(enc, &cid, &len32, 1, data, plain, im.buf + im.len, dedup_region_size_bound(1, plain),
				      &size));
	ASSERT(size == dedup_region_size_bound(1, plain)); /* stored raw */
	im.entries[im.n++] = (DedupContainerEntry) {
		.offset = im.len,
		.frame_size = (uint32_t) size,
		.plain_size = (uint32_t) plain,
		.id = cid,
		.region = true,
	};
	im.len += size;

	DedupContainerFooter ft;
	ASSERT_OK(dedup_container_footer_parse(im.buf + im.len - 64, 64, &ft));
	ASSERT_RET(dedup_container_walk(im.buf, im.len, DEDUP_CONTAINER_SEALED, NULL, NULL, NULL, NULL, NULL, &info),
		   -EBADMSG);
	ASSERT_OK(walk(&im, DEDUP_CONTAINER_ANY, &info));
	ASSERT(!info.sealed && info.count == 3);
	free(data);
	free(im.buf);
}

static void flips_and_cuts(uint8_t *buf, size_t len, const uint64_t *cut_at, size_t n_cuts) {
	DedupContainerInfo info;
	for (size_t i = 0; i < len * 8; i++) {
		buf[i / 8] ^= (uint8_t) (1u << (i % 8));
		int r = dedup_container_walk(buf, len, DEDUP_CONTAINER_SEALED, fdec, rdec, NULL, NULL, NULL, &info);
		ASSERT(r == -EBADMSG || r == -EPROTONOSUPPORT);
		buf[i / 8] ^= (uint8_t) (1u << (i % 8));
	}
	for (size_t l = 0; l < len; l++) {
		int r = dedup_container_walk(buf, l, DEDUP_CONTAINER_SEALED, fdec, rdec, NULL, NULL, NULL, &info);
		ASSERT(r == -EBADMSG);
	}
	/* Cut right after a unit, an unsealed walk succeeds with the units before the cut. */
	for (size_t k = 0; k < n_cuts; k++) {
		ASSERT_OK(dedup_container_walk(buf, cut_at[k], DEDUP_CONTAINER_ANY, fdec, rdec, sha, NULL, NULL, &info));
		ASSERT(!info.sealed && info.count == k + 1);
	}
}

static void test_bit_flips_and_truncation(void) {
	TestRng rng = { 3 };
	DedupContainerInfo info;
	Image im = build(60, 1, 6, true, &rng);
	uint64_t cuts[3] = { im.regions[1].offset, im.regions[2].offset, im.regions[3].offset };

	flips_and_cuts(im.buf, im.len, cuts, ELEMENTSOF(cuts));
	ASSERT_OK(walk(&im, DEDUP_CONTAINER_SEALED, &info));
	free(im.buf);
}

static uint8_t *fixture(const char *name, size_t *ret_len) {
	char path[512];
	struct stat st;
	snprintf(path, sizeof(path), "%s/tests/dedup/fixture-store-v1/tier0/%s", getenv("FRATIER_SOURCE_ROOT") ?: ".",
		 name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ASSERT(fd >= 0 && fstat(fd, &st) == 0);
	uint8_t *buf = test_malloc((size_t) st.st_size);
	ASSERT(read(fd, buf, (size_t) st.st_size) == st.st_size);
	close(fd);
	*ret_len = (size_t) st.st_size;
	return buf;
}

typedef struct Frames {
	uint64_t next;
	size_t n;
	uint64_t offsets[64];
} Frames;

static int frame_entry(const DedupContainerEntry *e, void *userdata) {
	Frames *f = userdata;
	ASSERT(!e->region && e->region_offset == 0 && e->offset == f->next && e->frame_size > DEDUP_FRAME_HEADER_SIZE);
	ASSERT(f->n < ELEMENTSOF(f->offsets));
	f->offsets[f->n++] = e->offset;
	f->next += e->frame_size;
	return 0;
}

/* Containers written by the first format (ea0b055): still read, whole and checked. */
static void test_version1(void) {
	DedupContainerInfo info;
	size_t len;

	uint8_t *sealed = fixture("c/04/0000000000000004.ftc", &len);
	Frames f = { .next = DEDUP_CONTAINER_HEADER_SIZE };
	ASSERT_OK(dedup_container_walk(sealed, len, DEDUP_CONTAINER_SEALED, fdec, rdec, sha, frame_entry, &f, &info));
	ASSERT(info.sealed && info.header.version == 1 && info.header.id == 4 && info.count == f.n && info.chunks == f.n);
	ASSERT(f.n >= 3);
	flips_and_cuts(sealed, len, f.offsets + 1, 2);
	free(sealed);

	uint8_t *open_ = fixture("c/07/0000000000000007.ftc", &len);
	f = (Frames) { .next = DEDUP_CONTAINER_HEADER_SIZE };
	ASSERT_OK(dedup_container_walk(open_, len, DEDUP_CONTAINER_ANY, fdec, rdec, sha, frame_entry, &f, &info));
	ASSERT(!info.sealed && info.header.version == 1 && info.count == f.n && f.n > 0);
	/* A frame in a version 2 container is not a region: refused. */
	open_[4] = 2;
	le64_put(open_ + 56, XXH3_64bits(open_, 56));
	ASSERT_RET(dedup_container_walk(open_, len, DEDUP_CONTAINER_ANY, NULL, NULL, NULL, NULL, NULL, &info), -EBADMSG);
	free(open_);
}

int main(void) {
	ASSERT_OK(dedup_region_encoder_new(3, false, &enc));
	ASSERT_OK(dedup_region_decoder_new(&rdec));
	ASSERT_OK(dedup_frame_decoder_new(&fdec));
	ASSERT_OK(dedup_hasher_new(&sha));
	test_layout();
	test_walks();
	test_forged_trailer();
	test_bit_flips_and_truncation();
	test_version1();
	dedup_region_encoder_free(enc);
	dedup_region_decoder_free(rdec);
	dedup_frame_decoder_free(fdec);
	dedup_hasher_free(sha);
	return 0;
}
