/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * passthrough — the FUSE ceiling on this kernel and libfuse: a minimal
 * filesystem that hands every request straight to a directory (bench, not
 * part of fratier; the one FUSE program outside fs/).
 *
 *   passthrough [-f] [-d] -o source=DIR[,writeback][,read_ahead_kb=N] MOUNTPOINT
 *
 * The benchmarks mount it beside fratierfs over the same disk, so that
 * "native / passthrough / fratier" in one run says what FUSE itself costs
 * (the request round trips, the copies through /dev/fuse) and what is
 * fratier's own.  It negotiates the connection exactly as fratierfs does
 * (fs/ops.c op_init: 1 MiB max_write, splice in both directions, the
 * kernel's locks, direct I/O for O_DIRECT and write-only opens and
 * keep_cache on every open, requests capped
 * to what libfuse can splice; read_ahead_kb as fratierfs's option of the
 * same name), so that the two differ only in what happens behind the requests;
 * writeback turns on the kernel's writeback cache for measuring it.
 *
 * Only what the benchmarks need: lookup, getattr, setattr (size, mode,
 * times), create, open, read, write, fsync, release, unlink, mkdir, rmdir,
 * readdir, statfs.  Inodes are kept by (st_dev, st_ino) with an O_PATH
 * descriptor each, so a name renamed under it still resolves.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/bdi.h"
#include "common/macros.h"
#include "common/pipe.h"

#define PT_TIMEOUT 1.0 /* as fratierfs's FS_ATTR_TIMEOUT */
#define PT_MAX_WRITE (1u << 20)
#define PT_BUCKETS 1024u

typedef struct PtInode {
	dev_t dev;
	ino_t ino;
	int fd;                 /* O_PATH */
	uint64_t nlookup;       /* protected by Pt.lock */
	struct PtInode *next;   /* protected by Pt.lock */
} PtInode;

typedef struct Pt {
	char *source;
	unsigned writeback;
	unsigned read_ahead_kb;
	size_t max_read;        /* 0: the kernel's (max_pages) */
	size_t max_write;
	PtInode root;
	pthread_mutex_t lock;
	PtInode *buckets[PT_BUCKETS]; /* protected by lock */
} Pt;

typedef struct PtDir {
	DIR *dir;
	off_t pos;              /* offset of the next entry readdir() returns */
	struct dirent *entry;   /* read but not handed out yet, or NULL */
} PtDir;

static Pt *pt_of(fuse_req_t req) {
	return fuse_req_userdata(req);
}

static PtInode *inode_of(fuse_req_t req, fuse_ino_t ino) {
	return ino == FUSE_ROOT_ID ? &pt_of(req)->root : (PtInode *) (uintptr_t) ino;
}

static size_t bucket_of(dev_t dev, ino_t ino) {
	return (size_t) ((ino * UINT64_C(0x9e3779b97f4a7c15)) ^ dev) % PT_BUCKETS;
}

/* Finds or adds the inode of fd (taking fd if added) and takes one lookup reference. */
static int inode_ref(Pt *pt, int fd, const struct stat *st, PtInode **ret) {
	size_t b = bucket_of(st->st_dev, st->st_ino);
	PtInode *i;

	pthread_mutex_lock(&pt->lock);
	for (i = pt->buckets[b]; i; i = i->next)
		if (i->dev == st->st_dev && i->ino == st->st_ino)
			break;
	if (i) {
		i->nlookup++;
		pthread_mutex_unlock(&pt->lock);
		close(fd);
		*ret = i;
		return 0;
	}
	i = calloc(1, sizeof(*i));
	if (!i) {
		pthread_mutex_unlock(&pt->lock);
		close(fd);
		return -ENOMEM;
	}
	*i = (PtInode) { .dev = st->st_dev, .ino = st->st_ino, .fd = fd, .nlookup = 1, .next = pt->buckets[b] };
	pt->buckets[b] = i;
	pthread_mutex_unlock(&pt->lock);
	*ret = i;
	return 0;
}

static void inode_forget(Pt *pt, PtInode *i, uint64_t n) {
	if (i == &pt->root)
		return;
	pthread_mutex_lock(&pt->lock);
	i->nlookup -= MIN(n, i->nlookup);
	if (i->nlookup > 0) {
		pthread_mutex_unlock(&pt->lock);
		return;
	}
	for (PtInode **p = &pt->buckets[bucket_of(i->dev, i->ino)]; *p; p = &(*p)->next)
		if (*p == i) {
			*p = i->next;
			break;
		}
	pthread_mutex_unlock(&pt->lock);
	close(i->fd);
	free(i);
}

/* Looks name up in parent and fills e, with a lookup reference on the result. */
static int entry_get(fuse_req_t req, fuse_ino_t parent, const char *name, struct fuse_entry_param *e) {
	PtInode *i;
	int fd = openat(inode_of(req, parent)->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*e = (struct fuse_entry_param) { .attr_timeout = PT_TIMEOUT, .entry_timeout = PT_TIMEOUT };
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	int r = inode_ref(pt_of(req), fd, &e->attr, &i);
	if (r < 0)
		return r;
	e->ino = (uintptr_t) i;
	return 0;
}

static void pt_init(void *userdata, struct fuse_conn_info *conn) {
	Pt *pt = userdata;
	/* As fratierfs negotiates (fs/ops.c op_init). */
	conn->max_write = (unsigned) pt->max_write;
	/* As fratierfs: never lower the window read_ahead_kb set before this INIT came. */
	conn->max_readahead = UINT_MAX;
	conn->max_read = (unsigned) pt->max_read;
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
	if (conn->capable & FUSE_CAP_SPLICE_READ)
		conn->want |= FUSE_CAP_SPLICE_READ;
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	if (pt->writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
}

static void pt_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
	struct fuse_entry_param e;
	int r = entry_get(req, parent, name, &e);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	if (fuse_reply_entry(req, &e) < 0)
		inode_forget(pt_of(req), (PtInode *) (uintptr_t) e.ino, 1);
}

static void pt_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
	inode_forget(pt_of(req), inode_of(req, ino), nlookup);
	fuse_reply_none(req);
}

static void pt_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets) {
	for (size_t k = 0; k < count; k++)
		inode_forget(pt_of(req), inode_of(req, forgets[k].ino), forgets[k].nlookup);
	fuse_reply_none(req);
}

static void pt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	struct stat st;
	if (fstatat(inode_of(req, ino)->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return (void) fuse_reply_err(req, errno);
	fuse_reply_attr(req, &st, PT_TIMEOUT);
}

static void pt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
	char proc[64];
	int r = 0;

	/* An O_PATH descriptor allows no changes: go through its /proc name unless a handle came along. */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", inode_of(req, ino)->fd);
	if (to_set & FUSE_SET_ATTR_MODE)
		r = fi ? fchmod((int) fi->fh, attr->st_mode) : chmod(proc, attr->st_mode);
	if (r >= 0 && (to_set & FUSE_SET_ATTR_SIZE))
		r = fi ? ftruncate((int) fi->fh, attr->st_size) : truncate(proc, attr->st_size);
	if (r >= 0 && (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		struct timespec t[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } };
		if (to_set & FUSE_SET_ATTR_ATIME)
			t[0] = (to_set & FUSE_SET_ATTR_ATIME_NOW) ? (struct timespec) { .tv_nsec = UTIME_NOW } : attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME)
			t[1] = (to_set & FUSE_SET_ATTR_MTIME_NOW) ? (struct timespec) { .tv_nsec = UTIME_NOW } : attr->st_mtim;
		r = fi ? futimens((int) fi->fh, t) : utimensat(AT_FDCWD, proc, t, 0);
	}
	if (r < 0)
		return (void) fuse_reply_err(req, errno);
	pt_getattr(req, ino, fi);
}

/*
 * With the writeback cache the kernel reads pages of files opened for
 * writing only, and keeps O_APPEND's position itself.
 */
static int open_flags(Pt *pt, int flags) {
	if (pt->writeback && (flags & O_ACCMODE) == O_WRONLY)
		flags = (flags & ~O_ACCMODE) | O_RDWR;
	if (pt->writeback)
		flags &= ~O_APPEND;
	return (flags & ~O_NOFOLLOW) | O_CLOEXEC;
}

/*
 * As fratierfs (fs/ops.c handle_attach()): direct I/O for O_DIRECT opens
 * and for opens that only write, where a cached write costs a GETXATTR
 * round trip and a page-cache copy; the cache kept for every open.  Under
 * the writeback cache a write-only open is cached: that is what it measures.
 */
static void handle_set(Pt *pt, struct fuse_file_info *fi, int fd) {
	fi->fh = (uint64_t) fd;
	if ((fi->flags & O_DIRECT) || (!pt->writeback && (fi->flags & O_ACCMODE) == O_WRONLY))
		fi->direct_io = 1;
	fi->keep_cache = 1;
}

static void pt_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
	struct fuse_entry_param e;
	int fd = openat(inode_of(req, parent)->fd, name, open_flags(pt_of(req), fi->flags) | O_CREAT, mode);
	if (fd < 0)
		return (void) fuse_reply_err(req, errno);
	int r = entry_get(req, parent, name, &e);
	if (r < 0) {
		close(fd);
		return (void) fuse_reply_err(req, -r);
	}
	handle_set(pt_of(req), fi, fd);
	if (fuse_reply_create(req, &e, fi) < 0) {
		close(fd);
		inode_forget(pt_of(req), (PtInode *) (uintptr_t) e.ino, 1);
	}
}

static void pt_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", inode_of(req, ino)->fd);
	int fd = open(proc, open_flags(pt_of(req), fi->flags) & ~O_CREAT);
	if (fd < 0)
		return (void) fuse_reply_err(req, errno);
	handle_set(pt_of(req), fi, fd);
	if (fuse_reply_open(req, fi) < 0)
		close(fd);
}

static void pt_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
	/* Spliced from the descriptor: max_read keeps every reply within the pipe libfuse can get. */
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = (int) fi->fh;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

static void pt_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			 struct fuse_file_info *fi) {
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
	out.buf[0].fd = (int) fi->fh;
	out.buf[0].pos = off;
	ssize_t n = fuse_buf_copy(&out, in, 0);
	if (n < 0)
		return (void) fuse_reply_err(req, (int) -n);
	fuse_reply_write(req, (size_t) n);
}

static void pt_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
	int r = datasync ? fdatasync((int) fi->fh) : fsync((int) fi->fh);
	fuse_reply_err(req, r < 0 ? errno : 0);
}

static void pt_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	close((int) fi->fh);
	fuse_reply_err(req, 0);
}

static void pt_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
	int r = unlinkat(inode_of(req, parent)->fd, name, 0);
	fuse_reply_err(req, r < 0 ? errno : 0);
}

static void pt_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) {
	int r = unlinkat(inode_of(req, parent)->fd, name, AT_REMOVEDIR);
	fuse_reply_err(req, r < 0 ? errno : 0);
}

static void pt_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
	struct fuse_entry_param e;
	if (mkdirat(inode_of(req, parent)->fd, name, mode) < 0)
		return (void) fuse_reply_err(req, errno);
	int r = entry_get(req, parent, name, &e);
	if (r < 0)
		return (void) fuse_reply_err(req, -r);
	if (fuse_reply_entry(req, &e) < 0)
		inode_forget(pt_of(req), (PtInode *) (uintptr_t) e.ino, 1);
}

static void pt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	PtDir *d = calloc(1, sizeof(*d));
	if (!d)
		return (void) fuse_reply_err(req, ENOMEM);
	int fd = openat(inode_of(req, ino)->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d->dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d->dir) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		free(d);
		return (void) fuse_reply_err(req, e);
	}
	fi->fh = (uintptr_t) d;
	if (fuse_reply_open(req, fi) < 0) {
		closedir(d->dir);
		free(d);
	}
}

static void pt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
	PtDir *d = (PtDir *) (uintptr_t) fi->fh;
	_cleanup_free_ char *buf = malloc(size);
	size_t pos = 0;

	if (!buf)
		return (void) fuse_reply_err(req, ENOMEM);
	if (off != d->pos) {
		seekdir(d->dir, off);
		d->entry = NULL;
		d->pos = off;
	}
	for (;;) {
		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dir);
			if (!d->entry) {
				if (errno != 0 && pos == 0)
					return (void) fuse_reply_err(req, errno);
				break;
			}
		}
		struct stat st = { .st_ino = d->entry->d_ino, .st_mode = (mode_t) d->entry->d_type << 12 };
		size_t n = fuse_add_direntry(req, buf + pos, size - pos, d->entry->d_name, &st, d->entry->d_off);
		if (n > size - pos)
			break; /* kept in d->entry for the next call */
		pos += n;
		d->pos = d->entry->d_off;
		d->entry = NULL;
	}
	fuse_reply_buf(req, buf, pos);
}

static void pt_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	PtDir *d = (PtDir *) (uintptr_t) fi->fh;
	closedir(d->dir);
	free(d);
	fuse_reply_err(req, 0);
}

static void pt_statfs(fuse_req_t req, fuse_ino_t ino) {
	struct statvfs sv;
	if (fstatvfs(inode_of(req, ino)->fd, &sv) < 0)
		return (void) fuse_reply_err(req, errno);
	fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops pt_ops = {
	.init = pt_init,
	.lookup = pt_lookup,
	.forget = pt_forget,
	.forget_multi = pt_forget_multi,
	.getattr = pt_getattr,
	.setattr = pt_setattr,
	.create = pt_create,
	.open = pt_open,
	.read = pt_read,
	.write_buf = pt_write_buf,
	.fsync = pt_fsync,
	.release = pt_release,
	.unlink = pt_unlink,
	.rmdir = pt_rmdir,
	.mkdir = pt_mkdir,
	.opendir = pt_opendir,
	.readdir = pt_readdir,
	.releasedir = pt_releasedir,
	.statfs = pt_statfs,
};

static const struct fuse_opt pt_opts[] = {
	{ "source=%s", offsetof(Pt, source), 0 },
	{ "writeback", offsetof(Pt, writeback), 1 },
	{ "read_ahead_kb=%u", offsetof(Pt, read_ahead_kb), 0 },
	FUSE_OPT_END,
};

int main(int argc, char **argv) {
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts = {};
	struct fuse_session *se = NULL;
	Pt pt = { .root.fd = -1, .root.nlookup = 1 };
	int ret = 1;

	pthread_mutex_init(&pt.lock, NULL);
	if (fuse_opt_parse(&args, &pt, pt_opts, NULL) < 0 || fuse_parse_cmdline(&args, &opts) != 0)
		goto out;
	if (opts.show_help || !opts.mountpoint || !pt.source) {
		printf("usage: %s [-f] [-d] -o source=DIR[,writeback][,read_ahead_kb=N] MOUNTPOINT\n"
		       "A reference passthrough filesystem for the benchmarks (bench/README.md).\n",
		       argv[0]);
		ret = opts.show_help ? 0 : 2;
		goto out;
	}
	if (pt.read_ahead_kb > BDI_READ_AHEAD_KB_MAX) {
		fprintf(stderr, "passthrough: read_ahead_kb must be at most %u\n", BDI_READ_AHEAD_KB_MAX);
		goto out;
	}
	pt.root.fd = open(pt.source, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pt.root.fd < 0) {
		fprintf(stderr, "passthrough: %s: %s\n", pt.source, strerror(errno));
		goto out;
	}
	/*
	 * As fratierfs does (fs/main.c): without CAP_SYS_RESOURCE, libfuse
	 * cannot splice a 1 MiB request or reply; requests are then capped to
	 * what it can splice.
	 */
	size_t pipe_max = pipe_capacity_max(2 * PT_MAX_WRITE);
	size_t write_max = pipe_splice_request_max(pipe_max, PT_MAX_WRITE);
	pt.max_write = write_max >= PT_MAX_WRITE / 2 ? write_max : PT_MAX_WRITE;
	size_t splice_max = pipe_splice_reply_max(pipe_max, PT_MAX_WRITE);
	if (splice_max > 0 && splice_max < PT_MAX_WRITE) {
		char opt[64];
		snprintf(opt, sizeof(opt), "max_read=%zu", splice_max);
		if (fuse_opt_add_arg(&args, "-o") < 0 || fuse_opt_add_arg(&args, opt) < 0)
			goto out;
		pt.max_read = splice_max;
	}
	se = fuse_session_new(&args, &pt_ops, sizeof(pt_ops), &pt);
	if (!se)
		goto out;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, opts.mountpoint) != 0)
		goto out_signals;
	if (pt.read_ahead_kb > 0) {
		dev_t dev;
		int r = bdi_of_mountpoint(opts.mountpoint, &dev);
		if (r >= 0)
			r = bdi_set_read_ahead_kb(dev, pt.read_ahead_kb, NULL);
		if (r < 0)
			fprintf(stderr, "passthrough: cannot set read_ahead_kb: %s\n", strerror(-r));
	}
	if (fuse_daemonize(opts.foreground) != 0)
		goto out_unmount;
	struct fuse_loop_config *loop = fuse_loop_cfg_create();
	if (!loop)
		goto out_unmount;
	ret = (opts.singlethread ? fuse_session_loop(se) : fuse_session_loop_mt(se, loop)) != 0;
	fuse_loop_cfg_destroy(loop);
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out:
	if (pt.root.fd >= 0)
		close(pt.root.fd);
	for (size_t b = 0; b < PT_BUCKETS; b++)
		while (pt.buckets[b]) {
			PtInode *i = pt.buckets[b];
			pt.buckets[b] = i->next;
			close(i->fd);
			free(i);
		}
	free(pt.source);
	free(opts.mountpoint);
	fuse_opt_free_args(&args);
	return ret;
}
