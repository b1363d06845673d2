/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * On-disk layouts that oragen writes, as byte offsets.  Self-contained (no
 * project includes) so that a parser elsewhere can read it.
 *
 * All multi-byte integers are little-endian (Oracle on x86-64 Linux).  An
 * SCN is 48 bits: "base" is the low 32, "wrap" the high 16.  A stored SCN
 * field of 8 bytes is: u32 base, u16 wrap, u16 zero.
 *
 * Provenance of each layout:
 *   - datafile cache header, tail and checksum: Oracle's kcbh, exact.
 *   - datafile block 0 and 1 (file header): Oracle's layout as far as the
 *     fields written here go (kcvfh offsets as BBED prints them).
 *   - archived redo log block 0, redo block header, block 1 (kcrfh) fields:
 *     Oracle's offsets as read by open-source redo parsers (OpenLogReplicator).
 *   - redo record and change vector bodies: Oracle-like, not exact.
 *   - backup piece header, per-block frames, archivelog sections: invented
 *     (RMAN's piece format is undocumented); marked ORAGEN_ below.
 */

/* ---- Datafile blocks ---------------------------------------------------- */

#define ORA_BLOCK_SIZE 8192u

/* Cache header (kcbh), first 20 bytes of every formatted block. */
#define ORA_KCBH_TYPE 0      /* u8, ORA_BT_* */
#define ORA_KCBH_FORMAT 1    /* u8, ORA_FORMAT_V8 */
#define ORA_KCBH_RDBA 4      /* u32, ora_rdba(file, block) */
#define ORA_KCBH_SCN_BASE 8  /* u32 */
#define ORA_KCBH_SCN_WRAP 12 /* u16 */
#define ORA_KCBH_SEQ 14      /* u8, 1..254 */
#define ORA_KCBH_FLAG 15     /* u8, ORA_FLAG_* */
#define ORA_KCBH_CHECKSUM 16 /* u16 */
#define ORA_KCBH_SIZE 20

/* Tail: u32 = (scn_base & 0xffff) << 16 | type << 8 | seq. */
#define ORA_TAIL_OFFSET (ORA_BLOCK_SIZE - 4)

#define ORA_FORMAT_V8 0xa2
#define ORA_FLAG_NEW 0x01
#define ORA_FLAG_DELAYED_LOGGING 0x02
#define ORA_FLAG_CHECKSUM 0x04 /* checksum field valid: the block XORs to 0 */

/*
 * Checksum (DB_BLOCK_CHECKSUM=TYPICAL): the u16 at ORA_KCBH_CHECKSUM is
 * chosen so that the XOR of all 4096 little-endian u16 words of the block is
 * zero.  Redo blocks use the same rule over their 512 bytes (field at 14).
 */

#define ORA_BT_UNDO 0x02
#define ORA_BT_DATA 0x06 /* table and index blocks (KTB + KDB/KDX layers) */
#define ORA_BT_FILE_HEADER 0x0b
#define ORA_BT_SPACE_HEADER 0x1d
#define ORA_BT_SPACE_BITMAP 0x1e
#define ORA_BT_L1_BITMAP 0x20
#define ORA_BT_L2_BITMAP 0x21
#define ORA_BT_SEGMENT_HEADER 0x23
#define ORAGEN_BT_PIECE_HEADER 0xbb /* invented: backup piece header */

/* Relative data block address: 10 bits file, 22 bits block. */
#define ORA_RDBA_BLOCK_BITS 22
#define ORA_RDBA_BLOCK_MAX ((1u << ORA_RDBA_BLOCK_BITS) - 1)
#define ORA_RDBA_FILE_MAX 1023u

/* Block 0 of a datafile: OS header, not a cache-layer block (no checksum). */
#define ORA_DF0_FORMAT 1       /* u8 0xa2 (byte 0 is 0x00) */
#define ORA_DF0_MARK 4         /* u32 0xffc00000 */
#define ORA_DF0_BLOCK_SIZE 20  /* u32 */
#define ORA_DF0_BLOCK_COUNT 24 /* u32, blocks after block 0 */
#define ORA_DF0_MAGIC 28       /* u32 ORA_FILE_MAGIC */
#define ORA_FILE_MAGIC 0x7a7b7c7du /* bytes 7d 7c 7b 7a */

/* Block 1 of a datafile: file header (kcvfh), cache header + fields: */
#define ORA_KCVFH_SW_VERSION 20    /* u32 */
#define ORA_KCVFH_COMPAT 24        /* u32, 0x13000000 = 19.0 */
#define ORA_KCVFH_DBID 28          /* u32 */
#define ORA_KCVFH_DB_NAME 32       /* char[8], space padded */
#define ORA_KCVFH_CONTROL_SEQ 40   /* u32 */
#define ORA_KCVFH_FILE_SIZE 44     /* u32, blocks */
#define ORA_KCVFH_BLOCK_SIZE 48    /* u32 */
#define ORA_KCVFH_FILE_NO 52       /* u16 */
#define ORA_KCVFH_FILE_TYPE 54     /* u16, 3 = datafile */
#define ORA_KCVFH_ACTIVATION 56    /* u32 */
#define ORA_KCVFH_CREATION_SCN 100 /* scn8 */
#define ORA_KCVFH_CREATION_TIME 108 /* u32, kcrf time */
#define ORA_KCVFH_CKPT_COUNT 140   /* u32 */
#define ORA_KCVFH_TS_NO 332        /* u32 */
#define ORA_KCVFH_TS_NAME_LEN 336  /* u16 */
#define ORA_KCVFH_TS_NAME 338      /* char[30] */
#define ORA_KCVFH_REL_FILE_NO 368  /* u32 */
#define ORA_KCVFH_CKPT_SCN 484     /* scn8 */
#define ORA_KCVFH_CKPT_TIME 492    /* u32, kcrf time */

/*
 * Oracle "kcrf" time: seconds since 1988-01-01 00:00:00 in a packed form,
 * ((((((year - 1988) * 12 + month - 1) * 31 + day - 1) * 24 + hour) * 60
 *    + minute) * 60 + second).
 */

/* ---- Archived redo logs ------------------------------------------------- */

#define ORA_REDO_BLOCK_SIZE 512u

/* Block 0: file header. */
#define ORA_REDO0_TYPE 1        /* u8 0x22 (byte 0 is 0x00) */
#define ORA_REDO0_MARK 4        /* u32 0xffc00000 */
#define ORA_REDO0_BLOCK_SIZE 20 /* u32, 512 */
#define ORA_REDO0_BLOCK_COUNT 24 /* u32, blocks after block 0 */
#define ORA_REDO0_MAGIC 28      /* u32 ORA_FILE_MAGIC */

/* Every block >= 1 starts with this 16-byte header. */
#define ORA_RBH_SIGNATURE 0 /* u8 0x01 */
#define ORA_RBH_TYPE 1      /* u8 0x22 */
#define ORA_RBH_BLOCK 4     /* u32, block number within the file */
#define ORA_RBH_SEQUENCE 8  /* u32, log sequence */
#define ORA_RBH_OFFSET 12   /* u16, offset of the first record starting here, 0 if none */
#define ORA_RBH_CHECKSUM 14 /* u16, block XORs to zero */
#define ORA_RBH_SIZE 16
#define ORA_REDO_SIGNATURE 0x01
#define ORA_REDO_TYPE_512 0x22

/* Block 1: redo log file header (kcrfh), offsets from the block start. */
#define ORA_KCRFH_COMPAT 20       /* u32, 0x13000000 = 19.0 */
#define ORA_KCRFH_DBID 24         /* u32 */
#define ORA_KCRFH_DB_NAME 28      /* char[8], space padded */
#define ORA_KCRFH_CONTROL_SEQ 36  /* u32 */
#define ORA_KCRFH_FILE_SIZE 40    /* u32, blocks after block 0 */
#define ORA_KCRFH_BLOCK_SIZE 44   /* u32, 512 */
#define ORA_KCRFH_FILE_NO 48      /* u16 */
#define ORA_KCRFH_FILE_TYPE 50    /* u16, 2 = log */
#define ORA_KCRFH_ACTIVATION 52   /* u32 */
#define ORA_KCRFH_DESCRIPTION 92  /* char[64], "T 0001, S 0000000123, SCN 0x...-0x..." */
#define ORA_KCRFH_NAB 156         /* u32, next available block = blocks in file */
#define ORA_KCRFH_RESETLOGS_ID 160 /* u32 */
#define ORA_KCRFH_RESETLOGS_SCN 164 /* scn8 */
#define ORA_KCRFH_HWS 172         /* u32 */
#define ORA_KCRFH_THREAD 176      /* u16 */
#define ORA_KCRFH_LOW_SCN 180     /* scn8, first change in this log */
#define ORA_KCRFH_LOW_TIME 188    /* u32, kcrf time */
#define ORA_KCRFH_NEXT_SCN 192    /* scn8, first change of the next log */
#define ORA_KCRFH_NEXT_TIME 200   /* u32, kcrf time */
#define ORA_KCRFH_COMPAT_19 0x13000000u

/*
 * Redo records (Oracle-like): they start 4-aligned anywhere in the payload
 * of blocks >= 2 and may span blocks.  Header, 24 bytes, or 68 when the
 * record opens a log write (vld & ORA_RREC_VLD_LWN):
 *   0 u32 length (whole record, multiple of 4)   4 u8 vld
 *   6 u16 scn wrap   8 u32 scn base   12 u16 sub-scn
 *   LWN only: 24 u16 lwn number, 28 u32 lwn blocks, 32 scn8 lwn scn,
 *             40 u32 kcrf time
 * then change vectors: 32-byte header (0 u8 layer, 1 u8 code, 2 u16 class,
 * 4 u16 afn, 8 u32 dba, 12 scn base, 16 scn wrap, 18 u8 seq, 19 u8 type),
 * a u16 length array (first entry = array size) padded to 4, and the fields,
 * each padded to 4.  The rest of the last block is zero.
 */
#define ORA_RREC_HEADER 24
#define ORA_RREC_HEADER_LWN 68
#define ORA_RREC_VLD_CHANGES 0x01
#define ORA_RREC_VLD_LWN 0x04
#define ORA_RCV_HEADER 32

/* ---- Backup pieces (invented layout) ------------------------------------ */

/*
 * A backup piece is: one 8 KiB header block (cache header with type
 * ORAGEN_BT_PIECE_HEADER, rdba 0, valid checksum and tail), then either
 *
 *  - datafile content: the blocks of up to FILESPERSET datafiles,
 *    multiplexed round-robin in units of ORAGEN_MPX_UNIT_BLOCKS blocks per
 *    file (a unit counts only written blocks), each block preceded by a
 *    16-byte frame.  Block 0 (OS header) and never-formatted blocks are not
 *    written.  Frames hold only values taken from the block itself, so an
 *    unchanged block gets the same frame every day; or
 *
 *  - archivelog content: for each archived log, a 64-byte section header
 *    followed by the log's bytes, unchanged.
 */
#define ORAGEN_MPX_UNIT_BLOCKS 64u

/* Piece header fields, after the cache header. */
#define ORAGEN_PH_MAGIC 20          /* u32 ORAGEN_PIECE_MAGIC */
#define ORAGEN_PH_VERSION 24        /* u32, 1 */
#define ORAGEN_PH_DBID 28           /* u32 */
#define ORAGEN_PH_DB_NAME 32        /* char[8], space padded */
#define ORAGEN_PH_SET_STAMP 40      /* u32 */
#define ORAGEN_PH_SET_COUNT 44      /* u32 */
#define ORAGEN_PH_PIECE_NO 48       /* u16 */
#define ORAGEN_PH_KIND 50           /* u16, ORAGEN_PIECE_* */
#define ORAGEN_PH_BLOCK_SIZE 52     /* u32, 8192 */
#define ORAGEN_PH_MPX_UNIT 56       /* u32, blocks per multiplexing unit */
#define ORAGEN_PH_NENTRIES 60       /* u32, entries below */
#define ORAGEN_PH_TAG 64            /* char[32], NUL padded */
#define ORAGEN_PH_TIME 96           /* u32, kcrf time */
#define ORAGEN_PH_ENTRIES 128       /* ORAGEN_PE_SIZE bytes each */
#define ORAGEN_PE_SIZE 32
#define ORAGEN_PH_ENTRIES_MAX ((ORA_BLOCK_SIZE - 4 - ORAGEN_PH_ENTRIES) / ORAGEN_PE_SIZE)
#define ORAGEN_PIECE_MAGIC 0x4e454741u /* "AGEN" */
#define ORAGEN_PIECE_DATAFILE 1
#define ORAGEN_PIECE_ARCHIVELOG 2

/* Datafile entry: */
#define ORAGEN_PE_DF_FILE_NO 0  /* u32 */
#define ORAGEN_PE_DF_BLOCKS 4   /* u32, file size in blocks */
#define ORAGEN_PE_DF_WRITTEN 8  /* u32, blocks in this piece */
#define ORAGEN_PE_DF_CKPT_SCN 12 /* scn8 */
/* Archivelog entry: */
#define ORAGEN_PE_AL_THREAD 0   /* u16 */
#define ORAGEN_PE_AL_SEQUENCE 4 /* u32 */
#define ORAGEN_PE_AL_LOW_SCN 8  /* scn8 */
#define ORAGEN_PE_AL_NEXT_SCN 16 /* scn8 */
#define ORAGEN_PE_AL_BYTES 24   /* u32, bytes of the log */

/* Per-block frame in a datafile piece. */
#define ORAGEN_FRAME_MAGIC 0   /* u32 ORAGEN_FRAME_MAGIC_VALUE */
#define ORAGEN_FRAME_RDBA 4    /* u32, copy of the block's rdba */
#define ORAGEN_FRAME_SCN_BASE 8 /* u32, copy of the block's SCN base */
#define ORAGEN_FRAME_SCN_WRAP 12 /* u16 */
#define ORAGEN_FRAME_CHECKSUM 14 /* u16, copy of the block's checksum */
#define ORAGEN_FRAME_SIZE 16
#define ORAGEN_FRAME_MAGIC_VALUE 0x4b4c4246u /* "FBLK" */

/* Archivelog section header in an archivelog piece. */
#define ORAGEN_AS_MAGIC 0      /* u32 ORAGEN_AS_MAGIC_VALUE */
#define ORAGEN_AS_THREAD 4     /* u16 */
#define ORAGEN_AS_SEQUENCE 8   /* u32 */
#define ORAGEN_AS_BYTES 12     /* u32, bytes of the log that follow */
#define ORAGEN_AS_LOW_SCN 16   /* scn8 */
#define ORAGEN_AS_NEXT_SCN 24  /* scn8 */
#define ORAGEN_AS_SIZE 64
#define ORAGEN_AS_MAGIC_VALUE 0x43455341u /* "ASEC" */

/* ---- Little-endian helpers ---------------------------------------------- */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "ora_xor16() assumes a little-endian host");

static inline uint16_t ora_get16(const uint8_t *p) {
	return (uint16_t) (p[0] | p[1] << 8);
}

static inline uint32_t ora_get32(const uint8_t *p) {
	return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

static inline uint64_t ora_get_scn(const uint8_t *p) {
	return (uint64_t) ora_get16(p + 4) << 32 | ora_get32(p);
}

static inline void ora_put16(uint8_t *p, uint16_t v) {
	p[0] = (uint8_t) v;
	p[1] = (uint8_t) (v >> 8);
}

static inline void ora_put32(uint8_t *p, uint32_t v) {
	p[0] = (uint8_t) v;
	p[1] = (uint8_t) (v >> 8);
	p[2] = (uint8_t) (v >> 16);
	p[3] = (uint8_t) (v >> 24);
}

static inline void ora_put_scn(uint8_t *p, uint64_t scn) {
	ora_put32(p, (uint32_t) scn);
	ora_put16(p + 4, (uint16_t) (scn >> 32));
	ora_put16(p + 6, 0);
}

static inline uint32_t ora_rdba(uint32_t file_no, uint32_t block) {
	return file_no << ORA_RDBA_BLOCK_BITS | (block & ORA_RDBA_BLOCK_MAX);
}

/* XOR of all u16 words of buf (len a multiple of 8); 0 for a valid block. */
static inline uint16_t ora_xor16(const void *buf, size_t len) {
	const uint8_t *p = buf;
	uint64_t x = 0;

	for (size_t i = 0; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		x ^= w;
	}
	x ^= x >> 32;
	x ^= x >> 16;
	return (uint16_t) x;
}
