/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * policy.c — the policy worker: executes the planner's plan (tier/planner.h),
 * moving sealed files off the hot tier by age and by the hot tier's use, and
 * on down the lower tiers by age, without being asked; and the outlook of
 * tierctl report, the same planner's plan summed up.
 *
 * One thread, at nice 10, wakes every policy_interval seconds, or sooner
 * when a close finds the hot tier above its high watermark or below its
 * reserve, and makes one pass:
 *
 *   idle --interval or poke--> survey: the catalog's files, the hot tier's use
 *     ^                         |  tier_plan_make(): an entry per file with a rule,
 *     |                         v  oldest first, each with its reason
 *     +---- plan done ---- move the next AGE or SPACE entry (tier_mover_move(), paced) --+
 *     |                         ^                                                     |
 *     |                         +-- measure the hot tier, tier_plan_respace() <-------+
 *     +---- stop: the move in flight is cancelled (its copy is garbage for the target's collector)
 *
 * The rules (which files, where, when, in which order, the watermarks and
 * the reserve) are the planner's; this file measures, executes and paces.
 *
 * Invariants:
 *  1. Every move goes through the mover (tier/move.c): one at a time (its
 *     lock is shared with tierctl migrate and recall), crash-safe at every
 *     step, and refused (-ESTALE, -EMEDIUMTYPE, -ENOENT) for a file
 *     changed, unsealed or deleted since the survey, which this pass then
 *     skips.  A pin set since the survey is honoured: it is looked up again
 *     before each move.
 *  2. Space is judged from the hot filesystem's statfs less what the
 *     collector will give back: the dead bytes of the hot tier's full
 *     containers that are less than DEDUP_GC_LIVE_THRESHOLD_DEFAULT live
 *     (deleted or compacted at its next run; the open container is never
 *     compacted).  Counting them as used would demote more files each pass
 *     until the collector ran; counting every dead byte would stop early,
 *     as a container mostly live keeps its dead frames.  It is measured
 *     again after every move off the hot tier, and the rest of the plan
 *     marked again by what it needs then (tier_plan_respace()), so a file
 *     whose chunks are shared with files that stay frees nothing and the
 *     next one moves too.  The price: demotion may overshoot by up to half
 *     a container (a container frees nothing until it is less than half
 *     live), and the files of the open container free nothing until it is
 *     full.
 *  3. The worker reads the catalog through its own read-only connection
 *     (catalog_open_reader()), so a survey never holds the daemon's catalog
 *     lock against the filesystem.
 *  4. Bytes moved are paced to policy_bandwidth per second, measured from
 *     the copy's progress, so a backlog never takes the disks from the
 *     archiver; the pacing sleeps on the worker's condition variable and
 *     stopping wakes it at once.  On top of that cap, the move yields to
 *     foreground I/O (throttle.c, background_share; fs/inode-move.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/macros.h"
#include "fs/fs-internal.h"

#define POLICY_NICE 10

typedef struct Pace {
	Fs *fs;
	int64_t start_ns;
	uint64_t bytes;           /* moved since start_ns */
	uint64_t file_done;       /* of the file being moved, at its last progress call */
} Pace;

/* The catalog's regular files, as the planner takes them. */
typedef struct Survey {
	TierPlanFile *files;
	size_t n, cap;
} Survey;

static struct timespec monotonic_after(int64_t ns) {
	int64_t t = clock_ns(CLOCK_MONOTONIC) + ns;
	return (struct timespec) { .tv_sec = t / 1000000000, .tv_nsec = t % 1000000000 };
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

void fs_policy_check_space(Fs *fs) {
	TierPlanState st = { .draining = atomic_load(&fs->policy_draining) };

	if (!fs->policy_thread_started || hot_space(fs, &st.hot_used, &st.hot_avail) < 0)
		return;
	if (tier_plan_space_needed(fs->config, &st, atomic_load(&fs->policy_reserve), NULL) == 0)
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

/* The tiers as the planner sees them: which are open, and the hot tier's use (invariant 2). */
static int measure(Fs *fs, Catalog *reader, TierPlanState *ret) {
	TierPlanState st = { .n_tiers = tier_set_count(fs->tiers), .draining = atomic_load(&fs->policy_draining) };
	for (uint32_t n = 0; n < st.n_tiers && n < CONFIG_TIERS_MAX; n++)
		st.open[n] = tier_set_store(fs->tiers, n) != NULL && !tier_set_fenced(fs->tiers, n);
	int r = hot_space(fs, &st.hot_used, &st.hot_avail);
	if (r >= 0)
		r = catalog_containers_foreach(reader, 0, count_reclaimable, &st.hot_reclaimable);
	if (r < 0)
		return r;
	*ret = st;
	return 0;
}

/* What the hot tier needs now, measured again; a pass keeps the hysteresis it finds. */
static int hot_space_needed(Fs *fs, Catalog *reader, uint64_t reserve, uint64_t *ret) {
	TierPlanState st;
	bool draining;
	int r = measure(fs, reader, &st);
	if (r < 0)
		return r;
	*ret = tier_plan_space_needed(fs->config, &st, reserve, &draining);
	atomic_store(&fs->policy_draining, draining);
	return 0;
}

static int survey_one(const CatalogInode *ci, void *userdata) {
	Survey *s = userdata;
	if (ARRAY_RESERVE_ONE(s->files, s->cap, s->n, 256) < 0)
		return -ENOMEM;
	s->files[s->n++] = (TierPlanFile) {
		.ino = ci->ino,
		.file_class = ci->file_class,
		.tier = ci->tier,
		.sealed = ci->state == CATALOG_FILE_SEALED,
		.mtime_ns = ci->mtime_ns,
		.size = ci->size,
		.raw_size = ci->size,
		.stored = ci->stored,
	};
	return 0;
}

/*
 * Every regular file of the catalog.  outlook: with the pins of those with
 * a rule (looked up after the walk, as the catalog is locked during it), and
 * raw files on the hot tier with their staging file's size (the catalog's is
 * advisory).  A pass leaves pins out: it looks each one up right before its
 * move, so a pin set after the survey counts too, and a pinned file it
 * meets makes it mark the rest of the plan again (tier_plan_respace()).
 */
static int survey(Fs *fs, Catalog *reader, const TierPlanState *state, bool outlook, TierPlanFile **ret,
		  size_t *ret_n) {
	Survey s = {};
	int r = catalog_files_foreach(reader, survey_one, &s);
	const ConfigClassPolicy *logs = tier_class_policy(fs->config, TIER_CLASS_ARCHIVELOG);
	/* The recovery window (keep_hot) goes by what each hot log's header says: its end of changes. */
	for (size_t i = 0; r >= 0 && logs && logs->keep_hot > 0 && i < s.n; i++) {
		TierPlanFile *f = &s.files[i];
		CatalogArchivelog a;
		if (f->file_class == TIER_CLASS_ARCHIVELOG && f->tier == 0 && catalog_archivelog_get(reader, f->ino, &a) >= 0)
			f->log_next_time = a.next_time;
	}
	for (size_t i = 0; r >= 0 && outlook && i < s.n; i++) {
		TierPlanFile *f = &s.files[i];
		uint32_t to;
		uint64_t after;
		if (!tier_plan_rule(fs->config, state, f, &to, &after))
			continue;
		r = catalog_pinned(reader, f->ino);
		f->pinned = r > 0;
		struct stat st;
		if (!f->sealed && f->tier == 0 && fs_staging_stat(fs, 0, f->ino, &st) >= 0)
			f->raw_size = (uint64_t) st.st_size;
	}
	if (r < 0) {
		free(s.files);
		return r;
	}
	*ret = s.files;
	*ret_n = s.n;
	return 0;
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

/* One pass: survey, plan, then move what the plan says, oldest first.  Returns -ECANCELED when stopped. */
static int policy_pass(Fs *fs, Catalog *reader) {
	TierPlanState state;
	TierPlanFile *files = NULL;
	TierPlan plan = {};
	Pace pace = { .fs = fs };
	uint64_t need = 0, moved = 0, failed = 0;
	size_t n_files = 0;
	int r;

	r = measure(fs, reader, &state);
	if (r < 0)
		return log_warning_errno(r, "Policy: cannot measure the hot tier %s: %m", fs->hot_path);
	r = survey(fs, reader, &state, false, &files, &n_files);
	if (r < 0)
		return log_warning_errno(r, "Policy: cannot read the catalog: %m");
	r = tier_plan_make(fs->config, files, n_files, &state, clock_ns(CLOCK_REALTIME), false, &plan);
	free(files);
	if (r < 0)
		return log_warning_errno(r, "Policy: cannot make a plan: %m");
	atomic_store(&fs->policy_reserve, plan.reserve);
	atomic_store(&fs->policy_draining, plan.draining);
	need = plan.space_needed;
	bool short_of_space = need > 0;

	/* From here, not from the survey: a long survey must not earn the moves a burst. */
	pace.start_ns = clock_ns(CLOCK_MONOTONIC);
	/* Set by an attempt to move a hot-tier file: the plan's space estimate is to be made again from here. */
	bool respace = false;
	for (size_t k = 0; k < plan.n && !atomic_load(&fs->policy_stopping); k++) {
		const TierPlanEntry *e = &plan.entries[k];
		if (e->from == 0 && respace) {
			tier_plan_respace(&plan, k, need);
			respace = false;
		}
		if (e->reason != TIER_REASON_AGE && e->reason != TIER_REASON_SPACE)
			continue;
		respace = e->from == 0;
		/* A pin set after this check is safe too: tierctl pin pins first, then recalls. */
		if (catalog_pinned(reader, e->ino) > 0)
			continue;
		TierMoveResult res;
		status_moving(fs, e->ino, e->reason == TIER_REASON_AGE ? "age" : "space");
		pace.file_done = 0;
		r = tier_mover_move(fs->mover, e->ino, e->to, pace_progress, &pace, &res);
		status_moving(fs, 0, NULL);
		if (r == -ECANCELED)
			break;
		if (r == -ESTALE || r == -ENOENT || r == -EMEDIUMTYPE || r == 0) {
			log_debug("policy: inode %llu changed since the scan, left where it is (%s)",
				  (unsigned long long) e->ino, r == 0 ? "already moved" : strerror(-r));
			continue;
		}
		if (r < 0) {
			/* One line per pass: a full or dead target fails every file the same way. */
			if (failed++ > 0)
				continue;
			if (r == -ENOSPC && fs_catalog_short(fs, e->bytes, (TierFileClass) e->file_class))
				log_warning("Policy: failed to move inode %llu to tier %u (it stays where it is): no room left "
					    "on the hot tier's filesystem for the catalog to record the move",
					    (unsigned long long) e->ino, (unsigned) e->to);
			else
				log_warning_errno(r, "Policy: failed to move inode %llu to tier %u (it stays where it is): %m",
						  (unsigned long long) e->ino, (unsigned) e->to);
			continue;
		}
		moved++;
		/* Without a measure, space no longer drives this pass: the next one measures again. */
		if (need > 0 && e->from == 0 && hot_space_needed(fs, reader, plan.reserve, &need) < 0)
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
	tier_plan_done(&plan);
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

int fs_policy_outlook(Fs *fs, Catalog *reader, FsPolicyOutlook *ret) {
	FsPolicyOutlook out = { .enabled = fs->policy_thread_started };
	TierPlanState state;
	TierPlanFile *files = NULL;
	TierPlan plan;
	size_t n_files = 0;
	int64_t now_ns = clock_ns(CLOCK_REALTIME);

	int r = measure(fs, reader, &state);
	if (r >= 0)
		r = survey(fs, reader, &state, true, &files, &n_files);
	if (r >= 0) {
		r = tier_plan_make(fs->config, files, n_files, &state, now_ns, true, &plan);
		free(files);
	}
	if (r < 0)
		return r;
	tier_plan_outlook(&plan, now_ns, &out.plan);
	tier_plan_done(&plan);
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
	atomic_store(&fs->policy_reserve, tier_set_config(fs->tiers, 0)->reserve);
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
	ret->running = true;
}

uint64_t fs_policy_reserve(Fs *fs) {
	return atomic_load(&fs->policy_reserve);
}
