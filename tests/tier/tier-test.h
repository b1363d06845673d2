/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Helpers for the tier/ tests: the dedup tests' assertions, a set of listed
 * names to compare, and recursive removal of a scratch directory.
 */

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "tests/dedup/dedup-test.h"
#include "tier/backend-dir.h"
#include "tier/backend-nfs.h"

typedef struct NameSet {
	char *names[64];
	size_t n;
} NameSet;

static inline void name_set_clear(NameSet *s) {
	for (size_t i = 0; i < s->n; i++)
		free(s->names[i]);
	s->n = 0;
}

/* A list() callback collecting into a NameSet (userdata; NULL: collects nothing). */
static inline int list_collect(const char *name, void *userdata) {
	NameSet *s = userdata;
	if (!s)
		return 0;
	ASSERT(s->n < ELEMENTSOF(s->names));
	s->names[s->n] = strdup(name);
	ASSERT(s->names[s->n]);
	s->n++;
	return 0;
}

/* A list() callback that takes one name and stops the listing. */
static inline int list_stop(const char *name, void *userdata) {
	list_collect(name, userdata);
	return -ECANCELED;
}

/* The set must hold exactly the names of want (NULL-terminated), each once; then it is cleared. */
static inline void name_set_expect(NameSet *s, const char *const *want) {
	size_t n = 0;
	for (; want[n]; n++) {
		size_t hits = 0;
		for (size_t i = 0; i < s->n; i++)
			hits += strcmp(s->names[i], want[n]) == 0;
		if (hits != 1) {
			fprintf(stderr, "listing has %s %zu times\n", want[n], hits);
			abort();
		}
	}
	ASSERT(s->n == n);
	name_set_clear(s);
}

static inline int rm_rf_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
	return remove(path);
}

static inline void rm_rf(const char *dir) {
	ASSERT(nftw(dir, rm_rf_one, 16, FTW_DEPTH | FTW_PHYS) == 0);
}

/*
 * Asks tests/tier/test_nfs.py, which runs this test, to act on the NFS
 * server ("kill", "start", "pause", "resume"), and waits until it has.
 */
static inline void test_server(const char *cmd) {
	char line[16];
	printf("@%s\n", cmd);
	fflush(stdout);
	ASSERT(fgets(line, sizeof(line), stdin) && strcmp(line, "ok\n") == 0);
}
