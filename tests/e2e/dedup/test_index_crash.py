#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""SIGKILL of the daemon while it merges the catalog's digest index.

The daemon's merge thread (woken after each seal) merges the recent table of
the digest index into a sorted run once it passed index_recent ids (catalog_index_merge_step(), batch by
batch, each batch a transaction), logging "merging the chunk index" before
and "merged the chunk index" after.  The merge freezes the recent table,
copies it and the runs it takes into a new run that look-ups skip, swaps it
in, then deletes the old runs' rows; its state is in the catalog alone, and
the next mount resumes it.  With index_recent=500, a few MiB of new data is enough to start a
merge; to give the kill a merge long enough to land in, the recent table is
first given BALLAST entries of a tier this mount does not have (tier 7,
made-up ids: no look-up of the daemon's ever reaches them), written with
sqlite3 while the daemon is down.

Each round: unmount, add the ballast, mount, write a file of new data with
fsync, and SIGKILL the daemon at a random time up to MERGE_WINDOW after the
log shows a merge began.  The
round counts only if the kill landed inside the merge: the log shows its
start and not its end, and the catalog a merge under way (a new run being
written, or old runs being deleted).  A round whose merge ended first runs again; at
least FRATIER_INDEX_CRASH_ROUNDS rounds must land within three times as
many, or the test fails.

After each kill, read with sqlite3 -readonly: every chunk row of the hot
tier is in exactly one table that look-ups read (recent, frozen or a live
run) under its id, and every ballast entry is still there, once.  Then a
remount: every file written so far reads back byte-exact and gets sealed,
the merge resumes and ends, and a file made of earlier files' bytes
deduplicates against them (the hot tier grows by less than a tenth of its
size).

env: FRATIER_INDEX_CRASH_ROUNDS (default 3), FRATIER_INDEX_CRASH_SEED
(default 1), FRATIER_PHASE_TIMEOUT (how long a round waits for the merge to
start, default 60 s), FRATIER_KEEP.
"""

import os
import random
import subprocess
import time

import harness
import dedupcommon as dc

ROUNDS = int(os.environ.get("FRATIER_INDEX_CRASH_ROUNDS", "3"))
SEED = int(os.environ.get("FRATIER_INDEX_CRASH_SEED", "1"))
PHASE_TIMEOUT = harness.scaled(float(os.environ.get("FRATIER_PHASE_TIMEOUT", "60")))
BALLAST = 300000
BALLAST_TIER = 7
INDEX_RECENT = 500
OPTIONS = ["seal_delay=0", "seal_stream=0", "gc_interval=86400", "index_recent=%d" % INDEX_RECENT]
MERGE_WINDOW = harness.scaled(0.5)
MERGING = "merging the chunk index"
MERGED = "merged the chunk index"

# The runs look-ups read: live (0) or a source of the merge under way (1); 2 is being written, 3 being deleted.
LIVE_RUNS = "SELECT run FROM chunk_run_list WHERE state <= 1"
# Chunk rows of the hot tier (retired ones aside) and how many index entries each has, under its own id.
UNINDEXED = ("SELECT count(*) FROM chunks c WHERE c.tier = 0 AND substr(c.digest, 1, 8) != x'ffffffffffffffff' AND "
             "(SELECT count(*) FROM chunk_recent r WHERE r.tier = c.tier AND r.digest = c.digest AND r.id = c.id) + "
             "(SELECT count(*) FROM chunk_frozen f WHERE f.tier = c.tier AND f.digest = c.digest AND f.id = c.id) + "
             "(SELECT count(*) FROM chunk_runs u WHERE u.run IN (%s) AND "
             "u.tier = c.tier AND u.digest = c.digest AND u.id = c.id) != 1" % LIVE_RUNS)


def sqlite_write(fs, sql):
    """Runs sql on the catalog of a stopped daemon."""
    db = os.path.join(fs.data, "hot", "catalog.db")
    subprocess.run(["sqlite3", db, sql], check=True, timeout=300, stdout=subprocess.DEVNULL)


def add_ballast(fs):
    sqlite_write(fs, "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %d) "
                     "INSERT INTO chunk_recent (tier, digest, id) SELECT %d, randomblob(32), -i FROM s"
                 % (BALLAST, BALLAST_TIER))


def count(fs, sql):
    return int(dc.sqlite_rows(fs, sql)[0][0])


def ballast_where(fs):
    """(in the recent table, in the frozen one, in runs looked in, in the run being written) of the ballast."""
    recent = count(fs, "SELECT count(*) FROM chunk_recent WHERE tier = %d" % BALLAST_TIER)
    frozen = count(fs, "SELECT count(*) FROM chunk_frozen WHERE tier = %d" % BALLAST_TIER)
    runs = count(fs, "SELECT count(*) FROM chunk_runs WHERE tier = %d AND run IN (%s)" % (BALLAST_TIER, LIVE_RUNS))
    building = count(fs, "SELECT count(*) FROM chunk_runs WHERE tier = %d AND run IN "
                         "(SELECT run FROM chunk_run_list WHERE state = 2)" % BALLAST_TIER)
    return recent, frozen, runs, building


def merge_under_way(fs):
    return count(fs, "SELECT count(*) FROM chunk_run_list WHERE state >= 2") > 0


def check_index(res, fs, what):
    bad = int(dc.sqlite_rows(fs, UNINDEXED)[0][0])
    chunks = int(dc.sqlite_rows(fs, "SELECT count(*) FROM chunks WHERE tier = 0")[0][0])
    res.check(chunks > 0 and bad == 0, "%s: %d of %d chunks are not in the digest index exactly once" % (what, bad, chunks))
    ok = dc.sqlite_rows(fs, "PRAGMA integrity_check")
    res.check(ok == [["ok"]], "%s: integrity_check says %s" % (what, ok))
    return chunks


def main():
    harness.require_fuse()
    res = harness.Results("e2e-dedup-index-crash")
    rng = random.Random(SEED)
    content = dc.Content(SEED, pool_pieces=32)
    fs = harness.Fratier(options=OPTIONS)
    model = {}  # name -> bytes
    landed = tries = 0
    with fs:
        # A first file, sealed and merged into a run (not the ballast's: it has none yet).
        first = content.make(6 << 20, shared=0.3, rng=rng)
        dc.write_file(fs.path("first.bkp"), first, fsync=True)
        model["first.bkp"] = first
        dc.check_sealed(res, [fs.path("first.bkp")], "first file")
        fs.stop()
        check_index(res, fs, "after the first file")

        while landed < ROUNDS and tries < 3 * ROUNDS:
            tries += 1
            add_ballast(fs)
            ballast = ballast_where(fs)
            fs.start()
            at = dc.log_size(fs)
            name = "r%02d.bkp" % tries
            data = content.make(rng.randrange(2 << 20, 6 << 20), shared=0.3, rng=rng)
            dc.write_file(fs.path(name), data, fsync=True)
            model[name] = data
            deadline = time.monotonic() + PHASE_TIMEOUT
            while MERGING not in dc.log_since(fs, at) and time.monotonic() < deadline:
                time.sleep(0.002)
            # Anywhere in the merge: it takes about a second for the ballast here (less in a release build).
            delay = rng.uniform(0, MERGE_WINDOW)
            time.sleep(delay)
            fs.kill()
            log = dc.log_since(fs, at)
            began, ended = MERGING in log, MERGED in log
            under_way = merge_under_way(fs)
            hit = began and not ended and under_way
            landed += hit
            recent, frozen, runs, building = ballast_where(fs)
            print("round %d: killed %.3f s after the merge began: %s, ended: %s, under way: %s; ballast %d in the "
                  "recent table, %d frozen, %d in runs, %d copied to the new run%s"
                  % (tries, delay, began, ended, under_way, recent, frozen, runs, building,
                     "" if hit else ": the kill missed the merge, again"),
                  flush=True)
            res.check(began, "round %d: no merge began within %ds" % (tries, PHASE_TIMEOUT))
            check_index(res, fs, "after the kill of round %d" % tries)
            res.check(recent + frozen + runs == sum(ballast[:3]),
                      "round %d: the ballast is %d in the recent table, %d frozen and %d in runs, not %d in all "
                      "as before the merge" % (tries, recent, frozen, runs, sum(ballast[:3])))
            # What the kill left: the next mount finishes the merge once a file is sealed.
            fs.start()
            at = dc.log_size(fs)
            for n, d in model.items():
                dc.compare(res, fs.path(n), d, "after round %d" % tries)
            dc.check_sealed(res, [fs.path(n) for n in model], "after round %d" % tries)
            # The merge resumed at the mount is paced while the reads above come in: it ends before the next
            # round, whose kill must land in a merge of its own.
            deadline = time.monotonic() + PHASE_TIMEOUT
            while under_way and MERGED not in dc.log_since(fs, at) and time.monotonic() < deadline:
                time.sleep(0.01)
            fs.stop()
            check_index(res, fs, "after the remount of round %d" % tries)

        res.check(landed >= ROUNDS, "only %d of %d rounds' kills landed during a merge, in %d tries"
                  % (landed, ROUNDS, tries))

        # Dedup still works: a file of earlier files' bytes stores next to nothing.
        merge_left = merge_under_way(fs) or count(fs, "SELECT count(*) FROM chunk_recent") > INDEX_RECENT
        fs.start()
        at = dc.log_size(fs)
        before = dc.stored_bytes(fs)
        names = sorted(model)
        again = b"".join(model[n] for n in names)
        dc.write_file(fs.path("again.bkp"), again, fsync=True)
        dc.check_sealed(res, [fs.path("again.bkp")], "the repeat")
        grew = dc.stored_bytes(fs) - before
        res.check(grew < len(again) // 10, "a repeat of %d bytes stored %d more" % (len(again), grew))
        dc.compare(res, fs.path("again.bkp"), again, "the repeat")
        # An unmount stops a merge between batches: let one the kills left (resumed at the mount), or one due, end.
        deadline = time.monotonic() + PHASE_TIMEOUT
        while merge_left and MERGED not in dc.log_since(fs, at) and time.monotonic() < deadline:
            time.sleep(0.01)
        # Merges run on a thread of their own, paced between batches under a kind of their own.
        st = dc.status(fs)
        paced = sum(int(st.get("throttle_index_%s" % what, 0)) for what in ("busy", "idle"))
        res.check(not merge_left or paced > 0,
                  "the merge was not paced under its kind: throttle_index_busy + _idle = %d" % paced)
        res.check(all("catalog_%s" % k in st for k in ("lock_waits", "lock_yields", "vacuum_pages", "vacuum_left")),
                  "status shows no catalog lock or vacuum counters")
        fs.stop()
        recent, frozen, runs, building = ballast_where(fs)
        print("repeat: %d bytes, the hot tier grew by %d; ballast %d in the recent table, %d frozen, %d in runs"
              % (len(again), grew, recent, frozen, runs), flush=True)
        res.check(recent + frozen + runs == tries * BALLAST and runs > 0,
                  "the merges after the crashes did not move the ballast into runs (%d recent, %d frozen, %d in runs)"
                  % (recent, frozen, runs))
        check_index(res, fs, "at the end")
        log = open(fs.log, errors="replace").read()
        res.check(MERGED in log, "no merge ever ended")
        print("\n".join(line for line in log.splitlines() if MERGED in line), flush=True)
    res.finish()


if __name__ == "__main__":
    main()
