/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests for tier/planner.c: the rules the policy worker, tierctl
 * report's outlook and tierctl migrate decide by, driven with synthetic
 * file records and tier states (no mount, no FUSE, no catalog).  Each case
 * names the end-to-end test whose rule it pins down (tests/e2e/tier/).
 */
#undef NDEBUG
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/macros.h"
#include "tier/planner.h"

#define S INT64_C(1000000000)
#define DAY (INT64_C(86400) * S)
#define MiB (UINT64_C(1) << 20)
#define NOW (INT64_C(1767225600) * S) /* 2026-01-01 */

static unsigned cases;

/*
 * Three tiers: hot, capacity, archive; archivelog and backuppiece go to
 * capacity after a day (the defaults).  hot: the hot tier's keys (NULL:
 * watermarks 60%/40%), capacity: the capacity tier's, extra: more sections.
 */
static void config_of(const char *hot, const char *capacity, const char *extra, Config *ret) {
	_cleanup_free_ char *text = NULL, *error = NULL;
	assert(asprintf(&text,
			"[fratier]\n"
			"data_dir = /srv/fratier\n"
			"[tier hot]\n"
			"%s"
			"[tier capacity]\n"
			"%s"
			"[tier archive]\n"
			"role = capacity\n"
			"path = /srv/archive\n"
			"%s",
			hot ?: "high_watermark = 60%\nlow_watermark = 40%\n", capacity ?: "", extra ?: "") > 0);
	int r = config_parse(text, strlen(text), "test.conf", ret, &error);
	if (r < 0) {
		fprintf(stderr, "config: %s\n", error ?: "?");
		abort();
	}
}

/* Every tier open; the hot filesystem 100 MiB with used MiB in use. */
static TierPlanState state_of(uint64_t used) {
	return (TierPlanState) {
		.n_tiers = 3,
		.open = { true, true, true },
		.hot_used = used * MiB,
		.hot_avail = (100 - used) * MiB,
	};
}

static TierPlanFile sealed(uint64_t ino, TierFileClass c, uint32_t tier, int64_t age, uint64_t stored) {
	return (TierPlanFile) {
		.ino = ino,
		.file_class = c,
		.tier = tier,
		.sealed = true,
		.mtime_ns = NOW - age,
		.size = 2 * stored,
		.raw_size = 2 * stored,
		.stored = stored,
	};
}

static const TierPlanEntry *entry_of(const TierPlan *p, uint64_t ino) {
	for (size_t i = 0; i < p->n; i++)
		if (p->entries[i].ino == ino)
			return &p->entries[i];
	return NULL;
}

static void plan_of(const Config *c, const TierPlanFile *files, size_t n, const TierPlanState *st, bool raw,
		    TierPlan *ret) {
	assert(tier_plan_make(c, files, n, st, NOW, raw, ret) == 0);
}

/* test_policy.py, age: sealed logs and pieces older than their class's migrate_after move, copies never. */
static void test_age(void) {
	Config c;
	config_of(NULL, NULL, NULL, &c);
	TierPlanState st = state_of(10);
	TierPlanFile f[] = {
		sealed(1, TIER_CLASS_ARCHIVELOG, 0, 2 * DAY, MiB),
		sealed(2, TIER_CLASS_ARCHIVELOG, 0, DAY - S, MiB),
		sealed(3, TIER_CLASS_BACKUPPIECE, 0, DAY, MiB),
		sealed(4, TIER_CLASS_IMAGECOPY, 0, 30 * DAY, MiB),
		sealed(5, TIER_CLASS_PASSTHROUGH, 0, 30 * DAY, MiB),
		sealed(6, TIER_CLASS_OTHER, 0, 30 * DAY, MiB),
	};
	TierPlan p;
	plan_of(&c, f, ELEMENTSOF(f), &st, false, &p);
	assert(p.n == 3 && p.space_needed == 0);
	assert(entry_of(&p, 1)->reason == TIER_REASON_AGE && entry_of(&p, 1)->to == 1);
	assert(entry_of(&p, 2)->reason == TIER_REASON_LATER && entry_of(&p, 2)->due_ns == NOW + S);
	/* Due exactly now: due. */
	assert(entry_of(&p, 3)->reason == TIER_REASON_AGE);
	assert(!entry_of(&p, 4) && !entry_of(&p, 5) && !entry_of(&p, 6));
	tier_plan_done(&p);
	config_done(&c);
	cases++;
}

/* A class's own target and migrate_after, by name; a target not open moves nothing. */
static void test_targets(void) {
	Config c;
	config_of(NULL, NULL, "[class imagecopy]\ntarget = archive\nmigrate_after = 7d\n", &c);
	TierPlanState st = state_of(10);
	TierPlanFile f[] = {
		sealed(1, TIER_CLASS_IMAGECOPY, 0, 8 * DAY, MiB),
		sealed(2, TIER_CLASS_ARCHIVELOG, 0, 8 * DAY, MiB),
		sealed(3, TIER_CLASS_ARCHIVELOG_BACKUP, 0, 8 * DAY, MiB),
	};
	TierPlan p;
	plan_of(&c, f, ELEMENTSOF(f), &st, false, &p);
	assert(entry_of(&p, 1)->to == 2 && entry_of(&p, 1)->reason == TIER_REASON_AGE);
	/* BACKUP ARCHIVELOG pieces follow the archivelog class's settings. */
	assert(entry_of(&p, 3)->to == 1 && entry_of(&p, 3)->reason == TIER_REASON_AGE);
	tier_plan_done(&p);

	st.open[1] = false;
	plan_of(&c, f, ELEMENTSOF(f), &st, false, &p);
	assert(p.n == 1 && entry_of(&p, 1));
	tier_plan_done(&p);
	config_done(&c);
	cases++;
}

/* test_policy.py, cascade: capacity keeps files 3 days, then hands them to the archive tier; space plays no part there. */
static void test_cascade(void) {
	Config c;
	config_of(NULL, "migrate_after = 3d\ntarget = archive\n", NULL, &c);
	assert(c.tiers[1].target_tier == 2);
	TierPlanState st = state_of(90);
	TierPlanFile f[] = {
		sealed(1, TIER_CLASS_ARCHIVELOG, 1, 4 * DAY, MiB),
		sealed(2, TIER_CLASS_ARCHIVELOG, 1, 2 * DAY, MiB),
		sealed(3, TIER_CLASS_IMAGECOPY, 1, 4 * DAY, MiB), /* a lower tier's rule is the tier's, whatever the class */
		sealed(4, TIER_CLASS_ARCHIVELOG, 2, 40 * DAY, MiB), /* the archive tier has no rule */
		sealed(5, TIER_CLASS_ARCHIVELOG, 0, 2 * DAY, MiB),
	};
	TierPlan p;
	plan_of(&c, f, ELEMENTSOF(f), &st, false, &p);
	assert(p.n == 4 && p.space_needed > 0);
	assert(entry_of(&p, 1)->to == 2 && entry_of(&p, 1)->reason == TIER_REASON_AGE);
	assert(entry_of(&p, 2)->reason == TIER_REASON_LATER && entry_of(&p, 2)->due_ns == NOW + DAY);
	assert(entry_of(&p, 3)->to == 2 && entry_of(&p, 3)->reason == TIER_REASON_AGE);
	assert(!entry_of(&p, 4));
	assert(entry_of(&p, 5)->to == 1 && entry_of(&p, 5)->reason == TIER_REASON_AGE);
	tier_plan_done(&p);

	/* A lower tier that is not open hands nothing on. */
	st.open[1] = false;
	plan_of(&c, f, ELEMENTSOF(f), &st, false, &p);
	assert(p.n == 0);
	tier_plan_done(&p);
	config_done(&c);
	cases++;
}

/* test_policy.py, watermark: above the high mark the hot tier drains to the low one; between them only while draining. */
static void test_watermarks(void) {
	Config c;
	config_of(NULL, NULL, NULL, &c);
	TierPlanState st = state_of(70);
	bool draining;
	uint64_t size = 100 * MiB, low = size / 100 * 40;
	assert(tier_plan_space_needed(&c, &st, 0, &draining) == 70 * MiB - low && draining);
	st = state_of(50);
	assert(tier_plan_space_needed(&c, &st, 0, &draining) == 0 && !draining);
	st.draining = true;
	assert(tier_plan_space_needed(&c, &st, 0, &draining) == 50 * MiB - low && draining);
	st = state_of(39);
	st.draining = true;
	assert(tier_plan_space_needed(&c, &st, 0, &draining) == 0 && !draining);
	/* An empty filesystem needs nothing. */
	st = (TierPlanState) {};
	assert(tier_plan_space_needed(&c, &st, 0, &draining) == 0 && !draining);
	config_done(&c);
	cases++;
}

/* Space is counted as the collector will leave it: reclaimable dead bytes are free. */
static void test_reclaimable(void) {
	Config c;
	config_of(NULL, NULL, NULL, &c);
	TierPlanState st = state_of(70);
	st.hot_reclaimable = 15 * MiB;
	bool draining;
	assert(tier_plan_space_needed(&c, &st, 0, &draining) == 0 && !draining);
	st.hot_reclaimable = 5 * MiB;
	assert(tier_plan_space_needed(&c, &st, 0, &draining) == 65 * MiB - 100 * MiB / 100 * 40 && draining);
	/* Never more than what is used. */
	st = state_of(1);
	st.hot_reclaimable = 50 * MiB;
	assert(tier_plan_space_needed(&c, &st, 0, NULL) == 0);
	config_done(&c);
	cases++;
}

/* test_policy.py, reserve: the configured one, else 4 x the largest archived log, at most 10% of the hot tier. */
static void test_reserve(void) {
	Config c;
	config_of(NULL, NULL, NULL, &c);
	assert(tier_plan_reserve(&c, 2 * MiB, 100 * MiB) == 8 * MiB);
	assert(tier_plan_reserve(&c, 5 * MiB, 100 * MiB) == 100 * MiB / 100 * 10);
	assert(tier_plan_reserve(&c, UINT64_MAX / 2, UINT64_MAX) == UINT64_MAX / 100 * 10);
	TierPlanState st = state_of(10);
	/* The largest log is any archived log's, raw or sealed, on any tier. */
	TierPlanFile f[] = {
		sealed(1, TIER_CLASS_ARCHIVELOG, 2, DAY, MiB), /* size 2 MiB */
		sealed(2, TIER_CLASS_BACKUPPIECE, 0, 0, 20 * MiB),
		{ .ino = 3, .file_class = TIER_CLASS_ARCHIVELOG, .size = MiB },
	};
	TierPlan p;
	plan_of(&c, f, ELEMENTSOF(f), &st, false, &p);
	assert(p.reserve == 8 * MiB && p.space_needed == 0);
	tier_plan_done(&p);
	/* Free space below the reserve: the difference is needed, or the watermarks' need if larger. */
	st = state_of(95);
	plan_of(&c, f, ELEMENTSOF(f), &st, false, &p);
	assert(p.space_needed == 95 * MiB - 100 * MiB / 100 * 40);
	tier_plan_done(&p);
	config_done(&c);

	config_of("reserve = 64M\nhigh_watermark = 100%\nlow_watermark = 99%\n", NULL, NULL, &c);
	assert(c.tiers[0].has_reserve);
	st = state_of(60);
	st.hot_used = 64 * MiB;
	st.hot_avail = 40 * MiB;
	assert(tier_plan_space_needed(&c, &st, tier_plan_reserve(&c, 0, 104 * MiB), NULL) == 24 * MiB);
	config_done(&c);
	cases++;
}

/* test_policy.py, watermark: the oldest move first, whatever their age, until the need (by stored bytes) is met. */
static void test_space_oldest_first(void) {
	Config c;
	config_of(NULL, NULL, NULL, &c);
	TierPlanState st = state_of(70); /* needs 30 MiB */
	TierPlanFile f[] = {
		sealed(5, TIER_CLASS_ARCHIVELOG, 0, 5 * S, 10 * MiB),
		sealed(1, TIER_CLASS_ARCHIVELOG, 0, 9 * S, 10 * MiB),
		sealed(2, TIER_CLASS_BACKUPPIECE, 0, 2 * DAY, 4 * MiB), /* due by age: counts toward the need */
		sealed(3, TIER_CLASS_ARCHIVELOG, 0, 7 * S, 0),  /* no stored bytes known: counts by its size */
		sealed(4, TIER_CLASS_ARCHIVELOG, 0, 6 * S, 10 * MiB),
		sealed(6, TIER_CLASS_ARCHIVELOG, 0, 4 * S, 10 * MiB),
		sealed(7, TIER_CLASS_ARCHIVELOG, 1, 8 * S, 10 * MiB), /* not on the hot tier: never for space */
		sealed(8, TIER_CLASS_ARCHIVELOG, 0, 8 * S, 10 * MiB),
	};
	f[3].size = 6 * MiB;
	f[7].pinned = true; /* counts nowhere */
	TierPlan p;
	plan_of(&c, f, ELEMENTSOF(f), &st, false, &p);
	assert(p.space_needed == 30 * MiB && p.draining);
	/* Oldest first: 2 (4, due), 1 (10), 8 (pinned), 3 (6 by size), 4 (10) meet the 30; 5 and 6 wait. */
	static const uint64_t order[] = { 2, 1, 8, 3, 4, 5, 6 };
	assert(p.n == ELEMENTSOF(order));
	for (size_t i = 0; i < p.n; i++)
		assert(p.entries[i].ino == order[i]);
	assert(entry_of(&p, 2)->reason == TIER_REASON_AGE);
	assert(entry_of(&p, 1)->reason == TIER_REASON_SPACE);
	assert(entry_of(&p, 8)->reason == TIER_REASON_PINNED);
	assert(entry_of(&p, 3)->reason == TIER_REASON_SPACE && entry_of(&p, 3)->frees == 6 * MiB);
	assert(entry_of(&p, 4)->reason == TIER_REASON_SPACE);
	assert(entry_of(&p, 5)->reason == TIER_REASON_LATER && entry_of(&p, 6)->reason == TIER_REASON_LATER);
	assert(!entry_of(&p, 7)); /* the capacity tier has no rule of its own here */

	/* A pass measured again after the first space move: shared chunks freed little, 25 MiB still needed. */
	tier_plan_respace(&p, 2, 25 * MiB);
	assert(entry_of(&p, 3)->reason == TIER_REASON_SPACE && entry_of(&p, 4)->reason == TIER_REASON_SPACE);
	assert(entry_of(&p, 5)->reason == TIER_REASON_SPACE && entry_of(&p, 6)->reason == TIER_REASON_LATER);
	assert(entry_of(&p, 2)->reason == TIER_REASON_AGE && entry_of(&p, 8)->reason == TIER_REASON_PINNED);
	/* Then the need was met sooner than estimated: the rest waits, what is due by age still goes. */
	tier_plan_respace(&p, 3, 0);
	for (size_t i = 3; i < p.n; i++)
		assert(p.entries[i].reason == TIER_REASON_LATER);
	assert(p.space_end <= 3);
	/* And a need that appears again marks the next oldest. */
	tier_plan_respace(&p, 5, MiB);
	assert(entry_of(&p, 5)->reason == TIER_REASON_SPACE && entry_of(&p, 6)->reason == TIER_REASON_LATER);
	tier_plan_done(&p);
	config_done(&c);
	cases++;
}

/* test_policy.py, outlook (the pinned log stays) and test_archivelogs.py, pin: a pin keeps a file however old. */
static void test_pins(void) {
	Config c;
	config_of(NULL, NULL, NULL, &c);
	TierPlanState st = state_of(10);
	TierPlanFile f[] = { sealed(1, TIER_CLASS_ARCHIVELOG, 0, 9 * DAY, MiB) };
	f[0].pinned = true;
	TierPlan p;
	plan_of(&c, f, ELEMENTSOF(f), &st, false, &p);
	assert(p.n == 1 && p.entries[0].reason == TIER_REASON_PINNED && p.entries[0].due_ns == NOW - 8 * DAY);
	tier_plan_done(&p);
	config_done(&c);

	/* test_archivelogs.py: a class with pin = yes has no rule at all. */
	config_of(NULL, NULL, "[class archivelog]\npin = yes\n", &c);
	f[0].pinned = false;
	plan_of(&c, f, ELEMENTSOF(f), &st, false, &p);
	assert(p.n == 0);
	tier_plan_done(&p);
	config_done(&c);
	cases++;
}

/* Oldest mtime first, then inode number, whatever order the catalog gives. */
static void test_order(void) {
	Config c;
	config_of(NULL, NULL, NULL, &c);
	TierPlanState st = state_of(10);
	TierPlanFile f[] = {
		sealed(9, TIER_CLASS_ARCHIVELOG, 0, 2 * DAY, MiB),
		sealed(3, TIER_CLASS_ARCHIVELOG, 0, 2 * DAY, MiB),
		sealed(7, TIER_CLASS_ARCHIVELOG, 0, 3 * DAY, MiB),
	};
	TierPlan p;
	plan_of(&c, f, ELEMENTSOF(f), &st, false, &p);
	assert(p.n == 3 && p.entries[0].ino == 7 && p.entries[1].ino == 3 && p.entries[2].ino == 9);
	tier_plan_done(&p);
	/* Nothing to plan: no entries, and no failure. */
	plan_of(&c, NULL, 0, &st, false, &p);
	assert(p.n == 0 && !p.entries);
	tier_plan_done(&p);
	config_done(&c);
	cases++;
}

/* A pass plans sealed files only; the outlook plans raw ones as the sealed files they will be, by their staging size. */
static void test_raw(void) {
	Config c;
	config_of(NULL, NULL, NULL, &c);
	TierPlanState st = state_of(70);
	TierPlanFile f[] = {
		{ .ino = 1, .file_class = TIER_CLASS_ARCHIVELOG, .mtime_ns = NOW - 2 * DAY, .size = 0, .raw_size = 40 * MiB },
		sealed(2, TIER_CLASS_ARCHIVELOG, 0, DAY / 2, 10 * MiB),
	};
	TierPlan p;
	plan_of(&c, f, ELEMENTSOF(f), &st, false, &p);
	assert(p.n == 1 && p.entries[0].ino == 2 && p.entries[0].reason == TIER_REASON_SPACE);
	tier_plan_done(&p);
	plan_of(&c, f, ELEMENTSOF(f), &st, true, &p);
	assert(p.n == 2 && p.entries[0].ino == 1 && p.entries[0].raw && p.entries[0].bytes == 40 * MiB);
	/* The raw log's 40 MiB meet the 30 MiB needed: the sealed one waits. */
	assert(p.entries[0].reason == TIER_REASON_AGE && p.entries[1].reason == TIER_REASON_LATER);
	tier_plan_done(&p);
	config_done(&c);
	cases++;
}

/* test_policy.py, outlook: per class, what moves at the next pass (due, space) and later (day, week, later). */
static void test_outlook(void) {
	Config c;
	config_of(NULL, NULL, "[class other]\ntarget = capacity\n", &c);
	TierPlanState st = state_of(10);
	TierPlanFile f[] = {
		sealed(1, TIER_CLASS_ARCHIVELOG, 0, 2 * DAY, MiB),
		sealed(2, TIER_CLASS_ARCHIVELOG, 0, DAY / 2, MiB),          /* due in half a day */
		sealed(3, TIER_CLASS_ARCHIVELOG, 0, -6 * DAY, MiB),           /* mtime 6 days ahead: due in a week */
		sealed(4, TIER_CLASS_ARCHIVELOG, 0, -30 * DAY, MiB),         /* later */
		sealed(5, TIER_CLASS_BACKUPPIECE, 0, 3 * DAY, MiB),
		sealed(6, TIER_CLASS_OTHER, 0, 3 * DAY, MiB),                /* a target, no age rule: never */
		sealed(7, TIER_CLASS_ARCHIVELOG, 1, 3 * DAY, MiB),           /* not on the hot tier */
		sealed(8, TIER_CLASS_BACKUPPIECE, 0, 9 * DAY, MiB),
	};
	f[7].pinned = true;
	TierPlan p;
	TierOutlook o;
	plan_of(&c, f, ELEMENTSOF(f), &st, true, &p);
	tier_plan_outlook(&p, NOW, &o);
	const TierOutlookClass *al = &o.classes[TIER_CLASS_ARCHIVELOG], *bp = &o.classes[TIER_CLASS_BACKUPPIECE],
			       *ot = &o.classes[TIER_CLASS_OTHER];
	assert(al->target == 1 && al->files[TIER_OUTLOOK_DUE] == 1 && al->bytes[TIER_OUTLOOK_DUE] == 2 * MiB);
	assert(al->files[TIER_OUTLOOK_DAY] == 1 && al->files[TIER_OUTLOOK_WEEK] == 1 && al->files[TIER_OUTLOOK_LATER] == 1);
	assert(al->next_due == (NOW - DAY / 2 + DAY) / S);
	assert(bp->target == 1 && bp->files[TIER_OUTLOOK_DUE] == 1 && bp->next_due == 0);
	assert(ot->target == 1);
	for (int w = 0; w < _TIER_OUTLOOK_MAX; w++)
		assert(ot->files[w] == 0);
	assert(o.classes[TIER_CLASS_IMAGECOPY].target == 0);
	tier_plan_done(&p);

	/* Short of space: the oldest not due are "space"; a class with only pinned files still names its target. */
	st = state_of(90);
	f[4].pinned = true;
	plan_of(&c, f, ELEMENTSOF(f), &st, true, &p);
	tier_plan_outlook(&p, NOW, &o);
	assert(o.space_needed == 50 * MiB && o.reserve == 8 * MiB);
	assert(o.classes[TIER_CLASS_OTHER].files[TIER_OUTLOOK_SPACE] == 1);
	assert(o.classes[TIER_CLASS_ARCHIVELOG].files[TIER_OUTLOOK_SPACE] == 3);
	assert(o.classes[TIER_CLASS_BACKUPPIECE].target == 1 && o.classes[TIER_CLASS_BACKUPPIECE].files[TIER_OUTLOOK_DUE] == 0);
	tier_plan_done(&p);
	config_done(&c);
	cases++;
}

/* test_migrate.py, test_archivelogs.py, test_spill.py: what tierctl migrate and recall do to one file. */
static void test_request(void) {
	Config c;
	config_of(NULL, NULL, NULL, &c);
	const char *why;
	TierPlanFile log = sealed(1, TIER_CLASS_ARCHIVELOG, 0, 0, MiB);
	assert(tier_plan_request(&c, &log, 1, &why) == TIER_REQUEST_MOVE && !why);
	assert(tier_plan_request(&c, &log, 0, &why) == TIER_REQUEST_ALREADY && !why);
	/* A spilled raw log is on the capacity tier already; a recall moves it. */
	TierPlanFile spilled = { .ino = 2, .file_class = TIER_CLASS_ARCHIVELOG, .tier = 1 };
	assert(tier_plan_request(&c, &spilled, 1, &why) == TIER_REQUEST_ALREADY);
	assert(tier_plan_request(&c, &spilled, 0, &why) == TIER_REQUEST_MOVE);
	/* Passthrough files stay raw on the hot tier, and say so. */
	TierPlanFile redo = { .ino = 3, .file_class = TIER_CLASS_PASSTHROUGH };
	assert(tier_plan_request(&c, &redo, 1, &why) == TIER_REQUEST_SKIP && strstr(why, "passthrough"));
	assert(tier_plan_request(&c, &redo, 0, &why) == TIER_REQUEST_ALREADY && strstr(why, "passthrough"));
	/* A pinned file stays off the lower tiers, but may be recalled. */
	log.pinned = true;
	assert(tier_plan_request(&c, &log, 2, &why) == TIER_REQUEST_SKIP && strstr(why, "tierctl unpin"));
	log.tier = 1;
	assert(tier_plan_request(&c, &log, 0, &why) == TIER_REQUEST_MOVE);
	config_done(&c);

	config_of(NULL, NULL, "[class backuppiece]\npin = yes\n", &c);
	TierPlanFile piece = sealed(4, TIER_CLASS_BACKUPPIECE, 0, 0, MiB);
	assert(tier_plan_request(&c, &piece, 1, &why) == TIER_REQUEST_SKIP && strstr(why, "pin = yes"));
	config_done(&c);
	cases++;
}

/* An archived log on tier `tier`, sealed age ago, whose changes end at next_ago before NOW. */
static TierPlanFile log_of(uint64_t ino, uint32_t tier, int64_t age, int64_t next_ago, uint64_t stored) {
	TierPlanFile f = sealed(ino, TIER_CLASS_ARCHIVELOG, tier, age, stored);
	f.log_next_time = (NOW - next_ago) / S;
	return f;
}

/*
 * keep_hot (tests/e2e/tier/test_recovery.py): the logs a recovery of the
 * last window needs stay hot under watermark pressure and past their age;
 * the ones before the window move; without the option, as before.
 */
static void test_keep_hot(void) {
	Config c, off;
	config_of(NULL, NULL, "[class archivelog]\nkeep_hot = 1d\n", &c);
	config_of(NULL, NULL, NULL, &off);
	TierPlanState st = state_of(90); /* far above the 60% high watermark: everything movable goes */
	TierPlanFile files[] = {
		log_of(1, 0, 3 * DAY, 3 * DAY, MiB),           /* before the window: moves by age */
		log_of(2, 0, 2 * DAY, DAY + S, MiB),           /* ends just before the window: moves by age */
		log_of(3, 0, 2 * DAY, DAY - S, MiB),           /* reaches into the window: needed, held though due */
		log_of(4, 0, DAY / 2, DAY / 2, MiB),           /* inside: held though space is short */
		log_of(5, 0, 0, 0, MiB),                       /* the newest: held */
		sealed(6, TIER_CLASS_ARCHIVELOG, 0, DAY / 2, MiB), /* no header known: not held, moves for space */
		log_of(7, 1, 2 * DAY, DAY / 2, MiB),           /* already on capacity: the window does not pull it back */
		sealed(8, TIER_CLASS_BACKUPPIECE, 0, DAY / 2, MiB), /* other classes: as before */
	};
	TierPlan p;
	assert(tier_plan_make(&c, files, ELEMENTSOF(files), &st, NOW, false, &p) == 0);
	assert(p.space_needed > 0);
	assert(entry_of(&p, 1)->reason == TIER_REASON_AGE);
	assert(entry_of(&p, 2)->reason == TIER_REASON_AGE);
	assert(entry_of(&p, 3)->reason == TIER_REASON_HELD && entry_of(&p, 3)->held_due);
	assert(entry_of(&p, 4)->reason == TIER_REASON_HELD && !entry_of(&p, 4)->held_due);
	assert(entry_of(&p, 5)->reason == TIER_REASON_HELD);
	assert(entry_of(&p, 6)->reason == TIER_REASON_SPACE);
	assert(entry_of(&p, 8)->reason == TIER_REASON_SPACE);
	/* A measurement after a move marks again: a held log never becomes SPACE. */
	tier_plan_respace(&p, 0, UINT64_MAX);
	for (uint64_t ino = 3; ino <= 5; ino++)
		assert(entry_of(&p, ino)->reason == TIER_REASON_HELD);
	TierOutlook o;
	tier_plan_outlook(&p, NOW, &o);
	assert(o.classes[TIER_CLASS_ARCHIVELOG].held_files == 3);
	assert(o.classes[TIER_CLASS_ARCHIVELOG].held_bytes == 3 * 2 * MiB);
	assert(o.classes[TIER_CLASS_ARCHIVELOG].held_due_files == 1);
	assert(o.classes[TIER_CLASS_ARCHIVELOG].files[TIER_OUTLOOK_DUE] == 2);
	assert(o.classes[TIER_CLASS_ARCHIVELOG].files[TIER_OUTLOOK_SPACE] == 1);
	tier_plan_done(&p);

	/* The option off: the same logs move by age and for space as before. */
	assert(tier_plan_make(&off, files, ELEMENTSOF(files), &st, NOW, false, &p) == 0);
	assert(entry_of(&p, 3)->reason == TIER_REASON_AGE);
	assert(entry_of(&p, 4)->reason == TIER_REASON_SPACE);
	assert(entry_of(&p, 5)->reason == TIER_REASON_SPACE);
	tier_plan_outlook(&p, NOW, &o);
	assert(o.classes[TIER_CLASS_ARCHIVELOG].held_files == 0);
	tier_plan_done(&p);

	/* keep_hot belongs to [class archivelog] only. */
	_cleanup_free_ char *error = NULL;
	const char *bad = "[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[class backuppiece]\nkeep_hot = 1d\n";
	Config x;
	assert(config_parse(bad, strlen(bad), "test.conf", &x, &error) < 0 && strstr(error, "keep_hot"));
	config_done(&c);
	config_done(&off);
	cases++;
}

int main(void) {
	test_age();
	test_targets();
	test_cascade();
	test_watermarks();
	test_reclaimable();
	test_reserve();
	test_space_oldest_first();
	test_pins();
	test_order();
	test_raw();
	test_outlook();
	test_request();
	test_keep_hot();
	printf("planner: %u cases passed\n", cases);
	return 0;
}
