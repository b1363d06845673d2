#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Seals by two writers at once (a class's split_size), through the mount.

The config cuts backup pieces and image copies every 1 MiB and other files
every 2 MiB (archived logs never), so that files of a few MiB are split.

- Files of every class written by dd, cp and a Python writer, without
  streams (seal_stream=0, so that what is left to seal is the whole file):
  `tierctl status` counts a split seal for each file with at least twice
  its class's split_size, none for the others; all read back byte-exact,
  before and after a remount.
- Determinism: the same bytes written again under another name, this time
  with streams on (part of the file chunked while written, so the two
  writers meet at another cut), make the same recipe, segment for segment
  (the catalog read after a clean unmount): every chunk the second file
  names is the first one's.
- SIGKILL of the daemon while a split seal runs (a `fratier-part` thread
  alive: the second writer), in several rounds: after the remount every
  fsynced file is byte-exact, raw or sealed, then sealed (split again) and
  byte-exact.
- At the end everything is deleted: the collector leaves the containers
  empty and the catalog holds no chunk and no recipe, so what the killed
  seals' parts stored was all garbage.

env: FRATIER_SPLIT_CRASH_ROUNDS (default 3), FRATIER_SEAL_TIMEOUT,
FRATIER_GC_TIMEOUT, FRATIER_KEEP.
"""

import os
import random
import subprocess
import tempfile
import time

import harness
import dedupcommon as dc

MiB = 1 << 20
ROUNDS = int(os.environ.get("FRATIER_SPLIT_CRASH_ROUNDS", "3"))
SPLIT = {"backuppiece": 1 * MiB, "imagecopy": 1 * MiB, "other": 2 * MiB, "archivelog": 0}
FILES = {  # mount-relative directory and name pattern, per class
    "archivelog": ("ORCL/archivelog/2026_12_03", "o1_mf_1_%d_abc.arc"),
    "backuppiece": ("ORCL/backupset/2026_12_03", "o1_mf_nnndf_TAG%d_x.bkp"),
    "imagecopy": ("ORCL/datafile", "o1_mf_users_%d_x.dbf"),
    "other": ("misc", "file%d.dat"),
}


def config(data):
    lines = ["[fratier]", "data_dir = %s" % data, "[tier hot]"]
    for cls, size in SPLIT.items():
        lines += ["[class %s]" % cls, "split_size = %d" % size]
    return "\n".join(lines) + "\n"


class SplitTest:
    def __init__(self, res):
        self.res = res
        self.rng = random.Random(11)
        self.content = dc.Content(11)
        self.base = tempfile.mkdtemp(prefix="fratier-split-", dir=os.environ.get("FRATIER_TMP"))
        data = os.path.join(self.base, "data")
        os.makedirs(os.path.join(data, "hot"))
        self.conf = os.path.join(self.base, "fratier.conf")
        with open(self.conf, "w") as f:
            f.write(config(data))
        self.fs = harness.Fratier(base=self.base, config=self.conf, data=data,
                                  options=["seal_delay=0", "gc_interval=3600", "seal_stream=0"])
        self.src = os.path.join(self.base, "src")
        os.makedirs(self.src)
        self.model = {}  # mount-relative path -> bytes
        self.n = 0

    def p(self, rel):
        return self.fs.path(rel)

    def remount(self, options):
        self.fs.stop()
        self.fs.options = list(options) + ["policy=0"]
        self.fs.start()

    def name(self, cls):
        d, pattern = FILES[cls]
        os.makedirs(self.p(d), exist_ok=True)
        self.n += 1
        return os.path.join(d, pattern % self.n)

    def source(self, data):
        path = os.path.join(self.src, "f%d" % self.n)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def write(self, cls, size, tool):
        rel = self.name(cls)
        data = self.content.make(size, rng=random.Random(self.rng.random()))
        if tool == "dd":
            subprocess.run(["dd", "if=" + self.source(data), "of=" + self.p(rel), "bs=1M", "conv=fsync",
                            "status=none"], check=True)
        elif tool == "cp":
            subprocess.run(["cp", self.source(data), self.p(rel)], check=True)
        else:
            dc.write_file(self.p(rel), data, fsync=True)
        self.model[rel] = data
        return rel, data

    def check_all(self, what):
        dc.check_sealed(self.res, [self.p(r) for r in self.model], what)
        for rel, data in sorted(self.model.items()):
            dc.compare(self.res, self.p(rel), data, what)

    # --- split seals counted, read back ---------------------------------------

    def classes(self):
        before = dc.status(self.fs)
        want = 0
        for cls, size, tool in [("backuppiece", 9 * MiB + 4321, "dd"), ("imagecopy", 8 * MiB, "cp"),
                                ("other", 7 * MiB + 5, "python"), ("other", 3 * MiB, "dd"),
                                ("archivelog", 9 * MiB, "cp"), ("backuppiece", 1 * MiB + 77, "python")]:
            self.write(cls, size, tool)
            want += SPLIT[cls] > 0 and size >= 2 * SPLIT[cls]
        self.check_all("written")
        after = dc.status(self.fs)
        split = after["seals_split"] - before["seals_split"]
        print("split seals: %d of %d files (%d expected)" % (split, len(self.model), want), flush=True)
        self.res.check(split == want, "%d seals split, expected %d" % (split, want))
        self.remount(["seal_delay=0", "gc_interval=3600", "seal_stream=0"])
        self.check_all("after a remount")

    # --- the same recipe, split elsewhere ---------------------------------------

    def recipe(self, ino):
        return dc.sqlite_rows(self.fs, "SELECT offset, hex(segment) FROM recipes WHERE ino = %d ORDER BY offset"
                              % ino)

    def determinism(self):
        rel, data = self.write("backuppiece", 24 * MiB + 999, "dd")
        dc.check_sealed(self.res, [self.p(rel)], "the first copy")
        ino = os.stat(self.p(rel)).st_ino
        # Streams on: the copy is chunked while written, and its seal splits what is left elsewhere.
        self.remount(["seal_delay=0", "gc_interval=3600", "seal_stream=1"])
        before = dc.status(self.fs)
        again = self.name("backuppiece")
        fd = os.open(self.p(again), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for off in range(0, len(data), dc.BLOCK):
            os.write(fd, data[off:off + dc.BLOCK])
            if off == 8 * MiB:
                time.sleep(0.3)  # the stream chunks what was written meanwhile
        os.fsync(fd)
        os.close(fd)
        self.model[again] = data
        self.check_all("the second copy")
        after = dc.status(self.fs)
        print("second copy: %d bytes chunked while written, %d split seals"
              % (after["streamed_bytes"] - before["streamed_bytes"], after["seals_split"] - before["seals_split"]),
              flush=True)
        ino2 = os.stat(self.p(again)).st_ino
        self.fs.stop()
        a, b = self.recipe(ino), self.recipe(ino2)
        self.res.check(len(a) > 0 and a == b, "the same bytes made different recipes: %d and %d segments%s"
                       % (len(a), len(b), "" if len(a) != len(b) else ", first differing at offset %s"
                          % next((x[0] for x, y in zip(a, b) if x != y), "?")))
        self.fs.start()

    # --- SIGKILL while a split seal runs ----------------------------------------

    def part_thread(self):
        """Whether the daemon runs a seal's second writer now."""
        task = "/proc/%d/task" % self.fs.proc.pid
        for t in os.listdir(task):
            try:
                with open(os.path.join(task, t, "comm")) as f:
                    if f.read().strip() == "fratier-part":
                        return True
            except OSError:
                pass
        return False

    def crash(self):
        killed = 0
        tries = 0
        while killed < ROUNDS and tries < 4 * ROUNDS:
            tries += 1
            self.remount(["seal_delay=0", "gc_interval=1", "seal_stream=0"])
            self.check_all("before round %d" % tries)
            # The seal of a file starts as soon as it is closed: watch for its second writer from the start.
            rel = self.name("backuppiece")
            data = self.content.make(48 * MiB, rng=random.Random(self.rng.random()))
            dc.write_file(self.p(rel), data, fsync=True)
            self.model[rel] = data
            deadline = time.monotonic() + dc.SEAL_TIMEOUT
            seen = False
            while time.monotonic() < deadline and dc.state(self.p(rel))[0] != "sealed":
                if self.part_thread():
                    seen = True
                    break
                time.sleep(0.002)
            self.fs.kill()
            killed += seen
            print("round %d: killed %s" % (tries, "during a split seal" if seen else "after the seal"), flush=True)
            self.fs.start()
            for r, d in sorted(self.model.items()):
                dc.compare(self.res, self.p(r), d, "after SIGKILL (round %d)" % tries)
            self.check_all("sealed after SIGKILL (round %d)" % tries)
            if seen:
                # Counted since the mount, whose first seal (it may be done already) is that file's.
                self.res.check(dc.status(self.fs)["seals_split"] >= 1,
                               "round %d: the file killed in its seal was not sealed split after" % tries)
        self.res.check(killed >= ROUNDS, "a split seal was caught by SIGKILL in %d of %d rounds, expected %d"
                       % (killed, tries, ROUNDS))

    def run(self):
        self.fs.start()
        self.classes()
        self.determinism()
        self.crash()
        dc.delete_all_check_no_leaks(self.res, self.fs, self.model, self.p)


def main():
    harness.require_fuse()
    res = harness.Results("e2e-dedup-split")
    test = SplitTest(res)
    try:
        test.run()
    except Exception:
        res.check(False, "exception")
        raise
    finally:
        dc.cleanup(res, test.fs)
    res.finish()


if __name__ == "__main__":
    main()
