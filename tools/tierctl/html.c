/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * html.c — tierctl report --html: one self-contained page (inline CSS and
 * SVG, no script, no external resource) with the report's table and two
 * charts: logical against stored bytes per group, and the reduction per
 * group.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/macros.h"
#include "tools/tierctl/html.h"
#include "tools/tierctl/output.h"

#define BAR_HEIGHT 18
#define CHART_WIDTH 720
#define LABEL_WIDTH 150

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

int tierctl_html_report(const char *path, const char *mountpoint, const char *by, const TierctlReportGroup *g,
			size_t n) {
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
	      "svg text{font-size:12px;fill:#222}\n"
	      ".logical{fill:#7a9cc6}.stored{fill:#2d5a8c}.reduction{fill:#3c8c5a}\n"
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
	fputs("<p>Stored bytes of shared chunks are split evenly over the files that reference them.</p>\n"
	      "</body></html>\n",
	      f);
	if (fflush(f) != 0 || ferror(f))
		return -EIO;
	return 0;
}
