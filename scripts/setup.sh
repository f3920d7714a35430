#!/bin/sh
# setup.sh -- install what is missing, bootstrap, configure and build
#
# usage: scripts/setup.sh BUILD_DIR [configure options...]
#
# Idempotent and non-interactive: Debian packages are installed with apt-get
# only when missing (as root, or through sudo -n), autotools run only when
# configure is missing or older than its inputs, and configure is re-run
# only when its options change.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: setup.sh BUILD_DIR [configure options...]}
shift

# Build tools and libraries, then what the tests and benchmarks run (the
# python3-* packages build and test bindings/python: --enable-python).
packages="build-essential autoconf automake libtool pkgconf
	libibverbs-dev librdmacm-dev libev-dev
	rdmacm-utils ibverbs-utils perftest valgrind mandoc clang-format
	clang libclang-rt-dev
	iproute2 python3 procps psmisc qperf ucx-utils libfabric-bin
	python3-dev python3-cffi python3-setuptools python3-pip python3-wheel
	python3-pytest python3-pytest-asyncio python3-pyverbs"

missing=
for p in $packages; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		missing="$missing $p"
	fi
done
if [ -n "$missing" ]; then
	echo "setup: installing Debian packages:$missing"
	if [ "$(id -u)" = 0 ]; then
		sudo=
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo="sudo -n"
	else
		echo "setup: run as root, or install them first: apt-get install$missing" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq </dev/null
	# shellcheck disable=SC2086
	$sudo apt-get install -y -qq --no-install-recommends $missing </dev/null
fi

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ ! -f build-aux/tap-driver.sh ]; then
	echo "setup: autoreconf"
	autoreconf -fi
fi

mkdir -p "$build"
cd "$build"
want="$*"
if [ ! -f Makefile ] || [ "$(cat .configure-args 2>/dev/null)" != "$want" ]; then
	echo "setup: configure $want"
	"$top/configure" "$@"
	printf '%s' "$want" >.configure-args
fi
make -j"$(nproc)"
