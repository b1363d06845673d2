/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * stream.c — chunking a file while it is written front to back, so that
 * its seal after close has only the tail left to chunk.
 *
 * The FUSE thread that writes only records the run of appends (FsInode
 * run_*, in ops.c) and calls fs_stream_written(), which starts, wakes or
 * ends the inode's stream: it never reads, hashes or compresses.  The seal
 * workers (seal.c) do that in fs_stream_work(): they read what the run has
 * appended back from the staging file (from the page cache, mostly) and
 * feed it to the stream's DedupWriter, a few MiB at a time per turn.  The
 * seal (fs_data_seal) takes the stream, feeds the tail and commits.
 *
 * Invariants:
 *  1. A stream chunks one run: bytes [0, fed) were read from staging after
 *     the appends that wrote them returned, and every later change of them
 *     (a write that is not an append, a truncate, a fallocate) ends the run.
 *     So while its run lasts, what a stream fed is the file's head.  The
 *     seal checks that after reading data_gen (fs_stream_take_writer), and
 *     its usual data_gen check at the commit covers the rest.
 *  2. Nothing a stream does is committed before the seal: its chunks are
 *     registered with refs 0 as the writer goes, so a crash, a run that
 *     ends or a stream dropped for any reason leaves garbage for the
 *     collector, never a reference.
 *  3. A stream pins its inode and holds a writer, buffers of 1 to 5 MiB
 *     and up to 3 MiB of recipe entries (the rest is spooled to a file,
 *     fs_data_writer_new()); at most Fs.stream_max streams
 *     are alive.  A writer alive holds off the collector's deletion of dead
 *     chunks: while the collector waits, no stream starts, and streams that
 *     keep it waiting too long are ended (fs_stream_end_all()).
 *
 * States (all transitions under seal_lock):
 *
 *   fs_stream_written(): a run starts   --> attached (i->stream), idle
 *   fs_stream_written(): appended       --> queued
 *   fs_stream_work(): picks it          --> busy  --> idle, or queued again if more is there
 *   the run ends, or the writer fails   --> detached and queued --> freed by fs_stream_work()
 *   fs_stream_take() by the seal        --> detached, owned by the seal --> fs_stream_free()
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macros.h"
#include "fs/fs-internal.h"

/* Bytes a worker chunks of one stream before it gives the others a turn. */
#define STREAM_TURN_BYTES (UINT64_C(8) << 20)

struct FsStream {
	FsInode *inode;        /* pinned */
	uint32_t epoch;        /* of the run it chunks */
	TierFileClass file_class;
	/* Used by the one worker that has it busy, or by its taker. */
	DedupWriter *w;        /* made by the first worker to feed it */
	uint32_t tier;         /* of w's store */
	int fd;                /* a read-only staging descriptor of its own */
	uint64_t fed;          /* bytes [0, fed) fed to w */
	atomic_uint_fast64_t chunked; /* fed, for readers that hold seal_lock */
	bool failed;           /* the writer could not be made or failed: nothing more to do */

	bool attached;         /* protected by seal_lock: inode->stream == this */
	bool taken;            /* protected by seal_lock: owned by a seal now */
	bool queued;           /* protected by seal_lock */
	bool busy;             /* protected by seal_lock: a worker uses w, fd and fed */
	FsStream *queue_next;  /* protected by seal_lock */
	FsStream *all_next;    /* protected by seal_lock */
};

/* Whether s's run is still on, and how far it got; takes the inode's lock. */
static bool run_get(FsStream *s, uint64_t *ret_end) {
	FsInode *i = s->inode;
	pthread_mutex_lock(&i->lock);
	bool ok = i->run_ok && i->run_epoch == s->epoch;
	*ret_end = i->run_end;
	pthread_mutex_unlock(&i->lock);
	return ok;
}

static void queue_push(Fs *fs, FsStream *s) {
	FsStream **p = &fs->stream_queue;
	if (s->attached)
		atomic_store(&s->inode->stream_idle, false);
	while (*p)
		p = &(*p)->queue_next;
	s->queue_next = NULL;
	*p = s;
	s->queued = true;
	pthread_cond_signal(&fs->seal_cond);
}

static void queue_remove(Fs *fs, FsStream *s) {
	for (FsStream **p = &fs->stream_queue; *p; p = &(*p)->queue_next)
		if (*p == s) {
			*p = s->queue_next;
			break;
		}
	s->queued = false;
}

static void all_remove(Fs *fs, FsStream *s) {
	for (FsStream **p = &fs->streams; *p; p = &(*p)->all_next)
		if (*p == s) {
			*p = s->all_next;
			return;
		}
}

/* seal_lock held: s no longer serves its inode; a worker frees it unless someone took it. */
static void detach(Fs *fs, FsStream *s) {
	if (!s->attached)
		return;
	s->inode->stream = NULL;
	atomic_store(&s->inode->stream_idle, false);
	s->attached = false;
	if (--fs->n_streams == 0)
		pthread_cond_broadcast(&fs->gc_cond); /* the collector may be waiting for that */
	if (!s->busy && !s->queued)
		queue_push(fs, s);
}

/* No lock held, s reachable by nobody else. */
static void stream_free(Fs *fs, FsStream *s) {
	dedup_writer_free(s->w);
	if (s->fd >= 0)
		close(s->fd);
	fs_inode_unpin(fs, s->inode);
	free(s);
}

void fs_stream_written(Fs *fs, FsInode *i, TierFileClass c, FsRunChange change) {
	FsStream *fresh = NULL;

	/* A stream that is queued or being fed is looked at again by its worker: nothing to do. */
	if (change == FS_RUN_NONE || (change == FS_RUN_APPENDED && !atomic_exchange(&i->stream_idle, false)))
		return;
	if (change == FS_RUN_STARTED && fs->seal_stream) {
		/* Allocated and pinned outside seal_lock (table_lock ranks before it). */
		fresh = calloc(1, sizeof(*fresh));
		if (fresh) {
			fs_inode_pin_held(i);
			fresh->inode = i;
			fresh->fd = -1;
			fresh->file_class = c;
		}
	}

	pthread_mutex_lock(&fs->seal_lock);
	FsStream *s = i->stream;
	pthread_mutex_lock(&i->lock);
	bool ok = i->run_ok;
	uint32_t epoch = i->run_epoch;
	pthread_mutex_unlock(&i->lock);
	if (s && (!ok || s->epoch != epoch)) {
		detach(fs, s); /* its run is over: the file will be sealed whole after close */
		s = NULL;
	}
	if (!s && fresh && ok && fs->n_streams < fs->stream_max && !fs->seal_stop &&
	    !atomic_load(&fs->gc_waiting)) {
		s = TAKE_PTR(fresh);
		s->epoch = epoch;
		s->attached = true;
		s->all_next = fs->streams;
		fs->streams = s;
		i->stream = s;
		fs->n_streams++;
	}
	if (s && !s->queued && !s->busy)
		queue_push(fs, s);
	pthread_mutex_unlock(&fs->seal_lock);

	if (fresh) {
		/* No room for a stream now: this file is sealed whole after close. */
		fs_inode_unpin(fs, i);
		free(fresh);
	}
}

/* A busy stream, no lock held: feeds up to STREAM_TURN_BYTES of what its run appended. */
static void feed_turn(Fs *fs, FsStream *s, void *buf) {
	uint64_t budget = STREAM_TURN_BYTES, end;
	int r;

	if (!s->w) {
		/*
		 * Read without the data lock: a spill that moves the staging
		 * file meanwhile ends the run, so what this descriptor reads is
		 * never taken for the file's bytes.  The chunks go to the tier
		 * of the bytes, as a seal's do (seal_ingest()).
		 */
		s->tier = atomic_load(&s->inode->staging_tier);
		s->fd = fs_staging_open_ro(fs, s->tier, s->inode->ino);
		r = s->fd < 0 ? s->fd : fs_data_writer_new(fs, s->tier, s->tier, s->file_class, &s->w);
		if (r < 0) {
			log_debug_errno(r, "Cannot stream inode %llu (it is sealed after close): %m",
					(unsigned long long) s->inode->ino);
			s->failed = true;
			return;
		}
	}
	while (budget > 0 && run_get(s, &end) && s->fed < end) {
		uint64_t to = MIN(end, s->fed + budget), from = s->fed;
		/*
		 * Its chunks take room as the file's raw bytes do, and stop where
		 * they do (above the tier's floor, spill.c); the file is then
		 * sealed after close, on a tier with room for it.
		 */
		if (!fs_spill_has_room(fs, s->tier, to - from)) {
			s->failed = true;
			return;
		}
		r = fs_data_feed(fs, s->fd, s->w, buf, from, to, fs_class_split(fs, s->file_class), &s->fed);
		budget -= s->fed - from;
		atomic_store(&s->chunked, s->fed);
		if (r < 0) {
			if (r != -ECANCELED)
				log_debug_errno(r, "Streaming inode %llu failed (it is sealed after close): %m",
						(unsigned long long) s->inode->ino);
			s->failed = true;
			return;
		}
		if (s->fed < to)
			return; /* shorter than its run: only a truncate does that, and it ends the run */
	}
}

bool fs_stream_work(Fs *fs, void *buf) {
	FsStream *s = fs->stream_queue;
	uint64_t end;

	if (!s)
		return false;
	queue_remove(fs, s);
	if (!s->attached) {
		all_remove(fs, s);
		pthread_mutex_unlock(&fs->seal_lock);
		stream_free(fs, s);
		pthread_mutex_lock(&fs->seal_lock);
		return true;
	}

	s->busy = true;
	pthread_mutex_unlock(&fs->seal_lock);
	feed_turn(fs, s, buf);
	pthread_mutex_lock(&fs->seal_lock);
	s->busy = false;
	pthread_cond_broadcast(&fs->stream_idle_cond);

	if (s->taken)
		return true; /* the seal owns it now */
	if (!s->attached) {
		queue_push(fs, s); /* ended while we fed it: to be freed */
		return true;
	}
	/*
	 * Idle first, then look at the run: a writer that appended after the
	 * look finds it idle and queues it; one that appended before, and did
	 * not queue it because it was busy, is seen here.
	 */
	atomic_store(&s->inode->stream_idle, true);
	bool ok = run_get(s, &end);
	if (!ok || s->failed)
		detach(fs, s);
	else if (s->fed < end && atomic_exchange(&s->inode->stream_idle, false))
		queue_push(fs, s);
	return true;
}

FsStream *fs_stream_take(Fs *fs, FsInode *i) {
	pthread_mutex_lock(&fs->seal_lock);
	FsStream *s = i->stream;
	if (s) {
		detach(fs, s);
		s->taken = true;
		if (s->queued)
			queue_remove(fs, s);
		while (s->busy)
			pthread_cond_wait(&fs->stream_idle_cond, &fs->seal_lock);
		all_remove(fs, s);
	}
	pthread_mutex_unlock(&fs->seal_lock);
	return s;
}

bool fs_stream_take_writer(FsStream *s, DedupWriter **ret_w, uint32_t *ret_tier, int *ret_fd, uint64_t *ret_fed) {
	uint64_t end;

	if (!s->w || s->failed || !run_get(s, &end) || s->fed > end)
		return false;
	*ret_w = TAKE_PTR(s->w);
	*ret_tier = s->tier;
	*ret_fd = TAKE_FD(s->fd);
	*ret_fed = s->fed;
	return true;
}

FsStream *fs_stream_free(Fs *fs, FsStream *s) {
	if (s)
		stream_free(fs, s);
	return NULL;
}

bool fs_stream_progress(Fs *fs, FsInode *i, uint64_t *ret_chunked) {
	pthread_mutex_lock(&fs->seal_lock);
	FsStream *s = i->stream;
	if (s)
		*ret_chunked = atomic_load(&s->chunked);
	pthread_mutex_unlock(&fs->seal_lock);
	return s != NULL;
}

unsigned fs_stream_end_all(Fs *fs) {
	unsigned n = 0;
	for (FsStream *s = fs->streams; s; s = s->all_next)
		if (s->attached) {
			detach(fs, s);
			n++;
		}
	return n;
}

void fs_stream_free_all(Fs *fs) {
	pthread_mutex_lock(&fs->seal_lock);
	FsStream *all = TAKE_PTR(fs->streams);
	for (FsStream *s = all; s; s = s->all_next)
		detach(fs, s);
	fs->stream_queue = NULL;
	pthread_mutex_unlock(&fs->seal_lock);
	/* Uncommitted: their frames are garbage for the next collection (invariant 2). */
	while (all) {
		FsStream *next = all->all_next;
		stream_free(fs, all);
		all = next;
	}
}
