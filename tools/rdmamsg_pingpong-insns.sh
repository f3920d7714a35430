#!/bin/sh
# rdmamsg_pingpong-insns.sh -- instructions per message of librdmamsg plus
# softrdma, under callgrind: tools/rdmamsg_pingpong (one process, two
# contexts connected to each other, 8-byte rdmamsg_send() ping-pong in busy
# mode) run against each softrdma library given, at -n N and -n 2N; the
# cost per message is the difference of the two instruction counts divided
# by the 2N extra messages (set-up cancels out; connection and teardown,
# whose spinning depends on time, are not counted: --toggle-collect).
# Instruction counts do not depend on the machine's load.  Each row also
# splits the cost by object: librdmamsg, softrdma and the rest (the
# pingpong program's own loop and callbacks, libc), from callgrind's self
# cost per object.  With -c only the latency's share is counted: what the
# receiver runs from its first look at a message to the publication of its
# reply (the client's next ping, the server's echo), through softrdma's
# probe build (soft/data.c cp_probe, soft/libsoftrdma-cp.la, made here).
# With -u the same count is taken of UCX in the same run: ucx_perftest -l
# (one process sending to itself: one message an iteration) over shared
# memory (UCX_TLS=posix), ucp_am_lat (callback delivery, as rdmamsg's)
# and tag_lat, split as libucp+libucs (the protocol layer, librdmamsg's
# counterpart) and libuct (the transport, softrdma's); the last line is
# the ratio of the two stacks' library instructions.
#
# Usage: tools/rdmamsg_pingpong-insns.sh [-n N] [-s SIZE] [-b BUILDDIR] [-r] [-u] [-w | -i | -c] [LIBSOFTRDMA.so...]
#   -n N        the smaller run's iterations (default 5000; 2N messages)
#   -s SIZE     message size (default 8)
#   -b BUILDDIR the build tree whose tools/rdmamsg_pingpong runs (default .)
#   -r          each library also with RDMAMSG_FAILOVER_REPLAY (pingpong
#               -r): the replay bookkeeping's cost per message beside it
#   -w          stream (pingpong -w): N and 2N messages one way, back to
#               back; per message = difference / N
#   -i          idle (pingpong -i): N and 2N progress passes with nothing
#               in flight; per pass = difference / N
#   -u          also UCX's ucx_perftest, as above (ping-pong only)
#   -c          the critical path only, through BUILDDIR's probe build
#               instead of the libraries given (messages below 4 KiB: the
#               sender places larger ones itself, past the probe)
#   LIBSOFTRDMA.so  the fabrics compared (default BUILDDIR's own)
# Example, softrdma of an older commit against this tree's (same librdmamsg):
#   tools/rdmamsg_pingpong-insns.sh -b _build \
#     /tmp/base/b/soft/.libs/libsoftrdma.so _build/soft/.libs/libsoftrdma.so
set -eu

n=5000
size=8
builddir=.
replay=
ucx=
mode= # pingpong -w or -i, or none: ping-pong
crit=
while getopts n:s:b:ruwic opt; do
	case $opt in
	n) n=$OPTARG ;;
	s) size=$OPTARG ;;
	b) builddir=$OPTARG ;;
	r) replay=1 ;;
	u) ucx=1 ;;
	w) mode=-w ;;
	i) mode=-i ;;
	c) crit=1 ;;
	*) sed -n '23,40s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
command -v valgrind >/dev/null || { echo "valgrind missing" >&2; exit 1; }
if [ -n "$ucx" ]; then
	[ -z "$mode$crit" ] || { echo "-u counts the ping-pong only" >&2; exit 2; }
	command -v ucx_perftest >/dev/null || { echo "ucx_perftest missing (apt-get install ucx-utils)" >&2; exit 1; }
fi
bin=$builddir/tools/rdmamsg_pingpong
[ -x "$bin" ] || { echo "no $bin (make tools/rdmamsg_pingpong)" >&2; exit 1; }
[ $# -ge 1 ] || set -- "$builddir/soft/.libs/libsoftrdma.so"
collect=--toggle-collect=pingpong
if [ -n "$crit" ]; then
	[ -z "$mode" ] || { echo "-c counts the ping-pong only" >&2; exit 2; }
	make -s -C "$builddir" soft/libsoftrdma-cp.la >&2
	set -- "$builddir/soft/.libs/libsoftrdma-cp.so"
	collect=--collect-atstart=no
fi
export RDMAMSG_FABRIC=soft
export SOFTRDMA_SHM_PREFIX="rpi$$"
tmp=$(mktemp -d)
trap 'rm -f /dev/shm/"$SOFTRDMA_SHM_PREFIX"-* 2>/dev/null; rm -rf "$tmp"' EXIT

# objects OUT A B [PATH] -- the self cost in callgrind's OUT of the objects
# whose path matches A, then of those matching B (or named PATH: a copy
# of a library to compare, whatever its file is called).  The out file
# names each object once, "ob=(id) path", then "(id)"; the cost line after
# a "calls=" line is the callee's, not this object's.
objects() {
	awk -v a="$2" -v b="$3" -v bpath="${4:-}" '
	function obj(v, id) {
		if (!match(v, /^\([0-9]+\)/))
			return v
		id = substr(v, 1, RLENGTH)
		v = substr(v, RLENGTH + 1)
		sub(/^ /, "", v)
		if (v != "")
			name[id] = v
		return name[id]
	}
	/^c?ob=/ { v = obj(substr($0, index($0, "=") + 1)); if (/^ob=/) ob = v; next }
	/^calls=/ { callee = 1; next }
	/^[0-9+*-]/ { if (!callee) cost[ob] += $2; callee = 0 }
	END {
		for (o in cost) {
			if (o ~ a) x += cost[o]
			else if (o == bpath || o ~ b) y += cost[o]
		}
		printf "%d %d\n", x, y
	}' "$1"
}

# collected -- the total of callgrind's report on standard input
collected() {
	sed -n 's/.*Collected : \([0-9]*\).*/\1/p' | tr '\n' ' '
}

# insns LIB ITERS [-r] -- instructions callgrind collected for one run (of
# the real binary behind libtool's wrapper), then those of librdmamsg and
# of softrdma (LIB)
insns() {
	RDMAMSG_SOFTRDMA_PATH=$1 timeout -k 10 600 \
		"$builddir/libtool" --mode=execute valgrind --tool=callgrind \
		"$collect" --callgrind-out-file="$tmp/out" "$bin" -n "$2" -s "$size" $mode ${3:-} 2>&1 >/dev/null |
		collected
	objects "$tmp/out" '/librdmamsg[^/]*$' '/libsoftrdma[^/]*$' "$(realpath "$1")"
}

# ucx_insns TEST ITERS -- the same for ucx_perftest -l -t TEST over shared
# memory: all it collected, libucp+libucs, libuct
ucx_insns() {
	UCX_TLS=posix timeout -k 10 600 valgrind --tool=callgrind \
		--callgrind-out-file="$tmp/out" ucx_perftest -l -t "$1" \
		-s "$size" -n "$2" 2>&1 >/dev/null | collected
	objects "$tmp/out" '/libuc[ps][^/]*$' '/libuct[^/]*$'
}

# per A B -- (B - A) per extra message, one decimal
per() {
	awk -v a="$1" -v b="$2" -v m="$extra" 'BEGIN { printf "%.1f", (b - a) / m }'
}

echo "# rdmamsg_pingpong-insns: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
# the extra messages of the larger run: a ping-pong iteration is two
extra=$((2 * n))
[ -z "$mode" ] || extra=$n
unit=msg
case $mode in
-i) unit=pass
	echo "# idle progress passes, -n $n and -n $((2 * n)); per pass = difference / $extra passes" ;;
*) echo "# $size-byte messages${mode:+ streamed}, -n $n and -n $((2 * n)); per message = difference / $extra messages" ;;
esac
[ -z "$crit" ] || echo "# -c: only from the receiver's first look at each message to its reply's publication"
printf '%-60s %14s %14s %10s %10s %10s %8s\n' library "I(n=$n)" "I(n=$((2 * n)))" "insn/$unit" librdmamsg softrdma rest
# row NAME COUNT ARG ITERS [-r] -- one row: the totals at ITERS and 2
# ITERS (COUNT: insns or ucx_insns, of ARG), per message in all and by
# object; sets row_per to the total per message and row_lib to the two
# objects' (the libraries')
row() {
	# shellcheck disable=SC2046,SC2086 # insns prints three numbers
	set -- "$1" $($2 "$3" "$4" ${5:-}) $($2 "$3" $((2 * $4)) ${5:-})
	[ $# -eq 7 ] && [ "$2" -gt 0 ] && [ "$5" -gt 0 ] || {
		echo "$1: callgrind counted nothing (run it by hand to see why)" >&2
		exit 1
	}
	row_per=$(per "$2" "$5")
	row_lib=$(per $(($3 + $4)) $(($6 + $7)))
	# -c sees only what a receiver takes from its slots: the sender
	# places a SEND of 4 KiB or more itself, past the probe
	[ -z "$crit" ] || [ "$(($5 - $2))" -ge "$extra" ] ||
		echo "# -c: no message of $size bytes took the slot path" >&2
	printf '%-60s %14s %14s %10s %10s %10s %8s\n' "$1" "$2" "$5" "$row_per" \
		"$(per "$3" "$6")" "$(per "$4" "$7")" \
		"$(per $(($2 - $3 - $4)) $(($5 - $6 - $7)))"
}
lib1=
for lib in "$@"; do
	dir=$(cd "$(dirname "$lib")" && pwd)
	lib=$dir/$(basename "$lib")
	row "$lib" insns "$lib" "$n"
	x=$row_per
	[ -n "$lib1" ] || lib1=$row_lib
	[ -n "$replay" ] || continue
	row "  with RDMAMSG_FAILOVER_REPLAY" insns "$lib" "$n" -r
	y=$row_per
	awk -v x="$x" -v y="$y" 'BEGIN {
		printf "# replay bookkeeping: %+.1f instructions per message (%+.2f%%)\n", y - x, 100 * (y - x) / x }'
done
[ -n "$ucx" ] || exit 0
# a loopback iteration is one message: twice the iterations, the same
# extra messages
echo "# UCX $(ucx_info -v | sed -n 's/.*[Vv]ersion \([^ ]*\).*/\1/p;q'), ucx_perftest -l -s $size, UCX_TLS=posix, -n $((2 * n)) and -n $((4 * n)) (a message an iteration); columns: libucp+libucs, libuct"
for t in ucp_am_lat tag_lat; do
	row "ucx_perftest -t $t" ucx_insns "$t" $((2 * n))
	[ "$t" = ucp_am_lat ] && am=$row_lib
done
awk -v x="$lib1" -v y="$am" 'BEGIN {
	printf "# libraries per message: librdmamsg+softrdma %.1f, libucp+libucs+libuct (ucp_am_lat) %.1f: %.2fx\n", x, y, x / y }'
