/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target for a host record on a shared tier (tier/shared.c), as every
 * host reads the others' from a filer nobody vouches for: garbage is
 * -EBADMSG, and a record that parses formats back to exactly the same bytes
 * (one encoding per record), with a valid host name.  The instance parser
 * runs on the same bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tier/shared.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	TierHostRecord r;
	char buf[TIER_HOST_RECORD_MAX];
	uint8_t instance[TIER_HOST_INSTANCE_SIZE];

	int q = tier_host_instance_parse((const char *) data, size, instance);
	if (q < 0 && q != -EBADMSG)
		abort();

	q = tier_host_record_parse(data, size, &r);
	if (q == -EBADMSG)
		return 0;
	if (q < 0 || !config_host_name_is_valid(r.host) || r.state >= _TIER_HOST_STATE_MAX)
		abort();
	int n = tier_host_record_format(&r, buf);
	if (n < 0 || (size_t) n != size || memcmp(buf, data, size) != 0)
		abort();
	return 0;
}
