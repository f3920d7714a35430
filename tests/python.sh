#!/bin/sh
# python.sh -- the Python binding's pytest suite (bindings/python/tests)
# against the in-tree build, one TAP line per pytest test; then the package
# installed with pip (offline, --no-build-isolation) imports and talks.
# No tests collected, or any failure, fails.
. "$top_srcdir/tests/lib.sh"
pydir=$top_builddir/bindings/python
[ -f "$pydir/.python" ] || skip_all "configured without --enable-python"
PYTHON=$(cat "$pydir/.python")
SOFTRDMA_SHM_PREFIX=test-python-$$
export SOFTRDMA_SHM_PREFIX
# A sanitizer build's library needs the runtimes loaded before python.
if [ -n "${SAN_PRELOAD:-}" ]; then
	LD_PRELOAD="$SAN_PRELOAD"
	ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0
	export LD_PRELOAD ASAN_OPTIONS
fi
PYTHONPATH=$pydir
PYTHONDONTWRITEBYTECODE=1
RDMAMSG_TEST_BUILDDIR=$top_builddir
export PYTHONPATH PYTHONDONTWRITEBYTECODE RDMAMSG_TEST_BUILDDIR

(cd "$tap_tmp" && timeout -k 10 600 "$PYTHON" -m pytest -p no:cacheprovider -v \
	-W error::pytest.PytestUnraisableExceptionWarning \
	--rootdir "$top_srcdir/bindings/python" \
	"$top_srcdir/bindings/python/tests" >"$tap_tmp/pytest.out" 2>&1)
rc=$?
n=0
# "tests/test_x.py::test_y[param] PASSED   [ 10%]"
while read -r name result _; do
	case $result in
	PASSED | XFAIL) ok 0 "pytest ${name##*/}"; n=$((n + 1)) ;;
	SKIPPED) skip "pytest ${name##*/}" "skipped by pytest"; n=$((n + 1)) ;;
	FAILED | ERROR | XPASS) ok 1 "pytest ${name##*/}"; n=$((n + 1)) ;;
	esac
done <<EOT
$(grep -E '::[^ ]+ (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)' "$tap_tmp/pytest.out")
EOT
[ $n -gt 0 ]
ok $? "pytest collected and ran tests ($n)"
[ $rc -eq 0 ]
ok $? "pytest exits 0 (got $rc)"
[ $rc -eq 0 ] || show_log "$tap_tmp/pytest.out"
grep -E '^(=+ .*(passed|failed|error).* =+)$' "$tap_tmp/pytest.out" | sed 's/^/# /'

# check_site NAME SITE [ENV...] -- the package under SITE imports from there
# and echoes over softrdma
cat >"$tap_tmp/echo.py" <<'EOT'
import asyncio, rdmamsg, sys
assert rdmamsg.__file__.startswith(sys.argv[1]), rdmamsg.__file__
async def main():
    async with rdmamsg.Context() as a, rdmamsg.Context() as b:
        async def echo(ep):
            async for m in ep:
                await ep.send(m)
        async with await rdmamsg.start_server(echo, "127.0.0.1:0", ctx=a) as s:
            async with await rdmamsg.connect(("127.0.0.1", s.port), ctx=b) as ep:
                await ep.send(b"installed")
                assert await ep.recv_bytes() == b"installed"
asyncio.run(main())
EOT
check_site() {
	_name=$1
	_site=$2
	shift 2
	[ -f "$_site/rdmamsg/py.typed" ] && ls "$_site"/rdmamsg/_ffi*.so >/dev/null 2>&1
	ok $? "$_name: the package has its extension and py.typed"
	(cd "$tap_tmp" && env PYTHONPATH="$_site" "$@" timeout -k 10 60 "$PYTHON" \
		"$tap_tmp/echo.py" "$_site") >"$tap_tmp/site.out" 2>&1
	ok $? "$_name: the installed package echoes over softrdma"
	show_log "$tap_tmp/site.out"
}

# pip_install TARGET ENV... -- pip install ./bindings/python (offline)
pip_install() {
	_target=$1
	shift
	rm -rf "$tap_tmp/src"
	(cp -r "$top_srcdir/bindings/python" "$tap_tmp/src" &&
		chmod -R u+w "$tap_tmp/src" && cd "$tap_tmp/src" &&
		rm -rf build ./*.egg-info rdmamsg/_ffi.* &&
		env "$@" "$PYTHON" -m pip install --no-build-isolation --no-deps \
			--no-index --disable-pip-version-check -q \
			--target "$_target" .) >"$tap_tmp/pip.out" 2>&1
}

# against the in-tree library
pip_install "$tap_tmp/site1" RDMAMSG_INCLUDE_DIR="$top_srcdir/include" \
	RDMAMSG_LIB_DIR="$top_builddir/lib/.libs" \
	RDMAMSG_RPATH="$top_builddir/lib/.libs"
ok $? "pip install --no-build-isolation ./bindings/python (in-tree library)"
show_log "$tap_tmp/pip.out"
check_site "pip, in-tree" "$tap_tmp/site1"

# make install (DESTDIR): the library and the package, which finds it
root=$tap_tmp/root
${MAKE:-make} -s -C "$top_builddir" install DESTDIR="$root" \
	>"$tap_tmp/install.out" 2>&1
ok $? "make install DESTDIR=..."
prefix=$(sed -n 's/^prefix=//p' "$top_builddir/rdmamsg.pc")
libdir=$(sed -n 's/^libdir=//p' "$top_builddir/rdmamsg.pc" | sed "s|\${exec_prefix}|$prefix|")
site=$(find "$root" -path '*-packages/rdmamsg/py.typed' | head -n 1)
site=${site%/rdmamsg/py.typed}
case $site in
"$root$prefix"/lib/python3*/*-packages) ok 0 "make install put the package in $site" ;;
*) ok 1 "make install put the package under the prefix (got '$site')" ;;
esac
check_site "make install" "$site" LD_LIBRARY_PATH="$root$libdir" \
	RDMAMSG_SOFTRDMA_PATH="$root$libdir/rdmamsg/libsoftrdma.so"

# against the installed library, found with pkg-config
pip_install "$tap_tmp/site2" PKG_CONFIG_PATH="$root$libdir/pkgconfig" \
	PKG_CONFIG_SYSROOT_DIR="$root"
ok $? "pip install --no-build-isolation ./bindings/python (pkg-config)"
show_log "$tap_tmp/pip.out"
check_site "pip, pkg-config" "$tap_tmp/site2" LD_LIBRARY_PATH="$root$libdir" \
	RDMAMSG_SOFTRDMA_PATH="$root$libdir/rdmamsg/libsoftrdma.so"
${MAKE:-make} -s -C "$top_builddir" uninstall DESTDIR="$root" \
	>"$tap_tmp/uninstall.out" 2>&1
[ -z "$(find "$root" -path '*-packages/*' -name '*.py')" ]
ok $? "make uninstall removes the package"

# configure --enable-python names the Debian packages a python lacks
mkdir -p "$tap_tmp/cfg"
(cd "$tap_tmp/cfg" && "$top_srcdir/configure" -q --enable-python \
	PYTHON=/bin/false >out 2>&1)
ok $((! $?)) "configure --enable-python fails for a python without cffi"
grep -q "install the Debian packages python3-cffi" "$tap_tmp/cfg/out"
ok $? "the error names python3-cffi"
done_testing
