#!/bin/sh
# libfabric.sh -- libfabric's verbs providers (Debian packages libfabric1,
# libfabric-bin), unmodified, on softrdma: fi_info finds softrdma0 for
# the verbs provider's MSG and DGRAM endpoints and for ofi_rxm's RDM one
# over it, and fi_pingpong with its data integrity checks (-c) runs MSG
# endpoints (RC through rdma_cm) and RDM ones (ofi_rxm over them, plain
# and tagged messages) at every size it knows, 0 B to 6 MiB, and DGRAM
# ones (UD) at 8 B and at the 4096-byte MTU.  Both sides exit 0.
#
# RDM needs a CQ of 262,144 entries (ofi_rxm sizes its MSG CQ by its
# universe size, 256): softrdma's max_cqe is mlx5's, 4,194,303; at rxe's
# 32,767 or softrdma's former 262,143 it failed with "Unable to create
# verbs CQ" (soft/README.md).
. "$top_srcdir/tests/lib.sh"
[ -n "${SOFTRDMA_LIB:-}" ] && [ -e "$SOFTRDMA_LIB" ] ||
	skip_all "libsoftrdma.so not built (${SOFTRDMA_LIB:-SOFTRDMA_LIB unset})"
command -v fi_pingpong >/dev/null 2>&1 && command -v fi_info >/dev/null 2>&1 ||
	skip_all "fi_pingpong not installed (Debian package libfabric-bin)"
tap_shm 3p-libfabric-$$
LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 5 60 fi_info -l 2>/dev/null |
	grep -q '^verbs:' || skip_all "this libfabric has no verbs provider"

limit=${FI_TEST_TIMEOUT:-120}

LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 5 60 fi_info -p verbs >"$tap_tmp/info" 2>&1
grep -q 'domain: softrdma0$' "$tap_tmp/info" &&
	grep -q 'domain: softrdma0-dgram$' "$tap_tmp/info" &&
	grep -q 'type: FI_EP_MSG' "$tap_tmp/info" &&
	grep -q 'type: FI_EP_DGRAM' "$tap_tmp/info"
ok $? "fi_info -p verbs: softrdma0 with MSG and DGRAM endpoints"
LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 5 60 fi_info -p 'verbs;ofi_rxm' \
	>"$tap_tmp/info-rxm" 2>&1
grep -q 'domain: softrdma0$' "$tap_tmp/info-rxm" &&
	grep -q 'type: FI_EP_RDM' "$tap_tmp/info-rxm"
ok $? "fi_info -p 'verbs;ofi_rxm': RDM endpoints on softrdma0"

# run EP PROVIDER MODE SIZE MIN_ROWS -- fi_pingpong server and client
# with data checks, 10 iterations a size; both exit 0 and the client
# prints at least MIN_ROWS result rows (for "all", one of them for 1 MiB)
run() {
	_ep=$1 _prov=$2 _mode=$3 _sz=$4 _rows=$5
	pair_port=$(free_port)
	_log=$tap_tmp/fi.$_ep.$_mode.$_sz.$pair_port
	pair_run "$_log" "$limit" "-B $pair_port" "-P $pair_port 127.0.0.1" \
		fi_pingpong -p "$_prov" -e "$_ep" -m "$_mode" -c -I 10 -S "$_sz"
	_crc=$pair_crc _src=$pair_src
	# fi_pingpong's teardown: a server that closes first may leave the
	# client's last receive cancelled (rxm: FI_ECANCELED, exit 125, a
	# "Work Request Flushed Error" after every row was printed), seen
	# only on a loaded machine; any other failure counts
	if [ $_crc -eq 125 ] && [ "$_ep" = rdm ] &&
		grep -q 'cq_readerr: Work Request Flushed Error' "$_log.client"; then
		diag "$_ep $_prov $_mode: the client's teardown raced the server's (exit 125)"
		_crc=0
	fi
	[ "$_sz" = all ] && _want=1m || _want=
	[ $_crc -eq 0 ] && [ $_src -eq 0 ] &&
		awk -v n="$_rows" -v w="$_want" '
			$1 ~ /^[0-9.]+[km]?$/ && $2 ~ /^[0-9]+k?$/ { r++; if ($1 == w) f = 1 }
			END { exit !(r >= n && (f || w == "")) }' "$_log.client"
	_st=$?
	ok $_st "$_ep $_prov, $_mode messages of $_sz B, data checked: both sides exit 0"
	if [ $_st -ne 0 ]; then
		diag "client exit $_crc, server exit $_src"
		show_log "$_log.client"
		show_log "$_log.server"
	fi
}

run msg verbs msg all 30
run rdm 'verbs;ofi_rxm' msg all 30
run rdm 'verbs;ofi_rxm' tagged all 30
run dgram verbs msg 8 1
run dgram verbs msg 4096 1
done_testing
