#!/bin/sh
# configure-deps.sh -- a missing dependency stops configure with the name of
# the Debian package to install
. "$top_srcdir/tests/lib.sh"

# try NAME PACKAGE ENV... -- run configure with ENV hiding one dependency
try() {
	name=$1
	package=$2
	shift 2
	mkdir -p "$tap_tmp/$name"
	(cd "$tap_tmp/$name" && env "$@" "$top_srcdir/configure" -q \
		>out 2>&1)
	ok $((! $?)) "configure fails without $name"
	grep -q "install the Debian package $package" "$tap_tmp/$name/out"
	ok $? "the error names $package"
	show_log "$tap_tmp/$name/out"
}

try libibverbs libibverbs-dev PKG_CONFIG_LIBDIR="$tap_tmp/empty" \
	PKG_CONFIG_PATH=
try libev libev-dev ac_cv_header_ev_h=no
try libev-lib libev-dev ac_cv_lib_ev_ev_loop_new=no
done_testing
