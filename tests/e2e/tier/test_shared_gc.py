#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Collection across hosts on a shared tier (docs/SHARED.md, "Safe
collection"): daemons a, b and c share one capacity directory (or, with
--nfs, one nfs-ganesha export) with a 4 s lease, and collect every second.

- a migrates P (36 MiB, more than one container) and Q; b migrates the same
  Q (it references a's chunks) and F of its own; b is stopped (SIGSTOP); a
  deletes P and Q: its emptied containers are condemned (h/a/k/) and not
  one is deleted while b has not acknowledged them — status names b, which
  shows expired once its lease ran out; b continued: the container of P
  alone goes, the one b references stays, and b reads Q and F byte-exact;
  b deletes Q: every container of a goes;
- a migrates S and T, c migrates T; then at once a deletes both and
  collects, b migrates S (identical data), and c reads T: all byte-exact,
  also after b and c remount;
- c SIGKILLed: once expired, a's new condemnations wait for it (status,
  metrics fratier_shared_host_expired_seconds and
  fratier_tier_global_condemned_waiting); tierctl host retire c: they go;
- rounds of SIGKILL of a, then b, while they collect (and publish their
  references), with a remount after each: every byte of b's files there,
  and once b lets go, every container of a is collected, no temporary of a
  publication or condemnation is left.

With --nfs only the first part runs, unless FRATIER_SOAK=1: the protocol
is the same, and the default suite's time is kept for the other tests.

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_TIERCTL), FRATIER_KEEP,
FRATIER_SOAK=1 (more crash rounds; every part over NFS too).
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import harness
import tiercommon as tc
from tiercommon import dc

LEASE = 4
MiB = 1 << 20
SOAK = os.environ.get("FRATIER_SOAK") == "1"
ROUNDS = 8 if SOAK else 2 if os.environ.get("FRATIER_TEST_BUILD") == "asan" else 3


def host_state(res, fs, host):
    j = tc.tierctl_json(res, fs, "status")
    return {r["host"]: r for r in j.get("hosts", []) if r.get("tier") == 1}.get(host, {}).get("state")


def compare(res, fs, model, what):
    return tc.compare_all(res, fs, model, what)


def phase_ack(res, root, a, b):
    """A container is deleted only once every host acknowledged its condemnation and does not reference it."""
    p, q, f = os.urandom(36 * MiB), os.urandom(8 * MiB), os.urandom(2 * MiB)
    tc.put_shared(res, a, {"P": p, "Q": q})
    tc.put_shared(res, b, {"Q": q, "F": f})
    res.check(int(tc.filer_row(res, b).get("global_foreign_hits", 0)) > 0, "b referenced nothing of a's Q")
    before = tc.shared_objects(root, "a", "c", ".ftc")
    res.check(len(before) >= 2, "a's P and Q in %d containers, expected 2 or more" % len(before))
    res.check(harness.wait_for(lambda: tc.shared_objects(root, "b", "r", ".ftr")), "b never published references")

    harness.stop_process(b.proc.pid)
    try:
        os.unlink(a.path("P"))
        os.unlink(a.path("Q"))
        row = harness.wait_for(lambda: (lambda r: r if int(r.get("global_condemned_waiting", 0)) >= 2
                                                  else None)(tc.filer_row(res, a)))
        res.check(row and row.get("global_blocked_by") == "b",
                  "a's condemned containers do not wait for b: %r" % {k: v for k, v in (row or {}).items()
                                                                     if k.startswith("global_")})
        res.check(len(tc.shared_objects(root, "a", "k", ".ftk")) >= 1, "a condemned nothing (no h/a/k/*.ftk)")
        res.check(harness.wait_for(lambda: host_state(res, a, "b") == "expired", harness.scaled(6 * LEASE)),
                  "b never showed expired while stopped")
        rc, out, err = tc.tierctl(a, "gc")
        res.check(rc == 0, "gc on a: %s" % err)
        rc, out, _ = tc.tierctl(a, "status")
        res.check("wait for host b" in out and "host b on tier filer is expired, not retired" in out and
                  "blocks collection" in out, "status of a with b stopped: %s" % out[-1500:])
        after = tc.shared_objects(root, "a", "c", ".ftc")
        res.check(after == before, "a deleted containers b had not acknowledged: %d -> %d" % (len(before), len(after)))
        print("b stopped: a keeps %d containers, %s condemned containers wait for b"
              % (len(after), tc.filer_row(res, a).get("global_condemned_waiting")), flush=True)
    finally:
        os.kill(b.proc.pid, signal.SIGCONT)

    # b acknowledges: what it does not reference goes, what it references stays.
    left = harness.wait_for(lambda: (lambda o: o if len(o) < len(before) else None)(
        tc.shared_objects(root, "a", "c", ".ftc")))
    res.check(left and len(left) >= 1, "after b acknowledged: a kept %d of %d containers (expected fewer, not none)"
              % (len(left or before), len(before)))
    res.check(int(tc.filer_row(res, a).get("global_condemned_waiting", 0)) >= 1, "a's container b references is not held")
    compare(res, b, {"Q": q, "F": f}, "b after a collected what b does not reference")
    print("b continued: a's containers %d -> %d" % (len(before), len(left or before)), flush=True)

    os.unlink(b.path("Q"))
    res.check(harness.wait_for(lambda: not tc.shared_objects(root, "a", "c", ".ftc")),
              "a kept containers after b let go: %r" % tc.shared_objects(root, "a", "c", ".ftc"))
    compare(res, b, {"F": f}, "b after a collected everything")
    return {"F": f}


def phase_concurrent(res, root, a, b, c, model_b):
    """a collects while b migrates the same data and c reads what references a's containers."""
    s, t = os.urandom(8 * MiB), os.urandom(8 * MiB)
    tc.put_shared(res, a, {"S": s, "T": t})
    tc.put_shared(res, c, {"T": t})
    res.check(int(tc.filer_row(res, c).get("global_foreign_hits", 0)) > 0, "c referenced nothing of a's T")
    errors = []

    def collector():
        os.unlink(a.path("S"))
        os.unlink(a.path("T"))
        for _ in range(5):
            rc, _, err = tc.tierctl(a, "gc")
            if rc != 0:
                errors.append("gc on a: " + err)

    def migrator():
        try:
            tc.put_shared(res, b, {"S": s})
        except Exception as e:  # noqa: BLE001: reported as a check below
            errors.append("b: %r" % e)

    def reader():
        for _ in range(5):
            if dc.read_all(c.path("T")) != t:
                errors.append("c read T wrong while a collected")

    threads = [threading.Thread(target=fn) for fn in (collector, migrator, reader)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    res.check(not errors, "while a collected: %s" % errors)
    b.stop()
    b.start()
    c.stop()
    c.start()
    model_b["S"] = s
    compare(res, b, model_b, "b after migrating what a collected at once, remounted")
    compare(res, c, {"T": t}, "c after reading while a collected, remounted")
    return {"T": t}


def phase_expired(res, root, a, b, c, model_b):
    """An expired host blocks collection until it is retired."""
    c.kill()
    res.check(harness.wait_for(lambda: host_state(res, a, "c") == "expired", harness.scaled(6 * LEASE)),
              "c never showed expired")
    tc.put_shared(res, a, {"R": os.urandom(4 * MiB)})
    os.unlink(a.path("R"))
    os.unlink(b.path("S"))  # b lets go of a's S: only c holds anything of a now
    row = harness.wait_for(lambda: (lambda r: r if r.get("global_blocked_by") == "c" and
                                             int(r.get("global_condemned_waiting", 0)) > 0 else None)(tc.filer_row(res, a)))
    res.check(row is not None, "a's collection does not wait for expired c: %r" % tc.filer_row(res, a))
    rc, out, _ = tc.tierctl(a, "status")
    res.check("wait for host c" in out and "host c on tier filer is expired, not retired" in out,
              "status of a with c expired: %s" % out[-1500:])
    rc, m, _ = tc.tierctl(a, "metrics")
    res.check(re.search(r'^fratier_shared_host_expired_seconds\{tier="1",name="filer",host="c"\} \d+$', m, re.M) and
              re.search(r'^fratier_tier_global_condemned_waiting\{tier="1",name="filer"\} [1-9]', m, re.M),
              "metrics of a with c expired: %s" % "\n".join(l for l in m.splitlines() if "shared" in l or "condemned" in l))
    held = tc.shared_objects(root, "a", "c", ".ftc")
    res.check(held, "a deleted its containers while expired c had not acknowledged them")
    rc, out, err = tc.tierctl(a, "host", "retire", "c", "--tier", "1")
    res.check(rc == 0 and "retired" in out, "retire c: %s %s" % (out, err))
    res.check(harness.wait_for(lambda: not tc.shared_objects(root, "a", "c", ".ftc")),
              "a kept %d containers after c was retired" % len(tc.shared_objects(root, "a", "c", ".ftc")))
    res.check(int(tc.filer_row(res, a).get("global_condemned_waiting", 0)) == 0, "a still waits after c was retired")
    print("c expired held %d containers of a; retired: all collected" % len(held), flush=True)
    compare(res, b, {k: v for k, v in model_b.items() if k != "S"}, "b after c was retired")


def phase_crash(res, root, a, b, model_b):
    """SIGKILL of a and b while they collect and publish; everything there after remounts, and collected later."""
    model_b = {k: v for k, v in model_b.items() if k != "S"}
    for i in range(ROUNDS):
        u = os.urandom(3 * MiB)
        tc.put_shared(res, a, {"U%d" % i: u})
        tc.put_shared(res, b, {"U%d" % i: u})
        os.unlink(a.path("U%d" % i))
        for fs, delay in ((a, 0.002 * (1 + 7 * i)), (b, 0.003 * (1 + 5 * i))):
            gc = popen_gc(fs)
            time.sleep(delay)
            fs.kill()
            gc.wait(timeout=60)
            fs.start()
        model_b["U%d" % i] = u
        compare(res, b, model_b, "b after SIGKILL of a and b while collecting, round %d" % (i + 1))
    for i in range(ROUNDS):
        os.unlink(b.path("U%d" % i))
        del model_b["U%d" % i]
    res.check(harness.wait_for(lambda: not tc.shared_objects(root, "a", "c", ".ftc")),
              "a kept %d containers after the crashes" % len(tc.shared_objects(root, "a", "c", ".ftc")))
    # A publication is under way every second: a temporary may be seen for a moment, never for long.
    def temporaries():
        return [p for h in ("a", "b") for sub in ("r", "k") for p in tc.shared_objects(root, h, sub, ".tmp")]
    res.check(harness.wait_for(lambda: not temporaries()),
              "temporaries left after the crashes: %r" % temporaries())
    res.check(all(len(tc.shared_objects(root, h, "r", ".ftr")) == 1 for h in ("a", "b")),
              "older reference publications left: %r" % [tc.shared_objects(root, h, "r", ".ftr") for h in ("a", "b")])
    compare(res, b, model_b, "b at the end")


def popen_gc(fs):
    return subprocess.Popen([tc.tierctl_path(), "-m", fs.mnt, "gc"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def run(res, tmp, filer, root):
    a, b, c = (tc.shared_daemon(tmp, h, filer, lease=LEASE) for h in ("a", "b", "c"))
    with a, b:
        model_b = phase_ack(res, root, a, b)
        if filer.startswith("nfs://") and not SOAK:
            return
        c.start()
        try:
            phase_concurrent(res, root, a, b, c, model_b)
            phase_expired(res, root, a, b, c, model_b)
        finally:
            if c.proc is not None:
                c.kill(check=False)
        phase_crash(res, root, a, b, model_b)


def main():
    tc.shared_filer_main("e2e-shared-gc", run)


if __name__ == "__main__":
    sys.exit(main())
