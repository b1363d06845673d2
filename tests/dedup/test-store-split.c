/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A file sealed in parts (dedup_writer_cut(), dedup_writer_join()): parts
 * fed on threads of their own join into one recipe that reads back
 * byte-exact, takes one reference per chunk use (a chunk met in two parts
 * and in another file included), and is the recipe of one writer fed the
 * whole file with cuts where the parts meet, storing the same bytes; a
 * part that fails fails the commit and leaves only garbage; and once the
 * files are dropped the collector leaves nothing.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tests/dedup/oracle-test.h"
#include "tests/dedup/store-test.h"

typedef struct Part {
	Env *e;
	const DedupChunkerParams *params;
	const uint8_t *data;
	size_t len;
	uint64_t seed;
	DedupWriter *w;
} Part;

static void *part_main(void *userdata) {
	Part *p = userdata;
	TestRng rng = { p->seed };
	p->w = env_write(p->e, p->params, p->data, p->len, &rng);
	return NULL;
}

/* data[0, len) sealed as file ino in parts cut at cuts[0, n) (ascending), each part on a thread of its own. */
static DedupWriterStats seal_parts(Env *e, const DedupChunkerParams *params, uint64_t ino, const uint8_t *data,
				   size_t len, const size_t *cuts, size_t n) {
	Part parts[8];
	pthread_t threads[8];
	ASSERT(n + 1 <= ELEMENTSOF(parts));
	for (size_t k = 0; k <= n; k++) {
		size_t from = k == 0 ? 0 : cuts[k - 1], to = k == n ? len : cuts[k];
		parts[k] = (Part) { .e = e, .params = params, .data = data + from, .len = to - from, .seed = 100 + k };
		ASSERT(pthread_create(&threads[k], NULL, part_main, &parts[k]) == 0);
	}
	for (size_t k = 0; k <= n; k++)
		ASSERT(pthread_join(threads[k], NULL) == 0);
	for (size_t k = 1; k <= n; k++) {
		ASSERT_OK(dedup_writer_join(parts[0].w, parts[k].w));
		/* A part joined is spent. */
		ASSERT_RET(dedup_writer_join(parts[k].w, parts[0].w), -EINVAL);
		ASSERT_RET(dedup_writer_commit(parts[k].w, ino), -EINVAL);
	}
	env_commit(e, parts[0].w, ino);
	DedupWriterStats st;
	dedup_writer_stats(parts[0].w, &st);
	for (size_t k = 0; k <= n; k++)
		dedup_writer_free(parts[k].w);
	return st;
}

/* data[0, len) sealed as file ino by one writer, cut at cuts[0, n) (none: n == 0). */
static DedupWriterStats seal_whole(Env *e, const DedupChunkerParams *params, uint64_t ino, const uint8_t *data,
				   size_t len, const size_t *cuts, size_t n, TestRng *rng) {
	DedupWriter *w;
	ASSERT_OK(dedup_writer_new(e->store, params, DEDUP_STORE_LEVEL_DEFAULT, DEDUP_STORE_REGION_DEFAULT, &w));
	size_t k = 0;
	for (size_t off = 0; off < len;) {
		size_t end = k < n ? cuts[k] : len;
		size_t r = 1 + (size_t) (test_rng_next(rng) % (300 * KiB)), m = MIN(end - off, r);
		ASSERT_OK(dedup_writer_feed(w, data + off, m));
		off += m;
		if (k < n && off == cuts[k]) {
			ASSERT_OK(dedup_writer_cut(w));
			k++;
		}
	}
	ASSERT_OK(dedup_writer_finish(w));
	env_commit(e, w, ino);
	DedupWriterStats st;
	dedup_writer_stats(w, &st);
	dedup_writer_free(w);
	return st;
}

/* The lengths and kinds of a file's recipe entries (chunk ids aside), in order. */
typedef struct Shape {
	uint64_t *items; /* length << 2 | kind (0 zeros, 1 literal, 2 chunk) */
	size_t n, cap;
} Shape;

static int shape_collect(uint64_t start, const void *blob, size_t size, void *userdata) {
	Shape *sh = userdata;
	DedupRecipeSegment *seg;
	ASSERT_OK(dedup_recipe_segment_decode(blob, size, &seg));
	for (size_t i = 0; i < seg->n_entries; i++) {
		const DedupRecipeEntry *x = seg->entries + i;
		if (sh->n == sh->cap) {
			sh->cap = sh->cap ? sh->cap * 2 : 1024;
			sh->items = realloc(sh->items, sh->cap * sizeof(uint64_t));
			ASSERT(sh->items);
		}
		uint64_t kind = x->chunk == 0 ? 0 : x->chunk == DEDUP_RECIPE_LITERAL ? 1 : 2;
		sh->items[sh->n++] = (uint64_t) x->length << 2 | kind;
	}
	free(seg);
	return 0;
}

static Shape shape_of(Env *e, uint64_t ino) {
	Shape sh = {};
	ASSERT(catalog_recipe_foreach(e->catalog, ino, shape_collect, &sh) >= 0);
	return sh;
}

/* A shared block X (in parts 1 and 3, and in file `other`), random bytes, text, zero runs. */
static uint8_t *make_data(size_t len, TestRng *rng, uint8_t **ret_other, size_t *ret_other_len) {
	uint8_t *d = test_malloc(len);
	size_t x = 2 * MiB;
	test_rng_fill(rng, d, x);
	fill_text(rng, d + x, 2 * MiB);
	fill_sparse(rng, d + 4 * MiB, 3 * MiB);
	test_rng_fill(rng, d + 7 * MiB, len - 7 * MiB);
	/* X again, past the middle: another part meets the same chunks. */
	memcpy(d + 9 * MiB + 12345, d, x);
	*ret_other_len = 3 * MiB;
	*ret_other = test_malloc(*ret_other_len);
	memcpy(*ret_other, d + 512 * KiB, *ret_other_len);
	return d;
}

/*
 * One round, on a fresh store: `other` sealed whole, then data split at
 * cuts[0, n); the recipe must match one writer's with those cuts in a
 * second store, and what is stored one writer's without cuts within a
 * chunk per cut.
 */
static void check_split(const DedupChunkerParams *params, const uint8_t *data, size_t len, const uint8_t *other,
			size_t other_len, const size_t *cuts, size_t n) {
	TestRng rng = { 7 };
	Env e, w, plain;
	env_open(&e, NULL);
	env_open(&w, NULL);
	env_open(&plain, NULL);

	uint64_t o_ino = env_new_inode(&e);
	seal_whole(&e, params, o_ino, other, other_len, NULL, 0, &rng);
	uint64_t ino = env_new_inode(&e);
	DedupWriterStats split = seal_parts(&e, params, ino, data, len, cuts, n);
	ASSERT(split.logical_bytes == len);
	env_check_file(&e, ino, data, len, &rng);
	env_check_file(&e, o_ino, other, other_len, &rng);
	uint64_t both[] = { o_ino, ino };
	env_check_refs(&e, both, 2);

	/* One writer with the same cuts: the same recipe, the same bytes stored. */
	uint64_t w_o = env_new_inode(&w), w_ino = env_new_inode(&w);
	seal_whole(&w, params, w_o, other, other_len, NULL, 0, &rng);
	DedupWriterStats whole = seal_whole(&w, params, w_ino, data, len, cuts, n, &rng);
	Shape a = shape_of(&e, ino), b = shape_of(&w, w_ino);
	ASSERT(a.n == b.n && memcmp(a.items, b.items, a.n * sizeof(uint64_t)) == 0);
	free(a.items);
	free(b.items);
	ASSERT(split.chunks == whole.chunks && split.zero_bytes == whole.zero_bytes &&
	       split.literal_bytes == whole.literal_bytes);
	/* Two parts may both store a chunk new to the store: the later registration drops its copy. */
	ASSERT(split.new_chunks == whole.new_chunks && split.new_bytes == whole.new_bytes);
	DedupStoreStats se, sw;
	ASSERT_OK(dedup_store_stats(e.store, &se));
	ASSERT_OK(dedup_store_stats(w.store, &sw));
	ASSERT(se.live_plain_bytes == sw.live_plain_bytes && se.referenced_bytes == sw.referenced_bytes);

	/* Without cuts: what is stored differs by at most a chunk on each side of each cut. */
	uint64_t p_o = env_new_inode(&plain), p_ino = env_new_inode(&plain);
	seal_whole(&plain, params, p_o, other, other_len, NULL, 0, &rng);
	DedupWriterStats none = seal_whole(&plain, params, p_ino, data, len, NULL, 0, &rng);
	env_check_file(&plain, p_ino, data, len, &rng);
	uint64_t slack = 2 * n * params->max_size;
	ASSERT(split.new_bytes <= none.new_bytes + slack && none.new_bytes <= split.new_bytes + slack);

	/* Dropped, nothing is left once collected. */
	env_drop(&e, ino);
	env_check_refs(&e, &o_ino, 1);
	env_check_file(&e, o_ino, other, other_len, &rng);
	env_drop(&e, o_ino);
	DedupGcStats gc;
	ASSERT_OK(dedup_store_gc(e.store, NULL, &gc));
	ASSERT_OK(dedup_store_stats(e.store, &se));
	ASSERT(se.chunks == 0 && se.containers == 0 && se.stored_bytes == 0);
	ASSERT(env_count_objects(&e) == 0);
	env_close(&e);
	env_close(&w);
	env_close(&plain);
}

static void test_split_cdc(void) {
	TestRng rng = { 1 };
	size_t len = 12 * MiB + 777, other_len;
	uint8_t *other;
	uint8_t *d = make_data(len, &rng, &other, &other_len);
	DedupChunkerParams p = DEDUP_CHUNKER_PARAMS_DEFAULT;

	size_t two[] = { 6 * MiB };
	check_split(&p, d, len, other, other_len, two, 1);
	/* Three parts, one cut inside a zero run and one at an odd offset. */
	size_t three[] = { 5 * MiB + 4099, 8 * MiB };
	check_split(&p, d, len, other, other_len, three, 2);
	free(d);
	free(other);
}

static void test_split_oracle(void) {
	TestRng rng = { 2 };
	OraFile f = ora_file(1400, 1, &rng);
	DedupChunkerParams p = DEDUP_CHUNKER_PARAMS_CDC(8 * KiB);
	p.mode = DEDUP_CHUNKER_ORACLE;
	/* Cuts inside a block and between a frame and its block: the splitter starts afresh at both. */
	size_t cuts[] = { 3 * MiB + 100, 7 * MiB + ORA_BLOCK + ORA_FRAME };
	ASSERT(f.piece_len > cuts[1] + MiB);
	check_split(&p, f.piece, f.piece_len, f.image + ORA_BLOCK, 2 * MiB, cuts, 2);
	ora_file_free(&f);
}

/* A part that fails fails the join and the commit; what the parts stored is garbage. */
static void test_part_fails(void) {
	TestRng rng = { 3 };
	size_t len = 6 * MiB;
	uint8_t *d = test_malloc(len);
	test_rng_fill(&rng, d, len);
	Env e;
	env_open(&e, NULL);
	uint64_t ino = env_new_inode(&e);

	DedupWriter *a = env_write(&e, NULL, d, 3 * MiB, &rng);
	DedupWriter *b = env_write(&e, NULL, d + 3 * MiB, 3 * MiB, &rng);
	/* b dies (fed after its finish): its error is a's. */
	ASSERT_RET(dedup_writer_feed(b, d, 1), -EINVAL);
	ASSERT_RET(dedup_writer_join(a, b), -EINVAL);
	ASSERT_OK(catalog_begin(e.catalog));
	ASSERT_RET(dedup_writer_commit(a, ino), -EINVAL);
	catalog_rollback(e.catalog);
	a = dedup_writer_free(a);
	b = dedup_writer_free(b);
	DedupStoreStats st;
	ASSERT_OK(dedup_store_stats(e.store, &st));
	ASSERT(st.chunks > 0 && st.dead_chunks == st.chunks && st.referenced_bytes == 0);
	uint8_t buf[16];
	ASSERT(dedup_file_read(e.store, ino, len, 0, buf, sizeof(buf)) < 0);

	/* Parts of other chunkers do not join. */
	DedupChunkerParams fixed = DEDUP_CHUNKER_PARAMS_FIXED(64 * KiB);
	a = env_write(&e, NULL, d, MiB, &rng);
	b = env_write(&e, &fixed, d + MiB, MiB, &rng);
	ASSERT_RET(dedup_writer_join(a, b), -EINVAL);
	dedup_writer_free(a);
	dedup_writer_free(b);

	DedupGcStats gc;
	ASSERT_OK(dedup_store_gc(e.store, NULL, &gc));
	ASSERT_OK(dedup_store_stats(e.store, &st));
	ASSERT(st.chunks == 0 && st.containers == 0);
	ASSERT(env_count_objects(&e) == 0);

	/* The same bytes seal after. */
	uint64_t again = env_new_inode(&e);
	size_t cut[] = { 3 * MiB };
	seal_parts(&e, NULL, again, d, len, cut, 1);
	env_check_file(&e, again, d, len, &rng);
	env_check_refs(&e, &again, 1);
	env_close(&e);
	free(d);
}

int main(void) {
	test_split_cdc();
	test_split_oracle();
	test_part_fails();
	return 0;
}
