#!/bin/bash
# bench-syscalls.sh -- system calls and context switches per message of
# tools/rdmamsg_perf, server and client added up, counted by `perf stat`
# (raw_syscalls:sys_enter and context-switches; strace -f -c when perf
# cannot count them).  Each test runs at N and 2N messages; the figure per
# message is the difference divided by N, so connection set-up and
# teardown cancel out.  Counts, unlike times, hardly depend on the load.
#
# Usage: tools/bench-syscalls.sh [-b BUILDDIR] [-n N] [TEST:SIZE...] [-- RDMAMSG_PERF_OPTS...]
#   -b BUILDDIR  build tree (as bench-rdmamsg.sh)
#   -n N         the smaller run's messages (default 4000)
#   TEST:SIZE    rdmamsg_perf tests (default lat:8 lat:65536 rate:8)
#   RDMAMSG_PERF_OPTS  options for both sides (default --busy)
# Environment: RDMAMSG_PERF (another rdmamsg_perf binary, e.g. a build of
# an older commit: run it with that build's LD_LIBRARY_PATH);
# SOFTRDMA_NO_DIRECT_WAKE=1 (softrdma wakes a waiter on a completion
# channel through its progress thread, as before the direct wake: the
# before/after of --fd from one build).
set -u

builddir=
scale=1
n=4000
while getopts b:n: opt; do
	case $opt in
	b) builddir=$OPTARG ;;
	n) n=$OPTARG ;;
	*) sed -n '2,16s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
tests=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do tests+=("$1"); shift; done
[ $# -gt 0 ] && shift
rmp_opts=("$@")
[ ${#rmp_opts[@]} -gt 0 ] || rmp_opts=(--busy)
[ ${#tests[@]} -gt 0 ] || tests=(lat:8 lat:65536 rate:8)

bench_name=syscalls
# shellcheck source=tools/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"

perf=${RDMAMSG_PERF:-$builddir/tools/rdmamsg_perf}
[ -x "$perf" ] || { echo "# $perf not built" >&2; exit 1; }
export RDMAMSG_FABRIC=soft RDMAMSG_SOFTRDMA_PATH=$lib

counter=perf
if ! have perf || ! perf stat -x, -e raw_syscalls:sys_enter,context-switches true >/dev/null 2>&1; then
	counter=strace
	have strace || { echo "# neither perf (with tracepoints) nor strace: install linux-perf or strace" >&2; exit 1; }
	echo "# perf cannot count system calls here: strace -f -c (no context switches)" >&2
fi

# wrap OUT CMD... -- CMD under the counter, its counts into OUT
wrap() {
	local out=$1
	shift
	if [ $counter = perf ]; then
		echo perf stat -x, -o "$out" -e raw_syscalls:sys_enter,context-switches "$@"
	else
		echo strace -f -c -o "$out" "$@"
	fi
}

# counts FILE -- "syscalls ctxsw" of one side
counts() {
	if [ $counter = perf ]; then
		awk -F, '$3 == "raw_syscalls:sys_enter" { s = $1 } $3 == "context-switches" { c = $1 } END { print s + 0, c + 0 }' "$1"
	else
		awk '$NF == "total" { print $(NF - 2) + 0, 0 }' "$1"
	fi
}

# one TEST SIZE ITERS -- "syscalls ctxsw" of server plus client
one() {
	local port s c
	port=$(free_port)
	# shellcheck disable=SC2046
	pair "sc-$1-$2-$3" "$port" \
		$(wrap "$tmp/s.cnt" "$perf" -s -p "$port" "${rmp_opts[@]}") -- \
		$(wrap "$tmp/c.cnt" "$perf" -c 127.0.0.1 -p "$port" -t "$1" --size "$2" -n "$3" "${rmp_opts[@]}") || return 1
	read -r s1 c1 < <(counts "$tmp/s.cnt")
	read -r s2 c2 < <(counts "$tmp/c.cnt")
	echo $((s1 + s2)) $((c1 + c2))
}

echo "# bench-syscalls: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $perf ${rmp_opts[*]}; counted by $counter; per message = (count(2N) - count(N)) / N, N = $n${SOFTRDMA_NO_DIRECT_WAKE:+; SOFTRDMA_NO_DIRECT_WAKE=$SOFTRDMA_NO_DIRECT_WAKE}"
printf '%-14s %14s %14s\n' test syscalls/msg ctxsw/msg
for t in "${tests[@]}"; do
	test=${t%%:*} size=${t#*:}
	a=$(one "$test" "$size" "$n") && b=$(one "$test" "$size" $((n * 2))) || {
		printf '%-14s %14s %14s\n' "$t" n/a n/a
		continue
	}
	read -r sa ca <<<"$a"
	read -r sb cb <<<"$b"
	printf '%-14s %14s %14s\n' "$t" \
		"$(awk -v a="$sa" -v b="$sb" -v n="$n" 'BEGIN { printf "%.3f", (b - a) / n }')" \
		"$(awk -v a="$ca" -v b="$cb" -v n="$n" 'BEGIN { printf "%.3f", (b - a) / n }')"
done
