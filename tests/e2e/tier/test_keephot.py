#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""keep_hot end to end: the policy worker keeps the recovery window's logs hot.

Six archived logs of one thread, their changes ending 3 h, 2 h, 70 min,
50 min, 20 min and 1 min ago (by their headers), on a mount whose hot tier
is far above its high watermark (2%: the host's disk) and whose archived
logs are due by age after a minute.  With keep_hot = 1h the worker moves the
three logs before the window to the capacity tier and holds the three
inside it, and tierctl report says what it holds; with the option off, the
same logs all move, as before.  The worker's passes are awaited, never
timed.

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_TIERCTL), FRATIER_KEEP.
"""

import os
import shutil
import tempfile
import time

import harness
import tiercommon as tc
from redolog import redo_log
from tiercommon import dc

ENDS_AGO = {1: 3 * 3600, 2: 2 * 3600, 3: 70 * 60, 4: 50 * 60, 5: 20 * 60, 6: 60}


def run(res, tmp, keep_hot):
    data = os.path.join(tmp, "data")
    conf = os.path.join(tmp, "fratier.conf")
    for d in ("hot", "capacity"):
        os.makedirs(os.path.join(data, d))
    with open(conf, "w") as f:
        f.write("[fratier]\ndata_dir = %s\npolicy_interval = 1s\n[tier hot]\nhigh_watermark = 2%%\nlow_watermark = 1%%\n"
                "[tier capacity]\n[class archivelog]\nmigrate_after = 1m\n%s"
                % (data, "keep_hot = 1h\n" if keep_hot else ""))
    now = int(time.time())
    what = "keep_hot = 1h" if keep_hot else "without keep_hot"
    with harness.Fratier(base=tmp, config=conf, data=data, options=["seal_delay=0"], policy=True) as fs:
        model = {}
        for s, ago in ENDS_AGO.items():
            rel = "ORCL/archivelog/o1_mf_1_%d_x_.arc" % s
            os.makedirs(os.path.dirname(fs.path(rel)), exist_ok=True)
            data_s = redo_log(1111, "ORCL", 1, s, 1000 * s, 1000 * s + 1000, blocks=256, t0=now - ago - 100 * (s + 1))
            with open(fs.path(rel), "wb") as f:
                f.write(data_s)
            os.utime(fs.path(rel), (now - ago, now - ago))
            model[rel] = data_s
        if not dc.check_sealed(res, [fs.path(r) for r in model], what):
            return
        want = {r: (1 if not keep_hot or ENDS_AGO[int(r.split("_")[3])] > 3600 else 0) for r in model}
        moved = sum(want.values())
        deadline = time.monotonic() + 120
        while True:
            tiers = tc.tiers_of(res, fs, model)
            if sum(1 for t in tiers.values() if t == 1) >= moved or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        # Passes go on: what is held stays held.
        status = tc.tierctl_json(res, fs, "status")
        runs = status.get("policy_last_run", 0)
        deadline = time.monotonic() + 60
        while tc.tierctl_json(res, fs, "status").get("policy_last_run", 0) <= runs + 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        tiers = tc.tiers_of(res, fs, model)
        res.check(tiers == want, "%s: tiers %s, expected %s" % (what, sorted(tiers.items()), sorted(want.items())))
        rc, out, _ = tc.tierctl(fs, "report")
        held = [l for l in out.splitlines() if l.startswith("Held hot by keep_hot")]
        if keep_hot:
            res.check(len(held) == 1 and "archivelog" in held[0] and " in 3," in held[0],
                      "report says what keep_hot holds: %r" % held)
        else:
            res.check(not held, "without keep_hot the report holds nothing: %r" % held)
        tc.compare_all(res, fs, model, what)


def main():
    harness.require_fuse()
    res = harness.Results("e2e-keephot")
    for keep_hot in (True, False):
        tmp = tempfile.mkdtemp(prefix="fratier-keephot-")
        try:
            run(res, tmp, keep_hot)
        finally:
            if not os.environ.get("FRATIER_KEEP"):
                shutil.rmtree(tmp, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
