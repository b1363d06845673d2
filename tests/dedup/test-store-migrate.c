/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Migration between two chunk stores (tier 0 and tier 1) over one catalog:
 * the copy deduplicates against the target, reference counts match the
 * recipes on both tiers after every step, the source's collector frees
 * what only the migrated file used and never a frame another file still
 * references, and an abandoned or rolled-back migration leaves the file
 * whole where it was.
 */
#include "tests/dedup/store-test.h"

typedef struct Tiers {
	Env e;           /* tier 0: e.store, e.backend */
	char dir1[128];
	DedupBackend *backend1;
	DedupStore *store1;
} Tiers;

static void tiers_open(Tiers *t) {
	env_open(&t->e, NULL);
	snprintf(t->dir1, sizeof(t->dir1), "%s/tier1", t->e.dir);
	ASSERT(mkdir(t->dir1, 0755) == 0);
	ASSERT_OK(tier_backend_dir_open(t->dir1, &t->backend1));
	ASSERT_OK(dedup_store_open(t->e.catalog, 1, t->backend1, NULL, &t->store1));
}

static void tiers_close(Tiers *t) {
	t->store1 = dedup_store_free(t->store1);
	t->backend1 = dedup_backend_free(t->backend1);
	env_close(&t->e);
}

/* The same Env, reading and writing through tier 1's store. */
static Env on1(const Tiers *t) {
	Env e = t->e;
	e.store = t->store1;
	return e;
}

static void check_refs_tier(Catalog *c, uint32_t tier, const uint64_t *inos, size_t n) {
	RefCount rc = {};
	for (size_t i = 0; i < n; i++)
		ASSERT(catalog_recipe_foreach(c, inos[i], refcount_collect, &rc) >= 0);
	/* qsort() and bsearch() want an array even when it is empty. */
	if (!rc.ids)
		rc.ids = test_malloc(sizeof(uint64_t));
	qsort(rc.ids, rc.n, sizeof(uint64_t), refcount_cmp);
	ASSERT_OK(catalog_chunks_foreach(c, tier, refcount_check_chunk, &rc));
	for (size_t i = 0; i < rc.n; i++) {
		CatalogChunk ch;
		ASSERT_OK(catalog_chunk_get(c, rc.ids[i], &ch));
		ASSERT(ch.tier == tier);
	}
	free(rc.ids);
}

static void migrate(DedupStore *from, DedupStore *to, Catalog *c, uint64_t ino, size_t len, int level,
		    DedupWriterStats *ret) {
	DedupMigration *m;
	ASSERT_OK(dedup_file_migrate(from, to, ino, len, level, DEDUP_STORE_REGION_DEFAULT, -1, NULL, NULL, &m));
	ASSERT_OK(catalog_begin(c));
	ASSERT_OK(dedup_migration_commit(m));
	ASSERT_OK(catalog_commit(c));
	if (ret)
		dedup_migration_stats(m, ret);
	dedup_migration_free(m);
}

static uint64_t stored_bytes(DedupStore *s) {
	DedupStoreStats st;
	ASSERT_OK(dedup_store_stats(s, &st));
	return st.stored_bytes;
}

static void gc(DedupStore *s) {
	DedupGcOptions o = { .live_threshold = 0.99 };
	ASSERT_OK(dedup_store_gc(s, &o, NULL));
}

/* A file already half on the target: only the other half is stored there. */
static void test_dedup_against_target(void) {
	Tiers t;
	TestRng rng = { 11 };
	size_t len = 6 * MiB;
	uint8_t *a = test_malloc(len), *b = test_malloc(len);
	tiers_open(&t);
	Env e1 = on1(&t);

	fill_text(&rng, a, len);
	memcpy(b, a, len / 2);
	fill_text(&rng, b + len / 2, len - len / 2);
	uint64_t ia = env_seal(&t.e, a, len, &rng, NULL);
	uint64_t ib = env_seal(&e1, b, len, &rng, NULL);

	DedupWriterStats ws;
	migrate(t.e.store, t.store1, t.e.catalog, ia, len, 9, &ws);
	ASSERT(ws.dup_bytes >= len / 2 - 256 * KiB);
	ASSERT(ws.new_bytes <= len / 2 + 256 * KiB);
	ASSERT(ws.logical_bytes == len);

	uint64_t both[] = { ia, ib };
	check_refs_tier(t.e.catalog, 1, both, 2);
	check_refs_tier(t.e.catalog, 0, NULL, 0);
	env_check_file(&e1, ia, a, len, &rng);
	env_check_file(&e1, ib, b, len, &rng);

	/* Nothing on tier 0 is referenced any more: its collector empties it. */
	ASSERT(stored_bytes(t.e.store) > 0);
	gc(t.e.store);
	ASSERT(stored_bytes(t.e.store) == 0);
	uint64_t before = stored_bytes(t.store1);
	gc(t.store1);
	ASSERT(stored_bytes(t.store1) == before);
	env_check_file(&e1, ia, a, len, &rng);

	/* Recall: back on tier 0, byte-exact, and tier 1 keeps only b. */
	migrate(t.store1, t.e.store, t.e.catalog, ia, len, DEDUP_STORE_LEVEL_DEFAULT, NULL);
	env_check_file(&t.e, ia, a, len, &rng);
	check_refs_tier(t.e.catalog, 0, &ia, 1);
	check_refs_tier(t.e.catalog, 1, &ib, 1);
	gc(t.store1);
	env_check_file(&e1, ib, b, len, &rng);

	free(a);
	free(b);
	tiers_close(&t);
}

/* Two files sharing chunks on the source; moving one must leave the other's frames alone. */
static void test_shared_source(void) {
	Tiers t;
	TestRng rng = { 12 };
	size_t len = 4 * MiB;
	uint8_t *a = test_malloc(len), *c = test_malloc(len);
	tiers_open(&t);
	Env e1 = on1(&t);

	fill_sparse(&rng, a, len);
	memcpy(c, a, len);
	test_rng_fill(&rng, c + len / 3, 64 * KiB);
	uint64_t ia = env_seal(&t.e, a, len, &rng, NULL);
	uint64_t ic = env_seal(&t.e, c, len, &rng, NULL);

	migrate(t.e.store, t.store1, t.e.catalog, ia, len, DEDUP_STORE_LEVEL_DEFAULT, NULL);
	check_refs_tier(t.e.catalog, 0, &ic, 1);
	check_refs_tier(t.e.catalog, 1, &ia, 1);
	gc(t.e.store);
	gc(t.store1);
	env_check_file(&t.e, ic, c, len, &rng);
	env_check_file(&e1, ia, a, len, &rng);
	check_refs_tier(t.e.catalog, 0, &ic, 1);

	/* After a reopen (recovery of both stores) the same. */
	t.store1 = dedup_store_free(t.store1);
	env_reopen_store(&t.e);
	ASSERT_OK(dedup_store_open(t.e.catalog, 1, t.backend1, NULL, &t.store1));
	e1 = on1(&t);
	env_check_file(&t.e, ic, c, len, &rng);
	env_check_file(&e1, ia, a, len, &rng);

	free(a);
	free(c);
	tiers_close(&t);
}

/* Freed before commit, or its transaction rolled back: the file stays whole on the source. */
static void test_abandoned(void) {
	Tiers t;
	TestRng rng = { 13 };
	size_t len = 3 * MiB + 12345;
	uint8_t *a = test_malloc(len);
	tiers_open(&t);
	Env e1 = on1(&t);

	fill_text(&rng, a, len);
	uint64_t ia = env_seal(&t.e, a, len, &rng, NULL);
	uint64_t src = stored_bytes(t.e.store);

	DedupMigration *m;
	ASSERT_OK(dedup_file_migrate(t.e.store, t.store1, ia, len, DEDUP_STORE_LEVEL_DEFAULT, DEDUP_STORE_REGION_DEFAULT, -1, NULL, NULL, &m));
	m = dedup_migration_free(m);
	check_refs_tier(t.e.catalog, 0, &ia, 1);
	check_refs_tier(t.e.catalog, 1, NULL, 0);
	env_check_file(&t.e, ia, a, len, &rng);
	ASSERT(stored_bytes(t.store1) > 0);
	gc(t.store1);
	ASSERT(stored_bytes(t.store1) == 0);
	ASSERT(stored_bytes(t.e.store) == src);

	ASSERT_OK(dedup_file_migrate(t.e.store, t.store1, ia, len, DEDUP_STORE_LEVEL_DEFAULT, DEDUP_STORE_REGION_DEFAULT, -1, NULL, NULL, &m));
	ASSERT_OK(catalog_begin(t.e.catalog));
	ASSERT_OK(dedup_migration_commit(m));
	catalog_rollback(t.e.catalog);
	check_refs_tier(t.e.catalog, 0, &ia, 1);
	env_check_file(&t.e, ia, a, len, &rng);
	/* The copy is still good: commit again. */
	ASSERT_OK(catalog_begin(t.e.catalog));
	ASSERT_OK(dedup_migration_commit(m));
	ASSERT_OK(catalog_commit(t.e.catalog));
	dedup_migration_free(m);
	check_refs_tier(t.e.catalog, 1, &ia, 1);
	check_refs_tier(t.e.catalog, 0, NULL, 0);
	env_check_file(&e1, ia, a, len, &rng);

	free(a);
	tiers_close(&t);
}

static int stop_early(uint64_t done, uint64_t total, void *userdata) {
	(*(unsigned *) userdata)++;
	return done >= total / 2 ? -ECANCELED : 0;
}

/* A copy stopped by its progress callback; a recipe shorter than the size asked for; misuse. */
static void test_errors(void) {
	Tiers t;
	TestRng rng = { 14 };
	size_t len = 9 * MiB;
	uint8_t *a = test_malloc(len);
	tiers_open(&t);
	DedupMigration *m = NULL;

	fill_text(&rng, a, len);
	uint64_t ia = env_seal(&t.e, a, len, &rng, NULL);
	unsigned calls = 0;
	ASSERT_RET(dedup_file_migrate(t.e.store, t.store1, ia, len, DEDUP_STORE_LEVEL_DEFAULT, DEDUP_STORE_REGION_DEFAULT, -1, stop_early, &calls, &m),
		   -ECANCELED);
	ASSERT(calls >= 2 && !m);
	ASSERT_RET(dedup_file_migrate(t.e.store, t.store1, ia, len + 1, DEDUP_STORE_LEVEL_DEFAULT, DEDUP_STORE_REGION_DEFAULT, -1, NULL, NULL, &m),
		   -EIO);
	ASSERT_RET(dedup_file_migrate(t.e.store, t.e.store, ia, len, DEDUP_STORE_LEVEL_DEFAULT, DEDUP_STORE_REGION_DEFAULT, -1, NULL, NULL, &m),
		   -EINVAL);
	ASSERT_RET(dedup_file_migrate(t.e.store, t.store1, ia, len, 99, DEDUP_STORE_REGION_DEFAULT, -1, NULL, NULL, &m), -EINVAL);
	check_refs_tier(t.e.catalog, 0, &ia, 1);
	env_check_file(&t.e, ia, a, len, &rng);

	/* An empty file has no recipe: it moves all the same. */
	uint64_t empty = env_seal(&t.e, a, 0, &rng, NULL);
	migrate(t.e.store, t.store1, t.e.catalog, empty, 0, DEDUP_STORE_LEVEL_DEFAULT, NULL);

	/* Dropped without its store: the references go all the same, the store untouched. */
	migrate(t.e.store, t.store1, t.e.catalog, ia, len, DEDUP_STORE_LEVEL_DEFAULT, NULL);
	ASSERT_OK(catalog_begin(t.e.catalog));
	ASSERT_OK(dedup_file_drop_unopened(t.e.catalog, ia));
	ASSERT_OK(catalog_commit(t.e.catalog));
	check_refs_tier(t.e.catalog, 1, NULL, 0);
	gc(t.store1);
	ASSERT(stored_bytes(t.store1) == 0);

	free(a);
	tiers_close(&t);
}

static int region_level(const CatalogChunk *ch, void *userdata) {
	int *levels = userdata; /* [0]: the tier directory; [1 + level + 8]: chunks in regions of that level */
	char name[DEDUP_CONTAINER_NAME_MAX];
	uint8_t h[DEDUP_REGION_HEADER_SIZE];
	DedupRegionHeader rh;
	int fd = openat(levels[0], dedup_container_name(ch->container, name), O_RDONLY | O_CLOEXEC);
	ASSERT(fd >= 0 && pread(fd, h, sizeof(h), (off_t) ch->offset) == sizeof(h));
	close(fd);
	ASSERT_OK(dedup_region_header_parse(h, sizeof(h), &rh));
	levels[1 + rh.level + 8]++;
	return 0;
}

/*
 * Colder means smaller: a file stored at a fast level moves to a tier that
 * compresses at a high one; its chunks there are in regions of that level,
 * smaller than on the source, the bytes come back exact, and the move is
 * counted on the target (catalog_tier_moved_get(): before and after).
 */
static void test_recompressed(void) {
	Tiers t;
	TestRng rng = { 6 };
	size_t len = 3 * MiB;
	uint8_t *a = test_malloc(len);
	DedupWriterStats ws;
	CatalogTierMoved moved;

	tiers_open(&t);
	fill_text(&rng, a, len);
	uint64_t ino = env_new_inode(&t.e);
	DedupWriter *w;
	ASSERT_OK(dedup_writer_new(t.e.store, NULL, -7, DEDUP_STORE_REGION_DEFAULT, &w));
	ASSERT_OK(dedup_writer_feed(w, a, len));
	ASSERT_OK(dedup_writer_finish(w));
	env_commit(&t.e, w, ino);
	dedup_writer_stats(w, &ws);
	dedup_writer_free(w);
	uint64_t fast = ws.stored_bytes;

	migrate(t.e.store, t.store1, t.e.catalog, ino, len, 19, &ws);
	ASSERT(ws.new_bytes == len && ws.stored_bytes < fast * 9 / 10);
	Env e1 = on1(&t);
	env_check_file(&e1, ino, a, len, &rng);
	check_refs_tier(t.e.catalog, 1, &ino, 1);

	int levels[1 + 28] = { open(t.dir1, O_RDONLY | O_DIRECTORY | O_CLOEXEC) };
	ASSERT(levels[0] >= 0);
	ASSERT_OK(catalog_chunks_foreach(t.e.catalog, 1, region_level, levels));
	ASSERT(levels[1 + 19 + 8] > 0);
	for (int l = -7; l <= 18; l++)
		ASSERT(levels[1 + l + 8] == 0);
	close(levels[0]);

	ASSERT_OK(catalog_tier_moved_get(t.e.catalog, 1, &moved));
	ASSERT(moved.files == 1 && moved.logical == len && moved.source_stored == fast && moved.stored == ws.stored_bytes);
	ASSERT_OK(catalog_tier_moved_get(t.e.catalog, 0, &moved));
	ASSERT(moved.files == 0);

	/* And back: recompressed at the hot tier's level, counted there. */
	migrate(t.store1, t.e.store, t.e.catalog, ino, len, 3, &ws);
	env_check_file(&t.e, ino, a, len, &rng);
	ASSERT_OK(catalog_tier_moved_get(t.e.catalog, 0, &moved));
	ASSERT(moved.files == 1 && moved.source_stored > 0 && moved.stored > 0);
	free(a);
	tiers_close(&t);
}

/* Counts the files under dir (recursively) whose bytes hold needle[0, n). */
static size_t files_holding(const char *dir, const uint8_t *needle, size_t n) {
	char cmd[512];
	size_t hits = 0;
	snprintf(cmd, sizeof(cmd), "find '%s' -type f", dir);
	FILE *f = popen(cmd, "r");
	ASSERT(f);
	char path[4096];
	while (fgets(path, sizeof(path), f)) {
		path[strcspn(path, "\n")] = '\0';
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ASSERT(fd >= 0);
		struct stat st;
		ASSERT(fstat(fd, &st) == 0);
		uint8_t *b = test_malloc((size_t) st.st_size + 1);
		ASSERT(pread(fd, b, (size_t) st.st_size, 0) == st.st_size);
		close(fd);
		if (memmem(b, (size_t) st.st_size, needle, n))
			hits++;
		free(b);
	}
	pclose(f);
	return hits;
}

static int region_version(const CatalogChunk *ch, void *userdata) {
	int *v = userdata; /* [0]: the tier directory; [1 + version]: chunks in regions of that version */
	char name[DEDUP_CONTAINER_NAME_MAX];
	uint8_t h[DEDUP_REGION_HEADER_SIZE];
	int fd = openat(v[0], dedup_container_name(ch->container, name), O_RDONLY | O_CLOEXEC);
	ASSERT(fd >= 0 && pread(fd, h, sizeof(h), (off_t) ch->offset) == sizeof(h));
	close(fd);
	ASSERT(h[4] >= 1 && h[4] <= 4);
	v[1 + h[4]]++;
	return 0;
}

/* The newest chunk of a tier: stored by the last file migrated there. */
static int newest_chunk(const CatalogChunk *ch, void *userdata) {
	CatalogChunk *newest = userdata;
	if (ch->id > newest->id)
		*newest = *ch;
	return 0;
}

/* Flips one byte of ch's unit in the tier directory dir, a payload byte past the header and table. */
static void flip_unit(int dir, const CatalogChunk *ch) {
	char name[DEDUP_CONTAINER_NAME_MAX];
	int fd = openat(dir, dedup_container_name(ch->container, name), O_RDWR | O_CLOEXEC);
	uint8_t b;
	off_t at = (off_t) (ch->offset + ch->region_size - 1);
	ASSERT(fd >= 0 && pread(fd, &b, 1, at) == 1);
	b ^= 0x40;
	ASSERT(pwrite(fd, &b, 1, at) == 1);
	close(fd);
}

/*
 * A tier that encrypts (DedupStoreOptions.encrypt) beside one that does
 * not, under one key: migration seals regions on the way down and opens
 * them on the way back; nothing of the file's bytes is on the sealed tier;
 * compaction of sealed regions re-seals them where they go; a changed byte
 * is found by scrub and reads -EIO.
 */
static void test_sealed_tier(void) {
	static const uint8_t id_key[32] = "id key id key id key id key id k";
	static const uint8_t content_key[32] = "content key content key content";
	DedupStoreOptions plain = { .id_key = id_key, .content_key = content_key, .description_key = content_key };
	DedupStoreOptions sealed = plain;
	sealed.encrypt = true;
	Tiers t;
	TestRng rng = { 7 };
	size_t len = 2 * MiB;
	uint8_t *a = test_malloc(len), *b = test_malloc(len);

	env_open(&t.e, &plain);
	snprintf(t.dir1, sizeof(t.dir1), "%s/tier1", t.e.dir);
	ASSERT(mkdir(t.dir1, 0755) == 0);
	ASSERT_OK(tier_backend_dir_open(t.dir1, &t.backend1));
	DedupStoreOptions nokey = { .encrypt = true, .id_key = id_key };
	ASSERT_RET(dedup_store_open(t.e.catalog, 1, t.backend1, &nokey, &t.store1), -EINVAL);
	ASSERT_OK(dedup_store_open(t.e.catalog, 1, t.backend1, &sealed, &t.store1));

	/* a: random (stored raw), b: text (zstd). */
	test_rng_fill(&rng, a, len);
	fill_text(&rng, b, len);
	uint64_t ia = env_seal(&t.e, a, len, &rng, NULL), ib = env_seal(&t.e, b, len, &rng, NULL);
	/* The check can fail: on the plain tier a's bytes are there to find. */
	ASSERT(files_holding(t.e.tier_dir, a + len / 2, 64) > 0);

	migrate(t.e.store, t.store1, t.e.catalog, ia, len, 3, NULL);
	migrate(t.e.store, t.store1, t.e.catalog, ib, len, 3, NULL);
	ASSERT(files_holding(t.dir1, a + len / 2, 64) == 0);
	ASSERT(files_holding(t.dir1, a + 12345, 64) == 0);
	Env e1 = on1(&t);
	env_check_file(&e1, ia, a, len, &rng);
	env_check_file(&e1, ib, b, len, &rng);
	int versions[6] = { open(t.dir1, O_RDONLY | O_DIRECTORY | O_CLOEXEC) };
	ASSERT(versions[0] >= 0);
	ASSERT_OK(catalog_chunks_foreach(t.e.catalog, 1, region_version, versions));
	ASSERT(versions[1 + 4] > 0 && versions[1 + 3] == 0 && versions[1 + 2] == 0 && versions[1 + 1] == 0);
	/* The tables are sealed too (version 4): no chunk id is on the tier, as none is on the plain one. */
	CatalogChunk newest = {};
	ASSERT_OK(catalog_chunks_foreach(t.e.catalog, 1, newest_chunk, &newest));
	ASSERT(newest.id > 0 && files_holding(t.dir1, newest.digest, DEDUP_CHUNK_ID_SIZE) == 0);
	ASSERT(files_holding(t.e.tier_dir, newest.digest, DEDUP_CHUNK_ID_SIZE) > 0);
	DedupScrubResult res;
	ASSERT_OK(dedup_store_scrub(t.store1, NULL, NULL, &res));
	ASSERT(res.damaged_chunks == 0 && res.chunks > 0);
	free(res.damaged);

	/* A store that does not encrypt still opens what is sealed (encrypt = yes, then no). */
	t.store1 = dedup_store_free(t.store1);
	ASSERT_OK(dedup_store_open(t.e.catalog, 1, t.backend1, &plain, &t.store1));
	e1 = on1(&t);
	env_check_file(&e1, ia, a, len, &rng);
	t.store1 = dedup_store_free(t.store1);
	ASSERT_OK(dedup_store_open(t.e.catalog, 1, t.backend1, &sealed, &t.store1));

	/* Compaction: a's chunks die, b's sealed regions move and are sealed again where they land. */
	ASSERT_OK(catalog_begin(t.e.catalog));
	ASSERT_OK(dedup_file_drop(t.store1, ia));
	ASSERT_OK(catalog_commit(t.e.catalog));
	gc(t.store1);
	e1 = on1(&t);
	env_check_file(&e1, ib, b, len, &rng);
	memset(versions + 1, 0, 5 * sizeof(int));
	ASSERT_OK(catalog_chunks_foreach(t.e.catalog, 1, region_version, versions));
	ASSERT(versions[1 + 4] > 0 && versions[1 + 1] == 0);

	/* And back up: plain again on tier 0, byte for byte. */
	migrate(t.store1, t.e.store, t.e.catalog, ib, len, 3, NULL);
	env_check_file(&t.e, ib, b, len, &rng);

	/* A flipped byte of a sealed region: EIO, and scrub lists it. */
	uint64_t ia2 = env_seal(&t.e, a, len, &rng, NULL);
	migrate(t.e.store, t.store1, t.e.catalog, ia2, len, 3, NULL);
	newest = (CatalogChunk) {};
	ASSERT_OK(catalog_chunks_foreach(t.e.catalog, 1, newest_chunk, &newest));
	ASSERT(newest.id > 0);
	flip_unit(versions[0], &newest);
	ASSERT_OK(dedup_store_scrub(t.store1, NULL, NULL, &res));
	ASSERT(res.damaged_chunks > 0);
	free(res.damaged);
	uint8_t *back = test_malloc(len);
	ssize_t n = 0;
	for (uint64_t off = 0; off < len && n >= 0; off += (uint64_t) n) {
		n = dedup_file_read(t.store1, ia2, len, off, back + off, len - off);
		if (n == 0)
			break;
	}
	ASSERT(n == -EIO);
	free(back);
	close(versions[0]);
	free(a);
	free(b);
	tiers_close(&t);
}

typedef struct KeyBytes {
	uint64_t under[3]; /* tier 1: [0] no key, [1] key A, [2] key B */
	uint64_t total;
} KeyBytes;

static int key_bytes(uint32_t tier, const uint8_t *key_id, uint64_t containers, uint64_t bytes, void *userdata) {
	KeyBytes *k = userdata;
	(void) containers;
	if (tier != 1)
		return 0;
	k->under[key_id ? 1 + (key_id[0] == 'B') : 0] += bytes;
	k->total += bytes;
	return 0;
}

static int rekey_progress(uint64_t done, uint64_t total, void *userdata) {
	int *calls = userdata;
	ASSERT(done <= total);
	return ++*calls == 3 ? -ECANCELED : 0; /* stops after the second container, as a stop would */
}

/*
 * Key rotation on a sealed tier: data sealed under key A stays readable
 * once B is the newest (A among the old keys), and not without A; new data
 * goes under B in containers of their own; a rekey stopped part way left
 * every container under one key and every file whole, and once run again
 * to the end, every container is under B, each file reads back exact with
 * B alone, and what is recorded per key adds up to the tier's bytes.
 */
static void test_rekey(void) {
	static const uint8_t id_key[32] = "id key id key id key id key id k";
	static const uint8_t key_a[32] = "content key A content key A con", key_b[32] = "content key B content key B con";
	static const uint8_t kid_a[32] = "A key id A key id A key id A key", kid_b[32] = "B key id B key id B key id B key";
	DedupStoreOptions under_a = { .id_key = id_key, .content_key = key_a, .description_key = key_a, .key_id = kid_a,
				      .encrypt = true, .container_size = 1 << 20 };
	DedupOldKeys old = { .n = 1, .keys = { { .tag = dedup_key_tag(kid_a), .key_id = kid_a, .content = key_a, .description = key_a } } };
	DedupStoreOptions under_b = { .id_key = id_key, .content_key = key_b, .description_key = key_b, .key_id = kid_b,
				      .old_keys = &old, .encrypt = true, .container_size = 1 << 20 };
	DedupStoreOptions b_alone = under_b;
	b_alone.old_keys = NULL;
	Tiers t;
	TestRng rng = { 9 };
	size_t len = 3 * MiB;
	uint8_t *a = test_malloc(len), *b = test_malloc(len), *c = test_malloc(len);

	env_open(&t.e, &under_a);
	snprintf(t.dir1, sizeof(t.dir1), "%s/tier1", t.e.dir);
	ASSERT(mkdir(t.dir1, 0755) == 0);
	ASSERT_OK(tier_backend_dir_open(t.dir1, &t.backend1));
	ASSERT_OK(dedup_store_open(t.e.catalog, 1, t.backend1, &under_a, &t.store1));
	test_rng_fill(&rng, a, len);
	fill_text(&rng, b, len);
	test_rng_fill(&rng, c, len);
	uint64_t ia = env_seal(&t.e, a, len, &rng, NULL), ib = env_seal(&t.e, b, len, &rng, NULL);
	migrate(t.e.store, t.store1, t.e.catalog, ia, len, 3, NULL);
	migrate(t.e.store, t.store1, t.e.catalog, ib, len, 3, NULL);
	KeyBytes k = {};
	ASSERT_OK(catalog_key_usage_foreach(t.e.catalog, key_bytes, &k));
	ASSERT(k.under[1] > 0 && k.under[2] == 0 && k.under[0] == 0);

	/* B the newest: A's data reads with A among the old keys, not without. */
	t.store1 = dedup_store_free(t.store1);
	ASSERT_OK(dedup_store_open(t.e.catalog, 1, t.backend1, &b_alone, &t.store1));
	uint8_t *back = test_malloc(len);
	ASSERT_RET(dedup_file_read(t.store1, ia, len, 0, back, 4096), -EIO);
	t.store1 = dedup_store_free(t.store1);
	ASSERT_OK(dedup_store_open(t.e.catalog, 1, t.backend1, &under_b, &t.store1));
	Env e1 = on1(&t);
	env_check_file(&e1, ia, a, len, &rng);
	/* New data under B, in a container of its own (A's open container was not resumed). */
	uint64_t ic = env_seal(&t.e, c, len, &rng, NULL);
	migrate(t.e.store, t.store1, t.e.catalog, ic, len, 3, NULL);
	k = (KeyBytes) {};
	ASSERT_OK(catalog_key_usage_foreach(t.e.catalog, key_bytes, &k));
	uint64_t under_a_before = k.under[1];
	ASSERT(k.under[1] > 0 && k.under[2] > 0);

	/* Stopped part way: some containers moved, each file still whole. */
	int calls = 0;
	uint64_t rewritten = 0, skipped = 0, left = 0;
	ASSERT_RET(dedup_store_rekey(t.store1, 0, rekey_progress, &calls, &rewritten, &skipped, &left), -ECANCELED);
	ASSERT(rewritten == 2 && skipped == 0 && left > 0);
	k = (KeyBytes) {};
	ASSERT_OK(catalog_key_usage_foreach(t.e.catalog, key_bytes, &k));
	ASSERT(k.under[1] > 0 && k.under[1] < under_a_before);
	e1 = on1(&t);
	env_check_file(&e1, ia, a, len, &rng);
	env_check_file(&e1, ib, b, len, &rng);

	/* One container's bytes at most: cut short, to be called again. */
	ASSERT_RET(dedup_store_rekey(t.store1, 1, NULL, NULL, &rewritten, &skipped, &left), 1);
	ASSERT(rewritten == 1 && left > 0);
	/* To the end: nothing under A, and B alone reads everything. */
	ASSERT_OK(dedup_store_rekey(t.store1, 0, NULL, NULL, &rewritten, &skipped, &left));
	ASSERT(rewritten > 0 && skipped == 0 && left == 0);
	k = (KeyBytes) {};
	ASSERT_OK(catalog_key_usage_foreach(t.e.catalog, key_bytes, &k));
	ASSERT(k.under[1] == 0 && k.under[0] == 0 && k.under[2] == k.total);
	DedupStoreStats st;
	ASSERT_OK(dedup_store_stats(t.store1, &st));
	ASSERT(st.stored_bytes == k.total);
	t.store1 = dedup_store_free(t.store1);
	ASSERT_OK(dedup_store_open(t.e.catalog, 1, t.backend1, &b_alone, &t.store1));
	e1 = on1(&t);
	env_check_file(&e1, ia, a, len, &rng);
	env_check_file(&e1, ib, b, len, &rng);
	env_check_file(&e1, ic, c, len, &rng);
	DedupScrubResult res;
	ASSERT_OK(dedup_store_scrub(t.store1, NULL, NULL, &res));
	ASSERT(res.damaged_chunks == 0 && res.chunks > 0);
	free(res.damaged);
	free(back);
	free(a);
	free(b);
	free(c);
	tiers_close(&t);
}

int main(void) {
	test_dedup_against_target();
	test_recompressed();
	test_shared_source();
	test_abandoned();
	test_errors();
	test_sealed_tier();
	test_rekey();
	return 0;
}
