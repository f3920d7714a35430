/* SPDX-License-Identifier: MIT */
/*
 * lane_rc.c -- the RC lane (lane.h): one reliable-connected QP made on the
 * session's rdma_cm id, on a CQ of the context's interface, with its own
 * receive ring or, as a variant, its receives from a shared SRQ.  It posts
 * what the session hands down and reports its completions up through the
 * callbacks the session registered; it never calls the session by name.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "internal.h"

struct lane_rc {
	struct rdmamsg__lane l;
	struct rdmamsg_buf **rxb; /* the session's ring, or the SRQ's bufs */
	uint32_t nrx, rx_len, rx_off;
	struct rdmamsg_srq *srq;
	uint32_t srq_win; /* buffers reserved on srq (0: none) */
	int srq_mapped;
	int drain_posted;
	/* receive buffers to repost: rc_wcs's, after the data ones kept
	 * for the next batch (lane.h rx_batch, fewer than it): one
	 * ibv_post_recv per batch, not per message */
	uint32_t rx_batch, nkept;
	uint32_t rep[RDMAMSG_RX_BATCH_MAX + RDMAMSG_POLL_BATCH];
};

#define RC(lane) ((struct lane_rc *)(void *)(lane))

/* the inline size a QP that fails with the context's is retried down to:
 * the most the probe asked for before its ladder went past 256, so that
 * a device that made these QPs then still makes them */
#define RC_INLINE_FLOOR 256u

/* rc_send -- one message, one send WR (lane.h) */
static int rc_send(struct rdmamsg__lane *lane, struct ibv_sge *sge, int nsge,
		   uint64_t seq, unsigned int flags)
{
	return rdmamsg__lane_plain_send(lane, sge, nsge, seq, flags);
}

/* rc_post -- a one-sided work request (signalled) */
static int rc_post(struct rdmamsg__lane *lane, struct ibv_send_wr *wr,
		   uint64_t seq)
{
	struct ibv_send_wr *bad;

	wr->wr_id = RDMAMSG__WRID_SEND | lane->wrid_tag | (uint32_t)seq;
	wr->next = NULL;
	wr->send_flags |= IBV_SEND_SIGNALED;
	return ibv_post_send(lane->qp, wr, &bad);
}

/* post_recvs -- post ring buffers idx[0..n), in batches of
 * RDMAMSG_POLL_BATCH through the interface's prebuilt chain (not on an
 * SRQ: rc_wcs sees no SRQ receive, the interface hands those over) */
static inline __attribute__((always_inline)) int post_recvs(
	struct rdmamsg__lane *lane, const uint32_t *idx, uint32_t n)
{
	struct lane_rc *rc = RC(lane);
	struct ibv_recv_wr *w = lane->ctx->ifc.rwr, *last, *next, *bad;
	struct ibv_sge *sg = lane->ctx->ifc.rsge;
	struct rdmamsg_buf *const *rxb = rc->rxb;
	const uint64_t tag = lane->wrid_tag;
	const uint32_t off = rc->rx_off, len = rc->rx_len;
	uint32_t i, k;
	int ret;

	if (RDMAMSG_LIKELY(n == 1)) {
		/* one at a time (a ping-pong): no chain to set up */
		struct ibv_recv_wr one;
		struct ibv_sge sge;
		const struct rdmamsg_buf *b = rxb[idx[0]];

		sge.addr = (uintptr_t)(b->data - off);
		sge.length = len;
		sge.lkey = b->lkey;
		one.wr_id = tag | idx[0];
		one.next = NULL;
		one.sg_list = &sge;
		one.num_sge = 1;
		return -ibv_post_recv(lane->qp, &one, &bad);
	}
	while (n) {
		k = n > RDMAMSG_POLL_BATCH ? RDMAMSG_POLL_BATCH : n;
		for (i = 0; i < k; i++) {
			const struct rdmamsg_buf *b = rxb[idx[i]];

			sg[i].addr = (uintptr_t)(b->data - off);
			sg[i].length = len;
			sg[i].lkey = b->lkey;
			w[i].wr_id = tag | idx[i];
		}
		last = &w[k - 1];
		next = last->next;
		last->next = NULL;
		ret = ibv_post_recv(lane->qp, w, &bad);
		last->next = next;
		if (ret)
			return -ret;
		idx += k;
		n -= k;
	}
	return 0;
}

/* rc_post_recvs -- the ops table's post_recvs */
static int rc_post_recvs(struct rdmamsg__lane *lane, const uint32_t *idx,
			 uint32_t n)
{
	if (RC(lane)->srq)
		return 0; /* the interface posts the SRQ's */
	return post_recvs(lane, idx, n);
}

/* rx_batch_set -- the repost batch the session asks for, within rep[] */
static void rx_batch_set(struct lane_rc *rc, uint32_t rx_batch)
{
	rc->rx_batch = rx_batch > RDMAMSG_RX_BATCH_MAX ? RDMAMSG_RX_BATCH_MAX
						       : rx_batch;
}

/* rc_grow_recvs -- the ops table's grow_recvs (not on an SRQ: its
 * windows never grow) */
static int rc_grow_recvs(struct rdmamsg__lane *lane, const uint32_t *idx,
			 uint32_t n, uint32_t rx_batch)
{
	struct lane_rc *rc = RC(lane);

	if (rc->srq)
		return -EINVAL;
	rx_batch_set(rc, rx_batch);
	return post_recvs(lane, idx, n);
}

/* rx_status -- rx()'s status of a receive completion */
static inline int rx_status(const struct ibv_wc *wc)
{
	if (RDMAMSG_LIKELY(wc->status == IBV_WC_SUCCESS)) {
		if (RDMAMSG_UNLIKELY(wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM))
			return RDMAMSG__RX_WRITE_IMM;
		return RDMAMSG_UNLIKELY(wc->wc_flags & IBV_WC_WITH_INV)
			       ? RDMAMSG__RX_INV
			       : 0;
	}
	return rdmamsg__wc_errno(wc->status);
}

/* rx_imm -- rx()'s imm of a receive completion: the immediate, or the
 * rkey it invalidated (the same union of the work completion) */
static inline uint32_t rx_imm(const struct ibv_wc *wc)
{
	if (RDMAMSG_UNLIKELY(wc->wc_flags & IBV_WC_WITH_INV))
		return wc->invalidated_rkey;
	return be32toh(wc->imm_data);
}

/* rc_rx -- one receive completion up to the session; its buffer's index
 * in *idx.  The session's verdict: RDMAMSG__RX_DATA or RDMAMSG__RX_CTL,
 * the buffer to be reposted, or 0 */
static inline __attribute__((always_inline)) int rc_rx(
	struct rdmamsg__lane *lane, const struct ibv_wc *wc, uint32_t *idx)
{
	*idx = (uint32_t)wc->wr_id & RDMAMSG_RX_IDX_MASK;
	return lane->cbs->rx(lane->owner, &RC(lane)->rxb[*idx], wc->byte_len,
			     rx_status(wc), rx_imm(wc));
}

/* rc_repost -- after a run: nrep buffers to repost at rep[nkept], nctl of
 * them control ones.  Data buffers wait for a batch; a control one takes
 * them along */
static inline __attribute__((always_inline)) void rc_repost(
	struct rdmamsg__lane *lane, uint32_t nrep, uint32_t nctl)
{
	struct lane_rc *rc = RC(lane);

	if (!nrep || lane->down)
		return;
	if (RDMAMSG_LIKELY(!nctl && rc->nkept + nrep < rc->rx_batch)) {
		rc->nkept += nrep;
		return;
	}
	nrep += rc->nkept;
	rc->nkept = 0;
	if (post_recvs(lane, rc->rep, nrep) == 0)
		lane->cbs->reposted(lane->owner, nrep - nctl, nctl);
}

/* rc_wcs -- the run of this lane's completions at the head of wc[0..n)
 * (n at most RDMAMSG_POLL_BATCH), in CQ order: each reported up, the
 * receive buffers reposted as one batch (data ones once rx_batch are
 * waiting, with their credits: lane.h).  Returns how many it took: it
 * stops at the first of another lane; 0 when wc[0] is not of its QP (a
 * freed lane's whose tag the slot's generation matches).  A lone receive
 * (a ping-pong's pass) goes straight up, no run walked: 30 instructions a
 * message less (rdmamsg_pingpong). */
static uint32_t rc_wcs(struct rdmamsg__lane *lane, const struct ibv_wc *wc,
		       uint32_t n)
{
	struct lane_rc *rc = RC(lane);
	const struct rdmamsg__lane_cbs *cbs = lane->cbs;
	void *owner = lane->owner;
	uint32_t *rep = rc->rep + rc->nkept;
	const uint64_t tag = lane->wrid_tag;
	uint32_t nrep = 0, nctl = 0, i;
	int st, r;

	if (RDMAMSG_UNLIKELY(wc[0].qp_num != lane->qpn))
		return 0;
	if (RDMAMSG_UNLIKELY(lane->hold)) {
		for (i = 1; i < n; i++)
			if ((wc[i].wr_id & RDMAMSG_WRID_TAG_BITS) != tag)
				break;
		rdmamsg__iface_hold(lane, wc, i);
		return i;
	}
	if (n == 1 && (wc[0].wr_id &
		       (RDMAMSG_WRID_TAG_BITS | RDMAMSG__WRID_SEND)) == tag) {
		r = rc_rx(lane, &wc[0], rep);
		rc_repost(lane, r != 0, r != 0 && r != RDMAMSG__RX_DATA);
		return 1;
	}
	for (i = 0; i < n; i++) {
		/* the run ends at another lane's completion */
		if (RDMAMSG_UNLIKELY((wc[i].wr_id & RDMAMSG_WRID_TAG_BITS) !=
				     tag))
			break;
		if (!(wc[i].wr_id & RDMAMSG__WRID_SEND)) {
			r = rc_rx(lane, &wc[i], &rep[nrep]);
			if (r) {
				nrep++;
				nctl += r != RDMAMSG__RX_DATA;
			}
			continue;
		}
		if (RDMAMSG_LIKELY(wc[i].status == IBV_WC_SUCCESS)) {
			cbs->tx_done(owner, (uint32_t)wc[i].wr_id, 0);
			continue;
		}
		st = rdmamsg__wc_errno(wc[i].status);
		cbs->tx_done(owner, (uint32_t)wc[i].wr_id, st);
		if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
			cbs->down(owner, st);
	}
	rc_repost(lane, nrep, nctl);
	return i;
}

/* rc_error -- the QP to error; with drain, a signalled drain WR whose
 * flush completion tells that every earlier send has completed */
static int rc_error(struct rdmamsg__lane *lane, uint64_t seq, int drain)
{
	struct lane_rc *rc = RC(lane);
	struct ibv_send_wr wr, *bad;
	struct ibv_qp_attr qa;

	lane->down = 1;
	if (!lane->qp || rc->drain_posted)
		return 0;
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_ERR;
	lane->ctx->ops->modify_qp(lane->qp, &qa, IBV_QP_STATE);
	if (!drain)
		return 0;
	rc->drain_posted = 1;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = RDMAMSG__WRID_SEND | lane->wrid_tag | (uint32_t)seq;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	return ibv_post_send(lane->qp, &wr, &bad) == 0;
}

/* rc_destroy -- QP, SRQ window, CQ room, the lane */
static void rc_destroy(struct rdmamsg__lane *lane)
{
	struct lane_rc *rc = RC(lane);
	struct rdmamsg_ctx *ctx = lane->ctx;

	if (lane->qp)
		ctx->ops->destroy_qp(lane->qp);
	lane->qp = NULL;
	if (rc->srq) {
		/* its window goes back to the SRQ (its buffers stay posted
		 * for the next endpoint) */
		rdmamsg__srq_drop_early(lane);
		if (rc->srq_mapped)
			rdmamsg__qpmap_del(&ctx->ifc.qps, lane->qpn);
		if (rc->srq_win)
			rdmamsg__srq_release(rc->srq, rc->srq_win);
	}
	rdmamsg__iface_detach(lane);
	free(lane->early);
	list_del(&lane->ready_link);
	free(rc);
}

/* cm_modify -- the lane's QP to state st with the attributes the
 * connection's id gives (rdma_init_qp_attr), RDMA READ limits replaced as
 * rc_cm_rts says.  The mask's bits 21-23 are left out, as librdmacm's
 * ucma_modify_qp_rtr does on InfiniBand: older kernels filled them in
 * (their RoCE address fields) and refused them back. */
static int cm_modify(struct rdmamsg__lane *lane, struct rdma_cm_id *id,
		     enum ibv_qp_state st, uint8_t resp_res, uint8_t init_depth)
{
	const struct rdmamsg__ops *ops = lane->ctx->ops;
	struct ibv_qp_attr qa;
	int mask = 0, ret;

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = st;
	if (ops->init_qp_attr(id, &qa, &mask)) {
		ret = rdmamsg__errno(EINVAL);
		LOG_ERR("rdma_init_qp_attr (state %d) failed: %d", (int)st,
			ret);
		return ret;
	}
	mask &= ~0xe00000;
	if (st == IBV_QPS_RTR && resp_res != RDMA_MAX_RESP_RES)
		qa.max_dest_rd_atomic = resp_res;
	if (st == IBV_QPS_RTS && init_depth != RDMA_MAX_INIT_DEPTH)
		qa.max_rd_atomic = init_depth;
	if (ops->modify_qp(lane->qp, &qa, mask)) {
		ret = rdmamsg__errno(EINVAL);
		LOG_ERR("ibv_modify_qp (state %d) failed: %d", (int)st, ret);
		return ret;
	}
	return 0;
}

/* rc_cm_rts -- INIT again (the access flags, now that the RDMA READ
 * limits are known), RTR, RTS: librdmacm's ucma_modify_qp_rtr and
 * ucma_modify_qp_rts (lane.h cm_rts) */
static int rc_cm_rts(struct rdmamsg__lane *lane, struct rdma_cm_id *id,
		     uint8_t resp_res, uint8_t init_depth)
{
	int ret;

	if (!lane->qp)
		return -EINVAL;
	ret = cm_modify(lane, id, IBV_QPS_INIT, resp_res, init_depth);
	if (!ret)
		ret = cm_modify(lane, id, IBV_QPS_RTR, resp_res, init_depth);
	if (!ret)
		ret = cm_modify(lane, id, IBV_QPS_RTS, resp_res, init_depth);
	return ret;
}

/* rc_fits -- the QP a lane of a asks for is within what the device
 * reports (ibv_query_device: max_qp_wr, max_sge), which rejects more with
 * EINVAL (rxe_qp_chk_cap, mlx5): 0, or -ENOMEM with the reason logged,
 * before anything is made */
static int rc_fits(const struct rdmamsg_ctx *ctx,
		   const struct rdmamsg__lane_attr *a)
{
	uint64_t max_wr =
		ctx->dattr.max_qp_wr > 0 ? (uint64_t)ctx->dattr.max_qp_wr : 0;

	if ((uint64_t)a->send_depth + 1 > max_wr) {
		LOG_ERR("send depth %u needs %llu work requests on a queue "
			"pair, device %s allows %d (max_qp_wr)",
			a->send_depth, (unsigned long long)a->send_depth + 1,
			ctx->devname, ctx->dattr.max_qp_wr);
		return -ENOMEM;
	}
	if (!a->srq && (uint64_t)a->nrx > max_wr) {
		LOG_ERR("%u receive buffers need as many work requests on "
			"a queue pair, device %s allows %d (max_qp_wr)",
			a->nrx, ctx->devname, ctx->dattr.max_qp_wr);
		return -ENOMEM;
	}
	if (ctx->dattr.max_sge < 2) {
		LOG_ERR("a send takes 2 scatter/gather entries, device %s "
			"allows %d (max_sge)",
			ctx->devname, ctx->dattr.max_sge);
		return -ENOMEM;
	}
	return 0;
}

/* rc_open -- room on the interface's CQ, the QP on the session's id, the
 * window on the SRQ or the receive ring posted */
static int rc_open(struct rdmamsg_ctx *ctx, const struct rdmamsg__lane_attr *a,
		   const struct rdmamsg__lane_cbs *cbs, void *owner,
		   struct rdmamsg__lane **lanep)
{
	struct ibv_qp_init_attr qa;
	struct lane_rc *rc;
	struct rdmamsg__lane *lane;
	uint32_t w, inl;
	int ret;

	if (a->id->verbs != ctx->cm_verbs) {
		LOG_ERR("connection is on device %s, context on %s",
			a->id->verbs ? a->id->verbs->device->name : "?",
			ctx->devname);
		return -ENODEV;
	}
	ret = rc_fits(ctx, a);
	if (ret)
		return ret;
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return -ENOMEM;
	lane = &rc->l;
	lane->ops = &rdmamsg__lane_rc_ops;
	lane->cbs = cbs;
	lane->owner = owner;
	lane->ctx = ctx;
	lane->send_depth = a->send_depth;
	lane->plain_send = 1;
	lane->hold = a->hold;
	list_init(&lane->ready_link);
	rc->rxb = a->rxb;
	rc->nrx = a->nrx;
	rc->rx_len = a->rx_len;
	rc->rx_off = a->rx_off;
	rc->srq = a->srq;
	rx_batch_set(rc, a->rx_batch);
	/* every work request may complete (flushed ones too): the send ring
	 * with its drain WR, the receives.  No CQ room (the device's
	 * max_cqe, its CQs, logged) is a queue pair that cannot be made:
	 * -ENOMEM (rdmamsg_connect(3)); -ENOBUFS says an SRQ window */
	ret = rdmamsg__iface_attach(lane, a->send_depth + 1 + a->nrx);
	if (ret) {
		free(rc);
		return ret == -ENOBUFS ? -ENOMEM : ret;
	}
	memset(&qa, 0, sizeof(qa));
	qa.qp_context = owner;
	qa.send_cq = qa.recv_cq = lane->icq->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = a->send_depth + 1;
	/* room for the ring as it may grow (the CQ's comes as it does) */
	qa.cap.max_recv_wr = a->nrx_max > a->nrx ? a->nrx_max : a->nrx;
	if (a->srq)
		qa.cap.max_recv_wr = 0;
	qa.srq = a->srq ? a->srq->srq : NULL;
	qa.cap.max_send_sge = 2;
	qa.cap.max_recv_sge = 1;
	/* the context's probe made a QP two WRs deep: a deeper send queue
	 * of WQEs that large may be more than the device gives one QP, so
	 * the inline size halves down to RC_INLINE_FLOOR before giving up */
	for (inl = ctx->max_inline;; inl /= 2) {
		qa.cap.max_inline_data = inl;
		lane->qp = ctx->ops->create_qp(ctx->qp_pd, &qa);
		if (lane->qp)
			break;
		if (inl <= RC_INLINE_FLOOR) {
			ret = rdmamsg__errno(ENOMEM);
			LOG_ERR("ibv_create_qp failed: %d", ret);
			goto err;
		}
	}
	lane->qpn = lane->qp->qp_num;
	lane->max_inline = qa.cap.max_inline_data;
	/* INIT before the REQ or REP, as rdma_create_qp would (its receives
	 * are posted in INIT) */
	ret = cm_modify(lane, a->id, IBV_QPS_INIT, RDMA_MAX_RESP_RES,
			RDMA_MAX_INIT_DEPTH);
	if (ret)
		goto err;
	if (a->srq) {
		/* its credit window on the SRQ, on both sides at once: the
		 * SRQ's buffers are already there, nothing waits for them */
		ret = rdmamsg__qpmap_add(&ctx->ifc.qps, lane->qpn, lane);
		if (ret)
			goto err;
		rc->srq_mapped = 1;
		w = a->srq_win ? a->srq_win : a->nrx;
		ret = rdmamsg__srq_reserve(a->srq, w);
		if (ret)
			goto err;
		rc->srq_win = w;
	} else if (a->post_rx) {
		uint32_t idx[32], i, done = 0;

		while (done < a->nrx) {
			uint32_t k = a->nrx - done > 32 ? 32 : a->nrx - done;

			for (i = 0; i < k; i++)
				idx[i] = done + i;
			ret = post_recvs(lane, idx, k);
			if (ret) {
				LOG_ERR("posting %u receive buffers failed: "
					"%d",
					a->nrx, ret);
				goto err;
			}
			done += k;
		}
	}
	*lanep = lane;
	return 0;

err:
	rc_destroy(lane);
	return ret;
}

const struct rdmamsg__lane_ops rdmamsg__lane_rc_ops = {
	.name = "rc",
	.open = rc_open,
	.send = rc_send,
	.post = rc_post,
	.post_recvs = rc_post_recvs,
	.grow_recvs = rc_grow_recvs,
	.wcs = rc_wcs,
	.error = rc_error,
	.destroy = rc_destroy,
	.cm_rts = rc_cm_rts,
};

/* the reposted receives' credits, once their SRQ batch is posted */
struct srq_credit {
	struct rdmamsg__lane *lane;
	int r; /* rx()'s */
};

/* credit -- the SRQ batch was posted: each lane's receives are reposted */
static inline __attribute__((always_inline)) void credit(
	const struct srq_credit *cr, uint32_t n)
{
	uint32_t k;

	for (k = 0; k < n; k++)
		cr[k].lane->cbs->reposted(cr[k].lane->owner,
					  cr[k].r == RDMAMSG__RX_DATA,
					  cr[k].r == RDMAMSG__RX_CTL);
}

/* rc_srq_lane -- the RC lane of an SRQ receive (its QP's, on that SRQ), or
 * NULL (counted stale) */
static struct rdmamsg__lane *rc_srq_lane(struct rdmamsg_ctx *ctx,
					 const struct rdmamsg_srq *srq,
					 const struct ibv_wc *wc)
{
	struct rdmamsg__lane *lane =
		rdmamsg__qpmap_find(&ctx->ifc.qps, wc->qp_num);

	if (RDMAMSG_UNLIKELY(!lane || RC(lane)->srq != srq || !lane->qp)) {
		ctx->ifc.stale_wcs++;
		return NULL;
	}
	return lane;
}

/* rdmamsg__lane_srq_wcs -- the SRQ receives at the head of wc[0..n) (n
 * at most RDMAMSG_POLL_BATCH; the interface found wc[0] to be one), all of
 * RC QPs or all of the DCT, as wc[0] is: each to its lane (an RC lane by
 * its QP, wc.qp_num; a DC lane by the message's immediate, lane_dc.c),
 * then every buffer reposted to its SRQ, in one batch per SRQ, and only
 * then the credits given back.  A buffer of no lane is reposted too (and
 * counted); one of a lane that holds its completions waits in its early
 * ones.  Returns how many it took. */
uint32_t rdmamsg__lane_srq_wcs(struct rdmamsg_ctx *ctx, const struct ibv_wc *wc,
			       uint32_t n)
{
	struct srq_credit cr[RDMAMSG_POLL_BATCH];
	uint32_t rep[RDMAMSG_POLL_BATCH];
	struct rdmamsg_srq *cur = NULL;
	uint32_t i, nrep = 0, ncr = 0;
	int dct = rdmamsg__dc_is_dct(ctx, wc[0].qp_num);

	for (i = 0; i < n && rdmamsg__wrid_is_srq(wc[i].wr_id) &&
		    rdmamsg__dc_is_dct(ctx, wc[i].qp_num) == dct;
	     i++) {
		struct rdmamsg_srq *srq =
			rdmamsg__srq_of_wrid(ctx, wc[i].wr_id);
		uint32_t idx = (uint32_t)wc[i].wr_id & RDMAMSG_RX_IDX_MASK;
		struct rdmamsg__lane *lane;
		int r;

		if (RDMAMSG_UNLIKELY(!srq || idx >= srq->nbufs)) {
			ctx->ifc.stale_wcs++; /* its SRQ was closed */
			continue;
		}
		if (srq != cur) {
			if (cur && nrep &&
			    rdmamsg__srq_post(cur, rep, nrep) == 0)
				credit(cr, ncr);
			nrep = ncr = 0;
			cur = srq;
		}
		srq->posted--;
		lane = dct ? rdmamsg__dc_srq_lane(ctx, srq, &wc[i])
			   : rc_srq_lane(ctx, srq, &wc[i]);
		if (lane && RDMAMSG_UNLIKELY(lane->hold)) {
			srq->posted++; /* counted again at the replay */
			rdmamsg__iface_hold(lane, &wc[i], 1);
			continue;
		}
		if (lane) {
			/* a DC message's immediate was its route */
			r = lane->cbs->rx(lane->owner, &srq->bufs[idx],
					  wc[i].byte_len,
					  dct ? 0 : rx_status(&wc[i]),
					  dct ? 0 : rx_imm(&wc[i]));
			if (r && !lane->down) {
				cr[ncr].lane = lane;
				cr[ncr++].r = r;
			}
			/* visited in this pass (the interface is polling) */
			if (list_empty(&lane->ready_link))
				list_add_tail(&ctx->polls, &lane->ready_link);
		}
		rep[nrep++] = idx;
	}
	if (cur && nrep && rdmamsg__srq_post(cur, rep, nrep) == 0)
		credit(cr, ncr);
	if (cur && RDMAMSG_UNLIKELY(cur->nidle))
		rdmamsg__srq_refill(cur);
	return i ? i : 1;
}
