/* SPDX-License-Identifier: MIT */
/*
 * cm_handshake.c -- fuzz target: cm/handshake.c's decoder of the private
 * data a peer sends with its connect request, accept or reject.
 *
 * Beyond not crashing or reading past the input: the decoder answers 0 or
 * one of the two reject reasons it may give, an accepted handshake's
 * application bytes lie inside the input, and encoding it again gives the
 * input's own bytes (but the version, which the encoder writes as ours:
 * it may differ only in a reject), and an accepted request or accept
 * holds only values the library then uses without further checks.
 * Sessions (an id, a count), an APM offer and DC (blocks) lengthen the
 * fixed part.
 *
 * link with: cm/handshake.c
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "handshake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t out[RDMAMSG_HS_MAX];
	struct rdmamsg__hs hs;
	size_t len, extra;
	int ret;

	ret = rdmamsg__hs_decode(data, size, &hs);
	if (ret == RDMAMSG_REJECT_HANDSHAKE || ret == RDMAMSG_REJECT_VERSION)
		return 0;
	if (ret)
		abort(); /* a reason the caller does not expect */
	/* sessions: an id (SREQ, RREQ) and a count (RREQ, RACC) of 8 bytes
	 * each before the application bytes, at most 24 with an id's
	 * request, none with a count */
	extra = (hs.kind == HS_SREQ || hs.kind == HS_RREQ ? 8 : 0) +
		(hs.kind == HS_RREQ || hs.kind == HS_RACC ? 8 : 0) +
		(hs.alt_lid ? RDMAMSG_HS_ALT_LEN : 0) +
		(hs.dc ? RDMAMSG_HS_DC_LEN : 0);
	/* an APM offer: a unicast LID, in anything but a reject, never with
	 * DC, and 4 application bytes fewer */
	if (hs.alt_lid &&
	    (hs.alt_lid >= 0xc000 || hs.kind == HS_REJ || hs.dc ||
	     hs.user_len > (hs.kind == HS_SREQ ? RDMAMSG_HS_SESSION_USER : 32) -
				   RDMAMSG_HS_ALT_LEN))
		abort();
	/* DC: a block of its own, in any kind but a reject, and at most
	 * RDMAMSG_HS_DC_USER application bytes (a session's request
	 * RDMAMSG_DC_SESSION_USER; a reconnect and its accept none, below) */
	if (hs.dc &&
	    (hs.kind == HS_REJ || hs.user_len > RDMAMSG_HS_DC_USER ||
	     (hs.kind == HS_SREQ && hs.user_len > RDMAMSG_DC_SESSION_USER)))
		abort();
	if (hs.kind < HS_REQ || hs.kind > HS_RACC || hs.user_len > 32 ||
	    (hs.user_len == 0) != (hs.user == NULL))
		abort();
	if ((hs.kind == HS_SREQ || hs.kind == HS_RREQ) && !hs.sid)
		abort();
	if ((hs.kind == HS_SREQ && hs.user_len > RDMAMSG_HS_SESSION_USER) ||
	    ((hs.kind == HS_RREQ || hs.kind == HS_RACC) && hs.user_len))
		abort();
	if (hs.user_len && (hs.user < data + RDMAMSG_HS_LEN + extra ||
			    hs.user + hs.user_len > data + size))
		abort();
	/* the DC sender block: only in a DC accept offering it, after the
	 * application bytes, 1 to 16 DCIs, none 0 */
	if (hs.dc_ndci &&
	    (!hs.dc || (hs.kind != HS_ACC && hs.kind != HS_RACC) ||
	     !(hs.caps & RDMAMSG_HS_CAP_DCSRC) ||
	     hs.dc_ndci > RDMAMSG_HS_DCSRC_DCIS))
		abort();
	for (size_t i = 0; i < hs.dc_ndci; i++)
		if (!hs.dc_dci[i] || hs.dc_dci[i] > 0xffffff)
			abort();
	len = rdmamsg__hs_encode(&hs, out);
	if (len != (size_t)RDMAMSG_HS_LEN + extra + hs.user_len +
			    (hs.dc_ndci ? 9 + 3 * (size_t)hs.dc_ndci : 0) ||
	    len > size || len > RDMAMSG_HS_MAX)
		abort();
	if (memcmp(out, data, 2) || memcmp(out + 3, data + 3, len - 3))
		abort();
	if (hs.kind != HS_REJ && out[2] != data[2])
		abort();
	/* what the library then uses without further checks */
	if (hs.kind != HS_REJ &&
	    (hs.version != RDMAMSG_HS_VERSION || hs.depth < 2 ||
	     hs.depth > RDMAMSG_HS_MAX_DEPTH ||
	     hs.ctl < RDMAMSG_CTL_CREDITS_SRQ || hs.ctl > RDMAMSG_CTL_CREDITS ||
	     hs.eager < 64 || hs.max_msg < hs.eager))
		abort();
	return 0;
}
