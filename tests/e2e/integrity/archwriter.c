/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fratier-archwriter: an Oracle-archiver-like writer and its checker, for the
 * crash test.
 *
 *   write   create files one after another, write each front to back in 1 MiB
 *           writes of content derived from (file key, seed), fsync, close, and
 *           only then acknowledge it in an ack log kept outside the mount.
 *           Optionally fsync mid-file (acking the size reached), rename
 *           KEY.part -> KEY.arc after completion (as ARCn does), delete
 *           earlier files, write with O_DIRECT.  Runs until killed or --count.
 *   verify  check a directory against the ack log: everything acknowledged is
 *           there and byte-exact, and no file holds a byte it was not given.
 *   prune   delete the files of rounds before --before-round (bounding disk
 *           use between crash rounds), logging it like a writer would.
 *
 * Ack log: one line per event, "STATE KEY NAME SIZE\n", appended with
 * O_APPEND in a single write(2) and fsync'd before the writer goes on:
 *   begin    KEY NAME PLANNED  logged before the file is created
 *   sync     KEY NAME N        fsync returned with N bytes written
 *   done     KEY NAME PLANNED  fsync and close returned, file complete
 *   renamed  KEY NEWNAME SIZE  rename and fsync of the directory returned
 *   unlink   KEY NAME 0        about to unlink NAME
 *   deleted  KEY NAME 0        unlink and fsync of the directory returned
 * A writer never logs after a failed call, so each line states something the
 * file system promised.  A torn last line (writer killed mid-write) is ignored.
 *
 * What verify requires, by the last state of a key:
 *   (none)   a file present under the key's names is unknown: failure
 *   begin    may be absent; if present, a prefix of the content (any length
 *            up to PLANNED, every byte correct); the .arc name must not exist
 *   sync N   present under NAME with at least N bytes, every byte correct
 *   done     present under exactly one of NAME and (for .part) KEY.arc,
 *            PLANNED bytes, exact
 *   renamed  present under NEWNAME only, exact
 *   unlink   either absent or as for done/renamed
 *   deleted  absent under both names
 */

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macros.h"

#define AW_BLOCK (UINT64_C(1) << 20) /* the archiver's write size */
#define AW_ALIGN 4096u               /* O_DIRECT buffer and size alignment */
#define AW_KEY_MAX 32                /* "r00000-w0-00000" and room to spare */
#define AW_NAME_MAX 48
#define AW_LINE_MAX 160
#define AW_FAILURES_SHOWN 50
#define AW_SIZE_MAX (UINT64_C(1) << 34) /* bound on --max-size */
#define AW_ROUND_MAX 99999u
#define AW_WRITER_MAX 9u

typedef enum AwState {
	AW_BEGIN,
	AW_SYNC,
	AW_DONE,
	AW_RENAMED,
	AW_UNLINK,
	AW_DELETED,
	_AW_STATE_MAX,
} AwState;

static const char *const aw_state_names[_AW_STATE_MAX] = {
	[AW_BEGIN] = "begin",   [AW_SYNC] = "sync",     [AW_DONE] = "done",
	[AW_RENAMED] = "renamed", [AW_UNLINK] = "unlink", [AW_DELETED] = "deleted",
};

static const char *arg_dir;
static const char *arg_ack;
static uint64_t arg_seed = 1;
static unsigned arg_writer;
static unsigned arg_round;
static uint64_t arg_min_size = 2 * AW_BLOCK;
static uint64_t arg_max_size = 32 * AW_BLOCK;
static uint64_t arg_count;
static unsigned arg_before_round;
static bool arg_mid_fsync;
static bool arg_rename;
static bool arg_delete;
static bool arg_direct;

static uint64_t mix64(uint64_t z) {
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static uint64_t rng_next(uint64_t *state) {
	return mix64(*state += UINT64_C(0x9e3779b97f4a7c15));
}

/* The identity of a file's content: its key and the run's seed. */
static uint64_t key_hash(const char *key, uint64_t seed) {
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	for (const char *p = key; *p; p++)
		h = (h ^ (uint8_t) *p) * UINT64_C(0x100000001b3);
	return mix64(h ^ mix64(seed));
}

/* Content bytes [off, off+len) of the file with hash h; any alignment. */
static void content_fill(uint64_t h, uint64_t off, uint8_t *p, size_t len) {
	while (len > 0) {
		uint64_t word = mix64(h + (off / 8) * UINT64_C(0x9e3779b97f4a7c15));
		size_t skip = off % 8, n = MIN(8 - skip, len);

		memcpy(p, (const uint8_t *) &word + skip, n);
		p += n;
		off += n;
		len -= n;
	}
}

static uint64_t planned_size(uint64_t h) {
	return arg_min_size + mix64(h ^ UINT64_C(0x5bd1e9955bd1e995)) % (arg_max_size - arg_min_size + 1);
}

static _printf_(1, 2) _noreturn_ void die(const char *fmt, ...) {
	va_list ap;

	fprintf(stderr, "fratier-archwriter: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* Appends one ack line in a single write and makes it durable. */
static void ack(int ackfd, AwState state, const char *key, const char *name, uint64_t size) {
	char line[AW_LINE_MAX];
	int n;

	n = snprintf(line, sizeof(line), "%s %s %s %" PRIu64 "\n", aw_state_names[state], key, name, size);
	assert(n > 0 && (size_t) n < sizeof(line));
	if (write(ackfd, line, (size_t) n) != n)
		die("ack write: %m");
	if (fsync(ackfd) < 0)
		die("ack fsync: %m");
}

static int open_ack(void) {
	int fd = open(arg_ack, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		die("open %s: %m", arg_ack);
	return fd;
}

static int open_dir(void) {
	int fd = open(arg_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		die("open %s: %m", arg_dir);
	return fd;
}

static void write_all(int fd, const uint8_t *p, size_t len, const char *name) {
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0)
			die("write %s: %m", name);
		if (n == 0)
			die("write %s: wrote nothing", name);
		p += n;
		len -= (size_t) n;
	}
}

typedef struct DoneFile {
	char key[AW_KEY_MAX];
	char name[AW_NAME_MAX];
} DoneFile;

static int cmd_write(void) {
	_cleanup_close_ int dirfd = open_dir(), ackfd = open_ack();
	_cleanup_free_ DoneFile *done = NULL;
	_cleanup_free_ uint8_t *buf = NULL;
	uint64_t rng = mix64(arg_seed) ^ mix64(((uint64_t) arg_round << 8) | arg_writer);
	size_t ndone = 0;

	if (posix_memalign((void **) &buf, AW_ALIGN, AW_BLOCK) != 0)
		die("out of memory");
	for (uint64_t k = 0; arg_count == 0 || k < arg_count; k++) {
		char key[AW_KEY_MAX], name[AW_NAME_MAX], final[AW_NAME_MAX];
		uint64_t next_sync = UINT64_MAX, h, planned;
		int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | (arg_direct ? O_DIRECT : 0);
		_cleanup_close_ int fd = -1;

		snprintf(key, sizeof(key), "r%05u-w%u-%05" PRIu64, arg_round, arg_writer, k);
		snprintf(name, sizeof(name), "%s%s", key, arg_rename ? ".part" : ".arc");
		snprintf(final, sizeof(final), "%s.arc", key);
		h = key_hash(key, arg_seed);
		planned = planned_size(h);
		if (arg_mid_fsync)
			next_sync = (2 + rng_next(&rng) % 7) * AW_BLOCK;

		ack(ackfd, AW_BEGIN, key, name, planned);
		fd = openat(dirfd, name, flags, 0640);
		if (fd < 0)
			die("create %s: %m", name);
		for (uint64_t off = 0; off < planned;) {
			size_t n = (size_t) MIN(AW_BLOCK, planned - off);

			content_fill(h, off, buf, n);
			/* O_DIRECT needs aligned sizes; the tail goes through the cache. */
			if (arg_direct && n % AW_ALIGN != 0) {
				int fl = fcntl(fd, F_GETFL);
				if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_DIRECT) < 0)
					die("fcntl %s: %m", name);
			}
			write_all(fd, buf, n, name);
			off += n;
			if (off >= next_sync && off < planned) {
				if (fsync(fd) < 0)
					die("fsync %s: %m", name);
				ack(ackfd, AW_SYNC, key, name, off);
				next_sync += (2 + rng_next(&rng) % 7) * AW_BLOCK;
			}
		}
		if (fsync(fd) < 0)
			die("fsync %s: %m", name);
		if (close(TAKE_FD(fd)) < 0)
			die("close %s: %m", name);
		ack(ackfd, AW_DONE, key, name, planned);

		if (arg_rename) {
			if (renameat(dirfd, name, dirfd, final) < 0)
				die("rename %s: %m", name);
			if (fsync(dirfd) < 0)
				die("fsync of the directory after rename: %m");
			ack(ackfd, AW_RENAMED, key, final, planned);
			strcpy(name, final);
		}

		if (arg_delete && ndone > 0 && rng_next(&rng) % 3 == 0) {
			size_t victim = rng_next(&rng) % ndone;
			DoneFile *v = &done[victim];

			ack(ackfd, AW_UNLINK, v->key, v->name, 0);
			if (unlinkat(dirfd, v->name, 0) < 0)
				die("unlink %s: %m", v->name);
			if (fsync(dirfd) < 0)
				die("fsync of the directory after unlink: %m");
			ack(ackfd, AW_DELETED, v->key, v->name, 0);
			done[victim] = done[--ndone];
		}
		if (arg_delete) {
			DoneFile *grown = realloc(done, (ndone + 1) * sizeof(*done));
			if (!grown)
				die("out of memory");
			done = grown;
			strcpy(done[ndone].key, key);
			strcpy(done[ndone].name, name);
			ndone++;
		}
	}
	return 0;
}

typedef struct AckLine {
	AwState state;
	char key[AW_KEY_MAX];
	char name[AW_NAME_MAX];
	uint64_t size;
	size_t seq; /* line number, to keep one key's events in order */
} AckLine;

typedef struct Record {
	char key[AW_KEY_MAX];
	char name[AW_NAME_MAX];  /* name given at begin */
	char final[AW_NAME_MAX]; /* KEY.arc when name is KEY.part, else "" */
	uint64_t planned;
	uint64_t acked; /* bytes promised durable */
	AwState state;
	AwState before_unlink; /* state when unlink was logged */
	bool at_name, at_final; /* found in the directory */
	uint64_t size_found;
} Record;

typedef struct Verifier {
	Record *recs;
	size_t nrecs;
	unsigned failures;
	uint64_t bytes_checked;
	unsigned files_present;
	unsigned by_state[_AW_STATE_MAX];
} Verifier;

static _printf_(2, 3) void verify_fail(Verifier *v, const char *fmt, ...) {
	va_list ap;

	if (++v->failures > AW_FAILURES_SHOWN)
		return;
	fprintf(stderr, "FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int ack_line_compare(const void *a, const void *b) {
	const AckLine *x = a, *y = b;
	int r = strcmp(x->key, y->key);

	if (r != 0)
		return r;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int record_compare(const void *a, const void *b) {
	return strcmp(((const Record *) a)->key, ((const Record *) b)->key);
}

static AwState state_from_string(const char *s) {
	for (unsigned i = 0; i < _AW_STATE_MAX; i++)
		if (strcmp(s, aw_state_names[i]) == 0)
			return (AwState) i;
	return _AW_STATE_MAX;
}

/* Reads the ack log into a sorted list of lines; a torn last line is dropped. */
static AckLine *ack_log_load(size_t *ret_n) {
	_cleanup_fclose_ FILE *f = fopen(arg_ack, "re");
	_cleanup_free_ AckLine *lines = NULL;
	char buf[AW_LINE_MAX];
	size_t n = 0, cap = 0;

	if (!f) {
		if (errno != ENOENT)
			die("open %s: %m", arg_ack);
		*ret_n = 0;
		return NULL;
	}
	while (fgets(buf, sizeof(buf), f)) {
		char state[16], key[AW_KEY_MAX], name[AW_NAME_MAX], tail;
		size_t len = strlen(buf);
		AckLine *l;

		if (len == 0 || buf[len - 1] != '\n') {
			if (!feof(f))
				die("%s: line %zu too long", arg_ack, n + 1);
			break; /* torn by a kill: the writer never relied on it */
		}
		if (n == cap) {
			AckLine *grown;
			cap = cap ? cap * 2 : 1024;
			grown = realloc(lines, cap * sizeof(*lines));
			if (!grown)
				die("out of memory");
			lines = grown;
		}
		l = &lines[n];
		if (sscanf(buf, "%15s %31s %47s %" SCNu64 " %c", state, key, name, &l->size, &tail) != 4)
			die("%s: malformed line %zu: %s", arg_ack, n + 1, buf);
		l->state = state_from_string(state);
		if (l->state == _AW_STATE_MAX)
			die("%s: unknown state on line %zu: %s", arg_ack, n + 1, buf);
		strcpy(l->key, key);
		strcpy(l->name, name);
		l->seq = n++;
	}
	if (ferror(f))
		die("read %s: %m", arg_ack);
	if (n > 0)
		qsort(lines, n, sizeof(*lines), ack_line_compare);
	*ret_n = n;
	return TAKE_PTR(lines);
}

static bool has_suffix(const char *s, const char *suffix) {
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Folds the sorted lines into one record per key, checking the log makes sense. */
static void verifier_build(Verifier *v, const AckLine *lines, size_t n) {
	v->recs = calloc(MAX(n, (size_t) 1), sizeof(*v->recs));
	if (!v->recs)
		die("out of memory");
	for (size_t i = 0; i < n;) {
		Record *r = &v->recs[v->nrecs++];
		const AckLine *l = &lines[i];

		if (l->state != AW_BEGIN)
			die("ack log: first event of %s is %s", l->key, aw_state_names[l->state]);
		strcpy(r->key, l->key);
		strcpy(r->name, l->name);
		if (has_suffix(l->name, ".part"))
			snprintf(r->final, sizeof(r->final), "%s.arc", l->key);
		r->planned = l->size;
		r->state = AW_BEGIN;
		for (i++; i < n && strcmp(lines[i].key, r->key) == 0; i++) {
			l = &lines[i];
			switch (l->state) {
			case AW_BEGIN:
				die("ack log: %s begun twice", l->key);
			case AW_SYNC:
				if (r->state > AW_SYNC || l->size < r->acked || l->size > r->planned ||
				    strcmp(l->name, r->name) != 0)
					die("ack log: bad sync event for %s", l->key);
				r->acked = l->size;
				break;
			case AW_DONE:
				if (r->state > AW_SYNC || l->size != r->planned)
					die("ack log: bad done event for %s", l->key);
				r->acked = l->size;
				break;
			case AW_RENAMED:
				if (r->state != AW_DONE || !r->final[0] || strcmp(l->name, r->final) != 0)
					die("ack log: bad renamed event for %s", l->key);
				break;
			case AW_UNLINK:
				/* prune may unlink a file in any state */
				r->before_unlink = r->state;
				break;
			case AW_DELETED:
				if (r->state != AW_UNLINK)
					die("ack log: deleted without unlink for %s", l->key);
				break;
			case _AW_STATE_MAX:
				abort();
			}
			r->state = l->state;
		}
		v->by_state[r->state]++;
	}
}

static Record *verifier_find(Verifier *v, const char *key) {
	Record probe;

	if (strlen(key) >= sizeof(probe.key))
		return NULL;
	strcpy(probe.key, key);
	return bsearch(&probe, v->recs, v->nrecs, sizeof(*v->recs), record_compare);
}

/* Every byte of the file must be the content it was given. */
static void verify_file(Verifier *v, int dirfd, const char *name, Record *r, uint8_t *buf, uint8_t *want) {
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	uint64_t h = key_hash(r->key, arg_seed), off = 0;
	struct stat st;

	if (fd < 0) {
		verify_fail(v, "%s: open: %m", name);
		return;
	}
	if (fstat(fd, &st) < 0) {
		verify_fail(v, "%s: fstat: %m", name);
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		verify_fail(v, "%s: not a regular file", name);
		return;
	}
	r->size_found = (uint64_t) st.st_size;
	if (r->size_found > r->planned)
		verify_fail(v, "%s: size %" PRIu64 " exceeds the %" PRIu64 " bytes ever written", name, r->size_found,
			    r->planned);
	for (;;) {
		ssize_t got = pread(fd, buf, AW_BLOCK, (off_t) off);

		if (got < 0) {
			verify_fail(v, "%s: read at %" PRIu64 ": %m", name, off);
			return;
		}
		if (got == 0)
			break;
		if (off + (uint64_t) got > r->planned) {
			verify_fail(v, "%s: readable beyond the %" PRIu64 " bytes ever written", name, r->planned);
			return;
		}
		content_fill(h, off, want, (size_t) got);
		if (memcmp(buf, want, (size_t) got) != 0) {
			size_t i = 0;
			while (buf[i] == want[i])
				i++;
			verify_fail(v,
				    "%s: wrong byte at offset %" PRIu64 ": expected 0x%02x, got 0x%02x (file size %" PRIu64
				    ", last ack %s %" PRIu64 ")",
				    name, off + i, want[i], buf[i], r->size_found, aw_state_names[r->state], r->acked);
			return;
		}
		off += (uint64_t) got;
		v->bytes_checked += (uint64_t) got;
	}
	if (off != r->size_found)
		verify_fail(v, "%s: read %" PRIu64 " bytes but st_size is %" PRIu64, name, off, r->size_found);
}

/* Key of a file name "KEY.part" / "KEY.arc"; false for anything else. */
static bool name_to_key(const char *name, char ret[static AW_KEY_MAX]) {
	const char *dot = strrchr(name, '.');

	if (!dot || (strcmp(dot, ".part") != 0 && strcmp(dot, ".arc") != 0) || (size_t) (dot - name) >= AW_KEY_MAX)
		return false;
	memcpy(ret, name, (size_t) (dot - name));
	ret[dot - name] = '\0';
	return true;
}

static void verify_complete(Verifier *v, const Record *r, const char *what) {
	if (r->size_found != r->planned)
		verify_fail(v, "%s: %s but %" PRIu64 " of %" PRIu64 " bytes present", r->key, what, r->size_found,
			    r->planned);
}

static void verify_record(Verifier *v, const Record *r) {
	AwState state = r->state == AW_UNLINK ? r->before_unlink : r->state;
	bool present = r->at_name || r->at_final;

	if (r->at_name && r->at_final) {
		verify_fail(v, "%s: present under both %s and %s", r->key, r->name, r->final);
		return;
	}
	if (r->at_final && state < AW_DONE) {
		verify_fail(v, "%s: renamed to %s before it was complete (last ack %s)", r->key, r->final,
			    aw_state_names[state]);
		return;
	}
	if (r->state == AW_DELETED) {
		if (present)
			verify_fail(v, "%s: deletion was acknowledged but the file is back", r->key);
		return;
	}
	if (r->state == AW_UNLINK && !present)
		return;

	switch (state) {
	case AW_BEGIN:
		break;
	case AW_SYNC:
		if (!r->at_name)
			verify_fail(v, "%s: %" PRIu64 " bytes were fsync'd but %s is gone", r->key, r->acked, r->name);
		else if (r->size_found < r->acked)
			verify_fail(v, "%s: %" PRIu64 " bytes were fsync'd but only %" PRIu64 " are present", r->name,
				    r->acked, r->size_found);
		break;
	case AW_DONE:
		if (!present)
			verify_fail(v, "%s: complete and fsync'd but gone", r->name);
		else
			verify_complete(v, r, "complete and fsync'd");
		break;
	case AW_RENAMED:
		if (!r->at_final)
			verify_fail(v, "%s: renamed to %s (directory fsync'd) but %s", r->key, r->final,
				    r->at_name ? "still under the old name" : "gone");
		else
			verify_complete(v, r, "renamed");
		break;
	case AW_UNLINK:
	case AW_DELETED:
	case _AW_STATE_MAX:
		abort();
	}
}

static int cmd_verify(void) {
	_cleanup_close_ int dirfd = open_dir();
	_cleanup_free_ AckLine *lines = NULL;
	_cleanup_free_ uint8_t *buf = malloc(AW_BLOCK), *want = malloc(AW_BLOCK);
	Verifier v = {};
	struct dirent *de;
	size_t nlines;
	DIR *d;

	if (!buf || !want)
		die("out of memory");
	lines = ack_log_load(&nlines);
	verifier_build(&v, lines, nlines);

	d = fdopendir(dup(dirfd));
	if (!d)
		die("opendir %s: %m", arg_dir);
	errno = 0;
	while ((de = readdir(d))) {
		char key[AW_KEY_MAX];
		Record *r;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		v.files_present++;
		if (!name_to_key(de->d_name, key) || !(r = verifier_find(&v, key))) {
			verify_fail(&v, "%s: a file nobody began to write", de->d_name);
			continue;
		}
		if (strcmp(de->d_name, r->name) == 0)
			r->at_name = true;
		else if (r->final[0] && strcmp(de->d_name, r->final) == 0)
			r->at_final = true;
		else {
			verify_fail(&v, "%s: a name %s was never given", de->d_name, r->key);
			continue;
		}
		verify_file(&v, dirfd, de->d_name, r, buf, want);
		errno = 0;
	}
	if (errno != 0)
		die("readdir %s: %m", arg_dir);
	closedir(d);

	for (size_t i = 0; i < v.nrecs; i++)
		verify_record(&v, &v.recs[i]);

	printf("archwriter verify: %zu keys (begun only %u, fsync'd partly %u, done %u, renamed %u, unlinking %u, "
	       "deleted %u), %u files present, %" PRIu64 " bytes checked, %u failures\n",
	       v.nrecs, v.by_state[AW_BEGIN], v.by_state[AW_SYNC], v.by_state[AW_DONE], v.by_state[AW_RENAMED],
	       v.by_state[AW_UNLINK], v.by_state[AW_DELETED], v.files_present, v.bytes_checked, v.failures);
	free(v.recs);
	return v.failures ? 1 : 0;
}

static int cmd_prune(void) {
	_cleanup_close_ int dirfd = open_dir(), ackfd = open_ack();
	_cleanup_free_ DoneFile *gone = NULL;
	size_t ngone = 0;
	struct dirent *de;
	DIR *d;

	d = fdopendir(dup(dirfd));
	if (!d)
		die("opendir %s: %m", arg_dir);
	errno = 0;
	while ((de = readdir(d))) {
		char key[AW_KEY_MAX];
		unsigned round;
		DoneFile *grown;

		if (!name_to_key(de->d_name, key) || sscanf(key, "r%5u-", &round) != 1 || round >= arg_before_round) {
			errno = 0;
			continue;
		}
		grown = realloc(gone, (ngone + 1) * sizeof(*gone));
		if (!grown)
			die("out of memory");
		gone = grown;
		strcpy(gone[ngone].key, key);
		/* name_to_key() bounded the key, so KEY.part fits */
		memcpy(gone[ngone].name, de->d_name, strlen(de->d_name) + 1);
		ngone++;
		errno = 0;
	}
	if (errno != 0)
		die("readdir %s: %m", arg_dir);
	closedir(d);

	for (size_t i = 0; i < ngone; i++) {
		ack(ackfd, AW_UNLINK, gone[i].key, gone[i].name, 0);
		if (unlinkat(dirfd, gone[i].name, 0) < 0)
			die("unlink %s: %m", gone[i].name);
	}
	if (fsync(dirfd) < 0)
		die("fsync of the directory after pruning: %m");
	for (size_t i = 0; i < ngone; i++)
		ack(ackfd, AW_DELETED, gone[i].key, gone[i].name, 0);
	printf("archwriter prune: %zu files of rounds before %u deleted\n", ngone, arg_before_round);
	return 0;
}

static uint64_t parse_size(const char *s, const char *what) {
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *s == '-')
		die("bad %s \"%s\"", what, s);
	if (*end == 'K' || *end == 'k')
		shift = 10;
	else if (*end == 'M' || *end == 'm')
		shift = 20;
	if (shift)
		end++;
	if (*end != '\0' || v > (UINT64_MAX >> shift))
		die("bad %s \"%s\"", what, s);
	return (uint64_t) v << shift;
}

static void usage(FILE *f) {
	fprintf(f, "usage: fratier-archwriter write  --dir DIR --ack FILE --seed N --round R --writer W\n"
		   "                                [--min-size N] [--max-size N] [--count N]\n"
		   "                                [--mid-fsync] [--rename] [--delete] [--direct]\n"
		   "       fratier-archwriter verify --dir DIR --ack FILE --seed N\n"
		   "       fratier-archwriter prune  --dir DIR --ack FILE --before-round R\n");
}

int main(int argc, char **argv) {
	static const struct option options[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "ack", required_argument, NULL, 'a' },
		{ "seed", required_argument, NULL, 's' },
		{ "round", required_argument, NULL, 'r' },
		{ "writer", required_argument, NULL, 'w' },
		{ "min-size", required_argument, NULL, 'm' },
		{ "max-size", required_argument, NULL, 'M' },
		{ "count", required_argument, NULL, 'c' },
		{ "before-round", required_argument, NULL, 'b' },
		{ "mid-fsync", no_argument, NULL, 'F' },
		{ "rename", no_argument, NULL, 'R' },
		{ "delete", no_argument, NULL, 'D' },
		{ "direct", no_argument, NULL, 'O' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const char *cmd;
	int c;

	while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		switch (c) {
		case 'd': arg_dir = optarg; break;
		case 'a': arg_ack = optarg; break;
		case 's': arg_seed = parse_size(optarg, "seed"); break;
		case 'r': arg_round = (unsigned) MIN(parse_size(optarg, "round"), AW_ROUND_MAX + 1); break;
		case 'w': arg_writer = (unsigned) MIN(parse_size(optarg, "writer"), AW_WRITER_MAX + 1); break;
		case 'm': arg_min_size = parse_size(optarg, "size"); break;
		case 'M': arg_max_size = parse_size(optarg, "size"); break;
		case 'c': arg_count = parse_size(optarg, "count"); break;
		case 'b': arg_before_round = (unsigned) MIN(parse_size(optarg, "round"), AW_ROUND_MAX + 1); break;
		case 'F': arg_mid_fsync = true; break;
		case 'R': arg_rename = true; break;
		case 'D': arg_delete = true; break;
		case 'O': arg_direct = true; break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1 || !arg_dir || !arg_ack) {
		usage(stderr);
		return 2;
	}
	if (arg_round > AW_ROUND_MAX || arg_writer > AW_WRITER_MAX || arg_before_round > AW_ROUND_MAX ||
	    arg_min_size > arg_max_size || arg_max_size > AW_SIZE_MAX) {
		fprintf(stderr, "fratier-archwriter: round, writer or sizes out of range\n");
		return 2;
	}
	cmd = argv[optind];
	if (strcmp(cmd, "write") == 0)
		return cmd_write();
	if (strcmp(cmd, "verify") == 0)
		return cmd_verify();
	if (strcmp(cmd, "prune") == 0)
		return cmd_prune();
	usage(stderr);
	return 2;
}
