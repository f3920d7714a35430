/* SPDX-License-Identifier: MIT */
/*
 * mc_wire.c -- fuzz target: lib/proto.h's check of a multicast group's
 * datagram (rdmamsg__mc_decode), what lib/group.c runs on every datagram
 * before it uses any value in it.
 *
 * Beyond not crashing or reading past the input: an accepted DATA
 * fragment lies inside its message (off + payload <= total <= the
 * maximum), a heartbeat carries no payload (or exactly its address),
 * NAKs and status messages exactly an 8-byte id (a NAK with MCF_ADDR:
 * and an address after it); and encoding the
 * decoded header gives back the input's first 32 bytes.
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
	uint32_t max;
	size_t pay;

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
	case MC_STATUS: /* a status message's total is its sender's tag */
		if (pay != 8 + ((h.flags & MCF_ADDR) ? RDMAMSG_MC_ADDR : 0) ||
		    (h.type == MC_NAK && h.total) || h.off ||
		    (h.flags & ~(h.type == MC_NAK ? MCF_ADDR : 0)))
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
