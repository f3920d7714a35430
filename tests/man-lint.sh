#!/bin/sh
# man-lint.sh -- every man page passes mandoc -T lint without warnings
. "$top_srcdir/tests/lib.sh"
[ -n "$MANDOC" ] || skip_all "mandoc not found (apt-get install mandoc)"
found=0
for page in "$top_srcdir"/man/*.[0-9]; do
	[ -f "$page" ] || continue
	found=1
	# A link page (".so man3/rdmamsg_connect.3", resolved from the
	# manual's root by man-db and mandoc) only names its target; mandoc
	# calls .so fragile, so check that the target exists instead.
	so=$(sed -n '1s/^\.so //p' "$page")
	if [ -n "$so" ]; then
		[ "$(wc -l <"$page")" -eq 1 ] &&
			[ -f "$top_srcdir/man/$(basename "$so")" ]
		ok $? "link page $(basename "$page") -> $so"
		continue
	fi
	# STYLE-level messages (e.g. "referenced manual not found" for pages
	# of other packages) are advice, not defects; warnings and errors fail.
	"$MANDOC" -T lint -W warning "$page" >"$tap_tmp/lint" 2>&1
	ok $? "mandoc lint $(basename "$page")"
	show_log "$tap_tmp/lint"
done
[ $found = 1 ]
ok $? "man pages exist"
done_testing
