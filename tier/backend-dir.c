/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backend-dir.c — the chunk-store backend over a local directory.
 *
 * Invariants:
 *  1. Every name is checked (dedup/backend.h contract 1) before it reaches a
 *     syscall, and resolved relative to the backend's directory fd with
 *     O_NOFOLLOW on the last component, so no name escapes the directory.
 *  2. A directory created for an object, and the object itself, are fsynced
 *     into their parent before open_write() returns.
 *  3. The read-descriptor cache holds at most TIER_BACKEND_DIR_FDS_MAX fds.
 *     A slot in use by a pread (users > 0) is never closed: unlink() detaches
 *     it and the last user closes it; rename() detaches both names the same
 *     way.  Descriptors are closed outside the cache lock.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/macros.h"
#include "tier/backend-dir.h"

typedef struct FdSlot {
	char name[DEDUP_BACKEND_NAME_MAX + 1]; /* "" when free or detached */
	int fd;                                /* -1 when free */
	unsigned users;                        /* preads running on fd */
	bool detached;                         /* unlinked while in use: the last user closes fd */
	uint64_t used;                         /* LRU tick */
} FdSlot;

typedef struct DirBackend {
	DedupBackend base;
	int dir_fd;
	pthread_mutex_t lock; /* protects slots and tick; a leaf lock */
	FdSlot slots[TIER_BACKEND_DIR_FDS_MAX];
	uint64_t tick;
} DirBackend;

typedef struct DirFile {
	int fd;
} DirFile;

static DirBackend *dir_backend(DedupBackend *b) {
	return (DirBackend *) b;
}

/* fsync()s the directory `path` (relative to dir_fd; "" is dir_fd itself). */
static int sync_dir(DirBackend *d, const char *path) {
	if (path[0] == '\0')
		return fsync(d->dir_fd) < 0 ? negative_errno() : 0;
	_cleanup_close_ int fd = openat(d->dir_fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	return fsync(fd) < 0 ? negative_errno() : 0;
}

/* Makes every parent directory of name, syncing the parent of each one made. */
static int make_parents(DirBackend *d, const char *name) {
	char path[DEDUP_BACKEND_NAME_MAX + 1];
	size_t len = strlen(name);

	memcpy(path, name, len + 1);
	for (size_t i = 0; i < len; i++) {
		if (path[i] != '/')
			continue;
		path[i] = '\0';
		if (mkdirat(d->dir_fd, path, 0755) < 0) {
			if (errno != EEXIST)
				return negative_errno();
		} else {
			/* The new directory's entry lives in its parent: path up to the previous '/'. */
			char *slash = strrchr(path, '/');
			int r;
			if (slash) {
				*slash = '\0';
				r = sync_dir(d, path);
				*slash = '/';
			} else
				r = sync_dir(d, "");
			if (r < 0)
				return r;
		}
		path[i] = '/';
	}
	return 0;
}

/* Syncs the directory holding name. */
static int sync_parent(DirBackend *d, const char *name) {
	char path[DEDUP_BACKEND_NAME_MAX + 1];
	const char *slash = strrchr(name, '/');
	if (!slash)
		return sync_dir(d, "");
	size_t n = (size_t) (slash - name);
	memcpy(path, name, n);
	path[n] = '\0';
	return sync_dir(d, path);
}

static int dir_open_write(DedupBackend *b, const char *name, bool create, uint64_t size, DedupBackendFile **ret) {
	DirBackend *d = dir_backend(b);
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r;

	if (!dedup_backend_name_is_valid(name) || size > INT64_MAX)
		return -EINVAL;

	if (create) {
		r = make_parents(d, name);
		if (r < 0)
			return r;
		fd = openat(d->dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd >= 0) {
			r = sync_parent(d, name);
			if (r < 0)
				return r;
		} else if (errno != EEXIST)
			return negative_errno();
	}
	if (fd < 0) {
		fd = openat(d->dir_fd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return negative_errno();
	}

	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode))
		return -EUCLEAN;
	if ((uint64_t) st.st_size < size)
		return -EUCLEAN;
	if ((uint64_t) st.st_size > size && ftruncate(fd, (off_t) size) < 0)
		return negative_errno();

	DirFile *f = malloc(sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->fd = TAKE_FD(fd);
	*ret = (DedupBackendFile *) f;
	return 0;
}

static int dir_pwrite(DedupBackendFile *file, const void *buf, size_t len, uint64_t offset) {
	DirFile *f = (DirFile *) file;
	const uint8_t *p = buf;

	if (offset > INT64_MAX || len > INT64_MAX - offset)
		return -EINVAL;
	while (len > 0) {
		ssize_t n = pwrite(f->fd, p, len, (off_t) offset);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t) n;
		offset += (uint64_t) n;
	}
	return 0;
}

static int dir_truncate(DedupBackendFile *file, uint64_t size) {
	DirFile *f = (DirFile *) file;
	if (size > INT64_MAX)
		return -EINVAL;
	return ftruncate(f->fd, (off_t) size) < 0 ? negative_errno() : 0;
}

static int dir_sync(DedupBackendFile *file) {
	DirFile *f = (DirFile *) file;
	return fdatasync(f->fd) < 0 ? negative_errno() : 0;
}

static void dir_close(DedupBackendFile *file) {
	DirFile *f = (DirFile *) file;
	if (!f)
		return;
	(void) close(f->fd);
	free(f);
}

/*
 * Finds or opens a cached descriptor for name and marks it in use.  Returns
 * the slot (users incremented) or NULL with *ret_fd set to a descriptor the
 * caller must close itself (the cache was full of busy slots).
 */
static int fd_get(DirBackend *d, const char *name, FdSlot **ret_slot, int *ret_fd) {
	int fd, evict_fd = -1;

	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < TIER_BACKEND_DIR_FDS_MAX; i++) {
		FdSlot *s = d->slots + i;
		if (s->fd >= 0 && !s->detached && strcmp(s->name, name) == 0) {
			s->users++;
			s->used = ++d->tick;
			pthread_mutex_unlock(&d->lock);
			*ret_slot = s;
			return 0;
		}
	}
	pthread_mutex_unlock(&d->lock);

	fd = openat(d->dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();

	pthread_mutex_lock(&d->lock);
	FdSlot *victim = NULL;
	for (size_t i = 0; i < TIER_BACKEND_DIR_FDS_MAX; i++) {
		FdSlot *s = d->slots + i;
		if (s->fd >= 0 && !s->detached && strcmp(s->name, name) == 0) {
			/* Another thread cached it meanwhile: use theirs. */
			s->users++;
			s->used = ++d->tick;
			pthread_mutex_unlock(&d->lock);
			(void) close(fd);
			*ret_slot = s;
			return 0;
		}
		/* A free slot beats any cached one; among cached idle ones the least recently used. */
		if (victim && victim->fd < 0)
			continue;
		if (s->fd < 0 || (s->users == 0 && !s->detached && (!victim || s->used < victim->used)))
			victim = s;
	}
	if (!victim) {
		pthread_mutex_unlock(&d->lock);
		*ret_slot = NULL;
		*ret_fd = fd;
		return 0;
	}
	evict_fd = victim->fd;
	*victim = (FdSlot) { .fd = fd, .users = 1, .used = ++d->tick };
	strcpy(victim->name, name);
	pthread_mutex_unlock(&d->lock);
	if (evict_fd >= 0)
		(void) close(evict_fd);
	*ret_slot = victim;
	return 0;
}

static void fd_put(DirBackend *d, FdSlot *s) {
	int fd = -1;

	pthread_mutex_lock(&d->lock);
	assert(s->users > 0);
	s->users--;
	if (s->users == 0 && s->detached) {
		fd = s->fd;
		*s = (FdSlot) { .fd = -1 };
	}
	pthread_mutex_unlock(&d->lock);
	if (fd >= 0)
		(void) close(fd);
}

static ssize_t dir_pread(DedupBackend *b, const char *name, void *buf, size_t len, uint64_t offset) {
	DirBackend *d = dir_backend(b);
	FdSlot *slot = NULL;
	int fd = -1, r;
	size_t done = 0;

	if (!dedup_backend_name_is_valid(name) || offset > INT64_MAX || len > SSIZE_MAX)
		return -EINVAL;
	r = fd_get(d, name, &slot, &fd);
	if (r < 0)
		return r;
	if (slot)
		fd = slot->fd;

	while (done < len) {
		ssize_t n = pread(fd, (uint8_t *) buf + done, len - done, (off_t) (offset + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = negative_errno();
			break;
		}
		if (n == 0)
			break;
		done += (size_t) n;
	}

	if (slot)
		fd_put(d, slot);
	else
		(void) close(fd);
	return r < 0 ? r : (ssize_t) done;
}

static int dir_size(DedupBackend *b, const char *name, uint64_t *ret) {
	DirBackend *d = dir_backend(b);
	struct stat st;

	if (!dedup_backend_name_is_valid(name))
		return -EINVAL;
	if (fstatat(d->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode))
		return -EUCLEAN;
	*ret = (uint64_t) st.st_size;
	return 0;
}

/*
 * Drops name from the descriptor cache, so no later pread reads through a
 * descriptor that no longer belongs to the name (unlink, rename).
 */
static void fd_forget(DirBackend *d, const char *name) {
	int fd = -1;

	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < TIER_BACKEND_DIR_FDS_MAX; i++) {
		FdSlot *s = d->slots + i;
		if (s->fd < 0 || s->detached || strcmp(s->name, name) != 0)
			continue;
		if (s->users == 0) {
			fd = s->fd;
			*s = (FdSlot) { .fd = -1 };
		} else {
			s->detached = true;
			s->name[0] = '\0';
		}
		break;
	}
	pthread_mutex_unlock(&d->lock);
	if (fd >= 0)
		(void) close(fd);
}

static int dir_unlink(DedupBackend *b, const char *name) {
	DirBackend *d = dir_backend(b);

	if (!dedup_backend_name_is_valid(name))
		return -EINVAL;
	fd_forget(d, name);
	return unlinkat(d->dir_fd, name, 0) < 0 ? negative_errno() : 0;
}

static int dir_rename(DedupBackend *b, const char *from, const char *to) {
	DirBackend *d = dir_backend(b);
	int r;

	if (!dedup_backend_name_is_valid(from) || !dedup_backend_name_is_valid(to))
		return -EINVAL;
	r = make_parents(d, to);
	if (r < 0)
		return r;
	/* Both before and after: a pread between the two could cache the old `to` again. */
	fd_forget(d, from);
	fd_forget(d, to);
	if (renameat(d->dir_fd, from, d->dir_fd, to) < 0)
		return negative_errno();
	fd_forget(d, from);
	fd_forget(d, to);
	/* The new entry first: a crash between the two leaves both names, never neither. */
	r = sync_parent(d, to);
	if (r < 0)
		return r;
	return sync_parent(d, from);
}

static int dir_statfs(DedupBackend *b, DedupBackendStatfs *ret) {
	DirBackend *d = dir_backend(b);
	struct statvfs st;

	if (fstatvfs(d->dir_fd, &st) < 0)
		return negative_errno();
	*ret = (DedupBackendStatfs) {
		.total = (uint64_t) st.f_blocks * st.f_frsize,
		.free = (uint64_t) st.f_bfree * st.f_frsize,
		.avail = (uint64_t) st.f_bavail * st.f_frsize,
	};
	return 0;
}

static int list_dir(DirBackend *d, char *path, size_t len, int (*cb)(const char *name, void *userdata),
		    void *userdata) {
	int fd = openat(d->dir_fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : negative_errno();
	DIR *dir = fdopendir(fd);
	if (!dir) {
		int r = negative_errno();
		(void) close(fd);
		return r;
	}

	int r = 0;
	struct dirent *de;
	for (;;) {
		errno = 0;
		de = readdir(dir);
		if (!de) {
			if (errno != 0)
				r = negative_errno();
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		size_t n = strlen(de->d_name);
		if (len + 1 + n > DEDUP_BACKEND_NAME_MAX)
			continue; /* not a name the store could have made */
		path[len] = '/';
		memcpy(path + len + 1, de->d_name, n + 1);
		if (!dedup_backend_name_is_valid(path)) {
			path[len] = '\0';
			continue;
		}

		unsigned char type = de->d_type;
		if (type == DT_UNKNOWN) {
			struct stat st;
			if (fstatat(d->dir_fd, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
				type = DT_UNKNOWN;
			else
				type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
		}
		if (type == DT_DIR)
			r = list_dir(d, path, len + 1 + n, cb, userdata);
		else if (type == DT_REG)
			r = cb(path, userdata);
		path[len] = '\0';
		if (r < 0)
			break;
	}
	closedir(dir);
	return r;
}

static int dir_list(DedupBackend *b, const char *prefix, int (*cb)(const char *name, void *userdata),
		    void *userdata) {
	char path[DEDUP_BACKEND_NAME_MAX + 1];

	if (!dedup_backend_name_is_valid(prefix))
		return -EINVAL;
	size_t len = strlen(prefix);
	memcpy(path, prefix, len + 1);
	return list_dir(dir_backend(b), path, len, cb, userdata);
}

static void dir_free(DedupBackend *b) {
	DirBackend *d = dir_backend(b);
	for (size_t i = 0; i < TIER_BACKEND_DIR_FDS_MAX; i++)
		if (d->slots[i].fd >= 0)
			(void) close(d->slots[i].fd);
	pthread_mutex_destroy(&d->lock);
	(void) close(d->dir_fd);
	free(d);
}

static const DedupBackendOps dir_ops = {
	.open_write = dir_open_write,
	.pwrite = dir_pwrite,
	.truncate = dir_truncate,
	.sync = dir_sync,
	.close = dir_close,
	.pread = dir_pread,
	.size = dir_size,
	.unlink = dir_unlink,
	.list = dir_list,
	.free = dir_free,
	.rename = dir_rename,
	.statfs = dir_statfs,
};

void tier_backend_dir_forget(DedupBackend *b, const char *name) {
	if (b && b->ops == &dir_ops)
		fd_forget(dir_backend(b), name);
}

int tier_backend_dir_open(const char *path, DedupBackend **ret) {
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();

	DirBackend *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->base.ops = &dir_ops;
	d->dir_fd = TAKE_FD(fd);
	pthread_mutex_init(&d->lock, NULL);
	for (size_t i = 0; i < TIER_BACKEND_DIR_FDS_MAX; i++)
		d->slots[i].fd = -1;
	*ret = &d->base;
	return 0;
}
