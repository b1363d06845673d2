#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""SIGKILL of the daemon while it seals files and while it collects garbage.

(a) Sealing: each round mounts, checks every file of earlier rounds, writes
    a few files (archived logs, backup pieces, image copies sharing chunks
    with earlier files) with fsync and close, and SIGKILLs the daemon at a
    seeded random moment 0-1.5 s later (most often early), while seal_delay=0
    has it chunking, compressing and committing them.  After `fusermount3
    -uz` and a new mount every fsynced file must be byte-exact, raw or
    sealed, and all of them must get sealed.

(b) Collection: each round writes files to keep and files to delete that
    share chunks with each other and with files of earlier rounds, waits for
    them to be sealed, deletes the doomed ones (and older kept ones) and
    SIGKILLs the daemon 0-2.5 s later, while gc_interval=1 has the collector
    deleting chunks and compacting containers.  After a new mount every kept
    file must be byte-exact.

Finally everything is deleted: the collector must leave the containers
(nearly) empty, no staging file may be left, and after a clean unmount the
catalog (read with sqlite3 -readonly) must hold no chunk and no recipe.

env: FRATIER_DEDUP_CRASH_ROUNDS (default 20 of each), FRATIER_DEDUP_CRASH_SEED
(default 1), FRATIER_SEAL_TIMEOUT, FRATIER_GC_TIMEOUT, FRATIER_KEEP.
"""

import os
import random
import re
import signal
import time

import harness
import dedupcommon as dc

ROUNDS = int(os.environ.get("FRATIER_DEDUP_CRASH_ROUNDS", "20"))
SEED = int(os.environ.get("FRATIER_DEDUP_CRASH_SEED", "1"))
SEAL_KILL_MAX = 1.5
GC_KILL_MAX = 2.5
KEEP_ROUNDS = 3  # files of this many earlier rounds are checked again after each crash
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
        self.files_checked = 0
        self.bytes_checked = 0
        self.gc_before_kill = 0
        self.containers_gone = 0
        self.raw_after_seal_crash = 0

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
        if when.startswith("after sealing crash"):
            self.raw_after_seal_crash += "raw" in states
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

    def kill_after(self, delay):
        time.sleep(delay)
        os.kill(self.fs.proc.pid, signal.SIGKILL)
        self.fs.kill()  # reaps the daemon, fusermount3 -uz

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
        delay = SEAL_KILL_MAX * self.rng.random() ** 2
        print("sealing round %d: %d files (%d bytes) fsynced and closed, SIGKILL after %.2fs"
              % (rnd, n, sum(sizes), delay), flush=True)
        self.kill_after(delay)
        self.rounds["seal"] += 1
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
            self.write(rel, ROUNDS + rnd, self.make("gc", rnd, i, size, shared=0.7))
            if i >= 2:
                doomed.append(rel)
        if not dc.check_sealed(self.res, [self.p(r) for r in self.model], "collection round %d" % rnd):
            return False
        # The doomed files, and the kept files of older rounds: their chunks
        # are shared with what stays.
        for rel in doomed:
            os.unlink(self.p(rel))
            del self.model[rel]
        pruned = self.prune(ROUNDS + rnd - KEEP_ROUNDS)  # the sealing rounds' files go first
        log_at = dc.log_size(self.fs)
        before = self.container_names()
        delay = self.rng.uniform(0, GC_KILL_MAX)
        self.kill_after(delay)
        collected = len(COLLECTED.findall(dc.log_since(self.fs, log_at)))
        gone = len(before - self.container_names())
        self.gc_before_kill += collected > 0
        self.containers_gone += gone
        print("collection round %d: deleted %d files, SIGKILL after %.2fs (%d collections logged before it, "
              "%d of %d container files removed)" % (rnd, len(doomed) + pruned, delay, collected, gone, len(before)),
              flush=True)
        self.rounds["gc"] += 1
        return True

    # the end -----------------------------------------------------------------

    def no_leaks(self):
        self.start()
        if not self.verify("after the last collection crash"):
            return
        dc.delete_all_check_no_leaks(self.res, self.fs, self.model, self.p)

    def run(self):
        for rnd in range(ROUNDS):
            if not self.seal_round(rnd):
                return
        for rnd in range(ROUNDS):
            if not self.gc_round(rnd):
                return
        self.no_leaks()

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
        print("%d sealing crash rounds, %d of them with files still raw after the crash; %d collection crash "
              "rounds, %d of them killed after a collection, %d container files removed by the collector; "
              "seed %d; %d files and %d bytes verified"
              % (test.rounds["seal"], test.raw_after_seal_crash, test.rounds["gc"], test.gc_before_kill,
                 test.containers_gone, SEED, test.files_checked, test.bytes_checked), flush=True)
        test.cleanup()
    res.finish()


if __name__ == "__main__":
    main()
