/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * class.c — file classes from Oracle names and the FRA layout.
 *
 * The class is decided once, at create, from the file's name and the name of
 * the directory it is created in (OMF puts archivelogs under
 * archivelog/YYYY_MM_DD/, backup pieces under backupset/YYYY_MM_DD/, image
 * copies under datafile/, online redo under onlinelog/, ...).  Files rewritten
 * in place are kept raw whatever their class (fs/ marks them passthrough).
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "common/macros.h"
#include "tier/class.h"

typedef struct ClassRule {
	const char *dir;   /* fnmatch pattern on the parent directory's name, or NULL */
	const char *name;  /* fnmatch pattern on the file name, or NULL */
	TierFileClass class;
} ClassRule;

/* First match wins: passthrough before everything, so a redo log is never sealed. */
static const ClassRule rules[] = {
	{ "onlinelog", NULL, TIER_CLASS_PASSTHROUGH },
	{ "controlfile", NULL, TIER_CLASS_PASSTHROUGH },
	{ "flashback", NULL, TIER_CLASS_PASSTHROUGH },
	{ NULL, "*.ctl", TIER_CLASS_PASSTHROUGH },
	{ NULL, "*.flb", TIER_CLASS_PASSTHROUGH },
	{ NULL, "*.rdo", TIER_CLASS_PASSTHROUGH },
	{ NULL, "redo*.log", TIER_CLASS_PASSTHROUGH },
	{ NULL, "o1_mf_*_*_*.log", TIER_CLASS_PASSTHROUGH },
	{ NULL, "*.arc", TIER_CLASS_ARCHIVELOG },
	{ "archivelog", NULL, TIER_CLASS_ARCHIVELOG },
	/*
	 * OMF names an archivelog backup set's pieces o1_mf_annnn_TAG_*: they
	 * carry archived logs' bytes, which dedup against the logs only when
	 * cut by the same chunker.
	 */
	{ NULL, "o1_mf_annnn_*", TIER_CLASS_ARCHIVELOG_BACKUP },
	{ NULL, "*.bkp", TIER_CLASS_BACKUPPIECE },
	{ NULL, "*.bck", TIER_CLASS_BACKUPPIECE },
	{ "backupset", NULL, TIER_CLASS_BACKUPPIECE },
	{ "autobackup", NULL, TIER_CLASS_BACKUPPIECE },
	{ "datafile", NULL, TIER_CLASS_IMAGECOPY },
	{ NULL, "*.dbf", TIER_CLASS_IMAGECOPY },
	{ NULL, "*.cpy", TIER_CLASS_IMAGECOPY },
};

static const char *const class_names[_TIER_CLASS_MAX] = {
	[TIER_CLASS_OTHER] = "other",
	[TIER_CLASS_ARCHIVELOG] = "archivelog",
	[TIER_CLASS_BACKUPPIECE] = "backuppiece",
	[TIER_CLASS_IMAGECOPY] = "imagecopy",
	[TIER_CLASS_PASSTHROUGH] = "passthrough",
	[TIER_CLASS_ARCHIVELOG_BACKUP] = "archivelogbackup",
};

TierFileClass tier_classify(const Config *config, const char *dir_name, const char *name) {
	/* The operator's patterns first: a name they know better than the rules below. */
	static const TierFileClass of_config[_CONFIG_CLASS_MAX] = {
		[CONFIG_CLASS_ARCHIVELOG] = TIER_CLASS_ARCHIVELOG,
		[CONFIG_CLASS_BACKUPPIECE] = TIER_CLASS_BACKUPPIECE,
		[CONFIG_CLASS_IMAGECOPY] = TIER_CLASS_IMAGECOPY,
		[CONFIG_CLASS_OTHER] = TIER_CLASS_OTHER,
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
	return TIER_CLASS_OTHER;
}

bool tier_class_is_sealed(TierFileClass c) {
	return c != TIER_CLASS_PASSTHROUGH && c < _TIER_CLASS_MAX;
}

bool tier_database_of_path(const char *path, char *ret, size_t size) {
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

const char *tier_class_to_string(TierFileClass c) {
	return c < _TIER_CLASS_MAX ? class_names[c] : "unknown";
}

int tier_class_from_string(const char *s) {
	for (int c = 0; c < _TIER_CLASS_MAX; c++)
		if (strcmp(class_names[c], s) == 0)
			return c;
	return -EINVAL;
}

void tier_class_names_join(char *buf, size_t size) {
	size_t n = 0;
	buf[0] = '\0';
	for (int c = 0; c < _TIER_CLASS_MAX && n < size; c++) {
		int k = snprintf(buf + n, size - n, "%s%s", c ? ", " : "", class_names[c]);
		n += k > 0 ? (size_t) k : 0;
	}
}

const ConfigClassPolicy *tier_class_policy(const Config *config, TierFileClass c) {
	static const ConfigClass map[_TIER_CLASS_MAX] = {
		[TIER_CLASS_OTHER] = CONFIG_CLASS_OTHER,
		[TIER_CLASS_ARCHIVELOG] = CONFIG_CLASS_ARCHIVELOG,
		[TIER_CLASS_BACKUPPIECE] = CONFIG_CLASS_BACKUPPIECE,
		[TIER_CLASS_IMAGECOPY] = CONFIG_CLASS_IMAGECOPY,
		[TIER_CLASS_ARCHIVELOG_BACKUP] = CONFIG_CLASS_ARCHIVELOG,
	};
	return tier_class_is_sealed(c) ? &config->classes[map[c]] : NULL;
}
