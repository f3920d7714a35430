#!/bin/sh
# fuzz.sh -- every fuzz target (tests/fuzz.am) takes its corpus and every
# prefix and one-byte change of it cleanly (replay driver, under valgrind
# with RDMAMSG_TEST_VALGRIND=1), and a short libFuzzer session finds
# nothing (when configure found clang with libFuzzer).
#
# The libFuzzer sessions are reproducible: a fixed seed and a fixed
# number of runs, so that every run of the suite tries the same inputs in
# the same order (a verdict that changed from run to run would say more
# about luck than about the change).  Exploring is tools/fuzz.sh's job:
# longer sessions with libFuzzer's own seed, finds merged into the corpus.
#
# RDMAMSG_FUZZ_SEED: libFuzzer's seed (default 1; 0: libFuzzer picks one)
# RDMAMSG_FUZZ_RUNS: inputs per target (default 300,000)
# RDMAMSG_FUZZ_SECONDS: at most this many seconds per target, whichever
# comes first (default: 60 shared by the targets, 5 to 20 each; a loaded
# machine then tries the same inputs, fewer of them).  A crash is kept in
# tests/fuzzbin/crashes/NAME/ of the build tree.
. "$top_srcdir/tests/lib.sh"

bin=$top_builddir/tests/fuzzbin
[ -f "$bin/targets" ] || skip_all "fuzz targets not built (make check builds them)"
targets=$(cat "$bin/targets")
n=$(echo $targets | wc -w)
[ "$n" -gt 0 ] || skip_all "no fuzz target in FUZZ_TARGETS"
secs=${RDMAMSG_FUZZ_SECONDS:-}
if [ -z "$secs" ]; then
	secs=$((60 / n))
	[ "$secs" -ge 5 ] || secs=5
	[ "$secs" -le 20 ] || secs=20
fi
seed=${RDMAMSG_FUZZ_SEED:-1}
runs=${RDMAMSG_FUZZ_RUNS:-300000}

# Our own sanitizer settings, not lib.sh's for third-party programs: leaks
# count here.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
UBSAN_OPTIONS=print_stacktrace=1
export ASAN_OPTIONS UBSAN_OPTIONS

# valgrind only for a replay driver without sanitizers: the two do not mix
vg=
how=
if [ "${RDMAMSG_TEST_VALGRIND:-0}" = 1 ] && [ -n "${VALGRIND:-}" ]; then
	if [ -n "${SAN_PRELOAD:-}" ]; then
		diag "sanitizer build: the replay runs under ASan, not valgrind"
	else
		vg=$(valgrind_cmd)
		how=" under valgrind"
	fi
fi

# show_input FILE -- a crashing input, in hex, into the TAP stream
show_input() {
	diag "input $(basename "$1") ($(wc -c <"$1") bytes):"
	od -An -tx1 -v "$1" | head -n 16 | sed 's/^/#   /'
}

# The harness itself: a crash fails it (the canary target aborts on input
# starting with "FUZZ"), and the driver names the input.
mkdir -p "$tap_tmp/canary.ok" "$tap_tmp/canary.bad" "$tap_tmp/canary.new" \
	"$tap_tmp/canary.crash"
printf 'FUZ' >"$tap_tmp/canary.ok/fuz"
printf 'FUZZ!' >"$tap_tmp/canary.bad/fuzz"
# shellcheck disable=SC2086
$vg "$bin/canary-replay" -m "$tap_tmp/canary.ok" >"$tap_tmp/canary.log" 2>&1
ok $? "replay: the canary takes its variants of FUZ$how"
show_log "$tap_tmp/canary.log"
# shellcheck disable=SC2086
$vg "$bin/canary-replay" -m "$tap_tmp/canary.ok" "$tap_tmp/canary.bad" \
	>"$tap_tmp/canary.log" 2>&1
st=$?
test $st -ne 0 && grep -q "stopped at .*canary.bad/fuzz" "$tap_tmp/canary.log"
ok $? "replay: the canary's crash fails (status $st) and names its input$how"
show_log "$tap_tmp/canary.log"
if [ -x "$bin/canary-fuzzer" ]; then
	"$bin/canary-fuzzer" -max_total_time=60 -timeout=10 \
		-artifact_prefix="$tap_tmp/canary.crash/" "$tap_tmp/canary.new" \
		>"$tap_tmp/canary.log" 2>&1
	st=$?
	test $st -ne 0 && head -c 4 "$tap_tmp/canary.crash"/crash-* 2>/dev/null |
		grep -q '^FUZZ'
	ok $? "libFuzzer: finds the canary's crash (status $st)"
	[ $? -eq 0 ] || show_log "$tap_tmp/canary.log"
else
	skip "libFuzzer: finds the canary's crash" "$(cat "$bin/skip")"
fi

for t in $targets; do
	corpus=$top_srcdir/tests/fuzz/corpus/$t
	count=$(find "$corpus" -type f 2>/dev/null | wc -l)
	test "$count" -gt 0
	ok $? "$t: tests/fuzz/corpus/$t has seed inputs ($count)"

	# shellcheck disable=SC2086 # $vg is a command line
	$vg "$bin/$t-replay" -m "$corpus" >"$tap_tmp/$t.replay" 2>&1
	st=$?
	ok $st "$t: the corpus and its variants replay cleanly$how"
	if [ $st -eq 0 ]; then
		diag "$(tail -n 1 "$tap_tmp/$t.replay")"
	else
		show_log "$tap_tmp/$t.replay"
	fi

	if [ ! -x "$bin/$t-fuzzer" ]; then
		skip "$t: libFuzzer session" "$(cat "$bin/skip")"
		continue
	fi
	# New inputs go to a scratch directory, never into the tree.
	mkdir -p "$tap_tmp/$t.new" "$tap_tmp/$t.crash"
	"$bin/$t-fuzzer" -seed="$seed" -runs="$runs" -reload=0 \
		-max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$tap_tmp/$t.crash/" \
		"$tap_tmp/$t.new" "$corpus" >"$tap_tmp/$t.fuzz" 2>&1
	st=$?
	ran=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tap_tmp/$t.fuzz")
	ok $st "$t: libFuzzer (seed $seed, at most $runs runs or $secs s) finds nothing (${ran:-?} runs)"
	if [ $st -ne 0 ]; then
		grep -m 1 '^INFO: Seed:' "$tap_tmp/$t.fuzz" | sed 's/^/# /'
		show_log "$tap_tmp/$t.fuzz"
		mkdir -p "$bin/crashes/$t"
		for f in "$tap_tmp/$t.crash"/*; do
			[ -f "$f" ] || continue
			show_input "$f"
			cp "$f" "$bin/crashes/$t/"
			diag "kept as tests/fuzzbin/crashes/$t/$(basename "$f"): reproduce with $bin/$t-fuzzer FILE"
		done
	fi
done
done_testing
