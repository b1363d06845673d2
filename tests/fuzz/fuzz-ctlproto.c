/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target for the control protocol (common/ctlproto.c): arbitrary bytes
 * are either rejected with a message, or parse into fields that keep every
 * limit and format back to exactly the same bytes; the same bytes as a
 * request are either refused with a message or give a request whose
 * arguments keep every promise of ctlproto.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/ctlproto.h"
#include "tests/fuzz/fuzz.h"

static void check(bool ok) {
	if (!ok)
		abort();
}

static void fuzz_message(const uint8_t *data, size_t size) {
	CtlMessage m;
	char *error = NULL;
	int r = ctl_message_parse(data, size, &m, &error);
	if (r < 0) {
		check(r == -EBADMSG || r == -E2BIG || r == -ENOMEM);
		check(r == -ENOMEM || error);
		check(m.n == 0 && !m.fields);
		free(error);
		return;
	}
	check(!error && m.n >= 1);
	for (size_t i = 0; i < m.n; i++) {
		check(strlen(m.fields[i].name) <= CTL_NAME_MAX);
		check(strlen(m.fields[i].value) <= CTL_VALUE_MAX);
	}
	/* One encoding per message. */
	uint8_t *out;
	size_t out_size;
	r = ctl_message_format(&m, CTL_FRAME_SIZE_MAX, &out, &out_size);
	check(r == 0 || r == -ENOMEM);
	if (r == 0) {
		uint32_t n;
		check(ctl_frame_header_parse(out, CTL_FRAME_SIZE_MAX, &n) == 0 && n == size);
		check(out_size == size + CTL_FRAME_HEADER_SIZE);
		check(memcmp(out + CTL_FRAME_HEADER_SIZE, data, size) == 0);
		free(out);
	}
	ctl_message_done(&m);
}

static void fuzz_request(const uint8_t *data, size_t size) {
	CtlRequest req;
	char *error = NULL;
	int r = ctl_request_parse(data, size, &req, &error);
	if (r < 0) {
		check(r == -EBADMSG || r == -E2BIG || r == -ENOMEM);
		check(r == -ENOMEM || error);
		free(error);
		return;
	}
	check(!error);
	check(req.command >= 0 && req.command < _CTL_COMMAND_MAX);
	check(req.n_paths <= CTL_PATHS_MAX);
	bool moves = req.command == CTL_COMMAND_MIGRATE || req.command == CTL_COMMAND_RECALL ||
		     req.command == CTL_COMMAND_PIN || req.command == CTL_COMMAND_UNPIN;
	bool selects_logs = req.has_thread || req.has_sequence || req.has_since || req.has_until;
	if (req.command == CTL_COMMAND_DU || req.command == CTL_COMMAND_LS)
		check(req.n_paths >= 1);
	else if (moves)
		check(req.n_paths >= 1 || selects_logs || req.database);
	else
		check(req.n_paths == 0);
	check(!selects_logs || moves);
	check(!req.has_thread || req.thread >= 1);
	check(!req.has_sequence || (req.sequence_first >= 1 && req.sequence_first <= req.sequence_last));
	check(!req.has_since || req.since >= 0);
	check(!req.has_until || req.until >= 0);
	check(!(req.has_since && req.has_until) || req.since <= req.until);
	/* A restore set: recall with a database, a range and nothing else; SCNs only there. */
	check(!req.database || req.command == CTL_COMMAND_RECALL || req.command == CTL_COMMAND_RECOVERY);
	if (req.command == CTL_COMMAND_RECALL && req.database)
		check(req.n_paths == 0 && !req.has_thread && !req.has_sequence && !req.file_class && !req.has_older_than &&
		      !req.has_larger_than && req.has_until != req.has_until_scn && !(req.has_since && req.has_from_scn));
	check((!req.has_from_scn && !req.has_until_scn) || (req.command == CTL_COMMAND_RECALL && req.database));
	check(!req.has_from_scn || req.from_scn < UINT64_C(1) << 48);
	check(!req.has_until_scn || req.until_scn < UINT64_C(1) << 48);
	check(!(req.has_from_scn && req.has_until_scn) || req.from_scn <= req.until_scn);
	check(!req.database || (strlen(req.database) >= 1 && strlen(req.database) <= 10));
	for (size_t i = 0; i < req.n_paths; i++)
		check(ctl_path_is_valid(req.paths[i]) && req.paths[i][0] == '/' && !strstr(req.paths[i], "//") &&
		      !strstr(req.paths[i], "/../") && !strstr(req.paths[i], "/./"));
	if (req.command == CTL_COMMAND_REPORT)
		check(req.by >= 0 && req.by < _CTL_REPORT_BY_MAX);
	check(!req.has_tier || ((req.command == CTL_COMMAND_SCRUB || req.command == CTL_COMMAND_MIGRATE ||
				 req.command == CTL_COMMAND_HOST_RETIRE) &&
				req.tier <= CTL_TIER_MAX));
	/* host_retire: a valid host name and its tier, always; root alone may ask. */
	check((req.command == CTL_COMMAND_HOST_RETIRE) ==
	      (req.host != NULL && config_host_name_is_valid(req.host) && req.has_tier));
	check(!req.force || req.command == CTL_COMMAND_HOST_RETIRE);
	check(ctl_command_is_root_only(req.command) == (req.command == CTL_COMMAND_HOST_RETIRE));
	check(!ctl_command_is_root_only(req.command) || ctl_command_is_privileged(req.command));
	check(!req.dry_run || req.command == CTL_COMMAND_MIGRATE || req.command == CTL_COMMAND_RECALL ||
	      req.command == CTL_COMMAND_PIN);
	check(!ctl_command_is_privileged(req.command) || req.command >= CTL_COMMAND_GC);
	ctl_request_done(&req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	fuzz_message(data, size);
	fuzz_request(data, size);
	return 0;
}
