/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * html.c — tierctl report --html: one self-contained page (inline CSS and
 * SVG, no script, no external resource) with the report's table, two bar
 * charts (logical against stored bytes per group, and the reduction per
 * group), what the policy moves next, and three charts over time from the
 * daemon's samples: the hot tier's use, each class's bytes, and the bytes
 * dedup and compression save.
 */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/macros.h"
#include "tools/tierctl/html.h"
#include "tools/tierctl/output.h"

#define BAR_HEIGHT 18
#define CHART_WIDTH 720
#define LABEL_WIDTH 150
#define LINE_HEIGHT 260
#define LINE_LEFT 90
#define LINE_SERIES_MAX 8

const char *const tierctl_outlook_names[TIERCTL_OUTLOOK_MAX] = {
	[TIERCTL_OUTLOOK_DUE] = "due",
	[TIERCTL_OUTLOOK_SPACE] = "space",
	[TIERCTL_OUTLOOK_DAY] = "day",
	[TIERCTL_OUTLOOK_WEEK] = "week",
	[TIERCTL_OUTLOOK_LATER] = "later",
};

static void html_escape(FILE *f, const char *s) {
	for (; *s; s++) {
		switch (*s) {
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '&':
			fputs("&amp;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		default:
			fputc(*s, f);
		}
	}
}

static void chart_sizes(FILE *f, const TierctlReportGroup *g, size_t n) {
	uint64_t max = 1;
	for (size_t i = 0; i < n; i++)
		max = MAX(max, MAX(g[i].logical, g[i].stored));
	int height = (int) n * (2 * BAR_HEIGHT + 12) + 40;
	double scale = (double) (CHART_WIDTH - LABEL_WIDTH - 110) / (double) max;
	fprintf(f, "<svg class=\"chart\" id=\"chart-bytes\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		   "role=\"img\" aria-label=\"logical and stored bytes per group\">\n",
		CHART_WIDTH, height);
	fprintf(f, "<rect x=\"%d\" y=\"4\" width=\"12\" height=\"12\" class=\"logical\"/><text x=\"%d\" y=\"15\">logical</text>\n",
		LABEL_WIDTH, LABEL_WIDTH + 16);
	fprintf(f, "<rect x=\"%d\" y=\"4\" width=\"12\" height=\"12\" class=\"stored\"/><text x=\"%d\" y=\"15\">stored</text>\n",
		LABEL_WIDTH + 90, LABEL_WIDTH + 106);
	for (size_t i = 0; i < n; i++) {
		int y = 30 + (int) i * (2 * BAR_HEIGHT + 12);
		char a[32], b[32];
		tierctl_format_size(g[i].logical, false, a);
		tierctl_format_size(g[i].stored, false, b);
		fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", LABEL_WIDTH - 8, y + BAR_HEIGHT + 4);
		html_escape(f, g[i].key);
		fputs("</text>\n", f);
		double wl = (double) g[i].logical * scale, ws = (double) g[i].stored * scale;
		fprintf(f, "<rect class=\"bar logical\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>"
			   "<text x=\"%.1f\" y=\"%d\">%s</text>\n",
			LABEL_WIDTH, y, wl, BAR_HEIGHT, LABEL_WIDTH + wl + 6, y + BAR_HEIGHT - 4, a);
		fprintf(f, "<rect class=\"bar stored\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>"
			   "<text x=\"%.1f\" y=\"%d\">%s</text>\n",
			LABEL_WIDTH, y + BAR_HEIGHT, ws, BAR_HEIGHT, LABEL_WIDTH + ws + 6, y + 2 * BAR_HEIGHT - 4, b);
	}
	fputs("</svg>\n", f);
}

static void chart_reduction(FILE *f, const TierctlReportGroup *g, size_t n) {
	double max = 1;
	for (size_t i = 0; i < n; i++)
		max = MAX(max, tierctl_ratio((double) g[i].logical, (double) g[i].stored));
	int height = (int) n * (BAR_HEIGHT + 10) + 20;
	double scale = (double) (CHART_WIDTH - LABEL_WIDTH - 80) / max;
	fprintf(f, "<svg class=\"chart\" id=\"chart-reduction\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		   "role=\"img\" aria-label=\"reduction per group\">\n",
		CHART_WIDTH, height);
	for (size_t i = 0; i < n; i++) {
		int y = 10 + (int) i * (BAR_HEIGHT + 10);
		char ratio[32];
		tierctl_format_ratio((double) g[i].logical, (double) g[i].stored, ratio);
		double w = tierctl_ratio((double) g[i].logical, (double) g[i].stored) * scale;
		fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", LABEL_WIDTH - 8, y + BAR_HEIGHT - 4);
		html_escape(f, g[i].key);
		fputs("</text>\n", f);
		fprintf(f, "<rect class=\"bar reduction\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>"
			   "<text x=\"%.1f\" y=\"%d\">%s</text>\n",
			LABEL_WIDTH, y, w, BAR_HEIGHT, LABEL_WIDTH + w + 6, y + BAR_HEIGHT - 4, ratio);
	}
	fputs("</svg>\n", f);
}

/* One line of a chart over time: points (t[i], v[i]) in time order. */
typedef struct Series {
	char name[64];
	int64_t *t;
	double *v;
	size_t n, cap;
} Series;

static int series_add(Series *s, int64_t t, double v) {
	if (s->n == s->cap) {
		size_t cap = MAX(s->cap * 2, (size_t) 32);
		int64_t *nt = reallocarray(s->t, cap, sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		s->t = nt;
		double *nv = reallocarray(s->v, cap, sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		s->v = nv;
		s->cap = cap;
	}
	s->t[s->n] = t;
	s->v[s->n++] = v;
	return 0;
}

static void series_done(Series *s, size_t n) {
	for (size_t i = 0; i < n; i++) {
		free(s[i].t);
		free(s[i].v);
	}
}

static void format_day(int64_t t, char buf[static 32]) {
	time_t tt = (time_t) t;
	struct tm tm;
	gmtime_r(&tt, &tm);
	strftime(buf, 32, "%Y-%m-%d %H:%M", &tm);
}

/* A line chart over time of byte counts, or of percentages (0 to 100), one colour per series (s0..s7 in the style). */
static void chart_lines(FILE *f, const char *id, const char *label, const Series *s, size_t n, bool percent) {
	int64_t t0 = INT64_MAX, t1 = INT64_MIN;
	double max = percent ? 100 : 1;
	for (size_t k = 0; k < n; k++)
		for (size_t i = 0; i < s[k].n; i++) {
			t0 = MIN(t0, s[k].t[i]);
			t1 = MAX(t1, s[k].t[i]);
			max = MAX(max, s[k].v[i]);
		}
	/*
	 * Fewer than two sample times draw no line and no time axis (with none
	 * at all, t0 and t1 are still the sentinels: dates from year -2e8):
	 * say so instead of an empty frame.
	 */
	if (t0 >= t1) {
		fprintf(f, "<p class=\"no-history\" id=\"%s\">Not enough history yet: ", id);
		html_escape(f, label);
		fputs(" needs samples at two times at least; the daemon records one at mount and then every "
		      "history_interval.</p>\n", f);
		return;
	}
	int plot_w = CHART_WIDTH - LINE_LEFT - 20, plot_h = LINE_HEIGHT - 60;
	double span = (double) (t1 - t0);
	fprintf(f, "<svg class=\"chart\" id=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		   "role=\"img\" aria-label=\"",
		id, CHART_WIDTH, LINE_HEIGHT + 20 * (int) ((n + 3) / 4));
	html_escape(f, label);
	fputs("\">\n", f);
	char top[32], from[32], to[32];
	if (percent)
		snprintf(top, sizeof(top), "100%%");
	else
		tierctl_format_size((uint64_t) max, false, top);
	format_day(t0, from);
	format_day(t1, to);
	fprintf(f, "<line class=\"axis\" x1=\"%d\" y1=\"10\" x2=\"%d\" y2=\"%d\"/>"
		   "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n",
		LINE_LEFT, LINE_LEFT, 10 + plot_h, LINE_LEFT, 10 + plot_h, LINE_LEFT + plot_w, 10 + plot_h);
	fprintf(f, "<text x=\"%d\" y=\"18\" text-anchor=\"end\">%s</text>"
		   "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">0</text>\n",
		LINE_LEFT - 6, top, LINE_LEFT - 6, 10 + plot_h);
	fprintf(f, "<text x=\"%d\" y=\"%d\">%s UTC</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s UTC</text>\n",
		LINE_LEFT, 28 + plot_h, from, LINE_LEFT + plot_w, 28 + plot_h, to);
	for (size_t k = 0; k < n; k++) {
		fprintf(f, "<polyline class=\"line s%zu\" points=\"", k % LINE_SERIES_MAX);
		for (size_t i = 0; i < s[k].n; i++)
			fprintf(f, "%s%.1f,%.1f", i ? " " : "", LINE_LEFT + (double) (s[k].t[i] - t0) / span * plot_w,
				10 + plot_h - s[k].v[i] / max * plot_h);
		fputs("\"/>\n", f);
		/* A single sample draws no line: mark every point while there are few. */
		if (s[k].n <= 48)
			for (size_t i = 0; i < s[k].n; i++)
				fprintf(f, "<circle class=\"dot s%zu\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\"/>\n", k % LINE_SERIES_MAX,
					LINE_LEFT + (double) (s[k].t[i] - t0) / span * plot_w, 10 + plot_h - s[k].v[i] / max * plot_h);
		int lx = LINE_LEFT + (int) (k % 4) * 160, ly = LINE_HEIGHT - 12 + 20 * (int) (k / 4);
		fprintf(f, "<rect class=\"key s%zu\" x=\"%d\" y=\"%d\" width=\"12\" height=\"12\"/><text x=\"%d\" y=\"%d\">",
			k % LINE_SERIES_MAX, lx, ly - 10, lx + 16, ly);
		html_escape(f, s[k].name);
		fputs("</text>\n", f);
	}
	fputs("</svg>\n", f);
}

/*
 * Series of the hot tier: what fratier stores there against the logical
 * bytes of its files; and apart, in percent, how full its filesystem is
 * (what the watermarks and Oracle's 85% warning are about), since that
 * filesystem may hold far more than fratier's files.
 */
static int history_hot(const TierctlReport *rep, Series s[static 2], Series *fill) {
	snprintf(s[0].name, sizeof(s[0].name), "stored by fratier");
	snprintf(s[1].name, sizeof(s[1].name), "logical");
	snprintf(fill->name, sizeof(fill->name), "filesystem used, %% of its size");
	for (size_t i = 0; i < rep->n_tiers; i++) {
		const TierctlHistoryTier *h = &rep->tiers[i];
		if (!h->hot)
			continue;
		int r = series_add(&s[0], h->t, (double) h->stored);
		if (r >= 0)
			r = series_add(&s[1], h->t, (double) h->logical);
		if (r >= 0 && h->capacity > 0)
			r = series_add(fill, h->t, 100.0 * (double) h->used / (double) h->capacity);
		if (r < 0)
			return r;
	}
	return 0;
}

/* One series per class (the first LINE_SERIES_MAX classes seen): logical bytes on every tier. */
static int history_classes(const TierctlReport *rep, Series s[static LINE_SERIES_MAX], size_t *ret_n) {
	size_t n = 0;
	for (size_t i = 0; i < rep->n_classes; i++) {
		const TierctlHistoryClass *h = &rep->classes[i];
		size_t k = 0;
		while (k < n && strcmp(s[k].name, h->file_class) != 0)
			k++;
		if (k == n) {
			if (n == LINE_SERIES_MAX)
				continue;
			snprintf(s[n++].name, sizeof(s[0].name), "%s", h->file_class);
		}
		int r = series_add(&s[k], h->t, (double) h->logical);
		if (r < 0)
			return r;
	}
	*ret_n = n;
	return 0;
}

/* What dedup and compression save, on every tier: logical less stored, per sample. */
static int history_savings(const TierctlReport *rep, Series *s) {
	snprintf(s->name, sizeof(s->name), "saved (logical - stored, all tiers)");
	for (size_t i = 0; i < rep->n_tiers;) {
		int64_t t = rep->tiers[i].t;
		double saved = 0;
		for (; i < rep->n_tiers && rep->tiers[i].t == t; i++)
			saved += (double) rep->tiers[i].logical - (double) rep->tiers[i].stored;
		int r = series_add(s, t, MAX(saved, 0.0));
		if (r < 0)
			return r;
	}
	return 0;
}

static int charts_over_time(FILE *f, const TierctlReport *rep) {
	Series hot[2] = {}, fill = {}, classes[LINE_SERIES_MAX] = {}, saved = {};
	size_t n_classes = 0;

	fputs("<h2>Over time</h2>\n", f);
	if (rep->n_tiers == 0) {
		fputs("<p>No samples of usage yet: the daemon records one at mount and then every history_interval.</p>\n", f);
		return 0;
	}
	int r = history_hot(rep, hot, &fill);
	if (r >= 0)
		r = history_classes(rep, classes, &n_classes);
	if (r >= 0)
		r = history_savings(rep, &saved);
	if (r >= 0) {
		fputs("<h3>Hot tier: fratier's files</h3>\n", f);
		chart_lines(f, "chart-hot", "hot tier use over time", hot, 2, false);
		fputs("<h3>Hot tier: its filesystem</h3>\n", f);
		chart_lines(f, "chart-hot-fill", "hot filesystem fill over time", &fill, 1, true);
		fputs("<h3>Logical bytes per class, all tiers</h3>\n", f);
		chart_lines(f, "chart-classes", "logical bytes per class over time", classes, n_classes, false);
		fputs("<h3>Saved by dedup and compression</h3>\n", f);
		chart_lines(f, "chart-saved", "bytes saved over time", &saved, 1, false);
	}
	series_done(hot, 2);
	series_done(&fill, 1);
	series_done(classes, LINE_SERIES_MAX);
	series_done(&saved, 1);
	return r;
}

static void outlook_table(FILE *f, const TierctlReport *rep) {
	fputs("<h2>What the policy moves next</h2>\n", f);
	if (!rep->policy_on)
		fputs("<p>The policy worker is off (-o policy=0): nothing moves unless tierctl migrate is run.</p>\n", f);
	else {
		char next[32];
		format_day(rep->policy_next_run, next);
		fprintf(f, "<p>Next pass at the latest %s UTC.</p>\n", next);
	}
	fputs("<table id=\"outlook\"><tr><th>class</th><th>to</th><th>next pass, by age</th><th>next pass, for space</th>"
	      "<th>within a day</th><th>within a week</th><th>later</th><th>first due</th></tr>\n",
	      f);
	for (size_t i = 0; i < rep->n_outlook; i++) {
		const TierctlOutlook *o = &rep->outlook[i];
		fputs("<tr><td>", f);
		html_escape(f, o->file_class);
		fputs("</td><td>", f);
		html_escape(f, o->target);
		fputs("</td>", f);
		for (int w = 0; w < TIERCTL_OUTLOOK_MAX; w++) {
			char b[32];
			tierctl_format_size(o->bytes[w], false, b);
			if (o->files[w])
				fprintf(f, "<td class=\"n\">%s in %llu</td>", b, (unsigned long long) o->files[w]);
			else
				fputs("<td class=\"n\">-</td>", f);
		}
		char due[32] = "-";
		if (o->next_due)
			format_day(o->next_due, due);
		fprintf(f, "<td>%s</td></tr>\n", due);
	}
	fputs("</table>\n", f);
}

/* Each tier: capacity, used, free, what classes are on it, and what the next pass moves off it. */
static int tiers_section(FILE *f, const TierctlReport *rep) {
	size_t n, nc;
	_cleanup_free_ size_t *tiers = tierctl_rows(rep->df, "tier", &n);
	_cleanup_free_ size_t *tc = rep->report ? tierctl_rows(rep->report, "tier_class", &nc) : NULL;
	if (!tiers)
		return -ENOMEM;
	fputs("<h2>Tiers</h2>\n<table id=\"tiers\"><tr><th>tier</th><th>role</th><th>capacity</th><th>used</th><th>free</th>"
	      "<th>what is on it</th><th>the next pass moves</th></tr>\n",
	      f);
	for (size_t i = 0; i < n; i++) {
		const CtlMessage *m = rep->df;
		size_t at = tiers[i];
		char cap[32], used[32], fr[32];
		tierctl_format_size(tierctl_get_u64(m, at, "capacity"), false, cap);
		tierctl_format_size(tierctl_get_u64(m, at, "used"), false, used);
		tierctl_format_size(tierctl_get_u64(m, at, "free"), false, fr);
		fputs("<tr class=\"tier\"><td>", f);
		html_escape(f, tierctl_get(m, at, "name"));
		fputs("</td><td>", f);
		html_escape(f, tierctl_get(m, at, "role"));
		fprintf(f, "</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td>", cap, used, fr);
		bool any = false;
		for (size_t k = 0; tc && k < nc; k++) {
			if (strcmp(tierctl_get(rep->report, tc[k], "tier"), tierctl_get(m, at, "tier")) != 0)
				continue;
			char b[32];
			tierctl_format_size(tierctl_get_u64(rep->report, tc[k], "logical"), false, b);
			fprintf(f, "%s", any ? "; " : "");
			html_escape(f, tierctl_get(rep->report, tc[k], "class"));
			fprintf(f, " %s in %llu", b, (unsigned long long) tierctl_get_u64(rep->report, tc[k], "files"));
			any = true;
		}
		fputs(any ? "</td><td>" : "nothing</td><td>", f);
		/* The planner's outlook covers the hot tier; lower tiers move on by their own age rules only. */
		any = false;
		for (size_t k = 0; strcmp(tierctl_get(m, at, "role"), "hot") == 0 && k < rep->n_outlook; k++) {
			const TierctlOutlook *o = &rep->outlook[k];
			uint64_t files = o->files[TIERCTL_OUTLOOK_DUE] + o->files[TIERCTL_OUTLOOK_SPACE];
			uint64_t bytes = o->bytes[TIERCTL_OUTLOOK_DUE] + o->bytes[TIERCTL_OUTLOOK_SPACE];
			if (files == 0)
				continue;
			char b[32];
			tierctl_format_size(bytes, false, b);
			fprintf(f, "%s", any ? "; " : "");
			html_escape(f, o->file_class);
			fprintf(f, " %s in %llu to ", b, (unsigned long long) files);
			html_escape(f, o->target);
			any = true;
		}
		fputs(any ? "</td></tr>\n" : "nothing</td></tr>\n", f);
	}
	fputs("</table>\n", f);
	return 0;
}

#define TIMELINE_LANE 22

/*
 * One chart per database: a lane per redo thread over the time its logs
 * span, each run of sequences a bar (its class names its first tier), each
 * gap a red bar, and below the lanes the windows a roll-forward crosses
 * without a gap on every thread.
 */
static int recovery_timelines(FILE *f, const CtlMessage *m) {
	size_t ndb;
	_cleanup_free_ size_t *dbs = tierctl_rows(m, "database", &ndb);
	if (!dbs)
		return -ENOMEM;
	fputs("<h2>Recoverability</h2>\n", f);
	if (ndb == 0) {
		fputs("<p>No archived log with a readable header here.</p>\n", f);
		return 0;
	}
	fputs("<p>Per database and redo thread, the archived logs held (bars, by the tier of their first log), the gaps "
	      "(red), and below them where a roll-forward crosses every thread without a gap (green).</p>\n",
	      f);
	for (size_t d = 0; d < ndb; d++) {
		size_t at = dbs[d], end = d + 1 < ndb ? dbs[d + 1] : m->n;
		int64_t t0 = (int64_t) tierctl_get_u64(m, at, "low_time"), t1 = (int64_t) tierctl_get_u64(m, at, "next_time");
		uint64_t threads = tierctl_get_u64(m, at, "threads");
		int plot_w = CHART_WIDTH - LINE_LEFT - 20;
		double span = t1 > t0 ? (double) (t1 - t0) : 1;
		int height = (int) (threads + 1) * TIMELINE_LANE + 50;
		fputs("<h3>", f);
		html_escape(f, tierctl_get(m, at, "db_name"));
		fprintf(f, " (DBID %s)</h3>\n<svg class=\"chart timeline\" id=\"timeline-%s-%s\" "
			   "xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" role=\"img\" "
			   "aria-label=\"archived logs over time\">\n",
			tierctl_get(m, at, "dbid"), tierctl_get(m, at, "dbid"), tierctl_get(m, at, "resetlogs_id"), CHART_WIDTH,
			height);
		uint16_t lane_thread[64];
		size_t lanes = 0;
		for (size_t i = at + 1; i < end; i++) {
			if (strcmp(m->fields[i].name, "row") != 0)
				continue;
			const char *kind = m->fields[i].value;
			bool run = strcmp(kind, "run") == 0, gap = strcmp(kind, "gap") == 0, win = strcmp(kind, "window") == 0;
			if (!run && !gap && !win)
				continue;
			size_t lane = 0;
			if (!win) {
				uint16_t t = (uint16_t) tierctl_get_u64(m, i, "thread");
				while (lane < lanes && lane_thread[lane] != t)
					lane++;
				if (lane == lanes && lanes < ELEMENTSOF(lane_thread)) {
					lane_thread[lanes++] = t;
					fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">thread %u</text>\n", LINE_LEFT - 6,
						10 + (int) lane * TIMELINE_LANE + 14, (unsigned) t);
				}
			} else
				lane = (size_t) threads;
			double x0 = LINE_LEFT + (double) ((int64_t) tierctl_get_u64(m, i, "low_time") - t0) / span * plot_w;
			double x1 = LINE_LEFT + (double) ((int64_t) tierctl_get_u64(m, i, "next_time") - t0) / span * plot_w;
			char tier[64] = "";
			if (run) {
				snprintf(tier, sizeof(tier), "%s", tierctl_get(m, i, "tiers"));
				tier[strcspn(tier, ",")] = '\0';
			}
			fprintf(f, "<rect class=\"%s%s%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"><title>",
				run ? "run tier-" : gap ? "gap" : "window", tier, "", x0, 10 + (int) lane * TIMELINE_LANE,
				MAX(x1 - x0, 1.0), win ? 8 : 18);
			if (win)
				fprintf(f, "SCN %s to %s without a gap", tierctl_get(m, i, "low_scn"), tierctl_get(m, i, "next_scn"));
			else
				fprintf(f, "thread %s sequences %s-%s%s (SCN %s to %s)%s%s", tierctl_get(m, i, "thread"),
					tierctl_get(m, i, "first_sequence"), tierctl_get(m, i, "last_sequence"), gap ? " missing" : "",
					tierctl_get(m, i, "low_scn"), tierctl_get(m, i, "next_scn"), run ? " on " : "",
					run ? tierctl_get(m, i, "tiers") : "");
			fputs("</title></rect>\n", f);
		}
		char from[32], to[32];
		format_day(t0, from);
		format_day(t1, to);
		int axis_y = 10 + (int) (threads + 1) * TIMELINE_LANE;
		fprintf(f, "<text x=\"%d\" y=\"%d\">%s UTC</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s UTC</text>\n",
			LINE_LEFT, axis_y + 14, from, LINE_LEFT + plot_w, axis_y + 14, to);
		fputs("</svg>\n", f);
	}
	return 0;
}

int tierctl_html_report(const char *path, const TierctlReport *rep) {
	const TierctlReportGroup *g = rep->groups;
	size_t n = rep->n_groups;
	const char *by = rep->by, *mountpoint = rep->mountpoint;
	_cleanup_fclose_ FILE *f = fopen(path, "we");
	if (!f)
		return -errno;
	char when[64];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", &tm);

	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>fratier report</title>\n"
	      "<style>\n"
	      "body{font-family:sans-serif;margin:2em;color:#222}\n"
	      "table{border-collapse:collapse;margin:1em 0}\n"
	      "td,th{padding:.3em .8em;border-bottom:1px solid #ddd}\n"
	      "td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
	      "#outlook td{white-space:nowrap}\n"
	      "svg text{font-size:12px;fill:#222}\n"
	      ".logical{fill:#7a9cc6}.stored{fill:#2d5a8c}.reduction{fill:#3c8c5a}\n"
	      ".axis{stroke:#888}.line{stroke-width:2}\n"
	      ".s0{stroke:#2d5a8c;fill:#2d5a8c}.s1{stroke:#c65a2d;fill:#c65a2d}.s2{stroke:#3c8c5a;fill:#3c8c5a}"
	      ".s3{stroke:#8c3c8c;fill:#8c3c8c}.s4{stroke:#8c8c3c;fill:#8c8c3c}.s5{stroke:#3c8c8c;fill:#3c8c8c}"
	      ".s6{stroke:#555;fill:#555}.s7{stroke:#c6a02d;fill:#c6a02d}\n"
	      "polyline.line{fill:none}\n"
	      ".run{fill:#2d5a8c}.run.tier-hot{fill:#c65a2d}.gap{fill:#d00}.window{fill:#3c8c5a}\n"
	      "</style></head><body>\n",
	      f);
	fputs("<h1>fratier report by ", f);
	html_escape(f, by);
	fputs("</h1>\n<p>Mount ", f);
	html_escape(f, mountpoint);
	fprintf(f, ", %s.</p>\n", when);

	uint64_t tl = 0, ts = 0, tf = 0;
	fputs("<table id=\"groups\"><tr><th>", f);
	html_escape(f, by);
	fputs("</th><th>files</th><th>logical</th><th>stored</th><th>dedup</th><th>compression</th><th>reduction</th></tr>\n", f);
	for (size_t i = 0; i < n; i++) {
		char l[32], s[32], d[32], c[32], r[32];
		tierctl_format_size(g[i].logical, false, l);
		tierctl_format_size(g[i].stored, false, s);
		tierctl_format_ratio((double) g[i].chunk_bytes, (double) g[i].unique_plain, d);
		tierctl_format_ratio((double) g[i].unique_plain, (double) g[i].chunk_stored, c);
		tierctl_format_ratio((double) g[i].logical, (double) g[i].stored, r);
		fputs("<tr><td>", f);
		html_escape(f, g[i].key);
		fprintf(f, "</td><td class=\"n\">%llu</td><td class=\"n\">%s</td><td class=\"n\">%s</td>"
			   "<td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td></tr>\n",
			(unsigned long long) g[i].files, l, s, d, c, r);
		tl += g[i].logical;
		ts += g[i].stored;
		tf += g[i].files;
	}
	char l[32], s[32], r[32];
	tierctl_format_size(tl, false, l);
	tierctl_format_size(ts, false, s);
	tierctl_format_ratio((double) tl, (double) ts, r);
	fprintf(f, "<tr><th>total</th><td class=\"n\">%llu</td><td class=\"n\">%s</td><td class=\"n\">%s</td>"
		   "<td></td><td></td><td class=\"n\">%s</td></tr>\n</table>\n",
		(unsigned long long) tf, l, s, r);

	fputs("<h2>Logical and stored bytes</h2>\n", f);
	chart_sizes(f, g, n);
	fputs("<h2>Reduction (logical / stored)</h2>\n", f);
	chart_reduction(f, g, n);
	fputs("<p>Stored bytes of shared chunks are split evenly over the files that reference them.</p>\n", f);
	outlook_table(f, rep);
	int q = rep->df ? tiers_section(f, rep) : 0;
	if (q >= 0 && rep->recovery)
		q = recovery_timelines(f, rep->recovery);
	if (q >= 0)
		q = charts_over_time(f, rep);
	if (q < 0)
		return q;
	fputs("</body></html>\n", f);
	if (fflush(f) != 0 || ferror(f))
		return -EIO;
	return 0;
}
