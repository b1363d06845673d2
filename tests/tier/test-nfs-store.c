/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The chunk store over the NFS backend: files sealed through a DedupWriter
 * and committed in a catalog transaction read back byte-exact, from the
 * same store and from a reopened one, and the collector (list, unlink, and
 * compaction's copies) leaves the survivors intact.  With the server dead,
 * reading a file that lives only there fails with -EIO (no hang, no damage
 * recorded), and once the server is back the file reads back byte-exact.
 *     test-nfs-store URL    (tests/tier/test_nfs.py starts the server and
 *                           kills and restarts it on request, as for
 *                           test-nfs-dead)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/dedup/store-test.h"
#include "tests/tier/tier-test.h"
#include "tier/backend-nfs.h"

int main(int argc, char **argv) {
	TestRng rng = { 42 };
	const size_t sizes[] = { 3 * MiB + 17, 2 * MiB, 5 * MiB + 1, 1 };
	uint8_t *data[ELEMENTSOF(sizes)];
	uint64_t ino[ELEMENTSOF(sizes)];
	DedupGcStats gc;
	char path[128];
	Env e = {};

	if (argc != 2) {
		fprintf(stderr, "usage: %s URL\n", argv[0]);
		return 2;
	}
	snprintf(e.dir, sizeof(e.dir), "%s/fratier-nfs-store-XXXXXX", getenv("TMPDIR") ?: "/tmp");
	ASSERT(mkdtemp(e.dir));
	snprintf(path, sizeof(path), "%s/catalog.db", e.dir);
	ASSERT_OK(catalog_open(path, 0, 0, &e.catalog));
	/* Short waits: the dead-server part below waits them out. */
	const TierNfsOptions nfs_opts = { .timeout_ms = 2000, .retries = 1, .connections = 4 };
	int r = tier_backend_nfs_open(argv[1], &nfs_opts, &e.backend);
	if (r < 0)
		fprintf(stderr, "%s\n", tier_backend_nfs_open_error());
	ASSERT_OK(r);
	/* Small containers and sync steps: many objects, appends and COMMITs. */
	e.opts.container_size = 1 * MiB;
	e.opts.sync_bytes = 1 * MiB;
	env_open_store(&e);

	for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
		data[i] = test_malloc(sizes[i]);
		switch (i % 3) {
		case 0:
			test_rng_fill(&rng, data[i], sizes[i]);
			break;
		case 1:
			fill_text(&rng, data[i], sizes[i]);
			break;
		default:
			fill_sparse(&rng, data[i], sizes[i]);
		}
		ino[i] = env_seal(&e, data[i], sizes[i], &rng, NULL);
		env_check_file(&e, ino[i], data[i], sizes[i], &rng);
	}
	/* A second copy of the first file dedups against it, over NFS too. */
	DedupWriterStats st;
	uint64_t dup = env_seal(&e, data[0], sizes[0], &rng, &st);
	ASSERT(st.new_chunks == 0);

	env_reopen_store(&e);
	for (size_t i = 0; i < ELEMENTSOF(sizes); i++)
		env_check_file(&e, ino[i], data[i], sizes[i], &rng);
	env_check_file(&e, dup, data[0], sizes[0], &rng);

	/* Dropping the random files leaves their chunks dead: the collector removes and compacts. */
	env_drop(&e, ino[0]);
	env_drop(&e, dup);
	env_drop(&e, ino[2]);
	DedupGcOptions o = { .live_threshold = 0.9 };
	ASSERT_OK(dedup_store_gc(e.store, &o, &gc));
	ASSERT(gc.chunks_deleted > 0 && gc.bytes_freed > 0 && gc.containers_deleted + gc.containers_compacted > 0);
	env_reopen_store(&e);
	env_check_file(&e, ino[1], data[1], sizes[1], &rng);
	env_check_file(&e, ino[3], data[3], sizes[3], &rng);

	/* Cold caches, then no server. */
	env_reopen_store(&e);
	test_server("kill");
	uint8_t buf[4096];
	ASSERT(dedup_file_read(e.store, ino[1], sizes[1], 0, buf, sizeof(buf)) == -EIO);
	ASSERT(dedup_file_read(e.store, ino[1], sizes[1], sizes[1] / 2, buf, sizeof(buf)) == -EIO);
	test_server("start");
	env_check_file(&e, ino[1], data[1], sizes[1], &rng);
	env_check_file(&e, ino[3], data[3], sizes[3], &rng);

	env_close(&e);
	for (size_t i = 0; i < ELEMENTSOF(sizes); i++)
		free(data[i]);
	printf("ok\n");
	return 0;
}
