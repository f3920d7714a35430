#!/bin/sh
# qperf.sh -- qperf (Debian package qperf), unmodified, on softrdma with
# polling completions (-cp1): RC send/recv, RDMA write-with-immediate and
# read, and the two atomics with every returned value verified (ver_rc_*)
qp_name=qperf
. "$top_srcdir/tests/thirdparty/qperf-lib.sh"
# Two busy-polling processes on an oversubscribed machine lose whole time
# slices (9 ms per round trip seen at load 5.5): only absurd values fail.
qp_max_us=200000
qp_run "polling" -cp1 rc_lat rc_bw rc_rdma_write_lat rc_rdma_read_lat \
	ver_rc_compare_swap ver_rc_fetch_add
qp_finish term
done_testing
