#!/bin/bash
# bench-failover.sh -- rdmamsg's two failover mechanisms between two hosts
# of the namespace fabric with two rails, measured in one run:
#   replay: reconnect-and-replay (RDMAMSG_FAILOVER_REPLAY) over softrdma's
#           RoCE v2 path, the client given both of the server's addresses;
#   apm:    automatic path migration (RDMAMSG_APM_AUTO) over softrdma's
#           InfiniBand mode (SOFTRDMA_LINK=ib, a port on each rail), the
#           client given one address;
# each the time from a cut to the first message delivered on the new path,
# over a stream of mixed messages with requests in flight
# (tests/netns/rail_peer, as tests/netns/rail-hosts.sh and apm-hosts.sh
# run it).
#
# Usage: tools/bench-failover.sh [-b BUILDDIR] [-c CUTS] [-m MODE]
#                                [-n MESSAGES] [-o replay|apm] [-s SEC]
#                                [-t EXP] [-a MS]
#   -b BUILDDIR  build tree holding tests/netns/rail_peer (make check, or
#                make tests/netns/rail_peer) and soft/.libs/libsoftrdma.so
#                (default: the current directory)
#   -c CUTS      cuts, alternating between the rails (default 6)
#   -m MODE      drop: every packet either host sends on the rail dropped
#                (tc; the carrier stays up); blackhole: the rail's switch
#                forwards nothing (carriers up); link: both hosts' cables
#                on the rail pulled (carrier loss) (default drop)
#   -n MESSAGES  messages streamed in all, per mechanism (default 200,000)
#   -o MECH      only that mechanism (default: both, replay first)
#   -s SEC       -m link: how long a cable plugged back settles before
#                the next cut (default 2; 0: the next cut at once)
#   -a MS        the hosts' ARP retransmit interval on both rails
#                (net.ipv4.neigh.ethR.retrans_time_ms; default the
#                kernel's, 1,000): a cut at once onto a cable just plugged
#                back waits for the next ARP request
#                (doc/performance.md, "Failover time")
#   -t EXP       the QPs' local ACK timeout exponent, both mechanisms
#                (rdmamsg_ep_attr_set_ack_timeout; default 17, 537 ms,
#                replay's own default; 0: each mechanism's default, 17
#                for replay and rdma_cm's 18, 1.07 s, for apm)
#
# For each cut: when the client saw the path fail (replay: its path_down,
# a retry exhaustion, 8 x the QP's ACK timeout, see rdmamsg_connect(3),
# or at once on carrier loss, from the port's IBV_EVENT_PORT_ERR; the
# cause column is its status: -104 the retries, -100 the port event;
# apm: its RDMAMSG_PATH_MIGRATED, after the same retries on the primary
# path, or at once on carrier loss), the reconnect on the
# other rail (replay only), and the cut to the first message delivered on
# the new path; then min / median / max per mechanism and the ratio of
# the medians (apm / replay).  Root only (network namespaces); addresses
# 10.231.0.0/16 inside namespaces it makes.
set -u

builddir=.
cuts=6
mode=drop
n=200000
only=
ack=17
settle=2
arp=
while getopts a:b:c:m:n:o:s:t: opt; do
	case $opt in
	a) arp=$OPTARG ;;
	b) builddir=$OPTARG ;;
	c) cuts=$OPTARG ;;
	m) mode=$OPTARG ;;
	n) n=$OPTARG ;;
	o) only=$OPTARG ;;
	s) settle=$OPTARG ;;
	t) ack=$OPTARG ;;
	*) sed -n '2,48s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done
case $mode in drop | blackhole | link) ;; *) echo "-m: drop, blackhole or link" >&2; exit 2 ;; esac
case $only in '' | replay | apm) ;; *) echo "-o: replay or apm" >&2; exit 2 ;; esac
case $ack in '' | *[!0-9]*) echo "-t: 0 to 31" >&2; exit 2 ;; esac
[ "$ack" -le 31 ] || { echo "-t: 0 to 31" >&2; exit 2; }
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
on() { # HOST MECH CMD... (apm: softrdma's IB mode, rail_peer's APM mode)
	local h=$1 m=$2
	shift 2
	if [ "$m" = apm ]; then
		set -- env SOFTRDMA_LINK=ib RAIL_PEER_APM=1 "$@"
	fi
	fab exec "$name" "$h" env SOFTRDMA_NET=1 RAIL_PEER_ACK_TIMEOUT="$ack" "$@"
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
	if [ "$mode" = blackhole ]; then
		fab blackhole "$name" "$1" "$2"
		return
	fi
	for h in 1 2; do
		if [ "$mode" = drop ]; then
			fab drop "$name" $h "$1" "$2"
		else
			fab link "$name" $h "$1" "$([ "$2" = on ] && echo down || echo up)"
		fi
	done
}
# stats NAME MS... -- "min median max" line
stats() {
	local name=$1
	shift
	echo "$@" | tr ' ' '\n' | grep . | sort -n | awk -v m="$name" '
		{ v[NR] = $1 }
		END { if (NR) printf "# %s: cut to first message on the new path: min %d ms, median %d ms, max %d ms (%d cuts)\n",
			m, v[1], v[int((NR + 1) / 2)], v[NR], NR }'
}
median() { # MS... -- the median, or nothing
	echo "$@" | tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 }
		END { if (NR) print v[int((NR + 1) / 2)] }'
}

# run MECH PORT -- one mechanism's stream through the cuts; sets tot
run() {
	local m=$1 port=$2 k=1 r=0 t d p f s ms cpid rc addrs c
	tot=
	addrs="$a1:$port,$b1:$port"
	[ "$m" = apm ] && addrs="$a1:$port" # one address: the QP migrates
	on 1 "$m" timeout -k 10 1200 "$peer" server $port "$a1" "$b1" "$n" \
		>"$tmp/s.$m" 2>&1 &
	pids="$pids $!"
	wait_line "$tmp/s.$m" '^listening' 60 || { cat "$tmp/s.$m"; return 1; }
	on 2 "$m" timeout -k 10 1200 "$peer" client "$addrs" "$n" 1000 \
		$((n / 10)) 60000 "$cuts" >"$tmp/c.$m" 2>&1 &
	cpid=$!
	pids="$pids $cpid"
	wait_line "$tmp/c.$m" '^connected' 120 || { cat "$tmp/c.$m"; return 1; }
	if [ "$m" = apm ] && ! grep -q '^connected apm 1' "$tmp/c.$m"; then
		echo "apm: no alternate path loaded" >&2
		return 1
	fi
	while [ $k -le "$cuts" ]; do
		wait_line "$tmp/c.$m" "^ready $k " 600 || { echo "$m: no ready $k" >&2; break; }
		t=$(date +%s%N)
		rail $r on
		wait_line "$tmp/s.$m" "^delivered $k " 300 ||
			{ echo "$m: no delivery after cut $k" >&2; rail $r off; break; }
		rail $r off
		# a cable just plugged back: the next cut fails over onto it,
		# so let it settle first (within a second of the cut, the
		# reconnect's first packet waits for the ARP request the cut
		# lost to be sent again: up to 1 s, -a; doc/performance.md)
		[ "$mode" = link ] && sleep "$settle"
		if [ "$m" = apm ]; then
			d=$(field "$tmp/c.$m" "^migrated $k " 6)
			p=$(field "$tmp/c.$m" "^migrated $k " 4)
			f=-
			c=-
		else
			d=$(field "$tmp/c.$m" "^path_down $k " 8)
			c=$(field "$tmp/c.$m" "^path_down $k " 6)
			p=$(field "$tmp/c.$m" "^failover_done $k " 4)
			f=$(field "$tmp/c.$m" "^failover_done $k " 8)
		fi
		s=$(field "$tmp/s.$m" "^delivered $k " 4)
		ms=$(((s - t) / 1000000))
		tot="$tot $ms"
		printf '%6s %4d %5s %12d %5s %12s %12d\n' "$m" "$k" "$p" \
			$(((${d:-$t} - t) / 1000000)) "${c:-?}" "$f" "$ms"
		k=$((k + 1))
		r=$((1 - r))
	done
	wait $cpid
	rc=$?
	grep '^client:' "$tmp/c.$m" | sed 's/^/# /'
	[ $rc -eq 0 ] || echo "# $m: client exit $rc" >&2
	return $rc
}

fab up "$name" 2 2 >/dev/null || exit 1
if [ -n "$arp" ]; then
	for h in 1 2; do
		fab exec "$name" $h sysctl -qw \
			net.ipv4.neigh.eth0.retrans_time_ms="$arp" \
			net.ipv4.neigh.eth1.retrans_time_ms="$arp" || exit 1
	done
fi
a1=$(fab addr "$name" 1 0)
b1=$(fab addr "$name" 1 1)

echo "# rdmamsg failover between namespace hosts, 2 rails, cut by $mode;"
echo "# $n messages (8 B .. 20,000 B) a mechanism, 1,000 requests in flight;"
acks=$ack
[ "$ack" = 0 ] && acks="each mechanism's default"
echo "# ACK timeout exponent $acks (load $(cut -d' ' -f1-3 /proc/loadavg))${arp:+, ARP retransmit $arp ms}"
echo "# (path: replay's address index, apm's port; detect: the client's"
echo "# path_down / migration; reconnect: replay's own figure)"
printf '%6s %4s %5s %12s %5s %12s %12s\n' mech cut path detect_ms cause reconnect_ms to_deliv_ms
rc=0
rtot=
atot=
if [ "$only" != apm ]; then
	run replay 7700 || rc=1
	rtot=$tot
fi
if [ "$only" != replay ]; then
	run apm 7710 || rc=1
	atot=$tot
fi
[ -n "$rtot" ] && stats replay $rtot
[ -n "$atot" ] && stats apm $atot
rm=$(median $rtot)
am=$(median $atot)
if [ -n "$rm" ] && [ -n "$am" ] && [ "$rm" -gt 0 ]; then
	awk -v a="$am" -v r="$rm" 'BEGIN { printf "# apm / replay (medians): %.2f\n", a / r }'
fi
exit $rc
