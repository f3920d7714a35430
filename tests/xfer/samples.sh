#!/bin/sh
# samples.sh -- samples/rpc and samples/rdma_rw: server and client agree
. "$top_srcdir/tests/lib.sh"
rpc=$top_builddir/samples/rpc/rpc
rw=$top_builddir/samples/rdma_rw/rdma_rw
if [ ! -x "$rpc" ] || [ ! -x "$rw" ]; then
	echo "Bail out! samples not built"
	exit 1
fi
SOFTRDMA_SHM_PREFIX=test-xsamples-$$
export SOFTRDMA_SHM_PREFIX

port=$(free_port)
timeout -k 10 120 "$rpc" -s -b 127.0.0.1 -p "$port" >"$tap_tmp/rpcs.log" 2>&1 &
srv=$!
tap_pids="$tap_pids $srv"
wait_port "$port" 10
ok $? "rpc server listens"
timeout -k 10 120 "$rpc" -c 127.0.0.1 -p "$port" -n 64 -S 3000000 \
	>"$tap_tmp/rpcc.log" 2>&1
ok $? "rpc client: every value verified (large ones by rendezvous)"
grep -q "64 keys put, 64 values verified" "$tap_tmp/rpcc.log"
ok $? "rpc client reports 64 values"
show_log "$tap_tmp/rpcc.log"
wait $srv
ok $? "rpc server exits 0 after its client"

port=$(free_port)
timeout -k 10 120 "$rw" -s -b 127.0.0.1 -p "$port" -S 4194304 \
	>"$tap_tmp/rws.log" 2>&1 &
srv=$!
tap_pids="$tap_pids $srv"
wait_port "$port" 10
ok $? "rdma_rw server listens"
timeout -k 10 120 "$rw" -c 127.0.0.1 -p "$port" >"$tap_tmp/rwc.log" 2>&1
ok $? "rdma_rw client: write, read back, fetch-and-add, notify"
grep -q "server says good" "$tap_tmp/rwc.log"
ok $? "the server found the data and the counter in its memory"
show_log "$tap_tmp/rwc.log"
wait $srv
ok $? "rdma_rw server exits 0"
show_log "$tap_tmp/rws.log"

for t in 0 32 x 14x; do
	"$rw" -c 127.0.0.1 -t "$t" >/dev/null 2>&1
	[ $? = 2 ]
	ok $? "rdma_rw --ack-timeout $t: usage error, exits 2"
done
done_testing
