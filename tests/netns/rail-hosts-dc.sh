#!/bin/sh
# rail-hosts-dc.sh -- rail-hosts.sh's stream over a DC session: DC
# endpoints (RDMAMSG_TRANSPORT_DC) on an SRQ each side with
# RDMAMSG_FAILOVER_REPLAY on a host with two rails (both peers there:
# softrdma's DC is host-local); rail 1's cables pulled, then plugged back
# and rail 2's pulled: each reconnect opens new DC lanes on the other
# port, every message once, in order,
# checked, every request answered once (20,000 messages, 1,000 requests
# in flight; smaller under valgrind, the sanitizers or
# RDMAMSG_TEST_SCALE=small).
RDMAMSG_RAIL_DC=1
export RDMAMSG_RAIL_DC
. "$top_srcdir/tests/netns/rail-hosts.sh"
