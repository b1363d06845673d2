/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Column values for table rows, index keys and redo change vectors: Oracle
 * NUMBER and DATE encodings, names and words from small vocabularies, keys
 * that grow along a segment.  This is what makes blocks compress like real
 * OLTP data (2-4x with zstd) instead of like noise or like zeros.
 */

#include <assert.h>
#include <string.h>

#include "common/macros.h"
#include "tools/oragen/oragen.h"

static const char *const first_names[] = {
	"JAMES", "MARY", "JOHN", "PATRICIA", "ROBERT", "JENNIFER", "MICHAEL", "LINDA", "WILLIAM",
	"ELIZABETH", "DAVID", "BARBARA", "RICHARD", "SUSAN", "JOSEPH", "JESSICA", "THOMAS", "SARAH",
	"CHARLES", "KAREN", "CHRISTOPHER", "NANCY", "DANIEL", "LISA", "MATTHEW", "BETTY", "ANTHONY",
	"MARGARET", "MARK", "SANDRA", "PIERRE", "MARIE", "JEAN", "ANNE", "HANS", "ANNA", "GIOVANNI",
	"GIULIA", "JOSE", "CARMEN", "AKIRA", "YUKI", "WEI", "LI", "OLGA", "IVAN", "FATIMA", "AHMED",
	"INGRID", "LARS",
};

static const char *const last_names[] = {
	"SMITH", "JOHNSON", "WILLIAMS", "BROWN", "JONES", "GARCIA", "MILLER", "DAVIS", "RODRIGUEZ",
	"MARTINEZ", "HERNANDEZ", "LOPEZ", "GONZALEZ", "WILSON", "ANDERSON", "THOMAS", "TAYLOR", "MOORE",
	"JACKSON", "MARTIN", "LEE", "PEREZ", "THOMPSON", "WHITE", "HARRIS", "SANCHEZ", "CLARK",
	"RAMIREZ", "LEWIS", "ROBINSON", "MULLER", "SCHMIDT", "SCHNEIDER", "FISCHER", "DUBOIS",
	"LAURENT", "BERNARD", "ROSSI", "RUSSO", "FERRARI", "SATO", "SUZUKI", "TANAKA", "WANG", "ZHANG",
	"IVANOV", "NOVAK", "KOWALSKI", "JANSEN", "NIELSEN",
};

static const char *const cities[] = {
	"NEW YORK", "LOS ANGELES", "CHICAGO", "HOUSTON", "PHOENIX", "PHILADELPHIA", "SAN ANTONIO",
	"SAN DIEGO", "DALLAS", "SEATTLE", "BOSTON", "DENVER", "LONDON", "MANCHESTER", "PARIS", "LYON",
	"BERLIN", "MUNICH", "HAMBURG", "MADRID", "BARCELONA", "ROME", "MILAN", "AMSTERDAM",
	"ROTTERDAM", "BRUSSELS", "ZURICH", "GENEVA", "VIENNA", "PRAGUE", "WARSAW", "STOCKHOLM", "OSLO",
	"COPENHAGEN", "HELSINKI", "DUBLIN", "LISBON", "TOKYO", "OSAKA", "SEOUL", "SHANGHAI", "SINGAPORE",
	"SYDNEY", "MELBOURNE", "TORONTO", "MONTREAL", "MEXICO CITY", "SAO PAULO",
};

static const char *const countries[] = {
	"US", "GB", "FR", "DE", "ES", "IT", "NL", "BE", "CH", "AT", "CZ", "PL", "SE", "NO", "DK",
	"FI", "IE", "PT", "JP", "KR", "CN", "SG", "AU", "CA", "MX", "BR",
};

static const char *const domains[] = {
	"example.com", "mail.example.org", "corp.example.net", "example.co.uk", "example.de",
	"example.fr", "example.jp", "example.com.au",
};

static const char *const order_status[] = {
	"NEW", "PENDING", "PAID", "SHIPPED", "DELIVERED", "CANCELLED", "RETURNED", "ON_HOLD",
};

static const char *const currencies[] = { "USD", "EUR", "GBP", "CHF", "JPY", "SEK" };

static const char *const segments[] = { "RETAIL", "CORPORATE", "SMB", "GOVERNMENT", "PARTNER" };

static const char *const words[] = {
	"please", "deliver", "before", "after", "noon", "call", "customer", "on", "arrival", "leave",
	"at", "front", "door", "gift", "wrap", "fragile", "handle", "with", "care", "invoice",
	"attached", "express", "shipping", "requested", "backorder", "partial", "shipment", "replace",
	"damaged", "item", "refund", "issued", "discount", "applied", "loyalty", "member", "priority",
	"standard", "weekend", "delivery", "signature", "required", "contact", "by", "email", "phone",
	"reception", "warehouse", "pickup", "store", "return", "label", "printed", "address",
	"changed", "verified", "payment", "pending", "confirmed", "the", "and", "for", "to", "of",
	"order", "package", "box", "pallet", "units", "small", "large", "extra", "urgent", "note",
};

static const char *const hosts[] = {
	"appsrv01", "appsrv02", "appsrv03", "appsrv04", "appsrv05", "appsrv06", "batch01", "batch02",
	"websrv01", "websrv02", "websrv03", "etl01",
};

static const char *const components[] = {
	"AUTH", "BILLING", "ORDERS", "INVENTORY", "SHIPPING", "REPORTING", "SCHEDULER", "API", "CACHE",
	"NOTIFY",
};

static const char *const users[] = {
	"APP_USER", "BATCH", "REPORTER", "SCOTT", "HR", "ETL_LOAD", "WEBAPP", "SYSTEM",
};

/* ---- encoders ------------------------------------------------------------- */

size_t ora_number_put(uint8_t *out, int64_t mantissa, unsigned scale) {
	uint64_t m = mantissa < 0 ? 0 - (uint64_t) mantissa : (uint64_t) mantissa;
	uint8_t pairs[12]; /* base-100 digits, least significant first */
	int frac_pairs, exp100;
	size_t np = 0, n = 0;
	bool neg = mantissa < 0;

	if (m == 0) {
		out[0] = 0x80;
		return 1;
	}
	/* Pairs must line up on the decimal point: make the scale even. */
	if (scale & 1) {
		if (m % 10 == 0)
			m /= 10;
		else {
			assert(m <= UINT64_MAX / 10);
			m *= 10;
			scale++;
		}
		scale -= scale & 1;
	}
	frac_pairs = (int) scale / 2;
	while (m % 100 == 0) { /* trailing zero pairs are not stored */
		m /= 100;
		frac_pairs--;
	}
	while (m > 0) {
		pairs[np++] = (uint8_t) (m % 100);
		m /= 100;
	}
	exp100 = (int) np - 1 - frac_pairs;

	out[n++] = neg ? (uint8_t) (0x3e - exp100) : (uint8_t) (0xc1 + exp100);
	while (np > 0) {
		unsigned pair = pairs[--np];
		out[n++] = neg ? (uint8_t) (101 - pair) : (uint8_t) (pair + 1);
	}
	if (neg)
		out[n++] = 0x66; /* at most 10 pairs from an int64, so always terminated */
	return n;
}

void ora_date_put(uint8_t *out, int64_t t) {
	/* Rows of a block mostly share a day: convert the calendar part once per day. */
	static _Thread_local int64_t cached_day = INT64_MIN;
	static _Thread_local uint8_t cached[4];
	int64_t day = t >= 0 ? t / 86400 : (t - 86399) / 86400, secs = t - day * 86400;

	if (day != cached_day) {
		CivilTime c;

		civil_from_unix(day * 86400, &c);
		cached[0] = (uint8_t) (c.year / 100 + 100);
		cached[1] = (uint8_t) (c.year % 100 + 100);
		cached[2] = (uint8_t) c.month;
		cached[3] = (uint8_t) c.day;
		cached_day = day;
	}
	memcpy(out, cached, 4);
	out[4] = (uint8_t) (secs / 3600 + 1);
	out[5] = (uint8_t) (secs / 60 % 60 + 1);
	out[6] = (uint8_t) (secs % 60 + 1);
}

/* ---- row building --------------------------------------------------------- */

#define PICK(r, v) ((v)[rng_below((r), ELEMENTSOF(v))])

/* Skewed pick: low indexes are much more frequent, as in real data. */
#define PICK_SKEWED(r, v) ((v)[skewed((r), ELEMENTSOF(v))])

static uint32_t skewed(Rng *r, uint32_t n) {
	uint32_t a = rng_below(r, n), b = rng_below(r, n);
	return MIN(a, b);
}

/* 2020-01-01 00:00 UTC: the dates in rows are about the history of the data. */
#define ROW_EPOCH 1577836800

typedef struct RowBuilder {
	RowCols *c;
	size_t used;
} RowBuilder;

static uint8_t *col_begin(RowBuilder *b) {
	assert(b->c->ncols < ROW_COLUMNS_MAX);
	b->c->off[b->c->ncols] = (uint16_t) b->used;
	return b->c->data + b->used;
}

static void col_end(RowBuilder *b, size_t len) {
	assert(b->used + len <= ROW_DATA_MAX);
	b->c->len[b->c->ncols++] = (uint16_t) len;
	b->used += len;
}

static void col_null(RowBuilder *b) {
	b->c->off[b->c->ncols] = (uint16_t) b->used;
	b->c->len[b->c->ncols++] = ROW_NULL;
}

static void col_number(RowBuilder *b, int64_t m, unsigned scale) {
	col_end(b, ora_number_put(col_begin(b), m, scale));
}

static void col_date(RowBuilder *b, int64_t t) {
	ora_date_put(col_begin(b), t);
	col_end(b, 7);
}

static void col_str(RowBuilder *b, const char *s) {
	size_t n = strlen(s);
	memcpy(col_begin(b), s, n);
	col_end(b, n);
}

/* Appends to the column being built (between col_begin and col_end). */
static size_t cat(uint8_t *dst, size_t at, const char *s) {
	size_t n = strlen(s);
	memcpy(dst + at, s, n);
	return at + n;
}

static size_t cat_uint(uint8_t *dst, size_t at, uint64_t v, unsigned width) {
	char tmp[24];
	unsigned n = 0;

	do {
		tmp[n++] = (char) ('0' + v % 10);
		v /= 10;
	} while (v > 0 || n < width);
	while (n > 0)
		dst[at++] = (uint8_t) tmp[--n];
	return at;
}

static void lower_into(uint8_t *dst, size_t *at, const char *s) {
	for (; *s; s++)
		dst[(*at)++] = (uint8_t) ((*s >= 'A' && *s <= 'Z') ? *s + 32 : *s);
}

static void row_orders(uint64_t id, Rng *r, RowBuilder *b) {
	col_number(b, (int64_t) id, 0);
	col_number(b, 1 + skewed(r, 250000), 0);
	col_str(b, PICK_SKEWED(r, order_status));
	col_number(b, 100 + skewed(r, 250000) + rng_below(r, 100) * (rng_pct(r, 30) ? 0 : 1), 2);
	col_str(b, PICK_SKEWED(r, currencies));
	col_date(b, ROW_EPOCH + (int64_t) (id % 1500000) * 60 + rng_below(r, 60));
	col_str(b, PICK_SKEWED(r, cities));
	if (rng_pct(r, 65))
		return; /* trailing NULL columns are not stored */
	uint8_t *p = col_begin(b);
	size_t n = 0, nw = 2 + rng_below(r, 6);
	for (size_t i = 0; i < nw; i++) {
		if (i)
			p[n++] = ' ';
		n = cat(p, n, PICK_SKEWED(r, words));
	}
	col_end(b, n);
}

static void row_customers(uint64_t id, Rng *r, RowBuilder *b) {
	const char *first = PICK_SKEWED(r, first_names), *last = PICK_SKEWED(r, last_names);
	uint8_t *p;
	size_t n = 0;

	col_number(b, (int64_t) id, 0);
	col_str(b, first);
	col_str(b, last);

	p = col_begin(b);
	lower_into(p, &n, first);
	p[n++] = '.';
	lower_into(p, &n, last);
	if (rng_pct(r, 40))
		n = cat_uint(p, n, rng_below(r, 100), 0);
	p[n++] = '@';
	n = cat(p, n, PICK_SKEWED(r, domains));
	col_end(b, n);

	if (rng_pct(r, 15))
		col_null(b);
	else {
		p = col_begin(b);
		n = cat(p, 0, "+");
		n = cat_uint(p, n, 1 + skewed(r, 60), 0);
		p[n++] = ' ';
		n = cat_uint(p, n, rng_below(r, 1000), 3);
		p[n++] = ' ';
		n = cat_uint(p, n, rng_below(r, 10000000), 7);
		col_end(b, n);
	}
	col_str(b, PICK_SKEWED(r, cities));
	col_str(b, PICK_SKEWED(r, countries));
	col_date(b, ROW_EPOCH + (int64_t) (id % 3000000) * 30 + rng_below(r, 30));
	col_str(b, PICK_SKEWED(r, segments));
	col_number(b, rng_below(r, 2000000), 2); /* credit limit */
}

static void row_events(uint64_t id, Rng *r, RowBuilder *b) {
	uint8_t *p;
	size_t n;

	col_number(b, (int64_t) id, 0);
	col_date(b, ROW_EPOCH + (int64_t) (id % 30000000) * 3);
	col_str(b, PICK_SKEWED(r, hosts));
	col_number(b, 1 + skewed(r, 5), 0);
	col_str(b, PICK_SKEWED(r, components));

	p = col_begin(b);
	switch (rng_below(r, 5)) {
	case 0:
		n = cat(p, 0, "session ");
		n = cat_uint(p, n, rng_below(r, 100000), 0);
		n = cat(p, n, " opened by ");
		n = cat(p, n, PICK_SKEWED(r, users));
		n = cat(p, n, " from 10.");
		n = cat_uint(p, n, rng_below(r, 4), 0);
		n = cat(p, n, ".");
		n = cat_uint(p, n, rng_below(r, 256), 0);
		n = cat(p, n, ".");
		n = cat_uint(p, n, rng_below(r, 256), 0);
		break;
	case 1:
		n = cat(p, 0, "request ");
		n = cat(p, n, PICK(r, components));
		n = cat(p, n, "/");
		n = cat_uint(p, n, rng_below(r, 100000000), 8);
		n = cat(p, n, " completed in ");
		n = cat_uint(p, n, skewed(r, 5000), 0);
		n = cat(p, n, " ms");
		break;
	case 2:
		n = cat(p, 0, "job ");
		n = cat(p, n, PICK_SKEWED(r, components));
		n = cat(p, n, "_SYNC processed ");
		n = cat_uint(p, n, skewed(r, 100000), 0);
		n = cat(p, n, " rows");
		break;
	case 3:
		n = cat(p, 0, "cache miss ratio ");
		n = cat_uint(p, n, rng_below(r, 100), 0);
		n = cat(p, n, ".");
		n = cat_uint(p, n, rng_below(r, 100), 2);
		n = cat(p, n, "% on ");
		n = cat(p, n, PICK(r, hosts));
		break;
	default:
		n = cat(p, 0, "user ");
		n = cat(p, n, PICK_SKEWED(r, users));
		n = cat(p, n, " updated order ");
		n = cat_uint(p, n, rng_below(r, 5000000), 0);
		n = cat(p, n, " status ");
		n = cat(p, n, PICK_SKEWED(r, order_status));
		break;
	}
	col_end(b, n);

	if (rng_pct(r, 30))
		return;
	col_number(b, skewed(r, 20000), 0);
}

void rowgen_make(RowTemplate tpl, uint64_t id, Rng *r, RowCols *ret) {
	RowBuilder b = { .c = ret };

	ret->ncols = 0;
	switch (tpl) {
	case ROW_ORDERS:
		row_orders(id, r, &b);
		break;
	case ROW_CUSTOMERS:
		row_customers(id, r, &b);
		break;
	default:
		row_events(id, r, &b);
		break;
	}
}

size_t rowgen_row_size(const RowCols *c) {
	size_t n = 3;

	for (unsigned i = 0; i < c->ncols; i++)
		n += c->len[i] == ROW_NULL ? 1 : (c->len[i] > 250 ? 3u : 1u) + c->len[i];
	return n;
}

size_t rowgen_row_put(const RowCols *c, uint8_t flag, uint8_t lock, uint8_t *out) {
	size_t n = 0;

	out[n++] = flag;
	out[n++] = lock;
	out[n++] = (uint8_t) c->ncols;
	for (unsigned i = 0; i < c->ncols; i++) {
		uint16_t len = c->len[i];

		if (len == ROW_NULL) {
			out[n++] = 0xff;
			continue;
		}
		if (len > 250) {
			out[n++] = 0xfe;
			out[n++] = (uint8_t) (len >> 8);
			out[n++] = (uint8_t) len;
		} else
			out[n++] = (uint8_t) len;
		memcpy(out + n, c->data + c->off[i], len);
		n += len;
	}
	return n;
}
