/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Locality cache: one open-addressing hash table (linear probing) of entry
 * indices, keyed by the chunk id's first 8 bytes, over a fixed pool of
 * entries; every entry belongs to one container ("owner") and is chained to
 * its owner's other entries, so a container is evicted by walking its chain.
 *
 * Invariants (under l->lock):
 *  1. The table holds at most half as many entries as it has slots, so
 *     probing always ends at an empty slot.  Deletion shifts the following
 *     cluster back (no tombstones).
 *  2. An id is in the table at most once: inserting an id already present
 *     (the same chunk listed under a second container after a move) keeps
 *     the first.
 *  3. An entry is either free (on the free list, or at or above hwm) or in
 *     the table and on its owner's chain; owners[i].count is the length of
 *     its chain, and n_free counts the free ones.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/locality.h"

#define NONE UINT32_MAX

typedef struct Entry {
	DedupChunkId id;
	uint64_t chunk;
	uint32_t owner; /* index into owners */
	uint32_t next;  /* owner chain, or free list */
} Entry;

typedef struct Owner {
	uint64_t container; /* 0 = unused slot (container ids start at 1) */
	uint32_t head;
	uint32_t count;
	uint64_t used;
} Owner;

struct DedupLocality {
	pthread_mutex_t lock;
	uint32_t max_entries;
	uint32_t free_head; /* recycled entries */
	uint32_t hwm;       /* entries [hwm, max_entries) were never used: untouched memory */
	uint32_t n_free;
	uint64_t mask; /* slots - 1 */
	uint64_t tick;
	uint32_t *slots;
	Entry *entries;
	Owner owners[DEDUP_LOCALITY_CONTAINERS_MAX];
};

static void reset(DedupLocality *l) {
	memset(l->slots, 0xff, (size_t) (l->mask + 1) * sizeof(uint32_t));
	l->free_head = NONE;
	l->hwm = 0;
	l->n_free = l->max_entries;
	memset(l->owners, 0, sizeof(l->owners));
}

int dedup_locality_new(size_t max_chunks, DedupLocality **ret) {
	if (max_chunks == 0 || max_chunks > DEDUP_LOCALITY_CHUNKS_MAX)
		return -EINVAL;
	DedupLocality *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	uint64_t slots = 2;
	while (slots < 2 * (uint64_t) max_chunks)
		slots *= 2;
	l->max_entries = (uint32_t) max_chunks;
	l->mask = slots - 1;
	l->slots = malloc(slots * sizeof(uint32_t));
	l->entries = malloc(max_chunks * sizeof(Entry));
	if (!l->slots || !l->entries) {
		free(l->slots);
		free(l->entries);
		free(l);
		return -ENOMEM;
	}
	pthread_mutex_init(&l->lock, NULL);
	reset(l);
	*ret = l;
	return 0;
}

DedupLocality *dedup_locality_free(DedupLocality *l) {
	if (!l)
		return NULL;
	pthread_mutex_destroy(&l->lock);
	free(l->slots);
	free(l->entries);
	free(l);
	return NULL;
}

static uint64_t home(const DedupLocality *l, const DedupChunkId *id) {
	uint64_t h;
	memcpy(&h, id->bytes, sizeof(h));
	return h & l->mask;
}

/* The slot holding id, or the empty slot where it would go. */
static uint64_t probe(const DedupLocality *l, const DedupChunkId *id) {
	uint64_t i = home(l, id);
	while (l->slots[i] != NONE && !dedup_chunk_id_equal(&l->entries[l->slots[i]].id, id))
		i = (i + 1) & l->mask;
	return i;
}

static void table_delete(DedupLocality *l, uint64_t i) {
	uint64_t j = i;
	for (;;) {
		j = (j + 1) & l->mask;
		if (l->slots[j] == NONE)
			break;
		uint64_t k = home(l, &l->entries[l->slots[j]].id);
		/* The entry at j may stay if its home lies cyclically in (i, j]. */
		bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
		if (stays)
			continue;
		l->slots[i] = l->slots[j];
		i = j;
	}
	l->slots[i] = NONE;
}

static void evict_owner(DedupLocality *l, uint32_t o) {
	Owner *ow = l->owners + o;
	uint32_t e = ow->head;
	while (e != NONE) {
		Entry *en = l->entries + e;
		uint32_t next = en->next;
		table_delete(l, probe(l, &en->id));
		en->next = l->free_head;
		l->free_head = e;
		l->n_free++;
		e = next;
	}
	*ow = (Owner) {};
}

static uint32_t find_owner(const DedupLocality *l, uint64_t container) {
	for (uint32_t i = 0; i < DEDUP_LOCALITY_CONTAINERS_MAX; i++)
		if (l->owners[i].container == container)
			return i;
	return NONE;
}

/* Evicts the least recently used owner other than `keep`; false if there is none. */
static bool evict_lru(DedupLocality *l, uint32_t keep) {
	uint32_t victim = NONE;
	for (uint32_t i = 0; i < DEDUP_LOCALITY_CONTAINERS_MAX; i++) {
		if (i == keep || l->owners[i].container == 0)
			continue;
		if (victim == NONE || l->owners[i].used < l->owners[victim].used)
			victim = i;
	}
	if (victim == NONE)
		return false;
	evict_owner(l, victim);
	return true;
}

/* A free owner slot for container, evicting if all are taken. */
static uint32_t new_owner(DedupLocality *l, uint64_t container) {
	uint32_t o = find_owner(l, 0);
	if (o == NONE) {
		evict_lru(l, NONE);
		o = find_owner(l, 0);
	}
	l->owners[o] = (Owner) { .container = container, .head = NONE, .used = ++l->tick };
	return o;
}

static void insert(DedupLocality *l, uint32_t o, const DedupChunkId *id, uint64_t chunk) {
	uint64_t i = probe(l, id);
	if (l->slots[i] != NONE)
		return;
	uint32_t e;
	if (l->free_head != NONE) {
		e = l->free_head;
		l->free_head = l->entries[e].next;
	} else
		e = l->hwm++;
	l->n_free--;
	l->entries[e] = (Entry) { .id = *id, .chunk = chunk, .owner = o, .next = l->owners[o].head };
	l->owners[o].head = e;
	l->owners[o].count++;
	l->slots[i] = e;
}

bool dedup_locality_find(DedupLocality *l, const DedupChunkId *id, uint64_t *ret_chunk) {
	pthread_mutex_lock(&l->lock);
	uint32_t e = l->slots[probe(l, id)];
	if (e != NONE) {
		*ret_chunk = l->entries[e].chunk;
		l->owners[l->entries[e].owner].used = ++l->tick;
	}
	pthread_mutex_unlock(&l->lock);
	return e != NONE;
}

void dedup_locality_load(DedupLocality *l, uint64_t container, const DedupLocalityEntry *entries, size_t n) {
	pthread_mutex_lock(&l->lock);
	uint32_t o = find_owner(l, container);
	if (o != NONE)
		evict_owner(l, o);
	if (n > l->max_entries || container == 0)
		goto out;
	while (l->n_free < n)
		if (!evict_lru(l, NONE))
			break;
	o = new_owner(l, container);
	for (size_t i = 0; i < n; i++)
		insert(l, o, &entries[i].id, entries[i].chunk);
out:
	pthread_mutex_unlock(&l->lock);
}

void dedup_locality_add(DedupLocality *l, uint64_t container, const DedupChunkId *id, uint64_t chunk) {
	if (container == 0)
		return;
	pthread_mutex_lock(&l->lock);
	uint32_t o = find_owner(l, container);
	if (o == NONE)
		o = new_owner(l, container);
	if (l->n_free == 0 && !evict_lru(l, o))
		goto out;
	insert(l, o, id, chunk);
	l->owners[o].used = ++l->tick;
out:
	pthread_mutex_unlock(&l->lock);
}

bool dedup_locality_has_container(DedupLocality *l, uint64_t container) {
	pthread_mutex_lock(&l->lock);
	bool has = container != 0 && find_owner(l, container) != NONE;
	pthread_mutex_unlock(&l->lock);
	return has;
}

void dedup_locality_clear(DedupLocality *l) {
	pthread_mutex_lock(&l->lock);
	reset(l);
	pthread_mutex_unlock(&l->lock);
}

size_t dedup_locality_bytes(const DedupLocality *l) {
	return sizeof(*l) + (size_t) (l->mask + 1) * sizeof(uint32_t) + l->max_entries * sizeof(Entry);
}
