#!/bin/sh
# mcast-long.sh -- the long run of tests/group/mcast: one publisher and
# three subscriber processes, 1,000,000 messages of mixed sizes (8 B ..
# 64 KiB), each delivered once, in order, content verified (its TAP lines
# are this test's).  Plain builds only: skipped under valgrind and the
# sanitizers, which would take hours over it; RDMAMSG_TEST_MC_MSGS=N sets
# another count.
if [ "${RDMAMSG_TEST_VALGRIND:-0}" = 1 ] || [ -n "${SAN_PRELOAD:-}" ]; then
	echo "1..0 # SKIP the long run: plain builds only"
	exit 0
fi
RDMAMSG_TEST_MC_LONG=1 exec "$top_builddir/tests/group/mcast"
