/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests for common/bdi.c and common/pipe.c: finding a mount's device
 * through mountinfo, the read-ahead window's argument checks, and the
 * splice limits' arithmetic.
 */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/bdi.h"
#include "common/pipe.h"

static void test_mountpoint(void) {
	struct stat st;
	dev_t dev;

	/* /proc is mounted wherever this runs, and a stat of it answers without a daemon. */
	assert(bdi_of_mountpoint("/proc", &dev) == 0);
	assert(stat("/proc", &st) == 0);
	assert(dev == st.st_dev);
	assert(bdi_of_mountpoint("/proc/self", &dev) == -ENOENT);
	assert(bdi_of_mountpoint("/no such mount point", &dev) == -ENOENT);
}

static void test_read_ahead_limits(void) {
	/*
	 * Only the checks before any write: the e2e tests see a mount's window
	 * raised; this machine's own disks are left alone.
	 */
	assert(bdi_set_read_ahead_kb(makedev(0, 1), 0, NULL) == -EINVAL);
	assert(bdi_set_read_ahead_kb(makedev(0, 1), BDI_READ_AHEAD_KB_MAX + 1, NULL) == -EINVAL);
}

static void test_splice_reply_max(void) {
	long page = sysconf(_SC_PAGESIZE);
	assert(page > 0);
	size_t p = (size_t) page;

	/* A 1 MiB pipe holds three pages of libfuse's and a header besides the reply: the reply loses its last pages. */
	size_t max = pipe_splice_reply_max(1u << 20, 1u << 20);
	assert(max % p == 0);
	assert(max < (1u << 20));
	assert(max + 3 * p + 16 <= (1u << 20));
	assert(max + 4 * p + 16 > (1u << 20));
	/* Room for all of it: the whole request. */
	assert(pipe_splice_reply_max(2u << 20, 1u << 20) == 1u << 20);
	assert(pipe_splice_reply_max(3 * p, 1u << 20) == 0);
	assert(pipe_splice_reply_max(0, 1u << 20) == 0);

	/* A request needs its payload and one page of header in the pipe. */
	assert(pipe_splice_request_max(1u << 20, 1u << 20) == (1u << 20) - 4096);
	assert(pipe_splice_request_max((1u << 20) + 4096, 1u << 20) == 1u << 20);
	assert(pipe_splice_request_max(4096, 1u << 20) == 0);

	size_t cap = pipe_capacity_max(2u << 20);
	assert(cap >= 4096 && cap <= (2u << 20));
}

int main(void) {
	test_mountpoint();
	test_read_ahead_limits();
	test_splice_reply_max();
	printf("common-kernel-io: ok\n");
	return 0;
}
