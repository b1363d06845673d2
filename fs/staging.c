/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * staging.c — raw bytes of regular files on the hot tier.
 *
 * Each regular file has one staging file, staging/XX/NNNNNNNNNNNNNNNN (XX
 * the low byte of the inode number, N the number in hex), written with
 * pwrite so that overwrites, holes, O_DIRECT and fsync keep plain POSIX
 * semantics at the hot disk's speed.  For raw files the staging file is the
 * authority on size, blocks, atime and mtime.
 *
 * Invariants:
 *  1. A staging file exists only for an inode in the catalog, except
 *     between its creation and the commit that records the inode; recovery
 *     deletes such strays at mount.
 *  2. A staging directory that gained an entry is synced before the fsync of
 *     any file in it returns (fs_staging_sync_dir), so a synced file
 *     survives power loss together with its name in the catalog.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macros.h"
#include "fs/fs-internal.h"

#define STAGING_NAME_MAX sizeof("ff/0123456789abcdef")

static void staging_name(uint64_t ino, char buf[static STAGING_NAME_MAX]) {
	snprintf(buf, STAGING_NAME_MAX, "%02x/%016" PRIx64, (unsigned) (ino & 0xff), ino);
}

static void staging_dir_mark_dirty(Fs *fs, uint64_t ino) {
	unsigned b = ino & 0xff;
	pthread_mutex_lock(&fs->staging_dir_lock[b]);
	fs->staging_dir_dirty[b] = true;
	pthread_mutex_unlock(&fs->staging_dir_lock[b]);
}

int fs_staging_init(Fs *fs) {
	if (mkdirat(fs->hot_fd, FS_STAGING_DIR, 0700) < 0 && errno != EEXIST)
		return -errno;
	fs->staging_fd = openat(fs->hot_fd, FS_STAGING_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->staging_fd < 0)
		return -errno;
	for (unsigned b = 0; b < FS_STAGING_FANOUT; b++) {
		char sub[3];
		snprintf(sub, sizeof(sub), "%02x", b);
		if (mkdirat(fs->staging_fd, sub, 0700) < 0 && errno != EEXIST)
			return -errno;
	}
	/* The fan-out directories must survive power loss before any file relies on them. */
	if (fsync(fs->staging_fd) < 0 || fsync(fs->hot_fd) < 0)
		return -errno;
	for (unsigned b = 0; b < FS_STAGING_FANOUT; b++)
		pthread_mutex_init(&fs->staging_dir_lock[b], NULL);
	return 0;
}

int fs_staging_create(Fs *fs, uint64_t ino) {
	char name[STAGING_NAME_MAX];

	staging_name(ino, name);
	/*
	 * O_TRUNC, not O_EXCL: a file of this name can only be the leftover of
	 * a create whose catalog commit never happened (invariant 1).
	 */
	int fd = openat(fs->staging_fd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	staging_dir_mark_dirty(fs, ino);
	return fd;
}

int fs_staging_fd(Fs *fs, FsInode *i) {
	char name[STAGING_NAME_MAX];
	int fd;

	pthread_mutex_lock(&i->lock);
	if (i->fd >= 0) {
		fd = i->fd;
		goto out;
	}
	staging_name(i->ino, name);
	fd = openat(fs->staging_fd, name, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		/*
		 * Lost with a power failure before its first fsync: the file
		 * was never promised to be durable, so it comes back empty.
		 */
		fd = openat(fs->staging_fd, name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd >= 0)
			staging_dir_mark_dirty(fs, i->ino);
	}
	if (fd < 0) {
		fd = -errno;
		goto out;
	}
	i->fd = fd;
out:
	pthread_mutex_unlock(&i->lock);
	return fd;
}

int fs_staging_open_ro(Fs *fs, uint64_t ino) {
	char name[STAGING_NAME_MAX];

	staging_name(ino, name);
	int fd = openat(fs->staging_fd, name, O_RDONLY | O_CLOEXEC | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = openat(fs->staging_fd, name, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int fs_staging_stat(Fs *fs, uint64_t ino, struct stat *ret) {
	char name[STAGING_NAME_MAX];

	staging_name(ino, name);
	if (fstatat(fs->staging_fd, name, ret, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			return -errno;
		/* See fs_staging_fd(): a lost, never-synced file reads as empty. */
		memset(ret, 0, sizeof(*ret));
	}
	return 0;
}

int fs_staging_unlink(Fs *fs, uint64_t ino) {
	char name[STAGING_NAME_MAX];

	staging_name(ino, name);
	if (unlinkat(fs->staging_fd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int fs_staging_truncate(Fs *fs, uint64_t ino, off_t size) {
	char name[STAGING_NAME_MAX];

	staging_name(ino, name);
	_cleanup_close_ int fd = openat(fs->staging_fd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, size) < 0)
		return -errno;
	staging_dir_mark_dirty(fs, ino);
	return 0;
}

int fs_staging_set_times(Fs *fs, uint64_t ino, const struct timespec times[2]) {
	char name[STAGING_NAME_MAX];

	staging_name(ino, name);
	if (utimensat(fs->staging_fd, name, times, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

int fs_staging_sync_dir(Fs *fs, uint64_t ino) {
	unsigned b = ino & 0xff;
	char sub[3];
	int r = 0;

	/* Held across the fsync, so a caller never returns while another's sync of this directory is in flight. */
	pthread_mutex_lock(&fs->staging_dir_lock[b]);
	if (fs->staging_dir_dirty[b]) {
		snprintf(sub, sizeof(sub), "%02x", b);
		_cleanup_close_ int dfd = openat(fs->staging_fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0 || fsync(dfd) < 0)
			r = -errno;
		else
			fs->staging_dir_dirty[b] = false;
	}
	pthread_mutex_unlock(&fs->staging_dir_lock[b]);
	return r;
}

typedef struct InoList {
	uint64_t *items;
	size_t n, cap;
} InoList;

static int ino_list_add(uint64_t ino, void *userdata) {
	InoList *l = userdata;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		uint64_t *grown = reallocarray(l->items, cap, sizeof(uint64_t));
		if (!grown)
			return -ENOMEM;
		l->items = grown;
		l->cap = cap;
	}
	l->items[l->n++] = ino;
	return 0;
}

/* Inodes left with no links by a crash while they were open. */
static int recover_orphans(Fs *fs, uint64_t *ret_count) {
	InoList list = {};
	int r;

	/* Collected first: the catalog cannot be changed while it is being iterated. */
	r = catalog_orphans_foreach(fs->catalog, ino_list_add, &list);
	for (size_t k = 0; r >= 0 && k < list.n; k++) {
		CatalogInode ci;
		r = catalog_begin(fs->catalog);
		if (r < 0)
			break;
		r = catalog_inode_get(fs->catalog, list.items[k], &ci);
		if (r >= 0)
			r = fs_data_drop(fs, &ci);
		if (r >= 0)
			r = catalog_inode_delete(fs->catalog, list.items[k]);
		if (r < 0) {
			catalog_rollback(fs->catalog);
			break;
		}
		r = catalog_commit(fs->catalog);
		if (r >= 0)
			r = fs_staging_unlink(fs, list.items[k]);
	}
	if (r >= 0)
		*ret_count = list.n;
	free(list.items);
	return r;
}

/*
 * Staging files whose inode never reached the catalog (a crash mid-create),
 * or whose inode was sealed (a crash between the seal's commit and the
 * deletion of its staging file).
 */
static int recover_strays(Fs *fs, uint64_t *ret_count) {
	uint64_t count = 0;

	for (unsigned b = 0; b < FS_STAGING_FANOUT; b++) {
		char sub[3];
		snprintf(sub, sizeof(sub), "%02x", b);
		int dfd = openat(fs->staging_fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0)
			return -errno;
		DIR *d = fdopendir(dfd);
		if (!d) {
			close(dfd);
			return -errno;
		}
		struct dirent *de;
		while ((errno = 0, de = readdir(d))) {
			char *end;
			if (de->d_name[0] == '.')
				continue;
			errno = 0;
			uint64_t ino = strtoull(de->d_name, &end, 16);
			bool ours = errno == 0 && *end == 0 && strlen(de->d_name) == 16 && (ino & 0xff) == b;
			CatalogInode ci;
			int exists = ours ? catalog_inode_get(fs->catalog, ino, &ci) : -ENOENT;
			if (exists < 0 && exists != -ENOENT) {
				closedir(d);
				return exists;
			}
			if (exists == -ENOENT || ci.state != CATALOG_FILE_RAW) {
				if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT) {
					int r = -errno;
					closedir(d);
					return r;
				}
				count++;
			}
		}
		int r = errno ? -errno : 0;
		closedir(d);
		if (r < 0)
			return r;
	}
	*ret_count = count;
	return 0;
}

int fs_staging_recover(Fs *fs, uint64_t *ret_orphans, uint64_t *ret_strays) {
	int r = recover_orphans(fs, ret_orphans);
	if (r < 0)
		return r;
	return recover_strays(fs, ret_strays);
}
