#!/bin/sh
# sample.sh -- samples/mcast: one publisher, two subscribers; each
# subscriber accounts for every message (received + reported lost ==
# published), every tick it got was well formed and in order
. "$top_srcdir/tests/lib.sh"
mc=$top_builddir/samples/mcast/mcast
[ -x "$mc" ] || skip_all "samples/mcast/mcast not built"
SOFTRDMA_SHM_PREFIX=test-mcast-$$
export SOFTRDMA_SHM_PREFIX
n=3000
[ "${RDMAMSG_TEST_SCALE:-}" = small ] && n=300

for s in 1 2; do
	timeout -k 10 120 "$mc" -l -g 239.1.2.17 -n $n -t 100 >"$tap_tmp/sub$s.log" 2>&1 &
	eval sub$s=\$!
	tap_pids="$tap_pids $!"
	wait_line "$tap_tmp/sub$s.log" "subscribed to 239.1.2.17" 20
	ok $? "subscriber $s joined"
done
timeout -k 10 120 "$mc" -p -g 239.1.2.17 -n $n -r 20000 -s 600 >"$tap_tmp/pub.log" 2>&1
ok $? "publisher exits 0"
show_log "$tap_tmp/pub.log"
grep -q "published $n messages of 600 bytes" "$tap_tmp/pub.log"
ok $? "publisher published $n messages"
for s in 1 2; do
	eval wait \$sub$s
	ok $? "subscriber $s exits 0: every message accounted for, none bad"
	show_log "$tap_tmp/sub$s.log"
	grep -Eq "^received [0-9]+, lost [0-9]+ in [0-9]+ gaps, 0 bad" \
		"$tap_tmp/sub$s.log"
	ok $? "subscriber $s printed its summary"
	grep -Eq "^counters: .* repairs 0 \(0 unicast, 0 multicast\)" \
		"$tap_tmp/sub$s.log"
	ok $? "subscriber $s printed its counters (no repairs: not a publisher)"
done
done_testing
