#!/bin/sh
# test.sh -- set up, build and run the whole test suite
#
# usage: scripts/test.sh [--sanitizers | --valgrind | --distcheck]
#
#   (no option)    warning-free build (-Wall -Wextra -Werror) and make check
#   --sanitizers   the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   --valgrind     the compiled tests under valgrind memcheck
#   --distcheck    make distcheck (tarball builds and passes its tests)
#
# Prints "N passed, N failed" and exits non-zero on any failure.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-plain}
case $mode in
plain | --picky) build=$top/_build; flags="--enable-picky"; target=check ;;
--sanitizers) build=$top/_build-san; flags="--enable-picky --enable-sanitizers"; target=check ;;
--valgrind) build=$top/_build; flags="--enable-picky"; target=check ;;
--distcheck) build=$top/_build; flags="--enable-picky"; target=distcheck ;;
*) echo "usage: scripts/test.sh [--sanitizers | --valgrind | --distcheck]" >&2; exit 2 ;;
esac

# shellcheck disable=SC2086
"$top/scripts/setup.sh" "$build" $flags

cd "$build"
RDMAMSG_TEST_VALGRIND=0
[ "$mode" = --valgrind ] && RDMAMSG_TEST_VALGRIND=1
export RDMAMSG_TEST_VALGRIND
rm -f test-suite.log
status=0
make -j"$(nproc)" $target DISTCHECK_CONFIGURE_FLAGS="--enable-picky" || status=$?

# One closing line for people and for CI.  distcheck's logs live in the
# unpacked tree, which distcheck removes on success.
logs=$(find "$build" -name test-suite.log 2>/dev/null)
pass=0
fail=0
skip=0
for log in $logs; do
	p=$(sed -n 's/^# PASS: *//p' "$log" | head -n1)
	f=$(sed -n 's/^# FAIL: *//p' "$log" | head -n1)
	e=$(sed -n 's/^# ERROR: *//p' "$log" | head -n1)
	x=$(sed -n 's/^# XPASS: *//p' "$log" | head -n1)
	s=$(sed -n 's/^# SKIP: *//p' "$log" | head -n1)
	pass=$((pass + ${p:-0}))
	fail=$((fail + ${f:-0} + ${e:-0} + ${x:-0}))
	skip=$((skip + ${s:-0}))
	if [ "${f:-0}${e:-0}${x:-0}" != 000 ]; then
		echo "---- failures in $log ----"
		sed -n '/^FAIL\|^ERROR\|^XPASS/,/^$/p' "$log" | head -n 200
	fi
done
[ $status -ne 0 ] && [ $fail -eq 0 ] && fail=1
echo "test.sh $mode"
echo "tests: $pass passed, $fail failed, $skip skipped"
exit $status
