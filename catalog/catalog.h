/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The catalog: fratier's namespace and file state in one SQLite database
 * (WAL mode) on the hot tier.  This module owns the schema, its versions and
 * every SQL statement; callers see typed verbs and negative errno values.
 *
 * Concurrency: a Catalog is shared by all daemon threads.  Every call is
 * serialised on the catalog's own (recursive) lock.  catalog_begin() takes
 * that lock and keeps it until catalog_commit()/catalog_rollback(), so a
 * multi-step change (rename, unlink) is atomic with respect to other threads
 * and to a crash.
 *
 * Durability: commits survive a crash of the daemon at once (the WAL is in
 * the page cache); catalog_sync() makes every commit so far durable against
 * power loss, and is what fsync on the mount calls.
 *
 * Errors: -ENOENT (no such row), -EEXIST, -ENOTEMPTY, -ENODATA (no xattr),
 * -ERANGE (buffer too small), -EBUSY (locked), -ENOSPC, -EUCLEAN (corrupt
 * database), -EPROTONOSUPPORT (schema newer than this binary), -EIO.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CATALOG_SCHEMA_VERSION 1
#define CATALOG_ROOT_INO 1
#define CATALOG_NAME_MAX 255
#define CATALOG_SYMLINK_MAX 4095
#define CATALOG_XATTR_NAME_MAX 255
#define CATALOG_XATTR_VALUE_MAX 65536
#define CATALOG_XATTR_LIST_MAX 65536

typedef struct Catalog Catalog;

/* Where a file's bytes live.  Only raw staging exists in schema version 1. */
typedef enum CatalogFileState {
	CATALOG_FILE_RAW = 0,
	_CATALOG_FILE_STATE_MAX,
} CatalogFileState;

typedef struct CatalogInode {
	uint64_t ino;
	uint64_t parent;       /* directories: the containing directory (root: itself) */
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
	uint32_t nlink;
	uint64_t rdev;
	uint64_t size;         /* raw files: advisory, the staging file is authoritative */
	int64_t atime_ns;
	int64_t mtime_ns;
	int64_t ctime_ns;
	CatalogFileState state;
} CatalogInode;

typedef struct CatalogDirent {
	uint64_t cookie;       /* stable position of the entry, strictly increasing in a directory */
	uint64_t ino;
	uint32_t mode;         /* file type bits of the target */
	char name[CATALOG_NAME_MAX + 1];
} CatalogDirent;

/*
 * Opens (creating if needed) the catalog at path and brings its schema up to
 * CATALOG_SCHEMA_VERSION, creating the root directory owned by uid/gid when
 * the catalog is new.  Returns 0 and *ret, or -EPROTONOSUPPORT for a newer
 * schema, -EUCLEAN for a damaged file, -errno otherwise.
 */
int catalog_open(const char *path, uid_t root_uid, gid_t root_gid, Catalog **ret);

/* Closes the database (checkpointing the WAL). Accepts NULL; returns NULL. */
Catalog *catalog_close(Catalog *c);

/* Makes every committed change durable (fdatasync of the WAL). */
int catalog_sync(Catalog *c);

/* Transactions; begin takes the catalog lock until commit or rollback. */
int catalog_begin(Catalog *c);
int catalog_commit(Catalog *c);
void catalog_rollback(Catalog *c);

/* Inodes. create assigns a new, never reused inode number to *ret_ino. */
int catalog_inode_get(Catalog *c, uint64_t ino, CatalogInode *ret);
int catalog_inode_create(Catalog *c, const CatalogInode *in, const char *symlink_target, uint64_t *ret_ino);
int catalog_inode_update(Catalog *c, const CatalogInode *in);
/* Deletes the inode row and its xattrs; its dirents must be gone already. */
int catalog_inode_delete(Catalog *c, uint64_t ino);
/* Copies the symlink target (NUL-terminated) into buf; -ERANGE if too small. */
int catalog_symlink_get(Catalog *c, uint64_t ino, char *buf, size_t size);

/*
 * Calls cb for every inode left with nlink 0 (files unlinked while open when
 * the daemon stopped); stops at the first negative return of cb and returns
 * it.  The catalog lock is held
 * during the callbacks: cb must not call back into the catalog.
 */
int catalog_orphans_foreach(Catalog *c, int (*cb)(uint64_t ino, void *userdata), void *userdata);
/* Returns 1 if an inode row exists, 0 if not, <0 on error. */
int catalog_inode_exists(Catalog *c, uint64_t ino);

/* Directory entries. name is a C string of 1..CATALOG_NAME_MAX bytes. */
int catalog_dirent_lookup(Catalog *c, uint64_t parent, const char *name, uint64_t *ret_ino);
int catalog_dirent_add(Catalog *c, uint64_t parent, const char *name, uint64_t ino);
int catalog_dirent_remove(Catalog *c, uint64_t parent, const char *name);
/* Points an existing entry at another inode, keeping its cookie. */
int catalog_dirent_retarget(Catalog *c, uint64_t parent, const char *name, uint64_t ino);
/* Returns 1 if the directory has no entries, 0 if it has some. */
int catalog_dir_is_empty(Catalog *c, uint64_t dir);
/*
 * Reads up to n entries with cookie > after into buf and returns how many
 * (0 at the end).  Entries are ordered by cookie, so a listing resumed from
 * the last cookie returned is stable under concurrent changes.
 */
int catalog_dir_read(Catalog *c, uint64_t dir, uint64_t after, CatalogDirent *buf, size_t n);

/* Extended attributes. get/list return the size (copied only if size > 0). */
int catalog_xattr_get(Catalog *c, uint64_t ino, const char *name, void *buf, size_t size);
/* flags: 0, XATTR_CREATE (-EEXIST if present) or XATTR_REPLACE (-ENODATA if absent). */
int catalog_xattr_set(Catalog *c, uint64_t ino, const char *name, const void *value, size_t size, int flags);
int catalog_xattr_list(Catalog *c, uint64_t ino, char *buf, size_t size);
int catalog_xattr_remove(Catalog *c, uint64_t ino, const char *name);
/* Returns 1 if the inode has any xattr, 0 if none. */
int catalog_xattr_any(Catalog *c, uint64_t ino);

/* Integrity check of the database file (PRAGMA integrity_check + foreign_key_check). */
int catalog_check(Catalog *c);
