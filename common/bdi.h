/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The kernel's read-ahead window of a mounted filesystem (its backing
 * device info, /sys/class/bdi/MAJ:MIN/read_ahead_kb).
 *
 * Why: a FUSE mount starts with the kernel's default window (128 KiB), and
 * the max_readahead a daemon answers at init can only lower it, never
 * raise it.  So every read of a FUSE file arrives as 128 KiB requests,
 * one at a time, however large the reader's read()s are.  Only root can
 * raise the window, through sysfs; a larger one makes the kernel send
 * requests of up to max_pages (1 MiB with libfuse 3.14) and several of
 * them at once.
 */

#include <sys/types.h>

#define BDI_READ_AHEAD_KB_MAX (1u << 20) /* 1 GiB: a typo guard, far above any useful window */

/*
 * The device number of the filesystem mounted at mountpoint, from
 * /proc/self/mountinfo (a stat of a FUSE mount point would ask the daemon,
 * which may be the caller).  The last mount on that point wins, as the
 * kernel resolves paths.
 * Returns: 0 and *ret, -ENOENT (nothing mounted there), or -errno of reading it.
 */
int bdi_of_mountpoint(const char *mountpoint, dev_t *ret);

/*
 * Sets the read-ahead window of device dev to kb KiB (0 < kb <=
 * BDI_READ_AHEAD_KB_MAX).  *ret_old (optional) gets the window before.
 * Returns: 0, -EINVAL, -ENOENT (no such bdi), -EACCES/-EPERM/-EROFS (not
 * root, or /sys read-only), or -errno of the sysfs write.
 */
int bdi_set_read_ahead_kb(dev_t dev, unsigned kb, unsigned *ret_old);
