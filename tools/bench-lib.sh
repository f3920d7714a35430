# bench-lib.sh -- shared by tools/bench-*.sh (sourced, bash)
# shellcheck shell=bash
#
# Expects: builddir (may be empty), scale, bench_name.  Provides: lib (the
# libsoftrdma path), soft_ok/gid (softrdma usable, GID index of 127.0.0.1),
# tmp, pair (and its counters: count_on, count_init, pair_counts), perftest,
# ucx, fi_pp, ratio, iters, have, pin.
#
# BENCH_CPUS=CPU0,CPU1 pins every server to CPU0 and every client to CPU1
# (taskset, threads included), so that on a machine of many CPUs each run
# crosses the same two cores (unset: the scheduler's choice, as on a
# 2-CPU machine, where either way each side has a core of its own).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -z "$builddir" ]; then
	if [ -e soft/.libs/libsoftrdma.so ]; then builddir=$PWD; else builddir=$here; fi
fi
lib=${SOFTRDMA_LIB:-$builddir/soft/.libs/libsoftrdma.so}
limit=${BENCH_TIMEOUT:-120}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-${bench_name:-x}.XXXXXX")
pids=
export SOFTRDMA_SHM_PREFIX=bench$$
# a peer killed with -9 leaves its softrdma objects behind: ours all go
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$tmp"
	rm -f /dev/shm/"$SOFTRDMA_SHM_PREFIX"-* 2>/dev/null
}
trap cleanup EXIT

have() { command -v "$1" >/dev/null 2>&1; }

# runs PROG -- PROG is there and starts: a peer whose shared libraries the
# loader cannot find (exit 127 before main) is n/a at once, its reason
# said once, instead of each of its runs waiting for a server that never
# listens
declare -A runs_seen=()
runs() {
	local out
	if [ -z "${runs_seen[$1]+x}" ]; then
		runs_seen[$1]=0
		if have "$1"; then
			out=$(timeout 10 "$1" --version </dev/null 2>&1 >/dev/null)
			case $? in
			126 | 127) echo "# $1 cannot start: ${out%%$'\n'*}" >&2 ;;
			*) runs_seen[$1]=1 ;;
			esac
		fi
	fi
	[ "${runs_seen[$1]}" = 1 ]
}

pin=${BENCH_CPUS:-}
if [ -n "$pin" ] && { ! [[ $pin =~ ^[0-9]+,[0-9]+$ ]] || ! have taskset ||
	! taskset -c "${pin%,*}" true 2>/dev/null || ! taskset -c "${pin#*,}" true 2>/dev/null; }; then
	echo "bench-$bench_name: BENCH_CPUS (-P) must be CPU0,CPU1, two CPUs this process may run on (taskset): '$pin'" >&2
	exit 2
fi

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

# System calls and context switches: with count_on=1 (after count_init),
# pair runs each side under a counter (perf stat; strace -f -c where perf
# cannot count tracepoints, and then no context switches), into
# $tmp/NAME.s.cnt and $tmp/NAME.c.cnt; pair_counts NAME adds them up.
count_on=0
counter=
last_pair=

# count_init -- pick the counter; fails when there is none
count_init() {
	if have perf && perf stat -x, -e raw_syscalls:sys_enter,context-switches true >/dev/null 2>&1; then
		counter=perf
	elif have strace; then
		counter=strace
	else
		return 1
	fi
}

# count_prefix ARRAY OUT -- the words that run a command under the counter
count_prefix() {
	local -n __p=$1
	case $counter in
	perf) __p=(perf stat "-x," -o "$2" -e "raw_syscalls:sys_enter,context-switches") ;;
	strace) __p=(strace -f -c -o "$2") ;;
	*) __p=() ;;
	esac
}

# count_file FILE -- "syscalls ctxsw" of one side's counter output
count_file() {
	[ -s "$1" ] || return 1
	if [ "$counter" = perf ]; then
		awk -F, '$3 == "raw_syscalls:sys_enter" { s = $1 } $3 == "context-switches" { c = $1 } END { print s + 0, c + 0 }' "$1"
	else
		awk '$NF == "total" { print $(NF - 2) + 0, 0 }' "$1"
	fi
}

# pair_counts NAME -- "syscalls ctxsw" of pair NAME's two sides added up
pair_counts() {
	local s1 c1 s2 c2
	read -r s1 c1 < <(count_file "$tmp/$1.s.cnt") || return 1
	read -r s2 c2 < <(count_file "$tmp/$1.c.cnt") || return 1
	echo $((s1 + s2)) $((c1 + c2))
}

# pair NAME PORT SERVER-CMD -- CLIENT-CMD
#   Runs the server in the background, waits for PORT, runs the client.
#   Client output in $tmp/NAME.c, server output in $tmp/NAME.s; NAME also
#   in last_pair.  Succeeds when both sides exit 0.
pair() {
	local name=$1 port=$2 spid rc src
	shift 2
	local -a srv=() spre=() cpre=() cnt=()
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	# shellcheck disable=SC2034 # read by pair_counts' callers
	last_pair=$name
	[ -z "$pin" ] || spre=(taskset -c "${pin%,*}") cpre=(taskset -c "${pin#*,}")
	if [ "$count_on" = 1 ]; then
		rm -f "$tmp/$name.s.cnt" "$tmp/$name.c.cnt"
		count_prefix cnt "$tmp/$name.s.cnt"
		spre+=("${cnt[@]}")
		count_prefix cnt "$tmp/$name.c.cnt"
		cpre+=("${cnt[@]}")
	fi
	timeout -k 5 "$limit" "${spre[@]}" "${srv[@]}" >"$tmp/$name.s" 2>&1 &
	spid=$!
	pids="$pids $spid"
	if ! wait_port "$port" 15; then
		kill -9 "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		echo "# $name: server did not listen on $port" >&2
		sed 's/^/#   /' "$tmp/$name.s" | tail -5 >&2
		return 1
	fi
	timeout -k 5 "$limit" "${cpre[@]}" "$@" >"$tmp/$name.c" 2>&1
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
runs ucx_perftest || have ucx_perftest ||
	echo "# ucx_perftest missing (Debian package ucx-utils)" >&2

# perftest RESULTVAR PROG SIZE COL PERFTEST-ARGS... -- one perftest run
perftest() {
	local var=$1 prog=$2 size=$3 col=$4 port v=n/a
	shift 4
	if [ $soft_ok = 1 ] && runs "$prog"; then
		port=$(free_port)
		if pair "$prog-$size" "$port" \
			env LD_PRELOAD="$lib" "$prog" -d softrdma0 -x "$gid" -F -p "$port" -s "$size" "$@" -- \
			env LD_PRELOAD="$lib" "$prog" -d softrdma0 -x "$gid" -F -p "$port" -s "$size" "$@" 127.0.0.1; then
			v=$(pt_col "$tmp/$prog-$size.c" "$size" "$col") || v=n/a
		fi
	fi
	printf -v "$var" %s "$v"
}

# ucx RESULTVAR TLS TEST SIZE COL ITERS -- one ucx_perftest run; bandwidth
# tests (*_bw) get the caller's ucx_win (e.g. -O 128) if it set one
ucx() {
	local var=$1 tls=$2 test=$3 size=$4 col=$5 n=$6 port v=n/a
	local -a w=()
	case $test in *_bw) [ -n "${ucx_win+x}" ] && w=("${ucx_win[@]}") ;; esac
	if runs ucx_perftest; then
		port=$(free_port)
		if pair "ucx-$test-$size" "$port" \
			env UCX_TLS="$tls" ucx_perftest -p "$port" -- \
			env UCX_TLS="$tls" ucx_perftest 127.0.0.1 -p "$port" -t "$test" -s "$size" -n "$n" -w "$(iters 1000)" "${w[@]}"; then
			v=$(ucx_col "$tmp/ucx-$test-$size.c" "$col") || v=n/a
		fi
	fi
	printf -v "$var" %s "$v"
}

# fi RESULTVAR PROVIDER EP_TYPE -- fi_pingpong 8 B, usec/xfer as it reports
fi_pp() {
	local var=$1 port v=n/a
	if runs fi_pingpong; then
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

# acc ARRAY FUNC ARGS... -- run FUNC RESULTVAR ARGS... (perftest, ucx, fi_pp,
# ...) and append the result to ARRAY
acc() {
	local __arr=$1 __v=n/a
	shift
	"$1" __v "${@:2}"
	eval "$__arr+=(\"\$__v\")"
}

# med VALUES... -- median of the numeric values (n/a values ignored)
med() {
	printf '%s\n' "$@" | grep -E '^[0-9]+(\.[0-9]+)?$' | sort -g |
		awk '{ a[NR] = $1 } END { if (!NR) print "n/a"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# best lower|higher VALUES... -- the best numeric value (min or max), or n/a
best() {
	local dir=$1
	shift
	printf '%s\n' "$@" | grep -E '^[0-9]+(\.[0-9]+)?$' | sort -g |
		awk -v d="$dir" 'NR == 1 { lo = $1 } { hi = $1 } END { if (!NR) print "n/a"; else print (d == "lower" ? lo : hi) }'
}
