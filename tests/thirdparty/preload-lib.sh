# preload-lib.sh -- LD_PRELOAD completeness of libsoftrdma (sourced)
# shellcheck shell=sh
#
# Interposing is all or nothing (DESIGN.md §2): every ibv_*/rdma_* name that
# a program, or libibverbs/librdmacm themselves, can reach must be defined
# by libsoftrdma, unversioned or under upstream's version node.
# ps_scope=programs (preload-symbols.sh):
#   1. each program's imported ibv_*/rdma_* names (objdump -T);
#   3. softrdma's definitions carry no foreign version node;
#   4. at run time (LD_DEBUG=bindings, LD_BIND_NOW=1) none of the program's
#      own ibv_*/rdma_* references binds to the real libraries.
# ps_scope=libraries (preload-exports.sh):
#   2. every public name libibverbs.so.1 and librdmacm.so.1 export (default
#      version; IBVERBS_PRIVATE_* provider ABI excluded), except librdmacm's
#      rsocket calls (rsocket, rconnect, ...): librdmacm's own implementation
#      runs on softrdma's rdma_* and ibv_*, so softrdma must NOT define them;
#   4. at run time no reference that libibverbs/librdmacm make to those
#      names binds to the real libraries.
. "$top_srcdir/tests/lib.sh"
LC_ALL=C
export LC_ALL
[ -e "${SOFTRDMA_LIB:-}" ] || skip_all "libsoftrdma.so not built"
command -v objdump >/dev/null 2>&1 && command -v nm >/dev/null 2>&1 ||
	skip_all "objdump/nm not installed (Debian package binutils)"
tap_shm 3p-syms-${ps_scope}-$$

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
rstream riostream rcopy rdma_xserver rdma_xclient
ibv_rc_pingpong ibv_devinfo ibv_devices qperf"
pkg_of() {
	case $1 in
	ib_*) echo perftest ;;
	rping | rdma_* | ucmatose | rstream | riostream | rcopy) echo rdmacm-utils ;;
	qperf) echo qperf ;;
	*) echo ibverbs-utils ;;
	esac
}

# 1. what the programs import
found=
for p in $progs; do
	path=$(command -v "$p" 2>/dev/null)
	if [ -z "$path" ]; then
		[ "$ps_scope" = programs ] &&
			skip "$p imports" "$p not installed (Debian package $(pkg_of "$p"))"
		continue
	fi
	found="$found $p"
	objdump -T "$path" | awk '$0 ~ /\*UND\*/ && $NF ~ /^(ibv|rdma)_/ { print $NF }' |
		sort -u >"$t/imp.$p"
	[ "$ps_scope" = programs ] &&
		missing "$t/imp.$p" "libsoftrdma defines the $(wc -l <"$t/imp.$p") ibv_/rdma_ names $p imports"
done

# 2. what the real libraries export
verbs=$(lib_path libibverbs.so.1)
rdmacm=$(lib_path librdmacm.so.1)
: >"$t/upstream.ver"
for lib in $verbs $rdmacm; do
	nm -D --defined-only "$lib" | awk '$3 ~ /@@/ { print $3 }' | sed 's/@@/ /' >>"$t/upstream.ver"
done
if [ "$ps_scope" != libraries ]; then
	:
elif [ -z "$verbs" ]; then
	skip "libibverbs exports" "libibverbs.so.1 not installed (Debian package libibverbs1)"
else
	# every default-version name outside the provider ABI: ibv_*, and the
	# _ibv_query_gid_ex/_ibv_query_gid_table that verbs.h inlines call,
	# mbps_to_ibv_rate, mult_to_ibv_rate
	nm -D --defined-only "$verbs" | awk '$3 ~ /@@/ { print $3 }' | sed 's/@@/ /' |
		awk '$2 !~ /PRIVATE/ { print $1 }' | sort -u >"$t/verbs.pub"
	missing "$t/verbs.pub" "libsoftrdma defines all $(wc -l <"$t/verbs.pub") public names of libibverbs.so.1"
fi
if [ "$ps_scope" != libraries ]; then
	:
elif [ -z "$rdmacm" ]; then
	skip "librdmacm exports" "librdmacm.so.1 not installed (Debian package librdmacm1)"
else
	# rdma_* (the rsocket calls, rsocket, rbind, ..., stay librdmacm's)
	nm -D --defined-only "$rdmacm" | awk '$3 ~ /@@/ { print $3 }' | sed 's/@@/ /' |
		awk '$1 ~ /^rdma_/ { print $1 }' | sort -u >"$t/cm.pub"
	missing "$t/cm.pub" "libsoftrdma defines all $(wc -l <"$t/cm.pub") rdma_* names of librdmacm.so.1"
	nm -D --defined-only "$rdmacm" | awk '$3 ~ /@@/ { print $3 }' | sed 's/@@/ /' |
		awk '$1 !~ /^rdma_/ { print $1 }' | sort -u | comm -12 - "$t/soft" >"$t/rs.shadow"
	test ! -s "$t/rs.shadow"
	ok $? "libsoftrdma shadows none of librdmacm's rsocket calls"
	show_log "$t/rs.shadow"
fi

# 3. version nodes: unversioned, or exactly upstream's default node
if [ "$ps_scope" = programs ]; then
	sort -u "$t/upstream.ver" >"$t/upstream.sorted"
	awk 'NR == FNR { up[$1] = $2; next }
	     NF == 2 && ($1 in up) && up[$1] != $2 { print $1 "@" $2 " (upstream " up[$1] ")" }
	     NF == 2 && !($1 in up) && $1 ~ /^(ibv|rdma)_/ { print $1 "@" $2 " (not upstream)" }' \
		"$t/upstream.sorted" "$t/soft.ver" >"$t/badver"
	test ! -s "$t/badver"
	ok $? "libsoftrdma's ibv_/rdma_ definitions are unversioned or under upstream's node"
	show_log "$t/badver"
fi

# 4. run time: no required name binds to the real libraries.  (libibverbs'
# references to its own provider ABI, ibv_cmd_* and friends, may.)
# programs: the program's own references to what it imports; libraries:
# libibverbs'/librdmacm's references to their public names.
if [ "$ps_scope" = libraries ]; then
	cat "$t/verbs.pub" "$t/cm.pub" 2>/dev/null | sort -u >"$t/required"
fi
for p in $found; do
	if [ "$ps_scope" = programs ]; then
		cp "$t/imp.$p" "$t/required"
		from="/*$p"
	else
		from='/lib(ibverbs|rdmacm)\.so[^ ]*'
	fi
	LD_DEBUG=bindings LD_DEBUG_OUTPUT="$t/ld.$p" LD_BIND_NOW=1 \
		LD_PRELOAD="$SOFTRDMA_PRELOAD" timeout -k 10 20 "$p" -h </dev/null >/dev/null 2>&1
	cat "$t/ld.$p".* 2>/dev/null |
		grep -E "binding file [^ ]*$from \[[0-9]+\] to [^ ]*lib(ibverbs|rdmacm)\.so[^ ]* \[[0-9]+\]: normal symbol \`" |
		sed -n "s/.*binding file \([^ ]*\) .*symbol \`\([^']*\)'.*/\2 \1/p" |
		sort -u | join - "$t/required" >"$t/leak.$p"
	if ! cat "$t/ld.$p".* 2>/dev/null | grep -q 'binding file'; then
		skip "$p run-time bindings" "LD_DEBUG=bindings gave no output"
		continue
	fi
	test ! -s "$t/leak.$p"
	rc=$?
	if [ "$ps_scope" = programs ]; then
		ok $rc "$p under LD_PRELOAD: none of its ibv_/rdma_ references binds to libibverbs/librdmacm"
	else
		ok $rc "$p under LD_PRELOAD: no libibverbs/librdmacm reference to a public name binds there"
	fi
	show_log "$t/leak.$p"
done
