/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * Room for one more element in an array that doubles as it grows: what
 * every list gathered from a callback (a catalog walk, a directory
 * listing, a control message's fields) needs.  reallocarray() refuses a
 * size that overflows.  Header only, as macros.h: dedup/ may include
 * common/ but links no library of it (tests/layering).
 */

#include <errno.h>
#include <stdlib.h>

/*
 * Makes `p` (an array of `cap` elements, `n` in use) hold at least n + 1,
 * `first` elements the first time.  Evaluates to 0, or -ENOMEM with p and
 * cap as they were.  p and cap are lvalues, assigned on success.
 */
#define ARRAY_RESERVE_ONE(p, cap, n, first)                                     \
	({                                                                      \
		int _r_ = 0;                                                    \
		if ((n) >= (cap)) {                                             \
			size_t _cap_ = (cap) ? 2 * (size_t) (cap) : (size_t) (first); \
			__typeof__(p) _q_ = reallocarray((p), _cap_, sizeof(*(p))); \
			if (_q_) {                                              \
				(p) = _q_;                                      \
				(cap) = _cap_;                                  \
			} else                                                  \
				_r_ = -ENOMEM;                                  \
		}                                                               \
		_r_;                                                            \
	})
