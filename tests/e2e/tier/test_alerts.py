#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The shipped alerting rules (contrib/prometheus/fratier-alerts.yml) against
the real metrics endpoint.

`promtool check rules` validates the file.  Then two mounts are built up
step by step, and after each step `tierctl metrics --listen` is scraped
over HTTP; the scrapes, one a minute, become the input series of a
`promtool test rules` run that says, rule by rule, where each alert must
fire and where it must stay silent:

- mount 1 (seal delay 0, high watermark 99%): archived logs of thread 1
  arriving on time and a thread 3 that archived once, long ago: nothing
  fires; a log deleted: FratierArchivelogGap for that database only; thread
  2 archiving logs whose changes ended two hours ago:
  FratierArchivelogStalled for thread 2 only (thread 3, never active
  during the scrapes, stays silent);
- mount 2 (seal delay an hour, high watermark 2%): the hot tier above its
  high watermark for ten minutes: FratierHotAboveHighWatermark; a file last
  changed two hours ago and not sealed yet: FratierSealBacklog.

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_TIERCTL), FRATIER_SOURCE_ROOT.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import harness
import tiercommon as tc
from redolog import redo_log
from tiercommon import dc

RULES = os.path.join(os.environ.get("FRATIER_SOURCE_ROOT", "."), "contrib", "prometheus", "fratier-alerts.yml")
MINUTES = 16  # long enough for the 10-minute rule


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Scraper:
    """tierctl metrics --listen on a mount, scraped on demand."""

    def __init__(self, res, fs):
        self.res, self.port = res, free_port()
        self.p = subprocess.Popen([tc.tierctl_path(), "-m", fs.mnt, "metrics", "--listen", "127.0.0.1:%d" % self.port],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def scrape(self):
        from prometheus_client.parser import text_string_to_metric_families
        for _ in range(600):
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port, timeout=30) as r:
                    body = r.read().decode()
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.05)
        else:
            self.res.check(False, "the metrics endpoint never answered")
            return {}
        out = {}
        for fam in text_string_to_metric_families(body):
            for s in fam.samples:
                labels = ",".join('%s="%s"' % (k, v) for k, v in sorted(s.labels.items()))
                out["%s{%s}" % (s.name, labels)] = s.value
        return out

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        self.p.wait(60)


def series_of(scrapes):
    """promtool input series: scrape k at minute k, the last one held to MINUTES; '_' where a series is absent."""
    minutes = scrapes + [scrapes[-1]] * (MINUTES - len(scrapes))
    keys = sorted({k for s in scrapes for k in s})
    return [{"series": k, "values": " ".join(repr(m[k]) if k in m else "_" for m in minutes)} for k in keys]


def expected(rules, name, labels):
    """One expected alert: its labels and its annotations with $labels filled in."""
    rule = next(r for g in rules["groups"] for r in g["rules"] if r.get("alert") == name)
    all_labels = dict(labels, **rule.get("labels", {}))
    ann = {}
    for k, v in rule.get("annotations", {}).items():
        for lk, lv in labels.items():
            v = v.replace("{{ $labels.%s }}" % lk, lv)
        ann[k] = v
    return {"exp_labels": all_labels, "exp_annotations": ann}


def promtool_test(res, tmp, name, scrapes, checks):
    """Runs promtool test rules on the scrapes; checks: [(minute, alert, [labels...])]."""
    test = {"rule_files": [RULES], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series_of(scrapes),
                       "alert_rule_test": [{"eval_time": "%dm" % m, "alertname": a, "exp_alerts": alerts}
                                           for m, a, alerts in checks]}]}
    path = os.path.join(tmp, "%s.yml" % name)
    with open(path, "w") as f:
        json.dump(test, f, indent=1)  # JSON is YAML
    p = subprocess.run(["promtool", "test", "rules", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(p.stdout, flush=True)
    res.check(p.returncode == 0, "promtool test rules (%s): exit %d" % (name, p.returncode))


def write(fs, rel, data, mtime=None):
    os.makedirs(os.path.dirname(fs.path(rel)), exist_ok=True)
    with open(fs.path(rel), "wb") as f:
        f.write(data)
    if mtime:
        os.utime(fs.path(rel), (mtime, mtime))
    return fs.path(rel)


def log_rel(thread, seq):
    return "ORCL/archivelog/o1_mf_%d_%d_x_.arc" % (thread, seq)


def mount1(res, tmp, rules):
    now = int(time.time())
    recent, old = now - 500, now - 7200 - 300
    data = os.path.join(tmp, "data1")
    conf = os.path.join(tmp, "m1.conf")
    with open(conf, "w") as f:
        f.write("[fratier]\ndata_dir = %s\n[tier hot]\nhigh_watermark = 99%%\nlow_watermark = 98%%\n[tier capacity]\n" % data)
    for d in ("hot", "capacity"):
        os.makedirs(os.path.join(data, d))
    scrapes = []
    with harness.Fratier(base=os.path.join(tmp, "m1"), config=conf, data=data, options=dc.OPTIONS) as fs:
        sc = Scraper(res, fs)
        try:
            # Thread 1 archives a log every 100 s up to now; thread 3 archived once, two hours ago.
            paths = [write(fs, log_rel(1, s), redo_log(1111, "ORCL", 1, s, 1000 * s, 1000 * s + 1000, blocks=64, t0=recent))
                     for s in (1, 2, 3)]
            paths.append(write(fs, log_rel(3, 1), redo_log(1111, "ORCL", 3, 1, 500, 1500, blocks=64, t0=old)))
            dc.check_sealed(res, paths, "mount 1, step 0")
            scrapes.append(sc.scrape())
            p = write(fs, log_rel(1, 4), redo_log(1111, "ORCL", 1, 4, 4000, 5000, blocks=64, t0=recent))
            dc.check_sealed(res, [p], "mount 1, step 1")
            scrapes.append(sc.scrape())
            os.unlink(fs.path(log_rel(1, 2)))
            scrapes.append(sc.scrape())
            p = write(fs, log_rel(2, 1), redo_log(1111, "ORCL", 2, 1, 300, 1300, blocks=64, t0=old))
            dc.check_sealed(res, [p], "mount 1, step 3")
            scrapes.append(sc.scrape())
            p = write(fs, log_rel(2, 2), redo_log(1111, "ORCL", 2, 2, 1300, 2300, blocks=64, t0=old))
            dc.check_sealed(res, [p], "mount 1, step 4")
            scrapes.append(sc.scrape())
        finally:
            sc.stop()
    key = 'fratier_archivelog_gaps{db="ORCL",dbid="1111"}'
    res.check([s.get(key) for s in scrapes] == [0, 0, 1, 1, 1], "gaps per scrape: %r" % [s.get(key) for s in scrapes])
    orcl = {"db": "ORCL", "dbid": "1111"}
    gap = [expected(rules, "FratierArchivelogGap", orcl)]
    stalled2 = [expected(rules, "FratierArchivelogStalled", dict(orcl, thread="2"))]
    promtool_test(res, tmp, "mount1", scrapes, [
        (1, "FratierArchivelogGap", []),
        (1, "FratierArchivelogStalled", []),
        (1, "FratierHotAboveHighWatermark", []),
        (1, "FratierSealBacklog", []),
        (2, "FratierArchivelogGap", gap),
        (2, "FratierArchivelogStalled", []),
        (4, "FratierArchivelogStalled", stalled2),
        (MINUTES - 1, "FratierHotAboveHighWatermark", []),
        (MINUTES - 1, "FratierSealBacklog", []),
    ])


def mount2(res, tmp, rules):
    data = os.path.join(tmp, "data2")
    conf = os.path.join(tmp, "m2.conf")
    with open(conf, "w") as f:
        f.write("[fratier]\ndata_dir = %s\n[tier hot]\nhigh_watermark = 2%%\nlow_watermark = 1%%\n[tier capacity]\n" % data)
    for d in ("hot", "capacity"):
        os.makedirs(os.path.join(data, d))
    scrapes = []
    with harness.Fratier(base=os.path.join(tmp, "m2"), config=conf, data=data, options=["seal_delay=3600"]) as fs:
        sc = Scraper(res, fs)
        try:
            scrapes.append(sc.scrape())
            write(fs, "backup/piece_01.bkp", os.urandom(1 << 20), mtime=int(time.time()) - 7200)
            scrapes.append(sc.scrape())
        finally:
            sc.stop()
    backlog = [s.get("fratier_seal_backlog_seconds{}") for s in scrapes]
    res.check(backlog[0] == 0 and (backlog[1] or 0) >= 7200, "seal backlog per scrape: %r" % backlog)
    promtool_test(res, tmp, "mount2", scrapes, [
        (0, "FratierSealBacklog", []),
        (1, "FratierSealBacklog", [expected(rules, "FratierSealBacklog", {})]),
        (5, "FratierHotAboveHighWatermark", []),  # pending: not yet ten minutes
        (MINUTES - 1, "FratierHotAboveHighWatermark", [expected(rules, "FratierHotAboveHighWatermark", {})]),
    ])


def main():
    harness.require_fuse()
    res = harness.Results("e2e-alerts")
    if not shutil.which("promtool"):
        print("SKIP: promtool is not installed (Debian package prometheus; scripts/install-deps.sh)")
        sys.exit(harness.SKIP)
    import yaml
    p = subprocess.run(["promtool", "check", "rules", RULES], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(p.stdout, flush=True)
    res.check(p.returncode == 0 and "SUCCESS: 4 rules found" in p.stdout, "promtool check rules")
    with open(RULES) as f:
        rules = yaml.safe_load(f)
    tmp = tempfile.mkdtemp(prefix="fratier-alerts-")
    try:
        mount1(res, tmp, rules)
        mount2(res, tmp, rules)
    finally:
        if not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
