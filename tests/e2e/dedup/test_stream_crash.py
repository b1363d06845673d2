#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""SIGKILL of the daemon while files are chunked as they are written.

Each round mounts (after `fusermount3 -uz` of the dead mount), checks every
file of the last rounds whose fsync returned (byte-exact, raw or sealed;
then all of them sealed), deletes whatever the killed writers left half
written, and starts several writers that write files front to back in
1 MiB writes, paced like an archiver, with fsync before close, one file
after another.  The daemon is SIGKILLed at a seeded random moment while
they write (after a random number of files, fewer than the writers, were
acknowledged), once the state xattr of a file not yet acknowledged says
"streaming" (the kill waits for one while the writers write).  A file
counts as acknowledged only if its fsync and close returned; a writer's
error before the kill fails the test, and after it only the errors of a
gone daemon (ENOTCONN, ECONNABORTED, EIO from the writeback of cached
pages, and ENOENT once the dead mount is cleared) are expected.  A round
whose writers finished before a stream was seen did not test a kill
while streaming: rounds go on until FRATIER_CRASH_ROUNDS of them did (at
most three times as many rounds), or the test fails.

At the end everything is deleted: the collector must leave the containers
(nearly) empty, no staging file may be left, and after a clean unmount the
catalog must hold no chunk and no recipe, so what the killed streams stored
was all collected.

env: FRATIER_CRASH_ROUNDS (default 12; 6 under FRATIER_TEST_BUILD=asan),
FRATIER_STREAM_CRASH_SEED (default 1), FRATIER_SEAL_TIMEOUT,
FRATIER_GC_TIMEOUT, FRATIER_KEEP.
"""

import errno
import os
import random
import signal
import threading
import time

import harness
import dedupcommon as dc

ASAN = os.environ.get("FRATIER_TEST_BUILD") == "asan"
ROUNDS = int(os.environ.get("FRATIER_CRASH_ROUNDS", "6" if ASAN else "12"))
SEED = int(os.environ.get("FRATIER_STREAM_CRASH_SEED", "1"))
# Collections every 3 s: often enough to run between crashes, rarely enough
# that their waits for writers (no stream starts meanwhile) leave streams
# alive at most kills.
OPTIONS = ["seal_delay=0", "gc_interval=3", "stream_max=4", "seal_stream=1"]
WRITERS = 4
FILES_PER_WRITER = 2
KEEP_ROUNDS = 2  # files of this many earlier rounds are checked again after each crash
DIRS = {"arc": "ORCL/archivelog/2026_12_02", "bkp": "ORCL/backupset/2026_12_02", "dbf": "ORCL/datafile"}


class StreamCrashTest:
    def __init__(self, res):
        self.res = res
        self.rng = random.Random(SEED)
        self.content = dc.Content(SEED, pool_pieces=96)
        self.fs = harness.Fratier(options=OPTIONS)
        self.model = {}  # mount-relative path -> (round, bytes): acknowledged files
        self.rounds = 0
        self.killed_streaming = 0
        self.writer_errors = []
        self.acked = 0
        self.files_checked = 0
        self.bytes_checked = 0

    def p(self, *rel):
        return self.fs.path(*rel)

    def start(self):
        self.fs.start()
        for d in DIRS.values():
            if not os.path.isdir(self.p(d)):
                os.makedirs(self.p(d))
                parts = d.split("/")
                for i in range(len(parts), -1, -1):
                    dc.fsync_dir(self.p(*parts[:i]))

    def verify(self, when):
        bad = 0
        for rel in sorted(self.model):
            data = self.model[rel][1]
            if dc.compare(self.res, self.p(rel), data, when):
                self.files_checked += 1
                self.bytes_checked += len(data)
            else:
                bad += 1
        # Half-written files of the killed writers were never acknowledged: they go.
        for d in DIRS.values():
            for n in os.listdir(self.p(d)):
                if d + "/" + n not in self.model:
                    os.unlink(self.p(d, n))
        ok = dc.check_sealed(self.res, [self.p(r) for r in self.model], when)
        return bad == 0 and ok

    def prune(self, before_round):
        for rel in [r for r, (rnd, _) in self.model.items() if rnd < before_round]:
            os.unlink(self.p(rel))
            del self.model[rel]

    def plan(self, rnd, k):
        """The files writer k writes in round rnd: [(path, bytes, seconds to sleep after each MiB)]."""
        rng = random.Random("%d-%d-%d" % (SEED, rnd, k))
        files = []
        for f in range(FILES_PER_WRITER):
            ext = rng.choice(sorted(DIRS))
            size = rng.randrange(2 << 20, 12 << 20)
            if ext == "dbf":
                size -= size % 8192
            rel = "%s/r%03d_w%d_%d.%s" % (DIRS[ext], rnd, k, f, ext)
            # 1 MiB per 0-6 ms: 170 MB/s and up, as archivers write.
            files.append((rel, self.content.make(size, shared=0.6, rng=rng), rng.uniform(0, 0.006)))
        return files

    # A killed FUSE daemon fails its pending and later calls with these, and
    # the kernel's writeback of pages it never took with EIO (at fsync or
    # close); once its dead mount is cleared, names resolve in the empty
    # mount point.
    GONE = (errno.ENOTCONN, errno.ECONNABORTED, errno.EIO, errno.ENOENT)

    def writer(self, files, acked, stop):
        for rel, data, pace in files:
            try:
                fd = os.open(self.p(rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    for off in range(0, len(data), dc.BLOCK):
                        os.write(fd, data[off:off + dc.BLOCK])
                        if pace:
                            time.sleep(pace)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as e:
                # stop is set just before the kill: an error before that came from a live daemon.
                if not stop.is_set() or e.errno not in self.GONE:
                    self.writer_errors.append("%s: %s%s" % (rel, e, "" if stop.is_set() else " (before the kill)"))
                return  # not acknowledged
            acked.append((rel, data))
            if stop.is_set():
                return

    def round(self, rnd):
        self.start()
        if rnd > 0 and not self.verify("after crash %d" % (rnd - 1)):
            return False
        self.prune(rnd - KEEP_ROUNDS)
        acked, stop = [], threading.Event()
        plans = [self.plan(rnd, k) for k in range(WRITERS)]
        threads = [threading.Thread(target=self.writer, args=(plans[k], acked, stop)) for k in range(WRITERS)]
        for t in threads:
            t.start()
        start = time.monotonic()
        # A random moment of the writing, by progress (machines differ in speed): after fewer files
        # were acknowledged than there are writers, so that one is still at its first file (a later
        # file may find every stream slot taken by the first files' streams, still sealing).
        target = self.rng.randrange(WRITERS)
        while len(acked) < target and any(t.is_alive() for t in threads):
            time.sleep(0.001)
        # No stream alive yet (or any more): look again a little later, while the writers write.
        # The state xattr is one FUSE call (tierctl status, a process, can take longer than the writing).
        def streaming():
            done = {r for r, _ in acked}
            return sum(1 for plan in plans for rel, _, _ in plan
                       if rel not in done and "streaming" in dc.state_words(self.p(rel))[2:])
        streams = streaming()
        writing = any(t.is_alive() for t in threads)
        while streams == 0 and writing:
            time.sleep(self.rng.uniform(0.001, 0.01))
            streams = streaming()
            writing = any(t.is_alive() for t in threads)
        delay = time.monotonic() - start
        stop.set()
        os.kill(self.fs.proc.pid, signal.SIGKILL)
        self.fs.kill()  # reaps the daemon, fusermount3 -uz
        for t in threads:
            t.join()
        for rel, data in acked:
            self.model[rel] = (rnd, data)
        self.acked += len(acked)
        # Files not acknowledged yet whose stream is alive: being written and chunked at the kill.
        hit = streams > 0 and writing
        self.killed_streaming += hit
        print("round %d: SIGKILL after %.2fs with %d files streaming%s; %d files acknowledged (%d bytes)%s"
              % (rnd, delay, streams, "" if writing else " and no writer", len(acked),
                 sum(len(d) for _, d in acked), "" if hit else ": the writers were done, again"), flush=True)
        self.rounds += 1
        return self.res.check(not self.writer_errors, "round %d: writers failed: %s" % (rnd, "; ".join(self.writer_errors)))

    def no_leaks(self):
        self.start()
        if not self.verify("after the last crash"):
            return
        dc.delete_all_check_no_leaks(self.res, self.fs, self.model, self.p)

    def run(self):
        rnd = 0
        while self.killed_streaming < ROUNDS and rnd < 3 * ROUNDS:
            if not self.round(rnd):
                return
            rnd += 1
        if self.res.check(self.killed_streaming >= ROUNDS, "only %d of %d rounds killed the daemon with streams alive while "
                          "writers wrote, %d wanted" % (self.killed_streaming, self.rounds, ROUNDS)):
            self.no_leaks()

    def cleanup(self):
        dc.cleanup(self.res, self.fs)


def main():
    harness.require_fuse()
    res = harness.Results("e2e-dedup-stream-crash")
    test = StreamCrashTest(res)
    try:
        test.run()
    except Exception:
        res.check(False, "exception after %d rounds" % test.rounds)
        raise
    finally:
        print("%d crash rounds, %d of them killed with streams alive while writers wrote; %d files acknowledged; seed %d; "
              "%d files and %d bytes verified" % (test.rounds, test.killed_streaming, test.acked, SEED,
                                                  test.files_checked, test.bytes_checked), flush=True)
        test.cleanup()
    res.finish()


if __name__ == "__main__":
    main()
