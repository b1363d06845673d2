/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target for a host's summary on a shared tier (tier/shared.c,
 * h/NAME/s/summary), as every host's report --by host reads the others'
 * from a filer nobody vouches for: garbage is -EBADMSG, and a summary that
 * parses formats back to exactly the same bytes (one encoding per summary,
 * version 1 or 2), with a valid host name, and one of version 1 counts no
 * foreign bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tier/shared.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	TierHostSummary s;
	char buf[TIER_HOST_SUMMARY_MAX];

	int q = tier_host_summary_parse(data, size, &s);
	if (q == -EBADMSG)
		return 0;
	if (q < 0 || !config_host_name_is_valid(s.host))
		abort();
	if (!s.has_foreign && (s.foreign_logical != 0 || s.foreign_stored != 0))
		abort();
	int n = tier_host_summary_format(&s, buf);
	if (n < 0 || (size_t) n != size || memcmp(buf, data, size) != 0)
		abort();
	return 0;
}
