#!/bin/bash
# bench-scale.sh -- one server context with 100 / 1,000 / 10,000 endpoints:
# registered memory and RSS per endpoint, and connects per second next to
# rdma-core's cmtime on softrdma (LD_PRELOADed, unmodified).
#
# Usage: tools/bench-scale.sh [-b BUILDDIR] [-n "100 1000 10000"] [-w WINDOW]
#   -b BUILDDIR  build tree holding tools/scale_probe and
#                soft/.libs/libsoftrdma.so (default: the current directory
#                if it has them, else the source tree next to this script)
#   -n COUNTS    endpoint counts (default "100 1000 10000")
#   -w WINDOW    connects in flight (default 64)
#
# The "-srq" columns run scale_probe -s: the server's endpoints share SRQs
# (receive depth 2, eager 256, both sides; one SRQ per 3,000 endpoints:
# softrdma's SRQ holds 16,384 buffers, 5 per endpoint's window);
# srq-rx/ep is the SRQ's registered receive memory per endpoint.  A count that softrdma or the
# library cannot reach prints how far it got.  Benchmark, not a test: it
# exits 0 whatever it measures.
#
# Environment: SOFTRDMA_LIB (overrides the library path), BENCH_TIMEOUT
# (seconds per run, default 300).
set -u

builddir=
counts="100 1000 10000"
window=64
while getopts b:n:w: opt; do
	case $opt in
	b) builddir=$OPTARG ;;
	n) counts=$OPTARG ;;
	w) window=$OPTARG ;;
	*) sed -n '2,20s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done

here=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "$builddir" ]; then
	if [ -x tools/scale_probe ]; then builddir=$PWD; else builddir=$here; fi
fi
lib=${SOFTRDMA_LIB:-$builddir/soft/.libs/libsoftrdma.so}
probe=$builddir/tools/scale_probe
tmo=${BENCH_TIMEOUT:-300}
export RDMAMSG_SOFTRDMA_PATH=$lib
export SOFTRDMA_SHM_PREFIX=benchscale$$
trap 'rm -f /dev/shm/"$SOFTRDMA_SHM_PREFIX"* 2>/dev/null' EXIT

# field LINE NAME -- value of NAME=... in a scale_probe line
field() {
	sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<"$1"
}

# cmtime_rate N -- "connect-step setup-to-connect" connects per second of
# cmtime with N connections (the connect step alone, and all steps from
# creating the ids to connected, which is what scale_probe's figure
# covers), or n/a
cmtime_rate() {
	local n=$1 port out spid
	command -v cmtime >/dev/null || { echo "n/a n/a"; return; }
	port=$((20000 + RANDOM % 20000))
	LD_PRELOAD=$lib timeout "$tmo" cmtime -b 127.0.0.1 -p "$port" \
		-c "$n" >/dev/null 2>&1 &
	spid=$!
	sleep 0.5
	out=$(LD_PRELOAD=$lib timeout "$tmo" cmtime -s 127.0.0.1 -p "$port" \
		-c "$n" 2>&1)
	# cmtime's server never exits: it loops on rdma_get_cm_event until
	# killed (rdma-core v44 librdmacm/examples/cmtime.c process_events)
	kill "$spid" 2>/dev/null
	wait "$spid"
	# "step : total ms max ms min us us/conn", one line per step
	awk -v n="$n" -F: '
		/^(create id|resolve addr|resolve route|create qp|connect) *:/ {
			split($2, f, " "); all += f[1]
			if ($1 ~ /^connect/) conn = f[1]
		}
		END {
			if (conn > 0 && all > 0)
				printf "%.0f %.0f\n", n * 1000 / conn, n * 1000 / all
			else
				print "n/a n/a"
		}' <<<"$out"
}

echo "# bench-scale: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# softrdma: $lib; $window connects in flight; bytes per endpoint, server side"
echo "# conn/s: rdmamsg_connect() to on_connect for all (resolve, route, QP, handshake)"
printf '%-9s %-6s %-9s %-9s %-7s %-11s %-11s %-10s %-7s %-14s %-14s\n' \
	endpoints up reg/ep rss/ep up-srq "reg/ep-srq" "rss/ep-srq" srq-rx/ep \
	conn/s cmtime-connect/s cmtime-setup/s
for n in $counts; do
	# the library's default pool (64 MiB) holds ~35 of today's endpoints:
	# give each side 2 MiB per endpoint
	line=$(timeout "$tmo" "$probe" -n "$n" -w "$window" \
		-l $((64 + 2 * n)) 2>/dev/null | grep '^scale')
	up=$(field "$line" up)
	q=$(((n + 2999) / 3000))
	sline=$(timeout "$tmo" "$probe" -n "$n" -w "$window" -q "$q" \
		-l $((64 + n / 8)) 2>/dev/null | grep '^scale')
	read -r cm_conn cm_all <<<"$(cmtime_rate "$n")"
	printf '%-9s %-6s %-9s %-9s %-7s %-11s %-11s %-10s %-7s %-14s %-14s\n' \
		"$n" "${up:-fail}" "$(field "$line" srv_reg_per_ep)" \
		"$(field "$line" srv_rss_per_ep)" \
		"$(field "$sline" up)" "$(field "$sline" srv_reg_per_ep)" \
		"$(field "$sline" srv_rss_per_ep)" \
		"$(field "$sline" srv_srq_reg_per_ep)" \
		"$(field "$line" connects_per_s)" "$cm_conn" "$cm_all"
done
exit 0
