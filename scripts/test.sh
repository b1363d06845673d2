#!/bin/bash
# The whole test suite, from a fresh Debian 12 machine, as root:
#   installs the build and test dependencies, builds fratier four times (optimised,
#   with AddressSanitizer + UndefinedBehaviorSanitizer, with ThreadSanitizer, and with
#   clang for libFuzzer), runs every test suite, and ends with one line
#   "N passed, N failed, N skipped".
#
# Options (environment):
#   FRATIER_SOAK=1        also run the long soak/fuzz suites (crash rounds x10,
#                         long fuzzing: the standalone runners' mutations, and
#                         libFuzzer on every target for FRATIER_FUZZ_SECONDS,
#                         default 300, scripts/fuzz-soak.py); hours, not minutes
#   FRATIER_NO_ASAN=1     skip the AddressSanitizer build (quicker local runs)
#   FRATIER_NO_TSAN=1     skip the ThreadSanitizer build
#   FRATIER_NO_CLANG=1    skip the clang (libFuzzer) build and its corpus replays
#   FRATIER_NO_INSTALL=1  do not run apt-get (dependencies already present)
#   FRATIER_TESTS="A B"   run only these meson tests, in every stage (the skip
#                         and sanitizer rules below apply as in a whole run)
#   CI=true               set by the CI runner (.ci/run only calls this script):
#                         see "Skips" below
#
# Skips.  A test exits 77 (meson's SKIP) when something it needs is missing:
# root, /dev/fuse, a tool.  On a machine set up by install-deps.sh as root,
# nothing is missing, so a skip there means a test did not run what it
# claims.  With CI=true as root, every skip counts as a failure unless the
# test is listed in ALLOWED_SKIPS below with the reason it may skip (the one
# place for such reasons).  Otherwise (a developer's machine, or not root)
# skips are allowed but named at the end with each test's own reason.
#
# Sanitizer reports.  In the ASan+UBSan and TSan stages every process writes
# its sanitizer reports to a file of its own (log_path) under
# build-test-STAGE/sanitizer-logs/, so that a daemon SIGKILLed by a crash test
# or dying just before its kill cannot take its report with it; any report
# file there fails the stage, and its first lines are printed.  One kind is
# not a finding: LeakSanitizer's own "Unable to get registers from thread N"
# alone, written when a crash test's SIGKILL lands while a process runs its
# leak check at exit (seen once in e2e-crash's ASan run); it is named, not
# counted.  Nor is an empty report file: the sanitizer opens it as it starts
# to report, so one is left empty only by a SIGKILL between the open and the
# first write (seen once, beside an "Unable to get registers", in a crash
# test's ASan run); it too is named with its process id, not counted.
#
# Timeouts.  The sanitizer stages run meson's test setup "sanitizer"
# (tests/meson.build): meson's timeouts times 3, and FRATIER_TIMEOUT_MULTIPLIER=3
# for the tests' own deadlines (tests/e2e/harness.py scaled()).
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1

# NAME<TAB>why this test may skip on a CI machine set up by install-deps.sh.
ALLOWED_SKIPS=$(cat <<'LIST'
LIST
)

if [ -z "${FRATIER_NO_INSTALL:-}" ]; then
	./scripts/install-deps.sh || { echo "install-deps failed"; echo "0 passed, 1 failed"; exit 1; }
fi

strict_skips=0
if [ "${CI:-}" = "true" ]; then
	if [ "$(id -u)" -eq 0 ]; then
		strict_skips=1
	else
		echo "warning: CI=true but not root: the tests that need root skip, and skips are allowed"
	fi
fi

# The e2e tests need FUSE; load the module where it is one (harmless when built in).
modprobe fuse 2>/dev/null || true

if [ -n "${FRATIER_SOAK:-}" ]; then
	export FRATIER_CRASH_ROUNDS=${FRATIER_CRASH_ROUNDS:-500}
	export FRATIER_DEDUP_CRASH_ROUNDS=${FRATIER_DEDUP_CRASH_ROUNDS:-200}
	export FUZZ_ITERATIONS=${FUZZ_ITERATIONS:-2000000}
fi

logs=()
sanlogs=()
status=0

# build NAME MESON_SETUP_ARGS...: build-test-NAME configured and built; its
# log's tail and a non-zero status if it failed.
build() {
	local name=$1
	shift
	local dir="$top/build-test-$name" how=() t0=$SECONDS
	[ -d "$dir/meson-private" ] && how=(--reconfigure)
	meson setup "${how[@]}" "$dir" "$@" >"$top/build-test-$name.setup.log" 2>&1 || {
		tail -20 "$top/build-test-$name.setup.log"
		echo "configure $name failed"
		return 1
	}
	ninja -C "$dir" -j"$(nproc)" >"$dir/build.log" 2>&1 || { tail -50 "$dir/build.log"; echo "build $name failed"; return 1; }
	echo "=== $name: built in $((SECONDS - t0)) s"
}

# The sanitizer builds run while the release stage's tests do, at SCHED_IDLE,
# on the cores those tests leave idle (a third of them: the tests wait for
# seals, mounts and kills), so the later stages no longer wait for their
# builds (70 s).  A test takes its core back from them at once, but they
# still cost it something (caches, and on a virtual machine the page faults'
# IPIs): the release stage's tests took 456 s beside them, against 436 s
# with nothing beside them.  Each one's output goes to build-test-NAME.log,
# shown when its stage begins.
declare -A background_build
# build_in_background NAME MESON_SETUP_ARGS...
build_in_background() {
	(
		chrt --idle --pid 0 "$BASHPID" >/dev/null
		build "$@"
	) >"$top/build-test-$1.log" 2>&1 &
	background_build[$1]=$!
}

# built NAME: waits for NAME's background build; its output, and 0 if it built.
built() {
	local rc=0
	wait "${background_build[$1]}" || rc=$?
	cat "$top/build-test-$1.log"
	if [ $rc -ne 0 ]; then
		status=1
		BUILD_FAILED+=("$1")
	fi
	return $rc
}

# run_tests NAME MESON_TEST_ARGS...: meson test in build-test-NAME; its log is counted.
run_tests() {
	local name=$1
	shift
	local dir="$top/build-test-$name"
	# meson names the log after the test setup, if any.
	local log="$dir/meson-logs/testlog.json" args=("$@") i
	for ((i = 0; i + 1 < ${#args[@]}; i++)); do
		[ "${args[i]}" = "--setup" ] && log="$dir/meson-logs/testlog-${args[i + 1]}.json"
	done
	# A meson test that dies before writing its log must not leave an old one to be counted.
	rm -f "$log"
	echo "=== $name: meson test ${args[*]}"
	local t0=$SECONDS
	env "${TEST_ENV[@]}" meson test -C "$dir" --print-errorlogs --num-processes "$TEST_JOBS" "${args[@]}" || status=1
	# Per stage, so that the suite's length can be kept under its budget.
	echo "=== $name: tested in $((SECONDS - t0)) s (load $(cut -d' ' -f1-3 /proc/loadavg))"
	logs+=("$name=$log")
}

# sanitizer_logs NAME: san= a fresh directory for the stage's report files (see "Sanitizer reports").
sanitizer_logs() {
	san="$top/build-test-$1/sanitizer-logs"
	rm -rf "$san"
	mkdir -p "$san"
	chmod 1777 "$san" # tests run tools as nobody too
	sanlogs+=("$1=$san")
}

read -r -a only <<<"${FRATIER_TESTS:-}"

# One test more than cores in the ASan stage: its tests wait (mounts,
# seals, kills, a dead NFS server's timeout) while a core could run another.
# On 2 cores, 3 at once took it from 532 to 492 and 470 s, every test
# passing.  Not in the TSan stage: 220 s once, 275 s in a whole run (its
# dedup-store-faults, page-fault bound, took 120 s beside two others
# against 63 s), against 268.  Nor in the release stage: the sanitizer
# builds run on its idle time.
asan_jobs=$(($(nproc) + 1))

BUILD_FAILED=()
echo "=== release: configure and build"
if build release -Dbuildtype=debugoptimized; then
	[ -z "${FRATIER_NO_ASAN:-}" ] &&
		build_in_background asan -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false
	[ -z "${FRATIER_NO_TSAN:-}" ] &&
		build_in_background tsan -Dbuildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false
	[ -z "${FRATIER_NO_CLANG:-}" ] && [ ${#only[@]} -eq 0 ] &&
		CC=clang build_in_background clang -Dbuildtype=debugoptimized -Dfuzz=libfuzzer \
			-Db_sanitize=address,undefined -Db_lundef=false
	TEST_ENV=(FRATIER_TEST_BUILD=release)
	TEST_JOBS=$(nproc)
	run_tests release "${only[@]}"
else
	# Nothing else is built either: the sanitizer builds would fail the same way.
	status=1
	BUILD_FAILED+=(release)
fi
if [ -n "${background_build[asan]:-}" ] && built asan; then
	# The daemon under ASan/UBSan too: every e2e test exercises it with sanitizers
	# on, with fewer rounds (the release build runs the full counts): each
	# crash test's own under FRATIER_TEST_BUILD=asan (e2e-crash 12,
	# e2e-dedup-crash 6, e2e-dedup-stream-crash 6, e2e-migrate-crash 3),
	# unless FRATIER_CRASH_ROUNDS_ASAN sets one count for all.
	sanitizer_logs asan
	TEST_JOBS=$asan_jobs
	TEST_ENV=(-u FRATIER_CRASH_ROUNDS -u FRATIER_DEDUP_CRASH_ROUNDS FRATIER_TEST_BUILD=asan
		ASAN_OPTIONS="log_path=$san/asan"
		UBSAN_OPTIONS="log_path=$san/ubsan"
		${FRATIER_CRASH_ROUNDS_ASAN:+FRATIER_CRASH_ROUNDS="$FRATIER_CRASH_ROUNDS_ASAN"}
		FRATIER_INTEGRITY_SEEDS="${FRATIER_INTEGRITY_SEEDS_ASAN:-6}")
	run_tests asan --setup sanitizer "${only[@]}"
fi

if [ -n "${background_build[tsan]:-}" ] && built tsan; then
	# ThreadSanitizer on the daemon under the random-I/O exerciser, with
	# sealing right behind it: FUSE hands one inode to many threads, and the
	# races that matter (a reply letting the kernel free what a thread still
	# holds) show up here long before they corrupt anything in production.
	# A report makes the daemon exit non-zero, which fails the test; the
	# report files (log_path) catch those of daemons killed before their exit.
	#
	# Two of TSan's options change how its shadow memory is kept, not what
	# it checks.  By default the shadow of a range larger than 64 KiB that
	# is freed or unmapped is cleared by mapping fresh zero pages over it,
	# 4 KiB pages at that: every region buffer freed and allocated again then
	# faults its shadow back in, page by page, each fault a copy-on-write
	# with a TLB shootdown on the other core.  On a virtual machine where a
	# page fault is dear that was most of the stage: test-store-faults alone
	# took 142 s (81 s of it in the kernel).  Clearing by memset below 1 GiB
	# and letting the shadow use transparent huge pages (where the machine
	# has them on madvise) took it to 55 s, and the stage from 641 to 283 s.
	sanitizer_logs tsan
	TEST_JOBS=$(nproc)
	TEST_ENV=(FRATIER_TEST_BUILD=tsan FRATIER_INTEGRITY_SEEDS="${FRATIER_INTEGRITY_SEEDS_TSAN:-6}"
		TSAN_OPTIONS="second_deadlock_stack=1:clear_shadow_mmap_threshold=1073741824:no_huge_pages_for_shadow=0:log_path=$san/tsan")
	# catalog, dedup-store and dedup-store-faults for the threads of their
	# own: the catalog's checkpointer and its lock handed to waiters
	# between merge batches, the store's registrar (invariant 8 of
	# dedup/store-write.c) and its failure paths, a file's parts sealed on
	# threads of their own (dedup-store-split, e2e-dedup-split).
	tsan_tests=(catalog dedup-store dedup-store-split dedup-store-faults dedup-store-flight dedup-store-read dedup-store-global e2e-integrity e2e-dedup e2e-migrate e2e-policy e2e-recover e2e-spill e2e-readahead e2e-dedup-split)
	[ ${#only[@]} -gt 0 ] && tsan_tests=("${only[@]}")
	run_tests tsan --setup sanitizer "${tsan_tests[@]}"
fi

if [ -n "${background_build[clang]:-}" ] && built clang; then
	# Every target under clang's warnings, which gcc's builds do not see (a
	# bench stopped the libFuzzer build once), and the fuzz targets as
	# libFuzzer runs them (README, "Fuzzing with libFuzzer"): each replays
	# its corpus, instrumented for coverage, under ASan and UBSan.
	# -runs=0 adds nothing to the corpus directories.
	TEST_JOBS=$(nproc)
	TEST_ENV=()
	run_tests clang --suite fuzz --test-args=-runs=0
	if [ -n "${FRATIER_SOAK:-}" ]; then
		# Coverage-guided, each target FRATIER_FUZZ_SECONDS, one a core.
		t0=$SECONDS
		python3 "$top/scripts/fuzz-soak.py" "$top/build-test-clang" "${FRATIER_FUZZ_SECONDS:-300}" \
			"$top/build-test-clang/fuzz-soak.json" || status=1
		echo "=== clang: fuzzed in $((SECONDS - t0)) s"
		logs+=("fuzz-soak=$top/build-test-clang/fuzz-soak.json")
	fi
fi

python3 - "${#BUILD_FAILED[@]}" "$strict_skips" "$ALLOWED_SKIPS" "${logs[@]}" -- "${sanlogs[@]}" <<'PY'
import json, os, re, sys
build_failures, strict = int(sys.argv[1]), sys.argv[2] == "1"
allowed = {}
for line in sys.argv[3].splitlines():
    if line.strip() and not line.startswith("#"):
        name, _, why = line.partition("\t")
        allowed[name.strip()] = why.strip()
rest = sys.argv[4:]
sep = rest.index("--")
stages, sanitizer_dirs = rest[:sep], rest[sep + 1:]
passed = failed = skipped = 0
skips = []
failures = []  # (stage, meson's record) of each failed test: its output's tail is printed at the end
for stage in stages:
    name, _, path = stage.partition("=")
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                t = json.loads(line)
                r = t.get("result")
                if r in ("OK", "EXPECTEDFAIL"):
                    passed += 1
                elif r == "SKIP":
                    out = (t.get("stdout") or "") + (t.get("stderr") or "")
                    why = next((l.strip() for l in out.splitlines() if "SKIP" in l), "(no reason printed)")
                    test = t["name"].rpartition(" / ")[2]  # meson's name is "project:suite / test"
                    if strict and test not in allowed:
                        failed += 1
                        skips.append("%s: %s: skipped, not allowed in CI (ALLOWED_SKIPS in scripts/test.sh): %s"
                                     % (name, test, why))
                    else:
                        skipped += 1
                        skips.append("%s: %s: skipped: %s%s" % (name, test, why,
                                     " (allowed: %s)" % allowed[test] if test in allowed else ""))
                else:
                    failed += 1
                    failures.append((name, t))
    except OSError as e:
        print("%s: no test log (%s): meson test did not finish" % (name, e))
        failed += 1
for stage in sanitizer_dirs:
    name, _, d = stage.partition("=")
    for report in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        with open(os.path.join(d, report), errors="replace") as f:
            lines = f.readlines()
        if not lines:
            print("%s: %s: empty: a process was killed as its sanitizer began a report; "
                  "nothing was written, so nothing can be checked" % (name, os.path.join(d, report)))
            continue
        if all(re.fullmatch(r"==\d+==Unable to get registers from thread \d+\.\n?", l) for l in lines):
            print("%s: %s: LeakSanitizer could not stop a process killed during its exit check: "
                  "that one process went unchecked, nothing was found" % (name, os.path.join(d, report)))
            continue
        failed += 1
        print("%s: sanitizer report %s:" % (name, os.path.join(d, report)))
        print("".join(lines[:40]))
# meson's own --print-errorlogs output is far above, between other tests'
# output; the reason of each failure is printed again here, where a CI log's
# tail shows it.
for name, t in failures:
    out = ((t.get("stdout") or "") + (t.get("stderr") or "")).splitlines()
    print("%s: %s: %s after %.1fs; the last %d lines of its output:"
          % (name, t["name"].rpartition(" / ")[2], t.get("result"), t.get("duration", 0), min(len(out), 60)))
    for line in out[-60:]:
        print("    " + line)
for s in skips:
    print(s)
failed += build_failures
print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
sys.exit(1 if failed else 0)
PY
summary=$?
[ $status -ne 0 ] && [ $summary -eq 0 ] && exit 1
exit $summary
