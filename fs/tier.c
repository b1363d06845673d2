/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tier.c — the mount's tiers and the moves of sealed files between them
 * (migration to a lower tier, recall to the hot one).
 *
 * Tier 0 is the hot tier (opened by main.c with the catalog); the others
 * follow in the config's order, each with a store of its own over its
 * backend: a directory (its containers in PATH/containers) or an NFS export
 * (containers at its root).  A lower tier that cannot be opened at start
 * does not stop the mount: its files read as EIO, unlink and truncate of
 * them still work (they touch only the catalog), and status says why.
 *
 * A move (fs_data_migrate()):
 *
 *   sealed on `from` --copy (no lock: dedup_file_migrate())--> copied
 *        ^                                                        |
 *        |  data_gen or the catalog changed: refused, the copy    | data_lock exclusive,
 *        +---------- is garbage for the target's collector <------+ one catalog transaction:
 *                                                                 | recipe, refs and tier switch
 *                                                                 v
 *                                                          sealed on `to`
 *
 * Invariants:
 *  1. The file's catalog row, recipe and references switch tiers in one
 *     transaction, made only after the copy is durable on the target
 *     (dedup/store.h, migration), so after a crash the file is whole on
 *     exactly one tier, and what the other holds of it is garbage.
 *  2. Readers hold data_lock shared and read from the tier sealed_tier
 *     names; the switch takes it exclusively, so no read sees half a move.
 *  3. The copy runs without the data lock, so writers never wait for it;
 *     a write (or an unseal, or a second move) meanwhile bumps data_gen or
 *     changes the catalog row, and the switch is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/macros.h"
#include "fs/fs-internal.h"
#include "tier/backend-dir.h"
#include "tier/backend-nfs.h"

#define TIER_CONTAINERS_DIR "containers"

const ConfigTier *fs_tier_config(const Fs *fs, uint32_t n) {
	const Config *cfg = fs->config;
	if (n == 0)
		return config_tier_by_role(cfg, TIER_ROLE_HOT);
	uint32_t k = 0;
	for (size_t i = 0; i < cfg->n_tiers; i++) {
		if (cfg->tiers[i].role == TIER_ROLE_HOT)
			continue;
		if (++k == n)
			return &cfg->tiers[i];
	}
	return NULL;
}

DedupStore *fs_tier_store(const Fs *fs, uint32_t n) {
	return n < fs->n_tiers ? fs->tiers[n].store : NULL;
}

static int tier_open_backend(const ConfigTier *t, bool create, DedupBackend **ret, char **ret_error) {
	int r;

	if (t->backend == TIER_BACKEND_NFS) {
		r = tier_backend_nfs_open(t->path, NULL, ret);
		if (r < 0 && asprintf(ret_error, "%s", tier_backend_nfs_open_error() ?: strerror(-r)) < 0)
			*ret_error = NULL;
		return r;
	}
	_cleanup_free_ char *containers = NULL;
	if (asprintf(&containers, "%s/%s", t->path, TIER_CONTAINERS_DIR) < 0)
		return -ENOMEM;
	/* Only the embedded default makes its tier's directory: a configured one is a disk that must be there. */
	if (create && mkdir(t->path, 0755) < 0 && errno != EEXIST)
		r = -errno;
	else if (mkdir(containers, 0700) < 0 && errno != EEXIST)
		r = -errno;
	else
		r = tier_backend_dir_open(containers, ret);
	/* ENOENT here means the tier's own directory is missing (a disk not mounted): name that one. */
	if (r < 0 && asprintf(ret_error, "%s: %s", r == -ENOENT ? t->path : containers, strerror(-r)) < 0)
		*ret_error = NULL;
	return r;
}

int fs_tiers_open(Fs *fs, bool create) {
	fs->tiers[0] = (FsTier) { .config = fs_tier_config(fs, 0), .backend = fs->hot_backend, .store = fs->store };
	fs->n_tiers = 1;
	pthread_mutex_init(&fs->migrate_lock, NULL);

	for (uint32_t n = 1; n < fs->config->n_tiers && n < CONFIG_TIERS_MAX; n++) {
		FsTier *t = &fs->tiers[n];
		*t = (FsTier) { .config = fs_tier_config(fs, n) };
		fs->n_tiers = n + 1;
		if (!t->config)
			break;
		int r = tier_open_backend(t->config, create, &t->backend, &t->error);
		if (r >= 0) {
			r = dedup_store_open(fs->catalog, n, t->backend, NULL, &t->store);
			if (r < 0) {
				t->backend = dedup_backend_free(t->backend);
				if (asprintf(&t->error, "cannot open its chunk store: %s", strerror(-r)) < 0)
					t->error = NULL;
			}
		}
		if (r == -ENOMEM)
			return log_oom();
		if (r < 0)
			log_warning("tier %u (%s, %s) is not usable: %s; its files read as EIO until a restart finds it",
				    (unsigned) n, t->config->name, t->config->path, t->error ?: strerror(-r));
	}
	return 0;
}

void fs_tiers_close(Fs *fs) {
	/* Tier 0 belongs to main.c. */
	for (uint32_t n = 1; n < fs->n_tiers; n++) {
		FsTier *t = &fs->tiers[n];
		t->store = dedup_store_free(t->store);
		t->backend = dedup_backend_free(t->backend);
		free(t->error);
		t->error = NULL;
	}
	if (fs->n_tiers > 0)
		pthread_mutex_destroy(&fs->migrate_lock);
	fs->n_tiers = 0;
}

int fs_tiers_gc(Fs *fs, const DedupGcOptions *o, DedupGcStats *ret) {
	DedupGcStats sum = {};
	int first = 0;
	for (uint32_t n = 0; n < fs->n_tiers; n++) {
		DedupGcStats st = {};
		if (!fs->tiers[n].store)
			continue;
		int r = dedup_store_gc(fs->tiers[n].store, o, &st);
		if (r < 0 && first == 0)
			first = r;
		sum.chunks_deleted += st.chunks_deleted;
		sum.containers_deleted += st.containers_deleted;
		sum.containers_compacted += st.containers_compacted;
		sum.bytes_copied += st.bytes_copied;
		sum.bytes_freed += st.bytes_freed;
		sum.orphans_deleted += st.orphans_deleted;
		sum.containers_skipped += st.containers_skipped;
		if (r == -ECANCELED)
			break; /* asked to stop: the other tiers too */
	}
	if (ret)
		*ret = sum;
	return first;
}

/* A move's copy is background work: each step is paced by the throttle, then the caller sees it. */
typedef struct MigratePace {
	Fs *fs;
	FsThrottleUnit unit;
	int (*progress)(uint64_t done, uint64_t total, void *userdata);
	void *userdata;
} MigratePace;

static int migrate_progress(uint64_t done, uint64_t total, void *userdata) {
	MigratePace *p = userdata;
	fs_throttle_pace(&p->fs->throttle, FS_THROTTLE_MIGRATE, &p->unit);
	int r = p->progress ? p->progress(done, total, p->userdata) : 0;
	/* The caller's own waits (the policy's bandwidth cap) are not work of the next step. */
	fs_throttle_begin(&p->unit);
	return r;
}

int fs_data_migrate(Fs *fs, uint64_t ino, uint32_t to, int (*progress)(uint64_t done, uint64_t total, void *userdata),
		    void *userdata, FsMigrateResult *ret) {
	MigratePace pace = { .fs = fs, .progress = progress, .userdata = userdata };
	DedupMigration *m = NULL;
	CatalogInode ci, now;
	FsInode *i;
	int r;

	*ret = (FsMigrateResult) {};
	pthread_mutex_lock(&fs->migrate_lock);
	r = catalog_inode_get(fs->catalog, ino, &ci);
	if (r < 0)
		goto out;
	if (!S_ISREG(ci.mode) || ci.nlink == 0) {
		r = -ENOENT;
		goto out;
	}
	if (ci.state != CATALOG_FILE_SEALED) {
		r = -EMEDIUMTYPE;
		goto out;
	}
	if (ci.tier == to) {
		r = 0;
		goto out;
	}
	DedupStore *from = fs_tier_store(fs, ci.tier), *dst = fs_tier_store(fs, to);
	if (!from || !dst) {
		r = -ENXIO;
		goto out;
	}
	/* A tier may ask for stronger compression of what moves there: colder data is read less often. */
	const ConfigClassPolicy *policy = fs_class_policy(fs, (FsFileClass) ci.file_class);
	const ConfigTier *target = fs->tiers[to].config;
	int level = target->has_zstd_level ? target->zstd_level
		    : policy               ? policy->zstd_level
					   : DEDUP_STORE_LEVEL_DEFAULT;

	/* A reference of our own keeps the in-memory inode (its locks, its data_gen) alive meanwhile. */
	r = fs_inode_ref(fs, ino, 1, &i);
	if (r < 0)
		goto out;
	uint64_t gen = atomic_load(&i->data_gen);
	atomic_store(&fs->migrating_ino, ino);

	fs_throttle_begin(&pace.unit);
	r = dedup_file_migrate(from, dst, ino, ci.size, level, migrate_progress, &pace, &m);
	if (r < 0 && r != -ECANCELED) {
		/*
		 * A file rewritten, unsealed or deleted under the copy fails it
		 * (its recipe and chunks went away): that is a refusal, not damage.
		 */
		if (atomic_load(&i->data_gen) != gen ||
		    catalog_inode_get(fs->catalog, ino, &now) < 0 || now.nlink == 0 ||
		    now.state != CATALOG_FILE_SEALED || now.tier != ci.tier)
			r = -ESTALE;
	}
	if (r < 0)
		goto out_forget;

	pthread_rwlock_wrlock(&i->data_lock);
	if (atomic_load(&i->data_gen) != gen || (i->state_known && (!i->sealed || i->sealed_tier != ci.tier))) {
		r = -ESTALE;
		goto out_unlock;
	}
	r = catalog_begin(fs->catalog);
	if (r < 0)
		goto out_unlock;
	r = catalog_inode_get(fs->catalog, ino, &now);
	if (r >= 0 && (now.state != CATALOG_FILE_SEALED || now.tier != ci.tier || now.nlink == 0 || now.size != ci.size))
		r = -ESTALE;
	if (r >= 0)
		r = dedup_migration_commit(m);
	if (r >= 0) {
		DedupWriterStats ws;
		dedup_migration_stats(m, &ws);
		now.tier = to;
		now.stored = ws.stored_bytes;
		r = catalog_inode_update(fs->catalog, &now);
		ret->bytes = ws.logical_bytes;
		ret->new_bytes = ws.new_bytes;
		ret->stored_bytes = ws.stored_bytes;
	}
	if (r < 0) {
		catalog_rollback(fs->catalog);
		goto out_unlock;
	}
	r = catalog_commit(fs->catalog);
	/* The source's frames may be collected from now on: the switch must not be lost first. */
	if (r >= 0)
		r = catalog_sync(fs->catalog);
	if (r < 0)
		goto out_unlock;
	if (i->state_known)
		i->sealed_tier = to;
	r = 1;
	log_debug("moved inode %llu from tier %u to tier %u: %llu bytes, %llu new there",
		  (unsigned long long) ino, (unsigned) ci.tier, (unsigned) to, (unsigned long long) ret->bytes,
		  (unsigned long long) ret->new_bytes);
	pthread_rwlock_unlock(&i->data_lock);
	fs_data_attrs_changed(fs, ino);
	goto out_forget;

out_unlock:
	pthread_rwlock_unlock(&i->data_lock);
out_forget:
	atomic_store(&fs->migrating_ino, 0);
	dedup_migration_free(m);
	fs_inode_forget(fs, ino, 1);
out:
	pthread_mutex_unlock(&fs->migrate_lock);
	return r;
}
