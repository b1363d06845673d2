#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Encryption at rest of lower tiers, through the mount (docs/SECURITY.md).

- a tier with encrypt = yes and no key is refused at start, naming the tier;
- files of Oracle-like blocks holding unique marker strings, sealed on the
  plain hot tier, move to the encrypted capacity tier and are searched for
  in every byte of every file under that tier's directory (containers and
  the description): the markers, their SHA-256, every block's plain chunk
  id (its SHA-256: a backup piece is cut into one chunk per Oracle block),
  a slice of every block's body, the name of a directory holding one
  of them, every block's keyed chunk id and its region table entry (length
  and keyed id, computed with the key's id subkey), and any run of three
  table entries of the blocks' length, whatever their ids (region tables
  are sealed, docs/FORMAT.md "Sealed region" version 4).  No hit.  The same search on a tier with encrypt = no finds them,
  so the search can fail;
- migrations hot (plain) -> capacity (encrypted) -> plain tier -> capacity
  -> recall to hot, every file byte-exact after each;
- the tamper matrix on the encrypted tier, the daemon stopped for each
  change and started again (no cached region hides it): a flipped byte in
  a region the catalog lists, and one in a region's (sealed) table, two regions of equal size swapped between
  containers, a container truncated, a container replaced by an older copy
  of itself.  Each time the affected file reads EIO, tierctl scrub lists
  it (and only files already damaged), every other file reads byte-exact,
  and the daemon keeps serving.  Then the tier's description replaced by
  an older copy of itself (genuine, sealed under the key): tierctl scrub
  names it as older than the catalog's and writes it again;
- three hosts on one shared directory tier under the key: a's index
  segments are sealed, b references a's chunks through them, and the
  search finds nothing of their files under a's and b's directories;
  c, with encrypt = no, publishes in clear, and the search finds its
  file's keyed chunk ids in its segments (so it can fail);
- with --nfs (e2e-encrypt-nfs), on an NFS tier served by nfs-ganesha: the
  files migrate there byte-exact, the export holds none of the needles
  above, scrub is clean; disaster recovery from the export alone is
  refused, restoring nothing, without the key or with another key, and
  with the key restores every file byte-exact; recall is exact.

The victims are found from outside: the key file gives the id subkey
(HKDF-SHA-256, docs/FORMAT.md "Key file"), so each block's keyed chunk id,
which the catalog lists with its container and offset, names the file a
region belongs to."""

import errno
import hashlib
import hmac
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "nfs"))
import ganesha  # noqa: E402
import harness  # noqa: E402
import tiercommon as tc  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dedup"))
import dedupcommon as dc  # noqa: E402

BLOCK = 8192
BLOCKS = 768  # 6 MiB a file: six of them fill more than one 32 MiB container
EXIT_PARTIAL = 5  # tierctl: done, with damage found (tests/e2e/tierctl/test_tierctl.py)


def oracle_block(rng_bytes, n, marker):
    """An 8 KiB block that passes the chunker's Oracle checks (docs/FORMAT.md, "Oracle blocks")."""
    b = bytearray(rng_bytes)
    typ, seq, scn = 6, n & 0xff, 0x10000 + n
    b[0], b[1], b[2], b[3] = typ, 0xa2, 0, 0
    struct.pack_into("<II", b, 4, n, scn)
    b[14] = seq
    if marker:
        b[100:100 + len(marker)] = marker
    struct.pack_into("<I", b, BLOCK - 4, (scn & 0xffff) << 16 | typ << 8 | seq)
    return bytes(b)


def make_file(tag):
    """(content, marker, blocks) of a backup piece whose every 64th block holds its marker."""
    marker = b"FRATIER-MARKER-" + tag.encode() + b"-" + os.urandom(8).hex().encode()
    body = os.urandom(BLOCK * BLOCKS)
    blocks = [oracle_block(body[i * BLOCK:(i + 1) * BLOCK], i, marker if i % 64 == 0 else None)
              for i in range(BLOCKS)]
    return b"".join(blocks), marker, blocks


def hkdf(master, info):
    prk = hmac.new(b"fratier", master, hashlib.sha256).digest()
    return hmac.new(prk, info + b"\x01", hashlib.sha256).digest()


def id_key(keyfile):
    with open(keyfile) as f:
        return hkdf(bytes.fromhex(f.read().split("\n")[1].split(" ")[0]), b"fratier chunk id")


def greppable(n):
    """grep -F takes one pattern a line: a needle holding a newline (or NUL) cannot be one."""
    return b"\n" not in n and b"\0" not in n


# Three region table entries in a row (length u32 LE, id 32 bytes) of the blocks' length: a file's
# sequence of chunk lengths as a clear table would show it, which needs no key to look for.
LENGTH_RUN = re.compile(re.escape(struct.pack("<I", BLOCK)) + b".{32}" + re.escape(struct.pack("<I", BLOCK)) +
                        b".{32}" + re.escape(struct.pack("<I", BLOCK)), re.DOTALL)
# A table entry of the blocks' length (a length holds NUL bytes, which grep -F patterns cannot).
ENTRY = re.compile(re.escape(struct.pack("<I", BLOCK)) + b"(?=(.{32}))", re.DOTALL)


def needles(files, paths=(), key=None):
    """{class: [needle bytes]} for the search: what must not be on an encrypted tier.  Each digest is
    searched in hex, and raw unless it holds a newline or NUL byte (about 22% do); the slice of a
    block is the first 32 bytes of its body from offset 4000 that hold neither.  With the id subkey
    key, each block's keyed chunk id and its table entry (length, keyed id) too."""
    out = {"marker": [], "sha256 of marker": [], "plain chunk id": [], "block slice": [],
           "path": [p.encode() for p in paths], "keyed chunk id": [], "table entry": [], "length run": []}
    for data, marker, blocks in files.values():
        out["marker"].append(marker)
        for cls, items in (("sha256 of marker", [marker]), ("plain chunk id", blocks)):
            for x in items:
                h = hashlib.sha256(x)
                out[cls] += [n for n in (h.digest(), h.hexdigest().encode()) if greppable(n)]
        for b in blocks:
            at = next(i for i in range(4000, BLOCK - 100) if greppable(b[i:i + 32]))
            out["block slice"].append(b[at:at + 32])
            if key:
                d = hmac.new(key, b, hashlib.sha256).digest()
                out["keyed chunk id"] += [n for n in (d, d.hex().encode()) if greppable(n)]
                out["table entry"].append(struct.pack("<I", len(b)) + d)
    return out


def search(res, top, classes, base):
    """{class: hits}: occurrences of any needle in any file under top, in one pass of grep -F
    (Aho-Corasick) per file; each match printed is mapped back to its class."""
    paths = [os.path.join(d, n) for d, _, names in os.walk(top) for n in names]
    res.check(paths, "nothing under %s to search" % top)
    cls_of = {n: cls for cls, ns in classes.items() for n in ns if cls not in ("table entry", "length run")}
    entries = {e[4:] for e in classes.get("table entry", ())}
    pat = os.path.join(base, "needles")
    with open(pat, "wb") as f:
        f.write(b"\n".join(cls_of) + b"\n")
    hits = {cls: 0 for cls in classes}
    for p in paths:
        r = subprocess.run(["grep", "-a", "-F", "-o", "-f", pat, p], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=dict(os.environ, LC_ALL="C"))
        res.check(r.returncode in (0, 1), "grep %s: %r" % (p, r.stderr[:200]))
        for m in r.stdout.split(b"\n")[:-1]:
            hits[cls_of.get(m, "marker")] += 1
        if "length run" in classes:
            with open(p, "rb") as f:
                b = f.read()
            hits["length run"] += sum(1 for _ in LENGTH_RUN.finditer(b))
            hits["table entry"] += sum(1 for m in ENTRY.finditer(b) if m.group(1) in entries)
    return hits


def write_conf(path, data, key, capacity_encrypt=None):
    with open(path, "w") as f:
        f.write("[fratier]\ndata_dir = %s\n" % data)
        if key:
            f.write("key_file = %s\n" % key)
        f.write("[tier hot]\n[tier capacity]\n")
        if capacity_encrypt is not None:
            f.write("encrypt = %s\n" % capacity_encrypt)
        f.write("[tier plain]\nrole = capacity\npath = %s/plain\nencrypt = no\n" % data)


def read_result(path):
    """The file's bytes, or the errno its read failed with."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        return e.errno


def check_files(res, fs, files, damaged, what):
    for rel, (data, _, _) in files.items():
        got = read_result(fs.path(rel))
        if rel in damaged:
            res.check(got == errno.EIO, "%s: %s reads %r, expected EIO" % (what, rel, got if isinstance(got, int)
                                                                           else "%d bytes" % len(got)))
        else:
            res.check(got == data, "%s: %s does not read back byte-exact (%r)" % (what, rel, got if isinstance(
                got, int) else len(got)))


def migrate(res, fs, to, rel):
    rc, out, err = tc.tierctl(fs, "migrate", "--to", to, fs.path(rel))
    res.check(rc == 0, "migrate %s --to %s: %d %s %s" % (rel, to, rc, out, err))


def regions(fs, key, files, tier):
    """({(container, offset): (size, {files})} of the regions on tier that hold the files' chunks, how many
    blocks of the files are no chunk there)."""
    owner = {}
    for rel, (_, _, blocks) in files.items():
        for b in blocks:
            owner[hmac.new(key, b, hashlib.sha256).hexdigest()] = rel
    out = {}
    for digest, c, o, n in dc.sqlite_rows(fs, "SELECT lower(hex(digest)), container, offset, region_size "
                                              "FROM chunks WHERE tier = %d AND refs > 0" % tier):
        r = out.setdefault((int(c), int(o)), (int(n), set()))
        if digest in owner:
            r[1].add(owner.pop(digest))
    # Regions of other files (the one in the secret directory) are not the matrix's.
    return {k: v for k, v in out.items() if v[1]}, len(owner)


def container_path(data, c):
    return os.path.join(data, "capacity", "containers", "c", "%02x" % (c & 0xff), "%016x.ftc" % c)


def scrub(fs, *args):
    rc, out, err = tc.tierctl(fs, "scrub", "--json", *args)
    try:
        sc = json.loads(out)
    except ValueError:
        sc = {}
    return rc, sc, set(d["path"].lstrip("/") for d in sc.get("damaged", [])), err


def scrubbed(res, fs, what):
    """(exit status, {files listed}) of tierctl scrub of the encrypted tier (1), which a scrub of every tier repeats."""
    rc, sc, listed, err = scrub(fs, "--tier", "1")
    res.check(rc in (0, EXIT_PARTIAL), "%s: scrub %d %r" % (what, rc, err))
    rc_all, sc_all, listed_all, err = scrub(fs)
    res.check(rc_all == rc and listed_all == listed and sc_all.get("tiers") == 3
              and sc_all.get("chunks", 0) > sc.get("chunks", 0),
              "%s: scrub without --tier verifies all 3 tiers and finds what the scrub of tier 1 found: %d %r, %d %r"
              % (what, rc_all, sc_all, rc, sc))
    return rc, listed


def tamper(res, base, conf, data, files, damaged, what, victims, change):
    """With the daemon stopped: change() alters the tier; the daemon starts and every file is checked."""
    change()
    damaged |= victims
    fs = harness.Fratier(base=base, config=conf, data=data).start()
    try:
        check_files(res, fs, files, damaged, what)
        rc, listed = scrubbed(res, fs, what)
        res.check(rc == EXIT_PARTIAL and victims <= listed and listed <= damaged,
                  "%s: scrub lists %s, expected %s (damaged so far %s)" % (what, sorted(listed), sorted(victims),
                                                                         sorted(damaged)))
        # Still serving, after the errors and the scrub: a new file, and the others again.
        with open(fs.path("after-%s" % what.replace(" ", "-")), "wb") as f:
            f.write(b"still serving\n")
        check_files(res, fs, files, damaged, what + ", again")
    finally:
        fs.stop()
    print("%s: %s read EIO, listed by scrub; %d other files byte-exact" % (what, sorted(victims),
                                                                           len(files) - len(damaged)), flush=True)


def recover_nfs(res, tmp, url, files, key, other):
    """Disaster recovery from the encrypted NFS tier alone: refused, restoring nothing, without the key or
    with another; with the key, every file byte-exact."""
    def recover(k):
        newdir = tempfile.mkdtemp(prefix="rec-", dir=tmp)
        opts = "data=" + newdir + (",key_file=" + k if k else "")
        p = subprocess.run([harness.daemon_path(), "--recover-from=" + url, "-o", opts], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=600)
        return p, newdir

    for what, k, expect in (("no key", None, "needs the key it was written under"),
                            ("another key", other, "written under another key")):
        p, newdir = recover(k)
        res.check(p.returncode != 0 and expect in p.stdout,
                  "recovery from the NFS tier with %s: exit %d, expected a line saying %r: %s"
                  % (what, p.returncode, expect, p.stdout[-600:]))
        said = [ln for ln in p.stdout.splitlines() if expect in ln]
        print("recovery from the encrypted NFS tier with %s: exit %d: %s" % (what, p.returncode, said[:1]), flush=True)
        left = [os.path.join(d, n) for d, _, names in os.walk(newdir) for n in names]
        res.check(not any(os.path.basename(n) in files for n in left),
                  "recovery from the NFS tier with %s left files behind: %s" % (what, left))
    p, newdir = recover(key)
    res.check(p.returncode == 0, "recovery from the NFS tier with the key: exit %d %s" % (p.returncode, p.stdout[-600:]))
    fs = harness.Fratier(base=tmp, data=newdir, options=["key_file=" + key])
    try:
        fs.start()
        check_files(res, fs, files, set(), "recovered from the encrypted NFS tier with the key")
        fs.stop()
    finally:
        fs.kill(check=False)


def main_nfs():
    """--nfs: the round trip on an NFS tier served by nfs-ganesha (encrypted by default under a key):
    files migrate there byte-exact, nothing of them is in the export, scrub is clean, disaster recovery
    from the export alone restores them with the key and is refused without it or with another, recall
    is exact."""
    ganesha.enter_private_namespace()
    harness.require_fuse()
    res = harness.Results("e2e-encrypt-nfs")
    with tempfile.TemporaryDirectory(prefix="fratier-encrypt-nfs-", dir=os.environ.get("FRATIER_TMP")) as tmp:
        key, other = os.path.join(tmp, "k"), os.path.join(tmp, "k2")
        for k in (key, other):
            p = subprocess.run([harness.daemon_path(), "--make-key", k], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            res.check(p.returncode == 0, "--make-key: %s" % p.stdout)
        files = {"n%d.bkp" % i: make_file("n%d" % i) for i in range(2)}
        with ganesha.Ganesha(os.path.join(tmp, "nfs")) as srv:
            data = os.path.join(tmp, "data")
            for d in ("hot", "capacity"):
                os.makedirs(os.path.join(data, d))
            conf = os.path.join(tmp, "fratier.conf")
            with open(conf, "w") as f:
                f.write("[fratier]\ndata_dir = %s\nkey_file = %s\n[tier hot]\n[tier capacity]\n"
                        "[tier filer]\nrole = nfs\npath = %s\n" % (data, key, srv.url))
            fs = harness.Fratier(base=tmp, config=conf, data=data, options=["seal_delay=0"])
            try:
                fs.start()
                for rel, (blob, _, _) in files.items():
                    dc.write_file(fs.path(rel), blob, fsync=True)
                dc.check_sealed(res, [fs.path(r) for r in files], "the files")
                for rel in files:
                    migrate(res, fs, "filer", rel)
                check_files(res, fs, files, set(), "on the encrypted NFS tier")
                rc, out, err = tc.tierctl(fs, "scrub", "--tier", "2", "--json")
                res.check(rc == 0, "scrub of the NFS tier: %d %s %s" % (rc, out, err))
                enc = search(res, srv.export, needles(files, key=id_key(key)), tmp)
                print("marker search, encrypted NFS tier (%s): %s" % (srv.export, enc), flush=True)
                res.check(sum(enc.values()) == 0, "plaintext found on the encrypted NFS tier: %s" % enc)
                # The tier's description is written before each collection: the one recovery reads.
                rc, out, err = tc.tierctl(fs, "gc")
                res.check(rc == 0, "gc: %d %s" % (rc, err))
                fs.stop()
                recover_nfs(res, tmp, srv.url, files, key, other)
                fs.start()
                rc, out, err = tc.tierctl(fs, "recall", *[fs.path(r) for r in files])
                res.check(rc == 0, "recall from the NFS tier: %d %s %s" % (rc, out, err))
                check_files(res, fs, files, set(), "recalled from the encrypted NFS tier")
                fs.stop()
            finally:
                if res.failed:
                    sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
                fs.kill(check=False)
    res.finish()


def shared_tier(res, base, key):
    """Three hosts on one shared tier under one key (docs/SHARED.md): a's index segments are sealed, and b,
    migrating the same files, references a's chunks through them; nothing of those files is anywhere under
    a's or b's directories of the tier, segments included.  c, whose section says encrypt = no, publishes
    its segment in clear, where the search finds its file's keyed chunk ids: the search can fail."""
    filer = os.path.join(base, "shared")
    os.makedirs(filer)
    hosts = {h: tc.shared_daemon(base, h, filer, options=["key_file=" + key],
                                 tier_keys="encrypt = no\n" if h == "c" else "") for h in "abc"}
    files = {"s%d.bkp" % i: make_file("s%d" % i) for i in range(2)}
    clear = {"c0.bkp": make_file("c0")}
    with hosts["a"], hosts["b"], hosts["c"]:
        for h, mine in (("a", files), ("b", files), ("c", clear)):
            fs = hosts[h]
            tc.put_shared(res, fs, {rel: blob for rel, (blob, _, _) in mine.items()})
            check_files(res, fs, mine, set(), "host %s, on the shared tier" % h)
        hits = int(tc.filer_row(res, hosts["b"]).get("global_foreign_hits", 0))
        res.check(hits > 0, "b referenced none of a's chunks: a's sealed segment did not open")
    root = os.path.join(filer, "containers")  # a directory tier's objects (tiercommon.shared_filer_main())
    enc = {cls: 0 for cls in needles(files)}
    for h in ("a", "b"):
        for cls, n in search(res, os.path.join(root, "h", h), needles(files, key=id_key(key)), base).items():
            enc[cls] += n
    segments = os.path.join(root, "h", "c", "i")
    plain = search(res, segments, needles(clear, key=id_key(key)), base)
    print("marker search, shared tier, hosts a and b (%d foreign chunks referenced by b): %s; c's clear segments: %s"
          % (hits, enc, plain), flush=True)
    res.check(sum(enc.values()) == 0, "plaintext found on the encrypted shared tier: %s" % enc)
    res.check(plain["keyed chunk id"] > 0, "the search finds no keyed id in c's clear segments: %s" % plain)


def main():
    if "--nfs" in sys.argv[1:]:
        return main_nfs()
    harness.require_fuse()
    res = harness.Results("e2e-encrypt")
    base = tempfile.mkdtemp(prefix="fratier-e2e-encrypt-", dir=os.environ.get("FRATIER_TMP"))
    try:
        key = os.path.join(base, "k")
        p = subprocess.run([harness.daemon_path(), "--make-key", key], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        res.check(p.returncode == 0, "--make-key: %s" % p.stdout)

        # ---- encrypt = yes without a key: refused at start, naming the tier ----
        nokey = os.path.join(base, "nokey")
        for d in ("hot", "capacity", "plain"):
            os.makedirs(os.path.join(nokey, d))
        conf = os.path.join(base, "nokey.conf")
        write_conf(conf, nokey, None, capacity_encrypt="yes")
        try:
            harness.Fratier(base=base, config=conf, data=nokey).start(timeout=30).stop()
            res.check(False, "encrypt = yes without a key: mounted")
        except RuntimeError as e:
            res.check("exited with 1" in str(e) and
                      "tier 'capacity' has encrypt = yes, but no key is given" in str(e),
                      "encrypt = yes without a key: %s" % str(e)[-600:])
        res.check(sorted(os.listdir(os.path.join(nokey, "hot"))) == [],
                  "encrypt = yes without a key wrote to the hot tier: %s" % os.listdir(os.path.join(nokey, "hot")))

        data = os.path.join(base, "data")
        for d in ("hot", "capacity", "plain"):
            os.makedirs(os.path.join(data, d))
        conf = os.path.join(base, "fratier.conf")
        write_conf(conf, data, key)
        files = {"m%d.bkp" % i: make_file("m%d" % i) for i in range(8)}
        # Directory names are in the tiers' descriptions (sealed on an encrypted tier).
        secret_dir, witness_dir = "PATHMARKER-" + os.urandom(8).hex(), "PATHMARKER-" + os.urandom(8).hex()
        witness = {witness_dir + "/w.bkp": make_file("w")}
        hidden = {secret_dir + "/p.bkp": make_file("p")}

        # m0..m5 fill the first container (32 MiB, then sealed, full) and start the second; m0 and m1
        # go away and come back (their chunks are found where they were); then the open container
        # is copied (the replay) and m6 and m7 go after what it held.
        fs = harness.Fratier(base=base, config=conf, data=data, options=["seal_delay=0"]).start()
        try:
            os.mkdir(fs.path(secret_dir))
            os.mkdir(fs.path(witness_dir))
            others = list(witness.items()) + list(hidden.items())
            for rel, (blob, _, _) in list(files.items()) + others:
                dc.write_file(fs.path(rel), blob, fsync=True)
            dc.check_sealed(res, [fs.path(r) for r, _ in list(files.items()) + others], "the files")
            # The witness goes to the plain tier: the search must find it there.
            migrate(res, fs, "plain", list(witness)[0])
            for i in range(6):
                migrate(res, fs, "capacity", "m%d.bkp" % i)
            check_files(res, fs, files, set(), "on the encrypted tier")
            # Both ways between a plain and an encrypted tier, and back to hot, byte-exact each time.
            migrate(res, fs, "plain", "m0.bkp")
            check_files(res, fs, files, set(), "m0 on the plain tier")
            migrate(res, fs, "capacity", "m0.bkp")
            check_files(res, fs, files, set(), "m0 back on the encrypted tier")
            rc, out, err = tc.tierctl(fs, "recall", fs.path("m1.bkp"))
            res.check(rc == 0, "recall m1: %d %s %s" % (rc, out, err))
            check_files(res, fs, files, set(), "m1 recalled")
            migrate(res, fs, "capacity", "m1.bkp")
            check_files(res, fs, files, set(), "m1 on the encrypted tier again")
            migrate(res, fs, "capacity", list(hidden)[0])
        finally:
            fs.stop()
        replay = {}
        for d, _, names in os.walk(os.path.join(data, "capacity", "containers")):
            for n in names:
                with open(os.path.join(d, n), "rb") as f:
                    replay[os.path.join(d, n)] = f.read()
        description = os.path.join(data, "capacity", "containers", "d", "description.ftd")
        with open(description, "rb") as f:
            old_description = f.read()
        fs = harness.Fratier(base=base, config=conf, data=data).start()
        try:
            migrate(res, fs, "capacity", "m6.bkp")
            migrate(res, fs, "capacity", "m7.bkp")
            check_files(res, fs, files, set(), "all on the encrypted tier")
            rc, listed = scrubbed(res, fs, "before tampering")
            res.check(rc == 0 and not listed, "scrub before tampering: %d %s" % (rc, listed))
        finally:
            fs.stop()

        # ---- the marker search ----
        enc = search(res, os.path.join(data, "capacity"), needles(dict(files, **hidden), [secret_dir], id_key(key)),
                     base)
        plain = search(res, os.path.join(data, "plain"), needles(witness, [witness_dir], id_key(key)), base)
        print("marker search, encrypted capacity tier (%d files' needles): %s" % (len(files) + len(hidden), enc), flush=True)
        print("marker search, unencrypted tier (the witness's needles): %s" % plain, flush=True)
        res.check(sum(enc.values()) == 0, "plaintext found on the encrypted tier: %s" % enc)
        res.check(plain["marker"] > 0 and plain["block slice"] > 0 and plain["path"] > 0 and
                  plain["keyed chunk id"] > 0 and plain["table entry"] > 0 and plain["length run"] > 0,
                  "the search finds nothing on the unencrypted tier, so it cannot fail: %s" % plain)

        # ---- the tamper matrix ----
        probe = harness.Fratier(base=base, config=conf, data=data)
        regs, unseen = regions(probe, id_key(key), files, 1)
        res.check(unseen == 0, "%d blocks are not chunks of their own on the encrypted tier: the plain chunk ids "
                               "searched for are not the real ones" % unseen)
        res.check(all(len(owners) == 1 for _, owners in regs.values()),
                  "a region of the encrypted tier holds blocks of several files")
        by_file = {}
        for (c, o), (n, owners) in sorted(regs.items()):
            for rel in owners:
                by_file.setdefault(rel, []).append((c, o, n))
        full = {int(c) for c, f in dc.sqlite_rows(probe, "SELECT id, full FROM containers WHERE tier = 1") if f == "1"}
        conts = sorted({c for c, _ in regs})
        print("encrypted tier: %d regions in containers %s (full: %s); first region of each file: %s"
              % (len(regs), conts, sorted(full), {r: by_file[r][0][:2] for r in sorted(by_file)}), flush=True)
        res.check(len(conts) == 2 and conts[0] in full and conts[1] not in full,
                  "expected a full container and an open one: %s, full %s" % (conts, sorted(full)))
        a_id, b_id = conts[0], conts[-1]
        old = replay.get(container_path(data, b_id), b"")
        in_a = {r for r, rs in by_file.items() if any(c == a_id for c, _, _ in rs)}
        # In B before the copy, and after it (only there: the replay and the truncation hurt them alone).
        b_old = {r for r, rs in by_file.items() if any(c == b_id and o < len(old) for c, o, _ in rs)}
        b_new = {r for r, rs in by_file.items() if all(c == b_id and o >= len(old) for c, o, _ in rs)}
        res.check(b_new == {"m6.bkp", "m7.bkp"}, "m6 and m7 are not alone after the copy of B: %s" % b_new)
        damaged = set()

        def flip(c, at):
            with open(container_path(data, c), "r+b") as f:
                f.seek(at)
                b = f.read(1)
                f.seek(at)
                f.write(bytes([b[0] ^ 1]))

        x = sorted(in_a - b_old)[0]
        c, o, n = by_file[x][len(by_file[x]) // 2]
        tamper(res, base, conf, data, files, damaged, "flip", {x}, lambda: flip(c, o + n - 100))

        # A byte of a region's table: the second chunk's length, ciphertext since region version 4.
        t = sorted(in_a - b_old - {x})[-1]
        c, o, n = by_file[t][0]
        tamper(res, base, conf, data, files, damaged, "flip in a region table", {t}, lambda: flip(c, o + 64 + 36))

        # Two regions of the same size, of a file in A and a file in B, swapped.
        pair = next(((ra, rb) for y in sorted(in_a - b_old - {x}) for ra in by_file[y] if ra[0] == a_id
                     for z in sorted(b_old - {x}) for rb in by_file[z] if rb[0] == b_id and rb[2] == ra[2]), None)
        if res.check(pair, "no two regions of equal size in the two containers"):
            victims = {rel for rel, rs in by_file.items() for r in rs if r in pair}

            def swap():
                (ca, oa, na), (cb, ob, _) = pair
                with open(container_path(data, ca), "r+b") as fa, open(container_path(data, cb), "r+b") as fb:
                    fa.seek(oa)
                    ra = fa.read(na)
                    fb.seek(ob)
                    rb = fb.read(na)
                    fa.seek(oa)
                    fa.write(rb)
                    fb.seek(ob)
                    fb.write(ra)
            tamper(res, base, conf, data, files, damaged, "swap between containers", victims, swap)

        # Truncation: B cut in the middle of m7's last region.
        c, o, n = by_file["m7.bkp"][-1]
        tamper(res, base, conf, data, files, damaged, "truncation", {"m7.bkp"},
               lambda: os.truncate(container_path(data, c), o + n // 2))

        # Replay: B as it was before m6 and m7 moved down (the same bytes up to there, theirs gone).
        def put_back():
            with open(container_path(data, b_id), "wb") as f:
                f.write(old)
        tamper(res, base, conf, data, files, damaged, "replay of an older container", {"m6.bkp", "m7.bkp"},
               put_back)

        # Replay of the description: the copy taken before m6 and m7 moved down, which lists neither.
        # Sealed and genuine, it opens under the key; its generation (authenticated) is older than
        # the one the catalog recorded: scrub says so and writes it again from the catalog.
        with open(description, "wb") as f:
            f.write(old_description)
        fs = harness.Fratier(base=base, config=conf, data=data).start()
        try:
            rc, sc, listed, err = scrub(fs, "--tier", "1")
            desc = sc.get("description", [])
            res.check(rc == EXIT_PARTIAL and len(desc) == 1 and desc[0].get("tier") == 1
                      and "older" in desc[0].get("problem", ""),
                      "replay of an older description: scrub %d %r %r" % (rc, sc, err))
            with open(description, "rb") as f:
                res.check(f.read() != old_description, "the replayed description was not written again")
            rc, sc, listed, err = scrub(fs, "--tier", "1")
            res.check(not sc.get("description") and listed <= damaged,
                      "the description written again is still not the catalog's: %d %r %r" % (rc, sc, err))
            check_files(res, fs, files, damaged, "replay of an older description")
        finally:
            fs.stop()
        print("replay of an older description: listed by scrub and written again from the catalog", flush=True)
        res.check(len(damaged) < len(files), "every file damaged: nothing shows that others are unaffected")

        shared_tier(res, base, key)
    finally:
        if not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(base, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
