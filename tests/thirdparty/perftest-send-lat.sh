#!/bin/sh
# perftest-send-lat.sh -- ib_send_lat (RC send/recv ping-pong, ibv_wr_* API)
# on softrdma: inline (8 B) and non-inline, multi-MTU (8 KiB) messages;
# completions through a completion channel (-e); ibv_post_send (--use_old_post_send)
pt_name=send-lat
. "$top_srcdir/tests/thirdparty/perftest-lib.sh"
pt_lat ib_send_lat 8 1000 1
pt_lat ib_send_lat 8192 500 1
pt_lat ib_send_lat 64 500 1 -e
pt_lat ib_send_lat 64 500 1 --use_old_post_send
done_testing
