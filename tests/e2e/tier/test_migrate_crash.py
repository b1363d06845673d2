#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""SIGKILL of the daemon in the middle of migrations and recalls.

oragen's FRA content is copied in and sealed, and a whole migrate and
recall are timed.  Then, round after round, a tierctl migrate or recall of
the whole mount runs (whichever has more files to move) and the daemon is
killed at a random moment of the time that move should take (the collector
runs every second, so some kills land in collections of the moves'
leftovers); the stale mount is cleared, the filesystem mounted again and
every file must read back exactly.

A round counts only if the kill landed in the move: the target tier's
containers had grown or files had switched to it (the move begun), and
not every file had switched (the move not over).  A kill after the move
ended makes the next one come earlier, one before it began later (the
move's time as timed is corrected); rounds go on until FRATIER_CRASH_ROUNDS (fewer under ASan)
landed in a move, at most four times as many, or the test fails.

At the end everything is recalled and read, then deleted: after a
collection neither tier may hold a container with data, and the catalog no
chunk (no space leaked by any interrupted move).

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


def container_sizes(root):
    """{container file: bytes} under root (read while the daemon is dead or alive)."""
    return {p: n for p, n, _ in dc.tree_usage(root)[0]}


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

        # How long a whole move takes here, from one unkilled migrate and recall: kills are aimed inside it.
        took = {}
        for verb in ("migrate", "recall"):
            t0 = time.monotonic()
            rc, _, err = tc.tierctl(fs, verb, fs.mnt)
            took[verb] = time.monotonic() - t0
            res.check(rc == 0, "%s of everything (timed): %d %s" % (verb, rc, err))
        print("a whole migrate takes %.2fs, a recall %.2fs" % (took["migrate"], took["recall"]), flush=True)

        in_move = k = 0
        tiers = tc.tiers_of(res, fs, model)
        while in_move < ROUNDS and k < 4 * ROUNDS:
            # The move with more files to do.
            on_1 = sum(1 for t in tiers.values() if t == 1)
            verb = "migrate" if 2 * on_1 <= len(model) else "recall"
            target = 1 if verb == "migrate" else 0
            on_target_before = sum(1 for t in tiers.values() if t == target)
            target_dir = tc.containers_dir(fs, "capacity" if target else "hot")
            before = container_sizes(target_dir)
            p = subprocess.Popen([tc.tierctl_path(), "-m", fs.mnt, verb, fs.mnt], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
            # A random moment of the move: its copy, its switch, or the collection after it.
            delay = rng.uniform(0.1, 0.9) * took[verb] * (len(model) - on_target_before) / len(model)
            time.sleep(delay)
            fs.kill()
            p.communicate(timeout=60)
            after = container_sizes(target_dir)
            copied = any(after.get(c, 0) > n for c, n in before.items()) or bool(set(after) - set(before))
            fs.start()
            tiers = tc.tiers_of(res, fs, model)
            on_target = sum(1 for t in tiers.values() if t == target)
            # Begun: frames copied, or files switched (a recall finds most chunks still on the hot tier).
            hit = (copied or on_target > on_target_before) and on_target < len(model)
            in_move += hit
            # Over already: moves are quicker than timed, aim earlier; not begun yet: later.
            took[verb] *= 1.0 if hit else 0.7 if on_target == len(model) else 1.4
            print("round %d: %s killed after %.2fs; now %d files on tier 0, %d on tier 1%s" % (
                k, verb, delay, sum(1 for t in tiers.values() if t == 0), sum(1 for t in tiers.values() if t == 1),
                "" if hit else ", the move %s: again" % ("over" if on_target == len(model) else "not begun")),
                flush=True)
            if not tc.compare_all(res, fs, model, "round %d (%s killed)" % (k, verb)):
                break
            k += 1
        res.check(in_move >= ROUNDS, "only %d of %d rounds killed the daemon in a move, %d wanted"
                  % (in_move, k, ROUNDS))

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
        fs.kill(check=False)
        if not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
