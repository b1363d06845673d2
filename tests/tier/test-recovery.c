/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests for tier/recovery.c: runs, gaps, duplicates and gap-free
 * windows from archived logs' headers, and restore sets, on synthetic
 * headers (tests/e2e/tier/test_recovery.py checks the same through a
 * mount and tierctl).
 */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "tier/recovery.h"

#define T0 INT64_C(1767225600) /* 2026-01-01 */

static unsigned cases;

/* Log `seq` of thread t: SCN [base + 1000 seq, base + 1000 (seq + 1)), one minute per log. */
static TierRecoveryLog log_of(uint64_t ino, uint32_t dbid, uint16_t t, uint32_t seq, uint32_t tier) {
	uint64_t base = t == 1 ? 0 : 300; /* the threads' switches do not line up */
	TierRecoveryLog l = {
		.ino = ino,
		.tier = tier,
		.size = 1000 + seq,
		.header = {
			.dbid = dbid,
			.resetlogs_id = 7,
			.thread = t,
			.sequence = seq,
			.low_scn = base + 1000 * (uint64_t) seq,
			.next_scn = base + 1000 * (uint64_t) (seq + 1),
			.low_time = T0 + 60 * (int64_t) seq + (t == 1 ? 0 : 18),
			.next_time = T0 + 60 * (int64_t) (seq + 1) + (t == 1 ? 0 : 18),
		},
	};
	strcpy(l.header.db_name, dbid == 1 ? "ORCL" : "SALES");
	return l;
}

static const TierRecoverySpan *span(const TierRecovery *r, const TierRecoveryDb *db, TierRecoveryKind k, size_t nth) {
	for (size_t i = db->first_span; i < db->first_span + db->n_spans; i++)
		if (r->spans[i].kind == k && nth-- == 0)
			return &r->spans[i];
	return NULL;
}

/* One thread: 10..12, a gap at 13..14, 15..16 with 16 twice (one copy cut short), on two tiers; a second database. */
static void test_analyze(void) {
	TierRecoveryLog logs[] = {
		log_of(1, 1, 1, 10, 1), log_of(2, 1, 1, 11, 1), log_of(3, 1, 1, 12, 0), log_of(4, 1, 1, 15, 0),
		log_of(5, 1, 1, 16, 2), log_of(6, 1, 1, 16, 0), log_of(7, 2, 1, 3, 0),
	};
	logs[5].header.next_scn -= 10; /* ino 6: a copy of 16 that stops early */
	TierRecovery r;
	assert(tier_recovery_analyze(logs, ELEMENTSOF(logs), &r) == 0);
	assert(r.n_dbs == 2);
	const TierRecoveryDb *db = &r.dbs[0];
	assert(db->dbid == 1 && strcmp(db->db_name, "ORCL") == 0 && db->threads == 1 && db->files == 6);
	assert(db->gaps == 1 && db->missing == 2 && db->duplicates == 1);
	assert(db->low_scn == 10000 && db->next_scn == 17000);
	const TierRecoverySpan *a = span(&r, db, TIER_RECOVERY_RUN, 0), *b = span(&r, db, TIER_RECOVERY_RUN, 1);
	assert(a && a->first_sequence == 10 && a->last_sequence == 12 && a->files == 3 && a->tiers == 3);
	assert(a->low_scn == 10000 && a->next_scn == 13000);
	assert(b && b->first_sequence == 15 && b->last_sequence == 16 && b->files == 2 && b->tiers == 5);
	assert(!span(&r, db, TIER_RECOVERY_RUN, 2));
	const TierRecoverySpan *g = span(&r, db, TIER_RECOVERY_GAP, 0);
	assert(g && g->first_sequence == 13 && g->last_sequence == 14 && g->low_scn == 13000 && g->next_scn == 15000);
	assert(g->low_time == T0 + 780 && g->next_time == T0 + 900);
	const TierRecoverySpan *d = span(&r, db, TIER_RECOVERY_DUPLICATE, 0);
	/* The restore uses the copy that reaches furthest, though it is on tier 2. */
	assert(d && d->first_sequence == 16 && d->ino == 6 && d->used_ino == 5 && !d->same_header);
	const TierRecoverySpan *w0 = span(&r, db, TIER_RECOVERY_WINDOW, 0), *w1 = span(&r, db, TIER_RECOVERY_WINDOW, 1);
	assert(w0 && w0->low_scn == 10000 && w0->next_scn == 13000 && w0->files == 3);
	assert(w1 && w1->low_scn == 15000 && w1->next_scn == 17000 && w1->files == 2);
	assert(!span(&r, db, TIER_RECOVERY_WINDOW, 2));
	assert(r.dbs[1].dbid == 2 && r.dbs[1].files == 1 && r.dbs[1].gaps == 0);
	tier_recovery_done(&r);
	cases++;
}

/* RAC: thread 1 10..20, thread 2 10..20 missing 15: the windows are what both threads cover. */
static void test_rac(void) {
	TierRecoveryLog logs[22];
	size_t n = 0;
	for (uint32_t s = 10; s <= 20; s++) {
		logs[n] = log_of(n + 1, 1, 1, s, 0);
		n++;
		if (s != 15) {
			logs[n] = log_of(n + 1, 1, 2, s, 1);
			n++;
		}
	}
	TierRecovery r;
	assert(tier_recovery_analyze(logs, n, &r) == 0);
	const TierRecoveryDb *db = &r.dbs[0];
	assert(r.n_dbs == 1 && db->threads == 2 && db->gaps == 1 && db->missing == 1);
	const TierRecoverySpan *w0 = span(&r, db, TIER_RECOVERY_WINDOW, 0), *w1 = span(&r, db, TIER_RECOVERY_WINDOW, 1);
	/* Thread 2 covers [10300, 15300) and [16300, 21300); thread 1 [10000, 21000). */
	assert(w0 && w0->low_scn == 10300 && w0->next_scn == 15300);
	assert(w1 && w1->low_scn == 16300 && w1->next_scn == 21000);
	assert(w1->low_time == T0 + 16 * 60 + 18 && w1->next_time == T0 + 21 * 60);

	/* Restore set to SCN 19500 from 17000: thread 1 logs 17..19, thread 2 16..19, lowest SCN first. */
	TierRestoreSet set;
	TierRecoveryPoint from = { .is_scn = true, .scn = 17000 }, until = { .is_scn = true, .scn = 19500 };
	assert(tier_recovery_restore_set(logs, n, 1, 7, &from, &until, &set) == 0);
	assert(set.n_missing == 0 && set.n_logs == 7);
	uint64_t last = 0;
	for (size_t i = 0; i < set.n_logs; i++) {
		assert(logs[set.logs[i]].header.low_scn >= last);
		last = logs[set.logs[i]].header.low_scn;
	}
	assert(logs[set.logs[0]].header.thread == 2 && logs[set.logs[0]].header.sequence == 16);
	tier_restore_set_done(&set);

	/* Across thread 2's gap: sequence 15 is missing, said before anything moves. */
	from.scn = 14000;
	assert(tier_recovery_restore_set(logs, n, 1, 7, &from, &until, &set) == 0);
	assert(set.n_missing == 1 && set.missing[0].thread == 2 && set.missing[0].first_sequence == 15 &&
	       set.missing[0].last_sequence == 15);
	tier_restore_set_done(&set);

	/* No start: as far back as both threads go without a gap, i.e. from thread 2's log 16. */
	assert(tier_recovery_restore_set(logs, n, 1, 7, NULL, &until, &set) == 0);
	assert(set.n_missing == 0 && set.low_scn == 16000);
	tier_restore_set_done(&set);

	/* By time, beyond the last log: the end is missing on both threads. */
	TierRecoveryPoint late = { .time = T0 + 30 * 60 };
	from = (TierRecoveryPoint) { .time = T0 + 19 * 60 };
	assert(tier_recovery_restore_set(logs, n, 1, 7, &from, &late, &set) == 0);
	assert(set.n_missing == 2 && set.missing[0].first_sequence == 21 && set.missing[1].first_sequence == 21);
	tier_restore_set_done(&set);

	assert(tier_recovery_restore_set(logs, n, 9, 7, NULL, &until, &set) == -ENOENT);
	tier_recovery_done(&r);
	cases++;
}

int main(void) {
	test_analyze();
	test_rac();
	TierRecovery none;
	assert(tier_recovery_analyze(NULL, 0, &none) == 0 && none.n_dbs == 0);
	tier_recovery_done(&none);
	printf("recovery: %u cases passed\n", cases);
	return 0;
}
