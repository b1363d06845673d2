/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store-region.c — the store's side of compression regions: gathering
 * chunks into regions and encoding them (for writers and compaction), and
 * decoding a stored unit, a region or a version 1 chunk frame, into plain
 * bytes and a table (for readers, compaction and scrub).
 *
 * Invariants:
 *  1. A region holds at least one chunk and is encoded before a chunk would
 *     take it past the builder's target; so its plain bytes never exceed
 *     max(target, the largest chunk), within DEDUP_REGION_PLAIN_MAX.
 *  2. The shares of a region's chunks add up to the region's bytes exactly:
 *     the live bytes of a container are the sum of its live chunks'
 *     shares, and equal its region bytes when every chunk lives.
 *  3. store_unit_decode() hands out nothing of a unit that failed any check.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "dedup/frame.h"
#include "dedup/key.h"
#include "dedup/store-internal.h"

int store_builder_init(StoreRegionBuilder *b, int level, bool keyed_ids, size_t target, size_t min_chunk,
		       size_t max_chunk) {
	int r;

	*b = (StoreRegionBuilder) {};
	if (target < DEDUP_REGION_TARGET_MIN || target > DEDUP_REGION_TARGET_MAX || min_chunk == 0 ||
	    max_chunk > DEDUP_CHUNK_SIZE_LIMIT_MAX || min_chunk > max_chunk)
		return -EINVAL;
	r = dedup_region_encoder_new(level, keyed_ids, &b->encoder);
	if (r < 0)
		return r;
	b->target = target;
	b->plain_cap = MAX(target, max_chunk);
	/* Chunks are at least min_chunk long but for the last one of a file: one more than fit otherwise. */
	b->count_cap = MIN((size_t) DEDUP_REGION_CHUNKS_MAX, b->plain_cap / min_chunk + 1);
	b->plain = malloc(b->plain_cap);
	b->ids = malloc(b->count_cap * sizeof(*b->ids));
	b->lengths = malloc(b->count_cap * sizeof(*b->lengths));
	b->shares = malloc(b->count_cap * sizeof(*b->shares));
	/* Room for a few regions, and always for the largest one. */
	b->out_cap = MAX(STORE_WRITE_BUFFER, dedup_region_size_bound(b->count_cap, b->plain_cap));
	b->out = malloc(b->out_cap);
	if (!b->plain || !b->ids || !b->lengths || !b->shares || !b->out) {
		store_builder_done(b);
		return -ENOMEM;
	}
	return 0;
}

/* Slots beside the one gathering: enough to keep every encoder busy with one builder. */
static size_t slots_for(const DedupStore *s) {
	return MIN((size_t) s->n_encoders, (size_t) 4) + 1;
}

/* Points the region being gathered at the next free buffers of the current slot. */
static void slot_gather(StoreRegionBuilder *b) {
	StoreEncodeSlot *sl = b->slots + b->cur;
	b->plain = sl->plain + sl->job.n * b->plain_cap;
	b->ids = sl->ids + sl->job.n * b->count_cap;
	b->lengths = sl->lengths + sl->job.n * b->count_cap;
}

int store_builder_init_parallel(StoreRegionBuilder *b, DedupStore *s, int level, size_t target, size_t min_chunk,
				size_t max_chunk) {
	int r = store_builder_init(b, level, s->opts.id_key != NULL, target, min_chunk, max_chunk);
	if (r < 0 || s->n_encoders == 0)
		return r;

	size_t n = slots_for(s);
	b->slots = calloc(n, sizeof(*b->slots));
	if (!b->slots) {
		store_builder_done(b);
		return -ENOMEM;
	}
	b->n_slots = n;
	b->batch = MIN((size_t) STORE_ENCODE_BATCH, MAX(STORE_ENCODE_BATCH_BYTES / b->plain_cap, (size_t) 1));
	/* The slots' buffers replace the one region's that init() made. */
	free(b->plain);
	free(b->ids);
	free(b->lengths);
	b->plain = NULL;
	b->ids = NULL;
	b->lengths = NULL;
	for (size_t i = 0; i < n; i++) {
		StoreEncodeSlot *sl = b->slots + i;
		sl->plain = malloc(b->batch * b->plain_cap);
		sl->ids = malloc(b->batch * b->count_cap * sizeof(*sl->ids));
		sl->lengths = malloc(b->batch * b->count_cap * sizeof(*sl->lengths));
		if (!sl->plain || !sl->ids || !sl->lengths) {
			store_builder_done(b);
			return -ENOMEM;
		}
	}
	/*
	 * Each region has the room of the largest it can be: enough for every
	 * slot's regions and a few more, so that appends stay large.
	 */
	size_t cap = MAX(2 * STORE_WRITE_BUFFER, (n * b->batch + 1) * dedup_region_size_bound(b->count_cap, b->plain_cap));
	uint8_t *out = realloc(b->out, cap);
	if (!out) {
		store_builder_done(b);
		return -ENOMEM;
	}
	b->out = out;
	b->out_cap = cap;
	b->pool = s;
	slot_gather(b);
	return 0;
}

/* Waits for the slot's regions, if they were handed over, records their sizes and empties it. */
static int slot_wait(StoreRegionBuilder *b, StoreEncodeSlot *sl) {
	if (!sl->busy)
		return 0;
	int r = store_encode_wait(b->pool, &sl->job, b->encoder, &b->encode_wait_ns, &b->encode_cpu_ns);
	sl->busy = false;
	size_t n = sl->job.n;
	sl->job.n = 0;
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		b->units[sl->job.regions[i].unit].size = (uint32_t) sl->job.regions[i].size;
	return 0;
}

/* Hands the slot's regions to the encoders. */
static void slot_submit(StoreRegionBuilder *b, StoreEncodeSlot *sl) {
	sl->job.level = dedup_region_encoder_level(b->encoder);
	sl->busy = true;
	store_encode_submit(b->pool, &sl->job);
}

int store_builder_wait(StoreRegionBuilder *b) {
	int ret = 0;
	if (!b->slots)
		return 0;
	/* What the current slot gathered so far goes first: the others may then be done already. */
	StoreEncodeSlot *cur = b->slots + b->cur;
	size_t at = cur->job.n; /* where a region still being gathered sits in it */
	if (!cur->busy && cur->job.n > 0)
		slot_submit(b, cur);
	for (size_t k = 1; k <= b->n_slots; k++) {
		int r = slot_wait(b, b->slots + (b->cur + k) % b->n_slots);
		if (r < 0 && ret == 0)
			ret = r;
	}
	/* The slot is empty now: the region being gathered (when out had no room for it) moves to its front. */
	if (at > 0 && b->count > 0) {
		memmove(cur->plain, b->plain, b->plain_len);
		memmove(cur->ids, b->ids, b->count * sizeof(*b->ids));
		memmove(cur->lengths, b->lengths, b->count * sizeof(*b->lengths));
	}
	slot_gather(b);
	return ret;
}

void store_builder_done(StoreRegionBuilder *b) {
	if (b->slots) {
		/* Only what was handed over: regions still gathering are dropped. */
		for (size_t i = 0; i < b->n_slots; i++)
			(void) slot_wait(b, b->slots + i);
		for (size_t i = 0; i < b->n_slots; i++) {
			free(b->slots[i].plain);
			free(b->slots[i].ids);
			free(b->slots[i].lengths);
		}
		free(b->slots);
	} else {
		free(b->plain);
		free(b->ids);
		free(b->lengths);
	}
	dedup_region_encoder_free(b->encoder);
	free(b->shares);
	free(b->out);
	free(b->units);
	*b = (StoreRegionBuilder) {};
}

bool store_builder_is_full(const StoreRegionBuilder *b, size_t len) {
	return b->count > 0 && (b->plain_len + len > b->target || b->count == b->count_cap);
}

uint32_t store_builder_add(StoreRegionBuilder *b, const DedupChunkId *id, const void *data, size_t len) {
	uint32_t at = (uint32_t) b->plain_len;
	memcpy(b->plain + b->plain_len, data, len);
	b->plain_len += len;
	b->ids[b->count] = *id;
	b->lengths[b->count] = (uint32_t) len;
	b->count++;
	return at;
}

/*
 * Adds the gathered region to the current slot's job, into the room of the
 * largest it can be; a full slot goes to the encoders, and the next slot
 * becomes the one gathering (once the regions it held last are encoded).
 */
static int encode_parallel(StoreRegionBuilder *b, size_t bound, size_t *ret_unit) {
	StoreEncodeSlot *sl = b->slots + b->cur;
	sl->job.regions[sl->job.n++] = (StoreEncodeRegion) {
		.ids = b->ids,
		.lengths = b->lengths,
		.count = b->count,
		.plain = b->plain,
		.plain_len = b->plain_len,
		.out = b->out + b->out_len,
		.out_cap = bound,
		.unit = b->n_units,
	};
	b->units[b->n_units] = (StoreUnit) {
		.data = b->out + b->out_len,
		.count = (uint32_t) b->count,
		.plain_size = (uint32_t) b->plain_len,
	};
	b->out_len += bound;
	*ret_unit = b->n_units++;
	b->plain_len = 0;
	b->count = 0;

	int r = 0;
	if (sl->job.n == b->batch) {
		slot_submit(b, sl);
		b->cur = (b->cur + 1) % b->n_slots;
		r = slot_wait(b, b->slots + b->cur);
	}
	slot_gather(b);
	return r < 0 ? r : 1;
}

int store_builder_encode(StoreRegionBuilder *b, size_t *ret_unit) {
	size_t size;
	int r;

	if (b->count == 0)
		return 0;
	size_t bound = dedup_region_size_bound(b->count, b->plain_len);
	if (bound > b->out_cap - b->out_len)
		return -ENOBUFS;
	if (b->n_units == b->cap_units) {
		size_t cap = MAX(b->cap_units * 2, (size_t) 64);
		StoreUnit *u = realloc(b->units, cap * sizeof(*u));
		if (!u)
			return -ENOMEM;
		b->units = u;
		b->cap_units = cap;
	}
	if (b->pool)
		return encode_parallel(b, bound, ret_unit);
	r = dedup_region_encode(b->encoder, b->ids, b->lengths, b->count, b->plain, b->plain_len, b->out + b->out_len,
				b->out_cap - b->out_len, &size);
	if (r < 0)
		return r;

	/* Invariant 2: each chunk's share in proportion to its bytes, the rounding on the last. */
	uint64_t given = 0;
	for (size_t i = 0; i < b->count; i++) {
		b->shares[i] = store_share((uint32_t) size, b->lengths[i], (uint32_t) b->plain_len, i + 1 == b->count,
					   given);
		given += b->shares[i];
	}
	b->units[b->n_units] = (StoreUnit) {
		.data = b->out + b->out_len,
		.size = (uint32_t) size,
		.count = (uint32_t) b->count,
		.plain_size = (uint32_t) b->plain_len,
	};
	b->out_len += size;
	*ret_unit = b->n_units++;
	/* The table stays readable in ids/lengths until the next add. */
	b->plain_len = 0;
	b->count = 0;
	return 1;
}

void store_builder_reset_output(StoreRegionBuilder *b) {
	b->out_len = 0;
	b->n_units = 0;
}

void store_decoded_done(StoreDecoded *d) {
	free(d->plain);
	free(d->ends);
	free(d->ids);
	dedup_frame_decoder_free(d->frame_decoder);
	dedup_region_decoder_free(d->region_decoder);
	dedup_hasher_free(d->hasher);
	*d = (StoreDecoded) {};
}

static int decoded_reserve(StoreDecoded *d, size_t plain, size_t entries) {
	if (plain > d->plain_cap) {
		uint8_t *p = realloc(d->plain, plain);
		if (!p)
			return -ENOMEM;
		d->plain = p;
		d->plain_cap = plain;
	}
	if (entries > d->entries_cap) {
		uint32_t *e = realloc(d->ends, entries * sizeof(*e));
		if (!e)
			return -ENOMEM;
		d->ends = e;
		DedupChunkId *i = realloc(d->ids, entries * sizeof(*i));
		if (!i)
			return -ENOMEM;
		d->ids = i;
		d->entries_cap = entries;
	}
	return 0;
}

int store_unit_sizes(bool region, const uint8_t *buf, size_t len, uint32_t *ret_count, uint32_t *ret_plain_size) {
	if (!region) {
		DedupFrameHeader h;
		if (dedup_frame_header_parse(buf, len, &h) < 0)
			return -EIO;
		*ret_count = 1;
		*ret_plain_size = h.plain_size;
		return 0;
	}
	DedupRegionHeader h;
	if (dedup_region_header_parse(buf, len, &h) < 0)
		return -EIO;
	*ret_count = h.count;
	*ret_plain_size = h.plain_size;
	return 0;
}

int store_unit_decode_into(bool region, const uint8_t *buf, size_t len, uint64_t container, uint64_t offset,
			   bool verify, StoreDecoded *d, uint8_t *plain, size_t plain_cap, uint32_t *ends,
			   DedupChunkId *ids, size_t entries_cap) {
	int r;

	if (verify && !d->hasher) {
		r = d->id_key ? dedup_hasher_new_keyed(d->id_key, DEDUP_KEY_SIZE, &d->hasher) : dedup_hasher_new(&d->hasher);
		if (r < 0)
			return r;
	}
	if (!region) {
		DedupFrameHeader h;
		if (!d->frame_decoder) {
			r = dedup_frame_decoder_new(&d->frame_decoder);
			if (r < 0)
				return r;
		}
		if (entries_cap < 1)
			return -EIO;
		r = dedup_frame_decode(d->frame_decoder, buf, len, verify ? d->hasher : NULL, plain, plain_cap, &h);
		if (r < 0)
			return r == -ENOMEM ? r : -EIO;
		d->level = -1;
		d->sealed = false;
		d->count = 1;
		d->plain_size = h.plain_size;
		ends[0] = h.plain_size;
		ids[0] = h.id;
		return 0;
	}

	DedupRegionHeader h;
	if (!d->region_decoder) {
		r = dedup_region_decoder_new(&d->region_decoder);
		if (r < 0)
			return r;
	}
	DedupRegionPlace place = {
		.key = d->content_key,
		.key_tag = d->key_tag,
		.old = d->old_keys,
		.container = container,
		.offset = offset,
	};
	r = dedup_region_decode(d->region_decoder, buf, len, &place, verify ? d->hasher : NULL, plain, plain_cap, ends,
				ids, entries_cap, &h);
	if (r < 0)
		return r == -ENOMEM || r == -ENOKEY ? r : -EIO;
	d->sealed = dedup_region_header_is_sealed(&h);
	/* Lengths into ends, in place. */
	for (size_t i = 1; i < h.count; i++)
		ends[i] += ends[i - 1];
	d->level = h.level;
	d->count = h.count;
	d->plain_size = h.plain_size;
	return 0;
}

int store_unit_decode(bool region, const uint8_t *buf, size_t len, uint64_t container, uint64_t offset, bool verify,
		      StoreDecoded *d) {
	uint32_t count, plain_size;
	int r = store_unit_sizes(region, buf, len, &count, &plain_size);
	if (r < 0)
		return r;
	r = decoded_reserve(d, plain_size, count);
	if (r < 0)
		return r;
	return store_unit_decode_into(region, buf, len, container, offset, verify, d, d->plain, d->plain_cap, d->ends,
				      d->ids, d->entries_cap);
}
