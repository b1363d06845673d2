/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests of the catalog verbs behind the control socket's reports: the
 * read-only reader connection (sees commits, refuses writes, does not block
 * the writer), the walk over every regular file, and the way from a file
 * back to its directory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog/catalog.h"

static int failures;

#define CHECK(cond)                                                                         \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                                         \
		}                                                                           \
	} while (0)

static uint64_t make(Catalog *c, uint64_t parent, const char *name, uint32_t mode, uint64_t size, uint32_t class) {
	CatalogInode in = { .parent = parent, .mode = mode, .nlink = S_ISDIR(mode) ? 2 : 1, .size = size,
			    .file_class = class, .mtime_ns = 86400LL * 1000000000 * 3 + 5 };
	uint64_t ino = 0;
	CHECK(catalog_begin(c) == 0);
	CHECK(catalog_inode_create(c, &in, NULL, &ino) == 0);
	CHECK(catalog_dirent_add(c, parent, name, ino) == 0);
	CHECK(catalog_commit(c) == 0);
	return ino;
}

typedef struct Seen {
	uint64_t inos[16];
	uint64_t sizes[16];
	uint32_t classes[16];
	size_t n;
} Seen;

static int collect(const CatalogInode *ci, void *userdata) {
	Seen *s = userdata;
	if (s->n < 16) {
		s->inos[s->n] = ci->ino;
		s->sizes[s->n] = ci->size;
		s->classes[s->n] = ci->file_class;
		s->n++;
	}
	return 0;
}

static int stop_early(const CatalogInode *ci, void *userdata) {
	(*(int *) userdata)++;
	return -ECANCELED;
}

int main(void) {
	char dir[] = "/tmp/fratier-test-catalog-report-XXXXXX", path[256];
	Catalog *c = NULL, *reader = NULL;
	CatalogInode ci;
	char name[CATALOG_NAME_MAX + 1];
	uint64_t parent;

	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/catalog.db", dir);
	CHECK(catalog_open(path, 0, 0, &c) == 0);

	uint64_t d = make(c, CATALOG_ROOT_INO, "archivelog", S_IFDIR | 0755, 0, 0);
	uint64_t f1 = make(c, d, "1_1.arc", S_IFREG | 0644, 1000, 1);
	uint64_t f2 = make(c, CATALOG_ROOT_INO, "x.bkp", S_IFREG | 0600, 2000, 2);
	uint64_t gone = make(c, CATALOG_ROOT_INO, "gone", S_IFREG | 0600, 5, 0);
	make(c, d, "sub", S_IFDIR | 0755, 0, 0);
	/* Unlinked while open: no longer a file of the namespace. */
	CHECK(catalog_begin(c) == 0);
	CHECK(catalog_dirent_remove(c, CATALOG_ROOT_INO, "gone") == 0);
	CHECK(catalog_inode_get(c, gone, &ci) == 0);
	ci.nlink = 0;
	CHECK(catalog_inode_update(c, &ci) == 0);
	CHECK(catalog_commit(c) == 0);

	CHECK(catalog_open_reader(c, &reader) == 0);

	/* Only linked regular files, in inode order, with their fields. */
	Seen seen = {};
	CHECK(catalog_files_foreach(reader, collect, &seen) == 0);
	CHECK(seen.n == 2);
	CHECK(seen.inos[0] == f1 && seen.sizes[0] == 1000 && seen.classes[0] == 1);
	CHECK(seen.inos[1] == f2 && seen.sizes[1] == 2000 && seen.classes[1] == 2);
	int calls = 0;
	CHECK(catalog_files_foreach(reader, stop_early, &calls) == -ECANCELED && calls == 1);

	CatalogFileTotals t;
	CHECK(catalog_files_totals(reader, &t) == 0);
	CHECK(t.files[CATALOG_FILE_RAW] == 2 && t.bytes[CATALOG_FILE_RAW] == 3000);
	CHECK(t.files[CATALOG_FILE_SEALED] == 0 && t.bytes[CATALOG_FILE_SEALED] == 0);
	CHECK(catalog_inode_get(c, f2, &ci) == 0);
	ci.state = CATALOG_FILE_SEALED;
	CHECK(catalog_inode_update(c, &ci) == 0);
	CHECK(catalog_files_totals(reader, &t) == 0);
	CHECK(t.files[CATALOG_FILE_RAW] == 1 && t.bytes[CATALOG_FILE_RAW] == 1000);
	CHECK(t.files[CATALOG_FILE_SEALED] == 1 && t.bytes[CATALOG_FILE_SEALED] == 2000);

	/* The way up: file -> directory entry -> directory's parent -> root. */
	CHECK(catalog_dirent_find(reader, f1, &parent, name, sizeof(name)) == 0);
	CHECK(parent == d && strcmp(name, "1_1.arc") == 0);
	CHECK(catalog_dirent_find(reader, d, &parent, name, sizeof(name)) == 0);
	CHECK(parent == CATALOG_ROOT_INO && strcmp(name, "archivelog") == 0);
	CHECK(catalog_dirent_find(reader, f1, &parent, name, 4) == -ERANGE);
	CHECK(catalog_dirent_find(reader, gone, &parent, name, sizeof(name)) == -ENOENT);
	CHECK(catalog_dirent_find(reader, CATALOG_ROOT_INO, &parent, name, sizeof(name)) == -ENOENT);

	/* The reader sees later commits of the writer, and cannot write itself. */
	uint64_t f3 = make(c, d, "2_1.arc", S_IFREG | 0644, 3000, 1);
	CHECK(catalog_inode_get(reader, f3, &ci) == 0 && ci.size == 3000);
	ci.size = 1;
	CHECK(catalog_inode_update(reader, &ci) < 0);
	CHECK(catalog_inode_get(c, f3, &ci) == 0 && ci.size == 3000);

	/* A writer's open transaction does not stop the reader. */
	CHECK(catalog_begin(c) == 0);
	CHECK(catalog_inode_get(c, f2, &ci) == 0);
	ci.size = 7;
	CHECK(catalog_inode_update(c, &ci) == 0);
	CHECK(catalog_inode_get(reader, f2, &ci) == 0 && ci.size == 2000);
	CHECK(catalog_commit(c) == 0);
	CHECK(catalog_inode_get(reader, f2, &ci) == 0 && ci.size == 7);

	reader = catalog_close(reader);
	c = catalog_close(c);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	(void) system(cmd);
	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	else
		printf("catalog-report: all checks passed\n");
	return failures ? 1 : 0;
}
