#!/bin/sh
# ucmatose.sh -- unmodified ucmatose (rdmacm-utils) on softrdma via
# LD_PRELOAD: many connections at once, migration between channels,
# PS_IB, large messages, TOS and ACK timeout options.
. "$top_srcdir/tests/lib.sh"
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
command -v ucmatose >/dev/null 2>&1 ||
	skip_all "ucmatose not installed (Debian package rdmacm-utils)"
tap_shm cm-ucmatose-$$ always

# run NAME ARGS -- one ucmatose server and client with the same ARGS
run() {
	name=$1
	shift
	port=$(free_port)
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 ucmatose -p "$port" "$@" \
		>"$tap_tmp/s" 2>&1 &
	spid=$!
	tap_srv_pids="$tap_srv_pids $spid"
	wait_port "$port" 10
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 ucmatose -s 127.0.0.1 -p "$port" \
		"$@" >"$tap_tmp/c" 2>&1
	crc=$?
	wait $spid
	src=$?
	[ $crc -eq 0 ] && [ $src -eq 0 ] &&
		grep -q 'return status 0' "$tap_tmp/c" &&
		grep -q 'return status 0' "$tap_tmp/s"
	rc=$?
	ok $rc "ucmatose $name: both sides return status 0"
	if [ $rc -ne 0 ]; then
		show_log "$tap_tmp/c"
		show_log "$tap_tmp/s"
	fi
}

run "10 connections" -c 10 -C 100
run "50 connections" -c 50 -C 10
run "migrate" -c 4 -m
run "PS_IB" -c 4 -P ib
run "64 KiB messages" -c 2 -S 65536 -C 10
run "tos, ack timeout" -c 2 -t 32 -a 14
done_testing
