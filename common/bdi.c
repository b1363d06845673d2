/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * bdi.c — the read-ahead window of a mount (see bdi.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/bdi.h"
#include "common/macros.h"

/* Undoes mountinfo's octal escapes (\040 for a space...) in place. */
static void unescape(char *s) {
	char *out = s;
	for (char *in = s; *in;) {
		if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' && in[3] >= '0' &&
		    in[3] <= '7') {
			*out++ = (char) (((in[1] - '0') << 6) | ((in[2] - '0') << 3) | (in[3] - '0'));
			in += 4;
		} else
			*out++ = *in++;
	}
	*out = 0;
}

int bdi_of_mountpoint(const char *mountpoint, dev_t *ret) {
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	bool found = false;
	dev_t dev = 0;

	if (!f)
		return negative_errno();
	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT ..." */
	while (getline(&line, &cap, f) > 0) {
		unsigned maj, min;
		char *fields[5], *save = NULL, *p = line;
		size_t n = 0;
		for (; n < ELEMENTSOF(fields); n++, p = NULL) {
			fields[n] = strtok_r(p, " ", &save);
			if (!fields[n])
				break;
		}
		if (n < ELEMENTSOF(fields) || sscanf(fields[2], "%u:%u", &maj, &min) != 2)
			continue;
		unescape(fields[4]);
		if (strcmp(fields[4], mountpoint) != 0)
			continue;
		dev = makedev(maj, min);
		found = true;
	}
	if (!found)
		return -ENOENT;
	*ret = dev;
	return 0;
}

int bdi_set_read_ahead_kb(dev_t dev, unsigned kb, unsigned *ret_old) {
	char path[64], buf[32];
	ssize_t n;

	if (kb == 0 || kb > BDI_READ_AHEAD_KB_MAX)
		return -EINVAL;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", major(dev), minor(dev));
	_cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	if (ret_old) {
		n = pread(fd, buf, sizeof(buf) - 1, 0);
		if (n < 0)
			return negative_errno();
		buf[n] = 0;
		*ret_old = (unsigned) strtoul(buf, NULL, 10);
	}
	int len = snprintf(buf, sizeof(buf), "%u\n", kb);
	n = pwrite(fd, buf, (size_t) len, 0);
	if (n < 0)
		return negative_errno();
	return n == len ? 0 : -EIO;
}
