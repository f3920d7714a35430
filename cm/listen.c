/* SPDX-License-Identifier: MIT */
/*
 * listen.c -- the listener and connection requests: CONNECT_REQUEST
 * events checked (handshake, unfinished-handshake cap) and handed to the
 * application, which accepts (an endpoint, state CONNECTING) or rejects.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "dispatch.h"
#include "handshake.h"

/* find_listener -- the live listener owning id, in O(1) from id->context,
 * or NULL */
static struct rdmamsg_listener *find_listener(struct rdma_cm_id *id)
{
	struct rdmamsg__cmobj *o = id ? id->context : NULL;

	if (!o || o->type != OBJ_LISTENER)
		return NULL;
	return container_of(o, struct rdmamsg_listener, obj);
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

/* find_session -- the accepted endpoint of session sid that may take a
 * reconnect (up: its connection failed without it knowing yet;
 * waiting; or an earlier attempt under way), or NULL */
static struct rdmamsg_ep *find_session(struct rdmamsg_ctx *ctx, uint64_t sid)
{
	struct rdmamsg__list *pos, *tmp;

	list_for_each_safe (pos, tmp, &ctx->eps) {
		struct rdmamsg_ep *ep =
			container_of(pos, struct rdmamsg_ep, link);

		if (!ep->passive || ep->sid != sid || ep->closing)
			continue;
		if (ep->st == EPS_UP || ep->st == EPS_RECONNECTING ||
		    (ep->st == EPS_CONNECTING && ep->reconn))
			return ep;
	}
	return NULL;
}

/* session_request -- a connector reconnects session hs->sid: its
 * endpoint takes the new connection (no on_conn_req), says how much it
 * received, and sends again what the connector lacks; a session we do
 * not know (we restarted, or it lingered out) is refused */
static void session_request(struct rdmamsg_ctx *ctx, const struct cm_ev *e,
			    const struct rdmamsg__hs *hs)
{
	struct rdmamsg_ep *ep = find_session(ctx, hs->sid);
	int ret;

	if (!ep) {
		LOG_NOTE("refusing a reconnect: no session %#llx",
			 (unsigned long long)hs->sid);
		reject_id(ctx, e->id, RDMAMSG_REJECT_SESSION);
		return;
	}
	if (ep->st == EPS_UP)
		rdmamsg__ep_down(ep, -ECONNRESET); /* failed: waits now */
	rdmamsg__ep_detach(ep); /* the old connection, or attempt */
	ep->reconn_due = 0;
	if (ep->closing || !ep->reconn) {
		reject_id(ctx, e->id, RDMAMSG_REJECT_SESSION);
		return;
	}
	if (ep->st == EPS_CONNECTING)
		rdmamsg__ep_set_state(ep, EPS_RECONNECTING);
	rdmamsg__timer_stop(ctx, &ep->conn_timer);
	rdmamsg__ep_reconn_reset(ep);
	ep->id = e->id;
	/* the session's transport, and a DC peer's block plausible */
	ret = hs->dc != (ep->p.transport == RDMAMSG_TRANSPORT_DC) ||
			      (hs->dc && !rdmamsg__cm_dc_hs_ok(hs))
		      ? -EPROTO
		      : rdmamsg__ep_setup_qp(ep);
	if (!ret && hs->dc)
		ret = rdmamsg__lane_dc_peer(ep->ln, e->id, hs->dc_dctn,
					    hs->dc_key, hs->dc_tag);
	if (!ret) {
		ep->apm.peer_alt_lid = hs->alt_lid;
		ep->peer_ctl = hs->ctl;
		ep->peer_caps = hs->caps;
		rdmamsg__ep_negotiate(ep, hs->depth, hs->eager, hs->max_msg);
		ret = rdmamsg__ep_session_init(ep);
		if (!ret)
			ret = rdmamsg__ep_replay_from(ep, hs->delivered);
	}
	if (!ret) {
		e->id->context = ep;
		ret = rdmamsg__cm_accept(ep, HS_RACC);
		if (ret)
			e->id->context = NULL;
	}
	if (ret) {
		LOG_WARN("session %#llx: reconnect failed: %d",
			 (unsigned long long)hs->sid, ret);
		rdmamsg__ep_unbind(ep);
		ep->id = NULL;
		reject_id(ctx, e->id,
			  ret == -EPROTO ? RDMAMSG_REJECT_HANDSHAKE
					 : RDMAMSG_REJECT_RESOURCES);
		if (ret == -EPROTO)
			rdmamsg__ep_reconn_failed(ep, -EPROTO);
		else
			rdmamsg__timer_start(ctx, &ep->conn_timer, 1);
		return;
	}
	rdmamsg__ep_set_state(ep, EPS_CONNECTING);
	rdmamsg__timer_start(ctx, &ep->conn_timer, ep->p.connect_ms);
}

/* rdmamsg__cm_conn_request -- a client knocks: check its handshake, ask the app */
void rdmamsg__cm_conn_request(struct rdmamsg_ctx *ctx, const struct cm_ev *e)
{
	struct rdmamsg_listener *lst = find_listener(e->listen_id);
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
	if (!bad && hs.kind == HS_RREQ) {
		session_request(ctx, e, &hs);
		return;
	}
	if (!bad && hs.kind != HS_REQ && hs.kind != HS_SREQ)
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
	req->peer_ctl = hs.ctl;
	req->peer_caps = hs.caps;
	req->peer_max_msg = hs.max_msg;
	req->sid = hs.kind == HS_SREQ ? hs.sid : 0;
	req->alt_lid = hs.alt_lid;
	if (hs.dc) {
		uint64_t v;

		/* a DC request: plausible, and DC here (lane_dc.c) */
		if (!rdmamsg__cm_dc_hs_ok(&hs) ||
		    rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_DC, &v)) {
			LOG_NOTE("refusing a DC client: %s",
				 rdmamsg__cm_dc_hs_ok(&hs)
					 ? "no DC on this context"
					 : "malformed DC handshake");
			reject_id(ctx, e->id,
				  rdmamsg__cm_dc_hs_ok(&hs)
					  ? RDMAMSG_REJECT_RESOURCES
					  : RDMAMSG_REJECT_HANDSHAKE);
			free(req);
			return;
		}
		req->dc = 1;
		req->dc_dctn = hs.dc_dctn;
		req->dc_key = hs.dc_key;
		req->dc_tag = hs.dc_tag;
	}
	e->id->context = req;
	list_add_tail(&lst->reqs, &req->link);
	ctx->pending_hs++;
	lst->on_conn_req(lst, req, hs.user, hs.user_len, lst->arg);
}

/* listener_step -- a closing listener (ctx->closes): callback, then free */
static void listener_step(struct rdmamsg__closing *c)
{
	struct rdmamsg_listener *lst =
		container_of(c, struct rdmamsg_listener, close_step);
	struct rdmamsg_ctx *ctx = lst->ctx;

	if (lst->close_cb)
		lst->close_cb(lst, lst->arg);
	list_del(&lst->link);
	free(lst);
	rdmamsg__loop_unref(ctx);
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
	list_init(&lst->close_step.link);
	lst->close_step.step = listener_step;
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
	if (lst->id->verbs && lst->id->verbs != ctx->cm_verbs &&
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
	list_add_tail(&lst->ctx->closes, &lst->close_step.link);
	rdmamsg__loop_kick(lst->ctx);
	return 0;
}

/* rdmamsg_conn_req_accept -- accept: make the endpoint and answer */
RDMAMSG_EXPORT int rdmamsg_conn_req_accept(struct rdmamsg_conn_req *req,
					   const struct rdmamsg_ep_attr *attr,
					   const struct rdmamsg_ep_cbs *cbs,
					   void *arg, struct rdmamsg_ep **epp)
{
	struct rdmamsg__ep_params pp;
	struct rdmamsg_ctx *ctx;
	struct rdmamsg_ep *ep;
	int ret;

	if (!req || !cbs || !epp || req->obj.type != OBJ_CONN_REQ)
		return -EINVAL;
	/* only the connecting side fails over (rdmamsg.h): refused before
	 * anything is made, the request stays the caller's */
	if (attr && attr->p.failover != RDMAMSG_FAILOVER_OFF)
		return -EINVAL;
	ctx = req->lst->ctx;
	/* the connecting side chose the transport (rdmamsg.h) */
	if (attr)
		pp = attr->p;
	else
		rdmamsg__ep_params_default(&pp);
	pp.transport = req->dc ? RDMAMSG_TRANSPORT_DC : RDMAMSG_TRANSPORT_RC;
	ret = rdmamsg__dc_check(ctx, &pp);
	if (ret)
		return ret;
	ret = rdmamsg__ep_new(ctx, attr, cbs, arg, &ep);
	if (ret)
		return ret;
	ep->p.transport = pp.transport;
	ep->passive = 1;
	ep->id = req->id;
	ret = rdmamsg__ep_setup_qp(ep);
	if (ret)
		goto err_free_ep;
	if (req->dc) {
		ret = rdmamsg__lane_dc_peer(ep->ln, req->id, req->dc_dctn,
					    req->dc_key, req->dc_tag);
		if (ret)
			goto err_free_ep;
	}
	ep->peer_ctl = req->peer_ctl;
	ep->peer_caps = req->peer_caps;
	ep->sid = req->sid; /* before the protocols: a session's (msg.c) */
	rdmamsg__ep_negotiate(ep, req->peer_depth, req->peer_eager,
			      req->peer_max_msg);
	ep->apm.peer_alt_lid = req->alt_lid;
	ret = rdmamsg__ep_session_init(ep);
	if (ret)
		goto err_free_ep;
	ep->id->context = ep;
	ret = rdmamsg__cm_accept(ep, HS_ACC);
	if (ret) {
		ep->id->context = req;
		goto err_free_ep;
	}
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
	rdmamsg__ep_unbind(ep);
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
