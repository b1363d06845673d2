# SPDX-License-Identifier: GPL-2.0-or-later
"""A real NFSv3 server for tests: nfs-ganesha (VFS FSAL) and rpcbind on loopback.

Both run inside a private network and mount namespace, so nothing listens
beyond this test and the fixed ports (2049, 20048) cannot clash with another
test or helper: call enter_private_namespace() first thing in a test script;
it re-executes the script under `unshare -n -m` (once) with loopback up and a
private tmpfs on /run (where rpcbind keeps its socket).

    ns = ganesha.enter_private_namespace()   # exits 77 (skip) if impossible
    with ganesha.Ganesha(workdir) as srv:    # serving when the block starts
        url = srv.url                         # nfs://127.0.0.1/<export>?...
        srv.kill(); srv.start()               # a dead server and its return

Every process is started here and stopped by its PID (SIGTERM, then SIGKILL
after a bound); nothing is looked up by name.  No kernel NFS client is used:
the clients speak NFSv3 through libnfs, with the ports in the URL so they need
no portmapper.
"""

import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

NFS_PORT = 2049
MNT_PORT = 20048
START_TIMEOUT = 30.0  # ganesha starts in well under a second; this bounds a broken install
STOP_TIMEOUT = 15.0   # SIGTERM takes 1.5-4 s; then SIGKILL

_NETNS_ENV = "FRATIER_NFS_NETNS"
SKIP = 77


MNT_DETACH = 2


def _skip(why):
    print(f"SKIP: {why}", file=sys.stderr)
    sys.exit(SKIP)


def enter_private_namespace():
    """Re-executes the running script in a private net+mount namespace.

    Returns in the child (inside the namespace).  The parent never returns: it
    exits with the child's status.  Exits 77 when not root, when unshare is
    refused, or when ganesha/rpcbind are not installed."""
    if os.environ.get(_NETNS_ENV) == "1":
        _detach_copied_fuse_mounts()
        return
    if os.geteuid() != 0:
        _skip("needs root for a private network namespace and ganesha")
    for prog in ("ganesha.nfsd", "rpcbind", "unshare", "ip"):
        if not _which(prog):
            _skip(f"{prog} not installed (scripts/install-deps.sh)")
    if subprocess.run(["unshare", "-n", "-m", "true"], stderr=subprocess.DEVNULL).returncode != 0:
        _skip("unshare -n -m refused (no CAP_SYS_ADMIN?)")
    inner = ("mount -t tmpfs -o mode=0755 tmpfs /run && ip link set lo up && "
             'exec "$@"')
    env = dict(os.environ, **{_NETNS_ENV: "1"})
    argv = ["unshare", "-n", "-m", "--propagation", "private", "sh", "-c", inner,
            "sh", sys.executable] + sys.argv
    r = subprocess.run(argv, env=env)
    sys.exit(r.returncode if r.returncode >= 0 else 128 - r.returncode)


def _detach_copied_fuse_mounts():
    """The new mount namespace got a copy of every mount, FUSE mounts of tests
    running in parallel included.  A copy keeps its FUSE connection alive: the
    other test's daemon would never see its unmount end and would hang until
    killed.  Detach the copies here; the originals are not touched."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/self/mountinfo") as f:
        lines = f.read().splitlines()
    points = []
    for line in lines:
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        if fstype == "fuse" or fstype.startswith("fuse."):
            points.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[4]))
    # Deepest first, so that a mount below another is not in the way.
    for point in sorted(points, key=len, reverse=True):
        if libc.umount2(point.encode(), MNT_DETACH) != 0:
            print(f"warning: cannot detach {point} in the test namespace: "
                  f"{os.strerror(ctypes.get_errno())}", file=sys.stderr)


def _which(prog):
    return shutil.which(prog, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def _port_open(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _stop_pid(proc, timeout=STOP_TIMEOUT):
    """SIGTERM, wait up to timeout, then SIGKILL.  proc is a Popen we own."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGCONT)  # a paused server cannot act on SIGTERM
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


_CONF = """\
NFS_CORE_PARAM {{
	NFS_Port = {nfs_port};
	MNT_Port = {mnt_port};
	Enable_NLM = false;
	Enable_RQUOTA = false;
	Protocols = 3, 4;
}}
NFS_KRB5 {{ Active_krb5 = false; }}
NFSV4 {{
	Graceless = true;
	Lease_Lifetime = 10;
	RecoveryBackend = fs;
	RecoveryRoot = "{state}/recov";
}}
EXPORT {{
	Export_Id = 77;
	Path = "{export}";
	Pseudo = "/export";
	Access_Type = RW;
	Squash = No_Root_Squash;
	SecType = "sys";
	Protocols = 3, 4;
	Transports = TCP;
	FSAL {{ Name = VFS; }}
}}
LOG {{ Default_Log_Level = EVENT; }}
"""


class Ganesha:
    """rpcbind + ganesha.nfsd serving workdir/export over NFSv3 on loopback.

    Must run inside enter_private_namespace().  The export directory survives
    kill()/start(), so a restarted server serves the same files."""

    def __init__(self, workdir, export_size=None):
        """export_size (e.g. "4m"): the export is a tmpfs of that size, to fill up."""
        if os.environ.get(_NETNS_ENV) != "1":
            raise RuntimeError("Ganesha() outside enter_private_namespace()")
        self.workdir = os.path.abspath(workdir)
        self.export = os.path.join(self.workdir, "export")
        self.state = os.path.join(self.workdir, "ganesha-state")
        self.conf = os.path.join(self.workdir, "ganesha.conf")
        self.log = os.path.join(self.workdir, "ganesha.log")
        self.pidfile = os.path.join(self.workdir, "ganesha.pid")
        os.makedirs(self.export, exist_ok=True)
        os.makedirs(os.path.join(self.state, "recov"), exist_ok=True)
        self.export_mounted = False
        if export_size:
            # The mount namespace is private: this tmpfs is gone with the test at the latest.
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={export_size},mode=0755", "tmpfs",
                            self.export], check=True)
            self.export_mounted = True
        with open(self.conf, "w") as f:
            f.write(_CONF.format(nfs_port=NFS_PORT, mnt_port=MNT_PORT, state=self.state,
                                 export=self.export))
        self.rpcbind = None
        self.server = None

    @property
    def url(self):
        return (f"nfs://127.0.0.1{self.export}"
                f"?version=3&nfsport={NFS_PORT}&mountport={MNT_PORT}")

    def _start_rpcbind(self):
        if self.rpcbind is not None and self.rpcbind.poll() is None:
            return
        for stale in ("/run/rpcbind.sock", "/run/rpcbind.lock"):
            try:
                os.unlink(stale)
            except FileNotFoundError:
                pass
        os.makedirs("/run/rpcbind", exist_ok=True)
        self.rpcbind = subprocess.Popen([_which("rpcbind"), "-f", "-w"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT
        while not _port_open(111):
            if self.rpcbind.poll() is not None:
                raise RuntimeError(f"rpcbind exited with {self.rpcbind.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError("rpcbind does not listen on port 111")
            time.sleep(0.05)

    def start(self):
        """Starts the server (and rpcbind if needed); returns once it serves."""
        if self.server is not None and self.server.poll() is None:
            raise RuntimeError("ganesha already running")
        self._start_rpcbind()
        log = open(self.log, "ab")
        # -F: stay in the foreground, so the PID we hold is the server's
        self.server = subprocess.Popen(
            [_which("ganesha.nfsd"), "-F", "-f", self.conf, "-L", self.log,
             "-p", self.pidfile, "-N", "NIV_EVENT"],
            stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while not (_port_open(NFS_PORT) and _port_open(MNT_PORT)):
            if self.server.poll() is not None:
                raise RuntimeError(f"ganesha exited with {self.server.returncode}; "
                                   f"see {self.log}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"ganesha does not serve; see {self.log}:\n{self.log_tail()}")
            time.sleep(0.05)

    def kill(self):
        """SIGKILL: the server dies mid-request, as a crashed filer would."""
        if self.server is not None and self.server.poll() is None:
            self.server.send_signal(signal.SIGCONT)
            self.server.kill()
            self.server.wait()

    def pause(self):
        """SIGSTOP: connections stay open but nothing answers (a hung filer).

        Returns once every thread of the server is stopped: kill() only
        queues the signal, and a request answered meanwhile would look like
        a server that never hung."""
        self.server.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + START_TIMEOUT
        while not self._all_threads_stopped():
            if time.monotonic() > deadline:
                raise RuntimeError("ganesha does not stop on SIGSTOP")
            time.sleep(0.01)

    def _all_threads_stopped(self):
        task_dir = f"/proc/{self.server.pid}/task"
        for tid in os.listdir(task_dir):
            try:
                with open(f"{task_dir}/{tid}/stat") as f:
                    # state follows the parenthesised command name, which may hold spaces
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except (FileNotFoundError, IndexError):
                continue  # the thread exited meanwhile
            if state not in ("T", "t"):
                return False
        return True

    def resume(self):
        self.server.send_signal(signal.SIGCONT)

    def stop(self):
        _stop_pid(self.server)
        self.server = None
        _stop_pid(self.rpcbind)
        self.rpcbind = None
        if self.export_mounted:
            subprocess.run(["umount", self.export], check=True)
            self.export_mounted = False

    def log_tail(self, n=20):
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()
        return False
