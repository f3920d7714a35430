#!/bin/sh
# perftest-atomic-lat.sh -- ib_atomic_lat (RC fetch-and-add, the default mode)
# on softrdma; atomics are always 8 bytes
pt_name=atomic-lat
. "$top_srcdir/tests/thirdparty/perftest-lib.sh"
pt_lat ib_atomic_lat 8 1000 0
done_testing
