/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * output.c — what tierctl prints: IEC sizes, aligned tables, JSON.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "tools/tierctl/output.h"

void tierctl_format_size(uint64_t bytes, bool exact, char buf[static 32]) {
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	if (exact || bytes < 1024) {
		snprintf(buf, 32, exact ? "%llu" : "%llu B", (unsigned long long) bytes);
		return;
	}
	double v = (double) bytes;
	size_t u = 0;
	while (v >= 1024 && u + 1 < ELEMENTSOF(units)) {
		v /= 1024;
		u++;
	}
	snprintf(buf, 32, "%.1f %s", v, units[u]);
}

double tierctl_ratio(double a, double b) {
	return b > 0 ? a / b : 0;
}

void tierctl_format_ratio(double a, double b, char buf[static 32]) {
	if (b > 0)
		snprintf(buf, 32, "%.2fx", a / b);
	else
		snprintf(buf, 32, "-");
}

int tierctl_table_new(TierctlTable *t, const char *const *headers, size_t n) {
	*t = (TierctlTable) { .n_columns = n };
	t->right = calloc(n, sizeof(bool));
	if (!t->right)
		return -ENOMEM;
	return tierctl_table_add(t, headers);
}

int tierctl_table_add(TierctlTable *t, const char *const *cells) {
	if (t->n_rows == t->cap_rows) {
		size_t cap = MAX(t->cap_rows * 2, (size_t) 16);
		char **p = realloc(t->cells, cap * t->n_columns * sizeof(char *));
		if (!p)
			return -ENOMEM;
		t->cells = p;
		t->cap_rows = cap;
	}
	for (size_t i = 0; i < t->n_columns; i++) {
		t->cells[t->n_rows * t->n_columns + i] = strdup(cells[i] ?: "");
		if (!t->cells[t->n_rows * t->n_columns + i]) {
			for (size_t k = 0; k < i; k++)
				free(t->cells[t->n_rows * t->n_columns + k]);
			return -ENOMEM;
		}
	}
	t->n_rows++;
	return 0;
}

void tierctl_table_print(const TierctlTable *t, FILE *f) {
	size_t *width = calloc(t->n_columns, sizeof(size_t));
	if (!width)
		return;
	for (size_t r = 0; r < t->n_rows; r++)
		for (size_t c = 0; c < t->n_columns; c++)
			width[c] = MAX(width[c], strlen(t->cells[r * t->n_columns + c]));
	for (size_t r = 0; r < t->n_rows; r++) {
		for (size_t c = 0; c < t->n_columns; c++) {
			const char *cell = t->cells[r * t->n_columns + c];
			bool last = c + 1 == t->n_columns;
			if (t->right[c])
				fprintf(f, "%*s%s", (int) width[c], cell, last ? "" : "  ");
			else if (last)
				fputs(cell, f);
			else
				fprintf(f, "%-*s  ", (int) width[c], cell);
		}
		fputc('\n', f);
	}
	free(width);
}

void tierctl_table_done(TierctlTable *t) {
	for (size_t i = 0; i < t->n_rows * t->n_columns; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t->right);
	*t = (TierctlTable) {};
}

static void json_escape(FILE *f, const char *s) {
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			/* Bytes, not characters: names need not be UTF-8, and this keeps the JSON valid. */
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void json_key(TierctlJson *j, const char *key) {
	if (j->depth > 0) {
		if (!j->first[j->depth])
			fputc(',', j->f);
		j->first[j->depth] = false;
		fprintf(j->f, "\n%*s", 2 * j->depth, "");
	}
	if (key) {
		json_escape(j->f, key);
		fputs(": ", j->f);
	}
}

static void json_open(TierctlJson *j, const char *key, char c) {
	json_key(j, key);
	fputc(c, j->f);
	j->depth++;
	j->first[j->depth] = true;
}

static void json_close(TierctlJson *j, char c) {
	bool empty = j->first[j->depth];
	j->depth--;
	if (!empty)
		fprintf(j->f, "\n%*s", 2 * j->depth, "");
	fputc(c, j->f);
	if (j->depth == 0)
		fputc('\n', j->f);
}

void tierctl_json_begin_object(TierctlJson *j, const char *key) {
	json_open(j, key, '{');
}

void tierctl_json_end_object(TierctlJson *j) {
	json_close(j, '}');
}

void tierctl_json_begin_array(TierctlJson *j, const char *key) {
	json_open(j, key, '[');
}

void tierctl_json_end_array(TierctlJson *j) {
	json_close(j, ']');
}

void tierctl_json_string(TierctlJson *j, const char *key, const char *value) {
	json_key(j, key);
	json_escape(j->f, value);
}

void tierctl_json_u64(TierctlJson *j, const char *key, uint64_t v) {
	json_key(j, key);
	fprintf(j->f, "%llu", (unsigned long long) v);
}

void tierctl_json_double(TierctlJson *j, const char *key, double v) {
	json_key(j, key);
	fprintf(j->f, "%.6g", v);
}

size_t *tierctl_rows(const CtlMessage *m, const char *kind, size_t *ret_n) {
	size_t n = 0;
	size_t *out = malloc((m->n + 1) * sizeof(size_t));
	if (!out) {
		*ret_n = 0;
		return NULL;
	}
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->fields[i].name, "row") == 0 && strcmp(m->fields[i].value, kind) == 0)
			out[n++] = i;
	*ret_n = n;
	return out;
}

uint64_t tierctl_get_u64(const CtlMessage *m, size_t at, const char *name) {
	uint64_t v = 0;
	(void) ctl_message_get_u64(m, at, name, &v);
	return v;
}

const char *tierctl_get(const CtlMessage *m, size_t at, const char *name) {
	return ctl_message_get(m, at, name) ?: "";
}

size_t tierctl_row_end(const CtlMessage *m, size_t at) {
	size_t i = at + (at < m->n && strcmp(m->fields[at].name, "row") == 0 ? 1 : 0);
	while (i < m->n && strcmp(m->fields[i].name, "row") != 0)
		i++;
	return i;
}

void tierctl_json_fields(TierctlJson *j, const CtlMessage *m, size_t from, size_t to) {
	for (size_t i = from; i < to; i++) {
		const CtlField *f = &m->fields[i];
		uint64_t v;
		if (strcmp(f->name, "row") == 0)
			continue;
		if (ctl_parse_u64(f->value, &v) == 0)
			tierctl_json_u64(j, f->name, v);
		else
			tierctl_json_string(j, f->name, f->value);
	}
}
