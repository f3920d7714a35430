#!/bin/sh
# perftest-send-bw.sh -- ib_send_bw (RC send/recv streaming) on softrdma
pt_name=send-bw
. "$top_srcdir/tests/thirdparty/perftest-lib.sh"
pt_bw ib_send_bw 4096 2000 1
done_testing
