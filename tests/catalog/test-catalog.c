/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests of the catalog: schema creation and version checks, inode and
 * directory-entry verbs, stable listing cookies, xattr flags and limits,
 * orphans, rollback, reopen and damage detection.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "common/macros.h"

static int failures;

#define CHECK(cond)                                                                         \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                                         \
		}                                                                           \
	} while (0)

static char dir[] = "/tmp/fratier-test-catalog-XXXXXX";
static char path[256];

static uint64_t make(Catalog *c, uint64_t parent, const char *name, uint32_t mode) {
	CatalogInode in = { .parent = parent, .mode = mode, .nlink = S_ISDIR(mode) ? 2 : 1, .uid = 54321, .gid = 54322 };
	uint64_t ino = 0;
	CHECK(catalog_begin(c) == 0);
	CHECK(catalog_inode_create(c, &in, S_ISLNK(mode) ? "target/of/link" : NULL, &ino) == 0);
	CHECK(catalog_dirent_add(c, parent, name, ino) == 0);
	CHECK(catalog_commit(c) == 0);
	return ino;
}

static void test_basic(void) {
	Catalog *c = NULL;
	CatalogInode ci;
	uint64_t ino;

	CHECK(catalog_open(path, 1000, 1001, &c) == 0);
	CHECK(catalog_inode_get(c, CATALOG_ROOT_INO, &ci) == 0);
	CHECK(S_ISDIR(ci.mode) && ci.uid == 1000 && ci.gid == 1001 && ci.nlink == 2);

	uint64_t f = make(c, CATALOG_ROOT_INO, "file", S_IFREG | 0640);
	uint64_t d = make(c, CATALOG_ROOT_INO, "dir", S_IFDIR | 0755);
	uint64_t l = make(c, d, "link", S_IFLNK | 0777);
	CHECK(f > CATALOG_ROOT_INO && d > f && l > d);

	CHECK(catalog_dirent_lookup(c, CATALOG_ROOT_INO, "file", &ino) == 0 && ino == f);
	CHECK(catalog_dirent_lookup(c, CATALOG_ROOT_INO, "nope", &ino) == -ENOENT);
	CHECK(catalog_dirent_add(c, CATALOG_ROOT_INO, "file", f) == -EEXIST);
	CHECK(catalog_inode_get(c, f, &ci) == 0 && ci.mode == (S_IFREG | 0640) && ci.uid == 54321);
	CHECK(catalog_inode_get(c, 999999, &ci) == -ENOENT);
	CHECK(catalog_dir_is_empty(c, d) == 0);
	CHECK(catalog_dir_is_empty(c, f) == 1);

	char target[64];
	CHECK(catalog_symlink_get(c, l, target, sizeof(target)) == (int) strlen("target/of/link"));
	CHECK(strcmp(target, "target/of/link") == 0);
	CHECK(catalog_symlink_get(c, l, target, 4) == -ERANGE);
	CHECK(catalog_symlink_get(c, f, target, sizeof(target)) == -EINVAL);

	/* Names are bytes: anything but '/' and NUL, up to 255 of them. */
	char odd[CATALOG_NAME_MAX + 2];
	memset(odd, 0xff, CATALOG_NAME_MAX);
	odd[0] = '\n';
	odd[CATALOG_NAME_MAX] = 0;
	CHECK(catalog_dirent_add(c, d, odd, f) == 0);
	CHECK(catalog_dirent_lookup(c, d, odd, &ino) == 0 && ino == f);
	odd[CATALOG_NAME_MAX] = 'x';
	odd[CATALOG_NAME_MAX + 1] = 0;
	CHECK(catalog_dirent_add(c, d, odd, f) == -ENAMETOOLONG);

	/* Rollback leaves nothing behind. */
	CHECK(catalog_begin(c) == 0);
	CHECK(catalog_dirent_add(c, CATALOG_ROOT_INO, "ghost", f) == 0);
	catalog_rollback(c);
	CHECK(catalog_dirent_lookup(c, CATALOG_ROOT_INO, "ghost", &ino) == -ENOENT);

	/* Retarget keeps the entry, points it elsewhere. */
	CHECK(catalog_dirent_retarget(c, CATALOG_ROOT_INO, "file", d) == 0);
	CHECK(catalog_dirent_lookup(c, CATALOG_ROOT_INO, "file", &ino) == 0 && ino == d);
	CHECK(catalog_dirent_retarget(c, CATALOG_ROOT_INO, "file", f) == 0);
	CHECK(catalog_dirent_retarget(c, CATALOG_ROOT_INO, "absent", f) == -ENOENT);

	CHECK(catalog_sync(c) == 0);
	CHECK(catalog_check(c) == 0);
	catalog_close(c);
}

static void test_listing_stable(void) {
	Catalog *c = NULL;
	CatalogDirent batch[8];
	char name[32];

	CHECK(catalog_open(path, 0, 0, &c) == 0);
	uint64_t d = make(c, CATALOG_ROOT_INO, "listing", S_IFDIR | 0755);
	for (int k = 0; k < 20; k++) {
		snprintf(name, sizeof(name), "e%02d", k);
		make(c, d, name, S_IFREG | 0644);
	}

	/* Read in batches while removing entries already read and adding new ones. */
	int seen[20] = {}, added = 0, n;
	uint64_t after = 0;
	while ((n = catalog_dir_read(c, d, after, batch, (sizeof(batch) / sizeof(batch[0])))) > 0) {
		for (int k = 0; k < n; k++) {
			CHECK(batch[k].cookie > after);
			after = batch[k].cookie;
			int idx;
			if (sscanf(batch[k].name, "e%d", &idx) == 1 && idx >= 0 && idx < 20) {
				seen[idx]++;
				CHECK(catalog_dirent_remove(c, d, batch[k].name) == 0);
			}
			CHECK(S_ISREG(batch[k].mode));
		}
		if (added < 5) {
			snprintf(name, sizeof(name), "new%02d", added++);
			make(c, d, name, S_IFREG | 0644);
		}
	}
	CHECK(n == 0);
	for (int k = 0; k < 20; k++)
		CHECK(seen[k] == 1);
	catalog_close(c);
}

static void test_xattrs(void) {
	Catalog *c = NULL;
	char buf[128];

	CHECK(catalog_open(path, 0, 0, &c) == 0);
	uint64_t f = make(c, CATALOG_ROOT_INO, "xfile", S_IFREG | 0644);
	CHECK(catalog_xattr_any(c, f) == 0);
	CHECK(catalog_xattr_get(c, f, "user.a", buf, sizeof(buf)) == -ENODATA);
	CHECK(catalog_xattr_set(c, f, "user.a", "1", 1, XATTR_REPLACE) == -ENODATA);
	CHECK(catalog_xattr_set(c, f, "user.a", "hello", 5, XATTR_CREATE) == 0);
	CHECK(catalog_xattr_set(c, f, "user.a", "x", 1, XATTR_CREATE) == -EEXIST);
	CHECK(catalog_xattr_set(c, f, "user.b", "", 0, 0) == 0);
	CHECK(catalog_xattr_any(c, f) == 1);
	CHECK(catalog_xattr_get(c, f, "user.a", NULL, 0) == 5);
	CHECK(catalog_xattr_get(c, f, "user.a", buf, 2) == -ERANGE);
	CHECK(catalog_xattr_get(c, f, "user.a", buf, sizeof(buf)) == 5 && memcmp(buf, "hello", 5) == 0);
	CHECK(catalog_xattr_get(c, f, "user.b", buf, sizeof(buf)) == 0);
	CHECK(catalog_xattr_set(c, f, "user.a", "bye", 3, XATTR_REPLACE) == 0);
	CHECK(catalog_xattr_get(c, f, "user.a", buf, sizeof(buf)) == 3 && memcmp(buf, "bye", 3) == 0);
	CHECK(catalog_xattr_list(c, f, NULL, 0) == (int) sizeof("user.a\0user.b"));
	CHECK(catalog_xattr_list(c, f, buf, 3) == -ERANGE);
	CHECK(catalog_xattr_list(c, f, buf, sizeof(buf)) == (int) sizeof("user.a\0user.b"));
	CHECK(memcmp(buf, "user.a\0user.b\0", 14) == 0);
	CHECK(catalog_xattr_remove(c, f, "user.a") == 0);
	CHECK(catalog_xattr_remove(c, f, "user.a") == -ENODATA);

	static char big[CATALOG_XATTR_VALUE_MAX + 1];
	CHECK(catalog_xattr_set(c, f, "user.big", big, sizeof(big), 0) == -E2BIG);
	CHECK(catalog_xattr_set(c, f, "user.big", big, CATALOG_XATTR_VALUE_MAX, 0) == 0);

	/* Deleting the inode deletes its xattrs (the foreign key would refuse otherwise). */
	CHECK(catalog_dirent_remove(c, CATALOG_ROOT_INO, "xfile") == 0);
	CHECK(catalog_inode_delete(c, f) == 0);
	CHECK(catalog_xattr_any(c, f) == 0);
	CHECK(catalog_inode_exists(c, f) == 0);
	catalog_close(c);
}

static int collect(uint64_t ino, void *userdata) {
	uint64_t *found = userdata;
	*found = ino;
	return 0;
}

static void test_orphans_and_reuse(void) {
	Catalog *c = NULL;
	CatalogInode ci;

	CHECK(catalog_open(path, 0, 0, &c) == 0);
	uint64_t f = make(c, CATALOG_ROOT_INO, "orphan", S_IFREG | 0644);
	CHECK(catalog_begin(c) == 0);
	CHECK(catalog_dirent_remove(c, CATALOG_ROOT_INO, "orphan") == 0);
	CHECK(catalog_inode_get(c, f, &ci) == 0);
	ci.nlink = 0;
	CHECK(catalog_inode_update(c, &ci) == 0);
	CHECK(catalog_commit(c) == 0);
	catalog_close(c);

	/* Survives a reopen, as after a crash, and is reported. */
	CHECK(catalog_open(path, 0, 0, &c) == 0);
	uint64_t found = 0;
	CHECK(catalog_orphans_foreach(c, collect, &found) == 0);
	CHECK(found == f);
	CHECK(catalog_inode_delete(c, f) == 0);

	/* Inode numbers are never reused, even the highest one after deletion. */
	uint64_t g = make(c, CATALOG_ROOT_INO, "after", S_IFREG | 0644);
	CHECK(g > f);
	catalog_close(c);
}

static void test_bad_files(void) {
	Catalog *c = NULL;
	char p2[300];
	int fd;

	/* A catalog from the future is refused and left untouched. */
	snprintf(p2, sizeof(p2), "%s/future.db", dir);
	CHECK(catalog_open(p2, 0, 0, &c) == 0);
	catalog_close(c);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'PRAGMA user_version = 99'", p2);
	CHECK(system(cmd) == 0);
	c = NULL;
	CHECK(catalog_open(p2, 0, 0, &c) == -EPROTONOSUPPORT);
	CHECK(c == NULL);

	/* Garbage is reported as damage, not a crash. */
	snprintf(p2, sizeof(p2), "%s/garbage.db", dir);
	fd = open(p2, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	char junk[8192];
	for (size_t k = 0; k < sizeof(junk); k++)
		junk[k] = (char) (k * 7 + 3);
	CHECK(write(fd, junk, sizeof(junk)) == (ssize_t) sizeof(junk));
	close(fd);
	CHECK(catalog_open(p2, 0, 0, &c) == -EUCLEAN);

	/* A truncated real catalog is detected too (open or integrity check). */
	snprintf(p2, sizeof(p2), "%s/trunc.db", dir);
	CHECK(catalog_open(p2, 0, 0, &c) == 0);
	for (int k = 0; k < 200; k++) {
		char name[32];
		snprintf(name, sizeof(name), "f%03d", k);
		make(c, CATALOG_ROOT_INO, name, S_IFREG | 0644);
	}
	catalog_close(c);
	struct stat st;
	CHECK(stat(p2, &st) == 0 && st.st_size > 8192);
	CHECK(truncate(p2, st.st_size / 2) == 0);
	c = NULL;
	int r = catalog_open(p2, 0, 0, &c);
	if (r == 0) {
		CHECK(catalog_check(c) == -EUCLEAN);
		catalog_close(c);
	} else
		CHECK(r == -EUCLEAN);
}

static int count_chunk(const CatalogChunk *ch, void *userdata) {
	(*(int *) userdata)++;
	return 0;
}

static int count_container(const CatalogContainer *ct, void *userdata) {
	(*(int *) userdata)++;
	return 0;
}

static int count_foreign(uint64_t id, const char *host, uint64_t remote, void *userdata) {
	if (id == 0 || remote != 17 || (strcmp(host, "db02") != 0 && strcmp(host, "db03") != 0))
		return -EBADMSG;
	(*(int *) userdata)++;
	return 0;
}

static int copy_segment(uint64_t start, const void *blob, size_t size, void *userdata) {
	uint64_t *out = userdata;
	out[0] = start;
	out[1] = size;
	out[2] = ((const uint8_t *) blob)[0];
	return 0;
}

typedef struct DigestList {
	uint8_t d[4][CATALOG_DIGEST_SIZE];
	size_t n, stop_at;
} DigestList;

static int collect_digest(const uint8_t digest[CATALOG_DIGEST_SIZE], void *userdata) {
	DigestList *l = userdata;
	if (l->n == ELEMENTSOF(l->d) || (l->stop_at && l->n == l->stop_at))
		return -ECANCELED;
	memcpy(l->d[l->n++], digest, CATALOG_DIGEST_SIZE);
	return 0;
}

static void test_chunks_and_recipes(void) {
	Catalog *c = NULL;
	CatalogContainer ct;
	CatalogChunk ch, got;
	uint64_t cont, cont2, id;

	CHECK(catalog_open(path, 0, 0, &c) == 0);
	CHECK(catalog_container_new(c, 0, &cont) == 0);
	CHECK(catalog_container_new(c, 0, &cont2) == 0 && cont2 > cont);

	ch = (CatalogChunk) { .tier = 0, .container = cont, .offset = 0, .frame_size = 100, .plain_size = 200, .refs = 1 };
	memset(ch.digest, 0xab, sizeof(ch.digest));
	CHECK(catalog_chunk_add(c, &ch, &id) == 0);
	CHECK(catalog_chunk_add(c, &ch, &id) == -EEXIST); /* one digest per tier */
	ch.tier = 1;
	uint64_t other;
	CHECK(catalog_chunk_add(c, &ch, &other) == 0 && other != id);

	CHECK(catalog_chunk_find(c, 0, ch.digest, &got) == 0 && got.id == id && got.refs == 1 && got.plain_size == 200);
	uint8_t absent[CATALOG_DIGEST_SIZE] = { 1 };
	CHECK(catalog_chunk_find(c, 0, absent, &got) == -ENOENT);
	CHECK(catalog_container_get(c, cont, &ct) == 0 && ct.live_bytes == 200); /* both tiers' chunks share cont here */

	CHECK(catalog_chunk_ref(c, id, 2) == 0);
	CHECK(catalog_chunk_get(c, id, &got) == 0 && got.refs == 3);
	CHECK(catalog_chunk_delete(c, id) == -EBUSY);
	CHECK(catalog_chunk_ref(c, id, -3) == 0);
	CHECK(catalog_container_get(c, cont, &ct) == 0 && ct.live_bytes == 100);
	CHECK(catalog_chunk_ref(c, id, -1) == -EUCLEAN); /* never below zero */
	CHECK(catalog_chunk_get(c, id, &got) == 0 && got.refs == 0);
	CHECK(catalog_chunk_ref(c, id, 1) == 0);
	CHECK(catalog_container_get(c, cont, &ct) == 0 && ct.live_bytes == 200);

	/* Compaction moves live bytes with the chunk, its share of a new region included. */
	CHECK(catalog_chunk_get(c, id, &got) == 0 && got.region_size == 0 && got.region_offset == 0);
	got.container = cont2;
	got.offset = 4096;
	got.frame_size = 70;
	got.region_size = 5000;
	got.region_offset = 12345;
	CHECK(catalog_chunk_move(c, &got) == 0);
	CHECK(catalog_chunk_get(c, id, &got) == 0 && got.container == cont2 && got.offset == 4096 &&
	      got.frame_size == 70 && got.region_size == 5000 && got.region_offset == 12345);
	CHECK(catalog_container_get(c, cont2, &ct) == 0 && ct.live_bytes == 70);
	CHECK(catalog_container_get(c, cont, &ct) == 0 && ct.live_bytes == 100);
	int n = 0;
	CHECK(catalog_chunks_foreach_in_container(c, cont2, count_chunk, &n) == 0 && n == 1);
	n = 0;
	CHECK(catalog_chunks_foreach(c, 1, count_chunk, &n) == 0 && n == 1);

	/* Dead chunks are found through their own index; a retired chunk is no longer found by digest. */
	CHECK(catalog_chunk_ref(c, other, -1) == 0);
	n = 0;
	CHECK(catalog_chunks_foreach_dead(c, 1, count_chunk, &n) == 0 && n == 1);
	n = 0;
	CHECK(catalog_chunks_foreach_dead(c, 0, count_chunk, &n) == 0 && n == 0);
	CHECK(catalog_chunk_retire(c, id) == 0);
	CHECK(catalog_chunk_find(c, 0, ch.digest, &got) == -ENOENT);
	CHECK(catalog_chunk_get(c, id, &got) == 0 && got.refs == 1 && got.container == cont2);
	CHECK(catalog_chunk_add(c, &(CatalogChunk) { .tier = 0, .container = cont, .frame_size = 1, .plain_size = 1,
						     .digest = { 0xab, 0xab } }, &other) == 0);
	CHECK(catalog_chunk_retire(c, 999999) == -ENOENT);

	/* The digests of a tier alone, and their count: the retired chunk is in the index no more. */
	DigestList dl = {};
	uint64_t count = 99;
	CHECK(catalog_chunk_digests_foreach(c, 0, collect_digest, &dl) == 0 && dl.n == 1);
	CHECK(dl.d[0][0] == 0xab && dl.d[0][1] == 0xab && dl.d[0][2] == 0);
	CHECK(catalog_chunks_count(c, 0, &count) == 0 && count == 1);
	dl = (DigestList) {};
	CHECK(catalog_chunk_digests_foreach(c, 1, collect_digest, &dl) == 0 && dl.n == 1 && dl.d[0][0] == 0xab &&
	      dl.d[0][CATALOG_DIGEST_SIZE - 1] == 0xab);
	CHECK(catalog_chunks_count(c, 1, &count) == 0 && count == 1);
	CHECK(catalog_chunks_count(c, 7, &count) == 0 && count == 0);
	uint64_t third;
	CHECK(catalog_chunk_add(c, &(CatalogChunk) { .tier = 0, .container = cont, .frame_size = 1, .plain_size = 1,
						     .digest = { 0xcd, 0xcd } }, &third) == 0);
	dl = (DigestList) { .stop_at = 1 };
	CHECK(catalog_chunk_digests_foreach(c, 0, collect_digest, &dl) == -ECANCELED && dl.n == 1);

	/*
	 * Ids rising by small steps are read as one range: rows between them,
	 * ids gone from inside a range or past its last row, a run broken by a
	 * step back or a wide gap, each as alone.
	 */
	uint64_t run[6];
	for (size_t k = 0; k < ELEMENTSOF(run); k++)
		CHECK(catalog_chunk_add(c, &(CatalogChunk) { .tier = 0, .container = cont, .offset = 4096 * k,
							     .frame_size = 10, .plain_size = 20 + (uint32_t) k,
							     .region_size = 999, .region_offset = (uint32_t) k,
							     .digest = { 0xee, (uint8_t) k } }, run + k) == 0);
	CHECK(run[5] == run[0] + 5);
	CHECK(catalog_chunk_delete(c, run[2]) == 0); /* added at refs 0 */
	CHECK(catalog_chunk_delete(c, run[5]) == 0);
	uint64_t runs[] = { run[0], run[1], run[2], run[4], run[5], run[3], run[4], run[4], run[0] + 2000, third, run[1] };
	CatalogChunk in_runs[ELEMENTSOF(runs)];
	int runs_r[ELEMENTSOF(runs)];
	CHECK(catalog_chunks_get(c, runs, ELEMENTSOF(runs), in_runs, runs_r) == 0);
	for (size_t i = 0; i < ELEMENTSOF(runs); i++) {
		CatalogChunk one;
		int r1 = catalog_chunk_get(c, runs[i], &one);
		CHECK(runs_r[i] == r1);
		CHECK(r1 == (runs[i] == run[2] || runs[i] == run[5] || runs[i] == run[0] + 2000 ? -ENOENT : 0));
		CHECK(r1 < 0 || (in_runs[i].id == runs[i] && one.plain_size == in_runs[i].plain_size &&
				 one.offset == in_runs[i].offset && one.region_offset == in_runs[i].region_offset &&
				 memcmp(one.digest, in_runs[i].digest, sizeof(one.digest)) == 0));
	}

	/* Looked up together, in a transaction of their own or in the caller's: each as alone. */
	for (int txn = 0; txn < 2; txn++) {
		uint64_t ids[] = { other, 999999, id, other };
		CatalogChunk many[ELEMENTSOF(ids)], one;
		int rs[ELEMENTSOF(ids)];
		if (txn)
			CHECK(catalog_begin(c) == 0);
		CHECK(catalog_chunks_get(c, ids, ELEMENTSOF(ids), many, rs) == 0);
		if (txn)
			CHECK(catalog_commit(c) == 0);
		for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
			int r1 = catalog_chunk_get(c, ids[i], &one);
			CHECK(rs[i] == r1 && r1 == (ids[i] == 999999 ? -ENOENT : 0));
			CHECK(r1 < 0 || (one.id == many[i].id && one.tier == many[i].tier &&
					  memcmp(one.digest, many[i].digest, sizeof(one.digest)) == 0 &&
					  one.container == many[i].container && one.offset == many[i].offset &&
					  one.frame_size == many[i].frame_size && one.refs == many[i].refs &&
					  one.region_size == many[i].region_size &&
					  one.region_offset == many[i].region_offset));
		}
	}

	ct = (CatalogContainer) { .id = cont, .size = 12345, .full = true };
	CHECK(catalog_container_update(c, &ct) == 0);
	CHECK(catalog_container_get(c, cont, &ct) == 0 && ct.size == 12345 && ct.full);

	/* Recipes: segments keyed by start offset, found by covering offset. */
	uint64_t f = make(c, CATALOG_ROOT_INO, "sealed", S_IFREG | 0644), seg[3];
	uint8_t b1[] = { 1, 2, 3 }, b2[] = { 9 };
	CHECK(catalog_recipe_put(c, f, 0, b1, sizeof(b1)) == 0);
	CHECK(catalog_recipe_put(c, f, 1 << 20, b2, sizeof(b2)) == 0);
	CHECK(catalog_recipe_find(c, f, 0, copy_segment, seg) == 0 && seg[0] == 0 && seg[1] == 3 && seg[2] == 1);
	CHECK(catalog_recipe_find(c, f, (1 << 20) - 1, copy_segment, seg) == 0 && seg[0] == 0);
	CHECK(catalog_recipe_find(c, f, 5u << 20, copy_segment, seg) == 0 && seg[0] == 1 << 20 && seg[2] == 9);
	CHECK(catalog_recipe_find(c, f + 1000, 0, copy_segment, seg) == -ENOENT);
	CHECK(catalog_recipe_put(c, f, 0, b1, 0) == -EINVAL);
	CHECK(catalog_inode_delete(c, f) < 0); /* recipes still point at it */
	CHECK(catalog_recipe_delete(c, f) == 0);
	CHECK(catalog_recipe_find(c, f, 0, copy_segment, seg) == -ENOENT);
	CHECK(catalog_check(c) == 0);
	catalog_close(c);
}

static int64_t live_of(Catalog *c, uint64_t container) {
	CatalogContainer ct;
	return catalog_container_get(c, container, &ct) == 0 ? (int64_t) ct.live_bytes : -1;
}

static uint64_t refs_of(Catalog *c, uint64_t id) {
	CatalogChunk got;
	return catalog_chunk_get(c, id, &got) == 0 ? got.refs : UINT64_MAX;
}

/* References in batches: refs, live bytes per container, and whole or nothing outside a transaction. */
static void test_chunks_ref_batch(void) {
	Catalog *c = NULL;
	uint64_t a, b, ids[6];

	CHECK(catalog_open(path, 0, 0, &c) == 0);
	CHECK(catalog_container_new(c, 0, &a) == 0);
	CHECK(catalog_container_new(c, 0, &b) == 0);
	/* Three dead chunks in a (one after b's in id order), two live ones in b (b's live bytes 70). */
	const uint64_t containers[5] = { a, a, b, b, a }, refs[5] = { 0, 0, 2, 1, 0 };
	for (unsigned i = 0; i < 5; i++) {
		CatalogChunk ch = { .tier = 0, .container = containers[i], .frame_size = 10 * (i + 1), .plain_size = 100,
				    .refs = refs[i] };
		memset(ch.digest, 0x50 + i, sizeof(ch.digest));
		CHECK(catalog_chunk_add(c, &ch, &ids[i]) == 0);
	}
	CHECK(live_of(c, a) == 0 && live_of(c, b) == 70);

	/* a's three come alive (+80), b's first dies (-30), b's second stays live (no change). */
	int64_t d1[5] = { 1, 2, -2, 1, 1 };
	CHECK(catalog_chunks_ref(c, ids, d1, 5) == 0);
	CHECK(refs_of(c, ids[0]) == 1 && refs_of(c, ids[1]) == 2 && refs_of(c, ids[2]) == 0 && refs_of(c, ids[3]) == 2 &&
	      refs_of(c, ids[4]) == 1);
	CHECK(live_of(c, a) == 80 && live_of(c, b) == 40);
	int n = 0;
	CHECK(catalog_chunks_foreach_dead(c, 0, count_chunk, &n) == 0 && n >= 1);

	/* An id with no row, or refs below zero, after others changed: nothing is modified. */
	ids[5] = ids[4] + 1000;
	int64_t d2[6] = { 5, 5, 5, 5, 5, 5 };
	CHECK(catalog_chunks_ref(c, ids, d2, 6) == -ENOENT);
	int64_t d3[5] = { -1, -2, 1, -3, -1 };
	CHECK(catalog_chunks_ref(c, ids, d3, 5) == -EUCLEAN);
	CHECK(refs_of(c, ids[0]) == 1 && refs_of(c, ids[1]) == 2 && refs_of(c, ids[2]) == 0 && refs_of(c, ids[3]) == 2 &&
	      refs_of(c, ids[4]) == 1);
	CHECK(live_of(c, a) == 80 && live_of(c, b) == 40);

	/* In the caller's transaction, what it rolls back is undone. */
	CHECK(catalog_begin(c) == 0);
	int64_t d4[5] = { -1, -2, 1, -2, -1 };
	CHECK(catalog_chunks_ref(c, ids, d4, 5) == 0);
	CHECK(live_of(c, a) == 0 && live_of(c, b) == 30);
	catalog_rollback(c);
	CHECK(live_of(c, a) == 80 && live_of(c, b) == 40);
	CHECK(catalog_chunks_ref(c, ids, d4, 0) == 0);
	CHECK(catalog_check(c) == 0);
	catalog_close(c);
}

static off_t file_size(const char *p) {
	struct stat st;
	return stat(p, &st) == 0 ? st.st_size : -1;
}

static void test_checkpoint(void) {
	char wal[300], name[32];
	Catalog *c = NULL;
	uint64_t ino;

	snprintf(wal, sizeof(wal), "%s-wal", path);
	CHECK(catalog_open(path, 0, 0, &c) == 0);
	uint64_t d = make(c, CATALOG_ROOT_INO, "checkpointed", S_IFDIR | 0755);
	for (int k = 0; k < 200; k++) {
		snprintf(name, sizeof(name), "f%d", k);
		make(c, d, name, S_IFREG | 0644);
	}
	CHECK(file_size(wal) > 0);

	/* Not inside a transaction: the checkpoint would have to commit it half-done. */
	CHECK(catalog_begin(c) == 0);
	CHECK(catalog_checkpoint(c) == -EBUSY);
	catalog_rollback(c);

	CHECK(catalog_checkpoint(c) == 0);
	CHECK(file_size(wal) == 0);
	/* The catalog goes on working on the emptied WAL, and the data is in the database file. */
	make(c, d, "after", S_IFREG | 0644);
	CHECK(file_size(wal) > 0);
	CHECK(catalog_checkpoint(c) == 0);
	catalog_close(c);

	CHECK(catalog_open(path, 0, 0, &c) == 0);
	CHECK(catalog_dirent_lookup(c, d, "f199", &ino) == 0);
	CHECK(catalog_dirent_lookup(c, d, "after", &ino) == 0);
	CHECK(catalog_check(c) == 0);
	catalog_close(c);
}

/*
 * With the checkpointer started, a commit that fills the WAL past
 * CATALOG_WAL_CHECKPOINT_PAGES does not checkpoint itself: the thread does,
 * on its own connection, and the database file grows by what it copies.
 * catalog_checkpoint() still cuts the WAL, and everything is there after a
 * reopen.
 */
static void test_checkpointer(void) {
	char p[300], wal[310];
	uint64_t cont, count = 0;
	struct stat st;
	Catalog *c;

	snprintf(p, sizeof(p), "%s/checkpointer.db", dir);
	snprintf(wal, sizeof(wal), "%s-wal", p);
	CHECK(catalog_open(p, 0, 0, &c) == 0);
	CHECK(catalog_checkpointer_start(c) == 0);
	CHECK(catalog_checkpointer_start(c) == 0); /* once is enough */
	CHECK(catalog_container_new(c, 0, &cont) == 0);
	CHECK(catalog_checkpoint(c) == 0);
	CHECK(stat(p, &st) == 0);
	off_t before = st.st_size;
	CHECK(catalog_begin(c) == 0);
	for (uint32_t i = 0; i < 60000; i++) {
		CatalogChunk ch = { .container = cont, .offset = i, .frame_size = 100, .plain_size = 100, .refs = 1 };
		memcpy(ch.digest, &i, sizeof(i));
		uint64_t id;
		CHECK(catalog_chunk_add_new(c, &ch, &id) == 0);
	}
	CHECK(catalog_commit(c) == 0);
	CHECK(file_size(wal) > (off_t) CATALOG_WAL_CHECKPOINT_PAGES * 4096);
	/* Not a timing: a checkpointer that never ran. */
	for (int k = 0; k < 6000 && stat(p, &st) == 0 && st.st_size < before + (off_t) (CATALOG_WAL_CHECKPOINT_PAGES / 2) * 4096; k++)
		usleep(10 * 1000);
	CHECK(st.st_size >= before + (off_t) (CATALOG_WAL_CHECKPOINT_PAGES / 2) * 4096);
	CHECK(catalog_checkpoint(c) == 0);
	CHECK(file_size(wal) == 0);
	catalog_close(c);
	CHECK(catalog_open(p, 0, 0, &c) == 0);
	CHECK(catalog_chunks_count(c, 0, &count) == 0 && count == 60000);
	CHECK(catalog_check(c) == 0);
	catalog_close(c);
}

static int collect_logs(uint64_t ino, const CatalogArchivelog *a, void *userdata) {
	char *out = userdata;
	size_t n = strlen(out);
	snprintf(out + n, 256 - n, "%llu:%u/%u ", (unsigned long long) ino, (unsigned) a->thread, (unsigned) a->sequence);
	return 0;
}

static void test_archivelogs(void) {
	char p3[300], cmd[1000], seen[256];
	Catalog *c = NULL;
	CatalogArchivelog a, got;
	uint64_t logs[5];

	snprintf(p3, sizeof(p3), "%s/archivelogs.db", dir);
	CHECK(catalog_open(p3, 0, 0, &c) == 0);
	for (int k = 0; k < 5; k++) {
		char name[16];
		snprintf(name, sizeof(name), "log%d", k);
		logs[k] = make(c, CATALOG_ROOT_INO, name, S_IFREG | 0640);
		a = (CatalogArchivelog) { .dbid = k == 4 ? 7 : 1234567890u, .resetlogs_id = 99, .thread = k < 3 ? 1 : 2,
					  .sequence = 100 + (uint32_t) k, .low_scn = UINT64_C(0xffffffffffff) - 10 + (uint64_t) k,
					  .next_scn = UINT64_C(0xffffffffffff) - 9 + (uint64_t) k, .low_time = 1700000000,
					  .next_time = 1700000600 };
		snprintf(a.db_name, sizeof(a.db_name), "%s", k == 4 ? "OTHERDB1" : "ORCL");
		CHECK(catalog_archivelog_set(c, logs[k], &a) == 0);
	}
	CHECK(catalog_archivelog_get(c, logs[1], &got) == 0);
	CHECK(got.dbid == 1234567890u && got.thread == 1 && got.sequence == 101 && strcmp(got.db_name, "ORCL") == 0);
	CHECK(got.low_scn == UINT64_C(0xffffffffffff) - 9 && got.next_time == 1700000600 && got.resetlogs_id == 99);
	CHECK(catalog_archivelog_get(c, CATALOG_ROOT_INO, &got) == -ENOENT);

	/* A second header for the same file replaces the first. */
	a.sequence = 104;
	CHECK(catalog_archivelog_set(c, logs[4], &a) == 0);
	CHECK(catalog_archivelog_get(c, logs[4], &got) == 0 && got.sequence == 104 && strcmp(got.db_name, "OTHERDB1") == 0);
	memset(a.db_name, 'X', sizeof(a.db_name));
	CHECK(catalog_archivelog_set(c, logs[4], &a) == -EINVAL);

	seen[0] = 0;
	CHECK(catalog_archivelogs_foreach(c, 0, 1, 101, 200, collect_logs, seen) == 0);
	snprintf(cmd, sizeof(cmd), "%llu:1/101 %llu:1/102 ", (unsigned long long) logs[1], (unsigned long long) logs[2]);
	CHECK(strcmp(seen, cmd) == 0);
	seen[0] = 0;
	CHECK(catalog_archivelogs_foreach(c, 1234567890u, 0, 0, UINT32_MAX, collect_logs, seen) == 0);
	snprintf(cmd, sizeof(cmd), "%llu:1/100 %llu:1/101 %llu:1/102 %llu:2/103 ", (unsigned long long) logs[0],
		 (unsigned long long) logs[1], (unsigned long long) logs[2], (unsigned long long) logs[3]);
	CHECK(strcmp(seen, cmd) == 0);

	/* Deleting the inode deletes its header. */
	CHECK(catalog_begin(c) == 0);
	CHECK(catalog_dirent_remove(c, CATALOG_ROOT_INO, "log0") == 0);
	CHECK(catalog_inode_delete(c, logs[0]) == 0);
	CHECK(catalog_commit(c) == 0);
	CHECK(catalog_archivelog_get(c, logs[0], &got) == -ENOENT);
	CHECK(catalog_check(c) == 0);
	catalog_close(c);

	/* A version 2 catalog (before archivelog headers) is upgraded in place and keeps its files. */
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'DROP TABLE history_tiers; DROP TABLE history_classes; DROP TABLE pins; "
		 "DROP INDEX archivelogs_sequence; DROP TABLE archivelogs; "
		 "DROP TABLE tier_moves; DROP TABLE keys; DROP TABLE rekeys; DROP TABLE descriptions; "
		 "DROP TABLE chunk_recent; DROP TABLE chunk_frozen; DROP TABLE chunk_merged; DROP TABLE chunk_runs; "
		 "DROP TABLE chunk_run_list; ALTER TABLE containers DROP COLUMN key_id; "
		 "DROP INDEX containers_foreign; "
		 "ALTER TABLE containers DROP COLUMN host; ALTER TABLE containers DROP COLUMN remote; "
		 "ALTER TABLE chunks DROP COLUMN region_size; "
		 "ALTER TABLE chunks DROP COLUMN region_offset; PRAGMA user_version = 2'", p3);
	CHECK(system(cmd) == 0);
	CHECK(catalog_open(p3, 0, 0, &c) == 0);
	uint64_t ino;
	CHECK(catalog_dirent_lookup(c, CATALOG_ROOT_INO, "log3", &ino) == 0 && ino == logs[3]);
	CHECK(catalog_archivelog_get(c, logs[3], &got) == -ENOENT);
	CHECK(catalog_archivelog_set(c, logs[3], &a) == -EINVAL);
	snprintf(a.db_name, sizeof(a.db_name), "ORCL");
	CHECK(catalog_archivelog_set(c, logs[3], &a) == 0);
	CHECK(catalog_archivelog_get(c, logs[3], &got) == 0 && got.sequence == 104);
	CHECK(catalog_check(c) == 0);
	catalog_close(c);
}

static void test_pins(void) {
	char p4[300], cmd[1000];
	Catalog *c;

	snprintf(p4, sizeof(p4), "%s/pins.db", dir);
	CHECK(catalog_open(p4, 0, 0, &c) == 0);
	uint64_t a = make(c, CATALOG_ROOT_INO, "a", S_IFREG | 0640), b = make(c, CATALOG_ROOT_INO, "b", S_IFREG | 0640);
	CHECK(catalog_pinned(c, a) == 0);
	CHECK(catalog_pin_set(c, a, true) == 0 && catalog_pin_set(c, a, true) == 0);
	CHECK(catalog_pinned(c, a) == 1 && catalog_pinned(c, b) == 0);
	CHECK(catalog_pin_set(c, b, true) == 0 && catalog_pin_set(c, b, false) == 0 && catalog_pin_set(c, b, false) == 0);
	CHECK(catalog_pinned(c, b) == 0);
	/* A deleted inode takes its pin with it: a new file of the same number is not pinned. */
	CHECK(catalog_begin(c) == 0);
	CHECK(catalog_dirent_remove(c, CATALOG_ROOT_INO, "a") == 0);
	CHECK(catalog_inode_delete(c, a) == 0);
	CHECK(catalog_commit(c) == 0);
	CHECK(catalog_pinned(c, a) == 0);
	CHECK(catalog_pin_set(c, b, true) == 0);
	catalog_close(c);

	/* A version 3 catalog (before pins) is upgraded in place: nothing pinned, pins work. */
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'DROP TABLE history_tiers; DROP TABLE history_classes; DROP TABLE pins; "
		 "DROP TABLE tier_moves; DROP TABLE keys; DROP TABLE rekeys; DROP TABLE descriptions; "
		 "DROP TABLE chunk_recent; DROP TABLE chunk_frozen; DROP TABLE chunk_merged; DROP TABLE chunk_runs; "
		 "DROP TABLE chunk_run_list; ALTER TABLE containers DROP COLUMN key_id; "
		 "DROP INDEX containers_foreign; "
		 "ALTER TABLE containers DROP COLUMN host; ALTER TABLE containers DROP COLUMN remote; "
		 "ALTER TABLE chunks DROP COLUMN region_size; "
		 "ALTER TABLE chunks DROP COLUMN region_offset; PRAGMA user_version = 3'", p4);
	CHECK(system(cmd) == 0);
	CHECK(catalog_open(p4, 0, 0, &c) == 0);
	CHECK(catalog_pinned(c, b) == 0);
	CHECK(catalog_pin_set(c, b, true) == 0 && catalog_pinned(c, b) == 1);
	CHECK(catalog_check(c) == 0);
	catalog_close(c);
}

typedef struct HistorySeen {
	size_t tiers, classes;
	int64_t first_t;
	uint64_t tier1_stored, class2_hot;
} HistorySeen;

static int history_tier_seen(const CatalogHistoryTier *h, void *userdata) {
	HistorySeen *seen = userdata;
	if (seen->tiers++ == 0)
		seen->first_t = h->t;
	if (h->tier == 1)
		seen->tier1_stored = h->stored;
	return 0;
}

static int history_class_seen(const CatalogHistoryClass *h, void *userdata) {
	HistorySeen *seen = userdata;
	seen->classes++;
	if (h->file_class == 2)
		seen->class2_hot = h->hot_logical;
	return 0;
}

static void test_history(void) {
	char p5[300], cmd[1000];
	Catalog *c;

	snprintf(p5, sizeof(p5), "%s/history.db", dir);
	CHECK(catalog_open(p5, 0, 0, &c) == 0);

	for (int64_t t = 1000; t <= 3000; t += 1000) {
		CatalogHistoryTier tiers[] = {
			{ .t = t, .tier = 0, .capacity = 100, .used = 50, .files = 2, .logical = 10, .stored = 5 },
			{ .t = t, .tier = 1, .capacity = 900, .used = 20, .files = 1, .logical = 4, .stored = (uint64_t) t },
		};
		CatalogHistoryClass classes[] = { { .t = t, .file_class = 2, .files = 3, .logical = 14, .hot_logical = 10 } };
		CHECK(catalog_history_add(c, tiers, 2, classes, 1, t - 1500) == 0);
	}
	/* The third sample forgot the first (older than 1500): two samples left, in time order. */
	HistorySeen seen = {};
	CHECK(catalog_history_foreach(c, 0, history_tier_seen, history_class_seen, &seen) == 0);
	CHECK(seen.tiers == 4 && seen.classes == 2 && seen.first_t == 2000 && seen.tier1_stored == 3000 &&
	      seen.class2_hot == 10);
	seen = (HistorySeen) {};
	CHECK(catalog_history_foreach(c, 2500, history_tier_seen, history_class_seen, &seen) == 0);
	CHECK(seen.tiers == 2 && seen.classes == 1 && seen.first_t == 3000);
	/* Sizes beyond SQLite's integers are refused, not wrapped. */
	CatalogHistoryTier huge = { .t = 4000, .used = UINT64_MAX };
	CHECK(catalog_history_add(c, &huge, 1, NULL, 0, 0) == -ERANGE);
	catalog_close(c);

	/* A negative size in the database is damage, reported as such. */
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'UPDATE history_tiers SET stored = -1 WHERE tier = 1'", p5);
	CHECK(system(cmd) == 0);
	CHECK(catalog_open(p5, 0, 0, &c) == 0);
	seen = (HistorySeen) {};
	CHECK(catalog_history_foreach(c, 0, history_tier_seen, history_class_seen, &seen) == -EUCLEAN);
	catalog_close(c);

	/* A version 4 catalog (before history) is upgraded in place, with no samples. */
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'DROP TABLE history_tiers; DROP TABLE history_classes; "
		 "DROP TABLE tier_moves; DROP TABLE keys; DROP TABLE rekeys; DROP TABLE descriptions; "
		 "DROP TABLE chunk_recent; DROP TABLE chunk_frozen; DROP TABLE chunk_merged; DROP TABLE chunk_runs; "
		 "DROP TABLE chunk_run_list; ALTER TABLE containers DROP COLUMN key_id; "
		 "DROP INDEX containers_foreign; "
		 "ALTER TABLE containers DROP COLUMN host; ALTER TABLE containers DROP COLUMN remote; "
		 "ALTER TABLE chunks DROP COLUMN region_size; "
		 "ALTER TABLE chunks DROP COLUMN region_offset; PRAGMA user_version = 4'", p5);
	CHECK(system(cmd) == 0);
	CHECK(catalog_open(p5, 0, 0, &c) == 0);
	seen = (HistorySeen) {};
	CHECK(catalog_history_foreach(c, 0, history_tier_seen, history_class_seen, &seen) == 0 && seen.tiers == 0);
	CHECK(catalog_check(c) == 0);
	catalog_close(c);
}

/*
 * A raw file's tier is where its staging file is (spill): kept as given,
 * and 0 for every raw file of a version 5 catalog.
 */
static void test_staging_tier(void) {
	char p5[300], cmd[1000];
	CatalogInode ci;
	Catalog *c;

	snprintf(p5, sizeof(p5), "%s/spill.db", dir);
	CHECK(catalog_open(p5, 0, 0, &c) == 0);
	uint64_t spilled = make(c, CATALOG_ROOT_INO, "spilled", S_IFREG | 0640);
	uint64_t sealed = make(c, CATALOG_ROOT_INO, "sealed", S_IFREG | 0640);
	CHECK(catalog_begin(c) == 0);
	CHECK(catalog_inode_get(c, spilled, &ci) == 0);
	ci.tier = 1;
	CHECK(catalog_inode_update(c, &ci) == 0);
	CHECK(catalog_inode_get(c, sealed, &ci) == 0);
	ci.state = CATALOG_FILE_SEALED;
	ci.tier = 2;
	CHECK(catalog_inode_update(c, &ci) == 0);
	CHECK(catalog_commit(c) == 0);
	CHECK(catalog_inode_get(c, spilled, &ci) == 0 && ci.state == CATALOG_FILE_RAW && ci.tier == 1);
	catalog_close(c);

	/* Version 5 never read a raw file's tier: whatever it held, the upgrade puts the file on the hot tier. */
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'UPDATE inodes SET tier = 7 WHERE ino = %llu; "
		 "DROP TABLE tier_moves; DROP TABLE keys; DROP TABLE rekeys; DROP TABLE descriptions; "
		 "DROP TABLE chunk_recent; DROP TABLE chunk_frozen; DROP TABLE chunk_merged; DROP TABLE chunk_runs; "
		 "DROP TABLE chunk_run_list; ALTER TABLE containers DROP COLUMN key_id; "
		 "DROP INDEX containers_foreign; "
		 "ALTER TABLE containers DROP COLUMN host; ALTER TABLE containers DROP COLUMN remote; "
		 "ALTER TABLE chunks DROP COLUMN region_size; "
		 "ALTER TABLE chunks DROP COLUMN region_offset; PRAGMA user_version = 5'",
		 p5, (unsigned long long) spilled);
	CHECK(system(cmd) == 0);
	CHECK(catalog_open(p5, 0, 0, &c) == 0);
	CHECK(catalog_inode_get(c, spilled, &ci) == 0 && ci.state == CATALOG_FILE_RAW && ci.tier == 0);
	CHECK(catalog_inode_get(c, sealed, &ci) == 0 && ci.state == CATALOG_FILE_SEALED && ci.tier == 2);
	CHECK(catalog_check(c) == 0);
	catalog_close(c);
	snprintf(cmd, sizeof(cmd), "test \"$(sqlite3 '%s' 'PRAGMA user_version')\" = %d", p5, CATALOG_SCHEMA_VERSION);
	CHECK(system(cmd) == 0);
}

static int chunk_region_fields(const CatalogChunk *ch, void *userdata) {
	/* Chunks written before regions are frames of their own: nothing of them was rewritten. */
	if (ch->region_size != 0 || ch->region_offset != 0 || ch->frame_size <= 64)
		(*(int *) userdata)++;
	return 0;
}

typedef struct KeyUsage {
	unsigned rows, keyed;
	uint64_t bytes, keyed_bytes;
} KeyUsage;

static int key_usage(uint32_t tier, const uint8_t *key_id, uint64_t containers, uint64_t bytes, void *userdata) {
	KeyUsage *u = userdata;
	(void) tier;
	(void) containers;
	u->rows++;
	u->bytes += bytes;
	if (key_id) {
		u->keyed++;
		u->keyed_bytes += bytes;
	}
	return 0;
}

/* The i-th digest of test_chunk_index(): spread over the key space like real ids. */
static void index_digest(uint64_t i, uint8_t out[CATALOG_DIGEST_SIZE]) {
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15u;
	for (size_t k = 0; k < CATALOG_DIGEST_SIZE; k++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		out[k] = (uint8_t) x;
	}
}

static uint64_t index_add(Catalog *c, uint64_t cont, uint64_t i, uint64_t refs) {
	CatalogChunk ch = { .tier = 0, .container = cont, .offset = i * 100, .frame_size = 100, .plain_size = 100,
			    .refs = refs };
	uint64_t id = 0;
	index_digest(i, ch.digest);
	CHECK(catalog_chunk_add_new(c, &ch, &id) == 0);
	return id;
}

/*
 * A whole merge, in batches of 5 rows: 1 (one done, *m its last report), 0
 * (nothing due), or the first error.
 */
static int index_merge(Catalog *c, uint64_t recent_max, CatalogIndexMerge *m) {
	int r, any = 0;
	*m = (CatalogIndexMerge) {};
	while ((r = catalog_index_merge_step(c, recent_max, 5, 0, m)) > 0)
		any = 1;
	return r < 0 ? r : any;
}

/*
 * Seven runs of level 0 (40 ids each, merged with recent_max 10) and 40
 * ids in the recent table: the next merge takes all eight.  Returns the
 * 320 ids added, in ids[].
 */
static uint64_t index_seven_runs(Catalog *c, uint64_t cont, uint64_t *ids) {
	CatalogIndexMerge m;
	uint64_t n = 0;
	for (int run = 0; run < 8; run++) {
		for (int k = 0; k < 40; k++, n++)
			ids[n] = index_add(c, cont, n, 1);
		if (run < 7)
			CHECK(index_merge(c, 10, &m) == 1 && m.level == 0 && m.entries == 40);
	}
	return n;
}

/* Every digest 0..n-1 found, by the id it was added with, but those in gone[]. */
static void index_check(Catalog *c, const uint64_t *ids, uint64_t n, const bool *gone) {
	int missing = 0, wrong = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint8_t d[CATALOG_DIGEST_SIZE];
		CatalogChunk got;
		index_digest(i, d);
		int r = catalog_chunk_find(c, 0, d, &got);
		if (gone && gone[i])
			wrong += r != -ENOENT;
		else if (r != 0)
			missing++;
		else
			wrong += got.id != ids[i] || memcmp(got.digest, d, sizeof(d)) != 0;
	}
	if (missing || wrong)
		fprintf(stderr, "index_check of %llu: %d missing, %d wrong\n", (unsigned long long) n, missing, wrong);
	CHECK(missing == 0 && wrong == 0);
}

/*
 * The digest index (schema 12): look-ups in the recent table and in every
 * run, merges by level, retire and delete from each table, a duplicate
 * that a merge refuses, and the rules for a merge's caller.
 */
static void test_chunk_index(void) {
	char p12[300];
	uint64_t ids[512], cont, id, recent = 0;
	bool gone[512] = {};
	CatalogIndexMerge m = {};
	CatalogIndexState st;
	CatalogChunk got;
	Catalog *c;

	snprintf(p12, sizeof(p12), "%s/index.db", dir);
	CHECK(catalog_open(p12, 0, 0, &c) == 0);
	CHECK(catalog_container_new(c, 0, &cont) == 0);
	CHECK(index_merge(c, 0, &m) == 0); /* empty: nothing to merge */

	/* 300 ids, merged into one run of level 1 (at least 8 recent tables of 10). */
	CHECK(catalog_begin(c) == 0);
	for (uint64_t i = 0; i < 300; i++)
		ids[i] = index_add(c, cont, i, 1);
	CHECK(index_merge(c, 10, &m) == -EBUSY); /* not inside a transaction */
	CHECK(catalog_commit(c) == 0);
	CHECK(catalog_index_merge_due(c, 300, &recent) == 0);
	CHECK(catalog_index_merge_due(c, 10, &recent) == 1 && recent == 300);
	CHECK(index_merge(c, 10, &m) == 1);
	CHECK(m.done && m.recent == 300 && m.runs == 0 && m.entries == 300 && m.level == 1);
	CHECK(catalog_index_get(c, &st) == 0 && st.recent == 0 && st.runs == 1 && st.in_runs == 300);
	CHECK(index_merge(c, 10, &m) == 0);
	index_check(c, ids, 300, NULL);

	/* Seven recent tables of 11 become seven runs of level 0; the eighth merges them, not the large run. */
	for (uint64_t round = 0; round < 8; round++) {
		for (uint64_t i = 300 + round * 11; i < 300 + (round + 1) * 11; i++)
			ids[i] = index_add(c, cont, i, 1);
		CHECK(index_merge(c, 10, &m) == 1);
		if (round < 7)
			CHECK(m.runs == 0 && m.level == 0 && m.entries == 11);
		else
			CHECK(m.runs == 7 && m.from_runs == 77 && m.entries == 88 && m.level == 1);
		index_check(c, ids, 300 + (round + 1) * 11, NULL);
	}
	CHECK(catalog_index_get(c, &st) == 0 && st.recent == 0 && st.runs == 2 && st.in_runs == 388);
	uint64_t n = 388;

	/* A few more in the recent table: found there, and before the runs' look-ups. */
	for (; n < 395; n++)
		ids[n] = index_add(c, cont, n, 1);
	index_check(c, ids, n, NULL);
	CHECK(catalog_index_get(c, &st) == 0 && st.recent == 7 && st.runs == 2);

	/* Any digest of any table is refused again: a look-up checks every one, the caller's word the recent one. */
	CatalogChunk dup = { .tier = 0, .container = cont, .frame_size = 1, .plain_size = 1 };
	index_digest(10, dup.digest); /* in the first run */
	CHECK(catalog_chunk_add(c, &dup, &id) == -EEXIST);
	index_digest(390, dup.digest); /* in the recent table */
	CHECK(catalog_chunk_add(c, &dup, &id) == -EEXIST);
	CHECK(catalog_chunk_add_new(c, &dup, &id) == -EEXIST);
	dup.tier = 1; /* the same digest on another tier is another chunk */
	CHECK(catalog_chunk_add_new(c, &dup, &id) == 0);
	CHECK(catalog_chunk_find(c, 1, dup.digest, &got) == 0 && got.id == id);
	CHECK(catalog_chunk_find(c, 0, dup.digest, &got) == 0 && got.id == ids[390]);

	/* Retire and delete take a chunk out of whichever table holds it: the recent one and both runs. */
	uint64_t out[] = { 5, 320, 392 }, dead[] = { 7, 350, 393 };
	for (size_t k = 0; k < ELEMENTSOF(out); k++) {
		CHECK(catalog_chunk_retire(c, ids[out[k]]) == 0);
		CHECK(catalog_chunk_get(c, ids[out[k]], &got) == 0 && got.digest[0] == 0xff);
		gone[out[k]] = true;
	}
	for (size_t k = 0; k < ELEMENTSOF(dead); k++) {
		CHECK(catalog_chunk_delete(c, ids[dead[k]]) == -EBUSY); /* referenced */
		CHECK(catalog_chunk_ref(c, ids[dead[k]], -1) == 0);
		CHECK(catalog_chunk_delete(c, ids[dead[k]]) == 0);
		CHECK(catalog_chunk_get(c, ids[dead[k]], &got) == -ENOENT);
		gone[dead[k]] = true;
	}
	index_check(c, ids, n, gone);
	uint64_t count = 0;
	CHECK(catalog_chunks_count(c, 0, &count) == 0 && count == n - 6);
	/* A retired chunk's content is stored afresh: a new chunk, found by it. */
	CatalogChunk again = { .tier = 0, .container = cont, .frame_size = 1, .plain_size = 1 };
	index_digest(320, again.digest);
	CHECK(catalog_chunk_add(c, &again, &id) == 0 && id != ids[320]);
	CHECK(catalog_chunk_find(c, 0, again.digest, &got) == 0 && got.id == id);
	CHECK(catalog_chunk_retire(c, id) == 0 && catalog_chunk_retire(c, ids[320]) == 0);

	/* Merged again and again with recent_max 0 (each run a level higher): all still found. */
	for (int k = 0; k < 8; k++) {
		ids[n] = index_add(c, cont, n, 1);
		n++;
		CHECK(index_merge(c, 0, &m) == 1);
	}
	index_check(c, ids, n, gone);
	CHECK(catalog_check(c) == 0);
	catalog_close(c);

	/*
	 * A digest of a run added again on the caller's word (as if its filter
	 * had a false negative) is a duplicate that the next merge of that run
	 * meets: it fails and changes nothing.
	 */
	snprintf(p12, sizeof(p12), "%s/index-dup.db", dir);
	CHECK(catalog_open(p12, 0, 0, &c) == 0);
	CHECK(catalog_container_new(c, 0, &cont) == 0);
	for (uint64_t i = 0; i < CATALOG_INDEX_FANOUT - 1; i++) {
		ids[i] = index_add(c, cont, i, 1);
		CHECK(index_merge(c, 0, &m) == 1 && m.level == 0 && m.runs == 0);
	}
	index_digest(3, dup.digest);
	dup.tier = 0;
	CHECK(catalog_chunk_add_new(c, &dup, &id) == 0);
	CHECK(catalog_index_get(c, &st) == 0 && st.recent == 1 && st.runs == CATALOG_INDEX_FANOUT - 1);
	/* Batches of one row: the twin is always the next batch's, which the one before must see. */
	int r;
	while ((r = catalog_index_merge_step(c, 0, 1, 0, &m)) == 1) {
	}
	CHECK(r == -EUCLEAN);
	/* The failed merge's new run goes in the next batches; the frozen recent table stays, looked in. */
	CatalogIndexState st2;
	CHECK(catalog_index_get(c, &st2) == 0 && st2.merging && st2.frozen == 1 && st2.recent == 0);
	while ((r = catalog_index_merge_step(c, 0, 5, 0, &m)) == 1) {
	}
	CHECK(r == 0); /* nothing due: the recent table is empty */
	CHECK(catalog_index_get(c, &st2) == 0 && !st2.merging && st2.frozen == 1 && st2.recent == 0 &&
	      st2.runs == st.runs && st2.in_runs == st.in_runs);
	CHECK(catalog_chunk_find(c, 0, dup.digest, &got) == 0);
	index_check(c, ids, 3, NULL);
	for (uint64_t i = 4; i < CATALOG_INDEX_FANOUT - 1; i++) {
		index_digest(i, dup.digest);
		CHECK(catalog_chunk_find(c, 0, dup.digest, &got) == 0 && got.id == ids[i]);
	}
	CHECK(catalog_check(c) == 0);
	catalog_close(c);
}

typedef struct IndexWriter {
	Catalog *c;
	uint64_t cont, i, id;
	int r;
} IndexWriter;

/* A transaction of another thread's: it begins only once the catalog lock is free and no transaction open. */
static void *index_writer(void *userdata) {
	IndexWriter *w = userdata;
	CatalogChunk ch = { .tier = 0, .container = w->cont, .offset = w->i * 100, .frame_size = 100, .plain_size = 100,
			    .refs = 1 };
	index_digest(w->i, ch.digest);
	w->r = catalog_begin(w->c);
	if (w->r >= 0) {
		w->r = catalog_chunk_add_new(w->c, &ch, &w->id);
		int q = catalog_commit(w->c);
		if (w->r >= 0)
			w->r = q;
	}
	return NULL;
}

/* Digest i added by another thread between two batches; its id in ids[i].  Joined within a minute or failed. */
static void index_add_elsewhere(Catalog *c, uint64_t cont, uint64_t i, uint64_t *ids) {
	IndexWriter w = { .c = c, .cont = cont, .i = i };
	struct timespec deadline;
	pthread_t t;

	CHECK(pthread_create(&t, NULL, index_writer, &w) == 0);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 60; /* not a timing: a thread that never got the lock */
	int rc = pthread_timedjoin_np(t, NULL, &deadline);
	CHECK(rc == 0 && w.r == 0);
	if (rc != 0)
		abort();
	ids[i] = w.id;
}

/*
 * A merge batch by batch: between any two batches another thread writes
 * (the lock is free, no transaction open), look-ups find every id once
 * (the new run is skipped until the swap), and retire and delete take an
 * id out whether the merge copied it already or not.  Then a merge stopped
 * (the catalog closed, as a crash between batches leaves it) at its start,
 * mid-copy and after the swap is resumed at the next open.
 */
static void test_chunk_index_batches(void) {
	uint64_t ids[1000], cont, n, live, count = 0, steps = 0, removed = 0, recent = 0;
	bool gone[1000] = {}, swapped = false;
	CatalogIndexMerge m = {};
	CatalogIndexState st;
	char p[300];
	Catalog *c;
	int r;

	snprintf(p, sizeof(p), "%s/index-batches.db", dir);
	CHECK(catalog_open(p, 0, 0, &c) == 0);
	CHECK(catalog_container_new(c, 0, &cont) == 0);
	n = index_seven_runs(c, cont, ids);
	live = n;
	CHECK(catalog_index_merge_due(c, 10, &recent) == 1 && recent == 40);
	while (!swapped) {
		CHECK((r = catalog_index_merge_step(c, 10, 7, 0, &m)) == 1);
		if (r != 1)
			break;
		steps++;
		index_add_elsewhere(c, cont, n, ids);
		n++, live++;
		if (steps % 3 == 0) {
			uint64_t a = (steps * 37) % 320, b = (steps * 53 + 11) % 320;
			if (!gone[a]) {
				CHECK(catalog_chunk_retire(c, ids[a]) == 0);
				gone[a] = true, live--, removed++;
			}
			if (!gone[b]) {
				CHECK(catalog_chunk_ref(c, ids[b], -1) == 0 && catalog_chunk_delete(c, ids[b]) == 0);
				gone[b] = true, live--, removed++;
			}
		}
		swapped = swapped || m.done;
		CHECK(catalog_chunks_count(c, 0, &count) == 0 && count == live);
		index_check(c, ids, n, gone);
	}
	/* The sources' rows go in batches of their own; the last returns 0, though the recent table is due. */
	while ((r = catalog_index_merge_step(c, 10, 7, 0, &m)) == 1) {
		CHECK(catalog_index_get(c, &st) == 0 && st.merging);
		CHECK(catalog_chunks_count(c, 0, &count) == 0 && count == live);
	}
	CHECK(r == 0 && catalog_index_get(c, &st) == 0 && !st.merging);
	index_check(c, ids, n, gone);
	CHECK(swapped && m.runs == 7 && m.from_runs == 280 && m.recent == 40);
	CHECK(st.frozen == 0 && st.runs == 1 && st.recent == steps);
	/* Some ids were taken out before the merge copied them, some after. */
	CHECK(st.in_runs == m.entries && m.entries < 320 && m.entries > 320 - removed);
	CHECK(catalog_check(c) == 0);

	/*
	 * Another eight sources, their merge stopped (the catalog closed and
	 * opened again) after its first batch, mid-copy, after the swap and
	 * mid-drop: each time found whole and resumed where it stopped.
	 */
	CHECK(index_merge(c, 10, &m) == 1 && m.level == 0 && m.entries == steps); /* the other thread's ids */
	for (int run = 0; run < 7; run++) {
		for (int k = 0; k < 40; k++, n++, live++)
			ids[n] = index_add(c, cont, n, 1);
		if (run < 6)
			CHECK(index_merge(c, 10, &m) == 1 && m.level == 0 && m.entries == 40);
	}
	uint64_t batch = 0, done_at = 0, reopened = 0;
	while ((r = catalog_index_merge_step(c, 10, 7, 0, &m)) == 1) {
		batch++;
		if (m.done && !done_at)
			done_at = batch;
		if (batch != 1 && batch != 4 && (!done_at || (batch != done_at && batch != done_at + 3)))
			continue;
		catalog_close(c);
		CHECK(catalog_open(p, 0, 0, &c) == 0);
		reopened++;
		CHECK(catalog_index_get(c, &st) == 0 && st.merging && st.frozen == (done_at ? 0 : 40));
		CHECK(catalog_index_merge_due(c, 1000, &recent) == 1 && recent == 0); /* under way: due */
		CHECK(catalog_chunks_count(c, 0, &count) == 0 && count == live);
		index_check(c, ids, n, gone);
	}
	CHECK(r == 0 && reopened == 4 && done_at > 4 && m.runs == 7 && m.recent == 40);
	CHECK(catalog_index_get(c, &st) == 0 && !st.merging && st.frozen == 0 && st.recent == 0 && st.runs == 2);
	CHECK(catalog_chunks_count(c, 0, &count) == 0 && count == live);
	index_check(c, ids, n, gone);
	CHECK(catalog_check(c) == 0);
	catalog_close(c);
}

/*
 * A batch whose time is up stops after one row, in the copy and in the
 * drop alike, and a merge ends however slow its batches are: a budget of
 * 1 ns, with room for 1000 rows by count.  Seven runs of 40 ids and 40 in
 * the recent table: 320 rows copied, 320 deleted, one per batch.
 */
static void test_chunk_index_budget(void) {
	uint64_t ids[320], cont, n, copies = 0, drops = 0;
	CatalogIndexMerge m = {};
	CatalogIndexState st;
	char p[300];
	Catalog *c;
	int r;

	snprintf(p, sizeof(p), "%s/index-budget.db", dir);
	CHECK(catalog_open(p, 0, 0, &c) == 0);
	CHECK(catalog_container_new(c, 0, &cont) == 0);
	n = index_seven_runs(c, cont, ids);
	CHECK(catalog_index_merge_step(c, 10, 1000, 1, &m) == 1 && m.entries == 0); /* the start: no row */
	while ((r = catalog_index_merge_step(c, 10, 1000, 1, &m)) == 1 && !m.done) {
		copies++;
		CHECK(m.entries == copies);
	}
	CHECK(r == 1 && m.done && m.entries == 320 && ++copies == 320);
	index_check(c, ids, n, NULL);
	while ((r = catalog_index_merge_step(c, 10, 1000, 1, NULL)) == 1) {
		drops++;
		CHECK(catalog_index_get(c, &st) == 0 && st.merging && st.runs == 1);
	}
	CHECK(r == 0 && drops + 1 == 320);
	CHECK(catalog_index_get(c, &st) == 0 && !st.merging && st.runs == 1 && st.in_runs == 320);
	index_check(c, ids, n, NULL);
	CHECK(catalog_check(c) == 0);
	catalog_close(c);
}

/* The recent and frozen tables' rows as this connection keeps them match what a reader counts. */
static void index_counts_check(Catalog *c, uint64_t recent, uint64_t frozen) {
	CatalogIndexState mine, counted;
	Catalog *reader;

	CHECK(catalog_index_get(c, &mine) == 0);
	CHECK(catalog_open_reader(c, &reader) == 0);
	CHECK(catalog_index_get(reader, &counted) == 0);
	catalog_close(reader);
	if (mine.recent != recent || mine.frozen != frozen || counted.recent != recent || counted.frozen != frozen)
		fprintf(stderr, "index counts: kept %llu/%llu, counted %llu/%llu, expected %llu/%llu\n",
			(unsigned long long) mine.recent, (unsigned long long) mine.frozen,
			(unsigned long long) counted.recent, (unsigned long long) counted.frozen,
			(unsigned long long) recent, (unsigned long long) frozen);
	CHECK(mine.recent == recent && mine.frozen == frozen);
	CHECK(counted.recent == recent && counted.frozen == frozen);
}

/*
 * The recent and frozen tables' rows are kept in memory, not counted at a
 * merge's start: committed adds count, rolled-back ones do not (a whole
 * transaction, or a change's own savepoint), retire and delete take one
 * off whichever table held it, a merge moves the recent table's to the
 * frozen one and the swap empties it; a reopen counts them again.
 */
static void test_chunk_index_counts(void) {
	uint64_t ids[64], cont, recent = 0;
	CatalogIndexMerge m = {};
	CatalogChunk got;
	char p[300];
	Catalog *c;

	snprintf(p, sizeof(p), "%s/index-counts.db", dir);
	CHECK(catalog_open(p, 0, 0, &c) == 0);
	CHECK(catalog_container_new(c, 0, &cont) == 0);
	CHECK(catalog_begin(c) == 0);
	for (uint64_t i = 0; i < 20; i++)
		ids[i] = index_add(c, cont, i, 1);
	CHECK(catalog_commit(c) == 0);
	index_counts_check(c, 20, 0);
	CHECK(catalog_begin(c) == 0);
	for (uint64_t i = 20; i < 30; i++)
		ids[i] = index_add(c, cont, i, 1);
	catalog_rollback(c);
	index_counts_check(c, 20, 0);
	/* An add the container's foreign key refuses counts nothing. */
	CatalogChunk bad = { .tier = 0, .container = cont + 1000, .frame_size = 1, .plain_size = 1, .refs = 1 };
	index_digest(63, bad.digest);
	CHECK(catalog_chunk_add_new(c, &bad, &ids[63]) < 0);
	CHECK(catalog_chunk_find(c, 0, bad.digest, &got) == -ENOENT);
	index_counts_check(c, 20, 0);
	for (uint64_t i = 30; i < 35; i++)
		ids[i] = index_add(c, cont, i, 1);
	index_counts_check(c, 25, 0);
	CHECK(catalog_chunk_retire(c, ids[1]) == 0);
	CHECK(catalog_chunk_ref(c, ids[2], -1) == 0 && catalog_chunk_delete(c, ids[2]) == 0);
	index_counts_check(c, 23, 0);
	CHECK(catalog_index_merge_due(c, 10, &recent) == 1 && recent == 23);

	/* The merge's start freezes them; adds go to a fresh recent table, a retire reaches the frozen one. */
	CHECK(catalog_index_merge_step(c, 10, 1, 0, &m) == 1 && m.entries == 0);
	index_counts_check(c, 0, 23);
	for (uint64_t i = 40; i < 45; i++)
		ids[i] = index_add(c, cont, i, 1);
	CHECK(catalog_chunk_retire(c, ids[3]) == 0);
	index_counts_check(c, 5, 22);
	while (catalog_index_merge_step(c, 10, 1, 0, &m) == 1 && !m.done) {
	}
	CHECK(m.done && m.recent == 23 && m.entries == 22);
	index_counts_check(c, 5, 0);
	catalog_close(c);
	CHECK(catalog_open(p, 0, 0, &c) == 0);
	index_counts_check(c, 5, 0);
	CHECK(catalog_index_merge_due(c, 4, &recent) == 1 && recent == 5);
	catalog_close(c);
}

typedef struct ChunkList {
	CatalogChunk v[64];
	size_t n;
} ChunkList;

static int chunk_list(const CatalogChunk *ch, void *userdata) {
	ChunkList *l = userdata;
	if (l->n == ELEMENTSOF(l->v))
		return -ENOBUFS;
	l->v[l->n++] = *ch;
	return 0;
}

static void test_regions_upgrade(void) {
	char p6[300], cmd[1500];
	CatalogTierMoved m;
	Catalog *c;
	int bad = 0, n = 0;

	/* A catalog written by schema 6 (tests/dedup/fixture-store-v1, from ea0b055). */
	snprintf(p6, sizeof(p6), "%s/v6.db", dir);
	snprintf(cmd, sizeof(cmd), "cp '%s/tests/dedup/fixture-store-v1/catalog.db' '%s' && "
		 "test \"$(sqlite3 '%s' 'PRAGMA user_version')\" = 6 && "
		 "sqlite3 '%s' \"UPDATE sqlite_sequence SET seq = 1000 WHERE name = 'chunks'\"",
		 getenv("FRATIER_SOURCE_ROOT") ?: ".", p6, p6, p6);
	CHECK(system(cmd) == 0);
	CHECK(catalog_open(p6, 0, 0, &c) == 0);
	CHECK(catalog_chunks_foreach(c, 0, chunk_region_fields, &bad) == 0 && bad == 0);
	CHECK(catalog_chunks_foreach(c, 0, count_chunk, &n) == 0 && n == 29);
	/*
	 * Schema 12: the old (tier, digest) index became run 1 of the digest
	 * index; every chunk is found by its digest, and the chunk table kept
	 * its AUTOINCREMENT mark (set above the largest id before the upgrade,
	 * as chunks deleted at the end of the table leave it).
	 */
	ChunkList all = {};
	CatalogIndexState st;
	CHECK(catalog_chunks_foreach(c, 0, chunk_list, &all) == 0 && all.n == 29);
	for (size_t i = 0; i < all.n; i++) {
		CatalogChunk found;
		CHECK(catalog_chunk_find(c, 0, all.v[i].digest, &found) == 0 && found.id == all.v[i].id);
	}
	CHECK(catalog_index_get(c, &st) == 0 && st.recent == 0 && st.runs == 1 && st.in_runs == 29);
	snprintf(cmd, sizeof(cmd), "test \"$(sqlite3 '%s' \"SELECT seq FROM sqlite_sequence WHERE name = 'chunks'\")\" = 1000",
		 p6);
	CHECK(system(cmd) == 0);
	CHECK(catalog_tier_moved_get(c, 1, &m) == 0 && m.files == 0 && m.stored == 0);
	CHECK(catalog_tier_moved_add(c, 1, 1000, 300, 200) == 0);
	CHECK(catalog_tier_moved_add(c, 1, 10, 5, 4) == 0);
	CHECK(catalog_tier_moved_get(c, 1, &m) == 0 && m.files == 2 && m.logical == 1010 && m.source_stored == 305 &&
	      m.stored == 204);
	CHECK(catalog_tier_moved_get(c, 2, &m) == 0 && m.files == 0);
	/* Schema 8: an upgraded catalog has no key, holds chunks, and records a key id once. */
	uint8_t kid[CATALOG_DIGEST_SIZE], got[CATALOG_DIGEST_SIZE];
	memset(kid, 0x5a, sizeof(kid));
	CHECK(catalog_key_id_get(c, got) == -ENOENT);
	CHECK(catalog_chunks_any(c) == 1);
	CHECK(catalog_key_id_add(c, kid) == 0);
	CHECK(catalog_key_id_add(c, kid) == -EEXIST);
	CHECK(catalog_key_id_get(c, got) == 0 && memcmp(got, kid, sizeof(kid)) == 0);
	/*
	 * Schema 9: another host's containers (global dedup) have rows of their
	 * own, one per (tier, host, remote id), never listed with the tier's
	 * own, and go once no chunk points into them.
	 */
	int own = 0, own_after = 0, foreign = 0;
	uint64_t fc, fc2, fc3, pruned = 0, fch;
	CHECK(catalog_containers_foreach(c, 0, count_container, &own) == 0 && own > 0);
	CHECK(catalog_container_foreign(c, 0, "db02", 17, &fc) == 0);
	CHECK(catalog_container_foreign(c, 0, "db02", 17, &fc2) == 0 && fc2 == fc);
	CHECK(catalog_container_foreign(c, 0, "db03", 17, &fc3) == 0 && fc3 != fc);
	CHECK(catalog_container_foreign(c, 0, "", 17, &fc3) == -EINVAL);
	CHECK(catalog_container_foreign(c, 0, "db02", 0, &fc3) == -EINVAL);
	CHECK(catalog_containers_foreach(c, 0, count_container, &own_after) == 0 && own_after == own);
	CHECK(catalog_containers_foreach_foreign(c, 0, count_foreign, &foreign) == 0 && foreign == 2);
	CatalogChunk fch_row = { .tier = 0, .container = fc, .offset = 64, .frame_size = 100, .plain_size = 100 };
	memset(fch_row.digest, 0xf0, sizeof(fch_row.digest));
	CHECK(catalog_chunk_add(c, &fch_row, &fch) == 0);
	CHECK(catalog_containers_foreign_prune(c, 0, &pruned) == 0 && pruned == 1);
	foreign = 0;
	CHECK(catalog_containers_foreach_foreign(c, 0, count_foreign, &foreign) == 0 && foreign == 1);
	/* Schema 10: containers written before are under no key (there was none); new ones under theirs. */
	KeyUsage u = {};
	CHECK(catalog_key_usage_foreach(c, key_usage, &u) == 0 && u.rows == 1 && u.keyed == 0 && u.bytes > 0);
	uint64_t cont;
	CatalogContainer ct;
	CHECK(catalog_container_new_keyed(c, 1, kid, &cont) == 0);
	CHECK(catalog_container_get(c, cont, &ct) == 0 && ct.keyed && memcmp(ct.key_id, kid, sizeof(kid)) == 0);
	ct.size = 4096;
	CHECK(catalog_container_update(c, &ct) == 0);
	u = (KeyUsage) {};
	CHECK(catalog_key_usage_foreach(c, key_usage, &u) == 0 && u.rows == 2 && u.keyed == 1 && u.keyed_bytes == 4096);
	CHECK(catalog_rekey_is_requested(c, 1) == 0);
	CHECK(catalog_rekey_set(c, 1, true) == 0 && catalog_rekey_set(c, 1, true) == 0);
	CHECK(catalog_rekey_is_requested(c, 1) == 1 && catalog_rekey_is_requested(c, 2) == 0);
	CHECK(catalog_rekey_set(c, 1, false) == 0 && catalog_rekey_is_requested(c, 1) == 0);
	/* Schema 11: no description recorded after the upgrade; the last one recorded per tier replaces the one before. */
	uint64_t gen;
	bool present;
	CHECK(catalog_description_get(c, 1, &gen, &present) == -ENOENT);
	CHECK(catalog_description_set(c, 1, 1000, true) == 0 && catalog_description_set(c, 2, 5, true) == 0);
	CHECK(catalog_description_set(c, 1, 2000, false) == 0);
	CHECK(catalog_description_get(c, 1, &gen, &present) == 0 && gen == 2000 && !present);
	CHECK(catalog_description_get(c, 2, &gen, &present) == 0 && gen == 5 && present);
	CHECK(catalog_check(c) == 0);
	catalog_close(c);
	snprintf(cmd, sizeof(cmd), "test \"$(sqlite3 '%s' 'PRAGMA user_version')\" = %d", p6, CATALOG_SCHEMA_VERSION);
	CHECK(system(cmd) == 0);
}

/* A new catalog gives the pages of deleted rows back to the filesystem at the next checkpoint. */
static void test_shrinks(void) {
	char p7[300];
	struct stat big, small;
	Catalog *c;
	uint64_t cont, ids[4000];

	snprintf(p7, sizeof(p7), "%s/shrink.db", dir);
	CHECK(catalog_open(p7, 0, 0, &c) == 0);
	CHECK(catalog_container_new(c, 0, &cont) == 0);
	CHECK(catalog_begin(c) == 0);
	for (unsigned i = 0; i < ELEMENTSOF(ids); i++) {
		CatalogChunk ch = { .container = cont, .offset = 64, .frame_size = 100, .plain_size = 100 };
		memcpy(ch.digest, &i, sizeof(i));
		CHECK(catalog_chunk_add(c, &ch, &ids[i]) == 0);
	}
	CHECK(catalog_commit(c) == 0);
	CHECK(catalog_checkpoint(c) == 0);
	CHECK(stat(p7, &big) == 0);
	CHECK(catalog_begin(c) == 0);
	for (unsigned i = 0; i < ELEMENTSOF(ids); i++)
		CHECK(catalog_chunk_delete(c, ids[i]) == 0);
	CHECK(catalog_commit(c) == 0);
	CHECK(catalog_checkpoint(c) == 0);
	CHECK(stat(p7, &small) == 0);
	CHECK(small.st_size < big.st_size / 2);
	catalog_close(c);
}

/* A catalog of n chunks, checkpointed, whose rows are then all deleted: their pages are free. */
static Catalog *emptied(const char *p, unsigned n) {
	uint64_t cont, id;
	Catalog *c;

	CHECK(catalog_open(p, 0, 0, &c) == 0);
	CHECK(catalog_container_new(c, 0, &cont) == 0);
	CHECK(catalog_begin(c) == 0);
	for (unsigned i = 0; i < n; i++) {
		CatalogChunk ch = { .container = cont, .offset = 64, .frame_size = 100, .plain_size = 100 };
		memcpy(ch.digest, &i, sizeof(i));
		CHECK(catalog_chunk_add(c, &ch, &id) == 0);
	}
	CHECK(catalog_commit(c) == 0);
	CHECK(catalog_checkpoint(c) == 0);
	CHECK(catalog_begin(c) == 0);
	for (id = 1; id <= n; id++)
		CHECK(catalog_chunk_delete(c, id) == 0);
	CHECK(catalog_commit(c) == 0);
	return c;
}

/*
 * catalog_checkpoint() gives free pages back in steps, a bounded amount per
 * call.  Budgets of 0 make a call one step of one incremental_vacuum
 * whatever the machine's speed, so the bounds are checked in pages, not
 * time; calls one after another give back the rest, down to the size of
 * the same catalog given back in one go.
 */
static void test_vacuum_cap(void) {
	char p1[300], p2[300];
	CatalogStats st, prev;
	struct stat whole, stepped;
	Catalog *c;

	snprintf(p1, sizeof(p1), "%s/vacuum-whole.db", dir);
	c = emptied(p1, 10000);
	catalog_vacuum_budget_set(c, UINT64_MAX, UINT64_MAX);
	CHECK(catalog_checkpoint(c) == 0);
	catalog_stats_get(c, &st);
	CHECK(st.vacuum_left == 0 && st.vacuum_cut == 0 && st.vacuum_pages > 20 * CATALOG_VACUUM_STEP_PAGES);
	uint64_t freed = st.vacuum_pages;
	CHECK(stat(p1, &whole) == 0);
	catalog_close(c);

	snprintf(p2, sizeof(p2), "%s/vacuum-stepped.db", dir);
	c = emptied(p2, 10000);
	catalog_vacuum_budget_set(c, 0, 0);
	catalog_stats_get(c, &prev);
	unsigned calls = 0;
	do {
		CHECK(catalog_checkpoint(c) == 0);
		catalog_stats_get(c, &st);
		CHECK(st.vacuum_calls == prev.vacuum_calls + 1);
		CHECK(st.vacuum_steps == prev.vacuum_steps + 1);
		CHECK(st.vacuum_pages > prev.vacuum_pages && st.vacuum_pages <= prev.vacuum_pages + CATALOG_VACUUM_STEP_PAGES);
		CHECK(st.vacuum_cut == prev.vacuum_cut + (st.vacuum_left > 0));
		prev = st;
	} while (st.vacuum_left > 0 && ++calls <= freed);
	CHECK(st.vacuum_left == 0 && st.vacuum_pages == freed);
	CHECK(calls >= freed / CATALOG_VACUUM_STEP_PAGES - 1);
	CHECK(stat(p2, &stepped) == 0);
	CHECK(stepped.st_size == whole.st_size);
	CHECK(catalog_check(c) == 0);
	catalog_close(c);
}

/*
 * A thread waiting for the catalog lock has it between two batches of a
 * merge (or two steps of the vacuum), though the background thread asks
 * for it again at once.  Not a timing: the waiter blocks on the lock
 * before the first batch (both are counted waiting while the test holds
 * it), and notes, holding the lock, how far the background had got.
 */
typedef struct Handoff {
	Catalog *c;
	bool vacuum;
	atomic_uint batches; /* the merge's batches done */
	uint64_t seen;       /* batches done, or pages given back, when the waiter had the lock */
	int r;
} Handoff;

static void *background_batches(void *userdata) {
	Handoff *h = userdata;

	if (h->vacuum) {
		h->r = catalog_checkpoint(h->c);
		return NULL;
	}
	while ((h->r = catalog_index_merge_step(h->c, 10, 1, 0, NULL)) == 1)
		atomic_fetch_add(&h->batches, 1);
	return NULL;
}

static void *waiter(void *userdata) {
	Handoff *h = userdata;
	CatalogStats st;

	h->seen = UINT64_MAX;
	if (catalog_begin(h->c) < 0)
		return NULL;
	catalog_stats_get(h->c, &st);
	h->seen = h->vacuum ? st.vacuum_pages : atomic_load(&h->batches);
	catalog_rollback(h->c);
	return NULL;
}

static void wait_for_waiters(Catalog *c, unsigned n) {
	CatalogStats st;
	for (catalog_stats_get(c, &st); st.lock_waiting < n; catalog_stats_get(c, &st))
		sched_yield();
}

static void handoff(Handoff *h) {
	pthread_t bg, w;

	CHECK(catalog_begin(h->c) == 0);
	CHECK(pthread_create(&bg, NULL, background_batches, h) == 0);
	wait_for_waiters(h->c, 1);
	CHECK(pthread_create(&w, NULL, waiter, h) == 0);
	wait_for_waiters(h->c, 2);
	catalog_rollback(h->c);
	pthread_join(w, NULL);
	pthread_join(bg, NULL);
}

static void test_lock_yield(void) {
	char p[300];
	CatalogStats st;
	uint64_t cont, recent = 0;
	Catalog *c;

	snprintf(p, sizeof(p), "%s/yield.db", dir);
	CHECK(catalog_open(p, 0, 0, &c) == 0);
	CHECK(catalog_container_new(c, 0, &cont) == 0);
	/* Rounds: a background thread that took the lock back at once might lose one race, not five. */
	for (uint32_t round = 0; round < 5; round++) {
		CHECK(catalog_begin(c) == 0);
		for (uint32_t i = round * 200; i < (round + 1) * 200; i++) {
			CatalogChunk ch = { .container = cont, .offset = i, .frame_size = 100, .plain_size = 100, .refs = 1 };
			memcpy(ch.digest, &i, sizeof(i));
			uint64_t id;
			CHECK(catalog_chunk_add_new(c, &ch, &id) == 0);
		}
		CHECK(catalog_commit(c) == 0);
		CHECK(catalog_index_merge_due(c, 10, &recent) == 1 && recent == 200);
		Handoff h = { .c = c };
		handoff(&h);
		CHECK(h.r == 0 && atomic_load(&h.batches) > 100);
		CHECK(h.seen <= 1);
	}
	catalog_stats_get(c, &st);
	CHECK(st.lock_waits >= 10 && st.lock_waiting == 0);
	catalog_close(c);

	snprintf(p, sizeof(p), "%s/yield-vacuum.db", dir);
	c = emptied(p, 10000);
	catalog_vacuum_budget_set(c, 0, UINT64_MAX);
	Handoff h = { .c = c, .vacuum = true };
	handoff(&h);
	catalog_stats_get(c, &st);
	CHECK(h.r == 0 && st.vacuum_left == 0 && st.vacuum_steps > 20);
	CHECK(h.seen <= CATALOG_VACUUM_STEP_PAGES);
	catalog_close(c);
}

int main(void) {
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/catalog.db", dir);

	test_basic();
	test_listing_stable();
	test_xattrs();
	test_orphans_and_reuse();
	test_chunks_and_recipes();
	test_chunks_ref_batch();
	test_checkpoint();
	test_checkpointer();
	test_archivelogs();
	test_pins();
	test_history();
	test_staging_tier();
	test_chunk_index();
	test_chunk_index_batches();
	test_chunk_index_budget();
	test_chunk_index_counts();
	test_regions_upgrade();
	test_shrinks();
	test_vacuum_cap();
	test_lock_yield();
	test_bad_files();

	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void) system(cmd);
	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	return failures ? 1 : 0;
}
