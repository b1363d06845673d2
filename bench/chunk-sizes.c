/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * chunk-sizes — what each chunking choice would store for a set of files,
 * to choose the default average chunk size by measurement (bench, not test).
 *
 *   chunk-sizes FILE...
 *
 * For content-defined chunking at 4..64 KiB average and fixed 8/16 KiB
 * chunks, prints the number of chunks, the unique bytes (SHA-256 identity),
 * the unique bytes after zstd -3 per chunk (what fratier stores, less frame
 * headers), the reduction against the logical size, and the chunk index the
 * choice implies (chunks x bytes of index per chunk).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "dedup/chunker.h"
#include "dedup/fingerprint.h"

/* Catalog row plus in-memory filter, per unique chunk, as stated in the README. */
#define INDEX_BYTES_PER_CHUNK 120

typedef struct Set {
	DedupChunkId *slots;
	size_t cap, n;
} Set;

/* Returns true if id was new. */
static bool set_add(Set *s, const DedupChunkId *id) {
	if (s->n * 2 >= s->cap) {
		Set bigger = { .cap = s->cap ? s->cap * 2 : 1 << 16 };
		bigger.slots = calloc(bigger.cap, sizeof(DedupChunkId));
		if (!bigger.slots)
			abort();
		for (size_t k = 0; k < s->cap; k++) {
			static const DedupChunkId zero;
			if (memcmp(&s->slots[k], &zero, sizeof(zero)) != 0)
				set_add(&bigger, &s->slots[k]);
		}
		free(s->slots);
		*s = bigger;
	}
	uint64_t h;
	memcpy(&h, id, sizeof(h));
	for (size_t at = h & (s->cap - 1);; at = (at + 1) & (s->cap - 1)) {
		static const DedupChunkId zero;
		if (memcmp(&s->slots[at], &zero, sizeof(zero)) == 0) {
			s->slots[at] = *id;
			s->n++;
			return true;
		}
		if (memcmp(&s->slots[at], id, sizeof(*id)) == 0)
			return false;
	}
}

typedef struct Result {
	const char *name;
	DedupChunkerParams params;
	uint64_t chunks, unique, unique_compressed;
	Set set;
} Result;

static void account(Result *r, DedupHasher *h, ZSTD_CCtx *z, void *zbuf, size_t zcap, const uint8_t *p, size_t n) {
	DedupChunkId id;
	r->chunks++;
	if (dedup_hasher_digest(h, p, n, &id) < 0)
		abort();
	if (!set_add(&r->set, &id))
		return;
	r->unique += n;
	size_t c = ZSTD_compressCCtx(z, zbuf, zcap, p, n, 3);
	r->unique_compressed += ZSTD_isError(c) || c >= n ? n : c;
}

int main(int argc, char **argv) {
	Result results[] = {
		{ "cdc 4K", DEDUP_CHUNKER_PARAMS_CDC(4096) },
		{ "cdc 8K", DEDUP_CHUNKER_PARAMS_CDC(8192) },
		{ "cdc 16K", DEDUP_CHUNKER_PARAMS_CDC(16384) },
		{ "cdc 32K", DEDUP_CHUNKER_PARAMS_CDC(32768) },
		{ "cdc 64K", DEDUP_CHUNKER_PARAMS_CDC(65536) },
		{ "fixed 8K", DEDUP_CHUNKER_PARAMS_FIXED(8192) },
		{ "fixed 16K", DEDUP_CHUNKER_PARAMS_FIXED(16384) },
	};
	const size_t n_results = sizeof(results) / sizeof(results[0]);
	uint64_t logical = 0;
	DedupHasher *h;
	ZSTD_CCtx *z = ZSTD_createCCtx();
	size_t zcap = ZSTD_compressBound(1 << 20);
	void *zbuf = malloc(zcap);

	if (argc < 2) {
		fprintf(stderr, "usage: chunk-sizes FILE...\n");
		return 2;
	}
	if (!z || !zbuf || dedup_hasher_new(&h) < 0)
		return 1;

	for (int a = 1; a < argc; a++) {
		int fd = open(argv[a], O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0) {
			fprintf(stderr, "chunk-sizes: %s: %s\n", argv[a], strerror(errno));
			return 1;
		}
		uint8_t *data = malloc(st.st_size ? (size_t) st.st_size : 1);
		size_t got = 0;
		while (data && got < (size_t) st.st_size) {
			ssize_t n = read(fd, data + got, (size_t) st.st_size - got);
			if (n <= 0)
				break;
			got += (size_t) n;
		}
		close(fd);
		if (!data || got != (size_t) st.st_size)
			return 1;
		logical += got;
		for (size_t k = 0; k < n_results; k++) {
			size_t *sizes = NULL, n_sizes = 0, off = 0;
			if (dedup_chunker_split(&results[k].params, data, got, &sizes, &n_sizes) < 0)
				return 1;
			for (size_t c = 0; c < n_sizes; c++) {
				account(&results[k], h, z, zbuf, zcap, data + off, sizes[c]);
				off += sizes[c];
			}
			free(sizes);
		}
		free(data);
	}

	printf("%-10s %10s %14s %14s %9s %9s %12s\n", "chunking", "chunks", "unique", "unique+zstd", "dedup", "overall",
	       "index RAM");
	for (size_t k = 0; k < n_results; k++) {
		Result *r = &results[k];
		printf("%-10s %10llu %14llu %14llu %8.2fx %8.2fx %10.1f MB\n", r->name, (unsigned long long) r->chunks,
		       (unsigned long long) r->unique, (unsigned long long) r->unique_compressed,
		       (double) logical / (double) r->unique, (double) logical / (double) r->unique_compressed,
		       (double) r->set.n * INDEX_BYTES_PER_CHUNK / 1e6);
	}
	printf("logical bytes: %llu\n", (unsigned long long) logical);
	return 0;
}
