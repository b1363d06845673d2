/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Identity and clock of the simulated database.  Time is Unix seconds (UTC,
 * no time zones, no wall clock): the SCN grows linearly with it, so a day's
 * archived logs, the SCNs stamped into the blocks changed that day and the
 * evening backup's checkpoint all agree.
 */

#include <string.h>

#include "tools/oragen/oragen.h"

void oradb_init(OraDb *db, uint64_t seed, const char *db_name, int64_t t0) {
	uint64_t h = hash2(seed, 0xdb);

	*db = (OraDb) {
		.seed = seed,
		.dbid = (uint32_t) (h % 4000000000u) + 100000000u,
		.activation = (uint32_t) hash2(h, 1),
		.resetlogs_id = (uint32_t) hash2(h, 2) | 0x40000000u,
		/* Wrap 0x40: a database that has lived a while; room below for its history. */
		.scn0 = (0x40ull << 32) + (hash2(h, 3) & 0xffffffffu),
		.t0 = t0,
		.first_sequence = 100 + (uint32_t) (hash2(h, 4) % 9000),
	};
	db->resetlogs_scn = db->scn0 - (uint64_t) 400 * 86400 * ORAGEN_SCN_PER_SECOND;
	strncpy(db->db_name, db_name, ORAGEN_DB_NAME_MAX);
}

uint64_t oradb_scn_at(const OraDb *db, int64_t t) {
	return db->scn0 + (uint64_t) ((t - db->t0) * (int64_t) ORAGEN_SCN_PER_SECOND);
}

int64_t oradb_day_start(const OraDb *db, unsigned day) {
	return db->t0 + (int64_t) (day - 1) * 86400;
}

/* Howard Hinnant's days_from_civil / civil_from_days. */
int64_t unix_from_civil(int year, int month, int day) {
	int64_t y = year - (month <= 2);
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

	return (era * 146097 + doe - 719468) * 86400;
}

void civil_from_unix(int64_t t, CivilTime *ret) {
	int64_t days = t >= 0 ? t / 86400 : (t - 86399) / 86400;
	int64_t secs = t - days * 86400;
	int64_t z = days + 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	int64_t d = doy - (153 * mp + 2) / 5 + 1;
	int64_t m = mp < 10 ? mp + 3 : mp - 9;

	*ret = (CivilTime) {
		.year = (int) (yoe + era * 400 + (m <= 2)),
		.month = (int) m,
		.day = (int) d,
		.hour = (int) (secs / 3600),
		.minute = (int) (secs / 60 % 60),
		.second = (int) (secs % 60),
	};
}

uint32_t ora_kcrf_time(int64_t t) {
	CivilTime c;

	civil_from_unix(t, &c);
	/* In u32 arithmetic, as the field is: from 2056 on the value no longer fits an int. */
	uint32_t months = (uint32_t) (c.year - 1988) * 12 + (uint32_t) c.month - 1;
	return (((months * 31 + (uint32_t) c.day - 1) * 24 + (uint32_t) c.hour) * 60 + (uint32_t) c.minute) * 60 +
	       (uint32_t) c.second;
}
