#!/bin/sh
# mcast-hosts.sh -- UD multicast between three hosts of the namespace fabric
# over softrdma's RoCE v2 path (soft/net.c, SOFTRDMA_NET=1): one packet to
# the group's IP address reaches every host whose QPs are attached.
#   Debian's mckey (rdmacm-utils): sender on host 1, receivers on hosts 2
#   (two QPs) and 3 (two processes), joined through rdma_join_multicast;
#   the hosts join the IP group (IGMP) with their first member and leave
#   it with their last.
#   rdmamsg multicast groups (tests/netns/mc_peer): one publisher on host
#   1, subscribers on hosts 1, 2 and 3, messages of mixed sizes (8 B ..
#   64 KiB, fragmented ones too), each subscriber checks every message
#   (one publisher, consecutive sequence numbers, size and contents):
#   reliable mode, 3,000 messages: nothing lost, nothing twice;
#   default mode with 1% and then 10% loss on host 3's link (tc; netem
#   where the kernel has it): every subscriber accounts for every message
#   exactly (received + reported lost == published, each loss report
#   where its gap is), host 3 reports losses;
#   reliable mode with 1% and then 10% loss on host 3's link: nothing
#   lost, nothing twice; host 3's selective NAKs are repaired by unicast
#   (the publisher's unicast and multicast repair counters), hosts 1 and
#   2 see (next to) no duplicates;
#   the long run: 1,000,000 messages of a mostly-small mix (8 B .. 64 KiB,
#   see below; fewer under the sanitizers and valgrind), reliable mode,
#   every one to every host, in order, checked;
#   over IPv6 (a group of ff0e::/16) from host 1 to host 3.
#   tshark decodes the captured packets: those to the groups are UD
#   SEND_ONLY to QPN 0xFFFFFF, nothing malformed.
# Then the hosts' agents are gone.
. "$top_srcdir/tests/lib.sh"
peer=$top_builddir/tests/netns/mc_peer
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
[ -x "$peer" ] || skip_all "tests/netns/mc_peer not built"
hosts_stem=mch
. "$top_srcdir/tests/netns/hosts-lib.sh"

# jumbo frames: softrdma's port MTU is 4096 whatever the interface's, and
# a full UD datagram is 4096 + 52 bytes on the wire (see soft/README.md)
fab up "$name" 3 1 9000
ok $? "fabric of 3 hosts up (MTU 9000)"

n=3000
[ "${RDMAMSG_TEST_SCALE:-}" = small ] && n=300
[ "${RDMAMSG_TEST_VALGRIND:-0}" = 1 ] && n=300
window=256

capture_start "$tap_tmp/mc.pcap"

# ---- mckey: rdma_cm's multicast join between hosts --------------------
# host 2: one process with two QPs attached (-c 2); host 3: two processes;
# each QP gets every datagram once
igmp_has() { # HOST: does the host belong to 239.1.2.50 (as the kernel
	# prints it: 320201EF)?
	fab exec "$name" "$1" cat /proc/net/igmp | grep -q 320201EF
}
if command -v mckey >/dev/null 2>&1; then
	mk=239.1.2.50
	for r in 2:c 3:a 3:b; do
		h=${r%%:*}
		c=
		[ "${r#*:}" = c ] && c="-c 2"
		# (stdbuf: its lines as they come, "receiving" once joined)
		# shellcheck disable=SC2086
		on $h env LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 120 \
			stdbuf -oL mckey -m $mk -b "$(fab addr "$name" $h)" $c \
			-C 50 -S 1000 >"$tap_tmp/mckey${r#*:}$h.log" 2>&1 &
		eval "mkpid${r#*:}$h=\$!"
		tap_pids="$tap_pids $!"
	done
	wait_line "$tap_tmp/mckeyc2.log" "receiving data transfers" &&
		wait_line "$tap_tmp/mckeya3.log" "receiving data transfers" &&
		wait_line "$tap_tmp/mckeyb3.log" "receiving data transfers"
	ok $? "mckey: receivers on hosts 2 (two QPs) and 3 (two processes) joined $mk"
	igmp_has 2 && igmp_has 3 && ! igmp_has 1
	ok $? "hosts 2 and 3 are members of $mk (IGMP), host 1 is not"
	on 1 env LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 120 \
		mckey -m $mk -b "$(fab addr "$name" 1)" -s -C 50 -S 1000 \
		>"$tap_tmp/mckey1.log" 2>&1
	ok $? "mckey: sender on host 1 sent 50 x 1000 B to $mk"
	for r in c2 a3 b3; do
		eval wait \$mkpid$r
		rc=$?
		[ $rc -eq 0 ] && grep -q "data transfers complete" \
			"$tap_tmp/mckey$r.log"
		ok $? "mckey: receiver $r got all 50 on each QP (exit $rc)"
		[ $rc -ne 0 ] && show_log "$tap_tmp/mckey$r.log"
	done
	_i=0
	while [ $_i -lt 100 ] && { igmp_has 2 || igmp_has 3; }; do
		sleep 0.1
		_i=$((_i + 1))
	done
	! igmp_has 2 && ! igmp_has 3
	ok $? "hosts 2 and 3 left $mk with their last member"
else
	skip "mckey between hosts" "mckey not installed (Debian package rdmacm-utils)"
fi

# ---- rdmamsg multicast groups on three hosts --------------------------
# round WHAT WINDOW N [LOSSY] -- publisher on host 1, subscribers on
# hosts 1, 2, 3, N messages (MC_PEER_MIX from the environment); reliable
# mode (WINDOW > 0): every subscriber gets all N, checked; default mode
# (WINDOW 0): every subscriber accounts for all N exactly (received +
# reported lost == N, every message checked, every loss report where the
# gap is), and host LOSSY (its link drops) reports some lost
gr=239.1.2.40
# (each UD QP's softrdma counters on its process's stderr as it goes: a
# subscriber's log shows them when it fails, with the publisher's)
SOFTRDMA_UD_STATS=1
export SOFTRDMA_UD_STATS
round() {
	# the last round's logs go first: a background job's redirection
	# empties its log only when the job runs, and a "joined" of the last
	# round read before that started the publisher ahead of subscribers
	# that then joined late (a CI run: all three began at message 1081)
	rm -f "$tap_tmp/stop" "$tap_tmp"/sub[123].log
	_bad=0
	for h in 1 2 3; do
		on $h timeout -k 10 900 "$peer" sub $gr "$(fab addr "$name" $h)" \
			"$3" "$2" >"$tap_tmp/sub$h.log" 2>"$tap_tmp/sub$h.err" &
		eval spid$h=\$!
		tap_pids="$tap_pids $!"
	done
	_j=0
	for h in 1 2 3; do
		wait_line "$tap_tmp/sub$h.log" "^joined" && _j=$((_j + 1))
	done
	[ $_j -eq 3 ]
	ok $? "$1: subscribers on hosts 1, 2 and 3 joined $gr"
	on 1 timeout -k 10 900 "$peer" pub $gr "$(fab addr "$name" 1)" "$3" \
		"$2" 3 "$tap_tmp/stop" >"$tap_tmp/pub.log" 2>&1 &
	_ppid=$!
	tap_pids="$tap_pids $_ppid"
	for h in 1 2 3; do
		eval wait \$spid$h
		_rc=$?
		# received R lost L bad B naks N duplicates D gaps G ms T
		set -- "$1" "$2" "$3" "${4:-0}" $(sed -n 's/^received //p' \
			"$tap_tmp/sub$h.log")
		if [ "$2" -gt 0 ]; then
			[ $_rc -eq 0 ] && [ "${5:-}" = "$3" ] &&
				[ "${7:-}" = 0 ] && [ "${9:-}" = 0 ]
			ok $? "$1: host $h got all $3 messages, in order, content checked (exit $_rc)"
		else
			[ $_rc -eq 0 ] && [ "${9:-}" = 0 ] &&
				[ $((${5:-0} + ${7:-0})) -eq "$3" ] &&
				{ [ "$h" != "$4" ] || [ "${7:-0}" -gt 0 ]; }
			ok $? "$1: host $h: ${5:-?} received + ${7:-?} reported lost (${15:-?} gaps) == $3 published, in order, content checked (exit $_rc)"
		fi
		[ $_rc -ne 0 ] && show_log "$tap_tmp/sub$h.err" && _bad=1
		set -- "$1" "$2" "$3" "$4"
		sed -n 's/^received/#   host '"$h"': received/p' "$tap_tmp/sub$h.log"
	done
	: >"$tap_tmp/stop"
	wait $_ppid
	_rc=$?
	[ $_rc -eq 0 ] &&
		grep -q "^published $3, completed $3, failed 0" "$tap_tmp/pub.log"
	ok $? "$1: the publisher's $3 publishes completed once each (exit $_rc)"
	[ $_rc -ne 0 ] && show_log "$tap_tmp/pub.log"
	sed -n 's/^repairs/#   publisher: repairs/p' "$tap_tmp/pub.log"
	[ $_bad = 1 ] && sed -n 's/^softrdma:/#   publisher: softrdma:/p' \
		"$tap_tmp/pub.log"
}
# field FIELD HOST -- the number after FIELD in host HOST's last line
field() {
	sed -n 's/^received.* '"$1"' \([0-9]*\).*/\1/p' "$tap_tmp/sub$2.log"
}
round "reliable" $window $n
capture_stop
# host 1's subscriber has the publisher's datagrams through shared memory
# only, not a second copy through the loopback (that would show as
# duplicates; repairs would too, but there were none if nobody NAKed)
naks=$(($(field naks 1) + $(field naks 2) + $(field naks 3)))
dup1=$(field duplicates 1)
if [ "$naks" -eq 0 ]; then
	[ "${dup1:-x}" = 0 ]
	ok $? "host 1 (the publisher's): no second copy ($dup1 duplicates)"
else
	skip "host 1: no second copy" "$naks NAKs: repairs make duplicates"
fi
# softrdma's counters (SOFTRDMA_UD_STATS) agree: host 1's subscriber had
# its datagrams placed in its buffers by the publisher (one copy), hosts
# 2 and 3 had them from the wire (none placed), and each received no
# fewer than its group counted
_ok=0
for h in 1 2 3; do
	# "received R (placed P)"
	r=$(sed -n 's/^softrdma: UD QP [0-9]*: received \([0-9]*\) .*/\1/p' \
		"$tap_tmp/sub$h.err")
	p=$(sed -n 's/^softrdma: UD QP [0-9]*: .*(placed \([0-9]*\)).*/\1/p' \
		"$tap_tmp/sub$h.err")
	d=$(field datagrams $h)
	echo "#   host $h: softrdma received ${r:-?}, placed ${p:-?}; the group counted ${d:-?}"
	[ -n "$r" ] && [ -n "$p" ] && [ "${d:-0}" -gt 0 ] && [ "$r" -ge "$d" ] ||
		_ok=1
	case $h:$p in 1:0 | [23]:[1-9]*) _ok=1 ;; esac
done
[ $_ok = 0 ]
ok $? "softrdma's counters: host 1's datagrams placed by the publisher, hosts 2 and 3's from the wire, none fewer than the group counted"

# loss on host 3's link (both ways), default mode: every gap reported
for pc in 1 10; do
	how=$(fab loss "$name" 3 0 $pc)
	ok $? "$pc% loss on host 3's link: $how"
	# host 3 must report losses, but 300 messages at 1% may lose none
	lossy=3
	[ $pc = 1 ] && [ $n -lt 3000 ] && lossy=0
	round "default mode, $pc% loss at host 3" 0 $n $lossy
	fab loss "$name" 3 0 off
done

# reliable mode, 1% and then 10% loss: nothing lost, nothing twice; the
# repairs go by unicast to host 3, so hosts 1 and 2 see (next to) no
# duplicates: they are held only by the flow control
# (min: the window of the slowest; that the max and tagged strategies do
# not wait for a subscriber that lags is tests/group/mcast's "flow")
for pc in 1 10; do
	how=$(fab loss "$name" 3 0 $pc)
	ok $? "$pc% loss on host 3's link: $how"
	round "reliable, $pc% loss at host 3" $window $n
	fab loss "$name" 3 0 off
	naks=$(field naks 3)
	if [ $pc = 1 ] && [ $n -lt 3000 ]; then
		# 300 messages at 1% may lose none
		skip "host 3 asked for repairs" "$n messages at 1% loss: ${naks:-0} NAKs"
	else
		[ "${naks:-0}" -gt 0 ]
		ok $? "$pc% loss: host 3 asked for repairs: ${naks:-0} NAKs"
	fi
	set -- $(sed -n 's/^repairs //p' "$tap_tmp/pub.log")
	# repairs R unicast U multicast M naks N
	[ $((${3:-0} + ${5:-0})) -eq "${1:-x}" ] &&
		{ [ "${naks:-0}" -eq 0 ] || [ "${3:-0}" -gt 0 ]; }
	ok $? "$pc% loss: the publisher's repairs: ${1:-?} = ${3:-?} by unicast + ${5:-?} by multicast"
	d1=$(field duplicates 1)
	d2=$(field duplicates 2)
	k1=$(field naks 1)
	k2=$(field naks 2)
	[ "${d1:-x}" -le $((n / 100)) ] && [ "${d2:-x}" -le $((n / 100)) ]
	ok $? "$pc% loss: hosts 1 and 2 (no loss; ${k1:-?} and ${k2:-?} NAKs) dropped ${d1:-?} and ${d2:-?} duplicates (1% at most: repairs went to host 3 alone)"
done

# ---- the long run: 1,000,000 messages on three hosts -------------------
# mostly small (MC_PEER_MIX=small: 90% 8 .. 255 B, 9% up to 4 KiB, 1% up
# to 20 KiB, 0.1% 64 KiB), reliable mode, no loss: every subscriber gets
# every message once, in order, content checked.  1,000,000 in plain
# builds; 100,000 under the sanitizers and with RDMAMSG_TEST_SCALE=small;
# 10,000 under valgrind; RDMAMSG_TEST_MC_HOSTS_MSGS=N sets another count.
nl=1000000
[ -n "${SAN_PRELOAD:-}" ] && nl=100000
[ "${RDMAMSG_TEST_SCALE:-}" = small ] && nl=100000
[ "${RDMAMSG_TEST_VALGRIND:-0}" = 1 ] && nl=10000
nl=${RDMAMSG_TEST_MC_HOSTS_MSGS:-$nl}
MC_PEER_MIX=small
export MC_PEER_MIX
round "long run" $window $nl
unset MC_PEER_MIX

# IPv6: a group of ff0e::/16 from host 1 to host 3, reliable mode
n6=300
g6=ff0e::1:40
rm -f "$tap_tmp/stop"
on 3 timeout -k 10 300 "$peer" sub $g6 fd00:e7:0::3 $n6 $window \
	>"$tap_tmp/sub6.log" 2>"$tap_tmp/sub6.err" &
spid6=$!
tap_pids="$tap_pids $spid6"
wait_line "$tap_tmp/sub6.log" "^joined"
ok $? "IPv6: subscriber on host 3 joined $g6"
on 1 timeout -k 10 300 "$peer" pub $g6 fd00:e7:0::1 $n6 $window 1 \
	"$tap_tmp/stop" >"$tap_tmp/pub6.log" 2>&1 &
ppid6=$!
tap_pids="$tap_pids $ppid6"
wait $spid6
rc=$?
grep -q "^received $n6 lost 0 bad 0 " "$tap_tmp/sub6.log" && [ $rc -eq 0 ]
ok $? "IPv6: host 3 got all $n6 messages, in order, content checked (exit $rc)"
[ $rc -ne 0 ] && show_log "$tap_tmp/sub6.err"
: >"$tap_tmp/stop"
wait $ppid6
rc=$?
[ $rc -eq 0 ] && grep -q "^published $n6, completed $n6, failed 0" \
	"$tap_tmp/pub6.log"
ok $? "IPv6: the publisher's $n6 publishes completed once each (exit $rc)"

# ---- tshark on the capture of mckey and the first round ---------------
if [ -n "$cap" ]; then
	# the payloads are test data: none of the protocols tshark finds in
	# InfiniBand payloads by heuristics (FC, Ethernet, SDP, RPC...) may
	# take them for its own and call them malformed
	noproto=
	for p in fcoib rpcordma infiniband_sdp smc smb_direct nvme-rdma \
		lnet iser drbd; do
		noproto="$noproto --disable-protocol $p"
	done
	tsh() {
		# (older tshark may not know these heuristics' names)
		# shellcheck disable=SC2086
		HOME=$tap_tmp tshark -n $noproto --disable-heuristic eth_over_ib \
			--disable-heuristic mellanox_eoib -r "$cap" "$@" \
			2>>"$tap_tmp/tshark.err" ||
			HOME=$tap_tmp tshark -n $noproto -r "$cap" "$@" \
				2>>"$tap_tmp/tshark.err"
	}
	tsh -T fields -E separator=' ' -e ip.dst -e infiniband.bth.opcode \
		-e infiniband.bth.destqp -e infiniband.deth.q_key -e udp.length \
		>"$tap_tmp/pk"
	nf=$(wc -l <"$tap_tmp/pk")
	# to a group: UD SEND_ONLY (100) or SEND_ONLY_WITH_IMM (101), QPN
	# 0xFFFFFF; mckey's: with immediate, RDMA_UDP_QKEY, 1000 B (UDP 8 +
	# BTH 12 + DETH 8 + ImmDt 4 + 1000 + ICRC 4)
	awk '$1 ~ /^239\./ { m++; if (($2 != 100 && $2 != 101) ||
		$3 !~ /^0x0*ffffff$/) { bad++; print > "/dev/stderr" } }
	     $1 == "239.1.2.50" { k++; if ($2 != 101 ||
		$4 !~ /^0x0*1234567$/ || $5 != 1036) bad++ }
	     $2 == "" { bad++ }
	     END { print m + 0, k + 0, bad + 0 }' "$tap_tmp/pk" \
		>"$tap_tmp/pkn" 2>"$tap_tmp/pkbad"
	head -n 3 "$tap_tmp/pkbad" | sed 's/^/#   /'
	read -r nm nk nbad <"$tap_tmp/pkn"
	if [ "$nf" -eq 0 ]; then
		# (a capture on a loaded machine may miss some, or all)
		skip "tshark decodes the capture" "dumpcap captured nothing"
	else
		[ "$nm" -gt 0 ] && [ "$nbad" -eq 0 ]
		ok $? "tshark: $nf packets decode as InfiniBand, $nm to the groups as UD SEND_ONLY to QPN 0xFFFFFF ($nk from mckey: with immediate, Q_Key 0x01234567, 1000 B), $nbad not"
		tsh -V >"$tap_tmp/verbose"
		! grep -Eiq 'malformed|exception|bad checksum|\[Expert Info \((Error|Warning)' \
			"$tap_tmp/verbose"
		ok $? "tshark -V: nothing malformed, no error or warning"
		# the first one, with the layers (unindented lines) of its frame
		awk '/^Frame / { n = 0 } /^[^ ]/ { l[n++] = $0 }
		     /[Mm]alformed|[Ee]xception|Expert Info/ {
			for (i = 0; i < n; i++) print l[i]; print; exit }' \
			"$tap_tmp/verbose" | sed 's/^/#   /'
	fi
else
	skip "tshark decodes the capture" "dumpcap or tshark not installed"
fi

agent_gone 1 && agent_gone 2 && agent_gone 3
ok $? "the hosts' agents exit after their last client"
done_testing
