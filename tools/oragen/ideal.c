/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The "ideal" numbers in the manifest: what a perfect block-level
 * deduplicator would keep, and that compressed with zstd -3 unit by unit,
 * and as one stream (every unique unit in the order written, so each may
 * borrow from the ones before it within zstd's window: the stronger ideal).
 *
 *  - Datafile content: every distinct 8 KiB block written to any backup piece
 *    or image copy, once.  Distinctness is known by construction (a block's
 *    bytes are a function of its file, block number and version, and differ
 *    between any two of those because the rdba and SCN are in the header), so
 *    nothing is hashed: Datafile keeps, per block, the last version counted.
 *    Blocks that are the same in every file (the all-zero block of image
 *    copies, block 0 of datafiles of one size) count once.
 *  - Redo: every archived log's bytes, once (archivelog backup pieces repeat
 *    them), compressed in 8 KiB slices from the start of each log.
 *  - Piece headers, frames and section headers are not Oracle content and
 *    are reported separately as framing.
 *
 * zstd runs on a worker thread: a single producer (the generator) and a
 * single consumer share a ring of slots.  The producer fills slot `head`
 * outside the lock (the consumer never looks at slots beyond count), then
 * publishes it; the consumer compresses slot `tail` outside the lock, then
 * releases it.  The sums do not depend on timing, so output stays
 * deterministic.
 */

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "tools/oragen/oragen.h"

#define IDEAL_ZSTD_LEVEL 3
#define IDEAL_QUEUE_SLOTS 256u

typedef struct IdealSlot {
	uint32_t len;
	bool redo;
	uint8_t data[ORA_BLOCK_SIZE];
} IdealSlot;

struct IdealQueue {
	pthread_t worker;
	pthread_mutex_t lock;
	pthread_cond_t not_empty, not_full;
	IdealSlot *slots;
	unsigned head, tail, count; /* protected by lock */
	bool closing;               /* protected by lock */
	ZSTD_CCtx *cctx;            /* worker only */
	uint8_t *zbuf;              /* worker only */
	size_t zcap;
	ZSTD_CCtx *stream;          /* worker only */
	uint8_t *sbuf;              /* worker only */
	size_t scap;
	uint64_t blocks_zstd, redo_zstd, stream_zstd; /* worker only until joined */
};

/* Feeds len bytes (none, to end the stream) to the one-stream ideal and counts what comes out. */
static void ideal_stream(IdealQueue *q, const uint8_t *p, size_t len, ZSTD_EndDirective how) {
	ZSTD_inBuffer in = { p, len, 0 };
	size_t left;

	do {
		ZSTD_outBuffer out = { q->sbuf, q->scap, 0 };
		left = ZSTD_compressStream2(q->stream, &out, &in, how);
		q->stream_zstd += out.pos;
		/* Cannot fail with valid buffers; count the rest raw if it ever does. */
		if (ZSTD_isError(left)) {
			q->stream_zstd += in.size - in.pos;
			return;
		}
	} while (how == ZSTD_e_end ? left != 0 : in.pos < in.size);
}

static void *ideal_worker(void *userdata) {
	IdealQueue *q = userdata;

	for (;;) {
		IdealSlot *s;
		size_t k;

		pthread_mutex_lock(&q->lock);
		while (q->count == 0 && !q->closing)
			pthread_cond_wait(&q->not_empty, &q->lock);
		if (q->count == 0) {
			pthread_mutex_unlock(&q->lock);
			ideal_stream(q, NULL, 0, ZSTD_e_end);
			return NULL;
		}
		s = &q->slots[q->tail];
		pthread_mutex_unlock(&q->lock);

		k = ZSTD_compress2(q->cctx, q->zbuf, q->zcap, s->data, s->len);
		/* Cannot fail with a bound-sized buffer; count it raw if it ever does. */
		if (ZSTD_isError(k))
			k = s->len;
		if (s->redo)
			q->redo_zstd += k;
		else
			q->blocks_zstd += k;
		ideal_stream(q, s->data, s->len, ZSTD_e_continue);

		pthread_mutex_lock(&q->lock);
		q->tail = (q->tail + 1) % IDEAL_QUEUE_SLOTS;
		q->count--;
		pthread_cond_signal(&q->not_full);
		pthread_mutex_unlock(&q->lock);
	}
}

static void ideal_queue_free(IdealQueue *q) {
	if (!q)
		return;
	ZSTD_freeCCtx(q->cctx);
	ZSTD_freeCCtx(q->stream);
	free(q->zbuf);
	free(q->sbuf);
	free(q->slots);
	pthread_cond_destroy(&q->not_full);
	pthread_cond_destroy(&q->not_empty);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

int ideal_init(Ideal *id, bool zstd) {
	IdealQueue *q;
	int r;

	*id = (Ideal) {};
	if (!zstd)
		return 0;

	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->not_empty, NULL);
	pthread_cond_init(&q->not_full, NULL);
	q->slots = malloc(IDEAL_QUEUE_SLOTS * sizeof(IdealSlot));
	q->cctx = ZSTD_createCCtx();
	q->zcap = ZSTD_compressBound(ORA_BLOCK_SIZE);
	q->zbuf = malloc(q->zcap);
	q->stream = ZSTD_createCCtx();
	q->scap = ZSTD_CStreamOutSize();
	q->sbuf = malloc(q->scap);
	if (!q->slots || !q->cctx || !q->zbuf || !q->stream || !q->sbuf) {
		ideal_queue_free(q);
		return -ENOMEM;
	}
	if (ZSTD_isError(ZSTD_CCtx_setParameter(q->cctx, ZSTD_c_compressionLevel, IDEAL_ZSTD_LEVEL)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(q->stream, ZSTD_c_compressionLevel, IDEAL_ZSTD_LEVEL))) {
		ideal_queue_free(q);
		return -EINVAL;
	}
	r = -pthread_create(&q->worker, NULL, ideal_worker, q);
	if (r < 0) {
		ideal_queue_free(q);
		return r;
	}
	id->queue = q;
	return 0;
}

void ideal_finish(Ideal *id) {
	IdealQueue *q = id->queue;

	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->closing = true;
	pthread_cond_signal(&q->not_empty);
	pthread_mutex_unlock(&q->lock);
	(void) pthread_join(q->worker, NULL);

	id->blocks_zstd = q->blocks_zstd;
	id->redo_zstd = q->redo_zstd;
	id->stream_zstd = q->stream_zstd;
	ideal_queue_free(q);
	id->queue = NULL;
}

static void ideal_enqueue(Ideal *id, const uint8_t *p, size_t n, bool redo) {
	IdealQueue *q = id->queue;
	IdealSlot *s;

	if (!q)
		return;
	assert(n <= ORA_BLOCK_SIZE);

	pthread_mutex_lock(&q->lock);
	while (q->count == IDEAL_QUEUE_SLOTS)
		pthread_cond_wait(&q->not_full, &q->lock);
	s = &q->slots[q->head];
	pthread_mutex_unlock(&q->lock);

	memcpy(s->data, p, n);
	s->len = (uint32_t) n;
	s->redo = redo;

	pthread_mutex_lock(&q->lock);
	q->head = (q->head + 1) % IDEAL_QUEUE_SLOTS;
	q->count++;
	pthread_cond_signal(&q->not_empty);
	pthread_mutex_unlock(&q->lock);
}

void ideal_add_block(Ideal *id, const uint8_t *block) {
	id->blocks++;
	ideal_enqueue(id, block, ORA_BLOCK_SIZE, false);
}

void ideal_add_shared(Ideal *id, uint64_t key, const uint8_t *block) {
	for (unsigned i = 0; i < id->nshared; i++)
		if (id->shared_seen[i] == key)
			return;
	assert(id->nshared < IDEAL_SHARED_MAX);
	id->shared_seen[id->nshared++] = key;
	ideal_add_block(id, block);
}

void ideal_redo_tap(void *userdata, const uint8_t *p, size_t n) {
	Ideal *id = userdata;

	id->redo_bytes += n;
	while (n > 0) {
		size_t k;

		if (id->redo_fill == 0 && n >= sizeof(id->redo_stage)) {
			ideal_enqueue(id, p, sizeof(id->redo_stage), true);
			p += sizeof(id->redo_stage);
			n -= sizeof(id->redo_stage);
			continue;
		}
		k = sizeof(id->redo_stage) - id->redo_fill;
		if (k > n)
			k = n;
		memcpy(id->redo_stage + id->redo_fill, p, k);
		id->redo_fill += k;
		p += k;
		n -= k;
		if (id->redo_fill == sizeof(id->redo_stage)) {
			ideal_enqueue(id, id->redo_stage, id->redo_fill, true);
			id->redo_fill = 0;
		}
	}
}

void ideal_redo_end(Ideal *id) {
	if (id->redo_fill > 0)
		ideal_enqueue(id, id->redo_stage, id->redo_fill, true);
	id->redo_fill = 0;
}
