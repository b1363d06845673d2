/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once
/* private to fs/ops*.c: do not include elsewhere */

#include <errno.h>
#include <fuse_lowlevel.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fs/fs-internal.h"

static inline Fs *fs_of(fuse_req_t req) {
	return fuse_req_userdata(req);
}

/*
 * The coarse clock, as the kernel stamps files with: times we set in the
 * catalog and times the hot tier sets on staging files must compare right.
 */
static inline int64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int check_name(const char *name) {
	return strlen(name) > CATALOG_NAME_MAX ? -ENAMETOOLONG : 0;
}

/* How often getattr looks again for a raw file's staging file that a seal or a spill switched under it. */
#define FS_STAT_RETRIES 3

static inline void touch_dir(CatalogInode *dir, int64_t t) {
	dir->mtime_ns = t;
	dir->ctime_ns = t;
}

static inline int get_dir(Fs *fs, uint64_t ino, CatalogInode *ret) {
	int r = catalog_inode_get(fs->catalog, ino, ret);
	if (r < 0)
		return r;
	if (!S_ISDIR(ret->mode))
		return -ENOTDIR;
	if (ret->nlink == 0)
		return -ENOENT; /* removed while we looked */
	return 0;
}

/* ops.c: replies with an entry for ino and takes the kernel reference the reply creates. */
void fs_reply_entry(fuse_req_t req, uint64_t ino);

/*
 * ops-dir.c: creates a node named name in parent, in one transaction.  For
 * regular files the staging file is created too and its descriptor returned
 * in *ret_fd.  If the name exists, returns -EEXIST with its inode number in
 * *ret_ino.
 */
int fs_node_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		   const char *link_target, uint64_t *ret_ino, int *ret_fd);

/* The handlers of ops-dir.c and ops-xattr.c, for the table in ops.c. */
void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void fs_op_readlink(fuse_req_t req, fuse_ino_t ino);
void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
		  unsigned int flags);
void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void fs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size, int flags);
void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
