#!/bin/sh
# perftest-send-lat-cm.sh -- ib_send_lat -R: QPs connected with rdma_cm
# (softrdma's rdma_cm over TCP; the -p port is the rdma_cm port)
pt_name=send-lat-cm
. "$top_srcdir/tests/thirdparty/perftest-lib.sh"
pt_lat ib_send_lat 64 1000 1 -R
done_testing
