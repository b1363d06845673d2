/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Micro-benchmark of the chunker (not a test: it asserts nothing about time).
 * Chunks a buffer of pseudo-random bytes content-defined, whole and in pieces
 * as writes arrive (1 MiB, 4 KiB), on one core, and prints MB/s (10^6 bytes
 * per CPU-second, best round) with the chunk count and mean size.
 *
 *   bench-chunker [MiB [AVG_BYTES [ROUNDS]]]     defaults: 256 16384 5
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dedup/chunker.h"

/*
 * Thread CPU time, not wall time: on a shared machine the wall clock also
 * counts time spent descheduled, which is not the chunker's cost per core.
 */
static double cpu_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static uint64_t rng_state = 42;

static uint64_t rng_next(void) {
	uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Chunks buf in pieces of at most `piece` bytes; returns the number of chunks. */
static size_t run(const DedupChunkerParams *p, const uint8_t *buf, size_t len, size_t piece) {
	DedupChunker c;
	size_t chunks = 0;

	if (dedup_chunker_init(&c, p) < 0)
		abort();
	for (size_t off = 0; off < len;) {
		size_t end = len - off < piece ? len : off + piece;
		while (off < end) {
			size_t n;
			if (dedup_chunker_scan(&c, buf + off, end - off, &n))
				chunks++;
			off += n;
		}
	}
	return chunks + (dedup_chunker_pending(&c) > 0);
}

static void bench(const char *name, const DedupChunkerParams *p, const uint8_t *buf, size_t len, size_t piece,
		  unsigned rounds) {
	double best = 1e30;
	size_t chunks = 0;

	for (unsigned r = 0; r < rounds; r++) {
		double t = cpu_now();
		chunks = run(p, buf, len, piece);
		t = cpu_now() - t;
		if (t < best)
			best = t;
	}
	printf("%-28s %8.0f MB/s  %zu chunks, mean %zu B\n", name, (double) len / best / 1e6, chunks,
	       chunks ? len / chunks : 0);
}

int main(int argc, char **argv) {
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
	size_t avg = argc > 2 ? strtoul(argv[2], NULL, 10) : DEDUP_CHUNKER_AVG_SIZE_DEFAULT;
	unsigned rounds = argc > 3 ? (unsigned) strtoul(argv[3], NULL, 10) : 5;
	size_t len = mib << 20;

	if (len == 0 || rounds == 0) {
		fprintf(stderr, "usage: bench-chunker [MiB [AVG_BYTES [ROUNDS]]]\n");
		return EXIT_FAILURE;
	}
	DedupChunkerParams cdc = DEDUP_CHUNKER_PARAMS_CDC(avg);
	if (dedup_chunker_params_validate(&cdc) < 0) {
		fprintf(stderr, "bench-chunker: invalid average chunk size %zu\n", avg);
		return EXIT_FAILURE;
	}

	uint8_t *buf = malloc(len);
	if (!buf) {
		fprintf(stderr, "bench-chunker: out of memory\n");
		return EXIT_FAILURE;
	}
	for (size_t i = 0; i + 8 <= len; i += 8) {
		uint64_t v = rng_next();
		memcpy(buf + i, &v, 8);
	}

	printf("%zu MiB random data, min/avg/max %zu/%zu/%zu, best of %u\n", mib, cdc.min_size, cdc.avg_size,
	       cdc.max_size, rounds);
	bench("cdc, one buffer", &cdc, buf, len, len, rounds);
	bench("cdc, 1 MiB pieces", &cdc, buf, len, 1 << 20, rounds);
	bench("cdc, 4 KiB pieces", &cdc, buf, len, 4 << 10, rounds);

	free(buf);
	return EXIT_SUCCESS;
}
