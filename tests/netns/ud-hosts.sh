#!/bin/sh
# ud-hosts.sh -- UD between two hosts of the namespace fabric over
# softrdma's RoCE v2 path (soft/net.c, SOFTRDMA_NET=1): Debian's
# ibv_ud_pingpong -g, polling and events, each side sending through an AH
# made from the peer's GID it was told over TCP (is_global 1); then the
# hosts' agents are gone.
. "$top_srcdir/tests/lib.sh"
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
command -v ibv_ud_pingpong >/dev/null 2>&1 ||
	skip_all "ibv_ud_pingpong not installed (Debian package ibverbs-utils)"
hosts_stem=udh
. "$top_srcdir/tests/netns/hosts-lib.sh"

fab up "$name" 2 1
ok $? "fabric of 2 hosts up"
a1=$(fab addr "$name" 1)

iters=200
port=18701
# the polling run is captured on host 1's interface and decoded by tshark
capture_start "$tap_tmp/ud.pcap"
for mode in polling events; do
	ev=
	[ $mode = events ] && ev=-e
	if [ $mode = events ] && [ -n "$cap" ]; then
		capture_stop
		# every packet a UD SEND_ONLY (opcode 100) with the Q_Key
		# ibv_ud_pingpong uses, 1024 B of payload (UDP 8 + BTH 12 +
		# DETH 8 + 1024 + ICRC 4), both ways
		HOME=$tap_tmp tshark -n -r "$cap" -T fields -E separator=' ' \
			-e infiniband.bth.opcode -e infiniband.deth.q_key \
			-e udp.length >"$tap_tmp/ops" 2>>"$tap_tmp/tshark.err"
		nf=$(wc -l <"$tap_tmp/ops")
		ng=$(grep -c '^100 0x0*11111111 1056$' "$tap_tmp/ops")
		# (not a count: a capture on a loaded machine may miss some,
		# or all: then there is nothing to decode)
		if [ "$nf" -eq 0 ]; then
			skip "tshark decodes the capture" \
				"dumpcap captured none of the packets"
		else
			[ "$ng" -eq "$nf" ]
			ok $? "tshark: $ng of $nf captured packets are UD SEND_ONLY, Q_Key 0x11111111, 1024 B"
			HOME=$tap_tmp tshark -n -r "$cap" -V \
				>"$tap_tmp/verbose" 2>>"$tap_tmp/tshark.err"
			! grep -Eiq 'malformed|exception|bad checksum|\[Expert Info \((Error|Warning)' \
				"$tap_tmp/verbose"
			ok $? "tshark -V: nothing malformed, no error or warning"
		fi
	fi
	port=$((port + 1))
	on 1 env LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 120 \
		ibv_ud_pingpong -g 2 -p $port -n $iters -s 1024 $ev \
		>"$tap_tmp/pp-s.log" 2>&1 &
	spid=$!
	tap_pids="$tap_pids $spid"
	listening 1 $port
	ok $? "ibv_ud_pingpong ($mode): server listens on host 1"
	on 2 env LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 120 \
		ibv_ud_pingpong -g 2 -p $port -n $iters -s 1024 $ev "$a1" \
		>"$tap_tmp/pp-c.log" 2>&1
	rc=$?
	wait $spid
	src=$?
	[ $rc -eq 0 ] && [ $src -eq 0 ] &&
		grep -q "$((iters * 1024 * 2)) bytes in" "$tap_tmp/pp-c.log" &&
		grep -q "$iters iters" "$tap_tmp/pp-s.log"
	ok $? "ibv_ud_pingpong ($mode) host 2 <-> host 1: $iters x 1024 B (exit $rc/$src)"
	[ $rc -ne 0 ] || [ $src -ne 0 ] && {
		show_log "$tap_tmp/pp-s.log"
		show_log "$tap_tmp/pp-c.log"
	}
done
[ -z "$cap" ] && skip "tshark decodes the capture" "dumpcap or tshark not installed"

# the largest datagram is the port's active MTU, 1024 on these 1500-byte
# links (rxe's get_mtu for UD): one byte more is a local length error
mtu_peer=$top_builddir/tests/netns/ud_mtu_peer
if [ -x "$mtu_peer" ]; then
	on 1 timeout -k 10 60 "$mtu_peer" 1024 >"$tap_tmp/mtu.log" 2>&1
	tap_passed "$tap_tmp/mtu.log" $?
	ok $? "ud_mtu_peer: MTU bytes sent, MTU + 1 a local length error"
else
	skip "ud_mtu_peer: the port's MTU bounds a datagram" "not built"
fi

# the GRH of a datagram from the other host is the IP header it came
# with: the AH's hop limit and traffic class on the wire (rxe's
# prepare_ipv4_hdr), the TTL and TOS as received in the GRH
grh_peer=$top_builddir/tests/netns/ud_grh_peer
if [ -x "$grh_peer" ]; then
	port=$((port + 1))
	on 1 timeout -k 10 60 "$grh_peer" server $port \
		>"$tap_tmp/grh-s.log" 2>&1 &
	spid=$!
	tap_pids="$tap_pids $spid"
	listening 1 $port
	on 2 timeout -k 10 60 "$grh_peer" client "$a1" $port \
		>"$tap_tmp/grh-c.log" 2>&1
	rc=$?
	wait $spid
	src=$?
	tap_passed "$tap_tmp/grh-c.log" $rc && tap_passed "$tap_tmp/grh-s.log" $src
	ok $? "ud_grh_peer: hop limit, traffic class and flow label of the AH on the wire and in the receiver's GRH"
else
	skip "ud_grh_peer: the GRH says what the wire carried" "not built"
fi

agent_gone 1 && agent_gone 2
ok $? "the hosts' agents exit after their last client"
done_testing
