/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The attributes of a file or directory as a lower tier's description
 * records them (dedup/describe.h carries the blob, opaque to dedup/): its
 * path from the mount's root, type and permission bits, owner, size, times,
 * policy class and, for an archived log, what its header says.  Enough to
 * put the file back where it was after the hot tier and the catalog are
 * lost.  Layout: docs/FORMAT.md, "Tier description", attributes.
 *
 * The parser trusts nothing: every field is range-checked and the path must
 * be a clean relative path (no empty, "." or ".." component, no NUL, each
 * component at most CATALOG_NAME_MAX bytes).  Errors: -EBADMSG (corrupt),
 * -EPROTONOSUPPORT (a newer version), -EINVAL (bad arguments to format),
 * -ENOBUFS.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog/catalog.h"

#define TIER_FILE_ATTRS_VERSION 1
#define TIER_FILE_ATTRS_FIXED_SIZE 64u
#define TIER_FILE_ATTRS_LOG_SIZE 56u
/* Longest path recorded ("" is the root directory). */
#define TIER_FILE_ATTRS_PATH_MAX 4095u
#define TIER_FILE_ATTRS_SIZE_MAX (TIER_FILE_ATTRS_FIXED_SIZE + TIER_FILE_ATTRS_PATH_MAX + TIER_FILE_ATTRS_LOG_SIZE)

typedef struct TierFileAttrs {
	uint32_t mode;           /* S_IFREG or S_IFDIR, and permission bits */
	uint32_t uid;
	uint32_t gid;
	uint32_t file_class;     /* regular files: the policy class */
	uint64_t ino;            /* where it was in the lost catalog (for reports) */
	uint64_t size;
	int64_t atime_ns;
	int64_t mtime_ns;
	int64_t ctime_ns;
	char path[TIER_FILE_ATTRS_PATH_MAX + 1]; /* relative to the mount's root, NUL-terminated */
	bool has_archivelog;
	CatalogArchivelog archivelog;
} TierFileAttrs;

/*
 * Formats a into buf[0, size) and sets *ret_len.
 * Returns: 0, -EINVAL (a path or field the parser would refuse), -ENOBUFS.
 */
int tier_file_attrs_format(const TierFileAttrs *a, void *buf, size_t size, size_t *ret_len);

/* Parses buf[0, len), which must be exactly one blob.  Returns: 0, -EBADMSG, -EPROTONOSUPPORT. */
int tier_file_attrs_parse(const void *buf, size_t len, TierFileAttrs *ret);
