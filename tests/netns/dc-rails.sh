#!/bin/sh
# dc-rails.sh -- DC endpoints on each port of a two-port device
# (lib/lane_dc.c, soft/dc.c): a host of the namespace fabric on two rails
# has a softrdma device with a port per rail (SOFTRDMA_NET=1); in one
# process, tests/netns/dc_rails connects a DC endpoint to the host's own
# address on each rail, so that rdma_cm binds one connection to port 1
# and the other to port 2, as a DCT and DCIs are bound to one port on
# mlx5.  Each context then has a DCT and its DCIs on each port (2 DCTs,
# 8 DCIs), every message is echoed intact and in order on both, and when
# the endpoint on port 2 closes, that port's DC QPs stay (a DCT destroyed
# under receives in flight would lose SRQ buffers: lib/lane_dc.c) while
# the endpoint on port 1 goes on; they go with the SRQ.
. "$top_srcdir/tests/lib.sh"
peer=$top_builddir/tests/netns/dc_rails
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
[ -x "$peer" ] || skip_all "tests/netns/dc_rails not built"
hosts_stem=dcr
. "$top_srcdir/tests/netns/hosts-lib.sh"

fab up "$name" 1 2
ok $? "fabric of 1 host on 2 rails up"
a1=$(fab addr "$name" 1 0)
b1=$(fab addr "$name" 1 1)
out=$tap_tmp/dc.log
# under RDMAMSG_TEST_VALGRIND=1 the peer (this test's program) runs under
# memcheck: errors and definite leaks fail it
vg=$(valgrind_cmd)
on 1 timeout -k 10 600 $vg "$peer" "$a1" "$b1" 7900 >"$out" 2>&1
rc=$?
sed 's/^/    /' "$out"
grep -q "^connected 0 to $a1:" "$out" && grep -q "^connected 1 to $b1:" "$out"
ok $? "DC endpoints connected over rail 1 ($a1) and rail 2 ($b1)"
grep -q '^stats client dcts 2 dcis 8 endpoints 2$' "$out" &&
	grep -q '^stats server dcts 2 dcis 8 endpoints 2$' "$out"
ok $? "a DCT and 4 DCIs on each port, in each context"
sed -n '/^closed 1$/,$p' "$out" | grep -q '^stats client dcts 2 dcis 8 endpoints 1$'
ok $? "port 2's DC QPs stay after its last endpoint"
sed -n '/^srq closed$/,$p' "$out" | grep -q '^stats client dcts 0 dcis 0 endpoints 0$' &&
	sed -n '/^srq closed$/,$p' "$out" | grep -q '^stats server dcts 0 dcis 0 endpoints 0$'
ok $? "every port's DC QPs go with the SRQ"
grep -q '^streamed 0 again$' "$out" &&
	grep -q '^done bad 0 echoed 600 300$' "$out" && [ $rc -eq 0 ]
ok $? "every message echoed intact and in order on both ports, then on port 1 alone (exit $rc)"
left=$(ls -A /dev/shm/fabric-"$name"/h1/shm 2>&1 | grep -v -e '^/dev/shm' -e '^$')
[ -z "$left" ]
ok $? "nothing left in the host's /dev/shm${left:+: $left}"
agent_gone 1
ok $? "the host's agent exits after its last client"
fab down "$name"
ok $? "fabric down"
done_testing
