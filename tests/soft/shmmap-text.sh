#!/bin/sh
# shmmap-text.sh -- tests/soft/shmmap with the registrations' files found
# in the text of /proc/self/maps, as on kernels before 6.11 (no
# PROCMAP_QUERY): SOFTRDMA_TEST_MAPS_TEXT=1; every assertion must hold
. "$top_srcdir/tests/lib.sh"
[ -x "$top_builddir/tests/soft/shmmap" ] || skip_all "tests/soft/shmmap not built"
SOFTRDMA_TEST_MAPS_TEXT=1
export SOFTRDMA_TEST_MAPS_TEXT
"$top_builddir/tests/soft/shmmap" >"$tap_tmp/shmmap.log" 2>&1
rc=$?
fails=$(grep -c '^not ok' "$tap_tmp/shmmap.log")
maps=$(grep -c '^ok .* - by mapping the target' "$tap_tmp/shmmap.log")
test "$rc" -eq 0 && test "$fails" -eq 0
ok $? "shmmap with /proc/self/maps read as text: exit $rc, $fails failed"
[ "$rc" -eq 0 ] && [ "$fails" -eq 0 ] || show_log "$tap_tmp/shmmap.log"
test "$maps" -eq 1
ok $? "and the target's memfd was mapped"
done_testing
