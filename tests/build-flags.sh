#!/bin/sh
# build-flags.sh -- the libraries export exactly their public names
. "$top_srcdir/tests/lib.sh"
rdmamsg_so=$(ls "$top_builddir"/lib/.libs/librdmamsg.so 2>/dev/null)
[ -n "$rdmamsg_so" ] || skip_all "librdmamsg.so not built (static build?)"

# exports LIB -- the names LIB defines for others, without version nodes
exports() {
	nm -D --defined-only "$1" | awk '$2 ~ /[TDBRW]/ {print $3}' |
		sed 's/@.*//' | sort -u
}

exports "$rdmamsg_so" >"$tap_tmp/rdmamsg.syms"
grep -v '^rdmamsg_' "$tap_tmp/rdmamsg.syms" >"$tap_tmp/bad"
test ! -s "$tap_tmp/bad"
ok $? "librdmamsg exports only rdmamsg_* names"
show_log "$tap_tmp/bad"
grep -q '^rdmamsg__' "$tap_tmp/rdmamsg.syms"
test $? -ne 0
ok $? "librdmamsg exports no rdmamsg__ internals"

exports "$SOFTRDMA_LIB" >"$tap_tmp/soft.syms"
grep -Ev '^(ibv_|rdma_|mlx5dv_|softrdma_|_ibv_query_gid_(ex|table)$|m(ult|bps)_to_ibv_rate$|r(accept|bind|close|connect|fcntl|getpeername|getsockname|getsockopt|iomap|iounmap|iowrite|listen|poll|read|readv|recv|recvfrom|recvmsg|select|send|sendmsg|sendto|setsockopt|shutdown|socket|write|writev)$)' "$tap_tmp/soft.syms" >"$tap_tmp/bad"
test ! -s "$tap_tmp/bad"
ok $? "libsoftrdma exports only ibv_/rdma_/mlx5dv_/softrdma_ names (and the rsocket stubs)"
show_log "$tap_tmp/bad"
done_testing
