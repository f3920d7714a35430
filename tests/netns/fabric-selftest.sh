#!/bin/sh
# fabric-selftest.sh -- the namespace test fabric (tests/netns/fabric.sh)
# checked on itself: 3 hosts on 2 rails reach each other on each rail, each
# host has its own /dev/shm, faults (netem loss, a lossy cable, blackhole,
# link down/up)
# do what they say, and nothing is left behind -- also by a run that is
# SIGKILLed midway, once "cleanup" has run.
. "$top_srcdir/tests/lib.sh"
fabric=$top_srcdir/tests/netns/fabric.sh
why=$(sh "$fabric" check) || skip_all "network namespaces unavailable: $why"
command -v ping >/dev/null 2>&1 ||
	skip_all "ping not installed (Debian package iputils-ping)"

stem=${RDMAMSG_FABRIC_STEM:-rdmamsg}-fst$$
name=$stem-a
# (the stem with its dash: rdmamsg-fst1234 alone would take in another
# run's rdmamsg-fst12345-a)
tap_exit_hook() {
	sh "$fabric" cleanup "$stem-"
}
fab() {
	sh "$fabric" "$@"
}

# leftovers NAME -- namespaces, links and state of fabric NAME still there
leftovers() {
	{
		ip netns list | grep "^$1-"
		ip -o link | grep -F "$1"
		ls -d /dev/shm/fabric-"$1"* 2>/dev/null
	} | head -n 5
}

fab up "$name" 3 2
ok $? "3 hosts on 2 rails up"
[ "$(ip netns list | grep -c "^$name-")" -eq 4 ]
ok $? "4 namespaces: 3 hosts and the switch"
! ip -o link | grep -q -F "$name"
ok $? "no interface of the fabric in the caller's namespace"

bad=
for r in 0 1; do
	for a in 1 2 3; do
		for b in 1 2 3; do
			[ $a = $b ] && continue
			fab exec "$name" $a ping -c 1 -W 5 \
				"$(fab addr "$name" $b $r)" >/dev/null 2>&1 ||
				bad="$bad $a->$b/rail$r"
		done
	done
done
[ -z "$bad" ]
ok $? "every host pings every other on both rails${bad:+ (failed:$bad)}"

fab exec "$name" 1 sh -c 'echo one >/dev/shm/fabric-selftest'
fab exec "$name" 1 cat /dev/shm/fabric-selftest 2>/dev/null | grep -q one
ok $? "host 1's /dev/shm persists between its commands"
! fab exec "$name" 2 test -e /dev/shm/fabric-selftest
ok $? "host 2 does not see host 1's /dev/shm"
! test -e /dev/shm/fabric-selftest
ok $? "the caller does not see it either"

# pings INFO HOST ADDR COUNT -- how many of COUNT pings come back
pings() {
	fab exec "$name" "$1" ping -q -n -c "$3" -i 0.01 -W 2 "$2" 2>/dev/null |
		sed -n 's/.* \([0-9]*\) received.*/\1/p'
}

a2=$(fab addr "$name" 2 0)
if sh "$fabric" netem-available; then
	n0=$(pings 1 "$a2" 100)
	fab netem "$name" 1 0 loss 50%
	ok $? "netem loss 50% on host 1, rail 0"
	n1=$(pings 1 "$a2" 100)
	# 100 requests at 50% loss: more than 80 back has odds below 1e-9
	[ "${n0:-0}" -eq 100 ] && [ "${n1:-100}" -le 80 ]
	ok $? "loss drops pings: $n0 of 100 back before, $n1 of 100 with loss"
	fab netem "$name" 1 0 delay 20ms reorder 25% 50% duplicate 5%
	ok $? "netem delay, reorder and duplicate accepted"
	fab netem "$name" 1 0 off
	[ "$(pings 1 "$a2" 20)" = 20 ]
	ok $? "netem off: all pings back"
else
	skip "netem loss" "this kernel has no sch_netem (tc netem unknown)"
	skip "netem loss drops pings" "no sch_netem"
	skip "netem delay, reorder, duplicate" "no sch_netem"
	fab netem "$name" 1 0 loss 50% 2>"$tap_tmp/netem.err"
	[ $? -ne 0 ] && grep -q 'no sch_netem' "$tap_tmp/netem.err"
	ok $? "without sch_netem, netem fails and says why"
fi

fab drop "$name" 1 0 on
n=$(pings 1 "$a2" 5)
[ "${n:-5}" -eq 0 ]
ok $? "blackhole on host 1, rail 0: no ping back ($n of 5)"
[ "$(pings 1 "$(fab addr "$name" 2 1)" 5)" = 5 ]
ok $? "rail 1 unaffected"
fab drop "$name" 1 0 off
[ "$(pings 1 "$a2" 5)" = 5 ]
ok $? "blackhole off: rail 0 back"

# a dead switch: rail 0's bridge forwards nothing, carriers stay up
fab blackhole "$name" 0 on
ok $? "switch blackhole on rail 0"
n=$(pings 1 "$a2" 5)
[ "${n:-5}" -eq 0 ]
ok $? "switch blackhole: no ping back over rail 0 ($n of 5)"
! fab exec "$name" 1 ip link show eth0 | grep -q NO-CARRIER
ok $? "switch blackhole: host 1 still sees a carrier on rail 0"
[ "$(pings 1 "$(fab addr "$name" 2 1)" 5)" = 5 ]
ok $? "switch blackhole: rail 1 unaffected"
fab blackhole "$name" 0 off
pings 1 "$a2" 3 >/dev/null # the neighbour entry may have failed meanwhile
[ "$(pings 1 "$a2" 5)" = 5 ]
ok $? "switch blackhole off: rail 0 back"
fab blackhole "$name" 2 on 2>/dev/null
[ $? -ne 0 ]
ok $? "switch blackhole on rail 2 is refused (0 or 1)"
fab blackhole "$name" 0 maybe 2>/dev/null
[ $? -ne 0 ]
ok $? "switch blackhole with neither on nor off is refused"

out=$(fab loss "$name" 1 0 50)
ok $? "loss 50% on host 1's rail 0 cable: $out"
n1=$(pings 1 "$a2" 100)
# a request and its answer each cross the lossy cable: a quarter back on
# average where the drops are independent, half where they are not (the
# tc filter's random draws for a request and its answer, seen to be
# correlated here); more than 75 of 100 back has odds below 1e-6
[ "${n1:-100}" -le 75 ]
ok $? "loss drops pings: $n1 of 100 back"
fab loss "$name" 1 0 off
# the lossy phase may have left the neighbour entry failed or probing:
# a few pings resolve it again before all must come back
pings 1 "$a2" 3 >/dev/null
n2=$(pings 1 "$a2" 20)
[ "$n2" = 20 ]
ok $? "loss off: all pings back (${n2:-none} of 20)"
fab loss "$name" 1 0 100 2>/dev/null
[ $? -ne 0 ]
ok $? "loss 100% is refused (1 to 99)"
fab up "$stem-m" 1 1 9x 2>/dev/null
[ $? -ne 0 ] && [ -z "$(leftovers "$stem-m")" ]
ok $? "a bad MTU is refused, nothing made"

fab link "$name" 2 0 down
fab exec "$name" 2 ip link show eth0 | grep -q NO-CARRIER
ok $? "link down: host 2 sees no carrier on rail 0"
n=$(pings 1 "$a2" 3)
[ "${n:-3}" -eq 0 ]
ok $? "link down: host 2 unreachable on rail 0 ($n of 3)"
[ "$(pings 1 "$(fab addr "$name" 2 1)" 3)" = 3 ]
ok $? "link down: host 2 still reachable on rail 1"
fab link "$name" 2 0 up
i=0
while [ $i -lt 50 ] && [ "$(pings 1 "$a2" 1)" != 1 ]; do
	sleep 0.2
	i=$((i + 1))
done
[ "$(pings 1 "$a2" 3)" = 3 ]
ok $? "link up: rail 0 restored"

fab down "$name"
ok $? "down"
[ -z "$(leftovers "$name")" ]
ok $? "down leaves nothing behind"
leftovers "$name" | sed 's/^/#   /'

# a run killed midway: a child brings a fabric up, holds it, and is
# SIGKILLed, so its own trap never runs; "cleanup STEM" must remove it
kname=$stem-k
(
	trap 'sh "$fabric" down "$kname"' EXIT
	sh "$fabric" up "$kname" 2 2 && touch "$tap_tmp/ready"
	sleep 600
) &
kpid=$!
i=0
while [ ! -e "$tap_tmp/ready" ] && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ -e "$tap_tmp/ready" ]
ok $? "a child brought fabric $kname up"
# kill the subshell and its sleep: SIGKILL, no trap runs
pkill -KILL -P "$kpid" 2>/dev/null
kill -KILL "$kpid" 2>/dev/null
wait "$kpid" 2>/dev/null
[ -n "$(leftovers "$kname")" ]
ok $? "after SIGKILL its namespaces are still there (cleanup has work)"
fab cleanup "$stem-"
ok $? "cleanup $stem-"
[ -z "$(leftovers "$kname")" ] && [ -z "$(ip netns list | grep "^$stem")" ]
ok $? "cleanup leaves no namespace, veth, bridge or state behind"
leftovers "$kname" | sed 's/^/#   /'
done_testing
