#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Global dedup on a shared tier (docs/SHARED.md): three daemons on this
machine, each with its own data directory, hot tier, catalog and mount,
share one capacity directory (or, with --nfs, one nfs-ganesha export) under
the host names a, b and c.

- the same Oracle-like backup (oragen, one seed) copied into all three and
  migrated to the shared tier by a, then b, then c: the shared tier holds
  about one copy (at most 1.15x of what it held after a alone), b and c
  store at most a tenth of a's containers and segments there and send
  less than half of the bytes a sent (tierctl status --json, bytes_sent of
  the tier: their descriptions, rewritten as files move, are most of it;
  bench-hosts.py measures the ratio), and every file reads back
  byte-exact on every host, also after a's collection (a keeps containers
  others reference);
- tierctl report --by host once b and c published their references: a's
  containers that b's and c's latest reference publications name (parsed
  here from the tier: all of a's) are a's shared bytes, the rest of each
  host's objects its unique bytes, the rows add up; b's and c's summaries
  say how much of their logical bytes they read from other hosts'
  containers (as their catalogs count it) and a's says none;
- b is SIGKILLed while it migrates a second backup a already published,
  remounted: every file is there byte-exact, before and after migrating
  the rest;
- one byte flipped in a container of a: b's reads of the files whose
  chunks are there fail with EIO, never with wrong bytes, and the rest of
  its files read exactly.

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_ORAGEN, FRATIER_TIERCTL),
FRATIER_KEEP (keep the data directories), FRATIER_SOAK=1 (two days of
backups instead of one).
"""

import errno
import os
import re
import sqlite3
import struct
import subprocess
import sys
import time

import harness
import tiercommon as tc
from tiercommon import dc

DAYS = 2 if os.environ.get("FRATIER_SOAK") == "1" else 1
ON_TIER = "SELECT count(*) FROM inodes WHERE tier = ? AND (mode & 61440) = 32768 AND nlink > 0"
# Bytes of a host's files read from other hosts' containers, and what those chunks take there (each once).
FOREIGN = ("SELECT coalesce(sum(c.refs * c.plain_size), 0), coalesce(sum(c.frame_size), 0) FROM chunks c "
           "JOIN containers k ON k.id = c.container WHERE k.tier = ? AND k.host IS NOT NULL AND c.refs > 0")
LEASE = 4  # summaries are published once a lease period: the report's figures follow within seconds


def copy_sealed(res, fs, src):
    model = tc.copy_in(fs, src)
    if not dc.check_sealed(res, [fs.path(r) for r in model], "seal"):
        res.finish()
    return model


def migrate(res, fs, what):
    j = tc.tierctl_json(res, fs, "migrate", "--to", "filer", fs.mnt)
    res.check(j.get("failed") == 0 and j.get("moved", 0) > 0,
              "%s: migrate to the shared tier: %r" % (what, {k: j.get(k) for k in ("moved", "failed", "skipped")}))


def stored(root):
    """Bytes of every object on the shared tier: containers, segments, records, descriptions."""
    total = 0
    for d, _, names in os.walk(root):
        total += sum(os.path.getsize(os.path.join(d, n)) for n in names)
    return total


def catalog_query(fs, sql, *args):
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(fs.data, "hot", "catalog.db"), uri=True, timeout=30)
    try:
        return db.execute(sql, args).fetchone()
    finally:
        db.close()


def on_tier(fs, tier):
    return catalog_query(fs, ON_TIER, tier)[0]


def latest_references(root, host):
    """{(owner, container id)} of host's latest reference publication h/HOST/r/EPOCH.ftr (dedup/refs.h)."""
    d = os.path.join(root, "h", host, "r")
    names = sorted(n for n in os.listdir(d) if re.fullmatch(r"[0-9a-f]{16}\.ftr", n)) if os.path.isdir(d) else []
    if not names:
        return set()
    with open(os.path.join(d, names[-1]), "rb") as f:
        buf = f.read()
    n_acks, n_refs = struct.unpack_from("<II", buf, 40)
    out = set()
    for i in range(n_refs):
        at = 80 + (n_acks + i) * 40
        out.add((buf[at:at + 32].rstrip(b"\0").decode(), struct.unpack_from("<Q", buf, at + 32)[0]))
    return out


def containers_of(root, host):
    """{container id: size} of host's containers on the tier."""
    out = {}
    for d, _, names in os.walk(os.path.join(root, "h", host, "c")):
        for n in names:
            m = re.fullmatch(r"([0-9a-f]{16})\.ftc", n)
            if m:
                out[int(m.group(1), 16)] = os.path.getsize(os.path.join(d, n))
    return out


def tier_objects(root):
    """(objects, bytes) below h/ and hosts/ of the tier, or None if a file went
    away during the walk: a host publishing its summary writes summary.tmp and
    renames it (seen in an ASan run), so the count is taken again."""
    n = size = 0
    try:
        for top in ("h", "hosts"):
            for d, _, names in os.walk(os.path.join(root, top)):
                n += len(names)
                size += sum(os.path.getsize(os.path.join(d, x)) for x in names)
    except FileNotFoundError:
        return None
    return n, size


def check_report_by_host(res, hosts, root, models):
    """report --by host on a: shared against the publications on the tier, foreign bytes against the catalogs."""
    a = hosts["a"]
    # b and c publish their references at their collections.
    for h in ("b", "c"):
        rc, _, err = tc.tierctl(hosts[h], "gc")
        res.check(rc == 0, "gc on %s: %s" % (h, err))
    since = time.time()
    want_foreign = {h: catalog_query(fs, FOREIGN, 1) for h, fs in hosts.items()}
    refs = {h: latest_references(root, h) for h in hosts}
    res.check(refs["b"] and refs["c"], "b and c published no references: %r" % {h: len(v) for h, v in refs.items()})
    want_shared = {}
    for h in hosts:
        named = set().union(*(v for o, v in refs.items() if o != h))
        want_shared[h] = sum(size for cid, size in containers_of(root, h).items() if (h, cid) in named)
    # a's containers hold the one backup b and c copied too: they name every one of them.
    res.check(want_shared["a"] == sum(containers_of(root, "a").values()) > 0,
              "b's and c's publications name %d bytes of a's containers, which hold %d" %
              (want_shared["a"], sum(containers_of(root, "a").values())))
    deadline = time.monotonic() + harness.scaled(8 * LEASE)
    while True:
        rows = {r["host"]: r for r in tc.tierctl_json(res, a, "report", "--by", "host").get("hosts", [])
                if r.get("tier") == 1}
        fresh = all(rows.get(h, {}).get("summary_time", 0) > since for h in hosts)
        objects = tier_objects(root)
        if (fresh and objects == (sum(r["objects"] for r in rows.values()), sum(r["bytes"] for r in rows.values()))) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    res.check(fresh, "summaries not published since the collections: %r" % {h: r.get("summary_time") for h, r in rows.items()})
    print("report --by host: " + "; ".join("%s stored %d unique %d shared %d logical %s from others %s" % (
        h, r["bytes"], r["unique"], r["shared"], r.get("logical"), r.get("foreign_logical"))
        for h, r in sorted(rows.items())), flush=True)
    res.check(objects == (sum(r["objects"] for r in rows.values()), sum(r["bytes"] for r in rows.values())),
              "report --by host rows add up to %r, the tier holds %r" %
              ((sum(r["objects"] for r in rows.values()), sum(r["bytes"] for r in rows.values())), objects))
    for h in hosts:
        r = rows.get(h, {})
        res.check(r.get("unique", -1) + r.get("shared", -1) == r.get("bytes"),
                  "%s: unique %r + shared %r is not stored %r" % (h, r.get("unique"), r.get("shared"), r.get("bytes")))
        res.check(r.get("shared") == want_shared[h], "%s: shared %r, its containers others' publications name hold %d"
                  % (h, r.get("shared"), want_shared[h]))
        res.check((r.get("foreign_logical"), r.get("foreign_stored")) == tuple(want_foreign[h]),
                  "%s: from others %r, stored by others %r; its catalog says %r" %
                  (h, r.get("foreign_logical"), r.get("foreign_stored"), want_foreign[h]))
        res.check(r.get("logical") == sum(len(v) for v in models[h].values()),
                  "%s: logical %r" % (h, r.get("logical")))
    res.check(rows["a"]["foreign_logical"] == 0, "a read %r bytes from others" % rows["a"]["foreign_logical"])
    for h in ("b", "c"):
        res.check(rows[h]["foreign_logical"] >= 0.9 * rows[h]["logical"],
                  "%s reads %d of its %d logical bytes from others: less than 0.9" %
                  (h, rows[h]["foreign_logical"], rows[h]["logical"]))
    rc, out, err = tc.tierctl(a, "report", "--by", "host", "--bytes")
    print(out, flush=True)
    head = out.splitlines()[0] if out else ""
    total = [l for l in out.splitlines() if re.match(r"\s*1\s+total\s", l)]
    res.check(rc == 0 and "UNIQUE" in head and "SHARED" in head and "FROM OTHERS" in head and total and
              str(sum(r["shared"] for r in rows.values())) in total[0].split(),
              "report --by host table: %r %s" % (out[-1200:], err))


def run(res, tmp, filer, root):
    src = os.path.join(tmp, "src")
    tc.generate(res, src, seed=1, days=DAYS)
    src2 = os.path.join(tmp, "src2")
    tc.generate(res, src2, seed=2, days=1)
    hosts = {h: tc.shared_daemon(tmp, h, filer, lease=LEASE) for h in ("a", "b", "c")}
    a, b, c = hosts["a"], hosts["b"], hosts["c"]
    with a, b, c:
        models, sent = {}, {}
        for h in ("a", "b", "c"):
            fs = hosts[h]
            models[h] = copy_sealed(res, fs, src)
            before = int(tc.filer_row(res, fs).get("bytes_sent", 0))
            migrate(res, fs, h)
            row = tc.filer_row(res, fs)
            sent[h] = int(row.get("bytes_sent", 0)) - before
            if h == "a":
                one = stored(root)
            print("%s: sent %d bytes to the shared tier; %s chunks referenced instead (%s bytes), %s segments "
                  "loaded, %s published, lookup %s entries in %s bytes"
                  % (h, sent[h], row.get("global_foreign_hits"), row.get("global_foreign_bytes"),
                     row.get("global_segments_loaded"), row.get("global_segments_published"),
                     row.get("global_entries"), row.get("global_memory")), flush=True)
        three = stored(root)
        logical = sum(len(v) for v in models["a"].values())
        print("shared tier: %d bytes after a (%d logical), %d after a, b and c: %.3fx; sent by b %.4f, by c %.4f of a"
              % (one, logical, three, three / one, sent["b"] / sent["a"], sent["c"] / sent["a"]), flush=True)
        res.check(three <= 1.15 * one, "the shared tier holds %.3fx of one host's copy (1.15x at most)" % (three / one))
        # What b and c stored of the data (containers, segments) is what they would send again and again;
        # their descriptions (rewritten as files move, a number of times that depends on timing) come on top.
        data = {h: stored(os.path.join(root, "h", h, "c")) + stored(os.path.join(root, "h", h, "i")) for h in hosts}
        print("containers and segments: a %d bytes, b %d, c %d" % (data["a"], data["b"], data["c"]), flush=True)
        res.check(data["b"] <= 0.10 * data["a"] and data["c"] <= 0.10 * data["a"],
                  "b and c stored %d and %d bytes of containers and segments, a %d: more than a tenth"
                  % (data["b"], data["c"], data["a"]))
        res.check(sent["b"] < 0.5 * sent["a"] and sent["c"] < 0.5 * sent["a"],
                  "b and c sent %d and %d bytes, a %d: half of it or more" % (sent["b"], sent["c"], sent["a"]))
        res.check(int(tc.filer_row(res, b).get("global_foreign_hits", 0)) > 0, "b referenced nothing of a")
        rc, out, err = tc.tierctl(b, "status")
        res.check(rc == 0 and "sent to filer:" in out and "global dedup on filer:" in out,
                  "tierctl status of b says nothing of global dedup: %s" % (out + err)[-800:])
        print("\n".join(line for line in out.splitlines() if "filer:" in line), flush=True)
        rc, out, err = tc.tierctl(b, "metrics")
        res.check(rc == 0 and 'fratier_tier_sent_bytes_total{tier="1",name="filer"}' in out and
                  'fratier_tier_global_foreign_chunks_total{tier="1",name="filer"}' in out,
                  "tierctl metrics of b: %s" % (out + err)[-800:])
        for h, fs in hosts.items():
            res.check(sorted(set(tc.tiers_of(res, fs, models[h]).values())) == [1], "%s: files not on the shared tier" % h)
            tc.compare_all(res, fs, models[h], "%s, after the three migrations" % h)

        check_report_by_host(res, hosts, root, models)

        # a's collector keeps what b and c reference, also once a deleted its own copies.
        for r in list(models["a"])[:3]:
            os.unlink(a.path(r))
            del models["a"][r]
        rc, _, err = tc.tierctl(a, "gc")
        res.check(rc == 0, "gc on a: %s" % err)
        tc.compare_all(res, b, models["b"], "b after a deleted files and collected")

        # SIGKILL of b while it migrates a backup a already published.
        m2a = copy_sealed(res, a, src2)
        migrate(res, a, "a, second backup")
        m2b = copy_sealed(res, b, src2)
        moved_before = on_tier(b, 1)
        p = subprocess.Popen([tc.tierctl_path(), "-m", b.mnt, "migrate", "--to", "filer", b.mnt],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + harness.scaled(60)
        while time.monotonic() < deadline and p.poll() is None and on_tier(b, 1) < moved_before + 2:
            time.sleep(0.002)
        b.kill()
        p.communicate(timeout=60)
        left = on_tier(b, 0)
        print("b killed while migrating: %d files still on its hot tier" % left, flush=True)
        b.start()
        models["b"].update(m2b)
        tc.compare_all(res, b, models["b"], "b after SIGKILL during migration and remount")
        if left > 0:
            migrate(res, b, "b after the crash")
        tc.compare_all(res, b, models["b"], "b after migrating the rest")
        res.check(all(t == 1 for t in tc.tiers_of(res, b, models["b"]).values()), "b: files left off the shared tier")
        models["a"].update(m2a)
        tc.compare_all(res, a, models["a"], "a after b's crash")

        # A flipped byte in a container of a: EIO on b, never wrong bytes.
        containers = sorted(os.path.join(d, n) for d, _, ns in os.walk(os.path.join(root, "h", "a", "c"))
                            for n in ns if n.endswith(".ftc"))
        victim = max(containers, key=os.path.getsize)
        with open(victim, "r+b") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(size // 2)
            byte = f.read(1)
            f.seek(size // 2)
            f.write(bytes([byte[0] ^ 0x40]))
        b.stop()
        b.start()  # a fresh region cache: what b read before is gone
        eio, exact = 0, 0
        for r in sorted(models["b"]):
            try:
                got = dc.read_all(b.path(r))
            except OSError as e:
                res.check(e.errno == errno.EIO, "b: %s failed with %s, not EIO" % (r, e))
                eio += 1
                continue
            res.check(got == models["b"][r], "b: %s read back wrong bytes after the flip" % r)
            exact += got == models["b"][r]
        print("after a byte of %s flipped: %d files EIO on b, %d exact" % (os.path.relpath(victim, root), eio, exact),
              flush=True)
        res.check(eio > 0, "b read every file despite a flipped byte in a container of a it references")


def main():
    tc.shared_filer_main("e2e-global", run)


if __name__ == "__main__":
    sys.exit(main())
