/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * How fixture-store-v1/ was made: built once against fratier ea0b055 (chunk
 * frames, container version 1, catalog schema 6), run as
 * `generate DIR`, and DIR's catalog.db and tier0/ copied here.  Not built
 * by meson: today's store writes format 2, and the point of the fixture is
 * bytes that the old code wrote.
 */
#include "tests/dedup/fixture-v1.h"

int main(int argc, char **argv) {
	DedupStoreOptions opts = { .container_size = FIXTURE_V1_CONTAINER_SIZE };
	uint8_t *buf = test_malloc(FIXTURE_V1_BUFFER);
	char path[256];
	Env e = { .opts = opts };

	if (argc != 2)
		return 2;
	snprintf(e.dir, sizeof(e.dir), "%s", argv[1]);
	snprintf(e.tier_dir, sizeof(e.tier_dir), "%s/tier0", e.dir);
	ASSERT(mkdir(e.tier_dir, 0755) == 0);
	snprintf(path, sizeof(path), "%s/catalog.db", e.dir);
	ASSERT_OK(catalog_open(path, 0, 0, &e.catalog));
	ASSERT_OK(tier_backend_dir_open(e.tier_dir, &e.backend));
	env_open_store(&e);

	for (unsigned i = 0; i < FIXTURE_V1_FILES; i++) {
		DedupChunkerParams params = fixture_v1_params(i);
		TestRng rng = { 1000 + i };
		uint64_t ino = env_new_inode(&e);
		ASSERT(ino == FIXTURE_V1_INO(i));
		fixture_v1_fill(i, buf);
		DedupWriter *w = env_write(&e, &params, buf, fixture_v1_size(i), &rng);
		env_commit(&e, w, ino);
		dedup_writer_free(w);
	}
	env_drop(&e, FIXTURE_V1_INO(FIXTURE_V1_DROPPED));

	e.store = dedup_store_free(e.store);
	e.backend = dedup_backend_free(e.backend);
	e.catalog = catalog_close(e.catalog);
	free(buf);
	return 0;
}
