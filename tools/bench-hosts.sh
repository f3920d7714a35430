#!/bin/bash
# bench-hosts.sh -- softrdma between two hosts (SOFTRDMA_NET=1, RoCE v2 over
# UDP) next to UCX over TCP, libfabric's tcp provider and plain TCP, all
# between the same two network namespaces of this machine, in one run.
#
# Usage: tools/bench-hosts.sh [-b BUILDDIR] [-c LIB] [-m MTU] [-q] [-r ROUNDS] [-W]
#   -b BUILDDIR  build tree holding soft/.libs/libsoftrdma.so (default: the
#                current directory if it has it, else the source tree)
#   -c LIB       compare: each perftest row also with the softrdma library
#                LIB ("before"), the two alternating in each round (the
#                first in odd rounds, the other in even ones)
#   -W           only the 64 KiB and 1 MiB bandwidth rows
#   -m MTU       the links' MTU (default 9000: jumbo frames, where the port's
#                MTU is 4096; 1500 gives 1024)
#   -q           quick run: a tenth of the iterations
#   -r ROUNDS    measure everything ROUNDS times, report medians (default 3)
#
# Root only: two hosts of tests/netns/fabric.sh (10.231.1.1 serves,
# 10.231.1.2 is the client), removed at exit.  Measured:
#   8 B latency (us, one way): perftest ib_send_lat (median), ucx_perftest
#     tag_lat (UCX_TLS=tcp), fi_pingpong -p tcp -e msg, qperf tcp_lat;
#   64 KiB and 1 MiB bandwidth (MiB/s): ib_write_bw and ib_send_bw,
#     ucx_perftest tag_bw (UCX_TLS=tcp), qperf tcp_bw;
#   8 B message rate (M msg/s): ib_send_bw -s 8, ucx_perftest tag_bw -s 8,
#     qperf tcp_bw -m 8.
# fi_pingpong only ping-pongs (no streaming test in libfabric-bin), so it
# is in the latency rows only.  Ratios are softrdma / peer: above 1 is
# better for bandwidth and rate, below 1 better for latency.  A peer that
# is missing or fails prints "n/a"; the script exits 0 anyway.
#
# Environment: SOFTRDMA_LIB, BENCH_TIMEOUT (seconds per run, default 120),
# BENCH_SCALE (iteration multiplier).
set -u

builddir=
scale=${BENCH_SCALE:-1}
rounds=3
mtu=9000
clib=
bwonly=0
while getopts b:c:m:qr:W opt; do
	case $opt in
	b) builddir=$OPTARG ;;
	c) clib=$OPTARG ;;
	W) bwonly=1 ;;
	m) mtu=$OPTARG ;;
	q) scale=0.1 ;;
	r) rounds=$OPTARG ;;
	*) sed -n '2,31s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done

bench_name=hosts
# shellcheck source=tools/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"

fabric=$here/tests/netns/fabric.sh
if ! why=$(sh "$fabric" check); then
	echo "# bench-hosts: network namespaces unavailable: $why" >&2
	exit 0
fi
fab=bench-hosts-$$
a1=10.231.1.1
trap 'cleanup; sh "$fabric" down "$fab"' EXIT
trap 'exit 1' INT TERM
sh "$fabric" up "$fab" 2 1 "$mtu" || exit 1

# on HOST CMD... -- CMD on a host of the fabric
on() {
	local h=$1
	shift
	sh "$fabric" exec "$fab" "$h" "$@"
}

# hwait PORT -- until something listens on TCP PORT on host 1 (15 s)
hwait() {
	local i=0 hex
	hex=$(printf '%04X' "$1")
	while [ $i -lt 150 ]; do
		on 1 cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
			grep -q ":$hex 0\{8,32\}:0000 0A" && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# hpair NAME PORT SERVER-CMD -- CLIENT-CMD: server on host 1, client on
# host 2; outputs in $tmp/NAME.s and $tmp/NAME.c; 0 when both exit 0
hpair() {
	local name=$1 port=$2 spid rc src
	shift 2
	local -a srv=()
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	on 1 timeout -k 5 "$limit" "${srv[@]}" >"$tmp/$name.s" 2>&1 &
	spid=$!
	pids="$pids $spid"
	if ! hwait "$port"; then
		kill -TERM "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		echo "# $name: server did not listen on $port" >&2
		tail -5 "$tmp/$name.s" | sed 's/^/#   /' >&2
		return 1
	fi
	on 2 timeout -k 5 "$limit" "$@" >"$tmp/$name.c" 2>&1
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

# softrdma's GID index of 10.231.1.N on the hosts
sgid=$(on 1 env SOFTRDMA_NET=1 LD_PRELOAD="$lib" timeout 20 ibv_devinfo -v 2>/dev/null |
	sed -n 's/^[[:space:]]*GID\[[[:space:]]*\([0-9]*\)\]:[[:space:]]*::ffff:10\.231\.1\.1.*/\1/p' | head -n 1)
pmtu=$(on 1 env SOFTRDMA_NET=1 LD_PRELOAD="$lib" timeout 20 ibv_devinfo -v 2>/dev/null |
	awk '$1 == "active_mtu:" { print $2; exit }')
[ -n "$sgid" ] || echo "# softrdma not usable between the hosts (no GID for $a1): its columns are n/a" >&2

hport=30000
# hperf RESULTVAR PROG SIZE COL ARGS... -- one perftest run host 2 -> host 1
# with the softrdma library $plib
plib=$lib
hperf() {
	local var=$1 prog=$2 size=$3 col=$4 v=n/a
	shift 4
	local try
	# perftest's clock calibration fails now and then on a loaded
	# machine ("Correlation coefficient r^2 < 0.9"): that run again
	for try in 1 2 3; do
		hport=$((hport + 1))
		if [ -n "$sgid" ] && runs "$prog" &&
			hpair "$prog-$size" "$hport" \
				env SOFTRDMA_NET=1 LD_PRELOAD="$plib" "$prog" -d softrdma0 -x "$sgid" -F -p "$hport" -s "$size" "$@" -- \
				env SOFTRDMA_NET=1 LD_PRELOAD="$plib" "$prog" -d softrdma0 -x "$sgid" -F -p "$hport" -s "$size" "$@" "$a1"; then
			v=$(pt_col "$tmp/$prog-$size.c" "$size" "$col") || v=n/a
		fi
		grep -q 'Correlation coefficient' "$tmp/$prog-$size.c" "$tmp/$prog-$size.s" 2>/dev/null || break
	done
	printf -v "$var" %s "$v"
}

# hucx RESULTVAR TEST SIZE COL ITERS -- ucx_perftest over TCP (bandwidth
# tests with 64 sends outstanding, as perftest's default tx depth 128)
hucx() {
	local var=$1 test=$2 size=$3 col=$4 n=$5 v=n/a
	local -a w=()
	case $test in *_bw) w=(-O 64) ;; esac
	hport=$((hport + 1))
	if runs ucx_perftest &&
		hpair "ucx-$test-$size" "$hport" \
			env UCX_TLS=tcp ucx_perftest -p "$hport" -- \
			env UCX_TLS=tcp ucx_perftest "$a1" -p "$hport" -t "$test" -s "$size" -n "$n" -w "$(iters 1000)" "${w[@]}"; then
		v=$(ucx_col "$tmp/ucx-$test-$size.c" "$col") || v=n/a
	fi
	printf -v "$var" %s "$v"
}

# hfi RESULTVAR -- fi_pingpong 8 B over libfabric's tcp provider, usec/xfer
hfi() {
	local var=$1 v=n/a
	hport=$((hport + 1))
	if runs fi_pingpong &&
		hpair fi-tcp "$hport" \
			fi_pingpong -p tcp -e msg -B "$hport" -S 8 -I "$(iters 20000)" -- \
			fi_pingpong -p tcp -e msg -P "$hport" -S 8 -I "$(iters 20000)" "$a1"; then
		v=$(awk '$1 == 8 && NF >= 7 { v = $7 } END { if (v != "") print v; else exit 1 }' "$tmp/fi-tcp.c") || v=n/a
	fi
	printf -v "$var" %s "$v"
}

# qperf: one server on host 1 for the whole run
qport=19765
qperf_ok=0
if runs qperf; then
	on 1 timeout -k 5 3600 qperf -lp "$qport" >"$tmp/qperf.s" 2>&1 &
	pids="$pids $!"
	disown $! # killed at exit, silently
	hwait "$qport" && qperf_ok=1
fi
# hq RESULTVAR TEST SIZE -- qperf tcp_lat (us) or tcp_bw (MiB/s)
hq() {
	local var=$1 v=n/a
	if [ $qperf_ok = 1 ] &&
		on 2 timeout -k 5 "$limit" qperf -lp "$qport" -t "$(awk -v s="$scale" 'BEGIN { t = int(3 * s); print t < 1 ? 1 : t }')" \
			-m "$3" "$a1" "$2" >"$tmp/qperf-$2-$3" 2>&1; then
		v=$(awk '
			$1 == "latency" { f = ($4 == "ns") ? 1e-3 : ($4 == "ms") ? 1e3 : ($4 == "sec") ? 1e6 : 1; v = $3 * f }
			$1 == "bw" { f = ($4 == "GB/sec") ? 1e9 : ($4 == "MB/sec") ? 1e6 : ($4 == "KB/sec") ? 1e3 : 1; v = $3 * f / 1048576 }
			END { if (v != "") printf "%.2f\n", v; else exit 1 }' "$tmp/qperf-$2-$3") || v=n/a
	fi
	printf -v "$var" %s "$v"
}

echo "# bench-hosts: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# two namespace hosts, MTU $mtu (softrdma's port: active_mtu ${pmtu:-n/a}), softrdma: $lib"
[ -n "$clib" ] && echo "# compared with (before): $clib"

# sacc ARRAY ARGS... -- acc ARRAY hperf ARGS... with our library, and with
# -c's into ARRAY_c, the two alternating by round
sacc() {
	local arr=$1 l
	shift
	for l in $order; do
		if [ "$l" = c ]; then
			plib=$clib acc "${arr}_c" hperf "$@"
		else
			plib=$lib acc "$arr" hperf "$@"
		fi
	done
	plib=$lib
}

for round in $(seq "$rounds"); do
	echo "# round $round/$rounds" >&2
	order=s
	[ -n "$clib" ] && { order="c s"; [ $((round % 2)) = 0 ] && order="s c"; }
	if [ $bwonly = 0 ]; then
		sacc S_lat ib_send_lat 8 5 -n "$(iters 5000)"
		acc U_lat hucx tag_lat 8 3 "$(iters 50000)"
		acc F_lat hfi
		acc Q_lat hq tcp_lat 8
	fi
	sacc S_wbw64 ib_write_bw 65536 4 -n "$(iters 2000)"
	sacc S_sbw64 ib_send_bw 65536 4 -n "$(iters 2000)"
	acc U_bw64 hucx tag_bw 65536 6 "$(iters 10000)"
	acc Q_bw64 hq tcp_bw 65536
	sacc S_wbw1m ib_write_bw 1048576 4 -n "$(iters 300)"
	sacc S_sbw1m ib_send_bw 1048576 4 -n "$(iters 300)"
	acc U_bw1m hucx tag_bw 1048576 6 "$(iters 1000)"
	acc Q_bw1m hq tcp_bw 1048576
	if [ $bwonly = 0 ]; then
		sacc S_mr ib_send_bw 8 5 -n "$(iters 50000)"
		acc U_mr hucx tag_bw 8 8 "$(iters 200000)"
		acc Q_bw8 hq tcp_bw 8
	fi
done

s_lat=$(med "${S_lat[@]}") u_lat=$(med "${U_lat[@]}")
f_lat=$(med "${F_lat[@]}") q_lat=$(med "${Q_lat[@]}")
s_w64=$(med "${S_wbw64[@]}") s_s64=$(med "${S_sbw64[@]}")
u_64=$(med "${U_bw64[@]}") q_64=$(med "${Q_bw64[@]}")
s_w1m=$(med "${S_wbw1m[@]}") s_s1m=$(med "${S_sbw1m[@]}")
u_1m=$(med "${U_bw1m[@]}") q_1m=$(med "${Q_bw1m[@]}")
s_mr=$(med "${S_mr[@]}")
u_mr=$(awk -v v="$(med "${U_mr[@]}")" 'BEGIN { if (v ~ /^[0-9.]+$/) printf "%.4f", v / 1e6; else print "n/a" }')
q_mr=$(awk -v v="$(med "${Q_bw8[@]}")" 'BEGIN { if (v ~ /^[0-9.]+$/) printf "%.4f", v * 1048576 / 8 / 1e6; else print "n/a" }')
best_lat=$(best lower "$u_lat" "$f_lat" "$q_lat")
if [ -n "$clib" ]; then
	# the rows of -c's library: every round's value, then the median
	printf '\n%-34s %-24s %-24s %8s %8s\n' "before / now, per round" before now "med bef" "med now"
	for r in wbw64:"64 KiB WRITE bw (MiB/s)" sbw64:"64 KiB SEND bw (MiB/s)" \
		wbw1m:"1 MiB WRITE bw (MiB/s)" sbw1m:"1 MiB SEND bw (MiB/s)"; do
		eval "b=(\"\${S_${r%%:*}_c[@]}\"); a=(\"\${S_${r%%:*}[@]}\")"
		printf '%-34s %-24s %-24s %8s %8s\n' "${r#*:}" "${b[*]}" "${a[*]}" "$(med "${b[@]}")" "$(med "${a[@]}")"
	done
fi

printf '\n%-34s %10s %10s %10s %10s %10s %10s\n' metric softrdma "UCX tcp" "fi tcp" "qperf tcp" "/UCX" "/TCP"
printf '%-34s %10s %10s %10s %10s %10s %10s\n' "8 B latency (us, one way)" "$s_lat" "$u_lat" "$f_lat" "$q_lat" "$(ratio "$s_lat" "$u_lat")" "$(ratio "$s_lat" "$q_lat")"
printf '%-34s %10s %10s %10s %10s %10s %10s\n' "64 KiB WRITE bw (MiB/s)" "$s_w64" "$u_64" - "$q_64" "$(ratio "$s_w64" "$u_64")" "$(ratio "$s_w64" "$q_64")"
printf '%-34s %10s %10s %10s %10s %10s %10s\n' "64 KiB SEND bw (MiB/s)" "$s_s64" "$u_64" - "$q_64" "$(ratio "$s_s64" "$u_64")" "$(ratio "$s_s64" "$q_64")"
printf '%-34s %10s %10s %10s %10s %10s %10s\n' "1 MiB WRITE bw (MiB/s)" "$s_w1m" "$u_1m" - "$q_1m" "$(ratio "$s_w1m" "$u_1m")" "$(ratio "$s_w1m" "$q_1m")"
printf '%-34s %10s %10s %10s %10s %10s %10s\n' "1 MiB SEND bw (MiB/s)" "$s_s1m" "$u_1m" - "$q_1m" "$(ratio "$s_s1m" "$u_1m")" "$(ratio "$s_s1m" "$q_1m")"
printf '%-34s %10s %10s %10s %10s %10s %10s\n' "8 B message rate (M msg/s)" "$s_mr" "$u_mr" - "$q_mr" "$(ratio "$s_mr" "$u_mr")" "$(ratio "$s_mr" "$q_mr")"
echo "# best TCP-based 8 B latency: $best_lat us; softrdma / best: $(ratio "$s_lat" "$best_lat")"
echo "# UCX and qperf stream over one TCP connection; ib_*_bw streams with perftest's defaults (tx depth 128)"
echo "# done $(date -u '+%H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
exit 0
