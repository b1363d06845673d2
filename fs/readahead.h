/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once
/* private to fs/: do not include outside fs/ */

/*
 * readahead.c — the restore pipeline: a sealed file read front to back is
 * decompressed ahead of its reader by worker threads, into a window of
 * blocks per file taken from one bounded pool, so that the FUSE thread
 * answering a read finds its bytes ready and only copies them into the
 * reply.  Built on dedup's public read call (dedup_file_read()).
 */

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "fs/daemon.h"

/* A block of a file: the unit a worker decompresses and the window holds. */
#define FS_RA_BLOCK ((size_t) 1 << 20)
/* Blocks a sequential reader gets ahead of the block it reads. */
#define FS_RA_DEPTH 8u
/*
 * Blocks kept behind a sequential reader, for its requests that other FUSE
 * threads took late: the kernel has up to two read-ahead windows (4 MiB
 * each by default) in flight, served in any order.
 */
#define FS_RA_BEHIND 8u
/* Blocks in the pool, all files together: the pipeline's memory bound. */
#define FS_RA_POOL_BLOCKS 32u
/*
 * A store's cache of decompressed regions when the pipeline or the kernel
 * reads ahead (fs/main.c).  Blocks hold what they decoded in place; the
 * cache holds only the regions across their ends, at most two for each
 * block of the pool in flight.  Its first fill is fresh pages to fault in:
 * 16 MiB cost 8.7k faults per 222 MB restore here, 8 MiB 7k, 4 MiB 5.5k.
 */
#define FS_RA_STORE_REGION_CACHE ((size_t) 8 << 20)
#define FS_RA_WORKERS_DEFAULT 2u
#define FS_RA_WORKERS_MAX 16u

typedef struct Fs Fs;
typedef struct FsInode FsInode;
typedef struct FsReadahead FsReadahead;
typedef struct FsRaBlock FsRaBlock;
typedef struct FsReadWindow FsReadWindow;

/* The bytes of one reply: pointers into window blocks or a thread's buffer, valid until fs_readahead_done(). */
typedef struct FsReadReply {
	struct iovec iov[2];
	size_t n_iov;
	FsRaBlock *held[2]; /* blocks kept from reuse while the reply goes out */
	size_t n_held;
	uint64_t start_ns;
} FsReadReply;

/* workers == 0: no pipeline, every sealed read decompresses on its FUSE thread. */
int fs_readahead_new(Fs *fs, unsigned workers, FsReadahead **ret);
int fs_readahead_start(FsReadahead *ra);
/*
 * Stops the workers, dropping queued work (with no FUSE request coming in
 * any more): reads that come later decompress on their own thread.
 * Accepts NULL.
 */
void fs_readahead_stop(FsReadahead *ra);
/*
 * Frees everything, after every inode's window was forgotten (no thread
 * may still call in: seal workers and the policy worker stopped, the inode
 * table gone).  Accepts NULL; returns NULL.
 */
FsReadahead *fs_readahead_free(FsReadahead *ra);

/*
 * The bytes [off, off + size) of sealed file i (cut at its end), for a
 * reply: from its window if they are there or being decompressed, else
 * read directly; a sequential reader's window is filled ahead.  Called
 * with i's data_lock held shared and i sealed; the reply must go out
 * before it is let go.  Returns the bytes (0 at or past the end) or a
 * negative errno (-EIO: damaged or unreachable chunks).
 */
ssize_t fs_readahead_read(FsReadahead *ra, FsInode *i, uint64_t off, size_t size, FsReadReply *ret);
/* After the reply went out (or failed): lets go of what r holds. */
void fs_readahead_done(FsReadahead *ra, FsReadReply *r);

/*
 * i's bytes are about to change (it is turned back into a raw file):
 * nothing read ahead of it so far may be handed out again.  Called with
 * data_lock held exclusively.
 */
void fs_readahead_invalidate(FsReadahead *ra, FsInode *i);
/* i's entry goes: frees its window (no worker can hold it: they pin the inode).  Accepts ra == NULL. */
void fs_readahead_forget(FsReadahead *ra, FsInode *i);

/* Since the mount: fs_restore_status_get() (fs/daemon.h). */
void fs_readahead_stats(FsReadahead *ra, FsRestoreStatus *ret);
