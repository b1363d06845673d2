/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backend-prefix.c — one host's view of a shared tier: the objects below
 * "h/NAME" of the tier's backend, as a backend of their own
 * (tier/shared.h).  The chunk store over it names its containers and
 * description as on a tier of its own, lists and collects only its own
 * objects, and so can never touch another host's (docs/SHARED.md,
 * invariant 1).
 */
#include <stdio.h>
#include <stdlib.h>

#include "tier/shared.h"

typedef struct PrefixBackend {
	DedupBackend base;
	DedupBackendOps ops;    /* inner's, with the calls that take a name replaced */
	DedupBackend *inner;
	char prefix[DEDUP_BACKEND_NAME_MAX + 1];
	size_t prefix_len;
} PrefixBackend;

static PrefixBackend *prefix_backend(DedupBackend *b) {
	return (PrefixBackend *) b;
}

/* name below the prefix, or -EINVAL: a name that is not valid, or too long once prefixed. */
static int full_name(PrefixBackend *p, const char *name, char out[static DEDUP_BACKEND_NAME_MAX + 1]) {
	if (!dedup_backend_name_is_valid(name))
		return -EINVAL;
	int n = snprintf(out, DEDUP_BACKEND_NAME_MAX + 1, "%s/%s", p->prefix, name);
	return n > 0 && n <= DEDUP_BACKEND_NAME_MAX ? 0 : -EINVAL;
}

static int prefix_open_write(DedupBackend *b, const char *name, bool create, uint64_t size, DedupBackendFile **ret) {
	char full[DEDUP_BACKEND_NAME_MAX + 1];
	int r = full_name(prefix_backend(b), name, full);
	return r < 0 ? r : dedup_backend_open_write(prefix_backend(b)->inner, full, create, size, ret);
}

static ssize_t prefix_pread(DedupBackend *b, const char *name, void *buf, size_t len, uint64_t offset) {
	char full[DEDUP_BACKEND_NAME_MAX + 1];
	int r = full_name(prefix_backend(b), name, full);
	return r < 0 ? r : dedup_backend_pread(prefix_backend(b)->inner, full, buf, len, offset);
}

static int prefix_size(DedupBackend *b, const char *name, uint64_t *ret) {
	char full[DEDUP_BACKEND_NAME_MAX + 1];
	int r = full_name(prefix_backend(b), name, full);
	return r < 0 ? r : dedup_backend_size(prefix_backend(b)->inner, full, ret);
}

static int prefix_unlink(DedupBackend *b, const char *name) {
	char full[DEDUP_BACKEND_NAME_MAX + 1];
	int r = full_name(prefix_backend(b), name, full);
	return r < 0 ? r : dedup_backend_unlink(prefix_backend(b)->inner, full);
}

typedef struct ListContext {
	size_t strip;
	int (*cb)(const char *name, void *userdata);
	void *userdata;
} ListContext;

static int list_one(const char *name, void *userdata) {
	ListContext *c = userdata;
	return c->cb(name + c->strip, c->userdata);
}

static int prefix_list(DedupBackend *b, const char *prefix, int (*cb)(const char *name, void *userdata),
		       void *userdata) {
	PrefixBackend *p = prefix_backend(b);
	char full[DEDUP_BACKEND_NAME_MAX + 1];
	int r = full_name(p, prefix, full);
	if (r < 0)
		return r;
	ListContext c = { .strip = p->prefix_len + 1, .cb = cb, .userdata = userdata };
	return dedup_backend_list(p->inner, full, list_one, &c);
}

static int prefix_rename(DedupBackend *b, const char *from, const char *to) {
	char full_from[DEDUP_BACKEND_NAME_MAX + 1], full_to[DEDUP_BACKEND_NAME_MAX + 1];
	int r = full_name(prefix_backend(b), from, full_from);
	if (r >= 0)
		r = full_name(prefix_backend(b), to, full_to);
	return r < 0 ? r : dedup_backend_rename(prefix_backend(b)->inner, full_from, full_to);
}

static int prefix_statfs(DedupBackend *b, DedupBackendStatfs *ret) {
	return dedup_backend_statfs(prefix_backend(b)->inner, ret);
}

static void prefix_free(DedupBackend *b) {
	PrefixBackend *p = prefix_backend(b);
	dedup_backend_free(p->inner);
	free(p);
}

int tier_backend_prefix_new(DedupBackend *inner, const char *prefix, DedupBackend **ret) {
	if (!dedup_backend_name_is_valid(prefix) || strlen(prefix) > DEDUP_BACKEND_NAME_MAX / 2) {
		dedup_backend_free(inner);
		return -EINVAL;
	}
	PrefixBackend *p = calloc(1, sizeof(*p));
	if (!p) {
		dedup_backend_free(inner);
		return -ENOMEM;
	}
	/* The file calls are the inner backend's own: a file opened here is inner's file. */
	p->ops = *inner->ops;
	p->ops.open_write = prefix_open_write;
	p->ops.pread = prefix_pread;
	p->ops.size = prefix_size;
	p->ops.unlink = prefix_unlink;
	p->ops.list = prefix_list;
	p->ops.rename = prefix_rename;
	p->ops.statfs = prefix_statfs;
	p->ops.free = prefix_free;
	p->base.ops = &p->ops;
	p->inner = inner;
	snprintf(p->prefix, sizeof(p->prefix), "%s", prefix);
	p->prefix_len = strlen(prefix);
	*ret = &p->base;
	return 0;
}
