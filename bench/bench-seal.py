#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Does sealing slow the writer?  Archivelogs and backup pieces written
through fratierfs while it seals them (streaming on, and off), against the
same writes into the hot tier's directory and through a minimal FUSE
passthrough of it (the FUSE ceiling); and how long after its close each
file is sealed.  With --dd, each file is copied by dd bs=1M conv=fsync from
a source in the page cache, as a new user tries it.

Not a test: nothing is asserted.  See bench/README.md.
"""

import argparse
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
SRC_ROOT = os.path.dirname(BENCH_DIR)
STATE_XATTR = 'trusted.fratier.state'
SEAL_WAIT = 900.0
POLL = 0.01
# native, the passthrough, then fratier with streaming on and off.
SIDES = ('native', 'passthrough', 'stream', 'whole')
SEALING = ('stream', 'whole')
MOUNT_OPTS = {'stream': 'seal_stream=1', 'whole': 'seal_stream=0'}


class Run:
    """One side's pass over the files: write figures and seal lags."""

    def __init__(self):
        self.bytes = 0
        self.wall = 0.0
        self.cpu = 0.0
        self.lags = []
        self.drain = None  # seconds from the last close until every file was sealed

    def mbps(self):
        return self.bytes / bl.MB / self.wall if self.wall else None


class SealWatch(threading.Thread):
    """Notes when each closed file first reports sealed (polling its state xattr)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.lock = threading.Lock()
        self.closed = {}  # path -> close time
        self.sealed = {}  # path -> seal time
        self.stop = threading.Event()

    def closed_at(self, path, t):
        with self.lock:
            self.closed[path] = t

    def run(self):
        while not self.stop.is_set():
            with self.lock:
                waiting = [p for p in self.closed if p not in self.sealed]
            for p in waiting:
                try:
                    state = os.getxattr(p, STATE_XATTR).split()[0]
                except OSError:
                    continue
                if state == b'sealed':
                    with self.lock:
                        self.sealed[p] = time.monotonic()
            time.sleep(POLL)


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = None
        self.files = []  # (source path, bytes)
        self.daemon = None
        self.cache = bl.PageCache()
        build = os.path.abspath(args.build or os.path.join(SRC_ROOT, 'build'))
        self.build = build
        self.fratierfs = os.path.join(build, 'fs', 'fratierfs')
        self.passthrough = os.path.join(build, 'bench', 'passthrough')
        self.pt_daemon = None
        self.oragen = os.path.join(build, 'tools', 'oragen', 'oragen')
        self.results = {}  # (variant, side) -> [Run]
        self.sides = SIDES + tuple(n for n, _ in args.variant)
        self.sealing = SEALING + tuple(n for n, _ in args.variant)
        self.mount_opts = dict(MOUNT_OPTS, **dict(args.variant))
        self.perf = None

    def setup(self):
        base = os.path.abspath(self.args.workdir)
        os.makedirs(base, exist_ok=True)
        self.work = tempfile.mkdtemp(prefix='fratier-bench-seal.', dir=base)
        self.cache.own(self.work)
        src = os.path.join(self.work, 'fra')
        a = self.args
        p = subprocess.run([self.oragen, '--out', src, '--days', '1', '--seed', str(a.seed),
                            '--datafiles', '4', '--datafile-size', a.datafile_size,
                            '--filesperset', str(a.filesperset),
                            '--archivelogs-per-day', str(a.archivelogs), '--archivelog-size', a.archivelog_size,
                            '--image-copies', '0', '--no-zstd', '--quiet'],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise bl.BenchError(f'oragen failed: {p.stderr.strip()}')
        for d, _, names in os.walk(src):
            for n in sorted(names):
                if n.endswith(('.arc', '.bkp')):
                    path = os.path.join(d, n)
                    self.files.append((path, os.path.getsize(path)))
        self.files.sort(key=lambda f: os.path.basename(f[0]))
        if not self.files:
            raise bl.BenchError('oragen wrote no archivelog or backup piece')

    def cleanup(self):
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            if self.perf is not None:
                self.perf.kill()
                self.perf = None
            if self.pt_daemon is not None:
                self.pt_daemon.stop()
                self.pt_daemon = None
            if self.daemon is not None:
                self.daemon.stop()
                self.daemon = None
            if self.work is not None:
                shutil.rmtree(self.work, ignore_errors=True)
        finally:
            signal.signal(signal.SIGINT, old)

    def dest_name(self, src):
        """Where a file goes, below the side's root: archivelog/ or backupset/, as OMF has it."""
        return os.path.relpath(src, os.path.join(self.work, 'fra'))

    def write_all(self, root, pace, watch):
        """Writes every file under root, 1 MiB writes, fsync before close; returns bytes, seconds."""
        buf = bytearray(bl.MIB)
        view = memoryview(buf)
        total = 0
        for src, size in self.files:
            os.makedirs(os.path.dirname(os.path.join(root, self.dest_name(src))), exist_ok=True)
        t0 = time.monotonic()
        for src, size in self.files:
            dst = os.path.join(root, self.dest_name(src))
            if self.args.dd:
                p = subprocess.run(['dd', f'if={src}', f'of={dst}', 'bs=1M', 'conv=fsync', 'status=none'],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    raise bl.BenchError(f'dd of {src} to {dst}: {p.stderr.strip()}')
                total += size
                if watch:
                    watch.closed_at(dst, time.monotonic())
                continue
            with open(src, 'rb', buffering=0) as fi:
                fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
                try:
                    while True:
                        n = fi.readinto(buf)
                        if not n:
                            break
                        done = 0
                        while done < n:
                            done += os.write(fd, view[done:n])
                        total += n
                        if pace:
                            # Never ahead of the pace since the first write.
                            ahead = t0 + total / (pace * bl.MB) - time.monotonic()
                            if ahead > 0:
                                time.sleep(ahead)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            if watch:
                watch.closed_at(dst, time.monotonic())
        return total, time.monotonic() - t0

    def config_opts(self, opts, data):
        """opts, its zstd_level=N (the bench's, not the daemon's) made into a config file giving every
        class that level, with the default mount's tiers under data."""
        out, level = [], None
        for o in filter(None, opts.split(',')):
            if o.startswith('zstd_level='):
                level = o.partition('=')[2]
            else:
                out.append(o)
        if level is None:
            return ','.join(out)
        for t in ('hot', 'capacity'):
            os.makedirs(os.path.join(data, t), exist_ok=True)
        conf = os.path.join(self.work, 'fratier.conf')
        with open(conf, 'w') as f:
            f.write(f'[fratier]\ndata_dir = {data}\n'
                    f'[tier hot]\nrole = hot\npath = {data}/hot\n'
                    f'[tier capacity]\nrole = capacity\npath = {data}/capacity\n')
            for c in ('archivelog', 'backuppiece', 'imagecopy', 'other'):
                f.write(f'[class {c}]\nzstd_level = {level}\n')
        return ','.join(out + [f'config={conf}'])

    def measure(self, side, pace, perf=False):
        run = Run()
        data = os.path.join(self.work, 'data')
        mnt = os.path.join(self.work, 'mnt')
        shutil.rmtree(data, ignore_errors=True)
        os.makedirs(mnt, exist_ok=True)
        # The native side writes into the hot tier's directory of a mount, as fratier's staging does;
        # the passthrough side into a directory beside it, through bench/passthrough.
        opts = f'data={data},seal_delay=0,gc_interval=3600'
        if side in self.sealing:
            opts += ',' + self.config_opts(self.mount_opts[side], data)
        if self.args.mount_opts:
            opts += ',' + self.args.mount_opts
        self.daemon = bl.Daemon(self.fratierfs, opts, mnt, os.path.join(self.work, 'fratierfs.log')).start()
        root = {'native': os.path.join(data, 'hot', 'native-bench'), 'passthrough': os.path.join(self.work, 'ptmnt')}
        root = root.get(side, mnt)
        measured = self.daemon
        if side == 'passthrough':
            pt_src = os.path.join(data, 'hot', 'passthrough-bench')
            os.makedirs(pt_src)
            os.makedirs(root, exist_ok=True)
            self.pt_daemon = bl.Daemon(self.passthrough, f'source={pt_src}', root,
                                       os.path.join(self.work, 'passthrough.log')).start()
            measured = self.pt_daemon
        watch = None
        if side in self.sealing:
            watch = SealWatch()
            watch.start()
        self.cache.drop()
        if self.args.dd:
            # The new user's copy: the source is in the page cache.
            for src, _ in self.files:
                with open(src, 'rb') as f:
                    while f.read(bl.MIB):
                        pass
        if perf and not self.perf.start(side, measured.proc.pid):
            raise bl.BenchError('perf record failed')
        cpu0 = measured.cpu_seconds()
        run.bytes, run.wall = self.write_all(root, pace, watch)
        if watch:
            last_close = time.monotonic()
            deadline = last_close + SEAL_WAIT
            while time.monotonic() < deadline:
                with watch.lock:
                    if len(watch.sealed) == len(watch.closed):
                        break
                self.daemon.check()
                time.sleep(POLL)
            watch.stop.set()
            watch.join()
            if len(watch.sealed) < len(watch.closed):
                raise bl.BenchError(f'files still not sealed {SEAL_WAIT:.0f}s after the last close')
            run.lags = [watch.sealed[p] - watch.closed[p] for p in watch.closed]
            run.drain = max(watch.sealed.values()) - last_close
        run.cpu = measured.cpu_seconds() - cpu0
        if perf:
            self.perf.stop()
            print(f'\n#### perf record -a -g -e {self.perf.event}, side {side}: write + seal of '
                  f'{run.bytes / bl.MB:.0f} MB, {bl.fmt(run.mbps())} MB/s written, drain '
                  f'{bl.fmt(run.drain, 2)} s (slowed by perf)')
            self.perf.report(run.bytes, (('fratier daemon', measured.proc.pid),))
        if self.pt_daemon is not None:
            self.pt_daemon.stop()
            self.pt_daemon = None
        self.daemon.stop()
        self.daemon = None
        shutil.rmtree(data, ignore_errors=True)
        return run

    def run(self):
        a = self.args
        total = sum(s for _, s in self.files)
        print_machine(self, total)
        # dd cannot be paced.
        variants = [('full speed', 0)] + ([(f'paced {a.pace} MB/s', a.pace)] if a.pace and not a.dd else [])
        for variant, pace in variants:
            how = 'dd bs=1M conv=fsync, source in the page cache' if a.dd else '1 MiB writes, fsync before close'
            print(f'\n{variant}: {len(self.files)} files, {total / bl.MB:.0f} MB, one writer, {how}; '
                  f'ratio = of native; pt = of the passthrough')
            print(f'{"round":>5}  {"side":<11} {"MB/s":>7} {"ratio":>6} {"pt":>6} {"lag med s":>9} {"lag max s":>9} '
                  f'{"drain s":>7} {"daemon CPU s":>12} {"ingest x":>8}')
            for rnd in range(a.rounds):
                sides = self.sides
                order = sides[rnd % len(sides):] + sides[:rnd % len(sides)]
                runs = {}
                for side in order:
                    runs[side] = self.measure(side, pace)
                    self.results.setdefault((variant, side), []).append(runs[side])
                for side in sides:
                    r = runs[side]
                    r.ratio = r.mbps() / runs['native'].mbps() if side != 'native' else None
                    r.pt_ratio = r.mbps() / runs['passthrough'].mbps() if side in self.sealing else None
                    r.ingest = (r.wall + r.drain) / runs['native'].wall if side in self.sealing else None
                    print(f'{rnd + 1:>5}  {side:<11} {bl.fmt(r.mbps()):>7} {bl.fmt(r.ratio, 3):>6} '
                          f'{bl.fmt(r.pt_ratio, 3):>6} '
                          f'{bl.fmt(bl.med(r.lags), 2):>9} {bl.fmt(max(r.lags) if r.lags else None, 2):>9} '
                          f'{bl.fmt(r.drain, 2):>7} {bl.fmt(r.cpu, 2):>12} {bl.fmt(r.ingest, 2):>8}', flush=True)
            print(f'median {"":<11}')
            for side in self.sides:
                rs = self.results[(variant, side)]
                ratio = bl.med([r.ratio for r in rs]) if side != 'native' else None
                pt_ratio = bl.med([r.pt_ratio for r in rs]) if side in self.sealing else None
                print(f'{"":>5}  {side:<11} {bl.fmt(bl.med([r.mbps() for r in rs])):>7} {bl.fmt(ratio, 3):>6} '
                      f'{bl.fmt(pt_ratio, 3):>6} '
                      f'{bl.fmt(bl.med([bl.med(r.lags) for r in rs if r.lags]), 2):>9} '
                      f'{bl.fmt(bl.med([max(r.lags) for r in rs if r.lags]), 2):>9} '
                      f'{bl.fmt(bl.med([r.drain for r in rs if r.drain is not None]), 2):>7} '
                      f'{bl.fmt(bl.med([r.cpu for r in rs]), 2):>12} '
                      f'{bl.fmt(bl.med([r.ingest for r in rs if r.ingest is not None]), 2):>8}')
        if a.perf:
            self.perf = bl.Perf(self.work)
            if self.perf.ready():
                for side in self.sealing:
                    self.measure(side, 0, perf=True)
            self.perf = None
        la = os.getloadavg()
        print(f'\nload avg at end {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}'
              + (f' -- more runnable work than {os.cpu_count()} cores: figures are noisy'
                 if la[1] > os.cpu_count() else ''))


def print_machine(bench, total):
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
    print(f'  data      oragen seed {bench.args.seed}: {len(bench.files)} archivelogs and backup pieces, '
          f'{total / bl.MB:.0f} MB')


def main():
    ap = argparse.ArgumentParser(description='sealing against the writer: fratierfs (streaming on/off) '
                                             'vs the hot tier directly, and seal lag')
    ap.add_argument('--rounds', type=int, default=3, help='rounds per variant (default 3)')
    ap.add_argument('--pace', type=int, default=200,
                    help='MB/s of the paced variant, 0 for none (default 200)')
    ap.add_argument('--archivelogs', type=int, default=4, help='archived logs (default 4)')
    ap.add_argument('--archivelog-size', default='32M', help='oragen --archivelog-size (default 32M)')
    ap.add_argument('--datafile-size', default='16M', help='oragen --datafile-size (default 16M)')
    ap.add_argument('--filesperset', type=int, default=4,
                    help='oragen --filesperset: datafiles per backup piece (default 4: one piece)')
    ap.add_argument('--dd', action='store_true',
                    help='copy each file with dd bs=1M conv=fsync from a source in the page cache')
    ap.add_argument('--seed', type=int, default=1, help='oragen seed (default 1)')
    ap.add_argument('--build', help='meson build dir (default SRC/build); use an optimized one')
    ap.add_argument('--workdir', default='/var/tmp', help='scratch dir parent (default /var/tmp)')
    ap.add_argument('--mount-opts', default='', help='extra -o options for fratierfs')
    ap.add_argument('--variant', action='append', default=[], metavar='NAME=OPTS',
                    help='one more fratier side, NAME, mounted with -o OPTS (an A/B of an option in one run); '
                         'zstd_level=N in OPTS mounts with a config giving every class that level; repeatable')
    ap.add_argument('--perf', action='store_true',
                    help='after the rounds, each sealing side once more under perf record -a -g '
                         '(write until every file is sealed), its CPU broken down')
    bl.add_guest_memory_option(ap)
    args = ap.parse_args()
    variants = []
    for v in args.variant:
        name, sep, opts = v.partition('=')
        if not sep or not name or name in SIDES or name in (n for n, _ in variants):
            ap.error(f'--variant {v!r}: NAME=OPTS, NAME new')
        variants.append((name, opts))
    args.variant = variants
    if args.rounds < 1:
        ap.error('--rounds must be at least 1')
    if os.geteuid() != 0:
        ap.error('run as root (mounting, reading trusted.* xattrs)')

    def interrupted(signum, frame):
        raise bl.Interrupted(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGHUP, interrupted)

    bench = Bench(args)
    return bl.run('bench-seal', bench, args.hold_guest_memory)


if __name__ == '__main__':
    sys.exit(main())
