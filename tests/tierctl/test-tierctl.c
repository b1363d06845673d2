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
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tools/tierctl/client.h"
#include "tools/tierctl/html.h"
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

/* A daemon that answers every request with one progress frame, then waits for the client to hang up. */
typedef struct Fake {
	int listen_fd;
	bool saw_hangup;
} Fake;

static void *fake_daemon(void *userdata) {
	Fake *fk = userdata;
	int fd = accept(fk->listen_fd, NULL, NULL);
	assert(fd >= 0);
	uint8_t buf[4096];
	assert(recv(fd, buf, sizeof(buf), 0) > 4);
	CtlMessage m = {};
	uint8_t *frame;
	size_t size;
	assert(ctl_reply_begin(&m, CTL_REPLY_PROGRESS) == 0);
	assert(ctl_message_add(&m, "phase", "verify") == 0);
	assert(ctl_message_format(&m, CTL_FRAME_SIZE_MAX, &frame, &size) == 0);
	assert(send(fd, frame, size, 0) == (ssize_t) size);
	free(frame);
	ctl_message_done(&m);
	fk->saw_hangup = recv(fd, buf, sizeof(buf), 0) == 0;
	close(fd);
	return NULL;
}

static volatile int interrupted;

static int interrupt_on_progress(const CtlMessage *frame, void *userdata) {
	(*(int *) userdata)++;
	interrupted = 1; /* as the SIGINT handler does */
	return 0;
}

/* Ctrl-C while waiting for a long request: the client stops reading and hangs up, so the daemon stops. */
static void test_interrupt(void) {
	char dir[] = "/tmp/fratier-test-tierctl-XXXXXX";
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	Fake fk = {};
	pthread_t t;

	assert(mkdtemp(dir));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/control.sock", dir);
	fk.listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert(fk.listen_fd >= 0 && bind(fk.listen_fd, (struct sockaddr *) &sa, sizeof(sa)) == 0);
	assert(listen(fk.listen_fd, 1) == 0);
	assert(pthread_create(&t, NULL, fake_daemon, &fk) == 0);

	CtlMessage req = {};
	TierctlReply reply;
	int progress = 0;
	assert(ctl_request_begin(&req, CTL_COMMAND_SCRUB) == 0);
	assert(tierctl_call(sa.sun_path, &req, interrupt_on_progress, &progress, &interrupted, &reply) == -EINTR);
	assert(progress == 1);
	pthread_join(t, NULL);
	assert(fk.saw_hangup);
	ctl_message_done(&req);
	close(fk.listen_fd);
	unlink(sa.sun_path);
	rmdir(dir);

	/* Nobody listening: "not running", with an exit code. */
	interrupted = 0;
	assert(ctl_request_begin(&req, CTL_COMMAND_STATUS) == 0);
	assert(tierctl_call(sa.sun_path, &req, NULL, NULL, &interrupted, &reply) == TIERCTL_EXIT_NOT_RUNNING);
	ctl_message_done(&req);
}

/* The page of a report with n samples per tier (hot, capacity) and classes samples per class, an hour apart. */
static char *html_of(size_t n, size_t classes) {
	static TierctlHistoryTier tiers[64];
	static TierctlHistoryClass cls[64];
	const int64_t t0 = 1764547200; /* 2025-12-01 00:00 UTC */
	assert(n <= 32 && classes <= 32);
	for (size_t i = 0; i < n; i++) {
		tiers[2 * i] = (TierctlHistoryTier) { .t = t0 + 3600 * (int64_t) i, .hot = true, .capacity = 1 << 30,
						       .used = (i + 1) << 20, .logical = (i + 2) << 20, .stored = (i + 1) << 20 };
		tiers[2 * i + 1] = (TierctlHistoryTier) { .t = t0 + 3600 * (int64_t) i, .capacity = 1 << 30 };
	}
	for (size_t i = 0; i < classes; i++)
		cls[i] = (TierctlHistoryClass) { .t = t0 + 3600 * (int64_t) i, .file_class = "archivelog", .logical = i << 20 };
	TierctlReport rep = { .mountpoint = "/mnt/fra", .by = "class", .tiers = tiers, .n_tiers = 2 * n, .classes = cls,
			      .n_classes = classes };
	char path[] = "/tmp/fratier-html-XXXXXX";
	int fd = mkstemp(path);
	assert(fd >= 0);
	close(fd);
	assert(tierctl_html_report(path, &rep) == 0);
	FILE *f = fopen(path, "r");
	assert(f);
	char *buf = calloc(1, 1 << 20);
	assert(buf);
	(void) !fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	unlink(path);
	return buf;
}

/* Every "YYYY-MM-DD HH:MM UTC" on the page is within a day of the samples (the axis of one sample read year -2e8). */
static void expect_sane_dates(const char *page) {
	for (const char *p = page; (p = strstr(p, " UTC<")); p++) {
		const char *start = p - 16;
		assert(start >= page);
		assert(strncmp(start, "2025-12-0", 9) == 0);
	}
}

static size_t count(const char *page, const char *what) {
	size_t n = 0;
	for (const char *p = page; (p = strstr(p, what)); p++)
		n++;
	return n;
}

static void test_html_history(void) {
	/* One sample: no chart over time draws, each says why. */
	char *page = html_of(1, 1);
	expect_sane_dates(page);
	assert(count(page, "class=\"no-history\"") == 4 && count(page, "<polyline") == 0);
	free(page);
	/* Tier samples but none per class (the bug: the class chart's axis from the sentinels). */
	page = html_of(3, 0);
	expect_sane_dates(page);
	assert(count(page, "id=\"chart-classes\"") == 1 && strstr(page, "<p class=\"no-history\" id=\"chart-classes\""));
	assert(count(page, "<polyline") == 4); /* hot: stored, logical; fill; saved */
	free(page);
	/* Two samples: every chart draws, from the first time to the second. */
	page = html_of(2, 2);
	expect_sane_dates(page);
	assert(count(page, "no-history") == 0 && count(page, "<polyline") == 5);
	assert(strstr(page, "2025-12-01 00:00 UTC") && strstr(page, "2025-12-01 01:00 UTC"));
	free(page);
	/* Many. */
	page = html_of(30, 30);
	expect_sane_dates(page);
	assert(count(page, "no-history") == 0 && strstr(page, "2025-12-02 05:00 UTC"));
	free(page);
}

int main(void) {
	test_html_history();
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

	test_interrupt();
	printf("tierctl: all tests passed\n");
	return 0;
}
