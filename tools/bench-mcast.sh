#!/bin/bash
# bench-mcast.sh -- rdmamsg multicast groups (rdmamsg_perf -P/-L) next to
# raw UD multicast on the same fabric (perftest -c UD --mcg on softrdma,
# LD_PRELOADed), the floor issue 14 measures against.
#
# Usage: tools/bench-mcast.sh [-b BUILDDIR] [-q] [-r ROUNDS] [-s SUBSCRIBERS]
#   -b BUILDDIR  build tree holding tools/rdmamsg_perf and
#                soft/.libs/libsoftrdma.so (default: the current directory
#                if it has them, else the source tree next to this script)
#   -q           quick run: a tenth of the messages
#   -r ROUNDS    measure everything ROUNDS times, report medians (default 3)
#   -s N         rdmamsg subscribers (default 3; perftest has one receiver)
#   -z SIZES     message sizes, comma-separated (default 64,4096)
#   -c           instead: instructions per message (64 B, 4 KiB) under callgrind
#                (publisher, subscriber; default and reliable mode; and
#                ib_send_bw's UD multicast sender), each the difference of
#                a run of N and one of 2N messages over the N extra ones
#                (set-up and teardown cancel out; load does not matter)
#
# All processes run on this host over softrdma.  Rows: publisher message
# rate (unpaced, 64 B and 4 KiB) in default and reliable mode (window
# 1,024 messages), and the subscribers' median one-way latency at a paced
# 10,000 messages/s, next to ib_send_bw's sender MsgRate and ib_send_lat's
# t_typical for UD multicast (perftest's IPv6 link-local GID, index 0:
# with the IPv4-mapped one it refuses the multicast GID as
# "Incompatibility issue with GID types").
#
# What the raw figures measure, and how the comparison is kept fair:
# - ib_send_bw's MsgRate is its sender's alone, in duration mode (-D 5
#   -f 1: the steady rate from 1 s to 4 s; with -n its figure includes
#   about a second of start-up).  UD drops what finds no receive posted:
#   perftest's receiver takes a few percent of what its sender sends, and
#   on softrdma a datagram that a receiver does not take costs the sender
#   nothing (one that it takes costs a copy into that receiver's queue).
#   So the raw sender is held back by nothing, while rdmamsg's reliable
#   mode delivers every message to every subscriber.
# - fan-out: softrdma copies a multicast datagram for every attached
#   QP in the sender's post (a switch would replicate it): straight into
#   its posted receive where that is shareable memory (rdmamsg's pool,
#   the sinks' too), else into its queue; so a sender's rate falls with
#   its receivers: "raw 1 rcv" is perftest as it
#   is (the issue's floor), "raw N rcv" adds N - 1 receivers to its group
#   (the MGID given with -M): tools/mcast_sink, raw UD receivers with
#   perftest's Q_Key and receive depth (512) that take each datagram and
#   post its receive again, blocking on their CQ's channel at once
#   (rdmamsg subscribers poll 30 us first by default, below).  Before
#   them the sinks were rdmamsg_perf -L, whose Q_Key (rdma_cm's) is not
#   perftest's: they dropped every datagram at the Q_Key check, and
#   "raw N rcv" was one receiver's copy and N - 1 lock rounds.
#   The ratio at the same fan-out is the like-for-like one.
# - warm-up: the rdmamsg members run -w 4096 first (4,096 untimed
#   datagrams: every cell of the subscribers' receive queues, 4,096 deep
#   at most, touched once, as in a member that has been up a while;
#   softrdma's queues are shared memory that faults page by page on first
#   touch, at some 10 us a fault on these machines).  perftest's 512-deep
#   queues are touched within its first second, outside its measurement.
# - rate runs take at least 100,000 messages (-q too).
# - latency: ib_send_lat is a ping-pong (one message in flight) that
#   busy-polls on both sides; rdmamsg's is the one-way latency of a
#   paced stream to subscribers that block in poll() (the library's
#   default use), a wake-up per message on a loaded machine.
# - receive depth: the rdmamsg subscribers post 4,096 receives in default
#   mode (rdmamsg_perf's default; in reliable mode its window + 128, all
#   that flow control lets through), the raw
#   receivers 512 (perftest's default, and the sinks'); a receiver with
#   fewer posted takes less of an unpaced stream, and on softrdma every
#   datagram it does not take costs the sender nothing: the default-mode
#   row "receive depth 512" gives the rdmamsg subscribers the raw
#   receivers' depth, the like-for-like publish rate: bought with loss
#   (its "lost" column below; 4,096 receives lose nothing at the same
#   rates).
# - "received per subscriber": the rate messages reached a subscriber at
#   (from its first timed message to its last, median of the
#   subscribers); in default mode what the publisher's rate is worth when
#   a subscriber cannot keep up (the rest reported lost).  The raw
#   receivers' take is not measured (perftest does not print it).
# - "subscribers poll 30 us": rdmamsg_perf -L --poll-us 30, subscribers
#   that look for the next message (yielding the CPU) for 30 us before
#   they block; perftest's own receiver busy-polls, the sinks block at
#   once (--poll-us 0).  Since rdmamsg_group_attr_set_poll_us the
#   library's default is that poll (30 us), so the other rows poll too
#   unless RDMAMSG_GROUP_POLL_US=0 is set (subscribers that block at
#   once: the library before it, from the same build).
# - the publisher's and a subscriber's counters (datagrams, status
#   messages, stalls, duplicates, losses) of the last round are printed
#   per 1,000 messages.
# A missing or failing peer prints "n/a"; exits 0 anyway.
#
# Environment: SOFTRDMA_LIB, BENCH_TIMEOUT (seconds per run, default 120),
# BENCH_SCALE (message-count multiplier).
set -u

builddir=
scale=${BENCH_SCALE:-1}
rounds=3
nsub=3
insns=0
cg_size=64
sizes='64 4096'
while getopts b:cqr:s:z: opt; do
	case $opt in
	c) insns=1 ;;
	b) builddir=$OPTARG ;;
	q) scale=0.1 ;;
	r) rounds=$OPTARG ;;
	s) nsub=$OPTARG ;;
	z)
		sizes=${OPTARG//,/ }
		for s in ${sizes:-none}; do
			case $s in
			'' | *[!0-9]*) echo "bench-mcast.sh: -z $OPTARG: sizes are numbers" >&2; exit 2 ;;
			esac
		done
		;;
	*) sed -n '2,29s/^# \{0,1\}//p' "$0"; exit 2 ;;
	esac
done

bench_name=mcast
# shellcheck source=tools/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"

perf=$builddir/tools/rdmamsg_perf
[ -x "$perf" ] || echo "# $perf not built: rdmamsg columns are n/a" >&2
sink=$builddir/tools/mcast_sink
[ -x "$sink" ] || echo "# $sink not built: raw N rcv is n/a" >&2
export RDMAMSG_FABRIC=soft RDMAMSG_SOFTRDMA_PATH=$lib
group=239.1.77.1
# perftest's group (-M, its notation: 16 decimal bytes) and the same as
# an IPv6 address for the sinks that join it
mgid=255:14:0:0:0:0:0:0:0:0:0:0:0:1:0:119
mgid6=ff0e::1:77
warm=4096

# start_subs FILE NS CMD... -- NS receivers (CMD: rdmamsg_perf -L ...
# or mcast_sink ...) writing $tmp/FILE1..NS, each waited for until it
# says it subscribed; their pids in started (and in pids, for the
# cleanup)
start_subs() {
	local file=$1 ns=$2 i
	shift 2
	started=()
	for i in $(seq "$ns"); do
		timeout -k 5 "$limit" "$@" >"$tmp/$file$i" 2>&1 &
		started+=($!)
		pids="$pids $!"
	done
	for i in $(seq "$ns"); do
		for _ in $(seq 300); do
			grep -q '^# subscribed' "$tmp/$file$i" && break
			sleep 0.1
		done
	done
}

# mc VAR NSUB SIZE N [OPTS...] -- one publisher and NSUB subscribers (all
# with -w $warm); VAR_rate gets the publisher's msgs/s for SIZE, VAR_lat
# the subscribers' median one-way latency, VAR_recv the rate messages
# reached them at (each a median over subscribers), n/a on failure; the
# publisher's and first subscriber's "# stats" lines are kept in
# $tmp/VAR.stats
mc() {
	local var=$1 ns=$2 size=$3 n=$4 i p rate=n/a lat=n/a recv=n/a ok=1
	local -a o=("${@:5}" -w "$warm") subs=()
	if [ -x "$perf" ] && [ -e "$lib" ]; then
		start_subs sub "$ns" "$perf" -L "$group" -n "$n" --size "$size" "${o[@]}"
		subs=("${started[@]}")
		timeout -k 5 "$limit" "$perf" -P "$group" -n "$n" --size "$size" "${o[@]}" \
			>"$tmp/pub" 2>&1 || ok=0
		for p in "${subs[@]}"; do wait "$p" || ok=0; done
		if [ $ok = 1 ]; then
			rate=$(awk -v s="$size" '$1 == s && NF == 5 { print $3 }' "$tmp/pub")
			lat=$(for i in $(seq "$ns"); do
				awk -v s="$size" '$1 == s && NF == 6 { print $4 }' "$tmp/sub$i"
			done | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
			recv=$(for i in $(seq "$ns"); do
				awk -v s="$size" '$1 == "#" && $2 == "received" && $3 == s { print $6 }' "$tmp/sub$i"
			done | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
			{
				sed -n 's/^# stats: /pub /p' "$tmp/pub"
				sed -n 's/^# stats: /sub /p' "$tmp/sub1"
			} >"$tmp/$var.stats"
		else
			echo "# rdmamsg_perf mcast ${o[*]} $size failed:" >&2
			tail -n 3 "$tmp/pub" "$tmp/sub1" | sed 's/^/#   /' >&2
		fi
	fi
	printf -v "${var}_rate" %s "${rate:-n/a}"
	printf -v "${var}_lat" %s "${lat:-n/a}"
	printf -v "${var}_recv" %s "${recv:-n/a}"
}

# raw VAR PROG SIZE COL SINKS PERFTEST-ARGS... -- perftest UD multicast
# on softrdma (GID 0), the sender's figure; SINKS more receivers in its
# group (tools/mcast_sink on its MGID, receive depth 512).  The receivers
# may never count what was sent (UD drops what finds no receive posted),
# so they are killed once the sender is done.
raw() {
	local var=$1 prog=$2 size=$3 col=$4 ns=$5 port spid res=n/a
	local -a sk=() pa=("${@:6}")
	if [ "$ns" -gt 0 ] && [ ! -x "$sink" ]; then
		printf -v "$var" n/a
		return
	fi
	if [ -e "$lib" ] && runs "$prog"; then
		if [ "$ns" -gt 0 ]; then
			start_subs sink "$ns" env LD_PRELOAD="$lib" "$sink" -M "$mgid6" -r 512
			sk=("${started[@]}")
		fi
		port=$(free_port)
		env LD_PRELOAD="$lib" timeout -k 5 "$limit" "$prog" -d softrdma0 -x 0 -F -c UD --mcg \
			-p "$port" -s "$size" "${pa[@]}" >"$tmp/raw.s" 2>&1 &
		spid=$!
		pids="$pids $spid"
		if wait_port "$port" 15 &&
			env LD_PRELOAD="$lib" timeout -k 5 "$limit" "$prog" -d softrdma0 -x 0 -F -c UD --mcg \
				-p "$port" -s "$size" "${pa[@]}" 127.0.0.1 >"$tmp/raw.c" 2>&1; then
			res=$(pt_col "$tmp/raw.c" "$size" "$col") || res=n/a
		fi
		sleep 2
		# SIGTERM, which timeout(1) passes on (and follows with SIGKILL
		# 5 s later): a SIGKILL to timeout itself would leave its child
		# running, a sink still in the group for the next raw runs
		kill "$spid" "${sk[@]}" 2>/dev/null
		wait "$spid" "${sk[@]}" 2>/dev/null
	fi
	printf -v "$var" %s "$res"
}

# cg_mc ROLE N [OPTS...] -- instructions callgrind counts in the ROLE
# (pub or sub) process of one publisher and one subscriber, N messages of
# $cg_size bytes; the other process runs natively, both block in poll() (--fd)
# while idle.  The publisher goes as fast as it can; for a default-mode
# subscriber it is paced (2,000/s: every message received, each in a
# datagram of its own), in reliable mode its window keeps it at the
# subscriber's pace
cg_mc() {
	local role=$1 n=$2 spid out
	local -a o=("${@:3}") cg=(valgrind --tool=callgrind --callgrind-out-file=/dev/null)
	# the program itself, not libtool's wrapper script
	local bin=$builddir/tools/.libs/rdmamsg_perf
	[ -x "$bin" ] || bin=$perf
	local -a sub=("$bin" -L "$group" -n "$n" --size "$cg_size" --fd "${o[@]}")
	local -a pub=("$bin" -P "$group" -n "$n" --size "$cg_size" --fd "${o[@]}")
	local -a cs=() cp=()
	if [ "$role" = pub ]; then
		cp=("${cg[@]}")
	else
		cs=("${cg[@]}")
		[ ${#o[@]} -gt 0 ] || pub+=(--pace 2000)
	fi
	timeout -k 5 600 env LD_LIBRARY_PATH="$builddir/lib/.libs" "${cs[@]}" "${sub[@]}" >"$tmp/cg.sub" 2>"$tmp/cg.serr" &
	spid=$!
	pids="$pids $spid"
	for _ in $(seq 600); do
		grep -q '^# subscribed' "$tmp/cg.sub" && break
		sleep 0.1
	done
	timeout -k 5 600 env LD_LIBRARY_PATH="$builddir/lib/.libs" "${cp[@]}" "${pub[@]}" >/dev/null 2>"$tmp/cg.perr"
	wait "$spid"
	out=$(sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' "$tmp/cg.${role:0:1}err" | tr -d , | tail -n 1)
	if [ "$role" = sub ] && ! awk -v n="$n" -v s="$cg_size" '$1 == s && NF == 6 && $3 == n { f = 1 } END { exit !f }' "$tmp/cg.sub"; then
		echo "# callgrind subscriber did not receive all $n messages:" >&2
		tail -n 2 "$tmp/cg.sub" | sed 's/^/#   /' >&2
		out=n/a
	fi
	echo "${out:-n/a}"
}

# cg_raw N -- instructions of ib_send_bw's UD multicast sender, N messages
# of $cg_size bytes
cg_raw() {
	local n=$1 port spid out=n/a
	port=$(free_port)
	env LD_PRELOAD="$lib" timeout -k 5 600 ib_send_bw -d softrdma0 -x 0 -F -c UD --mcg \
		-p "$port" -s "$cg_size" -n "$n" >/dev/null 2>&1 &
	spid=$!
	pids="$pids $spid"
	if wait_port "$port" 30; then
		env LD_PRELOAD="$lib" timeout -k 5 600 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
			ib_send_bw -d softrdma0 -x 0 -F -c UD --mcg -p "$port" -s "$cg_size" -n "$n" 127.0.0.1 \
			>/dev/null 2>"$tmp/cg.err"
		out=$(sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' "$tmp/cg.err" | tr -d ,)
	fi
	sleep 2
	kill -9 "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	echo "${out:-n/a}"
}

# per A B N -- (B - A) / N to one place
per() {
	awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.1f", (b - a) / n; else printf "n/a" }'
}

if [ "$insns" = 1 ]; then
	command -v valgrind >/dev/null || { echo "valgrind missing" >&2; exit 1; }
	n=$(iters 20000)
	echo "# bench-mcast -c: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), callgrind,"
	echo "# runs of $n and $((2 * n)) messages; per message = difference / $n"
	printf '%-40s %12s\n' process insn/msg
	for cg_size in $sizes; do
		for mode in default reliable; do
			o=()
			[ $mode = reliable ] && o=(--reliable 1024)
			for role in pub sub; do
				a=$(cg_mc $role "$n" "${o[@]}")
				b=$(cg_mc $role $((2 * n)) "${o[@]}")
				printf '%-40s %12s\n' "$cg_size B: rdmamsg $mode, $role$([ $mode$role = defaultsub ] && echo ' (paced)')" "$(per "$a" "$b" "$n")"
			done
		done
		if runs ib_send_bw; then
			a=$(cg_raw "$n")
			b=$(cg_raw $((2 * n)))
			printf '%-40s %12s\n' "$cg_size B: raw UD (ib_send_bw sender)" "$(per "$a" "$b" "$n")"
		fi
	done
	exit 0
fi

declare -A acc
add() { acc[$1]="${acc[$1]:-} $2"; }
med() {
	echo "${acc[$1]:-}" | tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -n |
		awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "n/a" }'
}
# ratio A B -- A/B to two places, n/a unless both are numbers
ratio2() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "n/a" }'
}

d_rate='' rl_rate='' p_lat='' v='' d_recv='' rl_recv='' d5_rate='' d5_recv=''
dp_rate='' dp_recv='' rp_rate=''
poll_us=30
has_poll=0
[ -x "$perf" ] && "$perf" --help 2>&1 | grep -q -- --poll-us && has_poll=1
# rate runs: at least 100,000 messages (past the first milliseconds'
# start-up), -q or not
n_rate=$(iters 100000)
[ "$n_rate" -lt 100000 ] && n_rate=100000
n_lat=$(iters 20000)
# perftest's rate in duration mode: 5 s, measured from 1 s to 4 s (its
# -n mode's figure includes about a second of start-up: 10,000 messages
# gave 7,000 msg/s where the steady rate is 500,000)
# -M: the group the sinks join.  Not for ib_send_lat: with one MGID
# both of its sides join, each takes its own datagrams and its
# "latency" is a few hundred nanoseconds
raw_bw=(-D 5 -f 1 -M "$mgid")
for r in $(seq "$rounds"); do
	for sz in $sizes; do
		mc d "$nsub" "$sz" "$n_rate"
		add "d_rate_$sz" "$d_rate"
		add "d_recv_$sz" "$d_recv"
		# the raw receivers' receive depth (perftest's 512, the sinks')
		mc d5 "$nsub" "$sz" "$n_rate" --recv-depth 512
		add "d5_rate_$sz" "$d5_rate"
		add "d5_recv_$sz" "$d5_recv"
		mc rl "$nsub" "$sz" "$n_rate" --reliable 1024
		add "r_rate_$sz" "$rl_rate"
		add "r_recv_$sz" "$rl_recv"
		# subscribers that poll (yielding the CPU) before they block
		# (n/a where rdmamsg_perf has no --poll-us)
		if [ "$has_poll" = 1 ]; then
			mc dp "$nsub" "$sz" "$n_rate" --poll-us "$poll_us"
			add "dp_rate_$sz" "$dp_rate"
			add "dp_recv_$sz" "$dp_recv"
			mc rp "$nsub" "$sz" "$n_rate" --reliable 1024 --poll-us "$poll_us"
			add "rp_rate_$sz" "$rp_rate"
		fi
		mc p "$nsub" "$sz" "$n_lat" --pace 10000
		add "d_lat_$sz" "$p_lat"
		raw v ib_send_bw "$sz" 5 0 "${raw_bw[@]}"
		# Mpps -> msgs/s
		add "v_rate_$sz" "$(awk -v v="$v" 'BEGIN { if (v + 0 > 0) printf "%.0f", v * 1e6 }')"
		raw v ib_send_bw "$sz" 5 $((nsub - 1)) "${raw_bw[@]}"
		add "w_rate_$sz" "$(awk -v v="$v" 'BEGIN { if (v + 0 > 0) printf "%.0f", v * 1e6 }')"
		raw v ib_send_lat "$sz" 5 0 -n "$n_lat"
		add "v_lat_$sz" "$v"
		for k in d d5 rl rp; do
			[ -s "$tmp/$k.stats" ] && cp "$tmp/$k.stats" "$tmp/$k.stats.$sz"
		done
		echo "# round $r, $sz B: rates default ${d_rate:-n/a} reliable ${rl_rate:-n/a}" \
			"raw 1 rcv $(echo "${acc[v_rate_$sz]:-}" | awk '{ print $NF }')" \
			"raw $nsub rcv $(echo "${acc[w_rate_$sz]:-}" | awk '{ print $NF }');" \
			"latency ${p_lat:-n/a} raw ${v:-n/a}" >&2
	done
	echo "# round $r of $rounds done" >&2
done

echo "rdmamsg multicast: rdmamsg_perf -P/-L, 1 publisher, $nsub subscriber(s), warm-up $warm datagrams;"
echo "raw: perftest -c UD --mcg sender rate with 1 receiver, and with $nsub receivers (perftest's"
echo "and $((nsub - 1)) sinks); on softrdma; medians of $rounds round(s), $n_rate messages per rate run"
printf '%-38s %11s %11s %6s %11s %6s\n' metric rdmamsg "raw 1 rcv" ratio "raw $nsub rcv" ratio
for sz in $sizes; do
	d=$(med "d_rate_$sz") r=$(med "r_rate_$sz") v=$(med "v_rate_$sz") w=$(med "w_rate_$sz")
	printf '%-38s %11s %11s %6s %11s %6s\n' "publish rate $sz B, default (msg/s)" "$d" "$v" "$(ratio2 "$d" "$v")" "$w" "$(ratio2 "$d" "$w")"
	printf '%-38s %11s %11s %6s %11s %6s\n' "publish rate $sz B, reliable (win 1024)" "$r" "$v" "$(ratio2 "$r" "$v")" "$w" "$(ratio2 "$r" "$w")"
	printf '%-38s %11s\n' "  received per subscriber, default" "$(med "d_recv_$sz")"
	d=$(med "d5_rate_$sz")
	printf '%-38s %11s %11s %6s %11s %6s\n' "  default, receive depth 512 as raw's" "$d" "$v" "$(ratio2 "$d" "$v")" "$w" "$(ratio2 "$d" "$w")"
	printf '%-38s %11s\n' "  received per subscriber, depth 512" "$(med "d5_recv_$sz")"
	printf '%-38s %11s\n' "  received per subscriber, reliable" "$(med "r_recv_$sz")"
	d=$(med "dp_rate_$sz") r=$(med "rp_rate_$sz")
	printf '%-38s %11s %11s %6s %11s %6s\n' "  default, subscribers poll ${poll_us} us" "$d" "$v" "$(ratio2 "$d" "$v")" "$w" "$(ratio2 "$d" "$w")"
	printf '%-38s %11s\n' "  received per subscriber, polling" "$(med "dp_recv_$sz")"
	printf '%-38s %11s %11s %6s %11s %6s\n' "  reliable, subscribers poll ${poll_us} us" "$r" "$v" "$(ratio2 "$r" "$v")" "$w" "$(ratio2 "$r" "$w")"
	d=$(med "d_lat_$sz") v=$(med "v_lat_$sz")
	printf '%-38s %11s %11s %6s\n' "latency $sz B at 10k/s (us)" "$d" "$v" "$(ratio2 "$d" "$v")"
done
echo "goal (issue 14): default >= 0.8x and reliable >= 0.5x raw UD multicast's rate"
echo
echo "per 1,000 messages, last round (publisher: datagrams sent, status/NAK datagrams"
echo "received, heartbeats, publishes refused for the window; subscriber: datagrams"
echo "received, status/NAK datagrams sent, duplicates, lost)"
printf '%-24s %8s %8s %8s %8s | %8s %8s %6s %6s\n' run pub-dg pub-rx hb stalls sub-rx sub-tx dup lost
for sz in $sizes; do
	for k in d d5 rl rp; do
		f=$tmp/$k.stats.$sz
		[ -s "$f" ] || continue
		# "pub|sub published P received R datagrams sent S received X
		#  heartbeats H stalls T naks sent A received B repairs Rr
		#  (unicast U) duplicates D gaps G lost L receivers V"
		case $k in
		d) name=default ;;
		d5) name="default, depth 512" ;;
		rl) name=reliable ;;
		*) name="reliable, polling" ;;
		esac
		awk -v name="$name $sz B" '
			{ pm[$1] = $3; rc[$1] = $5; ds[$1] = $8; dr[$1] = $10
			  hb[$1] = $12; st[$1] = $14; du[$1] = $25; lo[$1] = $29 }
			END {
				m = pm["pub"]; if (!m) m = 1
				# per message meant for it: taken or reported lost
				n = rc["sub"] + lo["sub"]; if (!n) n = 1
				printf "%-24s %8.1f %8.1f %8.2f %8.2f | %8.1f %8.1f %6.1f %6.1f\n", name,
					ds["pub"] * 1000 / m, dr["pub"] * 1000 / m,
					hb["pub"] * 1000 / m, st["pub"] * 1000 / m,
					dr["sub"] * 1000 / n, ds["sub"] * 1000 / n,
					du["sub"] * 1000 / n, lo["sub"] * 1000 / n
			}' "$f"
	done
done
exit 0
