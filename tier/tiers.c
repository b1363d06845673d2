/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * tier.c — the mount's tiers and the moves of sealed files between them
 * (migration to a lower tier, recall to the hot one).
 *
 * Tier 0 is the hot tier (opened by main.c with the catalog); the others
 * follow in the config's order, each with a store of its own over its
 * backend: a directory (its containers in PATH/containers) or an NFS export
 * (containers at its root).  A lower tier that cannot be opened at start
 * does not stop the mount: its files read as EIO, unlink and truncate of
 * them still work (they touch only the catalog), status says why, and it
 * is tried again every FS_TIER_RETRY_S until it opens (a filer that was
 * down at boot comes back without a remount).
 *
 * A move (fs_data_migrate()):
 *
 *   sealed on `from` --copy (no lock: dedup_file_migrate())--> copied
 *        ^                                                        |
 *        |  data_gen or the catalog changed: refused, the copy    | data_lock exclusive,
 *        +---------- is garbage for the target's collector <------+ one catalog transaction:
 *                                                                 | recipe, refs and tier switch
 *                                                                 v
 *                                                          sealed on `to`
 *
 * Invariants:
 *  1. The file's catalog row, recipe and references switch tiers in one
 *     transaction, made only after the copy is durable on the target
 *     (dedup/store.h, migration), so after a crash the file is whole on
 *     exactly one tier, and what the other holds of it is garbage.
 *  2. Readers hold data_lock shared and read from the tier sealed_tier
 *     names; the switch takes it exclusively, so no read sees half a move.
 *  3. The copy runs without the data lock, so writers never wait for it;
 *     a write (or an unseal, or a second move) meanwhile bumps data_gen or
 *     changes the catalog row, and the switch is refused.
 *
 * Self-describing lower tiers (disaster recovery, recover.c): each lower
 * tier holds a description of the files sealed on it (dedup/describe.h),
 * rewritten whole from the catalog by fs_tier_describe() after each batch
 * of moves (tierctl migrate, a pass of the policy worker), before every
 * collection of that tier, and at unmount; at most once per call, and only
 * if what it lists changed (a fingerprint of paths and attributes, not
 * atime).  Unlink, rename and chmod of cold files stay catalog-only and
 * never wait on the tier: the description catches up at the next of those
 * points.  Invariants:
 *  4. fs_tiers_gc() collects a lower tier only right after its description
 *     was written (or found current, or removed because the tier is too
 *     full to hold a new one): the collector takes only chunks of
 *     files deleted or moved before that, which the description no longer
 *     lists.  A file deleted in the short window between the two may be
 *     listed with chunks gone: recovery reports it as lost; every byte it
 *     restores is checked against its chunk id, so never a wrong one.
 *  5. A file that changes or moves while the description is written is left
 *     out and the fingerprint forgotten, so the next call writes it again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <xxhash.h>

#include "common/log.h"
#include "common/macros.h"
#include "dedup/describe.h"
#include "fs/fs-internal.h"
#include "tier/backend-dir.h"
#include "tier/backend-nfs.h"
#include "tier/file-attrs.h"

#define TIER_CONTAINERS_DIR "containers"

const ConfigTier *fs_tier_config(const Fs *fs, uint32_t n) {
	const Config *cfg = fs->config;
	if (n == 0)
		return config_tier_by_role(cfg, TIER_ROLE_HOT);
	uint32_t k = 0;
	for (size_t i = 0; i < cfg->n_tiers; i++) {
		if (cfg->tiers[i].role == TIER_ROLE_HOT)
			continue;
		if (++k == n)
			return &cfg->tiers[i];
	}
	return NULL;
}

DedupStore *fs_tier_store(const Fs *fs, uint32_t n) {
	return n < fs->n_tiers ? fs->tiers[n].store : NULL;
}

/*
 * A tier's storage: an NFS export (nfs_options: its bounded wait, NULL for
 * the default), or a directory with its objects in PATH/containers.
 * create: make PATH (the embedded default's tiers); existing: open only
 * what is there (a tier read for recovery is never written to by opening it).
 */
static int open_backend(TierBackend backend, const char *path, const TierNfsOptions *nfs_options, bool create,
			bool existing, DedupBackend **ret, char **ret_error) {
	int r;

	if (backend == TIER_BACKEND_NFS) {
		r = tier_backend_nfs_open(path, nfs_options, ret);
		if (r < 0 && asprintf(ret_error, "%s", tier_backend_nfs_open_error() ?: strerror(-r)) < 0)
			*ret_error = NULL;
		return r;
	}
	_cleanup_free_ char *containers = NULL;
	if (asprintf(&containers, "%s/%s", path, TIER_CONTAINERS_DIR) < 0)
		return -ENOMEM;
	/* Only the embedded default makes its tier's directory: a configured one is a disk that must be there. */
	if (create && mkdir(path, 0755) < 0 && errno != EEXIST)
		r = -errno;
	else if (!existing && mkdir(containers, 0700) < 0 && errno != EEXIST)
		r = -errno;
	else
		r = tier_backend_dir_open(containers, ret);
	/* ENOENT here means the tier's own directory is missing (a disk not mounted): name that one. */
	if (r < 0 && asprintf(ret_error, "%s: %s", r == -ENOENT && !existing ? path : containers, strerror(-r)) < 0)
		*ret_error = NULL;
	return r;
}

static int tier_open_backend(const ConfigTier *t, bool create, DedupBackend **ret, char **ret_error) {
	TierNfsOptions o = TIER_NFS_OPTIONS_DEFAULT;
	if (t->nfs_timeout)
		o.timeout_ms = t->nfs_timeout * 1000;
	if (t->has_nfs_retries)
		o.retries = t->nfs_retries;
	return open_backend(t->backend, t->path, &o, create, false, ret, ret_error);
}

int fs_tier_open_source(const char *spec, DedupBackend **ret, char **ret_error) {
	bool nfs = strncmp(spec, "nfs://", 6) == 0;
	return open_backend(nfs ? TIER_BACKEND_NFS : TIER_BACKEND_DIR, spec, NULL, false, true, ret, ret_error);
}

int fs_tiers_open(Fs *fs, bool create) {
	fs->tiers[0] = (FsTier) { .config = fs_tier_config(fs, 0), .backend = fs->hot_backend, .store = fs->store };
	fs->n_tiers = 1;
	pthread_mutex_init(&fs->migrate_lock, NULL);
	pthread_mutex_init(&fs->describe_lock, NULL);

	for (uint32_t n = 1; n < fs->config->n_tiers && n < CONFIG_TIERS_MAX; n++) {
		FsTier *t = &fs->tiers[n];
		*t = (FsTier) { .config = fs_tier_config(fs, n) };
		fs->n_tiers = n + 1;
		if (!t->config)
			break;
		DedupStore *store = NULL;
		int r = tier_open_backend(t->config, create, &t->backend, &t->error);
		if (r >= 0) {
			r = dedup_store_open(fs->catalog, n, t->backend, NULL, &store);
			atomic_store(&t->store, store);
			if (r < 0) {
				t->backend = dedup_backend_free(t->backend);
				if (asprintf(&t->error, "cannot open its chunk store: %s", strerror(-r)) < 0)
					t->error = NULL;
			}
		}
		if (r == -ENOMEM)
			return log_oom();
		if (r < 0)
			log_warning("tier %u (%s, %s) is not usable: %s; its files read as EIO until it is (tried every %ds)",
				    (unsigned) n, t->config->name, t->config->path, t->error ?: strerror(-r), FS_TIER_RETRY_S);
	}
	return 0;
}

bool fs_tiers_retry(Fs *fs) {
	bool missing = false;
	for (uint32_t n = 1; n < fs->n_tiers; n++) {
		FsTier *t = &fs->tiers[n];
		if (!t->config || atomic_load(&t->store))
			continue;
		DedupBackend *backend = NULL;
		DedupStore *store = NULL;
		_cleanup_free_ char *error = NULL;
		int r = tier_open_backend(t->config, false, &backend, &error);
		if (r >= 0) {
			r = dedup_store_open(fs->catalog, n, backend, NULL, &store);
			if (r < 0)
				backend = dedup_backend_free(backend);
		}
		if (r < 0) {
			log_debug_errno(r, "tier %u (%s) still not usable: %s", (unsigned) n, t->config->name,
					error ?: strerror(-r));
			missing = true;
			continue;
		}
		t->backend = backend;
		atomic_store_explicit(&t->store, store, memory_order_release);
		log_info("Tier %u (%s, %s) is usable now: its files read again, moves to it work",
			 (unsigned) n, t->config->name, t->config->path);
	}
	return missing;
}

void fs_tiers_close(Fs *fs) {
	/* What changed since the last collection: recovery from a tier then finds the mount as it was left. */
	(void) fs_tiers_describe(fs);
	/* Tier 0 belongs to main.c. */
	for (uint32_t n = 1; n < fs->n_tiers; n++) {
		FsTier *t = &fs->tiers[n];
		t->store = dedup_store_free(t->store);
		t->backend = dedup_backend_free(t->backend);
		free(t->error);
		t->error = NULL;
	}
	if (fs->n_tiers > 0) {
		pthread_mutex_destroy(&fs->migrate_lock);
		pthread_mutex_destroy(&fs->describe_lock);
	}
	fs->n_tiers = 0;
}

int fs_tiers_gc(Fs *fs, const DedupGcOptions *o, DedupGcStats *ret) {
	DedupGcStats sum = {};
	int first = 0;
	for (uint32_t n = 0; n < fs->n_tiers; n++) {
		DedupGcStats st = {};
		if (!fs->tiers[n].store)
			continue;
		/* Invariant 4: no collection of a lower tier without its current description. */
		int r = n > 0 ? fs_tier_describe(fs, n) : 0;
		if (r >= 0)
			r = dedup_store_gc(fs->tiers[n].store, o, &st);
		if (r < 0 && first == 0)
			first = r;
		sum.chunks_deleted += st.chunks_deleted;
		sum.containers_deleted += st.containers_deleted;
		sum.containers_compacted += st.containers_compacted;
		sum.bytes_copied += st.bytes_copied;
		sum.bytes_freed += st.bytes_freed;
		sum.orphans_deleted += st.orphans_deleted;
		sum.containers_skipped += st.containers_skipped;
		if (r == -ECANCELED)
			break; /* asked to stop: the other tiers too */
	}
	if (ret)
		*ret = sum;
	return first;
}

/* A move's copy is background work: each step is paced by the throttle, then the caller sees it. */
typedef struct MigratePace {
	Fs *fs;
	FsThrottleUnit unit;
	int (*progress)(uint64_t done, uint64_t total, void *userdata);
	void *userdata;
} MigratePace;

static int migrate_progress(uint64_t done, uint64_t total, void *userdata) {
	MigratePace *p = userdata;
	fs_throttle_pace(&p->fs->throttle, FS_THROTTLE_MIGRATE, &p->unit);
	int r = p->progress ? p->progress(done, total, p->userdata) : 0;
	/* The caller's own waits (the policy's bandwidth cap) are not work of the next step. */
	fs_throttle_begin(&p->unit);
	return r;
}

int fs_data_migrate(Fs *fs, uint64_t ino, uint32_t to, int (*progress)(uint64_t done, uint64_t total, void *userdata),
		    void *userdata, FsMigrateResult *ret) {
	MigratePace pace = { .fs = fs, .progress = progress, .userdata = userdata };
	DedupMigration *m = NULL;
	CatalogInode ci, now;
	FsInode *i;
	int r;

	*ret = (FsMigrateResult) {};
	pthread_mutex_lock(&fs->migrate_lock);
	r = catalog_inode_get(fs->catalog, ino, &ci);
	if (r < 0)
		goto out;
	if (!S_ISREG(ci.mode) || ci.nlink == 0) {
		r = -ENOENT;
		goto out;
	}
	if (ci.state != CATALOG_FILE_SEALED) {
		r = -EMEDIUMTYPE;
		goto out;
	}
	if (ci.tier == to) {
		r = 0;
		goto out;
	}
	DedupStore *from = fs_tier_store(fs, ci.tier), *dst = fs_tier_store(fs, to);
	if (!from || !dst) {
		r = -ENXIO;
		goto out;
	}
	/* A tier may ask for stronger compression of what moves there: colder data is read less often. */
	const ConfigClassPolicy *policy = tier_class_policy(fs->config, (TierFileClass) ci.file_class);
	const ConfigTier *target = fs->tiers[to].config;
	int level = target->has_zstd_level ? target->zstd_level
		    : policy               ? policy->zstd_level
					   : DEDUP_STORE_LEVEL_DEFAULT;

	/* A reference of our own keeps the in-memory inode (its locks, its data_gen) alive meanwhile. */
	r = fs_inode_ref(fs, ino, 1, &i);
	if (r < 0)
		goto out;
	uint64_t gen = atomic_load(&i->data_gen);
	atomic_store(&fs->migrating_ino, ino);

	fs_throttle_begin(&pace.unit);
	r = dedup_file_migrate(from, dst, ino, ci.size, level, migrate_progress, &pace, &m);
	if (r < 0 && r != -ECANCELED) {
		/*
		 * A file rewritten, unsealed or deleted under the copy fails it
		 * (its recipe and chunks went away): that is a refusal, not damage.
		 */
		if (atomic_load(&i->data_gen) != gen ||
		    catalog_inode_get(fs->catalog, ino, &now) < 0 || now.nlink == 0 ||
		    now.state != CATALOG_FILE_SEALED || now.tier != ci.tier)
			r = -ESTALE;
	}
	if (r < 0)
		goto out_forget;

	pthread_rwlock_wrlock(&i->data_lock);
	if (atomic_load(&i->data_gen) != gen || (i->state_known && (!i->sealed || i->sealed_tier != ci.tier))) {
		r = -ESTALE;
		goto out_unlock;
	}
	r = catalog_begin(fs->catalog);
	if (r < 0)
		goto out_unlock;
	r = catalog_inode_get(fs->catalog, ino, &now);
	if (r >= 0 && (now.state != CATALOG_FILE_SEALED || now.tier != ci.tier || now.nlink == 0 || now.size != ci.size))
		r = -ESTALE;
	if (r >= 0)
		r = dedup_migration_commit(m);
	if (r >= 0) {
		DedupWriterStats ws;
		dedup_migration_stats(m, &ws);
		now.tier = to;
		now.stored = ws.stored_bytes;
		r = catalog_inode_update(fs->catalog, &now);
		ret->bytes = ws.logical_bytes;
		ret->new_bytes = ws.new_bytes;
		ret->stored_bytes = ws.stored_bytes;
	}
	if (r < 0) {
		catalog_rollback(fs->catalog);
		goto out_unlock;
	}
	r = catalog_commit(fs->catalog);
	/* The source's frames may be collected from now on: the switch must not be lost first. */
	if (r >= 0)
		r = catalog_sync(fs->catalog);
	if (r < 0)
		goto out_unlock;
	if (i->state_known)
		i->sealed_tier = to;
	r = 1;
	log_debug("moved inode %llu from tier %u to tier %u: %llu bytes, %llu new there",
		  (unsigned long long) ino, (unsigned) ci.tier, (unsigned) to, (unsigned long long) ret->bytes,
		  (unsigned long long) ret->new_bytes);
	pthread_rwlock_unlock(&i->data_lock);
	fs_data_attrs_changed(fs, ino);
	goto out_forget;

out_unlock:
	pthread_rwlock_unlock(&i->data_lock);
out_forget:
	atomic_store(&fs->migrating_ino, 0);
	dedup_migration_free(m);
	fs_inode_forget(fs, ino, 1);
out:
	pthread_mutex_unlock(&fs->migrate_lock);
	return r;
}

/* A directory met on the way up from a described file. */
typedef struct DescribeDir {
	uint64_t ino;
	char *path;
	CatalogInode ci;
} DescribeDir;

typedef struct Describe {
	Fs *fs;
	Catalog *reader;          /* for the scan: a long one must not hold the catalog lock */
	uint32_t tier;
	CatalogInode *files;      /* sealed on the tier, in inode order */
	char **paths;             /* theirs, NULL for one whose path could not be built */
	size_t n_files, cap_files;
	DescribeDir *dirs;        /* parents before children */
	size_t n_dirs, cap_dirs;
	size_t *slots;            /* open addressing over dirs by inode: index + 1, 0 free */
	size_t n_slots;
	bool incomplete;          /* a file was left out: forget the fingerprint */
} Describe;

static void describe_done(Describe *d) {
	for (size_t i = 0; i < d->n_files; i++)
		free(d->paths ? d->paths[i] : NULL);
	for (size_t i = 0; i < d->n_dirs; i++)
		free(d->dirs[i].path);
	free(d->files);
	free(d->paths);
	free(d->dirs);
	free(d->slots);
}

static int collect_file(const CatalogInode *ci, void *userdata) {
	Describe *d = userdata;
	if (ci->state != CATALOG_FILE_SEALED || ci->tier != d->tier)
		return 0;
	if (d->n_files == d->cap_files) {
		size_t n = MAX(d->cap_files * 2, (size_t) 64);
		CatalogInode *p = realloc(d->files, n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		d->files = p;
		d->cap_files = n;
	}
	d->files[d->n_files++] = *ci;
	return 0;
}

static size_t *dir_slot(Describe *d, uint64_t ino) {
	size_t k = (size_t) (ino * UINT64_C(0x9e3779b97f4a7c15)) & (d->n_slots - 1);
	while (d->slots[k] != 0 && d->dirs[d->slots[k] - 1].ino != ino)
		k = (k + 1) & (d->n_slots - 1);
	return &d->slots[k];
}

static int dir_insert(Describe *d, DescribeDir *dir) {
	if (d->n_dirs == d->cap_dirs) {
		size_t n = MAX(d->cap_dirs * 2, (size_t) 64);
		DescribeDir *p = realloc(d->dirs, n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		d->dirs = p;
		d->cap_dirs = n;
	}
	/* At most half full, so a probe always ends. */
	if ((d->n_dirs + 1) * 2 > d->n_slots) {
		size_t n = MAX(d->n_slots * 2, (size_t) 128);
		size_t *slots = calloc(n, sizeof(*slots));
		if (!slots)
			return -ENOMEM;
		free(d->slots);
		d->slots = slots;
		d->n_slots = n;
		for (size_t i = 0; i < d->n_dirs; i++)
			*dir_slot(d, d->dirs[i].ino) = i + 1;
	}
	d->dirs[d->n_dirs] = *dir;
	*dir_slot(d, dir->ino) = ++d->n_dirs;
	return 0;
}

/* The index of directory ino in d->dirs, found or added with its ancestors (depth bounds a damaged loop). */
static int dir_get(Describe *d, uint64_t ino, unsigned depth, size_t *ret) {
	char name[CATALOG_NAME_MAX + 1];
	uint64_t parent;
	int r;

	if (d->n_slots > 0 && *dir_slot(d, ino) != 0) {
		*ret = *dir_slot(d, ino) - 1;
		return 0;
	}
	if (depth > TIER_FILE_ATTRS_PATH_MAX / 2)
		return -ELOOP;
	DescribeDir dir = { .ino = ino };
	r = catalog_inode_get(d->reader, ino, &dir.ci);
	if (r < 0)
		return r;
	if (!S_ISDIR(dir.ci.mode))
		return -ENOTDIR;
	if (ino == CATALOG_ROOT_INO)
		dir.path = strdup("");
	else {
		size_t up;
		r = catalog_dirent_find(d->reader, ino, &parent, name, sizeof(name));
		if (r >= 0)
			r = dir_get(d, parent, depth + 1, &up);
		if (r < 0)
			return r;
		const char *base = d->dirs[up].path;
		if (asprintf(&dir.path, "%s%s%s", base, *base ? "/" : "", name) < 0)
			dir.path = NULL;
	}
	if (!dir.path)
		return -ENOMEM;
	if (strlen(dir.path) > TIER_FILE_ATTRS_PATH_MAX) {
		free(dir.path);
		return -ENAMETOOLONG;
	}
	r = dir_insert(d, &dir);
	if (r < 0) {
		free(dir.path);
		return r;
	}
	*ret = d->n_dirs - 1;
	return 0;
}

static int file_path(Describe *d, uint64_t ino, char **ret) {
	char name[CATALOG_NAME_MAX + 1];
	uint64_t parent;
	size_t up;
	int r = catalog_dirent_find(d->reader, ino, &parent, name, sizeof(name));
	if (r >= 0)
		r = dir_get(d, parent, 0, &up);
	if (r < 0)
		return r;
	const char *base = d->dirs[up].path;
	if (asprintf(ret, "%s%s%s", base, *base ? "/" : "", name) < 0)
		return -ENOMEM;
	if (strlen(*ret) > TIER_FILE_ATTRS_PATH_MAX) {
		free(*ret);
		*ret = NULL;
		return -ENAMETOOLONG;
	}
	return 0;
}

static void fingerprint_add(XXH3_state_t *h, const CatalogInode *ci, const char *path) {
	/*
	 * Not atime: reads would rewrite the description.  Not a directory's
	 * times either: every file created on the hot tier changes its
	 * directory's, and the description would be rewritten at every
	 * collection of a busy mount for nothing but them.
	 */
	bool dir = S_ISDIR(ci->mode);
	const uint64_t f[] = { ci->ino, ci->mode, ci->uid, ci->gid, dir ? 0 : ci->size,
			       dir ? 0 : (uint64_t) ci->mtime_ns, dir ? 0 : (uint64_t) ci->ctime_ns, ci->file_class };
	(void) XXH3_64bits_update(h, f, sizeof(f));
	(void) XXH3_64bits_update(h, path, strlen(path) + 1);
}

static int attrs_of(const CatalogInode *ci, const char *path, TierFileAttrs *a) {
	*a = (TierFileAttrs) {
		.mode = ci->mode,
		.uid = ci->uid,
		.gid = ci->gid,
		.file_class = S_ISREG(ci->mode) ? ci->file_class : 0,
		.ino = ci->ino,
		.size = S_ISREG(ci->mode) ? ci->size : 0,
		.atime_ns = ci->atime_ns,
		.mtime_ns = ci->mtime_ns,
		.ctime_ns = ci->ctime_ns,
	};
	if (strlen(path) > TIER_FILE_ATTRS_PATH_MAX)
		return -ENAMETOOLONG;
	strcpy(a->path, path);
	return 0;
}

/* Writes the description of d's files (fs->describe_lock held). */
static int describe_write(Describe *d, DedupStore *store) {
	_cleanup_free_ uint8_t *blob = malloc(TIER_FILE_ATTRS_SIZE_MAX);
	_cleanup_free_ TierFileAttrs *a = malloc(sizeof(*a));
	DedupDescribeWriter *w = NULL;
	struct timespec now;
	size_t len;
	int r;

	if (!blob || !a)
		return -ENOMEM;
	/* The generation only tells descriptions apart in reports: the wall clock will do. */
	clock_gettime(CLOCK_REALTIME, &now);
	r = dedup_describe_begin(store, (uint64_t) now.tv_sec * 1000000000 + (uint64_t) now.tv_nsec, &w);
	if (r < 0)
		return r;
	for (size_t i = 0; r >= 0 && i < d->n_dirs; i++) {
		r = attrs_of(&d->dirs[i].ci, d->dirs[i].path, a);
		if (r >= 0)
			r = tier_file_attrs_format(a, blob, TIER_FILE_ATTRS_SIZE_MAX, &len);
		if (r >= 0)
			r = dedup_describe_add(w, blob, len, false, 0, 0);
	}
	for (size_t i = 0; r >= 0 && i < d->n_files; i++) {
		const CatalogInode *ci = &d->files[i];
		CatalogInode now_ci;
		if (!d->paths[i])
			continue;
		/* Moved, rewritten or deleted since the scan: left out (invariant 5). */
		int q = catalog_inode_get(d->fs->catalog, ci->ino, &now_ci);
		if (q < 0 || now_ci.state != CATALOG_FILE_SEALED || now_ci.tier != d->tier || now_ci.size != ci->size ||
		    now_ci.nlink == 0) {
			if (q < 0 && q != -ENOENT) {
				r = q;
				break;
			}
			d->incomplete = true;
			continue;
		}
		r = attrs_of(&now_ci, d->paths[i], a);
		if (r >= 0 && ci->file_class == TIER_CLASS_ARCHIVELOG) {
			q = catalog_archivelog_get(d->fs->catalog, ci->ino, &a->archivelog);
			if (q < 0 && q != -ENOENT)
				r = q;
			a->has_archivelog = q >= 0;
		}
		if (r >= 0)
			r = tier_file_attrs_format(a, blob, TIER_FILE_ATTRS_SIZE_MAX, &len);
		if (r >= 0)
			r = dedup_describe_add(w, blob, len, true, ci->ino, ci->size);
		if (r == -ESTALE) {
			d->incomplete = true;
			r = 0;
		}
	}
	if (r >= 0)
		r = dedup_describe_commit(w);
	dedup_describe_free(w);
	return r;
}

int fs_tier_describe(Fs *fs, uint32_t n) {
	DedupStore *store = fs_tier_store(fs, n);
	Describe d = { .fs = fs, .tier = n };
	int r;

	if (n == 0 || !store)
		return -ENXIO;
	pthread_mutex_lock(&fs->describe_lock);
	XXH3_state_t *h = XXH3_createState();
	if (!h || XXH3_64bits_reset(h) != XXH_OK) {
		r = -ENOMEM;
		goto out;
	}
	r = catalog_open_reader(fs->catalog, &d.reader);
	if (r < 0)
		goto out;
	r = catalog_files_foreach(d.reader, collect_file, &d);
	if (r < 0)
		goto out;
	d.paths = calloc(MAX(d.n_files, (size_t) 1), sizeof(*d.paths));
	if (!d.paths) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < d.n_files; i++) {
		r = file_path(&d, d.files[i].ino, &d.paths[i]);
		if (r == -ENOMEM)
			goto out;
		if (r < 0) {
			/* Unlinked meanwhile, or a path too long to record: not described, said once per write. */
			log_debug_errno(r, "tier %u: inode %llu left out of the description: %m", (unsigned) n,
					(unsigned long long) d.files[i].ino);
			d.incomplete = true;
			continue;
		}
		fingerprint_add(h, &d.files[i], d.paths[i]);
	}
	for (size_t i = 0; i < d.n_dirs; i++)
		fingerprint_add(h, &d.dirs[i].ci, d.dirs[i].path);
	/* 0 means unknown: a fingerprint that happens to be 0 is written every time, which is only slower. */
	uint64_t fp = XXH3_64bits_digest(h);
	if (fp != 0 && fp == fs->tiers[n].described) {
		r = 0;
		goto out;
	}
	r = describe_write(&d, store);
	if (r == -ENOSPC) {
		/*
		 * A full tier must stay collectable, and collecting it under a
		 * description that lists files deleted since would have recovery
		 * report them lost: drop the description instead.  The pass after
		 * the collection, with room again, writes a new one.
		 */
		r = dedup_describe_remove(store);
		if (r >= 0)
			log_warning("tier %u (%s) is too full for its description: removed until there is room again, "
				    "recovery from it is not possible meanwhile",
				    (unsigned) n, fs->tiers[n].config->name);
		fs->tiers[n].described = 0;
		goto out;
	}
	if (r >= 0) {
		fs->tiers[n].described = d.incomplete ? 0 : fp;
		log_debug("tier %u: description written: %zu files, %zu directories", (unsigned) n, d.n_files,
			  d.n_dirs);
	}
out:
	XXH3_freeState(h);
	catalog_close(d.reader);
	describe_done(&d);
	pthread_mutex_unlock(&fs->describe_lock);
	return r;
}

int fs_tiers_describe(Fs *fs) {
	int first = 0;
	for (uint32_t n = 1; n < fs->n_tiers; n++) {
		if (!fs->tiers[n].store)
			continue;
		int r = fs_tier_describe(fs, n);
		if (r < 0) {
			log_warning_errno(r, "Failed to describe tier %u (%s) for disaster recovery; its collection waits "
					     "until it is: %m",
					  (unsigned) n, fs->tiers[n].config->name);
			if (first == 0)
				first = r;
		}
	}
	return first;
}
