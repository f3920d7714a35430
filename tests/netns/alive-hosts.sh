#!/bin/sh
# alive-hosts.sh -- the target of one-sided work and its peer timeout,
# between two hosts of the namespace fabric (softrdma's RoCE v2 path with
# SOFTRDMA_NET=1): tests/netns/alive_peer's client on host 2 writes the
# server's region (on host 1) in RDMA writes through a slow link (host 2's
# egress limited by tc tbf), so that its writes take several times the
# server's peer timeout (PEER_MS), and its keep-alives and credit returns
# wait behind them on its send queue; the server receives nothing
# meanwhile, the client nothing after the server's first keep-alives.
# Both must keep the connection and the server must find the region
# intact; then host 2's link is cut (every packet it sends dropped) and
# the server must declare the client dead (-ETIMEDOUT) within its peer
# timeout and a bounded slack.  Round 1: both sides' timeout PEER_MS,
# writes of CHUNK bytes; round 2: the client's timeout ten times longer
# (its own ticks too rare to move its clock, lib/ep.c) and one write of
# the whole region.  Before, the server took the busy client for dead at
# PEER_MS and the client's writes failed.
. "$top_srcdir/tests/lib.sh"
peer=$top_builddir/tests/netns/alive_peer
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
[ -x "$peer" ] || skip_all "tests/netns/alive_peer not built"
hosts_stem=alh
. "$top_srcdir/tests/netns/hosts-lib.sh"

fab up "$name" 2 1 || skip_all "no fabric of 2 hosts"
a1=$(fab addr "$name" 1)

peer_ms=${ALIVE_HOSTS_PEER_MS:-1000}
size=${ALIVE_HOSTS_SIZE:-4194304}
chunk=${ALIVE_HOSTS_CHUNK:-262144}
rate=${ALIVE_HOSTS_RATE:-8mbit}
slack=${ALIVE_HOSTS_SLACK:-3000}
if [ "${RDMAMSG_TEST_VALGRIND:-0}" = 1 ]; then
	peer_ms=3000
	slack=10000
	size=12582912
fi
# a token bucket (sch_tbf: sch_netem may be missing) holding 400 ms
limit() {
	fab exec "$name" 2 tc qdisc replace dev eth0 root tbf rate "$rate" \
		burst 32kb latency 400ms 2>&1
}
out=$(limit) || skip_all "no tc tbf rate limit here: $out"
ok 0 "fabric of 2 hosts up, host 2 sending at $rate"

port=7650
# round R CLIENT_MS CHUNK
round() {
	_r=$1
	port=$((port + 1))
	limit >/dev/null
	# emptied here: a background job's own redirection may come after
	# the waits below have read the last round's "done"
	: >"$tap_tmp/s.alive"
	: >"$tap_tmp/c.alive"
	on 1 timeout -k 10 120 "$peer" server "$a1" $port "$peer_ms" "$size" \
		>"$tap_tmp/s.alive" 2>&1 &
	spid=$!
	tap_pids="$tap_pids $spid"
	listening 1 $port
	ok $? "$_r: alive_peer server listens on host 1 (peer timeout $peer_ms ms)"
	on 2 timeout -k 10 120 "$peer" client "$a1" $port "$2" "$size" "$3" \
		>"$tap_tmp/c.alive" 2>&1 &
	cpid=$!
	tap_pids="$tap_pids $cpid"
	# "done" once every write completed, or an exit on a failure
	_i=0
	while [ $_i -lt 1200 ] &&
		! grep -q "^client: done" "$tap_tmp/c.alive" &&
		kill -0 $cpid 2>/dev/null; do
		sleep 0.1
		_i=$((_i + 1))
	done
	_alive=no
	kill -0 $cpid 2>/dev/null && _alive=yes
	# the client's write with immediate completes on the server's
	# acknowledgement, before the server's software has seen it: wait
	# for its verdict too (under valgrind tens of ms later)
	_j=0
	while [ $_j -lt 300 ] &&
		! grep -q "^server: \(region\|[0-9]* bad\|disconnected\)" \
			"$tap_tmp/s.alive" &&
		kill -0 $spid 2>/dev/null; do
		sleep 0.1
		_j=$((_j + 1))
	done
	diag "$_r: waited $_i x 0.1 s, the client running: $_alive, qdisc: $(fab exec "$name" 2 tc qdisc show dev eth0 | head -n 1)"
	grep -q "^client: done" "$tap_tmp/c.alive"
	ok $? "$_r: the client's writes completed: $(grep '^client: [0-9]' "$tap_tmp/c.alive")"
	grep -q "^server: region intact" "$tap_tmp/s.alive" &&
		! grep -q "^server: disconnected" "$tap_tmp/s.alive"
	ok $? "$_r: the server kept the busy client: $(sed -n 2p "$tap_tmp/s.alive")"
	# the writes took several peer timeouts (else this proves nothing)
	_ms=$(sed -n 's/^client: [0-9]* writes ok in \([0-9]*\) ms$/\1/p' \
		"$tap_tmp/c.alive")
	[ -n "$_ms" ] && [ "$_ms" -ge $((peer_ms * 3)) ]
	ok $? "$_r: the writes took at least 3 peer timeouts (${_ms:-?} ms)"

	# the link cut: every packet host 2 sends is lost
	fab exec "$name" 2 tc qdisc del dev eth0 root
	_cut=$(date +%s%3N)
	fab drop "$name" 2 0 on >/dev/null
	wait $spid
	_src=$?
	_line=$(grep "^server: disconnected" "$tap_tmp/s.alive")
	_disc=$(echo "$_line" | sed -n 's/.* at \([0-9]*\), .*/\1/p')
	[ -n "$_disc" ] && [ "$_disc" -ge "$_cut" ] &&
		echo "$_line" | grep -q "(-110: "
	ok $? "$_r: the cut client declared dead: $_line"
	[ -n "$_disc" ] && [ "$_disc" -ge "$_cut" ] &&
		[ $((_disc - _cut)) -le $((peer_ms + slack)) ]
	ok $? "$_r: within the peer timeout $peer_ms ms + $slack ms: $((${_disc:-0} - _cut)) ms after the cut"
	ok $_src "$_r: server exit $_src"
	[ $_src -eq 0 ] || show_log "$tap_tmp/s.alive"
	kill -TERM $cpid 2>/dev/null
	wait $cpid
	show_log "$tap_tmp/c.alive"
	fab drop "$name" 2 0 off >/dev/null
}
round "round 1" "$peer_ms" "$chunk"
round "round 2" $((peer_ms * 10)) "$size"

done_testing
