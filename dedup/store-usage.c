/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * store-usage.c — what a sealed file costs in its tier, from its recipe and
 * the chunk index, through whatever catalog connection the caller gives
 * (the daemon's reports use a read-only one, so they never hold up the
 * filesystem).
 *
 * A chunk's frame bytes are charged in three ways: to the file alone when
 * every reference to the chunk is the file's own ("unique"), as "shared"
 * otherwise, and, for reports that must add up, split evenly over all
 * references ("attributed": summed over every file this gives exactly the
 * frame bytes of the referenced chunks).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "dedup/recipe.h"
#include "dedup/store.h"

typedef struct Occurrences {
	uint64_t *ids;
	size_t n, cap;
	uint64_t zero_bytes;
	uint64_t literal_bytes;
	uint64_t length;
} Occurrences;

static int collect(uint64_t start, const void *blob, size_t size, void *userdata) {
	Occurrences *o = userdata;
	DedupRecipeSegment *seg;
	int r = dedup_recipe_segment_decode(blob, size, &seg);
	if (r < 0)
		return r == -ENOMEM ? r : -EIO;
	if (seg->start != o->length) {
		free(seg);
		return -EIO; /* segments must follow each other without gaps */
	}
	if (o->n + seg->n_entries > o->cap) {
		size_t cap = MAX(o->cap * 2, o->n + seg->n_entries);
		uint64_t *p = realloc(o->ids, cap * sizeof(*p));
		if (!p) {
			free(seg);
			return -ENOMEM;
		}
		o->ids = p;
		o->cap = cap;
	}
	for (size_t i = 0; i < seg->n_entries; i++) {
		if (seg->entries[i].chunk == 0)
			o->zero_bytes += seg->entries[i].length;
		else if (seg->entries[i].chunk == DEDUP_RECIPE_LITERAL)
			o->literal_bytes += seg->entries[i].length;
		else
			o->ids[o->n++] = seg->entries[i].chunk;
	}
	o->length += seg->length;
	free(seg);
	return 0;
}

static int id_compare(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
	return x < y ? -1 : x > y;
}

static int occurrences_load(Catalog *c, uint64_t ino, Occurrences *o) {
	*o = (Occurrences) {};
	int r = catalog_recipe_foreach(c, ino, collect, o);
	if (r < 0) {
		free(o->ids);
		*o = (Occurrences) {};
		return r;
	}
	if (o->n > 1)
		qsort(o->ids, o->n, sizeof(*o->ids), id_compare);
	return 0;
}

int dedup_file_usage(Catalog *c, uint64_t ino, DedupFileUsage *ret) {
	Occurrences o;
	DedupFileUsage u = {};
	int r;

	r = occurrences_load(c, ino, &o);
	if (r < 0)
		return r;
	u.logical = o.length;
	u.zero_bytes = o.zero_bytes;
	u.literal_bytes = o.literal_bytes;
	for (size_t i = 0; r >= 0 && i < o.n;) {
		size_t j = i + 1;
		while (j < o.n && o.ids[j] == o.ids[i])
			j++;
		uint64_t occ = j - i;
		CatalogChunk ch;
		r = catalog_chunk_get(c, o.ids[i], &ch);
		if (r == -ENOENT)
			r = -EIO; /* the recipe names a chunk the index lost: damage */
		if (r < 0)
			break;
		u.chunks += occ;
		u.distinct_chunks++;
		u.chunk_bytes += occ * ch.plain_size;
		if (ch.refs <= occ)
			u.unique += ch.frame_size;
		else
			u.shared += ch.frame_size;
		/* A chunk's references include the file's own, so refs >= occ unless the index is off. */
		uint64_t refs = MAX(ch.refs, occ);
		u.attributed += (double) ch.frame_size * (double) occ / (double) refs;
		u.attributed_plain += (double) ch.plain_size * (double) occ / (double) refs;
		i = j;
	}
	free(o.ids);
	if (r < 0)
		return r;
	*ret = u;
	return 0;
}

int dedup_file_references_any(Catalog *c, uint64_t ino, const uint64_t *sorted_ids, size_t n) {
	Occurrences o;
	int r = occurrences_load(c, ino, &o);
	if (r < 0)
		return r;
	int found = 0;
	for (size_t i = 0, k = 0; i < o.n && k < n;) {
		if (o.ids[i] == sorted_ids[k]) {
			found = 1;
			break;
		}
		if (o.ids[i] < sorted_ids[k])
			i++;
		else
			k++;
	}
	free(o.ids);
	return found;
}
