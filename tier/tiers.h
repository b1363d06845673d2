/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The mount's tiers (tiers.c): tier 0 is the hot one, the others follow in
 * the config's order, each a dedup domain of its own (a store over its
 * backend: a directory, or an NFS export).  A lower tier that cannot be
 * opened does not stop the mount: its store stays NULL, its error says
 * why, and tier_set_retry() tries it again.
 *
 * Threads: the accessors may be called from any thread.  A store and its
 * backend are published once (backend first, then store, with release
 * order) and never change again until tier_set_free(): whoever reads a
 * non-NULL store may use the backend and the store until then.
 */

#include <stdbool.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "common/config.h"
#include "dedup/backend.h"
#include "dedup/store.h"
#include "tier/shared.h"

/* How often the daemon tries again a lower tier that could not be opened. */
#define TIER_RETRY_S 10

typedef struct TierSet TierSet;

/*
 * Opens every tier config names.  Tier 0's backend and store are the
 * caller's (hot_backend, hot_store: borrowed, and outliving the set).  A
 * lower tier that cannot be opened is kept with its error
 * (tier_set_error()); create: make the tiers' directories (the embedded
 * default).  The lower tiers' stores are opened with store_opts (copied;
 * NULL: the store's defaults), now and by tier_set_retry().  Returns 0, or
 * -ENOMEM (nothing is left open).  config and catalog are borrowed and must
 * outlive the set.
 */
int tier_set_open(const Config *config, Catalog *catalog, DedupBackend *hot_backend, DedupStore *hot_store,
		  const DedupStoreOptions *store_opts, bool create, TierSet **ret);
/* Closes the lower tiers' stores and backends.  Accepts NULL; returns NULL. */
TierSet *tier_set_free(TierSet *s);

/* Tiers in the set (0 for NULL). */
uint32_t tier_set_count(const TierSet *s);
/* The config of tier n, or NULL (no such tier, or s NULL). */
const ConfigTier *tier_set_config(const TierSet *s, uint32_t n);
/* The open store of tier n, or NULL (no such tier, or not reachable). */
DedupStore *tier_set_store(const TierSet *s, uint32_t n);
/* Its backend, or NULL: like the store. */
DedupBackend *tier_set_backend(const TierSet *s, uint32_t n);
/*
 * The storage of tier n as a whole, or NULL like the store: the backend
 * itself, but for a shared tier, whose backend shows only this host's part
 * of it (tier/shared.h).  For what concerns the connection or the disk
 * (NFS statistics), never for objects.
 */
DedupBackend *tier_set_root(const TierSet *s, uint32_t n);
/* Why tier n could not be opened, while its store is NULL (NULL: unknown); valid until tier_set_free(). */
const char *tier_set_error(const TierSet *s, uint32_t n);

/*
 * Opens the lower tiers that could not be opened so far.  *ret_opened gets
 * a bit per tier that opened now (1 << n).  Returns true while some still
 * cannot.  One caller at a time (the daemon's collector thread).
 */
bool tier_set_retry(TierSet *s, uint32_t *ret_opened);

/*
 * Whether shared tier n refused this daemon's host name at open (another
 * live daemon holds it, or it was retired): the daemon must not run.
 * tier_set_error() says why.
 */
bool tier_set_refused(const TierSet *s, uint32_t n);
/* This daemon's name on its shared tiers, or NULL (no tier is shared). */
const char *tier_set_host(const TierSet *s);
/*
 * Renews this host's lease on every open shared tier (tier/shared.h); the
 * daemon calls it every tier_set_renew_interval(), well within the lease.
 * Once a lease period it also publishes this host's summary there
 * (tier_shared_summary_put(): its files, logical and stored bytes on the
 * tier, counted through a catalog reader of its own).  *ret_lost gets a
 * bit per tier whose name is no longer this daemon's (taken over after the
 * lease ran out, or retired).  Returns 0 or the first error.  One caller
 * at a time.
 */
int tier_set_renew(TierSet *s, uint32_t *ret_lost);
/*
 * Whether shared tier n is fenced: a renewal found this daemon's name there
 * retired or taken over, so nothing of this daemon may write to it any more
 * (moves to it, its description, its collection, the lease and summary);
 * its files still read.  Once set, for the life of the set.
 */
bool tier_set_fenced(const TierSet *s, uint32_t n);
/* Seconds between two renewals: tier_shared_renew_interval() of the configured lease. */
uint64_t tier_set_renew_interval(const TierSet *s);

/*
 * The other hosts of shared tier n, through its root (tier/shared.h); each
 * returns -ENXIO for a tier that is not shared or not open.
 *   tier_set_hosts():       every host record, as tier_shared_hosts_list()
 *   tier_set_host_record(): one host's record, as tier_shared_read_host()
 *   tier_set_retire():      retires host, written by this daemon's instance, as tier_shared_retire()
 *   tier_set_usage():       what each host keeps there, by listing, as tier_shared_usage()
 *   tier_set_summary():     a host's published summary, as tier_shared_summary_get()
 * Any thread; they only read the set.
 */
int tier_set_hosts(const TierSet *s, uint32_t n, uint64_t now, TierSharedHost **ret, size_t *ret_n);
int tier_set_host_record(const TierSet *s, uint32_t n, const char *host, TierHostRecord *ret);
int tier_set_retire(const TierSet *s, uint32_t n, const char *host, bool force, TierHostRecord *ret_before);
int tier_set_usage(const TierSet *s, uint32_t n, TierSharedUsage **ret, size_t *ret_n);
int tier_set_summary(const TierSet *s, uint32_t n, const char *host, TierHostSummary *ret);

/*
 * Rewrites the description of lower tier n (dedup/describe.h: every file
 * sealed there, with its path, attributes and recipe) if what it would list
 * changed since the last one written (describe.c).  Call it after moves
 * and before every collection of the tier: the collector must never take
 * chunks that the current description still needs.  Returns 0 (written, or
 * current already), 1 (the tier is too full to hold one: the old one was
 * removed, recovery from it is impossible until the next one), -ENXIO (the
 * tier is not open), or the error that kept it from being written.
 */
int tier_set_describe(TierSet *s, uint32_t n);
/* Makes the next tier_set_describe() of tier n write the description even if what it lists is the same. */
void tier_set_describe_again(TierSet *s, uint32_t n);
/*
 * Checks that the description on lower tier n is the one the catalog
 * recorded last (a generation authenticated with a sealed description's
 * contents; tier_set_describe() records it once the description is
 * durable).  *ret_found gets the generation of the one found (0: none or
 * unreadable), *ret_recorded the catalog's.  Returns: 0 (the same or
 * newer, or none recorded), -ESTALE (older than recorded, or found where
 * the last one was removed: an older copy put back), -ENOENT (missing),
 * -EBADMSG (damaged, changed, another key's, or another tier's), -ENOKEY,
 * -ENXIO (the tier is not open), or another error reading it.
 */
int tier_set_description_check(TierSet *s, uint32_t n, uint64_t *ret_found, uint64_t *ret_recorded);

/*
 * Opens the storage of a lower tier named by spec, as a tier's `path` in the
 * config: a directory (its objects in DIR/containers) or nfs://host/export/path,
 * for reading only (nothing is created).  *ret_error (free it) may get a
 * reason to show.
 */
int tier_open_source(const char *spec, DedupBackend **ret, char **ret_error);
