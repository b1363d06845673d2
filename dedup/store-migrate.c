/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store-migrate.c — moving a sealed file's chunks from one store (tier) to
 * another: migration to a lower tier and recall to the hot one.
 *
 * The file's bytes are read back through its recipe on the source store
 * (every frame checked, and on lower tiers every content hash) and fed to
 * a writer of the target store chunked with the parameters the recipe
 * records.  Identical bytes cut with identical parameters give identical
 * chunks, so the copy deduplicates against what the target already holds
 * chunk for chunk, and only chunks new to it are gathered into regions,
 * compressed (at the level asked for, which is how cold data gets a higher
 * zstd level: colder means smaller) and stored.
 *
 * Invariants:
 *  1. Nothing of the source is touched until dedup_migration_commit(): the
 *     copy only adds frames and dead chunks (refs 0) to the target, so an
 *     interrupted or abandoned migration leaves the file whole on its
 *     source and at most garbage on the target.
 *  2. The target's frames are durable and registered before commit() can
 *     succeed (the writer's finish()); commit() swaps the recipe and drops
 *     the source references inside the caller's transaction, so a crash
 *     leaves the file entirely on one side.
 *  3. The source's chunks are released by reference counts only: the
 *     collector of the source store reclaims them, and frames other files
 *     still reference stay.
 *
 * States:
 *
 *   dedup_file_migrate() --> copied --dedup_migration_commit()--> (the caller commits)
 *          \                    ^            |
 *           `-- error: nothing  `------------' the caller rolls back: commit() again
 *
 *   dedup_migration_free() from any state.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/macros.h"
#include "dedup/store-internal.h"

/* Bytes read from the source per step (and between progress calls). */
#define MIGRATE_STEP ((size_t) 4 << 20)

struct DedupMigration {
	DedupStore *from, *to;
	uint64_t ino;
	uint64_t logical;
	uint64_t source_stored; /* frame bytes of the file's distinct chunks on `from` */
	uint64_t stored;        /* the same on `to` */
	DedupWriter *writer;
};

DedupMigration *dedup_migration_free(DedupMigration *m) {
	if (!m)
		return NULL;
	dedup_writer_free(m->writer);
	free(m);
	return NULL;
}

DEFINE_CLEANUP_FUNC(DedupMigration, dedup_migration_free);

static int params_of_first(uint64_t start, const void *blob, size_t size, void *userdata) {
	DedupRecipeSegment *seg;
	int r = dedup_recipe_segment_decode(blob, size, &seg);
	if (r < 0)
		return r == -ENOMEM ? r : -EIO;
	*(DedupChunkerParams *) userdata = seg->params;
	free(seg);
	return 0;
}

int dedup_file_migrate(DedupStore *from, DedupStore *to, uint64_t ino, uint64_t file_size, int zstd_level,
		       uint32_t region_size, int spool_fd, int (*progress)(uint64_t done, uint64_t total, void *userdata),
		       void *userdata, DedupMigration **ret) {
	_cleanup_close_ int spool = spool_fd;
	DedupFileUsage u = {};
	DedupChunkerParams params = DEDUP_CHUNKER_PARAMS_DEFAULT;
	int r;

	if (!from || !to || !ret || from == to || from->catalog != to->catalog)
		return -EINVAL;

	/* A file without a recipe (empty) has nothing to copy: the writer stays empty. */
	r = catalog_recipe_find(from->catalog, ino, 0, params_of_first, &params);
	if (r < 0 && r != -ENOENT)
		return r;

	_cleanup_(dedup_migration_freep) DedupMigration *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->from = from;
	m->to = to;
	m->ino = ino;
	m->logical = file_size;
	if (r >= 0) {
		/* What the file takes where it is, for the target's counters (commit()). */
		r = dedup_file_usage(from->catalog, ino, &u);
		if (r < 0)
			return r;
		m->source_stored = u.unique + u.shared;
	}
	r = dedup_writer_new(to, &params, zstd_level, region_size, &m->writer);
	if (r >= 0 && spool >= 0)
		r = dedup_writer_spool(m->writer, TAKE_FD(spool));
	if (r < 0)
		return r;

	_cleanup_free_ uint8_t *buf = malloc(MIGRATE_STEP);
	if (!buf)
		return -ENOMEM;
	for (uint64_t off = 0; off < file_size;) {
		ssize_t n = dedup_file_read(from, ino, file_size, off, buf, MIGRATE_STEP);
		if (n < 0)
			return (int) n;
		if (n == 0)
			return -EIO; /* the recipe ends before file_size */
		r = dedup_writer_feed(m->writer, buf, (size_t) n);
		if (r < 0)
			return r;
		off += (uint64_t) n;
		if (progress) {
			r = progress(off, file_size, userdata);
			if (r < 0)
				return r;
		}
	}
	r = dedup_writer_finish(m->writer);
	if (r >= 0)
		r = store_writer_stored_distinct(m->writer, &m->stored);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(m);
	return 0;
}

int dedup_migration_commit(DedupMigration *m) {
	/* Drop first: the target writer refuses an inode that still has a recipe. */
	int r = dedup_file_drop(m->from, m->ino);
	if (r >= 0)
		r = dedup_writer_commit(m->writer, m->ino);
	if (r >= 0)
		r = catalog_tier_moved_add(m->to->catalog, m->to->tier, m->logical, m->source_stored, m->stored);
	return r;
}

void dedup_migration_stats(const DedupMigration *m, DedupWriterStats *ret) {
	dedup_writer_stats(m->writer, ret);
}
