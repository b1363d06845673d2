/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * describe.c — a store's description of the files placed on it, and the
 * salvage reader that finds chunks from containers alone.  Format:
 * docs/FORMAT.md, "Tier description".
 *
 * Why one object rewritten whole rather than a journal or one object per
 * file: the description must never name a file whose chunks the collector
 * may already have taken, and must follow renames of directories, which
 * change the path of every file below them.  A full snapshot taken from
 * the catalog just before each collection of the tier (tier/describe.c) gets
 * both with one rule and one atomic rename, and needs no compaction and no
 * recovery of its own: a crash leaves the previous description, complete.
 * The price is a rewrite in O(chunks of the tier) when something changed,
 * paid at most once per collection interval.
 *
 * Invariants:
 *  1. The description object is only ever replaced by rename() of a
 *     complete, synced temporary object (dedup_describe_commit()).
 *  2. Nothing of a record is interpreted before the checksum of the whole
 *     object passes, and every field is range-checked after it anyway (a
 *     hostile writer can compute checksums).
 *  3. A record's recipe names chunks by content id only, each of which the
 *     store held with a reference when the record was written; the salvage
 *     reader returns a chunk's bytes only after re-hashing them.
 *  4. A store that encrypts writes its description sealed (version 3: the
 *     whole version 2 image AES-256-GCM under the description subkey), and
 *     nothing of a sealed description is parsed before its tag checks out.
 */
#include <errno.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/macros.h"
#include "dedup/describe.h"
#include "dedup/le-internal.h"
#include "dedup/store-internal.h"

static const uint8_t header_magic[4] = { 0x89, 'F', 'T', 'D' };
static const uint8_t trailer_magic[4] = { 0x89, 'F', 'T', 'E' };

enum {
	H_MAGIC = 0,
	H_VERSION = 4,
	H_TIER = 8,
	H_GENERATION = 16,
	H_CHECKSUM = 56,
	/* Version 3 (sealed): the nonce and tag in the header's reserved bytes; AAD: bytes 0..23. */
	H_NONCE = 24,
	H_TAG = 36,
	H_RESERVED_SEALED = 52,
	H_AAD = 24,

	T_MAGIC = 0,
	T_COUNT = 8,
	T_BODY_CHECKSUM = 16,
	T_CHECKSUM = 24,

	/* Offsets in a record's body, after its 4-byte length. */
	R_ATTRS_LEN = 0,
	R_FLAGS = 2,
	R_MODE = 3,
	R_MIN = 4,
	R_AVG = 8,
	R_MAX = 12,
	R_SIZE = 16,
	R_COUNT = 24,
	R_RESERVED = 28,
	R_ATTRS = 32,
};
_Static_assert(R_ATTRS == DEDUP_DESCRIPTION_RECORD_HEADER_SIZE, "record header layout");
_Static_assert(DEDUP_DESCRIPTION_ATTRS_MAX <= UINT16_MAX, "attrs_len is a u16");

#define RECORD_FLAG_RECIPE 0x01u
#define ENTRY_CHUNK 0u
#define ENTRY_ZERO 1u
#define ENTRY_LITERAL 2u /* version 2 */
_Static_assert(DEDUP_RECIPE_LITERAL_MAX <= DEDUP_CHUNK_ID_SIZE, "a literal fits an entry's id field");

struct DedupDescribeWriter {
	DedupStore *store;
	DedupBackendFile *file;
	uint64_t offset;
	uint64_t count;
	XXH3_state_t *hash;  /* of every byte written so far */
	uint8_t *buf;        /* the record being built */
	size_t cap;
	DedupRecipeEntry *entries;  /* the recipe of the record being built */
	size_t n_entries, cap_entries;
	uint8_t *literals;          /* the bytes of its literals, in entry order */
	size_t n_literals, cap_literals;
	DedupChunkerParams params;  /* its first segment's */
	uint64_t recipe_end;        /* where the segments collected so far end */
	int error;           /* sticky: a failed write leaves the object unusable */
	bool committed;
	EVP_CIPHER_CTX *cipher; /* sealing: what is appended is encrypted, the envelope header goes first */
	uint8_t *sealed;        /* sealing: a piece of ciphertext on its way to the backend */
	uint8_t envelope[DEDUP_DESCRIPTION_HEADER_SIZE];
};

#define SEAL_STEP ((size_t) 64 << 10)

DedupDescribeWriter *dedup_describe_free(DedupDescribeWriter *w) {
	if (!w)
		return NULL;
	if (w->file)
		dedup_backend_file_close(w->store->backend, w->file);
	if (!w->committed)
		(void) dedup_backend_unlink(w->store->backend, DEDUP_DESCRIPTION_TMP_NAME);
	XXH3_freeState(w->hash);
	EVP_CIPHER_CTX_free(w->cipher);
	free(w->sealed);
	free(w->buf);
	free(w->entries);
	free(w->literals);
	free(w);
	return NULL;
}

DEFINE_CLEANUP_FUNC(DedupDescribeWriter, dedup_describe_free);

/* Every byte of a description crosses to the tier's storage too: counted as the store's regions are. */
static int describe_pwrite(DedupDescribeWriter *w, const void *p, size_t len, uint64_t at) {
	int r = dedup_backend_file_pwrite(w->store->backend, w->file, p, len, at);
	if (r >= 0)
		__atomic_add_fetch(&w->store->bytes_sent, len, __ATOMIC_RELAXED);
	return r;
}

/* Writes p[0, len) at offset `at` of the object, encrypted if sealing (GCM is a stream: any cut works). */
static int writer_put(DedupDescribeWriter *w, const uint8_t *p, size_t len, uint64_t at) {
	if (!w->cipher)
		return describe_pwrite(w, p, len, at);
	for (size_t done = 0; done < len;) {
		size_t n = MIN(len - done, SEAL_STEP);
		int out;
		if (EVP_EncryptUpdate(w->cipher, w->sealed, &out, p + done, (int) n) != 1 || (size_t) out != n)
			return -EIO;
		int r = describe_pwrite(w, w->sealed, n, at + done);
		if (r < 0)
			return r;
		done += n;
	}
	return 0;
}

static int writer_append(DedupDescribeWriter *w, const void *p, size_t len) {
	/* A sealed description is its envelope header, then the version 2 image encrypted. */
	int r = writer_put(w, p, len, w->offset + (w->cipher ? DEDUP_DESCRIPTION_HEADER_SIZE : 0));
	if (r < 0)
		return w->error = r;
	if (XXH3_64bits_update(w->hash, p, len) != XXH_OK)
		return w->error = -ENOMEM;
	w->offset += len;
	return 0;
}

/*
 * Starts sealing under key: the envelope header (docs/FORMAT.md, "Sealed
 * description") with a fresh random nonce; its tag is known at commit.
 */
static int writer_seal_begin(DedupDescribeWriter *w, const uint8_t *key, uint64_t generation) {
	uint8_t *h = w->envelope;
	memset(h, 0, DEDUP_DESCRIPTION_HEADER_SIZE);
	memcpy(h + H_MAGIC, header_magic, sizeof(header_magic));
	h[H_VERSION] = DEDUP_DESCRIPTION_VERSION_SEALED;
	le32_put(h + H_TIER, w->store->tier);
	le64_put(h + H_GENERATION, generation);
	/* Random: a description is rewritten often, under one key, with nothing to count with. */
	if (RAND_bytes(h + H_NONCE, 12) != 1)
		return -EIO;
	w->cipher = EVP_CIPHER_CTX_new();
	w->sealed = malloc(SEAL_STEP);
	if (!w->cipher || !w->sealed)
		return -ENOMEM;
	int n;
	if (EVP_EncryptInit_ex(w->cipher, EVP_aes_256_gcm(), NULL, key, h + H_NONCE) != 1 ||
	    EVP_EncryptUpdate(w->cipher, NULL, &n, h, H_AAD) != 1)
		return -EIO;
	return 0;
}

/* Finishes sealing: the tag into the envelope header, written at offset 0. */
static int writer_seal_end(DedupDescribeWriter *w) {
	uint8_t *h = w->envelope;
	int n;
	if (EVP_EncryptFinal_ex(w->cipher, w->sealed, &n) != 1 ||
	    EVP_CIPHER_CTX_ctrl(w->cipher, EVP_CTRL_GCM_GET_TAG, 16, h + H_TAG) != 1)
		return -EIO;
	le64_put(h + H_CHECKSUM, XXH3_64bits(h, H_CHECKSUM));
	return describe_pwrite(w, h, DEDUP_DESCRIPTION_HEADER_SIZE, 0);
}

static int reserve(uint8_t **buf, size_t *cap, size_t need) {
	if (need <= *cap)
		return 0;
	size_t n = MAX(need, *cap * 2);
	uint8_t *p = realloc(*buf, n);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = n;
	return 0;
}

int dedup_describe_begin(DedupStore *s, uint64_t generation, DedupDescribeWriter **ret) {
	_cleanup_(dedup_describe_freep) DedupDescribeWriter *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->store = s;
	w->hash = XXH3_createState();
	if (!w->hash || XXH3_64bits_reset(w->hash) != XXH_OK)
		return -ENOMEM;
	/* A temporary object left by a crash is cut to nothing and reused. */
	int r = dedup_backend_open_write(s->backend, DEDUP_DESCRIPTION_TMP_NAME, true, 0, &w->file);
	if (r == -EUCLEAN)
		r = -EIO;
	if (r < 0)
		return r;
	if (s->opts.encrypt) {
		r = writer_seal_begin(w, s->opts.description_key, generation);
		if (r < 0)
			return r;
	}

	uint8_t h[DEDUP_DESCRIPTION_HEADER_SIZE] = {};
	memcpy(h + H_MAGIC, header_magic, sizeof(header_magic));
	h[H_VERSION] = DEDUP_DESCRIPTION_VERSION;
	le32_put(h + H_TIER, s->tier);
	le64_put(h + H_GENERATION, generation);
	le64_put(h + H_CHECKSUM, XXH3_64bits(h, H_CHECKSUM));
	r = writer_append(w, h, sizeof(h));
	if (r < 0)
		return r;
	*ret = TAKE_PTR(w);
	return 0;
}

static int collect_segment(uint64_t start, const void *blob, size_t size, void *userdata) {
	DedupDescribeWriter *w = userdata;
	DedupRecipeSegment *seg;
	int r = dedup_recipe_segment_decode(blob, size, &seg);
	if (r < 0)
		return r == -ENOMEM ? r : -EIO;
	/* Segments come in start order; a gap or overlap is a recipe that changed under us, or damage. */
	if (seg->start != start || start != w->recipe_end) {
		free(seg);
		return -ESTALE;
	}
	if (w->n_entries + seg->n_entries > DEDUP_DESCRIPTION_ENTRIES_MAX) {
		free(seg);
		return -EFBIG;
	}
	if (w->n_entries + seg->n_entries > w->cap_entries) {
		size_t n = MAX(w->n_entries + seg->n_entries, w->cap_entries * 2);
		DedupRecipeEntry *p = realloc(w->entries, n * sizeof(*p));
		if (!p) {
			free(seg);
			return -ENOMEM;
		}
		w->entries = p;
		w->cap_entries = n;
	}
	if (w->n_entries == 0)
		w->params = seg->params;
	/* A literal's bytes live in the segment, freed below: keep a copy (its pointer is not used again). */
	for (size_t i = 0; i < seg->n_entries; i++) {
		if (seg->entries[i].chunk != DEDUP_RECIPE_LITERAL)
			continue;
		r = reserve(&w->literals, &w->cap_literals, w->n_literals + seg->entries[i].length);
		if (r < 0) {
			free(seg);
			return r;
		}
		memcpy(w->literals + w->n_literals, seg->entries[i].literal, seg->entries[i].length);
		w->n_literals += seg->entries[i].length;
	}
	memcpy(w->entries + w->n_entries, seg->entries, seg->n_entries * sizeof(DedupRecipeEntry));
	w->n_entries += seg->n_entries;
	w->recipe_end += seg->length;
	free(seg);
	return 0;
}

int dedup_describe_add(DedupDescribeWriter *w, const void *attrs, size_t attrs_len, bool with_recipe, uint64_t ino,
		       uint64_t file_size) {
	int r;

	if (w->error)
		return w->error;
	if (attrs_len > DEDUP_DESCRIPTION_ATTRS_MAX || (attrs_len > 0 && !attrs))
		return -EINVAL;
	w->n_entries = 0;
	w->n_literals = 0;
	w->recipe_end = 0;
	/* An empty file has no segment: any valid parameters will do to describe it. */
	w->params = DEDUP_CHUNKER_PARAMS_DEFAULT;
	if (with_recipe) {
		r = catalog_recipe_foreach(w->store->catalog, ino, collect_segment, w);
		if (r == -ENOENT)
			r = 0;
		if (r < 0)
			return r;
	}
	const DedupChunkerParams params = w->params;

	size_t body = DEDUP_DESCRIPTION_RECORD_HEADER_SIZE + attrs_len + w->n_entries * DEDUP_DESCRIPTION_ENTRY_SIZE;
	if (body > UINT32_MAX)
		return -EFBIG;
	r = reserve(&w->buf, &w->cap, 4 + body + 8);
	if (r < 0)
		return r;
	uint8_t *rec = w->buf, *b = rec + 4;
	memset(rec, 0, 4 + DEDUP_DESCRIPTION_RECORD_HEADER_SIZE);
	le32_put(rec, (uint32_t) body);
	le16_put(b + R_ATTRS_LEN, (uint16_t) attrs_len);
	if (attrs_len > 0)
		memcpy(b + R_ATTRS, attrs, attrs_len);

	if (with_recipe) {
		uint64_t total = 0;
		size_t literal = 0;
		uint8_t *e = b + R_ATTRS + attrs_len;
		for (size_t i = 0; i < w->n_entries; i++, e += DEDUP_DESCRIPTION_ENTRY_SIZE) {
			const DedupRecipeEntry *re = w->entries + i;
			memset(e, 0, DEDUP_DESCRIPTION_ENTRY_SIZE);
			le32_put(e, re->length);
			total += re->length;
			if (re->chunk == 0) {
				le32_put(e + 4, ENTRY_ZERO);
				continue;
			}
			if (re->chunk == DEDUP_RECIPE_LITERAL) {
				le32_put(e + 4, ENTRY_LITERAL);
				memcpy(e + 8, w->literals + literal, re->length);
				literal += re->length;
				continue;
			}
			CatalogChunk ch;
			r = catalog_chunk_get(w->store->catalog, re->chunk, &ch);
			if (r == -ENOENT)
				return -ESTALE;
			if (r < 0)
				return r;
			/* A chunk of another tier: the file moved between the segments we read. */
			if (ch.tier != w->store->tier || ch.plain_size != re->length || ch.refs == 0)
				return -ESTALE;
			le32_put(e + 4, ENTRY_CHUNK);
			memcpy(e + 8, ch.digest, CATALOG_DIGEST_SIZE);
		}
		if (total != file_size)
			return -ESTALE;
		b[R_FLAGS] = RECORD_FLAG_RECIPE;
		b[R_MODE] = (uint8_t) params.mode;
		le32_put(b + R_MIN, (uint32_t) params.min_size);
		le32_put(b + R_AVG, (uint32_t) params.avg_size);
		le32_put(b + R_MAX, (uint32_t) params.max_size);
		le64_put(b + R_SIZE, file_size);
		le32_put(b + R_COUNT, (uint32_t) w->n_entries);
	}
	le64_put(b + body, XXH3_64bits(rec, 4 + body));
	r = writer_append(w, rec, 4 + body + 8);
	if (r < 0)
		return r;
	w->count++;
	return 0;
}

int dedup_describe_commit(DedupDescribeWriter *w) {
	uint8_t t[DEDUP_DESCRIPTION_TRAILER_SIZE] = {};
	int r;

	if (w->error)
		return w->error;
	memcpy(t + T_MAGIC, trailer_magic, sizeof(trailer_magic));
	le64_put(t + T_COUNT, w->count);
	le64_put(t + T_BODY_CHECKSUM, XXH3_64bits_digest(w->hash));
	le64_put(t + T_CHECKSUM, XXH3_64bits(t, T_CHECKSUM));
	r = writer_append(w, t, sizeof(t));
	if (r >= 0 && w->cipher)
		r = writer_seal_end(w);
	if (r >= 0)
		r = dedup_backend_file_sync(w->store->backend, w->file);
	dedup_backend_file_close(w->store->backend, w->file);
	w->file = NULL;
	if (r >= 0)
		r = dedup_backend_rename(w->store->backend, DEDUP_DESCRIPTION_TMP_NAME, DEDUP_DESCRIPTION_NAME);
	if (r < 0)
		return w->error = r;
	w->committed = true;
	return 0;
}

int dedup_describe_remove(DedupStore *s) {
	int r = dedup_backend_unlink(s->backend, DEDUP_DESCRIPTION_NAME);
	return r == -ENOENT ? 0 : r;
}

int dedup_description_unseal(void *buf, size_t len, const uint8_t *key, size_t *ret_len) {
	uint8_t *p = buf;

	/* Not sealed: as it is, for dedup_description_parse() to judge. */
	if (!p || len < DEDUP_DESCRIPTION_HEADER_SIZE || memcmp(p + H_MAGIC, header_magic, sizeof(header_magic)) != 0 ||
	    p[H_VERSION] != DEDUP_DESCRIPTION_VERSION_SEALED) {
		*ret_len = len;
		return 0;
	}
	if (XXH3_64bits(p, H_CHECKSUM) != le64_get(p + H_CHECKSUM) || !le_is_zero(p + 5, 3) || !le_is_zero(p + 12, 4) ||
	    !le_is_zero(p + H_RESERVED_SEALED, H_CHECKSUM - H_RESERVED_SEALED))
		return -EBADMSG;
	if (!key)
		return -ENOKEY;
	size_t n = len - DEDUP_DESCRIPTION_HEADER_SIZE;
	if (n > INT_MAX)
		return -EBADMSG;
	/* Invariant 4: a tag that does not match (changed, or another key) leaves no plaintext behind. */
	int r = dedup_gcm_open(key, p + H_NONCE, p, H_AAD, p + DEDUP_DESCRIPTION_HEADER_SIZE, n, p + H_TAG);
	if (r < 0)
		return r;
	memmove(p, p + DEDUP_DESCRIPTION_HEADER_SIZE, n);
	*ret_len = n;
	return 0;
}

int dedup_description_load(DedupBackend *b, const uint8_t *key, void **ret_buf, size_t *ret_len) {
	uint64_t size;
	int r = dedup_backend_size(b, DEDUP_DESCRIPTION_NAME, &size);
	if (r < 0)
		return r;
	if (size > DEDUP_DESCRIPTION_SIZE_MAX || size > SIZE_MAX)
		return -EBADMSG;
	_cleanup_free_ void *buf = malloc(MAX(size, (uint64_t) 1));
	if (!buf)
		return -ENOMEM;
	for (uint64_t off = 0; off < size;) {
		size_t step = (size_t) MIN(size - off, (uint64_t) 64 << 20);
		r = dedup_backend_pread_full(b, DEDUP_DESCRIPTION_NAME, (uint8_t *) buf + off, step, off);
		if (r == -EUCLEAN)
			r = -EBADMSG; /* shorter than its size a moment ago: replaced, or damaged */
		if (r < 0)
			return r;
		off += step;
	}
	size_t len = (size_t) size;
	r = dedup_description_unseal(buf, len, key, &len);
	if (r < 0)
		return r;
	*ret_buf = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

int dedup_description_load_keys(DedupBackend *b, const DedupStore *keys, void **ret_buf, size_t *ret_len) {
	int r = dedup_description_load(b, keys ? dedup_store_description_key(keys) : NULL, ret_buf, ret_len);
	const DedupOldKeys *old = keys ? dedup_store_old_keys(keys) : NULL;
	/* The envelope names no key: newest first, then the older ones (a handful at most). */
	for (size_t i = old ? old->n : 0; r == -EBADMSG && i > 0; i--)
		r = dedup_description_load(b, old->keys[i - 1].description, ret_buf, ret_len);
	return r;
}

/*
 * Parses and checks one record's body b[0, len) of a description of
 * `version`; entries go to *entries (grown as needed).
 */
static int record_parse(uint8_t version, const uint8_t *b, size_t len, DedupDescribedEntry **entries, size_t *cap,
			DedupDescribedFile *ret) {
	if (len < DEDUP_DESCRIPTION_RECORD_HEADER_SIZE)
		return -EBADMSG;
	size_t attrs_len = le16_get(b + R_ATTRS_LEN);
	uint8_t flags = b[R_FLAGS];
	uint32_t n = le32_get(b + R_COUNT);
	if (attrs_len > DEDUP_DESCRIPTION_ATTRS_MAX || (flags & ~RECORD_FLAG_RECIPE) != 0 ||
	    le32_get(b + R_RESERVED) != 0 || n > DEDUP_DESCRIPTION_ENTRIES_MAX)
		return -EBADMSG;
	if (len != DEDUP_DESCRIPTION_RECORD_HEADER_SIZE + attrs_len + (size_t) n * DEDUP_DESCRIPTION_ENTRY_SIZE)
		return -EBADMSG;

	*ret = (DedupDescribedFile) {
		.attrs = b + R_ATTRS,
		.attrs_len = attrs_len,
		.has_recipe = flags & RECORD_FLAG_RECIPE,
		.size = le64_get(b + R_SIZE),
		.n_entries = n,
	};
	if (!ret->has_recipe) {
		/* Attributes alone: every recipe field is zero. */
		if (!le_is_zero(b + R_MODE, R_COUNT + 4 - R_MODE))
			return -EBADMSG;
		return 0;
	}
	/* Oracle chunking and its literals came with version 2. */
	if (b[R_MODE] >= _DEDUP_CHUNKER_MODE_MAX || (version < 2 && b[R_MODE] == DEDUP_CHUNKER_ORACLE))
		return -EBADMSG;
	ret->params = (DedupChunkerParams) {
		.mode = (DedupChunkerMode) b[R_MODE],
		.min_size = le32_get(b + R_MIN),
		.avg_size = le32_get(b + R_AVG),
		.max_size = le32_get(b + R_MAX),
	};
	if (dedup_chunker_params_validate(&ret->params) < 0 || ret->size > DEDUP_RECIPE_FILE_SIZE_MAX)
		return -EBADMSG;
	if (n > *cap) {
		DedupDescribedEntry *p = realloc(*entries, (size_t) n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		*entries = p;
		*cap = n;
	}
	uint64_t total = 0;
	const uint8_t *e = b + R_ATTRS + attrs_len;
	for (size_t i = 0; i < n; i++, e += DEDUP_DESCRIPTION_ENTRY_SIZE) {
		DedupDescribedEntry *d = *entries + i;
		uint32_t kind = le32_get(e + 4);
		d->length = le32_get(e);
		d->zero = kind == ENTRY_ZERO;
		d->literal = kind == ENTRY_LITERAL;
		memcpy(d->id.bytes, e + 8, DEDUP_CHUNK_ID_SIZE);
		if (kind > ENTRY_LITERAL || d->length == 0)
			return -EBADMSG;
		if (d->zero ? d->length > DEDUP_RECIPE_ZERO_RUN_MAX || !le_is_zero(e + 8, DEDUP_CHUNK_ID_SIZE)
		    : d->literal ? ret->params.mode != DEDUP_CHUNKER_ORACLE || d->length > DEDUP_RECIPE_LITERAL_MAX ||
				   !le_is_zero(e + 8 + d->length, DEDUP_CHUNK_ID_SIZE - d->length)
				 : d->length > DEDUP_CHUNK_SIZE_LIMIT_MAX)
			return -EBADMSG;
		if (__builtin_add_overflow(total, d->length, &total))
			return -EBADMSG;
	}
	if (total != ret->size)
		return -EBADMSG;
	ret->entries = *entries;
	return 0;
}

int dedup_description_parse(const void *buf, size_t len,
			    int (*cb)(const DedupDescribedFile *f, void *userdata), void *userdata,
			    DedupDescriptionInfo *info) {
	const uint8_t *p = buf;

	if (!p || len < DEDUP_DESCRIPTION_HEADER_SIZE + DEDUP_DESCRIPTION_TRAILER_SIZE ||
	    memcmp(p + H_MAGIC, header_magic, sizeof(header_magic)) != 0 || p[H_VERSION] == 0)
		return -EBADMSG;
	if (p[H_VERSION] > DEDUP_DESCRIPTION_VERSION)
		return -EPROTONOSUPPORT;
	if (XXH3_64bits(p, H_CHECKSUM) != le64_get(p + H_CHECKSUM) || !le_is_zero(p + 5, 3) ||
	    !le_is_zero(p + 12, 4) || !le_is_zero(p + 24, H_CHECKSUM - 24))
		return -EBADMSG;

	size_t end = len - DEDUP_DESCRIPTION_TRAILER_SIZE;
	const uint8_t *t = p + end;
	if (memcmp(t + T_MAGIC, trailer_magic, sizeof(trailer_magic)) != 0 || !le_is_zero(t + 4, 4) ||
	    XXH3_64bits(t, T_CHECKSUM) != le64_get(t + T_CHECKSUM) ||
	    XXH3_64bits(p, end) != le64_get(t + T_BODY_CHECKSUM))
		return -EBADMSG;
	uint64_t count = le64_get(t + T_COUNT);

	_cleanup_free_ DedupDescribedEntry *entries = NULL;
	size_t cap = 0;
	uint64_t seen = 0;
	for (size_t off = DEDUP_DESCRIPTION_HEADER_SIZE; off < end; seen++) {
		if (end - off < 4 + 8)
			return -EBADMSG;
		size_t body = le32_get(p + off);
		if (body > end - off - 4 - 8)
			return -EBADMSG;
		if (XXH3_64bits(p + off, 4 + body) != le64_get(p + off + 4 + body))
			return -EBADMSG;
		DedupDescribedFile f;
		int r = record_parse(p[H_VERSION], p + off + 4, body, &entries, &cap, &f);
		if (r < 0)
			return r;
		if (seen >= count)
			return -EBADMSG;
		if (cb) {
			r = cb(&f, userdata);
			if (r < 0)
				return r;
		}
		off += 4 + body + 8;
	}
	if (seen != count)
		return -EBADMSG;
	if (info)
		*info = (DedupDescriptionInfo) {
			.tier = le32_get(p + H_TIER),
			.generation = le64_get(p + H_GENERATION),
			.records = count,
		};
	return 0;
}

/* Salvage: where each frame found is, by chunk id. */
typedef struct SalvageFrame {
	DedupChunkId id;
	uint64_t offset;        /* of the chunk's unit */
	uint32_t unit_size;
	uint32_t region_offset; /* regions: where the chunk starts in the region */
	uint32_t object;        /* index into names */
	bool region;
} SalvageFrame;

struct DedupSalvage {
	DedupBackend *backend;
	char **names;
	size_t n_names, cap_names;
	uint64_t *container_ids; /* per name: the id its header names (a sealed region's place), 0 if unreadable */
	SalvageFrame *frames;
	size_t n_frames, cap_frames;
	DedupSalvageStats stats;
	StoreDecoded dec;    /* the unit decoded last (a restore reads a region's chunks in a row) */
	bool dec_valid;
	uint32_t dec_object;
	uint64_t dec_offset;
	uint8_t *unit;       /* DEDUP_REGION_SIZE_MAX bytes */
};

DedupSalvage *dedup_salvage_free(DedupSalvage *s) {
	if (!s)
		return NULL;
	for (size_t i = 0; i < s->n_names; i++)
		free(s->names[i]);
	free(s->names);
	free(s->container_ids);
	free(s->frames);
	store_decoded_done(&s->dec);
	free(s->unit);
	free(s);
	return NULL;
}

DEFINE_CLEANUP_FUNC(DedupSalvage, dedup_salvage_free);

static int collect_name(const char *name, void *userdata) {
	DedupSalvage *s = userdata;
	size_t len = strlen(name), tail = sizeof("c/xx/0123456789abcdef.ftc") - 1;
	uint64_t id;
	/*
	 * Only containers, named as a store names them, maybe below a
	 * directory: anything else (a temporary file of a backend) holds
	 * nothing of ours.
	 */
	if (len < tail || (len > tail && name[len - tail - 1] != '/') ||
	    dedup_container_name_parse(name + len - tail, &id) < 0)
		return 0;
	if (s->n_names == s->cap_names) {
		size_t n = MAX(s->cap_names * 2, (size_t) 64);
		char **p = realloc(s->names, n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->names = p;
		s->cap_names = n;
	}
	s->names[s->n_names] = strdup(name);
	if (!s->names[s->n_names])
		return -ENOMEM;
	s->n_names++;
	return 0;
}

typedef struct SalvageWalk {
	DedupSalvage *s;
	uint32_t object;
	const uint8_t *buf; /* the container's bytes */
} SalvageWalk;

static int frame_reserve(DedupSalvage *s) {
	if (s->n_frames == s->cap_frames) {
		size_t n = MAX(s->cap_frames * 2, (size_t) 1024);
		SalvageFrame *p = realloc(s->frames, n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->frames = p;
		s->cap_frames = n;
	}
	return 0;
}

/*
 * A region whose table is sealed (version 4): its chunks are known only
 * once it is opened with the key (and, as every salvaged unit, re-hashed
 * chunk by chunk).  One that does not open indexes nothing: its chunks
 * could not be read back either.
 */
static int sealed_region(SalvageWalk *sw, const DedupContainerEntry *e) {
	DedupSalvage *s = sw->s;
	s->dec_valid = false;
	int r = store_unit_decode(true, sw->buf + e->offset, e->frame_size, s->container_ids[sw->object], e->offset,
				  true, &s->dec);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		s->stats.unopened_regions++;
		return 0;
	}
	for (uint32_t c = 0; c < s->dec.count; c++) {
		r = frame_reserve(s);
		if (r < 0)
			return r;
		s->frames[s->n_frames++] = (SalvageFrame) {
			.id = s->dec.ids[c],
			.offset = e->offset,
			.unit_size = e->frame_size,
			.region_offset = c == 0 ? 0 : s->dec.ends[c - 1],
			.object = sw->object,
			.region = true,
		};
		s->stats.chunks++;
	}
	/* The restore reads its chunks in a row: it stays decoded. */
	s->dec_valid = true;
	s->dec_object = sw->object;
	s->dec_offset = e->offset;
	return 0;
}

static int walk_entry(const DedupContainerEntry *e, void *userdata) {
	SalvageWalk *sw = userdata;
	DedupSalvage *s = sw->s;
	if (e->sealed_count > 0)
		return sealed_region(sw, e);
	int r = frame_reserve(s);
	if (r < 0)
		return r;
	s->frames[s->n_frames++] = (SalvageFrame) {
		.id = e->id,
		.offset = e->offset,
		.unit_size = e->frame_size,
		.region_offset = e->region_offset,
		.object = sw->object,
		.region = e->region,
	};
	s->stats.chunks++;
	return 0;
}

static int frame_cmp(const void *a, const void *b) {
	return memcmp(((const SalvageFrame *) a)->id.bytes, ((const SalvageFrame *) b)->id.bytes, DEDUP_CHUNK_ID_SIZE);
}

/*
 * A region that fails its checks but whose header holds: its chunks are
 * indexed by what its table says (unverified: their reads then fail with
 * -EIO, every chunk being re-hashed), and the walk goes on after it, so one
 * damaged region does not hide the rest of the container.  *ret_size is 0
 * when the walk cannot go on.
 */
static int damaged_region(SalvageWalk *sw, uint8_t version, uint64_t offset, const uint8_t *p, size_t len,
			  size_t *ret_size) {
	DedupRegionHeader h;
	*ret_size = 0;
	if (version != DEDUP_CONTAINER_VERSION || dedup_region_header_parse(p, len, &h) < 0 ||
	    dedup_region_header_region_size(&h) > len)
		return 0;
	*ret_size = dedup_region_header_region_size(&h);
	if (dedup_region_header_table_is_sealed(&h)) {
		/* No table to trust without the key: opening it is the only check there is. */
		DedupContainerEntry e = {
			.offset = offset,
			.frame_size = (uint32_t) *ret_size,
			.plain_size = h.plain_size,
			.region = true,
			.sealed_count = h.count,
		};
		return walk_entry(&e, sw);
	}
	uint32_t at = 0;
	for (size_t i = 0; i < h.count; i++) {
		DedupContainerEntry e = {
			.offset = offset,
			.frame_size = (uint32_t) dedup_region_header_region_size(&h),
			.region = true,
			.region_offset = at,
		};
		dedup_region_table_get(p, i, &e.plain_size, &e.id);
		at += e.plain_size;
		int r = walk_entry(&e, sw);
		if (r < 0)
			return r;
	}
	return 0;
}

static int salvage_container(DedupSalvage *s, uint32_t object) {
	const char *name = s->names[object];
	uint64_t size;
	int r = dedup_backend_size(s->backend, name, &size);
	if (r < 0)
		return r;
	s->stats.containers++;
	if (size > DEDUP_CONTAINER_SIZE_MAX || size < DEDUP_CONTAINER_HEADER_SIZE) {
		s->stats.damaged_containers++;
		return 0;
	}
	_cleanup_free_ uint8_t *buf = malloc((size_t) size);
	if (!buf)
		return -ENOMEM;
	r = dedup_backend_pread_full(s->backend, name, buf, (size_t) size, 0);
	if (r < 0)
		return r;

	DedupContainerHeader ch;
	if (dedup_container_header_parse(buf, (size_t) size, &ch) >= 0)
		s->container_ids[object] = ch.id;

	SalvageWalk sw = { .s = s, .object = object, .buf = buf };
	r = dedup_container_walk(buf, (size_t) size, DEDUP_CONTAINER_ANY, NULL, NULL, NULL, walk_entry, &sw, NULL);
	if (r == -ENOMEM)
		return r;
	if (r >= 0)
		return 0;

	/*
	 * The walk validates the whole container before handing over a chunk,
	 * so nothing of it was indexed.  An open container whose last append
	 * was cut by a crash still holds good units before the cut: keep them.
	 */
	DedupContainerHeader h;
	if (dedup_container_header_parse(buf, (size_t) size, &h) < 0) {
		s->stats.damaged_containers++;
		return 0;
	}
	s->stats.torn_containers++;
	for (uint64_t off = DEDUP_CONTAINER_HEADER_SIZE; off < size;) {
		size_t unit;
		r = dedup_container_unit_parse(h.version, off, buf + off, (size_t) (size - off), walk_entry, &sw, &unit);
		if (r == -ENOMEM)
			return r;
		if (r < 0) {
			r = damaged_region(&sw, h.version, off, buf + off, (size_t) (size - off), &unit);
			if (r < 0)
				return r;
			if (unit == 0)
				break;
		}
		off += unit;
	}
	return 0;
}

int dedup_salvage_open(DedupBackend *b, const DedupStore *keys, DedupSalvage **ret) {
	const char *dirs[] = { NULL };
	return dedup_salvage_open_many(b, dirs, 1, keys, ret);
}

int dedup_salvage_open_many(DedupBackend *b, const char *const *dirs, size_t n_dirs, const DedupStore *keys,
			    DedupSalvage **ret) {
	_cleanup_(dedup_salvage_freep) DedupSalvage *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->backend = b;
	store_decoded_keys(keys, &s->dec);
	s->unit = malloc(DEDUP_REGION_SIZE_MAX);
	if (!s->unit)
		return -ENOMEM;
	int r = 0;
	for (size_t i = 0; i < n_dirs && r >= 0; i++) {
		char c[DEDUP_BACKEND_NAME_MAX + 1];
		if (dirs[i] && snprintf(c, sizeof(c), "%s/c", dirs[i]) >= (int) sizeof(c))
			return -EINVAL;
		r = dedup_backend_list(b, dirs[i] ? c : "c", collect_name, s);
	}
	if (r < 0)
		return r;
	s->container_ids = calloc(MAX(s->n_names, (size_t) 1), sizeof(*s->container_ids));
	if (!s->container_ids)
		return -ENOMEM;
	for (size_t i = 0; i < s->n_names; i++) {
		r = salvage_container(s, (uint32_t) i);
		/* A container removed since the listing (a live collector) simply holds nothing. */
		if (r < 0 && r != -ENOENT)
			return r;
	}
	if (s->n_frames > 1)
		qsort(s->frames, s->n_frames, sizeof(*s->frames), frame_cmp);
	*ret = TAKE_PTR(s);
	return 0;
}

void dedup_salvage_stats(const DedupSalvage *s, DedupSalvageStats *ret) {
	*ret = s->stats;
}

/* Reads and decodes f's unit (every chunk in it re-hashed), unless it is the one decoded last. */
static int salvage_unit(DedupSalvage *s, const SalvageFrame *f) {
	if (s->dec_valid && s->dec_object == f->object && s->dec_offset == f->offset)
		return 0;
	s->dec_valid = false;
	if (f->unit_size > DEDUP_REGION_SIZE_MAX)
		return -EIO;
	int r = dedup_backend_pread_full(s->backend, s->names[f->object], s->unit, f->unit_size, f->offset);
	if (r >= 0)
		r = store_unit_decode(f->region, s->unit, f->unit_size, s->container_ids[f->object], f->offset, true,
				      &s->dec);
	if (r < 0)
		return r == -ENOMEM ? r : -EIO;
	s->dec_valid = true;
	s->dec_object = f->object;
	s->dec_offset = f->offset;
	return 0;
}

ssize_t dedup_salvage_read(DedupSalvage *s, const DedupChunkId *id, void *buf, size_t size) {
	size_t lo = 0, hi = s->n_frames;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (memcmp(s->frames[mid].id.bytes, id->bytes, DEDUP_CHUNK_ID_SIZE) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	int r = -ENOENT;
	/* Several copies: compaction and interrupted writes leave them; any one that checks out will do. */
	for (size_t i = lo; i < s->n_frames && dedup_chunk_id_equal(&s->frames[i].id, id); i++) {
		const SalvageFrame *f = s->frames + i;
		int k = salvage_unit(s, f);
		if (k == -ENOMEM)
			return k;
		if (k < 0) {
			r = -EIO;
			continue;
		}
		/* The unit is whole and every chunk in it hashes to its id: find ours in it. */
		const DedupCachedRegion view = { .count = s->dec.count, .ends = s->dec.ends, .ids = s->dec.ids };
		uint32_t start = f->region_offset, len = 0;
		for (size_t c = 0; c < s->dec.count; c++) {
			uint32_t begin = c == 0 ? 0 : s->dec.ends[c - 1];
			if (begin == start) {
				len = s->dec.ends[c] - begin;
				break;
			}
		}
		if (len == 0 || dedup_cached_region_find(&view, start, len, id) < 0) {
			r = -EIO;
			continue;
		}
		if (size < len)
			return -ENOBUFS;
		memcpy(buf, s->dec.plain + start, len);
		return (ssize_t) len;
	}
	return r;
}
