#!/bin/sh
# perftest-uc.sh -- UC send and RDMA write with perftest on softrdma (-c UC)
pt_name=uc
. "$top_srcdir/tests/thirdparty/perftest-lib.sh"
pt_lat ib_send_lat 64 500 1 -c UC
pt_bw ib_write_bw 65536 500 0 -c UC
done_testing
