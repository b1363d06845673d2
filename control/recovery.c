/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * recovery.c — tierctl recovery (is a log missing? how far can I
 * recover?) and the restore set behind tierctl recall --until DB: the
 * catalog's recorded archived-log headers, with each log's tier and size,
 * read by tier/recovery.h.  Names play no part: a renamed log is found by
 * its header.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "control/control-internal.h"

typedef struct LogVec {
	TierRecoveryLog *v;
	size_t n, cap;
} LogVec;

static int log_collect(uint64_t ino, const CatalogArchivelog *a, void *userdata) {
	LogVec *l = userdata;
	if (l->n == l->cap) {
		size_t cap = MAX(l->cap * 2, (size_t) 256);
		TierRecoveryLog *q = reallocarray(l->v, cap, sizeof(*q));
		if (!q)
			return -ENOMEM;
		l->v = q;
		l->cap = cap;
	}
	l->v[l->n++] = (TierRecoveryLog) { .ino = ino, .header = *a };
	return 0;
}

/* Every recorded archived log that is still a file, with its tier and logical size. */
static int logs_collect(Conn *c, LogVec *ret) {
	LogVec l = {};
	/* The catalog is locked during the walk: collect first, look the inodes up after. */
	int r = catalog_archivelogs_foreach(c->reader, 0, 0, 0, UINT32_MAX, log_collect, &l);
	size_t n = 0;
	for (size_t i = 0; r >= 0 && i < l.n; i++) {
		CatalogInode ci;
		int q = catalog_inode_get(c->reader, l.v[i].ino, &ci);
		if (q == -ENOENT)
			continue;
		if (q < 0) {
			r = q;
			break;
		}
		if (ci.nlink == 0 || !S_ISREG(ci.mode))
			continue;
		l.v[i].tier = ci.tier;
		l.v[i].size = ci.size;
		l.v[n++] = l.v[i];
	}
	if (r < 0) {
		free(l.v);
		return r;
	}
	l.n = n;
	*ret = l;
	return 0;
}

/* Whether db is the one the request names (DB_NAME in any case, or DBID); NULL names all. */
static bool db_matches(const TierRecoveryDb *db, const char *name) {
	uint64_t dbid;
	if (!name)
		return true;
	if (strcasecmp(db->db_name, name) == 0)
		return true;
	return ctl_parse_u64(name, &dbid) >= 0 && dbid == db->dbid;
}

static int add_tiers(Conn *c, uint32_t mask) {
	char buf[256] = "";
	size_t len = 0;
	for (uint32_t n = 0; n < 32; n++) {
		if (!(mask & UINT32_C(1) << n))
			continue;
		const ConfigTier *t = tier_set_config(fs_tiers(c->fs), n);
		int k = snprintf(buf + len, sizeof(buf) - len, "%s%s", len ? "," : "", t ? t->name : "?");
		if (k < 0 || (size_t) k >= sizeof(buf) - len)
			break;
		len += (size_t) k;
	}
	return control_add(c, "tiers", buf);
}

static const char *const span_kinds[_TIER_RECOVERY_KIND_MAX] = {
	[TIER_RECOVERY_RUN] = "run",
	[TIER_RECOVERY_GAP] = "gap",
	[TIER_RECOVERY_DUPLICATE] = "duplicate",
	[TIER_RECOVERY_WINDOW] = "window",
};

int control_recovery_add_span(Conn *c, const TierRecoverySpan *s, const char *kind) {
	int r = control_row(c, kind ?: span_kinds[s->kind]);
	if (r >= 0)
		r = control_add_u64(c, "dbid", s->dbid);
	if (r >= 0)
		r = control_add_u64(c, "resetlogs_id", s->resetlogs_id);
	if (r >= 0 && s->thread)
		r = control_add_u64(c, "thread", s->thread);
	if (r >= 0 && s->first_sequence)
		r = control_add_u64(c, "first_sequence", s->first_sequence);
	if (r >= 0 && s->last_sequence)
		r = control_add_u64(c, "last_sequence", s->last_sequence);
	if (r >= 0)
		r = control_add_u64(c, "low_scn", s->low_scn);
	if (r >= 0)
		r = control_add_u64(c, "next_scn", s->next_scn);
	if (r >= 0)
		r = control_add_i64(c, "low_time", s->low_time);
	if (r >= 0)
		r = control_add_i64(c, "next_time", s->next_time);
	if (r >= 0 && (s->kind == TIER_RECOVERY_RUN || s->kind == TIER_RECOVERY_WINDOW)) {
		r = control_add_u64(c, "files", s->files);
		if (r >= 0)
			r = control_add_u64(c, "bytes", s->bytes);
		if (r >= 0)
			r = add_tiers(c, s->tiers);
	}
	if (r >= 0 && s->kind == TIER_RECOVERY_DUPLICATE) {
		_cleanup_free_ char *path = NULL, *used = NULL;
		if (control_path_of(c->reader, s->ino, &path) >= 0)
			r = control_add(c, "path", path);
		if (r >= 0 && control_path_of(c->reader, s->used_ino, &used) >= 0)
			r = control_add(c, "used_path", used);
		if (r >= 0)
			r = control_add(c, "same_header", s->same_header ? "yes" : "no");
	}
	return r;
}

/*
 * Files of the archivelog class whose header is not recorded: sealed ones
 * had a header that did not parse (damaged, or no archived log at all) and
 * are never trusted with a place in a run; raw ones are read at their seal.
 */
static int unread_collect(Conn *c, uint64_t **ret, size_t *ret_n, uint64_t *ret_raw) {
	FileVec v;
	uint64_t *inos = NULL, raw = 0;
	size_t n = 0;
	int r = control_census(c, &v);
	if (r < 0)
		return r;
	for (size_t i = 0; r >= 0 && i < v.n; i++) {
		CatalogArchivelog a;
		if (v.items[i].file_class != TIER_CLASS_ARCHIVELOG)
			continue;
		if (v.items[i].state != CATALOG_FILE_SEALED) {
			raw++;
			continue;
		}
		int q = catalog_archivelog_get(c->reader, v.items[i].ino, &a);
		if (q == -ENOENT) {
			uint64_t *x = reallocarray(inos, n + 1, sizeof(*x));
			if (!x)
				r = -ENOMEM;
			else {
				inos = x;
				inos[n++] = v.items[i].ino;
			}
		} else if (q < 0)
			r = q;
	}
	free(v.items);
	if (r < 0) {
		free(inos);
		return r;
	}
	*ret = inos;
	*ret_n = n;
	*ret_raw = raw;
	return 0;
}

int control_recovery(Conn *c, const CtlRequest *req) {
	LogVec l;
	TierRecovery an;
	_cleanup_free_ uint64_t *unread = NULL;
	size_t n_unread = 0;
	uint64_t unsealed = 0;
	int r = unread_collect(c, &unread, &n_unread, &unsealed);
	if (r < 0)
		return r;
	r = logs_collect(c, &l);
	if (r < 0)
		return r;
	r = tier_recovery_analyze(l.v, l.n, &an);
	if (r < 0) {
		free(l.v);
		return r;
	}
	size_t shown = 0;
	for (size_t i = 0; i < an.n_dbs; i++)
		shown += db_matches(&an.dbs[i], req->database);
	if (req->database && shown == 0)
		r = control_fail(c, -ENOENT, "no archived log of database '%s' here (tierctl recovery lists them all)",
				 req->database);
	if (r >= 0)
		r = control_add_u64(c, "databases", shown);
	/* Of no database that can be told: listed whatever database was asked for. */
	if (r >= 0)
		r = control_add_u64(c, "unreadable", n_unread);
	if (r >= 0)
		r = control_add_u64(c, "unsealed_logs", unsealed);
	for (size_t i = 0; r >= 0 && i < n_unread; i++) {
		_cleanup_free_ char *path = NULL;
		CatalogInode ci;
		r = control_row(c, "unreadable");
		if (r >= 0 && control_path_of(c->reader, unread[i], &path) >= 0)
			r = control_add(c, "path", path);
		if (r >= 0 && catalog_inode_get(c->reader, unread[i], &ci) >= 0) {
			r = control_add_u64(c, "size", ci.size);
			if (r >= 0)
				r = control_add_u64(c, "tier", ci.tier);
		}
	}
	for (size_t i = 0; r >= 0 && i < an.n_dbs; i++) {
		const TierRecoveryDb *db = &an.dbs[i];
		if (!db_matches(db, req->database))
			continue;
		r = control_row(c, "database");
		if (r >= 0)
			r = control_add_u64(c, "dbid", db->dbid);
		if (r >= 0)
			r = control_add(c, "db_name", db->db_name);
		if (r >= 0)
			r = control_add_u64(c, "resetlogs_id", db->resetlogs_id);
		if (r >= 0)
			r = control_add_u64(c, "threads", db->threads);
		if (r >= 0)
			r = control_add_u64(c, "files", db->files);
		if (r >= 0)
			r = control_add_u64(c, "bytes", db->bytes);
		if (r >= 0)
			r = control_add_u64(c, "low_scn", db->low_scn);
		if (r >= 0)
			r = control_add_u64(c, "next_scn", db->next_scn);
		if (r >= 0)
			r = control_add_i64(c, "low_time", db->low_time);
		if (r >= 0)
			r = control_add_i64(c, "next_time", db->next_time);
		if (r >= 0)
			r = control_add_u64(c, "gaps", db->gaps);
		if (r >= 0)
			r = control_add_u64(c, "missing", db->missing);
		if (r >= 0)
			r = control_add_u64(c, "duplicates", db->duplicates);
		for (size_t k = db->first_span; r >= 0 && k < db->first_span + db->n_spans; k++)
			r = control_recovery_add_span(c, &an.spans[k], NULL);
	}
	tier_recovery_done(&an);
	free(l.v);
	return r;
}

void control_restore_done(ControlRestore *rs) {
	tier_restore_set_done(&rs->set);
	tier_recovery_done(&rs->analysis);
	free(rs->logs);
	*rs = (ControlRestore) {};
}

int control_restore_plan(Conn *c, const CtlRequest *req, ControlRestore *ret) {
	ControlRestore rs = {};
	LogVec l;
	int r = logs_collect(c, &l);
	if (r < 0)
		return r;
	rs.logs = l.v;
	rs.n_logs = l.n;
	r = tier_recovery_analyze(rs.logs, rs.n_logs, &rs.analysis);
	/* The newest incarnation of the database named: a restore after a RESETLOGS rolls forward in it. */
	for (size_t i = 0; r >= 0 && i < rs.analysis.n_dbs; i++)
		if (db_matches(&rs.analysis.dbs[i], req->database) &&
		    (!rs.db || rs.analysis.dbs[i].next_scn > rs.db->next_scn))
			rs.db = &rs.analysis.dbs[i];
	if (r >= 0 && !rs.db)
		r = control_fail(c, -ENOENT, "no archived log of database '%s' here (tierctl recovery lists them all)",
				 req->database);
	if (r >= 0 && rs.analysis.n_dbs > 1) {
		/* A name two DBIDs share is ambiguous: the DBID says which. */
		for (size_t i = 0; r >= 0 && i < rs.analysis.n_dbs; i++)
			if (db_matches(&rs.analysis.dbs[i], req->database) && rs.analysis.dbs[i].dbid != rs.db->dbid)
				r = control_fail(c, -EINVAL, "two databases are called '%s' (DBIDs %u and %u): name one by its DBID",
						 req->database, (unsigned) rs.db->dbid, (unsigned) rs.analysis.dbs[i].dbid);
	}
	TierRecoveryPoint from = { .is_scn = req->has_from_scn, .scn = req->from_scn, .time = req->since };
	TierRecoveryPoint until = { .is_scn = req->has_until_scn, .scn = req->until_scn, .time = req->until };
	if (r >= 0)
		r = tier_recovery_restore_set(rs.logs, rs.n_logs, rs.db->dbid, rs.db->resetlogs_id,
					      req->has_from_scn || req->has_since ? &from : NULL, &until, &rs.set);
	if (r < 0) {
		control_restore_done(&rs);
		return r;
	}
	*ret = rs;
	return 0;
}
