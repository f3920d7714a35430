#!/bin/sh
# demo.sh -- set up, build and run the main demo on softrdma
#
# usage: scripts/demo.sh
#
# Runs rdmamsg_perf's server and client on this machine over softrdma (the
# built-in software RDMA device) and prints the latency tables, blocking on
# the fd and busy polling.  Before
# rdmamsg_perf exists in the tree, it falls back to the most complete
# program there is: ibv_rc_pingpong on softrdma.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/_build
"$top/scripts/setup.sh" "$build" --enable-picky --enable-python

soft=$build/soft/.libs/libsoftrdma.so
export RDMAMSG_SOFTRDMA_PATH="$soft"
export SOFTRDMA_SHM_PREFIX="rdmamsg-demo-$$"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

server_pid=
cleanup() {
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
	return 0
}
trap cleanup EXIT

if [ -x "$build/tools/rdmamsg_perf" ]; then
	# Blocking on the context's fd (what an event-driven server does),
	# then busy polling (a core per process; what latency-bound code does).
	for mode in --fd --busy; do
		echo "demo: rdmamsg_perf $mode latency on softrdma (127.0.0.1:$port)"
		"$build/tools/rdmamsg_perf" -s -p "$port" "$mode" &
		server_pid=$!
		"$build/tools/rdmamsg_perf" -c 127.0.0.1 -p "$port" "$mode" \
			-t lat -n 10000
		wait "$server_pid"
		server_pid=
	done
else
	echo "demo: ibv_rc_pingpong on softrdma (127.0.0.1:$port)"
	LD_PRELOAD=$soft ibv_rc_pingpong -g 1 -p "$port" -n 10000 &
	server_pid=$!
	sleep 0.5
	LD_PRELOAD=$soft ibv_rc_pingpong -g 1 -p "$port" -n 10000 127.0.0.1
	wait "$server_pid"
	server_pid=
fi
