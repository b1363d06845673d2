/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tiers.c — the mount's tiers: their backends and chunk stores.
 *
 * Tier 0 is the hot tier (its backend and store opened by the daemon with
 * the catalog, and lent to the set); the others follow in the config's
 * order, each with a store of its own over its backend: a directory (its
 * containers in PATH/containers) or an NFS export (containers at its root).
 * A lower tier that cannot be opened at start does not stop the mount: its
 * files read as EIO, unlink and truncate of them still work (they touch
 * only the catalog), status says why, and the daemon tries it again every
 * TIER_RETRY_S until it opens (a filer that was down at boot comes back
 * without a remount).
 *
 * The moves between tiers are move.c's; the tiers' descriptions of
 * themselves, describe.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/macros.h"
#include "tier/backend-dir.h"
#include "tier/backend-nfs.h"
#include "tier/tiers-internal.h"

#define TIER_CONTAINERS_DIR "containers"

uint32_t tier_set_count(const TierSet *s) {
	return s ? s->n_tiers : 0;
}

const ConfigTier *tier_set_config(const TierSet *s, uint32_t n) {
	return s && n < s->n_tiers ? s->tiers[n].config : NULL;
}

DedupStore *tier_set_store(const TierSet *s, uint32_t n) {
	return s && n < s->n_tiers ? atomic_load_explicit(&s->tiers[n].store, memory_order_acquire) : NULL;
}

DedupBackend *tier_set_backend(const TierSet *s, uint32_t n) {
	return tier_set_store(s, n) ? s->tiers[n].backend : NULL;
}

const char *tier_set_error(const TierSet *s, uint32_t n) {
	return s && n < s->n_tiers && !tier_set_store(s, n) ? s->tiers[n].error : NULL;
}

/*
 * A tier's storage: an NFS export (nfs_options: its bounded wait, NULL for
 * the default), or a directory with its objects in PATH/containers.
 * create: make PATH (the embedded default's tiers); existing: open only
 * what is there (a tier read for recovery is never written to by opening it).
 */
static int open_backend(TierBackend backend, const char *path, const TierNfsOptions *nfs_options, bool create,
			bool existing, DedupBackend **ret, char **ret_error) {
	int r;

	if (backend == TIER_BACKEND_NFS) {
		r = tier_backend_nfs_open(path, nfs_options, ret);
		if (r < 0 && asprintf(ret_error, "%s", tier_backend_nfs_open_error() ?: strerror(-r)) < 0)
			*ret_error = NULL;
		return r;
	}
	_cleanup_free_ char *containers = NULL;
	if (asprintf(&containers, "%s/%s", path, TIER_CONTAINERS_DIR) < 0)
		return -ENOMEM;
	/* Only the embedded default makes its tier's directory: a configured one is a disk that must be there. */
	if (create && mkdir(path, 0755) < 0 && errno != EEXIST)
		r = -errno;
	else if (!existing && mkdir(containers, 0700) < 0 && errno != EEXIST)
		r = -errno;
	else
		r = tier_backend_dir_open(containers, ret);
	/* ENOENT here means the tier's own directory is missing (a disk not mounted): name that one. */
	if (r < 0 && asprintf(ret_error, "%s: %s", r == -ENOENT && !existing ? path : containers, strerror(-r)) < 0)
		*ret_error = NULL;
	return r;
}

static int tier_open_backend(const ConfigTier *t, bool create, DedupBackend **ret, char **ret_error) {
	TierNfsOptions o = TIER_NFS_OPTIONS_DEFAULT;
	if (t->nfs_timeout)
		o.timeout_ms = t->nfs_timeout * 1000;
	if (t->has_nfs_retries)
		o.retries = t->nfs_retries;
	return open_backend(t->backend, t->path, &o, create, false, ret, ret_error);
}

int tier_open_source(const char *spec, DedupBackend **ret, char **ret_error) {
	bool nfs = strncmp(spec, "nfs://", 6) == 0;
	return open_backend(nfs ? TIER_BACKEND_NFS : TIER_BACKEND_DIR, spec, NULL, false, true, ret, ret_error);
}

int tier_set_open(const Config *config, Catalog *catalog, DedupBackend *hot_backend, DedupStore *hot_store,
		  const DedupStoreOptions *store_opts, bool create, TierSet **ret) {
	TierSet *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->config = config;
	s->catalog = catalog;
	if (store_opts)
		s->store_opts = *store_opts;
	s->tiers[0] = (TierSlot) { .config = config_tier_by_number(config, 0), .backend = hot_backend, .store = hot_store };
	s->n_tiers = 1;
	pthread_mutex_init(&s->describe_lock, NULL);

	for (uint32_t n = 1; n < config->n_tiers && n < CONFIG_TIERS_MAX; n++) {
		TierSlot *t = &s->tiers[n];
		*t = (TierSlot) { .config = config_tier_by_number(config, n) };
		s->n_tiers = n + 1;
		if (!t->config)
			break;
		DedupStore *store = NULL;
		int r = tier_open_backend(t->config, create, &t->backend, &t->error);
		if (r >= 0) {
			r = dedup_store_open(catalog, n, t->backend, &s->store_opts, &store);
			atomic_store(&t->store, store);
			if (r < 0) {
				t->backend = dedup_backend_free(t->backend);
				if (asprintf(&t->error, "cannot open its chunk store: %s", strerror(-r)) < 0)
					t->error = NULL;
			}
		}
		if (r == -ENOMEM) {
			tier_set_free(s);
			return r;
		}
	}
	*ret = s;
	return 0;
}

bool tier_set_retry(TierSet *s, uint32_t *ret_opened) {
	bool missing = false;
	uint32_t opened = 0;
	for (uint32_t n = 1; n < s->n_tiers; n++) {
		TierSlot *t = &s->tiers[n];
		if (!t->config || atomic_load(&t->store))
			continue;
		DedupBackend *backend = NULL;
		DedupStore *store = NULL;
		_cleanup_free_ char *error = NULL;
		int r = tier_open_backend(t->config, false, &backend, &error);
		if (r >= 0) {
			r = dedup_store_open(s->catalog, n, backend, &s->store_opts, &store);
			if (r < 0)
				backend = dedup_backend_free(backend);
		}
		if (r < 0) {
			log_debug_errno(r, "tier %u (%s) still not usable: %s", (unsigned) n, t->config->name,
					error ?: strerror(-r));
			missing = true;
			continue;
		}
		t->backend = backend;
		atomic_store_explicit(&t->store, store, memory_order_release);
		opened |= UINT32_C(1) << n;
	}
	*ret_opened = opened;
	return missing;
}

TierSet *tier_set_free(TierSet *s) {
	if (!s)
		return NULL;
	/* Tier 0 belongs to the caller. */
	for (uint32_t n = 1; n < s->n_tiers; n++) {
		TierSlot *t = &s->tiers[n];
		t->store = dedup_store_free(t->store);
		t->backend = dedup_backend_free(t->backend);
		free(t->error);
	}
	pthread_mutex_destroy(&s->describe_lock);
	free(s);
	return NULL;
}
