/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target for the archived redo log header parser: any bytes are either
 * a header whose fields keep the promises of oracle-header.h or one of its
 * three errors; never a crash or a read past the input.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tier/oracle-header.h"

static void check(bool ok) {
	if (!ok)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	OraArchivelogInfo info;
	/* A copy of exactly size bytes, so ASan sees any read past the input. */
	uint8_t *copy = malloc(size ? size : 1);
	check(copy != NULL);
	memcpy(copy, data, size);

	int r = ora_archivelog_parse(copy, size, &info);
	if (r < 0)
		check(r == -ENODATA || r == -EMEDIUMTYPE || r == -EBADMSG);
	else {
		check(info.block_size == 512 || info.block_size == 1024 || info.block_size == 4096);
		check(size >= 2 * (size_t) info.block_size);
		check(info.thread > 0 && info.sequence > 0 && info.next_scn > info.low_scn);
		check(info.low_time >= 0 && info.next_time >= info.low_time);
		check(strlen(info.db_name) <= 8);
		check(info.blocks >= 1);
	}
	free(copy);
	return 0;
}
