#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Damaged containers give EIO, never wrong bytes.

Seals files of unique content (56 MiB, over 40 MiB stored: more than one
container), unmounts, flips bytes inside container files on the hot tier,
mounts again and reads every file page by page: each page either reads back exactly or fails with
EIO; a short read must be exact as far as it goes.  Wrong bytes anywhere
fail the test.

Round 1 damages seven compression regions (payloads of a compressed and a
raw region, a chunk's id in a region's table, the chunk count, stored size,
checksums and magic of region headers).  At least one file must see EIO, at
least one must read back whole, the daemon log must report the damage, and
no more bytes may be unreadable than the damaged regions hold (plus a page
on each side): a store that fails everything is not safe, it is broken.  The damaged files' contents written
again under new names must read back whole once sealed (after a remount, so
from the containers): deduplication may not point new files at damaged
chunks.

Round 2 also damages the container headers and, where a container has one,
its index and footer; again exact or EIO, nothing else.

env: FRATIERFS, FRATIER_CORRUPTION_SEED, FRATIER_SEAL_TIMEOUT, FRATIER_KEEP.
"""

import errno
import os
import random
import shutil
import struct
import sys

import harness
import dedupcommon as dc

SEED = int(os.environ.get("FRATIER_CORRUPTION_SEED", "1"))
FILES = 16
FILE_SIZE = (7 << 20) // 2
PAGE = 4096
READ_SIZE = 64 << 10

REGION_MAGIC = b"\x89FTR"
REGION_HEADER = 64
REGION_ENTRY = 36
CONTAINER_HEADER = 64
CONTAINER_FOOTER = 64
INDEX_MAGIC = b"\x89FCI"
FOOTER_MAGIC = b"\x89FCF"
CODEC_RAW, CODEC_ZSTD = 0, 1


def parse_container(path):
    """Regions of a container file as dicts (offset, codec, count, plain,
    stored, size), and where its index and footer are (None for an unsealed
    container)."""
    with open(path, "rb") as f:
        buf = f.read()
    regions, pos = [], CONTAINER_HEADER
    while pos + REGION_HEADER <= len(buf) and buf[pos:pos + 4] == REGION_MAGIC:
        codec = buf[pos + 5]
        count, plain, stored = struct.unpack_from("<III", buf, pos + 12)
        size = REGION_HEADER + REGION_ENTRY * count + stored
        regions.append({"path": path, "offset": pos, "codec": codec, "count": count, "plain": plain,
                       "stored": stored, "size": size})
        pos += size
    index = pos if buf[pos:pos + 4] == INDEX_MAGIC else None
    footer = len(buf) - CONTAINER_FOOTER if buf[-CONTAINER_FOOTER:-CONTAINER_FOOTER + 4] == FOOTER_MAGIC else None
    return regions, index, footer, len(buf)


def flip(path, offset, rng):
    """XORs the byte at offset with a random non-zero value."""
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([b ^ rng.randrange(1, 256)]))
        f.flush()
        os.fsync(f.fileno())


class CorruptionTest:
    def __init__(self, res, fs):
        self.res = res
        self.fs = fs
        self.rng = random.Random(SEED)
        self.model = {}
        self.pages_read = 0
        self.layout = {}  # container path -> parse_container(), taken before any damage

    def containers(self):
        files, _, _ = dc.tree_usage(dc.containers_dir(self.fs))
        return sorted(p for p, _, _ in files if p.endswith(".ftc"))

    def write_files(self):
        os.makedirs(self.fs.path("ORCL", "backupset"))
        for i in range(FILES):
            # Unique content (no chunk shared between files or within one),
            # a quarter of it compressible so that both codecs appear.
            rng = random.Random("%d-%d" % (SEED, i))
            parts = []
            size = 0
            while size < FILE_SIZE:
                if rng.random() < 0.75:
                    p = rng.randbytes(32 << 10)
                else:
                    p = b" ".join(b"SCN %d SEQ %d" % (rng.randrange(10 ** 12), rng.randrange(10 ** 6))
                                  for _ in range(1500))
                parts.append(p)
                size += len(p)
            data = b"".join(parts)[:FILE_SIZE]
            rel = "ORCL/backupset/piece_%02d.bkp" % i
            dc.write_file(self.fs.path(rel), data, fsync=True)
            self.model[rel] = data
        return dc.check_sealed(self.res, [self.fs.path(r) for r in self.model], "before the damage")

    def read_back(self, what):
        """Reads every file page by page; returns (files with EIO, files exact, unreadable bytes)."""
        affected, exact, unreadable, wrong = [], [], 0, 0
        for rel in sorted(self.model):
            data = self.model[rel]
            fd = os.open(self.fs.path(rel), os.O_RDONLY)
            bad = 0
            try:
                pos = 0
                while pos < len(data):
                    try:
                        got = os.pread(fd, READ_SIZE, pos)
                    except OSError as e:
                        if not self.res.check(e.errno == errno.EIO, "%s: %s at %d: %s, expected EIO or data"
                                              % (what, rel, pos, e)):
                            wrong += 1
                        # Step over the failing page only: the next one may be fine.
                        step = PAGE - pos % PAGE
                        bad += step
                        pos += step
                        continue
                    if not got:
                        self.res.check(False, "%s: %s: end of file at %d, its size is %d" % (what, rel, pos, len(data)))
                        break
                    self.pages_read += 1
                    if got != data[pos:pos + len(got)]:
                        wrong += 1
                        self.res.check(False, "%s: %s: WRONG BYTES in [%d, %d)" % (what, rel, pos, pos + len(got)))
                    pos += len(got)
            finally:
                os.close(fd)
            if bad:
                affected.append(rel)
                print("%s: %s: %d of %d bytes unreadable (EIO)" % (what, rel, bad, len(data)), flush=True)
            else:
                exact.append(rel)
            unreadable += bad
        self.res.check(wrong == 0, "%s: %d reads returned wrong bytes or unexpected errors" % (what, wrong))
        print("%s: %d files read back whole, %d with EIO, %d bytes unreadable"
              % (what, len(exact), len(affected), unreadable), flush=True)
        return affected, exact, unreadable

    def damage_regions(self):
        regions = []
        for c in self.containers():
            self.layout[c] = parse_container(c)
            regions += self.layout[c][0]
        total = sum(f["plain"] for f in regions)
        print("containers: %d, regions: %d (%d compressed), %d plain bytes"
              % (len(self.containers()), len(regions), sum(f["codec"] == CODEC_ZSTD for f in regions), total), flush=True)
        if not self.res.check(total >= sum(len(d) for d in self.model.values()),
                              "the regions found in the containers do not hold the files' bytes: "
                              "container format not understood by this test"):
            return []
        zstd = [f for f in regions if f["codec"] == CODEC_ZSTD]
        raw = [f for f in regions if f["codec"] == CODEC_RAW]
        self.res.check(zstd and raw, "expected both compressed and raw regions (%d, %d)" % (len(zstd), len(raw)))
        picks = []
        for pool, lo, hi, what in ((zstd, None, None, "payload of a compressed region"),
                                   (raw, None, None, "payload of a raw region"),
                                   (regions, REGION_HEADER + 4, REGION_HEADER + REGION_ENTRY, "id in a region's table"),
                                   (regions, 12, 16, "chunk count in a region header"),
                                   (regions, 20, 24, "stored size in a region header"),
                                   (regions, 48, 64, "checksums of a region header"),
                                   (regions, 0, 4, "magic of a region header")):
            choices = [f for f in pool if f not in picks]
            if not choices:
                continue
            f = self.rng.choice(choices)
            picks.append(f)
            if lo is None:
                lo, hi = REGION_HEADER + REGION_ENTRY * f["count"], f["size"]
            off = f["offset"] + self.rng.randrange(lo, hi)
            flip(f["path"], off, self.rng)
            print("damaged %s: %s byte %d" % (what, os.path.relpath(f["path"], self.fs.data), off), flush=True)
        return picks

    def rewrite(self, affected):
        """The damaged files written again under new names: once sealed, they
        must read back whole; deduplication may not lean on a damaged chunk."""
        again = []
        for rel in affected:
            new = rel.replace(".bkp", "_again.bkp")
            dc.write_file(self.fs.path(new), self.model[rel], fsync=True)
            again.append(new)
        dc.check_sealed(self.res, [self.fs.path(r) for r in again], "written again after the damage")
        # From the containers, not from a cache the writes may have filled.
        self.fs.stop()
        self.fs.start()
        for rel, new in zip(affected, again):
            dc.compare(self.res, self.fs.path(new), self.model[rel], "%s written again as %s after the damage, "
                       "sealed, remounted" % (rel, new))
            self.model[new] = self.model[rel]  # read again after round 2's damage
        print("%d damaged files written again under new names" % len(again), flush=True)

    def damage_containers(self):
        n = 0
        for c in sorted(self.layout):
            _, index, footer, size = self.layout[c]
            rel = os.path.relpath(c, self.fs.data)
            flip(c, self.rng.randrange(0, CONTAINER_HEADER), self.rng)
            n += 1
            print("damaged the header of %s" % rel, flush=True)
            if index is not None:
                flip(c, self.rng.randrange(index, size - CONTAINER_FOOTER), self.rng)
                print("damaged the index of %s" % rel, flush=True)
            if footer is not None:
                flip(c, self.rng.randrange(footer, size), self.rng)
                print("damaged the footer of %s" % rel, flush=True)
        self.res.check(any(index is not None for _, index, _, _ in self.layout.values()),
                       "no container with an index: the test wrote too little to fill one")
        return n

    def run(self):
        self.fs.start()
        ok = self.write_files()
        self.fs.stop()
        if not ok:
            return

        # Round 1: regions.
        picks = self.damage_regions()
        if not picks:
            return
        log_at = dc.log_size(self.fs)
        self.fs.start()
        affected, exact, unreadable = self.read_back("damaged regions")
        self.res.check(affected, "damaged regions: no file saw EIO although %d regions were damaged" % len(picks))
        self.res.check(exact, "damaged regions: no file read back whole although only %d regions were damaged"
                       % len(picks))
        limit = sum(f["plain"] + 2 * PAGE for f in picks)
        self.res.check(unreadable <= limit, "damaged regions: %d bytes unreadable, the %d damaged regions hold %d "
                       "(a page more on each side allowed: %d)" % (unreadable, len(picks),
                                                                   sum(f["plain"] for f in picks), limit))
        log = dc.log_since(self.fs, log_at)
        reports = [line for line in log.splitlines() if dc.DAMAGE_RE.search(line)]
        print("daemon log, %d lines about the damage%s" % (len(reports), (": " + reports[0]) if reports else ""),
              flush=True)
        self.res.check(reports, "damaged regions: nothing in the daemon log says so")
        self.rewrite(affected)
        self.fs.stop()

        # Round 2: container headers, indexes and footers as well.
        if not self.res.check(self.damage_containers() > 0, "no container to damage"):
            return
        self.fs.start()
        affected2, _, _ = self.read_back("damaged containers")
        self.res.check(set(affected) <= set(affected2),
                       "damaged containers: files that failed before read back whole now: %s"
                       % sorted(set(affected) - set(affected2)))
        self.fs.stop()


def main():
    harness.require_fuse()
    res = harness.Results("e2e-dedup-corruption")
    fs = harness.Fratier(options=dc.OPTIONS)
    test = CorruptionTest(res, fs)
    try:
        test.run()
    except Exception:
        res.check(False, "exception")
        raise
    finally:
        print("%d reads checked" % test.pages_read, flush=True)
        if fs.proc is not None:
            fs.kill(check=False)
        if res.failed or os.environ.get("FRATIER_KEEP"):
            print("kept %s for inspection" % fs.base)
            sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
        else:
            shutil.rmtree(fs.base, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
