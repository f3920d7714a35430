#!/bin/sh
# perftest-atomic-bw.sh -- ib_atomic_bw (RC fetch-and-add streaming) on softrdma
pt_name=atomic-bw
. "$top_srcdir/tests/thirdparty/perftest-lib.sh"
pt_bw ib_atomic_bw 8 2000 0
done_testing
