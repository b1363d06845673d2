/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * history.c — usage over time, for the charts of tierctl report --html.
 *
 * The control socket's listener records one sample at mount and then every
 * history_interval: per tier, how full its filesystem is and what fratier
 * keeps there (files, logical and stored bytes); per file class, its files
 * and logical bytes, in all and on the hot tier.  Samples older than
 * CONTROL_HISTORY_KEEP_DAYS are forgotten as new ones come.
 *
 * Why in the catalog and not a log file: a sample is a handful of rows in one
 * transaction, it survives crashes and moves with the catalog, and the report
 * reads it on its own read-only connection like everything else it shows.
 * Why sampled and not derived from file times: a report can rebuild what
 * exists, never what was deleted or moved since, and the hot tier's past
 * fill is exactly what a DBA sizing the recovery area asks for.
 *
 * Every figure is counted as tierctl df counts it (a raw file by its
 * staging file), from the catalog through the listener's reader, and the
 * tiers' statfs through their backends (an NFS tier answers within its
 * bounded wait, or is recorded as unreachable: capacity 0).
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "control/control-internal.h"

typedef struct Totals {
	Fs *fs;
	CatalogHistoryTier tiers[CONFIG_TIERS_MAX];
	CatalogHistoryClass classes[_TIER_CLASS_MAX];
} Totals;

/* As tierctl df counts: a raw file by its staging file (size, and blocks as stored bytes). */
static int add_file(const CatalogInode *ci, void *userdata) {
	Totals *t = userdata;
	uint64_t size = ci->size;
	if (ci->state != CATALOG_FILE_SEALED) {
		struct stat st;
		/* One that cannot be stat'ed counts as empty, as getattr would fail it. */
		if (fs_staging_stat(t->fs, ci->tier, ci->ino, &st) < 0)
			memset(&st, 0, sizeof(st));
		size = (uint64_t) st.st_size;
		if (ci->tier < CONFIG_TIERS_MAX)
			t->tiers[ci->tier].stored += (uint64_t) st.st_blocks * 512;
	}
	if (ci->tier < CONFIG_TIERS_MAX) {
		t->tiers[ci->tier].files++;
		t->tiers[ci->tier].logical += size;
	}
	if (ci->file_class < _TIER_CLASS_MAX) {
		CatalogHistoryClass *h = &t->classes[ci->file_class];
		h->files++;
		h->logical += size;
		if (ci->tier == 0)
			h->hot_logical += size;
	}
	return 0;
}

static int add_container(const CatalogContainer *ct, void *userdata) {
	*(uint64_t *) userdata += ct->size;
	return 0;
}

int control_history_record(Fs *fs, Catalog *reader) {
	Totals t = { .fs = fs };
	int64_t now = (int64_t) time(NULL);

	int r = catalog_files_foreach(reader, add_file, &t);
	if (r < 0)
		return r;
	uint32_t n_tiers = tier_set_count(fs_tiers(fs));
	for (uint32_t n = 0; n < n_tiers; n++) {
		CatalogHistoryTier *h = &t.tiers[n];
		DedupBackend *backend = tier_set_backend(fs_tiers(fs), n);
		DedupBackendStatfs sf;
		h->t = now;
		h->tier = n;
		r = catalog_containers_foreach(reader, n, add_container, &h->stored);
		if (r < 0)
			return r;
		if (backend && dedup_backend_statfs(backend, &sf) >= 0) {
			h->capacity = sf.total;
			h->used = sf.total - MIN(sf.avail, sf.total);
		}
	}
	for (uint32_t k = 0; k < _TIER_CLASS_MAX; k++) {
		t.classes[k].t = now;
		t.classes[k].file_class = k;
	}
	return catalog_history_add(fs_catalog(fs), t.tiers, n_tiers, t.classes, _TIER_CLASS_MAX,
				   now - (int64_t) CONTROL_HISTORY_KEEP_DAYS * 86400);
}
