#!/bin/sh
# qperf-events.sh -- qperf's default completion mode on softrdma: every
# completion through the completion channel (ibv_req_notify_cq armed before
# the post, ibv_get_cq_event), for send/recv, RDMA write and read, atomics
qp_name=qperf-events
. "$top_srcdir/tests/thirdparty/qperf-lib.sh"
qp_run "events" -cp 0 rc_lat rc_rdma_write_lat rc_rdma_read_lat \
	rc_fetch_add_mr rc_compare_swap_mr
qp_finish quit
done_testing
