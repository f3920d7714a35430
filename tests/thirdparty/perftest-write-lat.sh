#!/bin/sh
# perftest-write-lat.sh -- ib_write_lat (RC RDMA write ping-pong) on softrdma,
# through the ibv_wr_* API and through ibv_post_send (--use_old_post_send)
pt_name=write-lat
. "$top_srcdir/tests/thirdparty/perftest-lib.sh"
pt_lat ib_write_lat 64 1000 1
pt_lat ib_write_lat 64 500 1 --use_old_post_send
done_testing
