#!/bin/bash
# bench-rdmamsg.sh -- rdmamsg (tools/rdmamsg_perf) side by side with raw
# verbs on the same fabric (perftest on softrdma, LD_PRELOADed) and UCX.
#
# Usage: tools/bench-rdmamsg.sh [-b BUILDDIR] [-q] [-r ROUNDS] [-W WINDOW] [-C] [-P CPU0,CPU1] [-F LIMIT] [--plot FILE] [-- RDMAMSG_PERF_OPTS...]
#   --plot FILE  instead of the table: sweep message sizes 8 B to 4 MiB and
#                draw latency and bandwidth against size for rdmamsg, raw
#                verbs and UCX into FILE (.svg or .png) with gnuplot (Debian
#                package gnuplot-nox); the data go to FILE.dat
#   -b BUILDDIR  build tree holding tools/rdmamsg_perf and
#                soft/.libs/libsoftrdma.so (default: the current directory
#                if it has them, else the source tree next to this script)
#   -q           quick run: a tenth of the iterations
#   -r ROUNDS    measure everything ROUNDS times, report medians (default 3)
#   -F LIMIT     a round whose cache-line floor (at its start or its end)
#                is above LIMIT us is dropped, every peer's values of it,
#                and measured again, up to ROUNDS times in all; the
#                dropped rounds' floors are printed (a VM whose two CPUs
#                move apart for minutes at a time, as this one's, 0.025
#                to 0.19 us: -F 0.05); a spell that is over by the
#                round's end goes unseen
#   -W WINDOW    bandwidth and rate rows: every side keeps at most WINDOW
#                messages outstanding (rdmamsg_perf --window, ib_send_bw -t,
#                ucx_perftest -O); default 128, perftest's tx depth;
#                0: each side's own default
#   -C           no counts: without it, after the timed rounds every peer's
#                runs of the main rows go once more at N and 2N under perf
#                stat (strace -f -c without perf's tracepoints), and a table
#                next to the times gives system calls and context switches
#                per message, both sides added up (tools/bench-syscalls.sh
#                gives rdmamsg's alone for any test and size)
#   -P CPU0,CPU1 every server on CPU0, every client on CPU1 (taskset), the
#                cache-line and 64 KiB floors between the same two: on a
#                machine of many CPUs, each run crosses the same cores
#                (default: the scheduler's choice; BENCH_CPUS as -P)
#   RDMAMSG_PERF_OPTS  options for both rdmamsg_perf sides (default --busy,
#                like perftest); a separate row always compares blocking
#                modes: rdmamsg_perf --fd with ib_send_lat -e
#
# Server and client are two processes on this host over 127.0.0.1; rdmamsg
# runs on softrdma (RDMAMSG_FABRIC=soft).  Prints medians and the ratios
# rdmamsg/verbs (the library's cost over raw verbs on the same fabric) and
# rdmamsg/UCX from this one run.  A missing or failing peer prints "n/a";
# the script exits 0 anyway.
#
# Environment: SOFTRDMA_LIB, BENCH_TIMEOUT (seconds per run, default 120),
# BENCH_CPUS (as -P), BENCH_SCALE (iteration multiplier), BENCH_UCX_TLS
# (UCX_TLS of every UCX row, default posix,cma: shared memory plus
# cross-memory attach, UCX's best on one host).
set -u

utls=${BENCH_UCX_TLS:-posix,cma}
builddir=
scale=${BENCH_SCALE:-1}
rounds=3
win=128
counts=1
plot=
flimit=
# --plot FILE (getopts knows no long options): taken out before it runs
args=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	case $1 in
	--plot) [ $# -ge 2 ] || { echo "bench-rdmamsg.sh: --plot needs a FILE" >&2; exit 2; }
		plot=$2; shift 2 ;;
	--plot=*) plot=${1#--plot=}; shift ;;
	*) args+=("$1"); shift ;;
	esac
done
set -- "${args[@]}" "$@"
if [ -n "$plot" ]; then
	case $plot in
	*.svg) term="svg size 960,420 dynamic font 'sans,11'" ;;
	*.png) term="pngcairo size 1280,560 font 'sans,10'" ;;
	*) echo "bench-rdmamsg.sh: --plot FILE must end in .svg or .png" >&2; exit 2 ;;
	esac
	if ! command -v gnuplot >/dev/null 2>&1; then
		echo "bench-rdmamsg.sh: --plot needs gnuplot, which is not installed." >&2
		echo "  Debian/Ubuntu: apt-get install gnuplot-nox   (Fedora: dnf install gnuplot)" >&2
		exit 2
	fi
fi
while getopts b:qr:W:CP:F: opt; do
	case $opt in
	b) builddir=$OPTARG ;;
	q) scale=0.1 ;;
	r) rounds=$OPTARG ;;
	W) win=$OPTARG ;;
	C) counts=0 ;;
	P) export BENCH_CPUS=$OPTARG ;;
	F) flimit=$OPTARG ;;
	*) sed -n '2,45s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
case $win in
'' | *[!0-9]*) echo "bench-rdmamsg.sh: -W WINDOW must be a number" >&2; exit 2 ;;
esac
case $flimit in
*[!0-9.]* | *.*.* | .) echo "bench-rdmamsg.sh: -F LIMIT must be a number of us (e.g. 0.05)" >&2; exit 2 ;;
esac
# the outstanding window for bw/rate rows, one option per peer (none: 0)
rmp_win=() pt_win=() ucx_win=()
[ "$win" -gt 0 ] && rmp_win=(--window "$win") pt_win=(-t "$win") ucx_win=(-O "$win")
rmp_opts=("$@")
# perftest busy-polls; so does rdmamsg here unless told otherwise
[ ${#rmp_opts[@]} -gt 0 ] || rmp_opts=(--busy)

bench_name=rdmamsg
# shellcheck source=tools/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"

perf=$builddir/tools/rdmamsg_perf
[ -x "$perf" ] || echo "# $perf not built: rdmamsg columns are n/a" >&2
export RDMAMSG_FABRIC=soft RDMAMSG_SOFTRDMA_PATH=$lib

# rmp RESULTVAR TEST SIZE COL ITERS [OPTS...] -- one rdmamsg_perf run (OPTS
# for both sides, default RDMAMSG_PERF_OPTS), column COL of the SIZE row
# (lat: size iters median avg p99; bw: size iters MB/s Gb/s; rate: size
# iters msgs/s Mmsgs/s)
rmp() {
	local var=$1 test=$2 size=$3 col=$4 n=$5 port v=n/a
	local -a o=("${@:6}") w=()
	[ ${#o[@]} -gt 0 ] || o=("${rmp_opts[@]}")
	[ "$test" = lat ] || w=("${rmp_win[@]}") # the client's window
	if [ -x "$perf" ] && [ -e "$lib" ]; then
		port=$(free_port)
		if pair "rmp-$test-$size" "$port" \
			"$perf" -s -p "$port" "${o[@]}" -- \
			"$perf" -c 127.0.0.1 -p "$port" -t "$test" --size "$size" -n "$n" "${o[@]}" "${w[@]}"; then
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
echo "# bw/rate window: ${rmp_win[*]:-none} | ib_send_bw ${pt_win[*]:-(default)} | ucx_perftest ${ucx_win[*]:-(default)}; UCX_TLS=$utls"
if [ -n "$pin" ]; then
	echo "# CPUs: servers on ${pin%,*}, clients on ${pin#*,} (taskset), the floors between the two"
else
	echo "# CPUs: the scheduler's choice"
fi

cl=$builddir/tools/cacheline_pingpong
cp=$builddir/tools/copy_pingpong
# the floors between -P's two CPUs (both tools' -c CPU0,CPU1)
floor_cpus=()
[ -z "$pin" ] || floor_cpus=(-c "$pin")
# floor -- the two-process cache-line ping-pong, us: the floor of any
# latency here (n/a without the tool)
floor() {
	local v=n/a
	[ -x "$cl" ] && v=$("$cl" -n "$(iters 200000)" -b 100 "${floor_cpus[@]}" 2>/dev/null | awk '$1 == "cacheline" { print $3 }')
	echo "${v:-n/a}"
}

# med_of NAME -- med of the values in array NAME (n/a: none, or no array)
med_of() {
	local -n __m=$1
	if [ -n "${__m+x}" ]; then med "${__m[@]}"; else echo n/a; fi
}

# slow FLOOR... -- with -F, is any FLOOR (us) above the limit?  A floor
# that could not be measured (n/a) is not
slow() {
	[ -n "$flimit" ] || return 1
	awk -v l="$flimit" 'BEGIN { for (i = 1; i < ARGC; i++) if (ARGV[i] ~ /^[0-9.]+$/ && ARGV[i] + 0 > l + 0) exit 0; exit 1 }' "$@"
}

# drop_last ARRAY... -- remove each ARRAY's last value (a dropped round's;
# an ARRAY that holds none, or does not exist, is left alone)
drop_last() {
	local __n
	for __n in "$@"; do
		local -n __d=$__n
		[ -z "${__d+x}" ] || [ "${#__d[@]}" -eq 0 ] ||
			unset "__d[$((${#__d[@]} - 1))]"
		unset -n __d
	done
}

# redo_round START END ARRAY... -- -F: the round just measured, whose
# cache-line floors were START and END (us), goes again when either is
# slow and fewer than ROUNDS were redone: its floors noted in DROPPED,
# every ARRAY's last value dropped, round and redone (the caller's) moved
# on; 1 (nothing done) otherwise
redo_round() {
	[ "$redone" -lt "$rounds" ] && slow "$1" "$2" || return 1
	DROPPED+=("$1/$2")
	echo "# round $round on slow lines (floor $1/$2 us): again" >&2
	drop_last "${@:3}"
	redone=$((redone + 1)) round=$((round - 1))
}

# plot_sweep -- --plot: latency and bandwidth from 8 B to 4 MiB, the median
# of the rounds at each size, into $plot.dat and $plot.  Each round passes
# over every size (not every round of one size, then the next): a machine
# that changes speed for a while (this VM's cores, minutes apart) then
# moves one round of each size, which the median leaves out, rather than
# every round of a few sizes
plot_sweep() {
	local dat=$plot.dat sz n nb when round m
	local -a sizes=(8 64 512 4096 32768 262144 1048576 4194304) cols=() floors=() ends=() DROPPED=() drop=(floors ends)
	local redone=0
	when="$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
	for sz in "${sizes[@]}"; do
		for m in RL SL UL AL RB SB UB AB NL NB; do
			drop+=("${m}_$sz")
		done
	done
	round=0
	while [ "$round" -lt "$rounds" ]; do
		round=$((round + 1))
		floors+=("$(floor)")
		for sz in "${sizes[@]}"; do
			# fewer iterations as messages grow: about the same
			# time each
			n=2000 nb=20000
			[ "$sz" -gt 4096 ] && n=500 nb=5000
			[ "$sz" -gt 262144 ] && n=100 nb=500
			echo "# $sz B, round $round/$rounds" >&2
			acc "RL_$sz" rmp lat "$sz" 3 "$(iters $n)"
			acc "SL_$sz" perftest ib_send_lat "$sz" 5 -n "$(iters $n)"
			acc "UL_$sz" ucx "$utls" tag_lat "$sz" 3 "$(iters $((n * 5)))"
			acc "AL_$sz" ucx "$utls" ucp_am_lat "$sz" 3 "$(iters $((n * 5)))"
			acc "RB_$sz" rmp bw "$sz" 3 "$(iters $nb)"
			acc "SB_$sz" perftest ib_send_bw "$sz" 4 -n "$(iters $nb)" "${pt_win[@]}"
			acc "UB_$sz" ucx "$utls" tag_bw "$sz" 6 "$(iters $nb)"
			acc "AB_$sz" ucx "$utls" ucp_am_bw "$sz" 6 "$(iters $nb)"
			# rdmamsg_send_nocopy() from rdmamsg_mr_alloc()'s
			# memory, UCX's contract: above the rendezvous
			# threshold only (below it, it copies as the above)
			[ "$sz" -ge 32768 ] || continue
			acc "NL_$sz" rmp lat "$sz" 3 "$(iters $n)" "${rmp_opts[@]}" --nocopy
			acc "NB_$sz" rmp bw "$sz" 3 "$(iters $nb)" "${rmp_opts[@]}" --nocopy
		done
		[ -n "$flimit" ] || continue
		ends+=("$(floor)")
		# -F: as the table's rounds
		redo_round "${floors[-1]}" "${ends[-1]}" "${drop[@]}" || true
	done
	{
		echo "# bench-rdmamsg.sh --plot: $when; medians of $rounds rounds, each over every size; cache-line floor at each round's start, us: ${floors[*]}${flimit:+; at its end: ${ends[*]}; -F $flimit, rounds dropped and measured again (start/end): ${DROPPED[*]:-none}}"
		echo "# size lat_rdmamsg lat_verbs lat_ucx_tag (us, one-way) bw_rdmamsg bw_verbs bw_ucx_tag (MiB/s) lat_ucx_am bw_ucx_am lat_rdmamsg_nocopy bw_rdmamsg_nocopy; UCX_TLS=$utls"
	} >"$dat"
	for sz in "${sizes[@]}"; do
		cols=()
		for m in RL SL UL RB SB UB AL AB NL NB; do
			cols+=("$(med_of "${m}_$sz")")
		done
		# rdmamsg_perf's bandwidth is MB/s, the plot's MiB/s
		cols[3]=$(scale_v "${cols[3]}" "$(awk 'BEGIN { print 1e6 / 1048576 }')")
		cols[9]=$(scale_v "${cols[9]}" "$(awk 'BEGIN { print 1e6 / 1048576 }')")
		echo "$sz ${cols[*]}" >>"$dat"
	done
	cat "$dat"
	gnuplot <<-EOF
		set terminal $term
		set output '$plot'
		set datafile missing 'n/a'
		set logscale xy
		set grid
		set key top left
		set xlabel 'message size (bytes)'
		set xtics ('8' 8, '64' 64, '512' 512, '4K' 4096, '32K' 32768, '256K' 262144, '1M' 1048576, '4M' 4194304)
		set multiplot layout 1,2 title "rdmamsg vs raw verbs vs UCX, two processes on one host ($when)" font ',10'
		set ylabel 'one-way latency (us), lower is better'
		plot '$dat' using 1:2 with linespoints lw 2 title 'rdmamsg (softrdma)', \
		     '' using 1:10 with linespoints lw 2 title 'rdmamsg nocopy (rdmamsg\_mr\_alloc)', \
		     '' using 1:3 with linespoints title 'raw verbs (softrdma, perftest)', \
		     '' using 1:4 with linespoints title 'UCX tag (ucx\_perftest tag\_lat, $utls)', \
		     '' using 1:8 with linespoints title 'UCX am (ucp\_am\_lat, $utls)'
		set ylabel 'bandwidth (MiB/s), higher is better'
		set key bottom right
		plot '$dat' using 1:5 with linespoints lw 2 title 'rdmamsg (softrdma)', \
		     '' using 1:11 with linespoints lw 2 title 'rdmamsg nocopy (rdmamsg\_mr\_alloc)', \
		     '' using 1:6 with linespoints title 'raw verbs (softrdma, perftest)', \
		     '' using 1:7 with linespoints title 'UCX tag (ucx\_perftest tag\_bw, $utls)', \
		     '' using 1:9 with linespoints title 'UCX am (ucp\_am\_bw, $utls)'
		unset multiplot
	EOF
	echo "# plot: $plot (data: $dat)"
}
if [ -n "$plot" ]; then
	plot_sweep
	exit 0
fi

# RUNS: a round's runs of the table, in order, "ARRAY|ITERS|FUNC ARGS...":
# acc ARRAY FUNC ARGS with @N@ the iteration count (ITERS, scaled by -q and
# BENCH_SCALE); the counts below run the same FUNC ARGS again (COUNTED)
RUNS=()
# one-way latency (half round trip), median, us
for sz in 8 4096 65536; do
	n=10000
	[ "$sz" -gt 4096 ] && n=2000
	RUNS+=("R_lat_$sz|$n|rmp lat $sz 3 @N@ ${rmp_opts[*]}"
		"S_lat_$sz|$n|perftest ib_send_lat $sz 5 -n @N@"
		"U_lat_$sz|$((n * 5))|ucx $utls tag_lat $sz 3 @N@"
		"A_lat_$sz|$((n * 5))|ucx $utls ucp_am_lat $sz 3 @N@")
	# zero-copy: the caller fills a pool buffer and hands it over
	# (rdmamsg_send_buf), as UCX sends from the caller's memory
	[ "$sz" -gt 8 ] &&
		RUNS+=("Z_lat_$sz|$n|rmp lat $sz 3 @N@ ${rmp_opts[*]} --zcopy")
	# no copy: both sides send from one registered buffer of their own
	# that the library made (rdmamsg_mr_alloc, rdmamsg_send_nocopy), as
	# ucx_perftest's two sides send from one that
	# ucp_mem_map(UCP_MEM_MAP_ALLOCATE) made; at 4 KiB, below the
	# rendezvous threshold, rdmamsg_send_nocopy() copies as
	# rdmamsg_send() does, and the row differs from the copied one only
	# in the server's reply: from its buffer, as ucx_perftest's, not the
	# message it got (which it then reads, as ucp_am_lat's never does)
	[ "$sz" -gt 8 ] &&
		RUNS+=("N_lat_$sz|$n|rmp lat $sz 3 @N@ ${rmp_opts[*]} --nocopy")
done
RUNS+=(
	# blocking: sleep in poll()/ibv_get_cq_event between messages
	"R_ev|2000|rmp lat 8 3 @N@ --fd"
	"S_ev|2000|perftest ib_send_lat 8 5 -n @N@ -e"
	# bandwidth 64 KiB (rdmamsg_perf prints MB/s = 10^6 B/s; converted
	# below)
	"R_bw|5000|rmp bw 65536 3 @N@ ${rmp_opts[*]}"
	"Z_bw|5000|rmp bw 65536 3 @N@ ${rmp_opts[*]} --zcopy"
	"N_bw|5000|rmp bw 65536 3 @N@ ${rmp_opts[*]} --nocopy"
	"S_bw|5000|perftest ib_send_bw 65536 4 -n @N@ ${pt_win[*]}"
	"U_bw|10000|ucx $utls tag_bw 65536 6 @N@"
	"A_bw|10000|ucx $utls ucp_am_bw 65536 6 @N@"
	# bandwidth 1 MiB, copied and from one registered buffer
	"R_bw1m|1000|rmp bw 1048576 3 @N@ ${rmp_opts[*]}"
	"N_bw1m|1000|rmp bw 1048576 3 @N@ ${rmp_opts[*]} --nocopy"
	"S_bw1m|1000|perftest ib_send_bw 1048576 4 -n @N@ ${pt_win[*]}"
	"U_bw1m|2000|ucx $utls tag_bw 1048576 6 @N@"
	"A_bw1m|2000|ucx $utls ucp_am_bw 1048576 6 @N@"
	# message rate 8 B (UCX prints msg/s): the same count for every peer,
	# and enough that a start-up of some ms (perftest's first posts: 3-24
	# ms seen here) does not weigh on a run of 100,000 (4 ms at 24 M/s)
	"R_mr|1000000|rmp rate 8 4 @N@ ${rmp_opts[*]}"
	"S_mr|1000000|perftest ib_send_bw 8 5 -n @N@ ${pt_win[*]}"
	"U_mr|1000000|ucx $utls tag_bw 8 8 @N@"
	"A_mr|1000000|ucx $utls ucp_am_bw 8 8 @N@"
)

# One round measures every metric once, rdmamsg, verbs and UCX back to back
# so that drift on this shared machine hits all three; the table shows the
# median of the rounds.  Every UCX row uses the same transports ($utls);
# UCX is measured twice: tag matching (tag_lat/tag_bw, the receive copies
# into the posted buffer) and active messages (ucp_am_lat/ucp_am_bw, a
# callback that may read the data in place, as rdmamsg's on_recv does).
round=0 redone=0 DROPPED=() drop=(LOAD FLOOR FLOOR_END MOVED)
for r in "${RUNS[@]}"; do drop+=("${r%%|*}"); done
while [ "$round" -lt "$rounds" ]; do
	round=$((round + 1))
	echo "# round $round/$rounds" >&2
	LOAD+=("$(cut -d' ' -f1 /proc/loadavg)")
	FLOOR+=("$(floor)")
	# 64 KiB between the two cores: written by the sender each time,
	# through a ring (what moving fresh bytes costs), and never written,
	# read with process_vm_readv (what perftest's and UCX's unchanged
	# buffers cost: the reader's cached lines stay valid)
	v=n/a w=n/a
	if [ -x "$cp" ]; then
		v=$("$cp" -m ring -s 65536 -f -n "$(iters 20000)" "${floor_cpus[@]}" 2>/dev/null | awk '$1 == "copy" { print $6 }')
		w=$("$cp" -m pvr -s 65536 -n "$(iters 20000)" "${floor_cpus[@]}" 2>/dev/null | awk '$1 == "copy" { print $6 }')
	fi
	MOVED+=("${v:-n/a}/${w:-n/a}")
	for r in "${RUNS[@]}"; do
		IFS='|' read -r a n spec <<<"$r"
		# shellcheck disable=SC2086 # the words of one run
		acc "$a" ${spec//@N@/$(iters "$n")}
	done
	# again at the round's end: a VM may move its CPUs apart (or
	# together) under a round, and every copy between them with them
	FLOOR_END+=("$(floor)")
	# -F: a round on slow lines goes again, every peer's values of it
	# dropped alike (at most ROUNDS times in all)
	redo_round "${FLOOR[-1]}" "${FLOOR_END[-1]}" "${drop[@]}" || true
done

# per_msg VAR N FUNC ARGS... -- system calls and context switches per
# message of one peer (FUNC: rmp, perftest, ucx; the word @N@ in ARGS is
# the iteration count, a latency test's round trip counting as one):
# FUNC at N and 2N iterations under the counter, (count(2N) - count(N)) /
# N each, "SYSCALLS/CTXSW" into VAR; n/a when a run fails (its locals
# start with __: VAR is the caller's)
per_msg() {
	local __var=$1 __n=$2 __fn=$3 __w __v __a __b
	shift 3
	local -a __one=() __two=()
	for __w in "$@"; do __one+=("${__w//@N@/$__n}") __two+=("${__w//@N@/$((2 * __n))}"); done
	printf -v "$__var" n/a
	last_pair=
	"$__fn" __v "${__one[@]}"
	[ "$__v" != n/a ] && [ -n "$last_pair" ] && __a=$(pair_counts "$last_pair") || return 0
	last_pair=
	"$__fn" __v "${__two[@]}"
	[ "$__v" != n/a ] && [ -n "$last_pair" ] && __b=$(pair_counts "$last_pair") || return 0
	printf -v "$__var" %s "$(awk -v a="$__a" -v b="$__b" -v d="$__n" 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		printf "%.3f/%.3f", (y[1] - x[1]) / d, (y[2] - x[2]) / d }')"
}

# run_of ARRAY -- the FUNC ARGS of ARRAY's run in RUNS
run_of() {
	local r
	for r in "${RUNS[@]}"; do
		[ "${r%%|*}" = "$1" ] && { echo "${r#*|*|}"; return; }
	done
}

# The counts: the main rows' runs (RUNS) once more at N and 2N,
# rdmamsg_perf with a fixed warm-up (its default grows with N).  COUNTED:
# "label|N|rdmamsg verbs UCX", the arrays whose runs count (- none)
COUNTED=(
	"latency 8 B|4000|R_lat_8 S_lat_8 U_lat_8"
	"latency 4096 B|4000|R_lat_4096 S_lat_4096 U_lat_4096"
	"latency 65536 B|1000|R_lat_65536 S_lat_65536 U_lat_65536"
	"latency 8 B, blocking|2000|R_ev S_ev -"
	"bandwidth 64 KiB|2000|R_bw S_bw U_bw"
	"message rate 8 B|200000|R_mr S_mr U_mr"
	"bandwidth 1 MiB|300|R_bw1m S_bw1m U_bw1m"
)
COUNTS=()
if [ "$counts" = 1 ]; then
	if count_init; then
		echo "# counts: $counter" >&2
		count_on=1
		for c in "${COUNTED[@]}"; do
			IFS='|' read -r label n arrs <<<"$c"
			row=$label
			for a in $arrs; do
				x=n/a
				if [ "$a" != - ]; then
					spec=$(run_of "$a")
					[ "${spec%% *}" = rmp ] && spec+=" -w 100"
					# shellcheck disable=SC2086 # the words of one run
					per_msg x "$(iters "$n")" $spec
				fi
				row+="|$x"
			done
			COUNTS+=("$row")
		done
		count_on=0
	else
		echo "# counts: neither perf (with tracepoints) nor strace; not counted" >&2
	fi
fi

# scale_all FACTOR ARRAY... -- multiply every numeric value of the arrays
scale_all() {
	local f=$1 i
	shift
	while [ $# -gt 0 ]; do
		local -n arr=$1
		for i in "${!arr[@]}"; do arr[i]=$(scale_v "${arr[i]}" "$f"); done
		unset -n arr
		shift
	done
}
# rdmamsg_perf prints MB/s (10^6 B/s), UCX msg/s: to MiB/s and M msg/s
scale_all "$(awk 'BEGIN { print 1e6 / 1048576 }')" R_bw Z_bw N_bw R_bw1m N_bw1m
scale_all 0.000001 U_mr A_mr
echo "# rounds load: ${LOAD[*]}"
echo "# rounds cache-line floor, us: ${FLOOR[*]}"
echo "# rounds cache-line floor at their end, us: ${FLOOR_END[*]}"
[ -z "$flimit" ] || echo "# -F $flimit: rounds dropped and measured again (floor at start/end, us): ${DROPPED[*]:-none}"
echo "# rounds 64 KiB between the cores, us, written each time / unchanged: ${MOVED[*]}"
for a in R_lat_8 S_lat_8 U_lat_8 A_lat_8 R_lat_4096 S_lat_4096 U_lat_4096 \
	A_lat_4096 R_lat_65536 S_lat_65536 U_lat_65536 A_lat_65536 Z_lat_4096 \
	Z_lat_65536 N_lat_4096 N_lat_65536 R_ev S_ev R_bw Z_bw N_bw S_bw U_bw A_bw R_bw1m \
	N_bw1m S_bw1m U_bw1m A_bw1m R_mr S_mr U_mr A_mr; do
	declare -n vals=$a
	echo "# rounds $a: ${vals[*]}"
	unset -n vals
done

# pick WHICH DIR ARRAY -- the median of ARRAY (WHICH med) or its best round
# (WHICH best, DIR lower|higher); "-" is n/a
pick() {
	[ "$3" = - ] && { echo n/a; return; }
	local -n vals=$3
	if [ "$1" = med ]; then med "${vals[@]}"; else best "$2" "${vals[@]}"; fi
}

# METRICS: "label|lower or higher|rdmamsg|verbs|UCX tag|UCX am" (arrays)
METRICS=(
	"latency 8 B, us|lower|R_lat_8|S_lat_8|U_lat_8|A_lat_8"
	"latency 4096 B, us|lower|R_lat_4096|S_lat_4096|U_lat_4096|A_lat_4096"
	"latency 65536 B, us|lower|R_lat_65536|S_lat_65536|U_lat_65536|A_lat_65536"
	"latency 8 B, blocking, us|lower|R_ev|S_ev|-|-"
	"bandwidth 64 KiB, MiB/s|higher|R_bw|S_bw|U_bw|A_bw"
	"message rate 8 B, Mmsg/s|higher|R_mr|S_mr|U_mr|A_mr"
	"zero-copy latency 4096 B, us|lower|Z_lat_4096|S_lat_4096|U_lat_4096|A_lat_4096"
	"zero-copy latency 65536 B, us|lower|Z_lat_65536|S_lat_65536|U_lat_65536|A_lat_65536"
	"zero-copy bandwidth 64 KiB, MiB/s|higher|Z_bw|S_bw|U_bw|A_bw"
	"nocopy latency 4096 B, us|lower|N_lat_4096|S_lat_4096|U_lat_4096|A_lat_4096"
	"nocopy latency 65536 B, us|lower|N_lat_65536|S_lat_65536|U_lat_65536|A_lat_65536"
	"nocopy bandwidth 64 KiB, MiB/s|higher|N_bw|S_bw|U_bw|A_bw"
	"bandwidth 1 MiB, MiB/s|higher|R_bw1m|S_bw1m|U_bw1m|A_bw1m"
	"nocopy bandwidth 1 MiB, MiB/s|higher|N_bw1m|S_bw1m|U_bw1m|A_bw1m"
)

# table med|best -- every metric's row
table() {
	local m label dir r s u a vr vs vu va
	printf '%-34s %9s %9s %9s %9s %8s %8s %8s\n' metric rdmamsg verbs "UCX tag" "UCX am" "/verbs" "/UCXtag" "/UCXam"
	for m in "${METRICS[@]}"; do
		IFS='|' read -r label dir r s u a <<<"$m"
		vr=$(pick "$1" "$dir" "$r") vs=$(pick "$1" "$dir" "$s")
		vu=$(pick "$1" "$dir" "$u") va=$(pick "$1" "$dir" "$a")
		printf '%-34s %9s %9s %9s %9s %8s %8s %8s\n' "$label" "$vr" "$vs" "$vu" "$va" \
			"$(ratio "$vr" "$vs")" "$(ratio "$vr" "$vu")" "$(ratio "$vr" "$va")"
	done
}
echo
table med
if [ ${#COUNTS[@]} -gt 0 ]; then
	echo
	echo "system calls/context switches per message (both sides; latency: per round trip):"
	printf '%-34s %13s %13s %13s\n' metric rdmamsg verbs "UCX tag"
	for c in "${COUNTS[@]}"; do
		IFS='|' read -r label cr cv cu <<<"$c"
		printf '%-34s %13s %13s %13s\n' "$label" "$cr" "$cv" "$cu"
	done
fi
if [ "$rounds" -gt 1 ]; then
	# The least disturbed round (see bench-softrdma.sh)
	echo
	echo "best of $rounds rounds:"
	table best
fi
echo
echo "latency: lower is better (ratio > 1 = slower); bandwidth, rate: higher is better."
echo "rdmamsg: rdmamsg_perf -t lat|bw|rate on softrdma (zero-copy rows: --zcopy, rdmamsg_send_buf()"
echo "of a pool buffer, instead of rdmamsg_send() copying; nocopy rows: --nocopy,"
echo "rdmamsg_send_nocopy() from one buffer of rdmamsg_mr_alloc(), read in place above the rendezvous"
echo "threshold (copied below it), as UCX sends from one buffer of ucp_mem_map(), and the server's lat"
echo "replies too, not the message it got: ucp_am_lat never reads that payload either); copied rows: at most"
echo "RDMAMSG_COPY_AHEAD (default 1 MiB) copied and not yet read; verbs: perftest on softrdma (LD_PRELOAD),"
echo "ib_send_lat t_typical, ib_send_bw BW average / MsgRate; blocking row: rdmamsg_perf --fd"
echo "vs ib_send_lat -e (completion channel); UCX: ucx_perftest with UCX_TLS=$utls on every row,"
echo "tag_lat/ucp_am_lat 50%ile, tag_bw/ucp_am_bw average."
echo "Each value: median over $rounds rounds (the \"# rounds\" lines above list them, with each"
echo "round's load and two-process cache-line ping-pong floor, at its start and its end)."
echo "No side writes its send buffer between messages.  Bytes copied on the way (rdmamsg_send()'s"
echo "copy, softrdma's copy ring for SENDs up to 64 KiB, UCX's eager copies) cross the cores freshly"
echo "written; a receiver reading the sender's buffer in place (rdmamsg's zero-copy and nocopy"
echo "rendezvous, UCX's cma) may find the lines it read last time still valid in its own cache."
echo "The \"64 KiB between the cores\" line gives both costs on this machine (tools/copy_pingpong)."
if [ ${#COUNTS[@]} -gt 0 ]; then
	echo "System calls/context switches: each peer's run once more at N and 2N iterations under $counter,"
	echo "server and client added up, (count(2N) - count(N)) / N: set-up and teardown cancel out; busy"
	echo "loops' timers (rdmamsg's loop looks at its fds once a millisecond) count per message as time goes."
fi
exit 0
