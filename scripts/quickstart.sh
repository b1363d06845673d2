#!/bin/bash
# From a fresh Debian 12 machine, as root: install what fratier needs, build
# it, and mount it with the embedded default (local directories as tiers).
#
#   scripts/quickstart.sh [DATA_DIR] [MOUNTPOINT]
#
# Defaults: DATA_DIR=/var/lib/fratier (tiers DATA_DIR/hot, DATA_DIR/capacity),
# MOUNTPOINT=/mnt/fratier.  Unmount with: fusermount3 -u MOUNTPOINT
set -euo pipefail

data=${1:-/var/lib/fratier}
mnt=${2:-/mnt/fratier}
top=$(cd "$(dirname "$0")/.." && pwd)

"$top/scripts/install-deps.sh"
modprobe fuse 2>/dev/null || true

cd "$top"
[ -d build ] || meson setup build -Dbuildtype=release -Dtests=false >/dev/null
ninja -C build fs/fratierfs >/dev/null

mkdir -p "$mnt"
if mountpoint -q "$mnt"; then
	echo "$mnt is already a mount point; unmount it first (fusermount3 -u $mnt)" >&2
	exit 1
fi
# Detaches once the mount is ready (add -f to stay in the foreground).
"$top/build/fs/fratierfs" -o "data=$data,allow_other" "$mnt"

# Show it working: a file written, synced, read back, and the space it sees.
echo "fratier mounted $data on $mnt"
probe="$mnt/.fratier-quickstart.$$"
head -c 4M /dev/urandom >"$probe.src"
cp "$probe.src" "$probe" && sync "$probe"
cmp "$probe.src" "$probe" && echo "write/read check: OK (4 MiB)"
rm -f "$probe" "$probe.src"
findmnt "$mnt"
df -h "$mnt"
