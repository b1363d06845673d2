/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"

static int max_level = LOG_INFO;
static bool use_syslog;
static const char *program_name;

/* The last warnings and errors, for the daemon's status report. */
static pthread_mutex_t recent_lock = PTHREAD_MUTEX_INITIALIZER;
static LogRecent recent[LOG_RECENT_MAX]; /* protected by recent_lock */
static uint64_t recent_total;            /* protected by recent_lock */

size_t log_recent_get(LogRecent *buf, size_t n, uint64_t *ret_total) {
	size_t k = 0;
	pthread_mutex_lock(&recent_lock);
	uint64_t have = MIN(recent_total, (uint64_t) LOG_RECENT_MAX);
	/* Newest first. */
	for (uint64_t i = 0; i < have && k < n; i++)
		buf[k++] = recent[(recent_total - 1 - i) % LOG_RECENT_MAX];
	if (ret_total)
		*ret_total = recent_total;
	pthread_mutex_unlock(&recent_lock);
	return k;
}

static void recent_add(int level, const char *msg) {
	pthread_mutex_lock(&recent_lock);
	LogRecent *e = &recent[recent_total % LOG_RECENT_MAX];
	e->time = time(NULL);
	e->level = level;
	/* Long messages are cut: the report shows the start of each. */
	size_t n = strnlen(msg, sizeof(e->message) - 1);
	memcpy(e->message, msg, n);
	e->message[n] = 0;
	recent_total++;
	pthread_mutex_unlock(&recent_lock);
}

void log_set_max_level(int level) {
	max_level = level;
}

int log_get_max_level(void) {
	return max_level;
}

void log_open_syslog(const char *ident) {
	openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	use_syslog = true;
}

void log_set_program_name(const char *name) {
	program_name = name;
}

int log_internal(int level, int error, const char *file, int line, const char *format, ...) {
	char buf[2048];
	va_list ap;

	if (error < 0)
		error = -error;

	/* "%m" must print the error we were given, not whatever errno is now. */
	errno = error;
	va_start(ap, format);
	(void) vsnprintf(buf, sizeof(buf), format, ap);
	va_end(ap);

	if (level <= LOG_WARNING)
		recent_add(level, buf);

	if (use_syslog)
		syslog(level, "%s", buf);
	else if (program_name)
		fprintf(stderr, "%s: %s\n", program_name, buf);
	else if (max_level >= LOG_DEBUG)
		fprintf(stderr, "%s:%d: %s\n", file, line, buf);
	else
		fprintf(stderr, "%s\n", buf);

	return error > 0 ? -error : -EIO;
}
