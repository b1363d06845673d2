#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A shared tier's filer hung, then killed, in the middle of publications
(docs/SHARED.md): daemons a and b share one nfs-ganesha export, each with a
bounded wait on it (timeout = 2s, retries = 1 in the tier's section), and
collect every second.

- references: a deleted X, so its container of X is condemned and waits
  for b, which references it; the filer hangs (SIGSTOP) and b lets go of
  X: b's collection must publish new references and cannot (tierctl gc on
  b fails, naming the filer's tier).  While it hangs both mounts answer (a
  file on hot reads exactly, a listing works) and b's read of a file whose
  chunks are in a's containers fails with EIO; then the filer dies
  (SIGKILL): b's newest reference publication on the export is still the
  one from before, and a's container is still there.  The server back, b
  publishes and a deletes the container, on their own;
- segments: the filer hangs while a migrates new files to it (and
  publishes their chunks as each file's writer ends), then dies: the
  migration ends with files failed, what it left on hot reads exactly and
  what it moved fails with EIO.  The server back, the same migration moves
  the rest, a has no chunk left unpublished, and b, storing the same
  files, references a's chunks instead of sending them again and loads no
  bad segment: nothing half written counts as published;
- every file of a and b reads back byte-exact after each step and after
  both remount; no temporary is left on the export.

Exits 77 (skip) where a namespace, ganesha or FUSE is not available.

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_TIERCTL), FRATIER_KEEP.
"""

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "nfs"))
import ganesha  # noqa: E402
import harness  # noqa: E402
import tiercommon as tc  # noqa: E402
from tiercommon import dc  # noqa: E402

MiB = 1 << 20
BOUNDED = "timeout = 2s\nretries = 1\n"


def read_errno(path):
    """0 when path reads whole, else the errno of the failure."""
    try:
        dc.read_all(path)
        return 0
    except OSError as e:
        return e.errno


def answers(res, fs, hot, what):
    """The mount serves what does not need the filer: a file on hot, a listing."""
    tc.compare_all(res, fs, hot, "%s: a file on hot" % what)
    res.check(len(os.listdir(fs.mnt)) > 0, "%s: listing the mount" % what)


def phase_references(res, srv, a, b, hot_a, hot_b):
    """b cannot publish that it let go of a's chunks while the filer hangs; it does once the filer is back."""
    root = srv.export
    # X fills a container of its own at least (they hold 32 MiB): deleting X on a empties it.
    x, y = os.urandom(36 * MiB), os.urandom(4 * MiB)
    tc.put_shared(res, a, {"X": x, "Y": y})
    tc.put_shared(res, b, {"X": x, "Y": y})
    res.check(int(tc.filer_row(res, b).get("global_foreign_hits", 0)) > 0, "b referenced nothing of a's X and Y")
    res.check(harness.wait_for(lambda: tc.shared_objects(root, "b", "r", ".ftr")), "b never published references")
    os.unlink(a.path("X"))
    row = harness.wait_for(lambda: (lambda r: r if int(r.get("global_condemned_waiting", 0)) >= 1 else None)(tc.filer_row(res, a)))
    res.check(row is not None and row.get("global_blocked_by") == "b",
              "a's container of X does not wait for b: %r" % {k: v for k, v in (row or {}).items()
                                                              if k.startswith("global_")})
    # A fresh mount: neither its chunk cache nor the page cache holds Y, so reading it needs the filer.
    b.stop()
    b.start()
    # A collection publishes what changed (a restart's first one publishes anew); the beats after it, nothing.
    rc, _, err = tc.tierctl(b, "gc")
    res.check(rc == 0, "b's collection: %s" % err.strip())
    held = tc.shared_objects(root, "a", "c", ".ftc")
    published = tc.shared_objects(root, "b", "r", ".ftr")
    srv.pause()
    os.unlink(b.path("X"))
    # What b's collection beat does every second, asked for: it gives up after the bounded wait and says so.
    rc, _, err = tc.tierctl(b, "gc")
    res.check(rc != 0 and "tier 1 (filer) failed" in err,
              "b's collection with the filer hung: exit %d, %s" % (rc, err.strip()))
    answers(res, a, hot_a, "a while the filer hangs")
    answers(res, b, hot_b, "b while the filer hangs")
    res.check(read_errno(b.path("Y")) == errno.EIO, "b's read of Y (chunks in a's containers) with the filer hung")
    srv.kill()
    res.check(tc.shared_objects(root, "b", "r", ".ftr") == published,
              "b's reference publication changed with its filer hung: %r -> %r"
              % (published, tc.shared_objects(root, "b", "r", ".ftr")))
    res.check(tc.shared_objects(root, "a", "c", ".ftc") == held, "a's containers changed with the filer hung and dead")
    answers(res, b, hot_b, "b with the filer dead")

    srv.start()
    res.check(harness.wait_for(lambda: tc.shared_objects(root, "b", "r", ".ftr") != published),
              "b never published its references once the filer was back: %r" % tc.shared_objects(root, "b", "r", ".ftr"))
    res.check(harness.wait_for(lambda: len(tc.shared_objects(root, "a", "c", ".ftc")) < len(held)),
              "a kept its container of X after b published that it let go: %d containers"
              % len(tc.shared_objects(root, "a", "c", ".ftc")))
    tc.compare_all(res, a, {"Y": y}, "a after the filer came back")
    tc.compare_all(res, b, {"Y": y}, "b after the filer came back")
    print("references: b's publication waited out the hung and dead filer; a's containers %d -> %d"
          % (len(held), len(tc.shared_objects(root, "a", "c", ".ftc"))), flush=True)
    return {"Y": y}


def phase_segments(res, srv, a, b, hot_a, model):
    """a's migration, and the segments it publishes, cut by the filer hanging and dying; resumed once it is back."""
    new = {"N%d" % i: os.urandom(8 * MiB) for i in range(6)}
    paths = []
    for name, data in sorted(new.items()):
        with open(a.path(name), "wb") as f:
            f.write(data)
        paths.append(a.path(name))
    if not dc.check_sealed(res, paths, "seal"):
        return
    published = int(tc.filer_row(res, a).get("global_segments_published", 0))
    mig = subprocess.Popen([tc.tierctl_path(), "-m", a.mnt, "migrate", "--to", "filer", "--json"] + paths,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = False
    deadline = time.monotonic() + 30
    while not started and time.monotonic() < deadline and mig.poll() is None:
        started = tc.tierctl_json(res, a, "status").get("migrate_queue", 0) > 0
        time.sleep(0.05)
    srv.pause()
    res.check(started, "a's migration to the filer was never seen under way")
    moved_before = sum(1 for r, t in tc.tiers_of(res, a, new).items() if r in new and t == 1)
    res.check(moved_before < len(new), "the migration ended before the filer hung: nothing was cut")
    answers(res, a, hot_a, "a while the filer hangs mid-migration")
    srv.kill()
    try:
        out, err = mig.communicate(timeout=300)  # a guard against a hang, not a timing check
    except subprocess.TimeoutExpired:
        mig.kill()
        out, err = mig.communicate()
    j = json.loads(out) if out.strip().startswith("{") else {}
    res.check(mig.returncode == 5 and j.get("failed", 0) > 0,
              "the migration cut by the filer ends with files failed: rc %r, %r %s"
              % (mig.returncode, {k: j.get(k) for k in ("moved", "failed")}, err[-300:]))
    tiers = tc.tiers_of(res, a, new)
    left = {r: d for r, d in new.items() if tiers.get(r) == 0}
    gone = sorted(r for r in new if tiers.get(r) == 1)
    res.check(len(left) + len(gone) == len(new), "a's new files on hot or on the filer: %r" % tiers)
    tc.compare_all(res, a, left, "a's files the cut migration left on hot, with the filer dead")
    for r in gone:
        res.check(read_errno(a.path(r)) == errno.EIO, "%s, moved to the dead filer: expected EIO" % r)

    srv.start()
    j = {}
    deadline = time.monotonic() + harness.scaled(120)
    while time.monotonic() < deadline:
        j = tc.tierctl_json(res, a, "migrate", "--to", "filer", *paths, want_rc=None)
        if j.get("failed", 1) == 0:
            break
        time.sleep(1)
    res.check(j.get("failed") == 0 and j.get("moved", 0) + j.get("already", 0) == len(new),
              "the migration resumes once the filer is back: %r" % {k: j.get(k) for k in ("moved", "already", "failed")})
    row = harness.wait_for(lambda: (lambda r: r if int(r.get("global_chunks_unpublished", -1)) == 0 else None)(tc.filer_row(res, a)))
    res.check(row is not None and int(row.get("global_segments_published", 0)) > published,
              "a's chunks published once the filer was back: %r" % {k: v for k, v in tc.filer_row(res, a).items()
                                                                 if k.startswith("global_")})
    hits = int(tc.filer_row(res, b).get("global_foreign_hits", 0))
    tc.put_shared(res, b, new)
    row = tc.filer_row(res, b)
    res.check(int(row.get("global_foreign_hits", 0)) > hits and int(row.get("global_segments_bad", -1)) == 0,
              "b, storing a's new files, references a's chunks and loads no bad segment: %r"
              % {k: v for k, v in row.items() if k.startswith("global_")})
    model.update(new)
    print("segments: %d of %d files moved before the filer hung; resumed, %s segments published by a, b found %d "
          "of a's chunks" % (moved_before, len(new), tc.filer_row(res, a).get("global_segments_published"),
                             int(row.get("global_foreign_hits", 0)) - hits), flush=True)


def temporaries(root):
    return [p for h in ("a", "b") for p in tc.shared_objects(root, h, "", ".tmp")]


def run(res, tmp, srv):
    # A short bounded wait, so each call to the hung or dead filer gives up in seconds.
    a, b = (tc.shared_daemon(tmp, h, srv.url, tier_keys=BOUNDED) for h in ("a", "b"))
    hot_a, hot_b = {"hot-a": os.urandom(MiB)}, {"hot-b": os.urandom(MiB)}
    with a, b:
        try:
            for fs, hot in ((a, hot_a), (b, hot_b)):
                for name, data in hot.items():
                    with open(fs.path(name), "wb") as f:
                        f.write(data)
            model = phase_references(res, srv, a, b, hot_a, hot_b)
            if not res.failed:
                phase_segments(res, srv, a, b, hot_a, model)
            for fs, hot in ((a, hot_a), (b, hot_b)):
                fs.stop()
                fs.start()
                tc.compare_all(res, fs, dict(model, **hot), "%s remounted" % os.path.basename(fs.base))
            # A publication cut by the filer leaves its .tmp there; the next one of that epoch writes it again.
            res.check(harness.wait_for(lambda: not temporaries(srv.export)),
                      "temporaries left on the export: %r" % temporaries(srv.export))
        finally:
            if res.failed:
                sys.stderr.write("a's log:\n%s\nb's log:\n%s\n" % (a.log_text(), b.log_text()))


def main():
    ganesha.enter_private_namespace()
    harness.require_fuse()
    res = harness.Results("e2e-shared-hang-nfs")
    tmp = tempfile.mkdtemp(prefix="fratier-shared-hang-", dir=os.environ.get("FRATIER_TMP"))
    try:
        with ganesha.Ganesha(os.path.join(tmp, "nfs")) as srv:
            run(res, tmp, srv)
    finally:
        if not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
