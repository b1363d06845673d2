/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Standalone driver for the fuzz targets: replays every corpus file named on
 * the command line (files or directories), then feeds a deterministic stream
 * of mutations of them (bit flips, truncations, splices, random bytes).  A
 * target signals a bug by crashing or aborting; garbage must simply be
 * rejected.  FUZZ_ITERATIONS overrides the number of mutations.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/fuzz/fuzz.h"

#define FUZZ_INPUT_MAX (4u << 20)
#define FUZZ_CORPUS_MAX 4096

typedef struct Input {
	uint8_t *data;
	size_t size;
} Input;

static Input corpus[FUZZ_CORPUS_MAX];
static size_t n_corpus;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void) {
	/* splitmix64: deterministic, so a failing iteration can be replayed. */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int load_file(const char *path) {
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t) st.st_size > FUZZ_INPUT_MAX ||
	    n_corpus >= FUZZ_CORPUS_MAX) {
		close(fd);
		return 0;
	}
	uint8_t *buf = malloc(st.st_size ? (size_t) st.st_size : 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	size_t got = 0;
	while (got < (size_t) st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t) st.st_size - got);
		if (n <= 0)
			break;
		got += (size_t) n;
	}
	close(fd);
	corpus[n_corpus++] = (Input) { buf, got };
	return 0;
}

static int load_path(const char *path) {
	struct stat st;
	if (stat(path, &st) < 0) {
		fprintf(stderr, "fuzz: cannot stat %s: %m\n", path);
		return -errno;
	}
	if (!S_ISDIR(st.st_mode))
		return load_file(path);

	struct dirent **names;
	int n = scandir(path, &names, NULL, alphasort);
	if (n < 0)
		return -errno;
	for (int i = 0; i < n; i++) {
		if (names[i]->d_name[0] != '.') {
			char sub[4096];
			snprintf(sub, sizeof(sub), "%s/%s", path, names[i]->d_name);
			(void) load_file(sub);
		}
		free(names[i]);
	}
	free(names);
	return 0;
}

static void run_one(const uint8_t *data, size_t size) {
	/* A private copy, so a target reading past the end trips ASan. */
	uint8_t *copy = malloc(size ? size : 1);
	if (!copy)
		abort();
	memcpy(copy, data, size);
	(void) LLVMFuzzerTestOneInput(copy, size);
	free(copy);
}

static size_t mutate(uint8_t *buf, size_t size, size_t cap) {
	unsigned ops = 1 + rng_next() % 4;
	for (unsigned k = 0; k < ops; k++) {
		switch (rng_next() % 6) {
		case 0: /* flip a bit */
			if (size)
				buf[rng_next() % size] ^= (uint8_t) (1u << (rng_next() % 8));
			break;
		case 1: /* random byte */
			if (size)
				buf[rng_next() % size] = (uint8_t) rng_next();
			break;
		case 2: /* truncate */
			if (size)
				size = rng_next() % size;
			break;
		case 3: /* extend with random bytes */
			for (unsigned n = rng_next() % 64; n > 0 && size < cap; n--)
				buf[size++] = (uint8_t) rng_next();
			break;
		case 4: /* interesting little-endian integers */
			if (size >= 8) {
				static const uint64_t v[] = { 0, 1, 0x7f, 0x80, 0xff, 0xffff, 0x7fffffff,
							      0xffffffff, UINT64_MAX, UINT64_MAX / 2 };
				uint64_t x = v[rng_next() % (sizeof(v) / sizeof(v[0]))];
				size_t at = rng_next() % (size - 7);
				memcpy(buf + at, &x, 1 + rng_next() % 8);
			}
			break;
		case 5: /* splice in a piece of another corpus entry */
			if (n_corpus && size) {
				const Input *o = &corpus[rng_next() % n_corpus];
				if (o->size) {
					size_t from = rng_next() % o->size, at = rng_next() % size;
					size_t n = ((o->size - from) < (size - at) ? (o->size - from) : (size - at));
					memcpy(buf + at, o->data + from, n);
				}
			}
			break;
		}
	}
	return size;
}

int main(int argc, char **argv) {
	unsigned long iterations = 20000;
	const char *env = getenv("FUZZ_ITERATIONS");
	if (env)
		iterations = strtoul(env, NULL, 10);

	for (int i = 1; i < argc; i++)
		if (load_path(argv[i]) < 0)
			return EXIT_FAILURE;

	for (size_t i = 0; i < n_corpus; i++)
		run_one(corpus[i].data, corpus[i].size);

	size_t cap = 1 << 16;
	for (size_t i = 0; i < n_corpus; i++)
		if (corpus[i].size + 64 > cap)
			cap = corpus[i].size + 64;
	uint8_t *buf = malloc(cap);
	if (!buf)
		return EXIT_FAILURE;

	for (unsigned long it = 0; it < iterations; it++) {
		size_t size = 0;
		if (n_corpus && rng_next() % 8 != 0) {
			const Input *in = &corpus[rng_next() % n_corpus];
			memcpy(buf, in->data, in->size);
			size = in->size;
		} else {
			size = rng_next() % 512;
			for (size_t k = 0; k < size; k++)
				buf[k] = (uint8_t) rng_next();
		}
		size = mutate(buf, size, cap);
		run_one(buf, size);
	}
	free(buf);

	printf("fuzz: %zu corpus inputs, %lu mutations, no crash\n", n_corpus, iterations);
	for (size_t i = 0; i < n_corpus; i++)
		free(corpus[i].data);
	return EXIT_SUCCESS;
}
