/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Archived redo log headers (see oracle-header.h for the layout).  Every
 * field is read through a bounds-checked helper; anything that does not
 * match is an error, never a guess.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "tier/oracle-header.h"

#define REDO_BLOCK_TYPE 0x22
#define REDO_SIGNATURE 0x01
#define REDO0_MARK 0xffc00000u
#define KCRFH_FILE_TYPE_LOG 2

/* Block 0 */
#define B0_TYPE 1
#define B0_MARK 4
#define B0_BLOCK_SIZE 20
#define B0_BLOCK_COUNT 24

/* Block 1: redo block header, then kcrfh */
#define RBH_SIGNATURE 0
#define RBH_TYPE 1
#define RBH_BLOCK 4
#define RBH_SEQUENCE 8
#define KCRFH_DBID 24
#define KCRFH_DB_NAME 28
#define KCRFH_DB_NAME_LEN 8
#define KCRFH_FILE_SIZE 40
#define KCRFH_BLOCK_SIZE 44
#define KCRFH_FILE_TYPE 50
#define KCRFH_RESETLOGS_ID 160
#define KCRFH_THREAD 176
#define KCRFH_LOW_SCN 180
#define KCRFH_LOW_TIME 188
#define KCRFH_NEXT_SCN 192
#define KCRFH_NEXT_TIME 200

static uint16_t get16(const uint8_t *p) {
	return (uint16_t) (p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p) {
	return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

static uint64_t get_scn(const uint8_t *p) {
	return (uint64_t) get32(p) | (uint64_t) get16(p + 4) << 32;
}

static bool block_size_is_valid(uint32_t s) {
	return s == 512 || s == 1024 || s == 4096;
}

static bool block_xors_to_zero(const uint8_t *b, size_t size) {
	uint16_t x = 0;
	for (size_t i = 0; i < size; i += 2)
		x ^= get16(b + i);
	return x == 0;
}

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned) (y - era * 400);
	unsigned doy = (153 * (m + (m > 2 ? (unsigned) -3 : 9)) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t) doe - 719468;
}

int64_t ora_kcrf_time_to_unix(uint32_t t) {
	static const unsigned month_days[12] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	unsigned sec = t % 60, min = t / 60 % 60, hour = t / 3600 % 24;
	uint32_t days = t / 86400;
	unsigned day = days % 31 + 1, month = days / 31 % 12 + 1;
	int64_t year = 1988 + days / 31 / 12;
	bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;

	/* 31-day months leave holes: "February 30th" is no time Oracle writes. */
	if (day > month_days[month - 1] || (month == 2 && day == 29 && !leap))
		return -1;
	return days_from_civil(year, month, day) * 86400 + hour * 3600 + min * 60 + sec;
}

int ora_archivelog_parse(const void *buf, size_t len, OraArchivelogInfo *ret) {
	const uint8_t *b0 = buf;

	if (len < B0_BLOCK_COUNT + 4)
		return -ENODATA;
	if (b0[0] != 0 || b0[B0_TYPE] != REDO_BLOCK_TYPE || get32(b0 + B0_MARK) != REDO0_MARK)
		return -EMEDIUMTYPE;
	uint32_t bs = get32(b0 + B0_BLOCK_SIZE);
	if (!block_size_is_valid(bs))
		return -EMEDIUMTYPE;
	if (len < 2 * (size_t) bs)
		return -ENODATA;

	const uint8_t *b1 = b0 + bs;
	if (b1[RBH_SIGNATURE] != REDO_SIGNATURE || b1[RBH_TYPE] != REDO_BLOCK_TYPE || get32(b1 + RBH_BLOCK) != 1 ||
	    !block_xors_to_zero(b1, bs))
		return -EBADMSG;
	if (get16(b1 + KCRFH_FILE_TYPE) != KCRFH_FILE_TYPE_LOG || get32(b1 + KCRFH_BLOCK_SIZE) != bs ||
	    get32(b1 + KCRFH_FILE_SIZE) != get32(b0 + B0_BLOCK_COUNT))
		return -EBADMSG;

	OraArchivelogInfo info = {
		.dbid = get32(b1 + KCRFH_DBID),
		.resetlogs_id = get32(b1 + KCRFH_RESETLOGS_ID),
		.thread = get16(b1 + KCRFH_THREAD),
		.sequence = get32(b1 + RBH_SEQUENCE),
		.low_scn = get_scn(b1 + KCRFH_LOW_SCN),
		.next_scn = get_scn(b1 + KCRFH_NEXT_SCN),
		.low_time = ora_kcrf_time_to_unix(get32(b1 + KCRFH_LOW_TIME)),
		.next_time = ora_kcrf_time_to_unix(get32(b1 + KCRFH_NEXT_TIME)),
		.block_size = bs,
		.blocks = (uint64_t) get32(b0 + B0_BLOCK_COUNT) + 1,
	};
	/* Threads count from 1; a log covers a non-empty SCN range in time order. */
	if (info.thread == 0 || info.sequence == 0 || info.next_scn <= info.low_scn || info.low_time < 0 ||
	    info.next_time < info.low_time)
		return -EBADMSG;

	size_t n = KCRFH_DB_NAME_LEN;
	const uint8_t *name = b1 + KCRFH_DB_NAME;
	while (n > 0 && (name[n - 1] == ' ' || name[n - 1] == '\0'))
		n--;
	for (size_t i = 0; i < n; i++)
		/* DB_NAME is A-Z 0-9 _ $ #: anything else is not a name Oracle wrote. */
		if (!((name[i] >= 'A' && name[i] <= 'Z') || (name[i] >= '0' && name[i] <= '9') || name[i] == '_' ||
		      name[i] == '$' || name[i] == '#'))
			return -EBADMSG;
	memcpy(info.db_name, name, n);
	info.db_name[n] = '\0';

	*ret = info;
	return 0;
}
