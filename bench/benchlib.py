# SPDX-License-Identifier: GPL-2.0-or-later
"""What the benchmarks in bench/ share: running fratierfs (mount, unmount,
its CPU time), killing a process group, the page cache, the build type of
a binary, and formatting.

Imported by bench-archivelog.py, bench-dedup.py, bench-restore.py, bench-seal.py and bench-tier.py, which
find it next to themselves.
"""

import json
import os
import re
import shutil
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


def run(name, bench, hold_guest_memory=False):
    """Runs bench.setup() and bench.run(), always bench.cleanup(); returns
    the exit status: 0, 1 on BenchError (said on stderr), 130 if interrupted.
    Says first and last what the guest's memory did (GuestMemory), held for
    the run if hold_guest_memory."""
    guest = GuestMemory()
    try:
        if hold_guest_memory:
            guest.hold()
        print(f'guest memory: {guest.describe()}', flush=True)
        bench.setup()
        bench.run()
        print(f'guest memory: {guest.returned()}')
    except BenchError as e:
        print(f'{name}: {e}', file=sys.stderr)
        return 1
    except (KeyboardInterrupt, Interrupted):
        print(f'\n{name}: interrupted, cleaning up', file=sys.stderr)
        return 130
    finally:
        bench.cleanup()
        guest.release()
    return 0


def add_guest_memory_option(ap):
    ap.add_argument('--hold-guest-memory', action='store_true',
                    help='on a VM with free page reporting: keep freed memory from being returned to the '
                         'host for the run, after touching the free memory once (benchlib.GuestMemory)')


class GuestMemory:
    """Free page reporting: a VM's guest hands blocks of memory it frees back
    to its host, which unmaps them; the guest's next touch of such a page
    faults into the host.  On the development VM (Firecracker, nested) a
    first touch then runs at 0.4-2 GB/s against 25 GB/s for a page touched
    before, and every cold measurement frees what it evicts.  Whoever fills
    fresh page-cache pages on a guest CPU pays for it: a FUSE daemon
    copying its replies into the mount's page cache does (the passthrough
    read at 0.43-0.73 of native with it, 0.89-0.95 held: bench/README.md,
    "Guest memory"), a native read does not (its disk's DMA lands in the host).

    hold() raises the reporting order above the buddy allocator's largest
    (MAX_PAGE_ORDER, 10 on x86-64: no free block qualifies) and touches the
    free memory once so the host backs it; release() puts the order back."""

    PARAMS = '/sys/module/page_reporting/parameters'
    HOLD_ORDER = 11
    WARM_MARGIN = 2 << 30  # of MemAvailable left untouched by the warming
    WARM_CHILD = 'import mmap, sys; n = int(sys.argv[1]); m = mmap.mmap(-1, n); m[::4096] = b"\\1" * (n >> 12)'

    def __init__(self):
        self.order = self.param('page_reporting_order')
        self.reported = self.param('reported_kib')
        self.held = False  # the order is ours to put back
        self.warm_size = 0
        self.warm_mbs = 0.0

    def param(self, name):
        try:
            with open(os.path.join(self.PARAMS, name)) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def set_order(self, order):
        with open(os.path.join(self.PARAMS, 'page_reporting_order'), 'w') as f:
            f.write(str(order))

    def hold(self):
        if self.order is None:
            return
        try:
            self.set_order(self.HOLD_ORDER)
        except OSError as e:
            raise BenchError(f'--hold-guest-memory: page_reporting_order: {e.strerror}') from None
        # Written, so put back even if the kernel clamped it.
        self.held = True
        if self.param('page_reporting_order') != self.HOLD_ORDER:
            raise BenchError(f'--hold-guest-memory: page_reporting_order did not take {self.HOLD_ORDER}')
        with open('/proc/meminfo') as f:
            avail = next(int(ln.split()[1]) << 10 for ln in f if ln.startswith('MemAvailable:'))
        size = (max(avail - self.WARM_MARGIN, 0) >> 12) << 12
        if size:
            # In a child: a fork inherits its parent's peak RSS, which every
            # peer's RSS measured by wait4() would then report.
            start = time.monotonic()
            p = subprocess.run([sys.executable, '-c', self.WARM_CHILD, str(size)])
            if p.returncode != 0:
                raise BenchError(f'--hold-guest-memory: touching {size >> 20} MiB failed ({p.returncode})')
            self.warm_mbs = size / MB / (time.monotonic() - start)
            self.warm_size = size
        self.reported = self.param('reported_kib')

    def release(self):
        if not self.held:
            return
        try:
            self.set_order(self.order)
            self.held = False
        except OSError as e:
            print(f'page_reporting_order: could not put back {self.order}: {e.strerror}', file=sys.stderr)

    def describe(self):
        if self.order is None:
            return 'no free page reporting (not a VM, or a VM without it): freed memory stays the guest\'s'
        if self.held:
            warmed = (f'{self.warm_size >> 30} GiB of free memory touched once at {self.warm_mbs:.0f} MB/s first'
                      if self.warm_size else 'no memory touched first (MemAvailable under the 2 GiB margin)')
            return f'free page reporting held for this run (order {self.order} -> {self.HOLD_ORDER}); {warmed}'
        return (f'free page reporting on (order {self.order}): memory the run frees goes back to the host '
                f'and costs a host fault at its next touch (--hold-guest-memory holds it)')

    def returned(self):
        now = self.param('reported_kib')
        if now is None or self.reported is None:
            return self.describe()
        return f'{(now - self.reported) >> 10} MiB returned to the host during the run' \
               + (' (reporting held)' if self.held else '')


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


def read_ahead_kb(mnt):
    """The kernel's read-ahead window of the filesystem mounted at mnt (its
    bdi), or None; found through mountinfo, as a stat of a FUSE mount point
    would ask its daemon."""
    dev = None
    with open('/proc/self/mountinfo') as f:
        for line in f:
            fields = line.split()
            point = re.sub(r'\\([0-7]{3})', lambda m: chr(int(m[1], 8)), fields[4])
            if point == mnt:
                dev = fields[2]
    try:
        with open(f'/sys/class/bdi/{dev}/read_ahead_kb') as f:
            return int(f.read())
    except (OSError, ValueError, TypeError):
        return None


def read_files(paths, buf, flags=0):
    """Reads each of paths whole, one after another, with read()s of len(buf)
    bytes into buf (as a restore reads: 1 MiB at a time), opened with
    O_RDONLY | flags (O_DIRECT wants buf page-aligned: an mmap); returns the
    bytes read."""
    n = 0
    for path in paths:
        fd = os.open(path, os.O_RDONLY | flags)
        try:
            while True:
                k = os.readv(fd, [buf])
                if k == 0:
                    break
                n += k
        finally:
            os.close(fd)
    return n


# The classes a fratier config file can set a level for (common/config.h).
DEDUP_CLASSES = ('archivelog', 'backuppiece', 'imagecopy', 'other')


def zstd_level_config(data, level, classes=DEDUP_CLASSES):
    """A fratier config file's text: config_default()'s tiers under data, each class at zstd level on hot."""
    text = f'[fratier]\ndata_dir = {data}\n\n[tier hot]\npath = {data}/hot\n\n[tier capacity]\npath = {data}/capacity\n'
    for c in classes:
        text += f'\n[class {c}]\nzstd_level = {level}\n'
    return text


class PageCache:
    """Evicts the bench's own files from the page cache before a measurement.

    Only the files under the roots given to own() (the bench's scratch
    directory: sources, hot tier, staging, containers, mounts), with
    posix_fadvise(DONTNEED): dropping the whole page cache would empty every
    neighbour's on a shared machine and make their figures, and ours, read
    from the disk.

    cold() is the state every measured read starts from, natively, through
    the passthrough and through fratierfs alike (bench/README.md, "Restore,
    phase 4"): the guest's page cache holds none of the bench's files, and
    the host holds the bytes to be read.  A VM's disk is a file on its host,
    which caches what the guest wrote or read recently (on the development
    VM, the last GB or so of writes, and what was read); the guest can
    neither see nor evict that cache, so a "cold" read is at host-memory
    speed or at the host's disk speed depending on what ran before.  Reading
    the bytes once first makes it the same for every side, every time."""

    def __init__(self):
        self.roots = []
        self.buf = bytearray(MIB)

    def own(self, root):
        self.roots.append(root)

    def cold(self, warm):
        """drop()s, reads every file under the directories (or files) in warm once, drop()s again.
        warm must name where the bytes lie on the disk (source files, a tier's directory),
        never a FUSE mount."""
        paths = []
        for root in warm:
            if os.path.isfile(root):
                paths.append(root)
                continue
            for dirpath, dirs, names in os.walk(root):
                dirs[:] = [d for d in dirs if not os.path.ismount(os.path.join(dirpath, d))]
                paths += [os.path.join(dirpath, n) for n in names
                          if os.path.isfile(os.path.join(dirpath, n))]
        # Out of the guest's cache first, or a file just written would be read from there.
        self.drop()
        for path in paths:
            try:
                read_files([path], self.buf)
            except OSError:
                pass  # gone meanwhile (a collected container): nothing to warm
        self.drop()

    def drop(self):
        os.sync()
        for root in self.roots:
            for dirpath, _, names in os.walk(root):
                for name in names:
                    try:
                        fd = os.open(os.path.join(dirpath, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                    except OSError:
                        continue  # gone meanwhile, a socket, or not ours to open
                    try:
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    except OSError:
                        pass
                    finally:
                        os.close(fd)


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

    def minor_faults(self):
        """Minor page faults of the daemon so far, all threads: first touches of memory (on a
        VM with free page reporting, of memory the host had taken back, bench/README.md)."""
        if self.proc is None:
            return 0
        with open(f'/proc/{self.proc.pid}/stat') as f:
            return int(f.read().rsplit(')', 1)[1].split()[7])

    def peak_rss_mib(self):
        """The daemon's peak resident memory so far (VmHWM), in MiB."""
        if self.proc is None:
            return 0.0
        with open(f'/proc/{self.proc.pid}/status') as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) / 1024
        return 0.0

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


def thread_names(pid):
    """Names of a process's threads (perf reports threads by name, 15 characters)."""
    names = set()
    task = f'/proc/{pid}/task'
    try:
        tids = os.listdir(task)
    except OSError:
        return names
    for tid in tids:
        try:
            with open(os.path.join(task, tid, 'comm')) as f:
                names.add(f.read().strip())
        except OSError:
            pass
    return names


# Where a daemon's CPU time goes, by the symbol (or object) a sample is in,
# first match wins.  What each stands for is in bench/README.md.
PERF_CATEGORIES = (
    ('zstd', lambda dso, sym: 'libzstd' in dso),
    ('XXH3 checksums', lambda dso, sym: 'libxxhash' in dso or sym.startswith('XXH')),
    ('SHA-256', lambda dso, sym: 'libcrypto' in dso or 'sha256' in sym.lower()),
    ('catalog (SQLite)', lambda dso, sym: 'libsqlite3' in dso),
    ('chunker', lambda dso, sym: sym.startswith('dedup_chunker')),
    ('copies in user space', lambda dso, sym: re.match(r'__(memmove|memcpy|memset)', sym) is not None),
    ('copies in the kernel', lambda dso, sym: re.search(
        r'copy_(to|from)_iter|copy_page_|copy_user|__pi_memcpy|rep_mov|fuse_copy|copy_folio|memcpy_orig|'
        r'clear_page|__memset|memcpy', sym) is not None),
    ('malloc/free', lambda dso, sym: re.match(r'_?_?(int_)?(malloc|free|realloc|calloc)|'
                                            r'_int_(malloc|free)|cfree|tcache|arena_|malloc_', sym) is not None),
    ('locks (user)', lambda dso, sym: 'pthread_mutex' in sym or 'pthread_rwlock' in sym
     or 'pthread_cond' in sym or '__lll_lock' in sym),
    ('futex, scheduling, IPIs (kernel)', lambda dso, sym: re.search(
        r'futex|schedule|switch|pvm_irq|irq_enable|safe_halt|try_to_wake|ttwu|enqueue|dequeue|'
        r'update_curr|pick_next|ipi|idle|raw_spin', sym) is not None),
    ('page faults, page cache (kernel)', lambda dso, sym: re.search(
        r'fault|pte|folio|filemap|page_cache|lru|xas_|xa_|readahead|mem_cgroup|pmd|tlb|'
        r'set_pte|alloc_pages|free_unref|rmqueue|__alloc|zap_|unmap|mmap', sym) is not None),
    ('FUSE device and requests (kernel)', lambda dso, sym: 'fuse' in sym and 'kernel.kallsyms' in dso),
    ('ext4, block I/O (kernel)', lambda dso, sym: re.search(r'ext4|jbd2|bio|blk|virtio|iomap|mpage', sym)
     is not None),
    ('other kernel', lambda dso, sym: 'kernel.kallsyms' in dso),
    ('fratier itself', lambda dso, sym: 'fratierfs' in dso or 'passthrough' in dso),
    ('libfuse', lambda dso, sym: 'libfuse' in dso),
    ('other libc', lambda dso, sym: 'libc.so' in dso),
)

# Call sites whose inclusive time (with callees) in the daemon is shown from
# its DWARF call graphs: they overlap (a call site includes those it calls).
PERF_CALL_SITES = (
    ('fuse_session_receive_buf_int', 'libfuse: receive a request from /dev/fuse'),
    ('fuse_reply_buf', 'libfuse: reply from a buffer (writev to /dev/fuse)'),
    ('fuse_reply_iov', 'libfuse: reply from buffers (writev to /dev/fuse)'),
    ('fuse_reply_data', 'libfuse: reply from a descriptor (splice, or its copy fallback)'),
    ('fuse_reply_write', 'libfuse: write reply'),
    ('op_read', 'fs: FUSE read handler'),
    ('op_write_buf', 'fs: FUSE write handler'),
    ('fuse_buf_copy', 'libfuse: fuse_buf_copy (write payloads, spliced replies)'),
    ('fs_readahead_work', 'fs: read-ahead workers'),
    ('dedup_file_read', 'dedup: dedup_file_read'),
    ('catalog_recipe_find', 'catalog: recipe segment look-ups'),
    ('catalog_chunk_get', 'catalog: chunk location look-ups'),
    ('catalog_chunks_get', 'catalog: chunk location look-ups, batched'),
    ('sqlite3_step', 'catalog: every SQLite statement'),
    ('dir_pread', 'tier: container reads (directory backend)'),
    ('dedup_frame_decode', 'dedup: frame checks + decompression'),
    ('ZSTD_decompress_usingDDict', 'zstd: decompression'),
    ('XXH3_64bits', 'XXH3 checksums (whole buffers)'),
    ('XXH3_64bits_update', 'XXH3 checksums (streamed)'),
    ('dedup_hasher_digest', 'SHA-256 of chunks'),
    ('fs_data_feed', 'fs: seal feeding (staging reads + writer)'),
    ('dedup_writer_feed', 'dedup: writer feed (chunk, hash, look up, compress, append)'),
    ('dedup_chunker_scan', 'dedup: chunker'),
    ('ZSTD_compressCCtx', 'zstd: compression'),
    ('ZSTD_compress2', 'zstd: compression'),
    ('dedup_writer_finish', 'dedup: writer finish (last frames, container fsync)'),
    ('dedup_writer_commit', 'dedup: writer commit (refs, recipe)'),
    ('catalog_commit', 'catalog: commits'),
    ('__libc_pread64', 'pread (containers, staging)'),
    ('__libc_pwrite64', 'pwrite (staging, containers)'),
    ('fdatasync', 'fdatasync'),
    ('fsync', 'fsync'),
    ('asm_exc_page_fault', 'page faults'),
    ('__memmove_avx512_unaligned_erms', 'memcpy/memmove in user space'),
    ('__memset_avx512_unaligned_erms', 'memset in user space'),
    ('malloc', 'malloc'),
    ('free', 'free'),
    ('pthread_mutex_lock', 'mutex lock'),
    ('pthread_rwlock_rdlock', 'rwlock (shared)'),
)


class Perf:
    """perf record -a -g around a step, and a report of where a daemon's CPU
    time went: by category (self time) and by call site (with callees)."""

    FREQ = 1000  # samples per second per CPU: cpu-seconds = samples / FREQ

    def __init__(self, work):
        self.work = work
        self.procs = []
        self.event = None
        self.data = self.dwarf = None

    def ready(self):
        """True if perf can record here (installs linux-perf with apt-get if missing)."""
        if shutil.which('perf') is None:
            print('perf not installed; installing linux-perf (apt-get)', flush=True)
            r = subprocess.run(['apt-get', 'install', '-y', '-q', 'linux-perf'], capture_output=True, text=True)
            if r.returncode != 0 or shutil.which('perf') is None:
                print(f'perf unsupported: apt-get install linux-perf failed:\n{r.stderr.strip()}')
                return False
        # No hardware PMU in most VMs: fall back to the cpu-clock software timer.
        self.event = 'cycles' if os.path.isdir('/sys/bus/event_source/devices/cpu') else 'cpu-clock'
        probe = os.path.join(self.work, 'perf-probe.data')
        r = subprocess.run(['perf', 'record', '-q', '-g', '-e', self.event, '-o', probe, '--', 'true'],
                           capture_output=True, text=True)
        if os.path.exists(probe):
            os.unlink(probe)
        if r.returncode != 0:
            print(f'perf unsupported on this machine: {r.stderr.strip()}')
            return False
        return True

    def start(self, name, pid=None):
        """Starts recording the whole machine (frame-pointer call graphs) and, with pid,
        that process alone with DWARF call graphs (libc, libfuse, zstd and SQLite have
        no frame pointers); False (said why) if perf exits at once."""
        self.data = os.path.join(self.work, f'perf-{name}.data')
        self.dwarf = os.path.join(self.work, f'perf-{name}-dwarf.data') if pid else None
        self.procs = []
        cmds = [['perf', 'record', '-q', '-a', '-g', '-F', str(self.FREQ), '-e', self.event, '-o', self.data]]
        if pid:
            cmds.append(['perf', 'record', '-q', '--call-graph', 'dwarf,32768', '-F', str(self.FREQ // 2),
                         '-e', self.event, '-p', str(pid), '-o', self.dwarf])
        for cmd in cmds:
            self.procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, start_new_session=True))
        deadline = time.monotonic() + 10
        for proc, out in zip(self.procs, (self.data, self.dwarf)):
            while not os.path.exists(out) and time.monotonic() < deadline:
                if proc.poll() is not None:
                    print(f'perf unsupported: perf record exited with {proc.returncode}')
                    self.kill()
                    return False
                time.sleep(0.05)
        time.sleep(0.5)
        return True

    def stop(self):
        for proc in self.procs:
            proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            proc.wait()
        self.procs = []

    def kill(self):
        for proc in getattr(self, 'procs', []):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.procs = []

    def report(self, nbytes, processes):
        """Prints the breakdown of the last recording.  processes: (title, who) pairs,
        who being a pid or a set of command names (e.g. the daemon by pid: other
        fratierfs may run on the machine; the application's forked workers by name);
        nbytes: bytes the step moved, for CPU seconds per GB."""
        # Every sample as "command pid ip symbol (object)": perf report's own filters
        # go by thread, and a daemon's threads come and go.
        samples = []
        for ln in sh(['perf', 'script', '-i', self.data, '-F', 'comm,pid,ip,sym,dso',
                      '--hide-call-graph']).splitlines():
            m = re.match(r'^\s*(.*?)\s+(\d+)\s+[0-9a-f]+\s+(.*?)\s*\((.*)\)\s*$', ln)
            if m:
                samples.append((m[1], int(m[2]), m[3] or '[unknown]', m[4]))
        everything = len(samples) or 1
        by_comm = {}
        for comm, _, _, dso in samples:
            key = (comm, os.path.basename(dso))
            by_comm[key] = by_comm.get(key, 0) + 1
        print('== share of all samples on the machine, by command and object '
              '(swapper = idle; others share this machine) ==')
        for (comm, dso), n in sorted(by_comm.items(), key=lambda kv: -kv[1])[:12]:
            if 100 * n / everything >= 1:
                print(f'{100 * n / everything:6.2f}%  {comm:<16} {dso}')
        gb = nbytes / 1e9 if nbytes else None
        for title, who in processes:
            mine = [(sym, dso) for comm, pid, sym, dso in samples
                    if (pid == who if isinstance(who, int) else comm in who)]
            if not mine:
                print(f'\n== {title}: no samples ==')
                continue
            n_mine = len(mine)
            cpu_s = n_mine / self.FREQ
            print(f'\n== {title}: {cpu_s:.2f} CPU s ({100 * n_mine / everything:.1f}% of all samples)'
                  + (f', {cpu_s / gb:.2f} CPU s/GB' if gb else '') + ' ==')
            cats, syms = {}, {}
            for sym, dso in mine:
                name = next((n for n, match in PERF_CATEGORIES if match(dso, sym)), 'other')
                cats[name] = cats.get(name, 0) + 1
                key = f'{sym}  ({os.path.basename(dso)})'
                syms[key] = syms.get(key, 0) + 1
            print(f'  {"where (self time)":<36} {"% of it":>7} {"CPU s/GB":>8}')
            for name, n in sorted(cats.items(), key=lambda kv: -kv[1]):
                if 100 * n / n_mine >= 0.5:
                    print(f'  {name:<36} {100 * n / n_mine:7.1f} {bl_fmt(n / self.FREQ / gb if gb else None):>8}')
            print(f'  top symbols by self time, % of {title}:')
            for key, n in sorted(syms.items(), key=lambda kv: -kv[1])[:12]:
                print(f'  {100 * n / n_mine:6.2f}%  {key}')
        os.unlink(self.data)
        if self.dwarf:
            self.report_call_sites(nbytes)

    def report_call_sites(self, nbytes):
        out = sh(['perf', 'report', '-i', self.dwarf, '--stdio', '-g', 'none', '-t', '\t', '-n',
                  '--children', '--percent-limit', '0.1', '--sort', 'sym'])
        rows = perf_rows(out)
        # Columns: children %, self %, self samples, symbol.
        incl = {}
        for c in rows:
            sym = re.sub(r'^\[[.k]\]\s*', '', c[3]).split(' (inlined)')[0].strip()
            incl[sym] = max(incl.get(sym, 0.0), pct(c[0]))
        total = sum(int(c[1]) for c in perf_rows(sh(['perf', 'report', '-i', self.dwarf, '--stdio', '-g', 'none',
                                                         '-t', '\t', '-n', '--no-children', '--sort', 'comm'])))
        cpu_s = total / (self.FREQ // 2)
        gb = nbytes / 1e9 if nbytes else None
        print(f'\n== the daemon alone, DWARF call graphs: {cpu_s:.2f} CPU s'
              + (f', {cpu_s / gb:.2f} CPU s/GB' if gb else '') + '; time in each call site with its callees '
              '(they overlap) ==')
        print(f'  {"call site":<66} {"% of it":>7} {"CPU s/GB":>8}')
        for sym, what in PERF_CALL_SITES:
            if incl.get(sym):
                share = incl[sym]
                print(f'  {what:<66} {share:7.1f} {bl_fmt(share / 100 * cpu_s / gb if gb else None):>8}')
        os.unlink(self.dwarf)


def perf_rows(text):
    """Rows of perf report -t '\\t' as lists of stripped columns."""
    return [[c.strip() for c in ln.split('\t')] for ln in text.splitlines()
            if ln.strip() and not ln.startswith('#')]


def pct(text):
    return float(text.rstrip('%'))


def bl_fmt(value, digits=2):
    return fmt(value, digits)
