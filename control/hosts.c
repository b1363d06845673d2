/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * hosts.c — the other hosts of a shared tier (docs/SHARED.md), as this
 * daemon sees them through the tier: their records in tierctl status,
 * tierctl host retire, and tierctl report --by host.
 *
 * Everything here reads the shared tier through tier/ (tier_set_hosts(),
 * tier_set_usage(), tier_set_summary()), within the tier backend's bounded
 * wait, and nothing here touches the catalog: another host's files are in
 * its own catalog only, and reach this one through its published summary.
 *
 * Invariants:
 *  1. A host is retired only by root, never this daemon's own name, and
 *     while its lease runs only when forced (tier_shared_retire()).
 *  2. A retirement is reported done only once the record still says
 *     retired one renewal period after it was written: a renewal of the
 *     host that read its record before the retirement landed would have
 *     written it back live by then, and is retired again (up to
 *     RETIRE_ATTEMPTS times) or reported.
 *  3. The rows of report --by host add up to every object listed under h/
 *     and hosts/ on the tier: objects of no host get a row of their own;
 *     each row's bytes are its unique and its shared bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control/control-internal.h"

#define RETIRE_ATTEMPTS 3

static bool tier_is_shared(Conn *c, uint32_t n) {
	const ConfigTier *t = tier_set_config(fs_tiers(c->fs), n);
	return t && t->shared;
}

int control_shared_hosts(Conn *c) {
	TierSet *ts = fs_tiers(c->fs);
	const char *me = tier_set_host(ts);
	int r = 0;

	for (uint32_t n = 1; r >= 0 && n < tier_set_count(ts); n++) {
		_cleanup_free_ TierSharedHost *hosts = NULL;
		size_t n_hosts = 0;
		uint64_t now = (uint64_t) time(NULL);
		if (!tier_is_shared(c, n) || !tier_set_store(ts, n))
			continue;
		int q = tier_set_hosts(ts, n, now, &hosts, &n_hosts);
		if (q < 0) {
			r = control_row(c, "host_error");
			if (r >= 0)
				r = control_add_u64(c, "tier", n);
			if (r >= 0)
				r = control_add(c, "message", strerror(-q));
			continue;
		}
		for (size_t i = 0; r >= 0 && i < n_hosts; i++) {
			const TierSharedHost *h = &hosts[i];
			r = control_row(c, "host");
			if (r >= 0)
				r = control_add_u64(c, "tier", n);
			if (r >= 0)
				r = control_add(c, "tier_name", tier_set_config(ts, n)->name);
			if (r >= 0)
				r = control_add(c, "host", h->host);
			if (r >= 0)
				r = control_add(c, "state", tier_host_status_to_string(h->status));
			if (r >= 0 && h->status != TIER_HOST_STATUS_DAMAGED)
				r = control_add_u64(c, "lease_until", h->record.lease_until);
			if (r >= 0 && h->status == TIER_HOST_STATUS_LIVE)
				r = control_add_u64(c, "lease_left", h->record.lease_until - now);
			if (r >= 0 && h->status == TIER_HOST_STATUS_EXPIRED)
				r = control_add_u64(c, "expired_for", now - h->record.lease_until);
			if (r >= 0)
				r = control_add(c, "this", me && strcmp(me, h->host) == 0 ? "yes" : "no");
		}
	}
	return r;
}

/* Sleeps s seconds, a little at a time: false when the client left or the daemon stops meanwhile. */
static bool wait_for(Conn *c, uint64_t s) {
	for (uint64_t ms = 0; ms < s * 1000; ms += 100) {
		if (atomic_load(&c->ctl->stopping) || control_peer_gone(c))
			return false;
		(void) usleep(100 * 1000);
	}
	return true;
}

int control_host_retire(Conn *c, const CtlRequest *req) {
	TierSet *ts = fs_tiers(c->fs);
	uint32_t n = req->tier;
	const ConfigTier *t = tier_set_config(ts, n);
	TierHostRecord before = {}, now_rec;
	int r;

	/* Invariant 1 (root alone: server.c authorize()). */
	if (!t || !t->shared)
		return control_fail(c, -EINVAL, "tier %u is not a shared tier", (unsigned) n);
	if (!tier_set_store(ts, n))
		return control_fail(c, -ENXIO, "shared tier %u (%s) is not open on this host: %s", (unsigned) n, t->name,
				    tier_set_error(ts, n) ?: "not reachable");
	if (strcmp(req->host, tier_set_host(ts)) == 0)
		return control_fail(c, -EINVAL, "'%s' is this daemon's own name: stop this daemon, then retire it from "
						 "another host", req->host);

	for (int attempt = 0; attempt < RETIRE_ATTEMPTS; attempt++) {
		uint64_t now = (uint64_t) time(NULL);
		r = tier_set_retire(ts, n, req->host, req->force, &before);
		if (r == 1) {
			r = control_add(c, "host", req->host);
			if (r >= 0)
				r = control_add_u64(c, "tier", n);
			if (r >= 0)
				r = control_add(c, "result", "already");
			return r;
		}
		if (r == -ENOENT)
			return control_fail(c, r, "no host '%s' on shared tier %u (%s)", req->host, (unsigned) n, t->name);
		if (r == -EBUSY)
			return control_fail(c, r, "host '%s' is live on shared tier %u (%s): its lease runs %llu s more; "
						  "stop its daemon and wait for the lease to end, or retire it with --force "
						  "(its daemon then stops writing to the tier at its next renewal)",
					    req->host, (unsigned) n, t->name,
					    (unsigned long long) (before.lease_until > now ? before.lease_until - now : 0));
		if (r == -EBADMSG)
			return control_fail(c, r, "the record of host '%s' on shared tier %u (%s) is damaged: --force "
						  "replaces it with a retired one",
					    req->host, (unsigned) n, t->name);
		if (r < 0 && r != -EAGAIN)
			return control_fail(c, r, "cannot retire host '%s' on shared tier %u (%s): %s", req->host,
					    (unsigned) n, t->name, strerror(-r));
		/* Invariant 2: a renewal under way may still land; the host's renewals come every interval at most. */
		if (!wait_for(c, tier_set_renew_interval(ts) + 1))
			return control_fail(c, -ECANCELED, "interrupted: host '%s' was written retired, not confirmed",
					    req->host);
		r = tier_set_host_record(ts, n, req->host, &now_rec);
		if (r < 0 && r != -EBADMSG)
			return control_fail(c, r, "cannot read back the record of host '%s': %s", req->host, strerror(-r));
		if (r == 0 && now_rec.state == TIER_HOST_RETIRED) {
			r = control_add(c, "host", req->host);
			if (r >= 0)
				r = control_add_u64(c, "tier", n);
			if (r >= 0)
				r = control_add(c, "result", "retired");
			if (r >= 0)
				r = control_add_u64(c, "lease_until", before.lease_until);
			return r;
		}
	}
	return control_fail(c, -EAGAIN, "host '%s' kept renewing its lease over the retirement: it is alive; stop its "
					"daemon first", req->host);
}

/* ---- report --by host ---- */

static int add_usage_row(Conn *c, uint32_t n, const TierSharedUsage *u, const TierSharedHost *hosts, size_t n_hosts,
			 const char *me) {
	TierSet *ts = fs_tiers(c->fs);
	TierHostSummary sum;
	const char *state = u->host[0] ? "unregistered" : "none";

	for (size_t i = 0; i < n_hosts; i++)
		if (strcmp(hosts[i].host, u->host) == 0)
			state = tier_host_status_to_string(hosts[i].status);
	int r = control_row(c, "host");
	if (r >= 0)
		r = control_add_u64(c, "tier", n);
	if (r >= 0)
		r = control_add(c, "tier_name", tier_set_config(ts, n)->name);
	if (r >= 0)
		r = control_add(c, "host", u->host);
	if (r >= 0)
		r = control_add(c, "state", state);
	if (r >= 0)
		r = control_add(c, "this", me && strcmp(me, u->host) == 0 ? "yes" : "no");
	if (r >= 0)
		r = control_add_u64(c, "objects", u->objects);
	if (r >= 0)
		r = control_add_u64(c, "bytes", u->bytes);
	/* Invariant 3 holds per column: unique + shared = bytes, row by row. */
	if (r >= 0)
		r = control_add_u64(c, "unique", u->bytes - u->shared);
	if (r >= 0)
		r = control_add_u64(c, "shared", u->shared);
	if (r < 0 || !u->host[0])
		return r;
	int q = tier_set_summary(ts, n, u->host, &sum);
	if (q < 0)
		return control_add(c, "summary", q == -ENOENT ? "none" : q == -EBADMSG ? "damaged" : strerror(-q));
	r = control_add(c, "summary", "yes");
	if (r >= 0)
		r = control_add_u64(c, "summary_time", sum.updated);
	if (r >= 0)
		r = control_add_u64(c, "files", sum.files);
	if (r >= 0)
		r = control_add_u64(c, "logical", sum.logical);
	if (r >= 0)
		r = control_add_u64(c, "stored", sum.stored);
	/* A summary of version 1 (a daemon before foreign chunks were counted) says nothing of them. */
	if (r >= 0 && sum.has_foreign)
		r = control_add_u64(c, "foreign_logical", sum.foreign_logical);
	if (r >= 0 && sum.has_foreign)
		r = control_add_u64(c, "foreign_stored", sum.foreign_stored);
	return r;
}

int control_report_hosts(Conn *c) {
	TierSet *ts = fs_tiers(c->fs);
	const char *me = tier_set_host(ts);
	bool any = false;
	int r = control_add(c, "by", "host");

	for (uint32_t n = 1; r >= 0 && n < tier_set_count(ts); n++) {
		_cleanup_free_ TierSharedUsage *usage = NULL;
		_cleanup_free_ TierSharedHost *hosts = NULL;
		size_t n_usage = 0, n_hosts = 0;
		if (!tier_is_shared(c, n))
			continue;
		any = true;
		if (!tier_set_store(ts, n))
			return control_fail(c, -ENXIO, "shared tier %u (%s) is not open on this host: %s", (unsigned) n,
					    tier_set_config(ts, n)->name, tier_set_error(ts, n) ?: "not reachable");
		int q = tier_set_hosts(ts, n, (uint64_t) time(NULL), &hosts, &n_hosts);
		if (q >= 0)
			q = tier_set_usage(ts, n, &usage, &n_usage);
		if (q < 0)
			return control_fail(c, q, "cannot list shared tier %u (%s): %s", (unsigned) n,
					    tier_set_config(ts, n)->name, strerror(-q));
		/* A host with a record and nothing else still gets its row (usage lists its record, so it has one). */
		for (size_t i = 0; r >= 0 && i < n_usage; i++)
			r = add_usage_row(c, n, &usage[i], hosts, n_hosts, me);
	}
	if (r >= 0 && !any)
		return control_fail(c, -ENXIO, "no tier of this mount is shared: report --by host is about shared tiers");
	return r;
}
