/* SPDX-License-Identifier: MIT */
/* qp.c -- QP create/modify/query/destroy, state machine, ibv_qp_ex */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>

#include "softrdma.h"
#include "ud.h"

SOFT_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
					 struct ibv_qp_init_attr *attr);
SOFT_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			      int attr_mask);
SOFT_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			     int attr_mask, struct ibv_qp_init_attr *init_attr);
SOFT_EXPORT int ibv_destroy_qp(struct ibv_qp *qp);
SOFT_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp);

struct ibv_qp *soft_create_qp_ex(struct ibv_context *context,
				 struct ibv_qp_init_attr_ex *attr);

#define SOFT_SEND_OPS                                                        \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |    \
	 IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |                \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |      \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_ATOMIC_WRITE | \
	 SOFT_SEND_OPS_MW)
/* memory windows (mw.c) */
#define SOFT_SEND_OPS_MW                                     \
	(IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | \
	 IBV_QP_EX_WITH_SEND_WITH_INV)
/* what a UD or UC QP posts (ud.c): as rxe's and mlx5's
 * SUP_UD/UC_QP_SEND_OPS_FLAGS, less the windows, which softrdma's UC does
 * not carry; anything else is EOPNOTSUPP at create, not EINVAL at post */
#define SOFT_SEND_OPS_UD (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)
#define SOFT_SEND_OPS_UC                                \
	(SOFT_SEND_OPS_UD | IBV_QP_EX_WITH_RDMA_WRITE | \
	 IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
/* create flags granted (rxe: none) */
#define SOFT_QP_CREATE_FLAGS SOFT_UD_CREATE_FLAGS
#define SOFT_QP_CREATE_KNOWN                                             \
	(IBV_QP_CREATE_BLOCK_SELF_MCAST_LB | IBV_QP_CREATE_SCATTER_FCS | \
	 IBV_QP_CREATE_CVLAN_STRIPPING | IBV_QP_CREATE_SOURCE_QPN |      \
	 IBV_QP_CREATE_PCI_WRITE_END_PADDING)

static void soft_qp_ex_free(struct soft_qp *qp);

/*
 * Process-local QP table, indexed like the registry: which QPNs are ours.
 * Its lock is taken before a context lock is tried, never waited for
 * while one is held, so that another context's QP can be served safely.
 */
pthread_mutex_t soft_qp_table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct soft_qp *qp_table[SOFT_MAX_QP];
static uint32_t qp_table_qpn[SOFT_MAX_QP];

/* qp_table_set -- publish (qp) or withdraw (NULL) a QPN of ours */
static void qp_table_set(uint32_t qpn, struct soft_qp *qp)
{
	pthread_mutex_lock(&soft_qp_table_lock);
	qp_table[qpn & (SOFT_MAX_QP - 1)] = qp;
	qp_table_qpn[qpn & (SOFT_MAX_QP - 1)] = qp ? qpn : 0;
	pthread_mutex_unlock(&soft_qp_table_lock);
}

/* soft_qp_is_local -- a QP of that number lives in this process */
int soft_qp_is_local(uint32_t qpn)
{
	int r;

	pthread_mutex_lock(&soft_qp_table_lock);
	r = qp_table[qpn & (SOFT_MAX_QP - 1)] &&
	    qp_table_qpn[qpn & (SOFT_MAX_QP - 1)] == qpn;
	pthread_mutex_unlock(&soft_qp_table_lock);
	return r;
}

/* soft_qp_local_in -- our QP of that number on ctx, or NULL; ctx->lock
 * held (so that the QP cannot go while the caller uses it) */
struct soft_qp *soft_qp_local_in(struct soft_context *ctx, uint32_t qpn)
{
	struct soft_qp *qp;

	pthread_mutex_lock(&soft_qp_table_lock);
	qp = qp_table[qpn & (SOFT_MAX_QP - 1)];
	if (qp &&
	    (qp_table_qpn[qpn & (SOFT_MAX_QP - 1)] != qpn || qp->ctx != ctx))
		qp = NULL;
	pthread_mutex_unlock(&soft_qp_table_lock);
	return qp;
}

/* soft_qp_lock_local -- our QP of that number with its context locked
 * (trylock: NULL when busy or absent; DEFER: busy too while another thread
 * owns the context's bias, soft_trylock_owned); the caller unlocks
 * ctx->lock */
struct soft_qp *soft_qp_lock_local(uint32_t qpn, int defer)
{
	struct soft_qp *qp;

	pthread_mutex_lock(&soft_qp_table_lock);
	qp = qp_table[qpn & (SOFT_MAX_QP - 1)];
	if (qp && (qp_table_qpn[qpn & (SOFT_MAX_QP - 1)] != qpn ||
		   (defer ? soft_trylock_owned(&qp->ctx->lock)
			  : soft_trylock(&qp->ctx->lock))))
		qp = NULL;
	pthread_mutex_unlock(&soft_qp_table_lock);
	return qp;
}

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t n = 1;

	while (n < v)
		n <<= 1;
	return n;
}

/* soft_create_qp_ex -- create a QP (the create_qp_ex context op) */
struct ibv_qp *soft_create_qp_ex(struct ibv_context *context,
				 struct ibv_qp_init_attr_ex *attr)
{
	struct soft_context *ctx;
	struct soft_qp *qp;
	struct soft_pd *pd;
	uint32_t qpn;
	size_t rq_off = 0, cq_off = 0, ring_off = 0, rq_stride, queues;

	if (attr && (attr->qp_type == IBV_QPT_XRC_SEND ||
		     attr->qp_type == IBV_QPT_XRC_RECV))
		return soft_xrc_create_qp(context, attr);
	if (!context || !attr || !(attr->comp_mask & IBV_QP_INIT_ATTR_PD) ||
	    !attr->pd) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask &
	    ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
			IBV_QP_INIT_ATTR_CREATE_FLAGS)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS &&
	    attr->create_flags & ~SOFT_QP_CREATE_FLAGS) {
		/* unknown to the kernel ABI: EINVAL; known: as rxe */
		errno = attr->create_flags & ~(uint32_t)SOFT_QP_CREATE_KNOWN
				? EINVAL
				: EOPNOTSUPP;
		return NULL;
	}
	/* multicast loopback blocking is a UD flag (ud.c) */
	if (attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS &&
	    attr->create_flags && attr->qp_type != IBV_QPT_UD) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    ((attr->send_ops_flags & ~(uint64_t)SOFT_SEND_OPS) ||
	     /* READ and atomics (RDMA atomic write too) are RC's (rxe,
	      * mlx5); windows on UC are not emulated */
	     (attr->qp_type == IBV_QPT_UD &&
	      (attr->send_ops_flags & ~(uint64_t)SOFT_SEND_OPS_UD)) ||
	     (attr->qp_type == IBV_QPT_UC &&
	      (attr->send_ops_flags & ~(uint64_t)SOFT_SEND_OPS_UC)))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC &&
	    attr->qp_type != IBV_QPT_UD) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!attr->send_cq || !attr->recv_cq ||
	    attr->send_cq->context != context ||
	    attr->recv_cq->context != context || attr->pd->context != context ||
	    (attr->srq && attr->srq->context != context) ||
	    attr->cap.max_send_wr > SOFT_MAX_QP_WR ||
	    attr->cap.max_send_sge > SOFT_MAX_SGE ||
	    attr->cap.max_inline_data > SOFT_MAX_INLINE ||
	    (!attr->srq && (attr->cap.max_recv_wr > SOFT_MAX_QP_WR ||
			    attr->cap.max_recv_sge > SOFT_MAX_SGE))) {
		errno = EINVAL;
		return NULL;
	}
	ctx = to_sctx(context);
	pd = to_spd(attr->pd);
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->ctx = ctx;
	qp->pd = pd;
	qp->single = soft_pd_td(attr->pd);
	qp->type = attr->qp_type;
	/* the kind's data path (qpops.h): DC takes its own (dc.c), an RC QP
	 * aimed at another host switches at RTR (data.c) */
	qp->ops = attr->qp_type == IBV_QPT_UD	? &soft_ud_ops
		  : attr->qp_type == IBV_QPT_UC ? &soft_uc_ops
						: &soft_rc_ops;
	qp->sq_sig_all = attr->sq_sig_all;
	qp->cap = attr->cap;
	/*
	 * As rxe: a send WQE holds the larger of the SGE list and the inline
	 * data, and grants both what that size allows.
	 */
	if (qp->cap.max_inline_data < qp->cap.max_send_sge * 16u)
		qp->cap.max_inline_data = qp->cap.max_send_sge * 16u;
	qp->cap.max_send_sge = qp->cap.max_inline_data / 16u;
	if (qp->cap.max_send_sge > SOFT_MAX_SGE) /* a large inline WQE */
		qp->cap.max_send_sge = SOFT_MAX_SGE;
	qp->scq = to_scq(attr->send_cq);
	qp->rcq = to_scq(attr->recv_cq);
	qp->srq = attr->srq ? to_ssrq(attr->srq) : NULL;
	if (qp->srq) {
		qp->cap.max_recv_wr = 0;
		qp->cap.max_recv_sge = 0;
	}
	qp->sq_size = pow2_at_least(
		attr->cap.max_send_wr ? attr->cap.max_send_wr : 1);
	qp->sq_mask = qp->sq_size - 1;
	qp->sq = calloc(qp->sq_size, sizeof(*qp->sq));
	if (!qp->sq)
		goto free_qp;
	/* the SGEs granted, not asked: a WR may carry all of them */
	qp->sq_iov_n = qp->cap.max_send_sge ? qp->cap.max_send_sge : 1;
	qp->sq_iov =
		calloc((size_t)qp->sq_size * qp->sq_iov_n, sizeof(*qp->sq_iov));
	if (!qp->sq_iov)
		goto free_sq;
	if (!qp->srq) {
		qp->rq_size = pow2_at_least(qp->cap.max_recv_wr + 1);
		qp->rq = calloc(qp->rq_size, sizeof(*qp->rq));
		if (!qp->rq)
			goto free_sq;
	}
	qp->reg_slot =
		soft_reg_qp_alloc(pd->pd_id, ctx->reg_idx, attr->qp_type, &qpn);
	if (qp->reg_slot < 0)
		goto free_rq;
	qp->seg_len = SOFT_SEG_HDR + (size_t)qp->sq_size * SOFT_SLOT_SIZE;
	if (qp->rq) {
		rq_off = qp->seg_len;
		rq_stride = 8 + 16 * (size_t)qp->cap.max_recv_sge;
		qp->seg_len += (size_t)qp->rq_size * rq_stride;
		cq_off = qp->seg_len;
		qp->seg_len +=
			(size_t)qp->rq_size * sizeof(struct soft_shm_cqe);
	}
	queues = qp->seg_len; /* populated at once, below */
	qp->seg_len += soft_ud_seg_extra(attr);
	if (attr->qp_type == IBV_QPT_RC) { /* the copy ring, page-aligned */
		ring_off = (qp->seg_len + 4095) & ~(size_t)4095;
		/* a send queue of SENDs of SOFT_RING_MAX fits (a window of
		 * 64 KiB SENDs streams through it), within the bounds */
		qp->ring_size = qp->sq_size >= SOFT_RING_SIZE / SOFT_RING_MAX
					? SOFT_RING_SIZE
					: qp->sq_size * SOFT_RING_MAX;
		if (qp->ring_size < SOFT_RING_MIN)
			qp->ring_size = SOFT_RING_MIN;
		qp->seg_len = ring_off + qp->ring_size;
	}
	qp->seg = soft_seg_create(qpn, qp->seg_len);
	if (!qp->seg)
		goto free_qpn;
	/* the queues now; a UD QP's cells and the copy ring are touched as
	 * far as the traffic takes them (ring_take) */
	soft_populate(qp->seg, queues, 1);
	soft_populate(qp->sq, qp->sq_size * sizeof(*qp->sq), 1);
	if (qp->rq) {
		soft_populate(qp->rq, qp->rq_size * sizeof(*qp->rq), 1);
		qp->seg->rq_entries = qp->rq_size;
		qp->seg->rq_sge = qp->cap.max_recv_sge;
		qp->seg->rq_off = rq_off;
		qp->seg->cq_off = cq_off;
		qp->rq_shm = (char *)qp->seg + rq_off;
		qp->rq_outbox = (const void *)((char *)qp->seg + cq_off);
	}
	if (ring_off) {
		qp->seg->ring_off = ring_off;
		qp->seg->ring_size = qp->ring_size;
		qp->ring = (uint8_t *)qp->seg + ring_off;
	}
	qp->seg->qpn = qpn;
	qp->seg->nslots = qp->sq_size;
	qp->seg->pid = soft_self_pid;
	qp->seg->start = soft_self_start;
	qp->seg->ctx_idx = (uint32_t)ctx->reg_idx;
	qp->seg->cq_wbits = qp->scq->wbit | qp->rcq->wbit;
	if (qp->srq && qp->srq->shm)
		qp->seg->srq_id = qp->srq->shm_id;
	qp->slots = (struct soft_slot *)((char *)qp->seg + SOFT_SEG_HDR);
	qp->peer_reg_slot = -1;

	qp->qpx.qp_base.context = context;
	qp->qpx.qp_base.qp_context = attr->qp_context;
	qp->qpx.qp_base.pd = attr->pd;
	qp->qpx.qp_base.send_cq = attr->send_cq;
	qp->qpx.qp_base.recv_cq = attr->recv_cq;
	qp->qpx.qp_base.srq = attr->srq;
	qp->qpx.qp_base.handle = qpn;
	qp->qpx.qp_base.qp_num = qpn;
	qp->qpx.qp_base.state = IBV_QPS_RESET;
	qp->qpx.qp_base.qp_type = attr->qp_type;
	pthread_mutex_init(&qp->qpx.qp_base.mutex, NULL);
	pthread_cond_init(&qp->qpx.qp_base.cond, NULL);
	qp->state = IBV_QPS_RESET;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		qp->is_ex = 1;
		qp->send_ops_flags = attr->send_ops_flags;
	}
	if (soft_ud_create(qp, attr))
		goto unmap;
	soft_qp_ex_init(qp);
	if (!qp->stage)
		goto free_ud;
	/* report what was granted */
	attr->cap = qp->cap;

	soft_lock(&ctx->lock);
	__atomic_add_fetch(&pd->refcnt, 1, __ATOMIC_RELAXED);
	qp->pdom = soft_pdom_get(attr->pd);
	qp->scq->refcnt++;
	qp->rcq->refcnt++;
	if (qp->srq)
		qp->srq->refcnt++;
	soft_list_add(&ctx->qps, &qp->link);
	soft_bell_alloc(qp);
	qp_table_set(qpn, qp);
	soft_unlock(&ctx->lock);
	return &qp->qpx.qp_base;

free_ud:
	qp->ops->destroy(qp);
unmap:
	soft_seg_unlink(qpn);
	munmap(qp->seg, qp->seg_len);
free_qpn:
	soft_reg_qp_free(qp->reg_slot);
free_rq:
	free(qp->rq);
free_sq:
	free(qp->sq_iov);
	free(qp->sq);
free_qp:
	free(qp);
	errno = ENOMEM;
	return NULL;
}

/* ibv_create_qp -- create a QP */
struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex;
	struct ibv_qp *qp;

	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	memset(&ex, 0, sizeof(ex));
	memcpy(&ex, attr, sizeof(*attr));
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	qp = soft_create_qp_ex(pd->context, &ex);
	if (qp)
		attr->cap = ex.cap;
	return qp;
}

/* ibv_qp_to_qp_ex -- the ibv_qp_ex of a QP created with send ops flags */
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct soft_qp *q;

	if (!qp)
		return NULL;
	q = to_sqp(qp);
	return q->is_ex ? &q->qpx : NULL;
}

/*
 * The kernel's qp_state_table (drivers/infiniband/core/verbs.c): the
 * required and optional attribute masks of each transition, per type.
 */
enum { T_UD, T_UC, T_RC, T_XI, T_XT, T_N };

struct trans {
	int valid;
	int req[T_N], opt[T_N];
};

#define P_PKEY	IBV_QP_PKEY_INDEX
#define P_PORT	IBV_QP_PORT
#define P_ACC	IBV_QP_ACCESS_FLAGS
#define P_QKEY	IBV_QP_QKEY
#define P_AV	IBV_QP_AV
#define P_MTU	IBV_QP_PATH_MTU
#define P_DQPN	IBV_QP_DEST_QPN
#define P_RQPSN IBV_QP_RQ_PSN
#define P_DRD	IBV_QP_MAX_DEST_RD_ATOMIC
#define P_RNRT	IBV_QP_MIN_RNR_TIMER
#define P_ALT	IBV_QP_ALT_PATH
#define P_SQPSN IBV_QP_SQ_PSN
#define P_TMO	IBV_QP_TIMEOUT
#define P_RETRY IBV_QP_RETRY_CNT
#define P_RNR	IBV_QP_RNR_RETRY
#define P_RD	IBV_QP_MAX_QP_RD_ATOMIC
#define P_CUR	IBV_QP_CUR_STATE
#define P_MIG	IBV_QP_PATH_MIG_STATE
#define P_SQD	IBV_QP_EN_SQD_ASYNC_NOTIFY

/* get_trans -- qp_state_table[cur][next] into *t: 0, or -1 if invalid */
static int get_trans(enum ibv_qp_state cur, enum ibv_qp_state next,
		     struct trans *t)
{
	memset(t, 0, sizeof(*t));
	/* the table has no RESET->ERR: a QP never set up is not in error */
	if (next == IBV_QPS_RESET ||
	    (next == IBV_QPS_ERR && cur != IBV_QPS_RESET)) {
		t->valid = 1;
		return 0;
	}
	switch (cur) {
	case IBV_QPS_RESET:
		if (next != IBV_QPS_INIT)
			break;
		t->valid = 1;
		t->req[T_UD] = P_PKEY | P_PORT | P_QKEY;
		t->req[T_UC] = P_PKEY | P_PORT | P_ACC;
		t->req[T_RC] = P_PKEY | P_PORT | P_ACC;
		t->req[T_XI] = t->req[T_XT] = P_PKEY | P_PORT | P_ACC;
		break;
	case IBV_QPS_INIT:
		if (next == IBV_QPS_INIT) {
			t->valid = 1;
			t->opt[T_UD] = P_PKEY | P_PORT | P_QKEY;
			t->opt[T_UC] = P_PKEY | P_PORT | P_ACC;
			t->opt[T_RC] = P_PKEY | P_PORT | P_ACC;
			t->opt[T_XI] = t->opt[T_XT] = P_PKEY | P_PORT | P_ACC;
		} else if (next == IBV_QPS_RTR) {
			t->valid = 1;
			t->req[T_UC] = P_AV | P_MTU | P_DQPN | P_RQPSN;
			t->req[T_RC] = P_AV | P_MTU | P_DQPN | P_RQPSN | P_DRD |
				       P_RNRT;
			t->opt[T_UD] = P_PKEY | P_QKEY;
			t->opt[T_UC] = P_ALT | P_ACC | P_PKEY;
			t->opt[T_RC] = P_ALT | P_ACC | P_PKEY;
			t->req[T_XI] = P_AV | P_MTU | P_DQPN | P_RQPSN;
			t->req[T_XT] = t->req[T_RC];
			t->opt[T_XI] = t->opt[T_XT] = P_ALT | P_ACC | P_PKEY;
		}
		break;
	case IBV_QPS_RTR:
		if (next != IBV_QPS_RTS)
			break;
		t->valid = 1;
		t->req[T_UD] = P_SQPSN;
		t->req[T_UC] = P_SQPSN;
		t->req[T_RC] = P_TMO | P_RETRY | P_RNR | P_SQPSN | P_RD;
		t->opt[T_UD] = P_CUR | P_QKEY;
		t->opt[T_UC] = P_CUR | P_ALT | P_ACC | P_MIG;
		t->opt[T_RC] = P_CUR | P_ALT | P_ACC | P_RNRT | P_MIG;
		t->req[T_XI] = t->req[T_RC];
		t->req[T_XT] = P_TMO | P_SQPSN;
		t->opt[T_XI] = P_CUR | P_ALT | P_ACC | P_MIG;
		t->opt[T_XT] = t->opt[T_RC];
		break;
	case IBV_QPS_RTS:
		if (next == IBV_QPS_RTS) {
			t->valid = 1;
			t->opt[T_UD] = P_CUR | P_QKEY;
			t->opt[T_UC] = P_CUR | P_ACC | P_ALT | P_MIG;
			t->opt[T_RC] = P_CUR | P_ACC | P_ALT | P_MIG | P_RNRT;
			t->opt[T_XI] = P_CUR | P_ACC | P_ALT | P_MIG;
			t->opt[T_XT] = t->opt[T_RC];
		} else if (next == IBV_QPS_SQD) {
			t->valid = 1;
			t->opt[T_UD] = t->opt[T_UC] = t->opt[T_RC] = P_SQD;
			t->opt[T_XI] = t->opt[T_XT] = P_SQD;
		}
		break;
	case IBV_QPS_SQD:
		if (next == IBV_QPS_RTS) {
			t->valid = 1;
			t->opt[T_UD] = P_CUR | P_QKEY;
			t->opt[T_UC] = P_CUR | P_ALT | P_ACC | P_MIG;
			t->opt[T_RC] = P_CUR | P_ALT | P_ACC | P_RNRT | P_MIG;
			t->opt[T_XI] = P_CUR | P_ALT | P_ACC | P_MIG;
			t->opt[T_XT] = t->opt[T_RC];
		} else if (next == IBV_QPS_SQD) {
			t->valid = 1;
			t->opt[T_UD] = P_PKEY | P_QKEY;
			t->opt[T_UC] = P_AV | P_ALT | P_ACC | P_PKEY | P_MIG;
			t->opt[T_RC] = P_PORT | P_AV | P_TMO | P_RETRY | P_RNR |
				       P_RD | P_DRD | P_ALT | P_ACC | P_PKEY |
				       P_RNRT | P_MIG;
			t->opt[T_XI] = P_PORT | P_AV | P_TMO | P_RETRY | P_RNR |
				       P_RD | P_ALT | P_ACC | P_PKEY | P_MIG;
			t->opt[T_XT] = P_PORT | P_AV | P_TMO | P_DRD | P_ALT |
				       P_ACC | P_PKEY | P_RNRT | P_MIG;
		}
		break;
	case IBV_QPS_SQE:
		if (next != IBV_QPS_RTS)
			break;
		t->valid = 1;
		t->opt[T_UD] = P_CUR | P_QKEY;
		t->opt[T_UC] = P_CUR | P_ACC;
		break;
	default:
		break;
	}
	return t->valid ? 0 : -1;
}

/* modify_is_ok -- ib_modify_qp_is_ok() */
static int modify_is_ok(enum ibv_qp_state cur, enum ibv_qp_state next,
			enum ibv_qp_type type, int mask)
{
	struct trans t;
	int ti, req, opt;

	if ((unsigned)cur > IBV_QPS_ERR || (unsigned)next > IBV_QPS_ERR)
		return 0;
	if ((mask & IBV_QP_CUR_STATE) && cur != IBV_QPS_RTR &&
	    cur != IBV_QPS_RTS && cur != IBV_QPS_SQD && cur != IBV_QPS_SQE)
		return 0;
	if (get_trans(cur, next, &t))
		return 0;
	ti = type == IBV_QPT_UD		? T_UD
	     : type == IBV_QPT_UC	? T_UC
	     : type == IBV_QPT_XRC_SEND ? T_XI
	     : type == IBV_QPT_XRC_RECV ? T_XT
					: T_RC;
	req = t.req[ti];
	opt = t.opt[ti];
	if ((mask & req) != req)
		return 0;
	if (mask & ~(req | opt | IBV_QP_STATE))
		return 0;
	return 1;
}

/* av_port -- the port of a modify's AV, as the kernel's modify_qp takes
 * it: the AV's own, which must be a port of the device (0 is none: since
 * Linux 3.14 the QP's port is not put in its place), INIT->RTR wants equal
 * to the QP's and SQD->SQD to a port given with it (0 when not: refused) */
static uint32_t av_port(const struct soft_qp *qp, const struct ibv_qp_attr *a,
			int mask, enum ibv_qp_state cur)
{
	uint32_t p = a->ah_attr.port_num;
	uint32_t qport = (mask & IBV_QP_PORT) ? a->port_num : qp->attr.port_num;

	if (p != qport && ((mask & IBV_QP_PORT) || cur == IBV_QPS_INIT))
		return 0;
	return p;
}

/* cap_net_raw -- whether this thread may set a controlled Q_Key:
 * uverbs' modify_qp allows it with CAP_NET_RAW in the effective set */
static int cap_net_raw(void)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &h, d))
		return 0;
	return !!(d[CAP_TO_INDEX(CAP_NET_RAW)].effective &
		  CAP_TO_MASK(CAP_NET_RAW));
}

/* check_values -- attribute values the device accepts: 0, or -EINVAL,
 * or -ENODATA for an AV whose sgid_index is an empty entry of its port */
static int check_values(struct soft_qp *qp, struct ibv_qp_attr *a, int mask,
			enum ibv_qp_state cur, enum ibv_qp_state next)
{
	int err;

	/* ports, AVs and APM (apm.c): IB mode, or ALT_PATH refused */
	if (soft_apm_check_values(qp, a, mask, cur, next))
		return -EINVAL;
	if (soft_link_ib) /* apm.c checked ports and AVs */
		mask &= ~(IBV_QP_PORT | IBV_QP_AV | IBV_QP_PATH_MIG_STATE);
	if ((mask & IBV_QP_PORT) && !soft_port_ok(a->port_num))
		return -EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
		return -EINVAL;
	/* a controlled Q_Key (high bit set) is the kernel's to give: uverbs'
	 * modify_qp refuses it (EPERM) without CAP_NET_RAW, unless rdma's
	 * privileged_qkey setting allows it (off by default) */
	if ((mask & IBV_QP_QKEY) && (a->qkey & 0x80000000u) && !cap_net_raw())
		return -EPERM;
	if ((mask & IBV_QP_AV) && !a->ah_attr.is_global)
		return -EINVAL; /* RoCE needs a GRH */
	if ((mask & IBV_QP_AV) &&
	    (err = soft_gid_check(av_port(qp, a, mask, cur),
				  a->ah_attr.grh.sgid_index)))
		return err;
	if ((mask & IBV_QP_PATH_MTU) &&
	    (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
		return -EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) &&
	    a->max_rd_atomic > SOFT_MAX_RD_ATOM)
		return -EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) &&
	    a->max_dest_rd_atomic > SOFT_MAX_RD_ATOM)
		return -EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return -EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return -EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return -EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return -EINVAL;
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffff)
		return -EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (a->qp_access_flags &
	     ~(unsigned)(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
		return -EINVAL;
	if ((mask & IBV_QP_PATH_MIG_STATE) && a->path_mig_state > IBV_MIG_ARMED)
		return -EINVAL;
	return 0;
}

/* soft_qp_retype -- a QP made as RC becomes another kind (DC, XRC: they
 * are built on RC's queues and segment): its type, as the program and
 * the registry see it, and its operations; lock held */
void soft_qp_retype(struct soft_qp *qp, enum ibv_qp_type type,
		    const struct soft_qp_ops *ops)
{
	qp->type = type;
	qp->qpx.qp_base.qp_type = type;
	soft_reg->qp[qp->reg_slot].qp_type = type;
	qp->ops = ops;
}

/* soft_qp_set_state -- local, ibv_qp and registry views of the state */
void soft_qp_set_state(struct soft_qp *qp, enum ibv_qp_state s)
{
	qp->state = s;
	qp->qpx.qp_base.state = s;
	qp->attr.qp_state = s;
	soft_qp_hot(qp); /* what the new state asks is done by the next pass */
	if (qp->ctx->owner_pid == soft_self_pid)
		atomic_store(&soft_reg->qp[qp->reg_slot].state, (uint32_t)s);
}

/* qp_reset -- back to RESET: queues emptied without completions */
static void qp_reset(struct soft_qp *qp)
{
	qp->ops->reset(qp); /* the kind's own queues (UD/UC) */
	soft_sq_drop_held(qp);
	soft_qp_ack_reset(qp);
	soft_qp_disconnect(qp);
	qp->ctx->outstanding -= qp->sq_head - qp->sq_tail;
	soft_sq_drop(qp);
	qp->sq_head = qp->sq_tail = qp->sig_head = 0;
	qp->ring_head = qp->ring_tail = 0;
	qp->tx_msgno = 0;
	qp->rq_head = qp->rq_tail = 0;
	qp->rnr_count = 0;
	qp->rnr_since = 0;
	qp->dead_since = 0;
	qp->rnr_nak_msg = 0;
	if (qp->seg)
		atomic_store(&qp->seg->rnr_tries, 0);
	qp->sq_err_pending = 0;
	qp->novm = 0;
	qp->mig_unacked = 0; /* apm.c: no migration to confirm */
	qp->rx_stopped = 0;
	memset(&qp->rx, 0, sizeof(qp->rx));
	/* an initiator serving us right now finishes first (bounded) */
	soft_rx_lock_wait(qp->seg, 1, 0, 0);
	atomic_store(&qp->seg->rq_prod, 0);
	atomic_store(&qp->seg->rq_cons, 0);
	atomic_store(&qp->seg->rq_drained, 0);
	atomic_store(&qp->seg->rx_lock, 0);
	qp->no_serve = 0;
	qp->wait_msgno = 0;
	qp->push_next = 0;
	qp->push_skip = 0;
	qp->drain_bad = 0;
	memset(qp->slots, 0, (size_t)qp->sq_size * SOFT_SLOT_SIZE);
	soft_cq_clean(qp->scq, qp->qpx.qp_base.qp_num);
	if (qp->rcq != qp->scq)
		soft_cq_clean(qp->rcq, qp->qpx.qp_base.qp_num);
	/* a responder that connected to our previous incarnation (it
	 * reached RTR before we were reset) starts counting anew */
	atomic_fetch_add_explicit(&qp->seg->epoch, 1, memory_order_release);
	atomic_store_explicit(&qp->seg->served, 0, memory_order_relaxed);
	memset(&qp->attr, 0, sizeof(qp->attr));
	qp->alt_valid = 0;
	qp->path_down = 0;
	qp->mig_seen = 0;
	atomic_store(&qp->seg->mig_req, 0);
}

/* ibv_modify_qp -- move a QP through its kind's state machine */
int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct soft_qp *qp;

	if (!ibqp || !attr)
		return EINVAL;
	qp = to_sqp(ibqp);
	return qp->ops->modify(qp, attr, mask);
}

/* soft_qp_op_nop -- an operation a kind has nothing to do for */
void soft_qp_op_nop(struct soft_qp *qp)
{
	(void)qp;
}

/* soft_qp_modify -- the state machine of the kernel's qp_state_table (RC,
 * UC, UD); the lock is not held */
int soft_qp_modify(struct soft_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	enum ibv_qp_state cur, next;
	int err;

	soft_lock(&qp->ctx->lock);
	cur = (mask & IBV_QP_CUR_STATE) ? attr->cur_qp_state : qp->state;
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	err = modify_is_ok(cur, next, qp->type, mask)
		      ? -check_values(qp, attr, mask, cur, next)
		      : EINVAL;
	if (err) {
		soft_unlock(&qp->ctx->lock);
		errno = err;
		return err;
	}
	if (mask & IBV_QP_PKEY_INDEX)
		qp->attr.pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT)
		qp->attr.port_num = attr->port_num;
	if (mask & IBV_QP_ACCESS_FLAGS) {
		qp->attr.qp_access_flags = attr->qp_access_flags;
		atomic_store(&soft_reg->qp[qp->reg_slot].access,
			     attr->qp_access_flags);
	}
	if (mask & IBV_QP_QKEY)
		qp->attr.qkey = attr->qkey;
	if (mask & IBV_QP_AV)
		qp->attr.ah_attr = attr->ah_attr;
	if (mask & IBV_QP_ALT_PATH) {
		qp->attr.alt_ah_attr = attr->alt_ah_attr;
		qp->attr.alt_pkey_index = attr->alt_pkey_index;
		qp->attr.alt_port_num = attr->alt_port_num;
		qp->attr.alt_timeout = attr->alt_timeout;
		qp->alt_valid = 1; /* IB mode only: refused otherwise */
	}
	if (mask & IBV_QP_PATH_MTU)
		qp->attr.path_mtu = attr->path_mtu;
	if (mask & IBV_QP_DEST_QPN)
		qp->attr.dest_qp_num = attr->dest_qp_num;
	/* a PSN is 24 bits: rxe_qp_from_attr masks, mlx5's MLX5_SET cuts */
	if (mask & IBV_QP_RQ_PSN)
		qp->attr.rq_psn = attr->rq_psn & 0xffffff;
	if (mask & IBV_QP_SQ_PSN)
		qp->attr.sq_psn = attr->sq_psn & 0xffffff;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) {
		qp->attr.max_dest_rd_atomic = attr->max_dest_rd_atomic;
		atomic_store(&soft_reg->qp[qp->reg_slot].dest_rd_atom,
			     attr->max_dest_rd_atomic);
	}
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->attr.max_rd_atomic = attr->max_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER) {
		qp->attr.min_rnr_timer = attr->min_rnr_timer;
		if (qp->seg)
			qp->seg->rnr_timer = attr->min_rnr_timer;
	}
	if (mask & IBV_QP_TIMEOUT)
		qp->attr.timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		qp->attr.retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY) {
		qp->attr.rnr_retry = attr->rnr_retry;
		if (qp->seg)
			qp->seg->rnr_retry = attr->rnr_retry;
	}
	if ((mask & IBV_QP_PATH_MIG_STATE) && soft_link_ib)
		soft_apm_mig(qp, attr->path_mig_state, cur); /* apm.c */
	else if (mask & IBV_QP_PATH_MIG_STATE)
		qp->attr.path_mig_state = attr->path_mig_state;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		qp->attr.en_sqd_async_notify = attr->en_sqd_async_notify;

	if (next == IBV_QPS_RESET) {
		qp_reset(qp);
		soft_qp_set_state(qp, IBV_QPS_RESET);
		atomic_store(&soft_reg->qp[qp->reg_slot].access, 0);
		atomic_store(&soft_reg->qp[qp->reg_slot].dest_rd_atom, 0);
	} else if (next == IBV_QPS_ERR) {
		soft_qp_to_error(qp);
		if (cur == IBV_QPS_SQD)
			soft_sq_release(qp); /* the held WRs: flushed */
		soft_qp_flush(qp);
	} else {
		soft_qp_set_state(qp, next);
		if (cur == IBV_QPS_SQD && next != IBV_QPS_SQD)
			soft_sq_release(qp);
		/* the destination is known: the kind chooses its path */
		if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR)
			qp->ops->to_rtr(qp);
		/* SQ_DRAINED once nothing sent before is in flight: now,
		 * or when the last of it completes (soft_sqd_check) */
		if (next == IBV_QPS_SQD && cur != IBV_QPS_SQD &&
		    qp->attr.en_sqd_async_notify) {
			qp->sqd_notify = 1;
			soft_sqd_check(qp);
		}
	}
	soft_unlock(&qp->ctx->lock);
	return 0;
}

/* ibv_query_qp -- the attributes set so far (or the kind's answer), and
 * the creation attributes */
int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask,
		 struct ibv_qp_init_attr *init_attr)
{
	struct soft_qp *qp;

	if (!ibqp || !attr || !init_attr)
		return EINVAL;
	qp = to_sqp(ibqp);
	soft_lock(&qp->ctx->lock);
	if (qp->ops->query) {
		int err = qp->ops->query(qp, attr, attr_mask);

		if (err) {
			soft_unlock(&qp->ctx->lock);
			return err;
		}
	} else {
		*attr = qp->attr;
		attr->qp_state = qp->state;
		attr->cur_qp_state = qp->state;
		attr->sq_draining =
			qp->state == IBV_QPS_SQD && qp->sq_head != qp->sq_tail;
	}
	attr->cap = qp->cap;
	memset(init_attr, 0, sizeof(*init_attr));
	init_attr->qp_context = ibqp->qp_context;
	init_attr->send_cq = ibqp->send_cq;
	init_attr->recv_cq = ibqp->recv_cq;
	init_attr->srq = ibqp->srq;
	init_attr->cap = qp->cap;
	init_attr->qp_type = qp->type;
	init_attr->sq_sig_all = qp->sq_sig_all;
	soft_unlock(&qp->ctx->lock);
	return 0;
}

static int qp_event_match(const void *e, void *arg)
{
	return ((const struct ibv_async_event *)e)->element.qp == arg;
}

/* ibv_destroy_qp -- waits for the acks of its async events; EBUSY while
 * it is attached to a multicast group, as the kernel's uverbs_free_qp
 * refuses a user's destroy until every attachment is gone */
int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct soft_qp *qp;
	struct soft_context *ctx;

	if (!ibqp)
		return EINVAL;
	qp = to_sqp(ibqp);
	/* an XRC target: a handle closes, one still open elsewhere stays */
	if (qp->type == IBV_QPT_XRC_RECV && soft_xrc_close(qp) == 0)
		return 0;
	if (__atomic_load_n(&qp->nmcast, __ATOMIC_RELAXED))
		return EBUSY;
	ctx = qp->ctx;
	soft_lock(&ctx->lock);
	soft_list_del(&qp->link);
	qp_table_set(ibqp->qp_num, NULL);
	qp_reset(qp);
	soft_qp_set_state(qp, IBV_QPS_ERR);
	soft_bell_free(qp);
	qp->scq->refcnt--;
	qp->rcq->refcnt--;
	if (qp->srq)
		qp->srq->refcnt--;
	__atomic_sub_fetch(&qp->pd->refcnt, 1, __ATOMIC_RELAXED);
	soft_pdom_put(qp->pdom);
	soft_unlock(&ctx->lock);
	soft_evq_purge(ctx->async, qp_event_match, ibqp);
	pthread_mutex_lock(&ibqp->mutex);
	while (ibqp->events_completed != qp->async_reported)
		pthread_cond_wait(&ibqp->cond, &ibqp->mutex);
	pthread_mutex_unlock(&ibqp->mutex);
	qp->ops->destroy(qp); /* the kind's own state (UD/UC, DC) */
	if (ctx->owner_pid == soft_self_pid)
		soft_seg_unlink(ibqp->qp_num);
	munmap(qp->seg, qp->seg_len);
	soft_reg_qp_free(qp->reg_slot);
	soft_qp_ex_free(qp);
	free(qp->dv);
	free(qp->rq);
	free(qp->sq_iov);
	free(qp->sq);
	free(qp);
	return 0;
}

/*
 * ibv_qp_ex builder: wr_* calls stage ordinary ibv_send_wr entries;
 * wr_complete posts them in one go through the post_send path.
 */
struct stage_ent {
	struct ibv_send_wr wr;
	struct ibv_sge sge[SOFT_MAX_SGE];
	size_t inl_off[SOFT_MAX_SGE];
	int inl;
};

struct soft_wr_stage {
	struct stage_ent *e; /* first two members freed by destroy_qp */
	char *inl;
	size_t n, cap, inl_len, inl_cap;
	/* wr_start to wr_complete/wr_abort is the QP's critical section
	 * (ibv_wr_post(3): the provider locks, unless the QP has a TD) */
	pthread_mutex_t lock;
	int locked;
};

static struct soft_qp *xqp(struct ibv_qp_ex *q)
{
	return soft_container_of(q, struct soft_qp, qpx);
}

static struct stage_ent *stage_new(struct ibv_qp_ex *q, enum ibv_wr_opcode op)
{
	struct soft_qp *qp = xqp(q);
	struct soft_wr_stage *s = qp->stage;
	struct stage_ent *e;

	if (s->n == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 8;
		struct stage_ent *ne = realloc(s->e, ncap * sizeof(*ne));

		if (!ne) {
			qp->stage_err = ENOMEM;
			return NULL;
		}
		s->e = ne;
		s->cap = ncap;
	}
	e = &s->e[s->n++];
	memset(&e->wr, 0, sizeof(e->wr));
	e->inl = 0;
	e->wr.wr_id = q->wr_id;
	e->wr.send_flags = q->wr_flags;
	e->wr.opcode = op;
	return e;
}

static struct stage_ent *stage_last(struct ibv_qp_ex *q)
{
	struct soft_qp *qp = xqp(q);

	if (!qp->stage->n) {
		qp->stage_err = EINVAL;
		return NULL;
	}
	return &qp->stage->e[qp->stage->n - 1];
}

struct ibv_send_wr *soft_stage_last_wr(struct ibv_qp_ex *q)
{
	struct stage_ent *e = stage_last(q);

	return e ? &e->wr : NULL;
}

struct ibv_send_wr *soft_stage_wr(struct ibv_qp_ex *q, enum ibv_wr_opcode op)
{
	struct stage_ent *e = stage_new(q, op);

	return e ? &e->wr : NULL;
}

/* wr_start -- enter the QP's critical section, an empty batch */
static void wr_start(struct ibv_qp_ex *q)
{
	struct soft_qp *qp = xqp(q);

	if (!qp->single) {
		pthread_mutex_lock(&qp->stage->lock);
		qp->stage->locked = 1;
	}
	qp->stage->n = 0;
	qp->stage->inl_len = 0;
	qp->stage_err = 0;
}

/* wr_end -- the batch is gone: leave the critical section */
static void wr_end(struct soft_wr_stage *s)
{
	s->n = 0;
	if (s->locked) {
		s->locked = 0;
		pthread_mutex_unlock(&s->lock);
	}
}

/* sq_fits -- does the send queue take all n WRs now?  ibv_wr_complete
 * posts the batch whole or not at all ("no work is executed until
 * ibv_wr_complete() returns success", as mlx5 and rxe drop the batch when
 * the queue is short); a send posted by another thread between this look
 * and the post may still take the room */
static int sq_fits(struct soft_qp *qp, size_t n)
{
	uint32_t room;

	if (!qp->ops->sq_room)
		return 1; /* the post refuses it whole */
	soft_lock(&qp->ctx->lock);
	room = qp->ops->sq_room(qp);
	soft_unlock(&qp->ctx->lock);
	return n <= room;
}

/* wr_complete -- post the batch (all of it, or none: ENOMEM when the
 * queue is short), leave the critical section */
static int wr_complete(struct ibv_qp_ex *q)
{
	struct soft_qp *qp = xqp(q);
	struct soft_wr_stage *s = qp->stage;
	struct ibv_send_wr *bad;
	size_t i;
	int j, ret;

	if (qp->stage_err || !s->n || !sq_fits(qp, s->n)) {
		ret = qp->stage_err ? qp->stage_err : s->n ? ENOMEM : 0;
		wr_end(s);
		return ret;
	}
	for (i = 0; i < s->n; i++) {
		struct stage_ent *e = &s->e[i];

		e->wr.sg_list = e->sge;
		e->wr.next = i + 1 < s->n ? &s->e[i + 1].wr : NULL;
		if (e->inl)
			for (j = 0; j < e->wr.num_sge; j++)
				e->sge[j].addr =
					(uintptr_t)(s->inl + e->inl_off[j]);
	}
	ret = soft_post_send(&q->qp_base, &s->e[0].wr, &bad);
	wr_end(s);
	return ret;
}

/* wr_abort -- drop the batch, leave the critical section */
static void wr_abort(struct ibv_qp_ex *q)
{
	wr_end(xqp(q)->stage);
}

static void wr_send(struct ibv_qp_ex *q)
{
	stage_new(q, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *q, __be32 imm)
{
	struct stage_ent *e = stage_new(q, IBV_WR_SEND_WITH_IMM);

	if (e)
		e->wr.imm_data = imm;
}

static void wr_rdma_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	struct stage_ent *e = stage_new(q, IBV_WR_RDMA_WRITE);

	if (e) {
		e->wr.wr.rdma.rkey = rkey;
		e->wr.wr.rdma.remote_addr = addr;
	}
}

static void wr_rdma_write_imm(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
			      __be32 imm)
{
	struct stage_ent *e = stage_new(q, IBV_WR_RDMA_WRITE_WITH_IMM);

	if (e) {
		e->wr.wr.rdma.rkey = rkey;
		e->wr.wr.rdma.remote_addr = addr;
		e->wr.imm_data = imm;
	}
}

static void wr_rdma_read(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr)
{
	struct stage_ent *e = stage_new(q, IBV_WR_RDMA_READ);

	if (e) {
		e->wr.wr.rdma.rkey = rkey;
		e->wr.wr.rdma.remote_addr = addr;
	}
}

static void wr_cmp_swp(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
		       uint64_t compare, uint64_t swap)
{
	struct stage_ent *e = stage_new(q, IBV_WR_ATOMIC_CMP_AND_SWP);

	if (e) {
		e->wr.wr.atomic.rkey = rkey;
		e->wr.wr.atomic.remote_addr = addr;
		e->wr.wr.atomic.compare_add = compare;
		e->wr.wr.atomic.swap = swap;
	}
}

static void wr_fetch_add(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
			 uint64_t add)
{
	struct stage_ent *e = stage_new(q, IBV_WR_ATOMIC_FETCH_AND_ADD);

	if (e) {
		e->wr.wr.atomic.rkey = rkey;
		e->wr.wr.atomic.remote_addr = addr;
		e->wr.wr.atomic.compare_add = add;
	}
}

static void wr_set_sge(struct ibv_qp_ex *q, uint32_t lkey, uint64_t addr,
		       uint32_t length)
{
	struct stage_ent *e = stage_last(q);

	if (!e)
		return;
	e->sge[0].lkey = lkey;
	e->sge[0].addr = addr;
	e->sge[0].length = length;
	e->wr.num_sge = 1;
	e->inl = 0;
}

static void wr_set_sge_list(struct ibv_qp_ex *q, size_t n,
			    const struct ibv_sge *l)
{
	struct stage_ent *e = stage_last(q);

	if (!e)
		return;
	if (n > SOFT_MAX_SGE || n > xqp(q)->cap.max_send_sge) {
		xqp(q)->stage_err = EINVAL;
		return;
	}
	memcpy(e->sge, l, n * sizeof(*l));
	e->wr.num_sge = (int)n;
	e->inl = 0;
}

/* stage_inline -- copy n buffers into the stage as e's inline SGEs, up to
 * max bytes in all */
static void stage_inline(struct soft_qp *qp, struct stage_ent *e, size_t n,
			 const struct ibv_data_buf *b, size_t max)
{
	struct soft_wr_stage *s = qp->stage;
	size_t i, total = 0;

	for (i = 0; i < n; i++) {
		if (n > SOFT_MAX_SGE || b[i].length > max - total) {
			qp->stage_err = EINVAL;
			return;
		}
		total += b[i].length;
	}
	if (s->inl_len + total > s->inl_cap) {
		size_t ncap = (s->inl_len + total) * 2 + 256;
		char *nb = realloc(s->inl, ncap);

		if (!nb) {
			qp->stage_err = ENOMEM;
			return;
		}
		s->inl = nb;
		s->inl_cap = ncap;
	}
	for (i = 0; i < n; i++) {
		memcpy(s->inl + s->inl_len, b[i].addr, b[i].length);
		e->inl_off[i] = s->inl_len;
		e->sge[i].length = (uint32_t)b[i].length;
		e->sge[i].lkey = 0;
		s->inl_len += b[i].length;
	}
	e->wr.num_sge = (int)n;
	e->wr.send_flags |= IBV_SEND_INLINE;
	e->inl = 1;
}

static void wr_set_inline_data_list(struct ibv_qp_ex *q, size_t n,
				    const struct ibv_data_buf *b)
{
	struct stage_ent *e = stage_last(q);

	if (e)
		stage_inline(xqp(q), e, n, b, xqp(q)->cap.max_inline_data);
}

static void wr_set_inline_data(struct ibv_qp_ex *q, void *addr, size_t len)
{
	struct ibv_data_buf b = {.addr = addr, .length = len};

	wr_set_inline_data_list(q, 1, &b);
}

static void wr_unsupported(struct ibv_qp_ex *q)
{
	xqp(q)->stage_err = EOPNOTSUPP;
}

static void wr_bind_mw(struct ibv_qp_ex *q, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct stage_ent *e = stage_new(q, IBV_WR_BIND_MW);

	if (!e)
		return;
	if (!info) {
		xqp(q)->stage_err = EINVAL;
		return;
	}
	e->wr.bind_mw.mw = mw;
	e->wr.bind_mw.rkey = rkey;
	e->wr.bind_mw.bind_info = *info;
}

static void wr_local_inv(struct ibv_qp_ex *q, uint32_t rkey)
{
	struct stage_ent *e = stage_new(q, IBV_WR_LOCAL_INV);

	if (e)
		e->wr.invalidate_rkey = rkey;
}

static void wr_send_inv(struct ibv_qp_ex *q, uint32_t rkey)
{
	struct stage_ent *e = stage_new(q, IBV_WR_SEND_WITH_INV);

	if (e)
		e->wr.invalidate_rkey = rkey;
}

static void wr_send_tso(struct ibv_qp_ex *q, void *hdr, uint16_t sz,
			uint16_t mss)
{
	wr_unsupported(q);
}

static void wr_set_ud_addr(struct ibv_qp_ex *q, struct ibv_ah *ah, uint32_t qpn,
			   uint32_t qkey)
{
	struct stage_ent *e = stage_last(q);

	if (!e)
		return;
	e->wr.wr.ud.ah = ah;
	e->wr.wr.ud.remote_qpn = qpn;
	e->wr.wr.ud.remote_qkey = qkey;
}

/* wr_set_xrc_srqn -- the XRC SRQ the WR staged last goes to (an XRC
 * initiator's only: dc.c) */
static void wr_set_xrc_srqn(struct ibv_qp_ex *q, uint32_t srqn)
{
	struct stage_ent *e;

	if (xqp(q)->type != IBV_QPT_XRC_SEND) {
		wr_unsupported(q);
		return;
	}
	e = stage_last(q);
	if (e)
		e->wr.qp_type.xrc.remote_srqn = srqn;
}

/* wr_atomic_write -- the 8 bytes at data travel in the WQE (as rxe's
 * atomic_wr), whatever max_inline_data is */
static void wr_atomic_write(struct ibv_qp_ex *q, uint32_t rkey, uint64_t addr,
			    const void *data)
{
	struct soft_qp *qp = xqp(q);
	struct stage_ent *e;
	struct ibv_data_buf b = {.addr = (void *)(uintptr_t)data, .length = 8};

	if (!data) {
		qp->stage_err = EINVAL;
		return;
	}
	e = stage_new(q, IBV_WR_ATOMIC_WRITE);
	if (!e)
		return;
	e->wr.wr.rdma.rkey = rkey;
	e->wr.wr.rdma.remote_addr = addr;
	stage_inline(qp, e, 1, &b, 8);
}

/* soft_qp_ex_free -- free the builder's buffers */
static void soft_qp_ex_free(struct soft_qp *qp)
{
	if (!qp->stage)
		return;
	free(qp->stage->e);
	free(qp->stage->inl);
	pthread_mutex_destroy(&qp->stage->lock);
	free(qp->stage);
}

/* soft_qp_ex_init -- fill the wr_* table */
void soft_qp_ex_init(struct soft_qp *qp)
{
	struct ibv_qp_ex *q = &qp->qpx;

	qp->stage = calloc(1, sizeof(*qp->stage));
	if (qp->stage)
		pthread_mutex_init(&qp->stage->lock, NULL);
	q->wr_atomic_cmp_swp = wr_cmp_swp;
	q->wr_atomic_fetch_add = wr_fetch_add;
	q->wr_bind_mw = wr_bind_mw;
	q->wr_local_inv = wr_local_inv;
	q->wr_rdma_read = wr_rdma_read;
	q->wr_rdma_write = wr_rdma_write;
	q->wr_rdma_write_imm = wr_rdma_write_imm;
	q->wr_send = wr_send;
	q->wr_send_imm = wr_send_imm;
	q->wr_send_inv = wr_send_inv;
	q->wr_send_tso = wr_send_tso;
	q->wr_set_ud_addr = wr_set_ud_addr;
	q->wr_set_xrc_srqn = wr_set_xrc_srqn;
	q->wr_set_inline_data = wr_set_inline_data;
	q->wr_set_inline_data_list = wr_set_inline_data_list;
	q->wr_set_sge = wr_set_sge;
	q->wr_set_sge_list = wr_set_sge_list;
	q->wr_start = wr_start;
	q->wr_complete = wr_complete;
	q->wr_abort = wr_abort;
	q->wr_atomic_write = wr_atomic_write;
}
