/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The throttle's governor (fs/throttle.c): its arithmetic, and the cases where it must never wait. */
#undef NDEBUG
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "fs/throttle.h"

static int64_t thread_cpu_ns(void) {
	struct timespec ts;
	assert(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Keeps this thread on a CPU, never asleep, for a millisecond or so; no
 * system call, which could bring the kernel's count of its time up to date.
 */
static void spin_cpu(void) {
	for (volatile unsigned i = 0; i < 2000000; i++)
		;
}

static void test_delay(void) {
	/* 20%: 1 s of work earns 4 s of waiting, which the cap makes 2 s. */
	assert(fs_throttle_delay_ns(INT64_C(100) * 1000000, 20) == INT64_C(400) * 1000000);
	assert(fs_throttle_delay_ns(INT64_C(1000) * 1000000, 20) == FS_THROTTLE_DELAY_MAX_NS);
	assert(fs_throttle_delay_ns(INT64_C(10) * 1000000, 50) == INT64_C(10) * 1000000);
	assert(fs_throttle_delay_ns(1000, 1) == 99000);
	assert(fs_throttle_delay_ns(INT64_C(10) * 1000000, 80) == INT64_C(2500000));
	/* Never waits: everything for the background, or no work at all. */
	assert(fs_throttle_delay_ns(INT64_C(1000) * 1000000, 100) == 0);
	assert(fs_throttle_delay_ns(0, 20) == 0);
	assert(fs_throttle_delay_ns(-5, 20) == 0);
	/* The largest work a 64-bit clock can report still gives the cap, not an overflow. */
	assert(fs_throttle_delay_ns(INT64_MAX, 1) == FS_THROTTLE_DELAY_MAX_NS);
	/* The duty cycle: work / (work + delay) is the share, below the cap. */
	for (unsigned s = 1; s <= 100; s++) {
		int64_t work = 10000, d = fs_throttle_delay_ns(work, s);
		double share = (double) work / (double) (work + d);
		assert(share > (double) s / 100 - 0.001 && share < (double) s / 100 + 0.001);
	}
}

static int64_t charge(FsThrottleKind k, int64_t wall, int64_t cpu, int64_t runnable, int64_t helped, int64_t helped_cpu,
		      FsThrottleForeground fg) {
	FsThrottleUsage use = {
		.wall_ns = wall,
		.thread = { .cpu_ns = cpu, .runnable_ns = runnable },
		.helped_ns = helped,
		.helped_cpu_ns = helped_cpu,
	};
	return fs_throttle_charge_ns(k, &use, fg);
}

static void test_charge(void) {
	const FsThrottleForeground CPU = FS_THROTTLE_FG_CPU, DISK = FS_THROTTLE_FG_DISK, QUIET = FS_THROTTLE_FG_QUIET;

	/*
	 * Beside a foreground writing into the page cache (off the disk), a
	 * seal is charged the CPU it took: its thread's time on a CPU, not its
	 * time runnable (it waited for the CPU the writer had) nor blocked.
	 */
	assert(charge(FS_THROTTLE_SEAL, 100, 30, 20, 0, 0, CPU) == 30);
	/* A unit of pure CPU: all of it. */
	assert(charge(FS_THROTTLE_SEAL, 100, 100, 0, 0, 0, CPU) == 100);
	/* And its encoders' CPU: a seal handing its compression over is charged it all the same. */
	assert(charge(FS_THROTTLE_SEAL, 100, 10, 0, 80, 150, CPU) == 160);
	assert(charge(FS_THROTTLE_SEAL, 100, 0, 0, 100, 100, CPU) == 100);
	/* Its thread's time unknown: the whole unit, and the encoders' on top. */
	assert(charge(FS_THROTTLE_SEAL, 100, -1, -1, 0, 0, CPU) == 100);
	assert(charge(FS_THROTTLE_SEAL, 100, -1, -1, 50, 50, CPU) == 150);

	/*
	 * Beside a foreground waiting on the disk: only its time blocked, off
	 * the CPU, off the run queue and not asleep for its encoders.
	 */
	assert(charge(FS_THROTTLE_SEAL, 100, 50, 20, 0, 0, DISK) == 30);
	assert(charge(FS_THROTTLE_SEAL, 100, 100, 0, 0, 0, DISK) == 0);
	assert(charge(FS_THROTTLE_SEAL, 100, 20, 0, 50, 120, DISK) == 30);
	assert(charge(FS_THROTTLE_SEAL, 100, 60, 0, 50, 50, DISK) == 0);
	/* The clocks are read apart: more time accounted for than wall time is no time blocked, not a negative one. */
	assert(charge(FS_THROTTLE_SEAL, 100, 90, 40, 0, 0, DISK) == 0);
	/* Its time runnable unknown: it counts as blocked. */
	assert(charge(FS_THROTTLE_SEAL, 100, 70, -1, 0, 0, DISK) == 30);
	assert(charge(FS_THROTTLE_SEAL, 100, -1, -1, 40, 40, DISK) == 60);

	/* Beside a foreground that sent nothing lately (between files): nothing, CPU or blocked. */
	assert(charge(FS_THROTTLE_SEAL, 100, 100, 0, 0, 0, QUIET) == 0);
	assert(charge(FS_THROTTLE_SEAL, 100, 10, 0, 80, 150, QUIET) == 0);
	assert(charge(FS_THROTTLE_SEAL, 100, -1, -1, 0, 0, QUIET) == 0);

	/* Moves and the collector: all of it, whatever the CPU and the foreground did. */
	assert(charge(FS_THROTTLE_MIGRATE, 100, 70, 0, 0, 0, DISK) == 100);
	assert(charge(FS_THROTTLE_MIGRATE, 100, 70, 0, 0, 0, CPU) == 100);
	assert(charge(FS_THROTTLE_GC, 100, 70, 10, 50, 50, QUIET) == 100);
}

static void test_idle(void) {
	FsThrottle t = {};
	FsThrottleUnit u;

	fs_throttle_init(&t, 20);
	/* No foreground request ever: idle, whatever the work took. */
	assert(!fs_throttle_foreground_is_busy(&t));
	fs_throttle_begin(&u);
	fs_throttle_pace(&t, FS_THROTTLE_SEAL, &u);
	assert(atomic_load(&t.counters[FS_THROTTLE_SEAL].idle_units) == 1);
	assert(atomic_load(&t.counters[FS_THROTTLE_SEAL].busy_units) == 0);
	assert(atomic_load(&t.counters[FS_THROTTLE_SEAL].waits) == 0);
	fs_throttle_done(&t);
}

static void test_share_100(void) {
	FsThrottle t = {};
	FsThrottleUnit u;

	fs_throttle_init(&t, 100);
	fs_throttle_foreground(&t);
	assert(fs_throttle_foreground_is_busy(&t));
	fs_throttle_begin(&u);
	fs_throttle_pace(&t, FS_THROTTLE_MIGRATE, &u);
	assert(atomic_load(&t.counters[FS_THROTTLE_MIGRATE].busy_units) == 1);
	assert(atomic_load(&t.counters[FS_THROTTLE_MIGRATE].waits) == 0);
	fs_throttle_done(&t);
}

/* What counts as the foreground waiting on the disk. */
static void test_disk(void) {
	FsThrottle t = {};

	fs_throttle_init(&t, 20);
	/* Writes into the page cache: busy, not on the disk. */
	fs_throttle_foreground(&t);
	assert(atomic_load(&t.disk_ns) == 0);
	assert(fs_throttle_foreground_is_busy(&t));
	assert(!fs_throttle_foreground_is_on_disk(&t));
	assert(fs_throttle_foreground_now(&t) == FS_THROTTLE_FG_CPU);
	/* A write that took longer than a copy into the page cache can: it waited. */
	fs_throttle_foreground_wrote(&t, fs_throttle_coarse_ns() - FS_THROTTLE_SLOW_WRITE_NS);
	assert(atomic_load(&t.disk_ns) > 0);
	fs_throttle_done(&t);

	/* A read may go to the disk. */
	FsThrottle r = {};
	fs_throttle_init(&r, 20);
	fs_throttle_foreground_read(&r);
	assert(atomic_load(&r.disk_ns) > 0);
	fs_throttle_done(&r);

	/*
	 * An fsync: on the disk, and busy, for as long as it is under way; once
	 * it ended, busy and on the CPU at once (the writer goes on with its
	 * next file), not on the disk for FS_THROTTLE_DISK_NS more.
	 */
	FsThrottle f = {};
	fs_throttle_init(&f, 20);
	fs_throttle_disk_begin(&f);
	assert(atomic_load(&f.disk_ns) > 0);
	atomic_store(&f.foreground_ns, 1); /* its start long ago */
	atomic_store(&f.disk_ns, 1);
	assert(fs_throttle_foreground_is_busy(&f));
	assert(fs_throttle_foreground_is_on_disk(&f));
	assert(fs_throttle_foreground_now(&f) == FS_THROTTLE_FG_DISK);
	fs_throttle_disk_end(&f);
	assert(atomic_load(&f.disk_waiting) == 0);
	assert(fs_throttle_foreground_is_busy(&f));
	assert(!fs_throttle_foreground_is_on_disk(&f));
	assert(fs_throttle_foreground_now(&f) == FS_THROTTLE_FG_CPU);
	fs_throttle_done(&f);

	/*
	 * A copy whose fsync ended 100 ms ago, writing its next file into the
	 * page cache: still busy, no longer on the disk.
	 */
	FsThrottle w = {};
	fs_throttle_init(&w, 20);
	atomic_store(&w.disk_ns, fs_throttle_coarse_ns() - INT64_C(100) * 1000000);
	fs_throttle_foreground(&w);
	assert(fs_throttle_foreground_is_busy(&w));
	assert(!fs_throttle_foreground_is_on_disk(&w));
	assert(fs_throttle_foreground_now(&w) == FS_THROTTLE_FG_CPU);
	fs_throttle_done(&w);

	/*
	 * One whose last request came 100 ms ago (it opens its next file, or it
	 * is done): busy still, but it takes no CPU, and a seal unit of pure
	 * CPU meanwhile is charged nothing and does not wait.
	 */
	FsThrottle q = {};
	FsThrottleUnit qu;
	fs_throttle_init(&q, 20);
	atomic_store(&q.foreground_ns, fs_throttle_coarse_ns() - INT64_C(100) * 1000000);
	assert(fs_throttle_foreground_is_busy(&q));
	assert(fs_throttle_foreground_now(&q) == FS_THROTTLE_FG_QUIET);
	fs_throttle_begin(&qu);
	for (int k = 0; k < 3; k++)
		spin_cpu();
	fs_throttle_pace(&q, FS_THROTTLE_SEAL, &qu);
	assert(atomic_load(&q.counters[FS_THROTTLE_SEAL].busy_units) == 1);
	assert(atomic_load(&q.counters[FS_THROTTLE_SEAL].waits) == 0);
	assert(q.resume_ns == 0); /* nor owes anything */
	fs_throttle_done(&q);
}

/*
 * A foreground on another thread: it writes into the page cache (a request
 * every 10 ms) for before_ms, then an fsync begins (begin), or the one
 * under way ends (end), or neither, then it writes for after_ms.  It notes
 * the longest time it went without a request: a thread kept off the CPUs
 * by the machine's load for FS_THROTTLE_CPU_NS is a writer that paused, as
 * far as the throttle can tell.
 */
typedef struct Foreground {
	FsThrottle *t;
	int before_ms, after_ms;
	bool begin, end;
	pthread_t thread;
	int64_t last_ns, longest_gap_ns;
} Foreground;

static void sleep_ms(long ms) {
	(void) nanosleep(&(struct timespec) { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 }, NULL);
}

static void writes(Foreground *f, int ms) {
	for (int k = 0; k < ms / 10; k++) {
		int64_t now = fs_throttle_foreground(f->t);
		if (f->last_ns && now - f->last_ns > f->longest_gap_ns)
			f->longest_gap_ns = now - f->last_ns;
		f->last_ns = now;
		sleep_ms(10);
	}
}

static void *foreground_main(void *userdata) {
	Foreground *f = userdata;
	writes(f, f->before_ms);
	if (f->begin)
		fs_throttle_disk_begin(f->t); /* ended by the test, once the seal returned */
	if (f->end)
		fs_throttle_disk_end(f->t);
	writes(f, f->after_ms);
	return NULL;
}

static void foreground_start(Foreground *f) {
	assert(pthread_create(&f->thread, NULL, foreground_main, f) == 0);
}

static void foreground_join(Foreground *f) {
	assert(pthread_join(f->thread, NULL) == 0);
	if (f->begin)
		fs_throttle_disk_end(f->t);
}

/*
 * A seal unit of pure CPU beside a foreground writing into the page cache
 * (busy, off the disk, sending requests) is charged its CPU: at share 20
 * it waits four times the CPU it used (nothing ends the wait early: the
 * foreground writes on), where one charged only its time blocked would
 * wait for a few clock reads' worth, if at all.
 */
static bool seal_beside_writer(void) {
	FsThrottle t = {};
	FsThrottleUnit u;
	Foreground f = { .t = &t, .before_ms = 1000 };

	fs_throttle_init(&t, 20);
	fs_throttle_foreground(&t);
	foreground_start(&f);
	fs_throttle_begin(&u);
	int64_t cpu = thread_cpu_ns();
	for (int k = 0; k < 10; k++)
		spin_cpu();
	int64_t used = thread_cpu_ns() - cpu;
	fs_throttle_pace(&t, FS_THROTTLE_SEAL, &u);
	assert(atomic_load(&t.counters[FS_THROTTLE_SEAL].busy_units) == 1);
	assert(atomic_load(&t.counters[FS_THROTTLE_SEAL].busy_cpu) == 1);
	assert(atomic_load(&t.counters[FS_THROTTLE_SEAL].waits) == 1);
	/* Half of the four times: the margin of test_sched_exact(). */
	bool waited = (int64_t) atomic_load(&t.counters[FS_THROTTLE_SEAL].wait_ns) >= 2 * used;
	foreground_join(&f);
	fs_throttle_done(&t);
	if (waited)
		return true;
	/* Cut short: only by the writer itself going quiet, off the CPUs. */
	fprintf(stderr, "the seal's wait ended early; the writer went %.1f ms without a request\n",
		(double) f.longest_gap_ns / 1e6);
	assert(f.longest_gap_ns >= FS_THROTTLE_CPU_NS);
	return false;
}

static void test_seal_beside_writer(void) {
	for (int attempt = 0; attempt < 5; attempt++)
		if (seal_beside_writer())
			return;
	assert(!"the writer was kept off the CPUs in five attempts");
}

/*
 * A seal waits only while the foreground still waits for what it did
 * during the unit.  Charged for its CPU beside a writer, its wait ends when
 * the writer's fsync begins (the cores are free then: it fills the wait),
 * or when the writer sends nothing for FS_THROTTLE_CPU_NS; charged for its
 * time blocked beside an fsync, its wait ends once the foreground is off
 * the disk.  Each unit is charged far more than the 2 s cap, so a seal that
 * waited to the end would return with the timeline behind it, and one let
 * go because the foreground went idle would have the timeline moved back.
 */
static void test_seal_wait_ends(void) {
	static const Foreground cases[] = {
		{ .before_ms = 50, .begin = true },                  /* charged for its CPU; the fsync begins */
		{ .before_ms = 50 },                                 /* charged for its CPU; the writer pauses */
		{ .before_ms = 50, .end = true, .after_ms = 300 },   /* charged blocked; the fsync ends, writes follow */
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		FsThrottle t = {};
		FsThrottleUnit u;
		Foreground f = cases[k];
		f.t = &t;

		fs_throttle_init(&t, 1);
		if (!f.end) {
			fs_throttle_foreground(&t);
			fs_throttle_begin(&u);
			spin_cpu();
			/* Charged all of its thread's time on a CPU since it started. */
			u.start.cpu_ns = 0;
		} else {
			fs_throttle_disk_begin(&t);
			fs_throttle_begin(&u);
			/* Blocked for as long as the uptime. */
			u.start_ns = 0;
		}
		foreground_start(&f);
		fs_throttle_pace(&t, FS_THROTTLE_SEAL, &u);
		int64_t end = clock_ns(CLOCK_MONOTONIC);
		assert(atomic_load(&t.counters[FS_THROTTLE_SEAL].waits) == 1);
		assert(atomic_load(&t.counters[FS_THROTTLE_SEAL].busy_cpu) == (unsigned) !f.end);
		/* Returned early, with the debt it owed still ahead. */
		pthread_mutex_lock(&t.lock);
		assert(end < t.resume_ns);
		pthread_mutex_unlock(&t.lock);
		foreground_join(&f);
		fs_throttle_done(&t);
	}
}

/*
 * The thread's time on a CPU is read up to date, not as of its last tick:
 * all the CPU a unit used counts as such, however short the unit.
 */
static void test_sched_exact(void) {
	for (int k = 0; k < 50; k++) {
		FsThrottleThreadTimes before, after;
		fs_throttle_thread_times(&before);
		int64_t cpu = thread_cpu_ns();
		assert(before.cpu_ns >= 0 && before.runnable_ns >= 0);
		spin_cpu();
		fs_throttle_thread_times(&after);
		int64_t used = thread_cpu_ns() - cpu;
		/* Half: the clocks are read microseconds apart, the spin takes about a millisecond. */
		assert(after.cpu_ns - before.cpu_ns >= used / 2);
	}
}

static void test_stopped(void) {
	FsThrottle t = {};
	FsThrottleUnit u = { .start_ns = 0 }; /* a unit as long as the uptime: the longest wait there is */

	fs_throttle_init(&t, 1);
	fs_throttle_foreground(&t);
	fs_throttle_stop(&t);
	fs_throttle_pace(&t, FS_THROTTLE_GC, &u);
	assert(atomic_load(&t.counters[FS_THROTTLE_GC].busy_units) == 1);
	assert(atomic_load(&t.counters[FS_THROTTLE_GC].waits) == 0);
	fs_throttle_done(&t);
	fs_throttle_done(&t); /* twice, and on one never made: as at unmount after a failed start */
	FsThrottle never = {};
	fs_throttle_stop(&never);
	fs_throttle_done(&never);
}

static void test_names(void) {
	assert(strcmp(fs_throttle_kind_to_string(FS_THROTTLE_SEAL), "seal") == 0);
	assert(strcmp(fs_throttle_kind_to_string(FS_THROTTLE_MIGRATE), "migrate") == 0);
	assert(strcmp(fs_throttle_kind_to_string(FS_THROTTLE_GC), "gc") == 0);
	assert(fs_throttle_kind_to_string(_FS_THROTTLE_KIND_MAX) == NULL);
}

int main(void) {
	test_delay();
	test_charge();
	test_idle();
	test_share_100();
	test_disk();
	test_seal_beside_writer();
	test_seal_wait_ends();
	test_sched_exact();
	test_stopped();
	test_names();
	printf("ok\n");
	return 0;
}
