/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * chunker-speed — single-core speed of each step of sealing, on real bytes
 * held in memory (bench, not test):
 *
 *   chunker-speed [--passes N] FILE...
 *
 * Loads the files (up to 1 GiB in all) into memory, then on one thread
 * times, over the whole buffer: the chunker alone (CDC 8 and 16 KiB, fixed
 * 16 KiB), SHA-256 of every 16 KiB CDC chunk, XXH3-64 of the buffer, zstd
 * -1 and -3 of every chunk and the decompression of what each level wrote.  Each figure is the best of N passes (default 3), in
 * MB/s (10^6 bytes) of this thread's CPU time: on a shared machine the wall
 * clock also counts time spent descheduled, which is not a cost per core.  The
 * chunker's target is 1 GB/s on one core: the seal path must not be bound
 * by it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "dedup/chunker.h"
#include "dedup/fingerprint.h"

#define LOAD_MAX ((size_t) 1 << 30)

/* The timed hash's result: stored, so that the compiler keeps the hashing. */
static volatile XXH64_hash_t hash_sink;

static double cpu_now_s(void) {
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static int load(char **files, int n, unsigned char **ret, size_t *ret_len) {
	size_t cap = 0, len = 0;
	unsigned char *buf = NULL;

	for (int k = 0; k < n && len < LOAD_MAX; k++) {
		int fd = open(files[k], O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0) {
			fprintf(stderr, "chunker-speed: %s: %s\n", files[k], strerror(errno));
			return -1;
		}
		size_t want = (size_t) st.st_size;
		if (want > LOAD_MAX - len)
			want = LOAD_MAX - len;
		if (len + want > cap) {
			cap = len + want;
			unsigned char *nb = realloc(buf, cap);
			if (!nb) {
				fprintf(stderr, "chunker-speed: out of memory\n");
				return -1;
			}
			buf = nb;
		}
		for (size_t got = 0; got < want;) {
			ssize_t r = read(fd, buf + len + got, want - got);
			if (r <= 0) {
				fprintf(stderr, "chunker-speed: %s: short read\n", files[k]);
				return -1;
			}
			got += (size_t) r;
		}
		len += want;
		close(fd);
	}
	*ret = buf;
	*ret_len = len;
	return 0;
}

/* Chunk lengths of the whole buffer; the chunker's own loop is what gets timed. */
static size_t chunk(const DedupChunkerParams *p, const unsigned char *buf, size_t len, size_t *sizes) {
	DedupChunker c;
	size_t n = 0, last = 0;

	dedup_chunker_init(&c, p);
	for (size_t off = 0; off < len;) {
		size_t used;
		bool cut = dedup_chunker_scan(&c, buf + off, len - off, &used);
		off += used;
		if (cut) {
			if (sizes)
				sizes[n] = off - last;
			n++;
			last = off;
		}
	}
	if (last < len) {
		if (sizes)
			sizes[n] = len - last;
		n++;
	}
	return n;
}

static void report(const char *what, size_t bytes, double best_s) {
	double mbs = (double) bytes / best_s / 1e6;
	printf("%-36s %10.1f MB/s  %8.2f of 1 GB/s\n", what, mbs, mbs / 1000.0);
}

int main(int argc, char **argv) {
	int passes = 3, first = 1;
	unsigned char *buf;
	size_t len;

	if (argc > 2 && strcmp(argv[1], "--passes") == 0) {
		passes = atoi(argv[2]);
		first = 3;
	}
	if (first >= argc || passes < 1) {
		fprintf(stderr, "usage: chunker-speed [--passes N] FILE...\n");
		return 2;
	}
	if (load(argv + first, argc - first, &buf, &len) < 0 || len == 0)
		return 1;
	printf("%zu bytes loaded from %d files; best of %d passes, one thread\n", len, argc - first, passes);

	static const struct {
		const char *name;
		DedupChunkerParams params;
	} chunkers[] = {
		{ "chunker CDC 8 KiB", DEDUP_CHUNKER_PARAMS_CDC(8u << 10) },
		{ "chunker CDC 16 KiB", DEDUP_CHUNKER_PARAMS_CDC(16u << 10) },
		{ "chunker fixed 16 KiB", DEDUP_CHUNKER_PARAMS_FIXED(16u << 10) },
	};
	for (size_t k = 0; k < sizeof(chunkers) / sizeof(chunkers[0]); k++) {
		double best = 1e30;
		size_t n = 0;
		for (int p = 0; p < passes; p++) {
			double t = cpu_now_s();
			n = chunk(&chunkers[k].params, buf, len, NULL);
			t = cpu_now_s() - t;
			if (t < best)
				best = t;
		}
		char label[64];
		snprintf(label, sizeof(label), "%s (%zu B avg)", chunkers[k].name, len / n);
		report(label, len, best);
	}

	const DedupChunkerParams cdc16 = DEDUP_CHUNKER_PARAMS_CDC(16u << 10);
	size_t n = chunk(&cdc16, buf, len, NULL);
	size_t *sizes = calloc(n, sizeof(*sizes));
	DedupHasher *h = NULL;
	ZSTD_CCtx *z = ZSTD_createCCtx();
	if (!sizes || dedup_hasher_new(&h) < 0 || !z) {
		fprintf(stderr, "chunker-speed: out of memory\n");
		return 1;
	}
	chunk(&cdc16, buf, len, sizes);

	double best = 1e30;
	for (int p = 0; p < passes; p++) {
		double t = cpu_now_s();
		size_t off = 0;
		for (size_t k = 0; k < n; k++) {
			DedupChunkId id;
			dedup_hasher_digest(h, buf + off, sizes[k], &id);
			off += sizes[k];
		}
		t = cpu_now_s() - t;
		if (t < best)
			best = t;
	}
	report("SHA-256 of 16 KiB chunks", len, best);

	best = 1e30;
	for (int p = 0; p < passes; p++) {
		double t = cpu_now_s();
		hash_sink = XXH3_64bits(buf, len);
		t = cpu_now_s() - t;
		if (t < best)
			best = t;
	}
	report("XXH3-64", len, best);

	/* Each level's frames are kept so that decompression is timed on what that level wrote. */
	static const int levels[] = { 1, 3 };
	ZSTD_DCtx *dz = ZSTD_createDCtx();
	size_t zcap = 0;
	for (size_t k = 0; k < n; k++)
		zcap += ZSTD_compressBound(sizes[k]);
	unsigned char *frames = malloc(zcap), *plain = malloc(DEDUP_CHUNK_SIZE_LIMIT_MAX);
	size_t *fsizes = calloc(n, sizeof(*fsizes));
	if (!dz || !frames || !plain || !fsizes) {
		fprintf(stderr, "chunker-speed: out of memory\n");
		return 1;
	}
	for (size_t l = 0; l < sizeof(levels) / sizeof(levels[0]); l++) {
		best = 1e30;
		size_t packed = 0;
		for (int p = 0; p < passes; p++) {
			double t = cpu_now_s();
			size_t off = 0;
			packed = 0;
			for (size_t k = 0; k < n; k++) {
				size_t c = ZSTD_compressCCtx(z, frames + packed, zcap - packed, buf + off, sizes[k], levels[l]);
				if (ZSTD_isError(c)) {
					fprintf(stderr, "chunker-speed: zstd: %s\n", ZSTD_getErrorName(c));
					return 1;
				}
				fsizes[k] = c;
				packed += c;
				off += sizes[k];
			}
			t = cpu_now_s() - t;
			if (t < best)
				best = t;
		}
		char label[64];
		snprintf(label, sizeof(label), "zstd -%d of chunks (%.2fx)", levels[l], (double) len / (double) packed);
		report(label, len, best);

		best = 1e30;
		for (int p = 0; p < passes; p++) {
			double t = cpu_now_s();
			size_t at = 0;
			for (size_t k = 0; k < n; k++) {
				size_t d = ZSTD_decompressDCtx(dz, plain, DEDUP_CHUNK_SIZE_LIMIT_MAX, frames + at, fsizes[k]);
				if (ZSTD_isError(d) || d != sizes[k]) {
					fprintf(stderr, "chunker-speed: zstd decompression failed\n");
					return 1;
				}
				at += fsizes[k];
			}
			t = cpu_now_s() - t;
			if (t < best)
				best = t;
		}
		snprintf(label, sizeof(label), "zstd -%d chunks decompressed", levels[l]);
		report(label, len, best);
	}
	free(fsizes);
	free(plain);
	free(frames);
	ZSTD_freeDCtx(dz);

	ZSTD_freeCCtx(z);
	dedup_hasher_free(h);
	free(sizes);
	free(buf);
	return 0;
}
