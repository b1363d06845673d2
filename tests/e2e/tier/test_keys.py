#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The mount's key at start: fratierfs --make-key makes a 0400 file and never
overwrites one; a mount with its key works and remounts; the wrong key, no
key, a key file others can read, a damaged one, a missing one, and a key
given to a data directory that holds data written without one are each
refused with a line naming the problem, and leave every file of the data
directory as it was (but the lock file, which holds the pid of whoever
tried, and SQLite's own -wal/-shm files)."""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

import harness
import tiercommon as tc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dedup"))
import dedupcommon as dc  # noqa: E402

IGNORED = ("fratier.lock", "catalog.db-wal", "catalog.db-shm")


def snapshot(top):
    out = {}
    for d, _, names in os.walk(top):
        for n in names:
            if n in IGNORED:
                continue
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, top)] = hashlib.sha256(f.read()).hexdigest()
    return out


def make_key(path):
    return subprocess.run([harness.daemon_path(), "--make-key", path], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)


def refused(res, base, data, key, what, expect):
    """Starts a daemon on data with key (None: none); it must exit 1 saying expect, changing nothing."""
    before = snapshot(data)
    opts = ["key_file=" + key] if key else []
    fs = harness.Fratier(base=base, data=data, options=opts)
    try:
        fs.start(timeout=30)
        res.check(False, "%s: mounted" % what)
        fs.stop()
        return
    except RuntimeError as e:
        msg = str(e)
    res.check("exited with 1" in msg, "%s: exit status: %s" % (what, msg[:300]))
    res.check(expect in msg, "%s: no line saying %r: %s" % (what, expect, msg[-600:]))
    res.check(snapshot(data) == before, "%s: the data directory changed" % what)


def recover(source, newdir, key):
    cmd = [harness.daemon_path(), "--recover-from=" + source, "-o", "data=" + newdir]
    if key:
        cmd[-1] += ",key_file=" + key
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)


def recover_with_key(res, base, data, key, other, blob):
    """--recover-from on a capacity tier written under key: restores with it, restores nothing without it."""
    source = os.path.join(data, "capacity")
    for what, k in (("no key", None), ("the wrong key", other)):
        newdir = tempfile.mkdtemp(prefix="rec-", dir=base)
        p = recover(source, newdir, k)
        res.check(p.returncode != 0, "recovery with %s succeeded: %s" % (what, p.stdout[-600:]))
        # The capacity tier encrypts by default under a key: its description is sealed.
        expect = "needs the key it was written under" if k is None else "written under another key"
        res.check(expect in p.stdout, "recovery with %s does not say %r: %s" % (what, expect, p.stdout[-600:]))
        fs = harness.Fratier(base=base, data=newdir, options=["key_file=" + k] if k else []).start()
        res.check(not os.path.exists(fs.path("f")) or open(fs.path("f"), "rb").read() != blob,
                  "recovery with %s restored the file" % what)
        fs.stop()
    newdir = tempfile.mkdtemp(prefix="rec-", dir=base)
    p = recover(source, newdir, key)
    res.check(p.returncode == 0, "recovery with the key: %d %s" % (p.returncode, p.stdout[-600:]))
    fs = harness.Fratier(base=base, data=newdir, options=["key_file=" + key]).start()
    with open(fs.path("f"), "rb") as f:
        res.check(f.read() == blob, "recovered under the key: content differs")
    fs.stop()


def main():
    harness.require_fuse()
    res = harness.Results("e2e-keys")
    base = tempfile.mkdtemp(prefix="fratier-e2e-keys-", dir=os.environ.get("FRATIER_TMP"))
    try:
        k1, k2 = os.path.join(base, "k1"), os.path.join(base, "k2")
        p = make_key(k1)
        res.check(p.returncode == 0, "--make-key: %s" % p.stdout)
        res.check(os.stat(k1).st_mode & 0o7777 == 0o400, "key file mode %o" % os.stat(k1).st_mode)
        with open(k1, "rb") as f:
            first = f.read()
        p = make_key(k1)
        res.check(p.returncode == 1 and "never overwritten" in p.stdout, "--make-key over a key: %s" % p.stdout)
        with open(k1, "rb") as f:
            res.check(f.read() == first, "--make-key changed an existing key file")
        make_key(k2)

        data = os.path.join(base, "enc")
        blob = os.urandom(3 << 20)
        fs = harness.Fratier(base=base, data=data, options=["key_file=" + k1, "seal_delay=1"]).start()
        with open(fs.path("f"), "wb") as f:
            f.write(blob)
        dc.check_sealed(res, [fs.path("f")], "the file under a key")
        fs.stop()
        res.check("encryption at rest under key id" in fs.log_text(), "no key id logged")
        fs = harness.Fratier(base=base, data=data, options=["key_file=" + k1]).start()
        with open(fs.path("f"), "rb") as f:
            res.check(f.read() == blob, "remount with the key: content differs")
        rc, _, err = tc.tierctl(fs, "migrate", "--to", "capacity", fs.path("f"))
        res.check(rc == 0, "migrate under a key: %d %s" % (rc, err))
        with open(fs.path("f"), "rb") as f:
            res.check(f.read() == blob, "read back from the capacity tier under a key: content differs")
        fs.stop()
        recover_with_key(res, base, data, k1, k2, blob)

        refused(res, base, data, k2, "wrong key", "wrong key:")
        refused(res, base, data, None, "no key", "is encrypted (key id")
        os.chmod(k1, 0o440)
        refused(res, base, data, k1, "group-readable key", "readable by its owner only")
        os.chmod(k1, 0o404)
        refused(res, base, data, k1, "world-readable key", "readable by its owner only")
        os.chmod(k1, 0o600)
        with open(k1, "r+b") as f:
            f.seek(20)
            c = f.read(1)
            f.seek(20)
            f.write(b"0" if c != b"0" else b"1")
        refused(res, base, data, k1, "damaged key", "is damaged or not a fratier key file")
        refused(res, base, data, os.path.join(base, "missing"), "missing key", "cannot open key file")

        plain = os.path.join(base, "plain")
        fs = harness.Fratier(base=base, data=plain, options=["seal_delay=1"]).start()
        with open(fs.path("f"), "wb") as f:
            f.write(blob)
        dc.check_sealed(res, [fs.path("f")], "the file without a key")
        fs.stop()
        refused(res, base, plain, k2, "key on plain data", "holds data written without a key")
    finally:
        if not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(base, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
