/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Logging for the daemon glue and the tools.  Library layers (catalog/,
 * dedup/, tier/) log at debug at most: they return errors instead.
 *
 * Messages go to stderr, or to syslog once log_open_syslog() was called (the
 * daemon does so when it detaches).  "%m" in a format prints the errno given
 * to the *_errno variants.
 */

#include <stdarg.h>
#include <stdbool.h>
#include <syslog.h>

#include "common/macros.h"

void log_set_max_level(int level);
int log_get_max_level(void);
void log_open_syslog(const char *ident);
/* Prefix every line with this program name on stderr (tools). */
void log_set_program_name(const char *name);

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define LOG_RECENT_MAX 16
#define LOG_RECENT_MESSAGE_MAX 256

typedef struct LogRecent {
	time_t time;
	int level;
	char message[LOG_RECENT_MESSAGE_MAX];
} LogRecent;

/*
 * Copies up to n of the last LOG_RECENT_MAX messages logged at LOG_WARNING
 * or above, newest first, and returns how many; *ret_total (optional) gets
 * how many were ever logged.  Thread-safe.
 */
size_t log_recent_get(LogRecent *buf, size_t n, uint64_t *ret_total);

/* Returns -abs(error) when error != 0, else -EIO, so callers can "return log_..._errno()". */
int log_internal(int level, int error, const char *file, int line, const char *format, ...) _printf_(5, 6);

static inline bool log_would_log(int level) {
	return level <= log_get_max_level();
}

#define log_full_errno(level, error, ...)                                              \
	({                                                                             \
		int _l = (level), _e = (error);                                        \
		log_would_log(_l) ? log_internal(_l, _e, __FILE__, __LINE__, __VA_ARGS__) \
				  : (_e > 0 ? -_e : _e < 0 ? _e : -EIO);               \
	})

#define log_full(level, ...) (void) log_full_errno(level, 0, __VA_ARGS__)

#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_full(LOG_ERR, __VA_ARGS__)

#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, e, __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_INFO, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, e, __VA_ARGS__)

#define log_oom() log_error_errno(ENOMEM, "out of memory")
