/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * daemon.c — fs/'s face toward the rest of the daemon (fs/daemon.h): the
 * parts of Fs that control/ may read, without seeing Fs itself.
 */
#include "fs/fs-internal.h"

const Config *fs_config(const Fs *fs) {
	return fs->config;
}

Catalog *fs_catalog(const Fs *fs) {
	return fs->catalog;
}

TierSet *fs_tiers(const Fs *fs) {
	return fs->tiers;
}

TierMover *fs_mover(const Fs *fs) {
	return fs->mover;
}

FsThrottle *fs_throttle(Fs *fs) {
	return &fs->throttle;
}

bool fs_tier_encrypts(const Fs *fs, uint32_t n) {
	const ConfigTier *t = tier_set_config(fs->tiers, n);
	return t && config_tier_encrypts(t, fs->keys != NULL);
}

void fs_settings_get(const Fs *fs, FsSettings *ret) {
	*ret = (FsSettings) {
		.mountpoint = fs->mountpoint,
		.seal_delay_s = fs->seal_delay_s,
		.gc_interval_s = fs->gc_interval_s,
		.policy_interval_s = fs->policy_interval_s,
	};
}

void fs_restore_status_get(Fs *fs, FsRestoreStatus *ret) {
	if (fs->readahead)
		fs_readahead_stats(fs->readahead, ret);
	else
		*ret = (FsRestoreStatus) {};
}
