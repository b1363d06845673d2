#!/bin/bash
# The whole test suite, from a fresh Debian 12 machine, as root:
#   installs the build and test dependencies, builds fratier three times (optimised,
#   with AddressSanitizer + UndefinedBehaviorSanitizer, with ThreadSanitizer), runs every test
#   suite, and ends with one line "N passed, N failed, N skipped".
#
# Options (environment):
#   FRATIER_SOAK=1        also run the long soak/fuzz suites (crash rounds x10,
#                         long fuzzing); hours, not minutes
#   FRATIER_NO_ASAN=1     skip the AddressSanitizer build (quicker local runs)
#   FRATIER_NO_TSAN=1     skip the ThreadSanitizer build
#   FRATIER_NO_INSTALL=1  do not run apt-get (dependencies already present)
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

if [ -z "${FRATIER_NO_INSTALL:-}" ]; then
	./scripts/install-deps.sh || { echo "install-deps failed"; echo "0 passed, 1 failed"; exit 1; }
fi

# The e2e tests need FUSE; load the module where it is one (harmless when built in).
modprobe fuse 2>/dev/null || true

if [ -n "${FRATIER_SOAK:-}" ]; then
	export FRATIER_CRASH_ROUNDS=${FRATIER_CRASH_ROUNDS:-500}
	export FUZZ_ITERATIONS=${FUZZ_ITERATIONS:-2000000}
fi

logs=()
status=0

# build_and_test NAME MESON_SETUP_ARGS... -- MESON_TEST_ARGS...
build_and_test() {
	local name=$1
	shift
	local setup=() testargs=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do setup+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	testargs=("$@")
	local dir="$top/build-test-$name"

	echo "=== $name: configure and build"
	local how=()
	[ -d "$dir" ] && how=(--reconfigure)
	meson setup "${how[@]}" "$dir" "${setup[@]}" >"$top/build-test-$name.setup.log" 2>&1 || {
		tail -20 "$top/build-test-$name.setup.log"
		status=1; echo "configure $name failed"; BUILD_FAILED+=("$name"); return
	}
	ninja -C "$dir" -j"$(nproc)" >"$dir/build.log" 2>&1 || { cat "$dir/build.log" | tail -50; status=1; echo "build $name failed"; BUILD_FAILED+=("$name"); return; }

	echo "=== $name: meson test ${testargs[*]}"
	env "${TEST_ENV[@]}" meson test -C "$dir" --print-errorlogs --num-processes "$(nproc)" "${testargs[@]}" || status=1
	logs+=("$dir/meson-logs/testlog.json")
}

BUILD_FAILED=()
TEST_ENV=(FRATIER_TEST_BUILD=release)
build_and_test release -Dbuildtype=debugoptimized
if [ -z "${FRATIER_NO_ASAN:-}" ]; then
	# The daemon under ASan/UBSan too: every e2e test exercises it with sanitizers
	# on, with fewer rounds (the release build runs the full counts).
	TEST_ENV=(FRATIER_TEST_BUILD=asan
		FRATIER_CRASH_ROUNDS="${FRATIER_CRASH_ROUNDS_ASAN:-12}"
		FRATIER_INTEGRITY_SEEDS="${FRATIER_INTEGRITY_SEEDS_ASAN:-6}")
	build_and_test asan -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false \
		-- --timeout-multiplier 3
fi

if [ -z "${FRATIER_NO_TSAN:-}" ]; then
	# ThreadSanitizer on the daemon under the random-I/O exerciser, with
	# sealing right behind it: FUSE hands one inode to many threads, and the
	# races that matter (a reply letting the kernel free what a thread still
	# holds) show up here long before they corrupt anything in production.
	# A report makes the daemon exit non-zero, which fails the test.
	TEST_ENV=(FRATIER_TEST_BUILD=tsan FRATIER_INTEGRITY_SEEDS="${FRATIER_INTEGRITY_SEEDS_TSAN:-6}"
		TSAN_OPTIONS="second_deadlock_stack=1")
	build_and_test tsan -Dbuildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false \
		-- --timeout-multiplier 3 e2e-integrity e2e-dedup e2e-migrate e2e-policy e2e-recover e2e-spill
fi

python3 - "${#BUILD_FAILED[@]}" "${logs[@]}" <<'PY'
import json, sys
build_failures = int(sys.argv[1])
passed = failed = skipped = 0
for path in sys.argv[2:]:
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                r = json.loads(line).get("result")
                if r in ("OK", "EXPECTEDFAIL"):
                    passed += 1
                elif r == "SKIP":
                    skipped += 1
                else:
                    failed += 1
    except OSError:
        failed += 1
failed += build_failures
print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
sys.exit(1 if failed else 0)
PY
summary=$?
[ $status -ne 0 ] && [ $summary -eq 0 ] && exit 1
exit $summary
