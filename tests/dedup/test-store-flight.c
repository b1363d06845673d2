/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The store's chunks in flight (dedup/store-flight.c): writers sealing the
 * same new content at once store it once, and a writer whose borrowed
 * chunks never land (the owner failed or was freed, or is still writing
 * when the borrower finishes) stores them itself: every file reads back,
 * every chunk its recipe names is registered and readable after a reopen
 * and a collection.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/dedup/store-test.h"

static uint64_t stored_bytes(Env *e) {
	DedupStoreStats st;
	ASSERT_OK(dedup_store_stats(e->store, &st));
	return st.stored_bytes;
}

static DedupWriter *writer_new(Env *e) {
	DedupWriter *w;
	ASSERT_OK(dedup_writer_new(e->store, NULL, 1, DEDUP_STORE_REGION_DEFAULT, &w));
	return w;
}

static uint64_t commit_free(Env *e, DedupWriter *w) {
	uint64_t ino = env_new_inode(e);
	env_commit(e, w, ino);
	dedup_writer_free(w);
	return ino;
}

/* After a reopen (cold caches, the catalog only) and a collection (garbage compacted away), files still read. */
static void check_durable(Env *e, const uint64_t *inos, uint8_t *const *data, const size_t *len, size_t n,
			  TestRng *rng) {
	for (size_t i = 0; i < n; i++)
		env_check_file(e, inos[i], data[i], len[i], rng);
	env_check_refs(e, inos, n);
	env_reopen_store(e);
	DedupGcStats gc;
	DedupGcOptions o = { .live_threshold = 0.9 };
	ASSERT_OK(dedup_store_gc(e->store, &o, &gc));
	for (size_t i = 0; i < n; i++)
		env_check_file(e, inos[i], data[i], len[i], rng);
	env_check_refs(e, inos, n);
}

/* The second writer meets every new chunk in flight in the first: it stores nothing, and it waits for nothing. */
static void test_same_content(void) {
	TestRng rng = { 1 };
	const size_t len = 6 * MiB;
	uint8_t *data = test_malloc(len);
	DedupWriterStats s1, s2;
	Env e;

	env_open(&e, NULL);
	test_rng_fill(&rng, data, len);
	DedupWriter *w1 = writer_new(&e), *w2 = writer_new(&e);
	ASSERT_OK(dedup_writer_feed(w1, data, len));
	ASSERT_OK(dedup_writer_feed(w2, data, len));
	ASSERT_OK(dedup_writer_finish(w1));
	ASSERT_OK(dedup_writer_finish(w2));
	dedup_writer_stats(w1, &s1);
	dedup_writer_stats(w2, &s2);
	ASSERT(s1.new_bytes == len && s2.new_bytes == 0 && s2.dup_bytes == len && s2.stored_bytes == 0);
	/* Random bytes are stored raw: one copy is len and a little. */
	ASSERT(stored_bytes(&e) < len + len / 10);
	uint64_t inos[] = { commit_free(&e, w1), commit_free(&e, w2) };
	check_durable(&e, inos, (uint8_t *[]) { data, data }, (size_t[]) { len, len }, 2, &rng);
	free(data);
	env_close(&e);
}

/*
 * Two writers go through the same new content side by side, each first to
 * half of it, both registering every sync_bytes: each borrows the other's
 * half, borrows outlive registrations, and only what the second to finish
 * still had in flight when the first finished is stored twice.
 */
static void test_side_by_side(void) {
	TestRng rng = { 2 };
	const size_t len = 12 * MiB, step = 256 * KiB;
	uint8_t *data = test_malloc(len);
	DedupStoreOptions o = { .sync_bytes = 1 * MiB };
	DedupWriterStats s1, s2;
	Env e;

	env_open(&e, &o);
	test_rng_fill(&rng, data, len);
	DedupWriter *w[2] = { writer_new(&e), writer_new(&e) };
	for (size_t off = 0, k = 0; off < len; off += step, k++) {
		ASSERT_OK(dedup_writer_feed(w[k % 2], data + off, step));
		ASSERT_OK(dedup_writer_feed(w[(k + 1) % 2], data + off, step));
	}
	ASSERT_OK(dedup_writer_finish(w[0]));
	ASSERT_OK(dedup_writer_finish(w[1]));
	dedup_writer_stats(w[0], &s1);
	dedup_writer_stats(w[1], &s2);
	ASSERT(s1.new_bytes > len / 3 && s2.new_bytes > len / 3);
	ASSERT(s1.new_bytes + s2.new_bytes < len + 2 * MiB);
	/* Without the flights, each writer stores all of it: two copies. */
	ASSERT(stored_bytes(&e) < len + 3 * MiB);
	uint64_t inos[] = { commit_free(&e, w[0]), commit_free(&e, w[1]) };
	check_durable(&e, inos, (uint8_t *[]) { data, data }, (size_t[]) { len, len }, 2, &rng);
	free(data);
	env_close(&e);
}

/*
 * The owner goes away before it registers what the other borrowed: freed
 * (its file rewritten while sealing), or dead on an error while still
 * alive.  The borrower stores those chunks itself, at its next
 * registration or at finish.
 */
static void test_owner_lost(void) {
	for (int how = 0; how < 2; how++) {
		TestRng rng = { 3 };
		/* The owner's part stays below sync_bytes: it registers none of it. */
		const size_t len = 1536 * KiB, more = 5 * MiB;
		uint8_t *data = test_malloc(len + more);
		DedupStoreOptions o = { .sync_bytes = 2 * MiB };
		DedupWriterStats st;
		Env e;

		env_open(&e, &o);
		test_rng_fill(&rng, data, len + more);
		DedupWriter *owner = writer_new(&e), *w = writer_new(&e);
		ASSERT_OK(dedup_writer_feed(owner, data, len));
		ASSERT_OK(dedup_writer_feed(w, data, len));
		dedup_writer_stats(w, &st);
		ASSERT(st.new_bytes < 256 * KiB && st.dup_bytes > len - 256 * KiB);
		if (how == 0)
			owner = dedup_writer_free(owner);
		else
			ASSERT_RET(dedup_writer_feed(owner, data, SIZE_MAX), -EFBIG);
		/* New bytes of its own: registrations before finish settle the lost borrows. */
		ASSERT_OK(dedup_writer_feed(w, data + len, more));
		ASSERT_OK(dedup_writer_finish(w));
		dedup_writer_stats(w, &st);
		ASSERT(st.new_bytes == len + more && st.dup_bytes == 0);
		dedup_writer_free(owner);
		uint64_t ino = commit_free(&e, w);
		check_durable(&e, &ino, (uint8_t *[]) { data }, (size_t[]) { len + more }, 1, &rng);
		free(data);
		env_close(&e);
	}
}

/*
 * The borrower finishes while the owner still has the chunks in flight: it
 * stores them rather than wait; the owner's registration then finds them
 * stored and its own copy is garbage.
 */
static void test_borrower_first(void) {
	TestRng rng = { 4 };
	const size_t len = 3 * MiB;
	uint8_t *data = test_malloc(len);
	DedupWriterStats s1;
	Env e;

	env_open(&e, NULL);
	test_rng_fill(&rng, data, len);
	DedupWriter *owner = writer_new(&e), *w = writer_new(&e);
	ASSERT_OK(dedup_writer_feed(owner, data, len));
	ASSERT_OK(dedup_writer_feed(w, data, len));
	ASSERT_OK(dedup_writer_finish(w));
	uint64_t i2 = commit_free(&e, w);
	ASSERT_OK(dedup_writer_finish(owner));
	dedup_writer_stats(owner, &s1);
	ASSERT(s1.new_chunks == 0 && s1.dup_bytes == len && s1.stored_bytes == 0);
	uint64_t inos[] = { commit_free(&e, owner), i2 };
	check_durable(&e, inos, (uint8_t *[]) { data, data }, (size_t[]) { len, len }, 2, &rng);
	free(data);
	env_close(&e);
}

/*
 * An owner far from its sync_bytes registers as soon as enough of its
 * chunks in flight were borrowed: its next chunk lands them, and the
 * borrower, finishing later, stores none of them.
 */
static void test_owner_lands_early(void) {
	TestRng rng = { 6 };
	const size_t len = 12 * MiB, more = 1 * MiB;
	uint8_t *data = test_malloc(len + more);
	DedupWriterStats st;
	Env e;

	env_open(&e, NULL);
	test_rng_fill(&rng, data, len + more);
	DedupWriter *owner = writer_new(&e), *w = writer_new(&e);
	ASSERT_OK(dedup_writer_feed(owner, data, len));
	ASSERT_OK(dedup_writer_feed(w, data, len));
	ASSERT_OK(dedup_writer_feed(owner, data + len, more));
	ASSERT_OK(dedup_writer_finish(w));
	dedup_writer_stats(w, &st);
	ASSERT(st.new_bytes < 256 * KiB);
	ASSERT_OK(dedup_writer_finish(owner));
	ASSERT(stored_bytes(&e) < len + more + 2 * MiB);
	uint64_t inos[] = { commit_free(&e, owner), commit_free(&e, w) };
	check_durable(&e, inos, (uint8_t *[]) { data, data }, (size_t[]) { len + more, len }, 2, &rng);
	free(data);
	env_close(&e);
}

typedef struct Sealer {
	Env *e;
	const uint8_t *data;
	size_t len;
	size_t abort_at; /* free the writer unfinished after this many bytes, or SIZE_MAX */
	unsigned seed;
	DedupWriter *w;
} Sealer;

static void *sealer_main(void *userdata) {
	Sealer *s = userdata;
	TestRng rng = { s->seed };
	s->w = writer_new(s->e);
	for (size_t off = 0; off < s->len;) {
		size_t n = MIN(s->len - off, 1 + (size_t) (test_rng_next(&rng) % (512 * KiB)));
		if (off >= s->abort_at) {
			s->w = dedup_writer_free(s->w);
			return NULL;
		}
		ASSERT_OK(dedup_writer_feed(s->w, s->data + off, n));
		off += n;
	}
	ASSERT_OK(dedup_writer_finish(s->w));
	return NULL;
}

/* Writers on threads, with the store's encoders, one of them abandoned half way: what sealed reads back. */
static void test_threads(void) {
	TestRng rng = { 5 };
	const size_t len = 16 * MiB;
	uint8_t *data = test_malloc(len);
	DedupStoreOptions o = { .sync_bytes = 2 * MiB, .encode_workers = 2 };
	Sealer s[3];
	pthread_t t[3];
	Env e;

	env_open(&e, &o);
	for (size_t off = 0; off < len; off += 64 * KiB)
		if (test_rng_next(&rng) % 2)
			fill_text(&rng, data + off, 64 * KiB);
		else
			test_rng_fill(&rng, data + off, 64 * KiB);
	for (unsigned i = 0; i < 3; i++) {
		s[i] = (Sealer) { .e = &e, .data = data, .len = len, .abort_at = i == 2 ? len / 2 : SIZE_MAX, .seed = i };
		ASSERT(pthread_create(&t[i], NULL, sealer_main, &s[i]) == 0);
	}
	for (unsigned i = 0; i < 3; i++)
		ASSERT(pthread_join(t[i], NULL) == 0);
	ASSERT(!s[2].w);
	uint64_t inos[] = { commit_free(&e, s[0].w), commit_free(&e, s[1].w) };
	check_durable(&e, inos, (uint8_t *[]) { data, data }, (size_t[]) { len, len }, 2, &rng);
	free(data);
	env_close(&e);
}

int main(void) {
	test_same_content();
	test_side_by_side();
	test_owner_lost();
	test_borrower_first();
	test_owner_lands_early();
	test_threads();
	return 0;
}
