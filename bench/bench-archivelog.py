#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Archivelog throughput of fratierfs against the hot-tier directory itself.

Run as root, on demand (not a test):

    bench/bench-archivelog.py [--size 4G] [--rounds 5] [--build DIR]
                              [--workdir DIR] [--native-only]
                              [--mount-opts OPTS] [--perf]

Each round runs three tests on fratier and on native, the side that goes
first alternating between rounds so that drift (page cache, disk,
neighbours on the machine) hits both sides alike:

  write   one SIZE file in 1 MiB writes, fsync before close
  read    that file back right after, page cache dropped first
  4x      four parallel writers of SIZE/4 each (RMAN channels), fsync each

"native" is the hot-tier directory itself (DATA/hot/native-bench/), the
physical floor of this machine.  See bench/README.md.
"""

import argparse
import os
import platform
import re
import shutil
import signal
import statistics
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

TESTS = ('write', 'read', 'par4')
SIDES = ('fratier', 'native')


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
        self.seqio = None
        self.daemon = None
        self.daemon_log = None
        self.child = None
        self.perf_proc = None
        self.cache = PageCache()
        # results[test][side] = list of MB/s, one per round
        self.results = {t: {s: [] for s in SIDES} for t in TESTS}
        self.ratios = {t: [] for t in TESTS}
        self.daemon_cpu = {t: [] for t in TESTS}
        build = args.build or os.path.join(SRC_ROOT, 'build')
        self.build = os.path.abspath(build)
        self.fratierfs = os.path.join(self.build, 'fs', 'fratierfs')

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
        self.data = os.path.join(self.work, 'data')
        self.mnt = os.path.join(self.work, 'mnt')
        os.mkdir(self.data)
        os.mkdir(self.mnt)
        self.build_seqio()
        if not self.args.native_only:
            self.mount()
        self.native = os.path.join(self.data, 'hot', 'native-bench')
        os.makedirs(self.native, exist_ok=True)

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

    def log_tail(self, lines=20):
        return tail(self.daemon_log, lines)

    def cleanup(self):
        # Cleanup must finish even if Ctrl-C is pressed again.
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            if self.child is not None:
                kill_group(self.child)
            if self.perf_proc is not None and self.perf_proc.poll() is None:
                self.perf_proc.kill()
                self.perf_proc.wait()
            if self.daemon is not None:
                self.daemon.stop()
                self.daemon = None
            if self.work is not None:
                shutil.rmtree(self.work, ignore_errors=True)
        finally:
            signal.signal(signal.SIGINT, old)

    # -- measuring ----------------------------------------------------------

    def drop_caches(self):
        self.cache.drop()

    def daemon_cpu_seconds(self):
        """utime+stime of the daemon, all threads (0 in native-only mode)."""
        return self.daemon.cpu_seconds() if self.daemon is not None else 0.0

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
        return self.mnt if side == 'fratier' else self.native

    def files(self, side, test):
        d = self.dir_of(side)
        if test == 'par4':
            return [os.path.join(d, f'channel{i}.bkp') for i in range(1, 5)]
        return [os.path.join(d, 'thread_1_seq_1.arc')]

    def remove(self, side, test):
        for path in self.files(side, test):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def measure(self, side, test):
        """Returns MB/s of one run and the daemon CPU seconds it cost."""
        if test == 'read':
            argv = ['read'] + self.files(side, 'write')
        else:
            self.remove(side, test)
            per_file = self.size // 4 if test == 'par4' else self.size
            argv = ['write', str(per_file)] + self.files(side, test)
        self.drop_caches()
        cpu0 = self.daemon_cpu_seconds() if side == 'fratier' else 0.0
        nbytes, ns = self.seqio_run(argv)
        cpu = self.daemon_cpu_seconds() - cpu0 if side == 'fratier' else 0.0
        if nbytes != self.size:
            raise BenchError(f'{test} on {side} moved {nbytes} bytes, expected {self.size}')
        return nbytes / MB / (ns / 1e9), cpu

    def sides(self, rnd):
        if self.args.native_only:
            return ('native',)
        return SIDES if rnd % 2 == 1 else tuple(reversed(SIDES))

    def run(self):
        print_machine(self)
        print()
        hdr = f'{"round":<6} {"test":<22} {"fratier MB/s":>12} {"native MB/s":>12} ' \
              f'{"ratio":>6}  {"daemon CPU s":>12}  first'
        print(hdr)
        print('-' * len(hdr))
        for rnd in range(1, self.args.rounds + 1):
            order = self.sides(rnd)
            got = {t: {} for t in TESTS}
            cpu = {t: 0.0 for t in TESTS}
            # Each side reads its file right after writing it, so whatever the
            # write leaves behind (e.g. the host still flushing a virtual
            # disk) weighs on both reads alike.
            for phase in (('write', 'read'), ('par4',)):
                for side in order:
                    for test in phase:
                        got[test][side], c = self.measure(side, test)
                        cpu[test] += c
                        self.results[test][side].append(got[test][side])
                    self.remove(side, phase[0])
            for test in TESTS:
                ratio = None
                if 'fratier' in got[test]:
                    ratio = got[test]['fratier'] / got[test]['native']
                    self.ratios[test].append(ratio)
                    self.daemon_cpu[test].append(cpu[test])
                print(f'{rnd:<6} {self.label(test):<22} {fmt(got[test].get("fratier")):>12} '
                      f'{fmt(got[test]["native"]):>12} {fmt(ratio, 3):>6}  '
                      f'{fmt(cpu[test] if ratio is not None else None, 2):>12}  {order[0]}',
                      flush=True)
        self.print_summary()
        if self.args.perf and not self.args.native_only:
            self.profile()

    def label(self, test):
        if test == 'write':
            return f'write {human(self.size)}'
        if test == 'read':
            return f'read {human(self.size)}'
        return f'4x write {human(self.size // 4)}'

    def print_summary(self):
        targets = {'write': '>=0.90, goal 0.95', 'read': '>=0.90', 'par4': '-'}
        print()
        print(f'median of {self.args.rounds} round(s); MB/s = 10^6 bytes/s; '
              f'ratio = median of per-round fratier/native')
        hdr = f'{"test":<22} {"fratier MB/s":>12} {"native MB/s":>12} {"ratio":>6}  ' \
              f'{"target":<18} {"daemon CPU s/GB":>15}'
        print(hdr)
        print('-' * len(hdr))
        for test in TESTS:
            fr = self.results[test]['fratier']
            nat = self.results[test]['native']
            ratio = statistics.median(self.ratios[test]) if self.ratios[test] else None
            cpu = statistics.median(self.daemon_cpu[test]) / (self.size / 1e9) \
                if self.daemon_cpu[test] else None
            print(f'{self.label(test):<22} {fmt(med(fr)):>12} {fmt(med(nat)):>12} '
                  f'{fmt(ratio, 3):>6}  {targets[test]:<18} {fmt(cpu, 2):>15}')
        load = os.getloadavg()
        busy = '  -- busier than its cores: figures are noisy' if load[1] > os.cpu_count() else ''
        print(f'load avg at end: {" ".join(f"{x:.2f}" for x in load)} (1/5/15 min){busy}')
        if self.cache.problem:
            print(f'note: {self.cache.problem}')

    # -- profiling ----------------------------------------------------------

    def perf_ready(self):
        """Returns the perf event to use, or None (after saying why)."""
        if shutil.which('perf') is None:
            print('perf not installed; installing linux-perf (apt-get)', flush=True)
            r = subprocess.run(['apt-get', 'install', '-y', '-q', 'linux-perf'],
                               capture_output=True, text=True)
            if r.returncode != 0 or shutil.which('perf') is None:
                print(f'perf unsupported: apt-get install linux-perf failed:\n{r.stderr.strip()}')
                return None
        # No hardware PMU in most VMs: fall back to the cpu-clock software timer.
        event = 'cycles' if os.path.isdir('/sys/bus/event_source/devices/cpu') else 'cpu-clock'
        probe = os.path.join(self.work, 'perf-probe.data')
        r = subprocess.run(['perf', 'record', '-q', '-g', '-e', event, '-o', probe, '--', 'true'],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f'perf unsupported on this machine: {r.stderr.strip()}')
            return None
        return event

    def daemon_comms(self):
        """Thread names of the daemon (perf reports by name, 15 characters)."""
        names = set()
        task = f'/proc/{self.daemon.proc.pid}/task'
        for tid in os.listdir(task):
            try:
                with open(os.path.join(task, tid, 'comm')) as f:
                    names.add(f.read().strip())
            except OSError:
                pass
        return names

    def profile(self):
        """One more fratier write and read, each under perf record -a -g."""
        print()
        event = self.perf_ready()
        if event is None:
            return
        self.remove('fratier', 'write')
        for test in ('write', 'read'):
            if not self.profile_one(test, event):
                break
        self.remove('fratier', 'write')

    def profile_one(self, test, event):
        data = os.path.join(self.work, f'perf-{test}.data')
        files = self.files('fratier', 'write')
        argv = ['write', str(self.size)] + files if test == 'write' else ['read'] + files
        self.drop_caches()
        daemon = self.daemon_comms()
        # System-wide: the writer's half of each FUSE request and the
        # writeback kworkers matter as much as the daemon's half.
        self.perf_proc = subprocess.Popen(
            ['perf', 'record', '-q', '-a', '-g', '-e', event, '-o', data],
            stdout=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while not os.path.exists(data) and time.monotonic() < deadline:
            if self.perf_proc.poll() is not None:
                print(f'perf unsupported: perf record -a exited with {self.perf_proc.returncode}')
                self.perf_proc = None
                return False
            time.sleep(0.05)
        time.sleep(0.5)
        nbytes, ns = self.seqio_run(argv)
        daemon |= self.daemon_comms()
        self.perf_proc.send_signal(signal.SIGINT)
        self.perf_proc.wait()
        self.perf_proc = None
        print(f'#### perf record -a -g -e {event} during one fratier {test} of '
              f'{human(self.size)}: {nbytes / MB / (ns / 1e9):.1f} MB/s '
              f'(slowed by perf, not counted above)')
        print(f'daemon threads: {", ".join(sorted(daemon))}; application: seqio')

        base = ['perf', 'report', '-i', data, '--stdio', '-g', 'none', '-t', '\t']
        totals = {}
        for cols in perf_rows(sh(base + ['--no-children', '--sort', 'comm'])):
            totals[cols[1]] = pct(cols[0])
        print('\n== share of all samples on the machine, by command and object '
              '(swapper = idle; others share this machine) ==')
        for cols in perf_rows(sh(base + ['--no-children', '--percent-limit', '1',
                                         '--sort', 'comm,dso']))[:15]:
            print(f'{pct(cols[0]):6.2f}%  {cols[1]:<16} {cols[2]}')
        selfs = perf_rows(sh(base + ['--no-children', '--percent-limit', '0.01',
                                     '--sort', 'comm,sym']))
        incl = perf_rows(sh(base + ['--children', '--percent-limit', '0.2',
                                    '--sort', 'comm,sym']))
        for title, comms in (('daemon', daemon), ('application (seqio)', {'seqio'})):
            total = sum(totals.get(c, 0.0) for c in comms)
            if total == 0:
                print(f'\n== {title}: no samples ==')
                continue
            print(f'\n== {title}: {total:.1f}% of all samples; top symbols by self time, '
                  f'% of {title} ==')
            rows = [(pct(c[0]), c[2]) for c in selfs if c[1] in comms]
            for share, sym in merge(rows)[:20]:
                print(f'{100 * share / total:6.2f}%  {sym}')
            print(f'\n== {title}: top symbols including callees, % of {title} ==')
            rows = [(pct(c[0]), c[3]) for c in incl if c[2] in comms]
            for share, sym in merge(rows)[:20]:
                print(f'{100 * share / total:6.2f}%  {sym}')
        print()
        os.unlink(data)
        return True


def perf_rows(text):
    """Rows of perf report -t '\\t' as lists of stripped columns."""
    return [[c.strip() for c in ln.split('\t')] for ln in text.splitlines()
            if ln.strip() and not ln.startswith('#')]


def pct(text):
    return float(text.rstrip('%'))


def merge(rows):
    """Sums (percent, symbol) rows of several threads per symbol, largest first."""
    acc = {}
    for share, sym in rows:
        acc[sym] = acc.get(sym, 0.0) + share
    return sorted(((v, k) for k, v in acc.items()), reverse=True)


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
              + (f',{bench.args.mount_opts}' if bench.args.mount_opts else ''))
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
    ap.add_argument('--perf', action='store_true',
                    help='after the rounds, profile one more write and read with perf record '
                         '-a -g (installs linux-perf with apt-get if missing)')
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error('--rounds must be at least 1')
    if os.geteuid() != 0:
        ap.error('run as root (mounting, dropping the page cache)')

    def interrupted(signum, frame):
        raise Interrupted(signal.Signals(signum).name)

    # Also when started with SIGINT ignored (a background job of a script).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGHUP, interrupted)

    bench = Bench(args)
    return benchlib.run('bench-archivelog', bench)


if __name__ == '__main__':
    sys.exit(main())
