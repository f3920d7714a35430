#!/bin/sh
# perftest-ud.sh -- UD send/recv with perftest on softrdma (-c UD): address
# handles from the exchanged GIDs, the 40-byte GRH in every receive buffer
pt_name=ud
. "$top_srcdir/tests/thirdparty/perftest-lib.sh"
pt_lat ib_send_lat 64 500 1 -c UD
pt_bw ib_send_bw 2048 1000 1 -c UD
done_testing
