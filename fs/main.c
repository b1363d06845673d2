/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fratierfs — the daemon: command line, start-up checks, recovery, and the
 * FUSE session.
 *
 * Start-up refuses, with one line naming the problem, anything that would
 * make the mount lie later: a bad config, a hot tier that is missing,
 * read-only or in use by another daemon, a catalog it cannot read.  After a
 * crash it recovers by itself: SQLite replays its WAL, and the staging
 * files and inodes that the crash orphaned are deleted before the mount.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <fuse_lowlevel.h>
#include <malloc.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/bdi.h"
#include "common/config.h"
#include "common/log.h"
#include "common/macros.h"
#include "common/pipe.h"
#include "control/control.h"
#include "fs/fs-internal.h"
#include "tier/backend-dir.h"
#include "tier/recover.h"

#define CATALOG_FILE "catalog.db"
#define CONTAINERS_DIR "containers"
/* Enough for a writer that closes and at once reopens a file (a tool's second
 * pass, a header rewritten after the body) not to have it sealed and unsealed;
 * short, because raw bytes hold the hot tier until the seal and the streamed
 * seal of a file written front to back has only its tail left at close. */
#define SEAL_DELAY_DEFAULT_S 2
#define GC_INTERVAL_DEFAULT_S 60
#define SEAL_WORKERS_DEFAULT 2
#define SEAL_WORKERS_MAX 64
#define ENCODE_WORKERS_DEFAULT 2u
#define ENCODE_WORKERS_MAX 16u
#define LOCK_FILE "fratier.lock"
#define CONTROL_SOCKET "control.sock"
/* Allocations below this come from the heap; free memory above the top of a heap beyond that goes back (main()). */
#define FS_MALLOC_MMAP_THRESHOLD (32 << 20)
#define FS_MALLOC_TRIM_THRESHOLD (64 << 20)
/*
 * The kernel's read-ahead window for the mount, in KiB: several 1 MiB
 * requests of a sequential reader in flight at once (the kernel's default
 * of 128 KiB sends them one by one, 128 KiB each).  See bench/README.md.
 */
#define READ_AHEAD_KB_DEFAULT 4096u

typedef struct Args {
	char *data;
	char *config;
	char *control;
	char *recover_from;
	char *key_file;
	char *make_key;
	char *add_key;
	char *drop_key;
	unsigned seal_delay_s;
	unsigned gc_interval_s;
	unsigned policy_interval_s;
	unsigned history_interval_s;
	unsigned policy;
	unsigned seal_workers;
	unsigned seal_stream;
	unsigned stream_max;
	unsigned background_share; /* UINT_MAX: not given, the config's */
	unsigned container_kib;    /* 0: the store's default */
	unsigned read_ahead_kb;
	unsigned restore_workers;
	unsigned encode_workers;
	unsigned index_recent;     /* 0: CATALOG_INDEX_RECENT_MAX */
	char *positional[2];
	unsigned n_positional;
	bool allow_other;
	bool show_help;
	bool show_version;
	bool too_many_args;
} Args;

enum {
	KEY_HELP,
	KEY_VERSION,
	KEY_ALLOW_OTHER,
};

static const struct fuse_opt arg_table[] = {
	{ "data=%s", offsetof(Args, data), 0 },
	{ "config=%s", offsetof(Args, config), 0 },
	{ "control=%s", offsetof(Args, control), 0 },
	{ "--recover-from=%s", offsetof(Args, recover_from), 0 },
	{ "key_file=%s", offsetof(Args, key_file), 0 },
	{ "--make-key %s", offsetof(Args, make_key), 0 },
	{ "--add-key %s", offsetof(Args, add_key), 0 },
	{ "--drop-key %s", offsetof(Args, drop_key), 0 },
	{ "seal_delay=%u", offsetof(Args, seal_delay_s), 0 },
	{ "gc_interval=%u", offsetof(Args, gc_interval_s), 0 },
	{ "policy_interval=%u", offsetof(Args, policy_interval_s), 0 },
	{ "policy=%u", offsetof(Args, policy), 0 },
	{ "history_interval=%u", offsetof(Args, history_interval_s), 0 },
	{ "seal_workers=%u", offsetof(Args, seal_workers), 0 },
	{ "seal_stream=%u", offsetof(Args, seal_stream), 0 },
	{ "stream_max=%u", offsetof(Args, stream_max), 0 },
	{ "background_share=%u", offsetof(Args, background_share), 0 },
	{ "container_kib=%u", offsetof(Args, container_kib), 0 },
	{ "read_ahead_kb=%u", offsetof(Args, read_ahead_kb), 0 },
	{ "restore_workers=%u", offsetof(Args, restore_workers), 0 },
	{ "encode_workers=%u", offsetof(Args, encode_workers), 0 },
	{ "index_recent=%u", offsetof(Args, index_recent), 0 },
	FUSE_OPT_KEY("allow_other", KEY_ALLOW_OTHER),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	FUSE_OPT_END,
};

static int arg_process(void *data, const char *arg, int key, struct fuse_args *outargs) {
	Args *a = data;

	switch (key) {
	case KEY_HELP:
		a->show_help = true;
		return 0;
	case KEY_VERSION:
		a->show_version = true;
		return 0;
	case KEY_ALLOW_OTHER:
		/* Noted for the control socket's checks, and passed on to libfuse. */
		a->allow_other = true;
		return 1;
	case FUSE_OPT_KEY_NONOPT:
		/* "SOURCE MOUNTPOINT" from mount.fuse3, or just "MOUNTPOINT". */
		if (a->n_positional >= ELEMENTSOF(a->positional)) {
			a->too_many_args = true;
			return 0;
		}
		a->positional[a->n_positional] = strdup(arg);
		if (!a->positional[a->n_positional])
			return -1;
		a->n_positional++;
		return 0;
	default:
		return 1; /* everything else belongs to libfuse */
	}
}

static void help(const char *argv0) {
	printf("usage: %s [-f] [-d] -o data=DIR[,OPTIONS] MOUNTPOINT\n"
	       "       %s [-f] [-d] -o config=FILE[,OPTIONS] MOUNTPOINT\n"
	       "       %s DIR MOUNTPOINT -o OPTIONS   (as called by mount.fuse3, type fuse.fratierfs)\n"
	       "       %s --recover-from=TIER -o data=NEWDIR|config=FILE   (disaster recovery, no mount)\n"
	       "       %s --make-key FILE   (a new key file for encryption at rest)\n"
	       "       %s --add-key FILE | --drop-key FILE KEY_ID   (key rotation, docs/SECURITY.md)\n"
	       "\n"
	       "fratier: a tiering, deduplicating filesystem for Oracle archivelogs and RMAN backups.\n"
	       "\n"
	       "  -o data=DIR      embedded default: tiers are DIR/hot and DIR/capacity (created if missing)\n"
	       "  -o config=FILE   tiers and policies from an INI file\n"
	       "  -o seal_delay=S  seconds a closed file stays quiet before it is deduplicated (default %d)\n"
	       "  -o gc_interval=S seconds between chunk collections (default %d)\n"
	       "  -o policy_interval=S seconds between passes of the policy worker (default: the config's, %d)\n"
	       "  -o policy=0      no automatic moves (tierctl migrate, recall and pin still work)\n"
	       "  -o history_interval=S seconds between samples of usage for the reports, 0 = none\n"
	       "                   (default: the config's, %d)\n"
	       "  -o seal_workers=N threads that seal and stream, at nice 10 (default %d, at most %d)\n"
	       "  -o seal_stream=0|1 chunk files written front to back while they are written (default 1)\n"
	       "  -o stream_max=N  files chunked while written at once; more are sealed after close (default %u)\n"
	       "  -o background_share=PCT  share of the time sealing, moves and the collector get while\n"
	       "                   reads and writes come in (sealing: of its time off the CPU), 1..100 (default:\n"
	       "                   the config's, %u; 100 = never held back)\n"
	       "  -o container_kib=N  size in KiB the hot tier's containers are filled to before a new one\n"
	       "                   is begun, %llu..%llu (default %llu); smaller ones are compacted sooner\n"
	       "  -o read_ahead_kb=N the kernel's read-ahead window for the mount, in KiB, 0 = the kernel's\n"
	       "                   (default %u; needs root, else the kernel's is kept)\n"
	       "  -o restore_workers=N threads that decompress sealed files ahead of a sequential reader,\n"
	       "                   0 = none: each read decompresses on its own (default %u, at most %u)\n"
	       "  -o encode_workers=N threads that compress the regions of files being sealed or moved, at\n"
	       "                   nice 10, 0 = none: each seal worker compresses its own (default %u, at most %u)\n"
	       "  -o index_recent=N chunk ids the catalog's recent index table takes before the merge thread\n"
	       "                   merges it into a sorted run (default %llu)\n"
	       "  -o control=PATH  tierctl's control socket (default DATA_DIR/" CONTROL_SOCKET ")\n"
	       "  -o key_file=FILE the mount's key (default: the config's key_file; none: no encryption);\n"
	       "                   a data directory written under a key cannot be mounted without it\n"
	       "  -f               stay in the foreground (otherwise detach once the mount is ready)\n"
	       "  -d               debug output, implies -f\n"
	       "  --make-key FILE  create FILE (mode 0400) holding a new random key, then exit\n"
	       "  --add-key FILE   add a new random key to the key file or ring FILE (which becomes a ring):\n"
	       "                   data is written under it from the next mount; print its id, then exit\n"
	       "  --drop-key FILE KEY_ID  remove an older key from the ring FILE once tierctl status shows\n"
	       "                   it protects no bytes (a mount that still needs it refuses to start)\n"
	       "  --recover-from=TIER  rebuild the files a lower tier holds (a tier's directory, or nfs://host/export/path)\n"
	       "                   into the new, empty data directory, then exit; TIER is only read\n"
	       "  -h, --help       this help\n"
	       "  -V, --version    version\n"
	       "\n"
	       "FUSE options such as allow_other pass through; default_permissions is always on.\n",
	       argv0, argv0, argv0, argv0, argv0, argv0, SEAL_DELAY_DEFAULT_S, GC_INTERVAL_DEFAULT_S, CONFIG_POLICY_INTERVAL_DEFAULT,
	       CONFIG_HISTORY_INTERVAL_DEFAULT, SEAL_WORKERS_DEFAULT, SEAL_WORKERS_MAX, FS_STREAM_MAX_DEFAULT,
	       CONFIG_BACKGROUND_SHARE_DEFAULT, (unsigned long long) (DEDUP_STORE_CONTAINER_SIZE_MIN >> 10),
	       (unsigned long long) (DEDUP_STORE_CONTAINER_SIZE_MAX >> 10),
	       (unsigned long long) (DEDUP_STORE_CONTAINER_SIZE_DEFAULT >> 10), READ_AHEAD_KB_DEFAULT,
	       FS_RA_WORKERS_DEFAULT, FS_RA_WORKERS_MAX, ENCODE_WORKERS_DEFAULT, ENCODE_WORKERS_MAX,
	       (unsigned long long) CATALOG_INDEX_RECENT_MAX);
}

static int mkdir_p(const char *path, mode_t mode) {
	_cleanup_free_ char *p = strdup(path);
	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Opens, checks and locks the hot tier; the lock lives as long as the daemon. */
static int hot_tier_open(Fs *fs, bool create) {
	struct statvfs sv;
	int r;

	if (create) {
		r = mkdir_p(fs->hot_path, 0755);
		if (r < 0)
			return log_error_errno(r, "cannot create hot tier directory %s: %m", fs->hot_path);
	}
	fs->hot_fd = open(fs->hot_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->hot_fd < 0)
		return log_error_errno(errno, "cannot open hot tier directory %s: %m", fs->hot_path);
	if (fstatvfs(fs->hot_fd, &sv) < 0)
		return log_error_errno(errno, "cannot stat hot tier %s: %m", fs->hot_path);
	if (sv.f_flag & ST_RDONLY)
		return log_error_errno(EROFS, "hot tier %s is not writable: %m", fs->hot_path);

	fs->lock_fd = openat(fs->hot_fd, LOCK_FILE, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fs->lock_fd < 0)
		return log_error_errno(errno, "hot tier %s is not writable: %m", fs->hot_path);
	if (flock(fs->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK)
			return log_error_errno(EBUSY, "hot tier %s is in use by another fratierfs", fs->hot_path);
		return log_error_errno(errno, "cannot lock hot tier %s: %m", fs->hot_path);
	}
	char pid[32];
	int n = snprintf(pid, sizeof(pid), "%d\n", (int) getpid());
	if (ftruncate(fs->lock_fd, 0) < 0 || pwrite(fs->lock_fd, pid, (size_t) n, 0) != n)
		return log_error_errno(errno, "hot tier %s is not writable: %m", fs->hot_path);
	return 0;
}

typedef struct KeyNeed {
	const DedupKeyRing *ring;
	char missing[1024]; /* "KEYID (tier N, B bytes), ..." */
	size_t n_missing;
	bool known;         /* a container is recorded under a key of the ring */
} KeyNeed;

static int key_need(uint32_t tier, const uint8_t *key_id, uint64_t containers, uint64_t bytes, void *userdata) {
	KeyNeed *n = userdata;
	char a[DEDUP_KEY_ID_STRING_MAX];
	(void) containers;
	if (!key_id)
		return 0;
	for (size_t i = 0; n->ring && i < n->ring->n; i++)
		if (memcmp(n->ring->keys[i].key_id, key_id, DEDUP_KEY_ID_SIZE) == 0) {
			n->known = true;
			return 0;
		}
	size_t at = strlen(n->missing);
	if (at + 1 < sizeof(n->missing))
		snprintf(n->missing + at, sizeof(n->missing) - at, "%s%s (tier %u, %llu bytes)", at ? ", " : "",
			 dedup_key_id_to_string(key_id, a), (unsigned) tier, (unsigned long long) bytes);
	n->n_missing++;
	return 0;
}

/*
 * Before the store opens anything: data written under one key and read with
 * another (or none) would fail every content check, and data written without
 * a key has plain chunk ids a key cannot verify, so both are refused here;
 * so is a key ring that lacks a key some container is still sealed under
 * (dropped before tierctl rekey finished), naming each such key.
 */
static int key_check(Fs *fs, const char *catalog_path) {
	uint8_t have[CATALOG_DIGEST_SIZE];
	char a[DEDUP_KEY_ID_STRING_MAX], b[DEDUP_KEY_ID_STRING_MAX];
	int r = catalog_key_id_get(fs->catalog, have);

	if (r < 0 && r != -ENOENT)
		return log_error_errno(r, "cannot read the key id from catalog %s: %m", catalog_path);
	if (r == 0 && !fs->keys)
		return log_error_errno(ENOKEY, "%s is encrypted (key id %s): give its key with key_file = in the config "
					       "or -o key_file=FILE; refusing to mount it without",
				       fs->hot_path, dedup_key_id_to_string(have, a));
	if (r == 0) {
		KeyNeed need = { .ring = fs->keys };
		int q = catalog_key_usage_foreach(fs->catalog, key_need, &need);
		if (q < 0)
			return log_error_errno(q, "cannot read the keys in use from catalog %s: %m", catalog_path);
		/* The newest key the catalog knows must be in the ring, unless the ring's keys protect the data. */
		bool newest_known = false;
		for (size_t i = 0; i < fs->keys->n; i++)
			newest_known |= memcmp(have, fs->keys->keys[i].key_id, sizeof(have)) == 0;
		if (!newest_known && !need.known)
			return log_error_errno(EKEYREJECTED,
					       "wrong key: %s has key id %s, but %s was written under key id %s",
					       fs->key_file,
					       dedup_key_id_to_string(dedup_keyring_newest(fs->keys)->key_id, a),
					       fs->hot_path, dedup_key_id_to_string(have, b));
		if (need.n_missing > 0)
			return log_error_errno(ENOKEY, "%s still holds data sealed under %zu key%s missing from %s: %s; "
						       "put the key back in the key ring (or give the old key file) and "
						       "finish tierctl rekey before dropping it",
					       fs->hot_path, need.n_missing, need.n_missing == 1 ? "" : "s",
					       fs->key_file, need.missing);
	}
	if (!fs->keys)
		return 0;
	if (r == -ENOENT) {
		r = catalog_chunks_any(fs->catalog);
		if (r < 0)
			return log_error_errno(r, "cannot read catalog %s: %m", catalog_path);
		if (r > 0)
			return log_error_errno(EKEYREJECTED,
					       "%s holds data written without a key: a key can only be given to "
					       "a new data directory (copy the files into one mounted with the key)",
					       fs->hot_path);
	}
	/* Every key of the ring, oldest first: the newest recorded is the one new data is written under. */
	for (size_t i = 0; i < fs->keys->n; i++) {
		r = catalog_key_id_add(fs->catalog, fs->keys->keys[i].key_id);
		if (r == -EEXIST)
			continue;
		if (r < 0)
			return log_error_errno(r, "cannot record the key id in catalog %s: %m", catalog_path);
		log_info("%s: encryption at rest under key id %s", fs->hot_path,
			 dedup_key_id_to_string(fs->keys->keys[i].key_id, a));
	}
	return 0;
}

static int catalog_start(Fs *fs, bool create) {
	_cleanup_free_ char *path = NULL;
	uint64_t orphans = 0, strays = 0;
	int r;

	if (asprintf(&path, "%s/%s", fs->hot_path, CATALOG_FILE) < 0)
		return log_oom();
	r = catalog_open(path, 0, 0, &fs->catalog);
	if (r == -EPROTONOSUPPORT)
		return log_error_errno(r, "catalog %s was written by a newer fratier (schema version above %d); "
					  "refusing to mount it",
				       path, CATALOG_SCHEMA_VERSION);
	if (r == -EUCLEAN)
		return log_error_errno(r, "catalog %s is damaged or not a fratier catalog", path);
	if (r < 0)
		return log_error_errno(r, "cannot open catalog %s: %m", path);
	r = key_check(fs, path);
	if (r < 0)
		return r;

	r = fs_staging_init(fs);
	if (r < 0)
		return log_error_errno(r, "cannot prepare staging area in %s: %m", fs->hot_path);

	/* The hot tier's chunk store: tier 0, containers next to the staging area. */
	_cleanup_free_ char *containers = NULL;
	if (asprintf(&containers, "%s/%s", fs->hot_path, CONTAINERS_DIR) < 0)
		return log_oom();
	if (mkdir(containers, 0700) < 0 && errno != EEXIST)
		return log_error_errno(errno, "cannot create %s: %m", containers);
	r = tier_backend_dir_open(containers, &fs->hot_backend);
	if (r < 0)
		return log_error_errno(r, "cannot open %s: %m", containers);
	/*
	 * The store's own read-ahead, done within each call, pays only for
	 * small requests that come one at a time (the kernel's 128 KiB window).
	 * With the restore pipeline, or with the kernel's window raised, blocks
	 * or requests of a sequential reader are read several at once, and it
	 * would decompress the chunks of the next one a second time in the call
	 * that reads them: it is cut to the one chunk straddling a call's end.
	 * The pipeline's blocks and the page cache then hold what a restore is
	 * about to read; the store's cache of decompressed regions is left with
	 * the chunks met again soon (a file's repeats, a straddling chunk), and
	 * a smaller one costs no speed and 60 MiB less memory (bench/README.md).
	 * The same for every tier: the lower tiers' stores took 120 MiB more
	 * and decompressed more with their own read-ahead, NFS included.
	 */
	/*
	 * Compression is most of a seal's CPU: the encoders spread one file's
	 * regions over the cores, at the seal workers' nice (bench/README.md).
	 * Every tier's ids under the one key: a chunk migrated keeps
	 * deduplicating against its copies.
	 */
	DedupStoreOptions store_opts = {
		.container_size = fs->hot_container_size,
		.encode_workers = fs->encode_workers,
		.encode_nice = FS_BACKGROUND_NICE,
		.id_key = fs->keys ? dedup_keyring_newest(fs->keys)->id : NULL,
		.content_key = fs->keys ? dedup_keyring_newest(fs->keys)->content : NULL,
		.description_key = fs->keys ? dedup_keyring_newest(fs->keys)->description : NULL,
		.key_id = fs->keys ? dedup_keyring_newest(fs->keys)->key_id : NULL,
		.old_keys = fs->keys ? &fs->keys->old : NULL,
		.encrypt = config_tier_encrypts(config_tier_by_number(fs->config, 0), fs->keys != NULL),
	};
	if (fs->restore_workers > 0 || fs->read_ahead_kb > 0) {
		store_opts.readahead_bytes = 1;
		store_opts.region_cache_bytes = FS_RA_STORE_REGION_CACHE;
	}
	r = dedup_store_open(fs->catalog, 0, fs->hot_backend, &store_opts, &fs->store);
	if (r < 0)
		return log_error_errno(r, "cannot open the chunk store in %s: %m", containers);
	/*
	 * Before recovery: deleting an orphan drops its chunks on whichever
	 * tier holds them.  container_kib is the hot tier's alone: the lower
	 * tiers' stores keep their default container size.
	 */
	DedupStoreOptions lower_opts = store_opts;
	lower_opts.container_size = 0;
	r = fs_tiers_open(fs, &lower_opts, create);
	if (r < 0)
		return r;
	/* Before recovery too: it looks for strays in every staging area. */
	r = fs_staging_open_tiers(fs);
	if (r < 0)
		return r;

	r = fs_staging_recover(fs, &orphans, &strays);
	if (r < 0)
		return log_error_errno(r, "recovery of %s failed: %m", fs->hot_path);
	if (orphans || strays)
		log_notice("recovered after an unclean stop: %llu unlinked inodes and %llu stray staging files deleted",
			   (unsigned long long) orphans, (unsigned long long) strays);
	return 0;
}

static void fs_done(Fs *fs) {
	fs_readahead_stop(fs->readahead);
	fs_throttle_done(&fs->throttle);
	/* The inodes let go of their windows first. */
	fs_inode_table_done(fs);
	fs->readahead = fs_readahead_free(fs->readahead);
	fs_tiers_close(fs);
	fs->store = dedup_store_free(fs->store);
	fs->hot_backend = dedup_backend_free(fs->hot_backend);
	fs->catalog = catalog_close(fs->catalog);
	fs->keys = dedup_keyring_free(fs->keys);
	fs_staging_done(fs);
	if (fs->lock_fd >= 0)
		close(fs->lock_fd);
	if (fs->hot_fd >= 0)
		close(fs->hot_fd);
}

/*
 * Raises the kernel's read-ahead window of the mount at mountpoint; a
 * daemon that may not (not root, /sys read-only) works all the same, with
 * reads arriving 128 KiB at a time.
 */
static void read_ahead_set(const char *mountpoint, unsigned kb) {
	dev_t dev;
	unsigned old = 0;
	int r = bdi_of_mountpoint(mountpoint, &dev);
	if (r >= 0)
		r = bdi_set_read_ahead_kb(dev, kb, &old);
	if (r < 0)
		log_notice("cannot set the kernel's read-ahead window of %s to %u KiB (%s): sequential reads will be slower",
			   mountpoint, kb, strerror(-r));
	else
		log_debug("read-ahead window of %s: %u KiB (was %u)", mountpoint, kb, old);
}

static int recover_spool(void *userdata) {
	return fs_staging_spool(userdata, 0);
}

static int add_mount_option(struct fuse_args *args, const char *name, const char *value) {
	_cleanup_free_ char *opt = NULL;
	/* libfuse splits option lists at commas: a value must not contain one. */
	if (value && strchr(value, ','))
		return -EINVAL;
	if (asprintf(&opt, "%s%s%s", name, value ? "=" : "", value ?: "") < 0)
		return -ENOMEM;
	if (fuse_opt_add_arg(args, "-o") < 0 || fuse_opt_add_arg(args, opt) < 0)
		return -ENOMEM;
	return 0;
}

static int run(int argc, char **argv) {
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts = {};
	struct fuse_session *se = NULL;
	struct fuse_loop_config *loop = NULL;
	_cleanup_free_ char *config_error = NULL, *control_path = NULL;
	Config config = {};
	Args a = {
		.seal_delay_s = SEAL_DELAY_DEFAULT_S,
		.gc_interval_s = GC_INTERVAL_DEFAULT_S,
		.seal_workers = SEAL_WORKERS_DEFAULT,
		.seal_stream = 1,
		.stream_max = FS_STREAM_MAX_DEFAULT,
		.background_share = UINT_MAX,
		.policy = 1,
		.history_interval_s = UINT_MAX,
		.read_ahead_kb = READ_AHEAD_KB_DEFAULT,
		.restore_workers = FS_RA_WORKERS_DEFAULT,
		.encode_workers = ENCODE_WORKERS_DEFAULT,
	};
	Fs fs = { .hot_fd = -1, .lock_fd = -1 };
	Control *control = NULL;
	unsigned history_interval_s;
	int r, ret = EXIT_FAILURE;

	/* No staging area is open yet: fs_done() must not close descriptor 0. */
	for (uint32_t n = 0; n < CONFIG_TIERS_MAX; n++)
		fs.staging[n].fd = -1;

	if (fuse_opt_parse(&args, &a, arg_table, arg_process) < 0)
		goto out_args;
	if (a.show_help) {
		help(argv[0]);
		ret = EXIT_SUCCESS;
		goto out_args;
	}
	if (a.show_version) {
		printf("fratierfs %s (libfuse %s)\n", PACKAGE_VERSION, fuse_pkgversion());
		ret = EXIT_SUCCESS;
		goto out_args;
	}
	if (a.make_key) {
		r = dedup_key_file_make(a.make_key);
		if (r == -EEXIST)
			log_error("%s exists: a key file is never overwritten (the data under it would be lost)", a.make_key);
		else if (r < 0)
			log_error_errno(r, "cannot create key file %s: %m", a.make_key);
		else
			printf("%s: new key file (mode 0400); keep a copy apart from the data: without it nothing is readable\n",
			       a.make_key);
		ret = r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
		goto out_args;
	}
	if (a.add_key) {
		uint8_t id[DEDUP_KEY_ID_SIZE];
		char s[DEDUP_KEY_ID_STRING_MAX];
		_cleanup_free_ char *why = NULL;
		r = dedup_keyring_file_add(a.add_key, id, &why);
		if (r < 0 && why)
			log_error("%s", why);
		else if (r < 0)
			log_error_errno(r, "cannot add a key to %s: %m", a.add_key);
		else
			printf("%s: new key %s; new data is written under it from the next mount, then tierctl rekey "
			       "rewrites the older data; keep a copy of the ring apart from the data\n",
			       a.add_key, dedup_key_id_to_string(id, s));
		ret = r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
		goto out_args;
	}
	if (a.drop_key) {
		_cleanup_free_ char *why = NULL;
		if (a.n_positional != 1 || a.too_many_args) {
			log_error("--drop-key FILE KEY_ID: give the key ring and the id of the key to drop");
			ret = EXIT_FAILURE;
			goto out_args;
		}
		r = dedup_keyring_file_drop(a.drop_key, a.positional[0], &why);
		if (r < 0 && why)
			log_error("%s", why);
		else if (r < 0)
			log_error_errno(r, "cannot drop key %s from %s: %m", a.positional[0], a.drop_key);
		else
			printf("%s: key %s dropped\n", a.drop_key, a.positional[0]);
		ret = r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
		goto out_args;
	}
	/* Recovery mounts nothing: no mount point. */
	if (a.too_many_args || (a.n_positional == 0 && !a.recover_from)) {
		log_error("%s", a.n_positional == 0 ? "no mount point given (see --help)"
						     : "too many arguments (see --help)");
		goto out_args;
	}
	if (a.seal_workers < 1 || a.seal_workers > SEAL_WORKERS_MAX || a.seal_stream > 1 ||
	    a.stream_max > FS_STREAM_MAX_LIMIT || (a.background_share != UINT_MAX && (a.background_share < 1 || a.background_share > 100)) ||
	    (a.container_kib && ((uint64_t) a.container_kib << 10 < DEDUP_STORE_CONTAINER_SIZE_MIN ||
				 (uint64_t) a.container_kib << 10 > DEDUP_STORE_CONTAINER_SIZE_MAX))) {
		log_error("seal_workers must be 1..%d, seal_stream 0 or 1, stream_max 0..%u, background_share 1..100, "
			  "container_kib %llu..%llu (see --help)",
			  SEAL_WORKERS_MAX, FS_STREAM_MAX_LIMIT, (unsigned long long) (DEDUP_STORE_CONTAINER_SIZE_MIN >> 10),
			  (unsigned long long) (DEDUP_STORE_CONTAINER_SIZE_MAX >> 10));
		goto out_args;
	}
	if (a.read_ahead_kb > BDI_READ_AHEAD_KB_MAX || a.restore_workers > FS_RA_WORKERS_MAX ||
	    a.encode_workers > ENCODE_WORKERS_MAX) {
		log_error("read_ahead_kb must be 0..%u, restore_workers 0..%u, encode_workers 0..%u (see --help)",
			  BDI_READ_AHEAD_KB_MAX, FS_RA_WORKERS_MAX, ENCODE_WORKERS_MAX);
		goto out_args;
	}
	if (!a.recover_from &&
	    (fuse_opt_add_arg(&args, a.positional[a.n_positional - 1]) < 0 || fuse_parse_cmdline(&args, &opts) != 0))
		goto out_args;

	if (a.config) {
		r = config_load_file(a.config, &config, &config_error);
		if (r < 0) {
			if (config_error)
				log_error("%s", config_error);
			else
				log_error_errno(r, "cannot read config %s: %m", a.config);
			goto out_opts;
		}
	} else {
		const char *data = a.data ?: (a.n_positional == 2 ? a.positional[0] : NULL);
		if (!data) {
			log_error("no data directory: give -o data=DIR or -o config=FILE (see --help)");
			goto out_opts;
		}
		r = config_default(data, &config);
		if (r < 0) {
			log_error_errno(r, "cannot use data directory %s: %m", data);
			goto out_opts;
		}
	}
	log_set_max_level(opts.debug ? LOG_DEBUG : config.log_level);

	const ConfigTier *hot = config_tier_by_role(&config, TIER_ROLE_HOT);
	if (!hot || hot->backend != TIER_BACKEND_DIR) {
		log_error("%s: the hot tier must be a local directory", config.source ?: "config");
		goto out_config;
	}
	config.allow_other = config.allow_other || a.allow_other;
	fs.config = &config;
	fs.hot_path = hot->path;
	fs.mountpoint = opts.mountpoint;
	if (a.control)
		control_path = strdup(a.control);
	else if (config.control_socket)
		control_path = strdup(config.control_socket);
	else if (asprintf(&control_path, "%s/%s", config.data_dir, CONTROL_SOCKET) < 0)
		control_path = NULL;
	if (!control_path) {
		log_oom();
		goto out_config;
	}
	fs.seal_delay_s = a.seal_delay_s;
	fs.hot_container_size = (uint64_t) a.container_kib << 10;
	fs.gc_interval_s = a.gc_interval_s ?: 1;
	fs.index_recent = a.index_recent ?: CATALOG_INDEX_RECENT_MAX;
	fs.policy_interval_s = a.policy_interval_s ?: (unsigned) config.policy_interval;
	/* Not given: the config's (0 is a choice here: no samples). */
	history_interval_s = a.history_interval_s != UINT_MAX ? a.history_interval_s : (unsigned) config.history_interval;
	fs.seal_workers = a.seal_workers;
	fs.restore_workers = a.restore_workers;
	fs.encode_workers = a.encode_workers;
	fs.read_ahead_kb = a.read_ahead_kb;
	fs.seal_stream = a.seal_stream && a.stream_max > 0;
	fs.stream_max = a.stream_max;
	if (a.background_share != UINT_MAX)
		config.background_share = a.background_share;
	/* Before anything is opened or written: a bad key file changes nothing. */
	fs.key_file = a.key_file ?: config.key_file;
	if (fs.key_file) {
		_cleanup_free_ char *why = NULL;
		r = dedup_keyring_load(fs.key_file, &fs.keys, &why);
		if (r < 0) {
			if (why)
				log_error("%s", why);
			else
				log_error_errno(r, "cannot load key file %s: %m", fs.key_file);
			goto out_config;
		}
	}
	/* Also before anything is opened: a tier that must seal needs the key to seal with. */
	for (size_t i = 0; i < config.n_tiers; i++)
		if (!fs.keys && config_tier_encrypts(&config.tiers[i], false)) {
			log_error("tier '%s' has encrypt = yes, but no key is given: set key_file = in [fratier] or "
				  "-o key_file=FILE (fratierfs --make-key FILE makes one), or encrypt = no",
				  config.tiers[i].name);
			goto out_config;
		}
	/* Before anything can fail into fs_done(), which destroys it. */
	fs_throttle_init(&fs.throttle, config.background_share);
	/* Tiers named in a config must exist: creating one could fill the wrong disk. */
	if (hot_tier_open(&fs, !a.config) < 0)
		goto out_fs;
	if (fs_inode_table_init(&fs) < 0 || fs_readahead_new(&fs, a.restore_workers, &fs.readahead) < 0) {
		log_oom();
		goto out_fs;
	}
	if (catalog_start(&fs, !a.config) < 0)
		goto out_fs;
	if (a.recover_from) {
		_cleanup_free_ char *why = NULL;
		/* 2: some files could not be restored (tier_recover() listed them), the others are there. */
		r = tier_recover(fs.config, fs.tiers, fs.catalog, fs.store, recover_spool, &fs, a.recover_from, stdout,
				 &why);
		if (r < 0)
			log_error_errno(r, "%s", why ?: "out of memory");
		ret = r == 0 ? EXIT_SUCCESS : r > 0 ? 2 : EXIT_FAILURE;
		goto out_fs;
	}

	if (add_mount_option(&args, "default_permissions", NULL) < 0 ||
	    add_mount_option(&args, "fsname", config.data_dir) < 0 ||
	    add_mount_option(&args, "subtype", "fratierfs") < 0 ||
	    (config.allow_other && !a.allow_other && add_mount_option(&args, "allow_other", NULL) < 0)) {
		log_error("cannot build mount options (a data directory containing ',' is not supported)");
		goto out_fs;
	}
	/*
	 * Without CAP_SYS_RESOURCE a pipe cannot grow past pipe-max-size (1 MiB
	 * by default), too small for libfuse to splice a 1 MiB request or
	 * reply.  It then copies every write's bytes once more (from /dev/fuse
	 * into a buffer, then into the staging file), and a read reply through
	 * a buffer it allocates for every reply, whose page faults cost more
	 * than the splice saves.  Requests are cut to what it can splice instead
	 * (bench/README.md: a quarter less daemon CPU per byte written).
	 */
	size_t pipe_max = pipe_capacity_max(2 * FS_MAX_WRITE);
	size_t write_max = pipe_splice_request_max(pipe_max, FS_MAX_WRITE);
	fs.max_write = write_max >= FS_MAX_WRITE / 2 ? write_max : FS_MAX_WRITE;
	size_t splice_max = pipe_splice_reply_max(pipe_max, FS_MAX_WRITE);
	if (splice_max > 0 && splice_max < FS_MAX_WRITE) {
		char value[32];
		snprintf(value, sizeof(value), "%zu", splice_max);
		if (add_mount_option(&args, "max_read", value) < 0) {
			log_oom();
			goto out_fs;
		}
		fs.max_read = splice_max;
	}
	r = control_open(&fs, control_path, history_interval_s, &control);
	if (r == -EADDRINUSE) {
		log_error("control socket %s is in use by another fratierfs; give this one its own with -o control=PATH",
			  control_path);
		goto out_fs;
	}
	if (r < 0) {
		log_error_errno(r, "cannot create the control socket %s (choose another with -o control=PATH): %m",
				control_path);
		goto out_fs;
	}
	se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), &fs);
	if (!se)
		goto out_fs; /* libfuse said why */
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, opts.mountpoint) != 0)
		goto out_signals;
	fs.se = se;
	if (a.read_ahead_kb > 0)
		read_ahead_set(opts.mountpoint, a.read_ahead_kb);
	if (!opts.foreground)
		log_open_syslog("fratierfs");
	/* Detaches only now, so whoever started us finds the mount ready. */
	if (fuse_daemonize(opts.foreground) != 0)
		goto out_unmount;
	log_info("fratierfs %s mounted %s on %s", PACKAGE_VERSION, config.data_dir, opts.mountpoint);

	/* After the fork of fuse_daemonize(): a thread does not survive one. */
	r = catalog_checkpointer_start(fs.catalog);
	if (r < 0) {
		log_error_errno(r, "cannot start the catalog's checkpoints: %m");
		goto out_unmount;
	}
	r = fs_seal_schedule_pending(&fs);
	if (r >= 0)
		r = fs_sealer_start(&fs);
	if (r < 0) {
		log_error_errno(r, "cannot start the sealing workers: %m");
		goto out_unmount;
	}
	r = fs_readahead_start(fs.readahead);
	if (r < 0) {
		log_error_errno(r, "cannot start the restore workers: %m");
		goto out_unmount;
	}
	r = a.policy ? fs_policy_start(&fs) : 0;
	if (r < 0) {
		log_error_errno(r, "cannot start the policy worker: %m");
		goto out_unmount;
	}
	r = control_start(control);
	if (r < 0) {
		log_error_errno(r, "cannot serve the control socket %s: %m", control_path);
		goto out_unmount;
	}

	loop = fuse_loop_cfg_create();
	if (!loop) {
		log_oom();
		goto out_unmount;
	}
	fuse_loop_cfg_set_clone_fd(loop, opts.clone_fd);
	/* libfuse marks unset values with UINT_MAX and complains if handed them. */
	if (opts.max_threads != UINT_MAX)
		fuse_loop_cfg_set_max_threads(loop, opts.max_threads);
	if (opts.max_idle_threads != UINT_MAX)
		fuse_loop_cfg_set_idle_threads(loop, opts.max_idle_threads);
	r = opts.singlethread ? fuse_session_loop(se) : fuse_session_loop_mt(se, loop);
	/* libfuse reports the signal that stopped it: a requested stop is a clean one. */
	if (r == 0 || r == SIGTERM || r == SIGINT || r == SIGHUP)
		ret = EXIT_SUCCESS;
	else
		log_error_errno(r < 0 ? r : -EIO, "filesystem loop failed: %m");
	fuse_loop_cfg_destroy(loop);

out_unmount:
	/* First: a worker or a tierctl move waiting on it gives up its wait, and the stops below do not wait for it. */
	fs_throttle_stop(&fs.throttle);
	control = control_free(control);
	/* No request comes in any more: the restore workers go, early, as they only serve requests. */
	fs_readahead_stop(fs.readahead);
	/* The seal workers before the policy worker: a finished seal wakes the latter (fs_policy_check_space()). */
	fs_sealer_stop(&fs);
	fs_policy_stop(&fs);
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_fs:
	control = control_free(control);
	fs_done(&fs);
out_config:
	config_done(&config);
out_opts:
	free(opts.mountpoint);
out_args:
	fuse_opt_free_args(&args);
	free(a.data);
	free(a.config);
	free(a.control);
	free(a.recover_from);
	free(a.key_file);
	free(a.make_key);
	free(a.add_key);
	free(a.drop_key);
	for (unsigned k = 0; k < a.n_positional; k++)
		free(a.positional[k]);
	return ret;
}

int main(int argc, char **argv) {
	/*
	 * glibc gives threads up to 8 malloc arenas per core, and memory freed in
	 * one is not reused by another: with a FUSE thread pool, seal, restore
	 * and migration workers taking turns at the same buffers, that stranded
	 * memory was the larger part of the daemon's peak (bench-tier: 408 MiB
	 * against 267 with one arena per core, no slower).  Before any thread.
	 */
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	(void) mallopt(M_ARENA_MAX, (int) MAX(cores, 2L));
	/*
	 * A restore allocates and frees the same few sizes over and over: a
	 * recipe segment's arrays (a few hundred KiB), the read contexts'
	 * buffers (1-8 MiB), the region cache's entries.  glibc maps each above
	 * its threshold (128 KiB, raised as they are freed) afresh and gives
	 * the top of the heap back beyond twice it, so every new one was fresh
	 * pages to fault in, at several microseconds each on a VM.  Kept, a
	 * restore after an ingest in the same mount faults 20x less, a mount's
	 * first restore a third less, the next ones 3-5x less, for 8% more
	 * peak RSS (bench/README.md, "Restore, phase 6").  What is kept is
	 * bounded: up to FS_MALLOC_TRIM_THRESHOLD free at the top of each
	 * arena's heap, and what lies below in use or free between
	 * allocations, as before.
	 */
	(void) mallopt(M_MMAP_THRESHOLD, FS_MALLOC_MMAP_THRESHOLD);
	(void) mallopt(M_TRIM_THRESHOLD, FS_MALLOC_TRIM_THRESHOLD);
	return run(argc, argv);
}
