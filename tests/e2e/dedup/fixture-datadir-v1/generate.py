#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""How fixture-datadir-v1.tar.xz was made: run once, as root, with
FRATIERFS and FRATIER_TIERCTL pointing at a build of fratier ea0b055 (the
last one with chunk frames: container version 1, catalog schema 6):

    generate.py OUT.tar.xz

It mounts an empty data directory, writes the files below, waits until they
are sealed, moves one to the capacity tier, unmounts cleanly and packs the
data directory (without the control socket) with manifest.json: each path's
SHA-256, size, class and tier as the old daemon saw them.  Not run by the
suite: today's daemon writes format 2, and the test (test_upgrade.py) needs
bytes the old one wrote.
"""

import hashlib
import io
import json
import os
import random
import subprocess
import shutil
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import harness  # noqa: E402
import dedupcommon  # noqa: E402

WORDS = [b"SELECT ", b"archivelog ", b"SCN ", b"0x0000A3F1 ", b"thread 1 ", b"sequence ", b"redo ",
         b"block ", b"checkpoint ", b"\n"]


def text(seed, size):
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < size:
        out += rng.choice(WORDS)
        if rng.random() < 1 / 16:
            out.append(rng.randrange(256))
    return bytes(out[:size])


def image_copy(seed, size):
    """8 KiB blocks, every third one never formatted (zeros)."""
    out = bytearray()
    for i in range(size // 8192):
        out += bytes(8192) if i % 3 == 2 else text(seed * 1000 + i, 8192)
    return bytes(out)


def files():
    p1 = text(1, 192 << 10)
    return {
        "ORCL/backupset/piece1.bkp": p1,
        "ORCL/backupset/piece2.bkp": text(2, 64 << 10) + p1[32 << 10:96 << 10],
        "ORCL/archivelog/arch_1_1.arc": text(3, 96 << 10),
        "ORCL/archivelog/arch_1_2.arc": text(4, 64 << 10),
        "ORCL/datafile/users01.dbf": image_copy(5, 192 << 10),
        "ORCL/onlinelog/redo01.log": text(6, 32 << 10),
        "ORCL/other.dat": text(7, 24 << 10) + bytes(256 << 10) + text(8, 24 << 10),
        "empty.bin": b"",
    }


def main():
    harness.require_fuse()
    out = os.path.abspath(sys.argv[1])
    content = files()
    base = tempfile.mkdtemp(prefix="fratier-fixture-")
    with harness.Fratier(base=base, options=["seal_delay=0", "gc_interval=3600"]) as fs:
        for rel, data in content.items():
            path = fs.path(rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        os.symlink("ORCL/backupset/piece1.bkp", fs.path("link"))
        os.setxattr(fs.path("ORCL/backupset/piece1.bkp"), "user.note", b"written by ea0b055")
        sealed = [fs.path(r) for r in content if r != "ORCL/onlinelog/redo01.log" and content[r]]
        left = dedupcommon.wait_states(sealed)
        assert not left, left
        subprocess.run([dedupcommon.tierctl_path(), "-m", fs.mnt, "migrate", "--to", "1",
                        fs.path("ORCL/archivelog/arch_1_2.arc")], check=True)
        manifest = {}
        for rel, data in content.items():
            st, cls = dedupcommon.state(fs.path(rel))
            manifest[rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                             "state": st, "class": cls}
        manifest["ORCL/archivelog/arch_1_2.arc"]["tier"] = 1
        data_dir = fs.data
    with tarfile.open(out, "w:xz") as tar:
        for root, dirs, names in os.walk(data_dir):
            dirs.sort()
            for name in sorted(names):
                full = os.path.join(root, name)
                if not os.path.isfile(full) or os.path.islink(full):
                    continue  # the control socket
                tar.add(full, arcname=os.path.join("data", os.path.relpath(full, data_dir)))
        blob = json.dumps(manifest, indent=1, sort_keys=True).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(blob)
        tar.addfile(info, io.BytesIO(blob))
    shutil.rmtree(base)


if __name__ == "__main__":
    main()
