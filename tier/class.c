/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * classify.c — file classes from Oracle names and the FRA layout.
 *
 * The class is decided once, at create, from the file's name and the name of
 * the directory it is created in (OMF puts archivelogs under
 * archivelog/YYYY_MM_DD/, backup pieces under backupset/YYYY_MM_DD/, image
 * copies under datafile/, online redo under onlinelog/, ...).  Files rewritten
 * in place are kept raw whatever their class (see FsInode.overwritten).
 */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "common/macros.h"
#include "fs/fs-internal.h"

typedef struct ClassRule {
	const char *dir;   /* fnmatch pattern on the parent directory's name, or NULL */
	const char *name;  /* fnmatch pattern on the file name, or NULL */
	FsFileClass class;
} ClassRule;

/* First match wins: passthrough before everything, so a redo log is never sealed. */
static const ClassRule rules[] = {
	{ "onlinelog", NULL, FS_CLASS_PASSTHROUGH },
	{ "controlfile", NULL, FS_CLASS_PASSTHROUGH },
	{ "flashback", NULL, FS_CLASS_PASSTHROUGH },
	{ NULL, "*.ctl", FS_CLASS_PASSTHROUGH },
	{ NULL, "*.flb", FS_CLASS_PASSTHROUGH },
	{ NULL, "*.rdo", FS_CLASS_PASSTHROUGH },
	{ NULL, "redo*.log", FS_CLASS_PASSTHROUGH },
	{ NULL, "o1_mf_*_*_*.log", FS_CLASS_PASSTHROUGH },
	{ NULL, "*.arc", FS_CLASS_ARCHIVELOG },
	{ "archivelog", NULL, FS_CLASS_ARCHIVELOG },
	/*
	 * OMF names an archivelog backup set's pieces o1_mf_annnn_TAG_*: they
	 * carry archived logs' bytes, which dedup against the logs only when
	 * cut by the same chunker.
	 */
	{ NULL, "o1_mf_annnn_*", FS_CLASS_ARCHIVELOG_BACKUP },
	{ NULL, "*.bkp", FS_CLASS_BACKUPPIECE },
	{ NULL, "*.bck", FS_CLASS_BACKUPPIECE },
	{ "backupset", NULL, FS_CLASS_BACKUPPIECE },
	{ "autobackup", NULL, FS_CLASS_BACKUPPIECE },
	{ "datafile", NULL, FS_CLASS_IMAGECOPY },
	{ NULL, "*.dbf", FS_CLASS_IMAGECOPY },
	{ NULL, "*.cpy", FS_CLASS_IMAGECOPY },
};

static const char *const class_names[_FS_CLASS_MAX] = {
	[FS_CLASS_OTHER] = "other",
	[FS_CLASS_ARCHIVELOG] = "archivelog",
	[FS_CLASS_BACKUPPIECE] = "backuppiece",
	[FS_CLASS_IMAGECOPY] = "imagecopy",
	[FS_CLASS_PASSTHROUGH] = "passthrough",
	[FS_CLASS_ARCHIVELOG_BACKUP] = "archivelogbackup",
};

FsFileClass fs_classify(const Config *config, const char *dir_name, const char *name) {
	/* The operator's patterns first: a name they know better than the rules below. */
	static const FsFileClass of_config[_CONFIG_CLASS_MAX] = {
		[CONFIG_CLASS_ARCHIVELOG] = FS_CLASS_ARCHIVELOG,
		[CONFIG_CLASS_BACKUPPIECE] = FS_CLASS_BACKUPPIECE,
		[CONFIG_CLASS_IMAGECOPY] = FS_CLASS_IMAGECOPY,
		[CONFIG_CLASS_OTHER] = FS_CLASS_OTHER,
	};
	for (size_t i = 0; config && i < config->n_name_patterns; i++)
		if (fnmatch(config->name_patterns[i].glob, name, 0) == 0)
			return of_config[config->name_patterns[i].file_class];
	for (size_t k = 0; k < ELEMENTSOF(rules); k++) {
		const ClassRule *r = &rules[k];
		if (r->dir && (!dir_name || fnmatch(r->dir, dir_name, 0) != 0))
			continue;
		if (r->name && fnmatch(r->name, name, 0) != 0)
			continue;
		return r->class;
	}
	return FS_CLASS_OTHER;
}

bool fs_class_is_sealed(FsFileClass c) {
	return c != FS_CLASS_PASSTHROUGH && c < _FS_CLASS_MAX;
}

bool fs_database_of_path(const char *path, char *ret, size_t size) {
	static const char *const areas[] = { "archivelog", "backupset", "autobackup", "datafile",
					     "onlinelog", "controlfile", "flashback" };
	const char *prev = NULL, *prev_end = NULL;

	for (const char *p = path; *p;) {
		while (*p == '/')
			p++;
		const char *end = strchrnul(p, '/');
		for (size_t k = 0; prev && k < ELEMENTSOF(areas); k++)
			if ((size_t) (end - p) == strlen(areas[k]) && strncmp(p, areas[k], (size_t) (end - p)) == 0) {
				snprintf(ret, size, "%.*s", (int) (prev_end - prev), prev);
				return true;
			}
		if (end > p) {
			prev = p;
			prev_end = end;
		}
		p = end;
	}
	return false;
}

const char *fs_class_to_string(FsFileClass c) {
	return c < _FS_CLASS_MAX ? class_names[c] : "unknown";
}

int fs_class_from_string(const char *s) {
	for (int c = 0; c < _FS_CLASS_MAX; c++)
		if (strcmp(class_names[c], s) == 0)
			return c;
	return -EINVAL;
}

void fs_class_names_join(char *buf, size_t size) {
	size_t n = 0;
	buf[0] = '\0';
	for (int c = 0; c < _FS_CLASS_MAX && n < size; c++) {
		int k = snprintf(buf + n, size - n, "%s%s", c ? ", " : "", class_names[c]);
		n += k > 0 ? (size_t) k : 0;
	}
}

/* The config's settings for a sealed class; NULL for passthrough. */
const ConfigClassPolicy *fs_class_policy(const Fs *fs, FsFileClass c) {
	static const ConfigClass map[_FS_CLASS_MAX] = {
		[FS_CLASS_OTHER] = CONFIG_CLASS_OTHER,
		[FS_CLASS_ARCHIVELOG] = CONFIG_CLASS_ARCHIVELOG,
		[FS_CLASS_BACKUPPIECE] = CONFIG_CLASS_BACKUPPIECE,
		[FS_CLASS_IMAGECOPY] = CONFIG_CLASS_IMAGECOPY,
		[FS_CLASS_ARCHIVELOG_BACKUP] = CONFIG_CLASS_ARCHIVELOG,
	};
	return fs_class_is_sealed(c) ? &fs->config->classes[map[c]] : NULL;
}

DedupChunkerParams fs_class_chunker(const ConfigClassPolicy *p) {
	return p->chunking == CONFIG_CHUNKING_FIXED ? DEDUP_CHUNKER_PARAMS_FIXED(p->chunk_size)
						    : DEDUP_CHUNKER_PARAMS_CDC(p->chunk_size);
}
