/* SPDX-License-Identifier: MIT */
/*
 * soft_slot.c -- fuzz target: softrdma's ring-slot decoder, fed what a
 * hostile peer can write into its slot (the first SOFT_SLOT_SIZE bytes of
 * the input are the slot image).  Link with soft/slot.c (-I soft).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct soft_msg m;
	uint64_t total = 0;
	uint8_t *copy;
	uint32_t i;
	size_t n = size < SOFT_SLOT_SIZE ? size : SOFT_SLOT_SIZE;

	/* an exact-size heap copy: the sanitizer sees any read past it */
	copy = malloc(n ? n : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, n);
	if (soft_slot_decode(copy, n, &m) == 0) {
		/* what the responder relies on once a slot is accepted */
		if (m.len > SOFT_SLOT_MAX_MSG)
			abort();
		if ((m.flags & SOFT_SF_COPIED) && m.len > n - SOFT_SLOT_HDR)
			abort();
		if (m.nsge > SOFT_SLOT_MAX_SGE)
			abort();
		for (i = 0; i < m.nsge; i++)
			total += m.sge[i].len;
		if (m.opcode == SOFT_OP_SEND &&
		    !(m.flags &
		      (SOFT_SF_COPIED | SOFT_SF_CHUNKED | SOFT_SF_RING)) &&
		    total != m.len)
			abort();
	}
	free(copy);
	return 0;
}
