/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests for common/ctlproto.c: building and formatting messages,
 * escapes, the frame header, every kind of malformed payload (each with its
 * message), request validation per command, and the limits.
 */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ctlproto.h"

static void expect_bad_message(const char *payload, int want, const char *error_part) {
	CtlMessage m;
	char *error = NULL;
	int r = ctl_message_parse(payload, strlen(payload), &m, &error);
	if (r != want || !error || !strstr(error, error_part)) {
		fprintf(stderr, "payload %s: got %d '%s', want %d '%s'\n", payload, r, error ?: "", want, error_part);
		abort();
	}
	assert(m.n == 0);
	free(error);
}

static void expect_bad_request(const char *payload, const char *error_part) {
	CtlRequest req;
	char *error = NULL;
	int r = ctl_request_parse(payload, strlen(payload), &req, &error);
	if (r != -EBADMSG || !error || !strstr(error, error_part)) {
		fprintf(stderr, "request %s: got %d '%s', want '%s'\n", payload, r, error ?: "", error_part);
		abort();
	}
	free(error);
}

static void test_roundtrip(void) {
	CtlMessage m = {}, back;
	uint8_t *buf;
	size_t size;
	uint32_t n;

	assert(ctl_reply_begin(&m, CTL_REPLY_DATA) == 0);
	assert(ctl_message_add(&m, "row", "file") == 0);
	assert(ctl_message_add(&m, "path", "/a b/100%\n\x01\xff") == 0);
	assert(ctl_message_add_u64(&m, "logical", UINT64_MAX) == 0);
	assert(ctl_message_add(&m, "empty", "") == 0);
	assert(ctl_message_add(&m, "Bad", "x") == -EINVAL);
	assert(ctl_message_add(&m, "9x", "x") == -EINVAL);
	assert(ctl_message_format(&m, CTL_FRAME_SIZE_MAX, &buf, &size) == 0);

	const char *want = "fratier 1\nreply data\nrow file\npath /a b/100%25%0A%01%FF\n"
			   "logical 18446744073709551615\nempty \n";
	assert(size == CTL_FRAME_HEADER_SIZE + strlen(want));
	assert(memcmp(buf + CTL_FRAME_HEADER_SIZE, want, strlen(want)) == 0);
	assert(ctl_frame_header_parse(buf, CTL_FRAME_SIZE_MAX, &n) == 0 && n == strlen(want));
	assert(ctl_frame_header_parse(buf, 10, &n) == -E2BIG);
	assert(ctl_frame_header_parse((const uint8_t[4]) {}, 10, &n) == -EBADMSG);
	assert(ctl_message_format(&m, 20, &buf, &size) == -E2BIG || (free(buf), 0));

	assert(ctl_message_parse(want, strlen(want), &back, NULL) == 0);
	assert(back.n == m.n);
	assert(ctl_reply_kind(&back) == CTL_REPLY_DATA);
	assert(strcmp(back.fields[3].value, "/a b/100%\n\x01\xff") == 0);
	/* Top-level fields stop at the first row; a row's own fields are found from its index. */
	assert(!ctl_message_get(&back, 0, "logical"));
	uint64_t v;
	assert(ctl_message_get_u64(&back, 2, "logical", &v) == 0 && v == UINT64_MAX);
	assert(ctl_message_get_u64(&back, 2, "empty", &v) == -EBADMSG);
	assert(ctl_message_get_u64(&back, 2, "nothing", &v) == -ENOENT);
	ctl_message_done(&back);
	ctl_message_done(&m);
	free(buf);
}

static void test_malformed(void) {
	expect_bad_message("", -EBADMSG, "empty");
	expect_bad_message("fratier 1", -EBADMSG, "newline");
	expect_bad_message("fratier 1\nnospace\n", -EBADMSG, "line 2: no space");
	expect_bad_message("fratier 1\nBig x\n", -EBADMSG, "line 2: invalid field name");
	expect_bad_message("fratier 1\n x\n", -EBADMSG, "line 2: invalid field name");
	expect_bad_message("fratier 1\nabcdefghijabcdefghijabcdefghijabc x\n", -EBADMSG, "invalid field name");
	expect_bad_message("fratier 1\na %4\n", -EBADMSG, "bad % escape");
	expect_bad_message("fratier 1\na %4g\n", -EBADMSG, "bad % escape");
	expect_bad_message("fratier 1\na %0a\n", -EBADMSG, "bad % escape");
	expect_bad_message("fratier 1\na %41\n", -EBADMSG, "needless");
	expect_bad_message("fratier 1\na %00\n", -EBADMSG, "NUL");
	expect_bad_message("fratier 1\na \t\n", -EBADMSG, "unescaped byte 0x09");
	expect_bad_message("fratier 1\na \xc3\xa9\n", -EBADMSG, "unescaped byte 0xc3");
	expect_bad_message("fratier 1\r\n", -EBADMSG, "unescaped byte 0x0d");
	expect_bad_message("hello 1\n", -EBADMSG, "does not start with 'fratier 1'");
	expect_bad_message("fratier 2\n", -EBADMSG, "version '2' not supported");

	/* Limits: a value of CTL_VALUE_MAX bytes passes, one more does not. */
	size_t n = CTL_VALUE_MAX;
	char *big = malloc(n + 32);
	strcpy(big, "fratier 1\nv ");
	size_t at = strlen(big);
	memset(big + at, 'x', n);
	strcpy(big + at + n, "\n");
	CtlMessage m;
	assert(ctl_message_parse(big, strlen(big), &m, NULL) == 0);
	ctl_message_done(&m);
	memset(big + at, 'x', n + 1);
	strcpy(big + at + n + 1, "\n");
	expect_bad_message(big, -E2BIG, "value longer than 4096");
	free(big);

	/* CTL_FIELDS_MAX fields pass, one more does not. */
	size_t lines = CTL_FIELDS_MAX + 1;
	char *many = malloc(10 + lines * 4 + 1);
	strcpy(many, "fratier 1\n");
	char *tail = many + strlen(many);
	for (size_t i = 1; i < lines - 1; i++, tail += 4)
		memcpy(tail, "a 1\n", 5);
	assert(ctl_message_parse(many, strlen(many), &m, NULL) == 0 && m.n == CTL_FIELDS_MAX);
	ctl_message_done(&m);
	memcpy(tail, "a 1\n", 5);
	expect_bad_message(many, -E2BIG, "more than 65536 fields");
	free(many);
}

static void test_requests(void) {
	CtlRequest req;
	const char *du = "fratier 1\ncommand du\npath /\npath /archivelog/2024_01_01/o1_mf_1_7.arc\n";
	assert(ctl_request_parse(du, strlen(du), &req, NULL) == 0);
	assert(req.command == CTL_COMMAND_DU && req.n_paths == 2);
	assert(strcmp(req.paths[1], "/archivelog/2024_01_01/o1_mf_1_7.arc") == 0);
	ctl_request_done(&req);

	const char *rep = "fratier 1\ncommand report\nby day\n";
	assert(ctl_request_parse(rep, strlen(rep), &req, NULL) == 0 && req.by == CTL_REPORT_BY_DAY);
	ctl_request_done(&req);
	const char *scrub = "fratier 1\ncommand scrub\ntier 7\n";
	assert(ctl_request_parse(scrub, strlen(scrub), &req, NULL) == 0 && req.has_tier && req.tier == 7);
	assert(ctl_command_is_privileged(req.command));
	ctl_request_done(&req);
	const char *gc = "fratier 1\ncommand gc\n";
	assert(ctl_request_parse(gc, strlen(gc), &req, NULL) == 0 && ctl_command_is_privileged(req.command));
	ctl_request_done(&req);
	const char *mig = "fratier 1\ncommand migrate\npath /a.arc\ndry_run yes\ntier 2\npath /b\n";
	assert(ctl_request_parse(mig, strlen(mig), &req, NULL) == 0 && req.command == CTL_COMMAND_MIGRATE);
	assert(req.n_paths == 2 && req.has_tier && req.tier == 2 && req.dry_run && ctl_command_is_privileged(req.command));
	ctl_request_done(&req);
	const char *rec = "fratier 1\ncommand recall\npath /a.arc\n";
	assert(ctl_request_parse(rec, strlen(rec), &req, NULL) == 0 && req.command == CTL_COMMAND_RECALL);
	assert(req.n_paths == 1 && !req.has_tier && !req.dry_run && ctl_command_is_privileged(req.command));
	ctl_request_done(&req);
	const char *logs = "fratier 1\ncommand recall\nthread 2\nsequence 2596-2603\nsince 1700000000\nuntil 1700086400\n";
	assert(ctl_request_parse(logs, strlen(logs), &req, NULL) == 0 && req.n_paths == 0);
	assert(req.has_thread && req.thread == 2 && req.has_sequence && req.sequence_first == 2596 &&
	       req.sequence_last == 2603 && req.has_since && req.since == 1700000000 && req.has_until &&
	       req.until == 1700086400);
	ctl_request_done(&req);
	const char *one = "fratier 1\ncommand migrate\nsequence 7\n";
	assert(ctl_request_parse(one, strlen(one), &req, NULL) == 0 && !req.has_thread && req.sequence_first == 7 &&
	       req.sequence_last == 7);
	ctl_request_done(&req);
	const char *filtered = "fratier 1\ncommand migrate\npath /\nclass backuppiece\nolder_than 86400\nlarger_than 1048576\n";
	assert(ctl_request_parse(filtered, strlen(filtered), &req, NULL) == 0);
	assert(strcmp(req.file_class, "backuppiece") == 0 && req.has_older_than && req.older_than == 86400 &&
	       req.has_larger_than && req.larger_than == 1048576);
	ctl_request_done(&req);

	const char *pin = "fratier 1\ncommand pin\npath /a.arc\nsequence 5-9\n";
	assert(ctl_request_parse(pin, strlen(pin), &req, NULL) == 0 && req.command == CTL_COMMAND_PIN);
	assert(req.n_paths == 1 && req.has_sequence && ctl_command_is_privileged(req.command));
	ctl_request_done(&req);
	const char *unpin = "fratier 1\ncommand unpin\npath /a.arc\n";
	assert(ctl_request_parse(unpin, strlen(unpin), &req, NULL) == 0 && req.command == CTL_COMMAND_UNPIN);
	assert(ctl_command_is_privileged(req.command));
	ctl_request_done(&req);
	const char *st = "fratier 1\ncommand status\n";
	assert(ctl_request_parse(st, strlen(st), &req, NULL) == 0 && !ctl_command_is_privileged(req.command));
	ctl_request_done(&req);

	expect_bad_request("fratier 1\n", "second line must be 'command NAME'");
	expect_bad_request("fratier 1\npath /\n", "second line must be 'command NAME'");
	expect_bad_request("fratier 1\ncommand rm\n", "unknown command 'rm'");
	expect_bad_request("fratier 1\ncommand status\npath /\n", "unknown argument 'path' for command 'status'");
	expect_bad_request("fratier 1\ncommand du\n", "command 'du' needs argument 'path'");
	expect_bad_request("fratier 1\ncommand du\nby class\n", "unknown argument 'by'");
	expect_bad_request("fratier 1\ncommand du\npath a\n", "not absolute");
	expect_bad_request("fratier 1\ncommand du\npath /a/\n", "not absolute");
	expect_bad_request("fratier 1\ncommand du\npath /a//b\n", "not absolute");
	expect_bad_request("fratier 1\ncommand du\npath /a/./b\n", "not absolute");
	expect_bad_request("fratier 1\ncommand du\npath /..\n", "not absolute");
	expect_bad_request("fratier 1\ncommand report\n", "needs argument 'by'");
	expect_bad_request("fratier 1\ncommand report\nby week\n", "'by' must be class, day, tier, database or host, not 'week'");
	expect_bad_request("fratier 1\ncommand host_retire\ntier 1\n", "needs argument 'host'");
	expect_bad_request("fratier 1\ncommand host_retire\nhost beta\n", "needs argument 'tier'");
	expect_bad_request("fratier 1\ncommand host_retire\nhost Beta\ntier 1\n", "'host' must be a host name");
	expect_bad_request("fratier 1\ncommand host_retire\nhost beta\ntier 1\nforce maybe\n", "'force' must be yes or no");
	expect_bad_request("fratier 1\ncommand report\nby day\nby day\n", "more than 1 times");
	expect_bad_request("fratier 1\ncommand scrub\ntier 8\n", "from 0 to 7");
	expect_bad_request("fratier 1\ncommand scrub\ntier 01\n", "from 0 to 7");
	expect_bad_request("fratier 1\ncommand scrub\ntier -1\n", "from 0 to 7");
	expect_bad_request("fratier 1\ncommand migrate\ntier 1\n", "command 'migrate' needs a 'path' or an archived-log selection");
	expect_bad_request("fratier 1\ncommand unpin\npath /a\ndry_run yes\n", "unknown argument 'dry_run' for command 'unpin'");
	expect_bad_request("fratier 1\ncommand pin\n", "command 'pin' needs a 'path' or an archived-log selection");
	expect_bad_request("fratier 1\ncommand recall\nthread 0\n", "'thread' must be a redo thread from 1 to 65535");
	expect_bad_request("fratier 1\ncommand recall\nthread 65536\n", "'thread' must be a redo thread");
	expect_bad_request("fratier 1\ncommand recall\nsequence 9-3\n", "'sequence' must be N or FIRST-LAST");
	expect_bad_request("fratier 1\ncommand migrate\npath /\nclass Backup-Piece\n", "'class' must be a class name");
	expect_bad_request("fratier 1\ncommand migrate\npath /\nolder_than -5\n", "'older_than' must be a number of seconds");
	expect_bad_request("fratier 1\ncommand migrate\npath /\nlarger_than 9223372036854775808\n",
			   "'larger_than' must be a number of bytes");
	expect_bad_request("fratier 1\ncommand report\nby class\nclass archivelog\n", "class");
	expect_bad_request("fratier 1\ncommand recall\nsequence 0\n", "'sequence' must be N or FIRST-LAST");
	expect_bad_request("fratier 1\ncommand recall\nsequence 3-\n", "'sequence' must be N or FIRST-LAST");
	expect_bad_request("fratier 1\ncommand recall\nsequence -3\n", "'sequence' must be N or FIRST-LAST");
	expect_bad_request("fratier 1\ncommand recall\nsequence 4294967296\n", "'sequence' must be N or FIRST-LAST");
	expect_bad_request("fratier 1\ncommand recall\nsince 2024-01-01\n", "'since' must be Unix seconds");
	expect_bad_request("fratier 1\ncommand recall\nsince 20\nuntil 10\n", "'since' is after 'until'");
	expect_bad_request("fratier 1\ncommand ls\npath /\nthread 1\n", "unknown argument 'thread' for command 'ls'");
	expect_bad_request("fratier 1\ncommand migrate\npath /a\ndry_run 1\n", "'dry_run' must be yes or no, not '1'");
	expect_bad_request("fratier 1\ncommand migrate\npath /a\ntier 1\ntier 1\n", "'tier' given more than 1 times");
	expect_bad_request("fratier 1\ncommand recall\npath /a\ntier 0\n", "unknown argument 'tier' for command 'recall'");
	expect_bad_request("fratier 1\ncommand migrate\npath a\n", "not absolute");

	/* CTL_PATHS_MAX paths pass, one more does not. */
	char buf[4096] = "fratier 1\ncommand ls\n";
	for (int i = 0; i < CTL_PATHS_MAX; i++)
		strcat(buf, "path /x\n");
	assert(ctl_request_parse(buf, strlen(buf), &req, NULL) == 0 && req.n_paths == CTL_PATHS_MAX);
	ctl_request_done(&req);
	strcat(buf, "path /x\n");
	expect_bad_request(buf, "more than 64 times");

	char *error = NULL;
	size_t big = CTL_REQUEST_SIZE_MAX + 1;
	char *huge = calloc(1, big);
	assert(ctl_request_parse(huge, big, &req, &error) == -E2BIG && error);
	free(error);
	free(huge);
}

static void test_paths(void) {
	assert(ctl_path_is_valid("/"));
	assert(ctl_path_is_valid("/a"));
	assert(ctl_path_is_valid("/a/.b/..c"));
	assert(!ctl_path_is_valid(""));
	assert(!ctl_path_is_valid("//"));
	assert(!ctl_path_is_valid("/a/."));
	assert(!ctl_path_is_valid("/a/.."));
	char long_name[300] = "/";
	memset(long_name + 1, 'n', 256);
	assert(!ctl_path_is_valid(long_name));
	long_name[256] = 0;
	assert(ctl_path_is_valid(long_name));
}

int main(void) {
	test_roundtrip();
	test_malformed();
	test_requests();
	test_paths();
	printf("ctlproto: all tests passed\n");
	return 0;
}
