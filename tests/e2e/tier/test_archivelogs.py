#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Archived logs found by what their headers say, end to end.

oragen's FRA (two days: archived logs of thread 1 with known DBID, sequences,
SCN and time ranges in oragen's manifest) is copied into a mount and sealed.
Then:

- tierctl ls --json reports, for every archived log, exactly the DBID,
  database name, thread, sequence, SCN range and time range of its header,
  and nothing of the kind for the other files;
- migrate --thread 1 --sequence A-B moves exactly the logs A..B;
- recall --sequence N brings back exactly log N;
- migrate --since/--until moves exactly the logs whose time range meets
  the window (a window inside one log's range, then one spanning two);
- the headers survive a remount, a rename keeps them, and every file reads
  back exactly;
- pin recalls a file and keeps it on the hot tier (migrate skips it and
  says why), unpin lets it move again, and a pin survives a remount;
- bad selections are refused with a clear message: no paths and no
  selection, a reversed sequence range, a time tierctl cannot read;
- a LOG_ARCHIVE_FORMAT (arch_%t_%s_%r.dbf) and name patterns in the config
  decide the class before the built-in rules: such a log is an archived
  log with its header recorded, not an image copy; a class with pin = yes
  is never migrated (tierctl says why).

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_ORAGEN, FRATIER_TIERCTL),
FRATIER_KEEP (keep the data directory).
"""

import calendar
import os
import shutil
import sys
import tempfile
import time

import harness
import tiercommon as tc
from tiercommon import dc


def unix(iso):
    return calendar.timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%SZ"))


def stamp(t):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))


def check_headers(res, fs, model, logs, db, what):
    ents = tc.ls_entries(res, fs, model)
    for rel, m in sorted(logs.items()):
        e = ents.get(rel, {})
        want = {"dbid": db["dbid"], "db_name": db["db_name"], "thread": m["thread"], "sequence": m["sequence"],
                "low_scn": m["low_scn"], "next_scn": m["next_scn"], "low_time": unix(m["low_time"]),
                "next_time": unix(m["next_time"])}
        got = {k: (int(e[k]) if k != "db_name" else e[k]) if k in e else None for k in want}
        res.check(got == want, "%s: %s: header %r, expected %r" % (what, rel, got, want))
    others = [r for r in model if r not in logs and "sequence" in ents.get(r, {})]
    res.check(not others, "%s: files that are no archived log report a sequence: %s" % (what, others))


def move(res, fs, verb, *args, want_rc=0):
    """Runs tierctl VERB ARGS --json; returns the set of files it moved."""
    j = tc.tierctl_json(res, fs, verb, *args, want_rc=want_rc)
    return {os.path.relpath(os.path.join(fs.mnt, f["path"].lstrip("/")), fs.mnt)
            for f in j.get("moves", []) if f.get("result") == "moved"}


def expect_tiers(res, fs, model, want, what):
    tiers = tc.tiers_of(res, fs, model)
    wrong = sorted(r for r in model if tiers.get(r) != want.get(r, 0))
    res.check(not wrong, "%s: on the wrong tier: %s" % (what, ", ".join("%s on %s" % (r, tiers.get(r))
                                                                        for r in wrong[:5])))


def run(res, fs, src, manifest):
    model = tc.copy_in(fs, src)
    logs = {f["path"]: f for f in manifest["files"] if f["class"] == "archivelog"}
    db = manifest["database"]
    res.check(len(logs) >= 4, "oragen wrote %d archived logs, at least 4 expected" % len(logs))
    if not dc.check_sealed(res, [fs.path(r) for r in model], "seal"):
        return
    check_headers(res, fs, model, logs, db, "after sealing")

    by_seq = {m["sequence"]: rel for rel, m in logs.items()}
    seqs = sorted(by_seq)
    a, b = seqs[1], seqs[3]
    moved = move(res, fs, "migrate", "--thread", "1", "--sequence", "%d-%d" % (a, b))
    want = {by_seq[s] for s in seqs if a <= s <= b}
    res.check(moved == want, "migrate --thread 1 --sequence %d-%d moved %s, expected %s"
              % (a, b, sorted(moved), sorted(want)))
    tiers = {r: 1 for r in want}
    expect_tiers(res, fs, model, tiers, "after migrate by sequence")

    moved = move(res, fs, "recall", "--sequence", str(a))
    res.check(moved == {by_seq[a]}, "recall --sequence %d brought back %s" % (a, sorted(moved)))
    tiers.pop(by_seq[a])
    expect_tiers(res, fs, model, tiers, "after recall of one sequence")
    moved = move(res, fs, "recall", "--thread", "2")
    res.check(moved == set(), "recall --thread 2 (no such thread) moved %s" % sorted(moved))

    # A window strictly inside the first log's range meets that log only...
    first = logs[by_seq[seqs[0]]]
    lo, hi = unix(first["low_time"]), unix(first["next_time"])
    moved = move(res, fs, "migrate", "--since", stamp(lo + 1), "--until", stamp(hi - 1))
    res.check(moved == {by_seq[seqs[0]]}, "migrate of a window inside log %d moved %s"
              % (seqs[0], sorted(moved)))
    tiers[by_seq[seqs[0]]] = 1
    # ...and one around the boundary of logs a and a+1 meets both (log a+1 is there already).
    edge = unix(logs[by_seq[a]]["next_time"])
    j = tc.tierctl_json(res, fs, "migrate", "--dry-run", "--since", "@%d" % (edge - 1), "--until",
                        "@%d" % (edge + 1))
    named = {os.path.relpath(os.path.join(fs.mnt, f["path"].lstrip("/")), fs.mnt)
             for f in j.get("moves", [])}
    res.check(named == {by_seq[a], by_seq[seqs[seqs.index(a) + 1]]},
              "a window across the end of log %d names %s" % (a, sorted(named)))
    expect_tiers(res, fs, model, tiers, "after migrate by time")

    # Pins: pin recalls and keeps a file on the hot tier, migrate skips it
    # and says why, unpin lets it move again; a pin survives a remount (below).
    x, y = by_seq[seqs[2]], by_seq[seqs[3]]
    moved = move(res, fs, "pin", fs.path(x))
    res.check(moved == {x}, "pin of a file on the capacity tier recalled %s" % sorted(moved))
    j = tc.tierctl_json(res, fs, "migrate", fs.path(x))
    row = (j.get("moves") or [{}])[0]
    res.check(row.get("result") == "skipped" and "pinned" in row.get("message", ""),
              "migrate of a pinned file: %r" % row)
    res.check(tc.ls_entries(res, fs, model).get(x, {}).get("pinned") == "yes", "ls shows %s pinned" % x)
    j = tc.tierctl_json(res, fs, "unpin", "--sequence", str(seqs[2]))
    res.check(j.get("unpinned") == 1, "unpin by sequence: %r" % j.get("unpinned"))
    res.check("pinned" not in tc.ls_entries(res, fs, model).get(x, {}), "ls shows %s unpinned" % x)
    moved = move(res, fs, "migrate", fs.path(x))
    res.check(moved == {x}, "an unpinned file moves again: %s" % sorted(moved))
    moved = move(res, fs, "pin", "--thread", "1", "--sequence", str(seqs[3]))
    res.check(moved == {y}, "pin by sequence recalled %s" % sorted(moved))
    tiers.pop(y)

    # Refusals, with a message that says what is wrong.
    rc, _, err = tc.tierctl(fs, "recall")
    res.check(rc == 2 and "--sequence" in err, "recall without paths or selection: %d %r" % (rc, err))
    rc, _, err = tc.tierctl(fs, "recall", "--sequence", "9-3")
    res.check(rc != 0 and "FIRST-LAST" in err, "a reversed sequence range is refused: %d %r" % (rc, err))
    rc, _, err = tc.tierctl(fs, "recall", "--since", "yesterday")
    res.check(rc == 2 and "YYYY-MM-DD" in err, "an unreadable time is refused: %d %r" % (rc, err))
    rc, _, err = tc.tierctl(fs, "ls", "--thread", "1", "/")
    res.check(rc == 2, "ls takes no log selection: %d %r" % (rc, err))

    # report --by database: DB_UNIQUE_NAME from the FRA layout; a log kept
    # outside it (LOG_ARCHIVE_DEST_n = /arch) by its header; anything else unknown.
    os.makedirs(fs.path("arch"))
    outside = "arch/1_%d_1153923201.arc" % seqs[0]
    shutil.copyfile(os.path.join(src, by_seq[seqs[0]]), fs.path(outside))
    model[outside] = model[by_seq[seqs[0]]]
    logs[outside] = logs[by_seq[seqs[0]]]
    with open(fs.path("notes.txt"), "w") as f:
        f.write("not Oracle's\n")
    model["notes.txt"] = b"not Oracle's\n"
    dc.check_sealed(res, [fs.path(outside), fs.path("notes.txt")], "seal outside the FRA layout")
    groups = {g["key"]: g for g in tc.tierctl_json(res, fs, "report", "--by", "database").get("groups", [])}
    want = {db["db_name"]: len(model) - 1, "unknown": 1}
    got = {k: int(g.get("files", 0)) for k, g in groups.items()}
    res.check(got == want, "report --by database: %r, expected %r" % (got, want))
    res.check(int(groups.get(db["db_name"], {}).get("logical", 0)) ==
              sum(len(v) for r, v in model.items() if r != "notes.txt"),
              "report --by database: the logical bytes of %s" % db["db_name"])

    # A rename keeps the header (it belongs to the inode); a remount keeps them all.
    old = by_seq[seqs[-1]]
    new = os.path.join(os.path.dirname(old), "renamed.arc")
    os.rename(fs.path(old), fs.path(new))
    model[new] = model.pop(old)
    logs[new] = logs.pop(old)
    tiers = {(new if r == old else r): t for r, t in tiers.items()}
    fs.stop()
    fs.start()
    check_headers(res, fs, model, logs, db, "after a rename and a remount")
    res.check(tc.ls_entries(res, fs, model).get(y, {}).get("pinned") == "yes", "the pin of %s survives a remount" % y)
    expect_tiers(res, fs, model, tiers, "after a remount")
    tc.compare_all(res, fs, model, "after a remount")


def run_name_patterns(res, tmp, src, manifest):
    """A LOG_ARCHIVE_FORMAT and name patterns from the config decide the class before the built-in rules.

    An archived log kept as arch_%t_%s_%r.dbf is an image copy to the
    built-in rules (*.dbf); with log_archive_format set it is an archived
    log, whose header is recorded at seal; *.rman is a backup piece by
    names; a datafile copy keeps its class.
    """
    logs = sorted((m for m in manifest["files"] if m["class"] == "archivelog"), key=lambda m: m["sequence"])
    m = logs[0]
    with open(os.path.join(src, m["path"]), "rb") as f:
        log = f.read()
    names = {"arch/arch_%d_%d_1153923201.dbf" % (m["thread"], m["sequence"]): ("archivelog", log),
             "copies/users01.dbf": ("imagecopy", b"\0" * 65536),
             "rman/full_01.rman": ("backuppiece", log[:100000])}
    for config_lines, what in (("", "the built-in rules"),
                               ("[class archivelog]\nlog_archive_format = arch_%t_%s_%r.dbf\n"
                                "[class backuppiece]\nnames = *.rman\npin = yes\n", "the config's patterns")):
        base = tempfile.mkdtemp(prefix="fratier-names-", dir=tmp)
        data = os.path.join(base, "data")
        config = os.path.join(base, "fratier.conf")
        with open(config, "w") as f:
            f.write("[fratier]\ndata_dir = %s\n[tier hot]\n[tier capacity]\n%s" % (data, config_lines))
        for d in ("hot", "capacity"):
            os.makedirs(os.path.join(data, d))
        with harness.Fratier(base=base, options=dc.OPTIONS, config=config, data=data) as fs:
            for rel, (_, data_bytes) in names.items():
                os.makedirs(os.path.dirname(fs.path(rel)), exist_ok=True)
                dc.write_file(fs.path(rel), data_bytes)
            dc.check_sealed(res, [fs.path(r) for r in names], "seal (%s)" % what)
            ents = tc.ls_entries(res, fs, {r: b"" for r in names})
            for rel, (cls, _) in names.items():
                if not config_lines and rel.startswith("arch/"):
                    cls = "imagecopy"
                if not config_lines and rel.endswith(".rman"):
                    cls = "other"
                res.check(ents.get(rel, {}).get("class") == cls, "%s: %s is %r, expected %s"
                          % (what, rel, ents.get(rel, {}).get("class"), cls))
            arch = ents.get(next(r for r in names if r.startswith("arch/")), {})
            if config_lines:
                res.check(arch.get("sequence") == m["sequence"] and arch.get("thread") == m["thread"],
                          "%s: the .dbf archived log's header is recorded: %r" % (what, arch))
            else:
                res.check("sequence" not in arch, "%s: an image copy has no log header: %r" % (what, arch))
            if config_lines:
                # A pinned class: migrate skips its files and says why; policy show says so.
                j = tc.tierctl_json(res, fs, "migrate", fs.path("rman"))
                moves = j.get("moves", [{}])
                res.check(j.get("skipped") == 1 and "pin = yes" in moves[0].get("message", ""),
                          "%s: a file of a pinned class is not migrated: %r" % (what, moves))
                rows = {r.get("class"): r for r in tc.tierctl_json(res, fs, "policy", "show").get("classes", [])}
                res.check(rows.get("backuppiece", {}).get("pinned") == "yes" and "target" not in rows.get("backuppiece", {}),
                          "%s: policy show: backuppiece pinned: %r" % (what, rows.get("backuppiece")))
            tc.compare_all(res, fs, {r: b for r, (_, b) in names.items()}, what)


def main():
    harness.require_fuse()
    res = harness.Results("e2e-archivelogs")
    tmp = tempfile.mkdtemp(prefix="fratier-archivelogs-src-", dir=os.environ.get("FRATIER_TMP"))
    try:
        src = os.path.join(tmp, "fra")
        manifest = tc.generate(res, src, seed=3, days=2)
        with harness.Fratier(options=dc.OPTIONS) as fs:
            run(res, fs, src, manifest)
            if res.failed:
                sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
        run_name_patterns(res, tmp, src, manifest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
