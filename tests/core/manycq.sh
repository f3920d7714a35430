#!/bin/sh
# manycq.sh -- a context spreads its endpoints over several completion
# queues once one is full: with the CQ size capped by the test hook
# RDMAMSG_TEST_MAX_CQE (about three endpoints per CQ), tests/core/multi (8
# endpoints on each side, every stream checked in order) and
# tests/core/storm (connect and close storms: endpoints come and go while
# others are busy) pass
# unchanged, and their logs show that more CQs were made.
. "$top_srcdir/tests/lib.sh"

for t in multi storm; do
	prog=$top_builddir/tests/core/$t
	if [ ! -x "$prog" ]; then
		echo "Bail out! $prog not built"
		exit 1
	fi
	RDMAMSG_TEST_MAX_CQE=500 "$prog" >"$tap_tmp/$t.log" 2>&1
	ok $? "$t with completion queues of 500 entries: exits 0"
	! grep -q '^not ok' "$tap_tmp/$t.log"
	ok $? "$t: every assertion passes"
	n=$(grep -c 'completion queue [0-9]* made' "$tap_tmp/$t.log")
	[ "$n" -ge 2 ]
	ok $? "$t: the endpoints were spread over more CQs ($n more made)"
	show_log "$tap_tmp/$t.log"
done
done_testing
