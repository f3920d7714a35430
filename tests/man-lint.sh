#!/bin/sh
# man-lint.sh -- every man page passes mandoc -T lint without warnings
. "$top_srcdir/tests/lib.sh"
[ -n "$MANDOC" ] || skip_all "mandoc not found (apt-get install mandoc)"
found=0
for page in "$top_srcdir"/man/*.[0-9]; do
	[ -f "$page" ] || continue
	found=1
	# STYLE-level messages (e.g. "referenced manual not found" for pages
	# of other packages) are advice, not defects; warnings and errors fail.
	"$MANDOC" -T lint -W warning "$page" >"$tap_tmp/lint" 2>&1
	ok $? "mandoc lint $(basename "$page")"
	show_log "$tap_tmp/lint"
done
[ $found = 1 ]
ok $? "man pages exist"
done_testing
