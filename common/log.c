/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

static int max_level = LOG_INFO;
static bool use_syslog;
static const char *program_name;

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
