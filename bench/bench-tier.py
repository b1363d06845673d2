#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Tiers: restore from the capacity and NFS tiers against native and NFS
reads of the same bytes (and the disk's bytes through a minimal FUSE
passthrough: the FUSE ceiling), migration throughput, and what a migration
costs an archiver writing meanwhile (the throttle, background_share, at work).

Runs in a private network and mount namespace (tests/nfs/ganesha.py):
nfs-ganesha serves an export on loopback, which is fratier's NFS tier and,
for the baseline, where nfs-cp reads the same bytes from.

Not a test: nothing is asserted.  See bench/README.md.
"""

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
SRC_ROOT = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
sys.path.insert(0, os.path.join(SRC_ROOT, 'tests', 'nfs'))
import benchlib as bl  # noqa: E402
import ganesha  # noqa: E402

STATE_XATTR = 'trusted.fratier.state'
SEAL_WAIT = 900.0
# The archiver writes the day's logs this many times over (new names each time), so that it
# writes for seconds, not a fraction of one, beside the migration.
ARCHIVER_PASSES = 4
# --scale: oragen datafile size (4 datafiles, one backup piece each), archived logs and their size.
SCALES = {
    'small': ('32M', 4, '32M'),
    'medium': ('128M', 8, '64M'),
    'large': ('512M', 16, '128M'),
}
CONFIG = """[fratier]
data_dir = {data}

[tier hot]
path = {data}/hot

[tier capacity]
path = {data}/capacity

[tier filer]
role = nfs
path = {url}
"""


class Timed:
    def __init__(self, nbytes, seconds, cpu=None, faults=None):
        self.bytes, self.seconds, self.cpu, self.faults = nbytes, seconds, cpu, faults

    def mbps(self):
        return self.bytes / bl.MB / self.seconds if self.seconds > 0 else None


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = None
        self.srv = None
        self.daemon = None
        self.cache = bl.PageCache()
        build = os.path.abspath(args.build or os.path.join(SRC_ROOT, 'build'))
        self.build = build
        self.fratierfs = os.path.join(build, 'fs', 'fratierfs')
        self.oragen = os.path.join(build, 'tools', 'oragen', 'oragen')
        self.passthrough = os.path.join(build, 'bench', 'passthrough')
        self.pt_daemon = None
        self.perf = None
        self.peak_rss = 0.0  # MiB, the largest of the daemons mounted so far
        self.tierctl = os.path.join(build, 'tools', 'tierctl', 'tierctl')
        self.nfs_cp = shutil.which('nfs-cp')
        self.pieces, self.logs = [], []  # paths relative to the oragen output
        self.buf = bytearray(bl.MIB)
        self.rows = []  # (section, what, fratier Timed, baseline name, baseline Timed)

    # ---- set-up and tear-down ----

    def setup(self):
        for tool in (self.fratierfs, self.oragen, self.tierctl, self.passthrough):
            if not os.access(tool, os.X_OK):
                raise bl.BenchError(f'{tool} not found: build the project (or give --build)')
        base = os.path.abspath(self.args.workdir)
        os.makedirs(base, exist_ok=True)
        self.work = tempfile.mkdtemp(prefix='fratier-bench-tier.', dir=base)
        self.cache.own(self.work)
        self.src = os.path.join(self.work, 'fra')
        dsize, nlogs, lsize = SCALES[self.args.scale]
        p = subprocess.run([self.oragen, '--out', self.src, '--days', '1', '--seed', str(self.args.seed),
                            '--datafiles', '4', '--datafile-size', dsize, '--filesperset', '1',
                            '--archivelogs-per-day', str(nlogs), '--archivelog-size', lsize,
                            '--image-copies', '0', '--no-zstd', '--quiet'], capture_output=True, text=True)
        if p.returncode != 0:
            raise bl.BenchError(f'oragen failed: {p.stderr.strip()}')
        for d, _, names in os.walk(self.src):
            for n in sorted(names):
                rel = os.path.relpath(os.path.join(d, n), self.src)
                if n.endswith('.bkp'):
                    self.pieces.append(rel)
                elif n.endswith('.arc'):
                    self.logs.append(rel)
        if not self.pieces or not self.logs:
            raise bl.BenchError('oragen wrote no backup pieces or no archived logs')
        self.srv = ganesha.Ganesha(os.path.join(self.work, 'nfs'))
        self.srv.start()
        # The baseline's copy of the same bytes on the same export, beside fratier's containers.
        for rel in self.pieces + self.logs:
            dst = os.path.join(self.srv.export, 'baseline', rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(os.path.join(self.src, rel), dst)
        self.data = os.path.join(self.work, 'data')
        self.mnt = os.path.join(self.work, 'mnt')
        self.pt_mnt = os.path.join(self.work, 'ptmnt')
        for d in (os.path.join(self.data, 'hot'), os.path.join(self.data, 'capacity'), self.mnt, self.pt_mnt):
            os.makedirs(d)
        self.config = os.path.join(self.work, 'fratier.conf')
        with open(self.config, 'w') as f:
            f.write(CONFIG.format(data=self.data, url=self.srv.url))

    def cleanup(self):
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            if self.perf is not None:
                self.perf.kill()
            if self.daemon is not None:
                self.daemon.stop()
                self.daemon = None
            if self.pt_daemon is not None:
                self.pt_daemon.stop()
                self.pt_daemon = None
            if self.srv is not None:
                self.srv.stop()
                self.srv = None
            if self.work is not None:
                shutil.rmtree(self.work, ignore_errors=True)
        finally:
            signal.signal(signal.SIGINT, old)

    def mount(self, share):
        opts = (f'config={self.config},seal_delay=0,gc_interval=3600,policy=0,background_share={share}'
                + (',' + self.args.mount_opts if self.args.mount_opts else ''))
        self.daemon = bl.Daemon(self.fratierfs, opts, self.mnt, os.path.join(self.work, 'fratierfs.log')).start()

    def mount_passthrough(self):
        """The oragen output through bench/passthrough, with fratierfs's read-ahead window."""
        ra = bl.read_ahead_kb(self.mnt)
        opts = f'source={self.src}' + (f',read_ahead_kb={ra}' if ra else '')
        self.pt_daemon = bl.Daemon(self.passthrough, opts, self.pt_mnt,
                                   os.path.join(self.work, 'passthrough.log')).start()

    def unmount(self):
        self.peak_rss = max(self.peak_rss, self.daemon.peak_rss_mib())
        self.daemon.stop()
        self.daemon = None

    # ---- helpers ----

    def tierctl_call(self, *args):
        p = subprocess.run([self.tierctl, '-m', self.mnt] + list(args) + ['--json'], capture_output=True, text=True)
        if p.returncode != 0:
            raise bl.BenchError(f'tierctl {" ".join(args)}: exit {p.returncode}: {p.stderr.strip()}')
        return json.loads(p.stdout)

    def size(self, rels):
        return sum(os.path.getsize(os.path.join(self.src, r)) for r in rels)

    def copy_in(self, rels, dst_root, names=None):
        """Writes rels as an archiver does: 1 MiB write()s, fsync before close; returns Timed."""
        total = 0
        t0 = time.monotonic()
        for k, rel in enumerate(rels):
            dst = os.path.join(dst_root, names[k] if names else rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(os.path.join(self.src, rel), 'rb', buffering=0) as fi:
                fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
                try:
                    while True:
                        n = fi.readinto(self.buf)
                        if not n:
                            break
                        done = 0
                        view = memoryview(self.buf)
                        while done < n:
                            done += os.write(fd, view[done:n])
                        total += n
                    os.fsync(fd)
                finally:
                    os.close(fd)
        return Timed(total, time.monotonic() - t0)

    def wait_sealed(self, paths):
        deadline = time.monotonic() + SEAL_WAIT
        for p in paths:
            while os.getxattr(p, STATE_XATTR).split()[0] != b'sealed':
                self.daemon.check()
                if time.monotonic() > deadline:
                    raise bl.BenchError(f'{p} not sealed after {SEAL_WAIT:.0f}s')
                time.sleep(0.02)

    def read_all(self, paths, warm):
        """Cold-cache read of paths, 1 MiB reads, the bytes under warm in the host's cache
        (bl.PageCache.cold()); returns Timed (with the daemon's CPU seconds and minor faults
        if paths are in its mount)."""
        self.cache.cold(warm)
        mine = self.daemon if paths and paths[0].startswith(self.mnt + os.sep) else None
        cpu0, flt0 = (mine.cpu_seconds(), mine.minor_faults()) if mine else (None, None)
        t0 = time.monotonic()
        total = bl.read_files(paths, self.buf)
        t = time.monotonic() - t0
        if not mine:
            return Timed(total, t)
        return Timed(total, t, mine.cpu_seconds() - cpu0, mine.minor_faults() - flt0)

    def tier_dirs(self):
        """Where fratier's bytes lie on the disk: the hot and capacity tiers and the NFS export's
        objects (not the baseline's copies)."""
        export = [os.path.join(self.srv.export, n) for n in os.listdir(self.srv.export) if n != 'baseline']
        return [self.data] + export

    def nfs_cp_all(self, rels):
        """nfs-cp of the baseline copies from the same export; returns Timed, or None without nfs-cp.

        nfs-cp refuses /dev/null as its target: it copies into a file on the
        namespace's private tmpfs /run instead (memory, as fratier's reads
        land in the reader's buffer), removed after each file."""
        if not self.nfs_cp:
            return None
        out = os.path.join('/run', 'fratier-bench-nfs-cp.out')
        self.cache.cold([os.path.join(self.srv.export, 'baseline', rel) for rel in rels])
        t0 = time.monotonic()
        for rel in rels:
            url = self.srv.url.replace(self.srv.export, os.path.join(self.srv.export, 'baseline', rel), 1)
            p = subprocess.run([self.nfs_cp, url, out], capture_output=True, text=True)
            if os.path.exists(out):
                os.unlink(out)
            if p.returncode != 0:
                raise bl.BenchError(f'nfs-cp {url}: {p.stderr.strip() or p.stdout.strip()}')
        return Timed(self.size(rels), time.monotonic() - t0)

    def migrate(self, to, rels, what):
        """tierctl migrate/recall of rels; returns Timed over their logical bytes."""
        paths = [os.path.join(self.mnt, r) for r in rels]
        self.cache.drop()
        cpu0 = self.daemon.cpu_seconds()
        t0 = time.monotonic()
        j = self.tierctl_call('recall', *paths) if to == 0 else self.tierctl_call('migrate', '--to', str(to), *paths)
        t = Timed(self.size(rels), time.monotonic() - t0, self.daemon.cpu_seconds() - cpu0)
        if j.get('moved') != len(rels):
            raise bl.BenchError(f'{what}: moved {j.get("moved")} of {len(rels)} files')
        return t

    def row(self, section, what, fratier, base_name=None, base=None, pt=None):
        self.rows.append((section, what, fratier, base_name, base, pt))
        ratio = fratier.mbps() / base.mbps() if base and base.mbps() and fratier.mbps() else None
        pt_ratio = pt.mbps() / base.mbps() if pt and base and base.mbps() else None
        fr_pt = fratier.mbps() / pt.mbps() if pt and pt.mbps() and fratier.mbps() else None
        print(f'  {section:<10} {what:<34} {fmt_mb(fratier.bytes):>6} {bl.fmt(fratier.mbps()):>8} '
              f'{base_name or "":>12} {bl.fmt(base.mbps() if base else None):>8} {bl.fmt(pt.mbps() if pt else None):>8} '
              f'{bl.fmt(ratio, 3):>6} {bl.fmt(pt_ratio, 3):>6} {bl.fmt(fr_pt, 3):>6} '
              f'{bl.fmt(fratier.cpu, 2):>6} {bl.fmt(fratier.faults, 0):>7} '
              f'{bl.fmt(self.daemon.peak_rss_mib() if self.daemon else None, 0):>5}',
              flush=True)

    def fg_write(self, rnd, migrate_rels, to):
        """The archiver: every log written to a new name, alone or while a migration of migrate_rels runs."""
        logs = self.logs * ARCHIVER_PASSES
        names = [os.path.join('fg', f'{rnd}', f'{k}-' + os.path.basename(r)) for k, r in enumerate(logs)]
        self.cache.drop()
        mig = None
        if migrate_rels:
            paths = [os.path.join(self.mnt, r) for r in migrate_rels]
            mig = subprocess.Popen([self.tierctl, '-m', self.mnt, 'migrate', '--to', str(to), '--json'] + paths,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # Start writing once the copy runs: the daemon reports a file in the migrations' queue.
            while mig.poll() is None and not int(bl_status(self)['migrate_queue']):
                time.sleep(0.01)
        t = self.copy_in(logs, self.mnt, names)
        overlap = None
        if mig is not None:
            overlap = mig.poll() is None  # still copying when the writer finished: it ran throughout
            _, err = mig.communicate()
            if mig.returncode != 0:
                raise bl.BenchError(f'migration under the writer: exit {mig.returncode}: {err.strip()}')
        self.wait_sealed([os.path.join(self.mnt, n) for n in names])
        for n in names:
            os.unlink(os.path.join(self.mnt, n))
        return t, overlap

    # ---- the run ----

    def run(self):
        a = self.args
        print_machine(self)
        print(f'\n  {"section":<10} {"what":<34} {"MB":>6} {"MB/s":>8} {"baseline":>12} {"MB/s":>8} {"pt MB/s":>8} '
              f'{"ratio":>6} {"pt/bl":>6} {"fr/pt":>6} {"CPU s":>6} {"faults":>7} {"HWM":>5}')

        self.mount(a.share)
        self.mount_passthrough()
        ingest = self.copy_in(self.pieces + self.logs, self.mnt)
        self.wait_sealed([os.path.join(self.mnt, r) for r in self.pieces + self.logs])
        self.row('ingest', 'write + seal on the hot tier', ingest)

        sets = {'pieces': self.pieces, 'logs': self.logs}
        names = {'pieces': 'backup pieces', 'logs': 'archived logs'}

        def restore(k, where):
            """fratier's read of set k, right after the native read of the same bytes and the
            passthrough's (FUSE's ceiling), so that all three meet the same neighbours."""
            src = [os.path.join(self.src, r) for r in sets[k]]
            native = self.read_all(src, src)
            pt = self.read_all([os.path.join(self.pt_mnt, r) for r in sets[k]], src)
            t = self.read_all([os.path.join(self.mnt, r) for r in sets[k]], self.tier_dirs())
            self.row('restore', f'{names[k]} {where}', t, 'native read', native, pt)

        # Sealed on the hot tier: what the read path costs before any tier is involved.
        for k in ('pieces', 'logs'):
            restore(k, 'sealed on hot')
        everything = self.pieces + self.logs
        self.row('migrate', 'hot -> capacity', self.migrate(1, everything, 'hot -> capacity'))
        for k in ('pieces', 'logs'):
            restore(k, 'from capacity')
        if a.restore_only:
            if a.perf:
                self.migrate(0, everything, 'recall capacity -> hot')
                profile(self)
            self.unmount()
            print_summary(self, {})
            print(f'  daemon peak RSS: {self.peak_rss:.1f} MiB (target <= 256)')
            la = os.getloadavg()
            print(f'\nload avg at end {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}')
            return
        self.row('migrate', 'capacity -> nfs', self.migrate(2, everything, 'capacity -> nfs'))
        for k in ('pieces', 'logs'):
            nfs = self.nfs_cp_all(sets[k])
            t = self.read_all([os.path.join(self.mnt, r) for r in sets[k]], self.tier_dirs())
            self.row('restore', f'{names[k]} from nfs', t, 'nfs-cp' if nfs else 'no nfs-cp', nfs)
        self.row('migrate', 'recall nfs -> hot', self.migrate(0, everything, 'recall nfs -> hot'))

        # The archiver alone, and with a migration hot -> capacity running at the share asked
        # for and at 100 (never held back); the order rotates per round, so drift favours none,
        # and the files go back to hot after each migration.
        variants = ['alone', a.share] + ([100] if a.share != 100 else [])
        fg = {}
        share = a.share
        for rnd in range(a.rounds):
            for v in variants[rnd % len(variants):] + variants[:rnd % len(variants)]:
                if v != 'alone' and v != share:
                    self.unmount()
                    self.mount(v)
                    share = v
                if v == 'alone':
                    t, _ = self.fg_write(f'{rnd}-alone', None, 0)
                    fg.setdefault('alone', []).append(t)
                    continue
                before = bl_status(self)
                t, overlap = self.fg_write(f'{rnd}-{v}', everything, 1)
                after = bl_status(self)
                self.migrate(0, everything, 'recall capacity -> hot')
                waits = int(after['throttle_migrate_waits']) - int(before['throttle_migrate_waits'])
                waited = (int(after['throttle_migrate_wait_us']) - int(before['throttle_migrate_wait_us'])) / 1e6
                fg.setdefault(v, []).append(t)
                print(f'  {"":<10} round {rnd + 1}, share {v}%: the migration waited {waits} times, {waited:.1f} s'
                      + ('' if overlap else '; it ended before the writer did'), flush=True)
            alone = fg['alone'][-1]
            for v in variants[1:]:
                self.row('archiver', f'while migrating, share {v}%', fg[v][-1], 'alone', alone)
        if a.perf:
            profile(self)
        self.unmount()
        print_summary(self, fg)
        print(f'  daemon peak RSS: {self.peak_rss:.1f} MiB (target <= 256)')
        la = os.getloadavg()
        print(f'\nload avg at end {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}'
              + (f' -- more runnable work than {os.cpu_count()} cores: figures are noisy'
                 if la[1] > os.cpu_count() else ''))


def profile(bench):
    """perf record -a -g of a restore of the backup pieces sealed on hot, of the same from
    capacity, and of an ingest (write + seal) of the archived logs under new names."""
    print()
    bench.perf = bl.Perf(bench.work)
    if not bench.perf.ready():
        return
    paths = [os.path.join(bench.mnt, r) for r in bench.pieces]
    app = os.path.basename(sys.executable)[:15]
    steps = (('restore-hot', 'restore of the backup pieces sealed on hot'),
             ('restore-capacity', 'restore of the backup pieces from capacity'),
             ('ingest', 'ingest (write + seal) of the archived logs, new names'))
    for name, what in steps:
        if name == 'restore-capacity':
            bench.migrate(1, bench.pieces, 'hot -> capacity')
        daemon = bl.thread_names(bench.daemon.proc.pid)
        bench.cache.cold(bench.tier_dirs())
        if not bench.perf.start(name, bench.daemon.proc.pid):
            return
        if name == 'ingest':
            names = [os.path.join('perf', f'{k}-' + os.path.basename(r)) for k, r in enumerate(bench.logs)]
            t0 = time.monotonic()
            t = bench.copy_in(bench.logs, bench.mnt, names)
            bench.wait_sealed([os.path.join(bench.mnt, n) for n in names])
            t = Timed(t.bytes, time.monotonic() - t0)
        else:
            t = Timed(0, 0)
            t0 = time.monotonic()
            t.bytes = bl.read_files(paths, bench.buf)
            t.seconds = time.monotonic() - t0
        daemon |= bl.thread_names(bench.daemon.proc.pid)
        bench.perf.stop()
        print(f'#### perf record -a -g -e {bench.perf.event} during the {what}: '
              f'{bl.fmt(t.mbps())} MB/s (slowed by perf)')
        print(f'daemon threads: {", ".join(sorted(daemon))}; application: this script ({app})')
        bench.perf.report(t.bytes, (('fratier daemon', bench.daemon.proc.pid), (f'application ({app})', os.getpid())))
        print()


def bl_status(bench):
    p = subprocess.run([bench.tierctl, '-m', bench.mnt, 'status', '--json'], capture_output=True, text=True)
    if p.returncode != 0:
        raise bl.BenchError(f'tierctl status: {p.stderr.strip()}')
    return json.loads(p.stdout)


def fmt_mb(n):
    return f'{n / bl.MB:.0f}'


def print_summary(bench, fg):
    print('\nsummary (ratio = fratier / baseline; targets: restore >= 0.80, archiver while migrating >= 0.90)')
    for section, what, t, base_name, base, pt in bench.rows:
        if section == 'restore':
            ratio = t.mbps() / base.mbps() if base and base.mbps() else None
            print(f'  {what:<40} {bl.fmt(ratio, 3):>6} of {base_name}'
                  + (f', {t.mbps() / pt.mbps():.3f} of the passthrough' if pt and pt.mbps() else ''))
    alone = bl.med([t.mbps() for t in fg['alone']]) if fg else None
    for key in sorted(k for k in fg if k != 'alone'):
        with_m = bl.med([t.mbps() for t in fg[key]])
        print(f'  {"archiver while migrating, share " + str(key) + "%":<40} '
              f'{bl.fmt(with_m / alone if alone and with_m else None, 3):>6} of alone '
              f'({bl.fmt(with_m)} vs {bl.fmt(alone)} MB/s, median of {len(fg[key])})')
    for section, what, t, _, _, _ in bench.rows:
        if section == 'migrate':
            print(f'  {"migration " + what:<40} {bl.fmt(t.mbps()):>6} MB/s (logical)')


def print_machine(bench):
    cpu = '?'
    try:
        with open('/proc/cpuinfo') as f:
            cpu = next((ln.split(':', 1)[1].strip() for ln in f if ln.startswith('model name')), '?')
    except OSError:
        pass
    print('machine')
    print(f'  kernel    {platform.release()}, cpu {cpu}, {os.cpu_count()} online')
    print(f'  load avg  {" ".join(f"{x:.2f}" for x in os.getloadavg())} (1/5/15 min)')
    print(f'  workdir   {bench.work} ({bl.sh(["findmnt", "-n", "-o", "SOURCE,FSTYPE", "-T", bench.work]) or "?"})')
    print(f'  fratierfs {bench.fratierfs} ({bl.build_type(bench.build)})')
    print(f'  nfs       ganesha on loopback, {bench.srv.url}; baseline {bench.nfs_cp or "nfs-cp missing"}')
    print(f'  data      oragen seed {bench.args.seed}, scale {bench.args.scale}: {len(bench.pieces)} backup pieces '
          f'({fmt_mb(bench.size(bench.pieces))} MB), {len(bench.logs)} archived logs '
          f'({fmt_mb(bench.size(bench.logs))} MB); background_share {bench.args.share}%')


def main():
    ap = argparse.ArgumentParser(description='restore from the capacity and NFS tiers against native and nfs-cp '
                                             'reads, migration throughput, and an archiver while a migration runs')
    ap.add_argument('--scale', choices=sorted(SCALES), default='medium',
                    help='data size: small (~260 MB, a few minutes), medium (~1 GB, default), large (~4 GB)')
    ap.add_argument('--rounds', type=int, default=1, help='rounds of the archiver runs (default 1)')
    ap.add_argument('--share', type=int, default=20,
                    help='background_share of the mount (default 20); the archiver is also run at 100')
    ap.add_argument('--seed', type=int, default=1, help='oragen seed (default 1)')
    ap.add_argument('--build', help='meson build dir (default SRC/build); use an optimized one')
    ap.add_argument('--workdir', default='/var/tmp', help='scratch dir parent (default /var/tmp)')
    ap.add_argument('--mount-opts', default='', help='extra -o options for fratierfs')
    ap.add_argument('--restore-only', action='store_true',
                    help='stop after the restores from hot and capacity (no NFS, no archiver): '
                         'for alternating builds')
    ap.add_argument('--perf', action='store_true',
                    help='at the end, profile a restore from the hot and the capacity tier and an ingest '
                         '(write + seal) with perf record -a -g')
    bl.add_guest_memory_option(ap)
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error('--rounds must be at least 1')
    if not 1 <= args.share <= 100:
        ap.error('--share must be 1..100')
    if os.geteuid() != 0:
        ap.error('run as root (mounting, a network namespace for ganesha)')
    # Re-executes this script in a private network and mount namespace (exits 77 if it cannot).
    ganesha.enter_private_namespace()

    def interrupted(signum, frame):
        raise bl.Interrupted(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGHUP, interrupted)
    return bl.run('bench-tier', Bench(args), args.hold_guest_memory)


if __name__ == '__main__':
    sys.exit(main())
