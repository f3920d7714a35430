#!/bin/bash
# bench-softrdma.sh -- softrdma (perftest, unmodified, LD_PRELOADed) side by
# side with UCX, libfabric and the two-process cache-line floor.
#
# Usage: tools/bench-softrdma.sh [-b BUILDDIR] [-q]
#   -b BUILDDIR  build tree holding soft/.libs/libsoftrdma.so and
#                tools/cacheline_pingpong (default: the current directory
#                if it has them, else the source tree next to this script)
#   -q           quick run: a tenth of the iterations
#
# Every peer runs as two processes on this host (server + client over
# 127.0.0.1).  Prints medians and ratios softrdma/peer from this one run;
# absolute numbers on shared machines drift, ratios from one run less so.
# A peer that is missing or fails prints "n/a"; the script exits 0 anyway.
#
# Environment: SOFTRDMA_LIB (overrides the library path), BENCH_TIMEOUT
# (seconds per run, default 120), BENCH_SCALE (iteration multiplier).
set -u

builddir=
scale=${BENCH_SCALE:-1}
while getopts b:q opt; do
	case $opt in
	b) builddir=$OPTARG ;;
	q) scale=0.1 ;;
	*) sed -n '2,17s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done

bench_name=softrdma
# shellcheck source=tools/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"

echo "# bench-softrdma: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# softrdma: $lib (GID index ${gid:-n/a})"

# --- latency, 8 B, one-way (half round trip), median ---------------------
perftest s_lat ib_send_lat 8 5 -n "$(iters 20000)"
ucx u_lat posix tag_lat 8 3 "$(iters 200000)"
floor=n/a
cl=$builddir/tools/cacheline_pingpong
if [ -x "$cl" ]; then
	floor=$("$cl" -n "$(iters 200000)" -b 100 2>/dev/null | awk '$1 == "cacheline" { print $3 }')
	[ -n "$floor" ] || floor=n/a
fi
fi_pp f_shm shm rdm
fi_pp f_tcp tcp msg

# --- bandwidth, MiB/s, average -------------------------------------------
perftest s_bw64 ib_write_bw 65536 4 -n "$(iters 5000)"
perftest s_bw1m ib_write_bw 1048576 4 -n "$(iters 1000)"
ucx u_bw64 posix,cma tag_bw 65536 6 "$(iters 20000)"
ucx u_bw1m posix,cma tag_bw 1048576 6 "$(iters 2000)"

# --- message rate, 8 B, Mmsg/s -------------------------------------------
perftest s_mr ib_send_bw 8 5 -n "$(iters 200000)"
[ "$s_mr" != n/a ] && s_mr=$(awk -v v="$s_mr" 'BEGIN { printf "%.3f", v }')
ucx u_mr posix,cma tag_bw 8 8 "$(iters 1000000)"
[ "$u_mr" != n/a ] && u_mr=$(awk -v v="$u_mr" 'BEGIN { printf "%.3f", v / 1e6 }')

echo
printf '%-40s %12s %12s %9s\n' "metric" "softrdma" "UCX" "soft/UCX"
printf '%-40s %12s %12s %9s\n' "latency 8 B, median us (lower=better)" "$s_lat" "$u_lat" "$(ratio "$s_lat" "$u_lat")"
printf '%-40s %12s %12s %9s\n' "write bw 64 KiB, MiB/s (higher=better)" "$s_bw64" "$u_bw64" "$(ratio "$s_bw64" "$u_bw64")"
printf '%-40s %12s %12s %9s\n' "write bw 1 MiB, MiB/s" "$s_bw1m" "$u_bw1m" "$(ratio "$s_bw1m" "$u_bw1m")"
printf '%-40s %12s %12s %9s\n' "msg rate 8 B, Mmsg/s (higher=better)" "$s_mr" "$u_mr" "$(ratio "$s_mr" "$u_mr")"
echo
echo "reference one-way latencies, 8 B, us:"
printf '  %-40s %10s  (softrdma/this %s)\n' "cache-line ping-pong (floor, median)" "$floor" "$(ratio "$s_lat" "$floor")"
printf '  %-40s %10s  (softrdma/this %s)\n' "fi_pingpong -p shm -e rdm (usec/xfer)" "$f_shm" "$(ratio "$s_lat" "$f_shm")"
printf '  %-40s %10s  (softrdma/this %s)\n' "fi_pingpong -p tcp -e msg (usec/xfer)" "$f_tcp" "$(ratio "$s_lat" "$f_tcp")"
echo
echo "softrdma: ib_send_lat -s 8 (t_typical), ib_write_bw (BW average), ib_send_bw -s 8 (MsgRate);"
echo "UCX: ucx_perftest tag_lat UCX_TLS=posix (50%ile), tag_bw UCX_TLS=posix,cma (average)."
exit 0
