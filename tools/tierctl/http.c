/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * http.c — tierctl's /metrics listener: a strict request-head parser
 * (fuzzed: tests/fuzz/fuzz-http-request.c) and a one-connection-at-a-time
 * server loop with a read timeout, so a silent client holds it up for
 * seconds at most.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macros.h"
#include "tools/tierctl/http.h"

#define READ_TIMEOUT_MS 5000

int tierctl_http_request_parse(const char *buf, size_t len, TierctlHttpRequest *ret) {
	if (len > TIERCTL_HTTP_REQUEST_MAX)
		return -E2BIG;
	const char *end = NULL;
	for (size_t i = 0; i + 3 < len; i++)
		if (memcmp(buf + i, "\r\n\r\n", 4) == 0) {
			end = buf + i + 2;
			break;
		}
	if (!end)
		return len == TIERCTL_HTTP_REQUEST_MAX ? -E2BIG : -EAGAIN;
	for (const char *p = buf; p < end; p++)
		if ((*p < 0x20 || *p > 0x7e) && !(*p == '\r' && p[1] == '\n') && !(*p == '\n' && p > buf && p[-1] == '\r') &&
		    *p != '\t')
			return -EBADMSG;

	const char *eol = memchr(buf, '\r', (size_t) (end - buf));
	const char *sp1 = memchr(buf, ' ', (size_t) (eol - buf));
	if (!sp1 || sp1 == buf)
		return -EBADMSG;
	const char *sp2 = memchr(sp1 + 1, ' ', (size_t) (eol - sp1 - 1));
	if (!sp2 || sp2 == sp1 + 1)
		return -EBADMSG;
	size_t vlen = (size_t) (eol - sp2 - 1);
	if (vlen != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 || (sp2[8] != '0' && sp2[8] != '1'))
		return -EBADMSG;
	for (const char *p = buf; p < sp1; p++)
		if (*p < 'A' || *p > 'Z')
			return -EBADMSG;

	TierctlHttpRequest req = {};
	size_t mlen = (size_t) (sp1 - buf);
	req.method = mlen == 3 && memcmp(buf, "GET", 3) == 0    ? TIERCTL_HTTP_GET
		     : mlen == 4 && memcmp(buf, "HEAD", 4) == 0 ? TIERCTL_HTTP_HEAD
								: TIERCTL_HTTP_OTHER;
	const char *t = sp1 + 1;
	size_t tlen = (size_t) (sp2 - t);
	const char *q = memchr(t, '?', tlen);
	if (q)
		tlen = (size_t) (q - t);
	if (tlen == 0 || t[0] != '/')
		return -EBADMSG;
	if (tlen > TIERCTL_HTTP_TARGET_MAX)
		return -E2BIG;
	memcpy(req.target, t, tlen);
	req.target[tlen] = 0;
	if (memchr(req.target, ' ', tlen))
		return -EBADMSG;
	*ret = req;
	return 0;
}

static int parse_address(const char *addr_port, struct addrinfo **ret) {
	_cleanup_free_ char *copy = strdup(addr_port);
	if (!copy)
		return -ENOMEM;
	char *colon = strrchr(copy, ':');
	if (!colon || colon == copy || !colon[1])
		return -EINVAL;
	*colon = 0;
	char *host = copy;
	if (host[0] == '[') {
		size_t n = strlen(host);
		if (n < 3 || host[n - 1] != ']')
			return -EINVAL;
		host[n - 1] = 0;
		host++;
	}
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE };
	return getaddrinfo(host, colon + 1, &hints, ret) == 0 ? 0 : -EINVAL;
}

static void respond(int fd, const char *status, const char *type, const char *body, bool head) {
	_cleanup_free_ char *msg = NULL;
	size_t blen = body ? strlen(body) : 0;
	int n = asprintf(&msg, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
			 status, type, blen, head || !body ? "" : body);
	if (n < 0) {
		msg = NULL;
		return;
	}
	for (size_t off = 0; off < (size_t) n;) {
		ssize_t k = send(fd, msg + off, (size_t) n - off, MSG_NOSIGNAL);
		if (k <= 0 && errno != EINTR)
			return;
		if (k > 0)
			off += (size_t) k;
	}
}

static void serve_one(int fd, int (*render)(char **ret_body, void *userdata), void *userdata) {
	char buf[TIERCTL_HTTP_REQUEST_MAX];
	size_t len = 0;
	TierctlHttpRequest req;
	int r = -EAGAIN;
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);

	while (r == -EAGAIN && len < sizeof(buf)) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long left = READ_TIMEOUT_MS - (long) ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (left <= 0 || poll(&p, 1, (int) left) <= 0)
			return;
		ssize_t k = recv(fd, buf + len, sizeof(buf) - len, 0);
		if (k <= 0)
			return;
		len += (size_t) k;
		r = tierctl_http_request_parse(buf, len, &req);
	}
	if (r < 0) {
		respond(fd, "400 Bad Request", "text/plain", "bad request\n", false);
		return;
	}
	if (req.method == TIERCTL_HTTP_OTHER) {
		respond(fd, "405 Method Not Allowed", "text/plain", "only GET and HEAD\n", false);
		return;
	}
	if (strcmp(req.target, "/metrics") != 0) {
		respond(fd, "404 Not Found", "text/plain", "try /metrics\n", req.method == TIERCTL_HTTP_HEAD);
		return;
	}
	_cleanup_free_ char *body = NULL;
	if (render(&body, userdata) < 0) {
		respond(fd, "503 Service Unavailable", "text/plain", "the fratier daemon did not answer\n",
			req.method == TIERCTL_HTTP_HEAD);
		return;
	}
	respond(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body, req.method == TIERCTL_HTTP_HEAD);
}

int tierctl_http_serve(const char *addr_port, int (*render)(char **ret_body, void *userdata), void *userdata,
		       volatile int *stop) {
	struct addrinfo *ai = NULL;
	int r = parse_address(addr_port, &ai);
	if (r < 0)
		return r;
	_cleanup_close_ int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 16) < 0) {
		r = -errno;
		freeaddrinfo(ai);
		return r;
	}
	freeaddrinfo(ai);
	while (!*stop) {
		int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return -errno;
		}
		serve_one(c, render, userdata);
		close(c);
	}
	return 0;
}
