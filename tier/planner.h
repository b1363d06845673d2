/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The planner (planner.c): what moves where, and why.  A pure function of
 * the catalog's file records, the tiers' state and the config: it reads
 * nothing, measures nothing and keeps no state, so the policy worker's
 * pass, tierctl report's outlook and tierctl migrate --dry-run decide by
 * the same rules, and a unit test can drive it with any tiers it likes.
 *
 * The rules:
 *  - A file moves only between tiers that are open, and only if it has a
 *    rule: on the hot tier, its class's target (not for passthrough and
 *    pinned classes, which have none); on a lower tier, that tier's target,
 *    which comes after it (so moves never go round in a circle).
 *  - Age: a file moves once now - mtime >= the rule's migrate_after (0:
 *    never by age).
 *  - Space, hot tier only: while its use is above high_watermark (and
 *    then down to low_watermark: the marks are a hysteresis), or its free
 *    space below the reserve, its files move oldest first, whatever their
 *    age, until the need is met.  The planner estimates what a move frees
 *    by the file's stored bytes; a pass measures again after each move and
 *    tells the planner (tier_plan_respace()), as chunks shared with files
 *    that stay free nothing.
 *  - The reserve: the configured one, else 4 x the largest archived log,
 *    at most 10% of the hot filesystem.
 *  - Space is counted as the collector will leave it: the dead bytes of
 *    full containers it will compact or delete count as free.
 *  - The recovery window (keep_hot in a class section): an archived log on
 *    the hot tier whose changes reach into the last keep_hot seconds
 *    (next_time >= now - keep_hot, by its own header) is HELD there,
 *    whatever its age and whatever the watermarks say, so a recovery to any
 *    point of that window reads only hot logs, and no migration opens a gap
 *    in the window's run on the hot tier.  A log without a known header is
 *    not held.
 *  - Pins (tierctl pin) keep a file where it is: the policy never moves it,
 *    and tierctl migrate skips it; a pinned class (pin = yes) has no rule.
 *  - Order: oldest mtime first, then inode number.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "tier/class.h"

/* One regular file as the catalog records it: plain data, filled by the caller. */
typedef struct TierPlanFile {
	uint64_t ino;
	uint32_t file_class;      /* TierFileClass */
	uint32_t tier;            /* sealed: the tier holding its chunks; raw: its staging file's */
	bool sealed;              /* false: raw, moves once sealed */
	bool pinned;              /* tierctl pin */
	int64_t mtime_ns;
	uint64_t size;            /* logical bytes, the catalog's (advisory for a raw file) */
	uint64_t raw_size;        /* a raw file: its staging file's size, what it counts by when planned */
	uint64_t stored;          /* sealed: frame bytes of its distinct chunks */
	int64_t log_next_time;    /* an archived log: its header's next_time (Unix seconds); 0: none known */
} TierPlanFile;

/* The tiers as they are now. */
typedef struct TierPlanState {
	uint32_t n_tiers;
	bool open[CONFIG_TIERS_MAX];  /* its store is reachable */
	/* The hot tier's filesystem, as df counts it: bytes used, and free for an unprivileged writer. */
	uint64_t hot_used;
	uint64_t hot_avail;
	uint64_t hot_reclaimable; /* of hot_used, what the collector will give back */
	bool draining;            /* the last look found it above the high watermark, and not below the low one since */
} TierPlanState;

typedef enum TierPlanReason {
	TIER_REASON_AGE,          /* due by age: moves at the next pass */
	TIER_REASON_SPACE,        /* not due, but the hot tier needs space: moves at the next pass, oldest first */
	TIER_REASON_LATER,        /* moves later by age (due_ns), or never by age (due_ns 0) unless for space */
	TIER_REASON_PINNED,       /* it has a rule, but tierctl pin keeps it where it is */
	TIER_REASON_HELD,         /* an archived log inside its class's recovery window (keep_hot): stays hot */
	_TIER_REASON_MAX,
} TierPlanReason;

typedef struct TierPlanEntry {
	uint64_t ino;
	uint32_t file_class;
	uint32_t from;            /* the tier it is on */
	uint32_t to;              /* the tier its rule sends it to */
	bool raw;                 /* not sealed yet: moves once it is */
	int64_t mtime_ns;
	int64_t due_ns;           /* when it is due by age; 0: never by age */
	uint64_t bytes;           /* logical (a raw file's: its staging file's) */
	uint64_t frees;           /* the estimate of what moving it frees: its stored bytes, else bytes */
	TierPlanReason reason;
	bool held_due;            /* HELD, and due by age: the window is all that keeps it */
} TierPlanEntry;

typedef struct TierPlan {
	TierPlanEntry *entries;   /* every file with a rule, oldest first; owned */
	size_t n;
	uint64_t reserve;         /* free space it keeps on the hot tier */
	uint64_t space_needed;    /* bytes the hot tier must free now for its watermarks and reserve */
	bool draining;            /* the watermarks' hysteresis after this look: a pass keeps it for the next */
	size_t space_end;         /* one past the last TIER_REASON_SPACE entry (0: none) */
} TierPlan;

/*
 * Where f goes by its rule (*ret_to) and after how long (*ret_after,
 * seconds; 0: never by age); false when it has none (passthrough or pinned
 * class, no target, a tier not open).  Pins play no part here.
 */
bool tier_plan_rule(const Config *config, const TierPlanState *state, const TierPlanFile *f, uint32_t *ret_to,
		    uint64_t *ret_after);

/* The hot tier's reserve: the configured one, else the rule above from the largest archived log. */
uint64_t tier_plan_reserve(const Config *config, uint64_t largest_log, uint64_t hot_size);

/*
 * Bytes the hot tier must free for its watermarks and reserve, as state
 * says it is (hot_reclaimable counted free); 0 when it is fine.
 * *ret_draining (optional) gets the hysteresis after this look.
 */
uint64_t tier_plan_space_needed(const Config *config, const TierPlanState *state, uint64_t reserve,
				bool *ret_draining);

/*
 * The plan for files[0..n): an entry per file with a rule (sealed files;
 * raw ones too with plan_raw, as the sealed files they will be), by the
 * rules above at time now_ns (CLOCK_REALTIME).  Free it with
 * tier_plan_done().  Returns 0 or -ENOMEM (*ret untouched).
 */
int tier_plan_make(const Config *config, const TierPlanFile *files, size_t n, const TierPlanState *state,
		   int64_t now_ns, bool plan_raw, TierPlan *ret);
void tier_plan_done(TierPlan *p);

/*
 * The hot tier was measured again before entry k (a pass, after a move or
 * a file it could not move): it needs `need` bytes now.  Marks the hot
 * tier's entries from k on that are not due by age: SPACE, oldest first,
 * while the estimate says the need is not met, LATER after.
 */
void tier_plan_respace(TierPlan *p, size_t k, uint64_t need);

/* When the files of a class on the hot tier move, as the plan says (tier_plan_outlook()). */
typedef enum TierOutlookWhen {
	TIER_OUTLOOK_DUE,         /* due by age: at the next pass */
	TIER_OUTLOOK_SPACE,       /* not due, but the oldest while the hot tier needs space: at the next pass */
	TIER_OUTLOOK_DAY,         /* due by age within a day */
	TIER_OUTLOOK_WEEK,        /* within a week */
	TIER_OUTLOOK_LATER,
	_TIER_OUTLOOK_MAX,
	_TIER_OUTLOOK_NEVER = _TIER_OUTLOOK_MAX, /* no age rule and no need of space */
} TierOutlookWhen;

typedef struct TierOutlookClass {
	uint32_t target;          /* the tier its files go to; 0: no file of the class has a rule */
	uint64_t files[_TIER_OUTLOOK_MAX];
	uint64_t bytes[_TIER_OUTLOOK_MAX]; /* logical */
	int64_t next_due;         /* Unix seconds of the first move by age not yet due; 0: none */
	uint64_t held_files;      /* held on the hot tier by the recovery window (keep_hot), and their logical bytes */
	uint64_t held_bytes;
	uint64_t held_due_files;  /* of those, due by age: they would move at the next pass without the window */
} TierOutlookClass;

typedef struct TierOutlook {
	uint64_t reserve;         /* free space the policy keeps on the hot tier */
	uint64_t space_needed;    /* bytes the hot tier must free now */
	TierOutlookClass classes[_TIER_CLASS_MAX];
} TierOutlook;

/*
 * What plan p (made at now_ns) moves off the hot tier, per class and when:
 * pinned files counted nowhere, held ones (keep_hot) in held_*, every
 * other hot-tier entry in one bucket (or none: never).  Can't fail.
 */
void tier_plan_outlook(const TierPlan *p, int64_t now_ns, TierOutlook *ret);

/* What a move tierctl asked for does to one file (tier_plan_request()). */
typedef enum TierRequestVerdict {
	TIER_REQUEST_MOVE,        /* it moves */
	TIER_REQUEST_ALREADY,     /* it is there already */
	TIER_REQUEST_SKIP,        /* it may not move there (*ret_why says why) */
	_TIER_REQUEST_MAX,
} TierRequestVerdict;

/*
 * Whether f moves to tier `to` when tierctl migrate or recall names it: a
 * passthrough file stays raw on the hot tier, a pinned one or one of a
 * pinned class stays on the hot tier.  *ret_why gets a static reason
 * when a rule keeps it where it is (a passthrough file is "already" on the
 * hot tier for a recall, and says why), NULL otherwise.  The tiers' reachability is the caller's
 * to check.
 */
TierRequestVerdict tier_plan_request(const Config *config, const TierPlanFile *f, uint32_t to, const char **ret_why);
