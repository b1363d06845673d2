/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The chunk store end to end, on a real SQLite catalog and a real directory
 * backend: round trips of every kind of data and size, deduplication within
 * and across files (and across a shift), exact reference counts through
 * drops, the collector (never freeing what is referenced, compacting,
 * leaving nothing behind), corruption turning into -EIO for exactly the
 * affected ranges, recovery from writers that never committed, and readers
 * running while the collector moves their chunks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dedup/frame.h"
#include "dedup/key.h"
#include "tests/dedup/oracle-test.h"
#include "tests/dedup/store-test.h"

static void test_roundtrip(void) {
	static const size_t sizes[] = { 0, 1, 63, 4095, 64 * KiB, 64 * KiB + 1, 1 * MiB + 123, 9 * MiB + 7 };
	TestRng rng = { 1 };
	Env e;
	env_open(&e, NULL);

	for (size_t k = 0; k < 4; k++)
		for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
			size_t len = sizes[i];
			uint8_t *data = test_malloc(len);
			switch (k) {
			case 0:
				test_rng_fill(&rng, data, len);
				break;
			case 1:
				fill_text(&rng, data, len);
				break;
			case 2:
				memset(data, 0, len);
				break;
			default:
				fill_sparse(&rng, data, len);
			}
			DedupWriterStats st;
			uint64_t ino = env_seal(&e, data, len, &rng, &st);
			ASSERT(st.logical_bytes == len);
			if (k == 2)
				ASSERT(st.zero_bytes == len && st.new_chunks == 0);
			if (k == 1 && len >= MiB)
				ASSERT(st.stored_bytes < st.new_bytes / 2);
			env_check_file(&e, ino, data, len, &rng);
			free(data);
		}

	/* Everything again from a reopened store: nothing lived only in memory. */
	env_reopen_store(&e);
	uint8_t *data = test_malloc(3 * MiB);
	fill_sparse(&rng, data, 3 * MiB);
	uint64_t ino = env_seal(&e, data, 3 * MiB, &rng, NULL);
	env_reopen_store(&e);
	env_check_file(&e, ino, data, 3 * MiB, &rng);
	free(data);
	env_close(&e);
}

static void test_fixed_chunks(void) {
	DedupChunkerParams p = DEDUP_CHUNKER_PARAMS_FIXED(8 * KiB);
	TestRng rng = { 2 };
	size_t len = 2 * MiB + 100;
	uint8_t *data = test_malloc(len);
	Env e;

	env_open(&e, NULL);
	fill_text(&rng, data, len);
	/* Every other 8 KiB block repeats the first: fixed blocks dedup exactly. */
	for (size_t off = 16 * KiB; off + 8 * KiB <= len; off += 16 * KiB)
		memcpy(data + off, data, 8 * KiB);
	uint64_t ino = env_new_inode(&e);
	DedupWriter *w = env_write(&e, &p, data, len, &rng);
	DedupWriterStats st;
	dedup_writer_stats(w, &st);
	ASSERT(st.chunks == (len + 8 * KiB - 1) / (8 * KiB));
	ASSERT(st.dup_chunks >= len / (16 * KiB) - 1);
	env_commit(&e, w, ino);
	dedup_writer_free(w);
	env_check_file(&e, ino, data, len, &rng);
	free(data);
	env_close(&e);
}

static void test_shifted_copy(void) {
	TestRng rng = { 3 };
	size_t len = 8 * MiB;
	uint8_t *a = test_malloc(len), *b = test_malloc(len + 1000);
	DedupWriterStats st;
	Env e;

	env_open(&e, NULL);
	test_rng_fill(&rng, a, len);
	test_rng_fill(&rng, b, 1000);
	memcpy(b + 1000, a, len);

	uint64_t ia = env_seal(&e, a, len, &rng, &st);
	ASSERT(st.new_bytes == len);
	uint64_t ib = env_seal(&e, b, len + 1000, &rng, &st);
	/* Only the chunks around the shift are new (content-defined chunking resynchronises). */
	ASSERT(st.new_bytes < 256 * KiB);
	ASSERT(st.dup_bytes > len - 256 * KiB);
	env_check_file(&e, ia, a, len, &rng);
	env_check_file(&e, ib, b, len + 1000, &rng);
	uint64_t inos[] = { ia, ib };
	env_check_refs(&e, inos, 2);
	free(a);
	free(b);
	env_close(&e);
}

static void test_dedup_within_and_across(void) {
	TestRng rng = { 4 };
	size_t half = 3 * MiB;
	uint8_t *x = test_malloc(2 * half);
	DedupWriterStats st;
	Env e;

	env_open(&e, NULL);
	test_rng_fill(&rng, x, half);
	memcpy(x + half, x, half);
	uint64_t i1 = env_seal(&e, x, 2 * half, &rng, &st);
	/* The second half repeats the first: stored once (give or take the chunk at the seam). */
	ASSERT(st.new_bytes <= half + 256 * KiB);
	ASSERT(st.dup_bytes >= half - 256 * KiB);

	uint64_t i2 = env_seal(&e, x, 2 * half, &rng, &st);
	ASSERT(st.new_chunks == 0 && st.dup_bytes == 2 * half);

	env_check_file(&e, i1, x, 2 * half, &rng);
	env_check_file(&e, i2, x, 2 * half, &rng);
	uint64_t inos[] = { i1, i2 };
	env_check_refs(&e, inos, 2);
	free(x);
	env_close(&e);
}

/* A second "full backup" with 5% of its 8 KiB blocks changed: few new bytes, few index lookups. */
static void test_second_backup(void) {
	TestRng rng = { 5 };
	size_t len = 16 * MiB;
	uint8_t *a = test_malloc(len), *b = test_malloc(len);
	DedupWriterStats st;
	Env e;

	env_open(&e, NULL);
	test_rng_fill(&rng, a, len);
	memcpy(b, a, len);
	for (size_t blk = 0; blk < len / (8 * KiB); blk++)
		if (test_rng_next(&rng) % 20 == 0)
			test_rng_fill(&rng, b + blk * 8 * KiB, 8 * KiB);
	uint64_t ia = env_seal(&e, a, len, &rng, NULL);
	env_reopen_store(&e); /* cold caches: everything the second pass knows comes from the catalog */
	uint64_t ib = env_seal(&e, b, len, &rng, &st);
	ASSERT(st.new_bytes < len / 4);
	ASSERT(st.dup_bytes > len / 2);
	/* The locality cache answers almost every duplicate after the first one of the container. */
	ASSERT(st.index_lookups < st.chunks / 10);
	env_check_file(&e, ia, a, len, &rng);
	env_check_file(&e, ib, b, len, &rng);
	free(a);
	free(b);
	env_close(&e);
}

/* Two writers store the same new data at once: the second borrows the first's chunks in flight. */
static void test_racing_writers(void) {
	TestRng rng = { 6 };
	size_t len = 2 * MiB;
	uint8_t *data = test_malloc(len);
	DedupWriter *w1, *w2;
	DedupWriterStats s1, s2;
	Env e;

	env_open(&e, NULL);
	test_rng_fill(&rng, data, len);
	ASSERT_OK(dedup_writer_new(e.store, NULL, 1, DEDUP_STORE_REGION_DEFAULT, &w1));
	ASSERT_OK(dedup_writer_new(e.store, NULL, 1, DEDUP_STORE_REGION_DEFAULT, &w2));
	ASSERT_OK(dedup_writer_feed(w1, data, len));
	ASSERT_OK(dedup_writer_feed(w2, data, len));
	ASSERT_OK(dedup_writer_finish(w1));
	ASSERT_OK(dedup_writer_finish(w2));
	dedup_writer_stats(w1, &s1);
	dedup_writer_stats(w2, &s2);
	ASSERT(s1.new_bytes == len);
	ASSERT(s2.new_chunks == 0 && s2.dup_bytes == len);
	/* What each file's seal added (its st_blocks): w1's copy, all of it; w2 added nothing. */
	ASSERT(s1.stored_bytes > len / 2 && s2.stored_bytes == 0);

	uint64_t i1 = env_new_inode(&e), i2 = env_new_inode(&e);
	env_commit(&e, w1, i1);
	env_commit(&e, w2, i2);
	dedup_writer_free(w1);
	dedup_writer_free(w2);
	env_check_file(&e, i1, data, len, &rng);
	env_check_file(&e, i2, data, len, &rng);
	uint64_t inos[] = { i1, i2 };
	env_check_refs(&e, inos, 2);

	/* A collection keeps what both files use. */
	DedupGcStats gc;
	DedupGcOptions o = { .live_threshold = 0.9 };
	ASSERT_OK(dedup_store_gc(e.store, &o, &gc));
	env_check_file(&e, i1, data, len, &rng);
	free(data);
	env_close(&e);
}

typedef struct ChunkList {
	CatalogChunk *items;
	size_t n;
} ChunkList;

static int chunk_collect(const CatalogChunk *ch, void *userdata) {
	ChunkList *l = userdata;
	l->items = realloc(l->items, (l->n + 1) * sizeof(*l->items));
	ASSERT(l->items);
	l->items[l->n++] = *ch;
	return 0;
}

/* A file of every kind of content: compressible, random (stored raw), zeros, and repeats of itself. */
static uint8_t *mixed_file(TestRng *rng, size_t len) {
	uint8_t *data = test_malloc(len);
	for (size_t off = 0; off < len;) {
		size_t n = MIN(len - off, 64 * KiB + (size_t) (test_rng_next(rng) % (600 * KiB)));
		switch (test_rng_next(rng) % 4) {
		case 0:
			fill_text(rng, data + off, n);
			break;
		case 1:
			test_rng_fill(rng, data + off, n);
			break;
		case 2:
			memset(data + off, 0, n);
			break;
		default:
			if (off >= n)
				memcpy(data + off, data + (size_t) (test_rng_next(rng) % (off - n + 1)), n);
			else
				fill_sparse(rng, data + off, n);
		}
		off += n;
	}
	return data;
}

/*
 * With the store's encoders compressing a writer's regions on other
 * threads, the containers come out as one thread writes them: the same
 * regions, in the same order, at the same places, with the same shares, for
 * any number of encoders, several registrations per file (sync_bytes) and
 * several containers; two writers at once each find their file whole.
 */
static void test_parallel_encoding(void) {
	static const unsigned workers[] = { 0, 1, 3 };
	const size_t len = 12 * MiB;
	ChunkList lists[ELEMENTSOF(workers)] = {};
	DedupWriterStats stats[ELEMENTSOF(workers)];
	TestRng data_rng = { 31 };
	uint8_t *data = mixed_file(&data_rng, len);

	for (size_t k = 0; k < ELEMENTSOF(workers); k++) {
		DedupStoreOptions o = {
			.encode_workers = workers[k],
			.container_size = 2 * MiB,
			.sync_bytes = 3 * MiB,
			.region_size = 32 * KiB,
		};
		TestRng rng = { 32 };
		Env e;
		env_open(&e, &o);
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		uint64_t ino = env_seal(&e, data, len, &rng, &stats[k]);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		/*
		 * The writer's sleeps for the encoders (what a seal is not charged
		 * by fs/'s throttle) fit in its time; without encoders it has none.
		 */
		uint64_t took = (uint64_t) ((int64_t) (t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec));
		ASSERT(stats[k].encode_wait_ns <= took);
		if (workers[k] == 0)
			ASSERT(stats[k].encode_wait_ns == 0 && stats[k].encode_cpu_ns == 0);
		/* Slept for an encoder: one ran a job of its, and its CPU for that is reported (the throttle charges it). */
		if (stats[k].encode_wait_ns > 0)
			ASSERT(stats[k].encode_cpu_ns > 0);
		stats[k].encode_wait_ns = 0;
		stats[k].encode_cpu_ns = 0;
		ASSERT_OK(catalog_chunks_foreach(e.catalog, 0, chunk_collect, &lists[k]));
		env_check_file(&e, ino, data, len, &rng);
		env_reopen_store(&e);
		env_check_file(&e, ino, data, len, &rng);

		if (workers[k] > 0) {
			/* Two writers at once, each at its own level, sharing the encoders. */
			TestRng r2 = { 33 };
			uint8_t *other = mixed_file(&r2, 5 * MiB);
			DedupWriter *w1, *w2;
			ASSERT_OK(dedup_writer_new(e.store, NULL, 1, DEDUP_STORE_REGION_DEFAULT, &w1));
			ASSERT_OK(dedup_writer_new(e.store, NULL, 9, DEDUP_STORE_REGION_DEFAULT, &w2));
			for (size_t off = 0; off < 5 * MiB; off += 256 * KiB) {
				ASSERT_OK(dedup_writer_feed(w1, other + off, 256 * KiB));
				ASSERT_OK(dedup_writer_feed(w2, data + off, 256 * KiB));
			}
			ASSERT_OK(dedup_writer_finish(w1));
			ASSERT_OK(dedup_writer_finish(w2));
			uint64_t i1 = env_new_inode(&e), i2 = env_new_inode(&e);
			env_commit(&e, w1, i1);
			env_commit(&e, w2, i2);
			dedup_writer_free(w1);
			dedup_writer_free(w2);
			env_check_file(&e, i1, other, 5 * MiB, &rng);
			env_check_file(&e, i2, data, 5 * MiB, &rng);
			uint64_t inos[] = { ino, i1, i2 };
			env_check_refs(&e, inos, 3);
			free(other);

			/* A writer freed with regions still at the encoders leaves nothing behind but garbage. */
			ASSERT_OK(dedup_writer_new(e.store, NULL, DEDUP_STORE_LEVEL_DEFAULT, DEDUP_STORE_REGION_DEFAULT, &w1));
			ASSERT_OK(dedup_writer_feed(w1, data + 7 * MiB, 5 * MiB));
			dedup_writer_free(w1);
			env_check_file(&e, ino, data, len, &rng);
		}
		env_close(&e);
	}

	for (size_t k = 1; k < ELEMENTSOF(workers); k++) {
		ASSERT(memcmp(&stats[k], &stats[0], sizeof(stats[0])) == 0);
		ASSERT(lists[k].n == lists[0].n && lists[0].n > 100);
		ASSERT(memcmp(lists[k].items, lists[0].items, lists[0].n * sizeof(*lists[0].items)) == 0);
	}
	/* It took several containers, and regions of several chunks. */
	ASSERT(lists[0].items[lists[0].n - 1].container > 2);
	ASSERT(stats[0].regions < stats[0].new_chunks);
	for (size_t k = 0; k < ELEMENTSOF(workers); k++)
		free(lists[k].items);
	free(data);
}

static void test_commit_rules(void) {
	TestRng rng = { 7 };
	uint8_t data[100 * 1024];
	DedupWriter *w;
	Env e;

	env_open(&e, NULL);
	test_rng_fill(&rng, data, sizeof(data));
	ASSERT_RET(dedup_writer_new(e.store, NULL, 99, DEDUP_STORE_REGION_DEFAULT, &w), -EINVAL);
	DedupChunkerParams bad = { .mode = DEDUP_CHUNKER_CDC, .min_size = 1, .avg_size = 3, .max_size = 2 };
	ASSERT_RET(dedup_writer_new(e.store, &bad, 0, DEDUP_STORE_REGION_DEFAULT, &w), -EINVAL);

	uint64_t ino = env_new_inode(&e);
	ASSERT_OK(dedup_writer_new(e.store, NULL, 0, DEDUP_STORE_REGION_DEFAULT, &w));
	ASSERT_OK(dedup_writer_feed(w, data, sizeof(data)));
	ASSERT_OK(catalog_begin(e.catalog));
	ASSERT_RET(dedup_writer_commit(w, ino), -EINVAL); /* not finished */
	catalog_rollback(e.catalog);
	ASSERT_OK(dedup_writer_finish(w));
	ASSERT_RET(dedup_writer_feed(w, data, 1), -EINVAL);
	ASSERT_RET(dedup_writer_finish(w), -EINVAL);
	dedup_writer_free(w);

	/* A rolled-back commit leaves the writer able to commit again. */
	w = env_write(&e, NULL, data, sizeof(data), &rng);
	ASSERT_OK(catalog_begin(e.catalog));
	ASSERT_OK(dedup_writer_commit(w, ino));
	catalog_rollback(e.catalog);
	ASSERT(dedup_file_read(e.store, ino, sizeof(data), 0, data, 10) == -EIO);
	env_commit(&e, w, ino);
	/* A second recipe for the same file is refused. */
	ASSERT_OK(catalog_begin(e.catalog));
	ASSERT_RET(dedup_writer_commit(w, ino), -EEXIST);
	catalog_rollback(e.catalog);
	dedup_writer_free(w);
	uint8_t back[sizeof(data)];
	ASSERT(dedup_file_read(e.store, ino, sizeof(data), 0, back, sizeof(back)) == (ssize_t) sizeof(back));
	ASSERT(memcmp(back, data, sizeof(data)) == 0);
	/* A file_size beyond the recipe is damage, not zeros. */
	ASSERT(dedup_file_read(e.store, ino, sizeof(data) + 5, sizeof(data), back, 5) == -EIO);
	env_check_refs(&e, &ino, 1);

	/* Dropping a file without a recipe is fine. */
	env_drop(&e, env_new_inode(&e));

	/* Options out of range are refused. */
	DedupStore *other;
	DedupStoreOptions bad_opts[] = {
		{ .container_size = DEDUP_STORE_CONTAINER_SIZE_MIN - 1 },
		{ .container_size = DEDUP_STORE_CONTAINER_SIZE_MAX + 1 },
		{ .zstd_level = 20 },
		{ .verify = _DEDUP_VERIFY_MAX },
		{ .readahead_bytes = DEDUP_STORE_READAHEAD_MAX + 1 },
	};
	for (size_t i = 0; i < ELEMENTSOF(bad_opts); i++)
		ASSERT_RET(dedup_store_open(e.catalog, 0, e.backend, &bad_opts[i], &other), -EINVAL);
	env_close(&e);
}

static void test_refcounts_drop_gc(void) {
	TestRng rng = { 8 };
	size_t len = 4 * MiB;
	uint8_t *base = test_malloc(len), *f[3];
	uint64_t ino[3];
	DedupStoreOptions o = { .container_size = 256 * KiB };
	Env e;

	env_open(&e, &o);
	test_rng_fill(&rng, base, len);
	for (int i = 0; i < 3; i++) {
		f[i] = test_malloc(len);
		memcpy(f[i], base, len);
		/* Each file changes its own third, and repeats a block inside itself. */
		test_rng_fill(&rng, f[i] + (size_t) i * len / 3, len / 3);
		memcpy(f[i] + len - 300 * KiB, f[i] + 100 * KiB, 200 * KiB);
		ino[i] = env_seal(&e, f[i], len, &rng, NULL);
	}
	env_check_refs(&e, ino, 3);

	env_drop(&e, ino[1]);
	uint64_t keep[] = { ino[0], ino[2] };
	env_check_refs(&e, keep, 2);
	DedupGcStats gc;
	ASSERT_OK(dedup_store_gc(e.store, NULL, &gc));
	ASSERT(gc.chunks_deleted > 0);
	env_check_refs(&e, keep, 2);
	env_check_file(&e, ino[0], f[0], len, &rng);
	env_check_file(&e, ino[2], f[2], len, &rng);

	env_drop(&e, ino[0]);
	env_drop(&e, ino[2]);
	DedupStoreStats st;
	ASSERT_OK(dedup_store_stats(e.store, &st));
	ASSERT(st.dead_chunks == st.chunks && st.live_bytes == 0 && st.referenced_bytes == 0);
	ASSERT_OK(dedup_store_gc(e.store, NULL, &gc));
	ASSERT_OK(dedup_store_stats(e.store, &st));
	ASSERT(st.chunks == 0 && st.containers == 0 && st.stored_bytes == 0);
	ASSERT(env_count_objects(&e) == 0);

	/* The store keeps working after it was emptied. */
	uint64_t again = env_seal(&e, f[1], len, &rng, NULL);
	env_check_file(&e, again, f[1], len, &rng);
	env_check_refs(&e, &again, 1);
	for (int i = 0; i < 3; i++)
		free(f[i]);
	free(base);
	env_close(&e);
}

typedef struct GcProgress {
	unsigned calls, stop_after; /* stop_after: containers to compact before stopping; 0 = never */
	uint64_t done, total;
} GcProgress;

static int gc_progress(uint64_t done, uint64_t total, void *userdata) {
	GcProgress *p = userdata;
	ASSERT(done <= total && done >= p->done);
	p->done = done;
	p->total = total;
	p->calls++;
	return p->stop_after && p->calls > p->stop_after ? -ECANCELED : 0;
}

/* A and B share chunks; dropping A and collecting (with compaction) must leave B exact. */
static void test_gc_keeps_shared(void) {
	TestRng rng = { 9 };
	size_t len = 5 * MiB;
	uint8_t *a = test_malloc(len), *b = test_malloc(len);
	DedupStoreOptions o = { .container_size = 512 * KiB, .region_cache_bytes = 256 * KiB };
	Env e;

	env_open(&e, &o);
	test_rng_fill(&rng, a, len);
	memcpy(b, a, len);
	for (size_t off = 0; off < len; off += 512 * KiB)
		test_rng_fill(&rng, b + off, 100 * KiB);
	uint64_t ia = env_seal(&e, a, len, &rng, NULL);
	uint64_t ib = env_seal(&e, b, len, &rng, NULL);
	env_drop(&e, ia);

	/* A compaction stopped by its progress callback leaves B exact and resumes on the next run. */
	DedupGcStats gc;
	GcProgress stop = { .stop_after = 1 };
	DedupGcOptions go = { .live_threshold = 1.0, .progress = gc_progress, .userdata = &stop };
	ASSERT(dedup_store_gc(e.store, &go, &gc) == -ECANCELED);
	ASSERT(gc.chunks_deleted > 0 && gc.containers_compacted == 1 && stop.calls == 2);
	env_check_file(&e, ib, b, len, &rng);
	env_check_refs(&e, &ib, 1);

	GcProgress all = {};
	go.userdata = &all;
	ASSERT_OK(dedup_store_gc(e.store, &go, &gc));
	ASSERT(gc.containers_compacted > 0 && all.calls == gc.containers_compacted + 1);
	ASSERT(all.done == all.total && all.total > 0);
	env_check_file(&e, ib, b, len, &rng);
	env_check_refs(&e, &ib, 1);
	go = (DedupGcOptions) { .live_threshold = 1.0 };
	ASSERT_OK(dedup_store_gc(e.store, &go, &gc));
	env_reopen_store(&e);
	env_check_file(&e, ib, b, len, &rng);
	free(a);
	free(b);
	env_close(&e);
}

static void test_compaction(void) {
	TestRng rng = { 10 };
	DedupStoreOptions o = { .container_size = 128 * KiB, .region_cache_bytes = 128 * KiB };
	size_t len = 1 * MiB + 333;
	uint8_t *data[8];
	uint64_t ino[8];
	Env e;

	env_open(&e, &o);
	for (int i = 0; i < 8; i++) {
		data[i] = test_malloc(len);
		if (i % 2)
			fill_text(&rng, data[i], len);
		else
			test_rng_fill(&rng, data[i], len);
		ino[i] = env_seal(&e, data[i], len, &rng, NULL);
	}
	DedupStoreStats before, after;
	ASSERT_OK(dedup_store_stats(e.store, &before));
	for (int i = 0; i < 8; i += 2)
		env_drop(&e, ino[i]);

	/* Threshold 0: dead chunks and empty containers go, nothing is copied. */
	DedupGcStats gc;
	DedupGcOptions none = { .live_threshold = 0 };
	ASSERT_OK(dedup_store_gc(e.store, &none, &gc));
	ASSERT(gc.bytes_copied == 0 && gc.containers_compacted == 0);

	ASSERT_OK(dedup_store_gc(e.store, NULL, &gc));
	ASSERT_OK(dedup_store_stats(e.store, &after));
	ASSERT(after.stored_bytes < before.stored_bytes * 3 / 4);
	ASSERT(after.live_bytes <= after.stored_bytes);
	uint64_t keep[4];
	for (int i = 1, k = 0; i < 8; i += 2, k++) {
		env_check_file(&e, ino[i], data[i], len, &rng);
		keep[k] = ino[i];
	}
	env_check_refs(&e, keep, 4);

	/* Sparse containers (drop three of the four left, keep one) get compacted. */
	for (int i = 1; i < 7; i += 2)
		env_drop(&e, ino[i]);
	ASSERT_OK(dedup_store_gc(e.store, NULL, &gc));
	env_check_file(&e, ino[7], data[7], len, &rng);
	env_reopen_store(&e);
	env_check_file(&e, ino[7], data[7], len, &rng);
	env_check_refs(&e, &ino[7], 1);
	ASSERT_OK(dedup_store_stats(e.store, &after));
	/* Every container but the open one is at least half live after compaction. */
	ASSERT(after.live_bytes * 2 + 2 * o.container_size >= after.stored_bytes);
	for (int i = 0; i < 8; i++)
		free(data[i]);
	env_close(&e);
}

/* The distinct units (container, offset) chunks are in. */
typedef struct RegionCount {
	uint64_t offsets[4096];
	uint64_t containers[4096];
	size_t n;
} RegionCount;

static int unit_of_chunk(const CatalogChunk *ch, void *userdata) {
	RegionCount *rc = userdata;
	for (size_t i = 0; i < rc->n; i++)
		if (rc->containers[i] == ch->container && rc->offsets[i] == ch->offset)
			return 0;
	ASSERT(rc->n < ELEMENTSOF(rc->offsets));
	rc->containers[rc->n] = ch->container;
	rc->offsets[rc->n++] = ch->offset;
	return 0;
}

/* A sequential restore decompresses each region once, and a prefetch leaves the read nothing to load. */
static void test_decode_once(void) {
	TestRng rng = { 12 };
	DedupStoreOptions o = { .container_size = 1 * MiB, .readahead_bytes = 512 * KiB };
	size_t len = 6 * MiB + 777;
	uint8_t *data = test_malloc(len), *buf = test_malloc(len);
	DedupRegionCacheStats c0, c1;
	DedupWriterStats ws;
	Env e;

	env_open(&e, &o);
	fill_text(&rng, data, len);
	uint64_t ino = env_seal(&e, data, len, &rng, &ws);
	ASSERT(ws.regions > 10 && ws.regions * 4 < ws.new_chunks);
	RegionCount rc = {};
	ASSERT_OK(catalog_chunks_foreach(e.catalog, 0, unit_of_chunk, &rc));
	ASSERT(rc.n == ws.regions);

	/* 64 KiB reads, front to back, as a restore: every region loaded exactly once. */
	env_reopen_store(&e);
	dedup_store_cache_stats(e.store, &c0);
	for (size_t off = 0; off < len; off += 64 * KiB) {
		size_t n = MIN(64 * KiB, len - off);
		ASSERT(dedup_file_read(e.store, ino, len, off, buf + off, n) == (ssize_t) n);
	}
	ASSERT(memcmp(buf, data, len) == 0);
	dedup_store_cache_stats(e.store, &c1);
	ASSERT(c1.loads - c0.loads == ws.regions);
	ASSERT(c1.bytes <= c1.max_bytes && c1.bytes > 0);

	/* Prefetched ahead (as a read-ahead thread would), then read: nothing more to decompress. */
	env_reopen_store(&e);
	ASSERT_OK(dedup_file_prefetch(e.store, ino, len, 0, len));
	ASSERT_OK(dedup_file_prefetch(e.store, ino, len, len, 100)); /* past the end: nothing */
	dedup_store_cache_stats(e.store, &c0);
	ASSERT(c0.loads == ws.regions);
	ASSERT(dedup_file_read(e.store, ino, len, 0, buf, len) == (ssize_t) len && memcmp(buf, data, len) == 0);
	dedup_store_cache_stats(e.store, &c1);
	ASSERT(c1.loads == c0.loads && c1.hits > c0.hits);
	free(data);
	free(buf);
	env_close(&e);
}

/*
 * Regions partly dead (B repeats some chunks of A; A dropped) are compacted:
 * their live chunks compressed again into new regions, at the level they
 * had; regions wholly live are copied as they are; B reads back exact.
 */
static void test_partly_dead_regions(void) {
	TestRng rng = { 13 };
	DedupStoreOptions o = { .container_size = 256 * KiB };
	size_t len = 2 * MiB;
	uint8_t *a = test_malloc(len), *b = test_malloc(len);
	DedupWriterStats wa;
	Env e;

	env_open(&e, &o);
	fill_text(&rng, a, len);
	/* B: the first half of A, then a quarter of its own. */
	memcpy(b, a, len / 2);
	fill_text(&rng, b + len / 2, len / 4);
	DedupWriter *w;
	uint64_t ia = env_new_inode(&e);
	ASSERT_OK(dedup_writer_new(e.store, NULL, 7, DEDUP_STORE_REGION_DEFAULT, &w));
	ASSERT_OK(dedup_writer_feed(w, a, len));
	ASSERT_OK(dedup_writer_finish(w));
	env_commit(&e, w, ia);
	dedup_writer_stats(w, &wa);
	dedup_writer_free(w);
	uint64_t ib = env_seal(&e, b, len / 2 + len / 4, &rng, NULL);
	env_drop(&e, ia);

	DedupStoreStats before, after;
	DedupGcStats gc;
	DedupGcOptions go = { .live_threshold = 0.99 };
	ASSERT_OK(dedup_store_gc(e.store, &go, &gc));
	ASSERT_OK(dedup_store_stats(e.store, &before));
	ASSERT(gc.chunks_deleted > 0 && gc.containers_compacted > 0 && gc.regions_rewritten > 0);
	env_check_file(&e, ib, b, len / 2 + len / 4, &rng);
	env_check_refs(&e, &ib, 1);
	ASSERT(before.dead_chunks == 0 && before.live_bytes <= before.stored_bytes);

	/* The rewritten regions keep A's level: B's chunks are in regions of level 7 (A's) and 0 (its own). */
	RegionCount rc = {};
	bool seen[20] = {};
	ASSERT_OK(catalog_chunks_foreach(e.catalog, 0, unit_of_chunk, &rc));
	for (size_t i = 0; i < rc.n; i++) {
		char name[DEDUP_CONTAINER_NAME_MAX], path[256];
		uint8_t h[DEDUP_REGION_HEADER_SIZE];
		DedupRegionHeader rh;
		snprintf(path, sizeof(path), "%s/%s", e.tier_dir, dedup_container_name(rc.containers[i], name));
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ASSERT(fd >= 0 && pread(fd, h, sizeof(h), (off_t) rc.offsets[i]) == sizeof(h));
		close(fd);
		ASSERT_OK(dedup_region_header_parse(h, sizeof(h), &rh));
		ASSERT(rh.level == 0 || rh.level == 7);
		seen[rh.level] = true;
	}
	ASSERT(seen[0] && seen[7]);
	env_reopen_store(&e);
	env_check_file(&e, ib, b, len / 2 + len / 4, &rng);
	ASSERT_OK(dedup_store_gc(e.store, &go, &gc));
	ASSERT_OK(dedup_store_stats(e.store, &after));
	ASSERT(after.stored_bytes <= before.stored_bytes + o.container_size);
	env_check_file(&e, ib, b, len / 2 + len / 4, &rng);
	free(a);
	free(b);
	env_close(&e);
}

/*
 * Oracle chunking: a backup piece and the image copy of the same datafile
 * meet block for block (the copy stores nothing of its formatted blocks), a
 * second day's piece stores only its changed blocks, and files with
 * literals read back exactly in any pieces and into a file.
 */
static void test_oracle_chunking(void) {
	TestRng rng = { 14 };
	DedupChunkerParams p = { DEDUP_CHUNKER_ORACLE, 2 * KiB, 8 * KiB, 32 * KiB };
	DedupWriterStats ws;
	Env e;

	env_open(&e, NULL);
	OraFile day1 = ora_file(200, 1, &rng);
	uint64_t piece = env_new_inode(&e), copy = env_new_inode(&e), piece2 = env_new_inode(&e);
	DedupWriter *w = env_write(&e, &p, day1.piece, day1.piece_len, &rng);
	env_commit(&e, w, piece);
	dedup_writer_stats(w, &ws);
	ASSERT(ws.literal_bytes == day1.formatted * ORA_FRAME && ws.new_chunks == day1.formatted + 1);
	dedup_writer_free(w);

	w = env_write(&e, &p, day1.image, day1.image_len, &rng);
	env_commit(&e, w, copy);
	dedup_writer_stats(w, &ws);
	/* Only block 0 (the OS header) is new; the never-formatted blocks are zero runs. */
	ASSERT(ws.dup_chunks == day1.formatted && ws.new_bytes <= ORA_BLOCK && ws.zero_bytes >= 39 * ORA_BLOCK);
	dedup_writer_free(w);

	/* Day 2: the same piece with 7 blocks changed (new SCN and bodies). */
	uint8_t *day2 = test_malloc(day1.piece_len);
	memcpy(day2, day1.piece, day1.piece_len);
	for (size_t k = 0; k < 7; k++) {
		size_t at = ORA_BLOCK + (10 + 20 * k) * (ORA_FRAME + ORA_BLOCK) + ORA_FRAME;
		ora_block(day2 + at, 0x06, (uint32_t) k, 2000 + (uint32_t) k, 2, &rng);
	}
	w = env_write(&e, &p, day2, day1.piece_len, &rng);
	env_commit(&e, w, piece2);
	dedup_writer_stats(w, &ws);
	ASSERT(ws.new_chunks == 7 && ws.new_bytes == 7 * ORA_BLOCK);
	dedup_writer_free(w);

	env_check_file(&e, piece, day1.piece, day1.piece_len, &rng);
	env_check_file(&e, copy, day1.image, day1.image_len, &rng);
	env_check_file(&e, piece2, day2, day1.piece_len, &rng);
	uint64_t inos[] = { piece, copy, piece2 };
	env_check_refs(&e, inos, 3);
	DedupFileUsage u;
	ASSERT_OK(dedup_file_usage(e.catalog, piece, &u));
	ASSERT(u.literal_bytes == day1.formatted * ORA_FRAME && u.chunk_bytes + u.literal_bytes + u.zero_bytes == u.logical);
	env_drop(&e, piece);
	ASSERT_OK(dedup_store_gc(e.store, NULL, NULL));
	env_check_file(&e, copy, day1.image, day1.image_len, &rng);
	env_check_file(&e, piece2, day2, day1.piece_len, &rng);
	free(day2);
	ora_file_free(&day1);
	env_close(&e);
}

static int container_walk_count(const DedupContainerEntry *entry, void *userdata) {
	(*(size_t *) userdata)++;
	return 0;
}

typedef struct FullCheck {
	Env *env;
	size_t full;
} FullCheck;

static int check_full_container(const CatalogContainer *ct, void *userdata) {
	FullCheck *c = userdata;
	char name[DEDUP_CONTAINER_NAME_MAX], path[256];
	if (!ct->full)
		return 0;
	snprintf(path, sizeof(path), "%s/%s", c->env->tier_dir, dedup_container_name(ct->id, name));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ASSERT(fd >= 0);
	struct stat st;
	ASSERT(fstat(fd, &st) == 0 && (uint64_t) st.st_size == ct->size);
	uint8_t *buf = test_malloc((size_t) st.st_size);
	ASSERT(pread(fd, buf, (size_t) st.st_size, 0) == st.st_size);
	close(fd);

	DedupRegionDecoder *dec;
	DedupHasher *sha;
	DedupContainerInfo info;
	size_t chunks = 0;
	ASSERT_OK(dedup_region_decoder_new(&dec));
	ASSERT_OK(dedup_hasher_new(&sha));
	ASSERT_OK(dedup_container_walk(buf, (size_t) st.st_size, DEDUP_CONTAINER_SEALED, NULL, dec, sha,
				       container_walk_count, &chunks, &info));
	ASSERT(info.sealed && info.header.id == ct->id && info.header.tier == 0 && info.header.version == 2);
	/* Regions of many chunks each; every chunk the catalog places here is in a region the trailer lists. */
	ASSERT(info.chunks == chunks && chunks > 0 && info.count > 0 && info.count < chunks);
	c->full++;
	dedup_region_decoder_free(dec);
	dedup_hasher_free(sha);
	free(buf);
	return 0;
}

/* Every full container is self-describing: its trailer indexes exactly its regions. */
static void test_self_describing(void) {
	TestRng rng = { 11 };
	DedupStoreOptions o = { .container_size = 200 * KiB };
	size_t len = 3 * MiB;
	uint8_t *data = test_malloc(len);
	Env e;

	env_open(&e, &o);
	fill_sparse(&rng, data, len);
	uint64_t ino = env_seal(&e, data, len, &rng, NULL);
	FullCheck c = { .env = &e };
	ASSERT_OK(catalog_containers_foreach(e.catalog, 0, check_full_container, &c));
	ASSERT(c.full >= 3);

	/* Reopening seals nothing new (the open container is resumed) and loses nothing. */
	env_reopen_store(&e);
	env_check_file(&e, ino, data, len, &rng);
	c.full = 0;
	ASSERT_OK(catalog_containers_foreach(e.catalog, 0, check_full_container, &c));
	free(data);
	env_close(&e);
}

/*
 * With an id key, ids are HMAC-SHA-256 under it: the plain SHA-256 of a
 * chunk is nowhere in the catalog (while without a key it is: the check can
 * fail), the same content still deduplicates, scrub finds the keyed ids
 * sound, and a store without the key refuses the keyed units it verifies.
 */
static void test_keyed_ids(void) {
	static const uint8_t key[DEDUP_KEY_SIZE] = { 0x6b, 0x65, 0x79, 1, 2, 3 };
	TestRng rng = { 15 };
	/* Below the minimum chunk size: the whole file is one chunk. */
	size_t len = 1500;
	uint8_t *data = test_malloc(len), buf[1500];
	DedupHasher *plain, *keyed;
	DedupChunkId sha, hmac;
	CatalogChunk ch;
	DedupWriterStats st;
	Env e;

	fill_text(&rng, data, len);
	ASSERT_OK(dedup_hasher_new(&plain));
	ASSERT_OK(dedup_hasher_new_keyed(key, sizeof(key), &keyed));
	ASSERT_OK(dedup_hasher_digest(plain, data, len, &sha));
	ASSERT_OK(dedup_hasher_digest(keyed, data, len, &hmac));
	ASSERT(!dedup_chunk_id_equal(&sha, &hmac));

	env_open(&e, NULL);
	env_seal(&e, data, len, &rng, NULL);
	ASSERT_OK(catalog_chunk_find(e.catalog, 0, sha.bytes, &ch));
	env_close(&e);

	env_open(&e, &(DedupStoreOptions) { .id_key = key, .verify = DEDUP_VERIFY_CONTENT });
	uint64_t i1 = env_seal(&e, data, len, &rng, &st);
	ASSERT(st.new_chunks == 1);
	uint64_t i2 = env_seal(&e, data, len, &rng, &st);
	ASSERT(st.new_chunks == 0 && st.dup_bytes == len);
	ASSERT(catalog_chunk_find(e.catalog, 0, sha.bytes, &ch) == -ENOENT);
	ASSERT_OK(catalog_chunk_find(e.catalog, 0, hmac.bytes, &ch));
	ASSERT(ch.refs == 2);
	env_check_file(&e, i1, data, len, &rng);
	env_check_file(&e, i2, data, len, &rng);
	DedupScrubResult res = {};
	ASSERT_OK(dedup_store_scrub(e.store, NULL, NULL, &res));
	ASSERT(res.chunks == 1 && res.damaged_chunks == 0);
	dedup_scrub_result_done(&res);

	e.opts.id_key = NULL;
	env_reopen_store(&e);
	ASSERT(dedup_file_read(e.store, i1, len, 0, buf, len) == -EIO);
	env_close(&e);

	dedup_hasher_free(plain);
	dedup_hasher_free(keyed);
	free(data);
}

int main(void) {
	test_roundtrip();
	test_fixed_chunks();
	test_shifted_copy();
	test_dedup_within_and_across();
	test_second_backup();
	test_racing_writers();
	test_parallel_encoding();
	test_commit_rules();
	test_refcounts_drop_gc();
	test_gc_keeps_shared();
	test_compaction();
	test_decode_once();
	test_oracle_chunking();
	test_partly_dead_regions();
	test_self_describing();
	test_keyed_ids();
	return 0;
}
