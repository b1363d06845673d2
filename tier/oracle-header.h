/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * What an archived redo log says about itself in its first two blocks: the
 * database (DBID, name, resetlogs incarnation), the redo thread, the log
 * sequence and the SCN and time range it covers.  The policy engine keys
 * archivelog recall ("thread 1, sequences 2596-2603") and the space reports
 * by these, not by file names, which LOG_ARCHIVE_FORMAT lets a DBA choose.
 *
 * Layout (little-endian, as Oracle writes it on x86-64 Linux; the field
 * offsets are the ones open-source redo readers use):
 *
 *   block 0 (file header):  byte 1 block type 0x22, u32 @4 0xffc00000,
 *                           u32 @20 block size, u32 @24 blocks after block 0
 *   block 1 (kcrfh):        16-byte redo block header (byte 0 0x01, byte 1
 *                           0x22, u32 @4 block number 1, u32 @8 sequence,
 *                           u16 @14 checksum: the block XORs to zero in u16
 *                           words), then u32 @24 DBID, char[8] @28 DB name,
 *                           u16 @50 file type 2, u32 @160 resetlogs id,
 *                           u16 @176 thread, SCN @180 low, u32 @188 low
 *                           time, SCN @192 next, u32 @200 next time.  An SCN
 *                           is u32 base + u16 wrap (48 bits).
 *
 * A log whose block size is not 512 (4 KiB redo on some storage) carries the
 * same header in block 1 at offset block_size; ORA_ARCHIVELOG_HEADER_BYTES
 * covers the largest.
 */

#include <stddef.h>
#include <stdint.h>

#define ORA_ARCHIVELOG_HEADER_BYTES (2u * 4096u)

typedef struct OraArchivelogInfo {
	uint32_t dbid;
	char db_name[9];          /* NUL-terminated, trailing blanks removed */
	uint32_t resetlogs_id;
	uint16_t thread;
	uint32_t sequence;
	uint64_t low_scn;         /* first change in this log */
	uint64_t next_scn;        /* first change of the next log */
	int64_t low_time;         /* Unix seconds (Oracle stores local time without a zone: read as UTC) */
	int64_t next_time;
	uint32_t block_size;
	uint64_t blocks;          /* including block 0 */
} OraArchivelogInfo;

/*
 * Parses the first len bytes of a file (at least 2 * block size of it; pass
 * up to ORA_ARCHIVELOG_HEADER_BYTES).
 * Returns: 0 and *ret; -ENODATA when len is too short to tell; -EMEDIUMTYPE
 * when the bytes are not an archived redo log's header (block 0 does not
 * match); -EBADMSG when block 0 says redo log but block 1 is damaged
 * (checksum, block number, file type or a field out of range).  On error
 * *ret is untouched.  Never reads past buf[len).
 */
int ora_archivelog_parse(const void *buf, size_t len, OraArchivelogInfo *ret);

/* Oracle's kcrf time (seconds since 1988 in 31-day months) to Unix seconds, or -1 if out of range. */
int64_t ora_kcrf_time_to_unix(uint32_t t);
