/* SPDX-License-Identifier: MIT */
/*
 * xfer.c -- the layer beside eager messages: per-endpoint state made on
 * first use, the F_XFER control messages and the hooks the
 * message and endpoint code call (completion, receive, flush, down, free).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "xfer.h"

static void req_timer_fire(struct rdmamsg__timer *t);

/* rdmamsg__xfer_get -- the endpoint's state of this layer, made once */
int rdmamsg__xfer_get(struct rdmamsg_ep *ep, struct rdmamsg__xfer **xfp)
{
	struct rdmamsg__xfer *xf = ep->xf;

	if (RDMAMSG_LIKELY(xf != NULL)) {
		*xfp = xf;
		return 0;
	}
	xf = calloc(1, sizeof(*xf));
	if (!xf)
		return -ENOMEM;
	xf->ops = calloc((size_t)ep->sq_mask + 1, sizeof(*xf->ops));
	if (!xf->ops) {
		free(xf);
		return -ENOMEM;
	}
	list_init(&xf->pulls);
	list_init(&xf->fins);
	list_init(&xf->order);
	list_init(&xf->invs);
	list_init(&xf->req_due);
	list_init(&xf->sreqs);
	rdmamsg__timer_init(&xf->req_timer, req_timer_fire);
	rdmamsg__idt_init(&xf->sends, 0);
	rdmamsg__idt_init(&xf->reqs, 0);
	xf->ep = ep;
	ep->xf = xf;
	*xfp = xf;
	return 0;
}

/* req_timer_fire -- hand the due requests to req.c */
static void req_timer_fire(struct rdmamsg__timer *t)
{
	struct rdmamsg__xfer *xf =
		container_of(t, struct rdmamsg__xfer, req_timer);

	rdmamsg__req_timeout(xf->ep);
}

/* ---- control messages ---------------------------------------------- */

/* fin_ctl -- the endpoint's control buffer for a FIN (pool.c): registered
 * the first time a FIN finds neither pool memory nor inline room, once
 * per endpoint (never per message; an endpoint whose FINs go inline never
 * makes one), kept until the endpoint goes.  One FIN at a time: -ENOMEM
 * until the last one's send completed (those behind wait in xf->fins,
 * and that completion's flush sends them) */
static int fin_ctl(struct rdmamsg_ep *ep, struct rdmamsg_buf **b)
{
	struct rdmamsg__xfer *xf = ep->xf;
	int ret;

	if (!xf->fin_ctl) {
		ret = rdmamsg__buf_ctl_new(ep->ctx, RDMAMSG_XHDR, &xf->fin_ctl);
		if (ret) {
			xf->fin_ctl = NULL;
			if (!xf->fin_ctl_err)
				LOG_ERR("endpoint %p: registering a FIN "
					"buffer failed (%d): FINs wait for "
					"pool memory",
					(void *)ep, ret);
			xf->fin_ctl_err = 1;
			return -ENOMEM;
		}
	}
	ret = rdmamsg__buf_ctl_take(xf->fin_ctl);
	if (!ret)
		*b = xf->fin_ctl;
	return ret;
}

/*
 * fin_heap -- a FIN's buffer when the pool has none.  Where the QP has
 * the 64 inline bytes (RC QPs get them on softrdma, rxe and mlx5;
 * DC_INLINE is 64), from the heap: the FIN goes inline, the provider
 * copies its bytes at posting, so they need no registration
 * (ibv_post_send(3), IBV_SEND_INLINE).  Elsewhere (a device or setting
 * with less or no max_inline_data) the endpoint's control buffer
 * (fin_ctl).  A FIN ends a transfer the sender's on_send waits for, and a
 * pool held whole (a receive ring's class taking a 1 MiB limit, the
 * application's buffers) may never give one back while the FIN waits:
 * -ENOMEM (it waits, rndv.c) only while the control buffer carries the
 * FIN before it, or without heap memory or a registration for it
 */
static int fin_heap(struct rdmamsg_ep *ep, struct rdmamsg_buf **b)
{
	if (RDMAMSG_HDR + RDMAMSG_XHDR > ep->max_inline)
		return fin_ctl(ep, b);
	return rdmamsg__buf_heap(ep->ctx, RDMAMSG_XHDR, b);
}

/* fin_sent -- rdmamsg__xfer_send of FIN b ended (ret): posted at once
 * (not queued, not posted by the backlog's pump, which said so), its
 * announcement's credit goes back */
static void fin_sent(struct rdmamsg_ep *ep, struct rdmamsg_buf *b, int ret)
{
	struct rdmamsg__xfer *xf = ep->xf;

	if (!ret && xf->fin_sending == b && ep->bl_tail != b)
		rdmamsg__rndv_fin_posted(ep);
	xf->fin_sending = NULL;
}

/* rdmamsg__xfer_send -- header x plus len bytes as one F_XFER message */
int rdmamsg__xfer_send(struct rdmamsg_ep *ep, const struct rdmamsg__xhdr *x,
		       const void *data, size_t len)
{
	struct rdmamsg_buf *b;
	int ret;

	/* checked before any arithmetic: len may be anything a caller gave */
	if (len > ep->max_msg || RDMAMSG_XHDR > ep->max_msg - len)
		return -EMSGSIZE;
	ret = rdmamsg__buf_get(ep->ctx, RDMAMSG_XHDR + len, BUF_LIB, &b);
	if (RDMAMSG_UNLIKELY(ret == -ENOMEM) && x->kind == X_FIN && !len)
		ret = fin_heap(ep, &b);
	if (ret)
		return ret == -EMSGSIZE ? -EMSGSIZE
					: rdmamsg__ep_no_pool_memory(ep, ret);
	rdmamsg__xhdr_encode(x, b->data);
	if (len)
		memcpy(b->data + RDMAMSG_XHDR, data, len);
	if (x->kind == X_FIN)
		ep->xf->fin_sending = b; /* rdmamsg__xfer_posted */
	if (x->kind == X_FIN && (x->flags & XF_INV)) {
		struct rdmamsg__xhdr plain = *x;

		ret = rdmamsg__ep_send_x_inv(ep, b, RDMAMSG_XHDR, x->rkey);
		if (ret != -EAGAIN)
			goto out;
		/* no credit or send slot now: a plain FIN, which waits its
		 * turn in the backlog (one as SEND_WITH_INV would wait
		 * beside it, and could starve), and the sender invalidates
		 * its window itself (LOCAL_INV) */
		plain.flags = 0;
		plain.rkey = 0;
		rdmamsg__xhdr_encode(&plain, b->data);
	}
	ret = rdmamsg__ep_send_x(ep, b, RDMAMSG_XHDR + len);
out:
	if (x->kind == X_FIN)
		fin_sent(ep, b, ret);
	if (ret)
		rdmamsg__buf_put(b);
	return ret;
}

/* rdmamsg__xfer_posted -- pump() posted n, a message of this layer that
 * waited in the backlog (not one a close cancelled: its FIN is sent
 * anew): a FIN gives back the credit of its announcement */
void rdmamsg__xfer_posted(struct rdmamsg_ep *ep, const struct rdmamsg_buf *n)
{
	struct rdmamsg__xfer *xf = ep->xf;

	if (!xf || n->reported || n->len < RDMAMSG_XHDR ||
	    (uint8_t)n->data[0] != X_FIN)
		return;
	if (xf->fin_sending == n)
		xf->fin_sending = NULL;
	rdmamsg__rndv_fin_posted(ep);
}

/* rdmamsg__xfer_recv -- an F_XFER message arrived (whole) */
void rdmamsg__xfer_recv(struct rdmamsg_ep *ep, const void *data, size_t len)
{
	struct rdmamsg__xhdr x;
	struct rdmamsg__xfer *xf;

	if (rdmamsg__xhdr_decode(data, len, &x)) {
		LOG_ERR("endpoint %p: malformed transfer message (%zu bytes, "
			"kind %u): closing",
			(void *)ep, len, len ? *(const uint8_t *)data : 0);
		rdmamsg__ep_down(ep, -EPROTO);
		return;
	}
	if (rdmamsg__xfer_get(ep, &xf)) {
		rdmamsg__ep_down(ep, -ENOMEM);
		return;
	}
	switch (x.kind) {
	case X_RTS:
	case X_FIN:
	case X_PIECE:
		rdmamsg__rndv_recv(ep, &x);
		break;
	case X_REQ:
	case X_RESP:
		if (RDMAMSG_UNLIKELY(ep->st != EPS_UP))
			break; /* closed: not delivered (the goodbye ends it) */
		/* behind an ordered rendezvous: its turn comes after it */
		if (rdmamsg__rndv_hold(ep, x.kind, x.req, NULL,
				       (const char *)data + RDMAMSG_XHDR,
				       len - RDMAMSG_XHDR, 0, 0))
			break;
		rdmamsg__req_recv(ep, x.kind, x.req,
				  (char *)(uintptr_t)data + RDMAMSG_XHDR,
				  len - RDMAMSG_XHDR);
		break;
	default:
		LOG_ERR("unknown transfer message %u", x.kind);
		rdmamsg__ep_down(ep, -EPROTO);
		break;
	}
}

/* rdmamsg__xfer_unsent -- a message of this layer left the backlog
 * without going out (status: why): an announcement's rendezvous ends; a
 * FIN goes all the same, past the backlog (the peer's close waits for it) */
void rdmamsg__xfer_unsent(struct rdmamsg_ep *ep, const void *data, size_t len,
			  int status)
{
	struct rdmamsg__xhdr x;

	if (!ep->xf)
		return;
	if (ep->xf->fin_ctl && data == ep->xf->fin_ctl->data) {
		/* a FIN in the control buffer, cancelled in the backlog:
		 * the buffer stays there, never posted, until the endpoint
		 * is freed (msg.c), and goes then; another carries the FIN
		 * sent anew */
		rdmamsg__buf_ctl_drop(ep->xf->fin_ctl);
		ep->xf->fin_ctl = NULL;
	}
	if (rdmamsg__xhdr_decode(data, len, &x))
		return;
	if (x.kind == X_RTS)
		rdmamsg__rndv_unsent(ep, x.id, status);
	else if (x.kind == X_FIN && !ep->xf->down)
		rdmamsg__rndv_fin_later(ep, &x);
}

/* ---- hooks --------------------------------------------------------- */

/* rdmamsg__xfer_flush -- after polling: FINs and invalidations that
 * waited, and queued pulls (refused once the endpoint is closed) */
void rdmamsg__xfer_flush(struct rdmamsg_ep *ep)
{
	if (RDMAMSG_UNLIKELY(!list_empty(&ep->xf->fins)))
		rdmamsg__rndv_fin_retry(ep);
	if (RDMAMSG_UNLIKELY(!list_empty(&ep->xf->invs)))
		rdmamsg__rndv_inv_retry(ep);
	if (!list_empty(&ep->xf->pulls)) {
		if (RDMAMSG_LIKELY(ep->st == EPS_UP))
			rdmamsg__rndv_pump(ep);
		else
			rdmamsg__rndv_refuse_idle(ep);
	}
}

/* rdmamsg__xfer_reconn_reset -- a session's fresh connection grants the
 * receive ring whole: the credits the peer's announcements held too */
void rdmamsg__xfer_reconn_reset(struct rdmamsg_ep *ep)
{
	ep->xf->rts_held = 0;
}

/* rdmamsg__xfer_unsettled -- rendezvous that a close lets end before its
 * goodbye (the peer reads what it was told of before the goodbye, so
 * without this wait a message could be both received and cancelled):
 * announcements not yet answered, answers not yet on the wire, reads in
 * flight */
int rdmamsg__xfer_unsettled(const struct rdmamsg_ep *ep)
{
	const struct rdmamsg__xfer *xf = ep->xf;

	return xf && !xf->down &&
	       (xf->sends.used || !list_empty(&xf->fins) || xf->reads_inflight);
}

/* rdmamsg__xfer_down -- the connection is gone: complete what waits */
void rdmamsg__xfer_down(struct rdmamsg_ep *ep, int status)
{
	int st = ep->closing ? -ECANCELED : (status ? status : -ECONNRESET);

	if (ep->xf->down)
		return;
	ep->xf->down = 1;
	rdmamsg__rndv_down(ep, st);
	rdmamsg__req_down(ep, st);
}

/* rdmamsg__xfer_free -- the endpoint is freed: every slot has completed */
void rdmamsg__xfer_free(struct rdmamsg_ep *ep)
{
	struct rdmamsg__xfer *xf = ep->xf;

	rdmamsg__timer_stop(ep->ctx, &xf->req_timer);
	rdmamsg__rndv_free(ep);
	rdmamsg__req_free(ep);
	if (xf->atom)
		rdmamsg__buf_put(xf->atom);
	if (xf->fin_ctl)
		rdmamsg__buf_ctl_drop(xf->fin_ctl);
	rdmamsg__idt_fini(&xf->sends);
	rdmamsg__idt_fini(&xf->reqs);
	free(xf->ops);
	free(xf);
	ep->xf = NULL;
}
