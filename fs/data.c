/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * data.c — a file's bytes move between raw staging and sealed chunks.
 *
 *        create/write                 fs_data_seal()
 *   ---> RAW (staging file) -----------------------------> SEALED (recipe)
 *          ^                                                   |
 *          |        fs_data_unseal(): first write, truncate,   |
 *          +--------------- fallocate (copy-on-write) ---------+
 *
 * Invariants:
 *  1. The catalog never points at data that is not durable: a seal fsyncs
 *     the frames before its commit, an unseal fsyncs the staging file before
 *     its commit, and the old copy is deleted only after the commit is
 *     synced.
 *  2. Both switches run under the inode's data_lock held exclusively; every
 *     read, write, truncate and fallocate holds it shared, so none of them
 *     ever sees a half-switched file.  Sealing itself (chunking, hashing,
 *     compressing) runs without the lock; the switch is refused if the
 *     bytes changed meanwhile (data_gen).
 */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macros.h"
#include "fs/fs-internal.h"

#define SEAL_READ_SIZE (1u << 20)

/* Loads whether the file is sealed; data_lock held exclusively. */
static int state_load(Fs *fs, FsInode *i) {
	CatalogInode ci;
	int r = catalog_inode_get(fs->catalog, i->ino, &ci);
	if (r < 0)
		return r;
	i->sealed = ci.state == CATALOG_FILE_SEALED;
	i->sealed_size = ci.size;
	i->sealed_tier = ci.tier;
	i->state_known = true;
	return 0;
}

int fs_data_lock_read(Fs *fs, FsInode *i) {
	for (;;) {
		pthread_rwlock_rdlock(&i->data_lock);
		if (i->state_known)
			return 0;
		pthread_rwlock_unlock(&i->data_lock);

		pthread_rwlock_wrlock(&i->data_lock);
		int r = i->state_known ? 0 : state_load(fs, i);
		pthread_rwlock_unlock(&i->data_lock);
		if (r < 0)
			return r;
	}
}

void fs_data_unlock(FsInode *i) {
	pthread_rwlock_unlock(&i->data_lock);
}

void fs_data_attrs_changed(Fs *fs, uint64_t ino) {
	/* An inode the kernel does not hold is no error: it has nothing cached. */
	if (fs->se)
		(void) fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
}

int fs_data_drop(Fs *fs, const CatalogInode *ci) {
	if (ci->state != CATALOG_FILE_SEALED)
		return 0;
	DedupStore *store = fs_tier_store(fs, ci->tier);
	/* Metadata only, whatever the tier: deleting a cold file never reads or waits for its tier. */
	return store ? dedup_file_drop(store, ci->ino) : dedup_file_drop_unopened(fs->catalog, ci->ino);
}

int fs_data_unseal(Fs *fs, FsInode *i, bool truncate_to_zero) {
	_cleanup_close_ int fd = -1;
	CatalogInode ci;
	int r;

	pthread_rwlock_wrlock(&i->data_lock);
	if (!i->state_known) {
		r = state_load(fs, i);
		if (r < 0)
			goto out;
	}
	if (!i->sealed) {
		r = 0;
		goto out;
	}
	r = catalog_inode_get(fs->catalog, i->ino, &ci);
	if (r < 0)
		goto out;

	fd = fs_staging_create(fs, i->ino);
	if (fd < 0) {
		r = fd;
		goto out;
	}
	if (!truncate_to_zero) {
		DedupStore *store = fs_tier_store(fs, ci.tier);
		r = store ? dedup_file_write_to_fd(store, i->ino, ci.size, fd) : -EIO;
		if (r >= 0 && ftruncate(fd, (off_t) ci.size) < 0)
			r = -errno;
		if (r < 0)
			goto err_unlink;
	}
	struct timespec times[2] = {
		{ .tv_sec = ci.atime_ns / 1000000000, .tv_nsec = ci.atime_ns % 1000000000 },
		{ .tv_sec = ci.mtime_ns / 1000000000, .tv_nsec = ci.mtime_ns % 1000000000 },
	};
	if (futimens(fd, times) < 0 || fsync(fd) < 0) {
		r = -errno;
		goto err_unlink;
	}
	r = fs_staging_sync_dir(fs, i->ino);
	if (r < 0)
		goto err_unlink;

	r = catalog_begin(fs->catalog);
	if (r < 0)
		goto err_unlink;
	r = fs_data_drop(fs, &ci);
	if (r >= 0) {
		ci.state = CATALOG_FILE_RAW;
		ci.stored = 0;
		/* Raw data is on the hot tier, and so is its next seal. */
		ci.tier = 0;
		r = catalog_inode_update(fs->catalog, &ci);
	}
	if (r < 0) {
		catalog_rollback(fs->catalog);
		goto err_unlink;
	}
	r = catalog_commit(fs->catalog);
	if (r < 0)
		goto err_unlink;

	pthread_mutex_lock(&i->lock);
	if (i->fd >= 0)
		close(i->fd);
	i->fd = TAKE_FD(fd);
	pthread_mutex_unlock(&i->lock);
	i->sealed = false;
	i->sealed_tier = 0;
	/*
	 * The bytes copied back count as not yet written: only a rewrite within
	 * this raw session marks the file as rewritten in place, so an image
	 * copy updated block by block (RECOVER COPY) is sealed again.
	 */
	atomic_store(&i->written_end, 0);
	goto out;

err_unlink:
	(void) fs_staging_unlink(fs, i->ino);
out:
	pthread_rwlock_unlock(&i->data_lock);
	if (r < 0)
		log_error_errno(r, "Failed to turn sealed inode %llu back into a raw file: %m",
				(unsigned long long) i->ino);
	return r;
}

static int64_t ts_ns(const struct timespec *ts) {
	return (int64_t) ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* Chunks, fingerprints, compresses and stores the staging file; nothing is committed. */
static int seal_ingest(Fs *fs, uint64_t ino, FsFileClass class, DedupWriter **ret_writer, struct stat *ret_st) {
	_cleanup_free_ void *buf = NULL;
	_cleanup_close_ int fd = -1;
	DedupWriter *w = NULL;
	int r;

	fd = fs_staging_open_ro(fs, ino);
	if (fd < 0)
		return fd;
	if (fstat(fd, ret_st) < 0)
		return -errno;
	/*
	 * A mostly sparse file would be read and hashed hole by hole for
	 * nothing: its holes cost no space raw either.  It stays raw.
	 */
	if ((uint64_t) ret_st->st_blocks * 512 < (uint64_t) ret_st->st_size / 2)
		return -EFBIG;
	buf = malloc(SEAL_READ_SIZE);
	if (!buf)
		return -ENOMEM;
	/* The data will be read once, sequentially: say so, and let the pages go after. */
	(void) posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);

	const ConfigClassPolicy *policy = fs_class_policy(fs, class);
	if (!policy)
		return -EINVAL; /* passthrough: never sealed */
	DedupChunkerParams params = fs_class_chunker(policy);
	r = dedup_writer_new(fs->store, &params, policy->zstd_level, &w);
	if (r < 0)
		return r;
	for (uint64_t off = 0; off < (uint64_t) ret_st->st_size;) {
		if (atomic_load(&fs->seal_stopping)) {
			r = -ECANCELED; /* unmounting: the file stays raw, the next mount queues it again */
			goto fail;
		}
		ssize_t n = pread(fd, buf, SEAL_READ_SIZE, (off_t) off);
		if (n < 0) {
			r = -errno;
			goto fail;
		}
		if (n == 0)
			break; /* shrank meanwhile: the generation check will refuse the switch */
		r = dedup_writer_feed(w, buf, (size_t) n);
		if (r < 0)
			goto fail;
		off += (uint64_t) n;
	}
	r = dedup_writer_finish(w);
	if (r < 0)
		goto fail;
	*ret_writer = w;
	return 0;

fail:
	dedup_writer_free(w);
	return r;
}

int fs_data_seal(Fs *fs, uint64_t ino) {
	DedupWriter *w = NULL;
	CatalogInode ci;
	struct stat st;
	FsInode *i;
	int r;

	r = catalog_inode_get(fs->catalog, ino, &ci);
	if (r == -ENOENT)
		return 0; /* deleted meanwhile */
	if (r < 0)
		return r;
	if (!S_ISREG(ci.mode) || ci.state != CATALOG_FILE_RAW || ci.nlink == 0 ||
	    !fs_class_is_sealed((FsFileClass) ci.file_class))
		return 0;

	/* A reference of our own keeps the in-memory inode (and its locks) alive meanwhile. */
	r = fs_inode_ref(fs, ino, 1, &i);
	if (r < 0)
		return r;
	if (atomic_load(&i->overwritten))
		goto out;
	uint64_t gen = atomic_load(&i->data_gen);

	r = seal_ingest(fs, ino, (FsFileClass) ci.file_class, &w, &st);
	if (r == -EFBIG || r == -ECANCELED) {
		r = 0;
		goto out;
	}
	if (r < 0)
		goto out;

	/*
	 * Read before the switch, while the staging file is still there; if the
	 * bytes change meanwhile, data_gen refuses the switch and this with it.
	 */
	CatalogArchivelog log;
	bool have_log = ci.file_class == FS_CLASS_ARCHIVELOG && fs_archivelog_header(fs, ino, &log) >= 0;

	pthread_rwlock_wrlock(&i->data_lock);
	if (atomic_load(&i->data_gen) != gen || (i->state_known && i->sealed)) {
		r = 0; /* changed while we read it: the frames are garbage for GC, try again later */
		goto out_unlock;
	}
	r = catalog_begin(fs->catalog);
	if (r < 0)
		goto out_unlock;
	r = catalog_inode_get(fs->catalog, ino, &ci);
	if (r >= 0 && (ci.state != CATALOG_FILE_RAW || ci.nlink == 0))
		r = -ESTALE;
	if (r >= 0)
		r = dedup_writer_commit(w, ino);
	if (r >= 0 && have_log)
		r = catalog_archivelog_set(fs->catalog, ino, &log);
	if (r >= 0) {
		ci.state = CATALOG_FILE_SEALED;
		ci.size = (uint64_t) st.st_size;
		DedupWriterStats ws;
		dedup_writer_stats(w, &ws);
		/* What sealing this file added to the store; shared chunks are charged to their first owner. */
		ci.stored = ws.stored_bytes;
		ci.atime_ns = ts_ns(&st.st_atim);
		ci.mtime_ns = ts_ns(&st.st_mtim);
		if (ts_ns(&st.st_ctim) > ci.ctime_ns)
			ci.ctime_ns = ts_ns(&st.st_ctim);
		r = catalog_inode_update(fs->catalog, &ci);
	}
	if (r < 0) {
		catalog_rollback(fs->catalog);
		if (r == -ESTALE)
			r = 0;
		goto out_unlock;
	}
	r = catalog_commit(fs->catalog);
	/* The staging file goes only once the switch is durable (invariant 1). */
	if (r >= 0)
		r = catalog_sync(fs->catalog);
	if (r < 0)
		goto out_unlock;

	pthread_mutex_lock(&i->lock);
	int fd = TAKE_FD(i->fd);
	pthread_mutex_unlock(&i->lock);
	if (fd >= 0)
		close(fd);
	(void) fs_staging_unlink(fs, ino);
	i->sealed = true;
	i->sealed_size = ci.size;
	i->state_known = true;
	log_debug("sealed inode %llu: %llu bytes stored as %llu", (unsigned long long) ino,
		  (unsigned long long) ci.size, (unsigned long long) ci.stored);
	pthread_rwlock_unlock(&i->data_lock);
	fs_data_attrs_changed(fs, ino);
	goto out;

out_unlock:
	pthread_rwlock_unlock(&i->data_lock);
out:
	dedup_writer_free(w);
	fs_inode_forget(fs, ino, 1);
	return r;
}
