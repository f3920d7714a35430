#!/bin/sh
# srq_scale-long.sh -- the long run of srq_scale.sh: 10,000 endpoints on
# one server context sharing one SRQ, from 4 client processes, every one
# echoing a message checked by its client.  Plain builds only: skipped
# under valgrind and the sanitizers.
if [ "${RDMAMSG_TEST_VALGRIND:-0}" = 1 ] || [ -n "${SAN_PRELOAD:-}" ]; then
	echo "1..0 # SKIP the long run: plain builds only"
	exit 0
fi
RDMAMSG_TEST_SRQ_EPS=${RDMAMSG_TEST_SRQ_EPS:-10000}
RDMAMSG_TEST_SRQ_CLIENTS=${RDMAMSG_TEST_SRQ_CLIENTS:-4}
export RDMAMSG_TEST_SRQ_EPS RDMAMSG_TEST_SRQ_CLIENTS
. "$top_srcdir/tests/core/srq_scale.sh"
