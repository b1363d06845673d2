/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * A tier shared by many hosts' daemons (docs/SHARED.md): each host writes
 * only objects under its own name, and proves it is the one live daemon of
 * that name by a host record with a lease.
 *
 * On the shared tier's backend (its root):
 *   hosts/NAME.host              the host record of NAME (below), replaced by rename only
 *   hosts/NAME.host.INSTANCE.tmp the record being written by one instance, before its rename
 *   h/NAME/...                   everything the host's chunk store writes (containers,
 *                                description): tier_backend_prefix_new() with "h/NAME"
 *   h/NAME/s/summary             what the host keeps there, as its catalog counts it (below)
 *
 * A host record is text, at most TIER_HOST_RECORD_MAX bytes, exactly:
 *   fratier-host 1\n
 *   host NAME\n                  NAME as config_host_name_is_valid()
 *   instance HEX32\n             the daemon's instance: 16 bytes, lowercase hex
 *   lease_until SECONDS\n        wall-clock seconds since the epoch, decimal, no sign
 *   state live|retired\n
 * Anything else (a missing or extra line, another order, a bad value) is -EBADMSG.
 *
 * Errors are negative errno values; nothing here logs.
 */

#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"
#include "dedup/backend.h"
#include "dedup/store.h"

#define TIER_HOST_RECORD_MAX 512
#define TIER_HOST_INSTANCE_SIZE 16
/*
 * How long a host's lease lasts past its last renewal by default
 * (shared_lease in [fratier] sets it; CONFIG_SHARED_LEASE_DEFAULT); the
 * daemon renews every tier_shared_renew_interval() of it.
 */
#define TIER_SHARED_LEASE_S CONFIG_SHARED_LEASE_DEFAULT
/* A summary object is at most this long (tier_host_summary_parse()). */
#define TIER_HOST_SUMMARY_MAX 512
/* "NAME" + ".host." + 32 hex + ".tmp" below "hosts/" */
#define TIER_HOST_OBJECT_NAME_MAX (6 + CONFIG_HOST_NAME_MAX + 6 + 2 * TIER_HOST_INSTANCE_SIZE + 4 + 1)

typedef enum TierHostState {
	TIER_HOST_LIVE,
	TIER_HOST_RETIRED,
	_TIER_HOST_STATE_MAX,
} TierHostState;

typedef struct TierHostRecord {
	char host[CONFIG_HOST_NAME_MAX + 1];
	uint8_t instance[TIER_HOST_INSTANCE_SIZE];
	uint64_t lease_until; /* seconds since the epoch */
	TierHostState state;
} TierHostRecord;

/*
 * A host as the others see it: live (its lease runs), expired (it ended,
 * and the host was not retired: it may come back, so once collection
 * across hosts exists it holds what it might use), retired, or damaged
 * (its record does not parse).
 */
typedef enum TierHostStatus {
	TIER_HOST_STATUS_LIVE,
	TIER_HOST_STATUS_EXPIRED,
	TIER_HOST_STATUS_RETIRED,
	TIER_HOST_STATUS_DAMAGED,
	_TIER_HOST_STATUS_MAX,
} TierHostStatus;

const char *tier_host_status_to_string(TierHostStatus s);

/* Parses a stored host record.  Returns 0, or -EBADMSG for anything but the exact form above. */
int tier_host_record_parse(const void *buf, size_t len, TierHostRecord *ret);
/*
 * Writes r in the stored form into buf (NUL-terminated).  Returns its length
 * without the NUL, or -EINVAL (a field out of range).
 */
int tier_host_record_format(const TierHostRecord *r, char buf[static TIER_HOST_RECORD_MAX]);

/* Parses 32 lowercase hex digits into an instance; -EBADMSG otherwise. */
int tier_host_instance_parse(const char *hex, size_t len, uint8_t ret[static TIER_HOST_INSTANCE_SIZE]);

/*
 * This machine's host name made into a valid host name: its first label,
 * lowercased, characters outside [a-z0-9_-] turned into '-', cut to
 * CONFIG_HOST_NAME_MAX.  Returns 0, or the error of gethostname().
 */
int tier_shared_default_host(char ret[static CONFIG_HOST_NAME_MAX + 1]);

/*
 * The instance of the daemon over data_dir: read from DATA_DIR/shared-instance,
 * made (random, durably) the first time.  It stays with the data directory,
 * so the daemon restarted over it after a crash takes its own lease back at
 * once, while another data directory under the same host name is refused.
 * Returns 0, -EBADMSG (the file is damaged), or an I/O error.
 */
int tier_shared_instance(const char *data_dir, uint8_t ret[static TIER_HOST_INSTANCE_SIZE]);

/*
 * Registers host on the shared tier whose root is b, for this instance, as
 * of now (seconds since the epoch): refused while another instance holds a
 * lease that has not ended (-EBUSY) and for good once the host is retired
 * (-EPERM); otherwise writes a new record with a lease of lease_s seconds
 * and reads it back.  *ret_error (free it; may stay NULL) gets the reason
 * to show for a refusal.
 */
int tier_shared_register(DedupBackend *b, const char *host, const uint8_t instance[static TIER_HOST_INSTANCE_SIZE],
			 uint64_t now, uint64_t lease_s, char **ret_error);

/*
 * Renews the lease for lease_s more seconds: -EBUSY (another instance took
 * the name over: the lease had run out), -EPERM (retired meanwhile), else
 * the error of writing.
 */
int tier_shared_renew(DedupBackend *b, const char *host, const uint8_t instance[static TIER_HOST_INSTANCE_SIZE],
		      uint64_t now, uint64_t lease_s);

/* How often a lease of lease_s seconds is renewed: a sixth of it, at most every 10 s, at least every second. */
uint64_t tier_shared_renew_interval(uint64_t lease_s);

/*
 * Writes host's record with state retired, by the daemon of instance
 * writer (another host's: its temporary is named after writer, so it never
 * shares one with host's own renewal).  The record keeps host's instance
 * and lease.  Refused while its lease runs (-EBUSY) unless force; a damaged
 * record is refused (-EBADMSG) unless force, and then replaced.  Returns 0
 * (retired now), 1 (it was retired already), -ENOENT (no such host), or
 * an I/O error.  *ret_before gets the record found (zeroed when damaged).
 * A renewal of host that read its record before this rename may still
 * write it back live: read it again after one renewal period
 * (tier_shared_read_host()) to know.
 */
int tier_shared_retire(DedupBackend *b, const char *host, const uint8_t writer[static TIER_HOST_INSTANCE_SIZE],
		       uint64_t now, bool force, TierHostRecord *ret_before);

/* One entry of tier_shared_hosts_list(). */
typedef struct TierSharedHost {
	char host[CONFIG_HOST_NAME_MAX + 1];
	TierHostStatus status;
	TierHostRecord record;    /* unless damaged */
} TierSharedHost;

/*
 * Every host with a record on the shared tier whose root is b (hosts/NAME.host),
 * sorted by name, with its status as of now.  *ret (free it) gets *ret_n
 * entries.  Returns 0 or the error of listing or reading (a damaged record
 * is an entry, not an error).
 */
int tier_shared_hosts_list(DedupBackend *b, uint64_t now, TierSharedHost **ret, size_t *ret_n);

/*
 * What a host publishes about itself on a shared tier, h/NAME/s/summary: a
 * text object of at most TIER_HOST_SUMMARY_MAX bytes, exactly
 *   fratier-summary 2\n
 *   host NAME\n
 *   updated SECONDS\n           wall-clock seconds since the epoch when it was counted
 *   files N\n                   regular files of the host whose data is on the tier
 *   logical N\n                 their sizes
 *   stored N\n                  the host's containers there, as its catalog counts them
 *   foreign_logical N\n         bytes of those files read from other hosts' containers (global dedup)
 *   foreign_stored N\n          what the chunks behind them take in those containers, each chunk once
 * numbers decimal, without sign or leading zeros, at most 19 digits.
 * Version 1 (written before foreign chunks were counted) is the same
 * without the last two lines: it parses with has_foreign false.  Anything
 * else is -EBADMSG.  The logical bytes of a host are in its catalog only:
 * this is how the others learn them (tierctl report --by host).
 */
typedef struct TierHostSummary {
	char host[CONFIG_HOST_NAME_MAX + 1];
	uint64_t updated;
	uint64_t files;
	uint64_t logical;
	uint64_t stored;
	bool has_foreign; /* version 2: the next two are the host's */
	uint64_t foreign_logical;
	uint64_t foreign_stored;
} TierHostSummary;

int tier_host_summary_parse(const void *buf, size_t len, TierHostSummary *ret);
/* Writes s in the stored form into buf (NUL-terminated); returns its length, or -EINVAL. */
int tier_host_summary_format(const TierHostSummary *s, char buf[static TIER_HOST_SUMMARY_MAX]);

/*
 * Publishes s on the host's own view b of the tier (tier_backend_prefix_new()):
 * written to s/summary.tmp, synced, renamed onto s/summary.
 */
int tier_shared_summary_put(DedupBackend *b, const TierHostSummary *s);
/* Reads host's summary from the tier's root b: 0, -ENOENT (none published), -EBADMSG, or an I/O error. */
int tier_shared_summary_get(DedupBackend *b, const char *host, TierHostSummary *ret);

/* What one host keeps on a shared tier, by listing it (tier_shared_usage()). */
typedef struct TierSharedUsage {
	char host[CONFIG_HOST_NAME_MAX + 1];
	uint64_t objects;
	uint64_t bytes;
	uint64_t shared; /* of bytes: its containers another host's latest reference publication lists */
} TierSharedUsage;

/*
 * Lists every object of the shared tier whose root is sh->root that
 * belongs to a host: below h/NAME/ and hosts/NAME.host*, charged to NAME;
 * anything else there (not written by fratier) goes to a row with host ""
 * so that the rows add up to everything listed under h/ and hosts/.  A
 * container of NAME is counted in shared too when the latest reference
 * publication of another host that is not retired lists it (those are
 * read first).  Sorted by host.  *ret (free it) gets *ret_n rows.
 * Returns 0, or the error of listing, of sizing an object (one removed
 * meanwhile is passed over) or of reading a publication.
 */
int tier_shared_usage(const DedupShared *sh, TierSharedUsage **ret, size_t *ret_n);

/* Reads host's record: 0, -ENOENT (no such host), -EBADMSG, or an I/O error. */
int tier_shared_read_host(DedupBackend *b, const char *host, TierHostRecord *ret);

/*
 * A backend showing the objects of inner below directory prefix (valid
 * per dedup/backend.h, contract 1) as its own: "c/.." is inner's
 * "PREFIX/c/..".  Takes inner (freed with the new backend, or on failure).
 * Returns 0, -EINVAL, -ENOMEM.
 */
int tier_backend_prefix_new(DedupBackend *inner, const char *prefix, DedupBackend **ret);

/*
 * Global dedup (docs/SHARED.md; dedup/store.h, DedupShared): the name on
 * the tier's root of object `name` of host's own view, "h/HOST/NAME".
 * Returns 0, or -EINVAL (an invalid host or name, or too long).
 */
int tier_shared_object_name(const char *host, const char *name, char ret[static DEDUP_BACKEND_NAME_MAX + 1]);

/*
 * Calls cb with every host that has a record on the shared tier whose root
 * is b and is not retired (records that do not read are skipped: a host
 * being registered, or damage, which registration reports).  cb's negative
 * return stops it and is returned.  Returns 0 or the error of listing.
 */
int tier_shared_hosts(DedupBackend *b, int (*cb)(const char *host, void *userdata), void *userdata);
/*
 * As tier_shared_hosts(), for collection (DedupShared.holders): every host
 * that may hold references, so a damaged record is a host too and a record
 * that cannot be read fails the whole listing; only `retired` leaves out.
 */
int tier_shared_holders(DedupBackend *b, int (*cb)(const char *host, void *userdata), void *userdata);
