#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Spill through the mount: when the hot tier is full, writes go on on the
capacity tier with no error; ENOSPC only when both are full.

Both tiers are tmpfs of fixed size mounted by the test (hot 64 MiB,
capacity 128 MiB), so their statfs is real and small.  Content is
incompressible and distinct (an archiver's logs), generated from a seed per
file, so every check compares SHA-256 of what was written with what reads
back.  Waits poll observable state; no check depends on how long anything
took.

- spill: archivelogs written with fsync (Python, 1 MiB writes) fill part of
  the hot tier; one large log written by dd (bs=1M conv=fsync) crosses the
  hot tier's floor and moves to the capacity tier in the middle of its
  writes; the logs after it start there.  No write fails.  tierctl ls shows
  each file's tier; the hot tier keeps its floor free for the catalog; a
  file on the capacity tier is overwritten, truncated and extended with a
  hole, POSIX-exact.  Every file reads back exactly, then again after a
  remount (still raw), after sealing (the spilled files' chunks on the
  capacity tier), and after one more remount.
- full: more logs are written until a write fails with ENOSPC.  statfs of
  the mount matched the two tiers' own statfs (less their floors) before,
  and reports nothing left after; the file cut short holds exactly what was
  acknowledged; every earlier file is intact; the daemon answers; after an
  unlink on the mount a new file is written in full.
- someone else fills the hot tier: on fresh tiers, a log is being written
  on the hot tier when a file outside the mount takes the last byte of its
  filesystem.  The log's writes go on (it spills), new logs are written on
  the capacity tier, because the catalog gave back its reserve for the
  commits (tierctl status and metrics say so); once the other file is
  gone, the reserve comes back.  Everything reads back, also after a
  remount.
- crash: on fresh tiers, a writer fsyncs each 1 MiB of its logs while they
  fill the hot tier and spill; the daemon is SIGKILLed once the writer is
  well into the capacity tier.  After a remount every fsynced byte is
  there, no file holds a byte it was not given, and every staging file is
  on the tier the catalog names, with no strays.
- move off a full hot tier: someone else takes the last byte of the hot
  tier's filesystem, and tierctl migrate moves two sealed files of 12 MiB
  in 8 KiB chunks to the capacity tier (the catalog commits with its reserve); their
  containers on the hot tier go while it is still full.
- a move too large for it: on a fresh pair, a file of 64 Ki chunks cannot
  move off the full hot tier (its catalog rows would not fit the reserve):
  the move is refused before it copies anything, saying the hot tier's
  filesystem has no room for the catalog, the file stays whole where it
  was, 16 new logs are written; once the other file is gone the move
  succeeds.
- the archiver on a full hot tier: on a pair whose capacity tier holds
  512 MiB, someone else fills the hot tier's filesystem and 1 MiB logs are
  written with seals on: they go on until the capacity tier is full (the
  catalog checkpoints early and leaves spilled files unsealed, so its
  reserve goes to the logs), tierctl status and metrics count the seals
  waiting for room.  With the other file gone, those seals are tried and
  fail (no room for chunks on the full capacity tier); with logs deleted
  there, they are tried again and every one of them is sealed.
- encrypted: with a key the capacity tier encrypts and so takes no raw
  file: logs fill the hot tier until ENOSPC, every one stays there, statfs
  counts the hot tier alone and the capacity tier's staging area stays
  empty; with spill = yes in its section the next logs go on there.

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_TIERCTL), FRATIER_KEEP.
"""

import errno
import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

import harness
import tiercommon as tc
from tiercommon import dc

MiB = 1 << 20
HOT_SIZE = 64 * MiB
CAP_SIZE = 128 * MiB
# For run_archiver_on_full_hot(): more logs than the catalog's reserve (2 MiB beside a 64 MiB hot tier) would
# hold the rows of.
CAP_LARGE = 512 * MiB
LOG = 4 * MiB
BIG = 40 * MiB
WAIT = harness.scaled(60.0)
# fs/spill.c: raw data leaves this much of each filesystem free.
SPILL_FLOOR = 2 * MiB
# statfs of the mount and of the tiers are read one after the other while the
# catalog may checkpoint: they agree to within this.
TOLERANCE = 4 * MiB
RAW_OPTIONS = ["seal_delay=3600", "gc_interval=1"]


def hot_floor(size):
    return min(64 * MiB, size // 8)


def content(name, size):
    return random.Random("fratier-spill:" + name).randbytes(size)


def sha(b):
    return hashlib.sha256(b).hexdigest()



def avail(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def size_of(path):
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize


class Tiers:
    """Two tmpfs tiers and the config naming them."""

    def __init__(self, res, base, hot_size=HOT_SIZE, cap_size=CAP_SIZE):
        self.base = base
        self.data = os.path.join(base, "data")
        self.hot = os.path.join(self.data, "hot")
        self.cap = os.path.join(self.data, "capacity")
        tc.mount_tmpfs(res, self.hot, hot_size)
        tc.mount_tmpfs(res, self.cap, cap_size)
        self.config = os.path.join(base, "spill.conf")
        with open(self.config, "w") as f:
            f.write("[fratier]\ndata_dir = %s\n[tier hot]\nrole = hot\npath = %s\n"
                    "[tier capacity]\nrole = capacity\npath = %s\n" % (self.data, self.hot, self.cap))

    def mount(self, options):
        return harness.Fratier(base=self.base, data=self.data, config=self.config, options=options)

    def expected_free(self):
        """What the tiers can still take for raw data, by their own statfs."""
        return (max(0, avail(self.hot) - hot_floor(size_of(self.hot))) +
                max(0, avail(self.cap) - SPILL_FLOOR))

    def close(self):
        tc.umount(self.hot)
        tc.umount(self.cap)


def mount_free(fs):
    st = os.statvfs(fs.mnt)
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def check_statfs(res, fs, t, what):
    free, total = mount_free(fs)
    want = t.expected_free()
    print("%s: statfs of the mount: %.1f MiB free of %.1f MiB; the tiers: %.1f MiB above their floors"
          % (what, free / MiB, total / MiB, want / MiB), flush=True)
    res.check(abs(free - want) <= TOLERANCE, "%s: statfs says %d bytes free, the tiers %d" % (what, free, want))
    res.check(abs(total - (size_of(t.hot) + size_of(t.cap))) <= MiB,
              "%s: statfs says %d bytes in all, the tiers hold %d" % (what, total, size_of(t.hot) + size_of(t.cap)))
    return free


def write_log(fs, rel, size):
    """An archived log: 1 MiB writes, fsync, close.  Returns its content."""
    data = content(rel, size)
    os.makedirs(os.path.dirname(fs.path(rel)), exist_ok=True)
    dc.write_file(fs.path(rel), data, fsync=True)
    return data


def tiers_and_states(res, fs, rels):
    dirs = sorted({os.path.dirname(fs.path(r)) for r in rels})
    j = tc.tierctl_json(res, fs, "ls", *dirs)
    out = {}
    for e in j.get("entries", []):
        if e.get("type") == "file":
            rel = os.path.relpath(os.path.join(fs.mnt, e["dir"].lstrip("/"), e["name"]), fs.mnt)
            out[rel] = (int(e.get("tier", -1)), e.get("state"))
    return out


def compare_all(res, fs, model, what):
    bad = 0
    for rel in sorted(model):
        size, digest = model[rel]
        try:
            got = dc.read_all(fs.path(rel))
        except OSError as e:
            res.check(False, "%s: reading %s failed: %s" % (what, rel, e))
            bad += 1
            continue
        if not res.check(len(got) == size and sha(got) == digest,
                         "%s: %s reads back %d bytes, not the %d written (or other bytes)" % (what, rel, len(got), size)):
            bad += 1
    print("%s: %d files compared, %d differ" % (what, len(model), bad), flush=True)


def posix_on_spilled(res, fs, model):
    """Overwrite, truncate and a hole in a file whose staging is on the capacity tier."""
    rel = "fra/other/rewritten.dat"
    os.makedirs(fs.path("fra", "other"), exist_ok=True)
    data = bytearray(content(rel, 6 * MiB))
    dc.write_file(fs.path(rel), bytes(data), fsync=True)
    patch = content(rel + ":patch", MiB)
    with open(fs.path(rel), "r+b", buffering=0) as f:
        f.seek(2 * MiB + 12345)
        f.write(patch)
        f.truncate(5 * MiB)
        f.truncate(7 * MiB)
        os.fsync(f.fileno())
    data[2 * MiB + 12345:3 * MiB + 12345] = patch
    data = bytes(data[:5 * MiB]) + bytes(2 * MiB)
    model[rel] = (len(data), sha(data))
    dc.compare(res, fs.path(rel), data, "overwrite and truncate of a spilled file")
    return rel


def run_spill(res, t):
    model = {}
    hot_logs = ["fra/archivelog/thread_1_seq_%d.arc" % (100 + k) for k in range(8)]
    big = "fra/archivelog/thread_1_seq_108.arc"
    cold_logs = ["fra/archivelog/thread_1_seq_%d.arc" % (109 + k) for k in range(4)]
    src = os.path.join(t.base, "big.src")
    # No chunking while written here: a stream's chunks take room on the hot
    # tier too (until the collector drops them), which would move the point
    # where it fills from run to run.  The other mounts stream.
    with t.mount(RAW_OPTIONS + ["seal_stream=0"]) as fs:
        check_statfs(res, fs, t, "empty")
        for rel in hot_logs:
            model[rel] = (LOG, sha(write_log(fs, rel, LOG)))
        # The big log by dd, as an archiver copying a log would: it starts on the hot tier and cannot fit.
        res.check(avail(t.hot) - hot_floor(HOT_SIZE) > 8 * MiB,
                  "the hot tier has only %d bytes above its floor before the big log" % (avail(t.hot) - hot_floor(HOT_SIZE)))
        data = content(big, BIG)
        with open(src, "wb") as f:
            f.write(data)
        p = subprocess.run(["dd", "if=" + src, "of=" + fs.path(big), "bs=1M", "conv=fsync", "status=none"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        res.check(p.returncode == 0, "dd of %d MiB across the full hot tier failed: %s" % (BIG // MiB, p.stdout.strip()))
        model[big] = (BIG, sha(data))
        os.unlink(src)
        for rel in cold_logs:
            model[rel] = (LOG, sha(write_log(fs, rel, LOG)))
        model_rel = posix_on_spilled(res, fs, model)

        res.check(avail(t.hot) >= hot_floor(HOT_SIZE) // 2,
                  "the hot tier was filled beyond its floor: %d bytes left" % avail(t.hot))
        where = tiers_and_states(res, fs, model)
        print("after the spill: %r" % {r: where.get(r) for r in sorted(model)}, flush=True)
        res.check(all(where.get(r) == (0, "raw") for r in hot_logs),
                  "the first logs should be raw on the hot tier: %r" % {r: where.get(r) for r in hot_logs})
        res.check(where.get(big) == (1, "raw"), "the big log should have moved to the capacity tier: %r" % (where.get(big),))
        res.check(all(where.get(r) == (1, "raw") for r in cold_logs + [model_rel]),
                  "the logs after it should start on the capacity tier: %r" % {r: where.get(r) for r in cold_logs})
        check_statfs(res, fs, t, "after the spill")
        # A spilled log is not on the hot tier: a recall would bring it back, a migrate to capacity not.
        j = tc.tierctl_json(res, fs, "recall", "--dry-run", fs.path(cold_logs[0]))
        res.check(j.get("would_move") == 1, "recall --dry-run of a spilled log: %r" % j)
        j = tc.tierctl_json(res, fs, "migrate", "--dry-run", "--to", "capacity", fs.path(cold_logs[0]))
        res.check(j.get("would_move") == 0 and j.get("already") == 1, "migrate --dry-run of a spilled log: %r" % j)
        compare_all(res, fs, model, "after the spill")

    with t.mount(RAW_OPTIONS) as fs:
        compare_all(res, fs, model, "after a remount, raw")
    with t.mount(dc.OPTIONS) as fs:
        sealed = [r for r in model if r != model_rel]
        dc.check_sealed(res, [fs.path(r) for r in sealed], "seal after the spill")
        where = tiers_and_states(res, fs, model)
        # Sealed where their bytes are: the capacity tier had room for them.
        res.check(all(where.get(r) == (1, "sealed") for r in cold_logs + [big]),
                  "the spilled logs should be sealed on the capacity tier: %r" % {r: where.get(r) for r in cold_logs + [big]})
        res.check(where.get(model_rel) == (1, "raw"), "the rewritten file stays raw where it is: %r" % (where.get(model_rel),))
        compare_all(res, fs, model, "after sealing")
    with t.mount(RAW_OPTIONS) as fs:
        compare_all(res, fs, model, "after sealing and a remount")
    return model


def run_full(res, t, model):
    with t.mount(RAW_OPTIONS) as fs:
        check_statfs(res, fs, t, "before filling")
        written = []
        cut = None
        for k in range(200):
            rel = "fra/archivelog/thread_2_seq_%d.arc" % (500 + k)
            data = content(rel, LOG)
            fd = os.open(fs.path(rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            off = 0
            try:
                while off < LOG:
                    off += os.write(fd, data[off:off + dc.BLOCK])
                os.fsync(fd)
            except OSError as e:
                cut = (rel, off, e.errno)
            finally:
                os.close(fd)
            if cut:
                break
            model[rel] = (LOG, sha(data))
            written.append(rel)
        print("full: %d more logs written, then %r" % (len(written), cut), flush=True)
        if not res.check(cut and cut[2] == errno.ENOSPC, "no ENOSPC after %d logs: %r" % (len(written), cut)):
            return
        rel, off, _ = cut
        free = check_statfs(res, fs, t, "full")
        res.check(free <= TOLERANCE, "statfs says %d bytes free on full tiers" % free)
        # Exactly what was acknowledged, and nothing else.
        dc.compare(res, fs.path(rel), content(rel, LOG)[:off], "the log cut short by ENOSPC")
        compare_all(res, fs, model, "when full")
        rc, out, err = tc.tierctl(fs, "status")
        res.check(rc == 0 and "hot" in out, "tierctl status when full: %d %s" % (rc, err))

        # Space back on the mount: the next log is written in full.
        os.unlink(fs.path(rel))
        for victim in written[-2:]:
            os.unlink(fs.path(victim))
            del model[victim]
        # The space comes back once the kernel forgets the unlinked inodes, which it does by itself.
        res.check(harness.wait_for(lambda: mount_free(fs)[0] >= 4 * MiB),
                  "statfs still says %d bytes free %ds after unlinking %d MiB" % (mount_free(fs)[0], WAIT, (off + 2 * LOG) // MiB))
        check_statfs(res, fs, t, "after an unlink")
        again = "fra/archivelog/thread_2_seq_999.arc"
        try:
            model[again] = (2 * MiB, sha(write_log(fs, again, 2 * MiB)))
            res.check(True, "")
        except OSError as e:
            res.check(False, "writing after an unlink freed space failed: %s" % e)
        compare_all(res, fs, model, "after the unlink")
    with t.mount(RAW_OPTIONS) as fs:
        compare_all(res, fs, model, "full, after a remount")


WRITER = r"""
import os, random, sys
mnt, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(os.path.join(mnt, "fra", "archivelog"), exist_ok=True)
for k in range(n):
    rel = "fra/archivelog/thread_3_seq_%d.arc" % (700 + k)
    data = random.Random("fratier-spill:" + rel).randbytes(size)
    try:
        fd = os.open(os.path.join(mnt, rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        off = 0
        while off < size:
            off += os.write(fd, data[off:off + (1 << 20)])
            if off % (1 << 20) == 0 or off == size:
                os.fsync(fd)
                print(rel, off, flush=True)
        os.close(fd)
    except OSError as e:
        print("error", rel, e.errno, flush=True)
        sys.exit(0)
"""


def staging_files(t):
    """{ino: [tier, ...]} of every staging file on both tiers."""
    out = {}
    for tier, root in ((0, t.hot), (1, t.cap)):
        for d, _, names in os.walk(os.path.join(root, "staging")):
            for n in names:
                out.setdefault(int(n, 16), []).append(tier)
    return out


def fill(path):
    """Writes a file at path until its filesystem has no byte left."""
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(bytes(64 << 10))
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
        try:
            while True:
                f.write(bytes(4096))
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise


def fill_after_seals(res, t, fs, path):
    """fill() once the sealed files' staging files are deleted and the seal queue is empty: the room those and
    the catalog's truncated WAL give back after the last seal comes back before the fill, not after it."""
    res.check(harness.wait_for(lambda: not [n for _, _, names in os.walk(os.path.join(t.hot, "staging"))
                                            for n in names] and
                               int(tc.tierctl_json(res, fs, "status").get("seal_queue", -1)) == 0),
              "staging files left on the hot tier after the seals")
    fill(path)
    res.check(avail(t.hot) == 0, "the hot tier's filesystem has %d bytes left after filling it" % avail(t.hot))


def reserve(res, fs):
    j = tc.tierctl_json(res, fs, "status")
    return (int(j.get("catalog_reserve_held", -1)), int(j.get("catalog_reserve_size", -1)),
            int(j.get("catalog_reserve_releases", -1)))


def run_ballast(res, t):
    model = {}
    first = "fra/archivelog/thread_4_seq_800.arc"
    later = ["fra/archivelog/thread_4_seq_%d.arc" % (801 + k) for k in range(3)]
    ballast = os.path.join(t.hot, "someone-else.dat")
    with t.mount(RAW_OPTIONS) as fs:
        held, size, releases = reserve(res, fs)
        res.check(size > 0 and held == size and releases == 0,
                  "a new mount's catalog reserve: %d of %d bytes held, %d releases" % (held, size, releases))
        os.makedirs(fs.path("fra", "archivelog"), exist_ok=True)
        data = content(first, 6 * MiB)
        fd = os.open(fs.path(first), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data[:2 * MiB])
            os.fsync(fd)
            res.check(tiers_and_states(res, fs, [first]).get(first) == (0, "raw"), "the log should start on the hot tier")
            fill(ballast)
            print("ballast: the hot tier's filesystem has %d bytes left" % avail(t.hot), flush=True)
            off = 2 * MiB
            try:
                while off < len(data):
                    off += os.write(fd, data[off:off + MiB])
                    os.fsync(fd)
            except OSError as e:
                res.check(False, "writing the log on after the hot tier's filesystem filled: %s at %d" % (e, off))
        finally:
            os.close(fd)
        model[first] = (len(data), sha(data))
        for rel in later:
            try:
                model[rel] = (4 * MiB, sha(write_log(fs, rel, 4 * MiB)))
            except OSError as e:
                res.check(False, "a new log after the hot tier's filesystem filled: %s: %s" % (rel, e))
        where = tiers_and_states(res, fs, list(model))
        res.check(all(where.get(r) == (1, "raw") for r in model),
                  "with the hot tier's filesystem full every log should be on the capacity tier: %r" % where)
        # Given back once at least; it may be back already (the spill freed the log's room on the hot tier).
        held, size, releases = reserve(res, fs)
        res.check(releases >= 1, "the catalog's reserve should have been given back: %d of %d held, %d releases" %
                  (held, size, releases))
        rc, out, _ = tc.tierctl(fs, "status")
        res.check(rc == 0 and "catalog's reserve was given back" in out,
                  "tierctl status should say the catalog's reserve was given back: %s" % out)
        rc, out, _ = tc.tierctl(fs, "metrics")
        res.check(rc == 0 and "fratier_catalog_reserve_releases_total " in out,
                  "tierctl metrics should export the reserve's releases")
        compare_all(res, fs, model, "hot filesystem full")

        # Room back: the next commits take the reserve again.
        os.unlink(ballast)
        k = 0

        def refilled():
            nonlocal k
            rel = "fra/other/touch_%d" % k
            k += 1
            os.makedirs(fs.path("fra", "other"), exist_ok=True)
            with open(fs.path(rel), "wb"):
                pass
            return reserve(res, fs)[0] == size

        res.check(harness.wait_for(refilled), "the catalog's reserve did not come back after the hot tier had room again")
    with t.mount(RAW_OPTIONS) as fs:
        compare_all(res, fs, model, "hot filesystem full, after a remount")
        held, size, _ = reserve(res, fs)
        res.check(held == size, "after a remount the reserve holds %d of %d bytes" % (held, size))


def run_crash(res, t):
    size = 6 * MiB
    fs = t.mount(RAW_OPTIONS).start()
    synced = {}
    try:
        w = subprocess.Popen([sys.executable, "-c", WRITER, fs.mnt, "40", str(size)], stdout=subprocess.PIPE,
                             text=True)
        goal = HOT_SIZE + 16 * MiB
        for line in w.stdout:
            words = line.split()
            if words[0] == "error":
                res.check(False, "the writer failed before the kill: %s" % line.strip())
                break
            synced[words[0]] = int(words[1])
            if sum(synced.values()) >= goal:
                break
        fs.kill()
        w.stdout.read()
        w.wait()
    except BaseException:
        fs.kill(check=False)
        raise
    print("crash: killed the daemon with %d MiB fsynced in %d logs" % (sum(synced.values()) // MiB, len(synced)),
          flush=True)
    res.check(sum(synced.values()) >= HOT_SIZE, "the writer never got past the hot tier's size")
    with t.mount(RAW_OPTIONS) as fs:
        for rel, n in sorted(synced.items()):
            try:
                got = dc.read_all(fs.path(rel))
            except OSError as e:
                res.check(False, "after the crash: reading %s failed: %s" % (rel, e))
                continue
            want = content(rel, size)
            res.check(len(got) >= n and got == want[:len(got)],
                      "after the crash: %s has %d bytes, %d fsynced, or bytes it was not given" % (rel, len(got), n))
        # Every file of the directory, also one created and not yet written when the daemon died.
        where = tiers_and_states(res, fs, synced)
        res.check(any(where.get(r, (0,))[0] == 1 for r in synced),
                  "after the crash: no log is on the capacity tier: %r" % where)
        inos = {os.stat(fs.path(r)).st_ino: tier for r, (tier, _) in where.items()}
    staged = staging_files(t)
    res.check(all(staged.get(ino) == [tier] for ino, tier in inos.items()),
              "after the crash: staging files not where the catalog says: %r vs %r" % (staged, inos))
    res.check(set(staged) <= set(inos), "after the crash: stray staging files: %r" % sorted(set(staged) - set(inos)))


def run_encrypted(res, t):
    """An encrypted capacity tier takes no spilled raw file (it would be in clear there): with the hot tier
    full, writes fail with ENOSPC, statfs counts the hot tier alone, and nothing lands in the capacity tier's
    staging area.  spill = yes on it lets the next log go on there."""
    key = os.path.join(t.base, "fra.key")
    p = subprocess.run([harness.daemon_path(), "--make-key", key], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if not res.check(p.returncode == 0, "--make-key: %s" % p.stdout):
        return
    with open(t.config) as f:
        plain = f.read()

    def configure(spill):
        with open(t.config, "w") as f:
            f.write(plain.replace("[fratier]\n", "[fratier]\nkey_file = %s\n" % key) + spill)

    def check_status(fs, spill):
        tiers = {x.get("tier"): x for x in tc.tierctl_json(res, fs, "status").get("tiers", [])}
        res.check((tiers.get(1, {}).get("encrypt"), tiers.get(1, {}).get("spill")) == ("yes", spill) and
                  tiers.get(0, {}).get("spill") == "yes", "tierctl status --json, spill = %s: %r" % (spill, tiers))
        rc, out, err = tc.tierctl(fs, "status")
        said = "takes no raw files" if spill == "no" else "raw files that spill there"
        res.check(rc == 0 and said in out, "tierctl status does not say %r: %d %s %s" % (said, rc, out[-800:], err))

    configure("")
    model, written, cut = {}, [], None
    with t.mount(RAW_OPTIONS) as fs:
        check_status(fs, "no")
        hot_only = max(0, avail(t.hot) - hot_floor(size_of(t.hot)))
        free, _ = mount_free(fs)
        res.check(abs(free - hot_only) <= TOLERANCE,
                  "statfs with an encrypted capacity tier says %d bytes free, the hot tier alone %d" % (free, hot_only))
        for k in range(64):
            rel = "fra/archivelog/thread_4_seq_%d.arc" % (900 + k)
            try:
                model[rel] = (LOG, sha(write_log(fs, rel, LOG)))
                written.append(rel)
            except OSError as e:
                cut = (rel, e.errno)
                break
        print("encrypted capacity tier: %d logs written, then %r" % (len(written), cut), flush=True)
        res.check(cut and cut[1] == errno.ENOSPC, "no ENOSPC with the hot tier full and spill = no: %r" % (cut,))
        where = tiers_and_states(res, fs, written)
        res.check(written and all(where.get(r) == (0, "raw") for r in written),
                  "a log left the hot tier for the encrypted one: %r" % where)
        on_cap = [n for _, _, names in os.walk(os.path.join(t.cap, "staging")) for n in names]
        res.check(not on_cap, "raw files in the encrypted tier's staging area: %r" % on_cap)
    # The hot tier stays full (the log cut short too): what the remount frees of it (the catalog's WAL) fills
    # first, then the logs go on on the capacity tier.
    configure("spill = yes\n")
    with t.mount(RAW_OPTIONS) as fs:
        check_status(fs, "yes")
        where = {}
        for k in range(16):
            rel = "fra/archivelog/thread_4_seq_%d.arc" % (1000 + k)
            try:
                model[rel] = (LOG, sha(write_log(fs, rel, LOG)))
            except OSError as e:
                res.check(False, "with spill = yes a log failed instead of going on on the capacity tier: %s" % e)
                break
            where = tiers_and_states(res, fs, [rel])
            if where.get(rel) == (1, "raw"):
                break
        print("spill = yes: %r" % {r: w for r, w in where.items() if "seq_1" in r}, flush=True)
        res.check(any(w == (1, "raw") for w in where.values()),
                  "with spill = yes no log went on on the capacity tier: %r" % where)
        compare_all(res, fs, model, "with an encrypted capacity tier")


MOVED = ["fra/moved/piece_%d.dat" % k for k in range(2)]
# Of the class run_move_too_large() chunks in 512-byte pieces: 64 Ki chunks, more rows than the catalog's reserve holds.
TOO_MANY = "fra/tiny/tiny_piece.dat"


def run_move_full(res, t):
    """A move off a full hot tier: someone else took the last byte of its filesystem, and tierctl migrate of
    sealed files to the capacity tier is the operator's way to make room there.  Two files of 8 KiB chunks
    move (their catalog rows fit the catalog's reserve), their containers on the hot tier go while the
    filesystem is still full, and they read back, also after a remount."""
    ballast = os.path.join(t.hot, "someone-else.dat")
    model = {}
    with t.mount(["seal_delay=1", "gc_interval=1"]) as fs:
        for rel in MOVED:
            model[rel] = (12 * MiB, sha(write_log(fs, rel, 12 * MiB)))
        if not dc.check_sealed(res, [fs.path(r) for r in MOVED], "before the move"):
            return
        where = tiers_and_states(res, fs, MOVED)
        res.check(all(where.get(r) == (0, "sealed") for r in MOVED), "before the move: %r" % where)
        before = tc.stored(fs, "hot")
        fill_after_seals(res, t, fs, ballast)
        print("move off a full hot tier: %.1f MiB of containers there, %d bytes left on its filesystem" %
              (before / MiB, avail(t.hot)), flush=True)
        rc, out, err = tc.tierctl(fs, "migrate", "--to", "capacity", fs.path("fra", "moved"))
        res.check(rc == 0, "migrate off a full hot tier: exit %d: %s %s" % (rc, out[-400:], err[-400:]))
        where = tiers_and_states(res, fs, MOVED)
        res.check(all(where.get(r) == (1, "sealed") for r in MOVED), "after the move off a full hot tier: %r" % where)
        big = tc.wait_empty(fs, "hot")
        res.check(before >= 24 * MiB and not big,
                  "the move left containers on the full hot tier (%.1f MiB before): %r" % (before / MiB, big))
        compare_all(res, fs, model, "moved off a full hot tier")
        os.unlink(ballast)
    with t.mount(RAW_OPTIONS) as fs:
        compare_all(res, fs, model, "moved off a full hot tier, after a remount")


def run_move_too_large(res, t):
    """A move off a full hot tier that needs more catalog rows than the catalog's reserve holds is refused
    before it copies anything, with a reason that says so; the file stays whole where it was, and the
    archiver's next logs still find room for their catalog rows.  Once the filesystem has room again, it
    moves."""
    with open(t.config, "a") as f:
        f.write("[class imagecopy]\nnames = tiny_*\nchunking = fixed\nchunk_size = 512\n")
    ballast = os.path.join(t.hot, "someone-else.dat")
    model = {}
    with t.mount(["seal_delay=1", "gc_interval=1"]) as fs:
        model[TOO_MANY] = (32 * MiB, sha(write_log(fs, TOO_MANY, 32 * MiB)))
        if not dc.check_sealed(res, [fs.path(TOO_MANY)], "before the move"):
            return
        fill_after_seals(res, t, fs, ballast)
        rc, out, err = tc.tierctl(fs, "migrate", "--to", "capacity", fs.path(TOO_MANY))
        print("a move of 64 Ki chunks off a full hot tier: exit %d\n%s" % (rc, out), flush=True)
        res.check(rc != 0 and "no room left on the hot tier's filesystem for the catalog" in out,
                  "a move whose catalog rows cannot fit should fail and say why: exit %d: %s %s" % (rc, out, err))
        res.check(tiers_and_states(res, fs, [TOO_MANY]).get(TOO_MANY) == (0, "sealed"),
                  "a move that failed should leave the file where it was")
        compare_all(res, fs, model, "after a move that failed")
        # Refused before it took the room the archiver's commits need: new logs go on on the capacity tier.
        for k in range(16):
            rel = "fra/archivelog/thread_6_seq_%d.arc" % (3000 + k)
            try:
                model[rel] = (MiB, sha(write_log(fs, rel, MiB)))
            except OSError as e:
                res.check(False, "after the move was refused, a new log failed: %s: %s" % (rel, e))
                break
        os.unlink(ballast)
        rc, out, err = tc.tierctl(fs, "migrate", "--to", "capacity", fs.path(TOO_MANY))
        res.check(rc == 0 and tiers_and_states(res, fs, [TOO_MANY]).get(TOO_MANY) == (1, "sealed"),
                  "the move once the hot tier has room: exit %d: %s %s" % (rc, out[-400:], err[-400:]))
        compare_all(res, fs, model, "moved once the hot tier had room")
    with t.mount(RAW_OPTIONS) as fs:
        compare_all(res, fs, model, "moved once the hot tier had room, after a remount")



def run_archiver_on_full_hot(res, t):
    """The archiver on a hot tier someone else filled, with seals on: new logs go on on the capacity tier
    until it is full, not until the catalog's reserve is gone.  The catalog checkpoints its WAL early then
    (frames would take the reserve), and files spilled to the capacity tier wait to be sealed, since their
    chunks' rows would take it too; tierctl status says so.  Once the other file is gone they are tried,
    and fail for want of room for their chunks on the full capacity tier; once logs are deleted there,
    they are tried again and sealed."""
    ballast = os.path.join(t.hot, "someone-else.dat")
    model = {}
    with t.mount(["seal_delay=1", "gc_interval=1"]) as fs:
        os.makedirs(fs.path("fra", "archivelog"), exist_ok=True)
        fill(ballast)
        cut = None
        for k in range(CAP_LARGE // MiB):
            rel = "fra/archivelog/thread_5_seq_%d.arc" % (2000 + k)
            try:
                model[rel] = (MiB, sha(write_log(fs, rel, MiB)))
            except OSError as e:
                cut = (rel, e.errno)
                break
        left = avail(t.cap)
        print("archiver on a full hot tier: %d logs of 1 MiB, then %r with %.1f MiB left on the capacity tier" %
              (len(model), cut, left / MiB), flush=True)
        # It stops where the capacity tier has no room for one more log above its floor, not before.
        res.check(cut and cut[1] == errno.ENOSPC and left < SPILL_FLOOR + 2 * MiB,
                  "the archiver stopped after %d logs with %.1f MiB left on the capacity tier: %r" %
                  (len(model), left / MiB, cut))
        j = tc.tierctl_json(res, fs, "status")
        waiting = int(j.get("seal_queue_room", -1))
        rc, out, _ = tc.tierctl(fs, "status")
        res.check(waiting > 0 and rc == 0 and "wait for room there to be sealed" in out,
                  "tierctl status should say %d files wait for room to be sealed: %s" % (waiting, out[-1200:]))
        rc, out, _ = tc.tierctl(fs, "metrics")
        metric = re.search(r'^fratier_queue_depth\{queue="seal_room"\} (\d+)$', out, re.M)
        res.check(rc == 0 and metric and int(metric.group(1)) > 0,
                  "tierctl metrics should count the seals waiting for room: %r" % (metric and metric.group(0)))

        os.unlink(ballast)
        inos = {os.stat(fs.path(rel)).st_ino: rel for rel in model}

        def failed():
            return sorted({inos[int(w)] for w in re.findall(r"Failed to seal inode (\d+)", fs.log_text())
                           if int(w) in inos})

        if not res.check(harness.wait_for(failed, harness.scaled(120)),
                         "with the hot tier's room back, no seal was tried on the full capacity tier"):
            return
        failed_logs = failed()
        for rel in [r for r in sorted(model) if r not in failed_logs][-64:]:
            os.unlink(fs.path(rel))
            del model[rel]
        print("seals that failed for want of room on the capacity tier: %r; 64 logs deleted there" % failed_logs,
              flush=True)

        def states():
            st = tiers_and_states(res, fs, failed_logs)
            return {r: st.get(r) for r in failed_logs}

        res.check(harness.wait_for(lambda: all(s == (1, "sealed") for s in states().values()), harness.scaled(120)),
                  "logs whose seals failed for want of room were not sealed once there was room: %r" % states())
        compare_all(res, fs, model, "the archiver on a full hot tier")


def main():
    harness.require_fuse()
    res = harness.Results("e2e-spill")
    tmp = tempfile.mkdtemp(prefix="fratier-spill-", dir=os.environ.get("FRATIER_TMP"))
    tiers = []
    try:
        # Both pairs of tmpfs before the first check: a test that cannot have them skips, never after checks ran.
        for name in ("a", "b", "c", "d"):
            tiers.append(Tiers(res, os.path.join(tmp, name)))
        # Room on the hot tier for two files' containers beside the staging file of the one being sealed.
        for name in ("e", "f"):
            tiers.append(Tiers(res, os.path.join(tmp, name), hot_size=256 * MiB))
        tiers.append(Tiers(res, os.path.join(tmp, "g"), cap_size=CAP_LARGE))
        model = run_spill(res, tiers[0])
        if not res.failed:
            run_full(res, tiers[0], model)
        run_crash(res, tiers[1])
        run_ballast(res, tiers[2])
        run_encrypted(res, tiers[3])
        run_move_full(res, tiers[4])
        run_move_too_large(res, tiers[5])
        run_archiver_on_full_hot(res, tiers[6])
    finally:
        for t in tiers:
            t.close()
        if not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
