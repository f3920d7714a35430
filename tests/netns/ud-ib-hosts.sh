#!/bin/sh
# ud-ib-hosts.sh -- UD routed by LID between two hosts of the namespace
# fabric over softrdma's InfiniBand mode (SOFTRDMA_LINK=ib with
# SOFTRDMA_NET=1: port 1 on rail 1, its LID the low 16 bits of the rail's
# address; soft/iblink.c): Debian's ibv_ud_pingpong without -g, so its
# address handles have no GRH (is_global 0, the peer's LID and SL 3),
# each host the server once, polling and then sleeping on events; -c:
# ibv_ud_pingpong checks every buffer it receives.  The datagrams carry
# the SL and "no GRH" in the DETH's reserved byte (soft/roce.h); the
# receiver takes the sender's LID from its rail address.  Then
# ud_lid_peer checks what the completions say: no IBV_WC_GRH (the GRH
# area untouched), the sender's LID as SLID, the AV's SL; a global AV's
# datagram with its GRH; the answer through ibv_create_ah_from_wc.
. "$top_srcdir/tests/lib.sh"
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
command -v ibv_ud_pingpong >/dev/null 2>&1 ||
	skip_all "ibv_ud_pingpong not installed (Debian package ibverbs-utils)"
hosts_stem=uib
. "$top_srcdir/tests/netns/hosts-lib.sh"

fab up "$name" 2 2
ok $? "fabric of 2 hosts on 2 rails up"

# lid_of ADDR -- the LID of an address: its low 16 bits, as 0x%04x
lid_of() {
	echo "$1" | awk -F. '{ printf "0x%04x", $3 * 256 + $4 }'
}
iters=200
port=18801
# host 1 the server polling, then host 2 sleeping on events
for srv in 1 2; do
	cli=$((3 - srv))
	mode=polling
	ev=
	[ "$srv" = 2 ] && mode=events && ev=-e
	port=$((port + 1))
	a=$(fab addr "$name" "$srv" 0)
	on "$srv" env SOFTRDMA_LINK=ib LD_PRELOAD="$SOFTRDMA_PRELOAD" \
		timeout -k 10 120 ibv_ud_pingpong -p $port -n $iters -s 1024 \
		-l 3 -c $ev >"$tap_tmp/pp-s.log" 2>&1 &
	spid=$!
	tap_pids="$tap_pids $spid"
	listening "$srv" $port
	ok $? "ibv_ud_pingpong ($mode): server listens on host $srv"
	on "$cli" env SOFTRDMA_LINK=ib LD_PRELOAD="$SOFTRDMA_PRELOAD" \
		timeout -k 10 120 ibv_ud_pingpong -p $port -n $iters -s 1024 \
		-l 3 -c $ev "$a" >"$tap_tmp/pp-c.log" 2>&1
	rc=$?
	wait $spid
	src=$?
	[ $rc -eq 0 ] && [ $src -eq 0 ] &&
		grep -q "$((iters * 1024 * 2)) bytes in" "$tap_tmp/pp-c.log" &&
		grep -q "$iters iters" "$tap_tmp/pp-s.log" &&
		! grep -q "invalid data" "$tap_tmp/pp-c.log"
	ok $? "ibv_ud_pingpong -c ($mode, no -g: by LID) host $cli <-> host $srv: $iters x 1024 B checked (exit $rc/$src)"
	# each side's LID is its port 1's rail address's, no GID (no GRH)
	ls=$(lid_of "$a")
	lc=$(lid_of "$(fab addr "$name" "$cli" 0)")
	grep -q "local address:  LID $lc, .*GID ::\$" "$tap_tmp/pp-c.log" &&
		grep -q "remote address: LID $ls, .*GID ::\$" "$tap_tmp/pp-c.log"
	ok $? "the client's address LID $lc, the server's LID $ls, no GIDs"
	[ $rc -ne 0 ] || [ $src -ne 0 ] && {
		show_log "$tap_tmp/pp-s.log"
		show_log "$tap_tmp/pp-c.log"
	}
done

# what the completions say (ud_lid_peer): by LID, no GRH, the sender's
# LID as SLID (taken from its rail address), the AV's SL; a global AV's
# datagram has its GRH; the answer through ibv_create_ah_from_wc by LID
lid_peer=$top_builddir/tests/netns/ud_lid_peer
if [ -x "$lid_peer" ]; then
	port=$((port + 1))
	a1=$(fab addr "$name" 1 0)
	l1=$(($(lid_of "$a1")))
	l2=$(($(lid_of "$(fab addr "$name" 2 0)")))
	on 1 env SOFTRDMA_LINK=ib timeout -k 10 60 "$lid_peer" server $port \
		$l2 >"$tap_tmp/lid-s.log" 2>&1 &
	spid=$!
	tap_pids="$tap_pids $spid"
	listening 1 $port
	on 2 env SOFTRDMA_LINK=ib timeout -k 10 60 "$lid_peer" client "$a1" \
		$port $l1 >"$tap_tmp/lid-c.log" 2>&1
	rc=$?
	wait $spid
	src=$?
	tap_passed "$tap_tmp/lid-c.log" $rc && tap_passed "$tap_tmp/lid-s.log" $src
	ok $? "ud_lid_peer: SLID, SL and no GRH by LID; the GRH of a global AV; the answer by LID"
else
	skip "ud_lid_peer: what a LID-routed datagram's completion says" "not built"
fi

agent_gone 1 && agent_gone 2
ok $? "the hosts' agents exit after their last client"
done_testing
