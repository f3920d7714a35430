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

here=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "$builddir" ]; then
	if [ -e soft/.libs/libsoftrdma.so ]; then builddir=$PWD; else builddir=$here; fi
fi
lib=${SOFTRDMA_LIB:-$builddir/soft/.libs/libsoftrdma.so}
limit=${BENCH_TIMEOUT:-120}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-softrdma.XXXXXX")
pids=
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
export SOFTRDMA_SHM_PREFIX=bench$$

# iters N -- N scaled by BENCH_SCALE / -q (at least 100)
iters() {
	awk -v n="$1" -v s="$scale" 'BEGIN { n = int(n * s); print (n < 100 ? 100 : n) }'
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
		echo $((20000 + RANDOM % 20000))
}

# wait_port PORT [SECONDS] -- wait until something listens on TCP PORT
wait_port() {
	local i=0 hex
	hex=$(printf '%04X' "$1")
	while [ $i -lt $((${2:-10} * 10)) ]; do
		grep -q ":$hex 00000000:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# pair NAME PORT SERVER-CMD -- CLIENT-CMD
#   Runs the server in the background, waits for PORT, runs the client.
#   Client output in $tmp/NAME.c, server output in $tmp/NAME.s.
#   Succeeds when both sides exit 0.
pair() {
	local name=$1 port=$2 spid rc src
	shift 2
	local -a srv=()
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	timeout -k 5 "$limit" "${srv[@]}" >"$tmp/$name.s" 2>&1 &
	spid=$!
	pids="$pids $spid"
	if ! wait_port "$port" 15; then
		kill -9 "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		echo "# $name: server did not listen on $port" >&2
		sed 's/^/#   /' "$tmp/$name.s" | tail -5 >&2
		return 1
	fi
	timeout -k 5 "$limit" "$@" >"$tmp/$name.c" 2>&1
	rc=$?
	wait "$spid"
	src=$?
	if [ $rc -ne 0 ] || [ $src -ne 0 ]; then
		echo "# $name: client exit $rc, server exit $src" >&2
		tail -5 "$tmp/$name.c" "$tmp/$name.s" 2>/dev/null | sed 's/^/#   /' >&2
		return 1
	fi
	return 0
}

have() { command -v "$1" >/dev/null 2>&1; }

# perftest lines: "#bytes #iterations t_min t_max t_typical t_avg ..." and
# "#bytes #iterations BW_peak BW_average MsgRate"; pick column COL of the row
# for SIZE.
pt_col() {
	awk -v sz="$2" -v col="$3" '$1 == sz && $2 ~ /^[0-9]+$/ && NF >= col { v = $col } END { if (v != "") print v; else exit 1 }' "$1"
}

# ucx_perftest summary: "Final: ITERS LAT50 LATAVG LATOVR BWAVG BWOVR MRAVG MROVR"
ucx_col() {
	awk -v col="$2" '$1 == "Final:" { v = $col } END { if (v != "") print v; else exit 1 }' "$1"
}

soft_ok=0
gid=
if [ -e "$lib" ] && have ibv_devinfo; then
	gid=$(LD_PRELOAD=$lib timeout 20 ibv_devinfo -d softrdma0 -v 2>/dev/null |
		sed -n 's/^[[:space:]]*GID\[[[:space:]]*\([0-9]*\)\]:[[:space:]]*::ffff:127\.0\.0\.1.*/\1/p' | head -n 1)
	[ -n "$gid" ] && soft_ok=1
fi
[ $soft_ok = 1 ] || echo "# softrdma not usable (library $lib, no GID for 127.0.0.1): its columns are n/a" >&2
have ucx_perftest || echo "# ucx_perftest missing (Debian package ucx-utils)" >&2

# perftest RESULTVAR PROG SIZE COL PERFTEST-ARGS... -- one perftest run
perftest() {
	local var=$1 prog=$2 size=$3 col=$4 port v=n/a
	shift 4
	if [ $soft_ok = 1 ] && have "$prog"; then
		port=$(free_port)
		if pair "$prog-$size" "$port" \
			env LD_PRELOAD="$lib" "$prog" -d softrdma0 -x "$gid" -F -p "$port" -s "$size" "$@" -- \
			env LD_PRELOAD="$lib" "$prog" -d softrdma0 -x "$gid" -F -p "$port" -s "$size" "$@" 127.0.0.1; then
			v=$(pt_col "$tmp/$prog-$size.c" "$size" "$col") || v=n/a
		fi
	fi
	printf -v "$var" %s "$v"
}

# ucx RESULTVAR TLS TEST SIZE COL ITERS -- one ucx_perftest run
ucx() {
	local var=$1 tls=$2 test=$3 size=$4 col=$5 n=$6 port v=n/a
	if have ucx_perftest; then
		port=$(free_port)
		if pair "ucx-$test-$size" "$port" \
			env UCX_TLS="$tls" ucx_perftest -p "$port" -- \
			env UCX_TLS="$tls" ucx_perftest 127.0.0.1 -p "$port" -t "$test" -s "$size" -n "$n" -w "$(iters 1000)"; then
			v=$(ucx_col "$tmp/ucx-$test-$size.c" "$col") || v=n/a
		fi
	fi
	printf -v "$var" %s "$v"
}

# fi RESULTVAR PROVIDER EP_TYPE -- fi_pingpong 8 B, usec/xfer as it reports
fi_pp() {
	local var=$1 port v=n/a
	if have fi_pingpong; then
		port=$(free_port)
		if pair "fi-$2" "$port" \
			fi_pingpong -p "$2" -e "$3" -B "$port" -S 8 -I "$(iters 20000)" -- \
			fi_pingpong -p "$2" -e "$3" -P "$port" -S 8 -I "$(iters 20000)" 127.0.0.1; then
			v=$(awk '$1 == 8 && NF >= 7 { v = $7 } END { if (v != "") print v; else exit 1 }' "$tmp/fi-$2.c") || v=n/a
		fi
	fi
	printf -v "$var" %s "$v"
}

# ratio A B -- A/B with two decimals, or n/a
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.2f", a / b; else printf "n/a" }'
}

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
