#!/bin/sh
# iphdr-hosts.sh -- the IP header of softrdma's RoCE v2 packets between two
# hosts of the namespace fabric (soft/net.c, SOFTRDMA_NET=1) says what the
# QP's path says: rc_ip_peer's RC QPs, each with its own hop limit,
# traffic class and (IPv6) flow label, over IPv4 and IPv6, captured on
# host 1 (a packet socket of the peer, both directions: requests, ACKs,
# READ responses).
. "$top_srcdir/tests/lib.sh"
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
peer=$top_builddir/tests/netns/rc_ip_peer
[ -x "$peer" ] || skip_all "rc_ip_peer not built"
hosts_stem=iph
. "$top_srcdir/tests/netns/hosts-lib.sh"

fab up "$name" 2 1
ok $? "fabric of 2 hosts up"
a1=$(fab addr "$name" 1)

port=18801
on 1 timeout -k 10 60 "$peer" server $port >"$tap_tmp/s.log" 2>&1 &
spid=$!
tap_pids="$tap_pids $spid"
listening 1 $port
ok $? "rc_ip_peer: server listens on host 1"
on 2 timeout -k 10 60 "$peer" client "$a1" $port >"$tap_tmp/c.log" 2>&1
rc=$?
wait $spid
src=$?
tap_passed "$tap_tmp/c.log" $rc && tap_passed "$tap_tmp/s.log" $src
ok $? "rc_ip_peer: each RC QP's packets carry its path's TTL, TOS and flow label"

agent_gone 1 && agent_gone 2
ok $? "the hosts' agents exit after their last client"
done_testing
