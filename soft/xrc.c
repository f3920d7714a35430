/* SPDX-License-Identifier: MIT */
/* xrc.c -- XRC: domains, XRC SRQs, target QPs and ibv_open_qp */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "net.h"
#include "softrdma.h"

/*
 * An XRC domain (ibv_open_xrcd) is an entry of the host registry: one per
 * file (st_dev, st_ino), as the kernel keeps one per inode, shared by
 * every process that opens that file's domain, or one of no file (fd
 * -1).  Its entry counts its holders by process, so that a process that
 * dies gives its share back (a holder whose process is gone is free).
 *
 * An XRC SRQ is an SRQ with a shared segment (srq.c), whose header names
 * its domain and PD; its number (ibv_get_srq_num) encodes its context's
 * registry slot and its segment id, so an initiator of any process maps
 * it.  An XRC target QP (IBV_QPT_XRC_RECV) is a registry QP naming its
 * domain: it has no queues of its own, no PD and no CQ (it is made on
 * the domain's own PD and CQ, which no completion reaches).  An XRC
 * initiator (IBV_QPT_XRC_SEND, dc.c) does the work of both HCAs, as a
 * DCI does: for each WR it finds its connected target, checks the SRQ the
 * WR names belongs to the target's domain, takes the SRQ's next WQE and
 * leaves the completion in the SRQ's outbox, which its context's pass
 * drains into the SRQ's CQ (soft_xrc_drain): qp_num the target's, src_qp
 * the initiator's.  A target on the network path (net.c) does the same
 * for an XRC SRQ of another process or context of its host, a packet at
 * a time: the WQE taken at a message's first packet, its completion HELD
 * in the outbox until its last (soft_xsrq_hold, soft_xsrq_release).
 *
 * ibv_open_qp gives a handle of a target QP (of this or another process)
 * by number; ibv_destroy_qp of its creator while handles are open keeps
 * the QP, hidden, until they are closed and the domain is closed here
 * (ibv_close_xrcd frees it then), as the kernel keeps a target QP while it
 * is open.  A handle modifies a target QP of its own process only (the
 * state of another's lives in that process): EOPNOTSUPP otherwise.
 */

SOFT_EXPORT int softrdma_xrc_srqn_ctx(uint32_t srqn);

struct ibv_qp *soft_create_qp_ex(struct ibv_context *context,
				 struct ibv_qp_init_attr_ex *attr);

#define XRC_SRQN_ID_BITS 12 /* SOFT_MAX_SRQ_IDS */

static struct soft_xrcd *to_sxrcd(struct ibv_xrcd *x)
{
	return soft_container_of(x, struct soft_xrcd, xrcd);
}

/* hold_live -- a holder whose process still runs */
static int hold_live(const struct soft_reg_xrcd *x, int i)
{
	return x->hold[i].n && soft_pid_alive(x->hold[i].pid, x->hold[i].start);
}

/* xrcd_live -- an entry some live process holds; registry lock held */
static int xrcd_live(const struct soft_reg_xrcd *x)
{
	int i;

	if (!x->id)
		return 0;
	for (i = 0; i < SOFT_XRCD_HOLD; i++)
		if (hold_live(x, i))
			return 1;
	return 0;
}

/* xrcd_hold -- count this process as a holder of x: 0, or ENOMEM when
 * its holders are all taken; registry lock held */
static int xrcd_hold(struct soft_reg_xrcd *x)
{
	int i, free_i = -1;

	for (i = 0; i < SOFT_XRCD_HOLD; i++) {
		if (x->hold[i].n && x->hold[i].pid == soft_self_pid &&
		    x->hold[i].start == soft_self_start) {
			x->hold[i].n++;
			return 0;
		}
		if (free_i < 0 && !hold_live(x, i))
			free_i = i;
	}
	if (free_i < 0)
		return ENOMEM;
	x->hold[free_i].pid = soft_self_pid;
	x->hold[free_i].start = soft_self_start;
	x->hold[free_i].n = 1;
	return 0;
}

/*
 * reg_xrcd_open -- the registry's domain of (dev, ino) (ino 0: a new one
 * of no file) into *slot, *id: 0, or EAGAIN (none, and no O_CREAT),
 * EINVAL (one, and O_EXCL), ENOMEM (the table or its holders full), as
 * ib_uverbs_open_xrcd
 */
static int reg_xrcd_open(uint64_t dev, uint64_t ino, int oflags, uint32_t *slot,
			 uint32_t *id)
{
	struct soft_reg *r = soft_reg;
	struct soft_reg_xrcd *x;
	int i, free_i = -1, err;

	soft_stripe_lock(&r->lock);
	for (i = 0; i < SOFT_MAX_XRCD; i++) {
		x = &r->xrcd[i];
		if (!xrcd_live(x)) {
			if (free_i < 0)
				free_i = i;
			continue;
		}
		if (ino && x->ino == ino && x->dev == dev)
			break;
	}
	if (i < SOFT_MAX_XRCD) {
		err = (oflags & O_EXCL) ? EINVAL : xrcd_hold(&r->xrcd[i]);
		if (!err) {
			*slot = (uint32_t)i;
			*id = r->xrcd[i].id;
		}
		goto out;
	}
	if (ino && !(oflags & O_CREAT)) {
		err = EAGAIN;
		goto out;
	}
	err = ENOMEM;
	if (free_i < 0)
		goto out;
	x = &r->xrcd[free_i];
	memset(x, 0, sizeof(*x));
	x->dev = dev;
	x->ino = ino;
	x->id = (r->xrcd_gen++ % 0xfffe + 1) << 8 | (uint32_t)free_i;
	xrcd_hold(x);
	*slot = (uint32_t)free_i;
	*id = x->id;
	err = 0;
out:
	pthread_mutex_unlock(&r->lock);
	return err;
}

/* reg_xrcd_close -- this process holds the domain once less */
static void reg_xrcd_close(uint32_t slot, uint32_t id)
{
	struct soft_reg_xrcd *x = &soft_reg->xrcd[slot];
	int i, live = 0;

	soft_stripe_lock(&soft_reg->lock);
	if (x->id == id) {
		for (i = 0; i < SOFT_XRCD_HOLD; i++)
			if (x->hold[i].n && x->hold[i].pid == soft_self_pid &&
			    x->hold[i].start == soft_self_start)
				x->hold[i].n--;
		live = xrcd_live(x);
		if (!live)
			x->id = 0;
	}
	pthread_mutex_unlock(&soft_reg->lock);
}

/* others_hold -- another live process holds the domain (a handle of
 * ibv_open_qp needs one: none, and no handle of another process is
 * left) */
static int others_hold(uint32_t slot, uint32_t id)
{
	const struct soft_reg_xrcd *x = &soft_reg->xrcd[slot];
	int i, r = 0;

	soft_stripe_lock(&soft_reg->lock);
	for (i = 0; x->id == id && i < SOFT_XRCD_HOLD && !r; i++)
		r = x->hold[i].pid != soft_self_pid && hold_live(x, i);
	pthread_mutex_unlock(&soft_reg->lock);
	return r;
}

/* soft_open_xrcd -- ibv_open_xrcd: checks of ibv_cmd_open_xrcd, then the
 * kernel's (a bad fd EBADF) */
struct ibv_xrcd *soft_open_xrcd(struct ibv_context *context,
				struct ibv_xrcd_init_attr *attr)
{
	struct soft_xrcd *x;
	struct stat st;
	uint64_t dev = 0, ino = 0;
	int err;

	if (!context || !attr) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
	    !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS)) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->fd != -1) {
		if (fstat(attr->fd, &st)) {
			errno = EBADF;
			return NULL;
		}
		dev = (uint64_t)st.st_dev;
		ino = (uint64_t)st.st_ino ? (uint64_t)st.st_ino : 1;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		errno = ENOMEM;
		return NULL;
	}
	x->pd = ibv_alloc_pd(context);
	if (!x->pd)
		goto free_x;
	x->cq = ibv_create_cq(context, 1, NULL, NULL, 0);
	if (!x->cq)
		goto free_pd;
	err = reg_xrcd_open(dev, ino, attr->oflags, &x->slot, &x->id);
	if (err) {
		errno = err;
		goto free_cq;
	}
	x->xrcd.context = context;
	x->ctx = to_sctx(context);
	return &x->xrcd;

free_cq:
	err = errno;
	ibv_destroy_cq(x->cq);
	errno = err;
free_pd:
	err = errno;
	ibv_dealloc_pd(x->pd);
	errno = err;
free_x:
	free(x);
	return NULL;
}

/* soft_close_xrcd -- EBUSY while an SRQ or a target QP of this handle
 * lives (a target kept for its handles is freed here once they are
 * closed, or no other process holds the domain: theirs died unclosed) */
int soft_close_xrcd(struct ibv_xrcd *ibx)
{
	struct soft_xrcd *x;
	struct soft_context *ctx;
	struct soft_list *l;
	struct soft_qp *qp;
	int gone, n;

	if (!ibx)
		return EINVAL;
	x = to_sxrcd(ibx);
	ctx = x->ctx;
	/* nothing but hidden targets holds this handle, and no other
	 * process the domain: their handles are gone with them */
	gone = !others_hold(x->slot, x->id);
	soft_lock(&ctx->lock);
	for (l = ctx->qps.next, n = 0; l != &ctx->qps; l = l->next) {
		qp = soft_container_of(l, struct soft_qp, link);
		n += qp->xrcd == x && qp->xrc_handle == 2;
	}
	gone = gone && x->refcnt == n;
	soft_unlock(&ctx->lock);
	for (;;) {
		soft_lock(&ctx->lock);
		for (l = ctx->qps.next, qp = NULL; l != &ctx->qps;
		     l = l->next, qp = NULL) {
			qp = soft_container_of(l, struct soft_qp, link);
			if (qp->xrcd == x && qp->xrc_handle == 2 &&
			    (gone ||
			     !atomic_load(
				     &soft_reg->qp[qp->reg_slot].xrc_opens)))
				break;
		}
		if (!qp)
			break;
		qp->xrc_handle = 0; /* destroyed for good now */
		soft_unlock(&ctx->lock);
		ibv_destroy_qp(&qp->qpx.qp_base);
	}
	if (x->refcnt) {
		soft_unlock(&ctx->lock);
		return EBUSY;
	}
	soft_unlock(&ctx->lock);
	reg_xrcd_close(x->slot, x->id);
	ibv_destroy_cq(x->cq);
	ibv_dealloc_pd(x->pd);
	free(x);
	return 0;
}

/* srqn_of -- an XRC SRQ's number: its context's registry slot + 1 above
 * its segment id - 1 (within 23 bits) */
static uint32_t srqn_of(const struct soft_srq *srq)
{
	return ((uint32_t)srq->ctx->reg_idx + 1) << XRC_SRQN_ID_BITS |
	       (srq->shm_id - 1);
}

/* softrdma_xrc_srqn_ctx -- the context slot an XRC SRQ number names, or
 * -1 (tests: a number no SRQ has) */
int softrdma_xrc_srqn_ctx(uint32_t srqn)
{
	uint32_t c = srqn >> XRC_SRQN_ID_BITS;

	if (!c || c > SOFT_MAX_CTX || srqn > 0xffffff)
		return -1;
	return (int)c - 1;
}

/* soft_xrc_srq_target -- the segment of XRC SRQ number srqn: its context
 * slot and id; 0, or -1 for a number no SRQ can have */
int soft_xrc_srq_target(uint32_t srqn, uint32_t *ctx_idx, uint32_t *id)
{
	int c = softrdma_xrc_srqn_ctx(srqn);

	if (c < 0)
		return -1;
	*ctx_idx = (uint32_t)c;
	*id = (srqn & ((1u << XRC_SRQN_ID_BITS) - 1)) + 1;
	return 0;
}

/*
 * soft_xsrq_map -- XRC SRQ number SRQN, of any process of this host, of
 * domain XRCD_ID, mapped into *r; its owner is the registry's (a live
 * process in the context slot the number names), not its segment's word.
 * 0, or -1: no SRQ of that domain has the number (its target NAKs an
 * invalid request)
 */
int soft_xsrq_map(uint32_t srqn, uint32_t xrcd_id, struct soft_srq_ref *r)
{
	uint32_t c, id;
	uint64_t start;
	int32_t pid;

	memset(r, 0, sizeof(*r));
	if (soft_xrc_srq_target(srqn, &c, &id))
		return -1;
	pid = atomic_load(&soft_reg->ctx[c].pid);
	start = soft_reg->ctx[c].start;
	if (!pid || !soft_pid_alive(pid, start) ||
	    soft_srq_ref_map(c, id, pid, start, r))
		return -1;
	if (!r->xrcd_id || r->xrcd_id != xrcd_id) {
		soft_srq_ref_unmap(r); /* another domain's, or not XRC */
		return -1;
	}
	r->srqn = srqn;
	return 0;
}

/* soft_xsrq_ok -- r (soft_xsrq_map) is still XRC SRQ r->srqn of domain
 * xrcd_id: its owner's context slot not taken by another process, its
 * segment's domain not cleared by its destroy */
int soft_xsrq_ok(const struct soft_srq_ref *r, uint32_t xrcd_id)
{
	const struct soft_reg_ctx *c = &soft_reg->ctx[r->ctx];

	return r->sh && atomic_load(&c->pid) == r->pid &&
	       c->start == r->start && r->sh->xrcd_id == xrcd_id;
}

/* xsrq_lock -- the segment lock of the mapped SRQ r, as an initiator
 * takes it (dc.c to_srq), waiting out its holder a while: 0, or -1 */
static int xsrq_lock(const struct soft_srq_ref *r)
{
	uint32_t z;
	int i;

	for (i = 0; i < 1000; i++) {
		z = 0;
		if (atomic_compare_exchange_strong_explicit(
			    &r->sh->lock, &z, 2, memory_order_acquire,
			    memory_order_relaxed))
			return 0;
		sched_yield();
	}
	return -1;
}

/*
 * soft_xsrq_hold -- a network target of this process takes the next WQE
 * of XRC SRQ r (another process's or context's, soft_xsrq_map) for a
 * message that arrives a packet at a time, for target QPN from initiator
 * SRC_QP: its SGEs into *w, its number into *idx.  Its completion is left
 * HELD (SOFT_CQE_HELD, naming the target) until soft_xsrq_release: the
 * owner's drain reports those after it meanwhile and this one when it is
 * released, or flushed once the target is gone (data.c srq_drain).  0;
 * 1: none posted (RNR), or the segment's lock not had; -1: its ring is
 * corrupt.
 */
int soft_xsrq_hold(struct soft_srq_ref *r, uint32_t qpn, uint32_t src_qp,
		   struct soft_rwqe *w, uint64_t *idx)
{
	struct soft_shm_srq_cqe *c;
	uint64_t prod;
	int ret;

	if (xsrq_lock(r))
		return 1;
	memset(w, 0, sizeof(*w));
	ret = soft_srq_ref_next(r, w->sge, &w->num_sge, idx, &prod);
	if (!ret) {
		c = soft_srq_ref_cqe(r, *idx);
		c->byte_len = 0;
		c->imm = 0;
		c->opcode = SOFT_OP_SEND;
		__atomic_store_n(&c->qpn, qpn, __ATOMIC_RELAXED);
		c->src_qp = src_qp;
		__atomic_store_n(&c->flags, SOFT_CQE_HELD, __ATOMIC_RELAXED);
		atomic_store_explicit(&r->sh->cons, *idx + 1,
				      memory_order_release);
	}
	atomic_store_explicit(&r->sh->lock, 0, memory_order_release);
	if (!ret)
		soft_srq_kick(r->sh, prod, *idx + 1, r->ctx);
	return ret;
}

/*
 * soft_xsrq_release -- the message of WQE idx of r (soft_xsrq_hold) ended
 * as wc says (its status, opcode, length and immediate): its completion
 * written, then no longer HELD (a release store the owner's drain reads
 * with acquire), and the owner woken if it waits
 */
void soft_xsrq_release(const struct soft_srq_ref *r, uint64_t idx,
		       const struct ibv_wc *wc, int solicited)
{
	struct soft_shm_srq_cqe *c = soft_srq_ref_cqe(r, idx);
	uint32_t flags = 0;

	if (wc->wc_flags & IBV_WC_WITH_IMM)
		flags |= SOFT_SF_IMM;
	if (wc->wc_flags & IBV_WC_WITH_INV)
		flags |= SOFT_SF_INV; /* imm: the rkey, as in the union */
	if (solicited)
		flags |= SOFT_SF_SOLICITED;
	if (wc->status != IBV_WC_SUCCESS)
		flags |= SOFT_CQE_STATUS((uint32_t)wc->status);
	c->byte_len = wc->byte_len;
	c->imm = wc->imm_data;
	c->opcode = wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM ? SOFT_OP_WRITE_IMM
							    : SOFT_OP_SEND;
	__atomic_store_n(&c->flags, flags, __ATOMIC_RELEASE);
	soft_wake_waiting(r->ctx);
}

/*
 * soft_xrc_srq_init -- make a new SRQ an XRC SRQ of attr's domain and CQ
 * (soft_create_srq_ex checked the mask): 0, or an errno (the SRQ is then
 * destroyed by the caller)
 */
int soft_xrc_srq_init(struct soft_srq *srq, struct ibv_srq_init_attr_ex *attr)
{
	struct soft_context *ctx = srq->ctx;
	struct soft_xrcd *x = to_sxrcd(attr->xrcd);

	if (x->ctx != ctx || attr->cq->context != &ctx->vctx.context)
		return EINVAL;
	if (!srq->shm)
		return ENOMEM; /* no segment: no initiator could reach it */
	soft_lock(&ctx->lock);
	if (soft_map_need(ctx)) {
		soft_unlock(&ctx->lock);
		return ENOMEM;
	}
	srq->xrcd = x;
	srq->xcq = to_scq(attr->cq);
	srq->xsrqn = srqn_of(srq);
	srq->shm->pd_id = srq->pd->pd_id;
	srq->shm->xrcd_id = x->id;
	x->refcnt++;
	srq->xcq->refcnt++;
	ctx->nxsrq++;
	soft_unlock(&ctx->lock);
	return 0;
}

/* soft_xrc_srq_fini -- an XRC SRQ goes: no initiator takes its WQEs
 * (its domain forgotten in the segment), its CQ and domain are free;
 * lock held */
void soft_xrc_srq_fini(struct soft_srq *srq)
{
	if (!srq->xrcd)
		return;
	if (srq->shm) /* initiators that keep it mapped see it gone */
		srq->shm->xrcd_id = 0;
	srq->xrcd->refcnt--;
	srq->xcq->refcnt--;
	srq->ctx->nxsrq--;
	srq->xrcd = NULL;
	srq->xcq = NULL;
}

/* soft_get_srq_num -- ibv_get_srq_num: an XRC SRQ's number, host-wide */
int soft_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct soft_srq *srq;

	if (!ibsrq || !srq_num)
		return EINVAL;
	srq = to_ssrq(ibsrq);
	*srq_num = srq->xcq ? srq->xsrqn : srq->srqn;
	return 0;
}

/* soft_xrc_drain -- the completions initiators left in the outboxes of
 * the context's XRC SRQs; lock held */
void soft_xrc_drain(struct soft_context *ctx)
{
	struct soft_list *l;
	struct soft_srq *srq;

	for (l = ctx->srqs.next; l != &ctx->srqs; l = l->next) {
		srq = soft_container_of(l, struct soft_srq, link);
		if (srq->xcq && srq->shm &&
		    atomic_load_explicit(&srq->shm->cons,
					 memory_order_relaxed) != srq->tail)
			soft_srq_drain(srq);
	}
}

/* xtgt_post_send, xtgt_post_recv -- a target has no queues */
static int xtgt_post_send(struct soft_qp *qp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad)
{
	(void)qp;
	*bad = wr;
	return EINVAL;
}

static int xtgt_post_recv(struct soft_qp *qp, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad)
{
	(void)qp;
	*bad = wr;
	return EINVAL;
}

/* xtgt_destroy -- its domain is free of it */
static void xtgt_destroy(struct soft_qp *qp)
{
	soft_lock(&qp->ctx->lock);
	if (qp->xrcd)
		qp->xrcd->refcnt--;
	qp->xrcd = NULL;
	soft_unlock(&qp->ctx->lock);
}

/* av_remote -- an address vector that leaves this host: another host's
 * GID, or in the IB mode a DLID none of this host's ports has (RoCE: an
 * AV without a GRH is soft_qp_modify's EINVAL, not ours) */
static int av_remote(const struct ibv_ah_attr *ah)
{
	if (!soft_link_ib && !ah->is_global)
		return 0;
	return !soft_ah_local(ah);
}

/*
 * soft_xrc_modify -- ibv_modify_qp of an XRC initiator or target: the
 * kernel's state table.  A primary or alternate path to another host (a
 * GID, or a LID in the IB mode) goes over the network with SOFTRDMA_NET=1
 * (the QP's to_rtr); without it, it is refused with EOPNOTSUPP rather than
 * left to time out or to reach this host's QP of that number
 */
int soft_xrc_modify(struct soft_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	/* to RTR or RTS, where paths are loaded (the state table refuses
	 * them elsewhere: EINVAL, soft_qp_modify's) */
	enum ibv_qp_state to =
		(mask & IBV_QP_STATE) ? attr->qp_state : qp->state;

	if ((to == IBV_QPS_RTR || to == IBV_QPS_RTS) && !soft_net_enabled() &&
	    (((mask & IBV_QP_AV) && av_remote(&attr->ah_attr)) ||
	     ((mask & IBV_QP_ALT_PATH) && av_remote(&attr->alt_ah_attr)))) {
		errno = EOPNOTSUPP;
		return EOPNOTSUPP;
	}
	return soft_qp_modify(qp, attr, mask);
}

/*
 * xtgt_to_rtr -- INIT->RTR of a target: an initiator of this host does
 * the target's work itself (dc.c's xrc_run); another host's is answered
 * by RC's network responder in the target's process (net.c), which takes
 * each message's WQE from the XRC SRQ its XRCETH names; lock held
 */
static void xtgt_to_rtr(struct soft_qp *qp)
{
	if (soft_ah_local(&qp->attr.ah_attr))
		return;
	soft_net_connect(qp, &soft_xtgt_net_ops);
}

/* xtgt_net_progress -- the network responder's share of a pass (IB mode:
 * the links followed, as an RC QP's, apm.c); lock held */
static void xtgt_net_progress(struct soft_qp *qp)
{
	if (soft_link_ib)
		soft_apm_check(qp);
	soft_net_progress(qp);
}

/* xtgt_net_reset -- back to RESET: off the network path (released by
 * qp_reset's soft_qp_disconnect); lock held */
static void xtgt_net_reset(struct soft_qp *qp)
{
	qp->ops = &soft_xtgt_ops;
}

/* an XRC target: the kernel's state table (XRC_TGT column), nothing to
 * progress (its initiators do the work, its SRQs' drain is the pass's) */
const struct soft_qp_ops soft_xtgt_ops = {
	.name = "xrc_tgt",
	.post_send = xtgt_post_send,
	.post_recv = xtgt_post_recv,
	.progress = soft_qp_op_nop,
	.flush = soft_qp_op_nop,
	.sq_release = soft_qp_op_nop,
	.modify = soft_xrc_modify,
	.to_rtr = xtgt_to_rtr,
	.reset = soft_qp_op_nop,
	.destroy = xtgt_destroy,
};

/* a target of an initiator on another host: RC's responder (net.c) */
const struct soft_qp_ops soft_xtgt_net_ops = {
	.name = "xrc_tgt-net",
	.post_send = xtgt_post_send,
	.post_recv = xtgt_post_recv,
	.progress = xtgt_net_progress,
	.flush = soft_net_progress,
	.sq_release = soft_qp_op_nop,
	.modify = soft_xrc_modify,
	.to_rtr = soft_qp_op_nop,
	.reset = xtgt_net_reset,
	.destroy = xtgt_destroy,
	.always_pass = 1,
};

/* xopen_modify -- a handle's modify: the target's own, where it is on
 * the handle's context (the creator's destroy only hides it while the
 * handle is open, so it stays) */
static int xopen_modify(struct soft_qp *h, struct ibv_qp_attr *attr, int mask)
{
	struct soft_qp *qp;
	int ok;

	soft_lock(&h->ctx->lock);
	qp = soft_qp_local_in(h->ctx, h->qpx.qp_base.qp_num);
	ok = qp && qp->type == IBV_QPT_XRC_RECV && qp->xrc_handle != 1;
	soft_unlock(&h->ctx->lock);
	if (!ok) {
		errno = EOPNOTSUPP;
		return EOPNOTSUPP;
	}
	return soft_xrc_modify(qp, attr, mask);
}

/* xopen_query -- a handle's view: the registry's state */
static int xopen_query(struct soft_qp *h, struct ibv_qp_attr *attr, int mask)
{
	struct soft_reg_qp e;

	(void)mask;
	if (soft_reg_qp_lookup(h->qpx.qp_base.qp_num, &e) < 0 ||
	    e.qp_type != IBV_QPT_XRC_RECV || e.xrcd_id != h->xrcd->id)
		return EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = (enum ibv_qp_state)atomic_load(&e.state);
	attr->cur_qp_state = attr->qp_state;
	attr->qp_access_flags = atomic_load(&e.access);
	return 0;
}

static void xopen_destroy(struct soft_qp *qp)
{
	(void)qp;
}

/* an ibv_open_qp handle: no queues, no segment; destroyed by
 * soft_xrc_close */
static const struct soft_qp_ops soft_xopen_ops = {
	.name = "xrc_open",
	.post_send = xtgt_post_send,
	.post_recv = xtgt_post_recv,
	.progress = soft_qp_op_nop,
	.flush = soft_qp_op_nop,
	.sq_release = soft_qp_op_nop,
	.modify = xopen_modify,
	.to_rtr = soft_qp_op_nop,
	.reset = soft_qp_op_nop,
	.destroy = xopen_destroy,
	.query = xopen_query,
};

/*
 * soft_xrc_create_qp -- ibv_create_qp_ex of an XRC QP: an initiator (a
 * PD and a send CQ, send queue only) or a target (its domain only), as
 * mlx5 takes them
 */
struct ibv_qp *soft_xrc_create_qp(struct ibv_context *context,
				  struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp_init_attr_ex a;
	struct soft_xrcd *x;
	struct ibv_qp *ibqp;
	struct soft_qp *qp;
	struct soft_reg_qp *e;

	if (!context) {
		errno = EINVAL;
		return NULL;
	}
	a = *attr;
	a.qp_type = IBV_QPT_RC;
	a.srq = NULL;
	if (attr->qp_type == IBV_QPT_XRC_SEND) {
		if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd ||
		    !attr->send_cq ||
		    (attr->comp_mask & IBV_QP_INIT_ATTR_XRCD)) {
			errno = EINVAL;
			return NULL;
		}
		/* RC's operations but IBA 1.5's atomic write, which XRC
		 * does not carry here (dc.c, net.c): refused at create, as
		 * a provider refuses what it lacks, not at each post */
		if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
		    (attr->send_ops_flags & IBV_QP_EX_WITH_ATOMIC_WRITE)) {
			errno = EOPNOTSUPP;
			return NULL;
		}
		if (!a.recv_cq)
			a.recv_cq = a.send_cq;
		a.cap.max_recv_wr = 0;
		a.cap.max_recv_sge = 0;
		ibqp = soft_create_qp_ex(context, &a);
		if (!ibqp)
			return NULL;
		if (soft_xrc_ini(to_sqp(ibqp))) {
			ibv_destroy_qp(ibqp);
			errno = ENOMEM;
			return NULL;
		}
		attr->cap = a.cap;
		attr->cap.max_recv_wr = 0;
		attr->cap.max_recv_sge = 0;
		ibqp->recv_cq = attr->recv_cq;
		return ibqp;
	}
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd ||
	    attr->xrcd->context != context ||
	    (attr->comp_mask &
	     ~(uint32_t)(IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_PD))) {
		errno = EINVAL;
		return NULL;
	}
	x = to_sxrcd(attr->xrcd);
	memset(&a.cap, 0, sizeof(a.cap));
	a.cap.max_send_wr = 1;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = x->pd;
	a.send_cq = a.recv_cq = x->cq;
	ibqp = soft_create_qp_ex(context, &a);
	if (!ibqp)
		return NULL;
	qp = to_sqp(ibqp);
	soft_lock(&qp->ctx->lock);
	soft_qp_retype(qp, IBV_QPT_XRC_RECV, &soft_xtgt_ops);
	qp->xrcd = x;
	x->refcnt++;
	memset(&qp->cap, 0, sizeof(qp->cap));
	/* what was given, as libibverbs keeps it (librdmacm gives a PD and
	 * CQs, and takes the PD back as the id's) */
	ibqp->pd = (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? attr->pd : NULL;
	ibqp->send_cq = attr->send_cq;
	ibqp->recv_cq = attr->recv_cq;
	ibqp->srq = NULL;
	e = &soft_reg->qp[qp->reg_slot];
	e->xrcd_id = x->id;
	atomic_store(&e->xrc_opens, 0);
	soft_unlock(&qp->ctx->lock);
	memset(&attr->cap, 0, sizeof(attr->cap));
	return ibqp;
}

/* soft_open_qp -- ibv_open_qp: a handle of a target QP of the domain
 * (checks of ibv_cmd_open_qp, then ib_open_qp's: EINVAL for no such
 * target in that domain) */
struct ibv_qp *soft_open_qp(struct ibv_context *context,
			    struct ibv_qp_open_attr *attr)
{
	const uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			      IBV_QP_OPEN_ATTR_TYPE;
	struct soft_reg_qp *e;
	struct soft_xrcd *x;
	struct soft_qp *h;
	uint32_t slot;
	int ok;

	if (!context || !attr) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & need) != need || !attr->xrcd ||
	    attr->xrcd->context != context ||
	    attr->qp_type != IBV_QPT_XRC_RECV) {
		errno = EINVAL;
		return NULL;
	}
	x = to_sxrcd(attr->xrcd);
	h = calloc(1, sizeof(*h));
	if (!h) {
		errno = ENOMEM;
		return NULL;
	}
	slot = attr->qp_num & (SOFT_MAX_QP - 1);
	e = &soft_reg->qp[slot];
	soft_stripe_lock(&soft_reg->lock);
	ok = attr->qp_num && e->qpn == attr->qp_num &&
	     e->qp_type == IBV_QPT_XRC_RECV && e->xrcd_id == x->id &&
	     soft_pid_alive(e->pid, e->start);
	if (ok)
		atomic_fetch_add(&e->xrc_opens, 1);
	pthread_mutex_unlock(&soft_reg->lock);
	if (!ok) {
		free(h);
		errno = EINVAL;
		return NULL;
	}
	h->ctx = to_sctx(context);
	h->ops = &soft_xopen_ops;
	h->type = IBV_QPT_XRC_RECV;
	h->xrc_handle = 1;
	h->xrcd = x;
	h->reg_slot = (int)slot;
	h->qpx.qp_base.context = context;
	h->qpx.qp_base.qp_context = attr->qp_context;
	h->qpx.qp_base.qp_num = attr->qp_num;
	h->qpx.qp_base.handle = attr->qp_num;
	h->qpx.qp_base.qp_type = IBV_QPT_XRC_RECV;
	h->qpx.qp_base.state = IBV_QPS_UNKNOWN;
	pthread_mutex_init(&h->qpx.qp_base.mutex, NULL);
	pthread_cond_init(&h->qpx.qp_base.cond, NULL);
	soft_lock(&h->ctx->lock);
	x->refcnt++;
	soft_unlock(&h->ctx->lock);
	return &h->qpx.qp_base;
}

/*
 * soft_xrc_close -- ibv_destroy_qp of a target: a handle closes (the
 * target opened once less); a creator's target that handles keep open is
 * hidden, kept until they are closed; 0, or -1: destroy it for good
 */
int soft_xrc_close(struct soft_qp *qp)
{
	struct soft_context *ctx = qp->ctx;
	struct soft_reg_qp *e = &soft_reg->qp[qp->reg_slot];

	if (qp->xrc_handle == 1) {
		soft_stripe_lock(&soft_reg->lock);
		if (e->qpn == qp->qpx.qp_base.qp_num &&
		    atomic_load(&e->xrc_opens))
			atomic_fetch_sub(&e->xrc_opens, 1);
		pthread_mutex_unlock(&soft_reg->lock);
		soft_lock(&ctx->lock);
		qp->xrcd->refcnt--;
		soft_unlock(&ctx->lock);
		free(qp);
		return 0;
	}
	soft_lock(&ctx->lock);
	if (qp->xrc_handle == 2 || atomic_load(&e->xrc_opens)) {
		qp->xrc_handle = 2;
		soft_unlock(&ctx->lock);
		return 0;
	}
	soft_unlock(&ctx->lock);
	return -1;
}
