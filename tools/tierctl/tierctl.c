/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tierctl — reports and maintenance of a fratier mount, over the daemon's
 * control socket.  Every command has --help and --json; tables print sizes
 * in IEC units (exact bytes with --bytes).  Exit codes: client.h and
 * tierctl.1.
 */
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/ctlproto.h"
#include "common/log.h"
#include "common/macros.h"
#include "tools/tierctl/client.h"
#include "tools/tierctl/html.h"
#include "tools/tierctl/http.h"
#include "tools/tierctl/output.h"

static const char *arg_mount;
static const char *arg_socket;
static bool arg_json;
static bool arg_bytes;
static bool arg_long;
static const char *arg_by;
static const char *arg_html;
static const char *arg_listen;
static const char *arg_tier;
static const char *arg_to;
static bool arg_dry_run;
static bool arg_force;
/* migrate, recall: archived logs by what their headers say */
static const char *arg_thread;
static const char *arg_sequence;
static const char *arg_since;
static const char *arg_until;
static const char *arg_from;
/* migrate, recall, pin, unpin: only files of a class, older or larger than these */
static const char *arg_class;
static const char *arg_older_than;
static const char *arg_larger_than;

static volatile int interrupted;

static void on_signal(int sig) {
	interrupted = 1;
}

typedef struct Command {
	const char *name;
	const char *usage;
	const char *summary;
	const char *options; /* which of the command options it takes: l (long), b (by), h (html), t (tier), L (listen) */
	int (*run)(TierctlMount *m, char **args, int n_args);
	int min_args, max_args;
} Command;

static const Command *find_command(const char *name);

/* ---- calls ---- */

/* Turns a refused request into a message and an exit code. */
static int refused(CtlCommand cmd, const TierctlReply *r) {
	log_error("%s failed: %s", ctl_command_to_string(cmd), r->message ?: strerror(r->error));
	if (r->error == EACCES || r->error == EPERM) {
		log_error(ctl_command_is_root_only(cmd) ? "hint: run it as root"
							: "hint: run it as root or as the filesystem's owner");
		return TIERCTL_EXIT_DENIED;
	}
	return TIERCTL_EXIT_FAILURE;
}

/* Sends a built request (taking it over) and turns the outcome into an exit code. */
static int call_request(TierctlMount *m, CtlCommand cmd, CtlMessage *req, TierctlProgress progress, void *userdata,
			TierctlReply *ret) {
	int r = tierctl_call(m->socket, req, progress, userdata, &interrupted, ret);
	ctl_message_done(req);
	if (r == -EINTR) {
		log_error("interrupted: the daemon stops at a safe point; nothing is left half done");
		return TIERCTL_EXIT_INTERRUPTED;
	}
	if (r > 0)
		return r;
	if (!ret->ok) {
		int code = refused(cmd, ret);
		tierctl_reply_done(ret);
		return code;
	}
	return 0;
}

static int call(TierctlMount *m, CtlCommand cmd, const char *arg_name, char **args, int n_args, TierctlProgress progress,
		void *userdata, TierctlReply *ret) {
	CtlMessage req = {};
	int r = ctl_request_begin(&req, cmd);
	for (int i = 0; r >= 0 && i < n_args; i++)
		r = ctl_message_add(&req, arg_name, args[i]);
	if (r < 0) {
		ctl_message_done(&req);
		log_error_errno(r, "cannot build the request: %m");
		return TIERCTL_EXIT_USAGE;
	}
	return call_request(m, cmd, &req, progress, userdata, ret);
}

static const char *row_array_name(const char *kind) {
	static const char *const names[][2] = {
		{ "tier", "tiers" },   { "error", "errors" },  { "group", "groups" },   { "entry", "entries" },
		{ "du", "paths" },     { "failed", "failed" }, { "damaged", "damaged" }, { "class", "classes" },
		{ "file", "moves" },   { "next", "outlook" },  { "history_tier", "history_tiers" },
		{ "history_class", "history_classes" }, { "host", "hosts" }, { "host_error", "host_errors" },
	};
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (strcmp(names[i][0], kind) == 0)
			return names[i][1];
	return kind;
}

/* Derived figures of a row, so that --json carries what the tables show. */
static void json_derived(TierctlJson *j, const CtlMessage *m, size_t at) {
	const char *kind = m->fields[at].value;
	if (strcmp(kind, "tier") == 0) {
		tierctl_json_double(j, "dedup_ratio", tierctl_ratio((double) tierctl_get_u64(m, at, "referenced"),
								    (double) tierctl_get_u64(m, at, "live_plain")));
		tierctl_json_double(j, "compression_ratio", tierctl_ratio((double) tierctl_get_u64(m, at, "live_plain"),
									  (double) tierctl_get_u64(m, at, "live")));
		tierctl_json_double(j, "reduction_ratio", tierctl_ratio((double) tierctl_get_u64(m, at, "logical"),
									(double) tierctl_get_u64(m, at, "used")));
	} else if (strcmp(kind, "group") == 0) {
		tierctl_json_double(j, "dedup_ratio", tierctl_ratio((double) tierctl_get_u64(m, at, "chunk_bytes"),
								    (double) tierctl_get_u64(m, at, "unique_plain")));
		tierctl_json_double(j, "compression_ratio", tierctl_ratio((double) tierctl_get_u64(m, at, "unique_plain"),
									  (double) tierctl_get_u64(m, at, "chunk_stored")));
		tierctl_json_double(j, "reduction_ratio", tierctl_ratio((double) tierctl_get_u64(m, at, "logical"),
									(double) tierctl_get_u64(m, at, "stored")));
	} else if ((strcmp(kind, "du") == 0 || strcmp(kind, "entry") == 0) && ctl_message_get(m, at, "stored"))
		tierctl_json_double(j, "reduction_ratio", tierctl_ratio((double) tierctl_get_u64(m, at, "logical"),
									(double) tierctl_get_u64(m, at, "stored")));
}

/* The whole reply as JSON: its own fields, then one array per kind of row. */
static void print_json(const char *command, const TierctlMount *mount, const CtlMessage *m) {
	TierctlJson j = { .f = stdout };
	tierctl_json_begin_object(&j, NULL);
	tierctl_json_string(&j, "command", command);
	size_t own_end = 0;
	while (own_end < m->n && strcmp(m->fields[own_end].name, "row") != 0)
		own_end++;
	/* status names its mount itself; a second "mount" key would leave the value to each JSON reader. */
	if (!ctl_message_get(m, 0, "mount"))
		tierctl_json_string(&j, "mount", mount->mountpoint);
	tierctl_json_fields(&j, m, 0, own_end);
	/* Kinds in order of first appearance. */
	for (size_t i = own_end; i < m->n; i++) {
		if (strcmp(m->fields[i].name, "row") != 0)
			continue;
		bool seen = false;
		for (size_t k = own_end; k < i && !seen; k++)
			seen = strcmp(m->fields[k].name, "row") == 0 && strcmp(m->fields[k].value, m->fields[i].value) == 0;
		if (seen)
			continue;
		tierctl_json_begin_array(&j, row_array_name(m->fields[i].value));
		for (size_t k = i; k < m->n; k++) {
			if (strcmp(m->fields[k].name, "row") != 0 || strcmp(m->fields[k].value, m->fields[i].value) != 0)
				continue;
			tierctl_json_begin_object(&j, NULL);
			tierctl_json_fields(&j, m, k + 1, tierctl_row_end(m, k));
			json_derived(&j, m, k);
			tierctl_json_end_object(&j);
		}
		tierctl_json_end_array(&j);
	}
	tierctl_json_end_object(&j);
}

static const char *size_of(const CtlMessage *m, size_t at, const char *name, char buf[static 32]) {
	tierctl_format_size(tierctl_get_u64(m, at, name), arg_bytes, buf);
	return buf;
}

static const char *ratio_of(const CtlMessage *m, size_t at, const char *a, const char *b, char buf[static 32]) {
	tierctl_format_ratio((double) tierctl_get_u64(m, at, a), (double) tierctl_get_u64(m, at, b), buf);
	return buf;
}

static int table_start(TierctlTable *t, const char *const *headers, size_t n, const char *right) {
	int r = tierctl_table_new(t, headers, n);
	for (size_t i = 0; r >= 0 && i < n && right[i]; i++)
		t->right[i] = right[i] == 'r';
	return r < 0 ? log_oom() : 0;
}

static int table_finish(TierctlTable *t) {
	tierctl_table_print(t, stdout);
	tierctl_table_done(t);
	return 0;
}

/* ---- df, status ---- */

static int print_tiers(const CtlMessage *m, bool full) {
	static const char *const df_headers[] = { "TIER", "NAME", "CAPACITY", "USED", "FREE", "LOGICAL", "STORED",
						  "RAW", "DEDUP", "COMPRESSION", "REDUCTION" };
	static const char *const st_headers[] = { "TIER", "NAME", "ROLE", "BACKEND", "REACHABLE", "CAPACITY", "USED",
						  "FREE", "RESERVE", "PATH" };
	TierctlTable t;
	size_t n;
	_cleanup_free_ size_t *rows = tierctl_rows(m, "tier", &n);
	int r = full ? table_start(&t, df_headers, ELEMENTSOF(df_headers), "llrrrrrrrrr")
		     : table_start(&t, st_headers, ELEMENTSOF(st_headers), "lllllrrrrl");
	if (r < 0 || !rows)
		return log_oom();
	for (size_t i = 0; i < n; i++) {
		size_t at = rows[i];
		char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32], k[32];
		if (full) {
			const char *cells[] = { tierctl_get(m, at, "tier"),	 tierctl_get(m, at, "name"),
						size_of(m, at, "capacity", a),	 size_of(m, at, "used", b),
						size_of(m, at, "free", c),	 size_of(m, at, "logical", d),
						size_of(m, at, "stored", e),	 size_of(m, at, "raw", f),
						ratio_of(m, at, "referenced", "live_plain", g),
						ratio_of(m, at, "live_plain", "live", h),
						ratio_of(m, at, "logical", "used", k) };
			r = tierctl_table_add(&t, cells);
		} else {
			const char *cells[] = { tierctl_get(m, at, "tier"),	  tierctl_get(m, at, "name"),
						tierctl_get(m, at, "role"),	  tierctl_get(m, at, "backend"),
						tierctl_get(m, at, "reachable"), size_of(m, at, "capacity", a),
						size_of(m, at, "used", b),	  size_of(m, at, "free", c),
						size_of(m, at, "reserve", d),	  tierctl_get(m, at, "path") };
			r = tierctl_table_add(&t, cells);
		}
		if (r < 0) {
			tierctl_table_done(&t);
			return log_oom();
		}
	}
	return table_finish(&t);
}

static int run_df(TierctlMount *mount, char **args, int n_args) {
	TierctlReply reply;
	int r = call(mount, CTL_COMMAND_DF, NULL, NULL, 0, NULL, NULL, &reply);
	if (r != 0)
		return r;
	if (arg_json)
		print_json("df", mount, &reply.data);
	else
		r = print_tiers(&reply.data, true);
	tierctl_reply_done(&reply);
	return r < 0 ? TIERCTL_EXIT_FAILURE : 0;
}

static void format_duration(uint64_t s, char buf[static 32]) {
	if (s >= 86400)
		snprintf(buf, 32, "%llud %lluh", (unsigned long long) (s / 86400), (unsigned long long) (s % 86400 / 3600));
	else if (s >= 3600)
		snprintf(buf, 32, "%lluh %llum", (unsigned long long) (s / 3600), (unsigned long long) (s % 3600 / 60));
	else
		snprintf(buf, 32, "%llum %llus", (unsigned long long) (s / 60), (unsigned long long) (s % 60));
}

static void format_time(int64_t t, char buf[static 32]) {
	time_t tt = (time_t) t;
	struct tm tm;
	localtime_r(&tt, &tm);
	strftime(buf, 32, "%Y-%m-%d %H:%M:%S", &tm);
}

static void print_policy_worker(const CtlMessage *m) {
	char a[32], last[32], next[32];
	const char *file = ctl_message_get(m, 0, "policy_file") ?: ctl_message_get(m, 0, "policy_inode");

	if (strcmp(tierctl_get(m, 0, "policy_state"), "moving") == 0)
		printf("mover:       moving %s%s (%s)\n", file ? "" : "inode ", file ?: "?",
		       strcmp(tierctl_get(m, 0, "policy_reason"), "space") == 0 ? "the hot tier needs space" : "by age");
	else
		printf("mover:       idle\n");
	if (ctl_message_get(m, 0, "policy_last_run"))
		format_time((int64_t) tierctl_get_u64(m, 0, "policy_last_run"), last);
	else
		snprintf(last, sizeof(last), "not yet");
	format_time((int64_t) tierctl_get_u64(m, 0, "policy_next_run"), next);
	printf("             last pass %s, next by %s; moved %s files (%s) since start, %s failed\n", last, next,
	       tierctl_get(m, 0, "policy_files_moved"), size_of(m, 0, "policy_bytes_moved", a),
	       tierctl_get(m, 0, "policy_failed"));
}

static const char *const throttle_kinds[] = { "seal", "migrate", "gc", "rekey", "index" };

static uint64_t throttle_get(const CtlMessage *m, const char *kind, const char *what) {
	char key[64];
	snprintf(key, sizeof(key), "throttle_%s_%s", kind, what);
	return tierctl_get_u64(m, 0, key);
}

/* A daemon from before the throttle reports none of it: say nothing then. */
static void print_throttle(const CtlMessage *m) {
	if (!ctl_message_get(m, 0, "background_share"))
		return;
	printf("background:  %s%% of the time under foreground load (foreground busy now: %s); waited",
	       tierctl_get(m, 0, "background_share"), tierctl_get(m, 0, "foreground_busy"));
	for (size_t k = 0; k < ELEMENTSOF(throttle_kinds); k++)
		printf("%s %s %.1fs (%llu times)", k ? "," : "", throttle_kinds[k],
		       (double) throttle_get(m, throttle_kinds[k], "wait_us") / 1e6,
		       (unsigned long long) throttle_get(m, throttle_kinds[k], "waits"));
	printf("\n");
}

/* The keys in use per tier and the rekeys asked for; nothing for a mount without a key. */
static void print_keys(const CtlMessage *m) {
	size_t n, nr;
	_cleanup_free_ size_t *rows = tierctl_rows(m, "key", &n);
	_cleanup_free_ size_t *rekeys = tierctl_rows(m, "rekey", &nr);
	bool keyed = nr > 0;
	for (size_t i = 0; rows && i < n; i++)
		keyed |= strcmp(tierctl_get(m, rows[i], "key_id"), "none") != 0;
	if (!keyed)
		return;
	printf("\nkeys (bytes of containers each key seals, per tier; none: not sealed):\n");
	for (size_t i = 0; rows && i < n; i++) {
		char a[32];
		printf("  tier %-3s %-64s %10s in %s containers\n", tierctl_get(m, rows[i], "tier"),
		       tierctl_get(m, rows[i], "key_id"), size_of(m, rows[i], "bytes", a),
		       tierctl_get(m, rows[i], "containers"));
	}
	for (size_t i = 0; rekeys && i < nr; i++) {
		char a[32], b[32];
		if (ctl_message_get(m, rekeys[i], "done"))
			printf("rekey of tier %s: running, %s of %s rewritten\n", tierctl_get(m, rekeys[i], "tier"),
			       size_of(m, rekeys[i], "done", a), size_of(m, rekeys[i], "total", b));
		else
			printf("rekey of tier %s: waiting for the collector's next beat\n", tierctl_get(m, rekeys[i], "tier"));
	}
}

/*
 * The hosts of each shared tier, from status's `row host`: their state,
 * their lease, this daemon marked.  lead: a blank line and a heading first.
 */
static void print_shared_hosts(const CtlMessage *m, bool lead) {
	size_t n, ne;
	_cleanup_free_ size_t *rows = tierctl_rows(m, "host", &n);
	_cleanup_free_ size_t *errs = tierctl_rows(m, "host_error", &ne);
	const char *tier = NULL;

	for (size_t i = 0; rows && i < n; i++) {
		size_t at = rows[i];
		const char *state = tierctl_get(m, at, "state");
		char d[32];
		if (!tier || strcmp(tier, tierctl_get(m, at, "tier")) != 0) {
			tier = tierctl_get(m, at, "tier");
			printf("%shosts on shared tier %s (%s):\n", lead || i > 0 ? "\n" : "", tier, tierctl_get(m, at, "tier_name"));
		}
		printf("  %-32s %-8s", tierctl_get(m, at, "host"), state);
		if (strcmp(state, "live") == 0) {
			format_duration(tierctl_get_u64(m, at, "lease_left"), d);
			printf(" lease runs %s more", d);
		} else if (strcmp(state, "expired") == 0) {
			format_duration(tierctl_get_u64(m, at, "expired_for"), d);
			printf(" lease ended %s ago", d);
		} else if (strcmp(state, "damaged") == 0)
			printf(" its record does not parse (tierctl host retire --force replaces it)");
		printf("%s\n", strcmp(tierctl_get(m, at, "this"), "yes") == 0 ? "  (this daemon)" : "");
	}
	/* It cannot acknowledge a condemnation any more (docs/SHARED.md, "Safe collection"). */
	for (size_t i = 0; rows && i < n; i++)
		if (strcmp(tierctl_get(m, rows[i], "state"), "expired") == 0)
			printf("host %s on tier %s is expired, not retired: it may come back, so it blocks collection of "
			       "every container condemned on that tier since its last reference publication; if it is gone "
			       "for good: tierctl host retire %s --tier %s (root)\n",
			       tierctl_get(m, rows[i], "host"), tierctl_get(m, rows[i], "tier_name"), tierctl_get(m, rows[i], "host"),
			       tierctl_get(m, rows[i], "tier"));
	for (size_t i = 0; errs && i < ne; i++)
		printf("hosts of shared tier %s cannot be listed: %s\n", tierctl_get(m, errs[i], "tier"),
		       tierctl_get(m, errs[i], "message"));
}

static int run_status(TierctlMount *mount, char **args, int n_args) {
	TierctlReply reply;
	int r = call(mount, CTL_COMMAND_STATUS, NULL, NULL, 0, NULL, NULL, &reply);
	if (r != 0)
		return r;
	const CtlMessage *m = &reply.data;
	if (arg_json) {
		print_json("status", mount, m);
		tierctl_reply_done(&reply);
		return 0;
	}
	char up[32], a[32], b[32];
	format_duration(tierctl_get_u64(m, 0, "uptime"), up);
	printf("mount:       %s (fratierfs %s, pid %s, up %s)\n", tierctl_get(m, 0, "mount"), tierctl_get(m, 0, "version"),
	       tierctl_get(m, 0, "pid"), up);
	printf("data dir:    %s\n", tierctl_get(m, 0, "data_dir"));
	printf("control:     %s (owner uid %s, allow_other %s, %s clients now)\n", tierctl_get(m, 0, "control"),
	       tierctl_get(m, 0, "owner"), tierctl_get(m, 0, "allow_other"), tierctl_get(m, 0, "clients"));
	printf("files:       %s sealed (%s), %s raw\n", tierctl_get(m, 0, "files_sealed"),
	       size_of(m, 0, "sealed_bytes", a), tierctl_get(m, 0, "files_raw"));
	printf("queues:      seal %s (%s due, %s streaming), migrate %llu, gc %s dead chunks\n",
	       tierctl_get(m, 0, "seal_queue"), tierctl_get(m, 0, "seal_queue_due"),
	       ctl_message_get(m, 0, "seal_streams") ? tierctl_get(m, 0, "seal_streams") : "0",
	       (unsigned long long) tierctl_get_u64(m, 0, "migrate_queue"),
	       tierctl_get(m, 0, "gc_queue"));
	if (ctl_message_get(m, 0, "seal_rate"))
		printf("throughput:  sealing %s/s, stored %s/s (last minute)\n", size_of(m, 0, "seal_rate", a),
		       size_of(m, 0, "store_rate", b));
	else
		printf("throughput:  not measured yet (the daemon samples every 10 s)\n");
	if (ctl_message_get(m, 0, "seal_queue_bytes"))
		printf("seal lag:    %s waiting, the oldest due file %ss past its quiet time\n",
		       size_of(m, 0, "seal_queue_bytes", a), tierctl_get(m, 0, "seal_behind"));
	if (ctl_message_get(m, 0, "restore_bytes")) {
		printf("restores:    %s of sealed files read", size_of(m, 0, "restore_bytes", a));
		if (ctl_message_get(m, 0, "restore_rate"))
			printf(" at %s/s", size_of(m, 0, "restore_rate", b));
		printf("; read-ahead %s hits, %s waits, %s misses\n", tierctl_get(m, 0, "readahead_hits"),
		       tierctl_get(m, 0, "readahead_waits"), tierctl_get(m, 0, "readahead_misses"));
	}
	printf("policy:      seal after %ss quiet, collect every %ss, move by age and watermark every %ss (tierctl policy show)\n",
	       tierctl_get(m, 0, "seal_delay"), tierctl_get(m, 0, "gc_interval"), tierctl_get(m, 0, "policy_interval"));
	print_policy_worker(m);
	print_throttle(m);
	if (tierctl_get_u64(m, 0, "catalog_reserve_releases") > 0 ||
	    tierctl_get_u64(m, 0, "catalog_reserve_held") < tierctl_get_u64(m, 0, "catalog_reserve_size")) {
		printf("catalog:     the hot tier's filesystem filled up %s times since the mount, and the catalog's "
		       "reserve was given back for its commits; it holds %s of %s now (it comes back once that "
		       "filesystem has twice its size free)\n",
		       tierctl_get(m, 0, "catalog_reserve_releases"), size_of(m, 0, "catalog_reserve_held", a),
		       size_of(m, 0, "catalog_reserve_size", b));
		if (tierctl_get_u64(m, 0, "seal_queue_room") > 0)
			printf("             %s files on other filesystems wait for room there to be sealed: their rows "
			       "would take what the archiver's next files need\n",
			       tierctl_get(m, 0, "seal_queue_room"));
	}
	printf("\n");
	r = print_tiers(m, false);
	size_t nt;
	_cleanup_free_ size_t *trows = tierctl_rows(m, "tier", &nt);
	for (size_t i = 0; trows && i < nt; i++)
		if (ctl_message_get(m, trows[i], "error"))
			printf("tier %s (%s) is not usable: %s\n", tierctl_get(m, trows[i], "tier"),
			       tierctl_get(m, trows[i], "name"), tierctl_get(m, trows[i], "error"));
		else if (ctl_message_get(m, trows[i], "fenced"))
			printf("tier %s (%s) takes nothing more from this daemon: its host name %s there was retired or taken "
			       "over; its files there still read; stop this daemon\n",
			       tierctl_get(m, trows[i], "tier"), tierctl_get(m, trows[i], "name"), tierctl_get(m, trows[i], "host"));
	/* Where a full hot tier's writes go: a daemon from before spill = reports neither field. */
	for (size_t i = 0; trows && i < nt; i++) {
		const char *enc = ctl_message_get(m, trows[i], "encrypt"), *spill = ctl_message_get(m, trows[i], "spill");
		if (!enc || !spill || strcmp(tierctl_get(m, trows[i], "role"), "hot") == 0 || strcmp(enc, "yes") != 0)
			continue;
		if (strcmp(spill, "yes") == 0)
			printf("tier %s (%s) is encrypted, but spill = yes: raw files that spill there when the hot tier is "
			       "full are in clear on it until sealed\n",
			       tierctl_get(m, trows[i], "tier"), tierctl_get(m, trows[i], "name"));
		else if (strcmp(tierctl_get(m, trows[i], "backend"), "dir") == 0 &&
			 strcmp(tierctl_get(m, trows[i], "shared"), "yes") != 0)
			printf("tier %s (%s) is encrypted and takes no raw files: with the hot tier full, writes fail with "
			       "ENOSPC rather than spill there in clear (spill = yes in its section allows it)\n",
			       tierctl_get(m, trows[i], "tier"), tierctl_get(m, trows[i], "name"));
	}
	/* A daemon from before compression regions reports no region cache: say nothing then. */
	for (size_t i = 0; trows && i < nt; i++)
		if (ctl_message_get(m, trows[i], "region_cache_max")) {
			char held[32], bound[32];
			printf("region cache of %s: %s of %s held; %s hits, %s misses, %s regions decompressed\n",
			       tierctl_get(m, trows[i], "name"), size_of(m, trows[i], "region_cache_bytes", held),
			       size_of(m, trows[i], "region_cache_max", bound), tierctl_get(m, trows[i], "region_cache_hits"),
			       tierctl_get(m, trows[i], "region_cache_misses"), tierctl_get(m, trows[i], "region_cache_loads"));
		}
	for (size_t i = 0; trows && i < nt; i++) {
		char sent[32], mem[32];
		if (ctl_message_get(m, trows[i], "bytes_sent") && tierctl_get_u64(m, trows[i], "tier") > 0)
			printf("sent to %s: %s since start\n", tierctl_get(m, trows[i], "name"),
			       size_of(m, trows[i], "bytes_sent", sent));
		if (!ctl_message_get(m, trows[i], "global_segments_published"))
			continue;
		printf("global dedup on %s: %s chunks (%s) of other hosts referenced instead of sent, in %s of their "
		       "containers; %s segments of %s hosts loaded (%s entries, %s of memory), %s published, %s chunks "
		       "waiting\n",
		       tierctl_get(m, trows[i], "name"), tierctl_get(m, trows[i], "global_foreign_hits"),
		       size_of(m, trows[i], "global_foreign_bytes", sent), tierctl_get(m, trows[i], "global_foreign_containers"),
		       tierctl_get(m, trows[i], "global_segments_loaded"), tierctl_get(m, trows[i], "global_hosts"),
		       tierctl_get(m, trows[i], "global_entries"), size_of(m, trows[i], "global_memory", mem),
		       tierctl_get(m, trows[i], "global_segments_published"),
		       tierctl_get(m, trows[i], "global_chunks_unpublished"));
		if (tierctl_get_u64(m, trows[i], "global_segments_other_key") > 0)
			printf("global dedup on %s: %s segments of other hosts skipped: made under another key (hosts "
			       "deduplicating across a shared tier must share the key, or all have none)\n",
			       tierctl_get(m, trows[i], "name"), tierctl_get(m, trows[i], "global_segments_other_key"));
		if (tierctl_get_u64(m, trows[i], "global_segments_bad") > 0)
			printf("global dedup on %s: %s segments of other hosts skipped: damaged\n",
			       tierctl_get(m, trows[i], "name"), tierctl_get(m, trows[i], "global_segments_bad"));
		if (tierctl_get_u64(m, trows[i], "global_segments_over_bound") > 0)
			printf("global dedup on %s: %s segments of other hosts not loaded: the lookup is full\n",
			       tierctl_get(m, trows[i], "name"), tierctl_get(m, trows[i], "global_segments_over_bound"));
		if (tierctl_get_u64(m, trows[i], "global_condemned_waiting") > 0)
			printf("collection on %s: %s condemned containers of this host wait for host %s (its latest reference "
			       "publication names them or does not acknowledge their condemnation yet)\n",
			       tierctl_get(m, trows[i], "name"), tierctl_get(m, trows[i], "global_condemned_waiting"),
			       tierctl_get(m, trows[i], "global_blocked_by"));
		if (tierctl_get_u64(m, trows[i], "global_condemnations_bad") > 0)
			printf("global dedup on %s: %s condemnations of other hosts do not load (damaged): their segments "
			       "are not loaded either\n",
			       tierctl_get(m, trows[i], "name"), tierctl_get(m, trows[i], "global_condemnations_bad"));
	}

	print_keys(m);

	print_shared_hosts(m, true);

	size_t n;
	_cleanup_free_ size_t *rows = tierctl_rows(m, "error", &n);
	printf("\nlast errors: %s logged since start%s\n", tierctl_get(m, 0, "errors_total"), n ? ", newest first:" : "");
	for (size_t i = 0; rows && i < n; i++) {
		time_t t = (time_t) tierctl_get_u64(m, rows[i], "time");
		struct tm tm;
		char when[32];
		localtime_r(&t, &tm);
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		printf("  %s  %-7s  %s\n", when, tierctl_get(m, rows[i], "level"), tierctl_get(m, rows[i], "message"));
	}
	tierctl_reply_done(&reply);
	return r < 0 ? TIERCTL_EXIT_FAILURE : 0;
}

/* ---- du, ls ---- */

/* Request paths of the arguments (relative to the mount's root). */
static int mount_paths(const TierctlMount *mount, char **args, int n, char ***ret) {
	char **out = calloc((size_t) n + 1, sizeof(char *));
	if (!out)
		return log_oom();
	for (int i = 0; i < n; i++) {
		_cleanup_free_ char *abs = tierctl_path_absolute(args[i]);
		out[i] = abs ? tierctl_path_in_mount(mount->mountpoint, abs) : NULL;
		if (!out[i]) {
			if (abs)
				log_error("%s is not inside the fratier mount %s", args[i], mount->mountpoint);
			else
				log_oom();
			for (int k = 0; k < i; k++)
				free(out[k]);
			free(out);
			return abs ? -EINVAL : -ENOMEM;
		}
	}
	*ret = out;
	return 0;
}

static void strv_free(char **v) {
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static int print_failures(const CtlMessage *m) {
	size_t n;
	_cleanup_free_ size_t *rows = tierctl_rows(m, "failed", &n);
	for (size_t i = 0; rows && i < n; i++)
		log_error("%s: %s", tierctl_get(m, rows[i], "path"), tierctl_get(m, rows[i], "message"));
	return n > 0 ? TIERCTL_EXIT_PARTIAL : 0;
}

static int run_paths(TierctlMount *mount, char **args, int n_args, CtlCommand cmd) {
	char **paths = NULL;
	TierctlReply reply;
	if (n_args > CTL_PATHS_MAX) {
		log_error("at most %d paths at once", CTL_PATHS_MAX);
		return TIERCTL_EXIT_USAGE;
	}
	if (mount_paths(mount, args, n_args, &paths) < 0)
		return TIERCTL_EXIT_USAGE;
	int r = call(mount, cmd, "path", paths, n_args, NULL, NULL, &reply);
	strv_free(paths);
	if (r != 0)
		return r;
	const CtlMessage *m = &reply.data;
	int code = print_failures(m);
	if (arg_json) {
		print_json(ctl_command_to_string(cmd), mount, m);
		tierctl_reply_done(&reply);
		return code;
	}

	TierctlTable t;
	size_t n;
	_cleanup_free_ size_t *rows = NULL;
	if (cmd == CTL_COMMAND_DU) {
		static const char *const h[] = { "LOGICAL", "STORED", "UNIQUE", "SHARED", "REDUCTION", "FILES", "PATH" };
		rows = tierctl_rows(m, "du", &n);
		r = table_start(&t, h, ELEMENTSOF(h), "rrrrrrl");
		for (size_t i = 0; r >= 0 && rows && i < n; i++) {
			char a[32], b[32], c[32], d[32], e[32];
			_cleanup_free_ char *path = NULL;
			if (asprintf(&path, "%s%s", mount->mountpoint,
				     strcmp(tierctl_get(m, rows[i], "path"), "/") == 0 ? "" : tierctl_get(m, rows[i], "path")) < 0) {
				path = NULL;
				r = -ENOMEM;
				break;
			}
			const char *cells[] = { size_of(m, rows[i], "logical", a), size_of(m, rows[i], "stored", b),
						size_of(m, rows[i], "unique", c),  size_of(m, rows[i], "shared", d),
						ratio_of(m, rows[i], "logical", "stored", e), tierctl_get(m, rows[i], "files"),
						path };
			r = tierctl_table_add(&t, cells);
		}
	} else {
		static const char *const hs[] = { "LOGICAL", "STORED", "STATE", "CLASS", "NAME" };
		static const char *const hl[] = { "TYPE", "MODE", "UID", "GID", "MTIME", "LOGICAL", "STORED", "UNIQUE",
						  "SHARED", "REDUCTION", "TIER", "STATE", "CLASS", "NAME" };
		rows = tierctl_rows(m, "entry", &n);
		r = arg_long ? table_start(&t, hl, ELEMENTSOF(hl), "lrrrlrrrrrrlll") : table_start(&t, hs, ELEMENTSOF(hs), "rrlll");
		for (size_t i = 0; r >= 0 && rows && i < n; i++) {
			size_t at = rows[i];
			bool file = strcmp(tierctl_get(m, at, "type"), "file") == 0;
			char a[32], b[32], c[32], d[32], e[32], mode[16], mtime[32];
			time_t tt = (time_t) tierctl_get_u64(m, at, "mtime");
			struct tm tm;
			localtime_r(&tt, &tm);
			strftime(mtime, sizeof(mtime), "%Y-%m-%d %H:%M", &tm);
			snprintf(mode, sizeof(mode), "%04llo", (unsigned long long) tierctl_get_u64(m, at, "mode"));
			/* Entries of several directories: each name with its directory (mount-relative). */
			_cleanup_free_ char *qualified = NULL;
			const char *name = tierctl_get(m, at, "name");
			if (n_args > 1) {
				const char *dir = tierctl_get(m, at, "dir");
				if (asprintf(&qualified, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, name) < 0) {
					qualified = NULL;
					r = -ENOMEM;
					break;
				}
				name = qualified;
			}
			if (arg_long) {
				const char *cells[] = { tierctl_get(m, at, "type"),
							mode,
							tierctl_get(m, at, "uid"),
							tierctl_get(m, at, "gid"),
							mtime,
							file ? size_of(m, at, "logical", a) : "-",
							file ? size_of(m, at, "stored", b) : "-",
							file ? size_of(m, at, "unique", c) : "-",
							file ? size_of(m, at, "shared", d) : "-",
							file ? ratio_of(m, at, "logical", "stored", e) : "-",
							file ? tierctl_get(m, at, "tier") : "-",
							file ? tierctl_get(m, at, "state") : "-",
							file ? tierctl_get(m, at, "class") : "-",
							name };
				r = tierctl_table_add(&t, cells);
			} else {
				const char *cells[] = { file ? size_of(m, at, "logical", a) : "-",
							file ? size_of(m, at, "stored", b) : "-",
							file ? tierctl_get(m, at, "state") : tierctl_get(m, at, "type"),
							file ? tierctl_get(m, at, "class") : "-", name };
				r = tierctl_table_add(&t, cells);
			}
		}
	}
	if (r >= 0)
		table_finish(&t);
	else
		tierctl_table_done(&t);
	tierctl_reply_done(&reply);
	if (r < 0)
		return log_oom(), TIERCTL_EXIT_FAILURE;
	return code;
}

static int run_du(TierctlMount *mount, char **args, int n_args) {
	return run_paths(mount, args, n_args, CTL_COMMAND_DU);
}

static int run_ls(TierctlMount *mount, char **args, int n_args) {
	char *here[] = { (char *) "." };
	return n_args == 0 ? run_paths(mount, here, 1, CTL_COMMAND_LS) : run_paths(mount, args, n_args, CTL_COMMAND_LS);
}

/* ---- report ---- */

/* The outlook and the samples of a report reply, borrowed from m (valid while the reply is). */
static int report_details(const CtlMessage *m, TierctlReport *rep, TierctlOutlook **ret_outlook,
			  TierctlHistoryTier **ret_tiers, TierctlHistoryClass **ret_classes) {
	size_t n_next, n_tiers, n_classes;
	_cleanup_free_ size_t *next = tierctl_rows(m, "next", &n_next);
	_cleanup_free_ size_t *tiers = tierctl_rows(m, "history_tier", &n_tiers);
	_cleanup_free_ size_t *classes = tierctl_rows(m, "history_class", &n_classes);
	TierctlOutlook *o = calloc(n_next + 1, sizeof(*o));
	TierctlHistoryTier *ht = calloc(n_tiers + 1, sizeof(*ht));
	TierctlHistoryClass *hc = calloc(n_classes + 1, sizeof(*hc));
	*ret_outlook = o;
	*ret_tiers = ht;
	*ret_classes = hc;
	if (!next || !tiers || !classes || !o || !ht || !hc)
		return -ENOMEM;
	for (size_t i = 0; i < n_next; i++) {
		o[i] = (TierctlOutlook) {
			.file_class = tierctl_get(m, next[i], "class"),
			.target = tierctl_get(m, next[i], "target"),
			.next_due = (int64_t) tierctl_get_u64(m, next[i], "next_due"),
			.held_files = tierctl_get_u64(m, next[i], "held_files"),
			.held_bytes = tierctl_get_u64(m, next[i], "held_bytes"),
			.held_due_files = tierctl_get_u64(m, next[i], "held_due_files"),
		};
		for (int w = 0; w < TIERCTL_OUTLOOK_MAX; w++) {
			char key[32];
			snprintf(key, sizeof(key), "%s_files", tierctl_outlook_names[w]);
			o[i].files[w] = tierctl_get_u64(m, next[i], key);
			snprintf(key, sizeof(key), "%s_bytes", tierctl_outlook_names[w]);
			o[i].bytes[w] = tierctl_get_u64(m, next[i], key);
		}
	}
	for (size_t i = 0; i < n_tiers; i++)
		ht[i] = (TierctlHistoryTier) {
			.t = (int64_t) tierctl_get_u64(m, tiers[i], "t"),
			.hot = strcmp(tierctl_get(m, tiers[i], "role"), "hot") == 0,
			.capacity = tierctl_get_u64(m, tiers[i], "capacity"),
			.used = tierctl_get_u64(m, tiers[i], "used"),
			.logical = tierctl_get_u64(m, tiers[i], "logical"),
			.stored = tierctl_get_u64(m, tiers[i], "stored"),
		};
	for (size_t i = 0; i < n_classes; i++)
		hc[i] = (TierctlHistoryClass) {
			.t = (int64_t) tierctl_get_u64(m, classes[i], "t"),
			.file_class = tierctl_get(m, classes[i], "class"),
			.logical = tierctl_get_u64(m, classes[i], "logical"),
			.hot_logical = tierctl_get_u64(m, classes[i], "hot_logical"),
		};
	rep->outlook = o;
	rep->n_outlook = n_next;
	rep->tiers = ht;
	rep->n_tiers = n_tiers;
	rep->classes = hc;
	rep->n_classes = n_classes;
	return 0;
}

/* "SIZE in N", or "-" for none. */
static const char *files_cell(uint64_t files, uint64_t bytes, char buf[static 64]) {
	char size[32];
	if (files == 0)
		return "-";
	tierctl_format_size(bytes, arg_bytes, size);
	snprintf(buf, 64, "%s in %llu", size, (unsigned long long) files);
	return buf;
}

/* What moves compressed again on their way into each tier, after the report's table. */
static int print_moved(const CtlMessage *m) {
	size_t n;
	_cleanup_free_ size_t *rows = tierctl_rows(m, "moved", &n);
	if (!rows)
		return -ENOMEM;
	if (n == 0)
		return 0;
	printf("\nMoved in, compressed again at the tier's level (since the catalog began counting):\n");
	static const char *const h[] = { "TIER", "FILES", "LOGICAL", "BEFORE", "AFTER", "AFTER/BEFORE" };
	TierctlTable t;
	int r = table_start(&t, h, ELEMENTSOF(h), "lrrrrr");
	for (size_t i = 0; r >= 0 && i < n; i++) {
		uint64_t before = tierctl_get_u64(m, rows[i], "before"), after = tierctl_get_u64(m, rows[i], "after");
		char a[32], b[32], c[32], d[32], e[32];
		snprintf(a, sizeof(a), "%llu", (unsigned long long) tierctl_get_u64(m, rows[i], "files"));
		tierctl_format_size(tierctl_get_u64(m, rows[i], "logical"), arg_bytes, b);
		tierctl_format_size(before, arg_bytes, c);
		tierctl_format_size(after, arg_bytes, d);
		if (before > 0)
			snprintf(e, sizeof(e), "%.3f", (double) after / (double) before);
		else
			snprintf(e, sizeof(e), "-");
		const char *cells[] = { tierctl_get(m, rows[i], "tier"), a, b, c, d, e };
		r = tierctl_table_add(&t, cells);
	}
	if (r >= 0)
		table_finish(&t);
	else
		tierctl_table_done(&t);
	return r;
}

/* What the policy moves next and when, after the report's table. */
static int print_outlook(const TierctlReport *rep) {
	char next[32];
	if (rep->policy_on) {
		format_time(rep->policy_next_run, next);
		printf("\nPolicy: next pass at the latest %s.\n", next);
	} else
		printf("\nPolicy: off (-o policy=0); below is what it would move.\n");
	if (rep->n_outlook == 0) {
		printf("No class moves off the hot tier.\n");
		return 0;
	}
	static const char *const h[] = { "CLASS", "TO", "NEXT PASS (AGE)", "NEXT PASS (SPACE)", "WITHIN 1 DAY",
					 "WITHIN 7 DAYS", "LATER", "FIRST DUE" };
	TierctlTable t;
	int r = table_start(&t, h, ELEMENTSOF(h), "llrrrrrl");
	for (size_t i = 0; r >= 0 && i < rep->n_outlook; i++) {
		const TierctlOutlook *o = &rep->outlook[i];
		char cells_buf[TIERCTL_OUTLOOK_MAX][64], due[32] = "-";
		if (o->next_due)
			format_time(o->next_due, due);
		const char *cells[] = {
			o->file_class,
			o->target,
			files_cell(o->files[TIERCTL_OUTLOOK_DUE], o->bytes[TIERCTL_OUTLOOK_DUE], cells_buf[0]),
			files_cell(o->files[TIERCTL_OUTLOOK_SPACE], o->bytes[TIERCTL_OUTLOOK_SPACE], cells_buf[1]),
			files_cell(o->files[TIERCTL_OUTLOOK_DAY], o->bytes[TIERCTL_OUTLOOK_DAY], cells_buf[2]),
			files_cell(o->files[TIERCTL_OUTLOOK_WEEK], o->bytes[TIERCTL_OUTLOOK_WEEK], cells_buf[3]),
			files_cell(o->files[TIERCTL_OUTLOOK_LATER], o->bytes[TIERCTL_OUTLOOK_LATER], cells_buf[4]),
			due,
		};
		r = tierctl_table_add(&t, cells);
	}
	if (r >= 0)
		table_finish(&t);
	else
		tierctl_table_done(&t);
	for (size_t i = 0; r >= 0 && i < rep->n_outlook; i++) {
		const TierctlOutlook *o = &rep->outlook[i];
		char size[32];
		if (o->held_files == 0)
			continue;
		tierctl_format_size(o->held_bytes, arg_bytes, size);
		printf("Held hot by keep_hot (the recovery window): %s %s in %llu, %llu of them due by age.\n", o->file_class,
		       size, (unsigned long long) o->held_files, (unsigned long long) o->held_due_files);
	}
	return r;
}

/* report --by host: per shared tier, per host, what the tier holds of it and what the host says it holds. */
static int print_report_hosts(const CtlMessage *m) {
	static const char *const h[] = { "TIER",    "HOST",        "STATE",     "OBJECTS",   "STORED",    "UNIQUE",
					 "SHARED",  "FILES",       "LOGICAL",   "FROM OTHERS", "REDUCTION", "SUMMARY OF" };
	static const char *const sums[] = { "objects", "bytes", "unique", "shared", "files", "logical", "foreign_logical" };
	size_t n;
	_cleanup_free_ size_t *rows = tierctl_rows(m, "host", &n);
	TierctlTable t;
	int r = table_start(&t, h, ELEMENTSOF(h), "lllrrrrrrrrl");
	if (r < 0 || !rows)
		return -ENOMEM;
	for (size_t i = 0; r >= 0 && i <= n; i++) {
		/* After each tier's hosts, its total: the rows add up to everything listed there. */
		bool end = i == n || (i > 0 && strcmp(tierctl_get(m, rows[i], "tier"), tierctl_get(m, rows[i - 1], "tier")) != 0);
		if (end && i > 0) {
			uint64_t total[ELEMENTSOF(sums)] = {};
			const char *tier = tierctl_get(m, rows[i - 1], "tier");
			for (size_t k = 0; k < i; k++) {
				if (strcmp(tierctl_get(m, rows[k], "tier"), tier) != 0)
					continue;
				for (size_t j = 0; j < ELEMENTSOF(sums); j++)
					total[j] += tierctl_get_u64(m, rows[k], sums[j]);
			}
			char a[32], b[32], u[32], sh[32], c[32], d[32], f[32], e[32];
			snprintf(a, sizeof(a), "%llu", (unsigned long long) total[0]);
			tierctl_format_size(total[1], arg_bytes, b);
			tierctl_format_size(total[2], arg_bytes, u);
			tierctl_format_size(total[3], arg_bytes, sh);
			snprintf(c, sizeof(c), "%llu", (unsigned long long) total[4]);
			tierctl_format_size(total[5], arg_bytes, d);
			tierctl_format_size(total[6], arg_bytes, f);
			tierctl_format_ratio((double) total[5], (double) total[1], e);
			const char *cells[] = { tier, "total", "", a, b, u, sh, c, d, f, e, "" };
			r = tierctl_table_add(&t, cells);
		}
		if (i == n || r < 0)
			break;
		size_t at = rows[i];
		bool sum = strcmp(tierctl_get(m, at, "summary"), "yes") == 0;
		char host[48], a[32], b[32], u[32], sh[32], c[32] = "-", d[32] = "-", f[32] = "-", e[32] = "-", when[32] = "";
		const char *name = tierctl_get(m, at, "host");
		snprintf(host, sizeof(host), "%s%s", name[0] ? name : "(no host)",
			 strcmp(tierctl_get(m, at, "this"), "yes") == 0 ? " *" : "");
		snprintf(a, sizeof(a), "%llu", (unsigned long long) tierctl_get_u64(m, at, "objects"));
		tierctl_format_size(tierctl_get_u64(m, at, "bytes"), arg_bytes, b);
		tierctl_format_size(tierctl_get_u64(m, at, "unique"), arg_bytes, u);
		tierctl_format_size(tierctl_get_u64(m, at, "shared"), arg_bytes, sh);
		if (sum) {
			snprintf(c, sizeof(c), "%llu", (unsigned long long) tierctl_get_u64(m, at, "files"));
			tierctl_format_size(tierctl_get_u64(m, at, "logical"), arg_bytes, d);
			if (tierctl_get(m, at, "foreign_logical")[0])
				tierctl_format_size(tierctl_get_u64(m, at, "foreign_logical"), arg_bytes, f);
			tierctl_format_ratio((double) tierctl_get_u64(m, at, "logical"), (double) tierctl_get_u64(m, at, "bytes"), e);
			format_time((int64_t) tierctl_get_u64(m, at, "summary_time"), when);
		} else if (name[0])
			snprintf(when, sizeof(when), "%s", tierctl_get(m, at, "summary"));
		const char *cells[] = { tierctl_get(m, at, "tier"), host, tierctl_get(m, at, "state"), a, b, u, sh, c, d, f, e, when };
		r = tierctl_table_add(&t, cells);
	}
	if (r < 0) {
		tierctl_table_done(&t);
		return r;
	}
	table_finish(&t);
	printf("\nSTORED: the host's objects on the tier (listed there), UNIQUE + SHARED: SHARED are its containers another "
	       "host's latest reference publication names (whole containers: publications name containers, not chunks).\n"
	       "FILES, LOGICAL, FROM OTHERS (of LOGICAL, read from other hosts' containers): what the host last published "
	       "about itself (h/HOST/s/summary, SUMMARY OF: when).  * this daemon.\n");
	return 0;
}

static int run_report(TierctlMount *mount, char **args, int n_args) {
	TierctlReply reply;
	char *by[] = { (char *) (arg_by ?: "class") };
	if (ctl_report_by_from_string(by[0]) < 0) {
		log_error("--by takes class, day, tier, database or host, not '%s'", by[0]);
		return TIERCTL_EXIT_USAGE;
	}
	if (arg_html && strcmp(by[0], "host") == 0) {
		log_error("--html does not take --by host");
		return TIERCTL_EXIT_USAGE;
	}
	int r = call(mount, CTL_COMMAND_REPORT, "by", by, 1, NULL, NULL, &reply);
	if (r != 0)
		return r;
	if (strcmp(by[0], "host") == 0) {
		if (arg_json)
			print_json("report", mount, &reply.data);
		else
			r = print_report_hosts(&reply.data);
		tierctl_reply_done(&reply);
		return r < 0 ? (log_oom(), TIERCTL_EXIT_FAILURE) : 0;
	}
	const CtlMessage *m = &reply.data;
	size_t n;
	_cleanup_free_ size_t *rows = tierctl_rows(m, "group", &n);
	_cleanup_free_ TierctlReportGroup *groups = calloc(n + 1, sizeof(TierctlReportGroup));
	if (!rows || !groups) {
		tierctl_reply_done(&reply);
		return log_oom(), TIERCTL_EXIT_FAILURE;
	}
	for (size_t i = 0; i < n; i++)
		groups[i] = (TierctlReportGroup) {
			.key = tierctl_get(m, rows[i], "key"),
			.files = tierctl_get_u64(m, rows[i], "files"),
			.logical = tierctl_get_u64(m, rows[i], "logical"),
			.stored = tierctl_get_u64(m, rows[i], "stored"),
			.chunk_bytes = tierctl_get_u64(m, rows[i], "chunk_bytes"),
			.unique_plain = tierctl_get_u64(m, rows[i], "unique_plain"),
			.chunk_stored = tierctl_get_u64(m, rows[i], "chunk_stored"),
		};
	TierctlReport rep = {
		.mountpoint = mount->mountpoint,
		.by = by[0],
		.groups = groups,
		.n_groups = n,
		.policy_on = strcmp(tierctl_get(m, 0, "policy"), "on") == 0,
		.policy_next_run = (int64_t) tierctl_get_u64(m, 0, "policy_next_run"),
	};
	_cleanup_free_ TierctlOutlook *outlook = NULL;
	_cleanup_free_ TierctlHistoryTier *tiers = NULL;
	_cleanup_free_ TierctlHistoryClass *classes = NULL;
	if (report_details(m, &rep, &outlook, &tiers, &classes) < 0) {
		tierctl_reply_done(&reply);
		return log_oom(), TIERCTL_EXIT_FAILURE;
	}
	if (arg_html) {
		/* The sections per tier and the recovery timelines: left out if the daemon cannot say. */
		TierctlReply df, rec;
		bool have_df = call(mount, CTL_COMMAND_DF, NULL, NULL, 0, NULL, NULL, &df) == 0;
		bool have_rec = call(mount, CTL_COMMAND_RECOVERY, NULL, NULL, 0, NULL, NULL, &rec) == 0;
		rep.report = m;
		rep.df = have_df ? &df.data : NULL;
		rep.recovery = have_rec ? &rec.data : NULL;
		r = tierctl_html_report(arg_html, &rep);
		if (have_df)
			tierctl_reply_done(&df);
		if (have_rec)
			tierctl_reply_done(&rec);
		if (r < 0) {
			log_error_errno(r, "cannot write %s: %m", arg_html);
			tierctl_reply_done(&reply);
			return TIERCTL_EXIT_FAILURE;
		}
	}
	if (arg_json)
		print_json("report", mount, m);
	else if (!arg_html) {
		static const char *const h[] = { "KEY", "FILES", "LOGICAL", "STORED", "DEDUP", "COMPRESSION", "REDUCTION" };
		TierctlTable t;
		uint64_t tf = 0, tl = 0, ts = 0;
		char upper[16];
		snprintf(upper, sizeof(upper), "%s", by[0]);
		for (char *p = upper; *p; p++)
			*p = (char) (*p - 'a' + 'A');
		const char *hh[ELEMENTSOF(h)];
		memcpy(hh, h, sizeof(h));
		hh[0] = upper;
		r = table_start(&t, hh, ELEMENTSOF(h), "lrrrrrr");
		for (size_t i = 0; r >= 0 && i < n; i++) {
			char a[32], b[32], c[32], d[32], e[32], f[32];
			snprintf(a, sizeof(a), "%llu", (unsigned long long) groups[i].files);
			tierctl_format_size(groups[i].logical, arg_bytes, b);
			tierctl_format_size(groups[i].stored, arg_bytes, c);
			tierctl_format_ratio((double) groups[i].chunk_bytes, (double) groups[i].unique_plain, d);
			tierctl_format_ratio((double) groups[i].unique_plain, (double) groups[i].chunk_stored, e);
			tierctl_format_ratio((double) groups[i].logical, (double) groups[i].stored, f);
			const char *cells[] = { groups[i].key, a, b, c, d, e, f };
			r = tierctl_table_add(&t, cells);
			tf += groups[i].files;
			tl += groups[i].logical;
			ts += groups[i].stored;
		}
		if (r >= 0) {
			char a[32], b[32], c[32], f[32];
			snprintf(a, sizeof(a), "%llu", (unsigned long long) tf);
			tierctl_format_size(tl, arg_bytes, b);
			tierctl_format_size(ts, arg_bytes, c);
			tierctl_format_ratio((double) tl, (double) ts, f);
			const char *cells[] = { "total", a, b, c, "", "", f };
			r = tierctl_table_add(&t, cells);
		}
		if (r >= 0)
			table_finish(&t);
		else
			tierctl_table_done(&t);
		if (r >= 0)
			r = print_moved(m);
		if (r >= 0)
			r = print_outlook(&rep);
	}
	tierctl_reply_done(&reply);
	return r < 0 ? TIERCTL_EXIT_FAILURE : 0;
}

/* ---- policy ---- */

static int run_policy(TierctlMount *mount, char **args, int n_args) {
	TierctlReply reply;
	if (strcmp(args[0], "show") != 0) {
		log_error("unknown policy subcommand '%s' (only 'show' exists today)", args[0]);
		return TIERCTL_EXIT_USAGE;
	}
	int r = call(mount, CTL_COMMAND_POLICY, NULL, NULL, 0, NULL, NULL, &reply);
	if (r != 0)
		return r;
	const CtlMessage *m = &reply.data;
	if (arg_json) {
		print_json("policy", mount, m);
		tierctl_reply_done(&reply);
		return 0;
	}
	static const char *const h[] = { "CLASS", "SEALED", "CHUNKER", "MIN", "AVG", "MAX", "COMPRESSION", "SEAL DELAY",
					 "MIGRATE AFTER", "TARGET" };
	TierctlTable t;
	size_t n;
	_cleanup_free_ size_t *rows = tierctl_rows(m, "class", &n);
	r = table_start(&t, h, ELEMENTSOF(h), "lllrrrlrrl");
	for (size_t i = 0; r >= 0 && rows && i < n; i++) {
		size_t at = rows[i];
		bool sealed = strcmp(tierctl_get(m, at, "sealed"), "yes") == 0;
		char a[32], b[32], c[32], level[32], delay[32], after[32];
		uint64_t age = tierctl_get_u64(m, at, "migrate_after");
		if (age)
			format_duration(age, after);
		snprintf(level, sizeof(level), "zstd %s", tierctl_get(m, at, "zstd_level"));
		snprintf(delay, sizeof(delay), "%ss", tierctl_get(m, at, "seal_delay"));
		const char *cells[] = { tierctl_get(m, at, "class"),
					sealed ? "yes" : "no (passthrough)",
					sealed ? tierctl_get(m, at, "chunker") : "-",
					sealed ? size_of(m, at, "chunk_min", a) : "-",
					sealed ? size_of(m, at, "chunk_avg", b) : "-",
					sealed ? size_of(m, at, "chunk_max", c) : "-",
					sealed ? level : "-",
					sealed ? delay : "-",
					age ? after : "never",
					ctl_message_get(m, at, "target") ?: ctl_message_get(m, at, "pinned") ? "pinned" : "-" };
		r = tierctl_table_add(&t, cells);
	}
	if (r >= 0) {
		table_finish(&t);
		printf("\ncollector: every %ss, compacts containers less than %s live\n", tierctl_get(m, 0, "gc_interval"),
		       strcmp(tierctl_get(m, 0, "gc_live_threshold"), "0.5") == 0 ? "half" : tierctl_get(m, 0, "gc_live_threshold"));
		char reserve[32], bw[32];
		printf("hot tier:  above %s%% used, classes with a target move oldest first down to %s%%; free space kept: %s (%s)\n",
		       tierctl_get(m, 0, "high_watermark"), tierctl_get(m, 0, "low_watermark"), size_of(m, 0, "reserve", reserve),
		       tierctl_get(m, 0, "reserve_rule"));
		if (tierctl_get_u64(m, 0, "policy_bandwidth"))
			size_of(m, 0, "policy_bandwidth", bw);
		printf("mover:     a pass every %ss, at most %s%s\n", tierctl_get(m, 0, "policy_interval"),
		       tierctl_get_u64(m, 0, "policy_bandwidth") ? bw : "unthrottled",
		       tierctl_get_u64(m, 0, "policy_bandwidth") ? "/s" : "");
	} else
		tierctl_table_done(&t);
	tierctl_reply_done(&reply);
	return r < 0 ? TIERCTL_EXIT_FAILURE : 0;
}

/* ---- gc, scrub ---- */

/* Without a terminal (a log, a pipe), at most one progress line this often, besides the first and the last. */
#define PROGRESS_LOG_INTERVAL_S 5.0

typedef struct Progress {
	const char *what;
	bool tty;
	struct timespec start;
	bool said;
	double last_line;         /* seconds after start of the last line printed without a terminal */
} Progress;

static int show_progress(const CtlMessage *frame, void *userdata) {
	Progress *p = userdata;
	uint64_t done = 0, total = 0, damaged = 0;
	const char *phase = ctl_message_get(frame, 0, "phase") ?: "";
	(void) ctl_message_get_u64(frame, 0, "done", &done);
	(void) ctl_message_get_u64(frame, 0, "total", &total);
	(void) ctl_message_get_u64(frame, 0, "damaged", &damaged);
	if (total == 0) {
		/* No measure of the work (the collector): say once what is going on. */
		if (!p->said)
			fprintf(stderr, "%s: %s...\n", p->what, phase);
		p->said = true;
		return 0;
	}
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double secs = (double) (now.tv_sec - p->start.tv_sec) + (double) (now.tv_nsec - p->start.tv_nsec) / 1e9;
	double rate = secs > 0 ? (double) done / secs : 0;
	double eta = rate > 0 && total > done ? (double) (total - done) / rate : 0;
	char d[32], t[32], rt[32];
	tierctl_format_size(done, false, d);
	tierctl_format_size(total, false, t);
	tierctl_format_size((uint64_t) rate, false, rt);
	unsigned pct = (unsigned) (total ? done * 100 / total : 100);
	/* Only a scrub looks for damage; moves would always say "0 damaged". */
	char dmg[40] = "";
	bool scrub = strcmp(p->what, "scrub") == 0;
	if (p->tty) {
		char bar[31];
		size_t fill = (size_t) pct * 30 / 100;
		memset(bar, '#', fill);
		memset(bar + fill, '.', 30 - fill);
		bar[30] = 0;
		if (scrub)
			snprintf(dmg, sizeof(dmg), "  damaged %llu", (unsigned long long) damaged);
		fprintf(stderr, "\r%s [%s] %3u%%  %s / %s  %s/s  ETA %um%02us%s ", p->what, bar, pct, d, t, rt,
			(unsigned) eta / 60, (unsigned) eta % 60, dmg);
	} else {
		if (p->said && done < total && secs - p->last_line < PROGRESS_LOG_INTERVAL_S)
			return 0;
		p->last_line = secs;
		if (scrub)
			snprintf(dmg, sizeof(dmg), ", %llu damaged", (unsigned long long) damaged);
		fprintf(stderr, "%s: %s %s of %s (%u%%), %s/s, eta %us%s\n", p->what, phase, d, t, pct, rt,
			(unsigned) eta, dmg);
	}
	p->said = true;
	return 0;
}

static void progress_end(Progress *p) {
	if (p->tty && p->said)
		fputc('\n', stderr);
}

static int run_gc(TierctlMount *mount, char **args, int n_args) {
	TierctlReply reply;
	Progress p = { .what = "gc", .tty = isatty(STDERR_FILENO) };
	clock_gettime(CLOCK_MONOTONIC, &p.start);
	int r = call(mount, CTL_COMMAND_GC, NULL, NULL, 0, show_progress, &p, &reply);
	progress_end(&p);
	if (r != 0)
		return r;
	const CtlMessage *m = &reply.data;
	if (arg_json)
		print_json("gc", mount, m);
	else {
		char a[32], b[32];
		printf("deleted %s dead chunks and %s empty containers, compacted %s containers (%s copied), freed %s\n",
		       tierctl_get(m, 0, "chunks_deleted"), tierctl_get(m, 0, "containers_deleted"),
		       tierctl_get(m, 0, "containers_compacted"), size_of(m, 0, "bytes_copied", a),
		       size_of(m, 0, "bytes_freed", b));
		if (tierctl_get_u64(m, 0, "containers_skipped"))
			printf("left %s containers alone because a frame in them failed its checks: run tierctl scrub\n",
			       tierctl_get(m, 0, "containers_skipped"));
		/* A daemon from before collection across hosts sends neither. */
		if (tierctl_get_u64(m, 0, "containers_condemned") || tierctl_get_u64(m, 0, "containers_waiting"))
			printf("shared tiers: condemned %s containers; %s condemned containers wait for other hosts "
			       "(tierctl status names one)\n",
			       tierctl_get(m, 0, "containers_condemned"), tierctl_get(m, 0, "containers_waiting"));
	}
	tierctl_reply_done(&reply);
	return 0;
}

static int run_scrub(TierctlMount *mount, char **args, int n_args) {
	TierctlReply reply;
	Progress p = { .what = "scrub", .tty = isatty(STDERR_FILENO) };
	char *tier[] = { (char *) arg_tier };
	clock_gettime(CLOCK_MONOTONIC, &p.start);
	int r = call(mount, CTL_COMMAND_SCRUB, "tier", tier, arg_tier ? 1 : 0, show_progress, &p, &reply);
	progress_end(&p);
	if (r != 0)
		return r;
	const CtlMessage *m = &reply.data;
	uint64_t damaged = tierctl_get_u64(m, 0, "damaged_chunks");
	if (arg_json)
		print_json("scrub", mount, m);
	else {
		char a[32];
		printf("verified %s chunks in %s containers (%s): %s damaged chunks, %s damaged files\n",
		       tierctl_get(m, 0, "chunks"), tierctl_get(m, 0, "containers"), size_of(m, 0, "bytes", a),
		       tierctl_get(m, 0, "damaged_chunks"), tierctl_get(m, 0, "damaged_files"));
		size_t n;
		_cleanup_free_ size_t *rows = tierctl_rows(m, "damaged", &n);
		for (size_t i = 0; rows && i < n; i++)
			printf("damaged: %s%s\n", mount->mountpoint, tierctl_get(m, rows[i], "path"));
		if (damaged)
			printf("the damaged chunks were retired: new data no longer deduplicates against them; restore the "
			       "files listed from a backup\n");
		_cleanup_free_ size_t *away = tierctl_rows(m, "unreachable", &n);
		for (size_t i = 0; away && i < n; i++)
			printf("tier %s is not reachable: not verified (see tierctl status)\n", tierctl_get(m, away[i], "tier"));
		_cleanup_free_ size_t *descs = tierctl_rows(m, "description", &n);
		for (size_t i = 0; descs && i < n; i++)
			printf("tier %s: its description is %s: written again from the catalog\n",
			       tierctl_get(m, descs[i], "tier"), tierctl_get(m, descs[i], "problem"));
	}
	size_t n_away, n_descs;
	free(tierctl_rows(m, "unreachable", &n_away));
	free(tierctl_rows(m, "description", &n_descs));
	tierctl_reply_done(&reply);
	return damaged || n_away || n_descs ? TIERCTL_EXIT_PARTIAL : 0;
}

static int run_rekey(TierctlMount *mount, char **args, int n_args) {
	TierctlReply reply;
	if (!arg_tier) {
		log_error("rekey needs --tier N: the tier whose data is sealed again under the newest key");
		return TIERCTL_EXIT_USAGE;
	}
	char *tier[] = { (char *) arg_tier };
	int r = call(mount, CTL_COMMAND_REKEY, "tier", tier, 1, NULL, NULL, &reply);
	if (r != 0)
		return r;
	if (arg_json)
		print_json("rekey", mount, &reply.data);
	else
		printf("rekey of tier %s asked for: it runs in the background (throttled like compaction, resumed after a "
		       "restart); tierctl status shows what each key still protects\n",
		       arg_tier);
	tierctl_reply_done(&reply);
	return 0;
}

/* ---- migrate, recall ---- */

/* A tier named by number, or by name (looked up with df). */
static int tier_number(TierctlMount *mount, const char *s, char buf[static 16]) {
	uint64_t t;
	if (ctl_parse_u64(s, &t) >= 0) {
		if (t > CTL_TIER_MAX) {
			log_error("--to takes a tier number from 0 to %u or a tier name, not '%s'", CTL_TIER_MAX, s);
			return TIERCTL_EXIT_USAGE;
		}
		snprintf(buf, 16, "%llu", (unsigned long long) t);
		return 0;
	}
	TierctlReply reply;
	int r = call(mount, CTL_COMMAND_DF, NULL, NULL, 0, NULL, NULL, &reply);
	if (r != 0)
		return r;
	size_t n;
	_cleanup_free_ size_t *rows = tierctl_rows(&reply.data, "tier", &n);
	r = TIERCTL_EXIT_USAGE;
	for (size_t i = 0; rows && i < n; i++)
		if (strcmp(tierctl_get(&reply.data, rows[i], "name"), s) == 0) {
			snprintf(buf, 16, "%s", tierctl_get(&reply.data, rows[i], "tier"));
			r = 0;
		}
	if (r != 0)
		log_error("no tier is called '%s' (see tierctl df)", s);
	tierctl_reply_done(&reply);
	return r;
}

/* The arguments with quoted globs expanded against the mount (the shell expands unquoted ones). */
static int expand_globs(char **args, int n, char ***ret, int *ret_n) {
	char **out = calloc(CTL_PATHS_MAX + 1, sizeof(char *));
	size_t n_out = 0;
	int r = out ? 0 : -ENOMEM;
	for (int i = 0; r == 0 && i < n; i++) {
		glob_t g = {};
		bool pattern = strpbrk(args[i], "*?[") && access(args[i], F_OK) < 0;
		if (pattern) {
			int q = glob(args[i], 0, NULL, &g);
			if (q != 0) {
				log_error("%s: %s", args[i], q == GLOB_NOMATCH ? "no file matches" : "cannot expand the pattern");
				r = -EINVAL;
			}
		}
		size_t k = pattern ? g.gl_pathc : 1;
		for (size_t j = 0; r == 0 && j < k; j++) {
			if (n_out == CTL_PATHS_MAX) {
				log_error("more than %d paths: name their directory instead (directories are walked)",
					  CTL_PATHS_MAX);
				r = -E2BIG;
				break;
			}
			out[n_out] = strdup(pattern ? g.gl_pathv[j] : args[i]);
			if (!out[n_out++])
				r = -ENOMEM;
		}
		if (pattern)
			globfree(&g);
	}
	if (r < 0) {
		strv_free(out);
		if (r == -ENOMEM)
			log_oom();
		return r == -ENOMEM ? TIERCTL_EXIT_FAILURE : TIERCTL_EXIT_USAGE;
	}
	*ret = out;
	*ret_n = (int) n_out;
	return 0;
}

/*
 * "YYYY-MM-DD", "YYYY-MM-DD HH:MM[:SS]" (or with a 'T'), or "@SECONDS".
 * Taken as UTC: archived logs carry the database host's local time without
 * a zone, and fratier reads it as UTC, so the DBA's local times compare.
 */
static int parse_time(const char *s, char out[static 24]) {
	static const char *const formats[] = { "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M",
					       "%Y-%m-%dT%H:%M", "%Y-%m-%d" };
	uint64_t secs;

	if (s[0] == '@') {
		if (ctl_parse_u64(s + 1, &secs) < 0 || secs > INT64_MAX)
			return -EINVAL;
		snprintf(out, 24, "%" PRIu64, secs);
		return 0;
	}
	for (size_t i = 0; i < ELEMENTSOF(formats); i++) {
		struct tm tm = {};
		const char *end = strptime(s, formats[i], &tm);
		if (!end || *end)
			continue;
		time_t t = timegm(&tm);
		if (t < 0)
			return -EINVAL;
		snprintf(out, 24, "%lld", (long long) t);
		return 0;
	}
	return -EINVAL;
}

static bool selects_logs(void) {
	return arg_thread || arg_sequence || arg_since || arg_until;
}

/* recall --until X DB: one argument that is a DB_NAME or a DBID, not a path. */
static bool is_restore_set(const Command *cmd, char **args, int n_args) {
	if (strcmp(cmd->name, "recall") != 0 || !arg_until || n_args != 1)
		return false;
	size_t n = strspn(args[0], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_$#");
	return n > 0 && n <= 10 && args[0][n] == '\0';
}

/* A restore bound: an SCN (digits only) or a time; adds since/from_scn or until/until_scn. */
static int add_point(CtlMessage *req, const char *value, bool until) {
	char t[24];
	if (value[strspn(value, "0123456789")] == '\0')
		return ctl_message_add(req, until ? "until_scn" : "from_scn", value);
	if (parse_time(value, t) < 0)
		return -EINVAL;
	return ctl_message_add(req, until ? "until" : "since", t);
}

static const char *scn_time(const CtlMessage *m, size_t at, const char *scn, const char *time, char buf[static 64]) {
	char t[32];
	format_time((int64_t) tierctl_get_u64(m, at, time), t);
	snprintf(buf, 64, "SCN %s (%s)", tierctl_get(m, at, scn), t);
	return buf;
}

/* A missing stretch, in words. */
static void print_missing(const CtlMessage *m, size_t at, const char *lead) {
	char a[64], b[64], seq[64];
	const char *first = ctl_message_get(m, at, "first_sequence"), *last = ctl_message_get(m, at, "last_sequence");
	if (first && last)
		snprintf(seq, sizeof(seq), "%s %s%s%s", strcmp(first, last) == 0 ? "sequence" : "sequences", first,
			 strcmp(first, last) == 0 ? "" : "-", strcmp(first, last) == 0 ? "" : last);
	else if (first)
		snprintf(seq, sizeof(seq), "sequence %s on (not archived here)", first);
	else if (last)
		snprintf(seq, sizeof(seq), "sequences up to %s", last);
	else
		snprintf(seq, sizeof(seq), "no log of the range");
	printf("%sthread %s: %s missing, from %s to %s\n", lead, tierctl_get(m, at, "thread"), seq,
	       scn_time(m, at, "low_scn", "low_time", a), scn_time(m, at, "next_scn", "next_time", b));
}

static int run_restore(TierctlMount *mount, const char *db) {
	CtlMessage req = {};
	int q = ctl_request_begin(&req, CTL_COMMAND_RECALL);
	if (q >= 0)
		q = ctl_message_add(&req, "database", db);
	if (q >= 0)
		q = add_point(&req, arg_until, true);
	if (q >= 0 && arg_from)
		q = add_point(&req, arg_from, false);
	if (q >= 0 && arg_dry_run)
		q = ctl_message_add(&req, "dry_run", "yes");
	if (q < 0) {
		ctl_message_done(&req);
		log_error("--until and --from take an SCN (digits), YYYY-MM-DD[ HH:MM[:SS]] (UTC) or @SECONDS");
		return TIERCTL_EXIT_USAGE;
	}
	TierctlReply reply;
	Progress p = { .what = "recall", .tty = isatty(STDERR_FILENO) };
	clock_gettime(CLOCK_MONOTONIC, &p.start);
	int r = call_request(mount, CTL_COMMAND_RECALL, &req, show_progress, &p, &reply);
	progress_end(&p);
	if (r != 0)
		return r;
	const CtlMessage *m = &reply.data;
	int code = tierctl_get_u64(m, 0, "failed") ? TIERCTL_EXIT_PARTIAL : 0;
	if (arg_json) {
		print_json("recall", mount, m);
		tierctl_reply_done(&reply);
		return code;
	}
	size_t nr, nm;
	_cleanup_free_ size_t *rows = tierctl_rows(m, "file", &nr);
	_cleanup_free_ size_t *miss = tierctl_rows(m, "missing", &nm);
	bool dry = strcmp(tierctl_get(m, 0, "dry_run"), "yes") == 0;
	char a[64], b[64], size[32];
	printf("Restore set of %s (DBID %s), %s to %s, in restore order (lowest SCN first):\n",
	       tierctl_get(m, 0, "database"), tierctl_get(m, 0, "dbid"),
	       scn_time(m, 0, "set_low_scn", "set_low_time", a), scn_time(m, 0, "set_next_scn", "set_next_time", b));
	for (size_t i = 0; miss && i < nm; i++)
		print_missing(m, miss[i], "MISSING: ");
	static const char *const h[] = { "THREAD", "SEQUENCE", "LOW SCN", "NEXT SCN", "SIZE", "TIER", "RESULT", "PATH" };
	TierctlTable t;
	r = table_start(&t, h, ELEMENTSOF(h), "rrrrrrll");
	for (size_t i = 0; r >= 0 && rows && i < nr; i++) {
		size_t at = rows[i];
		char sz[32];
		_cleanup_free_ char *path = NULL;
		if (asprintf(&path, "%s%s", mount->mountpoint, tierctl_get(m, at, "path")) < 0) {
			r = -ENOMEM;
			break;
		}
		const char *cells[] = { tierctl_get(m, at, "thread"), tierctl_get(m, at, "sequence"), tierctl_get(m, at, "low_scn"),
					tierctl_get(m, at, "next_scn"), size_of(m, at, "size", sz), tierctl_get(m, at, "from"),
					tierctl_get(m, at, "result"), path };
		r = tierctl_table_add(&t, cells);
	}
	if (r < 0) {
		tierctl_table_done(&t);
		tierctl_reply_done(&reply);
		return log_oom(), TIERCTL_EXIT_FAILURE;
	}
	table_finish(&t);
	tierctl_format_size(tierctl_get_u64(m, 0, "bytes"), arg_bytes, size);
	const char *secs = ctl_message_get(m, 0, "expected_seconds");
	if (dry)
		printf("\ndry run: %s logs (%s) to recall, %s already on the hot tier; expected time %s%s\n",
		       tierctl_get(m, 0, "would_move"), size, tierctl_get(m, 0, "already"), secs ? secs : "unknown",
		       secs ? " s at the recall speed measured so far" : " (no recall from those tiers measured yet)");
	else
		printf("\nrecalled %s logs (%s) in restore order; %s already on the hot tier, %s failed\n",
		       tierctl_get(m, 0, "moved"), size, tierctl_get(m, 0, "already"), tierctl_get(m, 0, "failed"));
	if (nm > 0)
		printf("%zu stretch(es) of redo missing: recovery stops at the first\n", nm);
	tierctl_reply_done(&reply);
	return code;
}

/* ---- recovery ---- */

static const char *tiers_cell(const CtlMessage *m, size_t at) {
	return tierctl_get(m, at, "tiers");
}

static int run_recovery(TierctlMount *mount, char **args, int n_args) {
	TierctlReply reply;
	int r = call(mount, CTL_COMMAND_RECOVERY, "database", args, n_args, NULL, NULL, &reply);
	if (r != 0)
		return r;
	const CtlMessage *m = &reply.data;
	if (arg_json) {
		print_json("recovery", mount, m);
		tierctl_reply_done(&reply);
		return 0;
	}
	size_t ndb, nu;
	_cleanup_free_ size_t *dbs = tierctl_rows(m, "database", &ndb);
	_cleanup_free_ size_t *unread = tierctl_rows(m, "unreadable", &nu);
	if (!dbs || ndb == 0)
		printf("No archived log with a readable header here.\n");
	for (size_t d = 0; dbs && d < ndb; d++) {
		size_t at = dbs[d], end = d + 1 < ndb ? dbs[d + 1] : m->n;
		char a[64], b[64], size[32];
		tierctl_format_size(tierctl_get_u64(m, at, "bytes"), arg_bytes, size);
		printf("%sDatabase %s (DBID %s, incarnation %s): %s thread(s), %s logs, %s\n  from %s to %s\n",
		       d ? "\n" : "", tierctl_get(m, at, "db_name"), tierctl_get(m, at, "dbid"), tierctl_get(m, at, "resetlogs_id"),
		       tierctl_get(m, at, "threads"), tierctl_get(m, at, "files"), size,
		       scn_time(m, at, "low_scn", "low_time", a), scn_time(m, at, "next_scn", "next_time", b));
		static const char *const h[] = { "THREAD", "SEQUENCES", "LOW SCN", "NEXT SCN", "FROM", "TO", "LOGS", "SIZE",
						 "TIERS" };
		TierctlTable t;
		r = table_start(&t, h, ELEMENTSOF(h), "rrrrllrrl");
		for (size_t i = at + 1; r >= 0 && i < end; i++) {
			if (strcmp(m->fields[i].name, "row") != 0)
				continue;
			const char *kind = m->fields[i].value;
			bool run = strcmp(kind, "run") == 0, gap = strcmp(kind, "gap") == 0;
			if (!run && !gap)
				continue;
			char seq[48], from[32], to[32], sz[32] = "-";
			const char *first = tierctl_get(m, i, "first_sequence"), *last = tierctl_get(m, i, "last_sequence");
			snprintf(seq, sizeof(seq), "%s%s%s%s", first, strcmp(first, last) ? "-" : "", strcmp(first, last) ? last : "",
				 gap ? " MISSING" : "");
			format_time((int64_t) tierctl_get_u64(m, i, "low_time"), from);
			format_time((int64_t) tierctl_get_u64(m, i, "next_time"), to);
			if (run)
				size_of(m, i, "bytes", sz);
			const char *cells[] = { tierctl_get(m, i, "thread"), seq, tierctl_get(m, i, "low_scn"),
						tierctl_get(m, i, "next_scn"), from, to, run ? tierctl_get(m, i, "files") : "-", sz,
						run ? tiers_cell(m, i) : "-" };
			r = tierctl_table_add(&t, cells);
		}
		if (r < 0) {
			tierctl_table_done(&t);
			break;
		}
		table_finish(&t);
		for (size_t i = at + 1; i < end; i++) {
			if (strcmp(m->fields[i].name, "row") != 0 || strcmp(m->fields[i].value, "duplicate") != 0)
				continue;
			printf("  thread %s sequence %s is held twice: %s%s is set aside, a restore uses %s%s (%s)\n",
			       tierctl_get(m, i, "thread"), tierctl_get(m, i, "first_sequence"), mount->mountpoint,
			       tierctl_get(m, i, "path"), mount->mountpoint, tierctl_get(m, i, "used_path"),
			       strcmp(tierctl_get(m, i, "same_header"), "yes") == 0 ? "same header and size"
										: "they differ: the one used reaches further");
		}
		printf("  recoverable without a gap%s:\n", tierctl_get_u64(m, at, "threads") > 1 ? " on every thread" : "");
		bool any = false;
		for (size_t i = at + 1; i < end; i++) {
			if (strcmp(m->fields[i].name, "row") != 0 || strcmp(m->fields[i].value, "window") != 0)
				continue;
			printf("    from %s to %s (%s logs on %s)\n", scn_time(m, i, "low_scn", "low_time", a),
			       scn_time(m, i, "next_scn", "next_time", b), tierctl_get(m, i, "files"), tiers_cell(m, i));
			any = true;
		}
		if (!any)
			printf("    nowhere: no stretch of redo is whole on every thread\n");
		if (tierctl_get_u64(m, at, "gaps"))
			printf("  %s gap(s), %s sequence(s) missing: a roll-forward stops at each\n", tierctl_get(m, at, "gaps"),
			       tierctl_get(m, at, "missing"));
	}
	for (size_t i = 0; unread && i < nu; i++)
		printf("%sUNREADABLE: %s%s: named or placed as an archived log, but its header is damaged or not Oracle's; "
		       "not trusted\n", i ? "" : "\n", mount->mountpoint, tierctl_get(m, unread[i], "path"));
	if (tierctl_get_u64(m, 0, "unsealed_logs"))
		printf("%s archived log(s) still being written or sealed: their headers are read at the seal\n",
		       tierctl_get(m, 0, "unsealed_logs"));
	tierctl_reply_done(&reply);
	if (r < 0) {
		log_oom();
		return TIERCTL_EXIT_FAILURE;
	}
	return 0;
}

static int run_move(TierctlMount *mount, char **args, int n_args, CtlCommand cmd) {
	const char *name = ctl_command_to_string(cmd);
	char to[16] = "", since[24] = "", until[24] = "";
	char **expanded = NULL, **paths = NULL;
	int n = 0, r;

	if (n_args == 0 && !selects_logs()) {
		log_error("%s needs paths, or archived logs by --thread, --sequence, --since or --until", name);
		return TIERCTL_EXIT_USAGE;
	}
	if ((arg_since && parse_time(arg_since, since) < 0) || (arg_until && parse_time(arg_until, until) < 0)) {
		log_error("--since and --until take YYYY-MM-DD[ HH:MM[:SS]] (the database host's local time) or @SECONDS");
		return TIERCTL_EXIT_USAGE;
	}
	uint64_t older_than = 0, larger_than = 0;
	if (arg_older_than && parse_duration(arg_older_than, &older_than) < 0) {
		log_error("--older-than takes an age: a number with s, m, h or d (e.g. 7d), not '%s'", arg_older_than);
		return TIERCTL_EXIT_USAGE;
	}
	if (arg_larger_than && parse_size(arg_larger_than, &larger_than) < 0) {
		log_error("--larger-than takes a size: a number with K, M, G, T or P (e.g. 1G), not '%s'", arg_larger_than);
		return TIERCTL_EXIT_USAGE;
	}
	if (cmd == CTL_COMMAND_MIGRATE && arg_to) {
		r = tier_number(mount, arg_to, to);
		if (r != 0)
			return r;
	}
	r = expand_globs(args, n_args, &expanded, &n);
	if (r != 0)
		return r;
	r = mount_paths(mount, expanded, n, &paths) < 0 ? TIERCTL_EXIT_USAGE : 0;
	strv_free(expanded);
	if (r != 0)
		return r;

	CtlMessage req = {};
	int q = ctl_request_begin(&req, cmd);
	for (int i = 0; q >= 0 && i < n; i++)
		q = ctl_message_add(&req, "path", paths[i]);
	if (q >= 0 && to[0])
		q = ctl_message_add(&req, "tier", to);
	if (q >= 0 && arg_dry_run)
		q = ctl_message_add(&req, "dry_run", "yes");
	if (q >= 0 && arg_thread)
		q = ctl_message_add(&req, "thread", arg_thread);
	if (q >= 0 && arg_sequence)
		q = ctl_message_add(&req, "sequence", arg_sequence);
	if (q >= 0 && since[0])
		q = ctl_message_add(&req, "since", since);
	if (q >= 0 && until[0])
		q = ctl_message_add(&req, "until", until);
	if (q >= 0 && arg_class)
		q = ctl_message_add(&req, "class", arg_class);
	if (q >= 0 && arg_older_than)
		q = ctl_message_add_u64(&req, "older_than", older_than);
	if (q >= 0 && arg_larger_than)
		q = ctl_message_add_u64(&req, "larger_than", larger_than);
	strv_free(paths);
	if (q < 0) {
		ctl_message_done(&req);
		log_oom();
		return TIERCTL_EXIT_FAILURE;
	}
	TierctlReply reply;
	Progress p = { .what = name, .tty = isatty(STDERR_FILENO) };
	clock_gettime(CLOCK_MONOTONIC, &p.start);
	r = call_request(mount, cmd, &req, show_progress, &p, &reply);
	progress_end(&p);
	if (r != 0)
		return r;
	const CtlMessage *m = &reply.data;
	int code = print_failures(m);
	size_t nr;
	_cleanup_free_ size_t *rows = tierctl_rows(m, "file", &nr);
	if (tierctl_get_u64(m, 0, "failed"))
		code = TIERCTL_EXIT_PARTIAL;
	if (arg_json)
		print_json(name, mount, m);
	else {
		static const char *const h[] = { "SIZE", "FROM", "TO", "RESULT", "NEW THERE", "PATH" };
		TierctlTable t;
		r = table_start(&t, h, ELEMENTSOF(h), "rrrlrl");
		for (size_t i = 0; r >= 0 && rows && i < nr; i++) {
			size_t at = rows[i];
			char a[32], b[32];
			_cleanup_free_ char *path = NULL, *result = NULL;
			const char *why = tierctl_get(m, at, "message");
			if (asprintf(&path, "%s%s", mount->mountpoint, tierctl_get(m, at, "path")) < 0 ||
			    asprintf(&result, "%s%s%s", tierctl_get(m, at, "result"), why[0] ? ": " : "", why) < 0) {
				r = -ENOMEM;
				break;
			}
			const char *cells[] = { size_of(m, at, "size", a), tierctl_get(m, at, "from"), tierctl_get(m, 0, "to"),
						result, ctl_message_get(m, at, "new_bytes") ? size_of(m, at, "new_bytes", b) : "-",
						path };
			r = tierctl_table_add(&t, cells);
		}
		if (r >= 0) {
			table_finish(&t);
			char a[32], b[32], c[32];
			if (cmd == CTL_COMMAND_UNPIN)
				printf("\nunpinned %s files: the policy may move them again\n", tierctl_get(m, 0, "unpinned"));
			else if (strcmp(tierctl_get(m, 0, "dry_run"), "yes") == 0)
				printf("\ndry run: %s files (%s) would move to tier %s (%s), %s already there, %s skipped\n",
				       tierctl_get(m, 0, "would_move"), size_of(m, 0, "bytes", a), tierctl_get(m, 0, "to"),
				       tierctl_get(m, 0, "to_name"), tierctl_get(m, 0, "already"), tierctl_get(m, 0, "skipped"));
			else
				printf("\nmoved %s files (%s) to tier %s (%s): %s new there, stored as %s; %s already there, %s "
				       "skipped, %s failed\n",
				       tierctl_get(m, 0, "moved"), size_of(m, 0, "bytes", a), tierctl_get(m, 0, "to"),
				       tierctl_get(m, 0, "to_name"), size_of(m, 0, "new_bytes", b),
				       size_of(m, 0, "stored_bytes", c), tierctl_get(m, 0, "already"),
				       tierctl_get(m, 0, "skipped"), tierctl_get(m, 0, "failed"));
		} else
			tierctl_table_done(&t);
	}
	tierctl_reply_done(&reply);
	if (r < 0) {
		log_oom();
		return TIERCTL_EXIT_FAILURE;
	}
	return code;
}

static int run_migrate(TierctlMount *mount, char **args, int n_args) {
	return run_move(mount, args, n_args, CTL_COMMAND_MIGRATE);
}

static int run_recall(TierctlMount *mount, char **args, int n_args) {
	if (is_restore_set(find_command("recall"), args, n_args))
		return run_restore(mount, args[0]);
	if (arg_from) {
		log_error("--from belongs to a restore set: recall --until TIME|SCN [--from TIME|SCN] DB");
		return TIERCTL_EXIT_USAGE;
	}
	return run_move(mount, args, n_args, CTL_COMMAND_RECALL);
}

static int run_pin(TierctlMount *mount, char **args, int n_args) {
	return run_move(mount, args, n_args, CTL_COMMAND_PIN);
}

static int run_unpin(TierctlMount *mount, char **args, int n_args) {
	return run_move(mount, args, n_args, CTL_COMMAND_UNPIN);
}

/* ---- host ---- */

static int run_host(TierctlMount *mount, char **args, int n_args) {
	TierctlReply reply;
	if (strcmp(args[0], "list") == 0 && n_args == 1) {
		if (arg_tier || arg_force) {
			log_error("host list takes no --tier or --force: it lists every shared tier");
			return TIERCTL_EXIT_USAGE;
		}
		int r = call(mount, CTL_COMMAND_STATUS, NULL, NULL, 0, NULL, NULL, &reply);
		if (r != 0)
			return r;
		size_t n;
		_cleanup_free_ size_t *rows = tierctl_rows(&reply.data, "host", &n);
		if (arg_json)
			print_json("host list", mount, &reply.data);
		else if (rows && n == 0)
			printf("no shared tier, or no host on it\n");
		else
			print_shared_hosts(&reply.data, false);
		tierctl_reply_done(&reply);
		return 0;
	}
	if (strcmp(args[0], "retire") != 0 || n_args != 2) {
		log_error("usage: tierctl host list | host retire NAME --tier N [--force]");
		return TIERCTL_EXIT_USAGE;
	}
	if (!arg_tier) {
		log_error("host retire needs --tier N: the shared tier to retire the host from");
		return TIERCTL_EXIT_USAGE;
	}
	if (!config_host_name_is_valid(args[1])) {
		log_error("'%s' is not a host name (1 to %d of a-z 0-9 _ -)", args[1], CONFIG_HOST_NAME_MAX);
		return TIERCTL_EXIT_USAGE;
	}
	CtlMessage req = {};
	int r = ctl_request_begin(&req, CTL_COMMAND_HOST_RETIRE);
	if (r >= 0)
		r = ctl_message_add(&req, "host", args[1]);
	if (r >= 0)
		r = ctl_message_add(&req, "tier", arg_tier);
	if (r >= 0 && arg_force)
		r = ctl_message_add(&req, "force", "yes");
	if (r < 0) {
		ctl_message_done(&req);
		return log_oom(), TIERCTL_EXIT_FAILURE;
	}
	r = call_request(mount, CTL_COMMAND_HOST_RETIRE, &req, NULL, NULL, &reply);
	if (r != 0)
		return r;
	if (arg_json)
		print_json("host retire", mount, &reply.data);
	else if (strcmp(tierctl_get(&reply.data, 0, "result"), "already") == 0)
		printf("host %s was retired from tier %s already\n", args[1], arg_tier);
	else
		printf("host %s retired from tier %s: its name is refused there for good; a daemon still running under "
		       "it stops writing to the tier at its next renewal\n",
		       args[1], arg_tier);
	tierctl_reply_done(&reply);
	return 0;
}

/* ---- metrics ---- */

typedef struct Metrics {
	FILE *f;
	char *buf;
	size_t size;
} Metrics;

static void label_escape(FILE *f, const char *s) {
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void metric_head(FILE *f, const char *name, const char *type, const char *help) {
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void tier_metric(FILE *f, const CtlMessage *m, const size_t *rows, size_t n, const char *name, const char *help,
			const char *field, const char *divisor) {
	metric_head(f, name, "gauge", help);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s{tier=\"%s\",name=\"", name, tierctl_get(m, rows[i], "tier"));
		label_escape(f, tierctl_get(m, rows[i], "name"));
		if (divisor)
			fprintf(f, "\"} %.6g\n", tierctl_ratio((double) tierctl_get_u64(m, rows[i], field),
							       (double) tierctl_get_u64(m, rows[i], divisor)));
		else
			fprintf(f, "\"} %llu\n", (unsigned long long) tierctl_get_u64(m, rows[i], field));
	}
}

/* A counter of the tiers that report field (the NFS ones), scaled (microseconds to seconds). */
static void tier_counter(FILE *f, const CtlMessage *m, const size_t *rows, size_t n, const char *name, const char *help,
			 const char *field, double scale) {
	bool any = false;
	for (size_t i = 0; i < n && !any; i++)
		any = ctl_message_get(m, rows[i], field) != NULL;
	if (!any)
		return;
	metric_head(f, name, "counter", help);
	for (size_t i = 0; i < n; i++) {
		if (!ctl_message_get(m, rows[i], field))
			continue;
		fprintf(f, "%s{tier=\"%s\",name=\"", name, tierctl_get(m, rows[i], "tier"));
		label_escape(f, tierctl_get(m, rows[i], "name"));
		if (scale == 1)
			fprintf(f, "\"} %llu\n", (unsigned long long) tierctl_get_u64(m, rows[i], field));
		else
			fprintf(f, "\"} %.6f\n", (double) tierctl_get_u64(m, rows[i], field) * scale);
	}
}

/*
 * The recoverability metrics, from a recovery reply: per database and
 * thread its newest archived log (the run reaching the highest SCN, so an
 * older incarnation's higher sequences do not count), per database its
 * gaps; what contrib/prometheus/fratier-alerts.yml watches.
 */
static void recovery_metrics(FILE *f, const CtlMessage *rec) {
	size_t ndb, nrun;
	_cleanup_free_ size_t *dbs = tierctl_rows(rec, "database", &ndb);
	_cleanup_free_ size_t *runs = tierctl_rows(rec, "run", &nrun);
	int64_t now = (int64_t) time(NULL);

	metric_head(f, "fratier_archivelog_gaps", "gauge", "Gaps (runs of missing sequences) in a database's archived logs.");
	for (size_t i = 0; dbs && i < ndb; i++) {
		fprintf(f, "fratier_archivelog_gaps{db=\"");
		label_escape(f, tierctl_get(rec, dbs[i], "db_name"));
		fprintf(f, "\",dbid=\"%s\"} %s\n", tierctl_get(rec, dbs[i], "dbid"), tierctl_get(rec, dbs[i], "gaps"));
	}
	metric_head(f, "fratier_archivelog_missing_sequences", "gauge", "Sequences missing in those gaps.");
	for (size_t i = 0; dbs && i < ndb; i++) {
		fprintf(f, "fratier_archivelog_missing_sequences{db=\"");
		label_escape(f, tierctl_get(rec, dbs[i], "db_name"));
		fprintf(f, "\",dbid=\"%s\"} %s\n", tierctl_get(rec, dbs[i], "dbid"), tierctl_get(rec, dbs[i], "missing"));
	}
	metric_head(f, "fratier_archivelog_unreadable_files", "gauge",
		    "Files of the archivelog class whose header is damaged or not Oracle's.");
	fprintf(f, "fratier_archivelog_unreadable_files %llu\n", (unsigned long long) tierctl_get_u64(rec, 0, "unreadable"));
	static const char *const per_thread[][3] = {
		{ "fratier_archivelog_newest_sequence", "gauge", "Sequence of the newest archived log of a thread." },
		{ "fratier_archivelog_newest_time_seconds", "gauge",
		  "Unix time of the last change in the newest archived log of a thread." },
		{ "fratier_archivelog_newest_age_seconds", "gauge", "Seconds since the last change in that log." },
	};
	for (size_t w = 0; w < ELEMENTSOF(per_thread); w++) {
		metric_head(f, per_thread[w][0], per_thread[w][1], per_thread[w][2]);
		for (size_t i = 0; runs && i < nrun; i++) {
			size_t at = runs[i];
			bool newest = true;
			for (size_t k = 0; k < nrun && newest; k++)
				newest = k == i || strcmp(tierctl_get(rec, runs[k], "dbid"), tierctl_get(rec, at, "dbid")) != 0 ||
					 strcmp(tierctl_get(rec, runs[k], "thread"), tierctl_get(rec, at, "thread")) != 0 ||
					 tierctl_get_u64(rec, runs[k], "next_scn") < tierctl_get_u64(rec, at, "next_scn");
			if (!newest)
				continue;
			const char *db = "";
			for (size_t k = 0; dbs && k < ndb; k++)
				if (strcmp(tierctl_get(rec, dbs[k], "dbid"), tierctl_get(rec, at, "dbid")) == 0)
					db = tierctl_get(rec, dbs[k], "db_name");
			fprintf(f, "%s{db=\"", per_thread[w][0]);
			label_escape(f, db);
			fprintf(f, "\",dbid=\"%s\",thread=\"%s\"} ", tierctl_get(rec, at, "dbid"), tierctl_get(rec, at, "thread"));
			int64_t t = (int64_t) tierctl_get_u64(rec, at, "next_time");
			if (w == 0)
				fprintf(f, "%s\n", tierctl_get(rec, at, "last_sequence"));
			else
				fprintf(f, "%lld\n", (long long) (w == 1 ? t : MAX(now - t, (int64_t) 0)));
		}
	}
}

/* The hosts of the shared tiers: how many in each state, and for how long each expired one has been. */
static void shared_metrics(FILE *f, const CtlMessage *m) {
	static const char *const states[] = { "live", "expired", "retired", "damaged" };
	size_t n, nt;
	_cleanup_free_ size_t *rows = tierctl_rows(m, "host", &n);
	_cleanup_free_ size_t *tiers = tierctl_rows(m, "tier", &nt);
	bool any = false;

	for (size_t i = 0; tiers && i < nt && !any; i++)
		any = strcmp(tierctl_get(m, tiers[i], "shared"), "yes") == 0;
	if (!any || !rows)
		return;
	metric_head(f, "fratier_shared_hosts", "gauge", "Hosts with a record on a shared tier, by state.");
	for (size_t i = 0; i < nt; i++) {
		if (strcmp(tierctl_get(m, tiers[i], "shared"), "yes") != 0)
			continue;
		const char *tier = tierctl_get(m, tiers[i], "tier");
		for (size_t s = 0; s < ELEMENTSOF(states); s++) {
			uint64_t count = 0;
			for (size_t k = 0; k < n; k++)
				count += strcmp(tierctl_get(m, rows[k], "tier"), tier) == 0 &&
					 strcmp(tierctl_get(m, rows[k], "state"), states[s]) == 0;
			fprintf(f, "fratier_shared_hosts{tier=\"%s\",name=\"", tier);
			label_escape(f, tierctl_get(m, tiers[i], "name"));
			fprintf(f, "\",state=\"%s\"} %llu\n", states[s], (unsigned long long) count);
		}
	}
	metric_head(f, "fratier_shared_host_expired_seconds", "gauge",
		    "Seconds since the lease of a host that was not retired ended (it would block collection across hosts).");
	for (size_t k = 0; k < n; k++) {
		if (strcmp(tierctl_get(m, rows[k], "state"), "expired") != 0)
			continue;
		fprintf(f, "fratier_shared_host_expired_seconds{tier=\"%s\",name=\"", tierctl_get(m, rows[k], "tier"));
		label_escape(f, tierctl_get(m, rows[k], "tier_name"));
		fprintf(f, "\",host=\"");
		label_escape(f, tierctl_get(m, rows[k], "host"));
		fprintf(f, "\"} %llu\n", (unsigned long long) tierctl_get_u64(m, rows[k], "expired_for"));
	}
}

static int metrics_render(const TierctlMount *mount, const CtlMessage *m, const CtlMessage *rec, char **ret) {
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	if (!f)
		return -ENOMEM;
	size_t n;
	_cleanup_free_ size_t *rows = tierctl_rows(m, "tier", &n);
	metric_head(f, "fratier_up", "gauge", "Whether the fratier daemon answered.");
	fprintf(f, "fratier_up 1\n");
	metric_head(f, "fratier_uptime_seconds", "gauge", "Seconds since the daemon started serving.");
	fprintf(f, "fratier_uptime_seconds %llu\n", (unsigned long long) tierctl_get_u64(m, 0, "uptime"));
	if (rows) {
		tier_metric(f, m, rows, n, "fratier_tier_logical_bytes", "Logical bytes of the files whose data is on the tier.",
			    "logical", NULL);
		tier_metric(f, m, rows, n, "fratier_tier_stored_bytes", "Bytes of the tier's chunk containers.", "stored", NULL);
		tier_metric(f, m, rows, n, "fratier_tier_raw_bytes", "Bytes of raw (not yet sealed) files on the tier.", "raw",
			    NULL);
		tier_metric(f, m, rows, n, "fratier_tier_used_bytes", "Stored plus raw bytes.", "used", NULL);
		tier_metric(f, m, rows, n, "fratier_tier_free_bytes", "Bytes fratier may still use on the tier.", "free", NULL);
		tier_metric(f, m, rows, n, "fratier_tier_capacity_bytes", "Capacity of the tier.", "capacity", NULL);
		tier_metric(f, m, rows, n, "fratier_tier_files", "Files whose data is on the tier.", "files", NULL);
		tier_metric(f, m, rows, n, "fratier_tier_dead_chunks", "Chunks waiting for the collector.", "dead_chunks", NULL);
		tier_metric(f, m, rows, n, "fratier_tier_dedup_ratio", "Logical chunk bytes over unique chunk bytes.",
			    "referenced", "live_plain");
		tier_metric(f, m, rows, n, "fratier_tier_compression_ratio", "Unique chunk bytes over their stored frames.",
			    "live_plain", "live");
		tier_metric(f, m, rows, n, "fratier_tier_reduction_ratio", "Logical bytes over used bytes.", "logical", "used");
		tier_counter(f, m, rows, n, "fratier_tier_sent_bytes_total",
			     "Bytes written to the tier's storage since start (what crossed to the filer).", "bytes_sent", 1);
		tier_counter(f, m, rows, n, "fratier_tier_global_foreign_chunks_total",
			     "Chunks found in other hosts' index segments and referenced instead of sent.",
			     "global_foreign_hits", 1);
		tier_counter(f, m, rows, n, "fratier_tier_global_foreign_bytes_total",
			     "Plain bytes of the chunks referenced instead of sent.", "global_foreign_bytes", 1);
		tier_counter(f, m, rows, n, "fratier_tier_global_segments_published_total",
			     "Index segments this host published since start.", "global_segments_published", 1);
		tier_counter(f, m, rows, n, "fratier_tier_global_segments_other_key_total",
			     "Other hosts' index segments skipped: made under another key.", "global_segments_other_key", 1);
		bool global = false;
		for (size_t i = 0; i < n; i++)
			global |= ctl_message_get(m, rows[i], "global_entries") != NULL;
		if (global) {
			tier_metric(f, m, rows, n, "fratier_tier_global_lookup_entries",
				    "Entries of other hosts' index segments in memory.", "global_entries", NULL);
			tier_metric(f, m, rows, n, "fratier_tier_global_lookup_bytes",
				    "Memory of the merged lookup of other hosts' index segments.", "global_memory", NULL);
			tier_metric(f, m, rows, n, "fratier_tier_global_condemned_waiting",
				    "Condemned containers of this host the last collection kept: another host holds or "
				    "has not acknowledged them (tierctl status names one).", "global_condemned_waiting", NULL);
		}
		tier_counter(f, m, rows, n, "fratier_tier_nfs_rpcs_total", "NFS calls the tier waited for.", "nfs_rpcs", 1);
		tier_counter(f, m, rows, n, "fratier_tier_nfs_rpc_seconds_total",
			     "Seconds spent waiting for NFS calls (over rpcs_total: the mean latency).", "nfs_rpc_us", 1e-6);
		tier_counter(f, m, rows, n, "fratier_tier_nfs_rpc_failures_total",
			     "NFS calls that timed out or lost their connection, and failed reconnections.", "nfs_rpc_failures", 1);
		metric_head(f, "fratier_tier_reachable", "gauge", "Whether the tier's storage answers (1) or not (0).");
		for (size_t i = 0; i < n; i++) {
			fprintf(f, "fratier_tier_reachable{tier=\"%s\",name=\"", tierctl_get(m, rows[i], "tier"));
			label_escape(f, tierctl_get(m, rows[i], "name"));
			fprintf(f, "\"} %d\n", strcmp(tierctl_get(m, rows[i], "reachable"), "yes") == 0);
		}
	}
	metric_head(f, "fratier_files", "gauge", "Regular files by state.");
	fprintf(f, "fratier_files{state=\"raw\"} %llu\nfratier_files{state=\"sealed\"} %llu\n",
		(unsigned long long) tierctl_get_u64(m, 0, "files_raw"), (unsigned long long) tierctl_get_u64(m, 0, "files_sealed"));
	metric_head(f, "fratier_sealed_bytes", "gauge", "Logical bytes of sealed files.");
	fprintf(f, "fratier_sealed_bytes %llu\n", (unsigned long long) tierctl_get_u64(m, 0, "sealed_bytes"));
	metric_head(f, "fratier_queue_depth", "gauge", "Work waiting, per queue.");
	fprintf(f, "fratier_queue_depth{queue=\"seal\"} %llu\nfratier_queue_depth{queue=\"seal_due\"} %llu\n"
		   "fratier_queue_depth{queue=\"seal_room\"} %llu\n"
		   "fratier_queue_depth{queue=\"gc\"} %llu\nfratier_queue_depth{queue=\"migrate\"} %llu\n",
		(unsigned long long) tierctl_get_u64(m, 0, "seal_queue"),
		(unsigned long long) tierctl_get_u64(m, 0, "seal_queue_due"),
		(unsigned long long) tierctl_get_u64(m, 0, "seal_queue_room"),
		(unsigned long long) tierctl_get_u64(m, 0, "gc_queue"),
		(unsigned long long) tierctl_get_u64(m, 0, "migrate_queue"));
	if (ctl_message_get(m, 0, "seal_rate")) {
		metric_head(f, "fratier_seal_throughput_bytes_per_second", "gauge",
			    "Net growth of sealed logical bytes over the last minute.");
		fprintf(f, "fratier_seal_throughput_bytes_per_second %llu\n",
			(unsigned long long) tierctl_get_u64(m, 0, "seal_rate"));
		metric_head(f, "fratier_store_throughput_bytes_per_second", "gauge",
			    "Net growth of the hot tier's containers over the last minute.");
		fprintf(f, "fratier_store_throughput_bytes_per_second %llu\n",
			(unsigned long long) tierctl_get_u64(m, 0, "store_rate"));
	}
	metric_head(f, "fratier_seal_backlog_bytes", "gauge", "Bytes of the files waiting to be sealed.");
	fprintf(f, "fratier_seal_backlog_bytes %llu\n", (unsigned long long) tierctl_get_u64(m, 0, "seal_queue_bytes"));
	metric_head(f, "fratier_seal_behind_seconds", "gauge",
		    "How long the oldest file past its quiet time has waited for sealing since.");
	fprintf(f, "fratier_seal_behind_seconds %llu\n", (unsigned long long) tierctl_get_u64(m, 0, "seal_behind"));
	metric_head(f, "fratier_restore_bytes_total", "counter", "Bytes read from sealed files since start.");
	fprintf(f, "fratier_restore_bytes_total %llu\n", (unsigned long long) tierctl_get_u64(m, 0, "restore_bytes"));
	if (ctl_message_get(m, 0, "restore_rate")) {
		metric_head(f, "fratier_restore_throughput_bytes_per_second", "gauge",
			    "Bytes read from sealed files over the time such reads were in progress, since start.");
		fprintf(f, "fratier_restore_throughput_bytes_per_second %llu\n",
			(unsigned long long) tierctl_get_u64(m, 0, "restore_rate"));
	}
	metric_head(f, "fratier_readahead_requests_total", "counter",
		    "Reads of sealed files by how the restore pipeline served them: from a block decompressed ahead (hit), "
		    "after waiting for one (wait), or read directly (miss).");
	fprintf(f, "fratier_readahead_requests_total{result=\"hit\"} %llu\n"
		   "fratier_readahead_requests_total{result=\"wait\"} %llu\n"
		   "fratier_readahead_requests_total{result=\"miss\"} %llu\n",
		(unsigned long long) tierctl_get_u64(m, 0, "readahead_hits"),
		(unsigned long long) tierctl_get_u64(m, 0, "readahead_waits"),
		(unsigned long long) tierctl_get_u64(m, 0, "readahead_misses"));
	metric_head(f, "fratier_policy_moving", "gauge", "Whether the policy worker is moving a file (1) or idle (0).");
	fprintf(f, "fratier_policy_moving %d\n", strcmp(tierctl_get(m, 0, "policy_state"), "moving") == 0);
	metric_head(f, "fratier_policy_moved_files_total", "counter", "Files the policy worker moved off the hot tier since start.");
	fprintf(f, "fratier_policy_moved_files_total %llu\n", (unsigned long long) tierctl_get_u64(m, 0, "policy_files_moved"));
	metric_head(f, "fratier_policy_moved_bytes_total", "counter", "Logical bytes of the files the policy worker moved since start.");
	fprintf(f, "fratier_policy_moved_bytes_total %llu\n", (unsigned long long) tierctl_get_u64(m, 0, "policy_bytes_moved"));
	metric_head(f, "fratier_policy_failed_total", "counter", "Moves of the policy worker that failed since start.");
	fprintf(f, "fratier_policy_failed_total %llu\n", (unsigned long long) tierctl_get_u64(m, 0, "policy_failed"));
	if (ctl_message_get(m, 0, "background_share")) {
		metric_head(f, "fratier_background_share_ratio", "gauge",
			    "Share of the time background work gets while the foreground is busy.");
		fprintf(f, "fratier_background_share_ratio %.2f\n", (double) tierctl_get_u64(m, 0, "background_share") / 100);
		metric_head(f, "fratier_throttle_waits_total", "counter",
			    "Times background work waited for the foreground, per kind of work.");
		for (size_t k = 0; k < ELEMENTSOF(throttle_kinds); k++)
			fprintf(f, "fratier_throttle_waits_total{work=\"%s\"} %llu\n", throttle_kinds[k],
				(unsigned long long) throttle_get(m, throttle_kinds[k], "waits"));
		metric_head(f, "fratier_throttle_wait_seconds_total", "counter",
			    "Seconds background work waited for the foreground, per kind of work.");
		for (size_t k = 0; k < ELEMENTSOF(throttle_kinds); k++)
			fprintf(f, "fratier_throttle_wait_seconds_total{work=\"%s\"} %.6f\n", throttle_kinds[k],
				(double) throttle_get(m, throttle_kinds[k], "wait_us") / 1e6);
	}
	if (ctl_message_get(m, 0, "catalog_lock_waits")) {
		metric_head(f, "fratier_catalog_lock_waits_total", "counter", "Takings of the catalog lock that waited for it.");
		fprintf(f, "fratier_catalog_lock_waits_total %llu\n", (unsigned long long) tierctl_get_u64(m, 0, "catalog_lock_waits"));
		metric_head(f, "fratier_catalog_lock_yields_total", "counter",
			    "Index merge batches and vacuum steps that handed the catalog lock to a thread waiting for it.");
		fprintf(f, "fratier_catalog_lock_yields_total %llu\n", (unsigned long long) tierctl_get_u64(m, 0, "catalog_lock_yields"));
		metric_head(f, "fratier_catalog_vacuum_pages_total", "counter", "Free catalog pages given back to the filesystem.");
		fprintf(f, "fratier_catalog_vacuum_pages_total %llu\n", (unsigned long long) tierctl_get_u64(m, 0, "catalog_vacuum_pages"));
		metric_head(f, "fratier_catalog_vacuum_left_pages", "gauge",
			    "Free catalog pages the last checkpoint left for the next ones.");
		fprintf(f, "fratier_catalog_vacuum_left_pages %llu\n", (unsigned long long) tierctl_get_u64(m, 0, "catalog_vacuum_left"));
	}
	if (ctl_message_get(m, 0, "catalog_reserve_size")) {
		metric_head(f, "fratier_catalog_reserve_bytes", "gauge",
			    "Bytes kept beside the catalog for its commits on a full disk, and what of them is held now.");
		fprintf(f, "fratier_catalog_reserve_bytes{of=\"size\"} %llu\n",
			(unsigned long long) tierctl_get_u64(m, 0, "catalog_reserve_size"));
		fprintf(f, "fratier_catalog_reserve_bytes{of=\"held\"} %llu\n",
			(unsigned long long) tierctl_get_u64(m, 0, "catalog_reserve_held"));
		metric_head(f, "fratier_catalog_reserve_releases_total", "counter",
			    "Times the catalog's reserve was given back because its filesystem was full.");
		fprintf(f, "fratier_catalog_reserve_releases_total %llu\n",
			(unsigned long long) tierctl_get_u64(m, 0, "catalog_reserve_releases"));
	}
	metric_head(f, "fratier_seal_backlog_seconds", "gauge",
		    "Seconds since the last change of the oldest file still waiting to be sealed (0: none).");
	fprintf(f, "fratier_seal_backlog_seconds %llu\n", (unsigned long long) tierctl_get_u64(m, 0, "seal_backlog"));
	for (size_t i = 0; rows && i < n; i++) {
		uint64_t fs_size = tierctl_get_u64(m, rows[i], "fs_size"), avail = tierctl_get_u64(m, rows[i], "fs_avail");
		if (strcmp(tierctl_get(m, rows[i], "role"), "hot") != 0 || fs_size == 0)
			continue;
		/* As the policy counts it: the share of the hot filesystem in use, against the high watermark. */
		metric_head(f, "fratier_hot_fill_ratio", "gauge", "Share of the hot tier's filesystem in use.");
		fprintf(f, "fratier_hot_fill_ratio %.4f\n", (double) (fs_size - MIN(avail, fs_size)) / (double) fs_size);
		metric_head(f, "fratier_hot_high_watermark_ratio", "gauge", "The hot tier's high watermark.");
		fprintf(f, "fratier_hot_high_watermark_ratio %.2f\n", (double) tierctl_get_u64(m, 0, "high_watermark") / 100);
	}
	shared_metrics(f, m);
	if (rec)
		recovery_metrics(f, rec);
	metric_head(f, "fratier_errors_total", "counter", "Warnings and errors the daemon logged since it started.");
	fprintf(f, "fratier_errors_total %llu\n", (unsigned long long) tierctl_get_u64(m, 0, "errors_total"));
	(void) mount;
	if (fclose(f) != 0) {
		free(buf);
		return -ENOMEM;
	}
	*ret = buf;
	return 0;
}

static int metrics_fetch(char **ret_body, void *userdata) {
	TierctlMount *mount = userdata;
	TierctlReply reply;
	TierctlReply rec;
	int r = call(mount, CTL_COMMAND_STATUS, NULL, NULL, 0, NULL, NULL, &reply);
	if (r != 0)
		return -EIO;
	/* Without the recovery answer the rest still serves (the alert on a vanished series says so). */
	bool have_rec = call(mount, CTL_COMMAND_RECOVERY, NULL, NULL, 0, NULL, NULL, &rec) == 0;
	r = metrics_render(mount, &reply.data, have_rec ? &rec.data : NULL, ret_body);
	tierctl_reply_done(&reply);
	if (have_rec)
		tierctl_reply_done(&rec);
	return r;
}

static int run_metrics(TierctlMount *mount, char **args, int n_args) {
	if (arg_listen) {
		log_info("serving http://%s/metrics (Ctrl-C stops)", arg_listen);
		int r = tierctl_http_serve(arg_listen, metrics_fetch, mount, &interrupted);
		if (r < 0) {
			log_error_errno(r, "cannot listen on %s: %m (give ADDR:PORT, e.g. 127.0.0.1:9273)", arg_listen);
			return r == -EINVAL ? TIERCTL_EXIT_USAGE : TIERCTL_EXIT_FAILURE;
		}
		return 0;
	}
	_cleanup_free_ char *body = NULL;
	if (metrics_fetch(&body, mount) < 0)
		return TIERCTL_EXIT_FAILURE;
	fputs(body, stdout);
	return 0;
}

/* ---- command line ---- */

static const Command commands[] = {
	{ "status", "status", "mount, tiers, capacity, queues, throughput, the policy worker and last errors", "", run_status, 0, 0 },
	{ "df", "df", "per tier: capacity, used, free, logical and stored bytes, dedup, compression, reduction", "",
	  run_df, 0, 0 },
	{ "du", "du PATH...", "per path: logical and stored bytes (unique and shared), reduction", "", run_du, 1,
	  CTL_PATHS_MAX },
	{ "ls", "ls [-l] [PATH...]", "per file: logical and stored bytes, tier, state, class", "l", run_ls, 0,
	  CTL_PATHS_MAX },
	{ "report", "report [--by class|day|tier|database|host] [--html FILE]",
	  "logical and stored bytes per class, day, tier or database; per host of the shared tiers (--by host)",
	  "bh", run_report, 0, 0 },
	{ "policy", "policy show", "the per-class settings, migration ages and targets, watermarks and reserve", "", run_policy, 1, 1 },
	{ "gc", "gc", "collect unreferenced chunks now (root or the owner)", "", run_gc, 0, 0 },
	{ "scrub", "scrub [--tier N]", "verify every stored chunk of every tier (or of tier N), list damaged files (root or the owner)", "t",
	  run_scrub, 0, 0 },
	{ "rekey", "rekey --tier N", "seal a tier's data again under the newest key, in the background (root or the owner)",
	  "t", run_rekey, 0, 0 },
	{ "migrate", "migrate [--to TIER] [--dry-run] [FILTERS] [LOG SELECTION] PATH|GLOB...",
	  "move sealed files (raw ones are sealed first) to a lower tier, default tier 1 (root or the owner)", "TDSF",
	  run_migrate, 0, CTL_PATHS_MAX },
	{ "recall", "recall [--dry-run] [FILTERS] [LOG SELECTION] PATH|GLOB...\n"
		    "  recall [--dry-run] --until TIME|SCN [--from TIME|SCN] DB",
	  "bring files back to the hot tier, ahead of a restore; or a database's restore set: the archived logs a "
	  "roll-forward needs, lowest SCN first (root or the owner)", "DSFR", run_recall, 0, CTL_PATHS_MAX },
	{ "recovery", "recovery [DB]",
	  "per database (DB_NAME or DBID) and redo thread: the archived logs held, gaps, duplicates, tiers, and how far "
	  "a roll-forward gets", "", run_recovery, 0, 1 },
	{ "pin", "pin [--dry-run] [FILTERS] [LOG SELECTION] PATH|GLOB...",
	  "keep files on the hot tier: recall them, and no migration moves them (root or the owner)", "DSF", run_pin, 0,
	  CTL_PATHS_MAX },
	{ "unpin", "unpin [FILTERS] [LOG SELECTION] PATH|GLOB...", "let pinned files move again (root or the owner)", "SF",
	  run_unpin, 0, CTL_PATHS_MAX },
	{ "metrics", "metrics [--listen ADDR:PORT]", "Prometheus text exposition, or serve it on /metrics", "L",
	  run_metrics, 0, 0 },
	{ "host", "host list | host retire NAME --tier N [--force]",
	  "the hosts of the shared tiers; retire a host that is gone for good: its name is refused there for good (root)",
	  "tf", run_host, 1, 2 },
};

static const Command *find_command(const char *name) {
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void help(void) {
	printf("usage: tierctl [-m MOUNTPOINT] [--socket PATH] COMMAND [OPTIONS] [ARGS]\n\n"
	       "Reports and maintenance of a fratier mount, through its daemon's control socket.\n\n"
	       "commands:\n");
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		printf("  %-44s %s\n", commands[i].usage, commands[i].summary);
	printf("\noptions (anywhere):\n"
	       "  -m, --mount MOUNTPOINT  the fratier mount (default: the one containing the current directory,\n"
	       "                          or the only one)\n"
	       "      --socket PATH       the control socket (default: DATA_DIR/control.sock of the mount)\n"
	       "      --json              JSON instead of tables\n"
	       "  -b, --bytes             exact byte counts instead of IEC units\n"
	       "  -h, --help              help (of a command, after it)\n"
	       "  -V, --version           version\n\n"
	       "exit status: 0 ok, 1 failed, 2 usage, 3 daemon not running, 4 permission denied,\n"
	       "             5 partial failure (some paths, or damage found), 130 interrupted\n"
	       "See tierctl(1).\n");
}

static void command_help(const Command *c) {
	printf("usage: tierctl [-m MOUNTPOINT] %s [--json] [--bytes]\n\n%s.\n", c->usage, c->summary);
	if (strchr(c->options, 'l'))
		printf("\n  -l, --long        mode, owner, time, unique and shared bytes, tier\n");
	if (strchr(c->options, 'b'))
		printf("\n  --by KEY          class (default), day (of modification, UTC), tier, database, or host (per host\n"
		       "                    of the shared tiers: its objects there, and the files and logical bytes it publishes)\n"
		       "  --html FILE       write a self-contained page with charts to FILE\n");
	if (strchr(c->options, 't') && strchr(c->options, 'f'))
		printf("\n  --tier N          the shared tier (its number) to retire the host from\n"
		       "  --force           retire it even while its lease runs (its daemon is alive: it stops writing to\n"
		       "                    the tier at its next renewal)\n"
		       "\n  host list is the hosts section of tierctl status.\n");
	else if (strchr(c->options, 't'))
		printf("\n  --tier N          only tier N (0 is the hot tier)\n");
	if (strchr(c->options, 'T'))
		printf("\n  --to TIER         the target tier, by number or name (default 1, the first below the hot one)\n");
	if (strchr(c->options, 'D'))
		printf("  --dry-run         list what would move, move nothing\n"
		       "\n  Directories are walked; quoted globs are expanded against the mount.\n");
	if (strchr(c->options, 'F'))
		printf("\n  FILTERS: only the files chosen (by path or log selection) that are also\n"
		       "  --class C         of file class C (archivelog, backuppiece, imagecopy, archivelogbackup, other)\n"
		       "  --older-than AGE  modified more than AGE ago: N with s, m, h or d (e.g. 7d)\n"
		       "  --larger-than SIZE  larger than SIZE: N with K, M, G, T or P (IEC, e.g. 1G)\n");
	if (strchr(c->options, 'S'))
		printf("\n  LOG SELECTION: archived logs by what their headers say (with or instead of paths):\n"
		       "  --thread T        redo thread T\n"
		       "  --sequence A[-B]  log sequences A to B\n"
		       "  --since TIME      logs holding changes at or after TIME\n"
		       "  --until TIME      logs holding changes at or before TIME\n"
		       "                    TIME: YYYY-MM-DD[ HH:MM[:SS]], the database host's local time, or @SECONDS\n");
	if (strchr(c->options, 'R'))
		printf("\n  RESTORE SET: recall --until TIME|SCN [--from TIME|SCN] DB (a DB_NAME or DBID): the archived logs\n"
		       "  a roll-forward from --from (default: as far back as every thread goes without a gap) to --until\n"
		       "  needs, on every thread, recalled lowest SCN first; missing logs are named before anything moves\n"
		       "  (and then nothing moves).  An SCN is digits only; TIME as above, or @SECONDS.\n");
	if (strchr(c->options, 'L'))
		printf("\n  --listen ADDR:PORT  serve http://ADDR:PORT/metrics until interrupted\n");
}

int main(int argc, char **argv) {
	enum { OPT_SOCKET = 0x100, OPT_JSON, OPT_BY, OPT_HTML, OPT_TIER, OPT_LISTEN, OPT_TO, OPT_DRY_RUN, OPT_THREAD,
	       OPT_SEQUENCE, OPT_SINCE, OPT_UNTIL, OPT_CLASS, OPT_OLDER_THAN, OPT_LARGER_THAN, OPT_FROM, OPT_FORCE };
	static const struct option options[] = {
		{ "mount", required_argument, NULL, 'm' },  { "socket", required_argument, NULL, OPT_SOCKET },
		{ "json", no_argument, NULL, OPT_JSON },    { "bytes", no_argument, NULL, 'b' },
		{ "long", no_argument, NULL, 'l' },	    { "by", required_argument, NULL, OPT_BY },
		{ "html", required_argument, NULL, OPT_HTML }, { "tier", required_argument, NULL, OPT_TIER },
		{ "listen", required_argument, NULL, OPT_LISTEN }, { "help", no_argument, NULL, 'h' },
		{ "to", required_argument, NULL, OPT_TO },  { "dry-run", no_argument, NULL, OPT_DRY_RUN },
		{ "thread", required_argument, NULL, OPT_THREAD }, { "sequence", required_argument, NULL, OPT_SEQUENCE },
		{ "since", required_argument, NULL, OPT_SINCE }, { "until", required_argument, NULL, OPT_UNTIL },
		{ "class", required_argument, NULL, OPT_CLASS }, { "older-than", required_argument, NULL, OPT_OLDER_THAN },
		{ "larger-than", required_argument, NULL, OPT_LARGER_THAN }, { "from", required_argument, NULL, OPT_FROM },
		{ "force", no_argument, NULL, OPT_FORCE },
		{ "version", no_argument, NULL, 'V' },	    {},
	};
	const Command *cmd = NULL;
	bool want_help = false;
	char seen[16] = ""; /* command options given, checked against the command's */
	int c;

	log_set_program_name("tierctl");
	while ((c = getopt_long(argc, argv, "m:blhV", options, NULL)) >= 0) {
		switch (c) {
		case 'm':
			arg_mount = optarg;
			break;
		case OPT_SOCKET:
			arg_socket = optarg;
			break;
		case OPT_JSON:
			arg_json = true;
			break;
		case 'b':
			arg_bytes = true;
			break;
		case 'l':
			arg_long = true;
			strcat(seen, strchr(seen, 'l') ? "" : "l");
			break;
		case OPT_BY:
			arg_by = optarg;
			strcat(seen, strchr(seen, 'b') ? "" : "b");
			break;
		case OPT_HTML:
			arg_html = optarg;
			strcat(seen, strchr(seen, 'h') ? "" : "h");
			break;
		case OPT_TIER:
			arg_tier = optarg;
			strcat(seen, strchr(seen, 't') ? "" : "t");
			break;
		case OPT_LISTEN:
			arg_listen = optarg;
			strcat(seen, strchr(seen, 'L') ? "" : "L");
			break;
		case OPT_TO:
			arg_to = optarg;
			strcat(seen, strchr(seen, 'T') ? "" : "T");
			break;
		case OPT_FORCE:
			arg_force = true;
			strcat(seen, strchr(seen, 'f') ? "" : "f");
			break;
		case OPT_DRY_RUN:
			arg_dry_run = true;
			strcat(seen, strchr(seen, 'D') ? "" : "D");
			break;
		case OPT_THREAD:
		case OPT_SEQUENCE:
		case OPT_SINCE:
		case OPT_UNTIL:
			*(c == OPT_THREAD ? &arg_thread : c == OPT_SEQUENCE ? &arg_sequence : c == OPT_SINCE ? &arg_since
													  : &arg_until) = optarg;
			strcat(seen, strchr(seen, 'S') ? "" : "S");
			break;
		case OPT_FROM:
			arg_from = optarg;
			strcat(seen, strchr(seen, 'R') ? "" : "R");
			break;
		case OPT_CLASS:
		case OPT_OLDER_THAN:
		case OPT_LARGER_THAN:
			*(c == OPT_CLASS ? &arg_class : c == OPT_OLDER_THAN ? &arg_older_than : &arg_larger_than) = optarg;
			strcat(seen, strchr(seen, 'F') ? "" : "F");
			break;
		case 'h':
			want_help = true;
			break;
		case 'V':
			printf("tierctl %s\n", PACKAGE_VERSION);
			return 0;
		default:
			log_error("see tierctl --help");
			return TIERCTL_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		cmd = find_command(argv[optind]);
		if (!cmd) {
			log_error("unknown command '%s' (see tierctl --help)", argv[optind]);
			return TIERCTL_EXIT_USAGE;
		}
		optind++;
	}
	if (want_help) {
		if (cmd)
			command_help(cmd);
		else
			help();
		return 0;
	}
	if (!cmd) {
		log_error("no command given (see tierctl --help)");
		return TIERCTL_EXIT_USAGE;
	}
	for (const char *o = seen; *o; o++)
		if (!strchr(cmd->options, *o)) {
			log_error("%s takes no such option (see tierctl %s --help)", cmd->name, cmd->name);
			return TIERCTL_EXIT_USAGE;
		}
	int n_args = argc - optind;
	if (n_args < cmd->min_args || n_args > cmd->max_args) {
		log_error("usage: tierctl %s", cmd->usage);
		return TIERCTL_EXIT_USAGE;
	}
	if (arg_tier) {
		uint64_t t;
		if (ctl_parse_u64(arg_tier, &t) < 0 || t > CTL_TIER_MAX) {
			log_error("--tier takes a tier number from 0 to %u, not '%s'", CTL_TIER_MAX, arg_tier);
			return TIERCTL_EXIT_USAGE;
		}
	}

	/* Ctrl-C interrupts the wait for the daemon (no SA_RESTART), which then stops at a safe point. */
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	(void) sigaction(SIGINT, &sa, NULL);
	(void) sigaction(SIGTERM, &sa, NULL);

	TierctlMount mount;
	bool by_path = n_args > 0 && cmd->max_args > 1 && cmd->run != run_host && !is_restore_set(cmd, argv + optind, n_args);
	int r = tierctl_mount_find(arg_mount, by_path ? argv[optind] : NULL, arg_socket, &mount);
	if (r != 0)
		return r;
	r = cmd->run(&mount, argv + optind, n_args);
	tierctl_mount_done(&mount);
	return r;
}
