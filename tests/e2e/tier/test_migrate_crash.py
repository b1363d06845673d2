#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""SIGKILL of the daemon in the middle of migrations and recalls.

oragen's FRA content is copied in and sealed.  Then, for
FRATIER_CRASH_ROUNDS rounds (fewer under ASan), a tierctl migrate or recall
of the whole mount runs and the daemon is killed at a random moment of it
(the collector runs every second, so some kills land in collections of the
moves' leftovers); the stale mount is cleared, the filesystem mounted again
and every file must read back exactly.  At the end everything is recalled
and read, then deleted: after a collection neither tier may hold a
container with data, and the catalog no chunk (no space leaked by any
interrupted move).

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_ORAGEN, FRATIER_TIERCTL),
FRATIER_CRASH_ROUNDS, FRATIER_CRASH_SEED, FRATIER_TEST_BUILD (asan: fewer
rounds), FRATIER_KEEP.
"""

import os
import random
import shutil
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

        for k in range(ROUNDS):
            verb = rng.choice(["migrate", "recall"]) if k else "migrate"
            p = subprocess.Popen([tc.tierctl_path(), "-m", fs.mnt, verb, fs.mnt], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
            # A random moment of the move: its copy, its switch, or the collection after it.
            time.sleep(rng.uniform(0.0, 1.2 if not ASAN else 3.0))
            fs.kill()
            p.communicate(timeout=60)
            fs.start()
            tiers = tc.tiers_of(res, fs, model)
            print("round %d: %s killed; now %d files on tier 0, %d on tier 1" % (
                k, verb, sum(1 for t in tiers.values() if t == 0), sum(1 for t in tiers.values() if t == 1)),
                flush=True)
            if not tc.compare_all(res, fs, model, "round %d (%s killed)" % (k, verb)):
                break

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
