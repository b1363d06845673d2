#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Runs a tier/ test binary against a real NFSv3 server (tests/nfs/ganesha.py).

    test_nfs.py backend|full|store|dead TEST_BACKEND TEST_NFS_STORE TEST_NFS_DEAD

Re-executes itself in a private network namespace, starts rpcbind and
ganesha on loopback with an empty export in a temporary directory, runs the
chosen binary with the export's URL, and stops the server by PID.  For
"full", the export is a small tmpfs that the test fills up.  For "store"
and "dead", the binary drives the server through its stdout ("@kill",
"@start", "@pause", "@resume"); each is acknowledged with "ok" on its stdin.
Exits 77 (skip) where a namespace or ganesha is not available.
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nfs"))
import ganesha  # noqa: E402


def run_driven(argv, srv):
    """Runs argv, carrying out the server commands it prints."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    actions = {"@kill": srv.kill, "@start": srv.start, "@pause": srv.pause, "@resume": srv.resume}
    for line in proc.stdout:
        cmd = line.strip()
        if cmd in actions:
            print(f"server: {cmd[1:]}", flush=True)
            actions[cmd]()
            proc.stdin.write("ok\n")
            proc.stdin.flush()
        else:
            print(line, end="", flush=True)
    return proc.wait()


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("backend", "full", "store", "dead"):
        print(__doc__, file=sys.stderr)
        return 2
    what = sys.argv[1]
    test_backend, test_store, test_dead = (os.path.abspath(p) for p in sys.argv[2:])
    ganesha.enter_private_namespace()

    with tempfile.TemporaryDirectory(prefix="fratier-nfs-") as workdir:
        with ganesha.Ganesha(workdir, export_size="8m" if what == "full" else None) as srv:
            print(f"server: {srv.url}", flush=True)
            if what in ("backend", "full"):
                rc = subprocess.run([test_backend, "nfs" if what == "backend" else "nfs-full",
                                     srv.url]).returncode
            else:
                rc = run_driven([test_store if what == "store" else test_dead, srv.url], srv)
            if rc != 0:
                print(f"--- ganesha log tail ---\n{srv.log_tail()}", file=sys.stderr)
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main())
