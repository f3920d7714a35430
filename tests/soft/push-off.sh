#!/bin/sh
# push-off.sh -- tests/soft/push with SOFTRDMA_NO_PUSH=1: nothing placed by
# its sender, every SEND through the copy ring, each message once, in
# order and intact all the same
. "$top_srcdir/tests/lib.sh"
[ -f "$SOFTRDMA_LIB" ] || skip_all "libsoftrdma.so not built"
SOFTRDMA_NO_PUSH=1
export SOFTRDMA_NO_PUSH
run_tap soft/push "push with SOFTRDMA_NO_PUSH=1"
placed=$(grep -c '^ok .*: placed and complete' "$tap_tmp/push.log")
test "$placed" -eq 0
ok $? "nothing placed ($placed)"
grep -q '^ok .*8192 B: not placed (pushes off here)' "$tap_tmp/push.log"
ok $? "its 8192-byte SEND went through the ring"
done_testing
