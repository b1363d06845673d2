/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * A chunk-store backend (dedup/backend.h) over a local directory: each object
 * is a regular file at its name below the directory, made durable with
 * fsync() of the file and of every directory created for it.  Works for a
 * kernel-mounted NFS path too, with NFS's durability.
 *
 * Reads go through a bounded cache of read-only descriptors (at most
 * TIER_BACKEND_DIR_FDS_MAX), so a hot object is opened once, not per read.
 * Every call is thread-safe.
 */

#include "dedup/backend.h"

#define TIER_BACKEND_DIR_FDS_MAX 128

/*
 * Opens the existing directory at path as a backend.
 * Returns: 0 and *ret (free with dedup_backend_free()), -ENOTDIR, -ENOENT,
 * -EACCES, -ENOMEM.
 */
int tier_backend_dir_open(const char *path, DedupBackend **ret);

/*
 * Drops name from b's descriptor cache when b is a directory backend (and
 * does nothing otherwise), so the next read opens the name afresh: for an
 * object another process replaces by rename (a host record on a shared
 * tier, tier/shared.c).
 */
void tier_backend_dir_forget(DedupBackend *b, const char *name);
