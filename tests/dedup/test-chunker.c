/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Chunker: parameter checks, the frozen gear table and boundaries (format),
 * size limits, streaming == one-shot, shift resistance, fixed mode, zeros;
 * Oracle chunking: blocks found by header and tail, literals and CDC
 * between them, the same pieces however the stream is handed over, and an
 * image copy and a backup piece of the same datafile cut into the same
 * block chunks.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/macros.h"
#include "dedup/chunker.h"
#include "dedup/fingerprint.h"
#include "tests/dedup/dedup-test.h"
#include "tests/dedup/oracle-test.h"

#define KiB ((size_t) 1 << 10)
#define MiB ((size_t) 1 << 20)

static const DedupChunkerParams param_sets[] = {
	DEDUP_CHUNKER_PARAMS_DEFAULT,
	DEDUP_CHUNKER_PARAMS_CDC(64 * KiB),
	{ DEDUP_CHUNKER_CDC, 64, 64, 64 },                 /* the smallest allowed */
	{ DEDUP_CHUNKER_CDC, 64, 256, 1024 },
	{ DEDUP_CHUNKER_CDC, 2 * KiB, 8 * KiB, 8 * KiB },   /* avg == max */
	{ DEDUP_CHUNKER_CDC, 8 * KiB, 8 * KiB, 32 * KiB },  /* min == avg */
	{ DEDUP_CHUNKER_CDC, 1 * MiB, 1 * MiB, 4 * MiB },   /* the largest allowed */
	DEDUP_CHUNKER_PARAMS_FIXED(8 * KiB),
	DEDUP_CHUNKER_PARAMS_FIXED(1000),
};

static uint8_t *random_buffer(uint64_t seed, size_t len) {
	TestRng rng = { seed };
	uint8_t *buf = test_malloc(len);
	test_rng_fill(&rng, buf, len);
	return buf;
}

static void split(const DedupChunkerParams *p, const void *buf, size_t len, size_t **ret_sizes, size_t *ret_n) {
	ASSERT_OK(dedup_chunker_split(p, buf, len, ret_sizes, ret_n));
}

static void test_params(void) {
	DedupChunker c;
	static const DedupChunkerParams bad[] = {
		{ DEDUP_CHUNKER_CDC, 32, 64, 256 },                     /* min below the limit */
		{ DEDUP_CHUNKER_CDC, 1 * MiB, 4 * MiB, 8 * MiB },       /* max above the limit */
		{ DEDUP_CHUNKER_CDC, 4 * KiB, 12 * KiB, 64 * KiB },     /* avg not a power of two */
		{ DEDUP_CHUNKER_CDC, 32 * KiB, 16 * KiB, 64 * KiB },    /* min > avg */
		{ DEDUP_CHUNKER_CDC, 4 * KiB, 16 * KiB, 8 * KiB },      /* avg > max */
		{ DEDUP_CHUNKER_FIXED, 4 * KiB, 8 * KiB, 8 * KiB },     /* fixed needs min == max */
		{ DEDUP_CHUNKER_FIXED, 63, 63, 63 },
		{ DEDUP_CHUNKER_FIXED, 4 * MiB + 1, 4 * MiB + 1, 4 * MiB + 1 },
		{ _DEDUP_CHUNKER_MODE_MAX, 4 * KiB, 16 * KiB, 64 * KiB },
		{ _DEDUP_CHUNKER_MODE_INVALID, 4 * KiB, 16 * KiB, 64 * KiB },
	};

	for (size_t i = 0; i < sizeof(param_sets) / sizeof(param_sets[0]); i++)
		ASSERT_OK(dedup_chunker_init(&c, &param_sets[i]));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t *sizes = NULL, n = 0;
		ASSERT_RET(dedup_chunker_params_validate(&bad[i]), -EINVAL);
		ASSERT_RET(dedup_chunker_init(&c, &bad[i]), -EINVAL);
		ASSERT_RET(dedup_chunker_split(&bad[i], "x", 1, &sizes, &n), -EINVAL);
	}
	ASSERT_RET(dedup_chunker_params_validate(NULL), -EINVAL);
}

/* docs/FORMAT.md: gear[i] is output i+1 of splitmix64 seeded with DEDUP_CHUNKER_GEAR_SEED. */
static void test_gear_table(void) {
	TestRng rng = { DEDUP_CHUNKER_GEAR_SEED };
	const uint64_t *gear = dedup_chunker_gear_table();

	for (size_t i = 0; i < 256; i++)
		ASSERT(gear[i] == test_rng_next(&rng));
	ASSERT(gear[0] == UINT64_C(0xf75912dfc50db097));
	ASSERT(gear[255] == UINT64_C(0x46e9904250f74929));
}

/* FNV-1a over the sizes: one number that changes if any boundary moves. */
static uint64_t sizes_digest(const size_t *sizes, size_t n) {
	uint64_t h = UINT64_C(0xcbf29ce484222325);
	for (size_t i = 0; i < n; i++)
		for (unsigned b = 0; b < 4; b++) {
			h ^= (sizes[i] >> (8 * b)) & 0xff;
			h *= UINT64_C(0x100000001b3);
		}
	return h;
}

/*
 * Boundaries are part of the format: these values were produced by the first
 * version and must never change.  If this fails, stored data stops
 * deduplicating against new writes; fix the chunker, not the numbers.  An
 * independent implementation of docs/FORMAT.md gives the same values.
 */
static void test_golden(void) {
	static const struct {
		DedupChunkerParams params;
		size_t n;
		size_t first[8];
		uint64_t digest;
	} golden[] = {
		{ DEDUP_CHUNKER_PARAMS_DEFAULT,
		  228,
		  { 20869, 19713, 25770, 17468, 17460, 17257, 17795, 6824 },
		  UINT64_C(0xf11ae9930da2583c) },
		{ { DEDUP_CHUNKER_CDC, 64, 256, 1024 },
		  14414,
		  { 177, 280, 529, 269, 453, 279, 278, 271 },
		  UINT64_C(0xc3f956ba2ef9229d) },
		{ DEDUP_CHUNKER_PARAMS_CDC(64 * KiB),
		  56,
		  { 96724, 101690, 71060, 67875, 18296, 66331, 136346, 67431 },
		  UINT64_C(0xd3009c4721e41cc0) },
	};
	uint8_t *buf = random_buffer(1, 4 * MiB);

	for (size_t g = 0; g < sizeof(golden) / sizeof(golden[0]); g++) {
		size_t *sizes, n;
		split(&golden[g].params, buf, 4 * MiB, &sizes, &n);
		ASSERT(n == golden[g].n);
		for (size_t i = 0; i < 8; i++)
			ASSERT(sizes[i] == golden[g].first[i]);
		ASSERT(sizes_digest(sizes, n) == golden[g].digest);
		free(sizes);
	}
	free(buf);
}

static void check_sizes(const DedupChunkerParams *p, const size_t *sizes, size_t n, size_t len) {
	size_t total = 0;

	for (size_t i = 0; i < n; i++) {
		ASSERT(sizes[i] <= p->max_size);
		if (i + 1 < n)
			ASSERT(sizes[i] >= p->min_size);
		else
			ASSERT(sizes[i] >= 1);
		total += sizes[i];
	}
	ASSERT(total == len);
}

static void test_limits(void) {
	size_t len = 8 * MiB;
	uint8_t *buf = random_buffer(2, len);

	for (size_t i = 0; i < sizeof(param_sets) / sizeof(param_sets[0]); i++) {
		const DedupChunkerParams *p = &param_sets[i];
		size_t *sizes, n;

		split(p, buf, len, &sizes, &n);
		check_sizes(p, sizes, n, len);
		if (p->mode == DEDUP_CHUNKER_CDC && p->max_size >= 4 * p->min_size) {
			/* The distribution is centred near avg on random data. */
			size_t mean = len / n;
			ASSERT(mean >= p->avg_size / 2 && mean <= p->avg_size * 2);
		}
		free(sizes);
	}
	free(buf);
}

/* Chunk sizes when the stream arrives in pieces of random size (0 allowed). */
static void split_streaming(const DedupChunkerParams *p, const uint8_t *buf, size_t len, TestRng *rng,
			    size_t piece_max, size_t **ret_sizes, size_t *ret_n) {
	DedupChunker c;
	size_t *sizes = test_malloc((len / p->min_size + 1) * sizeof(size_t)), n = 0;

	ASSERT_OK(dedup_chunker_init(&c, p));
	for (size_t off = 0; off < len;) {
		size_t piece = test_rng_next(rng) % (piece_max + 1);
		size_t end = len - off < piece ? len : off + piece;
		size_t start_pending = dedup_chunker_pending(&c);
		size_t k;

		/* An empty piece consumes nothing and never ends a chunk. */
		if (end == off) {
			ASSERT(!dedup_chunker_scan(&c, buf + off, 0, &k));
			ASSERT(k == 0 && dedup_chunker_pending(&c) == start_pending);
			continue;
		}
		while (off < end) {
			bool boundary = dedup_chunker_scan(&c, buf + off, end - off, &k);
			ASSERT(k >= 1 && k <= end - off);
			off += k;
			if (boundary) {
				ASSERT(dedup_chunker_pending(&c) == 0);
				sizes[n++] = start_pending + k;
				start_pending = 0;
			} else {
				ASSERT(off == end);
				ASSERT(dedup_chunker_pending(&c) == start_pending + k);
			}
		}
	}
	if (dedup_chunker_pending(&c) > 0)
		sizes[n++] = dedup_chunker_pending(&c);
	*ret_sizes = sizes;
	*ret_n = n;
}

static void test_streaming(void) {
	size_t len = 6 * MiB;
	uint8_t *buf = random_buffer(3, len);
	TestRng rng = { 3 };
	/* Write sizes up to ARCn's 1 MiB, and tiny ones to split every window. */
	static const size_t piece_max[] = { 1 * MiB, 64 * KiB, 100, 3 };

	for (size_t i = 0; i < sizeof(param_sets) / sizeof(param_sets[0]); i++)
		for (size_t j = 0; j < sizeof(piece_max) / sizeof(piece_max[0]); j++) {
			const DedupChunkerParams *p = &param_sets[i];
			/* Tiny pieces are slow per byte: a shorter stream still crosses many chunks. */
			size_t l = piece_max[j] < 1000 && 16 * p->max_size < len ? 16 * p->max_size : len;
			size_t *a, na, *b, nb;

			split(p, buf, l, &a, &na);
			split_streaming(p, buf, l, &rng, piece_max[j], &b, &nb);
			ASSERT(na == nb);
			ASSERT(memcmp(a, b, na * sizeof(size_t)) == 0);
			free(a);
			free(b);
		}

	/* reset() starts a new stream mid-chunk. */
	DedupChunker c;
	size_t k, *a, na;
	ASSERT_OK(dedup_chunker_init(&c, &param_sets[0]));
	ASSERT(!dedup_chunker_scan(&c, buf, 1000, &k));
	dedup_chunker_reset(&c);
	ASSERT(dedup_chunker_pending(&c) == 0);
	split(&param_sets[0], buf + 1000, len - 1000, &a, &na);
	ASSERT(dedup_chunker_scan(&c, buf + 1000, len - 1000, &k));
	ASSERT(k == a[0]);
	free(a);
	free(buf);
}

static int cmp_id(const void *a, const void *b) {
	return memcmp(a, b, sizeof(DedupChunkId));
}

static DedupChunkId *chunk_ids(DedupHasher *h, const DedupChunkerParams *p, const uint8_t *buf, size_t len,
			       size_t *ret_n) {
	size_t *sizes, n;
	split(p, buf, len, &sizes, &n);

	DedupChunkId *ids = test_malloc(n * sizeof(DedupChunkId));
	for (size_t i = 0, off = 0; i < n; off += sizes[i], i++)
		ASSERT_OK(dedup_hasher_digest(h, buf + off, sizes[i], &ids[i]));
	qsort(ids, n, sizeof(DedupChunkId), cmp_id);
	free(sizes);
	*ret_n = n;
	return ids;
}

/* How many of a's chunks (sorted ids) also occur in b. */
static size_t shared_chunks(const DedupChunkId *a, size_t na, const DedupChunkId *b, size_t nb) {
	size_t shared = 0;
	for (size_t i = 0; i < na; i++)
		if (bsearch(&a[i], b, nb, sizeof(DedupChunkId), cmp_id))
			shared++;
	return shared;
}

/*
 * The reason for CDC: an edit moves every later byte, yet almost all chunks
 * survive (a second RMAN full backup, an archivelog copied into a piece).
 */
static void test_shift_resistance(void) {
	size_t len = 16 * MiB, edit = 100;
	uint8_t *orig = random_buffer(4, len), *ins = test_malloc(len + edit);
	TestRng rng = { 5 };
	DedupHasher *h;

	ASSERT_OK(dedup_hasher_new(&h));
	for (size_t i = 0; i < sizeof(param_sets) / sizeof(param_sets[0]); i++) {
		const DedupChunkerParams *p = &param_sets[i];
		if (p->mode != DEDUP_CHUNKER_CDC || p->avg_size < 4 * KiB || p->max_size > 1 * MiB)
			continue;

		size_t no, ni, nd, nm;
		DedupChunkId *o = chunk_ids(h, p, orig, len, &no);

		/* 100 bytes inserted at the front. */
		test_rng_fill(&rng, ins, edit);
		memcpy(ins + edit, orig, len);
		DedupChunkId *in = chunk_ids(h, p, ins, len + edit, &ni);
		/* 100 bytes deleted at the front. */
		DedupChunkId *del = chunk_ids(h, p, orig + edit, len - edit, &nd);
		/* 100 bytes inserted in the middle. */
		memcpy(ins, orig, len / 2);
		test_rng_fill(&rng, ins + len / 2, edit);
		memcpy(ins + len / 2 + edit, orig + len / 2, len - len / 2);
		DedupChunkId *mid = chunk_ids(h, p, ins, len + edit, &nm);

		ASSERT(shared_chunks(o, no, in, ni) * 100 >= no * 95);
		ASSERT(shared_chunks(o, no, del, nd) * 100 >= no * 95);
		ASSERT(shared_chunks(o, no, mid, nm) * 100 >= no * 95);
		/* Fixed-size chunking would share nothing after a front insertion. */
		ASSERT(no - shared_chunks(o, no, in, ni) <= 3);
		free(o);
		free(in);
		free(del);
		free(mid);
	}
	dedup_hasher_free(h);
	free(ins);
	free(orig);
}

static void test_fixed(void) {
	uint8_t *buf = random_buffer(6, 100000);
	size_t *sizes, n;

	split(&DEDUP_CHUNKER_PARAMS_FIXED(8192), buf, 100000, &sizes, &n);
	ASSERT(n == 13);
	for (size_t i = 0; i < 12; i++)
		ASSERT(sizes[i] == 8192);
	ASSERT(sizes[12] == 100000 - 12 * 8192);
	free(sizes);

	split(&DEDUP_CHUNKER_PARAMS_FIXED(1000), buf, 100000, &sizes, &n);
	ASSERT(n == 100);
	for (size_t i = 0; i < n; i++)
		ASSERT(sizes[i] == 1000);
	free(sizes);
	free(buf);
}

/*
 * Zeros hash to a constant after one window, so every chunk of a zero run
 * gets the same length and deduplicates to one stored chunk.
 */
static void test_all_zero(void) {
	size_t len = 8 * MiB;
	uint8_t *buf = calloc(1, len);
	ASSERT(buf);

	for (size_t i = 0; i < sizeof(param_sets) / sizeof(param_sets[0]); i++) {
		const DedupChunkerParams *p = &param_sets[i];
		size_t *sizes, n;

		split(p, buf, len, &sizes, &n);
		check_sizes(p, sizes, n, len);
		for (size_t k = 1; k + 1 < n; k++)
			ASSERT(sizes[k] == sizes[0]);
		free(sizes);
	}

	/* With the default parameters a zero run is cut at max_size (docs/FORMAT.md). */
	size_t *sizes, n;
	split(&param_sets[0], buf, len, &sizes, &n);
	ASSERT(n == len / param_sets[0].max_size && sizes[0] == param_sets[0].max_size);
	free(sizes);
	free(buf);
}

static void test_short(void) {
	const DedupChunkerParams p = DEDUP_CHUNKER_PARAMS_DEFAULT;
	uint8_t *buf = random_buffer(7, p.min_size + 1);
	size_t *sizes, n;
	DedupChunker c;
	size_t k;

	split(&p, buf, 0, &sizes, &n);
	ASSERT(n == 0 && sizes == NULL);
	split(&p, buf, 1, &sizes, &n);
	ASSERT(n == 1 && sizes[0] == 1);
	free(sizes);
	/* No cut can come before min_size. */
	split(&p, buf, p.min_size, &sizes, &n);
	ASSERT(n == 1 && sizes[0] == p.min_size);
	free(sizes);

	ASSERT_OK(dedup_chunker_init(&c, &p));
	ASSERT(!dedup_chunker_scan(&c, buf, 0, &k));
	ASSERT(k == 0 && dedup_chunker_pending(&c) == 0);
	ASSERT(!dedup_chunker_scan(&c, buf, p.min_size - 1, &k));
	ASSERT(k == p.min_size - 1 && dedup_chunker_pending(&c) == p.min_size - 1);
	free(buf);
}

static void test_oracle_block_at(void) {
	TestRng rng = { 50 };
	uint8_t *b = test_malloc(ORA_BLOCK);
	ora_block(b, 0x06, 77, 0x12345678, 9, &rng);
	ASSERT(dedup_oracle_block_at(b));
	/* Each checked field wrong: not a block. */
	static const size_t fields[] = { 0, 1, 2, 3, 8, 9, 14, ORA_BLOCK - 4, ORA_BLOCK - 3, ORA_BLOCK - 2, ORA_BLOCK - 1 };
	for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
		uint8_t keep = b[fields[i]];
		b[fields[i]] = fields[i] == 0 ? 0 : (uint8_t) (keep ^ 0x40);
		ASSERT(!dedup_oracle_block_at(b));
		b[fields[i]] = keep;
	}
	/* The rest of the header and the body are not looked at. */
	b[4] ^= 1;
	b[10] ^= 1;
	b[4000] ^= 1;
	ASSERT(dedup_oracle_block_at(b));
	memset(b, 0, ORA_BLOCK);
	ASSERT(!dedup_oracle_block_at(b));
	free(b);
}

/* Pieces of buf handed over in windows of random size (as a writer's feeds come), until the end. */
static size_t oracle_stream(const uint8_t *buf, size_t len, DedupOraclePiece *out, size_t cap, TestRng *rng) {
	DedupOracleSplitter s;
	size_t n = 0, pos = 0, have = 0;
	dedup_oracle_splitter_init(&s);
	while (pos < len) {
		size_t step = (size_t) (test_rng_next(rng) % (3 * ORA_BLOCK));
		have = MIN(len, MAX(have, pos) + step);
		DedupOraclePiece p;
		while (dedup_oracle_next(&s, buf + pos, have - pos, have == len, &p)) {
			ASSERT(n < cap && p.len > 0 && p.len <= have - pos);
			out[n++] = p;
			pos += p.len;
		}
		ASSERT(have == len || have - pos < DEDUP_ORACLE_LOOKAHEAD);
	}
	return n;
}

static void test_oracle_split(void) {
	TestRng rng = { 51 };
	DedupChunkerParams p = DEDUP_CHUNKER_PARAMS_CDC(8 * KiB);
	p.mode = DEDUP_CHUNKER_ORACLE;
	OraFile f = ora_file(40, 1, &rng);
	DedupOraclePiece *pieces;
	size_t n;

	/* The piece: its header block, then per block a 16-byte literal and the block. */
	ASSERT_OK(dedup_oracle_split(&p, f.piece, f.piece_len, &pieces, &n));
	ASSERT(n == 1 + 2 * f.formatted);
	ASSERT(pieces[0].kind == DEDUP_ORACLE_BLOCK);
	for (size_t i = 0; i < f.formatted; i++)
		ASSERT(pieces[1 + 2 * i].kind == DEDUP_ORACLE_LITERAL && pieces[1 + 2 * i].len == ORA_FRAME &&
		       pieces[2 + 2 * i].kind == DEDUP_ORACLE_BLOCK && pieces[2 + 2 * i].len == ORA_BLOCK);

	/* The same pieces whatever the windows (streaming == one-shot). */
	DedupOraclePiece *streamed = test_malloc(4 * n * sizeof(*streamed));
	for (int round = 0; round < 20; round++) {
		/* A stream's pieces cover it: the gaps' bytes (CDC's to cut) come as one or more GAP pieces. */
		size_t m = oracle_stream(f.piece, f.piece_len, streamed, 4 * n, &rng), k = 0;
		for (size_t i = 0; i < m; i++) {
			ASSERT(streamed[i].kind != DEDUP_ORACLE_GAP);
			ASSERT(streamed[i].kind == pieces[k].kind && streamed[i].len == pieces[k].len);
			k++;
		}
		ASSERT(k == n);
	}

	/* The image copy: block 0 and the never-formatted blocks are gaps (CDC: zeros), the rest block chunks. */
	DedupOraclePiece *ip;
	size_t in;
	ASSERT_OK(dedup_oracle_split(&p, f.image, f.image_len, &ip, &in));
	size_t blocks = 0, covered = 0;
	for (size_t i = 0; i < in; i++) {
		ASSERT(ip[i].kind != DEDUP_ORACLE_LITERAL);
		blocks += ip[i].kind == DEDUP_ORACLE_BLOCK;
		covered += ip[i].len;
	}
	ASSERT(blocks == f.formatted && covered == f.image_len);

	/* Both meet: every block chunk of the copy is a block chunk of the piece, byte for byte. */
	DedupHasher *h;
	ASSERT_OK(dedup_hasher_new(&h));
	size_t io = 0, matched = 0;
	for (size_t i = 0; i < in; io += ip[i].len, i++) {
		if (ip[i].kind != DEDUP_ORACLE_BLOCK)
			continue;
		size_t po = 0;
		for (size_t j = 0; j < n; po += pieces[j].len, j++)
			if (pieces[j].kind == DEDUP_ORACLE_BLOCK && memcmp(f.piece + po, f.image + io, ORA_BLOCK) == 0) {
				matched++;
				break;
			}
	}
	ASSERT(matched == f.formatted);
	dedup_hasher_free(h);

	/* A long gap of random bytes (no block): CDC chunks, the last ending where the next block starts. */
	size_t len = 100 * KiB + ORA_BLOCK;
	uint8_t *mixed = test_malloc(len);
	test_rng_fill(&rng, mixed, 100 * KiB);
	ora_block(mixed + 100 * KiB, 0x06, 5, 7, 1, &rng);
	DedupOraclePiece *mp;
	size_t mn;
	ASSERT_OK(dedup_oracle_split(&p, mixed, len, &mp, &mn));
	ASSERT(mn >= 3 && mp[mn - 1].kind == DEDUP_ORACLE_BLOCK && mp[mn - 2].kind == DEDUP_ORACLE_GAP && mp[mn - 2].gap_end);
	size_t gap = 0;
	for (size_t i = 0; i + 1 < mn; i++) {
		ASSERT(mp[i].kind == DEDUP_ORACLE_GAP && (mp[i].len >= p.min_size || mp[i].gap_end));
		gap += mp[i].len;
	}
	ASSERT(gap == 100 * KiB);
	free(mp);
	/* A short stream is a literal; an empty one has no piece. */
	ASSERT_OK(dedup_oracle_split(&p, mixed, 20, &mp, &mn));
	ASSERT(mn == 1 && mp[0].kind == DEDUP_ORACLE_LITERAL && mp[0].len == 20);
	free(mp);
	ASSERT_OK(dedup_oracle_split(&p, mixed, 0, &mp, &mn));
	ASSERT(mn == 0);
	free(mp);
	ASSERT_RET(dedup_oracle_split(&param_sets[0], mixed, len, &mp, &mn), -EINVAL);

	free(mixed);
	free(ip);
	free(streamed);
	free(pieces);
	ora_file_free(&f);
}

int main(void) {
	test_params();
	test_gear_table();
	test_golden();
	test_limits();
	test_streaming();
	test_shift_resistance();
	test_fixed();
	test_all_zero();
	test_short();
	test_oracle_block_at();
	test_oracle_split();
	printf("test-chunker: ok\n");
	return EXIT_SUCCESS;
}
