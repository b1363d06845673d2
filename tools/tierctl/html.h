/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* One group of a report (a class, a day or a tier), as the daemon sent it. */
typedef struct TierctlReportGroup {
	const char *key;
	uint64_t files, logical, stored, chunk_bytes, unique_plain, chunk_stored;
} TierctlReportGroup;

/*
 * Writes the report as one self-contained HTML page (inline SVG charts, no
 * external resources) to path.  Returns 0 or a negative errno.
 */
int tierctl_html_report(const char *path, const char *mountpoint, const char *by, const TierctlReportGroup *g,
			size_t n);
