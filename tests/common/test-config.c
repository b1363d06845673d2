/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Unit tests for common/config.c: valid files, one test per kind of error
 * (each checking the whole "FILE:LINE: problem" message), sizes, the
 * embedded default, loading from disk and config_done() on partial structs.
 */
#undef NDEBUG
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "common/config.h"
#include "common/macros.h"

#define FILE_NAME "/etc/fratier.conf"

static char *mfree(char *p) {
	free(p);
	return NULL;
}

static bool config_is_zero(const Config *c) {
	static const Config zero;
	return memcmp(c, &zero, sizeof(zero)) == 0;
}

static void parse_ok(const char *text, Config *ret) {
	_cleanup_free_ char *error = NULL;
	int r = config_parse(text, strlen(text), FILE_NAME, ret, &error);
	if (r < 0) {
		fprintf(stderr, "unexpected failure (%d): %s\n--- input:\n%s---\n", r, error ? error : "(no message)", text);
		abort();
	}
	assert(!error);
	assert(strcmp(ret->source, FILE_NAME) == 0);
}

/* Parses len bytes of text, expecting exactly this message. */
static void parse_fails_len(const char *text, size_t len, const char *expected) {
	_cleanup_free_ char *error = NULL;
	Config c;
	memset(&c, 0x5a, sizeof(c)); /* the parser must zero it, not just leave it */

	int r = config_parse(text, len, FILE_NAME, &c, &error);
	if (r != -EINVAL || !error || strcmp(error, expected) != 0) {
		fprintf(stderr, "expected: %s\n     got: %d %s\n--- input:\n%.*s---\n", expected, r,
			error ? error : "(no message)", (int) MIN(len, 2000), text);
		abort();
	}
	assert(config_is_zero(&c));

	/* Without ret_error the result is the same, and nothing leaks. */
	assert(config_parse(text, len, FILE_NAME, &c, NULL) == -EINVAL);
	assert(config_is_zero(&c));
}

static void parse_fails(const char *text, const char *expected) {
	parse_fails_len(text, strlen(text), expected);
}

#define MAIN "[fratier]\ndata_dir = /srv/fratier\n"

static void test_full(void) {
	_cleanup_(config_done) Config c = {};

	parse_ok("; fratier config\n"
		 "# both comment styles\n"
		 "\n"
		 "[fratier]\n"
		 "data_dir = /srv//fratier/ ; trailing comment\n"
		 "allow_other = Yes\n"
		 "log_level = debug\n"
		 "\n"
		 "[tier fast]\n"
		 "role = hot\n"
		 "backend = dir\n"
		 "path = /nvme/./fratier\n"
		 "capacity = 2T\n"
		 "reserve = 16GiB\n"
		 "[tier big]\n"
		 "role = capacity\n"
		 "path = big/dir\n"
		 "capacity = 0\n"
		 "[tier share]\n"
		 "role = nfs\n"
		 "path = nfs://filer.example.com/export/fratier?version=4\n"
		 "reserve = 1P\n"
		 "zstd_level = 19\n"
		 "[tier kernelnfs]\n"
		 "role = nfs\n"
		 "backend = dir\n"
		 "path=/mnt/nfs\n",
		 &c);

	assert(strcmp(c.data_dir, "/srv/fratier") == 0);
	assert(c.allow_other);
	assert(c.log_level == LOG_DEBUG);
	assert(c.n_tiers == 4);

	assert(strcmp(c.tiers[0].name, "fast") == 0);
	assert(c.tiers[0].role == TIER_ROLE_HOT);
	assert(c.tiers[0].backend == TIER_BACKEND_DIR);
	assert(strcmp(c.tiers[0].path, "/nvme/fratier") == 0);
	assert(c.tiers[0].capacity == 2ull << 40);
	assert(c.tiers[0].reserve == 16ull << 30);

	assert(strcmp(c.tiers[1].name, "big") == 0);
	assert(c.tiers[1].role == TIER_ROLE_CAPACITY);
	assert(c.tiers[1].backend == TIER_BACKEND_DIR);
	assert(strcmp(c.tiers[1].path, "/srv/fratier/big/dir") == 0);
	assert(c.tiers[1].capacity == 0);
	assert(c.tiers[1].reserve == 0);

	assert(c.tiers[2].role == TIER_ROLE_NFS);
	assert(c.tiers[2].backend == TIER_BACKEND_NFS);
	assert(strcmp(c.tiers[2].path, "nfs://filer.example.com/export/fratier?version=4") == 0);
	assert(c.tiers[2].reserve == 1ull << 50);
	assert(c.tiers[2].has_zstd_level && c.tiers[2].zstd_level == 19);
	assert(!c.tiers[0].has_zstd_level);
	assert(c.tiers[1].has_zstd_level && c.tiers[1].zstd_level == CONFIG_ZSTD_LEVEL_COLD);

	assert(c.tiers[3].role == TIER_ROLE_NFS);
	assert(c.tiers[3].backend == TIER_BACKEND_DIR);
	assert(strcmp(c.tiers[3].path, "/mnt/nfs") == 0);

	assert(config_tier_by_role(&c, TIER_ROLE_HOT) == &c.tiers[0]);
	assert(config_tier_by_role(&c, TIER_ROLE_CAPACITY) == &c.tiers[1]);
	assert(config_tier_by_role(&c, TIER_ROLE_NFS) == &c.tiers[2]); /* the first in file order */
}

static void test_minimal(void) {
	_cleanup_(config_done) Config c = {}, d = {};

	/* Roles from the tier names, paths and everything else from the defaults. */
	parse_ok(MAIN "[tier hot]\n[tier capacity]\n", &c);
	assert(config_default("/srv/fratier", &d) == 0);

	assert(strcmp(c.data_dir, d.data_dir) == 0);
	assert(!c.allow_other && !d.allow_other);
	assert(c.log_level == LOG_INFO && d.log_level == LOG_INFO);
	assert(c.n_tiers == 2 && d.n_tiers == 2);
	for (size_t i = 0; i < 2; i++) {
		assert(strcmp(c.tiers[i].name, d.tiers[i].name) == 0);
		assert(strcmp(c.tiers[i].path, d.tiers[i].path) == 0);
		assert(c.tiers[i].role == d.tiers[i].role);
		assert(c.tiers[i].backend == d.tiers[i].backend);
		assert(c.tiers[i].capacity == 0 && c.tiers[i].reserve == 0);
		assert(c.tiers[i].has_zstd_level == (i > 0) && d.tiers[i].has_zstd_level == (i > 0));
		assert(c.tiers[i].zstd_level == d.tiers[i].zstd_level);
	}
	assert(strcmp(c.tiers[0].path, "/srv/fratier/hot") == 0);
	assert(strcmp(c.tiers[1].path, "/srv/fratier/capacity") == 0);
	assert(!config_tier_by_role(&c, TIER_ROLE_NFS));
	assert(!c.control_socket && !d.control_socket);
}

static void test_control_socket(void) {
	_cleanup_(config_done) Config c = {};
	parse_ok(MAIN "control_socket = /run//fratier/./ctl.sock\n[tier hot]\n", &c);
	assert(strcmp(c.control_socket, "/run/fratier/ctl.sock") == 0);
	parse_fails(MAIN "control_socket = ctl.sock\n[tier hot]\n",
		    FILE_NAME ":3: 'control_socket' must be an absolute path, got 'ctl.sock'");
	parse_fails(MAIN "control_socket = /a\x01/z\n[tier hot]\n",
		    FILE_NAME ":3: control character in 'control_socket': '/a\\x01/z'");
}

static void test_key_file(void) {
	_cleanup_(config_done) Config c = {}, d = {};
	parse_ok(MAIN "key_file = /etc//fratier/./fra.key\n[tier hot]\n", &c);
	assert(strcmp(c.key_file, "/etc/fratier/fra.key") == 0);
	parse_ok(MAIN "[tier hot]\n", &d);
	assert(!d.key_file);
	parse_fails(MAIN "key_file = fra.key\n[tier hot]\n",
		    FILE_NAME ":3: 'key_file' must be an absolute path, got 'fra.key'");
}

/* Shared tiers (docs/SHARED.md): the host's name and which lower tiers are shared. */
static void test_shared(void) {
	_cleanup_(config_done) Config c = {};
	parse_ok(MAIN "host = db-01_x\n[tier hot]\n[tier capacity]\nshared = yes\n", &c);
	assert(strcmp(c.host, "db-01_x") == 0);
	assert(!c.tiers[0].shared && c.tiers[1].shared);
	assert(c.shared_lease == CONFIG_SHARED_LEASE_DEFAULT);
	config_done(&c);
	parse_ok(MAIN "[tier hot]\n[tier capacity]\n", &c);
	assert(!c.host && !c.tiers[1].shared);
	config_done(&c);
	parse_ok(MAIN "shared_lease = 4s\n[tier hot]\n[tier capacity]\nshared = yes\n", &c);
	assert(c.shared_lease == 4);
	config_done(&c);
	parse_ok(MAIN "shared_lease = 1h\n[tier hot]\n", &c);
	assert(c.shared_lease == 3600);
	parse_fails(MAIN "shared_lease = 1s\n[tier hot]\n", FILE_NAME ":3: 'shared_lease' must be 2s .. 1h, got '1s'");
	parse_fails(MAIN "shared_lease = 2h\n[tier hot]\n", FILE_NAME ":3: 'shared_lease' must be 2s .. 1h, got '2h'");

	parse_fails(MAIN "host = DB01\n[tier hot]\n",
		    FILE_NAME ":3: invalid 'host' 'DB01' (1 to 32 characters of a-z 0-9 _ -)");
	parse_fails(MAIN "host = db.example\n[tier hot]\n",
		    FILE_NAME ":3: invalid 'host' 'db.example' (1 to 32 characters of a-z 0-9 _ -)");
	parse_fails(MAIN "host = 012345678901234567890123456789012\n[tier hot]\n",
		    FILE_NAME ":3: invalid 'host' '012345678901234567890123456789012' (1 to 32 characters of a-z 0-9 _ -)");
	parse_fails(MAIN "[tier hot]\nshared = yes\n",
		    FILE_NAME ":4: the hot tier 'hot' cannot be shared: each host keeps its own");
	parse_fails(MAIN "[tier hot]\n[tier capacity]\nshared = maybe\n",
		    FILE_NAME ":5: invalid boolean 'maybe' for 'shared' (expected yes/no, true/false, on/off or 1/0)");
	assert(config_host_name_is_valid("a") && !config_host_name_is_valid("") && !config_host_name_is_valid("a/b"));
}

/* encrypt per tier: as given, else lower tiers with a key; the hot tier only if asked. */
static void test_encrypt(void) {
	_cleanup_(config_done) Config c = {};
	parse_ok(MAIN "[tier hot]\n[tier capacity]\n[tier filer]\nrole = capacity\npath = /mnt/filer\nencrypt = no\n", &c);
	assert(!c.tiers[0].has_encrypt && !c.tiers[1].has_encrypt && c.tiers[2].has_encrypt && !c.tiers[2].encrypt);
	assert(!config_tier_encrypts(&c.tiers[0], true) && config_tier_encrypts(&c.tiers[1], true));
	assert(!config_tier_encrypts(&c.tiers[1], false) && !config_tier_encrypts(&c.tiers[2], true));
	config_done(&c);
	parse_ok(MAIN "[tier hot]\nencrypt = yes\n[tier capacity]\n", &c);
	assert(config_tier_encrypts(&c.tiers[0], true) && config_tier_encrypts(&c.tiers[0], false));

	parse_fails(MAIN "[tier hot]\n[tier capacity]\nencrypt = sometimes\n",
		    FILE_NAME ":5: invalid boolean 'sometimes' for 'encrypt' (expected yes/no, true/false, on/off or 1/0)");
	parse_fails(MAIN "encrypt = yes\n[tier hot]\n", FILE_NAME ":3: unknown key 'encrypt' in section [fratier]");
}

/* spill per lower tier: as given, else unless the tier encrypts; never given to the hot, an NFS or a shared tier. */
static void test_spill(void) {
	_cleanup_(config_done) Config c = {};
	parse_ok(MAIN "[tier hot]\n[tier capacity]\n[tier vault]\nrole = capacity\npath = /mnt/vault\nspill = yes\n"
		      "[tier slow]\nrole = capacity\npath = /mnt/slow\nspill = no\nencrypt = no\n", &c);
	assert(!c.tiers[1].has_spill && c.tiers[2].has_spill && c.tiers[2].spill && c.tiers[3].has_spill);
	/* Without a key nothing encrypts, so the default spills; with one the capacity tier encrypts and does not. */
	assert(config_tier_spills(&c.tiers[1], false) && !config_tier_spills(&c.tiers[1], true));
	assert(config_tier_spills(&c.tiers[2], true) && config_tier_spills(&c.tiers[2], false));
	assert(!config_tier_spills(&c.tiers[3], false) && !config_tier_spills(&c.tiers[3], true));

	parse_fails(MAIN "[tier hot]\nspill = no\n",
		    FILE_NAME ":4: spill is for lower tiers: the hot tier 'hot' takes new files while it has room");
	parse_fails(MAIN "[tier hot]\n[tier filer]\nrole = capacity\nbackend = nfs\npath = nfs://nas/fra\nspill = yes\n",
		    FILE_NAME ":8: tier 'filer' cannot take spilled files: only a directory tier of this host's (not nfs, "
			      "not shared) holds raw files");
	parse_fails(MAIN "[tier hot]\n[tier capacity]\nshared = yes\nspill = yes\n",
		    FILE_NAME ":6: tier 'capacity' cannot take spilled files: only a directory tier of this host's (not "
			      "nfs, not shared) holds raw files");
	parse_fails(MAIN "[tier hot]\n[tier capacity]\nspill = often\n",
		    FILE_NAME ":5: invalid boolean 'often' for 'spill' (expected yes/no, true/false, on/off or 1/0)");
}

static void test_syntax_variants(void) {
	_cleanup_(config_done) Config c = {}, d = {}, e = {};

	/* BOM, CRLF, "name: value", no final newline, data_dir after the tiers, comments after headers. */
	parse_ok("\xef\xbb\xbf[tier hot] ; the only one\r\n"
		 "path: relative\r\n"
		 "\r\n"
		 "[fratier]   # main\r\n"
		 "allow_other = off\r\n"
		 "log_level = err\r\n"
		 "data_dir = /d",
		 &c);
	assert(strcmp(c.tiers[0].path, "/d/relative") == 0);
	assert(!c.allow_other);
	assert(c.log_level == LOG_ERR);

	/* Tabs between "tier" and the name; all boolean spellings; "a;b" is not a comment. */
	parse_ok("[tier\thot]\npath = /a;b\n[fratier]\ndata_dir = /\nallow_other = 1\n", &d);
	assert(strcmp(d.tiers[0].name, "hot") == 0);
	assert(strcmp(d.tiers[0].path, "/a;b") == 0);
	assert(strcmp(d.data_dir, "/") == 0);
	assert(d.allow_other);

	/* The longest tier name and the longest line both pass. */
	char text[1024];
	char name[CONFIG_TIER_NAME_MAX + 1];
	memset(name, 'n', CONFIG_TIER_NAME_MAX);
	name[CONFIG_TIER_NAME_MAX] = '\0';
	char path[CONFIG_LINE_MAX - strlen("path=") + 1];
	memset(path, 'p', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = '\0';
	snprintf(text, sizeof(text), MAIN "[tier %s]\nrole=hot\npath=%s\r\n", name, path);
	parse_ok(text, &e);
	assert(strcmp(e.tiers[0].name, name) == 0);
	assert(strcmp(e.tiers[0].path, path) == 0);
}

static void test_errors(void) {
	/* Keys and sections. */
	parse_fails(MAIN "[tier hot]\nfoo = 1\n", FILE_NAME ":4: unknown key 'foo' in section [tier hot]");
	parse_fails("[fratier]\nDATA_DIR = /x\n", FILE_NAME ":2: unknown key 'DATA_DIR' in section [fratier]");
	parse_fails("data_dir = /x\n[fratier]\n", FILE_NAME ":1: key 'data_dir' outside of any section");
	parse_fails(MAIN "[bogus]\n[tier hot]\n", FILE_NAME ":3: unknown section [bogus]");
	parse_fails(MAIN "[tiers hot]\n", FILE_NAME ":3: unknown section [tiers hot]");
	parse_fails(MAIN "[ fratier ]\n", FILE_NAME ":3: unknown section [ fratier ]");
	parse_fails(MAIN "[tier hot]\n[fratier]\n", FILE_NAME ":4: duplicate section [fratier] (first on line 1)");
	parse_fails(MAIN "[tier hot]\npath = /a\npath = /b\n", FILE_NAME ":5: duplicate key 'path' in section [tier hot]");
	parse_fails(MAIN "log_level = info\nlog_level = info\n",
		    FILE_NAME ":4: duplicate key 'log_level' in section [fratier]");
	parse_fails(MAIN "[tier hot]\npath =\n", FILE_NAME ":4: empty value for 'path'");
	parse_fails(MAIN "[tier hot]\npath = ; only a comment\n", FILE_NAME ":4: empty value for 'path'");
	parse_fails(MAIN "[tier hot]\nbad\x01key = 1\n", FILE_NAME ":4: unknown key 'bad\\x01key' in section [tier hot]");

	/* Tier names. */
	parse_fails(MAIN "[tier]\n", FILE_NAME ":3: invalid tier name '' (1 to 32 characters of A-Z a-z 0-9 _ -)");
	parse_fails(MAIN "[tier a.b]\n", FILE_NAME ":3: invalid tier name 'a.b' (1 to 32 characters of A-Z a-z 0-9 _ -)");
	parse_fails(MAIN "[tier a b]\n", FILE_NAME ":3: invalid tier name 'a b' (1 to 32 characters of A-Z a-z 0-9 _ -)");
	parse_fails(MAIN "[tier 123456789012345678901234567890123]\n",
		    FILE_NAME ":3: invalid tier name '123456789012345678901234567890123' (1 to 32 characters of A-Z a-z 0-9 _ -)");
	parse_fails(MAIN "[tier hot]\n\n\n\n[tier capacity]\n[tier hot]\nrole = capacity\n",
		    FILE_NAME ":8: duplicate tier name 'hot' (first on line 3)");
	parse_fails(MAIN "[tier hot]\n[tier t1]\n[tier t2]\n[tier t3]\n[tier t4]\n[tier t5]\n[tier t6]\n[tier t7]\n[tier t8]\n",
		    FILE_NAME ":11: more than 8 tiers");

	/* Values. */
	parse_fails(MAIN "[tier hot]\ncapacity = 12Q\n", FILE_NAME ":4: invalid size '12Q' for 'capacity'");
	parse_fails(MAIN "[tier hot]\nreserve = -1\n", FILE_NAME ":4: invalid size '-1' for 'reserve'");
	parse_fails(MAIN "[tier hot]\nzstd_level = 20\n",
		    FILE_NAME ":4: invalid 'zstd_level' '20' (expected an integer from -7 to 19)");
	parse_fails(MAIN "[tier hot]\nzstd_level = 9\nzstd_level = 9\n", FILE_NAME ":5: duplicate key 'zstd_level' in section [tier hot]");
	parse_fails(MAIN "[tier hot]\ncapacity = 16385P\n", FILE_NAME ":4: size '16385P' out of range for 'capacity'");
	parse_fails(MAIN "allow_other = maybe\n",
		    FILE_NAME ":3: invalid boolean 'maybe' for 'allow_other' (expected yes/no, true/false, on/off or 1/0)");
	parse_fails(MAIN "log_level = error\n",
		    FILE_NAME ":3: invalid log level 'error' for 'log_level' (expected err, warning, notice, info or debug)");
	parse_fails(MAIN "[tier hot]\nrole = warm\n",
		    FILE_NAME ":4: invalid role 'warm' for 'role' (expected hot, capacity or nfs)");
	parse_fails(MAIN "[tier hot]\nbackend = s3\n", FILE_NAME ":4: invalid backend 's3' for 'backend' (expected dir or nfs)");
	parse_fails("[fratier]\ndata_dir = srv/fratier\n",
		    FILE_NAME ":2: 'data_dir' must be an absolute path, got 'srv/fratier'");
	parse_fails("[fratier]\ndata_dir = /srv/\tx\n", FILE_NAME ":2: control character in 'data_dir': '/srv/\\x09x'");
	parse_fails(MAIN "[tier hot]\npath = /a\x7f\n", FILE_NAME ":4: control character in 'path': '/a\\x7f'");

	/* Whole-file checks. */
	parse_fails("[tier hot]\n", FILE_NAME ": data_dir is not set in section [fratier]");
	parse_fails("", FILE_NAME ": data_dir is not set in section [fratier]");
	parse_fails(MAIN, FILE_NAME ": no hot tier defined");
	parse_fails(MAIN "[tier capacity]\n", FILE_NAME ": no hot tier defined");
	parse_fails(MAIN "[tier hot]\n[tier fast]\nrole = hot\n", FILE_NAME ":5: more than one hot tier ('hot' and 'fast')");
	parse_fails(MAIN "[tier fast]\nrole = hot\n[tier hot]\n", FILE_NAME ":5: more than one hot tier ('fast' and 'hot')");
	parse_fails(MAIN "[tier hot]\n[tier slow]\npath = /x\n",
		    FILE_NAME ":4: tier 'slow' has no role (set role = hot, capacity or nfs)");
	parse_fails(MAIN "[tier hot]\nbackend = nfs\npath = nfs://h/e\n", FILE_NAME ":4: hot tier 'hot' must use backend dir");
	parse_fails(MAIN "[tier hot]\n[tier nfs]\n", FILE_NAME ":4: tier 'nfs' needs a path (role nfs, backend nfs)");
	parse_fails(MAIN "[tier hot]\n[tier nfs]\nbackend = dir\n", FILE_NAME ":4: tier 'nfs' needs a path (role nfs, backend dir)");
	parse_fails(MAIN "[tier hot]\n[tier capacity]\nbackend = nfs\n",
		    FILE_NAME ":4: tier 'capacity' needs a path (role capacity, backend nfs)");
	parse_fails(MAIN "[tier hot]\n[tier nfs]\npath = /mnt/x\n",
		    FILE_NAME ":5: path of tier 'nfs' (backend nfs) must be an nfs://HOST/EXPORT URL, got '/mnt/x'");
	parse_fails(MAIN "[tier hot]\n[tier nfs]\npath = nfs:///export\n",
		    FILE_NAME ":5: path of tier 'nfs' (backend nfs) must be an nfs://HOST/EXPORT URL, got 'nfs:///export'");
	parse_fails(MAIN "[tier hot]\n[tier nfs]\npath = nfs://\n",
		    FILE_NAME ":5: path of tier 'nfs' (backend nfs) must be an nfs://HOST/EXPORT URL, got 'nfs://'");
	parse_fails(MAIN "[tier hot]\n[tier nfs]\npath = nfs://a b/c\n",
		    FILE_NAME ":5: path of tier 'nfs' (backend nfs) must be an nfs://HOST/EXPORT URL, got 'nfs://a b/c'");
	parse_fails(MAIN "[tier hot]\npath = NFS://host/x\n",
		    FILE_NAME ":4: tier 'hot' has an nfs:// path but backend dir (set backend = nfs)");
	parse_fails(MAIN "[tier hot]\n[tier capacity]\n[tier more]\nrole = capacity\n",
		    FILE_NAME ":5: tier 'more' has the same path as tier 'capacity': '/srv/fratier/capacity'");
	parse_fails(MAIN "[tier hot]\npath = /x/y\n[tier capacity]\npath = //x//y/./\n",
		    FILE_NAME ":6: tier 'capacity' has the same path as tier 'hot': '/x/y'");
	parse_fails(MAIN "[tier hot]\npath = /srv/fratier/c\n[tier capacity]\npath = c\n",
		    FILE_NAME ":6: tier 'capacity' has the same path as tier 'hot': '/srv/fratier/c'");
}

/* Field by field: padding bytes of a struct returned by value are not guaranteed to match. */
static bool policy_equal(const ConfigClassPolicy *a, const ConfigClassPolicy *b) {
	return a->chunking == b->chunking && a->chunk_size == b->chunk_size && a->zstd_level == b->zstd_level &&
	       a->target_tier == b->target_tier && a->migrate_after == b->migrate_after && a->pinned == b->pinned &&
	       a->region_size == b->region_size && a->split_size == b->split_size;
}

static void test_classes(void) {
	_cleanup_(config_done) Config c = {};

	/* Defaults, in a file and in the embedded default alike. */
	parse_ok(MAIN "[tier hot]\n", &c);
	for (ConfigClass k = 0; k < _CONFIG_CLASS_MAX; k++) {
		ConfigClassPolicy d = config_class_default(k);
		assert(policy_equal(&c.classes[k], &d));
	}
	assert(c.classes[CONFIG_CLASS_IMAGECOPY].chunking == CONFIG_CHUNKING_ORACLE);
	assert(c.classes[CONFIG_CLASS_BACKUPPIECE].chunking == CONFIG_CHUNKING_ORACLE);
	assert(c.classes[CONFIG_CLASS_ARCHIVELOG].chunking == CONFIG_CHUNKING_CDC);
	config_done(&c);
	assert(config_default("/srv/x", &c) == 0);
	for (ConfigClass k = 0; k < _CONFIG_CLASS_MAX; k++) {
		ConfigClassPolicy d = config_class_default(k);
		assert(policy_equal(&c.classes[k], &d));
	}
	config_done(&c);

	/* A section overrides only what it names. */
	parse_ok(MAIN "[tier hot]\n[class archivelog]\nchunk_size = 32K\nzstd_level = -3\n"
		      "[class imagecopy]\nchunking = cdc\n[class other]\nchunking = fixed\nchunk_size = 1536\n", &c);
	assert(c.classes[CONFIG_CLASS_ARCHIVELOG].chunking == CONFIG_CHUNKING_CDC);
	assert(c.classes[CONFIG_CLASS_ARCHIVELOG].chunk_size == 32u << 10);
	assert(c.classes[CONFIG_CLASS_ARCHIVELOG].zstd_level == -3);
	assert(c.classes[CONFIG_CLASS_ARCHIVELOG].region_size == 128u << 10);
	assert(c.classes[CONFIG_CLASS_IMAGECOPY].chunking == CONFIG_CHUNKING_CDC);
	assert(c.classes[CONFIG_CLASS_IMAGECOPY].chunk_size == config_class_default(CONFIG_CLASS_IMAGECOPY).chunk_size);
	assert(c.classes[CONFIG_CLASS_OTHER].chunking == CONFIG_CHUNKING_FIXED);
	assert(c.classes[CONFIG_CLASS_OTHER].chunk_size == 1536);
	assert(memcmp(&c.classes[CONFIG_CLASS_BACKUPPIECE], &(ConfigClassPolicy) { 0 }, sizeof(ConfigClassPolicy)) != 0);
	config_done(&c);

	assert(config_class_from_string("backuppiece") == CONFIG_CLASS_BACKUPPIECE);
	assert(config_class_from_string("passthrough") == _CONFIG_CLASS_INVALID);
	assert(config_class_from_string(NULL) == _CONFIG_CLASS_INVALID);
	assert(strcmp(config_class_to_string(CONFIG_CLASS_OTHER), "other") == 0);
	assert(!config_class_to_string(_CONFIG_CLASS_MAX));
	assert(config_chunking_from_string("fixed") == CONFIG_CHUNKING_FIXED);
	assert(config_chunking_from_string("oracle") == CONFIG_CHUNKING_ORACLE);
	assert(config_chunking_from_string("CDC") == _CONFIG_CHUNKING_INVALID);
	assert(strcmp(config_chunking_to_string(CONFIG_CHUNKING_CDC), "cdc") == 0);

	parse_fails(MAIN "[tier hot]\n[class redo]\n",
		    FILE_NAME ":4: unknown class 'redo' (expected archivelog, backuppiece, imagecopy or other)");
	parse_fails(MAIN "[tier hot]\n[class]\n",
		    FILE_NAME ":4: unknown class '' (expected archivelog, backuppiece, imagecopy or other)");
	parse_fails(MAIN "[class other]\n[tier hot]\n[class other]\n",
		    FILE_NAME ":5: duplicate section [class other] (first on line 3)");
	parse_fails(MAIN "[class other]\nrole = hot\n", FILE_NAME ":4: unknown key 'role' in section [class other]");
	parse_fails(MAIN "[class other]\nchunking = rabin\n",
		    FILE_NAME ":4: invalid chunking 'rabin' for 'chunking' (expected oracle, cdc or fixed)");
	parse_ok(MAIN "[tier hot]\n[class imagecopy]\nregion_size = 64K\n", &c);
	assert(c.classes[CONFIG_CLASS_IMAGECOPY].region_size == 64u << 10);
	config_done(&c);
	parse_fails(MAIN "[tier hot]\n[class backuppiece]\nchunk_size = 12K\n",
		    FILE_NAME ":5: chunk_size of class backuppiece (oracle) must be a power of two from 1K to 1M, got 12288");
	parse_ok(MAIN "[tier hot]\n[class backuppiece]\nsplit_size = 1M\n[class other]\nsplit_size = 0\n", &c);
	assert(c.classes[CONFIG_CLASS_BACKUPPIECE].split_size == 1u << 20);
	assert(c.classes[CONFIG_CLASS_OTHER].split_size == 0);
	assert(c.classes[CONFIG_CLASS_IMAGECOPY].split_size == CONFIG_SPLIT_SIZE_DEFAULT);
	config_done(&c);
	parse_fails(MAIN "[class other]\nsplit_size = 512K\n",
		    FILE_NAME ":4: 'split_size' must be 0 or from 1M to 1T, got '512K'");
	parse_fails(MAIN "[class other]\nsplit_size = 2T\n",
		    FILE_NAME ":4: 'split_size' must be 0 or from 1M to 1T, got '2T'");
	parse_fails(MAIN "[class other]\nregion_size = 2K\n",
		    FILE_NAME ":4: 'region_size' must be from 4K to 1M, got '2K'");
	parse_fails(MAIN "[class other]\nregion_size = 2M\n",
		    FILE_NAME ":4: 'region_size' must be from 4K to 1M, got '2M'");
	parse_fails(MAIN "[class other]\nzstd_level = 20\n",
		    FILE_NAME ":4: invalid 'zstd_level' '20' (expected an integer from -7 to 19)");
	parse_fails(MAIN "[class other]\nzstd_level = 3x\n",
		    FILE_NAME ":4: invalid 'zstd_level' '3x' (expected an integer from -7 to 19)");
	parse_fails(MAIN "[class other]\nzstd_level = -8\n",
		    FILE_NAME ":4: invalid 'zstd_level' '-8' (expected an integer from -7 to 19)");
	parse_fails(MAIN "[class other]\nchunk_size = 5M\n", FILE_NAME ":4: 'chunk_size' is at most 4M, got '5M'");
	parse_fails(MAIN "[class other]\nchunk_size = lots\n", FILE_NAME ":4: invalid size 'lots' for 'chunk_size'");
	parse_fails(MAIN "[tier hot]\n[class other]\nchunk_size = 12K\n",
		    FILE_NAME ":5: chunk_size of class other (cdc) must be a power of two from 1K to 1M, got 12288");
	parse_fails(MAIN "[tier hot]\n[class other]\nchunk_size = 2M\n",
		    FILE_NAME ":5: chunk_size of class other (cdc) must be a power of two from 1K to 1M, got 2097152");
	parse_fails(MAIN "[tier hot]\n[class archivelog]\nchunking = fixed\nchunk_size = 1000\n",
		    FILE_NAME ":6: chunk_size of class archivelog (fixed) must be a multiple of 512 from 512 to 4M, got 1000");
	parse_fails(MAIN "[tier hot]\n[class imagecopy]\nchunking = cdc\nchunk_size = 0\n",
		    FILE_NAME ":6: chunk_size of class imagecopy (cdc) must be a power of two from 1K to 1M, got 0");
}

static void test_lines(void) {
	/* Syntax errors are found by inih; the first problem in the file wins either way. */
	parse_fails(MAIN "[tier hot]\njunk\n", FILE_NAME ":4: syntax error (expected [section], key = value or a comment)");
	parse_fails("junk\nfoo = 1\n", FILE_NAME ":1: syntax error (expected [section], key = value or a comment)");
	parse_fails(MAIN "junk\n[bogus]\n", FILE_NAME ":3: syntax error (expected [section], key = value or a comment)");
	parse_fails(MAIN "foo = 1\njunk\n", FILE_NAME ":3: unknown key 'foo' in section [fratier]");
	parse_fails(MAIN "[tier hot]\n=1\n", FILE_NAME ":4: unknown key '' in section [tier hot]");

	/* Section headers and indentation, checked by our line reader. */
	parse_fails(MAIN "[tier hot\n", FILE_NAME ":3: missing ']' in section header");
	parse_fails(MAIN "[tier hot] x\n", FILE_NAME ":3: unexpected text after section header");
	parse_fails(MAIN "[tier hot]\nrole = hot\n  path = /x\n",
		    FILE_NAME ":5: indented line (continuation lines are not supported)");
	parse_fails(MAIN "\t[tier hot]\n", FILE_NAME ":3: indented line (continuation lines are not supported)");
	/* Indented comments and blank lines are fine. */
	{
		_cleanup_(config_done) Config c = {};
		parse_ok(MAIN "   ; comment\n \t \n\t# comment\n[tier hot]\n", &c);
	}

	/* Line numbers stay exact after a line inih could not have held in one piece. */
	char text[2048];
	char path[CONFIG_LINE_MAX - strlen("path=") + 2];
	memset(path, 'p', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = '\0';
	snprintf(text, sizeof(text), MAIN "[tier hot]\npath=%s\n", path);
	parse_fails(text, FILE_NAME ":4: line too long (max 197 bytes)");
	snprintf(text, sizeof(text), MAIN "; %s%s%s\n[tier hot]\n", path, path, path);
	parse_fails(text, FILE_NAME ":3: line too long (max 197 bytes)");

	/* NUL bytes and size. */
	static const char nul[] = MAIN "[tier hot]\0\n";
	parse_fails_len(nul, sizeof(nul) - 1, FILE_NAME ":3: NUL byte in file");

	size_t big = CONFIG_FILE_SIZE_MAX + 1;
	_cleanup_free_ char *huge = malloc(big);
	assert(huge);
	static const char head[] = MAIN "[tier hot]\n";
	memcpy(huge, head, strlen(head));
	for (size_t i = strlen(head); i < big; i += 64) {
		size_t n = MIN((size_t) 64, big - i);
		memset(huge + i, ';', n);
		huge[i + n - 1] = '\n';
	}
	parse_fails_len(huge, big, FILE_NAME ": file too large (max 1048576 bytes)");
	{
		_cleanup_(config_done) Config c = {};
		_cleanup_free_ char *error = NULL;
		assert(config_parse(huge, big - 1, NULL, &c, &error) == 0); /* exactly at the limit */
		assert(!error);
		assert(!c.source);
		assert(strcmp(c.tiers[0].path, "/srv/fratier/hot") == 0);
	}

	/* An empty buffer may be NULL. */
	{
		Config c;
		_cleanup_free_ char *error = NULL;
		assert(config_parse(NULL, 0, "empty.conf", &c, &error) == -EINVAL);
		assert(strcmp(error, "empty.conf: data_dir is not set in section [fratier]") == 0);
	}

	/* Without a file name, messages still have the FILE: shape. */
	{
		Config c;
		_cleanup_free_ char *error = NULL;
		assert(config_parse("[x]\n", 4, NULL, &c, &error) == -EINVAL);
		assert(strcmp(error, "(config):1: unknown section [x]") == 0);
		assert(config_is_zero(&c));
	}
}

static void test_sizes(void) {
	static const struct {
		const char *s;
		int r;
		uint64_t v;
	} cases[] = {
		{ "0", 0, 0 },
		{ "123", 0, 123 },
		{ "007", 0, 7 },
		{ "512B", 0, 512 },
		{ "4K", 0, 4096 },
		{ "4k", 0, 4096 },
		{ "4KiB", 0, 4096 },
		{ "4KB", 0, 4096 },
		{ "3M", 0, 3ull << 20 },
		{ "16G", 0, 16ull << 30 },
		{ "16GiB", 0, 16ull << 30 },
		{ "2T", 0, 2ull << 40 },
		{ "5p", 0, 5ull << 50 },
		{ "16383P", 0, 16383ull << 50 },
		{ "18446744073709551615", 0, UINT64_MAX },
		{ "18446744073709551616", -ERANGE, 0 },
		{ "99999999999999999999999", -ERANGE, 0 },
		{ "16384P", -ERANGE, 0 },
		{ "16777216T", -ERANGE, 0 },
		{ "16777215T", 0, 16777215ull << 40 },
		{ "", -EINVAL, 0 },
		{ "K", -EINVAL, 0 },
		{ "12Q", -EINVAL, 0 },
		{ "99999999999999999999999Q", -EINVAL, 0 },
		{ "1.5G", -EINVAL, 0 },
		{ "-1", -EINVAL, 0 },
		{ "+1", -EINVAL, 0 },
		{ " 1", -EINVAL, 0 },
		{ "1 ", -EINVAL, 0 },
		{ "1 G", -EINVAL, 0 },
		{ "1iB", -EINVAL, 0 },
		{ "1Gb", -EINVAL, 0 },
		{ "1GiBB", -EINVAL, 0 },
		{ "1KM", -EINVAL, 0 },
		{ "0x10", -EINVAL, 0 },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		uint64_t v = 0xdeadbeef;
		int r = parse_size(cases[i].s, &v);
		if (r != cases[i].r || (r == 0 && v != cases[i].v) || (r < 0 && v != 0xdeadbeef)) {
			fprintf(stderr, "parse_size(\"%s\") = %d, %llu\n", cases[i].s, r, (unsigned long long) v);
			abort();
		}
	}
	assert(parse_size(NULL, &(uint64_t) { 0 }) == -EINVAL);
}

static void test_strings(void) {
	for (TierRole r = 0; r < _TIER_ROLE_MAX; r++)
		assert(tier_role_from_string(tier_role_to_string(r)) == r);
	for (TierBackend b = 0; b < _TIER_BACKEND_MAX; b++)
		assert(tier_backend_from_string(tier_backend_to_string(b)) == b);
	assert(strcmp(tier_role_to_string(TIER_ROLE_CAPACITY), "capacity") == 0);
	assert(strcmp(tier_backend_to_string(TIER_BACKEND_NFS), "nfs") == 0);
	assert(!tier_role_to_string(_TIER_ROLE_MAX));
	assert(!tier_role_to_string(_TIER_ROLE_INVALID));
	assert(!tier_backend_to_string(_TIER_BACKEND_MAX));
	assert(tier_role_from_string("HOT") == _TIER_ROLE_INVALID);
	assert(tier_role_from_string("") == _TIER_ROLE_INVALID);
	assert(tier_role_from_string(NULL) == _TIER_ROLE_INVALID);
	assert(tier_backend_from_string("nfs4") == _TIER_BACKEND_INVALID);
}

static void test_default(void) {
	_cleanup_(config_done) Config c = {}, rel = {};
	_cleanup_free_ char *cwd = getcwd(NULL, 0);
	_cleanup_free_ char *expect = NULL;
	assert(cwd);

	assert(config_default("/srv//fratier/./", &c) == 0);
	assert(!c.source);
	assert(strcmp(c.data_dir, "/srv/fratier") == 0);
	assert(!c.allow_other);
	assert(c.log_level == LOG_INFO);
	assert(c.n_tiers == 2);
	assert(strcmp(c.tiers[0].name, "hot") == 0);
	assert(c.tiers[0].role == TIER_ROLE_HOT && c.tiers[0].backend == TIER_BACKEND_DIR);
	assert(strcmp(c.tiers[0].path, "/srv/fratier/hot") == 0);
	assert(strcmp(c.tiers[1].name, "capacity") == 0);
	assert(c.tiers[1].role == TIER_ROLE_CAPACITY && c.tiers[1].backend == TIER_BACKEND_DIR);
	assert(strcmp(c.tiers[1].path, "/srv/fratier/capacity") == 0);
	assert(c.tiers[0].capacity == 0 && c.tiers[0].reserve == 0);

	/* Relative: against the current directory, which need not contain it. */
	assert(config_default("does-not-exist/data", &rel) == 0);
	assert(asprintf(&expect, "%s/does-not-exist/data", strcmp(cwd, "/") == 0 ? "" : cwd) > 0);
	assert(strcmp(rel.data_dir, expect) == 0);

	Config bad;
	memset(&bad, 0x5a, sizeof(bad));
	assert(config_default("", &bad) == -EINVAL);
	assert(config_is_zero(&bad));
	assert(config_default(NULL, &bad) == -EINVAL);

	/* DATA_DIR/hot fits in CONFIG_PATH_MAX (with its NUL), DATA_DIR/capacity does not. */
	char longdir[CONFIG_PATH_MAX];
	size_t n = CONFIG_PATH_MAX - 1 - strlen("/capacity") + 1;
	memset(longdir, 'd', n);
	longdir[0] = '/';
	longdir[n] = '\0';
	memset(&bad, 0x5a, sizeof(bad));
	assert(config_default(longdir, &bad) == -ENAMETOOLONG);
	assert(config_is_zero(&bad));
	longdir[n - 1] = '\0';
	{
		_cleanup_(config_done) Config ok = {};
		assert(config_default(longdir, &ok) == 0);
		assert(strlen(ok.tiers[1].path) == CONFIG_PATH_MAX - 1);
	}
}

static void test_done(void) {
	Config c = {};

	config_done(NULL);
	config_done(&c);
	assert(config_is_zero(&c));

	/* As a parser that failed half-way might leave it: one more tier slot used than counted. */
	c.source = strdup("x");
	c.data_dir = strdup("/d");
	c.tiers[0].name = strdup("hot");
	c.tiers[0].path = strdup("/d/hot");
	c.tiers[1].name = strdup("capacity");
	c.n_tiers = 1;
	c.log_level = LOG_DEBUG;
	config_done(&c);
	assert(config_is_zero(&c));
	config_done(&c);

	assert(!config_tier_by_role(NULL, TIER_ROLE_HOT));
	assert(!config_tier_by_role(&c, TIER_ROLE_HOT));
}

static void test_load_file(void) {
	char dir[] = "/tmp/test-config-XXXXXX";
	_cleanup_free_ char *path = NULL, *missing = NULL, *error = NULL;
	Config c;

	assert(mkdtemp(dir));
	assert(asprintf(&path, "%s/fratier.conf", dir) > 0);
	assert(asprintf(&missing, "%s/missing.conf", dir) > 0);

	static const char text[] = MAIN "[tier hot]\ncapacity = 1G\n";
	{
		_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		assert(fd >= 0);
		assert(write(fd, text, strlen(text)) == (ssize_t) strlen(text));
	}
	assert(config_load_file(path, &c, &error) == 0);
	assert(!error);
	assert(strcmp(c.source, path) == 0);
	assert(c.tiers[0].capacity == 1ull << 30);
	config_done(&c);

	assert(config_load_file(missing, &c, &error) == -ENOENT);
	assert(config_is_zero(&c));
	_cleanup_free_ char *expect = NULL;
	assert(asprintf(&expect, "%s: cannot open: No such file or directory", missing) > 0);
	assert(strcmp(error, expect) == 0);
	error = mfree(error);

	assert(config_load_file(dir, &c, &error) == -EISDIR);
	free(expect);
	assert(asprintf(&expect, "%s: cannot read: Is a directory", dir) > 0);
	assert(strcmp(error, expect) == 0);
	error = mfree(error);

	/* Messages name the file as given. */
	{
		_cleanup_close_ int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
		assert(fd >= 0);
		assert(write(fd, "[fratier]\nfoo = 1\n", 18) == 18);
	}
	assert(config_load_file(path, &c, &error) == -EINVAL);
	free(expect);
	assert(asprintf(&expect, "%s:2: unknown key 'foo' in section [fratier]", path) > 0);
	assert(strcmp(error, expect) == 0);
	error = mfree(error);

	/* Larger than the limit: read only up to limit + 1, then rejected. */
	{
		_cleanup_close_ int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
		assert(fd >= 0);
		assert(ftruncate(fd, 3 * CONFIG_FILE_SIZE_MAX) == 0);
	}
	assert(config_load_file(path, &c, &error) == -EINVAL);
	free(expect);
	assert(asprintf(&expect, "%s: file too large (max 1048576 bytes)", path) > 0);
	assert(strcmp(error, expect) == 0);
	error = mfree(error);
	assert(config_load_file(path, &c, NULL) == -EINVAL);

	assert(unlink(path) == 0);
	assert(rmdir(dir) == 0);
}

static void test_policy(void) {
	_cleanup_(config_done) Config c = {};
	uint64_t v;

	/* Defaults: archivelogs and backup pieces move to tier 1 after a day; image copies and other stay. */
	parse_ok(MAIN "[tier hot]\n[tier capacity]\n", &c);
	assert(c.policy_interval == CONFIG_POLICY_INTERVAL_DEFAULT);
	assert(c.policy_bandwidth == CONFIG_POLICY_BANDWIDTH_DEFAULT);
	assert(c.background_share == CONFIG_BACKGROUND_SHARE_DEFAULT);
	assert(c.tiers[0].high_watermark == 85 && c.tiers[0].low_watermark == 70 && !c.tiers[0].has_reserve);
	assert(c.tiers[1].high_watermark == 0 && c.tiers[1].low_watermark == 0);
	assert(c.classes[CONFIG_CLASS_ARCHIVELOG].migrate_after == 86400 && c.classes[CONFIG_CLASS_ARCHIVELOG].target_tier == 1);
	assert(c.classes[CONFIG_CLASS_BACKUPPIECE].migrate_after == 86400 && c.classes[CONFIG_CLASS_BACKUPPIECE].target_tier == 1);
	assert(c.classes[CONFIG_CLASS_IMAGECOPY].migrate_after == 0 && c.classes[CONFIG_CLASS_IMAGECOPY].target_tier == 0);
	assert(c.classes[CONFIG_CLASS_OTHER].migrate_after == 0 && c.classes[CONFIG_CLASS_OTHER].target_tier == 0);
	config_done(&c);
	assert(config_default("/srv/x", &c) == 0);
	assert(c.tiers[0].high_watermark == 85 && c.tiers[0].low_watermark == 70);
	assert(c.policy_interval == CONFIG_POLICY_INTERVAL_DEFAULT && c.policy_bandwidth == CONFIG_POLICY_BANDWIDTH_DEFAULT);
	assert(c.history_interval == CONFIG_HISTORY_INTERVAL_DEFAULT);
	assert(c.background_share == CONFIG_BACKGROUND_SHARE_DEFAULT);
	config_done(&c);

	parse_ok("[fratier]\ndata_dir = /srv/fratier\npolicy_interval = 5m\npolicy_bandwidth = 0\nhistory_interval = 0\n"
		 "background_share = 35%\n"
		 "[tier hot]\nhigh_watermark = 90%\nlow_watermark = 50\nreserve = 0\n"
		 "[tier capacity]\n[tier nfs]\npath = nfs://filer/export\n"
		 "[class archivelog]\nmigrate_after = 12h\ntarget = nfs\n"
		 "[class imagecopy]\ntarget = 1\n[class other]\nmigrate_after = 0\ntarget = capacity\n", &c);
	assert(c.policy_interval == 300 && c.policy_bandwidth == 0 && c.history_interval == 0 && c.background_share == 35);
	assert(c.tiers[0].high_watermark == 90 && c.tiers[0].low_watermark == 50);
	assert(c.tiers[0].has_reserve && c.tiers[0].reserve == 0);
	assert(c.classes[CONFIG_CLASS_ARCHIVELOG].migrate_after == 12 * 3600);
	assert(c.classes[CONFIG_CLASS_ARCHIVELOG].target_tier == 2);
	assert(c.classes[CONFIG_CLASS_IMAGECOPY].target_tier == 1 && c.classes[CONFIG_CLASS_IMAGECOPY].migrate_after == 0);
	assert(c.classes[CONFIG_CLASS_OTHER].target_tier == 1 && c.classes[CONFIG_CLASS_OTHER].migrate_after == 0);
	config_done(&c);

	/* Only a high mark: the low one follows it down if the default would not be below it. */
	parse_ok(MAIN "[tier hot]\nhigh_watermark = 60%\n", &c);
	assert(c.tiers[0].high_watermark == 60 && c.tiers[0].low_watermark == 59);
	config_done(&c);

	assert(parse_duration("0", &v) == 0 && v == 0);
	assert(parse_duration("90", &v) == 0 && v == 90);
	assert(parse_duration("30s", &v) == 0 && v == 30);
	assert(parse_duration("15m", &v) == 0 && v == 900);
	assert(parse_duration("2h", &v) == 0 && v == 7200);
	assert(parse_duration("7d", &v) == 0 && v == 7 * 86400);
	assert(parse_duration("3660d", &v) == 0);
	v = 42;
	assert(parse_duration("3661d", &v) == -ERANGE && v == 42);
	assert(parse_duration("99999999999999999999999", &v) == -ERANGE);
	assert(parse_duration("", &v) == -EINVAL);
	assert(parse_duration("d", &v) == -EINVAL);
	assert(parse_duration("1w", &v) == -EINVAL);
	assert(parse_duration("1dd", &v) == -EINVAL);
	assert(parse_duration("-1d", &v) == -EINVAL);
	assert(parse_duration("1 d", &v) == -EINVAL);
	assert(parse_duration("1.5h", &v) == -EINVAL);
	assert(parse_duration(NULL, &v) == -EINVAL && v == 42);

	parse_fails(MAIN "[tier hot]\n[class archivelog]\nmigrate_after = 1w\n",
		    FILE_NAME ":5: invalid duration '1w' for 'migrate_after' (expected a number with s, m, h or d)");
	parse_fails(MAIN "[tier hot]\n[class archivelog]\nmigrate_after = 4000d\n",
		    FILE_NAME ":5: duration '4000d' out of range for 'migrate_after' (at most 3660d)");
	parse_fails(MAIN "[tier hot]\n[tier capacity]\n[class backuppiece]\ntarget = tape\n",
		    FILE_NAME ":6: target of class backuppiece: no tier named 'tape' (lower tiers: 1)");
	parse_fails(MAIN "[class backuppiece]\ntarget = 2\n[tier hot]\n[tier capacity]\n",
		    FILE_NAME ":4: target of class backuppiece: no tier number '2' (1 to 1; 0 is the hot tier)");
	parse_fails(MAIN "[tier hot]\n[tier capacity]\n[class other]\ntarget = hot\n",
		    FILE_NAME ":6: target of class other is the hot tier 'hot' (expected a lower tier)");
	parse_fails(MAIN "[tier hot]\n[tier capacity]\n[class other]\ntarget = 0\n",
		    FILE_NAME ":6: target of class other: no tier number '0' (1 to 1; 0 is the hot tier)");
	parse_fails(MAIN "[tier hot]\nhigh_watermark = 101%\n",
		    FILE_NAME ":4: invalid percentage '101%' for 'high_watermark' (expected 0% to 100%)");
	parse_fails(MAIN "[tier hot]\nlow_watermark = 7O%\n",
		    FILE_NAME ":4: invalid percentage '7O%' for 'low_watermark' (expected 0% to 100%)");
	parse_fails(MAIN "[tier hot]\nlow_watermark = -5\n",
		    FILE_NAME ":4: invalid percentage '-5' for 'low_watermark' (expected 0% to 100%)");
	parse_fails(MAIN "[tier hot]\nhigh_watermark = 80%\nlow_watermark = 80%\n",
		    FILE_NAME ":5: low_watermark (80%) of tier 'hot' must be below its high_watermark (80%)");
	parse_fails(MAIN "[tier hot]\n[tier capacity]\nlow_watermark = 10%\n",
		    FILE_NAME ":5: watermarks belong to the hot tier, not to tier 'capacity'");
	parse_fails(MAIN "[tier hot]\nhigh_watermark = 90%\nhigh_watermark = 90%\n",
		    FILE_NAME ":5: duplicate key 'high_watermark' in section [tier hot]");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\npolicy_interval = 0\n[tier hot]\n",
		    FILE_NAME ":3: 'policy_interval' must be from 1s to 1d, got '0'");
	parse_ok("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[tier filer]\nrole = nfs\npath = nfs://f/e\n"
		 "timeout = 2s\nretries = 0\n", &c);
	assert(c.tiers[1].nfs_timeout == 2 && c.tiers[1].has_nfs_retries && c.tiers[1].nfs_retries == 0);
	assert(c.tiers[0].nfs_timeout == 0 && !c.tiers[0].has_nfs_retries);
	config_done(&c);
	parse_ok("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[tier capacity]\nmigrate_after = 30d\ntarget = archive\n"
		 "[tier archive]\nrole = capacity\npath = archive\n", &c);
	assert(c.tiers[1].migrate_after == 30 * 86400 && c.tiers[1].target_tier == 2 && c.tiers[2].target_tier == 0);
	config_done(&c);
	parse_fails("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\nmigrate_after = 1d\ntarget = capacity\n[tier capacity]\n",
		    FILE_NAME ":5: the hot tier's files move by their class's target and migrate_after, not by the tier's");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[tier capacity]\ntarget = 2\n[tier archive]\nrole = capacity\npath = archive\n",
		    FILE_NAME ":5: tier 'capacity' needs both target and migrate_after (greater than 0) for its files to move on");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[tier capacity]\n[tier archive]\nrole = capacity\npath = archive\n"
		    "migrate_after = 1d\ntarget = capacity\n",
		    FILE_NAME ":9: target of tier archive must come after it (tier 2), so that files never move in a circle");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[tier capacity]\nmigrate_after = 1d\ntarget = hot\n",
		    FILE_NAME ":6: target of tier capacity is the hot tier 'hot' (expected a lower tier)");
	parse_ok("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[class archivelog]\n"
		 "log_archive_format = arch_%t_%s_%r.dbf  %T[%S]%%.log\n[class backuppiece]\nnames = *.rman\tfull_?_*\n", &c);
	assert(c.n_name_patterns == 4);
	assert(strcmp(c.name_patterns[0].glob, "arch_*_*_*.dbf") == 0 && c.name_patterns[0].file_class == CONFIG_CLASS_ARCHIVELOG);
	assert(strcmp(c.name_patterns[1].glob, "*\\[*\\]%.log") == 0);
	assert(strcmp(c.name_patterns[2].glob, "*.rman") == 0 && c.name_patterns[2].file_class == CONFIG_CLASS_BACKUPPIECE);
	assert(strcmp(c.name_patterns[3].glob, "full_?_*") == 0);
	config_done(&c);
	parse_ok("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[tier capacity]\n[class archivelog]\npin = yes\n", &c);
	assert(c.classes[CONFIG_CLASS_ARCHIVELOG].pinned && c.classes[CONFIG_CLASS_ARCHIVELOG].target_tier == 0 &&
	       c.classes[CONFIG_CLASS_ARCHIVELOG].migrate_after == 0 && !c.classes[CONFIG_CLASS_BACKUPPIECE].pinned);
	config_done(&c);
	parse_fails("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[tier capacity]\n[class archivelog]\npin = yes\n"
		    "target = capacity\n",
		    FILE_NAME ":7: class archivelog is pinned (pin = yes on line 6): it takes no target or migrate_after");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[class other]\npin = maybe\n",
		    FILE_NAME ":5: invalid boolean 'maybe' for 'pin' (expected yes/no, true/false, on/off or 1/0)");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[class backuppiece]\nlog_archive_format = %s.arc\n",
		    FILE_NAME ":5: 'log_archive_format' belongs to [class archivelog]");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[class archivelog]\nlog_archive_format = arch_%t.arc\n",
		    FILE_NAME ":5: 'log_archive_format': a format without %s (the log sequence) names one file only");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[class archivelog]\nlog_archive_format = %x_%s\n",
		    FILE_NAME ":5: 'log_archive_format': unknown '%x' (Oracle's are %t %s %r %d %a, %%)");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[class other]\nnames = a/b\n",
		    FILE_NAME ":5: 'names': a pattern is a file name of 1 to 255 characters without '/', got 'a/b'");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\ntimeout = 5s\n",
		    FILE_NAME ":4: timeout and retries belong to NFS tiers, not to tier 'hot' (backend dir)");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[tier nfs]\npath = nfs://f/e\ntimeout = 11m\n",
		    FILE_NAME ":6: 'timeout' must be from 1s to 600s, got '11m'");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\n[tier hot]\n[tier nfs]\npath = nfs://f/e\nretries = 11\n",
		    FILE_NAME ":6: 'retries' must be an integer from 0 to 10, got '11'");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\nhistory_interval = 2d\n[tier hot]\n",
		    FILE_NAME ":3: 'history_interval' must be 0 (off) or at most 1d, got '2d'");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\npolicy_interval = 2d\n[tier hot]\n",
		    FILE_NAME ":3: 'policy_interval' must be from 1s to 1d, got '2d'");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\npolicy_bandwidth = 20%\n[tier hot]\n",
		    FILE_NAME ":3: invalid size '20%' for 'policy_bandwidth'");
	parse_ok("[fratier]\ndata_dir = /srv/fratier\nbackground_share = 100\n[tier hot]\n", &c);
	assert(c.background_share == 100);
	config_done(&c);
	parse_fails("[fratier]\ndata_dir = /srv/fratier\nbackground_share = 0%\n[tier hot]\n",
		    FILE_NAME ":3: 'background_share' must be from 1% to 100%, got '0%' (0 would never seal while files are written)");
	parse_fails("[fratier]\ndata_dir = /srv/fratier\nbackground_share = 120%\n[tier hot]\n",
		    FILE_NAME ":3: invalid percentage '120%' for 'background_share' (expected 0% to 100%)");
}

int main(void) {
	test_full();
	test_minimal();
	test_control_socket();
	test_key_file();
	test_shared();
	test_encrypt();
	test_spill();
	test_syntax_variants();
	test_errors();
	test_classes();
	test_policy();
	test_lines();
	test_sizes();
	test_strings();
	test_default();
	test_done();
	test_load_file();
	printf("common-config: ok\n");
	return EXIT_SUCCESS;
}
