#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Disaster recovery from the capacity tier alone, end to end.

oragen's FRA content and two python-written files (one with a long run of
zeros, so its recipe holds a zero run) are copied in and sealed.  The
archived logs and backup pieces are moved to the capacity tier; the image
copies stay on the hot tier.  Then, on the capacity tier's files: one is
renamed into a new directory, a whole directory of them is renamed, one is
chmod'ed and chown'ed, two are unlinked; tierctl gc; unmount.  The hot tier
(catalog included) is deleted, and

  fratierfs --recover-from=DATA/capacity -o data=NEWDIR

must report every cold file restored; mounted, NEWDIR holds exactly the
cold files at their current paths (none of the unlinked ones, none of the
hot-only ones), each byte for byte (sha256), with its mode and owner, on
the hot tier; a restored file moves to the new capacity tier and back.  A
second recovery into a non-empty directory is refused.

Crash: a second mount moves its archived logs (batch A) to the capacity
tier, then the daemon is killed with SIGKILL in the middle of moving the
rest, 32 MiB of incompressible pieces among it (once the capacity tier's
containers have grown by a random amount); its hot tier
is deleted and recovery runs on what the kill left: every file of batch A
comes back exact, and no file comes back with wrong bytes.

With --nfs (e2e-recover-nfs): the backup pieces move to an NFS tier served
by nfs-ganesha (tests/nfs/ganesha.py, in a private network namespace), the
archived logs to the capacity tier, one piece is renamed and one unlinked;
after gc, unmount and deletion of the hot tier, recovery from the export's
nfs:// URL restores exactly the pieces, byte for byte.  Exits 77 (skip)
where a namespace, ganesha or FUSE is not available.

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_ORAGEN, FRATIER_TIERCTL),
FRATIER_KEEP.
"""

import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import harness
import tiercommon as tc
from tiercommon import dc


def sha(b):
    return hashlib.sha256(b).hexdigest()


def recover(source, newdir):
    p = subprocess.run([harness.daemon_path(), "--recover-from=" + source, "-o", "data=" + newdir],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    print(p.stdout.strip(), flush=True)
    return p.returncode, p.stdout


def files_under(root):
    out = set()
    for d, _, names in os.walk(root):
        for n in names:
            out.add(os.path.relpath(os.path.join(d, n), root))
    return out


def python_files(rng):
    """Two files python writes: random bytes, and random bytes around 3 MiB of zeros."""
    a = rng.randbytes(700000)
    b = rng.randbytes(300000) + bytes(3 << 20) + rng.randbytes(200000)
    return {"ORCL/archivelog/extra/thread_1_seq_1.arc": a, "ORCL/backupset/extra/zeros.bkp": b}


def write_files(fs, files):
    for rel, data in files.items():
        os.makedirs(os.path.dirname(fs.path(rel)), exist_ok=True)
        with open(fs.path(rel), "wb") as f:
            f.write(data)


def wait_grown(path, size, proc, timeout=dc.SEAL_TIMEOUT):
    """Polls until the tree at path holds more than size bytes, or proc ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        _, apparent, _ = dc.tree_usage(path)
        if apparent > size:
            return True
        time.sleep(0.01)
    return False


def main_part(res, tmp, rng):
    src = os.path.join(tmp, "fra")
    tc.generate(res, src, days=2)
    fs = harness.Fratier(base=os.path.join(tmp, "one"), options=dc.OPTIONS)
    fs.start()
    try:
        model = tc.copy_in(fs, src)
        extra = python_files(rng)
        write_files(fs, extra)
        model.update(extra)
        if not dc.check_sealed(res, [fs.path(r) for r in model], "seal"):
            return
        cold = sorted(r for r in model if "/archivelog/" in r or "/backupset/" in r)
        hot = sorted(set(model) - set(cold))
        res.check(len(cold) >= 6 and len(hot) >= 1, "test data: %d cold, %d hot files" % (len(cold), len(hot)))
        rc, _, err = tc.tierctl(fs, "migrate", "--to", "capacity",
                                fs.path("ORCL", "archivelog"), fs.path("ORCL", "backupset"))
        res.check(rc == 0, "migrate: %d %s" % (rc, err))
        tiers = tc.tiers_of(res, fs, model)
        res.check(all(tiers.get(r) == 1 for r in cold), "cold files not all on tier 1: %s" % tiers)
        res.check(all(tiers.get(r) == 0 for r in hot), "hot files moved: %s" % tiers)

        # Namespace changes of cold files: catalog-only, caught up by the description before gc.
        expect = {r: model[r] for r in cold}
        logs = sorted(r for r in cold if r.endswith(".arc") and "/extra/" not in r)
        gone = [logs[0], logs[1]]
        for r in gone:
            os.unlink(fs.path(r))
            del expect[r]
        moved_from, moved_to = logs[2], "ORCL/moved/here/" + os.path.basename(logs[2])
        os.makedirs(fs.path("ORCL", "moved", "here"))
        os.rename(fs.path(moved_from), fs.path(moved_to))
        expect[moved_to] = expect.pop(moved_from)
        os.rename(fs.path("ORCL", "backupset", "extra"), fs.path("ORCL", "renamed-extra"))
        expect["ORCL/renamed-extra/zeros.bkp"] = expect.pop("ORCL/backupset/extra/zeros.bkp")
        chmodded = logs[3]
        os.chmod(fs.path(chmodded), 0o640)
        os.chown(fs.path(chmodded), 54321, 54322)
        rc, _, err = tc.tierctl(fs, "gc")
        res.check(rc == 0, "gc: %d %s" % (rc, err))
        fs.stop()
    finally:
        fs.kill(check=False)

    # The disaster: the hot tier and its catalog are gone.
    shutil.rmtree(os.path.join(fs.data, "hot"))
    newdir = os.path.join(tmp, "new")
    rc, out = recover(os.path.join(fs.data, "capacity"), newdir)
    res.check(rc == 0, "recovery exit %d" % rc)
    res.check(("restored %d of %d files" % (len(expect), len(expect))) in out,
              "recovery should report %d of %d files restored" % (len(expect), len(expect)))

    fs2 = harness.Fratier(base=os.path.join(tmp, "two"), data=newdir, options=dc.OPTIONS)
    fs2.start()
    try:
        present = files_under(fs2.mnt)
        res.check(present == set(expect), "files after recovery: missing %s, unexpected %s" % (
            sorted(set(expect) - present), sorted(present - set(expect))))
        bad = [r for r in sorted(set(expect) & present)
               if sha(dc.read_all(fs2.path(r))) != sha(expect[r])]
        res.check(not bad, "files with wrong bytes after recovery: %s" % bad)
        st = os.stat(fs2.path(chmodded))
        res.check((st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o640, 54321, 54322),
                  "chmod/chown of %s lost: %o %d %d" % (chmodded, st.st_mode & 0o7777, st.st_uid, st.st_gid))
        tiers = tc.tiers_of(res, fs2, expect)
        res.check(all(tiers.get(r) == 0 for r in expect), "recovered files not on the hot tier: %s" % tiers)
        # The rebuilt chunk index at work: down to the new capacity tier and back, still exact.
        rc, _, err = tc.tierctl(fs2, "migrate", "--to", "capacity", fs2.path("ORCL", "renamed-extra"))
        res.check(rc == 0, "migrate after recovery: %d %s" % (rc, err))
        rc, _, err = tc.tierctl(fs2, "gc")
        res.check(rc == 0, "gc after recovery: %d %s" % (rc, err))
        r = "ORCL/renamed-extra/zeros.bkp"
        res.check(tc.tiers_of(res, fs2, {r: 0}).get(r) == 1, "%s not moved after recovery" % r)
        dc.compare(res, fs2.path(r), expect[r], "moved after recovery")
        fs2.stop()
    finally:
        fs2.kill(check=False)

    rc, out = recover(os.path.join(fs.data, "capacity"), newdir)
    res.check(rc == 1 and "already holds files" in out, "recovery into a used directory: exit %d" % rc)


def crash_part(res, tmp, rng):
    src = os.path.join(tmp, "fra-crash")
    tc.generate(res, src, days=2)
    fs = harness.Fratier(base=os.path.join(tmp, "three"), options=dc.OPTIONS)
    fs.start()
    try:
        model = tc.copy_in(fs, src)
        # Incompressible pieces: the second batch writes tens of MiB to the tier, time to kill it meanwhile.
        big = {"ORCL/backupset/big/piece_%d.bkp" % k: rng.randbytes(8 << 20) for k in range(4)}
        write_files(fs, big)
        model.update(big)
        if not dc.check_sealed(res, [fs.path(r) for r in model], "seal (crash)"):
            return
        batch_a = sorted(r for r in model if "/archivelog/" in r)
        rc, _, err = tc.tierctl(fs, "migrate", "--to", "capacity", fs.path("ORCL", "archivelog"))
        res.check(rc == 0, "migrate batch A: %d %s" % (rc, err))
        capacity = os.path.join(fs.data, "capacity", "containers")
        _, before, _ = dc.tree_usage(capacity)
        p = subprocess.Popen([tc.tierctl_path(), "-m", fs.mnt, "migrate", "--to", "capacity", fs.mnt],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # In the middle of the second batch: some of its frames are on the tier already.
        grown = wait_grown(capacity, before + rng.randrange(1 << 20, 16 << 20), p)
        res.check(grown, "the second migration never wrote to the capacity tier")
        fs.kill()
        p.wait(timeout=60)
    finally:
        fs.kill(check=False)

    shutil.rmtree(os.path.join(fs.data, "hot"))
    newdir = os.path.join(tmp, "new-crash")
    rc, out = recover(os.path.join(fs.data, "capacity"), newdir)
    res.check(rc == 0, "recovery after the kill: exit %d" % rc)
    fs2 = harness.Fratier(base=os.path.join(tmp, "four"), data=newdir, options=dc.OPTIONS)
    fs2.start()
    try:
        present = files_under(fs2.mnt)
        res.check(set(batch_a) <= present, "batch A files missing after the kill: %s" % sorted(set(batch_a) - present))
        res.check(present <= set(model), "files recovery made up: %s" % sorted(present - set(model)))
        bad = [r for r in sorted(present & set(model)) if sha(dc.read_all(fs2.path(r))) != sha(model[r])]
        res.check(not bad, "files with wrong bytes after the kill and recovery: %s" % bad)
        print("after the kill: %d of %d files recovered" % (len(present), len(model)), flush=True)
        fs2.stop()
    finally:
        fs2.kill(check=False)


def nfs_part(res, tmp, rng):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "nfs"))
    import ganesha
    src = os.path.join(tmp, "fra")
    tc.generate(res, src, days=2)
    with ganesha.Ganesha(os.path.join(tmp, "nfs")) as srv:
        fs = tc.nfs_mount(tmp, srv.url)
        fs.start()
        try:
            model = tc.copy_in(fs, src)
            if not dc.check_sealed(res, [fs.path(r) for r in model], "seal (nfs)"):
                return
            pieces = sorted(r for r in model if "/backupset/" in r)
            res.check(len(pieces) >= 3, "oragen wrote %d backup pieces" % len(pieces))
            rc, _, err = tc.tierctl(fs, "migrate", "--to", "filer", fs.path("ORCL", "backupset"))
            res.check(rc == 0, "migrate to the filer: %d %s" % (rc, err))
            rc, _, err = tc.tierctl(fs, "migrate", "--to", "capacity", fs.path("ORCL", "archivelog"))
            res.check(rc == 0, "migrate to capacity: %d %s" % (rc, err))
            expect = {r: model[r] for r in pieces}
            os.unlink(fs.path(pieces[0]))
            del expect[pieces[0]]
            renamed = "ORCL/kept/" + os.path.basename(pieces[1])
            os.makedirs(fs.path("ORCL", "kept"))
            os.rename(fs.path(pieces[1]), fs.path(renamed))
            expect[renamed] = expect.pop(pieces[1])
            rc, _, err = tc.tierctl(fs, "gc")
            res.check(rc == 0, "gc: %d %s" % (rc, err))
            fs.stop()
        finally:
            if res.failed:
                sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
            fs.kill(check=False)

        shutil.rmtree(os.path.join(fs.data, "hot"))
        newdir = os.path.join(tmp, "new")
        rc, out = recover(srv.url, newdir)
        res.check(rc == 0, "recovery from NFS: exit %d" % rc)
        fs2 = harness.Fratier(base=os.path.join(tmp, "two"), data=newdir, options=dc.OPTIONS)
        fs2.start()
        try:
            present = files_under(fs2.mnt)
            res.check(present == set(expect), "files after recovery from NFS: missing %s, unexpected %s" % (
                sorted(set(expect) - present), sorted(present - set(expect))))
            bad = [r for r in sorted(set(expect) & present) if sha(dc.read_all(fs2.path(r))) != sha(expect[r])]
            res.check(not bad, "files with wrong bytes after recovery from NFS: %s" % bad)
            fs2.stop()
        finally:
            fs2.kill(check=False)


def main():
    nfs = "--nfs" in sys.argv[1:]
    if nfs:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "nfs"))
        import ganesha
        ganesha.enter_private_namespace()
    harness.require_fuse()
    res = harness.Results("e2e-recover-nfs" if nfs else "e2e-recover")
    rng = random.Random(int(os.environ.get("FRATIER_RECOVER_SEED", "1")))
    tmp = tempfile.mkdtemp(prefix="fratier-recover-", dir=os.environ.get("FRATIER_TMP"))
    try:
        if nfs:
            nfs_part(res, tmp, rng)
        else:
            main_part(res, tmp, rng)
            crash_part(res, tmp, rng)
    finally:
        if not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
