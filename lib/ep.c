/* SPDX-License-Identifier: MIT */
/* ep.c -- endpoints: attributes, resources, states, asynchronous close */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "dispatch.h"
#include "fastpath.h"

#define MAX_EAGER   ((size_t)1 << 20)
#define MAX_MSG_MAX ((size_t)1 << RDMAMSG_MAX_CLASS_SHIFT)

/* rdmamsg__ep_params_default -- the documented defaults */
void rdmamsg__ep_params_default(struct rdmamsg__ep_params *p)
{
	memset(p, 0, sizeof(*p));
	p->connect_ms = 5000;
	p->close_ms = 2000;
	p->peer_ms = 10000;
	p->eager = 8192;
	p->max_msg = (size_t)1 << 20;
	p->recv_depth = 32;
	p->send_depth = 128;
	p->backlog = 1024;
	p->max_large = (size_t)1 << 30;
}

/* rdmamsg_ep_attr_new -- attributes with defaults */
RDMAMSG_EXPORT int rdmamsg_ep_attr_new(struct rdmamsg_ep_attr **attr)
{
	struct rdmamsg_ep_attr *a;

	if (!attr)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	rdmamsg__ep_params_default(&a->p);
	*attr = a;
	return 0;
}

/* rdmamsg_ep_attr_delete -- free *attr */
RDMAMSG_EXPORT int rdmamsg_ep_attr_delete(struct rdmamsg_ep_attr **attr)
{
	if (!attr)
		return -EINVAL;
	free(*attr);
	*attr = NULL;
	return 0;
}

/* rdmamsg_ep_attr_set_connect_timeout -- ms for a connect attempt */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_connect_timeout(
	struct rdmamsg_ep_attr *attr, unsigned int ms)
{
	if (!attr || ms == 0)
		return -EINVAL;
	attr->p.connect_ms = ms;
	return 0;
}

/* rdmamsg_ep_attr_set_close_timeout -- ms a close waits at most */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_close_timeout(
	struct rdmamsg_ep_attr *attr, unsigned int ms)
{
	if (!attr)
		return -EINVAL;
	attr->p.close_ms = ms;
	return 0;
}

/* rdmamsg_ep_attr_set_peer_timeout -- ms of silence that means dead */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_peer_timeout(
	struct rdmamsg_ep_attr *attr, unsigned int ms)
{
	if (!attr || (ms && ms < 30))
		return -EINVAL;
	attr->p.peer_ms = ms;
	return 0;
}

/* rdmamsg_ep_attr_set_eager_size -- bytes per receive buffer */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_eager_size(struct rdmamsg_ep_attr *attr,
						  size_t size)
{
	if (!attr || size < 64 || size > MAX_EAGER)
		return -EINVAL;
	attr->p.eager = (uint32_t)size;
	if (attr->p.max_msg < size)
		attr->p.max_msg = size;
	return 0;
}

/* rdmamsg_ep_attr_set_max_msg_size -- the largest message */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_max_msg_size(
	struct rdmamsg_ep_attr *attr, size_t size)
{
	if (!attr || size < attr->p.eager || size > MAX_MSG_MAX)
		return -EINVAL;
	attr->p.max_msg = size;
	return 0;
}

/* rdmamsg_ep_attr_set_recv_depth -- receive buffers (peer's credits) */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_recv_depth(struct rdmamsg_ep_attr *attr,
						  unsigned int depth)
{
	if (!attr || depth < 2 || depth > 4096)
		return -EINVAL;
	attr->p.recv_depth = depth;
	return 0;
}

/* rdmamsg_ep_attr_set_send_depth -- send work requests in flight */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_send_depth(struct rdmamsg_ep_attr *attr,
						  unsigned int depth)
{
	if (!attr || depth < 4 || depth > 4096)
		return -EINVAL;
	attr->p.send_depth = depth;
	return 0;
}

/* rdmamsg_ep_attr_set_send_backlog -- messages queued without credits */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_send_backlog(
	struct rdmamsg_ep_attr *attr, unsigned int msgs)
{
	if (!attr || msgs > 1048576)
		return -EINVAL;
	attr->p.backlog = msgs;
	return 0;
}

/* rdmamsg_ep_attr_set_private_data -- application bytes for the peer */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_private_data(
	struct rdmamsg_ep_attr *attr, const void *data, size_t len)
{
	if (!attr || len > RDMAMSG_PRIVATE_DATA_MAX || (len && !data))
		return -EINVAL;
	if (len)
		memcpy(attr->p.pdata, data, len);
	attr->p.pdata_len = (uint8_t)len;
	return 0;
}

static void conn_timer_fire(struct rdmamsg__timer *t);
static void ka_timer_fire(struct rdmamsg__timer *t);
static void close_timer_fire(struct rdmamsg__timer *t);
static void ring_timer_fire(struct rdmamsg__timer *t);

/* rdmamsg_ep_attr_set_linger -- whether rdmamsg_ep_close() first sends
 * what is queued (bounded by the close timeout) */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_linger(struct rdmamsg_ep_attr *attr,
					      int enable)
{
	if (!attr)
		return -EINVAL;
	attr->p.linger = !!enable;
	return 0;
}

/* free_bufs -- give every pool buffer the endpoint holds back */
static void free_bufs(struct rdmamsg_ep *ep)
{
	struct rdmamsg_buf *n, *next;
	uint32_t i;

	if (ep->sbufs)
		for (i = 0; i < ep->nsbuf; i++)
			if (ep->sbufs[i])
				rdmamsg__buf_put(ep->sbufs[i]);
	if (ep->srq)
		ep->rxb = NULL; /* the SRQ's */
	if (ep->rxb)
		for (i = 0; i < ep->nrx; i++)
			if (ep->rxb[i])
				rdmamsg__buf_put(ep->rxb[i]);
	if (ep->slots)
		for (i = 0; i <= ep->sq_mask; i++)
			if (ep->slots[i].buf) {
				rdmamsg__buf_put(ep->slots[i].buf);
				ep->slots[i].buf = NULL;
			}
	for (n = ep->bl_head; n; n = next) {
		next = n->next;
		rdmamsg__buf_put(n);
	}
	ep->bl_head = ep->bl_tail = NULL;
	if (ep->rx_asm)
		rdmamsg__buf_put(ep->rx_asm);
	ep->rx_asm = NULL;
	free(ep->sbufs);
	free(ep->rxb);
	free(ep->slots);
	ep->sbufs = ep->rxb = NULL;
	ep->slots = NULL;
}

/* rdmamsg__ep_new -- an endpoint with its rings, not yet connected */
int rdmamsg__ep_new(struct rdmamsg_ctx *ctx, const struct rdmamsg_ep_attr *attr,
		    const struct rdmamsg_ep_cbs *cbs, void *arg,
		    struct rdmamsg_ep **epp)
{
	struct rdmamsg_ep *ep;
	uint32_t ring = 1;
	int ret;

	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -ENOMEM;
	ep->obj.type = OBJ_EP;
	ep->ctx = ctx;
	ep->cbs = *cbs;
	ep->arg = arg;
	if (attr)
		ep->p = attr->p;
	else
		rdmamsg__ep_params_default(&ep->p);
	ep->st = EPS_IDLE;
	list_init(&ep->poll_link);
	list_init(&ep->xwait_link);
	list_init(&ep->defer_link);
	list_init(&ep->link);
	rdmamsg__timer_init(&ep->conn_timer, conn_timer_fire);
	rdmamsg__timer_init(&ep->ka_timer, ka_timer_fire);
	rdmamsg__timer_init(&ep->close_timer, close_timer_fire);
	rdmamsg__timer_init(&ep->ring_timer, ring_timer_fire);

	while (ring < ep->p.send_depth + 1) /* + the drain WR */
		ring <<= 1;
	ep->sq_mask = ring - 1;
	ep->sig_every = ep->p.send_depth / 4 ? ep->p.send_depth / 4 : 1;
	ep->slots = calloc(ring, sizeof(*ep->slots));
	ep->nsbuf = ep->p.send_depth + 1;
	ep->sbufs = calloc(ep->nsbuf, sizeof(*ep->sbufs));
	ep->nrx = ep->p.recv_depth + RDMAMSG_CTL_CREDITS;
	if (ep->p.srq) {
		struct rdmamsg_srq *srq = ep->p.srq;

		if (srq->ctx != ctx || srq->closing ||
		    ep->p.eager > srq->buf_size) {
			LOG_ERR("SRQ %p: %s", (void *)srq,
				srq->ctx != ctx ? "of another context"
				: srq->closing
					? "closing"
					: "buffers below the eager size");
			free(ep->slots);
			free(ep->sbufs);
			free(ep);
			return -EINVAL;
		}
		ep->srq = srq;
		srq->refs++;
		ep->rxb = srq->bufs; /* the SRQ's, indexed by wr_id */
	} else {
		ep->rxb = calloc(ep->nrx, sizeof(*ep->rxb));
	}
	if (!ep->slots || !ep->sbufs || !ep->rxb) {
		ret = -ENOMEM;
		goto err_free_bufs;
	}
	/* copy slots for the send ring (at the same index as their WRs) come
	 * from the pool on first use (msg.c); receive buffers when the
	 * connection needs them (rdmamsg__ep_rx_fill) */
	*epp = ep;
	return 0;

err_free_bufs:
	free_bufs(ep);
	if (ep->srq)
		ep->srq->refs--;
	free(ep);
	return ret;
}

/* rdmamsg__ep_rx_fill -- the receive buffers from the pool: -ENOMEM when
 * it has too little; what was taken stays for the next try */
int rdmamsg__ep_rx_fill(struct rdmamsg_ep *ep)
{
	uint32_t i;

	if (ep->srq)
		return 0; /* its window was reserved with its QP */
	for (i = 0; i < ep->nrx; i++)
		if (!ep->rxb[i] && rdmamsg__buf_get(ep->ctx, ep->p.eager,
						    BUF_LIB, &ep->rxb[i]))
			return -ENOMEM;
	return 0;
}

/* rdmamsg__ep_setup_qp -- room on the context's CQ, QP, receive buffers */
int rdmamsg__ep_setup_qp(struct rdmamsg_ep *ep)
{
	struct rdmamsg_ctx *ctx = ep->ctx;
	struct ibv_qp_init_attr qa;
	int ret;

	if (ep->id->verbs != ctx->verbs) {
		LOG_ERR("connection is on device %s, context on %s",
			ep->id->verbs ? ep->id->verbs->device->name : "?",
			ctx->devname);
		return -ENODEV;
	}
	/* every work request may complete (flushed ones too): the send ring
	 * with its drain WR, the receive buffers */
	ret = rdmamsg__iface_attach(ep, ep->p.send_depth + 1 + ep->nrx);
	if (ret)
		return ret;
	memset(&qa, 0, sizeof(qa));
	qa.qp_context = ep;
	qa.send_cq = qa.recv_cq = ep->icq->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = ep->p.send_depth + 1;
	qa.cap.max_recv_wr = ep->srq ? 0 : ep->nrx;
	qa.srq = ep->srq ? ep->srq->srq : NULL;
	qa.cap.max_send_sge = 2;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = ctx->max_inline;
	if (ctx->ops->create_cm_qp(ep->id, ctx->pd, &qa)) {
		ret = rdmamsg__errno(ENOMEM);
		LOG_ERR("rdma_create_qp failed: %d", ret);
		goto err_destroy_cq;
	}
	ep->qp = ep->id->qp;
	ep->qpn = ep->qp->qp_num;
	ep->max_inline = qa.cap.max_inline_data;
	if (ep->srq) {
		/* its credit window on the SRQ, on both sides at once: the
		 * SRQ's buffers are already there, nothing waits for them */
		ret = rdmamsg__qpmap_add(&ctx->ifc.qps, ep->qpn, ep);
		if (ret)
			goto err_destroy_qp;
		ep->srq_mapped = 1;
		ret = rdmamsg__srq_reserve(ep->srq, ep->nrx);
		if (ret)
			goto err_destroy_qp;
		ep->srq_win = 1;
		return 0;
	}
	/* the passive side posts (and grants) its receive buffers only
	 * once the connection is established: a handshake that never
	 * completes costs no pool memory */
	if (ep->passive)
		return 0;
	ret = rdmamsg__ep_post_recvs(ep, ep->nrx);
	if (ret) {
		LOG_ERR("posting %u receive buffers failed: %d", ep->nrx, ret);
		goto err_destroy_qp;
	}
	return 0;

err_destroy_qp:
	ctx->ops->destroy_cm_qp(ep->id);
	ep->qp = NULL;
	ep->rx_posted = 0;
	if (ep->srq_mapped)
		rdmamsg__qpmap_del(&ctx->ifc.qps, ep->qpn);
	ep->srq_mapped = 0;
err_destroy_cq:
	rdmamsg__iface_detach(ep);
	return ret;
}

/* rdmamsg__ep_negotiate -- apply the peer's handshake parameters */
void rdmamsg__ep_negotiate(struct rdmamsg_ep *ep, uint32_t peer_depth,
			   uint32_t peer_eager, uint64_t peer_max_msg)
{
	ep->frag = peer_eager < ep->p.eager ? peer_eager : ep->p.eager;
	ep->max_msg = peer_max_msg < ep->p.max_msg ? (size_t)peer_max_msg
						   : ep->p.max_msg;
	ep->peer_depth = peer_depth;
	if (ep->passive) {
		/* the active side posted its buffers before connecting */
		ep->credits = (int32_t)peer_depth;
		ep->ctl_credits = RDMAMSG_CTL_CREDITS;
	} else {
		/* the passive side grants them in-band once established */
		ep->credits = 0;
		ep->ctl_credits = 0;
	}
}

/* grant -- passive side, connection established: receive buffers from the
 * pool, posted, and granted to the peer in one credit update; without pool
 * memory the peer waits (no credits) and we try again shortly */
static void grant(struct rdmamsg_ep *ep)
{
	int ret;

	if (ep->granted || ep->phase != PH_UP || ep->closing)
		return;
	if (rdmamsg__ep_rx_fill(ep)) {
		LOG_NOTE("endpoint %p: no pool memory for its receive buffers "
			 "yet: the peer waits",
			 (void *)ep);
		rdmamsg__timer_start(ep->ctx, &ep->ring_timer, 10);
		return;
	}
	ret = ep->srq ? 0 : rdmamsg__ep_post_recvs(ep, ep->nrx);
	if (ret) {
		LOG_ERR("posting %u receive buffers failed: %d", ep->nrx, ret);
		rdmamsg__ep_down(ep, -ENOBUFS);
		return;
	}
	ep->granted = 1;
	ep->to_return += ep->p.recv_depth;
	ep->ctl_to_return += RDMAMSG_CTL_CREDITS;
	if (rdmamsg__ep_send_grant(ep)) {
		LOG_ERR("endpoint %p: cannot send the credit grant",
			(void *)ep);
		rdmamsg__ep_down(ep, -ENOBUFS);
	}
}

/* ring_timer_fire -- retry the passive side's receive buffers */
static void ring_timer_fire(struct rdmamsg__timer *t)
{
	grant(container_of(t, struct rdmamsg_ep, ring_timer));
}

/* hs_done -- the handshake is over (up, failed or closed): it no longer
 * counts against the context's limit of unfinished handshakes */
static void hs_done(struct rdmamsg_ep *ep)
{
	if (ep->hs_pending) {
		ep->hs_pending = 0;
		ep->ctx->pending_hs--;
	}
}

/* rdmamsg__ep_set_state -- the one place the endpoint's state moves: the
 * transitions of lane.h, anything else refused (-EINVAL) and logged */
int rdmamsg__ep_set_state(struct rdmamsg_ep *ep, enum rdmamsg__ep_st to)
{
	if (ep->st == to)
		return 0;
	if (!rdmamsg__ep_st_legal(ep->st, to)) {
		LOG_ERR("endpoint %p: no transition from state %d to %d",
			(void *)ep, (int)ep->st, (int)to);
		return -EINVAL;
	}
	ep->st = to;
	return 0;
}

/* rdmamsg__ep_defer -- step this endpoint in the next progress pass */
void rdmamsg__ep_defer(struct rdmamsg_ep *ep)
{
	rdmamsg__ctx_defer(ep->ctx, &ep->defer_link);
}

/* qp_error -- move the QP to error and post a signalled drain WR: its
 * flush completion tells that every earlier send has completed */
static void qp_error(struct rdmamsg_ep *ep)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_qp_attr qa;

	if (!ep->qp || ep->drain_posted)
		return;
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_ERR;
	ep->ctx->ops->modify_qp(ep->qp, &qa, IBV_QP_STATE);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = fp_send_wrid(ep, ep->sq_head);
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(ep->qp, &wr, &bad) == 0) {
		ep->slots[ep->sq_head & ep->sq_mask].report = 0;
		ep->slots[ep->sq_head & ep->sq_mask].buf = NULL;
		ep->sq_head++;
	}
	ep->drain_posted = 1;
}

/* rdmamsg__ep_connected -- the connection is up */
void rdmamsg__ep_connected(struct rdmamsg_ep *ep, const void *pdata, size_t len)
{
	if (ep->phase == PH_UP || ep->phase == PH_DOWN)
		return;
	rdmamsg__timer_stop(ep->ctx, &ep->conn_timer);
	hs_done(ep);
	ep->phase = PH_UP;
	ep->last_rx = ep->last_tx = rdmamsg__now_ns();
	if (ep->closing) {
		rdmamsg__ep_down(ep, -ECANCELED);
		return;
	}
	if (ep->passive) {
		grant(ep);
		if (ep->phase != PH_UP)
			return;
	} else if (list_empty(&ep->poll_link)) {
		/* completions that came while connecting (the peer's grant
		 * among them) were left in the CQ and their CQ event is
		 * spent: poll in this pass */
		list_add_tail(&ep->ctx->polls, &ep->poll_link);
		ep->ctx->pending = 1;
	}
	rdmamsg__ep_set_state(ep, EPS_UP);
	if (ep->p.peer_ms)
		rdmamsg__timer_start(ep->ctx, &ep->ka_timer, ep->p.peer_ms / 3);
	LOG_INFO("endpoint %p connected (frag %u, max %zu, credits %d)",
		 (void *)ep, ep->frag, ep->max_msg, ep->credits);
	ep->connect_reported = 1;
	if (ep->cbs.on_connect)
		ep->cbs.on_connect(ep, 0, 0, pdata, len, ep->arg);
}

/* rdmamsg__ep_connect_failed -- report a failed connect attempt once */
void rdmamsg__ep_connect_failed(struct rdmamsg_ep *ep, int status, int reason,
				const void *pdata, size_t len)
{
	if (ep->phase == PH_DOWN)
		return;
	if (ep->phase == PH_UP) {
		rdmamsg__ep_down(ep, status);
		return;
	}
	rdmamsg__timer_stop(ep->ctx, &ep->conn_timer);
	hs_done(ep);
	ep->phase = PH_DOWN;
	ep->disc_seen = 1;
	qp_error(ep);
	if (ep->closing) {
		rdmamsg__ep_defer(ep);
		return;
	}
	rdmamsg__ep_set_state(ep, EPS_DOWN);
	LOG_INFO("endpoint %p: connect failed: %s (reason %d)", (void *)ep,
		 rdmamsg_strerror(status), reason);
	ep->connect_reported = 1;
	if (ep->cbs.on_connect)
		ep->cbs.on_connect(ep, status, reason, pdata, len, ep->arg);
}

/* rdmamsg__ep_down -- an established connection is gone: flush, report */
void rdmamsg__ep_down(struct rdmamsg_ep *ep, int status)
{
	if (ep->phase != PH_UP) {
		if (ep->phase != PH_DOWN)
			rdmamsg__ep_connect_failed(ep, status, 0, NULL, 0);
		return;
	}
	ep->phase = PH_DOWN;
	rdmamsg__timer_stop(ep->ctx, &ep->ka_timer);
	rdmamsg__timer_stop(ep->ctx, &ep->ring_timer);
	/* DREQ to the peer; the QP goes to error and flushes its WRs */
	ep->ctx->ops->disconnect(ep->id);
	qp_error(ep);
	if (ep->xf)
		rdmamsg__xfer_down(ep, status);
	if (ep->closing) {
		rdmamsg__ep_defer(ep);
		return;
	}
	rdmamsg__ep_set_state(ep, EPS_DOWN);
	rdmamsg__ep_cancel_backlog(ep, -ECANCELED);
	LOG_INFO("endpoint %p down: %s", (void *)ep, rdmamsg_strerror(status));
	if (!ep->down_reported) {
		ep->down_reported = 1;
		if (ep->cbs.on_disconnect)
			ep->cbs.on_disconnect(ep, status, ep->arg);
	}
}

/* conn_timer_fire -- the connect attempt took too long */
static void conn_timer_fire(struct rdmamsg__timer *t)
{
	struct rdmamsg_ep *ep = container_of(t, struct rdmamsg_ep, conn_timer);

	rdmamsg__ep_connect_failed(ep, -ETIMEDOUT, 0, NULL, 0);
}

/* ka_timer_fire -- keep-alive tick: detect a silent peer, stay audible */
static void ka_timer_fire(struct rdmamsg__timer *t)
{
	struct rdmamsg_ep *ep = container_of(t, struct rdmamsg_ep, ka_timer);
	uint64_t now = rdmamsg__now_ns();
	uint64_t limit = (uint64_t)ep->p.peer_ms * 1000000ull;

	if (ep->phase != PH_UP || ep->closing)
		return;
	/* completions not yet polled count as signs of life */
	rdmamsg__ep_poll(ep);
	if (ep->phase != PH_UP)
		return;
	if (now - ep->last_rx > limit) {
		LOG_NOTE("endpoint %p: peer silent for %u ms", (void *)ep,
			 ep->p.peer_ms);
		rdmamsg__ep_down(ep, -ETIMEDOUT);
		return;
	}
	if (now - ep->last_tx >= limit / 3)
		rdmamsg__ep_send_ctl(ep, W_KEEPALIVE);
	rdmamsg__timer_start(ep->ctx, &ep->ka_timer, ep->p.peer_ms / 3);
}

/* close_timer_fire -- stop waiting for the peer and the flush */
static void close_timer_fire(struct rdmamsg__timer *t)
{
	struct rdmamsg_ep *ep = container_of(t, struct rdmamsg_ep, close_timer);

	ep->close_timed_out = 1;
	rdmamsg__ep_defer(ep);
}

/* rdmamsg__ep_free -- release everything; the endpoint is gone */
void rdmamsg__ep_free(struct rdmamsg_ep *ep)
{
	struct rdmamsg_ctx *ctx = ep->ctx;

	rdmamsg__timer_stop(ctx, &ep->conn_timer);
	rdmamsg__timer_stop(ctx, &ep->ka_timer);
	rdmamsg__timer_stop(ctx, &ep->close_timer);
	rdmamsg__timer_stop(ctx, &ep->ring_timer);
	hs_done(ep);
	if (ep->qp)
		ctx->ops->destroy_cm_qp(ep->id);
	ep->qp = NULL;
	if (ep->srq) {
		/* the QP is gone: its window goes back to the SRQ (its
		 * buffers stay posted for the next endpoint) */
		rdmamsg__ep_srq_drop_early(ep);
		if (ep->srq_mapped)
			rdmamsg__qpmap_del(&ctx->ifc.qps, ep->qpn);
		if (ep->srq_win)
			rdmamsg__srq_release(ep->srq, ep->nrx);
		ep->srq_mapped = ep->srq_win = 0;
	}
	rdmamsg__iface_detach(ep);
	free(ep->early);
	if (ep->id)
		ctx->ops->destroy_id(ep->id);
	if (ep->xf)
		rdmamsg__xfer_free(ep);
	free_bufs(ep);
	if (ep->srq)
		rdmamsg__srq_put(ep->srq);
	list_del(&ep->poll_link);
	list_del(&ep->xwait_link);
	list_del(&ep->defer_link);
	list_del(&ep->link);
	free(ep);
	/* idle slabs beyond the pool's idle size go back to the system */
	rdmamsg__pool_shrink(ctx);
}

/* rdmamsg__ep_bye_recv -- the peer said goodbye: a clean close */
void rdmamsg__ep_bye_recv(struct rdmamsg_ep *ep)
{
	ep->bye_seen = 1;
	if (ep->phase == PH_UP && !ep->closing) {
		LOG_INFO("endpoint %p: the peer closed", (void *)ep);
		rdmamsg__ep_down(ep, 0);
	}
}

/* rdmamsg__ep_peer_disconnected -- the fabric says the connection is gone:
 * read what the peer sent before (its goodbye among it), then it is a
 * clean close only if the goodbye came */
void rdmamsg__ep_peer_disconnected(struct rdmamsg_ep *ep)
{
	int i;

	ep->disc_seen = 1;
	for (i = 0; i < 1024 && ep->phase == PH_UP && ep->qp; i++)
		if (!rdmamsg__iface_poll(ep->ctx))
			break;
	if (ep->phase == PH_UP)
		rdmamsg__ep_down(ep, ep->closing    ? -ECANCELED
				     : ep->bye_seen ? 0
						    : -ECONNRESET);
	else if (ep->phase != PH_DOWN)
		rdmamsg__ep_connect_failed(ep, -ECONNRESET, 0, NULL, 0);
}

/* close_up -- a closing endpoint that is still connected: linger (send
 * what is queued), say goodbye, and once the goodbye has completed take
 * the connection down; the close timer bounds it all.  True while it
 * waits. */
static int close_up(struct rdmamsg_ep *ep)
{
	if (ep->close_timed_out)
		goto down;
	if (ep->lingering) {
		if (ep->bl_head)
			return 1; /* completions come back here */
		ep->lingering = 0;
	}
	rdmamsg__ep_cancel_backlog(ep, -ECANCELED);
	if (!ep->bye_posted) {
		if (rdmamsg__ep_send_bye(ep)) {
			LOG_INFO("endpoint %p: goodbye waits (ctl %u, sq %u)",
				 (void *)ep, ep->ctl_credits,
				 (unsigned int)(ep->sq_head - ep->sq_tail));
			return 1; /* no send slot yet: a completion frees one */
		}
		LOG_DBG("endpoint %p: goodbye posted", (void *)ep);
		ep->bye_posted = 1;
		ep->bye_seq = ep->sq_head - 1;
	}
	if (ep->sq_tail <= ep->bye_seq)
		return 1;
down:
	rdmamsg__ep_down(ep, -ECANCELED);
	return 0;
}

/* cancel_slots -- posted sends the flush did not report: -ECANCELED */
static void cancel_slots(struct rdmamsg_ep *ep)
{
	while (ep->sq_tail < ep->sq_head)
		rdmamsg__ep_complete_slots(ep, ep->sq_tail, -ECANCELED);
}

/* rdmamsg__ep_step -- advance a closing endpoint; free it when done */
void rdmamsg__ep_step(struct rdmamsg_ep *ep)
{
	struct rdmamsg_ctx *ctx = ep->ctx;
	void (*cb)(struct rdmamsg_ep *, void *);
	void *arg;

	if (!ep->closing)
		return;
	if (ep->phase == PH_UP) {
		if (ep->qp) {
			rdmamsg__ep_poll(ep);
			rdmamsg__ep_flush(ep); /* lingering: the backlog */
		}
		if (ep->phase == PH_UP && close_up(ep))
			return;
	}
	rdmamsg__ep_cancel_backlog(ep, -ECANCELED);
	if (ep->qp)
		rdmamsg__ep_poll(ep); /* flush completions */
	if (!ep->close_timed_out &&
	    (ep->sq_tail != ep->sq_head || !ep->disc_seen))
		return; /* a CQ or CM event, or the timer, comes back */
	cancel_slots(ep);
	cb = ep->close_cb;
	arg = ep->arg;
	/* every operation has completed; memory goes only after the cb */
	rdmamsg__ep_set_state(ep, EPS_CLOSED);
	if (cb)
		cb(ep, arg);
	rdmamsg__ep_free(ep);
	rdmamsg__loop_unref(ctx);
}

/* rdmamsg_ep_close -- asynchronous close (see rdmamsg.h) */
RDMAMSG_EXPORT int rdmamsg_ep_close(struct rdmamsg_ep *ep,
				    void (*close_cb)(struct rdmamsg_ep *ep,
						     void *arg))
{
	if (!ep)
		return -EINVAL;
	if (ep->closing)
		return -EALREADY;
	ep->closing = 1;
	ep->close_cb = close_cb;
	rdmamsg__ep_set_state(ep, EPS_DRAINING);
	rdmamsg__timer_stop(ep->ctx, &ep->conn_timer);
	rdmamsg__timer_stop(ep->ctx, &ep->ka_timer);
	rdmamsg__timer_stop(ep->ctx, &ep->ring_timer);
	if (ep->phase == PH_UP) {
		/* goodbye first (rdmamsg__ep_step); with linger, after what
		 * is queued */
		ep->lingering = ep->p.linger;
	} else if (ep->phase != PH_DOWN) {
		ep->phase = PH_DOWN;
		ep->disc_seen = 1;
		if (ep->qp) {
			struct ibv_qp_attr qa;

			memset(&qa, 0, sizeof(qa));
			qa.qp_state = IBV_QPS_ERR;
			ep->ctx->ops->modify_qp(ep->qp, &qa, IBV_QP_STATE);
		}
	}
	rdmamsg__timer_start(ep->ctx, &ep->close_timer, ep->p.close_ms);
	rdmamsg__ep_defer(ep);
	return 0;
}

/* rdmamsg_ep_get_state -- the endpoint's state */
RDMAMSG_EXPORT int rdmamsg_ep_get_state(const struct rdmamsg_ep *ep,
					enum rdmamsg_ep_state *state)
{
	if (!ep || !state)
		return -EINVAL;
	*state = rdmamsg__ep_st_public(ep->st);
	return 0;
}

/* rdmamsg_ep_get_max_msg_size -- the negotiated maximum */
RDMAMSG_EXPORT int rdmamsg_ep_get_max_msg_size(const struct rdmamsg_ep *ep,
					       size_t *size)
{
	if (!ep || !size)
		return -EINVAL;
	if (!ep->max_msg)
		return -ENOTCONN;
	*size = ep->max_msg;
	return 0;
}

/* rdmamsg_connect -- start an active connection */
RDMAMSG_EXPORT int rdmamsg_connect(struct rdmamsg_ctx *ctx, const char *addr,
				   const struct rdmamsg_ep_attr *attr,
				   const struct rdmamsg_ep_cbs *cbs, void *arg,
				   struct rdmamsg_ep **epp)
{
	struct sockaddr_storage ss;
	struct rdmamsg_ep *ep;
	int ret;

	if (!ctx || !addr || !cbs || !epp)
		return -EINVAL;
	ret = rdmamsg__addr_parse(addr, &ss);
	if (ret)
		return ret;
	if (((struct sockaddr_in *)&ss)->sin_port == 0)
		return -EINVAL;
	ret = rdmamsg__ep_new(ctx, attr, cbs, arg, &ep);
	if (ret)
		return ret;
	/* the active side posts its receive buffers before connecting */
	ret = rdmamsg__ep_rx_fill(ep);
	if (ret) {
		rdmamsg__ep_free(ep);
		return ret;
	}
	ret = rdmamsg__cm_start_connect(ep, (struct sockaddr *)&ss);
	if (ret) {
		rdmamsg__ep_free(ep);
		return ret;
	}
	rdmamsg__timer_start(ctx, &ep->conn_timer, ep->p.connect_ms);
	list_add_tail(&ctx->eps, &ep->link);
	rdmamsg__loop_ref(ctx);
	*epp = ep;
	return 0;
}
