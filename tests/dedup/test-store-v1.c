/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A store written by the first format (tests/dedup/fixture-store-v1: chunk
 * frames in version 1 containers, catalog schema 6), opened by today's
 * code: opening changes no byte of any container (the open one included);
 * every file reads back exactly, also through the cache and into a file;
 * scrub finds nothing; new files go to version 2 containers, deduplicated
 * against the old chunks; the collector compacts the old containers, moving
 * their live chunks into regions, and everything still reads back.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>

#include "tests/dedup/fixture-v1.h"

static char *slurp(const char *path, size_t *ret_len) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	ASSERT(fd >= 0 && fstat(fd, &st) == 0);
	char *b = test_malloc((size_t) st.st_size + 1);
	ASSERT(read(fd, b, (size_t) st.st_size) == st.st_size);
	close(fd);
	*ret_len = (size_t) st.st_size;
	return b;
}

typedef struct Snapshot {
	char names[16][40];
	char *bytes[16];
	size_t lens[16];
	size_t n;
} Snapshot;

/* Every container object of the fixture's tier, as it is now. */
static void snapshot(Env *e, Snapshot *s) {
	*s = (Snapshot) {};
	for (uint64_t id = 1; id < 64; id++) {
		char name[DEDUP_CONTAINER_NAME_MAX], path[256];
		snprintf(path, sizeof(path), "%s/%s", e->tier_dir, dedup_container_name(id, name));
		if (access(path, F_OK) < 0)
			continue;
		ASSERT(s->n < ELEMENTSOF(s->names));
		snprintf(s->names[s->n], sizeof(s->names[s->n]), "%s", name);
		s->bytes[s->n] = slurp(path, &s->lens[s->n]);
		s->n++;
	}
}

static void snapshot_check_same(Env *e, const Snapshot *s) {
	for (size_t i = 0; i < s->n; i++) {
		char path[256];
		size_t len;
		snprintf(path, sizeof(path), "%s/%s", e->tier_dir, s->names[i]);
		char *now = slurp(path, &len);
		ASSERT(len == s->lens[i] && memcmp(now, s->bytes[i], len) == 0);
		free(now);
	}
}

static void snapshot_done(Snapshot *s) {
	for (size_t i = 0; i < s->n; i++)
		free(s->bytes[i]);
}

/* The fixture copied into a fresh directory and opened there. */
static void env_open_fixture(Env *e) {
	char cmd[512];
	*e = (Env) { .opts = { .container_size = FIXTURE_V1_CONTAINER_SIZE } };
	snprintf(e->dir, sizeof(e->dir), "%s/fratier-v1-XXXXXX", getenv("TMPDIR") ?: "/tmp");
	ASSERT(mkdtemp(e->dir));
	snprintf(e->tier_dir, sizeof(e->tier_dir), "%s/tier0", e->dir);
	snprintf(cmd, sizeof(cmd), "cp -r '%s/tests/dedup/fixture-store-v1/catalog.db' '%s/tests/dedup/fixture-store-v1/tier0' '%s'",
		 getenv("FRATIER_SOURCE_ROOT") ?: ".", getenv("FRATIER_SOURCE_ROOT") ?: ".", e->dir);
	ASSERT(system(cmd) == 0);
	snprintf(cmd, sizeof(cmd), "%s/catalog.db", e->dir);
	ASSERT_OK(catalog_open(cmd, 0, 0, &e->catalog));
	ASSERT_OK(tier_backend_dir_open(e->tier_dir, &e->backend));
}

static void check_fixture_files(Env *e, uint8_t *buf, TestRng *rng) {
	for (unsigned i = 0; i < FIXTURE_V1_FILES; i++) {
		if (i == FIXTURE_V1_DROPPED)
			continue;
		fixture_v1_fill(i, buf);
		env_check_file(e, FIXTURE_V1_INO(i), buf, fixture_v1_size(i), rng);
	}
}

static int version_of(Env *e, uint64_t id) {
	char name[DEDUP_CONTAINER_NAME_MAX], path[256];
	uint8_t h[DEDUP_CONTAINER_HEADER_SIZE];
	snprintf(path, sizeof(path), "%s/%s", e->tier_dir, dedup_container_name(id, name));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ASSERT(read(fd, h, sizeof(h)) == sizeof(h));
	close(fd);
	return h[4];
}

static int count_v1(const CatalogContainer *ct, void *userdata) {
	Env *e = ((Env **) userdata)[0];
	if (version_of(e, ct->id) == 1)
		(*((size_t **) userdata)[1])++;
	return 0;
}

static size_t v1_containers(Env *e) {
	size_t n = 0;
	void *args[2] = { e, &n };
	ASSERT_OK(catalog_containers_foreach(e->catalog, 0, count_v1, args));
	return n;
}

int main(void) {
	uint8_t *buf = test_malloc(FIXTURE_V1_BUFFER);
	TestRng rng = { 9 };
	DedupScrubResult res;
	DedupStoreStats st;
	Snapshot before;
	Env e;

	env_open_fixture(&e);
	snapshot(&e, &before);
	ASSERT(before.n == 7);
	env_open_store(&e);
	/* Opening recovers nothing of the old format: not a byte changes, the open one included. */
	snapshot_check_same(&e, &before);
	check_fixture_files(&e, buf, &rng);
	ASSERT_OK(dedup_store_scrub(e.store, NULL, NULL, &res));
	ASSERT(res.damaged_chunks == 0 && res.chunks == 29 && res.containers == 7);
	dedup_scrub_result_done(&res);
	env_reopen_store(&e);
	snapshot_check_same(&e, &before);

	/* New files: a version 2 container of regions, next to the old ones; one repeats file 0 whole. */
	uint8_t *fresh = test_malloc(200 * KiB);
	fill_text(&rng, fresh, 200 * KiB);
	DedupWriterStats ws;
	uint64_t ino_new = env_seal(&e, fresh, 200 * KiB, &rng, &ws);
	ASSERT(ws.new_chunks > 0 && ws.regions > 0 && ws.regions < ws.new_chunks);
	fixture_v1_fill(0, buf);
	uint64_t ino_again = env_seal(&e, buf, fixture_v1_size(0), &rng, &ws);
	ASSERT(ws.new_chunks == 0 && ws.dup_bytes == fixture_v1_size(0));
	snapshot_check_same(&e, &before);
	ASSERT(version_of(&e, 8) == 2);
	env_check_file(&e, ino_new, fresh, 200 * KiB, &rng);
	env_check_file(&e, ino_again, buf, fixture_v1_size(0), &rng);

	/*
	 * The collector: the dropped file's chunks go, and every sparse old
	 * container is compacted, its live frames compressed again into regions.
	 */
	DedupGcStats gc;
	DedupGcOptions go = { .live_threshold = 1.0 };
	ASSERT_OK(dedup_store_gc(e.store, &go, &gc));
	ASSERT(gc.chunks_deleted > 0 && gc.containers_compacted >= 1 && gc.regions_rewritten >= 1);
	ASSERT(v1_containers(&e) < 7);
	check_fixture_files(&e, buf, &rng);
	env_check_file(&e, ino_new, fresh, 200 * KiB, &rng);
	uint64_t inos[] = { FIXTURE_V1_INO(0), FIXTURE_V1_INO(1), FIXTURE_V1_INO(2), FIXTURE_V1_INO(3),
			    FIXTURE_V1_INO(5), ino_new, ino_again };
	env_check_refs(&e, inos, ELEMENTSOF(inos));
	env_reopen_store(&e);
	check_fixture_files(&e, buf, &rng);
	ASSERT_OK(dedup_store_scrub(e.store, NULL, NULL, &res));
	ASSERT(res.damaged_chunks == 0);
	dedup_scrub_result_done(&res);
	ASSERT_OK(dedup_store_stats(e.store, &st));
	ASSERT(st.dead_chunks == 0);

	snapshot_done(&before);
	free(fresh);
	free(buf);
	env_close(&e);
	return 0;
}
