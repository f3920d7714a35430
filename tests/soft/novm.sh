#!/bin/sh
# novm.sh -- softrdma where process_vm_readv/writev is refused, as Yama's
# ptrace_scope 1 refuses it between processes that are not ancestor and
# descendant: SOFTRDMA_TEST_NOVM=1 makes every such call fail with EPERM,
# so SENDs above the slot size, RDMA WRITE, WRITE_WITH_IMM, READ and
# atomics all take the fallback (the target process moves the data
# through the ring itself).  softrdma never lifts the restriction.
. "$top_srcdir/tests/lib.sh"
[ -f "$SOFTRDMA_LIB" ] || skip_all "libsoftrdma.so not built"
SOFTRDMA_TEST_NOVM=1
export SOFTRDMA_TEST_NOVM

# the verbs tests, unchanged: every assertion must hold without process_vm
for t in mproc errors deadsend qpex events atomic_write umr inline push; do
	run_tap "soft/$t" "$t with process_vm refused"
done

# two unrelated processes (as under Yama), 1 MiB messages and events
command -v ibv_rc_pingpong >/dev/null ||
	skip_all "ibv_rc_pingpong missing (apt-get install ibverbs-utils)"
SOFTRDMA_SHM_PREFIX=t-novm-$$
export SOFTRDMA_SHM_PREFIX
for args in "-s 1048576 -n 20" "-e -s 100000 -n 50"; do
	port=$(free_port)
	# shellcheck disable=SC2086
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 ibv_rc_pingpong -g 1 \
		-p "$port" $args >"$tap_tmp/srv.log" 2>&1 &
	srv=$!
	tap_pids="$tap_pids $srv"
	wait_port "$port" 10
	# shellcheck disable=SC2086
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 ibv_rc_pingpong -g 1 \
		-p "$port" $args 127.0.0.1 >"$tap_tmp/cli.log" 2>&1
	crc=$?
	wait "$srv"
	src=$?
	test "$crc" -eq 0 && test "$src" -eq 0
	ok $? "ibv_rc_pingpong $args without process_vm: client $crc, server $src"
	show_log "$tap_tmp/cli.log" >/dev/null
done
n=$(find /dev/shm -maxdepth 1 -name "t-novm-$$*" | wc -l)
test "$n" -eq 0
ok $? "no /dev/shm entries left ($n)"
done_testing
