#!/bin/sh
# perftest-write-bw.sh -- ib_write_bw (RC RDMA write streaming) on softrdma
pt_name=write-bw
. "$top_srcdir/tests/thirdparty/perftest-lib.sh"
pt_bw ib_write_bw 65536 1000 0
done_testing
