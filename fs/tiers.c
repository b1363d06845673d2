/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tiers.c — the mount's tiers as the daemon runs them: tier/'s set of
 * tiers and its mover, opened, tried again, described and collected with
 * the daemon's log lines (tier/ logs at debug at most).
 *
 * Invariant (tier/describe.c, 1): fs_tiers_gc() collects a lower tier only
 * right after its description was written, found current, or removed for
 * lack of room.
 */
#include <errno.h>

#include "common/log.h"
#include "fs/fs-internal.h"

int fs_tiers_open(Fs *fs, const DedupStoreOptions *store_opts, bool create) {
	int r = tier_set_open(fs->config, fs->catalog, fs->hot_backend, fs->store, store_opts, create, &fs->tiers);
	if (r < 0)
		return log_oom();
	for (uint32_t n = 1; n < tier_set_count(fs->tiers); n++) {
		const ConfigTier *t = tier_set_config(fs->tiers, n);
		/* Two daemons writing under one name on a shared tier would collect each other's data. */
		if (t && tier_set_refused(fs->tiers, n))
			return log_error_errno(-EBUSY, "shared tier %u (%s, %s) refuses this daemon: %s", (unsigned) n,
					       t->name, t->path, tier_set_error(fs->tiers, n) ?: "its host name is taken");
	}
	if (tier_set_host(fs->tiers))
		log_info("on shared tiers as host '%s'", tier_set_host(fs->tiers));
	for (uint32_t n = 1; n < tier_set_count(fs->tiers); n++) {
		const ConfigTier *t = tier_set_config(fs->tiers, n);
		if (t && !tier_set_store(fs->tiers, n))
			log_warning("tier %u (%s, %s) is not usable: %s; its files read as EIO until it is (tried every %ds)",
				    (unsigned) n, t->name, t->path, tier_set_error(fs->tiers, n) ?: "it cannot be opened",
				    TIER_RETRY_S);
	}
	r = fs_mover_open(fs);
	if (r < 0)
		return log_oom();
	return 0;
}

bool fs_tiers_retry(Fs *fs) {
	uint32_t opened = 0;
	bool missing = tier_set_retry(fs->tiers, &opened);
	for (uint32_t n = 1; n < tier_set_count(fs->tiers); n++) {
		const ConfigTier *t = tier_set_config(fs->tiers, n);
		if (opened & (UINT32_C(1) << n))
			log_info("Tier %u (%s, %s) is usable now: its files read again, moves to it work", (unsigned) n,
				 t->name, t->path);
	}
	return missing;
}

void fs_tiers_renew(Fs *fs) {
	uint32_t lost = 0;
	int r = tier_set_renew(fs->tiers, &lost);
	for (uint32_t n = 1; n < tier_set_count(fs->tiers); n++)
		if (lost & (UINT32_C(1) << n))
			log_error("shared tier %u (%s): host name '%s' is no longer this daemon's (its lease ran out and "
				  "another daemon took it, or it was retired): this daemon writes nothing more to that tier "
				  "(its files there still read); stop this daemon",
				  (unsigned) n, tier_set_config(fs->tiers, n)->name, tier_set_host(fs->tiers));
	if (r < 0 && !lost)
		log_warning_errno(r, "Failed to renew the lease of host '%s' on a shared tier (tried again in %ds): %m",
				  tier_set_host(fs->tiers), TIER_RETRY_S);
}

void fs_tiers_close(Fs *fs) {
	if (!fs->tiers)
		return;
	/* What changed since the last collection: recovery from a tier then finds the mount as it was left. */
	(void) fs_tiers_describe(fs);
	fs->mover = tier_mover_free(fs->mover);
	fs->tiers = tier_set_free(fs->tiers);
}

int fs_tier_describe(Fs *fs, uint32_t n) {
	int r = tier_set_describe(fs->tiers, n);
	if (r == 1) {
		log_warning("tier %u (%s) is too full for its description: removed until there is room again, "
			    "recovery from it is not possible meanwhile",
			    (unsigned) n, tier_set_config(fs->tiers, n)->name);
		r = 0;
	}
	return r;
}

int fs_tiers_describe(Fs *fs) {
	int first = 0;
	for (uint32_t n = 1; n < tier_set_count(fs->tiers); n++) {
		if (!tier_set_store(fs->tiers, n) || tier_set_fenced(fs->tiers, n))
			continue;
		int r = fs_tier_describe(fs, n);
		if (r < 0) {
			log_warning_errno(r, "Failed to describe tier %u (%s) for disaster recovery; its collection waits "
					     "until it is: %m",
					  (unsigned) n, tier_set_config(fs->tiers, n)->name);
			if (first == 0)
				first = r;
		}
	}
	return first;
}

int fs_tiers_gc(Fs *fs, const DedupGcOptions *o, DedupGcStats *ret, uint32_t *ret_failed) {
	DedupGcStats sum = {};
	int first = 0;
	for (uint32_t n = 0; n < tier_set_count(fs->tiers); n++) {
		DedupGcStats st = {};
		DedupStore *store = tier_set_store(fs->tiers, n);
		/* A fenced shared tier: its objects are no longer this daemon's to delete. */
		if (!store || tier_set_fenced(fs->tiers, n))
			continue;
		/* No collection of a lower tier without its current description (see the top). */
		int r = n > 0 ? fs_tier_describe(fs, n) : 0;
		if (r >= 0)
			r = dedup_store_gc(store, o, &st);
		if (r < 0 && first == 0) {
			first = r;
			if (ret_failed)
				*ret_failed = n;
		}
		sum.chunks_deleted += st.chunks_deleted;
		sum.containers_deleted += st.containers_deleted;
		sum.containers_compacted += st.containers_compacted;
		sum.regions_rewritten += st.regions_rewritten;
		sum.bytes_copied += st.bytes_copied;
		sum.bytes_freed += st.bytes_freed;
		sum.orphans_deleted += st.orphans_deleted;
		sum.containers_skipped += st.containers_skipped;
		sum.containers_condemned += st.containers_condemned;
		sum.containers_waiting += st.containers_waiting;
		if (r == -ECANCELED)
			break; /* asked to stop: the other tiers too */
	}
	if (ret)
		*ret = sum;
	return first;
}
