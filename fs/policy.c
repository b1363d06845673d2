/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * policy.c — the policy worker: moves sealed files off the hot tier by age
 * and by the hot tier's use, and on down the lower tiers by age, without
 * being asked.
 *
 * One thread, at nice 10, wakes every policy_interval seconds, or sooner
 * when a close finds the hot tier above its high watermark or below its
 * reserve, and makes one pass:
 *
 *   idle --interval or poke--> scan: sealed files whose class (tier 0) or tier
 *     ^                         |   (below) has an open target, oldest mtime first
 *     |                         v
 *     +---- nothing left --- move one (tier_mover_move(), paced) --+
 *     |                         ^                                  |
 *     |                         +------ due by age, or space -------+
 *     +---- stop: the move in flight is cancelled (its copy is garbage for the target's collector)
 *
 * A file on the hot tier moves when it is due by age (now - mtime >= its
 * class's migrate_after) or, oldest first whatever its age, while the hot
 * tier needs space: its use above high_watermark (then down to
 * low_watermark), or its free space below the reserve.  A file on a lower
 * tier moves on when it is due by that tier's migrate_after, to its target
 * (a later tier, so moves never go round in a circle); space plays no part.
 *
 * Invariants:
 *  1. Every move goes through tier_mover_move(): one at a time (it takes
 *     the migrate lock, shared with tierctl migrate and recall), crash-safe
 *     at every step, and refused (-ESTALE, -EMEDIUMTYPE, -ENOENT) for a file
 *     changed, unsealed or deleted since the scan, which this pass then skips.
 *  2. Space is judged from the hot filesystem's statfs less what the
 *     collector will give back: the dead bytes of the hot tier's full
 *     containers that are less than DEDUP_GC_LIVE_THRESHOLD_DEFAULT live
 *     (deleted or compacted at its next run; the open container is never
 *     compacted).  Counting them as used would demote more files each pass
 *     until the collector ran; counting every dead byte would stop early,
 *     as a container mostly live keeps its dead frames.  It is measured
 *     again after every move, so a file whose chunks are shared with files
 *     that stay frees nothing and the next one moves too.  The price:
 *     demotion may overshoot by up to half a container (a container frees
 *     nothing until it is less than half live), and the files of the open
 *     container free nothing until it is full.
 *  3. The worker reads the catalog through its own read-only connection
 *     (catalog_open_reader()), so a scan never holds the daemon's catalog
 *     lock against the filesystem.
 *  4. Bytes moved are paced to policy_bandwidth per second, measured from
 *     the copy's progress, so a backlog never takes the disks from the
 *     archiver; the pacing sleeps on the worker's condition variable and
 *     stopping wakes it at once.  On top of that cap, tier_mover_move()
 *     yields to foreground I/O (throttle.c, background_share).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macros.h"
#include "fs/fs-internal.h"

#define POLICY_NICE 10
/* Without an explicit reserve: this many times the largest archived log ... */
#define POLICY_RESERVE_LOGS 4
/* ... but at most this share of the hot filesystem, in percent, so a small hot tier is not all reserve. */
#define POLICY_RESERVE_SHARE_MAX 10

typedef struct Candidate {
	uint64_t ino;
	int64_t mtime_ns;
	uint32_t target;
	uint64_t migrate_after;
	uint32_t from;            /* the tier it is on: only the hot tier's files move for space */
	uint64_t size;            /* for the outlook only */
	uint64_t stored;          /* likewise: what moving it frees at most */
	TierFileClass file_class;   /* likewise */
} Candidate;

typedef struct Scan {
	Fs *fs;
	Candidate *items;
	size_t n, size;
	uint64_t largest_log;
} Scan;

typedef struct Pace {
	Fs *fs;
	int64_t start_ns;
	uint64_t bytes;           /* moved since start_ns */
	uint64_t file_done;       /* of the file being moved, at its last progress call */
} Pace;

static int64_t clock_ns(clockid_t clock) {
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct timespec monotonic_after(int64_t ns) {
	int64_t t = clock_ns(CLOCK_MONOTONIC) + ns;
	return (struct timespec) { .tv_sec = t / 1000000000, .tv_nsec = t % 1000000000 };
}

static const ConfigTier *hot_config(const Fs *fs) {
	return tier_set_config(fs->tiers, 0);
}

static uint64_t reserve_of(const Fs *fs, uint64_t largest_log, uint64_t fs_size) {
	const ConfigTier *hot = hot_config(fs);
	if (hot->has_reserve)
		return hot->reserve;
	uint64_t r = largest_log > UINT64_MAX / POLICY_RESERVE_LOGS ? UINT64_MAX : largest_log * POLICY_RESERVE_LOGS;
	return MIN(r, fs_size / 100 * POLICY_RESERVE_SHARE_MAX);
}

/* What the hot filesystem holds (used) and can still take (avail), in bytes. */
static int hot_space(Fs *fs, uint64_t *ret_used, uint64_t *ret_avail) {
	struct statvfs sv;
	if (fstatvfs(fs->hot_fd, &sv) < 0)
		return -errno;
	*ret_used = (uint64_t) (sv.f_blocks - sv.f_bfree) * sv.f_frsize;
	*ret_avail = (uint64_t) sv.f_bavail * sv.f_frsize;
	return 0;
}

/*
 * Bytes to free on the hot tier for its watermarks and reserve; 0 when it
 * is fine.  draining: a pass found it above the high mark and it has not
 * been below the low one since (the two marks are a hysteresis).
 */
static uint64_t space_needed(const Fs *fs, uint64_t used, uint64_t avail, uint64_t reserve, bool draining) {
	const ConfigTier *hot = hot_config(fs);
	/* As df counts: what is used of what is usable (root's reserved blocks are neither). */
	uint64_t size = used + avail, need = 0;
	if (size == 0)
		return 0;
	uint64_t low = size / 100 * hot->low_watermark;
	if (used > size / 100 * hot->high_watermark || (draining && used > low))
		need = used - low;
	if (avail < reserve)
		need = MAX(need, reserve - avail);
	return need;
}

void fs_policy_check_space(Fs *fs) {
	uint64_t used = 0, avail = 0;

	if (!fs->policy_thread_started || hot_space(fs, &used, &avail) < 0)
		return;
	if (space_needed(fs, used, avail, atomic_load(&fs->policy_reserve), atomic_load(&fs->policy_draining)) == 0)
		return;
	pthread_mutex_lock(&fs->policy_lock);
	fs->policy_wake = true;
	pthread_cond_signal(&fs->policy_cond);
	pthread_mutex_unlock(&fs->policy_lock);
}

static int count_reclaimable(const CatalogContainer *ct, void *userdata) {
	if (ct->full && (double) ct->live_bytes < (double) ct->size * DEDUP_GC_LIVE_THRESHOLD_DEFAULT)
		*(uint64_t *) userdata += ct->size - MIN(ct->size, ct->live_bytes);
	return 0;
}

/*
 * Bytes the hot tier must free for its watermarks and reserve (invariant 2);
 * 0 when it is fine.  A pass updates the hysteresis (update); the outlook
 * only looks.
 */
static int hot_space_measure(Fs *fs, Catalog *reader, uint64_t reserve, bool update, uint64_t *ret) {
	uint64_t used = 0, avail = 0, reclaimable = 0;
	int r = hot_space(fs, &used, &avail);
	if (r >= 0)
		r = catalog_containers_foreach(reader, 0, count_reclaimable, &reclaimable);
	if (r < 0)
		return r;
	reclaimable = MIN(reclaimable, used);
	used -= reclaimable;
	avail += reclaimable;
	bool draining = atomic_load(&fs->policy_draining);
	*ret = space_needed(fs, used, avail, reserve, draining);
	uint64_t size = used + avail;
	const ConfigTier *hot = hot_config(fs);
	if (update)
		atomic_store(&fs->policy_draining, used > size / 100 * hot->high_watermark ||
							   (draining && used > size / 100 * hot->low_watermark));
	return 0;
}

static int hot_space_needed(Fs *fs, Catalog *reader, uint64_t reserve, uint64_t *ret) {
	return hot_space_measure(fs, reader, reserve, true, ret);
}

/* Where a sealed file on its tier goes by policy, and after how long: its class's rule off the hot tier, its tier's below. */
static bool policy_rule(Fs *fs, const CatalogInode *ci, uint32_t *ret_target, uint64_t *ret_after) {
	if (ci->tier == 0) {
		const ConfigClassPolicy *p = tier_class_policy(fs->config, (TierFileClass) ci->file_class);
		if (!p || p->target_tier == 0)
			return false;
		*ret_target = p->target_tier;
		*ret_after = p->migrate_after;
	} else {
		const ConfigTier *t = tier_set_config(fs->tiers, ci->tier);
		if (!t || t->target_tier == 0 || !fs_tier_store(fs, ci->tier))
			return false;
		*ret_target = t->target_tier;
		*ret_after = t->migrate_after;
	}
	return fs_tier_store(fs, *ret_target) != NULL;
}

/* Appends c to the growing array *items (*n used of *cap). */
static int candidate_push(Candidate **items, size_t *n, size_t *cap, const Candidate *c) {
	if (*n == *cap) {
		size_t size = *cap ? 2 * *cap : 256;
		Candidate *p = reallocarray(*items, size, sizeof(Candidate));
		if (!p)
			return -ENOMEM;
		*items = p;
		*cap = size;
	}
	(*items)[(*n)++] = *c;
	return 0;
}

static int scan_one(const CatalogInode *ci, void *userdata) {
	Scan *s = userdata;
	TierFileClass class = (TierFileClass) ci->file_class;
	uint32_t target;
	uint64_t after;

	if (class == TIER_CLASS_ARCHIVELOG)
		s->largest_log = MAX(s->largest_log, ci->size);
	if (ci->state != CATALOG_FILE_SEALED || !policy_rule(s->fs, ci, &target, &after))
		return 0;
	return candidate_push(&s->items, &s->n, &s->size,
			      &(Candidate) {
				      .ino = ci->ino,
				      .mtime_ns = ci->mtime_ns,
				      .from = ci->tier,
				      .target = target,
				      .migrate_after = after,
			      });
}

static int candidate_compare(const void *a, const void *b) {
	const Candidate *x = a, *y = b;
	if (x->mtime_ns != y->mtime_ns)
		return x->mtime_ns < y->mtime_ns ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Sleeps until the bytes moved so far fit the bandwidth; -ECANCELED when the worker is stopping. */
static int pace_progress(uint64_t done, uint64_t total, void *userdata) {
	Pace *p = userdata;
	Fs *fs = p->fs;
	uint64_t rate = fs->config->policy_bandwidth;

	(void) total;
	p->bytes += done - MIN(done, p->file_done);
	p->file_done = done;
	if (atomic_load(&fs->policy_stopping))
		return -ECANCELED;
	if (rate == 0)
		return 0;
	int64_t due_ns = p->start_ns + (int64_t) ((double) p->bytes / (double) rate * 1e9);
	int64_t wait_ns = due_ns - clock_ns(CLOCK_MONOTONIC);
	if (wait_ns <= 0)
		return 0;
	struct timespec until = monotonic_after(wait_ns);
	pthread_mutex_lock(&fs->policy_lock);
	while (!fs->policy_stop && clock_ns(CLOCK_MONOTONIC) < due_ns)
		if (pthread_cond_timedwait(&fs->policy_cond, &fs->policy_lock, &until) == ETIMEDOUT)
			break;
	bool stop = fs->policy_stop;
	pthread_mutex_unlock(&fs->policy_lock);
	return stop ? -ECANCELED : 0;
}

static void status_moving(Fs *fs, uint64_t ino, const char *reason) {
	pthread_mutex_lock(&fs->policy_lock);
	fs->policy_status.moving_ino = ino;
	fs->policy_status.reason = reason;
	pthread_mutex_unlock(&fs->policy_lock);
}

/* One pass: scan, then move what is due, oldest first.  Returns -ECANCELED when stopped. */
static int policy_pass(Fs *fs, Catalog *reader) {
	Scan s = { .fs = fs };
	Pace pace = { .fs = fs };
	uint64_t used = 0, avail = 0, need = 0, moved = 0, failed = 0;
	int r;

	r = hot_space(fs, &used, &avail);
	if (r < 0)
		return log_warning_errno(r, "Policy: cannot measure the hot tier %s: %m", fs->hot_path);
	r = catalog_files_foreach(reader, scan_one, &s);
	if (r < 0) {
		free(s.items);
		return log_warning_errno(r, "Policy: cannot read the catalog: %m");
	}
	uint64_t reserve = reserve_of(fs, s.largest_log, used + avail);
	atomic_store(&fs->policy_reserve, reserve);
	r = hot_space_needed(fs, reader, reserve, &need);
	if (r < 0) {
		free(s.items);
		return log_warning_errno(r, "Policy: cannot measure the hot tier %s: %m", fs->hot_path);
	}
	bool short_of_space = need > 0;
	/* No candidates, no array: qsort() must not see NULL even with nothing to sort. */
	if (s.n > 0)
		qsort(s.items, s.n, sizeof(Candidate), candidate_compare);

	int64_t now = clock_ns(CLOCK_REALTIME);
	/* From here, not from the scan: a long scan must not earn the moves a burst. */
	pace.start_ns = clock_ns(CLOCK_MONOTONIC);
	for (size_t k = 0; k < s.n && !atomic_load(&fs->policy_stopping); k++) {
		const Candidate *c = &s.items[k];
		bool old = c->migrate_after > 0 && now - c->mtime_ns >= (int64_t) c->migrate_after * 1000000000;
		if (!old && (need == 0 || c->from != 0))
			continue;
		/* A pin set after this check is safe too: tierctl pin pins first, then recalls. */
		if (catalog_pinned(reader, c->ino) > 0)
			continue;
		TierMoveResult res;
		status_moving(fs, c->ino, old ? "age" : "space");
		pace.file_done = 0;
		r = tier_mover_move(fs->mover, c->ino, c->target, pace_progress, &pace, &res);
		status_moving(fs, 0, NULL);
		if (r == -ECANCELED)
			break;
		if (r == -ESTALE || r == -ENOENT || r == -EMEDIUMTYPE || r == 0) {
			log_debug("policy: inode %llu changed since the scan, left where it is (%s)",
				  (unsigned long long) c->ino, r == 0 ? "already moved" : strerror(-r));
			continue;
		}
		if (r < 0) {
			/* One line per pass: a full or dead target fails every file the same way. */
			if (failed++ == 0)
				log_warning_errno(r, "Policy: failed to move inode %llu to tier %u (it stays where it is): %m",
						  (unsigned long long) c->ino, (unsigned) c->target);
			continue;
		}
		moved++;
		/* Without a measure, space no longer drives this pass: the next one measures again. */
		if (need > 0 && c->from == 0 && hot_space_needed(fs, reader, reserve, &need) < 0)
			need = 0;
		pthread_mutex_lock(&fs->policy_lock);
		fs->policy_status.files_moved++;
		fs->policy_status.bytes_moved += res.bytes;
		pthread_mutex_unlock(&fs->policy_lock);
	}
	/* The moved files join their tier's description (disaster recovery). */
	if (moved > 0)
		(void) fs_tiers_describe(fs);
	if (moved > 0 || failed > 0)
		log_info("policy: moved %llu files%s, %llu failed", (unsigned long long) moved,
			 short_of_space ? " (it was short of space)" : "", (unsigned long long) failed);
	free(s.items);
	pthread_mutex_lock(&fs->policy_lock);
	fs->policy_status.failed += failed;
	pthread_mutex_unlock(&fs->policy_lock);
	return atomic_load(&fs->policy_stopping) ? -ECANCELED : 0;
}

static void *policy_main(void *userdata) {
	Fs *fs = userdata;
	Catalog *reader = NULL;

	/* Background work yields the CPU to the FUSE threads (the move's I/O is paced, invariant 4). */
	if (setpriority(PRIO_PROCESS, (id_t) gettid(), POLICY_NICE) < 0)
		log_debug_errno(errno, "policy: cannot lower the worker's priority: %m");

	pthread_mutex_lock(&fs->policy_lock);
	while (!fs->policy_stop) {
		fs->policy_wake = false;
		pthread_mutex_unlock(&fs->policy_lock);

		int r = reader ? 0 : catalog_open_reader(fs->catalog, &reader);
		if (r < 0)
			log_warning_errno(r, "Policy: cannot open a catalog reader: %m");
		else
			r = policy_pass(fs, reader);

		pthread_mutex_lock(&fs->policy_lock);
		int64_t now = clock_ns(CLOCK_REALTIME) / 1000000000;
		fs->policy_status.last_run = now;
		fs->policy_status.next_run = now + (int64_t) fs->policy_interval_s;
		if (r == -ECANCELED)
			break;
		struct timespec until = monotonic_after((int64_t) fs->policy_interval_s * 1000000000);
		while (!fs->policy_stop && !fs->policy_wake)
			if (pthread_cond_timedwait(&fs->policy_cond, &fs->policy_lock, &until) == ETIMEDOUT)
				break;
	}
	pthread_mutex_unlock(&fs->policy_lock);
	catalog_close(reader);
	return NULL;
}

/* ---- outlook: what the next passes will move, for tierctl report ---- */

typedef struct OutlookScan {
	Fs *fs;
	FsPolicyOutlook *out;
	Candidate *space;         /* every file the policy may move, for the oldest-first walk */
	size_t n_space, size_space;
	uint64_t largest_log;
} OutlookScan;

static void outlook_add(FsPolicyOutlookClass *oc, FsPolicyOutlookWhen when, uint64_t bytes) {
	oc->files[when]++;
	oc->bytes[when] += bytes;
}

static int outlook_one(const CatalogInode *ci, void *userdata) {
	OutlookScan *o = userdata;
	TierFileClass class = (TierFileClass) ci->file_class;

	if (class == TIER_CLASS_ARCHIVELOG)
		o->largest_log = MAX(o->largest_log, ci->size);
	if (ci->tier != 0 || class >= _TIER_CLASS_MAX)
		return 0;
	const ConfigClassPolicy *p = tier_class_policy(o->fs->config, class);
	if (!p || p->target_tier == 0 || !fs_tier_store(o->fs, p->target_tier))
		return 0;
	FsPolicyOutlookClass *oc = &o->out->classes[class];
	oc->target = p->target_tier;
	/* A raw file's size is its staging file's (the catalog's is advisory): it moves once sealed. */
	uint64_t size = ci->size;
	struct stat st;
	if (ci->state != CATALOG_FILE_SEALED && fs_staging_stat(o->fs, 0, ci->ino, &st) >= 0)
		size = (uint64_t) st.st_size;
	/* Oldest first, whatever their age, for the space walk after the scan (as a pass does). */
	return candidate_push(&o->space, &o->n_space, &o->size_space,
			      &(Candidate) {
				      .ino = ci->ino,
				      .mtime_ns = ci->mtime_ns,
				      .target = p->target_tier,
				      .migrate_after = p->migrate_after,
				      .size = size,
				      .stored = ci->stored,
				      .file_class = class,
			      });
}

static FsPolicyOutlookWhen outlook_when(const Candidate *c, int64_t now_ns, int64_t *ret_due_s) {
	if (c->migrate_after == 0)
		return _FS_OUTLOOK_NEVER;
	int64_t due_ns = c->mtime_ns + (int64_t) MIN(c->migrate_after, (uint64_t) INT64_MAX / 2000000000) * 1000000000;
	*ret_due_s = due_ns / 1000000000;
	if (due_ns <= now_ns)
		return FS_OUTLOOK_DUE;
	if (due_ns - now_ns <= INT64_C(86400) * 1000000000)
		return FS_OUTLOOK_DAY;
	if (due_ns - now_ns <= INT64_C(7) * 86400 * 1000000000)
		return FS_OUTLOOK_WEEK;
	return FS_OUTLOOK_LATER;
}

int fs_policy_outlook(Fs *fs, Catalog *reader, FsPolicyOutlook *ret) {
	FsPolicyOutlook out = { .enabled = fs->policy_thread_started };
	OutlookScan o = { .fs = fs, .out = &out };
	int64_t now_ns = clock_ns(CLOCK_REALTIME);
	uint64_t used = 0, avail = 0;

	int r = hot_space(fs, &used, &avail);
	if (r >= 0)
		r = catalog_files_foreach(reader, outlook_one, &o);
	if (r >= 0) {
		out.reserve = reserve_of(fs, o.largest_log, used + avail);
		r = hot_space_measure(fs, reader, out.reserve, false, &out.space_needed);
	}
	if (r >= 0 && o.n_space > 0)
		qsort(o.space, o.n_space, sizeof(Candidate), candidate_compare);
	/* Oldest first: what is due by age goes anyway, the rest until the need is met (estimated by stored bytes). */
	uint64_t need = out.space_needed;
	for (size_t k = 0; r >= 0 && k < o.n_space; k++) {
		const Candidate *c = &o.space[k];
		r = catalog_pinned(reader, c->ino);
		if (r != 0)
			continue;
		FsPolicyOutlookClass *oc = &out.classes[c->file_class];
		int64_t due_s = 0;
		FsPolicyOutlookWhen when = outlook_when(c, now_ns, &due_s);
		if (need > 0) {
			need -= MIN(need, c->stored ?: c->size);
			if (when != FS_OUTLOOK_DUE)
				when = FS_OUTLOOK_SPACE;
		}
		if (when == FS_OUTLOOK_DAY || when == FS_OUTLOOK_WEEK || when == FS_OUTLOOK_LATER)
			if (oc->next_due == 0 || due_s < oc->next_due)
				oc->next_due = due_s;
		if (when != _FS_OUTLOOK_NEVER)
			outlook_add(oc, when, c->size);
	}
	free(o.space);
	if (r < 0)
		return r;
	FsPolicyStatus ps;
	fs_policy_status_get(fs, &ps);
	out.next_run = ps.next_run;
	*ret = out;
	return 0;
}

int fs_policy_start(Fs *fs) {
	pthread_condattr_t attr;

	pthread_mutex_init(&fs->policy_lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&fs->policy_cond, &attr);
	pthread_condattr_destroy(&attr);
	/* Until the first pass knows the largest log: the reserve as configured, or none yet. */
	atomic_store(&fs->policy_reserve, hot_config(fs)->reserve);
	fs->policy_status.next_run = clock_ns(CLOCK_REALTIME) / 1000000000;
	int r = -pthread_create(&fs->policy_thread, NULL, policy_main, fs);
	if (r < 0) {
		pthread_cond_destroy(&fs->policy_cond);
		pthread_mutex_destroy(&fs->policy_lock);
		return r;
	}
	fs->policy_thread_started = true;
	return 0;
}

void fs_policy_stop(Fs *fs) {
	if (!fs->policy_thread_started)
		return;
	atomic_store(&fs->policy_stopping, true);
	pthread_mutex_lock(&fs->policy_lock);
	fs->policy_stop = true;
	pthread_cond_broadcast(&fs->policy_cond);
	pthread_mutex_unlock(&fs->policy_lock);
	pthread_join(fs->policy_thread, NULL);
	fs->policy_thread_started = false;
	pthread_cond_destroy(&fs->policy_cond);
	pthread_mutex_destroy(&fs->policy_lock);
}

void fs_policy_status_get(Fs *fs, FsPolicyStatus *ret) {
	if (!fs->policy_thread_started) {
		*ret = (FsPolicyStatus) {};
		return;
	}
	pthread_mutex_lock(&fs->policy_lock);
	*ret = fs->policy_status;
	pthread_mutex_unlock(&fs->policy_lock);
}

uint64_t fs_policy_reserve(Fs *fs) {
	return atomic_load(&fs->policy_reserve);
}
