/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * A chunk store on a real temporary SQLite catalog and a real directory
 * backend, for the store's tests: set up, seal a buffer as a file, read it
 * back and compare, check reference counts against the recipes, tear down.
 */

#include <fcntl.h>
#include <stdbool.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "common/macros.h"
#include "dedup/container.h"
#include "dedup/recipe.h"
#include "dedup/store.h"
#include "tests/dedup/dedup-test.h"
#include "tier/backend-dir.h"

#define KiB ((size_t) 1 << 10)
#define MiB ((size_t) 1 << 20)

typedef struct Env {
	char dir[64];
	char tier_dir[96];
	Catalog *catalog;
	DedupBackend *backend;
	DedupStore *store;
	DedupStoreOptions opts;
} Env;

static inline void env_open_store(Env *e) {
	ASSERT_OK(dedup_store_open(e->catalog, 0, e->backend, &e->opts, &e->store));
}

static inline void env_open(Env *e, const DedupStoreOptions *opts) {
	char path[128];
	*e = (Env) { .opts = opts ? *opts : (DedupStoreOptions) {} };
	snprintf(e->dir, sizeof(e->dir), "%s/fratier-store-XXXXXX", getenv("TMPDIR") ?: "/tmp");
	ASSERT(mkdtemp(e->dir));
	snprintf(e->tier_dir, sizeof(e->tier_dir), "%s/tier0", e->dir);
	ASSERT(mkdir(e->tier_dir, 0755) == 0);
	snprintf(path, sizeof(path), "%s/catalog.db", e->dir);
	ASSERT_OK(catalog_open(path, 0, 0, &e->catalog));
	ASSERT_OK(tier_backend_dir_open(e->tier_dir, &e->backend));
	env_open_store(e);
}

static inline void env_reopen_store(Env *e) {
	e->store = dedup_store_free(e->store);
	env_open_store(e);
}

static inline int env_rm(const char *path, const struct stat *st, int type, struct FTW *ftw) {
	return remove(path);
}

static inline void env_close(Env *e) {
	e->store = dedup_store_free(e->store);
	e->backend = dedup_backend_free(e->backend);
	e->catalog = catalog_close(e->catalog);
	ASSERT(nftw(e->dir, env_rm, 16, FTW_DEPTH | FTW_PHYS) == 0);
}

static inline uint64_t env_new_inode(Env *e) {
	CatalogInode in = { .parent = CATALOG_ROOT_INO, .mode = S_IFREG | 0644, .nlink = 1 };
	uint64_t ino;
	ASSERT_OK(catalog_inode_create(e->catalog, &in, NULL, &ino));
	return ino;
}

/* Feeds data to a new writer in pieces of random size and finishes it. */
static inline DedupWriter *env_write(Env *e, const DedupChunkerParams *params, const uint8_t *data, size_t len,
				     TestRng *rng) {
	DedupWriter *w;
	ASSERT_OK(dedup_writer_new(e->store, params, DEDUP_STORE_LEVEL_DEFAULT, DEDUP_STORE_REGION_DEFAULT, &w));
	for (size_t off = 0; off < len;) {
		size_t r = 1 + (size_t) (test_rng_next(rng) % (300 * KiB)), n = MIN(len - off, r);
		ASSERT_OK(dedup_writer_feed(w, data + off, n));
		off += n;
	}
	ASSERT_OK(dedup_writer_finish(w));
	return w;
}

static inline void env_commit(Env *e, DedupWriter *w, uint64_t ino) {
	ASSERT_OK(catalog_begin(e->catalog));
	ASSERT_OK(dedup_writer_commit(w, ino));
	ASSERT_OK(catalog_commit(e->catalog));
}

/* Seals data as a new file; returns its inode.  stats (optional) gets the writer's. */
static inline uint64_t env_seal(Env *e, const uint8_t *data, size_t len, TestRng *rng, DedupWriterStats *stats) {
	uint64_t ino = env_new_inode(e);
	DedupWriter *w = env_write(e, NULL, data, len, rng);
	env_commit(e, w, ino);
	if (stats)
		dedup_writer_stats(w, stats);
	dedup_writer_free(w);
	return ino;
}

static inline void env_drop(Env *e, uint64_t ino) {
	ASSERT_OK(catalog_begin(e->catalog));
	ASSERT_OK(dedup_file_drop(e->store, ino));
	ASSERT_OK(catalog_commit(e->catalog));
}

/* The whole file read in pieces of random size must equal data. */
static inline void env_check_sequential(Env *e, uint64_t ino, const uint8_t *data, size_t len, TestRng *rng) {
	uint8_t *buf = test_malloc(len);
	for (size_t off = 0; off < len;) {
		size_t r = 1 + (size_t) (test_rng_next(rng) % (256 * KiB)), n = MIN(len - off, r);
		ssize_t got = dedup_file_read(e->store, ino, len, off, buf + off, n);
		if (got != (ssize_t) n) {
			fprintf(stderr, "read of ino %llu at %zu+%zu returned %zd\n", (unsigned long long) ino, off, n, got);
			abort();
		}
		off += n;
	}
	ASSERT(len == 0 || memcmp(buf, data, len) == 0);
	free(buf);
}

/* Reads at random offsets, reads across and past the end, and a copy to a file. */
static inline void env_check_file(Env *e, uint64_t ino, const uint8_t *data, size_t len, TestRng *rng) {
	uint8_t *buf = test_malloc(512 * KiB);
	char path[160];

	env_check_sequential(e, ino, data, len, rng);
	for (int i = 0; i < 40 && len > 0; i++) {
		size_t off = (size_t) (test_rng_next(rng) % len), n = 1 + (size_t) (test_rng_next(rng) % (512 * KiB));
		ssize_t got = dedup_file_read(e->store, ino, len, off, buf, n);
		ASSERT(got == (ssize_t) MIN(n, len - off));
		ASSERT(memcmp(buf, data + off, (size_t) got) == 0);
	}
	ASSERT(dedup_file_read(e->store, ino, len, len, buf, 100) == 0);
	ASSERT(dedup_file_read(e->store, ino, len, len + 12345, buf, 100) == 0);
	ASSERT(dedup_file_read(e->store, ino, len, 0, buf, 0) == 0);

	snprintf(path, sizeof(path), "%s/copy", e->dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ASSERT(fd >= 0);
	ASSERT_OK(dedup_file_write_to_fd(e->store, ino, len, fd));
	struct stat st;
	ASSERT(fstat(fd, &st) == 0 && (size_t) st.st_size == len);
	uint8_t *copy = test_malloc(len);
	ASSERT(pread(fd, copy, len, 0) == (ssize_t) len);
	ASSERT(len == 0 || memcmp(copy, data, len) == 0);
	free(copy);
	close(fd);
	unlink(path);
	free(buf);
}

/* Occurrences of chunk ids in the recipes of inos[0, n). */
typedef struct RefCount {
	uint64_t *ids;
	size_t n, cap;
} RefCount;

static inline int refcount_collect(uint64_t start, const void *blob, size_t size, void *userdata) {
	RefCount *rc = userdata;
	DedupRecipeSegment *seg;
	ASSERT_OK(dedup_recipe_segment_decode(blob, size, &seg));
	ASSERT(seg->start == start);
	for (size_t i = 0; i < seg->n_entries; i++) {
		if (!dedup_recipe_entry_is_chunk(seg->entries + i))
			continue;
		if (rc->n == rc->cap) {
			rc->cap = rc->cap ? rc->cap * 2 : 1024;
			rc->ids = realloc(rc->ids, rc->cap * sizeof(uint64_t));
			ASSERT(rc->ids);
		}
		rc->ids[rc->n++] = seg->entries[i].chunk;
	}
	free(seg);
	return 0;
}

static inline int refcount_cmp(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
	return x < y ? -1 : x > y;
}

static inline int refcount_check_chunk(const CatalogChunk *ch, void *userdata) {
	RefCount *rc = userdata;
	uint64_t *hit = bsearch(&ch->id, rc->ids, rc->n, sizeof(uint64_t), refcount_cmp);
	uint64_t want = 0;
	if (hit) {
		while (hit > rc->ids && hit[-1] == ch->id)
			hit--;
		while (hit + want < rc->ids + rc->n && hit[want] == ch->id)
			want++;
	}
	if (ch->refs != want) {
		fprintf(stderr, "chunk %llu has refs %llu, recipes hold %llu\n", (unsigned long long) ch->id,
			(unsigned long long) ch->refs, (unsigned long long) want);
		abort();
	}
	return 0;
}

static inline int refcount_find(const CatalogChunk *ch, void *userdata) {
	uint64_t *left = userdata;
	(*left)++;
	return 0;
}

/*
 * Every chunk's refs equals its occurrences in the recipes of inos, and
 * every chunk those recipes use exists.  Returns the number of chunks.
 */
static inline uint64_t env_check_refs(Env *e, const uint64_t *inos, size_t n) {
	RefCount rc = {};
	uint64_t chunks = 0;
	for (size_t i = 0; i < n; i++)
		ASSERT(catalog_recipe_foreach(e->catalog, inos[i], refcount_collect, &rc) >= 0);
	qsort(rc.ids, rc.n, sizeof(uint64_t), refcount_cmp);
	ASSERT_OK(catalog_chunks_foreach(e->catalog, 0, refcount_check_chunk, &rc));
	ASSERT_OK(catalog_chunks_foreach(e->catalog, 0, refcount_find, &chunks));
	for (size_t i = 0; i < rc.n; i++) {
		CatalogChunk ch;
		ASSERT_OK(catalog_chunk_get(e->catalog, rc.ids[i], &ch));
	}
	free(rc.ids);
	return chunks;
}

/* Oracle-ish compressible data: blocks of words and numbers with a few random bytes. */
static inline void fill_text(TestRng *rng, uint8_t *buf, size_t len) {
	static const char *const words[] = { "SELECT ", "archivelog ", "SCN ", "0x0000A3F1 ", "thread 1 ",
					     "sequence ", "redo ", "block ", "checkpoint ", "\n" };
	size_t off = 0;
	while (off < len) {
		const char *w = words[test_rng_next(rng) % ELEMENTSOF(words)];
		size_t n = MIN(strlen(w), len - off);
		memcpy(buf + off, w, n);
		off += n;
		if (off < len && test_rng_next(rng) % 16 == 0)
			buf[off++] = (uint8_t) test_rng_next(rng);
	}
}

/* Random data in runs separated by zero runs, at unaligned offsets. */
static inline void fill_sparse(TestRng *rng, uint8_t *buf, size_t len) {
	size_t off = 0;
	bool data = true;
	memset(buf, 0, len);
	while (off < len) {
		size_t r = 1 + (size_t) (test_rng_next(rng) % (data ? 200 * KiB : 700 * KiB)), n = MIN(len - off, r);
		if (data)
			test_rng_fill(rng, buf + off, n);
		off += n;
		data = !data;
	}
}

/* Size of an object of the tier, or -1 if missing. */
static inline int64_t env_object_size(Env *e, uint64_t container) {
	char name[DEDUP_CONTAINER_NAME_MAX], path[256];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", e->tier_dir, dedup_container_name(container, name));
	if (stat(path, &st) < 0)
		return -1;
	return st.st_size;
}

/* Count of container objects in the tier directory. */
static inline int env_count_objects_cb(const char *name, void *userdata) {
	uint64_t id;
	if (dedup_container_name_parse(name, &id) >= 0)
		(*(size_t *) userdata)++;
	return 0;
}

static inline size_t env_count_objects(Env *e) {
	size_t n = 0;
	ASSERT_OK(e->backend->ops->list(e->backend, "c", env_count_objects_cb, &n));
	return n;
}
