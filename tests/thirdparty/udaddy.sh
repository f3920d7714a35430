#!/bin/sh
# udaddy.sh -- rdma-core's udaddy, unmodified, on softrdma: UD QPs set up
# through rdma_cm (RDMA_PS_UDP), datagrams both ways with the address
# handles the CM gives and ibv_create_ah_from_wc for the replies
. "$top_srcdir/tests/lib.sh"
[ -f "$SOFTRDMA_LIB" ] || skip_all "libsoftrdma.so not built"
command -v udaddy >/dev/null || skip_all "udaddy missing (apt-get install rdmacm-utils)"
SOFTRDMA_SHM_PREFIX=t-udaddy-$$
export SOFTRDMA_SHM_PREFIX

# run NAME ARGS... -- server, then client; udaddy's port is fixed (7174),
# so a server that finds it taken (another run on this host) is retried
run() {
	name=$1
	shift
	for try in 1 2 3 4 5; do
		LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 udaddy "$@" >"$tap_tmp/srv.log" 2>&1 &
		srv=$!
		tap_srv_pids="$tap_srv_pids $srv" # TERM through timeout(1)
		sleep 1
		if grep -q "already in use" "$tap_tmp/srv.log"; then
			wait "$srv"
			sleep "$try"
			continue
		fi
		LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 udaddy -s 127.0.0.1 "$@" \
			>"$tap_tmp/cli.log" 2>&1
		crc=$?
		wait "$srv"
		src=$?
		break
	done
	test "${crc:-1}" -eq 0 && test "${src:-1}" -eq 0 &&
		grep -q "data transfers complete" "$tap_tmp/cli.log"
	ok $? "udaddy $name: client ${crc:-none}, server ${src:-none}"
	if [ "${crc:-1}" -ne 0 ] || [ "${src:-1}" -ne 0 ]; then
		show_log "$tap_tmp/srv.log"
		show_log "$tap_tmp/cli.log"
	fi
}

run "default (1 connection, 10 x 100 bytes)"
run "3 connections, 100 x 1000 bytes" -c 3 -C 100 -S 1000

left=$(ls /dev/shm | grep -c "^$SOFTRDMA_SHM_PREFIX")
test "$left" -eq 0
ok $? "no /dev/shm entries left ($left)"
done_testing
