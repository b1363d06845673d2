#!/bin/sh
# Installs everything fratier needs to build, mount and run its test suite
# on Debian 12.  Safe to run again: apt-get skips what is already there.
# Every tool a test calls is named here, even those a usual image has:
# the tests' private namespaces need ip (iproute2), unshare, nsenter and
# setpriv (util-linux), mount; e2e-systemd boots systemd; oragen's checks
# compare with the zstd command.  A test that finds one missing skips, and
# scripts/test.sh counts that skip as a failure in CI.
set -eu
export DEBIAN_FRONTEND=noninteractive
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: must run as root (apt-get install)" >&2
	exit 1
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
	build-essential pkg-config meson ninja-build clang llvm lld \
	libclang-rt-14-dev \
	fuse3 libfuse3-dev \
	libzstd-dev libxxhash-dev libssl-dev libsqlite3-dev sqlite3 libinih-dev \
	libnfs-dev libnfs-utils nfs-ganesha nfs-ganesha-vfs rpcbind \
	python3 attr acl xfsprogs e2fsprogs util-linux mount iproute2 kmod zstd procps psmisc rsync systemd \
	valgrind gdb strace \
	python3-prometheus-client python3-yaml chromium prometheus
