/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ctlproto.c — the control protocol's encoding, parser and request checks.
 *
 * Invariants:
 *  1. Every message has one encoding: ctl_message_format() of a parsed
 *     payload gives back exactly the payload (the fuzz target checks it).
 *  2. Nothing the parser returns exceeds a limit of ctlproto.h, and every
 *     value is a NUL-free C string.
 *  3. A request that ctl_request_parse() accepts names a known command and
 *     only the arguments that command takes, each well-formed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/config.h"
#include "common/ctlproto.h"

static const char *const command_names[_CTL_COMMAND_MAX] = {
	[CTL_COMMAND_STATUS] = "status",
	[CTL_COMMAND_DF] = "df",
	[CTL_COMMAND_DU] = "du",
	[CTL_COMMAND_LS] = "ls",
	[CTL_COMMAND_REPORT] = "report",
	[CTL_COMMAND_POLICY] = "policy",
	[CTL_COMMAND_GC] = "gc",
	[CTL_COMMAND_SCRUB] = "scrub",
	[CTL_COMMAND_MIGRATE] = "migrate",
	[CTL_COMMAND_RECALL] = "recall",
	[CTL_COMMAND_PIN] = "pin",
	[CTL_COMMAND_UNPIN] = "unpin",
	[CTL_COMMAND_RECOVERY] = "recovery",
	[CTL_COMMAND_REKEY] = "rekey",
	[CTL_COMMAND_HOST_RETIRE] = "host_retire",
};

static const char *const report_by_names[_CTL_REPORT_BY_MAX] = {
	[CTL_REPORT_BY_CLASS] = "class",
	[CTL_REPORT_BY_DAY] = "day",
	[CTL_REPORT_BY_TIER] = "tier",
	[CTL_REPORT_BY_DATABASE] = "database",
	[CTL_REPORT_BY_HOST] = "host",
};

static const char *const reply_kind_names[_CTL_REPLY_MAX] = {
	[CTL_REPLY_DATA] = "data",
	[CTL_REPLY_PROGRESS] = "progress",
	[CTL_REPLY_DONE] = "done",
};

/* What each command takes: up to ARGS_MAX kinds of argument, each between min and max times. */
typedef enum ArgKind {
	ARG_NONE,
	ARG_PATH,
	ARG_BY,
	ARG_TIER,
	ARG_DRY_RUN,
	ARG_THREAD,
	ARG_SEQUENCE,
	ARG_SINCE,
	ARG_UNTIL,
	ARG_CLASS,
	ARG_OLDER_THAN,
	ARG_LARGER_THAN,
	ARG_DATABASE,
	ARG_FROM_SCN,
	ARG_UNTIL_SCN,
	ARG_HOST,
	ARG_FORCE,
} ArgKind;

typedef struct ArgDef {
	ArgKind kind;
	const char *name;
	unsigned min, max;
} ArgDef;

#define ARGS_MAX 14
#define ARG_PATHS { ARG_PATH, "path", 1, CTL_PATHS_MAX }
/*
 * migrate and recall: paths, or archived logs by their headers, or both
 * (checked after parsing), narrowed by class, age and size.
 */
#define ARG_MOVE_SELECTION                                                                                         \
	{ ARG_PATH, "path", 0, CTL_PATHS_MAX }, { ARG_THREAD, "thread", 0, 1 }, { ARG_SEQUENCE, "sequence", 0, 1 }, \
		{ ARG_SINCE, "since", 0, 1 }, { ARG_UNTIL, "until", 0, 1 }, { ARG_CLASS, "class", 0, 1 },          \
		{ ARG_OLDER_THAN, "older_than", 0, 1 }, { ARG_LARGER_THAN, "larger_than", 0, 1 }

typedef struct CommandDef {
	ArgDef args[ARGS_MAX];
	bool privileged;
	bool root_only;
} CommandDef;

static const CommandDef commands[_CTL_COMMAND_MAX] = {
	[CTL_COMMAND_STATUS] = {},
	[CTL_COMMAND_DF] = {},
	[CTL_COMMAND_DU] = { { ARG_PATHS } },
	[CTL_COMMAND_LS] = { { ARG_PATHS } },
	[CTL_COMMAND_REPORT] = { { { ARG_BY, "by", 1, 1 } } },
	[CTL_COMMAND_POLICY] = {},
	[CTL_COMMAND_GC] = { .privileged = true },
	[CTL_COMMAND_SCRUB] = { { { ARG_TIER, "tier", 0, 1 } }, .privileged = true },
	[CTL_COMMAND_MIGRATE] = { { ARG_MOVE_SELECTION, { ARG_TIER, "tier", 0, 1 }, { ARG_DRY_RUN, "dry_run", 0, 1 } },
				  .privileged = true },
	/* recall DB --until: a restore set (database, and since/from_scn, until/until_scn as its range). */
	[CTL_COMMAND_RECALL] = { { ARG_MOVE_SELECTION, { ARG_DRY_RUN, "dry_run", 0, 1 }, { ARG_DATABASE, "database", 0, 1 },
				   { ARG_FROM_SCN, "from_scn", 0, 1 }, { ARG_UNTIL_SCN, "until_scn", 0, 1 } },
				 .privileged = true },
	[CTL_COMMAND_PIN] = { { ARG_MOVE_SELECTION, { ARG_DRY_RUN, "dry_run", 0, 1 } }, .privileged = true },
	[CTL_COMMAND_UNPIN] = { { ARG_MOVE_SELECTION }, .privileged = true },
	[CTL_COMMAND_RECOVERY] = { { { ARG_DATABASE, "database", 0, 1 } } },
	[CTL_COMMAND_REKEY] = { { { ARG_TIER, "tier", 1, 1 } }, .privileged = true },
	/* Another host's name on a shared tier: it decides for every host there, so root of this one only. */
	[CTL_COMMAND_HOST_RETIRE] = { { { ARG_HOST, "host", 1, 1 }, { ARG_TIER, "tier", 1, 1 }, { ARG_FORCE, "force", 0, 1 } },
				      .privileged = true, .root_only = true },
};

static int lookup(const char *const *table, size_t n, const char *s) {
	for (size_t i = 0; s && i < n; i++)
		if (table[i] && strcmp(table[i], s) == 0)
			return (int) i;
	return -EINVAL;
}

const char *ctl_command_to_string(CtlCommand c) {
	return c >= 0 && c < _CTL_COMMAND_MAX ? command_names[c] : NULL;
}

CtlCommand ctl_command_from_string(const char *s) {
	return (CtlCommand) lookup(command_names, _CTL_COMMAND_MAX, s);
}

const char *ctl_report_by_to_string(CtlReportBy b) {
	return b >= 0 && b < _CTL_REPORT_BY_MAX ? report_by_names[b] : NULL;
}

CtlReportBy ctl_report_by_from_string(const char *s) {
	return (CtlReportBy) lookup(report_by_names, _CTL_REPORT_BY_MAX, s);
}

const char *ctl_reply_kind_to_string(CtlReplyKind k) {
	return k >= 0 && k < _CTL_REPLY_MAX ? reply_kind_names[k] : NULL;
}

CtlReplyKind ctl_reply_kind_from_string(const char *s) {
	return (CtlReplyKind) lookup(reply_kind_names, _CTL_REPLY_MAX, s);
}

bool ctl_command_is_privileged(CtlCommand c) {
	return c >= 0 && c < _CTL_COMMAND_MAX && commands[c].privileged;
}

bool ctl_command_is_root_only(CtlCommand c) {
	return c >= 0 && c < _CTL_COMMAND_MAX && commands[c].root_only;
}

/* ---- messages ---- */

void ctl_message_done(CtlMessage *m) {
	if (!m)
		return;
	for (size_t i = 0; i < m->n_strings; i++)
		free(m->strings[i]);
	free(m->strings);
	free(m->fields);
	*m = (CtlMessage) {};
}

static bool name_is_valid(const char *s, size_t len) {
	if (len == 0 || len > CTL_NAME_MAX || s[0] < 'a' || s[0] > 'z')
		return false;
	for (size_t i = 1; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

static int keep_string(CtlMessage *m, char *s) {
	if (ARRAY_RESERVE_ONE(m->strings, m->cap_strings, m->n_strings, 16) < 0)
		return -ENOMEM;
	m->strings[m->n_strings++] = s;
	return 0;
}

static int push_field(CtlMessage *m, const char *name, const char *value) {
	if (m->n >= CTL_FIELDS_MAX)
		return -E2BIG;
	if (ARRAY_RESERVE_ONE(m->fields, m->cap, m->n, 16) < 0)
		return -ENOMEM;
	m->fields[m->n++] = (CtlField) { name, value };
	return 0;
}

int ctl_message_add(CtlMessage *m, const char *name, const char *value) {
	if (!name || !value || !name_is_valid(name, strlen(name)))
		return -EINVAL;
	size_t nl = strlen(name), vl = strlen(value);
	if (vl > CTL_VALUE_MAX)
		return -E2BIG;
	char *s = malloc(nl + 1 + vl + 1);
	if (!s)
		return -ENOMEM;
	memcpy(s, name, nl + 1);
	memcpy(s + nl + 1, value, vl + 1);
	int r = keep_string(m, s);
	if (r < 0) {
		free(s);
		return r;
	}
	return push_field(m, s, s + nl + 1);
}

int ctl_message_addf(CtlMessage *m, const char *name, const char *format, ...) {
	_cleanup_free_ char *v = NULL;
	va_list ap;
	va_start(ap, format);
	int n = vasprintf(&v, format, ap);
	va_end(ap);
	if (n < 0) {
		v = NULL;
		return -ENOMEM;
	}
	return ctl_message_add(m, name, v);
}

int ctl_message_add_u64(CtlMessage *m, const char *name, uint64_t value) {
	char buf[24];
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long) value);
	return ctl_message_add(m, name, buf);
}

static bool byte_is_plain(unsigned char c) {
	return c >= 0x20 && c <= 0x7e && c != '%';
}

int ctl_message_format(const CtlMessage *m, size_t max_size, uint8_t **ret, size_t *ret_size) {
	static const char hex[] = "0123456789ABCDEF";
	size_t size = 0;

	for (size_t i = 0; i < m->n; i++) {
		size += strlen(m->fields[i].name) + 2;
		for (const unsigned char *p = (const unsigned char *) m->fields[i].value; *p; p++)
			size += byte_is_plain(*p) ? 1 : 3;
		if (size > max_size)
			return -E2BIG;
	}
	uint8_t *buf = malloc(CTL_FRAME_HEADER_SIZE + size);
	if (!buf)
		return -ENOMEM;
	buf[0] = (uint8_t) (size >> 24);
	buf[1] = (uint8_t) (size >> 16);
	buf[2] = (uint8_t) (size >> 8);
	buf[3] = (uint8_t) size;
	uint8_t *o = buf + CTL_FRAME_HEADER_SIZE;
	for (size_t i = 0; i < m->n; i++) {
		size_t nl = strlen(m->fields[i].name);
		memcpy(o, m->fields[i].name, nl);
		o += nl;
		*o++ = ' ';
		for (const unsigned char *p = (const unsigned char *) m->fields[i].value; *p; p++) {
			if (byte_is_plain(*p))
				*o++ = *p;
			else {
				*o++ = '%';
				*o++ = (uint8_t) hex[*p >> 4];
				*o++ = (uint8_t) hex[*p & 15];
			}
		}
		*o++ = '\n';
	}
	*ret = buf;
	*ret_size = CTL_FRAME_HEADER_SIZE + size;
	return 0;
}

int ctl_frame_header_parse(const uint8_t hdr[static CTL_FRAME_HEADER_SIZE], uint32_t max, uint32_t *ret) {
	uint32_t n = (uint32_t) hdr[0] << 24 | (uint32_t) hdr[1] << 16 | (uint32_t) hdr[2] << 8 | hdr[3];
	if (n == 0)
		return -EBADMSG;
	if (n > max)
		return -E2BIG;
	*ret = n;
	return 0;
}

static int fail(char **ret_error, int r, const char *format, ...) _printf_(3, 4);
static int fail(char **ret_error, int r, const char *format, ...) {
	if (ret_error) {
		va_list ap;
		va_start(ap, format);
		if (vasprintf(ret_error, format, ap) < 0)
			*ret_error = NULL;
		va_end(ap);
	}
	return r;
}

static int hex_digit(unsigned char c) {
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int ctl_message_parse(const void *buf, size_t len, CtlMessage *ret, char **ret_error) {
	_cleanup_(ctl_message_done) CtlMessage m = {};
	const unsigned char *p = buf, *end = p + len;
	size_t line = 0;
	int r;

	*ret = (CtlMessage) {};
	if (ret_error)
		*ret_error = NULL;
	if (len == 0)
		return fail(ret_error, -EBADMSG, "empty message");
	if (len > CTL_FRAME_SIZE_MAX)
		return fail(ret_error, -E2BIG, "message of %zu bytes is above the limit of %u", len,
			    (unsigned) CTL_FRAME_SIZE_MAX);
	if (end[-1] != '\n')
		return fail(ret_error, -EBADMSG, "message does not end with a newline");

	/* One copy of the payload, decoded in place: decoding never grows it. */
	char *store = malloc(len + 1);
	if (!store)
		return -ENOMEM;
	r = keep_string(&m, store);
	if (r < 0) {
		free(store);
		return r;
	}
	char *o = store;
	while (p < end) {
		line++;
		const unsigned char *eol = memchr(p, '\n', (size_t) (end - p));
		const unsigned char *sp = memchr(p, ' ', (size_t) (eol - p));
		if (!sp)
			return fail(ret_error, -EBADMSG, "line %zu: no space after the field name", line);
		if (!name_is_valid((const char *) p, (size_t) (sp - p)))
			return fail(ret_error, -EBADMSG, "line %zu: invalid field name", line);
		char *name = o;
		memcpy(o, p, (size_t) (sp - p));
		o += sp - p;
		*o++ = 0;
		char *value = o;
		for (const unsigned char *q = sp + 1; q < eol; q++) {
			if (*q == '%') {
				int hi = eol - q > 2 ? hex_digit(q[1]) : -1, lo = hi >= 0 ? hex_digit(q[2]) : -1;
				if (lo < 0)
					return fail(ret_error, -EBADMSG, "line %zu: bad %% escape", line);
				unsigned char c = (unsigned char) (hi << 4 | lo);
				/* Invariant 1: a byte that may be written plain must be. */
				if (c == 0 || byte_is_plain(c))
					return fail(ret_error, -EBADMSG, "line %zu: needless or NUL %% escape", line);
				*o++ = (char) c;
				q += 2;
			} else if (byte_is_plain(*q))
				*o++ = (char) *q;
			else
				return fail(ret_error, -EBADMSG, "line %zu: unescaped byte 0x%02x", line, *q);
			if (o - value > CTL_VALUE_MAX)
				return fail(ret_error, -E2BIG, "line %zu: value longer than %d bytes", line, CTL_VALUE_MAX);
		}
		*o++ = 0;
		r = push_field(&m, name, value);
		if (r == -E2BIG)
			return fail(ret_error, r, "more than %d fields", CTL_FIELDS_MAX);
		if (r < 0)
			return r;
		p = eol + 1;
	}

	char version[16];
	snprintf(version, sizeof(version), "%d", CTL_PROTOCOL_VERSION);
	if (strcmp(m.fields[0].name, "fratier") != 0)
		return fail(ret_error, -EBADMSG, "message does not start with 'fratier %s'", version);
	if (strcmp(m.fields[0].value, version) != 0)
		return fail(ret_error, -EBADMSG, "protocol version '%s' not supported (this side speaks %s)",
			    m.fields[0].value, version);
	*ret = m;
	m = (CtlMessage) {};
	return 0;
}

const char *ctl_message_get(const CtlMessage *m, size_t from, const char *name) {
	for (size_t i = from; i < m->n; i++) {
		if (i > from && strcmp(m->fields[i].name, "row") == 0)
			break;
		if (strcmp(m->fields[i].name, name) == 0)
			return m->fields[i].value;
	}
	return NULL;
}

int ctl_parse_u64(const char *s, uint64_t *ret) {
	uint64_t v = 0;
	if (!s || !*s || (s[0] == '0' && s[1]))
		return -EBADMSG;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EBADMSG;
		unsigned d = (unsigned) (*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -EBADMSG;
		v = v * 10 + d;
	}
	*ret = v;
	return 0;
}

int ctl_message_get_u64(const CtlMessage *m, size_t from, const char *name, uint64_t *ret) {
	const char *v = ctl_message_get(m, from, name);
	if (!v)
		return -ENOENT;
	return ctl_parse_u64(v, ret);
}

/* ---- requests and replies ---- */

int ctl_request_begin(CtlMessage *m, CtlCommand c) {
	int r = ctl_message_add_u64(m, "fratier", CTL_PROTOCOL_VERSION);
	if (r >= 0)
		r = ctl_message_add(m, "command", ctl_command_to_string(c) ?: "");
	return r;
}

int ctl_reply_begin(CtlMessage *m, CtlReplyKind k) {
	int r = ctl_message_add_u64(m, "fratier", CTL_PROTOCOL_VERSION);
	if (r >= 0)
		r = ctl_message_add(m, "reply", ctl_reply_kind_to_string(k) ?: "");
	return r;
}

CtlReplyKind ctl_reply_kind(const CtlMessage *m) {
	if (m->n < 2 || strcmp(m->fields[1].name, "reply") != 0)
		return _CTL_REPLY_INVALID;
	return ctl_reply_kind_from_string(m->fields[1].value);
}

bool ctl_path_is_valid(const char *p) {
	size_t len = strlen(p);
	if (len == 0 || len >= CTL_VALUE_MAX || p[0] != '/')
		return false;
	if (len == 1)
		return true;
	if (p[len - 1] == '/')
		return false;
	for (const char *c = p + 1;;) {
		const char *slash = strchr(c, '/');
		size_t n = slash ? (size_t) (slash - c) : strlen(c);
		if (n == 0 || n > 255 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!slash)
			return true;
		c = slash + 1;
	}
}

void ctl_request_done(CtlRequest *r) {
	if (r)
		ctl_message_done(&r->msg);
}

/* "N" or "FIRST-LAST", 1..UINT32_MAX, FIRST <= LAST. */
static int parse_sequence_range(const char *s, uint32_t *ret_first, uint32_t *ret_last) {
	char first[11];
	const char *dash = strchr(s, '-');
	size_t n = dash ? (size_t) (dash - s) : strlen(s);
	uint64_t a, b;

	if (n == 0 || n >= sizeof(first))
		return -EBADMSG;
	memcpy(first, s, n);
	first[n] = '\0';
	if (ctl_parse_u64(first, &a) < 0 || (dash ? ctl_parse_u64(dash + 1, &b) : ctl_parse_u64(first, &b)) < 0)
		return -EBADMSG;
	if (a == 0 || b > UINT32_MAX || a > b)
		return -EBADMSG;
	*ret_first = (uint32_t) a;
	*ret_last = (uint32_t) b;
	return 0;
}

int ctl_request_parse(const void *buf, size_t len, CtlRequest *ret, char **ret_error) {
	CtlRequest req = {};
	unsigned count[ARGS_MAX] = {};
	int r;

	*ret = (CtlRequest) {};
	if (len > CTL_REQUEST_SIZE_MAX)
		return fail(ret_error, -E2BIG, "request of %zu bytes is above the limit of %u", len,
			    (unsigned) CTL_REQUEST_SIZE_MAX);
	r = ctl_message_parse(buf, len, &req.msg, ret_error);
	if (r < 0)
		return r;
	CtlMessage *m = &req.msg;
	if (m->n < 2 || strcmp(m->fields[1].name, "command") != 0) {
		r = fail(ret_error, -EBADMSG, "second line must be 'command NAME'");
		goto fail;
	}
	req.command = ctl_command_from_string(m->fields[1].value);
	if (req.command < 0) {
		r = fail(ret_error, -EBADMSG, "unknown command '%s'", m->fields[1].value);
		goto fail;
	}
	const CommandDef *d = &commands[req.command];
	for (size_t i = 2; i < m->n; i++) {
		const CtlField *f = &m->fields[i];
		size_t k = 0;
		while (k < ARGS_MAX && (d->args[k].kind == ARG_NONE || strcmp(f->name, d->args[k].name) != 0))
			k++;
		if (k == ARGS_MAX) {
			r = fail(ret_error, -EBADMSG, "unknown argument '%s' for command '%s'", f->name,
				 command_names[req.command]);
			goto fail;
		}
		const ArgDef *a = &d->args[k];
		if (++count[k] > a->max) {
			r = fail(ret_error, -EBADMSG, "argument '%s' given more than %u times", f->name, a->max);
			goto fail;
		}
		switch (a->kind) {
		case ARG_PATH:
			if (!ctl_path_is_valid(f->value)) {
				r = fail(ret_error, -EBADMSG, "path '%s' is not absolute and canonical", f->value);
				goto fail;
			}
			req.paths[req.n_paths++] = f->value;
			break;
		case ARG_BY:
			req.by = ctl_report_by_from_string(f->value);
			if (req.by < 0) {
				r = fail(ret_error, -EBADMSG, "'by' must be class, day, tier, database or host, not '%s'",
					 f->value);
				goto fail;
			}
			break;
		case ARG_TIER: {
			uint64_t t;
			if (ctl_parse_u64(f->value, &t) < 0 || t > CTL_TIER_MAX) {
				r = fail(ret_error, -EBADMSG, "'tier' must be a number from 0 to %u, not '%s'",
					 CTL_TIER_MAX, f->value);
				goto fail;
			}
			req.has_tier = true;
			req.tier = (uint32_t) t;
			break;
		}
		case ARG_DRY_RUN:
			if (strcmp(f->value, "yes") != 0 && strcmp(f->value, "no") != 0) {
				r = fail(ret_error, -EBADMSG, "'dry_run' must be yes or no, not '%s'", f->value);
				goto fail;
			}
			req.dry_run = strcmp(f->value, "yes") == 0;
			break;
		case ARG_THREAD: {
			uint64_t t;
			if (ctl_parse_u64(f->value, &t) < 0 || t == 0 || t > UINT16_MAX) {
				r = fail(ret_error, -EBADMSG, "'thread' must be a redo thread from 1 to %u, not '%s'",
					 (unsigned) UINT16_MAX, f->value);
				goto fail;
			}
			req.has_thread = true;
			req.thread = (uint16_t) t;
			break;
		}
		case ARG_SEQUENCE:
			r = parse_sequence_range(f->value, &req.sequence_first, &req.sequence_last);
			if (r < 0) {
				r = fail(ret_error, r, "'sequence' must be N or FIRST-LAST (1 to %u, FIRST <= LAST), not '%s'",
					 (unsigned) UINT32_MAX, f->value);
				goto fail;
			}
			req.has_sequence = true;
			break;
		case ARG_SINCE:
		case ARG_UNTIL: {
			uint64_t t;
			if (ctl_parse_u64(f->value, &t) < 0 || t > INT64_MAX) {
				r = fail(ret_error, -EBADMSG, "'%s' must be Unix seconds, not '%s'", a->name, f->value);
				goto fail;
			}
			if (a->kind == ARG_SINCE) {
				req.has_since = true;
				req.since = (int64_t) t;
			} else {
				req.has_until = true;
				req.until = (int64_t) t;
			}
			break;
		}
		case ARG_CLASS: {
			size_t n = strspn(f->value, "abcdefghijklmnopqrstuvwxyz");
			if (n == 0 || n > CTL_CLASS_NAME_MAX || f->value[n] != '\0') {
				r = fail(ret_error, -EBADMSG, "'class' must be a class name (a-z, at most %u), not '%s'",
					 (unsigned) CTL_CLASS_NAME_MAX, f->value);
				goto fail;
			}
			req.file_class = f->value;
			break;
		}
		case ARG_OLDER_THAN:
		case ARG_LARGER_THAN: {
			uint64_t v;
			if (ctl_parse_u64(f->value, &v) < 0 || v > INT64_MAX) {
				r = fail(ret_error, -EBADMSG, "'%s' must be a number of %s, not '%s'", a->name,
					 a->kind == ARG_OLDER_THAN ? "seconds" : "bytes", f->value);
				goto fail;
			}
			if (a->kind == ARG_OLDER_THAN) {
				req.has_older_than = true;
				req.older_than = v;
			} else {
				req.has_larger_than = true;
				req.larger_than = v;
			}
			break;
		}
		case ARG_DATABASE: {
			/* A DB_NAME as Oracle writes it (A-Z 0-9 _ $ #, at most 8) or a DBID: both fit this. */
			size_t n = strspn(f->value, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_$#");
			if (n == 0 || n > 10 || f->value[n] != '\0') {
				r = fail(ret_error, -EBADMSG, "'database' must be a DB_NAME or a DBID, not '%s'", f->value);
				goto fail;
			}
			req.database = f->value;
			break;
		}
		case ARG_FROM_SCN:
		case ARG_UNTIL_SCN: {
			uint64_t v;
			if (ctl_parse_u64(f->value, &v) < 0 || v >= UINT64_C(1) << 48) {
				r = fail(ret_error, -EBADMSG, "'%s' must be an SCN (below 2^48), not '%s'", a->name, f->value);
				goto fail;
			}
			if (a->kind == ARG_FROM_SCN) {
				req.has_from_scn = true;
				req.from_scn = v;
			} else {
				req.has_until_scn = true;
				req.until_scn = v;
			}
			break;
		}
		case ARG_HOST:
			if (!config_host_name_is_valid(f->value)) {
				r = fail(ret_error, -EBADMSG, "'host' must be a host name (1 to %d of a-z 0-9 _ -), not '%s'",
					 CONFIG_HOST_NAME_MAX, f->value);
				goto fail;
			}
			req.host = f->value;
			break;
		case ARG_FORCE:
			if (strcmp(f->value, "yes") != 0 && strcmp(f->value, "no") != 0) {
				r = fail(ret_error, -EBADMSG, "'force' must be yes or no, not '%s'", f->value);
				goto fail;
			}
			req.force = strcmp(f->value, "yes") == 0;
			break;
		case ARG_NONE:
			break;
		}
	}
	if (req.command == CTL_COMMAND_RECALL && req.database) {
		if (req.n_paths > 0 || req.has_thread || req.has_sequence || req.file_class || req.has_older_than ||
		    req.has_larger_than) {
			r = fail(ret_error, -EBADMSG, "a restore set ('database') takes no paths, thread, sequence or filters");
			goto fail;
		}
		if (req.has_until == req.has_until_scn || (req.has_since && req.has_from_scn)) {
			r = fail(ret_error, -EBADMSG, "a restore set needs 'until' or 'until_scn' (one), and at most one of "
						      "'since' and 'from_scn'");
			goto fail;
		}
		if ((req.has_from_scn && req.has_until_scn && req.from_scn > req.until_scn) ||
		    (req.has_since && req.has_until && req.since > req.until)) {
			r = fail(ret_error, -EBADMSG, "the restore set's start is after its end");
			goto fail;
		}
	} else if (req.has_from_scn || req.has_until_scn) {
		r = fail(ret_error, -EBADMSG, "'from_scn' and 'until_scn' belong to a restore set ('database')");
		goto fail;
	}
	if (req.command == CTL_COMMAND_MIGRATE || req.command == CTL_COMMAND_RECALL || req.command == CTL_COMMAND_PIN ||
	    req.command == CTL_COMMAND_UNPIN) {
		if (req.n_paths == 0 && !req.has_thread && !req.has_sequence && !req.has_since && !req.has_until &&
		    !req.database) {
			r = fail(ret_error, -EBADMSG, "command '%s' needs a 'path' or an archived-log selection "
						      "('thread', 'sequence', 'since', 'until')",
				 command_names[req.command]);
			goto fail;
		}
		if (req.has_since && req.has_until && req.since > req.until) {
			r = fail(ret_error, -EBADMSG, "'since' is after 'until'");
			goto fail;
		}
	}
	for (size_t k = 0; k < ARGS_MAX; k++)
		if (count[k] < d->args[k].min) {
			r = fail(ret_error, -EBADMSG, "command '%s' needs argument '%s'", command_names[req.command],
				 d->args[k].name);
			goto fail;
		}
	*ret = req;
	return 0;

fail:
	ctl_request_done(&req);
	return r;
}
