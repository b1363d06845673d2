/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ops-dir.c — the FUSE handlers of the namespace: nodes created, linked,
 * renamed, removed and listed.  Each change of the namespace runs in one
 * catalog transaction, so a crash leaves either the old or the new
 * namespace, never a mix (see ops.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macros.h"
#include "fs/ops-internal.h"

#define FS_LINK_MAX 65000
#define FS_READDIR_BATCH 64

/*
 * Creates a node named name in parent, in one transaction.  For regular files
 * the staging file is created too and its descriptor returned in *ret_fd.
 * If the name exists, returns -EEXIST with its inode number in *ret_ino.
 */
int fs_node_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		   const char *link_target, uint64_t *ret_ino, int *ret_fd) {
	Fs *fs = fs_of(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	_cleanup_close_ int fd = -1;
	CatalogInode dir, ci;
	uint64_t ino;
	int r;

	r = check_name(name);
	if (r < 0)
		return r;
	r = catalog_begin(fs->catalog);
	if (r < 0)
		return r;
	r = get_dir(fs, parent, &dir);
	if (r < 0)
		goto fail;
	r = catalog_dirent_lookup(fs->catalog, parent, name, ret_ino);
	if (r >= 0) {
		r = -EEXIST;
		goto fail;
	}
	if (r != -ENOENT)
		goto fail;
	if (S_ISDIR(mode) && dir.nlink >= FS_LINK_MAX) {
		r = -EMLINK;
		goto fail;
	}

	int64_t t = now_ns();
	ci = (CatalogInode) {
		.parent = parent,
		.mode = mode,
		.uid = ctx->uid,
		/* BSD group semantics in set-group-ID directories, as every Linux filesystem does. */
		.gid = (dir.mode & S_ISGID) ? dir.gid : ctx->gid,
		.nlink = S_ISDIR(mode) ? 2 : 1,
		.rdev = rdev,
		.size = link_target ? strlen(link_target) : 0,
		.atime_ns = t,
		.mtime_ns = t,
		.ctime_ns = t,
	};
	if (S_ISDIR(mode) && (dir.mode & S_ISGID))
		ci.mode |= S_ISGID;
	if (S_ISREG(mode)) {
		char dir_name[CATALOG_NAME_MAX + 1];
		uint64_t grandparent;
		bool named = parent != CATALOG_ROOT_INO &&
			     catalog_dirent_find(fs->catalog, parent, &grandparent, dir_name, sizeof(dir_name)) >= 0;
		ci.file_class = tier_classify(fs->config, named ? dir_name : NULL, name);
		/*
		 * A new file starts on the hot tier if it has room, else on the
		 * first lower tier that has (spill.c); with no room anywhere it
		 * is created on the hot tier all the same, and its first write
		 * fails with ENOSPC.
		 */
		ci.tier = fs_spill_pick_new(fs);
	}

	r = catalog_inode_create(fs->catalog, &ci, link_target, &ino);
	if (r < 0)
		goto fail;
	if (S_ISREG(mode)) {
		fd = fs_staging_create(fs, ci.tier, ino);
		if (fd < 0) {
			r = fd;
			goto fail;
		}
	}
	r = catalog_dirent_add(fs->catalog, parent, name, ino);
	if (r < 0)
		goto fail_unlink;
	touch_dir(&dir, t);
	if (S_ISDIR(mode))
		dir.nlink++;
	r = catalog_inode_update(fs->catalog, &dir);
	if (r < 0)
		goto fail_unlink;
	r = catalog_commit(fs->catalog);
	if (r < 0)
		goto fail_unlink_committed;

	*ret_ino = ino;
	if (ret_fd)
		*ret_fd = TAKE_FD(fd);
	return 0;

fail_unlink:
	catalog_rollback(fs->catalog);
fail_unlink_committed:
	if (S_ISREG(mode))
		(void) fs_staging_unlink(fs, ci.tier, ino);
	return r;
fail:
	catalog_rollback(fs->catalog);
	return r;
}

void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev) {
	uint64_t ino;
	int fd = -1;

	if (!S_ISREG(mode) && !S_ISFIFO(mode) && !S_ISSOCK(mode) && !S_ISCHR(mode) && !S_ISBLK(mode))
		return (void) fuse_reply_err(req, EINVAL);
	int r = fs_node_create(req, parent, name, mode, rdev, NULL, &ino, S_ISREG(mode) ? &fd : NULL);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	if (fd >= 0)
		close(fd);
	fs_reply_entry(req, ino);
}

void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
	uint64_t ino;
	int r = fs_node_create(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL, &ino, NULL);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	fs_reply_entry(req, ino);
}

void fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name) {
	uint64_t ino;
	if (strlen(link) > CATALOG_SYMLINK_MAX)
		return (void) fuse_reply_err(req, ENAMETOOLONG);
	int r = fs_node_create(req, parent, name, S_IFLNK | 0777, 0, link, &ino, NULL);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	fs_reply_entry(req, ino);
}

void fs_op_readlink(fuse_req_t req, fuse_ino_t ino) {
	char target[CATALOG_SYMLINK_MAX + 1];
	int r = catalog_symlink_get(fs_of(req)->catalog, ino, target, sizeof(target));
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	fuse_reply_readlink(req, target);
}

void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
	Fs *fs = fs_of(req);
	CatalogInode dir, ci;
	uint64_t ino;
	int r;

	r = catalog_begin(fs->catalog);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	r = get_dir(fs, parent, &dir);
	if (r >= 0)
		r = catalog_dirent_lookup(fs->catalog, parent, name, &ino);
	if (r >= 0)
		r = catalog_inode_get(fs->catalog, ino, &ci);
	if (r >= 0 && S_ISDIR(ci.mode))
		r = -EISDIR;
	if (r >= 0)
		r = catalog_dirent_remove(fs->catalog, parent, name);
	if (r < 0)
		goto fail;

	int64_t t = now_ns();
	ci.nlink--;
	ci.ctime_ns = t;
	touch_dir(&dir, t);
	r = catalog_inode_update(fs->catalog, &ci);
	if (r >= 0)
		r = catalog_inode_update(fs->catalog, &dir);
	if (r < 0)
		goto fail;
	r = catalog_commit(fs->catalog);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	if (ci.nlink == 0)
		(void) fs_inode_purge_if_unused(fs, ino);
	return (void) fuse_reply_err(req, 0);

fail:
	catalog_rollback(fs->catalog);
	fuse_reply_err(req, -r);
}

void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) {
	Fs *fs = fs_of(req);
	CatalogInode dir, ci;
	uint64_t ino;
	int r;

	r = catalog_begin(fs->catalog);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	r = get_dir(fs, parent, &dir);
	if (r >= 0)
		r = catalog_dirent_lookup(fs->catalog, parent, name, &ino);
	if (r >= 0)
		r = catalog_inode_get(fs->catalog, ino, &ci);
	if (r >= 0 && !S_ISDIR(ci.mode))
		r = -ENOTDIR;
	if (r >= 0) {
		r = catalog_dir_is_empty(fs->catalog, ino);
		if (r == 0)
			r = -ENOTEMPTY;
	}
	if (r >= 0)
		r = catalog_dirent_remove(fs->catalog, parent, name);
	if (r < 0)
		goto fail;

	int64_t t = now_ns();
	ci.nlink = 0;
	ci.ctime_ns = t;
	touch_dir(&dir, t);
	dir.nlink--;
	r = catalog_inode_update(fs->catalog, &ci);
	if (r >= 0)
		r = catalog_inode_update(fs->catalog, &dir);
	if (r < 0)
		goto fail;
	r = catalog_commit(fs->catalog);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	(void) fs_inode_purge_if_unused(fs, ino);
	return (void) fuse_reply_err(req, 0);

fail:
	catalog_rollback(fs->catalog);
	fuse_reply_err(req, -r);
}

/* A directory moving from one parent to another takes its ".." link along. */
static void move_dir_link(CatalogInode *moved, CatalogInode *from, CatalogInode *to) {
	if (!S_ISDIR(moved->mode) || from == to)
		return;
	moved->parent = to->ino;
	from->nlink--;
	to->nlink++;
}

void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
		      unsigned int flags) {
	Fs *fs = fs_of(req);
	CatalogInode pdir, npdir_own, src, dst, *npdir;
	uint64_t src_ino, dst_ino = 0;
	bool have_dst;
	int r;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE) ||
	    (flags & (RENAME_NOREPLACE | RENAME_EXCHANGE)) == (RENAME_NOREPLACE | RENAME_EXCHANGE))
		return (void) fuse_reply_err(req, EINVAL);
	r = check_name(newname);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);

	r = catalog_begin(fs->catalog);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	r = get_dir(fs, parent, &pdir);
	if (r < 0)
		goto fail;
	if (newparent == parent)
		npdir = &pdir;
	else {
		npdir = &npdir_own;
		r = get_dir(fs, newparent, npdir);
		if (r < 0)
			goto fail;
	}
	r = catalog_dirent_lookup(fs->catalog, parent, name, &src_ino);
	if (r >= 0)
		r = catalog_inode_get(fs->catalog, src_ino, &src);
	if (r < 0)
		goto fail;
	r = catalog_dirent_lookup(fs->catalog, newparent, newname, &dst_ino);
	if (r < 0 && r != -ENOENT)
		goto fail;
	have_dst = r >= 0;
	if (have_dst) {
		r = catalog_inode_get(fs->catalog, dst_ino, &dst);
		if (r < 0)
			goto fail;
	}

	int64_t t = now_ns();
	if (flags & RENAME_EXCHANGE) {
		if (!have_dst) {
			r = -ENOENT;
			goto fail;
		}
		r = catalog_dirent_retarget(fs->catalog, parent, name, dst_ino);
		if (r >= 0)
			r = catalog_dirent_retarget(fs->catalog, newparent, newname, src_ino);
		if (r < 0)
			goto fail;
		move_dir_link(&src, &pdir, npdir);
		move_dir_link(&dst, npdir, &pdir);
		dst.ctime_ns = t;
		r = catalog_inode_update(fs->catalog, &dst);
		if (r < 0)
			goto fail;
	} else {
		if (have_dst && (flags & RENAME_NOREPLACE)) {
			r = -EEXIST;
			goto fail;
		}
		if (have_dst && dst_ino == src_ino) {
			/* Both names are links to one file: POSIX says do nothing. */
			catalog_rollback(fs->catalog);
			return (void) fuse_reply_err(req, 0);
		}
		if (have_dst) {
			if (S_ISDIR(dst.mode)) {
				if (!S_ISDIR(src.mode)) {
					r = -EISDIR;
					goto fail;
				}
				r = catalog_dir_is_empty(fs->catalog, dst_ino);
				if (r == 0)
					r = -ENOTEMPTY;
				if (r < 0)
					goto fail;
				dst.nlink = 0;
				npdir->nlink--;
			} else {
				if (S_ISDIR(src.mode)) {
					r = -ENOTDIR;
					goto fail;
				}
				dst.nlink--;
			}
			dst.ctime_ns = t;
			r = catalog_inode_update(fs->catalog, &dst);
			if (r >= 0)
				r = catalog_dirent_remove(fs->catalog, parent, name);
			if (r >= 0)
				r = catalog_dirent_retarget(fs->catalog, newparent, newname, src_ino);
		} else {
			r = catalog_dirent_remove(fs->catalog, parent, name);
			if (r >= 0)
				r = catalog_dirent_add(fs->catalog, newparent, newname, src_ino);
		}
		if (r < 0)
			goto fail;
		move_dir_link(&src, &pdir, npdir);
	}

	src.ctime_ns = t;
	touch_dir(&pdir, t);
	touch_dir(npdir, t);
	r = catalog_inode_update(fs->catalog, &src);
	if (r >= 0)
		r = catalog_inode_update(fs->catalog, &pdir);
	if (r >= 0 && npdir != &pdir)
		r = catalog_inode_update(fs->catalog, npdir);
	if (r < 0)
		goto fail;
	r = catalog_commit(fs->catalog);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	if (have_dst && !(flags & RENAME_EXCHANGE) && dst.nlink == 0)
		(void) fs_inode_purge_if_unused(fs, dst_ino);
	return (void) fuse_reply_err(req, 0);

fail:
	catalog_rollback(fs->catalog);
	fuse_reply_err(req, -r);
}

void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname) {
	Fs *fs = fs_of(req);
	CatalogInode dir, ci;
	uint64_t existing;
	int r;

	r = check_name(newname);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	r = catalog_begin(fs->catalog);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	r = get_dir(fs, newparent, &dir);
	if (r >= 0)
		r = catalog_inode_get(fs->catalog, ino, &ci);
	if (r < 0)
		goto fail;
	if (S_ISDIR(ci.mode)) {
		r = -EPERM;
		goto fail;
	}
	if (ci.nlink == 0) {
		r = -ENOENT;
		goto fail;
	}
	if (ci.nlink >= FS_LINK_MAX) {
		r = -EMLINK;
		goto fail;
	}
	r = catalog_dirent_lookup(fs->catalog, newparent, newname, &existing);
	if (r >= 0) {
		r = -EEXIST;
		goto fail;
	}
	r = catalog_dirent_add(fs->catalog, newparent, newname, ino);
	if (r < 0)
		goto fail;
	int64_t t = now_ns();
	ci.nlink++;
	ci.ctime_ns = t;
	touch_dir(&dir, t);
	r = catalog_inode_update(fs->catalog, &ci);
	if (r >= 0)
		r = catalog_inode_update(fs->catalog, &dir);
	if (r < 0)
		goto fail;
	r = catalog_commit(fs->catalog);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	return fs_reply_entry(req, ino);

fail:
	catalog_rollback(fs->catalog);
	fuse_reply_err(req, -r);
}

/* Attaches a freshly opened handle; takes over fd if the inode has none yet. */
void fs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
	Fs *fs = fs_of(req);
	fs_throttle_disk_begin(&fs->throttle);
	int r = catalog_sync(fs->catalog);
	fs_throttle_disk_end(&fs->throttle);
	fuse_reply_err(req, -r);
}

void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
	Fs *fs = fs_of(req);
	_cleanup_free_ char *buf = NULL;
	_cleanup_free_ CatalogDirent *batch = NULL;
	CatalogInode dir;
	struct stat st = {};
	size_t pos = 0;
	int r;

	/* Offsets: 1 after ".", 2 after "..", cookie + 2 after an entry (cookies start at 1). */
	if (off < 0)
		return (void) fuse_reply_err(req, EINVAL);
	r = catalog_inode_get(fs->catalog, ino, &dir);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	buf = malloc(size);
	batch = calloc(FS_READDIR_BATCH, sizeof(CatalogDirent));
	if (!buf || !batch)
		return (void) fuse_reply_err(req, ENOMEM);

	if (off < 1) {
		st.st_ino = ino;
		st.st_mode = S_IFDIR;
		size_t n = fuse_add_direntry(req, buf + pos, size - pos, ".", &st, 1);
		if (n > size - pos)
			goto reply;
		pos += n;
		off = 1;
	}
	if (off < 2) {
		st.st_ino = dir.parent;
		st.st_mode = S_IFDIR;
		size_t n = fuse_add_direntry(req, buf + pos, size - pos, "..", &st, 2);
		if (n > size - pos)
			goto reply;
		pos += n;
		off = 2;
	}
	for (uint64_t after = (uint64_t) off - 2;;) {
		r = catalog_dir_read(fs->catalog, ino, after, batch, FS_READDIR_BATCH);
		if (r < 0) {
			if (pos > 0)
				break; /* hand out what we have; the error repeats on the next call */
			return (void) fuse_reply_err(req, -r);
		}
		if (r == 0)
			break;
		for (int k = 0; k < r; k++) {
			st.st_ino = batch[k].ino;
			st.st_mode = batch[k].mode & S_IFMT;
			size_t n = fuse_add_direntry(req, buf + pos, size - pos, batch[k].name, &st,
						     (off_t) batch[k].cookie + 2);
			if (n > size - pos)
				goto reply;
			pos += n;
			after = batch[k].cookie;
		}
		if (r < FS_READDIR_BATCH)
			break;
	}
reply:
	fuse_reply_buf(req, buf, pos);
}
