/* SPDX-License-Identifier: MIT */
/*
 * mc_wire.c -- fuzz target: lib/proto.h's check of a multicast group's
 * datagram (rdmamsg__mc_decode), what lib/group.c runs on every datagram
 * before it uses any value in it.
 *
 * Beyond not crashing or reading past the input: an accepted DATA
 * fragment lies inside its message (off + payload <= total <= the
 * maximum), a heartbeat carries no payload (or exactly its address),
 * NAKs, status messages and LEAVEs exactly an 8-byte id (a LEAVE with
 * no flag and no count; a NAK with MCF_ADDR:
 * and an address after it; with MCF_SEL: and a bitmap of total bits,
 * 1 .. RDMAMSG_MC_NAK_BITS, its first bit set, its spare bits clear, seq
 * + total not wrapping); a BATCH carries 1 .. RDMAMSG_MC_BATCH_MAX
 * whole messages whose length fields (each at most the maximum) and
 * bytes fill the payload exactly, its last sequence number below
 * UINT64_MAX; and encoding the decoded header gives back the input's
 * first 32 bytes.
 * The first input byte picks the maximum message size.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t maxes[] = {0, 1, 4064, 65536, RDMAMSG_MC_MAX_MSG};
	struct rdmamsg__mc_wire h;
	uint8_t back[RDMAMSG_MC_HDR];
	const uint8_t *bm;
	uint32_t max, i;
	size_t pay, a;

	if (!size)
		return 0;
	max = maxes[data[0] % (sizeof(maxes) / sizeof(maxes[0]))];
	data++;
	size--;
	if (rdmamsg__mc_decode(data, size, max, &h))
		return 0;
	if (size < RDMAMSG_MC_HDR || !h.pub)
		abort();
	pay = size - RDMAMSG_MC_HDR;
	switch (h.type) {
	case MC_DATA:
		if (h.total > max || h.flags || h.seq == UINT64_MAX)
			abort();
		if (h.total ? (!pay || h.off >= h.total ||
			       (uint64_t)h.off + pay > h.total)
			    : (pay || h.off))
			abort();
		break;
	case MC_HEARTBEAT:
		if (pay != ((h.flags & MCF_ADDR) ? RDMAMSG_MC_ADDR : 0) ||
		    h.total || h.off)
			abort();
		break;
	case MC_NAK:
		a = (h.flags & MCF_ADDR) ? RDMAMSG_MC_ADDR : 0;
		if (h.off || (h.flags & ~(MCF_ADDR | MCF_SEL)))
			abort();
		if (!(h.flags & MCF_SEL)) {
			if (pay != 8 + a || h.total)
				abort();
			break;
		}
		if (!h.total || h.total > RDMAMSG_MC_NAK_BITS ||
		    h.seq + h.total < h.seq || pay != 8 + a + (h.total + 7) / 8)
			abort();
		bm = data + RDMAMSG_MC_HDR + 8 + a;
		if (!rdmamsg__mc_nak_bit(bm, 0))
			abort();
		for (i = h.total; i < (h.total + 7) / 8 * 8; i++)
			if (rdmamsg__mc_nak_bit(bm, i))
				abort();
		break;
	case MC_STATUS: /* a status message's total is its sender's tag */
		if (pay != 8 || h.off || h.flags)
			abort();
		break;
	case MC_LEAVE:
		if (pay != 8 || h.off || h.flags || h.total)
			abort();
		break;
	case MC_BATCH:
		if (h.off || h.flags || !h.total ||
		    h.total > RDMAMSG_MC_BATCH_MAX || h.seq + h.total < h.seq ||
		    h.seq + (h.total - 1) == UINT64_MAX)
			abort();
		bm = data + RDMAMSG_MC_HDR;
		for (i = 0; i < h.total; i++) {
			uint32_t n;

			if (pay < 4)
				abort();
			memcpy(&n, bm, 4);
			n = le32toh(n);
			if (n > max || n > pay - 4)
				abort();
			pay -= 4 + (size_t)n;
			bm += 4 + (size_t)n;
		}
		if (pay)
			abort();
		break;
	default:
		abort();
	}
	rdmamsg__mc_encode(&h, back);
	if (memcmp(back, data, RDMAMSG_MC_HDR))
		abort();
	return 0;
}
