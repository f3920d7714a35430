#!/bin/sh
# build.sh -- build the fuzz targets (make check runs it: tests/fuzz.am)
#
# usage: build.sh TOP_SRCDIR OUTDIR NAME:SOURCE[,SOURCE...]...
#
# For each target, OUTDIR/NAME-replay: tests/fuzz/NAME.c, its SOURCEs and
# tests/fuzz/replay.c built with $CC and the project's flags (sanitizers
# included in a --enable-sanitizers build); and, when $FUZZ_CC is set,
# OUTDIR/NAME-fuzzer: NAME.c and its SOURCEs built by $FUZZ_CC with
# libFuzzer, ASan and UBSan.  Not through libtool: the two compilers' objects
# never meet, and each binary is one compiler command.
#
# The target canary (tests/fuzz/canary.c) is built too, for tests/fuzz.sh
# to check that a crash fails the test; it is not listed in OUTDIR/targets.
#
# A binary is rebuilt when its command changed, or a source or a header of
# the tree (or config.h) is newer.  OUTDIR/targets lists the names,
# OUTDIR/skip says why there are no libFuzzer binaries.
#
# Environment (from make): CC CPPFLAGS CFLAGS LDFLAGS LIBS FUZZ_CC
# FUZZ_CFLAGS FUZZ_SKIP, and FUZZ_V_P (":" prints the commands, "false"
# one line per binary).
set -u

top=${1:?usage: build.sh TOP_SRCDIR OUTDIR NAME:SOURCE[,SOURCE...]...}
out=${2:?usage: build.sh TOP_SRCDIR OUTDIR NAME:SOURCE[,SOURCE...]...}
shift 2
mkdir -p "$out" || exit 1

# headers -- the directories whose headers a target may include
headers="$top/include $top/lib $top/cm $top/soft $top/tests/fuzz"

# build BIN SOURCES CMD... -- run CMD (which writes BIN) unless BIN is
# newer than SOURCES, config.h and every header, and was made by CMD
build() {
	b_bin=$1
	b_srcs=$2
	shift 2
	b_cmd="$*"
	if [ -f "$b_bin" ] && [ "$(cat "$b_bin.cmd" 2>/dev/null)" = "$b_cmd" ] &&
		[ -z "$(find $b_srcs config.h $headers -name '*.[ch]' \
			-newer "$b_bin" 2>/dev/null | head -n 1)" ]; then
		return 0
	fi
	if ${FUZZ_V_P:-false}; then
		echo "$b_cmd"
	else
		echo "  FUZZ     $b_bin"
	fi
	rm -f "$b_bin" "$b_bin.cmd"
	"$@" || return 1
	printf '%s' "$b_cmd" >"$b_bin.cmd"
}

status=0
names=
# canary: the harness's self-test (tests/fuzz.sh), not a target
for t in canary: "$@"; do
	name=${t%%:*}
	case $t in *:*) list=${t#*:} ;; *) list= ;; esac
	case $name in
	'' | *[!A-Za-z0-9_-]*)
		echo "build.sh: bad target name in '$t' (want NAME:SOURCE,...)" >&2
		status=1
		continue
		;;
	esac
	srcs=
	for s in $(echo "$list" | tr ',' ' '); do
		srcs="$srcs $top/$s"
	done
	target=$top/tests/fuzz/$name.c
	missing=
	for f in "$target" $srcs; do
		[ -f "$f" ] || missing="$missing $f"
	done
	if [ -n "$missing" ]; then
		echo "build.sh: fuzz target $name: no such file:$missing" >&2
		status=1
		continue
	fi
	[ "$name" = canary ] || names="$names $name"

	# shellcheck disable=SC2086 # the flags are lists of words
	build "$out/$name-replay" "$target $srcs $top/tests/fuzz/replay.c" \
		$CC $CPPFLAGS $CFLAGS -o "$out/$name-replay" \
		"$top/tests/fuzz/replay.c" "$target" $srcs $LDFLAGS $LIBS ||
		status=1
	if [ -n "${FUZZ_CC:-}" ]; then
		# shellcheck disable=SC2086
		build "$out/$name-fuzzer" "$target $srcs" \
			$FUZZ_CC $CPPFLAGS $FUZZ_CFLAGS -o "$out/$name-fuzzer" \
			"$target" $srcs $LIBS || status=1
	else
		rm -f "$out/$name-fuzzer" "$out/$name-fuzzer.cmd"
	fi
done
echo $names | tr ' ' '\n' >"$out/targets"
printf '%s\n' "${FUZZ_SKIP:-}" >"$out/skip"
exit $status
