#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The README's DBA walkthrough, run as written.

The shell block between <!-- walkthrough:begin --> and <!-- walkthrough:end -->
in README.md runs under bash -e, command by command as the README gives
them, with three substitutions: DATA and FRA point into a scratch
directory, and so does /tmp; the install step (scripts/quickstart.sh,
which needs apt and writes /usr/local) becomes the mount it ends with,
`fratierfs -o data=$DATA,allow_other $FRA`, and the build's fratierfs,
tierctl and oragen come first on PATH in place of the installed ones.
Then what the README says of its steps is checked: tierctl recovery shows
the gap at sequence 2597, and the restore set up to 20:00 of the first day
is exactly logs 2598 and 2599, recalled from the capacity tier.

env: FRATIERFS, FRATIER_BUILD_ROOT, FRATIER_SOURCE_ROOT.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

import harness

README = os.path.join(os.environ.get("FRATIER_SOURCE_ROOT", "."), "README.md")
INSTALL = './scripts/quickstart.sh "$DATA" "$FRA"'


def walkthrough():
    text = open(README).read()
    m = re.search(r"<!-- walkthrough:begin -->\n```sh\n(.*?)```\n<!-- walkthrough:end -->", text, re.S)
    return m.group(1) if m else None


def main():
    harness.require_fuse()
    res = harness.Results("e2e-walkthrough")
    script = walkthrough()
    if not res.check(script is not None, "README.md has the walkthrough block"):
        res.finish()
    lines = script.splitlines()
    res.check(lines[0] == "DATA=/var/lib/fratier FRA=/mnt/fratier", "the walkthrough starts by naming DATA and FRA")
    res.check(INSTALL in lines, "the walkthrough installs with %s" % INSTALL)
    tmp = tempfile.mkdtemp(prefix="fratier-walkthrough-")
    fra = os.path.join(tmp, "fra")
    bindir = os.path.join(tmp, "bin")
    os.makedirs(bindir)
    for name, path in (("fratierfs", harness.daemon_path()), ("tierctl", harness.tool_path("tierctl/tierctl")),
                       ("oragen", harness.tool_path("oragen/oragen"))):
        os.symlink(os.path.abspath(path), os.path.join(bindir, name))
    body = ["set -e", 'DATA=%s/data FRA=%s' % (tmp, fra)]
    for line in lines[1:]:
        if line == INSTALL:
            line = 'mkdir -p "$FRA" && fratierfs -o "data=$DATA,allow_other" "$FRA"'
        body.append(line.replace("/tmp/", tmp + "/"))
    env = dict(os.environ, PATH=bindir + ":" + os.environ["PATH"], TZ="UTC")
    try:
        p = subprocess.run(["bash", "-x", "-c", "\n".join(body)], cwd=tmp, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=600)
        out = p.stdout
        print(out, flush=True)
        res.check(p.returncode == 0, "the walkthrough ran to its end: exit %d" % p.returncode)
        res.check(re.search(r"^\s+1\s+2597 MISSING\s", out, re.M) is not None, "tierctl recovery ORCL shows 2597 missing")
        dry = out[out.find("+ tierctl recall --dry-run"):]
        rows = re.findall(r"^\s+1\s+(\d+)\s+\d+\s+\d+\s+\S+ \S+\s+(\d)\s+(\S+)\s", dry, re.M)
        res.check([(s, t, r) for s, t, r in rows][:2] == [("2598", "1", "would_move"), ("2599", "1", "would_move")],
                  "the dry run lists logs 2598 and 2599 on tier 1: %r" % rows[:4])
        res.check("recalled 2 logs" in out, "the recall brings back those two logs")
        res.check(os.path.exists(os.path.join(tmp, "fra-report.html")), "the HTML report was written")
    finally:
        subprocess.run(["fusermount3", "-u", fra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not harness.is_mounted(fra) and not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    res.finish()


if __name__ == "__main__":
    main()
