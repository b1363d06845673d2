#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The restore pipeline (fs/readahead.c): sealed files read back while
worker threads decompress ahead of the reader.  Correctness only: every
byte read is checked against the file's content, nothing is timed.

- The daemon raised its mount's read-ahead window (read_ahead_kb).
- Sequential reads through the page cache (the kernel's read-ahead sends
  several requests at once) and with O_DIRECT, in request sizes that do
  and do not line up with the pipeline's 1 MiB blocks.
- Random reads (O_DIRECT, so each reaches the daemon), mixed with short
  sequential runs that start and abandon windows; reads at, across and far
  past the end of the file.
- Concurrent readers of one file: cached and O_DIRECT, from different
  offsets.
- A file rewritten while its reader is ahead of it: the reader, a new open
  and an mmap of the file see the new bytes, never a stale block or page
  (also after it is sealed again); the same after a truncate.  The pages
  a sealed file keeps in the page cache across opens are never stale
  either: a file read whole (cached), closed, rewritten by another process
  (plain and O_DIRECT writes) reads back the new bytes at its next open.
- A tier going away under a reader: the capacity tier's containers lose
  their bytes while a file there is read: every read is exact, a prefix
  of the bytes (a short read) or EIO, never wrong bytes (a failure names
  the offset, length and first wrong byte), at least one is EIO, and none
  hangs; with the bytes back, the file reads whole again.
- SIGKILL of the daemon while readers keep the workers busy: the readers
  get errors, never wrong bytes, and do not hang; after a remount every
  file reads back whole.
- What `tierctl status` and `tierctl metrics` say of it: the bytes the
  sequential reads returned are counted, sequential reads are served from
  blocks decompressed ahead and random ones directly.  And the seal
  backlog: files waiting for their quiet time are counted with their
  sizes, also when a restart finds them raw.

env: FRATIERFS, FRATIER_TIERCTL, FRATIER_SEAL_TIMEOUT, FRATIER_KEEP.
"""

import errno
import json
import mmap
import os
import random
import re
import subprocess
import sys
import threading
import time

import harness
import dedupcommon as dc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tier"))
import tiercommon as tc  # noqa: E402

MIB = 1 << 20
SANITIZER = re.compile(r"Sanitizer|runtime error:")
READ_AHEAD_KB = 4096  # fratierfs's default
OPTIONS = ["seal_delay=0", "gc_interval=3600", "restore_workers=2"]
# Larger than what the pipeline keeps ahead of a reader (8 blocks of 1 MiB), not a multiple of its block.
FILES = {
    "ORCL/backupset/2026_12_01/o1_mf_nnndf_TAG1_big_.bkp": 21 * MIB + 12345,
    "ORCL/backupset/2026_12_01/o1_mf_nnndf_TAG2_even_.bkp": 9 * MIB,
    "ORCL/archivelog/2026_12_01/o1_mf_1_7_small_.arc": 3 * MIB + 1,
    "ORCL/archivelog/2026_12_01/o1_mf_1_8_tiny_.arc": 5000,
}
BIG = "ORCL/backupset/2026_12_01/o1_mf_nnndf_TAG1_big_.bkp"
# What a reader may take before the test calls the file system hung: far above a loaded machine's need.
DEADLINE = float(os.environ.get("FRATIER_READ_DEADLINE", "300"))


def drop_cache(path):
    """Drops path's pages from the page cache, so that the next reads reach the daemon."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_seq(path, req, direct=False, start=0):
    """path from start to its end in reads of req bytes."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    out = bytearray()
    try:
        while True:
            b = os.pread(fd, req, start + len(out))
            if not b:
                return bytes(out)
            out += b
    finally:
        os.close(fd)


def expect_slice(data, off, n):
    return data[off:off + n] if off < len(data) else b""


def within_deadline(res, fs, what, fn):
    """Runs fn() on a thread; fails (and aborts the connection) if it does not end within DEADLINE.
    Returns what fn returned, or the exception it raised."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the caller
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(DEADLINE)
    if t.is_alive():
        res.check(False, "%s: still running after %ds: the file system hangs" % (what, DEADLINE))
        fs.diagnose_hang()
        t.join(60)
        res.finish()
    if "error" in box:
        raise box["error"]
    return box.get("value")


class ReadaheadTest:
    def __init__(self, res, fs):
        self.res = res
        self.fs = fs
        self.rng = random.Random(11)
        self.content = dc.Content(11)
        self.model = {}

    def p(self, rel):
        return self.fs.path(rel)

    def compare_bytes(self, got, want, what):
        if got == want:
            return self.res.check(True, "")
        first = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
        return self.res.check(False, "%s: %d bytes read, %d expected, first difference at %d"
                              % (what, len(got), len(want), first))

    def kernel_window(self):
        """The daemon raised the kernel's read-ahead window of its mount (it runs as root here)."""
        dev = None
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if fields[4] == os.path.realpath(self.fs.mnt):
                    dev = fields[2]
        try:
            with open("/sys/class/bdi/%s/read_ahead_kb" % dev) as f:
                kb = int(f.read())
        except (OSError, ValueError) as e:
            return self.res.check(False, "the mount's read-ahead window cannot be read: %s" % e)
        self.res.check(kb == READ_AHEAD_KB, "the mount's read-ahead window is %d KiB, not %d" % (kb, READ_AHEAD_KB))

    def status(self):
        return tc.tierctl_json(self.res, self.fs, "status")

    def counters_after_reads(self, before, what):
        """The status after reads that returned at least want bytes; before: the status before them."""
        st = self.status()
        for k in ("restore_bytes", "readahead_hits", "readahead_waits", "readahead_misses"):
            if not self.res.check(isinstance(st.get(k), int) and st[k] >= before.get(k, 0),
                                  "status after %s: %s is %r, was %r" % (what, k, st.get(k), before.get(k))):
                return None
        return {k: st[k] - before.get(k, 0) for k in st if isinstance(st[k], int)}

    def write_and_seal(self):
        for rel, size in FILES.items():
            os.makedirs(os.path.dirname(self.p(rel)), exist_ok=True)
            self.model[rel] = self.content.make(size)
            dc.write_file(self.p(rel), self.model[rel], fsync=True)
        if not dc.check_sealed(self.res, [self.p(r) for r in FILES], "initial seal"):
            self.res.finish()

    def sequential(self):
        before = self.status()
        direct_bytes = 0
        for rel in FILES:
            for req in (MIB, 128 << 10, 100003):
                drop_cache(self.p(rel))
                got = within_deadline(self.res, self.fs, "cached read of %s" % rel,
                                      lambda: read_seq(self.p(rel), req))
                self.compare_bytes(got, self.model[rel], "%s read in %d-byte reads" % (rel, req))
            for req in (MIB, 77777, 2 * MIB + 5):
                got = within_deadline(self.res, self.fs, "O_DIRECT read of %s" % rel,
                                      lambda: read_seq(self.p(rel), req, direct=True))
                self.compare_bytes(got, self.model[rel], "%s read with O_DIRECT in %d-byte reads" % (rel, req))
                direct_bytes += len(self.model[rel])
        d = self.counters_after_reads(before, "sequential reads")
        if d is not None:
            # The cached reads add what the kernel asked for: at least the O_DIRECT reads' bytes reached the daemon.
            self.res.check(d["restore_bytes"] >= direct_bytes,
                           "status: restore_bytes grew by %d over sequential reads returning at least %d"
                           % (d["restore_bytes"], direct_bytes))
            served = d["readahead_hits"] + d["readahead_waits"]
            self.res.check(served > d["readahead_misses"],
                           "status: sequential reads mostly served directly: %d hits, %d waits, %d misses"
                           % (d["readahead_hits"], d["readahead_waits"], d["readahead_misses"]))
            self.res.check(isinstance(self.status().get("restore_rate"), int),
                           "status: no restore_rate after sealed files were read")
        rc, out, err = tc.tierctl(self.fs, "metrics")
        m = re.search(r"^fratier_restore_bytes_total (\d+)$", out, re.M)
        self.res.check(rc == 0 and m is not None and int(m.group(1)) >= direct_bytes,
                       "tierctl metrics: fratier_restore_bytes_total missing or below %d: exit %d %s"
                       % (direct_bytes, rc, err.strip()))
        self.res.check(re.search(r'^fratier_readahead_requests_total\{result="hit"\} \d+$', out, re.M) is not None,
                       "tierctl metrics: no fratier_readahead_requests_total{result=\"hit\"}")
        print("sequential reads checked", flush=True)

    def random_reads(self):
        rel = BIG
        data = self.model[rel]
        before = self.status()
        fd = os.open(self.p(rel), os.O_RDONLY | os.O_DIRECT)
        bad = 0
        try:
            for k in range(400):
                if k % 50 == 25:
                    # A short sequential run from anywhere: a window starts, then is left behind.
                    off = self.rng.randrange(len(data))
                    for j in range(self.rng.randrange(2, 10)):
                        at = off + j * MIB
                        if os.pread(fd, MIB, at) != expect_slice(data, at, MIB):
                            bad += 1
                    continue
                off = self.rng.randrange(len(data) + 2 * MIB)
                n = self.rng.choice((1, 4096, 65536, MIB, MIB + 1, self.rng.randrange(1, 3 * MIB)))
                if os.pread(fd, n, off) != expect_slice(data, off, n):
                    bad += 1
        finally:
            os.close(fd)
        self.res.check(bad == 0, "random reads of %s: %d of them returned wrong bytes" % (rel, bad))
        d = self.counters_after_reads(before, "random reads")
        if d is not None:
            self.res.check(d["readahead_misses"] > 0, "status: 400 random reads, none counted as a miss")
        print("random reads checked", flush=True)

    def past_eof(self):
        for rel in FILES:
            data = self.model[rel]
            size = len(data)
            for direct in (False, True):
                fd = os.open(self.p(rel), os.O_RDONLY | (os.O_DIRECT if direct else 0))
                try:
                    how = "O_DIRECT" if direct else "cached"
                    self.res.check(os.pread(fd, 4096, size) == b"", "%s (%s): a read at the end is not empty" % (rel, how))
                    self.res.check(os.pread(fd, MIB, size + 50 * MIB) == b"",
                                   "%s (%s): a read far past the end is not empty" % (rel, how))
                    tail = os.pread(fd, 100, max(0, size - 10))
                    self.res.check(tail == data[max(0, size - 10):],
                                   "%s (%s): a read across the end returned %d bytes, wrong or too many"
                                   % (rel, how, len(tail)))
                finally:
                    os.close(fd)
        print("reads past the end checked", flush=True)

    def concurrent(self):
        rel = BIG
        data = self.model[rel]
        drop_cache(self.p(rel))
        results = []

        def reader(kind, start, req):
            try:
                if kind == "cached":
                    got = read_seq(self.p(rel), req)
                    results.append((kind, start, req, got == data))
                else:
                    # From start to the end, then from 0 to start: the whole file, in another order.
                    got = read_seq(self.p(rel), req, direct=True, start=start)
                    got += read_seq(self.p(rel), req, direct=True)[:start]
                    results.append((kind, start, req, got == data[start:] + data[:start]))
            except OSError as e:
                results.append((kind, start, req, "error %s" % e))

        threads = [threading.Thread(target=reader, args=a) for a in (
            ("cached", 0, MIB), ("cached", 0, 65536), ("cached", 0, 300001),
            ("direct", 0, MIB), ("direct", len(data) // 3, MIB), ("direct", 2 * len(data) // 3, 99999))]

        def run_all():
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        within_deadline(self.res, self.fs, "concurrent readers", run_all)
        self.res.check(len(results) == len(threads), "concurrent readers: %d of %d finished" % (len(results), len(threads)))
        for kind, start, req, ok in results:
            self.res.check(ok is True, "concurrent %s reader from %d in %d-byte reads: %s"
                           % (kind, start, req, "wrong bytes" if ok is False else ok))
        print("concurrent readers checked", flush=True)

    def rewritten_while_read_ahead(self):
        rel = BIG
        path = self.p(rel)
        data = bytearray(self.model[rel])
        # The reader gets a few blocks in: the workers are ahead of it, up to 8 MiB further.
        rfd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        cached = os.open(path, os.O_RDONLY)
        try:
            got = bytearray()
            for _ in range(2):
                got += os.pread(rfd, MIB, len(got))
            # Let the workers get ahead (not needed for the test to be right, only for it to catch a stale block).
            time.sleep(0.5)
            # Only the first pages through the mapping: reading it all would move the window past the rewrite.
            mm = mmap.mmap(cached, len(data), prot=mmap.PROT_READ)
            self.compare_bytes(bytes(mm[:MIB]), bytes(data[:MIB]), "%s through mmap before the rewrite" % rel)
            # Another open rewrites bytes the window holds already (it turns the file raw again).
            new = self.content.make(300000)
            wfd = os.open(path, os.O_WRONLY)
            try:
                os.pwrite(wfd, new, 5 * MIB + 7)
                os.fsync(wfd)
            finally:
                os.close(wfd)
            data[5 * MIB + 7:5 * MIB + 7 + len(new)] = new
            while True:
                b = os.pread(rfd, MIB, len(got))
                if not b:
                    break
                got += b
            self.compare_bytes(bytes(got), bytes(data), "%s: the reader that was ahead, after a rewrite" % rel)
            self.compare_bytes(bytes(mm[:len(data)]), bytes(data), "%s through mmap after the rewrite" % rel)
            mm.close()
        finally:
            os.close(cached)
            os.close(rfd)
        self.compare_bytes(read_seq(path, MIB), bytes(data), "%s: a new open after the rewrite" % rel)
        self.model[rel] = bytes(data)
        dc.check_sealed(self.res, [path], "sealed again after the rewrite")
        self.compare_bytes(read_seq(path, MIB, direct=True), bytes(data), "%s read from its new recipe" % rel)
        drop_cache(path)
        self.compare_bytes(read_seq(path, MIB), bytes(data), "%s read from its new recipe, cached" % rel)

        # A truncate under a reader that is ahead: shorter, then longer again with new bytes.
        rfd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            got = os.pread(rfd, MIB, 0) + os.pread(rfd, MIB, MIB)
            self.compare_bytes(got, bytes(data[:2 * MIB]), "%s: the first blocks before a truncate" % rel)
            os.truncate(path, 6 * MIB)
            # Longer than before: the tier test below needs more than a window of it.
            tail = self.content.make(16 * MIB + 99)
            wfd = os.open(path, os.O_WRONLY)
            try:
                os.pwrite(wfd, tail, 6 * MIB)
                os.fsync(wfd)
            finally:
                os.close(wfd)
            data = bytearray(data[:6 * MIB]) + tail
            got = bytearray(got)
            while True:
                b = os.pread(rfd, MIB, len(got))
                if not b:
                    break
                got += b
            self.compare_bytes(bytes(got), bytes(data), "%s: the reader that was ahead, after a truncate" % rel)
        finally:
            os.close(rfd)
        self.model[rel] = bytes(data)
        dc.check_sealed(self.res, [path], "sealed again after the truncate")
        print("rewrites under a reader checked", flush=True)

    def kept_pages_never_stale(self):
        """A sealed file's pages stay cached across opens; a rewrite by another process must show."""
        rel = "ORCL/backupset/2026_12_01/o1_mf_nnndf_TAG2_even_.bkp"
        path = self.p(rel)
        data = bytearray(self.model[rel])
        for how in ("write", "O_DIRECT write"):
            self.compare_bytes(read_seq(path, MIB), bytes(data), "%s read whole (cached) before a %s" % (rel, how))
            off = self.rng.randrange(len(data) // 8192) * 8192
            new = self.content.make(8192)
            src = os.path.join(self.fs.base, "rewrite.bin")
            with open(src, "wb") as f:
                f.write(new)
            cmd = ["dd", "if=" + src, "of=" + path, "bs=8192", "seek=%d" % (off // 8192), "conv=notrunc,fsync",
                   "status=none"] + (["oflag=direct"] if how == "O_DIRECT write" else [])
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.res.check(p.returncode == 0, "dd (%s) into %s failed: %s" % (how, rel, p.stdout.strip()))
            data[off:off + len(new)] = new
            self.compare_bytes(read_seq(path, MIB), bytes(data), "%s at its next open after a %s by another process"
                               % (rel, how))
            dc.check_sealed(self.res, [path], "sealed again after a %s" % how)
            self.compare_bytes(read_seq(path, MIB), bytes(data), "%s at its next open once sealed again" % rel)
        self.model[rel] = bytes(data)
        print("kept pages checked", flush=True)

    def tier_goes_away(self):
        rel = BIG
        path = self.p(rel)
        data = self.model[rel]
        rc, out, err = tc.tierctl(self.fs, "migrate", "--to", "1", path)
        if not self.res.check(rc == 0, "tierctl migrate --to 1 %s: exit %d: %s" % (rel, rc, err.strip())):
            return
        saved = {}
        for d, _, names in os.walk(tc.containers_dir(self.fs, "capacity")):
            for name in names:
                with open(os.path.join(d, name), "rb") as f:
                    saved[os.path.join(d, name)] = f.read()
        offset = dc.log_size(self.fs)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        state = {"eio": 0, "wrong": [], "short": [], "other": None, "exact": 0}

        def read_on():
            at = 0
            while at < len(data):
                if at == 2 * MIB:
                    # The reader is two blocks in, the workers ahead of it: the tier loses its bytes.
                    for name in saved:
                        os.truncate(name, 0)
                try:
                    b = os.pread(fd, MIB, at)
                except OSError as e:
                    if e.errno == errno.EIO:
                        state["eio"] += 1
                    else:
                        state["other"] = e
                        return
                    at += MIB
                    continue
                want = expect_slice(data, at, MIB)
                if b == want:
                    state["exact"] += 1
                elif b and want.startswith(b):
                    # A request split in two, the second failing: a short read, then EIO.  Wrong bytes are not fine.
                    state["short"].append((at, len(b)))
                else:
                    diff = next((i for i in range(min(len(b), len(want))) if b[i] != want[i]), min(len(b), len(want)))
                    state["wrong"].append("at %d: %d bytes, first wrong at +%d%s"
                                          % (at, len(b), diff, " (zeros)" if not b.strip(b"\0") else ""))
                at += MIB

        try:
            within_deadline(self.res, self.fs, "reads while the capacity tier is gone", read_on)
        finally:
            os.close(fd)
            for name, b in saved.items():
                with open(name, "r+b") as f:
                    f.write(b)
        self.res.check(state["other"] is None, "reads while the tier is gone: %s, not EIO" % state["other"])
        self.res.check(not state["wrong"], "reads while the tier is gone: wrong bytes returned: %s"
                       % "; ".join(state["wrong"]))
        self.res.check(state["eio"] > 0, "reads while the tier is gone: none failed (%d exact)" % state["exact"])
        self.res.check(dc.DAMAGE_RE.search(dc.log_since(self.fs, offset)) is not None,
                       "the daemon did not log the failed reads")
        drop_cache(path)
        got = within_deadline(self.res, self.fs, "a read once the tier is back", lambda: read_seq(path, MIB, direct=True))
        self.compare_bytes(got, data, "%s once the capacity tier has its bytes back" % rel)
        print("a tier going away checked: %d reads exact, %d short (%s), %d EIO"
              % (state["exact"], len(state["short"]), state["short"], state["eio"]), flush=True)

    def sigkill_while_reading(self):
        script = ("import os, sys\n"
                  "path, size = sys.argv[1], int(sys.argv[2])\n"
                  "want = open(sys.argv[3], 'rb').read()\n"
                  "fd = os.open(path, os.O_RDONLY | os.O_DIRECT)\n"
                  "print('open', flush=True)\n"
                  "for rnd in range(1000):\n"
                  "    at = 0\n"
                  "    while at < size:\n"
                  "        try:\n"
                  "            b = os.pread(fd, 1 << 20, at)\n"
                  "        except OSError:\n"
                  "            sys.exit(0)\n"
                  # A short read is fine (a request split in two, the second failing): wrong bytes are not.
                  "        if b != want[at:at + len(b)] or (not b and at < size):\n"
                  "            print('WRONG at', at, flush=True)\n"
                  "            sys.exit(2)\n"
                  "        at += len(b) or size\n")
        readers = []
        for k, rel in enumerate((BIG, "ORCL/backupset/2026_12_01/o1_mf_nnndf_TAG2_even_.bkp", BIG)):
            ref = os.path.join(self.fs.base, "reference-%d" % k)
            with open(ref, "wb") as f:
                f.write(self.model[rel])
            readers.append(subprocess.Popen([sys.executable, "-c", script, self.p(rel), str(len(self.model[rel])), ref],
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        for r in readers:
            r.stdout.readline()  # "open": reading from now on
        # A sanitizer's report is only an exit status at exit, and this daemon never exits: read its log.
        found = SANITIZER.search(dc.log_since(self.fs, 0))
        self.res.check(found is None, "the daemon killed while reading reported: %s"
                       % dc.log_since(self.fs, max(0, found.start() - 200))[:3000] if found else "")
        self.fs.kill()
        for r in readers:
            try:
                out, _ = r.communicate(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                r.kill()
                out, _ = r.communicate()
                self.res.check(False, "a reader did not end after the daemon was killed")
                continue
            self.res.check(r.returncode == 0, "a reader killed with the daemon: exit %d: %s" % (r.returncode, out.strip()))
        self.fs.start()
        for rel in FILES:
            self.res.check(dc.state(self.p(rel))[0] == "sealed", "%s is not sealed after the restart" % rel)
            drop_cache(self.p(rel))
            self.compare_bytes(read_seq(self.p(rel), MIB), self.model[rel], "%s after SIGKILL and remount" % rel)
        print("SIGKILL while reading checked", flush=True)


def queued(fs):
    """The files status counts as waiting to be sealed, None if it cannot say."""
    rc, out, _ = tc.tierctl(fs, "status", "--json")
    try:
        return json.loads(out).get("seal_queue") if rc == 0 else None
    except ValueError:
        return None


def seal_backlog(res):
    """Files waiting for their quiet time: counted in status with their sizes, also after a restart."""
    sizes = {"ORCL/archivelog/2026_12_02/o1_mf_1_%d_wait_.arc" % k: (k + 1) * MIB + 17 * k for k in range(3)}
    content = dc.Content(7)
    with harness.Fratier(options=["seal_delay=3600", "gc_interval=3600"]) as fs:
        for rel, size in sizes.items():
            path = os.path.join(fs.mnt, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            dc.write_file(path, content.make(size), fsync=True)
        for when in ("after the writes", "after a restart"):
            # A close returns before the daemon has the file's release (FUSE sends it on its own): wait for the last.
            harness.wait_for(lambda: queued(fs) == len(sizes))
            st = tc.tierctl_json(res, fs, "status")
            res.check(st.get("seal_queue") == len(sizes) and st.get("seal_queue_bytes") == sum(sizes.values()),
                      "status %s: seal_queue %r, seal_queue_bytes %r; want %d files, %d bytes"
                      % (when, st.get("seal_queue"), st.get("seal_queue_bytes"), len(sizes), sum(sizes.values())))
            res.check(st.get("seal_behind") == 0, "status %s: seal_behind %r with nothing due" % (when, st.get("seal_behind")))
            rc, out, err = tc.tierctl(fs, "metrics")
            res.check(rc == 0 and ("fratier_seal_backlog_bytes %d\n" % sum(sizes.values())) in out,
                      "tierctl metrics %s: no fratier_seal_backlog_bytes %d: exit %d %s"
                      % (when, sum(sizes.values()), rc, err.strip()))
            if when == "after the writes":
                fs.kill()
                fs.start()
    print("seal backlog checked", flush=True)


def main():
    harness.require_fuse()
    res = harness.Results("e2e-readahead")
    seal_backlog(res)
    with harness.Fratier(options=OPTIONS) as fs:
        t = ReadaheadTest(res, fs)
        t.kernel_window()
        t.write_and_seal()
        t.sequential()
        t.random_reads()
        t.past_eof()
        t.concurrent()
        t.rewritten_while_read_ahead()
        t.kept_pages_never_stale()
        t.tier_goes_away()
        t.sigkill_while_reading()
    res.finish()


if __name__ == "__main__":
    main()
