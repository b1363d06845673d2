/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ctlproto.h"

/* One group of a report (a class, a day or a tier), as the daemon sent it. */
typedef struct TierctlReportGroup {
	const char *key;
	uint64_t files, logical, stored, chunk_bytes, unique_plain, chunk_stored;
} TierctlReportGroup;

/* When the policy moves a class's files off the hot tier (the daemon's FsPolicyOutlookWhen, in order). */
enum { TIERCTL_OUTLOOK_DUE, TIERCTL_OUTLOOK_SPACE, TIERCTL_OUTLOOK_DAY, TIERCTL_OUTLOOK_WEEK, TIERCTL_OUTLOOK_LATER,
       TIERCTL_OUTLOOK_MAX };
extern const char *const tierctl_outlook_names[TIERCTL_OUTLOOK_MAX];

typedef struct TierctlOutlook {
	const char *file_class, *target;
	uint64_t files[TIERCTL_OUTLOOK_MAX], bytes[TIERCTL_OUTLOOK_MAX];
	int64_t next_due;         /* Unix seconds, 0: none */
	uint64_t held_files, held_bytes, held_due_files; /* kept hot by the recovery window (keep_hot) */
} TierctlOutlook;

/* Samples of usage over time, in time order (rows history_tier and history_class of the reply). */
typedef struct TierctlHistoryTier {
	int64_t t;
	bool hot;
	uint64_t capacity, used, logical, stored;
} TierctlHistoryTier;

typedef struct TierctlHistoryClass {
	int64_t t;
	const char *file_class;
	uint64_t logical, hot_logical;
} TierctlHistoryClass;

typedef struct TierctlReport {
	const char *mountpoint, *by;
	const TierctlReportGroup *groups;
	size_t n_groups;
	const TierctlOutlook *outlook;
	size_t n_outlook;
	bool policy_on;
	int64_t policy_next_run;
	const TierctlHistoryTier *tiers;
	size_t n_tiers;
	const TierctlHistoryClass *classes;
	size_t n_classes;
	/* Replies borrowed for the sections per tier and the recovery timelines; NULL leaves a section out. */
	const CtlMessage *report;     /* its tier_class rows */
	const CtlMessage *df;         /* its tier rows */
	const CtlMessage *recovery;   /* tierctl recovery's reply */
} TierctlReport;

/*
 * Writes the report as one self-contained HTML page (inline SVG charts, no
 * external resources) to path.  Returns 0 or a negative errno.
 */
int tierctl_html_report(const char *path, const TierctlReport *report);
