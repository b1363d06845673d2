/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * shared-global.c — what global dedup needs of a shared tier's namespace
 * (tier/shared.h): the names of other hosts' objects and the hosts there.
 * dedup/ reads other hosts' segments and containers through these and the
 * tier's root, and never names "h/" or "hosts/" itself: the layout of the
 * shared tier stays tier/'s.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/macros.h"
#include "tier/shared.h"

int tier_shared_object_name(const char *host, const char *name, char ret[static DEDUP_BACKEND_NAME_MAX + 1]) {
	if (!config_host_name_is_valid(host) || !dedup_backend_name_is_valid(name))
		return -EINVAL;
	int n = snprintf(ret, DEDUP_BACKEND_NAME_MAX + 1, "h/%s/%s", host, name);
	return n > 0 && n <= DEDUP_BACKEND_NAME_MAX ? 0 : -EINVAL;
}

typedef struct HostNames {
	char (*names)[CONFIG_HOST_NAME_MAX + 1];
	size_t n, cap;
} HostNames;

/* "hosts/NAME.host" (not a temporary of a record being written). */
static int host_name_collect(const char *object, void *userdata) {
	HostNames *h = userdata;
	const char *p = object + (sizeof("hosts/") - 1);
	size_t len;

	if (strncmp(object, "hosts/", (sizeof("hosts/") - 1)) != 0)
		return 0;
	len = strlen(p);
	if (len <= (sizeof(".host") - 1) || strcmp(p + len - (sizeof(".host") - 1), ".host") != 0)
		return 0;
	len -= (sizeof(".host") - 1);
	if (len > CONFIG_HOST_NAME_MAX)
		return 0;
	if (ARRAY_RESERVE_ONE(h->names, h->cap, h->n, 16) < 0)
		return -ENOMEM;
	memcpy(h->names[h->n], p, len);
	h->names[h->n][len] = '\0';
	if (config_host_name_is_valid(h->names[h->n]))
		h->n++;
	return 0;
}

/*
 * holders: a record that cannot be read might be a live host's, so it is
 * one (a damaged record) or the whole listing fails (an I/O error); a host
 * leaves the list only by a record that reads `retired`.
 */
static int hosts_visit(DedupBackend *b, bool holders, int (*cb)(const char *host, void *userdata), void *userdata) {
	HostNames h = {};
	int r = dedup_backend_list(b, "hosts", host_name_collect, &h);
	for (size_t i = 0; r >= 0 && i < h.n; i++) {
		TierHostRecord rec;
		int q = tier_shared_read_host(b, h.names[i], &rec);
		if (holders && q < 0 && q != -EBADMSG) {
			r = q;
			break;
		}
		if ((q < 0 && !holders) || (q >= 0 && rec.state == TIER_HOST_RETIRED))
			continue;
		r = cb(h.names[i], userdata);
	}
	free(h.names);
	return r;
}

int tier_shared_hosts(DedupBackend *b, int (*cb)(const char *host, void *userdata), void *userdata) {
	return hosts_visit(b, false, cb, userdata);
}

int tier_shared_holders(DedupBackend *b, int (*cb)(const char *host, void *userdata), void *userdata) {
	return hosts_visit(b, true, cb, userdata);
}
