/* SPDX-License-Identifier: MIT */
/* dc.c -- the mlx5dv DC transport: DC initiators (DCI) and targets (DCT) */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <infiniband/mlx5dv.h>

#include "net.h"
#include "softrdma.h"

SOFT_EXPORT uint32_t softrdma_dc_key_violations(struct ibv_qp *dct);
struct ibv_qp *soft_create_qp_ex(struct ibv_context *context,
				 struct ibv_qp_init_attr_ex *attr);

/*
 * A DCT (mlx5dv_create_qp, MLX5DV_DCTYPE_DCT) is an IBV_QPT_DRIVER QP of
 * the host registry whose entry carries its type and access key; it is
 * attached to an SRQ (whose segment initiators reach, soft/srq.c) and a
 * receive CQ, and goes RESET -> INIT -> RTR only.  A DCI or DCT takes any
 * port of the device in INIT (and in its RTR address vector), as mlx5's
 * do; another number is EINVAL.  A DCI (MLX5DV_DCTYPE_DCI)
 * goes RESET -> INIT -> RTR -> RTS as mlx5's modify_dci_qp_is_ok says, and
 * posts through ibv_qp_ex with mlx5dv_wr_set_dc_addr naming each WR's
 * target (AH, DCT number, access key).
 *
 * The DCI's own process does all the work of both HCAs, as the RC
 * initiator does when it serves a sleeping responder (data.c,
 * serve_remote): it looks the DCT up in the registry, checks it is an RTR
 * DCT of a live process and its key, takes the next WQE of the DCT's SRQ
 * under the SRQ's lock, checks every SGE against the registry (the DCT
 * owner's MR, its PD, local write), copies the data with
 * process_vm_writev, and leaves the receive completion (naming the DCT and
 * the DCI as src_qp) in the SRQ's outbox, which the DCT's process turns
 * into a CQE when it polls.  RDMA WRITE and READ are checked against the
 * DCT's access flags and the rkey's registry entry (an MR of the DCT's
 * owner and PD) and copied the same way.  So a DCT's process that sleeps
 * still receives, and its receive completions wait for it.
 *
 * WRs run in order per DCI: one WR at a time, the next only when the one
 * before it completed (mlx5 requires no more of a DCI without streams).
 * An empty SRQ is an RNR NAK: the WR is retried after the DCT's
 * min_rnr_timer, rnr_retry times (7: forever), then completes with
 * IBV_WC_RNR_RETRY_EXC_ERR.  A DCT that does not exist, is not in RTR, is
 * not on this host, or whose process died, and a wrong access key (the
 * DCT silently drops the request and counts a key violation, IBTA DC
 * annex; softrdma_dc_key_violations() reads the count), leave the WR
 * unanswered: it completes with IBV_WC_RETRY_EXC_ERR once the transport
 * timeout (4.096 us << timeout, times retry_cnt + 1, capped at 1 s) has
 * passed.  A WR that fails moves the DCI to ERR; the WRs after it flush.
 *
 * Atomics (CMP_AND_SWP, FETCH_AND_ADD; one local SGE of 8 bytes, else
 * EINVAL at posting) run under the atomic stripe lock RC's take, so the
 * two are atomic together; a remote address not 8-byte aligned is
 * IBV_WC_REM_INV_REQ_ERR.  Memory windows and indirect mkeys as DC rkeys
 * are not emulated: an rkey that is not an MR is a remote access error.
 * Data moves with process_vm_*: where the kernel refuses it (Yama between
 * processes that are not ancestor and descendant) the WR completes with
 * IBV_WC_RETRY_EXC_ERR and the DCT's SRQ keeps its WQE.
 */

#define DC_DCI_OPS                                                        \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |             \
	 IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |   \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
#define DC_SEND_FLAGS                                               \
	(IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE | \
	 IBV_SEND_FENCE)

enum { DC_DONE = 0, DC_WAIT = 1, DC_BUSY = 2 };
#define DC_TCACHE    64			   /* DCTs a DCI keeps mapped */
#define DC_ADDR_MARK 0xdc0addc0addc0addull /* staged by set_dc_addr */

struct dc_wqe {
	uint64_t wr_id;
	uint64_t raddr;
	uint64_t len;
	uint64_t key;
	uint64_t cmp, swap;  /* atomics: compare (or add), swap */
	uint64_t since;	     /* first attempt, ns (0: none yet) */
	uint64_t not_before; /* RNR: the next attempt, ns */
	uint32_t op;	     /* enum ibv_wr_opcode */
	uint32_t rkey;
	uint32_t imm;	/* as posted (big endian) */
	uint32_t dctn;	/* an XRC initiator's: the SRQ number */
	uint32_t flags; /* send flags */
	uint32_t niov;
	uint32_t status; /* found at posting: completes so, nothing moves */
	uint32_t rnr_count;
	int counted;	       /* its key violation was counted */
	struct ibv_ah_attr av; /* the AH's address, copied at posting as an
				* HCA copies it into the WQE */
	struct iovec iov[SOFT_MAX_SGE];
	uint8_t *inl; /* inline data, copied at posting */
};

/* a DCT reached: its segment and its SRQ's, mapped */
struct dc_target {
	uint32_t qpn; /* 0: a free entry */
	int32_t pid;
	uint64_t start;
	uint32_t ctx;
	struct soft_seg_hdr *seg;
	size_t seg_len;
	/* its SRQ: a DCT's, or the XRC SRQ the WR named (s.srqn), with its
	 * owner and PD (its segment's word, checked against the registry's
	 * MR at each use) */
	struct soft_srq_ref s;
};

struct soft_dc {
	int dct;
	int xrc; /* an XRC initiator: its target is dest_qp_num, the SRQ
		  * each WR's (xrc.c) */
	struct dc_wqe *q;
	uint32_t size;
	uint64_t head, tail;
	/* the DCTs last reached, mapped (peer-writable: checked at each
	 * use), and the one in use */
	struct dc_target tc[DC_TCACHE];
	uint32_t tc_next;
	struct dc_target *t;
};

/* IB min_rnr_timer encoding, in microseconds x 100 (as data.c) */
static const uint32_t rnr_table[32] = {
	65536, 1,    2,	   3,	 4,    6,     8,     12,    16,	   24,	  32,
	48,    64,   96,   128,	 192,  256,   384,   512,   768,   1024,  1536,
	2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
};

static uint64_t key_of(const struct soft_reg_qp *e)
{
	return (uint64_t)e->dc_key_hi << 32 | e->dc_key_lo;
}

/* dc_new -- the state of a DCT, or of an initiator (a DCI, an XRC one):
 * its queue of the QP's send queue's size; NULL without memory */
static struct soft_dc *dc_new(struct soft_qp *qp, int dct, int xrc)
{
	struct soft_dc *dc = calloc(1, sizeof(*dc));

	if (!dc)
		return NULL;
	dc->dct = dct;
	dc->xrc = xrc;
	if (dct)
		return dc;
	dc->size = qp->sq_size;
	dc->q = calloc(dc->size, sizeof(*dc->q));
	if (!dc->q) {
		free(dc);
		return NULL;
	}
	return dc;
}

/*
 * soft_dc_create -- a DCT (dct: 1, key its access key) or a DCI; the
 * caller (mlx5dv_create_qp) checked the mlx5dv attributes
 */
struct ibv_qp *soft_dc_create(struct ibv_context *context,
			      struct ibv_qp_init_attr_ex *attr, int dct,
			      uint64_t key)
{
	struct ibv_qp_init_attr_ex a;
	struct soft_reg_qp *e;
	struct soft_dc *dc;
	struct ibv_qp *ibqp;
	struct soft_qp *qp;

	if (attr->qp_type != IBV_QPT_DRIVER ||
	    !(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		errno = EINVAL;
		return NULL;
	}
	a = *attr;
	a.qp_type = IBV_QPT_RC;
	if (dct) {
		/* mlx5: a DCT takes a PD, an SRQ and a receive CQ */
		if (attr->comp_mask & ~(uint32_t)IBV_QP_INIT_ATTR_PD ||
		    !attr->srq || !attr->recv_cq) {
			errno = EINVAL;
			return NULL;
		}
		if (!to_ssrq(attr->srq)->shm) {
			errno = ENOMEM; /* its segment could not be made */
			return NULL;
		}
		memset(&a.cap, 0, sizeof(a.cap));
		a.cap.max_send_wr = 1;
		if (!a.send_cq)
			a.send_cq = a.recv_cq;
	} else {
		/* a DCI posts through ibv_qp_ex only */
		if (!(attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ||
		    attr->comp_mask &
			    ~(uint32_t)(IBV_QP_INIT_ATTR_PD |
					IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ||
		    attr->srq || !attr->send_cq) {
			errno = EINVAL;
			return NULL;
		}
		if (attr->send_ops_flags & ~(uint64_t)DC_DCI_OPS) {
			errno = EOPNOTSUPP;
			return NULL;
		}
		if (attr->cap.max_recv_wr || attr->cap.max_recv_sge) {
			errno = EINVAL; /* a DCI receives nothing */
			return NULL;
		}
		if (!a.recv_cq)
			a.recv_cq = a.send_cq;
	}
	ibqp = soft_create_qp_ex(context, &a);
	if (!ibqp)
		return NULL;
	qp = to_sqp(ibqp);
	dc = dc_new(qp, dct, 0);
	if (!dc) {
		ibv_destroy_qp(ibqp);
		errno = ENOMEM;
		return NULL;
	}
	if (!dct) {
		attr->cap = a.cap;
		attr->cap.max_recv_wr = 0;
		attr->cap.max_recv_sge = 0;
	} else {
		memset(&attr->cap, 0, sizeof(attr->cap));
	}
	soft_lock(&qp->ctx->lock);
	soft_qp_retype(qp, IBV_QPT_DRIVER, dct ? &soft_dct_ops : &soft_dci_ops);
	qp->dc = dc;
	if (!dct)
		qp->qpx.qp_base.srq = NULL;
	e = &soft_reg->qp[qp->reg_slot];
	e->dc_type = dct ? MLX5DV_DCTYPE_DCT : MLX5DV_DCTYPE_DCI;
	e->dc_key_lo = (uint32_t)key;
	e->dc_key_hi = (uint32_t)(key >> 32);
	atomic_store(&e->dc_viol, 0);
	soft_unlock(&qp->ctx->lock);
	return ibqp;
}

/* unmap_target -- forget a DCT reached */
static void unmap_target(struct dc_target *t)
{
	if (t->seg)
		munmap(t->seg, t->seg_len);
	soft_srq_ref_unmap(&t->s);
	memset(t, 0, sizeof(*t));
}

/* dc_forget -- drop the DCI's WQEs without completions; lock held */
static void dc_forget(struct soft_qp *qp)
{
	struct soft_dc *dc = qp->dc;

	for (; dc->tail != dc->head; dc->tail++) {
		struct dc_wqe *w = &dc->q[dc->tail & (dc->size - 1)];

		free(w->inl);
		w->inl = NULL;
		qp->ctx->outstanding--;
	}
	dc->head = dc->tail = 0;
}

/* dc_destroy -- ibv_destroy_qp of a DC QP (lock not held) */
static void dc_destroy(struct soft_qp *qp)
{
	struct soft_dc *dc = qp->dc;
	int i;

	if (!dc)
		return;
	soft_lock(&qp->ctx->lock);
	if (!dc->dct)
		dc_forget(qp);
	qp->dc = NULL;
	soft_unlock(&qp->ctx->lock);
	for (i = 0; i < DC_TCACHE; i++)
		unmap_target(&dc->tc[i]);
	free(dc->q);
	free(dc);
}

static int valid_mask(int mask, int req, int opt)
{
	return (mask & req) == req && !(mask & ~(req | opt));
}

/*
 * dci_ok -- mlx5's modify_dci_qp_is_ok; dct_ok -- mlx5_ib_modify_dct: a
 * DCT goes RESET -> INIT -> RTR (and back to RESET), nothing else
 */
static int dci_ok(enum ibv_qp_state cur, enum ibv_qp_state next, int mask)
{
	int req = IBV_QP_STATE;

	mask &= ~IBV_QP_CUR_STATE;
	if (next == IBV_QPS_RESET)
		return valid_mask(mask, req, 0);
	if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT)
		return valid_mask(mask, req | IBV_QP_PKEY_INDEX | IBV_QP_PORT,
				  0);
	if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT)
		return valid_mask(mask, req, IBV_QP_PKEY_INDEX | IBV_QP_PORT);
	if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR)
		return valid_mask(mask, req | IBV_QP_PATH_MTU,
				  IBV_QP_PKEY_INDEX | IBV_QP_AV);
	if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS)
		return valid_mask(mask,
				  req | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					  IBV_QP_RNR_RETRY |
					  IBV_QP_MAX_QP_RD_ATOMIC |
					  IBV_QP_SQ_PSN,
				  IBV_QP_MIN_RNR_TIMER);
	if (cur == IBV_QPS_RTS && next == IBV_QPS_RTS)
		return valid_mask(mask, req, IBV_QP_MIN_RNR_TIMER);
	if (cur != IBV_QPS_RESET && next == IBV_QPS_ERR)
		return valid_mask(mask, req, 0);
	return 0;
}

static int dct_ok(enum ibv_qp_state cur, enum ibv_qp_state next, int mask)
{
	int req = IBV_QP_STATE;

	mask &= ~IBV_QP_CUR_STATE;
	if (next == IBV_QPS_RESET)
		return valid_mask(mask, req, 0);
	if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT)
		return valid_mask(mask,
				  req | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					  IBV_QP_ACCESS_FLAGS,
				  0);
	if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR)
		return valid_mask(mask,
				  req | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV |
					  IBV_QP_PATH_MTU,
				  0);
	return 0;
}

/* dc_flush -- the DCI's WQEs complete with IBV_WC_WR_FLUSH_ERR; lock held */
static void dc_flush(struct soft_qp *qp);

/* dc_modify -- ibv_modify_qp of a DCI or DCT */
static int dc_modify(struct soft_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	struct soft_dc *dc = qp->dc;
	enum ibv_qp_state cur, next;
	int ok;

	soft_lock(&qp->ctx->lock);
	cur = (mask & IBV_QP_CUR_STATE) ? attr->cur_qp_state : qp->state;
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	ok = cur == qp->state &&
	     (dc->dct ? dct_ok(cur, next, mask) : dci_ok(cur, next, mask)) &&
	     (!(mask & IBV_QP_PORT) || soft_port_ok(attr->port_num)) &&
	     (!(mask & IBV_QP_AV) || !attr->ah_attr.port_num ||
	      soft_port_ok(attr->ah_attr.port_num)) &&
	     (!(mask & IBV_QP_PKEY_INDEX) || attr->pkey_index == 0) &&
	     (!(mask & IBV_QP_PATH_MTU) || (attr->path_mtu >= IBV_MTU_256 &&
					    attr->path_mtu <= IBV_MTU_4096)) &&
	     (!(mask & IBV_QP_MIN_RNR_TIMER) || attr->min_rnr_timer < 32) &&
	     (!(mask & IBV_QP_TIMEOUT) || attr->timeout < 32) &&
	     (!(mask & IBV_QP_RETRY_CNT) || attr->retry_cnt < 8) &&
	     (!(mask & IBV_QP_RNR_RETRY) || attr->rnr_retry < 8) &&
	     (!(mask & IBV_QP_MAX_QP_RD_ATOMIC) ||
	      attr->max_rd_atomic <= SOFT_MAX_RD_ATOM) &&
	     (!(mask & IBV_QP_ACCESS_FLAGS) ||
	      !(attr->qp_access_flags &
		~(uint32_t)(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC)));
	if (!ok) {
		soft_unlock(&qp->ctx->lock);
		errno = EINVAL;
		return EINVAL;
	}
	/* a GRH's source GID on the AV's port (the DC's own without one),
	 * as for an RC QP (qp.c check_values) */
	if ((mask & IBV_QP_AV) && attr->ah_attr.is_global && !soft_link_ib) {
		uint32_t port = attr->ah_attr.port_num ? attr->ah_attr.port_num
				: (mask & IBV_QP_PORT) ? attr->port_num
						       : qp->attr.port_num;
		int err = soft_gid_check(port, attr->ah_attr.grh.sgid_index);

		if (err) {
			soft_unlock(&qp->ctx->lock);
			errno = -err;
			return -err;
		}
	}
	if (mask & IBV_QP_PKEY_INDEX)
		qp->attr.pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT)
		qp->attr.port_num = attr->port_num;
	if (mask & IBV_QP_AV)
		qp->attr.ah_attr = attr->ah_attr;
	if (mask & IBV_QP_PATH_MTU)
		qp->attr.path_mtu = attr->path_mtu;
	if (mask & IBV_QP_TIMEOUT)
		qp->attr.timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		qp->attr.retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		qp->attr.rnr_retry = attr->rnr_retry;
	if (mask & IBV_QP_SQ_PSN) /* 24 bits, as mlx5's MLX5_SET keeps */
		qp->attr.sq_psn = attr->sq_psn & 0xffffff;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		qp->attr.max_rd_atomic = attr->max_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER) {
		qp->attr.min_rnr_timer = attr->min_rnr_timer;
		qp->seg->rnr_timer = attr->min_rnr_timer;
	}
	if (mask & IBV_QP_ACCESS_FLAGS) {
		qp->attr.qp_access_flags = attr->qp_access_flags;
		atomic_store(&soft_reg->qp[qp->reg_slot].access,
			     attr->qp_access_flags);
	}
	if (next == IBV_QPS_RESET) {
		soft_qp_set_state(qp, IBV_QPS_RESET);
		atomic_store(&soft_reg->qp[qp->reg_slot].access, 0);
		/* an initiator serving a DCT right now finishes first */
		if (dc->dct)
			soft_rx_lock_wait(qp->seg, 1, 0, 0);
		atomic_store(&qp->seg->rx_lock, 0);
		if (!dc->dct)
			dc_forget(qp);
		soft_cq_clean(qp->scq, qp->qpx.qp_base.qp_num);
		if (qp->rcq != qp->scq)
			soft_cq_clean(qp->rcq, qp->qpx.qp_base.qp_num);
		memset(&qp->attr, 0, sizeof(qp->attr));
	} else {
		soft_qp_set_state(qp, next);
		if (next == IBV_QPS_ERR && !dc->dct)
			dc_flush(qp);
	}
	soft_unlock(&qp->ctx->lock);
	return 0;
}

/*
 * dct_query -- ibv_query_qp of a DCT, as mlx5_ib_dct_query_qp: a mask
 * beyond the DCT's attributes, or a DCT not in RTR, is EINVAL; the state
 * is always RTR (the driver's, set by modify, which a DCT's catastrophic
 * error does not touch), so an overrun DCT (ERR here, answering nothing)
 * says RTR too.  Of the AV only the GRH fields the DCT context keeps;
 * what the mask does not ask for is zero, as the kernel's memset leaves
 * it.  Lock held.
 */
static int dct_query(struct soft_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	const struct ibv_qp_attr *s = &qp->attr;
	int supported = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PORT |
			IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU |
			IBV_QP_PKEY_INDEX;

	if (mask & ~supported)
		return EINVAL;
	/* a DCT reaches ERR only from RTR (a CQ overrun): modify refuses
	 * ERR (dct_ok) */
	if (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_ERR)
		return EINVAL;
	memset(attr, 0, sizeof(*attr));
	if (mask & IBV_QP_STATE)
		attr->qp_state = IBV_QPS_RTR;
	if (mask & IBV_QP_ACCESS_FLAGS)
		attr->qp_access_flags = s->qp_access_flags;
	if (mask & IBV_QP_PORT)
		attr->port_num = s->port_num;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		attr->min_rnr_timer = s->min_rnr_timer;
	if (mask & IBV_QP_AV) {
		attr->ah_attr.grh.traffic_class = s->ah_attr.grh.traffic_class;
		attr->ah_attr.grh.flow_label = s->ah_attr.grh.flow_label;
		attr->ah_attr.grh.sgid_index = s->ah_attr.grh.sgid_index;
		attr->ah_attr.grh.hop_limit = s->ah_attr.grh.hop_limit;
	}
	if (mask & IBV_QP_PATH_MTU)
		attr->path_mtu = s->path_mtu;
	if (mask & IBV_QP_PKEY_INDEX)
		attr->pkey_index = s->pkey_index;
	return 0;
}

/* soft_dc_set_addr -- mlx5dv_wr_set_dc_addr: the target of the WR staged
 * last, kept in fields a DCI's WRs do not use */
void soft_dc_set_addr(struct ibv_qp_ex *q, struct ibv_ah *ah, uint32_t dctn,
		      uint64_t key)
{
	struct soft_qp *qp = soft_container_of(q, struct soft_qp, qpx);
	struct ibv_send_wr *wr;

	if (!qp->dc || qp->dc->dct || !ah) {
		qp->stage_err = EINVAL;
		return;
	}
	wr = soft_stage_last_wr(q);
	if (!wr)
		return;
	wr->bind_mw.mw = (struct ibv_mw *)ah;
	wr->bind_mw.rkey = dctn;
	wr->bind_mw.bind_info.addr = key;
	wr->bind_mw.bind_info.length = DC_ADDR_MARK;
}

/* dc_complete -- the WQE at the tail completes with st; lock held */
static void dc_complete(struct soft_qp *qp, enum ibv_wc_status st)
{
	struct soft_dc *dc = qp->dc;
	struct dc_wqe *w = &dc->q[dc->tail & (dc->size - 1)];
	struct ibv_wc wc;

	if (st != IBV_WC_SUCCESS || qp->sq_sig_all ||
	    (w->flags & IBV_SEND_SIGNALED)) {
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = w->wr_id;
		wc.status = st;
		wc.qp_num = qp->qpx.qp_base.qp_num;
		wc.opcode = soft_wc_opcode((enum ibv_wr_opcode)w->op);
		if (w->op == IBV_WR_RDMA_READ)
			wc.byte_len = (uint32_t)w->len;
		else if (soft_op_rd_atomic((enum ibv_wr_opcode)w->op))
			wc.byte_len = 8;
		soft_cq_push(qp->scq, &wc, 0);
	}
	free(w->inl);
	w->inl = NULL;
	dc->tail++;
	qp->ctx->outstanding--;
}

static void dc_flush(struct soft_qp *qp)
{
	while (qp->dc->tail != qp->dc->head)
		dc_complete(qp, IBV_WC_WR_FLUSH_ERR);
}

/* timeout_ns -- the transport timeout of a request nobody answers */
static uint64_t timeout_ns(struct soft_qp *qp)
{
	uint64_t t = qp->attr.timeout ? 4096ull << qp->attr.timeout
				      : SOFT_TIMEOUT_CAP_NS;

	if (t > SOFT_TIMEOUT_CAP_NS)
		t = SOFT_TIMEOUT_CAP_NS;
	t *= qp->attr.retry_cnt + 1u;
	return t < SOFT_TIMEOUT_CAP_NS ? t : SOFT_TIMEOUT_CAP_NS;
}

/*
 * still_ok -- a target mapped before is still e's; an XRC SRQ's still the
 * same SRQ of e's domain (its owner's context slot not taken by another
 * process, its segment's domain not cleared by its destroy)
 */
static int still_ok(const struct dc_target *t, const struct soft_reg_qp *e)
{
	if (t->pid != e->pid || t->start != e->start || t->ctx != e->ctx_idx)
		return 0;
	return !t->s.srqn || soft_xsrq_ok(&t->s, e->xrcd_id);
}

/*
 * map_target -- the DCT e (registry copy) mapped and checked: its
 * segment and its SRQ's agree with the registry and fit their mappings;
 * it becomes dc->t; 0 or -1.  For an XRC target e, the SRQ is XRC SRQ
 * srqn, of its owner's context, whose domain must be the target's: 1 when
 * it is not (or there is no such SRQ).  Up to DC_TCACHE targets stay
 * mapped, the oldest mapping gives way.
 */
static int map_target(struct soft_dc *dc, const struct soft_reg_qp *e,
		      uint32_t srqn)
{
	struct dc_target *t;
	struct soft_seg_hdr *h;
	struct soft_srq_ref s;
	size_t len;
	uint32_t id, i;

	t = dc->t;
	if (t && t->qpn == e->qpn && t->s.srqn == srqn && still_ok(t, e))
		return 0;
	for (i = 0; i < DC_TCACHE; i++) {
		t = &dc->tc[i];
		if (t->qpn != e->qpn || t->s.srqn != srqn)
			continue;
		if (still_ok(t, e)) {
			dc->t = t;
			return 0;
		}
		unmap_target(t); /* that number now names another */
	}
	dc->t = NULL;
	if (e->ctx_idx >= SOFT_MAX_CTX || !soft_pid_alive(e->pid, e->start))
		return -1;
	h = soft_seg_map(e->qpn, &len);
	if (!h)
		return -1;
	id = h->srq_id;
	if (len < sizeof(*h) || h->qpn != e->qpn || h->pid != e->pid ||
	    h->start != e->start || h->ctx_idx != e->ctx_idx ||
	    (!srqn && (!id || id > SOFT_MAX_SRQ_IDS))) {
		munmap(h, len);
		return -1;
	}
	/* an XRC target's SRQ: the one the WR names, of the target's
	 * domain, else the target NAKs the request */
	if (srqn ? soft_xsrq_map(srqn, e->xrcd_id, &s)
		 : soft_srq_ref_map(e->ctx_idx, id, e->pid, e->start, &s)) {
		munmap(h, len);
		return srqn ? 1 : -1;
	}
	t = &dc->tc[dc->tc_next++ % DC_TCACHE];
	unmap_target(t);
	t->seg = h;
	t->seg_len = len;
	t->s = s;
	t->qpn = e->qpn;
	t->pid = e->pid;
	t->start = e->start;
	t->ctx = e->ctx_idx;
	dc->t = t;
	return 0;
}

/* move -- copy len bytes between the local iovecs at loff and one range
 * of pid; 0 or -1 (errno) */
static int move(int write, int32_t pid, const struct iovec *l, uint32_t nl,
		uint64_t loff, void *rva, uint64_t len)
{
	struct iovec part[SOFT_MAX_SGE], r;
	uint32_t i, n = 0;
	uint64_t left = len;
	ssize_t got;

	for (i = 0; i < nl && left; i++) {
		uint64_t c;

		if (loff >= l[i].iov_len) {
			loff -= l[i].iov_len;
			continue;
		}
		c = l[i].iov_len - loff < left ? l[i].iov_len - loff : left;
		part[n].iov_base = (char *)l[i].iov_base + loff;
		part[n].iov_len = c;
		n++;
		left -= c;
		loff = 0;
	}
	if (left) {
		errno = EINVAL;
		return -1;
	}
	if (!len)
		return 0;
	if (pid == soft_self_pid) {
		char *p = rva;

		for (i = 0; i < n; i++) {
			if (write)
				memmove(p, part[i].iov_base, part[i].iov_len);
			else
				memmove(part[i].iov_base, p, part[i].iov_len);
			p += part[i].iov_len;
		}
		return 0;
	}
	if (soft_novm_env()) {
		errno = EPERM;
		return -1;
	}
	r.iov_base = rva;
	r.iov_len = len;
	got = write ? process_vm_writev(pid, part, n, &r, 1, 0)
		    : process_vm_readv(pid, part, n, &r, 1, 0);
	if (got != (ssize_t)len) {
		if (got >= 0)
			errno = EFAULT;
		return -1;
	}
	return 0;
}

/*
 * remote_move -- copy len bytes between the local iovecs at loff and
 * [addr, addr + len) of the DCT owner's MR key, for need: the registry
 * entry checked as peer-writable (and, for our own process, our MR
 * table, not the registry's word), its stripe lock held while the bytes
 * move so that the owner cannot deregister it meanwhile.  0, 1: refused,
 * -1: the copy failed (errno).
 */
static int remote_move(const struct soft_reg_qp *e, uint32_t key, uint64_t addr,
		       uint64_t len, uint32_t need, int write,
		       const struct iovec *l, uint32_t nl, uint64_t loff,
		       const struct dc_wqe *aw)
{
	uint32_t slot = soft_key_slot(key);
	const struct soft_reg_mr *m = &soft_reg->mr[slot];
	pthread_mutex_t *lk = &soft_reg->key_lock[slot % SOFT_NSTRIPES];
	uint64_t maddr, mlen, va;
	struct soft_mr *mr;
	int ret = 1;

	soft_stripe_lock(lk);
	maddr = m->addr;
	mlen = m->len;
	if (!key || m->key != key || m->kind != SOFT_KEY_MR ||
	    m->pid != e->pid || m->start != e->start || m->pd_id != e->pd_id ||
	    !(m->access & need) || addr < maddr || addr - maddr > mlen ||
	    len > mlen - (addr - maddr))
		goto out;
	va = m->va + (addr - maddr);
	if (e->pid == soft_self_pid) {
		mr = soft_mr_lookup(key);
		if (!mr || !(mr->access & need) ||
		    va < (uintptr_t)mr->mr.addr ||
		    va - (uintptr_t)mr->mr.addr > mr->mr.length ||
		    len > mr->mr.length - (va - (uintptr_t)mr->mr.addr))
			goto out;
	}
	if (!l) {
		ret = 0; /* only checked */
		goto out;
	}
	if (aw && aw->op == IBV_WR_ATOMIC_WRITE) {
		/* as RC's (data.c atomic_write): one aligned store */
		ret = soft_aw_place(e->pid, va,
				    e->pid == soft_self_pid
					    ? (uint8_t *)(uintptr_t)va
					    : NULL,
				    aw->swap) == IBV_WC_SUCCESS
			      ? 0
			      : -1;
		goto out;
	}
	if (aw) {
		/* as RC's atomics (data.c) */
		ret = soft_atomic_exec(e->pid, va,
				       e->pid == soft_self_pid
					       ? (uint8_t *)(uintptr_t)va
					       : NULL,
				       aw->op == IBV_WR_ATOMIC_CMP_AND_SWP,
				       aw->cmp, aw->swap, l[0].iov_base)
			      ? -1
			      : 0;
		goto out;
	}
	ret = move(write, e->pid, l, nl, loff, (void *)(uintptr_t)va, len);
out:
	pthread_mutex_unlock(lk);
	return ret;
}

/*
 * soft_remote_move -- remote_move for the network responder of an XRC
 * target whose SRQ is another process's or context's (net.c): LEN bytes
 * at ADDR under KEY, an MR of the SRQ's owner (PID, START) and PD, with
 * access NEED, written from BUF (WRITE) or read into it; BUF NULL: only
 * checked.  0, 1: refused, -1: the copy failed.
 */
int soft_remote_move(int32_t pid, uint64_t start, uint32_t pd_id, uint32_t key,
		     uint64_t addr, uint64_t len, uint32_t need, int write,
		     void *buf)
{
	struct soft_reg_qp e;
	struct iovec l = {buf, len};

	memset(&e, 0, sizeof(e));
	e.pid = pid;
	e.start = start;
	e.pd_id = pd_id;
	return remote_move(&e, key, addr, len, need, write, buf ? &l : NULL, 1,
			   0, NULL);
}

/* soft_remote_atomic -- the same for an atomic on the 8 bytes at ADDR,
 * OP: compare-and-swap (compare CMP, swap SWAP) or fetch-and-add of CMP,
 * the value found into *ORIG; or an atomic write of SWAP */
int soft_remote_atomic(int32_t pid, uint64_t start, uint32_t pd_id,
		       uint32_t key, uint64_t addr, enum ibv_wr_opcode op,
		       uint64_t cmp, uint64_t swap, uint64_t *orig)
{
	struct soft_reg_qp e;
	struct dc_wqe aw;
	struct iovec l = {orig, 8};

	memset(&e, 0, sizeof(e));
	e.pid = pid;
	e.start = start;
	e.pd_id = pd_id;
	memset(&aw, 0, sizeof(aw));
	aw.op = op;
	aw.cmp = cmp;
	aw.swap = swap;
	return remote_move(&e, key, addr, 8,
			   op == IBV_WR_ATOMIC_WRITE ? IBV_ACCESS_REMOTE_WRITE
						     : IBV_ACCESS_REMOTE_ATOMIC,
			   0, &l, 1, 0, &aw);
}

/*
 * to_srq -- SEND, SEND_WITH_IMM, SEND_WITH_INV (XRC) or RDMA
 * WRITE_WITH_IMM: the next WQE of the DCT's SRQ (under the DCT's rx lock
 * and the SRQ's lock, as an RC initiator serving a responder), the data
 * placed, the completion left in the SRQ's outbox.  DC_BUSY: its locks are held; DC_WAIT: RNR (*rnr
 * set) or the copy refused; DC_DONE: *st.
 */
static int to_srq(struct soft_qp *qp, struct dc_wqe *w,
		  const struct soft_reg_qp *e, enum ibv_wc_status *st, int *rnr)
{
	struct soft_dc *dc = qp->dc;
	struct dc_target *t = dc->t;
	struct soft_seg_hdr *h = t->seg;
	struct soft_srq_hdr *sh = t->s.sh;
	struct ibv_sge sge[SOFT_MAX_SGE];
	struct soft_shm_srq_cqe *c;
	struct iovec inl = {w->inl, w->len};
	const struct iovec *l = w->inl ? &inl : w->iov;
	uint32_t nl = w->inl ? 1 : w->niov, z = 0, num, i, flags = 0;
	uint64_t prod = 0, cons = 0, room = 0, off = 0;
	int ret = DC_WAIT, prot = 0, taken = 0, r;

	if (!atomic_compare_exchange_strong_explicit(&h->rx_lock, &z, 2,
						     memory_order_acquire,
						     memory_order_relaxed))
		return DC_BUSY;
	z = 0;
	if (!atomic_compare_exchange_strong_explicit(&sh->lock, &z, 2,
						     memory_order_acquire,
						     memory_order_relaxed)) {
		ret = DC_BUSY;
		goto unlock_qp;
	}
	r = soft_srq_ref_next(&t->s, sge, &num, &cons, &prod);
	if (r > 0) {
		*rnr = 1; /* no receive posted: the DCT's HCA RNR NAKs */
		goto unlock;
	}
	if (r < 0) {
		*st = IBV_WC_REM_OP_ERR; /* its SRQ is corrupt */
		ret = DC_DONE;
		goto unlock;
	}
	*st = IBV_WC_SUCCESS;
	if (w->op == IBV_WR_RDMA_WRITE_WITH_IMM) {
		r = !w->len ? 0
		    : !(e->access & IBV_ACCESS_REMOTE_WRITE)
			    ? 1
			    : remote_move(e, w->rkey, w->raddr, w->len,
					  IBV_ACCESS_REMOTE_WRITE, 1, l, nl, 0,
					  NULL);
		if (r > 0) {
			*st = IBV_WC_REM_ACCESS_ERR; /* no WQE taken */
			ret = DC_DONE;
			goto unlock;
		}
		if (r < 0)
			goto unlock; /* not served: see dc_run */
	} else {
		for (i = 0; i < num; i++)
			room += sge[i].length;
		if (room < w->len)
			*st = IBV_WC_REM_INV_REQ_ERR; /* its LOC_LEN_ERR */
		for (i = 0;
		     i < num && off < w->len && !prot && *st == IBV_WC_SUCCESS;
		     i++) {
			uint64_t n = w->len - off < sge[i].length
					     ? w->len - off
					     : sge[i].length;

			if (!n)
				continue;
			r = remote_move(e, sge[i].lkey, sge[i].addr, n,
					IBV_ACCESS_LOCAL_WRITE, 1, l, nl, off,
					NULL);
			if (r > 0) {
				prot = 1; /* its LOC_PROT_ERR */
				*st = IBV_WC_REM_OP_ERR;
				break;
			}
			if (r < 0)
				goto unlock;
			off += n;
		}
	}
	/* only a message its receive takes invalidates (rxe's do_complete),
	 * a window of the SRQ's owner and PD; one it cannot: the receive
	 * completes in error and the request is NAKed as invalid (data.c) */
	if (w->op == IBV_WR_SEND_WITH_INV && *st == IBV_WC_SUCCESS && !prot) {
		*st = soft_mw_remote_inv(w->imm, e->pid, e->pd_id, e->qpn);
		flags |= *st == IBV_WC_SUCCESS ? SOFT_SF_INV
					       : SOFT_CQE_STATUS(*st);
	} else if (w->op != IBV_WR_SEND) {
		flags |= SOFT_SF_IMM;
	}
	if (w->flags & IBV_SEND_SOLICITED)
		flags |= SOFT_SF_SOLICITED;
	if (prot)
		flags |= SOFT_CQE_PROT;
	c = soft_srq_ref_cqe(&t->s, cons);
	c->byte_len = (uint32_t)w->len;
	c->imm = w->imm;
	c->flags = flags;
	c->opcode = w->op == IBV_WR_RDMA_WRITE_WITH_IMM ? SOFT_OP_WRITE_IMM
							: SOFT_OP_SEND;
	c->qpn = e->qpn;
	c->src_qp = qp->qpx.qp_base.qp_num;
	atomic_store_explicit(&sh->cons, cons + 1, memory_order_release);
	ret = DC_DONE;
	taken = 1;
unlock:
	atomic_store_explicit(&sh->lock, 0, memory_order_release);
unlock_qp:
	atomic_store_explicit(&h->rx_lock, 0, memory_order_release);
	if (ret == DC_DONE && *st != IBV_WC_REM_ACCESS_ERR)
		soft_wake_waiting(e->ctx_idx);
	if (taken)
		soft_srq_kick(sh, prod, cons + 1, e->ctx_idx);
	return ret;
}

/* unanswered -- nobody answers w: wait out the transport timeout */
static int unanswered(struct soft_qp *qp, struct dc_wqe *w, uint64_t now,
		      enum ibv_wc_status *st)
{
	if (now - w->since < timeout_ns(qp))
		return DC_WAIT;
	*st = IBV_WC_RETRY_EXC_ERR;
	return DC_DONE;
}

static int dc_op(struct soft_qp *qp, struct dc_wqe *w,
		 const struct soft_reg_qp *ep, enum ibv_wc_status *st,
		 uint64_t now);

/*
 * xrc_run -- an XRC initiator's WQE: its connected target, an RTR or RTS
 * XRC target of a live process on this host (else nobody answers), and
 * the XRC SRQ the WR names, which must be of the target's domain (else
 * the target NAKs the request: IBV_WC_REM_INV_REQ_ERR); then as a DCI's
 * operation, on the SRQ's owner's memory and PD (XRC checks keys against
 * the SRQ's PD)
 */
static int xrc_run(struct soft_qp *qp, struct dc_wqe *w, enum ibv_wc_status *st,
		   uint64_t now)
{
	struct soft_dc *dc = qp->dc;
	struct soft_reg_qp e;
	int r;

	if (soft_reg_qp_lookup(qp->attr.dest_qp_num, &e) < 0 ||
	    !soft_ah_local(&qp->attr.ah_attr) ||
	    e.qp_type != IBV_QPT_XRC_RECV ||
	    (e.state != IBV_QPS_RTR && e.state != IBV_QPS_RTS))
		return unanswered(qp, w, now, st);
	r = map_target(dc, &e, w->dctn);
	if (r < 0)
		return unanswered(qp, w, now, st);
	if (r > 0) {
		*st = IBV_WC_REM_INV_REQ_ERR;
		return DC_DONE;
	}
	e.pid = dc->t->s.pid;
	e.start = dc->t->s.start;
	e.ctx_idx = dc->t->s.ctx;
	e.pd_id = dc->t->s.pd_id;
	return dc_op(qp, w, &e, st, now);
}

/* dc_run -- try the WQE at the tail; DC_DONE with *st, or DC_WAIT */
static int dc_run(struct soft_qp *qp, struct dc_wqe *w, enum ibv_wc_status *st)
{
	struct soft_dc *dc = qp->dc;
	struct soft_reg_qp e;
	uint64_t now = soft_now_ns();
	int slot;

	if (w->status != IBV_WC_SUCCESS || w->op == IBV_WR_BIND_MW ||
	    w->op == IBV_WR_LOCAL_INV) {
		*st = w->status; /* found at posting */
		return DC_DONE;
	}
	if (!w->since)
		w->since = now;
	if (now < w->not_before)
		return DC_WAIT;
	if (dc->xrc)
		return xrc_run(qp, w, st, now);
	slot = soft_reg_qp_lookup(w->dctn, &e);
	if (slot < 0 || !soft_ah_local(&w->av) || e.qp_type != IBV_QPT_DRIVER ||
	    e.dc_type != MLX5DV_DCTYPE_DCT || e.state != IBV_QPS_RTR ||
	    map_target(dc, &e, 0))
		return unanswered(qp, w, now, st);
	if (key_of(&e) != w->key) {
		/* the DCT drops it and counts a key violation */
		if (!w->counted) {
			w->counted = 1;
			atomic_fetch_add(&soft_reg->qp[slot].dc_viol, 1);
		}
		return unanswered(qp, w, now, st);
	}
	return dc_op(qp, w, &e, st, now);
}

/* dc_op -- the WQE's operation on the target e reached; DC_DONE with
 * *st, or DC_WAIT */
static int dc_op(struct soft_qp *qp, struct dc_wqe *w,
		 const struct soft_reg_qp *ep, enum ibv_wc_status *st,
		 uint64_t now)
{
	struct soft_dc *dc = qp->dc;
	struct soft_reg_qp e = *ep;
	int rnr = 0, r;

	switch (w->op) {
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		*st = IBV_WC_SUCCESS;
		if (!(e.access & IBV_ACCESS_REMOTE_ATOMIC))
			r = 1;
		else if (w->raddr & 7)
			r = 2;
		else
			r = remote_move(&e, w->rkey, w->raddr, 8,
					IBV_ACCESS_REMOTE_ATOMIC, 0, w->iov, 1,
					0, w);
		if (r == 2)
			*st = IBV_WC_REM_INV_REQ_ERR; /* not aligned */
		else if (r > 0)
			*st = IBV_WC_REM_ACCESS_ERR;
		return r < 0 ? unanswered(qp, w, now, st) : DC_DONE;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_READ: {
		uint32_t need = w->op == IBV_WR_RDMA_READ
					? IBV_ACCESS_REMOTE_READ
					: IBV_ACCESS_REMOTE_WRITE;
		struct iovec inl = {w->inl, w->len};

		*st = IBV_WC_SUCCESS;
		if (!w->len)
			return DC_DONE;
		r = !(e.access & need)
			    ? 1
			    : remote_move(&e, w->rkey, w->raddr, w->len, need,
					  w->op == IBV_WR_RDMA_WRITE,
					  w->inl ? &inl : w->iov,
					  w->inl ? 1 : w->niov, 0, NULL);
		if (r > 0)
			*st = IBV_WC_REM_ACCESS_ERR;
		return r < 0 ? unanswered(qp, w, now, st) : DC_DONE;
	}
	default:
		r = to_srq(qp, w, &e, st, &rnr);
		if (r == DC_DONE)
			return DC_DONE;
		if (r == DC_BUSY) {
			/* the target's process holds its SRQ for a moment:
			 * no answer is lost, unless that process died */
			if (soft_pid_alive(e.pid, e.start))
				w->since = now;
			return unanswered(qp, w, now, st);
		}
		if (!rnr) /* the copy refused */
			return unanswered(qp, w, now, st);
		if (qp->attr.rnr_retry != 7 &&
		    w->rnr_count++ >= qp->attr.rnr_retry) {
			*st = IBV_WC_RNR_RETRY_EXC_ERR;
			return DC_DONE;
		}
		w->not_before =
			now + (uint64_t)rnr_table[dc->t->seg->rnr_timer & 31] *
				      10000ull;
		w->since = now; /* the DCT answered: the timeout starts anew */
		return DC_WAIT;
	}
}

/* dc_sweep -- run the DCI's WQEs in order, as far as they go; lock held */
static void dc_sweep(struct soft_qp *qp)
{
	struct soft_dc *dc = qp->dc;
	enum ibv_wc_status st;

	while (dc->tail != dc->head && qp->state == IBV_QPS_RTS) {
		if (dc_run(qp, &dc->q[dc->tail & (dc->size - 1)], &st) ==
		    DC_WAIT)
			return;
		dc_complete(qp, st);
		if (st != IBV_WC_SUCCESS) {
			soft_qp_set_state(qp, IBV_QPS_ERR);
			break;
		}
	}
	if (qp->state == IBV_QPS_ERR)
		dc_flush(qp);
}

/* dc_progress -- a DCI's sends; a DCT's SRQ completions; lock held */
static void dc_progress(struct soft_qp *qp)
{
	if (qp->dc->dct) {
		if (qp->srq && qp->srq->shm &&
		    atomic_load_explicit(&qp->srq->shm->cons,
					 memory_order_relaxed) != qp->srq->tail)
			soft_srq_drain(qp->srq);
		return;
	}
	if (qp->dc->tail != qp->dc->head)
		dc_sweep(qp);
}

/* dci_sq_room -- send WRs the DCI's queue takes now; lock held */
static uint32_t dci_sq_room(struct soft_qp *qp)
{
	const struct soft_dc *dc = qp->dc;
	uint64_t used = dc->head - dc->tail;
	uint32_t room = soft_sq_room(qp, used);

	/* and the ring: no more than its size queued */
	if (used >= dc->size)
		return 0;
	return room < dc->size - used ? room : (uint32_t)(dc->size - used);
}

/* head_wqe -- the queue's next WQE for wr (not yet counted: head_wqe
 * again gives the same one), its id, operation and flags set, the rest
 * zero; NULL when the queue is full; lock held */
static struct dc_wqe *head_wqe(struct soft_qp *qp, const struct ibv_send_wr *wr)
{
	struct soft_dc *dc = qp->dc;
	struct dc_wqe *w;

	if (!dci_sq_room(qp))
		return NULL;
	w = &dc->q[dc->head & (dc->size - 1)];
	memset(w, 0, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->op = wr->opcode;
	w->flags = wr->send_flags;
	return w;
}

/* local_take -- an XRC initiator's BIND_MW or LOCAL_INV, on its own PD,
 * done at posting as the network path does (net.c post_local) and
 * completed in order; 0 or an errno */
static int local_take(struct soft_qp *qp, struct ibv_send_wr *wr)
{
	struct soft_dc *dc = qp->dc;
	struct dc_wqe *w = head_wqe(qp, wr);

	if (!w)
		return ENOMEM;
	w->status = qp->state == IBV_QPS_ERR ? IBV_WC_WR_FLUSH_ERR
					     : soft_mw_local_op(qp, wr);
	dc->head++;
	qp->ctx->outstanding++;
	return 0;
}

/* dc_take -- check one WR and queue it; 0 or an errno */
static int dc_take(struct soft_qp *qp, struct ibv_send_wr *wr)
{
	struct soft_dc *dc = qp->dc;
	struct dc_wqe *w;
	struct ibv_ah *ah = NULL;
	uint32_t need = 0;
	uint64_t len = 0;
	int i;

	switch (wr->opcode) {
	case IBV_WR_SEND_WITH_INV:
		if (!dc->xrc) /* XRC's, as RC's (mlx5, rxe); not a DCI's */
			return EINVAL;
		break;
	case IBV_WR_BIND_MW:
	case IBV_WR_LOCAL_INV:
		if (!dc->xrc || soft_mw_check_wr(qp, wr))
			return EINVAL;
		return local_take(qp, wr);
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		break;
	case IBV_WR_RDMA_READ:
		need = IBV_ACCESS_LOCAL_WRITE;
		if (wr->send_flags & IBV_SEND_INLINE)
			return EINVAL;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		need = IBV_ACCESS_LOCAL_WRITE;
		if (soft_atomic_sge_bad(wr)) /* RC's rules */
			return EINVAL;
		break;
	default:
		return EINVAL;
	}
	/* a DCI's: an address set by mlx5dv_wr_set_dc_addr, not a caller's
	 * union; an XRC initiator's target is its QP's, the SRQ the WR's
	 * (the union, which the caller may leave unset, is not read) */
	if (!dc->xrc && wr->bind_mw.bind_info.length == DC_ADDR_MARK)
		ah = (struct ibv_ah *)wr->bind_mw.mw;
	if (!dc->xrc && (!ah || ah->context != qp->qpx.qp_base.context ||
			 !wr->bind_mw.rkey))
		return EINVAL;
	if (wr->send_flags & ~(unsigned int)DC_SEND_FLAGS || wr->num_sge < 0 ||
	    (uint32_t)wr->num_sge > qp->cap.max_send_sge ||
	    (wr->num_sge && !wr->sg_list))
		return EINVAL;
	for (i = 0; i < wr->num_sge; i++) {
		if (wr->sg_list[i].length > SOFT_MAX_MSG_SZ - len)
			return EINVAL;
		len += wr->sg_list[i].length;
	}
	if ((wr->send_flags & IBV_SEND_INLINE) && len > qp->cap.max_inline_data)
		return EINVAL;
	w = head_wqe(qp, wr);
	if (!w)
		return ENOMEM;
	w->imm = wr->imm_data;
	if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		w->rkey = wr->wr.atomic.rkey;
		w->raddr = wr->wr.atomic.remote_addr;
		w->cmp = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
	} else {
		w->rkey = wr->wr.rdma.rkey;
		w->raddr = wr->wr.rdma.remote_addr;
	}
	if (ah) {
		w->dctn = wr->bind_mw.rkey;
		w->key = wr->bind_mw.bind_info.addr;
		w->av = *soft_ah_attr(ah);
	} else {
		w->dctn = wr->qp_type.xrc.remote_srqn;
	}
	w->len = len;
	w->status = IBV_WC_SUCCESS;
	if ((wr->send_flags & IBV_SEND_INLINE) && len) {
		uint64_t off = 0;

		w->inl = malloc(len);
		if (!w->inl)
			return ENOMEM;
		for (i = 0; i < wr->num_sge; i++) {
			memcpy(w->inl + off,
			       (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			off += wr->sg_list[i].length;
		}
	} else {
		for (i = 0; i < wr->num_sge; i++)
			if (soft_local_sge(qp->pd, &wr->sg_list[i], need,
					   &w->iov[i]))
				w->status = IBV_WC_LOC_PROT_ERR;
		w->niov = (uint32_t)wr->num_sge;
	}
	dc->head++;
	qp->ctx->outstanding++;
	return 0;
}

/*
 * dc_post_send -- the WRs wr_complete staged on a DCI (ibv_post_send
 * on a DCI has no way to name a target: EINVAL, as any WR without
 * mlx5dv_wr_set_dc_addr).  A DCI not in RTS refuses (EINVAL), in ERR its
 * WRs flush.
 */
static int dc_post_send(struct soft_qp *qp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad)
{
	int ret = 0;

	soft_lock(&qp->ctx->lock);
	if (qp->dc->dct ||
	    (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR)) {
		*bad = wr;
		soft_unlock(&qp->ctx->lock);
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		ret = dc_take(qp, wr);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	dc_sweep(qp);
	soft_unlock(&qp->ctx->lock);
	return ret;
}

/* xini_sq_release -- the initiator left SQD: its held WRs run; lock held */
static void xini_sq_release(struct soft_qp *qp)
{
	dc_sweep(qp);
}

/* xini_reset -- back to RESET: its WRs go without completions; lock held */
static void xini_reset(struct soft_qp *qp)
{
	dc_forget(qp);
}

/*
 * soft_xrc_ini -- an RC QP just made (xrc.c) becomes an XRC initiator:
 * WRs run one at a time as a DCI's, to its connected target; 0 or -1
 */
int soft_xrc_ini(struct soft_qp *qp)
{
	struct soft_dc *dc = dc_new(qp, 0, 1);

	if (!dc)
		return -1;
	soft_lock(&qp->ctx->lock);
	soft_qp_retype(qp, IBV_QPT_XRC_SEND, &soft_xini_ops);
	qp->dc = dc;
	qp->qpx.qp_base.srq = NULL;
	soft_unlock(&qp->ctx->lock);
	return 0;
}

/* softrdma_dc_key_violations -- requests that reached the DCT with a
 * wrong access key (and were dropped) */
uint32_t softrdma_dc_key_violations(struct ibv_qp *ibqp)
{
	struct soft_qp *qp;

	if (!ibqp)
		return 0;
	qp = to_sqp(ibqp);
	if (!qp->dc || !qp->dc->dct)
		return 0;
	return atomic_load(&soft_reg->qp[qp->reg_slot].dc_viol);
}

/* dc_post_recv -- a DCT receives through its SRQ, a DCI not at all */
static int dc_post_recv(struct soft_qp *qp, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad)
{
	(void)qp;
	*bad = wr;
	return EOPNOTSUPP;
}

/* DC runs its own state machine (dc_modify), which needs none of the
 * kernel table's hooks (flush, sq_release, to_rtr, reset: nothing) */
const struct soft_qp_ops soft_dci_ops = {
	.name = "dci",
	.post_send = dc_post_send,
	.post_recv = dc_post_recv,
	.sq_room = dci_sq_room,
	.progress = dc_progress,
	.flush = soft_qp_op_nop,
	.sq_release = soft_qp_op_nop,
	.modify = dc_modify,
	.to_rtr = soft_qp_op_nop,
	.reset = soft_qp_op_nop,
	.destroy = dc_destroy,
	.always_pass = 1,
};

const struct soft_qp_ops soft_dct_ops = {
	.name = "dct",
	.post_send = dc_post_send, /* EINVAL */
	.post_recv = dc_post_recv,
	.progress = dc_progress,
	.flush = soft_qp_op_nop,
	.sq_release = soft_qp_op_nop,
	.modify = dc_modify,
	.to_rtr = soft_qp_op_nop,
	.reset = soft_qp_op_nop,
	.destroy = dc_destroy,
	.query = dct_query,
	.always_pass = 1,
	.any_src = 1,
};

/*
 * xini_to_rtr -- INIT->RTR of an XRC initiator: a target of this host is
 * served by the initiator's own process (xrc_run); another host's (with
 * SOFTRDMA_NET=1: soft_xrc_modify refuses it otherwise) by the network
 * path, RC's requester sending XRC requests (net.c); lock held
 */
static void xini_to_rtr(struct soft_qp *qp)
{
	if (soft_ah_local(&qp->attr.ah_attr))
		return;
	soft_net_connect(qp, &soft_xini_net_ops);
}

/* xini_net_progress -- the network path's share of a pass (IB mode: the
 * links followed, as an RC QP's, apm.c); lock held */
static void xini_net_progress(struct soft_qp *qp)
{
	if (soft_link_ib)
		soft_apm_check(qp);
	soft_net_progress(qp);
	if (qp->sqd_notify)
		soft_sqd_check(qp);
}

/* xini_net_reset -- back to RESET: off the network path (qp_reset's
 * soft_qp_disconnect releases it), the one-host ops again; lock held */
static void xini_net_reset(struct soft_qp *qp)
{
	qp->ops = &soft_xini_ops;
	dc_forget(qp);
}

/* an XRC initiator: the kernel's state table (XRC_INI column), a DCI's
 * data path (xrc_run) */
const struct soft_qp_ops soft_xini_ops = {
	.name = "xrc_ini",
	.post_send = dc_post_send,
	.post_recv = dc_post_recv,
	.sq_room = dci_sq_room,
	.progress = dc_progress,
	.flush = dc_flush,
	.sq_release = xini_sq_release,
	.modify = soft_xrc_modify,
	.to_rtr = xini_to_rtr,
	.reset = xini_reset,
	.destroy = dc_destroy,
	.always_pass = 1,
};

/* an XRC initiator to another host: RC's network requester (net.c),
 * whose requests carry the WR's XRC SRQ number */
const struct soft_qp_ops soft_xini_net_ops = {
	.name = "xrc_ini-net",
	.post_send = soft_net_ops_post_send,
	.post_recv = dc_post_recv,
	.sq_room = soft_net_sq_room,
	.progress = xini_net_progress,
	.flush = soft_net_progress,
	.sq_release = soft_net_sq_release,
	.modify = soft_xrc_modify,
	.to_rtr = soft_qp_op_nop,
	.reset = xini_net_reset,
	.destroy = dc_destroy,
	.always_pass = 1,
};
