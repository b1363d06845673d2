/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * tierctl's output: sizes in IEC units, aligned tables, JSON, ratios.
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/ctlproto.h"

/* "0 B", "1023 B", "1.0 KiB", "16.5 GiB"; exact bytes instead when exact. */
void tierctl_format_size(uint64_t bytes, bool exact, char buf[static 32]);
/* a / b as "1.23x", "-" when b is 0. */
void tierctl_format_ratio(double a, double b, char buf[static 32]);
/* b / 0 is 0 here: JSON has no infinity. */
double tierctl_ratio(double a, double b);

/* A table: a header row and rows of cells, printed with aligned columns. */
typedef struct TierctlTable {
	size_t n_columns;
	char **cells; /* n_rows x n_columns, row 0 the header */
	size_t n_rows, cap_rows;
	bool *right;  /* per column: right-aligned (numbers) */
} TierctlTable;

int tierctl_table_new(TierctlTable *t, const char *const *headers, size_t n);
/* Adds a row of n_columns cells (copied). */
int tierctl_table_add(TierctlTable *t, const char *const *cells);
void tierctl_table_print(const TierctlTable *t, FILE *f);
void tierctl_table_done(TierctlTable *t);

/* JSON writer on a FILE, with commas and nesting kept right. */
typedef struct TierctlJson {
	FILE *f;
	int depth;
	bool first[16];
} TierctlJson;

void tierctl_json_begin_object(TierctlJson *j, const char *key);
void tierctl_json_end_object(TierctlJson *j);
void tierctl_json_begin_array(TierctlJson *j, const char *key);
void tierctl_json_end_array(TierctlJson *j);
void tierctl_json_string(TierctlJson *j, const char *key, const char *value);
void tierctl_json_u64(TierctlJson *j, const char *key, uint64_t v);
void tierctl_json_double(TierctlJson *j, const char *key, double v);

/* One row of a reply: the index of its "row" field, fields up to the next row. */
typedef struct TierctlRow {
	size_t at;
} TierctlRow;

/* Indexes of the rows of kind in m, in order (malloc'ed; *ret_n of them). */
size_t *tierctl_rows(const CtlMessage *m, const char *kind, size_t *ret_n);
uint64_t tierctl_get_u64(const CtlMessage *m, size_t at, const char *name);
const char *tierctl_get(const CtlMessage *m, size_t at, const char *name);

/*
 * Writes the fields of m in [from, to) to j as members (numbers as numbers,
 * the rest as strings), skipping "row".
 */
void tierctl_json_fields(TierctlJson *j, const CtlMessage *m, size_t from, size_t to);
/* The index just past the fields of the row at `at` (or of the message's own fields for at = 0). */
size_t tierctl_row_end(const CtlMessage *m, size_t at);
