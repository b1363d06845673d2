#!/bin/bash
# From a fresh Debian 12 machine, as root: install what fratier needs, build
# it, install it (meson install: fratierfs, tierctl, their man pages, the
# systemd unit, the mount helper, the alerting rules, under /usr/local and
# /lib/systemd, /sbin), and mount it with the embedded default (local
# directories as tiers).  Afterwards `tierctl status` works in any shell.
#
#   scripts/quickstart.sh [DATA_DIR] [MOUNTPOINT]
#
# Defaults: DATA_DIR=/var/lib/fratier (tiers DATA_DIR/hot, DATA_DIR/capacity),
# MOUNTPOINT=/mnt/fratier.  Unmount with: fusermount3 -u MOUNTPOINT
# FRATIER_NO_INSTALL=1 skips the packages (scripts/install-deps.sh).
set -euo pipefail

data=${1:-/var/lib/fratier}
mnt=${2:-/mnt/fratier}
top=$(cd "$(dirname "$0")/.." && pwd)

# FRATIER_NO_INSTALL=1: the packages are there already (as scripts/test.sh takes it).
[ -n "${FRATIER_NO_INSTALL:-}" ] || "$top/scripts/install-deps.sh"
modprobe fuse 2>/dev/null || true

cd "$top"
[ -d build ] || meson setup build -Dbuildtype=release -Dtests=false >/dev/null
ninja -C build >/dev/null
meson install -C build --no-rebuild --quiet

mkdir -p "$mnt"
if mountpoint -q "$mnt"; then
	echo "$mnt is already a mount point; unmount it first (fusermount3 -u $mnt)" >&2
	exit 1
fi
# Detaches once the mount is ready (add -f to stay in the foreground).
fratierfs=$(meson introspect build --installed | python3 -c \
	'import json, sys; print(next(v for k, v in json.load(sys.stdin).items() if k.endswith("/fratierfs")))')
tierctl=$(dirname "$fratierfs")/tierctl
"$fratierfs" -o "data=$data,allow_other" "$mnt"

# Show it working: a file written, synced, read back, and the space it sees.
echo "fratier mounted $data on $mnt"
probe="$mnt/.fratier-quickstart.$$"
head -c 4M /dev/urandom >"$probe.src"
cp "$probe.src" "$probe" && sync "$probe"
cmp "$probe.src" "$probe" && echo "write/read check: OK (4 MiB)"
rm -f "$probe" "$probe.src"
findmnt "$mnt"
echo "installed: $fratierfs, $tierctl (man fratierfs, man tierctl); try: tierctl status"
"$tierctl" -m "$mnt" df
