/* SPDX-License-Identifier: MIT */
/*
 * soft_roce.c -- fuzz target: the RoCE v2 decoder and ICRC check, fed
 * what the wire can carry.  The first input byte picks the entry point:
 * even, the UDP payload decoder (roce_decode); odd, the ICRC over an
 * IP/UDP packet (roce_icrc_check, and roce_icrc_check_seg as a GSO
 * segment: the second byte its index).  Link with soft/roce.c (-I soft).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "roce.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct roce_pkt p, q;
	uint8_t *copy, re[ROCE_MAX_HDR_LEN + 64 + ROCE_MAX_PMTU];
	ssize_t n;

	if (!size)
		return 0;
	/* an exact-size heap copy: the sanitizer sees any read past it */
	copy = malloc(size - 1 ? size - 1 : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, size - 1);
	if (data[0] & 1) {
		(void)roce_icrc_check(copy, size - 1);
		(void)roce_icrc_check_seg(copy, size - 1,
					  size > 1 ? data[1] : 0);
	} else if (roce_decode(copy, size - 1, &p) == 0) {
		/* what a receiver relies on once a packet is accepted */
		if (p.payload_len > ROCE_MAX_PMTU || p.bth.pad > 3)
			abort();
		if (p.payload_len &&
		    (p.payload < copy ||
		     p.payload + p.payload_len + p.bth.pad + ROCE_ICRC_LEN !=
			     copy + size - 1))
			abort();
		/* an accepted packet encodes to the same length and
		 * decodes back to the same fields (reserved bits aside) */
		n = roce_encode(&p, re, sizeof(re));
		if (n != (ssize_t)(size - 1))
			abort();
		if (roce_decode(re, (size_t)n, &q) != 0)
			abort();
		if (q.payload_len != p.payload_len ||
		    memcmp(q.payload, p.payload, p.payload_len))
			abort();
		q.payload = p.payload;
		if (memcmp(&q, &p, sizeof(p)))
			abort();
	}
	free(copy);
	return 0;
}
