#!/bin/sh
# style.sh -- the C sources are what clang-format makes of them
. "$top_srcdir/tests/lib.sh"
command -v clang-format >/dev/null || skip_all "clang-format not found (apt-get install clang-format)"
cd "$top_srcdir" || exit 1
git rev-parse --git-dir >/dev/null 2>&1 || skip_all "not a git checkout (release tarball)"
for f in $(git ls-files '*.c' '*.h'); do
	clang-format --style=file "$f" | cmp -s - "$f"
	ok $? "clang-format $f"
done
done_testing
