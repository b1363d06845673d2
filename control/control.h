/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The control server tierctl talks to (protocol: docs/CONTROL.md,
 * common/ctlproto.h): a Unix socket beside the mount, whose requests are
 * served from the daemon's state through fs/daemon.h.  fs/main.c opens it
 * before the mount (a socket that cannot be made stops the start-up),
 * starts it once the daemon has detached, and frees it before the workers
 * stop.
 */

#include "fs/daemon.h"

typedef struct Control Control;

/*
 * Binds path (replacing a dead socket left by a crash: -EADDRINUSE when a
 * daemon answers there, -EEXIST when it is not a socket).  history_interval_s:
 * between samples of usage for the reports (history.c), 0: none.
 */
int control_open(Fs *fs, const char *path, unsigned history_interval_s, Control **ret);
/* Serves it: a listener thread, a thread per connection. */
int control_start(Control *ctl);
/*
 * Stops serving (waiting for the connections being served; a scrub stops
 * early), removes the socket and frees ctl.  Accepts NULL; returns NULL.
 */
Control *control_free(Control *ctl);
