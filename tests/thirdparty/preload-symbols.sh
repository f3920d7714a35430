#!/bin/sh
# preload-symbols.sh -- the programs we run on softrdma find every ibv_/rdma_
# name they import in libsoftrdma (see preload-lib.sh)
ps_scope=programs
. "$top_srcdir/tests/thirdparty/preload-lib.sh"
done_testing
