/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pipe.c — how large a pipe this process can make (see pipe.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/macros.h"
#include "common/pipe.h"

/* What libfuse 3 reserves beside a reply's bytes: a page for each of its two iovecs and one more. */
#define PIPE_REPLY_PAGES 3u
#define PIPE_REPLY_HEADER 16u /* struct fuse_out_header */
/* Beside a request's payload: FUSE_BUFFER_HEADER_SIZE. */
#define PIPE_REQUEST_HEADER 4096u

size_t pipe_capacity_max(size_t want) {
	int fds[2];
	size_t cap = 0;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return 0;
	if (want <= (size_t) INT32_MAX && fcntl(fds[0], F_SETPIPE_SZ, (int) want) >= 0)
		cap = want;
	else {
		_cleanup_fclose_ FILE *f = fopen("/proc/sys/fs/pipe-max-size", "re");
		unsigned long max;
		if (f && fscanf(f, "%lu", &max) == 1)
			cap = MIN((size_t) max, want);
	}
	close(fds[0]);
	close(fds[1]);
	return cap;
}

static size_t page_size(void) {
	long page = sysconf(_SC_PAGESIZE);
	return page > 0 ? (size_t) page : 4096;
}

size_t pipe_splice_reply_max(size_t capacity, size_t want) {
	size_t p = page_size(), reserve = PIPE_REPLY_PAGES * p + PIPE_REPLY_HEADER;
	if (capacity <= reserve)
		return 0;
	return MIN(want, (capacity - reserve) / p * p);
}

size_t pipe_splice_request_max(size_t capacity, size_t want) {
	size_t p = page_size();
	if (capacity <= PIPE_REQUEST_HEADER)
		return 0;
	return MIN(want, (capacity - PIPE_REQUEST_HEADER) / p * p);
}
