/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Private to dedup/, do not include outside it.  The chunk store's shared
 * state, split over store.c (open, containers, appends, stats),
 * store-write.c (writers), store-read.c (reads, drop) and store-gc.c.
 *
 * Lock order (take only in this order; release in any):
 *
 *   gc_lock                 one collection at a time
 *   writer exclusion        not a lock held across calls: a state in
 *                           writers_lock (n_writers / exclusive), see
 *                           store_writers_enter() and store_exclusive_begin()
 *   append_lock             the open container, in-memory containers, pins
 *   catalog lock            (catalog_begin() or any catalog call)
 *   io_lock                 shared around every pread of a container object,
 *                           exclusive around unlinking one; nothing else is
 *                           taken while it is held
 *   read_lock, writers_lock, the chunk cache, the locality cache,
 *   the backend's own locks  leaves
 *
 * The caller's catalog transaction may be open around dedup_writer_commit(),
 * dedup_file_drop() and reads: none of them takes gc_lock, waits for writer
 * exclusion or takes append_lock.
 */

#include <pthread.h>

#include "catalog/catalog.h"
#include "dedup/backend.h"
#include "dedup/bloom.h"
#include "dedup/cache.h"
#include "dedup/container.h"
#include "dedup/locality.h"
#include "dedup/recipe.h"
#include "dedup/store.h"

/* Frames a reader fetches with one pread at most. */
#define STORE_RUN_MAX ((size_t) 8 << 20)
/* Recipe entries one read step looks at (needed plus read-ahead). */
#define STORE_READ_WINDOW 1024u
/* Recent sequential readers remembered for read-ahead. */
#define STORE_SEQ_SLOTS 64u
/* Idle read contexts kept for reuse, and the largest read buffer one keeps (bounds idle RAM). */
#define STORE_CTX_POOL_MAX 16u
#define STORE_CTX_BUFFER_KEEP ((size_t) 4 << 20)
/* New chunks a writer keeps before registering them, whatever their size. */
#define STORE_PENDING_MAX 16384u
/* Encoded frames a writer collects before appending them in one write. */
#define STORE_WRITE_BUFFER ((size_t) 1 << 20)

/* A container this process has appended to (or may append to). */
typedef struct StoreContainer {
	uint64_t id;
	char name[DEDUP_CONTAINER_NAME_MAX];
	DedupBackendFile *file;     /* open for appends while the struct lives */
	uint64_t size;              /* bytes written: where the next frame goes */
	uint64_t synced;            /* bytes known durable */
	unsigned pins;              /* writers (and the collector) with unregistered frames here */
	bool retired;               /* no more appends (sealed, or abandoned after an error) */
	DedupContainerEntry *index; /* every frame, for the trailer */
	size_t n_index, cap_index;
	struct StoreContainer *next;
} StoreContainer;

/* A container with frames of one writer that are not registered yet, and where they end. */
typedef struct StorePin {
	StoreContainer *container;
	uint64_t end;
} StorePin;

typedef struct StorePins {
	StorePin *pins;
	size_t n, cap;
} StorePins;

/* What a frame handed to store_append() is. */
typedef struct StoreFrame {
	DedupChunkId id;
	uint32_t frame_size;
	uint32_t plain_size;
	uint64_t container; /* out: where it went */
	uint64_t offset;
} StoreFrame;

/* A decoded recipe segment held by readers (see store-read.c). */
typedef struct StoreSegment StoreSegment;
typedef struct StoreReadCtx StoreReadCtx;

typedef struct StoreSeqSlot {
	uint64_t ino;
	uint64_t next; /* where a sequential reader continues */
} StoreSeqSlot;

struct DedupStore {
	Catalog *catalog;
	DedupBackend *backend;
	uint32_t tier;
	DedupStoreOptions opts; /* defaults resolved */
	bool verify_content;

	pthread_mutex_t gc_lock;

	pthread_mutex_t writers_lock;
	pthread_cond_t writers_cond;
	unsigned n_writers; /* protected by writers_lock */
	bool exclusive;     /* protected by writers_lock: chunks are being deleted */

	pthread_mutex_t append_lock;
	StoreContainer *open;       /* protected by append_lock: where frames go, or NULL */
	StoreContainer *containers; /* protected by append_lock: all in-memory containers */
	int write_error;            /* protected by append_lock: sticky, after a failed fsync */

	pthread_rwlock_t io_lock;
	uint64_t epoch; /* atomic; bumped under io_lock exclusive whenever a container object is unlinked */

	DedupBloom *filter; /* replaced only under writer exclusion */
	DedupLocality *locality;
	DedupChunkCache *chunk_cache;

	pthread_mutex_t read_lock;
	StoreSegment **segments; /* protected by read_lock: opts.segment_cache slots */
	uint64_t segment_tick;   /* protected by read_lock */
	uint64_t recipe_gen;     /* protected by read_lock: bumped when a recipe changes */
	StoreSeqSlot seq[STORE_SEQ_SLOTS]; /* protected by read_lock */
	unsigned seq_next;                 /* protected by read_lock */
	StoreReadCtx **ctx_pool;           /* protected by read_lock */
	size_t n_ctx_pool;                 /* protected by read_lock */
};

/* store.c */
void store_writers_enter(DedupStore *s);
void store_writers_leave(DedupStore *s);
/* Waits until no writer is alive and excludes new ones. */
void store_exclusive_begin(DedupStore *s);
/* Excludes writers only if none is alive now; returns whether it did. */
bool store_exclusive_try_begin(DedupStore *s);
void store_exclusive_end(DedupStore *s);

/*
 * Appends the n frames in buf (back to back, described by frames[]) to the
 * open container(s), sealing full ones and creating new ones as needed, and
 * pins every container written in pins.  Sets frames[i].container/offset.
 * Frames are written, not durable: see store_pins_sync().
 */
int store_append(DedupStore *s, const uint8_t *buf, StoreFrame *frames, size_t n, StorePins *pins);
/* fsyncs the pinned containers as far as the pins reach. */
int store_pins_sync(DedupStore *s, StorePins *pins);
/* Inside a catalog transaction: raises each pinned container's committed size to its pin's end. */
int store_pins_commit_sizes(DedupStore *s, const StorePins *pins);
/* Drops the pins (frames not registered by now are garbage). */
void store_pins_release(DedupStore *s, StorePins *pins);
/* Whether container id is in memory and open for appends or pinned (the collector must leave it). */
bool store_container_is_busy(DedupStore *s, uint64_t id);
/* Forgets the open container if it is id (the collector is about to delete it). */
void store_container_forget(DedupStore *s, uint64_t id);
/* Unlinks container objects under io_lock exclusive, bumping the epoch; ENOENT is fine. */
int store_unlink_containers(DedupStore *s, const uint64_t *ids, size_t n);
/* Builds a new chunk filter from the catalog and installs it (under writer exclusion). */
int store_filter_rebuild(DedupStore *s);

typedef struct StoreContainerList {
	CatalogContainer *items;
	size_t n, cap;
} StoreContainerList;

typedef struct StoreChunkVec {
	CatalogChunk *items;
	size_t n, cap;
} StoreChunkVec;

/* The tier's containers in id order, in a new array (free items). */
int store_containers_list(DedupStore *s, StoreContainerList *ret);
/* Returns 1 if container id holds any chunk, 0 if none, <0 on error. */
int store_container_has_chunks(DedupStore *s, uint64_t id);

/* store-read.c */
void store_read_init(DedupStore *s);
int store_read_setup(DedupStore *s);
void store_read_done(DedupStore *s);
/* Forgets cached recipe segments of ino (its recipe changed). */
void store_recipe_invalidate(DedupStore *s, uint64_t ino);
/*
 * Reads and checks the frames of chunks (sorted by offset, all in one
 * container) into frames_buf (capacity: the sum of their frame sizes),
 * under the io lock.  Returns 0 or -EIO on any failure of any frame.
 */
int store_read_container_frames(DedupStore *s, uint64_t container, const CatalogChunk *chunks, size_t n,
				uint8_t *frames_buf);

/* Sorts ids and calls catalog_chunk_ref(id, sign * occurrences) once per distinct id. */
int store_refs_apply(DedupStore *s, uint64_t *ids, size_t n, int sign);
int store_catalog_refs_apply(Catalog *c, uint64_t *ids, size_t n, int sign);
