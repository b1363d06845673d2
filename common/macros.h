/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Small language helpers shared by every layer: scoped cleanup, ownership
 * transfer and array sizing.  Nothing here allocates or logs.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _noreturn_ __attribute__((noreturn))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _public_ __attribute__((visibility("default")))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Hands ownership of *p to the caller and leaves NULL behind for _cleanup_. */
#define TAKE_PTR(p)                              \
	({                                       \
		__typeof__(p) _ptr_ = (p);       \
		(p) = NULL;                      \
		_ptr_;                           \
	})

/* Same for file descriptors: leaves -1 behind. */
#define TAKE_FD(fd)                              \
	({                                       \
		int _fd_ = (fd);                 \
		(fd) = -1;                       \
		_fd_;                            \
	})

static inline void freep(void *p) {
	free(*(void **) p);
}

static inline void closep(int *fd) {
	if (*fd >= 0) {
		int saved = errno;
		(void) close(*fd);
		errno = saved;
	}
}

static inline void fclosep(FILE **f) {
	if (*f)
		(void) fclose(*f);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Defines a NULL-tolerant scope-cleanup wrapper around an existing destructor. */
#define DEFINE_CLEANUP_FUNC(type, func)                    \
	static inline void func##p(type **p) {             \
		if (*p)                                    \
			func(*p);                          \
	}

/* Negative errno of the last libc failure, never 0 (so callers can return it). */
static inline int negative_errno(void) {
	return errno > 0 ? -errno : -EIO;
}
