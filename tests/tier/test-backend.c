/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The contract of dedup/backend.h, checked the same way against every
 * backend:
 *     test-backend dir          a fresh temporary directory
 *     test-backend nfs URL      an empty NFS export (tests/tier/test_nfs.py
 *                               starts ganesha and passes its URL)
 *     test-backend nfs-full URL an empty, small NFS export: only what a full
 *                               export does (-ENOSPC, and recovery from it)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/tier/tier-test.h"

#define KiB ((size_t) 1 << 10)

/* The bytes every object of this test holds: a function of its seed and offset. */
static void expected(uint64_t seed, uint64_t offset, uint8_t *buf, size_t len) {
	for (size_t i = 0; i < len; i++) {
		uint64_t x = (offset + i) * UINT64_C(0x9e3779b97f4a7c15) + seed;
		buf[i] = (uint8_t) ((x >> 29) ^ (x >> 47));
	}
}

/* Creates name holding len bytes of seed, written in uneven pieces, synced. */
static void put(DedupBackend *b, const char *name, uint64_t seed, size_t len) {
	DedupBackendFile *f;
	uint8_t *buf = test_malloc(len ?: 1);

	expected(seed, 0, buf, len);
	ASSERT_OK(dedup_backend_open_write(b, name, true, 0, &f));
	for (size_t off = 0, step = 1; off < len; step = step * 3 + 7) {
		size_t n = MIN(step, len - off);
		ASSERT_OK(dedup_backend_file_pwrite(b, f, buf + off, n, off));
		off += n;
	}
	ASSERT_OK(dedup_backend_file_sync(b, f));
	dedup_backend_file_close(b, f);
	free(buf);
}

/* name must hold exactly len bytes of seed. */
static void check(DedupBackend *b, const char *name, uint64_t seed, size_t len) {
	uint8_t *buf = test_malloc(len + 1), *want = test_malloc(len ?: 1);
	uint64_t size;

	ASSERT_OK(dedup_backend_size(b, name, &size));
	ASSERT(size == len);
	expected(seed, 0, want, len);
	ASSERT(dedup_backend_pread(b, name, buf, len + 1, 0) == (ssize_t) len);
	ASSERT(memcmp(buf, want, len) == 0);
	free(buf);
	free(want);
}

static void test_names(DedupBackend *b) {
	static const char *const bad[] = {
		"", "/a", "a/", "a//b", ".", "..", "./a", "a/./b", "a/../b", "a/..", "A", "a b", "a\\b", "a:b",
	};
	char too_long[DEDUP_BACKEND_NAME_MAX + 2];
	DedupBackendFile *f;
	uint8_t buf[4];
	uint64_t size;

	memset(too_long, 'x', sizeof(too_long) - 1);
	too_long[sizeof(too_long) - 1] = '\0';
	for (size_t i = 0; i <= ELEMENTSOF(bad); i++) {
		const char *name = i < ELEMENTSOF(bad) ? bad[i] : too_long;
		ASSERT_RET(dedup_backend_open_write(b, name, true, 0, &f), -EINVAL);
		ASSERT(dedup_backend_pread(b, name, buf, sizeof(buf), 0) == -EINVAL);
		ASSERT_RET(dedup_backend_size(b, name, &size), -EINVAL);
		ASSERT_RET(dedup_backend_unlink(b, name), -EINVAL);
		ASSERT_RET(dedup_backend_list(b, name, list_collect, NULL), -EINVAL);
		ASSERT_RET(dedup_backend_rename(b, name, "ok"), -EINVAL);
		ASSERT_RET(dedup_backend_rename(b, "ok", name), -EINVAL);
	}
	/* The longest valid name works. */
	too_long[DEDUP_BACKEND_NAME_MAX] = '\0';
	put(b, too_long, 1, 10);
	check(b, too_long, 1, 10);
	ASSERT_OK(dedup_backend_unlink(b, too_long));
}

static void test_missing(DedupBackend *b) {
	DedupBackendFile *f;
	uint8_t buf[4];
	uint64_t size;

	ASSERT_RET(dedup_backend_open_write(b, "m/none", false, 0, &f), -ENOENT);
	ASSERT(dedup_backend_pread(b, "m/none", buf, sizeof(buf), 0) == -ENOENT);
	ASSERT(dedup_backend_pread(b, "none", buf, sizeof(buf), 0) == -ENOENT);
	ASSERT_RET(dedup_backend_size(b, "m/none", &size), -ENOENT);
	ASSERT_RET(dedup_backend_unlink(b, "m/none"), -ENOENT);
	ASSERT_RET(dedup_backend_rename(b, "m/none", "m/other"), -ENOENT);
}

static void test_write_read(DedupBackend *b) {
	const size_t len = 300 * KiB;
	uint8_t *buf = test_malloc(len), *want = test_malloc(len);
	DedupBackendFile *f;
	uint64_t size;

	/* Appends at offsets, in two sessions: create, then reopen at the synced size. */
	expected(7, 0, want, len);
	ASSERT_OK(dedup_backend_open_write(b, "c/00/obj", true, 0, &f));
	ASSERT_OK(dedup_backend_file_pwrite(b, f, want, 100 * KiB, 0));
	ASSERT_OK(dedup_backend_file_sync(b, f));
	dedup_backend_file_close(b, f);
	ASSERT_OK(dedup_backend_open_write(b, "c/00/obj", false, 100 * KiB, &f));
	ASSERT_OK(dedup_backend_file_pwrite(b, f, want + 100 * KiB, len - 100 * KiB, 100 * KiB));
	ASSERT_OK(dedup_backend_file_sync(b, f));
	dedup_backend_file_close(b, f);
	check(b, "c/00/obj", 7, len);

	/* Reads at offsets, across the end and past it. */
	ASSERT(dedup_backend_pread(b, "c/00/obj", buf, 1000, 12345) == 1000);
	ASSERT(memcmp(buf, want + 12345, 1000) == 0);
	ASSERT(dedup_backend_pread(b, "c/00/obj", buf, 5000, len - 10) == 10);
	ASSERT(memcmp(buf, want + len - 10, 10) == 0);
	ASSERT(dedup_backend_pread(b, "c/00/obj", buf, 100, len) == 0);
	ASSERT(dedup_backend_pread(b, "c/00/obj", buf, 100, len + 4096) == 0);
	ASSERT(dedup_backend_pread(b, "c/00/obj", buf, 0, 0) == 0);
	ASSERT_OK(dedup_backend_pread_full(b, "c/00/obj", buf, len, 0));
	ASSERT(memcmp(buf, want, len) == 0);
	ASSERT_RET(dedup_backend_pread_full(b, "c/00/obj", buf, 100, len - 50), -EUCLEAN);

	/* open_write with create on an existing object opens it; bytes past size are cut. */
	ASSERT_OK(dedup_backend_open_write(b, "c/00/obj", true, len, &f));
	dedup_backend_file_close(b, f);
	check(b, "c/00/obj", 7, len);
	ASSERT_OK(dedup_backend_open_write(b, "c/00/obj", false, 200 * KiB, &f));
	dedup_backend_file_close(b, f);
	check(b, "c/00/obj", 7, 200 * KiB);
	/* Shorter than the caller says: -EUCLEAN, and left alone. */
	ASSERT_RET(dedup_backend_open_write(b, "c/00/obj", false, 200 * KiB + 1, &f), -EUCLEAN);
	ASSERT_RET(dedup_backend_open_write(b, "c/00/obj", true, len, &f), -EUCLEAN);
	check(b, "c/00/obj", 7, 200 * KiB);

	/* truncate() takes back an append. */
	ASSERT_OK(dedup_backend_open_write(b, "c/00/obj", false, 200 * KiB, &f));
	ASSERT_OK(dedup_backend_file_pwrite(b, f, want + 200 * KiB, 50 * KiB, 200 * KiB));
	ASSERT_OK(dedup_backend_size(b, "c/00/obj", &size));
	ASSERT(size == 250 * KiB);
	ASSERT_OK(dedup_backend_file_truncate(b, f, 200 * KiB));
	ASSERT_OK(dedup_backend_file_sync(b, f));
	dedup_backend_file_close(b, f);
	check(b, "c/00/obj", 7, 200 * KiB);

	/* An empty object. */
	put(b, "c/00/empty", 8, 0);
	check(b, "c/00/empty", 8, 0);

	/* A directory is not an object. */
	ASSERT_RET(dedup_backend_size(b, "c/00", &size), -EUCLEAN);
	free(buf);
	free(want);
}

static void test_list_unlink_rename(DedupBackend *b) {
	NameSet s = {};
	DedupBackendStatfs st;

	put(b, "l/00/a", 11, 1000);
	put(b, "l/00/b", 12, 2000);
	put(b, "l/01/c", 13, 3000);
	put(b, "l/d", 14, 4000);
	put(b, "other/e", 15, 10);

	ASSERT_OK(dedup_backend_list(b, "l", list_collect, &s));
	name_set_expect(&s, (const char *[]) { "l/00/a", "l/00/b", "l/01/c", "l/d", NULL });
	ASSERT_OK(dedup_backend_list(b, "l/00", list_collect, &s));
	name_set_expect(&s, (const char *[]) { "l/00/a", "l/00/b", NULL });
	ASSERT_OK(dedup_backend_list(b, "nothing/here", list_collect, &s));
	name_set_expect(&s, (const char *[]) { NULL });
	/* The first negative return of the callback stops the listing and is returned. */
	ASSERT_RET(dedup_backend_list(b, "l", list_stop, &s), -ECANCELED);
	ASSERT(s.n == 1);
	name_set_clear(&s);

	/* unlink() of an object just read (a backend may cache its handle). */
	check(b, "l/00/a", 11, 1000);
	ASSERT_OK(dedup_backend_unlink(b, "l/00/a"));
	uint8_t buf[16];
	ASSERT(dedup_backend_pread(b, "l/00/a", buf, sizeof(buf), 0) == -ENOENT);
	ASSERT_RET(dedup_backend_unlink(b, "l/00/a"), -ENOENT);
	/* The same name made again is the new object, not the cached old one. */
	put(b, "l/00/a", 21, 500);
	check(b, "l/00/a", 21, 500);

	/* rename() into new directories, and over an existing (and cached) object. */
	check(b, "l/00/b", 12, 2000);
	ASSERT_OK(dedup_backend_rename(b, "l/00/b", "r/x/y/b"));
	ASSERT(dedup_backend_pread(b, "l/00/b", buf, sizeof(buf), 0) == -ENOENT);
	check(b, "r/x/y/b", 12, 2000);
	check(b, "l/d", 14, 4000);
	ASSERT_OK(dedup_backend_rename(b, "r/x/y/b", "l/d"));
	check(b, "l/d", 12, 2000);
	ASSERT(dedup_backend_pread(b, "r/x/y/b", buf, sizeof(buf), 0) == -ENOENT);
	ASSERT_OK(dedup_backend_list(b, "l", list_collect, &s));
	name_set_expect(&s, (const char *[]) { "l/00/a", "l/01/c", "l/d", NULL });

	ASSERT_OK(dedup_backend_statfs(b, &st));
	ASSERT(st.total > 0 && st.free <= st.total && st.avail <= st.free);
}

#define READERS 6
#define OBJECTS 4

typedef struct Reader {
	DedupBackend *b;
	unsigned id;
} Reader;

static void *reader(void *arg) {
	Reader *r = arg;
	TestRng rng = { .state = r->id };
	const size_t len = 256 * KiB;
	uint8_t *buf = test_malloc(64 * KiB), *want = test_malloc(64 * KiB);

	for (int i = 0; i < 150; i++) {
		unsigned obj = (unsigned) (test_rng_next(&rng) % OBJECTS);
		char name[32];
		size_t off = (size_t) (test_rng_next(&rng) % len), n = 1 + (size_t) (test_rng_next(&rng) % (64 * KiB));
		snprintf(name, sizeof(name), "p/%u", obj);
		ssize_t got = dedup_backend_pread(r->b, name, buf, n, off);
		ASSERT(got == (ssize_t) MIN(n, len - off));
		expected(100 + obj, off, want, (size_t) got);
		ASSERT(memcmp(buf, want, (size_t) got) == 0);
	}
	free(buf);
	free(want);
	return NULL;
}

static void test_concurrent_preads(DedupBackend *b) {
	pthread_t threads[READERS];
	Reader readers[READERS];

	for (unsigned i = 0; i < OBJECTS; i++) {
		char name[32];
		snprintf(name, sizeof(name), "p/%u", i);
		put(b, name, 100 + i, 256 * KiB);
	}
	for (unsigned i = 0; i < READERS; i++) {
		readers[i] = (Reader) { .b = b, .id = i + 1 };
		ASSERT(pthread_create(threads + i, NULL, reader, readers + i) == 0);
	}
	for (unsigned i = 0; i < READERS; i++)
		ASSERT(pthread_join(threads[i], NULL) == 0);
}

/*
 * An object replaced by another client (a second backend on the export):
 * the handle a backend cached for the old one is stale, and reads find the
 * new one by name.  One connection and no retries: the cached handle is
 * certainly used, and only the stale-handle path can get past it.
 */
static void test_nfs_replaced_by_other_client(const char *url) {
	const TierNfsOptions one = { .timeout_ms = 10000, .retries = 0, .connections = 1 };
	DedupBackend *b, *other;

	ASSERT_OK(tier_backend_nfs_open(url, &one, &b));
	ASSERT_OK(tier_backend_nfs_open(url, NULL, &other));
	put(other, "s/obj", 31, 10000);
	check(b, "s/obj", 31, 10000);
	ASSERT_OK(dedup_backend_unlink(other, "s/obj"));
	put(other, "s/obj", 32, 5000);
	check(b, "s/obj", 32, 5000);
	/* And gone for good: no handle brings the old bytes back. */
	ASSERT_OK(dedup_backend_unlink(other, "s/obj"));
	uint8_t buf[16];
	ASSERT(dedup_backend_pread(b, "s/obj", buf, sizeof(buf), 0) == -ENOENT);
	other = dedup_backend_free(other);
	b = dedup_backend_free(b);
}

/* Bad URLs and options are -EINVAL with a message; a missing export is the server's -ENOENT. */
static void test_nfs_open_errors(const char *url) {
	static const char *const bad[] = {
		"", "127.0.0.1/x", "http://127.0.0.1/x", "nfs://", "nfs://127.0.0.1/x?version=4",
		"nfs://127.0.0.1/x?nfsport=2049&version=41",
	};
	const TierNfsOptions bad_opts[] = {
		{ .timeout_ms = 0, .retries = 1, .connections = 1 },
		{ .timeout_ms = 1000, .retries = TIER_NFS_RETRIES_MAX + 1, .connections = 1 },
		{ .timeout_ms = 1000, .retries = 1, .connections = 0 },
		{ .timeout_ms = 1000, .retries = 1, .connections = TIER_NFS_CONNECTIONS_MAX + 1 },
	};
	DedupBackend *b;
	char missing[512];

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		ASSERT_RET(tier_backend_nfs_open(bad[i], NULL, &b), -EINVAL);
		ASSERT(tier_backend_nfs_open_error()[0] != '\0');
	}
	for (size_t i = 0; i < ELEMENTSOF(bad_opts); i++) {
		ASSERT_RET(tier_backend_nfs_open(url, bad_opts + i, &b), -EINVAL);
		ASSERT(tier_backend_nfs_open_error()[0] != '\0');
	}
	/* The same server, an export it does not have: the query stays, the path changes. */
	const char *q = strchr(url, '?');
	snprintf(missing, sizeof(missing), "nfs://127.0.0.1/no/such/export%s", q ? q : "");
	int r = tier_backend_nfs_open(missing, NULL, &b);
	ASSERT(r == -ENOENT || r == -EACCES);
	ASSERT(strstr(tier_backend_nfs_open_error(), "/no/such/export"));
}

/*
 * Appends to a small export until it is full: the refused append is -ENOSPC,
 * nothing else; it is taken back with truncate(), what was written before it
 * reads back, and space freed by unlink() takes appends again.
 */
static void test_full(DedupBackend *b) {
	const size_t step = 256 * KiB;
	uint8_t *buf = test_malloc(step);
	DedupBackendFile *f;
	uint64_t size = 0;
	int r = 0;

	put(b, "f/ballast", 40, 2 * step);
	ASSERT_OK(dedup_backend_open_write(b, "f/obj", true, 0, &f));
	for (int i = 0; i < 64 && r == 0; i++) {
		expected(41, size, buf, step);
		r = dedup_backend_file_pwrite(b, f, buf, step, size);
		if (r == 0) {
			ASSERT_OK(dedup_backend_file_sync(b, f));
			size += step;
		}
	}
	ASSERT_RET(r, -ENOSPC);
	ASSERT(size > 0);
	ASSERT_OK(dedup_backend_file_truncate(b, f, size));
	ASSERT_OK(dedup_backend_file_sync(b, f));
	dedup_backend_file_close(b, f);
	check(b, "f/obj", 41, size);

	ASSERT_OK(dedup_backend_unlink(b, "f/ballast"));
	ASSERT_OK(dedup_backend_open_write(b, "f/obj", false, size, &f));
	expected(41, size, buf, step);
	ASSERT_OK(dedup_backend_file_pwrite(b, f, buf, step, size));
	ASSERT_OK(dedup_backend_file_sync(b, f));
	dedup_backend_file_close(b, f);
	check(b, "f/obj", 41, size + step);
	free(buf);
}

int main(int argc, char **argv) {
	char dir[64] = "";
	DedupBackend *b;

	if (argc == 2 && strcmp(argv[1], "dir") == 0) {
		snprintf(dir, sizeof(dir), "%s/fratier-tier-XXXXXX", getenv("TMPDIR") ?: "/tmp");
		ASSERT(mkdtemp(dir));
		ASSERT_OK(tier_backend_dir_open(dir, &b));
	} else if (argc == 3 && strcmp(argv[1], "nfs") == 0) {
		TierNfsOptions o = TIER_NFS_OPTIONS_DEFAULT;
		test_nfs_open_errors(argv[2]);
		int r = tier_backend_nfs_open(argv[2], &o, &b);
		if (r < 0)
			fprintf(stderr, "%s\n", tier_backend_nfs_open_error());
		ASSERT_OK(r);
	} else if (argc == 3 && strcmp(argv[1], "nfs-full") == 0) {
		ASSERT_OK(tier_backend_nfs_open(argv[2], NULL, &b));
		test_full(b);
		dedup_backend_free(b);
		printf("ok %s\n", argv[1]);
		return 0;
	} else {
		fprintf(stderr, "usage: %s dir | nfs URL | nfs-full URL\n", argv[0]);
		return 2;
	}

	test_names(b);
	test_missing(b);
	test_write_read(b);
	test_list_unlink_rename(b);
	test_concurrent_preads(b);
	if (argc == 3)
		test_nfs_replaced_by_other_client(argv[2]);
	b = dedup_backend_free(b);
	if (dir[0])
		rm_rf(dir);
	printf("ok %s\n", argv[1]);
	return 0;
}
