/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Buffered output for oragen: everything reaches the file in writes of
 * WRITER_BUFFER_SIZE (1 MiB, like ARCn and RMAN), except the last one.
 * Generators render straight into the buffer through writer_reserve().
 */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/oragen/oragen.h"

static int mkdir_parents(int dirfd, const char *relpath) {
	char buf[512];
	size_t len = strlen(relpath);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, relpath, len + 1);

	for (char *p = strchr(buf + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = 0;
		if (mkdirat(dirfd, buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

static int writer_flush(Writer *w) {
	size_t done = 0;

	if (w->tap && w->used > 0)
		w->tap(w->tap_data, w->buf, w->used);

	while (done < w->used) {
		ssize_t k = write(w->fd, w->buf + done, w->used - done);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += (size_t) k;
	}
	w->flushed += w->used;
	w->used = 0;
	return 0;
}

int writer_open(Writer *w, int dirfd, const char *relpath) {
	int r;

	*w = (Writer) { .fd = -1 };

	r = mkdir_parents(dirfd, relpath);
	if (r < 0)
		return r;

	w->buf = malloc(WRITER_BUFFER_SIZE);
	if (!w->buf)
		return -ENOMEM;

	w->fd = openat(dirfd, relpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w->fd < 0) {
		r = -errno;
		free(w->buf);
		w->buf = NULL;
		return r;
	}
	return 0;
}

int writer_reserve(Writer *w, size_t n, uint8_t **ret) {
	int r;

	if (n > WRITER_BUFFER_SIZE)
		return -EINVAL;
	if (w->used + n > WRITER_BUFFER_SIZE) {
		r = writer_flush(w);
		if (r < 0)
			return r;
	}
	*ret = w->buf + w->used;
	w->used += n;
	return 0;
}

int writer_close(Writer *w) {
	int r = 0;

	if (w->fd >= 0) {
		r = writer_flush(w);
		if (close(w->fd) < 0 && r == 0)
			r = -errno;
		w->fd = -1;
	}
	free(w->buf);
	w->buf = NULL;
	return r;
}
