#!/bin/sh
# srq_scale.sh -- many endpoints on one server context sharing one SRQ:
# tools/scale_probe -s connects N endpoints (receive depth 2, eager 256 on
# both sides), every one exchanging a message that the server echoes and
# the client checks; all N must connect and echo, with no error, and the
# SRQ's registered receive memory per endpoint must stay under 16 KiB.
# N: RDMAMSG_TEST_SRQ_EPS (default 3,000; 10,000 in srq_scale-long.sh),
# 200 with RDMAMSG_TEST_SCALE=small; client processes:
# RDMAMSG_TEST_SRQ_CLIENTS (default 1).  Connects may take their time on a
# loaded machine (60 s each); the server needs a file descriptor per
# endpoint, so a hard limit below N + 1,000 skips the test.
. "$top_srcdir/tests/lib.sh"

n=${RDMAMSG_TEST_SRQ_EPS:-3000}
[ "${RDMAMSG_TEST_SCALE:-}" = small ] && n=200
clients=${RDMAMSG_TEST_SRQ_CLIENTS:-1}
need=$((n + 1000))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $need ]; then
	hard=$(ulimit -Hn)
	if [ "$hard" != unlimited ] && [ "$hard" -lt $need ]; then
		skip_all "$n endpoints need $need file descriptors (hard limit $hard)"
	fi
	ulimit -n $need
fi
probe=$top_builddir/tools/scale_probe
if [ ! -x "$probe" ]; then
	echo "Bail out! $probe not built"
	exit 1
fi
export RDMAMSG_SOFTRDMA_PATH=${RDMAMSG_SOFTRDMA_PATH:-$top_builddir/soft/.libs/libsoftrdma.so}
tap_shm rmt-srqscale-$$ always
"$probe" -s -n "$n" -c "$clients" -t 60000 -l $((64 + n / 8)) \
	>"$tap_tmp/probe.log" 2>&1
ok $? "$n endpoints on one SRQ connected and echoed: exits 0"
line=$(grep '^scale' "$tap_tmp/probe.log")
echo "# $line"
up=$(echo "$line" | sed -n 's/.* up=\([0-9]*\).*/\1/p')
echoed=$(echo "$line" | sed -n 's/.* echoed=\([0-9]*\).*/\1/p')
errors=$(echo "$line" | sed -n 's/.* errors=\([0-9]*\).*/\1/p')
reg=$(echo "$line" | sed -n 's/.* srv_srq_reg_per_ep=\([0-9]*\).*/\1/p')
[ "$up" = "$n" ] && [ "$echoed" = "$n" ]
ok $? "all $n up ($up) and echoed, data checked ($echoed)"
[ "$errors" = 0 ]
ok $? "no error ($errors)"
[ -n "$reg" ] && [ "$reg" -gt 0 ] && [ "$reg" -lt 16384 ]
ok $? "SRQ registered receive memory per endpoint: $reg bytes (< 16 KiB)"
show_log "$tap_tmp/probe.log"
done_testing
