/* SPDX-License-Identifier: MIT */
/*
 * fastpath.h -- the data path: wire header and static-inline post/poll.
 * Internal.  No allocation, lock, log call or syscall per message: a
 * send goes down through the lane's ops table (lane.h), which posts it
 * with the provider's inline ibv_post_send.
 */
#ifndef RDMAMSG_FASTPATH_H
#define RDMAMSG_FASTPATH_H

#include <endian.h>
#include <string.h>

#include "internal.h"
#include "proto.h"

/* the message header (struct rdmamsg__wire, W_*, F_*) is in proto.h */

/* sq_free -- send work requests the endpoint may still post */
static inline uint32_t fp_sq_free(const struct rdmamsg_ep *ep)
{
	return ep->p.send_depth - (uint32_t)(ep->sq_head - ep->sq_tail);
}

/* fp_fill_hdr -- header fields plus the credits we owe the peer */
static inline void fp_fill_hdr(struct rdmamsg_ep *ep, struct rdmamsg__wire *h,
			       uint8_t type, uint8_t flags, uint32_t imm,
			       uint32_t total)
{
	uint32_t c = ep->to_return > 0xffff ? 0xffff : ep->to_return;
	uint32_t k = ep->ctl_to_return > 0xff ? 0xff : ep->ctl_to_return;

	h->type = type;
	h->flags = flags;
	h->credits = htole16((uint16_t)c);
	h->imm = htole32(imm);
	h->total = htole32(total);
	h->ctl = (uint8_t)k;
	h->pad[0] = h->pad[1] = h->pad[2] = 0;
}

/* fp_commit_hdr -- the header went out: the credits in it are returned */
static inline void fp_commit_hdr(struct rdmamsg_ep *ep,
				 const struct rdmamsg__wire *h)
{
	uint32_t c = le16toh(h->credits);

	ep->to_return -= c;
	ep->returned_total += c;
	ep->ctl_to_return -= h->ctl;
}

/* fp_tx_flags -- the lane's flags for the send at sq_head: signalled
 * when asked or every sig_every */
static inline unsigned int fp_tx_flags(struct rdmamsg_ep *ep, int inl,
				       int signal)
{
	if (++ep->unsignaled >= ep->sig_every)
		signal = 1;
	if (signal) {
		ep->unsignaled = 0;
		ep->sig_next = ep->sq_head + 1;
	}
	return (inl ? RDMAMSG__TX_INLINE : 0) |
	       (signal ? RDMAMSG__TX_SIGNAL : 0);
}

/* fp_post_send -- one send through the lane (fp_tx_flags) */
static inline int fp_post_send(struct rdmamsg_ep *ep, struct ibv_sge *sge,
			       int nsge, int inl, int signal)
{
	return rdmamsg__lane_send(ep->ln, sge, nsge, ep->sq_head,
				  fp_tx_flags(ep, inl, signal));
}

#endif /* RDMAMSG_FASTPATH_H */
