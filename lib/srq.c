/* SPDX-License-Identifier: MIT */
/*
 * srq.c -- shared receive queues: the public calls, the SRQ's buffers
 * (from the context's pool, posted in batches) and the endpoints' credit
 * windows over them.
 *
 * Credits: an endpoint on an SRQ keeps the credit scheme of its own ring
 * (msg.c): its peer may have recv_depth data and RDMAMSG_CTL_CREDITS
 * control messages in flight, no more.  That window is reserved on the
 * SRQ when the endpoint's QP is made (-ENOBUFS past max_bufs), and the
 * SRQ's posted buffers always cover the sum of the reserved windows:
 * buffers are allocated as the sum grows, never per reconnect, and a
 * freed endpoint's window goes back at once (its buffers stay posted for
 * the next endpoint).  A consumed buffer is reposted before its credit is
 * returned to the sender, so at any time the buffers posted are at least
 * the messages in flight: no sender meets an empty SRQ (no RNR), and no
 * sender waits on another's traffic (each has its own window).  The SRQ
 * limit (IBV_EVENT_SRQ_LIMIT_REACHED) is armed as a safety net: should a
 * repost fail, the buffers left over are posted again when the event
 * comes (and on the next SRQ completion).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "internal.h"
#include "lane.h"
#include "proto.h"

#define SRQ_MIN_BUFS   8
#define SRQ_MAX_BUFS   (1u << 20)
#define SRQ_MIN_SIZE   64
#define SRQ_MAX_SIZE   (1u << 20)
#define SRQ_POST_BATCH 32
#define SRQ_LEND_SHARE 16 /* at most max_bufs / 16 lent (srq_take) */

/* srq_arm -- arm the limit event at a quarter of the reserved buffers */
static void srq_arm(struct rdmamsg_srq *srq)
{
	struct ibv_srq_attr a = {0};
	uint32_t lim = (srq->reserved + srq->extra) / 4;

	if (!lim || srq->posted <= lim || lim == srq->limit)
		return;
	a.srq_limit = lim;
	if (srq->ctx->ops->modify_srq(srq->srq, &a, IBV_SRQ_LIMIT) == 0)
		srq->limit = lim;
}

/* rdmamsg__srq_post -- post buffers idx[0..n) in batches; what could not
 * be posted waits in idle for the next refill */
int rdmamsg__srq_post(struct rdmamsg_srq *srq, const uint32_t *idx, uint32_t n)
{
	struct ibv_recv_wr wr[SRQ_POST_BATCH], *bad;
	struct ibv_sge sge[SRQ_POST_BATCH];
	uint32_t i, k;
	int ret = 0;

	while (n) {
		k = n > SRQ_POST_BATCH ? SRQ_POST_BATCH : n;
		for (i = 0; i < k; i++) {
			struct rdmamsg_buf *b = srq->bufs[idx[i]];

			sge[i].addr = (uintptr_t)(b->data - RDMAMSG_HDR);
			sge[i].length = (uint32_t)(RDMAMSG_HDR + srq->buf_size);
			sge[i].lkey = b->lkey;
			wr[i].wr_id = srq->wrid_base | idx[i];
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
			wr[i].next = i + 1 < k ? &wr[i + 1] : NULL;
		}
		bad = NULL;
		ret = ibv_post_srq_recv(srq->srq, wr, &bad);
		if (RDMAMSG_UNLIKELY(ret)) {
			/* the ones from bad on were not posted */
			uint32_t done = bad ? (uint32_t)(bad - wr) : 0;

			srq->posted += done;
			LOG_ERR("ibv_post_srq_recv: %d (%u buffers wait)", ret,
				n - done);
			for (i = done; i < n; i++)
				srq->idle[srq->nidle++] = idx[i];
			return -ret;
		}
		srq->posted += k;
		idx += k;
		n -= k;
	}
	return 0;
}

/* rdmamsg__srq_refill -- post the buffers a failed post left over */
void rdmamsg__srq_refill(struct rdmamsg_srq *srq)
{
	uint32_t n = srq->nidle;

	if (!n)
		return;
	srq->nidle = 0;
	rdmamsg__srq_post(srq, srq->idle, n);
}

/* srq_grow -- buffers allocated and posted until want (at most max_bufs)
 * are there; how many there are */
static uint32_t srq_grow(struct rdmamsg_srq *srq, uint32_t want)
{
	uint32_t idx[SRQ_POST_BATCH], k = 0;

	if (want > srq->max_bufs)
		want = srq->max_bufs;
	while (srq->nbufs < want) {
		if (rdmamsg__buf_get(srq->ctx, srq->buf_size, BUF_LIB,
				     &srq->bufs[srq->nbufs]))
			break;
		idx[k++] = srq->nbufs++;
		if (k == SRQ_POST_BATCH) {
			rdmamsg__srq_post(srq, idx, k);
			k = 0;
		}
	}
	if (k)
		rdmamsg__srq_post(srq, idx, k);
	return srq->nbufs;
}

/* srq_take -- up to k extra data credits from the SRQ's surplus.  At
 * most a sixteenth of max_bufs is lent: a peer gives lent credits back
 * only as it sends, so an idle one keeps them, and they must never keep
 * new endpoints' guaranteed windows out (those fill the other 15/16). */
static uint32_t srq_take(struct rdmamsg_srq *srq, uint32_t k)
{
	uint32_t used = srq->reserved + srq->extra, have;
	uint32_t cap = srq->max_bufs / SRQ_LEND_SHARE;

	if (k > cap - (srq->extra < cap ? srq->extra : cap))
		k = cap - (srq->extra < cap ? srq->extra : cap);
	if (!k)
		return 0;
	have = srq_grow(srq, used + k);
	k = have > used ? (have - used < k ? have - used : k) : 0;
	srq->extra += k;
	return k;
}

/* rdmamsg__srq_reserve -- a lane's guaranteed window of w buffers,
 * allocated and posted (the lane calls it at open).  -ENOBUFS when the
 * windows and the credits lent beyond them leave no room in max_bufs,
 * -ENOMEM when the pool is short (nothing reserved) */
int rdmamsg__srq_reserve(struct rdmamsg_srq *srq, uint32_t w)
{
	uint32_t used = srq->reserved + srq->extra;

	if (w > srq->max_bufs - used) {
		LOG_ERR("SRQ %p full: %u of %u buffers held, %u more asked",
			(void *)srq, used, srq->max_bufs, w);
		return -ENOBUFS;
	}
	if (srq_grow(srq, used + w) < used + w)
		return -ENOMEM;
	srq->reserved += w;
	srq->nep++;
	srq_arm(srq);
	return 0;
}

/* rdmamsg__srq_release -- a lane's window back (its QP is gone) */
void rdmamsg__srq_release(struct rdmamsg_srq *srq, uint32_t w)
{
	srq->reserved -= w;
	srq->nep--;
}

/* rdmamsg__srq_want -- a passive session whose lane reserved only its
 * guaranteed window (one data credit and the control ones) wants x more
 * data credits, lent from the surplus as far as it goes */
void rdmamsg__srq_want(struct rdmamsg_ep *ep, uint32_t x)
{
	ep->srq_extra = 0;
	ep->srq_withheld = x;
	ep->srq->withheld += x;
}

/* rdmamsg__srq_unlend -- the session lets its lane go: what it was lent
 * and what it waited for go back */
void rdmamsg__srq_unlend(struct rdmamsg_ep *ep)
{
	struct rdmamsg_srq *srq = ep->srq;

	srq->extra -= ep->srq_extra;
	srq->withheld -= ep->srq_withheld;
	ep->srq_extra = ep->srq_withheld = 0;
}

/* rdmamsg__srq_grant -- the passive side's first grant: the guaranteed
 * data credit and what the surplus gives of the rest */
uint32_t rdmamsg__srq_grant(struct rdmamsg_ep *ep)
{
	struct rdmamsg_srq *srq = ep->srq;
	uint32_t k = srq_take(srq, ep->srq_withheld);

	ep->srq_withheld -= k;
	ep->srq_extra += k;
	srq->withheld -= k;
	return 1 + k;
}

/* rdmamsg__srq_credit -- a data buffer of ep's was consumed and reposted:
 * the credits to return for it.  The receiver decides (withholding needs
 * no revocation): while others wait for credits, an endpoint holding
 * lent ones gives one up (returns nothing, keeps at least its guaranteed
 * one); else it gets its credit back plus what it waits for, as far as
 * the surplus goes.  An endpoint with its whole window reserved (active
 * side) lends and waits for nothing: one for one. */
uint32_t rdmamsg__srq_credit(struct rdmamsg_ep *ep)
{
	struct rdmamsg_srq *srq = ep->srq;
	uint32_t k;

	if (ep->srq_extra && srq->withheld > ep->srq_withheld) {
		ep->srq_extra--;
		srq->extra--;
		ep->srq_withheld++;
		srq->withheld++;
		return 0;
	}
	if (!ep->srq_withheld)
		return 1;
	k = srq_take(srq, ep->srq_withheld);
	ep->srq_withheld -= k;
	ep->srq_extra += k;
	srq->withheld -= k;
	return 1 + k;
}

/* srq_free -- the SRQ, its buffers, its slot */
static void srq_free(struct rdmamsg_srq *srq)
{
	struct rdmamsg_ctx *ctx = srq->ctx;
	uint32_t i;

	rdmamsg__dc_srq_free(ctx, srq); /* its DCTs, kept till now */
	if (srq->srq)
		ctx->ops->destroy_srq(srq->srq);
	for (i = 0; i < srq->nbufs; i++)
		if (srq->bufs[i])
			rdmamsg__buf_put(srq->bufs[i]);
	if (srq->handle)
		rdmamsg__idt_del(&ctx->ifc.srqs, srq->handle);
	list_del(&srq->link);
	free(srq->bufs);
	free(srq->idle);
	free(srq);
	rdmamsg__pool_shrink(ctx);
}

/* srq_close_step -- a closed SRQ no endpoint uses (ctx->closes): its
 * callback from the loop, never inside the call that closed it
 * (rdmamsg(7)), then its memory */
static void srq_close_step(struct rdmamsg__closing *c)
{
	struct rdmamsg_srq *srq =
		container_of(c, struct rdmamsg_srq, close_step);
	struct rdmamsg_ctx *ctx = srq->ctx;

	if (srq->close_cb)
		srq->close_cb(srq, srq->close_arg);
	srq_free(srq);
	rdmamsg__loop_unref(ctx);
}

/* rdmamsg__srq_put -- an endpoint made with srq is freed: a closed SRQ's
 * close ends in the next pass once the last one is (held in the loop
 * like an endpoint's close: rdmamsg_ctx_destroy says -EBUSY till then) */
void rdmamsg__srq_put(struct rdmamsg_srq *srq)
{
	if (--srq->refs || !srq->closing)
		return;
	srq->close_step.step = srq_close_step;
	list_add_tail(&srq->ctx->closes, &srq->close_step.link);
	rdmamsg__loop_ref(srq->ctx);
	rdmamsg__loop_kick(srq->ctx);
}

/* rdmamsg__srq_of_wrid -- the SRQ an SRQ receive's wr_id names, or NULL
 * (closed since) */
struct rdmamsg_srq *rdmamsg__srq_of_wrid(struct rdmamsg_ctx *ctx,
					 uint64_t wr_id)
{
	const struct rdmamsg__idt *t = &ctx->ifc.srqs;
	uint32_t tag = rdmamsg__wrid_lane(wr_id);
	uint32_t i = (uint32_t)wr_id >> RDMAMSG_SRQ_SLOT_SHIFT;

	if (i == 0 || i >= t->cap)
		return NULL;
	if ((t->e[i].gen & RDMAMSG__WRID_TAG_GEN) !=
	    tag >> RDMAMSG__WRID_TAG_GEN_SHIFT)
		return NULL;
	return t->e[i].p;
}

/* rdmamsg__srq_limit_event -- IBV_EVENT_SRQ_LIMIT_REACHED on ibsrq:
 * post what waits, arm again */
void rdmamsg__srq_limit_event(struct rdmamsg_ctx *ctx, void *ibsrq)
{
	struct rdmamsg__list *pos, *tmp;

	list_for_each_safe (pos, tmp, &ctx->srqs) {
		struct rdmamsg_srq *srq =
			container_of(pos, struct rdmamsg_srq, link);

		if ((void *)srq->srq != ibsrq)
			continue;
		srq->limit_events++;
		srq->limit = 0; /* the event disarmed it */
		LOG_INFO("SRQ %p: limit reached (%u posted of %u held)",
			 (void *)srq, srq->posted, srq->reserved + srq->extra);
		rdmamsg__srq_refill(srq);
		srq_arm(srq);
	}
}

/* rdmamsg_srq_create -- a shared receive queue on ctx */
RDMAMSG_EXPORT int rdmamsg_srq_create(struct rdmamsg_ctx *ctx,
				      const struct rdmamsg_srq_attr *attr,
				      struct rdmamsg_srq **srqp)
{
	struct ibv_srq_init_attr ia;
	struct rdmamsg_srq *srq;
	uint64_t h;
	int ret;

	if (!ctx || !attr || !srqp || attr->max_bufs < SRQ_MIN_BUFS ||
	    attr->max_bufs > SRQ_MAX_BUFS || attr->buf_size < SRQ_MIN_SIZE ||
	    attr->buf_size > SRQ_MAX_SIZE)
		return -EINVAL;
	if (ctx->dattr.max_srq <= 0)
		return -ENOTSUP;
	if (ctx->dattr.max_srq_wr > 0 &&
	    attr->max_bufs > (unsigned int)ctx->dattr.max_srq_wr) {
		LOG_ERR("an SRQ of %u buffers: device %s allows %d "
			"(max_srq_wr)",
			attr->max_bufs, ctx->devname, ctx->dattr.max_srq_wr);
		return -EINVAL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return -ENOMEM;
	srq->ctx = ctx;
	srq->max_bufs = attr->max_bufs;
	srq->buf_size = attr->buf_size;
	list_init(&srq->link);
	srq->bufs = calloc(srq->max_bufs, sizeof(*srq->bufs));
	srq->idle = calloc(srq->max_bufs, sizeof(*srq->idle));
	if (!srq->bufs || !srq->idle) {
		ret = -ENOMEM;
		goto err;
	}
	ret = rdmamsg__idt_add(&ctx->ifc.srqs, srq, &h);
	if (ret) {
		ret = ret == -ENOSPC ? -ENOBUFS : ret;
		goto err;
	}
	srq->handle = h;
	srq->wrid_base =
		(uint64_t)(((uint32_t)(h >> 32) & RDMAMSG__WRID_TAG_GEN)
			   << RDMAMSG__WRID_TAG_GEN_SHIFT)
			<< RDMAMSG__WRID_TAG_SHIFT |
		(uint64_t)(uint32_t)h << RDMAMSG_SRQ_SLOT_SHIFT;
	memset(&ia, 0, sizeof(ia));
	ia.srq_context = srq;
	ia.attr.max_wr = srq->max_bufs;
	ia.attr.max_sge = 1;
	srq->srq = ctx->ops->create_srq(ctx->pd, &ia);
	if (!srq->srq) {
		ret = rdmamsg__errno(ENOMEM);
		LOG_ERR("ibv_create_srq(%u) failed: %d", srq->max_bufs, ret);
		goto err;
	}
	list_add_tail(&ctx->srqs, &srq->link);
	*srqp = srq;
	return 0;

err:
	srq_free(srq);
	return ret;
}

/* rdmamsg_srq_close -- no new endpoints; close_cb from the loop once the
 * last one is freed, then the SRQ */
RDMAMSG_EXPORT int rdmamsg_srq_close(struct rdmamsg_srq *srq,
				     void (*close_cb)(struct rdmamsg_srq *srq,
						      void *arg),
				     void *arg)
{
	if (!srq)
		return -EINVAL;
	if (srq->closing)
		return -EALREADY;
	srq->closing = 1;
	srq->close_cb = close_cb;
	srq->close_arg = arg;
	srq->refs++;
	rdmamsg__srq_put(srq);
	return 0;
}

/* rdmamsg_srq_query -- counters */
RDMAMSG_EXPORT int rdmamsg_srq_query(const struct rdmamsg_srq *srq,
				     struct rdmamsg_srq_stats *st)
{
	size_t per;

	if (!srq || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	st->endpoints = srq->nep;
	st->reserved = srq->reserved + srq->extra;
	st->bufs = srq->nbufs;
	st->posted = srq->posted;
	per = srq->nbufs && srq->bufs[0]
		      ? RDMAMSG_HEADROOM +
				((size_t)1 << (srq->bufs[0]->cls +
					       RDMAMSG_MIN_CLASS_SHIFT))
		      : 0;
	st->registered = per * srq->nbufs;
	st->limit_events = srq->limit_events;
	return 0;
}

/* rdmamsg_ep_attr_set_srq -- endpoints made with attr use srq */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_srq(struct rdmamsg_ep_attr *attr,
					   struct rdmamsg_srq *srq)
{
	if (!attr || (srq && srq->closing))
		return -EINVAL;
	attr->p.srq = srq;
	/* the SRQ may be closed and freed before attr is used */
	attr->p.srq_handle = srq ? srq->handle : 0;
	return 0;
}

/* ---- qp_num -> endpoint --------------------------------------------- */

/* qpmap_grow -- twice the slots, every key placed again */
static int qpmap_grow(struct rdmamsg__qpmap *m)
{
	uint32_t cap = m->cap ? m->cap * 2 : 64, i, j;
	uint32_t *keys = calloc(cap, sizeof(*keys));
	void **vals = calloc(cap, sizeof(*vals));

	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	for (i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		for (j = (m->keys[i] * 2654435761u) & (cap - 1); keys[j];
		     j = (j + 1) & (cap - 1))
			;
		keys[j] = m->keys[i];
		vals[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = cap;
	return 0;
}

/* rdmamsg__qpmap_add -- qpn names p (qpn not in the map) */
int rdmamsg__qpmap_add(struct rdmamsg__qpmap *m, uint32_t qpn, void *p)
{
	uint32_t k = qpn + 1, i;

	if ((m->n + 1) * 2 > m->cap && qpmap_grow(m))
		return -ENOMEM;
	for (i = (k * 2654435761u) & (m->cap - 1); m->keys[i];
	     i = (i + 1) & (m->cap - 1))
		;
	m->keys[i] = k;
	m->vals[i] = p;
	m->n++;
	return 0;
}

/* rdmamsg__qpmap_del -- qpn gone (backward shift: no tombstones) */
void rdmamsg__qpmap_del(struct rdmamsg__qpmap *m, uint32_t qpn)
{
	uint32_t k = qpn + 1, mask = m->cap - 1, i, j, h;

	if (!m->cap)
		return;
	for (i = (k * 2654435761u) & mask; m->keys[i] != k; i = (i + 1) & mask)
		if (!m->keys[i])
			return;
	m->keys[i] = 0;
	m->vals[i] = NULL;
	m->n--;
	for (j = (i + 1) & mask; m->keys[j]; j = (j + 1) & mask) {
		h = (m->keys[j] * 2654435761u) & mask;
		/* the entry at j may move to i if i lies in [h, j) */
		if (((j - h) & mask) >= ((j - i) & mask)) {
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			m->keys[j] = 0;
			m->vals[j] = NULL;
			i = j;
		}
	}
}

/* rdmamsg__qpmap_fini -- the map's memory */
void rdmamsg__qpmap_fini(struct rdmamsg__qpmap *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = NULL;
	m->vals = NULL;
	m->cap = m->n = 0;
}

/* rdmamsg__srq_drop_early -- SRQ receives a lane held before its
 * ESTABLISHED event and never handed up: their buffers go back to their
 * SRQ */
void rdmamsg__srq_drop_early(struct rdmamsg__lane *lane)
{
	uint32_t i;

	for (i = 0; i < lane->nearly; i++) {
		const struct ibv_wc *wc = &lane->early[i];
		struct rdmamsg_srq *srq;
		uint32_t idx;

		if (!rdmamsg__wrid_is_srq(wc->wr_id))
			continue;
		srq = rdmamsg__srq_of_wrid(lane->ctx, wc->wr_id);
		idx = (uint32_t)wc->wr_id & RDMAMSG_RX_IDX_MASK;
		if (!srq || idx >= srq->nbufs)
			continue;
		srq->posted--;
		rdmamsg__srq_post(srq, &idx, 1);
	}
	lane->nearly = 0;
}
