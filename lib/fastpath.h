/* SPDX-License-Identifier: MIT */
/*
 * fastpath.h -- the data path: wire header and static-inline post/poll.
 * Internal.  No allocation, lock, log call or syscall per message: the
 * ibv_* calls below are inlines through the provider's context->ops.
 */
#ifndef RDMAMSG_FASTPATH_H
#define RDMAMSG_FASTPATH_H

#include <endian.h>
#include <string.h>

#include "internal.h"
#include "proto.h"

/* the message header (struct rdmamsg__wire, W_*, F_*) is in proto.h */

/* wr_ids (lane.h): this bit for sends, the endpoint's tag (ep->wrid_tag),
 * and the low 32 bits of the send sequence or the receive buffer index.
 * Error CQEs carry no reliable opcode. */
#define RDMAMSG_SEND_WRID (1ull << 63)

/* fp_send_wrid -- the wr_id of send sequence seq */
static inline uint64_t fp_send_wrid(const struct rdmamsg_ep *ep, uint64_t seq)
{
	return RDMAMSG_SEND_WRID | ep->wrid_tag | (uint32_t)seq;
}

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

/* fp_post_send -- one send WR; signalled when asked or every sig_every */
static inline int fp_post_send(struct rdmamsg_ep *ep, struct ibv_sge *sge,
			       int nsge, int inl, int signal)
{
	struct ibv_send_wr wr, *bad;

	if (++ep->unsignaled >= ep->sig_every)
		signal = 1;
	if (signal) {
		ep->unsignaled = 0;
		ep->sig_next = ep->sq_head + 1;
	}
	wr.wr_id = fp_send_wrid(ep, ep->sq_head);
	wr.next = NULL;
	wr.sg_list = sge;
	wr.num_sge = nsge;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags =
		(inl ? IBV_SEND_INLINE : 0) | (signal ? IBV_SEND_SIGNALED : 0);
	wr.imm_data = 0;
	return ibv_post_send(ep->qp, &wr, &bad);
}

/* fp_post_recvs -- post a batch of receive buffers (indices into rxb) */
static inline __attribute__((always_inline)) int fp_post_recvs(
	struct rdmamsg_ep *ep, const uint32_t *idx, uint32_t n)
{
	struct ibv_recv_wr wr[32], *bad;
	struct ibv_sge sge[32];
	uint32_t i;
	int ret;

	while (n) {
		uint32_t k = n > 32 ? 32 : n;

		for (i = 0; i < k; i++) {
			struct rdmamsg_buf *b = ep->rxb[idx[i]];

			sge[i].addr = (uintptr_t)(b->data - RDMAMSG_HDR);
			sge[i].length = RDMAMSG_HDR + ep->p.eager;
			sge[i].lkey = b->lkey;
			wr[i].wr_id = ep->wrid_tag | idx[i];
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
			wr[i].next = i + 1 < k ? &wr[i + 1] : NULL;
		}
		ret = ibv_post_recv(ep->qp, wr, &bad);
		if (ret)
			return -ret;
		ep->rx_posted += k;
		idx += k;
		n -= k;
	}
	return 0;
}

#endif /* RDMAMSG_FASTPATH_H */
