/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * recover.c — disaster recovery: rebuilds a mount's catalog and hot tier
 * from one lower tier alone, after the hot tier and its catalog are lost
 * (`fratierfs --recover-from=SOURCE -o data=NEWDIR`).
 *
 * The lower tier describes itself (dedup/describe.h, written by describe.c):
 * the directories and files placed there, with paths, owners, modes,
 * times, classes, archived logs' headers and recipes in chunk ids.  Its
 * containers hold the chunks, found by id by walking them
 * (dedup_salvage_open()).  Every file listed is written back, chunk by
 * chunk, through a writer of the new hot tier's store, with the chunker
 * parameters it was cut with: the file is sealed on the hot tier, the new
 * catalog's chunk index holds its chunks, and the policy or `tierctl
 * migrate` moves it down again.  SOURCE is only read.
 *
 * Why recall to the hot tier rather than adopt the source's containers:
 * the new catalog numbers containers from 1, so adopting them would mean
 * renaming every container on the source (and rewriting their headers),
 * and a source shared with the new mount's own tiers would be taken for
 * garbage by their collector.  Reading it once is what a restore costs
 * anyway, and SOURCE stays untouched until the operator drops it.
 *
 * Invariants:
 *  1. A file is committed to the catalog only after all its bytes were read
 *     back, each chunk checked against its id, and made durable (the
 *     writer's finish()); a file with a missing or damaged chunk is not
 *     created at all and is listed as lost, so no file comes back with
 *     wrong bytes.
 *  2. The catalog must be empty (a fresh data directory): recovery never
 *     mixes with a live namespace.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/array.h"
#include "common/macros.h"
#include "dedup/describe.h"
#include "tier/class.h"
#include "tier/file-attrs.h"
#include "tier/recover.h"
#include "tier/shared.h"

/* Zero runs are fed to the writer from this many zero bytes at a time. */
#define RECOVER_ZEROS ((size_t) 1 << 20)

typedef struct Recover {
	Catalog *catalog;
	DedupStore *hot;
	int (*spool)(void *userdata);
	void *userdata;
	FILE *out;
	DedupSalvage *salvage;
	uint8_t *chunk;           /* DEDUP_CHUNK_SIZE_LIMIT_MAX bytes */
	uint8_t *zeros;           /* RECOVER_ZEROS zero bytes */
	uint64_t files, restored, lost, bytes;
} Recover;

static void restore_attrs(CatalogInode *ci, const TierFileAttrs *a) {
	ci->mode = a->mode;
	ci->uid = a->uid;
	ci->gid = a->gid;
	ci->atime_ns = a->atime_ns;
	ci->mtime_ns = a->mtime_ns;
	ci->ctime_ns = a->ctime_ns;
}

/*
 * The directory at path (relative, "" the root), made with its missing
 * ancestors inside the caller's transaction; with a, given a's attributes.
 */
static int ensure_dir(Recover *rc, const char *path, const TierFileAttrs *a, uint64_t *ret_ino) {
	Catalog *c = rc->catalog;
	char name[CATALOG_NAME_MAX + 1];
	uint64_t ino = CATALOG_ROOT_INO;
	int r;

	for (const char *p = path; *p;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t) (slash - p) : strlen(p);
		if (n == 0 || n > CATALOG_NAME_MAX)
			return -EINVAL;
		memcpy(name, p, n);
		name[n] = 0;
		p += n + (slash ? 1 : 0);

		uint64_t child;
		r = catalog_dirent_lookup(c, ino, name, &child);
		if (r >= 0) {
			CatalogInode ci;
			r = catalog_inode_get(c, child, &ci);
			if (r < 0)
				return r;
			if (!S_ISDIR(ci.mode))
				return -ENOTDIR;
			ino = child;
			continue;
		}
		if (r != -ENOENT)
			return r;
		/* An ancestor the description does not list (it always does, parents first): root's, 0755. */
		CatalogInode dir, ci = {
			.parent = ino,
			.mode = S_IFDIR | 0755,
			.nlink = 2,
		};
		r = catalog_inode_get(c, ino, &dir);
		if (r < 0)
			return r;
		ci.uid = dir.uid;
		ci.gid = dir.gid;
		ci.atime_ns = ci.mtime_ns = ci.ctime_ns = dir.mtime_ns;
		r = catalog_inode_create(c, &ci, NULL, &child);
		if (r >= 0)
			r = catalog_dirent_add(c, ino, name, child);
		if (r < 0)
			return r;
		dir.nlink++;
		r = catalog_inode_update(c, &dir);
		if (r < 0)
			return r;
		ino = child;
	}
	if (a) {
		CatalogInode ci;
		r = catalog_inode_get(c, ino, &ci);
		if (r < 0)
			return r;
		restore_attrs(&ci, a);
		r = catalog_inode_update(c, &ci);
		if (r < 0)
			return r;
	}
	*ret_ino = ino;
	return 0;
}

static int restore_dir(Recover *rc, const TierFileAttrs *a) {
	uint64_t ino;
	int r = catalog_begin(rc->catalog);
	if (r < 0)
		return r;
	r = ensure_dir(rc, a->path, a, &ino);
	if (r < 0) {
		catalog_rollback(rc->catalog);
		return r;
	}
	return catalog_commit(rc->catalog);
}

/* Reads the file's chunks back into w.  Returns 0, or -ENOENT/-EIO for a missing/damaged chunk, or an error. */
static int restore_bytes(Recover *rc, const DedupDescribedFile *f, DedupWriter *w) {
	int r;

	for (size_t i = 0; i < f->n_entries; i++) {
		const DedupDescribedEntry *e = &f->entries[i];
		if (e->zero) {
			for (uint32_t left = e->length; left > 0;) {
				size_t n = MIN((size_t) left, RECOVER_ZEROS);
				r = dedup_writer_feed(w, rc->zeros, n);
				if (r < 0)
					return r;
				left -= (uint32_t) n;
			}
			continue;
		}
		if (e->literal) {
			r = dedup_writer_feed(w, e->id.bytes, e->length);
			if (r < 0)
				return r;
			continue;
		}
		ssize_t n = dedup_salvage_read(rc->salvage, &e->id, rc->chunk, DEDUP_CHUNK_SIZE_LIMIT_MAX);
		if (n < 0)
			return (int) n;
		/* The id checked out, so the length can only disagree in a hostile description. */
		if ((size_t) n != e->length)
			return -EIO;
		r = dedup_writer_feed(w, rc->chunk, (size_t) n);
		if (r < 0)
			return r;
	}
	return dedup_writer_finish(w);
}

static int restore_file(Recover *rc, const DedupDescribedFile *f, const TierFileAttrs *a) {
	Catalog *c = rc->catalog;
	_cleanup_free_ char *dir = strdup(a->path);
	DedupWriter *w = NULL;
	uint64_t parent, ino;
	int r;

	if (!dir)
		return -ENOMEM;
	char *slash = strrchr(dir, '/');
	const char *name = slash ? slash + 1 : a->path;
	if (slash)
		*slash = 0;
	else
		dir[0] = 0;

	r = dedup_writer_new(rc->hot, &f->params, DEDUP_STORE_LEVEL_DEFAULT, DEDUP_STORE_REGION_DEFAULT, &w);
	if (r >= 0) {
		int fd = rc->spool(rc->userdata);
		if (fd >= 0)
			r = dedup_writer_spool(w, fd);
	}
	if (r >= 0)
		r = restore_bytes(rc, f, w);
	if (r < 0)
		goto out;

	r = catalog_begin(c);
	if (r < 0)
		goto out;
	r = ensure_dir(rc, dir, NULL, &parent);
	if (r >= 0) {
		r = catalog_dirent_lookup(c, parent, name, &ino);
		r = r >= 0 ? -EEXIST : r == -ENOENT ? 0 : r;
	}
	if (r >= 0) {
		DedupWriterStats ws;
		dedup_writer_stats(w, &ws);
		CatalogInode ci = {
			.parent = parent,
			.nlink = 1,
			.size = f->size,
			.state = CATALOG_FILE_SEALED,
			.file_class = a->file_class < _TIER_CLASS_MAX ? a->file_class : TIER_CLASS_OTHER,
			.tier = 0,
			.stored = ws.stored_bytes,
		};
		restore_attrs(&ci, a);
		r = catalog_inode_create(c, &ci, NULL, &ino);
	}
	if (r >= 0)
		r = catalog_dirent_add(c, parent, name, ino);
	if (r >= 0)
		r = dedup_writer_commit(w, ino);
	if (r >= 0 && a->has_archivelog)
		r = catalog_archivelog_set(c, ino, &a->archivelog);
	if (r < 0) {
		catalog_rollback(c);
		goto out;
	}
	r = catalog_commit(c);
out:
	dedup_writer_free(w);
	return r;
}

static int restore_one(const DedupDescribedFile *f, void *userdata) {
	Recover *rc = userdata;
	_cleanup_free_ TierFileAttrs *a = malloc(sizeof(*a));
	int r;

	if (!a)
		return -ENOMEM;
	r = tier_file_attrs_parse(f->attrs, f->attrs_len, a);
	if (r < 0)
		return -EBADMSG; /* the record's checksum passed: a writer of another version, or a hostile one */
	if (S_ISDIR(a->mode) != !f->has_recipe || (f->has_recipe && a->size != f->size))
		return -EBADMSG;
	if (S_ISDIR(a->mode)) {
		r = restore_dir(rc, a);
		if (r < 0) {
			/* A file in the way of a directory: only a hostile description has both. */
			fprintf(rc->out, "lost: %s/: cannot make the directory: %s\n", a->path, strerror(-r));
			rc->lost++;
			return r == -ENOTDIR || r == -EEXIST ? 0 : r;
		}
		return 0;
	}

	rc->files++;
	r = restore_file(rc, f, a);
	if (r >= 0) {
		rc->restored++;
		rc->bytes += f->size;
		return 0;
	}
	const char *why = r == -ENOENT ? "a chunk is missing from the tier (collected, or its container lost)"
			  : r == -EIO  ? "a chunk is damaged on the tier"
			  : r == -EEXIST ? "listed twice"
			  : r == -ENOTDIR ? "a file is in the way of its directory"
					  : NULL;
	if (!why)
		return r; /* no space, the catalog or the hot tier failing: stop there */
	fprintf(rc->out, "lost: %s (inode %llu before): %s\n", a->path, (unsigned long long) a->ino, why);
	rc->lost++;
	return 0;
}

/* Whether spec names one of this mount's own tiers: their collector would take its containers for garbage. */
static bool source_is_own_tier(const TierSet *tiers, const char *spec) {
	char a[PATH_MAX], b[PATH_MAX];
	bool have_a = realpath(spec, a) != NULL;
	for (uint32_t n = 0; n < tier_set_count(tiers); n++) {
		const ConfigTier *t = tier_set_config(tiers, n);
		if (!t)
			continue;
		if (strcmp(t->path, spec) == 0 || (have_a && realpath(t->path, b) && strcmp(a, b) == 0))
			return true;
	}
	return false;
}

/* Sets *ret_error to the message; returns r. */
static int fail(char **ret_error, int r, const char *format, ...) _printf_(3, 4);
static int fail(char **ret_error, int r, const char *format, ...) {
	va_list ap;
	va_start(ap, format);
	if (vasprintf(ret_error, format, ap) < 0)
		*ret_error = NULL;
	va_end(ap);
	return r;
}

/*
 * A shared tier (docs/SHARED.md) holds the files of many hosts, each below
 * h/HOST: recovery rebuilds those of the host the new data directory is for
 * (its config's host, or this machine's name).  *b becomes that host's view
 * when the tier has a record of it; a tier that is not shared stays as is.
 */
static int shared_host_view(const Config *config, DedupBackend **b, FILE *out) {
	char host[CONFIG_HOST_NAME_MAX + 1], prefix[2 + CONFIG_HOST_NAME_MAX + 1];
	TierHostRecord rec;

	if (config->host)
		snprintf(host, sizeof(host), "%s", config->host);
	else if (tier_shared_default_host(host) < 0)
		return 0;
	int r = tier_shared_read_host(*b, host, &rec);
	if (r == -ENOENT || r == -EBADMSG)
		return 0;
	if (r < 0)
		return r;
	snprintf(prefix, sizeof(prefix), "h/%s", host);
	DedupBackend *root = *b;
	*b = NULL;
	r = tier_backend_prefix_new(root, prefix, b);
	if (r >= 0)
		fprintf(out, "a shared tier: the files of host %s (%s/)\n", host, prefix);
	return r;
}

typedef struct HostDirs {
	char (*dirs)[2 + CONFIG_HOST_NAME_MAX + 1];
	size_t n, cap;
} HostDirs;

static int host_dir(const char *host, void *userdata) {
	HostDirs *h = userdata;
	if (ARRAY_RESERVE_ONE(h->dirs, h->cap, h->n, 8) < 0)
		return -ENOMEM;
	snprintf(h->dirs[h->n++], sizeof(h->dirs[0]), "h/%s", host);
	return 0;
}

/*
 * The chunks of a host's files on a shared tier with global dedup may be in
 * any host's containers (docs/SHARED.md): the salvage reader indexes every
 * host's, through a root of its own, *ret_root (the caller frees it after
 * the reader).
 */
static int salvage_open_shared(const char *source, DedupStore *hot_store, DedupBackend **ret_root,
			       DedupSalvage **ret) {
	_cleanup_free_ char *error = NULL;
	HostDirs h = {};
	int r = tier_open_source(source, ret_root, &error);
	DedupBackend *salvage_root = *ret_root;
	if (r < 0)
		return r;
	r = tier_shared_hosts(salvage_root, host_dir, &h);
	if (r >= 0) {
		const char **dirs = calloc(MAX(h.n, (size_t) 1), sizeof(*dirs));
		if (!dirs)
			r = -ENOMEM;
		for (size_t i = 0; dirs && i < h.n; i++)
			dirs[i] = h.dirs[i];
		if (r >= 0)
			r = dedup_salvage_open_many(salvage_root, dirs, h.n, hot_store, ret);
		free(dirs);
	}
	free(h.dirs);
	return r;
}

int tier_recover(const Config *config, const TierSet *tiers, Catalog *catalog, DedupStore *hot_store,
		 int (*spool)(void *userdata), void *userdata, const char *source, FILE *out, char **ret_error) {
	_cleanup_free_ char *error = NULL;
	_cleanup_free_ void *buf = NULL;
	DedupBackend *b = NULL, *root = NULL;
	DedupDescriptionInfo info = {};
	DedupSalvageStats st;
	Recover rc = { .catalog = catalog, .hot = hot_store, .spool = spool, .userdata = userdata, .out = out };
	size_t len;
	int r;

	*ret_error = NULL;
	r = catalog_dir_is_empty(catalog, CATALOG_ROOT_INO);
	if (r < 0)
		return fail(ret_error, r, "cannot read the catalog: %s", strerror(-r));
	if (r == 0)
		return fail(ret_error, -ENOTEMPTY, "the data directory %s already holds files: recover into a new one",
			    config->data_dir);
	if (source_is_own_tier(tiers, source))
		return fail(ret_error, -EINVAL,
			    "%s is a tier of the data directory being rebuilt: recover into a data directory whose tiers "
			    "are elsewhere",
			    source);

	r = tier_open_source(source, &b, &error);
	if (r < 0)
		return fail(ret_error, r, "cannot open the tier %s: %s", source, error ?: strerror(-r));
	DedupBackend *before = b;
	r = shared_host_view(config, &b, out);
	bool shared = r >= 0 && b != before;
	if (r < 0) {
		fail(ret_error, r, "cannot open the host's part of the shared tier %s: %s", source, strerror(-r));
		goto out;
	}
	r = dedup_description_load_keys(b, hot_store, &buf, &len);
	if (r == -ENOKEY) {
		fail(ret_error, r,
		     "the description of %s is encrypted: recovering it needs the key it was written under "
		     "(-o key_file=FILE)",
		     source);
		goto out;
	}
	if (r == -EBADMSG && dedup_store_description_key(hot_store)) {
		fail(ret_error, r,
		     "cannot open the encrypted description of %s: it was written under another key, or changed",
		     source);
		goto out;
	}
	if (r == -ENOENT) {
		fail(ret_error, r,
		     "%s holds no description of its files: not a fratier tier, or written by a fratier without "
		     "self-describing tiers before anything was moved there again",
		     source);
		goto out;
	}
	if (r >= 0)
		r = dedup_description_parse(buf, len, NULL, NULL, &info);
	if (r < 0) {
		fail(ret_error, r, "cannot read the description of %s: %s", source, strerror(-r));
		goto out;
	}
	r = shared ? salvage_open_shared(source, hot_store, &root, &rc.salvage) : dedup_salvage_open(b, hot_store, &rc.salvage);
	if (r < 0) {
		fail(ret_error, r, "cannot read the containers of %s: %s", source, strerror(-r));
		goto out;
	}
	dedup_salvage_stats(rc.salvage, &st);
	fprintf(out,
		"%s: tier %u, description of %llu entries, %llu containers (%llu damaged, %llu cut short), "
		"%llu chunks%s\n",
		source, (unsigned) info.tier, (unsigned long long) info.records, (unsigned long long) st.containers,
		(unsigned long long) st.damaged_containers, (unsigned long long) st.torn_containers,
		(unsigned long long) st.chunks, st.unopened_regions > 0 ? " (some sealed regions did not open)" : "");

	rc.chunk = malloc(DEDUP_CHUNK_SIZE_LIMIT_MAX);
	rc.zeros = calloc(1, RECOVER_ZEROS);
	if (!rc.chunk || !rc.zeros) {
		r = fail(ret_error, -ENOMEM, "out of memory");
		goto out;
	}
	r = dedup_description_parse(buf, len, restore_one, &rc, NULL);
	if (r >= 0)
		r = catalog_sync(catalog);
	if (r < 0) {
		fail(ret_error, r, "recovery from %s stopped after %llu files: %s", source,
		     (unsigned long long) rc.restored, strerror(-r));
		goto out;
	}
	fprintf(out,
		"restored %llu of %llu files (%llu bytes) into %s, on its hot tier; %llu could not be restored%s\n",
		(unsigned long long) rc.restored, (unsigned long long) rc.files, (unsigned long long) rc.bytes,
		config->data_dir, (unsigned long long) rc.lost, rc.lost ? " (listed above)" : "");
	r = rc.lost > 0 ? 1 : 0;
out:
	free(rc.chunk);
	free(rc.zeros);
	dedup_salvage_free(rc.salvage);
	dedup_backend_free(root);
	dedup_backend_free(b);
	return r;
}
