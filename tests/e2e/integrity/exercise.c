/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fratier-exercise: a data-integrity exerciser for a directory (normally a
 * fratierfs mount).
 *
 * It keeps a fixed set of files f00..fNN and applies a seeded random sequence
 * of operations to them (pwrite at random offsets and sizes, reads, truncate,
 * fallocate punch/zero/allocate, O_APPEND writes, rename and exchange, unlink
 * and recreate, close/reopen, fsync, mmap reads and writes, far-away sparse
 * writes) while mirroring every change in an in-memory model.  Every read is
 * compared byte by byte against the model, and at the end every file is
 * checked in full (size, content, st_size) together with the directory
 * listing.
 *
 * Invariants the program relies on:
 *  1. Every random draw depends only on the seed and the model, never on what
 *     the file system returned, so --verify-only can rebuild the final model
 *     by replaying the seed without doing any I/O and then check the files
 *     (e.g. after a remount).
 *  2. The model never holds bytes beyond a file's size that matter: growing a
 *     file zeroes the new range first, as the kernel does.
 *  3. Long-lived descriptors follow their inode: a rename moves the fd with
 *     the content, and a descriptor whose name goes away (unlink, rename over
 *     it) is checked through the fd while unlinked, then closed.
 *
 * Exit status: 0 all checks passed, 1 a mismatch or unexpected error (the
 * message names seed, op number, file, offset, expected and got), 2 usage.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macros.h"

#define EX_FILES_MAX 64u
/* Bound on files * max-size: the model holds every file in memory. */
#define EX_MODEL_TOTAL_MAX (256ull << 20)
/* Largest single read or write: "1 MiB and a bit", to cross max_write. */
#define EX_IO_MAX ((1ull << 20) + (512ull << 10))
/* Sparse probes write this far out (plus up to 1 GiB) and truncate back. */
#define EX_FAR_BASE (1ull << 36)
#define EX_NAME_MAX 16

typedef enum ExOp {
	EX_OP_WRITE,
	EX_OP_WRITE_HOLE,
	EX_OP_READ,
	EX_OP_READ_FRESH,
	EX_OP_TRUNCATE,
	EX_OP_PUNCH,
	EX_OP_ZERO,
	EX_OP_ALLOCATE,
	EX_OP_APPEND,
	EX_OP_RENAME,
	EX_OP_EXCHANGE,
	EX_OP_UNLINK,
	EX_OP_REOPEN,
	EX_OP_FSYNC,
	EX_OP_MMAP_READ,
	EX_OP_MMAP_WRITE,
	EX_OP_STAT,
	EX_OP_FAR,
	_EX_OP_MAX,
} ExOp;

static const struct {
	const char *name;
	unsigned weight;
} ex_op_table[_EX_OP_MAX] = {
	[EX_OP_WRITE] = { "write", 20 },
	[EX_OP_WRITE_HOLE] = { "write-hole", 4 },
	[EX_OP_READ] = { "read", 14 },
	[EX_OP_READ_FRESH] = { "read-fresh", 4 },
	[EX_OP_TRUNCATE] = { "truncate", 5 },
	[EX_OP_PUNCH] = { "punch-hole", 4 },
	[EX_OP_ZERO] = { "zero-range", 3 },
	[EX_OP_ALLOCATE] = { "allocate", 2 },
	[EX_OP_APPEND] = { "append", 6 },
	[EX_OP_RENAME] = { "rename", 3 },
	[EX_OP_EXCHANGE] = { "exchange", 1 },
	[EX_OP_UNLINK] = { "unlink", 2 },
	[EX_OP_REOPEN] = { "reopen", 4 },
	[EX_OP_FSYNC] = { "fsync", 3 },
	[EX_OP_MMAP_READ] = { "mmap-read", 3 },
	[EX_OP_MMAP_WRITE] = { "mmap-write", 2 },
	[EX_OP_STAT] = { "stat", 3 },
	[EX_OP_FAR] = { "far-write", 1 },
};

typedef struct Slot {
	bool exists;
	uint64_t size;
	uint8_t *data; /* max_size bytes; only [0, size) is meaningful */
	int fd;        /* long-lived O_RDWR descriptor or -1; live mode only */
} Slot;

typedef struct Exerciser {
	const char *dir;
	int dirfd;
	uint64_t seed;
	uint64_t nops;
	unsigned nfiles;
	uint64_t max_size;
	bool verify_only;
	bool verbose;
	long page;

	uint64_t rng;
	uint64_t op;         /* number of the op being run, for reports */
	const char *op_name; /* its name, or the phase after the run */

	Slot slots[EX_FILES_MAX];
	uint8_t *buf; /* EX_IO_MAX scratch for reads */

	uint64_t bytes_written;
	uint64_t bytes_checked;
	uint64_t op_counts[_EX_OP_MAX];
} Exerciser;

static uint64_t splitmix64(uint64_t *state) {
	uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static uint64_t ex_rand(Exerciser *ex) {
	return splitmix64(&ex->rng);
}

/* Uniform in [0, n); 0 when n is 0. */
static uint64_t ex_below(Exerciser *ex, uint64_t n) {
	uint64_t r = ex_rand(ex);
	return n ? r % n : 0;
}

static void slot_name(unsigned i, char ret[static EX_NAME_MAX]) {
	snprintf(ret, EX_NAME_MAX, "f%02u", i);
}

static _printf_(3, 4) _noreturn_ void ex_fail(const Exerciser *ex, int slot, const char *fmt, ...) {
	char name[EX_NAME_MAX] = "-";
	va_list ap;

	if (slot >= 0)
		slot_name((unsigned) slot, name);
	fprintf(stderr, "FAIL seed=%" PRIu64 " op=%" PRIu64 " (%s) dir=%s file=%s: ", ex->seed, ex->op,
		ex->op_name, ex->dir, name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* Reports the first differing byte with 16 bytes of context on each side. */
static _noreturn_ void ex_fail_mismatch(const Exerciser *ex, int slot, const char *how, uint64_t file_off,
					const uint8_t *expected, const uint8_t *got, size_t len) {
	size_t i = 0, from, to;

	while (i < len && expected[i] == got[i])
		i++;
	from = i >= 16 ? i - 16 : 0;
	to = MIN(len, i + 16);
	fprintf(stderr, "MISMATCH via %s at offset %" PRIu64 " (byte %zu of a %zu-byte range at %" PRIu64 ")\n",
		how, file_off + i, i, len, file_off);
	fprintf(stderr, "  expected from %" PRIu64 ":", file_off + from);
	for (size_t j = from; j < to; j++)
		fprintf(stderr, "%s%02x", j == i ? " [" : " ", expected[j]);
	fprintf(stderr, "\n  got      from %" PRIu64 ":", file_off + from);
	for (size_t j = from; j < to; j++)
		fprintf(stderr, "%s%02x", j == i ? " [" : " ", got[j]);
	fputc('\n', stderr);
	ex_fail(ex, slot, "content mismatch at offset %" PRIu64 ": expected 0x%02x, got 0x%02x", file_off + i,
		expected[i], got[i]);
}

static void ex_trace(const Exerciser *ex, int slot, const char *fmt, ...) _printf_(3, 4);
static void ex_trace(const Exerciser *ex, int slot, const char *fmt, ...) {
	char name[EX_NAME_MAX];
	va_list ap;

	if (!ex->verbose)
		return;
	slot_name((unsigned) slot, name);
	fprintf(stderr, "op %" PRIu64 " %s %s", ex->op, ex->op_name, name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Fills p with bytes drawn from one rng value, so replay costs one draw per op. */
static void ex_fill(Exerciser *ex, uint8_t *p, size_t len) {
	uint64_t state = ex_rand(ex);

	while (len >= 8) {
		uint64_t v = splitmix64(&state);
		memcpy(p, &v, 8);
		p += 8;
		len -= 8;
	}
	if (len > 0) {
		uint64_t v = splitmix64(&state);
		memcpy(p, &v, len);
	}
}

/* I/O sizes: many small, many up to 1 MiB, some page multiples, some over 1 MiB. */
static uint64_t ex_pick_len(Exerciser *ex) {
	uint64_t c = ex_below(ex, 100);

	if (c < 10)
		return 1 + ex_below(ex, 16);
	if (c < 45)
		return 1 + ex_below(ex, 65536);
	if (c < 80)
		return 1 + ex_below(ex, 1u << 20);
	if (c < 90)
		return UINT64_C(4096) << ex_below(ex, 9);
	return (UINT64_C(1) << 20) + 1 + ex_below(ex, EX_IO_MAX - (UINT64_C(1) << 20));
}

/* An offset in [0, limit], biased towards page boundaries and EOF. */
static uint64_t ex_pick_off(Exerciser *ex, uint64_t size, uint64_t limit) {
	uint64_t c = ex_below(ex, 8), off;

	if (c < 4)
		off = ex_below(ex, size + 1);
	else if (c == 4)
		off = size;
	else if (c == 5)
		off = ex_below(ex, size / 4096 + 1) * 4096;
	else if (c == 6)
		off = size > 0 ? size - 1 - ex_below(ex, MIN(size, 4096)) : 0;
	else
		off = ex_below(ex, limit + 1);
	return MIN(off, limit);
}

static void model_grow(Slot *s, uint64_t new_size) {
	if (new_size > s->size) {
		memset(s->data + s->size, 0, new_size - s->size);
		s->size = new_size;
	}
}

static void model_zero(Slot *s, uint64_t off, uint64_t len) {
	if (off >= s->size)
		return;
	memset(s->data + off, 0, MIN(len, s->size - off));
}

/* Clamps [*off, *off + *len) into the model's [0, max_size). */
static void ex_clamp(const Exerciser *ex, uint64_t *off, uint64_t *len) {
	if (*off >= ex->max_size)
		*off = ex->max_size - 1;
	if (*len > ex->max_size - *off)
		*len = ex->max_size - *off;
}

static void io_pwrite(const Exerciser *ex, int slot, int fd, const uint8_t *p, size_t len, uint64_t off) {
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, (off_t) off);
		if (n < 0)
			ex_fail(ex, slot, "pwrite(%zu @ %" PRIu64 "): %m", len, off);
		if (n == 0)
			ex_fail(ex, slot, "pwrite(%zu @ %" PRIu64 ") wrote nothing", len, off);
		p += n;
		len -= (size_t) n;
		off += (uint64_t) n;
	}
}

/* Reads until len bytes or EOF; returns the count. */
static size_t io_pread(const Exerciser *ex, int slot, int fd, uint8_t *p, size_t len, uint64_t off) {
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, p + done, len - done, (off_t) (off + done));
		if (n < 0)
			ex_fail(ex, slot, "pread(%zu @ %" PRIu64 "): %m", len - done, off + done);
		if (n == 0)
			break;
		done += (size_t) n;
	}
	return done;
}

static void io_check_size(const Exerciser *ex, int slot, int fd, uint64_t expected, const char *how) {
	struct stat st;

	if (fstat(fd, &st) < 0)
		ex_fail(ex, slot, "fstat (%s): %m", how);
	if (!S_ISREG(st.st_mode))
		ex_fail(ex, slot, "not a regular file (%s): mode 0%o", how, (unsigned) st.st_mode);
	if ((uint64_t) st.st_size != expected)
		ex_fail(ex, slot, "st_size (%s): expected %" PRIu64 ", got %" PRIu64, how, expected,
			(uint64_t) st.st_size);
}

/* Reads [off, off+len) through fd and compares with the model of slot s. */
static void io_check_range(Exerciser *ex, int slot, int fd, const Slot *s, uint64_t off, uint64_t len,
			   const char *how) {
	uint64_t expect = off < s->size ? MIN(len, s->size - off) : 0;
	size_t got;

	got = io_pread(ex, slot, fd, ex->buf, len, off);
	if (got != expect)
		ex_fail(ex, slot, "%s of %" PRIu64 " @ %" PRIu64 " returned %zu bytes, expected %" PRIu64
			" (model size %" PRIu64 ")", how, len, off, got, expect, s->size);
	if (memcmp(ex->buf, s->data + off, got) != 0)
		ex_fail_mismatch(ex, slot, how, off, s->data + off, ex->buf, got);
	ex->bytes_checked += got;
}

/* Checks a whole file through fd: st_size, every byte, and EOF right after. */
static void io_check_file(Exerciser *ex, int slot, int fd, const Slot *s, const char *how) {
	io_check_size(ex, slot, fd, s->size, how);
	for (uint64_t off = 0; off < s->size; off += EX_IO_MAX)
		io_check_range(ex, slot, fd, s, off, MIN(EX_IO_MAX, s->size - off), how);
	if (io_pread(ex, slot, fd, ex->buf, 1, s->size) != 0)
		ex_fail(ex, slot, "%s: data beyond EOF %" PRIu64, how, s->size);
}

static int io_open(const Exerciser *ex, int slot, int flags) {
	char name[EX_NAME_MAX];
	int fd;

	slot_name((unsigned) slot, name);
	fd = openat(ex->dirfd, name, flags | O_CLOEXEC, 0644);
	if (fd < 0)
		ex_fail(ex, slot, "open(flags 0%o): %m", (unsigned) flags);
	return fd;
}

/* The slot's long-lived descriptor, opened on first use. */
static int slot_fd(Exerciser *ex, int slot) {
	Slot *s = &ex->slots[slot];

	if (s->fd < 0)
		s->fd = io_open(ex, slot, O_RDWR);
	return s->fd;
}

static void slot_close(Exerciser *ex, int slot) {
	Slot *s = &ex->slots[slot];

	if (s->fd >= 0 && close(s->fd) < 0)
		ex_fail(ex, slot, "close: %m");
	s->fd = -1;
}

/*
 * A descriptor whose name has just gone away must still read the old content
 * until it is closed.
 */
static void slot_drop_orphan(Exerciser *ex, int slot, int fd, const Slot *model) {
	if (fd < 0)
		return;
	io_check_file(ex, slot, fd, model, "unlinked fd");
	if (close(fd) < 0)
		ex_fail(ex, slot, "close of unlinked fd: %m");
}

static void slot_create(Exerciser *ex, int slot) {
	Slot *s = &ex->slots[slot];

	s->exists = true;
	s->size = 0;
	if (!ex->verify_only)
		s->fd = io_open(ex, slot, O_RDWR | O_CREAT | O_EXCL);
}

static void op_write(Exerciser *ex, int slot, bool hole) {
	Slot *s = &ex->slots[slot];
	uint64_t off, len;

	if (hole)
		off = s->size + 1 + ex_below(ex, MAX(ex->max_size / 4, 1));
	else
		off = ex_pick_off(ex, s->size, ex->max_size - 1);
	len = ex_pick_len(ex);
	ex_clamp(ex, &off, &len);
	model_grow(s, off);
	ex_fill(ex, s->data + off, len);
	model_grow(s, off + len);
	ex_trace(ex, slot, " %" PRIu64 " @ %" PRIu64, len, off);
	ex->bytes_written += len;
	if (!ex->verify_only)
		io_pwrite(ex, slot, slot_fd(ex, slot), s->data + off, len, off);
}

static void op_read(Exerciser *ex, int slot, bool fresh) {
	Slot *s = &ex->slots[slot];
	uint64_t off = ex_below(ex, s->size + 8192), len = ex_pick_len(ex);
	bool drop = ex_below(ex, 2);

	ex_trace(ex, slot, " %" PRIu64 " @ %" PRIu64 "%s", len, off, fresh && drop ? " (cache dropped)" : "");
	if (ex->verify_only)
		return;
	if (fresh) {
		_cleanup_close_ int fd = io_open(ex, slot, O_RDONLY);
		/* Drops the clean page cache so that the read reaches the file system itself. */
		if (drop) {
			int r = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			if (r != 0)
				ex_fail(ex, slot, "posix_fadvise(DONTNEED): %s", strerror(r));
		}
		io_check_range(ex, slot, fd, s, off, len,
			       drop ? "read on a new fd after dropping the cache" : "read on a new fd");
		if (close(TAKE_FD(fd)) < 0)
			ex_fail(ex, slot, "close: %m");
	} else
		io_check_range(ex, slot, slot_fd(ex, slot), s, off, len, "pread");
}

static void op_truncate(Exerciser *ex, int slot) {
	Slot *s = &ex->slots[slot];
	uint64_t c = ex_below(ex, 6), new_size;

	if (c < 2)
		new_size = ex_below(ex, s->size + 1);
	else if (c < 4)
		new_size = s->size + ex_below(ex, ex->max_size - s->size + 1);
	else if (c == 4)
		new_size = 0;
	else
		new_size = ex_below(ex, ex->max_size / 4096 + 1) * 4096;
	new_size = MIN(new_size, ex->max_size);
	ex_trace(ex, slot, " %" PRIu64 " -> %" PRIu64, s->size, new_size);
	if (new_size < s->size)
		s->size = new_size;
	else
		model_grow(s, new_size);
	if (!ex->verify_only && ftruncate(slot_fd(ex, slot), (off_t) new_size) < 0)
		ex_fail(ex, slot, "ftruncate(%" PRIu64 "): %m", new_size);
}

static void op_fallocate(Exerciser *ex, int slot, ExOp op) {
	Slot *s = &ex->slots[slot];
	uint64_t off = ex_pick_off(ex, s->size, s->size + 65536), len = ex_pick_len(ex);
	bool keep = ex_below(ex, 2);
	int mode;

	ex_clamp(ex, &off, &len);
	switch (op) {
	case EX_OP_PUNCH:
		mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
		model_zero(s, off, len);
		break;
	case EX_OP_ZERO:
		mode = FALLOC_FL_ZERO_RANGE | (keep ? FALLOC_FL_KEEP_SIZE : 0);
		model_zero(s, off, len);
		if (!keep)
			model_grow(s, off + len);
		break;
	default:
		mode = keep ? FALLOC_FL_KEEP_SIZE : 0;
		if (!keep)
			model_grow(s, off + len);
		break;
	}
	ex_trace(ex, slot, " mode 0x%x %" PRIu64 " @ %" PRIu64, (unsigned) mode, len, off);
	if (!ex->verify_only && fallocate(slot_fd(ex, slot), mode, (off_t) off, (off_t) len) < 0)
		ex_fail(ex, slot, "fallocate(mode 0x%x, %" PRIu64 " @ %" PRIu64 "): %m", (unsigned) mode, len, off);
}

static void op_append(Exerciser *ex, int slot) {
	Slot *s = &ex->slots[slot];
	uint64_t len = ex_pick_len(ex), off = s->size;

	len = MIN(len, ex->max_size - off);
	ex_fill(ex, s->data + off, len);
	model_grow(s, off + len);
	ex_trace(ex, slot, " %" PRIu64 " @ %" PRIu64, len, off);
	ex->bytes_written += len;
	if (ex->verify_only)
		return;

	_cleanup_close_ int fd = io_open(ex, slot, O_WRONLY | O_APPEND);
	const uint8_t *p = s->data + off;
	for (uint64_t left = len; left > 0;) {
		ssize_t n = write(fd, p, left);
		if (n <= 0)
			ex_fail(ex, slot, "O_APPEND write(%" PRIu64 "): %s", left, n < 0 ? strerror(errno) : "wrote 0");
		p += n;
		left -= (uint64_t) n;
	}
	off_t pos = lseek(fd, 0, SEEK_CUR);
	if (len > 0 && (pos < 0 || (uint64_t) pos != s->size))
		ex_fail(ex, slot, "O_APPEND write left the offset at %jd, expected %" PRIu64, (intmax_t) pos, s->size);
	if (close(TAKE_FD(fd)) < 0)
		ex_fail(ex, slot, "close after append: %m");
}

/* A second slot, different from slot (needs at least two files). */
static int ex_other_slot(Exerciser *ex, int slot) {
	int other = (int) ex_below(ex, ex->nfiles - 1);
	return other >= slot ? other + 1 : other;
}

static void op_rename(Exerciser *ex, int slot) {
	int dst = ex_other_slot(ex, slot);
	Slot *s = &ex->slots[slot], *d = &ex->slots[dst];
	char from[EX_NAME_MAX], to[EX_NAME_MAX];
	uint8_t *spare;

	slot_name((unsigned) slot, from);
	slot_name((unsigned) dst, to);
	ex_trace(ex, slot, " -> %s%s", to, d->exists ? " (over existing)" : "");
	if (!ex->verify_only) {
		if (renameat(ex->dirfd, from, ex->dirfd, to) < 0)
			ex_fail(ex, slot, "rename to %s: %m", to);
		if (d->exists)
			slot_drop_orphan(ex, dst, d->fd, d);
		d->fd = s->fd;
		s->fd = -1;
	}
	spare = d->data;
	d->data = s->data;
	d->size = s->size;
	d->exists = true;
	s->data = spare;
	s->size = 0;
	s->exists = false;
}

static void op_exchange(Exerciser *ex, int slot) {
	int other = ex_other_slot(ex, slot);
	Slot *s = &ex->slots[slot], *o = &ex->slots[other], tmp;
	char a[EX_NAME_MAX], b[EX_NAME_MAX];

	if (!o->exists)
		slot_create(ex, other);
	slot_name((unsigned) slot, a);
	slot_name((unsigned) other, b);
	ex_trace(ex, slot, " <-> %s", b);
	if (!ex->verify_only && renameat2(ex->dirfd, a, ex->dirfd, b, RENAME_EXCHANGE) < 0)
		ex_fail(ex, slot, "rename(RENAME_EXCHANGE) with %s: %m", b);
	tmp = *s;
	*s = *o;
	*o = tmp;
}

static void op_unlink(Exerciser *ex, int slot) {
	Slot *s = &ex->slots[slot];
	bool recreate = ex_below(ex, 2);
	char name[EX_NAME_MAX];

	slot_name((unsigned) slot, name);
	ex_trace(ex, slot, "%s", recreate ? " and recreate" : "");
	if (!ex->verify_only) {
		if (unlinkat(ex->dirfd, name, 0) < 0)
			ex_fail(ex, slot, "unlink: %m");
		slot_drop_orphan(ex, slot, s->fd, s);
		s->fd = -1;
	}
	s->exists = false;
	s->size = 0;
	if (recreate)
		slot_create(ex, slot);
}

static void op_reopen(Exerciser *ex, int slot) {
	Slot *s = &ex->slots[slot];
	bool trunc = ex_below(ex, 8) == 0;

	ex_trace(ex, slot, "%s", trunc ? " O_TRUNC" : "");
	if (trunc)
		s->size = 0;
	if (ex->verify_only)
		return;
	slot_close(ex, slot);
	s->fd = io_open(ex, slot, O_RDWR | (trunc ? O_TRUNC : 0));
	io_check_size(ex, slot, s->fd, s->size, "after reopen");
}

static void op_fsync(Exerciser *ex, int slot) {
	Slot *s = &ex->slots[slot];
	bool data_only = ex_below(ex, 2);
	int fd;

	ex_trace(ex, slot, "%s", data_only ? " fdatasync" : "");
	if (ex->verify_only)
		return;
	fd = slot_fd(ex, slot);
	if ((data_only ? fdatasync(fd) : fsync(fd)) < 0)
		ex_fail(ex, slot, "%s: %m", data_only ? "fdatasync" : "fsync");
	io_check_size(ex, slot, fd, s->size, "after fsync");
}

static void op_mmap(Exerciser *ex, int slot, bool write) {
	Slot *s = &ex->slots[slot];
	uint64_t off, len, map_off, map_len;
	bool do_msync;
	uint8_t *map;

	if (s->size == 0)
		return;
	off = ex_below(ex, s->size);
	len = ex_pick_len(ex);
	len = MIN(len, s->size - off);
	do_msync = ex_below(ex, 2);
	if (write) {
		ex_fill(ex, s->data + off, len);
		ex->bytes_written += len;
	}
	ex_trace(ex, slot, " %" PRIu64 " @ %" PRIu64, len, off);
	if (ex->verify_only)
		return;

	map_off = off - off % (uint64_t) ex->page;
	map_len = off + len - map_off;
	map = mmap(NULL, map_len, write ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, slot_fd(ex, slot),
		   (off_t) map_off);
	if (map == MAP_FAILED)
		ex_fail(ex, slot, "mmap(%" PRIu64 " @ %" PRIu64 "): %m", map_len, map_off);
	if (write) {
		memcpy(map + (off - map_off), s->data + off, len);
		if (do_msync && msync(map, map_len, MS_SYNC) < 0)
			ex_fail(ex, slot, "msync: %m");
	}
	/* Read the whole mapping back: for a write this also covers the
	 * untouched bytes of the first page. */
	if (memcmp(map, s->data + map_off, map_len) != 0)
		ex_fail_mismatch(ex, slot, write ? "mmap after writing through it" : "mmap", map_off,
				 s->data + map_off, map, map_len);
	ex->bytes_checked += map_len;
	if (munmap(map, map_len) < 0)
		ex_fail(ex, slot, "munmap: %m");
}

static void op_stat(Exerciser *ex, int slot) {
	Slot *s = &ex->slots[slot];
	char name[EX_NAME_MAX];
	struct stat st;

	ex_trace(ex, slot, " size %" PRIu64, s->size);
	if (ex->verify_only)
		return;
	slot_name((unsigned) slot, name);
	if (fstatat(ex->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		ex_fail(ex, slot, "stat: %m");
	if (!S_ISREG(st.st_mode) || (uint64_t) st.st_size != s->size)
		ex_fail(ex, slot, "stat by name: mode 0%o size %" PRIu64 ", expected a regular file of %" PRIu64,
			(unsigned) st.st_mode, (uint64_t) st.st_size, s->size);
	io_check_size(ex, slot, slot_fd(ex, slot), s->size, "fstat");
}

/*
 * Writes a few bytes far beyond max-size (a huge sparse hole), checks size,
 * the bytes and the hole, then truncates back.  The model does not change,
 * but a later extension must read zeros where the far bytes were.
 */
static void op_far(Exerciser *ex, int slot) {
	Slot *s = &ex->slots[slot];
	uint64_t off = EX_FAR_BASE + ex_below(ex, UINT64_C(1) << 30), len = 1 + ex_below(ex, 8192);
	uint8_t *data = ex->buf + EX_IO_MAX / 2;
	uint64_t hole_len;
	size_t got;
	int fd;

	ex_fill(ex, data, len);
	ex_trace(ex, slot, " %" PRIu64 " @ %" PRIu64, len, off);
	if (ex->verify_only)
		return;

	fd = slot_fd(ex, slot);
	io_pwrite(ex, slot, fd, data, len, off);
	io_check_size(ex, slot, fd, off + len, "after a far write");
	got = io_pread(ex, slot, fd, ex->buf, len, off);
	if (got != len)
		ex_fail(ex, slot, "far read of %" PRIu64 " @ %" PRIu64 " returned %zu", len, off, got);
	if (memcmp(ex->buf, data, len) != 0)
		ex_fail_mismatch(ex, slot, "far read", off, data, ex->buf, len);

	/* The hole right after the old EOF and right before the far bytes. */
	hole_len = 65536;
	got = io_pread(ex, slot, fd, ex->buf, hole_len, s->size);
	for (size_t i = 0; i < got; i++)
		if (ex->buf[i] != 0)
			ex_fail(ex, slot, "hole after old EOF: byte at %" PRIu64 " is 0x%02x", s->size + i, ex->buf[i]);
	if (got != hole_len)
		ex_fail(ex, slot, "hole read returned %zu of %" PRIu64, got, hole_len);
	got = io_pread(ex, slot, fd, ex->buf, hole_len, off - hole_len);
	for (size_t i = 0; i < got; i++)
		if (ex->buf[i] != 0)
			ex_fail(ex, slot, "hole before far write: byte at %" PRIu64 " is 0x%02x", off - hole_len + i,
				ex->buf[i]);

	if (ftruncate(fd, (off_t) s->size) < 0)
		ex_fail(ex, slot, "ftruncate back to %" PRIu64 ": %m", s->size);
	io_check_size(ex, slot, fd, s->size, "after truncating a far write away");
	if (io_pread(ex, slot, fd, ex->buf, 1, off) != 0)
		ex_fail(ex, slot, "far bytes still readable after truncate");
}

static ExOp ex_pick_op(Exerciser *ex) {
	unsigned total = 0;
	uint64_t r;

	for (unsigned i = 0; i < _EX_OP_MAX; i++)
		total += ex_op_table[i].weight;
	r = ex_below(ex, total);
	for (unsigned i = 0; i < _EX_OP_MAX; i++) {
		if (r < ex_op_table[i].weight)
			return (ExOp) i;
		r -= ex_op_table[i].weight;
	}
	return EX_OP_STAT;
}

static void ex_step(Exerciser *ex) {
	ExOp op = ex_pick_op(ex);
	int slot = (int) ex_below(ex, ex->nfiles);

	if ((op == EX_OP_RENAME || op == EX_OP_EXCHANGE) && ex->nfiles < 2)
		op = EX_OP_STAT;
	ex->op_name = ex_op_table[op].name;
	ex->op_counts[op]++;
	if (!ex->slots[slot].exists) {
		const char *name = ex->op_name;

		ex->op_name = "create";
		ex_trace(ex, slot, "%s", "");
		slot_create(ex, slot);
		ex->op_name = name;
	}

	switch (op) {
	case EX_OP_WRITE:
	case EX_OP_WRITE_HOLE:
		op_write(ex, slot, op == EX_OP_WRITE_HOLE);
		break;
	case EX_OP_READ:
	case EX_OP_READ_FRESH:
		op_read(ex, slot, op == EX_OP_READ_FRESH);
		break;
	case EX_OP_TRUNCATE:
		op_truncate(ex, slot);
		break;
	case EX_OP_PUNCH:
	case EX_OP_ZERO:
	case EX_OP_ALLOCATE:
		op_fallocate(ex, slot, op);
		break;
	case EX_OP_APPEND:
		op_append(ex, slot);
		break;
	case EX_OP_RENAME:
		op_rename(ex, slot);
		break;
	case EX_OP_EXCHANGE:
		op_exchange(ex, slot);
		break;
	case EX_OP_UNLINK:
		op_unlink(ex, slot);
		break;
	case EX_OP_REOPEN:
		op_reopen(ex, slot);
		break;
	case EX_OP_FSYNC:
		op_fsync(ex, slot);
		break;
	case EX_OP_MMAP_READ:
	case EX_OP_MMAP_WRITE:
		op_mmap(ex, slot, op == EX_OP_MMAP_WRITE);
		break;
	case EX_OP_STAT:
		op_stat(ex, slot);
		break;
	case EX_OP_FAR:
		op_far(ex, slot);
		break;
	case _EX_OP_MAX:
		abort();
	}
}

/* Every entry of the directory must be one of the files the model says exist. */
static void ex_check_listing(Exerciser *ex) {
	bool seen[EX_FILES_MAX] = { false };
	_cleanup_close_ int fd = -1;
	unsigned expected = 0, found = 0;
	struct dirent *de;
	DIR *d;

	fd = openat(ex->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		ex_fail(ex, -1, "open directory: %m");
	d = fdopendir(TAKE_FD(fd));
	if (!d)
		ex_fail(ex, -1, "fdopendir: %m");
	errno = 0;
	while ((de = readdir(d))) {
		unsigned i;
		char tail;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (sscanf(de->d_name, "f%2u%c", &i, &tail) != 1 || i >= ex->nfiles || !ex->slots[i].exists ||
		    seen[i]) {
			closedir(d);
			ex_fail(ex, -1, "unexpected directory entry \"%s\"", de->d_name);
		}
		seen[i] = true;
		found++;
		errno = 0;
	}
	if (errno != 0)
		ex_fail(ex, -1, "readdir: %m");
	closedir(d);
	for (unsigned i = 0; i < ex->nfiles; i++)
		expected += ex->slots[i].exists;
	if (found != expected)
		ex_fail(ex, -1, "directory lists %u files, expected %u", found, expected);
}

/* The full final check: open fds (live mode), then every file by name, then the listing. */
static void ex_verify_all(Exerciser *ex) {
	ex->op_name = "final-verify";
	for (unsigned i = 0; i < ex->nfiles; i++) {
		Slot *s = &ex->slots[i];
		if (s->fd >= 0) {
			io_check_file(ex, (int) i, s->fd, s, "long-lived fd at the end");
			slot_close(ex, (int) i);
		}
	}
	for (unsigned i = 0; i < ex->nfiles; i++) {
		Slot *s = &ex->slots[i];
		char name[EX_NAME_MAX];
		struct stat st;

		slot_name(i, name);
		if (!s->exists) {
			if (fstatat(ex->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
				ex_fail(ex, (int) i, "exists but the model says it was removed");
			if (errno != ENOENT)
				ex_fail(ex, (int) i, "stat: %m (expected ENOENT)");
			continue;
		}
		_cleanup_close_ int fd = io_open(ex, (int) i, O_RDONLY);
		io_check_file(ex, (int) i, fd, s, "final read");
		if (fstatat(ex->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			ex_fail(ex, (int) i, "stat: %m");
		if ((uint64_t) st.st_size != s->size)
			ex_fail(ex, (int) i, "stat by name: size %" PRIu64 ", expected %" PRIu64, (uint64_t) st.st_size,
				s->size);
	}
	ex_check_listing(ex);
}

static int parse_u64(const char *s, uint64_t *ret) {
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno != 0 || end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end != '\0' || v > (UINT64_MAX >> shift))
		return -EINVAL;
	*ret = (uint64_t) v << shift;
	return 0;
}

static void usage(FILE *f) {
	fprintf(f,
		"usage: fratier-exercise [options] DIR\n"
		"  --seed N        random seed (default 1)\n"
		"  --ops N         number of operations (default 2000)\n"
		"  --files N       number of files f00.. (default 8, max %u)\n"
		"  --max-size N    largest file size, K/M/G suffixes (default 8M)\n"
		"  --verify-only   replay the seed without I/O, then check the files\n"
		"  --verbose       trace every operation on stderr\n",
		EX_FILES_MAX);
}

int main(int argc, char **argv) {
	static const struct option options[] = {
		{ "seed", required_argument, NULL, 's' },
		{ "ops", required_argument, NULL, 'n' },
		{ "files", required_argument, NULL, 'f' },
		{ "max-size", required_argument, NULL, 'm' },
		{ "verify-only", no_argument, NULL, 'V' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	static Exerciser ex = {
		.seed = 1,
		.nops = 2000,
		.nfiles = 8,
		.max_size = 8u << 20,
		.dirfd = -1,
	};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		switch (c) {
		case 's':
		case 'n':
		case 'f':
		case 'm':
			if (parse_u64(optarg, &v) < 0) {
				fprintf(stderr, "fratier-exercise: bad number \"%s\"\n", optarg);
				return 2;
			}
			if (c == 's')
				ex.seed = v;
			else if (c == 'n')
				ex.nops = v;
			else if (c == 'f') {
				if (v < 1 || v > EX_FILES_MAX) {
					fprintf(stderr, "fratier-exercise: --files must be 1..%u\n", EX_FILES_MAX);
					return 2;
				}
				ex.nfiles = (unsigned) v;
			} else {
				if (v < 4096 || v > EX_MODEL_TOTAL_MAX) {
					fprintf(stderr, "fratier-exercise: --max-size must be 4K..%llu\n",
						EX_MODEL_TOTAL_MAX);
					return 2;
				}
				ex.max_size = v;
			}
			break;
		case 'V':
			ex.verify_only = true;
			break;
		case 'v':
			ex.verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	if (ex.max_size * ex.nfiles > EX_MODEL_TOTAL_MAX) {
		fprintf(stderr, "fratier-exercise: files * max-size exceeds the model limit of %llu bytes\n",
			EX_MODEL_TOTAL_MAX);
		return 2;
	}

	ex.dir = argv[optind];
	ex.page = sysconf(_SC_PAGESIZE);
	ex.rng = ex.seed;
	ex.op_name = "setup";
	ex.dirfd = open(ex.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ex.dirfd < 0)
		ex_fail(&ex, -1, "open: %m");
	ex.buf = malloc(EX_IO_MAX);
	if (!ex.buf)
		ex_fail(&ex, -1, "out of memory");
	for (unsigned i = 0; i < ex.nfiles; i++) {
		ex.slots[i].fd = -1;
		ex.slots[i].data = malloc(ex.max_size);
		if (!ex.slots[i].data)
			ex_fail(&ex, -1, "out of memory");
	}
	if (!ex.verify_only)
		ex_check_listing(&ex);

	for (ex.op = 0; ex.op < ex.nops; ex.op++)
		ex_step(&ex);
	ex_verify_all(&ex);

	printf("fratier-exercise: seed %" PRIu64 ", %" PRIu64 " ops%s, %u files: %" PRIu64 " bytes written, %" PRIu64
	       " bytes checked; ops:",
	       ex.seed, ex.nops, ex.verify_only ? " replayed" : "", ex.nfiles, ex.bytes_written, ex.bytes_checked);
	for (unsigned i = 0; i < _EX_OP_MAX; i++)
		printf(" %s=%" PRIu64, ex_op_table[i].name, ex.op_counts[i]);
	printf("\n");

	for (unsigned i = 0; i < ex.nfiles; i++)
		free(ex.slots[i].data);
	free(ex.buf);
	(void) close(ex.dirfd);
	return 0;
}
