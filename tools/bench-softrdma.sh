#!/bin/bash
# bench-softrdma.sh -- softrdma (perftest, unmodified, LD_PRELOADed) side by
# side with UCX, libfabric and the two-process cache-line floor.
#
# Usage: tools/bench-softrdma.sh [-b BUILDDIR] [-q] [-r ROUNDS]
#   -b BUILDDIR  build tree holding soft/.libs/libsoftrdma.so and
#                tools/cacheline_pingpong (default: the current directory
#                if it has them, else the source tree next to this script)
#   -q           quick run: a tenth of the iterations
#   -r ROUNDS    measure everything ROUNDS times, report medians (default 3)
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
rounds=3
while getopts b:qr: opt; do
	case $opt in
	b) builddir=$OPTARG ;;
	q) scale=0.1 ;;
	r) rounds=$OPTARG ;;
	*) sed -n '2,18s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done

bench_name=softrdma
# shellcheck source=tools/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"

echo "# bench-softrdma: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# softrdma: $lib (GID index ${gid:-n/a})"

# One round measures every metric once, softrdma and its peers back to back
# so that drift on this shared machine hits both; the table shows the
# median of the rounds.
cl=$builddir/tools/cacheline_pingpong
for round in $(seq "$rounds"); do
	echo "# round $round/$rounds" >&2
	# latency, 8 B, one-way (half round trip), median
	acc S_lat perftest ib_send_lat 8 5 -n "$(iters 20000)"
	acc U_lat ucx posix tag_lat 8 3 "$(iters 200000)"
	v=n/a
	[ -x "$cl" ] && v=$("$cl" -n "$(iters 200000)" -b 100 2>/dev/null | awk '$1 == "cacheline" { print $3 }')
	F_cl+=("${v:-n/a}")
	acc F_shm fi_pp shm rdm
	acc F_tcp fi_pp tcp msg
	# bandwidth, MiB/s, average
	acc S_bw64 perftest ib_write_bw 65536 4 -n "$(iters 5000)"
	acc U_bw64 ucx posix,cma tag_bw 65536 6 "$(iters 20000)"
	acc S_bw1m perftest ib_write_bw 1048576 4 -n "$(iters 1000)"
	acc U_bw1m ucx posix,cma tag_bw 1048576 6 "$(iters 2000)"
	# one-sided on both sides: UCX put into the peer's registered memory
	acc P_bw64 ucx posix,cma ucp_put_bw 65536 6 "$(iters 20000)"
	acc P_bw1m ucx posix,cma ucp_put_bw 1048576 6 "$(iters 2000)"
	# message rate, 8 B, Mmsg/s (UCX prints msg/s)
	acc S_mr perftest ib_send_bw 8 5 -n "$(iters 200000)"
	acc U_mr ucx posix,cma tag_bw 8 8 "$(iters 1000000)"
done
s_lat=$(med "${S_lat[@]}") u_lat=$(med "${U_lat[@]}") floor=$(med "${F_cl[@]}")
f_shm=$(med "${F_shm[@]}") f_tcp=$(med "${F_tcp[@]}")
s_bw64=$(med "${S_bw64[@]}") u_bw64=$(med "${U_bw64[@]}")
s_bw1m=$(med "${S_bw1m[@]}") u_bw1m=$(med "${U_bw1m[@]}")
p_bw64=$(med "${P_bw64[@]}") p_bw1m=$(med "${P_bw1m[@]}")
s_mr=$(med "${S_mr[@]}") u_mr=$(med "${U_mr[@]}")
[ "$u_mr" != n/a ] && u_mr=$(awk -v v="$u_mr" 'BEGIN { printf "%.3f", v / 1e6 }')
[ "$s_mr" != n/a ] && s_mr=$(awk -v v="$s_mr" 'BEGIN { printf "%.3f", v }')
for a in S_lat U_lat F_cl F_shm F_tcp S_bw64 U_bw64 S_bw1m U_bw1m P_bw64 P_bw1m S_mr U_mr; do
	eval "echo \"# rounds $a: \${$a[*]}\""
done

echo
printf '%-40s %12s %12s %9s\n' "metric" "softrdma" "UCX" "soft/UCX"
printf '%-40s %12s %12s %9s\n' "latency 8 B, median us (lower=better)" "$s_lat" "$u_lat" "$(ratio "$s_lat" "$u_lat")"
printf '%-40s %12s %12s %9s\n' "write bw 64 KiB, MiB/s (higher=better)" "$s_bw64" "$u_bw64" "$(ratio "$s_bw64" "$u_bw64")"
printf '%-40s %12s %12s %9s\n' "write bw 1 MiB, MiB/s" "$s_bw1m" "$u_bw1m" "$(ratio "$s_bw1m" "$u_bw1m")"
printf '%-40s %12s %12s %9s\n' "msg rate 8 B, Mmsg/s (higher=better)" "$s_mr" "$u_mr" "$(ratio "$s_mr" "$u_mr")"
printf '%-40s %12s %12s %9s\n' "write bw 64 KiB vs UCX put, MiB/s" "$s_bw64" "$p_bw64" "$(ratio "$s_bw64" "$p_bw64")"
printf '%-40s %12s %12s %9s\n' "write bw 1 MiB vs UCX put, MiB/s" "$s_bw1m" "$p_bw1m" "$(ratio "$s_bw1m" "$p_bw1m")"
if [ "$rounds" -gt 1 ]; then
	# The least disturbed round: on a loaded machine a busy-polling pair
	# loses whole time slices, which averages show and the best round less.
	b_su=$(best higher "${S_mr[@]}") b_uu=$(best higher "${U_mr[@]}")
	[ "$b_uu" != n/a ] && b_uu=$(awk -v v="$b_uu" 'BEGIN { printf "%.3f", v / 1e6 }')
	[ "$b_su" != n/a ] && b_su=$(awk -v v="$b_su" 'BEGIN { printf "%.3f", v }')
	echo
	echo "best of $rounds rounds:"
	printf '%-40s %12s %12s %9s\n' "latency 8 B, median us" "$(best lower "${S_lat[@]}")" "$(best lower "${U_lat[@]}")" "$(ratio "$(best lower "${S_lat[@]}")" "$(best lower "${U_lat[@]}")")"
	printf '%-40s %12s %12s %9s\n' "write bw 64 KiB, MiB/s" "$(best higher "${S_bw64[@]}")" "$(best higher "${U_bw64[@]}")" "$(ratio "$(best higher "${S_bw64[@]}")" "$(best higher "${U_bw64[@]}")")"
	printf '%-40s %12s %12s %9s\n' "write bw 1 MiB, MiB/s" "$(best higher "${S_bw1m[@]}")" "$(best higher "${U_bw1m[@]}")" "$(ratio "$(best higher "${S_bw1m[@]}")" "$(best higher "${U_bw1m[@]}")")"
	printf '%-40s %12s %12s %9s\n' "msg rate 8 B, Mmsg/s" "$b_su" "$b_uu" "$(ratio "$b_su" "$b_uu")"
	printf '%-40s %12s %12s %9s\n' "write bw 64 KiB vs UCX put, MiB/s" "$(best higher "${S_bw64[@]}")" "$(best higher "${P_bw64[@]}")" "$(ratio "$(best higher "${S_bw64[@]}")" "$(best higher "${P_bw64[@]}")")"
	printf '%-40s %12s %12s %9s\n' "write bw 1 MiB vs UCX put, MiB/s" "$(best higher "${S_bw1m[@]}")" "$(best higher "${P_bw1m[@]}")" "$(ratio "$(best higher "${S_bw1m[@]}")" "$(best higher "${P_bw1m[@]}")")"
fi
echo
echo "reference one-way latencies, 8 B, us:"
printf '  %-40s %10s  (softrdma/this %s)\n' "cache-line ping-pong (floor, median)" "$floor" "$(ratio "$s_lat" "$floor")"
printf '  %-40s %10s  (softrdma/this %s)\n' "fi_pingpong -p shm -e rdm (avg usec/xfer)" "$f_shm" "$(ratio "$s_lat" "$f_shm")"
printf '  %-40s %10s  (softrdma/this %s)\n' "fi_pingpong -p tcp -e msg (avg usec/xfer)" "$f_tcp" "$(ratio "$s_lat" "$f_tcp")"
echo
echo "softrdma: ib_send_lat -s 8 (t_typical), ib_write_bw (BW average), ib_send_bw -s 8 (MsgRate);"
echo "UCX: ucx_perftest tag_lat UCX_TLS=posix (50%ile), tag_bw and ucp_put_bw UCX_TLS=posix,cma (average)."
echo "Each value: median over $rounds rounds (the \"# rounds\" lines above list them)."
exit 0
