/* SPDX-License-Identifier: MIT */
/*
 * rmr_import.c -- fuzz target: lib/mr.c's import of the 32 bytes a peer
 * exports for its memory region (rdmamsg_rmr_import), which needs no
 * context.
 *
 * Beyond not crashing or reading past the input: bytes that are not an
 * export give -EINVAL and leave the output alone; an accepted import holds
 * exactly the input's address, length, key and access, with a length
 * that is not 0 and does not wrap the address space.
 *
 * link with: lib/mr.c lib/log.c
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "xfer.h"

/*
 * rdmamsg__errno -- a stand-in for lib/ctx.c's, which only registration
 * reaches: weak, so that lib/mr.c links without the rest of the library
 * and the real one wins where it is linked too
 */
__attribute__((weak)) int rdmamsg__errno(int fallback)
{
	return -fallback;
}

/* mr.c's calls into mr_iov.c (regions over non-contiguous memory, never
 * made here) */
__attribute__((weak)) int rdmamsg__mr_iov_exportable(
	const struct rdmamsg_mr *mr)
{
	(void)mr;
	return 0;
}

__attribute__((weak)) void rdmamsg__mr_iov_dereg(struct rdmamsg_mr *mr)
{
	(void)mr;
}

/* rdmamsg_mr_alloc's memory (lib/pool.c): never asked for here */
__attribute__((weak)) void *rdmamsg__shared_mem(const char *name, size_t len,
						unsigned int flags, int *fd)
{
	(void)name;
	(void)len;
	(void)flags;
	*fd = -1;
	return NULL;
}

/* le -- the little-endian unsigned integer of n bytes at p */
static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdmamsg_rmr *rmr = (struct rdmamsg_rmr *)&rmr;
	struct rdmamsg_rmr *untouched = rmr;
	unsigned int all = RDMAMSG_ACCESS_REMOTE_READ |
			   RDMAMSG_ACCESS_REMOTE_WRITE |
			   RDMAMSG_ACCESS_REMOTE_ATOMIC;
	size_t len;
	int ret;

	ret = rdmamsg_rmr_import(data, size, &rmr);
	if (ret) {
		if (ret != -EINVAL || rmr != untouched)
			abort();
		return 0;
	}
	if (size < RDMAMSG_MR_EXPORT_SIZE || !rmr || rmr == untouched)
		abort();
	if (le(data, 4) != 0x31584d52u /* "RMX1" */ ||
	    rmr->access != le(data + 4, 4) || (rmr->access & ~all) ||
	    rmr->rkey != le(data + 8, 4) || rmr->addr != le(data + 16, 8) ||
	    rmr->len != le(data + 24, 8) || !rmr->len ||
	    rmr->addr + rmr->len < rmr->addr)
		abort();
	if (rdmamsg_rmr_get_size(rmr, &len) || len != rmr->len)
		abort();
	if (rdmamsg_rmr_free(&rmr) || rmr)
		abort();
	return 0;
}
