/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * report-status.c — tierctl status, df and policy show: the daemon, its
 * tiers and its settings, as they are now.  Read through the connection's
 * own catalog reader (server.c, invariant 1).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/macros.h"
#include "control/control-internal.h"
#include "tier/backend-nfs.h"

/* ---- tiers ---- */

static int add_tier_fields(Conn *c, uint32_t n, const ConfigTier *t, uint64_t used, uint64_t *ret_free) {
	DedupBackend *backend = tier_set_backend(fs_tiers(c->fs), n);
	const char *error = tier_set_error(fs_tiers(c->fs), n);
	DedupBackendStatfs sf = {};
	/* Asked of the tier's own backend, so an NFS tier answers for its export (within its bounded wait). */
	bool reachable = backend && dedup_backend_statfs(backend, &sf) >= 0;
	uint64_t fs_size = reachable ? sf.total : 0;
	uint64_t fs_avail = reachable ? sf.avail : 0;
	uint64_t capacity = t->capacity ? t->capacity : fs_size;
	uint64_t free_bytes = fs_avail > t->reserve ? fs_avail - t->reserve : 0;
	if (t->capacity)
		free_bytes = MIN(free_bytes, t->capacity > used ? t->capacity - used : 0);
	int r = control_add_u64(c, "tier", n);
	if (r >= 0)
		r = control_add(c, "name", t->name);
	if (r >= 0)
		r = control_add(c, "role", tier_role_to_string(t->role));
	if (r >= 0)
		r = control_add(c, "backend", tier_backend_to_string(t->backend));
	if (r >= 0)
		r = control_add(c, "path", t->path);
	if (r >= 0)
		r = control_add(c, "shared", t->shared ? "yes" : "no");
	if (r >= 0)
		r = control_add(c, "encrypt", fs_tier_encrypts(c->fs, n) ? "yes" : "no");
	if (r >= 0)
		r = control_add(c, "spill", fs_tier_takes_raw(c->fs, n) ? "yes" : "no");
	if (r >= 0 && t->shared)
		r = control_add(c, "host", tier_set_host(fs_tiers(c->fs)) ?: "");
	if (r >= 0 && tier_set_fenced(fs_tiers(c->fs), n))
		r = control_add(c, "fenced", "yes");
	if (r >= 0)
		r = control_add(c, "reachable", reachable ? "yes" : "no");
	if (r >= 0 && error)
		r = control_add(c, "error", error);
	if (r >= 0)
		r = control_add_u64(c, "capacity", capacity);
	if (r >= 0)
		r = control_add_u64(c, "fs_size", fs_size);
	if (r >= 0)
		r = control_add_u64(c, "fs_avail", fs_avail);
	if (r >= 0)
		r = control_add_u64(c, "reserve", t->reserve);
	if (r >= 0)
		r = control_add_u64(c, "used", used);
	if (r >= 0)
		r = control_add_u64(c, "free", free_bytes);
	/* The decompressed regions kept for readers: memory the daemon holds for this tier, bounded. */
	DedupStore *store = tier_set_store(fs_tiers(c->fs), n);
	if (r >= 0 && store) {
		DedupRegionCacheStats cs;
		dedup_store_cache_stats(store, &cs);
		r = control_add_u64(c, "region_cache_bytes", cs.bytes);
		if (r >= 0)
			r = control_add_u64(c, "region_cache_max", cs.max_bytes);
		if (r >= 0)
			r = control_add_u64(c, "region_cache_hits", cs.hits);
		if (r >= 0)
			r = control_add_u64(c, "region_cache_misses", cs.misses);
		if (r >= 0)
			r = control_add_u64(c, "region_cache_loads", cs.loads);
		/* What crossed to the tier's storage since start, and global dedup on a shared tier. */
		DedupGlobalStats gs;
		dedup_store_global_stats(store, &gs);
		if (r >= 0)
			r = control_add_u64(c, "bytes_sent", gs.bytes_sent);
		if (r >= 0 && gs.shared) {
			r = control_add_u64(c, "global_segments_published", gs.segments_published);
			if (r >= 0)
				r = control_add_u64(c, "global_chunks_unpublished", gs.chunks_unpublished);
			if (r >= 0)
				r = control_add_u64(c, "global_hosts", gs.hosts);
			if (r >= 0)
				r = control_add_u64(c, "global_segments_loaded", gs.segments_loaded);
			if (r >= 0)
				r = control_add_u64(c, "global_segments_other_key", gs.segments_other_key);
			if (r >= 0)
				r = control_add_u64(c, "global_segments_bad", gs.segments_bad);
			if (r >= 0)
				r = control_add_u64(c, "global_segments_over_bound", gs.segments_over_bound);
			if (r >= 0)
				r = control_add_u64(c, "global_entries", gs.entries);
			if (r >= 0)
				r = control_add_u64(c, "global_memory", gs.memory_bytes);
			if (r >= 0)
				r = control_add_u64(c, "global_foreign_hits", gs.foreign_hits);
			if (r >= 0)
				r = control_add_u64(c, "global_foreign_bytes", gs.foreign_bytes);
			if (r >= 0)
				r = control_add_u64(c, "global_foreign_containers", gs.foreign_containers);
			if (r >= 0)
				r = control_add_u64(c, "global_foreign_refused", gs.foreign_refused);
			if (r >= 0)
				r = control_add_u64(c, "global_condemnations_bad", gs.condemnations_bad);
			if (r >= 0)
				r = control_add_u64(c, "global_condemned_waiting", gs.condemned_waiting);
			if (r >= 0)
				r = control_add(c, "global_blocked_by", gs.blocked_by);
		}
	}
	if (r >= 0 && t->backend == TIER_BACKEND_NFS && backend) {
		TierNfsStats ns;
		/* The export's connections: a shared tier's backend is only this host's view of them. */
		tier_backend_nfs_stats(tier_set_root(fs_tiers(c->fs), n), &ns);
		r = control_add_u64(c, "nfs_rpcs", ns.rpcs);
		if (r >= 0)
			r = control_add_u64(c, "nfs_rpc_us", ns.rpc_ns / 1000);
		if (r >= 0)
			r = control_add_u64(c, "nfs_rpc_failures", ns.failures);
	}
	if (ret_free)
		*ret_free = free_bytes;
	return r;
}

typedef struct ContainerSums {
	uint64_t containers, stored, live;
} ContainerSums;

static int sum_container(const CatalogContainer *ct, void *userdata) {
	ContainerSums *s = userdata;
	s->containers++;
	s->stored += ct->size;
	s->live += ct->live_bytes;
	return 0;
}

typedef struct ChunkSums {
	uint64_t chunks, dead, live_plain, referenced;
} ChunkSums;

static int sum_chunk(const CatalogChunk *ch, void *userdata) {
	ChunkSums *s = userdata;
	s->chunks++;
	if (ch->refs == 0)
		s->dead++;
	else
		s->live_plain += ch->plain_size;
	s->referenced += (uint64_t) ch->plain_size * ch->refs;
	return 0;
}

static int count_dead(const CatalogChunk *ch, void *userdata) {
	(*(uint64_t *) userdata)++;
	return 0;
}

/* ---- status and df ---- */

static size_t tier_count(const Fs *fs) {
	return fs_config(fs)->n_tiers;
}

static int add_df_rows(Conn *c, const FileVec *files) {
	int r = 0;
	for (uint32_t n = 0; r >= 0 && n < tier_count(c->fs); n++) {
		const ConfigTier *t = tier_set_config(fs_tiers(c->fs), n);
		ContainerSums cs = {};
		ChunkSums ks = {};
		uint64_t logical = 0, raw = 0, nfiles = 0;
		if (!t)
			break;
		r = catalog_containers_foreach(c->reader, n, sum_container, &cs);
		if (r >= 0)
			r = catalog_chunks_foreach(c->reader, n, sum_chunk, &ks);
		if (r < 0)
			return control_fail(c, r, "cannot read the chunk index: %s", strerror(-r));
		for (size_t i = 0; i < files->n; i++) {
			if (files->items[i].tier != n)
				continue;
			nfiles++;
			logical += files->items[i].size;
			raw += files->items[i].raw_bytes;
		}
		r = control_row(c, "tier");
		if (r >= 0)
			r = add_tier_fields(c, n, t, cs.stored + raw, NULL);
		if (r >= 0)
			r = control_add_u64(c, "files", nfiles);
		if (r >= 0)
			r = control_add_u64(c, "logical", logical);
		if (r >= 0)
			r = control_add_u64(c, "stored", cs.stored);
		if (r >= 0)
			r = control_add_u64(c, "raw", raw);
		if (r >= 0)
			r = control_add_u64(c, "containers", cs.containers);
		if (r >= 0)
			r = control_add_u64(c, "live", cs.live);
		if (r >= 0)
			r = control_add_u64(c, "live_plain", ks.live_plain);
		if (r >= 0)
			r = control_add_u64(c, "referenced", ks.referenced);
		if (r >= 0)
			r = control_add_u64(c, "chunks", ks.chunks);
		if (r >= 0)
			r = control_add_u64(c, "dead_chunks", ks.dead);
	}
	return r;
}

int control_df(Conn *c) {
	FileVec files = {};
	int r = control_census(c, &files);
	if (r >= 0)
		r = add_df_rows(c, &files);
	free(files.items);
	return r;
}

static void throughput(Control *ctl, bool *ret_known, uint64_t *ret_sealed, uint64_t *ret_stored) {
	pthread_mutex_lock(&ctl->lock);
	const Sample *a = &ctl->samples[0], *b = &ctl->samples[ctl->n_samples ? ctl->n_samples - 1 : 0];
	double dt = (double) (b->t_ns - a->t_ns) / 1e9;
	*ret_known = ctl->n_samples >= 2 && dt > 0;
	if (*ret_known) {
		/* Net growth: deletions meanwhile count against it, and it never goes below zero. */
		*ret_sealed = b->sealed_bytes > a->sealed_bytes ? (uint64_t) ((double) (b->sealed_bytes - a->sealed_bytes) / dt) : 0;
		*ret_stored = b->stored_bytes > a->stored_bytes ? (uint64_t) ((double) (b->stored_bytes - a->stored_bytes) / dt) : 0;
	}
	pthread_mutex_unlock(&ctl->lock);
}

static int add_policy_status(Conn *c) {
	FsPolicyStatus ps;
	_cleanup_free_ char *path = NULL;

	FsSettings set;
	fs_policy_status_get(c->fs, &ps);
	fs_settings_get(c->fs, &set);
	/* A file deleted or renamed meanwhile has no path to show: its number will do. */
	if (ps.moving_ino && control_path_of(c->reader, ps.moving_ino, &path) < 0)
		path = NULL;
	int r = control_add(c, "policy_state", !ps.running ? "off" : ps.moving_ino ? "moving" : "idle");
	if (r >= 0 && ps.moving_ino)
		r = control_add_u64(c, "policy_inode", ps.moving_ino);
	if (r >= 0 && path)
		r = control_add(c, "policy_file", path);
	if (r >= 0 && ps.reason)
		r = control_add(c, "policy_reason", ps.reason);
	if (r >= 0 && ps.last_run > 0)
		r = control_add_i64(c, "policy_last_run", ps.last_run);
	if (r >= 0)
		r = control_add_i64(c, "policy_next_run", ps.next_run);
	if (r >= 0)
		r = control_add_u64(c, "policy_interval", set.policy_interval_s);
	if (r >= 0)
		r = control_add_u64(c, "policy_files_moved", ps.files_moved);
	if (r >= 0)
		r = control_add_u64(c, "policy_bytes_moved", ps.bytes_moved);
	if (r >= 0)
		r = control_add_u64(c, "policy_failed", ps.failed);
	return r;
}

/* What the throttle did since the mount (fs/throttle.h): per kind of work, units busy and idle, waits and their time. */
static int add_throttle_status(Conn *c) {
	FsThrottle *t = fs_throttle(c->fs);
	int r = control_add_u64(c, "background_share", t->share);
	if (r >= 0)
		r = control_add(c, "foreground_busy", fs_throttle_foreground_is_busy(t) ? "yes" : "no");
	if (r >= 0)
		r = control_add(c, "foreground_disk", fs_throttle_foreground_is_on_disk(t) ? "yes" : "no");
	for (int k = 0; r >= 0 && k < _FS_THROTTLE_KIND_MAX; k++) {
		const FsThrottleCounters *n = &t->counters[k];
		const char *kind = fs_throttle_kind_to_string((FsThrottleKind) k);
		char key[64];
		snprintf(key, sizeof(key), "throttle_%s_busy", kind);
		r = control_add_u64(c, key, atomic_load(&n->busy_units));
		snprintf(key, sizeof(key), "throttle_%s_busy_cpu", kind);
		if (r >= 0)
			r = control_add_u64(c, key, atomic_load(&n->busy_cpu));
		snprintf(key, sizeof(key), "throttle_%s_idle", kind);
		if (r >= 0)
			r = control_add_u64(c, key, atomic_load(&n->idle_units));
		snprintf(key, sizeof(key), "throttle_%s_waits", kind);
		if (r >= 0)
			r = control_add_u64(c, key, atomic_load(&n->waits));
		snprintf(key, sizeof(key), "throttle_%s_wait_us", kind);
		if (r >= 0)
			r = control_add_u64(c, key, atomic_load(&n->wait_ns) / 1000);
	}
	return r;
}

/* The catalog lock's waits and hand-overs, the vacuum's progress and the reserve (catalog/catalog.h, CatalogStats). */
static int add_catalog_status(Conn *c) {
	CatalogStats st;
	catalog_stats_get(fs_catalog(c->fs), &st);
	int r = control_add_u64(c, "catalog_lock_waits", st.lock_waits);
	if (r >= 0)
		r = control_add_u64(c, "catalog_lock_yields", st.lock_yields);
	if (r >= 0)
		r = control_add_u64(c, "catalog_vacuum_calls", st.vacuum_calls);
	if (r >= 0)
		r = control_add_u64(c, "catalog_vacuum_steps", st.vacuum_steps);
	if (r >= 0)
		r = control_add_u64(c, "catalog_vacuum_pages", st.vacuum_pages);
	if (r >= 0)
		r = control_add_u64(c, "catalog_vacuum_cut", st.vacuum_cut);
	if (r >= 0)
		r = control_add_u64(c, "catalog_vacuum_left", st.vacuum_left);
	if (r >= 0)
		r = control_add_u64(c, "catalog_reserve_size", st.reserve_want);
	if (r >= 0)
		r = control_add_u64(c, "catalog_reserve_held", st.reserve_held);
	if (r >= 0)
		r = control_add_u64(c, "catalog_reserve_releases", st.reserve_releases);
	return r;
}

static int collect_raw(uint64_t ino, void *userdata) {
	FileVec *v = userdata;
	if (v->n == v->cap) {
		size_t cap = MAX(v->cap * 2, (size_t) 64);
		FileRow *q = reallocarray(v->items, cap, sizeof(*q));
		if (!q)
			return -ENOMEM;
		v->items = q;
		v->cap = cap;
	}
	v->items[v->n++] = (FileRow) { .ino = ino };
	return 0;
}

/*
 * Seconds since the last change of the oldest raw file of a class that
 * seals (passthrough files stay raw for good), by its staging file (the
 * catalog's mtime of a raw file is advisory): what the alert on the seal
 * backlog watches.  0 when nothing waits, or when it cannot be told.
 */
static uint64_t seal_backlog(Conn *c) {
	FileVec raw = {};
	int64_t oldest = 0;
	/* The catalog is locked during the walk: collect first, look the inodes up after. */
	int r = catalog_files_foreach_state(c->reader, CATALOG_FILE_RAW, collect_raw, &raw);
	for (size_t i = 0; r >= 0 && i < raw.n; i++) {
		CatalogInode ci;
		if (catalog_inode_get(c->reader, raw.items[i].ino, &ci) < 0 || ci.nlink == 0 ||
		    !tier_class_is_sealed((TierFileClass) ci.file_class))
			continue;
		int64_t mtime = ci.mtime_ns;
		uint64_t size = ci.size, blocks = 0;
		control_raw_fill(c->fs, ci.tier, ci.ino, &size, &blocks, &mtime);
		if (oldest == 0 || mtime < oldest)
			oldest = mtime;
	}
	free(raw.items);
	int64_t now = clock_ns(CLOCK_REALTIME);
	return r >= 0 && oldest > 0 && now > oldest ? (uint64_t) ((now - oldest) / 1000000000) : 0;
}

/* Reads of sealed files since the mount; the rate is over the time such reads were in progress. */
static int add_restore_status(Conn *c, const FsRestoreStatus *st) {
	int r = control_add_u64(c, "restore_bytes", st->bytes);
	if (r >= 0 && st->busy_ns > 0)
		r = control_add_u64(c, "restore_rate", (uint64_t) ((double) st->bytes * 1e9 / (double) st->busy_ns));
	if (r >= 0)
		r = control_add_u64(c, "readahead_hits", st->hits);
	if (r >= 0)
		r = control_add_u64(c, "readahead_waits", st->waits);
	if (r >= 0)
		r = control_add_u64(c, "readahead_misses", st->misses);
	return r;
}

typedef struct KeyUse {
	uint32_t tier;
	bool keyed;
	uint8_t key_id[DEDUP_KEY_ID_SIZE];
	uint64_t containers, bytes;
} KeyUse;

typedef struct KeyUses {
	KeyUse *items;
	size_t n, cap;
} KeyUses;

/* Runs under the catalog's lock: collects, the reply is sent after. */
static int collect_key_use(uint32_t tier, const uint8_t *key_id, uint64_t containers, uint64_t bytes, void *userdata) {
	KeyUses *v = userdata;
	if (v->n == v->cap) {
		size_t cap = MAX(v->cap * 2, (size_t) 16);
		KeyUse *p = realloc(v->items, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		v->items = p;
		v->cap = cap;
	}
	KeyUse *u = &v->items[v->n++];
	*u = (KeyUse) { .tier = tier, .keyed = key_id != NULL, .containers = containers, .bytes = bytes };
	if (key_id)
		memcpy(u->key_id, key_id, sizeof(u->key_id));
	return 0;
}

/*
 * Per tier and key: the containers and bytes sealed under it ("none": not
 * sealed), adding up to the tier's stored bytes; the rekeys asked for, and
 * the one running.
 */
static int add_key_status(Conn *c) {
	FsRekeyStatus rs;
	KeyUses v = {};
	int r = catalog_key_usage_foreach(c->reader, collect_key_use, &v);
	if (r < 0) {
		free(v.items);
		return control_fail(c, r, "cannot read the keys in use: %s", strerror(-r));
	}
	for (size_t i = 0; r >= 0 && i < v.n; i++) {
		char id[DEDUP_KEY_ID_STRING_MAX];
		r = control_row(c, "key");
		if (r >= 0)
			r = control_add_u64(c, "tier", v.items[i].tier);
		if (r >= 0)
			r = control_add(c, "key_id", v.items[i].keyed ? dedup_key_id_to_string(v.items[i].key_id, id) : "none");
		if (r >= 0)
			r = control_add_u64(c, "containers", v.items[i].containers);
		if (r >= 0)
			r = control_add_u64(c, "bytes", v.items[i].bytes);
	}
	free(v.items);
	fs_rekey_status_get(c->fs, &rs);
	for (uint32_t n = 0; r >= 0 && n < tier_set_count(fs_tiers(c->fs)); n++) {
		int q = catalog_rekey_is_requested(c->reader, n);
		if (q <= 0) {
			r = q;
			continue;
		}
		bool running = rs.running && rs.tier == n;
		r = control_row(c, "rekey");
		if (r >= 0)
			r = control_add_u64(c, "tier", n);
		if (r >= 0)
			r = control_add(c, "state", running ? "running" : "waiting");
		if (r >= 0 && running)
			r = control_add_u64(c, "done", rs.done);
		if (r >= 0 && running)
			r = control_add_u64(c, "total", rs.total);
	}
	return r;
}

int control_status(Conn *c) {
	Fs *fs = c->fs;
	Control *ctl = c->ctl;
	CatalogFileTotals totals;
	FileVec files = {};
	FsSealStatus seal;
	FsRestoreStatus restore;
	FsSettings set;
	uint64_t dead = 0, errors_total = 0, tp_sealed = 0, tp_stored = 0;
	bool tp_known;
	LogRecent recent[LOG_RECENT_MAX];
	int r;

	r = catalog_files_totals(c->reader, &totals);
	if (r >= 0)
		for (uint32_t n = 0; r >= 0 && n < tier_set_count(fs_tiers(fs)); n++)
			r = catalog_chunks_foreach_dead(c->reader, n, count_dead, &dead);
	if (r < 0)
		return control_fail(c, r, "cannot read the catalog: %s", strerror(-r));

	fs_seal_status_get(fs, &seal);
	fs_restore_status_get(fs, &restore);
	fs_settings_get(fs, &set);
	throughput(ctl, &tp_known, &tp_sealed, &tp_stored);
	size_t n_recent = log_recent_get(recent, ELEMENTSOF(recent), &errors_total);

	r = control_add(c, "mount", set.mountpoint);
	if (r >= 0)
		r = control_add(c, "data_dir", fs_config(fs)->data_dir);
	if (r >= 0)
		r = control_add(c, "control", ctl->path);
	if (r >= 0)
		r = control_add(c, "version", PACKAGE_VERSION);
	if (r >= 0)
		r = control_add_u64(c, "pid", (uint64_t) getpid());
	if (r >= 0)
		r = control_add_u64(c, "owner", ctl->owner);
	if (r >= 0)
		r = control_add_u64(c, "uptime", (uint64_t) ((clock_ns(CLOCK_MONOTONIC) - ctl->started_ns) / 1000000000));
	if (r >= 0)
		r = control_add(c, "allow_other", fs_config(fs)->allow_other ? "yes" : "no");
	pthread_mutex_lock(&ctl->lock);
	unsigned clients = ctl->n_conns;
	pthread_mutex_unlock(&ctl->lock);
	if (r >= 0)
		r = control_add_u64(c, "clients", clients);
	if (r >= 0)
		r = control_add_u64(c, "seal_delay", set.seal_delay_s);
	if (r >= 0)
		r = control_add_u64(c, "gc_interval", set.gc_interval_s);
	if (r >= 0)
		r = control_add_u64(c, "files_raw", totals.files[CATALOG_FILE_RAW]);
	if (r >= 0)
		r = control_add_u64(c, "files_sealed", totals.files[CATALOG_FILE_SEALED]);
	if (r >= 0)
		r = control_add_u64(c, "sealed_bytes", totals.bytes[CATALOG_FILE_SEALED]);
	if (r >= 0)
		r = control_add_u64(c, "seal_queue", seal.queue);
	if (r >= 0)
		r = control_add_u64(c, "seal_queue_due", seal.queue_due);
	if (r >= 0)
		r = control_add_u64(c, "seal_queue_room", seal.queue_room);
	if (r >= 0)
		r = control_add_u64(c, "seal_backlog", seal_backlog(c));
	if (r >= 0)
		r = control_add_u64(c, "high_watermark", tier_set_config(fs_tiers(fs), 0)->high_watermark);
	if (r >= 0)
		r = control_add_u64(c, "seal_queue_bytes", seal.queue_bytes);
	if (r >= 0)
		r = control_add_u64(c, "seal_behind", seal.behind_s);
	if (r >= 0)
		r = add_restore_status(c, &restore);
	if (r >= 0)
		r = control_add_u64(c, "migrate_queue", atomic_load(&ctl->migrate_queue));
	if (r >= 0)
		r = control_add_u64(c, "seal_streams", seal.streams);
	if (r >= 0)
		r = control_add_u64(c, "seals_streamed", seal.seals_streamed);
	if (r >= 0)
		r = control_add_u64(c, "seals_whole", seal.seals_whole);
	if (r >= 0)
		r = control_add_u64(c, "seals_split", seal.seals_split);
	if (r >= 0)
		r = control_add_u64(c, "streamed_bytes", seal.streamed_bytes);
	if (r >= 0)
		r = control_add_u64(c, "gc_queue", dead);
	if (r >= 0)
		r = add_policy_status(c);
	if (r >= 0)
		r = add_throttle_status(c);
	if (r >= 0)
		r = add_catalog_status(c);
	if (r >= 0 && tp_known)
		r = control_add_u64(c, "seal_rate", tp_sealed);
	if (r >= 0 && tp_known)
		r = control_add_u64(c, "store_rate", tp_stored);
	if (r >= 0)
		r = control_add_u64(c, "errors_total", errors_total);
	if (r >= 0) {
		FsRekeyStatus rs;
		fs_rekey_status_get(fs, &rs);
		r = control_add_u64(c, "rekey_rewritten", rs.rewritten);
	}
	if (r >= 0)
		r = control_census(c, &files);
	if (r >= 0)
		r = add_df_rows(c, &files);
	free(files.items);
	if (r >= 0)
		r = add_key_status(c);
	if (r >= 0)
		r = control_shared_hosts(c);
	for (size_t i = 0; r >= 0 && i < n_recent; i++) {
		r = control_row(c, "error");
		if (r >= 0)
			r = control_add_i64(c, "time", (int64_t) recent[i].time);
		if (r >= 0)
			r = control_add(c, "level", recent[i].level <= LOG_ERR ? "error" : "warning");
		if (r >= 0)
			r = control_add(c, "message", recent[i].message);
	}
	return r;
}

/* ---- policy ---- */

int control_policy(Conn *c) {
	FsSettings set;
	fs_settings_get(c->fs, &set);
	int r = control_add_u64(c, "seal_delay", set.seal_delay_s);
	if (r >= 0)
		r = control_add_u64(c, "gc_interval", set.gc_interval_s);
	if (r >= 0)
		r = control_add(c, "gc_live_threshold", "0.5");
	const ConfigTier *hot = tier_set_config(fs_tiers(c->fs), 0);
	if (r >= 0)
		r = control_add_u64(c, "policy_interval", set.policy_interval_s);
	if (r >= 0)
		r = control_add_u64(c, "policy_bandwidth", fs_config(c->fs)->policy_bandwidth);
	if (r >= 0)
		r = control_add_u64(c, "high_watermark", hot->high_watermark);
	if (r >= 0)
		r = control_add_u64(c, "low_watermark", hot->low_watermark);
	if (r >= 0)
		r = control_add_u64(c, "reserve", fs_policy_reserve(c->fs));
	if (r >= 0)
		r = control_add(c, "reserve_rule", hot->has_reserve ? "configured" : "4 x the largest archivelog, at most 10% of the hot tier");
	for (int k = 0; r >= 0 && k < _TIER_CLASS_MAX; k++) {
		/* The very settings the sealer takes, so what is shown is what is done. */
		const ConfigClassPolicy *policy = tier_class_policy(fs_config(c->fs), (TierFileClass) k);
		bool sealed = policy != NULL;
		DedupChunkerParams params = sealed ? fs_class_chunker(policy) : (DedupChunkerParams) {};
		const DedupChunkerParams *p = &params;
		r = control_row(c, "class");
		if (r >= 0)
			r = control_add(c, "class", tier_class_to_string((TierFileClass) k));
		if (r >= 0)
			r = control_add(c, "sealed", sealed ? "yes" : "no");
		if (r >= 0 && sealed) {
			r = control_add(c, "chunker", p->mode == DEDUP_CHUNKER_CDC ? "cdc" : "fixed");
			if (r >= 0)
				r = control_add_u64(c, "chunk_min", p->min_size);
			if (r >= 0)
				r = control_add_u64(c, "chunk_avg", p->avg_size);
			if (r >= 0)
				r = control_add_u64(c, "chunk_max", p->max_size);
			if (r >= 0)
				r = control_add(c, "compression", "zstd");
			char level[16];
			snprintf(level, sizeof(level), "%d", policy->zstd_level);
			if (r >= 0)
				r = control_add(c, "zstd_level", level);
			if (r >= 0)
				r = control_add_u64(c, "seal_delay", set.seal_delay_s);
			/* A target tier that is not configured or not open moves nothing: show it as none. */
			uint32_t to = policy->target_tier;
			bool moves = to > 0 && tier_set_store(fs_tiers(c->fs), to);
			if (r >= 0)
				r = control_add_u64(c, "migrate_after", moves ? policy->migrate_after : 0);
			if (r >= 0 && moves)
				r = control_add_u64(c, "target_tier", to);
			if (r >= 0 && moves)
				r = control_add(c, "target", tier_set_config(fs_tiers(c->fs), to)->name);
			if (r >= 0 && policy->pinned)
				r = control_add(c, "pinned", "yes");
		}
	}
	return r;
}
