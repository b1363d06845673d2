#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Archivelog throughput of fratierfs against the hot-tier directory itself
and against a minimal FUSE passthrough of that directory (the FUSE ceiling).

Run as root, on demand (not a test):

    bench/bench-archivelog.py [--size 4G] [--rounds 5] [--build DIR]
                              [--workdir DIR] [--native-only]
                              [--mount-opts OPTS] [--series N] [--perf]

Each round runs four tests on fratier, passthrough and native, the order
of the sides rotating between rounds so that drift (page cache, disk,
neighbours on the machine) hits every side alike:

  write   one SIZE file in 1 MiB writes, fsync before close
  read    that file back right after, its pages evicted first (fadvise)
  4x      four parallel writers of SIZE/4 each (RMAN channels), fsync each
  series  one writer, N files of SIZE/N one after another, fsync before
          each close (ARCn, or one RMAN channel), with the mount's own
          seal_delay: the earlier files seal while the later are written

"native" is the hot-tier directory itself (DATA/hot/native-bench/), the
physical floor of this machine; "passthrough" is bench/passthrough over
DATA/hot/passthrough-bench/, the same disk through FUSE with nothing
behind the requests.  See bench/README.md.
"""

import argparse
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import (MB, MIB, BenchError, Daemon, Interrupted, PageCache, build_type, fmt,  # noqa: E402
                      kill_group, med, sh, tail)

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
SRC_ROOT = os.path.dirname(BENCH_DIR)
# Kept free on the workdir's filesystem beyond the SIZE bytes of files alive at once.
FREE_MARGIN = 2 << 30

TESTS = ('write', 'read', 'par4', 'series')
STATE_XATTR = 'trusted.fratier.state'
# The longest wait for fratier's seals before another side's measurement.
SETTLE_TIMEOUT = 600.0
RATIOS = (('fratier', 'native'), ('passthrough', 'native'), ('fratier', 'passthrough'))
SIDES = ('fratier', 'passthrough', 'native')
FUSE_SIDES = ('fratier', 'passthrough')


def parse_size(text):
    """'4G', '512M', '1.5GiB', '1073741824' (K/M/G/T are powers of 1024)."""
    m = re.fullmatch(r'\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*', text.upper())
    if m is None:
        raise argparse.ArgumentTypeError(f'bad size {text!r}: want e.g. 512M, 4G')
    value = int(float(m[1]) * (1 << (10 * ' KMGT'.index(m[2] or ' '))))
    # Four writers of SIZE/4, each a whole number of 1 MiB writes.
    if value <= 0 or value % (4 * MIB) != 0:
        raise argparse.ArgumentTypeError(f'size {text!r} must be a positive multiple of 4 MiB')
    return value


def human(nbytes):
    for unit, div in (('GiB', 1 << 30), ('MiB', 1 << 20)):
        if nbytes >= div and nbytes % div == 0:
            return f'{nbytes // div} {unit}'
    return f'{nbytes / MIB:.1f} MiB'


class Bench:
    def __init__(self, args):
        self.args = args
        self.size = args.size
        self.work = None
        self.data = self.mnt = self.native = None
        self.pt_mnt = self.pt_src = None
        self.seqio = None
        self.daemon = None
        self.daemon_log = None
        self.pt_daemon = None
        self.child = None
        self.perf = None
        self.cache = PageCache()
        # results[test][side] = list of MB/s, one per round
        self.results = {t: {s: [] for s in SIDES} for t in TESTS}
        # ratios[test][(a, b)] = list of a/b, one per round
        self.ratios = {t: {p: [] for p in RATIOS} for t in TESTS}
        self.daemon_cpu = {t: {s: [] for s in FUSE_SIDES} for t in TESTS}
        # Seconds from the end of a fratier series until every file of it was sealed, one per round.
        self.series_drain = []
        self.settled = True
        build = args.build or os.path.join(SRC_ROOT, 'build')
        self.build = os.path.abspath(build)
        self.fratierfs = os.path.join(self.build, 'fs', 'fratierfs')
        self.passthrough = os.path.join(self.build, 'bench', 'passthrough')

    # -- setup / teardown ---------------------------------------------------

    def setup(self):
        base = os.path.abspath(self.args.workdir)
        os.makedirs(base, exist_ok=True)
        free = shutil.disk_usage(base).free
        need = self.size + FREE_MARGIN
        if free < need:
            raise BenchError(f'{base}: {free >> 30} GiB free, need {need >> 30} GiB '
                             f'({human(self.size)} of files + margin)')
        self.work = tempfile.mkdtemp(prefix='fratier-bench.', dir=base)
        self.cache.own(self.work)
        self.data = os.path.join(self.work, 'data')
        self.mnt = os.path.join(self.work, 'mnt')
        self.pt_mnt = os.path.join(self.work, 'ptmnt')
        os.mkdir(self.data)
        os.mkdir(self.mnt)
        os.mkdir(self.pt_mnt)
        self.build_seqio()
        if not self.args.native_only:
            self.mount()
        self.native = os.path.join(self.data, 'hot', 'native-bench')
        os.makedirs(self.native, exist_ok=True)
        self.pt_src = os.path.join(self.data, 'hot', 'passthrough-bench')
        os.makedirs(self.pt_src, exist_ok=True)
        if not self.args.native_only:
            self.mount_passthrough()

    def build_seqio(self):
        cc = os.environ.get('CC', 'cc')
        self.seqio = os.path.join(self.work, 'seqio')
        p = subprocess.run([cc, '-D_GNU_SOURCE', '-std=gnu11', '-O2', '-g', '-Wall', '-Wextra',
                            '-o', self.seqio, os.path.join(BENCH_DIR, 'seqio.c')],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise BenchError(f'building bench/seqio.c failed:\n{p.stderr}')

    def mount(self):
        if not os.access(self.fratierfs, os.X_OK):
            raise BenchError(f'{self.fratierfs} not found: build it (ninja -C {self.build} '
                             f'fs/fratierfs), pass --build DIR, or use --native-only')
        opts = f'data={self.data}'
        if self.args.mount_opts:
            opts += ',' + self.args.mount_opts
        self.daemon_log = os.path.join(self.work, 'fratierfs.log')
        self.daemon = Daemon(self.fratierfs, opts, self.mnt, self.daemon_log).start()

    def mount_passthrough(self):
        if not os.access(self.passthrough, os.X_OK):
            raise BenchError(f'{self.passthrough} not found: build it (ninja -C {self.build} '
                             f'bench/passthrough) or use --native-only')
        # The same read-ahead window as fratierfs's mount, whatever it chose.
        ra = benchlib.read_ahead_kb(self.mnt)
        opts = f'source={self.pt_src}' + (f',read_ahead_kb={ra}' if ra else '')
        if self.args.pt_opts:
            opts += ',' + self.args.pt_opts
        self.pt_daemon = Daemon(self.passthrough, opts, self.pt_mnt,
                                os.path.join(self.work, 'passthrough.log')).start()

    def log_tail(self, lines=20):
        return tail(self.daemon_log, lines)

    def cleanup(self):
        # Cleanup must finish even if Ctrl-C is pressed again.
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            if self.child is not None:
                kill_group(self.child)
            if self.perf is not None:
                self.perf.kill()
            if self.daemon is not None:
                self.daemon.stop()
                self.daemon = None
            if self.pt_daemon is not None:
                self.pt_daemon.stop()
                self.pt_daemon = None
            if self.work is not None:
                shutil.rmtree(self.work, ignore_errors=True)
        finally:
            signal.signal(signal.SIGINT, old)

    # -- measuring ----------------------------------------------------------

    def drop_caches(self):
        self.cache.drop()

    def daemon_of(self, side):
        return {'fratier': self.daemon, 'passthrough': self.pt_daemon}.get(side)

    def daemon_cpu_seconds(self, side):
        """utime+stime of the side's daemon, all threads (0 for native)."""
        d = self.daemon_of(side)
        return d.cpu_seconds() if d is not None else 0.0

    def seqio_run(self, argv):
        # Own process group so cleanup can kill the forked workers too.
        self.child = subprocess.Popen([self.seqio] + argv, stdout=subprocess.PIPE, text=True,
                                      process_group=0)
        out, _ = self.child.communicate()
        rc = self.child.returncode
        self.child = None
        if rc != 0:
            tail = f'\n{self.log_tail()}' if self.daemon is not None else ''
            raise BenchError(f'seqio {" ".join(argv)} failed (exit {rc}){tail}')
        kv = dict(item.split('=', 1) for item in out.split())
        return int(kv['bytes']), int(kv['ns'])

    def dir_of(self, side):
        return {'fratier': self.mnt, 'passthrough': self.pt_mnt, 'native': self.native}[side]

    def files(self, side, test):
        d = self.dir_of(side)
        if test == 'par4':
            return [os.path.join(d, f'channel{i}.bkp') for i in range(1, 5)]
        if test == 'series':
            return [os.path.join(d, f'thread_1_seq_{i}.arc') for i in range(101, 101 + self.args.series)]
        return [os.path.join(d, 'thread_1_seq_1.arc')]

    def remove(self, side, test):
        for path in self.files(side, test):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def settle(self):
        """Waits until every file on the fratier mount is sealed, so that no side is measured while
        fratier still seals an earlier test's files (except the series' own, which is the point of it).
        Returns the seconds waited."""
        t0 = time.monotonic()
        while not self.args.native_only:
            raw = []
            for name in os.listdir(self.mnt):
                try:
                    if os.getxattr(os.path.join(self.mnt, name), STATE_XATTR).split()[0] != b'sealed':
                        raw.append(name)
                except FileNotFoundError:
                    pass
            if not raw:
                break
            self.daemon.check()
            if time.monotonic() - t0 > SETTLE_TIMEOUT:
                raise BenchError(f'{", ".join(raw)} still not sealed {SETTLE_TIMEOUT:.0f}s after the last write')
            time.sleep(0.01)
        return time.monotonic() - t0

    def measure(self, side, test, rnd=0):
        """Returns MB/s of one run and the daemon CPU seconds it cost."""
        if test == 'read':
            argv = ['read'] + self.files(side, 'write')
        elif test == 'series':
            self.remove(side, test)
            # A seed per round: no series dedups against the previous round's files.
            argv = ['series', str(self.size // self.args.series), str(1000 * rnd)] + self.files(side, test)
        else:
            self.remove(side, test)
            per_file = self.size // 4 if test == 'par4' else self.size
            argv = ['write', str(per_file)] + self.files(side, test)
        if test != 'read':
            self.settle()
        self.drop_caches()
        cpu0 = self.daemon_cpu_seconds(side)
        nbytes, ns = self.seqio_run(argv)
        if side == 'fratier' and test == 'series':
            # The seals the series left, which are part of its cost: counted in its CPU s/GB.
            self.series_drain.append(self.settle())
        cpu = self.daemon_cpu_seconds(side) - cpu0
        if nbytes != self.size:
            raise BenchError(f'{test} on {side} moved {nbytes} bytes, expected {self.size}')
        return nbytes / MB / (ns / 1e9), cpu

    def sides(self, rnd):
        if self.args.native_only:
            return ('native',)
        k = (rnd - 1) % len(SIDES)
        return SIDES[k:] + SIDES[:k]

    def run(self):
        print_machine(self)
        print()
        hdr = f'{"round":<6} {"test":<22} {"fratier":>8} {"passthr":>8} {"native":>8} ' \
              f'{"fr/nat":>6} {"pt/nat":>6} {"fr/pt":>6}  {"CPU s fr":>8} {"CPU s pt":>8}  first'
        print(hdr + '\n' + f'{"":<29}{"(MB/s)":^26}')
        print('-' * len(hdr))
        for rnd in range(1, self.args.rounds + 1):
            order = self.sides(rnd)
            got = {t: {} for t in TESTS}
            cpu = {t: {} for t in TESTS}
            # Each side reads its file right after writing it, so whatever the
            # write leaves behind (e.g. the host still flushing a virtual
            # disk) weighs on every read alike.
            for phase in (('write', 'read'), ('par4',), ('series',)):
                if phase[0] == 'series' and not self.args.series:
                    continue
                for side in order:
                    for test in phase:
                        got[test][side], cpu[test][side] = self.measure(side, test, rnd)
                        self.results[test][side].append(got[test][side])
                    self.remove(side, phase[0])
            for test in TESTS:
                if not got[test]:
                    continue
                ratio = {}
                for a, b in RATIOS:
                    if a in got[test] and b in got[test]:
                        ratio[(a, b)] = got[test][a] / got[test][b]
                        self.ratios[test][(a, b)].append(ratio[(a, b)])
                for side in FUSE_SIDES:
                    if side in cpu[test]:
                        self.daemon_cpu[test][side].append(cpu[test][side])
                print(f'{rnd:<6} {self.label(test):<22} {fmt(got[test].get("fratier")):>8} '
                      f'{fmt(got[test].get("passthrough")):>8} {fmt(got[test]["native"]):>8} '
                      + ' '.join(f'{fmt(ratio.get(p), 3):>6}' for p in RATIOS)
                      + f'  {fmt(cpu[test].get("fratier"), 2):>8} {fmt(cpu[test].get("passthrough"), 2):>8}'
                      f'  {order[0]}', flush=True)
        self.print_summary()
        if self.args.perf and not self.args.native_only:
            self.profile()

    def print_memory(self):
        for side in FUSE_SIDES:
            d = self.daemon_of(side)
            if d is not None:
                print(f'{side} daemon peak RSS: {d.peak_rss_mib():.1f} MiB')

    def label(self, test):
        if test == 'write':
            return f'write {human(self.size)}'
        if test == 'read':
            return f'read {human(self.size)}'
        if test == 'series':
            return f'{self.args.series} in a row {human(self.size // self.args.series)}'
        return f'4x write {human(self.size // 4)}'

    def print_summary(self):
        targets = {'write': 'fr/nat >=0.95', 'read': 'fr/nat >=0.90', 'par4': '-', 'series': 'fr/nat >=0.95'}
        print()
        print(f'median of {self.args.rounds} round(s); MB/s = 10^6 bytes/s; '
              f'ratios = medians of the per-round ratios (fr = fratier, pt = passthrough, nat = native)')
        hdr = f'{"test":<22} {"fratier":>8} {"passthr":>8} {"native":>8} ' \
              f'{"fr/nat":>6} {"pt/nat":>6} {"fr/pt":>6}  {"target":<14} {"CPU s/GB fr":>11} {"pt":>5}'
        print(hdr)
        print('-' * len(hdr))
        for test in TESTS:
            if not self.results[test]['native']:
                continue
            mbs = [fmt(med(self.results[test][side])) for side in SIDES]
            ratios = [fmt(med(self.ratios[test][p]), 3) for p in RATIOS]
            cpu = [fmt(med(self.daemon_cpu[test][side]) / (self.size / 1e9)
                       if self.daemon_cpu[test][side] else None, 2) for side in FUSE_SIDES]
            print(f'{self.label(test):<22} ' + ' '.join(f'{m:>8}' for m in mbs) + ' '
                  + ' '.join(f'{r:>6}' for r in ratios)
                  + f'  {targets[test]:<14} {cpu[0]:>11} {cpu[1]:>5}')
        if self.series_drain:
            print(f'series: fratier sealed the last file {fmt(med(self.series_drain), 2)} s after its close '
                  f'(median; {", ".join(fmt(d, 2) for d in self.series_drain)}); its CPU s/GB includes those seals')
        self.print_memory()
        load = os.getloadavg()
        busy = '  -- busier than its cores: figures are noisy' if load[1] > os.cpu_count() else ''
        print(f'load avg at end: {" ".join(f"{x:.2f}" for x in load)} (1/5/15 min){busy}')

    # -- profiling ----------------------------------------------------------

    def profile(self):
        """One more write and read on each FUSE side, each under perf record -a -g."""
        print()
        self.perf = benchlib.Perf(self.work)
        if not self.perf.ready():
            return
        for side in FUSE_SIDES:
            self.remove(side, 'write')
            for test in ('write', 'read'):
                if not self.profile_one(side, test):
                    return
            self.remove(side, 'write')

    def profile_one(self, side, test):
        files = self.files(side, 'write')
        argv = ['write', str(self.size)] + files if test == 'write' else ['read'] + files
        self.drop_caches()
        daemon = benchlib.thread_names(self.daemon_of(side).proc.pid)
        # System-wide: the writer's half of each FUSE request and the
        # writeback kworkers matter as much as the daemon's half.
        if not self.perf.start(f'{side}-{test}', self.daemon_of(side).proc.pid):
            return False
        nbytes, ns = self.seqio_run(argv)
        daemon |= benchlib.thread_names(self.daemon_of(side).proc.pid)
        self.perf.stop()
        print(f'#### perf record -a -g -e {self.perf.event} during one {side} {test} of '
              f'{human(self.size)}: {nbytes / MB / (ns / 1e9):.1f} MB/s '
              f'(slowed by perf, not counted above)')
        print(f'daemon threads: {", ".join(sorted(daemon))}; application: seqio')
        self.perf.report(nbytes, ((f'{side} daemon', self.daemon_of(side).proc.pid), ('application (seqio)', {'seqio'})))
        print()
        return True


def print_machine(bench):
    cpu = '?'
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    cpu = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    with open('/proc/meminfo') as f:
        mem_kib = int(f.readline().split()[1])
    fs = sh(['findmnt', '-n', '-o', 'SOURCE,FSTYPE,OPTIONS', '-T', bench.work])
    print('machine')
    print(f'  kernel    {platform.release()} ({platform.machine()})')
    print(f'  cpu       {cpu}, {os.cpu_count()} online')
    print(f'  memory    {mem_kib >> 20} GiB')
    print(f'  load avg  {" ".join(f"{x:.2f}" for x in os.getloadavg())} (1/5/15 min)')
    print(f'  workdir   {bench.work}')
    print(f'  fs        {fs or "?"}')
    if bench.args.native_only:
        print('  fratierfs not used (--native-only)')
    else:
        print(f'  fratierfs {bench.fratierfs} ({build_type(bench.build)})')
        print(f'  mount     -o data={bench.data}'
              + (f',{bench.args.mount_opts}' if bench.args.mount_opts else '')
              + f' (read_ahead_kb {benchlib.read_ahead_kb(bench.mnt)})')
        print(f'  passthr.  {bench.passthrough} -o source={bench.pt_src}'
              + (f',{bench.args.pt_opts}' if bench.args.pt_opts else '')
              + f' (read_ahead_kb {benchlib.read_ahead_kb(bench.pt_mnt)})')
    print(f'  size      {human(bench.size)}, {bench.args.rounds} round(s), 1 MiB writes/reads')


def main():
    ap = argparse.ArgumentParser(description='fratierfs vs native hot-tier archivelog throughput')
    ap.add_argument('--size', type=parse_size, default=parse_size('4G'),
                    help='bytes per test, e.g. 1G, 4G (default 4G; multiple of 4 MiB)')
    ap.add_argument('--rounds', type=int, default=5, help='rounds (default 5)')
    ap.add_argument('--build', help='meson build dir holding fs/fratierfs (default SRC/build)')
    ap.add_argument('--workdir', default='/var/tmp',
                    help='a scratch dir is made in here, on the same filesystem as the hot '
                         'tier (default /var/tmp)')
    ap.add_argument('--native-only', action='store_true',
                    help='measure only the native hot-tier directory, no mount')
    ap.add_argument('--mount-opts', default='',
                    help='extra -o options for fratierfs, comma-separated')
    ap.add_argument('--pt-opts', default='',
                    help='extra -o options for the passthrough (e.g. writeback), comma-separated')
    ap.add_argument('--series', type=int, default=4,
                    help='files of the series test, written one after another (default 4; 0 = no series test)')
    ap.add_argument('--perf', action='store_true',
                    help='after the rounds, profile one more write and read with perf record '
                         '-a -g (installs linux-perf with apt-get if missing)')
    benchlib.add_guest_memory_option(ap)
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error('--rounds must be at least 1')
    if args.series < 0 or args.series > 64 or (args.series and args.size % (args.series * MIB)):
        ap.error('--series: 0 to 64 files, and SIZE a multiple of that many MiB')
    if os.geteuid() != 0:
        ap.error('run as root (mounting)')

    def interrupted(signum, frame):
        raise Interrupted(signal.Signals(signum).name)

    # Also when started with SIGINT ignored (a background job of a script).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGHUP, interrupted)

    bench = Bench(args)
    return benchlib.run('bench-archivelog', bench, args.hold_guest_memory)


if __name__ == '__main__':
    sys.exit(main())
