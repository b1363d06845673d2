#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""SIGKILL of the daemon while it seals files and while it collects garbage.

(a) Sealing into regions: each round mounts (seal_stream=0, so sealing
    happens after close; no collector), checks every file of earlier rounds,
    writes a few files (archived logs, backup pieces, image copies sharing
    chunks with earlier files) with fsync and close, and SIGKILLs the daemon
    once the sealer has written regions into the containers and a seeded
    number (0 .. n-2) of the files are sealed.  The kill must have landed
    while the round was being sealed into regions: asserted from what the
    killed daemon left (the containers grew; the catalog has one of the
    round's files still raw).  After `fusermount3 -uz` and a new mount every
    fsynced file must be byte-exact, raw or sealed, and all of them must get
    sealed.

(b) Compaction of regions: each round writes files to keep and files to
    delete that share chunks with each other and with files of earlier
    rounds, waits for them to be sealed, deletes the doomed ones (and older
    kept ones) and SIGKILLs the daemon as soon as the collector
    (gc_interval=1; containers of 4 MiB, so partly dead ones are many) has
    begun to write a compaction's copy (a container grew: nothing else
    writes now).  The kill must have landed during compaction: the
    collection had not logged its end (it logs after its last compaction),
    asserted for every round; and over the run, some kills must have caught
    a compaction's copy in flight, as what the killed daemon left shows (a
    container on disk longer than the catalog says: a copy not yet
    committed; or one the catalog no longer has: an old container not yet
    unlinked).  After a new mount every kept file must be byte-exact.

Finally everything is deleted: the collector must leave the containers
(nearly) empty, no staging file may be left, and after a clean unmount the
catalog (read with sqlite3 -readonly) must hold no chunk and no recipe.

env: FRATIER_DEDUP_CRASH_ROUNDS (default 20 of each), FRATIER_DEDUP_CRASH_SEED
(default 1), FRATIER_SEAL_TIMEOUT, FRATIER_GC_TIMEOUT, FRATIER_PHASE_TIMEOUT (how
long a round may wait for its phase, default 60 s), FRATIER_KEEP.
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
KEEP_ROUNDS = 3  # files of this many earlier rounds are checked again after each crash
DIRS = {"arc": "ORCL/archivelog/2026_12_01", "bkp": "ORCL/backupset/2026_12_01", "dbf": "ORCL/datafile"}
COLLECTED = re.compile(r"collected \d+ dead chunks")
COMPACTED = re.compile(r"compacted (\d+) containers \((\d+) regions compressed again\)")
# Small containers: a round's deletions leave several of them partly dead, so each round compacts.
CONTAINER_KIB = 4096
SEAL_OPTIONS = ["seal_delay=0", "seal_stream=0", "gc_interval=86400", "container_kib=%d" % CONTAINER_KIB]
GC_OPTIONS = dc.OPTIONS + ["container_kib=%d" % CONTAINER_KIB]
PHASE_TIMEOUT = harness.scaled(float(os.environ.get("FRATIER_PHASE_TIMEOUT", "60")))


class CrashTest:
    def __init__(self, res):
        self.res = res
        self.rng = random.Random(SEED)
        self.content = dc.Content(SEED, pool_pieces=96)
        self.fs = harness.Fratier(options=SEAL_OPTIONS)
        self.model = {}  # mount-relative path -> (round, expected bytes)
        self.rounds = {"seal": 0, "gc": 0}
        self.files_checked = 0
        self.bytes_checked = 0
        self.gc_before_kill = 0
        self.containers_gone = 0
        self.raw_after_seal_crash = 0
        self.in_phase = {"seal": 0, "gc": 0}
        self.compacted = 0
        self.copy_in_flight = 0
        self.regions_compressed = 0

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

    def kill(self):
        os.kill(self.fs.proc.pid, signal.SIGKILL)
        self.fs.kill()  # reaps the daemon, fusermount3 -uz

    def start(self, options):
        self.fs.options = options + ["policy=0"]
        self.fs.start()
        for d in DIRS.values():
            if not os.path.isdir(self.p(d)):
                os.makedirs(self.p(d))
                parts = d.split("/")
                for i in range(len(parts), -1, -1):
                    dc.fsync_dir(self.p(*parts[:i]))

    # (a) -------------------------------------------------------------------

    def seal_round(self, rnd):
        self.start(SEAL_OPTIONS)
        if rnd > 0 and not self.verify("after sealing crash %d" % (rnd - 1)):
            return False
        self.prune(rnd - KEEP_ROUNDS)
        before = dc.container_sizes(dc.containers_dir(self.fs))
        n = self.rng.randint(3, 5)
        sizes, rels = [], []
        for i in range(n):
            ext = self.rng.choice(sorted(DIRS))
            size = self.rng.randrange(256 << 10, 6 << 20)
            if ext == "dbf":
                size -= size % 8192
            rel = "%s/s%03d_%d.%s" % (DIRS[ext], rnd, i, ext)
            self.write(rel, rnd, self.make("seal", rnd, i, size, shared=0.6))
            sizes.append(size)
            rels.append(rel)
        inos = [os.stat(self.p(r)).st_ino for r in rels]
        # The sealer has begun writing regions, and this many of the files are sealed.
        want_sealed = self.rng.randint(0, n - 2)
        deadline = time.monotonic() + PHASE_TIMEOUT
        while time.monotonic() < deadline:
            if self.grew(before) and sum(dc.state(self.p(r))[0] == "sealed" for r in rels) >= want_sealed:
                break
            time.sleep(0.002)
        self.kill()
        raw = int(dc.sqlite_rows(self.fs, "SELECT count(*) FROM inodes WHERE state = 0 AND ino IN (%s)"
                                 % ",".join(map(str, inos)))[0][0])
        grew = self.grew(before)
        ok = self.res.check(raw > 0 and grew, "sealing round %d: the kill did not land while the files were "
                            "sealed into regions (containers grew: %s; %d of %d files raw in the catalog)"
                            % (rnd, grew, raw, n))
        self.in_phase["seal"] += ok
        print("sealing round %d: %d files (%d bytes) fsynced and closed, SIGKILL once regions were written and "
              "%d were sealed: %d raw in the catalog after it" % (rnd, n, sum(sizes), want_sealed, raw), flush=True)
        self.rounds["seal"] += 1
        return True

    def grew(self, before):
        """Whether a container grew, or one appeared, since before (container_sizes())."""
        now = dc.container_sizes(dc.containers_dir(self.fs))
        return any(size > before.get(name, 0) for name, size in now.items())

    # (b) -------------------------------------------------------------------

    def gc_round(self, rnd):
        self.start(GC_OPTIONS)
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
        before = dc.container_sizes(dc.containers_dir(self.fs))
        t0 = time.monotonic()
        while time.monotonic() < t0 + PHASE_TIMEOUT and not self.grew(before):
            time.sleep(0.002)
        waited = time.monotonic() - t0
        self.kill()
        log = dc.log_since(self.fs, log_at)
        collected = len(COLLECTED.findall(log))
        for m in COMPACTED.finditer(log):
            self.compacted += int(m.group(1))
            self.regions_compressed += int(m.group(2))
        on_disk = dc.container_sizes(dc.containers_dir(self.fs))
        rows = {int(r[0]): int(r[1]) for r in dc.sqlite_rows(self.fs, "SELECT id, size FROM containers WHERE tier = 0")}
        longer = [n for n, size in on_disk.items() if int(n[:-4], 16) in rows and size > rows[int(n[:-4], 16)]]
        unlisted = [n for n in on_disk if int(n[:-4], 16) not in rows]
        began = self.grew(before)
        ok = self.res.check(began and collected == 0, "collection round %d: the kill did not land in a compaction "
                            "(a container grew: %s; collections logged: %d)" % (rnd, began, collected))
        self.in_phase["gc"] += ok
        self.copy_in_flight += bool(longer or unlisted)
        new = set(on_disk) - set(before)
        gone = len(set(before) - set(on_disk))
        self.gc_before_kill += collected > 0
        self.containers_gone += gone
        print("collection round %d: deleted %d files, SIGKILL %.3fs later, once a compaction had begun (%d "
              "collections logged before it; %d of %d containers removed, %d new; %d longer on disk than in the catalog, "
              "%d not in it)" % (rnd, len(doomed) + pruned, waited, collected, gone, len(before), len(new), len(longer),
                                 len(unlisted)), flush=True)
        self.rounds["gc"] += 1
        return True

    # the end -----------------------------------------------------------------

    def no_leaks(self):
        self.start(GC_OPTIONS)
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
        self.res.check(self.copy_in_flight > 0, "no collection round killed a compaction with its copy in flight")
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
        print("%d sealing crash rounds, %d of them killed while sealing into regions, %d with files still raw "
              "after the crash; %d collection crash rounds, %d of them killed during a compaction (%d with its copy in flight), %d after a "
              "collection, %d container files removed by the collector, %d compacted and %d regions compressed "
              "again (logged); seed %d; %d files and %d bytes verified"
              % (test.rounds["seal"], test.in_phase["seal"], test.raw_after_seal_crash, test.rounds["gc"],
                 test.in_phase["gc"], test.copy_in_flight, test.gc_before_kill, test.containers_gone, test.compacted,
                 test.regions_compressed, SEED, test.files_checked, test.bytes_checked), flush=True)
        test.cleanup()
    res.finish()


if __name__ == "__main__":
    main()
