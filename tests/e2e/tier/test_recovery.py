#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Is a log missing, how far can I recover, and the restore set: end to end.

Archived logs whose headers this test chooses (tier/oracle-header.h's
layout) are written into a mount of three tiers:

- database ORCL (RAC): thread 1 sequences 10-20 without 14, thread 2
  sequences 5-15; sequence 12 of thread 1 held twice with the same header,
  sequence 18 twice, one copy cut short; sequence 9 of thread 2 under a
  name that says thread 1 sequence 99 (the header tells the truth);
- database SALES: thread 1 sequences 1-4;
- a log whose block 1 is damaged, and a text file named like a log;
- thread 1 sequences 10-12 moved to the third tier, thread 2 sequences
  5-9 to the second.

Then tierctl recovery (table and --json) says exactly the runs, the gap,
the duplicates (and which copy a restore uses), the tiers and the windows
a roll-forward crosses on both threads; recall --until --dry-run lists
exactly the logs a range needs, lowest SCN first, with sizes and tiers;
a range across the gap, or before the first log, is refused naming the
missing sequences, and nothing moves; a real recall brings back exactly
the set; Ctrl-C in the middle of one leaves every log whole, on its old
tier or the hot one.

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_TIERCTL), FRATIER_KEEP.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile

import harness
import tiercommon as tc
from redolog import BLOCK, T0, redo_log
from tiercommon import dc

LOG_BLOCKS = 2048  # 1 MiB logs


def scn_of(thread, seq):
    """SCN ranges: thread 1 log s covers [1000 s, 1000 (s + 1)), thread 2's start 300 later (RAC)."""
    low = 1000 * seq + (300 if thread == 2 else 0)
    return low, low + 1000


def build(fs):
    """Writes the logs; returns {rel: bytes} and {key: rel} (key: (db, thread, seq) or a name)."""
    model, where = {}, {}

    def put(rel, data, key=None):
        os.makedirs(os.path.dirname(fs.path(rel)), exist_ok=True)
        with open(fs.path(rel), "wb") as f:
            f.write(data)
        model[rel] = data
        if key:
            where[key] = rel

    for t, seqs in ((1, [s for s in range(10, 21) if s != 14]), (2, range(5, 16))):
        for s in seqs:
            low, nxt = scn_of(t, s)
            rel = "ORCL/archivelog/2026_12_01/o1_mf_%d_%d_abc_.arc" % (t, s)
            if (t, s) == (2, 9):
                rel = "ORCL/archivelog/2026_12_01/o1_mf_1_99_renamed_.arc"
            put(rel, redo_log(1111, "ORCL", t, s, low, nxt), ("ORCL", t, s))
    put("dup/copy_1_12.arc", model[where[("ORCL", 1, 12)]], "dup12")
    low, nxt = scn_of(1, 18)
    put("dup/short_1_18.arc", redo_log(1111, "ORCL", 1, 18, low, nxt - 400, blocks=LOG_BLOCKS // 2), "short18")
    for s in range(1, 5):
        put("SALES/archivelog/2026_12_01/o1_mf_1_%d_xyz_.arc" % s, redo_log(2222, "SALES", 1, s, 1000 * s, 1000 * s + 1000),
            ("SALES", 1, s))
    low, nxt = scn_of(1, 21)
    put("ORCL/archivelog/2026_12_01/o1_mf_1_21_bad_.arc", redo_log(1111, "ORCL", 1, 21, low, nxt, damaged=True), "bad")
    put("ORCL/archivelog/2026_12_01/notes_1_22.arc", b"not a log\n" * 100, "text")
    return model, where


def rows(j, kind):
    return j.get(kind, [])


def recovery_facts(j):
    """The findings of tierctl recovery --json as comparable tuples."""
    out = set()
    for d in rows(j, "database"):
        out.add(("database", d["db_name"], int(d["dbid"]), int(d["threads"]), int(d["files"]), int(d["low_scn"]),
                 int(d["next_scn"]), int(d["gaps"]), int(d["missing"]), int(d["duplicates"])))
    for r in rows(j, "run"):
        out.add(("run", int(r["dbid"]), int(r["thread"]), int(r["first_sequence"]), int(r["last_sequence"]),
                 int(r["low_scn"]), int(r["next_scn"]), int(r["files"]), r["tiers"]))
    for r in rows(j, "gap"):
        out.add(("gap", int(r["dbid"]), int(r["thread"]), int(r["first_sequence"]), int(r["last_sequence"]),
                 int(r["low_scn"]), int(r["next_scn"])))
    for r in rows(j, "duplicate"):
        out.add(("duplicate", int(r["dbid"]), int(r["thread"]), int(r["first_sequence"]), r["path"].lstrip("/"),
                 r["used_path"].lstrip("/"), r["same_header"]))
    for r in rows(j, "window"):
        out.add(("window", int(r["dbid"]), int(r["low_scn"]), int(r["next_scn"]), int(r["files"]), r["tiers"]))
    return out


def expected_facts(where):
    return {
        ("database", "ORCL", 1111, 2, 23, 5300, 21000, 1, 1, 2),
        ("run", 1111, 1, 10, 13, 10000, 14000, 4, "hot,archive"),
        ("gap", 1111, 1, 14, 14, 14000, 15000),
        ("run", 1111, 1, 15, 20, 15000, 21000, 6, "hot"),
        # Same header: the copy on the faster tier is used; cut short: the one that reaches further.
        ("duplicate", 1111, 1, 12, where[("ORCL", 1, 12)], where["dup12"], "yes"),
        ("duplicate", 1111, 1, 18, where["short18"], where[("ORCL", 1, 18)], "no"),
        ("run", 1111, 2, 5, 15, 5300, 16300, 11, "hot,capacity"),
        ("window", 1111, 10000, 14000, 9, "hot,capacity,archive"),
        ("window", 1111, 15000, 16300, 4, "hot"),
        ("database", "SALES", 2222, 1, 4, 1000, 5000, 0, 0, 0),
        ("run", 2222, 1, 1, 4, 1000, 5000, 4, "hot"),
        ("window", 2222, 1000, 5000, 4, "hot"),
    }


def set_of(res, fs, *args, want_rc=0):
    """recall ARGS --json: the reply, and its logs as [(thread, seq)] in the order given."""
    j = tc.tierctl_json(res, fs, "recall", *args, want_rc=want_rc)
    return j, [(int(f["thread"]), int(f["sequence"])) for f in j.get("moves", [])]


def chromium_dom(res, tmp, page):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not res.check(chromium is not None, "chromium is installed (scripts/install-deps.sh)"):
        return ""
    p = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--user-data-dir=" + os.path.join(tmp, "chromium"), "--dump-dom", "file://" + page],
                       capture_output=True, text=True, timeout=300)
    res.check(p.returncode == 0, "chromium renders %s: %d" % (page, p.returncode))
    return p.stdout


def check_timeline_html(res, fs, tmp):
    """report --html: a recoverability timeline per database, and a section per tier, as Chromium reads them."""
    out = os.path.join(tmp, "report.html")
    rc, _, err = tc.tierctl(fs, "report", "--html", out)
    if not res.check(rc == 0, "report --html: %d %r" % (rc, err)):
        return
    dom = chromium_dom(res, tmp, out)
    charts = dict(re.findall(r'<svg class="chart timeline" id="timeline-(\d+)-\d+".*?>(.*?)</svg>', dom, re.S))
    got = {dbid: (body.count('class="run'), body.count('class="gap"'), body.count('class="window"'))
           for dbid, body in charts.items()}
    res.check(got == {"1111": (3, 1, 2), "2222": (1, 0, 1)},
              "timelines (runs, gaps, windows) per DBID: %r" % got)
    tiers = re.findall(r'<tr class="tier"><td>(\w+)</td>.*?</tr>', dom, re.S)
    res.check(tiers == ["hot", "capacity", "archive"], "a row per tier: %r" % tiers)
    hot = re.search(r'<tr class="tier"><td>hot</td>(.*?)</tr>', dom, re.S)
    res.check(hot is not None and re.search(r"archivelog [\d.]+ MiB in \d+", hot.group(1)) is not None,
              "the hot tier's row says what is on it: %r" % (hot.group(1)[:300] if hot else None))


def check_fresh_html(res, fs, tmp):
    """A new mount has one sample of usage: the charts over time say so, with no axis of sentinel dates."""
    out = os.path.join(tmp, "fresh.html")
    rc, _, err = tc.tierctl(fs, "report", "--html", out)
    if not res.check(rc == 0, "report --html on a fresh mount: %d %r" % (rc, err)):
        return
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not res.check(chromium is not None, "chromium is installed (scripts/install-deps.sh)"):
        return
    p = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--user-data-dir=" + os.path.join(tmp, "chromium"), "--dump-dom", "file://" + out],
                       capture_output=True, text=True, timeout=300)
    dom = p.stdout
    years = sorted(set(re.findall(r"(-?\d+)-\d\d-\d\d \d\d:\d\d UTC", dom)))
    res.check(p.returncode == 0 and dom.count('class="no-history"') == 4 and "<polyline" not in dom,
              "chromium: a fresh mount's four charts over time say there is not enough history yet (%d)"
              % dom.count('class="no-history"'))
    res.check(all(2000 <= int(y) <= 2200 for y in years), "no axis of sentinel dates: years %s" % years)


def run(res, fs, tmp):
    check_fresh_html(res, fs, tmp)
    model, where = build(fs)
    if not dc.check_sealed(res, [fs.path(r) for r in model], "seal"):
        return
    to2 = [fs.path(where[("ORCL", 1, s)]) for s in (10, 11, 12)]
    to1 = [fs.path(where[("ORCL", 2, s)]) for s in range(5, 10)]
    for target, paths in (("2", to2), ("1", to1)):
        j = tc.tierctl_json(res, fs, "migrate", "--to", target, *paths)
        res.check(int(j.get("moved", 0)) == len(paths), "migrate --to %s: %r" % (target, j.get("moved")))
    tiers = tc.tiers_of(res, fs, model)
    check_timeline_html(res, fs, tmp)

    j = tc.tierctl_json(res, fs, "recovery")
    got, want = recovery_facts(j), expected_facts(where)
    res.check(got == want, "recovery --json:\n  missing %s\n  unexpected %s" % (sorted(want - got, key=str),
                                                                             sorted(got - want, key=str)))
    unread = sorted(r["path"].lstrip("/") for r in rows(j, "unreadable"))
    res.check(unread == sorted([where["bad"], where["text"]]), "unreadable headers: %s" % unread)
    j1 = tc.tierctl_json(res, fs, "recovery", "1111")
    res.check([d["db_name"] for d in rows(j1, "database")] == ["ORCL"], "recovery 1111 (a DBID) shows ORCL only")
    rc, out, err = tc.tierctl(fs, "recovery", "ORCL")
    print(out, flush=True)
    res.check(rc == 0, "recovery ORCL: exit %d: %s" % (rc, err))
    lines = out.splitlines()
    res.check(any(l.split()[:2] == ["1", "14"] and "MISSING" in l for l in lines), "the table shows 14 missing")
    res.check(any("sequence 18 is held twice" in l and where["short18"] in l for l in lines),
              "the table names the short copy of 18")
    res.check(any("from SCN 10000" in l and "to SCN 14000" in l for l in lines), "the table shows the first window")
    res.check("SALES" not in out, "recovery ORCL shows no other database")
    res.check(any(l.startswith("UNREADABLE: ") and where["bad"] in l for l in lines), "the table names the damaged log")
    rc, _, err = tc.tierctl(fs, "recovery", "NOSUCH")
    res.check(rc == 1 and "NOSUCH" in err, "an unknown database is refused: %d %r" % (rc, err))

    # A range inside the second window: both threads, lowest SCN first, sizes and tiers listed.
    j, order = set_of(res, fs, "--dry-run", "--from", "15100", "--until", "16000", "ORCL")
    res.check(order == [(2, 14), (1, 15), (2, 15), (1, 16)], "restore set 15100..16000: %s" % order)
    res.check(int(j.get("missing", -1)) == 0 and int(j.get("bytes", 0)) == 0,
              "all of it is hot already: %r %r" % (j.get("missing"), j.get("bytes")))
    # Without --from: as far back as both threads go without a gap (thread 1 from 15).
    _, order = set_of(res, fs, "--dry-run", "--until", "15500", "ORCL")
    res.check(order == [(2, 14), (1, 15), (2, 15)], "restore set up to 15500: %s" % order)
    # By time (SCN 12500 is at T0 + 1250 s): thread 2's log 9 on capacity, thread 1's 10 and 11 on archive.
    j, order = set_of(res, fs, "--dry-run", "--from", "@%d" % (T0 + 1000), "--until", "@%d" % (T0 + 1250), "ORCL")
    want = [(2, 9), (1, 10), (2, 10), (1, 11), (2, 11), (1, 12), (2, 12)]
    res.check(order == want, "restore set by time: %s, expected %s" % (order, want))
    froms = {(int(f["thread"]), int(f["sequence"])): int(f["from"]) for f in j.get("moves", [])}
    res.check(froms.get((2, 9)) == 1 and froms.get((1, 10)) == 2 and froms.get((1, 12)) == 0,
              "the set's tiers: %r" % froms)
    res.check(int(j.get("would_move", 0)) == 3 and int(j.get("bytes", 0)) == 3 * LOG_BLOCKS * BLOCK,
              "3 logs to recall: %r %r" % (j.get("would_move"), j.get("bytes")))
    res.check(tc.tiers_of(res, fs, model) == tiers, "a dry run moves nothing")

    # Across the gap, or before the first log: refused, naming what is missing, and nothing moves.
    rc, out, err = tc.tierctl(fs, "recall", "--from", "13500", "--until", "15500", "ORCL")
    res.check(rc == 1 and "sequences 14-14" in err and "nothing moved" in err, "across the gap: %d %r" % (rc, err))
    rc, out, err = tc.tierctl(fs, "recall", "--dry-run", "--from", "9500", "--until", "12500", "ORCL")
    res.check(rc == 0 and "MISSING: thread 1: sequences up to 9 missing" in out, "before thread 1's first log: %r" % out)
    rc, out, err = tc.tierctl(fs, "recall", "--from", "9500", "--until", "12500", "ORCL")
    res.check(rc == 1 and "not whole" in err, "recall before the first log is refused: %d %r" % (rc, err))
    res.check(tc.tiers_of(res, fs, model) == tiers, "a refused restore set moves nothing")

    # For real: exactly the set comes back.
    j, order = set_of(res, fs, "--from", "10000", "--until", "12500", "ORCL")
    moved = {(int(f["thread"]), int(f["sequence"])) for f in j.get("moves", []) if f.get("result") == "moved"}
    res.check(moved == {(2, 9), (1, 10), (1, 11)}, "recall moved %s" % sorted(moved))
    now = tc.tiers_of(res, fs, model)
    changed = {r for r in model if now.get(r) != tiers.get(r)}
    want = {where[k] for k in (("ORCL", 2, 9), ("ORCL", 1, 10), ("ORCL", 1, 11))}
    res.check(changed == want and all(now[r] == 0 for r in changed), "recall changed %s" % sorted(changed))

    # Ctrl-C while a set comes back: each log whole, on its old tier or the hot one.
    tc.tierctl_json(res, fs, "migrate", "--to", "2", *[fs.path(where[("ORCL", 2, s)]) for s in range(5, 16)])
    before = tc.tiers_of(res, fs, model)
    # Recalls from tier 2 have been measured now: the dry run gives an expected time (each log at least a second).
    j, order = set_of(res, fs, "--dry-run", "--from", "10000", "--until", "13900", "ORCL")
    res.check(int(j.get("would_move", 0)) == 5 and int(j.get("expected_seconds", -1)) >= 5,
              "expected time of 5 logs from the archive tier at the measured speed: %r" % j.get("expected_seconds"))
    p = subprocess.Popen([tc.tierctl_path(), "-m", fs.mnt, "recall", "--from", "10000", "--until", "13900", "ORCL"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = p.stderr.readline()
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=300)
    print("interrupted recall: exit %d, %r %r" % (p.returncode, first.strip(), err.strip()[-200:]), flush=True)
    res.check(p.returncode in (0, 130), "recall interrupted: exit %d" % p.returncode)
    after = tc.tiers_of(res, fs, model)
    odd = {r: (before[r], after[r]) for r in model if after.get(r) not in (before.get(r), 0)}
    res.check(not odd, "after Ctrl-C, logs neither where they were nor hot: %s" % odd)
    tc.compare_all(res, fs, model, "after an interrupted recall")
    j = tc.tierctl_json(res, fs, "recovery", "ORCL")
    res.check(int(rows(j, "database")[0]["files"]) == 23 if rows(j, "database") else False,
              "recovery after it all still sees 23 logs of ORCL")


def main():
    harness.require_fuse()
    res = harness.Results("e2e-recovery")
    tmp = tempfile.mkdtemp(prefix="fratier-recovery-")
    try:
        data = os.path.join(tmp, "data")
        conf = os.path.join(tmp, "fratier.conf")
        with open(conf, "w") as f:
            f.write("[fratier]\ndata_dir = %s\n[tier hot]\n[tier capacity]\n"
                    "[tier archive]\nrole = capacity\npath = %s\n" % (data, os.path.join(data, "archive")))
        for d in ("hot", "capacity", "archive"):
            os.makedirs(os.path.join(data, d))
        with harness.Fratier(base=tmp, config=conf, data=data, options=dc.OPTIONS) as fs:
            run(res, fs, tmp)
    finally:
        if not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
