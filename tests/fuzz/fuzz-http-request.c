/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target for tierctl's /metrics request-head parser
 * (tools/tierctl/http.c): arbitrary bytes are a complete head, an
 * incomplete one, or refused; an accepted one has a target that starts
 * with '/', keeps its limit and has neither a space nor a query.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tools/tierctl/http.h"

static void check(bool ok) {
	if (!ok)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	TierctlHttpRequest req;
	int r = tierctl_http_request_parse((const char *) data, size, &req);
	check(r == 0 || r == -EAGAIN || r == -EBADMSG || r == -E2BIG);
	if (r == 0) {
		size_t n = strlen(req.target);
		check(n >= 1 && n <= TIERCTL_HTTP_TARGET_MAX && req.target[0] == '/');
		check(!strchr(req.target, ' ') && !strchr(req.target, '?'));
		check(req.method == TIERCTL_HTTP_GET || req.method == TIERCTL_HTTP_HEAD || req.method == TIERCTL_HTTP_OTHER);
	}
	return 0;
}
