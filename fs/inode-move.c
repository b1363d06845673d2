/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * inode-move.c — the inode table's side of a move between tiers: the hooks
 * tier/move.c calls (tier/move.h), so that the move engine never sees an
 * inode and the inode locking stays here.
 *
 * A move holds a reference of the daemon's on the inode (so its locks and
 * data_gen stay), notes data_gen, and for the switch takes data_lock
 * exclusively: readers read from sealed_tier under data_lock shared, so
 * none sees half a move (tier/move.c, invariant 2).  The copy's steps are
 * background work, paced by Fs.throttle (FS_THROTTLE_MIGRATE).
 */
#include <errno.h>
#include <stdlib.h>

#include "fs/fs-internal.h"

typedef struct MoveFile {
	Fs *fs;
	FsInode *i;
	uint64_t gen;             /* data_gen at hold() */
	FsThrottleUnit unit;
} MoveFile;

static int move_hold(void *userdata, uint64_t ino, void **ret_file) {
	MoveFile *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->fs = userdata;
	int r = fs_inode_ref(f->fs, ino, 1, &f->i);
	if (r < 0) {
		free(f);
		return r;
	}
	f->gen = atomic_load(&f->i->data_gen);
	*ret_file = f;
	return 0;
}

static bool move_changed(void *file) {
	MoveFile *f = file;
	return atomic_load(&f->i->data_gen) != f->gen;
}

static int move_lock(void *file, uint32_t from) {
	MoveFile *f = file;
	FsInode *i = f->i;
	pthread_rwlock_wrlock(&i->data_lock);
	if (atomic_load(&i->data_gen) != f->gen || (i->state_known && (!i->sealed || i->sealed_tier != from)))
		return -ESTALE;
	return 0;
}

static void move_unlock(void *file, bool moved, uint32_t to) {
	MoveFile *f = file;
	FsInode *i = f->i;
	if (moved && i->state_known)
		i->sealed_tier = to;
	pthread_rwlock_unlock(&i->data_lock);
	if (moved)
		fs_data_attrs_changed(f->fs, i->ino);
}

static void move_release(void *file) {
	MoveFile *f = file;
	fs_inode_forget(f->fs, f->i->ino, 1);
	free(f);
}

static void move_pace(void *file) {
	MoveFile *f = file;
	fs_throttle_pace(&f->fs->throttle, FS_THROTTLE_MIGRATE, &f->unit);
}

static void move_resume(void *file) {
	MoveFile *f = file;
	fs_throttle_begin(&f->unit);
}

static int move_spool(void *userdata) {
	return fs_staging_spool(userdata, 0);
}

static int move_room(void *userdata, uint64_t size, TierFileClass file_class) {
	return fs_catalog_has_room(userdata, size, file_class) ? 0 : -ENOSPC;
}

static const TierMoveHooks move_hooks = {
	.hold = move_hold,
	.changed = move_changed,
	.lock = move_lock,
	.unlock = move_unlock,
	.release = move_release,
	.pace = move_pace,
	.resume = move_resume,
	.spool = move_spool,
	.room = move_room,
};

int fs_mover_open(Fs *fs) {
	return tier_mover_new(fs->tiers, fs->catalog, &move_hooks, fs, &fs->mover);
}
