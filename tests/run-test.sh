#!/bin/sh
# run-test.sh -- run one test with a time limit (and valgrind when asked).
#
# Environment:
#   RDMAMSG_TEST_TIMEOUT  seconds before the test is killed (default 300)
#   RDMAMSG_TEST_VALGRIND 1: run compiled tests under valgrind memcheck;
#                         tests see RDMAMSG_TEST_SCALE=small and shrink
#                         their loops.
test_prog=$1
limit=${RDMAMSG_TEST_TIMEOUT:-300}
case $test_prog in
*.sh)
	exec timeout --kill-after=10 "$limit" "${SHELL:-/bin/sh}" "$@" ;;
esac
if test "${RDMAMSG_TEST_VALGRIND:-0}" = 1 && test -n "$VALGRIND"; then
	RDMAMSG_TEST_SCALE=small
	export RDMAMSG_TEST_SCALE
	exec timeout --kill-after=10 "$((limit * 4))" "$VALGRIND" -q \
		--error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
		--track-fds=no --trace-children=no "$@"
fi
exec timeout --kill-after=10 "$limit" "$@"
