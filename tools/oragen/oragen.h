/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Private to tools/oragen/: the pieces of the generator and how they meet.
 *
 *   OraDb      identity and clock of the simulated database (DBID, SCN/time)
 *   Datafile   block states of one datafile over the days, and its renderer
 *   rowgen     column values (Oracle NUMBER/DATE encodings, vocabularies)
 *   redo       archived redo logs
 *   backup     backup pieces and image copies
 *   Writer     buffered output file (1 MiB writes)
 *   Ideal      the "ideal dedup" accounting written to the manifest
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tools/oragen/oracle-format.h"
#include "tools/oragen/rng.h"

/* ---- Limits ------------------------------------------------------------- */

#define ORAGEN_DAYS_MAX 3650u
#define ORAGEN_DATAFILES_MAX 1000u        /* file numbers fit the rdba's 10 bits */
#define ORAGEN_DATAFILE_BLOCKS_MIN 128u   /* 1 MiB */
#define ORAGEN_DATAFILE_BLOCKS_MAX ORA_RDBA_BLOCK_MAX /* Oracle smallfile limit */
#define ORAGEN_ARCHIVELOGS_PER_DAY_MAX 1000u
#define ORAGEN_ARCHIVELOG_SIZE_MIN (64u * 1024)
#define ORAGEN_ARCHIVELOG_SIZE_MAX (4ull * 1024 * 1024 * 1024 - ORA_REDO_BLOCK_SIZE)
#define ORAGEN_FILESPERSET_MAX 64u
#define ORAGEN_DB_NAME_MAX 8u
#define ORAGEN_META_BLOCKS 8u /* file header + space management, before the first extent */
#define ORAGEN_EXTENT_BLOCKS 128u

/* ---- Database identity and clock ---------------------------------------- */

#define ORAGEN_SCN_PER_SECOND 3000u

typedef struct OraDb {
	uint64_t seed;
	uint32_t dbid;
	char db_name[ORAGEN_DB_NAME_MAX + 1];
	uint32_t activation;
	uint32_t resetlogs_id;
	uint64_t resetlogs_scn;
	uint64_t scn0; /* SCN at t0 */
	int64_t t0;    /* Unix time of day 1, 00:00 UTC */
	uint32_t first_sequence;
} OraDb;

void oradb_init(OraDb *db, uint64_t seed, const char *db_name, int64_t t0);
/* SCN in effect at Unix time t (t may precede t0); strictly increasing in t. */
uint64_t oradb_scn_at(const OraDb *db, int64_t t);
/* Unix time of day's 00:00 (day >= 1). */
int64_t oradb_day_start(const OraDb *db, unsigned day);

/* Seconds of a day at which the daily backups and image copies run. */
#define ORAGEN_BACKUP_TIME (22 * 3600)
#define ORAGEN_ARCHIVELOG_BACKUP_TIME (22 * 3600 + 1800)

/* ---- Calendar ------------------------------------------------------------ */

typedef struct CivilTime {
	int year, month, day, hour, minute, second;
} CivilTime;

void civil_from_unix(int64_t t, CivilTime *ret);
int64_t unix_from_civil(int year, int month, int day);
uint32_t ora_kcrf_time(int64_t t);

/* ---- Output -------------------------------------------------------------- */

#define WRITER_BUFFER_SIZE (1u << 20)

typedef void (*WriterTap)(void *userdata, const uint8_t *p, size_t n);

typedef struct Writer {
	int fd;
	uint8_t *buf;
	size_t used;
	uint64_t flushed;
	WriterTap tap; /* sees every byte written, in order */
	void *tap_data;
} Writer;

/* Creates (or truncates) dirfd/relpath, making missing parent directories. */
int writer_open(Writer *w, int dirfd, const char *relpath);
/* Makes n <= WRITER_BUFFER_SIZE contiguous bytes available at *ret, to be filled now. */
int writer_reserve(Writer *w, size_t n, uint8_t **ret);
/* Flushes and closes; closes even on error.  Safe on a closed writer. */
int writer_close(Writer *w);
static inline uint64_t writer_offset(const Writer *w) {
	return w->flushed + w->used;
}

/* ---- Ideal dedup/compression accounting ---------------------------------- */

/*
 * Counting is done by the generating thread; the zstd sizing, when on, by a
 * worker thread fed through a bounded queue of copies, so that compressing
 * the unique content costs little wall time on a machine with a spare core.
 */
typedef struct IdealQueue IdealQueue;

/* Contents that several files share: the zero block, block 0 per datafile size. */
#define IDEAL_SHARED_MAX 8u
#define IDEAL_SHARED_ZERO 0ull
#define IDEAL_SHARED_OS_HEADER(nblocks) (1ull << 32 | (nblocks))

typedef struct Ideal {
	IdealQueue *queue; /* NULL when zstd sizing is off */
	uint8_t redo_stage[ORA_BLOCK_SIZE];
	size_t redo_fill;
	uint64_t blocks;      /* distinct 8 KiB datafile blocks */
	uint64_t redo_bytes;
	uint64_t shared_seen[IDEAL_SHARED_MAX];
	unsigned nshared;
	/* Valid after ideal_finish(): */
	uint64_t blocks_zstd; /* zstd -3 sizes of the distinct blocks, summed */
	uint64_t redo_zstd;   /* zstd -3 sizes of the 8 KiB slices of each log, summed */
	uint64_t stream_zstd; /* all the unique units above as one zstd -3 stream */
} Ideal;

int ideal_init(Ideal *id, bool zstd);
/* Waits for the zstd worker, fills in the *_zstd totals and frees.  Idempotent. */
void ideal_finish(Ideal *id);
/* A datafile block seen for the first time (caller guarantees uniqueness). */
void ideal_add_block(Ideal *id, const uint8_t *block);
/* A block whose bytes depend only on key: counted once however often it is offered. */
void ideal_add_shared(Ideal *id, uint64_t key, const uint8_t *block);
/* Redo bytes, in file order; ideal_redo_end() after each log. */
void ideal_redo_tap(void *userdata, const uint8_t *p, size_t n);
void ideal_redo_end(Ideal *id);

/* ---- Column values -------------------------------------------------------- */

typedef enum RowTemplate {
	ROW_ORDERS,
	ROW_CUSTOMERS,
	ROW_EVENTS,
	_ROW_TEMPLATE_MAX,
} RowTemplate;

#define ROW_COLUMNS_MAX 12u
#define ROW_DATA_MAX 512u
#define ROW_NULL 0xffffu

typedef struct RowCols {
	unsigned ncols;
	uint16_t off[ROW_COLUMNS_MAX];
	uint16_t len[ROW_COLUMNS_MAX]; /* ROW_NULL for NULL */
	uint8_t data[ROW_DATA_MAX];
} RowCols;

/* Oracle NUMBER of mantissa * 10^-scale; returns its length (<= 21). */
size_t ora_number_put(uint8_t *out, int64_t mantissa, unsigned scale);
/* Oracle DATE (7 bytes). */
void ora_date_put(uint8_t *out, int64_t t);
/* A row of template tpl with primary key id. */
void rowgen_make(RowTemplate tpl, uint64_t id, Rng *r, RowCols *ret);
/* Encoded size as a table row piece (flag, lock, column count, columns). */
size_t rowgen_row_size(const RowCols *c);
/* Writes the table row piece; returns its size. */
size_t rowgen_row_put(const RowCols *c, uint8_t flag, uint8_t lock, uint8_t *out);

/* ---- Datafiles ------------------------------------------------------------ */

typedef struct DfBlock {
	uint16_t fmt_day; /* day the block was formatted, 0 = never */
	uint16_t version; /* day of its last change, >= fmt_day */
	uint16_t counted; /* version last given to Ideal, 0 = none */
	uint8_t flags;    /* DF_BLOCK_* */
	uint8_t pad;
} DfBlock;

#define DF_BLOCK_EMPTY 0x01 /* formatted, no rows yet */

typedef enum SegKind {
	SEG_TABLE,
	SEG_INDEX,
} SegKind;

typedef struct Segment {
	uint32_t start;   /* first block */
	uint32_t nalloc;  /* allocated blocks (whole extents, the last maybe cut) */
	uint32_t nformat; /* formatted blocks from start (high water mark) */
	uint32_t object_id;
	uint64_t key_base;
	SegKind kind;
	RowTemplate tpl;
} Segment;

typedef struct Datafile {
	const OraDb *db;
	uint32_t file_no;
	uint32_t nblocks;
	unsigned day; /* state is that of the end of this day */
	char ts_name[31];
	uint32_t ts_no;
	DfBlock *blocks;
	uint32_t *seg_of; /* segment index per block, UINT32_MAX outside segments */
	Segment *segs;
	size_t nsegs;
	uint32_t alloc_end; /* first block after the last allocated extent */
	uint64_t creation_scn;
	int64_t creation_time;
} Datafile;

Datafile *datafile_new(const OraDb *db, uint32_t file_no, uint32_t nblocks);
Datafile *datafile_free(Datafile *df);
/*
 * Moves the file to the end of `day` (days come in order, starting at 1):
 * day 1 formats it; later days change about change_rate of the formatted
 * blocks in clustered runs, a tenth of that by formatting new blocks.
 * Returns the number of blocks whose content changed.
 */
uint64_t datafile_advance(Datafile *df, unsigned day, double change_rate);
static inline bool datafile_block_is_formatted(const Datafile *df, uint32_t blk) {
	return df->blocks[blk].fmt_day != 0;
}
uint32_t datafile_formatted_blocks(const Datafile *df);
/* Checkpoint SCN in the file header at the end of the current day. */
uint64_t datafile_checkpoint_scn(const Datafile *df);
/* The block's 8 KiB as of the current day (zeros if never formatted). */
void datafile_render(const Datafile *df, uint32_t blk, uint8_t *out);
/* Offers the rendered block to Ideal if this version was not counted yet. */
void datafile_account(Datafile *df, uint32_t blk, const uint8_t *rendered, Ideal *id);

/* Sets the cache header, tail and checksum of an 8 KiB block whose body is filled. */
void ora_block_finish(uint8_t *b, uint8_t type, uint32_t rdba, uint64_t scn, uint8_t seq, uint8_t flag);

/* ---- Archived redo logs -------------------------------------------------- */

typedef struct ArchLog {
	unsigned day;
	uint16_t thread;
	uint32_t sequence;
	uint64_t low_scn, next_scn;
	int64_t low_time, next_time;
	uint32_t blocks; /* 512-byte blocks including block 0 */
	char path[256];  /* relative to the output directory */
} ArchLog;

static inline uint64_t archlog_bytes(const ArchLog *l) {
	return (uint64_t) l->blocks * ORA_REDO_BLOCK_SIZE;
}

/* Streams the whole log to w.  Deterministic in (db, log); datafile_count shapes DBAs. */
int redo_write(const OraDb *db, const ArchLog *log, uint32_t datafile_count, Writer *w);

/* ---- Backups -------------------------------------------------------------- */

typedef struct PieceInfo {
	const char *tag;
	int64_t time;
	uint32_t set_stamp;
	uint32_t set_count;
} PieceInfo;

/* One datafile backup set in one piece; returns framing (non-block) bytes written via *ret_framing. */
int backup_datafiles(const OraDb *db, const PieceInfo *pi, Datafile **dfs, size_t n, Ideal *id,
		     Writer *w, uint64_t *ret_framing);
int backup_archivelogs(const OraDb *db, const PieceInfo *pi, const ArchLog *logs, size_t n,
		       uint32_t datafile_count, Writer *w, uint64_t *ret_framing);
int imagecopy_write(Datafile *df, Ideal *id, Writer *w);
