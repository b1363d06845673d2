/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store-read.c — reading sealed files back through their recipes, and
 * dropping recipes.
 *
 * A read finds the recipe segment covering its offset (a small cache of
 * decoded segments, each with the chunk locations resolved so far), takes the
 * chunks it needs from the chunk cache, and fetches the rest: consecutive
 * frames of one container are read with one pread, and a sequential reader
 * gets the following chunks of the recipe fetched and cached as well
 * (read-ahead).  Every fetched frame is fully checked before its bytes are
 * cached or copied.
 *
 * Invariants:
 *  1. No byte reaches a caller or the chunk cache unless its frame passed
 *     dedup_frame_decode() (both checksums, exact decompression, and the
 *     content hash when verify_content), and the frame's id, plain size and
 *     frame size equal what the catalog says of the chunk.  Any failure on a
 *     needed chunk is -EIO for the whole read.
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
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macros.h"
#include "dedup/frame.h"
#include "dedup/store-internal.h"

typedef struct StoreLoc {
	uint64_t epoch; /* 0: not resolved */
	uint64_t container;
	uint64_t offset;
	uint32_t frame_size;
	DedupChunkId id;
} StoreLoc;

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
	DedupFrameDecoder *decoder;
	DedupHasher *hasher; /* when verifying content */
	uint8_t *buf;
	size_t cap;
	StoreLoc locs[STORE_READ_WINDOW];
	DedupCachedChunk *held[STORE_READ_WINDOW];
	bool miss[STORE_READ_WINDOW];
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
	dedup_frame_decoder_free(ctx->decoder);
	dedup_hasher_free(ctx->hasher);
	free(ctx->buf);
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
	int r;

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
	r = dedup_frame_decoder_new(&ctx->decoder);
	if (r >= 0 && s->verify_content)
		r = dedup_hasher_new(&ctx->hasher);
	if (r < 0) {
		ctx_free(ctx);
		return r;
	}
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

static int ctx_reserve(StoreReadCtx *ctx, size_t size) {
	if (size <= ctx->cap)
		return 0;
	uint8_t *p = realloc(ctx->buf, size);
	if (!p)
		return -ENOMEM;
	ctx->buf = p;
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

/* ---- fetching frames ---- */

/* Whether what the catalog says of a chunk fits the recipe entry and this store. */
static bool chunk_is_plausible(const DedupStore *s, const CatalogChunk *ch, uint32_t length) {
	return ch->tier == s->tier && ch->plain_size == length && ch->frame_size > DEDUP_FRAME_HEADER_SIZE &&
	       ch->frame_size <= DEDUP_FRAME_SIZE_MAX && ch->offset >= DEDUP_CONTAINER_HEADER_SIZE &&
	       ch->offset <= DEDUP_CONTAINER_SIZE_MAX;
}

/* Decodes one fetched frame into a new cache entry, checking it against loc (invariant 1). */
static int frame_check_decode(DedupStore *s, StoreReadCtx *ctx, const uint8_t *frame, const StoreLoc *loc,
			      uint64_t chunk, uint32_t length, DedupCachedChunk **ret) {
	DedupFrameHeader h;
	DedupCachedChunk *ch = dedup_cached_chunk_new(chunk, length);
	if (!ch)
		return -ENOMEM;
	int r = dedup_frame_decode(ctx->decoder, frame, loc->frame_size, ctx->hasher, ch->data, length, &h);
	if (r == -ENOMEM || r == -EIO) {
		dedup_chunk_cache_release(s->chunk_cache, ch);
		return r;
	}
	if (r < 0 || h.plain_size != length || dedup_frame_header_frame_size(&h) != loc->frame_size ||
	    !dedup_chunk_id_equal(&h.id, &loc->id)) {
		dedup_chunk_cache_release(s->chunk_cache, ch);
		/*
		 * Damaged: no new file may deduplicate against it.  Out of the
		 * index and out of the locality cache; a failure here only
		 * means a later writer may hit the damage too.
		 */
		(void) catalog_chunk_retire(s->catalog, chunk);
		dedup_locality_clear(s->locality);
		return -EIO;
	}
	*ret = dedup_chunk_cache_insert(s->chunk_cache, ch);
	return 0;
}

/*
 * Makes every missing chunk of entries [i0, i_ra) of seg available: the
 * needed ones ([i0, i_need)) held in ctx->held, the read-ahead ones cached
 * if they can be.  ctx->miss marks what is missing on entry.
 */
static int fetch(DedupStore *s, StoreReadCtx *ctx, StoreSegment *seg, size_t i0, size_t i_need, size_t i_ra) {
	const DedupRecipeEntry *e = seg->rs->entries;
	int r;

retry:;
	uint64_t epoch = __atomic_load_n(&s->epoch, __ATOMIC_SEQ_CST);

	/* Resolve locations (invariant 2), outside every lock (invariant 4). */
	pthread_mutex_lock(&s->read_lock);
	for (size_t i = i0; i < i_ra; i++)
		if (ctx->miss[i - i0])
			ctx->locs[i - i0] = seg->locs[i];
	pthread_mutex_unlock(&s->read_lock);
	for (size_t i = i0; i < i_ra; i++) {
		StoreLoc *loc = ctx->locs + (i - i0);
		CatalogChunk ch;
		if (!ctx->miss[i - i0] || loc->epoch == epoch)
			continue;
		r = catalog_chunk_get(s->catalog, e[i].chunk, &ch);
		if (r >= 0 && !chunk_is_plausible(s, &ch, e[i].length))
			r = -EIO;
		if (r < 0) {
			if (i < i_need)
				return r == -ENOENT ? -EIO : r;
			ctx->miss[i - i0] = false; /* read-ahead only: never mind */
			continue;
		}
		*loc = (StoreLoc) {
			.epoch = epoch,
			.container = ch.container,
			.offset = ch.offset,
			.frame_size = ch.frame_size,
		};
		memcpy(loc->id.bytes, ch.digest, DEDUP_CHUNK_ID_SIZE);
	}
	pthread_mutex_lock(&s->read_lock);
	for (size_t i = i0; i < i_ra; i++)
		if (ctx->miss[i - i0])
			seg->locs[i] = ctx->locs[i - i0];
	pthread_mutex_unlock(&s->read_lock);

	for (size_t i = i0; i < i_ra;) {
		if (!ctx->miss[i - i0]) {
			i++;
			continue;
		}
		/* A run of missing frames back to back in one container: one pread. */
		const StoreLoc *first = ctx->locs + (i - i0);
		size_t j = i + 1, bytes = first->frame_size;
		while (j < i_ra && ctx->miss[j - i0]) {
			const StoreLoc *prev = ctx->locs + (j - 1 - i0), *next = ctx->locs + (j - i0);
			if (next->container != first->container || next->offset != prev->offset + prev->frame_size ||
			    bytes + next->frame_size > STORE_RUN_MAX)
				break;
			bytes += next->frame_size;
			j++;
		}
		bool needed = i < i_need;

		r = ctx_reserve(ctx, bytes);
		if (r < 0)
			return r;
		char name[DEDUP_CONTAINER_NAME_MAX];
		dedup_container_name(first->container, name);
		pthread_rwlock_rdlock(&s->io_lock);
		if (__atomic_load_n(&s->epoch, __ATOMIC_SEQ_CST) != epoch) {
			pthread_rwlock_unlock(&s->io_lock);
			goto retry;
		}
		r = dedup_backend_pread_full(s->backend, name, ctx->buf, bytes, first->offset);
		pthread_rwlock_unlock(&s->io_lock);
		if (r < 0) {
			if (needed)
				return r == -ENOENT || r == -EUCLEAN ? -EIO : r;
			for (size_t k = i; k < j; k++)
				ctx->miss[k - i0] = false;
			i = j;
			continue;
		}

		size_t off = 0;
		for (size_t k = i; k < j; k++) {
			const StoreLoc *loc = ctx->locs + (k - i0);
			DedupCachedChunk *ch = NULL;
			r = frame_check_decode(s, ctx, ctx->buf + off, loc, e[k].chunk, e[k].length, &ch);
			off += loc->frame_size;
			ctx->miss[k - i0] = false;
			if (r < 0) {
				if (k < i_need)
					return r;
				continue;
			}
			if (k < i_need && !ctx->held[k - i0])
				ctx->held[k - i0] = ch;
			else
				dedup_chunk_cache_release(s->chunk_cache, ch);
		}
		i = j;
	}
	return 0;
}

/*
 * Copies file bytes [pos, end) that segment seg covers (a prefix of them: at
 * most STORE_READ_WINDOW entries) into out, fetching and caching along the
 * recipe up to ra_end.  Returns the bytes copied (> 0) or a negative errno.
 */
static ssize_t segment_read(DedupStore *s, StoreReadCtx *ctx, StoreSegment *seg, uint64_t pos, uint64_t end,
			    uint64_t ra_end, uint8_t *out) {
	const DedupRecipeEntry *e = seg->rs->entries;
	size_t i0 = segment_find(seg, pos), limit = MIN(seg->n, i0 + STORE_READ_WINDOW);
	size_t i_need = i0, i_ra;
	ssize_t r;

	while (i_need < limit && seg->offs[i_need] < end)
		i_need++;
	i_ra = i_need;
	while (i_ra < limit && seg->offs[i_ra] < ra_end)
		i_ra++;

	for (size_t i = i0; i < i_ra; i++) {
		ctx->held[i - i0] = NULL;
		ctx->miss[i - i0] = false;
		if (e[i].chunk == 0)
			continue;
		if (i < i_need) {
			ctx->held[i - i0] = dedup_chunk_cache_get(s->chunk_cache, e[i].chunk);
			ctx->miss[i - i0] = !ctx->held[i - i0];
		} else
			ctx->miss[i - i0] = !dedup_chunk_cache_contains(s->chunk_cache, e[i].chunk);
	}

	r = fetch(s, ctx, seg, i0, i_need, i_ra);
	if (r >= 0) {
		uint64_t stop = MIN(end, seg->offs[i_need]);
		for (size_t i = i0; i < i_need; i++) {
			uint64_t a = MAX(pos, seg->offs[i]), b = MIN(stop, seg->offs[i + 1]);
			if (e[i].chunk == 0)
				memset(out + (a - pos), 0, (size_t) (b - a));
			else
				memcpy(out + (a - pos), ctx->held[i - i0]->data + (a - seg->offs[i]), (size_t) (b - a));
		}
		r = (ssize_t) (stop - pos);
	}
	for (size_t i = i0; i < i_need; i++)
		dedup_chunk_cache_release(s->chunk_cache, ctx->held[i - i0]);
	return r;
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

/* Reads [pos, end) of ino into out, reading ahead along the recipe to ra_end. */
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
		if (seg->entries[i].chunk != 0)
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

/* ---- for the collector ---- */

int store_read_container_frames(DedupStore *s, uint64_t container, const CatalogChunk *chunks, size_t n,
				uint8_t *frames_buf) {
	char name[DEDUP_CONTAINER_NAME_MAX];
	StoreReadCtx *ctx;
	int r;

	dedup_container_name(container, name);
	r = ctx_get(s, &ctx);
	if (r < 0)
		return r;
	r = ctx_reserve(ctx, DEDUP_CHUNK_SIZE_LIMIT_MAX);

	size_t off = 0;
	for (size_t i = 0; r >= 0 && i < n;) {
		size_t j = i + 1, bytes = chunks[i].frame_size;
		while (j < n && chunks[j].offset == chunks[j - 1].offset + chunks[j - 1].frame_size &&
		       bytes + chunks[j].frame_size <= STORE_RUN_MAX) {
			bytes += chunks[j].frame_size;
			j++;
		}
		/* Only the collector moves or unlinks containers, and it is the caller: no epoch check. */
		pthread_rwlock_rdlock(&s->io_lock);
		r = dedup_backend_pread_full(s->backend, name, frames_buf + off, bytes, chunks[i].offset);
		pthread_rwlock_unlock(&s->io_lock);
		if (r < 0) {
			r = -EIO;
			break;
		}
		for (size_t k = i; k < j; k++) {
			DedupFrameHeader h;
			DedupChunkId id;
			memcpy(id.bytes, chunks[k].digest, DEDUP_CHUNK_ID_SIZE);
			r = dedup_frame_decode(ctx->decoder, frames_buf + off, chunks[k].frame_size, ctx->hasher, ctx->buf,
					       ctx->cap, &h);
			if (r >= 0 && (!dedup_chunk_id_equal(&h.id, &id) || h.plain_size != chunks[k].plain_size ||
				       dedup_frame_header_frame_size(&h) != chunks[k].frame_size))
				r = -EIO;
			if (r < 0) {
				r = r == -ENOMEM ? r : -EIO;
				break;
			}
			off += chunks[k].frame_size;
		}
		i = j;
	}
	ctx_put(s, ctx);
	return r < 0 ? r : 0;
}
