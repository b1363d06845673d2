/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * File classes, from Oracle names and the FRA layout (class.c).  A file's
 * class is decided once, at create, and kept in the catalog; it decides
 * whether the file is sealed, how it is chunked (fs/) and where and when it
 * moves (the planner, tier/planner.h).
 */

#include <stdbool.h>
#include <stddef.h>

#include "common/config.h"

typedef enum TierFileClass {
	TIER_CLASS_OTHER,
	TIER_CLASS_ARCHIVELOG,
	TIER_CLASS_BACKUPPIECE,
	TIER_CLASS_IMAGECOPY,
	TIER_CLASS_PASSTHROUGH,     /* online redo, control files, flashback logs: always raw */
	TIER_CLASS_ARCHIVELOG_BACKUP, /* BACKUP ARCHIVELOG pieces: archived logs' bytes, chunked like them */
	_TIER_CLASS_MAX,
} TierFileClass;

/*
 * The class of a new file named name in a directory named dir_name (NULL:
 * unknown), by the config's name patterns (config may be NULL), then the
 * built-in rules.  Can't fail.
 */
TierFileClass tier_classify(const Config *config, const char *dir_name, const char *name);
/* Whether files of class c are sealed (chunked, deduplicated, movable): every class but passthrough. */
bool tier_class_is_sealed(TierFileClass c);
/* A static string; "unknown" out of range. */
const char *tier_class_to_string(TierFileClass c);
/* The class named s, or -EINVAL. */
int tier_class_from_string(const char *s);
/* Every class name, comma separated, for error messages. */
void tier_class_names_join(char *buf, size_t size);
/*
 * The config's settings for a sealed class (borrowed from config); NULL for
 * passthrough.
 */
const ConfigClassPolicy *tier_class_policy(const Config *config, TierFileClass c);
/*
 * The database a file belongs to by the FRA layout, DEST/DB_UNIQUE_NAME/
 * {archivelog,backupset,autobackup,datafile,onlinelog,controlfile,flashback}/...:
 * the component before the first such area, copied into ret (NUL-terminated,
 * truncated to size).  Returns false when the path follows no such layout.
 */
bool tier_database_of_path(const char *path, char *ret, size_t size);
