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
#include <time.h>

#include "common/array.h"
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

DedupBackend *tier_set_root(const TierSet *s, uint32_t n) {
	if (!tier_set_store(s, n))
		return NULL;
	return s->tiers[n].root ?: s->tiers[n].backend;
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

/*
 * A shared tier's storage as this host sees it (docs/SHARED.md): the host
 * registers its name on the tier's root first, and its store then works
 * below h/HOST only.  *ret_root gets the root (owned by *ret).  *ret_refused:
 * the tier holds the name for another live daemon, or retired it.
 */
static int stop_at_first(const char *name, void *userdata) {
	(void) name;
	(void) userdata;
	return -EEXIST;
}

static int shared_open(TierSet *s, const ConfigTier *t, bool create, DedupBackend **ret, DedupBackend **ret_root,
		       bool *ret_refused, char **ret_error) {
	DedupBackend *root = NULL;
	char prefix[2 + CONFIG_HOST_NAME_MAX + 1];

	*ret_refused = false;
	if (s->instance_error < 0) {
		if (asprintf(ret_error, "cannot read or make this daemon's instance (%s/shared-instance): %s",
			     s->config->data_dir, strerror(-s->instance_error)) < 0)
			*ret_error = NULL;
		return s->instance_error;
	}
	int r = tier_open_backend(t, create, &root, ret_error);
	if (r < 0)
		return r;
	/*
	 * Containers at the root are a store of one host's own (the tier was
	 * used before shared = yes): their files would read as EIO through
	 * h/HOST, so the tier is refused rather than quietly emptied.
	 */
	r = dedup_backend_list(root, "c", stop_at_first, NULL);
	if (r == -EEXIST) {
		*ret_refused = true;
		if (asprintf(ret_error, "it holds the containers of a tier that is not shared (%s/c): shared = yes "
					"takes a new, empty tier", t->backend == TIER_BACKEND_NFS ? t->path : "containers") < 0)
			*ret_error = NULL;
		dedup_backend_free(root);
		return r;
	}
	if (r < 0) {
		dedup_backend_free(root);
		return r;
	}
	r = tier_shared_register(root, s->host, s->instance, (uint64_t) time(NULL), s->lease_s, ret_error);
	if (r < 0) {
		*ret_refused = r == -EBUSY || r == -EPERM || r == -EBADMSG;
		if (!*ret_error && asprintf(ret_error, "cannot register host '%s' there: %s", s->host, strerror(-r)) < 0)
			*ret_error = NULL;
		dedup_backend_free(root);
		return r;
	}
	snprintf(prefix, sizeof(prefix), "h/%s", s->host);
	r = tier_backend_prefix_new(root, prefix, ret);
	if (r < 0)
		return r;
	*ret_root = root;
	return 0;
}

static int slot_open_backend(TierSet *s, TierSlot *t, bool create, DedupBackend **ret, char **ret_error) {
	if (!t->config->shared)
		return tier_open_backend(t->config, create, ret, ret_error);
	return shared_open(s, t->config, create, ret, &t->root, &t->refused, ret_error);
}

int tier_open_source(const char *spec, DedupBackend **ret, char **ret_error) {
	bool nfs = strncmp(spec, "nfs://", 6) == 0;
	return open_backend(nfs ? TIER_BACKEND_NFS : TIER_BACKEND_DIR, spec, NULL, false, true, ret, ret_error);
}

/*
 * The stores' options for slot t: whether it seals what it stores is the
 * tier's own choice; a shared tier's store does global dedup over root
 * (docs/SHARED.md).
 */
static DedupStoreOptions tier_store_options(TierSet *s, TierSlot *t, DedupBackend *root) {
	DedupStoreOptions o = s->store_opts;
	o.encrypt = config_tier_encrypts(t->config, o.content_key != NULL);
	if (t->config->shared && root) {
		t->shared = (DedupShared) {
			.host = s->host,
			.root = root,
			.object_name = tier_shared_object_name,
			.hosts = tier_shared_hosts,
			.holders = tier_shared_holders,
			.lease_s = s->lease_s,
		};
		o.shared = &t->shared;
	}
	return o;
}

int tier_set_open(const Config *config, Catalog *catalog, DedupBackend *hot_backend, DedupStore *hot_store,
		  const DedupStoreOptions *store_opts, bool create, TierSet **ret) {
	TierSet *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->config = config;
	s->catalog = catalog;
	s->lease_s = config->shared_lease ?: TIER_SHARED_LEASE_S;
	if (store_opts)
		s->store_opts = *store_opts;
	s->tiers[0] = (TierSlot) { .config = config_tier_by_number(config, 0), .backend = hot_backend, .store = hot_store };
	s->n_tiers = 1;
	pthread_mutex_init(&s->describe_lock, NULL);
	for (uint32_t n = 1; n < config->n_tiers && n < CONFIG_TIERS_MAX; n++) {
		const ConfigTier *t = config_tier_by_number(config, n);
		if (!t || !t->shared || s->host[0])
			continue;
		if (config->host)
			snprintf(s->host, sizeof(s->host), "%s", config->host);
		else if (tier_shared_default_host(s->host) < 0)
			snprintf(s->host, sizeof(s->host), "localhost");
		s->instance_error = tier_shared_instance(config->data_dir, s->instance);
	}

	for (uint32_t n = 1; n < config->n_tiers && n < CONFIG_TIERS_MAX; n++) {
		TierSlot *t = &s->tiers[n];
		*t = (TierSlot) { .config = config_tier_by_number(config, n) };
		s->n_tiers = n + 1;
		if (!t->config)
			break;
		DedupStore *store = NULL;
		int r = slot_open_backend(s, t, create, &t->backend, &t->error);
		if (r >= 0) {
			DedupStoreOptions o = tier_store_options(s, t, t->root);
			r = dedup_store_open(catalog, n, t->backend, &o, &store);
			atomic_store(&t->store, store);
			if (r < 0) {
				t->backend = dedup_backend_free(t->backend);
				t->root = NULL;
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
		if (!t->config || atomic_load(&t->store) || t->refused)
			continue;
		DedupBackend *backend = NULL, *root = NULL;
		DedupStore *store = NULL;
		_cleanup_free_ char *error = NULL;
		bool refused = false;
		int r = t->config->shared ? shared_open(s, t->config, false, &backend, &root, &refused, &error)
					  : tier_open_backend(t->config, false, &backend, &error);
		if (r >= 0) {
			DedupStoreOptions o = tier_store_options(s, t, root);
			r = dedup_store_open(s->catalog, n, backend, &o, &store);
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
		t->root = root;
		atomic_store_explicit(&t->store, store, memory_order_release);
		opened |= UINT32_C(1) << n;
	}
	*ret_opened = opened;
	return missing;
}

bool tier_set_refused(const TierSet *s, uint32_t n) {
	return s && n < s->n_tiers && s->tiers[n].refused;
}

const char *tier_set_host(const TierSet *s) {
	return s && s->host[0] ? s->host : NULL;
}

bool tier_set_fenced(const TierSet *s, uint32_t n) {
	return s && n < s->n_tiers && atomic_load(&s->tiers[n].fenced);
}

uint64_t tier_set_renew_interval(const TierSet *s) {
	return tier_shared_renew_interval(s->lease_s);
}

typedef struct SummarySums {
	uint32_t tier;
	TierHostSummary *summary;
	uint64_t *foreign; /* the tier's foreign containers (rows of other hosts' containers) */
	size_t n_foreign, cap_foreign;
} SummarySums;

static int summary_add_file(const CatalogInode *ci, void *userdata) {
	SummarySums *u = userdata;
	if (ci->tier == u->tier) {
		u->summary->files++;
		u->summary->logical += ci->size;
	}
	return 0;
}

static int summary_add_container(const CatalogContainer *ct, void *userdata) {
	((SummarySums *) userdata)->summary->stored += ct->size;
	return 0;
}

static int summary_add_foreign_container(uint64_t id, const char *host, uint64_t remote, void *userdata) {
	SummarySums *u = userdata;
	(void) host;
	(void) remote;
	if (ARRAY_RESERVE_ONE(u->foreign, u->cap_foreign, u->n_foreign, 64) < 0)
		return -ENOMEM;
	u->foreign[u->n_foreign++] = id;
	return 0;
}

/* refs counts every occurrence in every recipe: refs x plain size is the logical bytes read through the chunk. */
static int summary_add_foreign_chunk(const CatalogChunk *ch, void *userdata) {
	TierHostSummary *sum = ((SummarySums *) userdata)->summary;
	if (ch->refs > 0) {
		sum->foreign_logical += ch->refs * ch->plain_size;
		sum->foreign_stored += ch->frame_size;
	}
	return 0;
}

/*
 * This host's summary of shared tier n, counted through the renewal's own
 * catalog reader (never the daemon's catalog lock) and published on the
 * host's view of the tier.
 */
static int summary_publish(TierSet *s, uint32_t n, uint64_t now) {
	TierHostSummary sum = { .updated = now, .has_foreign = true };
	SummarySums u = { .tier = n, .summary = &sum };
	snprintf(sum.host, sizeof(sum.host), "%s", s->host);
	if (!s->summary_reader) {
		int r = catalog_open_reader(s->catalog, &s->summary_reader);
		if (r < 0)
			return r;
	}
	int r = catalog_files_foreach(s->summary_reader, summary_add_file, &u);
	if (r >= 0)
		r = catalog_containers_foreach(s->summary_reader, n, summary_add_container, &u);
	/* Ids first: a visit's callback may not call into the catalog. */
	if (r >= 0)
		r = catalog_containers_foreach_foreign(s->summary_reader, n, summary_add_foreign_container, &u);
	for (size_t i = 0; r >= 0 && i < u.n_foreign; i++)
		r = catalog_chunks_foreach_in_container(s->summary_reader, u.foreign[i], summary_add_foreign_chunk, &u);
	free(u.foreign);
	if (r >= 0)
		r = tier_shared_summary_put(s->tiers[n].backend, &sum);
	return r;
}

int tier_set_renew(TierSet *s, uint32_t *ret_lost) {
	int first = 0;
	uint32_t lost = 0;
	for (uint32_t n = 1; n < s->n_tiers; n++) {
		TierSlot *t = &s->tiers[n];
		if (!t->config || !t->config->shared || !tier_set_store(s, n) || atomic_load(&t->fenced))
			continue;
		uint64_t now = (uint64_t) time(NULL);
		int r = tier_shared_renew(t->root, s->host, s->instance, now, s->lease_s);
		if (r == -EBUSY || r == -EPERM) {
			/* The name is another's now, or nobody's for good: stop writing under it at once. */
			atomic_store(&t->fenced, true);
			lost |= UINT32_C(1) << n;
		}
		/* Global dedup: a publication that failed after a writer's finish is tried again, after the renewal. */
		if (r >= 0)
			(void) dedup_store_publish(tier_set_store(s, n));
		/* Once a lease period, while the name is this daemon's: the others' reports read it. */
		if (r >= 0 && now >= t->summary_due) {
			r = summary_publish(s, n, now);
			if (r >= 0)
				t->summary_due = now + s->lease_s;
		}
		if (r < 0 && first == 0)
			first = r;
	}
	*ret_lost = lost;
	return first;
}

static DedupBackend *shared_root(const TierSet *s, uint32_t n) {
	if (!s || n >= s->n_tiers || !s->tiers[n].config || !s->tiers[n].config->shared || !tier_set_store(s, n))
		return NULL;
	return s->tiers[n].root;
}

int tier_set_hosts(const TierSet *s, uint32_t n, uint64_t now, TierSharedHost **ret, size_t *ret_n) {
	DedupBackend *root = shared_root(s, n);
	return root ? tier_shared_hosts_list(root, now, ret, ret_n) : -ENXIO;
}

int tier_set_retire(const TierSet *s, uint32_t n, const char *host, bool force, TierHostRecord *ret_before) {
	DedupBackend *root = shared_root(s, n);
	if (!root)
		return -ENXIO;
	return tier_shared_retire(root, host, s->instance, (uint64_t) time(NULL), force, ret_before);
}

int tier_set_host_record(const TierSet *s, uint32_t n, const char *host, TierHostRecord *ret) {
	DedupBackend *root = shared_root(s, n);
	return root ? tier_shared_read_host(root, host, ret) : -ENXIO;
}

int tier_set_usage(const TierSet *s, uint32_t n, TierSharedUsage **ret, size_t *ret_n) {
	DedupBackend *root = shared_root(s, n);
	return root ? tier_shared_usage(&s->tiers[n].shared, ret, ret_n) : -ENXIO;
}

int tier_set_summary(const TierSet *s, uint32_t n, const char *host, TierHostSummary *ret) {
	DedupBackend *root = shared_root(s, n);
	return root ? tier_shared_summary_get(root, host, ret) : -ENXIO;
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
	s->summary_reader = catalog_close(s->summary_reader);
	pthread_mutex_destroy(&s->describe_lock);
	free(s);
	return NULL;
}
