/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * readahead.c — the restore pipeline for sealed files.
 *
 * A restore reads a sealed file front to back, and every byte of it has to
 * be decompressed (and checked) before it can be copied into a reply.
 * Done on the FUSE thread that answers the read, that serializes the
 * decompression behind each request's round trip and uses one core per
 * request.  Here, once a file is read sequentially, the blocks ahead of its
 * reader are queued for worker threads, which decompress them through
 * dedup_file_read() into blocks of a pool shared by all files; the FUSE
 * thread then finds its bytes in a block and replies straight from it
 * (fuse_reply_iov): it copies, it does not decompress.  With the kernel's
 * read-ahead window raised (fs/main.c, read_ahead_kb), several requests of
 * one file arrive at once and the workers keep both cores busy.
 *
 * A block's life (all under FsReadahead.lock):
 *
 *   FREE --schedule()--> QUEUED --worker or a waiting reader--> FILLING
 *   FILLING --fill done, same generation--> READY (or FAILED)
 *   FILLING --fill done, window invalidated meanwhile--> FREE
 *   READY/FAILED --behind the reader, evicted, invalidated, forgotten--> FREE
 *   QUEUED --invalidated, stopped--> FREE
 *
 * Invariants:
 *  1. A reply only ever holds bytes decompressed by dedup_file_read() for
 *     the window's current generation: fs_readahead_invalidate() (under the
 *     inode's data_lock held exclusively, before its bytes can change)
 *     bumps the generation, frees what is ready or queued, and a fill that
 *     ends for an older generation frees its block instead of publishing
 *     it.  Readers hold data_lock shared, so none is in the middle of a
 *     reply meanwhile.
 *  2. A block's bytes are written only while it is FILLING, by the one
 *     thread filling it, and read only while it is READY with a reference
 *     (refs) taken under the lock; a block with refs is never freed or
 *     reused.
 *  3. A queued or filling block pins its inode (fs_inode_pin_held()), so
 *     the window it points at lives until the fill is over; the pin is let
 *     go outside the lock.
 *  4. A failed fill is never an answer by itself: the reader reads the same
 *     bytes directly, and only that read's error reaches the reply.  So a
 *     fill that raced a move between tiers (it read the old tier) costs a
 *     retry, not an error, while a tier that is really gone is an EIO.
 *  5. FsReadahead.lock is a leaf: no other lock is taken and no catalog or
 *     store call is made while it is held.  Workers take no inode lock at
 *     all, so a FUSE thread holding data_lock may wait for a block.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/macros.h"
#include "fs/fs-internal.h"
#include "fs/readahead.h"

typedef enum RaState {
	RA_FREE,
	RA_QUEUED,
	RA_FILLING,
	RA_READY,
	RA_FAILED,
} RaState;

struct FsRaBlock {
	FsReadWindow *w;     /* protected by lock: the owner, NULL when FREE */
	uint64_t index;      /* protected by lock: block number in w's file */
	uint64_t gen;        /* protected by lock: w->gen when queued */
	RaState state;       /* protected by lock */
	unsigned refs;       /* protected by lock: replies using data */
	bool read;           /* protected by lock: handed out at least once */
	uint64_t used;       /* protected by lock: FsReadahead.tick of its last use */
	uint64_t file_size;  /* protected by lock: the file's, when queued (under its data_lock) */
	uint32_t tier;       /* protected by lock: likewise */
	size_t len;          /* protected by lock: valid bytes once READY */
	FsRaBlock *next;     /* protected by lock: the queue */
	uint8_t *data;       /* FS_RA_BLOCK bytes of FsReadahead.arena; see invariant 2 */
	/*
	 * This slot left FILLING.  One per slot, not one for the pool: the
	 * readers waiting are one per request in flight, each for its own
	 * block, and a wake-up of all of them at every fill sent all but one
	 * back to sleep after a fight for the lock (bench/README.md, phase 5).
	 */
	pthread_cond_t filled;
};

struct FsReadWindow {
	FsInode *inode;
	uint64_t gen;        /* protected by lock */
	uint64_t next;       /* protected by lock: end of the furthest read so far */
	bool sequential;     /* protected by lock */
};

struct FsReadahead {
	Fs *fs;
	unsigned n_workers;
	pthread_t *threads;
	unsigned n_started;
	pthread_key_t buf_key; /* each FUSE thread's buffer for direct reads */
	bool buf_key_made;

	pthread_mutex_t lock;  /* a leaf (invariant 5) */
	pthread_cond_t work;   /* a block queued, or stop */
	bool stop;             /* protected by lock */
	uint64_t tick;         /* protected by lock */
	FsRaBlock *queue_head, *queue_tail; /* protected by lock */
	FsRaBlock blocks[FS_RA_POOL_BLOCKS];
	uint8_t *arena;        /* the blocks' bytes, in huge pages where the kernel gives them */
	size_t arena_size;

	atomic_uint_fast64_t reads, bytes, hits, waits, misses, ahead, unused, busy_ns;
};

/* ---- blocks, under lock ---- */

static FsRaBlock *block_find(FsReadahead *ra, const FsReadWindow *w, uint64_t index) {
	for (size_t k = 0; k < FS_RA_POOL_BLOCKS; k++) {
		FsRaBlock *b = ra->blocks + k;
		if (b->w == w && b->index == index && b->state != RA_FREE)
			return b;
	}
	return NULL;
}

static void block_release(FsReadahead *ra, FsRaBlock *b) {
	/* Invariants 1 and 2: a block in a reply, or filled by another thread, is never let go. */
	assert(b->refs == 0);
	if (!b->read && (b->state == RA_READY || b->state == RA_FAILED))
		atomic_fetch_add(&ra->unused, 1);
	b->state = RA_FREE;
	b->w = NULL;
	b->refs = 0;
	b->read = false;
}

static void queue_push(FsReadahead *ra, FsRaBlock *b) {
	b->next = NULL;
	if (ra->queue_tail)
		ra->queue_tail->next = b;
	else
		ra->queue_head = b;
	ra->queue_tail = b;
}

static void queue_remove(FsReadahead *ra, FsRaBlock *b) {
	FsRaBlock *prev = NULL;
	for (FsRaBlock *x = ra->queue_head; x; prev = x, x = x->next)
		if (x == b) {
			if (prev)
				prev->next = x->next;
			else
				ra->queue_head = x->next;
			if (ra->queue_tail == x)
				ra->queue_tail = prev;
			x->next = NULL;
			return;
		}
}

/*
 * A block for w's block number index: a free one, else the least recently
 * used one that is done with, but never one of w's from `keep` on (the
 * reader's own window).  NULL when the pool has none to give.
 */
static FsRaBlock *block_take(FsReadahead *ra, const FsReadWindow *w, uint64_t keep) {
	FsRaBlock *victim = NULL;
	for (size_t k = 0; k < FS_RA_POOL_BLOCKS; k++) {
		FsRaBlock *b = ra->blocks + k;
		if (b->state == RA_FREE)
			return b;
		if ((b->state != RA_READY && b->state != RA_FAILED) || b->refs > 0 || (b->w == w && b->index >= keep))
			continue;
		if (!victim || b->used < victim->used)
			victim = b;
	}
	if (victim)
		block_release(ra, victim);
	return victim;
}

/* Queues w's blocks [from, to] that are not there yet, as far as the pool allows. */
static void schedule(FsReadahead *ra, FsReadWindow *w, uint64_t from, uint64_t to, uint64_t file_size, uint32_t tier) {
	for (uint64_t k = from; k <= to; k++) {
		FsRaBlock *b = block_find(ra, w, k);
		if (b) {
			b->used = ++ra->tick;
			continue;
		}
		b = block_take(ra, w, from);
		if (!b)
			return;
		/* Field by field: its data and its condition (readers may still be leaving a wait on it) stay. */
		b->w = w;
		b->index = k;
		b->gen = w->gen;
		b->state = RA_QUEUED;
		b->refs = 0;
		b->read = false;
		b->used = ++ra->tick;
		b->file_size = file_size;
		b->tier = tier;
		b->len = 0;
		b->next = NULL;
		fs_inode_pin_held(w->inode); /* invariant 3 */
		queue_push(ra, b);
		pthread_cond_signal(&ra->work);
	}
}

/*
 * Frees w's blocks that the reader has gone well past (the kernel keeps
 * what it was given); not the last few, which requests taken out of order
 * by other FUSE threads may still want.
 */
static void drop_behind(FsReadahead *ra, const FsReadWindow *w, uint64_t first_needed) {
	for (size_t k = 0; k < FS_RA_POOL_BLOCKS; k++) {
		FsRaBlock *b = ra->blocks + k;
		if (b->w == w && b->index + FS_RA_BEHIND < first_needed && b->refs == 0 &&
		    (b->state == RA_READY || b->state == RA_FAILED))
			block_release(ra, b);
	}
}

/* ---- filling ---- */

/* Decompresses block b (FILLING, owned by the caller) outside the lock; returns the bytes or an error. */
static ssize_t fill(FsReadahead *ra, FsRaBlock *b, uint64_t ino, uint64_t index, uint64_t file_size, uint32_t tier) {
	DedupStore *store = fs_tier_store(ra->fs, tier);
	if (!store)
		return -EIO;
	uint64_t off = index * FS_RA_BLOCK;
	size_t len = (size_t) MIN((uint64_t) FS_RA_BLOCK, file_size - off);
	return dedup_file_read(store, ino, file_size, off, b->data, len);
}

/* Takes queued block b out of the queue to fill it; lock held. */
static void fill_begin(FsReadahead *ra, FsRaBlock *b) {
	queue_remove(ra, b);
	b->state = RA_FILLING;
}

/* Publishes a fill's result (invariant 1); lock held.  Returns whether b is READY now. */
static bool fill_done(FsReadahead *ra, FsRaBlock *b, uint64_t gen, ssize_t n) {
	bool ready = false;
	assert(b->state == RA_FILLING); /* invariant 2: nobody took it from its filler */
	if (b->w->gen != gen)
		block_release(ra, b);
	else if (n < 0)
		b->state = RA_FAILED;
	else {
		b->state = RA_READY;
		b->len = (size_t) n;
		ready = true;
	}
	pthread_cond_broadcast(&b->filled);
	return ready;
}

static void *worker(void *userdata) {
	FsReadahead *ra = userdata;

	pthread_mutex_lock(&ra->lock);
	for (;;) {
		while (!ra->stop && !ra->queue_head)
			pthread_cond_wait(&ra->work, &ra->lock);
		if (ra->stop)
			break;
		FsRaBlock *b = ra->queue_head;
		fill_begin(ra, b);
		FsInode *i = b->w->inode;
		uint64_t gen = b->gen, index = b->index, file_size = b->file_size;
		uint32_t tier = b->tier;
		pthread_mutex_unlock(&ra->lock);

		ssize_t n = fill(ra, b, i->ino, index, file_size, tier);

		pthread_mutex_lock(&ra->lock);
		fill_done(ra, b, gen, n);
		atomic_fetch_add(&ra->ahead, 1);
		pthread_mutex_unlock(&ra->lock);
		fs_inode_unpin(ra->fs, i); /* invariant 3: may free i, never under the lock */
		pthread_mutex_lock(&ra->lock);
	}
	pthread_mutex_unlock(&ra->lock);
	return NULL;
}

/* ---- the API ---- */

static void buf_free(void *p) {
	free(p);
}

/*
 * The pool's bytes, one mapping, 2 MiB aligned and asked for in huge pages:
 * a restore writes every block it decompresses, and in 4 KiB pages the
 * first touch of the pool costs a page fault per 4 KiB (a fifth of the
 * daemon's CPU in a restore of a few hundred MB on this VM, bench/README.md).
 * Untouched blocks cost no memory, as with one allocation per block.
 */
static int arena_new(FsReadahead *ra) {
	const size_t huge = (size_t) 2 << 20, size = (size_t) FS_RA_POOL_BLOCKS * FS_RA_BLOCK;
	uint8_t *p = mmap(NULL, size + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	uint8_t *a = (uint8_t *) (((uintptr_t) p + huge - 1) & ~(uintptr_t) (huge - 1));
	if (a > p)
		(void) munmap(p, (size_t) (a - p));
	if (a + size < p + size + huge)
		(void) munmap(a + size, (size_t) (p + size + huge - (a + size)));
	/* Without THP (or with it off) the blocks are plain pages: slower, not wrong. */
	(void) madvise(a, size, MADV_HUGEPAGE);
	ra->arena = a;
	ra->arena_size = size;
	for (size_t k = 0; k < FS_RA_POOL_BLOCKS; k++)
		ra->blocks[k].data = a + k * FS_RA_BLOCK;
	return 0;
}

int fs_readahead_new(Fs *fs, unsigned workers, FsReadahead **ret) {
	int r;

	if (workers > FS_RA_WORKERS_MAX)
		return -EINVAL;
	FsReadahead *ra = calloc(1, sizeof(*ra));
	if (!ra)
		return -ENOMEM;
	ra->fs = fs;
	ra->n_workers = workers;
	pthread_mutex_init(&ra->lock, NULL);
	pthread_cond_init(&ra->work, NULL);
	for (size_t k = 0; k < FS_RA_POOL_BLOCKS; k++)
		pthread_cond_init(&ra->blocks[k].filled, NULL);
	if (pthread_key_create(&ra->buf_key, buf_free) != 0) {
		fs_readahead_free(ra);
		return -ENOMEM;
	}
	ra->buf_key_made = true;
	if (workers > 0) {
		r = arena_new(ra);
		if (r < 0) {
			fs_readahead_free(ra);
			return r;
		}
	}
	*ret = ra;
	return 0;
}

int fs_readahead_start(FsReadahead *ra) {
	if (ra->n_workers == 0)
		return 0;
	ra->threads = calloc(ra->n_workers, sizeof(pthread_t));
	if (!ra->threads)
		return -ENOMEM;
	for (; ra->n_started < ra->n_workers; ra->n_started++) {
		int r = pthread_create(&ra->threads[ra->n_started], NULL, worker, ra);
		if (r != 0)
			return -r;
		pthread_setname_np(ra->threads[ra->n_started], "fratier-restore");
	}
	return 0;
}

void fs_readahead_stop(FsReadahead *ra) {
	FsInode *unpin[FS_RA_POOL_BLOCKS];
	size_t n_unpin = 0;

	if (!ra)
		return;
	pthread_mutex_lock(&ra->lock);
	ra->stop = true;
	pthread_cond_broadcast(&ra->work);
	pthread_mutex_unlock(&ra->lock);
	for (unsigned k = 0; k < ra->n_started; k++)
		pthread_join(ra->threads[k], NULL);
	ra->n_started = 0;

	/* What is still queued was never started: drop it, and its pins. */
	pthread_mutex_lock(&ra->lock);
	while (ra->queue_head) {
		FsRaBlock *b = ra->queue_head;
		queue_remove(ra, b);
		unpin[n_unpin++] = b->w->inode;
		block_release(ra, b);
	}
	pthread_mutex_unlock(&ra->lock);
	for (size_t k = 0; k < n_unpin; k++)
		fs_inode_unpin(ra->fs, unpin[k]);
}

FsReadahead *fs_readahead_free(FsReadahead *ra) {
	if (!ra)
		return NULL;
	fs_readahead_stop(ra);
	free(ra->threads);
	if (ra->arena)
		(void) munmap(ra->arena, ra->arena_size);
	if (ra->buf_key_made) {
		free(pthread_getspecific(ra->buf_key));
		pthread_key_delete(ra->buf_key);
	}
	for (size_t k = 0; k < FS_RA_POOL_BLOCKS; k++)
		pthread_cond_destroy(&ra->blocks[k].filled);
	pthread_cond_destroy(&ra->work);
	pthread_mutex_destroy(&ra->lock);
	free(ra);
	return NULL;
}

/* Reads [off, off + size) of i directly into the calling thread's buffer. */
static ssize_t read_direct(FsReadahead *ra, FsInode *i, uint64_t off, size_t size, FsReadReply *r) {
	uint8_t *buf = pthread_getspecific(ra->buf_key);
	if (!buf) {
		buf = malloc(FS_RA_BLOCK);
		if (!buf || pthread_setspecific(ra->buf_key, buf) != 0) {
			free(buf);
			return -ENOMEM;
		}
	}
	DedupStore *store = fs_tier_store(ra->fs, i->sealed_tier);
	/* A tier that could not be opened at start: its files cannot be read, the others can. */
	ssize_t n = store ? dedup_file_read(store, i->ino, i->sealed_size, off, buf, MIN(size, FS_RA_BLOCK)) : -EIO;
	if (n < 0)
		return n;
	r->iov[0] = (struct iovec) { .iov_base = buf, .iov_len = (size_t) n };
	r->n_iov = 1;
	atomic_fetch_add(&ra->misses, 1);
	return n;
}

/* Lets go of the blocks r holds; lock held. */
static void unhold(FsReadahead *ra, FsReadReply *r) {
	for (size_t k = 0; k < r->n_held; k++)
		r->held[k]->refs--;
	r->n_held = 0;
	r->n_iov = 0;
}

/*
 * Holds block `index` of w for a reply, waiting for it or filling it if
 * it is on its way.  Returns the block (READY, with a reference), or NULL
 * when it is not there or its fill failed: the caller reads directly.
 * lock held; dropped while filling or waiting.  *ret_waited tells whether
 * the bytes were not ready on arrival.
 */
static void take_ref(FsReadahead *ra, FsRaBlock *b) {
	b->refs++;
	b->read = true;
	b->used = ++ra->tick;
}

static FsRaBlock *hold(FsReadahead *ra, FsReadWindow *w, uint64_t index, bool *ret_waited) {
	for (;;) {
		FsRaBlock *b = block_find(ra, w, index);
		if (!b || b->state == RA_FAILED)
			return NULL;
		if (b->state == RA_READY) {
			take_ref(ra, b);
			return b;
		}
		*ret_waited = true;
		if (b->state == RA_FILLING) {
			/* Woken when this slot's fill ends, whatever became of it: looked up again. */
			pthread_cond_wait(&b->filled, &ra->lock);
			continue;
		}
		/* Queued but not started: this thread would only wait for it, so it fills it itself. */
		fill_begin(ra, b);
		FsInode *i = w->inode;
		uint64_t gen = b->gen, file_size = b->file_size;
		uint32_t tier = b->tier;
		pthread_mutex_unlock(&ra->lock);
		ssize_t n = fill(ra, b, i->ino, index, file_size, tier);
		pthread_mutex_lock(&ra->lock);
		bool ready = fill_done(ra, b, gen, n);
		/* Held before the lock goes: another reader ahead of this one would drop it as left behind. */
		if (ready)
			take_ref(ra, b);
		/* The reader's own open count keeps i: the queued block's pin can go (never under the lock). */
		pthread_mutex_unlock(&ra->lock);
		fs_inode_unpin(ra->fs, i);
		pthread_mutex_lock(&ra->lock);
		return ready ? b : NULL;
	}
}

ssize_t fs_readahead_read(FsReadahead *ra, FsInode *i, uint64_t off, size_t size, FsReadReply *r) {
	uint64_t file_size = i->sealed_size;
	uint32_t tier = i->sealed_tier;
	bool waited = false;

	*r = (FsReadReply) { .start_ns = clock_ns(CLOCK_MONOTONIC) };
	atomic_fetch_add(&ra->reads, 1);
	if (off >= file_size || size == 0)
		return 0;
	size = (size_t) MIN((uint64_t) size, file_size - off);
	uint64_t first = off / FS_RA_BLOCK, last = (off + size - 1) / FS_RA_BLOCK;
	if (ra->n_workers == 0 || last > first + 1)
		goto direct;

	pthread_mutex_lock(&ra->lock);
	FsReadWindow *w = i->ra_window;
	if (!w) {
		w = calloc(1, sizeof(*w));
		if (!w) {
			pthread_mutex_unlock(&ra->lock);
			goto direct;
		}
		w->inode = i;
		i->ra_window = w;
	}
	/*
	 * Sequential: from the start, right after the last read, or anywhere
	 * near the front of a sequential reader (the kernel's read-ahead sends
	 * several requests at once and FUSE threads take them in any order).
	 */
	uint64_t slack = (uint64_t) FS_RA_DEPTH * FS_RA_BLOCK;
	bool seq = off == 0 || off == w->next ||
		   (w->sequential && off + slack >= w->next && off <= w->next + slack);
	w->sequential = seq;
	w->next = seq ? MAX(w->next, off + size) : off + size;
	if (seq) {
		uint64_t end = (file_size - 1) / FS_RA_BLOCK;
		drop_behind(ra, w, first);
		schedule(ra, w, first, MIN(last + FS_RA_DEPTH, end), file_size, tier);
	}

	for (uint64_t k = first; k <= last; k++) {
		FsRaBlock *b = hold(ra, w, k, &waited);
		if (!b) {
			unhold(ra, r);
			pthread_mutex_unlock(&ra->lock);
			goto direct;
		}
		uint64_t start = k * FS_RA_BLOCK;
		uint64_t a = MAX(off, start), e = MIN(off + size, start + b->len);
		r->held[r->n_held++] = b;
		if (a >= e) {
			/* The block is shorter than the file said: the recipe changed under a stale fill. */
			unhold(ra, r);
			pthread_mutex_unlock(&ra->lock);
			goto direct;
		}
		r->iov[r->n_iov++] = (struct iovec) { .iov_base = b->data + (a - start), .iov_len = (size_t) (e - a) };
	}
	pthread_mutex_unlock(&ra->lock);
	size_t got = 0;
	for (size_t k = 0; k < r->n_iov; k++)
		got += r->iov[k].iov_len;
	if (got != size) {
		pthread_mutex_lock(&ra->lock);
		unhold(ra, r);
		pthread_mutex_unlock(&ra->lock);
		goto direct;
	}
	atomic_fetch_add(waited ? &ra->waits : &ra->hits, 1);
	atomic_fetch_add(&ra->bytes, size);
	return (ssize_t) size;

direct:;
	ssize_t n = read_direct(ra, i, off, size, r);
	if (n > 0)
		atomic_fetch_add(&ra->bytes, (uint64_t) n);
	return n;
}

void fs_readahead_done(FsReadahead *ra, FsReadReply *r) {
	if (r->n_held > 0) {
		pthread_mutex_lock(&ra->lock);
		unhold(ra, r);
		pthread_mutex_unlock(&ra->lock);
	}
	if (r->start_ns)
		atomic_fetch_add(&ra->busy_ns, clock_ns(CLOCK_MONOTONIC) - r->start_ns);
	r->n_iov = 0;
}

void fs_readahead_invalidate(FsReadahead *ra, FsInode *i) {
	FsInode *unpin[FS_RA_POOL_BLOCKS];
	size_t n_unpin = 0;

	pthread_mutex_lock(&ra->lock);
	FsReadWindow *w = i->ra_window;
	if (w) {
		w->gen++;
		w->sequential = false;
		w->next = 0;
		for (size_t k = 0; k < FS_RA_POOL_BLOCKS; k++) {
			FsRaBlock *b = ra->blocks + k;
			if (b->w != w)
				continue;
			if (b->state == RA_QUEUED) {
				queue_remove(ra, b);
				unpin[n_unpin++] = i;
				block_release(ra, b);
			} else if (b->state == RA_READY || b->state == RA_FAILED)
				block_release(ra, b);
			/* FILLING: its worker frees it when done (fill_done()). */
		}
	}
	pthread_mutex_unlock(&ra->lock);
	/* The caller holds the inode: these pins are never its last reference. */
	for (size_t k = 0; k < n_unpin; k++)
		fs_inode_unpin(ra->fs, unpin[k]);
}

void fs_readahead_forget(FsReadahead *ra, FsInode *i) {
	if (!ra) {
		/* The pipeline could not be made at start: no window either. */
		return;
	}
	pthread_mutex_lock(&ra->lock);
	FsReadWindow *w = i->ra_window;
	i->ra_window = NULL;
	if (w)
		for (size_t k = 0; k < FS_RA_POOL_BLOCKS; k++)
			if (ra->blocks[k].w == w) {
				/* Invariant 3: a queued or filling block pins the inode, which is not forgotten then. */
				assert(ra->blocks[k].state != RA_QUEUED && ra->blocks[k].state != RA_FILLING);
				block_release(ra, ra->blocks + k);
			}
	pthread_mutex_unlock(&ra->lock);
	free(w);
}

void fs_readahead_stats(FsReadahead *ra, FsRestoreStatus *ret) {
	*ret = (FsRestoreStatus) {
		.reads = atomic_load(&ra->reads),
		.bytes = atomic_load(&ra->bytes),
		.hits = atomic_load(&ra->hits),
		.waits = atomic_load(&ra->waits),
		.misses = atomic_load(&ra->misses),
		.blocks = atomic_load(&ra->ahead),
		.unused = atomic_load(&ra->unused),
		.busy_ns = atomic_load(&ra->busy_ns),
	};
}
