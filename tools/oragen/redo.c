/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Archived redo logs: block 0 (file header), block 1 (redo log header with
 * DBID, thread, sequence, SCN and time range), then 512-byte redo blocks
 * carrying a stream of redo records that span block boundaries.
 *
 * Records model an OLTP workload: transactions of a few inserts, updates and
 * deletes, each one a record with an undo change vector (5.1, before image),
 * a redo change vector (11.x, after image) and, first in a transaction, an
 * undo header change (5.2); then a commit record (5.4).  Column values come
 * from rowgen, so redo compresses like real redo (2-4x), and a log's bytes
 * depend only on (seed, sequence), so a log can be regenerated exactly for
 * BACKUP ARCHIVELOG.
 */

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "common/macros.h"
#include "tools/oragen/oragen.h"

#define REC_MAX 8192u
#define CV_FIELDS_MAX 24u
#define PAYLOAD (ORA_REDO_BLOCK_SIZE - ORA_RBH_SIZE)

#define ALIGN4(x) (((x) + 3u) & ~3u)
#define ROW_FLAG_HEAD 0x2c

typedef struct RedoGen {
	const OraDb *db;
	const ArchLog *log;
	uint32_t ndf;
	Rng r;

	uint8_t rec[REC_MAX];
	size_t rec_len, rec_pos;

	uint64_t done, total; /* payload bytes emitted / available: drives SCN and time */
	uint64_t scn;
	uint16_t subscn;
	uint16_t lwn_no;
	unsigned lwn_left;

	/* Current transaction. */
	unsigned ops_left;
	bool in_tx;
	uint16_t usn, slot;
	uint32_t sqn;
	uint32_t uba_dba;
	uint16_t uba_seq;
	uint8_t uba_rec;
	uint32_t objn;
	uint16_t afn;
	uint32_t block;
	RowTemplate tpl;
	uint64_t next_id;

	/* Change vector being built. */
	uint16_t flen[CV_FIELDS_MAX];
	const uint8_t *fdata[CV_FIELDS_MAX];
	unsigned nf;
	uint8_t scratch[2048];
	size_t scratch_used;
} RedoGen;

/* ---- record assembly ------------------------------------------------------ */

static void rec_put(RedoGen *g, const void *p, size_t n) {
	assert(g->rec_len + n <= REC_MAX);
	memcpy(g->rec + g->rec_len, p, n);
	g->rec_len += n;
}

static void rec_pad(RedoGen *g) {
	while (g->rec_len % 4)
		g->rec[g->rec_len++] = 0;
}

static void rec_begin(RedoGen *g) {
	uint8_t h[ORA_RREC_HEADER_LWN] = {};
	bool lwn = g->lwn_left == 0;
	uint64_t target = g->log->low_scn + (g->log->next_scn - g->log->low_scn - 1) * g->done / MAX(g->total, 1);

	if (target > g->scn) {
		g->scn = target;
		g->subscn = 0;
	} else
		g->subscn++;

	h[4] = ORA_RREC_VLD_CHANGES | (lwn ? ORA_RREC_VLD_LWN : 0);
	ora_put16(h + 6, (uint16_t) (g->scn >> 32));
	ora_put32(h + 8, (uint32_t) g->scn);
	ora_put16(h + 12, g->subscn);
	if (lwn) {
		int64_t t = g->log->low_time + (g->log->next_time - g->log->low_time) * (int64_t) g->done / (int64_t) MAX(g->total, 1);

		g->lwn_left = 1 + rng_below(&g->r, 24);
		g->lwn_no++;
		ora_put16(h + 24, g->lwn_no);
		ora_put32(h + 28, 1 + rng_below(&g->r, 40));
		ora_put_scn(h + 32, g->scn);
		ora_put32(h + 40, ora_kcrf_time(t));
	}
	g->lwn_left--;
	g->rec_len = 0;
	g->rec_pos = 0;
	rec_put(g, h, lwn ? ORA_RREC_HEADER_LWN : ORA_RREC_HEADER);
}

static void rec_end(RedoGen *g) {
	rec_pad(g);
	ora_put32(g->rec, (uint32_t) g->rec_len);
}

static uint8_t *field_alloc(RedoGen *g, size_t n) {
	uint8_t *p;

	assert(g->nf < CV_FIELDS_MAX && g->scratch_used + n <= sizeof(g->scratch));
	p = g->scratch + g->scratch_used;
	memset(p, 0, n);
	g->scratch_used += n;
	g->flen[g->nf] = (uint16_t) n;
	g->fdata[g->nf++] = p;
	return p;
}

static void field_ref(RedoGen *g, const uint8_t *p, size_t n) {
	assert(g->nf < CV_FIELDS_MAX);
	g->flen[g->nf] = (uint16_t) n;
	g->fdata[g->nf++] = p;
}

static void cv_begin(RedoGen *g) {
	g->nf = 0;
	g->scratch_used = 0;
}

static void cv_end(RedoGen *g, uint8_t layer, uint8_t code, uint16_t cls, uint16_t afn, uint32_t dba) {
	uint8_t h[ORA_RCV_HEADER] = {};
	uint8_t lens[2 * (CV_FIELDS_MAX + 1)];

	h[0] = layer;
	h[1] = code;
	ora_put16(h + 2, cls);
	ora_put16(h + 4, afn);
	ora_put32(h + 8, dba);
	ora_put32(h + 12, (uint32_t) g->scn);
	ora_put16(h + 16, (uint16_t) (g->scn >> 32));
	h[18] = (uint8_t) (1 + g->subscn % 4);
	h[19] = 1;
	ora_put16(h + 20, 0); /* container */
	rec_put(g, h, sizeof(h));

	ora_put16(lens, (uint16_t) (2 * (g->nf + 1)));
	for (unsigned i = 0; i < g->nf; i++)
		ora_put16(lens + 2 * (i + 1), g->flen[i]);
	rec_put(g, lens, 2 * (g->nf + 1));
	rec_pad(g);
	for (unsigned i = 0; i < g->nf; i++) {
		rec_put(g, g->fdata[i], g->flen[i]);
		rec_pad(g);
	}
}

/* ---- workload ------------------------------------------------------------- */

static void tx_begin(RedoGen *g) {
	Rng *r = &g->r;

	g->in_tx = true;
	g->ops_left = 1 + rng_below(r, 6);
	g->usn = (uint16_t) (1 + rng_below(r, 10));
	g->slot = (uint16_t) rng_below(r, 48);
	g->sqn++;
	g->uba_dba = ora_rdba(3, 128 + rng_below(r, 30000));
	g->uba_seq = (uint16_t) rng_below(r, 65535);
	g->uba_rec = 1;
	/* A transaction works on one table, a few neighbouring blocks. */
	g->afn = (uint16_t) (g->ndf >= 4 ? 4 + rng_below(r, g->ndf - 3) : 1 + rng_below(r, g->ndf));
	g->block = ORAGEN_META_BLOCKS + rng_below(r, 100000);
	g->tpl = (RowTemplate) rng_below(r, _ROW_TEMPLATE_MAX);
	g->objn = 73000 + g->afn * 1000 + rng_below(r, 40);
	g->next_id = 1000000 + (uint64_t) g->afn * 100000000 + rng_below(r, 1u << 24);
}

static void put_xid(uint8_t *p, const RedoGen *g) {
	ora_put16(p, g->usn);
	ora_put16(p + 2, g->slot);
	ora_put32(p + 4, g->sqn);
}

/* KDO operation header for 11.x vectors (and the undo of them). */
static void put_kdo(RedoGen *g, uint8_t *p, uint8_t op, uint32_t dba, uint16_t slot, uint8_t ncol, uint8_t nchg) {
	p[0] = op;
	p[1] = 0x01; /* xtype: redo */
	p[2] = 2;    /* itl */
	ora_put32(p + 4, dba);
	ora_put32(p + 8, 0);
	ora_put16(p + 12, (uint16_t) (1 + rng_below(&g->r, 1200)));
	p[16] = ROW_FLAG_HEAD;
	p[17] = 0;
	ora_put16(p + 18, slot);
	p[20] = ncol;
	p[21] = nchg;
	ora_put16(p + 22, (uint16_t) (g->objn & 0xffff));
}

/*
 * Column numbers of an update are drawn from the after image, and the before
 * image may be shorter: rowgen does not store trailing NULL columns.  Such a
 * column was NULL before the update, so it goes in as an empty field, like
 * any NULL; its off/len slots are not set and must not be read.
 */
static void add_columns(RedoGen *g, const RowCols *c, const uint8_t *colnos, unsigned n) {
	for (unsigned i = 0; i < n; i++) {
		unsigned col = colnos ? colnos[i] : i;
		if (col >= c->ncols || c->len[col] == ROW_NULL)
			field_ref(g, c->data, 0);
		else
			field_ref(g, c->data + c->off[col], c->len[col]);
	}
}

static void rec_dml(RedoGen *g) {
	Rng *r = &g->r;
	unsigned kind = rng_below(r, 100);
	uint8_t op = kind < 50 ? 5 : kind < 85 ? 2 : 3; /* URP, IRP, DRP */
	uint32_t dba = ora_rdba(g->afn, g->block + rng_below(r, 4));
	uint16_t slot = (uint16_t) rng_below(r, 90);
	RowCols before, after;
	uint8_t colnos[ROW_COLUMNS_MAX];
	unsigned nchg = 0;
	uint8_t *p;

	rowgen_make(g->tpl, g->next_id, r, &after);
	rowgen_make(g->tpl, g->next_id, r, &before);
	g->next_id += 1 + rng_below(r, 3);
	if (op == 5) {
		nchg = 1 + rng_below(r, MIN(3u, after.ncols - 1));
		for (unsigned i = 0; i < nchg; i++)
			colnos[i] = (uint8_t) (1 + rng_below(r, after.ncols - 1));
	}

	rec_begin(g);

	if (g->uba_rec == 1) {
		/* 5.2: undo header, first change of the transaction. */
		cv_begin(g);
		p = field_alloc(g, 32);
		put_xid(p, g);
		ora_put32(p + 8, g->uba_dba);
		ora_put16(p + 12, g->uba_seq);
		p[14] = g->uba_rec;
		p[15] = 0x0a;
		ora_put16(p + 16, 1);
		ora_put16(p + 18, (uint16_t) rng_below(r, 8000));
		cv_end(g, 5, 2, (uint16_t) (15 + 2 * g->usn), 3, ora_rdba(3, 128 + g->usn * 8));
	}

	/* 5.1: undo record with the before image. */
	cv_begin(g);
	p = field_alloc(g, 20); /* ktudb */
	ora_put16(p, (uint16_t) (100 + 20 * before.ncols));
	p[4] = 0x12;
	ora_put16(p + 6, g->uba_seq);
	p[8] = g->uba_rec;
	put_xid(p + 12, g);
	p = field_alloc(g, 24); /* ktubu */
	ora_put32(p, g->objn);
	ora_put32(p + 4, g->objn);
	ora_put32(p + 8, 4);
	p[16] = 11;
	p[17] = op == 2 ? 3 : op == 3 ? 2 : 5; /* the undo of the redo op */
	p = field_alloc(g, 24);
	put_kdo(g, p, op == 2 ? 3 : op == 3 ? 2 : 5, dba, slot, (uint8_t) before.ncols, (uint8_t) nchg);
	if (op == 5) {
		p = field_alloc(g, ALIGN4(2 * nchg));
		for (unsigned i = 0; i < nchg; i++)
			ora_put16(p + 2 * i, colnos[i]);
		add_columns(g, &before, colnos, nchg);
	} else if (op == 3)
		add_columns(g, &before, NULL, before.ncols);
	cv_end(g, 5, 1, (uint16_t) (16 + 2 * g->usn), 3, g->uba_dba);

	/* 11.x: the change itself. */
	cv_begin(g);
	p = field_alloc(g, g->uba_rec == 1 ? 24 : 8); /* ktbredo */
	p[0] = g->uba_rec == 1 ? 0x11 : 0x01;
	if (g->uba_rec == 1) {
		put_xid(p + 8, g);
		ora_put32(p + 16, g->uba_dba);
	}
	p = field_alloc(g, 24);
	put_kdo(g, p, op, dba, slot, (uint8_t) after.ncols, (uint8_t) nchg);
	if (op == 5) {
		p = field_alloc(g, ALIGN4(2 * nchg));
		for (unsigned i = 0; i < nchg; i++)
			ora_put16(p + 2 * i, colnos[i]);
		add_columns(g, &after, colnos, nchg);
	} else if (op == 2)
		add_columns(g, &after, NULL, after.ncols);
	cv_end(g, 11, op, 1, g->afn, dba);

	rec_end(g);
	g->uba_rec++;
	g->ops_left--;
}

static void rec_commit(RedoGen *g) {
	uint8_t *p;

	rec_begin(g);
	cv_begin(g);
	p = field_alloc(g, 20); /* ktucm */
	put_xid(p, g);
	p[8] = 0x02;
	p[12] = 0x02;
	p = field_alloc(g, 16); /* ktucf */
	ora_put32(p, g->uba_dba);
	ora_put16(p + 4, g->uba_seq);
	p[6] = g->uba_rec;
	cv_end(g, 5, 4, (uint16_t) (15 + 2 * g->usn), 3, ora_rdba(3, 128 + g->usn * 8));
	rec_end(g);
	g->in_tx = false;
}

static void next_record(RedoGen *g) {
	if (!g->in_tx)
		tx_begin(g);
	if (g->ops_left > 0)
		rec_dml(g);
	else
		rec_commit(g);
}

/* ---- file ----------------------------------------------------------------- */

static void redo_block_finish(uint8_t *b, uint32_t blockno, uint32_t seq, uint16_t offset) {
	b[ORA_RBH_SIGNATURE] = ORA_REDO_SIGNATURE;
	b[ORA_RBH_TYPE] = ORA_REDO_TYPE_512;
	b[2] = b[3] = 0;
	ora_put32(b + ORA_RBH_BLOCK, blockno);
	ora_put32(b + ORA_RBH_SEQUENCE, seq);
	ora_put16(b + ORA_RBH_OFFSET, offset);
	ora_put16(b + ORA_RBH_CHECKSUM, 0);
	ora_put16(b + ORA_RBH_CHECKSUM, ora_xor16(b, ORA_REDO_BLOCK_SIZE));
}

static void put_header_blocks(const OraDb *db, const ArchLog *log, uint8_t *b0, uint8_t *b1) {
	char desc[65];
	size_t n = strlen(db->db_name);

	memset(b0, 0, ORA_REDO_BLOCK_SIZE);
	b0[ORA_REDO0_TYPE] = ORA_REDO_TYPE_512;
	ora_put32(b0 + ORA_REDO0_MARK, 0xffc00000u);
	ora_put32(b0 + ORA_REDO0_BLOCK_SIZE, ORA_REDO_BLOCK_SIZE);
	ora_put32(b0 + ORA_REDO0_BLOCK_COUNT, log->blocks - 1);
	ora_put32(b0 + ORA_REDO0_MAGIC, ORA_FILE_MAGIC);

	memset(b1, 0, ORA_REDO_BLOCK_SIZE);
	ora_put32(b1 + ORA_KCRFH_COMPAT, ORA_KCRFH_COMPAT_19);
	ora_put32(b1 + ORA_KCRFH_DBID, db->dbid);
	memset(b1 + ORA_KCRFH_DB_NAME, ' ', ORAGEN_DB_NAME_MAX);
	memcpy(b1 + ORA_KCRFH_DB_NAME, db->db_name, MIN(n, ORAGEN_DB_NAME_MAX));
	ora_put32(b1 + ORA_KCRFH_CONTROL_SEQ, 20000 + log->sequence % 100000);
	ora_put32(b1 + ORA_KCRFH_FILE_SIZE, log->blocks - 1);
	ora_put32(b1 + ORA_KCRFH_BLOCK_SIZE, ORA_REDO_BLOCK_SIZE);
	ora_put16(b1 + ORA_KCRFH_FILE_NO, 0);
	ora_put16(b1 + ORA_KCRFH_FILE_TYPE, 2);
	ora_put32(b1 + ORA_KCRFH_ACTIVATION, db->activation);
	(void) snprintf(desc, sizeof(desc), "T %04u, S %010u, SCN 0x%016llx-0x%016llx", (unsigned) log->thread,
			(unsigned) log->sequence, (unsigned long long) log->low_scn,
			(unsigned long long) log->next_scn);
	memcpy(b1 + ORA_KCRFH_DESCRIPTION, desc, strlen(desc));
	ora_put32(b1 + ORA_KCRFH_NAB, log->blocks);
	ora_put32(b1 + ORA_KCRFH_RESETLOGS_ID, db->resetlogs_id);
	ora_put_scn(b1 + ORA_KCRFH_RESETLOGS_SCN, db->resetlogs_scn);
	ora_put32(b1 + ORA_KCRFH_HWS, 2 + log->blocks / 1024);
	ora_put16(b1 + ORA_KCRFH_THREAD, log->thread);
	ora_put_scn(b1 + ORA_KCRFH_LOW_SCN, log->low_scn);
	ora_put32(b1 + ORA_KCRFH_LOW_TIME, ora_kcrf_time(log->low_time));
	ora_put_scn(b1 + ORA_KCRFH_NEXT_SCN, log->next_scn);
	ora_put32(b1 + ORA_KCRFH_NEXT_TIME, ora_kcrf_time(log->next_time));
	redo_block_finish(b1, 1, log->sequence, 0);
}

int redo_write(const OraDb *db, const ArchLog *log, uint32_t datafile_count, Writer *w) {
	RedoGen gen, *g = &gen;
	uint8_t *b0, *b1;
	bool ended = false;
	int r;

	assert(log->blocks >= 3);
	*g = (RedoGen) {
		.db = db,
		.log = log,
		.ndf = MAX(datafile_count, 1u),
		.total = (uint64_t) (log->blocks - 2) * PAYLOAD,
		.scn = log->low_scn,
		.sqn = (uint32_t) hash2(db->seed, log->sequence) % 100000,
	};
	rng_seed(&g->r, hash3(db->seed, 0x4ed0, (uint64_t) log->thread << 32 | log->sequence));

	r = writer_reserve(w, 2 * ORA_REDO_BLOCK_SIZE, &b0);
	if (r < 0)
		return r;
	b1 = b0 + ORA_REDO_BLOCK_SIZE;
	put_header_blocks(db, log, b0, b1);

	for (uint32_t blk = 2; blk < log->blocks; blk++) {
		uint16_t first = 0;
		uint8_t *b;
		size_t pos = ORA_RBH_SIZE;

		r = writer_reserve(w, ORA_REDO_BLOCK_SIZE, &b);
		if (r < 0)
			return r;

		while (pos < ORA_REDO_BLOCK_SIZE && !ended) {
			size_t k;

			if (g->rec_pos == g->rec_len) {
				next_record(g);
				/* A record that would not fit ends the log: the rest stays zero. */
				if (g->rec_len > g->total - g->done) {
					ended = true;
					break;
				}
				if (first == 0)
					first = (uint16_t) pos;
			}
			k = MIN(ORA_REDO_BLOCK_SIZE - pos, g->rec_len - g->rec_pos);
			memcpy(b + pos, g->rec + g->rec_pos, k);
			g->rec_pos += k;
			g->done += k;
			pos += k;
		}
		memset(b + pos, 0, ORA_REDO_BLOCK_SIZE - pos);
		redo_block_finish(b, blk, log->sequence, first);
	}
	return 0;
}
