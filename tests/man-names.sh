#!/bin/sh
# man-names.sh -- every public function of rdmamsg.h has a man page (its
# family's page or a .so link to it) that names it, and every page is
# installed
. "$top_srcdir/tests/lib.sh"
cd "$top_srcdir" || exit 1
funcs=$(sed -n 's/^\(const char \*\|int \)\(rdmamsg_[a-z0-9_]*\)(.*/\2/p' include/rdmamsg.h)
[ -n "$funcs" ]
ok $? "public functions found in rdmamsg.h"
for f in $funcs; do
	page=man/$f.3
	target=$page
	so=$(sed -n '1s/^\.so man3\///p' "$page" 2>/dev/null)
	[ -n "$so" ] && target=man/$so
	# the NAME section of the page that describes it lists it
	[ -f "$target" ] &&
		sed -n '/^\.SH NAME/,/^\.SH/p' "$target" | grep -qw "$f"
	ok $? "man page for $f ($target)"
done
for page in man/*.[0-9]; do
	grep -q "$page" man/Makefile.inc
	ok $? "$page is in man/Makefile.inc"
done
done_testing
