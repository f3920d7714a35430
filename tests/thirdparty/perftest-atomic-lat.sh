#!/bin/sh
# perftest-atomic-lat.sh -- ib_atomic_lat (RC fetch-and-add, the default mode)
# on softrdma, then compare-and-swap (-A CMP_AND_SWAP); atomics are 8 bytes
pt_name=atomic-lat
. "$top_srcdir/tests/thirdparty/perftest-lib.sh"
pt_lat ib_atomic_lat 8 1000 0
pt_lat ib_atomic_lat 8 500 0 -A CMP_AND_SWAP
done_testing
