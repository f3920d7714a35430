#!/bin/sh
# perftest-send-bw.sh -- ib_send_bw (RC send/recv streaming) on softrdma,
# with a plain receive queue and with an SRQ (--use-srq)
pt_name=send-bw
. "$top_srcdir/tests/thirdparty/perftest-lib.sh"
pt_bw ib_send_bw 4096 2000 1
pt_bw ib_send_bw 65536 500 1 --use-srq
done_testing
