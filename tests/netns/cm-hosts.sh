#!/bin/sh
# cm-hosts.sh -- rdma_cm between two hosts of the namespace fabric, as it is
# today: softrdma carries data only between processes that share a
# /dev/shm registry, and its CM (over TCP) refuses a peer of another
# registry.  Documented behaviour until the RoCE v2 transport exists
# (issue 12): the client of another host gets RDMA_CM_EVENT_UNREACHABLE at
# once (no hang, no timeout), the listener logs the refusal and stays
# usable -- a client on its own host then connects and moves verified data.
. "$top_srcdir/tests/lib.sh"
fabric=$top_srcdir/tests/netns/fabric.sh
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
why=$(sh "$fabric" check) || skip_all "network namespaces unavailable: $why"
for p in rping ucmatose; do
	command -v $p >/dev/null 2>&1 ||
		skip_all "$p not installed (Debian package rdmacm-utils)"
done
name=${RDMAMSG_FABRIC_STEM:-rdmamsg}-cmh$$
srv_pids=
trap 'for p in $srv_pids; do kill -TERM "$p" 2>/dev/null; done
	sh "$fabric" cleanup "$name"; tap_cleanup' EXIT
trap 'exit 1' INT TERM

fab() {
	sh "$fabric" "$@"
}
# on HOST CMD... -- a softrdma program on a host of the fabric
on() {
	_h=$1
	shift
	fab exec "$name" "$_h" env LD_PRELOAD="$SOFTRDMA_PRELOAD" "$@"
}
# listening HOST PORT -- wait (10 s at most) for a TCP listener on the host
listening() {
	_i=0
	while [ $_i -lt 100 ]; do
		fab exec "$name" "$1" cat /proc/net/tcp 2>/dev/null |
			grep -Eq ":$(printf '%04X' "$2") 0+:0000 0A" && return 0
		sleep 0.1
		_i=$((_i + 1))
	done
	return 1
}

fab up "$name" 2 1
ok $? "fabric of 2 hosts up"
a1=$(fab addr "$name" 1)

# rping
port=7471
timeout -k 10 120 sh "$fabric" exec "$name" 1 env LD_PRELOAD="$SOFTRDMA_PRELOAD" \
	rping -s -a "$a1" -p $port -C 3 -V >"$tap_tmp/s.rping" 2>&1 &
spid=$!
srv_pids="$srv_pids $spid"
listening 1 $port
ok $? "rping server listens on host 1, $a1:$port"
on 2 timeout -k 10 60 rping -c -a "$a1" -p $port -C 3 -v -V >"$tap_tmp/c.rping2" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ]
ok $? "rping client on host 2 fails, and not by timeout (exit $rc)"
grep -q 'RDMA_CM_EVENT_UNREACHABLE' "$tap_tmp/c.rping2" &&
	! grep -q '^ping data' "$tap_tmp/c.rping2"
ok $? "host 2: RDMA_CM_EVENT_UNREACHABLE, no data"
show_log "$tap_tmp/c.rping2" | head -n 4
on 1 timeout -k 10 60 rping -c -a "$a1" -p $port -C 3 -v -V >"$tap_tmp/c.rping1" 2>&1
rc=$?
n=$(grep -c '^ping data: rdma-ping-' "$tap_tmp/c.rping1")
[ $rc -eq 0 ] && [ "$n" -eq 3 ]
ok $? "the same server then serves host 1's client: 3 verified pings (exit $rc)"
wait "$spid"
rc=$?
[ $rc -eq 0 ]
ok $? "rping server exits 0"
grep -q 'another shared-memory registry' "$tap_tmp/s.rping"
ok $? "the server logs the refusal of the other host's registry"
[ $rc -eq 0 ] || show_log "$tap_tmp/s.rping"

# ucmatose
port=7472
timeout -k 10 120 sh "$fabric" exec "$name" 1 env LD_PRELOAD="$SOFTRDMA_PRELOAD" \
	ucmatose -b "$a1" -p $port -c 1 >"$tap_tmp/s.ucma" 2>&1 &
spid=$!
srv_pids="$srv_pids $spid"
listening 1 $port
ok $? "ucmatose server listens on host 1"
on 2 timeout -k 10 60 ucmatose -s "$a1" -p $port -c 1 >"$tap_tmp/c.ucma2" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] &&
	grep -q 'RDMA_CM_EVENT_UNREACHABLE, error: -110' "$tap_tmp/c.ucma2"
ok $? "ucmatose on host 2: RDMA_CM_EVENT_UNREACHABLE (ETIMEDOUT), exit $rc"
on 1 timeout -k 10 60 ucmatose -s "$a1" -p $port -c 1 >"$tap_tmp/c.ucma1" 2>&1
ok $? "ucmatose on host 1 then completes"
wait "$spid"
ok $? "ucmatose server exits 0"

# softrdma left nothing in either host's /dev/shm
left=$(ls -A /dev/shm/fabric-"$name"/h1/shm /dev/shm/fabric-"$name"/h2/shm 2>&1 |
	grep -v -e '^/dev/shm' -e '^$')
[ -z "$left" ]
ok $? "nothing left in the hosts' /dev/shm${left:+: $left}"
fab down "$name"
ok $? "fabric down"
done_testing
