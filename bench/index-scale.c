/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * index-scale — does the chunk index hold up when a tier holds hundreds of
 * millions of chunks (bench, not test):
 *
 *   index-scale [--ids N,N,...] [--data-mib M] [--lookups K] [--workdir DIR] [--drop-caches]
 *               [--keep] [--reuse DIR --ids N] [--seed S] [--new-only] [--evict]
 *
 * For each N (default 0,1000000,10000000) a fresh catalog and tier are
 * filled with N synthetic chunk ids (SHA-256 of a counter: as uniform as
 * real ids, no data behind them) in full containers of 2048 chunks, the
 * way a store fills its index; then the real store is opened on it (the
 * time to build its chunk filter is what a mount pays) and the real writer
 * path is timed on M MiB of new incompressible data (every chunk new: the
 * filter, then the index insert), the same data again in a second file
 * (every chunk found: one catalog look-up per container, then the locality
 * cache), and K look-ups of random ids among the N (the worst case: no
 * locality, one B-tree descent each).  With --drop-caches (root) the page
 * cache is dropped before each timed step, so a catalog larger than the
 * cache it finds shows what a look-up costs from disk.  --evict does the
 * same to the catalog's file alone (posix_fadvise DONTNEED: no root, and
 * the neighbours' caches stay), and also before each batch of a merge and
 * every EVICT_LOOKUPS random look-ups: each reads the index from the disk,
 * as when the catalog is many times the RAM.
 *
 * A fill of 100M ids takes about 20 minutes: --keep leaves each row's
 * directory in place, and --reuse DIR times the store on such a directory
 * for the row of N > 0 instead of filling a new one (the fill's columns
 * stay empty; a fill stopped short of N ids goes on to N), so that builds
 * can be compared, alternated, on one index.  Each run's seals add
 * their ids to it: --seed S makes its data differ from earlier runs'
 * (every chunk new again), and a merge that those ids made due runs
 * before the timed steps, as a seal worker runs it after a seal.
 * --new-only stops each row after the new data (no repeat, no random
 * look-ups: one filter build instead of two).
 *
 * The same data is written at every N, so the rows of one run compare as
 * ratios to the N = 0 row; memory is the store's own (filter + locality
 * cache, both bounded) and the process's peak RSS.  64M ids is 1 TB of
 * unique data at 16 KiB chunks: the per-TB figures scale from that.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "common/macros.h"
#include "dedup/bloom.h"
#include "dedup/fingerprint.h"
#include "dedup/store.h"
#include "tier/backend-dir.h"

#define MiB ((uint64_t) 1 << 20)
#define CHUNKS_PER_CONTAINER 2048u
#define SYNTHETIC_PLAIN 16384u
#define SYNTHETIC_FRAME 8192u
/* Half the recent table: the fill merges after each commit, as the daemon's seal workers do after each seal. */
#define IDS_PER_TRANSACTION (CATALOG_INDEX_RECENT_MAX / 2)
#define IDS_PER_TB (UINT64_C(64) << 20)
#define FEED_PIECE (1u << 20)
#define EVICT_LOOKUPS 1000u

typedef struct Options {
	uint64_t ids[16];
	size_t n_ids;
	uint64_t data_bytes;
	uint64_t lookups;
	const char *workdir;
	const char *reuse;
	uint64_t seed;
	bool drop_caches;
	bool keep;
	bool new_only;
	bool evict;
} Options;

typedef struct Row {
	uint64_t ids;
	double fill_s, fill_cpu_s, fill_first_rate, fill_last_rate;
	double merge_cpu_s; /* of the fill, in catalog_index_merge_step() */
	double merge_hold_ms; /* the longest batch of a merge: how long it held the catalog lock */
	uint64_t merge_batches;
	double *merge_holds; /* each batch's, for the 99th percentile */
	double merge_hold_p99_ms;
	uint64_t runs;
	uint64_t catalog_bytes;
	double open_s;
	uint64_t filter_bytes, locality_bytes;
	double new_mbs, new_cpu_s_gb, new_user_s_gb, dup_mbs, dup_cpu_s_gb, dup_user_s_gb;
	uint64_t dup_index_lookups;
	double random_per_s;
	uint64_t peak_rss;
} Row;

static double now_s(clockid_t clock) {
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void die(const char *what, int r) {
	fprintf(stderr, "index-scale: %s: %s\n", what, strerror(-r));
	exit(1);
}

static uint64_t status_kib(const char *field) {
	char line[256];
	uint64_t v = 0;
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, strlen(field)) == 0)
			v = strtoull(line + strlen(field), NULL, 10);
	fclose(f);
	return v * 1024;
}

/* Peak RSS counts from here on (Linux 4.0's clear_refs 5), so each row reports its own. */
static void reset_peak_rss(void) {
	int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void) !write(fd, "5", 1);
		close(fd);
	}
}

/* The catalog's pages out of the page cache (its clean ones: what a checkpoint wrote is written back first). */
static void evict(int fd) {
	if (fd < 0)
		return;
	if (fdatasync(fd) < 0)
		die("fdatasync", -errno);
	int r = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	if (r != 0)
		die("posix_fadvise", -r);
}

static void drop_caches(const Options *o, int evict_fd) {
	evict(evict_fd);
	if (!o->drop_caches)
		return;
	sync();
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "3", 1) != 1)
		die("drop_caches (needs root)", -errno);
	close(fd);
}

/*
 * The i-th of n synthetic ids: SHA-256 of a counter, its first 8 bytes
 * replaced by a point of an even grid over the 64-bit space plus a random
 * offset within the grid's step.  The ids are as uniform as real ones, and
 * ascending in i, so the fill appends at the right edge of the digest
 * index instead of inserting at random: a B-tree built the way a
 * sort-then-build would build it, which is what an index that has held N
 * ids for a while looks like once pages have been split and merged, and
 * minutes for 100M ids instead of hours.
 */
static void synthetic_id(DedupHasher *h, uint64_t i, uint64_t n, uint8_t out[CATALOG_DIGEST_SIZE]) {
	char seed[32];
	DedupChunkId id;
	uint64_t step = UINT64_MAX / MAX(n, 1), prefix, jitter;
	int len = snprintf(seed, sizeof(seed), "index-scale %llu", (unsigned long long) i);
	int r = dedup_hasher_digest(h, seed, (size_t) len, &id);
	if (r < 0)
		die("sha-256", r);
	memcpy(&jitter, id.bytes, sizeof(jitter));
	prefix = i * step + jitter % step;
	for (size_t k = 0; k < sizeof(prefix); k++)
		id.bytes[k] = (uint8_t) (prefix >> (56 - 8 * k));
	memcpy(out, id.bytes, CATALOG_DIGEST_SIZE);
}

/* Every batch of the merges due, each timed: its wall time bounds how long it held the lock. */
static void merge_all(Catalog *c, Row *row, int evict_fd) {
	double cpu = now_s(CLOCK_PROCESS_CPUTIME_ID);
	int r;

	for (;;) {
		evict(evict_fd);
		double t = now_s(CLOCK_MONOTONIC);
		if ((r = catalog_index_merge_step(c, CATALOG_INDEX_RECENT_MAX, CATALOG_INDEX_MERGE_BATCH,
						  CATALOG_INDEX_MERGE_BUDGET_NS, NULL)) < 0)
			die("index merge", r);
		double ms = (now_s(CLOCK_MONOTONIC) - t) * 1e3;
		row->merge_hold_ms = MAX(row->merge_hold_ms, ms);
		if (r == 0) /* nothing due, or the merge's last batch: not told apart, and counted in the longest only */
			break;
		if ((row->merge_batches & (row->merge_batches - 1)) == 0 &&
		    !(row->merge_holds = realloc(row->merge_holds, MAX(row->merge_batches * 2, (uint64_t) 1) * sizeof(double))))
			die("hold times", -ENOMEM);
		row->merge_holds[row->merge_batches++] = ms;
	}
	row->merge_cpu_s += now_s(CLOCK_PROCESS_CPUTIME_ID) - cpu;
}

static int double_cmp(const void *a, const void *b) {
	double x = *(const double *) a, y = *(const double *) b;
	return (x > y) - (x < y);
}

static void merge_hold_p99(Row *row) {
	if (row->merge_batches == 0)
		return;
	qsort(row->merge_holds, row->merge_batches, sizeof(double), double_cmp);
	row->merge_hold_p99_ms = row->merge_holds[row->merge_batches * 99 / 100];
	free(row->merge_holds);
	row->merge_holds = NULL;
}

/*
 * N ids in full containers, committed in large transactions, as a store's
 * index would hold them: each digest is new (catalog_chunk_add_new(), as
 * a writer whose filter never saw it adds it), and the recent table is
 * merged into runs by catalog_index_merge_step(), batch by batch, after
 * each commit; each batch's wall time bounds how long it held the lock.
 */
static void fill(Catalog *c, DedupHasher *h, uint64_t first, Row *row, int evict_fd) {
	uint64_t container = 0, tenth = MAX(row->ids / 10, 1);
	double start = now_s(CLOCK_MONOTONIC), mark = start, cpu = now_s(CLOCK_PROCESS_CPUTIME_ID);
	int r;

	for (uint64_t i = first; i < row->ids; i++) {
		if ((i == first || i % IDS_PER_TRANSACTION == 0) && (r = catalog_begin(c)) < 0)
			die("begin", r);
		if (i == first || i % CHUNKS_PER_CONTAINER == 0) {
			CatalogContainer ct = { .tier = 0, .full = true };
			if ((r = catalog_container_new(c, 0, &ct.id)) < 0)
				die("container", r);
			ct.size = (uint64_t) CHUNKS_PER_CONTAINER * SYNTHETIC_FRAME;
			if ((r = catalog_container_update(c, &ct)) < 0)
				die("container update", r);
			container = ct.id;
		}
		CatalogChunk ch = {
			.tier = 0,
			.container = container,
			.offset = (i % CHUNKS_PER_CONTAINER) * SYNTHETIC_FRAME,
			.frame_size = SYNTHETIC_FRAME,
			.plain_size = SYNTHETIC_PLAIN,
			.refs = 1,
		};
		uint64_t id;
		synthetic_id(h, i, row->ids, ch.digest);
		if ((r = catalog_chunk_add_new(c, &ch, &id)) < 0)
			die("chunk add", r);
		if ((i + 1) % IDS_PER_TRANSACTION == 0 || i + 1 == row->ids) {
			if ((r = catalog_commit(c)) < 0)
				die("commit", r);
			merge_all(c, row, evict_fd);
		}
		if ((i + 1) % tenth == 0) {
			double t = now_s(CLOCK_MONOTONIC), rate = (double) tenth / (t - mark);
			if (i + 1 == tenth)
				row->fill_first_rate = rate;
			row->fill_last_rate = rate;
			mark = t;
			fprintf(stderr, "  %llu ids, %.0f ids/s\n", (unsigned long long) (i + 1), rate);
		}
	}
	row->fill_s = now_s(CLOCK_MONOTONIC) - start;
	row->fill_cpu_s = now_s(CLOCK_PROCESS_CPUTIME_ID) - cpu;
	CatalogIndexState st;
	if ((r = catalog_index_get(c, &st)) < 0)
		die("index state", r);
	row->runs = st.runs;
	merge_hold_p99(row);
}

/* A reused index: the merge an earlier run's seals made due, then the state the fill would report. */
static void merge_due(Catalog *c, Row *row, int evict_fd) {
	CatalogIndexState st;
	int r;

	merge_all(c, row, evict_fd);
	merge_hold_p99(row);
	if ((r = catalog_index_get(c, &st)) < 0)
		die("index state", r);
	row->runs = st.runs;
}

static double user_s(void) {
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double) ru.ru_utime.tv_sec + (double) ru.ru_utime.tv_usec / 1e6;
}

/*
 * Seals data as one new file; returns wall MB/s, CPU s/GB, the user CPU
 * of it (the kernel's share, the containers' writes into the page cache,
 * varied up to ninefold with the memory's state on the development VM:
 * bench/README.md, "New data at 100M ids") and the writer's catalog
 * look-ups.
 */
static void seal(Catalog *c, DedupStore *s, const uint8_t *data, uint64_t len, double *ret_mbs, double *ret_cpu,
		 double *ret_user, uint64_t *ret_lookups) {
	CatalogInode in = { .parent = CATALOG_ROOT_INO, .mode = S_IFREG | 0644, .nlink = 1 };
	DedupWriterStats st;
	DedupWriter *w;
	uint64_t ino;
	int r;

	double wall = now_s(CLOCK_MONOTONIC), cpu = now_s(CLOCK_PROCESS_CPUTIME_ID), user = user_s();
	if ((r = dedup_writer_new(s, NULL, 1, DEDUP_STORE_REGION_DEFAULT, &w)) < 0)
		die("writer", r);
	for (uint64_t off = 0; off < len; off += FEED_PIECE)
		if ((r = dedup_writer_feed(w, data + off, MIN(len - off, FEED_PIECE))) < 0)
			die("feed", r);
	if ((r = dedup_writer_finish(w)) < 0)
		die("finish", r);
	if ((r = catalog_begin(c)) < 0 || (r = catalog_inode_create(c, &in, NULL, &ino)) < 0 ||
	    (r = dedup_writer_commit(w, ino)) < 0 || (r = catalog_commit(c)) < 0)
		die("commit", r);
	wall = now_s(CLOCK_MONOTONIC) - wall;
	cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - cpu;
	user = user_s() - user;
	dedup_writer_stats(w, &st);
	dedup_writer_free(w);
	*ret_mbs = (double) len / 1e6 / wall;
	*ret_cpu = cpu / ((double) len / 1e9);
	*ret_user = user / ((double) len / 1e9);
	*ret_lookups = st.index_lookups;
}

static double random_lookups(Catalog *c, DedupHasher *h, uint64_t ids, uint64_t k, int evict_fd) {
	uint64_t x = 0x9e3779b97f4a7c15u;
	double start = now_s(CLOCK_MONOTONIC);

	for (uint64_t i = 0; i < k; i++) {
		uint8_t digest[CATALOG_DIGEST_SIZE];
		CatalogChunk ch;
		if (i % EVICT_LOOKUPS == 0)
			evict(evict_fd);
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		synthetic_id(h, x % ids, ids, digest);
		int r = catalog_chunk_find(c, 0, digest, &ch);
		if (r < 0)
			die("random look-up", r);
	}
	return (double) k / (now_s(CLOCK_MONOTONIC) - start);
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
	return remove(path);
}

static uint64_t file_size(const char *dir, const char *name) {
	char path[PATH_MAX + 32];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) == 0 ? (uint64_t) st.st_size : 0;
}

static void run(const Options *o, const uint8_t *data, Row *row) {
	char dir[PATH_MAX], path[PATH_MAX + 32];
	DedupStoreStats stats;
	DedupBackend *backend;
	DedupHasher *h;
	DedupStore *s;
	Catalog *c;
	int r;

	bool reuse = o->reuse && row->ids > 0;

	if (reuse)
		snprintf(dir, sizeof(dir), "%s", o->reuse);
	else {
		snprintf(dir, sizeof(dir), "%s/index-scale-XXXXXX", o->workdir);
		if (!mkdtemp(dir))
			die("mkdtemp", -errno);
	}
	snprintf(path, sizeof(path), "%s/tier0", dir);
	if (!reuse && mkdir(path, 0755) < 0)
		die("mkdir", -errno);
	if ((r = tier_backend_dir_open(path, &backend)) < 0)
		die("backend", r);
	snprintf(path, sizeof(path), "%s/catalog.db", dir);
	if ((r = catalog_open(path, 0, 0, &c)) < 0)
		die("catalog", r);
	/* As the daemon does: checkpoints on a thread of their own, not in the commit that fills the WAL. */
	if ((r = catalog_checkpointer_start(c)) < 0)
		die("checkpointer", r);
	if ((r = dedup_hasher_new(&h)) < 0)
		die("hasher", r);
	int evict_fd = o->evict ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (o->evict && evict_fd < 0)
		die("open catalog", -errno);

	fprintf(stderr, "%llu ids in %s\n", (unsigned long long) row->ids, dir);
	reset_peak_rss();
	/*
	 * The index's own sizes, not a count of its rows: that read all of a
	 * 100M-id index (12.6 GB) again, for many minutes beside other work.
	 * Nothing here deletes or retires ids, so the runs' sizes are exact.
	 */
	uint64_t held = 0;
	if (reuse) {
		CatalogIndexState st;
		if ((r = catalog_index_get(c, &st)) < 0)
			die("index state", r);
		held = st.recent + st.frozen + st.in_runs;
	}
	/* A fill stopped midway goes on where it stopped: its ids ascend, so the rest are new. */
	if (held < row->ids)
		fill(c, h, held, row, evict_fd);
	else
		merge_due(c, row, evict_fd);
	double ckpt = now_s(CLOCK_MONOTONIC);
	if ((r = catalog_checkpoint(c)) < 0)
		die("checkpoint", r);
	fprintf(stderr, "  checkpoint (free pages given back, WAL cut) after the merges: %.1f ms\n",
		(now_s(CLOCK_MONOTONIC) - ckpt) * 1e3);
	row->catalog_bytes = file_size(dir, "catalog.db") + file_size(dir, "catalog.db-wal");

	drop_caches(o, evict_fd);
	double start = now_s(CLOCK_MONOTONIC);
	if ((r = dedup_store_open(c, 0, backend, NULL, &s)) < 0)
		die("store open", r);
	row->open_s = now_s(CLOCK_MONOTONIC) - start;
	if ((r = dedup_store_stats(s, &stats)) < 0)
		die("store stats", r);
	row->filter_bytes = stats.filter_bytes;
	row->locality_bytes = stats.locality_bytes;

	uint64_t lookups;
	drop_caches(o, evict_fd);
	fprintf(stderr, "  sealing new data\n");
	seal(c, s, data, o->data_bytes, &row->new_mbs, &row->new_cpu_s_gb, &row->new_user_s_gb, &lookups);
	fprintf(stderr, "  new data sealed\n");
	if (o->new_only)
		goto done;
	/* A repeat comes back days later: a new mount, nothing of the first copy in the locality cache. */
	dedup_store_free(s);
	drop_caches(o, evict_fd);
	if ((r = dedup_store_open(c, 0, backend, NULL, &s)) < 0)
		die("store reopen", r);
	fprintf(stderr, "  sealing the same data again\n");
	seal(c, s, data, o->data_bytes, &row->dup_mbs, &row->dup_cpu_s_gb, &row->dup_user_s_gb, &row->dup_index_lookups);
	if (row->ids > 0) {
		drop_caches(o, evict_fd);
		row->random_per_s = random_lookups(c, h, row->ids, o->lookups, evict_fd);
	}
done:
	row->peak_rss = status_kib("VmHWM:");

	dedup_store_free(s);
	dedup_hasher_free(h);
	catalog_close(c);
	dedup_backend_free(backend);
	if (evict_fd >= 0)
		close(evict_fd);
	if (o->keep || reuse)
		fprintf(stderr, "  kept %s\n", dir);
	else if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0)
		die("cleanup", -errno);
}

/*
 * CPU seconds per GB beside the wall rates: on a shared machine the wall
 * clock measures the neighbours as much as the index.  merge cpu/GB is the
 * fill's merges per GB of new data (16 KiB chunks): what the seal of new
 * data costs besides, later, on a seal worker; hold ms is its longest batch
 * (wall clock), the longest the catalog lock was held by a merge, and
 * hold p99 the 99th percentile of the batches that left work for the next.
 */
static void print_header(FILE *f, const Options *o) {
	fprintf(f, "index-scale: %llu MiB of new data per row (held in memory: counted in peak RSS), %llu random look-ups, page cache %s\n",
		(unsigned long long) (o->data_bytes / MiB), (unsigned long long) o->lookups,
		o->drop_caches ? "dropped before each step" : o->evict ? "catalog evicted before each step and merge batch" : "kept");
	fprintf(f, "%11s %9s %9s %9s %8s %8s %8s %5s %11s %11s %11s %9s %7s %9s %9s %8s %7s %9s %7s %10s %7s %8s %7s %9s %7s %10s %7s %8s %10s %9s\n", "ids",
		"fill s", "fill cpu", "merge cpu", "hold ms", "hold p99", "batches", "runs", "merge cpu/GB", "ids/s first", "ids/s last", "catalog", "B/id", "open s", "filter", "new MB/s",
		"of 0", "new cpu/GB", "of 0", "new user/GB", "of 0", "dup MB/s", "of 0", "dup cpu/GB", "of 0", "dup user/GB", "of 0", "dup look", "random/s",
		"peak RSS");
}

static void print_row(FILE *f, const Row *r, const Row *base) {
	fprintf(f, "%11llu %9.1f %9.1f %9.1f %8.1f %8.1f %8llu %5llu %11.3f %11.0f %11.0f %8.1fM %7.0f %9.2f %8.1fM %8.1f %7.3f %10.2f %7.3f %11.2f %7.3f %8.1f %7.3f %10.2f %7.3f %11.2f %7.3f %8llu %10.0f %8.1fM\n",
		(unsigned long long) r->ids, r->fill_s, r->fill_cpu_s, r->merge_cpu_s, r->merge_hold_ms,
		r->merge_hold_p99_ms, (unsigned long long) r->merge_batches, (unsigned long long) r->runs,
		r->ids ? r->merge_cpu_s / (double) r->ids * (1e9 / SYNTHETIC_PLAIN) : 0.0, r->fill_first_rate, r->fill_last_rate,
		(double) r->catalog_bytes / MiB, r->ids ? (double) r->catalog_bytes / (double) r->ids : 0.0, r->open_s,
		(double) r->filter_bytes / MiB, r->new_mbs, r->new_mbs / base->new_mbs, r->new_cpu_s_gb,
		r->new_cpu_s_gb / base->new_cpu_s_gb, r->new_user_s_gb, r->new_user_s_gb / base->new_user_s_gb, r->dup_mbs,
		r->dup_mbs / base->dup_mbs, r->dup_cpu_s_gb, r->dup_cpu_s_gb / base->dup_cpu_s_gb, r->dup_user_s_gb,
		r->dup_user_s_gb / base->dup_user_s_gb, (unsigned long long) r->dup_index_lookups, r->random_per_s,
		(double) r->peak_rss / MiB);
}

static void usage(FILE *f) {
	fprintf(f, "usage: index-scale [--ids N,N,...] [--data-mib M] [--lookups K] [--workdir DIR] [--drop-caches]\n"
		   "                   [--keep] [--reuse DIR --ids N] [--seed S] [--new-only] [--evict]\n");
}

static void parse(int argc, char **argv, Options *o) {
	static const struct option longopts[] = {
		{ "ids", required_argument, NULL, 'i' },
		{ "data-mib", required_argument, NULL, 'd' },
		{ "lookups", required_argument, NULL, 'l' },
		{ "workdir", required_argument, NULL, 'w' },
		{ "drop-caches", no_argument, NULL, 'c' },
		{ "keep", no_argument, NULL, 'k' },
		{ "reuse", required_argument, NULL, 'r' },
		{ "seed", required_argument, NULL, 's' },
		{ "new-only", no_argument, NULL, 'n' },
		{ "evict", no_argument, NULL, 'e' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	const char *ids = "0,1000000,10000000";
	int opt;

	*o = (Options) { .data_bytes = 256 * MiB, .lookups = 100000, .workdir = "/var/tmp" };
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'i': ids = optarg; break;
		case 'd': o->data_bytes = strtoull(optarg, NULL, 10) * MiB; break;
		case 'l': o->lookups = strtoull(optarg, NULL, 10); break;
		case 'w': o->workdir = optarg; break;
		case 'c': o->drop_caches = true; break;
		case 'k': o->keep = true; break;
		case 'r': o->reuse = optarg; break;
		case 's': o->seed = strtoull(optarg, NULL, 10); break;
		case 'n': o->new_only = true; break;
		case 'e': o->evict = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	for (const char *p = ids; *p && o->n_ids < ELEMENTSOF(o->ids);) {
		char *end;
		errno = 0;
		o->ids[o->n_ids++] = strtoull(p, &end, 10);
		if (errno || end == p || (*end && *end != ',')) {
			usage(stderr);
			exit(2);
		}
		p = *end ? end + 1 : end;
	}
	size_t filled = 0;
	for (size_t i = 0; i < o->n_ids; i++)
		filled += o->ids[i] > 0;
	/* A reused directory is the one row of N > 0: its N, which the random look-ups draw from, is the caller's to name. */
	if (optind != argc || o->n_ids == 0 || o->data_bytes == 0 || o->lookups == 0 || (o->reuse && filled != 1)) {
		usage(stderr);
		exit(2);
	}
}

int main(int argc, char **argv) {
	Row rows[ELEMENTSOF(((Options *) NULL)->ids)] = {};
	Options o;
	uint8_t *data;

	parse(argc, argv, &o);
	uint64_t x = 0x2545f4914f6cdd1du ^ (o.seed * 0x9e3779b97f4a7c15u);
	data = malloc(o.data_bytes);
	if (!data)
		die("data", -ENOMEM);
	for (uint64_t i = 0; i + 8 <= o.data_bytes; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(data + i, &x, 8);
	}
	for (size_t i = 0; i < o.n_ids; i++) {
		rows[i].ids = o.ids[i];
		run(&o, data, &rows[i]);
		/* Each row as it ends: a long run stopped midway keeps what it measured. */
		if (i == 0)
			print_header(stderr, &o);
		print_row(stderr, &rows[i], &rows[0]);
	}

	print_header(stdout, &o);
	for (size_t i = 0; i < o.n_ids; i++)
		print_row(stdout, &rows[i], &rows[0]);
	/* Below a few million ids the filter is its minimum size: only a large row scales honestly. */
	const Row *last = &rows[o.n_ids - 1];
	if (last->ids >= 4 * DEDUP_BLOOM_CAPACITY_MIN)
		printf("per TB of unique data (64M ids), from the last row: filter %.0f MiB, locality cache %.0f MiB (fixed), catalog on disk %.1f GiB\n",
		       (double) last->filter_bytes / (double) last->ids * IDS_PER_TB / MiB,
		       (double) last->locality_bytes / MiB,
		       (double) last->catalog_bytes / (double) last->ids * IDS_PER_TB / (1024.0 * MiB));
	free(data);
	return 0;
}
