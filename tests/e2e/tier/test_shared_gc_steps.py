#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Crashes of collection across hosts at chosen steps (docs/SHARED.md, "Why
a crash at any step loses nothing"): daemons a and b share one capacity
directory with a 4 s lease and collect every second.

The kill is the kernel's own SIGKILL at the entry of one system call:
strace attaches to the running daemon and injects it
(-e inject=SYSCALL:signal=SIGKILL, -P NAME) on the first rename or unlink
of one object name, so the call itself never runs.  Nothing in the product
knows of it.  Each case proves its kill landed there: strace's log holds
that one call followed by "killed by SIGKILL", the daemon's status is
SIGKILL, and the tier and the catalog are in the state of that moment.

- a condemns its container of U (b references it) and is killed at the
  rename of the condemnation onto k/EPOCH.ftk: the synced .tmp is there, the
  condemnation is not; remounted, a condemns it again, b still reads U;
- b drops U and is killed at the rename of its new reference publication:
  its older publication stays, the .tmp is there;
- b remounted publishes; a releases the container and is killed at its
  unlink: the container object is there, its catalog row is gone (rows
  before objects); remounted, a deletes it as an orphan;
- a condemns W, b acknowledges it and is killed at the unlink of its older
  publication: both are there; remounted, the next publication removes the
  older one;
- a merges its condemnations (every 16) and is killed at the rename of the
  merged one (the .tmp is there, the single ones all are), then at the
  first unlink of a single one the next merge covers (the merged one is
  there, the single ones all are); b acknowledges through them and keeps
  reading the container it references;
- after each kill and remount every file of a and b reads back byte-exact
  (V is b's, referenced by a; U is a's, referenced by b while b keeps it),
  and at the end every condemned container is collected and no temporary
  is left.

A directory tier only: over NFS the daemon's calls are RPCs on a socket,
not per-object system calls (e2e-shared-gc-nfs kills at delays instead).

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_TIERCTL), FRATIER_KEEP,
FRATIER_SOAK=1 (the four cases twice more, on new data).
"""

import os
import re
import shutil
import sqlite3
import struct
import subprocess
import sys
import time

import harness
import tiercommon as tc

LEASE = 4
MiB = 1 << 20
ROUNDS = 3 if os.environ.get("FRATIER_SOAK") == "1" else 1
STRACE = shutil.which("strace")


def names(root, host, sub, pattern):
    """Object names (relative to the tier's root) under h/HOST/SUB whose base name matches pattern."""
    out = []
    for d, _, ns in os.walk(os.path.join(root, "h", host, sub)):
        out += [os.path.relpath(os.path.join(d, n), root) for n in ns if re.fullmatch(pattern, n)]
    return sorted(out)


def epochs(root, host, sub, suffix):
    return sorted(int(os.path.basename(n)[:16], 16) for n in names(root, host, sub, r"[0-9a-f]{16}\." + suffix))


def epoch_name(host, sub, epoch, suffix):
    return "h/%s/%s/%016x.%s" % (host, sub, epoch, suffix)


def acks(root, host):
    """{host: epoch} acknowledged by host's latest reference publication (dedup/refs.h)."""
    e = epochs(root, host, "r", "ftr")
    if not e:
        return {}
    try:
        with open(os.path.join(root, epoch_name(host, "r", e[-1], "ftr")), "rb") as f:
            buf = f.read()
    except FileNotFoundError:
        return {}
    n_acks = struct.unpack_from("<I", buf, 40)[0]
    return {buf[80 + 40 * i:112 + 40 * i].rstrip(b"\0").decode(): struct.unpack_from("<Q", buf, 112 + 40 * i)[0]
            for i in range(n_acks)}


def catalog_has_container(fs, cid):
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(fs.data, "hot", "catalog.db"), uri=True, timeout=30)
    try:
        return db.execute("SELECT count(*) FROM containers WHERE id = ? AND host IS NULL", (cid,)).fetchone()[0] > 0
    finally:
        db.close()


def refer(res, fs, files):
    """Migrates files another host published already: fs references its chunks."""
    # fs's writers list the others' segments at most every 2 s; its collection lists them at once.
    rc, _, err = tc.tierctl(fs, "gc")
    res.check(rc == 0, "gc: %s" % err)
    hits = foreign_hits(res, fs)
    tc.put_shared(res, fs, files)
    res.check(foreign_hits(res, fs) > hits, "%s referenced nothing of %s" % (os.path.basename(fs.base), sorted(files)))


def foreign_hits(res, fs):
    rows = [t for t in tc.tierctl_json(res, fs, "status").get("tiers", []) if t.get("tier") == 1]
    return int(rows[0].get("global_foreign_hits", 0)) if rows else 0


class StepKill:
    """strace attached to fs's daemon: the kernel SIGKILLs it at the entry of the first `call` naming one of
    objects (names relative to the tier's root, as the directory backend passes them to *at calls)."""

    def __init__(self, res, fs, call, objects, log):
        self.res, self.fs, self.call, self.objects, self.log = res, fs, call, objects, log
        calls = {"rename": "renameat,renameat2", "unlink": "unlinkat"}[call]
        args = [STRACE, "-f", "-p", str(fs.proc.pid), "-o", log, "-e", "trace=" + calls,
                "-e", "inject=%s:signal=SIGKILL" % calls]
        for o in objects:
            args += ["-P", o]
        self.err = log + ".stderr"
        with open(self.err, "w") as err:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        # strace says so once every thread of the daemon is attached: from then on no such call escapes it.
        if not harness.wait_for(lambda: "attached" in self.said() or self.proc.poll() is not None) or \
                "attached" not in self.said():
            self.proc.kill()
            self.proc.wait()
            res.check(False, "strace did not attach to %s: %s" % (fs.mnt, self.said()))
            res.finish()

    def said(self):
        with open(self.err) as f:
            return f.read()

    def landed(self, what):
        """Waits for the daemon to die; True when it died of the injected SIGKILL at that call."""
        try:
            rc = self.fs.proc.wait(harness.scaled(90))
        except subprocess.TimeoutExpired:
            rc = None
        if rc is None:
            self.proc.terminate()  # strace detaches: the daemon runs on, the case has failed
        self.proc.wait(timeout=60)
        with open(self.log) as f:
            log = f.read()
        lines = [l for l in log.splitlines() if l.strip()]
        calls = [l for l in lines if re.search(r"\b(renameat2?|unlinkat)\(", l)]
        hit = [o for o in self.objects if calls and '"%s"' % o in calls[-1]]
        # The call never returns: strace shows it unfinished (or "= ?") and then the kill.
        ok = (rc == -9 and len(calls) == 1 and hit and re.search(r"(= \?|<unfinished \.\.\.>)$", calls[0].rstrip()) and
              "+++ killed by SIGKILL +++" in lines[-1])
        self.res.check(ok, "%s: the daemon was not killed at the %s of %s (status %r); strace: %s" %
                       (what, self.call, self.objects, rc, log[-1500:]))
        print("%s: killed at %s" % (what, calls[0] if calls else "?"), flush=True)
        self.fs.kill()  # clears the stale mount; the daemon is already gone
        return bool(ok) and hit[0]


def temporaries(root):
    return [n for h in ("a", "b") for sub in ("r", "k", "s") for n in names(root, h, sub, r".*\.tmp")]


def one_round(res, tmp, root, a, b, models, i):
    log = os.path.join(tmp, "strace-%d-%%s.log" % i)
    res.check(harness.wait_for(lambda: not names(root, "a", "c", r"[0-9a-f]{16}\.ftc")),
              "round %d: a still keeps containers of the last round: %r" % (i, names(root, "a", "c", r".*")))
    v, u, w = os.urandom(2 * MiB), os.urandom(3 * MiB), os.urandom(1 * MiB)
    # V is b's, and a reads it from b's container; U is a's alone in its container, and b reads it from there.
    tc.put_shared(res, b, {"V%d" % i: v})
    tc.put_shared(res, a, {"V%d" % i: v, "U%d" % i: u})
    models["a"].update({"V%d" % i: v, "U%d" % i: u})
    refer(res, b, {"U%d" % i: u})
    models["b"].update({"V%d" % i: v, "U%d" % i: u})

    def compare(what):
        for h, fs in (("a", a), ("b", b)):
            tc.compare_all(res, fs, models[h], "%s, %s" % (h, what))

    # 1. a condemns U's container and dies at the rename of the condemnation.
    k = (epochs(root, "a", "k", "ftk") or [0])[-1] + 1
    kill = StepKill(res, a, "rename", [epoch_name("a", "k", k, "ftk")], log % "condemn")
    os.unlink(a.path("U%d" % i))
    del models["a"]["U%d" % i]
    if kill.landed("round %d, condemnation" % i):
        res.check(os.path.exists(os.path.join(root, epoch_name("a", "k", k, "ftk") + ".tmp")) and
                  not os.path.exists(os.path.join(root, epoch_name("a", "k", k, "ftk"))),
                  "killed at the rename of the condemnation, not both .tmp and no %s" % epoch_name("a", "k", k, "ftk"))
    held = names(root, "a", "c", r"[0-9a-f]{16}\.ftc")
    a.start()
    compare("after a was killed at its condemnation")
    res.check(harness.wait_for(lambda: os.path.exists(os.path.join(root, epoch_name("a", "k", k, "ftk")))),
              "a did not condemn again after the restart")
    # b acknowledges a's condemnation (its next publication): from then on b publishes only when its references change.
    res.check(harness.wait_for(lambda: acks(root, "b").get("a", 0) >= k), "b never acknowledged a's condemnation %d" % k)
    res.check(names(root, "a", "c", r"[0-9a-f]{16}\.ftc") == held, "a deleted a container b references")

    # 2. b drops U and dies at the rename of its new reference publication.
    r = epochs(root, "b", "r", "ftr")[-1]
    kill = StepKill(res, b, "rename", [epoch_name("b", "r", r + 1, "ftr")], log % "publish")
    os.unlink(b.path("U%d" % i))
    del models["b"]["U%d" % i]
    if kill.landed("round %d, reference publication" % i):
        res.check(os.path.exists(os.path.join(root, epoch_name("b", "r", r + 1, "ftr") + ".tmp")) and
                  epochs(root, "b", "r", "ftr") == [r],
                  "killed at the rename of the publication: .tmp %s, publications %r" %
                  (os.path.exists(os.path.join(root, epoch_name("b", "r", r + 1, "ftr") + ".tmp")),
                   epochs(root, "b", "r", "ftr")))
    res.check(names(root, "a", "c", r"[0-9a-f]{16}\.ftc") == held, "a deleted a container b's publication names")

    # 3. b's next publication releases U's container: a dies at its unlink, after its row was deleted.
    kill = StepKill(res, a, "unlink", held, log % "release")
    b.start()
    gone = kill.landed("round %d, release" % i)
    if gone:
        cid = int(os.path.basename(gone)[:16], 16)
        res.check(os.path.exists(os.path.join(root, gone)) and not catalog_has_container(a, cid),
                  "killed at the unlink of %s: object there %s, catalog row there %s (expected the object, no row)" %
                  (gone, os.path.exists(os.path.join(root, gone)), catalog_has_container(a, cid)))
    a.start()
    compare("after a was killed releasing a container")
    res.check(harness.wait_for(lambda: not set(held) & set(names(root, "a", "c", r"[0-9a-f]{16}\.ftc"))),
              "a did not collect the container it was killed deleting: %r" % names(root, "a", "c", r".*"))

    # 4. a condemns W; b acknowledges it and dies at the unlink of its older publication.
    tc.put_shared(res, a, {"W%d" % i: w})
    res.check(harness.wait_for(lambda: len(epochs(root, "b", "r", "ftr")) == 1), "b keeps older publications: %r" %
              epochs(root, "b", "r", "ftr"))
    r = epochs(root, "b", "r", "ftr")[-1]
    kill = StepKill(res, b, "unlink", [epoch_name("b", "r", r, "ftr")], log % "prune")
    os.unlink(a.path("W%d" % i))
    if kill.landed("round %d, removal of the older publication" % i):
        got = epochs(root, "b", "r", "ftr")
        res.check(len(got) == 2 and got[0] == r, "killed at the unlink of publication %d: publications %r" % (r, got))
    b.start()
    compare("after b was killed removing its older publication")
    res.check(harness.wait_for(lambda: len(epochs(root, "b", "r", "ftr")) == 1), "b's older publication never removed: %r" %
              epochs(root, "b", "r", "ftr"))


def merge_case(res, tmp, root, a, b, models):
    """Kills while a merges its condemnations (every DEDUP_CONDEMN_MERGE_AT = 16): at the rename of the merged one,
    then at the first unlink of a single one it covers; b reads what it references throughout."""
    h = os.urandom(1 * MiB)
    tc.put_shared(res, a, {"H": h})
    refer(res, b, {"H": h})
    models["b"]["H"] = h
    held = names(root, "a", "c", r"[0-9a-f]{16}\.ftc")
    log = os.path.join(tmp, "strace-merge-%s.log")
    n = [0]

    def condemn_one(kill=None, what=None):
        """One collection of a that condemns one container (of a file written and dropped for it)."""
        last = (epochs(root, "a", "k", "ftk") or [0])[-1]
        if n[0] > 0:
            tc.put_shared(res, a, {"D%d" % n[0]: os.urandom(64 * 1024)})
            os.unlink(a.path("D%d" % n[0]))
        else:
            os.unlink(a.path("H"))  # the first: the container b references
        n[0] += 1
        if kill:
            subprocess.run([tc.tierctl_path(), "-m", a.mnt, "gc"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=harness.scaled(120))
            return kill.landed(what)
        rc, _, err = tc.tierctl(a, "gc")
        res.check(rc == 0 and (epochs(root, "a", "k", "ftk") or [0])[-1] > last,
                  "a condemned nothing after dropping a file: %s" % err)
        return None

    def merged():
        return (epochs(root, "a", "k", "ftm") or [0])[-1]

    t0 = time.monotonic()
    # Up to one short of the merge.
    while True:
        nxt = max([merged()] + epochs(root, "a", "k", "ftk")) + 1
        if nxt - merged() >= 16:
            break
        condemn_one()
    m = merged()
    singles = epochs(root, "a", "k", "ftk")
    kill = StepKill(res, a, "rename", [epoch_name("a", "k", nxt, "ftm")], log % "rename")
    if condemn_one(kill, "merge, rename of the merged condemnation %d" % nxt):
        res.check(os.path.exists(os.path.join(root, epoch_name("a", "k", nxt, "ftm") + ".tmp")) and merged() == m and
                  epochs(root, "a", "k", "ftk") == singles + [nxt],
                  "killed at the rename of the merged condemnation: merged %d, singles %r, expected %r" %
                  (merged(), epochs(root, "a", "k", "ftk"), singles + [nxt]))
    a.start()
    tc.compare_all(res, b, models["b"], "b after a was killed merging its condemnations")

    singles = epochs(root, "a", "k", "ftk")
    nxt = singles[-1] + 1
    kill = StepKill(res, a, "unlink", [epoch_name("a", "k", e, "ftk") for e in singles], log % "unlink")
    if condemn_one(kill, "merge, removal of a merged single condemnation"):
        res.check(merged() == nxt and epochs(root, "a", "k", "ftk") == singles + [nxt],
                  "killed at the first unlink after the merge: merged %d (expected %d), singles %r" %
                  (merged(), nxt, epochs(root, "a", "k", "ftk")))
    a.start()
    tc.compare_all(res, b, models["b"], "b after a was killed removing merged condemnations")
    res.check(harness.wait_for(lambda: acks(root, "b").get("a", 0) >= nxt),
              "b never acknowledged a's merged condemnations: ack %r, merged %d" % (acks(root, "b").get("a"), nxt))
    res.check(set(held) <= set(names(root, "a", "c", r"[0-9a-f]{16}\.ftc")), "a deleted the container b references")
    os.unlink(b.path("H"))
    del models["b"]["H"]
    print("merge: %d condemnations, merged %d, single ones left %r (%.0f s)" %
          (n[0], merged(), epochs(root, "a", "k", "ftk"), time.monotonic() - t0), flush=True)


def run(res, tmp, filer, root):
    if filer.startswith("nfs://"):
        res.check(False, "the kills at a step need a directory tier")
        return
    if not STRACE:
        print("SKIP: strace is not installed (scripts/install-deps.sh installs it)", flush=True)
        sys.exit(harness.SKIP)
    a, b = (tc.shared_daemon(tmp, h, filer, lease=LEASE) for h in ("a", "b"))
    models = {"a": {}, "b": {}}
    with a, b:
        for i in range(ROUNDS):
            one_round(res, tmp, root, a, b, models, i)
        merge_case(res, tmp, root, a, b, models)
        # Every container of a that nothing references any more is collected; no temporary is left.
        res.check(harness.wait_for(lambda: not names(root, "a", "c", r"[0-9a-f]{16}\.ftc")),
                  "a kept containers nothing references: %r" % names(root, "a", "c", r".*"))
        res.check(harness.wait_for(lambda: not temporaries(root)), "temporaries left after the crashes: %r" % temporaries(root))
        for h, fs in (("a", a), ("b", b)):
            tc.compare_all(res, fs, models[h], "%s at the end" % h)


def main():
    tc.shared_filer_main("e2e-shared-gc-steps", run)


if __name__ == "__main__":
    sys.exit(main())
