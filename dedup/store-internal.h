/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Private to dedup/, do not include outside it.  The chunk store's shared
 * state, split over store.c (open, containers, appends, stats),
 * store-write.c (writers), store-read.c (reads, drop) and store-gc.c.
 *
 * Lock order (take only in this order; release in any):
 *
 *   publish_lock            (store-global.c) one publication of this
 *                           host's segment at a time: taken with no other
 *                           lock held
 *   gc_lock                 one collection at a time
 *   refresh_lock            (store-global.c) one loading of other hosts'
 *                           objects at a time: writers take it as they
 *                           start, the collector under gc_lock, neither
 *                           waiting for writer exclusion while holding it
 *   writer exclusion        not a lock held across calls: a state in
 *                           writers_lock (n_writers / exclusive), see
 *                           store_writers_enter() and store_exclusive_begin()
 *   refs_lock               (store-global.c) a foreign chunk's condemnation
 *                           check and its recording (shared, by a writer),
 *                           against the acknowledgements of a reference
 *                           publication (exclusive, by the collector outside
 *                           writer exclusion)
 *   append_lock             the open container, in-memory containers, pins
 *   catalog lock            (catalog_begin() or any catalog call)
 *   io_lock                 shared around every pread of a container object,
 *                           exclusive around unlinking one; nothing else is
 *                           taken while it is held
 *   read_lock, writers_lock, encode_lock, flight_lock, the region cache, the
 *   locality cache, global dedup's lookup_lock, pending_lock, map_lock and own_lock,
 *   the backend's own locks  leaves
 *
 * (!) A thread holding a claim on a unit of the region cache holds no lock
 * while it loads it, and waits for another thread's claim only while it
 * holds none itself (see dedup/cache.h).
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
#include "dedup/region.h"
#include "dedup/segment.h"
#include "dedup/store.h"

/* Units (regions, frames) a reader fetches with one pread at most. */
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
/* Encoded regions a writer collects before appending them in one write. */
#define STORE_WRITE_BUFFER ((size_t) 1 << 20)

/* A container this process has appended to (or may append to). */
typedef struct StoreContainer {
	uint64_t id;
	char name[DEDUP_CONTAINER_NAME_MAX];
	DedupBackendFile *file;      /* open for appends while the struct lives */
	uint64_t size;               /* bytes written: where the next region goes */
	uint64_t synced;             /* bytes known durable */
	unsigned pins;               /* writers (and the collector) with unregistered regions here */
	bool retired;                /* no more appends (sealed, or abandoned after an error) */
	DedupContainerRegion *index; /* every region, for the trailer */
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

/* A new chunk claimed by a writer and not registered yet, and who borrowed it (store-flight.c). */
enum {
	STORE_FLIGHT_IN_FLIGHT,
	STORE_FLIGHT_LANDED, /* registered: chunk is its catalog id */
	STORE_FLIGHT_LOST,   /* its owner failed or was freed before registering it */
};

typedef struct StoreFlight {
	DedupChunkId id;
	int state;                /* protected by flight_lock */
	uint64_t chunk;           /* protected by flight_lock: once landed */
	unsigned refs;            /* protected by flight_lock: the owner until it lands it, and each borrower */
	uint64_t *lent;           /* protected by flight_lock: the owner's count of bytes borrowed, while in flight */
	struct StoreFlight *next; /* protected by flight_lock: its hash chain, while in flight */
} StoreFlight;

/* A region handed to store_append(). */
typedef struct StoreUnit {
	uint8_t *data;       /* the encoded region; sealed in place by store_append() on an encrypting store */
	uint32_t size;       /* its bytes */
	uint32_t count;      /* its chunks */
	uint32_t plain_size; /* their bytes */
	uint64_t container;  /* out: where it went */
	uint64_t offset;
} StoreUnit;

/*
 * Regions one job of the store's encoders holds: the hand-offs (an
 * encoder woken, the writer woken when it waits for one) are per job, and
 * with one per 128 KiB region they cost as much as a tenth of the seal.
 */
#define STORE_ENCODE_BATCH 4u
/* At most this many plain bytes a job (but one region): larger regions keep one region a job. */
#define STORE_ENCODE_BATCH_BYTES ((size_t) 512 << 10)

/* One region of a job. */
typedef struct StoreEncodeRegion {
	const DedupChunkId *ids;
	const uint32_t *lengths;
	size_t count;
	const uint8_t *plain;
	size_t plain_len;
	uint8_t *out; /* out_cap bytes, dedup_region_size_bound() of the region */
	size_t out_cap;
	size_t unit;  /* the builder's unit it is */
	size_t size;  /* result: the encoded region's bytes */
} StoreEncodeRegion;

/* Regions for the store's encoders (store-encode.c), encoded in order by one thread. */
typedef struct StoreEncodeJob {
	int level;
	StoreEncodeRegion regions[STORE_ENCODE_BATCH];
	size_t n;
	int r;                       /* result: the first error of dedup_region_encode(), or 0 */
	int64_t cpu_ns;              /* result: an encoder's time on a CPU encoding it; 0 when its builder's thread did */
	int state;                   /* protected by the store's encode_lock */
	int64_t done_ns;             /* protected by the store's encode_lock: CLOCK_MONOTONIC when an encoder finished it */
	struct StoreEncodeJob *next; /* protected by the store's encode_lock */
} StoreEncodeJob;

/* The gathering buffers of a builder's batch of regions, and their job once handed to the encoders. */
typedef struct StoreEncodeSlot {
	uint8_t *plain;    /* region k's plain bytes at k * the builder's plain_cap */
	DedupChunkId *ids; /* region k's table at k * the builder's count_cap */
	uint32_t *lengths;
	bool busy;         /* handed over and not waited for */
	StoreEncodeJob job; /* job.n regions gathered (not busy) or handed over (busy) */
} StoreEncodeSlot;

/*
 * Gathers chunks into regions and encodes them into a buffer of units, for
 * writers and for compaction.  Not thread-safe.
 *
 * With the store's encoders (store_builder_init_parallel()), gathered
 * regions go to them a batch at a time, and the builder gathers
 * the next ones into another slot meanwhile; each region is encoded into a
 * place of the output reserved for the largest it can be, so units are not
 * back to back, and their sizes (and shares) are known only after
 * store_builder_wait(), which hands over what a slot gathered so far.
 */
typedef struct StoreRegionBuilder {
	DedupRegionEncoder *encoder;
	DedupStore *pool;        /* the store whose encoders compress, or NULL: encode() compresses */
	StoreEncodeSlot *slots;  /* with a pool: n_slots, plain/ids/lengths below are slots[cur]'s */
	size_t n_slots, cur;
	size_t batch;            /* with a pool: regions a slot gathers before it is handed over */
	size_t target;    /* a region is encoded before it would grow past this (unless it holds one chunk) */
	size_t count_cap; /* and when it holds this many chunks */
	/* The region being gathered. */
	uint8_t *plain;
	size_t plain_len, plain_cap;
	DedupChunkId *ids;
	uint32_t *lengths;
	uint32_t *shares; /* after encoding: each chunk's share of the region's bytes */
	size_t count;
	/* Encoded regions, back to back, not appended yet. */
	uint8_t *out;
	size_t out_len, out_cap;
	StoreUnit *units;
	size_t n_units, cap_units;
	uint64_t encode_wait_ns; /* the builder's thread asleep until the encoders finished its regions */
	uint64_t encode_cpu_ns;  /* the encoders' time on a CPU encoding its regions, as of the jobs waited for */
} StoreRegionBuilder;

/*
 * Sets up a builder for regions of target plain bytes at zstd level, fed
 * chunks of at most max_chunk bytes (their ids keyed if keyed_ids) and at least min_chunk (except one
 * smaller chunk per region).  Returns: 0, -EINVAL, -ENOMEM.
 */
int store_builder_init(StoreRegionBuilder *b, int level, bool keyed_ids, size_t target, size_t min_chunk,
		       size_t max_chunk);
/*
 * As store_builder_init(), the regions compressed by s's encoders (when it
 * has any; else as store_builder_init()).  Returns as store_builder_init().
 */
int store_builder_init_parallel(StoreRegionBuilder *b, DedupStore *s, int level, size_t target, size_t min_chunk,
				size_t max_chunk);
/* Waits for the regions handed to the encoders; frees everything. */
void store_builder_done(StoreRegionBuilder *b);
/* Whether adding a chunk of len bytes first needs the gathered region encoded. */
bool store_builder_is_full(const StoreRegionBuilder *b, size_t len);
/* Adds a chunk to the region being gathered (store_builder_is_full() must be false); returns its offset in it. */
uint32_t store_builder_add(StoreRegionBuilder *b, const DedupChunkId *id, const void *data, size_t len);
/*
 * Encodes the gathered region as the next unit in out; without a pool
 * b->shares then holds its chunks' shares of the region's bytes, and
 * b->ids/lengths its table, until the next add.  With a pool the region is
 * handed to the encoders: its size is known after store_builder_wait().
 * Returns 1 and *ret_unit, 0 if nothing was gathered, -ENOBUFS when out has
 * no room for it (wait, append the units, reset the output, and call
 * again), or another negative errno (with a pool, maybe an earlier
 * region's).
 */
int store_builder_encode(StoreRegionBuilder *b, size_t *ret_unit);
/*
 * Hands over what the current slot gathered and waits until every unit of
 * the output is encoded; a region still being gathered stays so.  Returns
 * 0 or the first error of one.
 */
int store_builder_wait(StoreRegionBuilder *b);
/* Forgets the encoded units (after they were appended; after store_builder_wait()). */
void store_builder_reset_output(StoreRegionBuilder *b);

/* Invariant 2 of store-region.c: the share of a region's size bytes of a chunk of len of its plain bytes. */
static inline uint32_t store_share(uint32_t size, uint32_t len, uint32_t plain_size, bool last, uint64_t given) {
	return last ? (uint32_t) (size - given) : (uint32_t) ((uint64_t) size * len / plain_size);
}

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
	int write_error;            /* protected by append_lock: after a failed fsync, until no container is pinned */

	pthread_rwlock_t io_lock;
	uint64_t epoch; /* atomic; bumped under io_lock exclusive whenever a container object is unlinked */

	DedupBloom *filter; /* replaced only under writer exclusion */
	DedupLocality *locality;
	DedupRegionCache *cache;

	/* The encoders (store-encode.c); the lock is a leaf. */
	pthread_mutex_t encode_lock;
	pthread_cond_t encode_work, encode_done;
	StoreEncodeJob *encode_head; /* protected by encode_lock: queued jobs, oldest first */
	bool encode_stop;            /* protected by encode_lock */
	bool encode_ready;           /* the lock and conditions are initialized */
	bool encoders_started;       /* protected by encode_lock */
	pthread_t *encoders;         /* set once, by the first writer, under encode_lock */
	unsigned n_encoders;         /* likewise */

	/* Chunks in flight (store-flight.c); the lock is a leaf. */
	pthread_mutex_t flight_lock;
	struct StoreFlight **flights; /* protected by flight_lock: hash chains of flights in the set */
	uint64_t flight_landings;     /* protected by flight_lock: flights landed so far */

	uint64_t bytes_sent; /* atomic: bytes written to the backend since open */
	struct StoreGlobal *global; /* global dedup (store-global.c), or NULL; set at open */

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
 * Appends the n regions of units[] in order to the open container(s), one
 * write per run of regions back to back in memory, sealing full containers
 * and creating new ones as needed, and pins every container written in
 * pins.  Sets units[i].container/offset.  Regions are written, not
 * durable: see store_pins_sync().
 */
int store_append(DedupStore *s, StoreUnit *units, size_t n, StorePins *pins);
/*
 * -EIO while a failed fsync stops appends (store.c, invariant 6), else 0;
 * clears the error, retiring the open container, once no container is pinned.
 */
int store_write_error(DedupStore *s);

/* Whether ct is recorded under the key this store seals with now (or neither seals). */
bool store_container_is_current(const DedupStore *s, const CatalogContainer *ct);

/* store-encode.c: the encoders' lock and conditions, at open. */
void store_encoders_init(DedupStore *s);
/* Starts opts.encode_workers encoders once (fewer, or none, if threads cannot be made). */
void store_encoders_start(DedupStore *s);
/* Stops them; no job may be queued. */
void store_encoders_stop(DedupStore *s);
/* Queues j (its buffers and level set) for the encoders. */
void store_encode_submit(DedupStore *s, StoreEncodeJob *j);
/*
 * Waits until j is encoded, encoding it with self if no encoder took it
 * yet; returns its result.  Adds the time it slept for an encoder to
 * *waited_ns, and the encoder's time on a CPU for j to *cpu_ns.
 */
int store_encode_wait(DedupStore *s, StoreEncodeJob *j, DedupRegionEncoder *self, uint64_t *waited_ns, uint64_t *cpu_ns);
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

/* store-flight.c: the set, at open (-ENOMEM) and at free (no writer alive). */
int store_flights_init(DedupStore *s);
void store_flights_done(DedupStore *s);
/*
 * Claims id (len bytes) for a writer that is about to store it: returns 1
 * and a new flight it owns and must land, or 0 and another writer's flight,
 * with a reference the caller must drop (store_flight_unref()) and len
 * added (atomically) to that owner's *lent, or -ENOMEM.  lent must outlive
 * the flight's landing.
 */
int store_flight_claim(DedupStore *s, const DedupChunkId *id, uint32_t len, uint64_t *lent, StoreFlight **ret);
/*
 * The owner: f's chunk is registered as chunk (after its containers were
 * fsynced), or 0: it never will be.  Takes f out of the set and drops the
 * owner's reference.
 */
void store_flight_land(DedupStore *s, StoreFlight *f, uint64_t chunk);
/* A borrower: f's state now, and its chunk once landed. */
int store_flight_state(DedupStore *s, StoreFlight *f, uint64_t *ret_chunk);
void store_flight_unref(DedupStore *s, StoreFlight *f);
/* How many flights were landed so far: a borrower looks again only when it grew. */
uint64_t store_flight_landings(DedupStore *s);

/* store-read.c */
void store_read_init(DedupStore *s);
int store_read_setup(DedupStore *s);
void store_read_done(DedupStore *s);
/* Forgets cached recipe segments of ino (its recipe changed). */
void store_recipe_invalidate(DedupStore *s, uint64_t ino);

/*
 * A stored unit (a region, or a chunk frame of a version 1 container),
 * decoded and checked, and the decoders to do it: one per thread, reused.
 */
typedef struct StoreDecoded {
	int level;         /* regions: the level it was compressed at; frames: -1 */
	uint32_t count;
	uint32_t plain_size;
	uint8_t *plain;    /* plain_size bytes */
	uint32_t *ends;    /* count entries: where each chunk ends in plain */
	DedupChunkId *ids; /* count entries */
	/* Buffers, grown as needed and reused. */
	size_t plain_cap, entries_cap;
	DedupFrameDecoder *frame_decoder;
	DedupRegionDecoder *region_decoder;
	DedupHasher *hasher;
	const uint8_t *id_key; /* set by the owner: DedupStoreOptions.id_key */
	const uint8_t *content_key; /* set by the owner: DedupStoreOptions.content_key (sealed regions) */
	uint32_t key_tag;           /* set by the owner: its key's tag */
	const DedupOldKeys *old_keys; /* set by the owner: DedupStoreOptions.old_keys */
	bool sealed;                /* out: the unit was a sealed region */
} StoreDecoded;

void store_decoded_done(StoreDecoded *d);
/* Sets the keys of d (id_key .. old_keys) to the store's (s may be NULL: no keys). */
void store_decoded_keys(const DedupStore *s, StoreDecoded *d);

/*
 * Decodes the unit buf[0, len), a region or (not region) a chunk frame,
 * read from container `container` at `offset`, into d: every checksum (a
 * sealed region: its tag, under d->content_key and that place), the exact
 * decompressed size and, with verify, every chunk's hash against its id.
 * Returns: 0, -EIO (any failure of the stored bytes), -ENOKEY (a region
 * sealed under a key d lacks, or of ids keyed otherwise than d's: not
 * damage, which a key given back mends), -ENOMEM.
 */
int store_unit_decode(bool region, const uint8_t *buf, size_t len, uint64_t container, uint64_t offset, bool verify,
		      StoreDecoded *d);
/* A unit's chunk count and plain bytes, from its header.  Returns: 0, -EIO. */
int store_unit_sizes(bool region, const uint8_t *buf, size_t len, uint32_t *ret_count, uint32_t *ret_plain_size);
/*
 * As store_unit_decode(), into plain[0, plain_cap), ends and ids[0,
 * entries_cap) (d gives the decoders and gets level, count, plain_size):
 * a reader decodes straight into a cache entry.  On error the buffers
 * hold garbage.
 */
int store_unit_decode_into(bool region, const uint8_t *buf, size_t len, uint64_t container, uint64_t offset,
			   bool verify, StoreDecoded *d, uint8_t *plain, size_t plain_cap, uint32_t *ends,
			   DedupChunkId *ids, size_t entries_cap);

/* Where a chunk's unit is: its offset and how many bytes to read. */
static inline uint32_t store_chunk_unit_size(const CatalogChunk *ch) {
	return ch->region_size > 0 ? ch->region_size : ch->frame_size;
}

/*
 * store-global.c: global dedup on a shared tier (DedupStoreOptions.shared).
 * Its locks: publish_lock (one publication at a time, taken with no other
 * lock held, around backend calls), refresh_lock (one loading of other
 * hosts' segments at a time, likewise), and the leaves lookup_lock (the
 * merged lookup), pending_lock (chunks to publish) and map_lock (foreign
 * containers).
 */
typedef struct StoreGlobal StoreGlobal;

/* Where another host's chunk is, from its segment. */
typedef struct StoreGlobalHit {
	const char *host; /* valid while the store lives */
	uint64_t container; /* its id on that host */
	uint64_t offset;
	uint32_t region_size, region_offset, plain_size, frame_size;
	uint32_t host_ix; /* for store_global_condemned() */
} StoreGlobalHit;

/* At open, with opts.shared: the next epoch, the foreign containers.  -ENOMEM or a catalog/backend error. */
int store_global_open(DedupStore *s);
void store_global_free(DedupStore *s);
/* Loads the segments other hosts published since the last time, at most every DEDUP_STORE_GLOBAL_REFRESH_MS. */
void store_global_refresh(DedupStore *s);
/* Whether another host published id; 1 and *ret, or 0. */
int store_global_lookup(DedupStore *s, const DedupChunkId *id, StoreGlobalHit *ret);
/* After the catalog committed foreign container row `local` for (host, remote): reads go there. */
int store_global_map_add(DedupStore *s, uint64_t local, const char *host, uint64_t remote);
/*
 * Whether this catalog's container `local` is foreign: 1 and the name of
 * its object on the root, the root, and its id on its host (the place its
 * sealed regions are bound to), or 0.
 */
int store_global_container(DedupStore *s, uint64_t local, DedupBackend **ret_root,
			   char ret_name[static DEDUP_BACKEND_NAME_MAX + 1], uint64_t *ret_remote);
/* After a registration committed: these chunks wait for the next publication.  0 or -ENOMEM (not published). */
int store_global_note(DedupStore *s, const DedupSegmentEntry *entries, size_t n);
/* A foreign chunk referenced instead of stored. */
void store_global_count_hit(DedupStore *s, uint32_t plain_size);
/*
 * Collection across hosts (store-global.c, docs/SHARED.md "Safe
 * collection").  A writer holds the reference lock (shared) from the
 * condemnation check of a foreign chunk until the transaction recording it
 * committed; a reference publication takes it exclusive to read the
 * condemnations it acknowledges.
 */
void store_global_refs_enter(DedupStore *s);
void store_global_refs_leave(DedupStore *s);
/* Whether hit's container is condemned by its host, as far as loaded (counted as refused).  Under the reference lock. */
bool store_global_condemned(DedupStore *s, const StoreGlobalHit *hit);
/* Whether this host condemned (or is condemning) its container id. */
bool store_global_condemned_own(DedupStore *s, uint64_t id);
/* Under writer exclusion: container id (emptied, sealed in the catalog) is to be condemned.  -ENOMEM. */
int store_global_condemn(DedupStore *s, uint64_t id);
/*
 * After a collection's phase 1, under gc_lock: writes the condemnation of
 * what store_global_condemn() took, loads the other hosts' objects,
 * publishes this host's references, and deletes the condemned containers
 * every other host released.
 */
int store_global_collect(DedupStore *s, DedupGcStats *st);

/* store-write.c: the frame bytes of the distinct chunks of a finished writer's file. */
int store_writer_stored_distinct(DedupWriter *w, uint64_t *ret);
/* Sorts ids and sums the frame sizes of the distinct ones. */
int store_catalog_stored_distinct(Catalog *c, uint64_t *ids, size_t n, uint64_t *ret);

/*
 * Sorts ids (and leaves them reordered, overwritten) and adds sign * its
 * occurrences to each distinct id's refs, in one catalog_chunks_ref().
 */
int store_refs_apply(DedupStore *s, uint64_t *ids, size_t n, int sign);
int store_catalog_refs_apply(Catalog *c, uint64_t *ids, size_t n, int sign);
