/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store-flight.c — the store's chunks in flight: new chunks a writer has
 * claimed (gathered, encoded or appended) and not registered yet.
 *
 * Two writers sealing files that share new chunks would each store them
 * (store-write.c, invariant 2).  The first to meet a new chunk claims it
 * here; a writer meeting it in flight borrows it instead: it keeps the
 * chunk's bytes and, when it next registers, takes the catalog id the
 * owner registered, or stores the chunk itself if the owner lost it (failed
 * or was freed first) or, at finish, has not landed it yet.
 *
 * Invariants:
 *  1. A flight is in the set from store_flight_claim() until its owner
 *     lands it (store_flight_land()): with the catalog id of the chunk,
 *     registered after its containers were fsynced, or with 0 (lost).  A
 *     borrower takes an id only from a landed flight, so a recipe never
 *     holds the id of a chunk that is not durable.
 *  2. Nobody waits for a flight: a borrower that needs its chunk and finds
 *     it still in flight stores its own copy.  So an owner that never
 *     finishes (its file left open, its feeder blocked on the borrower)
 *     delays no one, and there is no cycle to deadlock on.  To land what
 *     others borrowed before they need it, an owner counts the bytes
 *     borrowed from it (lent) and registers early when they add up.
 *  3. A flight is freed when its owner has landed it and every borrower has
 *     let go (refs).  Everything here is protected by flight_lock, a leaf.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dedup/store-internal.h"

#define FLIGHT_BUCKETS ((size_t) 1 << 14)

int store_flights_init(DedupStore *s) {
	pthread_mutex_init(&s->flight_lock, NULL);
	s->flights = calloc(FLIGHT_BUCKETS, sizeof(*s->flights));
	return s->flights ? 0 : -ENOMEM;
}

void store_flights_done(DedupStore *s) {
	/* Every writer is freed by now, and a freed writer has landed its flights. */
	free(s->flights);
	pthread_mutex_destroy(&s->flight_lock);
}

static StoreFlight **bucket(DedupStore *s, const DedupChunkId *id) {
	uint64_t h;
	memcpy(&h, id->bytes, sizeof(h));
	return s->flights + (h & (FLIGHT_BUCKETS - 1));
}

int store_flight_claim(DedupStore *s, const DedupChunkId *id, uint32_t len, uint64_t *lent, StoreFlight **ret) {
	StoreFlight **b = bucket(s, id), *f;

	pthread_mutex_lock(&s->flight_lock);
	for (f = *b; f; f = f->next)
		if (dedup_chunk_id_equal(&f->id, id)) {
			f->refs++;
			__atomic_fetch_add(f->lent, len, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&s->flight_lock);
			*ret = f;
			return 0;
		}
	f = malloc(sizeof(*f));
	if (!f) {
		pthread_mutex_unlock(&s->flight_lock);
		return -ENOMEM;
	}
	*f = (StoreFlight) { .id = *id, .state = STORE_FLIGHT_IN_FLIGHT, .refs = 1, .lent = lent, .next = *b };
	*b = f;
	pthread_mutex_unlock(&s->flight_lock);
	*ret = f;
	return 1;
}

static void unref_locked(StoreFlight *f) {
	if (--f->refs == 0)
		free(f);
}

void store_flight_land(DedupStore *s, StoreFlight *f, uint64_t chunk) {
	pthread_mutex_lock(&s->flight_lock);
	StoreFlight **p = bucket(s, &f->id);
	while (*p != f)
		p = &(*p)->next;
	*p = f->next;
	f->next = NULL;
	f->lent = NULL;
	f->state = chunk != 0 ? STORE_FLIGHT_LANDED : STORE_FLIGHT_LOST;
	f->chunk = chunk;
	s->flight_landings++;
	unref_locked(f);
	pthread_mutex_unlock(&s->flight_lock);
}

int store_flight_state(DedupStore *s, StoreFlight *f, uint64_t *ret_chunk) {
	pthread_mutex_lock(&s->flight_lock);
	int state = f->state;
	*ret_chunk = f->chunk;
	pthread_mutex_unlock(&s->flight_lock);
	return state;
}

void store_flight_unref(DedupStore *s, StoreFlight *f) {
	pthread_mutex_lock(&s->flight_lock);
	unref_locked(f);
	pthread_mutex_unlock(&s->flight_lock);
}

uint64_t store_flight_landings(DedupStore *s) {
	pthread_mutex_lock(&s->flight_lock);
	uint64_t n = s->flight_landings;
	pthread_mutex_unlock(&s->flight_lock);
	return n;
}
