# SPDX-License-Identifier: GPL-2.0-or-later
"""Transcript machinery for the POSIX comparison tests.

A scenario runs a fixed sequence of operations under one root directory and
records each one as a line "operation -> result".  Run once on fratierfs and
once on a local ext4 directory, the two transcripts must be equal line by
line.  Everything recorded is normalized so that a correct filesystem gives a
byte-identical transcript:

- results: errno names ("E:ENOENT"), "ok", integers, file descriptors as "fd",
  byte strings as repr (short) or length + SHA-256 prefix (long);
- inode numbers never appear: identity is recorded as "same as TAG" relations
  (st_ino values differ between any two filesystems and may be reused);
- st_dev never appears (differs by definition);
- absolute timestamps never appear except values set explicitly with utimens;
  otherwise mtime/ctime are recorded as relations: changed (+), unchanged (=)
  or older (-) than at the previous stat of the same key, and mtime versus
  ctime of the same stat (m<c, m=c, m>c);
- atime is not recorded unless set explicitly: relatime/noatime behaviour is
  a mount policy, and the kernel updates atime itself for ext4 but not for
  FUSE (the daemon decides), so it is not a conformance property;
- directory st_size and st_blocks are not recorded: POSIX leaves them
  unspecified and ext4's values are block-based;
- regular-file st_blocks is recorded as a class ("0", "sparse", "dense",
  "over"), because the exact block count depends on the allocator.
"""

import ctypes
import errno
import hashlib
import json
import os
import platform
import random
import select
import signal
import stat
import struct
import time

# Long enough for a change to be visible with the coarsest kernel timestamp
# granularity (one jiffy at HZ=100); a sleep, not an assertion.
TICK = 0.011

libc = ctypes.CDLL(None, use_errno=True)

AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
AT_SYMLINK_FOLLOW = 0x400
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
XATTR_CREATE = 1
XATTR_REPLACE = 2

SYS_getdents64 = {"x86_64": 217, "aarch64": 61}.get(platform.machine(), 217)

DT_NAMES = {0: "unknown", 1: "fifo", 2: "chr", 4: "dir", 6: "blk", 8: "reg", 10: "lnk", 12: "sock"}


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
libc.fallocate.restype = ctypes.c_int
libc.linkat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
libc.linkat.restype = ctypes.c_int
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
libc.renameat2.restype = ctypes.c_int
libc.utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(Timespec), ctypes.c_int]
libc.utimensat.restype = ctypes.c_int
libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
libc.getxattr.restype = ctypes.c_ssize_t
libc.listxattr.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
libc.listxattr.restype = ctypes.c_ssize_t
libc.syscall.restype = ctypes.c_long


def _check(ret):
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return ret


def _b(path):
    return os.fsencode(path)


def fallocate(fd, mode, offset, length):
    return _check(libc.fallocate(fd, mode, offset, length))


def linkat(old, new, flags):
    return _check(libc.linkat(AT_FDCWD, _b(old), AT_FDCWD, _b(new), flags))


def renameat2(old, new, flags):
    return _check(libc.renameat2(AT_FDCWD, _b(old), AT_FDCWD, _b(new), flags))


def utimensat(path, atime, mtime, nofollow=False):
    """atime/mtime: (sec, nsec), or UTIME_NOW / UTIME_OMIT."""
    ts = (Timespec * 2)()
    for i, v in enumerate((atime, mtime)):
        if isinstance(v, tuple):
            ts[i].tv_sec, ts[i].tv_nsec = v
        else:
            ts[i].tv_sec, ts[i].tv_nsec = 0, v
    return _check(libc.utimensat(AT_FDCWD, _b(path), ts, AT_SYMLINK_NOFOLLOW if nofollow else 0))


def getxattr_size(path, name, size):
    """getxattr(2) with a caller-chosen buffer size (to provoke ERANGE)."""
    buf = ctypes.create_string_buffer(max(size, 1))
    n = _check(libc.getxattr(_b(path), _b(name), buf if size else None, size))
    return n


def listxattr_size(path, size):
    buf = ctypes.create_string_buffer(max(size, 1))
    return _check(libc.listxattr(_b(path), buf if size else None, size))


def getdents(fd, bufsize=2048):
    """One getdents64(2) call: [(name, d_ino, d_off, d_type)]; [] at the end."""
    buf = ctypes.create_string_buffer(bufsize)
    n = _check(libc.syscall(ctypes.c_long(SYS_getdents64), ctypes.c_int(fd), buf, ctypes.c_size_t(bufsize)))
    raw = buf.raw[:n]
    out = []
    pos = 0
    while pos < n:
        ino, off, reclen, typ = struct.unpack_from("=QqHB", raw, pos)
        name = raw[pos + 19:pos + reclen].split(b"\0", 1)[0]
        out.append((name, ino, off, typ))
        pos += reclen
    return out


def flock_struct(typ, start, length, whence=os.SEEK_SET, pid=0):
    return struct.pack("hhqqi4x", typ, whence, start, length, pid)


def flock_unpack(raw):
    typ, whence, start, length, pid = struct.unpack("hhqqi4x", raw)
    return typ, whence, start, length, pid


def errname(e):
    return "E:" + errno.errorcode.get(e.errno, str(e.errno))


def digest(data):
    data = bytes(data)
    if len(data) <= 24:
        return repr(data)
    return "<%d bytes %s>" % (len(data), hashlib.sha256(data).hexdigest()[:16])


def norm(v):
    if v is None:
        return "ok"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return digest(v)
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(norm(x) for x in v) + "]"
    return repr(v)


def kind(mode):
    return {stat.S_IFREG: "reg", stat.S_IFDIR: "dir", stat.S_IFLNK: "lnk", stat.S_IFIFO: "fifo",
            stat.S_IFSOCK: "sock", stat.S_IFCHR: "chr", stat.S_IFBLK: "blk"}.get(stat.S_IFMT(mode), "?")


def blocks_class(st):
    """What st_blocks says about allocation, independent of the allocator."""
    alloc = st.st_blocks * 512
    if alloc == 0:
        return "0"
    if alloc > st.st_size + 65536:
        return "over"
    if 2 * alloc < st.st_size:
        return "sparse"
    return "dense"


def _rel(a, b, letter):
    return letter + ("+" if a > b else "=" if a == b else "-")


class T:
    """Records one scenario's transcript under root."""

    def __init__(self, root, seed, prefix=""):
        self.root = root
        self.lines = []
        self.prev = {}
        self.tags = {}
        self.prefix = prefix
        self.rng = random.Random(seed)

    # -- plumbing --------------------------------------------------------
    def p(self, *parts):
        if any(isinstance(x, bytes) for x in parts):
            return os.path.join(os.fsencode(self.root), *[os.fsencode(x) for x in parts])
        return os.path.join(self.root, *parts)

    def rec(self, op, result):
        self.lines.append("%s%s -> %s" % (self.prefix, op, result))
        # Every operation gets its own timestamp: without a pause, ext4 gives
        # two updates within one jiffy the same coarse time (m=c) where a
        # daemon using a fine clock gives m<c, and both are right.
        time.sleep(TICK)

    def call(self, op, fn, *args, **kw):
        """Runs fn, records its normalized result or errno; returns result or None."""
        try:
            r = fn(*args, **kw)
        except OSError as e:
            self.rec(op, errname(e))
            return None
        self.rec(op, norm(r))
        return r

    def note(self, op, value):
        self.rec(op, norm(value))

    def rand(self, n):
        return self.rng.randbytes(n)

    # -- file descriptors ------------------------------------------------
    def open(self, rel, flags, mode=0o666, label=None):
        fl = 0
        for name in flags.split("|"):
            fl |= getattr(os, name)
        op = "open %s %s" % (label or rel, flags)
        if fl & os.O_CREAT:
            op += " %04o" % mode
        try:
            fd = os.open(self.p(rel), fl, mode)
        except OSError as e:
            self.rec(op, errname(e))
            return None
        self.rec(op, "fd")
        return fd

    def fdcall(self, op, fd, fn, *args):
        if fd is None:
            self.rec(op, "E:nofd")
            return None
        return self.call(op, fn, fd, *args)

    def close(self, fd, label="close"):
        return self.fdcall(label, fd, os.close)

    def write(self, fd, data, label="write"):
        return self.fdcall("%s %s" % (label, digest(data)), fd, os.write, data)

    def pwrite(self, fd, data, off, label="pwrite"):
        return self.fdcall("%s %s @%d" % (label, digest(data), off), fd, os.pwrite, data, off)

    def pread(self, fd, n, off, label="pread"):
        return self.fdcall("%s %d @%d" % (label, n, off), fd, os.pread, n, off)

    def read(self, fd, n, label="read"):
        return self.fdcall("%s %d" % (label, n), fd, os.read, n)

    def lseek(self, fd, off, whence, label="lseek"):
        wn = {os.SEEK_SET: "SET", os.SEEK_CUR: "CUR", os.SEEK_END: "END",
              os.SEEK_DATA: "DATA", os.SEEK_HOLE: "HOLE"}[whence]
        return self.fdcall("%s %d %s" % (label, off, wn), fd, os.lseek, off, whence)

    # -- stat ------------------------------------------------------------
    def fmt(self, st, key, exact_times=False, ctime_twice=False):
        k = kind(st.st_mode)
        parts = [k, "%04o" % stat.S_IMODE(st.st_mode), "n=%d" % st.st_nlink,
                 "u=%d" % st.st_uid, "g=%d" % st.st_gid]
        if k == "reg":
            parts += ["size=%d" % st.st_size, "blk=" + blocks_class(st)]
        elif k == "lnk":
            parts.append("size=%d" % st.st_size)
        m, c = st.st_mtime_ns, st.st_ctime_ns
        if ctime_twice and m <= c:
            # ext4's fallocate stamps mtime and ctime together, then ctime
            # alone once the blocks are allocated: a clock tick in between
            # (likely under load) gives m<c on ext4 itself.
            parts.append("m<=c")
        else:
            parts.append("m<c" if m < c else "m=c" if m == c else "m>c")
        if key in self.prev:
            pm, pc = self.prev[key]
            parts.append(_rel(m, pm, "m") + " " + _rel(c, pc, "c"))
        self.prev[key] = (m, c)
        if exact_times:
            parts.append("atime=%d mtime=%d" % (st.st_atime_ns, st.st_mtime_ns))
        return " ".join(parts)

    def st(self, rel, key=None, follow=True, exact_times=False, label=None):
        key = key or (rel if follow else "%s (link)" % (rel,))
        op = "%s %s" % ("stat" if follow else "lstat", label or rel)
        try:
            s = os.stat(self.p(rel), follow_symlinks=follow)
        except OSError as e:
            self.rec(op, errname(e))
            return None
        self.rec(op, self.fmt(s, key, exact_times))
        return s

    def fst(self, fd, key, exact_times=False, ctime_twice=False):
        op = "fstat %s" % key
        if fd is None:
            self.rec(op, "E:nofd")
            return None
        try:
            s = os.fstat(fd)
        except OSError as e:
            self.rec(op, errname(e))
            return None
        self.rec(op, self.fmt(s, key, exact_times, ctime_twice))
        return s

    def tag(self, rel, name, follow=False):
        """Remembers the identity (st_ino) of rel under a tag name."""
        try:
            self.tags[name] = os.stat(self.p(rel), follow_symlinks=follow).st_ino
        except OSError as e:
            self.rec("tag %s=%s" % (name, rel), errname(e))

    def same(self, rel, name, follow=False):
        op = "identity %s" % rel
        try:
            ino = os.stat(self.p(rel), follow_symlinks=follow).st_ino
        except OSError as e:
            self.rec(op, errname(e))
            return
        self.rec(op, "same as %s" % name if self.tags.get(name) == ino else "not %s" % name)

    # -- whole-file helpers ----------------------------------------------
    def mkfile(self, rel, data, mode=0o644, label=None):
        op = "mkfile %s %s %04o" % (label or rel, digest(data), mode)
        try:
            fd = os.open(self.p(rel), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, mode)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as e:
            self.rec(op, errname(e))
            return
        self.rec(op, "ok")

    def cat(self, rel, label=None):
        op = "cat %s" % (label or rel)
        try:
            with open(self.p(rel), "rb") as f:
                data = f.read()
        except OSError as e:
            self.rec(op, errname(e))
            return None
        self.rec(op, digest(data))
        return data

    def ls(self, rel, label=None):
        op = "ls %s" % (label or rel)
        try:
            names = sorted(os.listdir(self.p(rel)))
        except OSError as e:
            self.rec(op, errname(e))
            return None
        if len(names) > 40:
            self.rec(op, "%d names %s" % (len(names), digest(b"\0".join(os.fsencode(n) for n in names))))
        else:
            self.rec(op, norm(names))
        return names

    def as_user(self, uid, gid, groups, fn):
        """Runs fn(T) in a forked child with these credentials; appends its lines."""
        def run():
            sub = T(self.root, 0, prefix="[%d:%d] " % (uid, gid))
            sub.prev = dict(self.prev)
            sub.tags = dict(self.tags)
            try:
                fn(sub)
            except Exception as e:  # a bug in the scenario: keep it visible in the transcript
                sub.rec("EXCEPTION", repr(e))
            return json.dumps(sub.lines)
        child = Child({"run": run}, uid=uid, gid=gid, groups=groups)
        try:
            out = child.call("run", timeout=60)
        finally:
            child.close()
        if out.startswith("["):
            self.lines.extend(json.loads(out))
        else:
            self.rec("as_user %d:%d" % (uid, gid), out)


class Child:
    """A forked helper process that runs named actions on request.

    Actions are closures defined before the fork; each reply is one line:
    a str result verbatim, any other result normalized, or the errno.  Used for lock conflicts
    between processes and for running scenario steps as another user.
    """

    def __init__(self, actions, uid=None, gid=None, groups=None):
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            code = 0
            try:
                os.close(w1)
                os.close(r2)
                if uid is not None:
                    os.setgroups(list(groups or []))
                    os.setgid(gid)
                    os.setuid(uid)
                rf = os.fdopen(r1, "r")
                wf = os.fdopen(w2, "w")
                for line in rf:
                    name = line.strip()
                    if name == "exit":
                        break
                    try:
                        res = actions[name]()
                        res = res if isinstance(res, str) else norm(res)
                    except OSError as e:
                        res = errname(e)
                    except Exception as e:
                        res = "EXCEPTION " + repr(e)
                    wf.write(res.replace("\n", "\\n") + "\n")
                    wf.flush()
            except BaseException:
                code = 1
            os._exit(code)
        os.close(r1)
        os.close(w2)
        self.wfd = w1
        self.rfd = r2
        self.buf = b""

    def call(self, name, timeout=20):
        """Runs action name in the child; its result (str results verbatim)."""
        try:
            os.write(self.wfd, (name + "\n").encode())
        except OSError as e:
            return "CHILD-GONE " + errname(e)
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return "TIMEOUT"
            r, _, _ = select.select([self.rfd], [], [], left)
            if not r:
                continue
            chunk = os.read(self.rfd, 1 << 20)
            if not chunk:
                return "CHILD-DIED"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def close(self, timeout=20):
        try:
            os.write(self.wfd, b"exit\n")
        except OSError:
            pass
        os.close(self.wfd)
        os.close(self.rfd)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return
            time.sleep(0.01)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)


def file_digest(path, size):
    """Content hash; files above 64 MiB (sparse giants) are sampled at both ends."""
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        if size <= 64 << 20:
            while True:
                b = os.read(fd, 1 << 20)
                if not b:
                    break
                h.update(b)
        else:
            h.update(b"sampled")
            h.update(os.pread(fd, 1 << 20, 0))
            h.update(os.pread(fd, 1 << 20, size - (1 << 20)))
    finally:
        os.close(fd)
    return h.hexdigest()[:16]


def tree(root, full):
    """Maps each path under root (bytes, relative) to a description.

    full=False: what must be equal between any two conforming filesystems
    (type, mode, nlink, owner, size, content, link target, xattrs, hard-link
    groups).  full=True adds st_ino and exact mtime/ctime, for comparing one
    filesystem with itself across a remount.
    """
    out = {}
    first = {}
    root = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            try:
                st = os.lstat(p)
            except OSError as e:
                out[rel] = errname(e)
                continue
            k = kind(st.st_mode)
            d = [k, "%04o" % stat.S_IMODE(st.st_mode), "n=%d" % st.st_nlink,
                 "u=%d" % st.st_uid, "g=%d" % st.st_gid]
            if k == "reg":
                d.append("size=%d" % st.st_size)
                try:
                    d.append(file_digest(p, st.st_size))
                except OSError as e:
                    d.append("read " + errname(e))
                if st.st_nlink > 1:
                    d.append("linkgroup=%r" % first.setdefault(st.st_ino, rel))
            elif k == "lnk":
                d.append("-> %r" % os.readlink(p))
            try:
                xs = sorted(os.listxattr(p, follow_symlinks=False))
                for x in xs:
                    d.append("x:%s=%s" % (x, digest(os.getxattr(p, x, follow_symlinks=False))))
            except OSError as e:
                d.append("xattr " + errname(e))
            if full:
                d.append("ino=%d mtime=%d ctime=%d" % (st.st_ino, st.st_mtime_ns, st.st_ctime_ns))
            out[rel] = " ".join(d)
    return out
