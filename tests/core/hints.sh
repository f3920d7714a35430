#!/bin/sh
# hints.sh -- a context belongs to one thread (rdmamsg.h), and tells the
# device so where it can: its CQs are made by ibv_create_cq_ex with
# IBV_CREATE_CQ_ATTR_SINGLE_THREADED, its QPs on a parent domain with a
# thread domain; where the device has neither, by ibv_create_cq and on the
# PD.  The test hooks RDMAMSG_TEST_NO_CQ_EX and RDMAMSG_TEST_NO_TD take
# that path on a device that has both: the same traffic passes both ways
# -- tests/core/msgs (messages of every size, checked), srq (RC over a
# shared SRQ: receives routed by qp_num) and dc (DC lanes: routed by the
# immediate) -- and each log (RDMAMSG_TEST_LOG=3: info) names the call that
# made every CQ and the domain of the QPs.
. "$top_srcdir/tests/lib.sh"

for t in msgs srq dc; do
	prog=$top_builddir/tests/core/$t
	if [ ! -x "$prog" ]; then
		echo "Bail out! $prog not built"
		exit 1
	fi
	for way in hinted plain; do
		log=$tap_tmp/$t-$way.log
		if [ $way = hinted ]; then
			want=ibv_create_cq_ex
			other=ibv_create_cq$
			RDMAMSG_TEST_LOG=3 "$prog" >"$log" 2>&1
		else
			want=ibv_create_cq$
			other=ibv_create_cq_ex
			RDMAMSG_TEST_NO_CQ_EX=1 RDMAMSG_TEST_NO_TD=1 \
				RDMAMSG_TEST_LOG=3 "$prog" >"$log" 2>&1
		fi
		ok $? "$t, $way: exits 0"
		! grep -q '^not ok' "$log"
		ok $? "$t, $way: every assertion passes"
		grep -q "CQ [0-9]*: [0-9]* entries, $want" "$log" &&
			! grep -q "CQ [0-9]*: [0-9]* entries, $other" "$log"
		ok $? "$t, $way: every CQ made by ${want%$}"
		if [ $way = plain ]; then
			grep -q 'QPs on the PD' "$log" &&
				! grep -q 'QPs on a thread domain' "$log"
			ok $? "$t, $way: every context's QPs on the PD"
		else
			# softrdma has thread domains only from helper soft23's
			# work on: either is right here, the log says which
			echo "# $t, $way: $(grep -c 'QPs on a thread domain' "$log")" \
				"contexts with QPs on a thread domain," \
				"$(grep -c 'QPs on the PD' "$log") on the PD"
		fi
		show_log "$log"
	done
done
done_testing
