#!/bin/sh
# devinfo.sh -- ibv_devinfo and ibv_devices (ibverbs-utils) see softrdma0:
# one active RoCE port with a link-local GID and a GID for 127.0.0.1.
. "$top_srcdir/tests/lib.sh"
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
tap_shm 3p-devinfo-$$
out=$tap_tmp/devinfo

if ! command -v ibv_devinfo >/dev/null 2>&1; then
	skip "ibv_devinfo" "ibv_devinfo not installed (Debian package ibverbs-utils)"
else
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 30 ibv_devinfo >"$out" 2>&1
	rc=$?
	ok $rc "ibv_devinfo exits 0"
	grep -Eq '^hca_id:[[:space:]]+softrdma0$' "$out"
	ok $? "ibv_devinfo lists hca_id softrdma0"
	[ $rc -eq 0 ] || show_log "$out"

	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 30 ibv_devinfo -d softrdma0 -v >"$out" 2>&1
	rc=$?
	ok $rc "ibv_devinfo -d softrdma0 -v exits 0"
	grep -Eq '^[[:space:]]+port:[[:space:]]+1$' "$out"
	ok $? "softrdma0 has port 1"
	grep -Eq '^[[:space:]]+state:[[:space:]]+PORT_ACTIVE \(4\)' "$out"
	ok $? "port 1 is PORT_ACTIVE"
	grep -Eq '^[[:space:]]+link_layer:[[:space:]]+Ethernet' "$out"
	ok $? "port 1 link layer is Ethernet"
	grep -Eq '^[[:space:]]+active_mtu:[[:space:]]+[0-9]+ \([1-5]\)' "$out"
	ok $? "port 1 reports an active MTU"
	grep -Eq 'GID\[[[:space:]]*0\]:[[:space:]]+fe80:' "$out"
	ok $? "GID[0] is link-local (fe80::)"
	grep -Eq 'GID\[[[:space:]]*[0-9]+\]:[[:space:]]+::ffff:127\.0\.0\.1, RoCE v2' "$out"
	ok $? "a RoCE v2 GID holds ::ffff:127.0.0.1"
	grep -Eq '^[[:space:]]+max_qp:[[:space:]]+[1-9]' "$out"
	ok $? "device attributes (max_qp) are reported"
	show_log "$out" | grep -E 'hca_id|state|link_layer|GID' | head -n 8
fi

# SOFTRDMA_LINK=ib: two InfiniBand ports with LIDs, and APM (soft/README.md)
if command -v ibv_devinfo >/dev/null 2>&1; then
	SOFTRDMA_LINK=ib LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 30 ibv_devinfo -d softrdma0 -v >"$out" 2>&1
	rc=$?
	ok $rc "IB mode: ibv_devinfo -v exits 0"
	grep -Eq '^[[:space:]]+phys_port_cnt:[[:space:]]+2$' "$out"
	ok $? "IB mode: phys_port_cnt 2"
	[ "$(grep -Ec '^[[:space:]]+link_layer:[[:space:]]+InfiniBand' "$out")" = 2 ]
	ok $? "IB mode: both ports' link layer is InfiniBand"
	[ "$(grep -Ec '^[[:space:]]+port_lid:[[:space:]]+[1-9][0-9]*$' "$out")" = 2 ]
	ok $? "IB mode: both ports have a LID"
	grep -Eq 'AUTO_PATH_MIG' "$out"
	ok $? "IB mode: AUTO_PATH_MIG in the device cap flags"
	[ $rc -eq 0 ] || show_log "$out"
fi

if ! command -v ibv_devices >/dev/null 2>&1; then
	skip "ibv_devices" "ibv_devices not installed (Debian package ibverbs-utils)"
else
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 30 ibv_devices >"$out" 2>&1
	ok $? "ibv_devices exits 0"
	grep -Eq '^[[:space:]]+softrdma0[[:space:]]+[0-9a-f]{16}$' "$out"
	ok $? "ibv_devices lists softrdma0 with a node GUID"
fi
done_testing
