/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Key files from arbitrary bytes (dedup_key_file_parse): anything but a
 * well-formed file is -EBADMSG; what parses formats back to the same bytes,
 * so no second spelling of a key (or of a damaged one) is accepted.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/key.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	uint8_t key[DEDUP_KEY_SIZE];
	char back[DEDUP_KEY_FILE_SIZE];
	int r = dedup_key_file_parse(data, size, key);
	if (r == -EBADMSG)
		return 0;
	if (r != 0 || dedup_key_file_format(key, back) != 0 || size != sizeof(back) || memcmp(back, data, size) != 0)
		abort();
	return 0;
}
