/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * inode.c — the inodes the kernel holds references to.
 *
 * Invariants:
 *  1. An entry exists exactly while nlookup > 0, nopen > 0 or npin > 0.
 *     Every reply that hands the kernel an inode takes one reference
 *     (fs_inode_ref); every FORGET drops what it names.  The daemon's own
 *     users (sealing, streams, the xattr cache) pin entries instead
 *     (fs_inode_pin*), so a FORGET can never take a reference that was
 *     not the kernel's and free an entry one of them still uses.
 *  2. An inode whose last link is gone stays in the catalog (nlink 0) while
 *     an entry exists, so open-unlinked files remain readable; it is deleted
 *     with its staging file when the entry goes.  If the daemon dies first,
 *     mount-time recovery deletes it.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/log.h"
#include "fs/fs-internal.h"

#define FS_INODE_BUCKETS_MIN 1024

static size_t bucket_of(const Fs *fs, uint64_t ino) {
	return (size_t) ((ino * 0x9e3779b97f4a7c15ull) >> 20) & (fs->n_buckets - 1);
}

int fs_inode_table_init(Fs *fs) {
	fs->n_buckets = FS_INODE_BUCKETS_MIN;
	fs->buckets = calloc(fs->n_buckets, sizeof(FsInode *));
	if (!fs->buckets)
		return -ENOMEM;
	pthread_mutex_init(&fs->table_lock, NULL);
	return 0;
}

static void inode_free(Fs *fs, FsInode *i) {
	fs_readahead_forget(fs->readahead, i);
	int fd = atomic_load(&i->fd);
	if (fd >= 0)
		close(fd);
	pthread_mutex_destroy(&i->lock);
	pthread_rwlock_destroy(&i->data_lock);
	free(i);
}

void fs_inode_table_done(Fs *fs) {
	if (!fs->buckets)
		return;
	for (size_t b = 0; b < fs->n_buckets; b++)
		for (FsInode *i = fs->buckets[b], *next; i; i = next) {
			next = i->hash_next;
			inode_free(fs, i);
		}
	free(fs->buckets);
	fs->buckets = NULL;
	pthread_mutex_destroy(&fs->table_lock);
}

/* Doubles the table when it gets crowded; a failed allocation just keeps chains longer. */
static void table_grow(Fs *fs) {
	size_t n = fs->n_buckets * 2;
	FsInode **b = calloc(n, sizeof(FsInode *));
	if (!b)
		return;
	FsInode **old = fs->buckets;
	size_t old_n = fs->n_buckets;
	fs->buckets = b;
	fs->n_buckets = n;
	for (size_t k = 0; k < old_n; k++)
		for (FsInode *i = old[k], *next; i; i = next) {
			next = i->hash_next;
			size_t at = bucket_of(fs, i->ino);
			i->hash_next = b[at];
			b[at] = i;
		}
	free(old);
}

static FsInode *table_find(Fs *fs, uint64_t ino) {
	for (FsInode *i = fs->buckets[bucket_of(fs, ino)]; i; i = i->hash_next)
		if (i->ino == ino)
			return i;
	return NULL;
}

static void table_remove(Fs *fs, FsInode *victim) {
	for (FsInode **p = &fs->buckets[bucket_of(fs, victim->ino)]; *p; p = &(*p)->hash_next)
		if (*p == victim) {
			*p = victim->hash_next;
			fs->n_inodes--;
			return;
		}
}

static FsInode *inode_new(Fs *fs, uint64_t ino) {
	FsInode *i = calloc(1, sizeof(*i));
	if (!i)
		return NULL;
	i->ino = ino;
	atomic_init(&i->fd, -1);
	i->xattrs = -1;
	atomic_init(&i->privs, -1);
	pthread_mutex_init(&i->lock, NULL);
	pthread_rwlock_init(&i->data_lock, NULL);
	if (fs->n_inodes >= fs->n_buckets * 2)
		table_grow(fs);
	size_t at = bucket_of(fs, ino);
	i->hash_next = fs->buckets[at];
	fs->buckets[at] = i;
	fs->n_inodes++;
	return i;
}

/* Whether ino has an entry now (it may go at any moment unless the caller holds a reference). */
static bool fs_inode_is_known(Fs *fs, uint64_t ino) {
	pthread_mutex_lock(&fs->table_lock);
	bool known = table_find(fs, ino) != NULL;
	pthread_mutex_unlock(&fs->table_lock);
	return known;
}

int fs_inode_ref(Fs *fs, uint64_t ino, uint64_t n, FsInode **ret) {
	pthread_mutex_lock(&fs->table_lock);
	FsInode *i = table_find(fs, ino);
	if (!i) {
		i = inode_new(fs, ino);
		if (!i) {
			pthread_mutex_unlock(&fs->table_lock);
			return -ENOMEM;
		}
	}
	i->nlookup += n;
	pthread_mutex_unlock(&fs->table_lock);
	if (ret)
		*ret = i;
	return 0;
}

/* Deletes the inode if it has no links; the caller made sure no entry exists. */
static void inode_delete_if_unlinked(Fs *fs, uint64_t ino) {
	CatalogInode ci;
	int r;

	if (ino == CATALOG_ROOT_INO)
		return;
	r = catalog_begin(fs->catalog);
	if (r < 0)
		goto fail;
	/*
	 * Re-check under the catalog lock: a lookup racing with us may have
	 * taken a new reference since the entry went away.
	 */
	if (fs_inode_is_known(fs, ino)) {
		catalog_rollback(fs->catalog);
		return;
	}
	r = catalog_inode_get(fs->catalog, ino, &ci);
	if (r == -ENOENT || (r >= 0 && ci.nlink > 0)) {
		catalog_rollback(fs->catalog);
		return;
	}
	if (r >= 0)
		r = fs_data_drop(fs, &ci);
	if (r >= 0)
		r = catalog_inode_delete(fs->catalog, ino);
	if (r < 0) {
		catalog_rollback(fs->catalog);
		goto fail;
	}
	r = catalog_commit(fs->catalog);
	if (r < 0)
		goto fail;
	if (S_ISREG(ci.mode))
		(void) fs_staging_unlink(fs, ci.tier, ino);
	return;

fail:
	/* Harmless: recovery at the next mount deletes inodes with no links. */
	log_warning_errno(r, "Failed to delete unlinked inode %llu: %m", (unsigned long long) ino);
}

int fs_inode_purge_if_unused(Fs *fs, uint64_t ino) {
	if (!fs_inode_is_known(fs, ino))
		inode_delete_if_unlinked(fs, ino);
	return 0;
}

int fs_inode_pin(Fs *fs, uint64_t ino, bool create, FsInode **ret) {
	pthread_mutex_lock(&fs->table_lock);
	FsInode *i = table_find(fs, ino);
	if (!i && create)
		i = inode_new(fs, ino);
	if (i)
		atomic_fetch_add(&i->npin, 1);
	pthread_mutex_unlock(&fs->table_lock);
	if (!i)
		return create ? -ENOMEM : -ENOENT;
	*ret = i;
	return 0;
}

void fs_inode_pin_held(FsInode *i) {
	/*
	 * The caller's own reference keeps the entry in the table, so no
	 * removal decision can run concurrently: no table_lock needed.
	 */
	atomic_fetch_add(&i->npin, 1);
}

/* Whether the entry may go; table_lock held. */
static bool inode_unused(FsInode *i) {
	return i->nlookup == 0 && i->nopen == 0 && atomic_load(&i->npin) == 0;
}

/* After the table let go of i (NULL: it did not): free it, and the file with it if it has no name left. */
static void inode_gone(Fs *fs, FsInode *i, uint64_t ino) {
	if (!i)
		return;
	inode_free(fs, i);
	inode_delete_if_unlinked(fs, ino);
}

void fs_inode_unpin(Fs *fs, FsInode *i) {
	uint64_t ino = i->ino;
	bool gone = false;

	pthread_mutex_lock(&fs->table_lock);
	assert(atomic_load(&i->npin) > 0);
	atomic_fetch_sub(&i->npin, 1);
	gone = inode_unused(i);
	if (gone)
		table_remove(fs, i);
	pthread_mutex_unlock(&fs->table_lock);
	inode_gone(fs, gone ? i : NULL, ino);
}

void fs_inode_forget(Fs *fs, uint64_t ino, uint64_t n) {
	bool gone = false;

	pthread_mutex_lock(&fs->table_lock);
	FsInode *i = table_find(fs, ino);
	if (i) {
		i->nlookup = i->nlookup > n ? i->nlookup - n : 0;
		gone = inode_unused(i);
		if (gone)
			table_remove(fs, i);
	}
	pthread_mutex_unlock(&fs->table_lock);
	inode_gone(fs, gone ? i : NULL, ino);
}

bool fs_inode_is_open(Fs *fs, FsInode *i) {
	pthread_mutex_lock(&fs->table_lock);
	bool open = i->nopen > 0;
	pthread_mutex_unlock(&fs->table_lock);
	return open;
}

void fs_inode_open(Fs *fs, FsInode *i) {
	pthread_mutex_lock(&fs->table_lock);
	i->nopen++;
	pthread_mutex_unlock(&fs->table_lock);
}

bool fs_inode_release(Fs *fs, FsInode *i, bool take_written) {
	bool gone = false, written = false;
	uint64_t ino = i->ino;
	int fd = -1;

	/*
	 * The kernel sends RELEASE asynchronously, so a FORGET of the same
	 * inode may run concurrently: decide everything under table_lock.
	 */
	pthread_mutex_lock(&fs->table_lock);
	if (--i->nopen == 0) {
		/* Only the last close makes a file quiet: a reader closing leaves a writer's file alone. */
		if (take_written)
			written = atomic_exchange(&i->written, false);
		if (inode_unused(i)) {
			table_remove(fs, i);
			gone = true;
		} else {
			pthread_mutex_lock(&i->lock);
			fd = atomic_exchange(&i->fd, -1);
			pthread_mutex_unlock(&i->lock);
		}
	}
	pthread_mutex_unlock(&fs->table_lock);

	inode_gone(fs, gone ? i : NULL, ino);
	if (fd >= 0)
		close(fd);
	return written;
}
