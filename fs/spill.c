/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * spill.c — when the hot tier is full, raw bytes land on the next tier with
 * room instead of failing, so the archiver never stops while any tier can
 * take its logs.
 *
 * Every directory-backed tier that opened has a staging area (staging.c).
 * New files start on the hot tier; when it has no room left above its
 * floor, they start on the first lower tier that has.  A file being written
 * when its tier fills (by our count or by a real ENOSPC) moves, whole, to
 * the next tier with room, and the write goes on there (fs_spill_move(),
 * ops.c): the archiver sees no error.  Its seal then stores its chunks on
 * that same tier (data.c).  Only when no tier has room does a write fail,
 * with ENOSPC, and nothing written before is touched.
 *
 * Moving the whole file rather than continuing it elsewhere keeps one
 * staging file per raw file, so overwrites, truncates, holes, O_DIRECT,
 * reads and fsync stay those of one local file; the price is one copy of
 * what the file held when its tier filled (a log being archived at that
 * moment), once.
 *
 * NFS tiers hold no staging (see staging.c): spill goes to directory tiers
 * only, and a mount whose only lower tier is on NFS fails writes with ENOSPC
 * when its hot tier is full, as before.
 *
 * Floors: raw data never takes the last bytes of a filesystem.
 *  - On the hot tier's filesystem (and a lower tier on the same one, as
 *    the embedded default's capacity directory is): MIN(64 MiB, an eighth
 *    of it).  The catalog lives there, and it must always be able to
 *    commit: the unlink that frees space, the spill's own switch, the
 *    recipes of what is sealed on any tier.
 *  - Elsewhere: two maximal writes, so a write admitted by the count below
 *    rarely meets a real ENOSPC halfway.
 *
 * A spill (fs_spill_move()), all under the file's data_lock held exclusively:
 *
 *   raw on tier a --copy every byte (holes stay holes), times, fsync the copy
 *        |          and its directory--> copy on tier b (a stray until the commit)
 *        |                                   |
 *        |  no room, or an error: the copy   | one catalog transaction: tier = b,
 *        +<-- is unlinked, a stays ----------+ committed and synced
 *                                            v
 *                                  raw on tier b; a's file unlinked
 *
 * Invariants:
 *  1. The catalog switches a raw file's tier only once the copy is durable,
 *     and the old file is deleted only once the switch is: after a crash
 *     the file is whole where the catalog says, and the other copy is a
 *     stray that recovery deletes (fs_staging_recover()).
 *  2. No write, read, truncate, fsync or seal switch sees a spill half
 *     done (data_lock), and every acknowledged byte is copied.  A spill
 *     bumps data_gen, so a seal that read the old copy gives up, and ends
 *     the run of appends, so a stream that reads the old copy stops.
 *  3. Room is counted, not measured, on the write path: each area has a
 *     budget of half what its filesystem had free above the floor when it
 *     was last measured (statvfs); writes take from it and measure again
 *     when it runs out.  So a filesystem is measured a few dozen times as
 *     it fills, on every write only near its floor, and whatever else
 *     writes there meanwhile (containers, the catalog) has the other half.
 *     A spill off a tier means something else took that room after all:
 *     the next write there measures.
 *  4. A file spilled off a tier frees the room it took there, and nothing
 *     more: without care, every next file would start in that room, fill
 *     it and be copied off in turn.  So a new file starts on a tier only
 *     if it has room for a maximal write and, after a spill off it, for
 *     twice what the spilled file held there (at most half of the
 *     tier): room that came back from elsewhere (a seal, a move, an
 *     unlink), not the spilled file's own.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macros.h"
#include "fs/fs-internal.h"

#define SPILL_HOT_FLOOR_MAX (UINT64_C(64) << 20)
#define SPILL_HOT_FLOOR_SHARE 8
#define SPILL_FLOOR (2 * (uint64_t) FS_MAX_WRITE)
#define SPILL_START_SHARE 2

void fs_spill_area_init(Fs *fs, uint32_t tier) {
	FsStagingArea *a = &fs->staging[tier];
	struct statvfs sv;

	a->size = fstatvfs(a->fd, &sv) >= 0 ? (uint64_t) sv.f_blocks * sv.f_frsize : 0;
	if (tier == 0 || a->dev == fs->staging[0].dev)
		a->floor = MIN(SPILL_HOT_FLOOR_MAX, a->size / SPILL_HOT_FLOOR_SHARE);
	else
		a->floor = SPILL_FLOOR;
	atomic_store(&a->start_need, FS_MAX_WRITE);
	/* Nothing counted yet: the first write measures. */
	atomic_store(&a->budget, 0);
}

/* Bytes tier's filesystem can still take above its floor. */
static int area_room(Fs *fs, uint32_t tier, uint64_t *ret) {
	const FsStagingArea *a = &fs->staging[tier];
	struct statvfs sv;
	if (fstatvfs(a->fd, &sv) < 0)
		return -errno;
	uint64_t avail = (uint64_t) sv.f_bavail * sv.f_frsize;
	*ret = avail > a->floor ? avail - a->floor : 0;
	return 0;
}

bool fs_spill_has_room(Fs *fs, uint32_t tier, uint64_t len) {
	if (!fs_staging_has_area(fs, tier) || len > INT64_MAX / 2)
		return false;
	FsStagingArea *a = &fs->staging[tier];
	/*
	 * The catalog gave its reserve back (catalog.c, invariant 7): what
	 * room its filesystem has left is for its commits, which the budget
	 * below, counted before, would hand to raw bytes.
	 */
	if (a->dev == fs->staging[0].dev && catalog_reserve_given_back(fs->catalog))
		return false;
	if (atomic_fetch_sub(&a->budget, (int64_t) len) >= (int64_t) len)
		return true;
	uint64_t room = 0;
	if (area_room(fs, tier, &room) < 0)
		return false;
	/* Invariant 3; a write refused leaves a budget below zero, so the next one measures again. */
	atomic_store(&a->budget, (int64_t) MIN(room / 2, (uint64_t) INT64_MAX / 4) - (int64_t) len);
	return room >= len;
}

/*
 * Room on the catalog's filesystem a seal or move takes per chunk at its
 * peak: its rows, the WAL's frames and the recipe's spool on the hot tier
 * (300 bytes measured, moving 8 Ki and 64 Ki chunks of 4 KiB and 512 bytes).
 */
#define CATALOG_ROOM_PER_CHUNK 300

bool fs_catalog_has_room(Fs *fs, uint64_t size, TierFileClass c) {
	const ConfigClassPolicy *policy = tier_class_policy(fs->config, c);
	struct statvfs sv;
	if (!policy || policy->chunk_size == 0 || fstatvfs(fs->staging[0].fd, &sv) < 0)
		return true; /* nothing to estimate with: as before */
	CatalogStats st;
	catalog_stats_get(fs->catalog, &st);
	uint64_t need = size / policy->chunk_size * CATALOG_ROOM_PER_CHUNK;
	uint64_t room = (uint64_t) sv.f_bavail * sv.f_frsize + st.reserve_held;
	/* Once the reserve was given back (catalog.c, invariant 7), half of what is left stays for the archiver. */
	return need <= (catalog_reserve_given_back(fs->catalog) ? room / 2 : room);
}

bool fs_catalog_short(Fs *fs, uint64_t size, TierFileClass c) {
	return catalog_out_of_room(fs->catalog) || !fs_catalog_has_room(fs, size, c);
}

bool fs_tier_takes_raw(const Fs *fs, uint32_t n) {
	return n < CONFIG_TIERS_MAX && fs->staging[n].fd >= 0 && fs->staging[n].takes_raw;
}

uint32_t fs_spill_pick_new(Fs *fs) {
	for (uint32_t n = 0; n < CONFIG_TIERS_MAX; n++)
		if (fs_tier_takes_raw(fs, n) && fs_spill_has_room(fs, n, atomic_load(&fs->staging[n].start_need)))
			return n;
	return 0;
}

int fs_spill_pick(Fs *fs, uint32_t first, uint32_t skip, bool raw, uint64_t len, uint32_t *ret) {
	for (uint32_t n = first; n < CONFIG_TIERS_MAX; n++)
		if (n != skip && (!raw || fs_tier_takes_raw(fs, n)) && fs_spill_has_room(fs, n, len)) {
			*ret = n;
			return 0;
		}
	return -ENOSPC;
}

static int pwrite_all(int fd, const uint8_t *buf, size_t len, off_t pos) {
	while (len > 0) {
		ssize_t n = pwrite(fd, buf, len, pos);
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t) n;
		pos += n;
	}
	return 0;
}

/* Copies size bytes of from to the empty to, leaving holes where from has them. */
static int copy_data(int from, int to, off_t size) {
	_cleanup_free_ uint8_t *buf = malloc(FS_SEAL_READ_SIZE);
	off_t pos = 0;

	if (!buf)
		return -ENOMEM;
	while (pos < size) {
		off_t data = lseek(from, pos, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break; /* a hole up to the end */
		off_t hole = data < 0 ? -1 : lseek(from, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		pos = data;
		for (off_t end = MIN(hole, size); pos < end;) {
			ssize_t n = pread(from, buf, (size_t) MIN(end - pos, (off_t) FS_SEAL_READ_SIZE), pos);
			if (n < 0)
				return -errno;
			if (n == 0)
				return -EIO; /* shorter than its size: cannot be, no one changes it under data_lock */
			int r = pwrite_all(to, buf, (size_t) n, pos);
			if (r < 0)
				return r;
			pos += n;
		}
	}
	return ftruncate(to, size) < 0 ? -errno : 0;
}

/*
 * Makes a durable copy of i's staging file (st) on tier to; returns its fd.
 * On error nothing is left on `to`.
 */
static int copy_to(Fs *fs, FsInode *i, const struct stat *st, uint32_t to) {
	_cleanup_close_ int fd = fs_staging_create(fs, to, i->ino);
	int r = fd;

	if (fd >= 0)
		r = copy_data(atomic_load(&i->fd), fd, st->st_size);
	/* mtime is the staging file's to report (raw files); ctime cannot be carried over and becomes now. */
	struct timespec times[2] = { st->st_atim, st->st_mtim };
	if (r >= 0 && (futimens(fd, times) < 0 || fsync(fd) < 0))
		r = -errno;
	if (r >= 0)
		r = fs_staging_sync_dir(fs, to, i->ino);
	if (r < 0) {
		(void) fs_staging_unlink(fs, to, i->ino);
		return r;
	}
	return TAKE_FD(fd);
}

int fs_spill_move(Fs *fs, FsInode *i, uint64_t need) {
	uint32_t from = 0, to = 0;
	CatalogInode ci;
	struct stat st;
	bool synced, nowhere = false;
	int fd = -1, r;

	pthread_rwlock_wrlock(&i->data_lock);
	if (!i->state_known || i->sealed || atomic_load(&i->fd) < 0) {
		r = 0; /* sealed meanwhile: the caller makes it raw again, wherever there is room */
		goto out;
	}
	from = atomic_load(&i->staging_tier);
	if (fstat(atomic_load(&i->fd), &st) < 0) {
		r = -errno;
		goto out;
	}
	/* The blocks it holds, not its size: holes stay holes. */
	uint64_t held = (uint64_t) st.st_blocks * 512;
	for (uint32_t first = 0;; first = to + 1) {
		r = fs_spill_pick(fs, first, from, true, held + need, &to);
		if (r < 0) {
			nowhere = true;
			goto out;
		}
		fd = copy_to(fs, i, &st, to);
		if (fd >= 0)
			break;
		r = fd;
		/* That tier filled under the copy (our count is not a measure): the next one. */
		if (r != -ENOSPC && r != -EDQUOT)
			goto out;
	}

	r = catalog_begin(fs->catalog);
	if (r < 0)
		goto err_unlink;
	r = catalog_inode_get(fs->catalog, i->ino, &ci);
	if (r >= 0 && (ci.state != CATALOG_FILE_RAW || ci.tier != from))
		r = -ESTALE; /* cannot be: both change only under data_lock */
	if (r >= 0) {
		ci.tier = to;
		r = catalog_inode_update(fs->catalog, &ci);
	}
	if (r < 0) {
		catalog_rollback(fs->catalog);
		goto err_unlink;
	}
	r = catalog_commit(fs->catalog);
	if (r < 0)
		goto err_unlink;
	/*
	 * Committed: the copy is the file now.  If the commit is not known
	 * durable, the old file stays as well, for a power loss that would
	 * take the switch back (invariant 1); recovery deletes whichever the
	 * catalog does not name.
	 */
	synced = catalog_sync(fs->catalog) >= 0;

	pthread_mutex_lock(&i->lock);
	int old = atomic_exchange(&i->fd, TAKE_FD(fd));
	i->run_ok = false; /* invariant 2 */
	pthread_mutex_unlock(&i->lock);
	close(old);
	atomic_store(&i->staging_tier, to);
	atomic_fetch_add(&i->data_gen, 1);
	/*
	 * The file leaves as much room as it took: the next file started
	 * there would fill it as this one did, and be copied off in turn.  New
	 * files start there again once it has twice that (invariant 4).
	 */
	FsStagingArea *a = &fs->staging[from];
	atomic_store(&a->start_need, MAX((uint64_t) FS_MAX_WRITE, MIN(2 * held, a->size / SPILL_START_SHARE)));
	/*
	 * Our count said room, or it would not have been tried: something
	 * else filled it (invariant 3).  Measure before the next write.
	 */
	atomic_store(&a->budget, 0);
	if (synced)
		(void) fs_staging_unlink(fs, from, i->ino);
	log_notice("tier %u is full: inode %llu (%llu bytes so far) continues on tier %u", (unsigned) from,
		 (unsigned long long) i->ino, (unsigned long long) st.st_size, (unsigned) to);
	TierFileClass class = (TierFileClass) i->file_class;
	pthread_rwlock_unlock(&i->data_lock);
	if (fs->seal_stream && tier_class_is_sealed(class))
		fs_stream_written(fs, i, class, FS_RUN_ENDED);
	return 0;

err_unlink:
	close(fd);
	(void) fs_staging_unlink(fs, to, i->ino);
out:
	pthread_rwlock_unlock(&i->data_lock);
	/* No tier with room is what statfs and tierctl say; anything else is not. */
	if (r < 0 && !nowhere)
		log_error_errno(r, "Failed to move inode %llu's raw bytes off full tier %u: %m",
				(unsigned long long) i->ino, (unsigned) from);
	return r;
}

int fs_spill_statfs(Fs *fs, struct statvfs *ret) {
	uint64_t blocks = 0, bfree = 0, bavail = 0, files = 0, ffree = 0, favail = 0;
	struct statvfs hot;

	if (fstatvfs(fs->staging[0].fd, &hot) < 0)
		return -errno;
	for (uint32_t n = 0; n < CONFIG_TIERS_MAX; n++) {
		const FsStagingArea *a = &fs->staging[n];
		struct statvfs sv;
		bool seen = false;
		/* What writes can take: the tiers raw files go to (as an NFS tier, one that takes none is not counted). */
		if (!fs_tier_takes_raw(fs, n))
			continue;
		/* Tiers on one filesystem share its space: count it once, with the largest floor among them. */
		uint64_t floor = a->floor;
		for (uint32_t m = 0; m < CONFIG_TIERS_MAX; m++) {
			if (m == n || !fs_tier_takes_raw(fs, m) || fs->staging[m].dev != a->dev)
				continue;
			seen = seen || m < n;
			floor = MAX(floor, fs->staging[m].floor);
		}
		if (seen)
			continue;
		if (fstatvfs(a->fd, &sv) < 0)
			return -errno;
		uint64_t b = (uint64_t) sv.f_bfree * sv.f_frsize, av = (uint64_t) sv.f_bavail * sv.f_frsize;
		blocks += (uint64_t) sv.f_blocks * sv.f_frsize;
		bfree += b > floor ? b - floor : 0;
		bavail += av > floor ? av - floor : 0;
		files += sv.f_files;
		ffree += sv.f_ffree;
		favail += sv.f_favail;
	}
	/* In the hot tier's block size: what du and df of the mount compare with. */
	*ret = hot;
	ret->f_blocks = blocks / hot.f_frsize;
	ret->f_bfree = bfree / hot.f_frsize;
	ret->f_bavail = bavail / hot.f_frsize;
	ret->f_files = files;
	ret->f_ffree = ffree;
	ret->f_favail = favail;
	return 0;
}
