#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""meson install puts everything the first hour needs where it belongs, and
the mount helper mounts.

`meson install --destdir` into a scratch directory must give the daemon and
tierctl in the bin directory, both man pages, the systemd unit, the mount
helper /sbin/mount.fratierfs and the alerting rules.  Then the installed
helper, called as mount(8) calls /sbin/mount.TYPE, mounts a data directory
through mount.fuse3 (the build's fratierfs first on PATH, standing in for
the installed one) and tierctl reads the mount.

env: FRATIER_BUILD_ROOT, FRATIERFS.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import harness

WANT = ["bin/fratierfs", "bin/tierctl", "share/man/man1/tierctl.1", "share/man/man8/fratierfs.8",
        "share/fratier/prometheus/fratier-alerts.yml"]
ROOTED = ["/lib/systemd/system/fratierfs@.service", "/sbin/mount.fratierfs"]


def main():
    harness.require_fuse()
    res = harness.Results("e2e-install")
    build = os.path.abspath(os.environ.get("FRATIER_BUILD_ROOT", "build"))
    tmp = tempfile.mkdtemp(prefix="fratier-install-")
    dest = os.path.join(tmp, "dest")
    mnt = os.path.join(tmp, "mnt")
    try:
        p = subprocess.run(["meson", "install", "-C", build, "--no-rebuild", "--destdir", dest, "--quiet"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        res.check(p.returncode == 0, "meson install --destdir: %s" % p.stdout[-500:])
        prefix = subprocess.run(["meson", "introspect", build, "--buildoptions"], stdout=subprocess.PIPE, text=True)
        opts = {o["name"]: o["value"] for o in json.loads(prefix.stdout or "[]")}
        root = dest + opts.get("prefix", "/usr/local")
        for rel in WANT:
            res.check(os.path.isfile(os.path.join(root, rel)), "installed %s/%s" % (opts.get("prefix"), rel))
        for path in ROOTED:
            res.check(os.path.isfile(dest + path), "installed %s" % path)
        helper = dest + "/sbin/mount.fratierfs"
        res.check(os.access(helper, os.X_OK), "the mount helper is executable")
        bindir = os.path.join(tmp, "bin")
        os.makedirs(bindir)
        os.symlink(os.path.abspath(harness.daemon_path()), os.path.join(bindir, "fratierfs"))
        os.makedirs(mnt)
        env = dict(os.environ, PATH=bindir + ":" + os.environ["PATH"])
        p = subprocess.run([helper, os.path.join(tmp, "data"), mnt, "-o", "allow_other,policy=0"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        res.check(p.returncode == 0 and harness.is_mounted(mnt), "mount.fratierfs mounted: %d %s" % (p.returncode, p.stdout))
        t = subprocess.run([os.path.join(root, "bin", "tierctl"), "-m", mnt, "df"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        res.check(t.returncode == 0 and "capacity" in t.stdout, "the installed tierctl reads it: %s" % t.stdout)
    finally:
        subprocess.run(["fusermount3", "-u", mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not harness.is_mounted(mnt):
            shutil.rmtree(tmp, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
