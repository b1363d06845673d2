#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A shared tier (docs/SHARED.md): two daemons on this machine, each with its
own data directory, hot tier, catalog and mount, share one capacity
directory (shared = yes) under the host names alpha and beta.

- both register there (hosts/NAME.host, a lease) and write only below
  h/NAME: nothing of either lands anywhere else on the shared directory;
- a third daemon under the name alpha (another data directory) is refused
  at start with a clear message while alpha's lease runs, also after alpha
  stopped cleanly; an invalid host name is refused by the config parser,
  and shared = yes on a tier that holds an unshared store is refused;
- oragen content migrated to the shared tier by both reads back exactly on
  both, also after each collected its tiers (a host's collection never
  touches the other's objects) and after alpha was SIGKILLed and restarted
  over its own data directory (it takes its own lease back at once);
- disaster recovery (--recover-from the shared tier, with host = beta in
  the new config) rebuilds exactly beta's files;
- tierctl report --by host lists, per host, the objects and bytes that a
  walk of the shared directory (or the export) finds below h/NAME and
  hosts/NAME.host, through the directory backend or libnfs alike
  (e2e-shared-hosts checks the rest of report --by host).

env: FRATIERFS, FRATIER_BUILD_ROOT (or FRATIER_ORAGEN, FRATIER_TIERCTL),
FRATIER_KEEP (keep the data directories).
"""

import os
import shutil
import subprocess
import sys
import time

import harness
import tiercommon as tc
from tiercommon import dc


def write_config(base, host, filer):
    data = os.path.join(base, "data")
    os.makedirs(os.path.join(data, "hot"), exist_ok=True)
    conf = os.path.join(base, "fratier.conf")
    with open(conf, "w") as f:
        f.write("[fratier]\ndata_dir = %s\n%s[tier hot]\n[tier filer]\nrole = %s\npath = %s\nshared = yes\n"
                % (data, "host = %s\n" % host if host else "", "nfs" if filer.startswith("nfs://") else "capacity",
                   filer))
    return conf, data


def daemon(tmp, name, host, filer):
    base = os.path.join(tmp, name)
    conf, data = write_config(base, host, filer)
    return harness.Fratier(base=base, config=conf, data=data, options=dc.OPTIONS)


def fill(res, fs, tmp, seed):
    src = os.path.join(tmp, "src-%d" % seed)
    tc.generate(res, src, seed=seed, days=1)
    model = tc.copy_in(fs, src)
    shutil.rmtree(src)
    if not dc.check_sealed(res, [fs.path(r) for r in model], "seal"):
        res.finish()
    j = tc.tierctl_json(res, fs, "migrate", "--to", "filer", fs.mnt)
    res.check(j.get("moved") == len(model) and j.get("failed") == 0,
              "migrate to the shared tier: %r" % {k: j.get(k) for k in ("moved", "failed", "skipped")})
    return model


def objects(root):
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return sorted(out)


def sizes(root):
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            try:
                out[os.path.relpath(os.path.join(d, n), root)] = os.path.getsize(os.path.join(d, n))
            except FileNotFoundError:
                pass  # a temporary renamed away meanwhile
    return out


def by_host(objects):
    out = {}
    for name, size in objects.items():
        parts = name.split("/")
        host = parts[1] if parts[0] == "h" else parts[1].split(".host")[0] if parts[0] == "hosts" else ""
        o, b = out.get(host, (0, 0))
        out[host] = (o + 1, b + size)
    return out


def check_listing(res, fs, root):
    """report --by host against a walk of the tier's objects, at a moment no renewal changed them."""
    for attempt in range(10):
        before = sizes(root)
        rows = tc.tierctl_json(res, fs, "report", "--by", "host").get("hosts", [])
        got = {r["host"]: (r["objects"], r["bytes"]) for r in rows}
        if sizes(root) == before and got == by_host(before):
            break
        time.sleep(0.3)
    res.check(got == by_host(before), "report --by host %r, the walk of the tier %r" % (got, by_host(before)))


def lease_until(root, host):
    with open(os.path.join(root, "hosts", host + ".host")) as f:
        fields = dict(line.split(" ", 1) for line in f.read().splitlines())
    return int(fields["lease_until"])


def refused(res, fs, what, want):
    try:
        fs.start()
    except RuntimeError as e:
        res.check(want in str(e), "%s: refused, but without saying '%s': %s" % (what, want, str(e)[-600:]))
        return
    fs.stop()
    res.check(False, "%s: started" % what)


def run(res, tmp, filer, root):
    """filer: the shared tier's path in the configs; root: where its objects are, to look at."""
    bad = daemon(tmp, "bad", "Alpha.example", filer)
    refused(res, bad, "an invalid host name", "invalid 'host'")

    a = daemon(tmp, "a", "alpha", filer)
    b = daemon(tmp, "b", "beta", filer)
    with a, b:
        model_a = fill(res, a, tmp, 1)
        model_b = fill(res, b, tmp, 2)
        names = objects(root)
        res.check("hosts/alpha.host" in names and "hosts/beta.host" in names,
                  "host records missing: %s" % [n for n in names if n.startswith("hosts/")])
        stray = [n for n in names if not n.startswith(("h/alpha/", "h/beta/")) and
                 n not in ("hosts/alpha.host", "hosts/beta.host")]
        res.check(not stray, "objects outside the hosts' own names on the shared tier: %s" % stray[:5])
        res.check(any(n.startswith("h/alpha/c/") for n in names) and any(n.startswith("h/beta/c/") for n in names),
                  "containers of each host below h/NAME/c: %s" % names[:8])
        first = lease_until(root, "alpha")
        print("alpha's lease runs until %d" % first, flush=True)
        # The collector thread renews every 10 s: wait (bounded) for the next record.
        deadline = time.monotonic() + harness.scaled(60)
        while lease_until(root, "alpha") == first and time.monotonic() < deadline:
            time.sleep(0.5)
        res.check(lease_until(root, "alpha") > first, "alpha's lease was not renewed")

        check_listing(res, a, root)
        if not filer.startswith("nfs://"):
            # Raw files never spill to a shared tier: its staging directory would be every host's.
            res.check(not os.path.exists(os.path.join(filer, "staging")),
                      "a spill area on the shared directory: %s" % os.listdir(filer))
        for fs, host in ((a, "alpha"), (b, "beta")):
            rows = {t.get("tier"): t for t in tc.tierctl_json(res, fs, "df").get("tiers", [])}
            res.check(rows.get(1, {}).get("shared") == "yes" and rows.get(1, {}).get("host") == host and
                      rows.get(0, {}).get("shared") == "no", "df of %s: %r" % (host, rows.get(1)))

        other = daemon(tmp, "c", "alpha", filer)
        refused(res, other, "a second live daemon named alpha", "is in use on the shared tier by another live daemon")

        for fs in (a, b):
            rc, _, err = tc.tierctl(fs, "gc")
            res.check(rc == 0, "gc: %s" % err)
        tc.compare_all(res, a, model_a, "alpha after both collected")
        tc.compare_all(res, b, model_b, "beta after both collected")

        a.kill()
        a.start()
        tc.compare_all(res, a, model_a, "alpha after SIGKILL and restart")
        tc.compare_all(res, b, model_b, "beta after alpha's restart")
        res.check(sorted(tc.tiers_of(res, a, model_a).values()) == [1] * len(model_a),
                  "alpha's files not on the shared tier")
    # Disaster recovery of one host from the shared tier: beta's files, and only those, into a new data directory.
    new = os.path.join(tmp, "beta-new")
    os.makedirs(os.path.join(new, "data", "hot"))
    conf = os.path.join(new, "fratier.conf")
    with open(conf, "w") as f:
        f.write("[fratier]\ndata_dir = %s\nhost = beta\n[tier hot]\n" % os.path.join(new, "data"))
    p = subprocess.run([harness.daemon_path(), "--recover-from=" + filer, "-o", "config=" + conf],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    print(p.stdout.strip(), flush=True)
    res.check(p.returncode == 0 and "the files of host beta" in p.stdout, "recovery of beta: exit %d" % p.returncode)
    with harness.Fratier(base=new, config=conf, data=os.path.join(new, "data"), options=dc.OPTIONS) as fs:
        present = set()
        for d, _, names in os.walk(fs.mnt):
            present |= {os.path.relpath(os.path.join(d, n), fs.mnt) for n in names}
        res.check(present == set(model_b), "files after recovering beta: missing %s, unexpected %s"
                  % (sorted(set(model_b) - present)[:3], sorted(present - set(model_b))[:3]))
        tc.compare_all(res, fs, model_b, "beta recovered from the shared tier")

    # A tier used before without shared = yes: its files would read as EIO below h/NAME, so it is refused.
    if not filer.startswith("nfs://"):
        old = os.path.join(tmp, "old-capacity")
        os.makedirs(os.path.join(old, "containers", "c", "01"))
        with open(os.path.join(old, "containers", "c", "01", "0000000000000001.ftc"), "wb") as f:
            f.write(b"x")
        refused(res, daemon(tmp, "d", "delta", old),
                "shared = yes on a tier holding an unshared store", "holds the containers of a tier that is not shared")
    # Stopped cleanly, alpha's lease still runs: the name stays alpha's until it ends.
    refused(res, daemon(tmp, "c", "alpha", filer), "another daemon named alpha right after alpha stopped",
            "is in use on the shared tier by another live daemon")


def main():
    tc.shared_filer_main("e2e-shared", run)


if __name__ == "__main__":
    sys.exit(main())
