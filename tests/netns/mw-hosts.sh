#!/bin/sh
# mw-hosts.sh -- memory windows between two hosts of the namespace fabric
# (softrdma's RoCE v2 path, SOFTRDMA_NET=1): tests/netns/rc_peer's
# mwserver/mwclient.  WRITE, READ and atomics through a type 1 window
# (ibv_bind_mw) and through type 2 windows bound by BIND_MW work requests
# on the QP (one zero based), every byte checked on both hosts;
# SEND_WITH_INV of a type 2 window seen as WITH_INV by the server; the
# window bound again with a new rkey; remote access errors as an HCA
# gives them (REM_ACCESS_ERR, the QP in ERR on both sides, what follows
# flushed) for an invalidated window, one past its end, a WRITE or an
# atomic through a read-only window, a window its owner invalidated
# (LOCAL_INV); SEND_WITH_INV of a type 1 window (REM_INV_REQ_ERR); the
# good path again under 5% loss with duplication and reordering; then
# everything freed (the PDs go) and the hosts' agents gone.
. "$top_srcdir/tests/lib.sh"
peer=$top_builddir/tests/netns/rc_peer
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
[ -x "$peer" ] || skip_all "tests/netns/rc_peer not built"
hosts_stem=mwh
. "$top_srcdir/tests/netns/hosts-lib.sh"

fab up "$name" 2 1
ok $? "fabric of 2 hosts up"
a1=$(fab addr "$name" 1)

port=18701
# mw_pair WHAT MODE [ENV...] -- the windows' owner on host 1, the client
# on host 2, both with ENV; every check of the client's TAP must pass
mw_pair() {
	_what=$1
	_mode=$2
	shift 2
	port=$((port + 1))
	on 1 "$@" timeout -k 10 300 "$peer" mwserver $port \
		>"$tap_tmp/server.log" 2>&1 &
	_spid=$!
	tap_pids="$tap_pids $_spid"
	listening 1 $port
	ok $? "$_what: rc_peer mwserver listens on host 1"
	on 2 "$@" timeout -k 10 300 "$peer" mwclient "$a1" $port "$_mode" \
		>"$tap_tmp/client.tap" 2>&1
	_rc=$?
	sed 's/^/    /' "$tap_tmp/client.tap"
	_n=$(grep -c '^ok' "$tap_tmp/client.tap")
	! grep -q '^not ok' "$tap_tmp/client.tap" && [ "$_n" -gt 10 ] &&
		[ $_rc -eq 0 ]
	ok $? "$_what: all $_n rc_peer window checks passed (client exit $_rc)"
	wait $_spid
	_rc=$?
	ok $_rc "$_what: rc_peer mwserver exits 0"
	[ $_rc -ne 0 ] && show_log "$tap_tmp/server.log"
}

mw_pair "windows" full
mw_pair "windows, 5% loss, duplication, reordering" loss \
	SOFTRDMA_TEST_NETFAULT=seed=7,drop=5,dup=2,reorder=2

agent_gone 1 && agent_gone 2
ok $? "the hosts' agents exited after their last client"
done_testing
