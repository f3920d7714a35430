#!/bin/sh
# echo_server.sh -- samples/echo_server: echoes to clients; "quit" or end of
# input on stdin ends it gracefully with exit status 0
. "$top_srcdir/tests/lib.sh"
es=$top_builddir/samples/echo_server/echo_server
pp=$top_builddir/samples/pingpong/pingpong
[ -x "$es" ] && [ -x "$pp" ] || skip_all "samples not built"
SOFTRDMA_SHM_PREFIX=test-echo-$$
export SOFTRDMA_SHM_PREFIX

# start_server -- echo_server reading commands from a fifo held open on fd 3
start_server() {
	port=$(free_port)
	rm -f "$tap_tmp/in"
	mkfifo "$tap_tmp/in"
	timeout -k 10 120 "$es" -b 127.0.0.1 -p "$port" -i 1 <"$tap_tmp/in" \
		>"$tap_tmp/es.log" 2>&1 &
	srv=$!
	tap_pids="$tap_pids $srv"
	exec 3>"$tap_tmp/in"
	wait_port "$port" 10
	ok $? "echo_server listens"
}

start_server
timeout -k 10 60 "$pp" -c 127.0.0.1 -p "$port" -n 2000 >"$tap_tmp/c1.log" 2>&1
ok $? "pingpong client verified 2000 echoes"
show_log "$tap_tmp/c1.log"
timeout -k 10 60 "$pp" -c 127.0.0.1 -p "$port" -n 200 --size 4000 >"$tap_tmp/c2.log" 2>&1 &
c2=$!
timeout -k 10 60 "$pp" -c 127.0.0.1 -p "$port" -n 200 --size 0 >"$tap_tmp/c3.log" 2>&1
ok $? "second and third clients at once (0 bytes)"
wait $c2
ok $? "second and third clients at once (4000 bytes)"
# larger than the eager size: fragmented, reassembled, kept and sent back
timeout -k 10 60 "$pp" -c 127.0.0.1 -p "$port" -n 100 --size 20000 >"$tap_tmp/c5.log" 2>&1
ok $? "fragmented 20000-byte echoes verified"
show_log "$tap_tmp/c5.log"
echo stats >&3
sleep 0.3
grep -q "^stats: .* 2500 messages" "$tap_tmp/es.log"
ok $? "stats command counts every echo"
# a client still connected when "quit" comes is closed by the server
timeout -k 10 60 "$pp" -c 127.0.0.1 -p "$port" -n 10000000 >"$tap_tmp/c4.log" 2>&1 &
c4=$!
i=0
while ! grep -q "^client 5: connected" "$tap_tmp/es.log" && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
echo quit >&3
wait "$srv"
ok $? "quit: echo_server exits 0"
wait $c4
[ $? = 1 ]
ok $? "quit: the connected client is disconnected"
grep -q "^quitting" "$tap_tmp/es.log"
ok $? "quit: announced"
tail -n 1 "$tap_tmp/es.log" | grep -q "; pool 0 of"
ok $? "quit: every pool buffer came back"
grep -q "^client 5: closed" "$tap_tmp/es.log"
ok $? "quit: the open endpoint was closed"
show_log "$tap_tmp/es.log"
exec 3>&-

# end of input works like quit
start_server
timeout -k 10 60 "$pp" -c 127.0.0.1 -p "$port" -n 100 >"$tap_tmp/c1.log" 2>&1
ok $? "pingpong client verified 100 echoes"
exec 3>&-
wait "$srv"
ok $? "end of input: echo_server exits 0"
show_log "$tap_tmp/es.log"
done_testing
