/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests of dedup/store-scrub.c and dedup/store-usage.c: a clean scrub
 * reads every chunk and finds nothing; a flipped byte is found, exactly the
 * chunks of its region are reported and retired, and the files naming them
 * are exactly those whose reads fail; progress can stop a scrub; per-file usage splits frame
 * bytes into unique and shared, and the even split adds up to the live
 * frame bytes of the store.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "dedup/frame.h"
#include "tests/dedup/store-test.h"

static int first_chunk(const CatalogChunk *ch, void *userdata) {
	*(CatalogChunk *) userdata = *ch;
	return -ECANCELED;
}

static int count_chunk(const CatalogChunk *ch, void *userdata) {
	(*(uint64_t *) userdata)++;
	return 0;
}

typedef struct Region {
	uint64_t container, offset;
	uint64_t ids[1024];
	size_t n;
} Region;

static int region_chunk(const CatalogChunk *ch, void *userdata) {
	Region *r = userdata;
	if (ch->offset == r->offset) {
		ASSERT(r->n < ELEMENTSOF(r->ids));
		r->ids[r->n++] = ch->id;
	}
	return 0;
}

static int stop_at_once(const DedupScrubResult *res, uint64_t total, void *userdata) {
	(*(int *) userdata)++;
	return -ECANCELED;
}

static int count_progress(const DedupScrubResult *res, uint64_t total, void *userdata) {
	(*(int *) userdata)++;
	ASSERT(res->bytes <= total);
	return 0;
}

int main(void) {
	DedupStoreOptions opts = { .container_size = 1 * MiB };
	TestRng rng = { 7 };
	DedupStoreStats st;
	DedupScrubResult res;
	Env e;

	env_open(&e, &opts);
	const size_t len = 3 * MiB;
	uint8_t *a = test_malloc(len), *b = test_malloc(len), *c = test_malloc(len);
	fill_text(&rng, a, len);
	/* b shares its first half with a; c is half zeros, half its own. */
	memcpy(b, a, len / 2);
	fill_text(&rng, b + len / 2, len - len / 2);
	memset(c, 0, len / 2);
	test_rng_fill(&rng, c + len / 2, len - len / 2);
	uint64_t inos[3] = { env_seal(&e, a, len, &rng, NULL), env_seal(&e, b, len, &rng, NULL),
			     env_seal(&e, c, len, &rng, NULL) };

	/* Usage: what each file costs, and the even split adds up. */
	DedupFileUsage u[3];
	double attributed = 0;
	for (int i = 0; i < 3; i++) {
		ASSERT_OK(dedup_file_usage(e.catalog, inos[i], &u[i]));
		ASSERT(u[i].logical == len);
		ASSERT(u[i].chunk_bytes + u[i].zero_bytes == len);
		attributed += u[i].attributed;
	}
	ASSERT(u[0].shared > 0 && u[1].shared > 0 && u[0].unique > 0 && u[1].unique > 0);
	ASSERT(u[2].shared == 0 && u[2].zero_bytes >= len / 2 - 64 * KiB);
	ASSERT_OK(dedup_store_stats(e.store, &st));
	ASSERT(fabs(attributed - (double) st.live_bytes) < 1.0);
	ASSERT(u[0].unique + u[0].shared + u[1].unique + u[2].unique <= st.live_bytes + u[0].shared);
	ASSERT_RET(dedup_file_usage(e.catalog, 999999, &u[0]), 0); /* no recipe: nothing */
	ASSERT(u[0].logical == 0 && u[0].chunks == 0);

	/* A clean scrub reads every chunk and every committed byte. */
	uint64_t n_chunks = 0;
	int calls = 0;
	ASSERT_OK(catalog_chunks_foreach(e.catalog, 0, count_chunk, &n_chunks));
	ASSERT_OK(dedup_store_scrub(e.store, count_progress, &calls, &res));
	ASSERT(res.chunks == n_chunks && res.bytes == st.stored_bytes && res.containers == st.containers);
	ASSERT(res.damaged_chunks == 0 && res.n_damaged == 0 && calls == (int) st.containers && calls > 1);
	dedup_scrub_result_done(&res);

	/* Progress stops it after the first container. */
	calls = 0;
	ASSERT_RET(dedup_store_scrub(e.store, stop_at_once, &calls, &res), -ECANCELED);
	ASSERT(calls == 1 && res.containers == 1);
	dedup_scrub_result_done(&res);

	/* One flipped byte (in the table of its region): exactly the chunks of that region. */
	CatalogChunk victim;
	ASSERT_RET(catalog_chunks_foreach(e.catalog, 0, first_chunk, &victim), -ECANCELED);
	static Region region;
	region = (Region) { .container = victim.container, .offset = victim.offset };
	ASSERT_OK(catalog_chunks_foreach_in_container(e.catalog, victim.container, region_chunk, &region));
	ASSERT(victim.region_size > 0 && region.n > 1);
	char name[DEDUP_CONTAINER_NAME_MAX], path[256];
	snprintf(path, sizeof(path), "%s/%s", e.tier_dir, dedup_container_name(victim.container, name));
	int fd = open(path, O_RDWR | O_CLOEXEC);
	ASSERT(fd >= 0);
	uint8_t byte;
	off_t at = (off_t) (victim.offset + DEDUP_FRAME_HEADER_SIZE + 3);
	ASSERT(pread(fd, &byte, 1, at) == 1);
	byte ^= 0x10;
	ASSERT(pwrite(fd, &byte, 1, at) == 1);
	close(fd);

	ASSERT_OK(dedup_store_scrub(e.store, NULL, NULL, &res));
	ASSERT(res.damaged_chunks == region.n && res.n_damaged == region.n);
	for (size_t i = 0; i < region.n; i++)
		ASSERT(res.damaged[i] == region.ids[i]);
	ASSERT(res.chunks == n_chunks && res.damaged_containers == 0);
	/* Retired: its digest is no longer the content's. */
	CatalogChunk now;
	ASSERT_OK(catalog_chunk_get(e.catalog, victim.id, &now));
	ASSERT(memcmp(now.digest, victim.digest, CATALOG_DIGEST_SIZE) != 0);

	/* The files that name it are exactly those that cannot be read. */
	env_reopen_store(&e);
	const uint8_t *datas[3] = { a, b, c };
	int referencing = 0;
	uint8_t *buf = test_malloc(len);
	for (int i = 0; i < 3; i++) {
		int ref = dedup_file_references_any(e.catalog, inos[i], res.damaged, res.n_damaged);
		ASSERT(ref == 0 || ref == 1);
		ssize_t got = dedup_file_read(e.store, inos[i], len, 0, buf, len);
		if (ref) {
			ASSERT(got == -EIO);
			referencing++;
		} else
			ASSERT(got == (ssize_t) len && memcmp(buf, datas[i], len) == 0);
	}
	ASSERT(referencing >= 1);
	dedup_scrub_result_done(&res);

	/* A container whose header is gone: all its chunks are damaged. */
	uint64_t in_container = 0;
	ASSERT_OK(catalog_chunks_foreach_in_container(e.catalog, victim.container, count_chunk, &in_container));
	fd = open(path, O_RDWR | O_CLOEXEC);
	ASSERT(fd >= 0 && pwrite(fd, "XXXX", 4, 0) == 4);
	close(fd);
	ASSERT_OK(dedup_store_scrub(e.store, NULL, NULL, &res));
	ASSERT(res.damaged_containers == 1 && res.damaged_chunks == in_container);
	dedup_scrub_result_done(&res);

	free(buf);
	free(a);
	free(b);
	free(c);
	env_close(&e);
	printf("store-scrub: all tests passed\n");
	return 0;
}
