#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Global dedup across hosts (docs/SHARED.md): three fratierfs daemons on
this machine, each with its own data directory, hot tier and mount, share
one NFS export (nfs-ganesha on loopback, in a private network and mount
namespace; --dir: a plain directory instead).  The same Oracle-like backup
(oragen) lands on every host and is migrated to the shared tier by host 1,
then 2, then 3.  Reported, as ratios measured in this one run:

- stored on the shared tier after the three hosts over what it held after
  host 1 alone (target: at most 1.15x; without global dedup, 3x);
- bytes each host sent to the filer (tierctl status, bytes_sent) over
  what host 1 sent (target: at most 10% for hosts 2 and 3);
- each host's migration time over host 1's (informative: the load of the
  machine moves it).

Not a test: nothing is asserted.  See bench/README.md.
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
SRC_ROOT = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(SRC_ROOT, 'tests', 'nfs'))
sys.path.insert(0, os.path.join(SRC_ROOT, 'tests', 'e2e'))
import ganesha  # noqa: E402
import harness  # noqa: E402

SCALES = {'small': ('16M', '8M', 1), 'medium': ('64M', '32M', 1), 'large': ('256M', '64M', 2)}
STATE_XATTR = 'trusted.fratier.state'


def tierctl(build, mnt, *args):
    p = subprocess.run([os.path.join(build, 'tools', 'tierctl', 'tierctl'), '-m', mnt] + list(args) + ['--json'],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=3600)
    if p.returncode != 0:
        raise RuntimeError('tierctl %s: %s' % (' '.join(args), p.stderr.strip()))
    return json.loads(p.stdout)


def filer_row(build, mnt):
    return next(t for t in tierctl(build, mnt, 'status')['tiers'] if t.get('tier') == 1)


def wait_sealed(paths, timeout=1800):
    deadline = time.monotonic() + timeout
    for p in paths:
        while os.getxattr(p, STATE_XATTR).decode().split()[0] != 'sealed':
            if time.monotonic() > deadline:
                raise RuntimeError('%s not sealed' % p)
            time.sleep(0.05)


def du(root):
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(root) for n in ns)


def run(args, filer, root, tmp):
    scale = SCALES[args.scale]
    src = os.path.join(tmp, 'src')
    subprocess.run([os.path.join(args.build, 'tools', 'oragen', 'oragen'), '--out', src, '--datafile-size', scale[0],
                    '--archivelog-size', scale[1], '--days', str(scale[2]), '--seed', str(args.seed),
                    '--start-date', '2026-12-01', '--no-zstd', '-q'], check=True)
    files = [os.path.relpath(os.path.join(d, n), src) for d, _, ns in os.walk(src) for n in ns
             if n != 'manifest.json']
    logical = sum(os.path.getsize(os.path.join(src, f)) for f in files)
    rows = []
    hosts = []
    try:
        for k in range(1, args.hosts + 1):
            base = os.path.join(tmp, 'h%d' % k)
            data = os.path.join(base, 'data')
            os.makedirs(os.path.join(data, 'hot'))
            conf = os.path.join(base, 'fratier.conf')
            with open(conf, 'w') as f:
                f.write('[fratier]\ndata_dir = %s\nhost = h%d\n[tier hot]\n[tier filer]\nrole = %s\npath = %s\n'
                        'shared = yes\n' % (data, k, 'nfs' if filer.startswith('nfs://') else 'capacity', filer))
            fs = harness.Fratier(base=base, config=conf, data=data, options=['seal_delay=0'])
            fs.start()
            hosts.append(fs)
            for f in files:
                os.makedirs(os.path.dirname(fs.path(f)), exist_ok=True)
                shutil.copyfile(os.path.join(src, f), fs.path(f))
            wait_sealed([fs.path(f) for f in files])
            before = int(filer_row(args.build, fs.mnt).get('bytes_sent', 0))
            t0 = time.monotonic()
            j = tierctl(args.build, fs.mnt, 'migrate', '--to', 'filer', fs.mnt)
            dt = time.monotonic() - t0
            row = filer_row(args.build, fs.mnt)
            rows.append({'host': k, 'moved': j.get('moved'), 'failed': j.get('failed'), 'seconds': dt,
                         'sent': int(row.get('bytes_sent', 0)) - before, 'stored': du(root),
                         'foreign_bytes': int(row.get('global_foreign_bytes', 0)),
                         'lookup_memory': int(row.get('global_memory', 0))})
    finally:
        for fs in hosts:
            try:
                fs.stop()
            except Exception:
                fs.kill(check=False)
    return logical, rows


def main():
    ap = argparse.ArgumentParser(description='global dedup: three hosts migrate the same backup to one shared tier')
    ap.add_argument('--hosts', type=int, default=3, help='hosts sharing the tier (default 3)')
    ap.add_argument('--scale', choices=sorted(SCALES), default='small', help='oragen size (default small)')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--dir', action='store_true', help='a plain directory as the shared tier, not an NFS export')
    ap.add_argument('--build', default=os.path.join(SRC_ROOT, 'build'), help='meson build dir (default SRC/build)')
    ap.add_argument('--workdir', default='/var/tmp', help='scratch dir parent (default /var/tmp)')
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    os.environ['FRATIERFS'] = os.path.join(args.build, 'fs', 'fratierfs')
    if not args.dir:
        ganesha.enter_private_namespace()
    tmp = tempfile.mkdtemp(prefix='fratier-bench-hosts-', dir=args.workdir)
    try:
        if args.dir:
            filer = os.path.join(tmp, 'filer')
            os.makedirs(filer)
            logical, rows = run(args, filer, os.path.join(filer, 'containers'), tmp)
        else:
            with ganesha.Ganesha(os.path.join(tmp, 'nfs')) as srv:
                logical, rows = run(args, srv.url, srv.export, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    first = rows[0]
    commit = subprocess.run(['git', '-C', SRC_ROOT, 'rev-parse', '--short', 'HEAD'], stdout=subprocess.PIPE,
                            text=True).stdout.strip()
    print('bench-hosts: %d hosts, %s tier, scale %s (%.1f MiB logical per host), commit %s, %s, load %s'
          % (len(rows), 'directory' if args.dir else 'NFS (ganesha)', args.scale, logical / 2**20, commit,
             platform.node(), ' '.join('%.2f' % x for x in os.getloadavg())))
    print('| host | files moved | sent (MiB) | sent / host 1 | stored on the tier (MiB) | stored / host 1 alone '
          '| referenced, not sent (MiB) | lookup memory (KiB) | migrate time / host 1 |')
    print('| --- | --- | --- | --- | --- | --- | --- | --- | --- |')
    for r in rows:
        print('| %d | %s | %.2f | %.3f | %.2f | %.3f | %.2f | %d | %.2f |'
              % (r['host'], r['moved'], r['sent'] / 2**20, r['sent'] / first['sent'], r['stored'] / 2**20,
                 r['stored'] / first['stored'], r['foreign_bytes'] / 2**20, r['lookup_memory'] // 1024,
                 r['seconds'] / first['seconds']))


if __name__ == '__main__':
    sys.exit(main())
