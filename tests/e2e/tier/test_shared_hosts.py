#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The operator's side of a shared tier (docs/SHARED.md): two daemons, alpha
and beta, share one capacity directory (or, with --nfs, one nfs-ganesha
export reached through libnfs) with a short lease (shared_lease = 4s, so a
lease runs out in seconds, not a minute).

- tierctl report --by host on alpha: per host, the objects and bytes the
  listing of the tier finds under h/NAME and hosts/NAME.host (as a walk of
  the directory counts them), rows adding up to the whole tier, and the
  files and logical bytes each host published (h/NAME/s/summary) equal to
  what was written through its mount;
- tierctl host retire of beta while it is live is refused without --force,
  and for anyone but root;
- beta SIGKILLed: once its lease has run out, alpha's status names it
  expired (and says what that blocks), its metrics count it
  (fratier_shared_hosts{state="expired"}, fratier_shared_host_expired_seconds);
- tierctl host retire beta as root: status and metrics say retired, and
  beta restarting over its own data directory is refused for good;
- gamma, live, retired with --force: its next renewal finds it retired, it
  logs so and takes no more moves to the tier; the record stays retired.

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_TIERCTL), FRATIER_KEEP.
"""

import os
import re
import subprocess
import sys
import time

import harness
import tiercommon as tc
from tiercommon import dc

LEASE = 4
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
EXIT_DENIED = 4


def fill(res, fs, sizes, seed):
    """Writes files of these sizes (random bytes: nothing to share), seals them, moves them to the shared tier."""
    paths = []
    for i, size in enumerate(sizes):
        p = fs.path("f%d-%d" % (seed, i))
        with open(p, "wb") as f:
            f.write(os.urandom(size))
        paths.append(p)
    if not dc.check_sealed(res, paths, "seal"):
        res.finish()
    j = tc.tierctl_json(res, fs, "migrate", "--to", "filer", *paths)
    res.check(j.get("moved") == len(paths), "migrate to the shared tier: %r" % {k: j.get(k) for k in ("moved", "failed")})


def walk(root):
    """{relative name: size} of every file below root."""
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            try:
                out[os.path.relpath(p, root)] = os.path.getsize(p)
            except FileNotFoundError:
                pass  # a temporary renamed away meanwhile
    return out


def owner(name):
    m = re.match(r"h/([^/]+)/", name) or re.match(r"hosts/([^/]+?)\.host", name)
    return m.group(1) if m else ""


def per_host(objects):
    out = {}
    for name, size in objects.items():
        o, b = out.get(owner(name), (0, 0))
        out[owner(name)] = (o + 1, b + size)
    return out


def report_rows(res, fs):
    j = tc.tierctl_json(res, fs, "report", "--by", "host")
    return {r["host"]: r for r in j.get("hosts", []) if r.get("tier") == 1}


def check_report(res, fs, root, written):
    """The per-host rows against a walk of the tier, and the summaries against what was written."""
    # Renewals replace records and summaries every second: compare at a moment the walk did not change.
    for attempt in range(10):
        before = walk(root)
        rows = report_rows(res, fs)
        after = walk(root)
        if before == after and {h: (r["objects"], r["bytes"]) for h, r in rows.items()} == per_host(before):
            break
        time.sleep(0.3)
    want = per_host(after)
    got = {h: (r["objects"], r["bytes"]) for h, r in rows.items()}
    res.check(got == want, "report --by host: objects and bytes per host %r, the walk of the tier %r" % (got, want))
    res.check(sum(r["bytes"] for r in rows.values()) == sum(after.values()) and
              sum(r["objects"] for r in rows.values()) == len(after),
              "report --by host: the rows add up to %d objects, %d bytes, the tier holds %d, %d" %
              (sum(r["objects"] for r in rows.values()), sum(r["bytes"] for r in rows.values()), len(after),
               sum(after.values())))
    res.check(set(rows) == set(written), "report --by host: hosts %s, expected %s" % (sorted(rows), sorted(written)))
    for host, sizes in written.items():
        r = rows.get(host, {})
        containers = sum(s for n, s in after.items() if n.startswith("h/%s/c/" % host))
        res.check(r.get("summary") == "yes" and r.get("files") == len(sizes) and r.get("logical") == sum(sizes),
                  "summary of %s: files %r logical %r, it wrote %d files, %d bytes" %
                  (host, r.get("files"), r.get("logical"), len(sizes), sum(sizes)))
        res.check(r.get("stored") == containers, "summary of %s: stored %r, its containers on the tier hold %d" %
                  (host, r.get("stored"), containers))
    rc, out, err = tc.tierctl(fs, "report", "--by", "host", "--bytes")
    total = [l for l in out.splitlines() if re.match(r"\s*1\s+total\s", l)]
    print(out, flush=True)
    res.check(rc == 0 and total and str(sum(after.values())) in total[0].split(),
              "report --by host table: no total row of %d bytes: %r %s" % (sum(after.values()), out[-800:], err))


def wait_summaries(res, fs, written):
    """Summaries are published once a lease period: wait (bounded) until each says what was written."""
    deadline = time.monotonic() + harness.scaled(8 * LEASE)
    while time.monotonic() < deadline:
        rows = report_rows(res, fs)
        if all(rows.get(h, {}).get("logical") == sum(s) for h, s in written.items()):
            return
        time.sleep(0.5)


def host_row(res, fs, host):
    j = tc.tierctl_json(res, fs, "status")
    return {r["host"]: r for r in j.get("hosts", []) if r.get("tier") == 1}.get(host, {})


def wait_state(res, fs, host, state):
    deadline = time.monotonic() + harness.scaled(6 * LEASE)
    while time.monotonic() < deadline:
        if host_row(res, fs, host).get("state") == state:
            return True
        time.sleep(0.5)
    return False


def metrics(fs):
    rc, out, _ = tc.tierctl(fs, "metrics")
    return out if rc == 0 else ""


def record(root, host):
    with open(os.path.join(root, "hosts", host + ".host")) as f:
        return dict(line.split(" ", 1) for line in f.read().splitlines())


def run(res, tmp, filer, root):
    a = tc.shared_daemon(tmp, "alpha", filer, lease=LEASE, options=["allow_other"])
    b = tc.shared_daemon(tmp, "beta", filer, lease=LEASE)
    written = {"alpha": [1 << 20, 3 << 19, 12345], "beta": [2 << 20, 777777]}
    with a:
        b.start()
        fill(res, a, written["alpha"], 1)
        fill(res, b, written["beta"], 2)
        wait_summaries(res, a, written)
        check_report(res, a, root, written)

        # A live host is not retired without --force, and not by anyone but root.
        rc, _, err = tc.tierctl(a, "host", "retire", "beta", "--tier", "1")
        res.check(rc != 0 and "is live on shared tier 1" in err, "retire of live beta: exit %d %s" % (rc, err.strip()))
        res.check(record(root, "beta")["state"] == "live", "beta's record after a refused retire: %r" % record(root, "beta"))
        for d in (tmp, a.base, a.data):
            os.chmod(d, 0o755)
        os.chmod(a.mnt, 0o755)
        p = subprocess.run(NOBODY + [tc.tierctl_path(), "-m", a.mnt, "host", "retire", "beta", "--tier", "1", "--force"],
                           capture_output=True, text=True, timeout=60)
        res.check(p.returncode == EXIT_DENIED and "is for root only" in p.stderr,
                  "retire by nobody: exit %d %s" % (p.returncode, p.stderr.strip()))
        rc, _, err = tc.tierctl(a, "host", "retire", "alpha", "--tier", "1", "--force")
        res.check(rc != 0 and "this daemon's own name" in err, "retire of alpha by alpha: exit %d %s" % (rc, err.strip()))
        res.check(host_row(res, a, "beta").get("state") == "live" and host_row(res, a, "alpha").get("this") == "yes",
                  "status before beta stops: %r" % tc.tierctl_json(res, a, "status").get("hosts"))

        # beta dies: once its lease has run out, alpha says so.
        b.kill()
        res.check(wait_state(res, a, "beta", "expired"), "beta never showed expired: %r" % host_row(res, a, "beta"))
        rc, out, err = tc.tierctl(a, "status")
        print(out[out.find("hosts on shared tier"):out.find("\nlast errors")], flush=True)
        res.check(rc == 0 and re.search(r"^  beta\s+expired\s+lease ended", out, re.M) and
                  "host beta on tier filer is expired, not retired" in out and "blocks collection" in out,
                  "status of alpha with beta expired: %s" % out[-1500:])
        m = metrics(a)
        print("\n".join(l for l in m.splitlines() if l.startswith("fratier_shared")), flush=True)
        res.check('fratier_shared_hosts{tier="1",name="filer",state="expired"} 1\n' in m and
                  'fratier_shared_hosts{tier="1",name="filer",state="live"} 1\n' in m and
                  re.search(r'^fratier_shared_host_expired_seconds\{tier="1",name="filer",host="beta"\} \d+$', m, re.M),
                  "metrics with beta expired: %s" % "\n".join(l for l in m.splitlines() if "shared" in l))

        # Retired by root: for good.
        rc, out, err = tc.tierctl(a, "host", "retire", "beta", "--tier", "1")
        res.check(rc == 0 and "host beta retired from tier 1" in out, "retire of beta: exit %d %s %s" % (rc, out, err))
        res.check(record(root, "beta")["state"] == "retired", "beta's record: %r" % record(root, "beta"))
        res.check(host_row(res, a, "beta").get("state") == "retired", "status after retire: %r" % host_row(res, a, "beta"))
        m = metrics(a)
        res.check('fratier_shared_hosts{tier="1",name="filer",state="retired"} 1\n' in m and
                  'state="expired"} 0\n' in m and "fratier_shared_host_expired_seconds{" not in m,
                  "metrics after retire: %s" % "\n".join(l for l in m.splitlines() if "shared" in l))
        rc, out, err = tc.tierctl(a, "host", "retire", "beta", "--tier", "1")
        res.check(rc == 0 and "retired from tier 1 already" in out, "retire twice: exit %d %s %s" % (rc, out, err))
        try:
            b.start()
            b.stop()
            res.check(False, "beta started again after it was retired")
        except RuntimeError as e:
            res.check("was retired from the shared tier" in str(e) and "may not come back under that name" in str(e),
                      "beta refused without the reason: %s" % str(e)[-600:])
        # Its objects stay where they were, and report --by host still counts them, under a retired host.
        rows = report_rows(res, a)
        res.check(rows.get("beta", {}).get("state") == "retired" and rows["beta"].get("logical") == sum(written["beta"]),
                  "report --by host after retiring beta: %r" % rows.get("beta"))

        # A live host retired by force: its next renewal finds it retired, and it writes nothing more there.
        g = tc.shared_daemon(tmp, "gamma", filer, lease=LEASE)
        with g:
            rc, _, err = tc.tierctl(a, "host", "retire", "gamma", "--tier", "1")
            res.check(rc != 0 and "--force" in err, "retire of live gamma without --force: exit %d %s" % (rc, err.strip()))
            rc, out, err = tc.tierctl(a, "host", "retire", "gamma", "--tier", "1", "--force")
            res.check(rc == 0 and "retired" in out, "retire --force of gamma: exit %d %s %s" % (rc, out, err))
            deadline = time.monotonic() + harness.scaled(6 * LEASE)
            while "is no longer this daemon's" not in g.log_text() and time.monotonic() < deadline:
                time.sleep(0.3)
            res.check("is no longer this daemon's" in g.log_text(), "gamma did not notice: %s" % g.log_text()[-1500:])
            res.check(record(root, "gamma")["state"] == "retired", "gamma's record: %r" % record(root, "gamma"))
            p = g.path("late")
            with open(p, "wb") as f:
                f.write(os.urandom(100000))
            dc.check_sealed(res, [p], "seal on gamma")
            rc, out, err = tc.tierctl(g, "migrate", "--to", "filer", p)
            res.check(rc != 0 and "takes nothing more from this daemon" in err,
                      "migrate on retired gamma: exit %d %s %s" % (rc, out, err))
            res.check(not any(n.startswith("h/gamma/c/") for n in walk(root)), "gamma wrote containers after it was retired")


def main():
    tc.shared_filer_main("e2e-shared-hosts", run)


if __name__ == "__main__":
    sys.exit(main())
