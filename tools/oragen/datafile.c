/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * One simulated datafile: its layout, the state of each block over the days,
 * and the renderer that turns a block's state into its 8 KiB.
 *
 * Layout: blocks 0-7 are the OS header, the file header and space
 * management; from block 8 on come segments of whole 128-block extents, each
 * a table (3 row templates) or an index.  A segment's first blocks are its L1
 * bitmap, L2 bitmap and segment header; every later extent starts with an L1
 * bitmap.  Blocks above a segment's high water mark and after the last
 * extent were never formatted and stay zero.
 *
 * Invariants:
 *  1. A block's bytes are a pure function of (seed, file, block number, its
 *     DfBlock state, the static layout).  Anything that would change them
 *     (rows updated, a segment's HWM moving its header and L1 bitmap, an
 *     extent allocated in the space bitmap, the daily checkpoint in block 1)
 *     sets the block's version to the current day.
 *  2. The SCN in a block's header derives from its version, and so does a
 *     different seed for its updated rows, so two versions never render the
 *     same bytes, nor do two blocks (the rdba is in the header): Ideal can
 *     count distinct blocks by version alone.  The exception is block 0, the
 *     OS header, the same in every file of one size: it is counted as shared.
 *  3. Versions only grow, so a block never goes back to an older rendering.
 */

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "tools/oragen/oragen.h"

/* Data block body (KTB transaction header, ITLs, KDB data header). */
#define KTBBH_OFF ORA_KCBH_SIZE
#define KTBBH_SIZE 24
#define ITL_SIZE 24
#define ITL_COUNT 2
#define KDBH_OFF (KTBBH_OFF + KTBBH_SIZE + ITL_COUNT * ITL_SIZE)
#define KDBH_SIZE 14
#define KDBT_SIZE 4
#define TABLE_ROWDIR_OFF (KDBH_OFF + KDBH_SIZE + KDBT_SIZE)
/* Index leaf: KDX common header then leaf header, after the same KTB part. */
#define KDXCO_SIZE 16
#define KDXLE_SIZE 16
#define INDEX_ROWDIR_OFF (KDBH_OFF + KDXCO_SIZE + KDXLE_SIZE)
#define BODY_END ORA_TAIL_OFFSET
#define PCTFREE_BYTES (ORA_BLOCK_SIZE / 10)
#define ROWS_PER_BLOCK_MAX 400u
#define ROW_FLAG_HEAD 0x2c /* --H-FL-- */
#define ROW_FLAG_DELETED 0x3c /* --HDFL-- */
#define GROWTH_CHUNK 16u /* ASSM formats blocks in 16-block chunks */

/* ---- layout --------------------------------------------------------------- */

static const struct {
	const char *name;
	uint32_t ts_no;
} tablespaces[] = {
	{ "SYSTEM", 0 }, { "SYSAUX", 1 }, { "UNDOTBS1", 2 }, { "USERS", 4 }, { "DATA", 5 },
};

static int datafile_add_segment(Datafile *df, Rng *r, uint32_t start, uint32_t nalloc) {
	Segment *segs, *s;

	segs = reallocarray(df->segs, df->nsegs + 1, sizeof(Segment));
	if (!segs)
		return -ENOMEM;
	df->segs = segs;

	s = &segs[df->nsegs];
	*s = (Segment) {
		.start = start,
		.nalloc = nalloc,
		.object_id = 73000 + df->file_no * 1000 + (uint32_t) df->nsegs,
		.key_base = 1000000 + (uint64_t) df->file_no * 100000000 + (uint64_t) df->nsegs * 2000000,
		.kind = rng_pct(r, 25) ? SEG_INDEX : SEG_TABLE,
		.tpl = (RowTemplate) rng_below(r, _ROW_TEMPLATE_MAX),
	};
	for (uint32_t b = start; b < start + nalloc; b++)
		df->seg_of[b] = (uint32_t) df->nsegs;
	df->nsegs++;
	df->alloc_end = start + nalloc;
	return 0;
}

Datafile *datafile_new(const OraDb *db, uint32_t file_no, uint32_t nblocks) {
	Datafile *df;
	Rng r;
	size_t t = MIN(file_no, ELEMENTSOF(tablespaces)) - 1;

	assert(nblocks >= ORAGEN_DATAFILE_BLOCKS_MIN && nblocks <= ORAGEN_DATAFILE_BLOCKS_MAX);
	assert(file_no >= 1 && file_no <= ORAGEN_DATAFILES_MAX);

	df = calloc(1, sizeof(*df));
	if (!df)
		return NULL;
	*df = (Datafile) {
		.db = db,
		.file_no = file_no,
		.nblocks = nblocks,
		.ts_no = tablespaces[t].ts_no,
		.alloc_end = ORAGEN_META_BLOCKS,
		.creation_time = db->t0 - 86400 * (int64_t) (300 - file_no % 200),
	};
	strncpy(df->ts_name, tablespaces[t].name, sizeof(df->ts_name) - 1);
	df->creation_scn = oradb_scn_at(db, df->creation_time);

	df->blocks = calloc(nblocks, sizeof(DfBlock));
	df->seg_of = malloc(nblocks * sizeof(uint32_t));
	if (!df->blocks || !df->seg_of)
		return datafile_free(df);
	memset(df->seg_of, 0xff, nblocks * sizeof(uint32_t));

	/* Allocate extents up to ~88% of the file; the rest is room to grow. */
	rng_seed(&r, hash3(db->seed, 0x1a7047, file_no));
	uint32_t target = MAX(nblocks / 100 * 88, ORAGEN_META_BLOCKS + GROWTH_CHUNK);
	while (df->alloc_end < target) {
		uint32_t nalloc = (1 + rng_below(&r, 8)) * ORAGEN_EXTENT_BLOCKS;

		nalloc = MIN(nalloc, nblocks - df->alloc_end);
		if (nalloc < GROWTH_CHUNK || datafile_add_segment(df, &r, df->alloc_end, nalloc) < 0)
			break;
	}
	if (df->nsegs == 0)
		return datafile_free(df);
	return df;
}

Datafile *datafile_free(Datafile *df) {
	if (!df)
		return NULL;
	free(df->blocks);
	free(df->seg_of);
	free(df->segs);
	free(df);
	return NULL;
}

uint32_t datafile_formatted_blocks(const Datafile *df) {
	uint32_t n = 0;

	for (uint32_t b = 0; b < df->nblocks; b++)
		n += df->blocks[b].fmt_day != 0;
	return n;
}

/* ---- evolution ------------------------------------------------------------ */

static void block_touch(Datafile *df, uint32_t blk, unsigned day) {
	DfBlock *s = &df->blocks[blk];

	if (s->fmt_day)
		s->version = (uint16_t) day;
}

static void block_format(Datafile *df, uint32_t blk, unsigned day, bool empty) {
	df->blocks[blk] = (DfBlock) {
		.fmt_day = (uint16_t) day,
		.version = (uint16_t) day,
		.flags = empty ? DF_BLOCK_EMPTY : 0,
	};
}

/* Formats up to `count` more blocks of segment s; the last few of them stay empty. */
static uint32_t segment_grow(Datafile *df, Segment *s, uint32_t count, unsigned day, Rng *r) {
	uint32_t old_end = s->nformat, new_end = MIN(s->nalloc, s->nformat + count);
	uint32_t empty_from = new_end - MIN(rng_below(r, 9), new_end - old_end);

	if (new_end == old_end)
		return 0;

	/* Rows go into the blocks that were formatted empty last time. */
	for (uint32_t o = old_end > GROWTH_CHUNK ? old_end - GROWTH_CHUNK : 0; o < old_end; o++) {
		DfBlock *b = &df->blocks[s->start + o];
		if (b->flags & DF_BLOCK_EMPTY) {
			b->flags &= (uint8_t) ~DF_BLOCK_EMPTY;
			b->version = (uint16_t) day;
		}
	}
	for (uint32_t o = old_end; o < new_end; o++)
		block_format(df, s->start + o, day, o >= empty_from && o >= 3);

	s->nformat = new_end;
	/* The segment header records the HWM, the L1 bitmaps the block states. */
	block_touch(df, s->start + 2, day);
	uint32_t lo = old_end > GROWTH_CHUNK ? old_end - GROWTH_CHUNK : 0;
	for (uint32_t e = lo / ORAGEN_EXTENT_BLOCKS; e <= (new_end - 1) / ORAGEN_EXTENT_BLOCKS; e++)
		block_touch(df, s->start + e * ORAGEN_EXTENT_BLOCKS, day);
	return new_end - old_end;
}

static void datafile_format(Datafile *df, Rng *r) {
	block_format(df, 0, 1, false);
	for (uint32_t b = 1; b < ORAGEN_META_BLOCKS; b++)
		block_format(df, b, 1, false);

	for (size_t i = 0; i < df->nsegs; i++) {
		Segment *s = &df->segs[i];
		/* Up to a third of a segment's last blocks above its HWM: holes RMAN skips. */
		uint32_t chunks = s->nalloc / GROWTH_CHUNK;
		uint32_t unformatted = rng_below(r, chunks / 3 + 1) * GROWTH_CHUNK;
		uint32_t target = MAX(s->nalloc - unformatted, MIN(s->nalloc, GROWTH_CHUNK));

		while (s->nformat < target)
			(void) segment_grow(df, s, MIN(target - s->nformat, ORAGEN_EXTENT_BLOCKS * 64), 1, r);
	}
}

static uint32_t datafile_grow(Datafile *df, uint32_t budget, unsigned day, Rng *r) {
	uint32_t grown = 0;

	for (unsigned attempts = 0; grown < budget && attempts < 4 * df->nsegs + 16; attempts++) {
		Segment *s = &df->segs[rng_below(r, (uint32_t) df->nsegs)];

		if (s->nformat < s->nalloc) {
			grown += segment_grow(df, s, MIN(GROWTH_CHUNK, budget - grown), day, r);
			continue;
		}

		/* A full segment takes a new extent at the end of the file, if there is room. */
		uint32_t nalloc = MIN(ORAGEN_EXTENT_BLOCKS, df->nblocks - df->alloc_end);
		if (nalloc < GROWTH_CHUNK)
			continue;
		if (datafile_add_segment(df, r, df->alloc_end, nalloc) < 0)
			break;
		block_touch(df, 2, day);
		block_touch(df, 3, day);
		grown += segment_grow(df, &df->segs[df->nsegs - 1], GROWTH_CHUNK, day, r);
	}
	return grown;
}

static uint32_t datafile_count_version(const Datafile *df, unsigned day) {
	uint32_t n = 0;

	for (uint32_t b = 0; b < df->nblocks; b++)
		n += df->blocks[b].fmt_day && df->blocks[b].version == day;
	return n;
}

uint64_t datafile_advance(Datafile *df, unsigned day, double change_rate) {
	uint32_t formatted, total, changed;
	Rng r;

	assert(day == df->day + 1);
	rng_seed(&r, hash4(df->db->seed, 0xc4a46e, df->file_no, day));
	df->day = day;

	if (day == 1) {
		datafile_format(df, &r);
		return datafile_formatted_blocks(df);
	}

	formatted = datafile_formatted_blocks(df);
	total = (uint32_t) (change_rate * formatted + 0.5);
	block_touch(df, 1, day); /* checkpoint */

	/* A tenth of the day's changes are inserts into newly formatted blocks. */
	(void) datafile_grow(df, total / 10, day, &r);

	/* The rest are updates, in runs: batch jobs and hot ranges touch neighbours. */
	changed = datafile_count_version(df, day);
	uint32_t span = df->alloc_end - ORAGEN_META_BLOCKS;
	for (unsigned iter = 0; changed < total && iter < 10000000; iter++) {
		uint32_t start = ORAGEN_META_BLOCKS + rng_below(&r, span), len;
		unsigned p = rng_below(&r, 100);

		len = p < 70 ? 1 + rng_below(&r, 16) : p < 95 ? 16 + rng_below(&r, 48) : 64 + rng_below(&r, 192);
		for (uint32_t b = start; b < MIN(start + len, df->alloc_end) && changed < total; b++) {
			DfBlock *s = &df->blocks[b];
			if (s->fmt_day && s->version != day) {
				s->version = (uint16_t) day;
				changed++;
			}
		}
	}
	return changed;
}

uint64_t datafile_checkpoint_scn(const Datafile *df) {
	return oradb_scn_at(df->db, oradb_day_start(df->db, df->day) + ORAGEN_BACKUP_TIME);
}

/* ---- rendering ------------------------------------------------------------ */

void ora_block_finish(uint8_t *b, uint8_t type, uint32_t rdba, uint64_t scn, uint8_t seq, uint8_t flag) {
	b[ORA_KCBH_TYPE] = type;
	b[ORA_KCBH_FORMAT] = ORA_FORMAT_V8;
	b[2] = b[3] = 0;
	ora_put32(b + ORA_KCBH_RDBA, rdba);
	ora_put32(b + ORA_KCBH_SCN_BASE, (uint32_t) scn);
	ora_put16(b + ORA_KCBH_SCN_WRAP, (uint16_t) (scn >> 32));
	b[ORA_KCBH_SEQ] = seq;
	b[ORA_KCBH_FLAG] = flag;
	ora_put16(b + ORA_KCBH_CHECKSUM, 0);
	b[18] = b[19] = 0;
	ora_put32(b + ORA_TAIL_OFFSET, (uint32_t) (scn & 0xffff) << 16 | (uint32_t) type << 8 | seq);
	if (flag & ORA_FLAG_CHECKSUM)
		ora_put16(b + ORA_KCBH_CHECKSUM, ora_xor16(b, ORA_BLOCK_SIZE));
}

typedef struct RenderCtx {
	const Datafile *df;
	uint32_t blk;
	const DfBlock *st;
	uint64_t scn;
	uint64_t h; /* per-version hash */
} RenderCtx;

/* When the block's current version was written: a time in its day (day 1: older). */
static uint64_t block_scn(const Datafile *df, uint32_t blk, const DfBlock *st) {
	uint64_t h = hash4(df->db->seed, 0x5c4, df->file_no, (uint64_t) blk << 16 | st->version);
	int64_t t;

	if (st->version == 1)
		t = oradb_day_start(df->db, 1) + ORAGEN_BACKUP_TIME - (int64_t) (h % (60 * 86400));
	else
		t = oradb_day_start(df->db, st->version) + (int64_t) (h % ORAGEN_BACKUP_TIME);
	return oradb_scn_at(df->db, t) + (h >> 48) % ORAGEN_SCN_PER_SECOND;
}

static void put_db_name(uint8_t *p, const char *name) {
	size_t n = strlen(name);

	memset(p, ' ', ORAGEN_DB_NAME_MAX);
	memcpy(p, name, MIN(n, ORAGEN_DB_NAME_MAX));
}

static void render_os_header(const RenderCtx *c, uint8_t *b) {
	b[ORA_DF0_FORMAT] = ORA_FORMAT_V8;
	ora_put32(b + ORA_DF0_MARK, 0xffc00000u);
	ora_put32(b + ORA_DF0_BLOCK_SIZE, ORA_BLOCK_SIZE);
	ora_put32(b + ORA_DF0_BLOCK_COUNT, c->df->nblocks - 1);
	ora_put32(b + ORA_DF0_MAGIC, ORA_FILE_MAGIC);
}

static void render_file_header(const RenderCtx *c, uint8_t *b) {
	const Datafile *df = c->df;
	const OraDb *db = df->db;
	unsigned day = c->st->version;
	int64_t ckpt_time = oradb_day_start(db, day) + ORAGEN_BACKUP_TIME;
	size_t tlen = strlen(df->ts_name);

	ora_put32(b + ORA_KCVFH_SW_VERSION, 0x13000000u);
	ora_put32(b + ORA_KCVFH_COMPAT, 0x13000000u);
	ora_put32(b + ORA_KCVFH_DBID, db->dbid);
	put_db_name(b + ORA_KCVFH_DB_NAME, db->db_name);
	ora_put32(b + ORA_KCVFH_CONTROL_SEQ, 20000 + day * 37);
	ora_put32(b + ORA_KCVFH_FILE_SIZE, df->nblocks);
	ora_put32(b + ORA_KCVFH_BLOCK_SIZE, ORA_BLOCK_SIZE);
	ora_put16(b + ORA_KCVFH_FILE_NO, (uint16_t) df->file_no);
	ora_put16(b + ORA_KCVFH_FILE_TYPE, 3);
	ora_put32(b + ORA_KCVFH_ACTIVATION, db->activation);
	ora_put_scn(b + ORA_KCVFH_CREATION_SCN, df->creation_scn);
	ora_put32(b + ORA_KCVFH_CREATION_TIME, ora_kcrf_time(df->creation_time));
	ora_put32(b + ORA_KCVFH_CKPT_COUNT, 1500 + day * 24);
	ora_put32(b + ORA_KCVFH_TS_NO, df->ts_no);
	ora_put16(b + ORA_KCVFH_TS_NAME_LEN, (uint16_t) tlen);
	memcpy(b + ORA_KCVFH_TS_NAME, df->ts_name, tlen);
	ora_put32(b + ORA_KCVFH_REL_FILE_NO, df->file_no);
	ora_put_scn(b + ORA_KCVFH_CKPT_SCN, oradb_scn_at(db, ckpt_time));
	ora_put32(b + ORA_KCVFH_CKPT_TIME, ora_kcrf_time(ckpt_time));
	ora_block_finish(b, ORA_BT_FILE_HEADER, ora_rdba(df->file_no, 1), oradb_scn_at(db, ckpt_time), 1,
			 ORA_FLAG_CHECKSUM);
}

static void render_space_header(const RenderCtx *c, uint8_t *b) {
	const Datafile *df = c->df;

	ora_put32(b + 20, df->file_no);
	ora_put32(b + 24, df->nblocks);
	ora_put32(b + 28, ORAGEN_EXTENT_BLOCKS);
	ora_put32(b + 32, df->alloc_end);
	ora_put32(b + 36, (df->alloc_end - ORAGEN_META_BLOCKS + ORAGEN_EXTENT_BLOCKS - 1) / ORAGEN_EXTENT_BLOCKS);
	ora_put32(b + 40, df->nblocks - df->alloc_end);
	ora_put32(b + 44, ora_rdba(df->file_no, 3));
	ora_block_finish(b, ORA_BT_SPACE_HEADER, ora_rdba(df->file_no, c->blk), c->scn, 1, ORA_FLAG_CHECKSUM);
}

static void render_space_bitmap(const RenderCtx *c, uint8_t *b) {
	const Datafile *df = c->df;

	ora_put32(b + 20, ora_rdba(df->file_no, 2));
	ora_put32(b + 24, (c->blk - 3) * 8 * 8000);
	if (c->blk == 3) {
		/* One bit per 128-block extent in use. */
		uint32_t extents = (df->alloc_end - ORAGEN_META_BLOCKS + ORAGEN_EXTENT_BLOCKS - 1) / ORAGEN_EXTENT_BLOCKS;
		extents = MIN(extents, 8 * 8000u);
		ora_put32(b + 28, extents);
		memset(b + 64, 0xff, extents / 8);
		if (extents % 8)
			b[64 + extents / 8] = (uint8_t) ((1u << (extents % 8)) - 1);
	}
	ora_block_finish(b, ORA_BT_SPACE_BITMAP, ora_rdba(df->file_no, c->blk), c->scn, 1, ORA_FLAG_CHECKSUM);
}

static void render_l1(const RenderCtx *c, const Segment *s, uint8_t *b) {
	const Datafile *df = c->df;
	uint32_t first = c->blk, n = MIN(ORAGEN_EXTENT_BLOCKS, s->start + s->nalloc - first);

	ora_put32(b + 20, ora_rdba(df->file_no, s->start + 1)); /* parent L2 */
	ora_put32(b + 24, ora_rdba(df->file_no, first));
	ora_put32(b + 28, n);
	ora_put32(b + 32, s->object_id);
	ora_put_scn(b + 36, c->scn);
	/* A nibble per block: 0 unformatted, 1 metadata, 5 full, 2 empty (75-100% free). */
	for (uint32_t i = 0; i < n; i++) {
		const DfBlock *st = &df->blocks[first + i];
		uint32_t off = first + i - s->start;
		uint8_t v = !st->fmt_day ? 0 : (off < 3 || off % ORAGEN_EXTENT_BLOCKS == 0) ? 1 : (st->flags & DF_BLOCK_EMPTY) ? 2 : 5;
		b[64 + i / 2] |= (uint8_t) (v << (4 * (i % 2)));
	}
	ora_block_finish(b, ORA_BT_L1_BITMAP, ora_rdba(df->file_no, c->blk), c->scn, 1, ORA_FLAG_CHECKSUM);
}

static void render_l2(const RenderCtx *c, const Segment *s, uint8_t *b) {
	const Datafile *df = c->df;
	uint32_t n = (s->nalloc + ORAGEN_EXTENT_BLOCKS - 1) / ORAGEN_EXTENT_BLOCKS;

	ora_put32(b + 20, ora_rdba(df->file_no, s->start + 2));
	ora_put32(b + 24, n);
	ora_put32(b + 28, s->object_id);
	for (uint32_t i = 0; i < n && 64 + 8 * i + 8 <= BODY_END; i++) {
		ora_put32(b + 64 + 8 * i, ora_rdba(df->file_no, s->start + i * ORAGEN_EXTENT_BLOCKS));
		ora_put16(b + 68 + 8 * i, 1);
	}
	ora_block_finish(b, ORA_BT_L2_BITMAP, ora_rdba(df->file_no, c->blk), c->scn, 1, ORA_FLAG_CHECKSUM);
}

static void render_segment_header(const RenderCtx *c, const Segment *s, uint8_t *b) {
	const Datafile *df = c->df;
	uint32_t n = (s->nalloc + ORAGEN_EXTENT_BLOCKS - 1) / ORAGEN_EXTENT_BLOCKS;

	/* Extent control header, then the extent map. */
	ora_put32(b + 20, n);
	ora_put32(b + 24, s->nalloc);
	ora_put32(b + 28, ora_rdba(df->file_no, s->start + s->nformat)); /* HWM */
	ora_put32(b + 32, s->nformat);
	ora_put32(b + 36, s->object_id);
	ora_put32(b + 40, ora_rdba(df->file_no, s->start + 1));
	b[44] = s->kind == SEG_INDEX ? 2 : 1;
	for (uint32_t i = 0; i < n && 128 + 8 * i + 8 <= BODY_END; i++) {
		ora_put32(b + 128 + 8 * i, ora_rdba(df->file_no, s->start + i * ORAGEN_EXTENT_BLOCKS));
		ora_put32(b + 132 + 8 * i, MIN(ORAGEN_EXTENT_BLOCKS, s->nalloc - i * ORAGEN_EXTENT_BLOCKS));
	}
	ora_block_finish(b, ORA_BT_SEGMENT_HEADER, ora_rdba(df->file_no, c->blk), c->scn, 1, ORA_FLAG_CHECKSUM);
}

static void put_itl(uint8_t *p, Rng *r, uint64_t scn, uint16_t flag, uint16_t lck) {
	ora_put16(p, (uint16_t) (1 + rng_below(r, 10)));      /* undo segment */
	ora_put16(p + 2, (uint16_t) rng_below(r, 48));        /* slot */
	ora_put32(p + 4, 1000 + rng_below(r, 60000));         /* wrap */
	ora_put32(p + 8, ora_rdba(3, 128 + rng_below(r, 20000))); /* uba */
	ora_put16(p + 12, (uint16_t) rng_below(r, 65535));
	p[14] = (uint8_t) (1 + rng_below(r, 60));
	ora_put16(p + 16, flag);
	ora_put16(p + 18, lck);
	ora_put32(p + 20, (uint32_t) scn);
}

static void put_ktb(const Segment *s, uint8_t *b, Rng *r, uint64_t cleanout_scn) {
	b[KTBBH_OFF] = 1;
	ora_put32(b + KTBBH_OFF + 4, s->object_id);
	ora_put_scn(b + KTBBH_OFF + 8, cleanout_scn);
	b[KTBBH_OFF + 16] = ITL_COUNT;
	b[KTBBH_OFF + 18] = 0x32; /* ASSM-managed block */
	put_itl(b + KTBBH_OFF + KTBBH_SIZE, r, cleanout_scn, 0x8000, 0);
}

/*
 * Table and index blocks are built the same way: entries stacked down from the
 * end of the block, a directory of their offsets growing up, PCTFREE left in
 * between.  Later versions write a few updated entries into that free space and
 * repoint the directory at them, leaving the old bytes behind, as Oracle does.
 */
typedef struct EntryGen {
	const Segment *seg;
	uint64_t id_base;
	uint64_t key;
	uint32_t table_block; /* for index rowids */
	const Datafile *df;
} EntryGen;

/* Writes one entry so that it ends at `end`, if it fits in `room`; returns its size or 0. */
static size_t entry_make(EntryGen *g, Rng *r, uint32_t slot, uint8_t lock, uint8_t *end, size_t room) {
	uint8_t key[24], *out;
	size_t kl, n;

	if (g->seg->kind == SEG_TABLE) {
		RowCols cols;

		rowgen_make(g->seg->tpl, g->id_base + slot, r, &cols);
		n = rowgen_row_size(&cols);
		if (n > room)
			return 0;
		return rowgen_row_put(&cols, ROW_FLAG_HEAD, lock, end - n);
	}

	/* Index leaf entry: flag, lock, key column, rowid column. */
	kl = ora_number_put(key, (int64_t) (g->key + slot * (1 + (g->seg->tpl == ROW_EVENTS))), 0);
	n = kl + 10;
	if (n > room)
		return 0;
	out = end - n;
	out[0] = 0;
	out[1] = lock;
	out[2] = (uint8_t) kl;
	memcpy(out + 3, key, kl);
	out += 3 + kl;
	out[0] = 6;
	uint32_t dba = ora_rdba(g->df->file_no, g->table_block + slot / 80 + rng_below(r, 2));
	out[1] = (uint8_t) (dba >> 24);
	out[2] = (uint8_t) (dba >> 16);
	out[3] = (uint8_t) (dba >> 8);
	out[4] = (uint8_t) dba;
	out[5] = 0;
	out[6] = (uint8_t) (slot % 80);
	return n;
}

static void render_rows(const RenderCtx *c, const Segment *s, uint8_t *b) {
	const Datafile *df = c->df;
	uint32_t off = c->blk - s->start;
	bool index = s->kind == SEG_INDEX;
	uint32_t dir_off = index ? INDEX_ROWDIR_OFF : TABLE_ROWDIR_OFF, top = BODY_END, nrow = 0;
	bool empty = c->st->flags & DF_BLOCK_EMPTY;
	EntryGen g = {
		.seg = s,
		.id_base = s->key_base + (uint64_t) off * ROWS_PER_BLOCK_MAX,
		.key = s->key_base + (uint64_t) off * ROWS_PER_BLOCK_MAX,
		.table_block = ORAGEN_META_BLOCKS + (uint32_t) (s->key_base / 7 % 1000) + off,
		.df = df,
	};
	uint64_t base_scn;
	Rng r;

	/* Base content: what was inserted when the block was formatted. */
	rng_seed(&r, hash4(df->db->seed, 0xb10c, df->file_no, (uint64_t) c->blk << 16 | c->st->fmt_day));
	base_scn = c->scn - (c->st->version > c->st->fmt_day ? 50000 + rng_below(&r, 1000000) : rng_below(&r, 3000));
	put_ktb(s, b, &r, base_scn);

	while (!empty && nrow < ROWS_PER_BLOCK_MAX) {
		uint32_t dir_end = dir_off + 2 * (nrow + 1);
		size_t n;

		if (top < dir_end + PCTFREE_BYTES)
			break;
		n = entry_make(&g, &r, nrow, 0, b + top, top - dir_end - PCTFREE_BYTES);
		if (n == 0)
			break;
		top -= (uint32_t) n;
		ora_put16(b + dir_off + 2 * nrow, (uint16_t) (top - KDBH_OFF));
		nrow++;
	}

	/* Updates since then, each version drawing its own. */
	if (!empty && nrow > 0 && c->st->version > c->st->fmt_day) {
		Rng u;
		unsigned k;

		rng_seed(&u, hash4(df->db->seed, 0x0bda7e, df->file_no, (uint64_t) c->blk << 16 | c->st->version));
		k = 1 + rng_below(&u, 4);
		put_itl(b + KTBBH_OFF + KTBBH_SIZE + ITL_SIZE, &u, c->scn, 0x2001, (uint16_t) k);
		for (unsigned i = 0; i < k; i++) {
			uint32_t slot = rng_below(&u, nrow), dir_end = dir_off + 2 * nrow;
			size_t n;

			if (!index && rng_pct(&u, 10)) {
				/* Delete in place: flag and lock byte only. */
				uint32_t at = KDBH_OFF + ora_get16(b + dir_off + 2 * slot);
				b[at] = ROW_FLAG_DELETED;
				b[at + 1] = 2;
				continue;
			}
			if (top < dir_end + 16)
				break;
			n = entry_make(&g, &u, slot, 2, b + top, top - dir_end - 16);
			if (n == 0)
				break;
			top -= (uint32_t) n;
			ora_put16(b + dir_off + 2 * slot, (uint16_t) (top - KDBH_OFF));
		}
	}

	uint32_t fsbo = dir_off + 2 * nrow;
	if (index) {
		b[KDBH_OFF] = 0x80; /* leaf */
		b[KDBH_OFF + 1] = 2;
		ora_put16(b + KDBH_OFF + 2, (uint16_t) nrow);
		ora_put16(b + KDBH_OFF + 4, 0xffff);
		ora_put16(b + KDBH_OFF + 6, (uint16_t) (fsbo - KDBH_OFF));
		ora_put16(b + KDBH_OFF + 8, (uint16_t) (top - KDBH_OFF));
		ora_put16(b + KDBH_OFF + 10, (uint16_t) (top - fsbo));
		ora_put32(b + KDBH_OFF + KDXCO_SIZE, ora_rdba(df->file_no, c->blk + 1));
		ora_put32(b + KDBH_OFF + KDXCO_SIZE + 4, ora_rdba(df->file_no, c->blk - 1));
	} else {
		b[KDBH_OFF + 1] = 1;
		ora_put16(b + KDBH_OFF + 2, (uint16_t) nrow);
		ora_put16(b + KDBH_OFF + 4, 0xffff);
		ora_put16(b + KDBH_OFF + 6, (uint16_t) (fsbo - KDBH_OFF));
		ora_put16(b + KDBH_OFF + 8, (uint16_t) (top - KDBH_OFF));
		ora_put16(b + KDBH_OFF + 10, (uint16_t) (top - fsbo));
		ora_put16(b + KDBH_OFF + 12, (uint16_t) (top - fsbo));
		ora_put16(b + KDBH_OFF + KDBH_SIZE + 2, (uint16_t) nrow);
	}
	ora_block_finish(b, ORA_BT_DATA, ora_rdba(df->file_no, c->blk), c->scn, (uint8_t) (1 + c->h % 3),
			 ORA_FLAG_CHECKSUM);
}

void datafile_render(const Datafile *df, uint32_t blk, uint8_t *out) {
	const DfBlock *st = &df->blocks[blk];
	RenderCtx c = { .df = df, .blk = blk, .st = st };

	memset(out, 0, ORA_BLOCK_SIZE);
	if (!st->fmt_day)
		return;

	c.scn = block_scn(df, blk, st);
	c.h = hash4(df->db->seed, 0x5e9, df->file_no, (uint64_t) blk << 16 | st->version);

	if (blk == 0)
		render_os_header(&c, out);
	else if (blk == 1)
		render_file_header(&c, out);
	else if (blk == 2)
		render_space_header(&c, out);
	else if (blk < ORAGEN_META_BLOCKS)
		render_space_bitmap(&c, out);
	else {
		const Segment *s = &df->segs[df->seg_of[blk]];
		uint32_t off = blk - s->start;

		if (off % ORAGEN_EXTENT_BLOCKS == 0)
			render_l1(&c, s, out);
		else if (off == 1)
			render_l2(&c, s, out);
		else if (off == 2)
			render_segment_header(&c, s, out);
		else
			render_rows(&c, s, out);
	}
}

void datafile_account(Datafile *df, uint32_t blk, const uint8_t *rendered, Ideal *id) {
	DfBlock *st = &df->blocks[blk];

	if (!st->fmt_day) {
		ideal_add_shared(id, IDEAL_SHARED_ZERO, rendered);
		return;
	}
	if (blk == 0) {
		/* The OS header holds only the block size and count. */
		ideal_add_shared(id, IDEAL_SHARED_OS_HEADER(df->nblocks), rendered);
		return;
	}
	if (st->counted == st->version)
		return;
	st->counted = st->version;
	ideal_add_block(id, rendered);
}
