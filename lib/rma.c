/* SPDX-License-Identifier: MIT */
/*
 * rma.c -- one-sided operations: RDMA write (with immediate), RDMA read,
 * 8-byte compare-and-swap and fetch-and-add.
 *
 * They share the endpoint's send queue with messages: each is one
 * signalled work request whose slot is marked RDMAMSG_SLOT_XFER, and its
 * descriptor sits in xf->ops at the slot's index, so nothing is allocated
 * per operation.  Atomic results land in a registered array of 8 bytes
 * per slot.  Bounds and permissions known locally (the export's access
 * flags) are checked before anything is posted.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#include "internal.h"
#include "fastpath.h"
#include "xfer.h"

/* rdmamsg__xop_post -- post wr (signalled) with op as its descriptor */
int rdmamsg__xop_post(struct rdmamsg_ep *ep, struct ibv_send_wr *wr,
		      const struct rdmamsg__xop *op)
{
	struct rdmamsg__xfer *xf = ep->xf;
	uint32_t idx = (uint32_t)(ep->sq_head & ep->sq_mask);
	struct rdmamsg__slot *slot = &ep->slots[idx];
	int ret;

	if (fp_sq_free(ep) == 0)
		return -EAGAIN;
	ret = ep->ln->ops->post(ep->ln, wr, ep->sq_head);
	if (ret)
		return ret == ENOMEM ? -EAGAIN : -ENOTCONN;
	xf->ops[idx] = *op;
	if (op->mr)
		op->mr->busy++;
	slot->op_ctx = NULL;
	slot->buf = NULL;
	slot->report = RDMAMSG_SLOT_XFER;
	ep->sq_head++;
	ep->sig_next = ep->sq_head;
	ep->unsignaled = 0;
	/* only a write with immediate is heard by the peer: after others
	 * the keep-alives still go (ka_timer_fire in ep.c) */
	if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		ep->last_tx = ep->ctx->now;
	return 0;
}

/* rdmamsg__xfer_slot_done -- a work request of this layer completed */
void rdmamsg__xfer_slot_done(struct rdmamsg_ep *ep, uint32_t idx, int status)
{
	struct rdmamsg__xop op = ep->xf->ops[idx];
	uint64_t value = 0;

	memset(&ep->xf->ops[idx], 0, sizeof(op));
	if (op.mr)
		op.mr->busy--;
	if (!status && ep->alive_rd)
		rdmamsg__ep_alive_ack(ep);
	switch (op.kind) {
	case OP_RMA:
		if (op.atomic && !status)
			memcpy(&value, ep->xf->atom->data + (size_t)idx * 8, 8);
		if (op.cb)
			op.cb(ep, status, value, op.op_ctx);
		break;
	case OP_PULL:
		rdmamsg__rndv_pull_done(ep, &op, status);
		break;
	case OP_INV: /* a rendezvous source's window (rndv.c) */
		rdmamsg__rndv_inv_done(ep, &op, status);
		break;
	default:
		break;
	}
}

/* rdmamsg__xfer_write_imm -- the peer's write with immediate arrived */
void rdmamsg__xfer_write_imm(struct rdmamsg_ep *ep, uint32_t imm, size_t len)
{
	if (ep->p.on_write_imm)
		ep->p.on_write_imm(ep, imm, len, ep->arg);
}

/* in_bounds -- off + len within size, without overflow */
static int in_bounds(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* msg_max -- the largest message the device takes: the least max_msg_sz
 * of its ports (ibv_query_port(3); mlx5 and softrdma say 1 GiB, rxe
 * 2 GiB), asked once; IB's 2 GiB where a port does not answer */
static uint64_t msg_max(struct rdmamsg_ctx *ctx)
{
	struct ibv_port_attr pa;
	uint32_t m = (uint32_t)1 << 31; /* IB's message limit */
	unsigned int p;

	if (ctx->max_msg)
		return ctx->max_msg;
	for (p = 1; p <= ctx->dattr.phys_port_cnt && p <= 255; p++) {
		memset(&pa, 0, sizeof(pa));
		if (!ibv_query_port(ctx->verbs, (uint8_t)p, &pa) &&
		    pa.max_msg_sz && pa.max_msg_sz < m)
			m = pa.max_msg_sz;
	}
	ctx->max_msg = m;
	return m;
}

/* check_ep -- the endpoint can take a one-sided operation */
static int check_ep(struct rdmamsg_ep *ep)
{
	return rdmamsg__ep_can_send(ep);
}

/* rw -- the common part of write, write_imm and read */
static int rw(struct rdmamsg_ep *ep, struct rdmamsg_mr *lmr, size_t loff,
	      const struct rdmamsg_rmr *rmr, size_t roff, size_t len,
	      enum ibv_wr_opcode opc, uint32_t imm,
	      void (*cb)(struct rdmamsg_ep *ep, int status, uint64_t value,
			 void *op_ctx),
	      void *op_ctx)
{
	unsigned int need = opc == IBV_WR_RDMA_READ
				    ? RDMAMSG_ACCESS_REMOTE_READ
				    : RDMAMSG_ACCESS_REMOTE_WRITE;
	struct rdmamsg__xfer *xf;
	struct rdmamsg__xop op;
	struct ibv_send_wr wr;
	struct ibv_sge sge[RDMAMSG__IOV_LOCAL_SGE];
	int ret, nsge = 1;

	if (!ep || !lmr || !rmr || lmr->ctx != ep->ctx)
		return -EINVAL;
	ret = check_ep(ep);
	if (ret)
		return ret;
	/* a DC message's immediate names its endpoint: none for the caller
	 * (rdmamsg_ep_attr_set_transport(3); lane_dc.c takes no such WR) */
	if (opc == IBV_WR_RDMA_WRITE_WITH_IMM &&
	    ep->p.transport == RDMAMSG_TRANSPORT_DC)
		return -ENOTSUP;
	if (!in_bounds(loff, len, lmr->len) || !in_bounds(roff, len, rmr->len))
		return -ERANGE;
	if (!(rmr->access & need))
		return -EACCES;
	if (len > ep->ctx->dattr.max_mr_size || len > msg_max(ep->ctx))
		return -EMSGSIZE;
	if (lmr->iov) {
		/* non-contiguous (mr_iov.c): its pieces as an SGE list */
		nsge = rdmamsg__mr_iov_sges(lmr, loff, len, sge,
					    RDMAMSG__IOV_LOCAL_SGE);
		if (nsge < 0)
			return nsge;
	}
	if (opc == IBV_WR_RDMA_WRITE_WITH_IMM && ep->credits <= 0) {
		ep->want_writable = 1;
		return -EAGAIN;
	}
	ret = rdmamsg__xfer_get(ep, &xf);
	if (ret)
		return ret;
	memset(&wr, 0, sizeof(wr));
	memset(&op, 0, sizeof(op));
	if (!lmr->iov) {
		sge[0].addr = (uintptr_t)(lmr->addr + loff);
		sge[0].length = (uint32_t)len;
		sge[0].lkey = lmr->mr->lkey;
	}
	wr.sg_list = sge;
	wr.num_sge = len ? nsge : 0;
	wr.opcode = opc;
	wr.imm_data = htobe32(imm);
	wr.wr.rdma.remote_addr = rmr->addr + roff;
	wr.wr.rdma.rkey = rmr->rkey;
	op.kind = OP_RMA;
	op.cb = cb;
	op.op_ctx = op_ctx;
	op.mr = lmr;
	ret = rdmamsg__xop_post(ep, &wr, &op);
	if (ret) {
		if (ret == -EAGAIN)
			ep->want_writable = 1;
		return ret;
	}
	if (opc == IBV_WR_RDMA_WRITE_WITH_IMM)
		ep->credits--; /* it consumes one of the peer's receives */
	return 0;
}

/* rdmamsg_write -- RDMA write */
RDMAMSG_EXPORT int rdmamsg_write(struct rdmamsg_ep *ep, struct rdmamsg_mr *lmr,
				 size_t loff, const struct rdmamsg_rmr *rmr,
				 size_t roff, size_t len,
				 void (*cb)(struct rdmamsg_ep *ep, int status,
					    uint64_t value, void *op_ctx),
				 void *op_ctx)
{
	return rw(ep, lmr, loff, rmr, roff, len, IBV_WR_RDMA_WRITE, 0, cb,
		  op_ctx);
}

/* rdmamsg_write_imm -- RDMA write the peer is told about */
RDMAMSG_EXPORT int rdmamsg_write_imm(struct rdmamsg_ep *ep,
				     struct rdmamsg_mr *lmr, size_t loff,
				     const struct rdmamsg_rmr *rmr, size_t roff,
				     size_t len, uint32_t imm,
				     void (*cb)(struct rdmamsg_ep *ep,
						int status, uint64_t value,
						void *op_ctx),
				     void *op_ctx)
{
	return rw(ep, lmr, loff, rmr, roff, len, IBV_WR_RDMA_WRITE_WITH_IMM,
		  imm, cb, op_ctx);
}

/* rdmamsg_read -- RDMA read */
RDMAMSG_EXPORT int rdmamsg_read(struct rdmamsg_ep *ep, struct rdmamsg_mr *lmr,
				size_t loff, const struct rdmamsg_rmr *rmr,
				size_t roff, size_t len,
				void (*cb)(struct rdmamsg_ep *ep, int status,
					   uint64_t value, void *op_ctx),
				void *op_ctx)
{
	return rw(ep, lmr, loff, rmr, roff, len, IBV_WR_RDMA_READ, 0, cb,
		  op_ctx);
}

/* atom_sge -- sge names the 8-byte slot of the next send WQE in the
 * endpoint's result buffer (made at the first use), where an atomic's or
 * a clock read's value comes back (op.atomic) */
static int atom_sge(struct rdmamsg_ep *ep, struct ibv_sge *sge)
{
	struct rdmamsg__xfer *xf;
	int ret;

	ret = rdmamsg__xfer_get(ep, &xf);
	if (ret)
		return ret;
	if (!xf->atom) {
		ret = rdmamsg__buf_get(ep->ctx, (size_t)(ep->sq_mask + 1) * 8,
				       BUF_LIB, &xf->atom);
		if (ret)
			return ret == -EMSGSIZE ? -ENOMEM : ret;
	}
	sge->addr = (uintptr_t)(xf->atom->data +
				(size_t)(ep->sq_head & ep->sq_mask) * 8);
	sge->length = 8;
	sge->lkey = xf->atom->lkey;
	return 0;
}

/* atomic -- the common part of the two atomics */
static int atomic(struct rdmamsg_ep *ep, const struct rdmamsg_rmr *rmr,
		  size_t roff, enum ibv_wr_opcode opc, uint64_t cmp_add,
		  uint64_t swap,
		  void (*cb)(struct rdmamsg_ep *ep, int status, uint64_t value,
			     void *op_ctx),
		  void *op_ctx)
{
	struct rdmamsg__xop op;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	int ret;

	if (!ep || !rmr || (roff & 7) || ((rmr->addr + roff) & 7))
		return -EINVAL;
	ret = check_ep(ep);
	if (ret)
		return ret;
	if (ep->ctx->dattr.atomic_cap == IBV_ATOMIC_NONE)
		return -ENOTSUP;
	if (!in_bounds(roff, 8, rmr->len))
		return -ERANGE;
	if (!(rmr->access & RDMAMSG_ACCESS_REMOTE_ATOMIC))
		return -EACCES;
	ret = atom_sge(ep, &sge);
	if (ret)
		return ret;
	memset(&wr, 0, sizeof(wr));
	memset(&op, 0, sizeof(op));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = opc;
	wr.wr.atomic.remote_addr = rmr->addr + roff;
	wr.wr.atomic.rkey = rmr->rkey;
	wr.wr.atomic.compare_add = cmp_add;
	wr.wr.atomic.swap = swap;
	op.kind = OP_RMA;
	op.cb = cb;
	op.op_ctx = op_ctx;
	op.atomic = 1;
	ret = rdmamsg__xop_post(ep, &wr, &op);
	if (ret == -EAGAIN)
		ep->want_writable = 1;
	return ret;
}

/* rdmamsg__alive_read -- read the 8 bytes of the peer's clock at raddr
 * (rkey: named in its keep-alive, ep.c) into the atomics' slot; cb gets
 * the value as an atomic's result */
int rdmamsg__alive_read(struct rdmamsg_ep *ep, uint64_t raddr, uint32_t rkey,
			void (*cb)(struct rdmamsg_ep *ep, int status,
				   uint64_t value, void *op_ctx))
{
	struct rdmamsg__xop op;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	int ret;

	ret = atom_sge(ep, &sge);
	if (ret)
		return ret;
	memset(&wr, 0, sizeof(wr));
	memset(&op, 0, sizeof(op));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	op.kind = OP_RMA;
	op.cb = cb;
	op.atomic = 1; /* the value comes back in the slot */
	return rdmamsg__xop_post(ep, &wr, &op);
}

/* rdmamsg_atomic_cas -- compare-and-swap */
RDMAMSG_EXPORT int rdmamsg_atomic_cas(struct rdmamsg_ep *ep,
				      const struct rdmamsg_rmr *rmr,
				      size_t roff, uint64_t compare,
				      uint64_t swap,
				      void (*cb)(struct rdmamsg_ep *ep,
						 int status, uint64_t value,
						 void *op_ctx),
				      void *op_ctx)
{
	return atomic(ep, rmr, roff, IBV_WR_ATOMIC_CMP_AND_SWP, compare, swap,
		      cb, op_ctx);
}

/* rdmamsg_atomic_fadd -- fetch-and-add */
RDMAMSG_EXPORT int rdmamsg_atomic_fadd(struct rdmamsg_ep *ep,
				       const struct rdmamsg_rmr *rmr,
				       size_t roff, uint64_t add,
				       void (*cb)(struct rdmamsg_ep *ep,
						  int status, uint64_t value,
						  void *op_ctx),
				       void *op_ctx)
{
	return atomic(ep, rmr, roff, IBV_WR_ATOMIC_FETCH_AND_ADD, add, 0, cb,
		      op_ctx);
}

/* rdmamsg_ep_attr_set_on_write_imm -- who sees writes with immediate */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_on_write_imm(
	struct rdmamsg_ep_attr *attr,
	void (*on_write_imm)(struct rdmamsg_ep *ep, uint32_t imm, size_t len,
			     void *arg))
{
	if (!attr)
		return -EINVAL;
	attr->p.on_write_imm = on_write_imm;
	return 0;
}
