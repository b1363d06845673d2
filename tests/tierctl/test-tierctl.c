/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests of tierctl's pieces that need no daemon: lexical paths and
 * their place in a mount, IEC sizes and ratios, aligned tables, the JSON
 * writer, and the /metrics request parser's verdicts.
 */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/tierctl/client.h"
#include "tools/tierctl/http.h"
#include "tools/tierctl/output.h"

static void expect_path(const char *in, const char *want) {
	char *got = tierctl_path_absolute(in);
	if (!got || strcmp(got, want) != 0) {
		fprintf(stderr, "absolute(%s) = %s, want %s\n", in, got ?: "(null)", want);
		abort();
	}
	free(got);
}

static void expect_in_mount(const char *mnt, const char *abs, const char *want) {
	char *got = tierctl_path_in_mount(mnt, abs);
	if ((want == NULL) != (got == NULL) || (want && strcmp(got, want) != 0)) {
		fprintf(stderr, "in_mount(%s, %s) = %s, want %s\n", mnt, abs, got ?: "(null)", want ?: "(null)");
		abort();
	}
	free(got);
}

static void expect_size(uint64_t v, bool exact, const char *want) {
	char buf[32];
	tierctl_format_size(v, exact, buf);
	if (strcmp(buf, want) != 0) {
		fprintf(stderr, "size(%llu) = %s, want %s\n", (unsigned long long) v, buf, want);
		abort();
	}
}

static int http(const char *s, TierctlHttpRequest *req) {
	return tierctl_http_request_parse(s, strlen(s), req);
}

int main(void) {
	expect_path("/", "/");
	expect_path("/a//b/./c/", "/a/b/c");
	expect_path("/a/b/../../..", "/");
	expect_path("/a/../b", "/b");
	assert(chdir("/usr") == 0);
	expect_path("lib/../bin", "/usr/bin");
	expect_path(".", "/usr");

	expect_in_mount("/mnt/fra", "/mnt/fra", "/");
	expect_in_mount("/mnt/fra", "/mnt/fra/archivelog/x.arc", "/archivelog/x.arc");
	expect_in_mount("/mnt/fra", "/mnt/fra2/x", NULL);
	expect_in_mount("/mnt/fra", "/mnt", NULL);
	expect_in_mount("/", "/x", "/x");

	expect_size(0, false, "0 B");
	expect_size(1023, false, "1023 B");
	expect_size(1024, false, "1.0 KiB");
	expect_size(1536, false, "1.5 KiB");
	expect_size(UINT64_C(5) << 30, false, "5.0 GiB");
	expect_size(123456789, true, "123456789");
	char r[32];
	tierctl_format_ratio(3, 2, r);
	assert(strcmp(r, "1.50x") == 0);
	tierctl_format_ratio(3, 0, r);
	assert(strcmp(r, "-") == 0);
	assert(tierctl_ratio(1, 0) == 0);

	/* Tables: left and right alignment, two spaces between columns, no trailing blanks. */
	TierctlTable t;
	const char *h[] = { "NAME", "SIZE", "PATH" };
	const char *row[] = { "hot", "1.0 KiB", "/x" };
	assert(tierctl_table_new(&t, h, 3) == 0);
	t.right[1] = true;
	assert(tierctl_table_add(&t, row) == 0);
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	tierctl_table_print(&t, f);
	fclose(f);
	assert(strcmp(buf, "NAME     SIZE  PATH\nhot   1.0 KiB  /x\n") == 0);
	free(buf);
	tierctl_table_done(&t);

	/* JSON: nesting, commas, escapes of quotes and control bytes. */
	f = open_memstream(&buf, &size);
	TierctlJson j = { .f = f };
	tierctl_json_begin_object(&j, NULL);
	tierctl_json_string(&j, "a", "q\"\n");
	tierctl_json_begin_array(&j, "l");
	tierctl_json_u64(&j, NULL, 1);
	tierctl_json_u64(&j, NULL, 2);
	tierctl_json_end_array(&j);
	tierctl_json_begin_array(&j, "e");
	tierctl_json_end_array(&j);
	tierctl_json_end_object(&j);
	fclose(f);
	assert(strcmp(buf, "{\n  \"a\": \"q\\\"\\u000a\",\n  \"l\": [\n    1,\n    2\n  ],\n  \"e\": []\n}\n") == 0);
	free(buf);

	TierctlHttpRequest req;
	assert(http("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &req) == 0);
	assert(req.method == TIERCTL_HTTP_GET && strcmp(req.target, "/metrics") == 0);
	assert(http("HEAD /metrics?a=b HTTP/1.0\r\n\r\n", &req) == 0);
	assert(req.method == TIERCTL_HTTP_HEAD && strcmp(req.target, "/metrics") == 0);
	assert(http("DELETE / HTTP/1.1\r\n\r\n", &req) == 0 && req.method == TIERCTL_HTTP_OTHER);
	assert(http("GET /metrics HTTP/1.1\r\nHost: x\r\n", &req) == -EAGAIN);
	assert(http("GET metrics HTTP/1.1\r\n\r\n", &req) == -EBADMSG);
	assert(http("GET /metrics HTTP/2.0\r\n\r\n", &req) == -EBADMSG);
	assert(http("GET /metrics\r\n\r\n", &req) == -EBADMSG);
	assert(http("GET /m\x01 HTTP/1.1\r\n\r\n", &req) == -EBADMSG);
	assert(http("GET /m HTTP/1.1\nHost: x\r\n\r\n", &req) == -EBADMSG);
	char big[TIERCTL_HTTP_REQUEST_MAX + 1];
	memset(big, 'a', sizeof(big));
	assert(tierctl_http_request_parse(big, sizeof(big), &req) == -E2BIG);
	char longt[TIERCTL_HTTP_TARGET_MAX + 64] = "GET /";
	memset(longt + 5, 'x', TIERCTL_HTTP_TARGET_MAX);
	strcpy(longt + 5 + TIERCTL_HTTP_TARGET_MAX, " HTTP/1.1\r\n\r\n");
	assert(http(longt, &req) == -E2BIG);

	printf("tierctl: all tests passed\n");
	return 0;
}
