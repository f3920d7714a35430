#!/bin/sh
# clang-build.sh -- the tree builds warning-free with clang too: a scratch
# build out of tree, configured CC=clang --enable-picky (configure.ac's
# warnings, -Werror), of the libraries, the tools and the test programs.
# clang warns where gcc does not (-Wsometimes-uninitialized, a format
# attribute's arguments, a signed length against an unsigned one), and a
# user's distribution may build with it.
#
# Skipped without clang, in an in-tree build (configure refuses a second
# build directory for a configured source tree) and in the sanitizer and
# valgrind stages, which compile the same sources as the plain one.
. "$top_srcdir/tests/lib.sh"
command -v clang >/dev/null 2>&1 ||
	skip_all "clang not installed (Debian package clang)"
[ ! -f "$top_srcdir/config.status" ] ||
	skip_all "in-tree build: configure takes no second build directory"
[ "${RDMAMSG_TEST_VALGRIND:-0}" != 1 ] && [ -z "${SAN_PRELOAD:-}" ] ||
	skip_all "the plain stage builds with clang"

# the scratch build's makes are not the running make's sub-makes: its
# MAKEFLAGS would hand them its command line (TESTS=this test, which
# the scratch tree's check would run again, and so on) and its jobserver
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
b=$tap_tmp/build
mkdir -p "$b"
(cd "$b" && "$top_srcdir/configure" CC=clang --enable-picky \
	--disable-dependency-tracking) >"$tap_tmp/configure.log" 2>&1
rc=$?
ok $rc "configure CC=clang --enable-picky"
[ $rc -eq 0 ] || show_log "$tap_tmp/configure.log"

jobs=$(nproc 2>/dev/null || echo 2)
# built NAME LOG MAKE-ARGS... -- make in the scratch tree: one assertion,
# with clang's diagnostics when it fails
built() {
	_name=$1 _log=$2
	shift 2
	make -C "$b" -j"$jobs" "$@" >"$_log" 2>&1
	_rc=$?
	ok $_rc "$_name"
	[ $_rc -eq 0 ] || grep -E -A4 ': (error|warning):' "$_log" |
		head -n 40 | sed 's/^/#   /'
}
built "the libraries and tools build with clang, no warning" \
	"$tap_tmp/make.log"
# the test programs, none run (TESTS empty)
built "the test programs build with clang, no warning" \
	"$tap_tmp/check.log" check TESTS=
done_testing
