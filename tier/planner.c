/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * planner.c — what moves where and why: the rules of tier/planner.h, as a
 * pure function.
 *
 * Who asks:
 *   fs/policy.c    a pass of the policy worker: plans the sealed files, then
 *                  moves the AGE and SPACE entries in order, measuring the
 *                  hot tier again after each move off it (tier_plan_respace())
 *   fs/policy.c    tierctl report's outlook (fs_policy_outlook()): plans raw
 *                  files too, as the sealed files they will be, and sums the
 *                  plan per class (tier_plan_outlook())
 *   control/moves.c  tierctl migrate, recall, pin (and --dry-run): one
 *                  verdict per file named (tier_plan_request())
 *
 * Invariants:
 *  1. Deterministic: the same files, state, config and time give the same
 *     plan, in the same order (mtime, then inode).
 *  2. Only the hot tier's files move for space, and only its files count
 *     toward the space estimate; pinned files count nowhere.
 *  3. An entry due by age stays AGE whatever respace says.
 *  4. A HELD entry (the recovery window) never moves, for age or space.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/macros.h"
#include "tier/planner.h"

/* Without an explicit reserve: this many times the largest archived log ... */
#define PLAN_RESERVE_LOGS 4
/* ... but at most this share of the hot filesystem, in percent, so a small hot tier is not all reserve. */
#define PLAN_RESERVE_SHARE_MAX 10

static bool tier_open(const TierPlanState *state, uint32_t n) {
	return n < state->n_tiers && n < CONFIG_TIERS_MAX && state->open[n];
}

bool tier_plan_rule(const Config *config, const TierPlanState *state, const TierPlanFile *f, uint32_t *ret_to,
		    uint64_t *ret_after) {
	uint32_t to;
	uint64_t after;

	if (f->tier == 0) {
		const ConfigClassPolicy *p = tier_class_policy(config, (TierFileClass) f->file_class);
		if (!p || p->target_tier == 0)
			return false;
		to = p->target_tier;
		after = p->migrate_after;
	} else {
		const ConfigTier *t = config_tier_by_number(config, f->tier);
		if (!t || t->target_tier == 0 || !tier_open(state, f->tier))
			return false;
		to = t->target_tier;
		after = t->migrate_after;
	}
	if (!tier_open(state, to))
		return false;
	*ret_to = to;
	*ret_after = after;
	return true;
}

uint64_t tier_plan_reserve(const Config *config, uint64_t largest_log, uint64_t hot_size) {
	const ConfigTier *hot = config_tier_by_number(config, 0);
	if (hot->has_reserve)
		return hot->reserve;
	uint64_t r = largest_log > UINT64_MAX / PLAN_RESERVE_LOGS ? UINT64_MAX : largest_log * PLAN_RESERVE_LOGS;
	return MIN(r, hot_size / 100 * PLAN_RESERVE_SHARE_MAX);
}

uint64_t tier_plan_space_needed(const Config *config, const TierPlanState *state, uint64_t reserve,
				bool *ret_draining) {
	const ConfigTier *hot = config_tier_by_number(config, 0);
	uint64_t reclaimable = MIN(state->hot_reclaimable, state->hot_used);
	uint64_t used = state->hot_used - reclaimable, avail = state->hot_avail + reclaimable;
	/* As df counts: what is used of what is usable (root's reserved blocks are neither). */
	uint64_t size = used + avail, need = 0;
	if (ret_draining)
		*ret_draining = used > size / 100 * hot->high_watermark ||
				(state->draining && used > size / 100 * hot->low_watermark);
	if (size == 0)
		return 0;
	uint64_t low = size / 100 * hot->low_watermark;
	if (used > size / 100 * hot->high_watermark || (state->draining && used > low))
		need = used - low;
	if (avail < reserve)
		need = MAX(need, reserve - avail);
	return need;
}

/* Whether f is an archived log on the hot tier that its class's keep_hot window needs (planner.h). */
static bool in_recovery_window(const Config *config, const TierPlanFile *f, int64_t now_ns) {
	const ConfigClassPolicy *p = tier_class_policy(config, (TierFileClass) f->file_class);
	if (f->tier != 0 || !p || p->keep_hot == 0 || f->log_next_time <= 0)
		return false;
	int64_t window_start = now_ns / 1000000000 - (int64_t) MIN(p->keep_hot, (uint64_t) INT64_MAX / 2);
	return f->log_next_time >= window_start;
}

static int entry_compare(const void *a, const void *b) {
	const TierPlanEntry *x = a, *y = b;
	if (x->mtime_ns != y->mtime_ns)
		return x->mtime_ns < y->mtime_ns ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

int tier_plan_make(const Config *config, const TierPlanFile *files, size_t n, const TierPlanState *state,
		   int64_t now_ns, bool plan_raw, TierPlan *ret) {
	TierPlan p = {};
	uint64_t largest_log = 0;

	for (size_t i = 0; i < n; i++)
		if (files[i].file_class == TIER_CLASS_ARCHIVELOG)
			largest_log = MAX(largest_log, files[i].size);
	p.reserve = tier_plan_reserve(config, largest_log, state->hot_used + state->hot_avail);
	p.space_needed = tier_plan_space_needed(config, state, p.reserve, &p.draining);

	p.entries = n > 0 ? calloc(n, sizeof(TierPlanEntry)) : NULL;
	if (n > 0 && !p.entries)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const TierPlanFile *f = &files[i];
		uint32_t to;
		uint64_t after;
		if ((!f->sealed && !plan_raw) || !tier_plan_rule(config, state, f, &to, &after))
			continue;
		uint64_t bytes = f->sealed ? f->size : f->raw_size;
		TierPlanEntry *e = &p.entries[p.n++];
		*e = (TierPlanEntry) {
			.ino = f->ino,
			.file_class = f->file_class,
			.from = f->tier,
			.to = to,
			.raw = !f->sealed,
			.mtime_ns = f->mtime_ns,
			.bytes = bytes,
			.frees = f->stored ?: bytes,
			.reason = f->pinned ? TIER_REASON_PINNED : TIER_REASON_LATER,
		};
		if (after > 0) {
			e->due_ns = f->mtime_ns + (int64_t) MIN(after, (uint64_t) INT64_MAX / 2000000000) * 1000000000;
			if (e->due_ns <= now_ns && e->reason != TIER_REASON_PINNED)
				e->reason = TIER_REASON_AGE;
		}
		if (e->reason != TIER_REASON_PINNED && in_recovery_window(config, f, now_ns)) {
			e->held_due = e->reason == TIER_REASON_AGE;
			e->reason = TIER_REASON_HELD;
		}
	}
	/* No entries, no array: qsort() must not see NULL even with nothing to sort. */
	if (p.n > 0)
		qsort(p.entries, p.n, sizeof(TierPlanEntry), entry_compare);
	tier_plan_respace(&p, 0, p.space_needed);
	*ret = p;
	return 0;
}

void tier_plan_done(TierPlan *p) {
	free(p->entries);
	*p = (TierPlan) {};
}

void tier_plan_respace(TierPlan *p, size_t k, uint64_t need) {
	size_t end = k;
	/* Past the old last SPACE entry and the need met, nothing changes any more. */
	for (size_t i = k; i < p->n && (need > 0 || i < p->space_end); i++) {
		TierPlanEntry *e = &p->entries[i];
		if (e->from != 0 || e->reason == TIER_REASON_PINNED || e->reason == TIER_REASON_HELD)
			continue;
		if (need > 0) {
			need -= MIN(need, e->frees);
			if (e->reason != TIER_REASON_AGE) {
				e->reason = TIER_REASON_SPACE;
				end = i + 1;
			}
		} else if (e->reason == TIER_REASON_SPACE)
			e->reason = TIER_REASON_LATER;
	}
	p->space_end = MAX(end, MIN(k, p->space_end));
}

void tier_plan_outlook(const TierPlan *p, int64_t now_ns, TierOutlook *ret) {
	TierOutlook o = { .reserve = p->reserve, .space_needed = p->space_needed };

	for (size_t i = 0; i < p->n; i++) {
		const TierPlanEntry *e = &p->entries[i];
		if (e->from != 0 || e->file_class >= _TIER_CLASS_MAX)
			continue;
		TierOutlookClass *oc = &o.classes[e->file_class];
		oc->target = e->to;
		TierOutlookWhen when;
		if (e->reason == TIER_REASON_PINNED)
			continue;
		if (e->reason == TIER_REASON_HELD) {
			oc->held_files++;
			oc->held_bytes += e->bytes;
			oc->held_due_files += e->held_due;
			continue;
		} else if (e->reason == TIER_REASON_AGE)
			when = TIER_OUTLOOK_DUE;
		else if (e->reason == TIER_REASON_SPACE)
			when = TIER_OUTLOOK_SPACE;
		else if (e->due_ns == 0)
			when = _TIER_OUTLOOK_NEVER;
		else if (e->due_ns - now_ns <= INT64_C(86400) * 1000000000)
			when = TIER_OUTLOOK_DAY;
		else if (e->due_ns - now_ns <= INT64_C(7) * 86400 * 1000000000)
			when = TIER_OUTLOOK_WEEK;
		else
			when = TIER_OUTLOOK_LATER;
		if (when == TIER_OUTLOOK_DAY || when == TIER_OUTLOOK_WEEK || when == TIER_OUTLOOK_LATER) {
			int64_t due_s = e->due_ns / 1000000000;
			if (oc->next_due == 0 || due_s < oc->next_due)
				oc->next_due = due_s;
		}
		if (when != _TIER_OUTLOOK_NEVER) {
			oc->files[when]++;
			oc->bytes[when] += e->bytes;
		}
	}
	*ret = o;
}

TierRequestVerdict tier_plan_request(const Config *config, const TierPlanFile *f, uint32_t to, const char **ret_why) {
	const ConfigClassPolicy *class_policy;

	*ret_why = NULL;
	if (!tier_class_is_sealed((TierFileClass) f->file_class) && !f->sealed) {
		*ret_why = "passthrough class (online redo, control file, flashback log, or rewritten in place): stays raw "
			   "on the hot tier";
		return to == 0 ? TIER_REQUEST_ALREADY : TIER_REQUEST_SKIP;
	}
	if (f->tier == to)
		return TIER_REQUEST_ALREADY;
	if (to != 0 && (class_policy = tier_class_policy(config, (TierFileClass) f->file_class)) && class_policy->pinned) {
		*ret_why = "its class is pinned to the hot tier (pin = yes in the config)";
		return TIER_REQUEST_SKIP;
	}
	if (to != 0 && f->pinned) {
		*ret_why = "pinned to the hot tier (tierctl unpin lets it move)";
		return TIER_REQUEST_SKIP;
	}
	return TIER_REQUEST_MOVE;
}
