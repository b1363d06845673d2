/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * seal.c — the background work: Fs.seal_workers threads seal files once
 * they have been closed and quiet for seal_delay_s and chunk the streams of
 * files being written (stream.c); one more thread runs the chunk collector
 * every gc_interval_s.  All of them run at nice 10, so that under load the
 * writers, whose fsync an archiver waits for, get the CPU first; the FUSE
 * threads only queue work and never wait for it.  Beyond the CPU, seals,
 * streams and the collector's compaction are paced by the throttle
 * (throttle.c) while reads and writes come in, between reads of a staging
 * file and between containers, with no lock held a FUSE request needs.
 *
 * A worker takes, in this order: a file due for sealing that no other
 * worker is sealing (two seals of one file would only race to the same
 * commit), then a turn of stream work.  The collector's thread also runs
 * the rekeys tierctl asked for (run_rekeys()), between its collections.  The collector is a thread of its
 * own because it may wait long for writers to end (dedup_store_gc()); while
 * it waits no stream starts.  Merges of the catalog's digest index run on a
 * thread of their own too (index_main()), woken after each seal and paced
 * by the throttle between batches: a merge of a large level, minutes of
 * CPU, holds neither a sealing slot nor the disks while FUSE requests come
 * in.  And the staging files of sealed files are deleted by a thread of
 * their own (reap_main()), so that no seal worker waits for a discard.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/macros.h"
#include "fs/fs-internal.h"

/*
 * A file whose seal failed is tried again after FS_SEAL_RETRY_S, twice that
 * after a second failure, and so on up to FS_SEAL_RETRY_MAX_S; one put off
 * until the catalog's filesystem has room, every FS_SEAL_ROOM_RETRY_S.
 */
#define FS_SEAL_RETRY_S 10
#define FS_SEAL_RETRY_MAX_S 3600
#define FS_SEAL_ROOM_RETRY_S 10
/* How long the collector waits for streams to end before it ends them. */
#define GC_STREAM_PATIENCE_S 60
/*
 * Container bytes one pass of a rekey rewrites before the collector and the
 * shared tiers' leases get their turn (a pass holds the tier's gc lock).
 */
#define FS_REKEY_PASS_BYTES (UINT64_C(1) << 30)

/* Under seal_lock: item goes at the end of the queue. */
static void queue_append(Fs *fs, FsSealItem *item) {
	FsSealItem **tail = &fs->seal_queue;
	while (*tail)
		tail = &(*tail)->next;
	item->next = NULL;
	*tail = item;
}

void fs_seal_schedule(Fs *fs, uint64_t ino, uint64_t bytes) {
	int64_t due = clock_ns(CLOCK_MONOTONIC) + (int64_t) fs->seal_delay_s * 1000000000;
	FsSealItem *item = NULL;

	pthread_mutex_lock(&fs->seal_lock);
	/* One entry per file: a new close pushes its quiet time back. */
	for (FsSealItem **p = &fs->seal_queue; *p; p = &(*p)->next)
		if ((*p)->ino == ino) {
			item = *p;
			*p = item->next;
			break;
		}
	if (!item)
		item = calloc(1, sizeof(FsSealItem));
	/* Without memory the file simply stays raw until the next mount queues it. */
	if (item) {
		item->ino = ino;
		item->due_ns = due;
		item->bytes = bytes;
		/* Changed since: earlier failures say nothing about the file it is now. */
		item->failures = 0;
		item->waits_for_room = false;
		queue_append(fs, item);
		pthread_cond_signal(&fs->seal_cond);
	}
	pthread_mutex_unlock(&fs->seal_lock);
}

static int schedule_one(uint64_t ino, void *userdata) {
	Fs *fs = userdata;
	FsSealItem *item = calloc(1, sizeof(FsSealItem));
	if (!item)
		return -ENOMEM;
	item->ino = ino;
	/* Left from before a restart: its staging file says how big it is, wherever it was spilled. */
	for (uint32_t n = 0; n < CONFIG_TIERS_MAX; n++) {
		struct stat st;
		if (fs_staging_stat(fs, n, ino, &st) >= 0) {
			item->bytes = (uint64_t) st.st_size;
			break;
		}
	}
	/* The same quiet time as after a close: a restarted archiver comes first. */
	item->due_ns = clock_ns(CLOCK_MONOTONIC) + (int64_t) fs->seal_delay_s * 1000000000;
	/* Called before the worker starts: no lock contention, order does not matter. */
	item->next = fs->seal_queue;
	fs->seal_queue = item;
	return 0;
}

int fs_seal_schedule_pending(Fs *fs) {
	return catalog_files_foreach_state(fs->catalog, CATALOG_FILE_RAW, schedule_one, fs);
}

typedef struct GcPace {
	Fs *fs;
	FsThrottleUnit unit;
} GcPace;

/*
 * Called after each tier's deleting phase and after each container it
 * compacts, with no lock held but the store's gc_lock (throttle.c,
 * invariant 2): the collector's share of the disks while writers write.
 */
static int gc_progress(uint64_t done, uint64_t total, void *userdata) {
	GcPace *p = userdata;
	(void) done;
	(void) total;
	fs_throttle_pace(&p->fs->throttle, FS_THROTTLE_GC, &p->unit);
	return 0;
}

static void run_gc(Fs *fs) {
	GcPace pace = { .fs = fs };
	DedupGcOptions o = DEDUP_GC_OPTIONS_DEFAULT;
	DedupGcStats st = {};
	o.progress = gc_progress;
	o.userdata = &pace;
	fs_throttle_begin(&pace.unit);
	uint32_t failed = 0;
	int r = fs_tiers_gc(fs, &o, &st, &failed);
	if (r == -ENOSPC && catalog_out_of_room(fs->catalog))
		log_warning("Chunk collection of tier %u (%s) waits for room on the hot tier's filesystem: the catalog "
			    "there has none left for its commits", (unsigned) failed, tier_set_config(fs_tiers(fs), failed)->name);
	else if (r < 0)
		log_warning_errno(r, "Chunk collection of tier %u (%s) failed: %m", (unsigned) failed,
				  tier_set_config(fs_tiers(fs), failed)->name);
	else if (st.chunks_deleted || st.containers_deleted || st.containers_compacted)
		log_info("collected %llu dead chunks, %llu containers; compacted %llu containers (%llu regions compressed again)",
			 (unsigned long long) st.chunks_deleted, (unsigned long long) st.containers_deleted,
			 (unsigned long long) st.containers_compacted, (unsigned long long) st.regions_rewritten);
}

/* Background work yields the CPU to the writers; a failure only costs that. */
static void lower_priority(void) {
	(void) setpriority(PRIO_PROCESS, (id_t) gettid(), FS_BACKGROUND_NICE);
}

static struct timespec deadline_after(int64_t wait_ns) {
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += wait_ns / 1000000000;
	until.tv_nsec += wait_ns % 1000000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	return until;
}

static bool being_sealed(const Fs *fs, uint64_t ino) {
	for (unsigned k = 0; k < fs->n_seal_threads; k++)
		if (fs->sealing[k] == ino)
			return true;
	return false;
}

typedef struct FsSealWorker {
	Fs *fs;
	unsigned index;
	pthread_t thread;
} FsSealWorker;

/*
 * The catalog's digest index: once its recent table passed index_recent
 * ids, merged into a sorted run (catalog_index_merge_step()), batch by
 * batch: the catalog lock is free between batches, and of the threads
 * waiting for it as a batch ends one at least has it before the next
 * batch (the throttle may not pause this thread at all), so a FUSE thread
 * waits for a batch or for as many as there are threads ahead of it,
 * never for a whole merge; the throttle paces the batches
 * (FS_THROTTLE_INDEX) while the foreground is busy.  A stop between
 * batches leaves the merge to the next mount, whose merge thread resumes
 * it as it starts (resume_only: it starts none).  Logged before and after:
 * a crash in between shows in the log (tests/e2e/dedup/test_index_crash.py).
 */
static void index_merge_one(Fs *fs, bool resume_only, int own_nice) {
	CatalogIndexMerge m = {};
	FsThrottleUnit unit;
	uint64_t recent = 0, batches = 0;
	int64_t longest = 0;

	int r = catalog_index_merge_due(fs->catalog, resume_only ? UINT64_MAX : fs->index_recent, &recent);
	if (r <= 0) {
		if (r < 0)
			log_warning_errno(r, "Failed to count the catalog's recent index entries: %m");
		return;
	}
	log_info("merging the chunk index: %llu recent ids", (unsigned long long) recent);
	int64_t start = clock_ns(CLOCK_MONOTONIC);
	fs_throttle_begin(&unit);
	while (!atomic_load(&fs->seal_stopping)) {
		int64_t t = clock_ns(CLOCK_MONOTONIC);
		/*
		 * A batch holds the catalog lock that the FUSE threads wait for:
		 * at nice 10 it was preempted while holding it, by any busier
		 * thread (bench/README.md, "Merge hold, the rest").  So it runs at
		 * the daemon's own priority, and the thread yields again between
		 * batches.  Lowering a nice value needs CAP_SYS_NICE (or
		 * RLIMIT_NICE): without it the batch stays at nice 10.
		 */
		bool raised = own_nice < FS_BACKGROUND_NICE && setpriority(PRIO_PROCESS, (id_t) gettid(), own_nice) == 0;
		r = catalog_index_merge_step(fs->catalog, fs->index_recent, CATALOG_INDEX_MERGE_BATCH,
					     CATALOG_INDEX_MERGE_BUDGET_NS, &m);
		if (raised)
			lower_priority();
		longest = MAX(longest, clock_ns(CLOCK_MONOTONIC) - t);
		if (r <= 0)
			break;
		batches++;
		fs_throttle_pace(&fs->throttle, FS_THROTTLE_INDEX, &unit);
	}
	if (r < 0)
		log_warning_errno(r, "Failed to merge the chunk index: %m");
	else if (r == 0 && m.run == 0) /* resumed after its swap: only old rows were left */
		log_info("merged the chunk index: the old rows of a merge deleted in %.2f s, %llu batches, the longest %.1f ms",
			 (double) (clock_ns(CLOCK_MONOTONIC) - start) / 1e9, (unsigned long long) batches, (double) longest / 1e6);
	else if (r == 0)
		log_info("merged the chunk index: %llu recent ids and %u runs into run %llu (level %u, %llu ids) in %.2f s, "
			 "%llu batches, the longest %.1f ms",
			 (unsigned long long) m.recent, m.runs, (unsigned long long) m.run, m.level,
			 (unsigned long long) m.entries, (double) (clock_ns(CLOCK_MONOTONIC) - start) / 1e9,
			 (unsigned long long) batches, (double) longest / 1e6);
}

/* One merge at a time, after the seals that may have made one due; the one a crash or an unmount left first. */
static void *index_main(void *userdata) {
	Fs *fs = userdata;

	errno = 0;
	int own_nice = getpriority(PRIO_PROCESS, (id_t) gettid());
	if (own_nice == -1 && errno != 0)
		own_nice = FS_BACKGROUND_NICE;
	lower_priority();
	index_merge_one(fs, true, own_nice);
	pthread_mutex_lock(&fs->seal_lock);
	while (!fs->seal_stop) {
		if (!fs->index_wake) {
			pthread_cond_wait(&fs->index_cond, &fs->seal_lock);
			continue;
		}
		fs->index_wake = false;
		pthread_mutex_unlock(&fs->seal_lock);
		index_merge_one(fs, false, own_nice);
		pthread_mutex_lock(&fs->seal_lock);
	}
	pthread_mutex_unlock(&fs->seal_lock);
	return NULL;
}

void fs_seal_drop_staging(Fs *fs, uint32_t tier, uint64_t ino) {
	FsReapItem *item = NULL;

	/* A place in the queue first: past FS_REAP_QUEUE_MAX the seal deletes its own. */
	pthread_mutex_lock(&fs->seal_lock);
	bool room = fs->reap_thread_started && fs->n_reap < FS_REAP_QUEUE_MAX;
	if (room)
		fs->n_reap++;
	pthread_mutex_unlock(&fs->seal_lock);
	if (room) {
		item = calloc(1, sizeof(FsReapItem));
		if (!item || fs_staging_retire(fs, tier, ino, item->name) < 0) {
			free(item);
			item = NULL;
			pthread_mutex_lock(&fs->seal_lock);
			fs->n_reap--;
			pthread_mutex_unlock(&fs->seal_lock);
		}
	}
	if (!item) {
		(void) fs_staging_unlink(fs, tier, ino);
		return;
	}
	item->tier = tier;
	pthread_mutex_lock(&fs->seal_lock);
	*fs->reap_tail = item;
	fs->reap_tail = &item->next;
	pthread_cond_signal(&fs->reap_cond);
	pthread_mutex_unlock(&fs->seal_lock);
}

/*
 * Deletes the retired staging files of sealed files, oldest first.  On a
 * filesystem mounted -o discard a deletion waits for the discard of the
 * file's blocks, 0.05-0.4 s a phase of bench-dedup on this project's test
 * machine (bench/README.md, "Sealing, eleventh pass"): here and not in
 * fs_data_seal(), the seal worker goes on with the next file (and the
 * file's readers get its data_lock back) meanwhile.  A file's space is free
 * once its retired name is gone, as before once its name was.  Ends when
 * the seal workers are gone and nothing is left.
 */
static void *reap_main(void *userdata) {
	Fs *fs = userdata;

	lower_priority();
	pthread_mutex_lock(&fs->seal_lock);
	for (;;) {
		FsReapItem *item = fs->reap_queue;
		if (!item) {
			if (fs->reap_stop)
				break;
			pthread_cond_wait(&fs->reap_cond, &fs->seal_lock);
			continue;
		}
		fs->reap_queue = item->next;
		if (!fs->reap_queue)
			fs->reap_tail = &fs->reap_queue;
		pthread_mutex_unlock(&fs->seal_lock);
		int r = fs_staging_reap(fs, item->tier, item->name);
		if (r < 0)
			log_warning_errno(r, "Failed to delete the staging file %s of a sealed file (the next mount deletes it): %m",
					  item->name);
		free(item);
		pthread_mutex_lock(&fs->seal_lock);
		/* Counted until deleted: its space is not free before. */
		fs->n_reap--;
	}
	pthread_mutex_unlock(&fs->seal_lock);
	return NULL;
}

/*
 * Under seal_lock: a file whose seal failed, or was put off for want of
 * room (-EAGAIN), goes back in the queue, unless a close queued it again
 * meanwhile; nothing else would try it before the next mount.  A failure
 * waits longer each time (a tier that stays broken is not hammered), a
 * wait for room the same short time.
 */
static void seal_retry(Fs *fs, FsSealItem *item, int r) {
	for (FsSealItem *p = fs->seal_queue; p; p = p->next)
		if (p->ino == item->ino) {
			free(item);
			return;
		}
	item->waits_for_room = r == -EAGAIN;
	int64_t wait_s = item->waits_for_room ? FS_SEAL_ROOM_RETRY_S
					      : MIN(FS_SEAL_RETRY_S << MIN(item->failures, 6u), FS_SEAL_RETRY_MAX_S);
	if (!item->waits_for_room)
		item->failures++;
	item->due_ns = clock_ns(CLOCK_MONOTONIC) + MAX(wait_s, (int64_t) fs->seal_delay_s) * 1000000000;
	queue_append(fs, item);
}

static void *worker_main(void *userdata) {
	FsSealWorker *me = userdata;
	Fs *fs = me->fs;
	_cleanup_free_ void *buf = malloc(FS_SEAL_READ_SIZE);
	bool sealed = false; /* since the last checkpoint */

	lower_priority();
	pthread_mutex_lock(&fs->seal_lock);
	while (!fs->seal_stop) {
		int64_t now = clock_ns(CLOCK_MONOTONIC), wake = INT64_MAX;
		FsSealItem **due = NULL;
		for (FsSealItem **p = &fs->seal_queue; *p; p = &(*p)->next) {
			if (being_sealed(fs, (*p)->ino))
				continue; /* its worker wakes us when done */
			if ((*p)->due_ns <= now) {
				due = p;
				break;
			}
			if ((*p)->due_ns < wake)
				wake = (*p)->due_ns;
		}
		if (due) {
			FsSealItem *item = *due;
			*due = item->next;
			uint64_t ino = item->ino;
			fs->sealing[me->index] = ino;
			pthread_mutex_unlock(&fs->seal_lock);

			/*
			 * Open files are sealed too: readers switch to the recipe
			 * under the data lock, and a writer that changes the bytes
			 * meanwhile makes the seal give up (or one that did since
			 * the file was queued makes it wait); its last close queues
			 * the file again.
			 */
			int r = fs_data_seal(fs, ino);
			if (r == -EAGAIN)
				log_debug("inode %llu waits for room on the hot tier's filesystem to be sealed",
					  (unsigned long long) ino);
			else if (r == -ENOENT)
				log_debug("inode %llu was deleted before it was sealed", (unsigned long long) ino);
			else if (r < 0 && item->failures == 0)
				log_warning_errno(r, "Failed to seal inode %llu (it stays raw, and is tried again): %m",
						  (unsigned long long) ino);
			else if (r < 0)
				log_debug_errno(r, "Failed to seal inode %llu again (%u times): %m", (unsigned long long) ino,
						item->failures + 1);
			else {
				/* The policy moves only sealed files: one that needs space can start now, not at its next pass. */
				fs_policy_check_space(fs);
			}
			pthread_mutex_lock(&fs->seal_lock);
			fs->sealing[me->index] = 0;
			/* Unmounting, or deleted: nothing to try again. */
			if (r < 0 && r != -ECANCELED && r != -ENOENT)
				seal_retry(fs, item, r);
			else
				free(item);
			sealed = true;
			if (r >= 0) {
				fs->index_wake = true;
				pthread_cond_signal(&fs->index_cond);
			}
			pthread_cond_broadcast(&fs->seal_cond);
			continue;
		}
		if (buf && fs_stream_work(fs, buf))
			continue;
		if (sealed && !fs->seal_queue) {
			/* Out of work: the catalog's WAL goes back into the database, so it takes its real size on disk. */
			sealed = false;
			pthread_mutex_unlock(&fs->seal_lock);
			int r = catalog_checkpoint(fs->catalog);
			if (r < 0 && r != -EBUSY)
				log_warning_errno(r, "Catalog checkpoint failed: %m");
			pthread_mutex_lock(&fs->seal_lock);
			continue;
		}
		if (wake == INT64_MAX)
			pthread_cond_wait(&fs->seal_cond, &fs->seal_lock);
		else {
			struct timespec until = deadline_after(wake - now);
			pthread_cond_timedwait(&fs->seal_cond, &fs->seal_lock, &until);
		}
	}
	pthread_mutex_unlock(&fs->seal_lock);
	return NULL;
}

typedef struct RekeyPace {
	Fs *fs;
	FsThrottleUnit unit;
} RekeyPace;

/* After each container a rekey moved: the same share of the disks as the collector's compaction. */
static int rekey_progress(uint64_t done, uint64_t total, void *userdata) {
	RekeyPace *p = userdata;
	atomic_store(&p->fs->rekey_done, done);
	atomic_store(&p->fs->rekey_total, total);
	if (done > 0)
		fs_throttle_pace(&p->fs->throttle, FS_THROTTLE_REKEY, &p->unit);
	return atomic_load(&p->fs->seal_stopping) ? -ECANCELED : 0;
}

/*
 * One pass over the tiers a rekey was asked for: each one's containers
 * under older keys moved under the newest, its description written again
 * (under the newest key too) once nothing is left, and the request then
 * cleared.  A pass that leaves some (containers being written to, or
 * failing their checks, or a stop) keeps the request for the next beat or
 * the next mount.  Each tier's pass stops after FS_REKEY_PASS_BYTES, so
 * that the collector and the shared tiers' leases get their turns during a
 * long rekey; returns whether one stopped so (the thread then runs another
 * pass at once).
 */
static bool run_rekeys(Fs *fs) {
	bool more = false;
	for (uint32_t n = 0; n < tier_set_count(fs->tiers) && !atomic_load(&fs->seal_stopping); n++) {
		int r = catalog_rekey_is_requested(fs->catalog, n);
		if (r <= 0) {
			if (r < 0)
				log_warning_errno(r, "Cannot read the rekey requests: %m");
			continue;
		}
		DedupStore *store = tier_set_store(fs->tiers, n);
		if (!store)
			continue; /* not reachable now: fs_tiers_retry() may open it */
		RekeyPace pace = { .fs = fs };
		uint64_t rewritten = 0, skipped = 0, left = 0;
		fs_throttle_begin(&pace.unit);
		atomic_store(&fs->rekey_done, 0);
		atomic_store(&fs->rekey_total, 0);
		atomic_store(&fs->rekey_tier, n + 1);
		r = dedup_store_rekey(store, FS_REKEY_PASS_BYTES, rekey_progress, &pace, &rewritten, &skipped, &left);
		atomic_store(&fs->rekey_tier, 0);
		atomic_fetch_add(&fs->rekey_rewritten, rewritten);
		const char *name = tier_set_config(fs->tiers, n)->name;
		if (r == -ECANCELED) {
			log_info("rekey of tier %u (%s) stopped with %llu containers rewritten, %llu left; it resumes at the "
				 "next mount",
				 (unsigned) n, name, (unsigned long long) rewritten, (unsigned long long) left);
			return false;
		}
		if (r == 1) {
			more = true;
			continue;
		}
		if (r < 0)
			log_warning_errno(r, "Rekey of tier %u (%s) failed after %llu containers (it is tried again): %m",
					  (unsigned) n, name, (unsigned long long) rewritten);
		if (skipped > 0)
			log_warning("rekey of tier %u (%s) left %llu containers whose chunks fail their checks: run tierctl "
				    "scrub --tier %u",
				    (unsigned) n, name, (unsigned long long) skipped, (unsigned) n);
		if (r < 0 || left > 0)
			continue;
		/* The description too, once nothing of the tier needs an older key: rewritten under the newest. */
		if (n > 0) {
			tier_set_describe_again(fs->tiers, n);
			r = fs_tier_describe(fs, n);
			if (r < 0) {
				log_warning_errno(r, "Rekey of tier %u (%s): cannot write its description again (tried "
						     "again): %m",
						  (unsigned) n, name);
				continue;
			}
		}
		r = catalog_rekey_set(fs->catalog, n, false);
		if (r < 0) {
			log_warning_errno(r, "Rekey of tier %u (%s) is done, but cannot be recorded so: %m", (unsigned) n,
					  name);
			continue;
		}
		log_info("rekey of tier %u (%s) finished: %llu containers rewritten, nothing on it is sealed under an "
			 "older key",
			 (unsigned) n, name, (unsigned long long) rewritten);
	}
	return more;
}

int fs_rekey_request(Fs *fs, uint32_t n) {
	if (n >= tier_set_count(fs->tiers))
		return -ENOENT;
	if (!fs->keys)
		return -ENOKEY;
	if (!tier_set_store(fs->tiers, n))
		return -ENXIO;
	/* A rekey replaces containers, which other hosts of a shared tier may reference (docs/SHARED.md). */
	if (tier_set_config(fs->tiers, n)->shared)
		return -EOPNOTSUPP;
	int r = catalog_rekey_set(fs->catalog, n, true);
	if (r < 0)
		return r;
	log_info("rekey of tier %u (%s) asked for: what is sealed there under older keys is sealed again under key %s",
		 (unsigned) n, tier_set_config(fs->tiers, n)->name,
		 dedup_key_id_to_string(dedup_keyring_newest(fs->keys)->key_id, (char[DEDUP_KEY_ID_STRING_MAX]) {}));
	pthread_mutex_lock(&fs->seal_lock);
	fs->rekey_wake = true;
	pthread_cond_broadcast(&fs->gc_cond);
	pthread_mutex_unlock(&fs->seal_lock);
	return 0;
}

void fs_rekey_status_get(Fs *fs, FsRekeyStatus *ret) {
	unsigned t = atomic_load(&fs->rekey_tier);
	*ret = (FsRekeyStatus) {
		.running = t > 0,
		.tier = t > 0 ? t - 1 : 0,
		.done = atomic_load(&fs->rekey_done),
		.total = atomic_load(&fs->rekey_total),
		.rewritten = atomic_load(&fs->rekey_rewritten),
	};
}

static void *gc_main(void *userdata) {
	Fs *fs = userdata;
	int64_t next_gc = clock_ns(CLOCK_MONOTONIC) + (int64_t) fs->gc_interval_s * 1000000000;
	/* Tiers that could not be opened at start: this thread tries them again (fs_tiers_retry()). */
	int64_t next_retry = clock_ns(CLOCK_MONOTONIC) + (int64_t) TIER_RETRY_S * 1000000000;
	bool retrying = true;

	lower_priority();
	pthread_mutex_lock(&fs->seal_lock);
	/* Rekeys asked for before a restart resume now. */
	fs->rekey_wake = true;
	while (!fs->seal_stop) {
		int64_t now = clock_ns(CLOCK_MONOTONIC);
		if (retrying && now >= next_retry) {
			pthread_mutex_unlock(&fs->seal_lock);
			retrying = fs_tiers_retry(fs);
			pthread_mutex_lock(&fs->seal_lock);
			next_retry = clock_ns(CLOCK_MONOTONIC) + (int64_t) TIER_RETRY_S * 1000000000;
			continue;
		}
		/* A rekey asked for, or one cut short by its pass's bound; not while a collection is due. */
		if (fs->rekey_wake && now < next_gc) {
			fs->rekey_wake = false;
			pthread_mutex_unlock(&fs->seal_lock);
			bool more = run_rekeys(fs);
			pthread_mutex_lock(&fs->seal_lock);
			fs->rekey_wake |= more;
			continue;
		}
		if (now < next_gc) {
			int64_t wake = retrying ? MIN(next_gc, next_retry) : next_gc;
			struct timespec until = deadline_after(wake - now);
			pthread_cond_timedwait(&fs->gc_cond, &fs->seal_lock, &until);
			continue;
		}
		/*
		 * The collector deletes chunks only while no writer is alive: no
		 * stream starts now, and those that would keep it waiting longer
		 * than GC_STREAM_PATIENCE_S end (their files are sealed after close).
		 */
		atomic_store(&fs->gc_waiting, true);
		int64_t give_up = clock_ns(CLOCK_MONOTONIC) + (int64_t) GC_STREAM_PATIENCE_S * 1000000000;
		while (fs->n_streams > 0 && !fs->seal_stop && clock_ns(CLOCK_MONOTONIC) < give_up) {
			struct timespec until = deadline_after(give_up - clock_ns(CLOCK_MONOTONIC));
			pthread_cond_timedwait(&fs->gc_cond, &fs->seal_lock, &until);
		}
		if (fs->seal_stop) {
			atomic_store(&fs->gc_waiting, false);
			break;
		}
		unsigned ended = fs_stream_end_all(fs);
		if (ended > 0)
			log_info("ended %u streams that kept the collector waiting for %ds; their files are sealed after close",
				 ended, GC_STREAM_PATIENCE_S);
		pthread_mutex_unlock(&fs->seal_lock);
		run_gc(fs);
		atomic_store(&fs->gc_waiting, false);
		pthread_mutex_lock(&fs->seal_lock);
		/* What a rekey left (containers being written to, a failure) is tried again at every beat. */
		fs->rekey_wake = true;
		next_gc = clock_ns(CLOCK_MONOTONIC) + (int64_t) fs->gc_interval_s * 1000000000;
	}
	pthread_mutex_unlock(&fs->seal_lock);
	return NULL;
}

/*
 * Shared tiers: this host's leases, renewed every sixth of the lease (at
 * most every TIER_RETRY_S) on a thread of their own, so that no collection,
 * however long, and no hung filer call of another kind delays a renewal
 * (docs/SHARED.md).  Not lowered in priority: a lease that runs out lets
 * another daemon take the name.
 */
static void *lease_main(void *userdata) {
	Fs *fs = userdata;
	int64_t beat_ns = (int64_t) tier_set_renew_interval(fs->tiers) * 1000000000;
	int64_t next = clock_ns(CLOCK_MONOTONIC) + beat_ns;

	pthread_mutex_lock(&fs->seal_lock);
	while (!fs->seal_stop) {
		int64_t now = clock_ns(CLOCK_MONOTONIC);
		if (now < next) {
			struct timespec until = deadline_after(next - now);
			pthread_cond_timedwait(&fs->lease_cond, &fs->seal_lock, &until);
			continue;
		}
		pthread_mutex_unlock(&fs->seal_lock);
		fs_tiers_renew(fs);
		pthread_mutex_lock(&fs->seal_lock);
		next = clock_ns(CLOCK_MONOTONIC) + beat_ns;
	}
	pthread_mutex_unlock(&fs->seal_lock);
	return NULL;
}

int fs_sealer_start(Fs *fs) {
	pthread_condattr_t attr;
	int r;

	pthread_mutex_init(&fs->seal_lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&fs->seal_cond, &attr);
	pthread_cond_init(&fs->gc_cond, &attr);
	pthread_cond_init(&fs->lease_cond, &attr);
	pthread_cond_init(&fs->index_cond, &attr);
	pthread_condattr_destroy(&attr);
	pthread_cond_init(&fs->reap_cond, NULL);
	fs->reap_tail = &fs->reap_queue;
	pthread_cond_init(&fs->stream_idle_cond, NULL);
	fs->seal_started = true;

	/* Before the workers, which hand it their staging files once it runs (fs_seal_drop_staging()). */
	r = -pthread_create(&fs->reap_thread, NULL, reap_main, fs);
	if (r < 0)
		return r;
	pthread_mutex_lock(&fs->seal_lock);
	fs->reap_thread_started = true;
	pthread_mutex_unlock(&fs->seal_lock);
	unsigned n = fs->seal_workers ?: 1;
	fs->seal_worker = calloc(n, sizeof(FsSealWorker));
	fs->sealing = calloc(n, sizeof(uint64_t));
	if (!fs->seal_worker || !fs->sealing)
		return -ENOMEM;
	for (unsigned k = 0; k < n; k++) {
		fs->seal_worker[k] = (FsSealWorker) { .fs = fs, .index = k };
		r = -pthread_create(&fs->seal_worker[k].thread, NULL, worker_main, &fs->seal_worker[k]);
		if (r < 0)
			return r;
		/* Under the lock: the workers already running read it (being_sealed()). */
		pthread_mutex_lock(&fs->seal_lock);
		fs->n_seal_threads++;
		pthread_mutex_unlock(&fs->seal_lock);
	}
	r = -pthread_create(&fs->index_thread, NULL, index_main, fs);
	if (r < 0)
		return r;
	fs->index_thread_started = true;
	r = -pthread_create(&fs->gc_thread, NULL, gc_main, fs);
	if (r == 0)
		fs->gc_thread_started = true;
	if (r == 0 && tier_set_host(fs->tiers)) {
		r = -pthread_create(&fs->lease_thread, NULL, lease_main, fs);
		if (r == 0)
			fs->lease_thread_started = true;
	}
	return r;
}

void fs_sealer_stop(Fs *fs) {
	if (!fs->seal_started)
		return;
	atomic_store(&fs->seal_stopping, true);
	pthread_mutex_lock(&fs->seal_lock);
	fs->seal_stop = true;
	pthread_cond_broadcast(&fs->seal_cond);
	pthread_cond_broadcast(&fs->gc_cond);
	pthread_cond_broadcast(&fs->lease_cond);
	pthread_cond_broadcast(&fs->index_cond);
	pthread_mutex_unlock(&fs->seal_lock);
	if (fs->index_thread_started)
		pthread_join(fs->index_thread, NULL);
	fs->index_thread_started = false;
	if (fs->lease_thread_started)
		pthread_join(fs->lease_thread, NULL);
	fs->lease_thread_started = false;
	for (unsigned k = 0; k < fs->n_seal_threads; k++)
		pthread_join(fs->seal_worker[k].thread, NULL);
	/*
	 * The reaper deletes what is queued, then ends.  Its flag goes down with
	 * reap_stop, under the lock: a file sealed from now on (no caller can
	 * today: the workers are joined, tierctl's control server is gone)
	 * deletes its own staging file rather than queue it to nobody.
	 */
	pthread_mutex_lock(&fs->seal_lock);
	bool reaper_running = fs->reap_thread_started;
	fs->reap_thread_started = false;
	fs->reap_stop = true;
	pthread_cond_signal(&fs->reap_cond);
	pthread_mutex_unlock(&fs->seal_lock);
	if (reaper_running)
		pthread_join(fs->reap_thread, NULL);
	/* Before the collector is joined: it may be waiting for the streams' writers to end. */
	fs_stream_free_all(fs);
	if (fs->gc_thread_started)
		pthread_join(fs->gc_thread, NULL);
	fs->gc_thread_started = false;
	fs->n_seal_threads = 0;
	fs->seal_started = false;
	free(fs->seal_worker);
	free(fs->sealing);
	/* Files still queued stay raw; the next mount queues them again. */
	while (fs->seal_queue) {
		FsSealItem *next = fs->seal_queue->next;
		free(fs->seal_queue);
		fs->seal_queue = next;
	}
	pthread_cond_destroy(&fs->seal_cond);
	pthread_cond_destroy(&fs->gc_cond);
	pthread_cond_destroy(&fs->lease_cond);
	pthread_cond_destroy(&fs->index_cond);
	pthread_cond_destroy(&fs->stream_idle_cond);
	pthread_cond_destroy(&fs->reap_cond);
	pthread_mutex_destroy(&fs->seal_lock);
}

void fs_seal_status_get(Fs *fs, FsSealStatus *ret) {
	FsSealStatus st = {};
	int64_t now = clock_ns(CLOCK_MONOTONIC);
	pthread_mutex_lock(&fs->seal_lock);
	for (const FsSealItem *i = fs->seal_queue; i; i = i->next) {
		st.queue++;
		st.queue_bytes += i->bytes;
		st.queue_room += i->waits_for_room;
		if (i->due_ns <= now) {
			st.queue_due++;
			st.behind_s = MAX(st.behind_s, (uint64_t) ((now - i->due_ns) / 1000000000));
		}
	}
	st.streams = fs->n_streams;
	pthread_mutex_unlock(&fs->seal_lock);
	st.seals_streamed = atomic_load(&fs->seals_streamed);
	st.seals_whole = atomic_load(&fs->seals_whole);
	st.seals_split = atomic_load(&fs->seals_split);
	st.streamed_bytes = atomic_load(&fs->streamed_bytes);
	*ret = st;
}
