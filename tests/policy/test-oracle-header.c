/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests of tier/oracle-header.c: a header built field by field parses
 * back to the same values; every damaged field is refused with the error
 * the header promises; kcrf times convert like Oracle's calendar; and the
 * archived logs oragen writes (tools/oragen, $FRATIER_ORAGEN) parse to the
 * thread and sequence their OMF names carry, with each log's next SCN the
 * next log's low SCN.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tier/oracle-header.h"

static int failures;

#define CHECK(cond)                                                                         \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                                         \
		}                                                                           \
	} while (0)

static void put16(uint8_t *p, uint16_t v) {
	p[0] = (uint8_t) v;
	p[1] = (uint8_t) (v >> 8);
}

static void put32(uint8_t *p, uint32_t v) {
	put16(p, (uint16_t) v);
	put16(p + 2, (uint16_t) (v >> 16));
}

static void put_scn(uint8_t *p, uint64_t scn) {
	put32(p, (uint32_t) scn);
	put16(p + 4, (uint16_t) (scn >> 32));
	put16(p + 6, 0);
}

/* The kcrf encoding, as Oracle computes it from a calendar date. */
static uint32_t kcrf(unsigned y, unsigned mo, unsigned d, unsigned h, unsigned mi, unsigned s) {
	/* Unsigned: dates past 2056 do not fit an int, and Oracle's field is a u32. */
	return ((((((y - 1988) * 12 + mo - 1) * 31 + d - 1) * 24 + h) * 60 + mi) * 60 + s);
}

static void seal_block1(uint8_t *b1, uint32_t bs) {
	uint16_t x = 0;
	put16(b1 + 14, 0);
	for (uint32_t i = 0; i < bs; i += 2)
		x ^= (uint16_t) (b1[i] | b1[i + 1] << 8);
	put16(b1 + 14, x);
}

static void build(uint8_t *buf, uint32_t bs) {
	uint8_t *b0 = buf, *b1 = buf + bs;

	memset(buf, 0, 2 * bs);
	b0[1] = 0x22;
	put32(b0 + 4, 0xffc00000u);
	put32(b0 + 20, bs);
	put32(b0 + 24, 20000);

	b1[0] = 0x01;
	b1[1] = 0x22;
	put32(b1 + 4, 1);
	put32(b1 + 8, 4711);
	put32(b1 + 24, 1234567890u);
	memcpy(b1 + 28, "PROD_1  ", 8);
	put32(b1 + 40, 20000);
	put32(b1 + 44, bs);
	put16(b1 + 50, 2);
	put32(b1 + 160, 987654);
	put16(b1 + 176, 2);
	put_scn(b1 + 180, UINT64_C(0x0001deadbeef));
	put32(b1 + 188, kcrf(2024, 2, 29, 23, 59, 58));
	put_scn(b1 + 192, UINT64_C(0x0001deadff00));
	put32(b1 + 200, kcrf(2024, 3, 1, 0, 10, 0));
	seal_block1(b1, bs);
}

static void test_fields(void) {
	static uint8_t buf[ORA_ARCHIVELOG_HEADER_BYTES];
	OraArchivelogInfo info;

	for (uint32_t bs = 512; bs <= 4096; bs *= 2) {
		if (bs == 2048)
			continue;
		build(buf, bs);
		memset(&info, 0, sizeof(info));
		CHECK(ora_archivelog_parse(buf, 2 * bs, &info) == 0);
		CHECK(info.dbid == 1234567890u);
		CHECK(strcmp(info.db_name, "PROD_1") == 0);
		CHECK(info.resetlogs_id == 987654);
		CHECK(info.thread == 2 && info.sequence == 4711);
		CHECK(info.low_scn == UINT64_C(0x0001deadbeef) && info.next_scn == UINT64_C(0x0001deadff00));
		CHECK(info.low_time == 1709251198);  /* 2024-02-29T23:59:58Z */
		CHECK(info.next_time == 1709251800); /* 2024-03-01T00:10:00Z */
		CHECK(info.block_size == bs && info.blocks == 20001);
		CHECK(ora_archivelog_parse(buf, 2 * bs - 1, &info) == -ENODATA);
	}
	CHECK(ora_archivelog_parse(buf, 0, &info) == -ENODATA);
	CHECK(ora_archivelog_parse(buf, 27, &info) == -ENODATA);
}

/* Applies one change to a valid 512-byte header; reseal keeps block 1's checksum right. */
static int parse_changed(void (*change)(uint8_t *buf), bool reseal) {
	static uint8_t buf[1024];
	OraArchivelogInfo info, untouched;

	build(buf, 512);
	change(buf);
	if (reseal)
		seal_block1(buf + 512, 512);
	memset(&info, 0x5a, sizeof(info));
	memcpy(&untouched, &info, sizeof(info));
	int r = ora_archivelog_parse(buf, sizeof(buf), &info);
	if (r < 0)
		CHECK(memcmp(&info, &untouched, sizeof(info)) == 0);
	return r;
}

static void c_b0_zero(uint8_t *b) { b[0] = 1; }
static void c_b0_type(uint8_t *b) { b[1] = 0x21; }
static void c_b0_mark(uint8_t *b) { b[4] ^= 1; }
static void c_b0_bs(uint8_t *b) { put32(b + 20, 2048); }
static void c_b1_sig(uint8_t *b) { b[512] = 0; }
static void c_b1_type(uint8_t *b) { b[513] = 0x21; }
static void c_b1_blockno(uint8_t *b) { put32(b + 512 + 4, 2); }
static void c_b1_flip(uint8_t *b) { b[512 + 300] ^= 0x40; }
static void c_b1_filetype(uint8_t *b) { put16(b + 512 + 50, 1); }
static void c_b1_bs(uint8_t *b) { put32(b + 512 + 44, 1024); }
static void c_b1_size(uint8_t *b) { put32(b + 512 + 40, 19999); }
static void c_b1_thread(uint8_t *b) { put16(b + 512 + 176, 0); }
static void c_b1_seq(uint8_t *b) { put32(b + 512 + 8, 0); }
static void c_b1_scn(uint8_t *b) { put_scn(b + 512 + 192, UINT64_C(0x0001deadbeef)); }
static void c_b1_time_order(uint8_t *b) { put32(b + 512 + 200, kcrf(2024, 2, 1, 0, 0, 0)); }
static void c_b1_time_hole(uint8_t *b) { put32(b + 512 + 188, kcrf(2023, 2, 30, 0, 0, 0)); }
static void c_b1_name(uint8_t *b) { b[512 + 29] = 'r'; }
static void c_b1_name_full(uint8_t *b) { memcpy(b + 512 + 28, "ABCDEFGH", 8); }

static void test_damage(void) {
	CHECK(parse_changed(c_b0_zero, true) == -EMEDIUMTYPE);
	CHECK(parse_changed(c_b0_type, true) == -EMEDIUMTYPE);
	CHECK(parse_changed(c_b0_mark, true) == -EMEDIUMTYPE);
	CHECK(parse_changed(c_b0_bs, true) == -EMEDIUMTYPE);
	CHECK(parse_changed(c_b1_sig, true) == -EBADMSG);
	CHECK(parse_changed(c_b1_type, true) == -EBADMSG);
	CHECK(parse_changed(c_b1_blockno, true) == -EBADMSG);
	CHECK(parse_changed(c_b1_flip, false) == -EBADMSG);
	CHECK(parse_changed(c_b1_filetype, true) == -EBADMSG);
	CHECK(parse_changed(c_b1_bs, true) == -EBADMSG);
	CHECK(parse_changed(c_b1_size, true) == -EBADMSG);
	CHECK(parse_changed(c_b1_thread, true) == -EBADMSG);
	CHECK(parse_changed(c_b1_seq, true) == -EBADMSG);
	CHECK(parse_changed(c_b1_scn, true) == -EBADMSG);
	CHECK(parse_changed(c_b1_time_order, true) == -EBADMSG);
	CHECK(parse_changed(c_b1_time_hole, true) == -EBADMSG);
	CHECK(parse_changed(c_b1_name, true) == -EBADMSG);
	/* A name of all eight characters has no padding and is fine. */
	CHECK(parse_changed(c_b1_name_full, true) == 0);
}

static void test_kcrf_time(void) {
	CHECK(ora_kcrf_time_to_unix(0) == 567993600); /* 1988-01-01T00:00:00Z */
	CHECK(ora_kcrf_time_to_unix(kcrf(2000, 2, 29, 12, 0, 0)) == 951825600);
	CHECK(ora_kcrf_time_to_unix(kcrf(2100, 2, 29, 0, 0, 0)) == -1); /* 2100 is not a leap year */
	CHECK(ora_kcrf_time_to_unix(kcrf(2024, 4, 31, 0, 0, 0)) == -1);
	CHECK(ora_kcrf_time_to_unix(kcrf(2024, 12, 31, 23, 59, 59)) == 1735689599);
	CHECK(ora_kcrf_time_to_unix(UINT32_MAX) > 0);
}

/* oragen's logs: header fields agree with the OMF name and chain by SCN. */
static void test_oragen(void) {
	const char *oragen = getenv("FRATIER_ORAGEN");
	char dir[] = "/tmp/fratier-test-orahdr-XXXXXX", cmd[512], path[1024];
	uint64_t next_scn[3] = { 0 };
	unsigned last_seq[3] = { 0 }, logs = 0;

	if (!oragen) {
		fprintf(stderr, "FRATIER_ORAGEN is not set (run through meson test)\n");
		failures++;
		return;
	}
	CHECK(mkdtemp(dir) != NULL);
	snprintf(cmd, sizeof(cmd), "'%s' --out '%s/fra' --days 2 --datafiles 1 --datafile-size 1M "
		 "--archivelog-size 256K --archivelogs-per-day 4 --image-copies 0 --no-zstd >/dev/null", oragen, dir);
	CHECK(system(cmd) == 0);

	for (int day = 1; day <= 2; day++) {
		char sub[600];
		snprintf(sub, sizeof(sub), "%s/fra/ORCL/archivelog/2024_01_%02d", dir, day);
		struct dirent **names;
		int n = scandir(sub, &names, NULL, alphasort);
		CHECK(n > 0);
		for (int k = 0; k < n; k++) {
			unsigned thread, seq;
			if (sscanf(names[k]->d_name, "o1_mf_%u_%u_", &thread, &seq) != 2) {
				free(names[k]);
				continue;
			}
			snprintf(path, sizeof(path), "%s/%s", sub, names[k]->d_name);
			free(names[k]);
			static uint8_t buf[ORA_ARCHIVELOG_HEADER_BYTES];
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			CHECK(fd >= 0);
			ssize_t got = read(fd, buf, sizeof(buf));
			close(fd);
			OraArchivelogInfo info;
			CHECK(got > 0 && ora_archivelog_parse(buf, (size_t) got, &info) == 0);
			CHECK(info.thread == thread && info.sequence == seq && thread < 3);
			CHECK(strcmp(info.db_name, "ORCL") == 0);
			if (thread < 3 && last_seq[thread] && seq == last_seq[thread] + 1)
				CHECK(info.low_scn == next_scn[thread]);
			if (thread < 3) {
				last_seq[thread] = seq;
				next_scn[thread] = info.next_scn;
			}
			logs++;
		}
		free(names);
	}
	CHECK(logs == 8);

	/* Neither a backup piece nor an image copy is taken for a redo log. */
	glob_t g;
	snprintf(path, sizeof(path), "%s/fra/ORCL/backupset/2024_01_01/*nnndf*", dir);
	CHECK(glob(path, 0, NULL, &g) == 0 && g.gl_pathc == 1);
	for (size_t k = 0; k < g.gl_pathc; k++) {
		static uint8_t buf[ORA_ARCHIVELOG_HEADER_BYTES];
		OraArchivelogInfo info;
		int fd = open(g.gl_pathv[k], O_RDONLY | O_CLOEXEC);
		CHECK(fd >= 0 && read(fd, buf, sizeof(buf)) == (ssize_t) sizeof(buf));
		close(fd);
		CHECK(ora_archivelog_parse(buf, sizeof(buf), &info) == -EMEDIUMTYPE);
	}
	globfree(&g);

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0);
}

int main(void) {
	test_fields();
	test_damage();
	test_kcrf_time();
	test_oragen();
	if (failures)
		fprintf(stderr, "%d checks failed\n", failures);
	else
		printf("oracle-header: ok\n");
	return failures ? 1 : 0;
}
