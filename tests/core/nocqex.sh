#!/bin/sh
# nocqex.sh -- a context's CQs are made with ibv_create_cq_ex (single
# threaded: a context belongs to one thread) where the device has it and
# with ibv_create_cq where it has not (the test hook RDMAMSG_TEST_NO_CQ_EX
# takes that path on softrdma, which has both): the same traffic passes
# both ways -- tests/core/msgs (messages of every size, checked), srq (RC
# over a shared SRQ: receives routed by qp_num) and dc (DC lanes: routed
# by the immediate) -- and each log (RDMAMSG_TEST_LOG=3: info) names the
# call that made every CQ.
. "$top_srcdir/tests/lib.sh"

for t in msgs srq dc; do
	prog=$top_builddir/tests/core/$t
	if [ ! -x "$prog" ]; then
		echo "Bail out! $prog not built"
		exit 1
	fi
	for way in ex plain; do
		log=$tap_tmp/$t-$way.log
		if [ $way = ex ]; then
			want=ibv_create_cq_ex
			other=ibv_create_cq$
			RDMAMSG_TEST_LOG=3 "$prog" >"$log" 2>&1
		else
			want=ibv_create_cq$
			other=ibv_create_cq_ex
			RDMAMSG_TEST_NO_CQ_EX=1 RDMAMSG_TEST_LOG=3 "$prog" \
				>"$log" 2>&1
		fi
		ok $? "$t, CQs by ${want%$}: exits 0"
		! grep -q '^not ok' "$log"
		ok $? "$t, CQs by ${want%$}: every assertion passes"
		grep -q "CQ [0-9]*: [0-9]* entries, $want" "$log" &&
			! grep -q "CQ [0-9]*: [0-9]* entries, $other" "$log"
		ok $? "$t: every CQ made by ${want%$}"
		show_log "$log"
	done
done
done_testing
