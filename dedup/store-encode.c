/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store-encode.c — the store's encoders: threads that compress the regions
 * writers gather, so that one file's regions are compressed on several
 * cores while its writer goes on chunking and hashing.
 *
 * A job is up to STORE_ENCODE_BATCH regions a builder handed over
 * (store_encode_submit()): their plain bytes, their tables and where the
 * encoded regions go.  The builder keeps the job's buffers untouched until
 * it has waited for the job (store_encode_wait()); the appends stay in the
 * builder's thread, in the order the regions were gathered, so the
 * containers' layout and the writer's registration order are those of one
 * thread.
 *
 * The threads start with the store's first writer, not at open: a daemon
 * opens its stores before it detaches, and a fork keeps no thread.
 *
 * Invariants:
 *  1. A job is in exactly one of: queued (on the list), running (one
 *     thread encodes it, holding no lock), done.  Its state and the list
 *     are protected by encode_lock, a leaf lock; the job's buffers belong
 *     to whoever moved it out of queued until it is done.
 *  2. A waiter whose job is still queued takes it off the list and encodes
 *     it itself: a builder never waits for a job nobody runs, and with the
 *     encoders busy elsewhere (or niced behind other work) the writer's own
 *     thread still makes progress.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/macros.h"
#include "dedup/store-internal.h"

enum {
	JOB_QUEUED = 1,
	JOB_RUNNING,
	JOB_DONE,
};

static void job_run(StoreEncodeJob *j, DedupRegionEncoder *e) {
	int r = dedup_region_encoder_set_level(e, j->level);
	for (size_t i = 0; r >= 0 && i < j->n; i++) {
		StoreEncodeRegion *g = j->regions + i;
		r = dedup_region_encode(e, g->ids, g->lengths, g->count, g->plain, g->plain_len, g->out, g->out_cap,
					&g->size);
	}
	j->r = r < 0 ? r : 0;
}

static int64_t thread_cpu_ns(void) {
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *encoder_main(void *userdata) {
	DedupStore *s = userdata;
	DedupRegionEncoder *e = NULL;
	int r;

	(void) pthread_setname_np(pthread_self(), "fratier-encode");
	/* Background work: compression yields to the foreground as the writer feeding it does. */
	if (s->opts.encode_nice != 0)
		(void) setpriority(PRIO_PROCESS, (id_t) gettid(), s->opts.encode_nice);
	r = dedup_region_encoder_new(DEDUP_FRAME_LEVEL_MIN, s->opts.id_key != NULL, &e);
	if (r < 0)
		/* Waiters encode their jobs themselves (invariant 2): a store with fewer encoders. */
		return NULL;

	pthread_mutex_lock(&s->encode_lock);
	for (;;) {
		while (!s->encode_head && !s->encode_stop)
			pthread_cond_wait(&s->encode_work, &s->encode_lock);
		if (s->encode_stop)
			break;
		StoreEncodeJob *j = s->encode_head;
		s->encode_head = j->next;
		j->state = JOB_RUNNING;
		pthread_mutex_unlock(&s->encode_lock);
		/* The CPU this thread spends for the job's writer: part of that writer's cost (DedupWriterStats.encode_cpu_ns). */
		int64_t cpu = thread_cpu_ns();
		job_run(j, e);
		j->cpu_ns = thread_cpu_ns() - cpu;
		int64_t done = clock_ns(CLOCK_MONOTONIC);
		pthread_mutex_lock(&s->encode_lock);
		j->state = JOB_DONE;
		j->done_ns = done;
		pthread_cond_broadcast(&s->encode_done);
	}
	pthread_mutex_unlock(&s->encode_lock);
	dedup_region_encoder_free(e);
	return NULL;
}

void store_encoders_init(DedupStore *s) {
	pthread_mutex_init(&s->encode_lock, NULL);
	pthread_cond_init(&s->encode_work, NULL);
	pthread_cond_init(&s->encode_done, NULL);
	s->encode_ready = true;
}

void store_encoders_start(DedupStore *s) {
	pthread_mutex_lock(&s->encode_lock);
	if (s->encoders_started || s->opts.encode_workers == 0)
		goto out;
	s->encoders_started = true;
	s->encoders = calloc(s->opts.encode_workers, sizeof(*s->encoders));
	if (!s->encoders)
		goto out;
	for (unsigned i = 0; i < s->opts.encode_workers; i++) {
		/* Without a thread, fewer encoders: waiters encode what nobody took (invariant 2). */
		if (pthread_create(&s->encoders[i], NULL, encoder_main, s) != 0)
			break;
		s->n_encoders++;
	}
out:
	pthread_mutex_unlock(&s->encode_lock);
}

void store_encoders_stop(DedupStore *s) {
	if (!s->encode_ready)
		return;
	pthread_mutex_lock(&s->encode_lock);
	s->encode_stop = true;
	pthread_cond_broadcast(&s->encode_work);
	pthread_mutex_unlock(&s->encode_lock);
	/* No lock: no writer is alive, so nobody starts them now. */
	for (unsigned i = 0; i < s->n_encoders; i++)
		pthread_join(s->encoders[i], NULL);
	free(s->encoders);
	s->encoders = NULL;
	s->n_encoders = 0;
	pthread_cond_destroy(&s->encode_done);
	pthread_cond_destroy(&s->encode_work);
	pthread_mutex_destroy(&s->encode_lock);
	s->encode_ready = false;
}

void store_encode_submit(DedupStore *s, StoreEncodeJob *j) {
	j->next = NULL;
	pthread_mutex_lock(&s->encode_lock);
	j->state = JOB_QUEUED;
	if (s->encode_head) {
		StoreEncodeJob *t = s->encode_head;
		while (t->next)
			t = t->next;
		t->next = j;
	} else
		s->encode_head = j;
	pthread_cond_signal(&s->encode_work);
	pthread_mutex_unlock(&s->encode_lock);
}

int store_encode_wait(DedupStore *s, StoreEncodeJob *j, DedupRegionEncoder *self, uint64_t *waited_ns, uint64_t *cpu_ns) {
	pthread_mutex_lock(&s->encode_lock);
	if (j->state == JOB_QUEUED) {
		/* Invariant 2. */
		StoreEncodeJob **p = &s->encode_head;
		while (*p != j)
			p = &(*p)->next;
		*p = j->next;
		j->state = JOB_RUNNING;
		pthread_mutex_unlock(&s->encode_lock);
		job_run(j, self);
		j->cpu_ns = 0; /* the caller's own, on its own clock */
		pthread_mutex_lock(&s->encode_lock);
		j->state = JOB_DONE;
	}
	if (j->state != JOB_DONE) {
		/*
		 * Until the encoder finished, not until this thread runs again:
		 * the time runnable after the wake-up is the caller's own (its
		 * schedstat counts it), and must not be counted twice.
		 */
		int64_t from = clock_ns(CLOCK_MONOTONIC);
		while (j->state != JOB_DONE)
			pthread_cond_wait(&s->encode_done, &s->encode_lock);
		if (j->done_ns > from)
			*waited_ns += (uint64_t) (j->done_ns - from);
	}
	if (j->cpu_ns > 0)
		*cpu_ns += (uint64_t) j->cpu_ns;
	pthread_mutex_unlock(&s->encode_lock);
	return j->r;
}
