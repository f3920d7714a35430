#!/bin/sh
# xrc-hosts.sh -- XRC between two hosts of the namespace fabric over
# softrdma's RoCE v2 path (soft/net.c, SOFTRDMA_NET=1): the initiator's
# process runs RC's requester with the XRCETH on its requests, the target's
# process RC's responder, which takes each message's WQE from the XRC SRQ
# the XRCETH names.  Debian's ibv_xsrq_pingpong, unmodified, by GID (-g 2,
# the host's IPv4 address) and in the InfiniBand mode by LID
# (SOFTRDMA_LINK=ib, two rails); then tests/netns/xrc_peer: 100 messages
# of 1 B to 64 KiB each once, in order and intact, SEND_WITH_IMM, RDMA
# WRITE, WRITE_WITH_IMM, READ and atomics through the target (the SRQ's PD),
# another domain's SRQ (IBV_WC_REM_INV_REQ_ERR), an empty SRQ
# (IBV_WC_RNR_RETRY_EXC_ERR), by GID and by LID, and the traffic checks
# again under softrdma's seeded loss, duplication and reordering, with
# SRQ D of another process of the target's host; and a target whose
# process stops holding D's WQE mid-message and is killed: D's own
# target's message completes past it, the held WQE flushes once the
# holder is dead, not before; in the IB mode, APM: initiator and target
# with armed alternate paths over rail 2, the initiator migrated by hand
# midway, the target when the requests come on its alternate path; an
# SRQ of another process whose ring is corrupt: the initiator's
# IBV_WC_REM_OP_ERR, the target in ERR (IBV_EVENT_QP_FATAL).
# (Before XRC went between hosts, the initiator's and target's RTR was
# refused: EOPNOTSUPP.)
. "$top_srcdir/tests/lib.sh"
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
peer=$top_builddir/tests/netns/xrc_peer
[ -x "$peer" ] || skip_all "tests/netns/xrc_peer not built"
hosts_stem=xrh
. "$top_srcdir/tests/netns/hosts-lib.sh"

fab up "$name" 2 2
ok $? "fabric of 2 hosts on 2 rails up"
a1=$(fab addr "$name" 1 0)
vg=$(valgrind_cmd)
port=18950

# xsrq WHAT ENV... -- ibv_xsrq_pingpong server on host 1, client on host 2,
# with $pp_args (split into words)
# shellcheck disable=SC2086
xsrq() {
	_what=$1
	shift
	port=$((port + 1))
	on 1 "$@" LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 120 \
		ibv_xsrq_pingpong $pp_args -p $port -n 100 -s 5000 \
		>"$tap_tmp/xs-s.log" 2>&1 &
	_spid=$!
	tap_pids="$tap_pids $_spid"
	listening 1 $port
	on 2 "$@" LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 120 \
		ibv_xsrq_pingpong $pp_args -p $port -n 100 -s 5000 "$a1" \
		>"$tap_tmp/xs-c.log" 2>&1
	_rc=$?
	wait $_spid
	_src=$?
	[ $_rc -eq 0 ] && [ $_src -eq 0 ] &&
		grep -q success "$tap_tmp/xs-c.log" &&
		grep -q success "$tap_tmp/xs-s.log"
	ok $? "ibv_xsrq_pingpong $_what host 2 -> host 1: 100 x 5000 B each way (exit $_rc/$_src)"
	if [ $_rc -ne 0 ] || [ $_src -ne 0 ]; then
		show_log "$tap_tmp/xs-s.log"
		show_log "$tap_tmp/xs-c.log"
	fi
}

if command -v ibv_xsrq_pingpong >/dev/null 2>&1; then
	# ibv_xsrq_pingpong opens /tmp/xrc_domain (O_CREAT) and leaves it;
	# removed at the end when this test made it
	[ -e /tmp/xrc_domain ] || xrc_file=/tmp/xrc_domain
	pp_args="-g 2"
	xsrq "(by GID, -g 2)"
	pp_args="-e -g 2"
	xsrq "(by GID, events)"
	pp_args=
	xsrq "(IB mode, by LID)" SOFTRDMA_LINK=ib
	[ -z "${xrc_file:-}" ] || rm -f "$xrc_file"
else
	skip "ibv_xsrq_pingpong" "not installed (Debian package ibverbs-utils)"
fi

# peer WHAT MODE ENV... -- xrc_peer server on host 1, client on host 2,
# under $vg (valgrind's command line, split into words) if set
# shellcheck disable=SC2086
peer() {
	_what=$1
	_mode=$2
	shift 2
	port=$((port + 1))
	on 1 "$@" timeout -k 10 300 $vg "$peer" server $port "$_mode" \
		>"$tap_tmp/peer-s.tap" 2>&1 &
	_spid=$!
	tap_pids="$tap_pids $_spid"
	listening 1 $port
	on 2 "$@" timeout -k 10 300 $vg "$peer" client "$a1" $port "$_mode" \
		>"$tap_tmp/peer-c.tap" 2>&1
	_rc=$?
	wait $_spid
	_src=$?
	tap_passed "$tap_tmp/peer-c.tap" $_rc
	ok $? "xrc_peer $_what: the initiator's checks (exit $_rc)"
	tap_passed "$tap_tmp/peer-s.tap" $_src
	ok $? "xrc_peer $_what: the target's checks (exit $_src)"
}

peer "by GID" full
peer "IB mode, by LID" full SOFTRDMA_LINK=ib
peer "2% loss, 5% duplicated, 5% reordered" fault \
	SOFTRDMA_TEST_NETFAULT=seed=7,drop=2,dup=5,reorder=5
peer "10% loss" fault SOFTRDMA_TEST_NETFAULT=seed=8,drop=10
# APM: the initiator and the target with alternate paths over rail 2,
# armed; the initiator migrates by hand midway, the target when the
# requests come on its alternate path
peer "IB mode, APM" apm SOFTRDMA_LINK=ib
# ring: SRQ D's process corrupts its SRQ's ring; a SEND to D through
# target 4 fails with IBV_WC_REM_OP_ERR (an HCA that cannot fetch the
# WQE), not RNR NAKs for ever, target 4 in ERR with IBV_EVENT_QP_FATAL
peer "a corrupt SRQ ring" ring

# hold: the target's process stops once it holds the WQE of SRQ D (of
# another process of its host: xrc_peer's other_hold) for a message of
# 64 KiB, and is killed there; a message through D's process's own
# target completes past it meanwhile, and one of its own initiator
# through that target (left in D's outbox behind the held entry); D then
# takes max_wr receives more (all its WQEs are taken), not one more; D's
# process finds nothing else completed while the holder lived, then the
# held WQE flushed
port=$((port + 1))
on 1 SOFTRDMA_TEST_HOLD_STOP=1 XRC_PEER_DONE="$tap_tmp/hold.done" \
	timeout -k 10 120 "$peer" server $port hold >"$tap_tmp/hold-s.tap" 2>&1 &
_spid=$!
tap_pids="$tap_pids $_spid"
listening 1 $port
on 2 timeout -k 10 120 "$peer" client "$a1" $port hold \
	>"$tap_tmp/hold-c.tap" 2>&1 &
_cpid=$!
tap_pids="$tap_pids $_cpid"
# the server's process in state T (its child, D's, runs), in host 1's
# namespace (another run of this test may have a server of that port)
ns1=$name-h1
_held=
_i=0
while [ -z "$_held" ] && [ $_i -lt 300 ]; do
	for _p in $(pgrep -x xrc_peer); do
		tr '\0' ' ' 2>/dev/null <"/proc/$_p/cmdline" |
			grep -q "server $port hold" &&
			[ "$(cut -d' ' -f3 "/proc/$_p/stat" 2>/dev/null)" = T ] &&
			[ "$(ip netns identify "$_p" 2>/dev/null)" = "$ns1" ] &&
			_held=$_p
	done
	[ -n "$_held" ] || sleep 0.1
	_i=$((_i + 1))
done
[ -n "$_held" ]
ok $? "xrc_peer hold: the target's process stops once it holds SRQ D's WQE"
sleep 1
[ -z "$_held" ] || kill -KILL "$_held"
wait $_spid
wait $_cpid
_rc=$?
tap_passed "$tap_tmp/hold-c.tap" $_rc
ok $? "xrc_peer hold: the initiator's checks (exit $_rc)"
_i=0
while [ ! -e "$tap_tmp/hold.done" ] && [ $_i -lt 300 ]; do
	sleep 0.1
	_i=$((_i + 1))
done
tap_passed "$tap_tmp/hold-s.tap" 0 && ! grep -q '^Bail out' "$tap_tmp/hold-s.tap" &&
	grep -q '^1\.\.6$' "$tap_tmp/hold-s.tap"
ok $? "xrc_peer hold: SRQ D's process's checks"

agent_gone 1 && agent_gone 2
ok $? "the hosts' agents exit after their last client"
done_testing
