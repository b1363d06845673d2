#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Migration and recall through the mount, end to end, on the embedded
default (-o data=DIR: tiers DIR/hot and DIR/capacity).

oragen's FRA content (archived logs, backup pieces, image copies) and a
passthrough file are copied in and sealed.  Then:

- tierctl migrate --dry-run lists every sealed file and moves nothing;
- tierctl migrate --to capacity of the whole mount moves every sealed file
  (the passthrough one is skipped, and says why) while reader threads read
  every file in a loop: no read fails or returns a wrong byte;
- ls reports tier 1, every file reads back exactly, and after tierctl gc the
  hot tier's containers are empty while the capacity tier's hold the data;
- recall of a glob of archived logs brings exactly those back to tier 0;
- everything reads back exactly after a remount, and the tiers stay;
- Ctrl-C of a migration leaves every file exact and none "migrating"; a
  file deleted while a recall runs is skipped (or moved before), not failed;
- an append to a file on the capacity tier makes it raw on the hot tier and
  it is sealed again there; unlink of a capacity file is metadata-only;
- migrate is refused to a user who is neither root nor the owner;
- while a file moves, its recipe's spool is a nameless file on the hot
  tier, none is open on the capacity tier's disk;
- deleting everything and collecting leaves both tiers' containers empty.

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_ORAGEN, FRATIER_TIERCTL),
FRATIER_KEEP (keep the data directory).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import harness
import tiercommon as tc
from tiercommon import dc

PASSTHROUGH = "onlinelog/redo01.log"


class Readers:
    """Threads reading every file whole in a loop and comparing it with the model."""

    def __init__(self, fs, model, n=3):
        self.fs, self.model = fs, model
        self.stop = threading.Event()
        self.errors = []
        self.reads = 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(k,)) for k in range(n)]

    def run(self, k):
        rels = sorted(self.model)
        i = k
        while not self.stop.is_set():
            rel = rels[i % len(rels)]
            i += 1
            try:
                ok = dc.read_all(self.fs.path(rel)) == self.model[rel]
                err = None if ok else "wrong bytes"
            except OSError as e:
                err = str(e)
            with self.lock:
                self.reads += 1
                if err:
                    self.errors.append("%s: %s" % (rel, err))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join()
        return False


def start_move(fs, *args):
    """tierctl ARGS --json, returned once its first progress line arrived (a file is being copied)."""
    p = subprocess.Popen([tc.tierctl_path(), "-m", fs.mnt] + list(args) + ["--json"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    first = p.stderr.readline()
    return p, first


def interrupted(res, fs, model):
    """Ctrl-C in the middle of a migration: the files moved stay moved, the one being copied stays put."""
    p, first = start_move(fs, "migrate", fs.mnt)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=300)
    print("migrate interrupted after %r: exit %d" % (first.strip(), p.returncode), flush=True)
    res.check(p.returncode in (0, 130), "interrupted migrate: exit %d: %s" % (p.returncode, err.strip()))
    tc.compare_all(res, fs, model, "after an interrupted migrate")
    # tierctl is gone at once; the daemon notices at the move's next progress
    # report and drops the copy there: wait for that, boundedly.
    for _ in range(600):
        j = tc.tierctl_json(res, fs, "ls", "-l", *sorted({os.path.dirname(fs.path(r)) for r in model}))
        states = {e.get("state") for e in j.get("entries", []) if e.get("type") == "file"}
        if "migrating" not in states:
            break
        time.sleep(0.05)
    res.check("migrating" not in states, "a file still shows migrating after the move stopped: %r" % states)


def deleted_meanwhile(res, fs, model, victim):
    """A file deleted while a recall runs is skipped (or was moved before), never a failure."""
    p, _ = start_move(fs, "recall", fs.mnt)
    os.unlink(fs.path(victim))
    del model[victim]
    out, err = p.communicate(timeout=300)
    res.check(p.returncode == 0, "recall with a file deleted meanwhile: exit %d: %s" % (p.returncode, err.strip()))
    try:
        j = json.loads(out)
    except ValueError:
        j = {}
    res.check(j.get("failed") == 0, "recall with a file deleted meanwhile: %r" % {k: j.get(k) for k in ("moved", "skipped", "failed")})
    tc.compare_all(res, fs, model, "after a recall with a file deleted meanwhile")
    res.check(all(t == 0 for t in tc.tiers_of(res, fs, model).values()), "files left on tier 1 after recall")


def spool_on_hot(res, fs, model):
    """While a file moves to the capacity tier, its recipe's spool is a nameless file on the hot tier,
    never on the target's disk (docs/SECURITY.md: a recipe holds ids, lengths and bytes in clear)."""
    name = "spool/piece.bkp"
    os.makedirs(fs.path("spool"), exist_ok=True)
    # Large enough for the copy to outlast the first progress line by far: 48 steps of 4 MiB.
    model[name] = os.urandom(192 << 20)
    dc.write_file(fs.path(name), model[name])
    if not dc.check_sealed(res, [fs.path(name)], "spool file sealed"):
        return
    staging = {t: os.path.join(fs.data, t, "staging") + "/" for t in ("hot", "capacity")}
    seen = {t: set() for t in staging}
    p, _ = start_move(fs, "migrate", "--to", "capacity", fs.path(name))
    fd_dir = "/proc/%d/fd" % fs.proc.pid
    while p.poll() is None:
        for fd in os.listdir(fd_dir):
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue  # closed meanwhile
            for t, prefix in staging.items():
                if target.startswith(prefix):
                    seen[t].add(target)
    out, err = p.communicate(timeout=300)
    res.check(p.returncode == 0, "migrate of %s: exit %d: %s" % (name, p.returncode, err.strip()))
    print("during the move: %r" % seen, flush=True)
    res.check(any(t.endswith("(deleted)") for t in seen["hot"]),
              "no nameless spool file seen on the hot tier during a move: %r" % seen)
    res.check(not seen["capacity"], "files open in the capacity tier's staging area during a move: %r" % seen)
    dc.compare(res, fs.path(name), model[name], "after a move with its spool")


def run(res, fs, src):
    model = tc.copy_in(fs, src)
    os.makedirs(fs.path("onlinelog"), exist_ok=True)
    model[PASSTHROUGH] = os.urandom(1 << 20)
    dc.write_file(fs.path(PASSTHROUGH), model[PASSTHROUGH])
    sealed = [r for r in model if r != PASSTHROUGH]
    if not dc.check_sealed(res, [fs.path(r) for r in sealed], "seal"):
        return
    hot_before = tc.stored(fs, "hot")

    j = tc.tierctl_json(res, fs, "migrate", "--dry-run", fs.mnt)
    res.check(j.get("would_move") == len(sealed) and j.get("moved") == 0 and j.get("dry_run") == "yes",
              "dry run: %r" % {k: j.get(k) for k in ("would_move", "moved", "skipped", "dry_run")})
    res.check(all(t == 0 for t in tc.tiers_of(res, fs, model).values()), "dry run moved something")

    with Readers(fs, model) as readers:
        j = tc.tierctl_json(res, fs, "migrate", "--to", "capacity", fs.mnt)
    print("migrate: %s moved, %s skipped, %s failed; %s bytes, %s new on the capacity tier; %d reads meanwhile"
          % (j.get("moved"), j.get("skipped"), j.get("failed"), j.get("bytes"), j.get("new_bytes"), readers.reads),
          flush=True)
    res.check(not readers.errors, "reads during migration failed: %s" % "; ".join(readers.errors[:5]))
    res.check(readers.reads > 0, "no read completed during the migration")
    res.check(j.get("moved") == len(sealed) and j.get("failed") == 0 and j.get("to") == 1,
              "migrate: %r" % {k: j.get(k) for k in ("moved", "failed", "skipped", "to")})
    files = {f.get("path", "").lstrip("/"): f for f in j.get("moves", [])}
    res.check(files.get(PASSTHROUGH, {}).get("result") == "skipped" and "passthrough" in files.get(PASSTHROUGH, {}).get("message", ""),
              "passthrough file: %r" % files.get(PASSTHROUGH))
    res.check(j.get("new_bytes", 0) < j.get("bytes", 0),
              "migration stored everything anew (%s of %s bytes): no dedup on the target" % (j.get("new_bytes"), j.get("bytes")))
    tiers = tc.tiers_of(res, fs, model)
    wrong = [r for r in sealed if tiers.get(r) != 1] + ([PASSTHROUGH] if tiers.get(PASSTHROUGH) != 0 else [])
    res.check(not wrong, "after migrate, on the wrong tier: %s" % wrong[:5])
    tc.compare_all(res, fs, model, "after migrate")

    rc, _, err = tc.tierctl(fs, "gc")
    res.check(rc == 0, "gc: %s" % err)
    big = tc.wait_empty(fs, "hot")
    res.check(not big, "hot containers left after migrating everything and gc: %s" % big[:3])
    print("hot tier containers: %d bytes before, %d after; capacity: %d"
          % (hot_before, tc.stored(fs, "hot"), tc.stored(fs, "capacity")), flush=True)
    res.check(tc.stored(fs, "capacity") > 0, "capacity tier holds no containers")
    df = tc.tierctl_json(res, fs, "df")
    caps = [t for t in df.get("tiers", []) if t.get("name") == "capacity"]
    res.check(caps and caps[0].get("reachable") == "yes" and int(caps[0].get("files", 0)) == len(sealed),
              "df capacity row: %r" % caps)

    logs = [r for r in sealed if r.startswith("ORCL/archivelog/") and r.endswith(".arc")]
    res.check(len(logs) >= 2, "oragen wrote no archived logs")
    j = tc.tierctl_json(res, fs, "recall", "--dry-run", fs.path("ORCL", "archivelog") + "/*/*.arc")
    res.check(j.get("would_move") == len(logs), "recall --dry-run of the logs: %r" % j.get("would_move"))
    j = tc.tierctl_json(res, fs, "recall", fs.path("ORCL", "archivelog") + "/*/*.arc")
    res.check(j.get("moved") == len(logs) and j.get("failed") == 0, "recall: %r" % j.get("moved"))
    tiers = tc.tiers_of(res, fs, model)
    wrong = [r for r in sealed if tiers.get(r) != (0 if r in logs else 1)]
    res.check(not wrong, "after recall, on the wrong tier: %s" % wrong[:5])
    tc.compare_all(res, fs, model, "after recall")

    fs.stop()
    fs.start()
    tc.compare_all(res, fs, model, "after remount")
    tiers = tc.tiers_of(res, fs, model)
    res.check(all(tiers.get(r) == (0 if r in logs else 1) for r in sealed), "tiers changed over a remount")

    cold = sorted(r for r in sealed if r not in logs)
    interrupted(res, fs, model)
    deleted_meanwhile(res, fs, model, cold[-1])
    j = tc.tierctl_json(res, fs, "migrate", fs.path(cold[0]), fs.path(cold[1]))
    tiers = tc.tiers_of(res, fs, model)
    res.check(j.get("moved") == 2 and tiers.get(cold[0]) == 1 and tiers.get(cold[1]) == 1,
              "migrate of two files by name: %r" % j.get("moved"))
    appended = cold[0]
    with open(fs.path(appended), "ab") as f:
        f.write(b"appended after migration\n")
    model[appended] += b"appended after migration\n"
    dc.check_sealed(res, [fs.path(appended)], "sealed again after an append")
    res.check(tc.tiers_of(res, fs, model).get(appended) == 0, "%s is not back on the hot tier" % appended)
    dc.compare(res, fs.path(appended), model[appended], "after append")

    gone = cold[1]
    os.unlink(fs.path(gone))
    del model[gone]
    tc.compare_all(res, fs, model, "after unlink")

    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", tc.tierctl_path(),
                        "-m", fs.mnt, "migrate", fs.mnt], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    res.check(p.returncode == 4 and "permission denied" in p.stderr.lower(),
              "migrate as nobody: %d %s" % (p.returncode, p.stderr))

    rc, _, err = tc.tierctl(fs, "migrate", "--to", "7", fs.mnt)
    res.check(rc == 1 and "no tier 7" in err, "migrate to a missing tier: %d %s" % (rc, err))

    spool_on_hot(res, fs, model)

    for r in list(model):
        os.unlink(fs.path(r))
    rc, _, err = tc.tierctl(fs, "gc")
    res.check(rc == 0, "gc: %s" % err)
    for tier in ("hot", "capacity"):
        big = tc.wait_empty(fs, tier)
        res.check(not big, "%s containers left after deleting everything: %s" % (tier, big[:3]))


def main():
    harness.require_fuse()
    res = harness.Results("e2e-migrate")
    tmp = tempfile.mkdtemp(prefix="fratier-migrate-src-", dir=os.environ.get("FRATIER_TMP"))
    try:
        src = os.path.join(tmp, "fra")
        tc.generate(res, src)
        with harness.Fratier(options=dc.OPTIONS) as fs:
            run(res, fs, src)
            if res.failed:
                sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
