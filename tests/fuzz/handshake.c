/* SPDX-License-Identifier: MIT */
/*
 * handshake.c -- fuzz target: the private data of a connect request,
 * accept or reject (cm/handshake.c's rdmamsg__hs_decode).  Whatever the
 * bytes, decoding never reads past them, and an accepted handshake holds
 * what the library then uses without further checks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "handshake.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* must -- an invariant the library relies on after decoding */
static void must(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdmamsg__hs hs, again;
	uint8_t out[RDMAMSG_HS_MAX];
	size_t n;

	if (rdmamsg__hs_decode(data, size, &hs))
		return 0;
	must(hs.kind >= HS_REQ && hs.kind <= HS_REJ);
	must(hs.user_len <= 32);
	must(RDMAMSG_HS_LEN + (size_t)hs.user_len <= size);
	must(!hs.user_len ||
	     (hs.user >= data && hs.user + hs.user_len <= data + size));
	if (hs.kind != HS_REJ) {
		must(hs.version == RDMAMSG_HS_VERSION);
		must(hs.depth >= 2 && hs.depth <= RDMAMSG_HS_MAX_DEPTH);
		must(hs.ctl == RDMAMSG_CTL_CREDITS);
		must(hs.eager >= 64 && hs.max_msg >= hs.eager);
		/* it round-trips */
		n = rdmamsg__hs_encode(&hs, out);
		must(n <= sizeof(out));
		must(rdmamsg__hs_decode(out, n, &again) == 0);
		must(again.depth == hs.depth && again.eager == hs.eager &&
		     again.max_msg == hs.max_msg);
	}
	return 0;
}
