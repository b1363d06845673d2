/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Global dedup on a shared tier (dedup/store-global.c): hosts with their own
 * catalogs over one directory, each store seeing h/HOST of it and the root
 * through tier/'s names.  The second and third host store nothing of a
 * file the first published and read it back exactly from the first's
 * containers; a damaged foreign container is EIO, never wrong bytes; a
 * host under another key skips the segments and stores its own copy; a
 * segment that lies gives EIO; the first host's collector keeps published
 * containers; segments are immutable, named by epoch, and survive a reopen.
 * Collection across hosts (docs/SHARED.md, "Safe collection"): the first
 * host condemns its emptied containers and deletes them only once every
 * host that is not retired published references acknowledging that and
 * not naming them; a host that never published holds them until retired;
 * a new host finds their chunks condemned and stores its own copy.
 */
#include <dirent.h>
#include <pthread.h>
#include <time.h>

#include "dedup/refs.h"
#include "dedup/segment.h"
#include "tests/dedup/store-test.h"
#include "tier/shared.h"

typedef struct Host {
	Env e;
	char name[16];
	DedupBackend *root;
	DedupShared shared;
	uint8_t key[32];
} Host;

static char shared_dir[128];

static void host_open_store(Host *h) {
	ASSERT_OK(dedup_store_open(h->e.catalog, 1, h->e.backend, &h->e.opts, &h->e.store));
}

static void host_open(Host *h, const char *name, bool keyed) {
	char path[160], prefix[40];
	uint8_t instance[TIER_HOST_INSTANCE_SIZE];
	DedupBackend *view;

	*h = (Host) {};
	snprintf(h->name, sizeof(h->name), "%s", name);
	snprintf(h->e.dir, sizeof(h->e.dir), "%s/fratier-global-XXXXXX", getenv("TMPDIR") ?: "/tmp");
	ASSERT(mkdtemp(h->e.dir));
	snprintf(path, sizeof(path), "%s/catalog.db", h->e.dir);
	ASSERT_OK(catalog_open(path, 0, 0, &h->e.catalog));
	ASSERT_OK(tier_shared_instance(h->e.dir, instance));
	ASSERT_OK(tier_backend_dir_open(shared_dir, &h->root));
	char *error = NULL;
	ASSERT_OK(tier_shared_register(h->root, name, instance, (uint64_t) time(NULL), TIER_SHARED_LEASE_S, &error));
	free(error);
	ASSERT_OK(tier_backend_dir_open(shared_dir, &view));
	snprintf(prefix, sizeof(prefix), "h/%s", name);
	ASSERT_OK(tier_backend_prefix_new(view, prefix, &h->e.backend));
	h->shared = (DedupShared) {
		.host = h->name,
		.root = h->root,
		.object_name = tier_shared_object_name,
		.hosts = tier_shared_hosts,
		.holders = tier_shared_holders,
		.lease_s = TIER_SHARED_LEASE_S,
	};
	h->e.opts = (DedupStoreOptions) { .shared = &h->shared, .container_size = 1 << 20 };
	if (keyed) {
		memset(h->key, 0x42, sizeof(h->key));
		h->e.opts.id_key = h->key;
		h->e.opts.content_key = h->key;
		h->e.opts.description_key = h->key;
		h->e.opts.encrypt = true;
	}
	host_open_store(h);
}

/*
 * The first segment of a host whose store seals its regions is sealed too:
 * not one of its chunk ids is in its bytes, its key opens it (and g read it
 * above), another key does not.
 */
static void check_sealed_segment(Host *h) {
	char path[512];
	snprintf(path, sizeof(path), "%s/h/%s/i/%016llx.fti", shared_dir, h->name, 1ULL);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ASSERT(fd >= 0);
	struct stat st;
	ASSERT(fstat(fd, &st) == 0);
	size_t size = (size_t) st.st_size;
	uint8_t *seg = test_malloc(size), *opened = test_malloc(size);
	ASSERT(pread(fd, seg, size, 0) == (ssize_t) size);
	close(fd);
	DedupSegmentHeader sh;
	ASSERT_OK(dedup_segment_parse(seg, size, &sh));
	ASSERT(sh.sealed && sh.count > 0 && size == dedup_segment_size(sh.count, true));
	uint8_t other[sizeof(h->key)];
	memset(other, 0x43, sizeof(other));
	memcpy(opened, seg, size);
	ASSERT(dedup_segment_open(opened, size, other) == -EBADMSG);
	memcpy(opened, seg, size);
	ASSERT_OK(dedup_segment_open(opened, size, h->key));
	for (uint64_t i = 0; i < sh.count; i++) {
		DedupSegmentEntry e;
		dedup_segment_entry_get(opened, i, &e);
		ASSERT(!memmem(seg, size, e.id.bytes, DEDUP_CHUNK_ID_SIZE));
	}
	free(opened);
	free(seg);
}

static void host_close(Host *h) {
	h->e.store = dedup_store_free(h->e.store);
	h->root = dedup_backend_free(h->root);
	env_close(&h->e);
}

/* Bytes of the regular files below dir: what the shared tier holds. */
static uint64_t du(const char *dir) {
	uint64_t total = 0;
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char p[512];
		struct stat st;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		ASSERT(lstat(p, &st) == 0);
		total += S_ISDIR(st.st_mode) ? du(p) : (uint64_t) st.st_size;
	}
	closedir(d);
	return total;
}

/* Flips one byte in the middle of every container object of host's directory. */
static int flip_one(const char *name, void *userdata) {
	DedupBackend *root = userdata;
	(void) root;
	char path[512];
	snprintf(path, sizeof(path), "%s/h/a/%s", shared_dir, name);
	if (!strstr(name, ".ftc"))
		return 0;
	int fd = open(path, O_RDWR | O_CLOEXEC);
	ASSERT(fd >= 0);
	struct stat st;
	ASSERT(fstat(fd, &st) == 0 && st.st_size > 4096);
	uint8_t b;
	off_t at = st.st_size / 2;
	ASSERT(pread(fd, &b, 1, at) == 1);
	b ^= 0x5a;
	ASSERT(pwrite(fd, &b, 1, at) == 1);
	close(fd);
	return 0;
}

typedef struct Sealer {
	Host *h;
	const uint8_t *data;
	size_t len;
	uint64_t ino;
	DedupWriterStats st;
} Sealer;

static void *seal_thread(void *userdata) {
	Sealer *x = userdata;
	TestRng rng = { (uint64_t) (uintptr_t) x };
	x->ino = env_seal(&x->h->e, x->data, x->len, &rng, &x->st);
	return NULL;
}

/* Two hosts store at once what a third published, and new data of their own, while a fourth reads. */
static void test_concurrent(Host *a, Host *b, Host *c, uint64_t ino_c, const uint8_t *data, size_t len) {
	TestRng rng = { 0x77 };
	uint8_t *fresh = test_malloc(len);
	test_rng_fill(&rng, fresh, len);
	uint64_t ino_a = env_seal(&a->e, data, len, &rng, NULL);
	Sealer x[4] = {
		{ .h = b, .data = data, .len = len },
		{ .h = c, .data = data, .len = len },
		{ .h = b, .data = fresh, .len = len },
		{ .h = c, .data = fresh, .len = len },
	};
	pthread_t t[4];
	for (size_t i = 0; i < 4; i++)
		ASSERT(pthread_create(&t[i], NULL, seal_thread, &x[i]) == 0);
	env_check_file(&c->e, ino_c, data, len, &rng);
	for (size_t i = 0; i < 4; i++)
		ASSERT(pthread_join(t[i], NULL) == 0);
	for (size_t i = 0; i < 4; i++)
		env_check_file(&x[i].h->e, x[i].ino, x[i].data, len, &rng);
	/* What a published is not sent again; new data is each one's own until one of them publishes it. */
	ASSERT(x[0].st.new_bytes == 0 && x[1].st.new_bytes == 0);
	ASSERT(x[2].st.new_bytes + x[2].st.foreign_bytes + x[2].st.dup_bytes == len);
	env_check_file(&a->e, ino_a, data, len, &rng);
	env_drop(&a->e, ino_a);
	/* b and c keep their first files of data only (test_collect() lets go of those). */
	env_drop(&b->e, x[0].ino);
	env_drop(&c->e, x[1].ino);
	free(fresh);
}

/* Objects named *suffix below path (recursively). */
static uint64_t count_below(const char *path, const char *suffix) {
	DIR *d = opendir(path);
	uint64_t n = 0;
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char p[512];
		size_t l = strlen(de->d_name), k = strlen(suffix);
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
		if (l > k && strcmp(de->d_name + l - k, suffix) == 0)
			n++;
		else
			n += count_below(p, suffix);
	}
	closedir(d);
	return n;
}

static uint64_t count_objects(const char *host, const char *dir, const char *suffix) {
	char path[512];
	snprintf(path, sizeof(path), "%s/h/%s/%s", shared_dir, host, dir);
	return count_below(path, suffix);
}

/* A temporary of host's, as a crash before its rename leaves it: longer than what will be written there. */
static void leftover(const char *host, const char *name) {
	char path[512];
	snprintf(path, sizeof(path), "%s/h/%s/%s", shared_dir, host, name);
	char *slash = strrchr(path, '/');
	*slash = '\0';
	(void) mkdir(path, 0755);
	*slash = '/';
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ASSERT(fd >= 0);
	uint8_t junk[64 * 1024];
	memset(junk, 0xa5, sizeof(junk));
	ASSERT(write(fd, junk, sizeof(junk)) == (ssize_t) sizeof(junk));
	close(fd);
}

static void gc(Host *h, DedupGcStats *ret) {
	DedupGcStats st;
	ASSERT_OK(dedup_store_gc(h->e.store, NULL, &st));
	if (ret)
		*ret = st;
}

/*
 * a condemned `condemned` containers, which b (ino_b) and c (ino_c) reference
 * and the others may; d holds ino_d of its own.
 */
static void test_collect(Host *a, Host **others, size_t n, uint64_t ino_b, uint64_t ino_c, uint64_t ino_d,
			 const uint8_t *data, size_t len, uint64_t condemned) {
	TestRng rng = { 0x99 };
	DedupGcStats st;
	DedupGlobalStats gs;
	Host *b = others[0], *c = others[1], *d = others[2];

	/* Every other host publishes its references: b and c still name a's containers. */
	for (size_t i = 0; i < n; i++)
		gc(others[i], NULL);
	ASSERT(count_objects("b", "r", ".ftr") == 1 && count_objects("a", "k", ".ftk") >= 1);
	gc(a, &st);
	ASSERT(st.containers_deleted == 0 && st.containers_waiting >= condemned);
	uint64_t before = count_objects("a", "c", ".ftc");

	/* A new host finds a's chunks condemned: it stores its own copy and references none of them. */
	Host h;
	host_open(&h, "h", false);
	DedupWriterStats ws;
	uint64_t ino_h = env_seal(&h.e, data, len, &rng, &ws);
	dedup_store_global_stats(h.e.store, &gs);
	ASSERT(ws.foreign_bytes == 0 && ws.new_bytes == len && gs.foreign_refused > 0);
	env_check_file(&h.e, ino_h, data, len, &rng);

	/* b and c let go, and publish so; h publishes its acknowledgement. */
	env_drop(&b->e, ino_b);
	env_drop(&c->e, ino_c);
	leftover("b", "r/0000000000000002.ftr.tmp"); /* the same of a publication */
	gc(b, NULL);
	gc(c, NULL);
	gc(&h, NULL);
	ASSERT(count_objects("b", "r", ".ftr") == 1); /* the older publication went after the newer was durable */
	ASSERT(count_objects("b", "r", ".tmp") == 0 && count_objects("a", "k", ".tmp") == 0);

	/* g (closed after the first tests) never published: it holds everything until it is retired. */
	gc(a, &st);
	ASSERT(st.containers_deleted == 0 && st.containers_waiting >= condemned);
	dedup_store_global_stats(a->e.store, &gs);
	ASSERT(strcmp(gs.blocked_by, "g") == 0);
	uint8_t writer[TIER_HOST_INSTANCE_SIZE] = { 1 };
	TierHostRecord was;
	ASSERT_OK(tier_shared_retire(a->root, "g", writer, (uint64_t) time(NULL), true, &was));
	gc(a, &st);
	fprintf(stderr, "collection across hosts: %llu condemned containers deleted, %llu waiting, %llu -> %llu objects\n",
		(unsigned long long) st.containers_deleted, (unsigned long long) st.containers_waiting,
		(unsigned long long) before, (unsigned long long) count_objects("a", "c", ".ftc"));
	ASSERT(st.containers_deleted >= condemned && st.containers_waiting == 0);
	ASSERT(count_objects("a", "c", ".ftc") == before - st.containers_deleted);
	dedup_store_global_stats(a->e.store, &gs);
	ASSERT(gs.condemned_waiting == 0 && gs.blocked_by[0] == '\0');
	/* What lives is untouched: d's own file, h's copy; condemnations stay. */
	env_check_file(&d->e, ino_d, data, len, &rng);
	env_check_file(&h.e, ino_h, data, len, &rng);
	ASSERT(count_objects("a", "k", ".ftk") >= 1);
	host_close(&h);
}

/*
 * Compaction on a shared tier: k's half-dead container is copied, not
 * unlinked, and condemned by the next collection while b references it;
 * a new host finds the moved chunks at their new place.
 */
static void test_compact(Host *b) {
	TestRng rng = { 0x4b };
	const size_t part = 256 * KiB;
	uint8_t *x1 = test_malloc(part), *x2 = test_malloc(part);
	test_rng_fill(&rng, x1, part);
	test_rng_fill(&rng, x2, part);
	Host k, m;
	DedupGcStats st;
	DedupWriterStats ws;

	host_open(&k, "k", false);
	uint64_t k1 = env_seal(&k.e, x1, part, &rng, NULL), k2 = env_seal(&k.e, x2, part, &rng, NULL);
	/* More than the rest of the container: it fills and is sealed (an open one is never compacted). */
	uint8_t *x3 = test_malloc(4 * part);
	test_rng_fill(&rng, x3, 4 * part);
	(void) env_seal(&k.e, x3, 4 * part, &rng, NULL);
	free(x3);
	gc(b, NULL); /* loads k's segment now, not at b's next refresh */
	uint64_t b1 = env_seal(&b->e, x1, part, &rng, &ws);
	ASSERT(ws.foreign_bytes == part);
	env_drop(&k.e, k2);
	uint64_t before = count_objects("k", "c", ".ftc");
	DedupGcOptions o = { .live_threshold = 0.9 };
	ASSERT_OK(dedup_store_gc(k.e.store, &o, &st));
	ASSERT(st.containers_compacted == 1 && st.containers_deleted == 0);
	ASSERT(count_objects("k", "c", ".ftc") == before + 1); /* the copy beside the old one */
	ASSERT_OK(dedup_store_gc(k.e.store, &o, &st));
	ASSERT(st.containers_condemned == 1 && st.containers_waiting >= 1 && st.containers_compacted == 0);
	env_check_file(&k.e, k1, x1, part, &rng);
	env_check_file(&b->e, b1, x1, part, &rng);

	host_open(&m, "m", false);
	uint64_t m1 = env_seal(&m.e, x1, part, &rng, &ws);
	ASSERT(ws.foreign_bytes == part && ws.new_bytes == 0);
	env_check_file(&m.e, m1, x1, part, &rng);
	host_close(&m);
	host_close(&k);
	free(x1);
	free(x2);
}

/* Whether object name of host's directory is there. */
static bool object_exists(const char *host, const char *name) {
	char path[512];
	snprintf(path, sizeof(path), "%s/h/%s/%s", shared_dir, host, name);
	return access(path, F_OK) == 0;
}

/*
 * Merged condemnations (docs/SHARED.md), on a tier of their own: p
 * condemns one container at each of DEDUP_CONDEMN_MERGE_AT + 2
 * collections, the first one held by q's reference; q collects after each.
 * The 16th collection merges 1..16 into k/16.ftm and removes them; a new
 * host learns every condemned container from it (it stores its own copy
 * of their chunks); p reopened goes on past the merged epoch and still
 * holds q's container.  q reopened while p's k/ cannot be listed (as a
 * READDIR across p's merge may miss it) loads none of p's segments until
 * its run reaches what its last publication acknowledged of p: it stores
 * a released container's chunks anew instead of referencing them, also
 * after a publication and a second restart meanwhile.
 */
static void test_merge(void) {
	const size_t part = 64 * KiB;
	const unsigned rounds = DEDUP_CONDEMN_MERGE_AT + 2;
	uint8_t *x = test_malloc((rounds + 2) * part);
	TestRng rng = { 0x6d };
	DedupWriterStats ws;
	DedupGcStats st;
	Host p, q, n;
	char name[DEDUP_REFS_NAME_MAX], from[600], to[600];

	snprintf(shared_dir, sizeof(shared_dir), "%s/fratier-merge-XXXXXX", getenv("TMPDIR") ?: "/tmp");
	ASSERT(mkdtemp(shared_dir));
	test_rng_fill(&rng, x, (rounds + 2) * part);
	host_open(&p, "p", false);
	host_open(&q, "q", false);
	uint64_t p0 = env_seal(&p.e, x, part, &rng, NULL);
	gc(&q, NULL); /* loads p's segment now */
	uint64_t q0 = env_seal(&q.e, x, part, &rng, &ws);
	ASSERT(ws.foreign_bytes == part);
	env_drop(&p.e, p0);
	for (unsigned i = 0; i < rounds; i++) {
		if (i > 0)
			env_drop(&p.e, env_seal(&p.e, x + i * part, part, &rng, NULL));
		gc(&p, &st);
		ASSERT(st.containers_condemned == 1);
		gc(&q, NULL);
	}
	gc(&p, &st);
	/* 1..16 merged and gone; 17 and 18 single; the container q references held. */
	ASSERT(object_exists("p", dedup_condemn_merged_name(DEDUP_CONDEMN_MERGE_AT, name)));
	ASSERT(count_objects("p", "k", ".ftm") == 1 && count_objects("p", "k", ".ftk") == rounds - DEDUP_CONDEMN_MERGE_AT);
	ASSERT(st.containers_waiting == 1 && count_objects("p", "c", ".ftc") == 1);
	env_check_file(&q.e, q0, x, part, &rng);

	/* A new host: the held container's chunks and those of the last single condemnation are condemned to it. */
	host_open(&n, "n", false);
	(void) env_seal(&n.e, x, part, &rng, &ws);
	ASSERT(ws.foreign_bytes == 0 && ws.new_bytes == part);
	(void) env_seal(&n.e, x + (rounds - 1) * part, part, &rng, &ws);
	ASSERT(ws.foreign_bytes == 0 && ws.new_bytes == part);
	host_close(&n);

	/* p reopened: past the merged epoch, and still holding q's container. */
	p.e.store = dedup_store_free(p.e.store);
	host_open_store(&p);
	env_drop(&p.e, env_seal(&p.e, x + rounds * part, part, &rng, NULL));
	gc(&p, &st);
	ASSERT(st.containers_condemned == 1 && object_exists("p", dedup_condemn_name(rounds + 1, name)));
	ASSERT(st.containers_waiting >= 1);
	gc(&q, NULL);

	/* q reopened while p's k/ is out of sight: p's segments wait for the run q acknowledged. */
	snprintf(from, sizeof(from), "%s/h/p/k", shared_dir);
	snprintf(to, sizeof(to), "%s/h/p/k-hidden", shared_dir);
	q.e.store = dedup_store_free(q.e.store);
	host_open_store(&q);
	ASSERT(rename(from, to) == 0);
	(void) env_seal(&q.e, x + 5 * part, part, &rng, &ws); /* condemned at 6, released */
	ASSERT(ws.foreign_bytes == 0 && ws.new_bytes == part);
	/* Its publication meanwhile says the floor again: a second restart starts from it too. */
	gc(&q, NULL);
	q.e.store = dedup_store_free(q.e.store);
	host_open_store(&q);
	(void) env_seal(&q.e, x + 4 * part, part, &rng, &ws);
	ASSERT(ws.foreign_bytes == 0 && ws.new_bytes == part);
	ASSERT(rename(to, from) == 0);
	gc(&q, NULL);
	/* In sight again: p's live chunks are referenced again. */
	uint64_t p1 = env_seal(&p.e, x + (rounds + 1) * part, part, &rng, NULL);
	gc(&q, NULL);
	uint64_t q1 = env_seal(&q.e, x + (rounds + 1) * part, part, &rng, &ws);
	ASSERT(ws.foreign_bytes == part);
	env_check_file(&q.e, q1, x + (rounds + 1) * part, part, &rng);
	env_check_file(&p.e, p1, x + (rounds + 1) * part, part, &rng);
	env_check_file(&q.e, q0, x, part, &rng);
	fprintf(stderr, "merged condemnations: %llu single, %llu merged after %u condemnations\n",
		(unsigned long long) count_objects("p", "k", ".ftk"), (unsigned long long) count_objects("p", "k", ".ftm"),
		rounds + 1);

	host_close(&q);
	host_close(&p);
	ASSERT(nftw(shared_dir, env_rm, 16, FTW_DEPTH | FTW_PHYS) == 0);
	free(x);
}

int main(void) {
	const size_t len = 6 * MiB;
	TestRng rng = { 0x61 };
	uint8_t *data = test_malloc(len), *other = test_malloc(len);
	DedupWriterStats st;
	DedupGlobalStats gs;
	Host a, b, c, d;

	test_merge();
	test_rng_fill(&rng, data, len);
	test_rng_fill(&rng, other, len);
	snprintf(shared_dir, sizeof(shared_dir), "%s/fratier-shared-XXXXXX", getenv("TMPDIR") ?: "/tmp");
	ASSERT(mkdtemp(shared_dir));

	/* The first host stores the file and publishes its chunks. */
	host_open(&a, "a", false);
	uint64_t ino_a = env_seal(&a.e, data, len, &rng, &st);
	ASSERT(st.new_bytes == len && st.foreign_chunks == 0);
	dedup_store_global_stats(a.e.store, &gs);
	ASSERT(gs.shared && gs.segments_published == 1 && gs.chunks_unpublished == 0 && gs.bytes_sent >= st.stored_bytes);
	uint64_t one = du(shared_dir);

	/* The second and third store nothing of it and read it back from the first's containers. */
	host_open(&b, "b", false);
	host_open(&c, "c", false);
	uint64_t ino_b = env_seal(&b.e, data, len, &rng, &st);
	ASSERT(st.new_bytes == 0 && st.foreign_bytes == len);
	uint64_t ino_c = env_seal(&c.e, data, len, &rng, &st);
	ASSERT(st.new_bytes == 0 && st.foreign_bytes == len);
	dedup_store_global_stats(c.e.store, &gs);
	fprintf(stderr, "c: hosts %llu segments %llu hits %llu chunks %llu containers %llu memory %llu\n",
		(unsigned long long) gs.hosts, (unsigned long long) gs.segments_loaded,
		(unsigned long long) gs.foreign_hits, (unsigned long long) st.chunks,
		(unsigned long long) gs.foreign_containers, (unsigned long long) gs.memory_bytes);
	ASSERT(gs.hosts == 1 && gs.segments_loaded == 1 && gs.foreign_hits == st.foreign_chunks && gs.foreign_containers > 0 &&
	       gs.memory_bytes > 0);
	/* Segments of b and c are empty of course: nothing new was stored; nothing was published. */
	ASSERT(gs.segments_published == 0 && gs.bytes_sent == 0);
	env_check_file(&b.e, ino_b, data, len, &rng);
	env_check_file(&c.e, ino_c, data, len, &rng);
	uint64_t three = du(shared_dir);
	/* Host records and the first's containers and segment: no second copy. */
	ASSERT(three < one + 4096);
	fprintf(stderr, "shared tier: %llu bytes after one host, %llu after three (%.3fx)\n", (unsigned long long) one,
		(unsigned long long) three, (double) three / (double) one);

	test_concurrent(&a, &b, &c, ino_c, data, len);

	/* A reopened store still knows its foreign containers (from the catalog) and reads them. */
	b.e.store = dedup_store_free(b.e.store);
	host_open_store(&b);
	env_check_file(&b.e, ino_b, data, len, &rng);

	/* The first host's collector keeps what it published, though it references none of it any more. */
	env_drop(&a.e, ino_a);
	/* What a crash in the middle of writing the condemnation would leave: it is overwritten, not appended to. */
	leftover("a", "k/0000000000000001.ftk.tmp");
	DedupGcStats gc;
	ASSERT_OK(dedup_store_gc(a.e.store, NULL, &gc));
	ASSERT(gc.chunks_deleted > 0 && gc.containers_deleted == 0 && gc.containers_compacted == 0);
	/* Condemned, and held: b and c have not published anything. */
	ASSERT(gc.containers_condemned > 0 && gc.containers_waiting == gc.containers_condemned);
	dedup_store_global_stats(a.e.store, &gs);
	ASSERT(gs.condemned_waiting == gc.containers_condemned && gs.blocked_by[0] != '\0');
	uint64_t condemned = gc.containers_condemned;
	env_check_file(&c.e, ino_c, data, len, &rng);

	/* A host whose ids and regions are under a key skips the segments and stores its own copy. */
	host_open(&d, "d", true);
	uint64_t ino_d = env_seal(&d.e, data, len, &rng, &st);
	ASSERT(st.new_bytes == len && st.foreign_chunks == 0);
	dedup_store_global_stats(d.e.store, &gs);
	ASSERT(gs.segments_other_key >= 1 && gs.segments_loaded == 0);
	env_check_file(&d.e, ino_d, data, len, &rng);
	/*
	 * Another host under the same key references d's sealed regions: they
	 * open at the place d sealed them at (d's container ids), not g's.
	 */
	Host g;
	host_open(&g, "g", true);
	uint64_t ino_g = env_seal(&g.e, data, len, &rng, &st);
	ASSERT(st.new_bytes == 0 && st.foreign_bytes == len);
	env_check_file(&g.e, ino_g, data, len, &rng);
	host_close(&g);
	check_sealed_segment(&d);

	/* A damaged foreign container: EIO on the hosts that reference it, never wrong bytes. */
	DedupBackend *aview = a.e.backend;
	ASSERT_OK(dedup_backend_list(aview, "c", flip_one, NULL));
	/* Caches of decoded regions were filled above: a new store reads from the tier again. */
	b.e.store = dedup_store_free(b.e.store);
	host_open_store(&b);
	uint8_t *buf = test_malloc(len);
	ssize_t got = 0;
	size_t off;
	for (off = 0; off < len; off += (size_t) got) {
		got = dedup_file_read(b.e.store, ino_b, len, off, buf + off, MIN(len - off, 128 * KiB));
		if (got <= 0)
			break;
		ASSERT(memcmp(buf + off, data + off, (size_t) got) == 0);
	}
	ASSERT(got == -EIO);

	/*
	 * A segment that lies: host e publishes the chunks of other data at the
	 * places of the first host's chunks.  Host f references them and reads
	 * EIO (their ids are verified), not the first host's bytes.
	 */
	Host e, f;
	host_open(&e, "e", false);
	uint64_t ino_e = env_seal(&e.e, other, len, &rng, &st);
	ASSERT(st.new_bytes == len);
	{
		char seg_path[512];
		snprintf(seg_path, sizeof(seg_path), "%s/h/e/i/%016llx.fti", shared_dir, 1ULL);
		int fd = open(seg_path, O_RDWR | O_CLOEXEC);
		ASSERT(fd >= 0);
		struct stat sst;
		ASSERT(fstat(fd, &sst) == 0);
		uint8_t *seg = test_malloc((size_t) sst.st_size);
		ASSERT(pread(fd, seg, (size_t) sst.st_size, 0) == sst.st_size);
		DedupSegmentHeader h;
		ASSERT_OK(dedup_segment_parse(seg, (size_t) sst.st_size, &h));
		DedupSegmentEntry *es = test_malloc(h.count * sizeof(*es));
		for (uint64_t i = 0; i < h.count; i++) {
			dedup_segment_entry_get(seg, i, es + i);
			es[i].container += 1000; /* a container of e that does not exist */
		}
		uint8_t *forged;
		ASSERT(!h.sealed);
		ASSERT_OK(dedup_segment_format(&h, es, h.count, NULL, &forged));
		/* e's own store renamed it in; overwriting it in place is what a lying filer would do. */
		ASSERT(pwrite(fd, forged, (size_t) sst.st_size, 0) == sst.st_size);
		close(fd);
		free(forged);
		free(es);
		free(seg);
	}
	host_open(&f, "f", false);
	uint64_t ino_f = env_seal(&f.e, other, len, &rng, &st);
	ASSERT(st.foreign_bytes == len);
	ASSERT(dedup_file_read(f.e.store, ino_f, len, 0, buf, 64 * KiB) == -EIO);
	/* Damage of chunks it retired stays theirs: the next file of the same bytes is stored afresh. */
	(void) ino_e;

	/* Segments are named by epoch and a reopened store goes on after the last. */
	a.e.store = dedup_store_free(a.e.store);
	host_open_store(&a);
	uint64_t ino_a2 = env_seal(&a.e, other, len / 2, &rng, &st);
	(void) ino_a2;
	dedup_store_global_stats(a.e.store, &gs);
	ASSERT(gs.segments_published == 1);
	{
		char p2[512];
		struct stat sst;
		snprintf(p2, sizeof(p2), "%s/h/a/i/%016llx.fti", shared_dir, 2ULL);
		ASSERT(stat(p2, &sst) == 0);
	}

	test_collect(&a, (Host *[]) { &b, &c, &d, &e, &f }, 5, ino_b, ino_c, ino_d, data, len, condemned);
	test_compact(&b);

	free(buf);
	host_close(&f);
	host_close(&e);
	host_close(&d);
	host_close(&c);
	host_close(&b);
	host_close(&a);
	ASSERT(nftw(shared_dir, env_rm, 16, FTW_DEPTH | FTW_PHYS) == 0);
	free(data);
	free(other);
	return 0;
}
