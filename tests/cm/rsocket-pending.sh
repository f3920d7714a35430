#!/bin/sh
# rsocket-pending.sh -- programs on librdmacm (rsockets, rdma_x*) that do
# not pass on softrdma yet, for `make check-cm-pending`; each names what
# it waits for.  Move a case to rsocket.sh once it passes.
. "$top_srcdir/tests/lib.sh"
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
command -v rstream >/dev/null 2>&1 ||
	skip_all "rstream not installed (Debian package rdmacm-utils)"
tap_shm cm-rspend-$$ always

# run NAME SERVER-PROG CLIENT-PROG ARGS -- server, then client -s 127.0.0.1
run() {
	name=$1
	sprog=$2
	cprog=$3
	shift 3
	port=$(free_port)
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 30 "$sprog" -p "$port" "$@" \
		>"$tap_tmp/s" 2>&1 &
	spid=$!
	tap_srv_pids="$tap_srv_pids $spid"
	wait_port "$port" 10
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 30 "$cprog" -s 127.0.0.1 \
		-p "$port" "$@" >"$tap_tmp/c" 2>&1
	crc=$?
	wait $spid
	src=$?
	[ $crc -eq 0 ] && [ $src -eq 0 ]
	rc=$?
	ok $rc "$name: client and server exit 0"
	if [ $rc -ne 0 ]; then
		diag "client $crc, server $src"
		show_log "$tap_tmp/c"
		show_log "$tap_tmp/s"
	fi
}

# The client often exits 16 (POLLHUP): a race in rstream itself, which
# hardware has too, checked against rdma-core's sources.  rstream's
# do_poll() (librdmacm/examples/common.c) returns
# revents & (POLLERR | POLLHUP), so it fails on POLLHUP even when POLLIN is
# set; rsocket's rs_poll_rs() reports POLLIN | POLLHUP once the socket is
# rs_disconnected with data still unread.  That happens whenever the
# server's last transfer and its RS_CTRL_DISCONNECT (sent in order right
# after it, by rs_shutdown in run()) both arrive between two of the
# client's polls: how often depends on timing only, not on the device.
# The server side finishes and prints its result line.
run "rstream 64 KiB, async (poll)" rstream rstream -S 65536 -C 100 -T a -T v
done_testing
