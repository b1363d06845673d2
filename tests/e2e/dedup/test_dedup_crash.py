#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""SIGKILL of the daemon while it seals files and while it collects garbage.

(a) Sealing: each round mounts, checks every file of earlier rounds, writes
    a few files (archived logs, backup pieces, image copies sharing chunks
    with earlier files) with fsync and close, and SIGKILLs the daemon at a
    seeded random moment of at most 1.5 s later (most often early), while
    seal_delay=0 has it chunking, compressing and committing them.  After
    `fusermount3 -uz` and a new mount every fsynced file must be byte-exact,
    raw or sealed, and all of them must get sealed.

(b) Collection: each round writes files to keep and files to delete that
    share chunks with each other and with files of earlier rounds, waits for
    them to be sealed, deletes the doomed ones (and older kept ones), waits
    until the collector (gc_interval=1) is seen deleting their chunks (the
    catalog, read-only, counts fewer dead chunks) and SIGKILLs the daemon a
    seeded random moment later, before the collection's end is logged.
    After a new mount every kept file must be byte-exact.

A round counts for its phase only if the kill landed in it: some of the
round's files still unsealed (the state xattr read just before the kill),
or the collection seen begun and its end not yet logged (the
daemon logs "collected N dead chunks" at the end of a collection).  A round that missed is run
again with an earlier kill (the bound shrinks), and the test fails unless
FRATIER_DEDUP_CRASH_ROUNDS rounds of each phase landed in it within three times
as many rounds: a daemon that is always killed too early or too late tests
nothing.

Finally everything is deleted: the collector must leave the containers
(nearly) empty, no staging file may be left, and after a clean unmount the
catalog (read with sqlite3 -readonly) must hold no chunk and no recipe.

env: FRATIER_DEDUP_CRASH_ROUNDS (default 20 of each), FRATIER_DEDUP_CRASH_SEED
(default 1), FRATIER_SEAL_TIMEOUT, FRATIER_GC_TIMEOUT, FRATIER_KEEP.
"""

import contextlib
import os
import random
import re
import signal
import sqlite3
import time

import harness
import dedupcommon as dc

ROUNDS = int(os.environ.get("FRATIER_DEDUP_CRASH_ROUNDS", "20"))
SEED = int(os.environ.get("FRATIER_DEDUP_CRASH_SEED", "1"))
SEAL_KILL_MAX = 1.5
# After the collector is seen at work: the rest of a collection takes 10 ms to 1 s here.
GC_KILL_MAX = 0.3
KEEP_ROUNDS = 3  # files of this many earlier rounds are checked again after each crash
GC_ROUND0 = 3 * ROUNDS  # the model's round of the first collection round: after every sealing round
DIRS = {"arc": "ORCL/archivelog/2026_12_01", "bkp": "ORCL/backupset/2026_12_01", "dbf": "ORCL/datafile"}
COLLECTED = re.compile(r"collected \d+ dead chunks")


class CrashTest:
    def __init__(self, res):
        self.res = res
        self.rng = random.Random(SEED)
        self.content = dc.Content(SEED, pool_pieces=96)
        self.fs = harness.Fratier(options=dc.OPTIONS)
        self.model = {}  # mount-relative path -> (round, expected bytes)
        self.rounds = {"seal": 0, "gc": 0}
        self.in_phase = {"seal": 0, "gc": 0}
        self.kill_max = {"seal": SEAL_KILL_MAX, "gc": GC_KILL_MAX}
        self.files_checked = 0
        self.bytes_checked = 0
        self.containers_gone = 0
        self.mixed = 0

    def container_names(self):
        return {p for p, _, _ in dc.tree_usage(dc.containers_dir(self.fs))[0]}

    def p(self, *rel):
        return self.fs.path(*rel)

    def make(self, phase, rnd, i, size, shared):
        rng = random.Random("%d-%s-%d-%d" % (SEED, phase, rnd, i))
        return self.content.make(size, shared=shared, rng=rng)

    def write(self, rel, rnd, data):
        dc.write_file(self.p(rel), data, fsync=True)
        self.model[rel] = (rnd, data)

    def verify(self, when):
        """Every file in the model byte-exact; then all of them sealed."""
        states = [dc.state(self.p(r))[0] for r in self.model]
        print("%s: %d files, %d sealed, %d raw" % (when, len(states), states.count("sealed"), states.count("raw")),
              flush=True)
        bad = 0
        for rel in sorted(self.model):
            data = self.model[rel][1]
            if dc.compare(self.res, self.p(rel), data, when):
                self.files_checked += 1
                self.bytes_checked += len(data)
            else:
                bad += 1
        names = set()
        for d in DIRS.values():
            if os.path.isdir(self.p(d)):
                names |= {d + "/" + n for n in os.listdir(self.p(d))}
        unknown = sorted(names - set(self.model))
        self.res.check(not unknown, "%s: files that were deleted (or never written) are there: %s"
                       % (when, ", ".join(unknown)))
        ok = dc.check_sealed(self.res, [self.p(r) for r in self.model], when)
        return bad == 0 and not unknown and ok

    def prune(self, before_round):
        gone = [r for r, (rnd, _) in self.model.items() if rnd < before_round]
        for rel in gone:
            os.unlink(self.p(rel))
            del self.model[rel]
        for d in DIRS.values():
            if os.path.isdir(self.p(d)):
                dc.fsync_dir(self.p(d))
        return len(gone)

    def kill(self):
        os.kill(self.fs.proc.pid, signal.SIGKILL)
        self.fs.kill()  # reaps the daemon, fusermount3 -uz

    def landed(self, phase, hit):
        """Counts a round of phase; a miss makes the next kill come earlier."""
        self.rounds[phase] += 1
        self.in_phase[phase] += hit
        if hit:
            self.kill_max[phase] = min(self.kill_max[phase] * 1.25, 2 * (SEAL_KILL_MAX if phase == "seal" else GC_KILL_MAX))
        else:
            self.kill_max[phase] *= 0.5
        return hit

    def start(self):
        self.fs.start()
        for d in DIRS.values():
            if not os.path.isdir(self.p(d)):
                os.makedirs(self.p(d))
                parts = d.split("/")
                for i in range(len(parts), -1, -1):
                    dc.fsync_dir(self.p(*parts[:i]))

    # (a) -------------------------------------------------------------------

    def seal_round(self, rnd):
        self.start()
        if rnd > 0 and not self.verify("after sealing crash %d" % (rnd - 1)):
            return False
        self.prune(rnd - KEEP_ROUNDS)
        n = self.rng.randint(3, 5)
        sizes = []
        for i in range(n):
            ext = self.rng.choice(sorted(DIRS))
            size = self.rng.randrange(256 << 10, 6 << 20)
            if ext == "dbf":
                size -= size % 8192
            rel = "%s/s%03d_%d.%s" % (DIRS[ext], rnd, i, ext)
            self.write(rel, rnd, self.make("seal", rnd, i, size, shared=0.6))
            sizes.append(size)
        # Squared: most kills land early, while the sealer is still busy with these files.
        delay = self.kill_max["seal"] * self.rng.random() ** 2
        time.sleep(delay)
        states = [dc.state(self.p(r))[0] for r, (n_, _) in self.model.items() if n_ == rnd]
        self.kill()
        hit = self.landed("seal", "raw" in states)
        self.mixed += hit and "sealed" in states
        print("sealing round %d: %d files (%d bytes) fsynced and closed, SIGKILL after %.3fs with %d of them "
              "sealed%s" % (rnd, n, sum(sizes), delay, states.count("sealed"), "" if hit else ": too late, again"),
              flush=True)
        return True

    # (b) -------------------------------------------------------------------

    def gc_round(self, rnd):
        self.start()
        if not self.verify("after %s" % ("the sealing crashes" if rnd == 0 else "collection crash %d" % (rnd - 1))):
            return False
        doomed = []
        for i in range(6):
            ext = self.rng.choice(sorted(DIRS))
            size = self.rng.randrange(1 << 20, 5 << 20)
            if ext == "dbf":
                size -= size % 8192
            rel = "%s/g%03d_%d.%s" % (DIRS[ext], rnd, i, ext)
            self.write(rel, GC_ROUND0 + rnd, self.make("gc", rnd, i, size, shared=0.7))
            if i >= 2:
                doomed.append(rel)
        if not dc.check_sealed(self.res, [self.p(r) for r in self.model], "collection round %d" % rnd):
            return False
        # The doomed files, and the kept files of older rounds: their chunks
        # are shared with what stays.
        for rel in doomed:
            os.unlink(self.p(rel))
            del self.model[rel]
        log_at = dc.log_size(self.fs)
        before = self.container_names()
        db = os.path.join(self.fs.data, "hot", "catalog.db")
        with contextlib.closing(sqlite3.connect("file:%s?mode=ro" % db, uri=True)) as db:
            pruned = self.prune(GC_ROUND0 + rnd - KEEP_ROUNDS)  # the sealing rounds' files go first
            begun = self.collector_begins(db, log_at)
        delay = self.rng.uniform(0, self.kill_max["gc"])
        time.sleep(delay)
        self.kill()
        ended = len(COLLECTED.findall(dc.log_since(self.fs, log_at)))
        gone = len(before - self.container_names())
        self.containers_gone += gone
        hit = self.landed("gc", begun and ended == 0)
        print("collection round %d: deleted %d files, collector %s, SIGKILL %.3fs later (%d collections logged "
              "before it, %d of %d container files removed)%s"
              % (rnd, len(doomed) + pruned, "seen at work" if begun else "never seen at work", delay, ended, gone,
                 len(before), "" if hit else ": missed the collection, again"), flush=True)
        return True

    def collector_begins(self, db, log_at):
        """Waits until the collector deletes dead chunks (their count in the catalog, read-only, drops).
        True if it was seen at it before any collection since log_at ended (was logged)."""
        def dead():
            return db.execute("SELECT count(*) FROM chunks WHERE refs = 0").fetchone()[0]
        first = dead()
        deadline = time.monotonic() + harness.scaled(10)
        while time.monotonic() < deadline:
            # The log first: a collection logged before the drop was seen may be the one that dropped it.
            ended = COLLECTED.search(dc.log_since(self.fs, log_at)) is not None
            if dead() < first:
                return not ended
        return False

    # the end -----------------------------------------------------------------

    def no_leaks(self):
        self.start()
        if not self.verify("after the last collection crash"):
            return
        dc.delete_all_check_no_leaks(self.res, self.fs, self.model, self.p)

    def run(self):
        rnd = 0
        while self.in_phase["seal"] < ROUNDS and rnd < 3 * ROUNDS:
            if not self.seal_round(rnd):
                return
            rnd += 1
        if not self.phase_check("seal", "sealing"):
            return
        rnd = 0
        while self.in_phase["gc"] < ROUNDS and rnd < 3 * ROUNDS:
            if not self.gc_round(rnd):
                return
            rnd += 1
        if not self.phase_check("gc", "a collection"):
            return
        self.no_leaks()

    def phase_check(self, phase, what):
        return self.res.check(self.in_phase[phase] >= ROUNDS, "only %d of %d rounds killed the daemon in %s, %d wanted"
                              % (self.in_phase[phase], self.rounds[phase], what, ROUNDS))

    def cleanup(self):
        dc.cleanup(self.res, self.fs)


def main():
    harness.require_fuse()
    res = harness.Results("e2e-dedup-crash")
    test = CrashTest(res)
    try:
        test.run()
    except Exception:
        res.check(False, "exception after %d sealing and %d collection rounds"
                  % (test.rounds["seal"], test.rounds["gc"]))
        raise
    finally:
        print("%d sealing crash rounds, %d of them killed while sealing (%d between two files); %d collection "
              "crash rounds, %d of them killed during a collection, %d container files removed by the collector; "
              "seed %d; %d files and %d bytes verified"
              % (test.rounds["seal"], test.in_phase["seal"], test.mixed, test.rounds["gc"], test.in_phase["gc"],
                 test.containers_gone, SEED, test.files_checked, test.bytes_checked), flush=True)
        test.cleanup()
    res.finish()


if __name__ == "__main__":
    main()
