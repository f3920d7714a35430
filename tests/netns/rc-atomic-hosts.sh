#!/bin/sh
# rc-atomic-hosts.sh -- RDMA atomic write (IBV_WR_ATOMIC_WRITE) between two
# hosts of the namespace fabric (softrdma's RoCE v2 path, soft/net.c,
# SOFTRDMA_NET=1), tests/netns/rc_peer's awserver/awclient: the opcode rxe
# sends (ATOMIC_WRITE, 0x1d), 8 bytes placed intact and the words around
# untouched, an inline one, a misaligned address an invalid request, an
# rkey without remote write a remote access error; with the atomic
# write's answer lost (SOFTRDMA_TEST_NETFAULT=rdlast=1000: the server's
# first READ response) it is sent again after the timer, completes once,
# and its repeat is not placed a second time.  Then the requester's
# max_rd_atomic: with 1, two READs and a fetch-and-add posted back to back
# are sent one at a time (seen on a capture of host 1's interface), with
# 0 a READ waits until the QP is given 1 (rxe's rd_atomic counter).
. "$top_srcdir/tests/lib.sh"
peer=$top_builddir/tests/netns/rc_peer
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
[ -x "$peer" ] || skip_all "tests/netns/rc_peer not built"
hosts_stem=rah
. "$top_srcdir/tests/netns/hosts-lib.sh"

fab up "$name" 2 1
ok $? "fabric of 2 hosts up"
a1=$(fab addr "$name" 1)

port=18841
# under RDMAMSG_TEST_VALGRIND=1 both peers run under memcheck: errors and
# definite leaks fail them (exit 99)
vg=$(valgrind_cmd)
# pair WHAT SERVER CLIENT [ENV...] -- rc_peer SERVER on host 1 and
# CLIENT (its arguments after the address and port) on host 2, both with
# ENV; every check of the client's TAP must pass
pair() {
	_what=$1
	_srv=$2
	_cli=$3
	shift 3
	port=$((port + 1))
	on 1 "$@" timeout -k 10 300 $vg "$peer" $_srv $port \
		>"$tap_tmp/server.log" 2>&1 &
	_spid=$!
	tap_pids="$tap_pids $_spid"
	listening 1 $port
	ok $? "$_what: rc_peer $_srv listens on host 1"
	# shellcheck disable=SC2086
	on 2 "$@" timeout -k 10 300 $vg "$peer" ${_cli%% *} "$a1" $port \
		${_cli#* } >"$tap_tmp/client.tap" 2>&1
	_rc=$?
	tap_passed "$tap_tmp/client.tap" $_rc
	ok $? "$_what: every rc_peer check passed (client exit $_rc)"
	wait $_spid
	_rc=$?
	ok $_rc "$_what: rc_peer $_srv exits 0"
	[ $_rc -ne 0 ] && show_log "$tap_tmp/server.log"
}

# timeout 14 (67 ms): the lost answer asked again soon; 17 under valgrind
lt=RC_PEER_TIMEOUT=14
[ "${RDMAMSG_TEST_VALGRIND:-0}" = 1 ] && lt=RC_PEER_TIMEOUT=17
pair "atomic write" awserver "awclient none" $lt
pair "atomic write, its answer lost" awserver "awclient lost" $lt \
	SOFTRDMA_TEST_NETFAULT=rdlast=1000

# max_rd_atomic 1: two READs of 16 KiB (16 packets each at MTU 1024) and a
# fetch-and-add posted back to back, the first READ's last response packet
# lost (rdlast=1000) so that it is asked for again after the timer; on the
# wire at host 1, no request leaves before the response of the one before
# it has ended (rxe_req.c's check_init_depth); then a READ with
# max_rd_atomic 0 waits until the QP is given 1.  A capture needs dumpcap
# and tshark; without them the client's checks alone run.
capture_start "$tap_tmp/rda.pcap" || diag "dumpcap or tshark missing: no capture"
pair "max_rd_atomic" rdaserver "rdaclient" $lt RC_PEER_RD_ATOMIC=1 \
	SOFTRDMA_TEST_NETFAULT=rdlast=1000
if [ -n "$cap" ]; then
	capture_stop
	p0=$(sed -n 's/^ *# rda psn \([0-9]*\)$/\1/p' "$tap_tmp/client.tap")
	HOME=$tap_tmp tshark -n -r "$cap" -T fields -e infiniband.bth.opcode \
		-e infiniband.bth.psn >"$tap_tmp/rda.txt" 2>"$tap_tmp/tshark.err"
	# the first request of each of the three (READ 12, FETCH_ADD 20) at
	# P, P+16, P+32 must come after the first response ending the one
	# before, at P+15, P+31 (READ_RESP_LAST 15, or READ_RESP_ONLY 16 to
	# the request asking again for the last packet); a request before
	# that response had two in flight
	awk -v p0="${p0:-x}" '
	function at(k) { return (p0 + k) % 16777216 }
	p0 == "x" { exit 2 }
	{ n++ }
	$1 == 12 && $2 == at(0) && !r1 { r1 = n }
	($1 == 15 || $1 == 16) && $2 == at(15) && !e1 { e1 = n }
	$1 == 12 && $2 == at(16) && !r2 { r2 = n }
	($1 == 15 || $1 == 16) && $2 == at(31) && !e2 { e2 = n }
	$1 == 20 && $2 == at(32) && !r3 { r3 = n }
	END {
		printf "# frames %d: READ 1 at %d, its end at %d; READ 2 at %d, its end at %d; fetch-and-add at %d\n", n, r1, e1, r2, e2, r3
		exit !(r1 && e1 && r2 && e2 && r3 && r1 < e1 && e1 < r2 && r2 < e2 && e2 < r3)
	}' "$tap_tmp/rda.txt" >"$tap_tmp/rda.awk"
	_rc=$?
	cat "$tap_tmp/rda.awk"
	[ $_rc -eq 0 ]
	ok $? "max_rd_atomic 1 on the wire: each request after the response before it"
	[ $_rc -ne 0 ] && show_log "$tap_tmp/tshark.err"
fi

agent_gone 1 && agent_gone 2
ok $? "the hosts' agents exited after their last client"
done_testing
