/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * maintenance.c — tierctl gc and scrub: a collection of every tier, and a
 * scrub of one tier or of every tier, with progress frames while they run;
 * Ctrl-C (the client leaving) stops them between two containers.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "control/control-internal.h"

/* Compaction's progress, per tier; Ctrl-C (the client leaving) stops it between two containers. */
static int gc_progress(uint64_t done, uint64_t total, void *userdata) {
	Conn *c = userdata;
	if (atomic_load(&c->ctl->stopping) || control_peer_gone(c))
		return -ECANCELED;
	int64_t now = clock_ns(CLOCK_MONOTONIC);
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
	uint32_t failed = 0;
	r = fs_tiers_gc(c->fs, &o, &st, &failed);
	if (r == -ECANCELED)
		return control_fail(c, r, "stopped between two containers: what was collected and compacted stays done");
	const char *failed_name = r < 0 ? tier_set_config(fs_tiers(c->fs), failed)->name : NULL;
	if (r < 0)
		log_warning_errno(r, "Chunk collection of tier %u (%s) asked by tierctl failed: %m", (unsigned) failed,
				  failed_name);
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
	if (q >= 0)
		q = control_add_u64(c, "containers_condemned", st.containers_condemned);
	if (q >= 0)
		q = control_add_u64(c, "containers_waiting", st.containers_waiting);
	if (r < 0)
		return control_fail(c, r, "collection of tier %u (%s) failed: %s (the other tiers were collected; what was "
				    "done before stays done)", (unsigned) failed, failed_name, strerror(-r));
	return q;
}

typedef struct ScrubProgress {
	Conn *c;
	char phase[32]; /* "verify", or "verify tier N" when a scrub covers several tiers */
} ScrubProgress;

static int scrub_progress(const DedupScrubResult *res, uint64_t total, void *userdata) {
	ScrubProgress *p = userdata;
	Conn *c = p->c;
	if (atomic_load(&c->ctl->stopping) || control_peer_gone(c))
		return -ECANCELED;
	int64_t now = clock_ns(CLOCK_MONOTONIC);
	/* The last one of a tier is sent by scrub_tier(), with its final figures. */
	if (now - c->last_progress_ns < CONTROL_PROGRESS_INTERVAL_NS || res->bytes >= total)
		return 0;
	c->last_progress_ns = now;
	int r = control_progress(c, p->phase, res->bytes, total, res->damaged_chunks);
	return r < 0 ? -ECANCELED : 0;
}

static int id_compare(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
	return x < y ? -1 : x > y;
}

/* Damage found so far, by file: the census is taken once, at the first damaged chunk of any tier. */
typedef struct ScrubDamage {
	DedupScrubResult sum;  /* the tiers' figures added up; no ids */
	FileVec files;
	bool census_taken;
	uint8_t *mark;         /* per file of the census: SCRUB_FILE_* */
	uint64_t damaged_files;
} ScrubDamage;

enum { SCRUB_FILE_CLEAN, SCRUB_FILE_DAMAGED, SCRUB_FILE_UNREADABLE };

/* Marks the sealed files whose recipe references one of the chunks this tier's scrub found damaged. */
static int scrub_mark_files(Conn *c, DedupScrubResult *res, ScrubDamage *d) {
	int r;
	if (res->n_damaged == 0)
		return 0;
	if (!d->census_taken) {
		r = control_census(c, &d->files);
		if (r < 0)
			return r;
		d->census_taken = true;
		d->mark = calloc(d->files.n + 1, 1);
		if (!d->mark)
			return -ENOMEM;
	}
	qsort(res->damaged, res->n_damaged, sizeof(uint64_t), id_compare);
	for (size_t i = 0; i < d->files.n; i++) {
		if (d->files.items[i].state != CATALOG_FILE_SEALED || d->mark[i] == SCRUB_FILE_UNREADABLE)
			continue;
		r = dedup_file_references_any(c->reader, d->files.items[i].ino, res->damaged, res->n_damaged);
		if (r == 0)
			continue;
		if (d->mark[i] == SCRUB_FILE_CLEAN)
			d->damaged_files++;
		d->mark[i] = r < 0 ? SCRUB_FILE_UNREADABLE : SCRUB_FILE_DAMAGED;
	}
	return 0;
}

static int scrub_tier(Conn *c, DedupStore *store, uint32_t tier, bool one_of_several, ScrubDamage *d) {
	ScrubProgress p = { .c = c };
	DedupScrubResult res = {};
	if (one_of_several)
		snprintf(p.phase, sizeof(p.phase), "verify tier %u", (unsigned) tier);
	else
		strcpy(p.phase, "verify");
	c->last_progress_ns = 0;
	int r = dedup_store_scrub(store, scrub_progress, &p, &res);
	if (res.damaged_chunks)
		log_error("scrub found %llu damaged chunks in tier %u", (unsigned long long) res.damaged_chunks,
			  (unsigned) tier);
	d->sum.containers += res.containers;
	d->sum.chunks += res.chunks;
	d->sum.bytes += res.bytes;
	d->sum.damaged_chunks += res.damaged_chunks;
	d->sum.damaged_containers += res.damaged_containers;
	if (r >= 0)
		r = control_progress(c, p.phase, res.bytes, res.bytes, res.damaged_chunks);
	if (r >= 0)
		r = scrub_mark_files(c, &res, d);
	dedup_scrub_result_done(&res);
	return r;
}

/* A lower tier whose description is not the one the catalog recorded last. */
typedef struct ScrubDescription {
	uint32_t tier;
	const char *problem;
} ScrubDescription;

/*
 * Checks the description of lower tier t (tier_set_description_check()) and
 * writes a bad one again from the catalog: an older copy put back would
 * otherwise be what a disaster recovery restores.  Returns 1 and *ret if it
 * was bad, 0 if not (or it could not be read for another reason: logged).
 */
static int scrub_description(TierSet *tiers, uint32_t t, ScrubDescription *ret) {
	uint64_t found, recorded;
	int r = tier_set_description_check(tiers, t, &found, &recorded);
	switch (r) {
	case 0:
		return 0;
	case -ESTALE:
		ret->problem = "older than the last one written (replaced by an older copy)";
		break;
	case -ENOENT:
		ret->problem = "missing";
		break;
	case -EBADMSG:
		ret->problem = "damaged, changed, or not this tier's";
		break;
	default:
		log_warning_errno(r, "scrub: the description of tier %u could not be checked: %m", (unsigned) t);
		return 0;
	}
	ret->tier = t;
	log_error("scrub: the description of tier %u is %s (generation %llu, the catalog recorded %llu): "
		  "writing it again from the catalog",
		  (unsigned) t, ret->problem, (unsigned long long) found, (unsigned long long) recorded);
	tier_set_describe_again(tiers, t);
	r = tier_set_describe(tiers, t);
	if (r < 0)
		log_error_errno(r, "scrub: tier %u: the description could not be written again: %m", (unsigned) t);
	return 1;
}

int control_scrub(Conn *c, const CtlRequest *req) {
	TierSet *tiers = fs_tiers(c->fs);
	ScrubDescription bad[CTL_TIER_MAX + 1];
	size_t n_bad = 0;
	uint32_t n_tiers = tier_set_count(tiers);
	uint32_t first = 0, end = n_tiers;
	ScrubDamage d = {};
	uint32_t unreachable[CTL_TIER_MAX + 1];
	size_t n_unreachable = 0;
	int r = 0;

	if (req->has_tier) {
		if (req->tier >= n_tiers)
			return control_fail(c, -ENOENT, "there is no tier %u", (unsigned) req->tier);
		if (!tier_set_store(tiers, req->tier))
			return control_fail(c, -ENXIO, "tier %u is not reachable (see tierctl status)", (unsigned) req->tier);
		first = req->tier;
		end = req->tier + 1;
	}
	if (atomic_exchange(&c->ctl->scrub_running, true))
		return control_fail(c, -EBUSY, "a scrub is already running; wait for it to finish");
	for (uint32_t t = first; r >= 0 && t < end; t++) {
		DedupStore *store = tier_set_store(tiers, t);
		/* Without --tier every tier is verified that can be; the others are named, not passed over in silence. */
		if (!store) {
			log_warning("scrub: tier %u is not reachable, not verified", (unsigned) t);
			unreachable[n_unreachable++] = t;
			continue;
		}
		r = scrub_tier(c, store, t, end - first > 1, &d);
		if (r >= 0 && t > 0 && scrub_description(tiers, t, &bad[n_bad]) > 0)
			n_bad++;
	}
	atomic_store(&c->ctl->scrub_running, false);
	if (r == -ECANCELED)
		r = control_fail(c, r, "scrub stopped (nothing was left half done)");
	else if (r < 0)
		r = control_fail(c, r, "scrub failed: %s", strerror(-r));
	else
		r = control_add_u64(c, "containers", d.sum.containers);
	if (r >= 0)
		r = control_add_u64(c, "chunks", d.sum.chunks);
	if (r >= 0)
		r = control_add_u64(c, "bytes", d.sum.bytes);
	if (r >= 0)
		r = control_add_u64(c, "damaged_chunks", d.sum.damaged_chunks);
	if (r >= 0)
		r = control_add_u64(c, "damaged_containers", d.sum.damaged_containers);
	if (r >= 0)
		r = control_add_u64(c, "damaged_files", d.damaged_files);
	if (r >= 0)
		r = control_add_u64(c, "tiers", end - first - n_unreachable);
	for (size_t i = 0; r >= 0 && i < n_bad; i++) {
		r = control_row(c, "description");
		if (r >= 0)
			r = control_add_u64(c, "tier", bad[i].tier);
		if (r >= 0)
			r = control_add(c, "problem", bad[i].problem);
	}
	for (size_t i = 0; r >= 0 && i < n_unreachable; i++) {
		r = control_row(c, "unreachable");
		if (r >= 0)
			r = control_add_u64(c, "tier", unreachable[i]);
	}
	for (size_t i = 0; r >= 0 && d.mark && i < d.files.n; i++) {
		if (d.mark[i] == SCRUB_FILE_CLEAN)
			continue;
		_cleanup_free_ char *path = NULL;
		uint64_t ino = d.files.items[i].ino;
		r = control_row(c, "damaged");
		if (r >= 0 && control_path_of(c->reader, ino, &path) >= 0)
			r = control_add(c, "path", path);
		if (r >= 0)
			r = control_add_u64(c, "ino", ino);
		if (r >= 0 && d.mark[i] == SCRUB_FILE_UNREADABLE)
			r = control_add(c, "error", "recipe unreadable");
	}
	free(d.files.items);
	free(d.mark);
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
	if (r == -EOPNOTSUPP)
		return control_fail(c, r, "tier %u is shared: other hosts may reference its containers, and rewriting "
				    "them waits for collection across hosts (docs/SHARED.md)", (unsigned) tier);
	if (r < 0)
		return control_fail(c, r, "cannot record the rekey: %s", strerror(-r));
	return control_add_u64(c, "tier", tier);
}
