#!/bin/sh
# test.sh -- set up, build and run the whole test suite
#
# usage: scripts/test.sh [--sanitizers | --valgrind | --distcheck]
#
#   (no option)    warning-free build (-Wall -Wextra -Werror) and make check
#   --sanitizers   the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   --valgrind     the compiled tests under valgrind memcheck
#   --distcheck    make distcheck (tarball builds and passes its tests)
#   --tsan         the threaded tests under ThreadSanitizer (tests/tsan.supp)
#
# Prints "N passed, N failed" and exits non-zero on any failure.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-plain}
case $mode in
plain | --picky) build=$top/_build; flags="--enable-picky --enable-python"; target=check ;;
--sanitizers) build=$top/_build-san; flags="--enable-picky --enable-sanitizers --enable-python"; target=check ;;
--valgrind) build=$top/_build; flags="--enable-picky --enable-python"; target=check ;;
--distcheck) build=$top/_build; flags="--enable-picky --enable-python"; target=distcheck ;;
--tsan) build=$top/_build-tsan; flags="--enable-picky --enable-tsan --disable-libfuzzer"; target=check ;;
*) echo "usage: scripts/test.sh [--sanitizers | --valgrind | --distcheck | --tsan]" >&2; exit 2 ;;
esac
# --tsan: the tests whose programs run threads of their own (softrdma's
# progress thread aside); a forked child of a threaded process that
# starts threads is beyond TSan (README)
tsan_tests="tests/soft/mthreads tests/soft/hints tests/soft/events \
tests/soft/eintr tests/core/threads tests/core/loopwake tests/cm/cm_eintr \
tests/core/watch"

# shellcheck disable=SC2086
"$top/scripts/setup.sh" "$build" $flags

cd "$build"
RDMAMSG_TEST_VALGRIND=0
[ "$mode" = --valgrind ] && RDMAMSG_TEST_VALGRIND=1
export RDMAMSG_TEST_VALGRIND
out=$build/.test-output
{
	status=0
	if [ "$mode" = --tsan ]; then
		# gcc 12's runtime cannot start where the kernel randomizes
		# mmap with more bits than it knows ("unexpected memory
		# mapping", vm.mmap_rnd_bits above 28): then without ASLR
		norand=
		if "$build/tools/rdmamsg_pingpong" -h 2>&1 |
			grep -q "unexpected memory mapping"; then
			echo "test.sh: TSan cannot start here; the tests run with setarch -R"
			norand="setarch $(uname -m) -R"
		fi
		$norand make -j"$(nproc)" check TESTS="$tsan_tests" || status=$?
	else
		make -j"$(nproc)" $target DISTCHECK_CONFIGURE_FLAGS="--enable-picky" || status=$?
	fi
	echo "$status" >"$out.rc"
} 2>&1 | tee "$out"
status=$(cat "$out.rc")

# One closing line for people and for CI, from automake's summaries
# (distcheck prints one for the tree it unpacked).
pass=0
fail=0
skip=0
for n in $(sed -n 's/^# PASS: *//p' "$out"); do pass=$((pass + n)); done
for n in $(sed -n 's/^# \(FAIL\|ERROR\|XPASS\): *//p' "$out"); do fail=$((fail + n)); done
for n in $(sed -n 's/^# SKIP: *//p' "$out"); do skip=$((skip + n)); done
if [ $fail -ne 0 ]; then
	# test-suite.log holds the logs of the tests that failed.
	find "$build" -name test-suite.log -exec sed -n '/^\(FAIL\|ERROR\|XPASS\):/,$p' {} +
fi
[ $status -ne 0 ] && [ $fail -eq 0 ] && fail=1
echo "test.sh $mode"
echo "tests: $pass passed, $fail failed, $skip skipped"
exit $status
