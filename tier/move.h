/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The move engine (move.c): moves a sealed file's chunks from the tier
 * holding them to another one and switches the file over, crash-safely,
 * one move at a time.  What a move needs of the files' in-memory state (the
 * daemon's inode table: a reference, the data lock, the data generation)
 * it asks of its hooks, so tier/ never sees an inode; the daemon's side is
 * fs/inode-move.c.
 */

#include <stdbool.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "tier/class.h"
#include "tier/tiers.h"

typedef struct TierMoveResult {
	uint64_t bytes;           /* logical bytes moved */
	uint64_t new_bytes;       /* of which new to the target (the rest deduplicated) */
	uint64_t stored_bytes;    /* frame bytes the target gained */
} TierMoveResult;

/*
 * What the mover asks of whoever holds the files' in-memory state.  `file`
 * is what hold() returned; every hook but hold() is called with no lock of
 * the mover's but its own move lock held.
 */
typedef struct TierMoveHooks {
	/*
	 * Keeps ino's in-memory state alive until release() and notes the
	 * generation of its bytes.  Returns 0, or a negative errno (the move
	 * fails with it).
	 */
	int (*hold)(void *userdata, uint64_t ino, void **ret_file);
	/* Whether the file's bytes changed since hold() (a write, an unseal). */
	bool (*changed)(void *file);
	/*
	 * Shuts the file's readers and writers out, for the switch; returns so
	 * whatever it returns: 0, or -ESTALE when the file changed since
	 * hold() or is known not to be sealed on tier `from` any more.
	 */
	int (*lock)(void *file, uint32_t from);
	/* Lets them in again; moved: the file is sealed on tier `to` now. */
	void (*unlock)(void *file, bool moved, uint32_t to);
	/* Drops what hold() took. */
	void (*release)(void *file);
	/*
	 * Between two steps of the copy (background work): pace() ends a
	 * step and may wait; resume() starts the next one, after the
	 * caller's own progress callback.
	 */
	void (*pace)(void *file);
	void (*resume)(void *file);
	/*
	 * A new empty file (an O_TMPFILE) to keep the copy's recipe in, so
	 * that the move's memory does not grow with the file's size: on the
	 * hot tier, never on the target's disk, whose bytes are to be
	 * unreadable without the key (a recipe holds ids, lengths and the
	 * bytes between Oracle blocks); a negative errno keeps it in memory.
	 * (userdata is tier_mover_new()'s.)
	 */
	int (*spool)(void *userdata);
	/*
	 * Whether the catalog has room for the rows of a move of size bytes
	 * of class file_class: 0, or -ENOSPC (the move fails with it before
	 * it copies anything).  (userdata is tier_mover_new()'s.)
	 */
	int (*room)(void *userdata, uint64_t size, TierFileClass file_class);
} TierMoveHooks;

typedef struct TierMover TierMover;

/*
 * A mover between the tiers of set, recording in catalog (the daemon's
 * connection).  hooks and userdata (handed to hold()) are borrowed, as are
 * set and catalog: all must outlive the mover.  Returns 0 or -ENOMEM.
 */
int tier_mover_new(TierSet *set, Catalog *catalog, const TierMoveHooks *hooks, void *userdata, TierMover **ret);
/* Accepts NULL; returns NULL.  No move may be in progress. */
TierMover *tier_mover_free(TierMover *m);

/*
 * Moves sealed file ino to tier `to`; progress (optional) is called after
 * each step of the copy with the bytes copied so far, and a negative return
 * stops it.  One move at a time: a second caller waits.  Returns 1 if
 * moved, 0 if there was nothing to do (already there), or -ENOENT (no such
 * regular file), -EMEDIUMTYPE (not sealed: raw or passthrough), -ESTALE
 * (changed or moved meanwhile: try again), -ENXIO (a tier not reachable),
 * -ECANCELED (progress said stop), -EIO, -ENOSPC...  On error the file is
 * whole where it was, and what was copied is garbage for the target's
 * collector.
 */
int tier_mover_move(TierMover *m, uint64_t ino, uint32_t to,
		    int (*progress)(uint64_t done, uint64_t total, void *userdata), void *userdata,
		    TierMoveResult *ret);

/* The file being moved now, 0 if none (for reports: a snapshot). */
uint64_t tier_mover_moving(const TierMover *m);
