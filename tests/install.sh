#!/bin/sh
# install.sh -- make install puts the header, libraries, man pages and
# rdmamsg.pc where a user expects them, and a program built with
# pkg-config against the installed tree runs
. "$top_srcdir/tests/lib.sh"
command -v pkg-config >/dev/null || skip_all "pkg-config not found (apt-get install pkgconf)"

root=$tap_tmp/root
${MAKE:-make} -s -C "$top_builddir" install DESTDIR="$root" \
	>"$tap_tmp/install.out" 2>&1
ok $? "make install DESTDIR=..."
show_log "$tap_tmp/install.out"

prefix=$(sed -n 's/^prefix=//p' "$top_builddir/rdmamsg.pc")
libdir=$(sed -n 's/^libdir=//p' "$top_builddir/rdmamsg.pc" | sed "s|\${exec_prefix}|$prefix|")
pcdir="$root$libdir/pkgconfig"
for f in "$prefix/include/rdmamsg.h" "$libdir/librdmamsg.so" \
	"$libdir/rdmamsg/libsoftrdma.so" "$libdir/pkgconfig/rdmamsg.pc" \
	"$prefix/share/man/man7/rdmamsg.7" \
	"$prefix/share/man/man3/rdmamsg_connect.3"; do
	test -e "$root$f"
	ok $? "installed $f"
done

export PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR="$root"
# A sanitizer build's library needs a program built with the sanitizers.
san=
[ -n "${SAN_PRELOAD:-}" ] && san="-fsanitize=address,undefined"
${CC:-cc} $san -o "$tap_tmp/hello" "$top_srcdir/samples/hello/hello.c" \
	$(pkg-config --cflags --libs rdmamsg) >"$tap_tmp/cc.out" 2>&1
ok $? "samples/hello builds with pkg-config --cflags --libs rdmamsg"
show_log "$tap_tmp/cc.out"

# The installed hello, on the installed library and softrdma (only the
# DESTDIR staging needs saying), gets its echo from the build tree's server.
export SOFTRDMA_SHM_PREFIX="install-$$"
port=$(free_port)
start_echo_server "$port"
LD_LIBRARY_PATH="$root$libdir" \
	RDMAMSG_SOFTRDMA_PATH="$root$libdir/rdmamsg/libsoftrdma.so" \
	timeout -k 10 20 "$tap_tmp/hello" "127.0.0.1:$port" >"$tap_tmp/run.out" 2>&1
ok $? "the installed hello exits 0"
grep -qx "echo: hello" "$tap_tmp/run.out"
ok $? "the installed hello gets its echo"
show_log "$tap_tmp/run.out"
stop_echo_server
ok $? "echo_server quits when told, exit status 0"
done_testing
