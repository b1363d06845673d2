/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store-read.c — reading sealed files back through their recipes, and
 * dropping recipes.
 *
 * A read finds the recipe segment covering its offset (a small cache of
 * decoded segments, each with the chunk locations resolved so far), finds
 * the units (regions, or version 1 frames) holding the chunks it needs in
 * the region cache, and fetches the rest: units stored back to back in one
 * container are read with one pread, and a sequential reader gets the units
 * of the following chunks of the recipe fetched and cached as well
 * (read-ahead).  Every fetched unit is fully checked before it is cached,
 * and each unit is decoded once: a miss claims the unit in the cache, and
 * another thread needing it meanwhile waits for the claimer.
 *
 * A unit whose chunks the bytes the caller asked for name whole, in the
 * unit's order (a region of a file sealed front to back, inside a
 * restore's 1 MiB block) is decoded straight into the caller's buffer
 * and not cached: no cache entry to fault in, no copy out of it.  Other
 * entries may lie between its chunks (zero runs, chunks deduplicated
 * against earlier data: an Oracle backup piece has them every few
 * blocks): its chunks are then moved apart to their places in the
 * buffer, in place, and the entries between them filled after.  Only the
 * units that straddle the ends of a read, that the recipe names out of
 * order, or whose span holds another placed unit go through the cache.
 *
 * Invariants:
 *  1. No byte reaches a caller or the region cache unless its unit passed
 *     store_unit_decode() (checksums, exact decompression, and the content
 *     hash of every chunk when verify_content), and the chunk is in the unit
 *     where the catalog says (offset in the region, length and id).  Any
 *     failure on a needed chunk is -EIO for the whole read.
 *  2. A location (container, offset) is used only if it was resolved in the
 *     current epoch, and the pread runs under io_lock shared after checking
 *     that the epoch is still the same: the collector unlinks container
 *     objects only under io_lock exclusive, after bumping the epoch, and
 *     after committing the moves that took every chunk out of them.  So a
 *     reader never reads a container that was deleted.
 *  3. A recipe segment is cached only if no recipe changed (recipe_gen)
 *     between reading it from the catalog and inserting it; changes
 *     (commit, drop) invalidate the file's segments.
 *  4. No catalog call is made with io_lock or read_lock held.
 *  5. A read waits for another thread's claim only once it holds no claim
 *     of its own: it loads what it claimed first (dedup/cache.h).
 *  6. A unit decoded into the caller's buffer (placed) passed the same
 *     checks as a cached one, and every recipe entry it serves was checked
 *     against its decoded table (offset, length, id) before the read
 *     returns; on any failure the read fails and the buffer holds garbage.
 *     A placed unit writes only inside its span (its first entry's start to
 *     its last entry's end), no two placed units' spans overlap, and the
 *     entries between a placed unit's chunks are written after every unit
 *     is placed (segment_read()).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/array.h"
#include "common/macros.h"
#include "dedup/frame.h"
#include "dedup/store-internal.h"

/* Where a recipe entry's chunk is: its unit, and the chunk in it. */
typedef struct StoreLoc {
	uint64_t epoch; /* 0: not resolved */
	uint64_t container;
	uint64_t offset;    /* of the unit */
	uint32_t size;      /* of the unit */
	bool region;        /* a region (else a version 1 frame) */
	uint32_t region_offset;
	uint64_t chunk;     /* catalog id */
	DedupChunkId id;
} StoreLoc;

/* A distinct unit a read step needs or reads ahead. */
typedef struct StoreUnitRef {
	uint64_t container, offset;
	uint32_t size;
	bool region;
	bool needed;
	DedupRegionLookup state;
	DedupCachedRegion *held;
	DedupRegionClaim *claim; /* the cache's claim on it, while state is CLAIMED */
	bool load;      /* to be fetched and loaded by this read, with its claim or with none */
	uint32_t first; /* the window entry that named it first (for damage reports) */
	uint32_t last;  /* the window entry that named it last */
	uint32_t n_entries; /* window entries naming it */
	bool direct;    /* to decode into the caller's buffer (invariant 6), if its size fits */
	uint32_t named; /* direct: the bytes of its entries, which it must hold exactly to be placed */
	bool placed;    /* decoded there, and its entries checked */
} StoreUnitRef;

/* Open-addressing map of the units of one read step: twice the window, never half full. */
#define UNIT_MAP_SLOTS (2 * STORE_READ_WINDOW)

struct StoreSegment {
	uint64_t ino, start, end;
	unsigned refs; /* protected by read_lock */
	bool cached;   /* protected by read_lock: in s->segments */
	uint64_t used; /* protected by read_lock */
	size_t n;
	uint64_t *offs;  /* n + 1 file offsets: entry i covers [offs[i], offs[i + 1]) */
	StoreLoc *locs;  /* protected by read_lock */
	DedupRecipeSegment *rs;
};

struct StoreReadCtx {
	StoreDecoded dec;
	uint8_t *buf;
	size_t cap;
	StoreLoc locs[STORE_READ_WINDOW];
	uint32_t unit_of[STORE_READ_WINDOW]; /* the entry's index in units, or UINT32_MAX */
	StoreUnitRef units[STORE_READ_WINDOW];
	size_t n_units;
	uint32_t unit_map[UNIT_MAP_SLOTS];
	uint32_t order[STORE_READ_WINDOW]; /* claimed units by container and offset */
	/* Chunk locations looked up together. */
	uint64_t lookup_ids[STORE_READ_WINDOW];
	uint32_t lookup_at[STORE_READ_WINDOW]; /* their entries */
	int lookup_r[STORE_READ_WINDOW];
	CatalogChunk lookup[STORE_READ_WINDOW];
	/* A placed unit's table, checked then dropped (invariant 6). */
	uint32_t *place_ends;
	DedupChunkId *place_ids;
	size_t place_cap;
	/* The read step's output: file offset `pos` is out[0]; NULL when only caching. */
	uint8_t *out;
	uint64_t pos, end;
	StoreSegment *seg;
	size_t i0;
};

static void segment_free(StoreSegment *seg) {
	if (!seg)
		return;
	free(seg->offs);
	free(seg->locs);
	free(seg->rs);
	free(seg);
}

static StoreReadCtx *ctx_free(StoreReadCtx *ctx) {
	if (!ctx)
		return NULL;
	store_decoded_done(&ctx->dec);
	free(ctx->buf);
	free(ctx->place_ends);
	free(ctx->place_ids);
	free(ctx);
	return NULL;
}

void store_read_init(DedupStore *s) {
	pthread_mutex_init(&s->read_lock, NULL);
}

int store_read_setup(DedupStore *s) {
	s->segments = calloc(s->opts.segment_cache, sizeof(*s->segments));
	s->ctx_pool = calloc(STORE_CTX_POOL_MAX, sizeof(*s->ctx_pool));
	if (!s->segments || !s->ctx_pool)
		return -ENOMEM;
	return 0;
}

void store_read_done(DedupStore *s) {
	if (s->segments)
		for (size_t i = 0; i < s->opts.segment_cache; i++)
			segment_free(s->segments[i]);
	free(s->segments);
	for (size_t i = 0; i < s->n_ctx_pool; i++)
		ctx_free(s->ctx_pool[i]);
	free(s->ctx_pool);
	pthread_mutex_destroy(&s->read_lock);
}

static int ctx_get(DedupStore *s, StoreReadCtx **ret) {
	StoreReadCtx *ctx = NULL;

	pthread_mutex_lock(&s->read_lock);
	if (s->n_ctx_pool > 0)
		ctx = s->ctx_pool[--s->n_ctx_pool];
	pthread_mutex_unlock(&s->read_lock);
	if (ctx) {
		*ret = ctx;
		return 0;
	}

	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	store_decoded_keys(s, &ctx->dec);
	*ret = ctx;
	return 0;
}

static void ctx_put(DedupStore *s, StoreReadCtx *ctx) {
	if (ctx->cap > STORE_CTX_BUFFER_KEEP) {
		free(ctx->buf);
		ctx->buf = NULL;
		ctx->cap = 0;
	}
	pthread_mutex_lock(&s->read_lock);
	if (s->n_ctx_pool < STORE_CTX_POOL_MAX) {
		s->ctx_pool[s->n_ctx_pool++] = ctx;
		ctx = NULL;
	}
	pthread_mutex_unlock(&s->read_lock);
	ctx_free(ctx);
}

/* Room for a run of size bytes; what the buffer held is not kept (a realloc would copy it for nothing). */
static int ctx_reserve(StoreReadCtx *ctx, size_t size) {
	if (size <= ctx->cap)
		return 0;
	free(ctx->buf);
	ctx->cap = 0;
	/*
	 * 1 MiB at least, then powers of two: runs grow a little at a time, and
	 * every new buffer is fresh pages to fault in.
	 */
	size_t cap = (size_t) 1 << 20;
	while (cap < size)
		cap *= 2;
	size = cap;
	ctx->buf = malloc(size);
	if (!ctx->buf)
		return -ENOMEM;
	ctx->cap = size;
	return 0;
}

/* ---- recipe segments ---- */

typedef struct Blob {
	uint64_t start;
	void *data;
	size_t size;
} Blob;

static int blob_copy(uint64_t start, const void *blob, size_t size, void *userdata) {
	Blob *b = userdata;
	b->data = malloc(size);
	if (!b->data)
		return -ENOMEM;
	memcpy(b->data, blob, size);
	b->size = size;
	b->start = start;
	return 0;
}

void store_recipe_invalidate(DedupStore *s, uint64_t ino) {
	StoreSegment *dead[64];
	size_t n_dead = 0;

	pthread_mutex_lock(&s->read_lock);
	s->recipe_gen++;
	for (size_t i = 0; i < s->opts.segment_cache; i++) {
		StoreSegment *seg = s->segments[i];
		if (!seg || seg->ino != ino)
			continue;
		s->segments[i] = NULL;
		seg->cached = false;
		if (seg->refs > 0)
			continue;
		if (n_dead == ELEMENTSOF(dead)) {
			/* Rare: free inline rather than grow a list under the lock. */
			segment_free(seg);
			continue;
		}
		dead[n_dead++] = seg;
	}
	pthread_mutex_unlock(&s->read_lock);
	for (size_t i = 0; i < n_dead; i++)
		segment_free(dead[i]);
}

static void segment_put(DedupStore *s, StoreSegment *seg) {
	pthread_mutex_lock(&s->read_lock);
	bool dead = --seg->refs == 0 && !seg->cached;
	pthread_mutex_unlock(&s->read_lock);
	if (dead)
		segment_free(seg);
}

/* The segment of ino's recipe that covers file offset pos, with a reference. */
static int segment_get(DedupStore *s, uint64_t ino, uint64_t pos, StoreSegment **ret) {
	StoreSegment *seg = NULL, *evicted = NULL;
	uint64_t gen;
	int r;

	pthread_mutex_lock(&s->read_lock);
	for (size_t i = 0; i < s->opts.segment_cache; i++) {
		StoreSegment *x = s->segments[i];
		if (x && x->ino == ino && x->start <= pos && pos < x->end) {
			x->refs++;
			x->used = ++s->segment_tick;
			seg = x;
			break;
		}
	}
	gen = s->recipe_gen;
	pthread_mutex_unlock(&s->read_lock);
	if (seg) {
		*ret = seg;
		return 0;
	}

	Blob b = {};
	r = catalog_recipe_find(s->catalog, ino, pos, blob_copy, &b);
	if (r < 0) {
		free(b.data);
		/* The file's size says there are bytes here: a missing recipe is damage. */
		return r == -ENOENT ? -EIO : r;
	}
	seg = calloc(1, sizeof(*seg));
	if (!seg) {
		free(b.data);
		return -ENOMEM;
	}
	r = dedup_recipe_segment_decode(b.data, b.size, &seg->rs);
	free(b.data);
	if (r < 0) {
		segment_free(seg);
		return r == -ENOMEM ? r : -EIO;
	}
	if (seg->rs->start != b.start || pos >= seg->rs->start + seg->rs->length) {
		segment_free(seg);
		return -EIO;
	}
	seg->ino = ino;
	seg->start = seg->rs->start;
	seg->end = seg->rs->start + seg->rs->length;
	seg->n = seg->rs->n_entries;
	seg->offs = malloc((seg->n + 1) * sizeof(uint64_t));
	seg->locs = calloc(seg->n, sizeof(StoreLoc));
	if (!seg->offs || !seg->locs) {
		segment_free(seg);
		return -ENOMEM;
	}
	seg->offs[0] = seg->start;
	for (size_t i = 0; i < seg->n; i++)
		seg->offs[i + 1] = seg->offs[i] + seg->rs->entries[i].length;
	seg->refs = 1;

	pthread_mutex_lock(&s->read_lock);
	if (gen == s->recipe_gen) {
		/* Invariant 3.  An empty slot, else the least recently used idle segment. */
		size_t slot = SIZE_MAX;
		for (size_t i = 0; i < s->opts.segment_cache; i++) {
			StoreSegment *x = s->segments[i];
			if (!x) {
				slot = i;
				break;
			}
			if (x->refs == 0 && (slot == SIZE_MAX || x->used < s->segments[slot]->used))
				slot = i;
		}
		if (slot != SIZE_MAX) {
			evicted = s->segments[slot];
			if (evicted)
				evicted->cached = false;
			s->segments[slot] = seg;
			seg->cached = true;
			seg->used = ++s->segment_tick;
		}
	}
	pthread_mutex_unlock(&s->read_lock);
	segment_free(evicted);
	*ret = seg;
	return 0;
}

/* Index of the entry covering pos (seg->start <= pos < seg->end). */
static size_t segment_find(const StoreSegment *seg, uint64_t pos) {
	size_t lo = 0, hi = seg->n;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (seg->offs[mid] <= pos)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* ---- fetching units ---- */

/* Whether what the catalog says of a chunk fits the recipe entry and this store. */
static bool chunk_is_plausible(const DedupStore *s, const CatalogChunk *ch, uint32_t length) {
	if (ch->tier != s->tier || ch->plain_size != length || ch->offset < DEDUP_CONTAINER_HEADER_SIZE ||
	    ch->offset > DEDUP_CONTAINER_SIZE_MAX)
		return false;
	if (ch->region_size == 0)
		return ch->frame_size > DEDUP_FRAME_HEADER_SIZE && ch->frame_size <= DEDUP_FRAME_SIZE_MAX &&
		       ch->region_offset == 0;
	return ch->region_size > DEDUP_REGION_HEADER_SIZE && ch->region_size <= DEDUP_REGION_SIZE_MAX &&
	       (uint64_t) ch->region_offset + length <= DEDUP_REGION_PLAIN_MAX;
}

/*
 * A chunk that is not where the catalog says: no new file may deduplicate
 * against it.  Out of the index and out of the locality cache; a failure
 * here only means a later writer may hit the damage too (scrub retires it).
 */
static void chunk_damaged(DedupStore *s, uint64_t chunk) {
	(void) catalog_chunk_retire(s->catalog, chunk);
	dedup_locality_clear(s->locality);
}

typedef struct UnitChunks {
	uint64_t offset;
	uint64_t *ids;
	size_t n, cap;
} UnitChunks;

static int unit_chunk(const CatalogChunk *ch, void *userdata) {
	UnitChunks *u = userdata;
	if (ch->offset != u->offset)
		return 0;
	if (ARRAY_RESERVE_ONE(u->ids, u->cap, u->n, 64) < 0)
		return -ENOMEM;
	u->ids[u->n++] = ch->id;
	return 0;
}

/*
 * A unit that failed its checks: every chunk the catalog places in it is
 * retired (as chunk_damaged()), not only the one being read, so that no new
 * file deduplicates against any of them (they all fail to read now).
 */
static void unit_damaged(DedupStore *s, uint64_t container, uint64_t offset, uint64_t chunk) {
	UnitChunks u = { .offset = offset };
	/* The callback runs under the catalog lock and must not call into it: collect, then retire. */
	if (catalog_chunks_foreach_in_container(s->catalog, container, unit_chunk, &u) >= 0)
		for (size_t i = 0; i < u.n; i++)
			(void) catalog_chunk_retire(s->catalog, u.ids[i]);
	free(u.ids);
	chunk_damaged(s, chunk);
}

static int place_reserve(StoreReadCtx *ctx, uint32_t count) {
	if (count <= ctx->place_cap)
		return 0;
	uint32_t *e = realloc(ctx->place_ends, count * sizeof(*e));
	if (!e)
		return -ENOMEM;
	ctx->place_ends = e;
	DedupChunkId *i = realloc(ctx->place_ids, count * sizeof(*i));
	if (!i)
		return -ENOMEM;
	ctx->place_ids = i;
	ctx->place_cap = count;
	return 0;
}

/*
 * Decodes unit u (direct) straight into the read step's output and checks
 * every entry it serves against its table (invariant 6).  Returns 1 if it
 * was placed, 0 if its chunks are not exactly its entries (the caller
 * caches it instead), or a negative errno (damage is reported here).
 */
static int unit_place(DedupStore *s, StoreReadCtx *ctx, StoreUnitRef *u, const uint8_t *buf, uint64_t place,
		      bool foreign, uint32_t count, uint32_t plain_size) {
	const StoreSegment *seg = ctx->seg;
	const DedupRecipeEntry *e = seg->rs->entries;
	size_t first = ctx->i0 + u->first, last = ctx->i0 + u->last;
	uint32_t k = (uint32_t) (u - ctx->units);
	uint64_t start = seg->offs[first];

	/* units_mark_direct() saw its entries at its offsets in order: now they must be all of it. */
	if (count != u->n_entries || plain_size != u->named)
		return 0;
	int r = place_reserve(ctx, count);
	if (r < 0)
		return r;
	/* As unit_load() decodes a cached one: at its place, another host's verified chunk by chunk. */
	r = store_unit_decode_into(u->region, buf, u->size, place, u->offset, s->verify_content || foreign, &ctx->dec,
				   ctx->out + (start - ctx->pos), plain_size, ctx->place_ends, ctx->place_ids, count);
	if (r < 0) {
		if (r != -ENOMEM && r != -ENOKEY)
			unit_damaged(s, u->container, u->offset, ctx->locs[u->first].chunk);
		return r == -ENOKEY ? -EIO : r;
	}
	const DedupCachedRegion table = {
		.plain_size = plain_size,
		.count = count,
		.ends = ctx->place_ends,
		.ids = ctx->place_ids,
	};
	for (size_t i = first; i <= last; i++) {
		const StoreLoc *loc = ctx->locs + (i - ctx->i0);
		if (ctx->unit_of[i - ctx->i0] != k)
			continue;
		if (dedup_cached_region_find(&table, loc->region_offset, e[i].length, &loc->id) < 0) {
			chunk_damaged(s, loc->chunk);
			return -EIO;
		}
	}
	/*
	 * Each chunk to its entry's place.  Entries between them only push
	 * later chunks further on, never back: moved from the last, none is
	 * overwritten before it has moved.
	 */
	const uint8_t *base = ctx->out + (start - ctx->pos);
	for (size_t i = last + 1; i-- > first;) {
		if (ctx->unit_of[i - ctx->i0] != k)
			continue;
		uint8_t *to = ctx->out + (seg->offs[i] - ctx->pos);
		const uint8_t *from = base + ctx->locs[i - ctx->i0].region_offset;
		if (to != from)
			memmove(to, from, e[i].length);
	}
	u->placed = true;
	return 1;
}

/*
 * Decodes one fetched unit into the caller's buffer (direct) or straight
 * into a new cache entry, which it publishes (invariant 1); an entry that
 * failed a check is never published.
 */
static int unit_load(DedupStore *s, StoreReadCtx *ctx, StoreUnitRef *u, const uint8_t *buf, uint64_t place,
		     bool foreign) {
	uint32_t count, plain_size;
	DedupCachedRegion *e = NULL;
	int r = store_unit_sizes(u->region, buf, u->size, &count, &plain_size);
	if (r >= 0 && u->direct) {
		r = unit_place(s, ctx, u, buf, place, foreign, count, plain_size);
		if (r != 0) {
			if (r > 0)
				u->state = DEDUP_REGION_HIT;
			return r < 0 ? r : 0;
		}
	}
	if (r >= 0) {
		e = dedup_cached_region_new(s->cache, u->container, u->offset, count, plain_size);
		if (!e)
			return -ENOMEM;
		/* Another host's unit is always verified chunk by chunk (invariant 1): its segment may lie. */
		r = store_unit_decode_into(u->region, buf, u->size, place, u->offset,
					   s->verify_content || foreign, &ctx->dec, e->data, plain_size,
					   e->ends, e->ids, count);
	}
	if (r < 0) {
		dedup_region_cache_release(s->cache, e);
		/* A key missing is not damage: retired chunks would stay unreadable once it is back. */
		if (r != -ENOMEM && r != -ENOKEY)
			unit_damaged(s, u->container, u->offset, ctx->locs[u->first].chunk);
		return r == -ENOKEY ? -EIO : r;
	}
	u->held = dedup_region_cache_publish(s->cache, e, u->claim);
	u->claim = NULL;
	u->state = DEDUP_REGION_HIT;
	return 0;
}

static int unit_order(const void *a, const void *b, void *userdata) {
	const StoreUnitRef *units = userdata, *x = units + *(const uint32_t *) a, *y = units + *(const uint32_t *) b;
	if (x->container != y->container)
		return x->container < y->container ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Gives up every claim still held and drops every unit held. */
static void units_release(DedupStore *s, StoreReadCtx *ctx) {
	for (size_t k = 0; k < ctx->n_units; k++) {
		StoreUnitRef *u = ctx->units + k;
		dedup_region_cache_abandon(s->cache, u->claim);
		u->claim = NULL;
		dedup_region_cache_release(s->cache, u->held);
		u->held = NULL;
		u->state = DEDUP_REGION_MISS;
		u->load = false;
	}
	ctx->n_units = 0;
}

/* The window's index of the unit of loc, added if new. */
static uint32_t unit_add(StoreReadCtx *ctx, const StoreLoc *loc, uint32_t entry, bool needed) {
	uint64_t h = loc->container * UINT64_C(0x9e3779b97f4a7c15) ^ loc->offset;
	size_t slot = (size_t) ((h ^ (h >> 29)) & (UNIT_MAP_SLOTS - 1));
	while (ctx->unit_map[slot] != UINT32_MAX) {
		StoreUnitRef *u = ctx->units + ctx->unit_map[slot];
		if (u->container == loc->container && u->offset == loc->offset) {
			u->needed |= needed;
			u->last = entry;
			u->n_entries++;
			return ctx->unit_map[slot];
		}
		slot = (slot + 1) & (UNIT_MAP_SLOTS - 1);
	}
	uint32_t k = (uint32_t) ctx->n_units++;
	ctx->units[k] = (StoreUnitRef) {
		.container = loc->container,
		.offset = loc->offset,
		.size = loc->size,
		.region = loc->region,
		.needed = needed,
		.state = DEDUP_REGION_MISS,
		.first = entry,
		.last = entry,
		.n_entries = 1,
	};
	ctx->unit_map[slot] = k;
	return k;
}

/* Resolves the locations of entries [i0, i_ra) of seg (invariants 2 and 4).  ctx->unit_of marks what is wanted. */
static int locations_resolve(DedupStore *s, StoreReadCtx *ctx, StoreSegment *seg, size_t i0, size_t i_need,
			     size_t i_ra, uint64_t epoch) {
	const DedupRecipeEntry *e = seg->rs->entries;
	int r;

	pthread_mutex_lock(&s->read_lock);
	for (size_t i = i0; i < i_ra; i++)
		ctx->locs[i - i0] = seg->locs[i];
	pthread_mutex_unlock(&s->read_lock);
	size_t n = 0;
	for (size_t i = i0; i < i_ra; i++)
		if (dedup_recipe_entry_is_chunk(e + i) && ctx->locs[i - i0].epoch != epoch) {
			ctx->lookup_ids[n] = e[i].chunk;
			ctx->lookup_at[n++] = (uint32_t) i;
		}
	if (n > 0) {
		r = catalog_chunks_get(s->catalog, ctx->lookup_ids, n, ctx->lookup, ctx->lookup_r);
		if (r < 0)
			return r;
	}
	for (size_t k = 0; k < n; k++) {
		size_t i = ctx->lookup_at[k];
		StoreLoc *loc = ctx->locs + (i - i0);
		const CatalogChunk *ch = ctx->lookup + k;
		r = ctx->lookup_r[k];
		if (r >= 0 && !chunk_is_plausible(s, ch, e[i].length))
			r = -EIO;
		if (r < 0) {
			if (i < i_need)
				return r == -ENOENT ? -EIO : r;
			ctx->unit_of[i - i0] = UINT32_MAX; /* read-ahead only: never mind */
			loc->epoch = 0;
			continue;
		}
		*loc = (StoreLoc) {
			.epoch = epoch,
			.container = ch->container,
			.offset = ch->offset,
			.size = store_chunk_unit_size(ch),
			.region = ch->region_size > 0,
			.region_offset = ch->region_offset,
			.chunk = ch->id,
		};
		memcpy(loc->id.bytes, ch->digest, DEDUP_CHUNK_ID_SIZE);
	}
	pthread_mutex_lock(&s->read_lock);
	for (size_t i = i0; i < i_ra; i++)
		if (ctx->locs[i - i0].epoch == epoch)
			seg->locs[i] = ctx->locs[i - i0];
	pthread_mutex_unlock(&s->read_lock);
	return 0;
}

/*
 * Reads and loads the units marked to load (each once: the mark is taken),
 * runs of units back to back in one container with one pread each.
 * Returns 0, 1 if the epoch moved (the caller starts over), or a negative
 * errno (a needed unit failed).
 */
static int units_fetch(DedupStore *s, StoreReadCtx *ctx, uint64_t epoch) {
	size_t n = 0;
	int r;

	for (size_t k = 0; k < ctx->n_units; k++)
		if (ctx->units[k].load) {
			ctx->units[k].load = false;
			ctx->order[n++] = (uint32_t) k;
		}
	qsort_r(ctx->order, n, sizeof(*ctx->order), unit_order, ctx->units);

	for (size_t a = 0; a < n;) {
		StoreUnitRef *first = ctx->units + ctx->order[a];
		size_t b = a + 1, bytes = first->size;
		bool needed = first->needed;
		while (b < n) {
			const StoreUnitRef *prev = ctx->units + ctx->order[b - 1], *next = ctx->units + ctx->order[b];
			if (next->container != first->container || next->offset != prev->offset + prev->size ||
			    bytes + next->size > STORE_RUN_MAX)
				break;
			bytes += next->size;
			needed |= next->needed;
			b++;
		}

		r = ctx_reserve(ctx, bytes);
		if (r < 0)
			return r;
		/*
		 * Another host's container (global dedup) is read from the tier's
		 * root, and its regions open at the place they were sealed at:
		 * their container's id on that host.
		 */
		char name[DEDUP_BACKEND_NAME_MAX + 1];
		DedupBackend *from = s->backend;
		uint64_t place = first->container;
		r = store_global_container(s, first->container, &from, name, &place);
		if (r < 0)
			return r;
		bool foreign = r > 0;
		if (!foreign)
			dedup_container_name(first->container, name);
		pthread_rwlock_rdlock(&s->io_lock);
		if (__atomic_load_n(&s->epoch, __ATOMIC_SEQ_CST) != epoch) {
			pthread_rwlock_unlock(&s->io_lock);
			return 1;
		}
		r = dedup_backend_pread_full(from, name, ctx->buf, bytes, first->offset);
		pthread_rwlock_unlock(&s->io_lock);
		if (r < 0) {
			/*
			 * Missing or cut short is not proven damage: a lower tier's
			 * export remounted empty, or a container restored from a copy,
			 * brings the bytes back.  Retiring here would rewrite the
			 * chunks' ids and fail their files for good; the reader gets
			 * EIO, and scrub, which verifies, retires what is really gone.
			 */
			if (needed)
				return r == -ENOENT || r == -EUCLEAN ? -EIO : r;
			for (size_t k = a; k < b; k++) {
				StoreUnitRef *u = ctx->units + ctx->order[k];
				dedup_region_cache_abandon(s->cache, u->claim);
				u->claim = NULL;
				u->state = DEDUP_REGION_MISS;
			}
			a = b;
			continue;
		}

		size_t off = 0;
		for (size_t k = a; k < b; k++) {
			StoreUnitRef *u = ctx->units + ctx->order[k];
			r = unit_load(s, ctx, u, ctx->buf + off, place, foreign);
			off += u->size;
			if (r < 0) {
				if (u->needed || r == -ENOMEM)
					return r;
				dedup_region_cache_abandon(s->cache, u->claim);
				u->claim = NULL;
				u->state = DEDUP_REGION_MISS;
			}
		}
		a = b;
	}
	return 0;
}

/*
 * Marks the units to decode straight into ctx->out: each named only by
 * needed entries, its span (first entry to last) lying whole inside
 * [ctx->pos, ctx->end) and after the span of the last unit marked
 * (invariant 6), its entries naming its chunks in the unit's order from
 * its start, with other entries between them or not.  Units are in the
 * order the window first names them, so spans only move forward.
 */
static void units_mark_direct(StoreReadCtx *ctx, const StoreSegment *seg, size_t i_need) {
	const DedupRecipeEntry *e = seg->rs->entries;
	uint64_t taken = ctx->pos; /* end of the last marked unit's span */

	for (size_t k = 0; k < ctx->n_units; k++) {
		StoreUnitRef *u = ctx->units + k;
		size_t a = ctx->i0 + u->first, b = ctx->i0 + u->last;
		uint64_t at = 0;
		u->direct = b < i_need && seg->offs[a] >= taken && seg->offs[b + 1] <= ctx->end;
		for (size_t i = a; u->direct && i <= b; i++)
			if (ctx->unit_of[i - ctx->i0] == k) {
				u->direct = ctx->locs[i - ctx->i0].region_offset == at;
				at += e[i].length;
			}
		if (!u->direct)
			continue;
		u->named = (uint32_t) at;
		taken = seg->offs[b + 1];
	}
}

/*
 * Makes the units of entries [i0, i_ra) of seg available: those of the
 * needed entries [i0, i_need) held in ctx->units, the read-ahead ones
 * cached if they can be.  On success the caller releases them with
 * units_release().
 */
static int fetch(DedupStore *s, StoreReadCtx *ctx, StoreSegment *seg, size_t i0, size_t i_need, size_t i_ra) {
	const DedupRecipeEntry *e = seg->rs->entries;
	int r;

retry:;
	uint64_t epoch = __atomic_load_n(&s->epoch, __ATOMIC_SEQ_CST);
	for (size_t i = i0; i < i_ra; i++)
		ctx->unit_of[i - i0] = dedup_recipe_entry_is_chunk(e + i) ? 0 : UINT32_MAX;
	r = locations_resolve(s, ctx, seg, i0, i_need, i_ra, epoch);
	if (r < 0)
		return r;

	memset(ctx->unit_map, 0xff, sizeof(ctx->unit_map));
	ctx->n_units = 0;
	for (size_t i = i0; i < i_ra; i++)
		if (ctx->unit_of[i - i0] != UINT32_MAX)
			ctx->unit_of[i - i0] = unit_add(ctx, ctx->locs + (i - i0), (uint32_t) (i - i0), i < i_need);

	if (ctx->out)
		units_mark_direct(ctx, seg, i_need);

	/*
	 * Hits are held, misses claimed; units other threads are loading are
	 * waited for below.  A miss that could not be claimed (no memory for the
	 * claim) is loaded all the same, without a claim (so it ends no other
	 * thread's), at worst a second time.  A direct miss is not claimed:
	 * nobody else will want it soon (it lies inside this read), and a claim
	 * would only cost a placeholder and a wake-up.
	 */
	for (size_t k = 0; k < ctx->n_units; k++) {
		StoreUnitRef *u = ctx->units + k;
		u->state = dedup_region_cache_lookup(s->cache, u->container, u->offset, u->direct ? NULL : &u->claim,
						     &u->held);
		if (u->state != DEDUP_REGION_MISS)
			u->direct = false;
		u->load = u->state == DEDUP_REGION_CLAIMED || u->state == DEDUP_REGION_MISS;
	}
	r = units_fetch(s, ctx, epoch);
	if (r != 0) {
		units_release(s, ctx);
		if (r > 0)
			goto retry;
		return r;
	}

	/* Invariant 5: no claim is left now. */
	for (size_t k = 0; k < ctx->n_units; k++) {
		StoreUnitRef *u = ctx->units + k;
		if (u->state != DEDUP_REGION_BUSY || !u->needed)
			continue;
		u->state = dedup_region_cache_wait(s->cache, u->container, u->offset, &u->claim, &u->held);
		if (u->state == DEDUP_REGION_HIT)
			continue;
		/* Its loader gave up (or it was evicted meanwhile): load it alone, the only claim held if any. */
		u->load = true;
		r = units_fetch(s, ctx, epoch);
		if (r != 0) {
			units_release(s, ctx);
			if (r > 0)
				goto retry;
			return r;
		}
	}
	return 0;
}

/*
 * Copies file bytes [pos, end) that segment seg covers (a prefix of them: at
 * most STORE_READ_WINDOW entries) into out, fetching and caching along the
 * recipe up to ra_end.  Without out, only fetches and caches up to end
 * (prefetch).  Returns the bytes done (> 0) or a negative errno.
 */
static ssize_t segment_read(DedupStore *s, StoreReadCtx *ctx, StoreSegment *seg, uint64_t pos, uint64_t end,
			    uint64_t ra_end, uint8_t *out) {
	const DedupRecipeEntry *e = seg->rs->entries;
	size_t i0 = segment_find(seg, pos), limit = MIN(seg->n, i0 + STORE_READ_WINDOW);
	size_t i_need = i0, i_ra;
	ssize_t r;

	if (out)
		while (i_need < limit && seg->offs[i_need] < end)
			i_need++;
	else
		ra_end = end;
	i_ra = i_need;
	while (i_ra < limit && seg->offs[i_ra] < ra_end)
		i_ra++;
	if (!out)
		i_ra = MAX(i_ra, i0 + 1);

	ctx->out = out;
	ctx->pos = pos;
	ctx->end = end;
	ctx->seg = seg;
	ctx->i0 = i0;
	r = fetch(s, ctx, seg, i0, i_need, i_ra);
	if (r < 0)
		return r;
	if (!out) {
		units_release(s, ctx);
		return (ssize_t) (MIN(seg->offs[i_ra], end) - pos);
	}

	uint64_t stop = MIN(end, seg->offs[i_need]);
	for (size_t i = i0; r >= 0 && i < i_need; i++) {
		uint64_t a = MAX(pos, seg->offs[i]), b = MIN(stop, seg->offs[i + 1]);
		if (e[i].chunk == 0) {
			memset(out + (a - pos), 0, (size_t) (b - a));
			continue;
		}
		if (e[i].chunk == DEDUP_RECIPE_LITERAL) {
			memcpy(out + (a - pos), e[i].literal + (a - seg->offs[i]), (size_t) (b - a));
			continue;
		}
		const StoreUnitRef *unit = ctx->units + ctx->unit_of[i - i0];
		if (unit->placed)
			continue; /* decoded in place and checked (invariant 6) */
		const StoreLoc *loc = ctx->locs + (i - i0);
		const DedupCachedRegion *u = unit->held;
		/* Invariant 1: the chunk must be in its unit where the catalog says. */
		if (dedup_cached_region_find(u, loc->region_offset, e[i].length, &loc->id) < 0) {
			chunk_damaged(s, loc->chunk);
			r = -EIO;
			break;
		}
		memcpy(out + (a - pos), u->data + loc->region_offset + (a - seg->offs[i]), (size_t) (b - a));
	}
	units_release(s, ctx);
	return r < 0 ? r : (ssize_t) (stop - pos);
}

/* Whether a read of ino at offset continues the previous one (read-ahead pays off). */
static bool seq_update(DedupStore *s, uint64_t ino, uint64_t offset, uint64_t end) {
	bool seq = false;
	StoreSeqSlot *slot = NULL;

	pthread_mutex_lock(&s->read_lock);
	for (size_t i = 0; i < STORE_SEQ_SLOTS; i++)
		if (s->seq[i].ino == ino) {
			slot = s->seq + i;
			break;
		}
	if (slot)
		seq = slot->next == offset;
	else {
		slot = s->seq + s->seq_next;
		s->seq_next = (s->seq_next + 1) % STORE_SEQ_SLOTS;
		slot->ino = ino;
		seq = offset == 0;
	}
	slot->next = end;
	pthread_mutex_unlock(&s->read_lock);
	return seq;
}

/* Reads [pos, end) of ino into out, reading ahead along the recipe to ra_end; without out, only caches [pos, end). */
static int file_read_range(DedupStore *s, StoreReadCtx *ctx, uint64_t ino, uint64_t pos, uint64_t end,
			   uint64_t ra_end, uint8_t *out) {
	while (pos < end) {
		StoreSegment *seg;
		int r = segment_get(s, ino, pos, &seg);
		if (r < 0)
			return r;
		ssize_t n = segment_read(s, ctx, seg, pos, end, ra_end, out);
		segment_put(s, seg);
		if (n < 0)
			return (int) n;
		pos += (uint64_t) n;
		if (out)
			out += n;
	}
	return 0;
}

ssize_t dedup_file_read(DedupStore *s, uint64_t ino, uint64_t file_size, uint64_t offset, void *buf, size_t len) {
	StoreReadCtx *ctx;
	int r;

	if (!buf && len > 0)
		return -EINVAL;
	if (offset >= file_size || len == 0)
		return 0;
	len = (size_t) MIN((uint64_t) MIN(len, (size_t) SSIZE_MAX), file_size - offset);
	uint64_t end = offset + len;
	uint64_t ra_end = end;
	if (seq_update(s, ino, offset, end))
		ra_end = MIN(file_size, end + s->opts.readahead_bytes);

	r = ctx_get(s, &ctx);
	if (r < 0)
		return r;
	r = file_read_range(s, ctx, ino, offset, end, ra_end, buf);
	ctx_put(s, ctx);
	return r < 0 ? r : (ssize_t) len;
}

int dedup_file_prefetch(DedupStore *s, uint64_t ino, uint64_t file_size, uint64_t offset, uint64_t len) {
	StoreReadCtx *ctx;
	int r;

	if (offset >= file_size || len == 0)
		return 0;
	r = ctx_get(s, &ctx);
	if (r < 0)
		return r;
	r = file_read_range(s, ctx, ino, offset, offset + MIN(len, file_size - offset), 0, NULL);
	ctx_put(s, ctx);
	return r;
}

static int pwrite_all(int fd, const uint8_t *p, size_t len, uint64_t offset) {
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, (off_t) offset);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return negative_errno();
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t) n;
		offset += (uint64_t) n;
	}
	return 0;
}

int dedup_file_write_to_fd(DedupStore *s, uint64_t ino, uint64_t file_size, int fd) {
	/* A step holds at least one chunk. */
	const size_t step = MAX(s->opts.readahead_bytes, (size_t) DEDUP_CHUNK_SIZE_LIMIT_MAX);
	StoreReadCtx *ctx;
	uint64_t pos = 0;
	int r = 0;

	if (fd < 0 || file_size > DEDUP_RECIPE_FILE_SIZE_MAX)
		return -EINVAL;
	_cleanup_free_ uint8_t *buf = malloc(step);
	if (!buf)
		return -ENOMEM;
	r = ctx_get(s, &ctx);
	if (r < 0)
		return r;

	while (r >= 0 && pos < file_size) {
		StoreSegment *seg;
		r = segment_get(s, ino, pos, &seg);
		if (r < 0)
			break;
		const DedupRecipeEntry *e = seg->rs->entries;
		size_t i = segment_find(seg, pos);
		while (r >= 0 && i < seg->n && pos < file_size) {
			if (e[i].chunk == 0) {
				/* Not written: stays a hole. */
				i++;
				pos = MIN(seg->offs[i], file_size);
				continue;
			}
			/* Chunks up to the next zero run, at most one step of them. */
			size_t j = i + 1;
			while (j < seg->n && e[j].chunk != 0 && seg->offs[j + 1] - pos <= step)
				j++;
			uint64_t stop = MIN(seg->offs[j], file_size);
			for (uint64_t at = pos; at < stop;) {
				ssize_t n = segment_read(s, ctx, seg, at, stop, stop, buf + (at - pos));
				if (n < 0) {
					r = (int) n;
					break;
				}
				at += (uint64_t) n;
			}
			if (r >= 0)
				r = pwrite_all(fd, buf, (size_t) (stop - pos), pos);
			pos = stop;
			i = j;
		}
		segment_put(s, seg);
	}
	ctx_put(s, ctx);
	if (r < 0)
		return r;
	if (ftruncate(fd, (off_t) file_size) < 0)
		return negative_errno();
	return 0;
}

/* ---- dropping ---- */

typedef struct IdList {
	uint64_t *ids;
	size_t n, cap;
} IdList;

static int collect_ids(uint64_t start, const void *blob, size_t size, void *userdata) {
	IdList *l = userdata;
	DedupRecipeSegment *seg;
	int r = dedup_recipe_segment_decode(blob, size, &seg);
	if (r < 0)
		return r == -ENOMEM ? r : -EIO;
	if (l->n + seg->n_entries > l->cap) {
		size_t cap = MAX(l->cap * 2, l->n + seg->n_entries);
		uint64_t *p = realloc(l->ids, cap * sizeof(*p));
		if (!p) {
			free(seg);
			return -ENOMEM;
		}
		l->ids = p;
		l->cap = cap;
	}
	for (size_t i = 0; i < seg->n_entries; i++)
		if (dedup_recipe_entry_is_chunk(seg->entries + i))
			l->ids[l->n++] = seg->entries[i].chunk;
	free(seg);
	return 0;
}

int dedup_file_drop_unopened(Catalog *c, uint64_t ino) {
	IdList l = {};
	int r;

	/* The callback runs under the catalog lock and must not call into it: collect, then update. */
	r = catalog_recipe_foreach(c, ino, collect_ids, &l);
	if (r >= 0)
		r = store_catalog_refs_apply(c, l.ids, l.n, -1);
	free(l.ids);
	if (r < 0)
		return r;
	return catalog_recipe_delete(c, ino);
}

int dedup_file_drop(DedupStore *s, uint64_t ino) {
	int r = dedup_file_drop_unopened(s->catalog, ino);
	if (r < 0)
		return r;
	store_recipe_invalidate(s, ino);
	return 0;
}
