/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store-write.c — writers: a file's bytes in, chunks stored, a recipe out.
 *
 * New chunks are gathered, in file order, into the region being built
 * (StoreRegionBuilder); a full region is compressed into the builder's
 * output (by the store's encoders, while the writer gathers the next ones,
 * when the store has encoders), and the output is appended to the
 * containers, in the order the regions were gathered, when it fills, before
 * a registration and at finish.  A pending chunk is thus gathered, encoded
 * (in a region of the output), appended (share, container and offset
 * known), and registered.
 *
 * Invariants:
 *  1. A recipe entry holds a catalog chunk id, 0 for a zero run,
 *     DEDUP_RECIPE_LITERAL for a literal (its bytes next in `literals`), or,
 *     until the chunk is registered, PENDING_BIT | its batch's GEN_BIT |
 *     its index in the batch's `pending` (invariant 8),
 *     or, until the borrowed chunk is settled and registered,
 *     PENDING_BIT | BORROW_BIT | its index in `borrowed`.  Every entry
 *     before first_open_entry holds a final id; after finish() every entry
 *     does.
 *  2. A chunk is looked up in this order: this writer's unregistered chunks,
 *     the filter ("certainly new" ends the search of this store), the
 *     locality cache, the catalog, then, on a shared tier with global
 *     dedup, the chunks other hosts published (a hit becomes a foreign
 *     chunk, registered at once: foreign_lookup()), and the store's chunks
 *     in flight (store-flight.c).  A chunk in
 *     flight in another writer is borrowed: its bytes are kept until the
 *     owner lands it (its id is taken) or loses it, or until finish(); a
 *     borrow not landed by then is stored by this writer (settle_borrowed()).
 *     A chunk found nowhere is claimed and stored.  Two writers may still
 *     store one chunk (one claimed it as the other's registration
 *     committed, or a borrow did not land in time): registration then
 *     finds it (-EEXIST) and uses the other copy, and this copy becomes
 *     garbage.
 *  3. Registration (register_pending()) runs only after the regions' containers
 *     were fsynced, in its own transaction, with refs 0; the references
 *     are taken by commit() in the caller's transaction.  So between the
 *     two a crash or a rollback leaves dead chunks, never a dangling one.
 *     An entry takes a chunk's catalog id only once the transaction that
 *     registered it committed (registration_done()).
 *  4. The writer is counted in the store's writers from new() to free(),
 *     so the collector deletes no chunk it may have found.
 *  5. After any error the writer is dead: the error is sticky, and its
 *     flights are landed as lost at once (borrowers store their own copies).
 *  6. This writer lands its flights only after their registration committed
 *     and the filter knows them, so a writer that no longer finds a chunk
 *     in flight finds it in the catalog.
 *  7. A chunk enters the filter inside the transaction that registers it,
 *     before its commit (chunk_register()): a registration that finds an
 *     id not in the filter, under the catalog's lock, knows no commit
 *     holds it, and asks the catalog to check only the recent table of
 *     its index (catalog_chunk_add_new()), not every sorted run.
 *  8. A batch of pending chunks, once appended, is handed over (`reg`) and
 *     registered by a thread of its own (registration_main()) while this
 *     one gathers the next batch; at most one batch is in registration,
 *     and it is done (joined, then registration_done() here) at the first
 *     chunk after the registrar finished, and at the latest before the
 *     next is handed over, before finish() returns and before free().
 *     The registrar only reads the batch's chunks and writes their ids and
 *     its result: their flights, the entries, the stats, the locality
 *     cache and the pins' release stay with this thread.  Entries and
 *     borrows tag a pending chunk with its batch's generation (GEN_BIT),
 *     so the two batches' indexes do not mix.
 *  9. The recipe is spooled as it is made, so that a writer's memory does
 *     not grow with its file: once DEDUP_RECIPE_SEGMENT_ENTRIES_MAX entries
 *     before first_open_entry (and before the last entry, which a zero run
 *     may still grow) hold final ids, they are encoded as one segment, the
 *     one commit() writes, and appended to the spool (the caller's file, or
 *     memory, where a segment takes a fraction of the entries' bytes).  So
 *     the segments are cut every DEDUP_RECIPE_SEGMENT_ENTRIES_MAX entries
 *     from the file's start, whatever the parts (join() feeds the next
 *     part's entries on), and commit() spools the rest.
 *
 * States:
 *
 *   new --feed()*--> feeding --finish()--> finished --commit()--> (the caller commits)
 *            \            \                   ^          |
 *             `-- error ---`---> dead         `----------' the caller rolls back: commit() again
 *
 *   free() from any state.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/array.h"
#include "common/macros.h"
#include "dedup/key.h"
#include "dedup/store-internal.h"

#define PENDING_BIT (UINT64_C(1) << 63)
#define BORROW_BIT (UINT64_C(1) << 62)
#define GEN_BIT (UINT64_C(1) << 61)
#define INDEX_MASK (GEN_BIT - 1)
#define SWAP(a, b)                         \
	do {                               \
		__typeof__(a) _swap = (a); \
		(a) = (b);                 \
		(b) = _swap;               \
	} while (0)
/* Bytes of borrowed chunks a writer keeps; past it, a chunk in flight elsewhere is stored again. */
#define STORE_BORROW_MAX (UINT64_C(32) << 20)
/*
 * An owner registers (and lands) once this many bytes of its chunks in
 * flight were borrowed, well before sync_bytes and the borrowers' limit:
 * a borrower that finishes first then has little left to store itself.
 */
#define STORE_LENT_SYNC (UINT64_C(8) << 20)
/* Chunk ids a commit gathers before it takes their references: the spooled segments are read back in batches. */
#define COMMIT_REFS_BATCH ((size_t) 16 * DEDUP_RECIPE_SEGMENT_ENTRIES_MAX)
/* Oracle chunking: stream bytes held for block detection (a multiple of the lookahead it needs). */
#define STORE_ORACLE_WINDOW ((size_t) 1 << 20)
_Static_assert(STORE_ORACLE_WINDOW > 4 * DEDUP_ORACLE_LOOKAHEAD, "the window always holds enough to decide");

/* A new chunk of this writer, not registered yet. */
typedef struct StorePending {
	DedupChunkId id;
	uint32_t plain_size;
	uint32_t region_offset; /* where it starts in its region's plain bytes */
	uint32_t share;         /* its share of the region's bytes, once appended */
	uint32_t region_size;   /* the region's bytes, once appended */
	size_t unit;            /* its region in the builder's output, once encoded and until appended */
	uint64_t container;     /* once appended; 0 when registration found another copy */
	uint64_t offset;        /* of its region, once appended */
	StoreFlight *flight;    /* claimed in the store's flights, until landed; or NULL */
} StorePending;

/* Another writer's chunk in flight, met by this one (invariant 2). */
typedef struct StoreBorrow {
	StoreFlight *flight; /* until settled */
	uint8_t *data;       /* its bytes, until settled */
	uint32_t len;
	uint64_t chunk; /* once settled: its catalog id, or its pending tag (invariant 8) until registered */
} StoreBorrow;
#define PMAP_SLOTS (2 * STORE_PENDING_MAX)
#define PMAP_NONE UINT32_MAX

/* A segment of the recipe, encoded and spooled. */
typedef struct StoreSpooled {
	uint64_t at; /* in the spool */
	uint32_t size;
} StoreSpooled;

/* New chunks appended and handed over for registration (invariant 8), with what the registrar found. */
typedef struct StoreBatch {
	StorePending *pending;
	uint64_t *pending_chunk; /* catalog id, once registered */
	size_t n_pending, cap_pending;
	uint32_t *pmap;
	StorePins pins;
	uint64_t gen;                                   /* its entries' GEN_BIT */
	uint64_t moved_chunks, moved_bytes, moved_size; /* stored by another writer meanwhile */
	int result;
	bool done; /* atomic: the registrar has finished (result set) */
} StoreBatch;

struct DedupWriter {
	DedupStore *s;
	DedupChunkerParams params;
	DedupChunker chunker;
	DedupHasher *hasher;
	StoreRegionBuilder builder;
	int error;
	bool entered, finished, joined;

	uint8_t *chunk_buf; /* the unfinished chunk when it spans feed() calls; params.max_size bytes */
	size_t chunk_len;

	/* Oracle chunking only: the stream's bytes not cut yet (lookahead for block detection). */
	uint8_t *window;
	size_t window_len;
	DedupOracleSplitter splitter;
	uint8_t *literals; /* the bytes of the recipe's literal entries, in order */
	size_t n_literals, cap_literals;

	/*
	 * The recipe (invariant 1) not spooled yet (invariant 9): entries
	 * [0, n_entries) start at file offset spooled_bytes; their literals
	 * are literals[0, n_literals).
	 */
	uint64_t *chunks;
	uint32_t *lengths;
	size_t n_entries, cap_entries;
	size_t first_open_entry;
	size_t cut_entry; /* the first entry after the last cut: a zero run does not continue across it */
	uint64_t total;

	/*
	 * The recipe's segments spooled (invariant 9), in file order: their
	 * blobs back to back in spool_fd, or in spool_mem without one.
	 */
	StoreSpooled *spooled;
	size_t n_spooled, cap_spooled;
	uint64_t spooled_bytes; /* the file's bytes they describe */
	uint64_t spool_len;
	int spool_fd;
	uint8_t *spool_mem;
	size_t cap_spool_mem;
	uint8_t *blob;         /* scratch: one segment, DEDUP_RECIPE_SEGMENT_SIZE_MAX bytes */
	DedupRecipeEntry *seg; /* scratch: DEDUP_RECIPE_SEGMENT_ENTRIES_MAX entries */

	/*
	 * New chunks not registered yet: [0, appended) appended to containers,
	 * [appended, region_first) encoded in the builder's output,
	 * [region_first, n_pending) in the region being gathered.
	 */
	StorePending *pending;
	uint64_t *pending_chunk; /* catalog id, once registered */
	size_t n_pending, cap_pending;
	size_t appended, region_first;
	uint64_t pending_bytes;
	uint32_t *pmap; /* id -> pending index, open addressing */
	StorePins pins;
	uint64_t gen; /* GEN_BIT of the entries of this batch */

	/* The batch in registration, if running, or done and not yet taken back (invariant 8). */
	StoreBatch reg;
	pthread_t registrar;
	bool registering;

	/* Chunks borrowed since all were last settled (invariant 2). */
	StoreBorrow *borrowed;
	size_t n_borrowed, cap_borrowed, n_unsettled;
	uint64_t borrow_bytes;  /* of the unsettled */
	uint64_t landings_seen; /* store_flight_landings() when they were last looked at */
	uint64_t lent;          /* atomic: bytes of this writer's flights that others borrowed since it registered */

	DedupLocalityEntry *load; /* scratch for loading a container into the locality cache */
	size_t n_load, cap_load;

	DedupWriterStats stats;
};

/* Invariant 5: whoever borrowed this writer's unregistered chunks stores them. */
static void flights_lose(DedupWriter *w) {
	for (size_t i = 0; i < w->n_pending; i++)
		if (w->pending[i].flight) {
			store_flight_land(w->s, w->pending[i].flight, 0);
			w->pending[i].flight = NULL;
		}
	for (size_t i = 0; i < w->reg.n_pending; i++)
		if (w->reg.pending[i].flight) {
			store_flight_land(w->s, w->reg.pending[i].flight, 0);
			w->reg.pending[i].flight = NULL;
		}
}

/* Invariant 8: the registrar is done with the batch (its result in reg.result). */
static void registration_join(DedupWriter *w) {
	if (!w->registering)
		return;
	(void) pthread_join(w->registrar, NULL);
	w->registering = false;
}

static int fail(DedupWriter *w, int r) {
	if (w->error >= 0)
		w->error = r;
	registration_join(w);
	flights_lose(w);
	return r;
}

/*
 * The spool file took no more (its disk full, say): what it holds comes
 * back into memory and the rest follows it there.  The spool only bounds
 * the writer's memory; a migration to NFS spools on the hot tier, and must
 * not fail for want of room there, since freeing that room is its purpose.
 */
static int spool_to_memory(DedupWriter *w, size_t more) {
	uint8_t *m = malloc(w->spool_len + more);
	if (!m)
		return -ENOMEM;
	ssize_t n = w->spool_len > 0 ? pread(w->spool_fd, m, w->spool_len, 0) : 0;
	if (n != (ssize_t) w->spool_len) {
		free(m);
		return n < 0 ? -errno : -EIO;
	}
	close(w->spool_fd);
	w->spool_fd = -1;
	w->spool_mem = m;
	w->cap_spool_mem = w->spool_len + more;
	return 0;
}

/* Invariant 9: encodes the first k entries as the next segment and spools it. */
static int segment_spool(DedupWriter *w, size_t k) {
	size_t literal = 0, size;
	uint64_t length = 0;
	int r;

	if (!w->blob) {
		w->blob = malloc(DEDUP_RECIPE_SEGMENT_SIZE_MAX);
		w->seg = malloc(DEDUP_RECIPE_SEGMENT_ENTRIES_MAX * sizeof(*w->seg));
		if (!w->blob || !w->seg)
			return -ENOMEM;
	}
	for (size_t j = 0; j < k; j++) {
		w->seg[j] = (DedupRecipeEntry) { .chunk = w->chunks[j], .length = w->lengths[j] };
		if (w->chunks[j] == DEDUP_RECIPE_LITERAL) {
			w->seg[j].literal = w->literals + literal;
			literal += w->lengths[j];
		}
		length += w->lengths[j];
	}
	r = dedup_recipe_segment_encode(&w->params, w->spooled_bytes, w->seg, k, w->blob,
					DEDUP_RECIPE_SEGMENT_SIZE_MAX, &size);
	if (r < 0)
		return r;
	r = ARRAY_RESERVE_ONE(w->spooled, w->cap_spooled, w->n_spooled, 64);
	if (r < 0)
		return r;
	if (w->spool_fd >= 0 && pwrite(w->spool_fd, w->blob, size, (off_t) w->spool_len) != (ssize_t) size) {
		r = spool_to_memory(w, size);
		if (r < 0)
			return r;
	}
	if (w->spool_fd < 0) {
		if (w->spool_len + size > w->cap_spool_mem) {
			size_t cap = MAX(w->cap_spool_mem * 2, w->spool_len + size);
			uint8_t *m = realloc(w->spool_mem, cap);
			if (!m)
				return -ENOMEM;
			w->spool_mem = m;
			w->cap_spool_mem = cap;
		}
		memcpy(w->spool_mem + w->spool_len, w->blob, size);
	}
	w->spooled[w->n_spooled++] = (StoreSpooled) { .at = w->spool_len, .size = (uint32_t) size };
	w->spool_len += size;
	w->spooled_bytes += length;

	memmove(w->chunks, w->chunks + k, (w->n_entries - k) * sizeof(*w->chunks));
	memmove(w->lengths, w->lengths + k, (w->n_entries - k) * sizeof(*w->lengths));
	if (w->literals) {
		memmove(w->literals, w->literals + literal, w->n_literals - literal);
		w->n_literals -= literal;
	}
	w->n_entries -= k;
	w->first_open_entry -= k;
	w->cut_entry -= MIN(w->cut_entry, k);
	return 0;
}

/* Spools the full segments that are final (invariant 9); with all, every entry (all final: finished). */
static int recipe_spool(DedupWriter *w, bool all) {
	for (;;) {
		size_t ready = all ? w->n_entries : MIN(w->first_open_entry, w->n_entries - MIN(w->n_entries, 1));
		size_t k = MIN(ready, (size_t) DEDUP_RECIPE_SEGMENT_ENTRIES_MAX);
		if (k == 0 || (k < DEDUP_RECIPE_SEGMENT_ENTRIES_MAX && !all))
			return 0;
		int r = segment_spool(w, k);
		if (r < 0)
			return r;
	}
}

/* Spooled segment i: its decoded entries (free() them) and, unless ret_blob is NULL, its blob (valid until the next call). */
static int spooled_get(DedupWriter *w, size_t i, DedupRecipeSegment **ret_seg, const uint8_t **ret_blob) {
	const StoreSpooled *sp = w->spooled + i;
	const uint8_t *blob = w->blob;
	if (w->spool_fd < 0)
		blob = w->spool_mem + sp->at;
	else {
		ssize_t n = pread(w->spool_fd, w->blob, sp->size, (off_t) sp->at);
		if (n != (ssize_t) sp->size)
			return n < 0 ? -errno : -EIO;
	}
	/* Decoded as any stored segment is: a spool file damaged under us is caught here. */
	int r = dedup_recipe_segment_decode(blob, sp->size, ret_seg);
	if (r < 0)
		return r == -EBADMSG ? -EIO : r;
	if (ret_blob)
		*ret_blob = blob;
	return 0;
}

static int entry_add(DedupWriter *w, uint64_t chunk, uint32_t length) {
	if (w->n_entries == w->cap_entries) {
		size_t cap = MAX(w->cap_entries * 2, (size_t) 1024);
		uint64_t *c = realloc(w->chunks, cap * sizeof(*c));
		if (!c)
			return -ENOMEM;
		w->chunks = c;
		uint32_t *l = realloc(w->lengths, cap * sizeof(*l));
		if (!l)
			return -ENOMEM;
		w->lengths = l;
		w->cap_entries = cap;
	}
	w->chunks[w->n_entries] = chunk;
	w->lengths[w->n_entries] = length;
	w->n_entries++;
	/* A file's chunks already stored are final at once: invariant 9 spools them without a registration. */
	bool open = chunk != DEDUP_RECIPE_LITERAL && (chunk & PENDING_BIT);
	if (!open && w->first_open_entry == w->n_entries - 1)
		w->first_open_entry = w->n_entries;
	return recipe_spool(w, false);
}

/* A final entry, its literal's bytes with it. */
static int recipe_append(DedupWriter *w, const DedupRecipeEntry *e) {
	if (e->chunk == DEDUP_RECIPE_LITERAL) {
		if (w->n_literals + e->length > w->cap_literals) {
			size_t cap = MAX(w->cap_literals * 2, w->n_literals + e->length + 4096);
			uint8_t *b = realloc(w->literals, cap);
			if (!b)
				return -ENOMEM;
			w->literals = b;
			w->cap_literals = cap;
		}
		memcpy(w->literals + w->n_literals, e->literal, e->length);
		w->n_literals += e->length;
	}
	return entry_add(w, e->chunk, e->length);
}

static int zero_add(DedupWriter *w, size_t len) {
	w->stats.zero_bytes += len;
	if (w->n_entries > w->cut_entry) {
		size_t last = w->n_entries - 1;
		if (w->chunks[last] == 0 && w->lengths[last] + len <= DEDUP_RECIPE_ZERO_RUN_MAX) {
			w->lengths[last] += (uint32_t) len;
			return 0;
		}
	}
	return entry_add(w, 0, (uint32_t) len);
}

static size_t pmap_home(const DedupChunkId *id) {
	uint64_t h;
	memcpy(&h, id->bytes, sizeof(h));
	return (size_t) (h & (PMAP_SLOTS - 1));
}

/* The slot of pmap holding id, or the empty one where it goes (a map is never more than half full). */
static size_t pmap_probe_in(const uint32_t *pmap, const StorePending *pending, const DedupChunkId *id) {
	size_t i = pmap_home(id);
	while (pmap[i] != PMAP_NONE && !dedup_chunk_id_equal(&pending[pmap[i]].id, id))
		i = (i + 1) & (PMAP_SLOTS - 1);
	return i;
}

static size_t pmap_probe(const DedupWriter *w, const DedupChunkId *id) {
	return pmap_probe_in(w->pmap, w->pending, id);
}

/*
 * Invariant 2, this writer's unregistered chunks: the entry's tag of id if
 * it is pending in the batch being gathered or in the one in registration.
 * *ret_slot gets id's slot in the gathering batch's map.
 */
static bool pending_find(const DedupWriter *w, const DedupChunkId *id, size_t *ret_slot, uint64_t *ret_chunk) {
	size_t slot = pmap_probe(w, id);
	*ret_slot = slot;
	if (w->pmap[slot] != PMAP_NONE) {
		*ret_chunk = PENDING_BIT | w->gen | w->pmap[slot];
		return true;
	}
	if (w->reg.n_pending > 0) {
		/* The registrar reads these too, and writes neither the ids nor the map. */
		size_t k = pmap_probe_in(w->reg.pmap, w->reg.pending, id);
		if (w->reg.pmap[k] != PMAP_NONE) {
			*ret_chunk = PENDING_BIT | w->reg.gen | w->reg.pmap[k];
			return true;
		}
	}
	return false;
}

static int load_collect(const CatalogChunk *ch, void *userdata) {
	DedupWriter *w = userdata;
	if (w->n_load == w->cap_load) {
		size_t cap = MAX(w->cap_load * 2, (size_t) 1024);
		DedupLocalityEntry *p = realloc(w->load, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		w->load = p;
		w->cap_load = cap;
	}
	DedupLocalityEntry *e = w->load + w->n_load++;
	memcpy(e->id.bytes, ch->digest, DEDUP_CHUNK_ID_SIZE);
	e->chunk = ch->id;
	return 0;
}

/* Loads every id of container into the locality cache: what follows a hit tends to be next to it. */
static int locality_load(DedupWriter *w, uint64_t container) {
	w->n_load = 0;
	int r = catalog_chunks_foreach_in_container(w->s->catalog, container, load_collect, w);
	if (r < 0)
		return r;
	dedup_locality_load(w->s->locality, container, w->load, w->n_load);
	return 0;
}

/* Registers ch (id's row) in the caller's transaction (invariant 7); -EEXIST when the tier holds id already. */
static int chunk_register(DedupStore *s, const DedupChunkId *id, const CatalogChunk *ch, uint64_t *ret_chunk) {
	int r = dedup_bloom_maybe_contains(s->filter, id) ? catalog_chunk_add(s->catalog, ch, ret_chunk)
							  : catalog_chunk_add_new(s->catalog, ch, ret_chunk);
	if (r >= 0)
		dedup_bloom_add(s->filter, id);
	return r;
}

/*
 * Global dedup (store-global.c): id, len bytes long, published by another
 * host on this shared tier becomes a chunk of this catalog in that host's
 * container (a foreign chunk, refs 0 like a registered one), in a short
 * transaction of its own.  Returns 1 and *ret_chunk, 0 if no host has it,
 * <0 on error.
 */
static int foreign_lookup(DedupWriter *w, const DedupChunkId *id, size_t len, uint64_t *ret_chunk) {
	DedupStore *s = w->s;
	StoreGlobalHit hit;
	uint64_t container = 0, chunk = 0;
	bool foreign = true;
	int r;

	/* A plain size that does not fit is a lie or another chunk: not this one. */
	if (!s->global || store_global_lookup(s, id, &hit) == 0 || hit.plain_size != len)
		return 0;
	/*
	 * Collection across hosts (store-global.c, invariant 6): not in a
	 * container its host condemned, checked and recorded under the
	 * reference lock, which a reference publication takes to read what it
	 * acknowledges.
	 */
	store_global_refs_enter(s);
	if (store_global_condemned(s, &hit)) {
		store_global_refs_leave(s);
		return 0;
	}
	r = catalog_begin(s->catalog);
	if (r < 0) {
		store_global_refs_leave(s);
		return r;
	}
	r = catalog_container_foreign(s->catalog, s->tier, hit.host, hit.container, &container);
	if (r >= 0) {
		CatalogChunk ch = {
			.tier = s->tier,
			.container = container,
			.offset = hit.offset,
			.frame_size = hit.frame_size,
			.plain_size = hit.plain_size,
			.refs = 0,
			.region_size = hit.region_size,
			.region_offset = hit.region_offset,
		};
		memcpy(ch.digest, id->bytes, DEDUP_CHUNK_ID_SIZE);
		r = chunk_register(s, id, &ch, &chunk);
		if (r == -EEXIST) {
			/* Registered meanwhile (by a writer of this host): that copy it is. */
			CatalogChunk other;
			r = catalog_chunk_find(s->catalog, s->tier, id->bytes, &other);
			chunk = other.id;
			container = other.container;
			foreign = false;
		}
	}
	if (r < 0) {
		catalog_rollback(s->catalog);
		store_global_refs_leave(s);
		return r;
	}
	r = catalog_commit(s->catalog);
	store_global_refs_leave(s);
	if (r < 0)
		return r;
	/* Invariant 3 of store-global.c: only now that the row is committed. */
	if (foreign) {
		r = store_global_map_add(s, container, hit.host, hit.container);
		if (r < 0)
			return r;
		store_global_count_hit(s, hit.plain_size);
		w->stats.foreign_chunks++;
		w->stats.foreign_bytes += len;
	}
	dedup_locality_add(s->locality, container, id, chunk);
	*ret_chunk = chunk;
	return 1;
}

/*
 * Looks id (len bytes) up in the store (invariant 2, after this writer's
 * own chunks), then in what other hosts published (global dedup).
 * Returns 1 and *ret_chunk if stored, 0 if not, <0 on error.
 */
static int store_lookup(DedupWriter *w, const DedupChunkId *id, size_t len, uint64_t *ret_chunk) {
	DedupStore *s = w->s;
	CatalogChunk ch;
	int r;

	if (!dedup_bloom_maybe_contains(s->filter, id))
		return foreign_lookup(w, id, len, ret_chunk);
	if (dedup_locality_find(s->locality, id, ret_chunk))
		return 1;
	w->stats.index_lookups++;
	r = catalog_chunk_find(s->catalog, s->tier, id->bytes, &ch);
	if (r == -ENOENT)
		return foreign_lookup(w, id, len, ret_chunk);
	if (r < 0)
		return r;
	r = locality_load(w, ch.container);
	if (r < 0)
		return r;
	*ret_chunk = ch.id;
	return 1;
}

/*
 * Appends the encoded regions of the builder's output to the store's
 * containers, once all are encoded: then their chunks' shares are known.
 */
static int output_flush(DedupWriter *w) {
	StoreRegionBuilder *b = &w->builder;
	if (b->n_units == 0)
		return 0;
	int r = store_builder_wait(b);
	if (r < 0)
		return r;
	/* A region's chunks are consecutive pending chunks, and every region of the output has some. */
	for (size_t i = w->appended, j; i < w->region_first; i = j) {
		const StoreUnit *u = b->units + w->pending[i].unit;
		uint64_t given = 0;
		for (j = i; j < w->region_first && w->pending[j].unit == w->pending[i].unit; j++)
			;
		for (size_t k = i; k < j; k++) {
			StorePending *p = w->pending + k;
			p->share = store_share(u->size, p->plain_size, u->plain_size, k + 1 == j, given);
			p->region_size = u->size;
			given += p->share;
		}
		w->stats.stored_bytes += u->size;
		w->stats.regions++;
	}
	r = store_append(w->s, b->units, b->n_units, &w->pins);
	if (r < 0)
		return r;
	for (size_t i = w->appended; i < w->region_first; i++) {
		StorePending *p = w->pending + i;
		p->container = b->units[p->unit].container;
		p->offset = b->units[p->unit].offset;
	}
	w->appended = w->region_first;
	store_builder_reset_output(b);
	return 0;
}

/* Compresses the region being gathered into the builder's output (or hands it to the store's encoders). */
static int region_encode(DedupWriter *w) {
	StoreRegionBuilder *b = &w->builder;
	size_t unit;
	int r = store_builder_encode(b, &unit);
	if (r == -ENOBUFS) {
		r = output_flush(w);
		if (r >= 0)
			r = store_builder_encode(b, &unit);
	}
	if (r <= 0)
		return r;
	for (size_t i = w->region_first; i < w->n_pending; i++)
		w->pending[i].unit = unit;
	w->region_first = w->n_pending;
	return 0;
}

/*
 * Replaces the entries' tags (invariant 1) whose chunks have ids now: those
 * of the batch done (NULL: none) and the settled borrows.
 */
static void entries_resolve(DedupWriter *w, const StoreBatch *done) {
	size_t open = w->n_entries;
	bool borrow_open = false;
	for (size_t i = w->first_open_entry; i < w->n_entries; i++) {
		uint64_t c = w->chunks[i];
		if (c == DEDUP_RECIPE_LITERAL || !(c & PENDING_BIT))
			continue;
		if (c & BORROW_BIT) {
			c = w->borrowed[c & ~(PENDING_BIT | BORROW_BIT)].chunk;
			if (c == 0 || (c & PENDING_BIT)) {
				open = MIN(open, i);
				borrow_open = true;
				continue;
			}
		} else if (done && (c & GEN_BIT) == done->gen)
			c = done->pending_chunk[c & INDEX_MASK];
		else {
			open = MIN(open, i);
			continue;
		}
		w->chunks[i] = c;
	}
	w->first_open_entry = open;
	if (w->n_unsettled == 0 && !borrow_open)
		w->n_borrowed = 0;
}

/*
 * Invariant 3: makes b's regions durable, then registers its chunks at refs
 * 0.  Touches nothing but the store and b's ids, container fields of its
 * chunks found stored meanwhile, counts and result (invariant 8).
 */
static int registration_run(DedupStore *s, StoreBatch *b) {
	int r;

	r = store_pins_sync(s, &b->pins);
	if (r < 0)
		return r;
	r = catalog_begin(s->catalog);
	if (r < 0)
		return r;
	for (size_t i = 0; i < b->n_pending; i++) {
		StorePending *p = b->pending + i;
		CatalogChunk ch = {
			.tier = s->tier,
			.container = p->container,
			.offset = p->offset,
			.frame_size = p->share,
			.plain_size = p->plain_size,
			.refs = 0,
			.region_size = p->region_size,
			.region_offset = p->region_offset,
		};
		memcpy(ch.digest, p->id.bytes, DEDUP_CHUNK_ID_SIZE);
		r = chunk_register(s, &p->id, &ch, &b->pending_chunk[i]);
		if (r == -EEXIST) {
			/*
			 * Stored by another writer meanwhile (invariant 2): ours is
			 * garbage, and what this file's seal added is the other's copy.
			 */
			CatalogChunk other;
			r = catalog_chunk_find(s->catalog, s->tier, p->id.bytes, &other);
			if (r < 0)
				break;
			b->pending_chunk[i] = other.id;
			p->container = 0;
			b->moved_chunks++;
			b->moved_bytes += p->plain_size;
			b->moved_size += p->share;
		}
		if (r < 0)
			break;
	}
	if (r >= 0)
		r = store_pins_commit_sizes(s, &b->pins);
	if (r < 0) {
		catalog_rollback(s->catalog);
		return r;
	}
	return catalog_commit(s->catalog);
}

static void *registration_main(void *userdata) {
	DedupWriter *w = userdata;
	(void) pthread_setname_np(pthread_self(), "fratier-reg");
	w->reg.result = registration_run(w->s, &w->reg);
	__atomic_store_n(&w->reg.done, true, __ATOMIC_RELEASE);
	return NULL;
}

/* Takes the registered batch back (invariant 8): its ids go to the entries and borrows, then its flights land. */
static int registration_done(DedupWriter *w) {
	DedupStore *s = w->s;
	StoreBatch *b = &w->reg;

	if (b->result < 0)
		return b->result; /* its flights are lost by fail() */
	w->stats.stored_bytes -= b->moved_size;
	w->stats.new_chunks -= b->moved_chunks;
	w->stats.new_bytes -= b->moved_bytes;
	w->stats.dup_chunks += b->moved_chunks;
	w->stats.dup_bytes += b->moved_bytes;
	b->moved_chunks = b->moved_bytes = b->moved_size = 0;

	for (size_t k = 0; k < w->n_borrowed; k++) {
		uint64_t c = w->borrowed[k].chunk;
		if ((c & PENDING_BIT) && (c & GEN_BIT) == b->gen)
			w->borrowed[k].chunk = b->pending_chunk[c & INDEX_MASK];
	}
	entries_resolve(w, b);

	for (size_t i = 0; i < b->n_pending; i++) {
		StorePending *p = b->pending + i;
		if (p->container == 0)
			continue;
		dedup_locality_add(s->locality, p->container, &p->id, b->pending_chunk[i]);
		if (s->global) {
			/* For the next segment: registered, so durable below the committed size. */
			DedupSegmentEntry e = {
				.id = p->id,
				.container = p->container,
				.offset = p->offset,
				.region_size = p->region_size,
				.region_offset = p->region_offset,
				.plain_size = p->plain_size,
				.frame_size = p->share,
			};
			/* Without memory the chunk goes unpublished: other hosts store their own copy. */
			(void) store_global_note(s, &e, 1);
		}
	}
	/* Invariant 6: after the filter. */
	__atomic_store_n(&w->lent, 0, __ATOMIC_RELAXED);
	for (size_t i = 0; i < b->n_pending; i++)
		if (b->pending[i].flight) {
			store_flight_land(s, b->pending[i].flight, b->pending_chunk[i]);
			b->pending[i].flight = NULL;
		}
	store_pins_release(s, &b->pins);
	b->n_pending = 0;
	memset(b->pmap, 0xff, PMAP_SLOTS * sizeof(uint32_t));
	return 0;
}

/* Invariant 8: the batch in registration, if any, done and taken back. */
static int registration_wait(DedupWriter *w) {
	if (!w->registering)
		return 0;
	registration_join(w);
	return registration_done(w);
}

/*
 * Appends the pending regions and hands them over for registration
 * (invariants 3 and 8), on the registrar's thread unless wait (then here,
 * and every chunk of this writer is registered on return).
 */
static int register_own(DedupWriter *w, bool wait) {
	StoreBatch *b = &w->reg;
	int r;

	r = region_encode(w);
	if (r >= 0)
		r = output_flush(w);
	if (r >= 0)
		r = registration_wait(w);
	if (r < 0)
		return r;
	if (w->n_pending == 0) {
		entries_resolve(w, NULL);
		return 0;
	}

	/* The gathering batch's arrays change places with the registered one's, emptied by registration_done(). */
	SWAP(w->pending, b->pending);
	SWAP(w->pending_chunk, b->pending_chunk);
	SWAP(w->cap_pending, b->cap_pending);
	SWAP(w->pmap, b->pmap);
	SWAP(w->pins, b->pins);
	b->n_pending = w->n_pending;
	b->gen = w->gen;
	b->result = 0;
	b->done = false;
	w->gen ^= GEN_BIT;
	w->n_pending = w->appended = w->region_first = 0;
	w->pending_bytes = 0;

	if (!wait && pthread_create(&w->registrar, NULL, registration_main, w) == 0) {
		w->registering = true;
		return 0;
	}
	/* Without a thread, it is registered here. */
	b->result = registration_run(w->s, b);
	return registration_done(w);
}

static int pending_reserve(DedupWriter *w) {
	if (w->n_pending < w->cap_pending)
		return 0;
	size_t cap = MIN(MAX(w->cap_pending * 2, (size_t) 256), (size_t) STORE_PENDING_MAX);
	StorePending *f = realloc(w->pending, cap * sizeof(*f));
	if (!f)
		return -ENOMEM;
	w->pending = f;
	uint64_t *c = realloc(w->pending_chunk, cap * sizeof(*c));
	if (!c)
		return -ENOMEM;
	w->pending_chunk = c;
	w->cap_pending = cap;
	return 0;
}

/* Gathers a chunk nobody has stored into the region being built; returns its pending index. */
static int store_new(DedupWriter *w, const DedupChunkId *id, const void *data, size_t len, size_t slot,
		     uint64_t *ret_index) {
	int r;

	r = pending_reserve(w);
	if (r < 0)
		return r;
	if (store_builder_is_full(&w->builder, len)) {
		r = region_encode(w);
		if (r < 0)
			return r;
	}
	uint32_t at = store_builder_add(&w->builder, id, data, len);
	w->pending[w->n_pending] = (StorePending) { .id = *id, .plain_size = (uint32_t) len, .region_offset = at };
	w->pmap[slot] = (uint32_t) w->n_pending;
	*ret_index = w->n_pending++;
	w->pending_bytes += len;
	w->stats.new_chunks++;
	w->stats.new_bytes += len;
	return 0;
}

/*
 * Settles the borrowed chunks whose owners landed them (their ids) or lost
 * them, and with final every other one too: this writer stores what did
 * not land (invariant 2).
 */
static int settle_borrowed(DedupWriter *w, bool final) {
	DedupStore *s = w->s;
	int r;

	if (w->n_unsettled == 0)
		return 0;
	w->landings_seen = store_flight_landings(s);
	for (size_t k = 0; k < w->n_borrowed; k++) {
		StoreBorrow *b = w->borrowed + k;
		uint64_t chunk;
		if (!b->flight)
			continue;
		int state = store_flight_state(s, b->flight, &chunk);
		if (state == STORE_FLIGHT_IN_FLIGHT && !final)
			continue;
		if (state != STORE_FLIGHT_LANDED) {
			/* Someone else may have stored it meanwhile; else it is ours to store. */
			size_t slot;
			if (!pending_find(w, &b->flight->id, &slot, &chunk)) {
				r = store_lookup(w, &b->flight->id, b->len, &chunk);
				if (r < 0)
					return r;
				if (r == 0) {
					uint64_t index;
					if (w->n_pending >= STORE_PENDING_MAX) {
						r = register_own(w, false);
						if (r < 0)
							return r;
						slot = pmap_probe(w, &b->flight->id);
					}
					r = store_new(w, &b->flight->id, b->data, b->len, slot, &index);
					if (r < 0)
						return r;
					chunk = PENDING_BIT | w->gen | index;
					w->stats.dup_chunks--;
					w->stats.dup_bytes -= b->len;
				}
			}
		}
		b->chunk = chunk;
		store_flight_unref(s, b->flight);
		b->flight = NULL;
		free(b->data);
		b->data = NULL;
		w->borrow_bytes -= b->len;
		w->n_unsettled--;
	}
	return 0;
}

/*
 * Settles what it can, then hands this writer's own new chunks over for
 * registration; with final every borrow is settled and every chunk
 * registered.
 */
static int register_pending(DedupWriter *w, bool final) {
	int r = settle_borrowed(w, final);
	if (r < 0)
		return r;
	return register_own(w, final);
}

/*
 * A chunk found nowhere in the store (invariant 2): returns 1 and its
 * entry's tag if another writer has it in flight and this one borrows it,
 * or 0 and, in *ret_flight, the flight this writer claimed for it (NULL if
 * it stores a copy anyway).
 */
static int chunk_claim(DedupWriter *w, const DedupChunkId *id, const uint8_t *data, size_t len, uint64_t *ret_chunk,
		       StoreFlight **ret_flight) {
	StoreFlight *f;
	int r;

	r = store_flight_claim(w->s, id, (uint32_t) len, &w->lent, &f);
	if (r < 0)
		return r;
	if (r > 0) {
		*ret_flight = f;
		return 0;
	}
	if (w->borrow_bytes + len > STORE_BORROW_MAX && store_flight_landings(w->s) != w->landings_seen) {
		r = settle_borrowed(w, false);
		if (r < 0)
			goto out_unref;
	}
	*ret_flight = NULL;
	if (w->borrow_bytes + len > STORE_BORROW_MAX) {
		r = 0;
		goto out_unref;
	}
	if (w->n_borrowed == w->cap_borrowed) {
		size_t cap = MAX(w->cap_borrowed * 2, (size_t) 256);
		StoreBorrow *b = realloc(w->borrowed, cap * sizeof(*b));
		if (!b) {
			r = -ENOMEM;
			goto out_unref;
		}
		w->borrowed = b;
		w->cap_borrowed = cap;
	}
	uint8_t *copy = malloc(len);
	if (!copy) {
		r = -ENOMEM;
		goto out_unref;
	}
	memcpy(copy, data, len);
	w->borrowed[w->n_borrowed] = (StoreBorrow) { .flight = f, .data = copy, .len = (uint32_t) len };
	*ret_chunk = PENDING_BIT | BORROW_BIT | w->n_borrowed++;
	w->n_unsettled++;
	w->borrow_bytes += len;
	return 1;

out_unref:
	store_flight_unref(w->s, f);
	return r;
}

/* One complete chunk of the file, not all zeros. */
static int chunk_known(DedupWriter *w, const uint8_t *data, size_t len) {
	StoreFlight *flight = NULL;
	DedupChunkId id;
	uint64_t chunk;
	int r;

	r = dedup_hasher_digest(w->hasher, data, len, &id);
	if (r < 0)
		return r;

	size_t slot;
	if (pending_find(w, &id, &slot, &chunk))
		r = 1;
	else {
		r = store_lookup(w, &id, len, &chunk);
		if (r == 0)
			r = chunk_claim(w, &id, data, len, &chunk, &flight);
	}
	if (r < 0)
		return r;
	if (r > 0) {
		w->stats.dup_chunks++;
		w->stats.dup_bytes += len;
	} else {
		uint64_t index;
		/* A settle in chunk_claim() may have registered and emptied the map. */
		r = store_new(w, &id, data, len, pmap_probe(w, &id), &index);
		if (r < 0) {
			if (flight)
				store_flight_land(w->s, flight, 0);
			return r;
		}
		w->pending[index].flight = flight;
		chunk = PENDING_BIT | w->gen | index;
	}
	r = entry_add(w, chunk, (uint32_t) len);
	if (r < 0)
		return r;

	/*
	 * Borrowers wait for the flights: they land as soon as their
	 * registration committed.  A writer holding
	 * DEDUP_WRITER_OPEN_ENTRIES_MAX entries waits for it too (invariant 9):
	 * a file that refers again and again to a few chunks of its own, not
	 * registered yet, would otherwise hold every entry.  At half of it the
	 * writer registers its new chunks early, on the registrar's thread,
	 * and goes on, so a registration that ends in time costs it nothing.
	 * That is above the entries that sync_bytes of new 8 KiB blocks and
	 * their literals make, so a first backup never reaches it; a second
	 * one, whose few new blocks are spread through the file, registers
	 * every 32 Ki entries (about 128 MiB of pieces).
	 */
	size_t held = w->n_entries - w->first_open_entry;
	if (w->registering &&
	    (held >= DEDUP_WRITER_OPEN_ENTRIES_MAX || __atomic_load_n(&w->reg.done, __ATOMIC_ACQUIRE))) {
		r = registration_wait(w);
		if (r < 0)
			return r;
		held = w->n_entries - w->first_open_entry;
	}
	if (w->pending_bytes >= w->s->opts.sync_bytes || w->n_pending >= STORE_PENDING_MAX ||
	    __atomic_load_n(&w->lent, __ATOMIC_RELAXED) >= STORE_LENT_SYNC ||
	    (held >= DEDUP_WRITER_OPEN_ENTRIES_MAX / 2 && w->n_pending > 0 && !w->registering))
		return register_pending(w, false);
	return 0;
}

/* One complete chunk of the file. */
static int chunk_process(DedupWriter *w, const uint8_t *data, size_t len) {
	w->stats.chunks++;
	if (dedup_is_all_zero(data, len))
		return zero_add(w, len);
	return chunk_known(w, data, len);
}

DedupWriter *dedup_writer_free(DedupWriter *w) {
	if (!w)
		return NULL;
	/* First: the encoders may still be compressing its regions, the registrar registering a batch. */
	store_builder_done(&w->builder);
	/* A batch registered meanwhile lands its flights with their ids; on error, flights_lose() lands them lost. */
	(void) registration_wait(w);
	flights_lose(w);
	for (size_t k = 0; k < w->n_borrowed; k++)
		if (w->borrowed[k].flight) {
			store_flight_unref(w->s, w->borrowed[k].flight);
			free(w->borrowed[k].data);
		}
	free(w->borrowed);
	store_pins_release(w->s, &w->pins);
	store_pins_release(w->s, &w->reg.pins);
	if (w->entered)
		store_writers_leave(w->s);
	dedup_hasher_free(w->hasher);
	free(w->chunk_buf);
	free(w->window);
	free(w->literals);
	free(w->chunks);
	free(w->lengths);
	free(w->spooled);
	free(w->spool_mem);
	if (w->spool_fd >= 0)
		close(w->spool_fd);
	free(w->blob);
	free(w->seg);
	free(w->pending);
	free(w->pending_chunk);
	free(w->pmap);
	free(w->pins.pins);
	free(w->reg.pending);
	free(w->reg.pending_chunk);
	free(w->reg.pmap);
	free(w->reg.pins.pins);
	free(w->load);
	free(w);
	return NULL;
}

DEFINE_CLEANUP_FUNC(DedupWriter, dedup_writer_free);

int dedup_writer_new(DedupStore *s, const DedupChunkerParams *params, int zstd_level, uint32_t region_size,
		     DedupWriter **ret) {
	DedupChunkerParams p = params ? *params : DEDUP_CHUNKER_PARAMS_DEFAULT;
	int r;

	if (!s || !ret)
		return -EINVAL;
	if (zstd_level == DEDUP_STORE_LEVEL_DEFAULT)
		zstd_level = s->opts.zstd_level;
	if (region_size == DEDUP_STORE_REGION_DEFAULT)
		region_size = s->opts.region_size;
	if (zstd_level < DEDUP_FRAME_LEVEL_MIN || zstd_level > DEDUP_FRAME_LEVEL_MAX ||
	    region_size < DEDUP_REGION_TARGET_MIN || region_size > DEDUP_REGION_TARGET_MAX)
		return -EINVAL;

	_cleanup_(dedup_writer_freep) DedupWriter *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->s = s;
	w->params = p;
	w->spool_fd = -1;
	r = dedup_chunker_init(&w->chunker, &p);
	if (r < 0)
		return r;
	r = s->opts.id_key ? dedup_hasher_new_keyed(s->opts.id_key, DEDUP_KEY_SIZE, &w->hasher)
			   : dedup_hasher_new(&w->hasher);
	if (r < 0)
		return r;
	store_encoders_start(s);
	r = store_builder_init_parallel(&w->builder, s, zstd_level, region_size, p.min_size, p.max_size);
	if (r < 0)
		return r;
	w->chunk_buf = malloc(p.max_size);
	w->pmap = malloc(PMAP_SLOTS * sizeof(uint32_t));
	w->reg.pmap = malloc(PMAP_SLOTS * sizeof(uint32_t));
	if (!w->chunk_buf || !w->pmap || !w->reg.pmap)
		return -ENOMEM;
	if (p.mode == DEDUP_CHUNKER_ORACLE) {
		w->window = malloc(STORE_ORACLE_WINDOW);
		if (!w->window)
			return -ENOMEM;
		dedup_oracle_splitter_init(&w->splitter);
	}
	memset(w->pmap, 0xff, PMAP_SLOTS * sizeof(uint32_t));
	memset(w->reg.pmap, 0xff, PMAP_SLOTS * sizeof(uint32_t));
	/* Other hosts' new segments, at most every few seconds (store-global.c). */
	store_global_refresh(s);

	/*
	 * A filter past its capacity answers "maybe" more and more often: grow it
	 * now if no writer is using it (else the collector will).
	 */
	if (dedup_bloom_count(s->filter) > dedup_bloom_capacity(s->filter) && store_exclusive_try_begin(s)) {
		r = store_filter_rebuild(s);
		store_exclusive_end(s);
		if (r < 0)
			return r;
	}
	store_writers_enter(s);
	w->entered = true;

	r = store_write_error(s);
	if (r < 0)
		return r;

	*ret = TAKE_PTR(w);
	return 0;
}

/* CDC over the next len bytes of the stream (or of a gap between Oracle blocks). */
static int cdc_feed(DedupWriter *w, const uint8_t *p, size_t len) {
	int r;

	while (len > 0) {
		size_t n;
		bool cut = dedup_chunker_scan(&w->chunker, p, len, &n);
		if (cut && w->chunk_len == 0)
			/* The whole chunk is in the caller's buffer: no copy. */
			r = chunk_process(w, p, n);
		else {
			memcpy(w->chunk_buf + w->chunk_len, p, n);
			w->chunk_len += n;
			r = 0;
			if (cut) {
				r = chunk_process(w, w->chunk_buf, w->chunk_len);
				w->chunk_len = 0;
			}
		}
		if (r < 0)
			return r;
		p += n;
		len -= n;
	}
	return 0;
}

/* Cuts where the stream (or a gap) ends: what CDC holds is a chunk. */
static int cdc_flush(DedupWriter *w) {
	int r = 0;
	if (w->chunk_len > 0)
		r = chunk_process(w, w->chunk_buf, w->chunk_len);
	w->chunk_len = 0;
	dedup_chunker_reset(&w->chunker);
	return r;
}

static int literal_add(DedupWriter *w, const uint8_t *p, size_t len) {
	w->stats.literal_bytes += len;
	return recipe_append(w, &(DedupRecipeEntry) { .chunk = DEDUP_RECIPE_LITERAL, .length = (uint32_t) len, .literal = p });
}

/*
 * Oracle chunking: cuts what the window holds into blocks, literals and
 * gaps (dedup/chunker.h), as far as it can decide; final: the stream ends.
 */
static int oracle_process(DedupWriter *w, bool final) {
	size_t pos = 0;
	int r = 0;
	DedupOraclePiece piece;

	while (dedup_oracle_next(&w->splitter, w->window + pos, w->window_len - pos, final, &piece)) {
		const uint8_t *p = w->window + pos;
		switch (piece.kind) {
		case DEDUP_ORACLE_BLOCK:
			w->stats.chunks++;
			r = dedup_is_all_zero(p, piece.len) ? zero_add(w, piece.len) : chunk_known(w, p, piece.len);
			break;
		case DEDUP_ORACLE_LITERAL:
			r = literal_add(w, p, piece.len);
			break;
		default:
			r = cdc_feed(w, p, piece.len);
			if (r >= 0 && piece.gap_end)
				r = cdc_flush(w);
			break;
		}
		if (r < 0)
			return r;
		pos += piece.len;
	}
	memmove(w->window, w->window + pos, w->window_len - pos);
	w->window_len -= pos;
	return 0;
}

int dedup_writer_feed(DedupWriter *w, const void *buf, size_t len) {
	const uint8_t *p = buf;
	int r;

	if (w->error < 0)
		return w->error;
	if (w->finished)
		return fail(w, -EINVAL);
	if (len == 0)
		return 0;
	if (len > DEDUP_RECIPE_FILE_SIZE_MAX - w->total)
		return fail(w, -EFBIG);
	w->total += len;
	w->stats.logical_bytes += len;

	if (!w->window) {
		r = cdc_feed(w, p, len);
		return r < 0 ? fail(w, r) : 0;
	}
	while (len > 0) {
		size_t n = MIN(len, STORE_ORACLE_WINDOW - w->window_len);
		memcpy(w->window + w->window_len, p, n);
		w->window_len += n;
		p += n;
		len -= n;
		r = oracle_process(w, false);
		if (r < 0)
			return fail(w, r);
	}
	return 0;
}

/* Ends the chunk being cut where the bytes fed so far end (finish() and cut()). */
static int chunkers_flush(DedupWriter *w) {
	int r = 0;

	if (w->window)
		r = oracle_process(w, true);
	if (r >= 0)
		r = cdc_flush(w);
	return r;
}

int dedup_writer_finish(DedupWriter *w) {
	int r;

	if (w->error < 0)
		return w->error;
	if (w->finished)
		return fail(w, -EINVAL);
	r = chunkers_flush(w);
	if (r >= 0)
		r = register_pending(w, true);
	if (r >= 0)
		r = recipe_spool(w, false);
	if (r < 0)
		return fail(w, r);
	w->finished = true;
	/*
	 * Global dedup: other hosts see this file's new chunks as soon as it is
	 * stored.  A publication that fails is retried by the next one (and by
	 * the daemon); the chunks are durable either way.
	 */
	if (w->s->global)
		(void) dedup_store_publish(w->s);
	return 0;
}

int dedup_writer_cut(DedupWriter *w) {
	int r;

	if (w->error < 0)
		return w->error;
	if (w->finished)
		return fail(w, -EINVAL);
	r = chunkers_flush(w);
	if (w->window)
		dedup_oracle_splitter_init(&w->splitter);
	if (r < 0)
		return fail(w, r);
	w->cut_entry = w->n_entries;
	return 0;
}

int dedup_writer_join(DedupWriter *w, DedupWriter *next) {
	if (w->error < 0)
		return w->error;
	if (next->error < 0)
		return fail(w, next->error);
	if (w == next || w->s != next->s || !w->finished || !next->finished || w->joined || next->joined ||
	    w->params.mode != next->params.mode || w->params.min_size != next->params.min_size ||
	    w->params.avg_size != next->params.avg_size || w->params.max_size != next->params.max_size)
		return fail(w, -EINVAL);
	if (next->total > DEDUP_RECIPE_FILE_SIZE_MAX - w->total)
		return fail(w, -EFBIG);
	/*
	 * Both finished: every entry holds its final id (invariant 1), nothing
	 * of next is pending.  Its entries are fed on after w's, so the
	 * segments are cut where one writer would cut them (invariant 9).
	 */
	for (size_t i = 0; i < next->n_spooled; i++) {
		DedupRecipeSegment *seg;
		int r = spooled_get(next, i, &seg, NULL);
		if (r < 0)
			return fail(w, r);
		for (size_t j = 0; r >= 0 && j < seg->n_entries; j++)
			r = recipe_append(w, seg->entries + j);
		free(seg);
		if (r < 0)
			return fail(w, r);
	}
	for (size_t i = 0, literal = 0; i < next->n_entries; i++) {
		DedupRecipeEntry e = { .chunk = next->chunks[i], .length = next->lengths[i] };
		if (e.chunk == DEDUP_RECIPE_LITERAL) {
			e.literal = next->literals + literal;
			literal += e.length;
		}
		int r = recipe_append(w, &e);
		if (r < 0)
			return fail(w, r);
	}
	w->cut_entry = w->n_entries;
	w->total += next->total;

	const DedupWriterStats *a = &next->stats;
	DedupWriterStats *t = &w->stats;
	t->logical_bytes += a->logical_bytes;
	t->zero_bytes += a->zero_bytes;
	t->literal_bytes += a->literal_bytes;
	t->chunks += a->chunks;
	t->new_chunks += a->new_chunks;
	t->new_bytes += a->new_bytes;
	t->stored_bytes += a->stored_bytes;
	t->regions += a->regions;
	t->dup_chunks += a->dup_chunks;
	t->dup_bytes += a->dup_bytes;
	t->index_lookups += a->index_lookups;
	t->foreign_chunks += a->foreign_chunks;
	t->foreign_bytes += a->foreign_bytes;
	t->encode_wait_ns += a->encode_wait_ns + next->builder.encode_wait_ns;
	t->encode_cpu_ns += a->encode_cpu_ns + next->builder.encode_cpu_ns;
	next->joined = true;
	return 0;
}

static int recipe_exists(uint64_t start, const void *blob, size_t size, void *userdata) {
	return 0;
}

int dedup_writer_commit(DedupWriter *w, uint64_t ino) {
	DedupStore *s = w->s;
	int r;

	if (w->error < 0 || !w->finished || w->joined)
		return -EINVAL;

	r = catalog_recipe_find(s->catalog, ino, INT64_MAX, recipe_exists, NULL);
	if (r == 0)
		return -EEXIST;
	if (r != -ENOENT)
		return r;

	/* What a rolled-back commit spooled stays spooled: spooling again finds nothing left. */
	r = recipe_spool(w, true);
	if (r < 0)
		return r;
	/* One reference per occurrence, one catalog update per distinct chunk of each batch of segments. */
	_cleanup_free_ uint64_t *ids = malloc(COMMIT_REFS_BATCH * sizeof(uint64_t));
	if (!ids)
		return -ENOMEM;
	size_t n = 0;
	for (size_t i = 0; i < w->n_spooled; i++) {
		const uint8_t *blob = NULL;
		_cleanup_free_ DedupRecipeSegment *seg = NULL;
		r = spooled_get(w, i, &seg, &blob);
		if (r < 0)
			return r;
		r = catalog_recipe_put(s->catalog, ino, seg->start, blob, w->spooled[i].size);
		if (r < 0)
			return r;
		if (n + seg->n_entries > COMMIT_REFS_BATCH) {
			r = store_refs_apply(s, ids, n, +1);
			if (r < 0)
				return r;
			n = 0;
		}
		for (size_t j = 0; j < seg->n_entries; j++)
			if (dedup_recipe_entry_is_chunk(seg->entries + j))
				ids[n++] = seg->entries[j].chunk;
	}
	r = store_refs_apply(s, ids, n, +1);
	if (r < 0)
		return r;

	store_recipe_invalidate(s, ino);
	return 0;
}

int dedup_writer_spool(DedupWriter *w, int fd) {
	if (w->spool_fd >= 0 || w->total > 0) {
		close(fd);
		return -EINVAL;
	}
	w->spool_fd = fd;
	return 0;
}

void dedup_writer_stats(const DedupWriter *w, DedupWriterStats *ret) {
	*ret = w->stats;
	ret->recipe_memory = w->cap_entries * (sizeof(*w->chunks) + sizeof(*w->lengths)) + w->cap_literals +
			     w->cap_spool_mem + w->cap_spooled * sizeof(*w->spooled);
	ret->recipe_spool_memory = w->cap_spool_mem;
	/* stats.encode_wait_ns and encode_cpu_ns hold the joined parts' (dedup_writer_join()). */
	ret->encode_wait_ns += w->builder.encode_wait_ns;
	ret->encode_cpu_ns += w->builder.encode_cpu_ns;
}

int store_writer_stored_distinct(DedupWriter *w, uint64_t *ret) {
	if (w->error < 0 || !w->finished)
		return -EINVAL;
	_cleanup_free_ uint64_t *ids = NULL;
	size_t n = 0, cap = 0;
	for (size_t i = 0; i <= w->n_spooled; i++) {
		_cleanup_free_ DedupRecipeSegment *seg = NULL;
		size_t k = w->n_entries;
		if (i < w->n_spooled) {
			int r = spooled_get(w, i, &seg, NULL);
			if (r < 0)
				return r;
			k = seg->n_entries;
		}
		for (size_t j = 0; j < k; j++) {
			uint64_t c = seg ? seg->entries[j].chunk : w->chunks[j];
			if (c == 0 || c == DEDUP_RECIPE_LITERAL)
				continue;
			int r = ARRAY_RESERVE_ONE(ids, cap, n, 4096);
			if (r < 0)
				return r;
			ids[n++] = c;
		}
	}
	if (n == 0) {
		*ret = 0;
		return 0;
	}
	return store_catalog_stored_distinct(w->s->catalog, ids, n, ret);
}
