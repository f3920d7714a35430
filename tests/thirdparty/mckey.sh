#!/bin/sh
# mckey.sh -- rdma-core's mckey, unmodified, on softrdma: three receivers
# join 239.1.2.3 through rdma_join_multicast, one sender sends to the group
. "$top_srcdir/tests/lib.sh"
[ -f "$SOFTRDMA_LIB" ] || skip_all "libsoftrdma.so not built"
command -v mckey >/dev/null || skip_all "mckey missing (apt-get install rdmacm-utils)"
SOFTRDMA_SHM_PREFIX=t-mckey-$$
export SOFTRDMA_SHM_PREFIX

# run COUNT SIZE [SENDER ARGS] -- three receivers, then the sender once
# all joined
run() {
	rpids=
	for r in 1 2 3; do
		# line-buffered (stdbuf keeps LD_PRELOAD, adding its own):
		# a file gets mckey's printf output only at exit otherwise,
		# and the wait below would always run out
		LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 stdbuf -oL mckey -m 239.1.2.3 \
			-b 127.0.0.1 -C "$1" -S "$2" >"$tap_tmp/rcv$r.log" 2>&1 &
		rpids="$rpids $!"
		tap_srv_pids="$tap_srv_pids $!" # TERM through timeout(1)
	done
	# a receiver prints "receiving data transfers" once it joined
	i=0
	while [ "$(cat "$tap_tmp"/rcv?.log | grep -c 'receiving data')" -lt 3 ] && [ $i -lt 200 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	test $i -lt 200
	ok $? "mckey $1 x $2 bytes ${3:-}: all three receivers joined ($i waits)"
	LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 60 mckey -m 239.1.2.3 -b 127.0.0.1 -s \
		-C "$1" -S "$2" ${3:-} >"$tap_tmp/snd.log" 2>&1
	src=$?
	rc=0
	for p in $rpids; do
		wait "$p" || rc=1
	done
	test "$src" -eq 0 && test "$rc" -eq 0
	ok $? "mckey $1 x $2 bytes ${3:-}: sender $src, receivers all done"
	if [ "$src" -ne 0 ] || [ "$rc" -ne 0 ]; then
		show_log "$tap_tmp/snd.log"
		for r in 1 2 3; do show_log "$tap_tmp/rcv$r.log"; done
	fi
}

run 10 100
run 200 1024
run 50 512 -o # the sender joins send-only

left=$(ls /dev/shm | grep -c "^$SOFTRDMA_SHM_PREFIX")
test "$left" -eq 0
ok $? "no /dev/shm entries left ($left)"
done_testing
