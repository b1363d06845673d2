#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The policy worker through the mount: files move off the hot tier by
themselves, by age and by the hot tier's use.

The hot tier is a tmpfs of fixed size mounted by the test, so statfs of the
hot tier is real and small.  Waits poll observable state (tierctl status,
ls, statfs) with generous deadlines; no check depends on how long anything
took.

- age: oragen's FRA is copied in and sealed; passes of the worker after
  that move nothing (every file is younger than a day).  Once every file's
  mtime is set two days back, the archived logs and backup pieces move to
  the capacity tier by themselves and the image copies stay (their default
  is never); every file reads back exactly; status and policy show say so.
- unmount while moving: with policy_bandwidth = 1M and image copies given
  migrate_after = 1d, the worker is caught moving one; unmount is clean,
  every file reads back exactly after a remount, none shows "migrating", and
  with the bandwidth cap lifted the image copies do move and read back exactly.
- outlook: everything recalled on a mount whose worker passes only at start
  and then hourly, tierctl report's outlook says per class what is due; on
  a mount with a pass a second the worker moves exactly that (files and
  bytes per class), the pinned log stays.
- cascade: with capacity's own rule (migrate_after = 3d, target = an
  archive tier), files two days old move off hot to capacity and stay;
  four days old, they move on to the archive tier; copies never move.
- watermark: a second small tmpfs is filled with archivelog-like files
  (incompressible, distinct) above a high watermark of 60%, with a pass
  every hour so only the closes wake the worker, and every file written
  below 55% sealed before the fill goes on (a pass moves sealed files
  only, and seals finish out of order): the oldest files move
  until the hot tier's use is below the low watermark of 40%, the ones
  that move are older than every one that stays, and every file reads back
  exactly.  The marks are lower than the defaults because the collector
  needs room on the hot tier to compact a 32 MiB container, which 15% of a
  96 MiB disk is not.
- reserve: the same with the watermarks at 100%/99% and reserve = 64M on a
  128 MiB tmpfs filled to 60%, sealed below 45%: the oldest files move until
  64 MiB are free.

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_ORAGEN, FRATIER_TIERCTL),
FRATIER_KEEP (keep the data directories).
"""

import os
import shutil
import sys
import tempfile
import time

import harness
import tiercommon as tc
from tiercommon import dc

MiB = 1 << 20
DAY = 86400
WAIT = harness.scaled(60.0)  # seconds before a wait calls the worker stuck; far above what a loaded machine needs
AGE_TMPFS = 160 * MiB
FILL_TMPFS = 96 * MiB
OPTIONS = dc.OPTIONS + ["policy_interval=1"]
HIGH, LOW = 60, 40
RESERVE_TMPFS = 128 * MiB
RESERVE = 64 * MiB



def hot_use(path):
    """Percent of the hot filesystem in use, as df counts it."""
    st = os.statvfs(path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    avail = st.f_bavail * st.f_frsize
    return 100.0 * used / (used + avail)


def status(res, fs):
    return tc.tierctl_json(res, fs, "status")


def wait_for(what, cond, timeout=WAIT):
    """harness.wait_for(), saying what it gave up waiting for."""
    v = harness.wait_for(cond, timeout)
    if not v:
        print("gave up waiting for %s" % what, flush=True)
    return v


def wait_full_pass(res, fs):
    """Returns once a whole pass of the worker ran after this call (last_run is in seconds)."""
    since = int(time.time())
    first = wait_for("a pass", lambda: int(status(res, fs).get("policy_last_run", 0)) > since and
                     int(status(res, fs)["policy_last_run"]))
    res.check(first, "the policy worker made no pass within %ds" % WAIT)
    if first:
        res.check(wait_for("a second pass", lambda: int(status(res, fs).get("policy_last_run", 0)) > first),
                  "the policy worker made no second pass within %ds" % WAIT)


def classes(model):
    logs = sorted(r for r in model if "/archivelog/" in r or "/backupset/" in r)
    copies = sorted(r for r in model if "/datafile/" in r)
    return logs, copies


def age_all(fs, model, days=2):
    old = time.time() - days * DAY
    for r in model:
        os.utime(fs.path(r), (old, old))


def check_policy_show(res, fs):
    j = tc.tierctl_json(res, fs, "policy", "show")
    rows = {c.get("class"): c for c in j.get("classes", [])}
    res.check(rows.get("archivelog", {}).get("migrate_after") == DAY and
              rows.get("archivelog", {}).get("target") == "capacity",
              "policy show: archivelog should move to capacity after a day: %r" % rows.get("archivelog"))
    res.check(rows.get("backuppiece", {}).get("target") == "capacity",
              "policy show: backuppiece should move to capacity: %r" % rows.get("backuppiece"))
    res.check(rows.get("imagecopy", {}).get("migrate_after") == 0 and "target" not in rows.get("imagecopy", {}),
              "policy show: imagecopy should never move: %r" % rows.get("imagecopy"))
    res.check(j.get("high_watermark") == 85 and j.get("low_watermark") == 70 and "reserve" in j,
              "policy show: watermarks and reserve: %r" % {k: j.get(k) for k in ("high_watermark", "low_watermark", "reserve")})
    rc, out, err = tc.tierctl(fs, "policy", "show")
    res.check(rc == 0 and "MIGRATE AFTER" in out and "above 85% used" in out, "policy show text: %s %s" % (out, err))


def run_age(res, fs, src):
    model = tc.copy_in(fs, src)
    logs, copies = classes(model)
    res.check(len(logs) >= 4 and len(copies) >= 1, "oragen wrote too few logs, pieces or copies")
    if not dc.check_sealed(res, [fs.path(r) for r in model], "seal"):
        return model
    check_policy_show(res, fs)

    wait_full_pass(res, fs)
    tiers = tc.tiers_of(res, fs, model)
    res.check(all(t == 0 for t in tiers.values()), "young files moved: %r" % {r: t for r, t in tiers.items() if t})

    # One log is pinned: the worker leaves it on the hot tier, old as it is.
    pinned, logs = logs[0], logs[1:]
    rc, _, err = tc.tierctl(fs, "pin", fs.path(pinned))
    res.check(rc == 0, "tierctl pin: %d %s" % (rc, err))
    age_all(fs, model)
    moved = wait_for("the logs and pieces to move",
                     lambda: all(tc.tiers_of(res, fs, model).get(r) == 1 for r in logs))
    res.check(moved, "not every log and backup piece moved to the capacity tier within %ds: %r"
              % (WAIT, {r: t for r, t in tc.tiers_of(res, fs, model).items() if r in logs and t != 1}))
    wait_full_pass(res, fs)
    tiers = tc.tiers_of(res, fs, model)
    res.check(all(tiers.get(r) == 0 for r in copies), "image copies moved: %r" % {r: tiers.get(r) for r in copies})
    res.check(tiers.get(pinned) == 0, "the pinned %s moved to tier %r" % (pinned, tiers.get(pinned)))
    tc.compare_all(res, fs, model, "after the moves by age")

    s = status(res, fs)
    res.check(s.get("policy_state") == "idle" and int(s.get("policy_files_moved", -1)) == len(logs) and
              int(s.get("policy_failed", -1)) == 0 and int(s.get("policy_bytes_moved", 0)) == sum(len(model[r]) for r in logs),
              "status after the moves: %r" % {k: v for k, v in s.items() if k.startswith("policy")})
    rc, out, err = tc.tierctl(fs, "status")
    res.check(rc == 0 and "mover:       idle" in out and ("moved %d files" % len(logs)) in out,
              "status text: %s %s" % (out, err))
    rc, out, err = tc.tierctl(fs, "metrics")
    res.check(rc == 0 and ("\nfratier_policy_moved_files_total %d\n" % len(logs)) in out and
              "\nfratier_policy_moving 0\n" in out, "metrics: %s %s" % (out[-600:], err))
    return model


def write_config(base, hot, bandwidth, interval="1s"):
    path = os.path.join(base, "policy-%s-%s.conf" % (bandwidth, interval))
    with open(path, "w") as f:
        f.write("[fratier]\ndata_dir = %s\npolicy_interval = %s\npolicy_bandwidth = %s\n"
                "[tier hot]\npath = %s\n[tier capacity]\n"
                "[class imagecopy]\nmigrate_after = 1d\ntarget = capacity\n"
                % (os.path.join(base, "data"), interval, bandwidth, hot))
    return path


def run_outlook(res, base, hot, model):
    """A policy dry run and the real run agree: tierctl report's outlook names, per class, what the worker moves.

    Everything is recalled on a mount whose worker passes once at start and
    then only hourly; the report then says what is due; a mount with a pass
    a second moves it; the files that moved, per class, are what was due.
    """
    opts = ["seal_delay=0", "gc_interval=3600"]
    with harness.Fratier(policy=True, base=base, options=opts, config=write_config(base, hot, "0", "1h")) as fs:
        res.check(wait_for("the pass at start", lambda: int(status(res, fs).get("policy_last_run", 0)) > 0),
                  "outlook: no pass at start")
        rc, _, err = tc.tierctl(fs, "recall", fs.path("ORCL"))
        res.check(rc == 0, "outlook: recall of everything: %d %s" % (rc, err))
        rep = tc.tierctl_json(res, fs, "report", "--by", "tier")
        due = {o["class"]: (o["due_files"] + o["space_files"], o["due_bytes"] + o["space_bytes"])
               for o in rep.get("outlook", []) if o["due_files"] + o["space_files"]}
        entries = tc.ls_entries(res, fs, model)
        pinned = {r for r, e in entries.items() if e.get("pinned") == "yes"}
        res.check(len(entries) == len(model) and len(pinned) == 1, "outlook: %d files listed, %d pinned"
                  % (len(entries), len(pinned)))
    with harness.Fratier(policy=True, base=base, options=opts, config=write_config(base, hot, "0")) as fs:
        idle = wait_for("the due files to move", lambda: status(res, fs).get("policy_state") == "idle" and
                        int(status(res, fs).get("policy_files_moved", 0)) >= sum(n for n, _ in due.values()))
        res.check(idle, "outlook: the worker did not move what was due: %r" % status(res, fs))
        wait_full_pass(res, fs)
        tiers = tc.tiers_of(res, fs, model)
        moved = {}
        for r, t in tiers.items():
            if t == 1:
                cls = entries[r]["class"]
                n, b = moved.get(cls, (0, 0))
                moved[cls] = (n + 1, b + len(model[r]))
        res.check(moved == due and sum(n for n, _ in due.values()) > 0,
                  "outlook: the report's dry run said %r would move, the worker moved %r" % (due, moved))
        s = status(res, fs)
        res.check(int(s.get("policy_files_moved", -1)) == sum(n for n, _ in due.values())
                  and int(s.get("policy_bytes_moved", -1)) == sum(b for _, b in due.values()),
                  "outlook: status counts %r" % {k: v for k, v in s.items() if k.startswith("policy")})
        res.check(all(tiers.get(r) == 0 for r in pinned), "outlook: pinned files stayed: %r" % pinned)
        tc.compare_all(res, fs, model, "after the moves the outlook named")


def run_unmount_while_moving(res, base, hot, model):
    _, copies = classes(model)
    opts = ["seal_delay=0", "gc_interval=1"]
    with harness.Fratier(policy=True, base=base, options=opts, config=write_config(base, hot, "1M")) as fs:
        # Each look is one status call: a move seen once may be over by the next call.
        def moving_status():
            s = status(res, fs)
            return s if s.get("policy_state") == "moving" else None
        s = wait_for("a move of an image copy", moving_status)
        res.check(s, "the worker was never seen moving an image copy")
        s = s or {}
        res.check(s.get("policy_reason") == "age" and s.get("policy_file", "").lstrip("/") in copies,
                  "what the worker moves: %r" % {k: v for k, v in s.items() if k.startswith("policy")})
        texts = []

        def moving_text():
            texts.append(tc.tierctl(fs, "status")[1])
            return "mover:       moving /" in texts[-1]
        res.check(wait_for("status text while moving", moving_text),
                  "status text while moving: %s" % (texts[-1] if texts else ""))
        # Unmounted (the with block ends) right after a look that saw a move under way.
        res.check(wait_for("a move under way", moving_status), "no move under way left to cut short by the unmount")
    # The with block unmounted: the daemon exited 0 with the move cut short.
    with harness.Fratier(policy=True, base=base, options=opts, data=os.path.join(base, "data")) as fs:
        tc.compare_all(res, fs, model, "after an unmount during a move")
        j = tc.tierctl_json(res, fs, "ls", *sorted({os.path.dirname(fs.path(r)) for r in copies}))
        states = [e.get("state") for e in j.get("entries", []) if e.get("type") == "file"]
        res.check("migrating" not in states, "a file still shows migrating after the remount: %r" % states)
    with harness.Fratier(policy=True, base=base, options=opts, config=write_config(base, hot, "0")) as fs:
        done = wait_for("the image copies to move", lambda: all(tc.tiers_of(res, fs, model).get(r) == 1 for r in copies))
        res.check(done, "the image copies did not move after the remount: %r"
                  % {r: tc.tiers_of(res, fs, model).get(r) for r in copies})
        tc.compare_all(res, fs, model, "after the image copies moved")


def run_cascade(res, tmp, src):
    """Lower tiers hand files on by age: capacity keeps them 3 days, then they go to the archive tier."""
    base = os.path.join(tmp, "cascade")
    data = os.path.join(base, "data")
    for d in ("hot", "capacity", "archive"):
        os.makedirs(os.path.join(data, d), exist_ok=True)
    config = os.path.join(base, "cascade.conf")
    with open(config, "w") as f:
        f.write("[fratier]\ndata_dir = %s\npolicy_interval = 1s\n[tier hot]\n"
                "[tier capacity]\nmigrate_after = 3d\ntarget = archive\n"
                "[tier archive]\nrole = capacity\npath = archive\n" % data)
    with harness.Fratier(policy=True, base=base, options=dc.OPTIONS, config=config) as fs:
        model = tc.copy_in(fs, src)
        logs, copies = classes(model)
        if not dc.check_sealed(res, [fs.path(r) for r in model], "seal"):
            return
        # Two days old: off the hot tier (a day), not yet off capacity (three days after the last change).
        age_all(fs, model, days=2)
        res.check(wait_for("the logs and pieces to reach capacity",
                           lambda: all(tc.tiers_of(res, fs, model).get(r) == 1 for r in logs)),
                  "cascade: not every log and piece reached capacity: %r" % tc.tiers_of(res, fs, model))
        wait_full_pass(res, fs)
        tiers = tc.tiers_of(res, fs, model)
        res.check(all(tiers.get(r) == 1 for r in logs) and all(tiers.get(r) == 0 for r in copies),
                  "cascade: after two days, logs and pieces on capacity, copies on hot: %r" % tiers)
        age_all(fs, model, days=4)
        res.check(wait_for("the logs and pieces to reach the archive",
                           lambda: all(tc.tiers_of(res, fs, model).get(r) == 2 for r in logs)),
                  "cascade: not every log and piece reached the archive tier: %r" % tc.tiers_of(res, fs, model))
        tiers = tc.tiers_of(res, fs, model)
        res.check(all(tiers.get(r) == 0 for r in copies), "cascade: the image copies stayed on hot: %r" % tiers)
        res.check(int(status(res, fs).get("policy_files_moved", 0)) == 2 * len(logs),
                  "cascade: status counts %r moves for %d files moved twice" % (status(res, fs).get("policy_files_moved"),
                                                                                len(logs)))
        tc.compare_all(res, fs, model, "after the cascade")


def hot_free(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def run_space(res, fs, hot, what, calm_to, fill_to, done, goal):
    """Fills hot with distinct, incompressible archived logs to calm_to percent (short of what wakes the
    worker), waits for them to be sealed, fills on to fill_to percent, then waits for done(hot)."""
    content = dc.Content(7)
    model, order = {}, []
    os.makedirs(fs.path("fra", "archivelog"), exist_ok=True)
    # A pass moves only sealed files, and two seal workers finish out of order: were the worker woken
    # while an old file is still raw, a newer one would rightly move first.  Every file of the first
    # fill is sealed before any close can wake the worker, and the pass needs fewer than those.
    for limit in (calm_to, fill_to):
        # Short of full: sealing a file needs room for its copy for a while.
        while True:
            # The use that ends the fill is the one checked below: past the high watermark the worker
            # starts moving files at once, so a second look may already find less.
            used = hot_use(hot)
            if used >= limit or len(order) >= 128:
                break
            rel = "fra/archivelog/thread_1_seq_%d.arc" % (1000 + len(order))
            data = content.make(MiB, shared=0.0, zeros=0.0, text=0.0)
            dc.write_file(fs.path(rel), data)
            model[rel] = data
            order.append(rel)
        if limit == calm_to and not dc.check_sealed(res, [fs.path(r) for r in model], "seal before the fill"):
            return
    print("%s: %d files written, hot tier %.1f%% used" % (what, len(order), used), flush=True)
    res.check(used >= fill_to, "%s: the hot tier never got to %d%% used (%.1f%%)" % (what, fill_to, used))
    if not dc.check_sealed(res, [fs.path(r) for r in model], "seal"):
        return
    # Only a close wakes the worker here (a pass an hour): once all is sealed, one more close.
    dc.write_file(fs.path("fra", "poke"), b"x")
    res.check(wait_for(goal, lambda: done(hot)), "%s: not %s: %.1f%% used, %d MiB free"
              % (what, goal, hot_use(hot), hot_free(hot) // MiB))
    # The pass that got it there may be moving one file more: the worker judges
    # by its own measure (dead bytes the collector is yet to free), which can
    # lag the filesystem's.  Count once it is done, or ls and status disagree.
    res.check(wait_for("the worker idle", lambda: status(res, fs).get("policy_state") == "idle"),
              "%s: the policy worker is still moving files %ds later" % (what, WAIT))
    tiers = tc.tiers_of(res, fs, model)
    cold = [r for r in order if tiers.get(r) == 1]
    warm = [r for r in order if tiers.get(r) == 0]
    print("%s: %d files moved, %d stayed, hot tier %.1f%% used, %d MiB free"
          % (what, len(cold), len(warm), hot_use(hot), hot_free(hot) // MiB), flush=True)
    res.check(cold and warm, "%s: expected some files moved and some kept: %d moved, %d kept" % (what, len(cold), len(warm)))
    res.check(order[:len(cold)] == cold, "%s: the files moved are not the oldest: %r" % (what, cold))
    s = status(res, fs)
    res.check(int(s.get("policy_files_moved", 0)) == len(cold), "%s: status counts %s moves, %d files moved"
              % (what, s.get("policy_files_moved"), len(cold)))
    tc.compare_all(res, fs, model, "after the moves for space (%s)" % what)


def space_instance(tmp, name, hot_keys):
    """A mount whose hot tier is the tmpfs mounted at tmp/NAME/data/hot, configured with hot_keys;
    returns (Fratier, hot path)."""
    base = os.path.join(tmp, name)
    hot = os.path.join(base, "data", "hot")
    os.makedirs(os.path.join(base, "data", "capacity"), exist_ok=True)
    config = os.path.join(base, "space.conf")
    with open(config, "w") as f:
        f.write("[fratier]\ndata_dir = %s\npolicy_interval = 1h\n[tier hot]\npath = %s\n%s[tier capacity]\n"
                % (os.path.join(base, "data"), hot, hot_keys))
    return harness.Fratier(policy=True, base=base, options=dc.OPTIONS, config=config), hot


def main():
    harness.require_fuse()
    res = harness.Results("e2e-policy")
    tmp = tempfile.mkdtemp(prefix="fratier-policy-", dir=os.environ.get("FRATIER_TMP"))
    hot_a = os.path.join(tmp, "a", "data", "hot")
    hot_b = os.path.join(tmp, "b", "data", "hot")
    hot_c = os.path.join(tmp, "c", "data", "hot")
    fs = None
    try:
        # Every tmpfs before the first check: a test that cannot have them skips, never after checks ran.
        tc.mount_tmpfs(res, hot_a, AGE_TMPFS)
        tc.mount_tmpfs(res, hot_b, FILL_TMPFS)
        tc.mount_tmpfs(res, hot_c, RESERVE_TMPFS)
        src = os.path.join(tmp, "fra")
        tc.generate(res, src)
        base = os.path.join(tmp, "a")
        os.makedirs(os.path.join(base, "data", "capacity"), exist_ok=True)
        with harness.Fratier(policy=True, base=base, options=OPTIONS, data=os.path.join(base, "data")) as fs:
            model = run_age(res, fs, src)
            if res.failed:
                sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
        if not res.failed:
            run_unmount_while_moving(res, base, hot_a, model)
            if res.failed:
                sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
        if not res.failed:
            run_outlook(res, base, hot_a, model)
        run_cascade(res, tmp, src)

        fs, hot_b = space_instance(tmp, "b",
                                   "high_watermark = %d%%\nlow_watermark = %d%%\n" % (HIGH, LOW))
        with fs:
            run_space(res, fs, hot_b, "watermark", HIGH - 5, HIGH + 3, lambda h: hot_use(h) < LOW,
                      "below the low watermark of %d%%" % LOW)
            if res.failed:
                sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
        # The watermarks out of the way (100% is never exceeded): the reserve alone drives the moves.
        fs, hot_c = space_instance(tmp, "c",
                                   "high_watermark = 100%%\nlow_watermark = 99%%\nreserve = %dM\n" % (RESERVE // MiB))
        with fs:
            run_space(res, fs, hot_c, "reserve", 45, 60, lambda h: hot_free(h) >= RESERVE,
                      "%d MiB free (the reserve)" % (RESERVE // MiB))
            if res.failed:
                sys.stderr.write("daemon log:\n" + fs.log_text() + "\n")
    finally:
        tc.umount(hot_a)
        tc.umount(hot_b)
        tc.umount(hot_c)
        if not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
