# SPDX-License-Identifier: GPL-2.0-or-later
"""Shared plumbing for the end-to-end tests: mount fratierfs for real through
/dev/fuse, unmount it, SIGKILL it, and report results.

Every test script is run by meson with FRATIERFS pointing at the daemon.  A
script exits 77 (meson's "skip") when FUSE or root is missing, never 1, and
never once a check has run (scripts/test.sh counts skips as failures in CI).

Deadlines are for hangs, never for speed: each is scaled() by
FRATIER_TIMEOUT_MULTIPLIER, which meson's test setup "sanitizer" sets along
with its own timeout multiplier (tests/meson.build).
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
TIMEOUT_MULTIPLIER = float(os.environ.get("FRATIER_TIMEOUT_MULTIPLIER", "1"))


def _terminated(signum, frame):
    # meson ends a test that ran out of time with SIGTERM; Python's default would exit without running the
    # finally blocks and context exits that unmount the daemons and tmpfs tiers and delete the data directories
    # (a crash test's hold gigabytes).
    raise SystemExit(128 + signum)


signal.signal(signal.SIGTERM, _terminated)


def scaled(seconds):
    """A deadline of seconds on a release build, stretched as meson stretches its timeouts."""
    return seconds * TIMEOUT_MULTIPLIER


def wait_for(pred, timeout=None):
    """pred()'s first true value, polled until timeout (seconds, already scaled; scaled(60) by default); else its last."""
    deadline = time.monotonic() + (timeout or scaled(60))
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    return pred()


def require_fuse():
    if os.geteuid() != 0 or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        print("SKIP: needs root and /dev/fuse")
        sys.exit(SKIP)
    if shutil.which("fusermount3") is None:
        print("SKIP: fusermount3 not installed")
        sys.exit(SKIP)


def daemon_path():
    path = os.environ.get("FRATIERFS")
    if not path:
        root = os.environ.get("FRATIER_BUILD_ROOT", "build")
        path = os.path.join(root, "fs", "fratierfs")
    return path


def tool_path(name):
    root = os.environ.get("FRATIER_BUILD_ROOT", "build")
    return os.path.join(root, "tools", name)


def stop_process(pid, timeout=10.0):
    """SIGSTOP pid and wait until every thread of it is stopped: kill() returns before the
    signal is delivered, and a loaded machine may let the process run on meanwhile."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + scaled(timeout)
    while True:
        states = []
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                    # The state follows the command name, which may hold spaces and parentheses.
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue
        if all(st in ("T", "t", "Z", "X") for st in states):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("process %d not stopped after SIGSTOP: thread states %s" % (pid, states))
        time.sleep(0.01)


def is_mounted(path):
    path = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            mnt = fields[4].encode().decode("unicode_escape")
            if mnt == path and fields[sep + 1].startswith("fuse"):
                return True
    return False


# Every daemon started by this test, for Results.check() to show the log of
# when a check fails: the log often goes with the test's temporary directory.
_daemons = []
# Per log file (mounts of one data directory share it): how far it was shown.
_log_shown = {}


class Fratier:
    """One fratierfs instance over a private data directory.

    Use as a context manager; the instance is unmounted (or killed) and its
    temporary directory removed on exit unless FRATIER_KEEP is set.
    """

    def __init__(self, base=None, options=(), config=None, data=None, policy=False):
        """policy: let the policy worker move files by itself.  Off unless a
        test is about it: its watermarks measure the host's disk, and a
        test's files must not move because that disk happens to be full."""
        self.own_base = base is None
        self.base = base or tempfile.mkdtemp(prefix="fratier-e2e-", dir=os.environ.get("FRATIER_TMP"))
        self.data = data or os.path.join(self.base, "data")
        self.mnt = os.path.join(self.base, "mnt")
        self.log = os.path.join(self.base, "daemon.log")
        self.options = list(options) + ([] if policy else ["policy=0"])
        self.config = config
        self.proc = None
        os.makedirs(self.mnt, exist_ok=True)
        _daemons.append(self)

    def command(self):
        opts = ["config=" + self.config] if self.config else ["data=" + self.data]
        opts += self.options
        return [daemon_path(), "-f", "-o", ",".join(opts), self.mnt]

    def start(self, timeout=20):
        timeout = scaled(timeout)
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, close_fds=True)
        logf.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if is_mounted(self.mnt):
                return self
            rc = self.proc.poll()
            if rc is not None:
                raise RuntimeError("fratierfs exited with %d before mounting:\n%s" % (rc, self.log_text()))
            time.sleep(0.01)
        self.kill(check=False)
        raise RuntimeError("fratierfs did not mount within %ds:\n%s" % (timeout, self.log_text()))

    def show_new_log(self):
        """What the daemon's log file gained since it was last shown, to stdout (at most the last 8000 characters)."""
        try:
            with open(self.log, errors="replace") as f:
                f.seek(_log_shown.get(self.log, 0))
                text = f.read()
                _log_shown[self.log] = f.tell()
        except OSError:
            return
        if text:
            print("daemon log (%s), since the last failure shown:\n%s" % (self.log, text[-8000:]), flush=True)

    def log_text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()[-8000:]
        except OSError:
            return ""

    def stop(self, timeout=60):
        """Clean unmount; raises if the daemon does not exit 0."""
        if self.proc is None:
            return
        subprocess.run(["fusermount3", "-u", self.mnt], check=False)
        try:
            rc = self.proc.wait(scaled(timeout))
        except subprocess.TimeoutExpired:
            self.kill(check=False)
            raise RuntimeError("fratierfs did not exit after unmount")
        self.proc = None
        if rc != 0:
            raise RuntimeError("fratierfs exited with %d:\n%s" % (rc, self.log_text()))

    def kill(self, check=True):
        """SIGKILL the daemon and clear the stale mount, as an operator would.

        A daemon that had already exited by itself (a sanitizer's abort, a
        crash) raises, with check: a crash test killing it anyway would
        never notice.  check=False is for cleaning up after a failure."""
        rc = None
        if self.proc is not None:
            try:
                self.proc.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
            rc = self.proc.wait()
            self.proc = None
        subprocess.run(["fusermount3", "-uz", self.mnt], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if check and rc is not None and rc != -signal.SIGKILL:
            raise RuntimeError("fratierfs had exited by itself (status %d) before it was killed:\n%s"
                               % (rc, self.log_text()))

    def fuse_connection(self):
        """This mount's /sys/fs/fuse/connections directory, found from
        mountinfo: a stat of the mount point would hang with the daemon."""
        path = os.path.join(os.path.realpath(os.path.dirname(self.mnt)), os.path.basename(self.mnt))
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                sep = fields.index("-")
                if fields[4].encode().decode("unicode_escape") == path and fields[sep + 1].startswith("fuse"):
                    minor = fields[2].split(":")[1]
                    return "/sys/fs/fuse/connections/" + minor
        return None

    def diagnose_hang(self):
        """For a test that found the file system hung: writes every daemon
        thread's stack to stderr, then aborts the FUSE connection so that
        every waiting process gets ENOTCONN and the test can end and report."""
        if self.proc is not None and shutil.which("gdb"):
            p = subprocess.run(["gdb", "-p", str(self.proc.pid), "-batch", "-ex", "thread apply all bt"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
            sys.stderr.write("fratierfs threads while hung:\n" + p.stdout + "\n")
        if not os.path.ismount("/sys/fs/fuse/connections"):
            subprocess.run(["mount", "-t", "fusectl", "fusectl", "/sys/fs/fuse/connections"], check=False)
        conn = self.fuse_connection()
        if conn and os.path.exists(conn):
            with open(os.path.join(conn, "abort"), "w") as f:
                f.write("1")
        elif self.proc is not None:
            self.proc.kill()  # without fusectl, closing /dev/fuse fails the waiters just as well

    def path(self, *parts):
        return os.path.join(self.mnt, *parts)

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.stop()
        else:
            self.kill(check=False)
            sys.stderr.write("daemon log:\n" + self.log_text() + "\n")
        if self.own_base and not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(self.base, ignore_errors=True)
        return False


class Results:
    """Counts checks and prints one summary line; exit status follows failures."""

    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0

    def check(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL: %s" % what, flush=True)
            for d in _daemons:
                d.show_new_log()
        return cond

    def finish(self):
        print("%s: %d passed, %d failed" % (self.name, self.passed, self.failed))
        sys.exit(1 if self.failed else 0)
