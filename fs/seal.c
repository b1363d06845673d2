/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * seal.c — the background worker: seals files once they have been closed
 * and quiet for seal_delay_s, and runs the chunk collector every
 * gc_interval_s.  One thread, so sealing never competes with itself for the
 * hot disk; the FUSE threads only queue work and never wait for it.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "common/log.h"
#include "fs/fs-internal.h"

static int64_t monotonic_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void fs_seal_schedule(Fs *fs, uint64_t ino) {
	int64_t due = monotonic_ns() + (int64_t) fs->seal_delay_s * 1000000000;
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
		item->next = NULL;
		FsSealItem **tail = &fs->seal_queue;
		while (*tail)
			tail = &(*tail)->next;
		*tail = item;
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
	/* The same quiet time as after a close: a restarted archiver comes first. */
	item->due_ns = monotonic_ns() + (int64_t) fs->seal_delay_s * 1000000000;
	/* Called before the worker starts: no lock contention, order does not matter. */
	item->next = fs->seal_queue;
	fs->seal_queue = item;
	return 0;
}

int fs_seal_schedule_pending(Fs *fs) {
	return catalog_files_foreach_state(fs->catalog, CATALOG_FILE_RAW, schedule_one, fs);
}

static void run_gc(Fs *fs) {
	DedupGcOptions o = DEDUP_GC_OPTIONS_DEFAULT;
	DedupGcStats st = {};
	int r = fs_tiers_gc(fs, &o, &st);
	if (r < 0)
		log_warning_errno(r, "Chunk collection failed: %m");
	else if (st.chunks_deleted || st.containers_deleted)
		log_info("collected %llu dead chunks, %llu containers",
			 (unsigned long long) st.chunks_deleted, (unsigned long long) st.containers_deleted);
	r = catalog_checkpoint(fs->catalog);
	if (r < 0)
		log_warning_errno(r, "Catalog checkpoint failed: %m");
}

static void *sealer_main(void *userdata) {
	Fs *fs = userdata;
	int64_t next_gc = monotonic_ns() + (int64_t) fs->gc_interval_s * 1000000000;

	pthread_mutex_lock(&fs->seal_lock);
	while (!fs->seal_stop) {
		int64_t now = monotonic_ns(), wake = next_gc;
		FsSealItem **due = NULL;
		for (FsSealItem **p = &fs->seal_queue; *p; p = &(*p)->next) {
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
			pthread_mutex_unlock(&fs->seal_lock);

			uint64_t ino = item->ino;
			free(item);
			/*
			 * Open files are sealed too: readers switch to the recipe
			 * under the data lock, and a writer that changes the bytes
			 * meanwhile makes the seal give up; its next close queues
			 * the file again.
			 */
			int r = fs_data_seal(fs, ino);
			if (r < 0)
				log_warning_errno(r, "Failed to seal inode %llu (it stays raw): %m",
						  (unsigned long long) ino);
			pthread_mutex_lock(&fs->seal_lock);
			continue;
		}
		if (now >= next_gc) {
			pthread_mutex_unlock(&fs->seal_lock);
			run_gc(fs);
			pthread_mutex_lock(&fs->seal_lock);
			next_gc = monotonic_ns() + (int64_t) fs->gc_interval_s * 1000000000;
			continue;
		}
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		int64_t wait_ns = wake - now;
		until.tv_sec += wait_ns / 1000000000;
		until.tv_nsec += wait_ns % 1000000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&fs->seal_cond, &fs->seal_lock, &until);
	}
	pthread_mutex_unlock(&fs->seal_lock);
	return NULL;
}

int fs_sealer_start(Fs *fs) {
	pthread_condattr_t attr;

	pthread_mutex_init(&fs->seal_lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&fs->seal_cond, &attr);
	pthread_condattr_destroy(&attr);
	int r = -pthread_create(&fs->seal_thread, NULL, sealer_main, fs);
	if (r == 0)
		fs->seal_thread_started = true;
	return r;
}

void fs_sealer_stop(Fs *fs) {
	if (!fs->seal_thread_started)
		return;
	atomic_store(&fs->seal_stopping, true);
	pthread_mutex_lock(&fs->seal_lock);
	fs->seal_stop = true;
	pthread_cond_signal(&fs->seal_cond);
	pthread_mutex_unlock(&fs->seal_lock);
	pthread_join(fs->seal_thread, NULL);
	fs->seal_thread_started = false;
	/* Files still queued stay raw; the next mount queues them again. */
	while (fs->seal_queue) {
		FsSealItem *next = fs->seal_queue->next;
		free(fs->seal_queue);
		fs->seal_queue = next;
	}
	pthread_cond_destroy(&fs->seal_cond);
	pthread_mutex_destroy(&fs->seal_lock);
}
