# SPDX-License-Identifier: GPL-2.0-or-later
"""Shared plumbing of the deduplication end-to-end tests: the sealing state
of a file, waiting for it, what the hot tier stores, and seeded content that
shares chunks on purpose.

The sealing state comes from the virtual xattr trusted.fratier.state ("raw
CLASS" or "sealed CLASS", root only).  Waits poll with generous deadlines and
only ever decide pass/fail by what they find, never by how long it took.
"""

import errno
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

import harness

STATE_XATTR = "trusted.fratier.state"
OPTIONS = ["seal_delay=0", "gc_interval=1"]
# How long a file may take to get sealed or garbage to get collected before
# the test calls it stuck.  Far above what a loaded 2-core machine needs,
# and stretched for sanitizer builds (harness.scaled()).
SEAL_TIMEOUT = harness.scaled(float(os.environ.get("FRATIER_SEAL_TIMEOUT", "60")))
GC_TIMEOUT = harness.scaled(float(os.environ.get("FRATIER_GC_TIMEOUT", "60")))
BLOCK = 1 << 20  # the archiver's and dd's write size
# A container holding no chunk may keep its header (and an empty index) only.
EMPTY_CONTAINER_MAX = 64 << 10
# The daemon's words for damage it found (read errors, checksum failures).
DAMAGE_RE = re.compile(r"(?i)(input/output error|\bEIO\b|corrupt|damage|checksum|bad message|EBADMSG)")


def oragen_path():
    path = os.environ.get("FRATIER_ORAGEN")
    if not path:
        path = os.path.join(os.environ.get("FRATIER_BUILD_ROOT", "build"), "tools", "oragen", "oragen")
    return path


def state(path):
    """("sealed"|"raw", CLASS), or ("error", strerror) if the xattr cannot be read."""
    try:
        v = os.getxattr(path, STATE_XATTR).decode(errors="replace").split()
    except OSError as e:
        return ("error", "%s (%s)" % (errno.errorcode.get(e.errno, e.errno), e.strerror))
    return (v[0], v[1] if len(v) > 1 else "")


def state_words(path):
    """Every word of the state ("raw CLASS streaming BYTES" while a file is chunked as it is written)."""
    try:
        return os.getxattr(path, STATE_XATTR).decode(errors="replace").split()
    except OSError as e:
        return ["error", errno.errorcode.get(e.errno, str(e.errno))]


def tierctl_path():
    return os.environ.get("FRATIER_TIERCTL") or os.path.join(
        os.environ.get("FRATIER_BUILD_ROOT", "build"), "tools", "tierctl", "tierctl")


def status(fs):
    """The daemon's status (tierctl status --json) as a dict of its top-level fields."""
    p = subprocess.run([tierctl_path(), "-m", fs.mnt, "status", "--json"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError("tierctl status: exit %d: %s" % (p.returncode, p.stderr.strip()))
    return json.loads(p.stdout)


def wait_states(paths, want="sealed", timeout=SEAL_TIMEOUT):
    """Polls until every path's state is want; returns {path: last state} of those that never got there."""
    pending = set(paths)
    last = {}
    deadline = time.monotonic() + timeout
    while pending:
        for p in list(pending):
            last[p] = state(p)
            if last[p][0] == want:
                pending.discard(p)
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return {p: last[p] for p in pending}


def check_sealed(res, paths, what, timeout=SEAL_TIMEOUT):
    """Waits for paths to be sealed; one check per path.  Returns True if all are."""
    stuck = wait_states(paths, "sealed", timeout)
    for p in sorted(paths):
        res.check(p not in stuck, "%s: %s never reported sealed within %ds (last state: %s)"
                  % (what, p, timeout, " ".join(stuck.get(p, ()))))
    return not stuck


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def write_file(path, data, fsync=False):
    """Creates (or truncates) path and writes data in 1 MiB write(2) calls, as dd bs=1M does."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        mv = memoryview(data)
        off = 0
        while off < len(data):
            n = os.write(fd, mv[off:off + BLOCK])
            off += n
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def compare(res, path, expect, what):
    """Reads path back whole; one check.  Returns True if it is exact."""
    try:
        got = read_all(path)
    except OSError as e:
        return res.check(False, "%s: reading %s failed: %s" % (what, path, e))
    n = min(len(got), len(expect))
    first = n if got == expect else next((i for i in range(n) if got[i] != expect[i]), n)
    return res.check(got == expect, "%s: %s differs: %d bytes read, %d expected, first difference at %d"
                     % (what, path, len(got), len(expect), first))


def tree_usage(root):
    """(files, apparent bytes, allocated bytes) of the regular files under root."""
    files, apparent, allocated = [], 0, 0
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            files.append((p, st.st_size, st.st_blocks * 512))
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return files, apparent, allocated


def containers_dir(fs):
    return os.path.join(fs.data, "hot", "containers")


def stored_bytes(fs):
    """What the hot tier's chunk store takes: as du counts it, at least the apparent size."""
    _, apparent, allocated = tree_usage(containers_dir(fs))
    return max(apparent, allocated)


def staging_names(fs):
    """{name: relative path} of the staging files on the hot tier."""
    root = os.path.join(fs.data, "hot", "staging")
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            out[n] = os.path.relpath(os.path.join(d, n), root)
    return out


def staging_name(ino):
    return "%016x" % ino


def sqlite_rows(fs, query):
    """Rows (lists of strings) of a query on the catalog, read with sqlite3
    -readonly; call only while the daemon is not running (unmounted, or
    killed: what it committed is what a remount finds)."""
    db = os.path.join(fs.data, "hot", "catalog.db")
    p = subprocess.run(["sqlite3", "-readonly", db, query],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError("sqlite3 on %s: %s" % (db, p.stdout.strip()))
    return [line.split("|") for line in p.stdout.splitlines()]


def sqlite_count(fs, table):
    """Rows of a catalog table; see sqlite_rows()."""
    return int(sqlite_rows(fs, "SELECT count(*) FROM %s" % table)[0][0])


def container_sizes(root):
    """{file name: size} of the containers under root."""
    return {os.path.basename(p): a for p, a, _ in tree_usage(root)[0]}


def wait_containers_empty(fs, timeout=GC_TIMEOUT):
    """Polls until no container file is larger than EMPTY_CONTAINER_MAX; returns the last listing."""
    deadline = time.monotonic() + timeout
    while True:
        files, _, _ = tree_usage(containers_dir(fs))
        big = [(p, a, b) for p, a, b in files if max(a, b) >= EMPTY_CONTAINER_MAX]
        if not big or time.monotonic() > deadline:
            return files, big
        time.sleep(0.1)


def log_size(fs):
    try:
        return os.path.getsize(fs.log)
    except OSError:
        return 0


def log_since(fs, offset):
    try:
        with open(fs.log, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


class Content:
    """Seeded file contents built from a pool of 64 KiB pieces shared between
    files (so that files dedup against each other), unique random pieces,
    zero runs and compressible text."""

    PIECE = 64 << 10

    def __init__(self, seed, pool_pieces=64):
        self.rng = random.Random(seed)
        self.pool = [self.rng.randbytes(self.PIECE) for _ in range(pool_pieces)]

    def make(self, size, shared=0.5, zeros=0.05, text=0.1, rng=None):
        rng = rng or self.rng
        out = bytearray()
        while len(out) < size:
            x = rng.random()
            if x < shared:
                piece = self.pool[rng.randrange(len(self.pool))]
            elif x < shared + zeros:
                piece = bytes(self.PIECE)
            elif x < shared + zeros + text:
                words = [b"ARCHIVELOG", b"SCN", b"THREAD", b"SEQUENCE", b"RMAN", b"BACKUP", b"%d" % rng.randrange(10 ** 9)]
                piece = b" ".join(rng.choice(words) for _ in range(self.PIECE // 8))[:self.PIECE]
            else:
                piece = rng.randbytes(self.PIECE)
            # Pieces are cut at random lengths so that shared bytes move off any grid.
            out += piece[:rng.randrange(self.PIECE // 4, self.PIECE + 1)]
        return bytes(out[:size])


def delete_all_check_no_leaks(res, fs, model, path):
    """Deletes every file of model (path(rel) names it in the mount) and
    checks nothing is left: containers emptied by the collector, and after
    a clean unmount no staging file and no chunk or recipe row."""
    for rel in list(model):
        os.unlink(path(rel))
    model.clear()
    files, big = wait_containers_empty(fs)
    print("after deleting everything: %d container files, %d bytes; %d staging files"
          % (len(files), sum(max(a, b) for _, a, b in files), len(staging_names(fs))), flush=True)
    res.check(not big, "containers still hold data %ds after everything was deleted: %s"
              % (GC_TIMEOUT, ", ".join("%s (%d bytes)" % (os.path.relpath(p, fs.data), a) for p, a, _ in big)))
    fs.stop()
    staging = staging_names(fs)
    res.check(not staging, "staging files left after everything was deleted: %s"
              % ", ".join(sorted(staging.values())[:20]))
    for table in ("chunks", "recipes"):
        n = sqlite_count(fs, table)
        res.check(n == 0, "the catalog still has %d rows in %s after everything was deleted and collected"
                  % (n, table))


def cleanup(res, fs):
    """Kills a daemon still running; keeps the data and shows the daemon log
    when something failed (or FRATIER_KEEP is set), else removes them."""
    if fs.proc is not None:
        fs.kill(check=False)
    if res.failed or os.environ.get("FRATIER_KEEP"):
        print("kept %s (data, daemon log) for inspection" % fs.base)
        sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
    else:
        shutil.rmtree(fs.base, ignore_errors=True)
