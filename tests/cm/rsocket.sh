#!/bin/sh
# rsocket.sh -- librdmacm's own rsocket implementation on softrdma (issue
# 11): unmodified rstream, riostream and rcopy (rdmacm-utils) under
# LD_PRELOAD.  softrdma defines no rsocket call; librdmacm's run on top of
# softrdma's rdma_* and ibv_* (RDMA writes with immediate data, inline
# sends, CQ events, riomap/riowrite).
. "$top_srcdir/tests/lib.sh"
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
for p in rstream riostream rdma_xserver rdma_xclient rcopy; do
	command -v "$p" >/dev/null 2>&1 ||
		skip_all "$p not installed (Debian package rdmacm-utils)"
done
tap_shm cm-rsocket-$$ always

# run NAME PROG ARGS -- PROG as server and client (-s 127.0.0.1; the
# client is $cprog if set), both 0
run() {
	name=$1
	prog=$2
	shift 2
	port=$(free_port)
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 "$prog" -p "$port" "$@" \
		>"$tap_tmp/s" 2>&1 &
	spid=$!
	tap_srv_pids="$tap_srv_pids $spid"
	wait_port "$port" 10
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 "${cprog:-$prog}" \
		-s 127.0.0.1 -p "$port" "$@" >"$tap_tmp/c" 2>&1
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
	return $rc
}

# rstream checks nothing itself: -T v verifies every transfer's data.
# (rsocket-pending.sh: -T a, which fails on a race of rstream's own.)
run "rstream 1000 B x 100, verified" rstream -S 1000 -C 100 -T v &&
	grep -q '^custom' "$tap_tmp/c"
ok $? "rstream 1000 B: a result line"
run "rstream 1 MiB x 50, verified" rstream -S 1048576 -C 50 -T v
# many small writes with immediate data; rsocket's credit updates are
# zero-length WRITE_WITH_IMMs with a stale rkey (IBA C9-88: not checked)
run "rstream 64 B x 1000, verified" rstream -S 64 -C 1000 -T v
run "rstream 4 KiB x 500, blocking calls, verified" rstream -S 4096 -C 500 \
	-T b -T v
run "rstream 4 KiB x 500, non-blocking calls, verified" rstream -S 4096 \
	-C 500 -T n -T v
run "riostream 4 KiB x 500 (riomap, riowrite), verified" riostream \
	-S 4096 -C 500 -T v
run "riostream 1 MiB x 20, verified" riostream -S 1048576 -C 20 -T v

# rdma_xserver and rdma_xclient (each exits with what it prints as "end"):
# rdma_xclient sends 16 bytes inline on a QP asked for max_inline_data 0,
# the grant is rounded up as rxe does; -c x: XRC over PS_IB, the server's
# target QP and XRC SRQ on librdmacm's domain, its SRQ number in the REP's
# private data, the client's SEND lands in that SRQ (the server ends once
# its one receive completes)
cprog=rdma_xclient
run "rdma_xserver/rdma_xclient (RC)" rdma_xserver
run "rdma_xserver/rdma_xclient -c x (XRC)" rdma_xserver -c x
cprog=

# rcopy: a 3 MB file arrives intact
port=$(free_port)
head -c 3000000 /dev/urandom >"$tap_tmp/src"
LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 rcopy -p "$port" >"$tap_tmp/s" 2>&1 &
spid=$!
tap_srv_pids="$tap_srv_pids $spid"
wait_port "$port" 10
# rcopy's options follow its operands
LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 rcopy "$tap_tmp/src" \
	"127.0.0.1:$tap_tmp/dst" -p "$port" >"$tap_tmp/c" 2>&1
ok $? "rcopy client exits 0"
sleep 0.2
cmp -s "$tap_tmp/src" "$tap_tmp/dst"
ok $? "rcopy: 3,000,000 bytes arrived intact"
kill -TERM "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
done_testing
