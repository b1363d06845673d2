/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * How large a pipe this process can make.  libfuse splices a read reply
 * through a pipe that must hold the whole reply plus a few pages, and a
 * request (a write's payload) from /dev/fuse into one that holds it and a
 * page more.  If it cannot grow one that large (past
 * /proc/sys/fs/pipe-max-size, 1 MiB by default: only CAP_SYS_RESOURCE may
 * go further), it copies instead: a reply through a buffer it allocates
 * anew for every reply, a request into the thread's buffer (one more copy
 * of every byte written).
 */

#include <stddef.h>

/*
 * The largest capacity a pipe of this process can be given, up to want
 * bytes: want itself if F_SETPIPE_SZ allows it, else the system's
 * pipe-max-size.  Returns 0 if it cannot tell (no pipe could be made).
 */
size_t pipe_capacity_max(size_t want);

/*
 * The largest read reply (a whole number of pages, at most want bytes)
 * that libfuse 3 can splice with a pipe of capacity bytes: its pipe must
 * hold the reply, the reply's header and a page per buffer of each.
 */
size_t pipe_splice_reply_max(size_t capacity, size_t want);

/*
 * The largest write request payload (a whole number of pages, at most want
 * bytes) that libfuse 3 can splice from /dev/fuse with a pipe of capacity
 * bytes: it splices a request only into a pipe that holds the payload and
 * a page for the request's header.
 */
size_t pipe_splice_request_max(size_t capacity, size_t want);
