/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once
/* private to tier/: do not include outside tier/ */

#include <pthread.h>
#include <stdatomic.h>

#include "tier/shared.h"
#include "tier/tiers.h"

/*
 * One tier.  config is set at open; backend, then store, are published
 * once (see tier/tiers.h) and error describes why they are not, meanwhile.
 */
typedef struct TierSlot {
	const ConfigTier *config;
	DedupBackend *backend;    /* NULL until the store is open; read only after a non-NULL store */
	_Atomic(DedupStore *) store; /* NULL: not reachable (yet) */
	char *error;              /* why it could not be opened, while store is NULL (retry's thread only) */
	/* Shared tiers: the tier's root, which backend shows "h/HOST" of (owned by backend; tier/shared.h). */
	DedupBackend *root;
	bool refused;             /* shared: the tier refused this host's name (set once, at open) */
	DedupShared shared;       /* shared: what its store's global dedup uses of the tier (root, names, hosts) */
	/*
	 * Shared: set once a renewal found the name no longer this daemon's
	 * (retired, or taken over): from then on nothing of this daemon writes
	 * to the tier (tier_set_fenced()).
	 */
	atomic_bool fenced;
	/* Shared: when this host's summary is due next (wall-clock seconds; renewal's thread only). */
	uint64_t summary_due;
	/*
	 * Fingerprint of what the tier's description lists, 0 = unknown (not
	 * written since the open, or a file was left out): protected by
	 * TierSet.describe_lock.
	 */
	uint64_t described;
} TierSlot;

struct TierSet {
	const Config *config;
	Catalog *catalog;
	DedupStoreOptions store_opts; /* the lower tiers' (all 0: the store's defaults) */
	TierSlot tiers[CONFIG_TIERS_MAX];
	uint32_t n_tiers;
	/* One description written at a time; taken with no other lock held (see fs/fs-internal.h). */
	pthread_mutex_t describe_lock;
	/* Shared tiers: this daemon's name and instance there (tier/shared.h); host[0] = '\0': none shared. */
	char host[CONFIG_HOST_NAME_MAX + 1];
	uint8_t instance[TIER_HOST_INSTANCE_SIZE];
	int instance_error;       /* why the instance could not be read or made, or 0 */
	uint64_t lease_s;         /* how long a lease lasts past a renewal (config's shared_lease) */
	Catalog *summary_reader;  /* renewal's own catalog reader for the summaries, opened at the first (its thread only) */
};
