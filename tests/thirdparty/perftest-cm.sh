#!/bin/sh
# perftest-cm.sh -- one-sided operations on QPs connected with rdma_cm (-R):
# ib_read_lat, ib_write_bw, ib_atomic_lat (ib_send_lat -R: perftest-send-lat-cm.sh)
pt_name=cm
. "$top_srcdir/tests/thirdparty/perftest-lib.sh"
pt_lat ib_read_lat 64 500 0 -R
pt_bw ib_write_bw 65536 500 0 -R
pt_lat ib_atomic_lat 8 500 0 -R
done_testing
