/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Reads that decode regions straight into the caller's buffer
 * (dedup/store-read.c, invariant 6): a restore's 1 MiB reads of a file
 * sealed front to back place most regions in the buffer and cache only
 * those across its ends, also when other entries lie between a region's
 * chunks (an Oracle backup piece's block frames, an image copy's zero
 * blocks, blocks deduplicated against another file), but never two whose
 * spans overlap; a file whose recipe names regions in part and out
 * of order (deduplicated against another) reads back exact in reads of
 * every size; threads reading one file at once, in blocks and at random,
 * each get exact bytes; damaged regions that would have been placed are an
 * -EIO, never their bytes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tests/dedup/oracle-test.h"
#include "tests/dedup/store-test.h"

/* As the restore pipeline opens its stores (fs/main.c): no read-ahead of the store's own. */
static const DedupStoreOptions pipeline_opts = { .readahead_bytes = 1 };

/* Reads ino in blocks of `block` bytes from the front, as a restore worker does; every block must be exact. */
static void read_blocks(Env *e, uint64_t ino, const uint8_t *data, size_t len, size_t block) {
	uint8_t *buf = test_malloc(block);
	for (size_t off = 0; off < len; off += block) {
		size_t n = MIN(block, len - off);
		ASSERT(dedup_file_read(e->store, ino, len, off, buf, n) == (ssize_t) n);
		ASSERT(memcmp(buf, data + off, n) == 0);
	}
	free(buf);
}

/* 1 MiB reads place most regions: the cache loads only those across a block's ends. */
static void test_placed(void) {
	TestRng rng = { 31 };
	size_t len = 8 * MiB + 4321;
	uint8_t *data = test_malloc(len), *buf = test_malloc(len);
	DedupRegionCacheStats c0, c1;
	DedupWriterStats ws;
	Env e;

	env_open(&e, &pipeline_opts);
	fill_text(&rng, data, len);
	uint64_t ino = env_seal(&e, data, len, &rng, &ws);
	ASSERT(ws.regions >= 32);

	env_reopen_store(&e);
	dedup_store_cache_stats(e.store, &c0);
	read_blocks(&e, ino, data, len, MiB);
	dedup_store_cache_stats(e.store, &c1);
	ASSERT(c1.loads - c0.loads <= ws.regions / 2);

	/* One read of the whole file: every region placed, nothing more loaded. */
	env_reopen_store(&e);
	dedup_store_cache_stats(e.store, &c0);
	ASSERT(dedup_file_read(e.store, ino, len, 0, buf, len) == (ssize_t) len && memcmp(buf, data, len) == 0);
	dedup_store_cache_stats(e.store, &c1);
	ASSERT(c1.loads == c0.loads);

	/* Reads of every size and offset, and a copy to a file (its steps place too). */
	env_check_file(&e, ino, data, len, &rng);
	free(data);
	free(buf);
	env_close(&e);
}

/*
 * Oracle chunking puts a literal (the 16-byte frame) between every two
 * blocks of a backup piece and a zero run for every never-formatted block
 * of an image copy, and day 2's piece names day 1's blocks between its
 * new ones: regions whose chunks lie apart in the file.  1 MiB reads
 * still place most of them (moved apart in the buffer) and read exact.
 */
static void test_placed_apart(void) {
	TestRng rng = { 35 };
	DedupChunkerParams p = { DEDUP_CHUNKER_ORACLE, 2 * KiB, 8 * KiB, 32 * KiB };
	DedupRegionCacheStats c0, c1;
	DedupWriterStats ws;
	Env e;

	env_open(&e, &pipeline_opts);
	OraFile day1 = ora_file(1200, 1, &rng);
	uint8_t *day2 = test_malloc(day1.piece_len);
	memcpy(day2, day1.piece, day1.piece_len);
	for (size_t k = 0; k < day1.formatted; k += 3) {
		size_t at = ORA_BLOCK + k * (ORA_FRAME + ORA_BLOCK) + ORA_FRAME;
		ora_block(day2 + at, 0x06, (uint32_t) k, 2000 + (uint32_t) k, 2, &rng);
	}
	const struct {
		const uint8_t *data;
		size_t len;
	} files[] = { { day1.piece, day1.piece_len }, { day1.image, day1.image_len }, { day2, day1.piece_len } };
	uint64_t ino[3];
	uint64_t regions[3];
	for (size_t f = 0; f < ELEMENTSOF(files); f++) {
		ino[f] = env_new_inode(&e);
		DedupWriter *w = env_write(&e, &p, files[f].data, files[f].len, &rng);
		env_commit(&e, w, ino[f]);
		dedup_writer_stats(w, &ws);
		regions[f] = ws.regions;
		dedup_writer_free(w);
	}
	/* The image copy's blocks are the piece's: it names the piece's regions, with zero runs between. */
	ASSERT(regions[0] >= 32 && regions[1] <= 1 && regions[2] >= 8);

	/*
	 * Loaded into the cache: in 1 MiB reads, about the regions across a
	 * read's ends; in one read of the whole file, none of the piece's, the
	 * image's few (the region with the piece's header block, which the
	 * image does not name), and for day 2 only day 1's regions, which it
	 * names in part: never its own.
	 */
	const uint64_t most[] = { regions[0] / 2, regions[0] / 2, regions[0] + regions[2] / 2 };
	const uint64_t whole[] = { 0, 2, regions[0] };
	for (size_t f = 0; f < ELEMENTSOF(files); f++) {
		uint8_t *buf = test_malloc(files[f].len);
		env_reopen_store(&e);
		dedup_store_cache_stats(e.store, &c0);
		read_blocks(&e, ino[f], files[f].data, files[f].len, MiB);
		dedup_store_cache_stats(e.store, &c1);
		ASSERT(c1.loads - c0.loads <= most[f]);
		env_reopen_store(&e);
		dedup_store_cache_stats(e.store, &c0);
		ASSERT(dedup_file_read(e.store, ino[f], files[f].len, 0, buf, files[f].len) == (ssize_t) files[f].len);
		ASSERT(memcmp(buf, files[f].data, files[f].len) == 0);
		dedup_store_cache_stats(e.store, &c1);
		ASSERT(c1.loads - c0.loads <= whole[f]);
		env_check_file(&e, ino[f], files[f].data, files[f].len, &rng);
		free(buf);
	}

	/*
	 * Two pieces' blocks taken in turns: each region is named whole and in
	 * order, with the other piece's between its chunks, so the spans of
	 * regions that could each be placed overlap.  Placing both would write
	 * one over the other (invariant 6): one is placed, the other cached.
	 */
	OraFile other = ora_file(1200, 1, &rng);
	uint64_t ino_other = env_new_inode(&e);
	DedupWriter *w = env_write(&e, &p, other.piece, other.piece_len, &rng);
	env_commit(&e, w, ino_other);
	dedup_writer_free(w);
	size_t mixed_len = 2 * day1.image_len;
	uint8_t *mixed = test_malloc(mixed_len);
	for (size_t k = 0; k < day1.image_len / ORA_BLOCK; k++) {
		memcpy(mixed + 2 * k * ORA_BLOCK, day1.image + k * ORA_BLOCK, ORA_BLOCK);
		memcpy(mixed + (2 * k + 1) * ORA_BLOCK, other.image + k * ORA_BLOCK, ORA_BLOCK);
	}
	uint64_t ino_mixed = env_new_inode(&e);
	w = env_write(&e, &p, mixed, mixed_len, &rng);
	env_commit(&e, w, ino_mixed);
	dedup_writer_stats(w, &ws);
	ASSERT(ws.new_chunks <= 2);
	dedup_writer_free(w);
	env_reopen_store(&e);
	read_blocks(&e, ino_mixed, mixed, mixed_len, MiB);
	env_check_file(&e, ino_mixed, mixed, mixed_len, &rng);
	env_check_file(&e, ino_other, other.piece, other.piece_len, &rng);

	free(mixed);
	free(day2);
	ora_file_free(&other);
	ora_file_free(&day1);
	env_close(&e);
}

/* B repeats parts of A, out of order and cut inside regions: B's reads mix placed, cached and partial regions. */
static void test_out_of_order(void) {
	TestRng rng = { 32 };
	size_t len = 4 * MiB, blen = 4 * MiB + 512 * KiB;
	uint8_t *a = test_malloc(len), *b = test_malloc(blen), *buf = test_malloc(blen);
	Env e;

	env_open(&e, &pipeline_opts);
	fill_text(&rng, a, len);
	memcpy(b, a + 3 * MiB, MiB);
	fill_text(&rng, b + MiB, 512 * KiB);
	memcpy(b + MiB + 512 * KiB, a, MiB);
	memcpy(b + 2 * MiB + 512 * KiB, a + 1536 * KiB, 1536 * KiB);
	memcpy(b + 4 * MiB, a + 100 * KiB, 512 * KiB);
	uint64_t ia = env_seal(&e, a, len, &rng, NULL);
	uint64_t ib = env_seal(&e, b, blen, &rng, NULL);

	env_reopen_store(&e);
	read_blocks(&e, ib, b, blen, MiB);
	read_blocks(&e, ib, b, blen, 3 * MiB / 2);
	ASSERT(dedup_file_read(e.store, ib, blen, 0, buf, blen) == (ssize_t) blen && memcmp(buf, b, blen) == 0);
	env_check_file(&e, ib, b, blen, &rng);
	env_reopen_store(&e);
	env_check_file(&e, ia, a, len, &rng);
	read_blocks(&e, ia, a, len, MiB);
	free(a);
	free(b);
	free(buf);
	env_close(&e);
}

typedef struct Reader {
	Env *e;
	uint64_t ino;
	const uint8_t *data;
	size_t len;
	unsigned first; /* block it starts at */
	uint64_t seed;  /* 0: blocks; else random reads */
} Reader;

static void *reader_run(void *userdata) {
	Reader *r = userdata;
	size_t blocks = (r->len + MiB - 1) / MiB;
	uint8_t *buf = test_malloc(MiB + 64 * KiB);
	TestRng rng = { r->seed };

	for (unsigned pass = 0; pass < 3; pass++)
		for (size_t k = 0; k < blocks; k++) {
			size_t off, n;
			if (r->seed) {
				off = (size_t) (test_rng_next(&rng) % r->len);
				n = 1 + (size_t) (test_rng_next(&rng) % (MiB + 64 * KiB));
			} else {
				off = ((k + r->first) % blocks) * MiB;
				n = MiB;
			}
			n = MIN(n, r->len - off);
			ASSERT(dedup_file_read(r->e->store, r->ino, r->len, off, buf, n) == (ssize_t) n);
			ASSERT(memcmp(buf, r->data + off, n) == 0);
		}
	free(buf);
	return NULL;
}

/* Readers of one file at once: blocks placed by one while another loads the same regions into the cache. */
static void test_threads(void) {
	TestRng rng = { 33 };
	size_t len = 6 * MiB + 999;
	uint8_t *data = test_malloc(len);
	Env e;

	env_open(&e, &pipeline_opts);
	fill_text(&rng, data, len);
	uint64_t ino = env_seal(&e, data, len, &rng, NULL);
	env_reopen_store(&e);

	Reader readers[5];
	pthread_t threads[5];
	for (unsigned k = 0; k < ELEMENTSOF(readers); k++) {
		readers[k] = (Reader) { .e = &e, .ino = ino, .data = data, .len = len, .first = k, .seed = k >= 3 ? k : 0 };
		ASSERT(pthread_create(&threads[k], NULL, reader_run, readers + k) == 0);
	}
	for (unsigned k = 0; k < ELEMENTSOF(readers); k++)
		ASSERT(pthread_join(threads[k], NULL) == 0);
	free(data);
	env_close(&e);
}

typedef struct Units {
	uint64_t container[4096], offset[4096], size[4096];
	size_t n;
} Units;

static int unit_collect(const CatalogChunk *ch, void *userdata) {
	Units *u = userdata;
	for (size_t i = 0; i < u->n; i++)
		if (u->container[i] == ch->container && u->offset[i] == ch->offset)
			return 0;
	ASSERT(u->n < ELEMENTSOF(u->offset) && ch->region_size > 0);
	u->container[u->n] = ch->container;
	u->offset[u->n] = ch->offset;
	u->size[u->n++] = ch->region_size;
	return 0;
}

/* A flipped byte in every region, most of which a 1 MiB read places: every read fails, none returns bytes. */
static void test_damage(void) {
	TestRng rng = { 34 };
	size_t len = 6 * MiB;
	uint8_t *data = test_malloc(len), *buf = test_malloc(len);
	Units *u = test_malloc(sizeof(*u));
	Env e;

	env_open(&e, &pipeline_opts);
	fill_text(&rng, data, len);
	uint64_t ino = env_seal(&e, data, len, &rng, NULL);
	u->n = 0;
	ASSERT_OK(catalog_chunks_foreach(e.catalog, 0, unit_collect, u));
	ASSERT(u->n >= 8);
	for (size_t k = 0; k < u->n; k++) {
		char name[DEDUP_CONTAINER_NAME_MAX], path[256];
		snprintf(path, sizeof(path), "%s/%s", e.tier_dir, dedup_container_name(u->container[k], name));
		int fd = open(path, O_RDWR | O_CLOEXEC);
		uint8_t byte;
		off_t at = (off_t) (u->offset[k] + u->size[k] - 7);
		ASSERT(fd >= 0 && pread(fd, &byte, 1, at) == 1);
		byte ^= 0x20;
		ASSERT(pwrite(fd, &byte, 1, at) == 1);
		close(fd);
	}

	env_reopen_store(&e);
	for (size_t off = 0; off < len; off += MiB)
		ASSERT(dedup_file_read(e.store, ino, len, off, buf, MiB) == -EIO);
	ASSERT(dedup_file_read(e.store, ino, len, 0, buf, len) == -EIO);
	free(u);
	free(data);
	free(buf);
	env_close(&e);
}

int main(void) {
	test_placed();
	test_placed_apart();
	test_out_of_order();
	test_threads();
	test_damage();
	return 0;
}
