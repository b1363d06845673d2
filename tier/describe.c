/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * describe.c — self-describing lower tiers (disaster recovery: recover.c).
 *
 * Each lower tier holds a description of the files sealed on it
 * (dedup/describe.h), rewritten whole from the catalog by
 * tier_set_describe() after each batch of moves (tierctl migrate, a pass of
 * the policy worker), before every collection of that tier, and at
 * unmount; at most once per call, and only if what it lists changed (a
 * fingerprint of paths and attributes, not atime).  Unlink, rename and
 * chmod of cold files stay catalog-only and never wait on the tier: the
 * description catches up at the next of those points.  Invariants:
 *  1. The daemon collects a lower tier only right after its description
 *     was written (or found current, or removed because the tier is too
 *     full to hold a new one; fs/tiers.c, fs_tiers_gc()): the collector
 *     takes only chunks of files deleted or moved before that, which the
 *     description no longer lists.  A file deleted in the short window
 *     between the two may be listed with chunks gone: recovery reports it
 *     as lost; every byte it restores is checked against its chunk id, so
 *     never a wrong one.
 *  2. A file that changes or moves while the description is written is left
 *     out and the fingerprint forgotten, so the next call writes it again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/array.h"
#include "common/log.h"
#include "common/macros.h"
#include "dedup/describe.h"
#include "tier/class.h"
#include "tier/file-attrs.h"
#include "tier/tiers-internal.h"

/* A directory met on the way up from a described file. */
typedef struct DescribeDir {
	uint64_t ino;
	char *path;
	CatalogInode ci;
} DescribeDir;

typedef struct Describe {
	TierSet *set;
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
	if (ARRAY_RESERVE_ONE(d->files, d->cap_files, d->n_files, 64) < 0)
		return -ENOMEM;
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
	if (ARRAY_RESERVE_ONE(d->dirs, d->cap_dirs, d->n_dirs, 64) < 0)
		return -ENOMEM;
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

/* FNV-1a: a change detector for an in-memory fingerprint, never stored; tier/ keeps off the frames' hash. */
static void fingerprint_update(uint64_t *h, const void *p, size_t n) {
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		*h = (*h ^ b[i]) * UINT64_C(0x100000001b3);
}

static void fingerprint_add(uint64_t *h, const CatalogInode *ci, const char *path) {
	/*
	 * Not atime: reads would rewrite the description.  Not a directory's
	 * times either: every file created on the hot tier changes its
	 * directory's, and the description would be rewritten at every
	 * collection of a busy mount for nothing but them.
	 */
	bool dir = S_ISDIR(ci->mode);
	const uint64_t f[] = { ci->ino, ci->mode, ci->uid, ci->gid, dir ? 0 : ci->size,
			       dir ? 0 : (uint64_t) ci->mtime_ns, dir ? 0 : (uint64_t) ci->ctime_ns, ci->file_class };
	fingerprint_update(h, f, sizeof(f));
	fingerprint_update(h, path, strlen(path) + 1);
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

/*
 * The generation of tier n's next description or removal: the wall clock,
 * but always above the one the catalog last recorded (a clock stepped
 * back must not make a new description look older than an old one).
 */
static uint64_t next_generation(TierSet *s, uint32_t n) {
	struct timespec now;
	uint64_t last = 0;
	bool present;
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t g = (uint64_t) now.tv_sec * 1000000000 + (uint64_t) now.tv_nsec;
	if (catalog_description_get(s->catalog, n, &last, &present) < 0)
		last = 0;
	return MAX(g, last + 1);
}

/* Writes the description of d's files, of generation `generation` (TierSet.describe_lock held). */
static int describe_write(Describe *d, DedupStore *store, uint64_t generation) {
	_cleanup_free_ uint8_t *blob = malloc(TIER_FILE_ATTRS_SIZE_MAX);
	_cleanup_free_ TierFileAttrs *a = malloc(sizeof(*a));
	DedupDescribeWriter *w = NULL;
	size_t len;
	int r;

	if (!blob || !a)
		return -ENOMEM;
	r = dedup_describe_begin(store, generation, &w);
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
		/* Moved, rewritten or deleted since the scan: left out (invariant 2). */
		int q = catalog_inode_get(d->set->catalog, ci->ino, &now_ci);
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
			q = catalog_archivelog_get(d->set->catalog, ci->ino, &a->archivelog);
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

int tier_set_describe(TierSet *s, uint32_t n) {
	DedupStore *store = tier_set_store(s, n);
	Describe d = { .set = s, .tier = n };
	uint64_t h = UINT64_C(0xcbf29ce484222325);
	int r;

	if (n == 0 || !store)
		return -ENXIO;
	if (tier_set_fenced(s, n))
		return -EROFS;
	pthread_mutex_lock(&s->describe_lock);
	r = catalog_open_reader(s->catalog, &d.reader);
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
		fingerprint_add(&h, &d.files[i], d.paths[i]);
	}
	for (size_t i = 0; i < d.n_dirs; i++)
		fingerprint_add(&h, &d.dirs[i].ci, d.dirs[i].path);
	/* 0 means unknown: a fingerprint that happens to be 0 is written every time, which is only slower. */
	if (h != 0 && h == s->tiers[n].described) {
		r = 0;
		goto out;
	}
	uint64_t generation = next_generation(s, n);
	r = describe_write(&d, store, generation);
	/* Recorded once the description is durable: the one on the tier is never older than the catalog says. */
	if (r >= 0)
		r = catalog_description_set(s->catalog, n, generation, true);
	if (r == -ENOSPC) {
		/*
		 * A full tier must stay collectable, and collecting it under a
		 * description that lists files deleted since would have recovery
		 * report them lost: drop the description instead.  The pass after
		 * the collection, with room again, writes a new one.
		 */
		r = dedup_describe_remove(store);
		/* From now on any description found there is an older one put back. */
		if (r >= 0)
			r = catalog_description_set(s->catalog, n, next_generation(s, n), false);
		if (r >= 0)
			r = 1;
		s->tiers[n].described = 0;
		goto out;
	}
	if (r >= 0) {
		s->tiers[n].described = d.incomplete ? 0 : h;
		log_debug("tier %u: description written: %zu files, %zu directories", (unsigned) n, d.n_files,
			  d.n_dirs);
	}
out:
	catalog_close(d.reader);
	describe_done(&d);
	pthread_mutex_unlock(&s->describe_lock);
	return r;
}

void tier_set_describe_again(TierSet *s, uint32_t n) {
	pthread_mutex_lock(&s->describe_lock);
	if (n < s->n_tiers)
		s->tiers[n].described = 0;
	pthread_mutex_unlock(&s->describe_lock);
}

int tier_set_description_check(TierSet *s, uint32_t n, uint64_t *ret_found, uint64_t *ret_recorded) {
	DedupStore *store = tier_set_store(s, n);
	DedupDescriptionInfo info = {};
	_cleanup_free_ void *buf = NULL;
	uint64_t recorded = 0;
	bool present = false;
	size_t len;
	int r;

	if (n == 0 || !store)
		return -ENXIO;
	/* Under the lock a rewrite holds from the write to the catalog's record of it: never half of one seen. */
	pthread_mutex_lock(&s->describe_lock);
	r = catalog_description_get(s->catalog, n, &recorded, &present);
	if (r == -ENOENT) {
		/* None written since the catalog could record it: nothing to compare with. */
		r = 0;
		goto out;
	}
	if (r < 0)
		goto out;
	r = dedup_description_load_keys(tier_set_backend(s, n), store, &buf, &len);
	if (r == -ENOENT) {
		r = present ? -ENOENT : 0;
		goto out;
	}
	if (r >= 0)
		r = dedup_description_parse(buf, len, NULL, NULL, &info);
	if (r < 0)
		goto out;
	/* The tier number and the generation are authenticated with a sealed description's contents. */
	if (info.tier != n)
		r = -EBADMSG;
	else if (!present || info.generation < recorded)
		r = -ESTALE;
out:
	pthread_mutex_unlock(&s->describe_lock);
	*ret_found = info.generation;
	*ret_recorded = recorded;
	return r;
}
