#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Key rotation through the mount (docs/SECURITY.md, "Key rotation").

- files sealed on the encrypted capacity tier under the first key;
  fratierfs --add-key makes the key file a ring of two; after a remount a
  new file goes under the new key (tierctl status: bytes of each key on
  tier 1), the old files read byte-exact;
- the ring without the old key, while data is still sealed under it:
  refused at start, naming the old key's id, the data directory unchanged;
- tierctl rekey --tier 1 while the files are read (so the throttle holds
  the rekey back): the daemon is SIGKILLed once status shows the rekey
  running with part of the old key's bytes rewritten and part left;
- the remount resumes the rekey by itself (the request is in the catalog)
  and finishes: no byte of tier 1 under the old key, the log says so; per
  tier, the bytes status gives each key add up to the tier's stored bytes;
- fratierfs --drop-key drops the old key; the ring of the new key alone
  mounts and every file's SHA-256 is the original's; --drop-key refuses
  the newest key;
- --recover-from of the capacity tier, just after the rekey, with the ring
  of the new key alone restores every file: the tier's description was
  sealed again under the new key."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import harness
import tiercommon as tc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dedup"))
import dedupcommon as dc  # noqa: E402

FILES = 10
SIZE = 8 << 20  # 80 MiB in all: three 32 MiB containers on the capacity tier
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


def daemon(*args):
    return subprocess.run([harness.daemon_path()] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)


def status(res, fs):
    rc, out, err = tc.tierctl(fs, "status", "--json")
    res.check(rc == 0, "status: %d %s" % (rc, err.strip()))
    try:
        return json.loads(out)
    except ValueError:
        res.check(False, "status --json: %r" % out[:300])
        return {}


def rows(st, kind):
    for k in (kind, kind + "s"):
        if isinstance(st.get(k), list):
            return st[k]
    return []


def key_bytes(st, tier):
    """{key id: bytes} of a tier, from tierctl status."""
    return {r["key_id"]: int(r["bytes"]) for r in rows(st, "key") if int(r["tier"]) == tier}


def rekey_row(st, tier):
    for r in rows(st, "rekey"):
        if int(r["tier"]) == tier:
            return r
    return None


def sums_add_up(res, fs, what):
    """Per tier, the bytes of the keys (and of no key) are the tier's stored bytes.  Status reads them in
    two queries, between which the collector may remove containers: a few tries for one quiet moment."""
    for attempt in range(10):
        st = status(res, fs)
        bad = [(int(t["tier"]), sum(key_bytes(st, int(t["tier"])).values()), int(t["stored"]))
               for t in rows(st, "tier")]
        bad = [b for b in bad if b[1] != b[2]]
        if not bad:
            break
        time.sleep(0.5)
    res.check(not bad and rows(st, "tier"), "%s: tier, bytes under the keys, stored bytes: %s" % (what, bad))


def check_files(res, fs, digests, what):
    for rel, want in digests.items():
        try:
            with open(fs.path(rel), "rb") as f:
                got = hashlib.sha256(f.read()).hexdigest()
        except OSError as e:
            got = "error %s" % e
        res.check(got == want, "%s: %s reads back %s, not the original" % (what, rel, got))


def write_conf(path, data, key):
    with open(path, "w") as f:
        f.write("[fratier]\ndata_dir = %s\nkey_file = %s\n[tier hot]\n[tier capacity]\n" % (data, key))


def key_id_of(text):
    """The 64 hex digits --add-key printed as the new key's id."""
    for word in text.replace(";", " ").replace(",", " ").split():
        if len(word) == 64 and all(c in "0123456789abcdef" for c in word):
            return word
    return None


class Reader(threading.Thread):
    """Reads the files again and again: the foreground is busy, so the throttle paces the rekey."""

    def __init__(self, fs, rels):
        super().__init__(daemon=True)
        self.fs, self.rels, self.stop = fs, rels, threading.Event()

    def run(self):
        while not self.stop.is_set():
            for rel in self.rels:
                try:
                    with open(self.fs.path(rel), "rb") as f:
                        while f.read(1 << 20) and not self.stop.is_set():
                            pass
                except OSError:
                    return
                if self.stop.is_set():
                    return


def main():
    harness.require_fuse()
    res = harness.Results("e2e-rekey")
    base = tempfile.mkdtemp(prefix="fratier-e2e-rekey-", dir=os.environ.get("FRATIER_TMP"))
    fs = None
    try:
        key = os.path.join(base, "k")
        p = daemon("--make-key", key)
        res.check(p.returncode == 0, "--make-key: %s" % p.stdout)
        data = os.path.join(base, "data")
        for d in ("hot", "capacity"):
            os.makedirs(os.path.join(data, d))
        conf = os.path.join(base, "fratier.conf")
        write_conf(conf, data, key)

        # ---- files on the encrypted capacity tier under the first key ----
        blobs = {"f%d.bkp" % i: os.urandom(SIZE) for i in range(FILES)}
        digests = {rel: hashlib.sha256(b).hexdigest() for rel, b in blobs.items()}
        fs = harness.Fratier(base=base, config=conf, data=data, options=["seal_delay=0"]).start()
        for rel, b in blobs.items():
            dc.write_file(fs.path(rel), b, fsync=True)
        dc.check_sealed(res, [fs.path(r) for r in blobs], "the files")
        rc, out, err = tc.tierctl(fs, "migrate", "--to", "1", *[fs.path(r) for r in blobs])
        res.check(rc == 0, "migrate: %d %s %s" % (rc, out, err))
        st = status(res, fs)
        first = [k for k in key_bytes(st, 1) if k != "none"]
        res.check(len(first) == 1, "one key on tier 1 after the migration: %s" % key_bytes(st, 1))
        old_id = first[0] if first else "?"
        old_bytes = key_bytes(st, 1).get(old_id, 0)
        res.check(old_bytes >= FILES * SIZE, "tier 1 holds %d bytes under the first key" % old_bytes)
        fs.stop()
        fs = None

        # ---- a second key: new data under it, old data readable ----
        p = daemon("--add-key", key)
        new_id = key_id_of(p.stdout)
        res.check(p.returncode == 0 and new_id and new_id != old_id, "--add-key: %s" % p.stdout)
        res.check(os.stat(key).st_mode & 0o777 == 0o400, "the ring is not mode 0400")
        fs = harness.Fratier(base=base, config=conf, data=data, options=["seal_delay=0"]).start()
        check_files(res, fs, digests, "under two keys")
        extra = os.urandom(4 << 20)
        dc.write_file(fs.path("new.bkp"), extra, fsync=True)
        digests["new.bkp"] = hashlib.sha256(extra).hexdigest()
        dc.check_sealed(res, [fs.path("new.bkp")], "the new file")
        rc, out, err = tc.tierctl(fs, "migrate", "--to", "1", fs.path("new.bkp"))
        res.check(rc == 0, "migrate new.bkp: %d %s %s" % (rc, out, err))
        st = status(res, fs)
        kb = key_bytes(st, 1)
        # The old key's open container was sealed at the remount (its trailer written), not resumed.
        res.check(kb.get(new_id, 0) > 0 and kb.get(old_id, 0) >= old_bytes,
                  "new data under the new key, old data under the old: %s" % kb)
        old_bytes = kb.get(old_id, 0)
        sums_add_up(res, fs, "two keys")
        fs.stop()
        fs = None

        # ---- the ring without the old key: refused, naming it, nothing written ----
        partial = os.path.join(base, "ring-without-old")
        shutil.copyfile(key, partial)
        os.chmod(partial, 0o400)
        p = daemon("--drop-key", partial, old_id[:12])
        res.check(p.returncode == 0, "--drop-key of a copy: %s" % p.stdout)
        p = daemon("--drop-key", partial, new_id)
        res.check(p.returncode != 0 and "newest" in p.stdout, "--drop-key of the newest key: %s" % p.stdout)
        before = snapshot(data)
        try:
            wrong = harness.Fratier(base=base, config=conf, data=data, options=["key_file=" + partial])
            wrong.start(timeout=30)
            res.check(False, "mounted without a key data is still sealed under")
            wrong.kill(check=False)
        except RuntimeError as e:
            msg = str(e)
            res.check("exited with 1" in msg, "without the old key: %s" % msg[-300:])
            res.check("missing from" in msg and old_id in msg,
                      "without the old key: no line naming key %s: %s" % (old_id, msg[-600:]))
        res.check(snapshot(data) == before, "without the old key: the data directory changed")

        # ---- rekey, the daemon killed part way (seen by status) ----
        fs = harness.Fratier(base=base, config=conf, data=data, options=["background_share=5"]).start()
        reader = Reader(fs, list(blobs))
        reader.start()
        rc, out, err = tc.tierctl(fs, "rekey", "--tier", "1")
        res.check(rc == 0, "rekey: %d %s %s" % (rc, out, err))
        seen = None
        deadline = time.monotonic() + harness.scaled(120)
        while time.monotonic() < deadline:
            st = status(res, fs)
            r = rekey_row(st, 1)
            left = key_bytes(st, 1).get(old_id, 0)
            if r and r.get("state") == "running" and int(r.get("done", 0)) > 0 and 0 < left < old_bytes:
                seen = (r, left)
                break
            if not r:
                break
            time.sleep(0.05)
        res.check(seen is not None, "status never showed the rekey part way (last: %s, %s)"
                  % (rekey_row(st, 1), key_bytes(st, 1)))
        fs.kill()
        reader.stop.set()
        reader.join(30)
        log = fs.log_text()
        res.check("rekey of tier 1 (capacity) asked for" in log, "no log line of the rekey asked for:\n" + log[-2000:])
        res.check("finished" not in log, "the rekey finished before the kill:\n" + log[-2000:])
        fs = None

        # ---- remount: the rekey resumes by itself and finishes ----
        fs = harness.Fratier(base=base, config=conf, data=data).start()
        deadline = time.monotonic() + harness.scaled(300)
        while time.monotonic() < deadline:
            st = status(res, fs)
            if rekey_row(st, 1) is None:
                break
            time.sleep(0.2)
        res.check(rekey_row(st, 1) is None, "the rekey did not finish after the remount: %s" % rekey_row(st, 1))
        kb = key_bytes(st, 1)
        res.check(old_id not in kb and kb.get(new_id, 0) > 0, "tier 1 after the rekey: %s" % kb)
        res.check("rekey of tier 1 (capacity) finished" in fs.log_text(),
                  "no log line of the rekey finished:\n" + fs.log_text()[-2000:])
        paced = sum(int(st.get("throttle_rekey_%s" % what, 0)) for what in ("busy", "idle"))
        res.check(paced > 0, "the rekey was paced under a kind of its own: throttle_rekey_busy + _idle = %d" % paced)
        sums_add_up(res, fs, "after the rekey")
        check_files(res, fs, digests, "after the rekey")

        # ---- recovery from the capacity tier with the new key alone, read while the daemon runs, right after
        # the rekey: its description was sealed again under the new key when the rekey finished (not only at
        # a later unmount) ----
        newdir = os.path.join(base, "recovered")
        os.makedirs(newdir)
        p = subprocess.run([harness.daemon_path(), "--recover-from=" + os.path.join(data, "capacity"), "-o",
                            "data=%s,key_file=%s" % (newdir, partial)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=600)
        res.check(p.returncode == 0, "--recover-from with the new key alone: %s" % p.stdout[-600:])
        rec = harness.Fratier(base=os.path.join(base, "rec"), data=newdir, options=["key_file=" + partial]).start()
        check_files(res, rec, digests, "recovered with the new key alone")
        rec.stop()
        fs.stop()
        fs = None

        # ---- the old key dropped: every file byte-exact ----
        p = daemon("--drop-key", key, old_id)
        res.check(p.returncode == 0, "--drop-key: %s" % p.stdout)
        fs = harness.Fratier(base=base, config=conf, data=data).start()
        check_files(res, fs, digests, "with the new key alone")
        st = status(res, fs)
        res.check(all(k in (new_id, "none") for t in rows(st, "tier") for k in key_bytes(st, int(t["tier"]))),
                  "keys in use with the new key alone: %s" % rows(st, "key"))
        fs.stop()
        fs = None

    except Exception:
        if fs is not None:
            sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
            fs.kill(check=False)
        raise
    finally:
        if not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(base, ignore_errors=True)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
