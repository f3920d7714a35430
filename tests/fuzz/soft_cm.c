/* SPDX-License-Identifier: MIT */
/*
 * soft_cm.c -- fuzz target: softrdma's CM wire messages (soft/cm_wire.c).
 * Every message a peer sends on the CM's TCP connection goes through
 * scm__wire_check before any field is used; this feeds it arbitrary bytes
 * and checks that what it accepts is safe to use: a known type, private
 * data within its IB CM field, QPN/PSN within 24 bits.
 * Link with: soft/cm_wire.c (include path: soft/, and the rdma-core
 * headers for infiniband/verbs.h and rdma/rdma_cma.h).
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cm_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* check_accepted -- what the CM relies on once a message is accepted */
static void check_accepted(const struct scm_wire *w)
{
	size_t max = scm__wire_pdata_max(w);

	if (w->magic != SCM_WIRE_MAGIC || w->type < SCM_MSG_REQ ||
	    w->type > SCM_MSG_DREP)
		abort();
	if (w->pdata_len > max || max > sizeof(w->pdata))
		abort();
	if (w->type == SCM_MSG_REQ || w->type == SCM_MSG_REP) {
		if (ntohl(w->qpn) >= 0xffffff || ntohl(w->psn) > 0xffffff)
			abort();
		if (w->mtu > IBV_MTU_4096 || w->retry_count > 7 ||
		    w->rnr_retry_count > 7)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct scm_wire w;
	size_t off;

	/* the stream is cut into fixed-size messages, as the CM reads it */
	for (off = 0; off + sizeof(w) <= size; off += sizeof(w)) {
		memcpy(&w, data + off, sizeof(w));
		if (!scm__wire_check(&w))
			check_accepted(&w);
	}
	/* a short tail is never a message: also check one padded copy */
	if (size % sizeof(w)) {
		memset(&w, 0, sizeof(w));
		memcpy(&w, data + size - size % sizeof(w), size % sizeof(w));
		if (!scm__wire_check(&w))
			check_accepted(&w);
	}
	return 0;
}
