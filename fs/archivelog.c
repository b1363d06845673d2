/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * archivelog.c — what an archived log says about itself, read from its raw
 * bytes when it is sealed and recorded in the same transaction as its
 * recipe, so that "recall thread 1, sequences 2596-2603" and the reports
 * never depend on LOG_ARCHIVE_FORMAT or on reading a cold tier.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/macros.h"
#include "fs/fs-internal.h"
#include "tier/oracle-header.h"

int fs_archivelog_header(Fs *fs, uint32_t tier, uint64_t ino, CatalogArchivelog *ret) {
	uint8_t buf[ORA_ARCHIVELOG_HEADER_BYTES];
	_cleanup_close_ int fd = fs_staging_open_ro(fs, tier, ino);
	OraArchivelogInfo info;

	if (fd < 0)
		return fd;
	ssize_t n = pread(fd, buf, sizeof(buf), 0);
	if (n < 0)
		return -errno;
	int r = ora_archivelog_parse(buf, (size_t) n, &info);
	if (r < 0)
		return r;
	*ret = (CatalogArchivelog) {
		.dbid = info.dbid,
		.resetlogs_id = info.resetlogs_id,
		.thread = info.thread,
		.sequence = info.sequence,
		.low_scn = info.low_scn,
		.next_scn = info.next_scn,
		.low_time = info.low_time,
		.next_time = info.next_time,
	};
	memcpy(ret->db_name, info.db_name, sizeof(ret->db_name));
	return 0;
}
