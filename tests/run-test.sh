#!/bin/sh
# run-test.sh -- run one test with a time limit (and valgrind when asked).
#
# As root, each test runs in a private mount namespace with an empty
# /dev/shm of its own, so that softrdma's shared-memory objects of one test
# never meet another test's (or a leftover of an earlier run), and a test
# that leaves anything behind fails (exit 99): softrdma must clean up after
# a normal exit and reclaim what a killed process left.
#
# Environment:
#   RDMAMSG_TEST_TIMEOUT  seconds before the test is killed (default 300;
#                         four times that for the long runs, *-long.sh;
#                         three times for tests/python.sh, the binding's
#                         whole pytest suite and an install)
#   RDMAMSG_TEST_VALGRIND 1: run compiled tests under valgrind memcheck;
#                         tests see RDMAMSG_TEST_SCALE=small and shrink
#                         their loops.  --fair-sched=yes: valgrind runs
#                         one thread at a time, and its default lock lets
#                         a thread that spins without a system call keep
#                         the CPU for good from one that made a call (a
#                         poller waiting for a thread that cannot run);
#                         the kernel's scheduler never does that.
# The probe mounts too: some containers allow the namespace, not the mount.
if [ "${RDMAMSG_TEST_SHM:-}" != private ] && [ "$(id -u)" = 0 ] &&
	unshare --mount --propagation private \
		mount -t tmpfs rdmamsg-probe /dev/shm 2>/dev/null; then
	RDMAMSG_TEST_SHM=private exec unshare --mount --propagation private \
		"$0" "$@"
fi
if [ "${RDMAMSG_TEST_SHM:-}" = private ]; then
	mount -t tmpfs -o mode=1777 rdmamsg-test-shm /dev/shm || exit 99
fi

test_prog=$1
limit=${RDMAMSG_TEST_TIMEOUT:-300}
case $test_prog in
*-long.sh) limit=$((limit * 4)) ;; # the long runs (1,000,000 messages)
*/python.sh) limit=$((limit * 3)) ;; # 151 pytest tests (316 s under ASan at load 14)
*/clang-build.sh) limit=$((limit * 2)) ;; # the whole tree built once more
esac
set -- timeout --kill-after=10 "$limit" "$@"
case $test_prog in
*.sh)
	set -- "$1" "$2" "$3" "${SHELL:-/bin/sh}" "$4" ;;
*)
	if [ "${RDMAMSG_TEST_VALGRIND:-0}" = 1 ] && [ -n "$VALGRIND" ]; then
		RDMAMSG_TEST_SCALE=small
		export RDMAMSG_TEST_SCALE
		set -- timeout --kill-after=10 "$((limit * 4))" "$VALGRIND" -q \
			--fair-sched=yes --error-exitcode=99 --leak-check=full \
			--errors-for-leak-kinds=definite --track-fds=no \
			--trace-children=no "$test_prog"
	fi ;;
esac
# timeout makes the test a process group of its own: once the test has
# exited, whatever it left in that group is killed.  A forked child the
# test no longer waits for (one deadlocked under ASan, whose allocator
# lock a fork can copy held: GCC 12's libasan has no fork handler) would
# otherwise hold the harness's output pipe, and the run, for good.
"$@" &
pid=$!
wait "$pid"
status=$?
pkill -KILL -g "$pid" 2>/dev/null &&
	echo "# killed what the test left running in its process group"
# what the test itself said (124 or 137: timeout killed it), before a
# leftover turns it into 99
case $status in
0) ;;
124 | 137) echo "# the test ran past ${limit} s: killed (exit $status)" ;;
*) echo "# the test exited with status $status" ;;
esac
if [ "${RDMAMSG_TEST_SHM:-}" = private ]; then
	for f in /dev/shm/*; do
		[ -e "$f" ] || continue
		echo "# left in /dev/shm: ${f#/dev/shm/}"
		status=99
	done
fi
exit $status
