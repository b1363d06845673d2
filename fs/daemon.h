/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * fs/'s face toward the rest of the daemon: what control/ (tierctl's
 * server) and fs/main.c may ask of the mounted filesystem.  Everything else
 * of fs/ is private (fs/fs-internal.h).  control/ sits above fs/: it may use
 * this header, tier/, dedup/'s store, catalog/ and common/; fs/ never
 * includes control/.
 *
 * Every function may be called from any thread once the mount is up
 * (fs/main.c starts control/ after the tiers, the sealer and the policy
 * worker, and stops it before them).  Borrowed pointers are valid until
 * the daemon stops.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "catalog/catalog.h"
#include "common/config.h"
#include "dedup/store.h"
#include "fs/throttle.h"
#include "tier/move.h"
#include "tier/planner.h"
#include "tier/tiers.h"

typedef struct Fs Fs;

/* The daemon's config, its catalog connection, its tiers and their mover; borrowed. */
const Config *fs_config(const Fs *fs);
Catalog *fs_catalog(const Fs *fs);
TierSet *fs_tiers(const Fs *fs);
TierMover *fs_mover(const Fs *fs);
/* Background work's governor (throttle.h): its share and counters, for status. */
FsThrottle *fs_throttle(Fs *fs);
/* Whether tier n seals what it stores (encrypt), and whether raw files may go there (the hot tier, or spill). */
bool fs_tier_encrypts(const Fs *fs, uint32_t n);
bool fs_tier_takes_raw(const Fs *fs, uint32_t n);
/*
 * Whether the catalog's filesystem (the hot tier's) has room for the rows
 * a seal or a move of size bytes of class c adds, and once it filled, as
 * much again for the archiver's own commits (spill.c): a seal or move
 * that cannot finish would take that room, fail, and leave the catalog
 * none to commit with.
 */
bool fs_catalog_has_room(Fs *fs, uint64_t size, TierFileClass c);
/* Whether a move of size bytes of class c that failed with -ENOSPC failed for the catalog's room (the reason to give). */
bool fs_catalog_short(Fs *fs, uint64_t size, TierFileClass c);

/* The mount's settings, as the command line and config made them. */
typedef struct FsSettings {
	const char *mountpoint;   /* borrowed */
	unsigned seal_delay_s;    /* quiet time after the last close before a file is sealed */
	unsigned gc_interval_s;   /* between the collector's runs */
	unsigned policy_interval_s; /* between the policy worker's passes */
} FsSettings;
void fs_settings_get(const Fs *fs, FsSettings *ret);

/* The sealer now and since the mount (seal.c), for status. */
typedef struct FsSealStatus {
	uint64_t queue;           /* files waiting to be sealed */
	uint64_t queue_due;       /* of which past their quiet time */
	uint64_t queue_bytes;     /* their bytes (each file's size when it was queued) */
	uint64_t behind_s;        /* how long the oldest file past its quiet time has waited since: how far sealing is behind */
	uint64_t queue_room;      /* of which put back until the catalog's filesystem has room (fs_data_seal()) */
	uint64_t streams;         /* files being chunked while written */
	uint64_t seals_streamed;  /* seals that finished a stream */
	uint64_t seals_whole;     /* seals that read the whole file */
	uint64_t seals_split;     /* of either, seals whose rest two writers chunked at once */
	uint64_t streamed_bytes;  /* chunked while written, of the files sealed from a stream */
} FsSealStatus;
void fs_seal_status_get(Fs *fs, FsSealStatus *ret);

/*
 * tierctl rekey --tier N: asks for tier n's data sealed under older keys to
 * be sealed again under the newest (dedup_store_rekey()), in the background
 * by the collector's thread, paced by the throttle as its compaction is.
 * The request is kept in the catalog until the rekey finishes: a restart
 * resumes it.  Returns: 0, -ENOENT (no such tier), -ENXIO (not reachable
 * now), -ENOKEY (the mount has no key), or a catalog error.
 */
int fs_rekey_request(Fs *fs, uint32_t n);
typedef struct FsRekeyStatus {
	bool running;             /* a pass runs now, on tier */
	uint32_t tier;
	uint64_t done, total;     /* its bytes of containers done, of all it found under older keys */
	uint64_t rewritten;       /* containers rewritten since the mount */
} FsRekeyStatus;
void fs_rekey_status_get(Fs *fs, FsRekeyStatus *ret);

/* Reads of sealed files since the mount (the restore pipeline, readahead.c), for status. */
typedef struct FsRestoreStatus {
	uint64_t reads;           /* read requests of sealed files */
	uint64_t bytes;           /* bytes they returned */
	uint64_t busy_ns;         /* time with at least one such read in progress: bytes / busy_ns is the restore rate */
	uint64_t hits;            /* requests served from blocks decompressed ahead */
	uint64_t waits;           /* requests that waited for a block being decompressed (or decompressed it) */
	uint64_t misses;          /* requests read directly (random, or past the window) */
	uint64_t blocks;          /* blocks the workers decompressed ahead */
	uint64_t unused;          /* of which dropped without being read */
} FsRestoreStatus;
void fs_restore_status_get(Fs *fs, FsRestoreStatus *ret);

/* What the policy worker is doing, for status (policy.c). */
typedef struct FsPolicyStatus {
	bool running;             /* the worker runs (not -o policy=0) */
	uint64_t moving_ino;      /* the file it is moving, 0 when idle */
	const char *reason;       /* why: "age" or "space" (static), NULL when idle */
	int64_t last_run;         /* Unix seconds of the end of the last pass, 0 before the first */
	int64_t next_run;         /* Unix seconds of the next pass at the latest */
	uint64_t files_moved;     /* since the mount */
	uint64_t bytes_moved;     /* logical bytes of those files */
	uint64_t failed;          /* moves that failed (refusals of changed files not counted) */
} FsPolicyStatus;
void fs_policy_status_get(Fs *fs, FsPolicyStatus *ret);
/* The hot tier's reserve in bytes, as the last pass computed it. */
uint64_t fs_policy_reserve(Fs *fs);

/* What the policy will move off the hot tier next and when (fs_policy_outlook()). */
typedef struct FsPolicyOutlook {
	bool enabled;             /* the worker runs (not -o policy=0) */
	int64_t next_run;         /* Unix seconds of its next pass at the latest */
	TierOutlook plan;         /* the planner's plan, summed per class */
} FsPolicyOutlook;

/*
 * What the policy will move off the hot tier next and when, from the catalog
 * as it is now (reader: a read-only connection): the planner's plan, with raw
 * files planned as the sealed files they will be (tier_plan_outlook()).
 */
int fs_policy_outlook(Fs *fs, Catalog *reader, FsPolicyOutlook *ret);

/*
 * The staging file of raw file ino on tier (staging.c): -ENOENT when there
 * is none (lost before its first fsync, or sealed or spilled meanwhile).
 */
int fs_staging_stat(Fs *fs, uint32_t tier, uint64_t ino, struct stat *ret);
/*
 * Seals one raw file now if it is still raw, unchanged, and of a sealed
 * class (data.c), without waiting for its quiet time.  -EAGAIN: not now, a
 * file on another filesystem than the catalog's while that one is full.
 */
int fs_data_seal(Fs *fs, uint64_t ino);
/* The chunker a class is cut with: the sealer's own (data.c). */
DedupChunkerParams fs_class_chunker(const ConfigClassPolicy *p);

/*
 * Collects garbage on every open tier (dedup_store_gc()), each lower one
 * right after its description (tiers.c); *ret sums them; returns the first
 * error, and the tier it came from in *ret_failed (if not NULL), so the
 * operator is told which tier to look at.
 */
int fs_tiers_gc(Fs *fs, const DedupGcOptions *o, DedupGcStats *ret, uint32_t *ret_failed);
/* Rewrites every open lower tier's description if it changed; returns the first error (and logs each). */
int fs_tiers_describe(Fs *fs);
