/* SPDX-License-Identifier: MIT */
/* device.c -- softrdma device list and context (placeholder) */
#include "softrdma.h"

SOFT_EXPORT int softrdma_version(void);

/* softrdma_version -- ABI level of this softrdma build */
int softrdma_version(void)
{
	return 1;
}
