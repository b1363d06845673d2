#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Checks oragen's output by parsing it independently of the generator.

Usage: test_oragen.py ORAGEN CHECK, CHECK one of: help, determinism,
change-rate, checksums, archivelogs, manifest, seeds.  Each check generates a
few MB at a time in a temporary directory and exits 1 with a message on the
first mismatch.  The layouts parsed here are those of
tools/oragen/oracle-format.h.
"""

import datetime
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

BLOCK = 8192
REDO_BLOCK = 512
FRAME = 16
SECTION = 64
MPX_UNIT = 64
SMALL = ["--days", "2", "--datafiles", "3", "--datafile-size", "2M",
         "--archivelogs-per-day", "2", "--archivelog-size", "256K",
         "--filesperset", "2"]


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def oragen(exe, out, *args):
    """Runs oragen and returns its manifest."""
    cmd = [exe, "--out", out, "--quiet", *args]
    res = subprocess.run(cmd, capture_output=True, text=True)
    check(res.returncode == 0, f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr}")
    manifest = args[args.index("--manifest") + 1] if "--manifest" in args else \
        os.path.join(out, "manifest.json")
    with open(manifest) as f:
        return json.load(f)


def u16(b, o):
    return struct.unpack_from("<H", b, o)[0]


def u32(b, o):
    return struct.unpack_from("<I", b, o)[0]


def scn(b, o):
    return u32(b, o) | u16(b, o + 4) << 32


def xor16(b):
    """XOR of all little-endian 16-bit words, by folding one big integer."""
    x = int.from_bytes(b, "little")
    w = len(b) * 8
    while w > 16:
        w //= 2
        x = (x & ((1 << w) - 1)) ^ (x >> w)
    return x


def kcrf_time(iso):
    t = datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ")
    return (((((t.year - 1988) * 12 + t.month - 1) * 31 + t.day - 1) * 24 + t.hour) * 60
            + t.minute) * 60 + t.second


def read(out, path):
    with open(os.path.join(out, path), "rb") as f:
        return f.read()


def files_of(manifest, cls, content=None):
    return [f for f in manifest["files"] if f["class"] == cls
            and (content is None or f.get("content") == content)]


def check_datafile_block(b, file_no, blk, where):
    """Validates one 8 KiB datafile block; returns False for a never-formatted one."""
    if b == bytes(BLOCK):
        return False
    if blk == 0:
        check(b[1] == 0xa2 and u32(b, 20) == BLOCK and u32(b, 28) == 0x7a7b7c7d,
              f"{where}: bad OS header block")
        return True
    check(b[1] == 0xa2, f"{where}: format byte {b[1]:#x}")
    check(u32(b, 4) == (file_no << 22 | blk),
          f"{where}: rdba {u32(b, 4):#x}, want file {file_no} block {blk}")
    check(b[15] & 0x04, f"{where}: checksum flag missing")
    check(xor16(b) == 0, f"{where}: checksum mismatch")
    tail = u32(b, BLOCK - 4)
    want = (u32(b, 8) & 0xffff) << 16 | b[0] << 8 | b[14]
    check(tail == want, f"{where}: tail {tail:#010x}, want {want:#010x}")
    return True


def parse_piece_header(b, where):
    check(len(b) >= BLOCK, f"{where}: shorter than a header block")
    h = b[:BLOCK]
    check(h[0] == 0xbb and h[1] == 0xa2, f"{where}: not a piece header")
    check(xor16(h) == 0, f"{where}: piece header checksum mismatch")
    check(u32(h, 20) == 0x4e454741, f"{where}: piece magic")
    return h


def datafile_piece_blocks(b, where):
    """Yields (file_no, block_no, block bytes) of a datafile backup piece, in order."""
    h = parse_piece_header(b, where)
    check(u16(h, 50) == 1 and u32(h, 56) == MPX_UNIT, f"{where}: not a datafile piece")
    pos = BLOCK
    while pos < len(b):
        check(pos + FRAME + BLOCK <= len(b), f"{where}: truncated block at {pos}")
        f = b[pos:pos + FRAME]
        blk = b[pos + FRAME:pos + FRAME + BLOCK]
        check(u32(f, 0) == 0x4b4c4246, f"{where}: frame magic at {pos}")
        check(f[4:8] == blk[4:8] and f[8:14] == blk[8:14] and f[14:16] == blk[16:18],
              f"{where}: frame at {pos} does not match its block")
        rdba = u32(blk, 4)
        yield rdba >> 22, rdba & ((1 << 22) - 1), blk
        pos += FRAME + BLOCK


def piece_entries(b):
    h = b[:BLOCK]
    return [h[128 + 32 * i:160 + 32 * i] for i in range(u32(h, 60))]


def check_redo_records(b, f, where):
    """Records chain from block 2 and every block's offset names the first one starting in it."""
    nblocks = len(b) // REDO_BLOCK
    payload = b"".join(b[i * REDO_BLOCK + 16:(i + 1) * REDO_BLOCK] for i in range(2, nblocks))
    starts, pos, scns = [], 0, []
    while pos + 24 <= len(payload):
        length = u32(payload, pos)
        if length == 0:
            check(payload[pos:] == bytes(len(payload) - pos), f"{where}: garbage after the last record")
            break
        check(length % 4 == 0 and length >= 24 and pos + length <= len(payload),
              f"{where}: bad record length {length} at {pos}")
        scns.append(u32(payload, pos + 8) | u16(payload, pos + 6) << 32)
        starts.append(pos)
        pos += length
    check(len(starts) > 100, f"{where}: only {len(starts)} records")
    check(scns == sorted(scns) and scns[0] >= f["low_scn"] and scns[-1] < f["next_scn"],
          f"{where}: record SCNs out of order or range")
    # One walk over the sorted starts: seeds checks hundreds of logs.
    first = iter(starts + [len(payload)])
    s = next(first)
    for i in range(2, nblocks):
        lo, hi = (i - 2) * 496, (i - 1) * 496
        while s < lo:
            s = next(first)
        off = u16(b, i * REDO_BLOCK + 12)
        check(off == (s - lo + 16 if s < hi else 0),
              f"{where}: block {i} offset {off}, first record at {s}")


# ---- checks -------------------------------------------------------------------


def test_help(exe, tmp):
    res = subprocess.run([exe, "--help"], capture_output=True, text=True)
    check(res.returncode == 0, f"--help exited {res.returncode}")
    for word in ("SYNOPSIS", "--out", "--seed", "--days", "--change-rate", "--manifest"):
        check(word in res.stdout, f"--help does not mention {word}")

    res = subprocess.run([exe, "--version"], capture_output=True, text=True)
    check(res.returncode == 0 and res.stdout.startswith("oragen "), "--version")

    bad = [[], ["--out", tmp, "--days", "0"], ["--out", tmp, "--datafile-size", "1000"],
           ["--out", tmp, "--change-rate", "1.5"], ["--out", tmp, "--db-name", "lower"],
           ["--out", tmp, "--start-date", "2024-13-01"], ["--out", tmp, "extra"],
           ["--out", tmp, "--image-copies", "9"], ["--out", tmp, "--no-such-option"]]
    for args in bad:
        res = subprocess.run([exe, *args], capture_output=True, text=True)
        check(res.returncode == 1, f"{args}: exit {res.returncode}, want 1")
        check(res.stderr.strip() and "SYNOPSIS" not in res.stderr,
              f"{args}: want a short error, got {res.stderr!r}")
        check(not os.listdir(tmp), f"{args}: wrote files")

    # A used output directory is refused: its old files would not be in the manifest.
    with open(os.path.join(tmp, "old"), "w"):
        pass
    res = subprocess.run([exe, "--out", tmp, "--datafile-size", "1M"], capture_output=True, text=True)
    check(res.returncode == 1 and "not empty" in res.stderr, f"non-empty --out: {res.returncode} {res.stderr!r}")
    check(os.listdir(tmp) == ["old"], "non-empty --out: wrote files")


def tree_digest(out):
    digests = {}
    for root, _, names in os.walk(out):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                digests[os.path.relpath(path, out)] = hashlib.sha256(f.read()).hexdigest()
    return digests


def test_determinism(exe, tmp):
    a, b, c = (os.path.join(tmp, x) for x in "abc")
    oragen(exe, a, "--seed", "7", *SMALL)
    oragen(exe, b, "--seed", "7", *SMALL)
    oragen(exe, c, "--seed", "8", *SMALL)
    da, db, dc = tree_digest(a), tree_digest(b), tree_digest(c)
    check(da == db, "same seed, different output: "
          + ", ".join(sorted(k for k in set(da) | set(db) if da.get(k) != db.get(k)))[:500])

    ma = json.loads(read(a, "manifest.json"))
    mc = json.loads(read(c, "manifest.json"))
    check(ma["database"]["dbid"] != mc["database"]["dbid"], "different seeds, same DBID")
    # Same shapes (sizes of image copies), different bytes everywhere.
    ic_a = [read(a, f["path"]) for f in files_of(ma, "imagecopy")]
    ic_c = [read(c, f["path"]) for f in files_of(mc, "imagecopy")]
    check(len(ic_a) == len(ic_c) and all(len(x) == len(y) for x, y in zip(ic_a, ic_c)),
          "different seeds changed image copy sizes")
    # Block 0 (OS header) holds only the file size and the zero block is zero.
    same = sum(x[i:i + BLOCK] == y[i:i + BLOCK] and x[i:i + BLOCK] != bytes(BLOCK)
               for x, y in zip(ic_a, ic_c) for i in range(BLOCK, len(x), BLOCK))
    check(same == 0, f"different seeds, {same} identical formatted blocks")
    logs_a = {read(a, f["path"]) for f in files_of(ma, "archivelog")}
    logs_c = {read(c, f["path"]) for f in files_of(mc, "archivelog")}
    check(not logs_a & logs_c, "different seeds, identical archived logs")


def changed_blocks(exe, tmp, rate, name):
    out = os.path.join(tmp, name)
    m = oragen(exe, out, "--days", "2", "--datafiles", "3", "--datafile-size", "8M", "--no-zstd",
               "--image-copies", "3", "--archivelogs-per-day", "0", "--change-rate", rate)
    copies = files_of(m, "imagecopy")
    changed = formatted = runs = 0
    for df in (1, 2, 3):
        d1 = read(out, next(f["path"] for f in copies if f["day"] == 1 and f["datafile"] == df))
        d2 = read(out, next(f["path"] for f in copies if f["day"] == 2 and f["datafile"] == df))
        prev = False
        for i in range(0, len(d1), BLOCK):
            b1, b2 = d1[i:i + BLOCK], d2[i:i + BLOCK]
            formatted += b1 != bytes(BLOCK)
            diff = b1 != b2
            changed += diff
            runs += diff and not prev
            prev = diff
    check(changed == m["totals"]["changed_blocks"],
          f"{changed} blocks differ, manifest says {m['totals']['changed_blocks']}")
    return changed / formatted, changed / max(runs, 1)


def test_change_rate(exe, tmp):
    for rate, lo, hi in (("0.05", 0.04, 0.065), ("0.2", 0.17, 0.23)):
        frac, run = changed_blocks(exe, tmp, rate, "r" + rate)
        print(f"change-rate {rate}: {frac:.4f} of formatted blocks changed, mean run {run:.1f} blocks")
        check(lo <= frac <= hi, f"change-rate {rate}: {frac:.4f} of blocks changed")
        check(run >= 3, f"change-rate {rate}: changes not clustered (mean run {run:.1f})")
    frac, _ = changed_blocks(exe, tmp, "0", "r0")
    # Only the file header's checkpoint moves.
    check(frac < 0.002, f"change-rate 0: {frac:.4f} of blocks changed")


def test_checksums(exe, tmp):
    out = os.path.join(tmp, "o")
    m = oragen(exe, out, *SMALL, "--image-copies", "3")
    images = {}
    for f in files_of(m, "imagecopy"):
        b = read(out, f["path"])
        check(len(b) == 2 * 1024 * 1024, f"{f['path']}: size {len(b)}")
        n = sum(check_datafile_block(b[i:i + BLOCK], f["datafile"], i // BLOCK, f"{f['path']}@{i}")
                for i in range(0, len(b), BLOCK))
        check(n > len(b) // BLOCK // 2, f"{f['path']}: only {n} formatted blocks")
        check(b[-BLOCK:] == bytes(BLOCK), f"{f['path']}: no never-formatted blocks at the end")
        check(u32(b, BLOCK + 28) == m["database"]["dbid"], f"{f['path']}: DBID in file header")
        check(scn(b, BLOCK + 484) == f["ckpt_scn"], f"{f['path']}: checkpoint SCN in file header")
        images[(f["day"], f["datafile"])] = b

    for f in files_of(m, "backuppiece", "datafile"):
        b = read(out, f["path"])
        h = parse_piece_header(b, f["path"])
        check(u32(h, 28) == m["database"]["dbid"], f"{f['path']}: DBID")
        want = {e[0]: e for e in (struct.unpack_from("<III", h, 128 + 32 * i)
                                  for i in range(u32(h, 60)))}
        check(sorted(want) == f["datafiles"], f"{f['path']}: files {sorted(want)}")
        seen = {n: [] for n in want}
        order = []
        for file_no, blk, block in datafile_piece_blocks(b, f["path"]):
            check(file_no in want, f"{f['path']}: block of file {file_no}")
            check(check_datafile_block(block, file_no, blk, f"{f['path']} {file_no}/{blk}"),
                  f"{f['path']}: never-formatted block {file_no}/{blk} written")
            check(blk != 0, f"{f['path']}: OS header block written")
            image = images.get((f["day"], file_no))
            check(image is None or image[blk * BLOCK:(blk + 1) * BLOCK] == block,
                  f"{f['path']}: block {file_no}/{blk} differs from the image copy")
            check(not seen[file_no] or seen[file_no][-1] < blk,
                  f"{f['path']}: file {file_no} blocks out of order")
            seen[file_no].append(blk)
            order.append(file_no)
        for n, blocks in seen.items():
            check(len(blocks) == want[n][2], f"{f['path']}: file {n}: {len(blocks)} blocks, "
                  f"header says {want[n][2]}")
            image = images.get((f["day"], n))
            if image is not None:
                formatted = [i for i in range(1, len(image) // BLOCK)
                             if image[i * BLOCK:(i + 1) * BLOCK] != bytes(BLOCK)]
                check(blocks == formatted, f"{f['path']}: file {n}: not every formatted block")
        # Multiplexing: runs of MPX_UNIT blocks per file, round-robin while files last.
        runs = []
        for n in order:
            if runs and runs[-1][0] == n:
                runs[-1][1] += 1
            else:
                runs.append([n, 1])
        check(len(want) == 1 or len(runs) > len(want), f"{f['path']}: files not interleaved")
        for n, count in runs[:-len(want)]:
            check(count == MPX_UNIT, f"{f['path']}: unit of {count} blocks of file {n}")


def test_archivelogs(exe, tmp):
    out = os.path.join(tmp, "o")
    m = oragen(exe, out, *SMALL, "--db-name", "PRODDB")
    logs = files_of(m, "archivelog")
    check(len(logs) == 4, f"{len(logs)} archived logs")
    dbid = m["database"]["dbid"]
    for prev, f in zip([None] + logs, logs):
        b = read(out, f["path"])
        where = f["path"]
        nblocks = len(b) // REDO_BLOCK
        check(len(b) % REDO_BLOCK == 0 and len(b) == f["size"], f"{where}: size")
        check(256 * 1024 * 3 // 4 <= len(b) <= 256 * 1024, f"{where}: size {len(b)} off 75-100%")
        # Block 0.
        check(b[0] == 0 and b[1] == 0x22 and u32(b, 20) == REDO_BLOCK
              and u32(b, 24) == nblocks - 1 and u32(b, 28) == 0x7a7b7c7d, f"{where}: block 0")
        # Block 1: the fields a tier policy reads.
        h = b[REDO_BLOCK:2 * REDO_BLOCK]
        check(u32(h, 24) == dbid, f"{where}: DBID {u32(h, 24)} != {dbid}")
        check(h[28:36] == b"PRODDB  ", f"{where}: db name {h[28:36]!r}")
        check(u16(h, 176) == f["thread"] == 1, f"{where}: thread")
        check(u32(h, 8) == f["sequence"], f"{where}: sequence {u32(h, 8)}")
        check(scn(h, 180) == f["low_scn"], f"{where}: low SCN")
        check(scn(h, 192) == f["next_scn"], f"{where}: next SCN")
        check(u32(h, 188) == kcrf_time(f["low_time"]), f"{where}: low time")
        check(u32(h, 200) == kcrf_time(f["next_time"]), f"{where}: next time")
        check(u32(h, 156) == nblocks and u32(h, 40) == nblocks - 1, f"{where}: nab / file size")
        check(u32(h, 20) == 0x13000000, f"{where}: compatibility")
        desc = h[92:156].rstrip(b"\0").decode()
        check(desc.startswith(f"T 0001, S {f['sequence']:010d}, SCN 0x{f['low_scn']:016x}-"),
              f"{where}: description {desc!r}")
        check(f["low_scn"] < f["next_scn"], f"{where}: empty SCN range")
        if prev:
            check(f["sequence"] == prev["sequence"] + 1, f"{where}: sequence gap")
            check(f["low_scn"] == prev["next_scn"], f"{where}: SCN gap after {prev['path']}")
            check(f["low_time"] == prev["next_time"], f"{where}: time gap")
        # Every block from 1 on: header and checksum.
        for i in range(1, nblocks):
            blk = b[i * REDO_BLOCK:(i + 1) * REDO_BLOCK]
            check(blk[0] == 0x01 and blk[1] == 0x22, f"{where}: block {i} signature")
            check(u32(blk, 4) == i and u32(blk, 8) == f["sequence"], f"{where}: block {i} number/seq")
            check(xor16(blk) == 0, f"{where}: block {i} checksum")
        check_redo_records(b, f, where)
        check(shutil.which("zstd") is not None, "the zstd command is not installed (scripts/install-deps.sh)")
        ratio = len(b) / len(subprocess.run(["zstd", "-3", "-c"], input=b, capture_output=True,
                                            check=True).stdout)
        check(1.8 <= ratio <= 5, f"{where}: zstd -3 ratio {ratio:.2f}, redo should be 2-4x")

    # BACKUP ARCHIVELOG: the same bytes at a shifted offset.
    by_seq = {f["sequence"]: read(out, f["path"]) for f in logs}
    for f in files_of(m, "backuppiece", "archivelog"):
        b = read(out, f["path"])
        h = parse_piece_header(b, f["path"])
        check(u16(h, 50) == 2, f"{f['path']}: kind")
        pos = BLOCK
        seqs = []
        for e in piece_entries(b):
            s = b[pos:pos + SECTION]
            check(u32(s, 0) == 0x43455341, f"{f['path']}: section magic at {pos}")
            seq, size = u32(s, 8), u32(s, 12)
            check(u32(e, 4) == seq and u32(e, 24) == size, f"{f['path']}: entry vs section")
            check(b[pos + SECTION:pos + SECTION + size] == by_seq[seq],
                  f"{f['path']}: sequence {seq} differs from the archived log")
            seqs.append(seq)
            pos += SECTION + size
        check(pos == len(b), f"{f['path']}: trailing bytes")
        check(seqs == f["sequences"], f"{f['path']}: sequences {seqs}")


def test_seeds(exe, tmp):
    # Each seed draws other transactions, row templates and column values:
    # many small runs cover the redo record shapes that one large run of a
    # single seed may miss (seed 2 once built an update record from columns
    # its before image did not have, and aborted).
    for seed in range(1, 41):
        out = os.path.join(tmp, str(seed))
        m = oragen(exe, out, "--seed", str(seed), "--days", "2", "--datafiles", "2",
                   "--datafile-size", "1M", "--archivelogs-per-day", "3", "--archivelog-size", "128K",
                   "--image-copies", "0", "--no-zstd")
        for f in files_of(m, "archivelog"):
            check_redo_records(read(out, f["path"]), f, f"seed {seed}: {f['path']}")
        shutil.rmtree(out)


OMF = {
    "archivelog": re.compile(r"^([A-Z0-9_]+)/archivelog/(\d{4})_(\d\d)_(\d\d)/o1_mf_1_(\d+)_[a-z0-9]{8}_\.arc$"),
    "datafile": re.compile(r"^([A-Z0-9_]+)/backupset/(\d{4})_(\d\d)_(\d\d)/o1_mf_nnndf_TAG(\d{8})T\d{6}_[a-z0-9]{8}_\.bkp$"),
    "archivelog-piece": re.compile(r"^([A-Z0-9_]+)/backupset/(\d{4})_(\d\d)_(\d\d)/o1_mf_annnn_TAG(\d{8})T\d{6}_[a-z0-9]{8}_\.bkp$"),
    "imagecopy": re.compile(r"^([A-Z0-9_]+)/datafile/o1_mf_[a-z0-9]+_[a-z0-9]{8}_\.dbf$"),
}


def test_manifest(exe, tmp):
    out = os.path.join(tmp, "o")
    m = oragen(exe, out, *SMALL, "--image-copies", "2", "--start-date", "2023-12-31",
               "--manifest", os.path.join(tmp, "m.json"))
    check(not os.path.exists(os.path.join(out, "manifest.json")), "--manifest ignored")

    listed = {f["path"] for f in m["files"]}
    on_disk = set(tree_digest(out))
    check(listed == on_disk, f"manifest and disk differ: {sorted(listed ^ on_disk)}")
    check(len(listed) == len(m["files"]), "duplicate paths")
    start = datetime.date(2023, 12, 31)
    total = 0
    for f in m["files"]:
        size = os.path.getsize(os.path.join(out, f["path"]))
        check(size == f["size"], f"{f['path']}: size {size}, manifest {f['size']}")
        total += size
        key = f["class"] if f["class"] != "backuppiece" else \
            ("datafile" if f["content"] == "datafile" else "archivelog-piece")
        mm = OMF[key].match(f["path"])
        check(mm, f"{f['path']}: not an OMF name of a {key}")
        check(mm.group(1) == "ORCL", f"{f['path']}: DB_UNIQUE_NAME")
        if key != "imagecopy":
            day = start + datetime.timedelta(days=f["day"] - 1)
            check((int(mm.group(2)), int(mm.group(3)), int(mm.group(4))) == (day.year, day.month, day.day),
                  f"{f['path']}: directory is not day {f['day']}")
        if key in ("datafile", "archivelog-piece"):
            check(mm.group(5) == day.strftime("%Y%m%d"), f"{f['path']}: tag date")
    check(total == m["totals"]["logical_bytes"], "logical_bytes")
    check(m["params"]["seed"] == 1 and m["params"]["days"] == 2, "params")

    # Per day: 2 pieces of datafiles (3 files, 2 per set), 1 of archivelogs, 2 logs, 2 copies.
    for day in (1, 2):
        of_day = [f for f in m["files"] if f["day"] == day]
        check(len(files_of({"files": of_day}, "backuppiece", "datafile")) == 2, f"day {day}: datafile pieces")
        check(len(files_of({"files": of_day}, "backuppiece", "archivelog")) == 1, f"day {day}: archivelog pieces")
        check(len(files_of({"files": of_day}, "archivelog")) == 2, f"day {day}: archived logs")
        check(len(files_of({"files": of_day}, "imagecopy")) == 2, f"day {day}: image copies")
        last_log = files_of({"files": of_day}, "archivelog")[-1]
        for f in files_of({"files": of_day}, "backuppiece", "datafile") + files_of({"files": of_day}, "imagecopy"):
            check(f["ckpt_scn"] == last_log["next_scn"], f"{f['path']}: checkpoint is not the last log's next SCN")

    # The ideal, recomputed by hashing every datafile block and counting redo once.
    blocks = {}
    for f in files_of(m, "imagecopy"):
        b = read(out, f["path"])
        for i in range(0, len(b), BLOCK):
            blocks.setdefault(hashlib.sha256(b[i:i + BLOCK]).digest(), b[i:i + BLOCK])
    for f in files_of(m, "backuppiece", "datafile"):
        for _, _, blk in datafile_piece_blocks(read(out, f["path"]), f["path"]):
            blocks.setdefault(hashlib.sha256(blk).digest(), blk)
    ideal = m["ideal"]
    check(ideal["unique_datafile_blocks"] == len(blocks),
          f"unique blocks: manifest {ideal['unique_datafile_blocks']}, counted {len(blocks)}")
    redo = sum(f["size"] for f in files_of(m, "archivelog"))
    check(ideal["unique_redo_bytes"] == redo, "unique redo bytes")
    check(ideal["unique_bytes"] == len(blocks) * BLOCK + redo, "unique bytes")
    for k in ("zstd3_datafile_bytes", "zstd3_redo_bytes"):
        src = ideal["unique_datafile_bytes" if "datafile" in k else "unique_redo_bytes"]
        check(src / 6 < ideal[k] < src / 1.5, f"{k} = {ideal[k]} for {src} bytes")
    check(ideal["zstd3_bytes"] == ideal["zstd3_datafile_bytes"] + ideal["zstd3_redo_bytes"], "zstd3_bytes")
    # The one-stream ideal against the zstd command on the same unique content (in another order, so
    # not to the byte): one stream finds what unit-by-unit compression cannot, never less.
    unique = b"".join(blocks.values()) + b"".join(read(out, f["path"]) for f in files_of(m, "archivelog"))
    z = subprocess.run(["zstd", "-3", "-c", "-q"], input=unique, capture_output=True, check=True).stdout
    check(0.85 * len(z) < ideal["zstd3_stream_bytes"] < 1.15 * len(z) and ideal["zstd3_stream_bytes"] < ideal["zstd3_bytes"],
          f"zstd3_stream_bytes = {ideal['zstd3_stream_bytes']}, zstd -3 of the unique content {len(z)}, "
          f"unit by unit {ideal['zstd3_bytes']}")

    # Without zstd sizing: same files, null sizes.
    m2 = oragen(exe, os.path.join(tmp, "n"), *SMALL, "--image-copies", "2", "--start-date", "2023-12-31",
                "--no-zstd")
    check(m2["ideal"]["zstd3_bytes"] is None and m2["ideal"]["zstd3_stream_bytes"] is None, "--no-zstd still sized")
    check([f["size"] for f in m2["files"]] == [f["size"] for f in m["files"]], "--no-zstd changed files")


TESTS = {
    "help": test_help,
    "determinism": test_determinism,
    "change-rate": test_change_rate,
    "checksums": test_checksums,
    "archivelogs": test_archivelogs,
    "manifest": test_manifest,
    "seeds": test_seeds,
}


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in TESTS:
        print(f"usage: {sys.argv[0]} ORAGEN {{{','.join(TESTS)}}}", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="oragen-test-")
    try:
        TESTS[sys.argv[2]](sys.argv[1], tmp)
    except Failure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    finally:
        if not os.environ.get("ORAGEN_TEST_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"ok: {sys.argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
