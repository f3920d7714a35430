#!/bin/sh
# rc-edge-hosts.sh -- the requester's and the responder's rules of RC
# between two hosts of the namespace fabric (softrdma's RoCE v2 path,
# soft/net.c, SOFTRDMA_NET=1), tests/netns/rc_peer's edgeserver/edgeclient:
# a SEND with IBV_SEND_FENCE behind a READ into its buffer carries what
# the READ fetched; two fetch-and-adds in flight whose first atomic ACK is
# lost (SOFTRDMA_TEST_NETFAULT=atmack=N) are answered again from the
# results saved for their PSNs, never executed twice; SQD: a SEND in
# flight completes before IBV_EVENT_SQ_DRAINED, SENDs posted in SQD wait
# for RTS; requests forged on
# the wire with a length their opcode cannot have at the path MTU, or a
# WRITE inside a SEND, refused as invalid requests (the QP in ERR); a CQ
# overrun on each side puts that side's QP in ERR with IBV_EVENT_QP_FATAL
# (rc_peer overrunserver/overrunclient); then the hosts' agents are gone.
. "$top_srcdir/tests/lib.sh"
peer=$top_builddir/tests/netns/rc_peer
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
[ -x "$peer" ] || skip_all "tests/netns/rc_peer not built"
hosts_stem=reh
. "$top_srcdir/tests/netns/hosts-lib.sh"

fab up "$name" 2 1
ok $? "fabric of 2 hosts up"
a1=$(fab addr "$name" 1)

port=18801
# under RDMAMSG_TEST_VALGRIND=1 both peers run under memcheck: errors and
# definite leaks fail them (exit 99)
vg=$(valgrind_cmd)
# edge_pair WHAT [ENV...] -- rc_peer edgeserver on host 1, edgeclient on
# host 2, both with ENV; every check of the client's TAP must pass
edge_pair() {
	_what=$1
	shift
	port=$((port + 1))
	on 1 "$@" timeout -k 10 300 $vg "$peer" edgeserver $port \
		>"$tap_tmp/server.log" 2>&1 &
	_spid=$!
	tap_pids="$tap_pids $_spid"
	listening 1 $port
	ok $? "$_what: rc_peer edgeserver listens on host 1"
	on 2 "$@" timeout -k 10 300 $vg "$peer" edgeclient "$a1" $port \
		>"$tap_tmp/client.tap" 2>&1
	_rc=$?
	tap_passed "$tap_tmp/client.tap" $_rc
	ok $? "$_what: every rc_peer check passed (client exit $_rc)"
	wait $_spid
	_rc=$?
	ok $_rc "$_what: rc_peer edgeserver exits 0"
	[ $_rc -ne 0 ] && show_log "$tap_tmp/server.log"
}

# timeout 14 (67 ms): a lost atomic ACK asked again after the timer
# costs little; 17 under valgrind
lt=RC_PEER_TIMEOUT=14
[ "${RDMAMSG_TEST_VALGRIND:-0}" = 1 ] && lt=RC_PEER_TIMEOUT=17
edge_pair "no loss" $lt
# (never every second: the first atomic's answer would be lost each time,
# its repeats with it, on a wire as here)
edge_pair "every third atomic ACK lost" $lt SOFTRDMA_TEST_NETFAULT=atmack=3
edge_pair "every fifth atomic ACK lost" $lt SOFTRDMA_TEST_NETFAULT=atmack=5

# malformed requests forged on the wire (a good ICRC, the expected PSN):
# a length the opcode cannot have at the path MTU, a WRITE inside a SEND
port=$((port + 1))
on 1 timeout -k 10 300 $vg "$peer" forgeserver $port >"$tap_tmp/server.log" 2>&1 &
_spid=$!
tap_pids="$tap_pids $_spid"
listening 1 $port
ok $? "forged: rc_peer forgeserver listens on host 1"
on 2 timeout -k 10 300 $vg "$peer" forgeclient "$a1" $port \
	>"$tap_tmp/client.tap" 2>&1
_rc=$?
tap_passed "$tap_tmp/client.tap" $_rc
ok $? "forged: every malformed request refused, the good one taken (client exit $_rc)"
wait $_spid
_rc=$?
ok $_rc "forged: rc_peer forgeserver exits 0"
[ $_rc -ne 0 ] && show_log "$tap_tmp/server.log"

# a CQ overrun on both sides: three SENDs into one-entry CQs (the
# server's receive CQ, the client's send CQ); each QP goes to ERR with
# IBV_EVENT_QP_FATAL beside the CQ's IBV_EVENT_CQ_ERR
port=$((port + 1))
on 1 $lt timeout -k 10 300 $vg "$peer" overrunserver $port \
	>"$tap_tmp/server.log" 2>&1 &
_spid=$!
tap_pids="$tap_pids $_spid"
listening 1 $port
ok $? "overrun: rc_peer overrunserver listens on host 1"
on 2 $lt timeout -k 10 300 $vg "$peer" overrunclient "$a1" $port \
	>"$tap_tmp/client.tap" 2>&1
_rc=$?
tap_passed "$tap_tmp/client.tap" $_rc
ok $? "overrun: both QPs in ERR with QP_FATAL, the CQs' CQ_ERR (client exit $_rc)"
wait $_spid
_rc=$?
ok $_rc "overrun: rc_peer overrunserver exits 0"
[ $_rc -ne 0 ] && show_log "$tap_tmp/server.log"

agent_gone 1 && agent_gone 2
ok $? "the hosts' agents exited after their last client"
done_testing
