/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * region-sizes — what compression regions of each size would store at each
 * zstd level, and how fast they compress and decompress, for a set of
 * files chunked as fratier chunks them (bench, not test).
 *
 *   region-sizes [-r SIZES] [-l LEVELS] [-i cdc|fixed] [-o] [-L] FILE...
 *
 * Files are taken in the order given and deduplicated against each other
 * (SHA-256 of the chunks); each file is chunked by its class, recognised by
 * its path as fratier recognises it: archived logs (".arc", "archivelog/")
 * and their backup pieces ("o1_mf_annnn_") CDC 16 KiB, backup pieces CDC
 * 8 KiB, image copies (".dbf", "datafile/") fixed 16 KiB or, with -i cdc,
 * CDC 8 KiB like backup pieces, anything else CDC 16 KiB; with -o, backup
 * pieces and image copies are cut on Oracle blocks (DEDUP_CHUNKER_ORACLE,
 * CDC 8 KiB between them; literals are counted as recipe bytes, 12 each
 * plus their length, not stored).  All-zero chunks
 * are counted apart (fratier stores them as zero runs).  The new chunks of
 * each file, in file order, are then gathered into regions of at most SIZE
 * plain bytes (a region holds at least one chunk) and each region is
 * compressed as one zstd frame; size 0 means one chunk per frame (fratier
 * before regions).  Stored bytes count what fratier's formats add: 64 bytes
 * per chunk frame, or per region 64 bytes plus 36 per chunk (its table).
 * -L compresses with zstd's long-distance matching as well.
 *
 * MB/s are plain bytes per second of this process's CPU time, one thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "dedup/chunker.h"
#include "dedup/fingerprint.h"

#define MAX_CONFIGS 16

typedef struct Set {
	DedupChunkId *slots;
	size_t cap, n;
} Set;

/* Returns true if id was new. */
static bool set_add(Set *s, const DedupChunkId *id) {
	static const DedupChunkId zero;
	if (s->n * 2 >= s->cap) {
		Set bigger = { .cap = s->cap ? s->cap * 2 : 1 << 16 };
		bigger.slots = calloc(bigger.cap, sizeof(DedupChunkId));
		if (!bigger.slots)
			abort();
		for (size_t k = 0; k < s->cap; k++)
			if (memcmp(&s->slots[k], &zero, sizeof(zero)) != 0)
				set_add(&bigger, &s->slots[k]);
		free(s->slots);
		*s = bigger;
	}
	uint64_t h;
	memcpy(&h, id, sizeof(h));
	for (size_t at = h & (s->cap - 1);; at = (at + 1) & (s->cap - 1)) {
		if (memcmp(&s->slots[at], &zero, sizeof(zero)) == 0) {
			s->slots[at] = *id;
			s->n++;
			return true;
		}
		if (memcmp(&s->slots[at], id, sizeof(*id)) == 0)
			return false;
	}
}

typedef struct Cell {
	uint64_t stored;
	double ctime, dtime;
} Cell;

static double cpu_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static int parse_list(const char *s, long *out, bool sizes) {
	int n = 0;
	char *copy = strdup(s), *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t && n < MAX_CONFIGS; t = strtok_r(NULL, ",", &save)) {
		char *end;
		long v = strtol(t, &end, 10);
		if (sizes && (*end == 'K' || *end == 'k'))
			v <<= 10, end++;
		else if (sizes && (*end == 'M' || *end == 'm'))
			v <<= 20, end++;
		if (*end || (sizes && v < 0)) {
			free(copy);
			return -1;
		}
		out[n++] = v;
	}
	free(copy);
	return n;
}

static DedupChunkerParams params_of(const char *path, bool imagecopy_cdc, bool oracle) {
	DedupChunkerParams p8 = DEDUP_CHUNKER_PARAMS_CDC(8192);
	if (oracle)
		p8.mode = DEDUP_CHUNKER_ORACLE;
	if (strstr(path, "o1_mf_annnn_") || strstr(path, "archivelog/") || strstr(path, ".arc"))
		return DEDUP_CHUNKER_PARAMS_CDC(16384);
	if (strstr(path, "backupset/") || strstr(path, ".bkp") || strstr(path, ".bck"))
		return p8;
	if (strstr(path, "datafile/") || strstr(path, ".dbf"))
		return oracle ? p8 : imagecopy_cdc ? DEDUP_CHUNKER_PARAMS_CDC(8192) : DEDUP_CHUNKER_PARAMS_FIXED(16384);
	return DEDUP_CHUNKER_PARAMS_CDC(16384);
}

static bool all_zero(const uint8_t *p, size_t n) {
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

int main(int argc, char **argv) {
	long sizes[MAX_CONFIGS], levels[MAX_CONFIGS];
	int n_sizes = parse_list("0,32K,64K,128K,256K,512K", sizes, true);
	int n_levels = parse_list("3,6,9,12", levels, false);
	bool imagecopy_cdc = false, ldm = false, oracle = false;
	int opt;

	while ((opt = getopt(argc, argv, "r:l:i:oL")) != -1) {
		switch (opt) {
		case 'r':
			n_sizes = parse_list(optarg, sizes, true);
			break;
		case 'l':
			n_levels = parse_list(optarg, levels, false);
			break;
		case 'i':
			imagecopy_cdc = strcmp(optarg, "cdc") == 0;
			break;
		case 'L':
			ldm = true;
			break;
		case 'o':
			oracle = true;
			break;
		default:
			n_sizes = -1;
		}
	}
	if (optind >= argc || n_sizes <= 0 || n_levels <= 0) {
		fprintf(stderr, "usage: region-sizes [-r SIZES] [-l LEVELS] [-i cdc|fixed] [-o] [-L] FILE...\n");
		return 2;
	}

	static Cell cells[MAX_CONFIGS][MAX_CONFIGS][2];
	uint64_t logical = 0, zero = 0, unique = 0, chunks = 0, new_chunks = 0, regions[MAX_CONFIGS] = {};
	uint64_t literals = 0, literal_bytes = 0;
	Set set = {};
	DedupHasher *h;
	ZSTD_CCtx *z = ZSTD_createCCtx();
	ZSTD_DCtx *d = ZSTD_createDCtx();
	size_t cap = ZSTD_compressBound(8u << 20);
	uint8_t *zbuf = malloc(cap), *plain = malloc(8u << 20), *back = malloc(8u << 20);
	if (!z || !d || !zbuf || !plain || !back || dedup_hasher_new(&h) < 0)
		return 1;

	for (int a = optind; a < argc; a++) {
		int fd = open(argv[a], O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0) {
			fprintf(stderr, "region-sizes: %s: %s\n", argv[a], strerror(errno));
			return 1;
		}
		uint8_t *data = malloc(st.st_size ? (size_t) st.st_size : 1);
		size_t got = 0;
		while (data && got < (size_t) st.st_size) {
			ssize_t n = read(fd, data + got, (size_t) st.st_size - got);
			if (n <= 0)
				break;
			got += (size_t) n;
		}
		close(fd);
		if (!data || got != (size_t) st.st_size)
			return 1;
		logical += got;

		DedupChunkerParams p = params_of(argv[a], imagecopy_cdc, oracle);
		size_t *cuts = NULL, n_cuts = 0, off = 0, n_new = 0;
		DedupOraclePiece *pieces = NULL;
		if (p.mode == DEDUP_CHUNKER_ORACLE) {
			if (dedup_oracle_split(&p, data, got, &pieces, &n_cuts) < 0)
				return 1;
			cuts = malloc((n_cuts + 1) * sizeof(size_t));
			for (size_t c = 0; c < n_cuts; c++)
				cuts[c] = pieces[c].len;
		} else if (dedup_chunker_split(&p, data, got, &cuts, &n_cuts) < 0)
			return 1;
		/* The new chunks of the file, in order: (offset, length). */
		size_t *new_off = malloc((n_cuts + 1) * sizeof(size_t)), *new_len = malloc((n_cuts + 1) * sizeof(size_t));
		for (size_t c = 0; c < n_cuts; c++) {
			DedupChunkId id;
			if (pieces && pieces[c].kind == DEDUP_ORACLE_LITERAL) {
				literals++;
				literal_bytes += cuts[c];
				off += cuts[c];
				continue;
			}
			chunks++;
			if (all_zero(data + off, cuts[c]))
				zero += cuts[c];
			else {
				if (dedup_hasher_digest(h, data + off, cuts[c], &id) < 0)
					abort();
				if (set_add(&set, &id)) {
					new_off[n_new] = off;
					new_len[n_new++] = cuts[c];
					unique += cuts[c];
				}
			}
			off += cuts[c];
		}
		free(pieces);
		new_chunks += n_new;

		for (int s = 0; s < n_sizes; s++) {
			for (size_t i = 0; i < n_new;) {
				/* One region: chunks [i, j). */
				size_t j = i, len = 0;
				while (j < n_new && (j == i || (sizes[s] > 0 && len + new_len[j] <= (size_t) sizes[s]))) {
					memcpy(plain + len, data + new_off[j], new_len[j]);
					len += new_len[j++];
				}
				uint64_t overhead = sizes[s] == 0 ? 64 : 64 + 36 * (j - i);
				regions[s]++;
				for (int l = 0; l < n_levels; l++)
					for (int m = 0; m < (ldm ? 2 : 1); m++) {
						Cell *cell = &cells[s][l][m];
						ZSTD_CCtx_reset(z, ZSTD_reset_session_and_parameters);
						ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, (int) levels[l]);
						ZSTD_CCtx_setParameter(z, ZSTD_c_enableLongDistanceMatching, m);
						double t0 = cpu_now();
						size_t c = ZSTD_compress2(z, zbuf, cap, plain, len);
						double t1 = cpu_now();
						if (ZSTD_isError(c))
							abort();
						if (c + len / 32 < len) {
							if (ZSTD_decompressDCtx(d, back, len, zbuf, c) != len)
								abort();
							cell->dtime += cpu_now() - t1;
						} else
							c = len;
						cell->ctime += t1 - t0;
						cell->stored += c + overhead;
					}
				i = j;
			}
		}
		free(new_off);
		free(new_len);
		free(cuts);
		free(data);
	}

	printf("logical %.1f MiB, %llu chunks, all-zero %.1f MiB, unique %.1f MiB in %llu chunks, "
	       "%llu literals of %.1f MiB (recipe entries)\n",
	       (double) logical / 1048576, (unsigned long long) chunks, (double) zero / 1048576,
	       (double) unique / 1048576, (unsigned long long) new_chunks, (unsigned long long) literals,
	       (double) literal_bytes / 1048576);
	printf("%-8s %8s %-5s %5s %12s %9s %12s %12s\n", "region", "regions", "level", "ldm", "stored MiB", "overall",
	       "compress MB/s", "decomp MB/s");
	for (int s = 0; s < n_sizes; s++)
		for (int l = 0; l < n_levels; l++)
			for (int m = 0; m < (ldm ? 2 : 1); m++) {
				const Cell *c = &cells[s][l][m];
				char name[32];
				if (sizes[s] == 0)
					snprintf(name, sizeof(name), "chunk");
				else
					snprintf(name, sizeof(name), "%ldK", sizes[s] >> 10);
				printf("%-8s %8llu %-5ld %5s %12.1f %8.2fx %12.1f %12.1f\n", name,
				       (unsigned long long) regions[s], levels[l], m ? "on" : "off",
				       (double) c->stored / 1048576, (double) logical / (double) c->stored,
				       (double) unique / 1e6 / c->ctime, (double) unique / 1e6 / c->dtime);
			}
	return 0;
}
