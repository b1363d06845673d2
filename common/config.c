/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The config file parser (see config.h for the file format).
 *
 * inih splits "key = value" lines, strips comments and the BOM.  Everything
 * it does not do the way we need is done in our line reader, which feeds inih
 * one physical line per call:
 *
 *  1. Line numbers in messages are exact.  The Debian build of inih does not
 *     pass the line number to the handler (INI_HANDLER_LINENO is 0), so the
 *     reader counts lines; the handler runs for the line the reader returned
 *     last.  inih's own count (the first syntax error it returns) agrees,
 *     because no line is ever longer than inih's buffer: a longer line is
 *     rejected here, where inih would split it and count the pieces.
 *  2. Sections are tracked by the reader, because this inih never calls the
 *     handler on a section header (an empty "[tier hot]" or "[bogus]" would
 *     be invisible) and truncates long section names.
 *  3. Indented lines are rejected: inih would append them to the previous
 *     value (multi-line values), silently.
 *  4. The first problem in file order is reported, whoever found it: the
 *     reader stops feeding lines after the first error of ours, and inih's
 *     first syntax error wins if it came on an earlier line.
 *  5. Checks that need the whole file (defaults, path resolution, the hot
 *     tier count) run after parsing, in file order, against the line each
 *     value came from.
 *
 * No logging here: callers get -errno and the message.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <unistd.h>

#include <ini.h>

#include "common/config.h"
#include "common/macros.h"

_Static_assert(CONFIG_LINE_MAX + 3 <= INI_MAX_LINE, "inih's line buffer must hold a line, \\r, \\n and NUL");
/*
 * A path in the file is data_dir (one line) joined with a tier path (another
 * line), so it always fits: the parser never sees -ENAMETOOLONG, only
 * config_default() with a caller's data_dir can.
 */
_Static_assert(2 * CONFIG_LINE_MAX + 2 < CONFIG_PATH_MAX, "a path from the file must fit in CONFIG_PATH_MAX");

static const char *const tier_role_table[_TIER_ROLE_MAX] = {
	[TIER_ROLE_HOT] = "hot",
	[TIER_ROLE_CAPACITY] = "capacity",
	[TIER_ROLE_NFS] = "nfs",
};

static const char *const tier_backend_table[_TIER_BACKEND_MAX] = {
	[TIER_BACKEND_DIR] = "dir",
	[TIER_BACKEND_NFS] = "nfs",
};

static const char *const class_table[_CONFIG_CLASS_MAX] = {
	[CONFIG_CLASS_ARCHIVELOG] = "archivelog",
	[CONFIG_CLASS_BACKUPPIECE] = "backuppiece",
	[CONFIG_CLASS_IMAGECOPY] = "imagecopy",
	[CONFIG_CLASS_OTHER] = "other",
};

static const char *const chunking_table[_CONFIG_CHUNKING_MAX] = {
	[CONFIG_CHUNKING_CDC] = "cdc",
	[CONFIG_CHUNKING_FIXED] = "fixed",
	[CONFIG_CHUNKING_ORACLE] = "oracle",
};

static const char *const log_level_table[LOG_DEBUG + 1] = {
	[LOG_ERR] = "err",
	[LOG_WARNING] = "warning",
	[LOG_NOTICE] = "notice",
	[LOG_INFO] = "info",
	[LOG_DEBUG] = "debug",
};

const char *tier_role_to_string(TierRole r) {
	return r >= 0 && r < _TIER_ROLE_MAX ? tier_role_table[r] : NULL;
}

TierRole tier_role_from_string(const char *s) {
	for (size_t i = 0; s && i < _TIER_ROLE_MAX; i++)
		if (strcmp(s, tier_role_table[i]) == 0)
			return (TierRole) i;
	return _TIER_ROLE_INVALID;
}

const char *tier_backend_to_string(TierBackend b) {
	return b >= 0 && b < _TIER_BACKEND_MAX ? tier_backend_table[b] : NULL;
}

TierBackend tier_backend_from_string(const char *s) {
	for (size_t i = 0; s && i < _TIER_BACKEND_MAX; i++)
		if (strcmp(s, tier_backend_table[i]) == 0)
			return (TierBackend) i;
	return _TIER_BACKEND_INVALID;
}

const char *config_class_to_string(ConfigClass c) {
	return c >= 0 && c < _CONFIG_CLASS_MAX ? class_table[c] : NULL;
}

ConfigClass config_class_from_string(const char *s) {
	for (size_t i = 0; s && i < _CONFIG_CLASS_MAX; i++)
		if (strcmp(s, class_table[i]) == 0)
			return (ConfigClass) i;
	return _CONFIG_CLASS_INVALID;
}

const char *config_chunking_to_string(ConfigChunking c) {
	return c >= 0 && c < _CONFIG_CHUNKING_MAX ? chunking_table[c] : NULL;
}

ConfigChunking config_chunking_from_string(const char *s) {
	for (size_t i = 0; s && i < _CONFIG_CHUNKING_MAX; i++)
		if (strcmp(s, chunking_table[i]) == 0)
			return (ConfigChunking) i;
	return _CONFIG_CHUNKING_INVALID;
}

/* Restored front to back: a region read whole is never wasted (bench/README.md, "region-sizes"). */
#define REGION_SIZE_DEFAULT (128u << 10)

ConfigClassPolicy config_class_default(ConfigClass c) {
	ConfigClassPolicy p;
	assert(c >= 0 && c < _CONFIG_CLASS_MAX);
	switch (c) {
	case CONFIG_CLASS_BACKUPPIECE:
		/*
		 * Every Oracle block a chunk of its own, wherever RMAN put it: a
		 * changed block costs itself in the next full backup, and the
		 * blocks an image copy of the same datafile holds are stored once
		 * (README, "Dedup across classes").  Between blocks (headers), CDC
		 * of 8 KiB.
		 */
		p = (ConfigClassPolicy) { CONFIG_CHUNKING_ORACLE, 8u << 10, CONFIG_ZSTD_LEVEL_HOT, 1, CONFIG_MIGRATE_AFTER_DEFAULT, false,
					  REGION_SIZE_DEFAULT };
		break;
	case CONFIG_CLASS_IMAGECOPY:
		/*
		 * Cut as backup pieces are, so that both meet block for block.
		 * RECOVER COPY rewrites them in place every day, so they stay
		 * hot: moved, they would come back at the next change.
		 */
		p = (ConfigClassPolicy) { CONFIG_CHUNKING_ORACLE, 8u << 10, CONFIG_ZSTD_LEVEL_HOT, 0, 0, false, REGION_SIZE_DEFAULT };
		break;
	case CONFIG_CLASS_ARCHIVELOG:
		/* Read again only for a recovery: a day on the hot tier covers the usual restore of last night's backup. */
		p = (ConfigClassPolicy) { CONFIG_CHUNKING_CDC, 16u << 10, CONFIG_ZSTD_LEVEL_HOT, 1, CONFIG_MIGRATE_AFTER_DEFAULT, false,
					  REGION_SIZE_DEFAULT };
		break;
	default:
		/* Nothing is known of what it is, so nothing is moved without being asked. */
		p = (ConfigClassPolicy) { CONFIG_CHUNKING_CDC, 16u << 10, CONFIG_ZSTD_LEVEL_HOT, 0, 0, false, REGION_SIZE_DEFAULT };
		break;
	}
	p.split_size = CONFIG_SPLIT_SIZE_DEFAULT;
	return p;
}

/* Colder means smaller: a lower tier without a zstd_level of its own gets the cold one. */
static void config_tier_default_level(ConfigTier *t) {
	if (t->role == TIER_ROLE_HOT || t->has_zstd_level)
		return;
	t->has_zstd_level = true;
	t->zstd_level = CONFIG_ZSTD_LEVEL_COLD;
}

static void config_classes_default(Config *c) {
	for (ConfigClass k = 0; k < _CONFIG_CLASS_MAX; k++)
		c->classes[k] = config_class_default(k);
}

int parse_size(const char *s, uint64_t *ret) {
	static const char prefixes[] = "KMGTP";
	uint64_t v = 0;
	bool overflow = false;
	unsigned shift = 0;
	const char *p = s;

	if (!p || *p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++)
		/* Keep scanning after an overflow: trailing garbage is -EINVAL, not -ERANGE. */
		if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t) (*p - '0'), &v))
			overflow = true;

	if (*p != '\0') {
		const char *x = strchr(prefixes, toupper((unsigned char) *p));
		if (x) {
			shift = 10 * (unsigned) (x - prefixes + 1);
			p++;
		}
	}
	if (shift > 0 && strcmp(p, "iB") == 0)
		p += 2;
	else if (strcmp(p, "B") == 0)
		p++;
	if (*p != '\0')
		return -EINVAL;

	if (overflow || (shift > 0 && v > (UINT64_MAX >> shift)))
		return -ERANGE;
	*ret = v << shift;
	return 0;
}

int parse_duration(const char *s, uint64_t *ret) {
	static const struct {
		char suffix;
		uint64_t seconds;
	} units[] = { { 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 } };
	uint64_t v = 0, unit = 1;
	bool overflow = false;
	const char *p = s;

	if (!p || *p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++)
		if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t) (*p - '0'), &v))
			overflow = true;
	if (*p != '\0') {
		size_t i;
		for (i = 0; i < ELEMENTSOF(units); i++)
			if (*p == units[i].suffix)
				break;
		if (i == ELEMENTSOF(units) || p[1] != '\0')
			return -EINVAL;
		unit = units[i].seconds;
	}
	if (overflow || __builtin_mul_overflow(v, unit, &v) || v > CONFIG_DURATION_MAX)
		return -ERANGE;
	*ret = v;
	return 0;
}

static int parse_boolean(const char *v) {
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };

	for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
		if (strcasecmp(v, yes[i]) == 0)
			return 1;
		if (strcasecmp(v, no[i]) == 0)
			return 0;
	}
	return -EINVAL;
}

static bool path_has_control_chars(const char *s) {
	for (; *s; s++)
		if ((unsigned char) *s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

static bool path_is_nfs_url(const char *s) {
	/* URL schemes are case-insensitive (RFC 3986). */
	return strncasecmp(s, "nfs://", 6) == 0;
}

/*
 * Joins base and path (base ignored when path is absolute; needed when it is
 * relative) and normalizes lexically: no empty or "." components, no
 * trailing slash.  ".." stays: resolving it needs the real directory tree,
 * which need not exist yet.  -ENAMETOOLONG when the result would not fit in
 * CONFIG_PATH_MAX with its NUL.
 */
static int path_normalize(const char *base, const char *path, char **ret) {
	const char *parts[2] = { path[0] == '/' ? NULL : base, path };
	size_t size = (parts[0] ? strlen(parts[0]) : 0) + strlen(path) + 3;
	size_t o = 0;

	assert(path[0] == '/' || (base && base[0] == '/'));

	_cleanup_free_ char *out = malloc(size);
	if (!out)
		return -ENOMEM;

	for (size_t k = 0; k < ELEMENTSOF(parts); k++) {
		const char *s = parts[k];
		while (s && *s) {
			size_t n = strcspn(s, "/");
			if (n > 0 && !(n == 1 && s[0] == '.')) {
				out[o++] = '/';
				memcpy(out + o, s, n);
				o += n;
			}
			s += n;
			s += strspn(s, "/");
		}
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';

	if (o >= CONFIG_PATH_MAX)
		return -ENAMETOOLONG;
	*ret = TAKE_PTR(out);
	return 0;
}

void config_done(Config *c) {
	if (!c)
		return;
	free(c->source);
	free(c->data_dir);
	free(c->control_socket);
	free(c->key_file);
	free(c->host);
	/* All slots, not just n_tiers: a half-built Config may have filled one more. */
	for (size_t i = 0; i < CONFIG_TIERS_MAX; i++) {
		free(c->tiers[i].name);
		free(c->tiers[i].path);
	}
	for (size_t i = 0; i < c->n_name_patterns; i++)
		free(c->name_patterns[i].glob);
	*c = (Config) {};
}

const ConfigTier *config_tier_by_role(const Config *c, TierRole role) {
	for (size_t i = 0; c && i < c->n_tiers && i < CONFIG_TIERS_MAX; i++)
		if (c->tiers[i].role == role)
			return &c->tiers[i];
	return NULL;
}

const ConfigTier *config_tier_by_number(const Config *c, uint32_t n) {
	if (n == 0)
		return config_tier_by_role(c, TIER_ROLE_HOT);
	uint32_t k = 0;
	for (size_t i = 0; c && i < c->n_tiers && i < CONFIG_TIERS_MAX; i++) {
		if (c->tiers[i].role == TIER_ROLE_HOT)
			continue;
		if (++k == n)
			return &c->tiers[i];
	}
	return NULL;
}

static int config_add_tier(Config *c, const char *name, TierRole role, TierBackend backend, const char *path) {
	ConfigTier *t = &c->tiers[c->n_tiers];

	assert(c->n_tiers < CONFIG_TIERS_MAX);
	*t = (ConfigTier) { .role = role, .backend = backend };
	t->name = strdup(name);
	if (!t->name)
		return -ENOMEM;
	c->n_tiers++;
	return path_normalize(c->data_dir, path, &t->path);
}

int config_default(const char *data_dir, Config *ret) {
	_cleanup_(config_done) Config c = {
		.log_level = LOG_INFO,
		.policy_interval = CONFIG_POLICY_INTERVAL_DEFAULT,
		.policy_bandwidth = CONFIG_POLICY_BANDWIDTH_DEFAULT,
		.history_interval = CONFIG_HISTORY_INTERVAL_DEFAULT,
		.shared_lease = CONFIG_SHARED_LEASE_DEFAULT,
		.background_share = CONFIG_BACKGROUND_SHARE_DEFAULT,
	};
	_cleanup_free_ char *cwd = NULL;
	int r;

	assert(ret);
	*ret = (Config) {};
	if (!data_dir || data_dir[0] == '\0')
		return -EINVAL;

	if (data_dir[0] != '/') {
		cwd = getcwd(NULL, 0);
		if (!cwd)
			return negative_errno();
	}
	r = path_normalize(cwd, data_dir, &c.data_dir);
	if (r < 0)
		return r;

	r = config_add_tier(&c, "hot", TIER_ROLE_HOT, TIER_BACKEND_DIR, "hot");
	if (r < 0)
		return r;
	r = config_add_tier(&c, "capacity", TIER_ROLE_CAPACITY, TIER_BACKEND_DIR, "capacity");
	if (r < 0)
		return r;
	config_tier_default_level(&c.tiers[1]);
	c.tiers[0].high_watermark = CONFIG_WATERMARK_HIGH_DEFAULT;
	c.tiers[0].low_watermark = CONFIG_WATERMARK_LOW_DEFAULT;
	config_classes_default(&c);

	*ret = c;
	c = (Config) {};
	return 0;
}

/* ---- the file parser ---- */

typedef enum Section {
	SECTION_NONE,
	SECTION_MAIN,
	SECTION_TIER,
	SECTION_CLASS,
} Section;

/* What the parser knows about a tier beyond ConfigTier; line 0 = not given. */
typedef struct TierState {
	unsigned line;          /* of the [tier NAME] header */
	unsigned role_line;
	unsigned backend_line;
	unsigned path_line;
	char *path;             /* as written, resolved once data_dir is known */
	unsigned keys_seen;     /* bit per tier_keys[] entry */
	unsigned high_line;
	unsigned low_line;
	unsigned nfs_line;      /* of the first of timeout and retries: NFS tiers only */
	unsigned target_line;   /* lower tiers: where their files go by age (a cascade) */
	unsigned migrate_after_line;
	unsigned shared_line;
	unsigned spill_line;
	char *target;           /* as written, resolved once every tier is known */
} TierState;

typedef struct Parser {
	const char *buf;
	size_t len;
	size_t pos;
	const char *filename;
	unsigned line;          /* physical line last handed to inih, 1-based */

	Section section;
	size_t tier;            /* index into config.tiers when section == SECTION_TIER */
	unsigned main_line;     /* of [fratier] */
	unsigned main_keys_seen;

	ConfigClass klass;      /* when section == SECTION_CLASS */
	unsigned class_line[_CONFIG_CLASS_MAX];       /* of [class NAME]; 0 = not given */
	unsigned class_keys_seen[_CONFIG_CLASS_MAX];
	unsigned chunking_line[_CONFIG_CLASS_MAX];
	unsigned chunk_size_line[_CONFIG_CLASS_MAX];
	unsigned target_line[_CONFIG_CLASS_MAX];
	unsigned pin_line[_CONFIG_CLASS_MAX];         /* of pin = yes */
	unsigned migrate_after_line[_CONFIG_CLASS_MAX];
	char *target[_CONFIG_CLASS_MAX]; /* as written, resolved once every tier is known */

	Config config;
	TierState tiers[CONFIG_TIERS_MAX];

	int r;                  /* first problem: -EINVAL with error set, or -ENOMEM */
	unsigned error_line;
	char *error;
} Parser;

static void parser_done(Parser *p) {
	for (size_t i = 0; i < CONFIG_TIERS_MAX; i++) {
		free(p->tiers[i].path);
		free(p->tiers[i].target);
	}
	for (size_t k = 0; k < _CONFIG_CLASS_MAX; k++)
		free(p->target[k]);
	free(p->error);
	config_done(&p->config);
}

/*
 * Values are quoted back in messages; a config line cannot smuggle terminal
 * controls into them.  The longest string quoted is a tier path joined from
 * two lines, so the buffer always holds it, escaped.
 */
#define ESCAPE_INPUT_MAX (2 * CONFIG_LINE_MAX + 2)
typedef struct Escaped {
	char s[4 * ESCAPE_INPUT_MAX + 1];
} Escaped;

static const char *escape(Escaped *e, const char *s) {
	size_t o = 0;

	assert(strlen(s) <= ESCAPE_INPUT_MAX);
	for (; *s; s++) {
		unsigned char ch = (unsigned char) *s;
		if (ch < 0x20 || ch == 0x7f)
			o += (size_t) snprintf(e->s + o, sizeof(e->s) - o, "\\x%02x", ch);
		else
			e->s[o++] = (char) ch;
	}
	e->s[o] = '\0';
	return e->s;
}

/* The compound literal lives until the end of the enclosing block. */
#define ESC(s) escape(&(Escaped) {}, (s))

/*
 * Only one problem is ever recorded: after it, the reader hands inih no more
 * lines, so no handler runs and nothing else can fail.
 */
static int parser_oom(Parser *p) {
	assert(p->r == 0);
	p->r = -ENOMEM;
	return p->r;
}

/* line 0 = the file as a whole. */
_printf_(3, 4) static int parser_fail(Parser *p, unsigned line, const char *format, ...) {
	_cleanup_free_ char *msg = NULL;
	va_list ap;
	int r;

	assert(p->r == 0);
	va_start(ap, format);
	r = vasprintf(&msg, format, ap);
	va_end(ap);
	if (r < 0) {
		msg = NULL;
		return parser_oom(p);
	}

	if (line > 0)
		r = asprintf(&p->error, "%s:%u: %s", p->filename, line, msg);
	else
		r = asprintf(&p->error, "%s: %s", p->filename, msg);
	if (r < 0) {
		p->error = NULL;
		return parser_oom(p);
	}
	p->error_line = line;
	p->r = -EINVAL;
	return p->r;
}

static int parse_data_dir(Parser *p, const char *key, const char *value) {
	int r;

	if (value[0] != '/')
		return parser_fail(p, p->line, "'%s' must be an absolute path, got '%s'", key, ESC(value));
	if (path_has_control_chars(value))
		return parser_fail(p, p->line, "control character in '%s': '%s'", key, ESC(value));
	r = path_normalize(NULL, value, &p->config.data_dir);
	if (r < 0)
		return parser_oom(p); /* -ENAMETOOLONG cannot happen, see CONFIG_LINE_MAX above */
	return 0;
}

static int parse_control_socket(Parser *p, const char *key, const char *value) {
	if (value[0] != '/')
		return parser_fail(p, p->line, "'%s' must be an absolute path, got '%s'", key, ESC(value));
	if (path_has_control_chars(value))
		return parser_fail(p, p->line, "control character in '%s': '%s'", key, ESC(value));
	if (path_normalize(NULL, value, &p->config.control_socket) < 0)
		return parser_oom(p);
	return 0;
}

static int parse_key_file(Parser *p, const char *key, const char *value) {
	if (value[0] != '/')
		return parser_fail(p, p->line, "'%s' must be an absolute path, got '%s'", key, ESC(value));
	if (path_has_control_chars(value))
		return parser_fail(p, p->line, "control character in '%s': '%s'", key, ESC(value));
	free(p->config.key_file);
	p->config.key_file = NULL;
	if (path_normalize(NULL, value, &p->config.key_file) < 0)
		return parser_oom(p);
	return 0;
}

static int parse_boolean_key(Parser *p, const char *key, const char *value, bool *ret) {
	int b = parse_boolean(value);
	if (b < 0)
		return parser_fail(p, p->line, "invalid boolean '%s' for '%s' (expected yes/no, true/false, on/off or 1/0)",
				   ESC(value), key);
	*ret = b;
	return 0;
}

bool config_host_name_is_valid(const char *name) {
	size_t n = strnlen(name, CONFIG_HOST_NAME_MAX + 1);
	return n >= 1 && n <= CONFIG_HOST_NAME_MAX && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

static int parse_host(Parser *p, const char *key, const char *value) {
	/* The name becomes part of object names on the shared tier (dedup/backend.h, contract 1). */
	if (!config_host_name_is_valid(value))
		return parser_fail(p, p->line, "invalid '%s' '%s' (1 to %d characters of a-z 0-9 _ -)", key, ESC(value),
				   CONFIG_HOST_NAME_MAX);
	p->config.host = strdup(value);
	if (!p->config.host)
		return parser_oom(p);
	return 0;
}

static int parse_shared(Parser *p, const char *key, const char *value) {
	p->tiers[p->tier].shared_line = p->line;
	return parse_boolean_key(p, key, value, &p->config.tiers[p->tier].shared);
}

static int parse_encrypt(Parser *p, const char *key, const char *value) {
	ConfigTier *t = &p->config.tiers[p->tier];
	int r = parse_boolean_key(p, key, value, &t->encrypt);
	if (r >= 0)
		t->has_encrypt = true;
	return r;
}

bool config_tier_encrypts(const ConfigTier *t, bool have_key) {
	if (t->has_encrypt)
		return t->encrypt;
	return have_key && t->role != TIER_ROLE_HOT;
}

static int parse_spill(Parser *p, const char *key, const char *value) {
	ConfigTier *t = &p->config.tiers[p->tier];
	p->tiers[p->tier].spill_line = p->line;
	int r = parse_boolean_key(p, key, value, &t->spill);
	if (r >= 0)
		t->has_spill = true;
	return r;
}

bool config_tier_spills(const ConfigTier *t, bool have_key) {
	if (t->has_spill)
		return t->spill;
	return !config_tier_encrypts(t, have_key);
}

static int parse_allow_other(Parser *p, const char *key, const char *value) {
	return parse_boolean_key(p, key, value, &p->config.allow_other);
}

static int parse_log_level(Parser *p, const char *key, const char *value) {
	for (int level = LOG_ERR; level <= LOG_DEBUG; level++)
		if (log_level_table[level] && strcmp(value, log_level_table[level]) == 0) {
			p->config.log_level = level;
			return 0;
		}
	return parser_fail(p, p->line, "invalid log level '%s' for '%s' (expected err, warning, notice, info or debug)",
			   ESC(value), key);
}

static int parse_role(Parser *p, const char *key, const char *value) {
	TierRole role = tier_role_from_string(value);
	if (role < 0)
		return parser_fail(p, p->line, "invalid role '%s' for '%s' (expected hot, capacity or nfs)", ESC(value), key);
	p->config.tiers[p->tier].role = role;
	p->tiers[p->tier].role_line = p->line;
	return 0;
}

static int parse_backend(Parser *p, const char *key, const char *value) {
	TierBackend backend = tier_backend_from_string(value);
	if (backend < 0)
		return parser_fail(p, p->line, "invalid backend '%s' for '%s' (expected dir or nfs)", ESC(value), key);
	p->config.tiers[p->tier].backend = backend;
	p->tiers[p->tier].backend_line = p->line;
	return 0;
}

static int parse_path(Parser *p, const char *key, const char *value) {
	TierState *ts = &p->tiers[p->tier];

	if (path_has_control_chars(value))
		return parser_fail(p, p->line, "control character in '%s': '%s'", key, ESC(value));
	ts->path = strdup(value);
	if (!ts->path)
		return parser_oom(p);
	ts->path_line = p->line;
	return 0;
}

static int parse_size_key(Parser *p, const char *key, const char *value, uint64_t *ret) {
	int r = parse_size(value, ret);
	if (r == -ERANGE)
		return parser_fail(p, p->line, "size '%s' out of range for '%s'", ESC(value), key);
	if (r < 0)
		return parser_fail(p, p->line, "invalid size '%s' for '%s'", ESC(value), key);
	return 0;
}

static int parse_duration_key(Parser *p, const char *key, const char *value, uint64_t *ret) {
	int r = parse_duration(value, ret);
	if (r == -ERANGE)
		return parser_fail(p, p->line, "duration '%s' out of range for '%s' (at most %llud)", ESC(value), key,
				   CONFIG_DURATION_MAX / 86400);
	if (r < 0)
		return parser_fail(p, p->line, "invalid duration '%s' for '%s' (expected a number with s, m, h or d)",
				   ESC(value), key);
	return 0;
}

static int parse_policy_interval(Parser *p, const char *key, const char *value) {
	uint64_t v;
	int r = parse_duration_key(p, key, value, &v);
	if (r < 0)
		return r;
	if (v < 1 || v > CONFIG_POLICY_INTERVAL_MAX)
		return parser_fail(p, p->line, "'%s' must be from 1s to %ud, got '%s'", key,
				   CONFIG_POLICY_INTERVAL_MAX / 86400, ESC(value));
	p->config.policy_interval = v;
	return 0;
}

static int parse_history_interval(Parser *p, const char *key, const char *value) {
	uint64_t v;
	int r = parse_duration_key(p, key, value, &v);
	if (r < 0)
		return r;
	if (v > CONFIG_HISTORY_INTERVAL_MAX)
		return parser_fail(p, p->line, "'%s' must be 0 (off) or at most %ud, got '%s'", key,
				   CONFIG_HISTORY_INTERVAL_MAX / 86400, ESC(value));
	p->config.history_interval = v;
	return 0;
}

static int parse_shared_lease(Parser *p, const char *key, const char *value) {
	uint64_t v;
	int r = parse_duration_key(p, key, value, &v);
	if (r < 0)
		return r;
	if (v < CONFIG_SHARED_LEASE_MIN || v > CONFIG_SHARED_LEASE_MAX)
		return parser_fail(p, p->line, "'%s' must be %us .. %uh, got '%s'", key, CONFIG_SHARED_LEASE_MIN,
				   CONFIG_SHARED_LEASE_MAX / 3600, ESC(value));
	p->config.shared_lease = v;
	return 0;
}

static int parse_policy_bandwidth(Parser *p, const char *key, const char *value) {
	return parse_size_key(p, key, value, &p->config.policy_bandwidth);
}

static int parse_percent(Parser *p, const char *key, const char *value, unsigned *ret) {
	char *end;
	errno = 0;
	unsigned long v = strtoul(value, &end, 10);
	if (value[0] < '0' || value[0] > '9' || errno != 0 || (*end != '\0' && strcmp(end, "%") != 0) || v > 100)
		return parser_fail(p, p->line, "invalid percentage '%s' for '%s' (expected 0%% to 100%%)", ESC(value), key);
	*ret = (unsigned) v;
	return 0;
}

static int parse_background_share(Parser *p, const char *key, const char *value) {
	int r = parse_percent(p, key, value, &p->config.background_share);
	if (r < 0)
		return r;
	if (p->config.background_share == 0)
		return parser_fail(p, p->line, "'%s' must be from 1%% to 100%%, got '%s' (0 would never seal while files are written)",
				   key, ESC(value));
	return 0;
}

static int parse_high_watermark(Parser *p, const char *key, const char *value) {
	p->tiers[p->tier].high_line = p->line;
	return parse_percent(p, key, value, &p->config.tiers[p->tier].high_watermark);
}

static int parse_low_watermark(Parser *p, const char *key, const char *value) {
	p->tiers[p->tier].low_line = p->line;
	return parse_percent(p, key, value, &p->config.tiers[p->tier].low_watermark);
}

static int parse_nfs_timeout(Parser *p, const char *key, const char *value) {
	uint64_t v;
	int r = parse_duration_key(p, key, value, &v);
	if (r < 0)
		return r;
	if (v < 1 || v > CONFIG_NFS_TIMEOUT_MAX)
		return parser_fail(p, p->line, "'%s' must be from 1s to %us, got '%s'", key, CONFIG_NFS_TIMEOUT_MAX,
				   ESC(value));
	p->tiers[p->tier].nfs_line = p->tiers[p->tier].nfs_line ?: p->line;
	p->config.tiers[p->tier].nfs_timeout = (unsigned) v;
	return 0;
}

static int parse_nfs_retries(Parser *p, const char *key, const char *value) {
	char *end;
	errno = 0;
	unsigned long v = strtoul(value, &end, 10);
	if (value[0] < '0' || value[0] > '9' || errno != 0 || *end != '\0' || v > CONFIG_NFS_RETRIES_MAX)
		return parser_fail(p, p->line, "'%s' must be an integer from 0 to %u, got '%s'", key,
				   CONFIG_NFS_RETRIES_MAX, ESC(value));
	p->tiers[p->tier].nfs_line = p->tiers[p->tier].nfs_line ?: p->line;
	p->config.tiers[p->tier].nfs_retries = (unsigned) v;
	p->config.tiers[p->tier].has_nfs_retries = true;
	return 0;
}

static int parse_tier_migrate_after(Parser *p, const char *key, const char *value) {
	p->tiers[p->tier].migrate_after_line = p->line;
	return parse_duration_key(p, key, value, &p->config.tiers[p->tier].migrate_after);
}

static int parse_tier_target(Parser *p, const char *key, const char *value) {
	(void) key;
	p->tiers[p->tier].target = strdup(value);
	if (!p->tiers[p->tier].target)
		return -ENOMEM;
	p->tiers[p->tier].target_line = p->line;
	return 0;
}

static int parse_migrate_after(Parser *p, const char *key, const char *value) {
	p->migrate_after_line[p->klass] = p->line;
	return parse_duration_key(p, key, value, &p->config.classes[p->klass].migrate_after);
}

/* keep_hot = DURATION: the recovery window whose archived logs stay on the hot tier (tier/planner.h). */
static int parse_keep_hot(Parser *p, const char *key, const char *value) {
	if (p->klass != CONFIG_CLASS_ARCHIVELOG)
		return parser_fail(p, p->line, "'%s' belongs to [class archivelog]", key);
	return parse_duration_key(p, key, value, &p->config.classes[p->klass].keep_hot);
}

/* Appends one name pattern of the section's class; refuses a pattern that could never match a file name. */
static int add_name_pattern(Parser *p, const char *key, const char *glob, size_t len) {
	Config *c = &p->config;
	if (len == 0 || len > CONFIG_NAME_PATTERN_MAX || memchr(glob, '/', len))
		return parser_fail(p, p->line, "'%s': a pattern is a file name of 1 to %u characters without '/', got '%.*s'",
				   key, CONFIG_NAME_PATTERN_MAX, (int) MIN(len, (size_t) 64), glob);
	if (c->n_name_patterns == CONFIG_NAME_PATTERNS_MAX)
		return parser_fail(p, p->line, "at most %u name patterns in all", CONFIG_NAME_PATTERNS_MAX);
	char *copy = strndup(glob, len);
	if (!copy)
		return -ENOMEM;
	c->name_patterns[c->n_name_patterns++] = (ConfigNamePattern) { .glob = copy, .file_class = p->klass };
	return 0;
}

static int parse_pin(Parser *p, const char *key, const char *value) {
	bool *pinned = &p->config.classes[p->klass].pinned;
	int r = parse_boolean_key(p, key, value, pinned);
	if (r >= 0)
		p->pin_line[p->klass] = *pinned ? p->line : 0;
	return r;
}

/* names = GLOB...: fnmatch(3) patterns on file names, separated by blanks. */
static int parse_names(Parser *p, const char *key, const char *value) {
	for (const char *s = value; *s;) {
		s += strspn(s, " \t");
		size_t n = strcspn(s, " \t");
		if (n == 0)
			break;
		int r = add_name_pattern(p, key, s, n);
		if (r < 0)
			return r;
		s += n;
	}
	return 0;
}

/*
 * log_archive_format = FORMAT...: the database's LOG_ARCHIVE_FORMAT, as
 * written in its spfile, for archived logs kept outside the recovery
 * area's layout under names no built-in rule knows (arch_%t_%s_%r.dbf
 * would otherwise be taken for an image copy).  Each %t %s %r %d %a
 * (either case) stands for any text; %% is a '%'; the rest is literal.
 */
static int parse_log_archive_format(Parser *p, const char *key, const char *value) {
	if (p->klass != CONFIG_CLASS_ARCHIVELOG)
		return parser_fail(p, p->line, "'%s' belongs to [class archivelog]", key);
	for (const char *s = value; *s;) {
		char glob[2 * CONFIG_NAME_PATTERN_MAX + 1];
		size_t n = 0;
		bool sequence = false;
		s += strspn(s, " \t");
		if (!*s)
			break;
		for (; *s && *s != ' ' && *s != '\t'; s++) {
			if (n + 2 >= sizeof(glob))
				return parser_fail(p, p->line, "'%s': a format is at most %u characters", key,
						   CONFIG_NAME_PATTERN_MAX);
			if (*s == '%' && s[1] && strchr("tTsSrRdDaA", s[1])) {
				sequence |= s[1] == 's' || s[1] == 'S';
				glob[n++] = '*';
				s++;
			} else if (*s == '%' && s[1] == '%') {
				glob[n++] = '%';
				s++;
			} else if (*s == '%')
				return parser_fail(p, p->line, "'%s': unknown '%%%c' (Oracle's are %%t %%s %%r %%d %%a, %%%%)", key,
						   s[1] ? s[1] : ' ');
			else {
				/* Literal: fnmatch's specials escaped. */
				if (strchr("*?[]\\", *s))
					glob[n++] = '\\';
				glob[n++] = *s;
			}
		}
		if (!sequence)
			return parser_fail(p, p->line, "'%s': a format without %%s (the log sequence) names one file only", key);
		int r = add_name_pattern(p, key, glob, n);
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_target(Parser *p, const char *key, const char *value) {
	p->target[p->klass] = strdup(value);
	if (!p->target[p->klass])
		return parser_oom(p);
	p->target_line[p->klass] = p->line;
	return 0;
}

static int parse_capacity(Parser *p, const char *key, const char *value) {
	return parse_size_key(p, key, value, &p->config.tiers[p->tier].capacity);
}

static int parse_reserve(Parser *p, const char *key, const char *value) {
	p->config.tiers[p->tier].has_reserve = true;
	return parse_size_key(p, key, value, &p->config.tiers[p->tier].reserve);
}

static int parse_chunking(Parser *p, const char *key, const char *value) {
	ConfigChunking c = config_chunking_from_string(value);
	if (c < 0)
		return parser_fail(p, p->line, "invalid chunking '%s' for '%s' (expected oracle, cdc or fixed)", ESC(value), key);
	p->config.classes[p->klass].chunking = c;
	p->chunking_line[p->klass] = p->line;
	return 0;
}

static int parse_chunk_size(Parser *p, const char *key, const char *value) {
	uint64_t v;
	int r = parse_size_key(p, key, value, &v);
	if (r < 0)
		return r;
	/* Only the range here: which sizes are valid depends on chunking, checked in parser_finish(). */
	if (v > CONFIG_FIXED_SIZE_MAX)
		return parser_fail(p, p->line, "'%s' is at most %uM, got '%s'", key, CONFIG_FIXED_SIZE_MAX >> 20,
				   ESC(value));
	p->config.classes[p->klass].chunk_size = (uint32_t) v;
	p->chunk_size_line[p->klass] = p->line;
	return 0;
}

static int parse_level(Parser *p, const char *key, const char *value, int *ret) {
	char *end;
	errno = 0;
	long v = strtol(value, &end, 10);
	if (errno != 0 || end == value || *end != '\0' || v < CONFIG_ZSTD_LEVEL_MIN || v > CONFIG_ZSTD_LEVEL_MAX)
		return parser_fail(p, p->line, "invalid '%s' '%s' (expected an integer from %d to %d)", key, ESC(value),
				   CONFIG_ZSTD_LEVEL_MIN, CONFIG_ZSTD_LEVEL_MAX);
	*ret = (int) v;
	return 0;
}

static int parse_region_size(Parser *p, const char *key, const char *value) {
	uint64_t v;
	int r = parse_size_key(p, key, value, &v);
	if (r < 0)
		return r;
	if (v < CONFIG_REGION_SIZE_MIN || v > CONFIG_REGION_SIZE_MAX)
		return parser_fail(p, p->line, "'%s' must be from %uK to %uM, got '%s'", key, CONFIG_REGION_SIZE_MIN >> 10,
				   CONFIG_REGION_SIZE_MAX >> 20, ESC(value));
	p->config.classes[p->klass].region_size = (uint32_t) v;
	return 0;
}

static int parse_split_size(Parser *p, const char *key, const char *value) {
	uint64_t v;
	int r = parse_size_key(p, key, value, &v);
	if (r < 0)
		return r;
	if (v != 0 && (v < CONFIG_SPLIT_SIZE_MIN || v > CONFIG_SPLIT_SIZE_MAX))
		return parser_fail(p, p->line, "'%s' must be 0 or from %lluM to %lluT, got '%s'", key,
				   (unsigned long long) (CONFIG_SPLIT_SIZE_MIN >> 20),
				   (unsigned long long) (CONFIG_SPLIT_SIZE_MAX >> 40), ESC(value));
	p->config.classes[p->klass].split_size = v;
	return 0;
}

static int parse_zstd_level(Parser *p, const char *key, const char *value) {
	return parse_level(p, key, value, &p->config.classes[p->klass].zstd_level);
}

static int parse_tier_zstd_level(Parser *p, const char *key, const char *value) {
	ConfigTier *t = &p->config.tiers[p->tier];
	int r = parse_level(p, key, value, &t->zstd_level);
	if (r >= 0)
		t->has_zstd_level = true;
	return r;
}

typedef struct KeyDef {
	const char *name;
	int (*parse)(Parser *p, const char *key, const char *value);
} KeyDef;

static const KeyDef main_keys[] = {
	{ "data_dir", parse_data_dir },
	{ "allow_other", parse_allow_other },
	{ "log_level", parse_log_level },
	{ "control_socket", parse_control_socket },
	{ "key_file", parse_key_file },
	{ "policy_interval", parse_policy_interval },
	{ "policy_bandwidth", parse_policy_bandwidth },
	{ "history_interval", parse_history_interval },
	{ "background_share", parse_background_share },
	{ "host", parse_host },
	{ "shared_lease", parse_shared_lease },
};

static const KeyDef tier_keys[] = {
	{ "role", parse_role },
	{ "backend", parse_backend },
	{ "path", parse_path },
	{ "capacity", parse_capacity },
	{ "reserve", parse_reserve },
	{ "zstd_level", parse_tier_zstd_level },
	{ "high_watermark", parse_high_watermark },
	{ "low_watermark", parse_low_watermark },
	{ "timeout", parse_nfs_timeout },
	{ "retries", parse_nfs_retries },
	{ "migrate_after", parse_tier_migrate_after },
	{ "target", parse_tier_target },
	{ "shared", parse_shared },
	{ "encrypt", parse_encrypt },
	{ "spill", parse_spill },
};

static const KeyDef class_keys[] = {
	{ "chunking", parse_chunking },
	{ "chunk_size", parse_chunk_size },
	{ "zstd_level", parse_zstd_level },
	{ "region_size", parse_region_size },
	{ "split_size", parse_split_size },
	{ "migrate_after", parse_migrate_after },
	{ "target", parse_target },
	{ "pin", parse_pin },
	{ "names", parse_names },
	{ "log_archive_format", parse_log_archive_format },
	{ "keep_hot", parse_keep_hot },
};

_Static_assert(ELEMENTSOF(main_keys) <= 32 && ELEMENTSOF(tier_keys) <= 32 && ELEMENTSOF(class_keys) <= 32,
	       "keys_seen is a 32-bit mask");

/* "NAME" when name is "PREFIX NAME" (any blanks between), else NULL. */
static const char *section_argument(const char *name, const char *prefix) {
	size_t n = strlen(prefix);
	if (strncmp(name, prefix, n) != 0 || (name[n] != '\0' && name[n] != ' ' && name[n] != '\t'))
		return NULL;
	return name + n + strspn(name + n, " \t");
}

static int parser_begin_class(Parser *p, const char *klass) {
	ConfigClass c = config_class_from_string(klass);
	if (c < 0)
		return parser_fail(p, p->line, "unknown class '%s' (expected archivelog, backuppiece, imagecopy or other)",
				   ESC(klass));
	if (p->class_line[c] > 0)
		return parser_fail(p, p->line, "duplicate section [class %s] (first on line %u)", klass,
				   p->class_line[c]);
	p->class_line[c] = p->line;
	p->klass = c;
	p->section = SECTION_CLASS;
	return 0;
}

static bool tier_name_is_valid(const char *name) {
	size_t n = strlen(name);
	return n >= 1 && n <= CONFIG_TIER_NAME_MAX &&
	       strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

static int parser_begin_section(Parser *p, const char *name) {
	if (strcmp(name, "fratier") == 0) {
		if (p->main_line > 0)
			return parser_fail(p, p->line, "duplicate section [fratier] (first on line %u)", p->main_line);
		p->main_line = p->line;
		p->section = SECTION_MAIN;
		return 0;
	}

	const char *klass = section_argument(name, "class");
	if (klass)
		return parser_begin_class(p, klass);

	const char *tier = section_argument(name, "tier");
	if (!tier)
		return parser_fail(p, p->line, "unknown section [%s]", ESC(name));
	if (!tier_name_is_valid(tier))
		return parser_fail(p, p->line, "invalid tier name '%s' (1 to %d characters of A-Z a-z 0-9 _ -)",
				   ESC(tier), CONFIG_TIER_NAME_MAX);
	for (size_t i = 0; i < p->config.n_tiers; i++)
		if (strcmp(p->config.tiers[i].name, tier) == 0)
			return parser_fail(p, p->line, "duplicate tier name '%s' (first on line %u)", tier,
					   p->tiers[i].line);
	if (p->config.n_tiers >= CONFIG_TIERS_MAX)
		return parser_fail(p, p->line, "more than %d tiers", CONFIG_TIERS_MAX);

	size_t i = p->config.n_tiers;
	p->config.tiers[i] = (ConfigTier) { .role = _TIER_ROLE_INVALID, .backend = _TIER_BACKEND_INVALID };
	p->config.tiers[i].name = strdup(tier);
	if (!p->config.tiers[i].name)
		return parser_oom(p);
	p->config.n_tiers++;
	p->tiers[i].line = p->line;
	p->tier = i;
	p->section = SECTION_TIER;
	return 0;
}

/* Looks at a line before inih does: section headers and indentation (invariants 2 and 3). */
static int parser_check_line(Parser *p, const char *line) {
	static const char bom[] = "\xef\xbb\xbf";
	const char *start;

	/* inih skips a BOM on line 1 only, and so do we. */
	if (p->line == 1 && strncmp(line, bom, strlen(bom)) == 0)
		line += strlen(bom);

	/* Same notion of space, blank line and comment as inih's lskip()/rstrip(). */
	for (start = line; isspace((unsigned char) *start); start++)
		;
	if (*start == '\0' || *start == ';' || *start == '#')
		return 0;
	if (start > line)
		return parser_fail(p, p->line, "indented line (continuation lines are not supported)");
	if (*start != '[')
		return 0;

	const char *end = strchr(start, ']');
	if (!end)
		return parser_fail(p, p->line, "missing ']' in section header");
	const char *rest = end + 1;
	while (isspace((unsigned char) *rest))
		rest++;
	if (*rest != '\0' && *rest != ';' && *rest != '#')
		return parser_fail(p, p->line, "unexpected text after section header");

	char name[CONFIG_LINE_MAX + 1];
	size_t n = (size_t) (end - start - 1);
	assert(n < sizeof(name));
	memcpy(name, start + 1, n);
	name[n] = '\0';
	return parser_begin_section(p, name);
}

/* inih's fgets()-like reader over (buf, len): one whole physical line per call. */
static char *parser_read_line(char *str, int num, void *user) {
	Parser *p = user;

	if (p->r < 0 || p->pos >= p->len)
		return NULL;

	const char *start = p->buf + p->pos;
	const char *nl = memchr(start, '\n', p->len - p->pos);
	size_t n = nl ? (size_t) (nl - start) + 1 : p->len - p->pos;
	size_t content = n - (nl ? 1 : 0);
	if (content > 0 && start[content - 1] == '\r')
		content--;

	p->line++;
	p->pos += n;

	/* Room for the content, "\r\n" and NUL (invariant 1). */
	size_t limit = num > 3 ? MIN((size_t) CONFIG_LINE_MAX, (size_t) num - 3) : 0;
	if (content > limit) {
		(void) parser_fail(p, p->line, "line too long (max %zu bytes)", limit);
		return NULL;
	}

	memcpy(str, start, n);
	str[n] = '\0';
	if (parser_check_line(p, str) < 0)
		return NULL;
	return str;
}

static int parser_handle_key(void *user, const char *section, const char *name, const char *value) {
	Parser *p = user;
	const KeyDef *keys;
	size_t n_keys;
	unsigned *seen;
	char label[sizeof("class ") + CONFIG_TIER_NAME_MAX];

	/* section is ignored: parser_check_line() tracked it (invariant 2). */
	switch (p->section) {
	case SECTION_MAIN:
		keys = main_keys;
		n_keys = ELEMENTSOF(main_keys);
		seen = &p->main_keys_seen;
		(void) snprintf(label, sizeof(label), "fratier");
		break;
	case SECTION_TIER:
		keys = tier_keys;
		n_keys = ELEMENTSOF(tier_keys);
		seen = &p->tiers[p->tier].keys_seen;
		(void) snprintf(label, sizeof(label), "tier %s", p->config.tiers[p->tier].name);
		break;
	case SECTION_CLASS:
		keys = class_keys;
		n_keys = ELEMENTSOF(class_keys);
		seen = &p->class_keys_seen[p->klass];
		(void) snprintf(label, sizeof(label), "class %s", config_class_to_string(p->klass));
		break;
	default:
		(void) parser_fail(p, p->line, "key '%s' outside of any section", ESC(name));
		return 0;
	}

	for (size_t i = 0; i < n_keys; i++) {
		if (strcmp(name, keys[i].name) != 0)
			continue;
		if (*seen & (1u << i)) {
			(void) parser_fail(p, p->line, "duplicate key '%s' in section [%s]", name, label);
			return 0;
		}
		*seen |= 1u << i;
		if (value[0] == '\0') {
			(void) parser_fail(p, p->line, "empty value for '%s'", name);
			return 0;
		}
		return keys[i].parse(p, keys[i].name, value) >= 0;
	}

	(void) parser_fail(p, p->line, "unknown key '%s' in section [%s]", ESC(name), label);
	return 0;
}

static int parser_resolve_path(Parser *p, size_t i) {
	ConfigTier *t = &p->config.tiers[i];
	TierState *ts = &p->tiers[i];
	unsigned line = ts->path_line ? ts->path_line : ts->line;
	const char *path = ts->path;
	int r;

	if (!path) {
		/* Only local hot and capacity tiers have a natural home under data_dir. */
		if (t->backend != TIER_BACKEND_DIR || t->role == TIER_ROLE_NFS)
			return parser_fail(p, ts->line, "tier '%s' needs a path (role %s, backend %s)", t->name,
					   tier_role_to_string(t->role), tier_backend_to_string(t->backend));
		path = tier_role_to_string(t->role);
	} else if (t->backend == TIER_BACKEND_NFS) {
		/* The host part must not be empty; libnfs in tier/ parses the rest. */
		if (!path_is_nfs_url(path) || path[6] == '\0' || path[6] == '/' || strpbrk(path, " \t"))
			return parser_fail(p, line, "path of tier '%s' (backend nfs) must be an nfs://HOST/EXPORT URL, got '%s'",
					   t->name, ESC(path));
		t->path = TAKE_PTR(ts->path);
		return 0;
	} else if (path_is_nfs_url(path))
		return parser_fail(p, line, "tier '%s' has an nfs:// path but backend dir (set backend = nfs)", t->name);

	r = path_normalize(p->config.data_dir, path, &t->path);
	if (r < 0)
		return parser_oom(p); /* -ENAMETOOLONG cannot happen, see CONFIG_LINE_MAX above */
	return 0;
}

/* Whole-file checks, in file order (invariant 5). */
/* A lower tier by name or number (1 = the first after hot) into *ret; what names the key's owner in errors. */
static int parser_resolve_target(Parser *p, const char *target, unsigned line, const char *what, uint32_t *ret) {
	const Config *c = &p->config;
	uint32_t number = 0, lower = 0;
	char *end;

	errno = 0;
	unsigned long v = strtoul(target, &end, 10);
	bool numeric = target[0] >= '0' && target[0] <= '9' && *end == '\0' && errno == 0;
	for (size_t i = 0; i < c->n_tiers; i++) {
		if (c->tiers[i].role == TIER_ROLE_HOT) {
			if (!numeric && strcmp(c->tiers[i].name, target) == 0)
				return parser_fail(p, line, "target of %s is the hot tier '%s' (expected a lower tier)", what,
						   target);
			continue;
		}
		lower++;
		if (numeric ? v == lower : strcmp(c->tiers[i].name, target) == 0)
			number = lower;
	}
	if (number == 0)
		return parser_fail(p, line,
				   numeric ? "target of %s: no tier number '%s' (1 to %u; 0 is the hot tier)"
					   : "target of %s: no tier named '%s' (lower tiers: %u)",
				   what, ESC(target), lower);
	*ret = number;
	return 0;
}

static int parser_finish(Parser *p) {
	Config *c = &p->config;
	size_t hot = SIZE_MAX;
	int r;

	if (!c->data_dir)
		return parser_fail(p, 0, "data_dir is not set in section [fratier]");

	for (size_t i = 0; i < c->n_tiers; i++) {
		ConfigTier *t = &c->tiers[i];
		TierState *ts = &p->tiers[i];

		if (ts->role_line == 0) {
			t->role = tier_role_from_string(t->name);
			if (t->role < 0)
				return parser_fail(p, ts->line, "tier '%s' has no role (set role = hot, capacity or nfs)",
						   t->name);
		}
		if (ts->backend_line == 0)
			t->backend = t->role == TIER_ROLE_NFS ? TIER_BACKEND_NFS : TIER_BACKEND_DIR;
		config_tier_default_level(t);

		if (t->shared && t->role == TIER_ROLE_HOT)
			return parser_fail(p, ts->shared_line, "the hot tier '%s' cannot be shared: each host keeps its own",
					   t->name);
		if (t->has_spill && t->role == TIER_ROLE_HOT)
			return parser_fail(p, ts->spill_line, "spill is for lower tiers: the hot tier '%s' takes new files "
					   "while it has room", t->name);
		if (t->has_spill && t->spill && (t->backend != TIER_BACKEND_DIR || t->shared))
			return parser_fail(p, ts->spill_line, "tier '%s' cannot take spilled files: only a directory tier "
					   "of this host's (not nfs, not shared) holds raw files", t->name);
		if (ts->nfs_line > 0 && t->backend != TIER_BACKEND_NFS)
			return parser_fail(p, ts->nfs_line, "timeout and retries belong to NFS tiers, not to tier '%s' (backend %s)",
					   t->name, tier_backend_to_string(t->backend));
		if (t->role == TIER_ROLE_HOT) {
			/* The hot tier holds the raw staging files the FUSE side writes into. */
			if (t->backend != TIER_BACKEND_DIR)
				return parser_fail(p, ts->backend_line, "hot tier '%s' must use backend dir", t->name);
			if (hot != SIZE_MAX)
				return parser_fail(p, ts->role_line ? ts->role_line : ts->line,
						   "more than one hot tier ('%s' and '%s')", c->tiers[hot].name, t->name);
			hot = i;
		}

		r = parser_resolve_path(p, i);
		if (r < 0)
			return r;

		for (size_t j = 0; j < i; j++)
			if (strcmp(c->tiers[j].path, t->path) == 0)
				return parser_fail(p, ts->path_line ? ts->path_line : ts->line,
						   "tier '%s' has the same path as tier '%s': '%s'", t->name,
						   c->tiers[j].name, ESC(t->path));
	}

	if (hot == SIZE_MAX)
		return parser_fail(p, 0, "no hot tier defined");

	for (size_t i = 0; i < c->n_tiers; i++) {
		ConfigTier *t = &c->tiers[i];
		TierState *ts = &p->tiers[i];
		unsigned line = ts->high_line ?: ts->low_line;

		if (t->role != TIER_ROLE_HOT) {
			/* Only the hot tier is measured: lower tiers have nowhere further to demote to. */
			if (line > 0)
				return parser_fail(p, MIN(ts->high_line ?: UINT_MAX, ts->low_line ?: UINT_MAX),
						   "watermarks belong to the hot tier, not to tier '%s'", t->name);
			continue;
		}
		if (ts->high_line == 0)
			t->high_watermark = CONFIG_WATERMARK_HIGH_DEFAULT;
		if (ts->low_line == 0)
			t->low_watermark = MIN(CONFIG_WATERMARK_LOW_DEFAULT, t->high_watermark ? t->high_watermark - 1 : 0);
		if (t->low_watermark >= t->high_watermark)
			return parser_fail(p, MAX(ts->high_line, ts->low_line),
					   "low_watermark (%u%%) of tier '%s' must be below its high_watermark (%u%%)",
					   t->low_watermark, t->name, t->high_watermark);
	}

	for (ConfigClass k = 0; k < _CONFIG_CLASS_MAX; k++) {
		char what[64];
		/* A pinned class stays on the hot tier: a rule to move it contradicts the pin. */
		if (p->pin_line[k] && (p->target[k] || p->migrate_after_line[k]))
			return parser_fail(p, p->target[k] ? p->target_line[k] : p->migrate_after_line[k],
					   "class %s is pinned (pin = yes on line %u): it takes no target or migrate_after",
					   config_class_to_string(k), p->pin_line[k]);
		if (p->pin_line[k]) {
			c->classes[k].target_tier = 0;
			c->classes[k].migrate_after = 0;
		}
		snprintf(what, sizeof(what), "class %s", config_class_to_string(k));
		if (p->target[k]) {
			r = parser_resolve_target(p, p->target[k], p->target_line[k], what, &c->classes[k].target_tier);
			if (r < 0)
				return r;
		}
	}

	/* Cascades: a lower tier's files move on by age, to a tier after it (so moves never loop). */
	for (size_t i = 0, lower = 0; i < c->n_tiers; i++) {
		ConfigTier *t = &c->tiers[i];
		TierState *ts = &p->tiers[i];
		char what[64];
		if (t->role != TIER_ROLE_HOT)
			lower++;
		if (!ts->target && ts->migrate_after_line == 0)
			continue;
		if (t->role == TIER_ROLE_HOT)
			return parser_fail(p, ts->target_line ?: ts->migrate_after_line,
					   "the hot tier's files move by their class's target and migrate_after, "
					   "not by the tier's");
		if (!ts->target || t->migrate_after == 0)
			return parser_fail(p, ts->target_line ?: ts->migrate_after_line,
					   "tier '%s' needs both target and migrate_after (greater than 0) for its files to move on",
					   t->name);
		snprintf(what, sizeof(what), "tier %s", t->name);
		r = parser_resolve_target(p, ts->target, ts->target_line, what, &t->target_tier);
		if (r < 0)
			return r;
		if (t->target_tier <= lower)
			return parser_fail(p, ts->target_line,
					   "target of tier %s must come after it (tier %zu), so that files never move in a circle",
					   t->name, lower);
	}

	for (ConfigClass k = 0; k < _CONFIG_CLASS_MAX; k++) {
		ConfigClassPolicy *cp = &c->classes[k];
		unsigned line = p->chunk_size_line[k] ?: p->chunking_line[k];
		const char *name = config_class_to_string(k);

		if (line == 0)
			continue;
		/* Switching to fixed without a size keeps the default's size; it fits both. */
		if (cp->chunking != CONFIG_CHUNKING_FIXED &&
		    (cp->chunk_size < CONFIG_CDC_SIZE_MIN || cp->chunk_size > CONFIG_CDC_SIZE_MAX ||
		     (cp->chunk_size & (cp->chunk_size - 1)) != 0))
			return parser_fail(p, line,
					   "chunk_size of class %s (%s) must be a power of two from %uK to %uM, got %u",
					   name, config_chunking_to_string(cp->chunking), CONFIG_CDC_SIZE_MIN >> 10,
					   CONFIG_CDC_SIZE_MAX >> 20, cp->chunk_size);
		if (cp->chunking == CONFIG_CHUNKING_FIXED &&
		    (cp->chunk_size < CONFIG_FIXED_SIZE_MIN || cp->chunk_size % 512 != 0))
			return parser_fail(p, line,
					   "chunk_size of class %s (fixed) must be a multiple of 512 from %u to %uM, got %u",
					   name, CONFIG_FIXED_SIZE_MIN, CONFIG_FIXED_SIZE_MAX >> 20, cp->chunk_size);
	}
	return 0;
}

static int parser_run(Parser *p) {
	int e;

	if (p->len > CONFIG_FILE_SIZE_MAX)
		return parser_fail(p, 0, "file too large (max %u bytes)", CONFIG_FILE_SIZE_MAX);

	/* inih works on C strings: a NUL would silently end a line. */
	const char *nul = p->len > 0 ? memchr(p->buf, '\0', p->len) : NULL;
	if (nul) {
		unsigned line = 1;
		for (const char *s = p->buf; s < nul; s++)
			line += *s == '\n';
		return parser_fail(p, line, "NUL byte in file");
	}

	e = ini_parse_stream(parser_read_line, p, parser_handle_key, p);
	if (e < 0)
		/* -2: inih could not allocate its line buffer (-1, "cannot open", needs a file name). */
		return parser_oom(p);
	/* inih's first syntax error, if it came before our first problem (invariant 4). */
	if (e > 0 && p->r != -ENOMEM && (p->r == 0 || (unsigned) e < p->error_line)) {
		free(p->error);
		p->error = NULL;
		p->r = 0;
		return parser_fail(p, (unsigned) e, "syntax error (expected [section], key = value or a comment)");
	}
	if (p->r < 0)
		return p->r;

	return parser_finish(p);
}

int config_parse(const char *buf, size_t len, const char *filename, Config *ret, char **ret_error) {
	_cleanup_(parser_done) Parser p = {
		.buf = buf,
		.len = len,
		.filename = filename ? filename : "(config)",
		.config.log_level = LOG_INFO,
		.config.policy_interval = CONFIG_POLICY_INTERVAL_DEFAULT,
		.config.policy_bandwidth = CONFIG_POLICY_BANDWIDTH_DEFAULT,
		.config.history_interval = CONFIG_HISTORY_INTERVAL_DEFAULT,
		.config.shared_lease = CONFIG_SHARED_LEASE_DEFAULT,
		.config.background_share = CONFIG_BACKGROUND_SHARE_DEFAULT,
	};
	int r;

	assert(buf || len == 0);
	assert(ret);
	*ret = (Config) {};
	if (ret_error)
		*ret_error = NULL;
	config_classes_default(&p.config);

	if (filename) {
		p.config.source = strdup(filename);
		if (!p.config.source)
			return -ENOMEM;
	}

	r = parser_run(&p);
	if (r < 0) {
		if (ret_error && r == -EINVAL)
			*ret_error = TAKE_PTR(p.error);
		return r;
	}

	*ret = p.config;
	p.config = (Config) {};
	return 0;
}

static int load_error(int r, const char *path, const char *verb, char **ret_error) {
	if (ret_error) {
		errno = -r;
		if (asprintf(ret_error, "%s: cannot %s: %m", path, verb) < 0)
			*ret_error = NULL;
	}
	return r;
}

int config_load_file(const char *path, Config *ret, char **ret_error) {
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, size = 0;

	assert(path);
	assert(ret);
	*ret = (Config) {};
	if (ret_error)
		*ret_error = NULL;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return load_error(negative_errno(), path, "open", ret_error);

	/* Read one byte past the limit, so config_parse() can tell "too large" from "exactly at the limit". */
	for (;;) {
		if (len == size) {
			if (size > CONFIG_FILE_SIZE_MAX)
				break;
			size_t nsize = MIN(size > 0 ? 2 * size : 4096, (size_t) CONFIG_FILE_SIZE_MAX + 1);
			char *nbuf = realloc(buf, nsize);
			if (!nbuf)
				return -ENOMEM;
			buf = nbuf;
			size = nsize;
		}
		ssize_t n = read(fd, buf + len, size - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return load_error(negative_errno(), path, "read", ret_error);
		}
		if (n == 0)
			break;
		len += (size_t) n;
	}

	return config_parse(buf, len, path, ret, ret_error);
}
