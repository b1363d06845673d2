/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The NFS backend with a server that dies or hangs under it:
 *  - SIGKILL during a stream of preads from several threads and during a
 *    stream of appends: every call fails with -EIO, none hangs; after the
 *    server restarts the same backend object works again (a reader's first
 *    calls may still fail while the backend finds its connections dead;
 *    once one succeeds, every later one does), and a file with
 *    writes the dead server never committed stays failed (never reported
 *    synced) until reopened at its synced size;
 *  - SIGSTOP (connections stay up, nothing answers): calls fail with -EIO
 *    after the configured timeout instead of waiting for the server.
 *
 *     test-nfs-dead URL     driven by tests/tier/test_nfs.py: a line "@kill",
 *                           "@start", "@pause" or "@resume" on stdout asks
 *                           it to act on the server; it answers "ok" on stdin.
 *
 * Elapsed times are measured only as a hang detector: a call still running
 * after hang_s fails the test; nothing asserts how fast anything is.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/tier/tier-test.h"

#define KiB ((size_t) 1 << 10)
#define OBJ_SIZE (1024 * KiB)
#define READERS 4
/*
 * Far above the worst case of the options below (retries 1, timeout 2 s:
 * about 2 x (3 x 3 s)) on a release build, and stretched like meson's own
 * timeouts for slower builds (FRATIER_TIMEOUT_MULTIPLIER, set by the test
 * setup "sanitizer").
 */
#define HANG_S 30.0
static double hang_s = HANG_S;

static const TierNfsOptions options = { .timeout_ms = 2000, .retries = 1, .connections = 4 };

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/*
 * The hang detector: each thread that calls the backend has a slot holding
 * when its current call started (0: none); a watchdog thread aborts the test
 * when a call has been running for HANG_S, so a hung call fails the test
 * instead of waiting for meson's timeout.
 */
#define SLOT_MAIN READERS
static _Atomic double call_started[READERS + 1];
static _Atomic double longest_call;
static atomic_bool watchdog_stop;

static void call_begin(unsigned slot) {
	atomic_store(&call_started[slot], now());
}

static void call_end(unsigned slot) {
	double took = now() - atomic_exchange(&call_started[slot], 0.0), seen = atomic_load(&longest_call);
	while (took > seen && !atomic_compare_exchange_weak(&longest_call, &seen, took))
		;
}

/* Evaluates expr as one timed call of slot. */
#define TIMED(slot, expr)                   \
	({                                  \
		call_begin(slot);           \
		__typeof__(expr) _v = (expr); \
		call_end(slot);             \
		_v;                         \
	})

static void *watchdog(void *arg) {
	while (!atomic_load(&watchdog_stop)) {
		for (unsigned i = 0; i <= READERS; i++) {
			double started = atomic_load(&call_started[i]);
			if (started > 0 && now() - started > hang_s) {
				fprintf(stderr, "a call of thread slot %u has blocked for %.0f s: hung\n", i, hang_s);
				abort();
			}
		}
		usleep(100000);
	}
	return NULL;
}

static void fill(uint64_t seed, uint64_t offset, uint8_t *buf, size_t len) {
	for (size_t i = 0; i < len; i++) {
		uint64_t x = (offset + i) * UINT64_C(0x9e3779b97f4a7c15) + seed;
		buf[i] = (uint8_t) ((x >> 29) ^ (x >> 47));
	}
}

static void put(DedupBackend *b, const char *name, uint64_t seed, size_t len) {
	DedupBackendFile *f;
	uint8_t *buf = test_malloc(len);
	fill(seed, 0, buf, len);
	ASSERT_OK(dedup_backend_open_write(b, name, true, 0, &f));
	ASSERT_OK(dedup_backend_file_pwrite(b, f, buf, len, 0));
	ASSERT_OK(dedup_backend_file_sync(b, f));
	dedup_backend_file_close(b, f);
	free(buf);
}

/* Phases the readers go through, set by main. */
enum { PHASE_UP, PHASE_DOWN, PHASE_BACK, PHASE_STOP };

typedef struct Reader {
	DedupBackend *b;
	unsigned id;
	_Atomic int *phase;
	atomic_uint errors_down; /* -EIO seen after the kill */
	atomic_uint errors_back; /* -EIO of calls started after the restart, before the first success */
	atomic_uint ok_back;     /* successes seen after the restart */
} Reader;

static void *reader(void *arg) {
	Reader *r = arg;
	TestRng rng = { .state = r->id };
	uint8_t *buf = test_malloc(64 * KiB), *want = test_malloc(64 * KiB);
	int phase;

	while ((phase = atomic_load(r->phase)) != PHASE_STOP) {
		int started = phase;
		size_t off = (size_t) (test_rng_next(&rng) % OBJ_SIZE), n = 1 + (size_t) (test_rng_next(&rng) % (64 * KiB));
		ssize_t got = TIMED(r->id - 1, dedup_backend_pread(r->b, "r/obj", buf, n, off));
		if (got >= 0) {
			ASSERT(got == (ssize_t) MIN(n, OBJ_SIZE - off));
			fill(1, off, want, (size_t) got);
			ASSERT(memcmp(buf, want, (size_t) got) == 0);
			if (phase == PHASE_BACK)
				atomic_fetch_add(&r->ok_back, 1);
			continue;
		}
		/* Only a dead server explains an error (it may have died during the call), and it is -EIO. */
		phase = atomic_load(r->phase);
		ASSERT(phase != PHASE_UP);
		ASSERT(got == -EIO);
		if (started == PHASE_BACK) {
			/*
			 * Started after the restart: the first calls may still meet
			 * connections the dead server left, but once one call got
			 * through the backend works again, for good.
			 */
			ASSERT(atomic_load(&r->ok_back) == 0);
			atomic_fetch_add(&r->errors_back, 1);
		} else if (phase == PHASE_DOWN)
			atomic_fetch_add(&r->errors_down, 1);
	}
	free(buf);
	free(want);
	return NULL;
}

/* Waits (bounded, as a hang detector) until every reader's counter reaches n. */
static void wait_readers(Reader *readers, size_t field_offset, unsigned n) {
	double start = now();
	for (;;) {
		bool all = true;
		for (unsigned i = 0; i < READERS; i++)
			all = all && atomic_load((atomic_uint *) ((char *) (readers + i) + field_offset)) >= n;
		if (all)
			return;
		if (now() - start > 3 * hang_s) {
			fprintf(stderr, "readers made no progress\n");
			abort();
		}
		usleep(10000);
	}
}

static void test_kill_during_preads(DedupBackend *b) {
	pthread_t threads[READERS];
	Reader readers[READERS];
	_Atomic int phase = PHASE_UP;

	put(b, "r/obj", 1, OBJ_SIZE);
	for (unsigned i = 0; i < READERS; i++) {
		readers[i] = (Reader) { .b = b, .id = i + 1, .phase = &phase };
		ASSERT(pthread_create(threads + i, NULL, reader, readers + i) == 0);
	}
	usleep(100000);
	/* The phase moves first: a read failing between the kill and the store would be PHASE_UP. */
	atomic_store(&phase, PHASE_DOWN);
	test_server("kill");
	wait_readers(readers, offsetof(Reader, errors_down), 3);

	test_server("start");
	atomic_store(&phase, PHASE_BACK);
	wait_readers(readers, offsetof(Reader, ok_back), 3);
	atomic_store(&phase, PHASE_STOP);
	unsigned failed_back = 0;
	for (unsigned i = 0; i < READERS; i++) {
		ASSERT(pthread_join(threads[i], NULL) == 0);
		failed_back += atomic_load(&readers[i].errors_back);
	}
	/* For the report, not a check. */
	fprintf(stderr, "after the restart: %u reads failed before each reader's first success\n", failed_back);
}

static void test_kill_during_writes(DedupBackend *b, const char *url) {
	const size_t step = 64 * KiB;
	uint8_t *buf = test_malloc(step), *back = test_malloc(step);
	DedupBackendFile *f;
	uint64_t synced = 0, size;
	int r = 0;

	ASSERT_OK(dedup_backend_open_write(b, "w/obj", true, 0, &f));
	for (uint64_t off = 0; off < 16 * step; off += step) {
		fill(2, off, buf, step);
		ASSERT_OK(dedup_backend_file_pwrite(b, f, buf, step, off));
		if (off % (4 * step) == 0) {
			ASSERT_OK(dedup_backend_file_sync(b, f));
			synced = off + step;
		}
	}
	/* Written but not committed when the server dies. */
	test_server("kill");
	for (uint64_t off = 16 * step; r == 0 && off < 64 * step; off += step) {
		fill(2, off, buf, step);
		r = TIMED(SLOT_MAIN, dedup_backend_file_pwrite(b, f, buf, step, off));
	}
	ASSERT_RET(r, -EIO);
	ASSERT_RET(TIMED(SLOT_MAIN, dedup_backend_file_sync(b, f)), -EIO);
	DedupBackendFile *g;
	ASSERT_RET(TIMED(SLOT_MAIN, dedup_backend_open_write(b, "w/other", true, 0, &g)), -EIO);
	ASSERT_RET(TIMED(SLOT_MAIN, dedup_backend_size(b, "w/obj", &size)), -EIO);
	DedupBackendStatfs st;
	ASSERT_RET(TIMED(SLOT_MAIN, dedup_backend_statfs(b, &st)), -EIO);
	ASSERT_RET(TIMED(SLOT_MAIN, dedup_backend_list(b, "w", list_collect, NULL)), -EIO);
	ASSERT_RET(TIMED(SLOT_MAIN, dedup_backend_unlink(b, "w/obj")), -EIO);

	/* A new backend cannot mount a dead server: -EIO, in bounded time, with a message. */
	DedupBackend *other;
	ASSERT_RET(TIMED(SLOT_MAIN, tier_backend_nfs_open(url, &options, &other)), -EIO);
	ASSERT(tier_backend_nfs_open_error()[0] != '\0');

	test_server("start");
	/* The file lost writes with the server: it stays failed, whatever the server does now. */
	fill(2, 16 * step, buf, step);
	ASSERT_RET(dedup_backend_file_pwrite(b, f, buf, step, 16 * step), -EIO);
	ASSERT_RET(dedup_backend_file_sync(b, f), -EIO);
	dedup_backend_file_close(b, f);

	/* Reopened at its synced size it takes appends again. */
	ASSERT_OK(dedup_backend_size(b, "w/obj", &size));
	ASSERT(size >= synced);
	ASSERT_OK(dedup_backend_open_write(b, "w/obj", false, synced, &f));
	for (uint64_t off = synced; off < synced + 8 * step; off += step) {
		fill(2, off, buf, step);
		ASSERT_OK(dedup_backend_file_pwrite(b, f, buf, step, off));
	}
	ASSERT_OK(dedup_backend_file_sync(b, f));
	dedup_backend_file_close(b, f);
	ASSERT_OK(dedup_backend_size(b, "w/obj", &size));
	ASSERT(size == synced + 8 * step);
	for (uint64_t off = 0; off < size; off += step) {
		ASSERT_OK(dedup_backend_pread_full(b, "w/obj", back, step, off));
		fill(2, off, buf, step);
		ASSERT(memcmp(buf, back, step) == 0);
	}
	free(buf);
	free(back);
}

static void test_hung_server(DedupBackend *b) {
	uint8_t buf[4096], want[4096];
	DedupBackendFile *f;

	put(b, "h/obj", 3, sizeof(buf));
	ASSERT_OK(dedup_backend_open_write(b, "h/obj", false, sizeof(buf), &f));
	test_server("pause");
	ASSERT(TIMED(SLOT_MAIN, dedup_backend_pread(b, "h/obj", buf, sizeof(buf), 0)) == -EIO);
	fill(3, sizeof(buf), buf, sizeof(buf));
	ASSERT_RET(TIMED(SLOT_MAIN, dedup_backend_file_pwrite(b, f, buf, sizeof(buf), sizeof(buf))), -EIO);
	ASSERT_RET(TIMED(SLOT_MAIN, dedup_backend_file_sync(b, f)), -EIO);
	test_server("resume");
	dedup_backend_file_close(b, f);

	ASSERT(dedup_backend_pread(b, "h/obj", buf, sizeof(buf), 0) == (ssize_t) sizeof(buf));
	fill(3, 0, want, sizeof(want));
	ASSERT(memcmp(buf, want, sizeof(buf)) == 0);
}

int main(int argc, char **argv) {
	DedupBackend *b;

	if (argc != 2) {
		fprintf(stderr, "usage: %s URL\n", argv[0]);
		return 2;
	}
	const char *mult = getenv("FRATIER_TIMEOUT_MULTIPLIER");
	if (mult && atof(mult) > 0)
		hang_s = HANG_S * atof(mult);
	int r = tier_backend_nfs_open(argv[1], &options, &b);
	if (r < 0)
		fprintf(stderr, "%s\n", tier_backend_nfs_open_error());
	ASSERT_OK(r);

	pthread_t dog;
	ASSERT(pthread_create(&dog, NULL, watchdog, NULL) == 0);
	test_kill_during_preads(b);
	test_kill_during_writes(b, argv[1]);
	test_hung_server(b);
	b = dedup_backend_free(b);
	atomic_store(&watchdog_stop, true);
	ASSERT(pthread_join(dog, NULL) == 0);
	/* For the report, not a check: how close the slowest call came to the hang bound. */
	fprintf(stderr, "longest call %.2f s (timeout %u ms, retries %u)\n", atomic_load(&longest_call),
		options.timeout_ms, options.retries);
	printf("ok\n");
	return 0;
}
