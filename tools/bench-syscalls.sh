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

count_init || { echo "# neither perf (with tracepoints) nor strace: install linux-perf or strace" >&2; exit 1; }
[ "$counter" = perf ] || echo "# perf cannot count system calls here: strace -f -c (no context switches)" >&2
count_on=1

# one TEST SIZE ITERS -- "syscalls ctxsw" of server plus client (the same
# 100 untimed iterations first at N and 2N: they cancel out)
one() {
	local port
	port=$(free_port)
	pair "sc-$1-$2-$3" "$port" \
		"$perf" -s -p "$port" "${rmp_opts[@]}" -- \
		"$perf" -c 127.0.0.1 -p "$port" -t "$1" --size "$2" -n "$3" -w 100 "${rmp_opts[@]}" || return 1
	pair_counts "sc-$1-$2-$3"
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
