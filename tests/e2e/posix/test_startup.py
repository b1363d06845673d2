#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Start-up errors and the ways fratierfs gets mounted.

Every broken start must end quickly with a non-zero exit status (not a
signal, no core, no sanitizer report), leave nothing mounted, and say on
stderr what is wrong (for a config: "FILE:LINE:").  Each one is tried in the
foreground (-f) and detaching, since a daemon that forks too early loses its
exit status.  Every failure case has a control that mounts the same setup
once the fault is removed, so a test cannot pass because nothing ever mounts.

Also: two daemons on one data directory, a stale mount after SIGKILL, mount
through mount(8) with type fuse.fratierfs, and detaching only once ready.
"""

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import harness

TIMEOUT = 20
VERBOSE = "-v" in sys.argv
SANITIZER = re.compile(r"Sanitizer|runtime error:|Segmentation fault|core dumped|Assertion .* failed")

results = harness.Results("e2e-startup")
cleanup_mounts = []   # bind mounts and fuse mounts to remove at the end
cleanup_pids = []     # (pid, mountpoint) of detached daemons we started


def daemon():
    return os.path.abspath(harness.daemon_path())


def run(cmd, base, timeout=TIMEOUT, env=None):
    """Runs cmd with stdout/stderr in files (a detached child may keep them
    open); returns (rc or None on hang, stderr text)."""
    cwd = os.path.join(base, "cwd")
    os.makedirs(cwd, exist_ok=True)
    errp = os.path.join(base, "stderr")
    with open(errp, "wb") as err, open(os.path.join(base, "stdout"), "wb") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd, env=env)
        try:
            rc = p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = None
    with open(errp, errors="replace") as f:
        text = f.read()
    return rc, text


def cores(base):
    cwd = os.path.join(base, "cwd")
    return [n for n in os.listdir(cwd) if n.startswith("core")] if os.path.isdir(cwd) else []


def unmount_if_mounted(mnt):
    if harness.is_mounted(mnt):
        subprocess.run(["fusermount3", "-uz", mnt], check=False)
        return True
    return False


def expect_failure(name, cmd, base, mnt, mentions):
    """mentions: list of alternatives; each alternative is a list of strings
    that must all appear in stderr (case-insensitive)."""
    rc, err = run(cmd, base)
    one = err.strip().replace("\n", " | ")
    if VERBOSE:
        print("%s: exit %s: %s" % (name, rc, one))
    results.check(rc is not None, "%s: did not exit within %ds (hang)" % (name, TIMEOUT))
    if rc is None:
        unmount_if_mounted(mnt)
        return
    results.check(rc > 0, "%s: exit status %d, want a failure (>0, not a signal); stderr: %s" % (name, rc, one))
    results.check(not SANITIZER.search(err), "%s: crash or sanitizer report on stderr: %s" % (name, one))
    results.check(not cores(base), "%s: core file left: %s" % (name, cores(base)))
    results.check(not unmount_if_mounted(mnt), "%s: something was mounted on %s" % (name, mnt))
    low = err.lower()
    ok = any(all(s.lower() in low for s in alt) for alt in mentions)
    results.check(ok, "%s: stderr does not name the problem (want one of %r): %r" % (name, mentions, err.strip()))


def both_ways(name, args, base, mnt, mentions):
    """The failure must be reported in the foreground and when detaching."""
    expect_failure(name + " (-f)", [daemon(), "-f"] + args, base, mnt, mentions)
    expect_failure(name + " (detaching)", [daemon()] + args, base, mnt, mentions)


def control_mount(name, **kw):
    """The same setup without the fault mounts and unmounts cleanly."""
    try:
        with harness.Fratier(**kw) as fr:
            with open(fr.path("control"), "w") as f:
                f.write(name)
            results.check(os.listdir(fr.mnt) == ["control"], "%s: control mount unusable" % name)
    except Exception as e:
        results.check(False, "%s: control mount failed: %s" % (name, e))


def sqlite(db, sql):
    return subprocess.run(["sqlite3", db, sql], check=True, capture_output=True, text=True).stdout.strip()


# ---------------------------------------------------------------------------

CONFIG = """[fratier]
data_dir = {data}
log_level = info

[tier hot]
role = hot
path = {hot}
"""


def config_cases(top):
    base = os.path.join(top, "config")
    data = os.path.join(base, "data")
    hot = os.path.join(data, "hot")
    os.makedirs(hot)
    mnt = os.path.join(base, "mnt")
    os.makedirs(mnt)
    good = CONFIG.format(data=data, hot=hot).splitlines()

    def variant(tag, lineno, text, replace=False):
        lines = list(good)
        if replace:
            lines[lineno - 1] = text
        else:
            lines.insert(lineno - 1, text)
        path = os.path.join(base, "%s.conf" % tag)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    cases = [
        ("syntax error", 3, "this line is neither a section nor a key", False),
        ("unterminated section", 5, "[tier hot", True),
        ("unknown key", 2, "colour = blue", False),
        ("bad size", 8, "capacity = 12Q", False),
        ("size overflow", 8, "reserve = 99999999999999999999T", False),
        ("bad role", 6, "role = lukewarm", True),
        ("unknown section", 4, "[tears]", False),
        ("background share 0", 2, "background_share = 0", False),
    ]
    for tag, line, text, replace in cases:
        cfg = variant(tag.replace(" ", "-"), line, text, replace)
        both_ways("config %s" % tag, ["-o", "config=" + cfg, mnt], base, mnt, [["%s:%d" % (cfg, line)]])

    for share in ("0", "101"):
        both_ways("option background_share=%s" % share, ["-o", "data=%s,background_share=%s" % (data, share), mnt],
                  base, mnt, [["background_share", "1..100"]])

    missing = os.path.join(base, "no-such.conf")
    both_ways("config file missing", ["-o", "config=" + missing, mnt], base, mnt, [[missing]])

    goodp = os.path.join(base, "good.conf")
    with open(goodp, "w") as f:
        f.write("\n".join(good) + "\n")
    control_mount("config", base=base, config=goodp)


def future_catalog(top):
    base = os.path.join(top, "future")
    data = os.path.join(base, "data")
    mnt = os.path.join(base, "mnt")
    with harness.Fratier(base=base, data=data) as fr:
        with open(fr.path("kept"), "w") as f:
            f.write("from the first mount")
    db = os.path.join(data, "hot", "catalog.db")
    version = sqlite(db, "PRAGMA user_version")
    sqlite(db, "PRAGMA user_version=999")
    both_ways("catalog from the future", ["-o", "data=" + data, mnt], base, mnt,
              [["schema"], ["version"], ["newer"]])
    results.check(sqlite(db, "PRAGMA user_version") == "999",
                  "catalog from the future: the refused catalog was modified (user_version now %s)"
                  % sqlite(db, "PRAGMA user_version"))
    sqlite(db, "PRAGMA user_version=%s" % version)
    try:
        with harness.Fratier(base=base, data=data) as fr:
            results.check(os.path.exists(fr.path("kept")), "catalog from the future: control lost the file")
    except Exception as e:
        results.check(False, "catalog from the future: control mount failed: %s" % e)


def missing_hot(top):
    base = os.path.join(top, "missinghot")
    os.makedirs(base)
    mnt = os.path.join(base, "mnt")
    os.makedirs(mnt)
    afile = os.path.join(base, "afile")
    with open(afile, "w") as f:
        f.write("a regular file, not a directory")
    hot = os.path.join(afile, "hot")
    cfg = os.path.join(base, "under-file.conf")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(data=base, hot=hot))
    both_ways("hot tier under a regular file (config)", ["-o", "config=" + cfg, mnt], base, mnt, [[hot]])
    data = os.path.join(afile, "data")
    both_ways("data dir under a regular file", ["-o", "data=" + data, mnt], base, mnt, [[data]])
    gone = os.path.join(base, "no-such-hot")
    cfg2 = os.path.join(base, "missing.conf")
    with open(cfg2, "w") as f:
        f.write(CONFIG.format(data=base, hot=gone))
    both_ways("hot tier missing (config)", ["-o", "config=" + cfg2, mnt], base, mnt, [[gone]])


def readonly_hot(top):
    base = os.path.join(top, "rohot")
    mnt = os.path.join(base, "mnt")
    used = os.path.join(base, "used")
    with harness.Fratier(base=base, data=used):
        pass
    fresh = os.path.join(base, "fresh")
    os.makedirs(os.path.join(fresh, "hot"))
    for data in (used, fresh):
        hot = os.path.join(data, "hot")
        r1 = subprocess.run(["mount", "--bind", hot, hot], capture_output=True, text=True)
        if r1.returncode != 0:
            results.check(False, "read-only hot tier: bind mount failed: %s" % r1.stderr.strip())
            return
        cleanup_mounts.append(hot)
        r2 = subprocess.run(["mount", "-o", "remount,ro,bind", hot], capture_output=True, text=True)
        results.check(r2.returncode == 0, "read-only hot tier: remount ro failed: %s" % r2.stderr.strip())
        tag = "read-only hot tier (%s)" % os.path.basename(data)
        both_ways(tag, ["-o", "data=" + data, mnt], base, mnt,
                  [[hot, "writ"], [hot, "read-only"]])
        subprocess.run(["umount", hot], check=False)
        cleanup_mounts.remove(hot)
        control_mount(tag, base=base, data=data)


def missing_mountpoint(top):
    base = os.path.join(top, "nomnt")
    data = os.path.join(base, "data")
    os.makedirs(base)
    nope = os.path.join(base, "no-such-mountpoint")
    both_ways("mountpoint missing", ["-o", "data=" + data, nope], base, nope, [[nope]])
    control_mount("mountpoint missing", base=base, data=data)


def two_daemons(top):
    base = os.path.join(top, "two")
    data = os.path.join(base, "data")
    mnt2 = os.path.join(base, "mnt2")
    os.makedirs(mnt2, exist_ok=True)
    hot = os.path.join(data, "hot")
    with harness.Fratier(base=base, data=data) as fr:
        with open(fr.path("first"), "wb") as f:
            f.write(b"written before the second daemon")
        both_ways("second daemon on the same data dir", ["-o", "data=" + data, mnt2], base, mnt2,
                  [[hot, "in use"], [hot, "lock"], [hot, "already"]])
        results.check(fr.proc.poll() is None, "two daemons: the first daemon died")
        try:
            with open(fr.path("first"), "rb") as f:
                results.check(f.read() == b"written before the second daemon", "two daemons: first mount lost data")
            with open(fr.path("after"), "wb") as f:
                f.write(b"still writable")
            results.check(sorted(os.listdir(fr.mnt)) == ["after", "first"],
                          "two daemons: first mount lists %r" % sorted(os.listdir(fr.mnt)))
        except OSError as e:
            results.check(False, "two daemons: first mount no longer works: %s" % e)


def stale_after_kill(top):
    base = os.path.join(top, "stale")
    data = os.path.join(base, "data")
    rnd = os.urandom(3 << 20)
    expect = {}
    fr = harness.Fratier(base=base, data=data).start()
    try:
        def durable(rel, content):
            p = fr.path(rel)
            fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o640)
            os.write(fd, content)
            os.fsync(fd)
            os.close(fd)
            expect[rel] = hashlib.sha256(content).hexdigest()

        def fsync_dir(rel):
            fd = os.open(fr.path(rel), os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(fd)
            os.close(fd)

        durable("fsynced", rnd)
        os.mkdir(fr.path("dir"))
        durable("dir/inner", rnd[:5000])
        fsync_dir("dir")
        durable("overwritten", rnd[:100000])
        fd = os.open(fr.path("overwritten"), os.O_WRONLY)
        os.pwrite(fd, b"NEW" * 1000, 50000)
        os.fdatasync(fd)
        os.close(fd)
        expect["overwritten"] = hashlib.sha256(rnd[:50000] + b"NEW" * 1000 + rnd[53000:100000]).hexdigest()
        durable("to-rename", b"renamed content")
        os.rename(fr.path("to-rename"), fr.path("renamed"))
        expect["renamed"] = expect.pop("to-rename")
        durable("to-unlink", b"x")
        os.unlink(fr.path("to-unlink"))
        del expect["to-unlink"]
        fsync_dir(".")
        held = os.open(fr.path("held-open"), os.O_CREAT | os.O_RDWR, 0o600)
        os.write(held, b"open while the daemon dies")
        os.fsync(held)
        expect["held-open"] = hashlib.sha256(b"open while the daemon dies").hexdigest()

        fr.proc.send_signal(signal.SIGKILL)
        fr.proc.wait()
        fr.proc = None
        try:
            os.pread(held, 10, 0)
            results.check(False, "stale mount: read through a dead daemon succeeded")
        except OSError:
            pass
        os.close(held)
        results.check(harness.is_mounted(fr.mnt), "stale mount: mount vanished without fusermount3 -uz")

        # Restarting over the stale mount: either it copes or it says why, quickly.
        errp = os.path.join(base, "stale-restart.err")
        with open(errp, "wb") as ef:
            p = subprocess.Popen([daemon(), "-f", "-o", "data=" + data, fr.mnt], stdout=ef, stderr=ef,
                                 stdin=subprocess.DEVNULL)
        try:
            rc = p.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            rc = None
        with open(errp, errors="replace") as f:
            err = f.read()
        if VERBOSE:
            print("restart over a stale mount: exit %s: %s" % (rc, err.strip()))
        if rc is None:
            # still serving: it must have mounted on top of the stale mount
            results.check(mount_count(fr.mnt) == 2, "stale mount: restart neither mounted nor exited")
            subprocess.run(["fusermount3", "-u", fr.mnt], check=False)
            try:
                p.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        else:
            results.check(rc > 0 and not SANITIZER.search(err),
                          "stale mount: restart over it exited %s: %s" % (rc, err.strip()))
            results.check(fr.mnt in err, "stale mount: restart error does not name %s: %r" % (fr.mnt, err.strip()))
        subprocess.run(["fusermount3", "-uz", fr.mnt], check=False, stderr=subprocess.DEVNULL)
        results.check(not harness.is_mounted(fr.mnt), "stale mount: still mounted after fusermount3 -uz")

        fr.start()
        got = {}
        for dirpath, _, files in os.walk(fr.mnt):
            for n in files:
                p = os.path.join(dirpath, n)
                with open(p, "rb") as f:
                    got[os.path.relpath(p, fr.mnt)] = hashlib.sha256(f.read()).hexdigest()
        for rel in sorted(set(got) | set(expect)):
            results.check(got.get(rel) == expect.get(rel),
                          "after SIGKILL: %s: want %s, got %s" % (rel, expect.get(rel, "(absent)"), got.get(rel, "(absent)")))
        results.check(oct(os.stat(fr.path("fsynced")).st_mode & 0o7777) == "0o640",
                      "after SIGKILL: mode of fsynced file lost")
        with open(fr.path("new-after-restart"), "wb") as f:
            f.write(b"ok")
        fr.stop()
    except Exception as e:
        results.check(False, "stale mount: %s" % e)
        fr.kill(check=False)
        sys.stderr.write(fr.log_text())


def mount_count(path):
    with open("/proc/self/mountinfo") as f:
        return sum(1 for line in f if line.split()[4] == path)


def find_daemon_pids(mnt):
    exe = os.path.realpath(daemon())
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.path.realpath("/proc/%s/exe" % d) != exe:
                continue
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if os.fsencode(mnt) in argv:
            pids.append(int(d))
    return pids


def wait_gone(pids, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if os.path.exists("/proc/%d" % p) and not is_zombie(p)]
        if not alive:
            return True
        time.sleep(0.05)
    return False


def is_zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def usable_now(name, mnt, as_nobody=False):
    """Right after the mount command returned: mounted and working, no waiting."""
    results.check(harness.is_mounted(mnt), "%s: not mounted when the command returned" % name)
    try:
        p = os.path.join(mnt, "probe")
        with open(p, "wb") as f:
            f.write(b"probe")
        with open(p, "rb") as f:
            results.check(f.read() == b"probe", "%s: read back differs" % name)
    except OSError as e:
        results.check(False, "%s: mount not usable right away: %s" % (name, e))
    if as_nobody:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                os.stat(os.path.join(mnt, "probe"))
                code = 0
            except BaseException:
                pass
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        results.check(os.waitstatus_to_exitcode(status) == 0,
                      "%s: another user cannot reach the mount (allow_other not applied)" % name)


def helper_mount_checks(name, data, mnt, cmd, env):
    """Mounts with cmd (a mount(8) or mount.fuse3 call), checks, unmounts."""
    cleanup_mounts.append(mnt)
    rc, err = run(cmd, os.path.dirname(mnt), env=env)
    results.check(rc == 0, "%s: exit %s: %s" % (name, rc, err.strip()))
    if rc != 0:
        return
    usable_now(name, mnt, as_nobody=True)
    fstype = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == mnt:
                fstype = fields[fields.index("-") + 1]
    results.check(fstype == "fuse.fratierfs", "%s: filesystem type %r" % (name, fstype))
    pids = find_daemon_pids(mnt)
    cleanup_pids.extend((p, mnt) for p in pids)
    results.check(len(pids) == 1, "%s: %d daemon processes for the mount" % (name, len(pids)))
    r = subprocess.run(["umount", mnt], capture_output=True, text=True)
    results.check(r.returncode == 0, "%s: umount: %s" % (name, r.stderr.strip()))
    cleanup_mounts.remove(mnt)
    results.check(wait_gone(pids), "%s: daemon still running %ds after umount" % (name, TIMEOUT))


def mount_helper(top):
    """fstab style: type fuse.fratierfs, source = data dir.

    mount(8) runs /sbin/mount.fuse3 with PATH reset to the standard one, and
    mount.fuse3 runs "fratierfs DATA MNT -o OPTS" through that PATH.  So
    mount.fuse3 is called directly with our PATH (the exact call mount(8)
    makes), and mount(8) itself runs in a private mount namespace in which
    our binary is bind-mounted into /usr/local/sbin."""
    base = os.path.join(top, "fstab")
    data = os.path.join(base, "data")
    bindir = os.path.join(base, "bin")
    os.makedirs(bindir)
    os.symlink(daemon(), os.path.join(bindir, "fratierfs"))
    env = dict(os.environ, PATH=bindir + ":" + os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"))
    mnt = os.path.join(base, "mnt-helper")
    os.makedirs(mnt)
    helper_mount_checks("mount.fuse3 DATA MNT -o rw,allow_other -t fuse.fratierfs", data, mnt,
                        ["mount.fuse3", data, mnt, "-o", "rw,allow_other", "-t", "fuse.fratierfs"], env)
    if shutil.which("unshare") is None:
        results.check(False, "mount -t fuse.fratierfs: unshare(1) missing, not tested")
        return
    mnt = os.path.join(base, "mnt-mount")
    os.makedirs(mnt)
    r = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable, os.path.abspath(__file__),
                        "--in-namespace", data, mnt, bindir], capture_output=True, text=True, timeout=120)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    m = re.search(r"e2e-startup-ns: (\d+) passed, (\d+) failed", r.stdout)
    if not m:
        results.check(False, "mount -t fuse.fratierfs: namespace run gave no result (exit %d)" % r.returncode)
        return
    results.passed += int(m.group(1))
    results.failed += int(m.group(2))


def in_namespace(data, mnt, bindir):
    """Runs inside a private mount namespace (see mount_helper)."""
    global results
    results = harness.Results("e2e-startup-ns")
    try:
        subprocess.run(["mount", "--bind", bindir, "/usr/local/sbin"], check=True)
        helper_mount_checks("mount -t fuse.fratierfs DATA MNT -o allow_other", data, mnt,
                            ["mount", "-t", "fuse.fratierfs", data, mnt, "-o", "allow_other"], None)
    finally:
        for m in cleanup_mounts:
            subprocess.run(["fusermount3", "-uz", m], check=False, stderr=subprocess.DEVNULL)
        for p, m in cleanup_pids:
            if p in find_daemon_pids(m):
                os.kill(p, signal.SIGKILL)
    results.finish()


def detach(top):
    base = os.path.join(top, "detach")
    data = os.path.join(base, "data")
    mnt = os.path.join(base, "mnt")
    os.makedirs(mnt)
    cleanup_mounts.append(mnt)
    rc, err = run([daemon(), "-o", "data=" + data, mnt], base)
    results.check(rc == 0, "detaching start: exit %s: %s" % (rc, err.strip()))
    if rc != 0:
        return
    usable_now("detaching start", mnt)
    pids = find_daemon_pids(mnt)
    cleanup_pids.extend((p, mnt) for p in pids)
    results.check(len(pids) == 1, "detaching start: %d daemon processes" % len(pids))
    subprocess.run(["fusermount3", "-u", mnt], check=False)
    cleanup_mounts.remove(mnt)
    results.check(wait_gone(pids), "detached daemon still running %ds after fusermount3 -u" % TIMEOUT)


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--in-namespace":
        in_namespace(*sys.argv[2:])
    harness.require_fuse()
    for tool in ("sqlite3", "mount", "umount"):
        if shutil.which(tool) is None:
            print("SKIP: %s not installed" % tool)
            sys.exit(harness.SKIP)
    top = tempfile.mkdtemp(prefix="fratier-startup-", dir=os.environ.get("FRATIER_TMP"))
    os.chmod(top, 0o755)  # the allow_other check runs as another user
    try:
        for case in (config_cases, future_catalog, missing_hot, readonly_hot, missing_mountpoint,
                     two_daemons, stale_after_kill, mount_helper, detach):
            try:
                case(top)
            except Exception as e:
                traceback.print_exc()
                results.check(False, "%s: aborted: %r" % (case.__name__, e))
    finally:
        for m in reversed(cleanup_mounts):
            if harness.is_mounted(m):
                subprocess.run(["fusermount3", "-uz", m], check=False, stderr=subprocess.DEVNULL)
            else:
                subprocess.run(["umount", "-l", m], check=False, stderr=subprocess.DEVNULL)
        for p, m in cleanup_pids:
            if p in find_daemon_pids(m):  # still ours, not a reused pid
                os.kill(p, signal.SIGKILL)
        if not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(top, ignore_errors=True)
    results.finish()


if __name__ == "__main__":
    main()
