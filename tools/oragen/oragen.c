/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * oragen: a deterministic generator of Oracle-like Fast Recovery Area content
 * (archived redo logs, RMAN backup pieces, image copies) over several days of
 * a simulated database, with a manifest that says what each file is and how
 * much of it a perfect deduplicator would have to keep.
 *
 * Invariants:
 *  1. Output is a function of the command line only: no clock, no host state,
 *     no hash-table or allocation order.  Same arguments, same bytes.
 *  2. Each day's files reflect the database at that day's 22:00 (backups) or
 *     the redo generated up to then (archived logs), and the SCNs agree: the
 *     backup checkpoint is the next-SCN of the day's last archived log.
 *  3. The manifest lists every file written, in the order written, with its
 *     exact size.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macros.h"
#include "tools/oragen/oragen.h"

#define ORAGEN_OMF_RAND_LEN 8

static const char *arg_out;
static const char *arg_manifest;
static uint64_t arg_seed = 1;
static unsigned arg_days = 3;
static unsigned arg_datafiles = 4;
static uint64_t arg_datafile_size = 256ull << 20;
static unsigned arg_archivelogs_per_day = 4;
static uint64_t arg_archivelog_size = 64ull << 20;
static double arg_change_rate = 0.05;
static unsigned arg_filesperset = 4;
static unsigned arg_image_copies = 1;
static const char *arg_db_name = "ORCL";
static int64_t arg_start = 1704067200; /* 2024-01-01 */
static bool arg_zstd = true;
static bool arg_quiet;

typedef enum FileClass {
	CLASS_ARCHIVELOG,
	CLASS_BACKUPPIECE,
	CLASS_IMAGECOPY,
	_CLASS_MAX,
} FileClass;

static const char *const class_names[_CLASS_MAX] = {
	[CLASS_ARCHIVELOG] = "archivelog",
	[CLASS_BACKUPPIECE] = "backuppiece",
	[CLASS_IMAGECOPY] = "imagecopy",
};

typedef struct Entry {
	char path[256];
	FileClass cls;
	unsigned day;
	uint64_t size;
	char *extra; /* class-specific JSON members, "" or ", \"k\": v, ..." */
} Entry;

typedef struct Run {
	OraDb db;
	int dirfd;
	Datafile **dfs;
	Ideal ideal;
	Entry *entries;
	size_t nentries;
	uint64_t framing;
	uint64_t changed_blocks;
	uint32_t set_count;
} Run;

static void help(void) {
	printf("NAME\n"
	       "  %1$s - generate Oracle-like Fast Recovery Area content\n"
	       "\n"
	       "SYNOPSIS\n"
	       "  %1$s --out DIR [OPTIONS]\n"
	       "\n"
	       "DESCRIPTION\n"
	       "  Simulates a database for a number of days and writes, under DIR, what its\n"
	       "  Fast Recovery Area would hold: archived redo logs, a daily full RMAN backup\n"
	       "  (datafiles multiplexed into backup pieces), a daily BACKUP ARCHIVELOG piece\n"
	       "  and image copies, plus a JSON manifest.  Output depends only on the options:\n"
	       "  the same options give the same bytes.  Day 1 formats the datafiles; each\n"
	       "  later day changes --change-rate of their blocks, in clustered runs.\n"
	       "\n"
	       "OPTIONS\n"
	       "  -o, --out DIR                output directory, new or empty\n"
	       "  -s, --seed N                 seed of all content and names (1)\n"
	       "  -d, --days D                 days to simulate (3)\n"
	       "      --datafiles N            datafiles in the database (4)\n"
	       "      --datafile-size SIZE     size of each datafile, 8 KiB blocks, >= 1M (256M)\n"
	       "      --archivelogs-per-day N  archived logs per day, 0 for none (4)\n"
	       "      --archivelog-size SIZE   online log size, >= 64K; archived logs are 75-100%%\n"
	       "                               of it, as ARCn copies only what was written (64M)\n"
	       "      --change-rate F          fraction of formatted blocks changed per day (0.05)\n"
	       "      --filesperset N          datafiles multiplexed into one backup piece (4)\n"
	       "      --image-copies N         image copies of datafiles 1..N every day (1)\n"
	       "      --db-name NAME           DB_UNIQUE_NAME, 1-8 of A-Z 0-9 _ (ORCL)\n"
	       "      --start-date YYYY-MM-DD  date of day 1 (2024-01-01)\n"
	       "  -m, --manifest FILE          where to write the manifest (DIR/manifest.json)\n"
	       "      --no-zstd                skip the zstd -3 sizing of the ideal (faster)\n"
	       "  -q, --quiet                  no summary line on stdout\n"
	       "  -h, --help                   show this help\n"
	       "      --version                show the version\n"
	       "  SIZE is bytes, or a number with a K, M or G suffix (powers of 1024).\n"
	       "\n"
	       "FILES\n"
	       "  Each day writes, under DIR/DB_UNIQUE_NAME/ (Oracle OMF names):\n"
	       "  archivelog/YYYY_MM_DD/o1_mf_1_SEQ_RAND_.arc         archived logs, thread 1\n"
	       "  backupset/YYYY_MM_DD/o1_mf_nnndf_TAGxxx_RAND_.bkp   full backup, 22:00\n"
	       "  backupset/YYYY_MM_DD/o1_mf_annnn_TAGxxx_RAND_.bkp   the day's archived logs\n"
	       "  datafile/o1_mf_TSNAME_RAND_.dbf                     image copies\n"
	       "  Byte layouts: tools/oragen/oracle-format.h.  Manifest and the \"ideal\"\n"
	       "  unique size: tools/oragen/README.md.\n"
	       "\n"
	       "EXIT STATUS\n"
	       "  0 on success, 1 on a usage or I/O error (with a message on stderr).\n"
	       "\n"
	       "EXAMPLES\n"
	       "  %1$s --out /tmp/fra --datafile-size 2M --archivelog-size 256K   (~30 MB)\n"
	       "  %1$s --out /srv/bench/fra --seed 7 --days 7                     (~10 GB)\n",
	       program_invocation_short_name);
}

/* ---- argument parsing ----------------------------------------------------- */

static int parse_u64(const char *s, uint64_t *ret) {
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int parse_uint(const char *s, unsigned min, unsigned max, unsigned *ret) {
	uint64_t v;
	int r = parse_u64(s, &v);

	if (r < 0)
		return r;
	if (v < min || v > max)
		return -ERANGE;
	*ret = (unsigned) v;
	return 0;
}

static int parse_size(const char *s, uint64_t *ret) {
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (end == s)
		return -EINVAL;
	switch (*end) {
	case 0:
		break;
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	default:
		return -EINVAL;
	}
	if (*end && end[1] && !(end[1] == 'i' && end[2] == 'B' && !end[3]) && !(end[1] == 'B' && !end[2]))
		return -EINVAL;
	if (v > (UINT64_MAX >> shift))
		return -ERANGE;
	*ret = (uint64_t) v << shift;
	return 0;
}

static int parse_date(const char *s, int64_t *ret) {
	int y, m, d, n = 0;

	if (sscanf(s, "%4d-%2d-%2d%n", &y, &m, &d, &n) != 3 || s[n] || n != 10)
		return -EINVAL;
	/* Datafiles were created a year before day 1, and kcrf time starts in 1988. */
	if (y < 1990 || y > 2100 || m < 1 || m > 12 || d < 1 || d > 31)
		return -ERANGE;
	*ret = unix_from_civil(y, m, d);
	return 0;
}

static bool db_name_is_valid(const char *s) {
	size_t n = strlen(s);

	if (n == 0 || n > ORAGEN_DB_NAME_MAX || !(s[0] >= 'A' && s[0] <= 'Z'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

static int parse_argv(int argc, char *argv[]) {
	enum {
		ARG_DATAFILES = 0x100,
		ARG_DATAFILE_SIZE,
		ARG_ARCHIVELOGS_PER_DAY,
		ARG_ARCHIVELOG_SIZE,
		ARG_CHANGE_RATE,
		ARG_FILESPERSET,
		ARG_IMAGE_COPIES,
		ARG_DB_NAME,
		ARG_START_DATE,
		ARG_NO_ZSTD,
		ARG_VERSION,
	};
	static const struct option options[] = {
		{ "out", required_argument, NULL, 'o' },
		{ "seed", required_argument, NULL, 's' },
		{ "days", required_argument, NULL, 'd' },
		{ "datafiles", required_argument, NULL, ARG_DATAFILES },
		{ "datafile-size", required_argument, NULL, ARG_DATAFILE_SIZE },
		{ "archivelogs-per-day", required_argument, NULL, ARG_ARCHIVELOGS_PER_DAY },
		{ "archivelog-size", required_argument, NULL, ARG_ARCHIVELOG_SIZE },
		{ "change-rate", required_argument, NULL, ARG_CHANGE_RATE },
		{ "filesperset", required_argument, NULL, ARG_FILESPERSET },
		{ "image-copies", required_argument, NULL, ARG_IMAGE_COPIES },
		{ "db-name", required_argument, NULL, ARG_DB_NAME },
		{ "start-date", required_argument, NULL, ARG_START_DATE },
		{ "manifest", required_argument, NULL, 'm' },
		{ "no-zstd", no_argument, NULL, ARG_NO_ZSTD },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, ARG_VERSION },
		{},
	};
	int c, r;

	while ((c = getopt_long(argc, argv, "o:s:d:m:qh", options, NULL)) >= 0) {
		switch (c) {
		case 'o':
			arg_out = optarg;
			break;
		case 's':
			r = parse_u64(optarg, &arg_seed);
			if (r < 0)
				return log_error_errno(r, "invalid --seed '%s'", optarg);
			break;
		case 'd':
			r = parse_uint(optarg, 1, ORAGEN_DAYS_MAX, &arg_days);
			if (r < 0)
				return log_error_errno(r, "invalid --days '%s' (1..%u)", optarg, ORAGEN_DAYS_MAX);
			break;
		case ARG_DATAFILES:
			r = parse_uint(optarg, 1, ORAGEN_DATAFILES_MAX, &arg_datafiles);
			if (r < 0)
				return log_error_errno(r, "invalid --datafiles '%s' (1..%u)", optarg,
						       ORAGEN_DATAFILES_MAX);
			break;
		case ARG_DATAFILE_SIZE:
			r = parse_size(optarg, &arg_datafile_size);
			if (r < 0 || arg_datafile_size % ORA_BLOCK_SIZE ||
			    arg_datafile_size / ORA_BLOCK_SIZE < ORAGEN_DATAFILE_BLOCKS_MIN ||
			    arg_datafile_size / ORA_BLOCK_SIZE > ORAGEN_DATAFILE_BLOCKS_MAX)
				return log_error_errno(r < 0 ? r : -ERANGE,
						       "invalid --datafile-size '%s' (8 KiB blocks, 1M..32G)", optarg);
			break;
		case ARG_ARCHIVELOGS_PER_DAY:
			r = parse_uint(optarg, 0, ORAGEN_ARCHIVELOGS_PER_DAY_MAX, &arg_archivelogs_per_day);
			if (r < 0)
				return log_error_errno(r, "invalid --archivelogs-per-day '%s' (0..%u)", optarg,
						       ORAGEN_ARCHIVELOGS_PER_DAY_MAX);
			break;
		case ARG_ARCHIVELOG_SIZE:
			r = parse_size(optarg, &arg_archivelog_size);
			if (r < 0 || arg_archivelog_size % ORA_REDO_BLOCK_SIZE ||
			    arg_archivelog_size < ORAGEN_ARCHIVELOG_SIZE_MIN ||
			    arg_archivelog_size > ORAGEN_ARCHIVELOG_SIZE_MAX)
				return log_error_errno(r < 0 ? r : -ERANGE,
						       "invalid --archivelog-size '%s' (512-byte blocks, 64K..4G)", optarg);
			break;
		case ARG_CHANGE_RATE: {
			char *end;

			errno = 0;
			arg_change_rate = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(arg_change_rate >= 0.0 && arg_change_rate <= 1.0))
				return log_error_errno(-EINVAL, "invalid --change-rate '%s' (0..1)", optarg);
			break;
		}
		case ARG_FILESPERSET:
			r = parse_uint(optarg, 1, ORAGEN_FILESPERSET_MAX, &arg_filesperset);
			if (r < 0)
				return log_error_errno(r, "invalid --filesperset '%s' (1..%u)", optarg,
						       ORAGEN_FILESPERSET_MAX);
			break;
		case ARG_IMAGE_COPIES:
			r = parse_uint(optarg, 0, ORAGEN_DATAFILES_MAX, &arg_image_copies);
			if (r < 0)
				return log_error_errno(r, "invalid --image-copies '%s'", optarg);
			break;
		case ARG_DB_NAME:
			if (!db_name_is_valid(optarg))
				return log_error_errno(-EINVAL, "invalid --db-name '%s' (1-8 of A-Z 0-9 _)", optarg);
			arg_db_name = optarg;
			break;
		case ARG_START_DATE:
			r = parse_date(optarg, &arg_start);
			if (r < 0)
				return log_error_errno(r, "invalid --start-date '%s' (YYYY-MM-DD)", optarg);
			break;
		case 'm':
			arg_manifest = optarg;
			break;
		case ARG_NO_ZSTD:
			arg_zstd = false;
			break;
		case 'q':
			arg_quiet = true;
			break;
		case 'h':
			help();
			return 0;
		case ARG_VERSION:
			printf("oragen %s\n", PACKAGE_VERSION);
			return 0;
		default:
			return -EINVAL;
		}
	}
	if (optind < argc)
		return log_error_errno(-EINVAL, "unexpected argument '%s'", argv[optind]);
	if (!arg_out)
		return log_error_errno(-EINVAL, "--out DIR is required (see --help)");
	if (arg_image_copies > arg_datafiles)
		return log_error_errno(-EINVAL, "--image-copies %u exceeds --datafiles %u", arg_image_copies,
				       arg_datafiles);
	return 1;
}

/* ---- names ------------------------------------------------------------------ */

/* OMF's 8-character unique part, here a hash of what the file is. */
static void omf_rand(const OraDb *db, uint64_t kind, uint64_t a, uint64_t b, char ret[ORAGEN_OMF_RAND_LEN + 1]) {
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	uint64_t h = hash4(db->seed, kind, a, b);

	for (unsigned i = 0; i < ORAGEN_OMF_RAND_LEN; i++) {
		ret[i] = alphabet[h % 36];
		h = i % 4 == 3 ? mix64(h) : h / 36;
	}
	ret[ORAGEN_OMF_RAND_LEN] = 0;
}

/* Years are 1988..2100+ORAGEN_DAYS_MAX/365 here, so the fixed widths hold. */
#define DAY_DIR_MAX 16
#define TAG_MAX 32
#define ISO_TIME_MAX 32

static void day_dir(int64_t t, char ret[DAY_DIR_MAX]) {
	CivilTime c;

	civil_from_unix(t, &c);
	(void) snprintf(ret, DAY_DIR_MAX, "%04u_%02u_%02u", (unsigned) c.year % 10000u, (unsigned) c.month % 100u,
			(unsigned) c.day % 100u);
}

static void make_tag(int64_t t, char ret[TAG_MAX]) {
	CivilTime c;

	civil_from_unix(t, &c);
	(void) snprintf(ret, TAG_MAX, "TAG%04u%02u%02uT%02u%02u%02u", (unsigned) c.year % 10000u,
			(unsigned) c.month % 100u, (unsigned) c.day % 100u, (unsigned) c.hour % 100u,
			(unsigned) c.minute % 100u, (unsigned) c.second % 100u);
}

static void iso_time(int64_t t, char ret[ISO_TIME_MAX]) {
	CivilTime c;

	civil_from_unix(t, &c);
	(void) snprintf(ret, ISO_TIME_MAX, "%04u-%02u-%02uT%02u:%02u:%02uZ", (unsigned) c.year % 10000u,
			(unsigned) c.month % 100u, (unsigned) c.day % 100u, (unsigned) c.hour % 100u,
			(unsigned) c.minute % 100u, (unsigned) c.second % 100u);
}

/* ---- manifest ----------------------------------------------------------------- */

static Entry *entry_add(Run *run, const char *path, FileClass cls, unsigned day) {
	Entry *e = reallocarray(run->entries, run->nentries + 1, sizeof(Entry));

	if (!e)
		return NULL;
	run->entries = e;
	e = &e[run->nentries++];
	*e = (Entry) { .cls = cls, .day = day };
	(void) snprintf(e->path, sizeof(e->path), "%s", path);
	return e;
}

static int write_manifest(const Run *run) {
	_cleanup_free_ char *path = NULL;
	FILE *f;
	uint64_t logical = 0, by_class[_CLASS_MAX] = {};
	const Ideal *id = &run->ideal;
	uint64_t unique = id->blocks * ORA_BLOCK_SIZE + id->redo_bytes;
	char start[ISO_TIME_MAX];
	int r = 0;

	if (arg_manifest)
		path = strdup(arg_manifest);
	else if (asprintf(&path, "%s/manifest.json", arg_out) < 0)
		path = NULL;
	if (!path)
		return -ENOMEM;

	for (size_t i = 0; i < run->nentries; i++) {
		logical += run->entries[i].size;
		by_class[run->entries[i].cls] += run->entries[i].size;
	}

	f = fopen(path, "we");
	if (!f)
		return log_error_errno(errno, "failed to create manifest %s: %m", path);

	iso_time(arg_start, start);
	fprintf(f, "{\n  \"generator\": \"oragen\",\n  \"format\": 1,\n");
	fprintf(f,
		"  \"params\": {\"seed\": %" PRIu64 ", \"days\": %u, \"datafiles\": %u, \"datafile_size\": %" PRIu64
		", \"archivelogs_per_day\": %u, \"archivelog_size\": %" PRIu64
		", \"change_rate\": %.6g, \"filesperset\": %u, \"image_copies\": %u, \"db_name\": \"%s\", "
		"\"start_date\": \"%.10s\", \"zstd\": %s},\n",
		arg_seed, arg_days, arg_datafiles, arg_datafile_size, arg_archivelogs_per_day, arg_archivelog_size,
		arg_change_rate, arg_filesperset, arg_image_copies, arg_db_name, start, arg_zstd ? "true" : "false");
	fprintf(f, "  \"database\": {\"dbid\": %u, \"db_name\": \"%s\", \"thread\": 1, \"block_size\": %u},\n",
		run->db.dbid, run->db.db_name, ORA_BLOCK_SIZE);

	fprintf(f, "  \"files\": [\n");
	for (size_t i = 0; i < run->nentries; i++) {
		const Entry *e = &run->entries[i];

		fprintf(f, "    {\"path\": \"%s\", \"class\": \"%s\", \"day\": %u, \"size\": %" PRIu64 "%s}%s\n",
			e->path, class_names[e->cls], e->day, e->size, e->extra ? e->extra : "",
			i + 1 < run->nentries ? "," : "");
	}
	fprintf(f, "  ],\n");

	fprintf(f, "  \"totals\": {\"files\": %zu, \"logical_bytes\": %" PRIu64, run->nentries, logical);
	for (FileClass c = 0; c < _CLASS_MAX; c++)
		fprintf(f, ", \"%s_bytes\": %" PRIu64, class_names[c], by_class[c]);
	fprintf(f, ", \"framing_bytes\": %" PRIu64 ", \"changed_blocks\": %" PRIu64 "},\n", run->framing,
		run->changed_blocks);

	fprintf(f, "  \"ideal\": {\"unique_datafile_blocks\": %" PRIu64 ", \"unique_datafile_bytes\": %" PRIu64
		   ", \"unique_redo_bytes\": %" PRIu64 ", \"unique_bytes\": %" PRIu64,
		id->blocks, id->blocks * ORA_BLOCK_SIZE, id->redo_bytes, unique);
	if (arg_zstd)
		fprintf(f, ", \"zstd3_datafile_bytes\": %" PRIu64 ", \"zstd3_redo_bytes\": %" PRIu64
			   ", \"zstd3_bytes\": %" PRIu64 ", \"zstd3_stream_bytes\": %" PRIu64,
			id->blocks_zstd, id->redo_zstd, id->blocks_zstd + id->redo_zstd, id->stream_zstd);
	else
		fprintf(f, ", \"zstd3_datafile_bytes\": null, \"zstd3_redo_bytes\": null, \"zstd3_bytes\": null"
			   ", \"zstd3_stream_bytes\": null");
	fprintf(f, ", \"dedup_ratio\": %.4f", unique ? (double) logical / (double) unique : 0.0);
	if (arg_zstd && id->blocks_zstd + id->redo_zstd > 0)
		fprintf(f, ", \"total_ratio\": %.4f", (double) logical / (double) (id->blocks_zstd + id->redo_zstd));
	fprintf(f, "}\n}\n");

	if (ferror(f))
		r = -EIO;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	if (r < 0)
		return log_error_errno(r, "failed to write manifest %s: %m", path);
	return 0;
}

/* ---- the days ----------------------------------------------------------------- */

static int file_done(Run *run, Entry *e, Writer *w) {
	uint64_t size = writer_offset(w);
	int r = writer_close(w);

	if (r < 0)
		return log_error_errno(r, "failed to write %s: %m", e->path);
	e->size = size;
	return 0;
}

static void plan_archivelogs(Run *run, unsigned day, ArchLog *logs) {
	const OraDb *db = &run->db;
	unsigned n = arg_archivelogs_per_day;
	int64_t period = ORAGEN_BACKUP_TIME / (int64_t) n;
	int64_t start = day == 1 ? oradb_day_start(db, 1) : oradb_day_start(db, day - 1) + ORAGEN_BACKUP_TIME;

	for (unsigned i = 0; i < n; i++) {
		ArchLog *l = &logs[i];
		uint64_t h = hash3(db->seed, 0xa4c, (uint64_t) day << 32 | i);
		int64_t end = oradb_day_start(db, day) + period * (i + 1);
		uint64_t max_blocks = arg_archivelog_size / ORA_REDO_BLOCK_SIZE;
		char dir[DAY_DIR_MAX], rnd[ORAGEN_OMF_RAND_LEN + 1];

		/* Log switches are not on the clock; the day's last one is forced by the backup. */
		if (i + 1 < n)
			end -= (int64_t) (h % (uint64_t) MAX(period / 10, 1));
		*l = (ArchLog) {
			.day = day,
			.thread = 1,
			.sequence = db->first_sequence + (day - 1) * n + i,
			.low_time = start,
			.next_time = end,
			.low_scn = oradb_scn_at(db, start),
			.next_scn = oradb_scn_at(db, end),
			/* ARCn copies what was written: 75-100% of the online log. */
			.blocks = (uint32_t) MAX(max_blocks * (75 + (h >> 32) % 26) / 100, 3),
		};
		day_dir(end, dir);
		omf_rand(db, 0xa4c, l->thread, l->sequence, rnd);
		(void) snprintf(l->path, sizeof(l->path), "%s/archivelog/%s/o1_mf_%u_%u_%s_.arc", db->db_name, dir,
				(unsigned) l->thread, (unsigned) l->sequence, rnd);
		start = end;
	}
}

static int write_archivelogs(Run *run, const ArchLog *logs, unsigned n) {
	for (unsigned i = 0; i < n; i++) {
		const ArchLog *l = &logs[i];
		char t1[ISO_TIME_MAX], t2[ISO_TIME_MAX];
		Entry *e;
		Writer w;
		int r;

		e = entry_add(run, l->path, CLASS_ARCHIVELOG, l->day);
		if (!e)
			return log_oom();
		iso_time(l->low_time, t1);
		iso_time(l->next_time, t2);
		if (asprintf(&e->extra,
			     ", \"thread\": %u, \"sequence\": %u, \"low_scn\": %" PRIu64 ", \"next_scn\": %" PRIu64
			     ", \"low_time\": \"%s\", \"next_time\": \"%s\"",
			     (unsigned) l->thread, (unsigned) l->sequence, l->low_scn, l->next_scn, t1, t2) < 0) {
			e->extra = NULL;
			return log_oom();
		}

		r = writer_open(&w, run->dirfd, l->path);
		if (r < 0)
			return log_error_errno(r, "failed to create %s: %m", l->path);
		w.tap = ideal_redo_tap;
		w.tap_data = &run->ideal;
		r = redo_write(&run->db, l, arg_datafiles, &w);
		if (r < 0) {
			(void) writer_close(&w);
			return log_error_errno(r, "failed to write %s: %m", l->path);
		}
		r = file_done(run, e, &w);
		ideal_redo_end(&run->ideal);
		if (r < 0)
			return r;
	}
	return 0;
}

static int write_datafile_backup(Run *run, unsigned day) {
	const OraDb *db = &run->db;
	int64_t t = oradb_day_start(db, day) + ORAGEN_BACKUP_TIME;
	char tag[TAG_MAX], dir[DAY_DIR_MAX];

	make_tag(t, tag);
	day_dir(t, dir);
	for (unsigned first = 0; first < arg_datafiles; first += arg_filesperset) {
		unsigned n = MIN(arg_filesperset, arg_datafiles - first);
		PieceInfo pi = {
			.tag = tag, .time = t,
			.set_stamp = ora_kcrf_time(t) + first, .set_count = ++run->set_count,
		};
		char path[256], rnd[ORAGEN_OMF_RAND_LEN + 1], *list = NULL;
		size_t listlen = 0;
		uint64_t framing;
		FILE *m;
		Entry *e;
		Writer w;
		int r;

		omf_rand(db, 0xbd, day, first, rnd);
		(void) snprintf(path, sizeof(path), "%s/backupset/%s/o1_mf_nnndf_%s_%s_.bkp", db->db_name, dir, tag, rnd);
		e = entry_add(run, path, CLASS_BACKUPPIECE, day);
		if (!e)
			return log_oom();

		m = open_memstream(&list, &listlen);
		if (!m)
			return log_oom();
		fprintf(m, ", \"content\": \"datafile\", \"tag\": \"%s\", \"datafiles\": [", tag);
		for (unsigned i = 0; i < n; i++)
			fprintf(m, "%s%u", i ? ", " : "", first + i + 1);
		fprintf(m, "], \"ckpt_scn\": %" PRIu64, datafile_checkpoint_scn(run->dfs[first]));
		if (fclose(m) != 0) {
			free(list);
			return log_oom();
		}
		e->extra = list;

		r = writer_open(&w, run->dirfd, path);
		if (r < 0)
			return log_error_errno(r, "failed to create %s: %m", path);
		r = backup_datafiles(db, &pi, run->dfs + first, n, &run->ideal, &w, &framing);
		if (r < 0) {
			(void) writer_close(&w);
			return log_error_errno(r, "failed to write %s: %m", path);
		}
		run->framing += framing;
		r = file_done(run, e, &w);
		if (r < 0)
			return r;
	}
	return 0;
}

static int write_archivelog_backup(Run *run, unsigned day, const ArchLog *logs, unsigned nlogs) {
	const OraDb *db = &run->db;
	int64_t t = oradb_day_start(db, day) + ORAGEN_ARCHIVELOG_BACKUP_TIME;
	char tag[TAG_MAX], dir[DAY_DIR_MAX];

	make_tag(t, tag);
	day_dir(t, dir);
	for (unsigned first = 0; first < nlogs; first += ORAGEN_PH_ENTRIES_MAX) {
		unsigned n = MIN((unsigned) ORAGEN_PH_ENTRIES_MAX, nlogs - first);
		PieceInfo pi = {
			.tag = tag, .time = t,
			.set_stamp = ora_kcrf_time(t) + first, .set_count = ++run->set_count,
		};
		char path[256], rnd[ORAGEN_OMF_RAND_LEN + 1], *list = NULL;
		size_t listlen = 0;
		uint64_t framing;
		FILE *m;
		Entry *e;
		Writer w;
		int r;

		omf_rand(db, 0xab, day, first, rnd);
		(void) snprintf(path, sizeof(path), "%s/backupset/%s/o1_mf_annnn_%s_%s_.bkp", db->db_name, dir, tag, rnd);
		e = entry_add(run, path, CLASS_BACKUPPIECE, day);
		if (!e)
			return log_oom();

		m = open_memstream(&list, &listlen);
		if (!m)
			return log_oom();
		fprintf(m, ", \"content\": \"archivelog\", \"tag\": \"%s\", \"sequences\": [", tag);
		for (unsigned i = 0; i < n; i++)
			fprintf(m, "%s%u", i ? ", " : "", (unsigned) logs[first + i].sequence);
		fprintf(m, "]");
		if (fclose(m) != 0) {
			free(list);
			return log_oom();
		}
		e->extra = list;

		r = writer_open(&w, run->dirfd, path);
		if (r < 0)
			return log_error_errno(r, "failed to create %s: %m", path);
		r = backup_archivelogs(db, &pi, logs + first, n, arg_datafiles, &w, &framing);
		if (r < 0) {
			(void) writer_close(&w);
			return log_error_errno(r, "failed to write %s: %m", path);
		}
		run->framing += framing;
		r = file_done(run, e, &w);
		if (r < 0)
			return r;
	}
	return 0;
}

static int write_image_copies(Run *run, unsigned day) {
	const OraDb *db = &run->db;

	for (unsigned i = 0; i < arg_image_copies; i++) {
		Datafile *df = run->dfs[i];
		char path[256], rnd[ORAGEN_OMF_RAND_LEN + 1], ts[sizeof(df->ts_name)];
		Entry *e;
		Writer w;
		int r;

		for (size_t k = 0; k < sizeof(ts); k++)
			ts[k] = (char) ((df->ts_name[k] >= 'A' && df->ts_name[k] <= 'Z') ? df->ts_name[k] + 32 : df->ts_name[k]);
		omf_rand(db, 0x1c, day, df->file_no, rnd);
		(void) snprintf(path, sizeof(path), "%s/datafile/o1_mf_%s_%s_.dbf", db->db_name, ts, rnd);
		e = entry_add(run, path, CLASS_IMAGECOPY, day);
		if (!e)
			return log_oom();
		if (asprintf(&e->extra, ", \"datafile\": %u, \"ckpt_scn\": %" PRIu64, df->file_no,
			     datafile_checkpoint_scn(df)) < 0) {
			e->extra = NULL;
			return log_oom();
		}

		r = writer_open(&w, run->dirfd, path);
		if (r < 0)
			return log_error_errno(r, "failed to create %s: %m", path);
		r = imagecopy_write(df, &run->ideal, &w);
		if (r < 0) {
			(void) writer_close(&w);
			return log_error_errno(r, "failed to write %s: %m", path);
		}
		r = file_done(run, e, &w);
		if (r < 0)
			return r;
	}
	return 0;
}

static int run_days(Run *run) {
	_cleanup_free_ ArchLog *logs = NULL;
	int r;

	logs = calloc(MAX(arg_archivelogs_per_day, 1u), sizeof(ArchLog));
	if (!logs)
		return log_oom();

	for (unsigned day = 1; day <= arg_days; day++) {
		for (unsigned i = 0; i < arg_datafiles; i++) {
			uint64_t n = datafile_advance(run->dfs[i], day, arg_change_rate);
			if (day > 1)
				run->changed_blocks += n;
		}

		if (arg_archivelogs_per_day > 0) {
			plan_archivelogs(run, day, logs);
			r = write_archivelogs(run, logs, arg_archivelogs_per_day);
			if (r < 0)
				return r;
		}
		r = write_datafile_backup(run, day);
		if (r < 0)
			return r;
		if (arg_archivelogs_per_day > 0) {
			r = write_archivelog_backup(run, day, logs, arg_archivelogs_per_day);
			if (r < 0)
				return r;
		}
		r = write_image_copies(run, day);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * The output directory must be new or empty: a file left from another run
 * would sit next to this run's files without being in the manifest.
 */
static int open_output_dir(const char *path) {
	_cleanup_close_ int fd = -1;
	int dfd;
	DIR *d;
	struct dirent *de;
	int r = 0;

	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return log_error_errno(errno, "failed to create %s: %m", path);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return log_error_errno(errno, "failed to open %s: %m", path);

	dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (dfd < 0)
		return log_error_errno(errno, "failed to read %s: %m", path);
	d = fdopendir(dfd);
	if (!d) {
		r = -errno;
		(void) close(dfd);
		return log_error_errno(r, "failed to read %s: %m", path);
	}
	errno = 0;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
			r = log_error_errno(ENOTEMPTY, "%s is not empty", path);
			break;
		}
	if (r == 0 && errno != 0)
		r = log_error_errno(errno, "failed to read %s: %m", path);
	(void) closedir(d);
	if (r < 0)
		return r;
	return TAKE_FD(fd);
}

static void run_done(Run *run) {
	if (run->dfs)
		for (unsigned i = 0; i < arg_datafiles; i++)
			datafile_free(run->dfs[i]);
	free(run->dfs);
	for (size_t i = 0; i < run->nentries; i++)
		free(run->entries[i].extra);
	free(run->entries);
	ideal_finish(&run->ideal);
	if (run->dirfd >= 0)
		(void) close(run->dirfd);
}

int main(int argc, char *argv[]) {
	Run run = { .dirfd = -1 };
	struct timespec t0, t1;
	double elapsed;
	uint64_t logical = 0;
	int r;

	log_set_program_name(program_invocation_short_name);

	r = parse_argv(argc, argv);
	if (r <= 0)
		return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;

	(void) clock_gettime(CLOCK_MONOTONIC, &t0);

	r = open_output_dir(arg_out);
	if (r < 0)
		return EXIT_FAILURE;
	run.dirfd = r;

	oradb_init(&run.db, arg_seed, arg_db_name, arg_start);
	r = ideal_init(&run.ideal, arg_zstd);
	if (r < 0) {
		log_error_errno(r, "failed to set up zstd: %m");
		goto finish;
	}

	run.dfs = calloc(arg_datafiles, sizeof(Datafile *));
	if (!run.dfs) {
		r = log_oom();
		goto finish;
	}
	for (unsigned i = 0; i < arg_datafiles; i++) {
		run.dfs[i] = datafile_new(&run.db, i + 1, (uint32_t) (arg_datafile_size / ORA_BLOCK_SIZE));
		if (!run.dfs[i]) {
			r = log_oom();
			goto finish;
		}
	}

	r = run_days(&run);
	if (r < 0)
		goto finish;
	ideal_finish(&run.ideal);

	(void) clock_gettime(CLOCK_MONOTONIC, &t1);
	elapsed = (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
	r = write_manifest(&run);
	if (r < 0)
		goto finish;

	for (size_t i = 0; i < run.nentries; i++)
		logical += run.entries[i].size;
	if (!arg_quiet) {
		uint64_t unique = run.ideal.blocks * ORA_BLOCK_SIZE + run.ideal.redo_bytes;
		uint64_t z = run.ideal.blocks_zstd + run.ideal.redo_zstd;

		printf("oragen: %zu files, %.1f MiB in %.2f s (%.0f MB/s); ideal unique %.1f MiB (%.2fx)",
		       run.nentries, (double) logical / 1048576.0, elapsed,
		       elapsed > 0 ? (double) logical / 1e6 / elapsed : 0.0, (double) unique / 1048576.0,
		       unique ? (double) logical / (double) unique : 0.0);
		if (arg_zstd)
			printf(", zstd-3 %.1f MiB (%.2fx)", (double) z / 1048576.0, z ? (double) logical / (double) z : 0.0);
		printf("\n");
	}

finish:
	run_done(&run);
	return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
