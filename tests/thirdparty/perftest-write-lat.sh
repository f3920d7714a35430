#!/bin/sh
# perftest-write-lat.sh -- ib_write_lat (RC RDMA write ping-pong) on softrdma
pt_name=write-lat
. "$top_srcdir/tests/thirdparty/perftest-lib.sh"
pt_lat ib_write_lat 64 1000 1
done_testing
