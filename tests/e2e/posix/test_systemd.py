# SPDX-License-Identifier: GPL-2.0-or-later
"""The shipped systemd unit (contrib/systemd/fratierfs@.service.in, as
configured into the build) run by a real systemd:

- `systemd-analyze verify` accepts the unit without a single warning;
- enabled, it starts with multi-user.target; Type=forking: when
  `systemctl start` returns, the mount is usable;
- `systemctl stop` (KillSignal=SIGTERM) unmounts cleanly, the daemon exits
  0 by itself, and what was fsynced is there at the next start;
- a daemon killed hard is restarted by Restart=on-failure: ExecStartPre
  clears the dead mount and ExecStart mounts again, every fsynced byte
  intact;
- without its config file (ConditionPathExists) the unit does not start.

PID 1 of this machine is not systemd (a test VM's init, or a container's),
so the test boots one of its own: /lib/systemd/systemd as PID 1 of private
PID, mount, network, UTS, IPC and cgroup namespaces (unshare), in a cgroup
of its own, and drives it with systemctl through nsenter.  That systemd must
not touch the host, so its namespace hides every unit, generator and config
of the host (tmpfs over /usr/lib/systemd/system, the generators and
/etc/systemd: no tmpfiles cleaning /tmp, no udev, no journald on the host's
/dev/log) and gives it a /dev of its own (the few device nodes it and the
daemon need, the console a pty the test reads), a read-only /sys and
/proc/sys, and no capability to load kernel modules or set the clock.  Its unit directory holds the host's target units (no .wants),
so the unit's dependencies (sysinit, basic, local-fs, network-online,
multi-user) are systemd's own, and the unit under test.  The unit is the
configured one with two paths changed: ExecStart runs this build's daemon,
and the config is looked for in the test's directory, not /etc/fratier.
Under the sanitizer builds a drop-in passes the sanitizers' options to the
daemon (systemd starts services with a clean environment).  The test reads
the mount through /proc/PID/root of that systemd, and stops it by its PID.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import harness

UNIT = os.path.join(os.environ.get("FRATIER_BUILD_ROOT", "build"), "contrib", "fratierfs@.service")
SYSTEMD = "/lib/systemd/systemd"
HOST_UNITS = "/usr/lib/systemd/system"
# Everything the host would have its systemd start or run: hidden by an empty tmpfs in the namespace.
HIDDEN = ("/etc/systemd", HOST_UNITS, "/usr/lib/systemd/system-generators",
          "/usr/local/lib/systemd", "/usr/lib/systemd/system-environment-generators")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty", "fuse")
WAIT = harness.scaled(60)
SANITIZER_ENV = ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", "MALLOC_PERTURB_")

# Runs in the new namespaces (as root), then becomes systemd.  $1: the test's
# directory holding units/ and console; $2: the hidden directories; $3: the
# device nodes bound from the host's /dev (nothing is created there); $4: systemd;
# $5: the pty that is systemd's console, read by the test.
INNER = r"""
set -eu
base=$1
mount -t tmpfs -o mode=0755 tmpfs /run
for d in $2; do
	if [ -d "$d" ]; then mount -t tmpfs -o mode=0755 tmpfs "$d"; fi
done
cp -a "$base/units/." /usr/lib/systemd/system/
printf '[Manager]\nDefaultStandardOutput=inherit\nDefaultStandardError=inherit\n' >/etc/systemd/system.conf
mkdir /run/hostdev
mount --rbind /dev /run/hostdev
mount -t tmpfs -o mode=0755,nosuid tmpfs /dev
for n in $3; do
	touch "/dev/$n"
	mount --bind "/run/hostdev/$n" "/dev/$n"
done
touch /dev/console
mount --bind "/run/hostdev/${5#/dev/}" /dev/console
umount -l /run/hostdev
rmdir /run/hostdev
mkdir /dev/pts /dev/shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts /dev/pts
ln -s pts/ptmx /dev/ptmx
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
ln -s /proc/self/fd /dev/fd
mount -o remount,bind,ro /sys
umount -R /sys/fs/cgroup 2>/dev/null || true
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
exec setpriv --bounding-set=-sys_module,-sys_time,-sys_boot,-sys_rawio \
	env -i container=fratier-test PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	"$4" --system --unit=fratier-test.target --log-target=console --log-level=info
"""

TEST_TARGET = """[Unit]
Description=what the test boots: nothing but systemd itself
"""


def parse_unit(text):
    """Section -> {key: [values]} (a key may repeat, like ExecStartPre)."""
    out, section = {}, None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = out.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        section.setdefault(key.strip(), []).append(value.strip())
    return out


def cgroup2_root():
    """Where the unified cgroup hierarchy is mounted (/sys/fs/cgroup, or .../unified on a hybrid host)."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[fields.index("-") + 1] == "cgroup2":
                return fields[4]
    return None


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


class PrivateSystemd:
    """systemd as PID 1 of private namespaces, with only the units given."""

    def __init__(self, base, units):
        self.base = base
        self.console = os.path.join(base, "console")
        self.pid = None
        self.proc = None
        self.reader = None
        self.cgroup = None
        os.makedirs(os.path.join(base, "units"))
        for name, text in units.items():
            path = os.path.join(base, "units", name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        open(self.console, "w").close()

    def start(self):
        root = cgroup2_root()
        if root is None:
            raise RuntimeError("no cgroup2 hierarchy mounted: systemd cannot run")
        self.cgroup = os.path.join(root, "fratier-systemd-test-%d" % os.getpid())
        os.mkdir(self.cgroup)
        outer = ('echo $$ > "$1/cgroup.procs" && exec unshare --pid --fork --kill-child --mount --net --uts '
                 '--ipc --cgroup --mount-proc --propagation private sh -c "$2" inner "$3" "$4" "$5" "$6" "$7"')
        # systemd wants a terminal for its console (a file makes it log nowhere): a pty, copied to a file.
        master, slave = os.openpty()
        self.proc = subprocess.Popen(["sh", "-c", outer, "outer", self.cgroup, INNER, self.base, " ".join(HIDDEN),
                                      " ".join(DEVICES), SYSTEMD, os.ttyname(slave)],
                                     stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
        os.close(slave)
        self.reader = threading.Thread(target=self.copy_console, args=(master,), daemon=True)
        self.reader.start()
        deadline = time.monotonic() + WAIT
        while self.pid is None:
            for c in children(self.proc.pid):
                if comm(c) == "systemd":
                    self.pid = c
            if self.proc.poll() is not None:
                raise RuntimeError("the namespace for systemd failed: %s" % self.console_text())
            if time.monotonic() > deadline:
                raise RuntimeError("systemd did not start in its namespace")
            time.sleep(0.05)
        state = ""
        while state not in ("running", "degraded"):
            state = self.systemctl("is-system-running").stdout.strip()
            if time.monotonic() > deadline:
                raise RuntimeError("systemd not running after %ds: %s\n%s" % (WAIT, state, self.console_text()))
            time.sleep(0.1)
        return state

    def systemctl(self, *args):
        return subprocess.run(["nsenter", "-t", str(self.pid), "-m", "-p", "--", "systemctl", "--no-pager"]
                              + list(args), capture_output=True, text=True, timeout=WAIT)

    def show(self, unit, *props):
        p = self.systemctl("show", unit, "-p", ",".join(props))
        return dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)

    def path(self, p):
        """p as this systemd's processes see it (its mounts included)."""
        return "/proc/%d/root%s" % (self.pid, p)

    def mounted(self, path):
        """fstype of the mount at path in systemd's namespace, or None."""
        with open("/proc/%d/mountinfo" % self.pid) as f:
            for line in f:
                fields = line.split()
                if re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4]) == path:
                    return fields[fields.index("-") + 1]
        return None

    def copy_console(self, master):
        with open(self.console, "ab", buffering=0) as out:
            while True:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every holder of the pty closed it
                    break
                if not chunk:
                    break
                out.write(chunk)
        os.close(master)

    def usable(self, path):
        """A FUSE mount at path (in systemd's namespace) that answers: not a dead one left by a killed daemon."""
        if not (self.mounted(path) or "").startswith("fuse"):
            return False
        try:
            os.statvfs(self.path(path))
        except OSError:
            return False
        return True

    def read(self, path):
        try:
            with open(self.path(path), "rb") as f:
                return f.read()
        except OSError as e:
            return e

    def console_text(self):
        try:
            with open(self.console, errors="replace") as f:
                return f.read()[-8000:]
        except OSError:
            return ""

    def stop(self):
        """SIGKILL to our PID 1 ends its namespaces: every process in them, every mount."""
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            try:
                self.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.reader is not None:
            self.reader.join(WAIT)
        if self.cgroup and os.path.isdir(self.cgroup):
            for d, _, _ in sorted(os.walk(self.cgroup), key=lambda x: -len(x[0])):
                for _ in range(100):
                    try:
                        os.rmdir(d)
                        break
                    except OSError:
                        time.sleep(0.05)  # its last processes are still being reaped


def target_units():
    """The host's target units (files only, none of their .wants): systemd's own dependencies of a service."""
    out = {}
    for name in os.listdir(HOST_UNITS):
        path = os.path.join(HOST_UNITS, name)
        if name.endswith(".target") and os.path.isfile(path) and not os.path.islink(path):
            with open(path) as f:
                out[name] = f.read()
    return out


def main():
    harness.require_fuse()
    res = harness.Results("e2e-systemd")
    for tool in ("systemd-analyze", "systemd-escape", "unshare", "nsenter"):
        if not res.check(shutil.which(tool) is not None, "%s not installed (scripts/install-deps.sh)" % tool):
            return res.finish()
    if not res.check(os.access(SYSTEMD, os.X_OK), "%s not installed (scripts/install-deps.sh installs systemd)" % SYSTEMD):
        return res.finish()
    if not os.path.exists(UNIT):
        res.check(False, f"{UNIT} was not generated by meson")
        return res.finish()
    with open(UNIT) as f:
        text = f.read()
    unit = parse_unit(text)
    svc = unit.get("Service", {})
    res.check(svc.get("Type") == ["forking"], "Type=forking (the daemon detaches when the mount is ready)")
    res.check(svc.get("Restart") == ["on-failure"], "Restart=on-failure")
    res.check(unit.get("Install", {}).get("WantedBy") == ["multi-user.target"], "WantedBy=multi-user.target")

    # No '-' in the path: systemd escapes it as \x2d in %i (see the unit's comment).
    base = tempfile.mkdtemp(prefix="fratiersystemd", dir=os.environ.get("FRATIER_TMP", "/tmp"))
    sd = None
    try:
        etc = os.path.join(base, "etc")
        data = os.path.join(base, "data")
        mnt = os.path.join(base, "u01", "fra")
        # A config names disks that must exist: the admin makes the hot tier directory.
        for d in (etc, os.path.join(data, "hot"), mnt, os.path.join(base, "u02", "fra")):
            os.makedirs(d)
        instance = subprocess.run(["systemd-escape", "--path", mnt], capture_output=True, text=True,
                                  check=True).stdout.strip()
        unconfigured = subprocess.run(["systemd-escape", "--path", os.path.join(base, "u02", "fra")],
                                      capture_output=True, text=True, check=True).stdout.strip()
        with open(os.path.join(etc, instance + ".conf"), "w") as f:
            f.write(f"[fratier]\ndata_dir = {data}\n\n[tier hot]\n")

        # The unit as installed, pointed at this build's daemon and this test's /etc/fratier.
        installed = [c for c in svc.get("ExecStart", []) if c.split()[0].endswith("/fratierfs")]
        res.check(len(installed) == 1, "one ExecStart running fratierfs")
        if len(installed) != 1:
            return res.finish()
        local = text.replace(installed[0].split()[0], os.path.abspath(harness.daemon_path()))
        local = local.replace("/etc/fratier/", etc + "/")
        verify_dir = os.path.join(base, "verify")
        os.makedirs(verify_dir)
        with open(os.path.join(verify_dir, "fratierfs@.service"), "w") as f:
            f.write(local)
        link = os.path.join(verify_dir, f"fratierfs@{instance}.service")
        os.symlink("fratierfs@.service", link)
        v = subprocess.run(["systemd-analyze", "verify", link], capture_output=True, text=True)
        res.check(v.returncode == 0 and not v.stderr.strip() and not v.stdout.strip(),
                  f"systemd-analyze verify: rc {v.returncode}, {v.stdout.strip()} {v.stderr.strip()}")

        units = target_units()
        units["fratier-test.target"] = TEST_TARGET
        units["fratierfs@.service"] = local
        env = ["Environment=%s=%s" % (k, os.environ[k]) for k in SANITIZER_ENV if k in os.environ]
        if env:
            units["fratierfs@.service.d/sanitizers.conf"] = "[Service]\n" + "\n".join(env) + "\n"
        sd = PrivateSystemd(base, units)
        print("systemd in its namespace: %s" % sd.start(), flush=True)
        name = f"fratierfs@{instance}.service"

        def state():
            return sd.show(name, "ActiveState", "SubState", "Result", "MainPID", "ExecMainCode",
                           "ExecMainStatus", "NRestarts", "ConditionResult")

        # Enabled, it comes up with multi-user.target; started means mounted.
        p = sd.systemctl("enable", name)
        res.check(p.returncode == 0, "systemctl enable: %s" % p.stderr)
        p = sd.systemctl("start", "multi-user.target")
        s = state()
        res.check(p.returncode == 0 and s.get("ActiveState") == "active",
                  "multi-user.target starts the enabled unit: %s %r" % (p.stderr, s))
        res.check(sd.usable(mnt), "mounted and usable when systemctl start returned: %r" % sd.mounted(mnt))
        payload = os.urandom(3 << 20)
        name_in = os.path.join(mnt, "archivelog", "o1_mf_1_77_systemd_.arc")
        os.makedirs(os.path.dirname(sd.path(name_in)))
        fd = os.open(sd.path(name_in), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
        os.write(fd, payload)
        os.fsync(fd)
        os.close(fd)

        # systemctl stop: SIGTERM, the daemon unmounts and exits 0 by itself.
        first_pid = s.get("MainPID")
        p = sd.systemctl("stop", name)
        s = state()
        res.check(p.returncode == 0 and s.get("ActiveState") == "inactive" and s.get("Result") == "success"
                  and s.get("ExecMainCode") == "1" and s.get("ExecMainStatus") == "0",
                  "systemctl stop: the daemon exits 0 (CLD_EXITED, status 0): %s %r" % (p.stderr, s))
        res.check(sd.mounted(mnt) is None, "unmounted after systemctl stop: %r" % sd.mounted(mnt))

        p = sd.systemctl("start", name)
        s = state()
        res.check(p.returncode == 0 and s.get("ActiveState") == "active" and sd.usable(mnt),
                  "systemctl start again: %s %r" % (p.stderr, s))
        got = sd.read(name_in)
        res.check(got == payload, "after a stop and start: file differs (%r)" % (got if isinstance(got, OSError) else len(got)))

        # Killed hard: Restart=on-failure clears the dead mount (ExecStartPre) and mounts again.
        killed_pid = s.get("MainPID")
        p = sd.systemctl("kill", "--signal=SIGKILL", name)
        res.check(p.returncode == 0, "systemctl kill: %s" % p.stderr)
        s = harness.wait_for(lambda: (lambda s_: s_ if s_.get("NRestarts") == "1" and s_.get("ActiveState") == "active"
                              else None)(state()))
        res.check(bool(s) and s.get("MainPID") not in (killed_pid, "0", first_pid),
                  "restarted after SIGKILL: %r" % (s or state()))
        res.check(sd.usable(mnt), "mounted again after the restart, not the dead mount: %r" % sd.mounted(mnt))
        got = sd.read(name_in)
        res.check(got == payload, "after SIGKILL and the restart: file differs (%r)"
                  % (got if isinstance(got, OSError) else len(got)))
        p = sd.systemctl("stop", name)
        s = state()
        res.check(p.returncode == 0 and s.get("Result") == "success" and s.get("ExecMainStatus") == "0"
                  and s.get("ExecMainCode") == "1" and sd.mounted(mnt) is None,
                  "final stop: %s %r" % (p.stderr, s))

        # No config, no start (ConditionPathExists): nothing mounted.
        other = f"fratierfs@{unconfigured}.service"
        p = sd.systemctl("start", other)
        s = sd.show(other, "ActiveState", "ConditionResult")
        res.check(p.returncode == 0 and s == {"ActiveState": "inactive", "ConditionResult": "no"}
                  and sd.mounted(os.path.join(base, "u02", "fra")) is None,
                  "a unit without its config is skipped: %s %r" % (p.stderr, s))
    except Exception:
        res.check(False, "the test broke off")
        raise
    finally:
        if sd is not None:
            sd.stop()
            if res.failed:
                sys.stderr.write("systemd's console:\n" + sd.console_text() + "\n")
        shutil.rmtree(base, ignore_errors=True)
    return res.finish()


if __name__ == "__main__":
    sys.exit(main())
