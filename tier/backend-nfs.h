/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * A chunk-store backend (dedup/backend.h) over an NFSv3 export, spoken from
 * user space through libnfs (as Oracle's dNFS does): no kernel mount, so a
 * dead server costs the calls that need it a bounded wait and -EIO, never a
 * hung mount, and never touches other tiers.
 *
 * URL: nfs://HOST/EXPORT/PATH[?nfsport=N&mountport=M&version=3], parsed by
 * libnfs.  EXPORT/PATH is the exported directory (NFSv3 addresses exports by
 * their real path on the server); objects live below it.  With nfsport and
 * mountport the client needs no portmapper.  Only NFSv3 is used (libnfs 4's
 * v4 client cannot write): version=4 is -EINVAL.
 *
 * Bounded waits: each attempt of a call (all the RPCs it makes: lookups,
 * then the operation) must finish within timeout_ms, and so must each
 * (re)connect, which is a TCP connect and a MOUNT.  An attempt that fails
 * for the transport (deadline passed, reset, refused) drops its connection,
 * and the call tries again on a fresh one, at most `retries` more times, then
 * returns -EIO.  So no call waits longer than about
 *     (retries + 1) x 2 x timeout_ms
 * and far less when the server is down rather than hung (connections are
 * refused at once), plus, for a call that finds every connection busy, the
 * wait for the call ahead of it.  A deadline is -EIO, never -ETIMEDOUT: the store treats
 * both alike and -EIO is in the contract.  Once the server answers again,
 * the next call reconnects.
 *
 * Durability (dedup/backend.h contract 3): NFSv3 CREATE, MKDIR, SETATTR,
 * REMOVE and RENAME are synchronous — RFC 1813 §3.3 requires the server to
 * commit them to stable storage before it replies — so a created object and
 * its directories are durable when open_write() returns.  Data is written
 * UNSTABLE and made durable by COMMIT in sync().  An unstable write survives
 * only on the server instance that took it; since a restarted server always
 * breaks the TCP connection, a file keeps its writes and COMMIT on one
 * connection, and if that connection broke since the last sync() the file
 * fails (-EIO, sticky until closed): the caller reopens it at its last synced
 * size and writes again.
 *
 * Concurrency: libnfs contexts are not thread-safe, so the backend keeps a
 * pool of `connections` contexts (TCP connections), each used by one call at
 * a time; preads on different connections run in parallel.  Each connection
 * caches the file handles of recently read objects.
 *
 * Errors are the server's where libnfs passes them on.  (!) libnfs 4 hides
 * why a READ or WRITE was refused: a refused WRITE is -ENOSPC when the
 * export has no room for it, -EIO otherwise.
 *
 * (!) Names are resolved by the server: a symlink planted in the export is
 * followed where the dir backend would refuse it.  The export is the store's
 * own; nothing but the backend should write there.
 */

#include "dedup/backend.h"

#define TIER_NFS_CONNECTIONS_MAX 16
#define TIER_NFS_RETRIES_MAX 10
#define TIER_NFS_TIMEOUT_MS_MAX (10 * 60 * 1000)

typedef struct TierNfsOptions {
	unsigned timeout_ms;  /* per attempt and per connect, 1..TIER_NFS_TIMEOUT_MS_MAX */
	unsigned retries;     /* reconnect-and-retry attempts after a transport failure, 0..TIER_NFS_RETRIES_MAX */
	unsigned connections; /* contexts in the pool, 1..TIER_NFS_CONNECTIONS_MAX */
} TierNfsOptions;

#define TIER_NFS_OPTIONS_DEFAULT ((TierNfsOptions) { .timeout_ms = 10000, .retries = 2, .connections = 4 })

/*
 * Opens the export at url as a backend and mounts it once, so a wrong URL, a
 * missing export or an unreachable server is reported here.  opts NULL means
 * TIER_NFS_OPTIONS_DEFAULT.
 * Returns: 0 and *ret (free with dedup_backend_free()); -EINVAL (bad URL or
 * options), -ENOENT/-EACCES (the server refused the export), -EIO (no answer
 * within the bound above), -ENOMEM.  On error, tier_backend_nfs_open_error()
 * says why.
 */
int tier_backend_nfs_open(const char *url, const TierNfsOptions *opts, DedupBackend **ret);

/*
 * Why the last failed tier_backend_nfs_open() of this thread failed, for the
 * caller's log ("" if it did not fail).  Valid until the next open in this
 * thread; do not free.
 */
const char *tier_backend_nfs_open_error(void);

typedef struct TierNfsStats {
	uint64_t rpcs;     /* calls waited for (a split READ or WRITE counts once) */
	uint64_t rpc_ns;   /* time spent waiting for them */
	uint64_t failures; /* calls that timed out or lost their connection, and failed reconnections */
} TierNfsStats;

/* Counters since the backend was opened; b must be an NFS backend.  Can't fail. */
void tier_backend_nfs_stats(DedupBackend *b, TierNfsStats *ret);
