/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target for the config parser: arbitrary bytes must be either accepted
 * as a config that keeps every promise of config.h, or rejected with a
 * "FILE:..." message; never a crash or a leak.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#include "common/config.h"
#include "tests/fuzz/fuzz.h"

#define FUZZ_FILE "fuzz.conf"

static void check(bool ok) {
	if (!ok)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	Config c;
	char *error = NULL;
	int r = config_parse((const char *) data, size, FUZZ_FILE, &c, &error);

	if (r < 0) {
		check(r == -EINVAL || r == -ENOMEM);
		check(r == -ENOMEM || (error && strncmp(error, FUZZ_FILE ":", strlen(FUZZ_FILE ":")) == 0));
		check(c.n_tiers == 0 && !c.data_dir && !c.source);
		free(error);
		return 0;
	}

	check(!error);
	check(strcmp(c.source, FUZZ_FILE) == 0);
	check(c.data_dir && c.data_dir[0] == '/' && strlen(c.data_dir) < CONFIG_PATH_MAX);
	check(c.log_level >= LOG_ERR && c.log_level <= LOG_DEBUG);
	check(c.n_tiers >= 1 && c.n_tiers <= CONFIG_TIERS_MAX);

	size_t hot = 0;
	for (size_t i = 0; i < c.n_tiers; i++) {
		const ConfigTier *t = &c.tiers[i];
		check(t->name && strlen(t->name) >= 1 && strlen(t->name) <= CONFIG_TIER_NAME_MAX);
		check(tier_role_to_string(t->role) && tier_backend_to_string(t->backend));
		check(t->path && strlen(t->path) < CONFIG_PATH_MAX);
		check(t->backend == TIER_BACKEND_NFS ? strncasecmp(t->path, "nfs://", 6) == 0 : t->path[0] == '/');
		hot += t->role == TIER_ROLE_HOT;
		for (size_t j = 0; j < i; j++)
			check(strcmp(t->name, c.tiers[j].name) != 0 && strcmp(t->path, c.tiers[j].path) != 0);
	}
	check(hot == 1);
	check(config_tier_by_role(&c, TIER_ROLE_HOT)->backend == TIER_BACKEND_DIR);

	config_done(&c);
	return 0;
}
