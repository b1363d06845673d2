# SPDX-License-Identifier: GPL-2.0-or-later
"""What the benchmarks in bench/ share: running fratierfs (mount, unmount,
its CPU time), killing a process group, the page cache, the build type of
a binary, and formatting.

Imported by bench-archivelog.py, bench-dedup.py and bench-seal.py, which
find it next to themselves.
"""

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

MIB = 1 << 20
MB = 1000 * 1000
MOUNT_TIMEOUT = 30.0
UNMOUNT_TIMEOUT = 30.0


class BenchError(Exception):
    pass


def run(name, bench):
    """Runs bench.setup() and bench.run(), always bench.cleanup(); returns
    the exit status: 0, 1 on BenchError (said on stderr), 130 if interrupted."""
    try:
        bench.setup()
        bench.run()
    except BenchError as e:
        print(f'{name}: {e}', file=sys.stderr)
        return 1
    except (KeyboardInterrupt, Interrupted):
        print(f'\n{name}: interrupted, cleaning up', file=sys.stderr)
        return 130
    finally:
        bench.cleanup()
    return 0


class Interrupted(Exception):
    """SIGTERM/SIGHUP, turned into an exception so cleanup runs as for Ctrl-C."""


def sh(argv):
    """Runs a short command; returns its stdout (stripped), '' if it cannot run."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return ''
    return p.stdout.strip()


def med(values):
    return statistics.median(values) if values else None


def fmt(value, digits=1):
    return '-' if value is None else f'{value:.{digits}f}'


def tail(path, lines=20):
    try:
        with open(path, errors='replace') as f:
            return ''.join(f.readlines()[-lines:])
    except (OSError, TypeError):
        return ''


def is_mounted(path):
    """True if path is a mount point, even of a FUSE daemon that died (ENOTCONN)."""
    with open('/proc/self/mounts') as f:
        for line in f:
            point = line.split()[1]
            # /proc/mounts escapes space, tab, newline and backslash as \ooo.
            point = re.sub(r'\\([0-7]{3})', lambda m: chr(int(m[1], 8)), point)
            if point == path:
                return True
    return False


def kill_group(proc):
    """Kills proc's process group and waits until every member is gone."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    # A member in the middle of an fsync dies only when it returns.
    while True:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def build_type(build):
    """buildtype and sanitizers of a meson build directory, with a warning if not representative."""
    try:
        with open(os.path.join(build, 'meson-info', 'intro-buildoptions.json')) as f:
            opts = {o['name']: o['value'] for o in json.load(f)}
    except (OSError, ValueError, KeyError):
        return 'build options unknown'
    text = f'buildtype={opts.get("buildtype")}, b_sanitize={opts.get("b_sanitize")}'
    if opts.get('b_sanitize') not in (None, 'none') or opts.get('buildtype') == 'debug':
        text += ' -- WARNING: not representative, use an optimized build without sanitizers'
    return text


def build_of(binary):
    """The meson build directory a binary at BUILD/fs/NAME or BUILD/tools/X/NAME came from."""
    d = os.path.dirname(os.path.abspath(binary))
    while d != '/' and not os.path.isdir(os.path.join(d, 'meson-info')):
        d = os.path.dirname(d)
    return d


class PageCache:
    """Drops the page cache before a measurement; says once if it cannot."""

    def __init__(self):
        self.problem = None

    def drop(self):
        os.sync()
        if self.problem is not None:
            return
        try:
            with open('/proc/sys/vm/drop_caches', 'w') as f:
                f.write('3\n')
        except OSError as e:
            self.problem = f'cannot drop the page cache ({e.strerror}): figures come partly from memory'
            print(f'warning: {self.problem}', file=sys.stderr)


class Daemon:
    """One fratierfs in the foreground, in its own session (Ctrl-C reaches
    the bench, which then unmounts in order), logging to log."""

    def __init__(self, fratierfs, opts, mnt, log):
        self.fratierfs = fratierfs
        self.opts = opts
        self.mnt = mnt
        self.log = log
        self.proc = None

    def start(self):
        if not os.access(self.fratierfs, os.X_OK):
            raise BenchError(f'{self.fratierfs} not found: build it or point the bench at a build')
        with open(self.log, 'ab') as log:
            self.proc = subprocess.Popen([self.fratierfs, '-f', '-o', self.opts, self.mnt],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         start_new_session=True)
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not is_mounted(self.mnt):
            self.check()
            if time.monotonic() > deadline:
                raise BenchError(f'fratierfs did not mount within {MOUNT_TIMEOUT:.0f}s:\n{tail(self.log)}')
            time.sleep(0.05)
        return self

    def check(self):
        if self.proc is not None and self.proc.poll() is not None:
            rc, self.proc = self.proc.returncode, None
            raise BenchError(f'fratierfs exited with {rc}:\n{tail(self.log)}')

    def cpu_seconds(self):
        """utime + stime of the daemon, all threads."""
        if self.proc is None:
            return 0.0
        with open(f'/proc/{self.proc.pid}/stat') as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')

    def stop(self):
        """Unmounts (lazily if busy) and waits for the daemon, killing it after UNMOUNT_TIMEOUT."""
        if self.proc is None:
            return
        if is_mounted(self.mnt):
            r = subprocess.run(['fusermount3', '-u', self.mnt], capture_output=True, text=True)
            if r.returncode != 0:
                print(f'warning: fusermount3 -u: {r.stderr.strip()}; detaching lazily', file=sys.stderr)
                subprocess.run(['fusermount3', '-uz', self.mnt], capture_output=True)
        try:
            rc = self.proc.wait(timeout=UNMOUNT_TIMEOUT)
        except subprocess.TimeoutExpired:
            print('warning: fratierfs still running after unmount; killing it', file=sys.stderr)
            self.proc.kill()
            rc = self.proc.wait()
        if rc != 0:
            print(f'warning: fratierfs exited with {rc}:\n{tail(self.log)}', file=sys.stderr)
        self.proc = None
