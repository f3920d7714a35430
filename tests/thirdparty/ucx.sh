#!/bin/sh
# ucx.sh -- UCX (Debian package ucx-utils: ucx_perftest and its verbs
# transports in libuct_ib), unmodified, on softrdma: at the UCT level
# rc_verbs (active messages short, bcopy and zcopy, RDMA write and read,
# the atomics softrdma has) and ud_verbs, at the UCP level tag matching
# (eager, and 1 MiB by rendezvous: an RDMA READ), active messages, put,
# get, atomics and streams over RC wired up through UD, and UD alone.
#
# UCX takes an IB device only if /dev/infiniband/<its dev_name> is a
# character device it may open for reading and writing
# (uct_ib_device_is_accessible); it never opens it, libibverbs' (here
# softrdma's) ibv_open_device does.  A host without an RDMA driver has no
# such node, so the test runs in a mount namespace of its own in which
# /dev is an overlay holding one (uverbs' major, 231) and /dev/shm a new
# tmpfs: nothing on the host changes, and both go with the namespace.
# Root only.  UCX's wire-up over UD needs each UD completion's sl to name
# the RoCE packet type, as mlx5 reports it (soft/README.md): before, UCX
# dropped every datagram and no UCP endpoint came up.
#
# ucx_perftest does not check payload contents; a result row with the
# iteration count asked for, and both sides exiting 0, prove that every
# exchange completed (as for perftest, tests/thirdparty/perftest-lib.sh).
if [ -z "${UCX_SH_NS:-}" ]; then
	skip() {
		echo "1..0 # SKIP $1"
		exit 0
	}
	[ "$(id -u)" = 0 ] || skip "needs root (a mount namespace, mknod)"
	command -v unshare >/dev/null 2>&1 || skip "no unshare (util-linux)"
	command -v ucx_perftest >/dev/null 2>&1 ||
		skip "ucx_perftest not installed (Debian package ucx-utils)"
	ucx_info -v 2>/dev/null | grep -q -- '--with-verbs' ||
		skip "this UCX was built without verbs transports"
	UCX_SH_NS=1 exec unshare --mount --propagation private \
		"${SHELL:-/bin/sh}" "$0" "$@"
	skip "unshare --mount failed"
fi
. "$top_srcdir/tests/lib.sh"
[ -n "${SOFTRDMA_LIB:-}" ] && [ -e "$SOFTRDMA_LIB" ] ||
	skip_all "libsoftrdma.so not built (${SOFTRDMA_LIB:-SOFTRDMA_LIB unset})"

# the overlay's upper layer in a tmpfs of its own
ov=$tap_tmp/dev
mkdir "$ov" && mount -t tmpfs ucx-test-dev "$ov" && mkdir "$ov/up" "$ov/work" ||
	skip_all "no tmpfs mount in this namespace"
mount -t overlay ucx-test-dev -o "lowerdir=/dev,upperdir=$ov/up,workdir=$ov/work" \
	/dev 2>/dev/null || skip_all "no overlay mount of /dev (overlayfs)"
mount -t tmpfs -o mode=1777 ucx-test-shm /dev/shm || skip_all "no tmpfs on /dev/shm"
# before tap_cleanup empties $tap_tmp: nothing of this stays mounted
tap_exit_hook() {
	umount -l /dev/shm /dev "$ov" 2>/dev/null
}
mkdir -p /dev/infiniband &&
	mknod -m 666 /dev/infiniband/uverbs_softrdma0 c 231 192
ok $? "a /dev/infiniband/uverbs_softrdma0 node in this namespace only"
tap_shm 3p-ucx-$$

export UCX_WARN_UNUSED_ENV_VARS=n
LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 5 60 ucx_info -d >"$tap_tmp/info" 2>&1
grep -q 'Memory domain: softrdma0' "$tap_tmp/info" &&
	grep -A1 'Transport: rc_verbs' "$tap_tmp/info" | grep -q 'softrdma0:1' &&
	grep -A1 'Transport: ud_verbs' "$tap_tmp/info" | grep -q 'softrdma0:1'
ok $? "ucx_info -d: softrdma0, with rc_verbs and ud_verbs on port 1"

iters=500
limit=${UCX_TEST_TIMEOUT:-60}
# run LEVEL TRANSPORTS TEST SIZE [OPTIONS...] -- server and client, each
# bounded by timeout; both exit 0 and the client prints a row of $iters
run() {
	_lvl=$1 _tl=$2 _t=$3 _sz=$4
	shift 4
	_name="$_lvl $_tl $_t, $_sz B${1:+ $*}"
	pair_port=$(free_port)
	if [ "$_lvl" = uct ]; then
		set -- -d softrdma0:1 -x "$_tl" "$@"
		_env=
	else
		_env="UCX_TLS=$_tl UCX_NET_DEVICES=softrdma0:1"
	fi
	_log=$tap_tmp/$_lvl.$_t.$_sz.$pair_port
	# shellcheck disable=SC2086 # _env: words by design
	pair_run "$_log" "$limit" "" 127.0.0.1 env $_env ucx_perftest \
		-p "$pair_port" -t "$_t" -s "$_sz" -n $iters -w 50 -f "$@"
	_crc=$pair_crc _src=$pair_src
	[ $_crc -eq 0 ] && [ $_src -eq 0 ] &&
		awk -v n=$iters '$1 == n { f = 1 } END { exit !f }' "$_log.client"
	_st=$?
	ok $_st "$_name: $iters iterations, both sides exit 0"
	if [ $_st -ne 0 ]; then
		diag "client exit $_crc, server exit $_src"
		show_log "$_log.client"
		show_log "$_log.server"
	fi
}

run uct rc_verbs am_lat 8
run uct rc_verbs am_bw 4096 -D bcopy
run uct rc_verbs am_bw 8192 -D zcopy
run uct rc_verbs put_lat 8
run uct rc_verbs put_bw 65536 -D zcopy
run uct rc_verbs get 4096 -D bcopy
run uct rc_verbs get 65536 -D zcopy
run uct rc_verbs add_lat 8
run uct rc_verbs fadd 8
run uct rc_verbs cswap 8
run uct ud_verbs am_lat 8
run uct ud_verbs am_bw 1024 -D bcopy
run ucp rc_verbs,ud_verbs tag_lat 8
run ucp rc_verbs,ud_verbs tag_bw 1048576
run ucp rc_verbs,ud_verbs ucp_am_lat 8
run ucp rc_verbs,ud_verbs ucp_am_bw 65536
run ucp rc_verbs,ud_verbs ucp_put_bw 65536
run ucp rc_verbs,ud_verbs ucp_get 65536
run ucp rc_verbs,ud_verbs ucp_fadd 8
run ucp rc_verbs,ud_verbs stream_bw 65536
run ucp ud_verbs tag_lat 8
run ucp ud_verbs tag_bw 65536
# run-test.sh's look at /dev/shm does not see this one
ls -A /dev/shm >"$tap_tmp/left"
test ! -s "$tap_tmp/left"
ok $? "softrdma left nothing in /dev/shm"
show_log "$tap_tmp/left"
done_testing
