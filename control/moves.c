/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * moves.c — tierctl migrate, recall, pin and unpin (and --dry-run): the
 * files named (paths, trees, archived logs by their headers), narrowed by
 * the request's filters, each judged by the planner (tier_plan_request()),
 * then moved one by one through the mover (tier/move.h), sealing a raw
 * file first.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "common/log.h"
#include "control/control-internal.h"

/* What happens (or would happen) to one file. */
typedef enum MoveResult {
	MOVE_PENDING,
	MOVE_MOVED,
	MOVE_WOULD_MOVE,
	MOVE_ALREADY,
	MOVE_SKIPPED,
	MOVE_FAILED,
	MOVE_UNPINNED,
	_MOVE_RESULT_MAX,
} MoveResult;

static const char *const move_result_names[_MOVE_RESULT_MAX] = {
	[MOVE_PENDING] = "pending",   [MOVE_MOVED] = "moved",     [MOVE_WOULD_MOVE] = "would_move",
	[MOVE_ALREADY] = "already",   [MOVE_SKIPPED] = "skipped", [MOVE_FAILED] = "failed",
	[MOVE_UNPINNED] = "unpinned",
};

typedef struct MoveItem {
	uint64_t ino;
	uint64_t size;
	uint32_t from;
	MoveResult result;
	const char *why;  /* static */
	int error;
	TierMoveResult moved;
} MoveItem;

typedef struct MovePlan {
	MoveItem *items;
	size_t n, cap;
	uint32_t to;
	uint64_t total, done; /* bytes to move, and moved (for progress) */
	const CtlRequest *req; /* its class, age and size filters */
	int file_class;       /* the filter's class, -1 for any */
	int64_t now_ns;       /* when the plan was made: ages are counted from it */
	bool restore_order;   /* a restore set: in the order planned (lowest SCN first), not by inode */
} MovePlan;

/* Whether a file passes the request's --class, --older-than and --larger-than (size: the current one). */
static bool plan_wants(const MovePlan *p, const CatalogInode *ci, uint64_t size) {
	const CtlRequest *req = p->req;
	if (p->file_class >= 0 && ci->file_class != (uint32_t) p->file_class)
		return false;
	if (req->has_older_than && p->now_ns - ci->mtime_ns < (int64_t) req->older_than * 1000000000)
		return false;
	return !req->has_larger_than || size > req->larger_than;
}

static int plan_add(Conn *c, MovePlan *p, const CatalogInode *ci) {
	uint64_t size = ci->size;
	if (ci->state != CATALOG_FILE_SEALED)
		control_raw_fill(c->fs, ci->tier, ci->ino, &size, &(uint64_t) { 0 }, NULL);
	if (!plan_wants(p, ci, size))
		return 0;
	if (p->n == p->cap) {
		size_t cap = MAX(p->cap * 2, (size_t) 256);
		MoveItem *q = realloc(p->items, cap * sizeof(*q));
		if (!q)
			return -ENOMEM;
		p->items = q;
		p->cap = cap;
	}
	MoveItem *it = &p->items[p->n++];
	*it = (MoveItem) { .ino = ci->ino, .size = size, .from = ci->tier };
	/* The planner's verdict, the very rules of the policy (tier/planner.h); a pin matters only off the hot tier. */
	TierPlanFile f = {
		.ino = ci->ino,
		.file_class = ci->file_class,
		.tier = ci->tier,
		.sealed = ci->state == CATALOG_FILE_SEALED,
		.pinned = p->to != 0 && catalog_pinned(c->reader, ci->ino) > 0,
	};
	switch (tier_plan_request(fs_config(c->fs), &f, p->to, &it->why)) {
	case TIER_REQUEST_ALREADY:
		it->result = MOVE_ALREADY;
		break;
	case TIER_REQUEST_SKIP:
		it->result = MOVE_SKIPPED;
		break;
	default:
		break;
	}
	return 0;
}

static int item_compare(const void *a, const void *b) {
	const MoveItem *x = a, *y = b;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* In inode order, each file once (named twice, or a hard link met again), and the bytes to move. */
static void plan_finish(MovePlan *p) {
	size_t n = 0;
	if (p->n > 0 && !p->restore_order)
		qsort(p->items, p->n, sizeof(MoveItem), item_compare);
	for (size_t i = 0; i < p->n; i++) {
		if (n > 0 && !p->restore_order && p->items[n - 1].ino == p->items[i].ino)
			continue;
		p->items[n++] = p->items[i];
		if (p->items[i].result == MOVE_PENDING)
			p->total += p->items[i].size;
	}
	p->n = n;
}

typedef struct LogSelection {
	const CtlRequest *req;
	uint64_t *inos;
	size_t n, cap;
} LogSelection;

static int log_selected(uint64_t ino, const CatalogArchivelog *a, void *userdata) {
	LogSelection *sel = userdata;
	/* A log belongs to a window when the changes it holds, [low_time, next_time], meet it. */
	if ((sel->req->has_since && a->next_time < sel->req->since) ||
	    (sel->req->has_until && a->low_time > sel->req->until))
		return 0;
	if (sel->n == sel->cap) {
		size_t cap = MAX(sel->cap * 2, (size_t) 256);
		uint64_t *q = realloc(sel->inos, cap * sizeof(*q));
		if (!q)
			return -ENOMEM;
		sel->inos = q;
		sel->cap = cap;
	}
	sel->inos[sel->n++] = ino;
	return 0;
}

/* The archived logs whose recorded headers match the request's thread, sequence range and time window. */
static int plan_logs(Conn *c, MovePlan *p, const CtlRequest *req) {
	LogSelection sel = { .req = req };
	/* The catalog is locked during the walk: collect first, look the inodes up after. */
	int r = catalog_archivelogs_foreach(c->reader, 0, req->has_thread ? req->thread : 0,
					    req->has_sequence ? req->sequence_first : 0,
					    req->has_sequence ? req->sequence_last : UINT32_MAX, log_selected, &sel);
	for (size_t i = 0; r >= 0 && i < sel.n; i++) {
		CatalogInode ci;
		int q = catalog_inode_get(c->reader, sel.inos[i], &ci);
		if (q == -ENOENT)
			continue; /* deleted since */
		r = q < 0 ? q : ci.nlink > 0 && S_ISREG(ci.mode) ? plan_add(c, p, &ci) : 0;
	}
	free(sel.inos);
	return r;
}

static int plan_visit(Conn *c, const CatalogInode *ci, void *userdata) {
	if (S_ISDIR(ci->mode))
		return 1;
	return S_ISREG(ci->mode) ? plan_add(c, userdata, ci) : 0;
}

/* Every regular file of a tree (the caller may do anything: it is root or the owner). */
static int plan_tree(Conn *c, MovePlan *p, uint64_t top) {
	return control_tree_walk(c, top, plan_visit, p);
}

static int move_progress(uint64_t done, uint64_t total, void *userdata) {
	Conn *c = userdata;
	MovePlan *p = c->move_plan;
	if (atomic_load(&c->ctl->stopping) || control_peer_gone(c))
		return -ECANCELED;
	int64_t now = clock_ns(CLOCK_MONOTONIC);
	if (now - c->last_progress_ns < CONTROL_PROGRESS_INTERVAL_NS)
		return 0;
	c->last_progress_ns = now;
	return control_progress(c, "copy", p->done + done, p->total, 0) < 0 ? -ECANCELED : 0;
}

/*
 * The recall speed from a tier, as the last recalls measured it: their
 * bytes and time, halved whenever they pass RECALL_MEASURE_BYTES so the
 * figure follows the tier as it is now.
 */
#define RECALL_MEASURE_BYTES (UINT64_C(4) << 30)

static void recall_measured(Control *ctl, uint32_t from, uint64_t bytes, int64_t ns) {
	pthread_mutex_lock(&ctl->lock);
	ctl->recall_bytes[from] += bytes;
	ctl->recall_ns[from] += MAX(ns, (int64_t) 1);
	if (ctl->recall_bytes[from] > RECALL_MEASURE_BYTES) {
		ctl->recall_bytes[from] /= 2;
		ctl->recall_ns[from] /= 2;
	}
	pthread_mutex_unlock(&ctl->lock);
}

/* Bytes per second from a tier, 0 when no recall from it has been measured. */
static uint64_t recall_speed(Control *ctl, uint32_t from) {
	uint64_t speed = 0;
	if (from >= CONFIG_TIERS_MAX)
		return 0;
	pthread_mutex_lock(&ctl->lock);
	if (ctl->recall_ns[from] > 0)
		speed = (uint64_t) ((double) ctl->recall_bytes[from] * 1e9 / (double) ctl->recall_ns[from]);
	pthread_mutex_unlock(&ctl->lock);
	return speed;
}

/* The logs of a restore set, in restore order, as plan items. */
static int plan_restore(Conn *c, MovePlan *p, const ControlRestore *rs) {
	int r = 0;
	p->restore_order = true;
	for (size_t i = 0; r >= 0 && i < rs->set.n_logs; i++) {
		CatalogInode ci;
		int q = catalog_inode_get(c->reader, rs->logs[rs->set.logs[i]].ino, &ci);
		if (q == -ENOENT)
			continue; /* deleted since */
		r = q < 0 ? q : plan_add(c, p, &ci);
	}
	return r;
}

/* What the reply says of a restore set: its database and range, what is missing, and the expected time. */
static int add_restore_fields(Conn *c, const ControlRestore *rs, const MovePlan *p) {
	uint64_t seconds = 0;
	bool known = true;
	for (size_t i = 0; i < p->n; i++) {
		const MoveItem *it = &p->items[i];
		if (it->result != MOVE_PENDING && it->result != MOVE_WOULD_MOVE && it->result != MOVE_MOVED)
			continue;
		uint64_t speed = recall_speed(c->ctl, it->from);
		if (speed == 0)
			known = false;
		else
			seconds += (it->size + speed - 1) / speed;
	}
	int r = control_add(c, "database", rs->db->db_name);
	if (r >= 0)
		r = control_add_u64(c, "dbid", rs->db->dbid);
	if (r >= 0)
		r = control_add_u64(c, "set_low_scn", rs->set.low_scn);
	if (r >= 0)
		r = control_add_u64(c, "set_next_scn", rs->set.next_scn);
	if (r >= 0)
		r = control_add_i64(c, "set_low_time", rs->set.low_time);
	if (r >= 0)
		r = control_add_i64(c, "set_next_time", rs->set.next_time);
	if (r >= 0)
		r = control_add_u64(c, "missing", rs->set.n_missing);
	/* Only when every source tier has a measured speed: a guess would mislead at 3 a.m. */
	if (r >= 0 && known)
		r = control_add_u64(c, "expected_seconds", seconds);
	return r;
}

/* Moves one planned file, sealing it first if it is still raw. */
static int move_one(Conn *c, MovePlan *p, MoveItem *it) {
	Fs *fs = c->fs;
	CatalogInode ci = {};
	int r = catalog_inode_get(fs_catalog(fs), it->ino, &ci);
	if (r >= 0 && ci.state != CATALOG_FILE_SEALED) {
		/* Asked for by name: no need to wait for the seal delay. */
		r = fs_data_seal(fs, it->ino);
		if (r == -EAGAIN) {
			it->result = MOVE_SKIPPED;
			it->why = "not sealed: no room left on the hot tier's filesystem for the catalog to record it; free "
				  "some room there and try again";
			return 0;
		}
		if (r >= 0)
			r = catalog_inode_get(fs_catalog(fs), it->ino, &ci);
		if (r >= 0 && ci.state != CATALOG_FILE_SEALED) {
			it->result = MOVE_SKIPPED;
			it->why = "not sealed: open for writing, changed while being sealed, or mostly holes; try again later";
			return 0;
		}
	}
	/* Changed under the copy: that copy is garbage; start again from what the file is now. */
	int64_t start = clock_ns(CLOCK_MONOTONIC);
	for (unsigned stale = 0; r >= 0;) {
		r = tier_mover_move(fs_mover(fs), it->ino, p->to, move_progress, c, &it->moved);
		if (r != -ESTALE || ++stale == 3)
			break;
	}
	if (r == 1 && p->to == 0 && it->from < CONFIG_TIERS_MAX)
		recall_measured(c->ctl, it->from, it->size, clock_ns(CLOCK_MONOTONIC) - start);
	if (r == -ECANCELED)
		return r;
	if (r == 1)
		it->result = MOVE_MOVED;
	else if (r == 0)
		it->result = MOVE_ALREADY;
	else if (r == -ENOENT) {
		it->result = MOVE_SKIPPED;
		it->why = "deleted meanwhile";
	} else if (r == -ESTALE) {
		it->result = MOVE_SKIPPED;
		it->why = "changed while being copied, three times; try again later";
	} else if (r == -EMEDIUMTYPE) {
		it->result = MOVE_SKIPPED;
		it->why = "written meanwhile: raw on the hot tier again; try again once it is sealed";
	} else {
		it->result = MOVE_FAILED;
		it->error = r;
		if (r == -ENXIO)
			it->why = "its tier or the target is not reachable";
		else if (r == -ENOSPC && fs_catalog_short(fs, ci.size, (TierFileClass) ci.file_class))
			it->why = "no room left on the hot tier's filesystem for the catalog to record the move; free some "
				  "room there and try again";
		else
			it->why = NULL;
		log_warning_errno(r, "Failed to move inode %llu to tier %u: %m", (unsigned long long) it->ino,
				  (unsigned) p->to);
	}
	return 0;
}

int control_move(Conn *c, const CtlRequest *req) {
	Fs *fs = c->fs;
	bool pin = req->command == CTL_COMMAND_PIN, unpin = req->command == CTL_COMMAND_UNPIN;
	MovePlan p = {
		.to = req->command == CTL_COMMAND_MIGRATE ? (req->has_tier ? req->tier : 1) : 0,
		.req = req,
		.file_class = req->file_class ? tier_class_from_string(req->file_class) : -1,
		.now_ns = clock_ns(CLOCK_REALTIME),
	};
	uint64_t count[_MOVE_RESULT_MAX] = {}, bytes = 0, new_bytes = 0, stored_bytes = 0;
	int r = 0;

	if (req->file_class && p.file_class < 0) {
		char names[256];
		tier_class_names_join(names, sizeof(names));
		return control_fail(c, -EINVAL, "unknown class '%s' (the classes are %s)", req->file_class, names);
	}

	if (p.to >= tier_set_count(fs_tiers(fs)))
		return control_fail(c, -ENOENT, "there is no tier %u (this mount has %u; see tierctl df)", (unsigned) p.to,
				 (unsigned) tier_set_count(fs_tiers(fs)));
	if (!tier_set_store(fs_tiers(fs), p.to))
		return control_fail(c, -ENXIO, "tier %u (%s) is not reachable: %s", (unsigned) p.to,
				 tier_set_config(fs_tiers(fs), p.to)->name, tier_set_error(fs_tiers(fs), p.to) ?: "see tierctl status");
	if (tier_set_fenced(fs_tiers(fs), p.to))
		return control_fail(c, -EROFS, "shared tier %u (%s) takes nothing more from this daemon: its host name there "
					       "was retired or taken over (stop this daemon)",
				 (unsigned) p.to, tier_set_config(fs_tiers(fs), p.to)->name);

	for (size_t i = 0; r >= 0 && i < req->n_paths; i++) {
		CatalogInode ci;
		int q = control_resolve(c, req->paths[i], &ci);
		if (q >= 0)
			q = S_ISDIR(ci.mode) ? plan_tree(c, &p, ci.ino) : S_ISREG(ci.mode) ? plan_add(c, &p, &ci) : -EINVAL;
		if (q == -ECANCELED || q == -ENOMEM) {
			r = q;
			break;
		}
		if (q < 0)
			r = control_path_failed(c, req->paths[i], q);
	}
	ControlRestore rs = {};
	bool restore = req->command == CTL_COMMAND_RECALL && req->database;
	if (restore) {
		r = control_restore_plan(c, req, &rs);
		if (r < 0)
			return r;
		r = plan_restore(c, &p, &rs);
	} else if (r >= 0 && (req->has_thread || req->has_sequence || req->has_since || req->has_until))
		r = plan_logs(c, &p, req);

	plan_finish(&p);
	/* A restore set with a hole is said before anything moves: recovery would stop there anyway. */
	if (r >= 0 && restore && rs.set.n_missing > 0 && !req->dry_run) {
		const TierRecoverySpan *g = &rs.set.missing[0];
		char seq[64] = "beyond the last log held";
		if (g->first_sequence && g->last_sequence)
			snprintf(seq, sizeof(seq), "sequences %u-%u", (unsigned) g->first_sequence,
				 (unsigned) g->last_sequence);
		else if (g->first_sequence)
			snprintf(seq, sizeof(seq), "from sequence %u on", (unsigned) g->first_sequence);
		r = control_fail(c, -ENODATA,
				 "the restore set of %s is not whole: %zu stretch(es) missing, the first on thread %u: %s "
				 "(SCN %llu to %llu); nothing moved (recall --dry-run lists the set and the holes)",
				 rs.db->db_name, rs.set.n_missing, (unsigned) g->thread, seq, (unsigned long long) g->low_scn,
				 (unsigned long long) g->next_scn);
		control_restore_done(&rs);
		free(p.items);
		return r;
	}
	/*
	 * Pins first, so that no policy run demotes a file between its recall
	 * and its pin; a pin is a wish about placement, kept even if the
	 * recall of that file fails (the next recall or the policy honours it).
	 */
	for (size_t i = 0; r >= 0 && (pin || unpin) && !req->dry_run && i < p.n; i++) {
		r = catalog_pin_set(fs_catalog(fs), p.items[i].ino, pin);
		if (unpin)
			p.items[i].result = MOVE_UNPINNED;
	}
	c->move_plan = &p;
	c->last_progress_ns = 0;
	uint64_t queued = 0;
	for (size_t i = 0; !req->dry_run && i < p.n; i++)
		queued += p.items[i].result == MOVE_PENDING;
	atomic_fetch_add(&c->ctl->migrate_queue, queued);
	for (size_t i = 0; r >= 0 && i < p.n; i++) {
		MoveItem *it = &p.items[i];
		if (it->result != MOVE_PENDING)
			continue;
		if (req->dry_run) {
			it->result = MOVE_WOULD_MOVE;
			continue;
		}
		r = move_one(c, &p, it);
		p.done += it->size;
		atomic_fetch_sub(&c->ctl->migrate_queue, 1);
		queued--;
	}
	atomic_fetch_sub(&c->ctl->migrate_queue, queued);
	c->move_plan = NULL;
	/* The moved files join their tier's description (disaster recovery) before tierctl hears they moved. */
	if (!req->dry_run && p.to > 0)
		(void) fs_tiers_describe(fs);
	if (r == -ECANCELED) {
		free(p.items);
		control_restore_done(&rs);
		return control_fail(c, r, "stopped: the files moved so far stay moved, the one being copied stays where it "
				       "was");
	}
	if (r >= 0 && !req->dry_run)
		r = control_progress(c, "copy", p.total, p.total, 0);

	for (size_t i = 0; i < p.n; i++) {
		count[p.items[i].result]++;
		bytes += p.items[i].moved.bytes;
		new_bytes += p.items[i].moved.new_bytes;
		stored_bytes += p.items[i].moved.stored_bytes;
	}
	if (r >= 0)
		r = control_add_u64(c, "to", p.to);
	if (r >= 0)
		r = control_add(c, "to_name", tier_set_config(fs_tiers(fs), p.to)->name);
	if (r >= 0)
		r = control_add(c, "dry_run", req->dry_run ? "yes" : "no");
	if (r >= 0)
		r = control_add_u64(c, "files", p.n);
	for (int k = MOVE_MOVED; r >= 0 && k < _MOVE_RESULT_MAX; k++)
		r = control_add_u64(c, move_result_names[k], count[k]);
	if (r >= 0)
		r = control_add_u64(c, "bytes", req->dry_run ? p.total : bytes);
	if (r >= 0)
		r = control_add_u64(c, "new_bytes", new_bytes);
	if (r >= 0)
		r = control_add_u64(c, "stored_bytes", stored_bytes);
	if (r >= 0 && restore)
		r = add_restore_fields(c, &rs, &p);
	for (size_t i = 0; r >= 0 && restore && i < rs.set.n_missing; i++)
		r = control_recovery_add_span(c, &rs.set.missing[i], "missing");
	for (size_t i = 0; r >= 0 && i < p.n; i++) {
		const MoveItem *it = &p.items[i];
		_cleanup_free_ char *path = NULL;
		r = control_row(c, "file");
		if (r >= 0 && control_path_of(c->reader, it->ino, &path) >= 0)
			r = control_add(c, "path", path);
		if (r >= 0)
			r = control_add_u64(c, "ino", it->ino);
		if (r >= 0)
			r = control_add_u64(c, "size", it->size);
		if (r >= 0)
			r = control_add_u64(c, "from", it->from);
		if (r >= 0)
			r = control_add(c, "result", move_result_names[it->result]);
		if (r >= 0 && it->result == MOVE_MOVED)
			r = control_add_u64(c, "new_bytes", it->moved.new_bytes);
		if (r >= 0 && it->result == MOVE_MOVED)
			r = control_add_u64(c, "stored_bytes", it->moved.stored_bytes);
		if (r >= 0 && (it->why || it->error))
			r = control_add(c, "message", it->why ?: strerror(-it->error));
		CatalogArchivelog a;
		if (r >= 0 && restore && catalog_archivelog_get(c->reader, it->ino, &a) >= 0) {
			r = control_add_u64(c, "thread", a.thread);
			if (r >= 0)
				r = control_add_u64(c, "sequence", a.sequence);
			if (r >= 0)
				r = control_add_u64(c, "low_scn", a.low_scn);
			if (r >= 0)
				r = control_add_u64(c, "next_scn", a.next_scn);
		}
	}
	free(p.items);
	control_restore_done(&rs);
	return r;
}
