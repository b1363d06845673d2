/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Chunk cache: a chained hash on the chunk id plus an LRU list.
 *
 * Invariants (all under c->lock):
 *  1. An entry is in the hash and the LRU list iff `cached`; `bytes` is the
 *     sum of the sizes of cached entries and stays <= max_bytes after every
 *     insert.
 *  2. An entry is freed exactly when it is not cached and its last
 *     reference is released.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "dedup/cache.h"

struct DedupChunkCache {
	pthread_mutex_t lock;
	size_t max_bytes;
	size_t bytes;
	size_t n_buckets; /* power of two */
	DedupCachedChunk **buckets;
	DedupCachedChunk *lru_head, *lru_tail; /* head = most recently used */
};

int dedup_chunk_cache_new(size_t max_bytes, DedupChunkCache **ret) {
	DedupChunkCache *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	/* About one bucket per 8 KiB of data: short chains for chunks of 4 KiB and up. */
	size_t n = 64;
	while (n < max_bytes / 8192 && n < (SIZE_MAX / 2) / sizeof(void *))
		n *= 2;
	c->buckets = calloc(n, sizeof(*c->buckets));
	if (!c->buckets) {
		free(c);
		return -ENOMEM;
	}
	c->n_buckets = n;
	c->max_bytes = max_bytes;
	pthread_mutex_init(&c->lock, NULL);
	*ret = c;
	return 0;
}

DedupChunkCache *dedup_chunk_cache_free(DedupChunkCache *c) {
	if (!c)
		return NULL;
	for (DedupCachedChunk *ch = c->lru_head, *next; ch; ch = next) {
		next = ch->lru_next;
		free(ch);
	}
	free(c->buckets);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return NULL;
}

DedupCachedChunk *dedup_cached_chunk_new(uint64_t id, uint32_t size) {
	DedupCachedChunk *ch = malloc(sizeof(*ch) + size);
	if (!ch)
		return NULL;
	*ch = (DedupCachedChunk) { .id = id, .size = size, .refs = 1 };
	return ch;
}

static size_t bucket_of(const DedupChunkCache *c, uint64_t id) {
	/* Chunk ids are sequential: mix them so neighbours spread. */
	id ^= id >> 33;
	id *= UINT64_C(0xff51afd7ed558ccd);
	id ^= id >> 33;
	return (size_t) (id & (c->n_buckets - 1));
}

static DedupCachedChunk *lookup(DedupChunkCache *c, uint64_t id) {
	for (DedupCachedChunk *ch = c->buckets[bucket_of(c, id)]; ch; ch = ch->hash_next)
		if (ch->id == id)
			return ch;
	return NULL;
}

static void lru_unlink(DedupChunkCache *c, DedupCachedChunk *ch) {
	if (ch->lru_prev)
		ch->lru_prev->lru_next = ch->lru_next;
	else
		c->lru_head = ch->lru_next;
	if (ch->lru_next)
		ch->lru_next->lru_prev = ch->lru_prev;
	else
		c->lru_tail = ch->lru_prev;
	ch->lru_prev = ch->lru_next = NULL;
}

static void lru_push_front(DedupChunkCache *c, DedupCachedChunk *ch) {
	ch->lru_prev = NULL;
	ch->lru_next = c->lru_head;
	if (c->lru_head)
		c->lru_head->lru_prev = ch;
	else
		c->lru_tail = ch;
	c->lru_head = ch;
}

/* Unlinks ch from hash and LRU; returns it if it must be freed now (no references). */
static DedupCachedChunk *uncache(DedupChunkCache *c, DedupCachedChunk *ch) {
	DedupCachedChunk **p = &c->buckets[bucket_of(c, ch->id)];
	while (*p != ch)
		p = &(*p)->hash_next;
	*p = ch->hash_next;
	ch->hash_next = NULL;
	lru_unlink(c, ch);
	ch->cached = false;
	c->bytes -= ch->size;
	return ch->refs == 0 ? ch : NULL;
}

DedupCachedChunk *dedup_chunk_cache_insert(DedupChunkCache *c, DedupCachedChunk *ch) {
	DedupCachedChunk *victims = NULL, *existing;

	if (ch->size > c->max_bytes)
		return ch;

	pthread_mutex_lock(&c->lock);
	existing = lookup(c, ch->id);
	if (existing) {
		existing->refs++;
		lru_unlink(c, existing);
		lru_push_front(c, existing);
		pthread_mutex_unlock(&c->lock);
		free(ch); /* only the caller held it */
		return existing;
	}
	while (c->bytes + ch->size > c->max_bytes && c->lru_tail) {
		DedupCachedChunk *dead = uncache(c, c->lru_tail);
		if (dead) {
			dead->hash_next = victims;
			victims = dead;
		}
	}
	size_t b = bucket_of(c, ch->id);
	ch->hash_next = c->buckets[b];
	c->buckets[b] = ch;
	lru_push_front(c, ch);
	ch->cached = true;
	c->bytes += ch->size;
	pthread_mutex_unlock(&c->lock);

	while (victims) {
		DedupCachedChunk *next = victims->hash_next;
		free(victims);
		victims = next;
	}
	return ch;
}

DedupCachedChunk *dedup_chunk_cache_get(DedupChunkCache *c, uint64_t id) {
	pthread_mutex_lock(&c->lock);
	DedupCachedChunk *ch = lookup(c, id);
	if (ch) {
		ch->refs++;
		lru_unlink(c, ch);
		lru_push_front(c, ch);
	}
	pthread_mutex_unlock(&c->lock);
	return ch;
}

bool dedup_chunk_cache_contains(DedupChunkCache *c, uint64_t id) {
	pthread_mutex_lock(&c->lock);
	bool found = lookup(c, id) != NULL;
	pthread_mutex_unlock(&c->lock);
	return found;
}

void dedup_chunk_cache_release(DedupChunkCache *c, DedupCachedChunk *ch) {
	if (!ch)
		return;
	pthread_mutex_lock(&c->lock);
	bool dead = --ch->refs == 0 && !ch->cached;
	pthread_mutex_unlock(&c->lock);
	if (dead)
		free(ch);
}

size_t dedup_chunk_cache_bytes(DedupChunkCache *c) {
	pthread_mutex_lock(&c->lock);
	size_t n = c->bytes;
	pthread_mutex_unlock(&c->lock);
	return n;
}
