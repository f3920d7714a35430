#!/bin/sh
# pingpong-ud-uc.sh -- ibv_ud_pingpong, ibv_uc_pingpong, ibv_srq_pingpong and
# ibv_xsrq_pingpong, unmodified, on softrdma: UD with address handles and
# the GRH, UC connected unreliable, RC QPs sharing one SRQ, XRC (one domain
# of a file shared by every process, XRC SRQs, initiator and target QPs)
. "$top_srcdir/tests/lib.sh"
[ -f "$SOFTRDMA_LIB" ] || skip_all "libsoftrdma.so not built"
command -v ibv_ud_pingpong >/dev/null || skip_all "ibv_ud_pingpong missing (apt-get install ibverbs-utils)"
command -v ibv_uc_pingpong >/dev/null || skip_all "ibv_uc_pingpong missing (apt-get install ibverbs-utils)"
command -v ibv_srq_pingpong >/dev/null || skip_all "ibv_srq_pingpong missing (apt-get install ibverbs-utils)"
command -v ibv_xsrq_pingpong >/dev/null || skip_all "ibv_xsrq_pingpong missing (apt-get install ibverbs-utils)"
SOFTRDMA_SHM_PREFIX=t-ppudc-$$
export SOFTRDMA_SHM_PREFIX
gid=1 # ::ffff:127.0.0.1 (soft/device.c)

# pp PROG NAME ARGS... -- server and client; both must exit 0 and print
# $want (ibv_xsrq_pingpong's word for it: "success")
want="iters in"
pp() {
	prog=$1
	name=$2
	shift 2
	port=$(free_port)
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 "$prog" -g "$gid" -p "$port" "$@" \
		>"$tap_tmp/srv.log" 2>&1 &
	srv=$!
	tap_srv_pids="$tap_srv_pids $srv" # TERM through timeout(1)
	wait_port "$port" 10
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 "$prog" -g "$gid" -p "$port" "$@" \
		127.0.0.1 >"$tap_tmp/cli.log" 2>&1
	crc=$?
	wait "$srv"
	src=$?
	test "$crc" -eq 0 && test "$src" -eq 0 &&
		grep -q "$want" "$tap_tmp/cli.log" && grep -q "$want" "$tap_tmp/srv.log"
	ok $? "$prog $name: client $crc, server $src"
	if [ "$crc" -ne 0 ] || [ "$src" -ne 0 ]; then
		show_log "$tap_tmp/srv.log"
		show_log "$tap_tmp/cli.log"
	else
		diag "$(tail -n 1 "$tap_tmp/cli.log")"
	fi
}

pp ibv_ud_pingpong "default (2 KiB, polling)"
pp ibv_ud_pingpong "events (-e)" -e
pp ibv_ud_pingpong "MTU-sized payload (4096 - 40 GRH)" -s 4056 -n 500
pp ibv_ud_pingpong "8 bytes x 5000" -s 8 -n 5000
pp ibv_uc_pingpong "default (4 KiB, polling)"
pp ibv_uc_pingpong "events (-e)" -e
pp ibv_uc_pingpong "64 KiB x 200" -s 65536 -n 200
# RC over one SRQ shared by 16 QPs
pp ibv_srq_pingpong "default (16 QPs, one SRQ)"
pp ibv_srq_pingpong "events (-e), 4 QPs x 500" -e -q 4 -n 500
# XRC: each side's initiator sends through the other's target QP into
# the other's XRC SRQ; the domain is /tmp/xrc_domain's, which both open
# (O_CREAT) and leave: removed at exit when the test made it
xrc_file=
[ -e /tmp/xrc_domain ] || xrc_file=/tmp/xrc_domain
tap_exit_hook() {
	[ -z "$xrc_file" ] || rm -f "$xrc_file"
}
want=success
pp ibv_xsrq_pingpong "XRC, 4 KiB x 200" -n 200
pp ibv_xsrq_pingpong "XRC, events (-e), 8 B x 1000" -e -s 8 -n 1000
pp ibv_xsrq_pingpong "XRC, 64 KiB x 50" -s 65536 -n 50

# three clients of one server (-c 3): four processes, one domain
port=$(free_port)
LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 ibv_xsrq_pingpong -g "$gid" \
	-p "$port" -c 3 -n 100 >"$tap_tmp/srv.log" 2>&1 &
srv=$!
tap_srv_pids="$tap_srv_pids $srv"
wait_port "$port" 10
cli=
for i in 1 2 3; do
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 ibv_xsrq_pingpong \
		-g "$gid" -p "$port" -n 100 127.0.0.1 >"$tap_tmp/cli$i.log" 2>&1 &
	cli="$cli $!"
done
crc=0
for p in $cli; do
	wait "$p" || crc=$?
done
wait "$srv"
src=$?
test "$crc" -eq 0 && test "$src" -eq 0 &&
	grep -q success "$tap_tmp/srv.log" && grep -q success "$tap_tmp/cli1.log" &&
	grep -q success "$tap_tmp/cli2.log" && grep -q success "$tap_tmp/cli3.log"
ok $? "ibv_xsrq_pingpong: a server (-c 3) and three clients: $src, $crc"
if [ "$crc" -ne 0 ] || [ "$src" -ne 0 ]; then
	show_log "$tap_tmp/srv.log"
	show_log "$tap_tmp/cli1.log"
fi

left=$(ls /dev/shm | grep -c "^$SOFTRDMA_SHM_PREFIX")
test "$left" -eq 0
ok $? "no /dev/shm entries left ($left)"
done_testing
