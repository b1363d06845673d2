/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * RMAN-like backup pieces and image copies (layouts in oracle-format.h).
 *
 * A datafile backup set reads its files in parallel and interleaves them in
 * units of ORAGEN_MPX_UNIT_BLOCKS written blocks per file, round-robin, the
 * way RMAN multiplexes FILESPERSET files into one piece.  Never-formatted
 * blocks are skipped (RMAN's unused-block compression), so a block's offset in
 * the piece moves whenever anything before it in its file is formatted, and a
 * 16-byte frame before every block keeps blocks off an 8 KiB grid.  Together
 * they are why fixed-offset chunking finds little and content-defined chunking
 * finds the ~95% that did not change since yesterday.
 */

#include <assert.h>
#include <string.h>

#include "common/macros.h"
#include "tools/oragen/oragen.h"

static int piece_header_begin(const OraDb *db, const PieceInfo *pi, uint16_t kind, uint32_t nentries,
			      Writer *w, uint8_t **ret) {
	size_t n = MIN(strlen(db->db_name), (size_t) ORAGEN_DB_NAME_MAX);
	uint8_t *b;
	int r;

	assert(nentries <= ORAGEN_PH_ENTRIES_MAX);
	r = writer_reserve(w, ORA_BLOCK_SIZE, &b);
	if (r < 0)
		return r;
	memset(b, 0, ORA_BLOCK_SIZE);
	ora_put32(b + ORAGEN_PH_MAGIC, ORAGEN_PIECE_MAGIC);
	ora_put32(b + ORAGEN_PH_VERSION, 1);
	ora_put32(b + ORAGEN_PH_DBID, db->dbid);
	memset(b + ORAGEN_PH_DB_NAME, ' ', ORAGEN_DB_NAME_MAX);
	memcpy(b + ORAGEN_PH_DB_NAME, db->db_name, n);
	ora_put32(b + ORAGEN_PH_SET_STAMP, pi->set_stamp);
	ora_put32(b + ORAGEN_PH_SET_COUNT, pi->set_count);
	ora_put16(b + ORAGEN_PH_PIECE_NO, 1);
	ora_put16(b + ORAGEN_PH_KIND, kind);
	ora_put32(b + ORAGEN_PH_BLOCK_SIZE, ORA_BLOCK_SIZE);
	ora_put32(b + ORAGEN_PH_MPX_UNIT, kind == ORAGEN_PIECE_DATAFILE ? ORAGEN_MPX_UNIT_BLOCKS : 0);
	ora_put32(b + ORAGEN_PH_NENTRIES, nentries);
	strncpy((char *) b + ORAGEN_PH_TAG, pi->tag, 31);
	ora_put32(b + ORAGEN_PH_TIME, ora_kcrf_time(pi->time));
	*ret = b;
	return 0;
}

static void piece_header_end(const OraDb *db, const PieceInfo *pi, uint8_t *b) {
	ora_block_finish(b, ORAGEN_BT_PIECE_HEADER, 0, oradb_scn_at(db, pi->time), 1, ORA_FLAG_CHECKSUM);
}

int backup_datafiles(const OraDb *db, const PieceInfo *pi, Datafile **dfs, size_t n, Ideal *id,
		     Writer *w, uint64_t *ret_framing) {
	uint32_t cursor[ORAGEN_FILESPERSET_MAX];
	uint64_t framing = ORA_BLOCK_SIZE;
	uint8_t *h;
	bool more;
	int r;

	assert(n > 0 && n <= ORAGEN_FILESPERSET_MAX);
	r = piece_header_begin(db, pi, ORAGEN_PIECE_DATAFILE, (uint32_t) n, w, &h);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		uint8_t *e = h + ORAGEN_PH_ENTRIES + i * ORAGEN_PE_SIZE;

		ora_put32(e + ORAGEN_PE_DF_FILE_NO, dfs[i]->file_no);
		ora_put32(e + ORAGEN_PE_DF_BLOCKS, dfs[i]->nblocks);
		ora_put32(e + ORAGEN_PE_DF_WRITTEN, datafile_formatted_blocks(dfs[i]) - 1); /* not block 0 */
		ora_put_scn(e + ORAGEN_PE_DF_CKPT_SCN, datafile_checkpoint_scn(dfs[i]));
		cursor[i] = 1; /* block 0 is the OS header, not backed up */
	}
	piece_header_end(db, pi, h);

	do {
		more = false;
		for (size_t i = 0; i < n; i++) {
			Datafile *df = dfs[i];

			for (unsigned unit = 0; unit < ORAGEN_MPX_UNIT_BLOCKS && cursor[i] < df->nblocks;) {
				uint32_t blk = cursor[i]++;
				uint8_t *f, *b;

				if (!datafile_block_is_formatted(df, blk))
					continue;
				r = writer_reserve(w, ORAGEN_FRAME_SIZE + ORA_BLOCK_SIZE, &f);
				if (r < 0)
					return r;
				b = f + ORAGEN_FRAME_SIZE;
				datafile_render(df, blk, b);
				ora_put32(f + ORAGEN_FRAME_MAGIC, ORAGEN_FRAME_MAGIC_VALUE);
				memcpy(f + ORAGEN_FRAME_RDBA, b + ORA_KCBH_RDBA, 4);
				memcpy(f + ORAGEN_FRAME_SCN_BASE, b + ORA_KCBH_SCN_BASE, 4);
				memcpy(f + ORAGEN_FRAME_SCN_WRAP, b + ORA_KCBH_SCN_WRAP, 2);
				memcpy(f + ORAGEN_FRAME_CHECKSUM, b + ORA_KCBH_CHECKSUM, 2);
				datafile_account(df, blk, b, id);
				framing += ORAGEN_FRAME_SIZE;
				unit++;
			}
			more = more || cursor[i] < df->nblocks;
		}
	} while (more);

	*ret_framing = framing;
	return 0;
}

int backup_archivelogs(const OraDb *db, const PieceInfo *pi, const ArchLog *logs, size_t n,
		       uint32_t datafile_count, Writer *w, uint64_t *ret_framing) {
	uint64_t framing = ORA_BLOCK_SIZE;
	uint8_t *h;
	int r;

	r = piece_header_begin(db, pi, ORAGEN_PIECE_ARCHIVELOG, (uint32_t) n, w, &h);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		uint8_t *e = h + ORAGEN_PH_ENTRIES + i * ORAGEN_PE_SIZE;

		ora_put16(e + ORAGEN_PE_AL_THREAD, logs[i].thread);
		ora_put32(e + ORAGEN_PE_AL_SEQUENCE, logs[i].sequence);
		ora_put_scn(e + ORAGEN_PE_AL_LOW_SCN, logs[i].low_scn);
		ora_put_scn(e + ORAGEN_PE_AL_NEXT_SCN, logs[i].next_scn);
		ora_put32(e + ORAGEN_PE_AL_BYTES, (uint32_t) archlog_bytes(&logs[i]));
	}
	piece_header_end(db, pi, h);

	for (size_t i = 0; i < n; i++) {
		uint8_t *s;

		r = writer_reserve(w, ORAGEN_AS_SIZE, &s);
		if (r < 0)
			return r;
		memset(s, 0, ORAGEN_AS_SIZE);
		ora_put32(s + ORAGEN_AS_MAGIC, ORAGEN_AS_MAGIC_VALUE);
		ora_put16(s + ORAGEN_AS_THREAD, logs[i].thread);
		ora_put32(s + ORAGEN_AS_SEQUENCE, logs[i].sequence);
		ora_put32(s + ORAGEN_AS_BYTES, (uint32_t) archlog_bytes(&logs[i]));
		ora_put_scn(s + ORAGEN_AS_LOW_SCN, logs[i].low_scn);
		ora_put_scn(s + ORAGEN_AS_NEXT_SCN, logs[i].next_scn);
		framing += ORAGEN_AS_SIZE;

		/* The same bytes as the archived log: it is regenerated, not read back. */
		r = redo_write(db, &logs[i], datafile_count, w);
		if (r < 0)
			return r;
	}

	*ret_framing = framing;
	return 0;
}

int imagecopy_write(Datafile *df, Ideal *id, Writer *w) {
	for (uint32_t blk = 0; blk < df->nblocks; blk++) {
		uint8_t *b;
		int r = writer_reserve(w, ORA_BLOCK_SIZE, &b);

		if (r < 0)
			return r;
		datafile_render(df, blk, b);
		datafile_account(df, blk, b, id);
	}
	return 0;
}
