/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A store's description and the salvage reader (dedup/describe.h): files
 * described with their recipes in chunk ids come back byte for byte from
 * the description and the containers alone; a file that changed is
 * refused (-ESTALE) and leaves the description usable; a new description
 * replaces the old one only at commit; every bit flip and truncation of a
 * description is refused; a damaged chunk is -EIO and a lost one -ENOENT,
 * and a container cut short keeps the regions before the cut.  A file cut
 * on Oracle blocks is described with its literals and rebuilt.
 */
#include "dedup/describe.h"
#include "tests/dedup/oracle-test.h"
#include "tests/dedup/store-test.h"

typedef struct Described {
	size_t n;
	char attrs[8][32];
	size_t attrs_len[8];
	bool has_recipe[8];
	uint64_t size[8];
	DedupDescribedEntry *entries[8];
	size_t n_entries[8];
	size_t zero_runs;
	size_t literals;
} Described;

static int collect(const DedupDescribedFile *f, void *userdata) {
	Described *d = userdata;
	ASSERT(d->n < 8 && f->attrs_len < 32);
	memcpy(d->attrs[d->n], f->attrs, f->attrs_len);
	d->attrs_len[d->n] = f->attrs_len;
	d->has_recipe[d->n] = f->has_recipe;
	d->size[d->n] = f->size;
	d->n_entries[d->n] = f->n_entries;
	d->entries[d->n] = test_malloc(MAX(f->n_entries, (size_t) 1) * sizeof(DedupDescribedEntry));
	if (f->n_entries > 0)
		memcpy(d->entries[d->n], f->entries, f->n_entries * sizeof(DedupDescribedEntry));
	for (size_t i = 0; i < f->n_entries; i++) {
		d->zero_runs += f->entries[i].zero;
		d->literals += f->entries[i].literal;
	}
	d->n++;
	return 0;
}

static void described_free(Described *d) {
	for (size_t i = 0; i < d->n; i++)
		free(d->entries[i]);
	*d = (Described) {};
}

static void load(Env *e, Described *d, DedupDescriptionInfo *info) {
	void *buf;
	size_t len;
	ASSERT_OK(dedup_description_load(e->backend, NULL, &buf, &len));
	*d = (Described) {};
	ASSERT_OK(dedup_description_parse(buf, len, collect, d, info));
	free(buf);
}

/* The bytes of record k, rebuilt from the containers alone. */
static void check_rebuilt(DedupSalvage *s, const Described *d, size_t k, const uint8_t *data, size_t len) {
	uint8_t *chunk = test_malloc(DEDUP_CHUNK_SIZE_LIMIT_MAX);
	uint8_t *out = test_malloc(MAX(len, (size_t) 1));
	size_t off = 0;
	ASSERT(d->has_recipe[k] && d->size[k] == len);
	for (size_t i = 0; i < d->n_entries[k]; i++) {
		const DedupDescribedEntry *e = &d->entries[k][i];
		ASSERT(off + e->length <= len);
		if (e->zero)
			memset(out + off, 0, e->length);
		else if (e->literal)
			memcpy(out + off, e->id.bytes, e->length);
		else {
			ssize_t n = dedup_salvage_read(s, &e->id, chunk, DEDUP_CHUNK_SIZE_LIMIT_MAX);
			ASSERT(n == (ssize_t) e->length);
			memcpy(out + off, chunk, e->length);
		}
		off += e->length;
	}
	ASSERT(off == len && (len == 0 || memcmp(out, data, len) == 0));
	free(out);
	free(chunk);
}

static int first_container(const char *name, void *userdata) {
	snprintf(userdata, 64, "%s", name);
	return 0;
}

/* A backup piece cut on Oracle blocks: its per-block frames are literals of the description. */
static void test_literals(void) {
	TestRng rng = { 43 };
	DedupChunkerParams p = { DEDUP_CHUNKER_ORACLE, 2 * KiB, 8 * KiB, 32 * KiB };
	DedupDescribeWriter *w;
	DedupSalvage *s;
	Described d;
	Env e;

	env_open(&e, NULL);
	OraFile f = ora_file(30, 1, &rng);
	uint64_t ino = env_new_inode(&e);
	DedupWriter *wr = env_write(&e, &p, f.piece, f.piece_len, &rng);
	env_commit(&e, wr, ino);
	dedup_writer_free(wr);
	ASSERT_OK(dedup_describe_begin(e.store, 1, &w));
	ASSERT_OK(dedup_describe_add(w, "piece", 5, true, ino, f.piece_len));
	ASSERT_OK(dedup_describe_commit(w));
	dedup_describe_free(w);
	load(&e, &d, NULL);
	ASSERT(d.n == 1 && d.literals == f.formatted && d.n_entries[0] == 1 + 2 * f.formatted);
	ASSERT_OK(dedup_salvage_open(e.backend, NULL, &s));
	check_rebuilt(s, &d, 0, f.piece, f.piece_len);
	s = dedup_salvage_free(s);
	described_free(&d);
	ora_file_free(&f);
	env_close(&e);
}

/* The raw object: what someone reading the tier sees. */
static void *raw_object(Env *e, size_t *ret_len) {
	uint64_t size;
	ASSERT_OK(dedup_backend_size(e->backend, DEDUP_DESCRIPTION_NAME, &size));
	void *buf = test_malloc((size_t) size + 1);
	ASSERT_OK(dedup_backend_pread_full(e->backend, DEDUP_DESCRIPTION_NAME, buf, (size_t) size, 0));
	*ret_len = (size_t) size;
	return buf;
}

/*
 * A store that encrypts seals its description (version 3): the names are
 * not in the object; it loads with the key only (-ENOKEY without, -EBADMSG
 * under another), and any changed bit fails.
 */
static void test_sealed(void) {
	static const uint8_t k[32] = "0123456789abcdef0123456789abcdef";
	static const uint8_t other[32] = "0123456789abcdef0123456789abcdeF";
	DedupStoreOptions o = { .id_key = k, .content_key = k, .description_key = k, .encrypt = true };
	TestRng rng = { 43 };
	Env e;
	env_open(&e, &o);
	uint8_t *a = test_malloc(200 * KiB);
	test_rng_fill(&rng, a, 200 * KiB);
	uint64_t ino = env_seal(&e, a, 200 * KiB, &rng, NULL);
	DedupDescribeWriter *w;
	ASSERT_OK(dedup_describe_begin(e.store, 5, &w));
	ASSERT_OK(dedup_describe_add(w, "secret dir", 10, false, 0, 0));
	ASSERT_OK(dedup_describe_add(w, "secret file", 11, true, ino, 200 * KiB));
	ASSERT_OK(dedup_describe_commit(w));
	dedup_describe_free(w);

	size_t len;
	uint8_t *raw = raw_object(&e, &len);
	ASSERT(raw[4] == DEDUP_DESCRIPTION_VERSION_SEALED && !memmem(raw, len, "secret", 6));
	void *buf;
	size_t n;
	ASSERT_RET(dedup_description_load(e.backend, NULL, &buf, &n), -ENOKEY);
	ASSERT_RET(dedup_description_load(e.backend, other, &buf, &n), -EBADMSG);
	ASSERT_OK(dedup_description_load(e.backend, k, &buf, &n));
	Described d = {};
	DedupDescriptionInfo info;
	ASSERT_OK(dedup_description_parse(buf, n, collect, &d, &info));
	ASSERT(info.generation == 5 && d.n == 2 && memcmp(d.attrs[1], "secret file", 11) == 0 && d.size[1] == 200 * KiB);

	/*
	 * Its regions' tables are sealed (version 4): salvage finds the chunks
	 * by opening each region with the key; without the key it finds none
	 * (nothing read in clear names one) and says the regions did not open.
	 */
	DedupSalvage *s;
	DedupSalvageStats st;
	ASSERT_OK(dedup_salvage_open(e.backend, e.store, &s));
	dedup_salvage_stats(s, &st);
	ASSERT(st.chunks > 0 && st.unopened_regions == 0);
	check_rebuilt(s, &d, 1, a, 200 * KiB);
	s = dedup_salvage_free(s);
	ASSERT_OK(dedup_salvage_open(e.backend, NULL, &s));
	dedup_salvage_stats(s, &st);
	ASSERT(st.chunks == 0 && st.unopened_regions > 0);
	uint8_t *chunk = test_malloc(DEDUP_CHUNK_SIZE_LIMIT_MAX);
	ASSERT_RET(dedup_salvage_read(s, &d.entries[1][0].id, chunk, DEDUP_CHUNK_SIZE_LIMIT_MAX), -ENOENT);
	free(chunk);
	s = dedup_salvage_free(s);
	described_free(&d);
	free(buf);

	uint8_t *bad = test_malloc(len);
	for (size_t i = 0; i < len * 8; i += 5) {
		memcpy(bad, raw, len);
		bad[i / 8] ^= (uint8_t) (1u << (i % 8));
		int r = dedup_description_unseal(bad, len, k, &n);
		if (r == 0) /* the version byte no longer says sealed: ciphertext is no description */
			r = dedup_description_parse(bad, n, NULL, NULL, NULL);
		ASSERT(r == -EBADMSG || r == -EPROTONOSUPPORT);
	}
	for (size_t cut = 0; cut < len; cut += 3) {
		memcpy(bad, raw, len);
		int r = dedup_description_unseal(bad, cut, k, &n);
		if (r == 0)
			r = dedup_description_parse(bad, n, NULL, NULL, NULL);
		ASSERT(r == -EBADMSG);
	}
	free(bad);
	free(raw);
	free(a);
	env_close(&e);
}

int main(void) {
	TestRng rng = { 42 };
	test_literals();
	test_sealed();
	Env e;
	env_open(&e, NULL);

	size_t len_a = 600 * KiB + 2 * MiB + 100 * KiB, len_b = 300 * KiB;
	uint8_t *a = test_malloc(len_a), *b = test_malloc(len_b);
	test_rng_fill(&rng, a, len_a);
	memset(a + 600 * KiB, 0, 2 * MiB);
	test_rng_fill(&rng, b, len_b);
	uint64_t ino_a = env_seal(&e, a, len_a, &rng, NULL);
	uint64_t ino_b = env_seal(&e, b, len_b, &rng, NULL);
	uint64_t ino_empty = env_new_inode(&e);

	DedupDescribeWriter *w;
	ASSERT_OK(dedup_describe_begin(e.store, 7, &w));
	ASSERT_OK(dedup_describe_add(w, "dir", 3, false, 0, 0));
	ASSERT_OK(dedup_describe_add(w, "file a", 6, true, ino_a, len_a));
	/* A size that no longer matches the recipe: the file changed, it is left out. */
	ASSERT_RET(dedup_describe_add(w, "stale", 5, true, ino_b, len_b + 1), -ESTALE);
	ASSERT_OK(dedup_describe_add(w, "file b", 6, true, ino_b, len_b));
	ASSERT_OK(dedup_describe_add(w, "empty", 5, true, ino_empty, 0));
	ASSERT_RET(dedup_describe_add(w, "x", DEDUP_DESCRIPTION_ATTRS_MAX + 1, false, 0, 0), -EINVAL);
	ASSERT_OK(dedup_describe_commit(w));
	dedup_describe_free(w);

	Described d;
	DedupDescriptionInfo info;
	load(&e, &d, &info);
	ASSERT(info.generation == 7 && info.tier == 0 && info.records == 4 && d.n == 4);
	ASSERT(!d.has_recipe[0] && d.attrs_len[0] == 3 && memcmp(d.attrs[0], "dir", 3) == 0);
	ASSERT(memcmp(d.attrs[1], "file a", 6) == 0 && memcmp(d.attrs[2], "file b", 6) == 0);
	ASSERT(d.has_recipe[3] && d.size[3] == 0 && d.n_entries[3] == 0);
	ASSERT(d.zero_runs >= 1);

	DedupSalvage *s;
	DedupSalvageStats st;
	ASSERT_OK(dedup_salvage_open(e.backend, NULL, &s));
	dedup_salvage_stats(s, &st);
	ASSERT(st.containers >= 1 && st.damaged_containers == 0 && st.torn_containers == 0 && st.chunks > 0);
	check_rebuilt(s, &d, 1, a, len_a);
	check_rebuilt(s, &d, 2, b, len_b);
	DedupChunkId unknown = {};
	unknown.bytes[0] = 1;
	uint8_t *chunk = test_malloc(DEDUP_CHUNK_SIZE_LIMIT_MAX);
	ASSERT_RET(dedup_salvage_read(s, &unknown, chunk, DEDUP_CHUNK_SIZE_LIMIT_MAX), -ENOENT);
	s = dedup_salvage_free(s);

	/* Every bit flip and every truncation of the description is refused. */
	void *img;
	size_t img_len;
	ASSERT_OK(dedup_description_load(e.backend, NULL, &img, &img_len));
	uint8_t *bad = test_malloc(img_len);
	for (size_t i = 0; i < img_len * 8; i += 7) {
		memcpy(bad, img, img_len);
		bad[i / 8] ^= (uint8_t) (1u << (i % 8));
		int r = dedup_description_parse(bad, img_len, NULL, NULL, NULL);
		ASSERT(r == -EBADMSG || r == -EPROTONOSUPPORT);
	}
	for (size_t n = 0; n < img_len; n++)
		ASSERT_RET(dedup_description_parse(img, n, NULL, NULL, NULL), -EBADMSG);
	free(bad);
	free(img);

	/* An abandoned rewrite leaves the description as it was; a committed one replaces it. */
	ASSERT_OK(dedup_describe_begin(e.store, 8, &w));
	ASSERT_OK(dedup_describe_add(w, "file b", 6, true, ino_b, len_b));
	dedup_describe_free(w);
	uint64_t size;
	ASSERT_RET(dedup_backend_size(e.backend, DEDUP_DESCRIPTION_TMP_NAME, &size), -ENOENT);
	Described again;
	load(&e, &again, &info);
	ASSERT(info.generation == 7 && again.n == 4);
	described_free(&again);
	ASSERT_OK(dedup_describe_begin(e.store, 9, &w));
	ASSERT_OK(dedup_describe_add(w, "file b", 6, true, ino_b, len_b));
	ASSERT_OK(dedup_describe_commit(w));
	dedup_describe_free(w);
	load(&e, &again, &info);
	ASSERT(info.generation == 9 && again.n == 1);
	described_free(&again);

	/*
	 * Damage: one byte of a region's payload is -EIO for its chunks and nothing
	 * else, not even what follows it in the container; a container cut short
	 * keeps what is before the cut.
	 */
	char name[64] = "", path[256];
	ASSERT_OK(dedup_backend_list(e.backend, "c", first_container, name));
	snprintf(path, sizeof(path), "%s/%s", e.tier_dir, name);
	const DedupDescribedEntry *first = &d.entries[1][0];
	ASSERT(!first->zero);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	ASSERT(fd >= 0);
	uint8_t byte, rh[DEDUP_REGION_HEADER_SIZE];
	DedupRegionHeader h;
	/* The first region of the first file starts right after the container's header: a byte of its payload. */
	ASSERT(pread(fd, rh, sizeof(rh), DEDUP_CONTAINER_HEADER_SIZE) == sizeof(rh));
	ASSERT_OK(dedup_region_header_parse(rh, sizeof(rh), &h));
	off_t at = DEDUP_CONTAINER_HEADER_SIZE + DEDUP_REGION_HEADER_SIZE + h.count * DEDUP_REGION_ENTRY_SIZE + 10;
	ASSERT(pread(fd, &byte, 1, at) == 1);
	byte ^= 0x40;
	ASSERT(pwrite(fd, &byte, 1, at) == 1);
	ASSERT_OK(dedup_salvage_open(e.backend, NULL, &s));
	ASSERT_RET(dedup_salvage_read(s, &first->id, chunk, DEDUP_CHUNK_SIZE_LIMIT_MAX), -EIO);
	check_rebuilt(s, &d, 2, b, len_b);
	s = dedup_salvage_free(s);

	struct stat sb;
	ASSERT(fstat(fd, &sb) == 0);
	ASSERT(ftruncate(fd, sb.st_size - 100) == 0);
	close(fd);
	ASSERT_OK(dedup_salvage_open(e.backend, NULL, &s));
	dedup_salvage_stats(s, &st);
	ASSERT(st.torn_containers == 1);
	/* The last chunk of a, past the damaged region and well before the cut, is still there; b's last chunk, cut, is lost. */
	const DedupDescribedEntry *a_last = &d.entries[1][d.n_entries[1] - 1];
	ASSERT(d.n_entries[1] >= 2 && !a_last->zero);
	ASSERT(dedup_salvage_read(s, &a_last->id, chunk, DEDUP_CHUNK_SIZE_LIMIT_MAX) == (ssize_t) a_last->length);
	const DedupDescribedEntry *last = &d.entries[2][d.n_entries[2] - 1];
	ASSERT_RET(dedup_salvage_read(s, &last->id, chunk, DEDUP_CHUNK_SIZE_LIMIT_MAX), -ENOENT);
	s = dedup_salvage_free(s);

	described_free(&d);
	free(chunk);
	free(a);
	free(b);
	env_close(&e);
	return 0;
}
