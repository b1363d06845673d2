# SPDX-License-Identifier: GPL-2.0-or-later
"""tierctl against a live mount holding known content.

Writes files of every class, waits until they are sealed (trusted.fratier.state),
then checks every command: the figures match what was written (logical bytes
exact; stored bytes equal to the container files on the hot tier's disk; raw
bytes equal to the staging files' blocks), --json parses and carries the same
numbers as the table (--bytes), an unprivileged user reads reports but cannot
gc or scrub, malformed and forged requests are refused with a message, many
clients at once are served (and one too many is told so), the metrics
listener is scraped and parsed by prometheus_client, the HTML report renders
in headless Chromium with its charts (screenshot kept in the meson log
directory), and scrub names exactly the files a damaged chunk breaks.
"""

import errno
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from harness import Fratier, Results, require_fuse, scaled, stop_process, wait_for

STATE_XATTR = "trusted.fratier.state"
SEAL_TIMEOUT = scaled(float(os.environ.get("FRATIER_SEAL_TIMEOUT", "120")))
# control/control-internal.h: CONTROL_CONNECTIONS_MAX connections are served at once.
CONNECTIONS_MAX = 16
REGION_MAGIC = b"\x89FTR"  # docs/FORMAT.md, compression region
CONTAINER_HEADER = 64
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
EXIT_USAGE, EXIT_NOT_RUNNING, EXIT_DENIED, EXIT_PARTIAL = 2, 3, 4, 5


def unique_keys(pairs):
    """An object of tierctl's JSON; a key twice in one object is an error (readers disagree on which wins)."""
    keys = [k for k, _ in pairs]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise ValueError("duplicate keys %r" % dup)
    return dict(pairs)


def tierctl_path():
    return os.environ.get("FRATIER_TIERCTL") or os.path.join(
        os.environ.get("FRATIER_BUILD_ROOT", "build"), "tools", "tierctl", "tierctl")


def ss_lines(*args):
    p = subprocess.run(["ss", "-xH"] + list(args), capture_output=True, text=True, check=True)
    return [l for l in p.stdout.splitlines() if l.strip()]


def accepted_connections(sock):
    """The daemon's open connections on its control socket (ss: local address sock, connected)."""
    return ss_lines("state", "connected", "src", sock)


def queued_connections(sock):
    """Connections waiting on the listening socket for the daemon's accept (ss -l: its Recv-Q)."""
    lines = ss_lines("-l", "src", sock)
    return int(lines[0].split()[2]) if lines else -1


def how_closed(s, timeout):
    """Reads a client socket to its end: "busy" (refused), "closed" (without a word), "open", or other bytes."""
    s.settimeout(timeout)
    got = b""
    try:
        while True:
            k = s.recv(4096)
            if not k:
                break
            got += k
    except socket.timeout:
        return "open"
    except ConnectionResetError:
        pass
    finally:
        s.close()
    if not got:
        return "closed"
    return "busy" if b"busy" in got else got


def log_dir():
    d = os.path.join(os.environ.get("FRATIER_BUILD_ROOT", "build"), "meson-logs")
    os.makedirs(d, exist_ok=True)
    return d


def text_bytes(rng, n):
    words = [b"ORDERS", b"CUSTOMER", b"SCN", b"0x00a2", b"redo", b"commit", b"ROWID", b"ITL", b"block"]
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words) + b" " + str(rng.randrange(10 ** 6)).encode() + b"\n"
    return bytes(out[:n])


class Ctl:
    def __init__(self, mnt, res):
        self.mnt, self.res = mnt, res

    def run(self, *args, user=None, cwd=None, mount=True):
        cmd = ([] if user is None else user) + [tierctl_path()] + (["-m", self.mnt] if mount else []) + list(args)
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=300)
        return p.returncode, p.stdout, p.stderr

    def json(self, *args, user=None):
        rc, out, err = self.run(*args, "--json", user=user)
        if not self.res.check(rc == 0, "tierctl %s --json: exit %d: %s" % (" ".join(args), rc, err.strip())):
            return None
        try:
            return json.loads(out, object_pairs_hook=unique_keys)
        except ValueError as e:
            self.res.check(False, "tierctl %s --json: not JSON (%s): %r" % (" ".join(args), e, out[:300]))
            return None

    def table(self, *args):
        """Rows of a --bytes table (header first), split on runs of 2+ spaces."""
        rc, out, err = self.run(*args, "--bytes")
        self.res.check(rc == 0, "tierctl %s: exit %d: %s" % (" ".join(args), rc, err.strip()))
        return [re.split(r"\s{2,}", line.strip()) for line in out.splitlines() if line.strip()]


def tiers_of(doc):
    """df/status JSON: the first tier row's fields sit at top level only if rows are missing; gather rows."""
    return {t["tier"]: t for t in doc.get("tiers", [])}


def disk_bytes(root, blocks=False):
    total = 0
    for d, _, files in os.walk(root):
        for f in files:
            st = os.lstat(os.path.join(d, f))
            total += st.st_blocks * 512 if blocks else st.st_size
    return total


def request(sock_path, payload, frame=True, user_uid=None):
    """Sends payload raw (framed unless frame=False) and returns the parsed frames [(kind, {field: value})]."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(sock_path)
    s.sendall((struct.pack(">I", len(payload)) if frame else b"") + payload)
    data = b""
    while True:
        try:
            d = s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            break
        if not d:
            break
        data += d
    s.close()
    frames = []
    while len(data) >= 4:
        n = struct.unpack(">I", data[:4])[0]
        body, data = data[4:4 + n], data[4 + n:]
        fields = {}
        for line in body.decode().splitlines():
            k, _, v = line.partition(" ")
            fields.setdefault(k, v)
        frames.append((fields.get("reply"), fields))
    return frames


def refusal(frames):
    """(errno, message) of a final error frame, or None."""
    if not frames or frames[-1][0] != "done" or frames[-1][1].get("status") != "error":
        return None
    f = frames[-1][1]
    return int(f.get("errno", "0")), f.get("message", "")


def main():
    require_fuse()
    res = Results("e2e-tierctl")
    if not res.check(os.path.exists(tierctl_path()), "tierctl not built: %s" % tierctl_path()):
        res.finish()

    base = tempfile.mkdtemp(prefix="fratier-e2e-tierctl-", dir=os.environ.get("FRATIER_TMP"))
    # The unprivileged user must reach the mount and the socket, as on a real system.
    os.chmod(base, 0o755)
    rng = random.Random(20261203)
    files = {}  # mount-relative path -> (bytes, class)
    a_log = text_bytes(rng, 2 << 20)
    files["archivelog/2024_01_01/o1_mf_1_7_abc_.arc"] = (a_log, "archivelog")
    files["backupset/2024_01_01/o1_mf_annnn_TAG1_x_.bkp"] = (a_log[:1 << 20] + text_bytes(rng, 1 << 20), "archivelogbackup")
    files["datafile/o1_mf_users_x_.dbf"] = (text_bytes(rng, 1 << 20), "imagecopy")
    files["misc/notes.txt"] = (text_bytes(rng, 10000), "other")
    files["onlinelog/o1_mf_1_x_.log"] = (text_bytes(rng, 65536), "passthrough")
    files["private/secret.bkp"] = (text_bytes(rng, 50000), "backuppiece")

    try:
        with Fratier(base=base, options=["seal_delay=0", "gc_interval=3600", "allow_other", "history_interval=1"]) as fs:
            ctl = Ctl(fs.mnt, res)
            sock = os.path.join(fs.data, "control.sock")
            res.check(os.path.exists(sock), "control socket %s exists" % sock)
            os.chmod(fs.mnt, 0o755)
            for rel, (data, _) in files.items():
                p = fs.path(rel)
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, "wb") as f:
                    f.write(data)
            os.chmod(fs.path("private"), 0o700)

            # Sealed (everything but the passthrough file), checked through the xattr.
            deadline = time.monotonic() + SEAL_TIMEOUT
            want = {rel: ("raw" if cls == "passthrough" else "sealed") + " " + cls for rel, (_, cls) in files.items()}
            while True:
                got = {rel: os.getxattr(fs.path(rel), STATE_XATTR).decode() for rel in files}
                if got == want or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            for rel in files:
                res.check(got[rel] == want[rel], "%s: state %r, want %r" % (rel, got[rel], want[rel]))
            # Quiet: the seal queue drains (status shows it) before figures are compared with the disk.
            def seal_queue():
                st = ctl.json("status")
                return st.get("seal_queue") if st else None

            res.check(wait_for(lambda: seal_queue() == 0, scaled(20)), "seal queue never drained: %r" % seal_queue())
            # And the sealed files' staging files, retired at the commit, are deleted (seal.c reap_main()).
            def retired():
                return [n for _, _, names in os.walk(os.path.join(fs.data, "hot", "staging")) for n in names if "." in n]

            res.check(wait_for(lambda: not retired(), scaled(20)), "retired staging files never deleted: %r" % retired())

            total_logical = sum(len(d) for d, _ in files.values())
            containers = disk_bytes(os.path.join(fs.data, "hot", "containers"))
            staging = disk_bytes(os.path.join(fs.data, "hot", "staging"), blocks=True)

            # ---- df ----
            df = ctl.json("df")
            if df:
                hot = tiers_of(df).get(0, {})
                res.check(hot.get("name") == "hot" and hot.get("reachable") == "yes", "df: hot tier %r" % hot)
                res.check(hot.get("logical") == total_logical, "df: logical %r, wrote %d" % (hot.get("logical"), total_logical))
                res.check(hot.get("stored") == containers, "df: stored %r, containers on disk %d" % (hot.get("stored"), containers))
                res.check(hot.get("raw") == staging, "df: raw %r, staging blocks on disk %d" % (hot.get("raw"), staging))
                res.check(hot.get("used") == containers + staging, "df: used %r" % hot.get("used"))
                res.check(hot.get("files") == len(files), "df: files %r" % hot.get("files"))
                res.check(hot.get("dedup_ratio", 0) > 1.0, "df: dedup ratio %r (the backup piece repeats the log)" % hot.get("dedup_ratio"))
                res.check(hot.get("compression_ratio", 0) > 1.0, "df: compression ratio %r" % hot.get("compression_ratio"))
                table = ctl.table("df")
                res.check(table[0][:8] == ["TIER", "NAME", "CAPACITY", "USED", "FREE", "LOGICAL", "STORED", "RAW"],
                          "df table header %r" % table[0])
                row = [r for r in table[1:] if r[0] == "0"]
                res.check(bool(row) and row[0][5] == str(total_logical) and row[0][6] == str(containers)
                          and row[0][7] == str(staging) and row[0][8] == "%.2fx" % hot["dedup_ratio"],
                          "df table row %r matches the JSON" % (row[0] if row else None))
                rc, out, _ = ctl.run("df")
                res.check(rc == 0 and " MiB" in out and "KiB" in out, "df table in IEC units: %r" % out)

            # ---- status ----
            st = ctl.json("status")
            if st:
                res.check(st.get("mount") == os.path.realpath(fs.mnt), "status: mount %r" % st.get("mount"))
                res.check(st.get("files_sealed") == len(files) - 1 and st.get("files_raw") == 1,
                          "status: files %r sealed, %r raw" % (st.get("files_sealed"), st.get("files_raw")))
                res.check(st.get("seal_queue") == 0 and st.get("gc_queue") == 0, "status: queues %r %r" % (st.get("seal_queue"), st.get("gc_queue")))
                res.check(tiers_of(st).get(0, {}).get("stored") == containers, "status: hot tier stored")
                res.check(st.get("sealed_bytes") == total_logical - len(files["onlinelog/o1_mf_1_x_.log"][0]), "status: sealed bytes %r" % st.get("sealed_bytes"))
            rc, out, _ = ctl.run("status")
            res.check(rc == 0 and "mount:" in out and "queues:" in out and "last errors:" in out and "REACHABLE" in out,
                      "status table: %r" % out[:400])

            # ---- report ----
            rep = ctl.json("report", "--by", "class")
            if rep:
                groups = {g["key"]: g for g in rep.get("groups", [])}
                for cls in set(c for _, c in files.values()):
                    want_files = [d for d, c in files.values() if c == cls]
                    g = groups.get(cls, {})
                    res.check(g.get("files") == len(want_files) and g.get("logical") == sum(map(len, want_files)),
                              "report by class %s: %r" % (cls, g))
                res.check(groups.get("passthrough", {}).get("stored") == staging, "report: passthrough stored = its staging blocks")
                chunk_stored = sum(g["chunk_stored"] for g in groups.values())
                res.check(abs(chunk_stored - hot["live"]) <= len(groups), "report: chunk stored %d sums to the live frames %d" % (chunk_stored, hot["live"]))
                table = ctl.table("report", "--by", "class")
                # The groups' table ends where the policy outlook begins.
                ends = [i for i, r in enumerate(table) if r[0].startswith("Policy:")]
                res.check(len(ends) == 1, "report table: one policy outlook after the groups")
                rows = {r[0]: r for r in table[1:ends[0] if ends else len(table)]}
                for key, g in groups.items():
                    r = rows.get(key)
                    res.check(r is not None and r[1] == str(g["files"]) and r[2] == str(g["logical"]) and r[3] == str(g["stored"])
                              and r[6] == ("%.2fx" % g["reduction_ratio"] if g["stored"] else "-"),
                              "report table row %r matches %r" % (r, g))
                res.check(rows.get("total", [None, None, None])[2] == str(total_logical), "report total %r" % rows.get("total"))
            rep = ctl.json("report", "--by", "day")
            if rep:
                days = {}
                for rel, (d, _) in files.items():
                    key = time.strftime("%Y-%m-%d", time.gmtime(os.stat(fs.path(rel)).st_mtime))
                    days[key] = days.get(key, 0) + len(d)
                got = {g["key"]: g["logical"] for g in rep.get("groups", [])}
                res.check(got == days, "report by day %r, want %r" % (got, days))
            rep = ctl.json("report", "--by", "tier")
            if rep:
                got = {g["key"]: (g["files"], g["logical"]) for g in rep.get("groups", [])}
                res.check(got == {"hot": (len(files), total_logical)}, "report by tier %r" % got)

            # ---- du, ls ----
            du = ctl.json("du", fs.mnt, fs.path("archivelog/2024_01_01/o1_mf_1_7_abc_.arc"))
            if du:
                paths = {p["path"]: p for p in du.get("paths", [])}
                root = paths.get("/", {})
                res.check(root.get("logical") == total_logical and root.get("files") == len(files), "du /: %r" % root)
                arc = paths.get("/archivelog/2024_01_01/o1_mf_1_7_abc_.arc", {})
                res.check(arc.get("logical") == len(a_log) and arc.get("state") == "sealed" and arc.get("class") == "archivelog"
                          and arc.get("shared", 0) > 0 and arc.get("unique", 0) > 0, "du of the archivelog: %r" % arc)
            # du from inside the mount, relative path, no -m: the mount containing the current directory.
            rc, out, err = ctl.run("du", "--bytes", "2024_01_01", cwd=fs.path("archivelog"), mount=False)
            res.check(rc == 0 and str(len(a_log)) in out, "du from inside the mount without -m: %d %r %r" % (rc, out, err))
            ls = ctl.json("ls", "-l", fs.path("backupset/2024_01_01"), fs.path("datafile"))
            if ls:
                ents = {e["name"]: e for e in ls.get("entries", [])}
                bkp = ents.get("o1_mf_annnn_TAG1_x_.bkp", {})
                dbf = ents.get("o1_mf_users_x_.dbf", {})
                res.check(bkp.get("logical") == 2 << 20 and bkp.get("class") == "archivelogbackup" and bkp.get("state") == "sealed"
                          and bkp.get("tier") == 0, "ls -l backup piece %r" % bkp)
                res.check(dbf.get("class") == "imagecopy" and dbf.get("logical") == 1 << 20, "ls -l image copy %r" % dbf)
                table = ctl.table("ls", "-l", fs.path("backupset/2024_01_01"))
                res.check(table[0][0] == "TYPE" and table[1][-1] == "o1_mf_annnn_TAG1_x_.bkp" and table[1][5] == str(2 << 20),
                          "ls -l table %r" % table)
            rc, out, _ = ctl.run("ls", fs.path("onlinelog"))
            res.check(rc == 0 and "raw" in out and "passthrough" in out, "ls of the online log: %r" % out)
            rc, _, err = ctl.run("ls", "/etc")
            res.check(rc == EXIT_USAGE and "not inside" in err, "ls outside the mount: %d %r" % (rc, err))
            rc, _, err = ctl.run("ls", fs.path("nonexistent"))
            res.check(rc == EXIT_PARTIAL and "No such file" in err, "ls of a missing path: %d %r" % (rc, err))

            # ---- policy ----
            pol = ctl.json("policy", "show")
            if pol:
                cls = {c["class"]: c for c in pol.get("classes", [])}
                res.check(cls.get("passthrough", {}).get("sealed") == "no" and cls.get("imagecopy", {}).get("chunker") == "fixed"
                          and cls.get("archivelog", {}).get("chunk_avg") == 16384 and pol.get("seal_delay") == 0
                          and cls.get("backuppiece", {}).get("chunk_avg") == 8192
                          and cls.get("archivelogbackup", {}).get("chunk_avg") == 16384
                          and str(cls.get("backuppiece", {}).get("zstd_level")) == "1",
                          "policy show %r" % pol)

            # ---- permissions: nobody reads reports, cannot gc or scrub ----
            for cmd in (["status"], ["df"], ["report", "--by", "class"], ["policy", "show"]):
                doc = ctl.json(*cmd, user=NOBODY)
                res.check(doc is not None, "nobody may run %s" % cmd)
            df_nobody = ctl.json("df", user=NOBODY)
            if df_nobody and df:
                res.check(tiers_of(df_nobody)[0]["logical"] == total_logical, "nobody sees the same df")
            for cmd in (["gc"], ["scrub"]):
                rc, _, err = ctl.run(*cmd, user=NOBODY)
                res.check(rc == EXIT_DENIED and "permission denied" in err and "root" in err,
                          "nobody may not run %s: %d %r" % (cmd, rc, err))
            rc, _, err = ctl.run("ls", fs.path("private"), user=NOBODY)
            res.check(rc == EXIT_PARTIAL and "Permission denied" in err, "nobody may not list private/: %d %r" % (rc, err))
            du_root = ctl.json("du", fs.mnt)
            rc, out, err = ctl.run("du", "--json", fs.mnt, user=NOBODY)
            try:
                d = json.loads(out)["paths"][0]
                res.check(rc == 0 and d["errors"] == 1 and d["logical"] == total_logical - len(files["private/secret.bkp"][0]),
                          "nobody's du skips private/: %r" % d)
            except (ValueError, KeyError, IndexError):
                res.check(False, "nobody's du --json: %d %r %r" % (rc, out, err))
            root_du = ((du_root or {}).get("paths") or [{}])[0]
            res.check(root_du.get("errors") == 0 and root_du.get("logical") == total_logical
                      and root_du.get("files") == len(files), "root's du counts private/ too: %r" % root_du)

            # ---- malformed and forged requests ----
            r = refusal(request(sock, b"fratier 1\ncommand rm\n"))
            res.check(r is not None and r[0] == errno.EBADMSG and "unknown command 'rm'" in r[1], "unknown command refused: %r" % (r,))
            r = refusal(request(sock, b"fratier 1\ncommand status\nuid 0\n"))
            res.check(r is not None and "unknown argument 'uid'" in r[1], "forged uid field refused: %r" % (r,))
            r = refusal(request(sock, b"fratier 2\ncommand status\n"))
            res.check(r is not None and "version" in r[1], "other protocol version refused: %r" % (r,))
            r = refusal(request(sock, b"fratier 1\ncommand du\npath /../etc\n"))
            res.check(r is not None and "not absolute and canonical" in r[1], "path escaping the mount refused: %r" % (r,))
            r = refusal(request(sock, b"fratier 1\ncommand status\n\x00\n"))
            res.check(r is not None and r[0] == errno.EBADMSG, "control bytes refused: %r" % (r,))
            r = refusal(request(sock, b"GET / HTTP/1.1\r\n\r\n", frame=False))
            res.check(r is not None and "bad request frame" in r[1], "unframed garbage refused: %r" % (r,))
            r = refusal(request(sock, struct.pack(">I", 0), frame=False))
            res.check(r is not None and "empty" in r[1], "empty frame refused: %r" % (r,))
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.sendall(struct.pack(">I", 100) + b"fratier 1\n")
            s.close()  # truncated request: the daemon just drops it
            p = subprocess.run(NOBODY + [sys.executable, "-c",
                               "import socket,struct,sys\ns=socket.socket(socket.AF_UNIX);s.connect(sys.argv[1])\n"
                               "p=b'fratier 1\\ncommand gc\\n';s.sendall(struct.pack('>I',len(p))+p)\n"
                               "d=b''\nwhile True:\n  x=s.recv(4096)\n  if not x: break\n  d+=x\nsys.stdout.write(d[4:].decode())",
                               sock], capture_output=True, text=True, timeout=60)
            res.check("status error" in p.stdout and "errno 13" in p.stdout and "permission denied" in p.stdout,
                      "nobody's raw gc request refused: %r" % p.stdout)

            # ---- several clients at once, and one too many ----
            outs, errs = [], []

            def client():
                for _ in range(3):
                    rc_, out_, err_ = ctl.run("df", "--json")
                    (outs if rc_ == 0 else errs).append(out_ if rc_ == 0 else err_)

            writer_ok = []

            def writer():
                data = text_bytes(random.Random(5), 1 << 20)
                p_ = fs.path("misc/during-clients.txt")
                with open(p_, "wb") as f:
                    f.write(data)
                with open(p_, "rb") as f:
                    writer_ok.append(f.read() == data)

            threads = [threading.Thread(target=client) for _ in range(8)] + [threading.Thread(target=writer)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            res.check(not errs and len(outs) == 24, "8 concurrent clients x 3: %d ok, errors %r" % (len(outs), errs[:2]))
            res.check(writer_ok == [True], "the filesystem works while clients are served")
            # Each reply is one consistent df: the writer's file counts with none, some or all of its bytes.
            during = len(text_bytes(random.Random(5), 1 << 20))
            logicals = sorted(set(tiers_of(json.loads(o))[0]["logical"] for o in outs))
            res.check(logicals and all(total_logical <= v <= total_logical + during for v in logicals),
                      "concurrent df replies: logical %r, between %d and %d" % (logicals, total_logical,
                                                                               total_logical + during))
            # Workers of the clients above may still be closing: wait until only
            # the asking client is served (a bounded count of tries, not a timing).
            for _ in range(400):
                st = ctl.json("status")
                if st and st.get("clients") == 1:
                    break
                time.sleep(0.05)
            res.check(st and st.get("clients") == 1, "status: the daemon serves only the asking client %r"
                      % (st or {}).get("clients"))
            # Silent clients for every slot, then one more asks.  A silent
            # client is dropped after the daemon's request timeout (5 s), so
            # the clients are not raced against it: they connect while the
            # daemon is stopped (SIGSTOP), all queue on the listening socket
            # in order, and on SIGCONT the daemon accepts the first
            # CONNECTIONS_MAX into its slots and must refuse every later one,
            # tierctl last, whatever the machine's speed.
            pid = fs.proc.pid
            stop_process(pid)
            try:
                # The status client above may still be draining in its slot:
                # let it go until the daemon holds no accepted connection.
                for _ in range(400):
                    if not accepted_connections(sock):
                        break
                    os.kill(pid, signal.SIGCONT)
                    time.sleep(0.05)
                    stop_process(pid)
                res.check(not accepted_connections(sock), "the daemon still holds a connection: %r"
                          % accepted_connections(sock))
                silent = []
                for _ in range(CONNECTIONS_MAX + 4):
                    s_ = socket.socket(socket.AF_UNIX)
                    s_.connect(sock)
                    silent.append(s_)
                late = subprocess.Popen([tierctl_path(), "-m", fs.mnt, "--socket", sock, "df"],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(6000):
                    if queued_connections(sock) == len(silent) + 1 or late.poll() is not None:
                        break
                    time.sleep(0.01)
                res.check(queued_connections(sock) == len(silent) + 1, "%d clients queued for the stopped daemon, "
                          "not %d" % (queued_connections(sock), len(silent) + 1))
            finally:
                os.kill(pid, signal.SIGCONT)
            _, err = late.communicate(timeout=scaled(60))
            res.check(late.returncode == 1 and "busy" in err, "a client past the %d held slots is told the daemon "
                      "is busy: %d %r" % (CONNECTIONS_MAX, late.returncode, err))
            # Each silent client ends closed: the first CONNECTIONS_MAX without
            # a word (dropped after the request timeout, never kept), the
            # rest with the busy refusal.
            refused = [how_closed(s_, scaled(60)) for s_ in silent]
            want = ["closed"] * CONNECTIONS_MAX + ["busy"] * 4
            res.check(refused == want, "silent clients in order of connection: %r, not %r" % (refused, want))
            for _ in range(100):
                rc, _, err = ctl.run("df")
                if rc == 0:
                    break
                time.sleep(0.1)
            res.check(rc == 0, "served again once the silent clients are gone: %r" % err)
            os.unlink(fs.path("misc/during-clients.txt"))

            # ---- gc ----
            gc = ctl.json("gc")
            res.check(gc is not None and "chunks_deleted" in gc and gc.get("chunks_deleted", 0) > 0,
                      "gc collects the chunks of the deleted file: %r" % gc)

            # ---- metrics ----
            rc, out, err = ctl.run("metrics")
            res.check(rc == 0 and "fratier_tier_logical_bytes" in out, "metrics: %d %r" % (rc, err))
            check_metrics(res, ctl, fs, total_logical)

            # ---- report: the samples over time; what the policy moves next; move filters ----
            check_history(res, ctl, files, total_logical)
            check_outlook(res, ctl, fs)
            check_move_filters(res, ctl, fs, files)

            # ---- HTML report in headless Chromium ----
            check_html(res, ctl, base)

            # ---- discovery errors ----
            rc, _, err = ctl.run("-m", "/tmp", "df", mount=False)
            res.check(rc == EXIT_USAGE and "not a fratier mount" in err, "-m on a non-fratier dir: %d %r" % (rc, err))
            rc, _, err = ctl.run("--socket", os.path.join(base, "nothing.sock"), "df")
            res.check(rc == EXIT_NOT_RUNNING and "is fratierfs running" in err, "no daemon on the socket: %d %r" % (rc, err))
            rc, _, err = ctl.run("frobnicate")
            res.check(rc == EXIT_USAGE and "unknown command" in err, "unknown command: %d %r" % (rc, err))
            rc, _, err = ctl.run("df", "--by", "class")
            res.check(rc == EXIT_USAGE, "option of another command: %d %r" % (rc, err))
            for cmd in ("status", "df", "du", "ls", "report", "policy", "gc", "scrub", "metrics"):
                rc, out, _ = ctl.run(cmd, "--help")
                res.check(rc == 0 and out.startswith("usage: tierctl"), "%s --help" % cmd)

            # ---- a client that leaves during a scrub (Ctrl-C) leaves nothing stuck ----
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            payload = b"fratier 1\ncommand scrub\n"
            s.sendall(struct.pack(">I", len(payload)) + payload)
            s.close()
            for _ in range(300):
                rc, out, err = ctl.run("scrub", "--json")
                if rc == 0 or "already running" not in err:
                    break
                time.sleep(0.1)
            res.check(rc == 0, "scrub runs again after a client left one: %d %r" % (rc, err))

            # ---- scrub: clean; a flip in garbage is harmless; one damaged chunk ----
            sc = ctl.json("scrub")
            res.check(sc is not None and sc.get("damaged_chunks") == 0 and sc.get("chunks", 0) > 0, "clean scrub %r" % sc)
            listed, garbage = hot_frames(fs)
            print("hot tier: %d regions the catalog lists, %d garbage regions (the deleted file's, until compaction; "
                  "a seal race's losers)" % (len(listed), len(garbage)), flush=True)
            # The gc above left the deleted file's regions in the open container, which is never compacted.
            if res.check(garbage, "no garbage region on the hot tier after deleting a file and collecting"):
                flip_payload_byte(*garbage[0])
                rc, out, err = ctl.run("scrub", "--json")
                sc = json.loads(out) if rc in (0, EXIT_PARTIAL) else {}
                res.check(rc == 0 and sc.get("damaged_chunks") == 0 and sc.get("chunks") == sum(u[3] for u in listed),
                          "a flip in a garbage region is harmless: scrub %d %r %r" % (rc, sc, err))
                for rel, (data, _) in files.items():
                    with open(fs.path(rel), "rb") as f:
                        res.check(f.read() == data, "%s reads back intact with a flip in garbage" % rel)
            res.check(listed, "no region the catalog lists on the hot tier")
            # A flip breaks its whole region: every live chunk in it is damaged, no other.
            victim = min(listed, key=lambda u: u[3]) if listed else garbage[0]
            flip_payload_byte(*victim)
            rc, out, err = ctl.run("scrub", "--json")
            try:
                sc = json.loads(out)
            except ValueError:
                sc = {}
            damaged = set(d["path"].lstrip("/") for d in sc.get("damaged", []))
            res.check(rc == EXIT_PARTIAL and sc.get("damaged_chunks") == victim[3] and damaged,
                      "scrub finds the %d chunks of the damaged region: %d %r %r" % (victim[3], rc, sc, err))
            res.check(re.search(r"scrub: verify (tier 0 )?[0-9.]+ [KM]iB of [0-9.]+ [KM]iB \(100%\), .*/s, eta 0s, [1-9]\d* damaged", err),
                      "scrub prints plain progress lines when not on a terminal: %r" % err)
        # Remount (no cached chunk can hide the damage): listed files fail, the others read back.
        with Fratier(base=base, options=["seal_delay=0", "gc_interval=3600"]) as fs:
            for rel, (data, _) in files.items():
                try:
                    with open(fs.path(rel), "rb") as f:
                        ok = f.read() == data
                    err = None
                except OSError as e:
                    ok, err = False, e.errno
                if rel in damaged:
                    res.check(err == errno.EIO, "%s listed as damaged and reads EIO (%r)" % (rel, err))
                else:
                    res.check(ok, "%s not listed and reads back intact (%r)" % (rel, err))
        check_socket_options(res, base)
    finally:
        if not os.environ.get("FRATIER_KEEP"):
            shutil.rmtree(base, ignore_errors=True)
    res.finish()


def check_socket_options(res, base):
    """-o control=PATH moves the socket; a socket that cannot be made stops the start-up, with a message."""
    custom = os.path.join(base, "custom.sock")
    with Fratier(base=base, options=["control=" + custom]) as fs:
        res.check(os.path.exists(custom) and not os.path.exists(os.path.join(fs.data, "control.sock")),
                  "-o control=PATH puts the socket there")
        rc, out, err = Ctl(fs.mnt, res).run("--socket", custom, "df", "--json")
        res.check(rc == 0 and json.loads(out)["tiers"][0]["files"] == 6, "tierctl --socket PATH: %d %r" % (rc, err))
    res.check(not os.path.exists(custom), "the socket goes with the daemon")
    for bad, why in ((os.path.join(base, "missing-dir", "c.sock"), "No such file"),
                     ("/tmp/" + "x" * 120 + ".sock", "too long"),
                     (os.path.join(base, "data", "hot", "catalog.db"), "File exists")):
        fs = Fratier(base=base, options=["control=" + bad])
        try:
            fs.start()
            fs.stop()
            res.check(False, "control=%s: the daemon started" % bad)
        except RuntimeError as e:
            res.check("control socket" in str(e) and why in str(e), "control=%s refused: %s" % (bad, str(e)[-300:]))
    res.check(os.path.getsize(os.path.join(base, "data", "hot", "catalog.db")) > 0, "an existing file is never replaced")


def sqlite_rows(fs, sql):
    """Rows of a query on the live catalog, read with sqlite3 -readonly (the WAL lets it read beside the daemon)."""
    p = subprocess.run(["sqlite3", "-readonly", "-separator", " ", os.path.join(fs.data, "hot", "catalog.db"), sql],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError("sqlite3: %s" % p.stderr.strip())
    return [tuple(int(v) for v in line.split()) for line in p.stdout.splitlines()]


def hot_frames(fs):
    """([(container file, offset, size, live chunks)] of the regions the catalog
    lists for a live chunk, [...] of the regions in the same containers that it
    does not list: garbage).

    Scrub verifies the regions the catalog lists; the others are garbage (a
    chunk stored by two seal workers at once keeps one copy, a deleted
    file's chunks stay until compaction) that no read ever uses.  The
    garbage is found by walking each container's regions (docs/FORMAT.md,
    container version 2) up to the size the catalog committed."""
    listed, chunks = {}, {}
    for c, o, n in sqlite_rows(fs, "SELECT container, offset, region_size FROM chunks WHERE tier = 0 AND refs > 0"):
        listed[(c, o)] = n
        chunks[(c, o)] = chunks.get((c, o), 0) + 1
    live, garbage = [], []
    for cid, size in sqlite_rows(fs, "SELECT id, size FROM containers WHERE tier = 0"):
        path = os.path.join(fs.data, "hot", "containers", "c", "%02x" % (cid & 0xff), "%016x.ftc" % cid)
        with open(path, "rb") as f:
            image = f.read(size)
        off = CONTAINER_HEADER
        while off + 64 <= len(image) and image[off:off + 4] == REGION_MAGIC:
            count, _, stored = struct.unpack_from("<III", image, off + 12)
            n = 64 + 36 * count + stored
            if (cid, off) in listed:
                if listed[(cid, off)] != n:
                    raise RuntimeError("%s: region at %d is %d bytes, the catalog says %d"
                                       % (path, off, n, listed[(cid, off)]))
                live.append((path, off, n, chunks[(cid, off)]))
            else:
                garbage.append((path, off, n, 0))
            off += n
    if len(live) != len(listed):
        raise RuntimeError("%d regions the catalog lists are not where it says" % (len(listed) - len(live)))
    return live, garbage


def flip_payload_byte(path, offset, size, _chunks):
    """Flips a byte in the middle of the region at offset (its checksum no longer matches)."""
    at = offset + 64 + (size - 64) // 2
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x20]))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def check_metrics(res, ctl, fs, total_logical):
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        res.check(False, "python3-prometheus-client is not installed (scripts/install-deps.sh)")
        return
    port = free_port()
    p = subprocess.Popen([tierctl_path(), "-m", fs.mnt, "metrics", "--listen", "127.0.0.1:%d" % port],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    body = None
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30) as r:
                    res.check(r.headers.get("Content-Type", "").startswith("text/plain; version=0.0.4"),
                              "metrics content type %r" % r.headers.get("Content-Type"))
                    body = r.read().decode()
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/other" % port, timeout=30)
            res.check(False, "/other answers 404")
        except urllib.error.HTTPError as e:
            res.check(e.code == 404, "/other answers %d" % e.code)
    finally:
        p.send_signal(signal.SIGINT)
        rc = p.wait(60)
    res.check(rc == 0, "metrics --listen stops on Ctrl-C with 0 (got %d: %s)" % (rc, p.stderr.read()))
    if not res.check(body is not None, "scraped /metrics"):
        return
    samples = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    hot = (("name", "hot"), ("tier", "0"))
    res.check(samples.get(("fratier_tier_logical_bytes", hot)) == total_logical,
              "metrics logical %r" % samples.get(("fratier_tier_logical_bytes", hot)))
    containers = disk_bytes(os.path.join(fs.data, "hot", "containers"))
    res.check(samples.get(("fratier_tier_stored_bytes", hot)) == containers,
              "metrics stored %r, on disk %d" % (samples.get(("fratier_tier_stored_bytes", hot)), containers))
    res.check(samples.get(("fratier_up", ())) == 1 and ("fratier_queue_depth", (("queue", "seal"),)) in samples
              and samples.get(("fratier_tier_dedup_ratio", hot), 0) > 1 and ("fratier_errors_total", ()) in samples
              and ("fratier_catalog_lock_waits_total", ()) in samples and ("fratier_catalog_vacuum_left_pages", ()) in samples,
              "metrics families present: %r" % sorted(set(k[0] for k in samples)))


def check_history(res, ctl, files, total_logical):
    """The daemon samples usage every second here (history_interval=1): the latest sample counts as df does."""
    deadline = time.monotonic() + 60
    while True:
        df = tiers_of(ctl.json("df") or {}).get(0, {})
        rep = ctl.json("report", "--by", "class") or {}
        tiers = rep.get("history_tiers", [])
        times = sorted(set(h["t"] for h in tiers))
        hot = [h for h in tiers if h["t"] == times[-1] and h["tier"] == "hot"] if times else []
        want = (len(files), total_logical, df.get("stored", -1) + df.get("raw", 0))
        if (len(times) >= 3 and hot and (hot[0]["files"], hot[0]["logical"], hot[0]["stored"]) == want) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    res.check(len(times) >= 3, "report: %d samples over time (one a second)" % len(times))
    res.check(bool(hot) and hot[0]["role"] == "hot" and (hot[0]["files"], hot[0]["logical"], hot[0]["stored"]) == want
              and 0 < hot[0]["used"] <= hot[0]["capacity"],
              "latest sample of the hot tier: %r; df: files, logical, stored + raw %r" % (hot[0] if hot else None, want))
    latest = {h["class"]: h for h in rep.get("history_classes", []) if times and h["t"] == times[-1]}
    for cls in set(c for _, c in files.values()):
        want = [d for d, c in files.values() if c == cls]
        h = latest.get(cls, {})
        res.check(h.get("files") == len(want) and h.get("logical") == sum(map(len, want))
                  and h.get("hot_logical") == h.get("logical"), "latest sample of class %s: %r" % (cls, h))


def check_outlook(res, ctl, fs):
    """Moves by age: one file due now, one within a day (its due time exact), one within a week."""
    now = int(time.time())
    dated = {"archivelog/2024_01_01/o1_mf_1_7_abc_.arc": now - 3 * 86400,
             "private/secret.bkp": now,
             "backupset/2024_01_01/o1_mf_annnn_TAG1_x_.bkp": now + 3 * 86400}
    for rel, t in dated.items():
        os.utime(fs.path(rel), (t, t))
    rep = ctl.json("report", "--by", "class")
    if not rep:
        return
    res.check(rep.get("policy") == "off" and "policy_next_run" not in rep, "report: the policy worker is off here")
    out = {o["class"]: o for o in rep.get("outlook", [])}
    res.check(set(out) == {"archivelog", "backuppiece", "archivelogbackup"},
              "outlook: the classes with a target tier %r" % sorted(out))
    log, piece, alb = out.get("archivelog", {}), out.get("backuppiece", {}), out.get("archivelogbackup", {})
    res.check(log.get("due_files") == 1 and log.get("due_bytes") == 2 << 20 and log.get("target") == "capacity",
              "outlook: the old log is due at the next pass: %r" % log)
    space = rep.get("hot_space_needed", 0)
    if space == 0:
        res.check(piece.get("day_files") == 1 and piece.get("day_bytes") == 50000 and piece.get("next_due") == now + 86400,
                  "outlook: the new piece moves within a day, at its mtime + 1d: %r" % piece)
        res.check(alb.get("week_files") == 1 and alb.get("week_bytes") == 2 << 20 and alb.get("next_due") == now + 4 * 86400,
                  "outlook: the future-dated piece within a week: %r" % alb)
    else:
        res.check(piece.get("day_files", 0) + piece.get("space_files", 0) == 1, "outlook under space pressure: %r" % piece)
    rc, text, _ = ctl.run("report", "--by", "class")
    res.check(rc == 0 and "Policy: off" in text and "NEXT PASS (AGE)" in text and "2.0 MiB in 1" in text,
              "report table shows the outlook: %r" % text[-600:])


def check_move_filters(res, ctl, fs, files):
    """--class, --older-than and --larger-than narrow what a migrate would move (a dry run moves nothing)."""
    def would_move(*args):
        d = ctl.json("migrate", "--dry-run", *args, fs.mnt) or {}
        return sorted(m["path"].lstrip("/") for m in d.get("moves", []) if m.get("result") == "would_move")
    res.check(would_move("--class", "archivelog") == ["archivelog/2024_01_01/o1_mf_1_7_abc_.arc"],
              "migrate --class archivelog: %r" % would_move("--class", "archivelog"))
    res.check(would_move("--older-than", "2d") == ["archivelog/2024_01_01/o1_mf_1_7_abc_.arc"],
              "migrate --older-than 2d: %r" % would_move("--older-than", "2d"))
    big = sorted(rel for rel, (d, c) in files.items() if len(d) > 1 << 20 and c != "passthrough")
    res.check(would_move("--larger-than", "1M") == big, "migrate --larger-than 1M: %r, want %r" % (would_move("--larger-than", "1M"), big))
    res.check(would_move("--class", "archivelog", "--larger-than", "2M") == [], "filters combine: nothing is larger than 2 MiB")
    rc, _, err = ctl.run("migrate", "--dry-run", "--class", "nosuch", fs.mnt)
    res.check(rc != 0 and "unknown class 'nosuch'" in err and "backuppiece" in err, "an unknown class is refused: %r" % err)
    rc, _, err = ctl.run("migrate", "--dry-run", "--older-than", "soon", fs.mnt)
    res.check(rc == 2 and "--older-than takes an age" in err, "a bad age is a usage error: %d %r" % (rc, err))


def check_html(res, ctl, base):
    out = os.path.join(base, "report.html")
    rc, _, err = ctl.run("report", "--by", "class", "--html", out)
    if not res.check(rc == 0 and os.path.exists(out), "report --html: %d %r" % (rc, err)):
        return
    html = open(out).read()
    res.check("<svg" in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
              and "<script" not in html and "src=" not in html, "the page is self-contained")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not res.check(chromium is not None, "chromium is installed (scripts/install-deps.sh)"):
        return
    shot = os.path.join(log_dir(), "tierctl-report.png")
    if os.path.exists(shot):
        os.unlink(shot)
    profile = tempfile.mkdtemp(prefix="chromium-", dir=base)
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile]
    p = subprocess.run(common + ["--dump-dom", "file://" + out], capture_output=True, text=True, timeout=300)
    dom = p.stdout
    res.check(p.returncode == 0 and dom.count('class="chart"') == 6 and dom.count("<rect") >= 8
              and dom.count("<polyline") == 2 + 1 + 6 + 1 and 'id="outlook"' in dom
              and "archivelog" in dom and "backuppiece" in dom,
              "chromium renders the page with its six charts (two over the groups, four over time) and the outlook: "
              "rc %d, %d charts, %d lines" % (p.returncode, dom.count('class="chart"'), dom.count("<polyline")))
    p = subprocess.run(common + ["--window-size=900,1100", "--screenshot=" + shot, "file://" + out],
                       capture_output=True, text=True, timeout=300)
    ok = os.path.exists(shot) and open(shot, "rb").read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(shot) > 5000
    res.check(ok, "screenshot kept as %s (rc %d: %s)" % (shot, p.returncode, p.stderr[-300:]))


if __name__ == "__main__":
    main()
