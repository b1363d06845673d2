/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The storage a chunk store writes its containers to: a flat namespace of
 * objects named by relative paths ("c/3f/000000000000003f.ftc"), written by
 * appending and read at any offset.  dedup/ defines the interface; tier/
 * implements it (tier/backend-dir.c over a local directory, tier/backend-nfs.c
 * over NFSv3 through libnfs), so dedup/ never sees a path, a mount or a policy.
 *
 * Contract every implementation keeps:
 *  1. Names are 1..DEDUP_BACKEND_NAME_MAX bytes of [0-9a-z./_-], made of
 *     '/'-separated components that are neither empty, "." nor "..".  The
 *     store only uses names it built itself; an implementation still refuses
 *     others with -EINVAL.
 *  2. pread() and the object calls are thread-safe and may run concurrently
 *     with each other on one backend.  A DedupBackendFile is used by one
 *     thread at a time, except sync(), which may run concurrently with
 *     pwrite() on the same file.
 *  3. Durability: after open_write() with create returns, the object's name
 *     (and any directory made for it) survives a crash; after sync() returns,
 *     every byte written to the file before the call and its length do.
 *     unlink() need not be durable: an object that reappears after a crash is
 *     garbage the store's collector removes.  After rename() returns, the
 *     object is durably at its new name only.
 *  4. Errors are negative errno values: -ENOENT (no such object), -ENOSPC,
 *     -EIO, -EINVAL (bad name), -EUCLEAN (an object shorter than the caller
 *     says it must be), -ENOMEM.  A backend over a network returns -EIO when
 *     its server does not answer within the backend's configured bound; it
 *     never blocks without limit.
 *
 * The chunk store calls neither rename() nor statfs(); tier/ does (moving
 * objects between tiers, placement by free space).
 */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#define DEDUP_BACKEND_NAME_MAX 255

typedef struct DedupBackend DedupBackend;
/* An object open for writing; owned by whoever opened it, released by close(). */
typedef struct DedupBackendFile DedupBackendFile;

/* Space of the storage under a backend, in bytes. */
typedef struct DedupBackendStatfs {
	uint64_t total;
	uint64_t free;  /* free for the superuser */
	uint64_t avail; /* free for the backend's user */
} DedupBackendStatfs;

typedef struct DedupBackendOps {
	/*
	 * Opens `name` for writing.  With create, a missing object (and its
	 * parent directories) is made, durably (contract 3).  The object is then
	 * cut to exactly `size` bytes: bytes past it are discarded (they belong
	 * to writes that were never committed); an object shorter than `size` is
	 * -EUCLEAN and is left alone.  Without create, a missing object is -ENOENT.
	 */
	int (*open_write)(DedupBackend *b, const char *name, bool create, uint64_t size, DedupBackendFile **ret);
	/* Writes all of buf[0, len) at offset; a short write is an error (-EIO/-ENOSPC). */
	int (*pwrite)(DedupBackendFile *f, const void *buf, size_t len, uint64_t offset);
	/* Cuts the object to size (used to take back a failed append). */
	int (*truncate)(DedupBackendFile *f, uint64_t size);
	/* Makes every byte written so far and the length durable. */
	int (*sync)(DedupBackendFile *f);
	/* Releases the file; writes not synced may or may not survive.  Accepts NULL. */
	void (*close)(DedupBackendFile *f);

	/*
	 * Reads up to len bytes at offset into buf.  Returns the count, short
	 * only at the end of the object, or a negative errno (-ENOENT if the
	 * object does not exist).
	 */
	ssize_t (*pread)(DedupBackend *b, const char *name, void *buf, size_t len, uint64_t offset);
	/* The object's current length. */
	int (*size)(DedupBackend *b, const char *name, uint64_t *ret);
	/* Removes the object; -ENOENT if it does not exist. */
	int (*unlink)(DedupBackend *b, const char *name);
	/*
	 * Calls cb with the name of every object under directory `prefix`
	 * ("c"), recursively, in no particular order; stops at and returns the
	 * first negative return of cb.  A missing prefix directory lists nothing.
	 * cb may not call into the backend.
	 */
	int (*list)(DedupBackend *b, const char *prefix, int (*cb)(const char *name, void *userdata),
		    void *userdata);
	/* Frees the backend; every file must be closed.  Accepts NULL. */
	void (*free)(DedupBackend *b);

	/*
	 * Renames object `from` to `to`, replacing an existing `to`, making the
	 * parent directories of `to` as open_write() does; durable on return
	 * (contract 3).  -ENOENT if `from` does not exist.  No file may be open
	 * for writing on either name.
	 */
	int (*rename)(DedupBackend *b, const char *from, const char *to);
	/* The space of the storage holding the objects. */
	int (*statfs)(DedupBackend *b, DedupBackendStatfs *ret);
} DedupBackendOps;

/* Implementations embed this as their first member. */
struct DedupBackend {
	const DedupBackendOps *ops;
};

static inline int dedup_backend_open_write(DedupBackend *b, const char *name, bool create, uint64_t size,
					   DedupBackendFile **ret) {
	return b->ops->open_write(b, name, create, size, ret);
}

static inline ssize_t dedup_backend_pread(DedupBackend *b, const char *name, void *buf, size_t len,
					  uint64_t offset) {
	return b->ops->pread(b, name, buf, len, offset);
}

static inline int dedup_backend_size(DedupBackend *b, const char *name, uint64_t *ret) {
	return b->ops->size(b, name, ret);
}

static inline int dedup_backend_unlink(DedupBackend *b, const char *name) {
	return b->ops->unlink(b, name);
}

static inline int dedup_backend_list(DedupBackend *b, const char *prefix,
				     int (*cb)(const char *name, void *userdata), void *userdata) {
	return b->ops->list(b, prefix, cb, userdata);
}

static inline int dedup_backend_rename(DedupBackend *b, const char *from, const char *to) {
	return b->ops->rename(b, from, to);
}

static inline int dedup_backend_statfs(DedupBackend *b, DedupBackendStatfs *ret) {
	return b->ops->statfs(b, ret);
}

/* NULL-tolerant; returns NULL. */
static inline DedupBackend *dedup_backend_free(DedupBackend *b) {
	if (b)
		b->ops->free(b);
	return NULL;
}

/*
 * DedupBackendFile calls go through the backend that opened the file, so a
 * file handle needs no back pointer of its own.
 */
static inline int dedup_backend_file_pwrite(DedupBackend *b, DedupBackendFile *f, const void *buf, size_t len,
					    uint64_t offset) {
	return b->ops->pwrite(f, buf, len, offset);
}

static inline int dedup_backend_file_truncate(DedupBackend *b, DedupBackendFile *f, uint64_t size) {
	return b->ops->truncate(f, size);
}

static inline int dedup_backend_file_sync(DedupBackend *b, DedupBackendFile *f) {
	return b->ops->sync(f);
}

static inline void dedup_backend_file_close(DedupBackend *b, DedupBackendFile *f) {
	if (f)
		b->ops->close(f);
}

/* Reads exactly len bytes at offset: a short read (object too short) is -EUCLEAN. */
static inline int dedup_backend_pread_full(DedupBackend *b, const char *name, void *buf, size_t len,
					   uint64_t offset) {
	ssize_t n = dedup_backend_pread(b, name, buf, len, offset);
	if (n < 0)
		return (int) n;
	return (size_t) n == len ? 0 : -EUCLEAN;
}

/* Whether name keeps contract 1; for implementations, which must refuse others. */
static inline bool dedup_backend_name_is_valid(const char *name) {
	size_t len = strnlen(name, DEDUP_BACKEND_NAME_MAX + 1);
	if (len == 0 || len > DEDUP_BACKEND_NAME_MAX)
		return false;
	const char *component = name;
	for (size_t i = 0; i <= len; i++) {
		char c = name[i];
		if (c == '/' || c == '\0') {
			size_t n = (size_t) (name + i - component);
			if (n == 0 || (n == 1 && component[0] == '.') ||
			    (n == 2 && component[0] == '.' && component[1] == '.'))
				return false;
			component = name + i + 1;
			continue;
		}
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}
