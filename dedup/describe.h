/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/*
 * A tier that describes itself: the *description* of a store is one object
 * on its backend listing the files placed on that tier, each as an opaque
 * attributes blob (whatever the caller needs to put the file back: tier/
 * formats path, owner, mode and times, dedup/ never looks inside) and its
 * recipe in content ids rather than catalog row ids.  With the containers,
 * whose frames carry their own ids, that is enough to rebuild every file of
 * the tier without the catalog (disaster recovery: the hot tier is gone).
 * Layout: docs/FORMAT.md, "Tier description".
 *
 * Writing replaces the whole description atomically: the records go to a
 * temporary object, which is synced and then renamed over the previous
 * description (dedup_describe_commit()), so a reader finds either the old
 * or the new one, complete.
 *
 * Reading back (dedup_description_parse(), dedup_salvage_*()) needs only
 * the backend: the salvage reader lists and walks the containers itself and
 * finds a chunk by its id; every chunk it returns has been re-hashed against
 * that id, so a damaged or missing chunk is an error, never wrong bytes.
 *
 * Errors: -EBADMSG (corrupt), -EPROTONOSUPPORT (a newer version), -ESTALE
 * (the file is no longer whole on this store), -ENOENT, -ENOMEM, -EINVAL, or
 * a backend/catalog error.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dedup/backend.h"
#include "dedup/fingerprint.h"
#include "dedup/store.h"

#define DEDUP_DESCRIPTION_NAME "d/description.ftd"
#define DEDUP_DESCRIPTION_TMP_NAME "d/description.tmp"
/* Version 2: literal entries and Oracle chunking (version 1 descriptions are still read). */
#define DEDUP_DESCRIPTION_VERSION 2
/* Sealed: a version 2 image AES-256-GCM under the description subkey (docs/FORMAT.md). */
#define DEDUP_DESCRIPTION_VERSION_SEALED 3
#define DEDUP_DESCRIPTION_HEADER_SIZE 64u
#define DEDUP_DESCRIPTION_TRAILER_SIZE 32u
#define DEDUP_DESCRIPTION_RECORD_HEADER_SIZE 32u
#define DEDUP_DESCRIPTION_ENTRY_SIZE 40u
/* Largest attributes blob of one record. */
#define DEDUP_DESCRIPTION_ATTRS_MAX 8192u
/* Most recipe entries of one record: a file of 2^63 bytes in zero runs of 2^30 fits easily under it. */
#define DEDUP_DESCRIPTION_ENTRIES_MAX (UINT32_C(1) << 26)
/* No description object is read back if larger (64 GiB): a claim beyond it is corrupt. */
#define DEDUP_DESCRIPTION_SIZE_MAX (UINT64_C(1) << 36)

/*
 * One piece of a described file: `length` zero bytes, `length` literal
 * bytes (held in id.bytes), or the chunk whose content id is `id`.
 */
typedef struct DedupDescribedEntry {
	DedupChunkId id; /* all zero for a zero run; a literal's bytes, then zeros */
	uint32_t length;
	bool zero;
	bool literal;
} DedupDescribedEntry;

/* One record, as the parser hands it over: valid during the callback only. */
typedef struct DedupDescribedFile {
	const void *attrs;        /* the caller's blob, 0..DEDUP_DESCRIPTION_ATTRS_MAX bytes */
	size_t attrs_len;
	bool has_recipe;          /* false: a record of attributes alone (a directory) */
	DedupChunkerParams params; /* what the file was chunked with */
	uint64_t size;            /* the sum of the entries' lengths */
	size_t n_entries;
	const DedupDescribedEntry *entries; /* NULL when n_entries is 0 */
} DedupDescribedFile;

typedef struct DedupDescriptionInfo {
	uint32_t tier;            /* the store the description was written by */
	uint64_t generation;
	uint64_t records;
} DedupDescriptionInfo;

typedef struct DedupDescribeWriter DedupDescribeWriter;

/*
 * Starts a new description of store s (written to its backend, replacing
 * the current one only at commit).  generation is recorded for reports.
 * One writer per store at a time: the caller serialises them.  Not to be
 * called holding a catalog transaction.
 * Returns: 0, -ENOMEM, or a backend error.
 */
int dedup_describe_begin(DedupStore *s, uint64_t generation, DedupDescribeWriter **ret);

/*
 * Appends a record: attrs[0, attrs_len) and, with with_recipe, the recipe of
 * ino as the catalog holds it now, which must cover exactly file_size bytes
 * with chunks of this store.  -ESTALE if it does not (the file moved,
 * changed or went away meanwhile: the caller leaves it out, nothing was
 * written).  Not inside a catalog transaction.
 * Returns: 0, -ESTALE, -EINVAL (attrs too long), -EIO (a recipe that does
 * not decode), -ENOMEM, or a catalog/backend error (the writer is then
 * dead: only free() is left).
 */
int dedup_describe_add(DedupDescribeWriter *w, const void *attrs, size_t attrs_len, bool with_recipe, uint64_t ino,
		       uint64_t file_size);

/*
 * Writes the trailer, syncs the object and renames it over the store's
 * description.  When it returns 0 the new description is durable and the
 * old one gone.  Returns: 0, or a backend error (the old description stays).
 */
int dedup_describe_commit(DedupDescribeWriter *w);

/* Accepts NULL; returns NULL.  Uncommitted: the temporary object is removed, the old description stays. */
DedupDescribeWriter *dedup_describe_free(DedupDescribeWriter *w);

/*
 * Removes the store's description (a tier too full to take a new one must
 * still be collectable, and no description is safer than a stale one).
 * Returns: 0 (also when there was none), or a backend error.
 */
int dedup_describe_remove(DedupStore *s);

/*
 * Reads the description object of backend b into a new buffer (free() it),
 * opened with key (the description subkey, or NULL) if it is sealed
 * (dedup_description_unseal()): what it returns is a plain image for
 * dedup_description_parse().
 * Returns: 0, -ENOENT (none), -EBADMSG (larger than DEDUP_DESCRIPTION_SIZE_MAX;
 * sealed and failing authentication: another key, or changed), -ENOKEY
 * (sealed, and no key), -ENOMEM, -EIO, or a backend error.
 */
int dedup_description_load(DedupBackend *b, const uint8_t *key, void **ret_buf, size_t *ret_len);
/*
 * As dedup_description_load(), with the description key of keys (a store,
 * see dedup_salvage_open()) and, if it fails authentication, each of its
 * older keys': a description written before the newest key was added.
 */
int dedup_description_load_keys(DedupBackend *b, const DedupStore *keys, void **ret_buf, size_t *ret_len);

/*
 * Opens a sealed description image buf[0, len) in place: checks its
 * envelope header, decrypts the rest under key (DEDUP_KEY_SIZE bytes) and
 * checks the tag, then moves the plain image to the start of buf; *ret_len
 * gets its length.  An image that is not sealed is left as it is (*ret_len
 * = len).  Returns: 0, -EBADMSG (a bad envelope, or authentication failed:
 * buf is then wiped), -ENOKEY (sealed, key NULL), -ENOMEM, -EIO.
 */
int dedup_description_unseal(void *buf, size_t len, const uint8_t *key, size_t *ret_len);

/*
 * Validates the description image buf[0, len): header, trailer and the
 * checksum of the whole object first, so cb sees records of a complete,
 * undamaged description only; then each record (its checksum, every field,
 * the recipe's entries adding up to its size) just before cb gets it.  A
 * record that fails stops the parse with -EBADMSG (records before it have
 * been handed over).  cb's negative return stops it and is returned.
 * info (optional) gets the header's fields and the record count.
 * Returns: 0, -EBADMSG, -EPROTONOSUPPORT, -ENOMEM, or cb's error.
 */
int dedup_description_parse(const void *buf, size_t len,
			    int (*cb)(const DedupDescribedFile *f, void *userdata), void *userdata,
			    DedupDescriptionInfo *info);

/* Chunks found by a salvage reader: by content id, from the containers alone. */
typedef struct DedupSalvage DedupSalvage;

typedef struct DedupSalvageStats {
	uint64_t containers;         /* container objects found */
	uint64_t damaged_containers; /* whose header was unreadable: nothing of them is used */
	uint64_t torn_containers;    /* walked frame by frame up to damage (an open container cut by a crash) */
	uint64_t chunks;             /* frames indexed */
	/* Regions whose table is sealed (version 4) that did not open (no key, another, damage): not indexed. */
	uint64_t unopened_regions;
} DedupSalvageStats;

/*
 * Lists every container object of backend b and indexes its frames by
 * chunk id (sealed containers through their index, others frame by frame;
 * a container damaged part way keeps the frames before the damage).  Reads
 * every container once; keeps about 56 bytes per frame in memory.  Not
 * thread-safe: one thread uses a salvage reader.  keys (borrowed, or NULL:
 * none) is a store opened with the keys the tier was written under
 * (DedupStoreOptions.id_key, content_key and old_keys): chunks are verified
 * against keyed ids with its id key, plain ones without, and sealed
 * regions, bound to the container id their container's header names, are
 * opened with the content key that sealed them: without it their chunks
 * read -EIO, and those of version 4, whose table is sealed too, are
 * opened (and re-hashed) here to be indexed at all: without the key they
 * are not found (-ENOENT).
 * Returns: 0, -ENOMEM, or a backend error (listing or reading).
 */
int dedup_salvage_open(DedupBackend *b, const DedupStore *keys, DedupSalvage **ret);

/*
 * As dedup_salvage_open(), over the containers of several stores' objects
 * below dirs[0, n_dirs) of b ("DIR/c/..."; NULL: b's own "c/"): on a
 * shared tier with global dedup, a host's files may hold chunks stored in
 * other hosts' containers (docs/SHARED.md).
 */
int dedup_salvage_open_many(DedupBackend *b, const char *const *dirs, size_t n_dirs, const DedupStore *keys,
			    DedupSalvage **ret);

/* Can't fail. */
void dedup_salvage_stats(const DedupSalvage *s, DedupSalvageStats *ret);

/*
 * Reads chunk id into buf[0, size), which must hold DEDUP_CHUNK_SIZE_LIMIT_MAX
 * bytes, trying every copy of it found, and returns its length.  Every byte
 * returned has been decoded and re-hashed against id.
 * Returns: the chunk's length, -ENOENT (no container holds it), -EIO (every
 * copy failed its checks), -ENOMEM, or a backend error.
 */
ssize_t dedup_salvage_read(DedupSalvage *s, const DedupChunkId *id, void *buf, size_t size);

/* Accepts NULL; returns NULL. */
DedupSalvage *dedup_salvage_free(DedupSalvage *s);
