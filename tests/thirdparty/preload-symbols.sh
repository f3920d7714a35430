#!/bin/sh
# preload-symbols.sh -- LD_PRELOAD completeness of libsoftrdma
#
# Interposing is all or nothing (DESIGN.md §2): every ibv_*/rdma_* name that
# a program, or libibverbs/librdmacm themselves, can reach must be defined
# by libsoftrdma, unversioned or under upstream's version node.  Checks:
#   1. each program's imported ibv_*/rdma_* names (objdump -T);
#   2. every public ibv_*/rdma_* name libibverbs.so.1 and librdmacm.so.1
#      export (default version, IBVERBS_PRIVATE_* provider ABI excluded);
#   3. softrdma's definitions carry no foreign version node;
#   4. at run time (LD_DEBUG=bindings, BIND_NOW) no ibv_*/rdma_* reference
#      of the program or of libibverbs/librdmacm binds to the real libraries.
. "$top_srcdir/tests/lib.sh"
LC_ALL=C
export LC_ALL
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
command -v objdump >/dev/null 2>&1 && command -v nm >/dev/null 2>&1 ||
	skip_all "objdump/nm not installed (Debian package binutils)"
SOFTRDMA_SHM_PREFIX=3p-syms-$$
export SOFTRDMA_SHM_PREFIX
trap 'rm -f /dev/shm/"$SOFTRDMA_SHM_PREFIX"-*; tap_cleanup' EXIT

t=$tap_tmp
# softrdma's definitions: NAME and NAME VERSION (empty when unversioned)
nm -D --defined-only "$SOFTRDMA_LIB" | awk '$2 ~ /^[TWiDBR]$/ { print $3 }' |
	sed 's/@@*/ /' | sort -u >"$t/soft.ver"
cut -d' ' -f1 "$t/soft.ver" | sort -u >"$t/soft"

# missing LIST DESC -- assert every name of file LIST is in soft
missing() {
	sort -u "$1" | comm -23 - "$t/soft" >"$t/miss"
	test ! -s "$t/miss"
	ok $? "$2"
	if [ -s "$t/miss" ]; then
		diag "missing from libsoftrdma ($(wc -l <"$t/miss")):"
		fmt -w 76 "$t/miss" | sed 's/^/#   /'
	fi
}

# lib_path SONAME -- the real library's path, from the linker cache
lib_path() {
	ldconfig -p 2>/dev/null | awk -v so="$1" '$1 == so && /x86-64|64bit/ { print $NF; exit }'
}

progs="ib_send_lat ib_send_bw ib_write_lat ib_write_bw ib_read_lat ib_read_bw
ib_atomic_lat ib_atomic_bw rping rdma_server rdma_client ucmatose
ibv_rc_pingpong ibv_devinfo ibv_devices qperf"
pkg_of() {
	case $1 in
	ib_*) echo perftest ;;
	rping | rdma_server | rdma_client | ucmatose) echo rdmacm-utils ;;
	qperf) echo qperf ;;
	*) echo ibverbs-utils ;;
	esac
}

# 1. what the programs import
found=
for p in $progs; do
	path=$(command -v "$p" 2>/dev/null)
	if [ -z "$path" ]; then
		skip "$p imports" "$p not installed (Debian package $(pkg_of "$p"))"
		continue
	fi
	found="$found $p"
	objdump -T "$path" | awk '$0 ~ /\*UND\*/ && $NF ~ /^(ibv|rdma)_/ { print $NF }' >"$t/imp.$p"
	missing "$t/imp.$p" "libsoftrdma defines the $(sort -u "$t/imp.$p" | wc -l) ibv_/rdma_ names $p imports"
done

# 2. what the real libraries export
verbs=$(lib_path libibverbs.so.1)
rdmacm=$(lib_path librdmacm.so.1)
: >"$t/upstream.ver"
for lib in $verbs $rdmacm; do
	nm -D --defined-only "$lib" | awk '$3 ~ /@@/ { print $3 }' | sed 's/@@/ /' >>"$t/upstream.ver"
done
if [ -z "$verbs" ]; then
	skip "libibverbs exports" "libibverbs.so.1 not installed (Debian package libibverbs1)"
else
	nm -D --defined-only "$verbs" | awk '$3 ~ /@@/ { print $3 }' | sed 's/@@/ /' |
		awk '$1 ~ /^(ibv|rdma)_/ && $2 !~ /PRIVATE/ { print $1 }' >"$t/verbs.pub"
	missing "$t/verbs.pub" "libsoftrdma defines all $(wc -l <"$t/verbs.pub") public ibv_ names of libibverbs.so.1"
	# Not required, listed for the record.
	nm -D --defined-only "$verbs" | awk '$3 ~ /@@/ { print $3 }' | sed 's/@@/ /' |
		awk '$1 !~ /^(ibv|rdma)_/ && $2 !~ /PRIVATE/ { print $1 }' | sort -u |
		comm -23 - "$t/soft" >"$t/other"
	[ -s "$t/other" ] && diag "public libibverbs names outside ibv_*, not defined (libibverbs serves them): $(tr '\n' ' ' <"$t/other")"
fi
if [ -z "$rdmacm" ]; then
	skip "librdmacm exports" "librdmacm.so.1 not installed (Debian package librdmacm1)"
else
	nm -D --defined-only "$rdmacm" | awk '$3 ~ /@@/ { print $3 }' | sed 's/@@/ /' |
		awk '$1 ~ /^(ibv|rdma)_/ { print $1 }' >"$t/cm.pub"
	missing "$t/cm.pub" "libsoftrdma defines all $(wc -l <"$t/cm.pub") rdma_ names of librdmacm.so.1"
fi

# 3. version nodes: unversioned, or exactly upstream's default node
sort -u "$t/upstream.ver" >"$t/upstream.sorted"
awk 'NR == FNR { up[$1] = $2; next }
     NF == 2 && ($1 in up) && up[$1] != $2 { print $1 "@" $2 " (upstream " up[$1] ")" }
     NF == 2 && !($1 in up) && $1 ~ /^(ibv|rdma)_/ { print $1 "@" $2 " (not upstream)" }' \
	"$t/upstream.sorted" "$t/soft.ver" >"$t/badver"
test ! -s "$t/badver"
ok $? "libsoftrdma's ibv_/rdma_ definitions are unversioned or under upstream's node"
show_log "$t/badver"

# 4. run time: no required name binds to the real libraries.  (libibverbs'
# references to its own provider ABI, ibv_cmd_* and friends, may.)
cat "$t"/imp.* "$t/verbs.pub" "$t/cm.pub" 2>/dev/null | sort -u >"$t/required"
for p in $found; do
	LD_DEBUG=bindings LD_DEBUG_OUTPUT="$t/ld.$p" LD_BIND_NOW=1 \
		LD_PRELOAD=$SOFTRDMA_LIB timeout 20 "$p" -h </dev/null >/dev/null 2>&1
	cat "$t/ld.$p".* 2>/dev/null |
		grep -E "to [^ ]*lib(ibverbs|rdmacm)\.so[^ ]* \[[0-9]+\]: normal symbol \`(ibv|rdma)_" |
		sed -n "s/.*binding file \([^ ]*\) .*symbol \`\([^']*\)'.*/\2 \1/p" |
		sort -u | join - "$t/required" >"$t/leak.$p"
	if ! cat "$t/ld.$p".* 2>/dev/null | grep -q 'binding file'; then
		skip "$p run-time bindings" "LD_DEBUG=bindings gave no output"
		continue
	fi
	test ! -s "$t/leak.$p"
	ok $? "$p under LD_PRELOAD: no ibv_/rdma_ reference binds to libibverbs/librdmacm"
	show_log "$t/leak.$p"
done
done_testing
