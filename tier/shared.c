/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * shared.c — a host's name and lease on a shared tier (docs/SHARED.md).
 *
 * Invariants:
 *  1. A host record is only ever replaced whole, by rename of a record
 *     written and synced under a name no other instance uses
 *     (hosts/NAME.host.INSTANCE.tmp): a reader sees the old record or the
 *     new one, never a mix, on a local directory and on NFSv3 alike.
 *  2. An instance writes the record of NAME only when the record there is
 *     its own, is missing, or holds a lease that has ended; it never
 *     writes a retired host's record.
 *  3. After writing, the instance reads the record back: if another
 *     instance's rename landed last, it is that one's, and this one is
 *     refused (the loser of a race between two starts backs off).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/macros.h"
#include "common/strvec.h"
#include "tier/backend-dir.h"
#include "tier/shared.h"

#define HOST_RECORD_MAGIC "fratier-host 1\n"
#define INSTANCE_FILE "shared-instance"

static const char *const host_state_table[_TIER_HOST_STATE_MAX] = {
	[TIER_HOST_LIVE] = "live",
	[TIER_HOST_RETIRED] = "retired",
};

int tier_host_instance_parse(const char *hex, size_t len, uint8_t ret[static TIER_HOST_INSTANCE_SIZE]) {
	if (len != 2 * TIER_HOST_INSTANCE_SIZE)
		return -EBADMSG;
	for (size_t i = 0; i < len; i++) {
		char c = hex[i];
		unsigned v;
		if (c >= '0' && c <= '9')
			v = (unsigned) (c - '0');
		else if (c >= 'a' && c <= 'f')
			v = (unsigned) (c - 'a' + 10);
		else
			return -EBADMSG;
		if (i % 2 == 0)
			ret[i / 2] = (uint8_t) (v << 4);
		else
			ret[i / 2] |= (uint8_t) v;
	}
	return 0;
}

static void instance_to_hex(const uint8_t instance[static TIER_HOST_INSTANCE_SIZE],
			    char hex[static 2 * TIER_HOST_INSTANCE_SIZE + 1]) {
	for (size_t i = 0; i < TIER_HOST_INSTANCE_SIZE; i++)
		snprintf(hex + 2 * i, 3, "%02x", instance[i]);
}

/*
 * The value of line "KEY VALUE\n" at *pos, advancing past it: NULL when the
 * line is not there in exactly that form.
 */
static const char *record_field(const char *buf, size_t len, size_t *pos, const char *key, size_t *ret_len) {
	size_t k = strlen(key);
	if (len - *pos < k + 2 || memcmp(buf + *pos, key, k) != 0 || buf[*pos + k] != ' ')
		return NULL;
	const char *value = buf + *pos + k + 1;
	const char *nl = memchr(value, '\n', len - (*pos + k + 1));
	if (!nl || nl == value)
		return NULL;
	*ret_len = (size_t) (nl - value);
	*pos = (size_t) (nl + 1 - buf);
	return value;
}

/* A decimal of at most 19 digits, no sign, no leading zero: every such number fits in a uint64_t. */
static int record_number(const char *v, size_t n, uint64_t *ret) {
	uint64_t x = 0;
	if (!v || n > 19 || (n > 1 && v[0] == '0'))
		return -EBADMSG;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -EBADMSG;
		x = x * 10 + (uint64_t) (v[i] - '0');
	}
	*ret = x;
	return 0;
}

/* The value of "host NAME\n" at *pos into host: a valid host name, else -EBADMSG. */
static int record_host(const char *buf, size_t len, size_t *pos, char host[static CONFIG_HOST_NAME_MAX + 1]) {
	size_t n;
	const char *v = record_field(buf, len, pos, "host", &n);
	if (!v || n > CONFIG_HOST_NAME_MAX)
		return -EBADMSG;
	memcpy(host, v, n);
	host[n] = '\0';
	if (memchr(host, '\0', n) || !config_host_name_is_valid(host))
		return -EBADMSG;
	return 0;
}

int tier_host_record_parse(const void *data, size_t len, TierHostRecord *ret) {
	const char *buf = data;
	size_t pos = strlen(HOST_RECORD_MAGIC), n;
	TierHostRecord r = {};

	if (len > TIER_HOST_RECORD_MAX || len < pos || memcmp(buf, HOST_RECORD_MAGIC, pos) != 0)
		return -EBADMSG;

	if (record_host(buf, len, &pos, r.host) < 0)
		return -EBADMSG;

	const char *v = record_field(buf, len, &pos, "instance", &n);
	if (!v || tier_host_instance_parse(v, n, r.instance) < 0)
		return -EBADMSG;

	v = record_field(buf, len, &pos, "lease_until", &n);
	if (record_number(v, n, &r.lease_until) < 0)
		return -EBADMSG;

	v = record_field(buf, len, &pos, "state", &n);
	if (!v)
		return -EBADMSG;
	TierHostState st;
	for (st = 0; st < _TIER_HOST_STATE_MAX; st++)
		if (strlen(host_state_table[st]) == n && memcmp(v, host_state_table[st], n) == 0)
			break;
	if (st == _TIER_HOST_STATE_MAX || pos != len)
		return -EBADMSG;
	r.state = st;
	*ret = r;
	return 0;
}

int tier_host_record_format(const TierHostRecord *r, char buf[static TIER_HOST_RECORD_MAX]) {
	char hex[2 * TIER_HOST_INSTANCE_SIZE + 1];

	if (!config_host_name_is_valid(r->host) || r->state >= _TIER_HOST_STATE_MAX ||
	    r->lease_until > UINT64_C(9999999999999999999))
		return -EINVAL;
	instance_to_hex(r->instance, hex);
	int n = snprintf(buf, TIER_HOST_RECORD_MAX, HOST_RECORD_MAGIC "host %s\ninstance %s\nlease_until %" PRIu64
			 "\nstate %s\n",
			 r->host, hex, r->lease_until, host_state_table[r->state]);
	return n > 0 && n < TIER_HOST_RECORD_MAX ? n : -EINVAL;
}

int tier_shared_default_host(char ret[static CONFIG_HOST_NAME_MAX + 1]) {
	char name[256] = {};

	if (gethostname(name, sizeof(name) - 1) < 0)
		return negative_errno();
	size_t n = strcspn(name, ".");
	if (n == 0) {
		strcpy(ret, "localhost");
		return 0;
	}
	n = MIN(n, (size_t) CONFIG_HOST_NAME_MAX);
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (c >= 'A' && c <= 'Z')
			c = (char) (c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
			c = '-';
		ret[i] = c;
	}
	ret[n] = '\0';
	return 0;
}

static int fsync_dir(const char *dir) {
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		return negative_errno();
	return 0;
}

int tier_shared_instance(const char *data_dir, uint8_t ret[static TIER_HOST_INSTANCE_SIZE]) {
	_cleanup_free_ char *path = NULL, *tmp = NULL;
	char buf[2 * TIER_HOST_INSTANCE_SIZE + 2];

	if (asprintf(&path, "%s/" INSTANCE_FILE, data_dir) < 0)
		return -ENOMEM;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0)
			return negative_errno();
		if (n != (ssize_t) sizeof(buf) - 1 || buf[n - 1] != '\n')
			return -EBADMSG;
		return tier_host_instance_parse(buf, (size_t) n - 1, ret);
	}
	if (errno != ENOENT)
		return negative_errno();

	/* A new data directory: a new instance, in place durably before any lease names it. */
	uint8_t id[TIER_HOST_INSTANCE_SIZE];
	if (getrandom(id, sizeof(id), 0) != (ssize_t) sizeof(id))
		return -EIO;
	instance_to_hex(id, buf);
	buf[sizeof(buf) - 2] = '\n';
	if (asprintf(&tmp, "%s.tmp", path) < 0)
		return -ENOMEM;
	_cleanup_close_ int w = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w < 0)
		return negative_errno();
	if (write(w, buf, sizeof(buf) - 1) != (ssize_t) sizeof(buf) - 1 || fsync(w) < 0 || rename(tmp, path) < 0) {
		int r = errno ? -errno : -EIO;
		(void) unlink(tmp);
		return r;
	}
	int r = fsync_dir(data_dir);
	if (r < 0)
		return r;
	memcpy(ret, id, sizeof(id));
	return 0;
}

static void host_object_name(const char *host, char name[static TIER_HOST_OBJECT_NAME_MAX]) {
	snprintf(name, TIER_HOST_OBJECT_NAME_MAX, "hosts/%s.host", host);
}

int tier_shared_read_host(DedupBackend *b, const char *host, TierHostRecord *ret) {
	char name[TIER_HOST_OBJECT_NAME_MAX], buf[TIER_HOST_RECORD_MAX + 1];

	host_object_name(host, name);
	/* Another instance replaces the record by rename: a cached descriptor would read the old one. */
	tier_backend_dir_forget(b, name);
	ssize_t n = dedup_backend_pread(b, name, buf, sizeof(buf), 0);
	if (n < 0)
		return (int) n;
	int r = tier_host_record_parse(buf, (size_t) n, ret);
	if (r < 0)
		return r;
	/* A record under another host's name is damage, not a lease of this one. */
	return strcmp(ret->host, host) == 0 ? 0 : -EBADMSG;
}

/* Writes buf to tmp, syncs it and renames it onto name: readers see the old object or the new one, whole. */
static int replace_whole(DedupBackend *b, const char *tmp, const char *name, const char *buf, size_t len) {
	DedupBackendFile *f = NULL;
	int r = dedup_backend_open_write(b, tmp, true, 0, &f);
	if (r < 0)
		return r;
	r = dedup_backend_file_pwrite(b, f, buf, len, 0);
	if (r >= 0)
		r = dedup_backend_file_sync(b, f);
	dedup_backend_file_close(b, f);
	if (r >= 0)
		r = dedup_backend_rename(b, tmp, name);
	if (r < 0)
		(void) dedup_backend_unlink(b, tmp);
	return r;
}

/*
 * Invariant 1: written and synced under the writer's own name (the
 * instance of the daemon writing: the host's own, or a retiring host's),
 * then renamed into place.
 */
static int write_host(DedupBackend *b, const TierHostRecord *rec, const uint8_t writer[static TIER_HOST_INSTANCE_SIZE]) {
	char name[TIER_HOST_OBJECT_NAME_MAX], tmp[TIER_HOST_OBJECT_NAME_MAX], hex[2 * TIER_HOST_INSTANCE_SIZE + 1];
	char buf[TIER_HOST_RECORD_MAX];

	int n = tier_host_record_format(rec, buf);
	if (n < 0)
		return n;
	host_object_name(rec->host, name);
	instance_to_hex(writer, hex);
	snprintf(tmp, sizeof(tmp), "hosts/%s.host.%s.tmp", rec->host, hex);
	return replace_whole(b, tmp, name, buf, (size_t) n);
}

int tier_shared_register(DedupBackend *b, const char *host, const uint8_t instance[static TIER_HOST_INSTANCE_SIZE],
			 uint64_t now, uint64_t lease_s, char **ret_error) {
	TierHostRecord old;
	char hex[2 * TIER_HOST_INSTANCE_SIZE + 1];

	*ret_error = NULL;
	int r = tier_shared_read_host(b, host, &old);
	if (r == -EBADMSG) {
		if (asprintf(ret_error, "the record of host '%s' on the shared tier is damaged (hosts/%s.host)", host,
			     host) < 0)
			*ret_error = NULL;
		return r;
	}
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0 && old.state == TIER_HOST_RETIRED) {
		if (asprintf(ret_error, "host '%s' was retired from the shared tier (tierctl host retire): "
					"it may not come back under that name; set another 'host' in [fratier]",
			     host) < 0)
			*ret_error = NULL;
		return -EPERM;
	}
	if (r == 0 && memcmp(old.instance, instance, TIER_HOST_INSTANCE_SIZE) != 0 && old.lease_until > now) {
		instance_to_hex(old.instance, hex);
		if (asprintf(ret_error, "host name '%s' is in use on the shared tier by another live daemon "
					"(instance %s, its lease runs %" PRIu64 " s more): set another 'host' in [fratier]",
			     host, hex, old.lease_until - now) < 0)
			*ret_error = NULL;
		return -EBUSY;
	}

	TierHostRecord rec = { .lease_until = now + lease_s, .state = TIER_HOST_LIVE };
	snprintf(rec.host, sizeof(rec.host), "%s", host);
	memcpy(rec.instance, instance, TIER_HOST_INSTANCE_SIZE);
	r = write_host(b, &rec, instance);
	if (r < 0)
		return r;

	/* Invariant 3: two instances that both found the lease ended: the last rename wins, the other backs off. */
	r = tier_shared_read_host(b, host, &old);
	if (r < 0)
		return r;
	if (memcmp(old.instance, instance, TIER_HOST_INSTANCE_SIZE) != 0) {
		instance_to_hex(old.instance, hex);
		if (asprintf(ret_error, "host name '%s' was taken on the shared tier by another daemon starting at the "
					"same time (instance %s): set another 'host' in [fratier]",
			     host, hex) < 0)
			*ret_error = NULL;
		return -EBUSY;
	}
	return 0;
}

int tier_shared_renew(DedupBackend *b, const char *host, const uint8_t instance[static TIER_HOST_INSTANCE_SIZE],
		      uint64_t now, uint64_t lease_s) {
	TierHostRecord rec;
	int r = tier_shared_read_host(b, host, &rec);
	if (r < 0)
		return r;
	if (memcmp(rec.instance, instance, TIER_HOST_INSTANCE_SIZE) != 0)
		return -EBUSY;
	if (rec.state == TIER_HOST_RETIRED)
		return -EPERM;
	rec.lease_until = now + lease_s;
	return write_host(b, &rec, instance);
}

uint64_t tier_shared_renew_interval(uint64_t lease_s) {
	return MAX(MIN(lease_s / 6, (uint64_t) 10), (uint64_t) 1);
}

static const char *const host_status_table[_TIER_HOST_STATUS_MAX] = {
	[TIER_HOST_STATUS_LIVE] = "live",
	[TIER_HOST_STATUS_EXPIRED] = "expired",
	[TIER_HOST_STATUS_RETIRED] = "retired",
	[TIER_HOST_STATUS_DAMAGED] = "damaged",
};

const char *tier_host_status_to_string(TierHostStatus st) {
	return st < _TIER_HOST_STATUS_MAX ? host_status_table[st] : NULL;
}

/* The status of a record that parsed, as of now (seconds since the epoch). */
static TierHostStatus tier_host_record_status(const TierHostRecord *r, uint64_t now) {
	if (r->state == TIER_HOST_RETIRED)
		return TIER_HOST_STATUS_RETIRED;
	return r->lease_until > now ? TIER_HOST_STATUS_LIVE : TIER_HOST_STATUS_EXPIRED;
}

int tier_shared_retire(DedupBackend *b, const char *host, const uint8_t writer[static TIER_HOST_INSTANCE_SIZE],
		       uint64_t now, bool force, TierHostRecord *ret_before) {
	TierHostRecord old = {}, rec;

	int r = tier_shared_read_host(b, host, &old);
	if (r == -EBADMSG && force) {
		/* The operator's way out of a record nobody can read: it names no instance any more. */
		memset(&old, 0, sizeof(old));
		snprintf(old.host, sizeof(old.host), "%s", host);
	} else if (r < 0)
		return r;
	*ret_before = old;
	if (r == 0 && old.state == TIER_HOST_RETIRED)
		return 1;
	if (r == 0 && old.lease_until > now && !force)
		return -EBUSY;
	rec = old;
	rec.state = TIER_HOST_RETIRED;
	r = write_host(b, &rec, writer);
	if (r < 0)
		return r;
	r = tier_shared_read_host(b, host, &rec);
	if (r < 0)
		return r;
	/* Another write landed after ours (the host renewing, or registering again): it is not retired. */
	return rec.state == TIER_HOST_RETIRED ? 0 : -EAGAIN;
}

static int compare_hosts(const void *a, const void *b) {
	return strcmp(((const TierSharedHost *) a)->host, ((const TierSharedHost *) b)->host);
}

int tier_shared_hosts_list(DedupBackend *b, uint64_t now, TierSharedHost **ret, size_t *ret_n) {
	_cleanup_(strvec_done) StrVec names = {};
	_cleanup_free_ TierSharedHost *hosts = NULL;
	size_t n = 0;

	/* Names first: the listing's callback may not call into the backend. */
	int r = dedup_backend_list(b, "hosts", strvec_collect, &names);
	if (r < 0)
		return r;
	hosts = calloc(names.n + 1, sizeof(*hosts));
	if (!hosts)
		return -ENOMEM;
	for (size_t i = 0; i < names.n; i++) {
		/* "hosts/NAME.host" only: temporaries are nobody's record yet. */
		const char *name = names.names[i] + strlen("hosts/");
		size_t len = strlen(name);
		if (len <= 5 || len - 5 > CONFIG_HOST_NAME_MAX || strcmp(name + len - 5, ".host") != 0)
			continue;
		TierSharedHost *h = &hosts[n];
		memcpy(h->host, name, len - 5);
		h->host[len - 5] = '\0';
		if (!config_host_name_is_valid(h->host))
			continue;
		r = tier_shared_read_host(b, h->host, &h->record);
		if (r == -ENOENT)
			continue; /* renamed away meanwhile: none of ours does, but a filer's admin may */
		if (r == -EBADMSG)
			h->status = TIER_HOST_STATUS_DAMAGED;
		else if (r < 0)
			return r;
		else
			h->status = tier_host_record_status(&h->record, now);
		n++;
	}
	qsort(hosts, n, sizeof(*hosts), compare_hosts);
	*ret = TAKE_PTR(hosts);
	*ret_n = n;
	return 0;
}

#define SUMMARY_MAGIC_V1 "fratier-summary 1\n"
#define SUMMARY_MAGIC "fratier-summary 2\n"
#define SUMMARY_NAME "s/summary"
#define SUMMARY_TMP_NAME "s/summary.tmp"

int tier_host_summary_parse(const void *data, size_t len, TierHostSummary *ret) {
	const char *buf = data;
	size_t pos = strlen(SUMMARY_MAGIC), n;
	TierHostSummary s = {};
	static const char *const keys[] = { "updated", "files", "logical", "stored", "foreign_logical", "foreign_stored" };
	uint64_t *values[] = { &s.updated, &s.files, &s.logical, &s.stored, &s.foreign_logical, &s.foreign_stored };
	size_t n_keys = ELEMENTSOF(keys);

	/* Both magics have one length. */
	if (len > TIER_HOST_SUMMARY_MAX || len < pos)
		return -EBADMSG;
	if (memcmp(buf, SUMMARY_MAGIC, pos) == 0)
		s.has_foreign = true;
	else if (memcmp(buf, SUMMARY_MAGIC_V1, pos) == 0)
		n_keys -= 2;
	else
		return -EBADMSG;
	if (record_host(buf, len, &pos, s.host) < 0)
		return -EBADMSG;
	for (size_t i = 0; i < n_keys; i++) {
		const char *v = record_field(buf, len, &pos, keys[i], &n);
		if (record_number(v, n, values[i]) < 0)
			return -EBADMSG;
	}
	if (pos != len)
		return -EBADMSG;
	*ret = s;
	return 0;
}

int tier_host_summary_format(const TierHostSummary *s, char buf[static TIER_HOST_SUMMARY_MAX]) {
	const uint64_t max = UINT64_C(9999999999999999999);
	int n;
	if (!config_host_name_is_valid(s->host) || s->updated > max || s->files > max || s->logical > max ||
	    s->stored > max || s->foreign_logical > max || s->foreign_stored > max)
		return -EINVAL;
	if (s->has_foreign)
		n = snprintf(buf, TIER_HOST_SUMMARY_MAX, SUMMARY_MAGIC "host %s\nupdated %" PRIu64 "\nfiles %" PRIu64
			     "\nlogical %" PRIu64 "\nstored %" PRIu64 "\nforeign_logical %" PRIu64
			     "\nforeign_stored %" PRIu64 "\n",
			     s->host, s->updated, s->files, s->logical, s->stored, s->foreign_logical, s->foreign_stored);
	else if (s->foreign_logical == 0 && s->foreign_stored == 0)
		n = snprintf(buf, TIER_HOST_SUMMARY_MAX, SUMMARY_MAGIC_V1 "host %s\nupdated %" PRIu64 "\nfiles %" PRIu64
			     "\nlogical %" PRIu64 "\nstored %" PRIu64 "\n",
			     s->host, s->updated, s->files, s->logical, s->stored);
	else
		return -EINVAL;
	return n > 0 && n < TIER_HOST_SUMMARY_MAX ? n : -EINVAL;
}

int tier_shared_summary_put(DedupBackend *b, const TierHostSummary *s) {
	char buf[TIER_HOST_SUMMARY_MAX];

	int n = tier_host_summary_format(s, buf);
	if (n < 0)
		return n;
	/* The host's own directory: no other instance writes there while this one holds the lease. */
	return replace_whole(b, SUMMARY_TMP_NAME, SUMMARY_NAME, buf, (size_t) n);
}

int tier_shared_summary_get(DedupBackend *b, const char *host, TierHostSummary *ret) {
	char name[2 + CONFIG_HOST_NAME_MAX + 1 + sizeof(SUMMARY_NAME)], buf[TIER_HOST_SUMMARY_MAX + 1];

	snprintf(name, sizeof(name), "h/%s/" SUMMARY_NAME, host);
	/* Replaced by rename, by another process: a cached descriptor would read the old one. */
	tier_backend_dir_forget(b, name);
	ssize_t n = dedup_backend_pread(b, name, buf, sizeof(buf), 0);
	if (n < 0)
		return (int) n;
	int r = tier_host_summary_parse(buf, (size_t) n, ret);
	if (r < 0)
		return r;
	return strcmp(ret->host, host) == 0 ? 0 : -EBADMSG;
}

/* The host an object of the tier belongs to ("" for none), into host. */
static void object_host(const char *name, char host[static CONFIG_HOST_NAME_MAX + 1]) {
	const char *start = NULL, *end = NULL;
	if (strncmp(name, "h/", 2) == 0) {
		start = name + 2;
		end = strchr(start, '/');
	} else if (strncmp(name, "hosts/", 6) == 0) {
		start = name + 6;
		end = strstr(start, ".host");
	}
	host[0] = '\0';
	if (!start || !end || end == start || (size_t) (end - start) > CONFIG_HOST_NAME_MAX)
		return;
	memcpy(host, start, (size_t) (end - start));
	host[end - start] = '\0';
	if (!config_host_name_is_valid(host))
		host[0] = '\0';
}

static int compare_usage(const void *a, const void *b) {
	return strcmp(((const TierSharedUsage *) a)->host, ((const TierSharedUsage *) b)->host);
}

typedef struct SharedRef {
	char owner[CONFIG_HOST_NAME_MAX + 1];
	uint64_t id;
} SharedRef;

typedef struct SharedRefs {
	SharedRef *v;
	size_t n, cap;
	StrVec hosts;
} SharedRefs;

static int shared_ref_compare(const void *a, const void *b) {
	const SharedRef *x = a, *y = b;
	int c = strcmp(x->owner, y->owner);
	return c != 0 ? c : (x->id > y->id) - (x->id < y->id);
}

static int shared_ref_collect(const char *owner, uint64_t id, void *userdata) {
	SharedRefs *s = userdata;
	if (strlen(owner) > CONFIG_HOST_NAME_MAX)
		return 0;
	if (ARRAY_RESERVE_ONE(s->v, s->cap, s->n, 64) < 0)
		return -ENOMEM;
	snprintf(s->v[s->n].owner, sizeof(s->v[s->n].owner), "%s", owner);
	s->v[s->n++].id = id;
	return 0;
}

static int shared_host_collect(const char *host, void *userdata) {
	return strvec_push(&((SharedRefs *) userdata)->hosts, host);
}

/*
 * Every (owner, container) some host's latest publication lists, sorted:
 * a container named twice is shared once.  Retired hosts are left out, as
 * collectors leave them out: their publications hold nothing any more.
 */
static int shared_refs_load(const DedupShared *sh, SharedRefs *s) {
	int r = tier_shared_hosts(sh->root, shared_host_collect, s);
	for (size_t i = 0; r >= 0 && i < s->hosts.n; i++)
		r = dedup_shared_references_foreach(sh, s->hosts.names[i], shared_ref_collect, s);
	if (r >= 0 && s->n > 1)
		qsort(s->v, s->n, sizeof(*s->v), shared_ref_compare);
	return r;
}

/* Whether object name, charged to host, is a container of host that another host references. */
static bool object_is_shared(const SharedRefs *s, const char *name, const char *host) {
	SharedRef key = {};
	size_t len = strlen(host);
	if (!host[0] || s->n == 0 || strncmp(name, "h/", 2) != 0 || strncmp(name + 2, host, len) != 0 ||
	    name[2 + len] != '/' || dedup_store_container_object_parse(name + 3 + len, &key.id) < 0)
		return false;
	memcpy(key.owner, host, len + 1);
	return bsearch(&key, s->v, s->n, sizeof(*s->v), shared_ref_compare) != NULL;
}

int tier_shared_usage(const DedupShared *sh, TierSharedUsage **ret, size_t *ret_n) {
	_cleanup_(strvec_done) StrVec names = {};
	_cleanup_free_ TierSharedUsage *rows = NULL;
	DedupBackend *b = sh->root;
	SharedRefs refs = {};
	size_t n = 0, cap = 0;

	/* Publications first: a container listed after a reference to it was published is then counted shared. */
	int r = shared_refs_load(sh, &refs);
	if (r >= 0)
		r = dedup_backend_list(b, "h", strvec_collect, &names);
	if (r >= 0)
		r = dedup_backend_list(b, "hosts", strvec_collect, &names);
	for (size_t i = 0; r >= 0 && i < names.n; i++) {
		char host[CONFIG_HOST_NAME_MAX + 1];
		uint64_t size;
		int q = dedup_backend_size(b, names.names[i], &size);
		if (q == -ENOENT)
			continue; /* removed since the listing (a collection, a temporary renamed) */
		if (q < 0) {
			r = q;
			break;
		}
		object_host(names.names[i], host);
		size_t k;
		for (k = 0; k < n && strcmp(rows[k].host, host) != 0; k++)
			;
		if (k == n) {
			r = ARRAY_RESERVE_ONE(rows, cap, n, 8);
			if (r < 0)
				break;
			rows[n] = (TierSharedUsage) {};
			memcpy(rows[n].host, host, sizeof(host));
			n++;
		}
		rows[k].objects++;
		rows[k].bytes += size;
		if (object_is_shared(&refs, names.names[i], host))
			rows[k].shared += size;
	}
	free(refs.v);
	strvec_done(&refs.hosts);
	if (r < 0)
		return r;
	if (n > 0)
		qsort(rows, n, sizeof(*rows), compare_usage);
	*ret = TAKE_PTR(rows);
	*ret_n = n;
	return 0;
}
