/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * seqio: the I/O engine of bench-archivelog.  The fratier mount and the
 * native hot-tier directory are driven by this one program so that any
 * difference in the figures comes from the filesystem, not from the tool.
 *
 *   seqio write SIZE FILE...   one writer per FILE, SIZE bytes each, in
 *                              1 MiB write()s, fsync() before close()
 *   seqio read FILE...         one reader per FILE, 1 MiB read()s to EOF
 *   seqio series SIZE SEED FILE...
 *                              one writer, the FILEs one after another,
 *                              SIZE bytes each, fsync() before each close()
 *                              (an archiver, or one RMAN channel, writing
 *                              file after file while the earlier ones seal);
 *                              file k's content is generated from SEED + k,
 *                              so that no file of a series or of another
 *                              series (another SEED) dedups against it
 *
 * Workers are forked first and released together through a pipe, so the
 * elapsed time (printed by the parent as "workers=N bytes=B ns=T") covers
 * open() to close() of the slowest worker and not the fork()s.
 *
 * Content: 512-byte blocks like an Oracle redo log (a 16-byte header with
 * a block number, a body half pseudo-random and half repetitive record
 * text).  One 1 MiB buffer is generated once and reused; only the block
 * headers are re-stamped per write, so every MiB differs (nothing for a
 * dedup or zero-detection layer to shortcut) while the writer costs
 * almost no CPU.  A reader checks the first header of each MiB, so a
 * filesystem returning the wrong bytes cannot look fast.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SEQIO_BLOCK_SIZE (1024u * 1024u)
#define SEQIO_REDO_BLOCK 512u
#define SEQIO_WORKERS_MAX 64
#define SEQIO_SIZE_MAX (UINT64_C(1) << 44) /* 16 TiB per file: a typo guard */

/* Mirrors the first bytes of an Oracle redo block header: type, format, block number. */
#define SEQIO_HDR_TYPE 0x01
#define SEQIO_HDR_FORMAT 0x22

static uint64_t now_ns(void) {
	struct timespec ts;

	(void) clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * UINT64_C(1000000000) + (uint64_t) ts.tv_nsec;
}

static uint64_t xorshift64(uint64_t *s) {
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void buffer_fill(uint8_t *buf, uint32_t seed) {
	static const char record[] =
		"REDO RECORD - Thread:1 RBA: LEN: 0x0230 VLD: 0x01 CON_UID: 0 "
		"CHANGE #1 TYP:0 CLS:1 AFN:7 DBA:0x01c0008b OBJ:73211 SCN:0x0000000000e2b1f4 "
		"SEQ:2 OP:11.5 ENC:0 RBL:0 FLG:0x0000 KTB Redo op: 0x11 ver: 0x01 ";
	uint64_t s = UINT64_C(0x9e3779b97f4a7c15) ^ seed;

	for (size_t off = 0; off < SEQIO_BLOCK_SIZE; off += SEQIO_REDO_BLOCK) {
		uint8_t *blk = buf + off;
		size_t half = SEQIO_REDO_BLOCK / 2;

		memset(blk, 0, 16);
		blk[0] = SEQIO_HDR_TYPE;
		blk[1] = SEQIO_HDR_FORMAT;
		memcpy(blk + 8, &seed, sizeof(seed));
		for (size_t i = 16; i < half; i += 8) {
			uint64_t r = xorshift64(&s);
			memcpy(blk + i, &r, 8);
		}
		for (size_t i = half; i < SEQIO_REDO_BLOCK; i++)
			blk[i] = (uint8_t) record[(i + off / SEQIO_REDO_BLOCK) % (sizeof(record) - 1)];
	}
}

static void buffer_stamp(uint8_t *buf, uint64_t mib) {
	for (uint32_t b = 0; b < SEQIO_BLOCK_SIZE / SEQIO_REDO_BLOCK; b++) {
		uint32_t blockno = (uint32_t) (mib * (SEQIO_BLOCK_SIZE / SEQIO_REDO_BLOCK) + b);
		memcpy(buf + (size_t) b * SEQIO_REDO_BLOCK + 4, &blockno, sizeof(blockno));
	}
}

static int write_full(int fd, const uint8_t *p, size_t n) {
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			return -EIO;
		p += k;
		n -= (size_t) k;
	}
	return 0;
}

/* Returns bytes read (< n only at EOF) or negative errno. */
static ssize_t read_full(int fd, uint8_t *p, size_t n) {
	size_t got = 0;

	while (got < n) {
		ssize_t k = read(fd, p + got, n - got);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			break;
		got += (size_t) k;
	}
	return (ssize_t) got;
}

/* buf must hold buffer_fill() output. */
static int worker_write(const char *path, uint64_t size, uint8_t *buf) {
	int fd, r;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		r = -errno;
		fprintf(stderr, "seqio: open %s: %s\n", path, strerror(-r));
		return r;
	}
	for (uint64_t mib = 0; mib < size / SEQIO_BLOCK_SIZE; mib++) {
		buffer_stamp(buf, mib);
		r = write_full(fd, buf, SEQIO_BLOCK_SIZE);
		if (r < 0) {
			fprintf(stderr, "seqio: write %s at MiB %" PRIu64 ": %s\n", path, mib, strerror(-r));
			(void) close(fd);
			return r;
		}
	}
	if (fsync(fd) < 0) {
		r = -errno;
		fprintf(stderr, "seqio: fsync %s: %s\n", path, strerror(-r));
		(void) close(fd);
		return r;
	}
	/* close() is where FUSE sends FLUSH: an error there is a lost write. */
	if (close(fd) < 0) {
		r = -errno;
		fprintf(stderr, "seqio: close %s: %s\n", path, strerror(-r));
		return r;
	}
	return 0;
}

static int worker_read(const char *path, uint8_t *buf) {
	uint64_t mib = 0;
	int fd, r = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		fprintf(stderr, "seqio: open %s: %s\n", path, strerror(-r));
		return r;
	}
	for (;; mib++) {
		uint32_t blockno;
		ssize_t n = read_full(fd, buf, SEQIO_BLOCK_SIZE);

		if (n < 0) {
			r = (int) n;
			fprintf(stderr, "seqio: read %s at MiB %" PRIu64 ": %s\n", path, mib, strerror(-r));
			break;
		}
		if (n == 0)
			break;
		if ((size_t) n >= 16)
			memcpy(&blockno, buf + 4, sizeof(blockno));
		if ((size_t) n < 16 || buf[0] != SEQIO_HDR_TYPE || buf[1] != SEQIO_HDR_FORMAT ||
		    blockno != (uint32_t) (mib * (SEQIO_BLOCK_SIZE / SEQIO_REDO_BLOCK))) {
			fprintf(stderr, "seqio: %s: MiB %" PRIu64 " does not hold what seqio wrote\n", path, mib);
			r = -EBADMSG;
			break;
		}
		if ((size_t) n < SEQIO_BLOCK_SIZE)
			break;
	}
	(void) close(fd);
	return r;
}

static int parse_size(const char *s, uint64_t *ret) {
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-')
		return -EINVAL;
	if (v == 0 || v > SEQIO_SIZE_MAX || v % SEQIO_BLOCK_SIZE != 0)
		return -ERANGE;
	*ret = v;
	return 0;
}

static int file_size(const char *path, uint64_t *ret) {
	off_t end;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	end = lseek(fd, 0, SEEK_END);
	(void) close(fd);
	if (end < 0)
		return -errno;
	*ret = (uint64_t) end;
	return 0;
}

/* seqio series SIZE SEED FILE...: one process, so the clock covers the first open() to the last close(). */
static int series(int argc, char **argv) {
	uint64_t size, start, elapsed;
	unsigned long seed;
	uint8_t *buf = NULL;
	char *end;
	int nfiles = argc - 4;

	if (parse_size(argv[2], &size) < 0) {
		fprintf(stderr, "seqio: bad size %s: want bytes, a multiple of %u\n", argv[2], SEQIO_BLOCK_SIZE);
		return 2;
	}
	errno = 0;
	seed = strtoul(argv[3], &end, 10);
	if (errno != 0 || end == argv[3] || *end != '\0' || seed > UINT32_MAX - SEQIO_WORKERS_MAX) {
		fprintf(stderr, "seqio: bad seed %s\n", argv[3]);
		return 2;
	}
	if (nfiles > SEQIO_WORKERS_MAX) {
		fprintf(stderr, "seqio: at most %d files\n", SEQIO_WORKERS_MAX);
		return 2;
	}
	if (posix_memalign((void **) &buf, 4096, SEQIO_BLOCK_SIZE) != 0) {
		fprintf(stderr, "seqio: out of memory\n");
		return 1;
	}
	start = now_ns();
	for (int k = 0; k < nfiles; k++) {
		/* About a millisecond per file: an archiver's next file has new content too. */
		buffer_fill(buf, (uint32_t) (seed + (unsigned long) k));
		if (worker_write(argv[4 + k], size, buf) < 0) {
			free(buf);
			return 1;
		}
	}
	elapsed = now_ns() - start;
	free(buf);
	printf("workers=1 bytes=%" PRIu64 " ns=%" PRIu64 "\n", size * (uint64_t) nfiles, elapsed);
	return 0;
}

static void usage(void) {
	fprintf(stderr,
		"usage: seqio write SIZE FILE...   (SIZE in bytes, a multiple of 1 MiB)\n"
		"       seqio read FILE...\n"
		"       seqio series SIZE SEED FILE...\n");
}

int main(int argc, char **argv) {
	pid_t pids[SEQIO_WORKERS_MAX];
	uint64_t size = 0, total = 0, start, elapsed;
	int barrier[2], first, nworkers, failed = 0;
	bool writing;

	if (argc >= 5 && strcmp(argv[1], "series") == 0)
		return series(argc, argv);
	if (argc >= 4 && strcmp(argv[1], "write") == 0) {
		writing = true;
		if (parse_size(argv[2], &size) < 0) {
			fprintf(stderr, "seqio: bad size %s: want bytes, a multiple of %u\n", argv[2],
				SEQIO_BLOCK_SIZE);
			return 2;
		}
		first = 3;
	} else if (argc >= 3 && strcmp(argv[1], "read") == 0) {
		writing = false;
		first = 2;
	} else {
		usage();
		return 2;
	}
	nworkers = argc - first;
	if (nworkers > SEQIO_WORKERS_MAX) {
		fprintf(stderr, "seqio: at most %d files\n", SEQIO_WORKERS_MAX);
		return 2;
	}
	for (int i = 0; i < nworkers; i++) {
		uint64_t sz = size;

		if (!writing) {
			int r = file_size(argv[first + i], &sz);
			if (r < 0) {
				fprintf(stderr, "seqio: %s: %s\n", argv[first + i], strerror(-r));
				return 1;
			}
		}
		total += sz;
	}

	if (pipe2(barrier, O_CLOEXEC) < 0) {
		perror("seqio: pipe");
		return 1;
	}
	for (int i = 0; i < nworkers; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("seqio: fork");
			/* Closing the barrier releases the workers already forked; they are reaped below. */
			nworkers = i;
			failed = 1;
			break;
		}
		if (pids[i] == 0) {
			uint8_t *buf = NULL;
			char c;
			int r;

			(void) close(barrier[1]);
			/* Page-aligned so the same buffer would also serve O_DIRECT. */
			if (posix_memalign((void **) &buf, 4096, SEQIO_BLOCK_SIZE) != 0) {
				fprintf(stderr, "seqio: out of memory\n");
				_exit(1);
			}
			/* Generate content and fault the buffer in before the clock starts. */
			if (writing)
				buffer_fill(buf, (uint32_t) i + 1);
			else
				memset(buf, 0, SEQIO_BLOCK_SIZE);
			while (read(barrier[0], &c, 1) < 0 && errno == EINTR)
				;
			r = writing ? worker_write(argv[first + i], size, buf)
				    : worker_read(argv[first + i], buf);
			_exit(r < 0 ? 1 : 0);
		}
	}
	(void) close(barrier[0]);
	/* Give every worker time to reach the barrier (allocation + page faults). */
	(void) usleep(50 * 1000);
	start = now_ns();
	(void) close(barrier[1]);
	for (int i = 0; i < nworkers; i++) {
		int status;

		while (waitpid(pids[i], &status, 0) < 0) {
			if (errno != EINTR) {
				perror("seqio: waitpid");
				return 1;
			}
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed = 1;
	}
	elapsed = now_ns() - start;
	if (failed)
		return 1;
	printf("workers=%d bytes=%" PRIu64 " ns=%" PRIu64 "\n", nworkers, total, elapsed);
	return 0;
}
