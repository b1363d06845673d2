/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * backend-nfs.c — the chunk-store backend over NFSv3 through libnfs.
 *
 * Invariants:
 *  1. A libnfs context is touched only with its connection's lock held, and a
 *     thread holds at most one connection lock at a time (no lock order).
 *  2. Every call runs in with_conn() or file_call(): an error the server
 *     answered (ENOENT, EEXIST, ENOSPC, ...) is returned as is; any other
 *     (deadline passed, reset, refused, a dead socket) drops the connection
 *     — destroys the context, frees its cached handles, bumps its
 *     generation — and the call is tried again on a fresh connection at most
 *     opts.retries more times, then fails with -EIO.  libnfs's own
 *     reconnect is off, so nothing retries without a bound.
 *  3. (!) Only libnfs's async calls are used, each waited for by
 *     conn_wait() against the attempt's deadline.  libnfs 4's sync wrappers
 *     return on a dead socket while their request is still queued with a
 *     pointer to the wrapper's stack, and destroying the context later calls
 *     back into that dead frame.  conn_wait() instead destroys the context
 *     itself, before its caller's Wait goes out of scope, whenever it gives
 *     up: every callback has run or can no longer run when it returns.
 *  4. A dropped connection is reconnected lazily by the next call on it.
 *  5. A file open for writing keeps its writes and COMMIT on one connection.
 *     If that connection's generation changes while the file has writes not
 *     yet committed, the writes may have gone with a restarted server: the
 *     file fails for good (-EIO) and is never reported synced.
 *  6. A cached read handle is used only on the connection that opened it.
 *     unlink() and rename() forget the names in every connection before and
 *     after the change; a handle cached by a pread racing the change is
 *     caught by the server's NFS3ERR_STALE, on which pread looks the name up
 *     again.
 */
#include <fcntl.h>
#include <limits.h>
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw-nfs.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/array.h"
#include "common/clock.h"
#include "common/macros.h"
#include "common/strvec.h"
#include "tier/backend-nfs.h"

/* Read handles cached per connection. */
#define FH_CACHE_SIZE 16
/* "/" + name + NUL: libnfs resolves paths from the export's root. */
#define NFS_PATH_MAX (DEDUP_BACKEND_NAME_MAX + 2)
/* Largest single READ/WRITE we ask for when the server states no smaller maximum. */
#define IO_CHUNK_MAX ((uint64_t) 1 << 20)
/* How often conn_wait() looks at the clock while the server is silent. */
#define POLL_SLICE_MS 100

typedef struct FhSlot {
	char path[NFS_PATH_MAX]; /* "" when free */
	struct nfsfh *fh;
	uint64_t used; /* LRU tick */
} FhSlot;

typedef struct NfsConn {
	pthread_mutex_t lock;      /* held for every use of nfs; see invariant 1 */
	struct nfs_context *nfs;   /* protected by lock; NULL: the next call connects */
	uint64_t generation;       /* protected by lock; +1 at every drop */
	uint64_t deadline_ms;      /* protected by lock; of the attempt running on it */
	FhSlot fhs[FH_CACHE_SIZE]; /* protected by lock */
	uint64_t tick;             /* protected by lock */
	/* Written under lock, read by tier_backend_nfs_stats() without it. */
	atomic_uint_fast64_t rpcs, rpc_ns, rpc_failures;
} NfsConn;

typedef struct NfsBackend {
	DedupBackend base;
	char *url;
	TierNfsOptions opts;
	atomic_uint next; /* round-robin start for picking a connection */
	NfsConn conns[TIER_NFS_CONNECTIONS_MAX];
} NfsBackend;

typedef struct NfsFile {
	NfsBackend *backend;
	NfsConn *conn;            /* every call on the file goes through it (invariant 5) */
	char path[NFS_PATH_MAX];
	struct nfsfh *fh;         /* protected by conn->lock */
	uint64_t fh_generation;   /* conn->generation when fh was opened */
	bool unsynced;            /* writes since the last COMMIT, on generation fh_generation */
	bool failed;              /* sticky: see invariant 5 */
} NfsFile;

static _Thread_local char open_error[256];

static NfsBackend *nfs_backend(DedupBackend *b) {
	return (NfsBackend *) b;
}

static int make_path(const char *name, char ret[static NFS_PATH_MAX]) {
	if (!dedup_backend_name_is_valid(name))
		return -EINVAL;
	ret[0] = '/';
	strcpy(ret + 1, name);
	return 0;
}

/*
 * Whether r is the server's answer to a request it understood (or our own
 * verdict on one), as opposed to a transport failure.
 */
static bool is_server_answer(struct nfs_context *nfs, int r) {
	if (!nfs || nfs_get_fd(nfs) < 0)
		return false;
	switch (-r) {
	case ENOENT:
	case EEXIST:
	case ENOTDIR:
	case EISDIR:
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
	case EACCES:
	case EPERM:
	case EROFS:
	case ENAMETOOLONG:
	case ENOTEMPTY:
	case EINVAL:
	case ESTALE:
	case EXDEV:
	case EMLINK:
	case ENOMEM:
	case EUCLEAN: /* ours: the object is not what the caller says */
		return true;
	default:
		return false;
	}
}

/* One request in flight: what its callback fills in (invariant 3). */
typedef enum WaitKind {
	WAIT_STATUS, /* only the status */
	WAIT_COPY,   /* copy out_size bytes of data (a struct) to out */
	WAIT_READ,   /* copy status bytes of data (at most out_size) to out */
	WAIT_PTR,    /* store the data pointer (a handle) in *(void **) out */
} WaitKind;

typedef struct Wait {
	WaitKind kind;
	void *out;
	size_t out_size;
	bool done;
	int status;
} Wait;

static void wait_cb(int status, struct nfs_context *nfs, void *data, void *private_data) {
	Wait *w = private_data;

	/*
	 * (!) libnfs 4 splits a large READ or WRITE into several RPCs and,
	 * when one fails, reports at once and then again for each of the
	 * others as they finish or are cancelled.  The first report counts.
	 */
	if (w->done)
		return;
	w->done = true;
	w->status = status;
	if (status < 0)
		return;
	switch (w->kind) {
	case WAIT_STATUS:
		break;
	case WAIT_COPY:
		memcpy(w->out, data, w->out_size);
		break;
	case WAIT_READ:
		if ((size_t) status > w->out_size)
			w->status = -EIO; /* more than asked for: never from a sane server */
		else
			memcpy(w->out, data, (size_t) status);
		break;
	case WAIT_PTR:
		*(void **) w->out = data;
		break;
	}
}

static void fh_free(NfsConn *c, struct nfsfh *fh);

/*
 * Destroys c's context and everything tied to it (invariant 2); no-op if
 * there is none.  Never waits: the cached handles are freed as handles of a
 * dead connection.
 */
static void conn_drop(NfsConn *c) {
	struct nfs_context *nfs = TAKE_PTR(c->nfs);

	if (!nfs)
		return;
	for (size_t i = 0; i < FH_CACHE_SIZE; i++) {
		fh_free(c, c->fhs[i].fh);
		c->fhs[i] = (FhSlot) {};
	}
	/* Calls back every request still queued: their Waits are still alive (invariant 3). */
	nfs_destroy_context(nfs);
	c->generation++;
}

/*
 * Runs c's event loop until w is done and nothing else is in flight, or c's
 * deadline passes.  Returns w's status, or -EIO after dropping the
 * connection (deadline, dead socket): then w's callback has run or never
 * will, and no straggler of a split request can call back later into a Wait
 * that is gone.  queued is the async call's result.
 */
static int conn_wait_for(NfsConn *c, Wait *w, int queued) {
	if (queued != 0) {
		conn_drop(c);
		return -EIO;
	}
	while (!w->done || nfs_queue_length(c->nfs) > 0) {
		uint64_t now = monotonic_ms();
		struct pollfd pfd = { .fd = nfs_get_fd(c->nfs), .events = (short) nfs_which_events(c->nfs) };
		if (pfd.fd < 0 || now >= c->deadline_ms)
			break;
		int k = poll(&pfd, 1, (int) MIN(c->deadline_ms - now, (uint64_t) POLL_SLICE_MS));
		if (k < 0 && errno != EINTR)
			break;
		if (nfs_service(c->nfs, k > 0 ? pfd.revents : 0) < 0)
			break;
	}
	if (w->done && nfs_queue_length(c->nfs) == 0)
		return w->status;
	conn_drop(c);
	return -EIO;
}

/* conn_wait_for(), counted for tier_backend_nfs_stats(). */
static int conn_wait(NfsConn *c, Wait *w, int queued) {
	uint64_t start = clock_ns(CLOCK_MONOTONIC);
	int r = conn_wait_for(c, w, queued);
	atomic_fetch_add_explicit(&c->rpcs, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->rpc_ns, clock_ns(CLOCK_MONOTONIC) - start, memory_order_relaxed);
	if (!c->nfs)
		atomic_fetch_add_explicit(&c->rpc_failures, 1, memory_order_relaxed);
	return r;
}

#define WAIT_ON(c, w, call) conn_wait((c), (w), (call))

static int nfs3_open(NfsConn *c, const char *path, int flags, struct nfsfh **ret) {
	Wait w = { .kind = WAIT_PTR, .out = ret };
	return WAIT_ON(c, &w, nfs_open_async(c->nfs, path, flags, wait_cb, &w));
}

static int nfs3_create(NfsConn *c, const char *path, int flags, int mode, struct nfsfh **ret) {
	Wait w = { .kind = WAIT_PTR, .out = ret };
	return WAIT_ON(c, &w, nfs_create_async(c->nfs, path, flags, mode, wait_cb, &w));
}

static int nfs3_fstat(NfsConn *c, struct nfsfh *fh, struct nfs_stat_64 *ret) {
	Wait w = { .kind = WAIT_COPY, .out = ret, .out_size = sizeof(*ret) };
	return WAIT_ON(c, &w, nfs_fstat64_async(c->nfs, fh, wait_cb, &w));
}

static int nfs3_lstat(NfsConn *c, const char *path, struct nfs_stat_64 *ret) {
	Wait w = { .kind = WAIT_COPY, .out = ret, .out_size = sizeof(*ret) };
	return WAIT_ON(c, &w, nfs_lstat64_async(c->nfs, path, wait_cb, &w));
}

static int nfs3_pread(NfsConn *c, struct nfsfh *fh, uint64_t offset, uint64_t count, void *buf) {
	Wait w = { .kind = WAIT_READ, .out = buf, .out_size = count };
	return WAIT_ON(c, &w, nfs_pread_async(c->nfs, fh, offset, count, wait_cb, &w));
}

static int nfs3_pwrite(NfsConn *c, struct nfsfh *fh, uint64_t offset, uint64_t count, const void *buf) {
	Wait w = { .kind = WAIT_STATUS };
	return WAIT_ON(c, &w, nfs_pwrite_async(c->nfs, fh, offset, count, buf, wait_cb, &w));
}

static int nfs3_ftruncate(NfsConn *c, struct nfsfh *fh, uint64_t size) {
	Wait w = { .kind = WAIT_STATUS };
	return WAIT_ON(c, &w, nfs_ftruncate_async(c->nfs, fh, size, wait_cb, &w));
}

static int nfs3_commit(NfsConn *c, struct nfsfh *fh) {
	Wait w = { .kind = WAIT_STATUS };
	return WAIT_ON(c, &w, nfs_fsync_async(c->nfs, fh, wait_cb, &w));
}

static int nfs3_mkdir(NfsConn *c, const char *path) {
	Wait w = { .kind = WAIT_STATUS };
	return WAIT_ON(c, &w, nfs_mkdir2_async(c->nfs, path, 0755, wait_cb, &w));
}

static int nfs3_unlink(NfsConn *c, const char *path) {
	Wait w = { .kind = WAIT_STATUS };
	return WAIT_ON(c, &w, nfs_unlink_async(c->nfs, path, wait_cb, &w));
}

static int nfs3_rename(NfsConn *c, const char *from, const char *to) {
	Wait w = { .kind = WAIT_STATUS };
	return WAIT_ON(c, &w, nfs_rename_async(c->nfs, from, to, wait_cb, &w));
}

static int nfs3_statvfs(NfsConn *c, struct nfs_statvfs_64 *ret) {
	Wait w = { .kind = WAIT_COPY, .out = ret, .out_size = sizeof(*ret) };
	return WAIT_ON(c, &w, nfs_statvfs64_async(c->nfs, "/", wait_cb, &w));
}

static int nfs3_opendir(NfsConn *c, const char *path, struct nfsdir **ret) {
	Wait w = { .kind = WAIT_PTR, .out = ret };
	return WAIT_ON(c, &w, nfs_opendir_async(c->nfs, path, wait_cb, &w));
}

/*
 * Frees a handle.  (!) libnfs's close of a handle with writes not yet
 * committed first sends a COMMIT: on a live connection it is waited for like
 * any request; without one (c->nfs NULL: the handle's connection is gone) a
 * scratch context that is never connected is destroyed at once, which
 * cancels that COMMIT instead of waiting for a server.
 */
static void fh_free(NfsConn *c, struct nfsfh *fh) {
	Wait w = { .kind = WAIT_STATUS };

	if (!fh)
		return;
	if (c->nfs) {
		(void) WAIT_ON(c, &w, nfs_close_async(c->nfs, fh, wait_cb, &w));
		return;
	}
	struct nfs_context *tmp = nfs_init_context();
	if (!tmp)
		return; /* leaks one handle rather than touching a context we do not hold */
	(void) nfs_close_async(tmp, fh, wait_cb, &w);
	nfs_destroy_context(tmp);
}

/* libnfs reads version= from the URL; version 4 cannot write (libnfs 4), so only 3 is accepted. */
static bool url_version_is_3(const char *url) {
	const char *q = strchr(url, '?');
	while (q) {
		q++;
		if (strncmp(q, "version=", 8) == 0 && !(q[8] == '3' && (q[9] == '\0' || q[9] == '&')))
			return false;
		q = strchr(q, '&');
	}
	return true;
}

/* Connects c (its lock held) within one timeout; error messages go to err when given. */
static int conn_connect(NfsBackend *n, NfsConn *c, char *err, size_t err_size) {
	struct nfs_context *nfs = nfs_init_context();
	Wait w = { .kind = WAIT_STATUS };
	int r;

	if (!nfs)
		return -ENOMEM;
	struct nfs_url *u = nfs_parse_url_dir(nfs, n->url);
	if (!u) {
		if (err)
			snprintf(err, err_size, "bad NFS URL \"%s\": %s", n->url, nfs_get_error(nfs));
		nfs_destroy_context(nfs);
		return -EINVAL;
	}
	/* After the URL, which may carry its own settings: these are ours (invariant 2). */
	nfs_set_version(nfs, NFS_V3);
	nfs_set_autoreconnect(nfs, 0);
	/* Other connections change the export behind this one's back. */
	nfs_set_dircache(nfs, 0);

	c->nfs = nfs;
	c->deadline_ms = monotonic_ms() + n->opts.timeout_ms;
	r = WAIT_ON(c, &w, nfs_mount_async(nfs, u->server, u->path, wait_cb, &w));
	if (r < 0) {
		if (err)
			snprintf(err, err_size, "cannot mount %s:%s: %s", u->server, u->path,
				 r == -EIO ? "no answer in time" : strerror(-r));
		conn_drop(c);
		nfs_destroy_url(u);
		/* A refused export is an answer; anything else is the server not answering. */
		return r == -ENOENT || r == -EACCES || r == -ENOMEM ? r : -EIO;
	}
	nfs_destroy_url(u);
	return 0;
}

static NfsConn *conn_get(NfsBackend *n) {
	unsigned start = atomic_fetch_add(&n->next, 1);
	for (unsigned i = 0; i < n->opts.connections; i++) {
		NfsConn *c = n->conns + (start + i) % n->opts.connections;
		if (pthread_mutex_trylock(&c->lock) == 0)
			return c;
	}
	NfsConn *c = n->conns + start % n->opts.connections;
	pthread_mutex_lock(&c->lock);
	return c;
}

/*
 * Whether c's idle connection is still up.  NFSv3 servers never speak
 * unasked and every request is waited for, so an idle socket that is
 * readable or hung up was closed by the server: after a server restart this
 * finds every stale connection before a call is spent on it.
 */
static bool conn_is_alive(NfsConn *c) {
	struct pollfd pfd = { .fd = c->nfs ? nfs_get_fd(c->nfs) : -1, .events = POLLIN };
	return pfd.fd >= 0 && poll(&pfd, 1, 0) == 0;
}

/* Connects c if it is not; any failure but -ENOMEM counts as the transport's. */
static int conn_ensure(NfsBackend *n, NfsConn *c) {
	if (conn_is_alive(c))
		return 0;
	conn_drop(c);
	int r = conn_connect(n, c, NULL, 0);
	if (r < 0 && r != -ENOMEM)
		atomic_fetch_add_explicit(&c->rpc_failures, 1, memory_order_relaxed);
	return r == -ENOMEM ? r : r < 0 ? -EIO : 0;
}

/* Runs op on a connection under invariant 2; attempt counts from 0. */
typedef int (*ConnOp)(NfsConn *c, void *arg, unsigned attempt);

static int with_conn(NfsBackend *n, ConnOp op, void *arg) {
	for (unsigned attempt = 0; attempt <= n->opts.retries; attempt++) {
		NfsConn *c = conn_get(n);
		int r = conn_ensure(n, c);
		if (r == -ENOMEM) {
			pthread_mutex_unlock(&c->lock);
			return r;
		}
		if (r == 0) {
			c->deadline_ms = monotonic_ms() + n->opts.timeout_ms;
			r = op(c, arg, attempt);
			if (r >= 0 || is_server_answer(c->nfs, r)) {
				pthread_mutex_unlock(&c->lock);
				return r;
			}
			conn_drop(c);
		}
		pthread_mutex_unlock(&c->lock);
	}
	return -EIO;
}

/* Forgets path's cached handle in every connection, one lock at a time. */
static void forget_everywhere(NfsBackend *n, const char *path) {
	for (unsigned i = 0; i < n->opts.connections; i++) {
		NfsConn *c = n->conns + i;
		pthread_mutex_lock(&c->lock);
		for (size_t j = 0; j < FH_CACHE_SIZE; j++) {
			FhSlot *s = c->fhs + j;
			if (s->fh && strcmp(s->path, path) == 0) {
				struct nfsfh *fh = s->fh;
				*s = (FhSlot) {};
				fh_free(c, fh);
			}
		}
		pthread_mutex_unlock(&c->lock);
	}
}

/* A read handle for path on c, from the cache or a fresh lookup. */
static int conn_read_fh(NfsConn *c, const char *path, FhSlot **ret) {
	FhSlot *victim = NULL;
	struct nfsfh *fh;

	for (size_t i = 0; i < FH_CACHE_SIZE; i++) {
		FhSlot *s = c->fhs + i;
		if (s->fh && strcmp(s->path, path) == 0) {
			s->used = ++c->tick;
			*ret = s;
			return 0;
		}
		if (victim && !victim->fh)
			continue;
		if (!s->fh || !victim || s->used < victim->used)
			victim = s;
	}
	int r = nfs3_open(c, path, O_RDONLY, &fh);
	if (r < 0)
		return r;
	struct nfsfh *old = victim->fh;
	*victim = (FhSlot) { .fh = fh, .used = ++c->tick };
	strcpy(victim->path, path);
	fh_free(c, old); /* a read handle: freed without a request */
	*ret = victim;
	return 0;
}

/* Makes every parent directory of path ("/a/b/name"); MKDIR is synchronous (RFC 1813 §3.3.9). */
static int make_parents(NfsConn *c, const char *path) {
	char dir[NFS_PATH_MAX];
	size_t len = strlen(path);

	memcpy(dir, path, len + 1);
	for (size_t i = 1; i < len; i++) {
		if (dir[i] != '/')
			continue;
		dir[i] = '\0';
		int r = nfs3_mkdir(c, dir);
		if (r < 0 && r != -EEXIST)
			return r;
		dir[i] = '/';
	}
	return 0;
}

typedef struct OpenArgs {
	const char *path;
	bool create;
	uint64_t size;
	NfsConn *conn;
	struct nfsfh *fh;
	uint64_t generation;
} OpenArgs;

static int op_open_write(NfsConn *c, void *arg, unsigned attempt) {
	OpenArgs *a = arg;
	struct nfsfh *fh = NULL;
	struct nfs_stat_64 st;
	int r;

	if (a->create) {
		/* CREATE is synchronous (RFC 1813 §3.3.8): the name is durable when it returns. */
		r = nfs3_create(c, a->path, O_RDWR | O_EXCL, 0644, &fh);
		if (r == -ENOENT) {
			r = make_parents(c, a->path);
			if (r < 0)
				return r;
			r = nfs3_create(c, a->path, O_RDWR | O_EXCL, 0644, &fh);
		}
		/* Also what a retried CREATE that did happen looks like. */
		if (r == -EEXIST)
			r = nfs3_open(c, a->path, O_RDWR, &fh);
	} else
		r = nfs3_open(c, a->path, O_RDWR, &fh);
	if (r < 0)
		return r;

	r = nfs3_fstat(c, fh, &st);
	if (r < 0)
		goto out_close;
	if (!S_ISREG(st.nfs_mode) || st.nfs_size < a->size) {
		r = -EUCLEAN;
		goto out_close;
	}
	/* SETATTR is synchronous too: the cut is durable. */
	if (st.nfs_size > a->size) {
		r = nfs3_ftruncate(c, fh, a->size);
		if (r < 0)
			goto out_close;
	}
	a->conn = c;
	a->fh = fh;
	a->generation = c->generation;
	return 0;

out_close:
	fh_free(c, fh);
	return r;
}

static int nfs_open_write(DedupBackend *b, const char *name, bool create, uint64_t size, DedupBackendFile **ret) {
	NfsBackend *n = nfs_backend(b);
	OpenArgs a = { .create = create, .size = size };
	char path[NFS_PATH_MAX];
	int r;

	if (make_path(name, path) < 0 || size > INT64_MAX)
		return -EINVAL;
	NfsFile *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	a.path = path;
	r = with_conn(n, op_open_write, &a);
	if (r < 0) {
		free(f);
		return r;
	}
	f->backend = n;
	f->conn = a.conn;
	strcpy(f->path, path);
	f->fh = a.fh;
	f->fh_generation = a.generation;
	*ret = (DedupBackendFile *) f;
	return 0;
}

/*
 * Runs op on the file under invariants 2 and 5, on the file's connection,
 * reconnecting and reopening the file's handle as needed.
 */
typedef int (*FileOp)(NfsFile *f, void *arg);

static int file_call(NfsFile *f, FileOp op, void *arg) {
	NfsConn *c = f->conn;
	int r = -EIO;

	pthread_mutex_lock(&c->lock);
	for (unsigned attempt = 0; attempt <= f->backend->opts.retries; attempt++) {
		r = conn_ensure(f->backend, c);
		if (r == -ENOMEM)
			break;
		if (f->fh_generation != c->generation && f->unsynced)
			f->failed = true;
		if (f->failed) {
			r = -EIO;
			break;
		}
		if (r < 0)
			continue;
		c->deadline_ms = monotonic_ms() + f->backend->opts.timeout_ms;
		if (f->fh_generation != c->generation) {
			struct nfsfh *fh;
			r = nfs3_open(c, f->path, O_RDWR, &fh);
			if (r < 0) {
				if (is_server_answer(c->nfs, r))
					break;
				conn_drop(c);
				r = -EIO;
				continue;
			}
			/* The old handle's connection is gone: fh_free() needs no live one for it. */
			struct nfs_context *live = TAKE_PTR(c->nfs);
			fh_free(c, f->fh);
			c->nfs = live;
			f->fh = fh;
			f->fh_generation = c->generation;
		}
		r = op(f, arg);
		if (r >= 0 || is_server_answer(c->nfs, r))
			break;
		conn_drop(c);
		if (f->unsynced)
			f->failed = true;
		r = -EIO;
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

typedef struct WriteArgs {
	const uint8_t *buf;
	size_t len;
	uint64_t offset;
} WriteArgs;

static int op_pwrite(NfsFile *f, void *arg) {
	WriteArgs *a = arg;
	NfsConn *c = f->conn;
	uint64_t max = MIN(nfs_get_writemax(c->nfs) ?: IO_CHUNK_MAX, IO_CHUNK_MAX);
	size_t done = 0;

	/* Before the WRITE: one that fails may still have reached the server. */
	f->unsynced = true;
	while (done < a->len) {
		uint64_t count = MIN((uint64_t) (a->len - done), max);
		int r = nfs3_pwrite(c, f->fh, a->offset + done, count, a->buf + done);
		if (r == -EFAULT) {
			/*
			 * (!) libnfs 4 reports a WRITE the server refused as -EFAULT,
			 * hiding NFS3ERR_NOSPC: a full export is told by its free
			 * space.  Any other refusal is -EIO.
			 */
			struct nfs_statvfs_64 st;
			r = nfs3_statvfs(c, &st);
			if (r < 0)
				return r;
			return st.f_bavail * st.f_frsize < count ? -ENOSPC : -EIO;
		}
		if (r < 0)
			return r;
		if (r == 0)
			return -EIO;
		done += (size_t) r;
	}
	return 0;
}

static int nfs_file_pwrite(DedupBackendFile *file, const void *buf, size_t len, uint64_t offset) {
	WriteArgs a = { .buf = buf, .len = len, .offset = offset };
	if (offset > INT64_MAX || len > INT64_MAX - offset)
		return -EINVAL;
	return file_call((NfsFile *) file, op_pwrite, &a);
}

static int op_truncate(NfsFile *f, void *arg) {
	return nfs3_ftruncate(f->conn, f->fh, *(uint64_t *) arg);
}

static int nfs_file_truncate(DedupBackendFile *file, uint64_t size) {
	if (size > INT64_MAX)
		return -EINVAL;
	return file_call((NfsFile *) file, op_truncate, &size);
}

static int op_sync(NfsFile *f, void *arg) {
	if (!f->unsynced)
		return 0;
	int r = nfs3_commit(f->conn, f->fh);
	if (r < 0)
		return r;
	/* Still under the connection's lock: the generation cannot have moved since the WRITEs. */
	f->unsynced = false;
	return 0;
}

static int nfs_file_sync(DedupBackendFile *file) {
	return file_call((NfsFile *) file, op_sync, NULL);
}

static void nfs_file_close(DedupBackendFile *file) {
	NfsFile *f = (NfsFile *) file;
	NfsConn *c;

	if (!f)
		return;
	c = f->conn;
	pthread_mutex_lock(&c->lock);
	if (f->fh_generation == c->generation) {
		c->deadline_ms = monotonic_ms() + f->backend->opts.timeout_ms;
		fh_free(c, f->fh);
	} else {
		/* A handle of a dropped generation belongs to no live context. */
		struct nfs_context *live = TAKE_PTR(c->nfs);
		fh_free(c, f->fh);
		c->nfs = live;
	}
	pthread_mutex_unlock(&c->lock);
	free(f);
}

typedef struct ReadArgs {
	const char *path;
	uint8_t *buf;
	size_t len;
	uint64_t offset;
} ReadArgs;

static int op_pread(NfsConn *c, void *arg, unsigned attempt) {
	ReadArgs *a = arg;
	uint64_t max = MIN(nfs_get_readmax(c->nfs) ?: IO_CHUNK_MAX, IO_CHUNK_MAX);
	bool looked_up_again = false;
	FhSlot *slot;
	size_t done = 0;
	int r;

	r = conn_read_fh(c, a->path, &slot);
	if (r < 0)
		return r;
	while (done < a->len) {
		uint64_t count = MIN((uint64_t) (a->len - done), max);
		r = nfs3_pread(c, slot->fh, a->offset + done, count, a->buf + done);
		/*
		 * The name now means another file, or none (invariant 6).  (!)
		 * libnfs 4 reports a READ the server refused, as it refuses a
		 * stale handle, as -EFAULT.
		 */
		if ((r == -ESTALE || r == -EFAULT) && !looked_up_again) {
			struct nfsfh *fh = slot->fh;
			*slot = (FhSlot) {};
			fh_free(c, fh);
			looked_up_again = true;
			r = conn_read_fh(c, a->path, &slot);
			if (r < 0)
				return r;
			continue;
		}
		if (r < 0)
			return r;
		if (r == 0)
			break;
		done += (size_t) r;
	}
	return (int) done; /* at most INT_MAX: nfs_backend_pread() */
}

static ssize_t nfs_backend_pread(DedupBackend *b, const char *name, void *buf, size_t len, uint64_t offset) {
	ReadArgs a = { .buf = buf, .len = len, .offset = offset };
	char path[NFS_PATH_MAX];

	/* op results travel as int: one call reads at most INT_MAX bytes (the store reads far less). */
	if (make_path(name, path) < 0 || offset > INT64_MAX || len > INT_MAX)
		return -EINVAL;
	a.path = path;
	return with_conn(nfs_backend(b), op_pread, &a);
}

typedef struct SizeArgs {
	const char *path;
	uint64_t size;
} SizeArgs;

static int op_size(NfsConn *c, void *arg, unsigned attempt) {
	SizeArgs *a = arg;
	struct nfs_stat_64 st;
	int r = nfs3_lstat(c, a->path, &st);
	if (r < 0)
		return r;
	if (!S_ISREG(st.nfs_mode))
		return -EUCLEAN;
	a->size = st.nfs_size;
	return 0;
}

static int nfs_backend_size(DedupBackend *b, const char *name, uint64_t *ret) {
	char path[NFS_PATH_MAX];
	SizeArgs a = { .path = path };

	if (make_path(name, path) < 0)
		return -EINVAL;
	int r = with_conn(nfs_backend(b), op_size, &a);
	if (r < 0)
		return r;
	*ret = a.size;
	return 0;
}

static int op_unlink(NfsConn *c, void *arg, unsigned attempt) {
	/* (!) A REMOVE retried after a lost reply finds nothing: -ENOENT, though it did remove. */
	return nfs3_unlink(c, arg);
}

static int nfs_backend_unlink(DedupBackend *b, const char *name) {
	NfsBackend *n = nfs_backend(b);
	char path[NFS_PATH_MAX];

	if (make_path(name, path) < 0)
		return -EINVAL;
	forget_everywhere(n, path);
	int r = with_conn(n, op_unlink, path);
	forget_everywhere(n, path);
	return r;
}

typedef struct RenameArgs {
	const char *from, *to;
} RenameArgs;

static int op_rename(NfsConn *c, void *arg, unsigned attempt) {
	RenameArgs *a = arg;
	struct nfs_stat_64 st;

	int r = nfs3_rename(c, a->from, a->to);
	if (r == -ENOENT) {
		/* Either `from` is missing or `to`'s directory is: the latter is ours to make. */
		r = nfs3_lstat(c, a->from, &st);
		if (r == 0)
			r = make_parents(c, a->to);
		if (r == 0)
			r = nfs3_rename(c, a->from, a->to);
	}
	/* A RENAME retried after a lost reply: `from` is gone because it is at `to`. */
	if (r == -ENOENT && attempt > 0 && nfs3_lstat(c, a->to, &st) == 0)
		r = 0;
	return r;
}

static int nfs_backend_rename(DedupBackend *b, const char *from, const char *to) {
	NfsBackend *n = nfs_backend(b);
	char from_path[NFS_PATH_MAX], to_path[NFS_PATH_MAX];
	RenameArgs a = { .from = from_path, .to = to_path };

	if (make_path(from, from_path) < 0 || make_path(to, to_path) < 0)
		return -EINVAL;
	forget_everywhere(n, from_path);
	forget_everywhere(n, to_path);
	int r = with_conn(n, op_rename, &a);
	forget_everywhere(n, from_path);
	forget_everywhere(n, to_path);
	return r;
}

static int op_statfs(NfsConn *c, void *arg, unsigned attempt) {
	DedupBackendStatfs *ret = arg;
	struct nfs_statvfs_64 st;
	int r = nfs3_statvfs(c, &st);
	if (r < 0)
		return r;
	*ret = (DedupBackendStatfs) {
		.total = st.f_blocks * st.f_frsize,
		.free = st.f_bfree * st.f_frsize,
		.avail = st.f_bavail * st.f_frsize,
	};
	return 0;
}

static int nfs_backend_statfs(DedupBackend *b, DedupBackendStatfs *ret) {
	return with_conn(nfs_backend(b), op_statfs, ret);
}
typedef struct ListArgs {
	const char *prefix;
	StrVec names; /* handed to the callback only once the listing is complete */
} ListArgs;

typedef struct DirEntry {
	char name[NAME_MAX + 1];
	bool is_dir;
} DirEntry;

/* Lists path ("/" + name, name in path + 1) into l; path has room for NFS_PATH_MAX. */
static int list_dir(NfsConn *c, char *path, size_t len, StrVec *l) {
	_cleanup_free_ DirEntry *entries = NULL;
	size_t n_entries = 0, allocated = 0;
	struct nfsdir *dir;
	struct nfsdirent *de;
	int r = nfs3_opendir(c, path, &dir);
	if (r < 0)
		return r == -ENOENT ? 0 : r;

	/* The whole directory came with the open: take it and close before any further request. */
	while ((de = nfs_readdir(c->nfs, dir))) {
		size_t n = strlen(de->name);
		if (strcmp(de->name, ".") == 0 || strcmp(de->name, "..") == 0 || n > NAME_MAX)
			continue;
		if (de->type != NF3DIR && de->type != NF3REG)
			continue;
		r = ARRAY_RESERVE_ONE(entries, allocated, n_entries, 64);
		if (r < 0)
			break;
		memcpy(entries[n_entries].name, de->name, n + 1);
		entries[n_entries++].is_dir = de->type == NF3DIR;
	}
	nfs_closedir(c->nfs, dir);

	for (size_t i = 0; r >= 0 && i < n_entries; i++) {
		size_t n = strlen(entries[i].name);
		if (len + 1 + n > DEDUP_BACKEND_NAME_MAX + 1)
			continue; /* not a name the store could have made */
		path[len] = '/';
		memcpy(path + len + 1, entries[i].name, n + 1);
		if (dedup_backend_name_is_valid(path + 1))
			r = entries[i].is_dir ? list_dir(c, path, len + 1 + n, l) : strvec_push(l, path + 1);
		path[len] = '\0';
	}
	return r;
}

static int op_list(NfsConn *c, void *arg, unsigned attempt) {
	ListArgs *a = arg;
	char path[NFS_PATH_MAX];

	strvec_done(&a->names); /* a retry starts over */
	int r = make_path(a->prefix, path);
	if (r < 0)
		return r;
	return list_dir(c, path, strlen(path), &a->names);
}

static int nfs_backend_list(DedupBackend *b, const char *prefix, int (*cb)(const char *name, void *userdata),
			    void *userdata) {
	ListArgs a = { .prefix = prefix };
	int r;

	if (!dedup_backend_name_is_valid(prefix))
		return -EINVAL;
	/* Collected first, so a retry never shows cb a name twice and cb runs with no lock held. */
	r = with_conn(nfs_backend(b), op_list, &a);
	for (size_t i = 0; r >= 0 && i < a.names.n; i++) {
		int k = cb(a.names.names[i], userdata);
		if (k < 0)
			r = k;
	}
	strvec_done(&a.names);
	return r < 0 ? r : 0;
}

static void nfs_backend_free(DedupBackend *b) {
	NfsBackend *n = nfs_backend(b);
	for (unsigned i = 0; i < n->opts.connections; i++) {
		conn_drop(n->conns + i);
		pthread_mutex_destroy(&n->conns[i].lock);
	}
	free(n->url);
	free(n);
}

static const DedupBackendOps nfs_ops = {
	.open_write = nfs_open_write,
	.pwrite = nfs_file_pwrite,
	.truncate = nfs_file_truncate,
	.sync = nfs_file_sync,
	.close = nfs_file_close,
	.pread = nfs_backend_pread,
	.size = nfs_backend_size,
	.unlink = nfs_backend_unlink,
	.list = nfs_backend_list,
	.free = nfs_backend_free,
	.rename = nfs_backend_rename,
	.statfs = nfs_backend_statfs,
};

void tier_backend_nfs_stats(DedupBackend *b, TierNfsStats *ret) {
	NfsBackend *n = nfs_backend(b);
	*ret = (TierNfsStats) {};
	for (unsigned i = 0; i < TIER_NFS_CONNECTIONS_MAX; i++) {
		ret->rpcs += atomic_load_explicit(&n->conns[i].rpcs, memory_order_relaxed);
		ret->rpc_ns += atomic_load_explicit(&n->conns[i].rpc_ns, memory_order_relaxed);
		ret->failures += atomic_load_explicit(&n->conns[i].rpc_failures, memory_order_relaxed);
	}
}

const char *tier_backend_nfs_open_error(void) {
	return open_error;
}

int tier_backend_nfs_open(const char *url, const TierNfsOptions *opts, DedupBackend **ret) {
	TierNfsOptions o = opts ? *opts : TIER_NFS_OPTIONS_DEFAULT;
	int r;

	open_error[0] = '\0';
	if (o.timeout_ms == 0 || o.timeout_ms > TIER_NFS_TIMEOUT_MS_MAX || o.retries > TIER_NFS_RETRIES_MAX ||
	    o.connections == 0 || o.connections > TIER_NFS_CONNECTIONS_MAX) {
		snprintf(open_error, sizeof(open_error), "NFS options out of range");
		return -EINVAL;
	}
	if (strncmp(url, "nfs://", 6) != 0 || !url_version_is_3(url)) {
		snprintf(open_error, sizeof(open_error), "bad NFS URL \"%s\": want nfs://HOST/EXPORT[?...], NFSv3",
			 url);
		return -EINVAL;
	}

	NfsBackend *n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->base.ops = &nfs_ops;
	n->opts = o;
	for (unsigned i = 0; i < o.connections; i++)
		pthread_mutex_init(&n->conns[i].lock, NULL);
	n->url = strdup(url);
	if (!n->url) {
		r = -ENOMEM;
		goto out_free;
	}

	pthread_mutex_lock(&n->conns[0].lock);
	r = conn_connect(n, n->conns, open_error, sizeof(open_error));
	pthread_mutex_unlock(&n->conns[0].lock);
	if (r < 0)
		goto out_free;
	*ret = &n->base;
	return 0;

out_free:
	for (unsigned i = 0; i < o.connections; i++)
		pthread_mutex_destroy(&n->conns[i].lock);
	free(n->url);
	free(n);
	return r;
}
