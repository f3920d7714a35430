#!/bin/bash
# bench-failover.sh -- rdmamsg reconnect-and-replay failover time between
# two hosts of the namespace fabric with two rails (softrdma's RoCE v2
# path): the time from a cut to the first message delivered on the new
# path, over a stream of mixed messages with requests in flight
# (tests/netns/rail_peer, as tests/netns/rail-hosts.sh runs it).
#
# Usage: tools/bench-failover.sh [-b BUILDDIR] [-c CUTS] [-m drop|link]
#                                [-n MESSAGES]
#   -b BUILDDIR  build tree holding tests/netns/rail_peer (make check, or
#                make tests/netns/rail_peer) and soft/.libs/libsoftrdma.so
#                (default: the current directory)
#   -c CUTS      cuts, alternating between the rails (default 6)
#   -m MODE      drop: every packet either host sends on the rail dropped
#                (tc; the carrier stays up, a dead switch); link: both
#                hosts' cables on the rail pulled (carrier loss)
#                (default drop)
#   -n MESSAGES  messages streamed in all (default 200,000)
#
# For each cut: when the client saw the path fail (detection: a retry
# exhaustion, 8 x the session QP's 537 ms ACK timeout, see
# rdmamsg_connect(3)), the reconnect on the other rail, and the cut to the
# first message delivered there; then min / median / max.  Root only (network
# namespaces); addresses 10.231.0.0/16 inside namespaces it makes.
set -u

builddir=.
cuts=6
mode=drop
n=200000
while getopts b:c:m:n: opt; do
	case $opt in
	b) builddir=$OPTARG ;;
	c) cuts=$OPTARG ;;
	m) mode=$OPTARG ;;
	n) n=$OPTARG ;;
	*) sed -n '2,25s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done
case $mode in drop | link) ;; *) echo "-m: drop or link" >&2; exit 2 ;; esac
src=$(cd "$(dirname "$0")/.." && pwd)
builddir=$(cd "$builddir" && pwd)
peer=$builddir/tests/netns/rail_peer
lib=${SOFTRDMA_LIB:-$builddir/soft/.libs/libsoftrdma.so}
fabric=$src/tests/netns/fabric.sh
[ -x "$peer" ] || { echo "$peer not built (make tests/netns/rail_peer)" >&2; exit 1; }
[ -e "$lib" ] || { echo "$lib not built" >&2; exit 1; }
why=$(sh "$fabric" check) || { echo "no namespaces: $why" >&2; exit 1; }
name=rdmamsg-bfo$$
tmp=$(mktemp -d)
pids=
trap 'for p in $pids; do kill -TERM "$p" 2>/dev/null; done
	sh "$fabric" down "$name"; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
export RDMAMSG_SOFTRDMA_PATH=$lib

fab() { sh "$fabric" "$@"; }
on() {
	local h=$1
	shift
	fab exec "$name" "$h" env SOFTRDMA_NET=1 "$@"
}
wait_line() { # FILE TEXT SECONDS
	local i=0
	while [ $i -lt $(($3 * 10)) ]; do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
field() { grep -m 1 "$2" "$1" | awk -v n="$3" '{ print $n }'; }
rail() { # RAIL on|off
	local h
	for h in 1 2; do
		if [ "$mode" = drop ]; then
			fab drop "$name" $h "$1" "$2"
		else
			fab link "$name" $h "$1" "$([ "$2" = on ] && echo down || echo up)"
		fi
	done
}

fab up "$name" 2 2 >/dev/null || exit 1
a1=$(fab addr "$name" 1 0)
b1=$(fab addr "$name" 1 1)
port=7700
on 1 timeout -k 10 1200 "$peer" server $port "$a1" "$b1" "$n" >"$tmp/s" 2>&1 &
pids="$pids $!"
wait_line "$tmp/s" '^listening' 60 || { cat "$tmp/s"; exit 1; }
on 2 timeout -k 10 1200 "$peer" client "$a1:$port,$b1:$port" "$n" 1000 \
	$((n / 10)) 60000 "$cuts" >"$tmp/c" 2>&1 &
cpid=$!
pids="$pids $cpid"
wait_line "$tmp/c" '^connected' 120 || { cat "$tmp/c"; exit 1; }

echo "# rdmamsg failover between namespace hosts, 2 rails, cut by $mode;"
echo "# $n messages (8 B .. 20,000 B), 1,000 requests in flight"
printf '%4s %5s %12s %12s %12s\n' cut path detect_ms reconnect_ms to_deliv_ms
k=1
r=0
tot=
while [ $k -le "$cuts" ]; do
	wait_line "$tmp/c" "^ready $k " 600 || { echo "no ready $k" >&2; break; }
	t=$(date +%s%N)
	rail $r on
	wait_line "$tmp/s" "^delivered $k " 300 || { echo "no delivery after cut $k" >&2; break; }
	rail $r off
	d=$(field "$tmp/c" "^path_down $k " 8)
	p=$(field "$tmp/c" "^failover_done $k " 4)
	f=$(field "$tmp/c" "^failover_done $k " 8)
	s=$(field "$tmp/s" "^delivered $k " 4)
	ms=$(((s - t) / 1000000))
	tot="$tot $ms"
	printf '%4d %5s %12d %12s %12d\n' "$k" "$p" $(((d - t) / 1000000)) "$f" "$ms"
	k=$((k + 1))
	r=$((1 - r))
done
wait $cpid
rc=$?
grep '^client:' "$tmp/c"
echo "$tot" | tr ' ' '\n' | grep . | sort -n | awk '
	{ v[NR] = $1 }
	END { if (NR) printf "# cut to first message on the new path: min %d ms, median %d ms, max %d ms (%d cuts)\n",
		v[1], v[int((NR + 1) / 2)], v[NR], NR }'
exit $rc
