/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * report-usage.c — tierctl report: what is stored and what it saved, per
 * class, tier, day or database; what the policy moves next (the planner's
 * outlook, fs_policy_outlook()); and usage over time (history.c's samples).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/strvec.h"
#include "control/control-internal.h"

typedef struct Group {
	int64_t key;
	uint64_t files, logical, raw, chunk_bytes, zero_bytes;
	double attributed, attributed_plain;
} Group;

typedef struct GroupVec {
	Group *items;
	size_t n, cap;
} GroupVec;

static Group *group_get(GroupVec *v, int64_t key) {
	size_t lo = 0, hi = v->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v->items[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < v->n && v->items[lo].key == key)
		return &v->items[lo];
	if (v->n == v->cap) {
		size_t cap = MAX(v->cap * 2, (size_t) 16);
		Group *p = realloc(v->items, cap * sizeof(*p));
		if (!p)
			return NULL;
		v->items = p;
		v->cap = cap;
	}
	memmove(&v->items[lo + 1], &v->items[lo], (v->n - lo) * sizeof(Group));
	v->n++;
	v->items[lo] = (Group) { .key = key };
	return &v->items[lo];
}

static int64_t day_of(int64_t t_ns) {
	int64_t day = INT64_C(86400) * 1000000000;
	return t_ns >= 0 ? t_ns / day : -((-t_ns + day - 1) / day);
}

/* The index of name in v, added if new: group keys of report --by database. */
static int64_t name_index(StrVec *v, const char *name) {
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->names[i], name) == 0)
			return (int64_t) i;
	int r = strvec_push(v, name);
	return r < 0 ? r : (int64_t) v->n - 1;
}

/*
 * The database of a file: DB_UNIQUE_NAME from the FRA layout, as the DBA
 * sees it in the recovery area; else, for an archived log kept elsewhere,
 * the name in its header; else "unknown".
 */
static int database_key(Conn *c, StrVec *names, const FileRow *f) {
	_cleanup_free_ char *path = NULL;
	char db[CATALOG_NAME_MAX + 1] = "unknown";
	CatalogArchivelog a;

	int r = control_path_of(c->reader, f->ino, &path);
	if (r == -ENOMEM)
		return r;
	if ((r < 0 || !tier_database_of_path(path, db, sizeof(db))) && f->file_class == TIER_CLASS_ARCHIVELOG &&
	    catalog_archivelog_get(c->reader, f->ino, &a) >= 0 && a.db_name[0])
		snprintf(db, sizeof(db), "%s", a.db_name);
	return (int) name_index(names, db);
}

static int group_by_name(const void *a, const void *b, void *userdata) {
	const StrVec *names = userdata;
	return strcmp(names->names[((const Group *) a)->key], names->names[((const Group *) b)->key]);
}

static const char *const outlook_when_names[_TIER_OUTLOOK_MAX] = {
	[TIER_OUTLOOK_DUE] = "due",
	[TIER_OUTLOOK_SPACE] = "space",
	[TIER_OUTLOOK_DAY] = "day",
	[TIER_OUTLOOK_WEEK] = "week",
	[TIER_OUTLOOK_LATER] = "later",
};

/* The outlook's own fields: they belong to the reply, so they go before any row. */
static int add_outlook_fields(Conn *c, const FsPolicyOutlook *o) {
	int r = control_add(c, "policy", o->enabled ? "on" : "off");
	if (r >= 0 && o->enabled)
		r = control_add_i64(c, "policy_next_run", o->next_run);
	if (r >= 0)
		r = control_add_u64(c, "hot_space_needed", o->plan.space_needed);
	if (r >= 0)
		r = control_add_u64(c, "reserve", o->plan.reserve);
	return r;
}

/* What the policy moves next and when: one row per class whose files move at all. */
static int add_outlook_rows(Conn *c, const FsPolicyOutlook *o) {
	int r = 0;
	for (uint32_t k = 0; r >= 0 && k < _TIER_CLASS_MAX; k++) {
		const TierOutlookClass *oc = &o->plan.classes[k];
		const ConfigTier *t = tier_set_config(fs_tiers(c->fs), oc->target);
		if (oc->target == 0 || !t)
			continue;
		r = control_row(c, "next");
		if (r >= 0)
			r = control_add(c, "class", tier_class_to_string((TierFileClass) k));
		if (r >= 0)
			r = control_add(c, "target", t->name);
		for (int w = 0; r >= 0 && w < _TIER_OUTLOOK_MAX; w++) {
			char key[32];
			snprintf(key, sizeof(key), "%s_files", outlook_when_names[w]);
			r = control_add_u64(c, key, oc->files[w]);
			snprintf(key, sizeof(key), "%s_bytes", outlook_when_names[w]);
			if (r >= 0)
				r = control_add_u64(c, key, oc->bytes[w]);
		}
		if (r >= 0 && oc->next_due)
			r = control_add_i64(c, "next_due", oc->next_due);
		if (r >= 0 && oc->held_files)
			r = control_add_u64(c, "held_files", oc->held_files);
		if (r >= 0 && oc->held_files)
			r = control_add_u64(c, "held_bytes", oc->held_bytes);
		if (r >= 0 && oc->held_files)
			r = control_add_u64(c, "held_due_files", oc->held_due_files);
	}
	return r;
}

/*
 * The samples of usage over time (history.c), thinned to at most
 * CONTROL_HISTORY_POINTS evenly spread times so a chart of a year stays a
 * page: every stride-th time, and always the last.
 */
typedef struct HistoryEmit {
	Conn *c;
	size_t times;             /* distinct times seen (counting pass) or passed (emitting pass) */
	int64_t last_t;
	size_t stride;
	bool emit;
	int64_t newest_t;
} HistoryEmit;

static bool history_keep(HistoryEmit *e, int64_t t, bool counts) {
	if (counts && (e->times == 0 || t != e->last_t)) {
		e->times++;
		e->last_t = t;
	}
	if (!e->emit)
		return false;
	return t == e->newest_t || (e->times - 1) % e->stride == 0;
}

static int history_tier_row(const CatalogHistoryTier *h, void *userdata) {
	HistoryEmit *e = userdata;
	if (!history_keep(e, h->t, true))
		return 0;
	Conn *c = e->c;
	const ConfigTier *t = tier_set_config(fs_tiers(c->fs), h->tier);
	int r = control_row(c, "history_tier");
	if (r >= 0)
		r = control_add_i64(c, "t", h->t);
	if (r >= 0)
		r = control_add(c, "tier", t ? t->name : "unknown");
	if (r >= 0)
		r = control_add(c, "role", t ? tier_role_to_string(t->role) : "unknown");
	if (r >= 0)
		r = control_add_u64(c, "capacity", h->capacity);
	if (r >= 0)
		r = control_add_u64(c, "used", h->used);
	if (r >= 0)
		r = control_add_u64(c, "files", h->files);
	if (r >= 0)
		r = control_add_u64(c, "logical", h->logical);
	if (r >= 0)
		r = control_add_u64(c, "stored", h->stored);
	return r;
}

static int history_class_row(const CatalogHistoryClass *h, void *userdata) {
	HistoryEmit *e = userdata;
	/* The class rows come after every tier row: count their times afresh. */
	if (e->last_t > h->t || e->times == 0) {
		e->times = 0;
		e->last_t = INT64_MIN;
	}
	if (!history_keep(e, h->t, true) || (h->files == 0 && h->logical == 0))
		return 0;
	Conn *c = e->c;
	int r = control_row(c, "history_class");
	if (r >= 0)
		r = control_add_i64(c, "t", h->t);
	if (r >= 0)
		r = control_add(c, "class", tier_class_to_string((TierFileClass) h->file_class));
	if (r >= 0)
		r = control_add_u64(c, "files", h->files);
	if (r >= 0)
		r = control_add_u64(c, "logical", h->logical);
	if (r >= 0)
		r = control_add_u64(c, "hot_logical", h->hot_logical);
	return r;
}

static int history_count(const CatalogHistoryTier *h, void *userdata) {
	HistoryEmit *e = userdata;
	(void) history_keep(e, h->t, true);
	e->newest_t = h->t;
	return 0;
}

static int history_skip(const CatalogHistoryClass *h, void *userdata) {
	(void) h;
	(void) userdata;
	return 0;
}

static int add_history(Conn *c) {
	HistoryEmit e = { .c = c };
	int r = catalog_history_foreach(c->reader, 0, history_count, history_skip, &e);
	if (r < 0 || e.times == 0)
		return r;
	e = (HistoryEmit) {
		.c = c,
		.stride = (e.times + CONTROL_HISTORY_POINTS - 1) / CONTROL_HISTORY_POINTS,
		.emit = true,
		.newest_t = e.newest_t,
	};
	return catalog_history_foreach(c->reader, 0, history_tier_row, history_class_row, &e);
}

/*
 * What moves compressed again on their way into each tier (at the tier's
 * zstd_level): bytes the files took where they came from, and take there.
 */
static int add_moved_rows(Conn *c) {
	TierSet *set = fs_tiers(c->fs);
	int r = 0;
	for (uint32_t n = 0; r >= 0 && n < tier_set_count(set); n++) {
		const ConfigTier *t = tier_set_config(set, n);
		CatalogTierMoved m;
		r = catalog_tier_moved_get(c->reader, n, &m);
		if (r < 0 || m.files == 0)
			continue;
		r = control_row(c, "moved");
		if (r >= 0)
			r = control_add(c, "tier", t ? t->name : "unknown");
		if (r >= 0)
			r = control_add_u64(c, "files", m.files);
		if (r >= 0)
			r = control_add_u64(c, "logical", m.logical);
		if (r >= 0)
			r = control_add_u64(c, "before", m.source_stored);
		if (r >= 0)
			r = control_add_u64(c, "after", m.stored);
	}
	return r;
}

/* What is on each tier, per class: files and logical bytes (the HTML report's section per tier). */
static int add_tier_classes(Conn *c, const FileVec *files) {
	uint64_t n[CONFIG_TIERS_MAX][_TIER_CLASS_MAX] = {}, bytes[CONFIG_TIERS_MAX][_TIER_CLASS_MAX] = {};
	for (size_t i = 0; i < files->n; i++) {
		const FileRow *f = &files->items[i];
		if (f->tier >= CONFIG_TIERS_MAX || f->file_class >= _TIER_CLASS_MAX)
			continue;
		n[f->tier][f->file_class]++;
		bytes[f->tier][f->file_class] += f->size;
	}
	int r = 0;
	for (uint32_t t = 0; r >= 0 && t < CONFIG_TIERS_MAX; t++)
		for (uint32_t k = 0; r >= 0 && k < _TIER_CLASS_MAX; k++) {
			if (n[t][k] == 0)
				continue;
			r = control_row(c, "tier_class");
			if (r >= 0)
				r = control_add_u64(c, "tier", t);
			if (r >= 0)
				r = control_add(c, "class", tier_class_to_string((TierFileClass) k));
			if (r >= 0)
				r = control_add_u64(c, "files", n[t][k]);
			if (r >= 0)
				r = control_add_u64(c, "logical", bytes[t][k]);
		}
	return r;
}

int control_report(Conn *c, const CtlRequest *req) {
	FileVec files = {};
	GroupVec groups = {};
	StrVec names = {};
	FsPolicyOutlook outlook;
	/* Per host of a shared tier: what the tier holds, not this catalog's files (hosts.c). */
	if (req->by == CTL_REPORT_BY_HOST)
		return control_report_hosts(c);
	int r = fs_policy_outlook(c->fs, c->reader, &outlook);
	if (r >= 0)
		r = control_census(c, &files);

	for (size_t i = 0; r >= 0 && i < files.n; i++) {
		const FileRow *f = &files.items[i];
		int64_t key = req->by == CTL_REPORT_BY_CLASS ? f->file_class
			    : req->by == CTL_REPORT_BY_TIER  ? f->tier
			    : req->by == CTL_REPORT_BY_DAY   ? day_of(f->mtime_ns)
							     : database_key(c, &names, f);
		if (key < 0) {
			r = (int) key;
			break;
		}
		Group *g = group_get(&groups, key);
		if (!g) {
			r = -ENOMEM;
			break;
		}
		g->files++;
		g->logical += f->size;
		g->raw += f->raw_bytes;
		if (f->state != CATALOG_FILE_SEALED)
			continue;
		DedupFileUsage u;
		int q = dedup_file_usage(c->reader, f->ino, &u);
		if (q == -ENOMEM)
			r = q;
		else if (q >= 0) {
			g->chunk_bytes += u.chunk_bytes;
			g->zero_bytes += u.zero_bytes;
			g->attributed += u.attributed;
			g->attributed_plain += u.attributed_plain;
		}
		/* A file whose recipe is damaged costs nothing we can tell; scrub names it. */
	}
	r = r >= 0 ? control_add(c, "by", ctl_report_by_to_string(req->by)) : r;
	r = r >= 0 ? add_outlook_fields(c, &outlook) : r;
	if (req->by == CTL_REPORT_BY_DATABASE && groups.n > 0)
		qsort_r(groups.items, groups.n, sizeof(Group), group_by_name, &names);
	for (size_t i = 0; r >= 0 && i < groups.n; i++) {
		const Group *g = &groups.items[i];
		char key[CATALOG_NAME_MAX + 1];
		if (req->by == CTL_REPORT_BY_CLASS)
			snprintf(key, sizeof(key), "%s", tier_class_to_string((TierFileClass) g->key));
		else if (req->by == CTL_REPORT_BY_DATABASE)
			snprintf(key, sizeof(key), "%s", names.names[g->key]);
		else if (req->by == CTL_REPORT_BY_TIER) {
			const ConfigTier *t = tier_set_config(fs_tiers(c->fs), (uint32_t) g->key);
			snprintf(key, sizeof(key), "%s", t ? t->name : "unknown");
		} else {
			time_t t = (time_t) (g->key * 86400);
			struct tm tm;
			gmtime_r(&t, &tm);
			strftime(key, sizeof(key), "%Y-%m-%d", &tm);
		}
		r = control_row(c, "group");
		if (r >= 0)
			r = control_add(c, "key", key);
		if (r >= 0)
			r = control_add_u64(c, "files", g->files);
		if (r >= 0)
			r = control_add_u64(c, "logical", g->logical);
		if (r >= 0)
			r = control_add_u64(c, "stored", (uint64_t) (g->attributed + 0.5) + g->raw);
		if (r >= 0)
			r = control_add_u64(c, "raw", g->raw);
		if (r >= 0)
			r = control_add_u64(c, "chunk_bytes", g->chunk_bytes);
		if (r >= 0)
			r = control_add_u64(c, "zero_bytes", g->zero_bytes);
		if (r >= 0)
			r = control_add_u64(c, "unique_plain", (uint64_t) (g->attributed_plain + 0.5));
		if (r >= 0)
			r = control_add_u64(c, "chunk_stored", (uint64_t) (g->attributed + 0.5));
	}
	free(groups.items);
	strvec_done(&names);
	if (r >= 0)
		r = add_moved_rows(c);
	if (r >= 0)
		r = add_outlook_rows(c, &outlook);
	if (r >= 0)
		r = add_tier_classes(c, &files);
	free(files.items);
	if (r >= 0)
		r = add_history(c);
	return r;
}
