#!/bin/sh
# soft_pingpong-insns.sh -- instructions per message of softrdma builds,
# side by side, under callgrind: tools/soft_pingpong (one process, two RC
# QPs, 8-byte SEND ping-pong) compiled once against each library given,
# run at -n N and -n 2N; the cost per message is the difference of the two
# instruction counts divided by the 2N extra messages (set-up and teardown
# cancel out).  Instruction counts do not depend on the machine's load.
#
# Usage: tools/soft_pingpong-insns.sh [-n N] [-1] [-T] [-w W] [-b BUILDDIR] LIBSOFTRDMA.so...
#   -n N        the smaller run's iterations (default 10000; 2N messages)
#   -1          both QPs on one context (soft_pingpong -1)
#   -T          the single-thread hints (soft_pingpong -T)
#   -w W        stream one way, W messages in flight (soft_pingpong -w W)
#   -b BUILDDIR where config.h is (default: the current directory)
# Example, the commit before issue 11 against this tree:
#   mkdir /tmp/base && git archive c36f5a6 | tar -x -C /tmp/base &&
#   (cd /tmp/base && autoreconf -fi && mkdir b && cd b && ../configure &&
#     make soft/libsoftrdma.la)
#   tools/soft_pingpong-insns.sh -b _build \
#     /tmp/base/b/soft/.libs/libsoftrdma.so _build/soft/.libs/libsoftrdma.so
set -eu

n=10000
one=
hints=
win=
builddir=.
while getopts n:1Tw:b: opt; do
	case $opt in
	n) n=$OPTARG ;;
	1) one=-1 ;;
	T) hints=-T ;;
	w) win="-w $OPTARG" ;;
	b) builddir=$OPTARG ;;
	*) sed -n '9,15s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { sed -n '9,15s/^# \{0,1\}//p' "$0"; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind missing" >&2; exit 1; }
src=$(cd "$(dirname "$0")" && pwd)/soft_pingpong.c
[ -f "$builddir/config.h" ] || { echo "no $builddir/config.h" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# insns BIN ITERS -- instructions callgrind collected for one run
insns() {
	valgrind --tool=callgrind --callgrind-out-file=/dev/null "$1" -n "$2" \
		$one $hints $win 2>&1 >/dev/null | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

echo "# soft_pingpong-insns: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# -n $n and -n $((2 * n)) ${one:+(one context)} ${hints:+(hints)} ${win:+(stream $win)}; per message = difference / $((2 * n)) messages"
printf '%-60s %14s %14s %10s\n' library "I(n=$n)" "I(n=$((2 * n)))" insn/msg
i=0
for lib in "$@"; do
	i=$((i + 1))
	dir=$(cd "$(dirname "$lib")" && pwd)
	cc -O2 -I"$builddir" -o "$tmp/pp$i" "$src" "$dir/$(basename "$lib")" \
		-Wl,-rpath,"$dir" -lpthread
	a=$(insns "$tmp/pp$i" "$n")
	b=$(insns "$tmp/pp$i" $((2 * n)))
	printf '%-60s %14s %14s %10s\n' "$lib" "$a" "$b" \
		"$(awk -v a="$a" -v b="$b" -v m=$((2 * n)) 'BEGIN { printf "%.1f", (b - a) / m }')"
done
