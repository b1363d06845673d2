/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * control.c — the control socket tierctl talks to (protocol:
 * docs/CONTROL.md, common/ctlproto.h).
 *
 * One listener thread accepts connections on a Unix socket and hands each
 * to a worker thread of its own; a connection carries one request and its
 * reply frames.  Who may do what comes from the peer's credentials
 * (SO_PEERCRED, SO_PEERGROUPS), checked the way the kernel checks the
 * mount:
 *   - reports (status, df, du, ls, report, policy): whoever may read the
 *     mount's root directory (root; the daemon's user; with allow_other,
 *     anyone the root's mode bits let read), and du/ls need search
 *     permission on every directory on the way and read permission on the
 *     directories they list;
 *   - gc, scrub, migrate and recall: root, the daemon's user, or the owner
 *     of the root directory.
 *
 * Invariants:
 *  1. Reports read the catalog through a read-only connection of their own
 *     (catalog_open_reader()): they never take the daemon's catalog lock, so
 *     a long report cannot stall the filesystem, whatever its size.
 *  2. At most CONTROL_CONNECTIONS_MAX connections are served at once; one
 *     more is told so and closed.  A request must arrive within
 *     CONTROL_REQUEST_TIMEOUT_MS and every send completes within
 *     CONTROL_SEND_TIMEOUT_S, so a stuck client costs one worker for a
 *     bounded time and nothing else.
 *  3. Every request is validated by ctl_request_parse() before anything is
 *     done; a refusal is a "done" frame with status error, errno and a
 *     message, never a silent close.
 *  4. Stopping (fs_control_stop()) wakes the listener, shuts every
 *     connection down and waits for the workers; a scrub stops after the
 *     container it is verifying, a collection runs to its end.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/ctlproto.h"
#include "common/log.h"
#include "common/macros.h"
#include "fs/fs-internal.h"
#include "tier/backend-nfs.h"

#define CONTROL_CONNECTIONS_MAX 16
#define CONTROL_REQUEST_TIMEOUT_MS 5000
#define CONTROL_SEND_TIMEOUT_S 10
/* How long a finished connection waits for the client to close before closing itself. */
#define CONTROL_DRAIN_MS 1000
#define CONTROL_SAMPLE_INTERVAL_MS 10000
/* Samples kept for throughput: one minute at CONTROL_SAMPLE_INTERVAL_MS. */
#define CONTROL_SAMPLES 7
/* A data frame is sent once it holds this much (well under CTL_FRAME_SIZE_MAX, escapes included). */
#define CONTROL_FRAME_BYTES ((size_t) 1 << 20)
#define CONTROL_PROGRESS_INTERVAL_NS (INT64_C(250) * 1000000)
#define CONTROL_DIR_BATCH 256
/* Samples of usage sent with a report at most (history.c keeps a year of hourly ones). */
#define CONTROL_HISTORY_POINTS 240
#define CONTROL_PATH_DEPTH_MAX 4096

typedef struct Sample {
	int64_t t_ns;
	uint64_t sealed_bytes;
	uint64_t stored_bytes;
} Sample;

struct FsControl {
	Fs *fs;
	char *path;
	int listen_fd;
	int wake[2];
	pthread_t listener;
	bool listener_started;
	uid_t owner;              /* the daemon's user */
	int64_t started_ns;
	atomic_bool stopping;
	atomic_bool scrub_running;

	pthread_mutex_t lock;     /* order: taken with no other lock held */
	pthread_cond_t idle;
	int conn_fds[CONTROL_CONNECTIONS_MAX]; /* protected by lock; -1 = free */
	unsigned n_conns;                      /* protected by lock */
	Sample samples[CONTROL_SAMPLES];       /* protected by lock, oldest first */
	size_t n_samples;                      /* protected by lock */

	Catalog *sampler;         /* the listener's own reader */
	bool history_failed;      /* the last sample of usage failed (said once until one works) */
};

typedef struct Conn {
	FsControl *ctl;
	Fs *fs;
	int fd;
	int slot;
	struct ucred cred;
	gid_t *groups;
	size_t n_groups;
	Catalog *reader;
	CtlMessage out;
	size_t out_bytes;
	char *error;
	int64_t last_progress_ns;
	struct MovePlan *move_plan; /* migrate, recall: the one being carried out */
} Conn;

static int64_t now_ns(clockid_t clock) {
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- replies ---- */

static int send_all(int fd, const uint8_t *p, size_t n) {
	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += k;
		n -= (size_t) k;
	}
	return 0;
}

static int conn_send(Conn *c, const CtlMessage *m) {
	_cleanup_free_ uint8_t *buf = NULL;
	size_t size;
	int r = ctl_message_format(m, CTL_FRAME_SIZE_MAX, &buf, &size);
	if (r < 0)
		return r;
	return send_all(c->fd, buf, size);
}

static int conn_reset(Conn *c) {
	ctl_message_done(&c->out);
	c->out_bytes = 0;
	return ctl_reply_begin(&c->out, CTL_REPLY_DATA);
}

/* Sends what the data frame holds, if anything beyond its first two lines. */
static int conn_flush(Conn *c) {
	if (c->out.n <= 2)
		return 0;
	int r = conn_send(c, &c->out);
	if (r < 0)
		return r;
	return conn_reset(c);
}

static int add(Conn *c, const char *name, const char *value) {
	c->out_bytes += strlen(name) + 3 * strlen(value) + 2;
	return ctl_message_add(&c->out, name, value);
}

static int add_u64(Conn *c, const char *name, uint64_t v) {
	char buf[24];
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long) v);
	return add(c, name, buf);
}

static int add_i64(Conn *c, const char *name, int64_t v) {
	char buf[24];
	snprintf(buf, sizeof(buf), "%lld", (long long) v);
	return add(c, name, buf);
}

/* Starts a row, sending the frame first if it is full enough. */
static int row(Conn *c, const char *kind) {
	if (c->out_bytes >= CONTROL_FRAME_BYTES) {
		int r = conn_flush(c);
		if (r < 0)
			return r;
	}
	return add(c, "row", kind);
}

/* Records why a request failed, for the done frame; returns r. */
static int conn_fail(Conn *c, int r, const char *format, ...) _printf_(3, 4);
static int conn_fail(Conn *c, int r, const char *format, ...) {
	va_list ap;
	free(c->error);
	va_start(ap, format);
	if (vasprintf(&c->error, format, ap) < 0)
		c->error = NULL;
	va_end(ap);
	return r;
}

static int conn_done(Conn *c, int r) {
	CtlMessage m = {};
	int q = ctl_reply_begin(&m, CTL_REPLY_DONE);
	if (q >= 0)
		q = ctl_message_add(&m, "status", r < 0 ? "error" : "ok");
	if (q >= 0 && r < 0) {
		q = ctl_message_add_u64(&m, "errno", (uint64_t) -r);
		if (q >= 0)
			q = ctl_message_add(&m, "message", c->error ?: strerror(-r));
	}
	if (q >= 0)
		q = conn_send(c, &m);
	ctl_message_done(&m);
	return q;
}

/* ---- who may do what ---- */

static bool in_group(const Conn *c, gid_t g) {
	if (c->cred.gid == g)
		return true;
	for (size_t i = 0; i < c->n_groups; i++)
		if (c->groups[i] == g)
			return true;
	return false;
}

/* As the kernel's generic_permission() for mask (4 read, 2 write, 1 search), root aside. */
static bool may_access(const Conn *c, const CatalogInode *ci, unsigned mask) {
	unsigned bits;
	if (c->cred.uid == 0)
		return true;
	if (c->cred.uid == ci->uid)
		bits = (ci->mode >> 6) & 7;
	else if (in_group(c, ci->gid))
		bits = (ci->mode >> 3) & 7;
	else
		bits = ci->mode & 7;
	return (bits & mask) == mask;
}

static int peer_load(Conn *c) {
	socklen_t len = sizeof(c->cred);
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len) < 0)
		return -errno;
	len = 64 * sizeof(gid_t);
	for (;;) {
		gid_t *g = realloc(c->groups, len ? len : sizeof(gid_t));
		if (!g)
			return -ENOMEM;
		c->groups = g;
		if (getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, c->groups, &len) == 0)
			break;
		if (errno != ERANGE)
			return -errno;
	}
	c->n_groups = len / sizeof(gid_t);
	return 0;
}

static int authorize(Conn *c, CtlCommand cmd) {
	CatalogInode root;
	int r = catalog_inode_get(c->reader, CATALOG_ROOT_INO, &root);
	if (r < 0)
		return conn_fail(c, r, "cannot read the root directory: %s", strerror(-r));
	uid_t uid = c->cred.uid;
	bool owner = uid == 0 || uid == c->ctl->owner || uid == root.uid;

	if (ctl_command_is_privileged(cmd)) {
		if (owner)
			return 0;
		return conn_fail(c, -EACCES,
				 "permission denied: '%s' is for root or the filesystem's owner (uid %u or %u), not uid %u",
				 ctl_command_to_string(cmd), (unsigned) c->ctl->owner, (unsigned) root.uid,
				 (unsigned) uid);
	}
	/* Without allow_other the kernel lets nobody but the daemon's user (and root here) in. */
	if (uid != 0 && uid != c->ctl->owner && !c->fs->config->allow_other)
		return conn_fail(c, -EACCES, "permission denied: the mount is private to uid %u (no allow_other)",
				 (unsigned) c->ctl->owner);
	if (!may_access(c, &root, 4))
		return conn_fail(c, -EACCES, "permission denied: uid %u may not read the mount's root directory",
				 (unsigned) uid);
	return 0;
}

/* ---- tiers ---- */

static int add_tier_fields(Conn *c, uint32_t n, const ConfigTier *t, uint64_t used, uint64_t *ret_free) {
	DedupBackend *backend = tier_set_backend(c->fs->tiers, n);
	const char *error = tier_set_error(c->fs->tiers, n);
	DedupBackendStatfs sf = {};
	/* Asked of the tier's own backend, so an NFS tier answers for its export (within its bounded wait). */
	bool reachable = backend && dedup_backend_statfs(backend, &sf) >= 0;
	uint64_t fs_size = reachable ? sf.total : 0;
	uint64_t fs_avail = reachable ? sf.avail : 0;
	uint64_t capacity = t->capacity ? t->capacity : fs_size;
	uint64_t free_bytes = fs_avail > t->reserve ? fs_avail - t->reserve : 0;
	if (t->capacity)
		free_bytes = MIN(free_bytes, t->capacity > used ? t->capacity - used : 0);
	int r = add_u64(c, "tier", n);
	if (r >= 0)
		r = add(c, "name", t->name);
	if (r >= 0)
		r = add(c, "role", tier_role_to_string(t->role));
	if (r >= 0)
		r = add(c, "backend", tier_backend_to_string(t->backend));
	if (r >= 0)
		r = add(c, "path", t->path);
	if (r >= 0)
		r = add(c, "reachable", reachable ? "yes" : "no");
	if (r >= 0 && error)
		r = add(c, "error", error);
	if (r >= 0)
		r = add_u64(c, "capacity", capacity);
	if (r >= 0)
		r = add_u64(c, "fs_size", fs_size);
	if (r >= 0)
		r = add_u64(c, "fs_avail", fs_avail);
	if (r >= 0)
		r = add_u64(c, "reserve", t->reserve);
	if (r >= 0)
		r = add_u64(c, "used", used);
	if (r >= 0)
		r = add_u64(c, "free", free_bytes);
	if (r >= 0 && t->backend == TIER_BACKEND_NFS && backend) {
		TierNfsStats ns;
		tier_backend_nfs_stats(backend, &ns);
		r = add_u64(c, "nfs_rpcs", ns.rpcs);
		if (r >= 0)
			r = add_u64(c, "nfs_rpc_us", ns.rpc_ns / 1000);
		if (r >= 0)
			r = add_u64(c, "nfs_rpc_failures", ns.failures);
	}
	if (ret_free)
		*ret_free = free_bytes;
	return r;
}

typedef struct ContainerSums {
	uint64_t containers, stored, live;
} ContainerSums;

static int sum_container(const CatalogContainer *ct, void *userdata) {
	ContainerSums *s = userdata;
	s->containers++;
	s->stored += ct->size;
	s->live += ct->live_bytes;
	return 0;
}

typedef struct ChunkSums {
	uint64_t chunks, dead, live_plain, referenced;
} ChunkSums;

static int sum_chunk(const CatalogChunk *ch, void *userdata) {
	ChunkSums *s = userdata;
	s->chunks++;
	if (ch->refs == 0)
		s->dead++;
	else
		s->live_plain += ch->plain_size;
	s->referenced += (uint64_t) ch->plain_size * ch->refs;
	return 0;
}

static int count_dead(const CatalogChunk *ch, void *userdata) {
	(*(uint64_t *) userdata)++;
	return 0;
}

/* ---- the files ---- */

typedef struct FileRow {
	uint64_t ino;
	uint64_t size;       /* logical: the staging file's for a raw file */
	uint64_t raw_bytes;  /* a raw file's staging blocks */
	int64_t mtime_ns;
	uint32_t file_class;
	uint32_t tier;
	CatalogFileState state;
} FileRow;

typedef struct FileVec {
	FileRow *items;
	size_t n, cap;
} FileVec;

static int collect_file(const CatalogInode *ci, void *userdata) {
	FileVec *v = userdata;
	if (v->n == v->cap) {
		size_t cap = MAX(v->cap * 2, (size_t) 1024);
		FileRow *p = realloc(v->items, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		v->items = p;
		v->cap = cap;
	}
	v->items[v->n++] = (FileRow) {
		.ino = ci->ino,
		.size = ci->size,
		.mtime_ns = ci->mtime_ns,
		.file_class = ci->file_class,
		.tier = ci->tier, /* a raw file's: its staging file's, on the hot tier unless it spilled */
		.state = ci->state,
	};
	return 0;
}

static void raw_fill(Fs *fs, uint32_t tier, uint64_t ino, uint64_t *size, uint64_t *raw_bytes, int64_t *mtime_ns) {
	struct stat st;
	/* A staging file that cannot be stat'ed reads as empty, as getattr would fail it. */
	if (fs_staging_stat(fs, tier, ino, &st) < 0)
		memset(&st, 0, sizeof(st));
	*size = (uint64_t) st.st_size;
	*raw_bytes = (uint64_t) st.st_blocks * 512;
	if (mtime_ns && st.st_mtim.tv_sec)
		*mtime_ns = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

/* Every regular file, raw ones with their staging file's size and time (the authoritative ones). */
static int census(Conn *c, FileVec *ret) {
	FileVec v = {};
	int r = catalog_files_foreach(c->reader, collect_file, &v);
	if (r < 0) {
		free(v.items);
		return conn_fail(c, r, "cannot list files: %s", strerror(-r));
	}
	for (size_t i = 0; i < v.n; i++)
		if (v.items[i].state == CATALOG_FILE_RAW)
			raw_fill(c->fs, v.items[i].tier, v.items[i].ino, &v.items[i].size, &v.items[i].raw_bytes,
				 &v.items[i].mtime_ns);
	*ret = v;
	return 0;
}

/* ---- status and df ---- */

static size_t tier_count(const Fs *fs) {
	return fs->config->n_tiers;
}

static int add_df_rows(Conn *c, const FileVec *files) {
	int r = 0;
	for (uint32_t n = 0; r >= 0 && n < tier_count(c->fs); n++) {
		const ConfigTier *t = tier_set_config(c->fs->tiers, n);
		ContainerSums cs = {};
		ChunkSums ks = {};
		uint64_t logical = 0, raw = 0, nfiles = 0;
		if (!t)
			break;
		r = catalog_containers_foreach(c->reader, n, sum_container, &cs);
		if (r >= 0)
			r = catalog_chunks_foreach(c->reader, n, sum_chunk, &ks);
		if (r < 0)
			return conn_fail(c, r, "cannot read the chunk index: %s", strerror(-r));
		for (size_t i = 0; i < files->n; i++) {
			if (files->items[i].tier != n)
				continue;
			nfiles++;
			logical += files->items[i].size;
			raw += files->items[i].raw_bytes;
		}
		r = row(c, "tier");
		if (r >= 0)
			r = add_tier_fields(c, n, t, cs.stored + raw, NULL);
		if (r >= 0)
			r = add_u64(c, "files", nfiles);
		if (r >= 0)
			r = add_u64(c, "logical", logical);
		if (r >= 0)
			r = add_u64(c, "stored", cs.stored);
		if (r >= 0)
			r = add_u64(c, "raw", raw);
		if (r >= 0)
			r = add_u64(c, "containers", cs.containers);
		if (r >= 0)
			r = add_u64(c, "live", cs.live);
		if (r >= 0)
			r = add_u64(c, "live_plain", ks.live_plain);
		if (r >= 0)
			r = add_u64(c, "referenced", ks.referenced);
		if (r >= 0)
			r = add_u64(c, "chunks", ks.chunks);
		if (r >= 0)
			r = add_u64(c, "dead_chunks", ks.dead);
	}
	return r;
}

static int do_df(Conn *c) {
	FileVec files = {};
	int r = census(c, &files);
	if (r >= 0)
		r = add_df_rows(c, &files);
	free(files.items);
	return r;
}

static void throughput(FsControl *ctl, bool *ret_known, uint64_t *ret_sealed, uint64_t *ret_stored) {
	pthread_mutex_lock(&ctl->lock);
	const Sample *a = &ctl->samples[0], *b = &ctl->samples[ctl->n_samples ? ctl->n_samples - 1 : 0];
	double dt = (double) (b->t_ns - a->t_ns) / 1e9;
	*ret_known = ctl->n_samples >= 2 && dt > 0;
	if (*ret_known) {
		/* Net growth: deletions meanwhile count against it, and it never goes below zero. */
		*ret_sealed = b->sealed_bytes > a->sealed_bytes ? (uint64_t) ((double) (b->sealed_bytes - a->sealed_bytes) / dt) : 0;
		*ret_stored = b->stored_bytes > a->stored_bytes ? (uint64_t) ((double) (b->stored_bytes - a->stored_bytes) / dt) : 0;
	}
	pthread_mutex_unlock(&ctl->lock);
}

static int path_of(Catalog *cat, uint64_t ino, char **ret);

static int add_policy_status(Conn *c) {
	FsPolicyStatus ps;
	_cleanup_free_ char *path = NULL;

	fs_policy_status_get(c->fs, &ps);
	/* A file deleted or renamed meanwhile has no path to show: its number will do. */
	if (ps.moving_ino && path_of(c->reader, ps.moving_ino, &path) < 0)
		path = NULL;
	int r = add(c, "policy_state", !c->fs->policy_thread_started ? "off" : ps.moving_ino ? "moving" : "idle");
	if (r >= 0 && ps.moving_ino)
		r = add_u64(c, "policy_inode", ps.moving_ino);
	if (r >= 0 && path)
		r = add(c, "policy_file", path);
	if (r >= 0 && ps.reason)
		r = add(c, "policy_reason", ps.reason);
	if (r >= 0 && ps.last_run > 0)
		r = add_i64(c, "policy_last_run", ps.last_run);
	if (r >= 0)
		r = add_i64(c, "policy_next_run", ps.next_run);
	if (r >= 0)
		r = add_u64(c, "policy_interval", c->fs->policy_interval_s);
	if (r >= 0)
		r = add_u64(c, "policy_files_moved", ps.files_moved);
	if (r >= 0)
		r = add_u64(c, "policy_bytes_moved", ps.bytes_moved);
	if (r >= 0)
		r = add_u64(c, "policy_failed", ps.failed);
	return r;
}

/* What the throttle did since the mount (fs/throttle.h): per kind of work, units busy and idle, waits and their time. */
static int add_throttle_status(Conn *c) {
	FsThrottle *t = &c->fs->throttle;
	int r = add_u64(c, "background_share", t->share);
	if (r >= 0)
		r = add(c, "foreground_busy", fs_throttle_foreground_is_busy(t) ? "yes" : "no");
	for (int k = 0; r >= 0 && k < _FS_THROTTLE_KIND_MAX; k++) {
		const FsThrottleCounters *n = &t->counters[k];
		const char *kind = fs_throttle_kind_to_string((FsThrottleKind) k);
		char key[64];
		snprintf(key, sizeof(key), "throttle_%s_busy", kind);
		r = add_u64(c, key, atomic_load(&n->busy_units));
		snprintf(key, sizeof(key), "throttle_%s_idle", kind);
		if (r >= 0)
			r = add_u64(c, key, atomic_load(&n->idle_units));
		snprintf(key, sizeof(key), "throttle_%s_waits", kind);
		if (r >= 0)
			r = add_u64(c, key, atomic_load(&n->waits));
		snprintf(key, sizeof(key), "throttle_%s_wait_us", kind);
		if (r >= 0)
			r = add_u64(c, key, atomic_load(&n->wait_ns) / 1000);
	}
	return r;
}

static int do_status(Conn *c) {
	Fs *fs = c->fs;
	FsControl *ctl = c->ctl;
	CatalogFileTotals totals;
	FileVec files = {};
	uint64_t seal_queue = 0, seal_due = 0, seal_streams = 0, dead = 0, errors_total = 0, tp_sealed = 0, tp_stored = 0;
	bool tp_known;
	LogRecent recent[LOG_RECENT_MAX];
	int r;

	r = catalog_files_totals(c->reader, &totals);
	if (r >= 0)
		for (uint32_t n = 0; r >= 0 && n < tier_set_count(fs->tiers); n++)
			r = catalog_chunks_foreach_dead(c->reader, n, count_dead, &dead);
	if (r < 0)
		return conn_fail(c, r, "cannot read the catalog: %s", strerror(-r));

	int64_t now = now_ns(CLOCK_MONOTONIC);
	pthread_mutex_lock(&fs->seal_lock);
	for (const FsSealItem *i = fs->seal_queue; i; i = i->next) {
		seal_queue++;
		if (i->due_ns <= now)
			seal_due++;
	}
	seal_streams = fs->n_streams;
	pthread_mutex_unlock(&fs->seal_lock);
	throughput(ctl, &tp_known, &tp_sealed, &tp_stored);
	size_t n_recent = log_recent_get(recent, ELEMENTSOF(recent), &errors_total);

	r = add(c, "mount", fs->mountpoint);
	if (r >= 0)
		r = add(c, "data_dir", fs->config->data_dir);
	if (r >= 0)
		r = add(c, "control", ctl->path);
	if (r >= 0)
		r = add(c, "version", PACKAGE_VERSION);
	if (r >= 0)
		r = add_u64(c, "pid", (uint64_t) getpid());
	if (r >= 0)
		r = add_u64(c, "owner", ctl->owner);
	if (r >= 0)
		r = add_u64(c, "uptime", (uint64_t) ((now_ns(CLOCK_MONOTONIC) - ctl->started_ns) / 1000000000));
	if (r >= 0)
		r = add(c, "allow_other", fs->config->allow_other ? "yes" : "no");
	pthread_mutex_lock(&ctl->lock);
	unsigned clients = ctl->n_conns;
	pthread_mutex_unlock(&ctl->lock);
	if (r >= 0)
		r = add_u64(c, "clients", clients);
	if (r >= 0)
		r = add_u64(c, "seal_delay", fs->seal_delay_s);
	if (r >= 0)
		r = add_u64(c, "gc_interval", fs->gc_interval_s);
	if (r >= 0)
		r = add_u64(c, "files_raw", totals.files[CATALOG_FILE_RAW]);
	if (r >= 0)
		r = add_u64(c, "files_sealed", totals.files[CATALOG_FILE_SEALED]);
	if (r >= 0)
		r = add_u64(c, "sealed_bytes", totals.bytes[CATALOG_FILE_SEALED]);
	if (r >= 0)
		r = add_u64(c, "seal_queue", seal_queue);
	if (r >= 0)
		r = add_u64(c, "seal_queue_due", seal_due);
	if (r >= 0)
		r = add_u64(c, "migrate_queue", atomic_load(&fs->migrate_queue));
	if (r >= 0)
		r = add_u64(c, "seal_streams", seal_streams);
	if (r >= 0)
		r = add_u64(c, "seals_streamed", atomic_load(&fs->seals_streamed));
	if (r >= 0)
		r = add_u64(c, "seals_whole", atomic_load(&fs->seals_whole));
	if (r >= 0)
		r = add_u64(c, "streamed_bytes", atomic_load(&fs->streamed_bytes));
	if (r >= 0)
		r = add_u64(c, "gc_queue", dead);
	if (r >= 0)
		r = add_policy_status(c);
	if (r >= 0)
		r = add_throttle_status(c);
	if (r >= 0 && tp_known)
		r = add_u64(c, "seal_rate", tp_sealed);
	if (r >= 0 && tp_known)
		r = add_u64(c, "store_rate", tp_stored);
	if (r >= 0)
		r = add_u64(c, "errors_total", errors_total);
	if (r >= 0)
		r = census(c, &files);
	if (r >= 0)
		r = add_df_rows(c, &files);
	free(files.items);
	for (size_t i = 0; r >= 0 && i < n_recent; i++) {
		r = row(c, "error");
		if (r >= 0)
			r = add_i64(c, "time", (int64_t) recent[i].time);
		if (r >= 0)
			r = add(c, "level", recent[i].level <= LOG_ERR ? "error" : "warning");
		if (r >= 0)
			r = add(c, "message", recent[i].message);
	}
	return r;
}

/* ---- policy ---- */

static int do_policy(Conn *c) {
	int r = add_u64(c, "seal_delay", c->fs->seal_delay_s);
	if (r >= 0)
		r = add_u64(c, "gc_interval", c->fs->gc_interval_s);
	if (r >= 0)
		r = add(c, "gc_live_threshold", "0.5");
	const ConfigTier *hot = tier_set_config(c->fs->tiers, 0);
	if (r >= 0)
		r = add_u64(c, "policy_interval", c->fs->policy_interval_s);
	if (r >= 0)
		r = add_u64(c, "policy_bandwidth", c->fs->config->policy_bandwidth);
	if (r >= 0)
		r = add_u64(c, "high_watermark", hot->high_watermark);
	if (r >= 0)
		r = add_u64(c, "low_watermark", hot->low_watermark);
	if (r >= 0)
		r = add_u64(c, "reserve", fs_policy_reserve(c->fs));
	if (r >= 0)
		r = add(c, "reserve_rule", hot->has_reserve ? "configured" : "4 x the largest archivelog, at most 10% of the hot tier");
	for (int k = 0; r >= 0 && k < _TIER_CLASS_MAX; k++) {
		/* The very settings the sealer takes, so what is shown is what is done. */
		const ConfigClassPolicy *policy = tier_class_policy(c->fs->config, (TierFileClass) k);
		bool sealed = policy != NULL;
		DedupChunkerParams params = sealed ? fs_class_chunker(policy) : (DedupChunkerParams) {};
		const DedupChunkerParams *p = &params;
		r = row(c, "class");
		if (r >= 0)
			r = add(c, "class", tier_class_to_string((TierFileClass) k));
		if (r >= 0)
			r = add(c, "sealed", sealed ? "yes" : "no");
		if (r >= 0 && sealed) {
			r = add(c, "chunker", p->mode == DEDUP_CHUNKER_CDC ? "cdc" : "fixed");
			if (r >= 0)
				r = add_u64(c, "chunk_min", p->min_size);
			if (r >= 0)
				r = add_u64(c, "chunk_avg", p->avg_size);
			if (r >= 0)
				r = add_u64(c, "chunk_max", p->max_size);
			if (r >= 0)
				r = add(c, "compression", "zstd");
			char level[16];
			snprintf(level, sizeof(level), "%d", policy->zstd_level);
			if (r >= 0)
				r = add(c, "zstd_level", level);
			if (r >= 0)
				r = add_u64(c, "seal_delay", c->fs->seal_delay_s);
			/* A target tier that is not configured or not open moves nothing: show it as none. */
			uint32_t to = policy->target_tier;
			bool moves = to > 0 && fs_tier_store(c->fs, to);
			if (r >= 0)
				r = add_u64(c, "migrate_after", moves ? policy->migrate_after : 0);
			if (r >= 0 && moves)
				r = add_u64(c, "target_tier", to);
			if (r >= 0 && moves)
				r = add(c, "target", tier_set_config(c->fs->tiers, to)->name);
			if (r >= 0 && policy->pinned)
				r = add(c, "pinned", "yes");
		}
	}
	return r;
}

/* ---- du, ls ---- */

static int resolve(Conn *c, const char *path, CatalogInode *ret) {
	CatalogInode ci;
	int r = catalog_inode_get(c->reader, CATALOG_ROOT_INO, &ci);
	if (r < 0)
		return r;
	for (const char *p = path + 1; *p;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t) (slash - p) : strlen(p);
		char name[CATALOG_NAME_MAX + 1];
		uint64_t ino;
		if (!S_ISDIR(ci.mode))
			return -ENOTDIR;
		if (!may_access(c, &ci, 1))
			return -EACCES;
		memcpy(name, p, n);
		name[n] = 0;
		r = catalog_dirent_lookup(c->reader, ci.ino, name, &ino);
		if (r >= 0)
			r = catalog_inode_get(c->reader, ino, &ci);
		if (r < 0)
			return r;
		p += n + (slash ? 1 : 0);
	}
	*ret = ci;
	return 0;
}

typedef struct Usage {
	uint64_t files, dirs, logical, unique, shared, raw, errors;
	double attributed;
} Usage;

static int file_usage(Conn *c, const CatalogInode *ci, Usage *u) {
	if (!S_ISREG(ci->mode))
		return 0;
	u->files++;
	if (ci->state != CATALOG_FILE_SEALED) {
		uint64_t size, raw;
		raw_fill(c->fs, ci->tier, ci->ino, &size, &raw, NULL);
		u->logical += size;
		u->raw += raw;
		return 0;
	}
	DedupFileUsage du;
	int r = dedup_file_usage(c->reader, ci->ino, &du);
	if (r < 0)
		return r;
	u->logical += ci->size;
	u->unique += du.unique;
	u->shared += du.shared;
	u->attributed += du.attributed;
	return 0;
}

static const char *type_name(uint32_t mode) {
	return S_ISREG(mode) ? "file" : S_ISDIR(mode) ? "dir" : S_ISLNK(mode) ? "link" : "other";
}

static int add_usage(Conn *c, const Usage *u) {
	int r = add_u64(c, "files", u->files);
	if (r >= 0)
		r = add_u64(c, "dirs", u->dirs);
	if (r >= 0)
		r = add_u64(c, "logical", u->logical);
	if (r >= 0)
		r = add_u64(c, "stored", (uint64_t) (u->attributed + 0.5) + u->raw);
	if (r >= 0)
		r = add_u64(c, "unique", u->unique);
	if (r >= 0)
		r = add_u64(c, "shared", u->shared);
	if (r >= 0)
		r = add_u64(c, "raw", u->raw);
	return r;
}

static int add_file_state(Conn *c, const CatalogInode *ci) {
	if (!S_ISREG(ci->mode))
		return 0;
	bool moving = ci->state == CATALOG_FILE_SEALED && tier_mover_moving(c->fs->mover) == ci->ino;
	int r = add_u64(c, "tier", ci->tier);
	if (r >= 0)
		r = add(c, "state", moving ? "migrating" : ci->state == CATALOG_FILE_SEALED ? "sealed" : "raw");
	if (r >= 0)
		r = add(c, "class", tier_class_to_string((TierFileClass) ci->file_class));
	if (r >= 0 && catalog_pinned(c->reader, ci->ino) > 0)
		r = add(c, "pinned", "yes");
	CatalogArchivelog a;
	if (r >= 0 && ci->file_class == TIER_CLASS_ARCHIVELOG && catalog_archivelog_get(c->reader, ci->ino, &a) >= 0) {
		r = add_u64(c, "dbid", a.dbid);
		if (r >= 0 && a.db_name[0])
			r = add(c, "db_name", a.db_name);
		if (r >= 0)
			r = add_u64(c, "thread", a.thread);
		if (r >= 0)
			r = add_u64(c, "sequence", a.sequence);
		if (r >= 0)
			r = add_u64(c, "low_scn", a.low_scn);
		if (r >= 0)
			r = add_u64(c, "next_scn", a.next_scn);
		if (r >= 0)
			r = add_u64(c, "low_time", (uint64_t) a.low_time);
		if (r >= 0)
			r = add_u64(c, "next_time", (uint64_t) a.next_time);
	}
	return r;
}

typedef struct DirStack {
	uint64_t *inos;
	size_t n, cap;
} DirStack;

static int dir_push(DirStack *s, uint64_t ino) {
	if (s->n == s->cap) {
		size_t cap = MAX(s->cap * 2, (size_t) 64);
		uint64_t *p = realloc(s->inos, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->inos = p;
		s->cap = cap;
	}
	s->inos[s->n++] = ino;
	return 0;
}

/*
 * Walks the tree below directory top, calling visit for every entry's inode:
 * for a directory, visit returns 1 to descend into it, 0 not to; for
 * anything, a negative return stops the walk and is returned.  Entries
 * removed meanwhile are passed over; the daemon stopping is -ECANCELED.
 */
static int tree_walk(Conn *c, uint64_t top, int (*visit)(Conn *c, const CatalogInode *ci, void *userdata),
		     void *userdata) {
	_cleanup_free_ CatalogDirent *ents = malloc(CONTROL_DIR_BATCH * sizeof(CatalogDirent));
	DirStack stack = {};
	int r = ents ? dir_push(&stack, top) : -ENOMEM;
	while (r >= 0 && stack.n > 0 && !atomic_load(&c->ctl->stopping)) {
		uint64_t dir = stack.inos[--stack.n], after = 0;
		for (;;) {
			int n = catalog_dir_read(c->reader, dir, after, ents, CONTROL_DIR_BATCH);
			if (n <= 0) {
				r = n;
				break;
			}
			for (int k = 0; r >= 0 && k < n; k++) {
				CatalogInode ci;
				after = ents[k].cookie;
				if (catalog_inode_get(c->reader, ents[k].ino, &ci) < 0)
					continue; /* removed meanwhile */
				r = visit(c, &ci, userdata);
				if (r > 0 && S_ISDIR(ci.mode))
					r = dir_push(&stack, ci.ino);
			}
			if (r < 0)
				break;
		}
	}
	free(stack.inos);
	if (atomic_load(&c->ctl->stopping))
		return -ECANCELED;
	return r < 0 ? r : 0;
}

static int usage_visit(Conn *c, const CatalogInode *ci, void *userdata) {
	Usage *u = userdata;
	if (S_ISDIR(ci->mode)) {
		u->dirs++;
		if (may_access(c, ci, 5))
			return 1;
		u->errors++;
	} else if (file_usage(c, ci, u) < 0)
		u->errors++;
	return 0;
}

/* Sums a directory tree; directories the peer may not list are counted in errors and skipped, as du does. */
static int tree_usage(Conn *c, const CatalogInode *top, Usage *u) {
	u->dirs++;
	if (!may_access(c, top, 5)) {
		u->errors++;
		return 0;
	}
	return tree_walk(c, top->ino, usage_visit, u);
}

static int path_failed(Conn *c, const char *path, int err) {
	int r = row(c, "failed");
	if (r >= 0)
		r = add(c, "path", path);
	if (r >= 0)
		r = add_u64(c, "errno", (uint64_t) -err);
	if (r >= 0)
		r = add(c, "message", strerror(-err));
	return r;
}

static int do_du(Conn *c, const CtlRequest *req) {
	int r = 0;
	for (size_t i = 0; r >= 0 && i < req->n_paths; i++) {
		CatalogInode ci;
		Usage u = {};
		int q = resolve(c, req->paths[i], &ci);
		if (q >= 0)
			q = S_ISDIR(ci.mode) ? tree_usage(c, &ci, &u) : file_usage(c, &ci, &u);
		if (q == -ECANCELED || q == -ENOMEM)
			return q;
		if (q < 0) {
			r = path_failed(c, req->paths[i], q);
			continue;
		}
		r = row(c, "du");
		if (r >= 0)
			r = add(c, "path", req->paths[i]);
		if (r >= 0)
			r = add(c, "type", type_name(ci.mode));
		if (r >= 0)
			r = add_usage(c, &u);
		if (r >= 0)
			r = add_u64(c, "errors", u.errors);
		if (r >= 0)
			r = add_file_state(c, &ci);
	}
	return r;
}

static int ls_entry(Conn *c, const char *dir, const char *name, const CatalogInode *ci) {
	Usage u = {};
	int q = file_usage(c, ci, &u);
	int r = row(c, "entry");
	if (r >= 0)
		r = add(c, "dir", dir);
	if (r >= 0)
		r = add(c, "name", name);
	if (r >= 0)
		r = add(c, "type", type_name(ci->mode));
	if (r >= 0)
		r = add_u64(c, "mode", ci->mode & 07777);
	if (r >= 0)
		r = add_u64(c, "uid", ci->uid);
	if (r >= 0)
		r = add_u64(c, "gid", ci->gid);
	if (r >= 0)
		r = add_u64(c, "nlink", ci->nlink);
	if (r >= 0 && S_ISREG(ci->mode) && q >= 0) {
		r = add_usage(c, &u);
		if (r >= 0)
			r = add_file_state(c, ci);
	}
	if (r >= 0 && q < 0)
		r = add(c, "error", strerror(-q));
	if (r >= 0) {
		int64_t mtime = ci->mtime_ns;
		if (S_ISREG(ci->mode) && ci->state != CATALOG_FILE_SEALED) {
			uint64_t size, raw;
			raw_fill(c->fs, ci->tier, ci->ino, &size, &raw, &mtime);
		}
		r = add_i64(c, "mtime", mtime / 1000000000);
	}
	return r;
}

static int do_ls(Conn *c, const CtlRequest *req) {
	_cleanup_free_ CatalogDirent *ents = malloc(CONTROL_DIR_BATCH * sizeof(CatalogDirent));
	int r = 0;

	if (!ents)
		return -ENOMEM;
	for (size_t i = 0; r >= 0 && i < req->n_paths; i++) {
		const char *path = req->paths[i];
		CatalogInode ci;
		int q = resolve(c, path, &ci);
		if (q >= 0 && S_ISDIR(ci.mode) && !may_access(c, &ci, 5))
			q = -EACCES;
		if (q < 0) {
			r = path_failed(c, path, q);
			continue;
		}
		if (!S_ISDIR(ci.mode)) {
			const char *slash = strrchr(path, '/');
			_cleanup_free_ char *dir = strndup(path, slash == path ? 1 : (size_t) (slash - path));
			if (!dir)
				return -ENOMEM;
			r = ls_entry(c, dir, slash + 1, &ci);
			continue;
		}
		for (uint64_t after = 0; r >= 0;) {
			int n = catalog_dir_read(c->reader, ci.ino, after, ents, CONTROL_DIR_BATCH);
			if (n <= 0) {
				r = n;
				break;
			}
			for (int k = 0; r >= 0 && k < n; k++) {
				CatalogInode e;
				after = ents[k].cookie;
				if (catalog_inode_get(c->reader, ents[k].ino, &e) < 0)
					continue;
				r = ls_entry(c, path, ents[k].name, &e);
			}
		}
	}
	return r;
}

/* The path of ino from the root, following one link at each step. */
static int path_of(Catalog *cat, uint64_t ino, char **ret) {
	char *path = strdup(""), name[CATALOG_NAME_MAX + 1];
	int r = path ? 0 : -ENOMEM;
	for (unsigned depth = 0; r >= 0 && ino != CATALOG_ROOT_INO; depth++) {
		uint64_t parent;
		char *longer;
		r = depth < CONTROL_PATH_DEPTH_MAX ? catalog_dirent_find(cat, ino, &parent, name, sizeof(name)) : -ELOOP;
		if (r < 0)
			break;
		if (asprintf(&longer, "/%s%s", name, path) < 0) {
			r = -ENOMEM;
			break;
		}
		free(path);
		path = longer;
		ino = parent;
	}
	if (r < 0) {
		free(path);
		return r;
	}
	if (!*path) {
		free(path);
		path = strdup("/");
		if (!path)
			return -ENOMEM;
	}
	*ret = path;
	return 0;
}

/* ---- report ---- */

typedef struct Group {
	int64_t key;
	uint64_t files, logical, raw, chunk_bytes, zero_bytes;
	double attributed, attributed_plain;
} Group;

typedef struct GroupVec {
	Group *items;
	size_t n, cap;
} GroupVec;

static Group *group_get(GroupVec *v, int64_t key) {
	size_t lo = 0, hi = v->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v->items[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < v->n && v->items[lo].key == key)
		return &v->items[lo];
	if (v->n == v->cap) {
		size_t cap = MAX(v->cap * 2, (size_t) 16);
		Group *p = realloc(v->items, cap * sizeof(*p));
		if (!p)
			return NULL;
		v->items = p;
		v->cap = cap;
	}
	memmove(&v->items[lo + 1], &v->items[lo], (v->n - lo) * sizeof(Group));
	v->n++;
	v->items[lo] = (Group) { .key = key };
	return &v->items[lo];
}

static int64_t day_of(int64_t t_ns) {
	int64_t day = INT64_C(86400) * 1000000000;
	return t_ns >= 0 ? t_ns / day : -((-t_ns + day - 1) / day);
}

typedef struct NameVec {
	char **names;
	size_t n, cap;
} NameVec;

/* The index of name in v, added if new: group keys of report --by database. */
static int64_t name_index(NameVec *v, const char *name) {
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->names[i], name) == 0)
			return (int64_t) i;
	if (v->n == v->cap) {
		size_t cap = MAX(v->cap * 2, (size_t) 8);
		char **p = realloc(v->names, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		v->names = p;
		v->cap = cap;
	}
	v->names[v->n] = strdup(name);
	return v->names[v->n] ? (int64_t) v->n++ : -ENOMEM;
}

static void name_vec_done(NameVec *v) {
	for (size_t i = 0; i < v->n; i++)
		free(v->names[i]);
	free(v->names);
}

/*
 * The database of a file: DB_UNIQUE_NAME from the FRA layout, as the DBA
 * sees it in the recovery area; else, for an archived log kept elsewhere,
 * the name in its header; else "unknown".
 */
static int database_key(Conn *c, NameVec *names, const FileRow *f) {
	_cleanup_free_ char *path = NULL;
	char db[CATALOG_NAME_MAX + 1] = "unknown";
	CatalogArchivelog a;

	int r = path_of(c->reader, f->ino, &path);
	if (r == -ENOMEM)
		return r;
	if ((r < 0 || !tier_database_of_path(path, db, sizeof(db))) && f->file_class == TIER_CLASS_ARCHIVELOG &&
	    catalog_archivelog_get(c->reader, f->ino, &a) >= 0 && a.db_name[0])
		snprintf(db, sizeof(db), "%s", a.db_name);
	return (int) name_index(names, db);
}

static int group_by_name(const void *a, const void *b, void *userdata) {
	const NameVec *names = userdata;
	return strcmp(names->names[((const Group *) a)->key], names->names[((const Group *) b)->key]);
}

static const char *const outlook_when_names[_TIER_OUTLOOK_MAX] = {
	[TIER_OUTLOOK_DUE] = "due",
	[TIER_OUTLOOK_SPACE] = "space",
	[TIER_OUTLOOK_DAY] = "day",
	[TIER_OUTLOOK_WEEK] = "week",
	[TIER_OUTLOOK_LATER] = "later",
};

/* The outlook's own fields: they belong to the reply, so they go before any row. */
static int add_outlook_fields(Conn *c, const FsPolicyOutlook *o) {
	int r = add(c, "policy", o->enabled ? "on" : "off");
	if (r >= 0 && o->enabled)
		r = add_i64(c, "policy_next_run", o->next_run);
	if (r >= 0)
		r = add_u64(c, "hot_space_needed", o->plan.space_needed);
	if (r >= 0)
		r = add_u64(c, "reserve", o->plan.reserve);
	return r;
}

/* What the policy moves next and when: one row per class whose files move at all. */
static int add_outlook_rows(Conn *c, const FsPolicyOutlook *o) {
	int r = 0;
	for (uint32_t k = 0; r >= 0 && k < _TIER_CLASS_MAX; k++) {
		const TierOutlookClass *oc = &o->plan.classes[k];
		const ConfigTier *t = tier_set_config(c->fs->tiers, oc->target);
		if (oc->target == 0 || !t)
			continue;
		r = row(c, "next");
		if (r >= 0)
			r = add(c, "class", tier_class_to_string((TierFileClass) k));
		if (r >= 0)
			r = add(c, "target", t->name);
		for (int w = 0; r >= 0 && w < _TIER_OUTLOOK_MAX; w++) {
			char key[32];
			snprintf(key, sizeof(key), "%s_files", outlook_when_names[w]);
			r = add_u64(c, key, oc->files[w]);
			snprintf(key, sizeof(key), "%s_bytes", outlook_when_names[w]);
			if (r >= 0)
				r = add_u64(c, key, oc->bytes[w]);
		}
		if (r >= 0 && oc->next_due)
			r = add_i64(c, "next_due", oc->next_due);
	}
	return r;
}

/*
 * The samples of usage over time (history.c), thinned to at most
 * CONTROL_HISTORY_POINTS evenly spread times so a chart of a year stays a
 * page: every stride-th time, and always the last.
 */
typedef struct HistoryEmit {
	Conn *c;
	size_t times;             /* distinct times seen (counting pass) or passed (emitting pass) */
	int64_t last_t;
	size_t stride;
	bool emit;
	int64_t newest_t;
} HistoryEmit;

static bool history_keep(HistoryEmit *e, int64_t t, bool counts) {
	if (counts && (e->times == 0 || t != e->last_t)) {
		e->times++;
		e->last_t = t;
	}
	if (!e->emit)
		return false;
	return t == e->newest_t || (e->times - 1) % e->stride == 0;
}

static int history_tier_row(const CatalogHistoryTier *h, void *userdata) {
	HistoryEmit *e = userdata;
	if (!history_keep(e, h->t, true))
		return 0;
	Conn *c = e->c;
	const ConfigTier *t = tier_set_config(c->fs->tiers, h->tier);
	int r = row(c, "history_tier");
	if (r >= 0)
		r = add_i64(c, "t", h->t);
	if (r >= 0)
		r = add(c, "tier", t ? t->name : "unknown");
	if (r >= 0)
		r = add(c, "role", t ? tier_role_to_string(t->role) : "unknown");
	if (r >= 0)
		r = add_u64(c, "capacity", h->capacity);
	if (r >= 0)
		r = add_u64(c, "used", h->used);
	if (r >= 0)
		r = add_u64(c, "files", h->files);
	if (r >= 0)
		r = add_u64(c, "logical", h->logical);
	if (r >= 0)
		r = add_u64(c, "stored", h->stored);
	return r;
}

static int history_class_row(const CatalogHistoryClass *h, void *userdata) {
	HistoryEmit *e = userdata;
	/* The class rows come after every tier row: count their times afresh. */
	if (e->last_t > h->t || e->times == 0) {
		e->times = 0;
		e->last_t = INT64_MIN;
	}
	if (!history_keep(e, h->t, true) || (h->files == 0 && h->logical == 0))
		return 0;
	Conn *c = e->c;
	int r = row(c, "history_class");
	if (r >= 0)
		r = add_i64(c, "t", h->t);
	if (r >= 0)
		r = add(c, "class", tier_class_to_string((TierFileClass) h->file_class));
	if (r >= 0)
		r = add_u64(c, "files", h->files);
	if (r >= 0)
		r = add_u64(c, "logical", h->logical);
	if (r >= 0)
		r = add_u64(c, "hot_logical", h->hot_logical);
	return r;
}

static int history_count(const CatalogHistoryTier *h, void *userdata) {
	HistoryEmit *e = userdata;
	(void) history_keep(e, h->t, true);
	e->newest_t = h->t;
	return 0;
}

static int history_skip(const CatalogHistoryClass *h, void *userdata) {
	(void) h;
	(void) userdata;
	return 0;
}

static int add_history(Conn *c) {
	HistoryEmit e = { .c = c };
	int r = catalog_history_foreach(c->reader, 0, history_count, history_skip, &e);
	if (r < 0 || e.times == 0)
		return r;
	e = (HistoryEmit) {
		.c = c,
		.stride = (e.times + CONTROL_HISTORY_POINTS - 1) / CONTROL_HISTORY_POINTS,
		.emit = true,
		.newest_t = e.newest_t,
	};
	return catalog_history_foreach(c->reader, 0, history_tier_row, history_class_row, &e);
}

static int do_report(Conn *c, const CtlRequest *req) {
	FileVec files = {};
	GroupVec groups = {};
	NameVec names = {};
	FsPolicyOutlook outlook;
	int r = fs_policy_outlook(c->fs, c->reader, &outlook);
	if (r >= 0)
		r = census(c, &files);

	for (size_t i = 0; r >= 0 && i < files.n; i++) {
		const FileRow *f = &files.items[i];
		int64_t key = req->by == CTL_REPORT_BY_CLASS ? f->file_class
			    : req->by == CTL_REPORT_BY_TIER  ? f->tier
			    : req->by == CTL_REPORT_BY_DAY   ? day_of(f->mtime_ns)
							     : database_key(c, &names, f);
		if (key < 0) {
			r = (int) key;
			break;
		}
		Group *g = group_get(&groups, key);
		if (!g) {
			r = -ENOMEM;
			break;
		}
		g->files++;
		g->logical += f->size;
		g->raw += f->raw_bytes;
		if (f->state != CATALOG_FILE_SEALED)
			continue;
		DedupFileUsage u;
		int q = dedup_file_usage(c->reader, f->ino, &u);
		if (q == -ENOMEM)
			r = q;
		else if (q >= 0) {
			g->chunk_bytes += u.chunk_bytes;
			g->zero_bytes += u.zero_bytes;
			g->attributed += u.attributed;
			g->attributed_plain += u.attributed_plain;
		}
		/* A file whose recipe is damaged costs nothing we can tell; scrub names it. */
	}
	r = r >= 0 ? add(c, "by", ctl_report_by_to_string(req->by)) : r;
	r = r >= 0 ? add_outlook_fields(c, &outlook) : r;
	if (req->by == CTL_REPORT_BY_DATABASE && groups.n > 0)
		qsort_r(groups.items, groups.n, sizeof(Group), group_by_name, &names);
	for (size_t i = 0; r >= 0 && i < groups.n; i++) {
		const Group *g = &groups.items[i];
		char key[CATALOG_NAME_MAX + 1];
		if (req->by == CTL_REPORT_BY_CLASS)
			snprintf(key, sizeof(key), "%s", tier_class_to_string((TierFileClass) g->key));
		else if (req->by == CTL_REPORT_BY_DATABASE)
			snprintf(key, sizeof(key), "%s", names.names[g->key]);
		else if (req->by == CTL_REPORT_BY_TIER) {
			const ConfigTier *t = tier_set_config(c->fs->tiers, (uint32_t) g->key);
			snprintf(key, sizeof(key), "%s", t ? t->name : "unknown");
		} else {
			time_t t = (time_t) (g->key * 86400);
			struct tm tm;
			gmtime_r(&t, &tm);
			strftime(key, sizeof(key), "%Y-%m-%d", &tm);
		}
		r = row(c, "group");
		if (r >= 0)
			r = add(c, "key", key);
		if (r >= 0)
			r = add_u64(c, "files", g->files);
		if (r >= 0)
			r = add_u64(c, "logical", g->logical);
		if (r >= 0)
			r = add_u64(c, "stored", (uint64_t) (g->attributed + 0.5) + g->raw);
		if (r >= 0)
			r = add_u64(c, "raw", g->raw);
		if (r >= 0)
			r = add_u64(c, "chunk_bytes", g->chunk_bytes);
		if (r >= 0)
			r = add_u64(c, "zero_bytes", g->zero_bytes);
		if (r >= 0)
			r = add_u64(c, "unique_plain", (uint64_t) (g->attributed_plain + 0.5));
		if (r >= 0)
			r = add_u64(c, "chunk_stored", (uint64_t) (g->attributed + 0.5));
	}
	free(groups.items);
	free(files.items);
	name_vec_done(&names);
	if (r >= 0)
		r = add_outlook_rows(c, &outlook);
	if (r >= 0)
		r = add_history(c);
	return r;
}

/* ---- gc and scrub ---- */

static int send_progress(Conn *c, const char *phase, uint64_t done, uint64_t total, uint64_t damaged) {
	CtlMessage m = {};
	int r = ctl_reply_begin(&m, CTL_REPLY_PROGRESS);
	if (r >= 0)
		r = ctl_message_add(&m, "phase", phase);
	if (r >= 0)
		r = ctl_message_add_u64(&m, "done", done);
	if (r >= 0)
		r = ctl_message_add_u64(&m, "total", total);
	if (r >= 0)
		r = ctl_message_add_u64(&m, "damaged", damaged);
	if (r >= 0)
		r = conn_send(c, &m);
	ctl_message_done(&m);
	return r;
}

/* Whether the client went away (Ctrl-C): it sends nothing after its request. */
static bool peer_gone(Conn *c) {
	struct pollfd p = { .fd = c->fd, .events = POLLIN | POLLRDHUP };
	return poll(&p, 1, 0) > 0;
}

/* Compaction's progress, per tier; Ctrl-C (the client leaving) stops it between two containers. */
static int gc_progress(uint64_t done, uint64_t total, void *userdata) {
	Conn *c = userdata;
	if (atomic_load(&c->ctl->stopping) || peer_gone(c))
		return -ECANCELED;
	int64_t now = now_ns(CLOCK_MONOTONIC);
	if (now - c->last_progress_ns < CONTROL_PROGRESS_INTERVAL_NS && done > 0 && done < total)
		return 0;
	c->last_progress_ns = now;
	return send_progress(c, "compact", done, total, 0) < 0 ? -ECANCELED : 0;
}

static int do_gc(Conn *c) {
	DedupGcOptions o = DEDUP_GC_OPTIONS_DEFAULT;
	DedupGcStats st = {};
	int r = send_progress(c, "collect", 0, 0, 0);
	if (r < 0)
		return r;
	o.progress = gc_progress;
	o.userdata = c;
	c->last_progress_ns = 0;
	r = fs_tiers_gc(c->fs, &o, &st);
	if (r == -ECANCELED)
		return conn_fail(c, r, "stopped between two containers: what was collected and compacted stays done");
	if (r < 0)
		log_warning_errno(r, "Chunk collection asked by tierctl failed: %m");
	int q = add_u64(c, "chunks_deleted", st.chunks_deleted);
	if (q >= 0)
		q = add_u64(c, "containers_deleted", st.containers_deleted);
	if (q >= 0)
		q = add_u64(c, "containers_compacted", st.containers_compacted);
	if (q >= 0)
		q = add_u64(c, "bytes_copied", st.bytes_copied);
	if (q >= 0)
		q = add_u64(c, "bytes_freed", st.bytes_freed);
	if (q >= 0)
		q = add_u64(c, "orphans_deleted", st.orphans_deleted);
	if (q >= 0)
		q = add_u64(c, "containers_skipped", st.containers_skipped);
	if (r < 0)
		return conn_fail(c, r, "collection failed: %s (what was done before stays done)", strerror(-r));
	return q;
}

static int scrub_progress(const DedupScrubResult *res, uint64_t total, void *userdata) {
	Conn *c = userdata;
	if (atomic_load(&c->ctl->stopping) || peer_gone(c))
		return -ECANCELED;
	int64_t now = now_ns(CLOCK_MONOTONIC);
	/* The last one is sent by do_scrub(), with the final figures. */
	if (now - c->last_progress_ns < CONTROL_PROGRESS_INTERVAL_NS || res->bytes >= total)
		return 0;
	c->last_progress_ns = now;
	int r = send_progress(c, "verify", res->bytes, total, res->damaged_chunks);
	return r < 0 ? -ECANCELED : 0;
}

static int id_compare(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
	return x < y ? -1 : x > y;
}

static int do_scrub(Conn *c, const CtlRequest *req) {
	DedupScrubResult res = {};
	FileVec files = {};
	uint64_t damaged_files = 0;
	int r;

	uint32_t tier = req->has_tier ? req->tier : 0;
	DedupStore *store = fs_tier_store(c->fs, tier);
	if (!store)
		return conn_fail(c, tier < tier_set_count(c->fs->tiers) ? -ENXIO : -ENOENT,
				 tier < tier_set_count(c->fs->tiers) ? "tier %u is not reachable (see tierctl status)" : "there is no tier %u",
				 (unsigned) tier);
	if (atomic_exchange(&c->ctl->scrub_running, true))
		return conn_fail(c, -EBUSY, "a scrub is already running; wait for it to finish");
	c->last_progress_ns = 0;
	r = dedup_store_scrub(store, scrub_progress, c, &res);
	atomic_store(&c->ctl->scrub_running, false);
	if (res.damaged_chunks)
		log_error("scrub found %llu damaged chunks in tier %u", (unsigned long long) res.damaged_chunks,
			  (unsigned) tier);
	if (r == -ECANCELED) {
		dedup_scrub_result_done(&res);
		return conn_fail(c, r, "scrub stopped (nothing was left half done)");
	}
	if (r < 0) {
		dedup_scrub_result_done(&res);
		return conn_fail(c, r, "scrub failed: %s", strerror(-r));
	}
	r = send_progress(c, "verify", res.bytes, res.bytes, res.damaged_chunks);

	/* Which files the damage reaches: counted first, since a reply's own fields precede its rows. */
	_cleanup_free_ uint64_t *hit = NULL;
	_cleanup_free_ bool *unreadable = NULL;
	if (r >= 0 && res.n_damaged > 0) {
		qsort(res.damaged, res.n_damaged, sizeof(uint64_t), id_compare);
		r = census(c, &files);
		hit = r >= 0 ? calloc(files.n + 1, sizeof(uint64_t)) : NULL;
		unreadable = r >= 0 ? calloc(files.n + 1, sizeof(bool)) : NULL;
		if (r >= 0 && (!hit || !unreadable))
			r = -ENOMEM;
		for (size_t i = 0; r >= 0 && i < files.n; i++) {
			if (files.items[i].state != CATALOG_FILE_SEALED)
				continue;
			int q = dedup_file_references_any(c->reader, files.items[i].ino, res.damaged, res.n_damaged);
			if (q == 0)
				continue;
			unreadable[damaged_files] = q < 0;
			hit[damaged_files++] = files.items[i].ino;
		}
	}
	if (r >= 0)
		r = add_u64(c, "containers", res.containers);
	if (r >= 0)
		r = add_u64(c, "chunks", res.chunks);
	if (r >= 0)
		r = add_u64(c, "bytes", res.bytes);
	if (r >= 0)
		r = add_u64(c, "damaged_chunks", res.damaged_chunks);
	if (r >= 0)
		r = add_u64(c, "damaged_containers", res.damaged_containers);
	if (r >= 0)
		r = add_u64(c, "damaged_files", damaged_files);
	for (size_t i = 0; r >= 0 && i < damaged_files; i++) {
		_cleanup_free_ char *path = NULL;
		r = row(c, "damaged");
		if (r >= 0 && path_of(c->reader, hit[i], &path) >= 0)
			r = add(c, "path", path);
		if (r >= 0)
			r = add_u64(c, "ino", hit[i]);
		if (r >= 0 && unreadable[i])
			r = add(c, "error", "recipe unreadable");
	}
	free(files.items);
	dedup_scrub_result_done(&res);
	return r;
}

/* ---- migrate and recall ---- */

/* What happens (or would happen) to one file. */
typedef enum MoveResult {
	MOVE_PENDING,
	MOVE_MOVED,
	MOVE_WOULD_MOVE,
	MOVE_ALREADY,
	MOVE_SKIPPED,
	MOVE_FAILED,
	MOVE_UNPINNED,
	_MOVE_RESULT_MAX,
} MoveResult;

static const char *const move_result_names[_MOVE_RESULT_MAX] = {
	[MOVE_PENDING] = "pending",   [MOVE_MOVED] = "moved",     [MOVE_WOULD_MOVE] = "would_move",
	[MOVE_ALREADY] = "already",   [MOVE_SKIPPED] = "skipped", [MOVE_FAILED] = "failed",
	[MOVE_UNPINNED] = "unpinned",
};

typedef struct MoveItem {
	uint64_t ino;
	uint64_t size;
	uint32_t from;
	MoveResult result;
	const char *why;  /* static */
	int error;
	TierMoveResult moved;
} MoveItem;

typedef struct MovePlan {
	MoveItem *items;
	size_t n, cap;
	uint32_t to;
	uint64_t total, done; /* bytes to move, and moved (for progress) */
	const CtlRequest *req; /* its class, age and size filters */
	int file_class;       /* the filter's class, -1 for any */
	int64_t now_ns;       /* when the plan was made: ages are counted from it */
} MovePlan;

/* Whether a file passes the request's --class, --older-than and --larger-than (size: the current one). */
static bool plan_wants(const MovePlan *p, const CatalogInode *ci, uint64_t size) {
	const CtlRequest *req = p->req;
	if (p->file_class >= 0 && ci->file_class != (uint32_t) p->file_class)
		return false;
	if (req->has_older_than && p->now_ns - ci->mtime_ns < (int64_t) req->older_than * 1000000000)
		return false;
	return !req->has_larger_than || size > req->larger_than;
}

static int plan_add(Conn *c, MovePlan *p, const CatalogInode *ci) {
	uint64_t size = ci->size;
	if (ci->state != CATALOG_FILE_SEALED)
		raw_fill(c->fs, ci->tier, ci->ino, &size, &(uint64_t) { 0 }, NULL);
	if (!plan_wants(p, ci, size))
		return 0;
	if (p->n == p->cap) {
		size_t cap = MAX(p->cap * 2, (size_t) 256);
		MoveItem *q = realloc(p->items, cap * sizeof(*q));
		if (!q)
			return -ENOMEM;
		p->items = q;
		p->cap = cap;
	}
	MoveItem *it = &p->items[p->n++];
	*it = (MoveItem) { .ino = ci->ino, .size = size, .from = ci->tier };
	/* The planner's verdict, the very rules of the policy (tier/planner.h); a pin matters only off the hot tier. */
	TierPlanFile f = {
		.ino = ci->ino,
		.file_class = ci->file_class,
		.tier = ci->tier,
		.sealed = ci->state == CATALOG_FILE_SEALED,
		.pinned = p->to != 0 && catalog_pinned(c->reader, ci->ino) > 0,
	};
	switch (tier_plan_request(c->fs->config, &f, p->to, &it->why)) {
	case TIER_REQUEST_ALREADY:
		it->result = MOVE_ALREADY;
		break;
	case TIER_REQUEST_SKIP:
		it->result = MOVE_SKIPPED;
		break;
	default:
		break;
	}
	return 0;
}

static int item_compare(const void *a, const void *b) {
	const MoveItem *x = a, *y = b;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* In inode order, each file once (named twice, or a hard link met again), and the bytes to move. */
static void plan_finish(MovePlan *p) {
	size_t n = 0;
	if (p->n > 0)
		qsort(p->items, p->n, sizeof(MoveItem), item_compare);
	for (size_t i = 0; i < p->n; i++) {
		if (n > 0 && p->items[n - 1].ino == p->items[i].ino)
			continue;
		p->items[n++] = p->items[i];
		if (p->items[i].result == MOVE_PENDING)
			p->total += p->items[i].size;
	}
	p->n = n;
}

typedef struct LogSelection {
	const CtlRequest *req;
	uint64_t *inos;
	size_t n, cap;
} LogSelection;

static int log_selected(uint64_t ino, const CatalogArchivelog *a, void *userdata) {
	LogSelection *sel = userdata;
	/* A log belongs to a window when the changes it holds, [low_time, next_time], meet it. */
	if ((sel->req->has_since && a->next_time < sel->req->since) ||
	    (sel->req->has_until && a->low_time > sel->req->until))
		return 0;
	if (sel->n == sel->cap) {
		size_t cap = MAX(sel->cap * 2, (size_t) 256);
		uint64_t *q = realloc(sel->inos, cap * sizeof(*q));
		if (!q)
			return -ENOMEM;
		sel->inos = q;
		sel->cap = cap;
	}
	sel->inos[sel->n++] = ino;
	return 0;
}

/* The archived logs whose recorded headers match the request's thread, sequence range and time window. */
static int plan_logs(Conn *c, MovePlan *p, const CtlRequest *req) {
	LogSelection sel = { .req = req };
	/* The catalog is locked during the walk: collect first, look the inodes up after. */
	int r = catalog_archivelogs_foreach(c->reader, 0, req->has_thread ? req->thread : 0,
					    req->has_sequence ? req->sequence_first : 0,
					    req->has_sequence ? req->sequence_last : UINT32_MAX, log_selected, &sel);
	for (size_t i = 0; r >= 0 && i < sel.n; i++) {
		CatalogInode ci;
		int q = catalog_inode_get(c->reader, sel.inos[i], &ci);
		if (q == -ENOENT)
			continue; /* deleted since */
		r = q < 0 ? q : ci.nlink > 0 && S_ISREG(ci.mode) ? plan_add(c, p, &ci) : 0;
	}
	free(sel.inos);
	return r;
}

static int plan_visit(Conn *c, const CatalogInode *ci, void *userdata) {
	if (S_ISDIR(ci->mode))
		return 1;
	return S_ISREG(ci->mode) ? plan_add(c, userdata, ci) : 0;
}

/* Every regular file of a tree (the caller may do anything: it is root or the owner). */
static int plan_tree(Conn *c, MovePlan *p, uint64_t top) {
	return tree_walk(c, top, plan_visit, p);
}

static int move_progress(uint64_t done, uint64_t total, void *userdata) {
	Conn *c = userdata;
	MovePlan *p = c->move_plan;
	if (atomic_load(&c->ctl->stopping) || peer_gone(c))
		return -ECANCELED;
	int64_t now = now_ns(CLOCK_MONOTONIC);
	if (now - c->last_progress_ns < CONTROL_PROGRESS_INTERVAL_NS)
		return 0;
	c->last_progress_ns = now;
	return send_progress(c, "copy", p->done + done, p->total, 0) < 0 ? -ECANCELED : 0;
}

/* Moves one planned file, sealing it first if it is still raw. */
static int move_one(Conn *c, MovePlan *p, MoveItem *it) {
	Fs *fs = c->fs;
	CatalogInode ci;
	int r = catalog_inode_get(fs->catalog, it->ino, &ci);
	if (r >= 0 && ci.state != CATALOG_FILE_SEALED) {
		/* Asked for by name: no need to wait for the seal delay. */
		r = fs_data_seal(fs, it->ino);
		if (r >= 0)
			r = catalog_inode_get(fs->catalog, it->ino, &ci);
		if (r >= 0 && ci.state != CATALOG_FILE_SEALED) {
			it->result = MOVE_SKIPPED;
			it->why = "not sealed: open for writing, changed while being sealed, or mostly holes; try again later";
			return 0;
		}
	}
	/* Changed under the copy: that copy is garbage; start again from what the file is now. */
	for (unsigned stale = 0; r >= 0;) {
		r = tier_mover_move(fs->mover, it->ino, p->to, move_progress, c, &it->moved);
		if (r != -ESTALE || ++stale == 3)
			break;
	}
	if (r == -ECANCELED)
		return r;
	if (r == 1)
		it->result = MOVE_MOVED;
	else if (r == 0)
		it->result = MOVE_ALREADY;
	else if (r == -ENOENT) {
		it->result = MOVE_SKIPPED;
		it->why = "deleted meanwhile";
	} else if (r == -ESTALE) {
		it->result = MOVE_SKIPPED;
		it->why = "changed while being copied, three times; try again later";
	} else if (r == -EMEDIUMTYPE) {
		it->result = MOVE_SKIPPED;
		it->why = "written meanwhile: raw on the hot tier again; try again once it is sealed";
	} else {
		it->result = MOVE_FAILED;
		it->error = r;
		it->why = r == -ENXIO ? "its tier or the target is not reachable" : NULL;
		log_warning_errno(r, "Failed to move inode %llu to tier %u: %m", (unsigned long long) it->ino,
				  (unsigned) p->to);
	}
	return 0;
}

static int do_move(Conn *c, const CtlRequest *req) {
	Fs *fs = c->fs;
	bool pin = req->command == CTL_COMMAND_PIN, unpin = req->command == CTL_COMMAND_UNPIN;
	MovePlan p = {
		.to = req->command == CTL_COMMAND_MIGRATE ? (req->has_tier ? req->tier : 1) : 0,
		.req = req,
		.file_class = req->file_class ? tier_class_from_string(req->file_class) : -1,
		.now_ns = now_ns(CLOCK_REALTIME),
	};
	uint64_t count[_MOVE_RESULT_MAX] = {}, bytes = 0, new_bytes = 0, stored_bytes = 0;
	int r = 0;

	if (req->file_class && p.file_class < 0) {
		char names[256];
		tier_class_names_join(names, sizeof(names));
		return conn_fail(c, -EINVAL, "unknown class '%s' (the classes are %s)", req->file_class, names);
	}

	if (p.to >= tier_set_count(fs->tiers))
		return conn_fail(c, -ENOENT, "there is no tier %u (this mount has %u; see tierctl df)", (unsigned) p.to,
				 (unsigned) tier_set_count(fs->tiers));
	if (!fs_tier_store(fs, p.to))
		return conn_fail(c, -ENXIO, "tier %u (%s) is not reachable: %s", (unsigned) p.to,
				 tier_set_config(fs->tiers, p.to)->name, tier_set_error(fs->tiers, p.to) ?: "see tierctl status");

	for (size_t i = 0; r >= 0 && i < req->n_paths; i++) {
		CatalogInode ci;
		int q = resolve(c, req->paths[i], &ci);
		if (q >= 0)
			q = S_ISDIR(ci.mode) ? plan_tree(c, &p, ci.ino) : S_ISREG(ci.mode) ? plan_add(c, &p, &ci) : -EINVAL;
		if (q == -ECANCELED || q == -ENOMEM) {
			r = q;
			break;
		}
		if (q < 0)
			r = path_failed(c, req->paths[i], q);
	}
	if (r >= 0 && (req->has_thread || req->has_sequence || req->has_since || req->has_until))
		r = plan_logs(c, &p, req);

	plan_finish(&p);
	/*
	 * Pins first, so that no policy run demotes a file between its recall
	 * and its pin; a pin is a wish about placement, kept even if the
	 * recall of that file fails (the next recall or the policy honours it).
	 */
	for (size_t i = 0; r >= 0 && (pin || unpin) && !req->dry_run && i < p.n; i++) {
		r = catalog_pin_set(fs->catalog, p.items[i].ino, pin);
		if (unpin)
			p.items[i].result = MOVE_UNPINNED;
	}
	c->move_plan = &p;
	c->last_progress_ns = 0;
	uint64_t queued = 0;
	for (size_t i = 0; !req->dry_run && i < p.n; i++)
		queued += p.items[i].result == MOVE_PENDING;
	atomic_fetch_add(&fs->migrate_queue, queued);
	for (size_t i = 0; r >= 0 && i < p.n; i++) {
		MoveItem *it = &p.items[i];
		if (it->result != MOVE_PENDING)
			continue;
		if (req->dry_run) {
			it->result = MOVE_WOULD_MOVE;
			continue;
		}
		r = move_one(c, &p, it);
		p.done += it->size;
		atomic_fetch_sub(&fs->migrate_queue, 1);
		queued--;
	}
	atomic_fetch_sub(&fs->migrate_queue, queued);
	c->move_plan = NULL;
	/* The moved files join their tier's description (disaster recovery) before tierctl hears they moved. */
	if (!req->dry_run && p.to > 0)
		(void) fs_tiers_describe(fs);
	if (r == -ECANCELED) {
		free(p.items);
		return conn_fail(c, r, "stopped: the files moved so far stay moved, the one being copied stays where it "
				       "was");
	}
	if (r >= 0 && !req->dry_run)
		r = send_progress(c, "copy", p.total, p.total, 0);

	for (size_t i = 0; i < p.n; i++) {
		count[p.items[i].result]++;
		bytes += p.items[i].moved.bytes;
		new_bytes += p.items[i].moved.new_bytes;
		stored_bytes += p.items[i].moved.stored_bytes;
	}
	if (r >= 0)
		r = add_u64(c, "to", p.to);
	if (r >= 0)
		r = add(c, "to_name", tier_set_config(fs->tiers, p.to)->name);
	if (r >= 0)
		r = add(c, "dry_run", req->dry_run ? "yes" : "no");
	if (r >= 0)
		r = add_u64(c, "files", p.n);
	for (int k = MOVE_MOVED; r >= 0 && k < _MOVE_RESULT_MAX; k++)
		r = add_u64(c, move_result_names[k], count[k]);
	if (r >= 0)
		r = add_u64(c, "bytes", req->dry_run ? p.total : bytes);
	if (r >= 0)
		r = add_u64(c, "new_bytes", new_bytes);
	if (r >= 0)
		r = add_u64(c, "stored_bytes", stored_bytes);
	for (size_t i = 0; r >= 0 && i < p.n; i++) {
		const MoveItem *it = &p.items[i];
		_cleanup_free_ char *path = NULL;
		r = row(c, "file");
		if (r >= 0 && path_of(c->reader, it->ino, &path) >= 0)
			r = add(c, "path", path);
		if (r >= 0)
			r = add_u64(c, "ino", it->ino);
		if (r >= 0)
			r = add_u64(c, "size", it->size);
		if (r >= 0)
			r = add_u64(c, "from", it->from);
		if (r >= 0)
			r = add(c, "result", move_result_names[it->result]);
		if (r >= 0 && it->result == MOVE_MOVED)
			r = add_u64(c, "new_bytes", it->moved.new_bytes);
		if (r >= 0 && it->result == MOVE_MOVED)
			r = add_u64(c, "stored_bytes", it->moved.stored_bytes);
		if (r >= 0 && (it->why || it->error))
			r = add(c, "message", it->why ?: strerror(-it->error));
	}
	free(p.items);
	return r;
}

/* ---- one connection ---- */

static int recv_full(int fd, void *buf, size_t n, int64_t deadline) {
	uint8_t *p = buf;
	while (n > 0) {
		int64_t left = (deadline - now_ns(CLOCK_MONOTONIC)) / 1000000;
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int k = poll(&pfd, 1, (int) MIN(left, (int64_t) CONTROL_REQUEST_TIMEOUT_MS));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			continue;
		ssize_t got = recv(fd, p, n, MSG_DONTWAIT);
		if (got < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (got == 0)
			return -ECONNRESET;
		p += got;
		n -= (size_t) got;
	}
	return 0;
}

static int serve(Conn *c) {
	uint8_t hdr[CTL_FRAME_HEADER_SIZE];
	_cleanup_free_ uint8_t *payload = NULL;
	CtlRequest req = {};
	uint32_t len;
	int r;

	int64_t deadline = now_ns(CLOCK_MONOTONIC) + (int64_t) CONTROL_REQUEST_TIMEOUT_MS * 1000000;
	r = recv_full(c->fd, hdr, sizeof(hdr), deadline);
	if (r < 0)
		return r; /* nobody to answer */
	r = ctl_frame_header_parse(hdr, CTL_REQUEST_SIZE_MAX, &len);
	if (r < 0)
		return conn_done(c, conn_fail(c, r, "bad request frame: %s",
					      r == -E2BIG ? "longer than the request limit" : "empty"));
	payload = malloc(len);
	if (!payload)
		return -ENOMEM;
	r = recv_full(c->fd, payload, len, deadline);
	if (r < 0)
		return r;
	_cleanup_free_ char *why = NULL;
	r = ctl_request_parse(payload, len, &req, &why);
	if (r < 0) {
		log_debug("tierctl request from uid %u refused: %s", (unsigned) c->cred.uid, why ?: "");
		return conn_done(c, conn_fail(c, r, "bad request: %s", why ?: strerror(-r)));
	}

	r = catalog_open_reader(c->fs->catalog, &c->reader);
	if (r < 0)
		r = conn_fail(c, r, "cannot open the catalog for reading: %s", strerror(-r));
	if (r >= 0)
		r = authorize(c, req.command);
	if (r >= 0)
		r = conn_reset(c);
	if (r >= 0) {
		log_debug("tierctl %s from uid %u", ctl_command_to_string(req.command), (unsigned) c->cred.uid);
		switch (req.command) {
		case CTL_COMMAND_STATUS:
			r = do_status(c);
			break;
		case CTL_COMMAND_DF:
			r = do_df(c);
			break;
		case CTL_COMMAND_DU:
			r = do_du(c, &req);
			break;
		case CTL_COMMAND_LS:
			r = do_ls(c, &req);
			break;
		case CTL_COMMAND_REPORT:
			r = do_report(c, &req);
			break;
		case CTL_COMMAND_POLICY:
			r = do_policy(c);
			break;
		case CTL_COMMAND_GC:
			r = do_gc(c);
			break;
		case CTL_COMMAND_SCRUB:
			r = do_scrub(c, &req);
			break;
		case CTL_COMMAND_MIGRATE:
		case CTL_COMMAND_RECALL:
		case CTL_COMMAND_PIN:
		case CTL_COMMAND_UNPIN:
			r = do_move(c, &req);
			break;
		default:
			r = conn_fail(c, -EINVAL, "command not served");
		}
	}
	ctl_request_done(&req);
	if (r >= 0)
		r = conn_flush(c);
	/* A failed send means the client is gone: nobody to tell. */
	if (r == -EPIPE || r == -ECONNRESET || r == -EAGAIN)
		return r;
	return conn_done(c, r);
}

static void *conn_main(void *userdata) {
	Conn *c = userdata;
	FsControl *ctl = c->ctl;
	struct timeval tv = { .tv_sec = CONTROL_SEND_TIMEOUT_S };

	/* Invariant 2: a client that stops reading cannot hold this worker for longer. */
	(void) setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	int r = peer_load(c);
	if (r >= 0)
		r = serve(c);
	if (r < 0)
		log_debug_errno(r, "tierctl connection ended: %m");

	/*
	 * Read what the client may still be sending (a refused request's
	 * rest) until it closes: closing with unread bytes would reset the
	 * connection and could destroy the refusal before the client reads it.
	 */
	if (shutdown(c->fd, SHUT_WR) == 0) {
		char sink[4096];
		int64_t until = now_ns(CLOCK_MONOTONIC) + CONTROL_DRAIN_MS * 1000000;
		for (size_t total = 0; total < CTL_REQUEST_SIZE_MAX;) {
			int64_t left = (until - now_ns(CLOCK_MONOTONIC)) / 1000000;
			struct pollfd p = { .fd = c->fd, .events = POLLIN };
			if (left <= 0 || poll(&p, 1, (int) left) <= 0)
				break;
			ssize_t k = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
			if (k <= 0)
				break;
			total += (size_t) k;
		}
	}
	c->reader = catalog_close(c->reader);
	ctl_message_done(&c->out);
	free(c->error);
	free(c->groups);
	pthread_mutex_lock(&ctl->lock);
	ctl->conn_fds[c->slot] = -1;
	ctl->n_conns--;
	close(c->fd);
	pthread_cond_broadcast(&ctl->idle);
	pthread_mutex_unlock(&ctl->lock);
	free(c);
	return NULL;
}

/* ---- the listener ---- */

static void refuse_busy(int fd) {
	CtlMessage m = {};
	_cleanup_free_ uint8_t *buf = NULL;
	size_t size;
	if (ctl_reply_begin(&m, CTL_REPLY_DONE) >= 0 && ctl_message_add(&m, "status", "error") >= 0 &&
	    ctl_message_add_u64(&m, "errno", EBUSY) >= 0 &&
	    ctl_message_addf(&m, "message", "busy: %d tierctl clients are being served; try again",
			     CONTROL_CONNECTIONS_MAX) >= 0 &&
	    ctl_message_format(&m, CTL_FRAME_SIZE_MAX, &buf, &size) >= 0)
		(void) send(fd, buf, size, MSG_NOSIGNAL | MSG_DONTWAIT);
	ctl_message_done(&m);
}

static void accept_one(FsControl *ctl) {
	int fd = accept4(ctl->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	pthread_mutex_lock(&ctl->lock);
	int slot = -1;
	for (int i = 0; i < CONTROL_CONNECTIONS_MAX; i++)
		if (ctl->conn_fds[i] < 0) {
			slot = i;
			break;
		}
	if (slot >= 0) {
		ctl->conn_fds[slot] = fd;
		ctl->n_conns++;
	}
	pthread_mutex_unlock(&ctl->lock);
	if (slot < 0) {
		refuse_busy(fd);
		close(fd);
		return;
	}

	Conn *c = calloc(1, sizeof(*c));
	pthread_t t;
	pthread_attr_t attr;
	int r = c ? 0 : -ENOMEM;
	if (c) {
		*c = (Conn) { .ctl = ctl, .fs = ctl->fs, .fd = fd, .slot = slot };
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		r = -pthread_create(&t, &attr, conn_main, c);
		pthread_attr_destroy(&attr);
	}
	if (r < 0) {
		log_warning_errno(r, "Cannot serve a tierctl connection: %m");
		free(c);
		pthread_mutex_lock(&ctl->lock);
		ctl->conn_fds[slot] = -1;
		ctl->n_conns--;
		close(fd);
		pthread_cond_broadcast(&ctl->idle);
		pthread_mutex_unlock(&ctl->lock);
	}
}

static int sum_stored(const CatalogContainer *ct, void *userdata) {
	*(uint64_t *) userdata += ct->size;
	return 0;
}

/* Samples sealed and stored bytes for the throughput in status (on the listener's own reader). */
static void sample(FsControl *ctl) {
	CatalogFileTotals t;
	Sample s = { .t_ns = now_ns(CLOCK_MONOTONIC) };
	if (catalog_files_totals(ctl->sampler, &t) < 0 ||
	    catalog_containers_foreach(ctl->sampler, 0, sum_stored, &s.stored_bytes) < 0)
		return;
	s.sealed_bytes = t.bytes[CATALOG_FILE_SEALED];
	pthread_mutex_lock(&ctl->lock);
	if (ctl->n_samples == CONTROL_SAMPLES) {
		memmove(&ctl->samples[0], &ctl->samples[1], (CONTROL_SAMPLES - 1) * sizeof(Sample));
		ctl->n_samples--;
	}
	ctl->samples[ctl->n_samples++] = s;
	pthread_mutex_unlock(&ctl->lock);
}

/* A sample of usage for the reports' charts (history.c): a failure costs one point of a chart, said once. */
static void sample_history(FsControl *ctl) {
	int r = fs_history_record(ctl->fs, ctl->sampler);
	if (r < 0 && !ctl->history_failed)
		log_warning_errno(r, "Cannot record a sample of usage for the reports: %m");
	ctl->history_failed = r < 0;
}

static void *listener_main(void *userdata) {
	FsControl *ctl = userdata;
	int64_t next_sample = 0, next_history = 0;
	int64_t history_ns = (int64_t) ctl->fs->history_interval_s * 1000000000;

	while (!atomic_load(&ctl->stopping)) {
		int64_t now = now_ns(CLOCK_MONOTONIC);
		if (now >= next_sample) {
			sample(ctl);
			next_sample = now + (int64_t) CONTROL_SAMPLE_INTERVAL_MS * 1000000;
		}
		if (history_ns > 0 && now >= next_history) {
			sample_history(ctl);
			next_history = now + history_ns;
		}
		int64_t wake = history_ns > 0 ? MIN(next_sample, next_history) : next_sample;
		struct pollfd p[2] = {
			{ .fd = ctl->listen_fd, .events = POLLIN },
			{ .fd = ctl->wake[0], .events = POLLIN },
		};
		int k = poll(p, 2, (int) ((wake - now) / 1000000) + 1);
		if (k < 0 && errno != EINTR) {
			log_error_errno(errno, "Control socket poll failed, tierctl is no longer served: %m");
			break;
		}
		if (k > 0 && (p[0].revents & POLLIN))
			accept_one(ctl);
	}
	return NULL;
}

/* Binds path, replacing a socket no daemon answers on (left by a crash). */
static int socket_bind(const char *path, int *ret) {
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);

	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
		if (errno != EADDRINUSE)
			return -errno;
		_cleanup_close_ int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe < 0)
			return -errno;
		if (connect(probe, (struct sockaddr *) &sa, sizeof(sa)) == 0)
			return -EADDRINUSE;
		struct stat st;
		if (lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
			return -EEXIST; /* never delete anything but a dead socket */
		if (unlink(path) < 0 || bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
			return -errno;
	}
	/* Everyone may connect: the peer's credentials decide what it may do. */
	if (chmod(path, 0666) < 0 || listen(fd, 64) < 0) {
		int r = -errno;
		(void) unlink(path);
		return r;
	}
	*ret = TAKE_FD(fd);
	return 0;
}

static FsControl *control_free(FsControl *ctl) {
	if (!ctl)
		return NULL;
	if (ctl->listen_fd >= 0) {
		close(ctl->listen_fd);
		(void) unlink(ctl->path);
	}
	for (int i = 0; i < 2; i++)
		if (ctl->wake[i] >= 0)
			close(ctl->wake[i]);
	ctl->sampler = catalog_close(ctl->sampler);
	pthread_cond_destroy(&ctl->idle);
	pthread_mutex_destroy(&ctl->lock);
	free(ctl->path);
	free(ctl);
	return NULL;
}

int fs_control_open(Fs *fs, const char *path) {
	FsControl *ctl = calloc(1, sizeof(*ctl));
	int r;

	if (!ctl)
		return -ENOMEM;
	*ctl = (FsControl) { .fs = fs, .listen_fd = -1, .wake = { -1, -1 }, .owner = geteuid() };
	pthread_mutex_init(&ctl->lock, NULL);
	pthread_cond_init(&ctl->idle, NULL);
	for (int i = 0; i < CONTROL_CONNECTIONS_MAX; i++)
		ctl->conn_fds[i] = -1;
	ctl->path = strdup(path);
	if (!ctl->path) {
		r = -ENOMEM;
		goto fail;
	}
	if (pipe2(ctl->wake, O_CLOEXEC) < 0) {
		r = -errno;
		goto fail;
	}
	r = socket_bind(path, &ctl->listen_fd);
	if (r < 0)
		goto fail;
	fs->control = ctl;
	return 0;

fail:
	control_free(ctl);
	return r;
}

int fs_control_start(Fs *fs) {
	FsControl *ctl = fs->control;
	ctl->started_ns = now_ns(CLOCK_MONOTONIC);
	int r = catalog_open_reader(fs->catalog, &ctl->sampler);
	if (r < 0)
		return r;
	r = -pthread_create(&ctl->listener, NULL, listener_main, ctl);
	if (r < 0)
		return r;
	ctl->listener_started = true;
	return 0;
}

void fs_control_stop(Fs *fs) {
	FsControl *ctl = fs->control;
	if (!ctl)
		return;
	atomic_store(&ctl->stopping, true);
	ssize_t k = write(ctl->wake[1], "x", 1);
	(void) k; /* the pipe is empty: a one-byte write cannot fail short */
	if (ctl->listener_started)
		pthread_join(ctl->listener, NULL);

	/* Invariant 4: wake every worker out of its socket calls and wait for them. */
	pthread_mutex_lock(&ctl->lock);
	for (int i = 0; i < CONTROL_CONNECTIONS_MAX; i++)
		if (ctl->conn_fds[i] >= 0)
			(void) shutdown(ctl->conn_fds[i], SHUT_RDWR);
	while (ctl->n_conns > 0)
		pthread_cond_wait(&ctl->idle, &ctl->lock);
	pthread_mutex_unlock(&ctl->lock);
	fs->control = control_free(ctl);
}
