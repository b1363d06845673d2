#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Data integrity under random I/O, checked against a model.

fratier-exercise runs a seeded random mix of writes, reads, truncates,
fallocate, appends, renames, unlinks, mmap and fsync against a directory and
compares every read with its in-memory model.  It runs first on a plain local
directory (a control: the exerciser itself must be right), then for many seeds
on a fratierfs mount, two at a time (half of them with files sealed as soon
as they are closed); after a clean unmount and remount every
seed is replayed with --verify-only, which rebuilds the expected state without
I/O and checks every file again, so persistence is checked too.

FRATIER_INTEGRITY_SEEDS / FRATIER_INTEGRITY_OPS make a longer soak.
"""

import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import harness

SEEDS = int(os.environ.get("FRATIER_INTEGRITY_SEEDS", "20"))
OPS = int(os.environ.get("FRATIER_INTEGRITY_OPS", "3000"))
FILES = 6
MAX_SIZE = "4M"
JOBS = 2
RUN_TIMEOUT = 240


def exerciser():
    path = os.environ.get("FRATIER_EXERCISE")
    if not path:
        path = os.path.join(os.environ.get("FRATIER_BUILD_ROOT", "build"),
                            "tests", "e2e", "integrity", "fratier-exercise")
    return path


def run(directory, seed, verify_only=False, fs=None):
    """Runs the exerciser; returns (ok, output).  A run that outlives
    RUN_TIMEOUT means a hung file system: fs (if given) dumps its threads and
    has its connection aborted, so the test fails with a diagnosis instead of
    hanging until meson kills it."""
    args = [exerciser(), "--seed", str(seed), "--ops", str(OPS), "--files", str(FILES),
            "--max-size", MAX_SIZE]
    if verify_only:
        args.append("--verify-only")
    args.append(directory)
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        if fs is not None:
            fs.diagnose_hang()
        p.kill()
        out, _ = p.communicate()
        return False, "%s\nTIMEOUT after %ds (hung file system?): %s" % (out, RUN_TIMEOUT, " ".join(args))
    return p.returncode == 0, out.strip() + ("" if p.returncode == 0 else "\nexit status %d" % p.returncode)


def run_seeds(res, fs, seeds, verify_only):
    """Runs (or replays) each seed in its own directory; returns the seeds that passed."""
    what = "verify after remount" if verify_only else "exercise"
    passed = []

    def one(seed):
        d = fs.path("s%03d" % seed)
        if not verify_only:
            os.mkdir(d)
        return seed, run(d, seed, verify_only, fs)

    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        for seed, (ok, out) in pool.map(one, seeds):
            if ok:
                print("seed %d %s: %s" % (seed, what, out.splitlines()[-1][:160]), flush=True)
                passed.append(seed)
            else:
                print(out, flush=True)
            res.check(ok, "seed %d: %s on fratierfs (--seed %d --ops %d --files %d --max-size %s)"
                      % (seed, what, seed, OPS, FILES, MAX_SIZE))
    return passed


def main():
    harness.require_fuse()
    res = harness.Results("e2e-integrity")

    with tempfile.TemporaryDirectory(prefix="fratier-control-", dir=os.environ.get("FRATIER_TMP")) as tmp:
        ok, out = run(tmp, 1)
        print("control on a local directory:", out.splitlines()[-1][:160] if ok else out, flush=True)
        if ok:
            ok, out = run(tmp, 1, verify_only=True)
            if not ok:
                print(out, flush=True)
        if not res.check(ok, "the exerciser fails on a plain local directory: fix the exerciser"):
            res.finish()

    # Odd seeds on the default mount; even seeds with sealing and collection
    # right behind the exerciser, so reads, writes and truncates meet files
    # being sealed, sealed files turned raw again, and the collector.
    for options, seeds, what in (((), range(1, SEEDS + 1, 2), "default options"),
                                 (("seal_delay=0", "gc_interval=1"), range(2, SEEDS + 1, 2),
                                  "seal_delay=0,gc_interval=1")):
        print("--- %s: seeds %s" % (what, list(seeds)), flush=True)
        with harness.Fratier(options=options) as fs:
            try:
                passed = run_seeds(res, fs, seeds, verify_only=False)
                fs.stop()
                fs.start()
                # A seed that already failed live would only fail again here.
                run_seeds(res, fs, passed, verify_only=True)
            finally:
                if res.failed:
                    sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
    res.finish()


if __name__ == "__main__":
    main()
