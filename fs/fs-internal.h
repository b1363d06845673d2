/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once
/* private to fs/: do not include outside fs/ */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "catalog/catalog.h"
#include "common/config.h"
#include "dedup/key.h"
#include "dedup/store.h"
#include "fs/daemon.h"
#include "fs/readahead.h"
#include "fs/throttle.h"
#include "tier/class.h"
#include "tier/move.h"
#include "tier/planner.h"
#include "tier/tiers.h"

/*
 * Lock order, outermost first:
 *   -. the mover's lock (tier/move.c: one move between tiers at a time)
 *   -. the tiers' describe_lock (tier/describe.c: one description written at a time; never with the mover's)
 *   -. Fs.policy_lock (under the mover's lock only while a paced move waits on it)
 *   0. FsInode.data_lock (shared by every use of the data, exclusive to switch raw <-> sealed)
 *   1. the catalog lock (catalog_begin() .. commit/rollback, or any catalog call)
 *   2. Fs.table_lock
 *   3. Fs.seal_lock
 *   4. FsInode.lock
 *   -. Fs.throttle.lock: a leaf, and no thread waits on it holding any of the above
 *      (throttle.c, invariant 2)
 *   -. FsReadahead.lock: a leaf (readahead.c, invariant 5); a FUSE thread holding
 *      data_lock shared may wait there for a block, whose worker takes no inode lock
 * A thread holding a later lock never waits for an earlier one.  No close()
 * or unlink() of staging files happens under table_lock.
 */

/* The nice value of background work: sealing, encoding, moves, the collector. */
#define FS_BACKGROUND_NICE 10
#define FS_ATTR_TIMEOUT 1.0
#define FS_MAX_WRITE (1u << 20)
#define FS_STAGING_DIR "staging"
#define FS_STAGING_FANOUT 256
/* A retired staging file's name in its area, fs_staging_retire(). */
#define FS_STAGING_RETIRED_NAME_MAX sizeof("ff/0123456789abcdef.0123456789abcdef")

/* In-memory state of an inode the kernel holds a reference to. */
typedef struct FsInode {
	uint64_t ino;
	uint64_t nlookup;         /* protected by Fs.table_lock: kernel references (lookup count) */
	uint32_t nopen;           /* protected by Fs.table_lock: open file handles */
	atomic_uint npin;         /* the daemon's own references (sealing, streams, xattr cache); dropped under Fs.table_lock */
	struct FsInode *hash_next; /* protected by Fs.table_lock */

	pthread_mutex_t lock;     /* order: after table_lock */
	/*
	 * The staging descriptor while a handle is open, else -1.  Set and
	 * taken under lock; read without it, under data_lock shared, by every
	 * request on any handle.  A second open sets it (fs_staging_fd) while
	 * another handle's read, write or fsync reads it, both under data_lock
	 * shared, so it is atomic: a reader sees -1 or the whole descriptor,
	 * and the descriptor's open happens before its use.
	 */
	atomic_int fd;
	int xattrs;               /* protected by lock: -1 unknown, 0 none, 1 some (spares a catalog query per write) */
	/*
	 * Whether a write has anything to clear (ops.c write_kill_privs()):
	 * -1 unknown, 0 neither S_ISUID/S_ISGID nor security.capability, 1 some.
	 * Set to 0 only with the catalog's lock held (inside a transaction that
	 * read the inode); set back to -1 after every commit that may add one
	 * (setattr, setxattr), so a 0 is never older than the catalog.
	 */
	atomic_int privs;

	/*
	 * The run of appends a stream may chunk (stream.c): it starts with a
	 * write at offset 0 and lasts while every write starts where the
	 * previous one ended.  Any other write, truncate or fallocate ends it;
	 * a new run gets a new epoch, so a stream can tell its run is over.
	 */
	bool run_ok;              /* protected by lock */
	uint32_t run_epoch;       /* protected by lock */
	uint64_t run_end;         /* protected by lock: bytes [0, run_end) written by the run's appends */
	struct FsStream *stream;  /* protected by Fs.seal_lock: chunking the run, or NULL */
	/*
	 * The stream is attached, caught up, neither queued nor being fed: a
	 * writer that clears this queues it.  Otherwise a worker will look at
	 * the run again anyway, and a writer need not take Fs.seal_lock (which
	 * a seal worker at nice 10 may hold while it waits for a CPU).
	 */
	atomic_bool stream_idle;

	/*
	 * Where the data is.  A raw file with an open handle has fd >= 0; a
	 * sealed one is read through its recipe and turned back into a raw
	 * file (copy-on-write) by the first change.
	 */
	pthread_rwlock_t data_lock;
	bool state_known;         /* protected by data_lock */
	bool sealed;              /* protected by data_lock */
	uint8_t file_class;       /* protected by data_lock, known with state_known (TierFileClass) */
	uint64_t sealed_size;     /* protected by data_lock */
	uint32_t sealed_tier;     /* protected by data_lock: the tier holding a sealed file's chunks */
	/*
	 * The tier holding a raw file's staging file (spill.c), known with
	 * state_known.  Changed only under data_lock held exclusively; atomic
	 * because a stream reads it without the lock (a spill ends its run).
	 */
	atomic_uint staging_tier;
	atomic_uint_fast64_t data_gen;   /* bumped by every change of the bytes, so a seal can tell it raced one */
	atomic_bool written;             /* changed since it was last queued for sealing */
	atomic_bool overwritten;         /* rewritten in place: never sealed (online redo, control files) */
	/*
	 * The order the kernel gives the requests of a handle, said in C11.
	 * The kernel sends no request on a handle before the open's reply, and
	 * no release before the replies of the handle's other requests; but it
	 * says so through /dev/fuse, and since requests are spliced from it
	 * (max_write fits a pipe) no read() of it orders them for the
	 * compiler's model or TSan, which then sees the inode's creation race
	 * its first use, and its last use race the free after release.  So an
	 * open, before its reply, and every request on a handle, after its
	 * last touch of the inode and before its reply, add to this with
	 * release (a read-modify-write, so that each one is in the release
	 * sequence); every request on a handle, release included, loads it
	 * with acquire first (ops.c handle_inode, handle_done).
	 */
	atomic_uint_fast64_t handle_sync;
	atomic_uint_fast64_t written_end; /* highest byte written so far, to spot rewrites */
	struct FsReadWindow *ra_window;  /* protected by FsReadahead.lock: the restore pipeline's (readahead.c) */
} FsInode;

typedef struct FsStream FsStream;

typedef struct FsSealItem {
	uint64_t ino;
	int64_t due_ns;           /* CLOCK_MONOTONIC */
	uint64_t bytes;           /* the file's size when queued: the backlog status shows */
	unsigned failures;        /* seals of it that failed in a row: the next try waits longer (seal.c) */
	bool waits_for_room;      /* put back by fs_data_seal()'s -EAGAIN: the catalog's filesystem is full */
	struct FsSealItem *next;
} FsSealItem;

/*
 * Sealed files' staging files retired and not deleted yet, at most (seal.c,
 * fs_seal_drop_staging()): past it a seal deletes its own, waiting for the
 * discard as before, so the space the reaper has not freed yet stays
 * within that many files'.
 */
#define FS_REAP_QUEUE_MAX 8
/* A sealed file's staging file, retired and not deleted yet (seal.c, fs_seal_drop_staging()). */
typedef struct FsReapItem {
	uint32_t tier;
	char name[FS_STAGING_RETIRED_NAME_MAX];
	struct FsReapItem *next;
} FsReapItem;

/*
 * Where raw bytes can live: TIER/staging on the hot tier and on each
 * directory-backed lower tier that opened (staging.c, spill.c).
 */
typedef struct FsStagingArea {
	int fd;                   /* the staging directory, or -1: nothing raw can live on this tier */
	bool takes_raw;           /* new and spilled raw files may go here (config_tier_spills()) */
	dev_t dev;                /* its filesystem: tiers on one filesystem share its space */
	uint64_t size;            /* of its filesystem, in bytes */
	uint64_t floor;           /* bytes of its filesystem raw data never takes (spill.c) */
	atomic_uint_fast64_t start_need; /* room above the floor a new file needs to start here (spill.c) */
	atomic_int_fast64_t budget; /* bytes raw data may take before its free space is measured again */
	/*
	 * A staging directory whose entries changed since it was last synced;
	 * the fsync of a file in it syncs it first.  Lock order: after all others.
	 */
	pthread_mutex_t dir_lock[FS_STAGING_FANOUT];
	bool dir_dirty[FS_STAGING_FANOUT]; /* protected by dir_lock[] */
} FsStagingArea;

struct Fs {
	Config *config;
	struct fuse_session *se;  /* set once mounted: for notifications to the kernel */
	const char *hot_path;
	int hot_fd;
	int lock_fd;
	Catalog *catalog;

	FsStagingArea staging[CONFIG_TIERS_MAX]; /* by tier number */

	DedupBackend *hot_backend;
	DedupStore *store;        /* the hot tier's chunk store (tier 0's in tiers) */
	DedupKeyRing *keys;       /* the mount's keys (the newest seals), or NULL: no encryption */
	const char *key_file;     /* where it came from (the config's or -o key_file=) */
	TierSet *tiers;           /* every tier's store (tier/tiers.h); NULL until fs_tiers_open() */
	TierMover *mover;         /* moves between them (tier/move.h), with fs/inode-move.c's hooks */
	uint64_t hot_container_size; /* the hot store's container_size; 0: its default */
	unsigned seal_delay_s;    /* quiet time after the last close before a file is sealed */
	unsigned gc_interval_s;
	uint64_t index_recent;    /* ids in the catalog's recent index table before a merge (seal.c) */
	unsigned seal_workers;    /* sealing threads */
	unsigned restore_workers; /* the restore pipeline's threads, 0: none (readahead.c) */
	unsigned encode_workers;  /* the stores' region encoders, 0: none (dedup/store-encode.c) */
	unsigned read_ahead_kb;   /* the kernel's read-ahead window asked for, 0: the kernel's (main.c) */
	bool seal_stream;         /* chunk files written front to back while they are written */
	unsigned stream_max;      /* streams alive at once; other files are sealed whole after close */

	pthread_mutex_t seal_lock; /* order: see the top; a thread holding it takes at most FsInode.lock */
	pthread_cond_t seal_cond; /* work for the seal workers, or stop */
	pthread_cond_t stream_idle_cond; /* a stream's worker put it down */
	pthread_cond_t gc_cond;   /* wakes the collector: to stop, or no stream is left */
	FsSealItem *seal_queue;   /* protected by seal_lock: files waiting to be sealed */
	uint64_t *sealing;        /* protected by seal_lock: per worker, the inode it seals, or 0 */
	FsStream *streams;        /* protected by seal_lock: every stream alive */
	FsStream *stream_queue;   /* protected by seal_lock: streams with work (bytes to chunk, or to be freed) */
	unsigned n_streams;       /* protected by seal_lock: attached to an inode */
	bool seal_stop;           /* protected by seal_lock */
	atomic_bool seal_stopping; /* read without the lock by a seal in progress, to give up */
	atomic_bool gc_waiting;   /* the collector waits for writers to end: start no stream meanwhile */
	/* Since the mount, for status: seals that finished a stream, seals that read the whole file. */
	atomic_uint_fast64_t seals_streamed, seals_whole, seals_split;
	atomic_uint_fast64_t streamed_bytes; /* chunked while written, of the files sealed from a stream */
	bool seal_started;
	struct FsSealWorker *seal_worker; /* the threads started, n_seal_threads of them */
	unsigned n_seal_threads;
	bool gc_thread_started;
	pthread_t gc_thread;
	/* Rekeys (seal.c): run by the collector's thread, asked for by tierctl rekey, kept in the catalog. */
	bool rekey_wake;          /* protected by seal_lock: a rekey was asked for, run one now */
	atomic_uint rekey_tier;   /* the tier being rekeyed, plus one; 0: none */
	atomic_uint_fast64_t rekey_done, rekey_total; /* bytes of the pass running: its containers done, all */
	atomic_uint_fast64_t rekey_rewritten;         /* containers rewritten since the mount */
	/* The thread merging the catalog's digest index (seal.c index_main()), stopped with seal_stop. */
	pthread_cond_t index_cond;
	bool index_wake;          /* protected by seal_lock: a seal ended since the merge thread last looked */
	bool index_thread_started;
	pthread_t index_thread;
	/*
	 * The thread deleting sealed files' retired staging files (seal.c
	 * reap_main()), stopped once the seal workers are: it deletes what is
	 * left first.
	 */
	pthread_cond_t reap_cond;
	FsReapItem *reap_queue, **reap_tail; /* protected by seal_lock */
	unsigned n_reap;          /* protected by seal_lock: retired files queued or being deleted, and places taken */
	bool reap_stop;           /* protected by seal_lock */
	bool reap_thread_started; /* protected by seal_lock */
	pthread_t reap_thread;
	atomic_uint_fast64_t staging_retired; /* names fs_staging_retire() gave out since the mount */
	/* Shared tiers: the thread renewing this host's leases (seal.c lease_main()), stopped with seal_stop. */
	pthread_cond_t lease_cond;
	bool lease_thread_started;
	pthread_t lease_thread;

	unsigned policy_interval_s;
	pthread_mutex_t policy_lock; /* order: taken with no other lock held but the mover's */
	pthread_cond_t policy_cond;
	bool policy_stop;         /* protected by policy_lock */
	bool policy_wake;         /* protected by policy_lock: a close found the hot tier short of space */
	FsPolicyStatus policy_status; /* protected by policy_lock */
	atomic_bool policy_stopping; /* read without the lock by the move in progress, to give up */
	atomic_uint_fast64_t policy_reserve; /* the hot tier's reserve in effect, in bytes */
	atomic_bool policy_draining; /* the hot tier went above its high watermark and is not yet below the low one */
	atomic_bool policy_thread_started; /* read by seal workers and FUSE threads (fs_policy_check_space()) */
	pthread_t policy_thread;

	FsThrottle throttle;      /* background work yields to reads, writes and fsyncs (throttle.c) */
	struct FsReadahead *readahead; /* the restore pipeline (readahead.c) */
	size_t max_read;          /* the largest read request, 0: the kernel's (see fs/main.c) */
	size_t max_write;         /* the largest write request (FS_MAX_WRITE, or what libfuse can splice) */

	const char *mountpoint;

	pthread_mutex_t table_lock;
	FsInode **buckets;        /* protected by table_lock */
	size_t n_buckets;
	size_t n_inodes;          /* protected by table_lock */
};

/* inode.c: the table of inodes the kernel knows about. */
int fs_inode_table_init(Fs *fs);
void fs_inode_table_done(Fs *fs);
/* Takes n kernel references on ino, creating its entry if needed. */
int fs_inode_ref(Fs *fs, uint64_t ino, uint64_t n, FsInode **ret);
/*
 * Pins ino's entry for the daemon's own use (never counted as the kernel's),
 * creating it if create; -ENOENT if there is none and !create.  The entry
 * stays valid until fs_inode_unpin().
 */
int fs_inode_pin(Fs *fs, uint64_t ino, bool create, FsInode **ret);
/* Pins an entry the caller already holds a reference to (open handle or pin). */
void fs_inode_pin_held(FsInode *i);
/* Drops a pin; like the last FORGET, may remove the entry and delete an unlinked inode. */
void fs_inode_unpin(Fs *fs, FsInode *i);
/*
 * Drops n kernel references; when none remain and the inode is not open,
 * removes the entry and, if the catalog says it has no links left, deletes
 * the inode and its staging file.
 */
void fs_inode_forget(Fs *fs, uint64_t ino, uint64_t n);
/*
 * Counts an open handle / releases it (closing the staging fd at the last
 * one).  With take_written, returns whether that was the last handle and
 * the file was written since it was last queued for sealing (and clears
 * that), so that the caller queues it.
 */
void fs_inode_open(Fs *fs, FsInode *i);
bool fs_inode_release(Fs *fs, FsInode *i, bool take_written);
/* Whether i has open handles now. */
bool fs_inode_is_open(Fs *fs, FsInode *i);
/* Deletes an inode with no links unless the kernel still references it. */
int fs_inode_purge_if_unused(Fs *fs, uint64_t ino);

/*
 * staging.c: raw data of regular files, one file per inode in the staging
 * area of one tier (the hot one unless it spilled).  Calls naming a tier
 * without an area return -EIO.
 */
/* The hot tier's area (before the catalog is used); then the lower tiers' (after fs_tiers_open()). */
int fs_staging_init(Fs *fs);
int fs_staging_open_tiers(Fs *fs);
void fs_staging_done(Fs *fs);
bool fs_staging_has_area(const Fs *fs, uint32_t tier);
/* Creates (or empties a leftover of) the staging file of ino on tier; returns an fd. */
int fs_staging_create(Fs *fs, uint32_t tier, uint64_t ino);
/*
 * Returns the inode's staging fd, opening it on its staging_tier (and
 * re-creating it empty if lost) when needed; data_lock held.
 */
int fs_staging_fd(Fs *fs, FsInode *i);
/* A private read-only descriptor (sealing reads with it). */
int fs_staging_open_ro(Fs *fs, uint32_t tier, uint64_t ino);
/*
 * A nameless file (O_TMPFILE) for the recipe of a file being stored
 * (dedup_writer_spool()), in the staging area of plain_tier: the tier
 * whose disk holds the file's bytes in clear already (its staging file's;
 * the hot tier for a move or a recovery), never another, since a recipe
 * holds chunk ids, lengths and the bytes between Oracle blocks, which an
 * encrypted tier keeps out of view (docs/SECURITY.md).  Without a staging
 * area there, on the hot tier.  Or a negative errno.
 */
int fs_staging_spool(Fs *fs, uint32_t plain_tier);
int fs_staging_unlink(Fs *fs, uint32_t tier, uint64_t ino);
/*
 * Renames the staging file of ino on tier to a name of its own in the same
 * directory, "XX/<16 hex digits>.<n>", returned in ret_name, for
 * fs_staging_reap() to delete later: a new staging file of ino (an unseal's)
 * may then be made at once, and is never the one deleted.  The name is no
 * inode's: recovery deletes one a crash left (a stray).  On error the file
 * keeps its name.
 */
int fs_staging_retire(Fs *fs, uint32_t tier, uint64_t ino, char ret_name[static FS_STAGING_RETIRED_NAME_MAX]);
/* Deletes the staging file fs_staging_retire() renamed to name; -ENOENT is success. */
int fs_staging_reap(Fs *fs, uint32_t tier, const char *name);
/* Size and time changes by name, so they need no open descriptor. */
int fs_staging_truncate(Fs *fs, uint32_t tier, uint64_t ino, off_t size);
int fs_staging_set_times(Fs *fs, uint32_t tier, uint64_t ino, const struct timespec times[2]);
/* Makes the staging file's directory entry durable, if it may not be yet. */
int fs_staging_sync_dir(Fs *fs, uint32_t tier, uint64_t ino);
/* Mount-time recovery: drops staging files without an inode (or of another tier) and inodes without links. */
int fs_staging_recover(Fs *fs, uint64_t *ret_orphans, uint64_t *ret_strays);

/*
 * spill.c: which tier new raw bytes land on when the hot one is full, and
 * what the mount can still take (statfs).
 */
/* Measures tier's area for the first time (its floor); after it opened. */
void fs_spill_area_init(Fs *fs, uint32_t tier);
/*
 * Whether len more bytes fit in tier's area above its floor, and counts
 * them against it.  Cheap: measures the filesystem only when the bytes
 * counted since the last look reach half of what it had free.
 */
bool fs_spill_has_room(Fs *fs, uint32_t tier, uint64_t len);
/* The tier a new file starts on: the first with room for it (0, the hot tier, if none has). */
uint32_t fs_spill_pick_new(Fs *fs);
/*
 * The first tier from `first` on (in tier order), but `skip`, with a
 * staging area and room for len bytes, and for raw bytes (a staging file,
 * not a seal's chunks) one that takes them; -ENOSPC when none has.
 */
int fs_spill_pick(Fs *fs, uint32_t first, uint32_t skip, bool raw, uint64_t len, uint32_t *ret);
/*
 * Moves raw file i's staging file to the first other tier with room for
 * its bytes plus need (fs_spill_pick()), crash-safely; takes data_lock
 * exclusively, so call without it.  Returns 0 (moved, or the file is no
 * longer raw: the caller looks again), -ENOSPC when no tier has room, or
 * the error of the copy.
 */
int fs_spill_move(Fs *fs, FsInode *i, uint64_t need);
/* What can still be written through the mount: every staging area's free space above its floor, once per filesystem. */
int fs_spill_statfs(Fs *fs, struct statvfs *ret);


/* data.c: raw <-> sealed. */
/* Takes data_lock shared with the inode's state known. */
int fs_data_lock_read(Fs *fs, FsInode *i);
void fs_data_unlock(FsInode *i);
/*
 * Makes a sealed file raw again (copy-on-write), keeping its bytes, or
 * dropping them when truncate_to_zero.  Takes data_lock exclusively; a no-op
 * for a raw file.
 */
int fs_data_unseal(Fs *fs, FsInode *i, bool truncate_to_zero);
/* A writer into tier's store for a file of class c, with the class's chunker and compression level. */
int fs_data_writer_new(Fs *fs, uint32_t tier, uint32_t staging_tier, TierFileClass c, DedupWriter **ret);
/* The class's split_size: every writer of its files cuts them at each multiple of it; 0 = none. */
uint64_t fs_class_split(Fs *fs, TierFileClass c);
/*
 * Feeds staging bytes [from, to) of fd to w through buf (FS_SEAL_READ_SIZE
 * bytes), stopping early at the end of the file, and cuts the file
 * (dedup_writer_cut()) at every multiple of cut (0: none) it reaches, so
 * that the chunks are the same whichever writers fed which bytes.
 * *ret_fed gets the offset reached, also on error.  -ECANCELED when the
 * daemon is stopping.  Background work: paced by Fs.throttle while the
 * foreground is busy.
 */
int fs_data_feed(Fs *fs, int fd, DedupWriter *w, void *buf, uint64_t from, uint64_t to, uint64_t cut,
		 uint64_t *ret_fed);
/* Releases a sealed file's chunks; called inside the caller's catalog transaction. */
int fs_data_drop(Fs *fs, const CatalogInode *ci);
/*
 * archivelog.c: the header of raw file ino (its staging file), if it is an
 * archived redo log's.  Returns 0, or -ENODATA/-EMEDIUMTYPE/-EBADMSG when it
 * is not one (see ora_archivelog_parse()), or the error of reading it.
 */
int fs_archivelog_header(Fs *fs, uint32_t tier, uint64_t ino, CatalogArchivelog *ret);
/* After a seal or a move changed st_blocks: drops the kernel's cached attributes, so du sees it now. */
void fs_data_attrs_changed(Fs *fs, uint64_t ino);

/*
 * tiers.c: the mount's tiers (tier/tiers.h) as the daemon runs them, with
 * its log lines.
 */
/* Opens every tier but the hot one, and the mover; creates directories when create (embedded default). */
int fs_tiers_open(Fs *fs, const DedupStoreOptions *store_opts, bool create);
/* Describes the lower tiers one last time and closes them. */
void fs_tiers_close(Fs *fs);
/* The open store of tier n, or NULL (no such tier, or not reachable). */
static inline DedupStore *fs_tier_store(const Fs *fs, uint32_t n) {
	return tier_set_store(fs->tiers, n);
}
/* Opens the lower tiers that could not be opened so far; true while some still cannot (collector's thread only). */
bool fs_tiers_retry(Fs *fs);
/* Renews this daemon's leases on its shared tiers (tier_set_renew()), logging a lost name; collector thread. */
void fs_tiers_renew(Fs *fs);
/* tier_set_describe(), with a warning when the tier was too full for it: 0, or the error (logged by the caller). */
int fs_tier_describe(Fs *fs, uint32_t n);

/* inode-move.c: the mover, with the inode table's side of a move as its hooks (tier/move.h). */
int fs_mover_open(Fs *fs);

#define FS_SEAL_READ_SIZE (1u << 20)

/* seal.c: the sealing workers and the collector. */
int fs_sealer_start(Fs *fs);
void fs_sealer_stop(Fs *fs);
/* Queues ino for sealing after the quiet time. */
void fs_seal_schedule(Fs *fs, uint64_t ino, uint64_t bytes);
/* Queues every raw file of a sealed class (work left from before a restart). */
int fs_seal_schedule_pending(Fs *fs);
/*
 * After a seal's switch is durable, data_lock held exclusively: the staging
 * file of ino on tier goes.  Retired (fs_staging_retire()) and deleted by
 * the reaper thread, so that the seal worker does not wait for the
 * deletion; deleted here if it cannot be.
 */
void fs_seal_drop_staging(Fs *fs, uint32_t tier, uint64_t ino);

/* policy.c: the worker that moves files off the hot tier by age and by its use (watermarks, reserve). */
int fs_policy_start(Fs *fs);
/* Stops it, cancelling the move in progress (tier_mover_move() leaves garbage at most). */
void fs_policy_stop(Fs *fs);
/* Wakes the worker early if the hot tier is above its high watermark or below its reserve. */
void fs_policy_check_space(Fs *fs);
/* (Its status and outlook, for control/: fs/daemon.h.) */

/*
 * stream.c: chunking a file while it is written front to back, in the seal
 * workers.  Every function takes Fs.seal_lock itself: call with no lock held.
 */
#define FS_STREAM_MAX_DEFAULT 8u
#define FS_STREAM_MAX_LIMIT 1024u
/* What a change of a file's bytes did to its run of appends (see FsInode). */
typedef enum FsRunChange {
	FS_RUN_NONE,     /* no run before, none now */
	FS_RUN_STARTED,  /* a write at offset 0 started one */
	FS_RUN_APPENDED, /* the run goes on */
	FS_RUN_ENDED,    /* the run is over */
} FsRunChange;

/*
 * After a change of the bytes of i (of class c) through a handle the
 * caller holds: starts a stream for a run that started, wakes a worker
 * for the new bytes of one that goes on, or ends the stream of a run that
 * is over.
 */
void fs_stream_written(Fs *fs, FsInode *i, TierFileClass c, FsRunChange change);
/*
 * If i has a stream now: true, and *ret_chunked gets the bytes it has
 * chunked so far (for the state xattr).
 */
bool fs_stream_progress(Fs *fs, FsInode *i, uint64_t *ret_chunked);
/*
 * Runs one unit of stream work if there is any: chunks up to a few MiB of
 * one stream, or frees a stream that ended.  Called by a seal worker with
 * seal_lock held, which it drops meanwhile; returns whether it did work.
 */
bool fs_stream_work(Fs *fs, void *buf);
/*
 * Detaches i's stream, waiting for a worker using it to put it down, and
 * hands it over; NULL if i has none.  Free it with fs_stream_free().
 */
FsStream *fs_stream_take(Fs *fs, FsInode *i);
/*
 * Whether s still covers exactly what its run wrote: call after reading
 * data_gen, so that a commit finding data_gen unchanged knows the chunked
 * bytes are the file's.  On true, *ret_w and *ret_fd get s's writer and
 * staging descriptor (owned by the caller now), *ret_tier the writer's
 * tier, *ret_fed the bytes fed.
 */
bool fs_stream_take_writer(FsStream *s, DedupWriter **ret_w, uint32_t *ret_tier, int *ret_fd, uint64_t *ret_fed);
/* Frees a detached stream (its writer's frames become garbage); accepts NULL, returns NULL. */
FsStream *fs_stream_free(Fs *fs, FsStream *s);
/*
 * With seal_lock held: ends every stream (their files are sealed whole
 * after close); returns how many.
 */
unsigned fs_stream_end_all(Fs *fs);
/* At unmount, with the workers stopped: frees every stream. */
void fs_stream_free_all(Fs *fs);


/* ops.c */
struct fuse_lowlevel_ops;
extern const struct fuse_lowlevel_ops fs_ops;
