/* SPDX-License-Identifier: MIT */
/* data.c -- RC data path: post, shm rings, one-sided ops, progress, poll */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "softrdma.h"
#include "ud.h"

/*
 * Protocol.  Each QP owns an outbound segment whose slot i belongs to SQ
 * entry i.  SEND / SEND_WITH_IMM / RDMA_WRITE_WITH_IMM publish a slot
 * (state READY, data copied when it fits, else the sender's SGE list for
 * process_vm_readv).  The peer (dest_qp_num) maps the segment at RTR and
 * consumes slots in order from any poll_cq of its context: it takes a
 * receive WQE, marks the slot BUSY, places the data, writes its verdict
 * and commits with BUSY -> DONE; the sender's poll turns DONE into the
 * send completion.  A sender that flushes or times out takes the slot
 * back in any state but DONE (READY/RNR/BUSY -> CANCEL) without waiting;
 * a responder whose commit finds CANCEL drops the message (see
 * cancel_slot).  With no
 * receive posted the responder marks the slot RNR (a NAK carrying its
 * min_rnr_timer); the sender retransmits (back to READY) after that
 * timer, rnr_retry times (7: forever).  RDMA WRITE / READ / atomics run
 * at post time with process_vm_writev/readv after checking the rkey in
 * the host registry.
 *
 * Transport timeout: while sends wait on a peer, the sender checks every
 * SOFT_LIVENESS_NS (10 ms) that the peer QP still exists in a receiving
 * state and that its process lives.  Once it does not, the head WQE fails
 * with IBV_WC_RETRY_EXC_ERR after T = 4.096 us * 2^timeout * (retry_cnt
 * + 1), capped at 1 s (timeout 0, "infinite" in IB, uses the cap), so a
 * dead peer surfaces within T + 10 ms of its death.
 */

/* IB min_rnr_timer encoding, in microseconds x 100 */
static const uint32_t rnr_table[32] = {
	65536, 1,    2,	   3,	 4,    6,     8,     12,    16,	   24,	  32,
	48,    64,   96,   128,	 192,  256,   384,   512,   768,   1024,  1536,
	2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
};

static inline struct soft_slot *slot_at(struct soft_slot *base, uint64_t i,
					uint32_t mask)
{
	return (struct soft_slot *)((char *)base +
				    (size_t)(i & mask) * SOFT_SLOT_SIZE);
}

/* soft_qp_connect -- find and map the peer QP's segment; lock held */
void soft_qp_connect(struct soft_qp *qp)
{
	struct soft_reg_qp e;
	struct soft_seg_hdr *h;
	size_t len;
	int slot;

	if (qp->peer || !qp->dest_qpn)
		return;
	slot = soft_reg_qp_lookup(qp->dest_qpn, &e);
	if (slot < 0)
		return;
	h = soft_seg_map(qp->dest_qpn, &len);
	if (!h)
		return;
	qp->peer = h;
	qp->peer_len = len;
	qp->peer_slots = (struct soft_slot *)((char *)h + SOFT_SEG_HDR);
	qp->peer_mask = h->nslots - 1;
	qp->peer_cons = 0;
	qp->peer_pid = e.pid;
	qp->peer_start = e.start;
	qp->peer_ctx_idx = e.ctx_idx;
	qp->peer_pd_id = e.pd_id;
	qp->peer_reg_slot = slot;
}

/* soft_qp_disconnect -- unmap the peer segment; lock held */
void soft_qp_disconnect(struct soft_qp *qp)
{
	if (qp->peer)
		munmap(qp->peer, qp->peer_len);
	qp->peer = NULL;
	qp->peer_slots = NULL;
	qp->peer_reg_slot = -1;
	qp->dest_qpn = 0;
}

/* soft_qp_to_error -- QP to ERR; queues flush from the next progress */
void soft_qp_to_error(struct soft_qp *qp)
{
	if (qp->state == IBV_QPS_ERR)
		return;
	soft_qp_set_state(qp, IBV_QPS_ERR);
	if (qp->srq)
		soft_async_event(qp->ctx, IBV_EVENT_QP_LAST_WQE_REACHED,
				 &qp->qpx.qp_base);
}

/* peer_wake -- poke a context whose CQ is armed (event mode) */
static inline void peer_wake(uint32_t ctx_idx)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&soft_reg->ctx[ctx_idx].armed,
				 memory_order_relaxed))
		soft_wake_ctx(ctx_idx);
}

/* local_sge -- check an SGE against the local MR table */
static int local_sge(struct soft_qp *qp, const struct ibv_sge *sge,
		     unsigned int need, struct iovec *iov)
{
	struct soft_mr *mr;

	iov->iov_len = sge->length;
	if (!sge->length) {
		iov->iov_base = NULL;
		return 0;
	}
	mr = soft_mr_lookup(sge->lkey);
	if (!mr || mr->pd != qp->pd || (need && !(mr->access & need)) ||
	    sge->addr < mr->iova || sge->addr - mr->iova > mr->mr.length ||
	    sge->length > mr->mr.length - (sge->addr - mr->iova))
		return -1;
	iov->iov_base = (char *)mr->mr.addr + (sge->addr - mr->iova);
	return 0;
}

/* peer_listed -- the target QP is registered and in a receiving state */
static int peer_listed(struct soft_qp *qp)
{
	struct soft_reg_qp *e;
	uint32_t st;

	if (!qp->peer)
		soft_qp_connect(qp);
	if (!qp->peer || qp->peer_reg_slot < 0)
		return 0;
	e = &soft_reg->qp[qp->peer_reg_slot];
	if (e->qpn != qp->dest_qpn)
		return 0;
	st = atomic_load(&e->state);
	return st >= IBV_QPS_RTR && st != IBV_QPS_ERR;
}

/* peer_reachable -- peer_listed and its process lives (syscalls) */
static int peer_reachable(struct soft_qp *qp)
{
	return peer_listed(qp) && soft_pid_alive(qp->peer_pid, qp->peer_start);
}

/*
 * remote_op -- RDMA WRITE / READ / atomic against the peer's memory.
 * Returns a wc status.  The rkey's stripe lock is held across the copy so
 * that ibv_dereg_mr on the target waits for it.
 */
static enum ibv_wc_status remote_op(struct soft_qp *qp, struct ibv_send_wr *wr,
				    const struct iovec *liov, int niov,
				    uint64_t len)
{
	uint32_t rkey, need, slot, st;
	uint64_t raddr;
	struct soft_reg_mr *m;
	struct soft_reg_qp *t;
	pthread_mutex_t *lk;
	struct iovec riov;
	enum ibv_wc_status ret = IBV_WC_SUCCESS;
	ssize_t n;

	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		need = IBV_ACCESS_REMOTE_WRITE;
		rkey = wr->wr.rdma.rkey;
		raddr = wr->wr.rdma.remote_addr;
		break;
	case IBV_WR_RDMA_READ:
		need = IBV_ACCESS_REMOTE_READ;
		rkey = wr->wr.rdma.rkey;
		raddr = wr->wr.rdma.remote_addr;
		break;
	default:
		need = IBV_ACCESS_REMOTE_ATOMIC;
		rkey = wr->wr.atomic.rkey;
		raddr = wr->wr.atomic.remote_addr;
		len = 8;
		break;
	}
	/* a dead target makes process_vm_* fail with ESRCH */
	if (!peer_listed(qp))
		return IBV_WC_RETRY_EXC_ERR;
	t = &soft_reg->qp[qp->peer_reg_slot];
	st = atomic_load(&t->state);
	if (!(atomic_load(&t->access) & need))
		return IBV_WC_REM_ACCESS_ERR;
	if (need == IBV_ACCESS_REMOTE_ATOMIC && (raddr & 7))
		return IBV_WC_REM_INV_REQ_ERR;
	(void)st;
	slot = rkey & (SOFT_MAX_MR - 1);
	lk = &soft_reg->key_lock[slot % SOFT_NSTRIPES];
	soft_stripe_lock(lk);
	m = &soft_reg->mr[slot];
	if (!rkey || m->key != rkey || m->pid != qp->peer_pid ||
	    m->pd_id != qp->peer_pd_id || !(m->access & need) ||
	    raddr < m->addr || raddr - m->addr > m->len ||
	    len > m->len - (raddr - m->addr)) {
		pthread_mutex_unlock(lk);
		return IBV_WC_REM_ACCESS_ERR;
	}
	riov.iov_base = (void *)(uintptr_t)(m->va + (raddr - m->addr));
	riov.iov_len = len;
	if (need == IBV_ACCESS_REMOTE_WRITE) {
		n = len ? process_vm_writev(qp->peer_pid, liov,
					    (unsigned long)niov, &riov, 1, 0)
			: 0;
		if (n != (ssize_t)len)
			ret = IBV_WC_RETRY_EXC_ERR;
	} else if (need == IBV_ACCESS_REMOTE_READ) {
		n = len ? process_vm_readv(qp->peer_pid, liov,
					   (unsigned long)niov, &riov, 1, 0)
			: 0;
		if (n != (ssize_t)len)
			ret = IBV_WC_RETRY_EXC_ERR;
	} else {
		uint64_t old, nv;
		struct iovec o = {&old, 8}, w = {&nv, 8};
		pthread_mutex_t *al =
			&soft_reg->atomic_lock[((uint64_t)qp->peer_pid * 31 +
						((uint64_t)riov.iov_base >>
						 3)) %
					       SOFT_NSTRIPES];

		soft_stripe_lock(al);
		if (process_vm_readv(qp->peer_pid, &o, 1, &riov, 1, 0) != 8) {
			ret = IBV_WC_RETRY_EXC_ERR;
		} else {
			int write = 1;

			if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
				nv = wr->wr.atomic.swap;
				write = old == wr->wr.atomic.compare_add;
			} else {
				nv = old + wr->wr.atomic.compare_add;
			}
			if (write && process_vm_writev(qp->peer_pid, &w, 1,
						       &riov, 1, 0) != 8)
				ret = IBV_WC_RETRY_EXC_ERR;
		}
		pthread_mutex_unlock(al);
		if (ret == IBV_WC_SUCCESS)
			memcpy(liov[0].iov_base, &old, 8);
	}
	pthread_mutex_unlock(lk);
	return ret;
}

static enum ibv_wc_opcode wc_opcode_of(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	default:
		return IBV_WC_SEND;
	}
}

/* check_wr -- what makes ibv_post_send fail immediately */
static int check_wr(struct soft_qp *qp, struct ibv_send_wr *wr, uint64_t *len)
{
	uint64_t total = 0;
	int i;

	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		if (wr->num_sge != 1 || wr->sg_list[0].length < 8 ||
		    (wr->send_flags & IBV_SEND_INLINE))
			return EINVAL;
		break;
	default:
		return EINVAL;
	}
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge ||
	    (wr->num_sge && !wr->sg_list))
		return EINVAL;
	for (i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if (wr->send_flags & IBV_SEND_INLINE) {
		if (wr->opcode == IBV_WR_RDMA_READ ||
		    total > qp->cap.max_inline_data)
			return EINVAL;
	}
	if (qp->sq_head - qp->sq_tail >= qp->cap.max_send_wr)
		return ENOMEM;
	*len = total;
	return 0;
}

/* gather -- local iovecs of a WR (inline data needs no key) */
static enum ibv_wc_status gather(struct soft_qp *qp, struct ibv_send_wr *wr,
				 unsigned int need, struct iovec *iov)
{
	int i;

	for (i = 0; i < wr->num_sge; i++) {
		if (wr->send_flags & IBV_SEND_INLINE) {
			iov[i].iov_base =
				(void *)(uintptr_t)wr->sg_list[i].addr;
			iov[i].iov_len = wr->sg_list[i].length;
		} else if (local_sge(qp, &wr->sg_list[i], need, &iov[i])) {
			return IBV_WC_LOC_PROT_ERR;
		}
	}
	return IBV_WC_SUCCESS;
}

/* post_one -- execute or publish one send WR; lock held */
static void post_one(struct soft_qp *qp, struct ibv_send_wr *wr, uint64_t len)
{
	uint64_t idx = qp->sq_head;
	struct soft_swqe *e = &qp->sq[idx & qp->sq_mask];
	struct soft_slot *s;
	struct iovec iov[SOFT_MAX_SGE];
	enum ibv_wc_status st;
	uint32_t flags = 0;
	int i;

	e->wr_id = wr->wr_id;
	e->wc_opcode = wc_opcode_of(wr->opcode);
	e->byte_len = (uint32_t)len;
	e->signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	e->kind = SOFT_WQE_DONE;
	qp->sq_head++;
	if (qp->state == IBV_QPS_ERR || qp->sq_err_pending) {
		e->status = IBV_WC_WR_FLUSH_ERR;
		return;
	}
	if (len > SOFT_MAX_MSG_SZ) {
		e->status = IBV_WC_LOC_LEN_ERR;
		goto failed;
	}
	st = gather(qp, wr,
		    wr->opcode == IBV_WR_RDMA_READ ||
				    wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
				    wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD
			    ? IBV_ACCESS_LOCAL_WRITE
			    : 0,
		    iov);
	if (st != IBV_WC_SUCCESS) {
		e->status = st;
		goto failed;
	}
	if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM) {
		st = remote_op(qp, wr, iov, wr->num_sge, len);
		if (st != IBV_WC_SUCCESS) {
			e->status = st;
			goto failed;
		}
		if (wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) {
			e->status = IBV_WC_SUCCESS;
			return;
		}
	}
	/* two-sided: publish the next message slot */
	idx = qp->tx_msgno++;
	e->msgno = idx;
	s = slot_at(qp->slots, idx, qp->sq_mask);
	s->len = (uint32_t)len;
	s->status = SOFT_ACK;
	s->imm = wr->imm_data;
	if (wr->opcode == IBV_WR_SEND_WITH_IMM ||
	    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		flags |= SOFT_SF_IMM;
	if (wr->send_flags & IBV_SEND_SOLICITED)
		flags |= SOFT_SF_SOLICITED;
	if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
		s->opcode = SOFT_OP_WRITE_IMM;
	} else if (len <= SOFT_SLOT_PAYLOAD) {
		uint8_t *p = s->payload;

		s->opcode = SOFT_OP_SEND;
		flags |= SOFT_SF_COPIED;
		for (i = 0; i < wr->num_sge; i++) {
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
			p += iov[i].iov_len;
		}
	} else {
		struct soft_remote_sge *r = (void *)s->payload;
		int n = 0;

		s->opcode = SOFT_OP_SEND;
		for (i = 0; i < wr->num_sge; i++) {
			if (!iov[i].iov_len)
				continue;
			r[n].addr = (uintptr_t)iov[i].iov_base;
			r[n].len = iov[i].iov_len;
			n++;
		}
		s->nsge = (uint32_t)n;
		s->pid = soft_self_pid;
	}
	s->flags = flags;
	atomic_store_explicit(&s->state, SOFT_SLOT_STATE(idx, SOFT_SLOT_READY),
			      memory_order_release);
	e->kind = SOFT_WQE_RING;
	qp->ctx->outstanding++;
	if (qp->peer)
		peer_wake(qp->peer_ctx_idx);
	return;

failed:
	/* later WRs are not executed: the QP errs when this one completes */
	qp->sq_err_pending = 1;
}

static void tx_qp(struct soft_qp *qp);
static void flush_rq(struct soft_qp *qp);

/*
 * soft_qp_flush -- push the completions that are due now (finished send
 * WQEs in order, a QP in ERR flushes its receives), so that an armed CQ
 * signals its channel at once; lock held
 */
void soft_qp_flush(struct soft_qp *qp)
{
	if (qp->ud) {
		soft_ud_flush(qp); /* UD/UC (ud.c) */
		return;
	}
	if (qp->sq_tail != qp->sq_head)
		tx_qp(qp);
	if (qp->state == IBV_QPS_ERR && qp->rq_tail != qp->rq_head)
		flush_rq(qp);
}

/* soft_post_send -- ibv_post_send for softrdma QPs */
int soft_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		   struct ibv_send_wr **bad)
{
	struct soft_qp *qp = to_sqp(ibqp);
	uint64_t len;
	int ret = 0;

	if (qp->ud) /* UD/UC (ud.c) */
		return soft_ud_post_send(ibqp, wr, bad);
	pthread_mutex_lock(&qp->ctx->lock);
	if (qp->state < IBV_QPS_RTS) {
		ret = EINVAL;
		*bad = wr;
		goto out;
	}
	for (; wr; wr = wr->next) {
		ret = check_wr(qp, wr, &len);
		if (ret) {
			*bad = wr;
			break;
		}
		post_one(qp, wr, len);
	}
	/*
	 * One-sided ops, local errors and flushes are finished at post
	 * time: their completions (and the event of an armed CQ) are due
	 * now, not at the next poll or progress-thread sweep.  (A SEND
	 * in flight at the tail holds back what follows it.)
	 */
	if (qp->sq_tail != qp->sq_head &&
	    qp->sq[qp->sq_tail & qp->sq_mask].kind == SOFT_WQE_DONE)
		tx_qp(qp);
out:
	pthread_mutex_unlock(&qp->ctx->lock);
	return ret;
}

/* soft_post_recv -- ibv_post_recv */
int soft_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		   struct ibv_recv_wr **bad)
{
	struct soft_qp *qp = to_sqp(ibqp);
	struct soft_rwqe *r;
	int ret = 0;

	if (qp->ud) /* UD/UC (ud.c) */
		return soft_ud_post_recv(ibqp, wr, bad);
	pthread_mutex_lock(&qp->ctx->lock);
	if (qp->srq || qp->state == IBV_QPS_RESET) {
		ret = EINVAL;
		*bad = wr;
		goto out;
	}
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 ||
		    (uint32_t)wr->num_sge > qp->cap.max_recv_sge ||
		    (wr->num_sge && !wr->sg_list)) {
			ret = EINVAL;
			*bad = wr;
			break;
		}
		if (qp->rq_head - qp->rq_tail >= qp->cap.max_recv_wr) {
			ret = ENOMEM;
			*bad = wr;
			break;
		}
		r = &qp->rq[qp->rq_head & (qp->rq_size - 1)];
		r->wr_id = wr->wr_id;
		r->num_sge = (uint32_t)wr->num_sge;
		memcpy(r->sge, wr->sg_list,
		       (size_t)wr->num_sge * sizeof(*wr->sg_list));
		qp->rq_head++;
	}
	if (qp->state == IBV_QPS_ERR)
		soft_qp_flush(qp);
out:
	pthread_mutex_unlock(&qp->ctx->lock);
	return ret;
}

/* soft_post_srq_recv -- ibv_post_srq_recv */
int soft_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad)
{
	struct soft_srq *srq = to_ssrq(ibsrq);
	struct soft_rwqe *r;
	int ret = 0;

	pthread_mutex_lock(&srq->ctx->lock);
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > srq->max_sge ||
		    (wr->num_sge && !wr->sg_list)) {
			ret = EINVAL;
			*bad = wr;
			break;
		}
		if (srq->head - srq->tail >= srq->max_wr) {
			ret = ENOMEM;
			*bad = wr;
			break;
		}
		r = &srq->rq[srq->head & (srq->size - 1)];
		r->wr_id = wr->wr_id;
		r->num_sge = (uint32_t)wr->num_sge;
		memcpy(r->sge, wr->sg_list,
		       (size_t)wr->num_sge * sizeof(*wr->sg_list));
		srq->head++;
	}
	pthread_mutex_unlock(&srq->ctx->lock);
	return ret;
}

/* place -- put a SEND's data into a receive WQE; returns wc status */
static enum ibv_wc_status place(struct soft_qp *qp, struct soft_slot *s,
				struct soft_rwqe *r, uint32_t *nak)
{
	struct iovec iov[SOFT_MAX_SGE];
	uint64_t room = 0, left = s->len;
	uint32_t i, n = 0;

	for (i = 0; i < r->num_sge; i++)
		room += r->sge[i].length;
	if (room < s->len) {
		*nak = SOFT_NAK_INV_REQ;
		return IBV_WC_LOC_LEN_ERR;
	}
	for (i = 0; i < r->num_sge && left; i++) {
		if (local_sge(qp, &r->sge[i], IBV_ACCESS_LOCAL_WRITE,
			      &iov[n])) {
			*nak = SOFT_NAK_REM_OP;
			return IBV_WC_LOC_PROT_ERR;
		}
		if (iov[n].iov_len > left)
			iov[n].iov_len = left;
		left -= iov[n].iov_len;
		n++;
	}
	if (s->flags & SOFT_SF_COPIED) {
		const uint8_t *p = s->payload;

		for (i = 0; i < n; i++) {
			memcpy(iov[i].iov_base, p, iov[i].iov_len);
			p += iov[i].iov_len;
		}
	} else if (s->len) {
		struct iovec riov[SOFT_MAX_SGE];
		const struct soft_remote_sge *rs = (const void *)s->payload;
		uint32_t k;

		for (k = 0; k < s->nsge && k < SOFT_MAX_SGE; k++) {
			riov[k].iov_base = (void *)(uintptr_t)rs[k].addr;
			riov[k].iov_len = rs[k].len;
		}
		if (process_vm_readv(s->pid, iov, n, riov, k, 0) !=
		    (ssize_t)s->len) {
			*nak = SOFT_NAK_REM_OP;
			return IBV_WC_GENERAL_ERR; /* sender vanished */
		}
	}
	*nak = SOFT_ACK;
	return IBV_WC_SUCCESS;
}

/* rx_qp -- consume the peer's slots in order; lock held */
static void rx_qp(struct soft_qp *qp)
{
	struct soft_slot *s;
	struct soft_rwqe *r;
	struct ibv_wc wc;
	uint64_t st;
	uint32_t nak;
	int budget = 64, cancelled;

	if (qp->state < IBV_QPS_RTR || qp->state == IBV_QPS_ERR ||
	    atomic_load_explicit(&qp->peer->dest_qpn, memory_order_relaxed) !=
		    qp->qpx.qp_base.qp_num)
		return;
	while (budget--) {
		s = slot_at(qp->peer_slots, qp->peer_cons, qp->peer_mask);
		st = atomic_load_explicit(&s->state, memory_order_acquire);
		if ((st >> 8) != qp->peer_cons + 1)
			return;
		switch (st & 0xff) {
		case SOFT_SLOT_READY:
			break;
		case SOFT_SLOT_CANCEL:
		case SOFT_SLOT_DONE:
			qp->peer_cons++;
			continue;
		default:
			return; /* RNR: wait for the retransmission */
		}
		if (qp->srq) {
			if (qp->srq->head == qp->srq->tail)
				r = NULL;
			else
				r = &qp->srq->rq[qp->srq->tail &
						 (qp->srq->size - 1)];
		} else {
			r = qp->rq_head == qp->rq_tail
				    ? NULL
				    : &qp->rq[qp->rq_tail & (qp->rq_size - 1)];
		}
		if (!r) {
			s->rnr_timer = qp->attr.min_rnr_timer;
			atomic_compare_exchange_strong(
				&s->state, &st,
				SOFT_SLOT_STATE(qp->peer_cons, SOFT_SLOT_RNR));
			peer_wake(qp->peer->ctx_idx);
			return;
		}
		if (!atomic_compare_exchange_strong(
			    &s->state, &st,
			    SOFT_SLOT_STATE(qp->peer_cons, SOFT_SLOT_BUSY)))
			continue; /* cancelled meanwhile */
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = r->wr_id;
		wc.qp_num = qp->qpx.qp_base.qp_num;
		wc.src_qp = qp->dest_qpn;
		wc.byte_len = s->len;
		if (s->flags & SOFT_SF_IMM) {
			wc.imm_data = s->imm;
			wc.wc_flags = IBV_WC_WITH_IMM;
		}
		if (s->opcode == SOFT_OP_WRITE_IMM) {
			wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
			wc.status = IBV_WC_SUCCESS;
			nak = SOFT_ACK;
		} else {
			wc.opcode = IBV_WC_RECV;
			wc.status = place(qp, s, r, &nak);
		}
		s->status = nak;
		st = SOFT_SLOT_STATE(qp->peer_cons, SOFT_SLOT_BUSY);
		cancelled = !atomic_compare_exchange_strong_explicit(
			&s->state, &st,
			SOFT_SLOT_STATE(qp->peer_cons, SOFT_SLOT_DONE),
			memory_order_acq_rel, memory_order_acquire);
		qp->peer_cons++;
		peer_wake(qp->peer->ctx_idx);
		/*
		 * The sender died, or flushed the WQE while we copied (its
		 * buffer may have changed under process_vm_readv): the
		 * message never arrived whole, the WQE stays posted and its
		 * buffer holds undefined bytes, as after a partial message.
		 */
		if (wc.status == IBV_WC_GENERAL_ERR ||
		    (cancelled && wc.status == IBV_WC_SUCCESS))
			continue;
		if (qp->srq) {
			qp->srq->tail++;
			soft_srq_check_limit(qp->srq);
		} else {
			qp->rq_tail++;
		}
		soft_cq_push(qp->rcq, &wc, !!(s->flags & SOFT_SF_SOLICITED));
		if (wc.status != IBV_WC_SUCCESS) {
			soft_qp_to_error(qp);
			return;
		}
	}
}

static enum ibv_wc_status nak_status(uint32_t nak)
{
	switch (nak) {
	case SOFT_ACK:
		return IBV_WC_SUCCESS;
	case SOFT_NAK_INV_REQ:
		return IBV_WC_REM_INV_REQ_ERR;
	case SOFT_NAK_REM_ACCESS:
		return IBV_WC_REM_ACCESS_ERR;
	default:
		return IBV_WC_REM_OP_ERR;
	}
}

/*
 * cancel_slot -- withdraw a published slot; returns its final verdict.
 * Never waits for the responder (a flush does not wait for the remote
 * side): a BUSY slot (the responder is placing the data) is cancelled
 * too.  The responder commits a message only by turning BUSY into DONE,
 * so once the slot reads CANCEL whatever it still reads from our buffer
 * (process_vm_readv, read-only) is dropped, never delivered: the buffer
 * is the caller's again as soon as the WQE completes.
 */
static enum ibv_wc_status cancel_slot(struct soft_slot *s, uint64_t idx,
				      enum ibv_wc_status why)
{
	uint64_t st = atomic_load_explicit(&s->state, memory_order_acquire);

	for (;;) {
		switch (st & 0xff) {
		case SOFT_SLOT_DONE:
			return nak_status(s->status);
		case SOFT_SLOT_CANCEL:
			return why;
		default: /* READY, RNR, BUSY */
			if (atomic_compare_exchange_strong_explicit(
				    &s->state, &st,
				    SOFT_SLOT_STATE(idx, SOFT_SLOT_CANCEL),
				    memory_order_acq_rel, memory_order_acquire))
				return why;
			break; /* st reloaded: the responder moved it */
		}
	}
}

/* transport_timeout_ns -- (retry_cnt + 1) * 4.096 us * 2^timeout, capped */
static uint64_t transport_timeout_ns(struct soft_qp *qp)
{
	uint64_t t;

	if (!qp->attr.timeout || qp->attr.timeout > 28)
		return SOFT_TIMEOUT_CAP_NS;
	t = (4096ull << qp->attr.timeout) * (qp->attr.retry_cnt + 1u);
	return t < SOFT_TIMEOUT_CAP_NS ? t : SOFT_TIMEOUT_CAP_NS;
}

/* tx_qp -- turn finished send WQEs into completions, in order */
static void tx_qp(struct soft_qp *qp)
{
	struct soft_swqe *e;
	struct soft_slot *s;
	struct ibv_wc wc;
	enum ibv_wc_status status;
	uint64_t st, now;

	while (qp->sq_tail != qp->sq_head) {
		e = &qp->sq[qp->sq_tail & qp->sq_mask];
		if (e->kind == SOFT_WQE_RING) {
			s = slot_at(qp->slots, e->msgno, qp->sq_mask);
			st = atomic_load_explicit(&s->state,
						  memory_order_acquire);
			if ((st & 0xff) == SOFT_SLOT_DONE) {
				status = nak_status(s->status);
			} else if (qp->state == IBV_QPS_ERR) {
				status = cancel_slot(s, e->msgno,
						     IBV_WC_WR_FLUSH_ERR);
				if (status == IBV_WC_SUCCESS)
					status = IBV_WC_WR_FLUSH_ERR;
			} else if ((st & 0xff) == SOFT_SLOT_RNR) {
				uint32_t code = s->rnr_timer & 31;

				/* an RNR NAK with no retry left fails at once */
				if (qp->attr.rnr_retry != 7 &&
				    qp->rnr_count >= qp->attr.rnr_retry) {
					status = cancel_slot(
						s, e->msgno,
						IBV_WC_RNR_RETRY_EXC_ERR);
				} else {
					now = soft_now_ns();
					if (!qp->rnr_since)
						qp->rnr_since = now;
					if (now - qp->rnr_since <
					    (uint64_t)rnr_table[code] *
						    10000ull)
						return;
					qp->rnr_count++;
					qp->rnr_since = 0;
					atomic_compare_exchange_strong(
						&s->state, &st,
						SOFT_SLOT_STATE(
							e->msgno,
							SOFT_SLOT_READY));
					if (qp->peer)
						peer_wake(qp->peer_ctx_idx);
					return;
				}
			} else {
				/* in flight: is the responder still there? */
				now = soft_now_ns();
				if (now < qp->next_check)
					return;
				qp->next_check = now + SOFT_LIVENESS_NS;
				if (peer_reachable(qp)) {
					qp->dead_since = 0;
					return;
				}
				if (!qp->dead_since)
					qp->dead_since = now;
				if (now - qp->dead_since <
				    transport_timeout_ns(qp)) {
					qp->next_check = now + 1000000;
					return;
				}
				status = cancel_slot(s, e->msgno,
						     IBV_WC_RETRY_EXC_ERR);
			}
			qp->ctx->outstanding--;
			qp->rnr_count = 0;
			qp->rnr_since = 0;
			qp->dead_since = 0;
		} else {
			status = (enum ibv_wc_status)e->status;
		}
		qp->sq_tail++;
		if (status != IBV_WC_SUCCESS || e->signaled) {
			memset(&wc, 0, sizeof(wc));
			wc.wr_id = e->wr_id;
			wc.status = status;
			wc.opcode = (enum ibv_wc_opcode)e->wc_opcode;
			wc.byte_len = e->byte_len;
			wc.qp_num = qp->qpx.qp_base.qp_num;
			soft_cq_push(qp->scq, &wc, 0);
		}
		if (status != IBV_WC_SUCCESS)
			soft_qp_to_error(qp);
	}
	if (qp->sq_err_pending && qp->state == IBV_QPS_ERR)
		qp->sq_err_pending = 0;
}

/* flush_rq -- a QP in ERR completes its receive WQEs with FLUSH */
static void flush_rq(struct soft_qp *qp)
{
	struct ibv_wc wc;

	while (qp->rq_tail != qp->rq_head) {
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = qp->rq[qp->rq_tail & (qp->rq_size - 1)].wr_id;
		wc.status = IBV_WC_WR_FLUSH_ERR;
		wc.opcode = IBV_WC_RECV;
		wc.qp_num = qp->qpx.qp_base.qp_num;
		qp->rq_tail++;
		soft_cq_push(qp->rcq, &wc, 0);
	}
}

/* soft_progress -- one sweep over the context's QPs; lock held */
void soft_progress(struct soft_context *ctx)
{
	struct soft_list *l;

	for (l = ctx->qps.next; l != &ctx->qps; l = l->next) {
		struct soft_qp *qp = soft_container_of(l, struct soft_qp, link);

		if (qp->ud) { /* UD/UC (ud.c) */
			soft_ud_progress(qp);
			continue;
		}
		if (qp->peer)
			rx_qp(qp);
		else if (qp->dest_qpn && qp->state >= IBV_QPS_RTR &&
			 qp->state != IBV_QPS_ERR) {
			uint64_t now = soft_now_ns();

			if (now >= qp->next_check) {
				qp->next_check = now + SOFT_LIVENESS_NS;
				soft_qp_connect(qp);
			}
		}
		if (qp->sq_tail != qp->sq_head)
			tx_qp(qp);
		if (qp->state == IBV_QPS_ERR && qp->rq_tail != qp->rq_head)
			flush_rq(qp);
	}
}

/* soft_poll_cq -- ibv_poll_cq: progress the context, then drain */
int soft_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct soft_cq *cq = to_scq(ibcq);
	int i;

	pthread_mutex_lock(&cq->ctx->lock);
	soft_progress(cq->ctx);
	for (i = 0; i < n && cq->count; i++) {
		wc[i] = cq->q[cq->head].wc;
		cq->head = (cq->head + 1) % cq->size;
		cq->count--;
	}
	pthread_mutex_unlock(&cq->ctx->lock);
	return i;
}

/* thread_main -- progress for contexts that wait on events */
static void *thread_main(void *arg)
{
	struct soft_context *ctx = arg;
	_Atomic uint32_t *w = &soft_reg->ctx[ctx->reg_idx].wake;
	uint32_t v;

	while (!atomic_load(&ctx->thread_stop)) {
		v = atomic_load(w);
		if (ctx->narmed && !pthread_mutex_trylock(&ctx->lock)) {
			soft_progress(ctx);
			pthread_mutex_unlock(&ctx->lock);
		}
		soft_futex_wait(w, v,
				ctx->outstanding && ctx->narmed ? 1000000
								: 100000000);
	}
	return NULL;
}

/* soft_thread_start -- start the progress thread once */
void soft_thread_start(struct soft_context *ctx)
{
	sigset_t all, old;

	pthread_mutex_lock(&ctx->lock);
	if (!ctx->thread_started) {
		/*
		 * The thread inherits our mask: with every signal blocked the
		 * program's signals (qperf's SIGALRM) go to its own threads.
		 */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		if (!pthread_create(&ctx->thread, NULL, thread_main, ctx))
			ctx->thread_started = 1;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_mutex_unlock(&ctx->lock);
}

/* soft_thread_stop -- stop and join the progress thread */
void soft_thread_stop(struct soft_context *ctx)
{
	if (!ctx->thread_started)
		return;
	atomic_store(&ctx->thread_stop, 1);
	soft_wake_ctx((uint32_t)ctx->reg_idx);
	pthread_join(ctx->thread, NULL);
	ctx->thread_started = 0;
}
