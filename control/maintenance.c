/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * maintenance.c — tierctl gc and scrub: a collection of every tier, or a
 * scrub of one, with progress frames while they run; Ctrl-C (the client
 * leaving) stops them between two containers.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "control/control-internal.h"

/* Compaction's progress, per tier; Ctrl-C (the client leaving) stops it between two containers. */
static int gc_progress(uint64_t done, uint64_t total, void *userdata) {
	Conn *c = userdata;
	if (atomic_load(&c->ctl->stopping) || control_peer_gone(c))
		return -ECANCELED;
	int64_t now = control_now_ns(CLOCK_MONOTONIC);
	if (now - c->last_progress_ns < CONTROL_PROGRESS_INTERVAL_NS && done > 0 && done < total)
		return 0;
	c->last_progress_ns = now;
	return control_progress(c, "compact", done, total, 0) < 0 ? -ECANCELED : 0;
}

int control_gc(Conn *c) {
	DedupGcOptions o = DEDUP_GC_OPTIONS_DEFAULT;
	DedupGcStats st = {};
	int r = control_progress(c, "collect", 0, 0, 0);
	if (r < 0)
		return r;
	o.progress = gc_progress;
	o.userdata = c;
	c->last_progress_ns = 0;
	r = fs_tiers_gc(c->fs, &o, &st);
	if (r == -ECANCELED)
		return control_fail(c, r, "stopped between two containers: what was collected and compacted stays done");
	if (r < 0)
		log_warning_errno(r, "Chunk collection asked by tierctl failed: %m");
	int q = control_add_u64(c, "chunks_deleted", st.chunks_deleted);
	if (q >= 0)
		q = control_add_u64(c, "containers_deleted", st.containers_deleted);
	if (q >= 0)
		q = control_add_u64(c, "containers_compacted", st.containers_compacted);
	if (q >= 0)
		q = control_add_u64(c, "bytes_copied", st.bytes_copied);
	if (q >= 0)
		q = control_add_u64(c, "bytes_freed", st.bytes_freed);
	if (q >= 0)
		q = control_add_u64(c, "orphans_deleted", st.orphans_deleted);
	if (q >= 0)
		q = control_add_u64(c, "containers_skipped", st.containers_skipped);
	if (r < 0)
		return control_fail(c, r, "collection failed: %s (what was done before stays done)", strerror(-r));
	return q;
}

static int scrub_progress(const DedupScrubResult *res, uint64_t total, void *userdata) {
	Conn *c = userdata;
	if (atomic_load(&c->ctl->stopping) || control_peer_gone(c))
		return -ECANCELED;
	int64_t now = control_now_ns(CLOCK_MONOTONIC);
	/* The last one is sent by control_scrub(), with the final figures. */
	if (now - c->last_progress_ns < CONTROL_PROGRESS_INTERVAL_NS || res->bytes >= total)
		return 0;
	c->last_progress_ns = now;
	int r = control_progress(c, "verify", res->bytes, total, res->damaged_chunks);
	return r < 0 ? -ECANCELED : 0;
}

static int id_compare(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
	return x < y ? -1 : x > y;
}

int control_scrub(Conn *c, const CtlRequest *req) {
	DedupScrubResult res = {};
	FileVec files = {};
	uint64_t damaged_files = 0;
	int r;

	uint32_t tier = req->has_tier ? req->tier : 0;
	DedupStore *store = tier_set_store(fs_tiers(c->fs), tier);
	if (!store)
		return control_fail(c, tier < tier_set_count(fs_tiers(c->fs)) ? -ENXIO : -ENOENT,
				 tier < tier_set_count(fs_tiers(c->fs)) ? "tier %u is not reachable (see tierctl status)" : "there is no tier %u",
				 (unsigned) tier);
	if (atomic_exchange(&c->ctl->scrub_running, true))
		return control_fail(c, -EBUSY, "a scrub is already running; wait for it to finish");
	c->last_progress_ns = 0;
	r = dedup_store_scrub(store, scrub_progress, c, &res);
	atomic_store(&c->ctl->scrub_running, false);
	if (res.damaged_chunks)
		log_error("scrub found %llu damaged chunks in tier %u", (unsigned long long) res.damaged_chunks,
			  (unsigned) tier);
	if (r == -ECANCELED) {
		dedup_scrub_result_done(&res);
		return control_fail(c, r, "scrub stopped (nothing was left half done)");
	}
	if (r < 0) {
		dedup_scrub_result_done(&res);
		return control_fail(c, r, "scrub failed: %s", strerror(-r));
	}
	r = control_progress(c, "verify", res.bytes, res.bytes, res.damaged_chunks);

	/* Which files the damage reaches: counted first, since a reply's own fields precede its rows. */
	_cleanup_free_ uint64_t *hit = NULL;
	_cleanup_free_ bool *unreadable = NULL;
	if (r >= 0 && res.n_damaged > 0) {
		qsort(res.damaged, res.n_damaged, sizeof(uint64_t), id_compare);
		r = control_census(c, &files);
		hit = r >= 0 ? calloc(files.n + 1, sizeof(uint64_t)) : NULL;
		unreadable = r >= 0 ? calloc(files.n + 1, sizeof(bool)) : NULL;
		if (r >= 0 && (!hit || !unreadable))
			r = -ENOMEM;
		for (size_t i = 0; r >= 0 && i < files.n; i++) {
			if (files.items[i].state != CATALOG_FILE_SEALED)
				continue;
			int q = dedup_file_references_any(c->reader, files.items[i].ino, res.damaged, res.n_damaged);
			if (q == 0)
				continue;
			unreadable[damaged_files] = q < 0;
			hit[damaged_files++] = files.items[i].ino;
		}
	}
	if (r >= 0)
		r = control_add_u64(c, "containers", res.containers);
	if (r >= 0)
		r = control_add_u64(c, "chunks", res.chunks);
	if (r >= 0)
		r = control_add_u64(c, "bytes", res.bytes);
	if (r >= 0)
		r = control_add_u64(c, "damaged_chunks", res.damaged_chunks);
	if (r >= 0)
		r = control_add_u64(c, "damaged_containers", res.damaged_containers);
	if (r >= 0)
		r = control_add_u64(c, "damaged_files", damaged_files);
	for (size_t i = 0; r >= 0 && i < damaged_files; i++) {
		_cleanup_free_ char *path = NULL;
		r = control_row(c, "damaged");
		if (r >= 0 && control_path_of(c->reader, hit[i], &path) >= 0)
			r = control_add(c, "path", path);
		if (r >= 0)
			r = control_add_u64(c, "ino", hit[i]);
		if (r >= 0 && unreadable[i])
			r = control_add(c, "error", "recipe unreadable");
	}
	free(files.items);
	dedup_scrub_result_done(&res);
	return r;
}

int control_rekey(Conn *c, const CtlRequest *req) {
	uint32_t tier = req->tier;
	int r = fs_rekey_request(c->fs, tier);
	if (r == -ENOENT)
		return control_fail(c, r, "there is no tier %u", (unsigned) tier);
	if (r == -ENXIO)
		return control_fail(c, r, "tier %u is not reachable (see tierctl status)", (unsigned) tier);
	if (r == -ENOKEY)
		return control_fail(c, r, "the mount has no key: nothing is sealed, nothing to rekey");
	if (r < 0)
		return control_fail(c, r, "cannot record the rekey: %s", strerror(-r));
	return control_add_u64(c, "tier", tier);
}
