/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ops.c — the FUSE low-level handlers: the table, and the operations on
 * inodes and their data (lookup, attributes, open, read, write, fsync,
 * fallocate, lseek, statfs); the namespace's are ops-dir.c's, the extended
 * attributes' ops-xattr.c's.
 *
 * Each handler decodes the request, does its work against the catalog and
 * the staging files, and replies exactly once; errors flip sign only at the
 * reply.  Namespace changes run in one catalog transaction each, so a crash
 * leaves either the old or the new namespace, never a mix.
 *
 * Permission checks are the kernel's (default_permissions is always on);
 * POSIX and BSD locks are the kernel's too (no lock handlers: the kernel
 * then keeps them locally, exactly as for a local filesystem).
 */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macros.h"
#include "fs/ops-internal.h"

#define FS_DIR_SIZE 4096

static int64_t ts_to_ns(const struct timespec *ts) {
	return (int64_t) ts->tv_sec * 1000000000 + ts->tv_nsec;
}

static struct timespec ns_to_ts(int64_t ns) {
	struct timespec ts = { .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
	if (ts.tv_nsec < 0) {
		ts.tv_sec--;
		ts.tv_nsec += 1000000000;
	}
	return ts;
}

static int inode_stat(Fs *fs, const CatalogInode *ci, struct stat *st) {
	CatalogInode now = *ci;
	struct stat raw;

	for (unsigned k = 0; S_ISREG(now.mode) && now.state == CATALOG_FILE_RAW; k++) {
		int r = fs_staging_stat(fs, now.tier, now.ino, &raw);
		if (r >= 0)
			break;
		/*
		 * Gone under us: a seal or a spill switched the file meanwhile
		 * (the catalog says so now: look again), or it was lost before
		 * its first fsync and reads as empty (fs_staging_fd()).
		 */
		CatalogInode again;
		if (r == -ENOENT && k < FS_STAT_RETRIES && catalog_inode_get(fs->catalog, now.ino, &again) >= 0 &&
		    (again.state != now.state || again.tier != now.tier)) {
			now = again;
			continue;
		}
		if (r != -ENOENT)
			return r;
		memset(&raw, 0, sizeof(raw));
		break;
	}
	ci = &now;
	memset(st, 0, sizeof(*st));
	st->st_ino = ci->ino;
	st->st_mode = ci->mode;
	st->st_nlink = ci->nlink;
	st->st_uid = ci->uid;
	st->st_gid = ci->gid;
	st->st_rdev = ci->rdev;
	st->st_blksize = 4096;
	st->st_atim = ns_to_ts(ci->atime_ns);
	st->st_mtim = ns_to_ts(ci->mtime_ns);
	st->st_ctim = ns_to_ts(ci->ctime_ns);

	if (S_ISREG(ci->mode) && ci->state == CATALOG_FILE_SEALED) {
		/* What the file's distinct chunks occupy, compressed: what it really costs. */
		st->st_size = (off_t) ci->size;
		st->st_blocks = (blkcnt_t) ((ci->stored + 511) / 512);
	} else if (S_ISREG(ci->mode)) {
		st->st_size = raw.st_size;
		st->st_blocks = raw.st_blocks;
		st->st_blksize = raw.st_blksize ? raw.st_blksize : 4096;
		/* Writes and truncates stamp the staging file; renames and chmod stamp the catalog. */
		st->st_atim = raw.st_atim;
		st->st_mtim = raw.st_mtim;
		if (ts_to_ns(&raw.st_ctim) > ci->ctime_ns)
			st->st_ctim = raw.st_ctim;
	} else if (S_ISDIR(ci->mode)) {
		st->st_size = FS_DIR_SIZE;
		st->st_blocks = FS_DIR_SIZE / 512;
	} else if (S_ISLNK(ci->mode))
		st->st_size = (off_t) ci->size;
	return 0;
}

static int getattr_ino(Fs *fs, uint64_t ino, struct stat *st) {
	CatalogInode ci;
	int r = catalog_inode_get(fs->catalog, ino, &ci);
	if (r < 0)
		return r;
	return inode_stat(fs, &ci, st);
}

void fs_reply_entry(fuse_req_t req, uint64_t ino) {
	Fs *fs = fs_of(req);
	struct fuse_entry_param e = {
		.ino = ino,
		.attr_timeout = FS_ATTR_TIMEOUT,
		.entry_timeout = FS_ATTR_TIMEOUT,
	};
	int r = getattr_ino(fs, ino, &e.attr);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	r = fs_inode_ref(fs, ino, 1, NULL);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	if (fuse_reply_entry(req, &e) < 0)
		fs_inode_forget(fs, ino, 1); /* interrupted: the kernel never saw it */
}

static void op_init(void *userdata, struct fuse_conn_info *conn) {
	Fs *fs = userdata;
	conn->max_write = (unsigned) fs->max_write;
	/*
	 * The kernel takes the smaller of this and its window (128 KiB, or what
	 * main.c set through sysfs before this INIT came: read_ahead_kb): never
	 * lower it.
	 */
	conn->max_readahead = UINT_MAX;
	/* What libfuse can splice a raw file's read reply with (main.c); libfuse wants it said twice. */
	conn->max_read = (unsigned) fs->max_read;
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
	if (conn->capable & FUSE_CAP_SPLICE_READ)
		conn->want |= FUSE_CAP_SPLICE_READ;
	/* O_TRUNC then arrives as a size change before the open, like any truncate. */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	/* Locks stay in the kernel: local-filesystem semantics on a single host. */
	conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
	/* Attributes change only through us, so cached pages stay valid across opens. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
	Fs *fs = fs_of(req);
	uint64_t ino;
	int r = check_name(name);
	if (r >= 0)
		r = catalog_dirent_lookup(fs->catalog, parent, name, &ino);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	fs_reply_entry(req, ino);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
	fs_inode_forget(fs_of(req), ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets) {
	for (size_t k = 0; k < count; k++)
		fs_inode_forget(fs_of(req), forgets[k].ino, forgets[k].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	struct stat st;
	int r = getattr_ino(fs_of(req), ino, &st);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	fuse_reply_attr(req, &st, FS_ATTR_TIMEOUT);
}

/* The run of appends a stream chunks (see FsInode) ends: the file is sealed whole after close. */
static void run_stop(FsInode *i) {
	pthread_mutex_lock(&i->lock);
	i->run_ok = false;
	pthread_mutex_unlock(&i->lock);
}

/* The inode behind an open handle, after the open and the handle's earlier requests (FsInode.handle_sync). */
static FsInode *handle_inode(const struct fuse_file_info *fi) {
	FsInode *i = (FsInode *) (uintptr_t) fi->fh;
	(void) atomic_load_explicit(&i->handle_sync, memory_order_acquire);
	return i;
}

/* A request on a handle, or an open, is done with the inode: what it did comes before a later release. */
static void handle_done(FsInode *i) {
	atomic_fetch_add_explicit(&i->handle_sync, 1, memory_order_release);
}

static int do_setattr(Fs *fs, FsInode *i, struct stat *attr, int to_set, struct stat *ret) {
	CatalogInode ci;
	int r;

	if (to_set & FUSE_SET_ATTR_SIZE) {
		/* Truncating to zero (O_TRUNC) needs none of the old bytes: no copy back. */
		r = fs_data_unseal(fs, i, attr->st_size == 0);
		if (r < 0)
			return r;
	}
	r = fs_data_lock_read(fs, i);
	if (r < 0)
		return r;
	r = catalog_begin(fs->catalog);
	if (r < 0)
		goto out_unlock;
	r = catalog_inode_get(fs->catalog, i->ino, &ci);
	if (r < 0)
		goto fail;

	/*
	 * One timestamp, taken before the staging file is touched: the kernel
	 * stamps it at or after t, and getattr reports the later ctime, so
	 * mtime and ctime agree as on ext4.
	 */
	int64_t t = now_ns();
	if (to_set & FUSE_SET_ATTR_MODE)
		ci.mode = (ci.mode & S_IFMT) | (attr->st_mode & 07777);
	if (to_set & FUSE_SET_ATTR_UID)
		ci.uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		ci.gid = attr->st_gid;
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (!S_ISREG(ci.mode)) {
			r = S_ISDIR(ci.mode) ? -EISDIR : -EINVAL;
			goto fail;
		}
		if (attr->st_size < 0) {
			r = -EINVAL;
			goto fail;
		}
		r = fs_staging_truncate(fs, ci.tier, i->ino, attr->st_size);
		if (r < 0)
			goto fail;
		atomic_fetch_add(&i->data_gen, 1);
		atomic_store(&i->written, true);
		if ((uint64_t) attr->st_size < atomic_load(&i->written_end))
			atomic_store(&i->written_end, (uint64_t) attr->st_size);
		run_stop(i);
	}
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
		struct timespec times[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } };
		if (to_set & FUSE_SET_ATTR_ATIME)
			times[0] = (to_set & FUSE_SET_ATTR_ATIME_NOW) ? (struct timespec) { .tv_nsec = UTIME_NOW }
								      : attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME)
			times[1] = (to_set & FUSE_SET_ATTR_MTIME_NOW) ? (struct timespec) { .tv_nsec = UTIME_NOW }
								      : attr->st_mtim;
		if (S_ISREG(ci.mode) && ci.state == CATALOG_FILE_RAW) {
			r = fs_staging_set_times(fs, ci.tier, i->ino, times);
			if (r < 0)
				goto fail;
		} else {
			if (to_set & FUSE_SET_ATTR_ATIME)
				ci.atime_ns = (to_set & FUSE_SET_ATTR_ATIME_NOW) ? t : ts_to_ns(&attr->st_atim);
			if (to_set & FUSE_SET_ATTR_MTIME)
				ci.mtime_ns = (to_set & FUSE_SET_ATTR_MTIME_NOW) ? t : ts_to_ns(&attr->st_mtim);
		}
	}
	ci.ctime_ns = (to_set & FUSE_SET_ATTR_CTIME) ? ts_to_ns(&attr->st_ctim) : t;

	r = catalog_inode_update(fs->catalog, &ci);
	if (r < 0)
		goto fail;
	r = catalog_commit(fs->catalog);
	if (r >= 0) {
		/* A mode (or owner) that may now have bits a write must clear. */
		atomic_store(&i->privs, -1);
		r = inode_stat(fs, &ci, ret);
	}
	goto out_unlock;

fail:
	catalog_rollback(fs->catalog);
out_unlock:;
	TierFileClass class = (TierFileClass) i->file_class;
	fs_data_unlock(i);
	/* A truncate ended the file's run: its stream goes now, not at close. */
	if ((to_set & FUSE_SET_ATTR_SIZE) && fs->seal_stream)
		fs_stream_written(fs, i, class, FS_RUN_ENDED);
	return r;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
	Fs *fs = fs_of(req);
	FsInode *i;
	struct stat st;
	int r;

	if (fi && fi->fh)
		i = handle_inode(fi);
	else {
		/* No handle: pin the inode (the root has no lookup reference at all). */
		r = fs_inode_pin(fs, ino, true, &i);
		if (r < 0)
			return (void) fuse_reply_err(req, -r);
	}
	r = do_setattr(fs, i, attr, to_set, &st);
	if (!(fi && fi->fh))
		fs_inode_unpin(fs, i);
	else
		handle_done(i);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	fuse_reply_attr(req, &st, FS_ATTR_TIMEOUT);
}

static int handle_attach(Fs *fs, FsInode *i, struct fuse_file_info *fi, int fd) {
	fs_inode_open(fs, i);
	if (fd >= 0) {
		pthread_mutex_lock(&i->lock);
		int none = -1;
		if (atomic_compare_exchange_strong(&i->fd, &none, fd))
			fd = -1;
		pthread_mutex_unlock(&i->lock);
		if (fd >= 0)
			close(fd);
	}
	/* Under data_lock, so a seal cannot delete the staging file between the check and the open. */
	int r = fs_data_lock_read(fs, i);
	if (r >= 0) {
		if (!i->sealed)
			r = fs_staging_fd(fs, i);
		/* Writes below what the file already holds are rewrites (see op_write_buf). */
		struct stat st;
		if (r >= 0 && !i->sealed && !atomic_load(&i->written) && fstat(atomic_load(&i->fd), &st) >= 0)
			atomic_store(&i->written_end, (uint64_t) st.st_size);
		fs_data_unlock(i);
	}
	if (r < 0) {
		(void) fs_inode_release(fs, i, false);
		return r;
	}
	handle_done(i);
	fi->fh = (uintptr_t) i;
	/*
	 * Direct I/O for O_DIRECT opens, and for opens that only write (the
	 * archiver, RMAN): on a cached open the kernel asks for
	 * security.capability before every write() (a FUSE inode never gets
	 * S_NOSEC) and copies the bytes into its page cache too, a third
	 * round trip per MiB and a copy nobody reads.  An O_WRONLY descriptor
	 * cannot be read or mmapped; around each direct write the kernel
	 * writes back and drops other opens' cached pages of the range
	 * (fuse_direct_io(), fuse_direct_write_iter() of 6.18), so their
	 * reads and mappings see the new bytes, as the POSIX suite checks.
	 * What the kernel then leaves to us, clearing suid/sgid and
	 * security.capability, write_kill_privs() does.  Every change of a
	 * file's bytes goes through this kernel, so cached pages stay valid
	 * across opens.
	 */
	if ((fi->flags & O_DIRECT) || (fi->flags & O_ACCMODE) == O_WRONLY)
		fi->direct_io = 1;
	fi->keep_cache = 1;
	return 0;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	Fs *fs = fs_of(req);
	FsInode *i;
	int r;

	/* The kernel holds a lookup reference while it opens; take our own for the handle's lifetime. */
	r = fs_inode_ref(fs, ino, 0, &i);
	if (r >= 0)
		r = handle_attach(fs, i, fi, -1);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	if (fuse_reply_open(req, fi) < 0)
		(void) fs_inode_release(fs, i, false);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
	Fs *fs = fs_of(req);
	struct fuse_entry_param e = {
		.attr_timeout = FS_ATTR_TIMEOUT,
		.entry_timeout = FS_ATTR_TIMEOUT,
	};
	uint64_t ino;
	FsInode *i;
	int fd = -1, r;

	r = fs_node_create(req, parent, name, S_IFREG | (mode & 07777), 0, NULL, &ino, &fd);
	if (r == -EEXIST && !(fi->flags & O_EXCL)) {
		/* Lost a race with another creator: open what is there, as open(2) would. */
		r = getattr_ino(fs, ino, &e.attr);
		if (r >= 0 && !S_ISREG(e.attr.st_mode))
			r = S_ISDIR(e.attr.st_mode) ? -EISDIR : -EEXIST;
	}
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	e.ino = ino;
	r = fs_inode_ref(fs, ino, 1, &i);
	if (r < 0) {
		if (fd >= 0)
			close(fd);
		return (void) fuse_reply_err(req, -r);
	}
	r = handle_attach(fs, i, fi, fd); /* takes fd in all cases */
	if (r < 0) {
		fs_inode_forget(fs, ino, 1);
		return (void) fuse_reply_err(req, -r);
	}
	r = getattr_ino(fs, ino, &e.attr);
	if (r < 0 || fuse_reply_create(req, &e, fi) < 0) {
		if (r < 0)
			fuse_reply_err(req, -r);
		(void) fs_inode_release(fs, i, false);
		fs_inode_forget(fs, ino, 1);
	}
}

/* A file rewritten in place is an online redo log or alike: it stays raw from now on. */
static void mark_passthrough(Fs *fs, uint64_t ino) {
	CatalogInode ci;
	if (catalog_begin(fs->catalog) < 0)
		return;
	if (catalog_inode_get(fs->catalog, ino, &ci) >= 0 && ci.file_class != TIER_CLASS_PASSTHROUGH) {
		ci.file_class = TIER_CLASS_PASSTHROUGH;
		if (catalog_inode_update(fs->catalog, &ci) >= 0) {
			(void) catalog_commit(fs->catalog);
			return;
		}
	}
	catalog_rollback(fs->catalog);
}

/* After the last close of a written file: it is queued for sealing, or stays raw for good if rewritten in place. */
static void file_quiet(Fs *fs, uint64_t ino, bool rewritten, uint64_t bytes) {
	if (rewritten)
		mark_passthrough(fs, ino);
	else
		fs_seal_schedule(fs, ino, bytes);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	Fs *fs = fs_of(req);
	FsInode *i = handle_inode(fi);

	bool rewritten = atomic_load(&i->overwritten);
	uint64_t bytes = atomic_load(&i->written_end);
	bool written = fs_inode_release(fs, i, true);
	if (written)
		file_quiet(fs, ino, rewritten, bytes);
	fuse_reply_err(req, 0);
	/* After the reply: the archiver's close never waits for a statfs. */
	if (written)
		fs_policy_check_space(fs);
}

/* From the restore pipeline's blocks (readahead.c): the reply copies, it does not decompress. */
static void read_sealed(fuse_req_t req, FsInode *i, size_t size, off_t off) {
	Fs *fs = fs_of(req);
	FsReadReply r;
	ssize_t n = fs_readahead_read(fs->readahead, i, (uint64_t) off, size, &r);
	if (n < 0) {
		/* Damaged or unreachable chunks: an error, never wrong bytes. */
		log_error_errno((int) n, "Failed to read inode %llu at %lld: %m", (unsigned long long) i->ino,
				(long long) off);
		fuse_reply_err(req, n == -EBADMSG ? EIO : (int) -n);
	} else
		fuse_reply_iov(req, r.iov, (int) r.n_iov);
	fs_readahead_done(fs->readahead, &r);
}

/* Drops op_read()'s open count; i may be gone after. */
static void read_done(Fs *fs, FsInode *i) {
	uint64_t ino = i->ino;
	bool rewritten = atomic_load(&i->overwritten);
	uint64_t bytes = atomic_load(&i->written_end);
	if (fs_inode_release(fs, i, true))
		file_quiet(fs, ino, rewritten, bytes);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
	Fs *fs = fs_of(req);
	FsInode *i = handle_inode(fi);
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);

	fs_throttle_foreground_read(&fs->throttle);
	/*
	 * The reply goes out under data_lock (a raw reply splices from the
	 * staging file, which a seal must not close meanwhile).  Once it is
	 * out, the kernel may release the handle and forget the inode on other
	 * threads: an open count of our own keeps i (and its staging
	 * descriptor) alive until the lock is let go, and if the handle's own
	 * release came meanwhile, ours is the last close and does its work.
	 */
	fs_inode_open(fs, i);
	int r = fs_data_lock_read(fs, i);
	if (r < 0) {
		read_done(fs, i);
		return (void) fuse_reply_err(req, -r);
	}
	if (i->sealed)
		read_sealed(req, i, size, off);
	else {
		/* libfuse splices straight from the staging file into the reply when it can. */
		buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		buf.buf[0].fd = atomic_load(&i->fd);
		buf.buf[0].pos = off;
		fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
	}
	fs_data_unlock(i);
	read_done(fs, i);
}

/* Takes data_lock shared on a raw file, turning a sealed one back into raw first. */
static int lock_raw(Fs *fs, FsInode *i) {
	for (;;) {
		int r = fs_data_lock_read(fs, i);
		if (r < 0)
			return r;
		if (!i->sealed && atomic_load(&i->fd) >= 0)
			return 0;
		bool sealed = i->sealed;
		fs_data_unlock(i);
		if (!sealed)
			return -EBADF; /* raw but no descriptor: not possible with an open handle */
		r = fs_data_unseal(fs, i, false);
		if (r < 0)
			return r;
	}
}

/*
 * Bookkeeping after a write of [off, end): done under data_lock, after the
 * write.  Returns what it did to the run of appends (see FsInode).
 */
static FsRunChange data_written(FsInode *i, uint64_t off, uint64_t end) {
	FsRunChange change;
	uint64_t prev = atomic_load(&i->written_end);
	if (off < prev)
		atomic_store(&i->overwritten, true);
	while (end > prev && !atomic_compare_exchange_weak(&i->written_end, &prev, end))
		;
	pthread_mutex_lock(&i->lock);
	if (i->run_ok && off == i->run_end) {
		i->run_end = end;
		change = FS_RUN_APPENDED;
	} else if (i->run_ok) {
		i->run_ok = false;
		change = FS_RUN_ENDED;
	} else if (off == 0) {
		i->run_ok = true;
		i->run_epoch++;
		i->run_end = end;
		change = FS_RUN_STARTED;
	} else
		change = FS_RUN_NONE;
	pthread_mutex_unlock(&i->lock);
	atomic_store(&i->written, true);
	atomic_fetch_add(&i->data_gen, 1);
	return change;
}

/*
 * Copies the rest of in (left bytes) to fd at pos.  *ret_exact: a short
 * count or an error consumed no more of in than the count says, so the
 * rest can still be written elsewhere.  That holds for a buffer in memory
 * and for a pipe spliced from; not when libfuse falls back to reading the
 * pipe and writing what it read (a filesystem without splice), where a
 * failed write loses what was read: so splice is forced first, and the
 * fallback is only taken when splice is not supported at all.
 */
static ssize_t write_in(struct fuse_bufvec *in, size_t left, int fd, off_t pos, bool *ret_exact) {
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(left);
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
	out.buf[0].fd = fd;
	out.buf[0].pos = pos;
	*ret_exact = true;
	if (!(in->buf[in->idx].flags & FUSE_BUF_IS_FD))
		return fuse_buf_copy(&out, in, 0);
	ssize_t n = fuse_buf_copy(&out, in, FUSE_BUF_FORCE_SPLICE);
	if (n != -EINVAL)
		return n;
	*ret_exact = false;
	return fuse_buf_copy(&out, in, FUSE_BUF_NO_SPLICE);
}

/*
 * Whether the writer of req has CAP_FSETID, as the kernel's capable() asks
 * it: effective, in the initial user namespace (taken to be the daemon's:
 * (!) a daemon inside a user namespace of its own answers for that one).
 * A writer we cannot look at (gone, or in a pid namespace we do not see)
 * has not.
 */
static bool writer_has_fsetid(const struct fuse_ctx *ctx) {
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = ctx->pid };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	char path[64];
	struct stat mine, theirs;

	if (ctx->pid <= 0 || syscall(SYS_capget, &h, d) < 0)
		return false;
	if (!(d[CAP_TO_INDEX(CAP_FSETID)].effective & CAP_TO_MASK(CAP_FSETID)))
		return false;
	(void) snprintf(path, sizeof(path), "/proc/%d/ns/user", (int) ctx->pid);
	return stat("/proc/self/ns/user", &mine) >= 0 && stat(path, &theirs) >= 0 && mine.st_dev == theirs.st_dev &&
	       mine.st_ino == theirs.st_ino;
}

/* in_group_p(): the writer's fsgid or one of its supplementary groups. */
static bool writer_in_group(fuse_req_t req, const struct fuse_ctx *ctx, gid_t gid) {
	if (ctx->gid == gid)
		return true;
	int n = fuse_req_getgroups(req, 0, NULL);
	if (n <= 0)
		return false;
	_cleanup_free_ gid_t *list = calloc((size_t) n, sizeof(gid_t));
	if (!list)
		return false;
	n = MIN(fuse_req_getgroups(req, n, list), n);
	for (int k = 0; k < n; k++)
		if (list[k] == gid)
			return true;
	return false;
}

/*
 * A write clears what a write on a local filesystem clears
 * (file_remove_privs()): security.capability always; S_ISUID, and S_ISGID
 * if group-executable or the writer is outside the file's group, unless
 * the writer has CAP_FSETID.  Before a cached write the kernel does it
 * itself, but for one case: FUSE's setattr recomputes the bits to clear
 * with the rule from before 6.2 and keeps an S_ISGID without S_IXGRP that
 * a writer outside the group clears on ext4; so every write comes here.
 * Before a direct write the kernel leaves it all to the server, with
 * FUSE_WRITE_KILL_SUIDGID in the WRITE when the writer lacks CAP_FSETID;
 * libfuse 3.14 does not pass that flag on, so the writer is looked at
 * here.  A write from the page cache (an mmap's
 * writeback) clears nothing, as on ext4, and carries no writer.  A
 * cleared mode is told to the kernel before the write is answered, so
 * that nobody executes the new bytes with the old bits.
 * On error nothing is modified.
 */
static int write_kill_privs(fuse_req_t req, Fs *fs, FsInode *i) {
	CatalogInode ci;

	if (atomic_load(&i->privs) == 0)
		return 0;
	int r = catalog_begin(fs->catalog);
	if (r < 0)
		return r;
	r = catalog_inode_get(fs->catalog, i->ino, &ci);
	if (r < 0)
		goto out_rollback;
	int cap = catalog_xattr_get(fs->catalog, i->ino, "security.capability", NULL, 0);
	if (cap < 0 && cap != -ENODATA) {
		r = cap;
		goto out_rollback;
	}
	if (cap < 0 && !(ci.mode & (S_ISUID | S_ISGID))) {
		atomic_store(&i->privs, 0); /* under the catalog's lock: see FsInode.privs */
		r = 0;
		goto out_rollback;
	}
	atomic_store(&i->privs, 1);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	mode_t kill = ci.mode & S_ISUID;
	if ((ci.mode & S_ISGID) && ((ci.mode & S_IXGRP) || !writer_in_group(req, ctx, ci.gid)))
		kill |= S_ISGID;
	if (kill && writer_has_fsetid(ctx))
		kill = 0;
	if (!kill && cap < 0) {
		r = 0;
		goto out_rollback;
	}
	if (cap >= 0) {
		r = catalog_xattr_remove(fs->catalog, i->ino, "security.capability");
		if (r < 0)
			goto out_rollback;
		pthread_mutex_lock(&i->lock);
		i->xattrs = -1;
		pthread_mutex_unlock(&i->lock);
	}
	ci.mode &= ~kill;
	ci.ctime_ns = now_ns();
	r = catalog_inode_update(fs->catalog, &ci);
	if (r < 0)
		goto out_rollback;
	r = catalog_commit(fs->catalog);
	if (r < 0)
		return r;
	fs_data_attrs_changed(fs, i->ino);
	return 0;

out_rollback:
	catalog_rollback(fs->catalog);
	return r;
}

/*
 * A write lands on the file's staging tier.  When that tier is full (below
 * its floor by the count of fs_spill_has_room(), or a real ENOSPC), the
 * file's staging file moves to the next tier with room (fs_spill_move())
 * and the rest of the write goes there: the writer sees no error unless
 * every tier is full.  Bytes acknowledged are never lost: the move copies
 * them all, and a write is only acknowledged for what landed.
 */
static void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			 struct fuse_file_info *fi) {
	Fs *fs = fs_of(req);
	FsInode *i = handle_inode(fi);
	size_t size = fuse_buf_size(in), done = 0;
	unsigned moves = 0;
	ssize_t n = 0;

	int64_t start = fs_throttle_foreground(&fs->throttle);
	if (!fi->writepage) {
		int r = write_kill_privs(req, fs, i);
		if (r < 0) {
			handle_done(i);
			return (void) fuse_reply_err(req, -r);
		}
	}
	while (done < size) {
		FsRunChange change = FS_RUN_NONE;
		bool exact = true;
		int r = lock_raw(fs, i);
		if (r < 0) {
			n = r;
			break;
		}
		uint64_t at = (uint64_t) off + done, end = (uint64_t) off + size;
		uint64_t known = MAX(atomic_load(&i->written_end), at);
		/* Only what grows the file takes room: a rewrite in place (online redo) never moves it by itself. */
		if (end > known && !fs_spill_has_room(fs, atomic_load(&i->staging_tier), end - known))
			n = -ENOSPC;
		else
			n = write_in(in, size - done, atomic_load(&i->fd), (off_t) at, &exact);
		if (n > 0) {
			change = data_written(i, at, at + (uint64_t) n);
			done += (size_t) n;
		}
		TierFileClass class = (TierFileClass) i->file_class;
		/* A file rewritten in place is never sealed: no stream for it. */
		if (change == FS_RUN_STARTED && atomic_load(&i->overwritten))
			change = FS_RUN_NONE;
		fs_data_unlock(i);
		/* The worker does the chunking; this thread only tells it there is more. */
		if (fs->seal_stream && tier_class_is_sealed(class))
			fs_stream_written(fs, i, class, change);
		if (n > 0 && exact)
			continue; /* short: the next copy says why */
		if (!exact || (n != -ENOSPC && n != -EDQUOT) || moves++ >= CONFIG_TIERS_MAX)
			break;
		r = fs_spill_move(fs, i, size - done);
		if (r < 0) {
			n = r;
			break;
		}
	}
	handle_done(i);
	fs_throttle_foreground_wrote(&fs->throttle, start);
	if (done > 0)
		return (void) fuse_reply_write(req, done);
	fuse_reply_err(req, n < 0 ? (int) -n : EIO);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
	Fs *fs = fs_of(req);
	FsInode *i = handle_inode(fi);
	fs_throttle_disk_begin(&fs->throttle);
	int r = fs_data_lock_read(fs, i);
	if (r < 0) {
		handle_done(i);
		fs_throttle_disk_end(&fs->throttle);
		return (void) fuse_reply_err(req, -r);
	}
	/* A sealed file's bytes are durable already; its catalog state is synced below. */
	if (!i->sealed && (datasync ? fdatasync(atomic_load(&i->fd)) : fsync(atomic_load(&i->fd))) < 0)
		r = -errno;
	bool raw = !i->sealed;
	uint32_t tier = atomic_load(&i->staging_tier);
	fs_data_unlock(i);
	handle_done(i);
	/*
	 * The data is only findable after a power loss if its names are
	 * durable too.  Its staging file may have spilled meanwhile: the spill
	 * synced the new one and its directory before its commit.
	 */
	if (r >= 0 && raw)
		r = fs_staging_sync_dir(fs, tier, ino);
	if (r >= 0)
		r = catalog_sync(fs->catalog);
	fs_throttle_disk_end(&fs->throttle);
	if (r < 0)
		log_error_errno(r, "Failed to sync inode %llu: %m", (unsigned long long) ino);
	fuse_reply_err(req, -r);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino) {
	struct statvfs sv;
	/* What new writes can still take, on the hot tier and the tiers they spill to. */
	int r = fs_spill_statfs(fs_of(req), &sv);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	sv.f_namemax = CATALOG_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			 struct fuse_file_info *fi) {
	Fs *fs = fs_of(req);
	FsInode *i = handle_inode(fi);
	int r;

	/* Like a write: a full staging tier hands the file over to the next with room (op_write_buf()). */
	for (unsigned moves = 0;; moves++) {
		r = lock_raw(fs, i);
		if (r < 0)
			break;
		if (fallocate(atomic_load(&i->fd), mode, offset, length) < 0)
			r = -errno;
		else {
			(void) data_written(i, (uint64_t) offset, (uint64_t) offset + (uint64_t) length);
			/* Allocating, punching or zeroing: never part of a run, whatever the offset. */
			run_stop(i);
		}
		TierFileClass class = (TierFileClass) i->file_class;
		fs_data_unlock(i);
		if (r >= 0 && fs->seal_stream)
			fs_stream_written(fs, i, class, FS_RUN_ENDED);
		if ((r != -ENOSPC && r != -EDQUOT) || moves >= CONFIG_TIERS_MAX)
			break;
		r = fs_spill_move(fs, i, (uint64_t) length);
		if (r < 0)
			break;
	}
	handle_done(i);
	fuse_reply_err(req, -r);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi) {
	Fs *fs = fs_of(req);
	FsInode *i = handle_inode(fi);
	int r = fs_data_lock_read(fs, i);
	if (r < 0) {
		handle_done(i);
		return (void) fuse_reply_err(req, -r);
	}
	off_t pos;
	if (!i->sealed) {
		/* Holes are the staging file's holes; SEEK_DATA/SEEK_HOLE ask it directly. */
		pos = lseek(atomic_load(&i->fd), off, whence);
		if (pos < 0)
			pos = -errno;
	} else if (off < 0)
		pos = -EINVAL;
	else if ((uint64_t) off >= i->sealed_size)
		pos = whence == SEEK_DATA || whence == SEEK_HOLE ? -ENXIO : off;
	else
		/* A sealed file reports no holes, as filesystems without SEEK_HOLE support do. */
		pos = whence == SEEK_HOLE ? (off_t) i->sealed_size : off;
	fs_data_unlock(i);
	handle_done(i);
	if (pos < 0)
		return (void) fuse_reply_err(req, (int) -pos);
	fuse_reply_lseek(req, pos);
}

const struct fuse_lowlevel_ops fs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = fs_op_readlink,
	.mknod = fs_op_mknod,
	.mkdir = fs_op_mkdir,
	.unlink = fs_op_unlink,
	.rmdir = fs_op_rmdir,
	.symlink = fs_op_symlink,
	.rename = fs_op_rename,
	.link = fs_op_link,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write_buf = op_write_buf,
	.release = op_release,
	.fsync = op_fsync,
	.readdir = fs_op_readdir,
	.fsyncdir = fs_op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = fs_op_setxattr,
	.getxattr = fs_op_getxattr,
	.listxattr = fs_op_listxattr,
	.removexattr = fs_op_removexattr,
	.fallocate = op_fallocate,
	.lseek = op_lseek,
};
