/* SPDX-License-Identifier: MIT */
/*
 * canary.c -- the harness's own target, which tests/fuzz.sh runs to show
 * that a bug found fails the test: it aborts on any input that starts
 * with "FUZZ" (found by libFuzzer within seconds, byte by byte) and takes
 * every other input.  Not in FUZZ_TARGETS; tests/fuzz/build.sh builds it.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size >= 4 && data[0] == 'F' && data[1] == 'U' && data[2] == 'Z' &&
	    data[3] == 'Z')
		abort();
	return 0;
}
