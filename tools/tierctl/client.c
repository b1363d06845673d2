/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * client.c — tierctl's transport: mount discovery through
 * /proc/self/mountinfo, lexical path handling, and one request/reply
 * exchange over the control socket (docs/CONTROL.md).
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macros.h"
#include "tools/tierctl/client.h"

#define FSTYPE "fuse.fratierfs"
#define CONTROL_SOCKET "control.sock"
#define MOUNTS_MAX 64

void tierctl_mount_done(TierctlMount *m) {
	free(m->mountpoint);
	free(m->source);
	free(m->socket);
	*m = (TierctlMount) {};
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static char *unescape(const char *s) {
	char *out = malloc(strlen(s) + 1), *o = out;
	if (!out)
		return NULL;
	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o++ = (char) ((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 4;
		} else
			*o++ = *s++;
	}
	*o = 0;
	return out;
}

char *tierctl_path_absolute(const char *path) {
	_cleanup_free_ char *joined = NULL;
	if (path[0] == '/')
		joined = strdup(path);
	else {
		_cleanup_free_ char *cwd = getcwd(NULL, 0);
		if (!cwd || asprintf(&joined, "%s/%s", cwd, path) < 0)
			return NULL;
	}
	if (!joined)
		return NULL;
	/* Lexical: "." and "//" go, ".." drops the previous component. */
	char *out = malloc(strlen(joined) + 2);
	if (!out)
		return NULL;
	size_t o = 0;
	for (char *save = NULL, *tok = strtok_r(joined, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
		if (strcmp(tok, ".") == 0)
			continue;
		if (strcmp(tok, "..") == 0) {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
			continue;
		}
		out[o++] = '/';
		size_t n = strlen(tok);
		memcpy(out + o, tok, n);
		o += n;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = 0;
	return out;
}

char *tierctl_path_in_mount(const char *mountpoint, const char *abs) {
	size_t n = strlen(mountpoint);
	if (strcmp(mountpoint, "/") == 0)
		return strdup(abs);
	if (strncmp(abs, mountpoint, n) != 0 || (abs[n] != 0 && abs[n] != '/'))
		return NULL;
	return strdup(abs[n] ? abs + n : "/");
}

typedef struct Mount {
	char *point, *source;
} Mount;

static int mounts_load(Mount *ret, size_t *n) {
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	*n = 0;
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0 && *n < MOUNTS_MAX) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
		char *fields[64];
		size_t k = 0;
		for (char *save = NULL, *t = strtok_r(line, " \n", &save); t && k < ELEMENTSOF(fields);
		     t = strtok_r(NULL, " \n", &save))
			fields[k++] = t;
		size_t dash = 6;
		while (dash < k && strcmp(fields[dash], "-") != 0)
			dash++;
		if (k < 5 || dash + 2 >= k || strcmp(fields[dash + 1], FSTYPE) != 0)
			continue;
		ret[*n] = (Mount) { unescape(fields[4]), unescape(fields[dash + 2]) };
		if (!ret[*n].point || !ret[*n].source)
			return -ENOMEM;
		(*n)++;
	}
	return 0;
}

int tierctl_mount_find(const char *mountpoint, const char *near, const char *socket, TierctlMount *ret) {
	Mount mounts[MOUNTS_MAX];
	size_t n = 0, best = SIZE_MAX, best_len = 0;
	int code = TIERCTL_EXIT_OK;

	*ret = (TierctlMount) {};
	int r = mounts_load(mounts, &n);
	if (r < 0) {
		log_error_errno(r, "cannot read /proc/self/mountinfo: %m");
		return TIERCTL_EXIT_FAILURE;
	}
	_cleanup_free_ char *target = tierctl_path_absolute(mountpoint ?: near ?: ".");
	if (!target) {
		log_oom();
		code = TIERCTL_EXIT_FAILURE;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(mounts[i].point);
		bool inside = mountpoint ? strcmp(mounts[i].point, target) == 0
					 : (strncmp(target, mounts[i].point, len) == 0 &&
					    (target[len] == 0 || target[len] == '/' || len == 1));
		if (inside && (best == SIZE_MAX || len > best_len)) {
			best = i;
			best_len = len;
		}
	}
	if (best == SIZE_MAX && !mountpoint && n == 1)
		best = 0;
	if (best == SIZE_MAX) {
		if (mountpoint)
			log_error("%s is not a fratier mount (see mount -t " FSTYPE ")", target);
		else if (n == 0)
			log_error("no fratier mount found: is fratierfs running? (mount it, or give -m MOUNTPOINT)");
		else
			log_error("%zu fratier mounts and none contains %s: choose one with -m MOUNTPOINT", n, target);
		code = mountpoint || n > 0 ? TIERCTL_EXIT_USAGE : TIERCTL_EXIT_NOT_RUNNING;
		goto out;
	}
	ret->mountpoint = TAKE_PTR(mounts[best].point);
	ret->source = TAKE_PTR(mounts[best].source);
	if (socket)
		ret->socket = strdup(socket);
	else if (asprintf(&ret->socket, "%s/%s", ret->source, CONTROL_SOCKET) < 0)
		ret->socket = NULL;
	if (!ret->socket) {
		log_oom();
		tierctl_mount_done(ret);
		code = TIERCTL_EXIT_FAILURE;
	}
out:
	for (size_t i = 0; i < n; i++) {
		free(mounts[i].point);
		free(mounts[i].source);
	}
	return code;
}

void tierctl_reply_done(TierctlReply *r) {
	ctl_message_done(&r->data);
	free(r->message);
	*r = (TierctlReply) {};
}

/* Reads exactly n bytes; -EINTR when *interrupted is set meanwhile. */
static int read_full(int fd, void *buf, size_t n, volatile int *interrupted) {
	uint8_t *p = buf;
	while (n > 0) {
		if (interrupted && *interrupted)
			return -EINTR;
		ssize_t k = recv(fd, p, n, 0);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			return -ECONNRESET;
		p += k;
		n -= (size_t) k;
	}
	return 0;
}

static int append_data(TierctlReply *reply, const CtlMessage *frame) {
	for (size_t i = 2; i < frame->n; i++) {
		int r = ctl_message_add(&reply->data, frame->fields[i].name, frame->fields[i].value);
		if (r < 0)
			return r;
	}
	return 0;
}

int tierctl_call(const char *socket_path, const CtlMessage *req, TierctlProgress progress, void *userdata,
		 volatile int *interrupted, TierctlReply *ret) {
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_free_ uint8_t *buf = NULL;
	_cleanup_close_ int fd = -1;
	size_t size;
	int r;

	*ret = (TierctlReply) {};
	if (strlen(socket_path) >= sizeof(sa.sun_path)) {
		log_error("control socket path %s is too long", socket_path);
		return TIERCTL_EXIT_USAGE;
	}
	strcpy(sa.sun_path, socket_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_error_errno(errno, "cannot create a socket: %m");
		return TIERCTL_EXIT_FAILURE;
	}
	if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
		r = errno;
		if (r == EACCES || r == EPERM) {
			log_error_errno(r, "cannot reach the control socket %s: %m (ask root for access)", socket_path);
			return TIERCTL_EXIT_DENIED;
		}
		log_error_errno(r, "cannot connect to %s: %m (is fratierfs running? its socket can be given with --socket)",
				socket_path);
		return TIERCTL_EXIT_NOT_RUNNING;
	}
	r = ctl_message_format(req, CTL_REQUEST_SIZE_MAX, &buf, &size);
	if (r < 0) {
		log_error_errno(r, "cannot build the request: %m");
		return TIERCTL_EXIT_USAGE;
	}
	for (size_t off = 0; off < size;) {
		ssize_t k = send(fd, buf + off, size - off, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		/* The daemon may have refused before reading it all (busy): its answer waits to be read. */
		if (k < 0 && (errno == EPIPE || errno == ECONNRESET))
			break;
		if (k < 0) {
			log_error_errno(errno, "cannot send the request to %s: %m", socket_path);
			return TIERCTL_EXIT_NOT_RUNNING;
		}
		off += (size_t) k;
	}

	for (;;) {
		uint8_t hdr[CTL_FRAME_HEADER_SIZE];
		uint32_t len;
		CtlMessage frame;
		_cleanup_free_ char *why = NULL;
		_cleanup_free_ uint8_t *payload = NULL;

		r = read_full(fd, hdr, sizeof(hdr), interrupted);
		if (r >= 0)
			r = ctl_frame_header_parse(hdr, CTL_FRAME_SIZE_MAX, &len);
		if (r >= 0) {
			payload = malloc(len);
			r = payload ? read_full(fd, payload, len, interrupted) : -ENOMEM;
		}
		if (r == -EINTR)
			return -EINTR;
		if (r < 0) {
			log_error_errno(r, "the daemon ended the reply early: %m (see its log)");
			return TIERCTL_EXIT_FAILURE;
		}
		r = ctl_message_parse(payload, len, &frame, &why);
		if (r < 0) {
			log_error("malformed reply from the daemon: %s", why ?: "out of memory");
			return TIERCTL_EXIT_FAILURE;
		}
		CtlReplyKind kind = ctl_reply_kind(&frame);
		if (kind == CTL_REPLY_DONE) {
			const char *status = ctl_message_get(&frame, 0, "status");
			uint64_t e = 0;
			ret->ok = status && strcmp(status, "ok") == 0;
			if (!ret->ok) {
				(void) ctl_message_get_u64(&frame, 0, "errno", &e);
				ret->error = e > 0 && e < 4096 ? (int) e : EIO;
				const char *m = ctl_message_get(&frame, 0, "message");
				ret->message = strdup(m ?: strerror(ret->error));
			}
			ctl_message_done(&frame);
			return 0;
		}
		if (kind == CTL_REPLY_PROGRESS)
			r = progress ? progress(&frame, userdata) : 0;
		else if (kind == CTL_REPLY_DATA)
			r = append_data(ret, &frame);
		else {
			log_error("malformed reply from the daemon: not a reply frame");
			r = -EBADMSG;
		}
		ctl_message_done(&frame);
		if (r == -EINTR)
			return -EINTR;
		if (r < 0) {
			tierctl_reply_done(ret);
			return TIERCTL_EXIT_FAILURE;
		}
	}
}
