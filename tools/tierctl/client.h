/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * tierctl's side of the control socket: finding the fratier mount and its
 * socket, sending one request and collecting its reply frames.
 */

#include <stdbool.h>
#include <stdint.h>

#include "common/ctlproto.h"

/* Exit codes (tierctl.1, EXIT STATUS). */
enum {
	TIERCTL_EXIT_OK = 0,
	TIERCTL_EXIT_FAILURE = 1,     /* the daemon refused or failed the request */
	TIERCTL_EXIT_USAGE = 2,
	TIERCTL_EXIT_NOT_RUNNING = 3, /* no fratier mount, or nobody answers on its socket */
	TIERCTL_EXIT_DENIED = 4,
	TIERCTL_EXIT_PARTIAL = 5,     /* some paths failed, or scrub found damage */
	TIERCTL_EXIT_INTERRUPTED = 130,
};

typedef struct TierctlMount {
	char *mountpoint;
	char *source; /* the data directory (fsname) */
	char *socket;
} TierctlMount;

void tierctl_mount_done(TierctlMount *m);

/*
 * Finds the mount to talk to: mountpoint if given (must be a fratier mount),
 * else the fratier mount containing near (a path, or the current directory
 * if NULL), else the only fratier mount of the host.  socket overrides the
 * socket path (default SOURCE/control.sock).  On error prints what to do
 * and returns an exit code (> 0); 0 on success.
 */
int tierctl_mount_find(const char *mountpoint, const char *near, const char *socket, TierctlMount *ret);

/* Makes path absolute (from the current directory) and normalizes it lexically into a new string. */
char *tierctl_path_absolute(const char *path);

/*
 * The request path of an absolute path inside mountpoint ("/" for the
 * mount's root), as a new string; NULL if it is outside.
 */
char *tierctl_path_in_mount(const char *mountpoint, const char *abs);

/* Called for every progress frame; a negative return abandons the request. */
typedef int (*TierctlProgress)(const CtlMessage *frame, void *userdata);

typedef struct TierctlReply {
	CtlMessage data;     /* the fields of every data frame after their first two lines, in order */
	bool ok;
	int error;           /* errno of a failed request */
	char *message;       /* its message */
} TierctlReply;

void tierctl_reply_done(TierctlReply *r);

/*
 * Sends req over socket and collects the reply.  *interrupted (if not NULL)
 * is polled: when it becomes true the connection is closed (the daemon
 * stops what it can) and -EINTR returned.  Transport problems are printed
 * and returned as an exit code (> 0); a reply (even one saying error) gives 0.
 */
int tierctl_call(const char *socket, const CtlMessage *req, TierctlProgress progress, void *userdata,
		 volatile int *interrupted, TierctlReply *ret);
