/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The throttle's governor (fs/throttle.c): its arithmetic, and the cases where it must never wait. */
#undef NDEBUG
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

static void test_charge(void) {
	/* A seal is charged its time blocked only: off the CPU and off the run queue. */
	assert(fs_throttle_charge_ns(FS_THROTTLE_SEAL, 100, 70, 0, true) == 30);
	assert(fs_throttle_charge_ns(FS_THROTTLE_SEAL, 100, 100, 0, true) == 0);
	/* The two clocks are read apart: more scheduled time than wall time is no time blocked, not a negative one. */
	assert(fs_throttle_charge_ns(FS_THROTTLE_SEAL, 100, 130, 0, true) == 0);
	/* Unknown (no schedstat): all of it but what the encoders did for it. */
	assert(fs_throttle_charge_ns(FS_THROTTLE_SEAL, 100, -1, 0, true) == 100);
	assert(fs_throttle_charge_ns(FS_THROTTLE_SEAL, 100, -1, 40, true) == 60);
	/* Asleep while the encoders compressed its regions: their CPU, not a blocked seal. */
	assert(fs_throttle_charge_ns(FS_THROTTLE_SEAL, 100, 20, 50, true) == 30);
	assert(fs_throttle_charge_ns(FS_THROTTLE_SEAL, 100, 60, 50, true) == 0);
	/* A foreground that did not wait on the disk: a seal's waits slowed nothing it needs. */
	assert(fs_throttle_charge_ns(FS_THROTTLE_SEAL, 100, 70, 0, false) == 0);
	assert(fs_throttle_charge_ns(FS_THROTTLE_SEAL, 100, -1, 0, false) == 0);
	/* Moves and the collector: all of it, whatever the CPU and the foreground did. */
	assert(fs_throttle_charge_ns(FS_THROTTLE_MIGRATE, 100, 70, 0, true) == 100);
	assert(fs_throttle_charge_ns(FS_THROTTLE_MIGRATE, 100, 70, 0, false) == 100);
	assert(fs_throttle_charge_ns(FS_THROTTLE_GC, 100, 70, 50, false) == 100);
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

/* What counts as the foreground waiting on the disk, and a seal under a foreground that does not. */
static void test_disk(void) {
	FsThrottle t = {};
	FsThrottleUnit u = { .start_ns = 0, .start_sched_ns = 0 }; /* as long as the uptime, all of it blocked or not */

	fs_throttle_init(&t, 20);
	/* Writes into the page cache: busy, not on the disk. */
	fs_throttle_foreground(&t);
	assert(atomic_load(&t.disk_ns) == 0);
	/* So a seal is charged nothing, however long its thread was blocked, and does not wait. */
	fs_throttle_pace(&t, FS_THROTTLE_SEAL, &u);
	assert(atomic_load(&t.counters[FS_THROTTLE_SEAL].busy_units) == 1);
	assert(atomic_load(&t.counters[FS_THROTTLE_SEAL].busy_cpu) == 1);
	assert(atomic_load(&t.counters[FS_THROTTLE_SEAL].waits) == 0);
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

	/* An fsync: on the disk, and busy, for as long as it is under way. */
	FsThrottle f = {};
	fs_throttle_init(&f, 20);
	fs_throttle_disk_begin(&f);
	atomic_store(&f.foreground_ns, 1); /* its start long ago */
	atomic_store(&f.disk_ns, 1);
	assert(fs_throttle_foreground_is_busy(&f));
	assert(fs_throttle_foreground_is_on_disk(&f));
	fs_throttle_disk_end(&f);
	assert(atomic_load(&f.disk_waiting) == 0);
	assert(atomic_load(&f.disk_ns) > 1);
	fs_throttle_done(&f);

	/*
	 * A copy whose fsync ended 100 ms ago, writing its next file into the
	 * page cache: still busy, no longer on the disk, and a seal unit that
	 * was blocked is charged nothing.
	 */
	FsThrottle w = {};
	FsThrottleUnit wu;
	fs_throttle_init(&w, 20);
	int64_t now = fs_throttle_coarse_ns();
	atomic_store(&w.disk_ns, now - INT64_C(100) * 1000000);
	fs_throttle_foreground(&w);
	assert(fs_throttle_foreground_is_busy(&w));
	assert(!fs_throttle_foreground_is_on_disk(&w));
	fs_throttle_begin(&wu);
	(void) nanosleep(&(struct timespec) { .tv_nsec = 20000000 }, NULL); /* blocked, as on a lock */
	fs_throttle_pace(&w, FS_THROTTLE_SEAL, &wu);
	assert(atomic_load(&w.counters[FS_THROTTLE_SEAL].busy_cpu) == 1);
	assert(atomic_load(&w.counters[FS_THROTTLE_SEAL].waits) == 0);
	fs_throttle_done(&w);
}

/*
 * The thread's time on a CPU is read up to date, not as of its last tick:
 * all the CPU a unit used counts as such, however short the unit.
 */
static void test_sched_exact(void) {
	for (int k = 0; k < 50; k++) {
		int64_t before = fs_throttle_thread_sched_ns(), cpu = thread_cpu_ns();
		assert(before >= 0);
		spin_cpu();
		int64_t after = fs_throttle_thread_sched_ns(), used = thread_cpu_ns() - cpu;
		/* Half: the clocks are read microseconds apart, the spin takes about a millisecond. */
		assert(after - before >= used / 2);
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
	test_sched_exact();
	test_stopped();
	test_names();
	printf("ok\n");
	return 0;
}
