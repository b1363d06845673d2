/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * throttle.c — background work yields to foreground I/O.
 *
 * The governor is a duty cycle on time, not a bandwidth cap: after a unit
 * of background work that took t while the foreground was busy, the
 * background waits t * (1 - s) / s, so it runs at most a share s of the
 * wall time.  Why time and not bytes per second:
 *  - it needs no estimate of what the hardware can do.  Background work
 *    competes for different things (the hot disk for seals, a capacity
 *    disk or an NFS filer for moves, CPU for chunking and compression),
 *    whose capacity nobody configured and which change with the load; a
 *    byte rate would be wrong for all but one of them.  The time a unit
 *    takes already says how contended its resource is: a slow disk makes
 *    the unit longer and the wait longer with it.
 *  - it is the rule the reference store states (resync capped at
 *    20% under contention, everything when idle), and what an operator can
 *    reason about: at share 20 the foreground has the resources to itself
 *    at least 80% of the time.
 * The price: a unit's time includes the CPU and disk waits caused by the
 * foreground itself, so under heavy load the background gets less than s
 * of its unloaded throughput.  That errs on the foreground's side.
 *
 * Seals are charged what they take from the foreground, which depends on
 * what the foreground waits for (FsThrottleForeground):
 *  - while it writes into the page cache (requests in the last
 *    FS_THROTTLE_CPU_NS, none waiting on the disk), its CPU.
 *    A seal is charged its thread's time on a CPU and its encoders' (the
 *    seal's own compression, moved to other threads; charging the thread
 *    alone would let a seal dodge the rule by handing work over), not its
 *    time runnable (it waited for the CPU the foreground had) nor blocked.
 *    Nice 10 alone does not protect such a writer on two cores: its own
 *    process and the daemon's FUSE thread hand each write over between
 *    them, each hand-over waits behind a seal that has the core for its
 *    slice, and the archiver's series of fsynced files ran 12% slower
 *    beside seals charged nothing for their CPU (bench/README.md,
 *    "Sealing, ninth pass").  Until then they had been charged about a
 *    tick of CPU a unit by accident (a stale clock), which held them back
 *    beside a writer; this is that made a rule: with it the series runs
 *    at 0.95 of the passthrough (0.93 before the ninth pass) and the
 *    ingest bench takes 2.29x a plain copy (2.48x before, 2.15-2.25x with
 *    seals charged nothing for their CPU; "Sealing, tenth pass").
 *  - while it waits on the disk (an fsync under way or begun in the last
 *    FS_THROTTLE_DISK_NS, a read in that time, a write that took
 *    FS_THROTTLE_SLOW_WRITE_NS because the kernel held it back for dirty
 *    pages, or a lock did; not once an fsync ended: the writer then
 *    writes its next file at once), the cores are free and the disk is what it
 *    needs: a seal is charged only its time blocked (reading a staging
 *    file the page cache no longer holds, a lock, the disk, a batch's
 *    registration), not its time on a CPU or runnable, nor its sleep while
 *    the encoders compressed its regions.  So the seals fill a copy's
 *    fsync waits with their CPU work, which is most of a seal; charging
 *    that too left a long copy's sealing for after its end (bench/README.md,
 *    "Sealing beside the writer", "Sealing, sixth pass").
 *  - while it is busy but sent nothing for FS_THROTTLE_CPU_NS (between
 *    files, after its last fsync), nothing: a seal takes nothing from it.
 * These are what the hot path can tell at the cost of a clock read; a
 * write slowed by the CPU (a loaded machine) counts as slow.  A seal's
 * wait ends early once the foreground no longer waits for what the seal
 * was charged for (the disk after a charge for its CPU, say).  Moves and the
 * collector keep the whole unit: their resource is mostly a disk or a
 * filer, which nothing else arbitrates.
 *
 * Invariants:
 *  1. FUSE requests never wait here: they only store a timestamp
 *     (fs_throttle_foreground(), lock-free).
 *  2. The workers wait only in fs_throttle_pace(), and its callers hold
 *     no lock a FUSE request takes (no data_lock, seal_lock, inode or
 *     table lock, no catalog transaction, no writer exclusion of a
 *     store): seals wait between reads of the staging file, streams with
 *     their stream busy (only a seal, never a FUSE thread, waits for
 *     that), moves between steps of the copy (under the mover's lock,
 *     which only other moves take), the collector between compacted
 *     containers (under its store's gc_lock, which only a scrub takes).
 *     Work a FUSE request waits for (copy-on-write of a sealed file back
 *     to raw, reads from any tier) never goes through here.
 *  3. All workers share one timeline (resume_ns): the delays of parallel
 *     units add up, so two seal workers and a move get s together, not s
 *     each.  No wait is longer than FS_THROTTLE_DELAY_MAX_NS, nor is the
 *     timeline ever further ahead than that.
 *  4. A wait ends as soon as the foreground has been idle for
 *     FS_THROTTLE_IDLE_NS (the debt is then forgiven: idle time is the
 *     background's) or the throttle is stopped; after fs_throttle_stop()
 *     nothing waits, so unmount is never held up.  A seal's wait also ends
 *     once the foreground no longer waits for what it was charged for
 *     (above); the debt stays, for the other kinds to pay.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/macros.h"
#include "fs/throttle.h"

/* How often a wait looks whether the foreground went idle, or (a seal's) changed what it waits for. */
#define THROTTLE_POLL_NS (FS_THROTTLE_DISK_NS / 2)

int64_t fs_throttle_delay_ns(int64_t work_ns, unsigned share) {
	if (work_ns <= 0 || share == 0 || share >= 100)
		return 0;
	/* In double: work_ns * 99 would overflow int64 only for centuries, but the cap makes it moot anyway. */
	double delay = (double) work_ns * (double) (100 - share) / (double) share;
	return delay >= (double) FS_THROTTLE_DELAY_MAX_NS ? FS_THROTTLE_DELAY_MAX_NS : (int64_t) delay;
}

void fs_throttle_init(FsThrottle *t, unsigned share) {
	pthread_condattr_t attr;

	t->share = share;
	pthread_mutex_init(&t->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cond, &attr);
	pthread_condattr_destroy(&attr);
	t->initialized = true;
}

void fs_throttle_stop(FsThrottle *t) {
	if (!t->initialized)
		return;
	pthread_mutex_lock(&t->lock);
	t->stopping = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

void fs_throttle_done(FsThrottle *t) {
	if (!t->initialized)
		return;
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	t->initialized = false;
}

/*
 * Whether a foreground request came at or after since_ns.  The stamps are
 * CLOCK_MONOTONIC_COARSE, compared with CLOCK_MONOTONIC times: the two
 * differ by at most a clock tick, nothing against FS_THROTTLE_IDLE_NS.
 */
static bool stamp_since(const atomic_int_fast64_t *stamp, int64_t since_ns) {
	int64_t last = atomic_load_explicit(stamp, memory_order_relaxed);
	return last > 0 && last >= since_ns;
}

/* An fsync under way is foreground I/O however long it has been since it came in. */
static bool foreground_since(FsThrottle *t, int64_t since_ns) {
	return atomic_load_explicit(&t->disk_waiting, memory_order_relaxed) > 0 ||
	       stamp_since(&t->foreground_ns, since_ns);
}

static bool disk_since(FsThrottle *t, int64_t since_ns) {
	return atomic_load_explicit(&t->disk_waiting, memory_order_relaxed) > 0 || stamp_since(&t->disk_ns, since_ns);
}

bool fs_throttle_foreground_is_busy(FsThrottle *t) {
	return foreground_since(t, fs_throttle_coarse_ns() - FS_THROTTLE_IDLE_NS);
}

bool fs_throttle_foreground_is_on_disk(FsThrottle *t) {
	return disk_since(t, fs_throttle_coarse_ns() - FS_THROTTLE_DISK_NS);
}

/* What the foreground waited for from since_ns on (less the windows). */
static FsThrottleForeground foreground_at(FsThrottle *t, int64_t since_ns) {
	if (disk_since(t, since_ns - FS_THROTTLE_DISK_NS))
		return FS_THROTTLE_FG_DISK;
	return stamp_since(&t->foreground_ns, since_ns - FS_THROTTLE_CPU_NS) ? FS_THROTTLE_FG_CPU : FS_THROTTLE_FG_QUIET;
}

FsThrottleForeground fs_throttle_foreground_now(FsThrottle *t) {
	return foreground_at(t, fs_throttle_coarse_ns());
}

/*
 * The calling thread's time on a CPU, and its time runnable on a run queue.
 * The time on a CPU comes from CLOCK_THREAD_CPUTIME_ID, which brings the
 * running thread's count up to date: the first field of
 * /proc/thread-self/schedstat is only as recent as the thread's last
 * scheduler tick (4 ms at HZ=250), so a unit of pure CPU a few ms long read
 * there was charged 0.75-1 ms on average (bench/README.md, "Sealing, ninth
 * pass").  The time runnable (the second field) is complete whenever the
 * thread runs, as it does here.  Four syscalls a unit of 1 MiB or more:
 * nothing next to the unit.
 */
void fs_throttle_thread_times(FsThrottleThreadTimes *ret) {
	char buf[96];
	struct timespec cpu;
	uint64_t run, runnable;

	ret->cpu_ns = clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0 ? (int64_t) cpu.tv_sec * 1000000000 + cpu.tv_nsec : -1;
	ret->runnable_ns = -1;
	int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	(void) close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	if (sscanf(buf, "%" SCNu64 " %" SCNu64, &run, &runnable) == 2 && runnable <= INT64_MAX / 2)
		ret->runnable_ns = (int64_t) runnable;
}

/*
 * The thread's times are read before the unit's start, and after its end
 * (fs_throttle_pace()): they then span the wall time, so a unit its thread
 * spent all on a CPU or runnable is blocked for none of it, not for the few
 * microseconds between two clock reads.
 */
static void unit_start(FsThrottleUnit *u) {
	fs_throttle_thread_times(&u->start);
	u->start_ns = clock_ns(CLOCK_MONOTONIC);
	u->helped_ns = 0;
	u->helped_cpu_ns = 0;
}

void fs_throttle_begin(FsThrottleUnit *u) {
	unit_start(u);
}

static int64_t since(int64_t start, int64_t end) {
	return start >= 0 && end >= 0 ? end - start : -1;
}

int64_t fs_throttle_charge_ns(FsThrottleKind k, const FsThrottleUsage *use, FsThrottleForeground fg) {
	if (k != FS_THROTTLE_SEAL)
		return use->wall_ns;
	if (fg == FS_THROTTLE_FG_QUIET)
		return 0;
	if (fg == FS_THROTTLE_FG_CPU)
		return (use->thread.cpu_ns >= 0 ? use->thread.cpu_ns : use->wall_ns) + MAX(use->helped_cpu_ns, INT64_C(0));
	int64_t free_ns = MAX(use->thread.cpu_ns, INT64_C(0)) + MAX(use->thread.runnable_ns, INT64_C(0)) +
			  MAX(use->helped_ns, INT64_C(0));
	return use->wall_ns > free_ns ? use->wall_ns - free_ns : 0;
}

static struct timespec ns_to_timespec(int64_t ns) {
	return (struct timespec) { .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
}

void fs_throttle_pace(FsThrottle *t, FsThrottleKind k, FsThrottleUnit *u) {
	FsThrottleCounters *c = &t->counters[k];
	int64_t now = clock_ns(CLOCK_MONOTONIC), work = now - u->start_ns;

	/* Busy during the unit, or in the idle window before it: the unit competed with it. */
	if (!foreground_since(t, u->start_ns - FS_THROTTLE_IDLE_NS)) {
		atomic_fetch_add_explicit(&c->idle_units, 1, memory_order_relaxed);
		unit_start(u);
		return;
	}
	atomic_fetch_add_explicit(&c->busy_units, 1, memory_order_relaxed);
	FsThrottleForeground fg = foreground_at(t, u->start_ns);
	if (fg != FS_THROTTLE_FG_DISK)
		atomic_fetch_add_explicit(&c->busy_cpu, 1, memory_order_relaxed);
	if (k == FS_THROTTLE_SEAL) {
		FsThrottleThreadTimes end;
		fs_throttle_thread_times(&end);
		FsThrottleUsage use = {
			.wall_ns = work,
			.thread = { since(u->start.cpu_ns, end.cpu_ns), since(u->start.runnable_ns, end.runnable_ns) },
			.helped_ns = u->helped_ns,
			.helped_cpu_ns = u->helped_cpu_ns,
		};
		work = fs_throttle_charge_ns(k, &use, fg);
	}
	int64_t delay = fs_throttle_delay_ns(work, t->share);
	if (delay == 0) {
		unit_start(u);
		return;
	}

	bool waited = false;
	pthread_mutex_lock(&t->lock);
	/* Invariant 3: the delay is owed by the background as a whole. */
	t->resume_ns = MIN(MAX(t->resume_ns, now) + delay, now + FS_THROTTLE_DELAY_MAX_NS);
	for (;;) {
		int64_t at = clock_ns(CLOCK_MONOTONIC);
		if (t->stopping || at >= t->resume_ns)
			break;
		if (!fs_throttle_foreground_is_busy(t)) {
			t->resume_ns = at; /* invariant 4 */
			break;
		}
		/* What the seal was charged for is no longer what it takes from the foreground. */
		if (k == FS_THROTTLE_SEAL && fs_throttle_foreground_now(t) != fg)
			break;
		struct timespec until = ns_to_timespec(MIN(t->resume_ns, at + THROTTLE_POLL_NS));
		waited = true;
		(void) pthread_cond_timedwait(&t->cond, &t->lock, &until);
	}
	pthread_mutex_unlock(&t->lock);

	int64_t end = clock_ns(CLOCK_MONOTONIC);
	if (waited) {
		atomic_fetch_add_explicit(&c->waits, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&c->wait_ns, (uint64_t) (end - now), memory_order_relaxed);
	}
	unit_start(u);
}

const char *fs_throttle_kind_to_string(FsThrottleKind k) {
	static const char *const names[_FS_THROTTLE_KIND_MAX] = {
		[FS_THROTTLE_SEAL] = "seal",
		[FS_THROTTLE_MIGRATE] = "migrate",
		[FS_THROTTLE_GC] = "gc",
		[FS_THROTTLE_REKEY] = "rekey",
		[FS_THROTTLE_INDEX] = "index",
	};
	return (unsigned) k < _FS_THROTTLE_KIND_MAX ? names[k] : NULL;
}
