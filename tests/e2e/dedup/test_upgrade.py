#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Upgrade from the first store format, end to end.

fixture-datadir-v1.tar.xz is a data directory written by fratier ea0b055
(chunk frames in containers of version 1, catalog schema 6; see
fixture-datadir-v1/generate.py): sealed backup pieces sharing chunks, an
archived log, an image copy with never-formatted blocks, a file mostly of
zeros, an archived log moved to the capacity tier, a raw online redo log, an
empty file, a symlink and a user xattr.  Today's daemon mounts it and:

- every file reads back byte for byte, in its old state and on its old tier,
  and not one byte of any old container changed (nothing is rewritten at
  upgrade: version 1 containers are not even cut or sealed);
- new files are written beside the old ones in the new format (containers
  of version 2 holding compression regions); one repeats an old file's
  bytes and is stored as references to the old chunks;
- scrub finds no damage on either tier;
- an old file moves to the capacity tier and the old capacity file comes
  back to the hot tier (both compressed again into regions there), the
  collector compacts what the moves left half dead (its live chunks go into
  regions), and everything still reads back, also after a remount.

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_TIERCTL), FRATIER_KEEP.
"""

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tier"))
import dedupcommon as dc  # noqa: E402
import harness  # noqa: E402
import tiercommon as tc  # noqa: E402

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixture-datadir-v1.tar.xz")


def containers(data):
    """{path relative to data: (version byte, SHA-256)} of every container object."""
    out = {}
    for tier in ("hot", "capacity"):
        root = os.path.join(data, tier, "containers", "c")
        for d, _, names in os.walk(root):
            for n in names:
                p = os.path.join(d, n)
                with open(p, "rb") as f:
                    b = f.read()
                out[os.path.relpath(p, data)] = (b[4] if len(b) > 4 else None, hashlib.sha256(b).hexdigest())
    return out


def check_all(res, fs, manifest, what):
    bad = 0
    for rel, m in sorted(manifest.items()):
        try:
            got = hashlib.sha256(dc.read_all(fs.path(rel))).hexdigest()
        except OSError as e:
            got = "error %s" % e
        if not res.check(got == m["sha256"], "%s: %s reads %s, expected %s" % (what, rel, got[:16], m["sha256"][:16])):
            bad += 1
    print("%s: %d files compared, %d differ" % (what, len(manifest), bad), flush=True)


def text(seed, size):
    rng = random.Random(seed)
    words = [b"SELECT ", b"redo ", b"SCN ", b"0x00A3 ", b"block ", b"\n"]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(words)
    return bytes(out[:size])


def main():
    harness.require_fuse()
    res = harness.Results("e2e-dedup-upgrade")
    base = tempfile.mkdtemp(prefix="fratier-e2e-upgrade-", dir=os.environ.get("FRATIER_TMP"))
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(base)
    with open(os.path.join(base, "manifest.json")) as f:
        manifest = json.load(f)
    data = os.path.join(base, "data")
    old = containers(data)
    res.check(len(old) >= 2 and all(v == 1 for v, _ in old.values()),
              "the fixture holds version 1 containers on both tiers: %r" % old)

    fs = harness.Fratier(base=base, data=data, options=["seal_delay=0", "gc_interval=3600"])
    try:
        fs.start()
        check_all(res, fs, manifest, "old files after the upgrade")
        for rel, m in manifest.items():
            st = dc.state(fs.path(rel))
            # A file raw in the fixture but of a sealed class (the empty one) may be sealed meanwhile.
            ok = st == (m["state"], m["class"]) or (m["class"] != "passthrough" and st == ("sealed", m["class"]))
            res.check(ok, "%s: state %r, expected %s %s" % (rel, st, m["state"], m["class"]))
        tiers = tc.tiers_of(res, fs, {r: None for r in manifest})
        for rel, m in manifest.items():
            if m["state"] == "sealed":
                res.check(tiers.get(rel) == m.get("tier", 0), "%s: tier %r" % (rel, tiers.get(rel)))
        res.check(os.readlink(fs.path("link")) == "ORCL/backupset/piece1.bkp", "symlink kept")
        res.check(os.getxattr(fs.path("ORCL/backupset/piece1.bkp"), "user.note") == b"written by ea0b055", "xattr kept")
        res.check(containers(data) == old, "no old container changed by mounting")

        # New files in the new format, one of them the old bytes again.
        new = {
            "ORCL/backupset/new.bkp": text(11, 300 << 10),
            "ORCL/archivelog/arch_1_3.arc": text(12, 200 << 10),
            "ORCL/backupset/again.bkp": dc.read_all(fs.path("ORCL/backupset/piece1.bkp")),
        }
        for rel, b in new.items():
            dc.write_file(fs.path(rel), b, fsync=True)
        dc.check_sealed(res, [fs.path(r) for r in new], "new files")
        for rel, b in new.items():
            manifest[rel] = {"sha256": hashlib.sha256(b).hexdigest(), "size": len(b), "state": "sealed"}
        now = containers(data)
        res.check(all(now[p] == old[p] for p in old), "old containers unchanged after new writes")
        added = {p: v for p, v in now.items() if p not in old}
        res.check(added and all(v == 2 for v, _ in added.values()),
                  "new data went to version 2 containers: %r" % {p: v for p, (v, _) in added.items()})
        check_all(res, fs, manifest, "old and new files")
        for tier in ("0", "1"):
            rc, out, err = tc.tierctl(fs, "scrub", "--tier", tier)
            res.check(rc == 0 and "0 damaged chunks" in out, "scrub of tier %s: exit %d: %s %s" % (tier, rc, out, err))

        # Moves compress old chunks again into regions; the collector compacts what they left behind.
        rc, out, err = tc.tierctl(fs, "migrate", "--to", "1", fs.path("ORCL/backupset/piece1.bkp"))
        res.check(rc == 0, "migrate of an old file: %s" % err)
        rc, out, err = tc.tierctl(fs, "recall", fs.path("ORCL/archivelog/arch_1_2.arc"))
        res.check(rc == 0, "recall of the old capacity file: %s" % err)
        tiers = tc.tiers_of(res, fs, {"ORCL/backupset/piece1.bkp": None, "ORCL/archivelog/arch_1_2.arc": None})
        res.check(tiers.get("ORCL/backupset/piece1.bkp") == 1 and tiers.get("ORCL/archivelog/arch_1_2.arc") == 0,
                  "tiers after moves: %r" % tiers)
        rc, out, err = tc.tierctl(fs, "gc")
        res.check(rc == 0, "gc: %s" % err)
        check_all(res, fs, manifest, "after moves and a collection")
        fs.stop()
        fs.start()
        check_all(res, fs, manifest, "after a remount")
        for tier in ("0", "1"):
            rc, out, err = tc.tierctl(fs, "scrub", "--tier", tier)
            res.check(rc == 0 and "0 damaged chunks" in out, "scrub of tier %s after moves: %s %s" % (tier, out, err))
        fs.stop()
    except Exception:
        fs.kill()
        sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
        raise
    finally:
        if not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(base, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
