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

#define CATALOG_SCHEMA_VERSION 12
#define CATALOG_ROOT_INO 1
#define CATALOG_NAME_MAX 255
#define CATALOG_SYMLINK_MAX 4095
#define CATALOG_XATTR_NAME_MAX 255
#define CATALOG_XATTR_VALUE_MAX 65536
#define CATALOG_XATTR_LIST_MAX 65536

typedef struct Catalog Catalog;

/* Where a file's bytes live. */
typedef enum CatalogFileState {
	CATALOG_FILE_RAW = 0,     /* in its staging file, on the hot tier unless it spilled */
	CATALOG_FILE_SEALED = 1,  /* in chunks, through its recipe; no staging file */
	_CATALOG_FILE_STATE_MAX,
} CatalogFileState;

#define CATALOG_DIGEST_SIZE 32
#define CATALOG_RECIPE_SEGMENT_MAX (1u << 20)

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
	uint32_t file_class;   /* policy class the file was given at creation */
	uint32_t tier;         /* sealed files: the tier holding their chunks; raw files: their staging file's */
	uint64_t stored;       /* sealed files: frame bytes of their distinct chunks */
} CatalogInode;

/* A container: an append-only file of chunk frames on one tier. */
typedef struct CatalogContainer {
	uint64_t id;
	uint32_t tier;
	uint64_t size;         /* bytes durable and committed; anything past it is garbage */
	uint64_t live_bytes;   /* frame bytes of chunks still referenced */
	bool full;             /* no more appends */
	bool keyed;            /* its sealed regions are sealed under key_id (else it holds none) */
	uint8_t key_id[32];    /* CATALOG_DIGEST_SIZE: the fingerprint of that key (dedup/key.h) */
} CatalogContainer;

/*
 * Where one unique chunk of a tier is stored: in a compression region
 * (region_size > 0: the region's region_size bytes start at offset, and the
 * chunk's plain_size bytes at region_offset in what they decompress to), or
 * in a chunk frame of its own (region_size 0: frame_size bytes at offset;
 * containers written before regions).  frame_size is what the chunk costs
 * in its container, its share of the region: the live bytes of a container
 * are the frame sizes of its referenced chunks.
 */
typedef struct CatalogChunk {
	uint64_t id;
	uint32_t tier;
	uint8_t digest[CATALOG_DIGEST_SIZE];
	uint64_t container;
	uint64_t offset;
	uint32_t frame_size;
	uint32_t plain_size;
	uint64_t refs;
	uint32_t region_size;
	uint32_t region_offset;
} CatalogChunk;

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

/*
 * Gives free pages back to the filesystem (in steps that hold the catalog
 * lock CATALOG_VACUUM_BUDGET_NS each, up to CATALOG_VACUUM_CALL_NS per
 * call: many may take several calls; the threads waiting for the lock have
 * it between two steps), copies the WAL into the
 * database file, syncs it, and cuts the WAL to zero bytes.  SQLite (or the
 * checkpointer, below) checkpoints every ~4 MiB of WAL but never shrinks
 * the file; the daemon calls this when it runs out of background work, so
 * an idle catalog takes only its real size on the hot tier.  Every commit so
 * far is durable when it returns 0.  Must not be called inside a
 * transaction (-EBUSY).
 */
int catalog_checkpoint(Catalog *c);

/*
 * From now on the WAL is checkpointed by a thread of the catalog's, on a
 * connection of its own, outside the catalog lock: a commit that fills the
 * WAL past CATALOG_WAL_CHECKPOINT_PAGES wakes it, instead of checkpointing
 * itself while holding the lock; past CATALOG_WAL_CHECKPOINT_MAX a commit
 * still checkpoints (the WAL stays bounded if the thread falls behind).
 * Durability is unchanged: a checkpoint syncs the database file before the
 * WAL is reused, and catalog_sync() syncs the WAL.  Call it after the
 * process forked for the last time (the thread does not survive a fork);
 * catalog_close() stops it.  Returns 0 (also if started already), -EINVAL
 * on a reader, -errno.
 */
int catalog_checkpointer_start(Catalog *c);

/* SQLite's own default for its automatic checkpoint: 1000 pages (4 MiB) of WAL. */
#define CATALOG_WAL_CHECKPOINT_PAGES 1000
#define CATALOG_WAL_CHECKPOINT_MAX (16 * CATALOG_WAL_CHECKPOINT_PAGES)
/*
 * The same two once the reserve was given back (catalog_out_of_room()):
 * a WAL of 4 MiB would take all of the reserve's room in frames that
 * repeat the same few pages, and the checkpoint that needs some of it to
 * grow the database file could not run.
 */
#define CATALOG_WAL_CHECKPOINT_PAGES_SHORT 16
#define CATALOG_WAL_CHECKPOINT_MAX_SHORT 64

/*
 * catalog_checkpoint() gives free pages back CATALOG_VACUUM_STEP_PAGES at a
 * time, holds the catalog lock for about CATALOG_VACUUM_BUDGET_NS at a
 * time, and for CATALOG_VACUUM_CALL_NS in all per call (the rest waits for
 * the next call): a merge frees the pages of every run it took, and moving
 * them all at once held the lock for minutes at 100M ids (bench/README.md,
 * "Merge hold, the rest").
 */
#define CATALOG_VACUUM_STEP_PAGES 8
#define CATALOG_VACUUM_BUDGET_NS (UINT64_C(20) * 1000 * 1000)
#define CATALOG_VACUUM_CALL_NS (UINT64_C(1000) * 1000 * 1000)

/*
 * Sets how long one step of catalog_checkpoint()'s vacuum holds the lock
 * (step_ns) and how much lock time a call spends on steps in all (call_ns;
 * a call that reaches it leaves the rest for the next):
 * CATALOG_VACUUM_BUDGET_NS and CATALOG_VACUUM_CALL_NS when opened.  A step
 * gives back CATALOG_VACUUM_STEP_PAGES at least (one incremental_vacuum)
 * and a call does one step at least, so 0 and 0 give back one statement's
 * pages per call (fewer only when fewer are free), whatever the machine's
 * speed.
 */
void catalog_vacuum_budget_set(Catalog *c, uint64_t step_ns, uint64_t call_ns);

/*
 * Room allocated to the file "<database>-reserve", given back when SQLite
 * finds the disk full so that the changes that free room or move data off
 * it still commit (catalog.c, invariant 7): CATALOG_RESERVE_MAX, or a
 * CATALOG_RESERVE_SHARE-th of a smaller filesystem.  Taken back after a
 * commit, at most every CATALOG_RESERVE_REFILL_NS, once the filesystem has
 * twice that free.
 */
#define CATALOG_RESERVE_MAX (UINT64_C(4) << 20)
#define CATALOG_RESERVE_SHARE 32
#define CATALOG_RESERVE_REFILL_NS (INT64_C(1000) * 1000 * 1000)

/* Counters since open, and the reserve.  Can't fail; takes no lock. */
typedef struct CatalogStats {
	unsigned lock_waiting;  /* threads waiting for the catalog lock now */
	uint64_t lock_waits;    /* acquisitions of the lock that had to wait */
	/*
	 * A merge batch or a vacuum step that let the lock go while threads
	 * waited for it, and waited until one of them had it before it went on.
	 */
	uint64_t lock_yields;
	uint64_t vacuum_calls;  /* catalog_checkpoint() calls that reached the vacuum */
	uint64_t vacuum_steps;  /* its committed steps (one transaction each) */
	uint64_t vacuum_pages;  /* free pages they gave back */
	uint64_t vacuum_cut;    /* calls that stopped at vacuum_call_ns with free pages left */
	uint64_t vacuum_left;   /* free pages the last call left */
	/*
	 * The room kept beside the database for commits on a full disk
	 * (CATALOG_RESERVE_MAX): its size, what of it is allocated now, and
	 * how many times it was given back to let a change through.
	 */
	uint64_t reserve_want;
	uint64_t reserve_held;
	uint64_t reserve_releases;
} CatalogStats;

void catalog_stats_get(Catalog *c, CatalogStats *ret);
/*
 * Whether the reserve is given back and not had again: the filesystem the
 * catalog is on filled, and commits that need more room than it had (a
 * move's rows, a checkpoint that grows the database) fail with -ENOSPC
 * until it has room again.  Takes the reserve back first if that
 * filesystem has room again (as a commit does); takes the catalog lock.
 */
bool catalog_out_of_room(Catalog *c);
/* The same as it stands, without the lock or a try to take the reserve back: for the write path. */
bool catalog_reserve_given_back(Catalog *c);

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
/*
 * What an archived redo log's own header says (tier/oracle-header.h), kept
 * per file so that archivelogs can be found by thread and sequence (recall
 * before a recovery) and reported by database, whatever their names.
 */
typedef struct CatalogArchivelog {
	uint32_t dbid;
	char db_name[9];          /* NUL-terminated */
	uint32_t resetlogs_id;
	uint16_t thread;
	uint32_t sequence;
	uint64_t low_scn;
	uint64_t next_scn;
	int64_t low_time;         /* Unix seconds */
	int64_t next_time;
} CatalogArchivelog;

/* Records (or replaces) ino's archivelog header.  -EINVAL for a db_name that is not NUL-terminated. */
int catalog_archivelog_set(Catalog *c, uint64_t ino, const CatalogArchivelog *a);
/* -ENOENT when ino has none (not an archived log, or its header did not parse). */
int catalog_archivelog_get(Catalog *c, uint64_t ino, CatalogArchivelog *ret);
/*
 * Calls cb, in (thread, sequence) order, for every recorded log of thread
 * (0: every thread) with first <= sequence <= last, of database dbid (0:
 * any).  Same rule for cb as for catalog_orphans_foreach().
 */
int catalog_archivelogs_foreach(Catalog *c, uint32_t dbid, uint16_t thread, uint32_t first, uint32_t last,
				int (*cb)(uint64_t ino, const CatalogArchivelog *a, void *userdata), void *userdata);

/*
 * Pins: files the operator keeps on the hot tier (tierctl pin), whatever the
 * policy says.  catalog_pin_set() is idempotent; a deleted inode loses its pin.
 * catalog_pinned() returns 1 or 0, or <0 on error.
 */
int catalog_pin_set(Catalog *c, uint64_t ino, bool pinned);
int catalog_pinned(Catalog *c, uint64_t ino);

/* Visits the regular files in a state (sealing work left from before a restart); same rule for cb. */
int catalog_files_foreach_state(Catalog *c, CatalogFileState state, int (*cb)(uint64_t ino, void *userdata),
				void *userdata);
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

/*
 * Containers.  new assigns a never reused id.  foreach visits the containers
 * of a tier (all tiers if tier == UINT32_MAX) in id order; cb must not call
 * into the catalog.
 */
int catalog_container_new(Catalog *c, uint32_t tier, uint64_t *ret_id);
/* As catalog_container_new(), for a container whose regions are sealed under key key_id (NULL: none). */
int catalog_container_new_keyed(Catalog *c, uint32_t tier, const uint8_t *key_id, uint64_t *ret_id);
int catalog_container_get(Catalog *c, uint64_t id, CatalogContainer *ret);
int catalog_container_update(Catalog *c, const CatalogContainer *ct);
int catalog_container_delete(Catalog *c, uint64_t id);
int catalog_containers_foreach(Catalog *c, uint32_t tier, int (*cb)(const CatalogContainer *ct, void *userdata),
			       void *userdata);

/*
 * Foreign containers (global dedup on a shared tier, docs/SHARED.md):
 * another host's container, host and remote (its id there), that chunks
 * of this catalog point into.  Their rows have an id of this catalog
 * (CatalogChunk.container), no object of this host, and are never
 * visited by catalog_containers_foreach().
 */
#define CATALOG_HOST_MAX 32
/* The row of (tier, host, remote), made if missing (full, size 0).  Returns 0, -EINVAL, or an error. */
int catalog_container_foreign(Catalog *c, uint32_t tier, const char *host, uint64_t remote, uint64_t *ret_id);
/* Visits the foreign containers of a tier in id order; cb must not call into the catalog. */
int catalog_containers_foreach_foreign(Catalog *c, uint32_t tier,
				       int (*cb)(uint64_t id, const char *host, uint64_t remote, void *userdata),
				       void *userdata);
/* Deletes the foreign containers of tier no chunk points into any more; *ret_deleted (may be NULL) their count. */
int catalog_containers_foreign_prune(Catalog *c, uint32_t tier, uint64_t *ret_deleted);

/*
 * Chunks: the index from (tier, digest) to a stored frame, with reference
 * counts.  add gives the chunk refs == ch->refs and adds its frame to the
 * container's live bytes; ref adds delta (may be negative) to refs and keeps
 * live_bytes in step when refs crosses zero.  A chunk at refs 0 is dead and
 * waits for the collector.
 */
int catalog_chunk_find(Catalog *c, uint32_t tier, const uint8_t digest[CATALOG_DIGEST_SIZE], CatalogChunk *ret);
int catalog_chunk_get(Catalog *c, uint64_t id, CatalogChunk *ret);
/*
 * catalog_chunk_get() of n chunks in one read transaction (or in the
 * caller's): ret[i] and ret_r[i] (0, -ENOENT, or an error) for ids[i].
 * Any order and repeats are fine; ids rising by small steps (a file's new
 * chunks in recipe order) cost least: each such run is one walk along the
 * table.  Returns 0, or an error when none could be looked up.
 */
int catalog_chunks_get(Catalog *c, const uint64_t *ids, size_t n, CatalogChunk *ret, int *ret_r);
/*
 * Adds a chunk row and its digest to the index.  Returns 0, -EEXIST (the
 * tier holds the digest already: nothing is modified), or an error (in a
 * transaction of the caller's, which it rolls back; outside one, nothing
 * is modified: so for retire and delete too).  It looks the digest up in every
 * table of the index, a random read of each run when the index is large:
 * a writer that knows better calls catalog_chunk_add_new().
 */
int catalog_chunk_add(Catalog *c, const CatalogChunk *ch, uint64_t *ret_id);
/*
 * As catalog_chunk_add(), for a digest the caller knows was never
 * committed to this tier's index: only the recent table is checked.  The
 * caller's knowledge must have no false negatives and cover every commit
 * before its own (dedup/'s chunk filter, with each id added before the
 * commit that adds it here); a duplicate that gets past it makes the next
 * merge (catalog_index_merge_step()) fail with -EUCLEAN.
 */
int catalog_chunk_add_new(Catalog *c, const CatalogChunk *ch, uint64_t *ret_id);
/*
 * Adds deltas[i] to the refs of chunk ids[i], for n distinct ids (in
 * ascending order, the table's: each row's page is then met once), and
 * each container's live bytes by the frames whose refs crossed zero, in
 * one update per container.  Returns 0, -ENOENT (an id with no row),
 * -EUCLEAN (refs would fall below zero), or another error: in a
 * transaction of the caller's, which it rolls back; outside one, nothing
 * is modified.
 */
int catalog_chunks_ref(Catalog *c, const uint64_t *ids, const int64_t *deltas, size_t n);
/* catalog_chunks_ref() of one chunk. */
int catalog_chunk_ref(Catalog *c, uint64_t id, int64_t delta);
/*
 * Points chunk to->id at a new location (compaction): to's container,
 * offset, frame_size, region_size and region_offset; live bytes move with
 * it.
 */
int catalog_chunk_move(Catalog *c, const CatalogChunk *to);
/*
 * Takes a damaged chunk out of the index: its digest is replaced by one no
 * chunk can have (0xff x 8, then its id), so new data with that content is
 * stored afresh instead of deduplicated against bytes that fail their checks.
 * Files already referencing it keep it (and keep failing with EIO).
 */
int catalog_chunk_retire(Catalog *c, uint64_t id);
/* Deletes a dead chunk (refs 0); -EBUSY if it is referenced again. */
int catalog_chunk_delete(Catalog *c, uint64_t id);
/* Visits the chunks of one container in offset order; cb must not call into the catalog. */
int catalog_chunks_foreach_in_container(Catalog *c, uint64_t container,
					int (*cb)(const CatalogChunk *ch, void *userdata), void *userdata);
/* Visits the dead chunks (refs 0) of a tier, through an index of them alone; same rule for cb. */
int catalog_chunks_foreach_dead(Catalog *c, uint32_t tier, int (*cb)(const CatalogChunk *ch, void *userdata),
				void *userdata);
/* Visits every chunk of a tier, in id order (one scan of the chunk table); same rule for cb. */
int catalog_chunks_foreach(Catalog *c, uint32_t tier, int (*cb)(const CatalogChunk *ch, void *userdata),
			   void *userdata);

/* The number of chunks of a tier, retired ones aside (from the digest index alone). */
int catalog_chunks_count(Catalog *c, uint32_t tier, uint64_t *ret);
/*
 * Visits the digest of every chunk of a tier but the retired ones (same
 * rule for cb), table by table of the digest index, reading it alone:
 * smaller than the table that catalog_chunks_foreach() reads, and a store
 * builds its filter from it at every start.
 */
int catalog_chunk_digests_foreach(Catalog *c, uint32_t tier,
				  int (*cb)(const uint8_t digest[CATALOG_DIGEST_SIZE], void *userdata), void *userdata);

/*
 * The digest index (schema 12): (tier, digest) -> chunk id, kept apart from
 * the chunk rows so that a new chunk costs an insert into a small recent
 * table (the only table seals write: it stays in the page cache) instead of
 * a random read and write of one large B-tree.  A merge (catalog_index_merge_step())
 * moves the recent table, once it holds more than recent_max ids, into a
 * sorted run written once in digest order (SQLite appends it), together
 * with the smaller runs: the runs of each level (a run of level L holds
 * about recent_max * CATALOG_INDEX_FANOUT^L ids) are merged into the next
 * when there are CATALOG_INDEX_FANOUT - 1 of them, so an id is rewritten
 * about log8(ids / recent_max) times and at most 7 runs per level are
 * looked in.  Look-ups, retire and delete cover every table.
 */
#define CATALOG_INDEX_RECENT_MAX (UINT64_C(128) << 10)
#define CATALOG_INDEX_FANOUT 8u

/*
 * A batch of a merge, each a transaction of its own, writes or deletes
 * CATALOG_INDEX_MERGE_BATCH rows at most (about 20 ms of CPU), and stops
 * early once it has held the catalog lock CATALOG_INDEX_MERGE_BUDGET_NS:
 * a catalog larger than the page cache reads its pages from the disk, and
 * rows alone then let one batch hold the lock for seconds (bench/README.md,
 * index-scale).
 */
#define CATALOG_INDEX_MERGE_BATCH (UINT64_C(8) << 10)
#define CATALOG_INDEX_MERGE_BUDGET_NS (UINT64_C(20) * 1000 * 1000)

typedef struct CatalogIndexMerge {
	uint64_t run;       /* the new run's number */
	uint64_t recent;    /* ids taken from the recent table (when counted) */
	unsigned runs;      /* runs merged with them */
	uint64_t from_runs; /* ids those runs held when written */
	uint64_t entries;   /* ids written into the new run so far */
	unsigned level;     /* its level, by those */
	bool done;          /* this batch made the new run live */
} CatalogIndexMerge;

/*
 * Does one batch of a merge of the index, in a transaction of its own: the
 * catalog lock is held for that batch alone, so the FUSE threads wait for
 * a batch at most, never for a whole merge (if threads waited for the lock
 * when the batch let it go, it returns once one of them has had it: a
 * caller asking again at once would otherwise take it straight back).
 * With no merge under way and more than recent_max ids in the recent
 * table, the first batch starts one: the recent table is frozen (renamed:
 * a fresh one takes new ids) and the runs due (above) marked; the batches
 * then copy them, in (tier, digest) order, into a new run that look-ups
 * skip until the batch that swaps it in and drops them (their rows go in
 * the batches after).  The frozen table and the runs stay complete and
 * looked in until the swap; retire and delete take an entry out of the new
 * run too.  The merge's state is in the catalog alone: after a crash (or a
 * stop between batches) the next call resumes it where it stopped.  A
 * batch writes or deletes batch rows at most, and no more once it has held
 * the lock budget_ns (wall clock; 0: no bound but rows), but one row at
 * least, so that every merge ends; the commit that ends it comes after.
 * Returns 1 (a batch done, the merge goes on: call again; *ret, when ret
 * is not NULL, describes the merge, untouched by a batch that only deletes
 * rows), 0 (nothing to do, or this batch ended the merge: the next call
 * starts another if one is due), -EBUSY (called inside a transaction),
 * -EUCLEAN (a digest in two tables: the new run is dropped in the next
 * batches, the frozen table and the runs stay as they were, and a later
 * merge meets the same duplicate), or an error.
 */
int catalog_index_merge_step(Catalog *c, uint64_t recent_max, uint64_t batch, uint64_t budget_ns,
			     CatalogIndexMerge *ret);
/*
 * Whether catalog_index_merge_step() has work: 1 (a merge under way, or
 * more than recent_max ids in the recent table; *ret_recent, its ids), 0,
 * or an error.  Cheap when nothing is due: the catalog counts the ids it
 * added since it last looked.
 */
int catalog_index_merge_due(Catalog *c, uint64_t recent_max, uint64_t *ret_recent);

typedef struct CatalogIndexState {
	uint64_t recent;    /* ids in the recent table */
	uint64_t frozen;    /* ids in the frozen recent table of a merge under way (or of a failed one) */
	uint64_t runs;      /* sorted runs looked in */
	uint64_t in_runs;   /* ids they held when written (retire and delete take some out since) */
	bool merging;       /* a merge is under way: a run is being written or dropped */
} CatalogIndexState;
/* The index's tables now.  Returns 0 or an error. */
int catalog_index_get(Catalog *c, CatalogIndexState *ret);

/*
 * Recipes: a sealed file is a sequence of segments, each an opaque blob (at
 * most CATALOG_RECIPE_SEGMENT_MAX bytes, encoded by dedup/) keyed by the file
 * offset it starts at.  find returns the segment covering offset: the one
 * with the largest start <= offset.  Blobs handed to callbacks are borrowed:
 * valid during the callback only.
 */
int catalog_recipe_put(Catalog *c, uint64_t ino, uint64_t offset, const void *blob, size_t size);
int catalog_recipe_find(Catalog *c, uint64_t ino, uint64_t offset,
			int (*cb)(uint64_t start, const void *blob, size_t size, void *userdata), void *userdata);
int catalog_recipe_foreach(Catalog *c, uint64_t ino,
			   int (*cb)(uint64_t start, const void *blob, size_t size, void *userdata), void *userdata);
int catalog_recipe_delete(Catalog *c, uint64_t ino);

/*
 * For reports (the daemon's control socket): a second, read-only connection
 * to c's database.  In WAL mode its reads never wait for c's writers and
 * take none of c's locks, so a long report does not stall the filesystem;
 * each statement sees one committed state.  Close it with catalog_close().
 * Returns: 0, -EPROTONOSUPPORT (schema not the current one), -ENOMEM, or a
 * SQLite error.
 */
int catalog_open_reader(Catalog *c, Catalog **ret);

/*
 * Visits every regular file with links, in inode order.  For a raw file
 * size is advisory (the staging file is authoritative).  The catalog lock is
 * held during the callbacks: cb must not call into the catalog.
 */
int catalog_files_foreach(Catalog *c, int (*cb)(const CatalogInode *ci, void *userdata), void *userdata);

/*
 * Copies one name of ino (the oldest of its links) into name and its
 * directory into *ret_parent: with CatalogInode.parent of directories, the
 * way from a file up to the root.  Returns 0, -ENOENT (no link), -ERANGE.
 */
int catalog_dirent_find(Catalog *c, uint64_t ino, uint64_t *ret_parent, char *name, size_t size);

typedef struct CatalogFileTotals {
	uint64_t files[_CATALOG_FILE_STATE_MAX]; /* regular files with links, per state */
	uint64_t bytes[_CATALOG_FILE_STATE_MAX]; /* their sizes (advisory for raw files, see CatalogInode) */
} CatalogFileTotals;

/* Counts and sizes of the regular files per state, in one aggregate query. */
int catalog_files_totals(Catalog *c, CatalogFileTotals *ret);

/*
 * Usage over time: one sample per tier and per file class at time t (Unix
 * seconds), for the charts of the reports.  A sample at a time already
 * recorded replaces it.
 */
typedef struct CatalogHistoryTier {
	int64_t t;
	uint32_t tier;
	uint64_t capacity;        /* of the filesystem or share holding the tier; 0 when not reachable */
	uint64_t used;            /* likewise, by anything on it */
	uint64_t files;           /* regular files placed on the tier */
	uint64_t logical;         /* their sizes */
	uint64_t stored;          /* the tier's containers, plus its raw files' staging blocks */
} CatalogHistoryTier;

typedef struct CatalogHistoryClass {
	int64_t t;
	uint32_t file_class;
	uint64_t files;           /* of the class, on every tier */
	uint64_t logical;         /* their sizes */
	uint64_t hot_logical;     /* of those on the hot tier */
} CatalogHistoryClass;

/* Records one sample in one transaction, and forgets samples older than keep_since. */
int catalog_history_add(Catalog *c, const CatalogHistoryTier *tiers, size_t n_tiers,
			const CatalogHistoryClass *classes, size_t n_classes, int64_t keep_since);
/* Visits the samples since a time: every tier row in time order, then every class row; cbs must not call into c. */
int catalog_history_foreach(Catalog *c, int64_t since, int (*tier_cb)(const CatalogHistoryTier *h, void *userdata),
			    int (*class_cb)(const CatalogHistoryClass *h, void *userdata), void *userdata);

/*
 * What moves into a tier brought (files migrated or recalled there, each
 * counted once per move): logical bytes, what their chunks took on the
 * tiers they came from, and what they take on this one after being
 * compressed again at its level.  Both sides are the frame bytes of each
 * file's distinct chunks (dedup_file_usage()), so dedup does not blur the
 * comparison.
 */
typedef struct CatalogTierMoved {
	uint64_t files;
	uint64_t logical;
	uint64_t source_stored;
	uint64_t stored;
} CatalogTierMoved;

/* Adds one moved file to tier's counters. */
int catalog_tier_moved_add(Catalog *c, uint32_t tier, uint64_t logical, uint64_t source_stored, uint64_t stored);
/* The counters of tier (all zero if nothing moved there). */
int catalog_tier_moved_get(Catalog *c, uint32_t tier, CatalogTierMoved *ret);

/*
 * The fingerprint of the newest key the data is written under (dedup/key.h).
 * Returns: 0, -ENOENT (no key: the data is not encrypted), -EUCLEAN, -errno.
 */
int catalog_key_id_get(Catalog *c, uint8_t ret[static CATALOG_DIGEST_SIZE]);
/* Records a key's fingerprint.  Returns: 0, -EEXIST (recorded already), -errno. */
int catalog_key_id_add(Catalog *c, const uint8_t id[static CATALOG_DIGEST_SIZE]);
/*
 * Visits, per tier and key (in tier order; key_id NULL for containers of
 * no sealed region), the containers and their committed bytes: what each
 * key protects.  cb must not call into the catalog.  Returns: 0, cb's
 * negative return, -errno.
 */
int catalog_key_usage_foreach(Catalog *c,
			      int (*cb)(uint32_t tier, const uint8_t *key_id, uint64_t containers, uint64_t bytes,
					void *userdata),
			      void *userdata);
/*
 * A rekey of tier asked for (tierctl rekey) and not finished: kept across
 * restarts, so the daemon resumes it.  set records or clears it;
 * is_requested returns 1 or 0.  Returns: as said, or -errno.
 */
int catalog_rekey_set(Catalog *c, uint32_t tier, bool requested);
int catalog_rekey_is_requested(Catalog *c, uint32_t tier);
/*
 * The generation of the last description written to tier (present) or
 * removed from it (not present): set records it, get reads it back.
 * Returns: 0, -ENOENT (get: none recorded), or -errno.
 */
int catalog_description_set(Catalog *c, uint32_t tier, uint64_t generation, bool present);
int catalog_description_get(Catalog *c, uint32_t tier, uint64_t *ret_generation, bool *ret_present);
/* Whether any chunk is stored on any tier.  Returns: 1, 0, or -errno. */
int catalog_chunks_any(Catalog *c);

/* Integrity check of the database file (PRAGMA integrity_check + foreign_key_check). */
int catalog_check(Catalog *c);
