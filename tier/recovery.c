/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * recovery.c — what the archived logs we hold let a DBA recover
 * (recovery.h): runs, gaps, duplicates and gap-free windows per database,
 * and restore sets.
 *
 * Who asks: control/recovery.c, for tierctl recovery and for tierctl recall
 * --until (the restore set, listed before anything moves).
 *
 * Invariants:
 *  1. Headers only: a log's name says nothing here; a log whose header did
 *     not parse is not in the input at all (the caller reports it).
 *  2. Of the copies of one sequence, exactly one is used (the first in the
 *     sort order: furthest next_scn, faster tier, lower inode); the others
 *     are DUPLICATE spans and never part of a run or a restore set.
 *  3. Deterministic: the same logs give the same spans in the same order
 *     (incarnation, thread, sequence; windows last).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/macros.h"
#include "tier/recovery.h"

static int log_compare(const void *a, const void *b) {
	const TierRecoveryLog *x = a, *y = b;
	const CatalogArchivelog *p = &x->header, *q = &y->header;
	if (p->dbid != q->dbid)
		return p->dbid < q->dbid ? -1 : 1;
	if (p->resetlogs_id != q->resetlogs_id)
		return p->resetlogs_id < q->resetlogs_id ? -1 : 1;
	if (p->thread != q->thread)
		return p->thread < q->thread ? -1 : 1;
	if (p->sequence != q->sequence)
		return p->sequence < q->sequence ? -1 : 1;
	/* The copy a restore uses first (invariant 2). */
	if (p->next_scn != q->next_scn)
		return p->next_scn > q->next_scn ? -1 : 1;
	if (x->tier != y->tier)
		return x->tier < y->tier ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static bool same_incarnation(const TierRecoveryLog *a, const TierRecoveryLog *b) {
	return a->header.dbid == b->header.dbid && a->header.resetlogs_id == b->header.resetlogs_id;
}

static bool same_thread(const TierRecoveryLog *a, const TierRecoveryLog *b) {
	return same_incarnation(a, b) && a->header.thread == b->header.thread;
}

/* Whether logs[i] is a copy set aside (invariant 2). */
static bool is_set_aside(const TierRecoveryLog *logs, size_t i) {
	return i > 0 && same_thread(&logs[i - 1], &logs[i]) && logs[i - 1].header.sequence == logs[i].header.sequence;
}

typedef struct SpanVec {
	TierRecoverySpan *v;
	size_t n, cap;
} SpanVec;

static TierRecoverySpan *span_add(SpanVec *s, TierRecoveryKind kind, const CatalogArchivelog *h) {
	if (ARRAY_RESERVE_ONE(s->v, s->cap, s->n, 16) < 0)
		return NULL;
	TierRecoverySpan *sp = &s->v[s->n++];
	*sp = (TierRecoverySpan) { .kind = kind, .dbid = h->dbid, .resetlogs_id = h->resetlogs_id, .thread = h->thread };
	return sp;
}

static void run_start(TierRecoverySpan *sp, const TierRecoveryLog *l) {
	sp->first_sequence = sp->last_sequence = l->header.sequence;
	sp->low_scn = l->header.low_scn;
	sp->low_time = l->header.low_time;
	sp->next_scn = l->header.next_scn;
	sp->next_time = l->header.next_time;
	sp->files = 1;
	sp->bytes = l->size;
	sp->tiers = l->tier < 32 ? UINT32_C(1) << l->tier : 0;
}

static void run_extend(TierRecoverySpan *sp, const TierRecoveryLog *l) {
	sp->last_sequence = l->header.sequence;
	sp->next_scn = l->header.next_scn;
	sp->next_time = l->header.next_time;
	sp->files++;
	sp->bytes += l->size;
	sp->tiers |= l->tier < 32 ? UINT32_C(1) << l->tier : 0;
}

/*
 * The windows of one incarnation: the runs of its first thread, cut down
 * by every other thread's runs in turn (a roll-forward across a point
 * needs every thread's redo there).  runs[0..n) are its RUN spans, thread
 * by thread in sequence order.
 */
static int add_windows(SpanVec *s, size_t first_run, size_t end, const TierRecoveryLog *logs, size_t lo, size_t hi) {
	TierRecoverySpan *cur = NULL;
	size_t n_cur = 0;
	int r = 0;

	for (size_t i = first_run; i < end;) {
		uint16_t t = s->v[i].thread;
		size_t j = i;
		while (j < end && s->v[j].thread == t)
			j++;
		if (!cur) {
			cur = calloc(j - i, sizeof(*cur));
			if (!cur)
				return -ENOMEM;
			for (size_t k = i; k < j; k++)
				if (s->v[k].kind == TIER_RECOVERY_RUN)
					cur[n_cur++] = s->v[k];
		} else {
			TierRecoverySpan *next = calloc(n_cur + (j - i), sizeof(*next));
			size_t n_next = 0;
			if (!next) {
				free(cur);
				return -ENOMEM;
			}
			for (size_t a = 0; a < n_cur; a++)
				for (size_t k = i; k < j; k++) {
					const TierRecoverySpan *b = &s->v[k];
					if (b->kind != TIER_RECOVERY_RUN)
						continue;
					TierRecoverySpan w = cur[a];
					if (b->low_scn > w.low_scn) {
						w.low_scn = b->low_scn;
						w.low_time = b->low_time;
					}
					if (b->next_scn < w.next_scn) {
						w.next_scn = b->next_scn;
						w.next_time = b->next_time;
					}
					if (w.low_scn < w.next_scn)
						next[n_next++] = w;
				}
			free(cur);
			cur = next;
			n_cur = n_next;
		}
		i = j;
	}
	for (size_t a = 0; a < n_cur; a++) {
		TierRecoverySpan w = cur[a];
		w.kind = TIER_RECOVERY_WINDOW;
		w.thread = 0;
		w.first_sequence = w.last_sequence = 0;
		w.files = w.bytes = 0;
		w.tiers = 0;
		/* What a roll-forward across the window reads: every used log that meets it. */
		for (size_t k = lo; k < hi; k++) {
			const CatalogArchivelog *h = &logs[k].header;
			if (is_set_aside(logs, k) || h->next_scn <= w.low_scn || h->low_scn >= w.next_scn)
				continue;
			w.files++;
			w.bytes += logs[k].size;
			w.tiers |= logs[k].tier < 32 ? UINT32_C(1) << logs[k].tier : 0;
		}
		TierRecoverySpan *sp = span_add(s, TIER_RECOVERY_WINDOW, &logs[lo].header);
		if (!sp) {
			r = -ENOMEM;
			break;
		}
		*sp = w;
	}
	free(cur);
	return r;
}

int tier_recovery_analyze(TierRecoveryLog *logs, size_t n, TierRecovery *ret) {
	SpanVec s = {};
	TierRecoveryDb *dbs = NULL;
	size_t n_dbs = 0;
	int r = 0;

	if (n > 0)
		qsort(logs, n, sizeof(*logs), log_compare);
	for (size_t lo = 0; lo < n;) {
		size_t hi = lo;
		while (hi < n && same_incarnation(&logs[lo], &logs[hi]))
			hi++;
		TierRecoveryDb *q = reallocarray(dbs, n_dbs + 1, sizeof(*q));
		if (!q) {
			r = -ENOMEM;
			break;
		}
		dbs = q;
		TierRecoveryDb *db = &dbs[n_dbs++];
		const CatalogArchivelog *h0 = &logs[lo].header;
		*db = (TierRecoveryDb) {
			.dbid = h0->dbid,
			.resetlogs_id = h0->resetlogs_id,
			.low_scn = UINT64_MAX,
			.low_time = INT64_MAX,
			.first_span = s.n,
		};
		memcpy(db->db_name, h0->db_name, sizeof(db->db_name));
		size_t run = SIZE_MAX; /* the thread's current RUN span, by index: span_add() moves the array */
		for (size_t i = lo; i < hi; i++) {
			const TierRecoveryLog *l = &logs[i];
			const CatalogArchivelog *h = &l->header;
			/* A database renamed keeps its DBID: the newest log's name is the one it has now. */
			if (h->next_scn >= db->next_scn)
				memcpy(db->db_name, h->db_name, sizeof(db->db_name));
			db->files++;
			db->bytes += l->size;
			db->low_scn = MIN(db->low_scn, h->low_scn);
			db->next_scn = MAX(db->next_scn, h->next_scn);
			db->low_time = MIN(db->low_time, h->low_time);
			db->next_time = MAX(db->next_time, h->next_time);
			if (is_set_aside(logs, i)) {
				size_t used = i - 1;
				while (is_set_aside(logs, used))
					used--;
				const TierRecoveryLog *u = &logs[used];
				TierRecoverySpan *d = span_add(&s, TIER_RECOVERY_DUPLICATE, h);
				if (!d) {
					r = -ENOMEM;
					break;
				}
				d->first_sequence = d->last_sequence = h->sequence;
				d->low_scn = h->low_scn;
				d->next_scn = h->next_scn;
				d->low_time = h->low_time;
				d->next_time = h->next_time;
				d->ino = l->ino;
				d->used_ino = u->ino;
				d->same_header = u->size == l->size && u->header.low_scn == h->low_scn &&
						 u->header.next_scn == h->next_scn && u->header.low_time == h->low_time &&
						 u->header.next_time == h->next_time;
				db->duplicates++;
				continue;
			}
			if (i == lo || !same_thread(&logs[i - 1], l)) {
				db->threads++;
				run = SIZE_MAX;
			}
			if (run != SIZE_MAX && h->sequence == s.v[run].last_sequence + 1) {
				run_extend(&s.v[run], l);
				continue;
			}
			if (run != SIZE_MAX) {
				TierRecoverySpan *g = span_add(&s, TIER_RECOVERY_GAP, h);
				if (!g) {
					r = -ENOMEM;
					break;
				}
				const TierRecoverySpan *prev = &s.v[run];
				g->first_sequence = prev->last_sequence + 1;
				g->last_sequence = h->sequence - 1;
				g->low_scn = prev->next_scn;
				g->low_time = prev->next_time;
				g->next_scn = h->low_scn;
				g->next_time = h->low_time;
				db->gaps++;
				db->missing += (uint64_t) g->last_sequence - g->first_sequence + 1;
			}
			TierRecoverySpan *sp = span_add(&s, TIER_RECOVERY_RUN, h);
			if (!sp) {
				r = -ENOMEM;
				break;
			}
			run_start(sp, l);
			run = s.n - 1;
		}
		if (r < 0)
			break;
		/* Windows from the runs alone: gaps and duplicates do not take part. */
		r = add_windows(&s, db->first_span, s.n, logs, lo, hi);
		if (r < 0)
			break;
		db->n_spans = s.n - db->first_span;
		lo = hi;
	}
	if (r < 0) {
		free(s.v);
		free(dbs);
		return r;
	}
	*ret = (TierRecovery) { .dbs = dbs, .n_dbs = n_dbs, .spans = s.v, .n_spans = s.n };
	return 0;
}

void tier_recovery_done(TierRecovery *r) {
	free(r->dbs);
	free(r->spans);
	*r = (TierRecovery) {};
}

/* Where a log's range [low, next) lies against point p: -1 all before it, 0 holds it, 1 all after it. */
static int log_against(const CatalogArchivelog *h, const TierRecoveryPoint *p) {
	if (p->is_scn)
		return h->next_scn <= p->scn ? -1 : h->low_scn > p->scn ? 1 : 0;
	return h->next_time <= p->time ? -1 : h->low_time > p->time ? 1 : 0;
}

typedef struct IndexVec {
	uint32_t *v;
	size_t n, cap;
} IndexVec;

static int index_add(IndexVec *s, uint32_t i) {
	if (ARRAY_RESERVE_ONE(s->v, s->cap, s->n, 64) < 0)
		return -ENOMEM;
	s->v[s->n++] = i;
	return 0;
}

static int restore_order(const void *a, const void *b, void *userdata) {
	const TierRecoveryLog *logs = userdata;
	const CatalogArchivelog *x = &logs[*(const uint32_t *) a].header, *y = &logs[*(const uint32_t *) b].header;
	if (x->low_scn != y->low_scn)
		return x->low_scn < y->low_scn ? -1 : 1;
	return x->thread < y->thread ? -1 : x->thread > y->thread;
}

/* A missing stretch of thread t: sequences first..last (0: not known), and the hole [low, next). */
static int missing_add(SpanVec *m, const CatalogArchivelog *h, uint32_t first, uint32_t last, uint64_t low_scn,
		       int64_t low_time, uint64_t next_scn, int64_t next_time) {
	TierRecoverySpan *g = span_add(m, TIER_RECOVERY_GAP, h);
	if (!g)
		return -ENOMEM;
	g->first_sequence = first;
	g->last_sequence = last;
	g->low_scn = low_scn;
	g->low_time = low_time;
	g->next_scn = next_scn;
	g->next_time = next_time;
	return 0;
}

int tier_recovery_restore_set(const TierRecoveryLog *logs, size_t n, uint32_t dbid, uint32_t resetlogs_id,
			      const TierRecoveryPoint *from, const TierRecoveryPoint *until, TierRestoreSet *ret) {
	size_t lo = 0, hi;
	while (lo < n && (logs[lo].header.dbid != dbid || logs[lo].header.resetlogs_id != resetlogs_id))
		lo++;
	if (lo == n)
		return -ENOENT;
	for (hi = lo; hi < n && same_incarnation(&logs[lo], &logs[hi]);)
		hi++;

	/* Without a start: as far back as every thread reaches without a gap before `until`. */
	TierRecoveryPoint start = { .is_scn = true };
	if (from)
		start = *from;
	else
		for (size_t i = lo; i < hi;) {
			size_t j = i;
			while (j < hi && same_thread(&logs[i], &logs[j]))
				j++;
			/* The last used log at or before `until`, then back along consecutive sequences. */
			size_t k = SIZE_MAX;
			for (size_t x = i; x < j; x++)
				if (!is_set_aside(logs, x) && log_against(&logs[x].header, until) <= 0)
					k = x;
			if (k != SIZE_MAX) {
				for (size_t x = k; x-- > i;) {
					if (is_set_aside(logs, x))
						continue;
					if (logs[x].header.sequence + 1 != logs[k].header.sequence)
						break;
					k = x;
				}
				if (logs[k].header.low_scn > start.scn) {
					start.scn = logs[k].header.low_scn;
					start.time = logs[k].header.low_time;
				}
			}
			i = j;
		}

	IndexVec sel = {};
	SpanVec miss = {};
	uint64_t bytes = 0;
	uint64_t low_scn = UINT64_MAX, next_scn = 0;
	int64_t low_time = INT64_MAX, next_time = 0;
	int r = 0;
	for (size_t i = lo; r >= 0 && i < hi;) {
		size_t j = i;
		while (j < hi && same_thread(&logs[i], &logs[j]))
			j++;
		const CatalogArchivelog *before = NULL, *after = NULL, *prev = NULL;
		for (size_t x = i; r >= 0 && x < j; x++) {
			if (is_set_aside(logs, x))
				continue;
			const CatalogArchivelog *h = &logs[x].header;
			if (log_against(h, &start) < 0) {
				before = h;
				continue;
			}
			if (log_against(h, until) > 0) {
				if (!after)
					after = h;
				continue;
			}
			if (!prev && log_against(h, &start) > 0)
				/* The thread's first log of the range starts after `from`. */
				r = missing_add(&miss, h, before ? before->sequence + 1 : 0, h->sequence - 1,
						before ? before->next_scn : start.scn, before ? before->next_time : start.time,
						h->low_scn, h->low_time);
			else if (prev && h->sequence != prev->sequence + 1)
				r = missing_add(&miss, h, prev->sequence + 1, h->sequence - 1, prev->next_scn, prev->next_time,
						h->low_scn, h->low_time);
			if (r >= 0)
				r = index_add(&sel, (uint32_t) x);
			bytes += logs[x].size;
			low_scn = MIN(low_scn, h->low_scn);
			low_time = MIN(low_time, h->low_time);
			next_scn = MAX(next_scn, h->next_scn);
			next_time = MAX(next_time, h->next_time);
			prev = h;
		}
		if (r >= 0 && !prev) {
			/* Nothing of the range on this thread. */
			const CatalogArchivelog *h = after ?: before ?: &logs[i].header;
			r = missing_add(&miss, h, before ? before->sequence + 1 : 0, after ? after->sequence - 1 : 0,
					before ? before->next_scn : start.scn, before ? before->next_time : start.time,
					after ? after->low_scn : until->scn, after ? after->low_time : until->time);
		} else if (r >= 0 && log_against(prev, until) < 0)
			/* The thread's logs stop before `until`: the rest is not archived here (yet). */
			r = missing_add(&miss, prev, prev->sequence + 1, after ? after->sequence - 1 : 0, prev->next_scn,
					prev->next_time, after ? after->low_scn : until->scn,
					after ? after->low_time : until->time);
		i = j;
	}
	if (r < 0) {
		free(sel.v);
		free(miss.v);
		return r;
	}
	if (sel.n > 0)
		qsort_r(sel.v, sel.n, sizeof(uint32_t), restore_order, (void *) logs);
	*ret = (TierRestoreSet) {
		.logs = sel.v,
		.n_logs = sel.n,
		.missing = miss.v,
		.n_missing = miss.n,
		.bytes = bytes,
		.low_scn = sel.n ? low_scn : 0,
		.next_scn = next_scn,
		.low_time = sel.n ? low_time : 0,
		.next_time = next_time,
	};
	return 0;
}

void tier_restore_set_done(TierRestoreSet *s) {
	free(s->logs);
	free(s->missing);
	*s = (TierRestoreSet) {};
}
