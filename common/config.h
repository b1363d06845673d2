/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * The daemon's configuration: the tiers and the mount-level settings.
 *
 * One INI file (parsed with inih) or the embedded default built from a data
 * directory.  The parser is the only reader of the file; it enforces every
 * limit below and reports the first problem as "FILE:LINE: problem" (or
 * "FILE: problem" for what belongs to no single line, e.g. a missing hot tier).
 *
 *   [fratier]
 *   data_dir = /srv/fratier       ; required, absolute: daemon state, base of relative and default tier paths
 *   allow_other = no              ; let other users (oracle) use the mount
 *   log_level = info              ; err, warning, notice, info, debug
 *   control_socket = /run/fratier.sock ; tierctl's socket (absolute); default DATA_DIR/control.sock
 *   key_file = /etc/fratier/fra.key   ; encryption at rest (absolute; fratierfs --make-key); default none
 *   policy_interval = 60s         ; how often the policy worker looks for files to move (1s .. 1d)
 *   policy_bandwidth = 100M       ; bytes of file data the policy worker moves per second at most; 0 = no cap
 *   history_interval = 1h         ; a sample of usage per tier and class for the reports' charts; 0 = none (at most 1d)
 *   host = db01                   ; this daemon's name on shared tiers, [a-z0-9_-]{1,32} (default: the
 *                                 ; machine's host name, made to fit); one live daemon per name (docs/SHARED.md)
 *   shared_lease = 60s            ; how long this host's lease on shared tiers lasts past each renewal (2s .. 1h);
 *                                 ; renewed every lease/6 (at most every 10 s); below 60 s only for tests (docs/SHARED.md)
 *   background_share = 20%        ; while reads, writes or fsyncs come in, sealing, moves and the collector
 *                                 ; run at most this share of the time (1% .. 100%, 100 = never held back);
 *                                 ; sealing is charged its CPU time while writes come in, only its time
 *                                 ; blocked while the foreground waits on the disk (fs/throttle.c)
 *
 *   [tier hot]                    ; "tier NAME", NAME = [A-Za-z0-9_-]{1,32}
 *   role = hot                    ; hot | capacity | nfs (default: NAME, if NAME is one of these)
 *   backend = dir                 ; dir | nfs (default: nfs for role nfs, else dir)
 *   path = /nvme/fratier          ; directory (absolute, or relative to data_dir) or nfs:// URL
 *   capacity = 2T                 ; optional cap on what fratier may use, IEC suffixes K M G T P
 *   reserve = 16G                 ; hot tier: free space the policy worker keeps for the archiver
 *                                 ; (default: 4 x the largest archived log, at most 10% of the disk)
 *   high_watermark = 85%          ; hot tier only: above this use, demote the coldest files ...
 *   low_watermark = 70%           ; ... until use is below this one
 *   zstd_level = 9                ; level of chunks new to this tier when files move here (colder
 *                                 ; data, stronger compression); default: the class's on the hot
 *                                 ; tier, CONFIG_ZSTD_LEVEL_COLD on capacity and nfs tiers
 *   timeout = 10s                 ; NFS tiers: each attempt of a call (and each connect), 1s..600s
 *   retries = 2                   ; NFS tiers: attempts after a failed one, 0..10; a dead server
 *                                 ; fails a call after at most (retries + 1) x 2 x timeout
 *   migrate_after = 30d           ; lower tiers: files move on this long after their last change ...
 *   target = filer                ; ... to this tier, which must come after this one (no circles)
 *   shared = no                   ; lower tiers: yes = many hosts' daemons share this directory or export,
 *                                 ; each writing only under its host name (docs/SHARED.md); not the hot tier
 *   encrypt = yes                 ; yes = seal every region written to this tier (AES-256-GCM under the
 *                                 ; key; docs/SECURITY.md); needs key_file.  Default: yes on lower tiers
 *                                 ; when a key is given, no on the hot tier and without a key
 *   spill = no                    ; lower directory tiers: yes = raw files go on here when the tiers
 *                                 ; before are full (fs/spill.c), in clear; default: yes unless the
 *                                 ; tier encrypts
 *
 *   [class backuppiece]           ; "class NAME", NAME = archivelog | backuppiece | imagecopy | other
 *   chunking = oracle             ; oracle (each Oracle block a chunk, cdc between them) | cdc
 *                                 ; (content-defined) | fixed
 *   chunk_size = 8K               ; cdc, oracle: the average, a power of two (min = /4, max = x4); fixed: the size
 *   zstd_level = 1                ; -7 .. 19 (negative: zstd's fast levels), on the hot tier
 *   region_size = 128K            ; new chunks of a file compressed together, up to this many bytes
 *                                 ; (CONFIG_REGION_SIZE_MIN .. CONFIG_REGION_SIZE_MAX)
 *   split_size = 256M             ; its files are cut (a chunk boundary) every this many bytes, and a seal
 *                                 ; with at least twice this left to chunk is fed by two writers at once,
 *                                 ; one on each side of a cut; 0 = never (CONFIG_SPLIT_SIZE_MIN .. MAX)
 *   migrate_after = 1d            ; move sealed files this long after their last change (s m h d); 0 = never
 *   target = capacity             ; the tier they move to, by age or above the high watermark: a name, or
 *                                 ; a number (1 = the first tier after hot); default: 1 for archivelog and
 *                                 ; backuppiece, none (never moved automatically) for imagecopy and other
 *   pin = no                      ; yes: the class's files stay on the hot tier: the policy never moves
 *                                 ; them and tierctl migrate skips them (excludes target and migrate_after)
 *   names = *.rman full_*         ; file names of this class (fnmatch patterns), checked before the built-in
 *                                 ; rules, in the order given (at most 32 patterns in all)
 *   log_archive_format = arch_%t_%s_%r.dbf ; [class archivelog]: the database's LOG_ARCHIVE_FORMAT(s):
 *                                 ; %t %s %r %d %a match anything, %% is '%'; the format needs %s
 *   keep_hot = 1d                 ; [class archivelog]: logs needed to recover the last 1d (by their
 *                                 ; headers) stay on the hot tier, whatever their age or the watermarks
 *
 * Rules beyond the sketch above:
 *  - Unknown sections and keys, a key given twice, a section given twice and
 *    an empty value are errors.  Keys and section names are case-sensitive.
 *  - Booleans: yes/no, true/false, on/off, 1/0 (any case).
 *  - Sizes: see parse_size(); 0 means "none".
 *  - Exactly one tier has role hot, and it uses backend dir.  Any number of
 *    capacity and nfs tiers may follow (up to CONFIG_TIERS_MAX in all); their
 *    order in the file is kept in Config.tiers.
 *  - A tier without path: role hot -> DATA_DIR/hot, role capacity ->
 *    DATA_DIR/capacity; an nfs-role or nfs-backend tier must give a path.
 *  - Backend nfs needs "nfs://HOST..."; backend dir takes no nfs:// URL.
 *    Directory paths are normalized lexically ("//", "/./" and a trailing
 *    "/" go; ".." stays) and no two tiers may share one.  No control
 *    characters in paths.
 *  - A line holds at most CONFIG_LINE_MAX bytes (inih's line buffer, as
 *    Debian builds it), so a path written in the file is at most ~190 bytes;
 *    CONFIG_PATH_MAX bounds paths after joining with data_dir and paths
 *    given to config_default().  Lines must not be indented: inih would silently
 *    glue an indented line onto the previous value.  Comments start a line
 *    with ';' or '#', or follow a value after " ;".
 *  - Files: at most CONFIG_FILE_SIZE_MAX bytes, no NUL bytes.
 *  - Durations: see parse_duration().  Percentages: an integer 0..100 with
 *    an optional '%'; low_watermark must be below high_watermark, and
 *    background_share is at least 1 (0 would starve sealing for good).
 *  - Tiers are numbered as fs/ numbers them: 0 is the hot tier, the others
 *    follow from 1 in file order.  A class's target must be a tier other
 *    than the hot one; it is checked once all tiers are known.
 *  - A [class NAME] section overrides only the keys it gives; the others
 *    keep their defaults (config_class_default()).  Online redo logs,
 *    control files and flashback logs are never deduplicated and have no
 *    section.  chunk_size: cdc CONFIG_CDC_SIZE_MIN..CONFIG_CDC_SIZE_MAX,
 *    fixed CONFIG_FIXED_SIZE_MIN..CONFIG_FIXED_SIZE_MAX in multiples of 512.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONFIG_TIERS_MAX 8
#define CONFIG_TIER_NAME_MAX 32
#define CONFIG_HOST_NAME_MAX 32
#define CONFIG_PATH_MAX 4096
#define CONFIG_FILE_SIZE_MAX (1u << 20)
#define CONFIG_LINE_MAX 197        /* bytes per line without "\r\n": inih's INI_MAX_LINE - 3 */

typedef enum TierRole {
	TIER_ROLE_HOT,
	TIER_ROLE_CAPACITY,
	TIER_ROLE_NFS,
	_TIER_ROLE_MAX,
	_TIER_ROLE_INVALID = -22, /* -EINVAL */
} TierRole;

typedef enum TierBackend {
	TIER_BACKEND_DIR,
	TIER_BACKEND_NFS,
	_TIER_BACKEND_MAX,
	_TIER_BACKEND_INVALID = -22,
} TierBackend;

/* The file classes a config can tune; fs/ maps its own classes onto these. */
typedef enum ConfigClass {
	CONFIG_CLASS_ARCHIVELOG,
	CONFIG_CLASS_BACKUPPIECE,
	CONFIG_CLASS_IMAGECOPY,
	CONFIG_CLASS_OTHER,
	_CONFIG_CLASS_MAX,
	_CONFIG_CLASS_INVALID = -22,
} ConfigClass;

typedef enum ConfigChunking {
	CONFIG_CHUNKING_CDC,
	CONFIG_CHUNKING_FIXED,
	CONFIG_CHUNKING_ORACLE, /* each Oracle block a chunk, CDC of chunk_size between blocks */
	_CONFIG_CHUNKING_MAX,
	_CONFIG_CHUNKING_INVALID = -22,
} ConfigChunking;

/* Bounds that keep the chunker's min (size/4) and max (size*4) within its own limits. */
#define CONFIG_CDC_SIZE_MIN (1u << 10)
#define CONFIG_CDC_SIZE_MAX (1u << 20)
#define CONFIG_FIXED_SIZE_MIN 512u
#define CONFIG_FIXED_SIZE_MAX (4u << 20)
#define CONFIG_ZSTD_LEVEL_MIN (-7)
#define CONFIG_ZSTD_LEVEL_MAX 19
/*
 * What capacity and nfs tiers compress at unless they say: read rarely,
 * kept long (bench/README.md, "region-sizes": level 9 stores ~9% less than
 * 3 and decompresses as fast; higher levels store no less).
 */
#define CONFIG_ZSTD_LEVEL_COLD 9
/*
 * What a class's files are sealed at on the hot tier unless it says:
 * compression is most of a seal's CPU, level 1 compresses 1.4x as fast as 3
 * for 4% more bytes, and what stays is recompressed when it moves to a
 * colder tier (bench/README.md, "Sealing that keeps up").
 */
#define CONFIG_ZSTD_LEVEL_HOT 1
/* The compression regions dedup/ accepts (DEDUP_REGION_TARGET_MIN..MAX). */
#define CONFIG_REGION_SIZE_MIN (4u << 10)
#define CONFIG_REGION_SIZE_MAX (1u << 20)
/*
 * Cuts of a file for seals by two writers (fs/data.c, seal_ingest()): a
 * cut costs at most a chunk on each side of it in dedup, so they are far
 * apart.  The default gives a datafile piece of 512 MiB or more left to
 * seal two writers, and image copies and archivelog pieces of the medium
 * bench one: with 64M these split too, and on two cores the four writers
 * gained less (bench/README.md, "Sealing, seventh pass").
 */
#define CONFIG_SPLIT_SIZE_MIN (UINT64_C(1) << 20)
#define CONFIG_SPLIT_SIZE_MAX (UINT64_C(1) << 40)
#define CONFIG_SPLIT_SIZE_DEFAULT (UINT64_C(256) << 20)
#define CONFIG_WATERMARK_HIGH_DEFAULT 85
#define CONFIG_WATERMARK_LOW_DEFAULT 70
#define CONFIG_POLICY_INTERVAL_DEFAULT 60
#define CONFIG_POLICY_INTERVAL_MAX 86400
#define CONFIG_HISTORY_INTERVAL_DEFAULT 3600
#define CONFIG_HISTORY_INTERVAL_MAX 86400
/* A host's lease on shared tiers (tier/shared.h TIER_SHARED_LEASE_S is the default). */
#define CONFIG_SHARED_LEASE_DEFAULT 60
#define CONFIG_SHARED_LEASE_MIN 2
#define CONFIG_SHARED_LEASE_MAX 3600
#define CONFIG_NFS_TIMEOUT_MAX 600
#define CONFIG_NFS_RETRIES_MAX 10
#define CONFIG_POLICY_BANDWIDTH_DEFAULT (100ull << 20)
#define CONFIG_BACKGROUND_SHARE_DEFAULT 20u
/* A file sealed this long ago migrates by age in the default policy of archivelogs and backup pieces. */
#define CONFIG_MIGRATE_AFTER_DEFAULT 86400
/* Ten years: beyond that a duration is a typo, and seconds stay far from int64 nanoseconds' limit. */
#define CONFIG_DURATION_MAX (10ull * 366 * 86400)

typedef struct ConfigClassPolicy {
	ConfigChunking chunking;
	uint32_t chunk_size;   /* cdc: average; fixed: every chunk */
	int zstd_level;
	uint32_t target_tier;  /* tier number files move to by age or watermark; 0 (or a tier not there) = none */
	uint64_t migrate_after; /* seconds since a sealed file's mtime before it moves; 0 = never by age */
	bool pinned;           /* pin = yes: its files stay on the hot tier (no target; tierctl migrate skips them) */
	uint32_t region_size;  /* new chunks of a file are compressed together up to this many bytes */
	uint64_t keep_hot;     /* [class archivelog]: seconds of recovery window whose logs stay hot (tier/planner.h); 0 = off */
	uint64_t split_size;   /* cut its files every this many bytes; seals with twice this left use two writers; 0 = never */
} ConfigClassPolicy;

typedef struct ConfigTier {
	char *name;
	TierRole role;
	TierBackend backend;
	char *path;            /* absolute directory or nfs:// URL, after resolution */
	uint64_t capacity;     /* 0 = no cap beyond the backing filesystem */
	uint64_t reserve;      /* bytes kept free on this tier */
	bool has_reserve;      /* reserve was given; otherwise the hot tier's comes from the rule in config.h */
	unsigned high_watermark; /* hot tier: percent of use above which files are demoted ... */
	unsigned low_watermark;  /* ... down to this percent */
	bool has_zstd_level;   /* files moved to this tier are compressed at zstd_level, not their class's
				* (always so for capacity and nfs tiers: given, or CONFIG_ZSTD_LEVEL_COLD) */
	int zstd_level;
	unsigned nfs_timeout;  /* NFS tiers: seconds per attempt of a call, 0 = the backend's default */
	bool has_nfs_retries;  /* retries was given; otherwise the backend's default */
	uint64_t migrate_after; /* lower tiers: seconds after a file's last change before it moves on; 0 = never */
	uint32_t target_tier;  /* lower tiers: where (a later tier's number), with migrate_after */
	unsigned nfs_retries;  /* NFS tiers: attempts after a failed one */
	bool shared;           /* lower tiers: shared with other hosts' daemons (docs/SHARED.md) */
	bool has_encrypt;      /* encrypt was given; otherwise config_tier_encrypts()'s default */
	bool encrypt;
	bool has_spill;        /* spill was given; otherwise config_tier_spills()'s default */
	bool spill;
} ConfigTier;

/*
 * Whether the tier seals what it stores, for a mount with a key (have_key)
 * or without: as given, else lower tiers yes with a key.  The hot tier
 * holds plaintext staging files anyway, and an archiver on local NVMe may
 * prefer speed: it encrypts only if asked.  (The caller refuses a tier
 * that must encrypt without a key.)
 */
bool config_tier_encrypts(const ConfigTier *t, bool have_key);

/*
 * Whether raw files may start or spill onto a lower tier when the tiers
 * before it are full (fs/spill.c): as given, else unless the tier
 * encrypts, since a raw file is the file's bytes in clear.
 */
bool config_tier_spills(const ConfigTier *t, bool have_key);

/* A file name pattern of a class (names, log_archive_format): it decides a new file's class before the built-in rules. */
typedef struct ConfigNamePattern {
	char *glob;            /* fnmatch(3) pattern on the file's name */
	ConfigClass file_class;
} ConfigNamePattern;

#define CONFIG_NAME_PATTERNS_MAX 32u
#define CONFIG_NAME_PATTERN_MAX 255u

typedef struct Config {
	char *source;          /* file the config came from; NULL for the embedded default */
	char *data_dir;        /* absolute and normalized; never NULL after success */
	bool allow_other;
	int log_level;         /* LOG_ERR .. LOG_DEBUG */
	char *control_socket;  /* absolute and normalized, or NULL: DATA_DIR/control.sock */
	char *key_file;        /* absolute and normalized, or NULL: no encryption (dedup/key.h) */
	uint64_t policy_interval;  /* seconds between the policy worker's passes */
	uint64_t policy_bandwidth; /* bytes per second it moves at most; 0 = no cap */
	uint64_t history_interval; /* seconds between samples of usage for the reports; 0 = none */
	char *host;            /* name on shared tiers, or NULL: the machine's (tier/shared.h) */
	uint64_t shared_lease; /* seconds a lease on shared tiers lasts past a renewal */
	unsigned background_share; /* percent of the time background work gets under foreground load, 1..100 */
	ConfigTier tiers[CONFIG_TIERS_MAX];
	size_t n_tiers;
	ConfigClassPolicy classes[_CONFIG_CLASS_MAX];
	ConfigNamePattern name_patterns[CONFIG_NAME_PATTERNS_MAX]; /* in the order given */
	size_t n_name_patterns;
} Config;

/* Static strings ("hot", "dir", ...), NULL when out of range; from_string is exact and returns _INVALID otherwise. */
const char *tier_role_to_string(TierRole r);
TierRole tier_role_from_string(const char *s);
const char *tier_backend_to_string(TierBackend b);
TierBackend tier_backend_from_string(const char *s);

const char *config_class_to_string(ConfigClass c);
ConfigClass config_class_from_string(const char *s);
const char *config_chunking_to_string(ConfigChunking c);
ConfigChunking config_chunking_from_string(const char *s);

/* What a class gets when the config says nothing about it.  c must be valid. */
ConfigClassPolicy config_class_default(ConfigClass c);

/*
 * Parses a config held in memory (need not be NUL-terminated).  filename is
 * used in messages and copied to Config.source (NULL: messages say
 * "(config)", source stays NULL).  On success fills *ret (free with
 * config_done()) and returns 0.  On error returns -EINVAL (or -ENOMEM),
 * leaves *ret zeroed and, if ret_error is given, stores a malloc'ed
 * "FILE:LINE: problem" message there (NULL on -ENOMEM and on success).
 * Checks: known sections and keys only, values in range, data_dir given,
 * exactly one hot tier, unique tier names and paths.
 */
int config_parse(const char *buf, size_t len, const char *filename, Config *ret, char **ret_error);

/*
 * Reads and parses a file; errors as config_parse(), plus -errno of open/read
 * (then *ret_error reads "PATH: cannot open: <strerror>" or "...cannot read...").
 */
int config_load_file(const char *path, Config *ret, char **ret_error);

/*
 * The embedded default: hot tier DATA_DIR/hot, capacity tier DATA_DIR/capacity.
 * data_dir is made absolute (a relative one against the current directory;
 * nothing is resolved on disk, so it need not exist yet) and normalized like
 * tier paths.  allow_other off, log_level LOG_INFO, default class policies, source NULL.  Returns 0,
 * -EINVAL (empty data_dir), -ENAMETOOLONG (CONFIG_PATH_MAX), -ENOMEM or
 * -errno of getcwd().  On error *ret is left zeroed.
 */
int config_default(const char *data_dir, Config *ret);

/* The first tier (in file order) with this role, or NULL. Borrowed: valid while c lives. */
const ConfigTier *config_tier_by_role(const Config *c, TierRole role);
/*
 * Tier number n as the daemon numbers them (0: the hot tier; then the
 * others in file order), or NULL.  Borrowed: valid while c lives.
 */
const ConfigTier *config_tier_by_number(const Config *c, uint32_t n);

/* Frees what c owns and zeroes it; safe on a zeroed or half-filled Config. */
void config_done(Config *c);

/*
 * Parses "123", "4K", "16G", "2T" (IEC, factor 1024) into bytes: decimal
 * digits, then optionally one of K M G T P (either case) and optionally "iB"
 * or "B" ("512B", "4KiB", "4kB" are accepted too).  No sign, spaces or
 * fractions.  Returns 0, -EINVAL for anything else, -ERANGE beyond 2^64-1.
 * On error *ret is untouched.
 */
int parse_size(const char *s, uint64_t *ret);

/*
 * Parses "90", "30s", "15m", "12h", "1d" into seconds: decimal digits, then
 * optionally one of s m h d.  No sign, spaces or fractions.  Returns 0,
 * -EINVAL for anything else, -ERANGE beyond CONFIG_DURATION_MAX.  On error
 * *ret is untouched.
 */
int parse_duration(const char *s, uint64_t *ret);

/* Whether name may be a host's name on a shared tier: [a-z0-9_-]{1,CONFIG_HOST_NAME_MAX}. */
bool config_host_name_is_valid(const char *name);
