/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdint.h>
#include <time.h>

/* Nanoseconds on the given clock: CLOCK_MONOTONIC for intervals and deadlines, CLOCK_REALTIME for times stored or shown. */
static inline int64_t clock_ns(clockid_t clock) {
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Milliseconds on the monotonic clock: for deadlines counted in the milliseconds of a timeout. */
static inline uint64_t monotonic_ms(void) {
	return (uint64_t) clock_ns(CLOCK_MONOTONIC) / 1000000;
}
