#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Restore of the backup pieces, builds alternated over one store: where a
restore's time goes, per build, in one session.

oragen's backup pieces are written and sealed once (by the first build);
then each round mounts every build in turn (the order reversed every other
round) over that same data directory and restores the pieces twice from a
cold cache (benchlib.PageCache.cold()): the first restore of the mount (it
faults in the daemon's buffers) and the one right after (steady state).
With --tier capacity the pieces are migrated to tier 1 first and restored
from there.  Per restore it prints MB/s, the daemon's CPU seconds per GB
and the reader's (this script, which copies out of the page cache as any
reader does), the share of the machine idle meanwhile (/proc/stat: on two
cores, whether the restore kept both busy or waited), the daemon's minor
faults and RSS, the restore pipeline's requests (readahead hits, waits on
a block being filled, misses read directly) and, per thread name, the
seconds per GB run and waited for a core (schedstat: waiting while
runnable is the neighbours' or the daemon's own threads crowding two
cores) and how often each was switched in.

Cheaper than bench-tier.py (no NFS, no native or passthrough read: those
are bench-tier's and bench-dedup's): tens of seconds a round at the medium
scale, so builds can be alternated many times.  Not a test: nothing is
asserted.  See bench/README.md ("Restore, phase 5").
"""

import argparse
import collections
import json
import mmap
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

STATE_XATTR = 'trusted.fratier.state'
SEAL_WAIT = 900.0
# oragen datafile size (4 datafiles, one backup piece each), as bench-tier.py.
SCALES = {'small': '32M', 'medium': '128M', 'large': '512M'}
CONFIG = """[fratier]
data_dir = {data}

[tier hot]
path = {data}/hot

[tier capacity]
path = {data}/capacity
"""


def cpu_idle():
    """(idle + iowait, all) jiffies of the machine so far."""
    with open('/proc/stat') as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return v[3] + v[4], sum(v)


def thread_stats(pid):
    """{tid: (name, ns run, ns waited runnable, times switched in)} of pid's threads."""
    out = {}
    for tid in os.listdir(f'/proc/{pid}/task'):
        try:
            with open(f'/proc/{pid}/task/{tid}/comm') as f:
                name = f.read().strip()
            with open(f'/proc/{pid}/task/{tid}/schedstat') as f:
                run, wait, n = (int(x) for x in f.read().split())
        except OSError:
            continue  # ended meanwhile
        out[tid] = (name, run, wait, n)
    return out


class Bench:
    def __init__(self, args):
        self.args = args
        self.builds = []
        for b in args.build:
            name, _, path = b.partition('=')
            if not path:
                raise SystemExit(f'--build {b}: NAME=BUILDDIR')
            self.builds.append((name, os.path.abspath(path)))
        self.work = None
        self.daemon = None
        self.cache = bl.PageCache()
        self.buf = bytearray(bl.MIB)

    def tool(self, build, *path):
        p = os.path.join(build, *path)
        if not os.access(p, os.X_OK):
            raise bl.BenchError(f'{p} not found: build the project (or give --build)')
        return p

    def setup(self):
        for _, build in self.builds:
            self.tool(build, 'fs', 'fratierfs')
        first = self.builds[0][1]
        args = self.args
        base = os.path.abspath(self.args.workdir)
        os.makedirs(base, exist_ok=True)
        self.work = tempfile.mkdtemp(prefix='fratier-bench-restore.', dir=base)
        self.cache.own(self.work)
        self.src, self.data, self.mnt = (os.path.join(self.work, n) for n in ('fra', 'data', 'mnt'))
        for d in (os.path.join(self.data, 'hot'), os.path.join(self.data, 'capacity'), self.mnt):
            os.makedirs(d)
        self.config = os.path.join(self.work, 'fratier.conf')
        with open(self.config, 'w') as f:
            f.write(CONFIG.format(data=self.data) if args.zstd_level is None
                    else bl.zstd_level_config(self.data, args.zstd_level))
        p = subprocess.run([self.tool(first, 'tools', 'oragen', 'oragen'), '--out', self.src, '--days', '1',
                            '--seed', str(self.args.seed), '--datafiles', '4',
                            '--datafile-size', SCALES[self.args.scale], '--filesperset', '1',
                            '--archivelogs-per-day', '1', '--archivelog-size', '8M', '--image-copies', '0',
                            '--no-zstd', '--quiet'], capture_output=True, text=True)
        if p.returncode != 0:
            raise bl.BenchError(f'oragen failed: {p.stderr.strip()}')
        self.pieces = sorted(os.path.relpath(os.path.join(d, n), self.src)
                             for d, _, names in os.walk(self.src) for n in names if n.endswith('.bkp'))
        if not self.pieces:
            raise bl.BenchError('oragen wrote no backup pieces')
        self.mount(first)
        for rel in self.pieces:
            dst = os.path.join(self.mnt, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(os.path.join(self.src, rel), dst)
        deadline = time.monotonic() + SEAL_WAIT
        for rel in self.pieces:
            while os.getxattr(os.path.join(self.mnt, rel), STATE_XATTR).split()[0] != b'sealed':
                self.daemon.check()
                if time.monotonic() > deadline:
                    raise bl.BenchError(f'{rel} not sealed after {SEAL_WAIT:.0f}s')
                time.sleep(0.05)
        if self.args.tier == 'capacity':
            paths = [os.path.join(self.mnt, r) for r in self.pieces]
            p = subprocess.run([self.tool(first, 'tools', 'tierctl', 'tierctl'), '-m', self.mnt, 'migrate',
                                '--to', '1', '--json'] + paths, capture_output=True, text=True)
            if p.returncode != 0:
                raise bl.BenchError(f'tierctl migrate: {p.stderr.strip()}')
        self.unmount()

    def cleanup(self):
        if self.daemon is not None:
            self.daemon.stop()
            self.daemon = None
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)

    def mount(self, build):
        opts = (f'config={self.config},seal_delay=0,gc_interval=3600,policy=0'
                + (',' + self.args.mount_opts if self.args.mount_opts else ''))
        self.daemon = bl.Daemon(self.tool(build, 'fs', 'fratierfs'), opts, self.mnt,
                                os.path.join(self.work, 'fratierfs.log')).start()

    def unmount(self):
        self.daemon.stop()
        self.daemon = None

    def pipeline(self, build):
        """The restore pipeline's counters since the mount (tierctl status)."""
        p = subprocess.run([self.tool(build, 'tools', 'tierctl', 'tierctl'), '-m', self.mnt, 'status', '--json'],
                           capture_output=True, text=True)
        keys = ('readahead_hits', 'readahead_waits', 'readahead_misses')
        found = {}

        def walk(o):
            if isinstance(o, dict):
                for k, v in o.items():
                    if k in keys:
                        found[k] = int(v)
                    else:
                        walk(v)
            elif isinstance(o, list):
                for v in o:
                    walk(v)
        try:
            walk(json.loads(p.stdout))
        except ValueError:
            pass
        return [found.get(k, 0) for k in keys]

    def rss_kib(self):
        with open(f'/proc/{self.daemon.proc.pid}/status') as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1])
        return 0

    def read(self, paths):
        if not self.args.direct:
            return bl.read_files(paths, self.buf)
        return bl.read_files(paths, mmap.mmap(-1, bl.MIB), os.O_DIRECT)

    def restore(self, build):
        d = self.daemon
        self.cache.cold([self.data])
        load = os.getloadavg()[0]
        ra0, flt0, cpu0 = self.pipeline(build), d.minor_faults(), d.cpu_seconds()
        th0, idle0, me0 = thread_stats(d.proc.pid), cpu_idle(), os.times()
        t0 = time.monotonic()
        n = self.read([os.path.join(self.mnt, r) for r in self.pieces])
        t = time.monotonic() - t0
        me1, idle1, th1 = os.times(), cpu_idle(), thread_stats(d.proc.pid)
        cpu, flt, ra = d.cpu_seconds() - cpu0, d.minor_faults() - flt0, self.pipeline(build)
        gb = n / 1e9
        threads = collections.defaultdict(lambda: [0, 0, 0])
        for tid, (name, run, wait, k) in th1.items():
            _, run0, wait0, k0 = th0.get(tid, (name, 0, 0, 0))
            a = threads[name]
            a[0] += run - run0
            a[1] += wait - wait0
            a[2] += k - k0
        return {
            'mbps': n / bl.MB / t,
            'cpu': cpu / gb,
            'reader': ((me1.user - me0.user) + (me1.system - me0.system)) / gb,
            'idle': (idle1[0] - idle0[0]) / max(1, idle1[1] - idle0[1]),
            'load': load,
            'faults': flt,
            'rss': self.rss_kib() / 1024,
            'ra': [b - a for a, b in zip(ra0, ra)],
            'threads': {k: (v[0] / 1e9 / gb, v[1] / 1e9 / gb, v[2]) for k, v in sorted(threads.items())},
        }

    def run(self):
        a = self.args
        size = sum(os.path.getsize(os.path.join(self.src, r)) for r in self.pieces)
        print(f'  machine   {bl.sh(["uname", "-r"])}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}')
        print(f'  data      oragen seed {a.seed}, scale {a.scale}: {len(self.pieces)} backup pieces '
              f'({size / bl.MB:.0f} MB) on the {a.tier} tier; reader: 1 MiB read()s'
              + (', O_DIRECT' if a.direct else '')
              + (f'; written at zstd level {a.zstd_level}' if a.zstd_level is not None else ''))
        for name, build in self.builds:
            print(f'  {name:<9} {build} ({bl.build_type(build)})')
        print(f'\n  {"build":<9} {"rd":>2} {"restore":<7} {"MB/s":>7} {"CPU/GB":>6} {"rd/GB":>6} {"idle":>5} '
              f'{"load":>5} {"faults":>6} {"RSS":>5} {"hits":>5} {"waits":>5} {"miss":>4}  '
              f'per thread: run s/GB, waited s/GB, switches in')
        rows = collections.defaultdict(list)
        for rnd in range(a.rounds):
            order = self.builds if rnd % 2 == 0 else self.builds[::-1]
            for name, build in order:
                self.mount(build)
                try:
                    for k, what in enumerate(('first', 'second')):
                        r = self.restore(build)
                        rows[(name, what)].append(r)
                        th = '  '.join(f'{t} {v[0]:.2f}/{v[1]:.2f}/{v[2]}' for t, v in r['threads'].items())
                        print(f'  {name:<9} {rnd + 1:>2} {what:<7} {r["mbps"]:>7.1f} {r["cpu"]:>6.2f} '
                              f'{r["reader"]:>6.2f} {r["idle"]:>5.2f} {r["load"]:>5.1f} {r["faults"]:>6} '
                              f'{r["rss"]:>5.0f} {r["ra"][0]:>5} {r["ra"][1]:>5} {r["ra"][2]:>4}  {th}', flush=True)
                finally:
                    self.unmount()
        print('\n  medians    restore    MB/s CPU/GB  rd/GB  idle faults  threads run+waited s/GB, switches in')
        for (name, what), rs in rows.items():
            names = sorted({t for r in rs for t in r['threads']})
            th = '  '.join(f'{t} {bl.med([r["threads"].get(t, (0, 0, 0))[0] for r in rs]):.2f}'
                           f'+{bl.med([r["threads"].get(t, (0, 0, 0))[1] for r in rs]):.2f}'
                           f'/{bl.med([r["threads"].get(t, (0, 0, 0))[2] for r in rs]):.0f}' for t in names)
            print(f'  {name:<10} {what:<7} {bl.med([r["mbps"] for r in rs]):>7.1f} '
                  f'{bl.med([r["cpu"] for r in rs]):>6.2f} {bl.med([r["reader"] for r in rs]):>6.2f} '
                  f'{bl.med([r["idle"] for r in rs]):>5.2f} {bl.med([r["faults"] for r in rs]):>6.0f}  {th}')
        if a.perf:
            self.profile()

    def profile(self):
        """perf record -a -g of each build's first and second restore of a mount, after the rounds."""
        perf = bl.Perf(self.work)
        if not perf.ready():
            return
        paths = [os.path.join(self.mnt, r) for r in self.pieces]
        app = os.path.basename(sys.executable)[:15]
        for name, build in self.builds:
            self.mount(build)
            try:
                for what in ('first', 'second'):
                    self.cache.cold([self.data])
                    if not perf.start(f'{name}-{what}', self.daemon.proc.pid):
                        return
                    load = os.getloadavg()[0]
                    t0 = time.monotonic()
                    n = self.read(paths)
                    t = time.monotonic() - t0
                    perf.stop()
                    print(f'\n#### {name}, {what} restore of the mount, perf record -a -g -e {perf.event}: '
                          f'{n / bl.MB / t:.1f} MB/s (slowed by perf), load {load:.1f}')
                    perf.report(n, (('fratier daemon', self.daemon.proc.pid), (f'reader ({app})', os.getpid())))
            finally:
                perf.kill()
                self.unmount()


def main():
    ap = argparse.ArgumentParser(description='restores of the backup pieces, builds alternated over one store')
    ap.add_argument('--build', action='append', required=True,
                    help='NAME=BUILDDIR, once per build to alternate (the first writes and seals the data)')
    ap.add_argument('--tier', choices=('hot', 'capacity'), default='hot', help='where the pieces are (default hot)')
    ap.add_argument('--scale', choices=sorted(SCALES), default='medium',
                    help='backup pieces of 4 datafiles: small 32M, medium 128M (default), large 512M each')
    ap.add_argument('--rounds', type=int, default=3, help='rounds, each mounting every build once (default 3)')
    ap.add_argument('--direct', action='store_true', help='read with O_DIRECT (fratierfs then bypasses '
                    'the page cache: the reply lands in the reader\'s buffer)')
    ap.add_argument('--perf', action='store_true', help='after the rounds, perf record -a -g each build\'s '
                    'first and second restore of a mount and print where the daemon\'s CPU went')
    ap.add_argument('--zstd-level', type=int, help='write the pieces at this zstd level (zstd_level in '
                    'every [class] of the config; default the daemon\'s own)')
    ap.add_argument('--seed', type=int, default=1, help='oragen seed (default 1)')
    ap.add_argument('--workdir', default='/var/tmp', help='scratch dir parent (default /var/tmp)')
    ap.add_argument('--mount-opts', default='', help='extra -o options for fratierfs')
    bl.add_guest_memory_option(ap)
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error('--rounds must be at least 1')
    if os.geteuid() != 0:
        ap.error('run as root (mounting, the trusted.* state attribute)')

    def interrupted(signum, frame):
        raise bl.Interrupted(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGHUP, interrupted)
    return bl.run('bench-restore', Bench(args), args.hold_guest_memory)


if __name__ == '__main__':
    sys.exit(main())
