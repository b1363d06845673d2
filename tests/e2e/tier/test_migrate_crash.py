#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""SIGKILL of the daemon in the middle of migrations (recompression on the target).

oragen's FRA content is copied in and sealed.  Then, for
FRATIER_CRASH_ROUNDS rounds (fewer under ASan), a tierctl migrate of the
whole mount to the capacity tier runs (after a recall of everything, when
at most one file is left on the hot tier, and a collection that empties the
capacity tier), and the daemon is killed while the move compresses regions again on
the target at its level (9): once a seeded number of the files left have
moved (the catalog, read beside the daemon, says) and the target's
containers have grown since.  A round counts only if the kill landed in
the middle of the move, as what the killed daemon left shows (the target's
containers grew; the catalog still has files on the hot tier); one that
came after the move ended runs again, and FRATIER_CRASH_ROUNDS rounds must
land within three times as many.  The stale
mount is cleared, the filesystem mounted again and every file must read
back exactly.  At the end everything is recalled and read, then deleted: after a collection neither tier may hold a
container with data, and the catalog no chunk (no space leaked by any
interrupted move).

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_ORAGEN, FRATIER_TIERCTL),
FRATIER_CRASH_ROUNDS, FRATIER_CRASH_SEED, FRATIER_TEST_BUILD (asan: fewer
rounds), FRATIER_PHASE_TIMEOUT (how long a round may wait for its phase,
default 60 s), FRATIER_KEEP.
"""

import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

import harness
import tiercommon as tc
from tiercommon import dc

ASAN = os.environ.get("FRATIER_TEST_BUILD") == "asan"
ROUNDS = int(os.environ.get("FRATIER_CRASH_ROUNDS", "3" if ASAN else "10"))
SEED = int(os.environ.get("FRATIER_CRASH_SEED", "1"))
PHASE_TIMEOUT = harness.scaled(float(os.environ.get("FRATIER_PHASE_TIMEOUT", "60")))
TIER_DIRS = ("hot", "capacity")


ON_TIER = "SELECT count(*) FROM inodes WHERE tier = ? AND (mode & 61440) = 32768 AND nlink > 0"


def on_tier(fs, tier):
    """Regular files the catalog has on tier (read only: a reader beside the
    daemon sees what it committed, and a killed daemon's WAL is read as a
    remount would)."""
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(fs.data, "hot", "catalog.db"), uri=True, timeout=30)
    try:
        return db.execute(ON_TIER, (tier,)).fetchone()[0]
    finally:
        db.close()


def grew(fs, tier, before):
    now = dc.container_sizes(tc.containers_dir(fs, TIER_DIRS[tier]))
    return any(size > before.get(name, 0) for name, size in now.items())


def main():
    harness.require_fuse()
    res = harness.Results("e2e-migrate-crash")
    rng = random.Random(SEED)
    tmp = tempfile.mkdtemp(prefix="fratier-migrate-crash-", dir=os.environ.get("FRATIER_TMP"))
    fs = harness.Fratier(base=tmp, options=dc.OPTIONS)
    try:
        src = os.path.join(tmp, "fra")
        tc.generate(res, src)
        fs.start()
        model = tc.copy_in(fs, src)
        if not dc.check_sealed(res, [fs.path(r) for r in model], "seal"):
            res.finish()

        # A round whose kill came after the last file switched missed the
        # move (the copy of one file can end it between the test's look and
        # the kill): it does not count, another round runs; the test fails
        # unless ROUNDS rounds landed in a move within three times as many.
        in_phase = k = 0
        while in_phase < ROUNDS and k < 3 * ROUNDS:
            if on_tier(fs, 0) <= 1:
                rc, _, err = tc.tierctl(fs, "recall", fs.mnt)
                res.check(rc == 0, "round %d: recall: %d %s" % (k, rc, err))
                big = tc.wait_empty(fs, "capacity")
                res.check(not big, "round %d: capacity containers with data left after a recall: %s" % (k, big[:3]))
            moved_before = on_tier(fs, 1)
            let_through = rng.randint(0, len(model) - moved_before - 1)
            p = subprocess.Popen([tc.tierctl_path(), "-m", fs.mnt, "migrate", fs.mnt], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + PHASE_TIMEOUT
            while time.monotonic() < deadline and p.poll() is None and on_tier(fs, 1) < moved_before + let_through:
                time.sleep(0.001)
            before = dc.container_sizes(tc.containers_dir(fs, "capacity"))
            while time.monotonic() < deadline and p.poll() is None and not grew(fs, 1, before):
                time.sleep(0.001)
            fs.kill()
            p.communicate(timeout=60)
            left, moved = on_tier(fs, 0), on_tier(fs, 1)
            hit = grew(fs, 1, before) and left > 0
            in_phase += hit
            fs.start()
            print("round %d: migrate killed %s, %d files after it began; then %d files on tier 0, %d on tier 1%s"
                  % (k, "while it wrote regions on tier 1" if hit else "after its containers grew",
                     let_through, left, moved, "" if hit else ": the move had ended, again"), flush=True)
            if not tc.compare_all(res, fs, model, "round %d (migrate killed)" % k):
                break
            k += 1

        res.check(in_phase >= ROUNDS, "only %d of %d rounds killed the daemon while migrate compressed regions on "
                  "the capacity tier, %d wanted" % (in_phase, k, ROUNDS))
        print("%d rounds, %d of them killed in the middle of a move" % (k, in_phase), flush=True)
        rc, _, err = tc.tierctl(fs, "recall", fs.mnt)
        res.check(rc == 0, "recall of everything after the crashes: %d %s" % (rc, err))
        res.check(all(t == 0 for t in tc.tiers_of(res, fs, model).values()), "files left on tier 1 after recall")
        tc.compare_all(res, fs, model, "after the last recall")

        for r in model:
            os.unlink(fs.path(r))
        rc, _, err = tc.tierctl(fs, "gc")
        res.check(rc == 0, "gc: %s" % err)
        for tier in ("hot", "capacity"):
            big = tc.wait_empty(fs, tier)
            res.check(not big, "%s: containers with data left after deleting everything: %s" % (tier, big[:3]))
        fs.stop()
        chunks = dc.sqlite_count(fs, "chunks")
        res.check(chunks == 0, "%d chunks left in the catalog after deleting everything" % chunks)
    except Exception:
        sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
        raise
    finally:
        if res.failed:
            sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
        fs.kill()
        if not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
