#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Coverage-guided fuzzing of every fuzz target of a libFuzzer build, for the soak run.

usage: fuzz-soak.py BUILD_DIR SECONDS LOG

Each test of meson's `fuzz` suite in BUILD_DIR (configured -Dfuzz=libfuzzer)
is run for SECONDS with its checked-in corpus as seeds.  What libFuzzer finds
goes to BUILD_DIR/fuzz-soak/NAME/ (new inputs) and, for a crash, to
BUILD_DIR/fuzz-soak/NAME-crash-* : the checked-in corpus directories are only
read.  LOG gets a line per target in meson's testlog.json form, which
scripts/test.sh counts with the meson stages.
"""
import concurrent.futures
import json
import os
import subprocess
import sys
import time


def main():
    build, seconds, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    tests = json.loads(subprocess.run(["meson", "introspect", "--tests", build], check=True,
                                      capture_output=True, text=True).stdout)
    fuzz = [t for t in tests if any(s.endswith(":fuzz") for s in t["suite"])]
    if not fuzz:
        sys.exit("fuzz-soak: no fuzz tests in %s" % build)
    out_dir = os.path.join(build, "fuzz-soak")

    def run(t):
        name = t["name"]
        found = os.path.join(out_dir, name)
        os.makedirs(found, exist_ok=True)
        exe, seeds = t["cmd"][0], t["cmd"][1:]
        # libFuzzer adds new inputs to the first directory only: ours, not the repository's.
        cmd = [exe, found] + seeds + ["-max_total_time=%d" % seconds, "-rss_limit_mb=2048",
                                      "-artifact_prefix=%s-" % found, "-print_final_stats=1"]
        start = time.monotonic()
        p = subprocess.run(cmd, env=dict(os.environ, **t["env"]), capture_output=True, text=True, errors="replace")
        took = time.monotonic() - start
        result = "OK" if p.returncode == 0 else "FAIL"
        runs = next((l.split()[-1] for l in p.stderr.splitlines() if l.startswith("stat::number_of_executed_units")),
                    "?")
        print("=== fuzz-soak: %s: %s, %s runs in %.0f s" % (name, result, runs, took), flush=True)
        return {"name": "fratier:fuzz-soak / " + name, "result": result, "duration": took,
                "stdout": p.stdout, "stderr": p.stderr[-20000:]}

    # One target a core: each is one process, and the soak has the machine to itself.
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool, open(log, "w") as records:
        for record in pool.map(run, fuzz):
            records.write(json.dumps(record) + "\n")

if __name__ == "__main__":
    main()
