/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests of oragen's encoders against values Oracle itself produces:
 * NUMBER and DATE column bytes, kcrf times, block checksum and tail, and the
 * row-piece size computation that block layout relies on.
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/oragen/oragen.h"

static int failures;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                      \
			fputc('\n', stderr);                               \
			failures++;                                        \
		}                                                          \
	} while (0)

static void hex(const uint8_t *p, size_t n, char *out) {
	for (size_t i = 0; i < n; i++)
		sprintf(out + 3 * i, "%02x ", p[i]);
	out[n ? 3 * n - 1 : 0] = 0;
}

static void check_number(int64_t m, unsigned scale, const char *want) {
	uint8_t buf[32];
	char got[100];
	size_t n = ora_number_put(buf, m, scale);

	hex(buf, n, got);
	CHECK(strcmp(got, want) == 0, "NUMBER(%" PRId64 "e-%u) = %s, want %s", m, scale, got, want);
}

static void test_number(void) {
	check_number(0, 0, "80");
	check_number(1, 0, "c1 02");
	check_number(100, 0, "c2 02");
	check_number(12345, 0, "c3 02 18 2e");
	check_number(5, 1, "c0 33");           /* 0.5 */
	check_number(50, 2, "c0 33");          /* 0.50 */
	check_number(1234, 2, "c1 0d 23");     /* 12.34 */
	check_number(123456789, 2, "c4 02 18 2e 44 5a"); /* 1234567.89 */
	check_number(5, 4, "bf 06");           /* 0.0005 */
	check_number(-1, 0, "3e 64 66");
	check_number(-12345, 0, "3c 64 4e 38 66");
	check_number(-5, 1, "3f 33 66");       /* -0.5: exponent byte is ~(0xc0) */
	check_number(INT64_MAX, 0, "ca 0a 17 22 49 04 45 37 4e 3b 08");
}

static void test_date(void) {
	uint8_t d[7];
	char got[32];

	ora_date_put(d, unix_from_civil(2024, 1, 15) + 13 * 3600 + 45 * 60 + 30);
	hex(d, 7, got);
	CHECK(strcmp(got, "78 7c 01 0f 0e 2e 1f") == 0, "DATE = %s", got);

	ora_date_put(d, unix_from_civil(1999, 12, 31) + 86399);
	hex(d, 7, got);
	CHECK(strcmp(got, "77 c7 0c 1f 18 3c 3c") == 0, "DATE = %s", got);
}

static void test_calendar(void) {
	CHECK(unix_from_civil(1970, 1, 1) == 0, "epoch");
	CHECK(unix_from_civil(2024, 1, 1) == 1704067200, "2024-01-01");
	CHECK(unix_from_civil(2000, 3, 1) == 951868800, "2000-03-01");

	for (int64_t t = unix_from_civil(1988, 1, 1); t < unix_from_civil(2040, 1, 1); t += 86400 * 13 + 3607) {
		CivilTime c;

		civil_from_unix(t, &c);
		CHECK(unix_from_civil(c.year, c.month, c.day) + c.hour * 3600 + c.minute * 60 + c.second == t,
		      "round trip of %" PRId64, t);
	}

	CHECK(ora_kcrf_time(unix_from_civil(1988, 1, 1)) == 0, "kcrf epoch");
	CHECK(ora_kcrf_time(unix_from_civil(1988, 1, 2) + 1) == 86401, "kcrf day 2");
	/* Months are 31 days in kcrf time: Feb 1 is 31 days in, whatever January had. */
	CHECK(ora_kcrf_time(unix_from_civil(1989, 2, 1)) == (uint32_t) ((12 + 1) * 31 * 86400), "kcrf 1989-02-01");
}

static void test_block_finish(void) {
	uint8_t b[ORA_BLOCK_SIZE];
	uint64_t scn = 0x0010a1b2c3d4ull;

	for (unsigned i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t) (i * 7 + 3);
	ora_block_finish(b, ORA_BT_DATA, ora_rdba(4, 1234), scn, 2, ORA_FLAG_CHECKSUM);

	CHECK(ora_xor16(b, sizeof(b)) == 0, "block does not XOR to zero");
	CHECK(b[ORA_KCBH_TYPE] == ORA_BT_DATA && b[ORA_KCBH_FORMAT] == 0xa2, "type/format");
	CHECK(ora_get32(b + ORA_KCBH_RDBA) == (4u << 22 | 1234), "rdba");
	CHECK(ora_get32(b + ORA_KCBH_SCN_BASE) == 0xa1b2c3d4u && ora_get16(b + ORA_KCBH_SCN_WRAP) == 0x10, "scn");
	CHECK(ora_get32(b + ORA_TAIL_OFFSET) == (0xc3d4u << 16 | ORA_BT_DATA << 8 | 2), "tail %08x",
	      ora_get32(b + ORA_TAIL_OFFSET));

	b[100] ^= 1;
	CHECK(ora_xor16(b, sizeof(b)) != 0, "corruption not detected");
}

static void test_rows(void) {
	Rng r;

	rng_seed(&r, 42);
	for (unsigned i = 0; i < 3000; i++) {
		RowCols c;
		uint8_t out[ROW_DATA_MAX + 64];
		size_t want, got;

		rowgen_make((RowTemplate) (i % _ROW_TEMPLATE_MAX), 1000000 + i, &r, &c);
		want = rowgen_row_size(&c);
		got = rowgen_row_put(&c, 0x2c, 0, out);
		CHECK(want == got, "row size %zu != written %zu", want, got);
		CHECK(out[2] == c.ncols && c.ncols >= 5, "column count %u", c.ncols);
	}
}

int main(void) {
	test_number();
	test_date();
	test_calendar();
	test_block_finish();
	test_rows();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return EXIT_FAILURE;
	}
	return EXIT_SUCCESS;
}
