#!/bin/sh
# configure-deps.sh -- a missing dependency stops configure with the name of
# the Debian package to install
#
# configure runs from a private copy of its inputs, so that the test works
# alike in an in-tree build (where the source directory is configured, and
# configure refuses a second build directory) and out of tree.  A control
# run with nothing hidden must succeed: each failure below is then caused
# by the dependency the run hides, and its error must name the package.
. "$top_srcdir/tests/lib.sh"

src=$tap_tmp/src
mkdir -p "$src/include"
cp -R "$top_srcdir/build-aux" "$src/" &&
	cp "$top_srcdir/configure" "$top_srcdir/config.h.in" \
		"$top_srcdir/Makefile.in" "$top_srcdir/rdmamsg.pc.in" "$src/" &&
	cp "$top_srcdir/include/rdmamsg.h" "$src/include/" &&
	chmod -R u+w "$src" # a distcheck source tree is read-only
ok $? "copy configure and its inputs"

# conf NAME ENV... -- run configure in a build directory of its own, from
# a copy of the control run's cache (five full runs outlast the time
# limit on a loaded machine); a cached result never hides a dependency:
# the variable a run sets in its environment wins over the cache's
# (${ac_cv_x=...}), and pkg-config's results are not cached
conf() {
	name=$1
	shift
	mkdir -p "$tap_tmp/$name"
	# (the precious variables' records go: a run may set them)
	[ -f "$tap_tmp/control.cache" ] &&
		grep -v '^ac_cv_env_' "$tap_tmp/control.cache" \
			>"$tap_tmp/$name/config.cache"
	(cd "$tap_tmp/$name" && env "$@" "$src/configure" \
		--disable-dependency-tracking --cache-file=config.cache \
		>out 2>&1)
}

conf control PATH="$PATH"
rc=$?
cp "$tap_tmp/control/config.cache" "$tap_tmp/control.cache" 2>/dev/null
ok $rc "configure succeeds with every dependency present"
[ $rc -eq 0 ] || show_log "$tap_tmp/control/out"

# try NAME PACKAGE ENV... -- run configure with ENV hiding one dependency
try() {
	name=$1
	package=$2
	shift 2
	conf "$name" "$@"
	ok $((! $?)) "configure fails without $name"
	grep -q "^configure: error: .*install the Debian package $package" \
		"$tap_tmp/$name/out"
	ok $? "its error names $package"
	show_log "$tap_tmp/$name/out" | tail -n 3
}

try libibverbs libibverbs-dev PKG_CONFIG_LIBDIR="$tap_tmp/empty" \
	PKG_CONFIG_PATH=
try libev libev-dev ac_cv_header_ev_h=no
try libev-lib libev-dev ac_cv_lib_ev_ev_loop_new=no
done_testing
