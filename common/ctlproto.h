/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The control protocol between tierctl and the daemon (docs/CONTROL.md has
 * the whole of it, with examples).
 *
 * On the wire, a message is a frame: a 4-byte big-endian payload length,
 * then the payload.  A payload is lines "NAME SP VALUE LF": NAME is
 * [a-z][a-z0-9_]{0,31}; VALUE is printable ASCII (0x20..0x7e) with '%' and
 * every other byte written as %XX (uppercase hex), so each message has
 * exactly one encoding; %00 is refused, so values are C strings.  The first
 * line is always "fratier 1" (the protocol version).
 *
 * A request is one frame: "fratier 1", "command NAME", then the command's
 * arguments (see ctl_request_parse()).  A reply is a stream of frames, each
 * starting "fratier 1" and "reply data|progress|done"; the last one is the
 * "done" frame, carrying "status ok" or "status error" with "errno N" and
 * "message TEXT".  Rows of a table are introduced by a "row KIND" line;
 * the fields that follow it, up to the next "row", belong to it.
 *
 * Parsers take (buf, len), enforce every limit below and report the first
 * problem as a short message.  Errors: -EBADMSG (malformed), -E2BIG (a
 * limit), -ENOMEM.
 */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/macros.h"

#define CTL_PROTOCOL_VERSION 1
#define CTL_FRAME_HEADER_SIZE 4u
/* A request is small: a command and at most CTL_PATHS_MAX paths. */
#define CTL_REQUEST_SIZE_MAX (UINT32_C(64) << 10)
/* One reply frame; long answers are split over several. */
#define CTL_FRAME_SIZE_MAX (UINT32_C(4) << 20)
#define CTL_NAME_MAX 32
/* Decoded bytes of one value (a path of PATH_MAX fits). */
#define CTL_VALUE_MAX 4096
#define CTL_FIELDS_MAX 65536
#define CTL_PATHS_MAX 64

typedef struct CtlField {
	const char *name;  /* points into CtlMessage storage */
	const char *value; /* decoded, NUL-terminated */
} CtlField;

/* A parsed or built message: fields in order.  Zero-initialise, free with ctl_message_done(). */
typedef struct CtlMessage {
	CtlField *fields;
	size_t n, cap;
	char **strings; /* everything the fields point to */
	size_t n_strings, cap_strings;
} CtlMessage;

void ctl_message_done(CtlMessage *m);

/* Appends a field (name must be valid, value must be NUL-free: -EINVAL otherwise). */
int ctl_message_add(CtlMessage *m, const char *name, const char *value);
int ctl_message_addf(CtlMessage *m, const char *name, const char *format, ...) _printf_(3, 4);
int ctl_message_add_u64(CtlMessage *m, const char *name, uint64_t value);

/*
 * Encodes m as a frame (header and payload) in a new buffer.  Returns 0,
 * -E2BIG (over max_size payload bytes), -ENOMEM.
 */
int ctl_message_format(const CtlMessage *m, size_t max_size, uint8_t **ret, size_t *ret_size);

/*
 * Parses a payload (without the frame header).  On error returns -EBADMSG or
 * -E2BIG with *ret_error set to a malloc'ed message (unless NULL or -ENOMEM),
 * and leaves *ret empty.  Checks syntax, limits and the "fratier 1" line.
 */
int ctl_message_parse(const void *buf, size_t len, CtlMessage *ret, char **ret_error);

/* The payload length of a frame header; -E2BIG (above max) or -EBADMSG (zero). */
int ctl_frame_header_parse(const uint8_t hdr[static CTL_FRAME_HEADER_SIZE], uint32_t max, uint32_t *ret);

/*
 * The value of the first field called name at or after index from, and
 * before the next "row" field (from is where a row's fields start: 0 for
 * the message's own fields).  NULL if absent.  Borrowed from m.
 */
const char *ctl_message_get(const CtlMessage *m, size_t from, const char *name);
/* Parses such a value as a decimal u64; -ENOENT if absent, -EBADMSG if not a number. */
int ctl_message_get_u64(const CtlMessage *m, size_t from, const char *name, uint64_t *ret);

/* Strict decimal u64 (no sign, no spaces, no leading zeros but "0"). */
int ctl_parse_u64(const char *s, uint64_t *ret);

typedef enum CtlCommand {
	CTL_COMMAND_STATUS,
	CTL_COMMAND_DF,
	CTL_COMMAND_DU,
	CTL_COMMAND_LS,
	CTL_COMMAND_REPORT,
	CTL_COMMAND_POLICY,
	CTL_COMMAND_GC,
	CTL_COMMAND_SCRUB,
	CTL_COMMAND_MIGRATE,
	CTL_COMMAND_RECALL,
	CTL_COMMAND_PIN,
	CTL_COMMAND_UNPIN,
	CTL_COMMAND_RECOVERY,
	CTL_COMMAND_REKEY,
	CTL_COMMAND_HOST_RETIRE,
	_CTL_COMMAND_MAX,
	_CTL_COMMAND_INVALID = -22, /* -EINVAL */
} CtlCommand;

typedef enum CtlReportBy {
	CTL_REPORT_BY_CLASS,
	CTL_REPORT_BY_DAY,
	CTL_REPORT_BY_TIER,
	CTL_REPORT_BY_DATABASE,
	CTL_REPORT_BY_HOST,
	_CTL_REPORT_BY_MAX,
	_CTL_REPORT_BY_INVALID = -22,
} CtlReportBy;

const char *ctl_command_to_string(CtlCommand c);
CtlCommand ctl_command_from_string(const char *s);
const char *ctl_report_by_to_string(CtlReportBy b);
CtlReportBy ctl_report_by_from_string(const char *s);
/* Commands that change something or load the machine: root or the filesystem's owner only. */
bool ctl_command_is_privileged(CtlCommand c);
/* Of those, the ones for root alone (host_retire: it decides for every host of a shared tier). */
bool ctl_command_is_root_only(CtlCommand c);

/* Highest tier number a request may name. */
#define CTL_TIER_MAX 7u

/* A validated request.  Strings are borrowed from msg. */
/* Longest file class name a request may carry. */
#define CTL_CLASS_NAME_MAX 32

typedef struct CtlRequest {
	CtlCommand command;
	const char *paths[CTL_PATHS_MAX]; /* du, ls, migrate, recall: "/" or "/a/b", relative to the mount's root */
	size_t n_paths;
	CtlReportBy by;                   /* report */
	bool has_tier;                    /* scrub, migrate (the target; default: tier 1) */
	uint32_t tier;
	bool dry_run;                     /* migrate, recall, pin: list what would move, move nothing */
	/*
	 * migrate, recall, pin, unpin: archived logs chosen by what their headers say, in
	 * addition to (or instead of) paths: redo thread, a sequence range, and
	 * a time window (Unix seconds) that a log's [low_time, next_time] meets.
	 */
	bool has_thread, has_sequence, has_since, has_until;
	uint16_t thread;
	uint32_t sequence_first, sequence_last;
	int64_t since, until;
	/* migrate, recall, pin, unpin: only files of this class, older (mtime) or larger than these. */
	const char *file_class;
	bool has_older_than, has_larger_than;
	uint64_t older_than;              /* seconds */
	uint64_t larger_than;             /* bytes */
	/*
	 * recovery: one database (DB_NAME or DBID), else all.  recall with a
	 * database: its restore set from since/from_scn (optional) to
	 * until/until_scn (one of them), instead of paths and selections.
	 */
	const char *database;
	bool has_from_scn, has_until_scn;
	uint64_t from_scn, until_scn;
	const char *host;                 /* host_retire: the host to retire (tier: its shared tier) */
	bool force;                       /* host_retire: also while its lease runs */
	CtlMessage msg;
} CtlRequest;

/*
 * Parses and validates a request payload: syntax, known command, only its
 * arguments, each as often as allowed and well-formed (paths absolute and
 * canonical: no "//", ".", ".." components or trailing '/').  Errors as
 * ctl_message_parse(), with a message naming what is wrong.
 */
int ctl_request_parse(const void *buf, size_t len, CtlRequest *ret, char **ret_error);
void ctl_request_done(CtlRequest *r);

/* Whether a request path is canonical (see above). */
bool ctl_path_is_valid(const char *p);

typedef enum CtlReplyKind {
	CTL_REPLY_DATA,
	CTL_REPLY_PROGRESS,
	CTL_REPLY_DONE,
	_CTL_REPLY_MAX,
	_CTL_REPLY_INVALID = -22,
} CtlReplyKind;

const char *ctl_reply_kind_to_string(CtlReplyKind k);
CtlReplyKind ctl_reply_kind_from_string(const char *s);

/* Starts m (empty) as a message: "fratier 1" and, for requests, "command NAME". */
int ctl_request_begin(CtlMessage *m, CtlCommand c);
/* Starts m (empty) as a reply frame of kind k. */
int ctl_reply_begin(CtlMessage *m, CtlReplyKind k);
/* The kind of a parsed reply frame; _CTL_REPLY_INVALID if it is not a reply. */
CtlReplyKind ctl_reply_kind(const CtlMessage *m);
