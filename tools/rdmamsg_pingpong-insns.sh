#!/bin/sh
# rdmamsg_pingpong-insns.sh -- instructions per message of librdmamsg plus
# softrdma, under callgrind: tools/rdmamsg_pingpong (one process, two
# contexts connected to each other, 8-byte rdmamsg_send() ping-pong in busy
# mode) run against each softrdma library given, at -n N and -n 2N; the
# cost per message is the difference of the two instruction counts divided
# by the 2N extra messages (set-up cancels out; connection and teardown,
# whose spinning depends on time, are not counted: --toggle-collect).
# Instruction counts do not depend on the machine's load.
#
# Usage: tools/rdmamsg_pingpong-insns.sh [-n N] [-s SIZE] [-b BUILDDIR] [-r] [-w] [LIBSOFTRDMA.so...]
#   -n N        the smaller run's iterations (default 5000; 2N messages)
#   -s SIZE     message size (default 8)
#   -b BUILDDIR the build tree whose tools/rdmamsg_pingpong runs (default .)
#   -r          each library also with RDMAMSG_FAILOVER_REPLAY (pingpong
#               -r): the replay bookkeeping's cost per message beside it
#   -w          stream (pingpong -w): N and 2N messages one way, back to
#               back; per message = difference / N
#   LIBSOFTRDMA.so  the fabrics compared (default BUILDDIR's own)
# Example, softrdma of an older commit against this tree's (same librdmamsg):
#   tools/rdmamsg_pingpong-insns.sh -b _build \
#     /tmp/base/b/soft/.libs/libsoftrdma.so _build/soft/.libs/libsoftrdma.so
set -eu

n=5000
size=8
builddir=.
replay=
stream=
while getopts n:s:b:rw opt; do
	case $opt in
	n) n=$OPTARG ;;
	s) size=$OPTARG ;;
	b) builddir=$OPTARG ;;
	r) replay=1 ;;
	w) stream=-w ;;
	*) sed -n '10,19s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
command -v valgrind >/dev/null || { echo "valgrind missing" >&2; exit 1; }
bin=$builddir/tools/rdmamsg_pingpong
[ -x "$bin" ] || { echo "no $bin (make tools/rdmamsg_pingpong)" >&2; exit 1; }
[ $# -ge 1 ] || set -- "$builddir/soft/.libs/libsoftrdma.so"
export RDMAMSG_FABRIC=soft
export SOFTRDMA_SHM_PREFIX="rpi$$"
trap 'rm -f /dev/shm/"$SOFTRDMA_SHM_PREFIX"-* 2>/dev/null' EXIT

# insns LIB ITERS [-r] -- instructions callgrind collected for one run (of
# the real binary behind libtool's wrapper)
insns() {
	RDMAMSG_SOFTRDMA_PATH=$1 timeout -k 10 600 \
		"$builddir/libtool" --mode=execute valgrind --tool=callgrind \
		--toggle-collect=pingpong --callgrind-out-file=/dev/null "$bin" -n "$2" -s "$size" $stream ${3:-} 2>&1 >/dev/null |
		sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

echo "# rdmamsg_pingpong-insns: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
# the extra messages of the larger run: a ping-pong iteration is two
extra=$((2 * n))
[ -z "$stream" ] || extra=$n
echo "# $size-byte messages${stream:+ streamed}, -n $n and -n $((2 * n)); per message = difference / $extra messages"
printf '%-60s %14s %14s %10s\n' library "I(n=$n)" "I(n=$((2 * n)))" insn/msg
for lib in "$@"; do
	dir=$(cd "$(dirname "$lib")" && pwd)
	lib=$dir/$(basename "$lib")
	a=$(insns "$lib" "$n")
	b=$(insns "$lib" $((2 * n)))
	printf '%-60s %14s %14s %10s\n' "$lib" "$a" "$b" \
		"$(awk -v a="$a" -v b="$b" -v m=$extra 'BEGIN { printf "%.1f", (b - a) / m }')"
	[ -n "$replay" ] || continue
	c=$(insns "$lib" "$n" -r)
	d=$(insns "$lib" $((2 * n)) -r)
	printf '%-60s %14s %14s %10s\n' "  with RDMAMSG_FAILOVER_REPLAY" "$c" "$d" \
		"$(awk -v a="$c" -v b="$d" -v m=$extra 'BEGIN { printf "%.1f", (b - a) / m }')"
	awk -v a="$a" -v b="$b" -v c="$c" -v d="$d" -v m=$extra 'BEGIN {
		x = (b - a) / m; y = (d - c) / m
		printf "# replay bookkeeping: %+.1f instructions per message (%+.2f%%)\n", y - x, 100 * (y - x) / x }'
done
