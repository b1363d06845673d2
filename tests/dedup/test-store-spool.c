/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A writer spools its recipe as it makes it (dedup_writer_spool()): with a
 * spool file its recipe's memory does not grow with the file, without one
 * it does; either way, and across parts joined with and without spools,
 * the recipe reads back byte-exact, its references match its entries, its
 * segments are cut every DEDUP_RECIPE_SEGMENT_ENTRIES_MAX entries from the
 * file's start as one writer cuts them, a commit rolled back commits again,
 * a spool file damaged under the writer fails the commit (-EIO) instead
 * of committing what it read, and one that fills up hands over to memory.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>

#include "tests/dedup/store-test.h"

/* The smallest fixed chunks: many entries (16 Ki per MiB) from few bytes, every recipe many segments long. */
#define CHUNK DEDUP_CHUNK_SIZE_LIMIT_MIN
static const DedupChunkerParams small = DEDUP_CHUNKER_PARAMS_FIXED(CHUNK);

/* A tmpfile for a spool; *ret_dup (optional) gets a second descriptor of it, the test's to damage. */
static int spool_file(int *ret_dup) {
	FILE *f = tmpfile();
	ASSERT(f);
	int fd = dup(fileno(f));
	ASSERT(fd >= 0);
	fclose(f);
	if (ret_dup) {
		*ret_dup = dup(fd);
		ASSERT(*ret_dup >= 0);
	}
	return fd;
}

/*
 * Mostly the same 64 KiB again and again, every eighth MiB new.  The
 * repeats refer to chunks of the file's own not registered yet: 7 MiB of
 * them is more entries than a writer may hold before it waits for an
 * early registration (DEDUP_WRITER_OPEN_ENTRIES_MAX), yet fewer new
 * chunks than it gathers before it registers anyway.  Once
 * those are registered (a second file in the same store) the repeats are
 * final at once.
 */
static uint8_t *make_data(size_t len, TestRng *rng) {
	uint8_t *d = test_malloc(len);
	size_t unit = 64 * KiB;
	test_rng_fill(rng, d, unit);
	for (size_t off = unit; off < len; off += unit) {
		if (off % (8 * MiB) == 0) {
			fill_text(rng, d + off, MIN(MiB, len - off));
			off += MiB - unit;
		} else
			memcpy(d + off, d, MIN(unit, len - off));
	}
	return d;
}

/*
 * The directory backend with a sync 50 ms slower: a registration then
 * tends to outlast the entries a writer makes meanwhile, so a writer that
 * registers early reaches DEDUP_WRITER_OPEN_ENTRIES_MAX while it is in
 * flight and must wait for it there.  Not a timing: the checks hold
 * whichever comes first; the sleep only makes the wait the likely path.
 */
static int (*dir_sync)(DedupBackendFile *f);
static DedupBackendOps slow_sync_ops;

static int slow_sync(DedupBackendFile *f) {
	usleep(50 * 1000);
	return dir_sync(f);
}

static void env_open_slow_sync(Env *e) {
	env_open(e, NULL);
	slow_sync_ops = *e->backend->ops;
	dir_sync = slow_sync_ops.sync;
	slow_sync_ops.sync = slow_sync;
	e->backend->ops = &slow_sync_ops;
}

static DedupWriter *writer_new(Env *e, bool spooled) {
	DedupWriter *w;
	ASSERT_OK(dedup_writer_new(e->store, &small, DEDUP_STORE_LEVEL_DEFAULT, DEDUP_STORE_REGION_DEFAULT, &w));
	if (spooled)
		ASSERT_OK(dedup_writer_spool(w, spool_file(NULL)));
	return w;
}

static void feed(DedupWriter *w, const uint8_t *data, size_t len, TestRng *rng) {
	for (size_t off = 0; off < len;) {
		size_t r = 1 + (size_t) (test_rng_next(rng) % (300 * KiB)), n = MIN(len - off, r);
		ASSERT_OK(dedup_writer_feed(w, data + off, n));
		off += n;
	}
}

/* Every segment of ino's recipe but the last holds DEDUP_RECIPE_SEGMENT_ENTRIES_MAX entries; returns how many. */
typedef struct Layout {
	size_t segments, short_segments, entries;
	uint64_t next_start;
} Layout;

static int layout_collect(uint64_t start, const void *blob, size_t size, void *userdata) {
	Layout *l = userdata;
	DedupRecipeSegment *seg;
	ASSERT_OK(dedup_recipe_segment_decode(blob, size, &seg));
	ASSERT(seg->start == start && start == l->next_start);
	if (seg->n_entries < DEDUP_RECIPE_SEGMENT_ENTRIES_MAX)
		l->short_segments++;
	l->segments++;
	l->entries += seg->n_entries;
	l->next_start = start + seg->length;
	free(seg);
	return 0;
}

static size_t check_layout(Env *e, uint64_t ino, size_t len) {
	Layout l = {};
	ASSERT(catalog_recipe_foreach(e->catalog, ino, layout_collect, &l) >= 0);
	ASSERT(l.next_start == len && l.short_segments <= 1);
	ASSERT((l.entries + DEDUP_RECIPE_SEGMENT_ENTRIES_MAX - 1) / DEDUP_RECIPE_SEGMENT_ENTRIES_MAX == l.segments);
	return l.segments;
}

/* Seals data[0, len) by one writer; returns its stats when finished. */
static DedupWriterStats seal_one(Env *e, bool spooled, const uint8_t *data, size_t len, uint64_t *ret_ino,
				 TestRng *rng) {
	DedupWriter *w = writer_new(e, spooled);
	feed(w, data, len, rng);
	ASSERT_OK(dedup_writer_finish(w));
	DedupWriterStats st;
	dedup_writer_stats(w, &st);
	*ret_ino = env_new_inode(e);
	env_commit(e, w, *ret_ino);
	dedup_writer_free(w);
	env_check_sequential(e, *ret_ino, data, len, rng);
	return st;
}

/*
 * The most a writer's entries and spool index take in memory, whatever its
 * file's size: the entries held open, a segment's worth final but not
 * spooled yet, and the last, 12 bytes each, in arrays grown by doubling;
 * 16 bytes a segment for the index.
 */
static uint64_t held_bound(size_t segments) {
	return 2 * (DEDUP_WRITER_OPEN_ENTRIES_MAX + DEDUP_RECIPE_SEGMENT_ENTRIES_MAX + 1) * 12 + 2 * 16 * segments;
}

static void test_memory(void) {
	TestRng rng = { 1 };
	/* 48 segments: 192 Ki entries, 2.25 MiB at 12 bytes each if they were all held until the commit. */
	size_t len = 12 * MiB, segments = len / CHUNK / DEDUP_RECIPE_SEGMENT_ENTRIES_MAX;
	uint8_t *d = make_data(len, &rng);
	uint64_t inos[3];
	/* Each on a store of its own: every file's repeats refer to its own chunks, not registered yet. */
	Env half, e, m;
	env_open_slow_sync(&half);
	env_open_slow_sync(&e);
	env_open_slow_sync(&m);
	DedupWriterStats file_small = seal_one(&half, true, d, len / 2, &inos[0], &rng);
	DedupWriterStats file_large = seal_one(&e, true, d, len, &inos[1], &rng);
	DedupWriterStats mem_small = seal_one(&m, false, d, len / 2, &inos[2], &rng);
	fprintf(stderr, "recipe memory: spool file %llu / %llu, memory %llu (%llu spooled) bytes (%zu / %zu MiB)\n",
		(unsigned long long) file_small.recipe_memory, (unsigned long long) file_large.recipe_memory,
		(unsigned long long) mem_small.recipe_memory, (unsigned long long) mem_small.recipe_spool_memory,
		len / 2 / MiB, len / MiB);
	ASSERT(check_layout(&e, inos[1], len) == segments);
	check_layout(&m, inos[2], len / 2);
	/* References are checked on the smaller files below: here one catalog look-up per entry would take long. */
	/* With a file, the bound, whatever the file's size: all 192 Ki entries held would take nearly twice it. */
	ASSERT(file_small.recipe_spool_memory == 0 && file_large.recipe_spool_memory == 0);
	ASSERT(file_small.recipe_memory <= held_bound(segments / 2));
	ASSERT(file_large.recipe_memory <= held_bound(segments));
	/* In memory, the segments too: at least a byte an entry, far less than the entries' 12. */
	ASSERT(mem_small.recipe_memory - mem_small.recipe_spool_memory <= held_bound(segments / 2));
	ASSERT(mem_small.recipe_spool_memory >= len / 2 / CHUNK);
	ASSERT(mem_small.recipe_spool_memory < len / 2 / CHUNK * 12 / 2);
	env_close(&half);
	env_close(&e);
	env_close(&m);
	free(d);
}

/* Parts with and without spools join into the recipe one writer makes, segments cut as it cuts them. */
static void test_join(void) {
	TestRng rng = { 2 };
	size_t len = 5 * MiB + 5000;
	uint8_t *d = make_data(len, &rng);
	/* Cuts off a segment boundary, one within a part's first segment. */
	size_t cuts[] = { CHUNK * 5000, CHUNK * 7000, 4 * MiB };
	Env e;
	env_open(&e, NULL);

	DedupWriter *parts[4];
	for (size_t k = 0; k < 4; k++) {
		size_t from = k == 0 ? 0 : cuts[k - 1], to = k == 3 ? len : cuts[k];
		parts[k] = writer_new(&e, k % 2 == 1);
		feed(parts[k], d + from, to - from, &rng);
		ASSERT_OK(dedup_writer_finish(parts[k]));
	}
	for (size_t k = 1; k < 4; k++)
		ASSERT_OK(dedup_writer_join(parts[0], parts[k]));
	uint64_t ino = env_new_inode(&e);
	env_commit(&e, parts[0], ino);
	for (size_t k = 0; k < 4; k++)
		dedup_writer_free(parts[k]);
	env_check_sequential(&e, ino, d, len, &rng);

	uint64_t whole;
	seal_one(&e, true, d, len, &whole, &rng);
	ASSERT(check_layout(&e, ino, len) == check_layout(&e, whole, len));
	uint64_t both[] = { ino, whole };
	env_check_refs(&e, both, 2);
	env_close(&e);
	free(d);
}

/* A commit rolled back leaves the writer able to commit again; a damaged spool fails the commit. */
static void test_commit(void) {
	TestRng rng = { 3 };
	size_t len = 2 * MiB;
	uint8_t *d = make_data(len, &rng);
	Env e;
	env_open(&e, NULL);

	int damage;
	DedupWriter *w = writer_new(&e, false);
	ASSERT_RET(dedup_writer_spool(w, spool_file(NULL)), 0);
	ASSERT_RET(dedup_writer_spool(w, spool_file(NULL)), -EINVAL);
	feed(w, d, len, &rng);
	ASSERT_OK(dedup_writer_finish(w));
	uint64_t ino = env_new_inode(&e);
	ASSERT_OK(catalog_begin(e.catalog));
	ASSERT_OK(dedup_writer_commit(w, ino));
	catalog_rollback(e.catalog);
	env_commit(&e, w, ino);
	dedup_writer_free(w);
	env_check_sequential(&e, ino, d, len, &rng);
	env_check_refs(&e, &ino, 1);
	check_layout(&e, ino, len);

	/* Too late once fed. */
	w = writer_new(&e, false);
	feed(w, d, MiB, &rng);
	ASSERT_RET(dedup_writer_spool(w, spool_file(NULL)), -EINVAL);
	dedup_writer_free(w);

	w = writer_new(&e, false);
	ASSERT_OK(dedup_writer_spool(w, spool_file(&damage)));
	feed(w, d, len, &rng);
	ASSERT_OK(dedup_writer_finish(w));
	uint8_t junk[64];
	memset(junk, 0x5a, sizeof(junk));
	ASSERT(pwrite(damage, junk, sizeof(junk), 1000) == (ssize_t) sizeof(junk));
	close(damage);
	uint64_t bad = env_new_inode(&e);
	ASSERT_OK(catalog_begin(e.catalog));
	ASSERT_RET(dedup_writer_commit(w, bad), -EIO);
	catalog_rollback(e.catalog);
	dedup_writer_free(w);
	uint8_t buf[16];
	ASSERT(dedup_file_read(e.store, bad, len, 0, buf, sizeof(buf)) < 0);
	env_check_refs(&e, &ino, 1);
	env_close(&e);
	free(d);
}

/*
 * A spool that takes no more (its disk full) hands the recipe over to
 * memory, and the file commits whole: from the first segment (/dev/full),
 * or midway, once some segments are in the file (a memfd sealed against
 * growing between two feeds), when those come back from it first.
 */
static void test_spool_full(void) {
	TestRng rng = { 5 };
	size_t len = 12 * MiB;
	uint8_t *d = make_data(len, &rng);
	Env e;
	env_open(&e, NULL);
	uint64_t inos[2];

	for (int midway = 0; midway <= 1; midway++) {
		DedupWriter *w = writer_new(&e, false);
		int grow = -1;
		if (midway) {
			int fd = memfd_create("spool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
			ASSERT(fd >= 0);
			grow = dup(fd);
			ASSERT_OK(dedup_writer_spool(w, fd));
		} else {
			int fd = open("/dev/full", O_RDWR | O_CLOEXEC);
			ASSERT(fd >= 0);
			ASSERT_OK(dedup_writer_spool(w, fd));
		}
		feed(w, d, len / 2, &rng);
		if (midway) {
			struct stat st;
			ASSERT(fstat(grow, &st) == 0 && st.st_size > 0);
			ASSERT(fcntl(grow, F_ADD_SEALS, F_SEAL_GROW) == 0);
		}
		feed(w, d + len / 2, len - len / 2, &rng);
		ASSERT_OK(dedup_writer_finish(w));
		DedupWriterStats st;
		dedup_writer_stats(w, &st);
		ASSERT(st.recipe_spool_memory > 0);
		inos[midway] = env_new_inode(&e);
		env_commit(&e, w, inos[midway]);
		dedup_writer_free(w);
		env_check_sequential(&e, inos[midway], d, len, &rng);
		env_check_refs(&e, inos, (size_t) midway + 1);
		check_layout(&e, inos[midway], len);
		if (grow >= 0)
			close(grow);
	}
	env_close(&e);
	free(d);
}

/*
 * A migration's writer spools like any other: with a spool file its
 * recipe's memory stays bounded whatever the file's size, without one the
 * segments stay in memory; either way a recipe of many segments moves
 * whole, and its distinct chunks are counted once in the bytes moved (the
 * writer's stored bytes, every chunk being new there).
 */
static void test_migrate_one(bool spooled) {
	TestRng rng = { 4 };
	size_t len = 4 * MiB + 3 * CHUNK;
	uint8_t *d = make_data(len, &rng);
	Env e;
	env_open(&e, NULL);
	char dir1[128];
	snprintf(dir1, sizeof(dir1), "%s/tier1", e.dir);
	ASSERT(mkdir(dir1, 0755) == 0);
	DedupBackend *backend1;
	DedupStore *store1;
	ASSERT_OK(tier_backend_dir_open(dir1, &backend1));
	ASSERT_OK(dedup_store_open(e.catalog, 1, backend1, NULL, &store1));

	uint64_t ino;
	seal_one(&e, true, d, len, &ino, &rng);
	int spool = -1, spool_dup = -1;
	if (spooled)
		spool = spool_file(&spool_dup);
	DedupMigration *m;
	ASSERT_OK(dedup_file_migrate(e.store, store1, ino, len, DEDUP_STORE_LEVEL_DEFAULT, DEDUP_STORE_REGION_DEFAULT,
				     spool, NULL, NULL, &m));
	ASSERT_OK(catalog_begin(e.catalog));
	ASSERT_OK(dedup_migration_commit(m));
	ASSERT_OK(catalog_commit(e.catalog));
	DedupWriterStats ws;
	dedup_migration_stats(m, &ws);
	dedup_migration_free(m);
	CatalogTierMoved moved;
	ASSERT_OK(catalog_tier_moved_get(e.catalog, 1, &moved));
	ASSERT(ws.dup_chunks > 0 && moved.files == 1 && moved.logical == len && moved.stored == ws.stored_bytes);
	/* Entries of len / CHUNK chunks: whole segments are in the spool file, or in memory without it. */
	if (spooled) {
		struct stat st;
		ASSERT(fstat(spool_dup, &st) == 0);
		ASSERT(ws.recipe_spool_memory == 0 && (uint64_t) st.st_size >= len / CHUNK);
		close(spool_dup);
	} else
		ASSERT(ws.recipe_spool_memory >= len / CHUNK);

	Env e1 = e;
	e1.store = store1;
	env_check_sequential(&e1, ino, d, len, &rng);
	ASSERT(check_layout(&e1, ino, len) > 16);
	env_check_refs(&e1, &ino, 1);
	store1 = dedup_store_free(store1);
	backend1 = dedup_backend_free(backend1);
	env_close(&e);
	free(d);
}

static void test_migrate(void) {
	test_migrate_one(false);
	test_migrate_one(true);
}

int main(void) {
	test_memory();
	test_join();
	test_commit();
	test_spool_full();
	test_migrate();
	return 0;
}
