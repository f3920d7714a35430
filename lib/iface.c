/* SPDX-License-Identifier: MIT */
/*
 * iface.c -- the per-context interface: one CQ for every endpoint of the
 * context, completions routed to their endpoint from the wr_id (lane.h),
 * and the progress step that visits only endpoints that had completions
 * (or whose transfer layer waits for memory), never the idle ones.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "dispatch.h"
#include "internal.h"
#include "lane.h"

#define POLL_BUDGET 64 /* batches per call: the rest next pass */
#define CQ_MIN	    1024

/* rdmamsg__iface_init -- no CQ yet: the first endpoint makes it */
void rdmamsg__iface_init(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;

	ifc->cq = NULL;
	ifc->cq_size = ifc->cq_reserved = ifc->cq_stale = 0;
	ifc->unacked = 0;
	ifc->event = ifc->polling = 0;
	ifc->stale_wcs = 0;
	rdmamsg__idt_init(&ifc->eps, RDMAMSG__WRID_TAG_INDEX);
}

/* rdmamsg__iface_fini -- every endpoint is gone: the CQ goes */
void rdmamsg__iface_fini(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;

	if (ifc->cq) {
		if (ifc->unacked)
			ctx->ops->ack_cq_events(ifc->cq, ifc->unacked);
		ctx->ops->destroy_cq(ifc->cq);
	}
	rdmamsg__idt_fini(&ifc->eps);
	ifc->cq = NULL;
}

/* cq_room -- a CQ that holds need more entries: made, or grown */
static int cq_room(struct rdmamsg_ctx *ctx, uint32_t need)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;
	uint64_t want = (uint64_t)ifc->cq_reserved + ifc->cq_stale + need;
	uint64_t max =
		ctx->dattr.max_cqe > 0 ? (uint64_t)ctx->dattr.max_cqe : CQ_MIN;
	uint64_t size = ifc->cq_size ? ifc->cq_size : CQ_MIN;
	int ret;

	if (ifc->cq && want <= ifc->cq_size)
		return 0;
	while (size < want)
		size *= 2;
	if (size > max)
		size = max;
	if (size < want) {
		LOG_ERR("completion queue full: %llu entries wanted, the "
			"device has %llu",
			(unsigned long long)want, (unsigned long long)max);
		return -ENOBUFS;
	}
	if (!ifc->cq) {
		ifc->cq = ctx->ops->create_cq(ctx->verbs, (int)size, ctx,
					      ctx->cc, 0);
		if (!ifc->cq) {
			ret = rdmamsg__errno(ENOMEM);
			LOG_ERR("ibv_create_cq(%llu) failed: %d",
				(unsigned long long)size, ret);
			return ret;
		}
		ret = ibv_req_notify_cq(ifc->cq, 0);
		if (ret) {
			ctx->ops->destroy_cq(ifc->cq);
			ifc->cq = NULL;
			return -ret;
		}
	} else {
		ret = ctx->ops->resize_cq(ifc->cq, (int)size);
		if (ret) {
			LOG_ERR("ibv_resize_cq(%llu) failed: %d",
				(unsigned long long)size, ret);
			return -ret;
		}
	}
	/* the provider may round up */
	ifc->cq_size = ifc->cq->cqe > 0 && (uint64_t)ifc->cq->cqe >= size
			       ? (uint32_t)ifc->cq->cqe
			       : (uint32_t)size;
	return 0;
}

/* rdmamsg__iface_attach -- ep joins the CQ with room for need work
 * requests; its wr_id tag is set */
int rdmamsg__iface_attach(struct rdmamsg_ep *ep, uint32_t need)
{
	struct rdmamsg_ctx *ctx = ep->ctx;
	struct rdmamsg__iface *ifc = &ctx->ifc;
	uint64_t h;
	int ret;

	ret = cq_room(ctx, need);
	if (ret)
		return ret;
	ret = rdmamsg__idt_add(&ifc->eps, ep, &h);
	if (ret)
		return ret == -ENOSPC ? -ENOBUFS : ret;
	ep->handle = h;
	ep->wrid_tag = (uint64_t)rdmamsg__wrid_tag(h)
		       << RDMAMSG__WRID_TAG_SHIFT;
	ep->cq_need = need;
	ifc->cq_reserved += need;
	return 0;
}

/* rdmamsg__iface_detach -- ep leaves (its QP is destroyed): completions
 * of it still in the CQ find nothing; its room stays counted until the CQ
 * has been seen empty */
void rdmamsg__iface_detach(struct rdmamsg_ep *ep)
{
	struct rdmamsg__iface *ifc = &ep->ctx->ifc;

	if (!ep->handle)
		return;
	rdmamsg__idt_del(&ifc->eps, ep->handle);
	ifc->cq_reserved -= ep->cq_need;
	ifc->cq_stale += ep->cq_need;
	ep->handle = 0;
	ep->wrid_tag = 0;
	ep->cq_need = 0;
}

/* rdmamsg__iface_poll -- drain the CQ (bounded), each run of an
 * endpoint's completions to it (it reposts its receive buffers as one
 * batch); touched endpoints go on ctx->polls for their flush.  1 when the budget ran out
 * with completions left, else 0. */
int rdmamsg__iface_poll(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;
	struct ibv_wc wc[RDMAMSG_POLL_BATCH];
	int budget = POLL_BUDGET, n = 0, i, j;

	if (!ifc->cq || ifc->polling)
		return 0;
	ifc->polling = 1;
	while (budget-- > 0) {
		n = ibv_poll_cq(ifc->cq, RDMAMSG_POLL_BATCH, wc);
		if (n <= 0)
			break;
		/* runs of one endpoint's completions, handed over at once */
		for (i = 0; i < n; i += j) {
			struct rdmamsg_ep *ep =
				rdmamsg__wrid_route(&ifc->eps, wc[i].wr_id);

			if (RDMAMSG_UNLIKELY(!ep)) {
				j = 1;
				ifc->stale_wcs++;
				continue;
			}
			j = (int)rdmamsg__ep_wcs(ep, &wc[i], (uint32_t)(n - i));
			if (RDMAMSG_UNLIKELY(!j)) {
				j = 1; /* a freed endpoint's, same tag */
				ifc->stale_wcs++;
				continue;
			}
			if (list_empty(&ep->poll_link))
				list_add_tail(&ctx->polls, &ep->poll_link);
		}
		if (n < RDMAMSG_POLL_BATCH)
			break;
	}
	if (n >= 0 && n < RDMAMSG_POLL_BATCH)
		ifc->cq_stale = 0; /* seen empty: freed endpoints' are gone */
	ifc->polling = 0;
	if (budget < 0) {
		ctx->pending = 1;
		return 1;
	}
	return 0;
}

/* rdmamsg__iface_progress -- a progress pass's completion work: re-arm
 * after an event, drain, then flush each endpoint that had completions
 * and each whose transfer layer waits (for pool memory), once */
void rdmamsg__iface_progress(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;
	struct rdmamsg__list *pos, *tmp, polls;

	if (!ifc->cq)
		return;
	if (ifc->event) {
		ifc->event = 0;
		if (ifc->unacked >= 16) {
			ctx->ops->ack_cq_events(ifc->cq, ifc->unacked);
			ifc->unacked = 0;
		}
		ibv_req_notify_cq(ifc->cq, 0);
	}
	/* poll after arming: completions that raced the last arm, or that
	 * a busy-polling caller wants without waiting for an event */
	rdmamsg__iface_poll(ctx);
	list_init(&polls);
	if (!list_empty(&ctx->polls)) {
		polls = ctx->polls;
		polls.next->prev = &polls;
		polls.prev->next = &polls;
		list_init(&ctx->polls);
	}
	list_for_each_safe (pos, tmp, &polls) {
		struct rdmamsg_ep *ep =
			container_of(pos, struct rdmamsg_ep, poll_link);

		list_del(pos);
		if (RDMAMSG_UNLIKELY(ep->nearly))
			rdmamsg__ep_replay_early(ep);
		rdmamsg__ep_flush(ep);
		if (RDMAMSG_UNLIKELY(ep->xf || !list_empty(&ep->xwait_link)))
			rdmamsg__ep_xwait(ep);
		if (ep->closing)
			rdmamsg__ep_defer(ep);
	}
	list_for_each_safe (pos, tmp, &ctx->xwait) {
		struct rdmamsg_ep *ep =
			container_of(pos, struct rdmamsg_ep, xwait_link);

		rdmamsg__ep_flush(ep);
		rdmamsg__ep_xwait(ep);
	}
}
