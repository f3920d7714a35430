#!/bin/sh
# bench-python.sh -- the Python binding (bindings/python) against the C
# library (rdmamsg_perf --fd) and asyncio's TCP streams, in one run
#
# usage: tools/bench-python.sh [-b BUILD_DIR] [bench.py options...]
#
# Needs a build configured with --enable-python (scripts/setup.sh _build
# --enable-picky --enable-python).  Prints one-way latency, round trips
# per second and message rate per peer, and the ratios.
# SOFTRDMA_NO_DIRECT_WAKE=1: softrdma wakes a sleeping peer through its
# progress thread, as before the direct wake (before/after from one build).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/_build
if [ "${1:-}" = -b ]; then
	build=$(cd "$2" && pwd)
	shift 2
fi
pydir=$build/bindings/python
[ -f "$pydir/.python" ] || {
	echo "bench-python: $build has no Python binding (configure --enable-python)" >&2
	exit 1
}
export PYTHONPATH="$pydir"
export RDMAMSG_SOFTRDMA_PATH="$build/soft/.libs/libsoftrdma.so"
export SOFTRDMA_SHM_PREFIX="bench-python-$$"
exec "$(cat "$pydir/.python")" "$top/bindings/python/bench/bench.py" \
	--perf "$build/tools/rdmamsg_perf" "$@"
