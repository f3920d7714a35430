#!/bin/sh
# preload-exports.sh -- libsoftrdma defines every public name of libibverbs.so.1
# and librdmacm.so.1, so that their own internal references interpose too
# (see preload-lib.sh)
ps_scope=libraries
. "$top_srcdir/tests/thirdparty/preload-lib.sh"
done_testing
