#!/bin/sh
# sgid-hosts.sh -- an address vector's sgid_index must be a GID of its
# port, as on a dual-port RoCE HCA whose kernel resolves it with
# rdma_get_gid_attr(device, port, index): hosts on two rails
# (SOFTRDMA_NET=1) have a two-port device, each port with its rail's
# GIDs numbered from 0 (its link-local GID).  tests/netns/sgid_peer
# check: on each port every index of its own is taken by ibv_create_ah
# and an RC QP's INIT->RTR, an empty one refused (ENODATA), past the
# table refused (EINVAL), the refused QP left in INIT; then an RC QP on
# port 2 is refused an empty index, connects from its own fabric GID to
# host 1's port 2 and WRITEs and READs back 64 KiB blocks.
. "$top_srcdir/tests/lib.sh"
peer=$top_builddir/tests/netns/sgid_peer
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
[ -x "$peer" ] || skip_all "tests/netns/sgid_peer not built"
hosts_stem=sgh
. "$top_srcdir/tests/netns/hosts-lib.sh"

fab up "$name" 2 2 1500
ok $? "fabric of 2 hosts on 2 rails up"
b1=$(fab addr "$name" 1 1)
# under RDMAMSG_TEST_VALGRIND=1 the peers run under memcheck: errors and
# definite leaks fail them
vg=$(valgrind_cmd)

on 1 timeout -k 10 120 $vg "$peer" check \
	>"$tap_tmp/check.tap" 2>&1
rc=$?
tap_passed "$tap_tmp/check.tap" $rc
ok $? "each port takes its own GID indices only (exit $rc)"

port=18901
on 1 timeout -k 10 120 $vg "$peer" server $port 2 \
	>"$tap_tmp/server.log" 2>&1 &
spid=$!
tap_pids="$tap_pids $spid"
listening 1 $port
ok $? "sgid_peer server listens on host 1"
on 2 timeout -k 10 120 $vg "$peer" client "$b1" $port 2 \
	>"$tap_tmp/client.tap" 2>&1
rc=$?
tap_passed "$tap_tmp/client.tap" $rc
ok $? "RC over port 2 from its own GID index (exit $rc)"
wait $spid
rc=$?
ok $rc "sgid_peer server exits 0"
[ $rc -ne 0 ] && show_log "$tap_tmp/server.log"
done_testing
