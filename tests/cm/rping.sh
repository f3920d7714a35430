#!/bin/sh
# rping.sh -- unmodified rping (rdmacm-utils) on softrdma via LD_PRELOAD:
# server and client in two processes over 127.0.0.1, data verified (-V).
. "$top_srcdir/tests/lib.sh"
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
command -v rping >/dev/null 2>&1 ||
	skip_all "rping not installed (Debian package rdmacm-utils)"
tap_shm cm-rping-$$ always

# run_pair NAME SERVER-ARGS -- CLIENT-ARGS: one rping server, one client
run_pair() {
	name=$1
	sargs=$2
	cargs=$3
	for try in 1 2; do
		port=$(free_port)
		LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 rping -s -a 127.0.0.1 -p "$port" \
			$sargs >"$tap_tmp/s.$name" 2>&1 &
		spid=$!
		tap_srv_pids="$tap_srv_pids $spid"
		wait_port "$port" 10
		lrc=$?
		LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 rping -c -a 127.0.0.1 -p "$port" \
			$cargs >"$tap_tmp/c.$name" 2>&1
		crc=$?
		wait $spid
		src=$?
		[ $try -eq 1 ] || break
		{ [ $crc -eq 0 ] || rping_exit_race "$tap_tmp/c.$name" $crc; } &&
			{ [ $src -eq 0 ] || rping_exit_race "$tap_tmp/s.$name" $src; } &&
			[ $((crc + src)) -ne 0 ] || break
		diag "$name: rping's exit race (client $crc, server $src): once more"
	done
	ok $lrc "$name: rping server listens on $port"
	ok $crc "$name: rping client exits 0"
	[ $crc -eq 0 ] || show_log "$tap_tmp/c.$name"
	ok $src "$name: rping server exits 0"
	[ $src -eq 0 ] || show_log "$tap_tmp/s.$name"
}

run_pair default "" "-C 10 -v -V"
n=$(grep -c '^ping data: rdma-ping-' "$tap_tmp/c.default")
[ "$n" -eq 10 ]
ok $? "default: 10 verified pings (got $n)"

run_pair s4096 "-S 4096 -V" "-C 100 -S 4096 -v -V"
n=$(grep -c '^ping data: rdma-ping-' "$tap_tmp/c.s4096")
[ "$n" -eq 100 ]
ok $? "4096 bytes: 100 verified pings (got $n)"
grep -q 'data mismatch' "$tap_tmp/c.s4096" "$tap_tmp/s.s4096"
[ $? -ne 0 ]
ok $? "4096 bytes: no data mismatch"

# -q: the program moves its own QP with rdma_init_qp_attr, then
# rdma_establish (client) / rdma_accept with conn_param->qp_num (server)
run_pair selfqp "-q -V" "-q -C 10 -v -V"
n=$(grep -c '^ping data: rdma-ping-' "$tap_tmp/c.selfqp")
[ "$n" -eq 10 ]
ok $? "self-created QP: 10 verified pings (got $n)"

# persistent server (-P): a thread per connection, several clients.  The
# clients run one after the other: rdma-core 44's rping -P mixes up
# connection requests that arrive back to back (fixed upstream in 2025,
# rdma-core PR 1568), on hardware as here.
port=$(free_port)
LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 rping -s -P -a 127.0.0.1 -p "$port" -V \
	>"$tap_tmp/s.persist" 2>&1 &
ppid_server=$!
tap_srv_pids="$tap_srv_pids $ppid_server"
wait_port "$port" 10
ok $? "persistent: rping -P listens"
for i in 1 2 3; do
	for try in 1 2; do
		LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 rping -c -a 127.0.0.1 -p "$port" \
			-C 20 -v -V >"$tap_tmp/c.persist$i" 2>&1
		crc=$?
		[ $try -eq 1 ] || break
		rping_exit_race "$tap_tmp/c.persist$i" $crc || break
		diag "persistent: client $i: rping's exit race ($crc): once more"
	done
	n=$(grep -c '^ping data: rdma-ping-' "$tap_tmp/c.persist$i")
	[ $crc -eq 0 ] && [ "$n" -eq 20 ]
	ok $? "persistent: client $i exits 0 after 20 verified pings"
	[ $crc -eq 0 ] || show_log "$tap_tmp/c.persist$i"
done
# it never exits by itself: SIGTERM reaches rping through timeout(1)
kill -TERM "$ppid_server" 2>/dev/null
wait "$ppid_server" 2>/dev/null

# nobody listening: rping reports the rejection and fails
port=$(free_port)
LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 30 rping -c -a 127.0.0.1 -p "$port" -C 1 \
	>"$tap_tmp/c.none" 2>&1
[ $? -ne 0 ] && grep -q 'RDMA_CM_EVENT_REJECTED, error 8' "$tap_tmp/c.none"
ok $? "no server: client sees RDMA_CM_EVENT_REJECTED, error 8"
show_log "$tap_tmp/c.none" | head -n 3
done_testing
