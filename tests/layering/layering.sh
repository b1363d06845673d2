#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The layering of ARCHITECTURE.md, checked on #include lines: each folder
# includes only the project headers its row allows, foreign libraries'
# headers only where their owner is, and no *-internal.h from outside its
# folder.  Cheap and coarse on purpose: the link checks beside this script
# (meson.build) catch the calls a header check would miss.
# Usage: layering.sh SOURCE_ROOT; prints every violation, exits 1 if any.
set -eu
root=${1:?usage: layering.sh SOURCE_ROOT}
cd "$root"

# allowed FOLDER PATTERN...: the quoted includes FOLDER's files may use (shell patterns).
allowed() {
	folder=$1
	shift
	grep -rn --include='*.[ch]' '^#include "' "$folder" | sort | while IFS= read -r line; do
		f=${line%%:*}
		rest=${line#*:}
		n=${rest%%:*}
		inc=${rest#*\"}
		inc=${inc%%\"*}
		ok=no
		for pat in "$@"; do
			# shellcheck disable=SC2254
			case "$inc" in $pat) ok=yes ;; esac
		done
		case "$inc" in
		*-internal.h) [ "${inc%/*}" = "${f%/*}" ] || ok=no ;;
		esac
		# fs/main.c is the daemon: it starts control/, which sits above fs/.
		[ "$f" = fs/main.c ] && [ "$inc" = control/control.h ] && ok=yes
		if [ $ok = no ]; then
			echo "$f:$n: includes $inc, which $folder/ may not use (ARCHITECTURE.md)"
			echo x >>"$tmp"
		fi
	done
}

# owned HEADER-REGEX FOLDER...: a foreign library's headers, included only in these folders.
owned() {
	regex=$1
	shift
	grep -rlE "^#include <($regex)" common catalog dedup tier fs control tools --include='*.[ch]' | sort | while IFS= read -r f; do
		ok=no
		for folder in "$@"; do
			case "$f" in "$folder"/*) ok=yes ;; esac
		done
		if [ $ok = no ]; then
			grep -nE "^#include <($regex)" "$f" | sed "s|^|$f:|; s|\$| (owned by: $*)|"
			echo x >>"$tmp"
		fi
	done
}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

allowed common 'common/*'
allowed catalog 'common/*' 'catalog/*'
allowed dedup 'common/*' 'catalog/catalog.h' 'dedup/*'
allowed tier 'common/*' 'catalog/catalog.h' 'dedup/backend.h' 'dedup/store.h' 'dedup/describe.h' 'tier/*'
allowed fs 'common/*' 'catalog/catalog.h' 'dedup/store.h' 'dedup/backend.h' 'dedup/key.h' 'tier/*' 'fs/*'
allowed control 'common/*' 'catalog/catalog.h' 'dedup/store.h' 'tier/*' 'fs/daemon.h' 'fs/throttle.h' 'control/*'
allowed tools 'common/*' 'catalog/catalog.h' 'tier/*' 'tools/*'

owned 'sqlite3\.h' catalog
owned 'fuse' fs
owned 'zstd|xxhash|openssl/' dedup tools
owned 'nfsc/' tier
owned 'ini\.h' common

if [ -s "$tmp" ]; then
	exit 1
fi
echo "layering: every #include in common catalog dedup tier fs control tools follows ARCHITECTURE.md"
