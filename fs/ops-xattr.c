/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ops-xattr.c — the FUSE handlers of extended attributes: stored in the
 * catalog (the user., trusted. and security. namespaces, as ext4 stores),
 * plus the read-only trusted.fratier.state that tells a file's state.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "common/log.h"
#include "common/macros.h"
#include "fs/ops-internal.h"

static int xattr_check_name(const char *name) {
	/* The namespaces ext4 stores; system.* (ACLs) is not supported, as on a mount without acl. */
	static const char *const namespaces[] = { "user.", "trusted.", "security." };
	size_t len = strlen(name);

	if (len > CATALOG_XATTR_NAME_MAX)
		return -ERANGE;
	for (size_t k = 0; k < ELEMENTSOF(namespaces); k++) {
		size_t n = strlen(namespaces[k]);
		if (strncmp(name, namespaces[k], n) == 0)
			return len > n ? 0 : -EINVAL;
	}
	return -EOPNOTSUPP;
}

/* Records whether an inode has xattrs (-1 unknown, 0 none, 1 some), for the getxattr fast path. */
static void xattr_state_store(FsInode *i, int state) {
	pthread_mutex_lock(&i->lock);
	i->xattrs = state;
	pthread_mutex_unlock(&i->lock);
	/* One of them may be security.capability, which a write must clear (ops.c write_kill_privs()). */
	if (state > 0)
		atomic_store(&i->privs, -1);
}

/*
 * xattr_state_store() by inode number.  Pinned meanwhile: an inode the
 * kernel holds no reference to (the root, or one only the sealer uses) may
 * otherwise lose its entry under our feet.
 */
static void xattr_cache_set(Fs *fs, uint64_t ino, int state) {
	FsInode *i;
	if (fs_inode_pin(fs, ino, false, &i) < 0)
		return;
	xattr_state_store(i, state);
	fs_inode_unpin(fs, i);
}

/*
 * Returns 0 if ino certainly has no xattrs.  The kernel asks for
 * security.capability before every cached write, so this avoids a catalog
 * query on the write path.  A miss reads and caches inside one
 * transaction: a setxattr's commit then falls before the read or after
 * the caching, and its own caching (after its commit) comes last either
 * way; read outside one, a "none" read before that commit could be
 * cached after it and hide the new xattr.
 */
static int xattr_cache_any(Fs *fs, uint64_t ino) {
	FsInode *i = NULL;
	int state = -1;
	if (fs_inode_pin(fs, ino, false, &i) >= 0) {
		pthread_mutex_lock(&i->lock);
		state = i->xattrs;
		pthread_mutex_unlock(&i->lock);
	}
	if (state < 0) {
		int r = catalog_begin(fs->catalog);
		if (r >= 0) {
			state = catalog_xattr_any(fs->catalog, ino);
			if (state >= 0 && i)
				xattr_state_store(i, state);
			catalog_rollback(fs->catalog);
		} else
			state = r;
	}
	/* Never under the catalog's lock: the last unpin may free the inode, which writes to the catalog. */
	if (i)
		fs_inode_unpin(fs, i);
	return state;
}

static int xattr_touch(Fs *fs, uint64_t ino) {
	CatalogInode ci;
	int r = catalog_inode_get(fs->catalog, ino, &ci);
	if (r < 0)
		return r;
	ci.ctime_ns = now_ns();
	return catalog_inode_update(fs->catalog, &ci);
}

void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
			int flags) {
	Fs *fs = fs_of(req);
	int r = xattr_check_name(name);
	if (r >= 0 && (flags & ~(XATTR_CREATE | XATTR_REPLACE)))
		r = -EINVAL;
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	r = catalog_begin(fs->catalog);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	r = catalog_xattr_set(fs->catalog, ino, name, value, size, flags);
	if (r >= 0)
		r = xattr_touch(fs, ino);
	if (r < 0) {
		catalog_rollback(fs->catalog);
		return (void) fuse_reply_err(req, -r);
	}
	r = catalog_commit(fs->catalog);
	if (r >= 0)
		xattr_cache_set(fs, ino, 1);
	fuse_reply_err(req, -r);
}

/*
 * trusted.fratier.state: "raw" or "sealed", then the class, and for a raw
 * file being chunked while written "streaming BYTES" (chunked so far); for
 * operators and tests; computed, never stored, and not listed (root only:
 * trusted.*).
 */
static bool reply_virtual_xattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size) {
	Fs *fs = fs_of(req);
	char value[96];
	CatalogInode ci;
	FsInode *i;
	uint64_t chunked;

	if (strcmp(name, "trusted.fratier.state") != 0)
		return false;
	int r = catalog_inode_get(fs->catalog, ino, &ci);
	if (r < 0)
		return fuse_reply_err(req, -r), true;
	int n = snprintf(value, sizeof(value), "%s %s", ci.state == CATALOG_FILE_SEALED ? "sealed" : "raw",
			 S_ISREG(ci.mode) ? tier_class_to_string((TierFileClass) ci.file_class) : "-");
	if (ci.state == CATALOG_FILE_RAW && fs_inode_pin(fs, ino, false, &i) >= 0) {
		if (fs_stream_progress(fs, i, &chunked))
			n += snprintf(value + n, sizeof(value) - (size_t) n, " streaming %llu",
				      (unsigned long long) chunked);
		fs_inode_unpin(fs, i);
	}
	if (size == 0)
		fuse_reply_xattr(req, (size_t) n);
	else if (size < (size_t) n)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, value, (size_t) n);
	return true;
}

void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size) {
	Fs *fs = fs_of(req);
	_cleanup_free_ char *buf = NULL;
	if (reply_virtual_xattr(req, ino, name, size))
		return;
	int r = xattr_check_name(name);
	if (r >= 0)
		r = xattr_cache_any(fs, ino);
	if (r == 0)
		r = -ENODATA;
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	if (size > 0) {
		size = MIN(size, (size_t) CATALOG_XATTR_VALUE_MAX);
		buf = malloc(size);
		if (!buf)
			return (void) fuse_reply_err(req, ENOMEM);
	}
	r = catalog_xattr_get(fs->catalog, ino, name, buf, size);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	if (size == 0)
		return (void) fuse_reply_xattr(req, (size_t) r);
	fuse_reply_buf(req, buf, (size_t) r);
}

void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
	Fs *fs = fs_of(req);
	_cleanup_free_ char *buf = NULL;
	int r = xattr_cache_any(fs, ino);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	if (r == 0)
		return size == 0 ? (void) fuse_reply_xattr(req, 0) : (void) fuse_reply_buf(req, NULL, 0);
	if (size > 0) {
		size = MIN(size, (size_t) CATALOG_XATTR_LIST_MAX);
		buf = malloc(size);
		if (!buf)
			return (void) fuse_reply_err(req, ENOMEM);
	}
	if (fuse_req_ctx(req)->uid != 0) {
		/* trusted.* is invisible without privilege; filter into a full-size buffer. */
		_cleanup_free_ char *all = malloc(CATALOG_XATTR_LIST_MAX);
		if (!all)
			return (void) fuse_reply_err(req, ENOMEM);
		r = catalog_xattr_list(fs->catalog, ino, all, CATALOG_XATTR_LIST_MAX);
		if (r < 0)
			return (void) fuse_reply_err(req, -r);
		size_t kept = 0;
		for (size_t at = 0; at < (size_t) r; at += strlen(all + at) + 1)
			if (strncmp(all + at, "trusted.", 8) != 0) {
				size_t n = strlen(all + at) + 1;
				memmove(all + kept, all + at, n);
				kept += n;
			}
		if (size == 0)
			return (void) fuse_reply_xattr(req, kept);
		if (kept > size)
			return (void) fuse_reply_err(req, ERANGE);
		return (void) fuse_reply_buf(req, all, kept);
	}
	r = catalog_xattr_list(fs->catalog, ino, buf, size);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	if (size == 0)
		return (void) fuse_reply_xattr(req, (size_t) r);
	fuse_reply_buf(req, buf, (size_t) r);
}

void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name) {
	Fs *fs = fs_of(req);
	int r = xattr_check_name(name);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	r = catalog_begin(fs->catalog);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	r = catalog_xattr_remove(fs->catalog, ino, name);
	if (r >= 0)
		r = xattr_touch(fs, ino);
	if (r < 0) {
		catalog_rollback(fs->catalog);
		return (void) fuse_reply_err(req, -r);
	}
	r = catalog_commit(fs->catalog);
	if (r >= 0)
		xattr_cache_set(fs, ino, -1);
	fuse_reply_err(req, -r);
}
