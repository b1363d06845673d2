/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * move.c — the move engine: a sealed file moves between tiers (migration to
 * a lower tier, recall to the hot one).
 *
 * A move (tier_mover_move()):
 *
 *   sealed on `from` --copy (no lock: dedup_file_migrate())--> copied
 *        ^                                                        |
 *        |  the bytes or the catalog changed: refused, the copy   | hooks->lock() (the data lock, exclusive),
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
 *  2. Readers hold the file's data lock shared and read from the tier it
 *     names; the switch holds it exclusively (hooks->lock()), so no read
 *     sees half a move.
 *  3. The copy runs without the data lock, so writers never wait for it;
 *     a write (or an unseal, or a second move) meanwhile changes the data
 *     generation (hooks->changed()) or the catalog row, and the switch is
 *     refused.
 *  4. One move at a time (TierMover.lock, taken before any other lock):
 *     the policy worker's and tierctl's moves queue on it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "common/log.h"
#include "tier/class.h"
#include "tier/move.h"
#include "tier/tiers-internal.h"

struct TierMover {
	TierSet *set;
	Catalog *catalog;
	const TierMoveHooks *hooks;
	void *userdata;
	pthread_mutex_t lock;            /* one move at a time; taken with no other lock held */
	atomic_uint_fast64_t moving;     /* the file being moved, 0 if none (for reports) */
};

int tier_mover_new(TierSet *set, Catalog *catalog, const TierMoveHooks *hooks, void *userdata, TierMover **ret) {
	TierMover *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	*m = (TierMover) { .set = set, .catalog = catalog, .hooks = hooks, .userdata = userdata };
	pthread_mutex_init(&m->lock, NULL);
	*ret = m;
	return 0;
}

TierMover *tier_mover_free(TierMover *m) {
	if (!m)
		return NULL;
	pthread_mutex_destroy(&m->lock);
	free(m);
	return NULL;
}

uint64_t tier_mover_moving(const TierMover *m) {
	return m ? atomic_load(&m->moving) : 0;
}

/* A move's copy is background work: each step is paced by the hooks, then the caller sees it. */
typedef struct MovePace {
	const TierMoveHooks *hooks;
	void *file;
	int (*progress)(uint64_t done, uint64_t total, void *userdata);
	void *userdata;
} MovePace;

static int move_progress(uint64_t done, uint64_t total, void *userdata) {
	MovePace *p = userdata;
	p->hooks->pace(p->file);
	int r = p->progress ? p->progress(done, total, p->userdata) : 0;
	/* The caller's own waits (the policy's bandwidth cap) are not work of the next step. */
	p->hooks->resume(p->file);
	return r;
}

int tier_mover_move(TierMover *m, uint64_t ino, uint32_t to,
		    int (*progress)(uint64_t done, uint64_t total, void *userdata), void *userdata,
		    TierMoveResult *ret) {
	const TierMoveHooks *hooks = m->hooks;
	MovePace pace = { .hooks = hooks, .progress = progress, .userdata = userdata };
	DedupMigration *mig = NULL;
	CatalogInode ci, now;
	void *file = NULL;
	int r;

	*ret = (TierMoveResult) {};
	pthread_mutex_lock(&m->lock);
	r = catalog_inode_get(m->catalog, ino, &ci);
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
	DedupStore *from = tier_set_store(m->set, ci.tier), *dst = tier_set_store(m->set, to);
	if (!from || !dst) {
		r = -ENXIO;
		goto out;
	}
	/* A shared tier whose name is no longer this daemon's takes nothing more from it (tier_set_fenced()). */
	if (tier_set_fenced(m->set, to)) {
		r = -EROFS;
		goto out;
	}
	/* A tier may ask for stronger compression of what moves there: colder data is read less often. */
	const ConfigClassPolicy *policy = tier_class_policy(m->set->config, (TierFileClass) ci.file_class);
	const ConfigTier *target = tier_set_config(m->set, to);
	int level = target->has_zstd_level ? target->zstd_level
		    : policy               ? policy->zstd_level
					   : DEDUP_STORE_LEVEL_DEFAULT;

	/* A move that cannot finish would take the room the catalog's other commits need, and fail. */
	r = hooks->room(m->userdata, ci.size, (TierFileClass) ci.file_class);
	if (r < 0)
		goto out;
	/* A reference of the daemon's keeps the file's in-memory state (its locks, its generation) alive meanwhile. */
	r = hooks->hold(m->userdata, ino, &file);
	if (r < 0)
		goto out;
	pace.file = file;
	atomic_store(&m->moving, ino);

	hooks->resume(file);
	r = dedup_file_migrate(from, dst, ino, ci.size, level, policy ? policy->region_size : DEDUP_STORE_REGION_DEFAULT,
			       hooks->spool(m->userdata), move_progress, &pace, &mig);
	if (r < 0 && r != -ECANCELED) {
		/*
		 * A file rewritten, unsealed or deleted under the copy fails it
		 * (its recipe and chunks went away): that is a refusal, not damage.
		 */
		if (hooks->changed(file) || catalog_inode_get(m->catalog, ino, &now) < 0 || now.nlink == 0 ||
		    now.state != CATALOG_FILE_SEALED || now.tier != ci.tier)
			r = -ESTALE;
	}
	if (r < 0)
		goto out_release;

	r = hooks->lock(file, ci.tier);
	if (r < 0)
		goto out_unlock;
	r = catalog_begin(m->catalog);
	if (r < 0)
		goto out_unlock;
	r = catalog_inode_get(m->catalog, ino, &now);
	if (r >= 0 && (now.state != CATALOG_FILE_SEALED || now.tier != ci.tier || now.nlink == 0 || now.size != ci.size))
		r = -ESTALE;
	if (r >= 0)
		r = dedup_migration_commit(mig);
	if (r >= 0) {
		DedupWriterStats ws;
		dedup_migration_stats(mig, &ws);
		now.tier = to;
		now.stored = ws.stored_bytes;
		r = catalog_inode_update(m->catalog, &now);
		ret->bytes = ws.logical_bytes;
		ret->new_bytes = ws.new_bytes;
		ret->stored_bytes = ws.stored_bytes;
	}
	if (r < 0) {
		catalog_rollback(m->catalog);
		goto out_unlock;
	}
	r = catalog_commit(m->catalog);
	/* The source's frames may be collected from now on: the switch must not be lost first. */
	if (r >= 0)
		r = catalog_sync(m->catalog);
	if (r < 0)
		goto out_unlock;
	r = 1;
	log_debug("moved inode %llu from tier %u to tier %u: %llu bytes, %llu new there",
		  (unsigned long long) ino, (unsigned) ci.tier, (unsigned) to, (unsigned long long) ret->bytes,
		  (unsigned long long) ret->new_bytes);

out_unlock:
	hooks->unlock(file, r == 1, to);
out_release:
	atomic_store(&m->moving, 0);
	dedup_migration_free(mig);
	hooks->release(file);
out:
	pthread_mutex_unlock(&m->lock);
	return r;
}
