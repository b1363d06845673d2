/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The smallest HTTP server that Prometheus can scrape: tierctl metrics
 * --listen ADDR:PORT answers GET /metrics with a fresh exposition, one
 * connection at a time, and everything else with a 4xx.
 */

#include <stddef.h>

#define TIERCTL_HTTP_REQUEST_MAX 8192
#define TIERCTL_HTTP_TARGET_MAX 1024

typedef enum TierctlHttpMethod {
	TIERCTL_HTTP_GET,
	TIERCTL_HTTP_HEAD,
	TIERCTL_HTTP_OTHER,
} TierctlHttpMethod;

typedef struct TierctlHttpRequest {
	TierctlHttpMethod method;
	char target[TIERCTL_HTTP_TARGET_MAX + 1]; /* path, query string cut off */
} TierctlHttpRequest;

/*
 * Parses the request head in buf[0, len): "METHOD SP TARGET SP HTTP/1.x"
 * CRLF, header lines, and the empty line that ends them (each line at most
 * the whole limit, printable ASCII).  Returns 0, -EAGAIN (the head is not
 * complete yet), -EBADMSG (malformed), -E2BIG (beyond
 * TIERCTL_HTTP_REQUEST_MAX or a target beyond TIERCTL_HTTP_TARGET_MAX).
 */
int tierctl_http_request_parse(const char *buf, size_t len, TierctlHttpRequest *ret);

/*
 * Serves http://ADDR:PORT/metrics (addr_port "127.0.0.1:9273", numeric
 * IPv4 or [IPv6]) until *stop is set: every GET calls render() for the body
 * (a malloc'ed NUL-terminated string; a negative return answers 503).
 * Returns 0 when stopped, or a negative errno if the address cannot be used.
 */
int tierctl_http_serve(const char *addr_port, int (*render)(char **ret_body, void *userdata), void *userdata,
		       volatile int *stop);
