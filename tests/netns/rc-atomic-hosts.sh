#!/bin/sh
# rc-atomic-hosts.sh -- RDMA atomic write (IBV_WR_ATOMIC_WRITE) between two
# hosts of the namespace fabric (softrdma's RoCE v2 path, soft/net.c,
# SOFTRDMA_NET=1), tests/netns/rc_peer's awserver/awclient: the opcode rxe
# sends (ATOMIC_WRITE, 0x1d), 8 bytes placed intact and the words around
# untouched, an inline one, a misaligned address an invalid request, an
# rkey without remote write a remote access error; with the atomic
# write's answer lost (SOFTRDMA_TEST_NETFAULT=rdlast=1000: the server's
# first READ response) it is sent again after the timer, completes once,
# and its repeat is not placed a second time.
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
vg=
if [ "${RDMAMSG_TEST_VALGRIND:-0}" = 1 ] && [ -n "${VALGRIND:-}" ]; then
	vg="$VALGRIND -q --error-exitcode=99"
	vg="$vg --leak-check=full --errors-for-leak-kinds=definite"
fi
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

agent_gone 1 && agent_gone 2
ok $? "the hosts' agents exited after their last client"
done_testing
