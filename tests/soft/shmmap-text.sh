#!/bin/sh
# shmmap-text.sh -- tests/soft/shmmap with the registrations' files found
# in the text of /proc/self/maps, as on kernels before 6.11 (no
# PROCMAP_QUERY): SOFTRDMA_TEST_MAPS_TEXT=1; every assertion must hold
. "$top_srcdir/tests/lib.sh"
[ -x "$top_builddir/tests/soft/shmmap" ] || skip_all "tests/soft/shmmap not built"
SOFTRDMA_TEST_MAPS_TEXT=1
export SOFTRDMA_TEST_MAPS_TEXT
run_tap soft/shmmap "shmmap with /proc/self/maps read as text"
maps=$(grep -c '^ok .* - by mapping the target' "$tap_tmp/shmmap.log")
test "$maps" -eq 1
ok $? "and the target's memfd was mapped"
done_testing
