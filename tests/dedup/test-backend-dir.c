/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The directory backend (tier/backend-dir.c): name checks, open_write's
 * create/truncate/short rules, reads through the descriptor cache (more
 * objects than it holds, unlink while cached), listing.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macros.h"
#include "tests/dedup/dedup-test.h"
#include "tier/backend-dir.h"

static int rm(const char *path, const struct stat *st, int type, struct FTW *ftw) {
	return remove(path);
}

static int count(const char *name, void *userdata) {
	(*(size_t *) userdata)++;
	ASSERT(strncmp(name, "c/", 2) == 0);
	return 0;
}

int main(void) {
	char dir[] = "/tmp/fratier-backend-XXXXXX";
	DedupBackend *b;
	DedupBackendFile *f;
	uint8_t buf[64];
	uint64_t size;

	ASSERT(mkdtemp(dir));
	ASSERT_RET(tier_backend_dir_open("/nonexistent/fratier", &b), -ENOENT);
	ASSERT_OK(tier_backend_dir_open(dir, &b));

	static const char *const bad[] = { "", "/abs", "a//b", "a/../b", "..", "./a", "a/", "A", "a b", "a\\b" };
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		ASSERT_RET(b->ops->open_write(b, bad[i], true, 0, &f), -EINVAL);
		ASSERT(b->ops->pread(b, bad[i], buf, 1, 0) == -EINVAL);
		ASSERT_RET(b->ops->unlink(b, bad[i]), -EINVAL);
	}

	ASSERT_RET(b->ops->open_write(b, "c/00/x", false, 0, &f), -ENOENT);
	ASSERT_OK(b->ops->open_write(b, "c/00/x", true, 0, &f));
	ASSERT_OK(b->ops->pwrite(f, "hello world", 11, 0));
	ASSERT_OK(b->ops->sync(f));
	b->ops->close(f);
	ASSERT_OK(b->ops->size(b, "c/00/x", &size));
	ASSERT(size == 11);
	ASSERT(b->ops->pread(b, "c/00/x", buf, sizeof(buf), 6) == 5 && memcmp(buf, "world", 5) == 0);
	ASSERT(b->ops->pread(b, "c/00/x", buf, sizeof(buf), 100) == 0);
	ASSERT(b->ops->pread(b, "c/00/missing", buf, 1, 0) == -ENOENT);

	/* Reopening cuts what is past the committed size; a shorter object is refused. */
	ASSERT_RET(b->ops->open_write(b, "c/00/x", false, 12, &f), -EUCLEAN);
	ASSERT_OK(b->ops->open_write(b, "c/00/x", true, 5, &f));
	ASSERT_OK(b->ops->pwrite(f, "!", 1, 5));
	ASSERT_OK(b->ops->truncate(f, 6));
	b->ops->close(f);
	ASSERT(b->ops->pread(b, "c/00/x", buf, sizeof(buf), 0) == 6 && memcmp(buf, "hello!", 6) == 0);

	/* More objects than the descriptor cache holds, each read twice. */
	char name[64];
	for (int i = 0; i < (int) TIER_BACKEND_DIR_FDS_MAX + 30; i++) {
		snprintf(name, sizeof(name), "c/%02x/obj-%d", i % 7, i);
		ASSERT_OK(b->ops->open_write(b, name, true, 0, &f));
		ASSERT_OK(b->ops->pwrite(f, &i, sizeof(i), 0));
		b->ops->close(f);
	}
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < (int) TIER_BACKEND_DIR_FDS_MAX + 30; i++) {
			int v = -1;
			snprintf(name, sizeof(name), "c/%02x/obj-%d", i % 7, i);
			ASSERT(b->ops->pread(b, name, &v, sizeof(v), 0) == sizeof(v) && v == i);
		}
	size_t n = 0;
	ASSERT_OK(b->ops->list(b, "c", count, &n));
	ASSERT(n == TIER_BACKEND_DIR_FDS_MAX + 30 + 1);
	n = 0;
	ASSERT_OK(b->ops->list(b, "nothing", count, &n));
	ASSERT(n == 0);

	/* Unlinking a cached object: gone for reads, and re-creatable. */
	snprintf(name, sizeof(name), "c/%02x/obj-%d", 3, 3);
	ASSERT_OK(b->ops->unlink(b, name));
	ASSERT(b->ops->pread(b, name, buf, 1, 0) == -ENOENT);
	ASSERT_RET(b->ops->unlink(b, name), -ENOENT);
	ASSERT_OK(b->ops->open_write(b, name, true, 0, &f));
	ASSERT_OK(b->ops->pwrite(f, "new", 3, 0));
	b->ops->close(f);
	ASSERT(b->ops->pread(b, name, buf, sizeof(buf), 0) == 3 && memcmp(buf, "new", 3) == 0);

	dedup_backend_free(b);
	ASSERT(nftw(dir, rm, 16, FTW_DEPTH | FTW_PHYS) == 0);
	return 0;
}
