/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Private to dedup/, do not include outside it.  Little-endian field access
 * for the on-disk formats (docs/FORMAT.md), safe at any alignment.
 */

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t le16_get(const uint8_t *p) {
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static inline uint32_t le32_get(const uint8_t *p) {
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static inline uint64_t le64_get(const uint8_t *p) {
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static inline void le16_put(uint8_t *p, uint16_t v) {
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void le32_put(uint8_t *p, uint32_t v) {
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void le64_put(uint8_t *p, uint64_t v) {
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

/* Whether buf[0, len) is all zero: reserved fields must be. */
static inline int le_is_zero(const uint8_t *p, size_t len) {
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return 0;
	return 1;
}
