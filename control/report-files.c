/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * report-files.c — tierctl du and ls, and the walks of the namespace the
 * other requests share: paths resolved and trees walked with the peer's
 * permissions (search on every directory on the way, read on the ones
 * listed), files counted as tierctl counts them (a raw file by its staging
 * file, a sealed one by its chunks).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "control/control-internal.h"

/* ---- the files ---- */

static int collect_file(const CatalogInode *ci, void *userdata) {
	FileVec *v = userdata;
	if (v->n == v->cap) {
		size_t cap = MAX(v->cap * 2, (size_t) 1024);
		FileRow *p = realloc(v->items, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		v->items = p;
		v->cap = cap;
	}
	v->items[v->n++] = (FileRow) {
		.ino = ci->ino,
		.size = ci->size,
		.mtime_ns = ci->mtime_ns,
		.file_class = ci->file_class,
		.tier = ci->tier, /* a raw file's: its staging file's, on the hot tier unless it spilled */
		.state = ci->state,
	};
	return 0;
}

void control_raw_fill(Fs *fs, uint32_t tier, uint64_t ino, uint64_t *size, uint64_t *raw_bytes, int64_t *mtime_ns) {
	struct stat st;
	/* A staging file that cannot be stat'ed reads as empty, as getattr would fail it. */
	if (fs_staging_stat(fs, tier, ino, &st) < 0)
		memset(&st, 0, sizeof(st));
	*size = (uint64_t) st.st_size;
	*raw_bytes = (uint64_t) st.st_blocks * 512;
	if (mtime_ns && st.st_mtim.tv_sec)
		*mtime_ns = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

/* Every regular file, raw ones with their staging file's size and time (the authoritative ones). */
int control_census(Conn *c, FileVec *ret) {
	FileVec v = {};
	int r = catalog_files_foreach(c->reader, collect_file, &v);
	if (r < 0) {
		free(v.items);
		return control_fail(c, r, "cannot list files: %s", strerror(-r));
	}
	for (size_t i = 0; i < v.n; i++)
		if (v.items[i].state == CATALOG_FILE_RAW)
			control_raw_fill(c->fs, v.items[i].tier, v.items[i].ino, &v.items[i].size, &v.items[i].raw_bytes,
				 &v.items[i].mtime_ns);
	*ret = v;
	return 0;
}

/* ---- du, ls ---- */

int control_resolve(Conn *c, const char *path, CatalogInode *ret) {
	CatalogInode ci;
	int r = catalog_inode_get(c->reader, CATALOG_ROOT_INO, &ci);
	if (r < 0)
		return r;
	for (const char *p = path + 1; *p;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t) (slash - p) : strlen(p);
		char name[CATALOG_NAME_MAX + 1];
		uint64_t ino;
		if (!S_ISDIR(ci.mode))
			return -ENOTDIR;
		if (!control_may_access(c, &ci, 1))
			return -EACCES;
		memcpy(name, p, n);
		name[n] = 0;
		r = catalog_dirent_lookup(c->reader, ci.ino, name, &ino);
		if (r >= 0)
			r = catalog_inode_get(c->reader, ino, &ci);
		if (r < 0)
			return r;
		p += n + (slash ? 1 : 0);
	}
	*ret = ci;
	return 0;
}

typedef struct Usage {
	uint64_t files, dirs, logical, unique, shared, raw, errors;
	double attributed;
} Usage;

static int file_usage(Conn *c, const CatalogInode *ci, Usage *u) {
	if (!S_ISREG(ci->mode))
		return 0;
	u->files++;
	if (ci->state != CATALOG_FILE_SEALED) {
		uint64_t size, raw;
		control_raw_fill(c->fs, ci->tier, ci->ino, &size, &raw, NULL);
		u->logical += size;
		u->raw += raw;
		return 0;
	}
	DedupFileUsage du;
	int r = dedup_file_usage(c->reader, ci->ino, &du);
	if (r < 0)
		return r;
	u->logical += ci->size;
	u->unique += du.unique;
	u->shared += du.shared;
	u->attributed += du.attributed;
	return 0;
}

static const char *type_name(uint32_t mode) {
	return S_ISREG(mode) ? "file" : S_ISDIR(mode) ? "dir" : S_ISLNK(mode) ? "link" : "other";
}

static int add_usage(Conn *c, const Usage *u) {
	int r = control_add_u64(c, "files", u->files);
	if (r >= 0)
		r = control_add_u64(c, "dirs", u->dirs);
	if (r >= 0)
		r = control_add_u64(c, "logical", u->logical);
	if (r >= 0)
		r = control_add_u64(c, "stored", (uint64_t) (u->attributed + 0.5) + u->raw);
	if (r >= 0)
		r = control_add_u64(c, "unique", u->unique);
	if (r >= 0)
		r = control_add_u64(c, "shared", u->shared);
	if (r >= 0)
		r = control_add_u64(c, "raw", u->raw);
	return r;
}

static int add_file_state(Conn *c, const CatalogInode *ci) {
	if (!S_ISREG(ci->mode))
		return 0;
	bool moving = ci->state == CATALOG_FILE_SEALED && tier_mover_moving(fs_mover(c->fs)) == ci->ino;
	int r = control_add_u64(c, "tier", ci->tier);
	if (r >= 0)
		r = control_add(c, "state", moving ? "migrating" : ci->state == CATALOG_FILE_SEALED ? "sealed" : "raw");
	if (r >= 0)
		r = control_add(c, "class", tier_class_to_string((TierFileClass) ci->file_class));
	if (r >= 0 && catalog_pinned(c->reader, ci->ino) > 0)
		r = control_add(c, "pinned", "yes");
	CatalogArchivelog a;
	if (r >= 0 && ci->file_class == TIER_CLASS_ARCHIVELOG && catalog_archivelog_get(c->reader, ci->ino, &a) >= 0) {
		r = control_add_u64(c, "dbid", a.dbid);
		if (r >= 0 && a.db_name[0])
			r = control_add(c, "db_name", a.db_name);
		if (r >= 0)
			r = control_add_u64(c, "thread", a.thread);
		if (r >= 0)
			r = control_add_u64(c, "sequence", a.sequence);
		if (r >= 0)
			r = control_add_u64(c, "low_scn", a.low_scn);
		if (r >= 0)
			r = control_add_u64(c, "next_scn", a.next_scn);
		if (r >= 0)
			r = control_add_u64(c, "low_time", (uint64_t) a.low_time);
		if (r >= 0)
			r = control_add_u64(c, "next_time", (uint64_t) a.next_time);
	}
	return r;
}

typedef struct DirStack {
	uint64_t *inos;
	size_t n, cap;
} DirStack;

static int dir_push(DirStack *s, uint64_t ino) {
	if (s->n == s->cap) {
		size_t cap = MAX(s->cap * 2, (size_t) 64);
		uint64_t *p = realloc(s->inos, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->inos = p;
		s->cap = cap;
	}
	s->inos[s->n++] = ino;
	return 0;
}

/*
 * Walks the tree below directory top, calling visit for every entry's inode:
 * for a directory, visit returns 1 to descend into it, 0 not to; for
 * anything, a negative return stops the walk and is returned.  Entries
 * removed meanwhile are passed over; the daemon stopping is -ECANCELED.
 */
int control_tree_walk(Conn *c, uint64_t top, int (*visit)(Conn *c, const CatalogInode *ci, void *userdata),
		     void *userdata) {
	_cleanup_free_ CatalogDirent *ents = malloc(CONTROL_DIR_BATCH * sizeof(CatalogDirent));
	DirStack stack = {};
	int r = ents ? dir_push(&stack, top) : -ENOMEM;
	while (r >= 0 && stack.n > 0 && !atomic_load(&c->ctl->stopping)) {
		uint64_t dir = stack.inos[--stack.n], after = 0;
		for (;;) {
			int n = catalog_dir_read(c->reader, dir, after, ents, CONTROL_DIR_BATCH);
			if (n <= 0) {
				r = n;
				break;
			}
			for (int k = 0; r >= 0 && k < n; k++) {
				CatalogInode ci;
				after = ents[k].cookie;
				if (catalog_inode_get(c->reader, ents[k].ino, &ci) < 0)
					continue; /* removed meanwhile */
				r = visit(c, &ci, userdata);
				if (r > 0 && S_ISDIR(ci.mode))
					r = dir_push(&stack, ci.ino);
			}
			if (r < 0)
				break;
		}
	}
	free(stack.inos);
	if (atomic_load(&c->ctl->stopping))
		return -ECANCELED;
	return r < 0 ? r : 0;
}

static int usage_visit(Conn *c, const CatalogInode *ci, void *userdata) {
	Usage *u = userdata;
	if (S_ISDIR(ci->mode)) {
		u->dirs++;
		if (control_may_access(c, ci, 5))
			return 1;
		u->errors++;
	} else if (file_usage(c, ci, u) < 0)
		u->errors++;
	return 0;
}

/* Sums a directory tree; directories the peer may not list are counted in errors and skipped, as du does. */
static int tree_usage(Conn *c, const CatalogInode *top, Usage *u) {
	u->dirs++;
	if (!control_may_access(c, top, 5)) {
		u->errors++;
		return 0;
	}
	return control_tree_walk(c, top->ino, usage_visit, u);
}

int control_path_failed(Conn *c, const char *path, int err) {
	int r = control_row(c, "failed");
	if (r >= 0)
		r = control_add(c, "path", path);
	if (r >= 0)
		r = control_add_u64(c, "errno", (uint64_t) -err);
	if (r >= 0)
		r = control_add(c, "message", strerror(-err));
	return r;
}

int control_du(Conn *c, const CtlRequest *req) {
	int r = 0;
	for (size_t i = 0; r >= 0 && i < req->n_paths; i++) {
		CatalogInode ci;
		Usage u = {};
		int q = control_resolve(c, req->paths[i], &ci);
		if (q >= 0)
			q = S_ISDIR(ci.mode) ? tree_usage(c, &ci, &u) : file_usage(c, &ci, &u);
		if (q == -ECANCELED || q == -ENOMEM)
			return q;
		if (q < 0) {
			r = control_path_failed(c, req->paths[i], q);
			continue;
		}
		r = control_row(c, "du");
		if (r >= 0)
			r = control_add(c, "path", req->paths[i]);
		if (r >= 0)
			r = control_add(c, "type", type_name(ci.mode));
		if (r >= 0)
			r = add_usage(c, &u);
		if (r >= 0)
			r = control_add_u64(c, "errors", u.errors);
		if (r >= 0)
			r = add_file_state(c, &ci);
	}
	return r;
}

static int ls_entry(Conn *c, const char *dir, const char *name, const CatalogInode *ci) {
	Usage u = {};
	int q = file_usage(c, ci, &u);
	int r = control_row(c, "entry");
	if (r >= 0)
		r = control_add(c, "dir", dir);
	if (r >= 0)
		r = control_add(c, "name", name);
	if (r >= 0)
		r = control_add(c, "type", type_name(ci->mode));
	if (r >= 0)
		r = control_add_u64(c, "mode", ci->mode & 07777);
	if (r >= 0)
		r = control_add_u64(c, "uid", ci->uid);
	if (r >= 0)
		r = control_add_u64(c, "gid", ci->gid);
	if (r >= 0)
		r = control_add_u64(c, "nlink", ci->nlink);
	if (r >= 0 && S_ISREG(ci->mode) && q >= 0) {
		r = add_usage(c, &u);
		if (r >= 0)
			r = add_file_state(c, ci);
	}
	if (r >= 0 && q < 0)
		r = control_add(c, "error", strerror(-q));
	if (r >= 0) {
		int64_t mtime = ci->mtime_ns;
		if (S_ISREG(ci->mode) && ci->state != CATALOG_FILE_SEALED) {
			uint64_t size, raw;
			control_raw_fill(c->fs, ci->tier, ci->ino, &size, &raw, &mtime);
		}
		r = control_add_i64(c, "mtime", mtime / 1000000000);
	}
	return r;
}

int control_ls(Conn *c, const CtlRequest *req) {
	_cleanup_free_ CatalogDirent *ents = malloc(CONTROL_DIR_BATCH * sizeof(CatalogDirent));
	int r = 0;

	if (!ents)
		return -ENOMEM;
	for (size_t i = 0; r >= 0 && i < req->n_paths; i++) {
		const char *path = req->paths[i];
		CatalogInode ci;
		int q = control_resolve(c, path, &ci);
		if (q >= 0 && S_ISDIR(ci.mode) && !control_may_access(c, &ci, 5))
			q = -EACCES;
		if (q < 0) {
			r = control_path_failed(c, path, q);
			continue;
		}
		if (!S_ISDIR(ci.mode)) {
			const char *slash = strrchr(path, '/');
			_cleanup_free_ char *dir = strndup(path, slash == path ? 1 : (size_t) (slash - path));
			if (!dir)
				return -ENOMEM;
			r = ls_entry(c, dir, slash + 1, &ci);
			continue;
		}
		for (uint64_t after = 0; r >= 0;) {
			int n = catalog_dir_read(c->reader, ci.ino, after, ents, CONTROL_DIR_BATCH);
			if (n <= 0) {
				r = n;
				break;
			}
			for (int k = 0; r >= 0 && k < n; k++) {
				CatalogInode e;
				after = ents[k].cookie;
				if (catalog_inode_get(c->reader, ents[k].ino, &e) < 0)
					continue;
				r = ls_entry(c, path, ents[k].name, &e);
			}
		}
	}
	return r;
}

/* The path of ino from the root, following one link at each step. */
int control_path_of(Catalog *cat, uint64_t ino, char **ret) {
	char *path = strdup(""), name[CATALOG_NAME_MAX + 1];
	int r = path ? 0 : -ENOMEM;
	for (unsigned depth = 0; r >= 0 && ino != CATALOG_ROOT_INO; depth++) {
		uint64_t parent;
		char *longer;
		r = depth < CONTROL_PATH_DEPTH_MAX ? catalog_dirent_find(cat, ino, &parent, name, sizeof(name)) : -ELOOP;
		if (r < 0)
			break;
		if (asprintf(&longer, "/%s%s", name, path) < 0) {
			r = -ENOMEM;
			break;
		}
		free(path);
		path = longer;
		ino = parent;
	}
	if (r < 0) {
		free(path);
		return r;
	}
	if (!*path) {
		free(path);
		path = strdup("/");
		if (!path)
			return -ENOMEM;
	}
	*ret = path;
	return 0;
}
