/* SPDX-License-Identifier: MIT */
/*
 * req.c -- request/response.
 *
 * A request carries a 64-bit id from the endpoint's id table (generation
 * and index: O(1), and a stale id never matches a newer request).  The
 * response echoes it.  Requests with a timeout sit in a list sorted by
 * deadline (inserted from the tail, so equal timeouts cost O(1)) behind
 * one timer per endpoint.  Cancellation moves the request to the front
 * with a deadline of now, so its callback runs from the loop like a
 * timeout.  A response whose request timed out or was cancelled is
 * dropped and counted.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "xfer.h"

struct oreq {
	struct rdmamsg__list link; /* xf->req_due (when it has a deadline) */
	uint64_t id;
	uint64_t due_ns;
	int status; /* set by cancellation */
	void (*cb)(struct rdmamsg_ep *ep, int status, void *data, size_t len,
		   void *req_arg);
	void *arg;
};

struct rdmamsg_req {
	struct rdmamsg__list link; /* xf->sreqs */
	struct rdmamsg_ep *ep;
	uint64_t id;
};

/* arm -- point the endpoint's request timer at the earliest deadline */
static void arm(struct rdmamsg_ep *ep)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct oreq *o;
	uint64_t now = rdmamsg__now_ns();

	if (list_empty(&xf->req_due)) {
		rdmamsg__timer_stop(ep->ctx, &xf->req_timer);
		return;
	}
	o = container_of(xf->req_due.next, struct oreq, link);
	rdmamsg__timer_start(
		ep->ctx, &xf->req_timer,
		o->due_ns <= now
			? 0
			: (unsigned int)((o->due_ns - now + 999999) / 1000000));
}

/* insert_due -- into the deadline list, scanning from the tail */
static void insert_due(struct rdmamsg__xfer *xf, struct oreq *o)
{
	struct rdmamsg__list *pos = xf->req_due.prev;

	while (pos != &xf->req_due &&
	       container_of(pos, struct oreq, link)->due_ns > o->due_ns)
		pos = pos->prev;
	/* after pos */
	list_add_tail(pos->next, &o->link);
}

/* req_eager -- the largest request or response sent eager:
 * header and data up to the rendezvous threshold (rndv >= RNDV_MIN, and
 * max_msg >= 64, both above the header) */
static size_t req_eager(const struct rdmamsg_ep *ep)
{
	size_t lim = ep->rndv < ep->max_msg ? ep->rndv : ep->max_msg;

	return lim > RDMAMSG_XHDR ? lim - RDMAMSG_XHDR : 0;
}

/* req_gate -- may a request or response of len bytes go now: 0, *eager
 * set, or the error.  During a session's outage eager ones queue, larger
 * ones fail; no arithmetic on len before it is known to fit, and above
 * the rendezvous threshold (msg.c) it goes by rendezvous, in order */
static int req_gate(struct rdmamsg_ep *ep, size_t len, int *eager)
{
	int ret = rdmamsg__ep_can_send(ep);

	if (ret && !(ep->reconn && !ep->closing))
		return ret;
	*eager = len <= req_eager(ep);
	if (ret && !*eager)
		return ret;
	if (!*eager && len > ep->p.max_large)
		return -EMSGSIZE;
	return 0;
}

/* rdmamsg_request -- send a request (see rdmamsg.h) */
RDMAMSG_EXPORT int rdmamsg_request(struct rdmamsg_ep *ep, const void *data,
				   size_t len, unsigned int timeout_ms,
				   void (*response_cb)(struct rdmamsg_ep *ep,
						       int status, void *data,
						       size_t len,
						       void *req_arg),
				   void *req_arg, uint64_t *idp)
{
	struct rdmamsg__xfer *xf;
	struct rdmamsg__xhdr x;
	struct oreq *o;
	uint64_t id;
	int eager, ret;

	if (!ep || !response_cb || !idp || (len && !data))
		return -EINVAL;
	ret = req_gate(ep, len, &eager);
	if (ret)
		return ret;
	ret = rdmamsg__xfer_get(ep, &xf);
	if (ret)
		return ret;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	list_init(&o->link);
	o->cb = response_cb;
	o->arg = req_arg;
	ret = rdmamsg__idt_add(&xf->reqs, o, &id);
	if (ret)
		goto err_free_req;
	o->id = id;
	if (eager) {
		memset(&x, 0, sizeof(x));
		x.kind = X_REQ;
		x.req = id;
		ret = rdmamsg__xfer_send(ep, &x, data, len);
	} else {
		ret = rdmamsg__rndv_send(ep, X_REQ, id, data, len, NULL, NULL,
					 XF_ORDER, 0, NULL, 0);
	}
	if (ret)
		goto err_del_id;
	if (timeout_ms) {
		o->due_ns = rdmamsg__now_ns() + (uint64_t)timeout_ms * 1000000;
		insert_due(xf, o);
		if (xf->req_due.next == &o->link)
			arm(ep);
	}
	*idp = id;
	return 0;

err_del_id:
	rdmamsg__idt_del(&xf->reqs, id);
err_free_req:
	free(o);
	return ret;
}

/* rdmamsg_request_cancel -- cancel; the callback follows from the loop */
RDMAMSG_EXPORT int rdmamsg_request_cancel(struct rdmamsg_ep *ep, uint64_t id)
{
	struct oreq *o;

	if (!ep)
		return -EINVAL;
	o = ep->xf ? rdmamsg__idt_find(&ep->xf->reqs, id) : NULL;
	if (!o || o->status)
		return -ENOENT;
	o->status = -ECANCELED;
	o->due_ns = 0;
	list_del(&o->link);
	list_add_tail(ep->xf->req_due.next, &o->link);
	arm(ep);
	return 0;
}

/* complete -- the request's one callback, then it is gone */
static void complete(struct rdmamsg_ep *ep, struct oreq *o, int status,
		     void *data, size_t len)
{
	list_del(&o->link);
	rdmamsg__idt_del(&ep->xf->reqs, o->id);
	o->cb(ep, status, data, len, o->arg);
	free(o);
}

/* rdmamsg__req_timeout -- requests past their deadline (or cancelled) */
void rdmamsg__req_timeout(struct rdmamsg_ep *ep)
{
	struct rdmamsg__xfer *xf = ep->xf;
	uint64_t now = rdmamsg__now_ns();

	while (!list_empty(&xf->req_due)) {
		struct oreq *o =
			container_of(xf->req_due.next, struct oreq, link);

		if (o->due_ns > now)
			break;
		complete(ep, o, o->status ? o->status : -ETIMEDOUT, NULL, 0);
		if (ep->xf != xf)
			return;
	}
	arm(ep);
}

/* rdmamsg__req_recv -- a request or a response (whole) arrived */
void rdmamsg__req_recv(struct rdmamsg_ep *ep, int kind, uint64_t id, void *data,
		       size_t len)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct rdmamsg_req *r;
	struct oreq *o;

	if (kind == X_RESP) {
		o = rdmamsg__idt_find(&xf->reqs, id);
		if (!o && !rdmamsg__idt_was_issued(&xf->reqs, id)) {
			/* never issued: not late, a broken or hostile peer */
			LOG_ERR("endpoint %p: response to request %llx that "
				"was "
				"never sent: closing",
				(void *)ep, (unsigned long long)id);
			rdmamsg__ep_down(ep, -EPROTO);
			return;
		}
		if (!o || o->status) {
			/* it timed out or was cancelled */
			xf->late++;
			return;
		}
		complete(ep, o, 0, data, len);
		if (ep->xf == xf && !list_empty(&xf->req_due))
			arm(ep);
		return;
	}
	if (!ep->p.on_request || ep->closing)
		return;
	r = calloc(1, sizeof(*r));
	if (!r) {
		LOG_WARN("no memory for a request: dropped");
		return;
	}
	r->ep = ep;
	r->id = id;
	list_add_tail(&xf->sreqs, &r->link);
	ep->p.on_request(ep, r, data, len, ep->arg);
}

/* rdmamsg__req_fail -- request id ends with status: its response will
 * not come (a rendezvous of the request or of its response refused, or
 * its read failed); one that timed out or was cancelled is left to its
 * timer */
void rdmamsg__req_fail(struct rdmamsg_ep *ep, uint64_t id, int status)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct oreq *o = rdmamsg__idt_find(&xf->reqs, id);

	if (!o || o->status)
		return;
	complete(ep, o, status, NULL, 0);
	if (ep->xf == xf && !xf->down)
		arm(ep);
}

/* rdmamsg_respond -- answer and free a request */
RDMAMSG_EXPORT int rdmamsg_respond(struct rdmamsg_req *req, const void *data,
				   size_t len)
{
	struct rdmamsg_ep *ep;
	struct rdmamsg__xhdr x;
	int eager, ret;

	if (!req || (len && !data))
		return -EINVAL;
	ep = req->ep;
	ret = req_gate(ep, len, &eager);
	if (ret)
		return ret;
	if (eager) {
		memset(&x, 0, sizeof(x));
		x.kind = X_RESP;
		x.req = req->id;
		ret = rdmamsg__xfer_send(ep, &x, data, len);
	} else {
		ret = rdmamsg__rndv_send(ep, X_RESP, req->id, data, len, NULL,
					 NULL, XF_ORDER, 0, NULL, 0);
	}
	if (ret)
		return ret;
	list_del(&req->link);
	free(req);
	return 0;
}

/* rdmamsg_req_drop -- forget a request without answering */
RDMAMSG_EXPORT int rdmamsg_req_drop(struct rdmamsg_req *req)
{
	if (!req)
		return -EINVAL;
	list_del(&req->link);
	free(req);
	return 0;
}

/* rdmamsg__req_down -- every outstanding request completes with status */
void rdmamsg__req_down(struct rdmamsg_ep *ep, int status)
{
	struct rdmamsg__xfer *xf = ep->xf;
	uint32_t i;

	rdmamsg__timer_stop(ep->ctx, &xf->req_timer);
	for (i = 1; i < xf->reqs.cap; i++) {
		struct oreq *o = xf->reqs.e[i].p;

		if (o)
			complete(ep, o, o->status ? o->status : status, NULL,
				 0);
	}
}

/* rdmamsg__req_free -- the endpoint goes: the peer's requests with it */
void rdmamsg__req_free(struct rdmamsg_ep *ep)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct rdmamsg__list *pos, *tmp;
	uint32_t i;

	for (i = 1; i < xf->reqs.cap; i++)
		free(xf->reqs.e[i].p);
	list_for_each_safe (pos, tmp, &xf->sreqs) {
		list_del(pos);
		free(container_of(pos, struct rdmamsg_req, link));
	}
}

/* rdmamsg_ep_attr_set_on_request -- who answers the peer's requests */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_on_request(
	struct rdmamsg_ep_attr *attr,
	void (*on_request)(struct rdmamsg_ep *ep, struct rdmamsg_req *req,
			   void *data, size_t len, void *arg))
{
	if (!attr)
		return -EINVAL;
	attr->p.on_request = on_request;
	return 0;
}

/* rdmamsg_ep_get_late_responses -- responses that came too late */
RDMAMSG_EXPORT int rdmamsg_ep_get_late_responses(const struct rdmamsg_ep *ep,
						 uint64_t *n)
{
	if (!ep || !n)
		return -EINVAL;
	*n = ep->xf ? ep->xf->late : 0;
	return 0;
}
