#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Data integrity under random I/O, checked against a model.

fratier-exercise runs a seeded random mix of writes, reads, truncates,
fallocate, appends, renames, unlinks, mmap and fsync against a directory and
compares every read with its in-memory model.  It runs first on a plain local
directory (a control: the exerciser itself must be right), then for many seeds
on a fratierfs mount, two at a time; after a clean unmount and remount every
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
RUN_TIMEOUT = 600


def exerciser():
    path = os.environ.get("FRATIER_EXERCISE")
    if not path:
        path = os.path.join(os.environ.get("FRATIER_BUILD_ROOT", "build"),
                            "tests", "e2e", "integrity", "fratier-exercise")
    return path


def run(directory, seed, verify_only=False):
    """Runs the exerciser; returns (ok, output)."""
    args = [exerciser(), "--seed", str(seed), "--ops", str(OPS), "--files", str(FILES),
            "--max-size", MAX_SIZE]
    if verify_only:
        args.append("--verify-only")
    args.append(directory)
    try:
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return False, "%s\nTIMEOUT after %ds (hung file system?): %s" % (out, RUN_TIMEOUT, " ".join(args))
    return p.returncode == 0, p.stdout.strip() + ("" if p.returncode == 0 else "\nexit status %d" % p.returncode)


def run_seeds(res, fs, seeds, verify_only):
    """Runs (or replays) each seed in its own directory; returns the seeds that passed."""
    what = "verify after remount" if verify_only else "exercise"
    passed = []

    def one(seed):
        d = fs.path("s%03d" % seed)
        if not verify_only:
            os.mkdir(d)
        return seed, run(d, seed, verify_only)

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

    seeds = list(range(1, SEEDS + 1))
    with harness.Fratier() as fs:
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
