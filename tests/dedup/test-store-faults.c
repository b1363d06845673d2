/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The chunk store when things go wrong: a byte flipped anywhere in a region
 * (header, table, payload, either checksum) reads as -EIO for exactly the
 * ranges made of that region's chunks (never wrong bytes), writers that never
 * commit leave garbage the store cuts off on reopen and the collector
 * reclaims, and readers keep reading exact bytes while the collector moves
 * and deletes containers under them and writers append beside it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/dedup/store-test.h"

typedef struct Range {
	uint64_t start, end;
} Range;

typedef struct BadChunk {
	uint64_t chunks[256]; /* the damaged region's chunks */
	size_t n_chunks;
	Range ranges[512]; /* file ranges made of them */
	size_t n;
} BadChunk;

static bool is_bad(const BadChunk *b, uint64_t chunk) {
	for (size_t i = 0; i < b->n_chunks; i++)
		if (b->chunks[i] == chunk)
			return true;
	return false;
}

static int bad_ranges_cb(uint64_t start, const void *blob, size_t size, void *userdata) {
	BadChunk *b = userdata;
	DedupRecipeSegment *seg;
	ASSERT_OK(dedup_recipe_segment_decode(blob, size, &seg));
	uint64_t off = seg->start;
	for (size_t i = 0; i < seg->n_entries; i++) {
		if (seg->entries[i].chunk != 0 && is_bad(b, seg->entries[i].chunk)) {
			ASSERT(b->n < ELEMENTSOF(b->ranges));
			b->ranges[b->n++] = (Range) { off, off + seg->entries[i].length };
		}
		off += seg->entries[i].length;
	}
	free(seg);
	return 0;
}

typedef struct RegionOf {
	const CatalogChunk *ch;
	BadChunk *b;
} RegionOf;

static int region_chunk_cb(const CatalogChunk *c, void *userdata) {
	RegionOf *r = userdata;
	if (c->offset == r->ch->offset) {
		ASSERT(r->b->n_chunks < ELEMENTSOF(r->b->chunks));
		r->b->chunks[r->b->n_chunks++] = c->id;
	}
	return 0;
}

/* The chunks stored in ch's region, and the ranges of ino made of them. */
static void bad_region(Env *e, const CatalogChunk *ch, uint64_t ino, BadChunk *b) {
	RegionOf r = { .ch = ch, .b = b };
	*b = (BadChunk) {};
	ASSERT_OK(catalog_chunks_foreach_in_container(e->catalog, ch->container, region_chunk_cb, &r));
	ASSERT(b->n_chunks > 0);
	ASSERT_OK(catalog_recipe_foreach(e->catalog, ino, bad_ranges_cb, b));
	ASSERT(b->n > 0);
}

typedef struct Chunks {
	CatalogChunk items[4096];
	size_t n;
} Chunks;

static int collect_chunk(const CatalogChunk *ch, void *userdata) {
	Chunks *c = userdata;
	ASSERT(c->n < ELEMENTSOF(c->items));
	c->items[c->n++] = *ch;
	return 0;
}

/* The index-th chunk (counting from 0, wrapping) that lies in a full container. */
static CatalogChunk pick_chunk(Env *e, size_t index) {
	static Chunks c;
	c.n = 0;
	ASSERT_OK(catalog_chunks_foreach(e->catalog, 0, collect_chunk, &c));
	for (size_t k = 0; k < 2 * c.n; k++) {
		CatalogContainer ct;
		const CatalogChunk *ch = c.items + (index + k) % c.n;
		ASSERT_OK(catalog_container_get(e->catalog, ch->container, &ct));
		if (ct.full)
			return *ch;
	}
	abort();
}

static void flip_byte(Env *e, uint64_t container, uint64_t offset) {
	char name[DEDUP_CONTAINER_NAME_MAX], path[256];
	uint8_t c;
	snprintf(path, sizeof(path), "%s/%s", e->tier_dir, dedup_container_name(container, name));
	int fd = open(path, O_RDWR | O_CLOEXEC);
	ASSERT(fd >= 0);
	ASSERT(pread(fd, &c, 1, (off_t) offset) == 1);
	c ^= 0x10;
	ASSERT(pwrite(fd, &c, 1, (off_t) offset) == 1);
	close(fd);
}

static bool overlaps(const BadChunk *b, uint64_t start, uint64_t end) {
	for (size_t i = 0; i < b->n; i++)
		if (start < b->ranges[i].end && b->ranges[i].start < end)
			return true;
	return false;
}

/* Reads the file in pieces: those touching a bad range fail with -EIO, the rest are exact. */
static void check_damage(Env *e, uint64_t ino, const uint8_t *data, size_t len, const BadChunk *b, size_t piece) {
	uint8_t *buf = test_malloc(piece);
	size_t failed = 0;
	for (size_t off = 0; off < len; off += piece) {
		size_t n = MIN(piece, len - off);
		memset(buf, 0xa5, n);
		ssize_t got = dedup_file_read(e->store, ino, len, off, buf, n);
		if (overlaps(b, off, off + n)) {
			ASSERT(got == -EIO);
			failed++;
		} else {
			ASSERT(got == (ssize_t) n);
			ASSERT(memcmp(buf, data + off, n) == 0);
		}
	}
	ASSERT(failed > 0);
	/* Copying the whole file out fails too, rather than writing wrong bytes. */
	char path[160];
	snprintf(path, sizeof(path), "%s/copy", e->dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ASSERT(fd >= 0);
	ASSERT_RET(dedup_file_write_to_fd(e->store, ino, len, fd), -EIO);
	close(fd);
	unlink(path);
	free(buf);
}

typedef enum Where {
	IN_HEADER,          /* a field: the chunk count */
	IN_TABLE,           /* a chunk's id */
	IN_PAYLOAD,
	IN_CHECKSUM,        /* of table and payload */
	IN_HEADER_CHECKSUM,
} Where;

static void damage_one(DedupVerify verify, uint64_t which, Where where) {
	TestRng rng = { 20 + which };
	DedupStoreOptions o = { .container_size = 256 * KiB, .region_cache_bytes = 512 * KiB, .verify = verify };
	size_t len = 4 * MiB;
	uint8_t *data = test_malloc(len);
	Env e;

	env_open(&e, &o);
	if (which % 2)
		fill_text(&rng, data, len);
	else
		test_rng_fill(&rng, data, len);
	uint64_t ino = env_seal(&e, data, len, &rng, NULL);

	CatalogChunk ch = pick_chunk(&e, which * 7);
	static BadChunk b;
	bad_region(&e, &ch, ino, &b);
	ASSERT(ch.region_size > 0);
	uint64_t table_end = DEDUP_REGION_HEADER_SIZE + b.n_chunks * DEDUP_REGION_ENTRY_SIZE;
	static const uint64_t offsets[] = { [IN_HEADER] = 12, [IN_TABLE] = DEDUP_REGION_HEADER_SIZE + 4 + 10,
					    [IN_CHECKSUM] = 50, [IN_HEADER_CHECKSUM] = 60 };
	uint64_t at = ch.offset + (where == IN_PAYLOAD ? table_end + (ch.region_size - table_end) / 3 : offsets[where]);
	ASSERT(at < ch.offset + ch.region_size);
	flip_byte(&e, ch.container, at);

	env_reopen_store(&e); /* nothing verified before the damage is cached */
	check_damage(&e, ino, data, len, &b, 64 * KiB);
	check_damage(&e, ino, data, len, &b, 1 * MiB);

	/* The collector does not spread a damaged region: it leaves that container alone. */
	DedupGcStats gc;
	DedupGcOptions go = { .live_threshold = 1.0 };
	ASSERT_OK(dedup_store_gc(e.store, &go, &gc));
	ASSERT(gc.containers_skipped >= 1);
	check_damage(&e, ino, data, len, &b, 64 * KiB);
	free(data);
	env_close(&e);
}

static void test_damaged_regions(void) {
	damage_one(DEDUP_VERIFY_AUTO, 1, IN_PAYLOAD);
	damage_one(DEDUP_VERIFY_CHECKSUM, 2, IN_PAYLOAD);
	damage_one(DEDUP_VERIFY_CONTENT, 3, IN_HEADER);
	damage_one(DEDUP_VERIFY_AUTO, 4, IN_TABLE);
	damage_one(DEDUP_VERIFY_CHECKSUM, 5, IN_CHECKSUM);
	damage_one(DEDUP_VERIFY_AUTO, 6, IN_HEADER_CHECKSUM);
}

/*
 * A container cut short or deleted: reads of its chunks fail, the rest
 * read; once its bytes are back (an export remounted, a restore), its
 * chunks read again: a missing unit is never taken for damage.
 */
static void test_missing_container(void) {
	TestRng rng = { 30 };
	DedupStoreOptions o = { .container_size = 512 * KiB, .region_cache_bytes = 128 * KiB };
	size_t len = 3 * MiB;
	uint8_t *data = test_malloc(len);
	char name[DEDUP_CONTAINER_NAME_MAX], path[256];
	Env e;

	env_open(&e, &o);
	test_rng_fill(&rng, data, len);
	uint64_t ino = env_seal(&e, data, len, &rng, NULL);
	CatalogChunk ch = pick_chunk(&e, 60);
	static BadChunk b;
	bad_region(&e, &ch, ino, &b);
	snprintf(path, sizeof(path), "%s/%s", e.tier_dir, dedup_container_name(ch.container, name));
	uint8_t *orig = test_malloc(len);
	memcpy(orig, data, len);
	int fd = open(path, O_RDONLY);
	ASSERT(fd >= 0);
	struct stat st;
	ASSERT(fstat(fd, &st) == 0);
	uint8_t *image = test_malloc((size_t) st.st_size);
	ASSERT(pread(fd, image, (size_t) st.st_size, 0) == st.st_size);
	close(fd);
	/* Cut inside that chunk's region: it and every region after it in the container are gone. */
	ASSERT(truncate(path, (off_t) (ch.offset + ch.region_size - 1)) == 0);
	env_reopen_store(&e);
	ASSERT(dedup_file_read(e.store, ino, len, b.ranges[0].start, data, 1) == -EIO);
	char saved[300];
	snprintf(saved, sizeof(saved), "%s.saved", path);
	ASSERT(link(path, saved) == 0);
	ASSERT(unlink(path) == 0);
	env_reopen_store(&e);
	ASSERT(dedup_file_read(e.store, ino, len, b.ranges[0].start, data, 1) == -EIO);
	/* The bytes come back (a tier's export mounted again): every byte of the file reads again. */
	fd = open(saved, O_WRONLY);
	ASSERT(fd >= 0);
	ASSERT(pwrite(fd, image, (size_t) st.st_size, 0) == st.st_size);
	close(fd);
	ASSERT(rename(saved, path) == 0);
	env_reopen_store(&e);
	for (size_t at = 0; at < len; at += 64 * KiB)
		ASSERT(dedup_file_read(e.store, ino, len, at, data + at, 64 * KiB) == 64 * KiB);
	ASSERT(memcmp(data, orig, len) == 0);
	free(image);
	free(orig);
	free(data);
	env_close(&e);
}

typedef struct OpenContainer {
	uint64_t id, size;
	bool found;
} OpenContainer;

static int find_open(const CatalogContainer *ct, void *userdata) {
	OpenContainer *o = userdata;
	if (!ct->full) {
		o->id = ct->id;
		o->size = ct->size;
		o->found = true;
	}
	return 0;
}

static void test_recovery(void) {
	TestRng rng = { 40 };
	/* Writers register only at finish: an unfinished writer leaves unregistered regions. */
	DedupStoreOptions o = { .sync_bytes = 1ull << 40, .container_size = 64 * MiB };
	size_t len = 3 * MiB;
	uint8_t *a = test_malloc(len), *b = test_malloc(len), *c = test_malloc(len);
	DedupWriterStats st;
	DedupStoreStats ss;
	DedupGcStats gc;
	Env e;

	env_open(&e, &o);
	test_rng_fill(&rng, a, len);
	test_rng_fill(&rng, b, len);
	test_rng_fill(&rng, c, len);
	uint64_t ia = env_seal(&e, a, len, &rng, NULL);

	/* B: finished, never committed: its chunks are registered, dead. */
	DedupWriter *w = env_write(&e, NULL, b, len, &rng);
	dedup_writer_stats(w, &st);
	dedup_writer_free(w);
	ASSERT_OK(dedup_store_stats(e.store, &ss));
	ASSERT(ss.dead_chunks == st.new_chunks && st.new_chunks > 0);

	/* C: regions appended, never registered: past the committed size. */
	ASSERT_OK(dedup_writer_new(e.store, NULL, 3, DEDUP_STORE_REGION_DEFAULT, &w));
	ASSERT_OK(dedup_writer_feed(w, c, len));
	dedup_writer_free(w);
	OpenContainer oc = {};
	ASSERT_OK(catalog_containers_foreach(e.catalog, 0, find_open, &oc));
	ASSERT(oc.found);
	ASSERT(env_object_size(&e, oc.id) > (int64_t) oc.size);

	/* And a torn region at the end, as a crash in the middle of a write leaves. */
	{
		char name[DEDUP_CONTAINER_NAME_MAX], path[256];
		snprintf(path, sizeof(path), "%s/%s", e.tier_dir, dedup_container_name(oc.id, name));
		int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
		ASSERT(fd >= 0);
		ASSERT(write(fd, "\x89" "FTR\x01garbage", 12) == 12);
		close(fd);
	}

	env_reopen_store(&e);
	ASSERT(env_object_size(&e, oc.id) == (int64_t) oc.size);
	env_check_file(&e, ia, a, len, &rng);

	/* New writes go on from the committed size and read back. */
	uint64_t ic = env_seal(&e, c, len, &rng, NULL);
	env_check_file(&e, ic, c, len, &rng);

	ASSERT_OK(dedup_store_gc(e.store, NULL, &gc));
	ASSERT(gc.chunks_deleted == st.new_chunks);
	ASSERT_OK(dedup_store_stats(e.store, &ss));
	ASSERT(ss.dead_chunks == 0);
	uint64_t inos[] = { ia, ic };
	env_check_refs(&e, inos, 2);
	env_check_file(&e, ia, a, len, &rng);
	env_check_file(&e, ic, c, len, &rng);

	/* An orphan object (its row gone, as after a crash between the two) is removed. */
	{
		char name[DEDUP_CONTAINER_NAME_MAX], path[256];
		snprintf(path, sizeof(path), "%s/c", e.tier_dir);
		(void) mkdir(path, 0755);
		snprintf(path, sizeof(path), "%s/c/3f", e.tier_dir);
		(void) mkdir(path, 0755);
		snprintf(path, sizeof(path), "%s/%s", e.tier_dir, dedup_container_name(0x3f3f, name));
		int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		ASSERT(fd >= 0);
		close(fd);
		ASSERT_OK(dedup_store_gc(e.store, NULL, &gc));
		ASSERT(gc.orphans_deleted == 1);
		ASSERT(access(path, F_OK) < 0);
	}
	free(a);
	free(b);
	free(c);
	env_close(&e);
}

/* ---- readers while the collector runs ---- */

#define N_FILES 8
#define N_READERS 3

typedef struct Shared {
	Env *env;
	uint8_t *data[N_FILES];
	uint64_t ino[N_FILES];
	size_t len;
	bool live[N_FILES];
	int stop;        /* atomic */
	unsigned failures; /* atomic */
} Shared;

typedef struct Reader {
	Shared *sh;
	unsigned seed;
	uint64_t reads;
} Reader;

static void *reader_main(void *arg) {
	Reader *rd = arg;
	Shared *sh = rd->sh;
	TestRng rng = { rd->seed };
	uint8_t *buf = test_malloc(600 * KiB);

	while (!__atomic_load_n(&sh->stop, __ATOMIC_SEQ_CST) || rd->reads < 200) {
		size_t f = (size_t) (test_rng_next(&rng) % N_FILES);
		if (!sh->live[f])
			continue;
		size_t off = (size_t) (test_rng_next(&rng) % sh->len), n = 1 + (size_t) (test_rng_next(&rng) % (600 * KiB));
		ssize_t got = dedup_file_read(sh->env->store, sh->ino[f], sh->len, off, buf, n);
		if (got != (ssize_t) MIN(n, sh->len - off) || memcmp(buf, sh->data[f] + off, (size_t) got) != 0) {
			fprintf(stderr, "reader: file %zu at %zu+%zu returned %zd\n", f, off, n, got);
			__atomic_add_fetch(&sh->failures, 1, __ATOMIC_SEQ_CST);
		}
		rd->reads++;
	}
	free(buf);
	return NULL;
}

typedef struct Writer {
	Shared *sh;
	uint8_t *data;
	size_t len;
	uint64_t ino[3];
} Writer;

static void *writer_main(void *arg) {
	Writer *wr = arg;
	Env *e = wr->sh->env;
	TestRng rng = { 77 };
	for (int i = 0; i < 3; i++) {
		uint64_t ino = env_new_inode(e);
		DedupWriter *w = env_write(e, NULL, wr->data + (size_t) i * (wr->len / 4), wr->len / 2, &rng);
		env_commit(e, w, ino);
		dedup_writer_free(w);
		wr->ino[i] = ino;
	}
	return NULL;
}

static void test_readers_during_gc(void) {
	TestRng rng = { 50 };
	DedupStoreOptions o = { .container_size = 256 * KiB, .region_cache_bytes = 512 * KiB, .readahead_bytes = 256 * KiB };
	Shared sh = { .len = 1 * MiB + 4321 };
	Reader rd[N_READERS];
	pthread_t threads[N_READERS + 1];
	Writer wr = { .sh = &sh, .len = 2 * MiB };
	Env e;

	env_open(&e, &o);
	sh.env = &e;
	uint8_t *common = test_malloc(sh.len);
	test_rng_fill(&rng, common, sh.len);
	for (int i = 0; i < N_FILES; i++) {
		sh.data[i] = test_malloc(sh.len);
		/* Half shared with the others, half its own: compaction moves shared and private chunks. */
		memcpy(sh.data[i], common, sh.len);
		test_rng_fill(&rng, sh.data[i] + (size_t) (i % 4) * (sh.len / 4), sh.len / 4);
		if (i % 3 == 0)
			fill_text(&rng, sh.data[i], sh.len / 8);
		sh.ino[i] = env_seal(&e, sh.data[i], sh.len, &rng, NULL);
		sh.live[i] = true;
	}
	/* The dropped files are never read again: readers pick only live ones. */
	for (int i = 0; i < N_FILES; i += 2) {
		sh.live[i] = false;
		env_drop(&e, sh.ino[i]);
	}
	wr.data = test_malloc(wr.len);
	test_rng_fill(&rng, wr.data, wr.len);

	for (int i = 0; i < N_READERS; i++) {
		rd[i] = (Reader) { .sh = &sh, .seed = 100 + (unsigned) i };
		ASSERT(pthread_create(&threads[i], NULL, reader_main, &rd[i]) == 0);
	}
	ASSERT(pthread_create(&threads[N_READERS], NULL, writer_main, &wr) == 0);

	DedupGcOptions go = { .live_threshold = 1.0 };
	uint64_t compacted = 0;
	for (int round = 0; round < 4; round++) {
		DedupGcStats gc;
		ASSERT_OK(dedup_store_gc(e.store, &go, &gc));
		compacted += gc.containers_compacted;
	}
	ASSERT(pthread_join(threads[N_READERS], NULL) == 0);
	__atomic_store_n(&sh.stop, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < N_READERS; i++)
		ASSERT(pthread_join(threads[i], NULL) == 0);

	ASSERT(sh.failures == 0);
	ASSERT(compacted > 0);
	for (int i = 1; i < N_FILES; i += 2)
		env_check_file(&e, sh.ino[i], sh.data[i], sh.len, &rng);
	for (int i = 0; i < 3; i++)
		env_check_file(&e, wr.ino[i], wr.data + (size_t) i * (wr.len / 4), wr.len / 2, &rng);
	uint64_t inos[N_FILES / 2 + 3];
	size_t n = 0;
	for (int i = 1; i < N_FILES; i += 2)
		inos[n++] = sh.ino[i];
	for (int i = 0; i < 3; i++)
		inos[n++] = wr.ino[i];
	env_check_refs(&e, inos, n);

	for (int i = 0; i < N_FILES; i++)
		free(sh.data[i]);
	free(common);
	free(wr.data);
	env_close(&e);
}

/* ---- a container fsync that fails under a registration ---- */

/*
 * The directory backend, with every object's length at its last successful
 * sync remembered and the n-th sync of the run failing with -EIO: what the
 * catalog may point at is what was synced (invariant 1 of store.c).
 */
#define SYNC_FILES_MAX 64

typedef struct SyncFile {
	DedupBackendFile *inner;
	char name[DEDUP_BACKEND_NAME_MAX + 1];
} SyncFile;

typedef struct SyncBackend {
	DedupBackend b;
	DedupBackend *inner;
	DedupBackendOps ops;
	pthread_mutex_t lock;
	char names[SYNC_FILES_MAX][DEDUP_BACKEND_NAME_MAX + 1]; /* protected by lock */
	uint64_t synced[SYNC_FILES_MAX];                        /* protected by lock */
	size_t n;                                               /* protected by lock */
	unsigned syncs, fail_at;                                /* protected by lock */
} SyncBackend;

static SyncBackend sync_backend;

static uint64_t *synced_of(SyncBackend *sb, const char *name) {
	for (size_t i = 0; i < sb->n; i++)
		if (strcmp(sb->names[i], name) == 0)
			return sb->synced + i;
	ASSERT(sb->n < SYNC_FILES_MAX);
	snprintf(sb->names[sb->n], sizeof(sb->names[0]), "%s", name);
	sb->synced[sb->n] = 0;
	return sb->synced + sb->n++;
}

static int sync_open_write(DedupBackend *b, const char *name, bool create, uint64_t size, DedupBackendFile **ret) {
	SyncBackend *sb = (SyncBackend *) b;
	SyncFile *f = test_malloc(sizeof(*f));
	int r = sb->inner->ops->open_write(sb->inner, name, create, size, &f->inner);
	if (r < 0) {
		free(f);
		return r;
	}
	snprintf(f->name, sizeof(f->name), "%s", name);
	pthread_mutex_lock(&sb->lock);
	uint64_t *synced = synced_of(sb, name);
	*synced = MAX(*synced, size); /* made (or cut) durably at that size */
	pthread_mutex_unlock(&sb->lock);
	*ret = (DedupBackendFile *) f;
	return 0;
}

static int sync_pwrite(DedupBackendFile *f, const void *buf, size_t len, uint64_t offset) {
	return sync_backend.inner->ops->pwrite(((SyncFile *) f)->inner, buf, len, offset);
}

static int sync_truncate(DedupBackendFile *f, uint64_t size) {
	return sync_backend.inner->ops->truncate(((SyncFile *) f)->inner, size);
}

static int sync_sync(DedupBackendFile *f) {
	SyncBackend *sb = &sync_backend;
	SyncFile *sf = (SyncFile *) f;
	uint64_t size;

	pthread_mutex_lock(&sb->lock);
	bool fail = ++sb->syncs == sb->fail_at;
	pthread_mutex_unlock(&sb->lock);
	if (fail)
		return -EIO;
	/* The length now, before the sync: appends after it may or may not be durable. */
	ASSERT_OK(sb->inner->ops->size(sb->inner, sf->name, &size));
	int r = sb->inner->ops->sync(sf->inner);
	if (r < 0)
		return r;
	pthread_mutex_lock(&sb->lock);
	uint64_t *synced = synced_of(sb, sf->name);
	*synced = MAX(*synced, size);
	pthread_mutex_unlock(&sb->lock);
	return 0;
}

static void sync_close(DedupBackendFile *f) {
	if (!f)
		return;
	sync_backend.inner->ops->close(((SyncFile *) f)->inner);
	free(f);
}

static ssize_t sync_pread(DedupBackend *b, const char *name, void *buf, size_t len, uint64_t offset) {
	return sync_backend.inner->ops->pread(sync_backend.inner, name, buf, len, offset);
}

static int sync_size(DedupBackend *b, const char *name, uint64_t *ret) {
	return sync_backend.inner->ops->size(sync_backend.inner, name, ret);
}

static int sync_unlink(DedupBackend *b, const char *name) {
	return sync_backend.inner->ops->unlink(sync_backend.inner, name);
}

static int sync_list(DedupBackend *b, const char *prefix, int (*cb)(const char *name, void *userdata),
		     void *userdata) {
	return sync_backend.inner->ops->list(sync_backend.inner, prefix, cb, userdata);
}

static int sync_rename(DedupBackend *b, const char *from, const char *to) {
	return sync_backend.inner->ops->rename(sync_backend.inner, from, to);
}

static int sync_statfs(DedupBackend *b, DedupBackendStatfs *ret) {
	return sync_backend.inner->ops->statfs(sync_backend.inner, ret);
}

static void sync_free(DedupBackend *b) {
	sync_backend.inner = dedup_backend_free(sync_backend.inner);
	pthread_mutex_destroy(&sync_backend.lock);
}

static DedupBackend *sync_backend_wrap(DedupBackend *inner, unsigned fail_at) {
	SyncBackend *sb = &sync_backend;
	*sb = (SyncBackend) {
		.inner = inner,
		.fail_at = fail_at,
		.ops = {
			.open_write = sync_open_write,
			.pwrite = sync_pwrite,
			.truncate = sync_truncate,
			.sync = sync_sync,
			.close = sync_close,
			.pread = sync_pread,
			.size = sync_size,
			.unlink = sync_unlink,
			.list = sync_list,
			.free = sync_free,
			.rename = sync_rename,
			.statfs = sync_statfs,
		},
	};
	sb->b.ops = &sb->ops;
	pthread_mutex_init(&sb->lock, NULL);
	return &sb->b;
}

static uint64_t synced_length(uint64_t container) {
	char name[DEDUP_CONTAINER_NAME_MAX];
	pthread_mutex_lock(&sync_backend.lock);
	uint64_t n = *synced_of(&sync_backend, dedup_container_name(container, name));
	pthread_mutex_unlock(&sync_backend.lock);
	return n;
}

static int chunk_synced_cb(const CatalogChunk *ch, void *userdata) {
	unsigned *n = userdata;
	ASSERT(ch->offset + ch->region_size <= synced_length(ch->container));
	(*n)++;
	return 0;
}

static int container_synced_cb(const CatalogContainer *ct, void *userdata) {
	ASSERT(ct->size <= synced_length(ct->id));
	return 0;
}

static int container_last_cb(const CatalogContainer *ct, void *userdata) {
	uint64_t *last = userdata;
	*last = MAX(*last, ct->id);
	return 0;
}

typedef struct ChunksUpTo {
	uint64_t container;
	unsigned n;
} ChunksUpTo;

static int chunks_up_to_cb(const CatalogChunk *ch, void *userdata) {
	ChunksUpTo *u = userdata;
	u->n += ch->container <= u->container;
	return 0;
}

/*
 * A file's batches are registered on another thread while the writer
 * gathers the next (invariant 8 of store-write.c): whichever container
 * fsync fails, the writer fails with -EIO and no chunk registered before or
 * after points past what was synced.  Once the failed writer let go, the
 * same store, not reopened, takes a new file in new containers only
 * (invariant 6 of store.c: a filer back from a crash needs no remount);
 * after a reopen the failed file seals, both read back and the earlier
 * batches' chunks are left to the collector.
 */
static void test_sync_failure(void) {
	DedupStoreOptions o = { .sync_bytes = 1 * MiB, .container_size = 2 * MiB, .encode_workers = 1 };
	const size_t len = 8 * MiB;
	TestRng rng = { 50 }, rng_next = { 51 };
	uint8_t *data = test_malloc(len), *next = test_malloc(len);
	unsigned failed = 0, registered = 0;

	test_rng_fill(&rng, data, len);
	test_rng_fill(&rng_next, next, len);
	for (unsigned k = 1;; k++) {
		DedupGcStats gc;
		DedupWriter *w;
		Env e;
		int r = 0;

		ASSERT(k < 200);
		env_open(&e, &o);
		e.store = dedup_store_free(e.store);
		e.backend = sync_backend_wrap(e.backend, k);
		env_open_store(&e);

		ASSERT_OK(dedup_writer_new(e.store, NULL, DEDUP_STORE_LEVEL_DEFAULT, DEDUP_STORE_REGION_DEFAULT, &w));
		for (size_t off = 0; off < len && r >= 0; off += 256 * KiB)
			r = dedup_writer_feed(w, data + off, 256 * KiB);
		if (r >= 0)
			r = dedup_writer_finish(w);
		dedup_writer_free(w);
		if (r >= 0) {
			/* No sync failed: every one of this file's syncs has had its turn. */
			ASSERT(sync_backend.syncs < k);
			env_close(&e);
			break;
		}
		ASSERT_RET(r, -EIO);
		failed++;
		ASSERT_OK(catalog_chunks_foreach(e.catalog, 0, chunk_synced_cb, &registered));
		ASSERT_OK(catalog_containers_foreach(e.catalog, 0, container_synced_cb, NULL));

		sync_backend.fail_at = 0;
		ChunksUpTo before = {}, after = {};
		ASSERT_OK(catalog_containers_foreach(e.catalog, 0, container_last_cb, &before.container));
		after.container = before.container;
		ASSERT_OK(catalog_chunks_foreach(e.catalog, 0, chunks_up_to_cb, &before));
		uint64_t inos[2];
		inos[1] = env_seal(&e, next, len, &rng_next, NULL);
		ASSERT_OK(catalog_chunks_foreach(e.catalog, 0, chunks_up_to_cb, &after));
		ASSERT(after.n == before.n);
		ASSERT_OK(catalog_chunks_foreach(e.catalog, 0, chunk_synced_cb, &registered));
		env_check_file(&e, inos[1], next, len, &rng_next);

		env_reopen_store(&e);
		inos[0] = env_seal(&e, data, len, &rng, NULL);
		env_check_file(&e, inos[0], data, len, &rng);
		ASSERT_OK(dedup_store_gc(e.store, NULL, &gc));
		env_check_refs(&e, inos, 2);
		env_check_file(&e, inos[0], data, len, &rng);
		env_check_file(&e, inos[1], next, len, &rng_next);
		env_close(&e);
	}
	/* Several batches failed, and some after earlier ones had been registered. */
	ASSERT(failed >= 4 && registered > 0);
	free(data);
	free(next);
}

int main(void) {
	test_damaged_regions();
	test_missing_container();
	test_recovery();
	test_readers_during_gc();
	test_sync_failure();
	return 0;
}
