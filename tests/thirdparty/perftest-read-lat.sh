#!/bin/sh
# perftest-read-lat.sh -- ib_read_lat (RC RDMA read latency) on softrdma
pt_name=read-lat
. "$top_srcdir/tests/thirdparty/perftest-lib.sh"
pt_lat ib_read_lat 64 1000 0
done_testing
