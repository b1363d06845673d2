/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * How far can a database be recovered from the archived logs we hold
 * (recovery.c)?  A pure function of the logs' recorded headers (their
 * names play no part): per database incarnation (DBID and resetlogs id)
 * and redo thread, the runs of consecutive sequences, the gaps between
 * them with the SCN and time hole each leaves, the sequences held twice;
 * per incarnation, the SCN windows a roll-forward crosses without a gap on
 * any thread (RAC: the intersection over threads).  And the restore set of
 * a range: the logs a roll-forward from one SCN or time to another needs,
 * in restore order, and what of it is missing.
 *
 * A log covers [low_scn, next_scn): next_scn is the first change of the
 * next log of its thread, so consecutive logs of a thread meet exactly.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog/catalog.h"

/* One archived log: its header and where it is. */
typedef struct TierRecoveryLog {
	uint64_t ino;
	uint32_t tier;
	uint64_t size;
	CatalogArchivelog header;
} TierRecoveryLog;

typedef enum TierRecoveryKind {
	TIER_RECOVERY_RUN,        /* consecutive sequences of a thread, all present */
	TIER_RECOVERY_GAP,        /* missing sequences of a thread, between two runs */
	TIER_RECOVERY_DUPLICATE,  /* a sequence held twice: this copy is not the one a restore uses */
	TIER_RECOVERY_WINDOW,     /* an SCN range every thread covers without a gap (thread 0) */
	_TIER_RECOVERY_KIND_MAX,
} TierRecoveryKind;

/*
 * One finding.  SCN and time: a run's or window's [low, next); a gap's
 * hole, from the end of the log before it to the start of the log after
 * it.  Sequences: first..last present (run), missing (gap), or the one
 * held twice (duplicate, first == last).
 */
typedef struct TierRecoverySpan {
	TierRecoveryKind kind;
	uint32_t dbid;
	uint32_t resetlogs_id;
	uint16_t thread;
	uint32_t first_sequence, last_sequence;
	uint64_t low_scn, next_scn;
	int64_t low_time, next_time;
	uint64_t files, bytes;    /* run, window: the logs in it */
	uint32_t tiers;           /* run, window: bit n set when a log of it is on tier n */
	uint64_t ino;             /* duplicate: the copy set aside ... */
	uint64_t used_ino;        /* ... and the one a restore uses */
	bool same_header;         /* duplicate: both copies' headers and sizes agree (a second copy of one log) */
} TierRecoverySpan;

/* One database incarnation, and the range of all its logs. */
typedef struct TierRecoveryDb {
	uint32_t dbid;
	char db_name[9];
	uint32_t resetlogs_id;
	uint32_t threads;         /* how many redo threads have logs */
	uint64_t files, bytes;
	uint64_t low_scn, next_scn;
	int64_t low_time, next_time;
	uint64_t gaps, missing;   /* gap spans, and sequences missing in them */
	uint64_t duplicates;
	size_t first_span, n_spans; /* its spans in TierRecovery.spans: runs and gaps per thread, duplicates, windows */
} TierRecoveryDb;

typedef struct TierRecovery {
	TierRecoveryDb *dbs;      /* by DBID, then resetlogs id; owned */
	size_t n_dbs;
	TierRecoverySpan *spans;  /* owned */
	size_t n_spans;
} TierRecovery;

/*
 * Analyses logs[0..n) (any order; the array is sorted in place).  Of two
 * logs with one sequence, a restore uses the one that reaches furthest
 * (next_scn), then the one on the faster tier, then the lower inode.
 * Returns 0 or -ENOMEM (*ret untouched).  Free with tier_recovery_done().
 */
int tier_recovery_analyze(TierRecoveryLog *logs, size_t n, TierRecovery *ret);
void tier_recovery_done(TierRecovery *r);

/* A bound of a restore range: an SCN or a Unix time. */
typedef struct TierRecoveryPoint {
	bool is_scn;
	uint64_t scn;
	int64_t time;
} TierRecoveryPoint;

/* What a roll-forward of one incarnation from `from` to `until` needs. */
typedef struct TierRestoreSet {
	uint32_t *logs;           /* indexes into the logs array, in restore order (lowest SCN first); owned */
	size_t n_logs;
	TierRecoverySpan *missing; /* gaps inside the range, and ends it does not reach (GAP spans); owned */
	size_t n_missing;
	uint64_t bytes;
	uint64_t low_scn, next_scn; /* what the set covers */
	int64_t low_time, next_time;
} TierRestoreSet;

/*
 * The restore set of incarnation (dbid, resetlogs_id) for a roll-forward
 * from `from` (NULL: as far back as every thread's logs reach without a
 * gap before `until`) to `until`: on every thread, the logs whose ranges
 * meet [from, until], the one holding `until` included.  A thread whose
 * logs stop short of `until` or start after `from`, and every gap inside,
 * is a missing span (first/last sequence 0 where the sequence is not
 * known: before the first log or after the last).  logs must be the array
 * tier_recovery_analyze() sorted; duplicates set aside are skipped.
 * Returns 0, -ENOENT (no log of that incarnation), -ENOMEM.
 */
int tier_recovery_restore_set(const TierRecoveryLog *logs, size_t n, uint32_t dbid, uint32_t resetlogs_id,
			      const TierRecoveryPoint *from, const TierRecoveryPoint *until, TierRestoreSet *ret);
void tier_restore_set_done(TierRestoreSet *s);
