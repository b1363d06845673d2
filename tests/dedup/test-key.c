/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dedup/key.c: key files made, loaded and refused (loose mode, other owner,
 * damaged, truncated, a directory), and the subkeys: distinct from each other
 * and from the key, the same for the same key, different for another; key
 * rings: a key file loads as a ring of one, --add-key's keys come after it
 * under the first key's id key, --drop-key drops an older one and refuses
 * the newest, an unknown or too short id, and a ring opened by others.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dedup/key.h"

static char dir[] = "/tmp/fratier-test-key-XXXXXX";

static char *path(const char *name) {
	char *p;
	if (asprintf(&p, "%s/%s", dir, name) < 0)
		abort();
	return p;
}

static int load(const char *p, DedupKey **k) {
	char *why = NULL;
	int r = dedup_key_load(p, k, &why);
	assert((r < 0) == (why != NULL) || r == -ENOMEM);
	free(why);
	return r;
}

int main(void) {
	DedupKey *a = NULL, *b = NULL;
	char buf[DEDUP_KEY_FILE_SIZE + 8];
	struct stat st;

	assert(mkdtemp(dir));
	char *ka = path("a"), *kb = path("b");
	assert(dedup_key_file_make(ka) == 0);
	assert(dedup_key_file_make(ka) == -EEXIST);
	assert(stat(ka, &st) == 0 && (st.st_mode & 07777) == 0400 && st.st_size == DEDUP_KEY_FILE_SIZE);
	assert(dedup_key_file_make(kb) == 0);
	assert(load(ka, &a) == 0 && load(kb, &b) == 0);

	/* Four distinct derived values, none the key, each changing with it. */
	const uint8_t *sa[] = { a->master, a->id, a->content, a->description, a->key_id };
	const uint8_t *sb[] = { b->master, b->id, b->content, b->description, b->key_id };
	for (size_t i = 0; i < 5; i++) {
		assert(memcmp(sa[i], sb[i], DEDUP_KEY_SIZE) != 0);
		for (size_t j = i + 1; j < 5; j++)
			assert(memcmp(sa[i], sa[j], DEDUP_KEY_SIZE) != 0);
	}
	DedupKey again;
	assert(dedup_key_derive(a->master, &again) == 0 && memcmp(&again, a, sizeof(again)) == 0);

	/* Format and parse are inverse; the file is what format writes. */
	char f[DEDUP_KEY_FILE_SIZE];
	uint8_t m[DEDUP_KEY_SIZE];
	int fd = open(ka, O_RDONLY);
	assert(fd >= 0 && read(fd, buf, sizeof(buf)) == DEDUP_KEY_FILE_SIZE);
	close(fd);
	assert(dedup_key_file_format(a->master, f) == 0 && memcmp(f, buf, sizeof(f)) == 0);
	assert(dedup_key_file_parse(buf, DEDUP_KEY_FILE_SIZE, m) == 0 && memcmp(m, a->master, sizeof(m)) == 0);

	/* Every single changed byte and every length but the right one is refused. */
	for (size_t i = 0; i < DEDUP_KEY_FILE_SIZE; i++) {
		char c[DEDUP_KEY_FILE_SIZE];
		memcpy(c, buf, sizeof(c));
		c[i] = c[i] == 'f' ? '0' : c[i] == '\n' ? ' ' : 'f';
		if (c[i] == buf[i])
			c[i] ^= 1;
		assert(dedup_key_file_parse(c, sizeof(c), m) == -EBADMSG);
		assert(dedup_key_file_parse(buf, i, m) == -EBADMSG);
	}
	assert(dedup_key_file_parse(buf, DEDUP_KEY_FILE_SIZE + 1, m) == -EBADMSG);

	/* Loose modes, another owner, a directory, a longer file, a missing one. */
	DedupKey *k = NULL;
	for (mode_t loose = 01; loose <= 040; loose <<= 1) {
		assert(chmod(ka, 0400 | loose) == 0);
		assert(load(ka, &k) == -EPERM);
	}
	assert(chmod(ka, 0600) == 0 && load(ka, &k) == 0);
	k = dedup_key_free(k);
	if (geteuid() == 0) {
		assert(chown(ka, 1, 0) == 0 && load(ka, &k) == -EPERM);
		assert(chown(ka, 0, 0) == 0);
	}
	char *d = path("d"), *longer = path("long"), *missing = path("missing");
	assert(mkdir(d, 0700) == 0 && load(d, &k) == -EPERM);
	fd = open(longer, O_WRONLY | O_CREAT | O_EXCL, 0400);
	assert(fd >= 0 && write(fd, buf, DEDUP_KEY_FILE_SIZE) == DEDUP_KEY_FILE_SIZE && write(fd, "\n", 1) == 1);
	close(fd);
	assert(load(longer, &k) == -EBADMSG);
	assert(load(missing, &k) == -ENOENT);

	char id[DEDUP_KEY_ID_STRING_MAX];
	assert(strlen(dedup_key_id_to_string(a->key_id, id)) == 64);

	/*
	 * AES-256-GCM in place: what seal() wrote opens back under its key,
	 * nonce and associated data; a changed byte of any of them, or of the
	 * tag, does not open and leaves the buffer zeroed.
	 */
	uint8_t nonce[DEDUP_GCM_NONCE_SIZE] = { 7 }, tag[DEDUP_GCM_TAG_SIZE], aad[24] = "associated data";
	uint8_t plain[1000], sealed[sizeof(plain)], zero[sizeof(plain)] = {};
	for (size_t i = 0; i < sizeof(plain); i++)
		plain[i] = (uint8_t) (i * 31 + 1);
	memcpy(sealed, plain, sizeof(plain));
	assert(dedup_gcm_seal(a->content, nonce, aad, sizeof(aad), sealed, sizeof(sealed), tag) == 0);
	assert(memcmp(sealed, plain, sizeof(plain)) != 0);
	for (int what = 0; what < 5; what++) {
		uint8_t trial[sizeof(sealed)], t[sizeof(tag)], n[sizeof(nonce)], x[sizeof(aad)];
		memcpy(trial, sealed, sizeof(trial));
		memcpy(t, tag, sizeof(t));
		memcpy(n, nonce, sizeof(n));
		memcpy(x, aad, sizeof(x));
		const uint8_t *under = what == 4 ? b->content : a->content;
		if (what == 0)
			trial[500] ^= 1;
		else if (what == 1)
			t[3] ^= 1;
		else if (what == 2)
			n[11] ^= 1;
		else if (what == 3)
			x[0] ^= 1;
		assert(dedup_gcm_open(under, n, x, sizeof(x), trial, sizeof(trial), t) == -EBADMSG);
		assert(memcmp(trial, zero, sizeof(trial)) == 0);
	}
	assert(dedup_gcm_open(a->content, nonce, aad, sizeof(aad), sealed, sizeof(sealed), tag) == 0);
	assert(memcmp(sealed, plain, sizeof(plain)) == 0);

	/* Rings. */
	DedupKeyRing *ring = NULL;
	char *why = NULL;
	assert(dedup_keyring_load(ka, &ring, &why) == 0 && ring->n == 1 && ring->old.n == 0);
	assert(memcmp(dedup_keyring_newest(ring)->key_id, a->key_id, DEDUP_KEY_ID_SIZE) == 0);
	ring = dedup_keyring_free(ring);
	uint8_t k2[DEDUP_KEY_ID_SIZE], k3[DEDUP_KEY_ID_SIZE];
	assert(dedup_keyring_file_add(ka, k2, &why) == 0 && !why);
	assert(stat(ka, &st) == 0 && (st.st_mode & 0777) == 0400);
	assert(dedup_keyring_file_add(ka, k3, &why) == 0);
	assert(dedup_keyring_load(ka, &ring, &why) == 0 && ring->n == 3 && ring->old.n == 2);
	/* Every key keeps the first key's id key: chunk ids never change. */
	for (size_t i = 0; i < ring->n; i++)
		assert(memcmp(ring->keys[i].id, a->id, DEDUP_KEY_SIZE) == 0);
	assert(memcmp(ring->keys[0].content, a->content, DEDUP_KEY_SIZE) == 0);
	assert(memcmp(ring->keys[1].key_id, k2, DEDUP_KEY_ID_SIZE) == 0);
	assert(memcmp(dedup_keyring_newest(ring)->key_id, k3, DEDUP_KEY_ID_SIZE) == 0);
	assert(memcmp(ring->keys[1].content, ring->keys[2].content, DEDUP_KEY_SIZE) != 0);
	assert(ring->old.keys[1].tag == dedup_key_tag(k2) && ring->old.keys[0].content == ring->keys[0].content);
	ring = dedup_keyring_free(ring);
	char s1[DEDUP_KEY_ID_STRING_MAX], s3[DEDUP_KEY_ID_STRING_MAX];
	dedup_key_id_to_string(a->key_id, s1);
	dedup_key_id_to_string(k3, s3);
	assert(dedup_keyring_file_drop(ka, s3, &why) == -EBUSY && why);
	free(why), why = NULL;
	assert(dedup_keyring_file_drop(ka, "0000000000", &why) == -ENOENT && why);
	free(why), why = NULL;
	assert(dedup_keyring_file_drop(ka, "abc", &why) == -EINVAL && why);
	free(why), why = NULL;
	s1[12] = '\0';
	assert(dedup_keyring_file_drop(ka, s1, &why) == 0 && !why);
	assert(dedup_keyring_load(ka, &ring, &why) == 0 && ring->n == 2);
	assert(memcmp(ring->keys[0].key_id, k2, DEDUP_KEY_ID_SIZE) == 0 && memcmp(ring->keys[0].id, a->id, DEDUP_KEY_SIZE) == 0);
	ring = dedup_keyring_free(ring);
	assert(chmod(ka, 0440) == 0 && dedup_keyring_load(ka, &ring, &why) == -EPERM && why);
	free(why), why = NULL;
	assert(chmod(ka, 0400) == 0);

	unlink(ka), unlink(kb), unlink(longer), rmdir(d), rmdir(dir);
	free(ka), free(kb), free(d), free(longer), free(missing);
	dedup_key_free(a);
	dedup_key_free(b);
	printf("key: ok\n");
	return 0;
}
