/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Key rings from arbitrary bytes (dedup_keyring_parse): anything but a
 * well-formed ring or key file is -EBADMSG; a ring that parses formats back
 * to the same bytes (one spelling per ring), holds 1 to DEDUP_KEYRING_MAX
 * keys of distinct tags; a key file parses as a ring of its one key whose
 * id key is its own derived one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/key.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	uint8_t id[DEDUP_KEY_SIZE], masters[DEDUP_KEYRING_MAX][DEDUP_KEY_SIZE];
	char back[DEDUP_KEYRING_FILE_MAX];
	size_t n = 0, len = 0;
	int r = dedup_keyring_parse(data, size, id, masters, &n);
	if (r == -EBADMSG)
		return 0;
	if (r != 0 || n == 0 || n > DEDUP_KEYRING_MAX)
		abort();
	uint32_t tags[DEDUP_KEYRING_MAX];
	for (size_t i = 0; i < n; i++) {
		DedupKey k;
		if (dedup_key_derive(masters[i], &k) != 0)
			abort();
		tags[i] = dedup_key_tag(k.key_id);
		for (size_t j = 0; j < i; j++)
			if (tags[j] == tags[i])
				abort();
		if (size == DEDUP_KEY_FILE_SIZE && (n != 1 || memcmp(k.id, id, DEDUP_KEY_SIZE) != 0))
			abort();
	}
	if (size == DEDUP_KEY_FILE_SIZE && memcmp(data, "fratier-key-1\n", 14) == 0)
		return 0;
	if (dedup_keyring_format(id, (const uint8_t (*)[DEDUP_KEY_SIZE]) masters, n, back, sizeof(back), &len) != 0 ||
	    len != size || memcmp(back, data, size) != 0)
		abort();
	return 0;
}
