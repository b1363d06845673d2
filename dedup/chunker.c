/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Content-defined chunking (FastCDC, Xia et al., USENIX ATC 2016 / TPDS 2020)
 * and fixed-size chunking, as specified in docs/FORMAT.md.
 *
 * Invariants:
 *  1. Every chunk but the last of a stream is in [min_size, max_size]; the last
 *     one is in [1, max_size].
 *  2. Whether a CDC chunk ends after its L-th byte depends only on L and on
 *     the 64 bytes before that point, never on how the stream was split into
 *     scan() calls: the hash restarts from 0 at chunk offset min_size - 64, and
 *     a 64-bit gear hash forgets a byte after 64 shifts, so at every tested
 *     position it equals the true rolling hash of the last 64 bytes.
 *  3. The gear table and the mask construction never change (format).
 *
 * Speed: bytes before min_size - 64 are skipped without hashing, and the hot
 * loop is unrolled with one mask per loop, so each byte costs a load, a
 * shift-add and a test.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "dedup/chunker.h"

/* Window of the gear hash: a byte's influence leaves the top bit after this. */
#define GEAR_WINDOW 64u
_Static_assert(DEDUP_CHUNK_SIZE_LIMIT_MIN >= GEAR_WINDOW, "min_size must cover one hash window");

/*
 * gear[i] = the (i+1)-th output of splitmix64 seeded with
 * DEDUP_CHUNKER_GEAR_SEED (docs/FORMAT.md); test-chunker regenerates and
 * compares it.  Fixed forever.
 */
static const uint64_t gear[256] = {
	UINT64_C(0xf75912dfc50db097), UINT64_C(0xc8070b6110f30c45), UINT64_C(0x73d5f14f04b8cb55),
	UINT64_C(0x1a5528b2ec78bebe), UINT64_C(0x89e6bb320b4f409a), UINT64_C(0x183be5ebdeba5e10),
	UINT64_C(0x2a031ef8bf3d0a25), UINT64_C(0x6107ea2c2c256f4d), UINT64_C(0x62b94a454ab8fbfd),
	UINT64_C(0x78266810e2649ec5), UINT64_C(0x1b0a982fc069a872), UINT64_C(0xa5298273a39f583f),
	UINT64_C(0x1b8d0dc35cf2173f), UINT64_C(0x0c4c29ac4e7834c7), UINT64_C(0xd5bcf31e06d4a0f8),
	UINT64_C(0xe7b593ab1ee00b56), UINT64_C(0x59bed18f3aed9617), UINT64_C(0x546bcbbd9e6fca89),
	UINT64_C(0x79135cad0977b3fb), UINT64_C(0x09e8d5e3af9d6b44), UINT64_C(0xcf9c839e18890ac6),
	UINT64_C(0x710e1d22ab6f26f9), UINT64_C(0x96ed96d061d6f935), UINT64_C(0x859b3615d750a41c),
	UINT64_C(0x4dba4c83e01f1d8e), UINT64_C(0xa0ec307949541a0b), UINT64_C(0x680dd8120409fd42),
	UINT64_C(0x0a1475f94c8d9a56), UINT64_C(0x48e85ca75b66e060), UINT64_C(0x0546a2609b388be8),
	UINT64_C(0x5e9e6a1d852a1ee5), UINT64_C(0xd9c13c1e15653b53), UINT64_C(0x5d7ebcca3f21c3a0),
	UINT64_C(0x92251c381c841fee), UINT64_C(0x3a4c393665aad3c0), UINT64_C(0x8dd11e6605af4122),
	UINT64_C(0x9949c2fe9e400df5), UINT64_C(0xfa6cb332600b06ef), UINT64_C(0x47bb707359dd11c8),
	UINT64_C(0x70e61a27685f1e14), UINT64_C(0x0492807f5b23ef63), UINT64_C(0xae249579bb831003),
	UINT64_C(0xc3af77d510d7d4ed), UINT64_C(0xf18d25b26046eb65), UINT64_C(0x37212c3c03c68259),
	UINT64_C(0xf2731a4271cd5524), UINT64_C(0x0e9846d11cad5787), UINT64_C(0x980d117d82c91bf7),
	UINT64_C(0xc3b504170a53610f), UINT64_C(0xdd4f16a7777d24ec), UINT64_C(0x292ecdf5f3dfaf1f),
	UINT64_C(0x4033cfc1cd83471a), UINT64_C(0xb4e2c72516f45113), UINT64_C(0xe118af92df751c70),
	UINT64_C(0xc6d702786aa88803), UINT64_C(0x72005a1e951659bc), UINT64_C(0x90fc0ae32b2257bb),
	UINT64_C(0x5315ed90b8c9929a), UINT64_C(0x8fd7139222bceb45), UINT64_C(0xd0d70147b129ae08),
	UINT64_C(0x5a44f506720eaa85), UINT64_C(0x0d2f1d48980aa29f), UINT64_C(0x3112f404a5dd38ab),
	UINT64_C(0x33507933cb08176e), UINT64_C(0xb0eb5dbd1662519e), UINT64_C(0xe133f71796718df8),
	UINT64_C(0x41445d4aa7391a8d), UINT64_C(0x492c279378b2f358), UINT64_C(0x3c724981734de4c8),
	UINT64_C(0x504e90d0a07b01c3), UINT64_C(0x8796634ad14fb55b), UINT64_C(0x8416e2384b446f21),
	UINT64_C(0xa7f322e630df0f5f), UINT64_C(0x02b3bca0287641e4), UINT64_C(0xecf06a8647af2749),
	UINT64_C(0x0af3b8c5524b5860), UINT64_C(0x1f09e6203c974ee4), UINT64_C(0x4eb9c8b04321efc9),
	UINT64_C(0x25421ffb41080dd5), UINT64_C(0xc30b40c0aa366dc8), UINT64_C(0xeefe967fcb6d08a0),
	UINT64_C(0x152642180197a31c), UINT64_C(0x84b49902f3732945), UINT64_C(0x28c517f16af11e0b),
	UINT64_C(0x8de79064f0292cbb), UINT64_C(0xa8d14fec621bedea), UINT64_C(0xcd52bb5d3284fcd9),
	UINT64_C(0x50ed579e5b6fac79), UINT64_C(0x135bbc49e9843a90), UINT64_C(0x23dce214dfd6f0d4),
	UINT64_C(0x1bed349942d7f7c0), UINT64_C(0xc19f3d1395f0fae5), UINT64_C(0x358bd8e4d2998c15),
	UINT64_C(0x0ae86f87eca3adf3), UINT64_C(0x1d492ee3fe0accf9), UINT64_C(0xe034e209ddc3adbb),
	UINT64_C(0xb7703bccb3fd778a), UINT64_C(0xc9bbcaf1c666ff15), UINT64_C(0x8b9fa4464355c2b9),
	UINT64_C(0x5864e7efbbac8b75), UINT64_C(0x1ae03e7843c1d78a), UINT64_C(0x22a064dae3f89c3e),
	UINT64_C(0x63979080b9c68634), UINT64_C(0xb146fd2e5b786f95), UINT64_C(0x5991d658f6ae7377),
	UINT64_C(0xd9c5b8038da3457d), UINT64_C(0x3cfb58fa7a3e93ce), UINT64_C(0x368da0059f321d57),
	UINT64_C(0x1c1a4d9d94b72a9c), UINT64_C(0x9b08f651a104befb), UINT64_C(0x8d9bf21610dbfc6c),
	UINT64_C(0xd031ef39e5e2a632), UINT64_C(0x96d081ccdb33bcd7), UINT64_C(0x0dc5967a429c3cfb),
	UINT64_C(0x276fc0c80256eaf2), UINT64_C(0xd1ead60e4585f8b5), UINT64_C(0xd767ec25720a2e95),
	UINT64_C(0x4365b4dacfe6c60f), UINT64_C(0xf4bc8bd3573a26fb), UINT64_C(0xbebed248140b9eaa),
	UINT64_C(0xcb077fd9ee40f4f9), UINT64_C(0x909129b424d28617), UINT64_C(0x418fd845e1672583),
	UINT64_C(0x5cf5433bba2c54cf), UINT64_C(0x5d3242f849c614ee), UINT64_C(0x5d0f4cc157c662b2),
	UINT64_C(0xf5f6352a4840883d), UINT64_C(0xe3c95fc2a65f9c59), UINT64_C(0x5a88b65b84858df3),
	UINT64_C(0xe312bdb9ee7665f4), UINT64_C(0x5ba8199ba6cd0ea7), UINT64_C(0xed1c456a3407ed12),
	UINT64_C(0x41a9f4e8d275333c), UINT64_C(0xc77a9730f86db2e5), UINT64_C(0xdccab947a0b488fd),
	UINT64_C(0x79910cb71b1deb15), UINT64_C(0xa45171892e459dd1), UINT64_C(0xe949d124b305efb6),
	UINT64_C(0x21eb101ae50a8fb7), UINT64_C(0xaf174616a0082e24), UINT64_C(0x7d5d7fab4929afd1),
	UINT64_C(0x703b01df4c1068fe), UINT64_C(0x8c2fcae382a5f6b7), UINT64_C(0x7110c247c4dde482),
	UINT64_C(0x6f960ceb5fcface9), UINT64_C(0x760b9e0566c7f016), UINT64_C(0x251df19f72c57a12),
	UINT64_C(0x968e1e926216d129), UINT64_C(0x284fd05edd1df084), UINT64_C(0x5a49a926b4bfe807),
	UINT64_C(0x788f2f63533dde9d), UINT64_C(0x4294852c932a5369), UINT64_C(0xe8de3a58ac99f540),
	UINT64_C(0x0c4705056d9ceb0f), UINT64_C(0x4ef9cafc0d455e41), UINT64_C(0x7ac11881f533d5e1),
	UINT64_C(0x8557c37bc9584225), UINT64_C(0xcfd72f69e9cb9fbe), UINT64_C(0x7abef133d6ea8c19),
	UINT64_C(0xab4cd3a31b003b78), UINT64_C(0xac480f414d5a17c6), UINT64_C(0xa8dd503eac001271),
	UINT64_C(0xeeb3e5e564dece70), UINT64_C(0x233e0857e32f28b9), UINT64_C(0x3da599c4cf986b6e),
	UINT64_C(0xad310e60c21d5bcb), UINT64_C(0x0cb9b177ab340310), UINT64_C(0x818a198849069317),
	UINT64_C(0xec8f118256ab33a2), UINT64_C(0xc344f7154ae39d50), UINT64_C(0xe5e6b0c630822fcd),
	UINT64_C(0x41ee10edabef833b), UINT64_C(0x4cee74633e9cf9ac), UINT64_C(0xe1579a3036d8cd1b),
	UINT64_C(0xeb92d46673c56558), UINT64_C(0x084e4763494e14c6), UINT64_C(0x2ec2b99f1486131c),
	UINT64_C(0xd3d27540ee1e7841), UINT64_C(0x3a64eed306be879c), UINT64_C(0xeda20b705f0b41d8),
	UINT64_C(0x055ae3b2f3c3d9af), UINT64_C(0x4cb68f0b79699d85), UINT64_C(0x49407dfed0a6b91e),
	UINT64_C(0xde6d5e1684bce3af), UINT64_C(0x1006de7d568e7eef), UINT64_C(0x42dfbdc09f611158),
	UINT64_C(0x6cd70e06f3a136db), UINT64_C(0xed802ae17c6e9167), UINT64_C(0x3a02e653715620f6),
	UINT64_C(0x9196804868c2d157), UINT64_C(0x1c6a801b069b036e), UINT64_C(0x9403ecd1d3be86aa),
	UINT64_C(0x27d165d4400d445b), UINT64_C(0x9e9abd561434b153), UINT64_C(0x757420974546606d),
	UINT64_C(0x123a8465b9f7b8ea), UINT64_C(0x7fa9826fb14a8d2e), UINT64_C(0xd316158977b43eca),
	UINT64_C(0x8d7130d81d76c5df), UINT64_C(0x17049181238e868d), UINT64_C(0x077646f9bc8f5e11),
	UINT64_C(0xd5e6ffcf1829eea4), UINT64_C(0xf88bf3076fd083f3), UINT64_C(0x86c8e8c44281e1f3),
	UINT64_C(0x553cf1ffa51e877d), UINT64_C(0xe2fb494556f93284), UINT64_C(0x8404558823a24a19),
	UINT64_C(0x891f4561f58f2239), UINT64_C(0x955cee1980c7e82a), UINT64_C(0x837fb263ff57b124),
	UINT64_C(0x444f309c180b7172), UINT64_C(0xa157744bd99ddc4b), UINT64_C(0x9ef0719862475e3e),
	UINT64_C(0xd0aac46efebfabb6), UINT64_C(0xe8f656b6680e270c), UINT64_C(0x21a5c2428d4d015e),
	UINT64_C(0xda1c6eef39d33207), UINT64_C(0x25b43b4bba9033a1), UINT64_C(0x2cbb91c501ce3bc6),
	UINT64_C(0x838fbe5fcd914912), UINT64_C(0x7b20b7440bb29ef6), UINT64_C(0xc1e2004725469e64),
	UINT64_C(0x908f7e0c9b37d4a2), UINT64_C(0xa7991234e66c657b), UINT64_C(0xbae632309d9e0a8d),
	UINT64_C(0xb515b5c8d97a085e), UINT64_C(0x8cf071414ef32bec), UINT64_C(0x7bb73beea66c4c84),
	UINT64_C(0x0a6ac0a89f77a2d6), UINT64_C(0xaeccdc105bb7e1ea), UINT64_C(0xa59730dd1f93e93e),
	UINT64_C(0x88b0719f5ad4c874), UINT64_C(0x57ca126bb32eb492), UINT64_C(0x4acbfdf17ed5bb7e),
	UINT64_C(0xb305297c1e9eacd4), UINT64_C(0x3293a47f9110bcb1), UINT64_C(0xe415d152fa45797a),
	UINT64_C(0x7ec41f66675852a1), UINT64_C(0xca84df48c4488a01), UINT64_C(0xb189f51f83fd65bf),
	UINT64_C(0xbd1250f1a6dd833b), UINT64_C(0xf3e2dc0e1a5f822d), UINT64_C(0x4ef6c01b4d058dff),
	UINT64_C(0x3fcdcfb1e385edd6), UINT64_C(0xfc56daa632a71b20), UINT64_C(0x4c60ba6f8e7aa6bd),
	UINT64_C(0xb595ad2bf451dd8f), UINT64_C(0xf0e3ab7e1e4cf368), UINT64_C(0x78f1102456eba53b),
	UINT64_C(0x41199490f3d870fb), UINT64_C(0xcf1c307a4470cbb9), UINT64_C(0x0814a197275f101f),
	UINT64_C(0x62ef69aa5d2288be), UINT64_C(0xd91fcd772df60ec8), UINT64_C(0x2e286b57967dab30),
	UINT64_C(0x46e9904250f74929),
};

const uint64_t *dedup_chunker_gear_table(void) {
	return gear;
}

static unsigned log2_exact(size_t v) {
	return (unsigned) __builtin_ctzll((unsigned long long) v);
}

static bool is_power_of_two(size_t v) {
	return v != 0 && (v & (v - 1)) == 0;
}

/* A mask of the top `bits` bits: those depend on the whole 64-byte window. */
static uint64_t top_mask(unsigned bits) {
	return ~UINT64_C(0) << (64 - bits);
}

int dedup_chunker_params_validate(const DedupChunkerParams *p) {
	if (!p)
		return -EINVAL;
	if (p->min_size < DEDUP_CHUNK_SIZE_LIMIT_MIN || p->max_size > DEDUP_CHUNK_SIZE_LIMIT_MAX ||
	    p->min_size > p->avg_size || p->avg_size > p->max_size)
		return -EINVAL;

	switch (p->mode) {
	case DEDUP_CHUNKER_CDC:
	case DEDUP_CHUNKER_ORACLE:
		return is_power_of_two(p->avg_size) ? 0 : -EINVAL;
	case DEDUP_CHUNKER_FIXED:
		return p->min_size == p->max_size ? 0 : -EINVAL;
	default:
		return -EINVAL;
	}
}

int dedup_chunker_init(DedupChunker *c, const DedupChunkerParams *p) {
	int r = dedup_chunker_params_validate(p);
	if (r < 0)
		return r;

	*c = (DedupChunker) { .params = *p };
	if (p->mode == DEDUP_CHUNKER_ORACLE)
		/* The chunker cuts the gaps between blocks, by CDC; the blocks are the splitter's. */
		c->params.mode = DEDUP_CHUNKER_CDC;
	if (c->params.mode == DEDUP_CHUNKER_CDC) {
		/*
		 * Normalization level 2: before the average a cut is 4x less
		 * likely than 1/avg, after it 4x more likely.  avg >= 64 makes
		 * bits >= 6, so both masks are valid.
		 */
		unsigned bits = log2_exact(p->avg_size);
		c->mask_small = top_mask(bits + 2);
		c->mask_large = top_mask(bits - 2);
	}
	return 0;
}

void dedup_chunker_reset(DedupChunker *c) {
	c->pos = 0;
	c->hash = 0;
}

/*
 * Hashes p[0, n) into *hash and returns the index of the first byte after
 * which (*hash & mask) == 0, or n if there is none.  The unrolled body is the
 * whole cost of chunking; keep it branch-light.
 */
static inline size_t gear_scan(const uint8_t *p, size_t n, uint64_t *hash, uint64_t mask) {
	uint64_t h = *hash;
	size_t i = 0;

#define STEP(k)                                          \
	do {                                             \
		h = (h << 1) + gear[p[i + (k)]];         \
		if (_unlikely_(!(h & mask))) {           \
			i += (k);                        \
			goto found;                      \
		}                                        \
	} while (0)

	for (; i + 8 <= n; i += 8) {
		STEP(0);
		STEP(1);
		STEP(2);
		STEP(3);
		STEP(4);
		STEP(5);
		STEP(6);
		STEP(7);
	}
	for (; i < n; i++)
		STEP(0);
#undef STEP

	*hash = h;
	return n;
found:
	*hash = h;
	return i;
}

/* Ends the current chunk after `consumed` bytes of this scan() call. */
static bool cut(DedupChunker *c, size_t consumed, size_t *ret_n) {
	c->pos = 0;
	c->hash = 0;
	*ret_n = consumed;
	return true;
}

static bool scan_fixed(DedupChunker *c, size_t len, size_t *ret_n) {
	size_t need = c->params.avg_size - c->pos;

	if (len >= need)
		return cut(c, need, ret_n);
	c->pos += len;
	*ret_n = len;
	return false;
}

/*
 * Runs one region of the CDC state machine: positions (chunk lengths after the
 * byte) up to and including `last_len`, testing `mask` (0 = hash only).
 * Returns true and the bytes consumed in *i if a boundary was found.
 */
static bool scan_region(DedupChunker *c, const uint8_t *p, size_t len, size_t *i, size_t last_len,
			uint64_t mask) {
	if (c->pos >= last_len || *i >= len)
		return false;

	size_t n = MIN(len - *i, last_len - c->pos);
	size_t k;
	if (mask == 0) {
		uint64_t h = c->hash;
		for (k = 0; k < n; k++)
			h = (h << 1) + gear[p[*i + k]];
		c->hash = h;
	} else {
		k = gear_scan(p + *i, n, &c->hash, mask);
		if (k < n) {
			*i += k + 1;
			return true;
		}
	}
	*i += n;
	c->pos += n;
	return false;
}

bool dedup_chunker_scan(DedupChunker *c, const void *buf, size_t len, size_t *ret_n) {
	const DedupChunkerParams *p = &c->params;
	const uint8_t *b = buf;
	size_t i = 0;

	if (p->mode == DEDUP_CHUNKER_FIXED)
		return scan_fixed(c, len, ret_n);

	/* Bytes before the first hashed one cannot influence any boundary. */
	size_t skip_to = p->min_size - GEAR_WINDOW;
	if (c->pos < skip_to) {
		size_t n = MIN(len, skip_to - c->pos);
		c->pos += n;
		i = n;
	}

	/* Warm-up: hash bytes that make chunk lengths up to min_size - 1, no cut. */
	if (scan_region(c, b, len, &i, p->min_size - 1, 0) ||
	    scan_region(c, b, len, &i, p->avg_size - 1, c->mask_small) ||
	    scan_region(c, b, len, &i, p->max_size - 1, c->mask_large))
		return cut(c, i, ret_n);

	if (i < len) {
		/* Here pos == max_size - 1: the next byte ends the chunk regardless. */
		return cut(c, i + 1, ret_n);
	}
	*ret_n = len;
	return false;
}

int dedup_chunker_split(const DedupChunkerParams *p, const void *buf, size_t len, size_t **ret_sizes,
			size_t *ret_n) {
	DedupChunker c;
	int r = dedup_chunker_init(&c, p);
	if (r < 0)
		return r;

	/* Every chunk but the last is at least min_size long. */
	size_t cap = len / p->min_size + 1, n = 0;
	_cleanup_free_ size_t *sizes = NULL;
	if (len > 0) {
		sizes = malloc(cap * sizeof(size_t));
		if (!sizes)
			return -ENOMEM;
	}

	const uint8_t *b = buf;
	size_t off = 0, start = 0;
	while (off < len) {
		size_t k;
		bool boundary = dedup_chunker_scan(&c, b + off, len - off, &k);
		off += k;
		if (boundary) {
			sizes[n++] = off - start;
			start = off;
		}
	}
	if (off > start)
		sizes[n++] = off - start;

	*ret_sizes = TAKE_PTR(sizes);
	*ret_n = n;
	return 0;
}

bool dedup_oracle_block_at(const uint8_t *p) {
	/* Cheapest tests first: most offsets fail at the format byte. */
	if (p[1] != 0xa2 || p[0] == 0 || p[2] != 0 || p[3] != 0)
		return false;
	uint32_t scn_base = (uint32_t) p[8] | (uint32_t) p[9] << 8 | (uint32_t) p[10] << 16 | (uint32_t) p[11] << 24;
	const uint8_t *t = p + DEDUP_ORACLE_BLOCK_SIZE - 4;
	uint32_t tail = (uint32_t) t[0] | (uint32_t) t[1] << 8 | (uint32_t) t[2] << 16 | (uint32_t) t[3] << 24;
	return tail == ((scn_base & 0xffff) << 16 | (uint32_t) p[0] << 8 | p[14]);
}

/* The first offset in [0, n) where a block starts in buf[0, len), or n. */
static size_t oracle_find(const uint8_t *buf, size_t len, size_t n) {
	for (size_t i = 0; i < n;) {
		const uint8_t *q = memchr(buf + i + 1, 0xa2, n - i);
		if (!q)
			return n;
		i = (size_t) (q - buf) - 1;
		if (i + DEDUP_ORACLE_BLOCK_SIZE <= len && dedup_oracle_block_at(buf + i))
			return i;
		i++;
	}
	return n;
}

bool dedup_oracle_next(DedupOracleSplitter *s, const uint8_t *buf, size_t len, bool final, DedupOraclePiece *ret) {
	/* Offsets where a block could start and be seen whole. */
	size_t testable = len >= DEDUP_ORACLE_BLOCK_SIZE ? len - DEDUP_ORACLE_BLOCK_SIZE + 1 : 0;
	size_t at = oracle_find(buf, len, testable);

	if (at < testable || final) {
		/* The gap ends at a block, or with the stream. */
		size_t end = at < testable ? at : len;
		if (end == 0) {
			if (len == 0)
				return false;
			*ret = (DedupOraclePiece) { .kind = DEDUP_ORACLE_BLOCK, .len = DEDUP_ORACLE_BLOCK_SIZE };
			return true;
		}
		if (s->gap == 0 && end <= DEDUP_ORACLE_LITERAL_MAX)
			*ret = (DedupOraclePiece) { .kind = DEDUP_ORACLE_LITERAL, .len = end };
		else
			*ret = (DedupOraclePiece) { .kind = DEDUP_ORACLE_GAP, .len = end, .gap_end = true };
		s->gap = 0;
		return true;
	}
	/*
	 * No block starts before `testable`: those bytes are gap, CDC's once the
	 * gap is too long for a literal.  The last of them is held back, so that
	 * the gap never ends right where this piece does (the piece that ends it
	 * has at least that byte).
	 */
	if (testable <= 1 || s->gap + testable - 1 <= DEDUP_ORACLE_LITERAL_MAX)
		return false;
	*ret = (DedupOraclePiece) { .kind = DEDUP_ORACLE_GAP, .len = testable - 1 };
	s->gap += testable - 1;
	return true;
}

int dedup_oracle_split(const DedupChunkerParams *p, const void *buf, size_t len, DedupOraclePiece **ret_pieces,
		       size_t *ret_n) {
	DedupOracleSplitter s;
	DedupChunker c;
	const uint8_t *b = buf;
	int r;

	if (!p || p->mode != DEDUP_CHUNKER_ORACLE)
		return -EINVAL;
	r = dedup_chunker_init(&c, p);
	if (r < 0)
		return r;
	dedup_oracle_splitter_init(&s);

	/* At most a CDC chunk per min_size bytes, and per block itself, a literal and the end of a gap. */
	size_t cap = len / p->min_size + 3 * (len / DEDUP_ORACLE_BLOCK_SIZE) + 3, n = 0;
	_cleanup_free_ DedupOraclePiece *pieces = malloc(cap * sizeof(*pieces));
	if (!pieces)
		return -ENOMEM;

	size_t off = 0, chunk_start = 0;
	DedupOraclePiece piece;
	while (dedup_oracle_next(&s, b + off, len - off, true, &piece)) {
		if (piece.kind != DEDUP_ORACLE_GAP) {
			pieces[n++] = piece;
			off += piece.len;
			chunk_start = off;
			continue;
		}
		/* CDC over the gap's bytes, with a cut where the gap ends. */
		for (size_t end = off + piece.len; off < end;) {
			size_t k;
			bool cut = dedup_chunker_scan(&c, b + off, end - off, &k);
			off += k;
			if (cut) {
				pieces[n++] = (DedupOraclePiece) { .kind = DEDUP_ORACLE_GAP, .len = off - chunk_start };
				chunk_start = off;
			}
		}
		if (piece.gap_end && off > chunk_start) {
			pieces[n++] = (DedupOraclePiece) { .kind = DEDUP_ORACLE_GAP, .len = off - chunk_start, .gap_end = true };
			chunk_start = off;
			dedup_chunker_reset(&c);
		} else if (piece.gap_end)
			dedup_chunker_reset(&c);
	}
	*ret_pieces = TAKE_PTR(pieces);
	*ret_n = n;
	return 0;
}
