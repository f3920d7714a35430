# perftest-lib.sh -- run unmodified perftest programs on softrdma (sourced)
# shellcheck shell=sh
#
# A test sets pt_name, sources this file, then calls pt_lat / pt_bw once per
# run and ends with done_testing.  Each run starts the server and the client
# as two processes with libsoftrdma LD_PRELOADed, over 127.0.0.1, on a TCP
# port chosen at run time, and asserts:
#   - both sides exit 0 (each bounded by `timeout`);
#   - the client prints the result row for the requested size and iteration
#     count, with plausible non-zero numbers (and the server too, for the
#     tests where perftest measures on both sides).
# perftest does not check payload contents; the result rows are its own
# proof that every exchange completed.
. "$top_srcdir/tests/lib.sh"

pt_limit=${PT_TIMEOUT:-60}
pt_run=0

[ -n "${SOFTRDMA_LIB:-}" ] && [ -e "$SOFTRDMA_LIB" ] ||
	skip_all "libsoftrdma.so not built (${SOFTRDMA_LIB:-SOFTRDMA_LIB unset})"

# Each test gets its own shm namespace in softrdma.
tap_shm 3p-${pt_name:-perftest}-$$

# pt_gid -- GID index of ::ffff:127.0.0.1 on softrdma0 (as `-x` wants it)
pt_gid() {
	command -v ibv_devinfo >/dev/null 2>&1 || {
		echo 1
		return
	}
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 20 ibv_devinfo -d softrdma0 -v 2>/dev/null |
		sed -n 's/^[[:space:]]*GID\[[[:space:]]*\([0-9]*\)\]:[[:space:]]*::ffff:127\.0\.0\.1.*/\1/p' |
		head -n 1
}
pt_gidx=$(pt_gid)
if [ -z "$pt_gidx" ]; then
	ok 1 "softrdma0 has a GID for 127.0.0.1 (ibv_devinfo -v)"
	pt_gidx=1
fi

# pt_pair_once PROG ARGS... -- run server and client once (pair_start,
# pair_end); sets pt_s/pt_c (logs) and pt_src/pt_crc (exit statuses)
pt_pair_once() {
	_prog=$1
	shift
	pt_run=$((pt_run + 1))
	pt_s=$tap_tmp/$_prog.$pt_run.server
	pt_c=$tap_tmp/$_prog.$pt_run.client
	pair_port=$(free_port)
	pair_start "$tap_tmp/$_prog.$pt_run" "$pt_limit" "" 127.0.0.1 \
		"$_prog" -d softrdma0 -x "$pt_gidx" -F -p "$pair_port" "$@"
	pt_crc=$pair_crc
	# no grace for a server after the known race (see pt_pair)
	if [ $pt_crc -ne 0 ] && pt_race; then
		pair_end 0
	else
		pair_end 50
	fi
	pt_src=$pair_src
}

# pt_race -- did the last client lose the -R race described at pt_pair?
pt_race() {
	grep -q 'RDMA_CM_EVENT_REJECTED; error: 8\.' "$pt_c"
}

# pt_pair PROG ARGS... -- pt_pair_once, again (up to 6 runs) after the one
# known perftest race: with -R the client may send its REQ before the
# server's second rdma_listen (port not yet listening: REJECTED, reason 8,
# as an IB CM says); perftest 4.5-0.17 then retries on the rdma_cm ids it
# has just destroyed and crashes (rdma_cm_client_connection ->
# rdma_cm_destroy_cma), on hardware as here.  softrdma resolves addresses
# and routes at once, so the client wins the race about half the time.
pt_pair() {
	_try=1
	while :; do
		pt_pair_once "$@"
		if [ $pt_crc -ne 0 ] && [ $_try -lt 6 ] && pt_race; then
			diag "$1 attempt $_try: client REQ beat the server's rdma_listen (perftest race); again"
		elif [ $_try -lt 6 ] && perftest_clock_failed "$pt_c" "$pt_s"; then
			diag "$1 attempt $_try: perftest could not measure the CPU clock (loaded machine); again"
		else
			break
		fi
		_try=$((_try + 1))
	done
}

# pt_check_status DESC -- the exit-status assertions of one run
pt_check_status() {
	ok $pt_src "$1: server exits 0"
	[ $pt_src -eq 0 ] || show_log "$pt_s"
	ok $pt_crc "$1: client exits 0"
	[ $pt_crc -eq 0 ] || show_log "$pt_c"
}

# pt_lat_row LOG SIZE ITERS -- the latency row is there and sane:
#   #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
#   0 < t_min <= t_typical <= t_max, 0 < t_avg <= t_max, typical <= 99%.
#   No bound on the times (a loaded machine stalls a round trip for as
#   long as it likes), and t_stdev may read -nan: perftest takes the
#   square root of a variance that rounding made negative when one round
#   trip dwarfs the rest.
pt_lat_row() {
	awk -v sz="$2" -v n="$3" '
	$1 == sz && $2 == n && NF >= 9 {
		for (i = 3; i <= 9; i++)
			if ($i !~ /^[0-9]+(\.[0-9]+)?$/ &&
			    !(i == 7 && $i ~ /^-?nan$/))
				exit 1
		if ($3 > 0 && $3 <= $5 && $5 <= $4 && $6 > 0 && $6 <= $4 &&
		    $8 >= $5)
			found = 1
	}
	END { exit !found }' "$1"
}

# pt_bw_row LOG SIZE ITERS -- the bandwidth row is there and sane:
#   #bytes #iterations BW_peak BW_average[MiB/s] MsgRate[Mpps]
#   BW_average > 0, MsgRate > 0, and BW_average = MsgRate * size
#   (MiB/s vs Mpps, within 10 %).
pt_bw_row() {
	awk -v sz="$2" -v n="$3" '
	$1 == sz && $2 == n && NF >= 5 {
		for (i = 3; i <= 5; i++)
			if ($i !~ /^[0-9]+(\.[0-9]+)?$/)
				exit 1
		want = $5 * 1e6 * sz / 1048576
		if ($4 > 0 && $5 > 0 && $4 > want * 0.9 && $4 < want * 1.1)
			found = 1
	}
	END { exit !found }' "$1"
}

# pt_installed PROG -- skip the run (one SKIP) when PROG is missing
pt_installed() {
	command -v "$1" >/dev/null 2>&1 && return 0
	skip "$1" "$1 not installed (Debian package perftest)"
	return 1
}

# pt_lat PROG SIZE ITERS BOTH [OPTS...] -- one latency run; BOTH=1 when the
# server measures too (send/write latency), 0 when only the client does.
pt_lat() {
	_p=$1 _sz=$2 _n=$3 _both=$4
	shift 4
	_d="$_p -s $_sz -n $_n${*:+ $*}"
	pt_installed "$_p" || return 0
	pt_pair "$_p" -s "$_sz" -n "$_n" "$@"
	pt_check_status "$_d"
	pt_lat_row "$pt_c" "$_sz" "$_n"
	_rc=$?
	ok $_rc "$_d: client prints the $_sz-byte latency row ($_n iterations)"
	[ $_rc -eq 0 ] || [ $pt_crc -ne 0 ] || show_log "$pt_c"
	if [ "$_both" = 1 ]; then
		pt_lat_row "$pt_s" "$_sz" "$_n"
		ok $? "$_d: server prints the $_sz-byte latency row"
	fi
	diag "$_d: $(awk -v sz="$_sz" '$1 == sz && NF >= 9 { print "t_typical " $5 " us, t_avg " $6 " us" }' "$pt_c")"
}

# pt_bw PROG SIZE ITERS BOTH [OPTS...] -- one bandwidth run
pt_bw() {
	_p=$1 _sz=$2 _n=$3 _both=$4
	shift 4
	_d="$_p -s $_sz -n $_n${*:+ $*}"
	pt_installed "$_p" || return 0
	pt_pair "$_p" -s "$_sz" -n "$_n" "$@"
	pt_check_status "$_d"
	pt_bw_row "$pt_c" "$_sz" "$_n"
	_rc=$?
	ok $_rc "$_d: client prints the $_sz-byte bandwidth row ($_n iterations)"
	[ $_rc -eq 0 ] || [ $pt_crc -ne 0 ] || show_log "$pt_c"
	if [ "$_both" = 1 ]; then
		pt_bw_row "$pt_s" "$_sz" "$_n"
		ok $? "$_d: server prints the $_sz-byte bandwidth row"
	fi
	diag "$_d: $(awk -v sz="$_sz" '$1 == sz && NF >= 5 { print "BW average " $4 " MiB/s, " $5 " Mpps" }' "$pt_c")"
}
