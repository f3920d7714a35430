# lib.sh -- TAP helpers for the shell tests (sourced, not run)
#
# Each test sources this, calls ok/skip as it goes, and ends with
# done_testing.  Background processes started with bg are killed at exit.
#
# Third-party programs run on softrdma with LD_PRELOAD="$SOFTRDMA_PRELOAD":
# that is $SOFTRDMA_LIB, preceded by the sanitizer runtimes in a
# --enable-sanitizers build (whose leak reports about those programs'
# own allocations are not ours to judge).
if [ -n "${SAN_PRELOAD:-}" ]; then
	ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:verify_asan_link_order=0}
	export ASAN_OPTIONS
fi
SOFTRDMA_PRELOAD=${SOFTRDMA_PRELOAD:-$SOFTRDMA_LIB}
tap_n=0
tap_failed=0
tap_pids=
tap_tmp=$(mktemp -d "${TMPDIR:-/tmp}/rdmamsg-test.XXXXXX")

# valgrind_cmd -- the memcheck command line a test runs a program of
# ours under when RDMAMSG_TEST_VALGRIND=1 (errors and definite leaks fail
# it: exit 99), as tests/run-test.sh runs compiled tests: with
# --fair-sched=yes, or a thread that spins without a system call keeps
# valgrind's lock from one that made one (a busy loop waiting for
# softrdma's CM thread); nothing when valgrind is not asked for or absent
valgrind_cmd() {
	[ "${RDMAMSG_TEST_VALGRIND:-0}" = 1 ] || return 0
	set -- "${VALGRIND:-$(command -v valgrind)}"
	[ -n "$1" ] || return 0
	echo "$1 -q --fair-sched=yes --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite"
}

# ok COND-STATUS NAME -- report one assertion from an exit status
ok() {
	tap_n=$((tap_n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $tap_n - $2"
	else
		echo "not ok $tap_n - $2"
		tap_failed=$((tap_failed + 1))
	fi
}

# skip NAME REASON -- report one skipped assertion
skip() {
	tap_n=$((tap_n + 1))
	echo "ok $tap_n - $1 # SKIP $2"
}

# skip_all REASON -- skip the whole file
skip_all() {
	echo "1..0 # SKIP $1"
	exit 0
}

diag() {
	echo "# $*"
}

# wait_line FILE TEXT [SECONDS] -- wait (SECONDS, 60 by default) for a
# line matching TEXT in FILE; with wait_live set to pids, no longer than
# they all live (one gone: FILE is looked at once more).  A job started
# as `cmd >FILE &` empties FILE only once it runs: remove a FILE an earlier
# round wrote before starting the job, or this finds that round's line
wait_line() {
	_wl_i=0
	_wl_n=$((${3:-60} * 10))
	while [ $_wl_i -lt $_wl_n ]; do
		grep -q "$2" "$1" 2>/dev/null && return 0
		if [ -n "${wait_live:-}" ]; then
			# shellcheck disable=SC2086 # pids, one word each
			kill -0 $wait_live 2>/dev/null || {
				grep -q "$2" "$1" 2>/dev/null
				return
			}
		fi
		sleep 0.1
		_wl_i=$((_wl_i + 1))
	done
	return 1
}

# show_log FILE -- copy a log into the TAP stream as diagnostics
show_log() {
	[ -f "$1" ] && sed 's/^/#   /' "$1" | tail -n 40
}

# run_tap PROG NAME -- run the compiled TAP test PROG (a path under
# tests/ of the build tree) with this environment, its output in
# $tap_tmp/<PROG's file name>.log: one assertion, NAME, that it exited 0
# with no "not ok"; its log copied in when not
run_tap() {
	_log=$tap_tmp/${1##*/}.log
	"$top_builddir/tests/$1" >"$_log" 2>&1
	_rc=$?
	_fails=$(grep -c '^not ok' "$_log")
	test "$_rc" -eq 0 && test "$_fails" -eq 0
	ok $? "$2: exit $_rc, $_fails failed"
	[ "$_rc" -eq 0 ] && [ "$_fails" -eq 0 ] || show_log "$_log"
}

# rping_exit_race LOG STATUS -- did rping die in its own exit race?  Its
# CM thread may still be on its way back to rdma_get_cm_event() when main()
# has destroyed the event channel and freed the state the thread reads: the
# process then exits 255 ("rdma_get_cm_event: Bad file descriptor") or
# faults, after its work is done (every rping before rdma-core 59; fixed
# upstream by f3ae6534a "rping: terminate CM event thread before exiting",
# 2025, an eventfd that stops the thread first).  Such a run is tried once
# more; anything else, and the same outcome twice, fails.
rping_exit_race() {
	case $2 in
	255) grep -q 'rdma_get_cm_event: Bad file descriptor' "$1" ;;
	139) grep -q 'DISCONNECT EVENT' "$1" ;;
	*) return 1 ;;
	esac
}

# perftest_clock_failed LOG... -- did perftest fail to measure the CPU
# clock?  It times busy loops against gettimeofday() and fits a line; on a
# loaded machine the fit can miss (r^2 < 0.9) and the clock reads 0 MHz:
# a latency test then prints inf for every time and exits 0, a bandwidth
# test prints "Can't produce a report" and exits 1, whatever the device
# did.  Such a run measured nothing and is run again.
perftest_clock_failed() {
	grep -q 'Correlation coefficient r^2: .* < 0.9' "$@"
}

# bg CMD... -- start a background process that is killed at exit
bg() {
	"$@" &
	tap_pids="$tap_pids $!"
}

# free_port -- a port for a server of this test, reserved for it until it
# exits: below the kernel's ephemeral range (no connect(2) takes it
# meanwhile), no TCP or UDP socket on it now, and a directory of its own in
# $tap_ports, which the tests running beside this one share (a port that
# bind(0) handed out and that was freed again goes to the next test that
# asks as well: 16 tests at once met twice on one port); sticky and open to
# all like /tmp, for the tests of every user on the machine
tap_ports=${TMPDIR:-/tmp}/rdmamsg-test-ports
free_port() {
	[ -d "$tap_ports" ] || mkdir -m 1777 "$tap_ports" 2>/dev/null ||
		[ -d "$tap_ports" ] || return 1
	# reservations of tests killed before their cleanup
	find "$tap_ports" -mindepth 1 -maxdepth 1 -mmin +60 -exec rm -rf {} + 2>/dev/null || :
	_lo=10000
	_hi=$(($(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768) - 1))
	[ "$_hi" -gt $((_lo + 1000)) ] || _hi=32767
	_p=$((_lo + $(od -An -N2 -tu2 /dev/urandom) % (_hi - _lo + 1)))
	_i=0
	while [ $_i -lt 500 ]; do
		if ! grep -Eq "^ *[0-9]+: [0-9A-F]+:$(printf %04X "$_p") " \
			/proc/net/tcp /proc/net/tcp6 /proc/net/udp /proc/net/udp6 2>/dev/null &&
			mkdir "$tap_ports/$_p" 2>/dev/null; then
			: >"$tap_ports/$_p/$$"
			echo "$_p"
			return 0
		fi
		_p=$((_p < _hi ? _p + 1 : _lo))
		_i=$((_i + 1))
	done
	echo "free_port: no free port in $_lo-$_hi" >&2
	return 1
}

# wait_port PORT [SECONDS] -- wait until something listens on PORT (TCP)
wait_port() {
	_i=0
	while [ $_i -lt $((${2:-10} * 10)) ]; do
		# A listener: local :PORT, remote address all zeros (IPv4 or
		# IPv6), state 0A.
		if grep -Eq ":$(printf '%04X' "$1") 0+:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
			return 0
		fi
		sleep 0.1
		_i=$((_i + 1))
	done
	return 1
}

# pair_run LOG LIMIT SERVER_ARGS CLIENT_ARGS CMD... -- a third-party
# server and its client on softrdma (LD_PRELOAD), each bounded by timeout
# LIMIT: "CMD... SERVER_ARGS" in the background, once something listens
# on TCP port $pair_port (the caller's free_port) "CMD... CLIENT_ARGS"
# (the ARGS split at blanks); their output in LOG.server and LOG.client,
# their exit statuses in pair_src and pair_crc.  A server that never
# listens is stopped, and the client counts as failed (1); one whose
# client failed (and may wait for it forever) gets 5 s to end.
# pair_start (the same arguments) and pair_end GRACE split it in two,
# for a caller that picks the grace (tenths of a second) from the
# client's log.
pair_run() {
	pair_start "$@"
	pair_end 50
}

pair_start() {
	_pr_log=$1 _pr_limit=$2 _pr_sargs=$3 _pr_cargs=$4
	shift 4
	# shellcheck disable=SC2086 # the ARGS: words by design
	timeout -k 5 "$_pr_limit" env LD_PRELOAD="$SOFTRDMA_PRELOAD" "$@" \
		$_pr_sargs >"$_pr_log.server" 2>&1 &
	_pr_spid=$!
	tap_srv_pids="$tap_srv_pids $_pr_spid"
	if wait_port "$pair_port" 20; then
		# shellcheck disable=SC2086
		timeout -k 5 "$_pr_limit" env LD_PRELOAD="$SOFTRDMA_PRELOAD" \
			"$@" $_pr_cargs >"$_pr_log.client" 2>&1
		pair_crc=$?
	else
		echo "(the server never listened on TCP port $pair_port)" \
			>"$_pr_log.client"
		pair_crc=1
		kill -TERM "$_pr_spid" 2>/dev/null
	fi
}

pair_end() {
	if [ $pair_crc -ne 0 ]; then
		_pr_i=0
		while [ $_pr_i -lt "$1" ] && kill -0 "$_pr_spid" 2>/dev/null; do
			sleep 0.1
			_pr_i=$((_pr_i + 1))
		done
		kill -TERM "$_pr_spid" 2>/dev/null
	fi
	wait "$_pr_spid"
	pair_src=$?
}

# start_echo_server PORT -- samples/echo_server on PORT with a stdin that
# stays open until stop_echo_server (end of input would make it quit);
# waits until it listens; its output goes to $tap_tmp/echo_server.out
start_echo_server() {
	mkfifo "$tap_tmp/echo_server.in"
	# Opened read-write first, so that neither end blocks.
	exec 9<>"$tap_tmp/echo_server.in"
	"$top_builddir/samples/echo_server/echo_server" -p "$1" -i 0 \
		<"$tap_tmp/echo_server.in" >"$tap_tmp/echo_server.out" 2>&1 &
	echo_server_pid=$!
	tap_pids="$tap_pids $echo_server_pid"
	wait_port "$1" 10
}

# stop_echo_server -- ask the server to quit; its exit status
stop_echo_server() {
	echo quit >&9
	exec 9>&-
	wait "$echo_server_pid"
}

done_testing() {
	echo "1..$tap_n"
	[ "$tap_failed" -eq 0 ]
}

# the shell that sourced this: a subshell that catches a signal before it
# has reset the traps it inherited (bash: a watchdog killed right after
# its fork) runs them too, and must not clean up for the test (CI saw one
# remove $tap_tmp under tests/samples/rdmamsg_perf.sh's next checks)
tap_shell=$(exec sh -c 'echo $PPID')

# tap_shm PREFIX [always] -- the test's softrdma objects: exports
# SOFTRDMA_SHM_PREFIX=PREFIX; at exit what is left of /dev/shm/PREFIX-*
# goes, outside run-test.sh's private /dev/shm (inside it leftovers are
# run-test.sh's to report: softrdma must remove its objects) or, with
# "always", everywhere (a server stopped by SIGTERM leaves its objects)
tap_shm_rm=
tap_shm() {
	SOFTRDMA_SHM_PREFIX=$1
	export SOFTRDMA_SHM_PREFIX
	tap_shm_rm=${2:-outside}
}

# tap_srv_pids -- servers that get SIGTERM at exit, before their objects
# go: under timeout(1) the signal reaches them through it (tap_cleanup's
# SIGKILL of $tap_pids would leave them behind)
tap_srv_pids=

# tap_cleanup -- at exit, in the test's own shell only: SIGTERM to
# $tap_srv_pids, the test's tap_exit_hook if it defines one (a fabric), its
# softrdma objects (tap_shm), then the background processes and $tap_tmp
tap_cleanup() {
	[ "$(exec sh -c 'echo $PPID')" = "$tap_shell" ] || return 0
	for _p in $tap_srv_pids; do kill -TERM "$_p" 2>/dev/null; done
	if command -v tap_exit_hook >/dev/null 2>&1; then tap_exit_hook; fi
	case $tap_shm_rm in
	always) rm -f /dev/shm/"$SOFTRDMA_SHM_PREFIX"-* ;;
	outside) [ "${RDMAMSG_TEST_SHM:-}" = private ] ||
		rm -f /dev/shm/"$SOFTRDMA_SHM_PREFIX"-* ;;
	esac
	for _p in $tap_pids; do kill -9 "$_p" 2>/dev/null; done
	for _p in "$tap_ports"/*/"$$"; do [ -e "$_p" ] && rm -rf "${_p%/*}"; done
	rm -rf "$tap_tmp"
}
trap tap_cleanup EXIT
# Killed (run-test.sh's time limit sends SIGTERM): exit through the EXIT
# trap, so that no background process outlives the test.
trap 'exit 143' INT TERM
