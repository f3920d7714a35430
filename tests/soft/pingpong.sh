#!/bin/sh
# pingpong.sh -- ibv_devinfo and ibv_rc_pingpong, unmodified, on softrdma
. "$top_srcdir/tests/lib.sh"
[ -f "$SOFTRDMA_LIB" ] || skip_all "libsoftrdma.so not built"
command -v ibv_rc_pingpong >/dev/null || skip_all "ibv_rc_pingpong missing (apt-get install ibverbs-utils)"
command -v ibv_devinfo >/dev/null || skip_all "ibv_devinfo missing (apt-get install ibverbs-utils)"
SOFTRDMA_SHM_PREFIX=t-pingpong-$$
export SOFTRDMA_SHM_PREFIX

LD_PRELOAD="$SOFTRDMA_PRELOAD" ibv_devinfo -v >"$tap_tmp/devinfo" 2>&1
ok $? "ibv_devinfo -v exits 0"
grep -q "hca_id:.*softrdma0" "$tap_tmp/devinfo"
ok $? "ibv_devinfo lists softrdma0"
grep -q "state:.*PORT_ACTIVE" "$tap_tmp/devinfo"
ok $? "port active"
grep -q "link_layer:.*Ethernet" "$tap_tmp/devinfo"
ok $? "link layer Ethernet"
gid=$(sed -n 's/.*GID\[ *\([0-9]*\)\]:.*::ffff:127.0.0.1, RoCE v2.*/\1/p' "$tap_tmp/devinfo" | head -n 1)
test -n "$gid"
ok $? "GID of 127.0.0.1 listed as RoCE v2 (index ${gid:-none})"
show_log "$tap_tmp/devinfo" >/dev/null
gid=${gid:-1}

# pp NAME ARGS... -- server and client; both must exit 0
pp() {
	name=$1
	shift
	port=$(free_port)
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 ibv_rc_pingpong -g "$gid" -p "$port" "$@" \
		>"$tap_tmp/srv.log" 2>&1 &
	srv=$!
	tap_pids="$tap_pids $srv"
	wait_port "$port" 10
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 ibv_rc_pingpong -g "$gid" -p "$port" "$@" \
		127.0.0.1 >"$tap_tmp/cli.log" 2>&1
	crc=$?
	wait "$srv"
	src=$?
	test "$crc" -eq 0 && test "$src" -eq 0
	ok $? "ibv_rc_pingpong $name: client $crc, server $src"
	if [ "$crc" -ne 0 ] || [ "$src" -ne 0 ]; then
		show_log "$tap_tmp/srv.log"
		show_log "$tap_tmp/cli.log"
	else
		diag "$(tail -n 1 "$tap_tmp/cli.log")"
	fi
}

pp "default (4 KiB, polling)"
pp "events (-e)" -e
pp "8 bytes x 10000" -s 8 -n 10000
pp "1 MiB x 100" -s 1048576 -n 100
pp "events, 64 bytes, rx depth 10" -e -s 64 -r 10

left=$(ls /dev/shm | grep -c "^$SOFTRDMA_SHM_PREFIX")
test "$left" -eq 0
ok $? "no /dev/shm entries left ($left)"
done_testing
