/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * A growable array of strings the array owns: what a directory listing
 * (dedup_backend_list()'s callback) or a set of names is gathered into.
 * Header only, as macros.h: dedup/ may include common/ but links no
 * library of it (tests/layering).
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"

typedef struct StrVec {
	char **names;
	size_t n, cap;
} StrVec;

/* Appends a copy of name.  Returns 0 or -ENOMEM. */
static inline int strvec_push(StrVec *v, const char *name) {
	if (ARRAY_RESERVE_ONE(v->names, v->cap, v->n, 16) < 0)
		return -ENOMEM;
	v->names[v->n] = strdup(name);
	if (!v->names[v->n])
		return -ENOMEM;
	v->n++;
	return 0;
}

/* strvec_push() as a listing callback: userdata is the StrVec. */
static inline int strvec_collect(const char *name, void *userdata) {
	return strvec_push(userdata, name);
}

/* Frees every name and the array; v is empty after. */
static inline void strvec_done(StrVec *v) {
	for (size_t i = 0; i < v->n; i++)
		free(v->names[i]);
	free(v->names);
	*v = (StrVec) {};
}
