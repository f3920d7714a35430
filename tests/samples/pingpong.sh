#!/bin/sh
# pingpong.sh -- samples/pingpong: client and server exit 0 with verified data
. "$top_srcdir/tests/lib.sh"
pp=$top_builddir/samples/pingpong/pingpong
[ -x "$pp" ] || skip_all "samples/pingpong/pingpong not built"
SOFTRDMA_SHM_PREFIX=test-pingpong-$$
export SOFTRDMA_SHM_PREFIX

# run_pair NAME CLIENT-ARGS -- a server, a client; both must exit 0
run_pair() {
	name=$1
	shift
	port=$(free_port)
	timeout -k 10 60 "$pp" -s -b 127.0.0.1 -p "$port" >"$tap_tmp/srv.log" 2>&1 &
	srv=$!
	tap_pids="$tap_pids $srv"
	wait_port "$port" 10
	ok $? "$name: server listens"
	timeout -k 10 60 "$pp" -c 127.0.0.1 -p "$port" "$@" >"$tap_tmp/cli.log" 2>&1
	ok $? "$name: client exits 0"
	show_log "$tap_tmp/cli.log"
	grep -q "messages of .* bytes verified" "$tap_tmp/cli.log"
	ok $? "$name: client verified every echo"
	grep -Eq "round trip us: min [0-9.]+ median [0-9.]+ avg [0-9.]+ p99 [0-9.]+ max [0-9.]+" \
		"$tap_tmp/cli.log"
	ok $? "$name: round-trip statistics printed"
	wait "$srv"
	ok $? "$name: server exits 0 after the client left"
	show_log "$tap_tmp/srv.log"
}

run_pair "64 B" -n 2000
run_pair "0 B" -n 200 --size 0
run_pair "fragmented 100000 B" -n 50 --size 100000
run_pair "ACK timeout 14" -n 200 --ack-timeout 14

# a client with nothing to talk to fails cleanly
port=$(free_port)
timeout -k 10 30 "$pp" -c 127.0.0.1 -p "$port" -n 1 >"$tap_tmp/cli.log" 2>&1
rc=$?
[ $rc = 1 ]
ok $? "client without a server exits 1 (got $rc)"
grep -q "connect:" "$tap_tmp/cli.log"
ok $? "client says why"
show_log "$tap_tmp/cli.log"

"$pp" --bogus >/dev/null 2>&1
[ $? = 2 ]
ok $? "usage error exits 2"
for t in 0 32 x 14x; do
	"$pp" -c 127.0.0.1 -t "$t" >/dev/null 2>&1
	[ $? = 2 ]
	ok $? "--ack-timeout $t: usage error, exits 2"
done
done_testing
