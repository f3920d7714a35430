#!/bin/sh
# pyverbs.sh -- rdma-core's own conformance suite, the pyverbs tests that
# Debian's python3-pyverbs ships under /usr/share/doc/rdma-core/tests, run
# whole (as run_tests.py) against softrdma with LD_PRELOAD: pyverbs is
# Cython over libibverbs, so every verb it calls must be softrdma's.
#
# One TAP line per test.  The file fails on any failure or error, and on
# any skip whose reason rxe (the kernel's software RoCE device) would not
# also give: only hardware-specific features (mlx5, EFA, device memory, raw
# packet, XRC, parent domain, CUDA, ODP, ...) may be missing.  Failures in
# areas still being worked on are listed below as known, each with its
# owner: they are reported as TODO (expected failures) until fixed; one that
# passes is noted so that it can be dropped from the list.
#
# Environment: PYVERBS_KNOWN_FAILURES names a file of more known failures
# (same format as the list below); PYVERBS_TESTS limits the run to these
# run_tests.py arguments (e.g. "test_mr test_device").
#
# softrdma has no sysfs.  The suite finds the IP address of a device through
# /sys/class/infiniband/DEV/device/net/IFACE (its RDMA-CM tests skip without
# one): in a private mount namespace an overlay adds the entry that an rxe
# device on lo would have; without root the RDMA-CM tests skip.
. "$top_srcdir/tests/lib.sh"
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
src=/usr/share/doc/rdma-core/tests
# pyverbs lives in Debian's python, not in whatever python3 PATH finds
py=/usr/bin/python3
[ -f "$src/run_tests.py" ] && "$py" -c 'import pyverbs' 2>/dev/null ||
	skip_all "pyverbs tests not installed (Debian package python3-pyverbs)"
tap_shm 3p-pyverbs-$$

# Known failures: TEST_ID OWNER WHAT-IS-WRONG.  Owners: softrc (RC data
# path: progress without the responder's poll), softud (UD/UC/multicast),
# softcm (rdma_cm).  Tighten this list as those land.
known_failures='
'

# Skips rxe gives too (ID: REASON lines are matched with grep -E)
rxe_skips='
: Can not run the test over non MLX5 device$
: Could not open mlx5 context
: Can not run the test over non EFA device$
: Device memory is not supported$
: ODP is not supported
: Allocating dmabuf is not supported
: Create XRCD is not supported$
: Create QP type 8 is not supported$
: Create Raw Packet QP .*is not supported$
: Parent Domain is not supported
: There are no huge pages
: cuda-python .* must be installed
: PCI device must be passed by the user$
: Query device real time is not supported$
: Importing a device is not supported$
^tests\.test_mlx5_timestamp\..*: Create Extended CQ is not supported$
^tests\.test_tag_matching\..*: Extended CQ is not supported$
'
# and, without the sysfs overlay, the RDMA-CM tests' missing interface
net_skip=": Device [^ ]* doesn't have net interface$"

d=$tap_tmp/pyverbs
mkdir -p "$d" && cp -R "$src" "$d/" && gunzip -f "$d"/tests/*.gz ||
	skip_all "cannot copy $src"
printf '%s\n' "$known_failures" | grep . >"$d/known"
[ -n "${PYVERBS_KNOWN_FAILURES:-}" ] && grep -v '^#' "$PYVERBS_KNOWN_FAILURES" | grep . >>"$d/known"
printf '%s\n' "$rxe_skips" | grep . >"$d/skips"

# run -- the suite under LD_PRELOAD; TAG lines to $d/out, log to $d/err
mkdir -p "$d/fake/infiniband/softrdma0/device/net/lo"
run='
if [ "$(id -u)" = 0 ] && mount -t overlay softrdma-sysfs \
	-o "lowerdir=$D/fake:/sys/class" /sys/class 2>/dev/null; then
	echo overlay >"$D/overlay"
fi
# shellcheck disable=SC2086
LD_PRELOAD="$SOFTRDMA_PRELOAD" exec timeout --kill-after=5 270 "$PY" \
	"$RUNNER" "$D/tests" $PYVERBS_TESTS
'
runner=$top_srcdir/tests/thirdparty/pyverbs-run.py
export SOFTRDMA_PRELOAD D="$d" PY="$py" RUNNER="$runner" PYVERBS_TESTS="${PYVERBS_TESTS:-}"
if [ "$(id -u)" = 0 ] && unshare --mount --propagation private true 2>/dev/null; then
	unshare --mount --propagation private sh -c "$run" >"$d/out" 2>"$d/err"
else
	sh -c "$run" >"$d/out" 2>"$d/err"
fi
rc=$?
[ -f "$d/overlay" ] || {
	diag "no sysfs overlay (needs root): the RDMA-CM tests skip"
	echo "$net_skip" >>"$d/skips"
}

np=0 nf=0 ne=0 ns=0 nk=0 nx=0
while IFS= read -r line; do
	kind=${line%% *}
	rest=${line#* }
	id=${rest%%: *}
	case $kind in
	pass)
		np=$((np + 1))
		st=0
		if grep -q "^$id " "$d/known"; then
			nx=$((nx + 1))
			st=1 # the list must stay honest
			diag "known failure passes now, drop it from the list: $id"
		fi
		ok $st "$id" ;;
	skip)
		ns=$((ns + 1))
		k=$(grep "^$id " "$d/known" | head -n 1)
		if printf '%s\n' "$rest" | grep -Eqf "$d/skips"; then
			skip "$id" "${rest#*: }"
		elif [ -n "$k" ]; then
			nk=$((nk + 1))
			tap_n=$((tap_n + 1))
			echo "not ok $tap_n - $id # TODO known (${k#* }); skip: ${rest#*: }"
		else
			ok 1 "$id: skipped, and rxe would not skip it: ${rest#*: }"
		fi ;;
	fail | error)
		[ "$kind" = fail ] && nf=$((nf + 1)) || ne=$((ne + 1))
		k=$(grep "^$id " "$d/known" | head -n 1)
		if [ -n "$k" ]; then
			nk=$((nk + 1))
			k=${k#* }
			tap_n=$((tap_n + 1))
			echo "not ok $tap_n - $id # TODO known ($k); $kind: ${rest#*: }"
		else
			ok 1 "$id: $kind: ${rest#*: }"
		fi ;;
	esac
done <"$d/out"
total=$((np + nf + ne + ns))
diag "pyverbs: $total tests: $np passed, $nf failed, $ne errored, $ns skipped ($nk failures and skips known)"
[ $rc -eq 0 ] || {
	ok 1 "the suite ran to its end (exit $rc)"
	tail -n 30 "$d/err" | sed 's/^/#   /'
}
[ $total -gt 0 ]
ok $? "the suite ran tests"
done_testing
