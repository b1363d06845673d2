/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once
/* private to control/: do not include outside control/ */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "catalog/catalog.h"
#include "common/clock.h"
#include "common/ctlproto.h"
#include "common/macros.h"
#include "control/control.h"
#include "tier/recovery.h"

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
/* Samples of usage are kept this long (history.c). */
#define CONTROL_HISTORY_KEEP_DAYS 400

/* Sealed and stored bytes at one time, for the throughput in status. */
typedef struct Sample {
	int64_t t_ns;
	uint64_t sealed_bytes;
	uint64_t stored_bytes;
} Sample;

/* The server (control.h). */
struct Control {
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
	unsigned history_interval_s; /* between samples of usage (history.c); 0: none */
	bool history_failed;      /* the last sample of usage failed (said once until one works) */
	atomic_uint_fast64_t migrate_queue; /* files waiting in the moves tierctl asked for (for status) */
	/* Recalls measured, per source tier: bytes and time of the last ones (recall --dry-run's estimate). */
	uint64_t recall_bytes[CONFIG_TIERS_MAX]; /* protected by lock */
	int64_t recall_ns[CONFIG_TIERS_MAX];     /* protected by lock */
};

/* One connection: one request and its reply frames. */
typedef struct Conn {
	Control *ctl;
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

/* One regular file, as tierctl counts it (control_census()). */
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

/*
 * server.c: the reply under way.  Fields of the reply come before its
 * rows; control_row() starts a row, sending the frame first if it is full
 * enough.  Each returns 0 or a negative errno (a failed send: the client is
 * gone).
 */
int control_add(Conn *c, const char *name, const char *value);
int control_add_u64(Conn *c, const char *name, uint64_t v);
int control_add_i64(Conn *c, const char *name, int64_t v);
int control_row(Conn *c, const char *kind);
/* Records why the request failed, for the done frame; returns r. */
int control_fail(Conn *c, int r, const char *format, ...) _printf_(3, 4);
/* A progress frame: phase, done of total, damaged. */
int control_progress(Conn *c, const char *phase, uint64_t done, uint64_t total, uint64_t damaged);
/* Whether the client went away (Ctrl-C): it sends nothing after its request. */
bool control_peer_gone(Conn *c);
/* As the kernel's generic_permission() for mask (4 read, 2 write, 1 search), root aside. */
bool control_may_access(const Conn *c, const CatalogInode *ci, unsigned mask);

/* report-files.c: the namespace as the peer may see it. */
/* A raw file's size and staging blocks (and its mtime, if mtime_ns): one that cannot be stat'ed reads as empty. */
void control_raw_fill(Fs *fs, uint32_t tier, uint64_t ino, uint64_t *size, uint64_t *raw_bytes, int64_t *mtime_ns);
/* Every regular file, raw ones with their staging file's size and time (the authoritative ones); free ret->items. */
int control_census(Conn *c, FileVec *ret);
/* The inode at an absolute path, with search permission on the way (-EACCES, -ENOTDIR, -ENOENT). */
int control_resolve(Conn *c, const char *path, CatalogInode *ret);
/*
 * Walks the tree below directory top, calling visit for every entry's inode:
 * for a directory, visit returns 1 to descend into it, 0 not to; for
 * anything, a negative return stops the walk and is returned.  Entries
 * removed meanwhile are passed over; the daemon stopping is -ECANCELED.
 */
int control_tree_walk(Conn *c, uint64_t top, int (*visit)(Conn *c, const CatalogInode *ci, void *userdata),
		      void *userdata);
/* A row saying a path named in the request failed, with err. */
int control_path_failed(Conn *c, const char *path, int err);
/* The path of ino from the root, following one link at each step (free it). */
int control_path_of(Catalog *cat, uint64_t ino, char **ret);

/* The request handlers, by kind: each fills the reply, or fails it with control_fail(). */
/* report-status.c */
int control_status(Conn *c);
int control_df(Conn *c);
int control_policy(Conn *c);
/* report-files.c */
int control_du(Conn *c, const CtlRequest *req);
int control_ls(Conn *c, const CtlRequest *req);
/* report-usage.c */
int control_report(Conn *c, const CtlRequest *req);
/* maintenance.c */
int control_gc(Conn *c);
int control_scrub(Conn *c, const CtlRequest *req);
/* tierctl rekey --tier N: asks the daemon to rekey the tier in the background (fs_rekey_request()). */
int control_rekey(Conn *c, const CtlRequest *req);
/* moves.c: migrate, recall, pin, unpin */
int control_move(Conn *c, const CtlRequest *req);

/* hosts.c: a shared tier's hosts: `row host` per host record (status), host retire, report --by host. */
int control_shared_hosts(Conn *c);
int control_host_retire(Conn *c, const CtlRequest *req);
int control_report_hosts(Conn *c);

/* recovery.c: tierctl recovery [DB]: per database, its runs, gaps, duplicates and gap-free windows. */
int control_recovery(Conn *c, const CtlRequest *req);
/* One finding as a row of its kind (kind NULL: the span's own, "run", "gap", ...). */
int control_recovery_add_span(Conn *c, const TierRecoverySpan *s, const char *kind);

/* The restore set of recall DB --until (recovery.c); db points into analysis. */
typedef struct ControlRestore {
	TierRecoveryLog *logs;
	size_t n_logs;
	TierRecovery analysis;
	const TierRecoveryDb *db;
	TierRestoreSet set;
} ControlRestore;

/* The restore set req names; on failure the reply's message says why (control_fail()). */
int control_restore_plan(Conn *c, const CtlRequest *req, ControlRestore *ret);
void control_restore_done(ControlRestore *rs);

/*
 * history.c: records one sample of usage per tier and file class; reader
 * reads, the daemon's catalog writes.
 */
int control_history_record(Fs *fs, Catalog *reader);
