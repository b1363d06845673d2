# SPDX-License-Identifier: GPL-2.0-or-later
"""Shared plumbing of the tier end-to-end tests: oragen content copied into a
mount and sealed, tierctl calls, and what each tier's containers take."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dedup"))
import dedupcommon as dc  # noqa: E402
import harness  # noqa: E402


def tierctl_path():
    return os.environ.get("FRATIER_TIERCTL") or os.path.join(
        os.environ.get("FRATIER_BUILD_ROOT", "build"), "tools", "tierctl", "tierctl")


def tierctl(fs, *args, timeout=600):
    """(exit code, stdout, stderr) of tierctl -m MOUNT ARGS."""
    p = subprocess.run([tierctl_path(), "-m", fs.mnt] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def tierctl_json(res, fs, *args, want_rc=0):
    rc, out, err = tierctl(fs, *(list(args) + ["--json"]))
    if want_rc is not None:
        res.check(rc == want_rc, "tierctl %s: exit %d, expected %d: %s" % (" ".join(args), rc, want_rc, err.strip()))
    try:
        return json.loads(out)
    except ValueError:
        res.check(False, "tierctl %s --json: not JSON: %r" % (" ".join(args), out[:300]))
        return {}


def generate(res, dst, seed=1, days=2):
    """oragen's FRA under dst; returns the manifest."""
    cmd = [dc.oragen_path(), "--out", dst, "--datafile-size", "4M", "--archivelog-size", "1M",
           "--start-date", "2026-12-01", "--days", str(days), "--seed", str(seed), "--no-zstd", "-q"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if not res.check(p.returncode == 0, "%s failed: %s" % (" ".join(cmd), p.stdout.strip())):
        res.finish()
    with open(os.path.join(dst, "manifest.json")) as f:
        return json.load(f)


def copy_in(fs, src):
    """Copies every file of src (but the manifest) into the mount; returns {rel: bytes}."""
    model = {}
    for d, _, names in os.walk(src):
        for n in names:
            if n == "manifest.json":
                continue
            s = os.path.join(d, n)
            rel = os.path.relpath(s, src)
            os.makedirs(os.path.dirname(fs.path(rel)), exist_ok=True)
            shutil.copyfile(s, fs.path(rel))
            model[rel] = dc.read_all(s)
    return model


def containers_dir(fs, tier):
    return os.path.join(fs.data, tier, "containers")


def stored(fs, tier):
    _, apparent, allocated = dc.tree_usage(containers_dir(fs, tier))
    return max(apparent, allocated)


def wait_empty(fs, tier, timeout=dc.GC_TIMEOUT):
    """Polls until no container of tier holds more than a header; returns the big ones left."""
    deadline = time.monotonic() + timeout
    while True:
        files, _, _ = dc.tree_usage(containers_dir(fs, tier))
        big = [(p, max(a, b)) for p, a, b in files if max(a, b) >= dc.EMPTY_CONTAINER_MAX]
        if not big or time.monotonic() > deadline:
            return big
        time.sleep(0.1)


def compare_all(res, fs, model, what):
    bad = sum(0 if dc.compare(res, fs.path(r), model[r], what) else 1 for r in sorted(model))
    print("%s: %d files compared, %d differ" % (what, len(model), bad), flush=True)
    return bad == 0


def tiers_of(res, fs, model):
    """{rel: tier} from tierctl ls --json of every file's directory."""
    dirs = sorted({os.path.dirname(fs.path(r)) for r in model})
    out = {}
    j = tierctl_json(res, fs, "ls", *dirs)
    for e in j.get("entries", []):
        if e.get("type") == "file":
            rel = os.path.relpath(os.path.join(fs.mnt, e["dir"].lstrip("/"), e["name"]), fs.mnt)
            out[rel] = int(e.get("tier", -1))
    return out


def mount_tmpfs(res, path, size):
    """A tmpfs of size bytes at path, for a tier whose statfs is real and small.

    Without one the test skips, but only before its first check: a skip
    after checks ran would hide their failures, so then it fails."""
    os.makedirs(path, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0755" % size, "tmpfs", path],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode == 0:
        return
    if res.passed or res.failed:
        res.check(False, "cannot mount a tmpfs for a tier after %d checks: %s" % (res.passed + res.failed,
                                                                                  p.stdout.strip()))
        res.finish()
    print("SKIP: cannot mount a tmpfs for a tier: %s" % p.stdout.strip())
    sys.exit(harness.SKIP)


def umount(path):
    subprocess.run(["umount", path], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def ls_entries(res, fs, model):
    """{rel: tierctl ls --json entry} of every file of model, from a listing of their directories."""
    dirs = sorted({os.path.dirname(fs.path(r)) for r in model})
    out = {}
    for e in tierctl_json(res, fs, "ls", *dirs).get("entries", []):
        if e.get("type") == "file":
            out[os.path.relpath(os.path.join(fs.mnt, e["dir"].lstrip("/"), e["name"]), fs.mnt)] = e
    return out


def nfs_mount(tmp, url, filer_keys=""):
    """An unstarted Fratier of three tiers in tmp: hot and capacity directories, and filer, the NFS export at url."""
    data = os.path.join(tmp, "data")
    for d in ("hot", "capacity"):
        os.makedirs(os.path.join(data, d))
    conf = os.path.join(tmp, "fratier.conf")
    with open(conf, "w") as f:
        f.write("[fratier]\ndata_dir = %s\n\n[tier hot]\n\n[tier capacity]\n\n"
                "[tier filer]\nrole = nfs\npath = %s\n%s" % (data, url, filer_keys))
    return harness.Fratier(base=tmp, config=conf, data=data, options=dc.OPTIONS)


def put_shared(res, fs, files):
    """Writes {name: bytes} into fs, seals them, migrates them to the shared tier "filer"."""
    paths = []
    for name, data in sorted(files.items()):
        with open(fs.path(name), "wb") as f:
            f.write(data)
        paths.append(fs.path(name))
    if not dc.check_sealed(res, paths, "seal"):
        res.finish()
    j = tierctl_json(res, fs, "migrate", "--to", "filer", *paths)
    res.check(j.get("moved") == len(paths), "%s: migrate %s: %r" % (os.path.basename(fs.base), sorted(files),
                                                                      {k: j.get(k) for k in ("moved", "failed")}))


def shared_daemon(tmp, host, filer, lease=None, options=(), tier_keys=""):
    """A daemon named HOST with its own data directory under TMP, and FILER (a directory, or an nfs:// URL) as
    its shared lower tier, with TIER_KEYS (lines) in its section; lease: shared_lease in seconds, or the
    default."""
    base = os.path.join(tmp, host)
    data = os.path.join(base, "data")
    os.makedirs(os.path.join(data, "hot"), exist_ok=True)
    conf = os.path.join(base, "fratier.conf")
    with open(conf, "w") as f:
        f.write("[fratier]\ndata_dir = %s\nhost = %s\n" % (data, host))
        if lease is not None:
            f.write("shared_lease = %ds\n" % lease)
        f.write("[tier hot]\n[tier filer]\nrole = %s\npath = %s\nshared = yes\n%s"
                % ("nfs" if filer.startswith("nfs://") else "capacity", filer, tier_keys))
    return harness.Fratier(base=base, config=conf, data=data, options=list(dc.OPTIONS) + list(options))


def shared_objects(root, host, sub, suffix):
    """HOST's objects named *SUFFIX below h/HOST/SUB of a shared tier whose objects are at ROOT, sorted."""
    out = []
    for d, _, names in os.walk(os.path.join(root, "h", host, sub)):
        out += [os.path.join(d, n) for n in names if n.endswith(suffix)]
    return sorted(out)


def filer_row(res, fs):
    """tierctl status's row of tier 1, the shared tier of shared_daemon()."""
    for t in tierctl_json(res, fs, "status").get("tiers", []):
        if t.get("tier") == 1:
            return t
    res.check(False, "no shared tier in the status of %s" % fs.mnt)
    return {}


def shared_filer_main(name, run):
    """run(res, tmp, tier path, the tier's object root) on a plain directory,
    or, with --nfs, on an nfs-ganesha export in a namespace of its own; the
    test is named NAME or NAME-nfs."""
    nfs = "--nfs" in sys.argv[1:]
    if nfs:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "nfs"))
        import ganesha
        ganesha.enter_private_namespace()
    harness.require_fuse()
    res = harness.Results(name + "-nfs" if nfs else name)
    tmp = tempfile.mkdtemp(prefix="fratier-%s-" % name, dir=os.environ.get("FRATIER_TMP"))
    try:
        if nfs:
            with ganesha.Ganesha(os.path.join(tmp, "nfs")) as srv:
                run(res, tmp, srv.url, srv.export)
        else:
            filer = os.path.join(tmp, "filer")
            os.makedirs(filer)
            run(res, tmp, filer, os.path.join(filer, "containers"))
    finally:
        if not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    res.finish()
