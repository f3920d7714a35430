#!/bin/sh
# cmtime.sh -- unmodified cmtime (rdmacm-utils) on softrdma via LD_PRELOAD:
# 1,000 connections set up at once against one listener and torn down;
# every step completes (a connect beyond the backlog waits, never fails).
. "$top_srcdir/tests/lib.sh"
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
command -v cmtime >/dev/null 2>&1 ||
	skip_all "cmtime not installed (Debian package rdmacm-utils)"
tap_shm cm-cmtime-$$ always

n=1000
[ "${RDMAMSG_TEST_SCALE:-}" = small ] && n=100
port=$(free_port)
# the server serves until killed
LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 120 cmtime -p "$port" \
	>"$tap_tmp/s" 2>&1 &
spid=$!
tap_srv_pids="$tap_srv_pids $spid"
wait_port "$port" 10
ok $? "cmtime server listens"
LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 100 cmtime -s 127.0.0.1 -p "$port" \
	-c "$n" >"$tap_tmp/c" 2>&1
crc=$?
ok $crc "cmtime client: $n connections, exit 0"
for step in "create id" "resolve addr" "resolve route" "create qp" \
	"connect" "disconnect" "destroy"; do
	grep -q "^$step *:" "$tap_tmp/c"
	ok $? "cmtime reports '$step'"
done
grep -i "error\|fail" "$tap_tmp/c" >"$tap_tmp/err"
[ ! -s "$tap_tmp/err" ]
ok $? "no error reported"
show_log "$tap_tmp/err" | head -n 5
[ $crc -eq 0 ] || show_log "$tap_tmp/c"
grep -E "^(connect|disconnect) " "$tap_tmp/c" | sed 's/^/# /'
kill -TERM "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
done_testing
