#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""tierctl's help and usage errors, against what they must describe.

    test_help.py TIERCTL CTLPROTO_C VERSION

- `tierctl --help` (and -h) exits 0 and lists exactly the commands the
  daemon's control protocol knows (the command table of common/ctlproto.c)
  plus metrics (served by tierctl itself): a command added to the protocol
  without help, or help for a command that does not exist, fails;
- `tierctl CMD --help` of each exits 0 with that command's usage line;
- `tierctl --version` names the project's version;
- usage errors (no command, an unknown option or command) exit 2 with one
  line on stderr and no help text.
"""

import re
import subprocess
import sys


def run(*args):
    p = subprocess.run([sys.argv[1]] + list(args), capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def protocol_commands(path):
    with open(path) as f:
        src = f.read()
    table = re.search(r"command_names\[_CTL_COMMAND_MAX\]\s*=\s*\{(.*?)\};", src, re.S)
    if not table:
        raise SystemExit("FAIL: no command_names table in %s" % path)
    # A protocol command NOUN_VERB is tierctl's "NOUN VERB" (host_retire: tierctl host retire).
    return set(n.split("_")[0] for n in re.findall(r'\[CTL_COMMAND_\w+\]\s*=\s*"([a-z_]+)"', table.group(1)))


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print("FAIL: " + what, flush=True)

    want = protocol_commands(sys.argv[2]) | {"metrics"}
    check(len(want) > 5, "the protocol's command table lists %r" % sorted(want))
    for flag in ("--help", "-h"):
        rc, out, err = run(flag)
        check(rc == 0 and out.startswith("usage: tierctl ") and not err, "tierctl %s: %d %r %r" % (flag, rc, out[:80], err))
        listed = out.split("\ncommands:\n", 1)[-1].split("\n\n", 1)[0] if "\ncommands:\n" in out else ""
        got = {line.split()[0] for line in listed.splitlines() if line.startswith("  ") and line.strip()}
        check(got == want, "tierctl %s lists commands %r, the protocol and tierctl have %r" % (flag, sorted(got), sorted(want)))
    for cmd in sorted(want):
        rc, out, err = run(cmd, "--help")
        check(rc == 0 and re.match(r"usage: tierctl \[-m MOUNTPOINT\] %s\b" % cmd, out) is not None and not err,
              "tierctl %s --help: %d %r %r" % (cmd, rc, out[:80], err))
    rc, out, err = run("--version")
    check(rc == 0 and out.strip() == "tierctl " + sys.argv[3], "tierctl --version: %d %r, want %r"
          % (rc, out, "tierctl " + sys.argv[3]))
    for args in ([], ["--no-such-option"], ["no-such-command"]):
        rc, out, err = run(*args)
        check(rc == 2 and not out and err.strip() and "tierctl --help" in err and len(err.splitlines()) <= 2,
              "tierctl %s: a usage error, exit 2, a line on stderr and no help: %d %r %r" % (" ".join(args), rc, out[:80], err))
    print("tierctl-help: %d commands, %d failures" % (len(want), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
