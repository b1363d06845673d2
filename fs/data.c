/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * data.c — a file's bytes move between raw staging and sealed chunks.
 *
 *        create/write                 fs_data_seal()
 *   ---> RAW (staging file) -----------------------------> SEALED (recipe)
 *          ^                                                   |
 *          |        fs_data_unseal(): first write, truncate,   |
 *          +--------------- fallocate (copy-on-write) ---------+
 *
 * Invariants:
 *  1. The catalog never points at data that is not durable: a seal fsyncs
 *     the frames before its commit, an unseal fsyncs the staging file before
 *     its commit, and the old copy is deleted only after the commit is
 *     synced.
 *  2. Both switches run under the inode's data_lock held exclusively; every
 *     read, write, truncate and fallocate holds it shared, so none of them
 *     ever sees a half-switched file.  Sealing itself (chunking, hashing,
 *     compressing) runs without the lock; the switch is refused if the
 *     bytes changed meanwhile (data_gen).
 */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macros.h"
#include "fs/fs-internal.h"

/* Loads whether the file is sealed; data_lock held exclusively. */
static int state_load(Fs *fs, FsInode *i) {
	CatalogInode ci;
	int r = catalog_inode_get(fs->catalog, i->ino, &ci);
	if (r < 0)
		return r;
	i->sealed = ci.state == CATALOG_FILE_SEALED;
	i->sealed_size = ci.size;
	i->sealed_tier = ci.tier;
	/* The same column: a raw file's tier is where its staging file is (spill.c). */
	atomic_store(&i->staging_tier, i->sealed ? 0 : ci.tier);
	i->file_class = (uint8_t) ci.file_class;
	i->state_known = true;
	return 0;
}

int fs_data_lock_read(Fs *fs, FsInode *i) {
	for (;;) {
		pthread_rwlock_rdlock(&i->data_lock);
		if (i->state_known)
			return 0;
		pthread_rwlock_unlock(&i->data_lock);

		pthread_rwlock_wrlock(&i->data_lock);
		int r = i->state_known ? 0 : state_load(fs, i);
		pthread_rwlock_unlock(&i->data_lock);
		if (r < 0)
			return r;
	}
}

void fs_data_unlock(FsInode *i) {
	pthread_rwlock_unlock(&i->data_lock);
}

void fs_data_attrs_changed(Fs *fs, uint64_t ino) {
	/* An inode the kernel does not hold is no error: it has nothing cached. */
	if (fs->se)
		(void) fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
}

int fs_data_drop(Fs *fs, const CatalogInode *ci) {
	if (ci->state != CATALOG_FILE_SEALED)
		return 0;
	DedupStore *store = fs_tier_store(fs, ci->tier);
	/* Metadata only, whatever the tier: deleting a cold file never reads or waits for its tier. */
	return store ? dedup_file_drop(store, ci->ino) : dedup_file_drop_unopened(fs->catalog, ci->ino);
}

int fs_data_unseal(Fs *fs, FsInode *i, bool truncate_to_zero) {
	_cleanup_close_ int fd = -1;
	CatalogInode ci;
	uint32_t to = 0;
	int r;

	pthread_rwlock_wrlock(&i->data_lock);
	if (!i->state_known) {
		r = state_load(fs, i);
		if (r < 0)
			goto out;
	}
	if (!i->sealed) {
		r = 0;
		goto out;
	}
	r = catalog_inode_get(fs->catalog, i->ino, &ci);
	if (r < 0)
		goto out;

	/*
	 * The bytes come back where new bytes go: the hot tier if it has room
	 * for them, else the first lower tier that has (spill.c); a tier that
	 * fills under the copy hands over to the next.
	 */
	for (uint32_t first = 0;; first = to + 1) {
		uint64_t need = truncate_to_zero ? 0 : ci.size;
		r = fs_spill_pick(fs, first, UINT32_MAX, true, need, &to);
		if (r < 0)
			goto out;
		fd = fs_staging_create(fs, to, i->ino);
		if (fd < 0) {
			r = fd;
			goto next_tier;
		}
		if (!truncate_to_zero) {
			DedupStore *store = fs_tier_store(fs, ci.tier);
			r = store ? dedup_file_write_to_fd(store, i->ino, ci.size, fd) : -EIO;
			if (r >= 0 && ftruncate(fd, (off_t) ci.size) < 0)
				r = -errno;
			if (r < 0)
				goto next_tier;
		}
		struct timespec times[2] = {
			{ .tv_sec = ci.atime_ns / 1000000000, .tv_nsec = ci.atime_ns % 1000000000 },
			{ .tv_sec = ci.mtime_ns / 1000000000, .tv_nsec = ci.mtime_ns % 1000000000 },
		};
		if (futimens(fd, times) < 0 || fsync(fd) < 0) {
			r = -errno;
			goto next_tier;
		}
		r = fs_staging_sync_dir(fs, to, i->ino);
		if (r >= 0)
			break;
	next_tier:
		(void) fs_staging_unlink(fs, to, i->ino);
		if (fd >= 0)
			close(TAKE_FD(fd));
		if (r != -ENOSPC && r != -EDQUOT)
			goto out;
	}

	r = catalog_begin(fs->catalog);
	if (r < 0)
		goto err_unlink;
	r = fs_data_drop(fs, &ci);
	if (r >= 0) {
		ci.state = CATALOG_FILE_RAW;
		ci.stored = 0;
		/* A raw file's tier is its staging file's. */
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

	/* Before its bytes can change: nothing decompressed ahead of the sealed file is handed out again. */
	if (fs->readahead)
		fs_readahead_invalidate(fs->readahead, i);
	pthread_mutex_lock(&i->lock);
	int old = atomic_exchange(&i->fd, TAKE_FD(fd));
	if (old >= 0)
		close(old);
	i->run_ok = false; /* the bytes copied back were not appended by a run */
	pthread_mutex_unlock(&i->lock);
	i->sealed = false;
	i->sealed_tier = 0;
	atomic_store(&i->staging_tier, to);
	/*
	 * The bytes copied back count as not yet written: only a rewrite within
	 * this raw session marks the file as rewritten in place, so an image
	 * copy updated block by block (RECOVER COPY) is sealed again.
	 */
	atomic_store(&i->written_end, 0);
	goto out;

err_unlink:
	(void) fs_staging_unlink(fs, to, i->ino);
out:
	pthread_rwlock_unlock(&i->data_lock);
	if (r < 0)
		log_error_errno(r, "Failed to turn sealed inode %llu back into a raw file: %m",
				(unsigned long long) i->ino);
	return r;
}

static int64_t ts_ns(const struct timespec *ts) {
	return (int64_t) ts->tv_sec * 1000000000 + ts->tv_nsec;
}

DedupChunkerParams fs_class_chunker(const ConfigClassPolicy *p) {
	if (p->chunking == CONFIG_CHUNKING_FIXED)
		return DEDUP_CHUNKER_PARAMS_FIXED(p->chunk_size);
	DedupChunkerParams c = DEDUP_CHUNKER_PARAMS_CDC(p->chunk_size);
	if (p->chunking == CONFIG_CHUNKING_ORACLE)
		c.mode = DEDUP_CHUNKER_ORACLE;
	return c;
}

int fs_data_writer_new(Fs *fs, uint32_t tier, uint32_t staging_tier, TierFileClass c, DedupWriter **ret) {
	const ConfigClassPolicy *policy = tier_class_policy(fs->config, c);
	if (!policy)
		return -EINVAL; /* passthrough: never sealed */
	DedupStore *store = fs_tier_store(fs, tier);
	if (!store)
		return -ENXIO;
	DedupChunkerParams params = fs_class_chunker(policy);
	DedupWriter *w;
	int r = dedup_writer_new(store, &params, policy->zstd_level, policy->region_size, &w);
	if (r < 0)
		return r;
	/*
	 * The recipe goes to a file as it is made, so that sealing a backup
	 * piece of any size takes the same memory: beside the staging file,
	 * whose tier may not be the chunks'.  Without a staging area (or
	 * O_TMPFILE), it stays in memory, encoded.
	 */
	int fd = fs_staging_spool(fs, staging_tier);
	if (fd >= 0)
		r = dedup_writer_spool(w, fd);
	if (r < 0) {
		dedup_writer_free(w);
		return r;
	}
	*ret = w;
	return 0;
}

uint64_t fs_class_split(Fs *fs, TierFileClass c) {
	const ConfigClassPolicy *policy = tier_class_policy(fs->config, c);
	return policy ? policy->split_size : 0;
}

int fs_data_feed(Fs *fs, int fd, DedupWriter *w, void *buf, uint64_t from, uint64_t to, uint64_t cut,
		 uint64_t *ret_fed) {
	FsThrottleUnit unit;
	DedupWriterStats ws;
	int r = 0;

	dedup_writer_stats(w, &ws);
	uint64_t helped = ws.encode_wait_ns, helped_cpu = ws.encode_cpu_ns;
	fs_throttle_begin(&unit);
	while (from < to) {
		if (atomic_load(&fs->seal_stopping)) {
			r = -ECANCELED; /* unmounting: the file stays raw, the next mount queues it again */
			break;
		}
		uint64_t want = MIN(to - from, (uint64_t) FS_SEAL_READ_SIZE);
		if (cut > 0)
			want = MIN(want, cut - from % cut); /* no read crosses a cut */
		ssize_t n = pread(fd, buf, (size_t) want, (off_t) from);
		if (n < 0) {
			r = -errno;
			break;
		}
		if (n == 0)
			break; /* shrank meanwhile: the generation check will refuse the switch */
		r = dedup_writer_feed(w, buf, (size_t) n);
		if (r < 0)
			break;
		from += (uint64_t) n;
		if (cut > 0 && from % cut == 0) {
			r = dedup_writer_cut(w);
			if (r < 0)
				break;
		}
		dedup_writer_stats(w, &ws);
		unit.helped_ns = (int64_t) (ws.encode_wait_ns - helped);
		unit.helped_cpu_ns = (int64_t) (ws.encode_cpu_ns - helped_cpu);
		helped = ws.encode_wait_ns;
		helped_cpu = ws.encode_cpu_ns;
		/* No lock held here (throttle.c, invariant 2): the writers go first while they write. */
		fs_throttle_pace(&fs->throttle, FS_THROTTLE_SEAL, &unit);
	}
	*ret_fed = from;
	return r;
}

/*
 * The second writer of a seal in two parts: chunks [from, to) of the
 * staging file through a descriptor of its own (its own read-ahead) on a
 * thread of its own, which inherits the seal worker's nice value and pays
 * its own throttle units (fs_data_feed()).
 */
typedef struct SealPart {
	Fs *fs;
	uint32_t tier, staging_tier;
	TierFileClass file_class;
	int fd;
	uint64_t from, to, cut;
	DedupWriter *w;
	int result;
	pthread_t thread;
} SealPart;

static void *part_main(void *userdata) {
	SealPart *p = userdata;
	uint64_t fed;
	(void) pthread_setname_np(pthread_self(), "fratier-part");
	void *buf = malloc(FS_SEAL_READ_SIZE);
	int r = buf ? fs_data_writer_new(p->fs, p->tier, p->staging_tier, p->file_class, &p->w) : -ENOMEM;
	if (r >= 0) {
		(void) posix_fadvise(p->fd, (off_t) p->from, (off_t) (p->to - p->from), POSIX_FADV_SEQUENTIAL);
		r = fs_data_feed(p->fs, p->fd, p->w, buf, p->from, p->to, p->cut, &fed);
	}
	if (r >= 0)
		r = dedup_writer_finish(p->w);
	free(buf);
	p->result = r;
	return NULL;
}

/*
 * Where a seal of [from, size) is cut between its two writers, or 0 for
 * one writer: the cut of the file (a multiple of cut, where every writer
 * of the file cuts, fs_data_feed()) nearest the middle of what is left,
 * once at least two cuts' worth is left.  Where the cuts are depends on
 * nothing but cut, so the recipe is the same whichever way the file was
 * split, streamed or not.
 */
static uint64_t split_point(uint64_t cut, uint64_t from, uint64_t size) {
	if (cut == 0 || from >= size || size - from < 2 * cut)
		return 0;
	uint64_t half = from + (size - from) / 2;
	/* Within cut / 2 of half, which is at least cut from either end. */
	return (half + cut / 2) / cut * cut;
}

/*
 * Chunks, fingerprints, compresses and stores the staging file (on tier
 * staging_tier), or what the stream s has not chunked yet; nothing is
 * committed.  What is left is fed to two writers at once, each on its own
 * side of a cut, when it is large enough (split_point()): their recipes are
 * joined into *ret_writer (dedup_writer_join()), and a failure of either
 * fails the seal.  *ret_tier gets the tier the chunks went to.
 */
static int seal_ingest(Fs *fs, uint64_t ino, uint32_t staging_tier, TierFileClass class, FsStream *s,
		       DedupWriter **ret_writer, uint32_t *ret_tier, struct stat *ret_st, uint64_t *ret_streamed,
		       bool *ret_split) {
	_cleanup_free_ void *buf = NULL;
	_cleanup_close_ int fd = -1;
	DedupWriter *w = NULL;
	uint64_t from = 0, fed, cut = fs_class_split(fs, class);
	SealPart part = { .fd = -1 };
	bool parted = false;
	int r;

	*ret_streamed = 0;
	*ret_split = false;
	if (!s || !fs_stream_take_writer(s, &w, ret_tier, &fd, &from)) {
		fd = fs_staging_open_ro(fs, staging_tier, ino);
		if (fd < 0)
			return fd;
	}
	if (fstat(fd, ret_st) < 0) {
		r = -errno;
		goto fail;
	}
	/*
	 * A mostly sparse file would be read and hashed hole by hole for
	 * nothing: its holes cost no space raw either.  It stays raw.
	 */
	if ((uint64_t) ret_st->st_blocks * 512 < (uint64_t) ret_st->st_size / 2) {
		r = -EFBIG;
		goto fail;
	}
	if (from > (uint64_t) ret_st->st_size) {
		r = -ESTALE; /* shorter than what was chunked (cannot be: a truncate ends the run) */
		goto fail;
	}
	buf = malloc(FS_SEAL_READ_SIZE);
	if (!buf) {
		r = -ENOMEM;
		goto fail;
	}

	if (!w) {
		/*
		 * Its chunks go where its bytes are, on the tier it spilled to
		 * if it did: the tier that was full is not filled again, and the
		 * staging file the seal frees is on the tier the containers take
		 * room on.  Until the seal commits, both take room there: if
		 * that tier is short of it, a lower one with room takes the
		 * chunks (it would take them by policy later anyway).
		 */
		r = fs_spill_pick(fs, staging_tier, UINT32_MAX, false, (uint64_t) ret_st->st_blocks * 512, ret_tier);
		if (r >= 0)
			r = fs_data_writer_new(fs, *ret_tier, staging_tier, class, &w);
		if (r < 0)
			return r;
	}
	uint64_t size = (uint64_t) ret_st->st_size, mid = split_point(cut, from, size);
	if (mid > 0) {
		/* A description of its own: two sequential readers of one would share (and spoil) its read-ahead. */
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		part = (SealPart) { .fs = fs, .tier = *ret_tier, .staging_tier = staging_tier, .file_class = class,
				    .from = mid, .to = size, .cut = cut };
		part.fd = open(path, O_RDONLY | O_CLOEXEC);
		/* Without a descriptor or a thread, one writer seals it all. */
		parted = part.fd >= 0 && pthread_create(&part.thread, NULL, part_main, &part) == 0;
	}
	/* The data will be read once, sequentially: say so. */
	(void) posix_fadvise(fd, (off_t) from, parted ? (off_t) (mid - from) : 0, POSIX_FADV_SEQUENTIAL);
	r = fs_data_feed(fs, fd, w, buf, from, parted ? mid : size, cut, &fed);
	if (r >= 0)
		r = dedup_writer_finish(w);
	if (parted) {
		(void) pthread_join(part.thread, NULL);
		if (r >= 0)
			r = part.result < 0 ? part.result : dedup_writer_join(w, part.w);
		dedup_writer_free(part.w);
	}
	if (part.fd >= 0)
		close(part.fd);
	if (r < 0)
		goto fail;
	*ret_writer = w;
	*ret_streamed = from;
	*ret_split = parted;
	return 0;

fail:
	dedup_writer_free(w);
	return r;
}

int fs_data_seal(Fs *fs, uint64_t ino) {
	DedupWriter *w = NULL;
	FsStream *stream = NULL;
	CatalogInode ci;
	struct stat st;
	FsInode *i;
	int r;

	/* A pin of our own keeps the in-memory inode (and its locks) alive meanwhile. */
	r = fs_inode_pin(fs, ino, true, &i);
	if (r < 0)
		return r;
	/*
	 * Written again since it was queued, and still open: its last close
	 * queues it again, and sealing it now would only race the writer (and
	 * take the stream of its new run).
	 */
	if (atomic_load(&i->written) && fs_inode_is_open(fs, i)) {
		fs_inode_unpin(fs, i);
		return 0;
	}
	/* Whatever happens below, the stream ends here: its file is closed, or changed. */
	stream = fs_stream_take(fs, i);

	r = catalog_inode_get(fs->catalog, ino, &ci);
	if (r == -ENOENT) {
		r = 0; /* deleted meanwhile: ci holds nothing */
		goto out;
	}
	if (r < 0 || !S_ISREG(ci.mode) || ci.state != CATALOG_FILE_RAW || ci.nlink == 0 ||
	    !tier_class_is_sealed((TierFileClass) ci.file_class) || atomic_load(&i->overwritten))
		goto out;
	/* Read before the stream is checked, so an unchanged data_gen at the commit covers what it chunked. */
	uint64_t gen = atomic_load(&i->data_gen), streamed;
	uint32_t from = ci.tier, to = 0;
	bool split;

	/*
	 * Its rows need room on the catalog's filesystem (the hot tier's); and
	 * once that filled from outside and the catalog's reserve went to
	 * commits, a file spilled to another filesystem would spend what room
	 * is left there and free none, and the archiver's next files need it.
	 * It waits (seal.c).
	 */
	if (!fs_catalog_has_room(fs, ci.size, (TierFileClass) ci.file_class) ||
	    (fs->staging[from].dev != fs->staging[0].dev && catalog_out_of_room(fs->catalog))) {
		r = -EAGAIN;
		goto out;
	}

	r = seal_ingest(fs, ino, from, (TierFileClass) ci.file_class, stream, &w, &to, &st, &streamed, &split);
	stream = fs_stream_free(fs, stream);
	if (r == -EFBIG || r == -ECANCELED || r == -ESTALE) {
		r = 0;
		goto out;
	}
	if (r < 0)
		goto out;

	/*
	 * Read before the switch, while the staging file is still there; if the
	 * bytes change meanwhile, data_gen refuses the switch and this with it.
	 */
	CatalogArchivelog log;
	bool have_log = ci.file_class == TIER_CLASS_ARCHIVELOG && fs_archivelog_header(fs, from, ino, &log) >= 0;

	pthread_rwlock_wrlock(&i->data_lock);
	if (atomic_load(&i->data_gen) != gen || (i->state_known && i->sealed)) {
		r = 0; /* changed while we read it: the frames are garbage for GC, try again later */
		goto out_unlock;
	}
	r = catalog_begin(fs->catalog);
	if (r < 0)
		goto out_unlock;
	r = catalog_inode_get(fs->catalog, ino, &ci);
	if (r >= 0 && (ci.state != CATALOG_FILE_RAW || ci.nlink == 0 || ci.tier != from))
		r = -ESTALE;
	if (r >= 0)
		r = dedup_writer_commit(w, ino);
	if (r >= 0 && have_log)
		r = catalog_archivelog_set(fs->catalog, ino, &log);
	if (r >= 0) {
		ci.state = CATALOG_FILE_SEALED;
		ci.tier = to;
		ci.size = (uint64_t) st.st_size;
		DedupWriterStats ws;
		dedup_writer_stats(w, &ws);
		/* What sealing this file added to the store; shared chunks are charged to their first owner. */
		ci.stored = ws.stored_bytes;
		ci.atime_ns = ts_ns(&st.st_atim);
		ci.mtime_ns = ts_ns(&st.st_mtim);
		if (ts_ns(&st.st_ctim) > ci.ctime_ns)
			ci.ctime_ns = ts_ns(&st.st_ctim);
		r = catalog_inode_update(fs->catalog, &ci);
	}
	if (r < 0) {
		catalog_rollback(fs->catalog);
		if (r == -ESTALE)
			r = 0;
		goto out_unlock;
	}
	r = catalog_commit(fs->catalog);
	/* The staging file goes only once the switch is durable (invariant 1). */
	if (r >= 0)
		r = catalog_sync(fs->catalog);
	if (r < 0)
		goto out_unlock;

	pthread_mutex_lock(&i->lock);
	int fd = atomic_exchange(&i->fd, -1);
	pthread_mutex_unlock(&i->lock);
	if (fd >= 0)
		close(fd);
	fs_seal_drop_staging(fs, from, ino);
	i->sealed = true;
	i->sealed_tier = to;
	i->sealed_size = ci.size;
	i->state_known = true;
	if (streamed > 0) {
		atomic_fetch_add(&fs->seals_streamed, 1);
		atomic_fetch_add(&fs->streamed_bytes, streamed);
	} else
		atomic_fetch_add(&fs->seals_whole, 1);
	if (split)
		atomic_fetch_add(&fs->seals_split, 1);
	log_debug("sealed inode %llu: %llu bytes (%llu of them chunked while written) stored as %llu",
		  (unsigned long long) ino, (unsigned long long) ci.size, (unsigned long long) streamed,
		  (unsigned long long) ci.stored);
	pthread_rwlock_unlock(&i->data_lock);
	fs_data_attrs_changed(fs, ino);
	goto out;

out_unlock:
	pthread_rwlock_unlock(&i->data_lock);
out:
	fs_stream_free(fs, stream);
	dedup_writer_free(w);
	fs_inode_unpin(fs, i);
	return r;
}
