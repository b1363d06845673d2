#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Oracle-like data (oragen) through a fratier mount of the embedded default,
# then the operator's reports: what the README's tierctl example shows.
#   scripts/demo.sh [BUILD_DIR] [WORK_DIR]     (root; builds first: meson setup build && ninja -C build)
# Leaves WORK_DIR/report.html; unmounts on exit.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
work=${2:-$(mktemp -d /tmp/fratier-demo-XXXXXX)}
tierctl=$build/tools/tierctl/tierctl

mkdir -p "$work/mnt"
"$build/tools/oragen/oragen" --out "$work/gen" --datafile-size 64M --archivelog-size 16M --days 3 -q
"$build/fs/fratierfs" -o "data=$work/data,seal_delay=1,history_interval=5" "$work/mnt"
trap 'cd /; fusermount3 -u "$work/mnt"' EXIT
cp -r "$work/gen/ORCL" "$work/mnt/"
cd "$work/mnt"
# Sealed: nothing raw, nothing queued.
for _ in $(seq 1 600); do
	[ "$("$tierctl" status --json | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d["seal_queue"] + d["files_raw"])')" = 0 ] && break
	sleep 1
done
"$tierctl" migrate --class backuppiece --to capacity . >/dev/null
"$tierctl" gc >/dev/null
echo '$ tierctl df'; "$tierctl" df
echo; echo '$ tierctl report --by class'; "$tierctl" report --by class
echo; echo '$ tierctl status'; "$tierctl" status
"$tierctl" report --by class --html "$work/report.html"
echo; echo "HTML report: $work/report.html"
