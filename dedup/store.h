/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The chunk store of one tier: turns a file's bytes into a recipe of
 * deduplicated chunks, compressed together in regions (dedup/region.h) in
 * containers, and a recipe back into bytes.  The catalog (catalog/) holds the chunk index, reference counts,
 * container sizes and recipes; the containers live on a DedupBackend
 * (dedup/backend.h) that tier/ provides.
 *
 * Life of a file:
 *
 *   dedup_writer_new()                          (outside any catalog transaction)
 *   dedup_writer_feed() ... dedup_writer_feed()    chunk, dedup, compress, append
 *   dedup_writer_finish()                          last chunk; frames durable
 *   dedup_writer_join(w, next)                     a file in parts: next's part after w's
 *   catalog_begin()                             (the caller)
 *     dedup_writer_commit(ino)                     refs + recipe, in the caller's transaction
 *     ...the caller flips the inode to sealed...
 *   catalog_commit()                            (the caller)
 *   dedup_writer_free()
 *
 *   dedup_file_read() / dedup_file_write_to_fd()   any thread, any time
 *   catalog_begin(); dedup_file_drop(ino); ...; catalog_commit()
 *   dedup_store_gc()                               deletes what is no longer referenced
 *
 * A writer gathers the new chunks of its file, in file order, into a
 * compression region of about region_size plain bytes, compresses it as
 * one zstd frame, and appends it to the store's open container; each chunk
 * keeps its own id, index entry and reference count.  A reader decodes a
 * region once into the region cache and serves every chunk of it from
 * there.  Containers written before regions (chunk frames) are read the
 * same way, a frame being a unit of one chunk.
 *
 * How a write is made durable and committed (the "atomic seal"): a writer
 * appends regions to the store's open container and, every
 * DedupStoreOptions.sync_bytes of frames and at finish(), fsyncs the
 * containers it wrote to and only then registers the new chunks in the
 * catalog in a short transaction of the store's own, with refs 0 and the
 * containers' committed sizes raised to cover them.  commit() then only adds
 * references and writes the recipe, inside the caller's transaction.  So the
 * catalog never points at a frame that is not durable; a writer that is
 * freed uncommitted, or a caller's transaction that rolls back, leaves
 * chunks at refs 0 and frames nobody references: garbage the collector
 * reclaims.  Bytes past a container's committed size are frames whose
 * registration never happened: dedup_store_open() cuts them off.
 *
 * Concurrency: every call is thread-safe unless noted.  Any number of
 * writers and readers run at once; writers never wait for each other (a
 * new chunk another writer is storing is taken from it once registered,
 * or stored again if it is not by finish()); reads never wait for writers; the
 * collector excludes writers only while it deletes chunks and blocks readers
 * only while it unlinks container objects.
 *
 * (!) Calls that may take a catalog transaction of the store's own or wait
 * for the collector must not be made while the calling thread holds an open
 * catalog transaction: dedup_store_open(), dedup_writer_new(),
 * dedup_writer_feed(), dedup_writer_finish(), dedup_store_gc(),
 * dedup_store_stats().  dedup_writer_commit() and dedup_file_drop() must be
 * made inside one.  dedup_file_read() and dedup_file_write_to_fd() may be
 * made either way.  Every call may take the catalog lock (reads look up
 * recipes and chunk locations): under the daemon's lock order (catalog
 * first), call none of them while holding a lock that ranks after it.
 *
 * Errors are negative errno values.  Corrupt stored data (a frame that fails
 * its checks, a recipe that does not decode, an index entry that contradicts
 * the frame it points at) is -EIO, and never produces wrong bytes.  The store
 * logs nothing; callers log.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "catalog/catalog.h"
#include "dedup/backend.h"
#include "dedup/key.h"
#include "dedup/cache.h"
#include "dedup/chunker.h"
#include "dedup/recipe.h"

#define DEDUP_STORE_CONTAINER_SIZE_DEFAULT (UINT64_C(32) << 20)
#define DEDUP_STORE_CONTAINER_SIZE_MIN (UINT64_C(16) << 10)
#define DEDUP_STORE_CONTAINER_SIZE_MAX (UINT64_C(1) << 30)
#define DEDUP_STORE_REGION_CACHE_DEFAULT ((size_t) 64 << 20)
#define DEDUP_STORE_LOCALITY_CHUNKS_DEFAULT ((size_t) 1 << 18)
#define DEDUP_STORE_SEGMENT_CACHE_DEFAULT 16u
#define DEDUP_STORE_SEGMENT_CACHE_MAX 4096u
#define DEDUP_STORE_READAHEAD_DEFAULT ((size_t) 4 << 20)
#define DEDUP_STORE_READAHEAD_MAX ((size_t) 64 << 20)
#define DEDUP_STORE_SYNC_BYTES_DEFAULT (UINT64_C(64) << 20)
#define DEDUP_STORE_ENCODE_WORKERS_MAX 64u
/* Pass as zstd_level to dedup_writer_new() to use DedupStoreOptions.zstd_level. */
#define DEDUP_STORE_LEVEL_DEFAULT (-1000)
/* Pass as region_size to dedup_writer_new() to use DedupStoreOptions.region_size. */
#define DEDUP_STORE_REGION_DEFAULT 0u

typedef struct DedupStore DedupStore;
typedef struct DedupWriter DedupWriter;

typedef enum DedupVerify {
	DEDUP_VERIFY_AUTO,     /* content hash on every tier but tier 0 (the hot tier) */
	DEDUP_VERIFY_CHECKSUM, /* frame checksums and checks only */
	DEDUP_VERIFY_CONTENT,  /* checksums and the SHA-256 of every chunk read */
	_DEDUP_VERIFY_MAX,
} DedupVerify;

/*
 * A store on a tier shared by many hosts, with global dedup
 * (docs/SHARED.md): what tier/ gives it of the tier beyond the host's own
 * view (the store's backend).  Everything borrowed: it must outlive the
 * store.
 */
typedef struct DedupShared {
	const char *host;   /* this host's name on the tier ([a-z0-9_-]{1,32}) */
	DedupBackend *root; /* the tier's root: other hosts' segments and containers are read there, never written */
	/* The name on root of object `name` of host's own view; -EINVAL if it does not fit. */
	int (*object_name)(const char *host, const char *name, char ret[static DEDUP_BACKEND_NAME_MAX + 1]);
	/*
	 * Calls cb with the name of every host registered on root that is not
	 * retired (this one included); cb's negative return stops it and is
	 * returned.  cb may not call into root.
	 */
	int (*hosts)(DedupBackend *root, int (*cb)(const char *host, void *userdata), void *userdata);
	/*
	 * As hosts, for collection: every host that may still hold references
	 * (a record that is damaged included: only `retired` leaves out; one
	 * that cannot be read fails the listing).
	 */
	int (*holders)(DedupBackend *root, int (*cb)(const char *host, void *userdata), void *userdata);
	uint64_t lease_s; /* this host's lease, written into its reference publications */
} DedupShared;

/*
 * For tierctl report --by host (docs/SHARED.md): calls cb with every
 * container of another host (owner, its id there) that host's latest
 * reference publication on sh->root lists, in (owner, id) order; a host
 * without a publication that parses lists none.  cb may not call into
 * sh->root; its negative return stops the visit and is returned.  Returns
 * 0, or the error of listing or reading.
 */
int dedup_shared_references_foreach(const DedupShared *sh, const char *host,
				    int (*cb)(const char *owner, uint64_t container, void *userdata), void *userdata);
/* The id of a container from its object name in a store's view ("c/xx/ID.ftc"): 0, or -EINVAL for any other object. */
int dedup_store_container_object_parse(const char *name, uint64_t *ret_id);

/* Entries of other hosts' segments held in memory at most (DedupStoreOptions.global_entries). */
#define DEDUP_STORE_GLOBAL_ENTRIES_DEFAULT ((size_t) 4 << 20)
#define DEDUP_STORE_GLOBAL_ENTRIES_MAX ((size_t) 1 << 30)
/* Other hosts' segments are listed at most this often (writers ask). */
#define DEDUP_STORE_GLOBAL_REFRESH_MS 2000u

/* Every field 0 means its default; opts == NULL means all defaults. */
typedef struct DedupStoreOptions {
	uint64_t container_size;      /* target size of a container (MIN..MAX) */
	size_t region_cache_bytes;    /* decompressed regions kept for readers */
	size_t locality_cache_chunks; /* chunk ids the locality cache holds */
	size_t segment_cache;         /* decoded recipe segments kept for readers */
	size_t readahead_bytes;       /* fetched ahead of a sequential reader, along the recipe */
	uint64_t sync_bytes;          /* frames a writer appends between fsync + registration */
	int zstd_level;               /* for writers created with DEDUP_STORE_LEVEL_DEFAULT; 0 = zstd's */
	uint32_t region_size;         /* for writers created with DEDUP_STORE_REGION_DEFAULT (DEDUP_REGION_TARGET_MIN..MAX) */
	unsigned encode_workers;      /* threads compressing writers' regions beside them, started by the first writer
				       * (..DEDUP_STORE_ENCODE_WORKERS_MAX); 0 = none */
	int encode_nice;              /* their nice value; 0 = the opener's */
	DedupVerify verify;
	/*
	 * DEDUP_KEY_SIZE bytes (dedup/key.h, the id subkey), borrowed: it must
	 * outlive the store.  With it, chunk ids are HMAC-SHA-256 under it and
	 * units of plain ids fail verification; NULL: plain SHA-256 ids.
	 */
	const uint8_t *id_key;
	/*
	 * DEDUP_KEY_SIZE bytes (the content subkey), borrowed likewise: opens
	 * the sealed regions the store holds (docs/FORMAT.md, "Sealed region"),
	 * whether or not it seals new ones; without it they read -EIO.
	 */
	const uint8_t *content_key;
	/* DEDUP_KEY_SIZE bytes (the description subkey), borrowed likewise: seals the store's description. */
	const uint8_t *description_key;
	/*
	 * DEDUP_KEY_ID_SIZE bytes, borrowed likewise: the id of the key that
	 * content_key and description_key come from.  Each container records
	 * the key its regions are sealed under (none: a store that does not
	 * seal), and sealed regions name it by its tag (docs/FORMAT.md).
	 */
	const uint8_t *key_id;
	/*
	 * Older keys of the mount's key ring (dedup/key.h), borrowed likewise,
	 * or NULL: they open what they sealed; nothing new is sealed under them.
	 */
	const DedupOldKeys *old_keys;
	/*
	 * Seal every region this store writes (AES-256-GCM under content_key,
	 * bound to its container and offset) and its description (under
	 * description_key).  Needs all three keys.
	 */
	bool encrypt;
	/*
	 * Global dedup on a shared tier, or NULL: the store publishes index
	 * segments of the chunks it registers, looks chunks it would store up
	 * in the other hosts' segments first and references them instead
	 * (foreign chunks, read through shared->root and verified as every
	 * chunk of a lower tier), and deletes a container of its own only by
	 * the collection protocol across hosts (another host may reference
	 * it: docs/SHARED.md, "Safe collection"; dedup_store_gc()).  Other
	 * hosts' segments made under other keys (dedup_segment_keys()) are
	 * skipped and counted.
	 */
	const DedupShared *shared;
	size_t global_entries; /* bound of the merged lookup of other hosts' segments, in entries */
} DedupStoreOptions;

/*
 * Opens the store of `tier` over backend (borrowed: it must outlive the
 * store) and catalog (borrowed likewise).  Recovers from a crash: every
 * container not marked full is cut back to its committed size; an empty one
 * is removed; the newest one with room becomes the container new frames go
 * to, and the others are sealed (index trailer written, marked full).
 * Builds the chunk filter from the catalog (one pass over the tier's chunks).
 * Returns: 0 and *ret, -EINVAL (options), -ENOMEM, or a catalog/backend error.
 * A container that cannot be recovered (missing, shorter than committed,
 * corrupt) is left as it is: reads of its chunks fail with -EIO.
 */
int dedup_store_open(Catalog *catalog, uint32_t tier, DedupBackend *backend, const DedupStoreOptions *opts,
		     DedupStore **ret);

/*
 * Closes the store.  No writer may be alive and no call may be running.
 * The open container stays open (not full) for the next dedup_store_open().
 * Accepts NULL; returns NULL.
 */
DedupStore *dedup_store_free(DedupStore *s);

/*
 * Global dedup (DedupStoreOptions.shared): publishes the chunks registered
 * since the last publication as one index segment "i/EPOCH.fti" of the
 * store's backend (written as "i/EPOCH.fti.tmp", synced, renamed), the
 * next epoch.  Writers publish after each finish(); the daemon calls it to
 * retry one that failed.  One publication at a time; on error the chunks
 * wait for the next.  Not to be called holding a catalog transaction.
 * Returns: 0 (also when nothing waits or the store is not shared), or the
 * backend's error.
 */
int dedup_store_publish(DedupStore *s);

typedef struct DedupGlobalStats {
	bool shared;                 /* the store does global dedup */
	uint64_t bytes_sent;         /* bytes written to the tier's storage since open (regions, containers' headers
				      * and trailers, segments): what crossed to the filer */
	uint64_t segments_published; /* by this host since open */
	uint64_t chunks_unpublished; /* registered, waiting for the next publication */
	uint64_t hosts;              /* other hosts whose segments were loaded */
	uint64_t segments_loaded;    /* other hosts' segments in the merged lookup */
	uint64_t segments_other_key; /* skipped: made under other keys (ids or regions this host cannot use) */
	uint64_t segments_bad;       /* skipped: failed to parse, or not what their name says */
	uint64_t segments_over_bound;/* not loaded: the merged lookup is full (global_entries) */
	uint64_t entries;            /* in the merged lookup */
	uint64_t memory_bytes;       /* its RAM: entries and filter */
	uint64_t foreign_hits;       /* chunks found there and referenced instead of stored, since open */
	uint64_t foreign_bytes;      /* their plain bytes */
	uint64_t foreign_containers; /* other hosts' containers this host's chunks point into */
	uint64_t foreign_refused;    /* found there in a container its host condemned: stored again, since open */
	uint64_t condemnations_bad;  /* condemnations that did not load (their host's segments wait) */
	uint64_t condemned_waiting;  /* this host's condemned containers the last collection could not delete yet */
	char blocked_by[33];         /* a host it waited for ("" if none): not retired, and its latest reference
				      * publication lists one of them or has not acknowledged its condemnation */
} DedupGlobalStats;

/* The store's global dedup figures; the counters are since open.  Cheap; can't fail. */
void dedup_store_global_stats(DedupStore *s, DedupGlobalStats *ret);
/* DedupStoreOptions.description_key of s, for the mount's other readers of its tiers. */
const uint8_t *dedup_store_description_key(const DedupStore *s);
/* DedupStoreOptions.old_keys of s, or NULL. */
const DedupOldKeys *dedup_store_old_keys(const DedupStore *s);

/*
 * A writer for one file's bytes, chunked with params (NULL: the default
 * CDC parameters), its new chunks gathered into regions of region_size
 * plain bytes (DEDUP_REGION_TARGET_MIN..MAX, or DEDUP_STORE_REGION_DEFAULT)
 * compressed at zstd_level (DEDUP_FRAME_LEVEL_MIN..MAX, or
 * DEDUP_STORE_LEVEL_DEFAULT).  A writer is used by one thread at a time
 * (any thread; it may change threads between calls).  While any writer is
 * alive, the collector deletes nothing.
 * Returns: 0, -EINVAL, -ENOMEM, or the store's sticky write error (-EIO
 * after a failed fsync: the store must be reopened).
 */
int dedup_writer_new(DedupStore *s, const DedupChunkerParams *params, int zstd_level, uint32_t region_size,
		     DedupWriter **ret);

/*
 * Keeps the recipe's segments, as they are made, in fd (an empty file open
 * for reading and writing, an O_TMPFILE say, which w owns from now on and
 * closes) rather than in memory: the writer's memory then does not grow
 * with the file's size.  Without it they stay in memory, encoded, a
 * few bytes per chunk; so does the rest of them if fd stops taking more
 * (its disk full): a writer never fails for its spool's room.  Call it
 * before the first feed().
 * Returns: 0, -EINVAL (a spool already, or fed already; fd is closed).
 */
int dedup_writer_spool(DedupWriter *w, int fd);

/*
 * Recipe entries a writer holds waiting for the registration of its own
 * new chunks: with a spool, what its recipe's memory is bounded by (plus
 * one segment being gathered).  Past it the writer waits for that
 * registration, however fast it is fed.
 */
#define DEDUP_WRITER_OPEN_ENTRIES_MAX ((size_t) 16 * DEDUP_RECIPE_SEGMENT_ENTRIES_MAX)

/*
 * Feeds the next len bytes of the file.  All-zero chunks are recorded as
 * zero runs and never stored; every other chunk is looked up (this writer's
 * recent chunks, the filter, the locality cache, the catalog) and stored only
 * if new.
 * Returns: 0, or a negative errno after which the writer is dead (every
 * later call but free() returns the same error): -ENOSPC, -EIO, -ENOMEM,
 * -EFBIG (past DEDUP_RECIPE_FILE_SIZE_MAX), a catalog error, -EINVAL
 * (after finish()).
 */
int dedup_writer_feed(DedupWriter *w, const void *buf, size_t len);

/*
 * Ends the file: cuts the last chunk, appends the remaining frames, fsyncs
 * every container this writer wrote to and registers the new chunks (at refs
 * 0).  After it returns 0, commit() can only fail for catalog reasons, or
 * for want of memory or of its spool's bytes (-ENOMEM, -EIO).
 * Returns: as feed(); -EINVAL if called twice.
 */
int dedup_writer_finish(DedupWriter *w);

/*
 * Cuts the file where the bytes fed so far end: the chunk being cut ends
 * there, CDC and the Oracle splitter start afresh with the next byte (as
 * at the start of a file), and a zero run does not continue across.  So
 * the chunks are a function of the bytes and of where the cuts are, never
 * of how the bytes were fed or by how many writers (dedup_writer_join()).
 * Returns: as feed().
 */
int dedup_writer_cut(DedupWriter *w);

/*
 * A file sealed in parts, each by a writer of its own, on threads of their
 * own (the same store and chunker parameters, each writer fed the bytes of
 * one part, from a cut of the file to the next, and finished): appends the
 * recipe of next, the part that follows w's, to w's, and its stats to w's.
 * The recipe joined is the one a single writer fed every part with a
 * dedup_writer_cut() between them makes (up to chunk ids), and w's commit()
 * takes the references of every part.  next may not be committed or joined
 * again (-EINVAL); free it as usual, before or after w's commit.  Until the
 * commit, every part's chunks are registered at refs 0 only: a seal that
 * dies or fails leaves garbage, as one writer does.  A part that failed
 * fails w with its error.
 * Returns: 0, -EINVAL (not both finished, other stores or parameters,
 * joined already), -EFBIG, -ENOMEM, or next's error; w is dead after any.
 */
int dedup_writer_join(DedupWriter *w, DedupWriter *next);

/*
 * Inside the caller's catalog transaction: takes one reference on every
 * chunk per occurrence in the file (one catalog update per distinct chunk)
 * and writes the recipe segments of ino.  ino must have no recipe yet
 * (-EEXIST otherwise).  If the caller's transaction rolls back, the writer
 * is as before the call and commit() may be retried in a new transaction.
 * Returns: 0, -EINVAL (not finished, failed, or joined into another
 * writer), -EEXIST, a catalog error.
 */
int dedup_writer_commit(DedupWriter *w, uint64_t ino);

typedef struct DedupWriterStats {
	uint64_t logical_bytes;  /* bytes fed */
	uint64_t zero_bytes;     /* in all-zero chunks, not stored */
	uint64_t literal_bytes;  /* kept in the recipe (between Oracle blocks), not stored */
	uint64_t chunks;         /* chunks cut, zero ones included */
	uint64_t new_chunks;     /* stored by this writer */
	uint64_t new_bytes;      /* their plain bytes */
	uint64_t stored_bytes;   /* the bytes of the regions holding them, as appended */
	uint64_t regions;        /* regions appended */
	uint64_t dup_chunks;     /* found already stored (or earlier in this file) */
	uint64_t dup_bytes;
	uint64_t index_lookups;  /* chunks the filter and the locality cache could not answer: catalog lookups */
	uint64_t foreign_chunks; /* found in other hosts' segments (global dedup) and referenced, not stored */
	uint64_t foreign_bytes;
	uint64_t encode_wait_ns; /* its thread asleep until the store's encoders compressed its regions */
	uint64_t encode_cpu_ns;  /* the encoders' time on a CPU compressing its regions (of those waited for so far) */
	uint64_t recipe_memory;  /* bytes its recipe takes in memory now (not summed by join()) */
	uint64_t recipe_spool_memory; /* of them, segments spooled in memory (no spool file) */
} DedupWriterStats;

/* Can't fail. */
void dedup_writer_stats(const DedupWriter *w, DedupWriterStats *ret);

/*
 * Frees a writer.  If it was not committed (or its commit was rolled back),
 * its chunks stay at refs 0 and its frames are garbage for the collector.
 * Accepts NULL; returns NULL.
 */
DedupWriter *dedup_writer_free(DedupWriter *w);

/*
 * Reads up to len bytes of sealed file ino, file_size bytes long, at offset.
 * Returns the bytes read: len, fewer at the end of the file, 0 at or past it;
 * or -EIO (a chunk or recipe failed its checks, or the recipe does not
 * cover file_size), -ENOMEM, or a catalog/backend error.  Never returns
 * bytes that did not pass their checks.
 */
ssize_t dedup_file_read(DedupStore *s, uint64_t ino, uint64_t file_size, uint64_t offset, void *buf, size_t len);

/*
 * Writes the whole of sealed file ino into fd at the same offsets (pwrite),
 * skipping zero runs so they stay holes, and sets fd's size to file_size.
 * fd should be empty (zero runs are not written).
 * Returns: 0, as dedup_file_read(), or -errno of pwrite/ftruncate.
 */
int dedup_file_write_to_fd(DedupStore *s, uint64_t ino, uint64_t file_size, int fd);

/*
 * For a read-ahead pipeline (worker threads filling a window ahead of a
 * sequential reader, so that the reader's thread only copies): makes every
 * region (or version 1 frame) holding bytes [offset, offset + len) of
 * sealed file ino decoded, checked and cached in the store's region cache,
 * without copying anything out.  Units stored back to back in one container
 * are fetched with one large read (up to 8 MiB), so a window of a file
 * sealed front to back costs a few reads.  Each unit is decompressed once
 * whatever the number of threads asking: a unit another thread is loading
 * is left to it (a later dedup_file_read() waits for it if needed).
 * Thread-safe, any number of threads.  The cache is bounded
 * (DedupStoreOptions.region_cache_bytes, counted in dedup_store_stats() and
 * dedup_store_cache_stats()): prefetch no further ahead than a fraction of
 * it, or the window evicts itself before it is read.  dedup_file_read() of
 * the same range is then served from the cache (its own read-ahead finds
 * the units cached and adds nothing).  Not an error past the end of file,
 * and damage is not either: the read of those bytes reports it.
 * Returns: 0, -ENOMEM, or a catalog error (reading the recipe: -EIO if it
 * does not decode).
 */
int dedup_file_prefetch(DedupStore *s, uint64_t ino, uint64_t file_size, uint64_t offset, uint64_t len);

/* The region cache's figures (bytes held and bound, hits, misses, units loaded, waits).  Cheap; can't fail. */
void dedup_store_cache_stats(DedupStore *s, DedupRegionCacheStats *ret);

/*
 * Inside the caller's catalog transaction: drops the references ino's recipe
 * holds and deletes the recipe.  A file without a recipe is not an error.
 * Returns: 0, -EIO (the recipe does not decode), a catalog error (then the
 * caller rolls back).
 */
int dedup_file_drop(DedupStore *s, uint64_t ino);

/*
 * The same for a file whose tier has no open store (its storage was not
 * reachable at start): catalog work only, the tier is never touched.  Its
 * collector reclaims the frames once the store is opened again.
 */
int dedup_file_drop_unopened(Catalog *c, uint64_t ino);

/*
 * Migration: moves sealed file ino (file_size bytes) from store `from` to
 * store `to` (two tiers over the same catalog).  In two steps, like a
 * writer:
 *
 *   dedup_file_migrate()              outside any catalog transaction
 *   catalog_begin()                   (the caller)
 *     dedup_migration_commit()           the recipe moves to `to`; `from` loses its references
 *     ...the caller records the file's new tier...
 *   catalog_commit()                  (the caller)
 *   dedup_migration_free()
 *
 * dedup_file_migrate() reads the file through `from` (checked units only)
 * and stores it through a writer of `to`, chunked with the parameters its
 * recipe records, so it deduplicates against what `to` holds; chunks new to
 * `to` are gathered into regions of region_size and compressed at
 * zstd_level (as dedup_writer_new()): a colder tier with a higher level
 * keeps them smaller.  spool_fd, if not negative, takes the new recipe as it
 * is made (dedup_writer_spool(): the migration owns it from now on, also
 * on error), so that moving a file of any size takes the same memory.
 * When it returns 0 the copy is durable and registered on `to` and nothing of
 * `from` changed.  progress (optional) is called after each step with the
 * bytes copied so far; a negative return stops the copy and is returned.
 * The file must not change meanwhile: the caller checks before it commits
 * (a file that changed or lost its recipe fails the copy with -EIO, or is
 * the caller's to refuse).  On error, or if the migration is freed
 * uncommitted, the file stays whole on `from` and what was stored on `to`
 * is garbage for its collector.
 * Returns: 0 and *ret, -EINVAL (same store, different catalogs), -EIO (the
 * recipe or a frame failed its checks, or the recipe is shorter than
 * file_size), or as dedup_writer_new()/feed()/finish().
 */
typedef struct DedupMigration DedupMigration;
int dedup_file_migrate(DedupStore *from, DedupStore *to, uint64_t ino, uint64_t file_size, int zstd_level,
		       uint32_t region_size, int spool_fd, int (*progress)(uint64_t done, uint64_t total, void *userdata),
		       void *userdata, DedupMigration **ret);

/*
 * Inside the caller's catalog transaction: drops ino's recipe and its
 * references on `from`, writes the new recipe, with its references, on
 * `to`, and adds the move to `to`'s counters (catalog_tier_moved_add():
 * the frame bytes of the file's distinct chunks on `from` and on `to`).
 * If the transaction rolls back, commit() may be retried in a new one.
 * Returns: 0, -EIO (the old recipe does not decode), a catalog error.
 */
int dedup_migration_commit(DedupMigration *m);

/* What the copy stored on the target (new_bytes, stored_bytes) and found there already.  Can't fail. */
void dedup_migration_stats(const DedupMigration *m, DedupWriterStats *ret);

/* Accepts NULL; returns NULL.  Uncommitted: as dedup_writer_free(). */
DedupMigration *dedup_migration_free(DedupMigration *m);

typedef struct DedupGcOptions {
	/* Containers with live_bytes / size below this are compacted; 0 disables compaction. */
	double live_threshold;
	/* Stop compacting after copying this many bytes in one run; 0 = no limit. */
	uint64_t max_copy_bytes;
	/*
	 * Optional: called before compaction and after each container with the
	 * live bytes copied so far and those the candidates hold; a negative
	 * return stops the run there (every container is moved whole or not at
	 * all) and is returned.
	 */
	int (*progress)(uint64_t done, uint64_t total, void *userdata);
	void *userdata;
} DedupGcOptions;

#define DEDUP_GC_LIVE_THRESHOLD_DEFAULT 0.5
#define DEDUP_GC_OPTIONS_DEFAULT ((DedupGcOptions) { .live_threshold = DEDUP_GC_LIVE_THRESHOLD_DEFAULT })

typedef struct DedupGcStats {
	uint64_t chunks_deleted;       /* dead chunks removed from the index */
	uint64_t containers_deleted;   /* containers removed because no chunk was left in them */
	uint64_t containers_compacted; /* containers whose live chunks were copied out, then removed */
	uint64_t regions_rewritten;    /* partly dead regions (and version 1 frames) compressed again, live chunks only */
	uint64_t bytes_copied;         /* bytes compaction read from the containers it emptied */
	uint64_t bytes_freed;          /* container bytes removed (compacted and deleted) */
	uint64_t orphans_deleted;      /* container objects the catalog did not know */
	uint64_t containers_skipped;   /* compaction candidates left alone because a unit failed its checks */
	uint64_t containers_condemned; /* shared tier: emptied containers condemned (k/EPOCH.ftk) by this collection */
	uint64_t containers_waiting;   /* shared tier: condemned containers another host still holds (or has not acknowledged) */
} DedupGcStats;

/*
 * Collects garbage: deletes the chunks with no references (excluding
 * writers meanwhile), removes containers left without chunks and container
 * objects the catalog does not know, then compacts containers whose live
 * fraction is below o->live_threshold by copying their live chunks into
 * the open container (a region whose chunks all live byte for byte, the
 * live chunks of the others compressed again into new regions at the
 * level they had), fsyncing, moving the chunks in one transaction and
 * only then removing the old container; at the end the catalog's WAL is
 * checkpointed, its freed pages returned (catalog_checkpoint()).  Every
 * step is crash-safe: the
 * catalog never points at a frame that is not durable, and an interrupted
 * collection leaves at most garbage.  One collection runs at a time.
 * (!) The deleting part waits for a moment when no writer is alive (new
 * writers are not held back meanwhile): a long-lived writer delays it.
 * On a store doing global dedup (DedupStoreOptions.shared) a container
 * left without chunks is condemned instead (k/EPOCH.ftk), compaction keeps
 * the emptied container for the same, and each collection publishes the
 * store's references (r/EPOCH.ftr) and deletes the condemned containers
 * every other host that is not retired acknowledged and does not
 * reference (docs/SHARED.md, "Safe collection").
 * o == NULL means DEDUP_GC_OPTIONS_DEFAULT; ret may be NULL.
 * Returns: 0, -EINVAL, or the first error (what was done before it stays
 * done and is counted in *ret).
 */
int dedup_store_gc(DedupStore *s, const DedupGcOptions *o, DedupGcStats *ret);

/*
 * Rewrites the tier's containers recorded under a key other than the one
 * the store seals with now (DedupStoreOptions.key_id; on a store that does
 * not seal: every container recorded under a key) as compaction moves
 * chunks: every live and dead chunk of such a container is read and
 * checked, gathered into new regions sealed (or not) as the store seals
 * now, fsynced, moved in one transaction with the old row deleted, made
 * durable, and only then is the old object unlinked.  A crash at any point
 * leaves every chunk in the old or the new container (the other copy is
 * garbage for the collector), so a rekey resumes where it stopped by being
 * run again.  Containers without chunks are the collector's, open or
 * pinned ones wait for the next run.  progress (optional) is called before
 * the first container and after each one with the bytes done and the
 * bytes the candidates hold; a negative return stops the run there and is
 * returned.  One rekey or collection runs at a time (the store's gc lock):
 * max_bytes (0: no limit) bounds the container bytes one call rewrites, so
 * that a long rekey lets the collector in between two calls.
 * *ret_left (optional) gets the containers still recorded under another key.
 * Returns: 0, 1 (stopped at max_bytes: call again), -EOPNOTSUPP on a
 * store doing global dedup (other hosts may reference its containers), the
 * first error (containers whose chunks fail their checks are skipped and
 * stay: counted in *ret_skipped), or progress's.
 */
int dedup_store_rekey(DedupStore *s, uint64_t max_bytes, int (*progress)(uint64_t done, uint64_t total, void *userdata),
		      void *userdata, uint64_t *ret_rewritten, uint64_t *ret_skipped, uint64_t *ret_left);

typedef struct DedupStoreStats {
	uint64_t containers;
	uint64_t stored_bytes;      /* sum of committed container sizes */
	uint64_t live_bytes;        /* frame bytes of referenced chunks */
	uint64_t chunks;            /* unique chunks in the index */
	uint64_t dead_chunks;       /* of which unreferenced, waiting for the collector */
	uint64_t live_plain_bytes;  /* plain bytes of the referenced chunks */
	uint64_t referenced_bytes;  /* sum of plain size x refs: the logical bytes the chunks serve */
	uint64_t filter_bytes;      /* RAM of the chunk filter */
	uint64_t filter_capacity;   /* chunks it is sized for */
	uint64_t locality_bytes;    /* RAM of the locality cache (allocated bound) */
	uint64_t region_cache_bytes; /* decompressed regions cached now */
} DedupStoreStats;

/*
 * Space and index statistics of the tier, from the catalog (one pass over
 * the tier's chunks: O(chunks), for reports, not for hot paths).
 */
int dedup_store_stats(DedupStore *s, DedupStoreStats *ret);

typedef struct DedupScrubResult {
	uint64_t containers;         /* verified */
	uint64_t bytes;              /* their committed bytes */
	uint64_t chunks;             /* chunks read and checked */
	uint64_t damaged_containers; /* whose header or footer is unreadable: all their chunks count as damaged */
	uint64_t damaged_chunks;
	uint64_t *damaged;           /* ids of the damaged chunks (retired now), in the order found */
	size_t n_damaged, cap_damaged;
} DedupScrubResult;

/*
 * Verifies every chunk of the tier: each region or frame holding a chunk
 * the catalog lists is read from its container and fully checked
 * (checksums, decompression, SHA-256 of every chunk against its id), each
 * chunk must be where the catalog says in it, and every container's header
 * (and footer, once full) must name it.  A unit that fails damages every
 * chunk the catalog lists in it.  A chunk that fails is retired
 * (catalog_chunk_retire()): files that reference it keep failing with EIO,
 * but no new file deduplicates against it.  Runs alongside writers, readers
 * and the collector (which waits for at most one container at a time).
 * progress (optional) is called after each container with the running
 * result and the bytes to verify in all; its negative return stops the
 * scrub and is returned.  Not to be called holding a catalog transaction.
 * *ret gets what was done even on error; free it with
 * dedup_scrub_result_done().
 * Returns: 0, -ENOMEM, a catalog error, or progress's error.
 */
int dedup_store_scrub(DedupStore *s, int (*progress)(const DedupScrubResult *res, uint64_t total, void *userdata),
		      void *userdata, DedupScrubResult *ret);
void dedup_scrub_result_done(DedupScrubResult *res);

typedef struct DedupFileUsage {
	uint64_t logical;          /* bytes the recipe covers */
	uint64_t zero_bytes;       /* in zero runs: never stored */
	uint64_t literal_bytes;    /* kept in the recipe (between Oracle blocks) */
	uint64_t chunk_bytes;      /* in chunks: logical - zero_bytes - literal_bytes */
	uint64_t chunks;           /* chunk references of the file */
	uint64_t distinct_chunks;
	uint64_t unique;           /* frame bytes of the chunks no other file references */
	uint64_t shared;           /* frame bytes of the chunks others reference too */
	double attributed;         /* frame bytes split evenly over every reference of each chunk */
	double attributed_plain;   /* the same, in plain bytes (what dedup left of the file) */
} DedupFileUsage;

/*
 * What sealed file ino costs, from its recipe and the chunk index read
 * through c (any connection to the catalog, a read-only one included).
 * Reads no container.  Returns: 0, -EIO (a recipe that does not decode or
 * names a chunk the index lacks), -ENOMEM, or a catalog error.
 */
int dedup_file_usage(Catalog *c, uint64_t ino, DedupFileUsage *ret);

/*
 * Returns 1 if the recipe of ino references any of ids[0, n) (sorted
 * ascending), 0 if not, or an error as dedup_file_usage().
 */
int dedup_file_references_any(Catalog *c, uint64_t ino, const uint64_t *sorted_ids, size_t n);
