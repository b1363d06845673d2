#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Deduplication through the mount, end to end.

Oracle-like FRA content from oragen (archived logs, RMAN backup pieces, image
copies), an "other" file and passthrough files (online redo, control file)
are copied in with 1 MiB writes (Python, dd and cp).  Then:

- every file of a sealed class reports "sealed CLASS" with the class its name
  implies, passthrough files stay "raw passthrough", and sealed files have no
  staging file left on the hot tier;
- dedup works: a second day's full backup (~5% of the blocks changed) adds
  less than a fifth of its size to the containers, and so do the day's
  archived-log backup piece (the logs are already stored) and image copy;
- every byte reads back exactly, whole and at seeded random offsets and
  lengths, also after a remount;
- a file read in a loop while it is being sealed: every read exact;
- a file held open by a reader when its writer closes is sealed once the
  reader lets go;
- overwrite in the middle, truncate (by descriptor, by path, O_TRUNC),
  append: exact content, raw meanwhile, sealed again afterwards;
- hard links and renames of sealed files; sparse files and zero runs (a
  file that is mostly hole, or empty, may stay raw);
- deleting everything lets the collector empty the containers and the
  catalog's chunk table.

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_ORAGEN), FRATIER_DEDUP_SEED,
FRATIER_SEAL_TIMEOUT / FRATIER_GC_TIMEOUT (seconds before "stuck"),
FRATIER_KEEP (keep the data directory).
"""

import ctypes
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import harness
import dedupcommon as dc

SEED = int(os.environ.get("FRATIER_DEDUP_SEED", "1"))
DAY_PREFIX = "2026_12_0"
BIG_SIZE = 64 << 20
RANDOM_READS_PER_FILE = 16
# A day's backup of mostly unchanged data must add less than this part of its size.
DEDUP_MAX_FRACTION = 1 / 5

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


def expected_class(rel):
    """The class the naming rules in fs/classify.c give a file, or None for passthrough."""
    parts = rel.split("/")
    parent, name = parts[-2] if len(parts) > 1 else "", parts[-1]
    if parent in ("onlinelog", "controlfile", "flashback") or name.endswith((".ctl", ".flb", ".rdo")):
        return None
    if name.endswith(".arc") or parent == "archivelog":
        return "archivelog"
    if name.startswith("o1_mf_annnn_"):
        return "archivelogbackup"
    if name.endswith((".bkp", ".bck")) or parent in ("backupset", "autobackup"):
        return "backuppiece"
    if parent == "datafile" or name.endswith((".dbf", ".cpy")):
        return "imagecopy"
    return "other"


class DedupTest:
    def __init__(self, res, fs, src, manifest):
        self.res = res
        self.fs = fs
        self.src = src
        self.manifest = manifest
        self.rng = random.Random(SEED)
        self.content = dc.Content(SEED)
        self.model = {}   # mount-relative path -> expected bytes
        self.klass = {}   # mount-relative path -> expected class (None: passthrough)
        self.may_stay_raw = set()  # files of a sealed class the daemon may leave raw
        self.copies = 0

    def p(self, rel):
        return self.fs.path(rel)

    # -- putting files in ---------------------------------------------------

    def copy_in(self, rel):
        """Copies a generated file into the mount, alternating dd, cp and 1 MiB write(2)s."""
        src = os.path.join(self.src, rel)
        dst = self.p(rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        how = self.copies % 3
        self.copies += 1
        if how == 0:
            dc.write_file(dst, dc.read_all(src))
        else:
            cmd = ["dd", "if=" + src, "of=" + dst, "bs=1M", "status=none"] if how == 1 else ["cp", src, dst]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            self.res.check(p.returncode == 0, "%s failed: %s" % (" ".join(cmd), p.stdout.strip()))
        self.model[rel] = dc.read_all(src)
        self.klass[rel] = expected_class(rel)

    def put(self, rel, data):
        os.makedirs(os.path.dirname(self.p(rel)), exist_ok=True)
        dc.write_file(self.p(rel), data)
        self.model[rel] = data
        self.klass[rel] = expected_class(rel)

    def sealed_rels(self):
        return [r for r in self.model if self.klass[r] is not None]

    # -- checks ---------------------------------------------------------------

    def check_states(self, rels, what):
        """Sealed-class files become "sealed CLASS"; then passthrough ones must
        still be "raw passthrough", and those that may stay raw either."""
        sealed = [r for r in rels if self.klass[r] is not None and r not in self.may_stay_raw]
        ok = dc.check_sealed(self.res, [self.p(r) for r in sealed], what)
        for r in sealed:
            st = dc.state(self.p(r))
            ok &= self.res.check(st == ("sealed", self.klass[r]),
                                 "%s: %s is %s, expected sealed %s" % (what, r, " ".join(st), self.klass[r]))
        for r in rels:
            if self.klass[r] is None:
                st = dc.state(self.p(r))
                ok &= self.res.check(st == ("raw", "passthrough"),
                                     "%s: passthrough %s is %s, expected raw passthrough" % (what, r, " ".join(st)))
            elif r in self.may_stay_raw:
                st = dc.state(self.p(r))
                ok &= self.res.check(st[0] in ("raw", "sealed") and st[1] == self.klass[r],
                                     "%s: %s is %s, expected raw or sealed %s" % (what, r, " ".join(st), self.klass[r]))
        return ok

    def compare_all(self, what):
        bad = 0
        for r in sorted(self.model):
            if not dc.compare(self.res, self.p(r), self.model[r], what):
                bad += 1
        print("%s: %d files compared, %d differ" % (what, len(self.model), bad), flush=True)

    def random_reads(self, what):
        n = 0
        for r in sorted(self.model):
            data = self.model[r]
            fd = os.open(self.p(r), os.O_RDONLY)
            try:
                for _ in range(RANDOM_READS_PER_FILE):
                    off = self.rng.randrange(0, len(data) + 4096)
                    length = self.rng.choice([1, 511, 4096, 65536 + 13, 200000, self.rng.randrange(1, 1 << 20)])
                    try:
                        got = os.pread(fd, length, off)
                    except OSError as e:
                        self.res.check(False, "%s: pread(%s, %d, %d) failed: %s" % (what, r, length, off, e))
                        continue
                    self.res.check(got == data[off:off + length],
                                   "%s: pread(%s, %d, %d) returned wrong bytes (%d bytes, expected %d)"
                                   % (what, r, length, off, len(got), len(data[off:off + length])))
                    n += 1
            finally:
                os.close(fd)
        print("%s: %d random reads" % (what, n), flush=True)

    def check_staging(self, what):
        """No staging file for a sealed file, under its inode's name or a retired one (fs_staging_retire(): the
        reaper thread deletes it after the seal); a passthrough file keeps its own."""
        harness.wait_for(lambda: not any("." in n for n in dc.staging_names(self.fs)), dc.SEAL_TIMEOUT)
        names = dc.staging_names(self.fs)
        retired = sorted(v for n, v in names.items() if "." in n)
        self.res.check(not retired, "%s: retired staging files never deleted: %s" % (what, ", ".join(retired[:20])))
        left = []
        for r in sorted(self.model):
            name = dc.staging_name(os.stat(self.p(r)).st_ino)
            if self.klass[r] is None:
                self.res.check(name in names, "%s: passthrough %s has no staging file %s" % (what, r, name))
            elif name in names and (r not in self.may_stay_raw or dc.state(self.p(r))[0] == "sealed"):
                left.append("%s (%s)" % (r, names[name]))
        self.res.check(not left, "%s: files that should be sealed still have staging files: %s" % (what, ", ".join(left)))
        print("%s: %d staging files on the hot tier, %d of sealed files" % (what, len(names), len(left)), flush=True)

    def added_by(self, rels, what):
        """Copies rels in, waits for them to be sealed, returns what they added to the containers."""
        before = dc.stored_bytes(self.fs)
        for r in rels:
            self.copy_in(r)
        self.check_states(rels, what)
        return dc.stored_bytes(self.fs) - before

    def check_dedup(self, rel, added, why):
        size = len(self.model[rel])
        print("dedup: %s (%s): %d bytes added %d to the containers (%.1f%%)"
              % (rel, why, size, added, 100.0 * added / size), flush=True)
        self.res.check(added < size * DEDUP_MAX_FRACTION,
                       "dedup: %s (%s) added %d bytes to the containers, not less than %d (1/5 of its %d bytes)"
                       % (rel, why, added, int(size * DEDUP_MAX_FRACTION), size))
        blocks = os.stat(self.p(rel)).st_blocks * 512
        self.res.check(blocks < size * DEDUP_MAX_FRACTION,
                       "dedup: %s has st_blocks %d (%d bytes) for %d bytes although it mostly dedups"
                       % (rel, blocks // 512, blocks, size))

    # -- phases ---------------------------------------------------------------

    def load(self):
        files = self.manifest["files"]
        day = {d: [f["path"] for f in files if f["day"] == d] for d in (1, 2, 3)}
        self.res.check(len(day[1]) >= 6 and len(day[2]) >= 6, "oragen wrote fewer files than expected")

        # Day 1, an "other" file and passthrough files.
        for r in day[1]:
            self.copy_in(r)
        self.put("ORCL/scripts/nightly_report.txt", self.content.make(700 << 10, shared=0.2, text=0.6))
        self.put("ORCL/onlinelog/o1_mf_1_kx3m4n5p_.log", self.content.make(1 << 20))
        self.put("ORCL/controlfile/o1_mf_ab12cd34_.ctl", self.content.make(512 << 10))
        classes = sorted(set(str(self.klass[r]) for r in self.model))
        self.res.check(classes == ["None", "archivelog", "archivelogbackup", "backuppiece", "imagecopy", "other"],
                       "the test files do not cover every class: %s" % classes)
        self.check_states(list(self.model), "day 1")

        # Day 2, piece by piece, each measured against what is stored already.
        full = [r for r in day[2] if "_nnndf_" in r]
        logs = [r for r in day[2] if r.endswith(".arc")]
        arch = [r for r in day[2] if "_annnn_" in r]
        copies = [r for r in day[2] if r.endswith(".dbf")]
        self.res.check(len(full) == 1 and len(arch) == 1 and len(copies) == 1 and logs,
                       "oragen's day 2 is not one full backup piece, one archivelog piece, one image copy and logs")
        self.check_dedup(full[0], self.added_by(full, "day 2 full backup"), "second full backup, ~5% changed")
        self.added_by(logs, "day 2 archived logs")
        self.check_dedup(arch[0], self.added_by(arch, "day 2 archivelog backup"), "the day's logs, stored already")
        self.check_dedup(copies[0], self.added_by(copies, "day 2 image copy"), "second image copy, ~5% changed")

        # Day 3 all at once.
        self.added_by(day[3], "day 3")

        logical = sum(len(self.model[r]) for r in self.sealed_rels())
        stored = dc.stored_bytes(self.fs)
        print("stored: %d logical bytes in sealed files, %d bytes in containers (%.2fx)"
              % (logical, stored, logical / max(stored, 1)), flush=True)
        self.res.check(stored < logical / 2, "3 days of FRA data take %d bytes in containers for %d logical bytes"
                       % (stored, logical))
        # st_blocks of a sealed file is what its sealing added: together, the
        # live chunks' bytes in the containers (only if all of them did get
        # sealed).  Not the containers' size: two files sealed at once may
        # both store a new chunk, and the copy the catalog did not take is
        # garbage until compaction, charged to neither file.
        sealed = [r for r in self.sealed_rels() if dc.state(self.p(r))[0] == "sealed"]
        if len(sealed) == len(self.sealed_rels()):
            blocks = sum(os.stat(self.p(r)).st_blocks * 512 for r in sealed)
            _, apparent, _ = dc.tree_usage(dc.containers_dir(self.fs))
            live = [t for t in dc.status(self.fs)["tiers"] if t["tier"] == 0][0]["live"]
            self.res.check(0.8 * live <= blocks <= min(live, apparent) + 512 * len(sealed),
                           "st_blocks of the sealed files add up to %d bytes, the containers hold %d, "
                           "%d of them live" % (blocks, apparent, live))

    def read_while_sealing(self):
        """A reader loops over a 64 MiB file from its close until well after it is sealed."""
        rel = "big/large.dat"
        data = self.content.make(BIG_SIZE, shared=0.1, zeros=0.05, text=0.3)
        self.put(rel, data)
        path = self.p(rel)
        stats = {"reads": 0, "passes": 0, "spanning": 0, "sealed_passes": 0, "bad": 0}
        rng = random.Random(SEED + 1)

        def one_pass(fd):
            off = 0
            while off < len(data):
                # Sequential 1 MiB reads with random small reads mixed in.
                if rng.random() < 0.3:
                    o, n = rng.randrange(len(data)), rng.randrange(1, 300000)
                else:
                    o, n = off, dc.BLOCK
                    off += dc.BLOCK
                try:
                    got = os.pread(fd, n, o)
                except OSError as e:
                    got = e
                stats["reads"] += 1
                if isinstance(got, OSError) or got != data[o:o + n]:
                    stats["bad"] += 1
                    if stats["bad"] <= 5:
                        self.res.check(False, "read while sealing: pread(%d, %d) gave %s (state %s)"
                                       % (n, o, got if isinstance(got, OSError) else "wrong bytes",
                                          " ".join(dc.state(path))))

        def reader():
            deadline = time.monotonic() + dc.SEAL_TIMEOUT
            while time.monotonic() < deadline:
                before = dc.state(path)
                # Every other pass with O_DIRECT: each read reaches the daemon, not the page cache.
                fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if stats["passes"] % 2 else 0))
                try:
                    one_pass(fd)
                finally:
                    os.close(fd)
                after = dc.state(path)
                # Closed for a moment between passes: a file open all the
                # time is one still in use, which the sealer may leave alone.
                time.sleep(0.05)
                stats["passes"] += 1
                if before[0] == "raw" and after[0] == "sealed":
                    stats["spanning"] += 1
                if before[0] == "sealed":
                    stats["sealed_passes"] += 1
                    if stats["sealed_passes"] >= 2:
                        return

        t = threading.Thread(target=reader)
        t.start()
        t.join()
        print("read while sealing: %d passes (%d began raw and ended sealed, %d sealed), %d reads, %d wrong"
              % (stats["passes"], stats["spanning"], stats["sealed_passes"], stats["reads"], stats["bad"]),
              flush=True)
        self.res.check(stats["bad"] == 0, "read while sealing: %d reads gave wrong bytes or errors" % stats["bad"])
        self.res.check(stats["sealed_passes"] >= 2,
                       "read while sealing: %s was not sealed within %ds while read in a loop (state %s)"
                       % (rel, dc.SEAL_TIMEOUT, " ".join(dc.state(path))))

    def held_open_by_reader(self):
        """The writer closes while a reader still has the file open: sealed after the reader closes."""
        rel = "misc/held_open.dat"
        data = self.content.make(3 << 20)
        os.makedirs(self.p("misc"), exist_ok=True)
        w = os.open(self.p(rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(w, data)
        r = os.open(self.p(rel), os.O_RDONLY)
        os.close(w)
        time.sleep(1.0)  # lets the sealer come by while the reader holds the file (not an assertion)
        got = os.pread(r, len(data) + 1, 0)
        os.close(r)
        self.model[rel] = data
        self.klass[rel] = expected_class(rel)
        self.res.check(got == data, "held open: reader got wrong bytes")
        dc.check_sealed(self.res, [self.p(rel)], "file open for reading when its writer closed, reader closed since")

    def modify(self):
        """Changes to sealed files: raw meanwhile, sealed again after the close, exact.

        Nothing reads a file between its change and its sealing (a reader
        holding a file is held_open_by_reader()'s business); the whole-file
        reads come once everything is sealed again.
        """
        files = self.manifest["files"]

        def first(pred):
            return next(f["path"] for f in files if pred(f))

        touched = []

        def expect_raw(rel, what):
            st = dc.state(self.p(rel))
            self.res.check(st[0] == "raw", "%s: %s is %s, expected raw" % (what, rel, " ".join(st)))

        # Overwrite in the middle of a backup piece and of an image copy (as
        # RMAN's RECOVER COPY does to image copies).
        for rel in (first(lambda f: f["day"] == 1 and "_nnndf_" in f["path"]),
                    first(lambda f: f["day"] == 1 and f["path"].endswith(".dbf"))):
            data = bytearray(self.model[rel])
            off = len(data) // 2 + 123
            patch = self.rng.randbytes(8192 + 7)
            fd = os.open(self.p(rel), os.O_WRONLY)
            try:
                self.res.check(os.pwrite(fd, patch, off) == len(patch), "overwrite: short pwrite")
                data[off:off + len(patch)] = patch
                self.model[rel] = bytes(data)
                expect_raw(rel, "overwrite in the middle, still open")
            finally:
                os.close(fd)
            touched.append(rel)

        logs = [f["path"] for f in files if f["path"].endswith(".arc")]
        # ftruncate through a descriptor to a smaller size.
        rel = logs[0]
        n = len(self.model[rel]) * 2 // 3 + 17
        fd = os.open(self.p(rel), os.O_WRONLY)
        try:
            os.ftruncate(fd, n)
            self.model[rel] = self.model[rel][:n]
            expect_raw(rel, "ftruncate, still open")
        finally:
            os.close(fd)
        touched.append(rel)

        # truncate(2) by path: no descriptor, so it is the read that follows
        # whose close makes the file due for sealing again.
        rel = logs[1]
        n = len(self.model[rel]) // 2
        os.truncate(self.p(rel), n)
        self.model[rel] = self.model[rel][:n]
        expect_raw(rel, "truncate by path")
        dc.compare(self.res, self.p(rel), self.model[rel], "truncate by path to %d" % n)
        touched.append(rel)

        # O_TRUNC and nothing written: empty.
        rel = logs[2]
        os.close(os.open(self.p(rel), os.O_WRONLY | os.O_TRUNC))
        self.model[rel] = b""
        touched.append(rel)

        # O_TRUNC and new content, as a file written again from scratch.
        rel = logs[3]
        data = self.content.make(300 << 10)
        dc.write_file(self.p(rel), data)
        self.model[rel] = data
        touched.append(rel)

        # Append.
        rel = first(lambda f: f["day"] == 3 and "_annnn_" in f["path"])
        extra = self.content.make(300 << 10)
        fd = os.open(self.p(rel), os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, extra[:100000])
            expect_raw(rel, "append, still open")
            os.write(fd, extra[100000:])
        finally:
            os.close(fd)
        self.model[rel] += extra
        touched.append(rel)

        self.check_states(touched, "sealed again after a change")
        for rel in touched:
            dc.compare(self.res, self.p(rel), self.model[rel], "changed, sealed again")

    def links_and_renames(self):
        files = self.manifest["files"]
        a = next(f["path"] for f in files if f["day"] == 1 and "_annnn_" in f["path"])
        os.makedirs(self.p("links"), exist_ok=True)
        hard = "links/annnn.hard"
        os.link(self.p(a), self.p(hard))
        sa, sh = os.stat(self.p(a)), os.stat(self.p(hard))
        self.res.check(sa.st_ino == sh.st_ino and sh.st_nlink == 2, "link: not the same inode or nlink %d" % sh.st_nlink)
        self.res.check(dc.state(self.p(hard)) == ("sealed", "archivelogbackup"), "link: state via the new name %s"
                       % " ".join(dc.state(self.p(hard))))
        self.model[hard], self.klass[hard] = self.model[a], self.klass[a]
        dc.compare(self.res, self.p(hard), self.model[hard], "hard link")
        os.unlink(self.p(a))
        del self.model[a], self.klass[a]
        dc.compare(self.res, self.p(hard), self.model[hard], "hard link after unlinking the first name")

        moved = "ORCL/backupset/moved_annnn.bkp"
        os.rename(self.p(hard), self.p(moved))
        self.model[moved], self.klass[moved] = self.model.pop(hard), self.klass.pop(hard)
        self.res.check(dc.state(self.p(moved)) == ("sealed", "archivelogbackup"), "rename: state %s"
                       % " ".join(dc.state(self.p(moved))))
        dc.compare(self.res, self.p(moved), self.model[moved], "renamed")

        # Rename one sealed file over another.
        logs = [f["path"] for f in files if f["day"] == 2 and f["path"].endswith(".arc")]
        src, dst = logs[-1], logs[-2]
        os.rename(self.p(src), self.p(dst))
        self.model[dst] = self.model.pop(src)
        self.klass.pop(src)
        self.res.check(not os.path.exists(self.p(src)), "rename over: source still there")
        dc.compare(self.res, self.p(dst), self.model[dst], "renamed over another sealed file")

    def sparse_file(self, rel, size, extents):
        """Creates rel with data only at extents [(offset, bytes)] and holes elsewhere, up to size."""
        fd = os.open(self.p(rel), os.O_WRONLY | os.O_CREAT, 0o644)
        exp = bytearray(size)
        try:
            for off, data in extents:
                os.pwrite(fd, data, off)
                exp[off:off + len(data)] = data
            os.ftruncate(fd, size)
        finally:
            os.close(fd)
        self.model[rel] = bytes(exp)
        self.klass[rel] = expected_class(rel)

    def holes(self):
        """Holes and zero runs round-trip; sealed unless mostly hole."""
        d = "sparse/"
        os.makedirs(self.p(d))
        # Data, hole, data, trailing hole: mostly data, so it gets sealed.
        self.sparse_file(d + "holes.dat", 8 << 20, [(0, self.content.make(3 << 20)),
                                                   (5 << 20, self.content.make(2 << 20))])
        # Zeros written out.
        dc.write_file(self.p(d + "zeros.dat"), bytes(8 << 20))
        self.model[d + "zeros.dat"] = bytes(8 << 20)
        # A preallocated zero run (fallocate past the end), then data after it.
        a, b = self.content.make(1 << 20), self.content.make(1 << 20)
        fd = os.open(self.p(d + "prealloc.dat"), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, a)
        if libc.fallocate(fd, 0, len(a), 3 << 20) != 0:
            self.res.check(False, "fallocate past the end failed: %s" % os.strerror(ctypes.get_errno()))
        os.pwrite(fd, b, len(a) + (3 << 20))
        os.close(fd)
        self.model[d + "prealloc.dat"] = a + bytes(3 << 20) + b
        sealed = [d + "holes.dat", d + "zeros.dat", d + "prealloc.dat"]
        for r in sealed:
            self.klass[r] = expected_class(r)

        # Mostly or only hole, and empty: they cost (nearly) nothing raw, so
        # the daemon may leave them raw; either way they read back exactly.
        self.sparse_file(d + "mostly_hole.dat", 12 << 20, [(0, self.rng.randbytes(100000)),
                                                          (5 << 20, self.rng.randbytes(100000))])
        self.sparse_file(d + "hole_only.dat", 16 << 20, [])
        self.sparse_file(d + "empty.dat", 0, [])
        self.may_stay_raw |= {d + "mostly_hole.dat", d + "hole_only.dat", d + "empty.dat"}

        self.check_states(sealed + sorted(self.may_stay_raw), "sparse files")
        for r in sealed + sorted(self.may_stay_raw):
            dc.compare(self.res, self.p(r), self.model[r], "sparse file")
        z = os.stat(self.p(d + "zeros.dat")).st_blocks * 512
        self.res.check(z < (1 << 20), "8 MiB of zeros take %d bytes once sealed" % z)

    def delete_everything(self):
        for root, dirs, files in os.walk(self.fs.mnt, topdown=False):
            for n in files:
                os.unlink(os.path.join(root, n))
            for n in dirs:
                os.rmdir(os.path.join(root, n))
        self.model.clear()
        self.klass.clear()
        self.may_stay_raw.clear()
        files, big = dc.wait_containers_empty(self.fs)
        print("after deleting everything: %d container files, %d bytes"
              % (len(files), sum(max(a, b) for _, a, b in files)), flush=True)
        self.res.check(not big, "containers still hold data %ds after everything was deleted: %s"
                       % (dc.GC_TIMEOUT, ", ".join("%s (%d bytes)" % (os.path.relpath(p, self.fs.data), a)
                                                   for p, a, _ in big)))
        self.fs.stop()
        for table in ("chunks", "recipes"):
            n = dc.sqlite_count(self.fs, table)
            self.res.check(n == 0, "catalog still has %d rows in %s after everything was deleted and collected"
                           % (n, table))

    def remount(self, what):
        self.fs.stop()
        self.fs.start()
        self.check_states(list(self.model), what)
        self.compare_all(what)

    def run(self):
        self.load()
        self.compare_all("after sealing")
        self.check_staging("after sealing")
        self.random_reads("after sealing")
        self.remount("after a remount")
        self.random_reads("after a remount")

        self.held_open_by_reader()
        self.read_while_sealing()
        self.modify()
        self.links_and_renames()
        self.holes()
        self.compare_all("after changes")
        self.check_staging("after changes")
        self.remount("after changes and a remount")
        self.random_reads("after changes and a remount")
        self.check_staging("after changes and a remount")
        self.delete_everything()


def main():
    harness.require_fuse()
    res = harness.Results("e2e-dedup")
    tmp = tempfile.mkdtemp(prefix="fratier-dedup-src-", dir=os.environ.get("FRATIER_TMP"))
    fs = None
    try:
        src = os.path.join(tmp, "fra")
        cmd = [dc.oragen_path(), "--out", src, "--datafile-size", "2M", "--archivelog-size", "256K",
               "--start-date", "2026-12-01", "--days", "3", "--seed", str(SEED), "--no-zstd", "-q"]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if not res.check(p.returncode == 0, "%s failed: %s" % (" ".join(cmd), p.stdout.strip())):
            res.finish()
        with open(os.path.join(src, "manifest.json")) as f:
            manifest = json.load(f)
        # Background never held back: read_while_sealing's reader keeps the
        # foreground busy from the close until the seal, and what it checks is
        # the switch under readers, not how slowly a seal yields to them
        # (e2e-throttle does; under a sanitizer the yielding seal outlasts
        # the seal timeout).
        with harness.Fratier(options=dc.OPTIONS + ["background_share=100"]) as fs:
            DedupTest(res, fs, src, manifest).run()
            if res.failed:
                sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
