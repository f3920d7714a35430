/* SPDX-License-Identifier: MIT */
/*
 * conn.c -- rdma_cm event handling and the connection state machines.
 *
 * Active:  resolve_addr -> ADDR_RESOLVED -> resolve_route -> ROUTE_RESOLVED
 *          -> QP + receives + rdma_connect(REQ) -> ESTABLISHED(ACC) | REJECTED
 * Passive: CONNECT_REQUEST(REQ) -> on_conn_req -> accept(ACC) -> ESTABLISHED
 *          or reject(REJ).
 * Every event is copied and acknowledged before it is handled, so handlers
 * may destroy ids.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "dispatch.h"
#include "handshake.h"

/* IB CM reject reason (IBTA 12.6.7.2) that librdmacm reports in the
 * REJECTED event's status: nothing listens at the service id */
#define CM_REJ_INVALID_SERVICE_ID 8

struct cm_ev {
	enum rdma_cm_event_type type;
	int status;
	struct rdma_cm_id *id;
	struct rdma_cm_id *listen_id;
	uint8_t pdata[256];
	size_t pdata_len;
};

/* find_ep -- the live endpoint owning id, or NULL (stale event) */
static struct rdmamsg_ep *find_ep(struct rdmamsg_ctx *ctx,
				  struct rdma_cm_id *id)
{
	struct rdmamsg__list *pos;

	for (pos = ctx->eps.next; pos != &ctx->eps; pos = pos->next) {
		struct rdmamsg_ep *ep =
			container_of(pos, struct rdmamsg_ep, link);

		if (ep->id == id)
			return ep;
	}
	return NULL;
}

/* find_listener -- the live listener owning id, or NULL */
static struct rdmamsg_listener *find_listener(struct rdmamsg_ctx *ctx,
					      struct rdma_cm_id *id)
{
	struct rdmamsg__list *pos;

	for (pos = ctx->listeners.next; pos != &ctx->listeners;
	     pos = pos->next) {
		struct rdmamsg_listener *l =
			container_of(pos, struct rdmamsg_listener, link);

		if (l->id == id)
			return l;
	}
	return NULL;
}

/* rd_depth -- a device limit on RDMA READs/atomics in flight, at most 16 */
static uint8_t rd_depth(int dev_max)
{
	return (uint8_t)(dev_max < 1 ? 1 : dev_max > 16 ? 16 : dev_max);
}

/* conn_param -- the parameters of rdma_connect/rdma_accept.  Rendezvous
 * pulls several chunks with RDMA READ at once: allow as many in flight as
 * the device does (the CM lowers ours to what the peer responds to). */
static void conn_param(struct rdma_conn_param *cp,
		       const struct rdmamsg_ctx *ctx, const uint8_t *pdata,
		       size_t len)
{
	memset(cp, 0, sizeof(*cp));
	cp->private_data = pdata;
	cp->private_data_len = (uint8_t)len;
	cp->responder_resources = rd_depth(ctx->dattr.max_qp_rd_atom);
	cp->initiator_depth = rd_depth(ctx->dattr.max_qp_init_rd_atom);
	cp->retry_count = 7;
	/* credits make RNR impossible; this is only a safety net (tests turn
	 * it off to prove that no RNR NAK ever happens) */
	cp->rnr_retry_count = 7;
	if (getenv("RDMAMSG_TEST_RNR_RETRY"))
		cp->rnr_retry_count =
			(uint8_t)atoi(getenv("RDMAMSG_TEST_RNR_RETRY"));
}

/* our_hs -- this endpoint's side of the handshake */
static size_t our_hs(const struct rdmamsg_ep *ep, int kind, uint8_t *out)
{
	struct rdmamsg__hs hs;

	memset(&hs, 0, sizeof(hs));
	hs.kind = (uint8_t)kind;
	hs.depth = (uint16_t)ep->p.recv_depth;
	hs.ctl = RDMAMSG_CTL_CREDITS;
	hs.eager = ep->p.eager;
	hs.max_msg = (uint32_t)ep->p.max_msg;
	hs.user = ep->p.pdata;
	hs.user_len = ep->p.pdata_len;
	return rdmamsg__hs_encode(&hs, out);
}

/* rdmamsg__cm_start_connect -- create the id and resolve the address */
int rdmamsg__cm_start_connect(struct rdmamsg_ep *ep, const struct sockaddr *dst)
{
	struct rdmamsg_ctx *ctx = ep->ctx;
	int ret;

	if (ctx->ops->create_id(ctx->ech, &ep->id, ep, RDMA_PS_TCP)) {
		ret = rdmamsg__errno(ENOMEM);
		LOG_ERR("rdma_create_id failed: %d", ret);
		ep->id = NULL;
		return ret;
	}
	if (ctx->ops->resolve_addr(ep->id, NULL, (struct sockaddr *)dst,
				   (int)ep->p.connect_ms)) {
		ret = rdmamsg__errno(EHOSTUNREACH);
		LOG_ERR("rdma_resolve_addr failed: %d", ret);
		ctx->ops->destroy_id(ep->id);
		ep->id = NULL;
		return ret == -EINVAL ? -EINVAL : -EHOSTUNREACH;
	}
	rdmamsg__ep_set_state(ep, EPS_RESOLVING);
	return 0;
}

/* active_route -- route known: make the QP and send the request */
static void active_route(struct rdmamsg_ep *ep)
{
	struct rdma_conn_param cp;
	uint8_t pdata[RDMAMSG_HS_MAX];
	int ret;

	ret = rdmamsg__ep_setup_qp(ep);
	if (ret) {
		rdmamsg__ep_connect_failed(ep,
					   ret == -ENODEV ? -ENODEV : -ENOMEM,
					   RDMAMSG_REJECT_RESOURCES, NULL, 0);
		return;
	}
	conn_param(&cp, ep->ctx, pdata, our_hs(ep, HS_REQ, pdata));
	if (ep->ctx->ops->connect(ep->id, &cp)) {
		ret = rdmamsg__errno(ECONNREFUSED);
		LOG_ERR("rdma_connect failed: %d", ret);
		rdmamsg__ep_connect_failed(ep, -EHOSTUNREACH, 0, NULL, 0);
		return;
	}
	ep->phase = PH_CONNECTING;
	rdmamsg__ep_set_state(ep, EPS_CONNECTING);
}

/* active_established -- check the peer's accept and go up */
static void active_established(struct rdmamsg_ep *ep, const struct cm_ev *e)
{
	struct rdmamsg__hs hs;
	int bad;

	if (ep->passive) {
		rdmamsg__ep_connected(ep, NULL, 0);
		return;
	}
	bad = rdmamsg__hs_decode(e->pdata, e->pdata_len, &hs);
	if (!bad && hs.kind != HS_ACC)
		bad = RDMAMSG_REJECT_HANDSHAKE;
	if (bad) {
		LOG_ERR("peer's accept is incompatible: %s (version %u, ours "
			"%u)",
			bad == RDMAMSG_REJECT_VERSION ? "protocol version"
						      : "malformed handshake",
			hs.version, RDMAMSG_HS_VERSION);
		ep->ctx->ops->disconnect(ep->id);
		rdmamsg__ep_connect_failed(ep, -EPROTO, bad, NULL, 0);
		return;
	}
	rdmamsg__ep_negotiate(ep, hs.depth, hs.eager, hs.max_msg);
	rdmamsg__ep_connected(ep, hs.user, hs.user_len);
}

/* active_rejected -- report a reject with its reason and private data */
static void active_rejected(struct rdmamsg_ep *ep, const struct cm_ev *e)
{
	struct rdmamsg__hs hs;

	if (rdmamsg__hs_decode(e->pdata, e->pdata_len, &hs) ||
	    hs.kind != HS_REJ) {
		/* no rdmamsg answer: the fabric's reason tells whether nobody
		 * listens (IB CM: invalid service id; iWARP: refused) or a
		 * listener could not take us (its backlog is full: consumer
		 * reject, timeout ...) */
		int nobody = e->status == CM_REJ_INVALID_SERVICE_ID ||
			     e->status == -ECONNREFUSED;

		LOG_INFO("endpoint %p rejected by the fabric (status %d)",
			 (void *)ep, e->status);
		rdmamsg__ep_connect_failed(ep, -ECONNREFUSED,
					   nobody ? RDMAMSG_REJECT_NO_LISTENER
						  : RDMAMSG_REJECT_RESOURCES,
					   NULL, 0);
		return;
	}
	if (hs.reason == RDMAMSG_REJECT_VERSION ||
	    hs.reason == RDMAMSG_REJECT_HANDSHAKE) {
		LOG_ERR("peer refused us: %s",
			hs.reason == RDMAMSG_REJECT_VERSION
				? "incompatible protocol version"
				: "malformed handshake");
		rdmamsg__ep_connect_failed(ep, -EPROTO, (int)hs.reason, hs.user,
					   hs.user_len);
		return;
	}
	rdmamsg__ep_connect_failed(ep, -ECONNREFUSED, (int)hs.reason, hs.user,
				   hs.user_len);
}

/* ep_event -- one CM event for an endpoint */
static void ep_event(struct rdmamsg_ep *ep, const struct cm_ev *e)
{
	switch (e->type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (ep->phase != PH_RESOLVING || ep->closing)
			break;
		if (ep->ctx->ops->resolve_route(ep->id, (int)ep->p.connect_ms))
			rdmamsg__ep_connect_failed(ep, -EHOSTUNREACH, 0, NULL,
						   0);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (ep->phase == PH_RESOLVING && !ep->closing)
			active_route(ep);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (ep->phase == PH_CONNECTING)
			active_established(ep, e);
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (ep->phase == PH_CONNECTING && !ep->passive)
			active_rejected(ep, e);
		else
			rdmamsg__ep_connect_failed(ep, -ECONNREFUSED, 0, NULL,
						   0);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		rdmamsg__ep_connect_failed(
			ep,
			e->status == -ETIMEDOUT ? -ETIMEDOUT : -EHOSTUNREACH, 0,
			NULL, 0);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		/* 0 only after the peer's goodbye, else it vanished */
		rdmamsg__ep_peer_disconnected(ep);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		ep->disc_seen = 1;
		rdmamsg__ep_down(ep, -ENODEV);
		break;
	default:
		break;
	}
	if (ep->closing)
		rdmamsg__ep_defer(ep);
}

/* reject_id -- refuse a request with a library reason and drop the id */
static void reject_id(struct rdmamsg_ctx *ctx, struct rdma_cm_id *id,
		      uint32_t reason)
{
	struct rdmamsg__hs hs;
	uint8_t pdata[RDMAMSG_HS_MAX];
	size_t len;

	memset(&hs, 0, sizeof(hs));
	hs.kind = HS_REJ;
	hs.reason = reason;
	len = rdmamsg__hs_encode(&hs, pdata);
	ctx->ops->reject(id, pdata, (uint8_t)len);
	ctx->ops->destroy_id(id);
}

/* conn_request -- a client knocks: check its handshake, ask the app */
static void conn_request(struct rdmamsg_ctx *ctx, const struct cm_ev *e)
{
	struct rdmamsg_listener *lst = find_listener(ctx, e->listen_id);
	struct rdmamsg_conn_req *req;
	struct rdmamsg__hs hs;
	int bad;

	if (!lst || lst->closing) {
		reject_id(ctx, e->id, RDMAMSG_REJECT_CLOSED);
		return;
	}
	if (ctx->pending_hs >= ctx->max_pending) {
		/* requests not decided plus accepted ones not yet up: a
		 * flood of handshakes that never finish is bounded */
		LOG_NOTE("refusing a client: %u handshakes unfinished",
			 ctx->pending_hs);
		reject_id(ctx, e->id, RDMAMSG_REJECT_RESOURCES);
		return;
	}
	bad = rdmamsg__hs_decode(e->pdata, e->pdata_len, &hs);
	if (!bad && hs.kind != HS_REQ)
		bad = RDMAMSG_REJECT_HANDSHAKE;
	if (bad) {
		LOG_WARN("refusing a client: %s (its version %u, ours %u)",
			 bad == RDMAMSG_REJECT_VERSION
				 ? "incompatible protocol version"
				 : "malformed handshake",
			 hs.version, RDMAMSG_HS_VERSION);
		reject_id(ctx, e->id, (uint32_t)bad);
		return;
	}
	req = calloc(1, sizeof(*req));
	if (!req) {
		reject_id(ctx, e->id, RDMAMSG_REJECT_RESOURCES);
		return;
	}
	req->obj.type = OBJ_CONN_REQ;
	req->lst = lst;
	req->id = e->id;
	req->peer_depth = hs.depth;
	req->peer_eager = hs.eager;
	req->peer_max_msg = hs.max_msg;
	e->id->context = req;
	list_add_tail(&lst->reqs, &req->link);
	ctx->pending_hs++;
	lst->on_conn_req(lst, req, hs.user, hs.user_len, lst->arg);
}

/* rdmamsg__cm_process -- get CM events until EAGAIN and handle them */
void rdmamsg__cm_process(struct rdmamsg_ctx *ctx)
{
	struct rdma_cm_event *ev;
	struct cm_ev e;

	while (ctx->ops->get_cm_event(ctx->ech, &ev) == 0) {
		e.type = ev->event;
		e.status = ev->status;
		e.id = ev->id;
		e.listen_id = ev->listen_id;
		e.pdata_len = 0;
		if (ev->param.conn.private_data &&
		    ev->param.conn.private_data_len) {
			e.pdata_len = ev->param.conn.private_data_len;
			memcpy(e.pdata, ev->param.conn.private_data,
			       e.pdata_len);
		}
		ctx->ops->ack_cm_event(ev);
		LOG_DBG("cm event %d status %d id %p", (int)e.type, e.status,
			(void *)e.id);

		if (e.type == RDMA_CM_EVENT_CONNECT_REQUEST) {
			conn_request(ctx, &e);
		} else {
			struct rdmamsg_ep *ep = find_ep(ctx, e.id);

			if (ep)
				ep_event(ep, &e);
			/* events for pending requests need nothing: a late
			 * accept fails and reports */
		}
	}
}

/* rdmamsg_listen -- accept connection requests on addr */
RDMAMSG_EXPORT int rdmamsg_listen(
	struct rdmamsg_ctx *ctx, const char *addr,
	void (*on_conn_req)(struct rdmamsg_listener *lst,
			    struct rdmamsg_conn_req *req, const void *pdata,
			    size_t pdata_len, void *arg),
	void *arg, struct rdmamsg_listener **lstp)
{
	struct sockaddr_storage ss;
	struct rdmamsg_listener *lst;
	int ret;

	if (!ctx || !addr || !on_conn_req || !lstp)
		return -EINVAL;
	ret = rdmamsg__addr_parse(addr, &ss);
	if (ret)
		return ret;
	lst = calloc(1, sizeof(*lst));
	if (!lst)
		return -ENOMEM;
	lst->obj.type = OBJ_LISTENER;
	lst->ctx = ctx;
	lst->on_conn_req = on_conn_req;
	lst->arg = arg;
	list_init(&lst->reqs);
	list_init(&lst->defer_link);
	if (ctx->ops->create_id(ctx->ech, &lst->id, lst, RDMA_PS_TCP)) {
		ret = rdmamsg__errno(ENOMEM);
		goto err_free_lst;
	}
	errno = 0;
	if (ctx->ops->bind_addr(lst->id, (struct sockaddr *)&ss)) {
		/* read errno before anything else can change it: an address
		 * that is not on this host (or on no RDMA device) is -ENODEV
		 * as documented, a taken port -EADDRINUSE */
		int e = errno;

		LOG_ERR("rdma_bind_addr(%s) failed: errno %d", addr, e);
		ret = e == EADDRNOTAVAIL || e == ENODEV || e == ENXIO
			      ? -ENODEV
			      : -EADDRINUSE;
		goto err_destroy_id;
	}
	if (lst->id->verbs && lst->id->verbs != ctx->verbs &&
	    strcmp(lst->id->verbs->device->name, ctx->devname)) {
		LOG_ERR("%s is on device %s, the context on %s", addr,
			lst->id->verbs->device->name, ctx->devname);
		ret = -ENODEV;
		goto err_destroy_id;
	}
	if (ctx->ops->listen(lst->id, ctx->listen_backlog)) {
		ret = rdmamsg__errno(EADDRINUSE);
		LOG_ERR("rdma_listen(%s) failed: %d", addr, ret);
		goto err_destroy_id;
	}
	list_add_tail(&ctx->listeners, &lst->link);
	rdmamsg__loop_ref(ctx);
	*lstp = lst;
	return 0;

err_destroy_id:
	ctx->ops->destroy_id(lst->id);
err_free_lst:
	free(lst);
	return ret;
}

/* rdmamsg_listener_get_port -- the bound port */
RDMAMSG_EXPORT int rdmamsg_listener_get_port(const struct rdmamsg_listener *lst,
					     uint16_t *port)
{
	const struct sockaddr *sa;

	if (!lst || !port)
		return -EINVAL;
	if (lst->closing) /* its id is gone */
		return -ENOTCONN;
	sa = (const struct sockaddr *)&lst->id->route.addr.src_addr;
	if (sa->sa_family == AF_INET)
		*port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
	else if (sa->sa_family == AF_INET6)
		*port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	else
		return -ENOTCONN;
	return 0;
}

/* free_req -- forget a decided request */
static void free_req(struct rdmamsg_conn_req *req)
{
	req->lst->ctx->pending_hs--;
	list_del(&req->link);
	free(req);
}

/* rdmamsg_listener_close -- stop listening; close_cb from the loop */
RDMAMSG_EXPORT int rdmamsg_listener_close(
	struct rdmamsg_listener *lst,
	void (*close_cb)(struct rdmamsg_listener *lst, void *arg))
{
	struct rdmamsg__list *pos, *tmp;

	if (!lst)
		return -EINVAL;
	if (lst->closing)
		return -EALREADY;
	lst->closing = 1;
	lst->close_cb = close_cb;
	list_for_each_safe (pos, tmp, &lst->reqs) {
		struct rdmamsg_conn_req *req =
			container_of(pos, struct rdmamsg_conn_req, link);

		reject_id(lst->ctx, req->id, RDMAMSG_REJECT_CLOSED);
		free_req(req);
	}
	lst->ctx->ops->destroy_id(lst->id);
	lst->id = NULL;
	list_add_tail(&lst->ctx->ldeferred, &lst->defer_link);
	rdmamsg__loop_kick(lst->ctx);
	return 0;
}

/* rdmamsg__listener_step -- a closing listener: callback, then free */
void rdmamsg__listener_step(struct rdmamsg_listener *lst)
{
	struct rdmamsg_ctx *ctx = lst->ctx;

	if (lst->close_cb)
		lst->close_cb(lst, lst->arg);
	list_del(&lst->link);
	free(lst);
	rdmamsg__loop_unref(ctx);
}

/* rdmamsg_conn_req_accept -- accept: make the endpoint and answer */
RDMAMSG_EXPORT int rdmamsg_conn_req_accept(struct rdmamsg_conn_req *req,
					   const struct rdmamsg_ep_attr *attr,
					   const struct rdmamsg_ep_cbs *cbs,
					   void *arg, struct rdmamsg_ep **epp)
{
	struct rdma_conn_param cp;
	uint8_t pdata[RDMAMSG_HS_MAX];
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	int ret;

	if (!req || !cbs || !epp || req->obj.type != OBJ_CONN_REQ)
		return -EINVAL;
	ctx = req->lst->ctx;
	ret = rdmamsg__ep_new(ctx, attr, cbs, arg, &ep);
	if (ret)
		return ret;
	ep->passive = 1;
	ep->id = req->id;
	ret = rdmamsg__ep_setup_qp(ep);
	if (ret)
		goto err_free_ep;
	rdmamsg__ep_negotiate(ep, req->peer_depth, req->peer_eager,
			      req->peer_max_msg);
	ep->id->context = ep;
	conn_param(&cp, ctx, pdata, our_hs(ep, HS_ACC, pdata));
	if (ctx->ops->accept(ep->id, &cp)) {
		ret = rdmamsg__errno(ECONNRESET);
		LOG_ERR("rdma_accept failed: %d", ret);
		ep->id->context = req;
		ret = -ECONNRESET;
		goto err_free_ep;
	}
	ep->phase = PH_CONNECTING;
	rdmamsg__ep_set_state(ep, EPS_CONNECTING);
	rdmamsg__timer_start(ctx, &ep->conn_timer, ep->p.connect_ms);
	list_add_tail(&ctx->eps, &ep->link);
	rdmamsg__loop_ref(ctx);
	/* the unfinished handshake passes from the request to the endpoint */
	ep->hs_pending = 1;
	ctx->pending_hs++;
	free_req(req);
	*epp = ep;
	return 0;

err_free_ep:
	if (ep->qp)
		ctx->ops->destroy_cm_qp(ep->id);
	ep->qp = NULL;
	ep->id = NULL; /* still the request's */
	rdmamsg__ep_free(ep);
	return ret;
}

/* rdmamsg_conn_req_reject -- refuse with reason and private data */
RDMAMSG_EXPORT int rdmamsg_conn_req_reject(struct rdmamsg_conn_req *req,
					   int reason, const void *pdata,
					   size_t pdata_len)
{
	struct rdmamsg__hs hs;
	uint8_t buf[RDMAMSG_HS_MAX];
	struct rdmamsg_ctx *ctx;
	size_t len;

	if (!req || req->obj.type != OBJ_CONN_REQ || reason < 0 ||
	    reason > 65535 || pdata_len > RDMAMSG_PRIVATE_DATA_MAX ||
	    (pdata_len && !pdata))
		return -EINVAL;
	ctx = req->lst->ctx;
	memset(&hs, 0, sizeof(hs));
	hs.kind = HS_REJ;
	hs.reason = (uint32_t)reason;
	hs.user = pdata;
	hs.user_len = (uint8_t)pdata_len;
	len = rdmamsg__hs_encode(&hs, buf);
	ctx->ops->reject(req->id, buf, (uint8_t)len);
	ctx->ops->destroy_id(req->id);
	free_req(req);
	return 0;
}
