#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Migration to an NFS tier served by nfs-ganesha (tests/nfs/ganesha.py), end
to end, in a private network namespace.

A config file names three tiers: hot and capacity directories and an NFS
export (backend nfs, spoken through libnfs).  oragen's FRA content is copied
in and sealed, then:

- tierctl migrate --to filer moves the backup pieces to the NFS tier and
  the archived logs to the capacity tier; every file reads back exactly,
  the export holds the containers, df shows the NFS tier reachable with
  its files;
- with the NFS server killed, status says the filer is not reachable; a
  daemon started meanwhile mounts all the same, files on the NFS tier fail
  with EIO while every other file reads exactly, migrating to the filer is
  refused, and unlink and truncate to zero of files on it work (they never
  touch the tier); once the server is back the daemon opens the tier on its
  own (no restart) and they read exactly again;
- the filer hangs (SIGSTOP), then dies, while a migration capacity -> NFS
  and a read of a file on it wait: the mount stays responsive, the read
  fails with EIO and the migration with its files failed, within the
  configured bounded wait; once the server is back the migration resumes;
- recall NFS -> hot, remount, everything exact;
- after deleting everything and a collection, the export holds no
  container with data.

Exits 77 (skip) where a namespace, ganesha or FUSE is not available.
"""

import errno
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "nfs"))
import ganesha  # noqa: E402
import harness  # noqa: E402
import tiercommon as tc  # noqa: E402
from tiercommon import dc  # noqa: E402


def export_stored(srv):
    _, apparent, allocated = dc.tree_usage(srv.export)
    return max(apparent, allocated)


def nfs_metrics(res, fs, failures_at_least):
    """tierctl metrics: the filer's NFS counters, parsed by Prometheus' own parser."""
    from prometheus_client.parser import text_string_to_metric_families
    rc, out, err = tc.tierctl(fs, "metrics")
    samples = {}
    try:
        for fam in text_string_to_metric_families(out):
            for smp in fam.samples:
                if smp.labels.get("name") == "filer" and smp.name.startswith("fratier_tier_nfs_"):
                    samples[smp.name] = smp.value
    except ValueError as e:
        res.check(False, "tierctl metrics does not parse: %s" % e)
    res.check(rc == 0 and samples.get("fratier_tier_nfs_rpcs_total", 0) > 0
              and samples.get("fratier_tier_nfs_rpc_seconds_total", 0) > 0
              and samples.get("fratier_tier_nfs_rpc_failures_total", -1) >= failures_at_least,
              "NFS metrics of the filer: %r %s" % (samples, err.strip()))


def run_dies_mid_migration(res, fs, srv, model, logs, pieces):
    """The filer hangs, then dies, while a migration to it and a read from it wait on it.

    The mount stays responsive meanwhile (a file on another tier reads
    exactly, a listing works), the read fails with EIO and the migration
    ends with its files failed, both within the tier's bounded wait
    (timeout = 2s, retries = 1 in the config); files stay readable on the
    tier they were left on; with the server back, the same migration moves
    the rest and everything reads exactly.
    """
    # A fresh daemon and mount: neither its chunk cache nor the page cache holds the filer's files,
    # so the read below needs the filer.
    fs.stop()
    fs.start()
    srv.pause()
    mig = subprocess.Popen([tc.tierctl_path(), "-m", fs.mnt, "migrate", "--to", "2", "--json", fs.path("ORCL", "archivelog")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = False
    deadline = time.monotonic() + 30
    while not started and time.monotonic() < deadline and mig.poll() is None:
        st = tc.tierctl_json(res, fs, "status")
        started = st.get("migrate_queue", 0) > 0
        time.sleep(0.05)
    res.check(started, "the migration to the hung filer was never seen queued")
    read_error = []

    def read_cold():
        try:
            dc.read_all(fs.path(pieces[0]))
            read_error.append(0)
        except OSError as e:
            read_error.append(e.errno)
    reader = threading.Thread(target=read_cold)
    reader.start()
    # While both wait on the filer: another tier's file and a listing answer.
    hot = [r for r in model if r not in pieces and r not in logs]
    res.check(bool(hot), "no file off the filer to read while it hangs")
    for r in hot[:3]:
        dc.compare(res, fs.path(r), model[r], "read while the filer hangs")
    res.check(len(os.listdir(fs.path("ORCL", "archivelog"))) > 0, "listing while the filer hangs")
    srv.kill()
    reader.join(timeout=300)  # a guard against a hang, not a timing check: the bounded wait is far shorter
    res.check(not reader.is_alive() and read_error == [errno.EIO],
              "a read of a file on the dead filer: %r, expected EIO" % read_error)
    try:
        out, err = mig.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        mig.kill()
        out, err = mig.communicate()
    j = json.loads(out) if out.strip().startswith("{") else {}
    res.check(mig.returncode == 5 and j.get("failed", 0) > 0 and j.get("moved", 0) + j.get("failed", 0) == len(logs),
              "the migration to the dead filer ends with its files failed: rc %r, %r %s"
              % (mig.returncode, {k: j.get(k) for k in ("moved", "failed", "skipped")}, err[-300:]))
    on_capacity = {r: model[r] for r, t in tc.tiers_of(res, fs, model).items() if t == 1}
    res.check(len(on_capacity) >= j.get("failed", 0), "the logs that failed to move stay on capacity: %d" % len(on_capacity))
    tc.compare_all(res, fs, on_capacity, "logs left on capacity by the failed migration")
    srv.start()
    deadline = time.monotonic() + 180
    while True:
        j = tc.tierctl_json(res, fs, "migrate", "--to", "2", fs.path("ORCL", "archivelog"), want_rc=None)
        if j.get("failed", 1) == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    res.check(j.get("failed") == 0 and j.get("moved", 0) + j.get("already", 0) == len(logs),
              "the migration resumes once the filer is back: %r" % {k: j.get(k) for k in ("moved", "already", "failed")})
    tiers = tc.tiers_of(res, fs, model)
    res.check(all(tiers.get(r) == 2 for r in logs), "every log on the filer after the resumed migration: %r"
              % {r: tiers.get(r) for r in logs if tiers.get(r) != 2})
    tc.compare_all(res, fs, model, "after the migration resumed")


def run(res, fs, srv, src):
    model = tc.copy_in(fs, src)
    if not dc.check_sealed(res, [fs.path(r) for r in model], "seal"):
        return
    pieces = sorted(r for r in model if "/backupset/" in r)
    logs = sorted(r for r in model if "/archivelog/" in r)
    res.check(pieces and logs, "oragen wrote no backup pieces or no logs")

    j = tc.tierctl_json(res, fs, "migrate", "--to", "filer", fs.path("ORCL", "backupset"))
    res.check(j.get("moved") == len(pieces) and j.get("to") == 2, "migrate to filer: %r" % j.get("moved"))
    j = tc.tierctl_json(res, fs, "migrate", "--to", "capacity", fs.path("ORCL", "archivelog"))
    res.check(j.get("moved") == len(logs) and j.get("to") == 1, "migrate to capacity: %r" % j.get("moved"))
    tc.compare_all(res, fs, model, "after migrate")
    tiers = tc.tiers_of(res, fs, model)
    res.check(all(tiers.get(r) == 2 for r in pieces) and all(tiers.get(r) == 1 for r in logs),
              "tiers after migrate: %r" % tiers)
    res.check(export_stored(srv) > 0, "the NFS export holds nothing")
    df = tc.tierctl_json(res, fs, "df")
    filer = [t for t in df.get("tiers", []) if t.get("name") == "filer"]
    res.check(filer and filer[0].get("reachable") == "yes" and filer[0].get("backend") == "nfs"
              and filer[0].get("files") == len(pieces) and filer[0].get("capacity", 0) > 0,
              "df filer row: %r" % filer)
    res.check(filer and filer[0].get("nfs_rpcs", 0) > 0 and filer[0].get("nfs_rpc_failures") == 0,
              "df counts the filer's NFS calls: %r" % {k: v for k, v in (filer or [{}])[0].items() if "nfs" in k})
    nfs_metrics(res, fs, 0)

    srv.kill()
    st = tc.tierctl_json(res, fs, "status")
    res.check(any(t.get("name") == "filer" and t.get("reachable") == "no" for t in st.get("tiers", [])),
              "status does not say the filer is unreachable")
    nfs_metrics(res, fs, 1)  # the status call above waited for the dead server
    # A daemon started while the filer is down: its files fail, the others do not.
    fs.stop()
    fs.start()
    for r in pieces:
        try:
            dc.read_all(fs.path(r))
            res.check(False, "%s read with its NFS server dead" % r)
        except OSError as e:
            res.check(e.errno == errno.EIO, "%s with the server dead: %s, expected EIO" % (r, e))
    others = {r: model[r] for r in model if r not in pieces}
    tc.compare_all(res, fs, others, "with the NFS server dead")
    st = tc.tierctl_json(res, fs, "status")
    filer = [t for t in st.get("tiers", []) if t.get("name") == "filer"]
    res.check(filer and filer[0].get("reachable") == "no" and filer[0].get("error"),
              "status of a filer down at start: %r" % filer)
    rc, _, err = tc.tierctl(fs, "migrate", "--to", "filer", fs.path("ORCL", "archivelog"))
    res.check(rc == 1 and "not reachable" in err, "migrate to a filer down: %d %s" % (rc, err))
    # A scrub of every tier verifies the ones it can reach and names the filer, never passing over it in silence.
    rc, out, err = tc.tierctl(fs, "scrub", "--json")
    try:
        sc = json.loads(out)
    except ValueError:
        sc = {}
    away = [u.get("tier") for u in sc.get("unreachable", [])]
    res.check(rc == 5 and filer and away == [filer[0].get("tier")] and sc.get("damaged_chunks") == 0
              and sc.get("tiers") == len(st.get("tiers", [])) - 1,
              "scrub with the filer down: exit %d (5 expected), %r, %s" % (rc, sc, err))
    # Deleting or emptying a cold file never needs its tier.
    gone, emptied = pieces[0], pieces[1]
    try:
        os.unlink(fs.path(gone))
        os.truncate(fs.path(emptied), 0)
        res.check(True, "")
    except OSError as e:
        res.check(False, "unlink/truncate of files on a dead NFS tier: %s" % e)
    del model[gone]
    model[emptied] = b""
    pieces = pieces[2:]
    dc.compare(res, fs.path(emptied), b"", "emptied with the filer down")
    srv.start()
    # The daemon tries the tier again on its own (every 10 s): no restart.
    deadline = time.monotonic() + 180
    while True:
        st = tc.tierctl_json(res, fs, "status")
        filer = [t for t in st.get("tiers", []) if t.get("name") == "filer"]
        if (filer and filer[0].get("reachable") == "yes") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    res.check(filer and filer[0].get("reachable") == "yes" and "error" not in filer[0],
              "the filer down at start is reachable once its server is back, without a restart: %r" % filer)
    tc.compare_all(res, fs, model, "NFS server back")

    run_dies_mid_migration(res, fs, srv, model, logs, pieces)
    j = tc.tierctl_json(res, fs, "recall", fs.path("ORCL", "backupset"))
    res.check(j.get("moved") == len(pieces), "recall filer -> hot: %r" % j.get("moved"))
    fs.stop()
    fs.start()
    tc.compare_all(res, fs, model, "after remount")
    tiers = tc.tiers_of(res, fs, model)
    res.check(all(tiers.get(r) == 0 for r in pieces) and all(tiers.get(r) == 2 for r in logs),
              "tiers after recall and remount: %r" % tiers)

    for r in model:
        os.unlink(fs.path(r))
    rc, _, err = tc.tierctl(fs, "gc")
    res.check(rc == 0, "gc: %s" % err)
    files, _, _ = dc.tree_usage(srv.export)
    big = [(p, max(a, b)) for p, a, b in files if max(a, b) >= dc.EMPTY_CONTAINER_MAX]
    res.check(not big, "the export keeps containers with data after deleting everything: %s" % big[:3])


def main():
    ganesha.enter_private_namespace()
    harness.require_fuse()
    res = harness.Results("e2e-migrate-nfs")
    with tempfile.TemporaryDirectory(prefix="fratier-migrate-nfs-", dir=os.environ.get("FRATIER_TMP")) as tmp:
        src = os.path.join(tmp, "fra")
        tc.generate(res, src)
        with ganesha.Ganesha(os.path.join(tmp, "nfs")) as srv:
            # A short bounded wait, so the dead-filer checks end soon: at most (1 + 1) x 2 x 2 s a call.
            fs = tc.nfs_mount(tmp, srv.url, "timeout = 2s\nretries = 1\n")
            try:
                fs.start()
                run(res, fs, srv, src)
                fs.stop()
            finally:
                if res.failed:
                    sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
                fs.kill(check=False)
    res.finish()


if __name__ == "__main__":
    main()
