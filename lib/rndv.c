/* SPDX-License-Identifier: MIT */
/*
 * rndv.c -- large messages by rendezvous.
 *
 * Sender: the bytes sit in a registration (the caller's, for
 * rdmamsg_send_mr(), or one made for the transfer over a copy, for
 * rdmamsg_send()); an X_RTS control message announces address, length and
 * rkey.  Receiver: the allocation callback (or the library, with malloc
 * and an on-the-fly registration) picks the destination; RDMA READs of
 * CHUNK bytes pull it, at most MAX_READS in flight per endpoint, taken in
 * turn from every active transfer so that none blocks another, and with
 * SQ_RESERVE send slots always left to messages.  When the last chunk is
 * in, X_FIN tells the sender (its on_send fires and it drops the
 * registration) and the message is delivered.  Receive memory is bounded:
 * transfers start only while the bytes being pulled stay under the large
 * maximum (one always may start).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "dispatch.h"
#include "fastpath.h"
#include "xfer.h"

#define MIN_LARGE ((size_t)4096)
#define MAX_LARGE ((size_t)1 << 40)

#define CHUNK	  ((uint64_t)8 << 20)
#define MAX_READS 4

struct rndv_send {
	void *mem;		/* our copy (rdmamsg_send), or NULL */
	struct ibv_mr *tmr;	/* its registration */
	struct rdmamsg_mr *umr; /* the caller's (rdmamsg_send_mr) */
	void *op_ctx;
	int report;
};

struct rdmamsg__pull {
	struct rdmamsg__list link;
	struct rdmamsg__xhdr x; /* the sender's X_RTS */
	char *dest;
	void *own; /* library memory, or NULL */
	struct ibv_mr *own_mr;
	struct rdmamsg_mr *umr; /* the allocation callback's region */
	uint64_t posted, done;
	uint32_t inflight;
	int active;
	int failed;
	int in_alloc; /* inside the allocation callback */
};

/* sq_reserve -- send slots the pulls leave to messages */
static uint32_t sq_reserve(const struct rdmamsg_ep *ep)
{
	return ep->p.send_depth / 4 ? ep->p.send_depth / 4 : 1;
}

/* send_free -- release a sender's registration and copy */
static void send_free(struct rdmamsg_ep *ep, struct rndv_send *s)
{
	if (s->tmr)
		ep->ctx->ops->dereg_mr(s->tmr);
	free(s->mem);
	if (s->umr)
		s->umr->busy--;
	free(s);
}

/* rdmamsg__rndv_send -- announce len bytes at data (in mr, or copied) */
int rdmamsg__rndv_send(struct rdmamsg_ep *ep, int inner, uint64_t req,
		       const void *data, size_t len, struct rdmamsg_mr *mr,
		       int has_imm, uint32_t imm, void *op_ctx, int report)
{
	struct rdmamsg__xfer *xf;
	struct rndv_send *s;
	struct rdmamsg__xhdr x;
	uint64_t id;
	int ret;

	ret = rdmamsg__ep_can_send(ep);
	if (ret)
		return ret;
	ret = rdmamsg__xfer_get(ep, &xf);
	if (ret)
		return ret;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	memset(&x, 0, sizeof(x));
	if (mr) {
		s->umr = mr;
		x.rkey = mr->mr->rkey;
	} else {
		/* one copy: the caller may reuse data on return */
		if (posix_memalign(&s->mem, 4096, len)) {
			s->mem = NULL;
			ret = -ENOMEM;
			goto err_free_send;
		}
		memcpy(s->mem, data, len);
		data = s->mem;
		errno = 0;
		/* its own registration, remote read only, for this one
		 * transfer: the peer reaches these bytes and nothing else */
		s->tmr = ep->ctx->ops->reg_mr(ep->ctx->pd, s->mem, len,
					      IBV_ACCESS_REMOTE_READ);
		if (!s->tmr) {
			ret = rdmamsg__errno(ENOMEM);
			LOG_ERR("registering %zu bytes to send failed: %d", len,
				ret);
			goto err_free_send;
		}
		x.rkey = s->tmr->rkey;
	}
	s->op_ctx = op_ctx;
	s->report = report;
	ret = rdmamsg__idt_add(&xf->sends, s, &id);
	if (ret)
		goto err_free_send;
	x.kind = X_RTS;
	x.inner = (uint8_t)inner;
	x.flags = has_imm ? XF_IMM : 0;
	x.id = id;
	x.req = req;
	x.addr = (uint64_t)(uintptr_t)data;
	x.len = len;
	x.imm = imm;
	ret = rdmamsg__xfer_send(ep, &x, NULL, 0);
	if (ret)
		goto err_del_id;
	if (mr)
		mr->busy++;
	s->umr = mr;
	return 0;

err_del_id:
	rdmamsg__idt_del(&xf->sends, id);
err_free_send:
	s->umr = NULL;
	send_free(ep, s);
	return ret;
}

/* a FIN that found no pool memory: sent again after later completions */
struct fin_wait {
	struct rdmamsg__list link;
	uint64_t id;
	int status;
};

/* fin_post -- one FIN on the wire: 0, or xfer_send's error */
static int fin_post(struct rdmamsg_ep *ep, uint64_t id, int status)
{
	struct rdmamsg__xhdr x;

	memset(&x, 0, sizeof(x));
	x.kind = X_FIN;
	x.id = id;
	x.status = status;
	return rdmamsg__xfer_send(ep, &x, NULL, 0);
}

/* send_fin -- tell the sender its transfer is over (status 0 or refusal);
 * a full pool delays it (the sender waits), never ends the connection */
static void send_fin(struct rdmamsg_ep *ep, uint64_t id, int status)
{
	struct fin_wait *w;
	int ret;

	/* the wire carries an errno: an allocation callback's odd value is
	 * still a refusal */
	status = status < 0 && status >= -4095 ? status
		 : status		       ? -EREMOTEIO
					       : 0;
	ret = list_empty(&ep->xf->fins) ? fin_post(ep, id, status) : -EAGAIN;
	if (ret != -EAGAIN && ret != -ENOMEM)
		return; /* sent, or the connection is going down anyway */
	w = malloc(sizeof(*w));
	if (!w) {
		LOG_ERR("no memory for a rendezvous FIN");
		rdmamsg__ep_down(ep, -ENOBUFS);
		return;
	}
	w->id = id;
	w->status = status;
	/* the next completion's flush sends it (rdmamsg__xfer_flush) */
	list_add_tail(&ep->xf->fins, &w->link);
	rdmamsg__ep_xwait(ep);
}

/* rdmamsg__rndv_fin_retry -- send the FINs that waited, in order */
void rdmamsg__rndv_fin_retry(struct rdmamsg_ep *ep)
{
	struct rdmamsg__list *pos, *tmp;

	list_for_each_safe (pos, tmp, &ep->xf->fins) {
		struct fin_wait *w = container_of(pos, struct fin_wait, link);

		if (fin_post(ep, w->id, w->status))
			return;
		list_del(pos);
		free(w);
	}
}

/* fin_recv -- our transfer is over */
static void fin_recv(struct rdmamsg_ep *ep, const struct rdmamsg__xhdr *x)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct rndv_send *s = rdmamsg__idt_find(&xf->sends, x->id);

	if (!s) {
		LOG_ERR("rendezvous FIN for unknown transfer %llx",
			(unsigned long long)x->id);
		rdmamsg__ep_down(ep, -EPROTO);
		return;
	}
	rdmamsg__idt_del(&xf->sends, x->id);
	if (s->report && ep->cbs.on_send)
		ep->cbs.on_send(ep, x->status, s->op_ctx, ep->arg);
	send_free(ep, s);
}

/* pull_free -- release a receive's destination (unless the caller's) */
static void pull_free(struct rdmamsg_ep *ep, struct rdmamsg__pull *p)
{
	struct rdmamsg__xfer *xf = ep->xf;

	list_del(&p->link);
	if (p->active) {
		xf->active_pulls--;
		xf->active_bytes -= p->x.len;
	}
	if (p->own_mr)
		ep->ctx->ops->dereg_mr(p->own_mr);
	free(p->own);
	if (p->umr)
		p->umr->busy--;
	free(p);
}

/* rdmamsg__rndv_recv -- X_RTS or X_FIN arrived */
void rdmamsg__rndv_recv(struct rdmamsg_ep *ep, const struct rdmamsg__xhdr *x)
{
	struct rdmamsg__pull *p;

	if (x->kind == X_FIN) {
		fin_recv(ep, x);
		return;
	}
	if (x->len > ep->p.max_large || !x->len) {
		send_fin(ep, x->id, -EMSGSIZE);
		return;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		send_fin(ep, x->id, -ENOMEM);
		return;
	}
	p->x = *x;
	list_add_tail(&ep->xf->pulls, &p->link);
	rdmamsg__rndv_pump(ep);
	rdmamsg__ep_xwait(ep);
}

/* activate -- choose the destination of a queued receive; 0 or refusal */
static int activate(struct rdmamsg_ep *ep, struct rdmamsg__pull *p)
{
	struct rdmamsg_mr *mr = NULL;
	void *data = NULL;
	size_t len = (size_t)p->x.len;
	int ret;

	if (p->x.inner == X_MSG && ep->p.recv_alloc) {
		ret = ep->p.recv_alloc(ep, len, &data, &mr, ep->arg);
		if (ret < 0)
			return ret;
		if (mr) {
			/* a region over pieces (mr_iov.c) has no one
			 * address to deliver: not a receive target */
			if (mr->iov || !data || (char *)data < mr->addr ||
			    (size_t)((char *)data - mr->addr) > mr->len ||
			    len > mr->len - (size_t)((char *)data - mr->addr)) {
				LOG_ERR("allocation callback's buffer is not "
					"inside its region");
				return -EINVAL;
			}
			p->dest = data;
			p->umr = mr;
			mr->busy++;
			return 0;
		}
	}
	if (posix_memalign(&p->own, 4096, len)) {
		p->own = NULL;
		return -ENOMEM;
	}
	errno = 0;
	p->own_mr = ep->ctx->ops->reg_mr(ep->ctx->pd, p->own, len,
					 IBV_ACCESS_LOCAL_WRITE);
	if (!p->own_mr) {
		ret = rdmamsg__errno(ENOMEM);
		free(p->own);
		p->own = NULL;
		return ret;
	}
	p->dest = p->own;
	return 0;
}

/* post_chunk -- one RDMA READ of the next chunk of p */
static int post_chunk(struct rdmamsg_ep *ep, struct rdmamsg__pull *p)
{
	uint64_t n = p->x.len - p->posted;
	struct rdmamsg__xop op;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	int ret;

	if (n > CHUNK)
		n = CHUNK;
	memset(&wr, 0, sizeof(wr));
	memset(&op, 0, sizeof(op));
	sge.addr = (uintptr_t)(p->dest + p->posted);
	sge.length = (uint32_t)n;
	sge.lkey = p->own_mr ? p->own_mr->lkey : p->umr->mr->lkey;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = p->x.addr + p->posted;
	wr.wr.rdma.rkey = p->x.rkey;
	op.kind = OP_PULL;
	op.pull = p;
	op.len = (uint32_t)n;
	ret = rdmamsg__xop_post(ep, &wr, &op);
	if (ret)
		return ret;
	p->posted += n;
	p->inflight++;
	ep->xf->reads_inflight++;
	return 0;
}

/* rdmamsg__rndv_pump -- start receives and keep their reads flowing */
void rdmamsg__rndv_pump(struct rdmamsg_ep *ep)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct rdmamsg__list *pos, *tmp;
	int progress = 1, ret;

	if (xf->down || rdmamsg__ep_can_send(ep))
		return;
	list_for_each_safe (pos, tmp, &xf->pulls) {
		struct rdmamsg__pull *p =
			container_of(pos, struct rdmamsg__pull, link);

		if (p->active)
			continue;
		if (xf->active_pulls &&
		    xf->active_bytes + p->x.len > ep->p.max_large)
			break; /* memory bound: later, in order */
		p->in_alloc = 1;
		ret = activate(ep, p);
		p->in_alloc = 0;
		if (xf->down) {
			/* the callback closed the endpoint */
			if (!ret) {
				p->active = 1;
				xf->active_pulls++;
				xf->active_bytes += p->x.len;
			}
			pull_free(ep, p);
			return;
		}
		if (ret) {
			send_fin(ep, p->x.id, ret);
			if (xf->down)
				return; /* rdmamsg__rndv_down freed p */
			pull_free(ep, p);
			continue;
		}
		p->active = 1;
		xf->active_pulls++;
		xf->active_bytes += p->x.len;
	}
	/* round robin over the active receives, one chunk each per turn */
	while (progress && xf->reads_inflight < MAX_READS &&
	       fp_sq_free(ep) > sq_reserve(ep)) {
		progress = 0;
		list_for_each_safe (pos, tmp, &xf->pulls) {
			struct rdmamsg__pull *p =
				container_of(pos, struct rdmamsg__pull, link);

			if (!p->active || p->posted == p->x.len)
				continue;
			if (xf->reads_inflight >= MAX_READS ||
			    fp_sq_free(ep) <= sq_reserve(ep))
				break;
			if (post_chunk(ep, p))
				return;
			progress = 1;
		}
	}
}

/* finish -- the whole message is in place: FIN, then deliver */
static void finish(struct rdmamsg_ep *ep, struct rdmamsg__pull *p)
{
	unsigned int flags = RDMAMSG_RECV_LARGE;

	/* unlinked first: a callback (or a failed FIN) that takes the
	 * endpoint down must not free it under us */
	list_del(&p->link);
	send_fin(ep, p->x.id, 0);
	if (ep->xf->down) {
		pull_free(ep, p);
		return;
	}
	if (p->x.flags & XF_IMM)
		flags |= RDMAMSG_RECV_IMM;
	if (p->umr) {
		/* the caller's region is the caller's again */
		p->umr->busy--;
		p->umr = NULL;
	}
	switch (p->x.inner) {
	case X_MSG:
		if (ep->cbs.on_recv && !ep->closing)
			ep->cbs.on_recv(ep, p->dest, (size_t)p->x.len, p->x.imm,
					flags, ep->arg);
		break;
	case X_REQ:
	case X_RESP:
		rdmamsg__req_recv(ep, p->x.inner, p->x.req, p->dest,
				  (size_t)p->x.len);
		break;
	default:
		break;
	}
	pull_free(ep, p);
}

/* rdmamsg__rndv_pull_done -- one READ chunk completed */
void rdmamsg__rndv_pull_done(struct rdmamsg_ep *ep, struct rdmamsg__xop *op,
			     int status)
{
	struct rdmamsg__pull *p = op->pull;
	struct rdmamsg__xfer *xf = ep->xf;

	p->inflight--;
	xf->reads_inflight--;
	if (status && !p->failed)
		p->failed = status;
	if (!status)
		p->done += op->len;
	if (p->failed || xf->down) {
		if (!p->inflight)
			pull_free(ep, p);
		return;
	}
	if (p->done == p->x.len)
		finish(ep, p);
}

/* rdmamsg__rndv_down -- complete sends, drop receives not in flight */
void rdmamsg__rndv_down(struct rdmamsg_ep *ep, int status)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct rdmamsg__list *pos, *tmp;
	uint32_t i;

	for (i = 1; i < xf->sends.cap; i++) {
		struct rndv_send *s = xf->sends.e[i].p;
		uint64_t id = ((uint64_t)xf->sends.e[i].gen << 32) | i;

		if (!s)
			continue;
		rdmamsg__idt_del(&xf->sends, id);
		if (s->report && ep->cbs.on_send)
			ep->cbs.on_send(ep, status, s->op_ctx, ep->arg);
		send_free(ep, s);
	}
	list_for_each_safe (pos, tmp, &xf->pulls) {
		struct rdmamsg__pull *p =
			container_of(pos, struct rdmamsg__pull, link);

		if (!p->inflight && !p->in_alloc)
			pull_free(ep, p);
		else if (!p->failed)
			p->failed = status;
	}
}

/* rdmamsg__rndv_free -- the endpoint goes: whatever is left */
void rdmamsg__rndv_free(struct rdmamsg_ep *ep)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct rdmamsg__list *pos, *tmp;
	uint32_t i;

	for (i = 1; i < xf->sends.cap; i++)
		if (xf->sends.e[i].p)
			send_free(ep, xf->sends.e[i].p);
	list_for_each_safe (pos, tmp, &xf->pulls)
		pull_free(ep, container_of(pos, struct rdmamsg__pull, link));
	list_for_each_safe (pos, tmp, &xf->fins) {
		list_del(pos);
		free(container_of(pos, struct fin_wait, link));
	}
}

/* rdmamsg_send_large -- any size up to the large maximum */
RDMAMSG_EXPORT int rdmamsg_send_large(struct rdmamsg_ep *ep, const void *data,
				      size_t len, void *op_ctx)
{
	if (!ep || (len && !data))
		return -EINVAL;
	if (len <= ep->max_msg || rdmamsg__ep_can_send(ep))
		return rdmamsg_send(ep, data, len, op_ctx);
	if (len > ep->p.max_large)
		return -EMSGSIZE;
	return rdmamsg__rndv_send(ep, X_MSG, 0, data, len, NULL, 0, 0, op_ctx,
				  1);
}

/* rdmamsg_send_mr -- zero-copy rendezvous from the caller's registration */
RDMAMSG_EXPORT int rdmamsg_send_mr(struct rdmamsg_ep *ep, struct rdmamsg_mr *mr,
				   size_t off, size_t len, void *op_ctx)
{
	if (!ep || !mr || mr->ctx != ep->ctx)
		return -EINVAL;
	if (rdmamsg__ep_can_send(ep))
		return -ENOTCONN;
	if (off > mr->len || len > mr->len - off)
		return -ERANGE;
	if (!(mr->access & RDMAMSG_ACCESS_REMOTE_READ))
		return -EACCES;
	if (rdmamsg__mr_iov_exportable(mr))
		return -ENOTSUP; /* pieces without UMR (mr_iov.c) */
	if (len > ep->p.max_large && len > ep->max_msg)
		return -EMSGSIZE;
	/* a UMR region (mr_iov.c) is zero-based: its offsets are its
	 * addresses */
	return rdmamsg__rndv_send(
		ep, X_MSG, 0, mr->iov ? (char *)(uintptr_t)off : mr->addr + off,
		len, mr, 0, 0, op_ctx, 1);
}

/* rdmamsg_ep_attr_set_max_large_size -- the rendezvous maximum */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_max_large_size(
	struct rdmamsg_ep_attr *attr, size_t size)
{
	if (!attr || size < MIN_LARGE || size > MAX_LARGE)
		return -EINVAL;
	attr->p.max_large = size;
	return 0;
}

/* rdmamsg_ep_attr_set_recv_alloc -- where large messages land */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_recv_alloc(
	struct rdmamsg_ep_attr *attr,
	int (*alloc)(struct rdmamsg_ep *ep, size_t len, void **data,
		     struct rdmamsg_mr **mr, void *arg))
{
	if (!attr)
		return -EINVAL;
	attr->p.recv_alloc = alloc;
	return 0;
}
