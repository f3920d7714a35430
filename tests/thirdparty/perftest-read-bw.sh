#!/bin/sh
# perftest-read-bw.sh -- ib_read_bw (RC RDMA read streaming) on softrdma
pt_name=read-bw
. "$top_srcdir/tests/thirdparty/perftest-lib.sh"
pt_bw ib_read_bw 65536 1000 0
done_testing
