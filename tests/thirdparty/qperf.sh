#!/bin/sh
# qperf.sh -- qperf (Debian package qperf), unmodified, on softrdma with
# polling completions (-cp1): RC send/recv, RDMA write-with-immediate and
# read, and the two atomics with every returned value verified (ver_rc_*)
qp_name=qperf
. "$top_srcdir/tests/thirdparty/qperf-lib.sh"
qp_run "polling" -cp1 rc_lat rc_bw rc_rdma_write_lat rc_rdma_read_lat \
	ver_rc_compare_swap ver_rc_fetch_add
qp_finish
done_testing
