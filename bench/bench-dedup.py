#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Dedup side by side: fratierfs against borg, restic and casync on one FRA.

Run as root, on demand (not a test):

    bench/bench-dedup.py [--scale small|medium|large] [--days D] [--seed N]
                         [--tools LIST] [--fratierfs PATH] [--oragen PATH]
                         [--tierctl PATH] [--workdir DIR] [--fra DIR]
                         [--mount-opts OPTS] [--no-migrate] [--zstd-level N]

oragen writes Oracle-like FRA content once (backup pieces, image copies,
archived logs of D days); every tool then stores the same files in the
same phases:

  dayN       day N's full backup: datafile backup pieces + image copies
  arch       the archived logs of all days + their BACKUP ARCHIVELOG pieces
  restore    everything read back, checked against SHA-256 of the originals

fratier: files copied into a fratierfs mount in 1 MiB writes, phase time =
copy + wait until every file is sealed.  Then (unless --no-migrate) every
file moves to the capacity tier (tierctl migrate --to 1, recompressed at
that tier's level), the collector runs, and everything is read back again
from there.  Peers: borg (default chunker and 64 KiB), restic, casync, each
a backup per phase.  See bench/README.md.
"""

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import (MB, MIB, BenchError, Daemon, Interrupted, PageCache, build_of, build_type,  # noqa: E402
                      fmt, kill_group, sh, tail, zstd_level_config)

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
SRC_ROOT = os.path.dirname(BENCH_DIR)
# A file not sealed this long after the copy ended means the sealer is stuck.
SEAL_TIMEOUT = 1800.0
SEAL_POLL = 0.1
# Nothing sealed for this long while the daemon used less CPU than this: stuck.
STALL_SECONDS = 60.0
STALL_CPU_SECONDS = 1.0
# Kept free on the workdir's filesystem beyond what the run itself needs.
FREE_MARGIN = 2 << 30
STATE_XATTR = 'trusted.fratier.state'
RESTIC_PASSWORD = 'fratier-bench'
# fratierfs's default read_ahead_kb (fs/main.c), given to the passthrough so both read with one window.
FRATIER_READ_AHEAD_KB = 4096

# name: (datafile size, default days, archived log size); 4 datafiles, 4 logs a day.
SCALES = {
    'tiny': ('16M', 2, '4M'),
    'small': ('64M', 2, '16M'),
    'medium': ('256M', 3, '64M'),
    'large': ('512M', 3, '64M'),
}
DEFAULT_SCALE = 'large'
DEFAULT_FRATIERFS = os.path.join(SRC_ROOT, 'build', 'fs', 'fratierfs')
DEFAULT_ORAGEN = os.path.join(SRC_ROOT, 'build', 'tools', 'oragen', 'oragen')
DEFAULT_TIERCTL = os.path.join(SRC_ROOT, 'build', 'tools', 'tierctl', 'tierctl')
ALL_TOOLS = ('fratier', 'borg', 'borg-64k', 'restic', 'casync')
PEER_PACKAGES = {'borg': 'borgbackup', 'restic': 'restic', 'casync': 'casync'}

# Runs in a child process so that its CPU time and RSS are its own.
# copy SRC DST ...: 1 MiB reads and writes, fsync before close (as RMAN does).
# read FILE ...: benchlib.read_files(), the reader of every restore and floor in bench/.
IO_CHILD = r'''
import os, sys
sys.path.insert(0, sys.argv[1])
import benchlib
buf = bytearray(1 << 20)
view = memoryview(buf)
mode, paths = sys.argv[2], sys.argv[3:]
if mode == "copy":
    for src, dst in zip(paths[0::2], paths[1::2]):
        with open(src, "rb", buffering=0) as fi:
            fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                while True:
                    n = fi.readinto(buf)
                    if not n:
                        break
                    done = 0
                    while done < n:
                        done += os.write(fd, view[done:n])
                os.fsync(fd)
            finally:
                os.close(fd)
else:
    benchlib.read_files(paths, buf)
'''


def fmt_floor(native, pt):
    return f'{native:.1f} MB/s' + (f'; through bench/passthrough {pt:.1f} MB/s' if pt else
                                   '; bench/passthrough not built, no FUSE ceiling')


def mib(nbytes):
    return nbytes / MIB


def fmt_x(value):
    return '-' if value is None else f'{value:.2f}x'


def du(*paths):
    """Allocated bytes (st_blocks) of the files under paths, like du; missing paths count 0."""
    total = 0
    for path in paths:
        if os.path.isfile(path):
            total += os.lstat(path).st_blocks * 512
            continue
        for root, _, files in os.walk(path):
            for name in files:
                try:
                    total += os.lstat(os.path.join(root, name)).st_blocks * 512
                except FileNotFoundError:
                    pass
    return total


def catalog_files(hot):
    """The catalog's files on the hot tier: the database, its WAL, its reserve (catalog/catalog.h)."""
    return [os.path.join(hot, 'catalog.db' + suffix) for suffix in ('', '-wal', '-reserve')]


def sha256_file(path):
    h = hashlib.sha256()
    buf = bytearray(MIB)
    with open(path, 'rb', buffering=0) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            h.update(memoryview(buf)[:n])
    return h.hexdigest()


class Phase:
    def __init__(self, name, title, files):
        self.name = name
        self.title = title
        self.files = files  # manifest entries, in the order oragen wrote them
        self.logical = sum(f['size'] for f in files)


class Result:
    """One tool's figures for one phase."""

    def __init__(self, wall, cpu, added=None, note=''):
        self.wall = wall
        self.cpu = cpu
        self.added = added
        self.note = note


class Tool:
    """A deduplicating store under test.  Subclasses run the phases."""

    name = None

    def __init__(self, bench):
        self.bench = bench
        self.dir = os.path.join(bench.work, self.name)
        self.results = {}
        self.peak_rss = 0
        self.stored = None
        self.stored_after = {}
        self.stored_migrated = None

    def setup(self):
        os.mkdir(self.dir)

    def cleanup(self):
        pass

    def version(self):
        return ''

    def log(self, what):
        return os.path.join(self.bench.logs, f'{self.name}-{what}.log')


class Fratier(Tool):
    name = 'fratier'

    def __init__(self, bench):
        super().__init__(bench)
        self.daemon = None
        self.daemon_log = None
        self.throttled = 0.0  # the seals' throttle waits at the end of the last phase, s
        self.data = os.path.join(self.dir, 'data')
        self.mnt = os.path.join(self.dir, 'mnt')

    def version(self):
        return f'{sh([self.bench.fratierfs, "--version"])} ({build_type(build_of(self.bench.fratierfs))})'

    def setup(self):
        super().setup()
        os.mkdir(self.data)
        os.mkdir(self.mnt)
        opts = f'data={self.data},seal_delay={self.bench.args.seal_delay}'
        if self.bench.args.zstd_level is not None:
            # A config file instead of data=: the same tiers, every deduplicated class at that level.
            conf = os.path.join(self.dir, 'fratier.conf')
            for tier in ('hot', 'capacity'):
                os.mkdir(os.path.join(self.data, tier))
            with open(conf, 'w') as f:
                f.write(zstd_level_config(self.data, self.bench.args.zstd_level))
            opts = f'config={conf},seal_delay={self.bench.args.seal_delay}'
        if self.bench.args.mount_opts:
            opts += ',' + self.bench.args.mount_opts
        self.daemon_log = self.log('daemon')
        self.daemon = Daemon(self.bench.fratierfs, opts, self.mnt, self.daemon_log).start()

    def check_daemon(self):
        self.daemon.check()

    def cleanup(self):
        if self.daemon is not None:
            self.daemon.stop()
            self.daemon = None

    def daemon_cpu(self):
        """utime+stime of the daemon, all threads."""
        return self.daemon.cpu_seconds()

    def daemon_hwm(self):
        with open(f'/proc/{self.daemon.proc.pid}/status') as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) * 1024
        return 0

    def stored_bytes(self):
        """Containers of every tier and the catalog (with its WAL and the room it keeps for a full disk)."""
        hot = os.path.join(self.data, 'hot')
        return du(os.path.join(hot, 'containers'), os.path.join(self.data, 'capacity', 'containers'),
                  *catalog_files(hot))

    def tierctl(self, *args):
        argv = [self.bench.tierctl, '-m', self.mnt] + list(args)
        p = subprocess.run(argv, capture_output=True, text=True)
        if p.returncode != 0:
            raise BenchError(f'{" ".join(argv[:5])} ...: exit {p.returncode}: {p.stderr.strip()}')
        return p.stdout

    def migrate(self, phases):
        """Every file to the capacity tier, then a collection of both tiers."""
        paths = [os.path.join(self.mnt, e['path']) for p in phases for e in p.files]
        self.bench.drop_caches()
        cpu0 = self.daemon_cpu()
        t0 = time.monotonic()
        self.tierctl('migrate', '--to', '1', *paths)
        moved = time.monotonic() - t0
        self.tierctl('gc')
        wall = time.monotonic() - t0
        cpu = self.daemon_cpu() - cpu0
        hot, cap = os.path.join(self.data, 'hot'), os.path.join(self.data, 'capacity')
        catalog = du(*catalog_files(hot))
        note = f'migrate {moved:.1f} s + gc {wall - moved:.1f} s; store: capacity containers ' \
               f'{mib(du(os.path.join(cap, "containers"))):.1f} MiB, hot containers ' \
               f'{mib(du(os.path.join(hot, "containers"))):.1f} MiB, catalog {mib(catalog):.1f} MiB'
        return wall, cpu, note

    def staging_bytes(self):
        return du(os.path.join(self.data, 'hot', 'staging'))

    def backup(self, phase):
        pairs = []
        for entry in phase.files:
            dst = os.path.join(self.mnt, entry['path'])
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            pairs += [self.bench.source(phase, entry), dst]
        self.bench.drop_caches()
        cpu0 = self.daemon_cpu()
        t0 = time.monotonic()
        _, copy_cpu, _ = self.bench.run_measured(['/usr/bin/python3', '-c', IO_CHILD, BENCH_DIR, 'copy']
                                                 + pairs, self.log(phase.name))
        copied = time.monotonic() - t0
        self.wait_sealed(phase)
        wall = time.monotonic() - t0
        cpu = self.daemon_cpu() - cpu0 + copy_cpu
        # Outside the time: a collection folds the catalog's WAL back and cuts it, as one does every gc_interval;
        # without it the WAL's size swings by tens of MiB between runs, and a day's growth with it.
        self.tierctl('gc')
        hot = os.path.join(self.data, 'hot')
        catalog = du(*catalog_files(hot))
        note = f'copy {copied:.1f} s + seal wait {wall - copied:.1f} s; store: containers ' \
               f'{mib(du(os.path.join(hot, "containers"))):.1f} MiB, catalog {mib(catalog):.1f} MiB'
        waited = self.seal_throttled()
        if waited is not None:
            note += f'; seals held back by the throttle {waited - self.throttled:.1f} s'
            self.throttled = waited
        return wall, cpu, note

    def seal_throttled(self):
        """Seconds the seals have waited in the throttle since the mount (summed over
        threads), from tierctl status; None without a tierctl."""
        if not os.access(self.bench.tierctl, os.X_OK):
            return None
        st = json.loads(self.tierctl('status', '--json'))
        return int(st.get('throttle_seal_wait_us', 0)) / 1e6

    def wait_sealed(self, phase):
        pending = [os.path.join(self.mnt, e['path']) for e in phase.files]
        deadline = time.monotonic() + SEAL_TIMEOUT
        progress, progress_cpu = time.monotonic(), self.daemon_cpu()
        while True:
            self.check_daemon()
            still = []
            for path in pending:
                state = os.getxattr(path, STATE_XATTR).decode(errors='replace')
                if not state.startswith('sealed'):
                    if state.startswith('raw passthrough'):
                        raise BenchError(f'{path}: class passthrough, it will never be sealed')
                    still.append(path)
            now = time.monotonic()
            if len(still) < len(pending):
                progress, progress_cpu = now, self.daemon_cpu()
            pending = still
            # Sealed means deduplicated, compressed and the raw staging file
            # freed: the state flips at the commit, the unlink comes after
            # the catalog's sync (fs_data_seal()).
            if not pending and not self.staging_bytes():
                break
            # Files left raw while the daemon idles are not queued any more:
            # waiting on would only end at SEAL_TIMEOUT.
            if pending and now - progress > STALL_SECONDS and \
                    self.daemon_cpu() - progress_cpu < STALL_CPU_SECONDS:
                raise BenchError(f'{len(pending)} file(s) still raw {now - progress:.0f}s after '
                                 f'the last one was sealed while the daemon idles, e.g. '
                                 f'{pending[0]}: the sealer dropped them (with seal_delay=0 '
                                 f'a close can race the sealer; try --seal-delay 1)\n'
                                 f'{tail(self.daemon_log)}')
            if now > deadline:
                what = f'e.g. {pending[0]}' if pending else \
                    f'all sealed, {mib(self.staging_bytes()):.1f} MiB left in staging'
                raise BenchError(f'{len(pending)} file(s) not sealed after '
                                 f'{SEAL_TIMEOUT:.0f}s, {what}:\n'
                                 f'{tail(self.daemon_log)}')
            time.sleep(SEAL_POLL)

    def restore(self, phases):
        paths = [os.path.join(self.mnt, e['path']) for p in phases for e in p.files]
        self.bench.cache.cold([self.data])
        cpu0, flt0 = self.daemon_cpu(), self.daemon.minor_faults()
        wall, cpu, _ = self.bench.run_measured(['/usr/bin/python3', '-c', IO_CHILD, BENCH_DIR, 'read']
                                               + paths, self.log('restore'))
        dcpu = self.daemon_cpu() - cpu0
        cpu += dcpu
        faults = self.daemon.minor_faults() - flt0
        # A second read, untimed, so hashing does not slow the timed one.
        for p in phases:
            self.bench.verify(p, self.mnt)
        self.peak_rss = self.daemon_hwm()
        gb = sum(p.logical for p in phases) / 1e9
        return wall, cpu, f'read through the mount, 1 MiB reads; daemon {dcpu / gb:.2f} CPU s/GB, ' \
                          f'{faults / gb:.0f} minor faults/GB'


class Peer(Tool):
    """A backup program run as one command per phase and one per restore."""

    binary = None

    def env(self):
        return dict(os.environ)

    def run(self, argv, what, cwd=None):
        wall, cpu, rss = self.bench.run_measured(argv, self.log(what), cwd=cwd, env=self.env())
        self.peak_rss = max(self.peak_rss, rss)
        return wall, cpu

    def backup(self, phase):
        self.bench.drop_caches()
        wall, cpu = self.run(self.backup_argv(phase), phase.name,
                             cwd=self.bench.phase_dir(phase))
        return wall, cpu, ''

    def restore(self, phases):
        base = os.path.join(self.bench.work, 'restore')
        os.mkdir(base)
        try:
            self.bench.cache.cold([self.dir])
            wall = cpu = 0.0
            for p in phases:
                dest = os.path.join(base, p.name)
                os.mkdir(dest)
                w, c = self.run(self.restore_argv(p, dest), f'restore-{p.name}', cwd=dest)
                wall += w
                cpu += c
            # Written is not restored until it is on disk.
            t0 = time.monotonic()
            subprocess.run(['sync', '-f', base], check=True)
            wall += time.monotonic() - t0
            for p in phases:
                self.bench.verify(p, os.path.join(base, p.name))
        finally:
            shutil.rmtree(base, ignore_errors=True)
        return wall, cpu, 'extract + sync'

    def version(self):
        out = sh([self.binary, '--version'])
        return out.splitlines()[0] if out else '?'


class Borg(Peer):
    name = 'borg'
    binary = 'borg'
    chunker = None

    def __init__(self, bench):
        super().__init__(bench)
        self.repo = os.path.join(self.dir, 'repo')

    def env(self):
        env = dict(os.environ)
        # Cache and keys in the scratch dir, not in root's home.
        env['BORG_BASE_DIR'] = os.path.join(self.dir, 'home')
        env['BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK'] = 'yes'
        env['BORG_RELOCATED_REPO_ACCESS_IS_OK'] = 'yes'
        return env

    def setup(self):
        super().setup()
        self.run(['borg', 'init', '-e', 'none', self.repo], 'init')

    def backup_argv(self, phase):
        argv = ['borg', 'create', '--compression', 'zstd,3']
        if self.chunker:
            argv += ['--chunker-params', self.chunker]
        return argv + [f'{self.repo}::{phase.name}', '.']

    def restore_argv(self, phase, dest):
        return ['borg', 'extract', f'{self.repo}::{phase.name}']

    def stored_bytes(self):
        return du(self.repo)


class Borg64k(Borg):
    name = 'borg-64k'
    chunker = 'buzhash,14,18,16,4095'


class Restic(Peer):
    name = 'restic'
    binary = 'restic'

    def __init__(self, bench):
        super().__init__(bench)
        self.repo = os.path.join(self.dir, 'repo')

    def version(self):
        return sh(['restic', 'version'])

    def env(self):
        env = dict(os.environ)
        env['RESTIC_REPOSITORY'] = self.repo
        env['RESTIC_PASSWORD'] = RESTIC_PASSWORD
        env['RESTIC_CACHE_DIR'] = os.path.join(self.dir, 'cache')
        env['RESTIC_COMPRESSION'] = 'auto'
        return env

    def setup(self):
        super().setup()
        # Format 2 is the one with compression.
        self.run(['restic', 'init', '--repository-version', '2'], 'init')

    def backup_argv(self, phase):
        return ['restic', 'backup', '--quiet', '--tag', phase.name, '.']

    def restore_argv(self, phase, dest):
        return ['restic', 'restore', 'latest', '--tag', phase.name, '--target', dest]

    def stored_bytes(self):
        return du(self.repo)


class Casync(Peer):
    name = 'casync'
    binary = 'casync'

    def __init__(self, bench):
        super().__init__(bench)
        self.store = os.path.join(self.dir, 'store')

    def index(self, phase):
        return os.path.join(self.dir, f'{phase.name}.caidx')

    def backup_argv(self, phase):
        return ['casync', 'make', f'--store={self.store}', self.index(phase),
                self.bench.phase_dir(phase)]

    def restore_argv(self, phase, dest):
        return ['casync', 'extract', f'--store={self.store}', self.index(phase), dest]

    def stored_bytes(self):
        return du(self.dir)


TOOL_CLASSES = {c.name: c for c in (Fratier, Borg, Borg64k, Restic, Casync)}


class Bench:
    def __init__(self, args):
        self.args = args
        self.fratierfs = os.path.abspath(args.fratierfs)
        self.tierctl = os.path.abspath(args.tierctl)
        self.work = None
        self.fra = None
        self.logs = None
        self.child = None
        self.tool = None
        self.tools = []
        self.manifest = None
        self.phases = []
        self.hashes = {}
        self.native = []
        self.pt = []  # MB/s through bench/passthrough, as native
        self.passthrough = os.path.join(build_of(self.fratierfs), 'bench', 'passthrough')
        self.pt_daemon = None
        self.native_copy_s = []  # per run: wall s of a plain copy of every phase
        self.cache = PageCache()
        self.load_start = os.getloadavg()

    # -- setup / teardown ---------------------------------------------------

    def setup(self):
        self.check_tools()
        base = os.path.abspath(self.args.workdir)
        os.makedirs(base, exist_ok=True)
        self.work = tempfile.mkdtemp(prefix='fratier-dedup.', dir=base)
        self.cache.own(self.work)
        self.logs = os.path.join(self.work, 'logs')
        os.mkdir(self.logs)
        if self.args.fra:
            self.fra = os.path.abspath(self.args.fra)
            # Its files are read cold as the scratch dir's are (benchlib.PageCache.cold()).
            self.cache.own(self.fra)
            print(f'using the FRA in {self.fra} (not regenerated)', flush=True)
        else:
            self.fra = os.path.join(self.work, 'fra')
            self.generate()
        with open(os.path.join(self.fra, 'manifest.json')) as f:
            self.manifest = json.load(f)
        self.make_phases()
        logical = self.manifest['totals']['logical_bytes']
        # The FRA itself, then the largest of: a tool's store (at most the
        # logical size) plus a full restore, or fratier's staging + store.
        need = 2 * logical + FREE_MARGIN
        free = shutil.disk_usage(self.work).free
        if free < need:
            raise BenchError(f'{base}: {free >> 30} GiB free, need {need >> 30} GiB '
                             f'(stores + a full restore of {mib(logical):.0f} MiB + margin)')
        self.link_phases()
        print('hashing the originals (SHA-256, for the restore check)', flush=True)
        for p in self.phases:
            for e in p.files:
                self.hashes[e['path']] = sha256_file(os.path.join(self.fra, e['path']))

    def check_tools(self):
        if 'fratier' in self.args.tools and not os.access(self.fratierfs, os.X_OK):
            raise BenchError(f'{self.fratierfs} not found: build it or pass --fratierfs PATH')
        if 'fratier' in self.args.tools and not self.args.no_migrate and \
                not os.access(self.tierctl, os.X_OK):
            raise BenchError(f'{self.tierctl} not found: build it, pass --tierctl PATH or --no-migrate')
        if not self.args.fra and not os.access(self.args.oragen, os.X_OK):
            raise BenchError(f'{self.args.oragen} not found: build it (ninja -C build '
                             f'tools/oragen/oragen) or pass --oragen PATH')
        missing = sorted({PEER_PACKAGES[t.split('-')[0]] for t in self.args.tools
                          if t != 'fratier' and shutil.which(t.split('-')[0]) is None})
        if missing:
            print(f'installing {" ".join(missing)} (apt-get)', flush=True)
            r = subprocess.run(['apt-get', 'install', '-y', '-q'] + missing,
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise BenchError(f'apt-get install {" ".join(missing)} failed:\n'
                                 f'{r.stderr.strip()}')

    def generate(self):
        size, days, arclog = SCALES[self.args.scale]
        days = self.args.days or days
        argv = [self.args.oragen, '--out', self.fra, '--seed', str(self.args.seed),
                '--days', str(days), '--datafile-size', size, '--archivelog-size', arclog,
                '--quiet']
        print(f'generating: {" ".join(argv[1:])}', flush=True)
        t0 = time.monotonic()
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            raise BenchError(f'oragen failed (exit {r.returncode}):\n{r.stderr.strip()}')
        print(f'generated in {time.monotonic() - t0:.1f} s', flush=True)

    def make_phases(self):
        files = self.manifest['files']
        days = self.manifest['params']['days']
        for d in range(1, days + 1):
            full = [f for f in files if f['day'] == d and
                    (f['class'] == 'imagecopy' or
                     (f['class'] == 'backuppiece' and f.get('content') == 'datafile'))]
            self.phases.append(Phase(f'day{d}', f'day {d} full backup (pieces + image copies)',
                                     full))
        arch = [f for f in files if f['class'] == 'archivelog' or
                (f['class'] == 'backuppiece' and f.get('content') == 'archivelog')]
        self.phases.append(Phase('arch', 'archived logs + their backup pieces, all days', arch))
        listed = sum(len(p.files) for p in self.phases)
        if listed != len(files):
            raise BenchError(f'manifest has {len(files)} files, the phases take {listed}: '
                             f'unknown class or content')

    def phase_dir(self, phase):
        return os.path.join(self.work, 'phases', phase.name)

    def source(self, phase, entry):
        return os.path.join(self.phase_dir(phase), entry['path'])

    def link_phases(self):
        """One tree per phase, hard links into the FRA: what each tool backs up at once."""
        for p in self.phases:
            for e in p.files:
                dst = self.source(p, e)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                try:
                    os.link(os.path.join(self.fra, e['path']), dst)
                except OSError as err:
                    raise BenchError(f'cannot hard-link {e["path"]} into {self.work} '
                                     f'({err.strerror}): put --fra on the same filesystem '
                                     f'as --workdir') from None

    def cleanup(self):
        # Cleanup must finish even if Ctrl-C is pressed again.
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            if self.child is not None:
                kill_group(self.child)
                self.child = None
            if self.pt_daemon is not None:
                self.pt_daemon.stop()
                self.pt_daemon = None
            if self.tool is not None:
                self.tool.cleanup()
                self.tool = None
            if self.work is not None:
                shutil.rmtree(self.work, ignore_errors=True)
                self.work = None
        finally:
            signal.signal(signal.SIGINT, old)

    # -- measuring ----------------------------------------------------------

    def drop_caches(self):
        self.cache.drop()

    def run_measured(self, argv, log, cwd=None, env=None):
        """Runs argv to completion; returns wall s, CPU s (user+sys) and peak RSS bytes."""
        with open(log, 'ab') as f:
            # Own process group so cleanup can kill whatever it forks.
            self.child = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                          stdout=f, stderr=f, process_group=0)
        t0 = time.monotonic()
        _, status, ru = os.wait4(self.child.pid, 0)
        wall = time.monotonic() - t0
        self.child.returncode = os.waitstatus_to_exitcode(status)
        rc, self.child = self.child.returncode, None
        if rc != 0:
            shown = ' '.join(a if len(a) < 200 else a[:40] + '...' for a in argv[:6])
            raise BenchError(f'{shown} ... failed (exit {rc}):\n{tail(log)}')
        return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024

    def verify(self, phase, root):
        for e in phase.files:
            path = os.path.join(root, e['path'])
            try:
                digest = sha256_file(path)
            except OSError as err:
                raise BenchError(f'restore check: {path}: {err.strerror}') from None
            if digest != self.hashes[e['path']]:
                raise BenchError(f'restore check: {path} differs from the original')

    def native_read(self):
        """MB/s of the same reader over the plain FRA directory, and through bench/passthrough
        over it (FUSE's ceiling), cold as every restore (benchlib.PageCache.cold())."""
        rels = [e['path'] for p in self.phases for e in p.files]
        src = [os.path.join(self.fra, r) for r in rels]
        self.cache.cold(src)
        wall, _, _ = self.run_measured(['/usr/bin/python3', '-c', IO_CHILD, BENCH_DIR, 'read'] + src,
                                       os.path.join(self.logs, 'native-read.log'))
        mbs = self.logical() / MB / wall
        self.native.append(mbs)
        if not os.access(self.passthrough, os.X_OK):
            return mbs, None
        mnt = os.path.join(self.work, 'ptmnt')
        os.makedirs(mnt, exist_ok=True)
        self.pt_daemon = Daemon(self.passthrough, f'source={self.fra},read_ahead_kb={FRATIER_READ_AHEAD_KB}',
                                mnt, os.path.join(self.logs, 'passthrough.log')).start()
        try:
            self.cache.cold(src)
            wall, _, _ = self.run_measured(['/usr/bin/python3', '-c', IO_CHILD, BENCH_DIR, 'read']
                                           + [os.path.join(mnt, r) for r in rels],
                                           os.path.join(self.logs, 'passthrough-read.log'))
        finally:
            self.pt_daemon.stop()
            self.pt_daemon = None
        pt = self.logical() / MB / wall
        self.pt.append(pt)
        return mbs, pt

    def native_copy(self):
        """Wall s of the same copy (1 MiB writes, fsync before close) of every phase into a
        plain directory of the workdir's disk, cold cache per phase: what the target of a
        sealed ingest is a multiple of."""
        dst_root = os.path.join(self.work, 'native-copy')
        total = 0.0
        for p in self.phases:
            pairs = []
            for e in p.files:
                dst = os.path.join(dst_root, e['path'])
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                pairs += [self.source(p, e), dst]
            self.drop_caches()
            wall, _, _ = self.run_measured(['/usr/bin/python3', '-c', IO_CHILD, BENCH_DIR, 'copy'] + pairs,
                                           os.path.join(self.logs, 'native-copy.log'))
            total += wall
        shutil.rmtree(dst_root, ignore_errors=True)
        self.native_copy_s.append(total)
        return total

    def logical(self):
        return sum(p.logical for p in self.phases)

    # -- the run ------------------------------------------------------------

    def run(self):
        self.print_header()
        print(f'\nnative read of the FRA (cold cache, 1 MiB reads): {fmt_floor(*self.native_read())}',
              flush=True)
        print(f'plain copy of every phase to the workdir\'s disk (1 MiB writes, fsync before '
              f'close, cold cache): {self.native_copy():.1f} s', flush=True)
        hdr = f'\n{"tool":<9} {"phase":<8} {"logical MiB":>11} {"wall s":>8} {"MB/s":>8} ' \
              f'{"CPU s":>8} {"added MiB":>10} {"reduction":>9}  notes'
        print(hdr)
        print('-' * (len(hdr) + 30))
        for name in self.args.tools:
            tool = TOOL_CLASSES[name](self)
            self.tools.append(tool)
            self.tool = tool
            tool.setup()
            prev = tool.stored_bytes()
            for p in self.phases:
                wall, cpu, note = tool.backup(p)
                now = tool.stored_bytes()
                tool.results[p.name] = Result(wall, cpu, now - prev, note)
                tool.stored_after[p.name] = now
                prev = now
                self.print_row(tool, p.name, p.logical, tool.results[p.name])
            tool.stored = prev
            wall, cpu, note = tool.restore(self.phases)
            tool.results['restore'] = Result(wall, cpu, None, note)
            self.print_row(tool, 'restore', self.logical(), tool.results['restore'])
            if hasattr(tool, 'migrate') and not self.args.no_migrate:
                wall, cpu, note = tool.migrate(self.phases)
                now = tool.stored_bytes()
                tool.results['migrate'] = Result(wall, cpu, now - prev, note)
                tool.stored_migrated = now
                self.print_row(tool, 'migrate', self.logical(), tool.results['migrate'])
                wall, cpu, note = tool.restore(self.phases)
                tool.results['restore-cap'] = Result(wall, cpu, None, note + ', from the capacity tier')
                self.print_row(tool, 'restore', self.logical(), tool.results['restore-cap'])
            tool.cleanup()
            self.tool = None
            shutil.rmtree(tool.dir, ignore_errors=True)
        print(f'\nnative read of the FRA again (cold cache): {fmt_floor(*self.native_read())}')
        print(f'plain copy again: {self.native_copy():.1f} s')
        self.print_summary()

    def print_row(self, tool, phase, logical, r):
        red = logical / r.added if r.added else None
        added = mib(r.added) if r.added is not None else None
        print(f'{tool.name:<9} {phase:<8} {mib(logical):>11.1f} {r.wall:>8.1f} '
              f'{logical / MB / r.wall:>8.1f} {r.cpu:>8.1f} {fmt(added):>10} '
              f'{fmt_x(red):>9}  {r.note}', flush=True)

    def print_header(self):
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
        fs = sh(['findmnt', '-n', '-o', 'SOURCE,FSTYPE,OPTIONS', '-T', self.work])
        pr = self.manifest['params']
        print('machine')
        print(f'  kernel    {platform.release()} ({platform.machine()})')
        print(f'  cpu       {cpu}, {os.cpu_count()} online')
        print(f'  memory    {mem_kib >> 20} GiB')
        print(f'  load avg  {" ".join(f"{x:.2f}" for x in self.load_start)} (1/5/15 min, '
              f'at start)')
        print(f'  workdir   {self.work}')
        print(f'  fs        {fs or "?"}')
        print('tools')
        for name in self.args.tools:
            print(f'  {name:<9} {TOOL_CLASSES[name](self).version()}')
        if 'fratier' in self.args.tools:
            extra = f',{self.args.mount_opts}' if self.args.mount_opts else ''
            if self.args.zstd_level is None:
                print(f'  fratier   -o data=DIR,seal_delay={self.args.seal_delay}{extra}')
            else:
                print(f'  fratier   -o config=FILE,seal_delay={self.args.seal_delay}{extra} (data=DIR\'s tiers, '
                      f'zstd_level = {self.args.zstd_level} in every [class])')
        print('data (oragen)')
        print(f'  {pr["datafiles"]} x {mib(pr["datafile_size"]):.0f} MiB datafiles, '
              f'{pr["days"]} days, {pr["archivelogs_per_day"]} x '
              f'{mib(pr["archivelog_size"]):.0f} MiB logs/day, {pr["image_copies"]} image '
              f'copy/day, change rate {pr["change_rate"]}, seed {pr["seed"]}')
        print(f'  {len(self.manifest["files"])} files, {mib(self.logical()):.1f} MiB logical')
        for p in self.phases:
            print(f'  phase {p.name:<5} {len(p.files):>3} files {mib(p.logical):>9.1f} MiB  '
                  f'{p.title}')

    def print_summary(self):
        logical = self.logical()
        native = sum(self.native) / len(self.native)
        pt = sum(self.pt) / len(self.pt) if self.pt else None
        copy_s = sum(self.native_copy_s) / len(self.native_copy_s)
        days = [p for p in self.phases if p.name.startswith('day')]
        day2 = days[1].name if len(days) > 1 else None
        backups = [p.name for p in self.phases]
        rows = {}
        for t in self.tools:
            b_wall = sum(t.results[n].wall for n in backups)
            rs = t.results['restore']
            rows[t.name] = {
                'stored': t.stored,
                'red': logical / t.stored if t.stored else None,
                'day2': (days[1].logical / t.results[day2].added
                         if day2 and t.results[day2].added else None),
                'bcpu': sum(t.results[n].cpu for n in backups),
                'rcpu': rs.cpu,
                'rss': t.peak_rss,
                'bmbs': logical / MB / b_wall,
                'bcopy': b_wall / copy_s,
                'rmbs': logical / MB / rs.wall,
                'rnat': logical / MB / rs.wall / native,
                'rpt': logical / MB / rs.wall / pt if pt else None,
            }
        print(f'\nsummary: {mib(logical):.1f} MiB logical; MB = 10^6 bytes; stored = du of '
              f'the store after all phases; native read {native:.1f} MB/s '
              f'(mean of {len(self.native)}), through bench/passthrough {fmt(pt)} MB/s; plain copy {copy_s:.1f} s '
              f'({logical / MB / copy_s:.1f} MB/s, mean of {len(self.native_copy_s)}); '
              f'backup / copy = every phase\'s backup (for fratier: copy + until sealed) '
              f'over the plain copy')
        hdr = f'{"tool":<20} {"stored MiB":>10} {"reduction":>9} {"day-2 red.":>10} ' \
              f'{"backup MB/s":>11} {"backup / copy":>13} {"backup CPU s":>12} {"restore MB/s":>12} ' \
              f'{"vs native":>9} {"vs pt":>6} {"restore CPU s":>13} {"peak RSS MiB":>12}'
        print(hdr)
        print('-' * len(hdr))
        for name, r in rows.items():
            print(f'{name:<20} {mib(r["stored"]):>10.1f} {fmt_x(r["red"]):>9} '
                  f'{fmt_x(r["day2"]):>10} {r["bmbs"]:>11.1f} {fmt_x(r["bcopy"]):>13} {r["bcpu"]:>12.1f} '
                  f'{r["rmbs"]:>12.1f} {r["rnat"]:>9.2f} {fmt(r["rpt"], 2):>6} {r["rcpu"]:>13.1f} '
                  f'{mib(r["rss"]):>12.1f}')
        for t in self.tools:
            if t.stored_migrated is None:
                continue
            mg, rs = t.results['migrate'], t.results['restore-cap']
            print(f'{t.name + " (capacity)":<20} {mib(t.stored_migrated):>10.1f} '
                  f'{fmt_x(logical / t.stored_migrated):>9} {"":>10} '
                  f'{logical / MB / mg.wall:>11.1f} {"":>13} {mg.cpu:>12.1f} '
                  f'{logical / MB / rs.wall:>12.1f} {logical / MB / rs.wall / native:>9.2f} '
                  f'{fmt(logical / MB / rs.wall / pt if pt else None, 2):>6} '
                  f'{rs.cpu:>13.1f} {"":>12}   (after tierctl migrate --to 1 + gc; '
                  f'backup columns: the migration)')
        ideal = self.manifest['ideal']
        print(f'{"ideal, dedup only":<20} {mib(ideal["unique_bytes"]):>10.1f} '
              f'{fmt_x(logical / ideal["unique_bytes"]):>9}   (manifest: each distinct 8 KiB '
              f'block and each log once, no framing)')
        if ideal.get('zstd3_bytes'):
            print(f'{"ideal, + zstd-3":<20} {mib(ideal["zstd3_bytes"]):>10.1f} '
                  f'{fmt_x(logical / ideal["zstd3_bytes"]):>9}   (the same, each block / 8 KiB '
                  f'of log compressed alone)')
            stream = ideal.get('zstd3_stream_bytes')
            if stream:
                print(f'{"ideal, zstd-3 stream":<20} {mib(stream):>10.1f} '
                      f'{fmt_x(logical / stream):>9}   (the same unique content as one zstd -3 stream)')
            for t in self.tools:
                for label, stored in ((t.name, t.stored), (t.name + ' (capacity)', t.stored_migrated)):
                    if stored:
                        print(f'  {label:<18} {stored / ideal["zstd3_bytes"]:.3f} x the ideal + zstd-3'
                              + (f', {stored / stream:.3f} x the one-stream ideal' if stream else ''))
        self.print_versus(rows)
        load = os.getloadavg()
        busy = '  -- busier than its cores: figures are noisy' if load[1] > os.cpu_count() else ''
        print(f'load avg at end: {" ".join(f"{x:.2f}" for x in load)} (1/5/15 min){busy}')

    def print_versus(self, rows):
        fr = rows.get('fratier')
        peers = {n: r for n, r in rows.items() if n != 'fratier'}
        if fr is None or not peers:
            return
        # (label, key, higher is better, format)
        metrics = [('reduction', 'red', True, fmt_x), ('day-2 reduction', 'day2', True, fmt_x),
                   ('backup MB/s', 'bmbs', True, fmt), ('backup / plain copy', 'bcopy', False, fmt_x),
                   ('backup CPU s', 'bcpu', False, fmt),
                   ('restore MB/s', 'rmbs', True, fmt), ('restore CPU s', 'rcpu', False, fmt),
                   ('peak RSS MiB', 'rss', False, lambda v: fmt(mib(v)))]
        for p in self.phases:
            for t in self.tools:
                r = t.results[p.name]
                rows[t.name][f'mbs-{p.name}'] = p.logical / MB / r.wall
            metrics.append((f'{p.name} MB/s', f'mbs-{p.name}', True, fmt))
        print('\nfratier against the best peer (ratio > 1: fratier better for MB/s and '
              'reduction; < 1: fratier better for CPU and RSS)')
        hdr = f'{"metric":<20} {"fratier":>10} {"best peer":>10}  {"(which)":<10} ' \
              f'{"fratier/best":>12}'
        print(hdr)
        print('-' * len(hdr))
        for label, key, higher, f in metrics:
            cand = [(r[key], n) for n, r in peers.items() if r[key] is not None]
            if not cand or fr[key] is None:
                continue
            best, who = max(cand) if higher else min(cand)
            ratio = fr[key] / best if best else None
            print(f'{label:<20} {f(fr[key]):>10} {f(best):>10}  {who:<10} {fmt(ratio, 2):>12}')


def main():
    ap = argparse.ArgumentParser(description='fratierfs against borg, restic and casync on '
                                             'Oracle-like data')
    ap.add_argument('--scale', choices=SCALES, default=DEFAULT_SCALE,
                    help='data size: ' + ', '.join(f'{k} = 4 x {v[0]} datafiles, {v[1]} days'
                                                   for k, v in SCALES.items())
                    + f' (default {DEFAULT_SCALE})')
    ap.add_argument('--days', type=int, help='days to simulate (default: the scale\'s)')
    ap.add_argument('--seed', type=int, default=1, help='oragen seed (default 1)')
    ap.add_argument('--tools', default=','.join(ALL_TOOLS),
                    help=f'comma-separated, in run order (default {",".join(ALL_TOOLS)})')
    ap.add_argument('--fratierfs', default=DEFAULT_FRATIERFS,
                    help=f'fratierfs binary (default {DEFAULT_FRATIERFS})')
    ap.add_argument('--oragen', default=DEFAULT_ORAGEN,
                    help='oragen binary (default SRC/build/tools/oragen/oragen)')
    ap.add_argument('--tierctl', default=DEFAULT_TIERCTL,
                    help='tierctl binary, for the migration (default SRC/build/tools/tierctl/tierctl)')
    ap.add_argument('--no-migrate', action='store_true',
                    help='no migration to the capacity tier and no second restore')
    ap.add_argument('--workdir', default='/var/tmp',
                    help='a scratch dir is made in here and removed at the end (default /var/tmp)')
    ap.add_argument('--fra', help='use this existing oragen output (with manifest.json) instead '
                                  'of generating; must be on the workdir\'s filesystem')
    ap.add_argument('--seal-delay', type=int, default=0,
                    help='fratierfs -o seal_delay=S: quiet seconds before a closed file is '
                         'sealed (default 0; counted in the phase time)')
    ap.add_argument('--mount-opts', default='',
                    help='extra -o options for fratierfs, comma-separated')
    ap.add_argument('--zstd-level', type=int,
                    help='fratier: compress every deduplicated class at this zstd level on the hot tier '
                         '(a config file with zstd_level in each [class]; default the daemon\'s own)')
    benchlib.add_guest_memory_option(ap)
    args = ap.parse_args()
    args.tools = [t for t in args.tools.split(',') if t]
    bad = [t for t in args.tools if t not in TOOL_CLASSES]
    if bad or not args.tools or len(set(args.tools)) != len(args.tools):
        ap.error(f'--tools: a list of distinct names from {",".join(ALL_TOOLS)}')
    if args.seal_delay < 0:
        ap.error('--seal-delay must not be negative')
    if args.days is not None and args.days < 1:
        ap.error('--days must be at least 1')
    if args.fra and args.days is not None:
        ap.error('--days applies to generated data, not to --fra')
    if os.geteuid() != 0:
        ap.error('run as root (mounting, trusted.* xattrs)')

    def interrupted(signum, frame):
        raise Interrupted(signal.Signals(signum).name)

    # Also when started with SIGINT ignored (a background job of a script).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGHUP, interrupted)

    bench = Bench(args)
    return benchlib.run('bench-dedup', bench, args.hold_guest_memory)


if __name__ == '__main__':
    sys.exit(main())
