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

#define TIER_HOST_RECORD_MAX 512
#define TIER_HOST_INSTANCE_SIZE 16
/* How long a host's lease lasts past its last renewal; the daemon renews every TIER_RETRY_S. */
#define TIER_SHARED_LEASE_S 60
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
 * (-EPERM); otherwise writes a new record with a lease of
 * TIER_SHARED_LEASE_S and reads it back.  *ret_error (free it; may stay
 * NULL) gets the reason to show for a refusal.
 */
int tier_shared_register(DedupBackend *b, const char *host, const uint8_t instance[static TIER_HOST_INSTANCE_SIZE],
			 uint64_t now, char **ret_error);

/*
 * Renews the lease: -EBUSY (another instance took the name over: the lease
 * had run out), -EPERM (retired meanwhile), else the error of writing.
 */
int tier_shared_renew(DedupBackend *b, const char *host, const uint8_t instance[static TIER_HOST_INSTANCE_SIZE],
		      uint64_t now);

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
