#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Crash test modelled on the Oracle archiver.

Each round mounts fratierfs, starts 2-4 fratier-archwriter processes (plain,
mid-file fsync, rename .part -> .arc after completion, O_DIRECT, deleting
earlier files), SIGKILLs the daemon after a seeded random delay of 0-2 s,
kills the writers, clears the dead mount with `fusermount3 -uz` and mounts
again.  The ack log lives outside the mount and holds only what the file
system promised (fsync, close, rename + directory fsync, unlink + directory
fsync returned).  After every recovery `fratier-archwriter verify` checks that
every acknowledged file is there and byte-exact for at least its acknowledged
length, and that no file anywhere holds a byte that was not written to it.
Files of older rounds stay and are checked again after later crashes, until
they are pruned.

After the last round: a clean unmount, a mount, the same verification, and
no staging file on the hot tier without a reachable inode.

FRATIER_CRASH_ROUNDS (default 50) and FRATIER_CRASH_SEED (default 1) select
a longer soak or another sequence of delays and writer mixes.
"""

import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import harness

ROUNDS = int(os.environ.get("FRATIER_CRASH_ROUNDS", "50"))
SEED = int(os.environ.get("FRATIER_CRASH_SEED", "1"))
MIN_SIZE = "2M"
MAX_SIZE = "16M"
MAX_DELAY = 2.0
KEEP_ROUNDS = 2  # files of this many previous rounds are verified again after each crash
WRITER_PROFILES = [
    [],
    ["--mid-fsync"],
    ["--rename"],
    ["--direct", "--mid-fsync"],
    ["--rename", "--delete"],
    ["--mid-fsync", "--delete"],
]
TOOL_TIMEOUT = 600


def archwriter():
    path = os.environ.get("FRATIER_ARCHWRITER")
    if not path:
        path = os.path.join(os.environ.get("FRATIER_BUILD_ROOT", "build"),
                            "tests", "e2e", "integrity", "fratier-archwriter")
    return path


class CrashTest:
    def __init__(self, res):
        self.res = res
        self.rng = random.Random(SEED)
        self.base = tempfile.mkdtemp(prefix="fratier-crash-", dir=os.environ.get("FRATIER_TMP"))
        self.fs = harness.Fratier(base=self.base)
        self.ack = os.path.join(self.base, "ack.log")  # outside the mount
        self.arch = self.fs.path("arch")
        self.logs = os.path.join(self.base, "writer-logs")
        os.mkdir(self.logs)
        self.rounds_done = 0
        self.files_verified = 0
        self.bytes_verified = 0

    def tool(self, *args):
        cmd = [archwriter()] + list(args)
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=TOOL_TIMEOUT)
        except subprocess.TimeoutExpired:
            return False, "TIMEOUT after %ds (hung file system?): %s" % (TOOL_TIMEOUT, " ".join(cmd))
        return p.returncode == 0, p.stdout.strip()

    def verify(self, when):
        ok, out = self.tool("verify", "--dir", self.arch, "--ack", self.ack, "--seed", str(SEED))
        print("%s: %s" % (when, out), flush=True)
        m = re.search(r"(\d+) files present, (\d+) bytes checked", out)
        if m:
            self.files_verified += int(m.group(1))
            self.bytes_verified += int(m.group(2))
        return self.res.check(ok, "verification %s" % when)

    def prune(self, before_round):
        if before_round <= 0:
            return True
        ok, out = self.tool("prune", "--dir", self.arch, "--ack", self.ack,
                            "--before-round", str(before_round))
        if not ok:
            print(out, flush=True)
        return self.res.check(ok, "pruning rounds before %d" % before_round)

    def start_writers(self, rnd):
        writers = []
        profiles = self.rng.sample(WRITER_PROFILES, self.rng.randint(2, 4))
        for w, extra in enumerate(profiles):
            log = os.path.join(self.logs, "r%05d-w%d.log" % (rnd, w))
            with open(log, "wb") as logf:
                cmd = [archwriter(), "write", "--dir", self.arch, "--ack", self.ack,
                       "--seed", str(SEED), "--round", str(rnd), "--writer", str(w),
                       "--min-size", MIN_SIZE, "--max-size", MAX_SIZE] + extra
                writers.append((subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL), log, extra))
        return writers

    def crash_round(self, rnd):
        """One round: mount, check the last crash's leftovers, write, crash."""
        self.fs.start()
        if rnd == 0:
            os.mkdir(self.arch)
            fd = os.open(self.fs.mnt, os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(fd)
            os.close(fd)
        elif not self.verify("after crash %d" % (rnd - 1)) or not self.prune(rnd - KEEP_ROUNDS):
            return False

        writers = self.start_writers(rnd)
        delay = self.rng.uniform(0, MAX_DELAY)
        print("round %d: %d writers (%s), daemon SIGKILLed after %.2fs"
              % (rnd, len(writers), ", ".join(" ".join(e) or "plain" for _, _, e in writers), delay), flush=True)
        time.sleep(delay)
        early = [(p.returncode, log, extra) for p, log, extra in writers if p.poll() is not None]
        os.kill(self.fs.proc.pid, signal.SIGKILL)
        for p, _, _ in writers:
            p.kill()
            p.wait()
        self.fs.kill()  # reaps the daemon, fusermount3 -uz
        for rc, log, extra in early:
            with open(log, errors="replace") as f:
                print("writer %s exited %d before the crash:\n%s" % (extra, rc, f.read()[-2000:]), flush=True)
        self.rounds_done += 1
        return self.res.check(not early, "round %d: writers failed while the daemon was alive" % rnd)

    def staging_orphans(self):
        """Staging files whose inode is not reachable from the mount (clean mount, nothing open)."""
        reachable = set()
        for root, _, files in os.walk(self.fs.mnt):
            for name in files:
                st = os.lstat(os.path.join(root, name))
                if stat.S_ISREG(st.st_mode):
                    reachable.add(st.st_ino)
        staging = os.path.join(self.fs.data, "hot", "staging")
        staged, orphans = 0, []
        for root, _, files in os.walk(staging):
            for name in files:
                staged += 1
                try:
                    ino = int(name, 16)
                except ValueError:
                    ino = None
                if ino not in reachable:
                    orphans.append(os.path.relpath(os.path.join(root, name), staging))
        print("staging: %d files, %d regular files reachable in the mount, %d orphans%s"
              % (staged, len(reachable), len(orphans), (": " + " ".join(orphans[:20])) if orphans else ""),
              flush=True)
        self.res.check(os.path.isdir(staging), "no staging directory at %s" % staging)
        self.res.check(not orphans, "orphaned staging files after recovery and a clean remount")
        self.res.check(staged <= len(reachable), "more staging files than reachable regular files")

    def run(self):
        for rnd in range(ROUNDS):
            if not self.crash_round(rnd):
                break
        if self.res.failed:
            return
        self.fs.start()
        if self.verify("after the last crash"):
            self.fs.stop()  # a clean unmount must work (and exit 0) after recovery
            self.fs.start()
            if self.verify("after a clean remount"):
                self.staging_orphans()
            self.fs.stop()

    def cleanup(self):
        if self.fs.proc is not None:
            self.fs.kill(check=False)
        if self.res.failed or os.environ.get("FRATIER_KEEP"):
            print("kept %s (ack log, daemon log, data) for inspection" % self.base)
            sys.stderr.write("daemon log:\n" + self.fs.log_text() + "\n")
        else:
            shutil.rmtree(self.base, ignore_errors=True)


def main():
    harness.require_fuse()
    res = harness.Results("e2e-crash")
    test = CrashTest(res)
    try:
        test.run()
    except Exception:
        res.check(False, "exception in round %d" % test.rounds_done)
        raise
    finally:
        print("%d crash rounds (seed %d), %d files and %d bytes verified"
              % (test.rounds_done, SEED, test.files_verified, test.bytes_verified), flush=True)
        test.cleanup()
    res.finish()


if __name__ == "__main__":
    main()
