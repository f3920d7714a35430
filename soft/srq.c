/* SPDX-License-Identifier: MIT */
/* srq.c -- shared receive queues */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "softrdma.h"

SOFT_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
					   struct ibv_srq_init_attr *attr);
SOFT_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
			       int attr_mask);
SOFT_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
SOFT_EXPORT int ibv_destroy_srq(struct ibv_srq *srq);

struct ibv_srq *soft_create_srq_ex(struct ibv_context *context,
				   struct ibv_srq_init_attr_ex *attr);

static uint32_t srq_counter;
/* SRQs alive in this process, at most SOFT_MAX_SRQ (max_srq) */
static uint32_t srq_live;

/*
 * srq_shm -- the segment through which initiators take this SRQ's
 * receives while its process does not run (progress like hardware): a
 * mirror big enough for any max_wr it may be resized to, indexed by
 * absolute WQE number, and an outbox of completions.  Sparse in tmpfs:
 * only what is used takes memory.
 */
static int srq_shm(struct soft_srq *srq)
{
	struct soft_context *ctx = srq->ctx;
	uint32_t n = 1, id;
	size_t stride = 8 + 16 * (size_t)srq->max_sge;
	size_t hdr = (sizeof(struct soft_srq_hdr) + 127) & ~(size_t)127;
	struct soft_srq_hdr *h;

	while (n < SOFT_MAX_SRQ_WR + 1)
		n <<= 1;
	soft_lock(&ctx->lock);
	id = ++ctx->srq_next;
	soft_unlock(&ctx->lock);
	if (id > SOFT_MAX_SRQ_IDS)
		return 0; /* served only by its own process */
	soft_reg_srq_id((uint32_t)ctx->reg_idx, id);
	srq->shm_len = hdr + (size_t)n * stride +
		       (size_t)n * sizeof(struct soft_shm_srq_cqe);
	h = soft_srq_seg_create((uint32_t)ctx->reg_idx, id, srq->shm_len);
	if (!h)
		return -1;
	h->pid = soft_self_pid;
	h->start = soft_self_start;
	h->entries = n;
	h->sge = srq->max_sge;
	h->rq_off = hdr;
	h->cq_off = hdr + (size_t)n * stride;
	srq->shm = h;
	srq->shm_n = n;
	srq->shm_rq = (char *)h + hdr;
	srq->shm_cq = (void *)(srq->shm_rq + (size_t)n * stride);
	srq->shm_id = id;
	return 0;
}

/* srq_shm_free -- unmap and remove the SRQ's segment */
static void srq_shm_free(struct soft_srq *srq)
{
	if (!srq->shm)
		return;
	munmap(srq->shm, srq->shm_len);
	if (srq->ctx->owner_pid == soft_self_pid)
		soft_srq_seg_unlink((uint32_t)srq->ctx->reg_idx, srq->shm_id);
	srq->shm = NULL;
}

/* ibv_create_srq -- an SRQ of at least max_wr WQEs */
struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
			       struct ibv_srq_init_attr *attr)
{
	struct soft_context *ctx;
	struct soft_srq *srq;
	uint32_t n = 1;

	if (!pd || !attr || !attr->attr.max_wr ||
	    attr->attr.max_wr > SOFT_MAX_SRQ_WR ||
	    attr->attr.max_sge > SOFT_MAX_SGE) {
		errno = EINVAL;
		return NULL;
	}
	ctx = to_sctx(pd->context);
	while (n < attr->attr.max_wr + 1)
		n <<= 1;
	if (soft_count_take(&srq_live, SOFT_MAX_SRQ)) {
		errno = ENOMEM;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		goto uncount;
	srq->rq = calloc(n, sizeof(*srq->rq));
	if (!srq->rq)
		goto free_srq;
	srq->ctx = ctx;
	srq->pd = to_spd(pd);
	srq->size = n;
	srq->max_wr = attr->attr.max_wr;
	srq->max_sge = attr->attr.max_sge ? attr->attr.max_sge : 1;
	srq->srqn = __atomic_add_fetch(&srq_counter, 1, __ATOMIC_RELAXED);
	srq->srq.context = pd->context;
	srq->srq.srq_context = attr->srq_context;
	srq->srq.pd = pd;
	srq->srq.handle = srq->srqn;
	pthread_mutex_init(&srq->srq.mutex, NULL);
	pthread_cond_init(&srq->srq.cond, NULL);
	if (srq_shm(srq))
		goto free_rq;
	attr->attr.max_sge = srq->max_sge;
	__atomic_add_fetch(&srq->pd->refcnt, 1, __ATOMIC_RELAXED);
	soft_lock(&ctx->lock);
	soft_list_add(&ctx->srqs, &srq->link);
	soft_unlock(&ctx->lock);
	return &srq->srq;

free_rq:
	free(srq->rq);
free_srq:
	free(srq);
uncount:
	soft_count_drop(&srq_live);
	errno = ENOMEM;
	return NULL;
}

/* soft_create_srq_ex -- a basic SRQ, or an XRC SRQ (a PD, a domain and a
 * CQ, as ibv_cmd_create_srq_ex asks); no tag matching */
struct ibv_srq *soft_create_srq_ex(struct ibv_context *context,
				   struct ibv_srq_init_attr_ex *attr)
{
	const uint32_t xrc = IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	struct ibv_srq_init_attr a;
	struct ibv_srq *srq;
	int type, err;

	if (!attr || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		errno = EINVAL;
		return NULL;
	}
	type = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr->srq_type
							  : IBV_SRQT_BASIC;
	if (type != IBV_SRQT_BASIC && type != IBV_SRQT_XRC) {
		errno = type == IBV_SRQT_TM ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	if (attr->comp_mask &
	    ~(uint32_t)(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | xrc)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (type == IBV_SRQT_XRC &&
	    ((attr->comp_mask & xrc) != xrc || !attr->xrcd || !attr->cq ||
	     attr->xrcd->context != context || attr->pd->context != context)) {
		errno = EINVAL;
		return NULL;
	}
	a.srq_context = attr->srq_context;
	a.attr = attr->attr;
	srq = ibv_create_srq(attr->pd, &a);
	if (!srq)
		return NULL;
	if (type == IBV_SRQT_XRC) {
		err = soft_xrc_srq_init(to_ssrq(srq), attr);
		if (err) {
			ibv_destroy_srq(srq);
			errno = err;
			return NULL;
		}
	}
	attr->attr = a.attr;
	return srq;
}

/* srq_limit_set -- arm (V > 0) or disarm the limit, also where initiators
 * look (soft_srq_kick); an armed one needs the progress thread, which
 * their kick wakes; ctx lock held */
static void srq_limit_set(struct soft_srq *srq, uint32_t v)
{
	srq->limit = v;
	if (!srq->shm)
		return; /* served only by its own process: no kick */
	atomic_store_explicit(&srq->shm->limit, v, memory_order_relaxed);
	if (v)
		soft_thread_start_locked(srq->ctx);
}

/*
 * soft_srq_posted -- the WQEs posted and not yet taken, as an HCA counts
 * them: those from the consumer index on (initiators advance it: taken,
 * though not yet drained into completions; a word of the segment, used
 * only within [tail, head]), or from our tail.  A WQE held for a message
 * still arriving, and those completed past it, are taken, though the tail
 * waits at the held one.  Lock held.
 */
uint64_t soft_srq_posted(const struct soft_srq *srq)
{
	uint64_t c = srq->tail, s;

	if (srq->shm) {
		s = atomic_load_explicit(&srq->shm->cons, memory_order_relaxed);
		if (s > c && s <= srq->head)
			c = s;
	}
	return srq->head - c;
}

/* srq_resize -- srq's ring to n entries (a power of two above what lies
 * between tail and head); 0, or ENOMEM.  Absolute WQE numbers stay: the
 * shared mirror uses them.  Lock held. */
static int srq_resize(struct soft_srq *srq, uint32_t n)
{
	struct soft_rwqe *nq = calloc(n, sizeof(*nq));
	uint64_t i;

	if (!nq)
		return ENOMEM;
	for (i = srq->tail; i != srq->head; i++)
		nq[i & (n - 1)] = srq->rq[i & (srq->size - 1)];
	free(srq->rq);
	srq->rq = nq;
	srq->size = n;
	return 0;
}

/*
 * soft_srq_room -- room to post one WQE more: fewer than max_wr posted and
 * not taken (soft_srq_posted), and a free entry in the ring, which held
 * WQEs and those completed past them still occupy: it doubles then,
 * within the shared mirror's entries.  0, or ENOMEM.  Lock held.
 */
int soft_srq_room(struct soft_srq *srq)
{
	if (soft_srq_posted(srq) >= srq->max_wr)
		return ENOMEM;
	if (srq->head - srq->tail < srq->size)
		return 0;
	if (!srq->shm || 2 * (uint64_t)srq->size > srq->shm_n)
		return ENOMEM;
	return srq_resize(srq, 2 * srq->size);
}

/* soft_srq_check_limit -- SRQ_LIMIT_REACHED once below the armed limit */
void soft_srq_check_limit(struct soft_srq *srq)
{
	if (srq->limit && soft_srq_posted(srq) < srq->limit) {
		srq_limit_set(srq, 0);
		soft_async_event(srq->ctx, IBV_EVENT_SRQ_LIMIT_REACHED,
				 &srq->srq);
	}
}

/*
 * soft_srq_ref_next -- the next WQE of the mapped SRQ r, whose lock the
 * caller holds: its SGEs (at most r->sge) into sge, their count into
 * *num, its number into *idx and the WQEs posted into *prod; 0, 1: none
 * posted, -1: a ring its owner's words make impossible
 */
int soft_srq_ref_next(const struct soft_srq_ref *r, struct ibv_sge *sge,
		      uint32_t *num, uint64_t *idx, uint64_t *prod)
{
	struct soft_srq_hdr *sh = r->sh;
	const struct soft_shm_rwqe *rw;
	uint64_t p, c;
	uint32_t n;

	p = atomic_load_explicit(&sh->prod, memory_order_acquire);
	c = atomic_load_explicit(&sh->cons, memory_order_relaxed);
	if (c == p)
		return 1;
	if (c > p || p - c > r->n)
		return -1;
	rw = (const void *)((const char *)sh + r->rq_off +
			    (c & (r->n - 1)) * (8 + 16 * (uint64_t)r->sge));
	n = rw->num_sge;
	if (n > r->sge)
		return -1;
	memcpy(sge, rw->sge, (size_t)n * sizeof(*sge));
	*num = n;
	*idx = c;
	*prod = p;
	return 0;
}

/*
 * take_past_held -- soft_srq_take while the drain waits at a WQE held
 * for a message arriving at another process's target (xrc.c
 * soft_xsrq_hold): the next WQE nobody took, its outbox entry left
 * SOFT_CQE_TAKEN, so that the drain passes it later without a completion
 * (our target reports it when its message ends): messages complete out
 * of the SRQ's order, as on an HCA.  0, or -1: none posted, or the
 * segment's lock held by an initiator (RNR)
 */
static int take_past_held(struct soft_srq *srq, struct soft_rwqe *out)
{
	struct soft_srq_hdr *h = srq->shm;
	struct soft_shm_srq_cqe *c;
	uint64_t cons;
	uint32_t z = 0;

	if (!atomic_compare_exchange_strong_explicit(&h->lock, &z, 1,
						     memory_order_acquire,
						     memory_order_relaxed))
		return -1;
	cons = atomic_load_explicit(&h->cons, memory_order_relaxed);
	if (cons >= srq->head) {
		atomic_store_explicit(&h->lock, 0, memory_order_release);
		return -1;
	}
	*out = srq->rq[cons & (srq->size - 1)];
	c = &srq->shm_cq[cons & (srq->shm_n - 1)];
	__atomic_store_n(&c->flags, SOFT_CQE_TAKEN, __ATOMIC_RELAXED);
	atomic_store_explicit(&h->cons, cons + 1, memory_order_release);
	atomic_store_explicit(&h->lock, 0, memory_order_release);
	return 0;
}

/*
 * soft_srq_take -- the network path's responder takes the SRQ's next
 * receive WQE into *out (ctx lock held): 0, or -1 when the SRQ is empty,
 * or its segment stays locked by a same-host initiator serving it (the
 * caller answers "receiver not ready", as for an empty SRQ).  What
 * same-host initiators consumed is drained first, so the WQE taken is
 * the one after theirs and each WQE is taken once; past one held for a
 * message still arriving at another process's target (take_past_held).
 */
int soft_srq_take(struct soft_srq *srq, struct soft_rwqe *out)
{
	uint32_t z;
	int i;

	for (i = 0; srq->shm && i < 1000; i++) {
		soft_srq_drain(srq);
		if (srq->nheld)
			return take_past_held(srq, out);
		z = 0;
		if (!atomic_compare_exchange_strong_explicit(
			    &srq->shm->lock, &z, 1, memory_order_acquire,
			    memory_order_relaxed)) {
			sched_yield();
			continue;
		}
		if (atomic_load_explicit(&srq->shm->cons,
					 memory_order_acquire) == srq->tail)
			break; /* locked, nothing left undrained */
		atomic_store_explicit(&srq->shm->lock, 0, memory_order_release);
	}
	if (srq->shm && i == 1000)
		return -1;
	if (srq->head == srq->tail) {
		if (srq->shm)
			atomic_store_explicit(&srq->shm->lock, 0,
					      memory_order_release);
		return -1;
	}
	*out = srq->rq[srq->tail & (srq->size - 1)];
	srq->tail++;
	if (srq->shm) {
		atomic_store_explicit(&srq->shm->cons, srq->tail,
				      memory_order_release);
		atomic_store_explicit(&srq->shm->lock, 0, memory_order_release);
	}
	soft_srq_check_limit(srq);
	return 0;
}

/*
 * srq_attr_ok -- every attribute of a modify checked before anything
 * changes, as rxe_srq_chk_attr: a size not below what is posted nor below
 * the armed limit, a limit within the size (the new one if given); lock
 * held
 */
static int srq_attr_ok(const struct soft_srq *srq,
		       const struct ibv_srq_attr *attr, int mask)
{
	uint32_t max_wr = (mask & IBV_SRQ_MAX_WR) ? attr->max_wr : srq->max_wr;
	uint32_t limit = (mask & IBV_SRQ_LIMIT) ? attr->srq_limit : srq->limit;

	if ((mask & IBV_SRQ_MAX_WR) && (!max_wr || max_wr > SOFT_MAX_SRQ_WR ||
					max_wr < soft_srq_posted(srq)))
		return 0;
	return limit <= max_wr;
}

/* ibv_modify_srq -- resize (IBV_SRQ_MAX_WR) and/or arm the limit */
int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
		   int attr_mask)
{
	struct soft_srq *srq;
	int ret = 0;

	if (!ibsrq || !attr || (attr_mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
		return EINVAL;
	srq = to_ssrq(ibsrq);
	soft_lock(&srq->ctx->lock);
	if (!srq_attr_ok(srq, attr, attr_mask)) {
		ret = EINVAL;
		goto out;
	}
	if (attr_mask & IBV_SRQ_MAX_WR) {
		uint32_t n = 1;

		/* the taken WQEs the tail has not passed keep their entries */
		while (n < attr->max_wr + 1 || n <= srq->head - srq->tail)
			n <<= 1;
		ret = srq_resize(srq, n);
		if (ret)
			goto out;
		srq->max_wr = attr->max_wr;
	}
	if (attr_mask & IBV_SRQ_LIMIT)
		srq_limit_set(srq, attr->srq_limit);
out:
	soft_unlock(&srq->ctx->lock);
	return ret;
}

/* ibv_query_srq -- current attributes */
int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct soft_srq *srq;

	if (!ibsrq || !attr)
		return EINVAL;
	srq = to_ssrq(ibsrq);
	soft_lock(&srq->ctx->lock);
	attr->max_wr = srq->max_wr;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = srq->limit;
	soft_unlock(&srq->ctx->lock);
	return 0;
}

static int srq_event_match(const void *e, void *arg)
{
	return ((const struct ibv_async_event *)e)->element.srq == arg;
}

/* ibv_destroy_srq -- EBUSY while QPs use it; waits for event acks */
int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct soft_srq *srq;

	if (!ibsrq)
		return EINVAL;
	srq = to_ssrq(ibsrq);
	soft_lock(&srq->ctx->lock);
	if (srq->refcnt) {
		soft_unlock(&srq->ctx->lock);
		return EBUSY;
	}
	soft_list_del(&srq->link);
	soft_xrc_srq_fini(srq);
	soft_unlock(&srq->ctx->lock);
	soft_evq_purge(srq->ctx->async, srq_event_match, ibsrq);
	pthread_mutex_lock(&ibsrq->mutex);
	while (ibsrq->events_completed != srq->async_reported)
		pthread_cond_wait(&ibsrq->cond, &ibsrq->mutex);
	pthread_mutex_unlock(&ibsrq->mutex);
	__atomic_sub_fetch(&srq->pd->refcnt, 1, __ATOMIC_RELAXED);
	srq_shm_free(srq);
	free(srq->rq);
	free(srq);
	soft_count_drop(&srq_live);
	return 0;
}
