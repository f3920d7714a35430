# qperf-lib.sh -- run unmodified qperf on softrdma (sourced)
# shellcheck shell=sh
#
# A test sets qp_name, sources this file, calls qp_run once per client
# invocation, then qp_finish, and ends with done_testing.  One qperf server
# (LD_PRELOADed, its control port chosen at run time) serves every client
# invocation.  qperf connects its QPs with rdma_cm (-cm1: on RoCE
# qperf needs the CM for the GRH) and runs each test for -t 1 second.
# Asserts per qperf test: the result line is printed with a non-zero value,
# latencies under qp_max_us (default 20 ms) and message rates over 1000/s (a
# lost wake-up that a timer rescues shows up as ~100 ms per message), and no "failed"/"mismatch" (the ver_* tests check
# every atomic's returned value).
. "$top_srcdir/tests/lib.sh"
command -v qperf >/dev/null 2>&1 || skip_all "qperf not installed (Debian package qperf)"
[ -n "${SOFTRDMA_LIB:-}" ] && [ -e "$SOFTRDMA_LIB" ] ||
	skip_all "libsoftrdma.so not built (${SOFTRDMA_LIB:-SOFTRDMA_LIB unset})"

tap_shm 3p-${qp_name:-qperf}-$$

qp_port=$(free_port)
qp_slog=$tap_tmp/qperf.server
timeout -k 5 "${QP_TIMEOUT:-120}" env LD_PRELOAD="$SOFTRDMA_PRELOAD" qperf \
	-lp "$qp_port" >"$qp_slog" 2>&1 &
qp_srv_pid=$!
tap_srv_pids=$qp_srv_pid
wait_port "$qp_port" 20
ok $? "qperf server listens on TCP port $qp_port"
qp_n=0

# qp_run DESC OPTS... TESTS... -- one client invocation; then one assertion
# per qperf test named in the arguments (words with an underscore that are
# not options)
qp_run() {
	_desc=$1
	shift
	qp_n=$((qp_n + 1))
	_log=$tap_tmp/qperf.client.$qp_n
	timeout -k 5 60 env LD_PRELOAD="$SOFTRDMA_PRELOAD" qperf 127.0.0.1 \
		-lp "$qp_port" -cm1 -t 1 "$@" >"$_log" 2>&1
	_rc=$?
	ok $_rc "qperf $_desc: client exits 0"
	[ $_rc -eq 0 ] || show_log "$_log"
	for _t in "$@"; do
		case $_t in
		-* | quit | *[!a-z_]* | [!a-z]*) continue ;;
		*_*) ;;
		*) continue ;;
		esac
		_v=$(awk -v t="$_t:" -v max="${qp_max_us:-20000}" '
		$1 == t { on = 1; next }
		/^[a-z_]+:/ { on = 0 }
		on && $2 == "=" {
			v = $3; u = $4
			gsub(",", "", v)	# qperf groups digits: "1,000 ns"
			if (v !~ /^[0-9.]+$/ || v + 0 <= 0) { print "bad " $0; exit }
			if ($1 == "latency") {
				us = v * (u == "ns" ? 0.001 : u == "ms" ? 1000 : u == "sec" ? 1e6 : 1)
				if (us >= max) { print "slow " v " " u; exit }
			}
			if ($1 == "msg_rate") {
				r = v * (u == "K/sec" ? 1e3 : u == "M/sec" ? 1e6 : 1)
				if (r < 1000) { print "slow " v " " u; exit }
			}
			print $1 " " v " " u; exit
		}' "$_log")
		case $_v in
		"" | bad* | slow*) _r=1 ;;
		*) _r=0 ;;
		esac
		ok $_r "qperf $_desc $_t: ${_v:-no result}"
	done
	grep -Eq 'failed|mismatch|error' "$_log"
	[ $? -ne 0 ]
	ok $? "qperf $_desc: no failure or mismatch reported"
}

# qp_finish [quit|term] -- end the server and check how it ended.
#   quit: qperf's own "quit" request; the server must exit 0.
#   term: SIGTERM to the idle server, which must still be alive.  (qperf's
#   quit is delivered as a SIGQUIT whose handler calls exit(); landing while
#   the server forks it used to deadlock softrdma's exit-time handler,
#   fixed in 2de9885; qperf.sh uses "term" to keep its data-path checks
#   apart from that race, qperf-events.sh "quit" to keep the exit path
#   covered.)
qp_finish() {
	if [ "${1:-quit}" = term ]; then
		kill -0 "$qp_srv_pid" 2>/dev/null
		_alive=$?
		kill -TERM "$qp_srv_pid" 2>/dev/null
		wait "$qp_srv_pid"
		qp_srv_pid= tap_srv_pids=
		ok $_alive "qperf server still serving after the tests"
		[ $_alive -eq 0 ] || show_log "$qp_slog"
		return
	fi
	timeout -k 5 30 env LD_PRELOAD="$SOFTRDMA_PRELOAD" qperf 127.0.0.1 \
		-lp "$qp_port" quit >/dev/null 2>&1
	wait "$qp_srv_pid"
	_rc=$?
	qp_srv_pid= tap_srv_pids=
	ok $_rc "qperf server exits 0 after quit (status $_rc)"
	[ $_rc -eq 0 ] || show_log "$qp_slog"
}
