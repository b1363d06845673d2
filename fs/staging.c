/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * staging.c — raw bytes of regular files, on the hot tier or spilled to a
 * lower one.
 *
 * Each regular file has one staging file, TIER/staging/XX/NNNNNNNNNNNNNNNN
 * (XX the low byte of the inode number, N the number in hex), written with
 * pwrite so that overwrites, holes, O_DIRECT and fsync keep plain POSIX
 * semantics at the disk's speed.  For raw files the staging file is the
 * authority on size, blocks, atime and mtime.  It lives on the hot tier
 * unless the hot tier was full when the file was created or written (see
 * spill.c): every directory-backed lower tier that opened has a staging
 * area of its own, and the catalog's tier column of a raw file names the
 * one holding its staging file.  NFS tiers have none: libnfs files cannot
 * be spliced from, fsynced per write or held open by the kernel's page
 * cache, so nothing raw ever lives there.
 *
 * Invariants:
 *  1. A staging file exists only for an inode in the catalog that is raw
 *     and whose tier is this area's, except between its creation and the
 *     commit that records it (a create, an unseal, a spill) or between a
 *     commit that stops recording it and its deletion (a seal, a spill);
 *     recovery deletes such strays at mount, in every area.
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

#include "common/array.h"
#include "common/config.h"
#include "common/log.h"
#include "common/macros.h"
#include "fs/fs-internal.h"

#define STAGING_NAME_MAX sizeof("ff/0123456789abcdef")

static void staging_name(uint64_t ino, char buf[static STAGING_NAME_MAX]) {
	snprintf(buf, STAGING_NAME_MAX, "%02x/%016" PRIx64, (unsigned) (ino & 0xff), ino);
}

/*
 * The staging directory of tier, or -EIO: a raw file whose staging tier
 * did not open at start (a capacity disk missing) cannot be read or
 * written, as its sealed files cannot; it is never re-created empty.
 */
static int area_fd(Fs *fs, uint32_t tier) {
	return tier < CONFIG_TIERS_MAX && fs->staging[tier].fd >= 0 ? fs->staging[tier].fd : -EIO;
}

static void staging_dir_mark_dirty(Fs *fs, uint32_t tier, uint64_t ino) {
	FsStagingArea *a = &fs->staging[tier];
	unsigned b = ino & 0xff;
	pthread_mutex_lock(&a->dir_lock[b]);
	a->dir_dirty[b] = true;
	pthread_mutex_unlock(&a->dir_lock[b]);
}

/* Makes (or finds) TIER/staging and its fan-out below dir_fd and opens it as tier's area. */
static int area_open(Fs *fs, uint32_t tier, int dir_fd) {
	FsStagingArea *a = &fs->staging[tier];
	struct stat st;

	if (mkdirat(dir_fd, FS_STAGING_DIR, 0700) < 0 && errno != EEXIST)
		return -errno;
	_cleanup_close_ int fd = openat(dir_fd, FS_STAGING_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	for (unsigned b = 0; b < FS_STAGING_FANOUT; b++) {
		char sub[3];
		snprintf(sub, sizeof(sub), "%02x", b);
		if (mkdirat(fd, sub, 0700) < 0 && errno != EEXIST)
			return -errno;
	}
	/* The fan-out directories must survive power loss before any file relies on them. */
	if (fsync(fd) < 0 || fsync(dir_fd) < 0)
		return -errno;
	for (unsigned b = 0; b < FS_STAGING_FANOUT; b++)
		pthread_mutex_init(&a->dir_lock[b], NULL);
	a->dev = st.st_dev;
	a->fd = TAKE_FD(fd);
	return 0;
}

int fs_staging_init(Fs *fs) {
	int r = area_open(fs, 0, fs->hot_fd);
	if (r >= 0) {
		fs->staging[0].takes_raw = true;
		fs_spill_area_init(fs, 0);
	}
	return r;
}

int fs_staging_open_tiers(Fs *fs) {
	for (uint32_t n = 1; n < tier_set_count(fs->tiers); n++) {
		const ConfigTier *t = tier_set_config(fs->tiers, n);
		/*
		 * Only a directory tier whose store opened: the same disk holds both.
		 * Not a shared one: PATH/staging would be every host's, named by
		 * inode numbers each host gives out on its own, and each host's
		 * recovery of strays would delete the others' files (docs/SHARED.md).
		 */
		if (!t || t->backend != TIER_BACKEND_DIR || t->shared || !tier_set_store(fs->tiers, n))
			continue;
		_cleanup_close_ int dir_fd = open(t->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int r = dir_fd < 0 ? -errno : area_open(fs, n, dir_fd);
		if (r < 0) {
			/* Like a tier that did not open: no spill there, its raw files read as EIO. */
			log_warning_errno(r, "tier %u (%s): cannot prepare %s/%s, nothing spills there: %m",
					  (unsigned) n, t->name, t->path, FS_STAGING_DIR);
			continue;
		}
		/*
		 * An area all the same where nothing new spills: raw files
		 * already there stay readable, and its strays are found.
		 */
		bool encrypts = fs_tier_encrypts(fs, n);
		fs->staging[n].takes_raw = config_tier_spills(t, fs->keys != NULL);
		if (encrypts && fs->staging[n].takes_raw)
			log_warning("tier %u (%s): spill = yes: raw files that spill there are in clear on it until sealed",
				    (unsigned) n, t->name);
		else if (encrypts)
			log_info("tier %u (%s) is encrypted and takes no spilled raw files (spill = yes would, in clear)",
				 (unsigned) n, t->name);
		fs_spill_area_init(fs, n);
	}
	return 0;
}

void fs_staging_done(Fs *fs) {
	for (uint32_t n = 0; n < CONFIG_TIERS_MAX; n++) {
		FsStagingArea *a = &fs->staging[n];
		if (a->fd < 0)
			continue;
		close(a->fd);
		a->fd = -1;
		for (unsigned b = 0; b < FS_STAGING_FANOUT; b++)
			pthread_mutex_destroy(&a->dir_lock[b]);
	}
}

bool fs_staging_has_area(const Fs *fs, uint32_t tier) {
	return tier < CONFIG_TIERS_MAX && fs->staging[tier].fd >= 0;
}

int fs_staging_create(Fs *fs, uint32_t tier, uint64_t ino) {
	char name[STAGING_NAME_MAX];
	int dfd = area_fd(fs, tier);

	if (dfd < 0)
		return dfd;
	staging_name(ino, name);
	/*
	 * O_TRUNC, not O_EXCL: a file of this name can only be the leftover of
	 * a create, unseal or spill whose catalog commit never happened
	 * (invariant 1).
	 */
	int fd = openat(dfd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	staging_dir_mark_dirty(fs, tier, ino);
	return fd;
}

int fs_staging_fd(Fs *fs, FsInode *i) {
	char name[STAGING_NAME_MAX];
	uint32_t tier = atomic_load(&i->staging_tier);
	int fd, dfd = area_fd(fs, tier);

	if (dfd < 0)
		return dfd;
	pthread_mutex_lock(&i->lock);
	fd = atomic_load(&i->fd);
	if (fd >= 0)
		goto out;
	staging_name(i->ino, name);
	fd = openat(dfd, name, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		/*
		 * Lost with a power failure before its first fsync: the file
		 * was never promised to be durable, so it comes back empty.
		 */
		fd = openat(dfd, name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd >= 0)
			staging_dir_mark_dirty(fs, tier, i->ino);
	}
	if (fd < 0) {
		fd = -errno;
		goto out;
	}
	atomic_store(&i->fd, fd);
out:
	pthread_mutex_unlock(&i->lock);
	return fd;
}

int fs_staging_open_ro(Fs *fs, uint32_t tier, uint64_t ino) {
	char name[STAGING_NAME_MAX];
	int dfd = area_fd(fs, tier);

	if (dfd < 0)
		return dfd;
	staging_name(ino, name);
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int fs_staging_spool(Fs *fs, uint32_t plain_tier) {
	int dfd = area_fd(fs, plain_tier);

	if (dfd < 0 && plain_tier != 0)
		dfd = area_fd(fs, 0);
	if (dfd < 0)
		return dfd;
	/* Nameless: gone with its last descriptor, a crash included; recovery has nothing to delete. */
	int fd = openat(dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	return fd < 0 ? -errno : fd;
}

int fs_staging_stat(Fs *fs, uint32_t tier, uint64_t ino, struct stat *ret) {
	char name[STAGING_NAME_MAX];
	int dfd = area_fd(fs, tier);

	if (dfd < 0)
		return dfd;
	staging_name(ino, name);
	if (fstatat(dfd, name, ret, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

int fs_staging_unlink(Fs *fs, uint32_t tier, uint64_t ino) {
	char name[STAGING_NAME_MAX];
	int dfd = area_fd(fs, tier);

	/* A tier that did not open keeps the file: recovery deletes it once the tier is back. */
	if (dfd < 0)
		return dfd;
	staging_name(ino, name);
	if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int fs_staging_retire(Fs *fs, uint32_t tier, uint64_t ino, char ret_name[static FS_STAGING_RETIRED_NAME_MAX]) {
	char name[STAGING_NAME_MAX];
	int dfd = area_fd(fs, tier);

	if (dfd < 0)
		return dfd;
	staging_name(ino, name);
	/* Unique for the mount; one an earlier mount left (recovery deletes those) is replaced, as garbage. */
	snprintf(ret_name, FS_STAGING_RETIRED_NAME_MAX, "%s.%" PRIx64, name,
		 (uint64_t) atomic_fetch_add(&fs->staging_retired, 1));
	return renameat(dfd, name, dfd, ret_name) < 0 ? -errno : 0;
}

int fs_staging_reap(Fs *fs, uint32_t tier, const char *name) {
	int dfd = area_fd(fs, tier);

	if (dfd < 0)
		return dfd;
	return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
}

int fs_staging_truncate(Fs *fs, uint32_t tier, uint64_t ino, off_t size) {
	char name[STAGING_NAME_MAX];
	int dfd = area_fd(fs, tier);

	if (dfd < 0)
		return dfd;
	staging_name(ino, name);
	_cleanup_close_ int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, size) < 0)
		return -errno;
	staging_dir_mark_dirty(fs, tier, ino);
	return 0;
}

int fs_staging_set_times(Fs *fs, uint32_t tier, uint64_t ino, const struct timespec times[2]) {
	char name[STAGING_NAME_MAX];
	int dfd = area_fd(fs, tier);

	if (dfd < 0)
		return dfd;
	staging_name(ino, name);
	if (utimensat(dfd, name, times, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

int fs_staging_sync_dir(Fs *fs, uint32_t tier, uint64_t ino) {
	int dfd = area_fd(fs, tier);
	unsigned b = ino & 0xff;
	char sub[3];
	int r = 0;

	if (dfd < 0)
		return dfd;
	FsStagingArea *a = &fs->staging[tier];
	/* Held across the fsync, so a caller never returns while another's sync of this directory is in flight. */
	pthread_mutex_lock(&a->dir_lock[b]);
	if (a->dir_dirty[b]) {
		snprintf(sub, sizeof(sub), "%02x", b);
		_cleanup_close_ int sfd = openat(dfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sfd < 0 || fsync(sfd) < 0)
			r = -errno;
		else
			a->dir_dirty[b] = false;
	}
	pthread_mutex_unlock(&a->dir_lock[b]);
	return r;
}

typedef struct InoList {
	uint64_t *items;
	size_t n, cap;
} InoList;

static int ino_list_add(uint64_t ino, void *userdata) {
	InoList *l = userdata;
	if (ARRAY_RESERVE_ONE(l->items, l->cap, l->n, 64) < 0)
		return -ENOMEM;
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
		/* Wherever it is; on a tier that did not open, a later recovery finds it a stray. */
		if (r >= 0 && S_ISREG(ci.mode))
			(void) fs_staging_unlink(fs, ci.tier, list.items[k]);
	}
	if (r >= 0)
		*ret_count = list.n;
	free(list.items);
	return r;
}

/*
 * Staging files of one area whose inode never reached the catalog (a crash
 * mid-create), was sealed (a crash between the seal's commit and the
 * deletion of its staging file, or a retired one's, fs_staging_retire():
 * its name is no inode's), or has its staging file on another tier (a
 * crash in the middle of a spill or an unseal: the catalog names the copy
 * that is whole, see spill.c).
 */
static int recover_strays(Fs *fs, uint32_t tier, uint64_t *ret_count) {
	uint64_t count = 0;

	for (unsigned b = 0; b < FS_STAGING_FANOUT; b++) {
		char sub[3];
		snprintf(sub, sizeof(sub), "%02x", b);
		int dfd = openat(fs->staging[tier].fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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
			if (exists == -ENOENT || ci.state != CATALOG_FILE_RAW || ci.tier != tier) {
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
	*ret_count += count;
	return 0;
}

int fs_staging_recover(Fs *fs, uint64_t *ret_orphans, uint64_t *ret_strays) {
	int r = recover_orphans(fs, ret_orphans);
	*ret_strays = 0;
	for (uint32_t n = 0; r >= 0 && n < CONFIG_TIERS_MAX; n++)
		if (fs_staging_has_area(fs, n))
			r = recover_strays(fs, n, ret_strays);
	return r;
}
