/* SPDX-License-Identifier: MIT */
/*
 * iface.c -- the per-context interface: one CQ for every lane of the
 * context (a second one only when the first reached the device's
 * max_cqe), completions routed to their lane from the wr_id (lane.h; an
 * SRQ receive to the RC lane of its QP), completions held for a lane
 * until it is released, and the progress step that visits only the
 * sessions whose lanes had completions (through their ready() up call),
 * never the idle ones.  It knows lanes, never sessions.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "internal.h"
#include "lane.h"

#define POLL_BUDGET   64 /* batches per call: the rest next pass */
#define CQ_MIN	      1024
#define IFACE_MAX_CQS 256 /* CQs of max_cqe entries each */
/* messages of packs per call, the rest next pass too (checked after each
 * full batch): a budget of completions alone lets a flood of packed small
 * messages run up to 128 callbacks a completion, 262,144 a pass */
#define PACK_BUDGET (POLL_BUDGET * RDMAMSG_POLL_BATCH)

/* rdmamsg__iface_init -- no CQ yet: the first lane makes one */
void rdmamsg__iface_init(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;
	const char *e;
	uint32_t i;

	ifc->cqs = NULL;
	ifc->ncq = 0;
	ifc->nstash = 0;
	ifc->events = 0;
	ifc->polling = 0;
	ifc->stale_wcs = 0;
	ifc->max_cqe = 0;
	/* test hook: a small device limit, so that tests spread a context's
	 * endpoints over several CQs */
	e = getenv("RDMAMSG_TEST_MAX_CQE");
	if (e)
		ifc->max_cqe = (uint32_t)atoi(e);
	/* test hook: the path of a device without ibv_create_cq_ex */
	e = getenv("RDMAMSG_TEST_NO_CQ_EX");
	ifc->no_cqx = e && atoi(e);
	rdmamsg__idt_init(&ifc->eps, RDMAMSG__WRID_TAG_INDEX);
	rdmamsg__idt_init(&ifc->srqs, RDMAMSG_SRQ_MAX);
	ifc->qps.keys = NULL;
	ifc->qps.vals = NULL;
	ifc->qps.cap = ifc->qps.n = 0;
	for (i = 0; i < RDMAMSG_POLL_BATCH; i++) {
		memset(&ifc->rwr[i], 0, sizeof(ifc->rwr[i]));
		ifc->rwr[i].sg_list = &ifc->rsge[i];
		ifc->rwr[i].num_sge = 1;
		ifc->rwr[i].next =
			i + 1 < RDMAMSG_POLL_BATCH ? &ifc->rwr[i + 1] : NULL;
	}
}

/* rdmamsg__iface_fini -- every lane is gone: the CQs go */
void rdmamsg__iface_fini(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;
	uint32_t i;

	for (i = 0; i < ifc->ncq; i++) {
		struct rdmamsg__icq *q = ifc->cqs[i];

		if (q->unacked)
			ctx->ops->ack_cq_events(q->cq, q->unacked);
		ctx->ops->destroy_cq(q->cq);
		free(q);
	}
	free(ifc->cqs);
	ifc->cqs = NULL;
	ifc->ncq = 0;
	rdmamsg__idt_fini(&ifc->eps);
	rdmamsg__idt_fini(&ifc->srqs);
	rdmamsg__qpmap_fini(&ifc->qps);
}

/* rdmamsg__iface_cq -- the interface's CQ that holds cq (from a CQ event
 * or an async event), or NULL */
struct rdmamsg__icq *rdmamsg__iface_cq(struct rdmamsg_ctx *ctx, const void *cq)
{
	uint32_t i;

	for (i = 0; i < ctx->ifc.ncq; i++)
		if ((const void *)ctx->ifc.cqs[i]->cq == cq)
			return ctx->ifc.cqs[i];
	return NULL;
}

/* cq_create -- a CQ of size entries on the completion channel for q:
 * extended and single-threaded where the device can (a context belongs to
 * the one thread that drives its loop, rdmamsg.h: the provider need not
 * lock it), else ibv_create_cq */
static struct ibv_cq *cq_create(struct rdmamsg_ctx *ctx, int size,
				struct rdmamsg__icq *q)
{
	struct ibv_cq_init_attr_ex a;
	struct ibv_cq_ex *x;

	if (!ctx->ifc.no_cqx) {
		memset(&a, 0, sizeof(a));
		a.cqe = (uint32_t)size;
		a.cq_context = q;
		a.channel = ctx->cc;
		/* what the lanes read: SRQ receives route by qp_num,
		 * multicast by the source QP, DC by the immediate */
		a.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |
			     IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP;
		a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
		a.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
		x = ibv_create_cq_ex(ctx->verbs, &a);
		if (!x) {
			/* a device with extended CQs but not the hint (providers
			 * answer EOPNOTSUPP or EINVAL to a flag they lack) */
			a.comp_mask = 0;
			a.flags = 0;
			x = ibv_create_cq_ex(ctx->verbs, &a);
		}
		if (x) {
			q->cqx = x;
			return ibv_cq_ex_to_cq(x);
		}
		/* no ibv_create_cq_ex on this device, or not with these
		 * wc_flags: ibv_create_cq, which the lanes' ibv_poll_cq needs
		 * anyway; a device without it is not asked again */
		if (errno == EOPNOTSUPP || errno == ENOSYS)
			ctx->ifc.no_cqx = 1;
	}
	return ctx->ops->create_cq(ctx->verbs, size, q, ctx->cc, 0);
}

/* cq_new -- one more CQ of size entries on the completion channel */
static int cq_new(struct rdmamsg_ctx *ctx, uint64_t size)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;
	struct rdmamsg__icq **v, *q;
	int ret;

	v = realloc(ifc->cqs, (size_t)(ifc->ncq + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	ifc->cqs = v;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->cq = cq_create(ctx, (int)size, q);
	if (!q->cq) {
		ret = rdmamsg__errno(ENOMEM);
		LOG_ERR("creating a CQ of %llu entries failed: %d",
			(unsigned long long)size, ret);
		free(q);
		return ret;
	}
	LOG_INFO("CQ %u: %u entries, %s", ctx->ifc.ncq, q->cq->cqe,
		 q->cqx ? "ibv_create_cq_ex" : "ibv_create_cq");
	/* not armed: rdmamsg__iface_arm() arms it when the caller is about
	 * to block, a busy-polling caller never does */
	q->size = q->cq->cqe > 0 && (uint64_t)q->cq->cqe >= size
			  ? (uint32_t)q->cq->cqe
			  : (uint32_t)size;
	ifc->cqs[ifc->ncq++] = q;
	return 0;
}

/* cq_max -- the most entries one of the context's CQs may have */
static uint64_t cq_max(const struct rdmamsg_ctx *ctx)
{
	uint64_t max =
		ctx->dattr.max_cqe > 0 ? (uint64_t)ctx->dattr.max_cqe : CQ_MIN;

	if (ctx->ifc.max_cqe && ctx->ifc.max_cqe < max)
		max = ctx->ifc.max_cqe;
	return max;
}

/* cq_resize -- q grown (ibv_resize_cq, by doubling) to room for need more
 * entries, up to max: 0, or -ENOBUFS and q as it was */
static int cq_resize(struct rdmamsg_ctx *ctx, struct rdmamsg__icq *q,
		     uint32_t need, uint64_t max)
{
	uint64_t want = (uint64_t)q->reserved + q->stale + need, size;

	for (size = q->size; size < want && size < max; size *= 2)
		;
	if (size > max)
		size = max;
	if (size < want || ctx->ops->resize_cq(q->cq, (int)size))
		return -ENOBUFS;
	/* the provider may round up */
	q->size = q->cq->cqe > 0 && (uint64_t)q->cq->cqe >= size
			  ? (uint32_t)q->cq->cqe
			  : (uint32_t)size;
	return 0;
}

/* cq_room -- the index of a CQ with room for need more entries: the first
 * with room, else the last one grown (ibv_resize_cq) up to the device's
 * limit, else a new one */
static int cq_room(struct rdmamsg_ctx *ctx, uint32_t need, uint32_t *idx)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;
	uint64_t max = cq_max(ctx), size;
	struct rdmamsg__icq *q;
	uint32_t i;
	int ret;

	if (need > max) {
		LOG_ERR("a lane needs %u completion entries, the device "
			"has %llu",
			need, (unsigned long long)max);
		return -ENOBUFS;
	}
	/* first fit: room that freed lanes left is used again */
	for (i = 0; i < ifc->ncq; i++) {
		q = ifc->cqs[i];
		if ((uint64_t)q->reserved + q->stale + need <= q->size) {
			*idx = i;
			return 0;
		}
	}
	if (ifc->ncq &&
	    cq_resize(ctx, ifc->cqs[ifc->ncq - 1], need, max) == 0) {
		*idx = ifc->ncq - 1;
		return 0;
	}
	if (ifc->ncq >= IFACE_MAX_CQS) {
		LOG_ERR("completion queues full (%u of %llu entries)",
			IFACE_MAX_CQS, (unsigned long long)max);
		return -ENOBUFS;
	}
	for (size = CQ_MIN; size < need; size *= 2)
		;
	ret = cq_new(ctx, size > max ? max : size);
	if (ret)
		return ret;
	if (ifc->ncq > 1)
		LOG_WARN("completion queue %u made: the others are full "
			 "(%llu entries each)",
			 ifc->ncq, (unsigned long long)max);
	*idx = ifc->ncq - 1;
	return 0;
}

/* rdmamsg__iface_attach -- a lane joins a CQ with room for need work
 * requests (lane->icq); its wr_id tag is set */
int rdmamsg__iface_attach(struct rdmamsg__lane *lane, uint32_t need)
{
	struct rdmamsg_ctx *ctx = lane->ctx;
	struct rdmamsg__iface *ifc = &ctx->ifc;
	uint32_t idx;
	uint64_t h;
	int ret;

	ret = cq_room(ctx, need, &idx);
	if (ret)
		return ret;
	ret = rdmamsg__idt_add(&ifc->eps, lane, &h);
	if (ret)
		return ret == -ENOSPC ? -ENOBUFS : ret;
	_Static_assert(RDMAMSG_WRID_TAG_BITS ==
			       RDMAMSG__WRID_LANE_MASK
				       << RDMAMSG__WRID_LANE_SHIFT,
		       "internal.h and lane.h agree on the wr_id tag");
	lane->handle = h;
	lane->wrid_tag = (uint64_t)rdmamsg__wrid_tag(h)
			 << RDMAMSG__WRID_TAG_SHIFT;
	lane->cq_need = need;
	lane->icq = ifc->cqs[idx];
	lane->icq->reserved += need;
	return 0;
}

/* rdmamsg__iface_grow -- need more entries for the lane on the CQ it is on
 * (a receive window that grows: msg.c), that CQ grown if it must be;
 * -ENOBUFS when it cannot be, nothing taken (a lane stays on its CQ) */
int rdmamsg__iface_grow(struct rdmamsg__lane *lane, uint32_t need)
{
	struct rdmamsg__icq *q = lane->icq;

	if (!q || ((uint64_t)q->reserved + q->stale + need > q->size &&
		   cq_resize(lane->ctx, q, need, cq_max(lane->ctx))))
		return -ENOBUFS;
	q->reserved += need;
	lane->cq_need += need;
	return 0;
}

/* rdmamsg__iface_detach -- the lane leaves (its QP is destroyed):
 * completions of it still in the CQ find nothing; its room stays counted
 * until the CQ has been seen empty.  A lane never attached (a group
 * closed before its join came back) has no context yet: nothing to do */
void rdmamsg__iface_detach(struct rdmamsg__lane *lane)
{
	struct rdmamsg__iface *ifc;

	if (!lane->handle)
		return;
	ifc = &lane->ctx->ifc;
	rdmamsg__idt_del(&ifc->eps, lane->handle);
	lane->icq->reserved -= lane->cq_need;
	lane->icq->stale += lane->cq_need;
	lane->handle = 0;
	lane->wrid_tag = 0;
	lane->cq_need = 0;
	lane->icq = NULL;
}

/* rdmamsg__iface_ready -- visit the lane's session (its ready() up call)
 * in this progress pass */
void rdmamsg__iface_ready(struct rdmamsg__lane *lane)
{
	if (list_empty(&lane->ready_link)) {
		list_add_tail(&lane->ctx->polls, &lane->ready_link);
		lane->ctx->pending = 1;
	}
}

/* rdmamsg__iface_hold -- a lane that holds its completions (an active
 * connection before its ESTABLISHED event was read) keeps them until it
 * is released (at most one per posted work request: the array is sized
 * once, for all of them) */
void rdmamsg__iface_hold(struct rdmamsg__lane *lane, const struct ibv_wc *wc,
			 uint32_t n)
{
	if (n > lane->early_cap - lane->nearly) {
		uint32_t cap = lane->cq_need + RDMAMSG_POLL_BATCH;
		struct ibv_wc *e;

		if (cap < lane->nearly + n)
			cap = lane->nearly + n;
		e = realloc(lane->early, (size_t)cap * sizeof(*e));
		if (!e) {
			LOG_ERR("lane %p: no memory for early completions",
				(void *)lane);
			lane->cbs->down(lane->owner, -ENOMEM);
			return;
		}
		lane->early = e;
		lane->early_cap = cap;
	}
	memcpy(lane->early + lane->nearly, wc, (size_t)n * sizeof(*wc));
	lane->nearly += n;
}

/* rdmamsg__iface_release -- the lane no longer holds its completions:
 * the held ones are handed over in this progress pass */
void rdmamsg__iface_release(struct rdmamsg__lane *lane)
{
	lane->hold = 0;
	rdmamsg__iface_ready(lane);
}

/* rdmamsg__iface_replay -- the completions a lane held, to it now */
void rdmamsg__iface_replay(struct rdmamsg__lane *lane)
{
	uint32_t i, n = lane->nearly, k;

	if (RDMAMSG_LIKELY(!n) || lane->hold)
		return;
	lane->nearly = 0;
	for (i = 0; i < n; i += k) {
		k = n - i < RDMAMSG_POLL_BATCH ? n - i : RDMAMSG_POLL_BATCH;
		if (RDMAMSG_UNLIKELY(
			    rdmamsg__wrid_is_srq(lane->early[i].wr_id)))
			k = rdmamsg__lane_srq_wcs(lane->ctx, lane->early + i,
						  k);
		else
			k = lane->ops->wcs(lane, lane->early + i, k);
		if (!k)
			break; /* not possible: each was checked when kept */
	}
}

/* route -- runs of one lane's completions, each handed to its lane at
 * once; touched lanes go on ctx->polls (inline: once per completion run
 * of the busy path) */
static inline __attribute__((always_inline)) void route(struct rdmamsg_ctx *ctx,
							const struct ibv_wc *wc,
							uint32_t n)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;
	uint32_t i, j;

	for (i = 0; i < n; i += j) {
		struct rdmamsg__lane *lane =
			rdmamsg__wrid_route(&ifc->eps, wc[i].wr_id);

		if (RDMAMSG_UNLIKELY(!lane)) {
			if (rdmamsg__wrid_is_srq(wc[i].wr_id)) {
				/* an SRQ receive: names its buffer, not its
				 * lane */
				j = rdmamsg__lane_srq_wcs(ctx, &wc[i], n - i);
				continue;
			}
			j = 1;
			ifc->stale_wcs++;
			continue;
		}
		j = lane->ops->wcs(lane, &wc[i], n - i);
		if (RDMAMSG_UNLIKELY(!j)) {
			j = 1; /* a freed lane's */
			ifc->stale_wcs++;
			continue;
		}
		if (list_empty(&lane->ready_link))
			list_add_tail(&ctx->polls, &lane->ready_link);
	}
}

/* drain -- drain the CQs (bounded), each run of a lane's completions to
 * its wcs() (it reposts its receive buffers as one batch); touched lanes
 * go on ctx->polls for their session's ready().  1 when the budget ran
 * out with completions left, else 0.  Inline in the progress pass. */
static inline __attribute__((always_inline)) int drain(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;
	struct ibv_wc wc[RDMAMSG_POLL_BATCH];
	int more = 0, n, budget;
	uint64_t start;
	uint32_t c;

	if (ifc->polling)
		return 0;
	/* stamped once in: rdmamsg__iface_packed counts for this drain */
	start = ++ifc->seq;
	ifc->polling = 1;
	if (RDMAMSG_UNLIKELY(ifc->nstash)) {
		/* polled by arm(): older than anything in the CQs now */
		n = (int)ifc->nstash;
		ifc->nstash = 0;
		memcpy(wc, ifc->stash, (size_t)n * sizeof(*wc));
		route(ctx, wc, (uint32_t)n);
	}
	for (c = 0; c < ifc->ncq; c++) {
		struct rdmamsg__icq *q = ifc->cqs[c];

		budget = POLL_BUDGET;
		do {
			n = ibv_poll_cq(q->cq, RDMAMSG_POLL_BATCH, wc);
			if (n > 0)
				route(ctx, wc, (uint32_t)n);
		} while (n == RDMAMSG_POLL_BATCH && --budget &&
			 (ifc->packed_seq != start ||
			  ifc->packed < PACK_BUDGET));
		if (n == RDMAMSG_POLL_BATCH)
			more = 1; /* a budget ran out */
		else if (n >= 0)
			q->stale = 0; /* seen empty: freed lanes' gone */
	}
	ifc->polling = 0;
	if (more) {
		ctx->pending = 1;
		return 1;
	}
	ifc->drained = start;
	return 0;
}

/* rdmamsg__iface_poll -- drain the CQs (drain) outside a progress pass's
 * own */
int rdmamsg__iface_poll(struct rdmamsg_ctx *ctx)
{
	return drain(ctx);
}

/* spend_events -- the arms that CQ events spent (one per request), their
 * events acknowledged in batches; out of line: a busy-polling caller's
 * CQs are never armed */
static __attribute__((noinline)) void spend_events(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;
	uint32_t c;

	ifc->events = 0;
	for (c = 0; c < ifc->ncq; c++) {
		struct rdmamsg__icq *q = ifc->cqs[c];

		if (!q->event)
			continue;
		q->event = 0;
		q->armed = 0;
		if (q->unacked >= 16) {
			ctx->ops->ack_cq_events(q->cq, q->unacked);
			q->unacked = 0;
		}
	}
}

/* rdmamsg__iface_progress -- a progress pass's completion work: note the
 * arms that events spent, drain, then the ready() up call of each lane
 * that had completions, once.  Nothing is re-armed here: a caller that
 * busy-polls never blocks, so arming (a system call's worth of work on
 * hardware, and a provider's wake-ups of a waiter that is not there) waits
 * for rdmamsg__iface_arm(), just before the caller sleeps. */
void rdmamsg__iface_progress(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;
	struct rdmamsg__list *pos, *tmp, polls;
	struct rdmamsg__lane *lane;

	if (RDMAMSG_UNLIKELY(ifc->events))
		spend_events(ctx);
	drain(ctx);
	if (list_empty(&ctx->polls))
		return;
	if (RDMAMSG_LIKELY(ctx->polls.next == ctx->polls.prev)) {
		/* one lane (a ping-pong): no list to move */
		pos = ctx->polls.next;
		list_init(&ctx->polls);
		list_init(pos);
		lane = container_of(pos, struct rdmamsg__lane, ready_link);
		if (RDMAMSG_UNLIKELY(lane->nearly))
			rdmamsg__iface_replay(lane);
		lane->cbs->ready(lane->owner);
		return;
	}
	/* lanes that a ready() puts back on ctx->polls wait for the next
	 * pass */
	polls = ctx->polls;
	polls.next->prev = &polls;
	polls.prev->next = &polls;
	list_init(&ctx->polls);
	list_for_each_safe (pos, tmp, &polls) {
		lane = container_of(pos, struct rdmamsg__lane, ready_link);
		list_del(pos);
		if (RDMAMSG_UNLIKELY(lane->nearly))
			rdmamsg__iface_replay(lane);
		lane->cbs->ready(lane->owner);
	}
}

/* rdmamsg__iface_arm -- the caller is about to block on the completion
 * channel: arm each CQ whose arm an event spent (or that was never
 * armed), then poll once more, because a completion that came after the
 * last drain and before the arm raises no event (poll, arm, poll).  What
 * that poll finds is kept for the next drain, in order.  1: completions
 * are waiting (the caller must not block), 0: blocking is safe. */
int rdmamsg__iface_arm(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__iface *ifc = &ctx->ifc;
	int armed = 0, n;
	uint32_t c;

	if (ifc->nstash)
		return 1;
	for (c = 0; c < ifc->ncq; c++) {
		struct rdmamsg__icq *q = ifc->cqs[c];

		if (q->armed)
			continue;
		if (ibv_req_notify_cq(q->cq, 0))
			return 1; /* cannot wait for it: keep polling */
		q->armed = 1;
		armed = 1;
	}
	if (!armed)
		return 0; /* no drain since the arms: nothing slipped by */
	for (c = 0; c < ifc->ncq; c++) {
		n = ibv_poll_cq(ifc->cqs[c]->cq, RDMAMSG_POLL_BATCH,
				ifc->stash);
		if (n > 0) {
			ifc->nstash = (uint32_t)n;
			ifc->drained = 0; /* poll_after must not skip them */
			return 1;
		}
		if (n < 0)
			return 1;
	}
	return 0;
}
