/* SPDX-License-Identifier: MIT */
/*
 * pattern.h -- what the transfer tests of two contexts share: a message's
 * bytes made from its sequence number and checked, and driving both
 * contexts until a count is reached.  Include after ../core/util.h.
 */
#ifndef RDMAMSG_TEST_XFER_PATTERN_H
#define RDMAMSG_TEST_XFER_PATTERN_H

#include <stddef.h>
#include <stdint.h>

/* fill -- message seq's bytes */
static inline void fill(unsigned char *p, size_t len, uint32_t seq)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(seq * 131 + i * 7 + (i >> 9));
}

/* same -- p holds message seq's bytes */
static inline int same(const unsigned char *p, size_t len, uint32_t seq)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != (unsigned char)(seq * 131 + i * 7 + (i >> 9)))
			return 0;
	return 1;
}

/* run_for -- drive both until *n reaches want or 60 s pass */
static inline void run_for(struct test_side *a, struct test_side *b,
			   volatile unsigned int *n, unsigned int want)
{
	volatile int never = 0;
	long long end = test_now_ms() + 60000;

	while (*n < want && test_now_ms() < end)
		test_run2(a, b, &never, 5);
}

#endif /* RDMAMSG_TEST_XFER_PATTERN_H */
