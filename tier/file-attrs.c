/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * file-attrs.c — the attributes blob of a lower tier's description.
 * Format: docs/FORMAT.md, "Tier description".  The description's record
 * checksum covers the blob, so it carries none of its own.
 *
 * Invariant: format and parse accept exactly the same set of attributes;
 * whatever format writes parses back to the same fields.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog/catalog.h"
#include "tier/file-attrs.h"

enum {
	A_VERSION = 0,
	A_FLAGS = 1,
	A_PATH_LEN = 2,
	A_MODE = 4,
	A_UID = 8,
	A_GID = 12,
	A_CLASS = 16,
	A_RESERVED = 20,
	A_INO = 24,
	A_SIZE = 32,
	A_ATIME = 40,
	A_MTIME = 48,
	A_CTIME = 56,
	A_PATH = 64,

	/* The archived log's header, after the path. */
	L_DBID = 0,
	L_RESETLOGS = 4,
	L_THREAD = 8,
	L_RESERVED = 10,
	L_SEQUENCE = 12,
	L_LOW_SCN = 16,
	L_NEXT_SCN = 24,
	L_LOW_TIME = 32,
	L_NEXT_TIME = 40,
	L_DB_NAME = 48,
};
_Static_assert(A_PATH == TIER_FILE_ATTRS_FIXED_SIZE, "attrs layout");
_Static_assert(L_DB_NAME + 8 == TIER_FILE_ATTRS_LOG_SIZE, "archivelog layout");

#define FLAG_ARCHIVELOG 0x01u

static void put16(uint8_t *p, uint16_t v) {
	p[0] = (uint8_t) v;
	p[1] = (uint8_t) (v >> 8);
}

static void put32(uint8_t *p, uint32_t v) {
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v) {
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t) (v >> (8 * i));
}

static uint16_t get16(const uint8_t *p) {
	return (uint16_t) (p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p) {
	return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

static uint64_t get64(const uint8_t *p) {
	return (uint64_t) get32(p) | (uint64_t) get32(p + 4) << 32;
}

/* A relative path of clean components; "" only for the root directory. */
static bool path_is_valid(const char *p, size_t len, bool dir) {
	if (len == 0)
		return dir;
	if (len > TIER_FILE_ATTRS_PATH_MAX || memchr(p, 0, len))
		return false;
	size_t start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && p[i] != '/')
			continue;
		size_t n = i - start;
		if (n == 0 || n > CATALOG_NAME_MAX || (n == 1 && p[start] == '.') ||
		    (n == 2 && p[start] == '.' && p[start + 1] == '.'))
			return false;
		start = i + 1;
	}
	return true;
}

static bool fields_are_valid(uint32_t mode, bool has_log, const char *path, size_t path_len) {
	if (!S_ISREG(mode) && !S_ISDIR(mode))
		return false;
	if ((mode & ~(uint32_t) (S_IFMT | 07777)) != 0)
		return false;
	if (has_log && !S_ISREG(mode))
		return false;
	return path_is_valid(path, path_len, S_ISDIR(mode));
}

int tier_file_attrs_format(const TierFileAttrs *a, void *buf, size_t size, size_t *ret_len) {
	size_t path_len = strnlen(a->path, sizeof(a->path));
	if (path_len > TIER_FILE_ATTRS_PATH_MAX || !fields_are_valid(a->mode, a->has_archivelog, a->path, path_len))
		return -EINVAL;
	if (a->has_archivelog && memchr(a->archivelog.db_name, 0, sizeof(a->archivelog.db_name)) == NULL)
		return -EINVAL;
	size_t need = TIER_FILE_ATTRS_FIXED_SIZE + path_len + (a->has_archivelog ? TIER_FILE_ATTRS_LOG_SIZE : 0);
	if (size < need)
		return -ENOBUFS;

	uint8_t *b = buf;
	memset(b, 0, need);
	b[A_VERSION] = TIER_FILE_ATTRS_VERSION;
	b[A_FLAGS] = a->has_archivelog ? FLAG_ARCHIVELOG : 0;
	put16(b + A_PATH_LEN, (uint16_t) path_len);
	put32(b + A_MODE, a->mode);
	put32(b + A_UID, a->uid);
	put32(b + A_GID, a->gid);
	put32(b + A_CLASS, a->file_class);
	put64(b + A_INO, a->ino);
	put64(b + A_SIZE, a->size);
	put64(b + A_ATIME, (uint64_t) a->atime_ns);
	put64(b + A_MTIME, (uint64_t) a->mtime_ns);
	put64(b + A_CTIME, (uint64_t) a->ctime_ns);
	memcpy(b + A_PATH, a->path, path_len);
	if (a->has_archivelog) {
		const CatalogArchivelog *l = &a->archivelog;
		uint8_t *p = b + A_PATH + path_len;
		put32(p + L_DBID, l->dbid);
		put32(p + L_RESETLOGS, l->resetlogs_id);
		put16(p + L_THREAD, l->thread);
		put32(p + L_SEQUENCE, l->sequence);
		put64(p + L_LOW_SCN, l->low_scn);
		put64(p + L_NEXT_SCN, l->next_scn);
		put64(p + L_LOW_TIME, (uint64_t) l->low_time);
		put64(p + L_NEXT_TIME, (uint64_t) l->next_time);
		/* db_name holds at most 8 characters and its NUL: the field is NUL-padded. */
		memcpy(p + L_DB_NAME, l->db_name, strnlen(l->db_name, 8));
	}
	*ret_len = need;
	return 0;
}

int tier_file_attrs_parse(const void *buf, size_t len, TierFileAttrs *ret) {
	const uint8_t *b = buf;

	if (!b || len < TIER_FILE_ATTRS_FIXED_SIZE || b[A_VERSION] == 0)
		return -EBADMSG;
	if (b[A_VERSION] > TIER_FILE_ATTRS_VERSION)
		return -EPROTONOSUPPORT;
	uint8_t flags = b[A_FLAGS];
	size_t path_len = get16(b + A_PATH_LEN);
	bool has_log = flags & FLAG_ARCHIVELOG;
	if ((flags & ~FLAG_ARCHIVELOG) != 0 || get32(b + A_RESERVED) != 0 || path_len > TIER_FILE_ATTRS_PATH_MAX)
		return -EBADMSG;
	if (len != TIER_FILE_ATTRS_FIXED_SIZE + path_len + (has_log ? TIER_FILE_ATTRS_LOG_SIZE : 0))
		return -EBADMSG;
	uint32_t mode = get32(b + A_MODE);
	if (!fields_are_valid(mode, has_log, (const char *) b + A_PATH, path_len))
		return -EBADMSG;

	TierFileAttrs a = {
		.mode = mode,
		.uid = get32(b + A_UID),
		.gid = get32(b + A_GID),
		.file_class = get32(b + A_CLASS),
		.ino = get64(b + A_INO),
		.size = get64(b + A_SIZE),
		.atime_ns = (int64_t) get64(b + A_ATIME),
		.mtime_ns = (int64_t) get64(b + A_MTIME),
		.ctime_ns = (int64_t) get64(b + A_CTIME),
		.has_archivelog = has_log,
	};
	memcpy(a.path, b + A_PATH, path_len);
	a.path[path_len] = 0;
	if (has_log) {
		const uint8_t *p = b + A_PATH + path_len;
		if (get16(p + L_RESERVED) != 0)
			return -EBADMSG;
		/* NUL-padded: no character after the first NUL. */
		size_t n = strnlen((const char *) p + L_DB_NAME, 8);
		for (size_t i = n; i < 8; i++)
			if (p[L_DB_NAME + i] != 0)
				return -EBADMSG;
		a.archivelog = (CatalogArchivelog) {
			.dbid = get32(p + L_DBID),
			.resetlogs_id = get32(p + L_RESETLOGS),
			.thread = get16(p + L_THREAD),
			.sequence = get32(p + L_SEQUENCE),
			.low_scn = get64(p + L_LOW_SCN),
			.next_scn = get64(p + L_NEXT_SCN),
			.low_time = (int64_t) get64(p + L_LOW_TIME),
			.next_time = (int64_t) get64(p + L_NEXT_TIME),
		};
		memcpy(a.archivelog.db_name, p + L_DB_NAME, n);
	}
	*ret = a;
	return 0;
}
