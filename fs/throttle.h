/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once
/* fs/'s: control/ reads its share and counters for status (fs/daemon.h); nothing else outside fs/ */

/*
 * throttle.c — background work (sealing and streams, migrations, the
 * collector's compaction) yields to foreground I/O: while FUSE reads,
 * writes or fsyncs came in recently, the background as a whole gets at
 * most `background_share` percent of the time; when the foreground is
 * idle it runs unthrottled.  Seals are charged what they take from the
 * foreground: beside one writing into the page cache, their time on a CPU
 * (their encoders' included); beside one waiting on the disk (fsyncs,
 * reads, slow writes), only their time blocked, so they fill its waits.
 * See throttle.c for the governor, why it needs no bandwidth estimate, and
 * why seals are charged so.
 */

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* The foreground counts as busy this long after its last read, write or fsync. */
#define FS_THROTTLE_IDLE_NS (INT64_C(200) * 1000000)
/*
 * And as waiting on the disk this long after its last read or slow write,
 * or the start of its last fsync (and while one is under way): enough to
 * bridge back-to-back reads, or a writer's fsyncs one after the other.
 * Not after an fsync's end: a writer then writes its next file into the
 * page cache at once, on the CPU, and seals let go by the disk window ran
 * beside it (bench/README.md, "Sealing, ninth pass", "Sealing, tenth
 * pass").
 */
#define FS_THROTTLE_DISK_NS (INT64_C(50) * 1000000)
/*
 * And, off the disk, as taking the CPU (writing into the page cache) this
 * long after its last request: a writer at full speed sends one every
 * millisecond or so.  Between its files, and after its last, a seal takes
 * nothing from it though it still counts as busy (bench/README.md,
 * "Sealing, tenth pass").
 */
#define FS_THROTTLE_CPU_NS (INT64_C(50) * 1000000)
/*
 * The most one unit of background work is made to wait, and the most
 * delay the background as a whole may owe: bounds how stale a wait gets
 * and how long a stop or a caller waiting for that work can be held.
 */
#define FS_THROTTLE_DELAY_MAX_NS (INT64_C(2) * 1000000000)
/*
 * A write that took this long waited for something other than the CPU:
 * the kernel's dirty-page throttling (the disk), a lock or a spill.  One
 * of at most 1 MiB copied into the page cache takes well under 1 ms.
 */
#define FS_THROTTLE_SLOW_WRITE_NS (INT64_C(10) * 1000000)

typedef enum FsThrottleKind {
	FS_THROTTLE_SEAL,    /* seals and streams (fs_data_feed()): charged their CPU time, or while the foreground waits on the disk their time blocked */
	FS_THROTTLE_MIGRATE, /* moves between tiers, the policy's and tierctl's */
	FS_THROTTLE_GC,      /* the collector thread's runs */
	FS_THROTTLE_REKEY,   /* rekeys, run on the collector's thread */
	FS_THROTTLE_INDEX,   /* the batches of a merge of the catalog's digest index, on a thread of their own */
	_FS_THROTTLE_KIND_MAX,
} FsThrottleKind;

/* What a busy foreground waits for, as far as a seal is concerned (fs_throttle_charge_ns()). */
typedef enum FsThrottleForeground {
	FS_THROTTLE_FG_QUIET, /* no request in the last FS_THROTTLE_CPU_NS, none waiting on the disk */
	FS_THROTTLE_FG_CPU,   /* requests, none waiting on the disk: writes into the page cache */
	FS_THROTTLE_FG_DISK,  /* waiting on the disk now or in the last FS_THROTTLE_DISK_NS */
} FsThrottleForeground;

/* Per kind, since the mount. */
typedef struct FsThrottleCounters {
	atomic_uint_fast64_t busy_units; /* units of work done while the foreground was busy */
	atomic_uint_fast64_t busy_cpu;   /* of those, units during which it did not wait on the disk (a seal's: charged its CPU time) */
	atomic_uint_fast64_t idle_units; /* units done while it was idle: never made to wait */
	atomic_uint_fast64_t waits;      /* units after which the worker waited */
	atomic_uint_fast64_t wait_ns;    /* time spent in those waits */
} FsThrottleCounters;

typedef struct FsThrottle {
	/*
	 * CLOCK_MONOTONIC_COARSE of the last foreground request, 0 = none yet.
	 * Written by every FUSE thread: a line of its own, so the stores do not
	 * bounce the lock's line.
	 */
	alignas(64) atomic_int_fast64_t foreground_ns;
	/*
	 * CLOCK_MONOTONIC_COARSE of the last foreground request that waited on
	 * the disk (a read, the start of an fsync, a slow write), 0 = none yet,
	 * and the fsyncs under way.  Written less often than foreground_ns, by
	 * the same threads: a line of their own too.
	 */
	alignas(64) atomic_int_fast64_t disk_ns;
	atomic_int disk_waiting;
	alignas(64) unsigned share;  /* percent, 1..100; set before any worker starts */
	bool initialized;
	pthread_mutex_t lock;        /* a leaf: nothing else is taken while it is held */
	pthread_cond_t cond;         /* stop */
	int64_t resume_ns;           /* protected by lock: the background waits until then (CLOCK_MONOTONIC) */
	bool stopping;               /* protected by lock */
	FsThrottleCounters counters[_FS_THROTTLE_KIND_MAX];
} FsThrottle;

/* A thread's time since it started (fs_throttle_thread_times()); -1: unknown. */
typedef struct FsThrottleThreadTimes {
	int64_t cpu_ns;      /* on a CPU */
	int64_t runnable_ns; /* runnable, on a run queue */
} FsThrottleThreadTimes;

/* A worker's current unit of work: from the last pace (or begin) to the next. */
typedef struct FsThrottleUnit {
	int64_t start_ns;            /* CLOCK_MONOTONIC */
	FsThrottleThreadTimes start; /* the thread's, then */
	/*
	 * Set by a seal before each pace, for the CPU work other threads did
	 * for it (the store's encoders), see throttle.c: the time its thread
	 * slept meanwhile, and their time on a CPU.
	 */
	int64_t helped_ns;
	int64_t helped_cpu_ns;
} FsThrottleUnit;

/* What a unit of work took, for fs_throttle_charge_ns(): its wall time, and of FsThrottleUnit's the rest. */
typedef struct FsThrottleUsage {
	int64_t wall_ns;
	FsThrottleThreadTimes thread; /* the thread's times during the unit */
	int64_t helped_ns;
	int64_t helped_cpu_ns;
} FsThrottleUsage;

static inline int64_t fs_throttle_coarse_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * The hot path: a read, write or fsync notes that the foreground is busy.
 * One vDSO clock read and, at most once per clock tick (a few ms), one
 * relaxed store; no lock.  Returns the time read, for
 * fs_throttle_foreground_wrote().
 */
static inline int64_t fs_throttle_foreground(FsThrottle *t) {
	int64_t now = fs_throttle_coarse_ns();
	if (atomic_load_explicit(&t->foreground_ns, memory_order_relaxed) != now)
		atomic_store_explicit(&t->foreground_ns, now, memory_order_relaxed);
	return now;
}

static inline void fs_throttle_disk_note(FsThrottle *t, int64_t now) {
	if (atomic_load_explicit(&t->disk_ns, memory_order_relaxed) != now)
		atomic_store_explicit(&t->disk_ns, now, memory_order_relaxed);
}

/*
 * A read: as fs_throttle_foreground(), and it counts as a wait on the disk
 * (a sealed file's read goes to its containers, a raw one's may miss the
 * page cache), so seals are paced for FS_THROTTLE_DISK_NS after it.
 */
static inline void fs_throttle_foreground_read(FsThrottle *t) {
	fs_throttle_disk_note(t, fs_throttle_foreground(t));
}

/*
 * An fsync (a wait on the disk as long as it takes) begins and ends: while
 * any is under way the foreground is on the disk, and no longer once it
 * ended (FS_THROTTLE_DISK_NS).  An atomic add each, and the stores of
 * fs_throttle_foreground().
 */
static inline void fs_throttle_disk_begin(FsThrottle *t) {
	atomic_fetch_add_explicit(&t->disk_waiting, 1, memory_order_relaxed);
	fs_throttle_disk_note(t, fs_throttle_foreground(t));
}

static inline void fs_throttle_disk_end(FsThrottle *t) {
	fs_throttle_foreground(t);
	atomic_fetch_sub_explicit(&t->disk_waiting, 1, memory_order_relaxed);
}

/*
 * A write that began at start_ns (fs_throttle_foreground()'s time) is done:
 * if it took FS_THROTTLE_SLOW_WRITE_NS or more, the foreground waited on
 * the disk (or a lock), as for an fsync.  One more clock read a write.
 */
static inline void fs_throttle_foreground_wrote(FsThrottle *t, int64_t start_ns) {
	int64_t now = fs_throttle_coarse_ns();
	if (now - start_ns >= FS_THROTTLE_SLOW_WRITE_NS)
		fs_throttle_disk_note(t, now);
}

/*
 * The governor, a pure function: how long to wait after background work
 * that took work_ns while the foreground was busy, so that the background
 * is busy share percent of the time: work_ns * (100 - share) / share,
 * capped at FS_THROTTLE_DELAY_MAX_NS; 0 for share >= 100 or no work.
 */
int64_t fs_throttle_delay_ns(int64_t work_ns, unsigned share);
/*
 * What a unit of kind k is charged, a pure function of what it took and of
 * the foreground fg during it.  A seal: beside FS_THROTTLE_FG_CPU its
 * thread's time on a CPU and its encoders' (helped_cpu_ns), the whole wall
 * time if the thread's is unknown; beside FS_THROTTLE_FG_DISK only the
 * part of the wall time its thread spent neither on a CPU nor runnable
 * (unknown: none of it) nor asleep while the encoders did its CPU work
 * (helped_ns); beside FS_THROTTLE_FG_QUIET nothing.  The other kinds: all
 * of the wall time.  Never negative for wall_ns >= 0.
 */
int64_t fs_throttle_charge_ns(FsThrottleKind k, const FsThrottleUsage *use, FsThrottleForeground fg);

/* share: percent, 1..100 (100 = never wait). */
void fs_throttle_init(FsThrottle *t, unsigned share);
/* Ends every wait now and makes later ones return at once (unmount). */
void fs_throttle_stop(FsThrottle *t);
/* After the workers are gone; safe on a throttle never initialized. */
void fs_throttle_done(FsThrottle *t);
/* Whether a foreground request came in the last FS_THROTTLE_IDLE_NS. */
bool fs_throttle_foreground_is_busy(FsThrottle *t);
/* Whether one waits on the disk now or did in the last FS_THROTTLE_DISK_NS. */
bool fs_throttle_foreground_is_on_disk(FsThrottle *t);
/* What it waits for now (only meaningful while busy). */
FsThrottleForeground fs_throttle_foreground_now(FsThrottle *t);

/*
 * The calling thread's time on a CPU since it started, exact to the call
 * (see throttle.c), and runnable; each -1 if the kernel does not say.
 */
void fs_throttle_thread_times(FsThrottleThreadTimes *ret);

/* Starts a unit of work (also after a wait the worker did for other reasons). */
void fs_throttle_begin(FsThrottleUnit *u);
/*
 * Ends the unit u of kind k and starts the next: if the foreground was
 * busy during it (or just before), waits as fs_throttle_delay_ns() says
 * of the unit's time (a seal's: as fs_throttle_charge_ns() says), on one
 * timeline shared by all workers, and stops waiting early if the
 * foreground goes idle or the throttle is stopped (a seal's also once the
 * foreground no longer waits for what it did during the unit,
 * fs_throttle_foreground_now()).  Call with no lock held that a FUSE
 * request may need (see throttle.c).
 */
void fs_throttle_pace(FsThrottle *t, FsThrottleKind k, FsThrottleUnit *u);

const char *fs_throttle_kind_to_string(FsThrottleKind k);
