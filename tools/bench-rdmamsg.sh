#!/bin/bash
# bench-rdmamsg.sh -- rdmamsg (tools/rdmamsg_perf) side by side with raw
# verbs on the same fabric (perftest on softrdma, LD_PRELOADed) and UCX.
#
# Usage: tools/bench-rdmamsg.sh [-b BUILDDIR] [-q] [-- RDMAMSG_PERF_OPTS...]
#   -b BUILDDIR  build tree holding tools/rdmamsg_perf and
#                soft/.libs/libsoftrdma.so (default: the current directory
#                if it has them, else the source tree next to this script)
#   -q           quick run: a tenth of the iterations
#   RDMAMSG_PERF_OPTS  extra client options, e.g. --fd or --ev
#
# Server and client are two processes on this host over 127.0.0.1; rdmamsg
# runs on softrdma (RDMAMSG_FABRIC=soft).  Prints medians and the ratios
# rdmamsg/verbs (the library's cost over raw verbs on the same fabric) and
# rdmamsg/UCX from this one run.  A missing or failing peer prints "n/a";
# the script exits 0 anyway.
#
# Environment: SOFTRDMA_LIB, BENCH_TIMEOUT (seconds per run, default 120),
# BENCH_SCALE (iteration multiplier).
set -u

builddir=
scale=${BENCH_SCALE:-1}
while getopts b:q opt; do
	case $opt in
	b) builddir=$OPTARG ;;
	q) scale=0.1 ;;
	*) sed -n '2,19s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
rmp_opts=("$@")

bench_name=rdmamsg
# shellcheck source=tools/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"

perf=$builddir/tools/rdmamsg_perf
[ -x "$perf" ] || echo "# $perf not built: rdmamsg columns are n/a" >&2
export RDMAMSG_FABRIC=soft RDMAMSG_SOFTRDMA_PATH=$lib

# rmp RESULTVAR TEST SIZE COL ITERS -- one rdmamsg_perf run, column COL of
# the SIZE row (lat: size iters median avg p99; bw: size iters MB/s Gb/s;
# rate: size iters msgs/s Mmsgs/s)
rmp() {
	local var=$1 test=$2 size=$3 col=$4 n=$5 port v=n/a
	if [ -x "$perf" ] && [ -e "$lib" ]; then
		port=$(free_port)
		if pair "rmp-$test-$size" "$port" \
			"$perf" -s -p "$port" -- \
			"$perf" -c 127.0.0.1 -p "$port" -t "$test" --size "$size" -n "$n" "${rmp_opts[@]}"; then
			v=$(pt_col "$tmp/rmp-$test-$size.c" "$size" "$col") || v=n/a
		fi
	fi
	printf -v "$var" %s "$v"
}

# scale_v VALUE FACTOR -- VALUE * FACTOR, or n/a
scale_v() {
	awk -v v="$1" -v f="$2" 'BEGIN { if (v ~ /^[0-9.]+$/) printf "%.3f", v * f; else printf "n/a" }'
}

echo "# bench-rdmamsg: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# rdmamsg_perf: $perf ${rmp_opts[*]:-(busy polling)}; softrdma: $lib (GID index ${gid:-n/a})"

# --- one-way latency (half round trip), median, us -----------------------
for sz in 8 4096 65536; do
	rmp "r_lat_$sz" lat "$sz" 3 "$(iters 20000)"
	perftest "s_lat_$sz" ib_send_lat "$sz" 5 -n "$(iters 20000)"
	ucx "u_lat_$sz" posix tag_lat "$sz" 3 "$(iters 100000)"
done
# --- bandwidth 64 KiB, MiB/s (rdmamsg_perf prints MB/s = 10^6 B/s) --------
rmp r_bw bw 65536 3 "$(iters 20000)"
r_bw=$(scale_v "$r_bw" "$(awk 'BEGIN { print 1e6 / 1048576 }')")
perftest s_bw ib_send_bw 65536 4 -n "$(iters 5000)"
ucx u_bw posix,cma tag_bw 65536 6 "$(iters 20000)"
# --- message rate 8 B, Mmsg/s ----------------------------------------------
rmp r_mr rate 8 4 "$(iters 200000)"
perftest s_mr ib_send_bw 8 5 -n "$(iters 200000)"
[ "$s_mr" != n/a ] && s_mr=$(awk -v v="$s_mr" 'BEGIN { printf "%.3f", v }')
ucx u_mr posix,cma tag_bw 8 8 "$(iters 1000000)"
[ "$u_mr" != n/a ] && u_mr=$(awk -v v="$u_mr" 'BEGIN { printf "%.3f", v / 1e6 }')

row() {
	printf '%-34s %10s %10s %10s %11s %11s\n' "$1" "$2" "$3" "$4" "$(ratio "$2" "$3")" "$(ratio "$2" "$4")"
}
echo
printf '%-34s %10s %10s %10s %11s %11s\n' metric rdmamsg verbs UCX rdmamsg/vrb rdmamsg/UCX
for sz in 8 4096 65536; do
	eval "row \"latency $sz B, median us\" \"\$r_lat_$sz\" \"\$s_lat_$sz\" \"\$u_lat_$sz\""
done
row "bandwidth 64 KiB, MiB/s" "$r_bw" "$s_bw" "$u_bw"
row "message rate 8 B, Mmsg/s" "$r_mr" "$s_mr" "$u_mr"
echo
echo "latency: lower is better (ratio > 1 = slower); bandwidth, rate: higher is better."
echo "rdmamsg: rdmamsg_perf -t lat|bw|rate on softrdma; verbs: perftest on softrdma (LD_PRELOAD),"
echo "ib_send_lat t_typical, ib_send_bw BW average / MsgRate; UCX: ucx_perftest tag_lat"
echo "UCX_TLS=posix (50%ile), tag_bw UCX_TLS=posix,cma (average)."
exit 0
