/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdio.h>

#include "catalog/catalog.h"
#include "common/config.h"
#include "dedup/store.h"
#include "tier/tiers.h"

/*
 * Disaster recovery (recover.c): rebuilds every file the description of the
 * lower tier at source lists into catalog (which must be empty) and the hot
 * tier's store hot_store, reading chunks from that tier's containers alone;
 * tiers are the mount's own (source must be none of them).  Writes what it
 * did to out, a line per file it could not restore.  Returns 0 (every file
 * restored), 1 (some could not be: listed on out), or a negative errno, with
 * *ret_error (free it; NULL on success or when out of memory) saying why.
 * spool(userdata) gives each file's writer a new empty file (an O_TMPFILE
 * on the hot tier) to keep its recipe in, so that restoring a file of any
 * size takes the same memory; a negative errno keeps it in memory.
 */
int tier_recover(const Config *config, const TierSet *tiers, Catalog *catalog, DedupStore *hot_store,
		 int (*spool)(void *userdata), void *userdata, const char *source, FILE *out, char **ret_error);
