#!/bin/sh
# fuzz.sh -- a longer libFuzzer session on one fuzz target, its new finds
# merged into the tree's corpus
#
# usage: tools/fuzz.sh [-b BUILD_DIR] [-j JOBS] [-n] TARGET [SECONDS]
#        tools/fuzz.sh [-b BUILD_DIR] -m TARGET
#        tools/fuzz.sh [-b BUILD_DIR] -l
#
#   TARGET      a name in FUZZ_TARGETS (tests/fuzz.am); -l lists them
#   SECONDS     length of the session (default 600)
#   -b DIR      a configured build tree (default: _build at the top of the
#               tree) whose configure found clang with libFuzzer
#   -j JOBS     fuzz in JOBS processes (libFuzzer -fork)
#   -n          do not merge: the finds stay in the work directory
#   -m          minimize tests/fuzz/corpus/TARGET instead: keep the inputs
#               that reach new coverage (the hand-written seeds of
#               tests/fuzz/mkcorpus.sh may go; run it again to keep them)
#
# The session reads the tree's corpus and writes into
# BUILD_DIR/tests/fuzzbin/work/TARGET; then the inputs that add coverage
# are merged into tests/fuzz/corpus/TARGET (commit them).  A crash stops
# the session: its input is kept in BUILD_DIR/tests/fuzzbin/crashes/TARGET/
# and the script exits 1; `BUILD_DIR/tests/fuzzbin/TARGET-fuzzer FILE`
# reproduces it, `... -minimize_crash=1 -runs=10000 FILE` shrinks it.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/_build
jobs=1
merge=1
minimize=0
list=0
while getopts b:j:nml opt; do
	case $opt in
	b) build=$(cd "$OPTARG" && pwd) ;;
	j) jobs=$OPTARG ;;
	n) merge=0 ;;
	m) minimize=1 ;;
	l) list=1 ;;
	*) sed -n '4,6s/^# //p' "$0" >&2 && exit 2 ;;
	esac
done
shift $((OPTIND - 1))

[ -f "$build/Makefile" ] || {
	echo "fuzz.sh: $build is not a configured build tree (scripts/setup.sh $build)" >&2
	exit 2
}
make -C "$build" -s tests/fuzzbin/stamp
bin=$build/tests/fuzzbin
if [ "$list" = 1 ]; then
	cat "$bin/targets"
	exit 0
fi
[ $# -ge 1 ] || {
	sed -n '4,6s/^# //p' "$0" >&2
	exit 2
}
t=$1
secs=${2:-600}
grep -qx "$t" "$bin/targets" || {
	echo "fuzz.sh: no target $t; there are: $(tr '\n' ' ' <"$bin/targets")" >&2
	exit 2
}
fuzzer=$bin/$t-fuzzer
[ -x "$fuzzer" ] || {
	echo "fuzz.sh: no libFuzzer build: $(cat "$bin/skip")" >&2
	exit 2
}
corpus=$top/tests/fuzz/corpus/$t
mkdir -p "$corpus"

if [ "$minimize" = 1 ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	"$fuzzer" -merge=1 "$tmp" "$corpus"
	before=$(find "$corpus" -type f | wc -l)
	find "$corpus" -type f -exec rm -f {} +
	cp "$tmp"/* "$corpus"/
	echo "fuzz.sh: $t: $before inputs minimized to $(find "$corpus" -type f | wc -l)"
	exit 0
fi

work=$bin/work/$t
crashes=$bin/crashes/$t
mkdir -p "$work" "$crashes"
fork=
[ "$jobs" -le 1 ] || fork=-fork=$jobs
status=0
# shellcheck disable=SC2086 # $fork is empty or one word
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
	-print_final_stats=1 -artifact_prefix="$crashes/" $fork \
	"$work" "$corpus" || status=$?
if [ "$status" -ne 0 ]; then
	echo "fuzz.sh: $t: crash (status $status), inputs in $crashes:" >&2
	ls -l "$crashes" >&2
	exit 1
fi
if [ "$merge" = 1 ]; then
	before=$(find "$corpus" -type f | wc -l)
	"$fuzzer" -merge=1 "$corpus" "$work" 2>"$bin/work/$t.merge.log"
	echo "fuzz.sh: $t: corpus $before -> $(find "$corpus" -type f | wc -l) inputs (tests/fuzz/corpus/$t)"
fi
