/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * catalog.c — the only module that speaks SQL.
 *
 * Invariants kept here:
 *  1. The schema version lives in PRAGMA user_version.  Versions only grow;
 *     schema_steps[n] upgrades from n to n + 1, and all steps needed run in
 *     one transaction, so an interrupted upgrade leaves the old version.
 *  2. Inode numbers come from AUTOINCREMENT and are never reused, so the
 *     kernel never confuses a new file with an old one (generation is 0).
 *  3. Directory entry cookies also come from AUTOINCREMENT: a listing that
 *     resumes "after cookie X" sees every entry that existed throughout the
 *     listing exactly once, whatever is added or removed meanwhile.
 *  4. Every statement is prepared once per connection and bound with '?';
 *     no SQL text is ever built from names or values.
 *  5. SQLite result codes are translated to negative errno in
 *     catalog_result() and nowhere else.
 *  6. The digest index (tier, digest) -> chunk id is the recent table
 *     chunk_recent, the frozen one chunk_frozen (the recent table of a
 *     merge under way, else empty) and the sorted runs in chunk_runs that
 *     chunk_run_list marks live or merging; a digest is in one of them at
 *     most, and every chunk row is in one of them unless retired.  A new
 *     chunk goes into the recent table only: its uniqueness there is the
 *     table's key, and in the others either a look-up (catalog_chunk_add())
 *     or the caller's word that the digest was never committed
 *     (catalog_chunk_add_new(): a filter with no false negatives, which
 *     saw every id of the frozen table before it was frozen).  A merge
 *     copies the frozen table and the merging runs, batch by batch, into a
 *     building run that look-ups skip (it holds a copy of some of theirs);
 *     one short transaction swaps it in.  A digest found twice fails the
 *     merge rather than drop one.
 *  7. A full filesystem does not stop the catalog from committing what
 *     frees room or moves data off it (a spill's switch, an unlink, a
 *     seal): CATALOG_RESERVE_MAX bytes at most, allocated to a file beside
 *     the database, are given back when a transaction begins with less
 *     than that free (SQLite undoes the whole transaction whose COMMIT
 *     finds the disk full, too late to give room then), or when a
 *     statement of its own finds the disk full (tried once more,
 *     step_done()).  The reserve comes back once its filesystem has room
 *     again (reserve_refill()).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "common/array.h"
#include "common/clock.h"
#include "common/macros.h"

/*
 * chunk_run_list.state: what a run is to look-ups and to the merge under
 * way (one at most).  The SQL spells them too (RUN_*_SQL).
 */
enum {
	RUN_LIVE = 0,     /* looked in */
	RUN_MERGING = 1,  /* looked in, and a source of the merge under way */
	RUN_BUILDING = 2, /* the merge's new run, being written: not looked in, its sources are complete */
	RUN_DROPPED = 3,  /* merged (or a failed merge's new run): not looked in, deleted batch by batch */
};
#define RUN_MERGING_SQL "1"
#define RUN_BUILDING_SQL "2"

typedef enum StatementId {
	STMT_INODE_GET,
	STMT_INODE_CREATE,
	STMT_INODE_UPDATE,
	STMT_INODE_DELETE,
	STMT_INODE_ARCHIVELOG_DELETE,
	STMT_INODE_PIN_DELETE,
	STMT_PIN_SET,
	STMT_PIN_GET,
	STMT_ARCHIVELOG_SET,
	STMT_ARCHIVELOG_GET,
	STMT_ARCHIVELOGS,
	STMT_INODE_EXISTS,
	STMT_INODE_XATTRS_DELETE,
	STMT_SYMLINK_GET,
	STMT_ORPHANS,
	STMT_FILES_STATE,
	STMT_DIRENT_LOOKUP,
	STMT_DIRENT_ADD,
	STMT_DIRENT_REMOVE,
	STMT_DIRENT_RETARGET,
	STMT_DIR_ANY,
	STMT_DIR_READ,
	STMT_XATTR_GET,
	STMT_XATTR_INSERT,
	STMT_XATTR_UPSERT,
	STMT_XATTR_UPDATE,
	STMT_XATTR_LIST,
	STMT_XATTR_REMOVE,
	STMT_XATTR_ANY,
	STMT_CONTAINER_NEW,
	STMT_CONTAINER_GET,
	STMT_CONTAINER_UPDATE,
	STMT_CONTAINER_DELETE,
	STMT_CONTAINER_LIVE,
	STMT_CONTAINERS_ALL,
	STMT_CONTAINERS_TIER,
	STMT_CONTAINER_FOREIGN_FIND,
	STMT_CONTAINER_FOREIGN_ADD,
	STMT_CONTAINERS_FOREIGN,
	STMT_CONTAINERS_FOREIGN_PRUNE,
	STMT_CHUNK_GET,
	STMT_CHUNK_RANGE,
	STMT_CHUNK_ADD,
	STMT_CHUNK_REFS_GET,
	STMT_CHUNK_REFS_SET,
	STMT_CHUNK_MOVE,
	STMT_CHUNK_RETIRE,
	STMT_CHUNKS_IN_CONTAINER,
	STMT_CHUNKS_TIER,
	STMT_CHUNK_DIGESTS_TIER,
	STMT_CHUNKS_COUNT_TIER,
	STMT_CHUNKS_DEAD,
	STMT_INDEX_FIND,
	STMT_INDEX_RECENT_FIND,
	STMT_INDEX_RECENT_ADD,
	STMT_INDEX_RECENT_REMOVE,
	STMT_INDEX_FROZEN_REMOVE,
	STMT_INDEX_RUNS_REMOVE,
	STMT_INDEX_RECENT_COUNT,
	STMT_INDEX_FROZEN_COUNT,
	STMT_INDEX_FROZEN_SCAN,
	STMT_INDEX_RUN_SCAN,
	STMT_INDEX_RUN_LAST,
	STMT_INDEX_RUNS,
	STMT_INDEX_RUN_NEW,
	STMT_INDEX_RUN_ROW_ADD,
	STMT_INDEX_RUN_KEYS,
	STMT_INDEX_RUN_DROP_TO,
	STMT_INDEX_RUN_DROP,
	STMT_INDEX_RUN_FORGET,
	STMT_INDEX_RUN_SIZE,
	STMT_INDEX_RUN_STATE,
	STMT_INDEX_MERGED_KEYS,
	STMT_INDEX_MERGED_DROP_TO,
	STMT_INDEX_MERGED_DROP,
	STMT_CHUNK_DELETE_RETURNING,
	STMT_SAVEPOINT,
	STMT_SAVEPOINT_RELEASE,
	STMT_SAVEPOINT_ROLLBACK,
	STMT_FREELIST_COUNT,
	STMT_VACUUM_STEP,
	STMT_TIER_MOVED_ADD,
	STMT_TIER_MOVED_GET,
	STMT_KEY_ID_GET,
	STMT_KEY_ID_ADD,
	STMT_CHUNKS_ANY,
	STMT_KEY_USAGE,
	STMT_REKEY_SET,
	STMT_REKEY_CLEAR,
	STMT_REKEY_GET,
	STMT_DESCRIPTION_SET,
	STMT_DESCRIPTION_GET,
	STMT_RECIPE_PUT,
	STMT_RECIPE_FIND,
	STMT_RECIPE_ALL,
	STMT_RECIPE_DELETE,
	STMT_FILES_ALL,
	STMT_DIRENT_OF,
	STMT_FILES_TOTALS,
	STMT_HISTORY_TIER_ADD,
	STMT_HISTORY_CLASS_ADD,
	STMT_HISTORY_TIER_PRUNE,
	STMT_HISTORY_CLASS_PRUNE,
	STMT_HISTORY_TIERS,
	STMT_HISTORY_CLASSES,
	STMT_BEGIN,
	STMT_COMMIT,
	STMT_ROLLBACK,
	_STMT_MAX,
} StatementId;

static const char *const statement_sql[_STMT_MAX] = {
	[STMT_INODE_GET] = "SELECT parent, mode, uid, gid, nlink, rdev, size, atime_ns, mtime_ns, ctime_ns, state, "
			   "file_class, tier, stored FROM inodes WHERE ino = ?",
	[STMT_INODE_CREATE] = "INSERT INTO inodes (parent, mode, uid, gid, nlink, rdev, size, atime_ns, mtime_ns, "
			      "ctime_ns, state, file_class, tier, stored, target) "
			      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
	[STMT_INODE_UPDATE] = "UPDATE inodes SET parent = ?, mode = ?, uid = ?, gid = ?, nlink = ?, rdev = ?, "
			      "size = ?, atime_ns = ?, mtime_ns = ?, ctime_ns = ?, state = ?, file_class = ?, tier = ?, "
			      "stored = ? WHERE ino = ?",
	[STMT_INODE_DELETE] = "DELETE FROM inodes WHERE ino = ?",
	[STMT_INODE_ARCHIVELOG_DELETE] = "DELETE FROM archivelogs WHERE ino = ?",
	[STMT_INODE_PIN_DELETE] = "DELETE FROM pins WHERE ino = ?",
	[STMT_PIN_SET] = "INSERT OR IGNORE INTO pins (ino) VALUES (?)",
	[STMT_PIN_GET] = "SELECT 1 FROM pins WHERE ino = ?",
	[STMT_ARCHIVELOG_SET] = "INSERT OR REPLACE INTO archivelogs (ino, dbid, db_name, resetlogs_id, thread, sequence, "
				"low_scn, next_scn, low_time, next_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
	[STMT_ARCHIVELOG_GET] = "SELECT ino, dbid, db_name, resetlogs_id, thread, sequence, low_scn, next_scn, low_time, "
				"next_time FROM archivelogs WHERE ino = ?",
	[STMT_ARCHIVELOGS] = "SELECT ino, dbid, db_name, resetlogs_id, thread, sequence, low_scn, next_scn, low_time, "
			     "next_time FROM archivelogs WHERE (?1 = 0 OR thread = ?1) AND sequence BETWEEN ?2 AND ?3 "
			     "AND (?4 = 0 OR dbid = ?4) ORDER BY thread, sequence, ino",
	[STMT_INODE_EXISTS] = "SELECT 1 FROM inodes WHERE ino = ?",
	[STMT_INODE_XATTRS_DELETE] = "DELETE FROM xattrs WHERE ino = ?",
	[STMT_SYMLINK_GET] = "SELECT target FROM inodes WHERE ino = ?",
	[STMT_ORPHANS] = "SELECT ino FROM inodes WHERE nlink = 0",
	[STMT_FILES_STATE] = "SELECT ino FROM inodes WHERE state = ? AND (mode & 0xf000) = 0x8000 AND nlink > 0",
	[STMT_DIRENT_LOOKUP] = "SELECT ino FROM dirents WHERE parent = ? AND name = ?",
	[STMT_DIRENT_ADD] = "INSERT INTO dirents (parent, name, ino) VALUES (?, ?, ?)",
	[STMT_DIRENT_REMOVE] = "DELETE FROM dirents WHERE parent = ? AND name = ?",
	[STMT_DIRENT_RETARGET] = "UPDATE dirents SET ino = ? WHERE parent = ? AND name = ?",
	[STMT_DIR_ANY] = "SELECT 1 FROM dirents WHERE parent = ? LIMIT 1",
	[STMT_DIR_READ] = "SELECT d.cookie, d.ino, i.mode, d.name FROM dirents d JOIN inodes i ON i.ino = d.ino "
			  "WHERE d.parent = ? AND d.cookie > ? ORDER BY d.cookie LIMIT ?",
	[STMT_XATTR_GET] = "SELECT value FROM xattrs WHERE ino = ? AND name = ?",
	[STMT_XATTR_INSERT] = "INSERT INTO xattrs (ino, name, value) VALUES (?, ?, ?)",
	[STMT_XATTR_UPSERT] = "INSERT INTO xattrs (ino, name, value) VALUES (?, ?, ?) "
			      "ON CONFLICT (ino, name) DO UPDATE SET value = excluded.value",
	[STMT_XATTR_UPDATE] = "UPDATE xattrs SET value = ? WHERE ino = ? AND name = ?",
	[STMT_XATTR_LIST] = "SELECT name FROM xattrs WHERE ino = ? ORDER BY name",
	[STMT_XATTR_REMOVE] = "DELETE FROM xattrs WHERE ino = ? AND name = ?",
	[STMT_XATTR_ANY] = "SELECT 1 FROM xattrs WHERE ino = ? LIMIT 1",
	[STMT_CONTAINER_NEW] = "INSERT INTO containers (tier, key_id) VALUES (?, ?)",
	[STMT_CONTAINER_GET] = "SELECT tier, size, live_bytes, full, key_id FROM containers WHERE id = ?",
	[STMT_CONTAINER_UPDATE] = "UPDATE containers SET size = ?, full = ? WHERE id = ?",
	[STMT_CONTAINER_DELETE] = "DELETE FROM containers WHERE id = ?",
	[STMT_CONTAINER_LIVE] = "UPDATE containers SET live_bytes = live_bytes + ? WHERE id = ?",
	[STMT_CONTAINERS_ALL] = "SELECT id, tier, size, live_bytes, full, key_id FROM containers WHERE host IS NULL "
				"ORDER BY id",
	[STMT_CONTAINERS_TIER] = "SELECT id, tier, size, live_bytes, full, key_id FROM containers "
				 "WHERE tier = ? AND host IS NULL ORDER BY id",
	[STMT_CONTAINER_FOREIGN_FIND] = "SELECT id FROM containers WHERE tier = ? AND host = ? AND remote = ?",
	[STMT_CONTAINER_FOREIGN_ADD] = "INSERT INTO containers (tier, host, remote, full) VALUES (?, ?, ?, 1)",
	[STMT_CONTAINERS_FOREIGN] = "SELECT id, host, remote FROM containers WHERE tier = ? AND host IS NOT NULL "
				    "ORDER BY id",
	[STMT_CONTAINERS_FOREIGN_PRUNE] = "DELETE FROM containers WHERE tier = ? AND host IS NOT NULL AND NOT EXISTS "
					  "(SELECT 1 FROM chunks WHERE chunks.container = containers.id)",
	[STMT_CHUNK_GET] = "SELECT id, tier, digest, container, offset, frame_size, plain_size, refs, region_size, "
			   "region_offset FROM chunks WHERE id = ?",
	[STMT_CHUNK_RANGE] = "SELECT id, tier, digest, container, offset, frame_size, plain_size, refs, region_size, "
			     "region_offset FROM chunks WHERE id BETWEEN ? AND ? ORDER BY id",
	[STMT_CHUNK_ADD] = "INSERT INTO chunks (tier, digest, container, offset, frame_size, plain_size, refs, "
			   "region_size, region_offset) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
	/*
	 * A read, then a write, per chunk: an UPDATE ... RETURNING opens and
	 * closes an ephemeral table each time, a third of what a reference
	 * cost (bench/README.md, sealing's fourth pass).
	 */
	[STMT_CHUNK_REFS_GET] = "SELECT refs, container, frame_size FROM chunks WHERE id = ?",
	[STMT_CHUNK_REFS_SET] = "UPDATE chunks SET refs = ? WHERE id = ?",
	[STMT_CHUNK_MOVE] = "UPDATE chunks SET container = ?, offset = ?, frame_size = ?, region_size = ?, "
			    "region_offset = ? WHERE id = ?",
	[STMT_CHUNK_RETIRE] = "UPDATE chunks SET digest = ? WHERE id = ?",
	[STMT_CHUNK_DELETE_RETURNING] = "DELETE FROM chunks WHERE id = ? AND refs = 0 RETURNING tier, digest",
	[STMT_CHUNKS_IN_CONTAINER] = "SELECT id, tier, digest, container, offset, frame_size, plain_size, refs, "
				     "region_size, region_offset FROM chunks WHERE container = ? "
				     "ORDER BY offset, region_offset",
	/*
	 * Every row of a tier: a scan of the table in id order.  Through the
	 * (tier, digest) index each row would be a random read of the table:
	 * 2 minutes instead of 1.3 s at 10M chunks (bench/index-scale.c).
	 */
	[STMT_CHUNKS_TIER] = "SELECT id, tier, digest, container, offset, frame_size, plain_size, refs, region_size, "
			     "region_offset FROM chunks NOT INDEXED WHERE tier = ?",
	/* The digest index alone (recent, then run by run), smaller than the table. */
	[STMT_CHUNK_DIGESTS_TIER] = "SELECT digest FROM chunk_recent WHERE tier = ?1 UNION ALL SELECT digest FROM "
				    "chunk_frozen WHERE tier = ?1 UNION ALL SELECT digest FROM chunk_runs WHERE run IN "
				    "(SELECT run FROM chunk_run_list WHERE state <= " RUN_MERGING_SQL ") AND tier = ?1",
	[STMT_CHUNKS_COUNT_TIER] = "SELECT (SELECT count(*) FROM chunk_recent WHERE tier = ?1) + (SELECT count(*) FROM "
				   "chunk_frozen WHERE tier = ?1) + (SELECT count(*) FROM chunk_runs WHERE run IN "
				   "(SELECT run FROM chunk_run_list WHERE state <= " RUN_MERGING_SQL ") AND tier = ?1)",
	/*
	 * The digest index (invariant 6): the recent table, then each run, in
	 * run order (the oldest runs are the largest: most ids are found in
	 * the first one looked at); a digest is in one table at most.
	 */
	[STMT_INDEX_FIND] = "SELECT id FROM chunk_recent WHERE tier = ?1 AND digest = ?2 UNION ALL SELECT id FROM "
			    "chunk_frozen WHERE tier = ?1 AND digest = ?2 UNION ALL SELECT id FROM chunk_runs WHERE run IN "
			    "(SELECT run FROM chunk_run_list WHERE state <= " RUN_MERGING_SQL ") AND tier = ?1 AND "
			    "digest = ?2 LIMIT 1",
	[STMT_INDEX_RECENT_FIND] = "SELECT id FROM chunk_recent WHERE tier = ? AND digest = ?",
	[STMT_INDEX_RECENT_ADD] = "INSERT INTO chunk_recent (tier, digest, id) VALUES (?, ?, ?)",
	[STMT_INDEX_RECENT_REMOVE] = "DELETE FROM chunk_recent WHERE tier = ? AND digest = ? AND id = ?",
	[STMT_INDEX_FROZEN_REMOVE] = "DELETE FROM chunk_frozen WHERE tier = ? AND digest = ? AND id = ?",
	[STMT_INDEX_RUNS_REMOVE] = "DELETE FROM chunk_runs WHERE run IN (SELECT run FROM chunk_run_list) AND tier = ? "
				   "AND digest = ? AND id = ?",
	[STMT_INDEX_RECENT_COUNT] = "SELECT count(*) FROM chunk_recent",
	[STMT_INDEX_FROZEN_COUNT] = "SELECT count(*) FROM chunk_frozen",
	[STMT_INDEX_FROZEN_SCAN] = "SELECT tier, digest, id FROM chunk_frozen WHERE (tier, digest) > (?1, ?2) "
				   "ORDER BY tier, digest",
	[STMT_INDEX_RUN_SCAN] = "SELECT tier, digest, id FROM chunk_runs WHERE run = ?3 AND (tier, digest) > (?1, ?2) "
				"ORDER BY tier, digest",
	[STMT_INDEX_RUN_LAST] = "SELECT tier, digest FROM chunk_runs WHERE run = ? ORDER BY tier DESC, digest DESC LIMIT 1",
	[STMT_INDEX_RUNS] = "SELECT run, entries, state FROM chunk_run_list ORDER BY run",
	[STMT_INDEX_RUN_NEW] = "INSERT INTO chunk_run_list (entries, state) VALUES (0, " RUN_BUILDING_SQL ")",
	[STMT_INDEX_RUN_ROW_ADD] = "INSERT INTO chunk_runs (run, tier, digest, id) VALUES (?, ?, ?, ?)",
	[STMT_INDEX_RUN_KEYS] = "SELECT tier, digest FROM chunk_runs WHERE run = ? ORDER BY tier, digest",
	[STMT_INDEX_RUN_DROP_TO] = "DELETE FROM chunk_runs WHERE run = ?1 AND (tier, digest) <= (?2, ?3)",
	[STMT_INDEX_RUN_DROP] = "DELETE FROM chunk_runs WHERE run = ?",
	[STMT_INDEX_RUN_FORGET] = "DELETE FROM chunk_run_list WHERE run = ?",
	[STMT_INDEX_RUN_SIZE] = "UPDATE chunk_run_list SET entries = ? WHERE run = ?",
	[STMT_INDEX_RUN_STATE] = "UPDATE chunk_run_list SET state = ? WHERE run = ?",
	[STMT_INDEX_MERGED_KEYS] = "SELECT tier, digest FROM chunk_merged ORDER BY tier, digest",
	[STMT_INDEX_MERGED_DROP_TO] = "DELETE FROM chunk_merged WHERE (tier, digest) <= (?2, ?3)",
	[STMT_INDEX_MERGED_DROP] = "DELETE FROM chunk_merged",
	[STMT_CHUNKS_DEAD] = "SELECT id, tier, digest, container, offset, frame_size, plain_size, refs, region_size, "
			     "region_offset FROM chunks WHERE tier = ? AND refs = 0",
	[STMT_TIER_MOVED_ADD] = "INSERT INTO tier_moves (tier, files, logical, source_stored, stored) "
				"VALUES (?1, 1, ?2, ?3, ?4) ON CONFLICT (tier) DO UPDATE SET files = files + 1, "
				"logical = logical + ?2, source_stored = source_stored + ?3, stored = stored + ?4",
	[STMT_TIER_MOVED_GET] = "SELECT files, logical, source_stored, stored FROM tier_moves WHERE tier = ?",
	[STMT_KEY_ID_GET] = "SELECT key_id FROM keys ORDER BY added DESC, key_id LIMIT 1",
	[STMT_KEY_ID_ADD] = "INSERT INTO keys (key_id, added) VALUES (?, ?)",
	[STMT_CHUNKS_ANY] = "SELECT 1 FROM chunks LIMIT 1",
	[STMT_KEY_USAGE] = "SELECT tier, key_id, count(*), TOTAL(size) FROM containers WHERE host IS NULL GROUP BY tier, key_id "
			   "ORDER BY tier, key_id",
	[STMT_REKEY_SET] = "INSERT OR IGNORE INTO rekeys (tier, requested) VALUES (?, ?)",
	[STMT_REKEY_CLEAR] = "DELETE FROM rekeys WHERE tier = ?",
	[STMT_REKEY_GET] = "SELECT 1 FROM rekeys WHERE tier = ?",
	[STMT_DESCRIPTION_SET] = "INSERT OR REPLACE INTO descriptions (tier, generation, present) VALUES (?, ?, ?)",
	[STMT_DESCRIPTION_GET] = "SELECT generation, present FROM descriptions WHERE tier = ?",
	[STMT_RECIPE_PUT] = "INSERT OR REPLACE INTO recipes (ino, offset, segment) VALUES (?, ?, ?)",
	[STMT_RECIPE_FIND] = "SELECT offset, segment FROM recipes WHERE ino = ? AND offset <= ? "
			     "ORDER BY offset DESC LIMIT 1",
	[STMT_RECIPE_ALL] = "SELECT offset, segment FROM recipes WHERE ino = ? ORDER BY offset",
	[STMT_RECIPE_DELETE] = "DELETE FROM recipes WHERE ino = ?",
	[STMT_FILES_ALL] = "SELECT ino, parent, mode, uid, gid, nlink, rdev, size, atime_ns, mtime_ns, ctime_ns, state, "
			   "file_class, tier, stored FROM inodes WHERE (mode & 0xf000) = 0x8000 AND nlink > 0 ORDER BY ino",
	[STMT_DIRENT_OF] = "SELECT parent, name FROM dirents WHERE ino = ? ORDER BY cookie LIMIT 1",
	[STMT_FILES_TOTALS] = "SELECT state, COUNT(*), TOTAL(size) FROM inodes "
			      "WHERE (mode & 0xf000) = 0x8000 AND nlink > 0 GROUP BY state",
	[STMT_HISTORY_TIER_ADD] = "INSERT OR REPLACE INTO history_tiers (t, tier, capacity, used, files, logical, stored) "
				  "VALUES (?, ?, ?, ?, ?, ?, ?)",
	[STMT_HISTORY_CLASS_ADD] = "INSERT OR REPLACE INTO history_classes (t, class, files, logical, hot_logical) "
				   "VALUES (?, ?, ?, ?, ?)",
	[STMT_HISTORY_TIER_PRUNE] = "DELETE FROM history_tiers WHERE t < ?",
	[STMT_HISTORY_CLASS_PRUNE] = "DELETE FROM history_classes WHERE t < ?",
	[STMT_HISTORY_TIERS] = "SELECT t, tier, capacity, used, files, logical, stored FROM history_tiers "
			       "WHERE t >= ? ORDER BY t, tier",
	[STMT_HISTORY_CLASSES] = "SELECT t, class, files, logical, hot_logical FROM history_classes "
				 "WHERE t >= ? ORDER BY t, class",
	[STMT_BEGIN] = "BEGIN IMMEDIATE",
	[STMT_COMMIT] = "COMMIT",
	[STMT_ROLLBACK] = "ROLLBACK",
	[STMT_SAVEPOINT] = "SAVEPOINT chunk_index",
	[STMT_SAVEPOINT_RELEASE] = "RELEASE chunk_index",
	[STMT_SAVEPOINT_ROLLBACK] = "ROLLBACK TO chunk_index",
	[STMT_FREELIST_COUNT] = "PRAGMA freelist_count",
	/* CATALOG_VACUUM_STEP_PAGES: a PRAGMA takes no bound parameter. */
	[STMT_VACUUM_STEP] = "PRAGMA incremental_vacuum(8)",
};

/* schema_steps[n] upgrades a catalog from version n to n + 1. */
static const char *const schema_steps[CATALOG_SCHEMA_VERSION] = {
	"CREATE TABLE inodes ("
	"  ino INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  parent INTEGER NOT NULL,"
	"  mode INTEGER NOT NULL,"
	"  uid INTEGER NOT NULL,"
	"  gid INTEGER NOT NULL,"
	"  nlink INTEGER NOT NULL,"
	"  rdev INTEGER NOT NULL DEFAULT 0,"
	"  size INTEGER NOT NULL DEFAULT 0,"
	"  atime_ns INTEGER NOT NULL,"
	"  mtime_ns INTEGER NOT NULL,"
	"  ctime_ns INTEGER NOT NULL,"
	"  state INTEGER NOT NULL DEFAULT 0,"
	"  target BLOB);"
	"CREATE INDEX inodes_orphans ON inodes (nlink) WHERE nlink = 0;"
	"CREATE TABLE dirents ("
	"  cookie INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  parent INTEGER NOT NULL REFERENCES inodes (ino),"
	"  name BLOB NOT NULL,"
	"  ino INTEGER NOT NULL REFERENCES inodes (ino),"
	"  UNIQUE (parent, name));"
	"CREATE INDEX dirents_listing ON dirents (parent, cookie);"
	"CREATE INDEX dirents_target ON dirents (ino);"
	"CREATE TABLE xattrs ("
	"  ino INTEGER NOT NULL REFERENCES inodes (ino),"
	"  name BLOB NOT NULL,"
	"  value BLOB NOT NULL,"
	"  PRIMARY KEY (ino, name)) WITHOUT ROWID;",

	/* 1 -> 2: deduplicated storage. */
	"ALTER TABLE inodes ADD COLUMN file_class INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE inodes ADD COLUMN tier INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE inodes ADD COLUMN stored INTEGER NOT NULL DEFAULT 0;"
	"CREATE INDEX inodes_state ON inodes (state);"
	"CREATE TABLE containers ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  tier INTEGER NOT NULL,"
	"  size INTEGER NOT NULL DEFAULT 0,"
	"  live_bytes INTEGER NOT NULL DEFAULT 0,"
	"  full INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE chunks ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  tier INTEGER NOT NULL,"
	"  digest BLOB NOT NULL,"
	"  container INTEGER NOT NULL REFERENCES containers (id),"
	"  offset INTEGER NOT NULL,"
	"  frame_size INTEGER NOT NULL,"
	"  plain_size INTEGER NOT NULL,"
	"  refs INTEGER NOT NULL CHECK (refs >= 0),"
	"  UNIQUE (tier, digest));"
	"CREATE INDEX chunks_container ON chunks (container, offset);"
	"CREATE INDEX chunks_dead ON chunks (tier) WHERE refs = 0;"
	"CREATE TABLE recipes ("
	"  ino INTEGER NOT NULL REFERENCES inodes (ino),"
	"  offset INTEGER NOT NULL,"
	"  segment BLOB NOT NULL,"
	"  PRIMARY KEY (ino, offset)) WITHOUT ROWID;",

	/* 2 -> 3: archived logs' headers, for recall by sequence and reports by database. */
	"CREATE TABLE archivelogs ("
	"  ino INTEGER PRIMARY KEY REFERENCES inodes (ino),"
	"  dbid INTEGER NOT NULL,"
	"  db_name BLOB NOT NULL,"
	"  resetlogs_id INTEGER NOT NULL,"
	"  thread INTEGER NOT NULL,"
	"  sequence INTEGER NOT NULL,"
	"  low_scn INTEGER NOT NULL,"
	"  next_scn INTEGER NOT NULL,"
	"  low_time INTEGER NOT NULL,"
	"  next_time INTEGER NOT NULL);"
	"CREATE INDEX archivelogs_sequence ON archivelogs (thread, sequence);",

	/* 3 -> 4: files pinned to the hot tier. */
	"CREATE TABLE pins (ino INTEGER PRIMARY KEY REFERENCES inodes (ino));",

	/* 4 -> 5: usage over time, for the charts of tierctl report --html. */
	"CREATE TABLE history_tiers ("
	"  t INTEGER NOT NULL,"
	"  tier INTEGER NOT NULL,"
	"  capacity INTEGER NOT NULL,"
	"  used INTEGER NOT NULL,"
	"  files INTEGER NOT NULL,"
	"  logical INTEGER NOT NULL,"
	"  stored INTEGER NOT NULL,"
	"  PRIMARY KEY (t, tier)) WITHOUT ROWID;"
	"CREATE TABLE history_classes ("
	"  t INTEGER NOT NULL,"
	"  class INTEGER NOT NULL,"
	"  files INTEGER NOT NULL,"
	"  logical INTEGER NOT NULL,"
	"  hot_logical INTEGER NOT NULL,"
	"  PRIMARY KEY (t, class)) WITHOUT ROWID;",

	/*
	 * 5 -> 6: a raw file's tier names the tier its staging file is on (it
	 * spilled there when the hot tier was full).  Versions before 6 kept every raw
	 * file on the hot tier and never read their tier, so it becomes 0 for
	 * all of them; and the version bump keeps an older fratierfs, which
	 * would look for every raw file on the hot tier, away from a catalog
	 * whose raw files may be elsewhere.
	 */
	"UPDATE inodes SET tier = 0 WHERE state = 0;",

	/*
	 * 6 -> 7: compression regions.  A chunk stored in a region (container
	 * version 2) names the region's bytes (region_size, at offset) and
	 * where in its plain bytes the chunk starts; frame_size becomes its
	 * share of the region.  Chunks written before (chunk frames, container
	 * version 1) keep region_size 0: nothing is rewritten.  tier_moves
	 * counts what moves into each tier brought, before and after it was
	 * compressed again there (tierctl report).
	 */
	"ALTER TABLE chunks ADD COLUMN region_size INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE chunks ADD COLUMN region_offset INTEGER NOT NULL DEFAULT 0;"
	"CREATE TABLE tier_moves ("
	"  tier INTEGER PRIMARY KEY,"
	"  files INTEGER NOT NULL,"
	"  logical INTEGER NOT NULL,"
	"  source_stored INTEGER NOT NULL,"
	"  stored INTEGER NOT NULL);",

	/*
	 * 7 -> 8: encryption at rest.  The fingerprints (dedup/key.h) of the
	 * keys the data is written under, never a key: a mount with another
	 * key is refused before it reads or writes anything.  No row: no key.
	 */
	"CREATE TABLE keys ("
	"  key_id BLOB PRIMARY KEY,"
	"  added INTEGER NOT NULL);",

	/*
	 * 8 -> 9: global dedup on a shared tier (docs/SHARED.md).  A foreign
	 * container is another host's container this host's chunks point
	 * into: host names it, remote is its id in that host's catalog (and
	 * in its object name).  Its row only anchors the chunks' references:
	 * it has no object of this host, and the container lists the store
	 * works on (catalog_containers_foreach()) never show it.
	 */
	"ALTER TABLE containers ADD COLUMN host BLOB;"
	"ALTER TABLE containers ADD COLUMN remote INTEGER NOT NULL DEFAULT 0;"
	"CREATE UNIQUE INDEX containers_foreign ON containers (tier, host, remote) WHERE host IS NOT NULL;",

	/*
	 * 9 -> 10: key rotation.  Each container records the key its sealed
	 * regions are sealed under (NULL: none), so that a mount without a key
	 * still needed is refused and tierctl rekey knows what to rewrite.
	 * Containers written before are counted under the one key of the data
	 * directory, if it has one, whatever they hold: a rekey clears them.
	 * rekeys: the tiers a rekey was asked for and has not finished.
	 */
	"ALTER TABLE containers ADD COLUMN key_id BLOB;"
	"UPDATE containers SET key_id = (SELECT key_id FROM keys ORDER BY added DESC, key_id LIMIT 1) WHERE host IS NULL;"
	"CREATE TABLE rekeys ("
	"  tier INTEGER PRIMARY KEY,"
	"  requested INTEGER NOT NULL);",

	/*
	 * 10 -> 11: the generation of the last description written to each
	 * lower tier (present 0: removed since, the tier being too full), so
	 * that an older copy put back is told from the current one (tierctl
	 * scrub).  No row: none written since the upgrade, nothing to compare.
	 */
	"CREATE TABLE descriptions ("
	"  tier INTEGER PRIMARY KEY,"
	"  generation INTEGER NOT NULL,"
	"  present INTEGER NOT NULL);",

	/*
	 * 11 -> 12: the digest index leaves the chunk table (invariant 6).
	 * UNIQUE (tier, digest) made every new chunk a random read and write
	 * of one large B-tree (bench/README.md, index-scale).  The map from
	 * digest to id becomes a small recent table, the only one a seal
	 * writes, and sorted runs that a merge writes once each,
	 * in digest order.  What the old index held becomes run 1, read from
	 * it in order; the chunk table is rebuilt without it, its ids and
	 * its AUTOINCREMENT high-water mark kept (an id is never reused).
	 */
	"CREATE TABLE chunk_recent ("
	"  tier INTEGER NOT NULL,"
	"  digest BLOB NOT NULL,"
	"  id INTEGER NOT NULL,"
	"  PRIMARY KEY (tier, digest)) WITHOUT ROWID;"
	"CREATE TABLE chunk_frozen ("
	"  tier INTEGER NOT NULL,"
	"  digest BLOB NOT NULL,"
	"  id INTEGER NOT NULL,"
	"  PRIMARY KEY (tier, digest)) WITHOUT ROWID;"
	"CREATE TABLE chunk_merged ("
	"  tier INTEGER NOT NULL,"
	"  digest BLOB NOT NULL,"
	"  id INTEGER NOT NULL,"
	"  PRIMARY KEY (tier, digest)) WITHOUT ROWID;"
	"CREATE TABLE chunk_runs ("
	"  run INTEGER NOT NULL,"
	"  tier INTEGER NOT NULL,"
	"  digest BLOB NOT NULL,"
	"  id INTEGER NOT NULL,"
	"  PRIMARY KEY (run, tier, digest)) WITHOUT ROWID;"
	"CREATE TABLE chunk_run_list ("
	"  run INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  entries INTEGER NOT NULL,"
	"  state INTEGER NOT NULL DEFAULT 0);"
	"INSERT INTO chunk_run_list (run, entries) SELECT 1, count(*) FROM chunks HAVING count(*) > 0;"
	"INSERT INTO chunk_runs (run, tier, digest, id) SELECT 1, tier, digest, id FROM chunks ORDER BY tier, digest;"
	"CREATE TABLE chunks_v12 ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  tier INTEGER NOT NULL,"
	"  digest BLOB NOT NULL,"
	"  container INTEGER NOT NULL REFERENCES containers (id),"
	"  offset INTEGER NOT NULL,"
	"  frame_size INTEGER NOT NULL,"
	"  plain_size INTEGER NOT NULL,"
	"  refs INTEGER NOT NULL CHECK (refs >= 0),"
	"  region_size INTEGER NOT NULL DEFAULT 0,"
	"  region_offset INTEGER NOT NULL DEFAULT 0);"
	"INSERT INTO chunks_v12 (id, tier, digest, container, offset, frame_size, plain_size, refs, region_size, "
	"  region_offset) SELECT id, tier, digest, container, offset, frame_size, plain_size, refs, region_size, "
	"  region_offset FROM chunks ORDER BY id;"
	"DELETE FROM sqlite_sequence WHERE name = 'chunks_v12';"
	"INSERT INTO sqlite_sequence (name, seq) SELECT 'chunks_v12', seq FROM sqlite_sequence WHERE name = 'chunks';"
	"DROP TABLE chunks;"
	"ALTER TABLE chunks_v12 RENAME TO chunks;"
	"CREATE INDEX chunks_container ON chunks (container, offset);"
	"CREATE INDEX chunks_dead ON chunks (tier) WHERE refs = 0;",
};

struct Catalog {
	sqlite3 *db;
	char *wal_path;
	pthread_mutex_t lock; /* recursive; outermost lock of the daemon: take it before no other */
	unsigned depth;       /* protected by lock: how many times its holder holds it */
	/*
	 * A mutex let go is taken straight back by the thread that let it go,
	 * ahead of the threads woken to wait for it (they need tens of
	 * microseconds to run): a merge's batches or the vacuum's steps, one
	 * after another, would keep every FUSE thread out for the whole merge.
	 * So after a batch or a step (unlock_yield()) the background thread
	 * waits, if any thread was waiting for the lock, until one has had it.
	 * yield_lock is a leaf, taken under lock or without it.
	 */
	atomic_uint lock_waiting;       /* threads in lock() not holding it yet */
	atomic_uint_fast64_t lock_waits; /* acquisitions that waited */
	atomic_uint_fast64_t lock_yields;
	atomic_uint yielding;           /* threads in unlock_yield() waiting for a waiter */
	pthread_mutex_t yield_lock;
	pthread_cond_t yield_cond;      /* with yield_lock: a waiter has had the lock */
	uint64_t vacuum_step_ns;        /* protected by lock (catalog_vacuum_budget_set()) */
	uint64_t vacuum_call_ns;        /* protected by lock */
	atomic_uint_fast64_t vacuum_calls, vacuum_steps, vacuum_pages, vacuum_cut;
	atomic_uint_fast64_t vacuum_left;
	sqlite3_stmt *stmts[_STMT_MAX]; /* protected by lock */
	uint64_t commits;               /* protected by lock: bumped by every change */
	uint64_t synced;                /* protected by sync_lock: commits known durable */
	/*
	 * chunk_recent's and chunk_frozen's committed rows, kept as rows come
	 * and go (rows_commit()), so that neither a merge's start nor
	 * catalog_index_merge_due() counts 128 Ki rows under the lock (up to
	 * 650 ms with the catalog out of the page cache: bench/README.md,
	 * "Merge hold, the rest").  UINT64_MAX: unknown, counted when needed
	 * (a reader's always are).  The deltas are the open transaction's.
	 */
	uint64_t recent_rows;           /* protected by lock */
	uint64_t frozen_rows;           /* protected by lock */
	int64_t recent_delta;           /* protected by lock */
	int64_t frozen_delta;           /* protected by lock */
	bool reader;                    /* a connection of catalog_open_reader(): counts nothing in memory */
	int merging;                    /* protected by lock: a merge is under way (1), none (0), unknown (-1) */
	uint64_t merge_recent;          /* protected by lock: chunk_frozen's rows when the merge began; UINT64_MAX unknown */
	pthread_mutex_t sync_lock;      /* taken without lock held */
	/*
	 * Checkpoints outside the lock (catalog_checkpointer_start()): SQLite's
	 * automatic one ran in the commit that filled the WAL, under the lock,
	 * and wrote back and synced the database for 0-60 ms while every other
	 * thread waited (bench/README.md, "Merge hold, the rest").  ckpt_run
	 * is held by whoever checkpoints: taken after lock or without it (the
	 * checkpointer never takes lock); ckpt_lock is a leaf, taken under
	 * lock by the WAL hook.
	 */
	sqlite3 *ckpt_db;               /* the checkpointer's own connection; NULL: SQLite's automatic checkpoints */
	pthread_t ckpt_thread;
	pthread_mutex_t ckpt_run;
	pthread_mutex_t ckpt_lock;
	pthread_cond_t ckpt_cond;       /* with ckpt_lock */
	bool ckpt_wanted;               /* protected by ckpt_lock */
	bool ckpt_stop;                 /* protected by ckpt_lock */
	/* Invariant 7; -1 for a reader, or where the file cannot be made. */
	int reserve_fd;
	uint64_t reserve_want;          /* set at open */
	atomic_uint_fast64_t reserve_held; /* changed under lock */
	int64_t reserve_refill_ns;      /* protected by lock: no refill tried before this time */
	atomic_uint_fast64_t reserve_releases;
};

static int catalog_result(int rc) {
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EUCLEAN;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_TOOBIG:
		return -E2BIG;
	default:
		return -EIO;
	}
}

static void lock(Catalog *c) {
	if (pthread_mutex_trylock(&c->lock) != 0) {
		atomic_fetch_add(&c->lock_waiting, 1);
		pthread_mutex_lock(&c->lock);
		atomic_fetch_sub(&c->lock_waiting, 1);
		atomic_fetch_add(&c->lock_waits, 1);
		/* Seen by unlock_yield(), which reads lock_waits after raising yielding: one of the two sees the other. */
		if (atomic_load(&c->yielding) > 0) {
			pthread_mutex_lock(&c->yield_lock);
			pthread_cond_broadcast(&c->yield_cond);
			pthread_mutex_unlock(&c->yield_lock);
		}
	}
	c->depth++;
}

static void unlock(Catalog *c) {
	c->depth--;
	pthread_mutex_unlock(&c->lock);
}

/*
 * For the background's batches and steps: lets go of the lock and, when it
 * let it go for good while threads waited for it, returns once one of them
 * has had it (see lock_waiting).  A thread that came to wait after the
 * unlock waits for the next batch.
 */
static void unlock_yield(Catalog *c) {
	bool last = c->depth == 1;
	uint64_t seen = atomic_load(&c->lock_waits);
	unsigned waiting = atomic_load(&c->lock_waiting);

	unlock(c);
	if (!last || waiting == 0)
		return;
	pthread_mutex_lock(&c->yield_lock);
	atomic_fetch_add(&c->yielding, 1);
	while (atomic_load(&c->lock_waits) == seen)
		pthread_cond_wait(&c->yield_cond, &c->yield_lock);
	atomic_fetch_sub(&c->yielding, 1);
	pthread_mutex_unlock(&c->yield_lock);
	atomic_fetch_add_explicit(&c->lock_yields, 1, memory_order_relaxed);
}

void catalog_stats_get(Catalog *c, CatalogStats *ret) {
	*ret = (CatalogStats) {
		.lock_waiting = atomic_load(&c->lock_waiting),
		.lock_waits = atomic_load(&c->lock_waits),
		.lock_yields = atomic_load(&c->lock_yields),
		.vacuum_calls = atomic_load(&c->vacuum_calls),
		.vacuum_steps = atomic_load(&c->vacuum_steps),
		.vacuum_pages = atomic_load(&c->vacuum_pages),
		.vacuum_cut = atomic_load(&c->vacuum_cut),
		.vacuum_left = atomic_load(&c->vacuum_left),
		.reserve_want = c->reserve_want,
		.reserve_held = atomic_load(&c->reserve_held),
		.reserve_releases = atomic_load(&c->reserve_releases),
	};
}

void catalog_vacuum_budget_set(Catalog *c, uint64_t step_ns, uint64_t call_ns) {
	lock(c);
	c->vacuum_step_ns = step_ns;
	c->vacuum_call_ns = call_ns;
	unlock(c);
}

/* Returns the cached statement, reset and unbound; NULL only on prepare failure. */
static sqlite3_stmt *stmt(Catalog *c, StatementId id) {
	sqlite3_stmt *s = c->stmts[id];
	if (!s) {
		if (sqlite3_prepare_v3(c->db, statement_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK)
			return NULL;
		c->stmts[id] = s;
	}
	return s;
}

/* Under lock, or before anyone else has the catalog.  Invariant 7. */
static void reserve_fill(Catalog *c) {
	if (c->reserve_fd < 0 || atomic_load(&c->reserve_held) >= c->reserve_want)
		return;
	int e = posix_fallocate(c->reserve_fd, 0, (off_t) c->reserve_want);
	if (e == 0)
		atomic_store(&c->reserve_held, c->reserve_want);
	else if (ftruncate(c->reserve_fd, 0) >= 0)
		atomic_store(&c->reserve_held, 0); /* a full disk may have left part of it: keep the count exact */
}

/* Under lock: the room back once the disk has it twice over, so that a writer just given room keeps it. */
static void reserve_refill(Catalog *c) {
	struct statvfs sv;
	if (c->reserve_fd < 0 || atomic_load(&c->reserve_held) >= c->reserve_want)
		return;
	int64_t now = clock_ns(CLOCK_MONOTONIC);
	if (now < c->reserve_refill_ns)
		return;
	c->reserve_refill_ns = now + CATALOG_RESERVE_REFILL_NS;
	if (fstatvfs(c->reserve_fd, &sv) >= 0 && (uint64_t) sv.f_bavail * sv.f_frsize >= 2 * c->reserve_want)
		reserve_fill(c);
}

/* Under lock.  Whether there was a reserve to give back. */
static bool reserve_release(Catalog *c) {
	if (c->reserve_fd < 0 || atomic_load(&c->reserve_held) == 0 || ftruncate(c->reserve_fd, 0) < 0)
		return false;
	atomic_store(&c->reserve_held, 0);
	c->reserve_refill_ns = clock_ns(CLOCK_MONOTONIC) + CATALOG_RESERVE_REFILL_NS;
	atomic_fetch_add_explicit(&c->reserve_releases, 1, memory_order_relaxed);
	return true;
}

/* Under lock, before a transaction.  Invariant 7. */
static void reserve_release_if_full(Catalog *c) {
	struct statvfs sv;
	if (c->reserve_fd >= 0 && atomic_load(&c->reserve_held) > 0 && fstatvfs(c->reserve_fd, &sv) >= 0 &&
	    (uint64_t) sv.f_bavail * sv.f_frsize < c->reserve_want)
		(void) reserve_release(c);
}

/* Whether the reserve is given back (invariant 7); needs no lock (reserve_fd and reserve_want are set at open). */
static bool reserve_short(Catalog *c) {
	return c->reserve_fd >= 0 && atomic_load(&c->reserve_held) < c->reserve_want;
}

bool catalog_reserve_given_back(Catalog *c) {
	return reserve_short(c);
}

bool catalog_out_of_room(Catalog *c) {
	lock(c);
	/* Room may have come back with no commit since to take the reserve again: those who ask wait for it. */
	reserve_refill(c);
	bool r = reserve_short(c);
	unlock(c);
	return r;
}

/* Opens (or makes) the reserve beside the database at path, and fills it.  Invariant 7. */
static void reserve_open(Catalog *c, const char *path) {
	_cleanup_free_ char *name = NULL;
	struct statvfs sv;
	struct stat st;

	if (asprintf(&name, "%s-reserve", path) < 0) {
		name = NULL;
		return;
	}
	c->reserve_fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (c->reserve_fd < 0 || fstatvfs(c->reserve_fd, &sv) < 0 || fstat(c->reserve_fd, &st) < 0)
		return;
	uint64_t share = (uint64_t) sv.f_blocks * sv.f_frsize / CATALOG_RESERVE_SHARE;
	c->reserve_want = MIN(CATALOG_RESERVE_MAX, share) & ~UINT64_C(4095);
	atomic_store(&c->reserve_held, MIN((uint64_t) st.st_blocks * 512, c->reserve_want));
	reserve_fill(c);
}

/* Runs a statement that returns no rows; the statement is reset afterwards. */
static int step_done(Catalog *c, sqlite3_stmt *s) {
	bool in_transaction = !sqlite3_get_autocommit(c->db);
	int rc = sqlite3_step(s);
	/*
	 * The disk is full (invariant 7).  Once more with the reserve's room,
	 * unless SQLite undid more than this statement: then the caller's
	 * transaction is gone, and this statement alone must not commit.
	 */
	if ((rc & 0xff) == SQLITE_FULL && in_transaction == !sqlite3_get_autocommit(c->db) && reserve_release(c)) {
		sqlite3_reset(s);
		rc = sqlite3_step(s);
	}
	int r = rc == SQLITE_DONE ? 0 : catalog_result(rc);
	if (rc == SQLITE_DONE && sqlite3_changes(c->db) > 0)
		c->commits++;
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return r;
}

static void finish(sqlite3_stmt *s) {
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
}

static int recent_rows_get(Catalog *c, uint64_t *ret);
static int frozen_rows_get(Catalog *c, uint64_t *ret);

/* The open transaction committed: its changes to the recent and frozen tables' rows count. */
static void rows_commit(Catalog *c) {
	if (c->recent_rows != UINT64_MAX)
		c->recent_rows += (uint64_t) c->recent_delta;
	if (c->frozen_rows != UINT64_MAX)
		c->frozen_rows += (uint64_t) c->frozen_delta;
	c->recent_delta = c->frozen_delta = 0;
}

/* It rolled back. */
static void rows_discard(Catalog *c) {
	c->recent_delta = c->frozen_delta = 0;
}

/* It ended in a way that leaves what was committed unsure: count again when needed. */
static void rows_forget(Catalog *c) {
	c->recent_rows = c->frozen_rows = UINT64_MAX;
	c->recent_delta = c->frozen_delta = 0;
}

/* A transaction begins: changes counted outside any (none should be) make the counts unsure. */
static void rows_begin(Catalog *c) {
	if (c->recent_delta != 0 || c->frozen_delta != 0)
		rows_forget(c);
}

static int bind_name(sqlite3_stmt *s, int col, const char *name) {
	return sqlite3_bind_blob(s, col, name, (int) strlen(name), SQLITE_STATIC);
}

static int exec(Catalog *c, const char *sql) {
	return catalog_result(sqlite3_exec(c->db, sql, NULL, NULL, NULL));
}

static int schema_version(Catalog *c, int *ret) {
	sqlite3_stmt *s;
	int rc = sqlite3_prepare_v2(c->db, "PRAGMA user_version", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return catalog_result(rc);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*ret = sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	return rc == SQLITE_ROW ? 0 : catalog_result(rc);
}

/* Upgrades from version `from` to the current one in one transaction. */
static int schema_upgrade(Catalog *c, int from, uid_t root_uid, gid_t root_gid) {
	char sql[128];
	int r;

	r = exec(c, "BEGIN IMMEDIATE");
	if (r < 0)
		return r;
	for (int v = from; v < CATALOG_SCHEMA_VERSION; v++) {
		r = exec(c, schema_steps[v]);
		if (r < 0)
			goto rollback;
	}
	if (from == 0) {
		/* The root directory; AUTOINCREMENT hands it inode number 1. */
		int64_t t = clock_ns(CLOCK_REALTIME);
		CatalogInode root = {
			.parent = CATALOG_ROOT_INO,
			.mode = S_IFDIR | 0755,
			.uid = root_uid,
			.gid = root_gid,
			.nlink = 2,
			.atime_ns = t,
			.mtime_ns = t,
			.ctime_ns = t,
		};
		uint64_t ino = 0;
		r = catalog_inode_create(c, &root, NULL, &ino);
		if (r < 0)
			goto rollback;
		if (ino != CATALOG_ROOT_INO) {
			r = -EUCLEAN;
			goto rollback;
		}
	}
	/* PRAGMA takes no bound parameters; the number is ours, not user data. */
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", CATALOG_SCHEMA_VERSION);
	r = exec(c, sql);
	if (r < 0)
		goto rollback;
	return exec(c, "COMMIT");

rollback:
	(void) exec(c, "ROLLBACK");
	return r;
}

int catalog_open(const char *path, uid_t root_uid, gid_t root_gid, Catalog **ret) {
	_cleanup_free_ Catalog *c = NULL;
	pthread_mutexattr_t attr;
	int version = 0, r;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->recent_rows = c->frozen_rows = UINT64_MAX;
	c->reserve_fd = -1;
	c->merging = -1;
	c->merge_recent = UINT64_MAX;
	c->vacuum_step_ns = CATALOG_VACUUM_BUDGET_NS;
	c->vacuum_call_ns = CATALOG_VACUUM_CALL_NS;
	if (asprintf(&c->wal_path, "%s-wal", path) < 0) {
		c->wal_path = NULL;
		return -ENOMEM;
	}
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&c->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	pthread_mutex_init(&c->sync_lock, NULL);
	pthread_mutex_init(&c->ckpt_run, NULL);
	pthread_mutex_init(&c->ckpt_lock, NULL);
	pthread_cond_init(&c->ckpt_cond, NULL);
	pthread_mutex_init(&c->yield_lock, NULL);
	pthread_cond_init(&c->yield_cond, NULL);

	int rc = sqlite3_open_v2(path, &c->db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
				 NULL);
	if (rc != SQLITE_OK) {
		r = catalog_result(rc);
		goto fail;
	}
	sqlite3_extended_result_codes(c->db, 1);
	(void) sqlite3_db_config(c->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
	(void) sqlite3_busy_timeout(c->db, 5000);

	/* A damaged or foreign file fails here, before we write anything to it. */
	r = schema_version(c, &version);
	if (r < 0)
		goto fail;
	if (version > CATALOG_SCHEMA_VERSION || version < 0) {
		r = -EPROTONOSUPPORT;
		goto fail;
	}

	/*
	 * WAL with synchronous=NORMAL: a commit is safe against a crash of the
	 * daemon as soon as it returns; catalog_sync() adds power-loss safety
	 * when the filesystem user asks for it (fsync).
	 */
	/*
	 * A new catalog gives freed pages back to the filesystem (at each
	 * checkpoint, catalog_checkpoint()): a migration adds the target's chunk
	 * rows before the source's go, and without it the file would keep that
	 * high-water mark for good.  Only possible before the first table; an
	 * older catalog keeps its mode (changing it means rewriting the file).
	 */
	r = version == 0 ? exec(c, "PRAGMA auto_vacuum = INCREMENTAL") : 0;
	if (r >= 0)
		r = exec(c, "PRAGMA journal_mode = WAL");
	if (r >= 0)
		r = exec(c, "PRAGMA synchronous = NORMAL");
	/*
	 * 16 MiB instead of SQLite's 2: the recent table of the digest index
	 * (CATALOG_INDEX_RECENT_MAX ids, about 6 MiB) stays in it, so a new
	 * chunk's insert neither reads its page back nor spills it to the
	 * WAL before the commit (bench/README.md, index-scale).
	 */
	if (r >= 0)
		r = exec(c, "PRAGMA cache_size = -16384");
	if (r >= 0)
		r = exec(c, "PRAGMA foreign_keys = ON");
	if (r < 0)
		goto fail;

	if (version < CATALOG_SCHEMA_VERSION) {
		r = schema_upgrade(c, version, root_uid, root_gid);
		if (r < 0)
			goto fail;
	}
	reserve_open(c, path);
	/* Counted once here, where nobody waits for the lock yet; kept in memory from now on. */
	r = recent_rows_get(c, &(uint64_t) { 0 });
	if (r >= 0)
		r = frozen_rows_get(c, &(uint64_t) { 0 });
	if (r < 0)
		goto fail;

	*ret = TAKE_PTR(c);
	return 0;

fail:
	catalog_close(TAKE_PTR(c));
	return r;
}

Catalog *catalog_close(Catalog *c) {
	if (!c)
		return NULL;
	if (c->ckpt_db) {
		pthread_mutex_lock(&c->ckpt_lock);
		c->ckpt_stop = true;
		pthread_cond_signal(&c->ckpt_cond);
		pthread_mutex_unlock(&c->ckpt_lock);
		pthread_join(c->ckpt_thread, NULL);
		/* Before the writer's: the last connection to close checkpoints the WAL into the file and removes it. */
		sqlite3_close(c->ckpt_db);
	}
	for (size_t i = 0; i < _STMT_MAX; i++)
		sqlite3_finalize(c->stmts[i]);
	if (c->db)
		sqlite3_close(c->db);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->sync_lock);
	pthread_mutex_destroy(&c->ckpt_run);
	pthread_mutex_destroy(&c->ckpt_lock);
	pthread_cond_destroy(&c->ckpt_cond);
	pthread_mutex_destroy(&c->yield_lock);
	pthread_cond_destroy(&c->yield_cond);
	if (c->reserve_fd >= 0)
		close(c->reserve_fd);
	free(c->wal_path);
	free(c);
	return NULL;
}

int catalog_sync(Catalog *c) {
	uint64_t target;

	lock(c);
	target = c->commits;
	unlock(c);

	pthread_mutex_lock(&c->sync_lock);
	if (c->synced >= target) {
		pthread_mutex_unlock(&c->sync_lock);
		return 0;
	}
	/*
	 * SQLite has no call to sync the WAL on demand; fdatasync of any
	 * descriptor of the file flushes its dirty pages, which hold every
	 * committed frame.  Checkpointed frames were synced by the checkpoint.
	 */
	int r = 0, fd = open(c->wal_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			r = -errno;
	} else {
		if (fdatasync(fd) < 0)
			r = -errno;
		close(fd);
	}
	if (r == 0)
		c->synced = target;
	pthread_mutex_unlock(&c->sync_lock);
	return r;
}

/*
 * After each commit, under the lock, with the WAL's frames: the
 * checkpointer is woken past CATALOG_WAL_CHECKPOINT_PAGES; past
 * CATALOG_WAL_CHECKPOINT_MAX (the checkpointer cannot keep up, or a reader
 * holds old frames) the commit checkpoints as SQLite's own hook would, so
 * the WAL stays bounded whatever the checkpointer does.
 */
static int wal_hook(void *userdata, sqlite3 *db, const char *name, int frames) {
	Catalog *c = userdata;
	bool short_of_room = reserve_short(c);

	if (frames >= (short_of_room ? CATALOG_WAL_CHECKPOINT_MAX_SHORT : CATALOG_WAL_CHECKPOINT_MAX)) {
		(void) sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		return SQLITE_OK;
	}
	if (frames >= (short_of_room ? CATALOG_WAL_CHECKPOINT_PAGES_SHORT : CATALOG_WAL_CHECKPOINT_PAGES)) {
		pthread_mutex_lock(&c->ckpt_lock);
		c->ckpt_wanted = true;
		pthread_cond_signal(&c->ckpt_cond);
		pthread_mutex_unlock(&c->ckpt_lock);
	}
	return SQLITE_OK;
}

/*
 * A passive checkpoint copies what is committed into the database file
 * and syncs it (synchronous = NORMAL, as the writer's), beside the writer:
 * it takes neither the catalog lock nor SQLite's write lock.  Once all of
 * the WAL is copied, the writer's next transaction starts it over.
 */
static void *checkpointer_main(void *userdata) {
	Catalog *c = userdata;

	pthread_mutex_lock(&c->ckpt_lock);
	for (;;) {
		if (c->ckpt_stop)
			break;
		if (!c->ckpt_wanted) {
			pthread_cond_wait(&c->ckpt_cond, &c->ckpt_lock);
			continue;
		}
		c->ckpt_wanted = false;
		pthread_mutex_unlock(&c->ckpt_lock);
		pthread_mutex_lock(&c->ckpt_run);
		(void) sqlite3_wal_checkpoint_v2(c->ckpt_db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		pthread_mutex_unlock(&c->ckpt_run);
		pthread_mutex_lock(&c->ckpt_lock);
	}
	pthread_mutex_unlock(&c->ckpt_lock);
	return NULL;
}

int catalog_checkpointer_start(Catalog *c) {
	sqlite3 *db = NULL;
	int r;

	if (c->reader)
		return -EINVAL;
	if (c->ckpt_db)
		return 0;
	lock(c);
	const char *path = sqlite3_db_filename(c->db, "main");
	_cleanup_free_ char *copy = path && *path ? strdup(path) : NULL;
	unlock(c);
	if (!copy)
		return path && *path ? -ENOMEM : -EINVAL;
	r = catalog_result(sqlite3_open_v2(copy, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
					   NULL));
	if (r >= 0) {
		/* Per connection: the checkpoint syncs the database file, so fsync still means durable. */
		r = catalog_result(sqlite3_exec(db, "PRAGMA synchronous = NORMAL", NULL, NULL, NULL));
	}
	if (r < 0) {
		sqlite3_close(db);
		return r;
	}
	c->ckpt_db = db;
	c->ckpt_stop = c->ckpt_wanted = false;
	r = -pthread_create(&c->ckpt_thread, NULL, checkpointer_main, c);
	if (r < 0) {
		c->ckpt_db = NULL;
		sqlite3_close(db);
		return r;
	}
	/* Replaces SQLite's automatic checkpoint, which is itself a WAL hook. */
	lock(c);
	sqlite3_wal_hook(c->db, wal_hook, c);
	unlock(c);
	return 0;
}

/*
 * One step of giving free pages back: each moves pages from the end of
 * the file into free ones, a page and its parent read and written each,
 * all from the disk once the catalog outgrew the page cache; so a step
 * stops after CATALOG_VACUUM_BUDGET_NS under the lock.  1 if free pages
 * are left, 0, or an error.
 */
static int run_stmt(Catalog *c, StatementId id) {
	sqlite3_stmt *s = stmt(c, id);
	return s ? step_done(c, s) : catalog_result(sqlite3_errcode(c->db));
}

/* Runs a statement whose one row holds one count (a pragma, a count(*)). */
static int count_get(Catalog *c, StatementId id, uint64_t *ret) {
	sqlite3_stmt *s = stmt(c, id);
	if (!s)
		return catalog_result(sqlite3_errcode(c->db));
	int rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*ret = (uint64_t) sqlite3_column_int64(s, 0);
	finish(s);
	return rc == SQLITE_ROW ? 0 : catalog_result(rc);
}

static int vacuum_step(Catalog *c, uint64_t budget_ns, uint64_t *ret_left) {
	int64_t deadline = clock_ns(CLOCK_MONOTONIC) + (int64_t) MIN(budget_ns, (uint64_t) INT64_MAX / 2);
	uint64_t left = 0;

	int r = count_get(c, STMT_FREELIST_COUNT, &left);
	*ret_left = left;
	if (r < 0 || left == 0)
		return r;
	uint64_t first = left, before = left;
	r = exec(c, "BEGIN IMMEDIATE");
	while (r >= 0) {
		before = left;
		r = run_stmt(c, STMT_VACUUM_STEP);
		if (r >= 0)
			r = count_get(c, STMT_FREELIST_COUNT, &left);
		/* Without auto_vacuum (a catalog older than it) the pages stay free: nothing to step through. */
		if (r < 0 || left == 0 || left >= before || clock_ns(CLOCK_MONOTONIC) >= deadline)
			break;
	}
	if (r >= 0) {
		r = exec(c, "COMMIT");
		if (r >= 0) {
			c->commits++;
			*ret_left = left;
			atomic_fetch_add_explicit(&c->vacuum_steps, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&c->vacuum_pages, first - left, memory_order_relaxed);
		}
	}
	if (r < 0 && !sqlite3_get_autocommit(c->db))
		(void) exec(c, "ROLLBACK");
	return r < 0 ? r : left > 0 && left < before;
}

int catalog_checkpoint(Catalog *c) {
	uint64_t target;
	int r;

	/*
	 * Free pages back to the filesystem first (a no-op without auto_vacuum),
	 * so the checkpoint carries them.  After a merge of the whole index
	 * there are millions (1.2M pages, about 30 minutes of steps at 100M
	 * ids): a call gives back vacuum_call_ns of them, the next calls the
	 * rest.  After each step the threads that waited for the lock have it
	 * first (unlock_yield()), and it stays free for as long as the step
	 * held it, for those that come meanwhile.
	 */
	int64_t held = 0, call_ns;
	uint64_t left = 0;
	do {
		int64_t t = clock_ns(CLOCK_MONOTONIC);
		lock(c);
		call_ns = (int64_t) MIN(c->vacuum_call_ns, (uint64_t) INT64_MAX);
		r = sqlite3_get_autocommit(c->db) ? vacuum_step(c, c->vacuum_step_ns, &left) : -EBUSY;
		unlock_yield(c);
		t = clock_ns(CLOCK_MONOTONIC) - t;
		held += t;
		if (r > 0 && held < call_ns)
			(void) nanosleep(&(struct timespec) { .tv_sec = t / 1000000000, .tv_nsec = t % 1000000000 }, NULL);
	} while (r > 0 && held < call_ns);
	if (r < 0)
		return r;
	atomic_fetch_add_explicit(&c->vacuum_calls, 1, memory_order_relaxed);
	atomic_store_explicit(&c->vacuum_left, left, memory_order_relaxed);
	if (r > 0)
		atomic_fetch_add_explicit(&c->vacuum_cut, 1, memory_order_relaxed);
	/* Most of the WAL beside the writer; under the lock only what was committed meanwhile, and the cut. */
	if (c->ckpt_db) {
		pthread_mutex_lock(&c->ckpt_run);
		(void) sqlite3_wal_checkpoint_v2(c->ckpt_db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		pthread_mutex_unlock(&c->ckpt_run);
	}
	lock(c);
	if (!sqlite3_get_autocommit(c->db)) {
		unlock(c);
		return -EBUSY;
	}
	target = c->commits;
	/* Not beside the checkpointer's: SQLite refuses a second checkpoint at once (SQLITE_BUSY). */
	pthread_mutex_lock(&c->ckpt_run);
	r = catalog_result(sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL));
	pthread_mutex_unlock(&c->ckpt_run);
	unlock(c);
	if (r < 0)
		return r;

	/* synchronous = NORMAL syncs the database file at the end of a checkpoint. */
	pthread_mutex_lock(&c->sync_lock);
	if (c->synced < target)
		c->synced = target;
	pthread_mutex_unlock(&c->sync_lock);
	return 0;
}

int catalog_begin(Catalog *c) {
	lock(c);
	reserve_release_if_full(c);
	sqlite3_stmt *s = stmt(c, STMT_BEGIN);
	int r = s ? step_done(c, s) : catalog_result(sqlite3_errcode(c->db));
	if (r < 0)
		unlock(c);
	else
		rows_begin(c);
	return r;
}

int catalog_commit(Catalog *c) {
	sqlite3_stmt *s = stmt(c, STMT_COMMIT);
	int r = s ? step_done(c, s) : catalog_result(sqlite3_errcode(c->db));
	if (r < 0) {
		/* A failed COMMIT leaves the transaction open: undo it so the lock can go. */
		if (!sqlite3_get_autocommit(c->db))
			(void) exec(c, "ROLLBACK");
		rows_forget(c);
	} else {
		c->commits++;
		rows_commit(c);
		reserve_refill(c);
	}
	unlock(c);
	return r;
}

void catalog_rollback(Catalog *c) {
	sqlite3_stmt *s = stmt(c, STMT_ROLLBACK);
	if (s && !sqlite3_get_autocommit(c->db))
		(void) step_done(c, s);
	if (sqlite3_get_autocommit(c->db))
		rows_discard(c);
	else
		rows_forget(c);
	unlock(c);
}

static void inode_from_row(sqlite3_stmt *s, uint64_t ino, CatalogInode *ret) {
	*ret = (CatalogInode) {
		.ino = ino,
		.parent = (uint64_t) sqlite3_column_int64(s, 0),
		.mode = (uint32_t) sqlite3_column_int64(s, 1),
		.uid = (uint32_t) sqlite3_column_int64(s, 2),
		.gid = (uint32_t) sqlite3_column_int64(s, 3),
		.nlink = (uint32_t) sqlite3_column_int64(s, 4),
		.rdev = (uint64_t) sqlite3_column_int64(s, 5),
		.size = (uint64_t) sqlite3_column_int64(s, 6),
		.atime_ns = sqlite3_column_int64(s, 7),
		.mtime_ns = sqlite3_column_int64(s, 8),
		.ctime_ns = sqlite3_column_int64(s, 9),
		.state = (CatalogFileState) sqlite3_column_int(s, 10),
		.file_class = (uint32_t) sqlite3_column_int64(s, 11),
		.tier = (uint32_t) sqlite3_column_int64(s, 12),
		.stored = (uint64_t) sqlite3_column_int64(s, 13),
	};
}

int catalog_inode_get(Catalog *c, uint64_t ino, CatalogInode *ret) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_INODE_GET);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) ino);
	int rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		inode_from_row(s, ino, ret);
		r = ret->state < _CATALOG_FILE_STATE_MAX ? 0 : -EUCLEAN;
	} else
		r = rc == SQLITE_DONE ? -ENOENT : catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

static void bind_inode_fields(sqlite3_stmt *s, const CatalogInode *in) {
	sqlite3_bind_int64(s, 1, (sqlite3_int64) in->parent);
	sqlite3_bind_int64(s, 2, in->mode);
	sqlite3_bind_int64(s, 3, in->uid);
	sqlite3_bind_int64(s, 4, in->gid);
	sqlite3_bind_int64(s, 5, in->nlink);
	sqlite3_bind_int64(s, 6, (sqlite3_int64) in->rdev);
	sqlite3_bind_int64(s, 7, (sqlite3_int64) in->size);
	sqlite3_bind_int64(s, 8, in->atime_ns);
	sqlite3_bind_int64(s, 9, in->mtime_ns);
	sqlite3_bind_int64(s, 10, in->ctime_ns);
	sqlite3_bind_int(s, 11, in->state);
	sqlite3_bind_int64(s, 12, in->file_class);
	sqlite3_bind_int64(s, 13, in->tier);
	sqlite3_bind_int64(s, 14, (sqlite3_int64) in->stored);
}

int catalog_inode_create(Catalog *c, const CatalogInode *in, const char *symlink_target, uint64_t *ret_ino) {
	int r;

	if (symlink_target && strlen(symlink_target) > CATALOG_SYMLINK_MAX)
		return -ENAMETOOLONG;
	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_INODE_CREATE);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	bind_inode_fields(s, in);
	if (symlink_target)
		sqlite3_bind_blob(s, 15, symlink_target, (int) strlen(symlink_target), SQLITE_STATIC);
	r = step_done(c, s);
	if (r >= 0)
		*ret_ino = (uint64_t) sqlite3_last_insert_rowid(c->db);
out:
	unlock(c);
	return r;
}

int catalog_inode_update(Catalog *c, const CatalogInode *in) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_INODE_UPDATE);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	bind_inode_fields(s, in);
	sqlite3_bind_int64(s, 15, (sqlite3_int64) in->ino);
	r = step_done(c, s);
	if (r >= 0 && sqlite3_changes(c->db) == 0)
		r = -ENOENT;
out:
	unlock(c);
	return r;
}

static int run_ino(Catalog *c, StatementId id, uint64_t ino) {
	sqlite3_stmt *s = stmt(c, id);
	if (!s)
		return catalog_result(sqlite3_errcode(c->db));
	sqlite3_bind_int64(s, 1, (sqlite3_int64) ino);
	return step_done(c, s);
}

int catalog_inode_delete(Catalog *c, uint64_t ino) {
	int r;

	lock(c);
	r = run_ino(c, STMT_INODE_XATTRS_DELETE, ino);
	if (r >= 0)
		r = run_ino(c, STMT_INODE_ARCHIVELOG_DELETE, ino);
	if (r >= 0)
		r = run_ino(c, STMT_INODE_PIN_DELETE, ino);
	if (r >= 0)
		r = run_ino(c, STMT_INODE_DELETE, ino);
	unlock(c);
	return r;
}

/* Runs a one-column query keyed by ino; 1 if it returned a row, 0 if not. */
static int query_ino_any(Catalog *c, StatementId id, uint64_t ino) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, id);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) ino);
	int rc = sqlite3_step(s);
	r = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_inode_exists(Catalog *c, uint64_t ino) {
	return query_ino_any(c, STMT_INODE_EXISTS, ino);
}

int catalog_dir_is_empty(Catalog *c, uint64_t dir) {
	int r = query_ino_any(c, STMT_DIR_ANY, dir);
	return r < 0 ? r : !r;
}

int catalog_xattr_any(Catalog *c, uint64_t ino) {
	return query_ino_any(c, STMT_XATTR_ANY, ino);
}

int catalog_symlink_get(Catalog *c, uint64_t ino, char *buf, size_t size) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_SYMLINK_GET);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) ino);
	int rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		const void *blob = sqlite3_column_blob(s, 0);
		size_t n = (size_t) sqlite3_column_bytes(s, 0);
		if (!blob)
			r = -EINVAL; /* not a symlink */
		else if (n + 1 > size)
			r = -ERANGE;
		else {
			memcpy(buf, blob, n);
			buf[n] = 0;
			r = (int) n;
		}
	} else
		r = rc == SQLITE_DONE ? -ENOENT : catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

static int inos_foreach(Catalog *c, StatementId id, int64_t key, int (*cb)(uint64_t ino, void *userdata),
			void *userdata) {
	int r = 0, rc;

	lock(c);
	sqlite3_stmt *s = stmt(c, id);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	if (sqlite3_bind_parameter_count(s) > 0)
		sqlite3_bind_int64(s, 1, key);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		r = cb((uint64_t) sqlite3_column_int64(s, 0), userdata);
		if (r < 0)
			break;
	}
	if (r >= 0 && rc != SQLITE_DONE)
		r = catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_orphans_foreach(Catalog *c, int (*cb)(uint64_t ino, void *userdata), void *userdata) {
	return inos_foreach(c, STMT_ORPHANS, 0, cb, userdata);
}

int catalog_pin_set(Catalog *c, uint64_t ino, bool pinned) {
	lock(c);
	int r = run_ino(c, pinned ? STMT_PIN_SET : STMT_INODE_PIN_DELETE, ino);
	unlock(c);
	return r;
}

int catalog_pinned(Catalog *c, uint64_t ino) {
	return query_ino_any(c, STMT_PIN_GET, ino);
}

int catalog_archivelog_set(Catalog *c, uint64_t ino, const CatalogArchivelog *a) {
	int r;

	if (!memchr(a->db_name, '\0', sizeof(a->db_name)))
		return -EINVAL;
	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_ARCHIVELOG_SET);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) ino);
	sqlite3_bind_int64(s, 2, a->dbid);
	sqlite3_bind_blob(s, 3, a->db_name, (int) strlen(a->db_name), SQLITE_STATIC);
	sqlite3_bind_int64(s, 4, a->resetlogs_id);
	sqlite3_bind_int64(s, 5, a->thread);
	sqlite3_bind_int64(s, 6, a->sequence);
	/* SCNs are 48 bits: they fit SQLite's signed 64-bit integers as they are. */
	sqlite3_bind_int64(s, 7, (sqlite3_int64) a->low_scn);
	sqlite3_bind_int64(s, 8, (sqlite3_int64) a->next_scn);
	sqlite3_bind_int64(s, 9, a->low_time);
	sqlite3_bind_int64(s, 10, a->next_time);
	r = step_done(c, s);
out:
	unlock(c);
	return r;
}

/* Fills *ret from a row of STMT_ARCHIVELOG_GET's columns; -EUCLEAN if the row is not one this module wrote. */
static int archivelog_from_row(sqlite3_stmt *s, uint64_t *ret_ino, CatalogArchivelog *ret) {
	int n = sqlite3_column_bytes(s, 2);
	const void *name = sqlite3_column_blob(s, 2);
	sqlite3_int64 v[] = {
		sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 3), sqlite3_column_int64(s, 4),
		sqlite3_column_int64(s, 5), sqlite3_column_int64(s, 6), sqlite3_column_int64(s, 7),
	};

	if (n < 0 || (size_t) n >= sizeof(ret->db_name) || (n > 0 && !name) || v[0] < 0 || v[0] > UINT32_MAX ||
	    v[1] < 0 || v[1] > UINT32_MAX || v[2] < 0 || v[2] > UINT16_MAX || v[3] < 0 || v[3] > UINT32_MAX ||
	    v[4] < 0 || v[5] < 0)
		return -EUCLEAN;
	*ret = (CatalogArchivelog) {
		.dbid = (uint32_t) v[0],
		.resetlogs_id = (uint32_t) v[1],
		.thread = (uint16_t) v[2],
		.sequence = (uint32_t) v[3],
		.low_scn = (uint64_t) v[4],
		.next_scn = (uint64_t) v[5],
		.low_time = sqlite3_column_int64(s, 8),
		.next_time = sqlite3_column_int64(s, 9),
	};
	if (n > 0)
		memcpy(ret->db_name, name, (size_t) n);
	*ret_ino = (uint64_t) sqlite3_column_int64(s, 0);
	return 0;
}

int catalog_archivelog_get(Catalog *c, uint64_t ino, CatalogArchivelog *ret) {
	uint64_t found;
	int r, rc;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_ARCHIVELOG_GET);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) ino);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		r = archivelog_from_row(s, &found, ret);
	else
		r = rc == SQLITE_DONE ? -ENOENT : catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_archivelogs_foreach(Catalog *c, uint32_t dbid, uint16_t thread, uint32_t first, uint32_t last,
				int (*cb)(uint64_t ino, const CatalogArchivelog *a, void *userdata), void *userdata) {
	int r = 0, rc;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_ARCHIVELOGS);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, thread);
	sqlite3_bind_int64(s, 2, first);
	sqlite3_bind_int64(s, 3, last);
	sqlite3_bind_int64(s, 4, dbid);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		CatalogArchivelog a;
		uint64_t ino;
		r = archivelog_from_row(s, &ino, &a);
		if (r >= 0)
			r = cb(ino, &a, userdata);
		if (r < 0)
			break;
	}
	if (r >= 0 && rc != SQLITE_DONE)
		r = catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_files_foreach_state(Catalog *c, CatalogFileState state, int (*cb)(uint64_t ino, void *userdata),
				void *userdata) {
	return inos_foreach(c, STMT_FILES_STATE, state, cb, userdata);
}

int catalog_dirent_lookup(Catalog *c, uint64_t parent, const char *name, uint64_t *ret_ino) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_DIRENT_LOOKUP);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) parent);
	bind_name(s, 2, name);
	int rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*ret_ino = (uint64_t) sqlite3_column_int64(s, 0);
		r = 0;
	} else
		r = rc == SQLITE_DONE ? -ENOENT : catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_dirent_add(Catalog *c, uint64_t parent, const char *name, uint64_t ino) {
	int r;

	if (strlen(name) > CATALOG_NAME_MAX)
		return -ENAMETOOLONG;
	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_DIRENT_ADD);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) parent);
	bind_name(s, 2, name);
	sqlite3_bind_int64(s, 3, (sqlite3_int64) ino);
	r = step_done(c, s);
out:
	unlock(c);
	return r;
}

int catalog_dirent_remove(Catalog *c, uint64_t parent, const char *name) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_DIRENT_REMOVE);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) parent);
	bind_name(s, 2, name);
	r = step_done(c, s);
	if (r >= 0 && sqlite3_changes(c->db) == 0)
		r = -ENOENT;
out:
	unlock(c);
	return r;
}

int catalog_dirent_retarget(Catalog *c, uint64_t parent, const char *name, uint64_t ino) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_DIRENT_RETARGET);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) ino);
	sqlite3_bind_int64(s, 2, (sqlite3_int64) parent);
	bind_name(s, 3, name);
	r = step_done(c, s);
	if (r >= 0 && sqlite3_changes(c->db) == 0)
		r = -ENOENT;
out:
	unlock(c);
	return r;
}

int catalog_dir_read(Catalog *c, uint64_t dir, uint64_t after, CatalogDirent *buf, size_t n) {
	int r = 0, rc;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_DIR_READ);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) dir);
	sqlite3_bind_int64(s, 2, (sqlite3_int64) after);
	sqlite3_bind_int64(s, 3, (sqlite3_int64) n);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		CatalogDirent *d = &buf[r];
		const void *name = sqlite3_column_blob(s, 3);
		size_t len = (size_t) sqlite3_column_bytes(s, 3);
		if (!name || len == 0 || len > CATALOG_NAME_MAX || memchr(name, 0, len) || memchr(name, '/', len)) {
			rc = SQLITE_CORRUPT;
			break;
		}
		d->cookie = (uint64_t) sqlite3_column_int64(s, 0);
		d->ino = (uint64_t) sqlite3_column_int64(s, 1);
		d->mode = (uint32_t) sqlite3_column_int64(s, 2);
		memcpy(d->name, name, len);
		d->name[len] = 0;
		r++;
	}
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		r = catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_xattr_get(Catalog *c, uint64_t ino, const char *name, void *buf, size_t size) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_XATTR_GET);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) ino);
	bind_name(s, 2, name);
	int rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		const void *v = sqlite3_column_blob(s, 0);
		size_t n = (size_t) sqlite3_column_bytes(s, 0);
		if (n > CATALOG_XATTR_VALUE_MAX)
			r = -EUCLEAN;
		else if (size == 0)
			r = (int) n;
		else if (n > size)
			r = -ERANGE;
		else {
			if (n)
				memcpy(buf, v, n);
			r = (int) n;
		}
	} else
		r = rc == SQLITE_DONE ? -ENODATA : catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_xattr_set(Catalog *c, uint64_t ino, const char *name, const void *value, size_t size, int flags) {
	sqlite3_stmt *s;
	int r;

	if (strlen(name) > CATALOG_XATTR_NAME_MAX)
		return -ERANGE;
	if (size > CATALOG_XATTR_VALUE_MAX)
		return -E2BIG;

	lock(c);
	if (flags & XATTR_REPLACE) {
		s = stmt(c, STMT_XATTR_UPDATE);
		if (!s)
			goto fail_prepare;
		/* An empty value must still be a non-NULL blob. */
		sqlite3_bind_blob(s, 1, size ? value : "", (int) size, SQLITE_STATIC);
		sqlite3_bind_int64(s, 2, (sqlite3_int64) ino);
		bind_name(s, 3, name);
		r = step_done(c, s);
		if (r >= 0 && sqlite3_changes(c->db) == 0)
			r = -ENODATA;
	} else {
		s = stmt(c, (flags & XATTR_CREATE) ? STMT_XATTR_INSERT : STMT_XATTR_UPSERT);
		if (!s)
			goto fail_prepare;
		sqlite3_bind_int64(s, 1, (sqlite3_int64) ino);
		bind_name(s, 2, name);
		sqlite3_bind_blob(s, 3, size ? value : "", (int) size, SQLITE_STATIC);
		r = step_done(c, s);
	}
	unlock(c);
	return r;

fail_prepare:
	r = catalog_result(sqlite3_errcode(c->db));
	unlock(c);
	return r;
}

int catalog_xattr_list(Catalog *c, uint64_t ino, char *buf, size_t size) {
	size_t total = 0;
	int r = 0, rc;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_XATTR_LIST);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) ino);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const void *name = sqlite3_column_blob(s, 0);
		size_t n = (size_t) sqlite3_column_bytes(s, 0);
		if (!name || n == 0 || n > CATALOG_XATTR_NAME_MAX || memchr(name, 0, n)) {
			rc = SQLITE_CORRUPT;
			break;
		}
		if (size > 0) {
			if (total + n + 1 > size) {
				r = -ERANGE;
				break;
			}
			memcpy(buf + total, name, n);
			buf[total + n] = 0;
		}
		total += n + 1;
		if (total > CATALOG_XATTR_LIST_MAX) {
			r = -E2BIG;
			break;
		}
	}
	if (r == 0)
		r = rc == SQLITE_DONE ? (int) total : catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_xattr_remove(Catalog *c, uint64_t ino, const char *name) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_XATTR_REMOVE);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) ino);
	bind_name(s, 2, name);
	r = step_done(c, s);
	if (r >= 0 && sqlite3_changes(c->db) == 0)
		r = -ENODATA;
out:
	unlock(c);
	return r;
}

int catalog_container_new(Catalog *c, uint32_t tier, uint64_t *ret_id) {
	return catalog_container_new_keyed(c, tier, NULL, ret_id);
}

int catalog_container_new_keyed(Catalog *c, uint32_t tier, const uint8_t *key_id, uint64_t *ret_id) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_CONTAINER_NEW);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, tier);
	if (key_id)
		sqlite3_bind_blob(s, 2, key_id, CATALOG_DIGEST_SIZE, SQLITE_STATIC);
	r = step_done(c, s);
	if (r >= 0)
		*ret_id = (uint64_t) sqlite3_last_insert_rowid(c->db);
out:
	unlock(c);
	return r;
}

static void container_from_row(sqlite3_stmt *s, int first, uint64_t id, CatalogContainer *ret) {
	*ret = (CatalogContainer) {
		.id = id,
		.tier = (uint32_t) sqlite3_column_int64(s, first),
		.size = (uint64_t) sqlite3_column_int64(s, first + 1),
		.live_bytes = (uint64_t) sqlite3_column_int64(s, first + 2),
		.full = sqlite3_column_int(s, first + 3) != 0,
	};
	if (sqlite3_column_bytes(s, first + 4) == CATALOG_DIGEST_SIZE) {
		ret->keyed = true;
		memcpy(ret->key_id, sqlite3_column_blob(s, first + 4), CATALOG_DIGEST_SIZE);
	}
}

int catalog_container_get(Catalog *c, uint64_t id, CatalogContainer *ret) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_CONTAINER_GET);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) id);
	int rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		container_from_row(s, 0, id, ret);
		r = 0;
	} else
		r = rc == SQLITE_DONE ? -ENOENT : catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_container_update(Catalog *c, const CatalogContainer *ct) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_CONTAINER_UPDATE);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) ct->size);
	sqlite3_bind_int(s, 2, ct->full);
	sqlite3_bind_int64(s, 3, (sqlite3_int64) ct->id);
	r = step_done(c, s);
	if (r >= 0 && sqlite3_changes(c->db) == 0)
		r = -ENOENT;
out:
	unlock(c);
	return r;
}

int catalog_container_delete(Catalog *c, uint64_t id) {
	lock(c);
	int r = run_ino(c, STMT_CONTAINER_DELETE, id);
	unlock(c);
	return r;
}

int catalog_container_foreign(Catalog *c, uint32_t tier, const char *host, uint64_t remote, uint64_t *ret_id) {
	size_t len = strlen(host);
	int r, rc;

	if (len == 0 || len > CATALOG_HOST_MAX || remote == 0 || remote > INT64_MAX)
		return -EINVAL;
	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_CONTAINER_FOREIGN_FIND);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, tier);
	bind_name(s, 2, host);
	sqlite3_bind_int64(s, 3, (sqlite3_int64) remote);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		*ret_id = (uint64_t) sqlite3_column_int64(s, 0);
		finish(s);
		r = 0;
		goto out;
	}
	finish(s);
	if (rc != SQLITE_DONE) {
		r = catalog_result(rc);
		goto out;
	}
	s = stmt(c, STMT_CONTAINER_FOREIGN_ADD);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, tier);
	bind_name(s, 2, host);
	sqlite3_bind_int64(s, 3, (sqlite3_int64) remote);
	r = step_done(c, s);
	if (r >= 0)
		*ret_id = (uint64_t) sqlite3_last_insert_rowid(c->db);
out:
	unlock(c);
	return r;
}

int catalog_containers_foreach_foreign(Catalog *c, uint32_t tier,
				       int (*cb)(uint64_t id, const char *host, uint64_t remote, void *userdata),
				       void *userdata) {
	int r = 0, rc;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_CONTAINERS_FOREIGN);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, tier);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		char host[CATALOG_HOST_MAX + 1];
		int n = sqlite3_column_bytes(s, 1);
		const void *p = sqlite3_column_blob(s, 1);
		if (n <= 0 || n > CATALOG_HOST_MAX || !p) {
			r = -EUCLEAN;
			break;
		}
		memcpy(host, p, (size_t) n);
		host[n] = 0;
		r = cb((uint64_t) sqlite3_column_int64(s, 0), host, (uint64_t) sqlite3_column_int64(s, 2), userdata);
		if (r < 0)
			break;
	}
	if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
		r = catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_containers_foreign_prune(Catalog *c, uint32_t tier, uint64_t *ret_deleted) {
	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_CONTAINERS_FOREIGN_PRUNE);
	int r = s ? 0 : catalog_result(sqlite3_errcode(c->db));
	if (r >= 0) {
		sqlite3_bind_int64(s, 1, tier);
		r = step_done(c, s);
		if (r >= 0 && ret_deleted)
			*ret_deleted = (uint64_t) sqlite3_changes(c->db);
	}
	unlock(c);
	return r;
}

int catalog_containers_foreach(Catalog *c, uint32_t tier, int (*cb)(const CatalogContainer *ct, void *userdata),
			       void *userdata) {
	int r = 0, rc;

	lock(c);
	sqlite3_stmt *s = stmt(c, tier == UINT32_MAX ? STMT_CONTAINERS_ALL : STMT_CONTAINERS_TIER);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	if (tier != UINT32_MAX)
		sqlite3_bind_int64(s, 1, tier);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		CatalogContainer ct;
		container_from_row(s, 1, (uint64_t) sqlite3_column_int64(s, 0), &ct);
		r = cb(&ct, userdata);
		if (r < 0)
			break;
	}
	if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
		r = catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

/* Columns: id, tier, digest, container, offset, frame_size, plain_size, refs, region_size, region_offset. */
static int chunk_from_row(sqlite3_stmt *s, CatalogChunk *ret) {
	const void *digest = sqlite3_column_blob(s, 2);
	if (!digest || sqlite3_column_bytes(s, 2) != CATALOG_DIGEST_SIZE)
		return -EUCLEAN;
	*ret = (CatalogChunk) {
		.id = (uint64_t) sqlite3_column_int64(s, 0),
		.tier = (uint32_t) sqlite3_column_int64(s, 1),
		.container = (uint64_t) sqlite3_column_int64(s, 3),
		.offset = (uint64_t) sqlite3_column_int64(s, 4),
		.frame_size = (uint32_t) sqlite3_column_int64(s, 5),
		.plain_size = (uint32_t) sqlite3_column_int64(s, 6),
		.refs = (uint64_t) sqlite3_column_int64(s, 7),
		.region_size = (uint32_t) sqlite3_column_int64(s, 8),
		.region_offset = (uint32_t) sqlite3_column_int64(s, 9),
	};
	memcpy(ret->digest, digest, CATALOG_DIGEST_SIZE);
	return 0;
}

/* Runs a chunk query expected to return at most one row. */
static int chunk_query_one(Catalog *c, sqlite3_stmt *s, CatalogChunk *ret) {
	int rc = sqlite3_step(s), r;
	if (rc == SQLITE_ROW)
		r = chunk_from_row(s, ret);
	else
		r = rc == SQLITE_DONE ? -ENOENT : catalog_result(rc);
	finish(s);
	return r;
}

/* The id the digest index maps (tier, digest) to: 0, -ENOENT, or an error.  Only the recent table if recent_only. */
static int index_find(Catalog *c, uint32_t tier, const uint8_t digest[CATALOG_DIGEST_SIZE], bool recent_only,
		      uint64_t *ret_id) {
	sqlite3_stmt *s = stmt(c, recent_only ? STMT_INDEX_RECENT_FIND : STMT_INDEX_FIND);
	if (!s)
		return catalog_result(sqlite3_errcode(c->db));
	sqlite3_bind_int64(s, 1, tier);
	sqlite3_bind_blob(s, 2, digest, CATALOG_DIGEST_SIZE, SQLITE_STATIC);
	int rc = sqlite3_step(s), r;
	if (rc == SQLITE_ROW) {
		*ret_id = (uint64_t) sqlite3_column_int64(s, 0);
		r = 0;
	} else
		r = rc == SQLITE_DONE ? -ENOENT : catalog_result(rc);
	finish(s);
	return r;
}

/* Takes (tier, digest) -> id out of the digest index, from whichever table holds it. */
static int index_remove(Catalog *c, uint32_t tier, const uint8_t digest[CATALOG_DIGEST_SIZE], uint64_t id) {
	/* A digest of the frozen table or of a run may be in the new run of a merge under way too (RUNS_REMOVE). */
	static const StatementId ids[] = { STMT_INDEX_RECENT_REMOVE, STMT_INDEX_FROZEN_REMOVE, STMT_INDEX_RUNS_REMOVE };
	for (size_t k = 0; k < ELEMENTSOF(ids); k++) {
		sqlite3_stmt *s = stmt(c, ids[k]);
		if (!s)
			return catalog_result(sqlite3_errcode(c->db));
		sqlite3_bind_int64(s, 1, tier);
		sqlite3_bind_blob(s, 2, digest, CATALOG_DIGEST_SIZE, SQLITE_STATIC);
		sqlite3_bind_int64(s, 3, (sqlite3_int64) id);
		int r = step_done(c, s);
		if (r < 0)
			return r;
		int64_t gone = sqlite3_changes(c->db);
		if (k == 0)
			c->recent_delta -= gone;
		else if (k == 1)
			c->frozen_delta -= gone;
		if (k == 0 && gone > 0)
			break;
	}
	return 0;
}

/*
 * A change of several rows outside a transaction gets one of its own,
 * whole or nothing.  Inside the caller's, a failure after the first write
 * leaves the transaction for the caller to roll back: a savepoint there
 * would copy every page it touches to a statement journal, as much as the
 * rest of a chunk insert costs (bench/README.md, index-scale).
 */
static int savepoint_begin(Catalog *c, bool *ret_own) {
	*ret_own = sqlite3_get_autocommit(c->db);
	if (!*ret_own)
		return 0;
	rows_begin(c);
	return run_stmt(c, STMT_SAVEPOINT);
}

static int savepoint_end(Catalog *c, bool own, int r) {
	if (!own)
		return r;
	if (r < 0)
		(void) run_stmt(c, STMT_SAVEPOINT_ROLLBACK);
	int q = run_stmt(c, STMT_SAVEPOINT_RELEASE);
	if (r < 0 && q >= 0)
		rows_discard(c);
	else if (q >= 0)
		rows_commit(c);
	else
		rows_forget(c);
	return r < 0 ? r : q;
}

int catalog_chunk_find(Catalog *c, uint32_t tier, const uint8_t digest[CATALOG_DIGEST_SIZE], CatalogChunk *ret) {
	uint64_t id = 0;
	int r;

	lock(c);
	r = index_find(c, tier, digest, false, &id);
	if (r >= 0) {
		r = catalog_chunk_get(c, id, ret);
		/* An index entry with no chunk row, or another chunk's, is damage. */
		if (r == -ENOENT || (r >= 0 && (ret->tier != tier || memcmp(ret->digest, digest, CATALOG_DIGEST_SIZE) != 0)))
			r = -EUCLEAN;
	}
	unlock(c);
	return r;
}

int catalog_chunk_get(Catalog *c, uint64_t id, CatalogChunk *ret) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_CHUNK_GET);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) id);
	r = chunk_query_one(c, s, ret);
out:
	unlock(c);
	return r;
}

/*
 * The widest step between two ids still read as one range: the rows
 * between them are stepped over, which costs less than a look-up of its own
 * only while they are few.
 */
#define CHUNK_RANGE_GAP_MAX 8u

/*
 * catalog_chunks_get() of ids[0, n), strictly ascending: one walk along the
 * table from the first to the last instead of a search from the root for
 * each (a restore looks up every chunk of a recipe segment, bench/README.md,
 * "Restore, phase 6").
 */
static void chunks_get_range(Catalog *c, const uint64_t *ids, size_t n, CatalogChunk *ret, int *ret_r) {
	size_t k = 0;
	int rc = SQLITE_ERROR;

	sqlite3_stmt *s = stmt(c, STMT_CHUNK_RANGE);
	if (s) {
		sqlite3_bind_int64(s, 1, (sqlite3_int64) ids[0]);
		sqlite3_bind_int64(s, 2, (sqlite3_int64) ids[n - 1]);
		while (k < n && (rc = sqlite3_step(s)) == SQLITE_ROW) {
			uint64_t id = (uint64_t) sqlite3_column_int64(s, 0);
			for (; k < n && ids[k] < id; k++)
				ret_r[k] = -ENOENT;
			if (k < n && ids[k] == id) {
				ret_r[k] = chunk_from_row(s, ret + k);
				k++;
			}
		}
		finish(s);
	}
	/* Past the last row: not there.  On an error, the ones not reached get it. */
	int r = !s ? catalog_result(sqlite3_errcode(c->db))
		: rc == SQLITE_ROW || rc == SQLITE_DONE ? -ENOENT : catalog_result(rc);
	for (; k < n; k++)
		ret_r[k] = r;
}

int catalog_chunks_get(Catalog *c, const uint64_t *ids, size_t n, CatalogChunk *ret, int *ret_r) {
	int r = 0;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_CHUNK_GET);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	/* One snapshot for all instead of one per statement: a reader's look-ups cost half as much (bench/README.md). */
	bool own = n > 1 && sqlite3_get_autocommit(c->db);
	if (own) {
		r = exec(c, "BEGIN");
		if (r < 0)
			goto out;
	}
	for (size_t i = 0, j; i < n; i = j) {
		/* A run of ids rising by small steps (a file's new chunks, in the order it sealed them). */
		for (j = i + 1; j < n && ids[j] > ids[j - 1] && ids[j] - ids[j - 1] <= CHUNK_RANGE_GAP_MAX; j++)
			;
		if (j - i == 1) {
			sqlite3_bind_int64(s, 1, (sqlite3_int64) ids[i]);
			ret_r[i] = chunk_query_one(c, s, ret + i);
		} else
			chunks_get_range(c, ids + i, j - i, ret + i, ret_r + i);
	}
	if (own && exec(c, "COMMIT") < 0 && !sqlite3_get_autocommit(c->db))
		(void) exec(c, "ROLLBACK");
out:
	unlock(c);
	return r;
}

static int container_live_add(Catalog *c, uint64_t container, int64_t delta) {
	sqlite3_stmt *s = stmt(c, STMT_CONTAINER_LIVE);
	if (!s)
		return catalog_result(sqlite3_errcode(c->db));
	sqlite3_bind_int64(s, 1, delta);
	sqlite3_bind_int64(s, 2, (sqlite3_int64) container);
	int r = step_done(c, s);
	if (r >= 0 && sqlite3_changes(c->db) == 0)
		r = -EUCLEAN; /* a chunk pointing at no container */
	return r;
}

static int chunk_add(Catalog *c, const CatalogChunk *ch, bool recent_only, uint64_t *ret_id) {
	uint64_t other = 0;
	bool own = false;
	int r;

	lock(c);
	/* Checked before anything is written: -EEXIST leaves the caller's transaction as it was. */
	r = index_find(c, ch->tier, ch->digest, recent_only, &other);
	if (r >= 0)
		r = -EEXIST;
	if (r != -ENOENT)
		goto out;
	r = savepoint_begin(c, &own);
	if (r < 0)
		goto out;
	sqlite3_stmt *s = stmt(c, STMT_CHUNK_ADD);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto end;
	}
	sqlite3_bind_int64(s, 1, ch->tier);
	sqlite3_bind_blob(s, 2, ch->digest, CATALOG_DIGEST_SIZE, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, (sqlite3_int64) ch->container);
	sqlite3_bind_int64(s, 4, (sqlite3_int64) ch->offset);
	sqlite3_bind_int64(s, 5, ch->frame_size);
	sqlite3_bind_int64(s, 6, ch->plain_size);
	sqlite3_bind_int64(s, 7, (sqlite3_int64) ch->refs);
	sqlite3_bind_int64(s, 8, ch->region_size);
	sqlite3_bind_int64(s, 9, ch->region_offset);
	r = step_done(c, s);
	if (r < 0)
		goto end;
	uint64_t id = (uint64_t) sqlite3_last_insert_rowid(c->db);
	s = stmt(c, STMT_INDEX_RECENT_ADD);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto end;
	}
	sqlite3_bind_int64(s, 1, ch->tier);
	sqlite3_bind_blob(s, 2, ch->digest, CATALOG_DIGEST_SIZE, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, (sqlite3_int64) id);
	r = step_done(c, s);
	/* Counted as soon as the row is in: a caller's transaction may commit it even if what follows fails. */
	if (r >= 0)
		c->recent_delta++;
	if (r >= 0 && ch->refs > 0)
		r = container_live_add(c, ch->container, ch->frame_size);
	if (r >= 0)
		*ret_id = id;
end:
	r = savepoint_end(c, own, r);
out:
	unlock(c);
	return r;
}

int catalog_chunk_add(Catalog *c, const CatalogChunk *ch, uint64_t *ret_id) {
	return chunk_add(c, ch, false, ret_id);
}

int catalog_chunk_add_new(Catalog *c, const CatalogChunk *ch, uint64_t *ret_id) {
	return chunk_add(c, ch, true, ret_id);
}

/* A container's live bytes to change, gathered over a batch of references. */
typedef struct LiveDelta {
	uint64_t container;
	int64_t delta;
} LiveDelta;

typedef struct LiveDeltas {
	LiveDelta *items;
	size_t n, cap;
} LiveDeltas;

/*
 * A file's chunks in id order are mostly in a few containers, one run
 * after another: a run takes one entry, not one per chunk.
 */
static int live_delta_add(LiveDeltas *l, uint64_t container, int64_t delta) {
	if (l->n > 0 && l->items[l->n - 1].container == container) {
		l->items[l->n - 1].delta += delta;
		return 0;
	}
	if (ARRAY_RESERVE_ONE(l->items, l->cap, l->n, 16) < 0)
		return -ENOMEM;
	l->items[l->n++] = (LiveDelta) { container, delta };
	return 0;
}

static int live_delta_cmp(const void *a, const void *b) {
	uint64_t x = ((const LiveDelta *) a)->container, y = ((const LiveDelta *) b)->container;
	return x < y ? -1 : x > y;
}

/* Applies n deltas (reordered), one update per container. */
static int live_deltas_apply(Catalog *c, LiveDelta *d, size_t n) {
	if (n == 0)
		return 0; /* (!) d may be NULL then, which qsort() must not be given */
	qsort(d, n, sizeof(*d), live_delta_cmp);
	for (size_t i = 0; i < n;) {
		int64_t sum = 0;
		size_t j = i;
		for (; j < n && d[j].container == d[i].container; j++)
			sum += d[j].delta;
		if (sum != 0) {
			int r = container_live_add(c, d[i].container, sum);
			if (r < 0)
				return r;
		}
		i = j;
	}
	return 0;
}

/* Reads chunk id's refs, container and frame size; -ENOENT when there is no such row. */
static int chunk_refs_get(Catalog *c, uint64_t id, int64_t *ret_refs, uint64_t *ret_container, int64_t *ret_frame) {
	sqlite3_stmt *s = stmt(c, STMT_CHUNK_REFS_GET);
	if (!s)
		return catalog_result(sqlite3_errcode(c->db));
	sqlite3_bind_int64(s, 1, (sqlite3_int64) id);
	int rc = sqlite3_step(s);
	int r = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : catalog_result(rc);
	if (r == 0) {
		*ret_refs = sqlite3_column_int64(s, 0);
		*ret_container = (uint64_t) sqlite3_column_int64(s, 1);
		*ret_frame = sqlite3_column_int64(s, 2);
	}
	finish(s);
	return r;
}

static int chunk_refs_set(Catalog *c, uint64_t id, int64_t refs) {
	sqlite3_stmt *s = stmt(c, STMT_CHUNK_REFS_SET);
	if (!s)
		return catalog_result(sqlite3_errcode(c->db));
	sqlite3_bind_int64(s, 1, refs);
	sqlite3_bind_int64(s, 2, (sqlite3_int64) id);
	return step_done(c, s);
}

int catalog_chunks_ref(Catalog *c, const uint64_t *ids, const int64_t *deltas, size_t n) {
	LiveDeltas live = {};
	bool own = false;
	int r;

	if (n == 0)
		return 0;
	lock(c);
	r = savepoint_begin(c, &own);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		int64_t refs = 0, frame = 0;
		uint64_t container = 0;
		r = chunk_refs_get(c, ids[i], &refs, &container, &frame);
		if (r < 0)
			goto end;
		int64_t after = refs + deltas[i];
		if (after < 0) {
			r = -EUCLEAN; /* more references dropped than taken: damage */
			goto end;
		}
		r = chunk_refs_set(c, ids[i], after);
		if (r >= 0 && refs == 0 && after > 0)
			r = live_delta_add(&live, container, frame);
		else if (r >= 0 && refs > 0 && after == 0)
			r = live_delta_add(&live, container, -frame);
		if (r < 0)
			goto end;
	}
	r = live_deltas_apply(c, live.items, live.n);
end:
	r = savepoint_end(c, own, r);
out:
	unlock(c);
	free(live.items);
	return r;
}

int catalog_chunk_ref(Catalog *c, uint64_t id, int64_t delta) {
	return catalog_chunks_ref(c, &id, &delta, 1);
}

int catalog_chunk_move(Catalog *c, const CatalogChunk *to) {
	CatalogChunk ch;
	int r;

	lock(c);
	r = catalog_chunk_get(c, to->id, &ch);
	if (r < 0)
		goto out;
	sqlite3_stmt *s = stmt(c, STMT_CHUNK_MOVE);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) to->container);
	sqlite3_bind_int64(s, 2, (sqlite3_int64) to->offset);
	sqlite3_bind_int64(s, 3, to->frame_size);
	sqlite3_bind_int64(s, 4, to->region_size);
	sqlite3_bind_int64(s, 5, to->region_offset);
	sqlite3_bind_int64(s, 6, (sqlite3_int64) to->id);
	r = step_done(c, s);
	if (r >= 0 && ch.refs > 0 && (to->container != ch.container || to->frame_size != ch.frame_size)) {
		r = container_live_add(c, ch.container, -(int64_t) ch.frame_size);
		if (r >= 0)
			r = container_live_add(c, to->container, to->frame_size);
	}
out:
	unlock(c);
	return r;
}

int catalog_chunk_retire(Catalog *c, uint64_t id) {
	uint8_t digest[CATALOG_DIGEST_SIZE] = {};
	CatalogChunk ch;
	bool own = false;
	int r;

	memset(digest, 0xff, 8);
	for (unsigned k = 0; k < 8; k++)
		digest[8 + k] = (uint8_t) (id >> (8 * k));
	lock(c);
	r = catalog_chunk_get(c, id, &ch);
	if (r < 0)
		goto out;
	r = savepoint_begin(c, &own);
	if (r < 0)
		goto out;
	/* Out of the digest index: nothing finds it by content any more. */
	r = index_remove(c, ch.tier, ch.digest, id);
	if (r >= 0) {
		sqlite3_stmt *s = stmt(c, STMT_CHUNK_RETIRE);
		if (!s)
			r = catalog_result(sqlite3_errcode(c->db));
		else {
			sqlite3_bind_blob(s, 1, digest, CATALOG_DIGEST_SIZE, SQLITE_STATIC);
			sqlite3_bind_int64(s, 2, (sqlite3_int64) id);
			r = step_done(c, s);
		}
	}
	r = savepoint_end(c, own, r);
out:
	unlock(c);
	return r;
}

int catalog_chunk_delete(Catalog *c, uint64_t id) {
	uint8_t digest[CATALOG_DIGEST_SIZE];
	uint32_t tier = 0;
	bool own = false;
	int r, rc;

	lock(c);
	r = savepoint_begin(c, &own);
	if (r < 0)
		goto out;
	sqlite3_stmt *s = stmt(c, STMT_CHUNK_DELETE_RETURNING);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto end;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) id);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		tier = (uint32_t) sqlite3_column_int64(s, 0);
		r = sqlite3_column_bytes(s, 1) == CATALOG_DIGEST_SIZE ? 0 : -EUCLEAN;
		if (r == 0)
			memcpy(digest, sqlite3_column_blob(s, 1), CATALOG_DIGEST_SIZE);
		rc = sqlite3_step(s);
		if (r == 0 && rc != SQLITE_DONE)
			r = catalog_result(rc);
		c->commits++;
	} else
		r = rc == SQLITE_DONE ? -EBUSY : catalog_result(rc);
	finish(s);
	/* A retired chunk's made-up digest is in no table: nothing to take out. */
	if (r >= 0)
		r = index_remove(c, tier, digest, id);
end:
	r = savepoint_end(c, own, r);
out:
	unlock(c);
	return r;
}

static int chunks_foreach(Catalog *c, StatementId id, uint64_t key, int (*cb)(const CatalogChunk *ch, void *userdata),
			  void *userdata) {
	int r = 0, rc;

	lock(c);
	sqlite3_stmt *s = stmt(c, id);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) key);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		CatalogChunk ch;
		r = chunk_from_row(s, &ch);
		if (r >= 0)
			r = cb(&ch, userdata);
		if (r < 0)
			break;
	}
	if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
		r = catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_chunks_foreach_in_container(Catalog *c, uint64_t container,
					int (*cb)(const CatalogChunk *ch, void *userdata), void *userdata) {
	return chunks_foreach(c, STMT_CHUNKS_IN_CONTAINER, container, cb, userdata);
}

int catalog_chunks_foreach(Catalog *c, uint32_t tier, int (*cb)(const CatalogChunk *ch, void *userdata),
			   void *userdata) {
	return chunks_foreach(c, STMT_CHUNKS_TIER, tier, cb, userdata);
}

int catalog_chunks_count(Catalog *c, uint32_t tier, uint64_t *ret) {
	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_CHUNKS_COUNT_TIER);
	int r;
	if (!s)
		r = catalog_result(sqlite3_errcode(c->db));
	else {
		sqlite3_bind_int64(s, 1, tier);
		int rc = sqlite3_step(s);
		r = rc == SQLITE_ROW ? 0 : catalog_result(rc);
		if (r >= 0)
			*ret = (uint64_t) sqlite3_column_int64(s, 0);
		finish(s);
	}
	unlock(c);
	return r;
}

int catalog_chunk_digests_foreach(Catalog *c, uint32_t tier,
				  int (*cb)(const uint8_t digest[CATALOG_DIGEST_SIZE], void *userdata), void *userdata) {
	int r = 0, rc;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_CHUNK_DIGESTS_TIER);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, tier);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (sqlite3_column_bytes(s, 0) != CATALOG_DIGEST_SIZE) {
			r = -EUCLEAN;
			break;
		}
		r = cb(sqlite3_column_blob(s, 0), userdata);
		if (r < 0)
			break;
	}
	if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
		r = catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

/* One input of a merge: the recent table or a run, read in (tier, digest) order. */
typedef struct MergeInput {
	sqlite3_stmt *s;
	bool done;
	uint32_t tier;
	uint8_t digest[CATALOG_DIGEST_SIZE];
	int64_t id;
} MergeInput;

static int merge_input_next(MergeInput *in) {
	int rc = sqlite3_step(in->s);
	if (rc == SQLITE_DONE) {
		in->done = true;
		return 0;
	}
	if (rc != SQLITE_ROW)
		return catalog_result(rc);
	if (sqlite3_column_bytes(in->s, 1) != CATALOG_DIGEST_SIZE)
		return -EUCLEAN;
	in->tier = (uint32_t) sqlite3_column_int64(in->s, 0);
	memcpy(in->digest, sqlite3_column_blob(in->s, 1), CATALOG_DIGEST_SIZE);
	in->id = sqlite3_column_int64(in->s, 2);
	return 0;
}

static int merge_key_cmp(const MergeInput *a, const MergeInput *b) {
	if (a->tier != b->tier)
		return a->tier < b->tier ? -1 : 1;
	return memcmp(a->digest, b->digest, CATALOG_DIGEST_SIZE);
}

/*
 * What one batch of a merge may do: `rows` rows at most, and none more
 * once the catalog lock has been held until `deadline` (CLOCK_MONOTONIC
 * ns), but one at least, so that every merge ends.  Rows bound the CPU;
 * the clock bounds what rows cannot: pages read from the disk once the
 * catalog outgrows the page cache, and a batch preempted under load.
 */
typedef struct MergeBudget {
	uint64_t rows;
	int64_t deadline;
} MergeBudget;

static bool budget_spent(const MergeBudget *b, uint64_t rows) {
	return rows >= b->rows || (rows > 0 && clock_ns(CLOCK_MONOTONIC) >= b->deadline);
}

/* The level of a run of `entries` ids: log base CATALOG_INDEX_FANOUT of its size in recent tables. */
static unsigned run_level(uint64_t entries, uint64_t recent_max) {
	unsigned level = 0;
	for (uint64_t size = MAX(recent_max, (uint64_t) 1) * CATALOG_INDEX_FANOUT; entries >= size && level < 63;
	     size *= CATALOG_INDEX_FANOUT)
		level++;
	return level;
}

/*
 * Writes the inputs (each sorted, from past the new run's last key) into
 * run `run` in (tier, digest) order, as many rows as the budget allows:
 * SQLite appends each row at the right edge of chunk_runs.  Two inputs with one digest
 * are damage (invariant 6): -EUCLEAN, never one dropped; so the key after
 * the batch's last is read too, lest the next batch start past its twin.
 */
static int merge_write(Catalog *c, MergeInput *in, size_t n, uint64_t run, const MergeBudget *b, uint64_t *ret_rows,
		       bool *ret_exhausted) {
	MergeInput last = {};
	MergeInput *min = NULL;
	uint64_t rows = 0;
	int r = 0;

	sqlite3_stmt *s = stmt(c, STMT_INDEX_RUN_ROW_ADD);
	if (!s)
		return catalog_result(sqlite3_errcode(c->db));
	for (size_t k = 0; k < n && r >= 0; k++)
		r = merge_input_next(in + k);
	while (r >= 0) {
		min = NULL;
		for (size_t k = 0; k < n; k++)
			if (!in[k].done && (!min || merge_key_cmp(in + k, min) < 0))
				min = in + k;
		if (!min)
			break;
		if (rows > 0 && merge_key_cmp(min, &last) == 0) {
			r = -EUCLEAN;
			break;
		}
		if (budget_spent(b, rows))
			break;
		sqlite3_bind_int64(s, 1, (sqlite3_int64) run);
		sqlite3_bind_int64(s, 2, min->tier);
		sqlite3_bind_blob(s, 3, min->digest, CATALOG_DIGEST_SIZE, SQLITE_STATIC);
		sqlite3_bind_int64(s, 4, min->id);
		r = step_done(c, s);
		if (r == -EEXIST)
			r = -EUCLEAN;
		if (r < 0)
			break;
		rows++;
		last.tier = min->tier;
		memcpy(last.digest, min->digest, CATALOG_DIGEST_SIZE);
		r = merge_input_next(min);
	}
	*ret_rows = rows;
	*ret_exhausted = !min;
	return r;
}

typedef struct RunInfo {
	uint64_t run;
	uint64_t entries;
	int state;
} RunInfo;

/* Chooses what a merge takes (see catalog_index_merge_step()) from runs (in run order); returns how many it marked. */
static size_t merge_choose(RunInfo *runs, size_t n, uint64_t recent_max, bool *take) {
	size_t taken = 0;

	for (unsigned level = 0;; level++) {
		size_t at = 0;
		for (size_t k = 0; k < n; k++)
			at += run_level(runs[k].entries, recent_max) == level;
		if (at < CATALOG_INDEX_FANOUT - 1)
			break;
		for (size_t k = 0; k < n; k++)
			if (run_level(runs[k].entries, recent_max) == level) {
				take[k] = true;
				taken++;
			}
	}
	return taken;
}

static int runs_list(Catalog *c, RunInfo **ret, size_t *ret_n) {
	_cleanup_free_ RunInfo *runs = NULL;
	size_t n = 0, cap = 0;
	int r = 0, rc;

	sqlite3_stmt *s = stmt(c, STMT_INDEX_RUNS);
	if (!s)
		return catalog_result(sqlite3_errcode(c->db));
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		r = ARRAY_RESERVE_ONE(runs, cap, n, 16);
		if (r < 0)
			break;
		runs[n++] = (RunInfo) { (uint64_t) sqlite3_column_int64(s, 0), (uint64_t) sqlite3_column_int64(s, 1),
					sqlite3_column_int(s, 2) };
	}
	if (r >= 0 && rc != SQLITE_DONE)
		r = catalog_result(rc);
	finish(s);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(runs);
	*ret_n = n;
	return 0;
}

static int run_set(Catalog *c, StatementId id, uint64_t value, uint64_t run) {
	sqlite3_stmt *s = stmt(c, id);
	if (!s)
		return catalog_result(sqlite3_errcode(c->db));
	sqlite3_bind_int64(s, 1, (sqlite3_int64) value);
	sqlite3_bind_int64(s, 2, (sqlite3_int64) run);
	return step_done(c, s);
}

/* The committed rows of chunk_recent (of chunk_frozen): from memory, or counted once (outside a transaction only). */
static int recent_rows_get(Catalog *c, uint64_t *ret) {
	if (c->recent_rows != UINT64_MAX) {
		*ret = c->recent_rows;
		return 0;
	}
	int r = count_get(c, STMT_INDEX_RECENT_COUNT, ret);
	if (r >= 0 && !c->reader)
		c->recent_rows = *ret;
	return r;
}

static int frozen_rows_get(Catalog *c, uint64_t *ret) {
	if (c->frozen_rows != UINT64_MAX) {
		*ret = c->frozen_rows;
		return 0;
	}
	int r = count_get(c, STMT_INDEX_FROZEN_COUNT, ret);
	if (r >= 0 && !c->reader)
		c->frozen_rows = *ret;
	return r;
}

/*
 * Deletes the first rows of a dropped run (run > 0) or of chunk_merged
 * (run 0), as many as the budget allows, up to the last key read: a range
 * the primary key finds; or the rest, and the run.  The scan reads the
 * pages the delete then changes, so the budget bounds the reads from disk
 * too.  Returns 1 if rows are left, 0, or an error.
 */
static int merge_drop(Catalog *c, uint64_t run, const MergeBudget *b) {
	uint8_t to[CATALOG_DIGEST_SIZE];
	int64_t to_tier = -1;
	uint64_t rows = 0;
	int r = 0, rc;

	sqlite3_stmt *s = stmt(c, run ? STMT_INDEX_RUN_KEYS : STMT_INDEX_MERGED_KEYS);
	if (!s)
		return catalog_result(sqlite3_errcode(c->db));
	if (run)
		sqlite3_bind_int64(s, 1, (sqlite3_int64) run);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW && !budget_spent(b, rows)) {
		if (sqlite3_column_bytes(s, 1) != CATALOG_DIGEST_SIZE) {
			r = -EUCLEAN;
			break;
		}
		to_tier = sqlite3_column_int64(s, 0);
		memcpy(to, sqlite3_column_blob(s, 1), CATALOG_DIGEST_SIZE);
		rows++;
	}
	bool left = rc == SQLITE_ROW;
	if (r >= 0 && !left && rc != SQLITE_DONE)
		r = catalog_result(rc);
	finish(s);
	if (r < 0)
		return r;
	if (!left) {
		if (!run)
			return run_stmt(c, STMT_INDEX_MERGED_DROP);
		r = run_ino(c, STMT_INDEX_RUN_DROP, run);
		return r >= 0 ? run_ino(c, STMT_INDEX_RUN_FORGET, run) : r;
	}
	s = stmt(c, run ? STMT_INDEX_RUN_DROP_TO : STMT_INDEX_MERGED_DROP_TO);
	if (!s)
		return catalog_result(sqlite3_errcode(c->db));
	if (run)
		sqlite3_bind_int64(s, 1, (sqlite3_int64) run);
	sqlite3_bind_int64(s, 2, to_tier);
	sqlite3_bind_blob(s, 3, to, CATALOG_DIGEST_SIZE, SQLITE_STATIC);
	r = step_done(c, s);
	return r < 0 ? r : 1;
}

/* Whether chunk_merged has rows left to delete: 1, 0, or an error. */
static int merged_left(Catalog *c) {
	sqlite3_stmt *s = stmt(c, STMT_INDEX_MERGED_KEYS);
	if (!s)
		return catalog_result(sqlite3_errcode(c->db));
	int rc = sqlite3_step(s);
	finish(s);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : catalog_result(rc);
}

/*
 * Freezes the recent table as chunk_frozen (a rename: no row is copied)
 * and a fresh one takes new ids.  A frozen table a failed merge left is
 * merged as it is: the recent table stays.  At the swap the frozen table
 * becomes chunk_merged, whose rows go batch by batch (so does a run's):
 * emptying it in the swap took as long as a few batches.
 */
static const char merge_freeze_sql[] =
	"DROP TABLE chunk_frozen;"
	"ALTER TABLE chunk_recent RENAME TO chunk_frozen;"
	"CREATE TABLE chunk_recent ("
	"  tier INTEGER NOT NULL,"
	"  digest BLOB NOT NULL,"
	"  id INTEGER NOT NULL,"
	"  PRIMARY KEY (tier, digest)) WITHOUT ROWID;";

static const char merge_swap_sql[] =
	"DROP TABLE chunk_merged;"
	"ALTER TABLE chunk_frozen RENAME TO chunk_merged;"
	"CREATE TABLE chunk_frozen ("
	"  tier INTEGER NOT NULL,"
	"  digest BLOB NOT NULL,"
	"  id INTEGER NOT NULL,"
	"  PRIMARY KEY (tier, digest)) WITHOUT ROWID;";

static int merge_start(Catalog *c, RunInfo *runs, size_t n, uint64_t recent_max, bool *ret_froze) {
	_cleanup_free_ bool *take = calloc(MAX(n, (size_t) 1), sizeof(*take));
	uint64_t frozen = 0;
	int r;

	if (!take)
		return -ENOMEM;
	merge_choose(runs, n, recent_max, take);
	r = frozen_rows_get(c, &frozen);
	if (r < 0)
		return r;
	*ret_froze = frozen == 0;
	if (frozen == 0) {
		r = exec(c, merge_freeze_sql);
		if (r < 0)
			return r;
		c->commits++;
	}
	for (size_t k = 0; r >= 0 && k < n; k++)
		if (take[k])
			r = run_set(c, STMT_INDEX_RUN_STATE, RUN_MERGING, runs[k].run);
	return r >= 0 ? run_stmt(c, STMT_INDEX_RUN_NEW) : r;
}

/* Copies the next batch of the sources into the new run `to`; the last one makes it live and drops them. */
static int merge_copy(Catalog *c, RunInfo *runs, size_t n, const RunInfo *to, const MergeBudget *b,
		      CatalogIndexMerge *m) {
	_cleanup_free_ MergeInput *in = calloc(n + 1, sizeof(*in));
	uint8_t after[CATALOG_DIGEST_SIZE];
	int64_t after_tier = -1;
	size_t n_in = 0;
	int r = 0, rc;

	if (!in)
		return -ENOMEM;
	/* Where the last batch stopped: the new run's last key (one a delete took since is in no source either). */
	sqlite3_stmt *s = stmt(c, STMT_INDEX_RUN_LAST);
	if (!s)
		return catalog_result(sqlite3_errcode(c->db));
	sqlite3_bind_int64(s, 1, (sqlite3_int64) to->run);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW && sqlite3_column_bytes(s, 1) == CATALOG_DIGEST_SIZE) {
		after_tier = sqlite3_column_int64(s, 0);
		memcpy(after, sqlite3_column_blob(s, 1), CATALOG_DIGEST_SIZE);
	} else if (rc == SQLITE_ROW)
		r = -EUCLEAN;
	else if (rc != SQLITE_DONE)
		r = catalog_result(rc);
	finish(s);
	if (r < 0)
		return r;

	/* Scans of their own: all inputs are read at once, which one cached statement cannot do. */
	for (size_t k = 0; k <= n; k++) {
		if (k > 0 && runs[k - 1].state != RUN_MERGING)
			continue;
		rc = sqlite3_prepare_v2(c->db, statement_sql[k == 0 ? STMT_INDEX_FROZEN_SCAN : STMT_INDEX_RUN_SCAN], -1,
					&in[n_in].s, NULL);
		if (rc != SQLITE_OK) {
			r = catalog_result(rc);
			break;
		}
		sqlite3_stmt *q = in[n_in++].s;
		sqlite3_bind_int64(q, 1, after_tier);
		if (after_tier < 0)
			sqlite3_bind_zeroblob(q, 2, 0);
		else
			sqlite3_bind_blob(q, 2, after, CATALOG_DIGEST_SIZE, SQLITE_STATIC);
		if (k > 0) {
			sqlite3_bind_int64(q, 3, (sqlite3_int64) runs[k - 1].run);
			m->runs++;
			m->from_runs += runs[k - 1].entries;
		}
	}
	uint64_t rows = 0;
	bool exhausted = false;
	if (r >= 0)
		r = merge_write(c, in, n_in, to->run, b, &rows, &exhausted);
	for (size_t k = 0; k < n_in; k++)
		sqlite3_finalize(in[k].s);
	if (r < 0)
		return r;
	m->run = to->run;
	m->entries = to->entries + rows;
	if (rows > 0)
		r = run_set(c, STMT_INDEX_RUN_SIZE, m->entries, to->run);
	if (r < 0 || !exhausted)
		return r;

	/* The swap: one short transaction; the sources' rows go in later batches. */
	m->done = true;
	r = run_set(c, STMT_INDEX_RUN_STATE, m->entries > 0 ? RUN_LIVE : RUN_DROPPED, to->run);
	for (size_t k = 0; r >= 0 && k < n; k++)
		if (runs[k].state == RUN_MERGING)
			r = run_set(c, STMT_INDEX_RUN_STATE, RUN_DROPPED, runs[k].run);
	if (r >= 0)
		r = exec(c, merge_swap_sql);
	if (r >= 0)
		c->commits++;
	return r;
}

/* A failed merge: its new run is dropped (in later batches), its sources are live runs again, as they were. */
static int merge_abandon(Catalog *c) {
	_cleanup_free_ RunInfo *runs = NULL;
	size_t n = 0;

	int r = runs_list(c, &runs, &n);
	for (size_t k = 0; r >= 0 && k < n; k++)
		if (runs[k].state == RUN_BUILDING)
			r = run_set(c, STMT_INDEX_RUN_STATE, RUN_DROPPED, runs[k].run);
		else if (runs[k].state == RUN_MERGING)
			r = run_set(c, STMT_INDEX_RUN_STATE, RUN_LIVE, runs[k].run);
	return r;
}

/* One batch (see catalog_index_merge_step()): 1 (done), 0 (nothing to do), or an error. */
static int index_merge_step(Catalog *c, uint64_t recent_max, const MergeBudget *b, CatalogIndexMerge *m,
			    bool *ret_froze) {
	_cleanup_free_ RunInfo *runs = NULL;
	const RunInfo *building = NULL;
	size_t n = 0;
	int r;

	r = runs_list(c, &runs, &n);
	if (r < 0)
		return r;
	/* What a finished (or failed) merge left to delete goes first; the batch that deletes the last returns 0. */
	uint64_t drop = 0;
	int left = 0;
	for (size_t k = 0; k < n; k++)
		if (runs[k].state == RUN_DROPPED) {
			drop = drop ?: runs[k].run;
			left++;
		} else if (runs[k].state == RUN_BUILDING)
			building = runs + k;
	r = merged_left(c);
	if (r < 0)
		return r;
	left += r;
	if (left > 0) {
		r = merge_drop(c, drop, b);
		return r < 0 ? r : r > 0 || left > 1;
	}
	if (!building) {
		uint64_t recent = 0;
		r = recent_rows_get(c, &recent);
		if (r < 0)
			return r;
		if (recent <= recent_max)
			return 0;
		r = merge_start(c, runs, n, recent_max, ret_froze);
		if (r < 0)
			return r;
		c->merge_recent = *ret_froze ? recent : UINT64_MAX;
		*m = (CatalogIndexMerge) { .run = (uint64_t) sqlite3_last_insert_rowid(c->db) };
		return 1;
	}
	if (c->merge_recent == UINT64_MAX) {
		r = frozen_rows_get(c, &c->merge_recent);
		if (r < 0)
			return r;
	}
	*m = (CatalogIndexMerge) { .recent = c->merge_recent };
	r = merge_copy(c, runs, n, building, b, m);
	if (r < 0)
		return r;
	m->level = run_level(m->entries, recent_max);
	return 1;
}

/* Whether a merge is under way (a run being written or dropped): 1, 0, or an error. */
static int merge_pending(Catalog *c) {
	_cleanup_free_ RunInfo *runs = NULL;
	size_t n = 0;

	if (c->merging >= 0)
		return c->merging;
	int r = runs_list(c, &runs, &n);
	if (r < 0)
		return r;
	r = merged_left(c);
	if (r < 0)
		return r;
	c->merging = r;
	for (size_t k = 0; k < n; k++)
		if (runs[k].state >= RUN_BUILDING)
			c->merging = 1;
	return c->merging;
}

int catalog_index_merge_due(Catalog *c, uint64_t recent_max, uint64_t *ret_recent) {
	uint64_t n = 0;
	int r;

	lock(c);
	r = merge_pending(c);
	if (r >= 0) {
		bool pending = r > 0;
		r = recent_rows_get(c, &n);
		if (r >= 0)
			r = pending || n > recent_max;
	}
	unlock(c);
	if (r > 0)
		*ret_recent = n;
	return r;
}

int catalog_index_merge_step(Catalog *c, uint64_t recent_max, uint64_t batch, uint64_t budget_ns,
			     CatalogIndexMerge *ret) {
	CatalogIndexMerge m = {};
	bool froze = false;
	int r;

	lock(c);
	MergeBudget b = { .rows = MAX(batch, (uint64_t) 1),
			  .deadline = budget_ns ? clock_ns(CLOCK_MONOTONIC) + (int64_t) MIN(budget_ns, (uint64_t) INT64_MAX / 2)
						: INT64_MAX };
	r = merge_pending(c);
	/* The open transaction's rows too: a merge asked for inside one is refused below, as when they are committed. */
	if (r <= 0 && (r < 0 || (c->recent_rows != UINT64_MAX &&
				 (int64_t) c->recent_rows + c->recent_delta <= (int64_t) MIN(recent_max, (uint64_t) INT64_MAX))))
		goto out;
	if (!sqlite3_get_autocommit(c->db)) {
		r = -EBUSY;
		goto out;
	}
	rows_begin(c);
	r = exec(c, "BEGIN IMMEDIATE");
	if (r < 0)
		goto out;
	r = index_merge_step(c, recent_max, &b, &m, &froze);
	if (r >= 0) {
		int q = exec(c, "COMMIT");
		if (q < 0)
			r = q;
	}
	if (r < 0) {
		if (!sqlite3_get_autocommit(c->db))
			(void) exec(c, "ROLLBACK");
		c->merging = -1;
		c->merge_recent = UINT64_MAX;
		rows_forget(c);
		if (r == -EUCLEAN) {
			/* Its own transaction: the failed batch's is gone. */
			int q = exec(c, "BEGIN IMMEDIATE");
			if (q >= 0)
				q = merge_abandon(c);
			if (q >= 0)
				q = exec(c, "COMMIT");
			if (q < 0 && !sqlite3_get_autocommit(c->db))
				(void) exec(c, "ROLLBACK");
		}
		goto out;
	}
	c->commits++;
	c->merging = r;
	rows_commit(c);
	if (froze) {
		c->frozen_rows = c->recent_rows;
		c->recent_rows = 0;
	}
	if (m.done)
		c->frozen_rows = 0;
	if (r > 0 && m.run > 0 && ret)
		*ret = m;
out:
	/* The merge thread calls again at once (when the throttle does not pace it): waiters first. */
	unlock_yield(c);
	return r;
}

int catalog_index_get(Catalog *c, CatalogIndexState *ret) {
	CatalogIndexState st = {};
	int r, rc;

	lock(c);
	r = recent_rows_get(c, &st.recent);
	if (r >= 0)
		r = frozen_rows_get(c, &st.frozen);
	sqlite3_stmt *s = r >= 0 ? stmt(c, STMT_INDEX_RUNS) : NULL;
	if (r >= 0 && !s)
		r = catalog_result(sqlite3_errcode(c->db));
	if (r >= 0) {
		while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
			int state = sqlite3_column_int(s, 2);
			if (state <= RUN_MERGING) {
				st.runs++;
				st.in_runs += (uint64_t) sqlite3_column_int64(s, 1);
			} else
				st.merging = true;
		}
		if (rc != SQLITE_DONE)
			r = catalog_result(rc);
		finish(s);
	}
	if (r >= 0 && !st.merging) {
		r = merged_left(c);
		st.merging = r > 0;
		r = MIN(r, 0);
	}
	unlock(c);
	if (r >= 0)
		*ret = st;
	return r;
}

int catalog_chunks_foreach_dead(Catalog *c, uint32_t tier, int (*cb)(const CatalogChunk *ch, void *userdata),
				void *userdata) {
	return chunks_foreach(c, STMT_CHUNKS_DEAD, tier, cb, userdata);
}

int catalog_recipe_put(Catalog *c, uint64_t ino, uint64_t offset, const void *blob, size_t size) {
	int r;

	if (size == 0 || size > CATALOG_RECIPE_SEGMENT_MAX)
		return -EINVAL;
	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_RECIPE_PUT);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) ino);
	sqlite3_bind_int64(s, 2, (sqlite3_int64) offset);
	sqlite3_bind_blob(s, 3, blob, (int) size, SQLITE_STATIC);
	r = step_done(c, s);
out:
	unlock(c);
	return r;
}

static int recipe_rows(Catalog *c, sqlite3_stmt *s, int (*cb)(uint64_t start, const void *blob, size_t size, void *userdata),
		       void *userdata, bool one) {
	int r = 0, rc, rows = 0;

	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const void *blob = sqlite3_column_blob(s, 1);
		int n = sqlite3_column_bytes(s, 1);
		if (!blob || n <= 0 || (size_t) n > CATALOG_RECIPE_SEGMENT_MAX) {
			r = -EUCLEAN;
			break;
		}
		rows++;
		r = cb((uint64_t) sqlite3_column_int64(s, 0), blob, (size_t) n, userdata);
		if (r < 0 || one)
			break;
	}
	if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
		r = catalog_result(rc);
	if (r >= 0 && one && rows == 0)
		r = -ENOENT;
	finish(s);
	return r;
}

int catalog_recipe_find(Catalog *c, uint64_t ino, uint64_t offset,
			int (*cb)(uint64_t start, const void *blob, size_t size, void *userdata), void *userdata) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_RECIPE_FIND);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) ino);
	sqlite3_bind_int64(s, 2, (sqlite3_int64) offset);
	r = recipe_rows(c, s, cb, userdata, true);
out:
	unlock(c);
	return r;
}

int catalog_recipe_foreach(Catalog *c, uint64_t ino,
			   int (*cb)(uint64_t start, const void *blob, size_t size, void *userdata), void *userdata) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_RECIPE_ALL);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) ino);
	r = recipe_rows(c, s, cb, userdata, false);
out:
	unlock(c);
	return r;
}

int catalog_recipe_delete(Catalog *c, uint64_t ino) {
	lock(c);
	int r = run_ino(c, STMT_RECIPE_DELETE, ino);
	unlock(c);
	return r;
}

/* Runs a check pragma; any row other than a single "ok" means damage. */
static int check_pragma(Catalog *c, const char *sql, bool ok_row_expected) {
	sqlite3_stmt *s;
	int rc = sqlite3_prepare_v2(c->db, sql, -1, &s, NULL), r = 0;
	if (rc != SQLITE_OK)
		return catalog_result(rc);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const unsigned char *text = sqlite3_column_text(s, 0);
		if (!ok_row_expected || !text || strcmp((const char *) text, "ok") != 0)
			r = -EUCLEAN;
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = catalog_result(rc);
	sqlite3_finalize(s);
	return r;
}

int catalog_tier_moved_add(Catalog *c, uint32_t tier, uint64_t logical, uint64_t source_stored, uint64_t stored) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_TIER_MOVED_ADD);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, tier);
	sqlite3_bind_int64(s, 2, (sqlite3_int64) logical);
	sqlite3_bind_int64(s, 3, (sqlite3_int64) source_stored);
	sqlite3_bind_int64(s, 4, (sqlite3_int64) stored);
	r = step_done(c, s);
out:
	unlock(c);
	return r;
}

int catalog_tier_moved_get(Catalog *c, uint32_t tier, CatalogTierMoved *ret) {
	int r, rc;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_TIER_MOVED_GET);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, tier);
	*ret = (CatalogTierMoved) {};
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*ret = (CatalogTierMoved) {
			.files = (uint64_t) sqlite3_column_int64(s, 0),
			.logical = (uint64_t) sqlite3_column_int64(s, 1),
			.source_stored = (uint64_t) sqlite3_column_int64(s, 2),
			.stored = (uint64_t) sqlite3_column_int64(s, 3),
		};
	r = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_check(Catalog *c) {
	int r;

	lock(c);
	r = check_pragma(c, "PRAGMA integrity_check", true);
	if (r >= 0)
		r = check_pragma(c, "PRAGMA foreign_key_check", false);
	unlock(c);
	return r;
}

/* ---- for reports (tierctl) ---- */

int catalog_open_reader(Catalog *c, Catalog **ret) {
	_cleanup_free_ Catalog *r = NULL;
	int version = 0, e;

	lock(c);
	const char *path = sqlite3_db_filename(c->db, "main");
	_cleanup_free_ char *copy = path && *path ? strdup(path) : NULL;
	unlock(c);
	if (!copy)
		return path && *path ? -ENOMEM : -EINVAL;

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->recent_rows = r->frozen_rows = UINT64_MAX;
	r->reserve_fd = -1;
	r->reader = true;
	pthread_mutexattr_t attr;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&r->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	pthread_mutex_init(&r->sync_lock, NULL);
	pthread_mutex_init(&r->ckpt_run, NULL);
	pthread_mutex_init(&r->ckpt_lock, NULL);
	pthread_cond_init(&r->ckpt_cond, NULL);
	int rc = sqlite3_open_v2(copy, &r->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE,
				 NULL);
	if (rc != SQLITE_OK) {
		e = catalog_result(rc);
		goto fail;
	}
	(void) sqlite3_busy_timeout(r->db, 5000);
	e = schema_version(r, &version);
	if (e >= 0 && version != CATALOG_SCHEMA_VERSION)
		e = -EPROTONOSUPPORT;
	if (e < 0)
		goto fail;
	*ret = TAKE_PTR(r);
	return 0;

fail:
	catalog_close(TAKE_PTR(r));
	return e;
}

int catalog_files_foreach(Catalog *c, int (*cb)(const CatalogInode *ci, void *userdata), void *userdata) {
	int r = 0, rc;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_FILES_ALL);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		CatalogInode ci;
		/* Columns after the ino are those of STMT_INODE_GET, one further along. */
		ci = (CatalogInode) {
			.ino = (uint64_t) sqlite3_column_int64(s, 0),
			.parent = (uint64_t) sqlite3_column_int64(s, 1),
			.mode = (uint32_t) sqlite3_column_int64(s, 2),
			.uid = (uint32_t) sqlite3_column_int64(s, 3),
			.gid = (uint32_t) sqlite3_column_int64(s, 4),
			.nlink = (uint32_t) sqlite3_column_int64(s, 5),
			.rdev = (uint64_t) sqlite3_column_int64(s, 6),
			.size = (uint64_t) sqlite3_column_int64(s, 7),
			.atime_ns = sqlite3_column_int64(s, 8),
			.mtime_ns = sqlite3_column_int64(s, 9),
			.ctime_ns = sqlite3_column_int64(s, 10),
			.state = (CatalogFileState) sqlite3_column_int(s, 11),
			.file_class = (uint32_t) sqlite3_column_int64(s, 12),
			.tier = (uint32_t) sqlite3_column_int64(s, 13),
			.stored = (uint64_t) sqlite3_column_int64(s, 14),
		};
		r = cb(&ci, userdata);
		if (r < 0)
			break;
	}
	if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
		r = catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_dirent_find(Catalog *c, uint64_t ino, uint64_t *ret_parent, char *name, size_t size) {
	int r;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_DIRENT_OF);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	sqlite3_bind_int64(s, 1, (sqlite3_int64) ino);
	int rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		const void *blob = sqlite3_column_blob(s, 1);
		size_t n = (size_t) sqlite3_column_bytes(s, 1);
		if (!blob || n == 0 || n > CATALOG_NAME_MAX)
			r = -EUCLEAN;
		else if (n + 1 > size)
			r = -ERANGE;
		else {
			memcpy(name, blob, n);
			name[n] = 0;
			*ret_parent = (uint64_t) sqlite3_column_int64(s, 0);
			r = 0;
		}
	} else
		r = rc == SQLITE_DONE ? -ENOENT : catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_files_totals(Catalog *c, CatalogFileTotals *ret) {
	CatalogFileTotals t = {};
	int r = 0, rc;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_FILES_TOTALS);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t state = sqlite3_column_int64(s, 0);
		if (state < 0 || state >= _CATALOG_FILE_STATE_MAX) {
			r = -EUCLEAN;
			break;
		}
		t.files[state] = (uint64_t) sqlite3_column_int64(s, 1);
		/* TOTAL() is a double: exact up to 2^53 bytes (8 PiB). */
		t.bytes[state] = (uint64_t) sqlite3_column_double(s, 2);
	}
	if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
		r = catalog_result(rc);
	finish(s);
out:
	unlock(c);
	if (r >= 0)
		*ret = t;
	return r;
}

static int bind_u64s(sqlite3_stmt *s, int first, const uint64_t *v, size_t n) {
	for (size_t i = 0; i < n; i++)
		if (v[i] > INT64_MAX)
			return -ERANGE;
		else
			sqlite3_bind_int64(s, first + (int) i, (sqlite3_int64) v[i]);
	return 0;
}

/* One sample row: its time, then its tier or class and counts, each refused if beyond SQLite's integers. */
static int history_add_row(Catalog *c, StatementId id, int64_t t, const uint64_t *v, size_t n) {
	sqlite3_stmt *s = stmt(c, id);
	if (!s)
		return catalog_result(sqlite3_errcode(c->db));
	sqlite3_bind_int64(s, 1, t);
	int r = bind_u64s(s, 2, v, n);
	if (r < 0) {
		finish(s);
		return r;
	}
	return step_done(c, s);
}

static int run_i64(Catalog *c, StatementId id, int64_t v) {
	sqlite3_stmt *s = stmt(c, id);
	if (!s)
		return catalog_result(sqlite3_errcode(c->db));
	sqlite3_bind_int64(s, 1, v);
	return step_done(c, s);
}

int catalog_history_add(Catalog *c, const CatalogHistoryTier *tiers, size_t n_tiers,
			const CatalogHistoryClass *classes, size_t n_classes, int64_t keep_since) {
	int r = catalog_begin(c);
	if (r < 0)
		return r;
	for (size_t i = 0; r >= 0 && i < n_tiers; i++)
		r = history_add_row(c, STMT_HISTORY_TIER_ADD, tiers[i].t,
				    (const uint64_t[]) { tiers[i].tier, tiers[i].capacity, tiers[i].used, tiers[i].files,
							 tiers[i].logical, tiers[i].stored },
				    6);
	for (size_t i = 0; r >= 0 && i < n_classes; i++)
		r = history_add_row(c, STMT_HISTORY_CLASS_ADD, classes[i].t,
				    (const uint64_t[]) { classes[i].file_class, classes[i].files, classes[i].logical,
							 classes[i].hot_logical },
				    4);
	if (r >= 0)
		r = run_i64(c, STMT_HISTORY_TIER_PRUNE, keep_since);
	if (r >= 0)
		r = run_i64(c, STMT_HISTORY_CLASS_PRUNE, keep_since);
	if (r < 0) {
		catalog_rollback(c);
		return r;
	}
	return catalog_commit(c);
}

static int history_u64(sqlite3_stmt *s, int col, uint64_t *ret) {
	int64_t v = sqlite3_column_int64(s, col);
	if (v < 0)
		return -EUCLEAN;
	*ret = (uint64_t) v;
	return 0;
}

int catalog_history_foreach(Catalog *c, int64_t since, int (*tier_cb)(const CatalogHistoryTier *h, void *userdata),
			    int (*class_cb)(const CatalogHistoryClass *h, void *userdata), void *userdata) {
	int r = 0, rc = SQLITE_DONE;

	lock(c);
	for (int pass = 0; r >= 0 && pass < 2; pass++) {
		sqlite3_stmt *s = stmt(c, pass == 0 ? STMT_HISTORY_TIERS : STMT_HISTORY_CLASSES);
		if (!s) {
			r = catalog_result(sqlite3_errcode(c->db));
			break;
		}
		sqlite3_bind_int64(s, 1, since);
		while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
			/* Columns 1..: the tier or class, then the counts; none may be negative. */
			uint64_t v[6] = {};
			int columns = pass == 0 ? 7 : 5;
			for (int col = 1; r >= 0 && col < columns; col++)
				r = history_u64(s, col, &v[col - 1]);
			if (r >= 0 && v[0] > UINT32_MAX)
				r = -EUCLEAN;
			int64_t t = sqlite3_column_int64(s, 0);
			if (r >= 0 && pass == 0)
				r = tier_cb(&(CatalogHistoryTier) { .t = t, .tier = (uint32_t) v[0], .capacity = v[1], .used = v[2],
								    .files = v[3], .logical = v[4], .stored = v[5] },
					    userdata);
			else if (r >= 0)
				r = class_cb(&(CatalogHistoryClass) { .t = t, .file_class = (uint32_t) v[0], .files = v[1],
								      .logical = v[2], .hot_logical = v[3] },
					     userdata);
			if (r < 0)
				break;
		}
		if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
			r = catalog_result(rc);
		finish(s);
	}
	unlock(c);
	return r;
}

int catalog_key_id_get(Catalog *c, uint8_t ret[static CATALOG_DIGEST_SIZE]) {
	int r, rc;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_KEY_ID_GET);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		r = sqlite3_column_bytes(s, 0) == CATALOG_DIGEST_SIZE ? 0 : -EUCLEAN;
		if (r == 0)
			memcpy(ret, sqlite3_column_blob(s, 0), CATALOG_DIGEST_SIZE);
	} else
		r = rc == SQLITE_DONE ? -ENOENT : catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_key_id_add(Catalog *c, const uint8_t id[static CATALOG_DIGEST_SIZE]) {
	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_KEY_ID_ADD);
	int r = s ? 0 : catalog_result(sqlite3_errcode(c->db));
	if (s) {
		sqlite3_bind_blob(s, 1, id, CATALOG_DIGEST_SIZE, SQLITE_STATIC);
		sqlite3_bind_int64(s, 2, clock_ns(CLOCK_REALTIME));
		r = step_done(c, s);
	}
	unlock(c);
	return r;
}

int catalog_key_usage_foreach(Catalog *c,
			      int (*cb)(uint32_t tier, const uint8_t *key_id, uint64_t containers, uint64_t bytes,
					void *userdata),
			      void *userdata) {
	int r = 0, rc;

	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_KEY_USAGE);
	if (!s) {
		r = catalog_result(sqlite3_errcode(c->db));
		goto out;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		uint8_t id[CATALOG_DIGEST_SIZE];
		bool keyed = sqlite3_column_bytes(s, 1) == CATALOG_DIGEST_SIZE;
		if (keyed)
			memcpy(id, sqlite3_column_blob(s, 1), sizeof(id));
		r = cb((uint32_t) sqlite3_column_int64(s, 0), keyed ? id : NULL, (uint64_t) sqlite3_column_int64(s, 2),
		       (uint64_t) sqlite3_column_double(s, 3), userdata);
		if (r < 0)
			break;
	}
	if (r >= 0 && rc != SQLITE_DONE)
		r = catalog_result(rc);
	finish(s);
out:
	unlock(c);
	return r;
}

int catalog_rekey_set(Catalog *c, uint32_t tier, bool requested) {
	lock(c);
	sqlite3_stmt *s = stmt(c, requested ? STMT_REKEY_SET : STMT_REKEY_CLEAR);
	int r = s ? 0 : catalog_result(sqlite3_errcode(c->db));
	if (s) {
		sqlite3_bind_int64(s, 1, tier);
		if (requested)
			sqlite3_bind_int64(s, 2, clock_ns(CLOCK_REALTIME));
		r = step_done(c, s);
	}
	unlock(c);
	return r;
}

int catalog_rekey_is_requested(Catalog *c, uint32_t tier) {
	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_REKEY_GET);
	int r;
	if (!s)
		r = catalog_result(sqlite3_errcode(c->db));
	else {
		sqlite3_bind_int64(s, 1, tier);
		int rc = sqlite3_step(s);
		r = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : catalog_result(rc);
		finish(s);
	}
	unlock(c);
	return r;
}

int catalog_description_set(Catalog *c, uint32_t tier, uint64_t generation, bool present) {
	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_DESCRIPTION_SET);
	int r = s ? 0 : catalog_result(sqlite3_errcode(c->db));
	if (s) {
		sqlite3_bind_int64(s, 1, tier);
		sqlite3_bind_int64(s, 2, (int64_t) generation);
		sqlite3_bind_int(s, 3, present);
		r = step_done(c, s);
	}
	unlock(c);
	return r;
}

int catalog_description_get(Catalog *c, uint32_t tier, uint64_t *ret_generation, bool *ret_present) {
	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_DESCRIPTION_GET);
	int r;
	if (!s)
		r = catalog_result(sqlite3_errcode(c->db));
	else {
		sqlite3_bind_int64(s, 1, tier);
		int rc = sqlite3_step(s);
		r = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : catalog_result(rc);
		if (r == 0) {
			*ret_generation = (uint64_t) sqlite3_column_int64(s, 0);
			*ret_present = sqlite3_column_int(s, 1) != 0;
		}
		finish(s);
	}
	unlock(c);
	return r;
}

int catalog_chunks_any(Catalog *c) {
	lock(c);
	sqlite3_stmt *s = stmt(c, STMT_CHUNKS_ANY);
	int r;
	if (!s)
		r = catalog_result(sqlite3_errcode(c->db));
	else {
		int rc = sqlite3_step(s);
		r = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : catalog_result(rc);
		finish(s);
	}
	unlock(c);
	return r;
}
