/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * server.c — the control socket tierctl talks to (protocol:
 * docs/CONTROL.md, common/ctlproto.h): the socket, the peer's credentials,
 * the frames, and the dispatch of a request to its handler (reports:
 * report-*.c; moves: moves.c; maintenance: maintenance.c).
 *
 * One listener thread accepts connections on a Unix socket and hands each
 * to a worker thread of its own; a connection carries one request and its
 * reply frames.  Who may do what comes from the peer's credentials
 * (SO_PEERCRED, SO_PEERGROUPS), checked the way the kernel checks the
 * mount:
 *   - reports (status, df, du, ls, report, policy): whoever may read the
 *     mount's root directory (root; the daemon's user; with allow_other,
 *     anyone the root's mode bits let read), and du/ls need search
 *     permission on every directory on the way and read permission on the
 *     directories they list;
 *   - gc, scrub, migrate and recall: root, the daemon's user, or the owner
 *     of the root directory.
 *
 * Invariants:
 *  1. Reports read the catalog through a read-only connection of their own
 *     (catalog_open_reader()): they never take the daemon's catalog lock, so
 *     a long report cannot stall the filesystem, whatever its size.
 *  2. At most CONTROL_CONNECTIONS_MAX connections are served at once; one
 *     more is told so and closed.  A request must arrive within
 *     CONTROL_REQUEST_TIMEOUT_MS and every send completes within
 *     CONTROL_SEND_TIMEOUT_S, so a stuck client costs one worker for a
 *     bounded time and nothing else.
 *  3. Every request is validated by ctl_request_parse() before anything is
 *     done; a refusal is a "done" frame with status error, errno and a
 *     message, never a silent close.
 *  4. Stopping (control_free()) wakes the listener, shuts every
 *     connection down and waits for the workers; a scrub stops after the
 *     container it is verifying, a collection runs to its end.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "control/control-internal.h"

/* ---- replies ---- */

static int send_all(int fd, const uint8_t *p, size_t n) {
	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += k;
		n -= (size_t) k;
	}
	return 0;
}

static int conn_send(Conn *c, const CtlMessage *m) {
	_cleanup_free_ uint8_t *buf = NULL;
	size_t size;
	int r = ctl_message_format(m, CTL_FRAME_SIZE_MAX, &buf, &size);
	if (r < 0)
		return r;
	return send_all(c->fd, buf, size);
}

static int conn_reset(Conn *c) {
	ctl_message_done(&c->out);
	c->out_bytes = 0;
	return ctl_reply_begin(&c->out, CTL_REPLY_DATA);
}

/* Sends what the data frame holds, if anything beyond its first two lines. */
static int conn_flush(Conn *c) {
	if (c->out.n <= 2)
		return 0;
	int r = conn_send(c, &c->out);
	if (r < 0)
		return r;
	return conn_reset(c);
}

int control_add(Conn *c, const char *name, const char *value) {
	c->out_bytes += strlen(name) + 3 * strlen(value) + 2;
	return ctl_message_add(&c->out, name, value);
}

int control_add_u64(Conn *c, const char *name, uint64_t v) {
	char buf[24];
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long) v);
	return control_add(c, name, buf);
}

int control_add_i64(Conn *c, const char *name, int64_t v) {
	char buf[24];
	snprintf(buf, sizeof(buf), "%lld", (long long) v);
	return control_add(c, name, buf);
}

/* Starts a row, sending the frame first if it is full enough. */
int control_row(Conn *c, const char *kind) {
	if (c->out_bytes >= CONTROL_FRAME_BYTES) {
		int r = conn_flush(c);
		if (r < 0)
			return r;
	}
	return control_add(c, "row", kind);
}

/* Records why a request failed, for the done frame; returns r. */
int control_fail(Conn *c, int r, const char *format, ...) {
	va_list ap;
	free(c->error);
	va_start(ap, format);
	if (vasprintf(&c->error, format, ap) < 0)
		c->error = NULL;
	va_end(ap);
	return r;
}

static int conn_done(Conn *c, int r) {
	CtlMessage m = {};
	int q = ctl_reply_begin(&m, CTL_REPLY_DONE);
	if (q >= 0)
		q = ctl_message_add(&m, "status", r < 0 ? "error" : "ok");
	if (q >= 0 && r < 0) {
		q = ctl_message_add_u64(&m, "errno", (uint64_t) -r);
		if (q >= 0)
			q = ctl_message_add(&m, "message", c->error ?: strerror(-r));
	}
	if (q >= 0)
		q = conn_send(c, &m);
	ctl_message_done(&m);
	return q;
}

int control_progress(Conn *c, const char *phase, uint64_t done, uint64_t total, uint64_t damaged) {
	CtlMessage m = {};
	int r = ctl_reply_begin(&m, CTL_REPLY_PROGRESS);
	if (r >= 0)
		r = ctl_message_add(&m, "phase", phase);
	if (r >= 0)
		r = ctl_message_add_u64(&m, "done", done);
	if (r >= 0)
		r = ctl_message_add_u64(&m, "total", total);
	if (r >= 0)
		r = ctl_message_add_u64(&m, "damaged", damaged);
	if (r >= 0)
		r = conn_send(c, &m);
	ctl_message_done(&m);
	return r;
}

/* Whether the client went away (Ctrl-C): it sends nothing after its request. */
bool control_peer_gone(Conn *c) {
	struct pollfd p = { .fd = c->fd, .events = POLLIN | POLLRDHUP };
	return poll(&p, 1, 0) > 0;
}

/* ---- who may do what ---- */

static bool in_group(const Conn *c, gid_t g) {
	if (c->cred.gid == g)
		return true;
	for (size_t i = 0; i < c->n_groups; i++)
		if (c->groups[i] == g)
			return true;
	return false;
}

/* As the kernel's generic_permission() for mask (4 read, 2 write, 1 search), root aside. */
bool control_may_access(const Conn *c, const CatalogInode *ci, unsigned mask) {
	unsigned bits;
	if (c->cred.uid == 0)
		return true;
	if (c->cred.uid == ci->uid)
		bits = (ci->mode >> 6) & 7;
	else if (in_group(c, ci->gid))
		bits = (ci->mode >> 3) & 7;
	else
		bits = ci->mode & 7;
	return (bits & mask) == mask;
}

static int peer_load(Conn *c) {
	socklen_t len = sizeof(c->cred);
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len) < 0)
		return -errno;
	len = 64 * sizeof(gid_t);
	for (;;) {
		gid_t *g = realloc(c->groups, len ? len : sizeof(gid_t));
		if (!g)
			return -ENOMEM;
		c->groups = g;
		if (getsockopt(c->fd, SOL_SOCKET, SO_PEERGROUPS, c->groups, &len) == 0)
			break;
		if (errno != ERANGE)
			return -errno;
	}
	c->n_groups = len / sizeof(gid_t);
	return 0;
}

static int authorize(Conn *c, CtlCommand cmd) {
	CatalogInode root;
	int r = catalog_inode_get(c->reader, CATALOG_ROOT_INO, &root);
	if (r < 0)
		return control_fail(c, r, "cannot read the root directory: %s", strerror(-r));
	uid_t uid = c->cred.uid;
	bool owner = uid == 0 || uid == c->ctl->owner || uid == root.uid;

	if (ctl_command_is_root_only(cmd)) {
		if (uid == 0)
			return 0;
		return control_fail(c, -EACCES, "permission denied: '%s' is for root only, not uid %u",
				 ctl_command_to_string(cmd), (unsigned) uid);
	}
	if (ctl_command_is_privileged(cmd)) {
		if (owner)
			return 0;
		return control_fail(c, -EACCES,
				 "permission denied: '%s' is for root or the filesystem's owner (uid %u or %u), not uid %u",
				 ctl_command_to_string(cmd), (unsigned) c->ctl->owner, (unsigned) root.uid,
				 (unsigned) uid);
	}
	/* Without allow_other the kernel lets nobody but the daemon's user (and root here) in. */
	if (uid != 0 && uid != c->ctl->owner && !fs_config(c->fs)->allow_other)
		return control_fail(c, -EACCES, "permission denied: the mount is private to uid %u (no allow_other)",
				 (unsigned) c->ctl->owner);
	if (!control_may_access(c, &root, 4))
		return control_fail(c, -EACCES, "permission denied: uid %u may not read the mount's root directory",
				 (unsigned) uid);
	return 0;
}

/* ---- one connection ---- */

static int recv_full(int fd, void *buf, size_t n, int64_t deadline) {
	uint8_t *p = buf;
	while (n > 0) {
		int64_t left = (deadline - clock_ns(CLOCK_MONOTONIC)) / 1000000;
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int k = poll(&pfd, 1, (int) MIN(left, (int64_t) CONTROL_REQUEST_TIMEOUT_MS));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			continue;
		ssize_t got = recv(fd, p, n, MSG_DONTWAIT);
		if (got < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (got == 0)
			return -ECONNRESET;
		p += got;
		n -= (size_t) got;
	}
	return 0;
}

static int serve(Conn *c) {
	uint8_t hdr[CTL_FRAME_HEADER_SIZE];
	_cleanup_free_ uint8_t *payload = NULL;
	CtlRequest req = {};
	uint32_t len;
	int r;

	int64_t deadline = clock_ns(CLOCK_MONOTONIC) + (int64_t) CONTROL_REQUEST_TIMEOUT_MS * 1000000;
	r = recv_full(c->fd, hdr, sizeof(hdr), deadline);
	if (r < 0)
		return r; /* nobody to answer */
	r = ctl_frame_header_parse(hdr, CTL_REQUEST_SIZE_MAX, &len);
	if (r < 0)
		return conn_done(c, control_fail(c, r, "bad request frame: %s",
					      r == -E2BIG ? "longer than the request limit" : "empty"));
	payload = malloc(len);
	if (!payload)
		return -ENOMEM;
	r = recv_full(c->fd, payload, len, deadline);
	if (r < 0)
		return r;
	_cleanup_free_ char *why = NULL;
	r = ctl_request_parse(payload, len, &req, &why);
	if (r < 0) {
		log_debug("tierctl request from uid %u refused: %s", (unsigned) c->cred.uid, why ?: "");
		return conn_done(c, control_fail(c, r, "bad request: %s", why ?: strerror(-r)));
	}

	r = catalog_open_reader(fs_catalog(c->fs), &c->reader);
	if (r < 0)
		r = control_fail(c, r, "cannot open the catalog for reading: %s", strerror(-r));
	if (r >= 0)
		r = authorize(c, req.command);
	if (r >= 0)
		r = conn_reset(c);
	if (r >= 0) {
		log_debug("tierctl %s from uid %u", ctl_command_to_string(req.command), (unsigned) c->cred.uid);
		switch (req.command) {
		case CTL_COMMAND_STATUS:
			r = control_status(c);
			break;
		case CTL_COMMAND_DF:
			r = control_df(c);
			break;
		case CTL_COMMAND_DU:
			r = control_du(c, &req);
			break;
		case CTL_COMMAND_LS:
			r = control_ls(c, &req);
			break;
		case CTL_COMMAND_REPORT:
			r = control_report(c, &req);
			break;
		case CTL_COMMAND_POLICY:
			r = control_policy(c);
			break;
		case CTL_COMMAND_GC:
			r = control_gc(c);
			break;
		case CTL_COMMAND_SCRUB:
			r = control_scrub(c, &req);
			break;
		case CTL_COMMAND_MIGRATE:
		case CTL_COMMAND_RECALL:
		case CTL_COMMAND_PIN:
		case CTL_COMMAND_UNPIN:
			r = control_move(c, &req);
			break;
		case CTL_COMMAND_RECOVERY:
			r = control_recovery(c, &req);
			break;
		case CTL_COMMAND_REKEY:
			r = control_rekey(c, &req);
			break;
		case CTL_COMMAND_HOST_RETIRE:
			r = control_host_retire(c, &req);
			break;
		default:
			r = control_fail(c, -EINVAL, "command not served");
		}
	}
	ctl_request_done(&req);
	if (r >= 0)
		r = conn_flush(c);
	/* A failed send means the client is gone: nobody to tell. */
	if (r == -EPIPE || r == -ECONNRESET || r == -EAGAIN)
		return r;
	return conn_done(c, r);
}

static void *conn_main(void *userdata) {
	Conn *c = userdata;
	Control *ctl = c->ctl;
	struct timeval tv = { .tv_sec = CONTROL_SEND_TIMEOUT_S };

	/* Invariant 2: a client that stops reading cannot hold this worker for longer. */
	(void) setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	int r = peer_load(c);
	if (r >= 0)
		r = serve(c);
	if (r < 0)
		log_debug_errno(r, "tierctl connection ended: %m");

	/*
	 * Read what the client may still be sending (a refused request's
	 * rest) until it closes: closing with unread bytes would reset the
	 * connection and could destroy the refusal before the client reads it.
	 */
	if (shutdown(c->fd, SHUT_WR) == 0) {
		char sink[4096];
		int64_t until = clock_ns(CLOCK_MONOTONIC) + CONTROL_DRAIN_MS * 1000000;
		for (size_t total = 0; total < CTL_REQUEST_SIZE_MAX;) {
			int64_t left = (until - clock_ns(CLOCK_MONOTONIC)) / 1000000;
			struct pollfd p = { .fd = c->fd, .events = POLLIN };
			if (left <= 0 || poll(&p, 1, (int) left) <= 0)
				break;
			ssize_t k = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
			if (k <= 0)
				break;
			total += (size_t) k;
		}
	}
	c->reader = catalog_close(c->reader);
	ctl_message_done(&c->out);
	free(c->error);
	free(c->groups);
	pthread_mutex_lock(&ctl->lock);
	ctl->conn_fds[c->slot] = -1;
	ctl->n_conns--;
	close(c->fd);
	pthread_cond_broadcast(&ctl->idle);
	pthread_mutex_unlock(&ctl->lock);
	free(c);
	return NULL;
}

/* ---- the listener ---- */

static void refuse_busy(int fd) {
	CtlMessage m = {};
	_cleanup_free_ uint8_t *buf = NULL;
	size_t size;
	if (ctl_reply_begin(&m, CTL_REPLY_DONE) >= 0 && ctl_message_add(&m, "status", "error") >= 0 &&
	    ctl_message_add_u64(&m, "errno", EBUSY) >= 0 &&
	    ctl_message_addf(&m, "message", "busy: %d tierctl clients are being served; try again",
			     CONTROL_CONNECTIONS_MAX) >= 0 &&
	    ctl_message_format(&m, CTL_FRAME_SIZE_MAX, &buf, &size) >= 0)
		(void) send(fd, buf, size, MSG_NOSIGNAL | MSG_DONTWAIT);
	ctl_message_done(&m);
}

static void accept_one(Control *ctl) {
	int fd = accept4(ctl->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	pthread_mutex_lock(&ctl->lock);
	int slot = -1;
	for (int i = 0; i < CONTROL_CONNECTIONS_MAX; i++)
		if (ctl->conn_fds[i] < 0) {
			slot = i;
			break;
		}
	if (slot >= 0) {
		ctl->conn_fds[slot] = fd;
		ctl->n_conns++;
	}
	pthread_mutex_unlock(&ctl->lock);
	if (slot < 0) {
		refuse_busy(fd);
		close(fd);
		return;
	}

	Conn *c = calloc(1, sizeof(*c));
	pthread_t t;
	pthread_attr_t attr;
	int r = c ? 0 : -ENOMEM;
	if (c) {
		*c = (Conn) { .ctl = ctl, .fs = ctl->fs, .fd = fd, .slot = slot };
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		r = -pthread_create(&t, &attr, conn_main, c);
		pthread_attr_destroy(&attr);
	}
	if (r < 0) {
		log_warning_errno(r, "Cannot serve a tierctl connection: %m");
		free(c);
		pthread_mutex_lock(&ctl->lock);
		ctl->conn_fds[slot] = -1;
		ctl->n_conns--;
		close(fd);
		pthread_cond_broadcast(&ctl->idle);
		pthread_mutex_unlock(&ctl->lock);
	}
}

static int sum_stored(const CatalogContainer *ct, void *userdata) {
	*(uint64_t *) userdata += ct->size;
	return 0;
}

/* Samples sealed and stored bytes for the throughput in status (on the listener's own reader). */
static void sample(Control *ctl) {
	CatalogFileTotals t;
	Sample s = { .t_ns = clock_ns(CLOCK_MONOTONIC) };
	if (catalog_files_totals(ctl->sampler, &t) < 0 ||
	    catalog_containers_foreach(ctl->sampler, 0, sum_stored, &s.stored_bytes) < 0)
		return;
	s.sealed_bytes = t.bytes[CATALOG_FILE_SEALED];
	pthread_mutex_lock(&ctl->lock);
	if (ctl->n_samples == CONTROL_SAMPLES) {
		memmove(&ctl->samples[0], &ctl->samples[1], (CONTROL_SAMPLES - 1) * sizeof(Sample));
		ctl->n_samples--;
	}
	ctl->samples[ctl->n_samples++] = s;
	pthread_mutex_unlock(&ctl->lock);
}

/* A sample of usage for the reports' charts (history.c): a failure costs one point of a chart, said once. */
static void sample_history(Control *ctl) {
	int r = control_history_record(ctl->fs, ctl->sampler);
	if (r < 0 && !ctl->history_failed)
		log_warning_errno(r, "Cannot record a sample of usage for the reports: %m");
	ctl->history_failed = r < 0;
}

static void *listener_main(void *userdata) {
	Control *ctl = userdata;
	int64_t next_sample = 0, next_history = 0;
	int64_t history_ns = (int64_t) ctl->history_interval_s * 1000000000;

	while (!atomic_load(&ctl->stopping)) {
		int64_t now = clock_ns(CLOCK_MONOTONIC);
		if (now >= next_sample) {
			sample(ctl);
			next_sample = now + (int64_t) CONTROL_SAMPLE_INTERVAL_MS * 1000000;
		}
		if (history_ns > 0 && now >= next_history) {
			sample_history(ctl);
			next_history = now + history_ns;
		}
		int64_t wake = history_ns > 0 ? MIN(next_sample, next_history) : next_sample;
		struct pollfd p[2] = {
			{ .fd = ctl->listen_fd, .events = POLLIN },
			{ .fd = ctl->wake[0], .events = POLLIN },
		};
		int k = poll(p, 2, (int) ((wake - now) / 1000000) + 1);
		if (k < 0 && errno != EINTR) {
			log_error_errno(errno, "Control socket poll failed, tierctl is no longer served: %m");
			break;
		}
		if (k > 0 && (p[0].revents & POLLIN))
			accept_one(ctl);
	}
	return NULL;
}

/* Binds path, replacing a socket no daemon answers on (left by a crash). */
static int socket_bind(const char *path, int *ret) {
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);

	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
		if (errno != EADDRINUSE)
			return -errno;
		_cleanup_close_ int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe < 0)
			return -errno;
		if (connect(probe, (struct sockaddr *) &sa, sizeof(sa)) == 0)
			return -EADDRINUSE;
		struct stat st;
		if (lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
			return -EEXIST; /* never delete anything but a dead socket */
		if (unlink(path) < 0 || bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
			return -errno;
	}
	/* Everyone may connect: the peer's credentials decide what it may do. */
	if (chmod(path, 0666) < 0 || listen(fd, 64) < 0) {
		int r = -errno;
		(void) unlink(path);
		return r;
	}
	*ret = TAKE_FD(fd);
	return 0;
}

/* Closes what open() made; accepts what a failed open() left. */
static void control_release(Control *ctl) {
	if (ctl->listen_fd >= 0) {
		close(ctl->listen_fd);
		(void) unlink(ctl->path);
	}
	for (int i = 0; i < 2; i++)
		if (ctl->wake[i] >= 0)
			close(ctl->wake[i]);
	ctl->sampler = catalog_close(ctl->sampler);
	pthread_cond_destroy(&ctl->idle);
	pthread_mutex_destroy(&ctl->lock);
	free(ctl->path);
	free(ctl);
}

int control_open(Fs *fs, const char *path, unsigned history_interval_s, Control **ret) {
	Control *ctl = calloc(1, sizeof(*ctl));
	int r;

	if (!ctl)
		return -ENOMEM;
	*ctl = (Control) {
		.fs = fs,
		.listen_fd = -1,
		.wake = { -1, -1 },
		.owner = geteuid(),
		.history_interval_s = history_interval_s,
	};
	pthread_mutex_init(&ctl->lock, NULL);
	pthread_cond_init(&ctl->idle, NULL);
	for (int i = 0; i < CONTROL_CONNECTIONS_MAX; i++)
		ctl->conn_fds[i] = -1;
	ctl->path = strdup(path);
	if (!ctl->path) {
		r = -ENOMEM;
		goto fail;
	}
	if (pipe2(ctl->wake, O_CLOEXEC) < 0) {
		r = -errno;
		goto fail;
	}
	r = socket_bind(path, &ctl->listen_fd);
	if (r < 0)
		goto fail;
	*ret = ctl;
	return 0;

fail:
	control_release(ctl);
	return r;
}

int control_start(Control *ctl) {
	ctl->started_ns = clock_ns(CLOCK_MONOTONIC);
	int r = catalog_open_reader(fs_catalog(ctl->fs), &ctl->sampler);
	if (r < 0)
		return r;
	r = -pthread_create(&ctl->listener, NULL, listener_main, ctl);
	if (r < 0)
		return r;
	ctl->listener_started = true;
	return 0;
}

Control *control_free(Control *ctl) {
	if (!ctl)
		return NULL;
	atomic_store(&ctl->stopping, true);
	ssize_t k = write(ctl->wake[1], "x", 1);
	(void) k; /* the pipe is empty: a one-byte write cannot fail short */
	if (ctl->listener_started)
		pthread_join(ctl->listener, NULL);

	/* Invariant 4: wake every worker out of its socket calls and wait for them. */
	pthread_mutex_lock(&ctl->lock);
	for (int i = 0; i < CONTROL_CONNECTIONS_MAX; i++)
		if (ctl->conn_fds[i] >= 0)
			(void) shutdown(ctl->conn_fds[i], SHUT_RDWR);
	while (ctl->n_conns > 0)
		pthread_cond_wait(&ctl->idle, &ctl->lock);
	pthread_mutex_unlock(&ctl->lock);
	control_release(ctl);
	return NULL;
}
