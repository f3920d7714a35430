#!/bin/sh
# rdma_server_client.sh -- unmodified rdma_server / rdma_client
# (rdmacm-utils: rdma_create_ep, rdma_get_request, synchronous ids,
# rdma_post_* and rdma_get_*_comp) on softrdma via LD_PRELOAD.
. "$top_srcdir/tests/lib.sh"
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
command -v rdma_server >/dev/null 2>&1 ||
	skip_all "rdma_server not installed (Debian package rdmacm-utils)"
tap_shm cm-rsc-$$ always

for round in 1 2; do
	port=$(free_port)
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 30 rdma_server -p "$port" \
		>"$tap_tmp/s" 2>&1 &
	spid=$!
	tap_srv_pids="$tap_srv_pids $spid"
	wait_port "$port" 10
	ok $? "round $round: rdma_server listens"
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 30 rdma_client -s 127.0.0.1 \
		-p "$port" >"$tap_tmp/c" 2>&1
	crc=$?
	ok $crc "round $round: rdma_client exits 0"
	grep -q 'rdma_client: end 0' "$tap_tmp/c"
	ok $? "round $round: rdma_client: end 0"
	[ $crc -eq 0 ] || show_log "$tap_tmp/c"
	wait $spid
	src=$?
	ok $src "round $round: rdma_server exits 0"
	grep -q 'rdma_server: end 0' "$tap_tmp/s"
	ok $? "round $round: rdma_server: end 0"
	[ $src -eq 0 ] || show_log "$tap_tmp/s"
done

# no server: rdma_client's synchronous connect fails
port=$(free_port)
LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 30 rdma_client -s 127.0.0.1 -p "$port" \
	>"$tap_tmp/c" 2>&1
[ $? -ne 0 ]
ok $? "no server: rdma_client fails"
show_log "$tap_tmp/c" | head -n 3
done_testing
