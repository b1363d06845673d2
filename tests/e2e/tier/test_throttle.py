#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Background work yields to the foreground (fs/throttle.c), end to end.

Nothing here measures time: the daemon's own counters (tierctl status
--json: throttle_KIND_busy/idle/waits/wait_us, foreground_busy) say what
the throttle did, and the test checks them around each phase.

- background_share=20: files written and sealed; once the daemon reports the
  foreground idle, a migration to the capacity tier runs without a single
  throttled wait (its steps count as idle work);
- while a writer thread keeps writing to the mount and never syncs (the
  daemon reports the foreground busy but not on the disk), a file written
  meanwhile is sealed with units counted busy and off the disk
  (throttle_seal_busy_cpu grows), charged their time on a CPU: the seal
  waits (throttle_seal_waits grows);
- while a writer thread fsyncs after every write, a recall of the same
  files and the seal of a file written meanwhile wait (waits and wait time
  grow for migrate and seal): the hot tier's containers are small
  (CONTAINER_KIB), so that the seal fsyncs containers it fills, on the
  disk itself, while the writer waits on it (a seal's time on a CPU is
  not charged then);
- remounted with background_share=100, a migration under the same writer
  counts busy steps but never waits;
- every file reads back byte-exact, every one is sealed, on the tier it was
  last sent to; tierctl status shows the throttle in its text form too.

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_TIERCTL), FRATIER_KEEP.
"""

import os
import random
import threading
import time

import harness
import tiercommon as tc
from tiercommon import dc

MiB = 1 << 20
FILES = 6
FILE_SIZE = 4 * MiB
CONTAINER_KIB = 256
WAIT_TIMEOUT = 60


class Writer:
    """A thread writing 64 KiB blocks to one file of the mount in a loop: into the
    page cache only, or, with sync, as an archiver bound by the disk (an fsync
    after every write)."""

    def __init__(self, fs, name, sync=False):
        self.path = fs.path(name)
        self.sync = sync
        self.stop = threading.Event()
        self.writes = 0
        self.error = None
        self.thread = threading.Thread(target=self.run)

    def run(self):
        block = random.Random(7).randbytes(64 << 10)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            off = 0
            while not self.stop.is_set():
                os.pwrite(fd, block, off)
                if self.sync:
                    os.fsync(fd)
                off = (off + len(block)) % (16 * MiB)
                self.writes += 1
        except OSError as e:
            self.error = str(e)
        finally:
            os.close(fd)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def wait_foreground(fs, busy, disk=None):
    """Polls the daemon until it reports the foreground busy (or idle), and on the
    disk or not unless disk is None; returns its status then, or None."""
    want = "yes" if busy else "no"
    deadline = time.monotonic() + WAIT_TIMEOUT
    while time.monotonic() < deadline:
        st = dc.status(fs)
        if st.get("foreground_busy") == want and \
                (disk is None or st.get("foreground_disk") == ("yes" if disk else "no")):
            return st
        time.sleep(0.05)
    return None


def counter(st, kind, what):
    return int(st.get("throttle_%s_%s" % (kind, what), -1))


def grew(before, after, kind, what):
    return counter(after, kind, what) > counter(before, kind, what)


def check_metrics(res, fs, migrate_waits):
    """tierctl metrics, parsed by Prometheus' own parser: the share and the migrations' waits so far."""
    from prometheus_client.parser import text_string_to_metric_families
    rc, out, err = tc.tierctl(fs, "metrics")
    samples = {}
    try:
        for fam in text_string_to_metric_families(out):
            for smp in fam.samples:
                samples[(smp.name, smp.labels.get("work"))] = smp.value
    except ValueError as e:
        res.check(False, "tierctl metrics does not parse: %s" % e)
    res.check(rc == 0 and samples.get(("fratier_background_share_ratio", None)) == 0.2,
              "metrics: background share %r %s" % (samples.get(("fratier_background_share_ratio", None)), err.strip()))
    res.check(samples.get(("fratier_throttle_waits_total", "migrate"), -1) >= migrate_waits > 0
              and samples.get(("fratier_throttle_wait_seconds_total", "migrate"), 0) > 0,
              "metrics: the migrations' waits: %r" % {k: v for k, v in samples.items() if k[0].startswith("fratier_throttle")})


def main():
    harness.require_fuse()
    res = harness.Results("e2e-throttle")
    fs = harness.Fratier(options=["seal_delay=0", "gc_interval=3600", "background_share=20",
                                  "container_kib=%d" % CONTAINER_KIB])
    fs.start()
    try:
        rng = random.Random(1)
        os.makedirs(fs.path("backupset"))
        model = {}
        for k in range(FILES):
            rel = "backupset/piece_%d.bkp" % k
            model[rel] = rng.randbytes(FILE_SIZE)
            dc.write_file(fs.path(rel), model[rel], fsync=True)
        dc.check_sealed(res, [fs.path(r) for r in model], "after writing")

        # Idle: not one wait, and the work is counted as idle work.
        s0 = wait_foreground(fs, busy=False)
        if not res.check(s0 is not None, "the daemon never reported the foreground idle"):
            return
        res.check(str(s0.get("background_share")) == "20", "background_share %r, expected 20" % s0.get("background_share"))
        rc, _, err = tc.tierctl(fs, "migrate", "--to", "1", fs.path("backupset"))
        res.check(rc == 0, "migrate while idle: exit %d: %s" % (rc, err.strip()))
        s1 = dc.status(fs)
        res.check(grew(s0, s1, "migrate", "idle"), "an idle migration counted no idle steps: %r -> %r"
                  % (counter(s0, "migrate", "idle"), counter(s1, "migrate", "idle")))
        for kind in ("seal", "migrate", "gc", "rekey", "index"):
            for what in ("busy", "waits", "wait_us"):
                res.check(counter(s1, kind, what) == counter(s0, kind, what),
                          "foreground idle, yet throttle_%s_%s went from %d to %d"
                          % (kind, what, counter(s0, kind, what), counter(s1, kind, what)))
        print("idle migration: %d steps, 0 waits" % (counter(s1, "migrate", "idle") - counter(s0, "migrate", "idle")),
              flush=True)

        # Busy on the CPU: a writer that never syncs; a file written meanwhile (no fsync) is sealed.
        with Writer(fs, "noise.dat") as w:
            sa = wait_foreground(fs, busy=True, disk=False)
            if res.check(sa is not None, "the daemon never reported the foreground busy and off the disk"):
                rel = "backupset/late-cpu.bkp"
                model[rel] = rng.randbytes(2 * FILE_SIZE)
                dc.write_file(fs.path(rel), model[rel])
                dc.check_sealed(res, [fs.path(rel)], "written beside a writer that never syncs")
                sb = dc.status(fs)
                busy = counter(sb, "seal", "busy") - counter(sa, "seal", "busy")
                cpu = counter(sb, "seal", "busy_cpu") - counter(sa, "seal", "busy_cpu")
                waits = counter(sb, "seal", "waits") - counter(sa, "seal", "waits")
                res.check(busy > 0, "beside a writer, the seal counted no busy units")
                res.check(cpu > 0, "beside a writer that never syncs, no seal unit saw it off the disk: "
                          "throttle_seal_busy_cpu %d -> %d" % (counter(sa, "seal", "busy_cpu"), counter(sb, "seal", "busy_cpu")))
                res.check(waits > 0, "beside a writer that never syncs, the seal was not charged its CPU: "
                          "throttle_seal_waits %d -> %d" % (counter(sa, "seal", "waits"), counter(sb, "seal", "waits")))
                print("beside a writer that never syncs (%d writes so far): %d seal units busy, %d off the disk, %d waits"
                      % (w.writes, busy, cpu, waits), flush=True)
        res.check(w.error is None, "the writer failed: %s" % w.error)

        # Busy on the disk: a writer that fsyncs after every write, while files are recalled and a new one is sealed.
        with Writer(fs, "noise.dat", sync=True) as w:
            s2 = wait_foreground(fs, busy=True, disk=True)
            if res.check(s2 is not None, "the daemon never reported the foreground busy"):
                rc, _, err = tc.tierctl(fs, "recall", fs.path("backupset"))
                res.check(rc == 0, "recall under load: exit %d: %s" % (rc, err.strip()))
                rel = "backupset/late.bkp"
                model[rel] = rng.randbytes(2 * FILE_SIZE)
                dc.write_file(fs.path(rel), model[rel], fsync=True)
                dc.check_sealed(res, [fs.path(rel)], "written under load")
                s3 = dc.status(fs)
                for kind in ("migrate", "seal"):
                    for what in ("busy", "waits", "wait_us"):
                        res.check(grew(s2, s3, kind, what), "beside a writer that syncs, throttle_%s_%s did not grow: %d -> %d"
                                  % (kind, what, counter(s2, kind, what), counter(s3, kind, what)))
                print("beside a writer that syncs (%d writes so far): migrate waited %d times, %.2f s; seal %d times, %.2f s"
                      % (w.writes, counter(s3, "migrate", "waits") - counter(s2, "migrate", "waits"),
                         (counter(s3, "migrate", "wait_us") - counter(s2, "migrate", "wait_us")) / 1e6,
                         counter(s3, "seal", "waits") - counter(s2, "seal", "waits"),
                         (counter(s3, "seal", "wait_us") - counter(s2, "seal", "wait_us")) / 1e6), flush=True)
        res.check(w.error is None, "the writer failed: %s" % w.error)
        rc, out, _ = tc.tierctl(fs, "status")
        res.check(rc == 0 and "background:  20% of the time" in out, "tierctl status shows no throttle line:\n" + out)
        check_metrics(res, fs, counter(s3, "migrate", "waits"))

        # background_share=100: busy steps, never a wait.
        fs.stop()
        fs.options = [o for o in fs.options if not o.startswith("background_share=")] + ["background_share=100"]
        fs.start()
        with Writer(fs, "noise.dat") as w:
            s4 = wait_foreground(fs, busy=True)
            if res.check(s4 is not None, "the daemon never reported the foreground busy (share 100)"):
                res.check(str(s4.get("background_share")) == "100", "background_share %r, expected 100"
                          % s4.get("background_share"))
                rc, _, err = tc.tierctl(fs, "migrate", "--to", "1", fs.path("backupset"))
                res.check(rc == 0, "migrate at share 100: exit %d: %s" % (rc, err.strip()))
                s5 = dc.status(fs)
                res.check(grew(s4, s5, "migrate", "busy"), "share 100: the migration counted no busy steps")
                for kind in ("seal", "migrate", "gc", "rekey", "index"):
                    res.check(counter(s5, kind, "waits") == 0, "share 100, yet %s waited %d times"
                              % (kind, counter(s5, kind, "waits")))
        res.check(w.error is None, "the writer failed: %s" % w.error)
        os.unlink(fs.path("noise.dat"))

        # Everything exact, sealed, and where it was sent last.
        dc.check_sealed(res, [fs.path(r) for r in model], "at the end")
        tiers = tc.tiers_of(res, fs, model)
        res.check(all(tiers.get(r) == 1 for r in model), "not every file is on tier 1: %r" % tiers)
        tc.compare_all(res, fs, model, "at the end")
        fs.stop()
    finally:
        dc.cleanup(res, fs)
    res.finish()


if __name__ == "__main__":
    main()
