/* SPDX-License-Identifier: MIT */
/*
 * conn.c -- rdma_cm event handling and the connection state machines.
 *
 * Active:  resolve_addr -> ADDR_RESOLVED -> resolve_route -> ROUTE_RESOLVED
 *          -> QP (INIT) + receives + rdma_connect(REQ) -> CONNECT_RESPONSE
 *          (ACC): QP to RTS, rdma_establish (RTU) | REJECTED
 * Passive: CONNECT_REQUEST(REQ) -> on_conn_req -> QP to RTS, accept(ACC)
 *          -> ESTABLISHED or reject(REJ); the listener and the requests
 *          are in listen.c.
 * The QPs are the lanes' own, on the context's device context: no id has
 * one, conn_param names it (rdmamsg__cm_qp_param).
 * Every event is copied and acknowledged before it is handled, so handlers
 * may destroy ids.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "dispatch.h"
#include "cm.h"
#include "group.h"
#include "handshake.h"

/* IB CM reject reason (IBTA 12.6.7.2) that librdmacm reports in the
 * REJECTED event's status: nothing listens at the service id */
#define CM_REJ_INVALID_SERVICE_ID 8

/* find_ep -- the endpoint owning id, in O(1) from id->context (the CM
 * delivers no event of an id once it was destroyed), or NULL (a pending
 * request's or a listener's id) */
static struct rdmamsg_ep *find_ep(struct rdma_cm_id *id)
{
	struct rdmamsg__cmobj *o = id ? id->context : NULL;

	if (!o || o->type != OBJ_EP)
		return NULL;
	return container_of(o, struct rdmamsg_ep, obj);
}

/* rd_depth -- a device limit on RDMA READs/atomics in flight, at most 16 */
static uint8_t rd_depth(int dev_max)
{
	return (uint8_t)(dev_max < 1 ? 1 : dev_max > 16 ? 16 : dev_max);
}

/* rdmamsg__cm_conn_param -- the parameters of rdma_connect/rdma_accept.  Rendezvous
 * pulls several chunks with RDMA READ at once: allow as many in flight as
 * the device does (the CM lowers ours to what the peer responds to). */
void rdmamsg__cm_conn_param(struct rdma_conn_param *cp,
			    const struct rdmamsg_ctx *ctx, const uint8_t *pdata,
			    size_t len)
{
	const char *e;

	memset(cp, 0, sizeof(*cp));
	cp->private_data = pdata;
	cp->private_data_len = (uint8_t)len;
	cp->responder_resources = rd_depth(ctx->dattr.max_qp_rd_atom);
	cp->initiator_depth = rd_depth(ctx->dattr.max_qp_init_rd_atom);
	cp->retry_count = 7;
	/* credits make RNR impossible; this is only a safety net (tests turn
	 * it off to prove that no RNR NAK ever happens) */
	cp->rnr_retry_count = 7;
	e = getenv("RDMAMSG_TEST_RNR_RETRY");
	if (e)
		cp->rnr_retry_count = (uint8_t)atoi(e);
}

/* rdmamsg__cm_qp_opts -- the QP's local ACK timeout (before rdma_connect
 * or rdma_accept): the endpoint's, or for a session a shorter one than
 * rdma_cm's default (18, 1.07 s), so that a cut path fails in (retry count
 * 7 + 1) x 537 ms, about 4.3 s, rather than about 8.6 s (rdmamsg.h); a
 * device or CM without the option keeps its default */
void rdmamsg__cm_qp_opts(const struct rdmamsg_ep *ep)
{
	uint8_t t = ep->p.ack_timeout;

	if (!t && ep->sid)
		t = RDMAMSG__SESSION_ACK_TIMEOUT;
	if (!t || !ep->id || !ep->ctx->ops->set_option)
		return;
	if (ep->ctx->ops->set_option(ep->id, RDMA_OPTION_ID,
				     RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof(t)))
		LOG_INFO("endpoint %p: no ACK timeout option (%d): the "
			 "CM's default",
			 (void *)ep, errno);
}

/* rdmamsg__cm_our_hs -- this endpoint's side of the handshake */
size_t rdmamsg__cm_our_hs(struct rdmamsg_ep *ep, int kind, uint8_t *out)
{
	struct rdmamsg__hs hs;

	memset(&hs, 0, sizeof(hs));
	hs.kind = (uint8_t)kind;
	hs.depth = (uint16_t)ep->p.recv_depth;
	hs.ctl = (uint8_t)rdmamsg__ep_own_ctl(ep);
	hs.eager = ep->p.eager;
	hs.max_msg = (uint32_t)ep->p.max_msg;
	hs.caps = ep->caps;
	hs.user = ep->p.pdata;
	hs.user_len = ep->p.pdata_len;
	/* a session's first request names it; a reconnect and its accept
	 * say how much of the session each side received */
	if (kind == HS_REQ && ep->sid)
		hs.kind = HS_SREQ;
	hs.sid = ep->sid;
	hs.delivered = ep->rx_frags;
	if (ep->ln && ep->ln->ops == &rdmamsg__lane_dc_ops) {
		hs.dc = 1;
		rdmamsg__lane_dc_local(ep->ln, &hs.dc_dctn, &hs.dc_key,
				       &hs.dc_tag);
		/* an accept names our DCIs; the lane then waits for the
		 * peer's hello, if the peer will send one */
		if ((hs.kind == HS_ACC || hs.kind == HS_RACC) &&
		    (hs.caps & RDMAMSG_HS_CAP_DCSRC))
			hs.dc_ndci = (uint8_t)rdmamsg__lane_dc_src_local(
				ep->ln,
				!!(ep->peer_caps & RDMAMSG_HS_CAP_DCSRC),
				&hs.dc_nonce, hs.dc_dci);
	} else if (hs.kind == HS_RREQ || hs.kind == HS_RACC) {
		/* these carry no application bytes: the offer always fits */
		hs.alt_lid = rdmamsg__apm_offer(ep, SIZE_MAX);
	} else {
		hs.alt_lid = rdmamsg__apm_offer(
			ep, (hs.kind == HS_SREQ ? RDMAMSG_HS_SESSION_USER
						: RDMAMSG_HS_USER) -
				    RDMAMSG_HS_ALT_LEN);
	}
	return rdmamsg__hs_encode(&hs, out);
}

/* rdmamsg__cm_qp_param -- the QP the REQ/REP name: no id has one (the
 * lanes make theirs on the context's own device context), so conn_param
 * names it, as librdmacm then takes it: the RC lane's QP, or for DC the
 * context's DCT (on an SRQ) */
void rdmamsg__cm_qp_param(const struct rdmamsg_ep *ep,
			  struct rdma_conn_param *cp)
{
	uint32_t dctn, tag;
	uint64_t key;

	if (!ep->ln)
		return;
	if (ep->ln->ops == &rdmamsg__lane_dc_ops) {
		rdmamsg__lane_dc_local(ep->ln, &dctn, &key, &tag);
		cp->qp_num = dctn;
		cp->srq = 1;
	} else if (ep->ln->qp) {
		cp->qp_num = ep->ln->qpn;
		cp->srq = ep->ln->qp->srq != NULL;
	}
}

/* rdmamsg__cm_accept -- answer the request on ep->id with an accept of
 * kind (HS_ACC, HS_RACC): the lane's QP to RTS first (cm_rts), as
 * librdmacm's rdma_accept moves a QP of its own, with the RDMA READ
 * limits this side grants.  0, or -ECONNRESET (logged) */
int rdmamsg__cm_accept(struct rdmamsg_ep *ep, int kind)
{
	struct rdmamsg_ctx *ctx = ep->ctx;
	struct rdma_conn_param cp;
	uint8_t pdata[RDMAMSG_HS_MAX];
	int ret = 0;

	rdmamsg__cm_conn_param(&cp, ctx, pdata,
			       rdmamsg__cm_our_hs(ep, kind, pdata));
	rdmamsg__cm_qp_param(ep, &cp);
	rdmamsg__cm_qp_opts(ep);
	if (ep->ln && ep->ln->ops->cm_rts)
		ret = ep->ln->ops->cm_rts(ep->ln, ep->id,
					  cp.responder_resources,
					  cp.initiator_depth);
	if (!ret && ctx->ops->accept(ep->id, &cp)) {
		ret = rdmamsg__errno(ECONNRESET);
		LOG_ERR("rdma_accept failed: %d", ret);
	}
	return ret ? -ECONNRESET : 0;
}

/* rdmamsg__cm_dc_hs_ok -- a peer's DC block is plausible (untrusted): a
 * 24-bit DCT number, a tag with a slot index and bit 31 clear */
int rdmamsg__cm_dc_hs_ok(const struct rdmamsg__hs *hs)
{
	return hs->dc_dctn && hs->dc_dctn <= 0xffffff &&
	       (hs->dc_tag & RDMAMSG__WRID_TAG_INDEX) &&
	       !(hs->dc_tag & 0x80000000u);
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
		/* -ENODEV and an SRQ's -ENOBUFS say what is missing; the
		 * rest is memory */
		rdmamsg__ep_connect_failed(
			ep, ret == -ENODEV || ret == -ENOBUFS ? ret : -ENOMEM,
			RDMAMSG_REJECT_RESOURCES, NULL, 0);
		return;
	}
	rdmamsg__cm_conn_param(
		&cp, ep->ctx, pdata,
		rdmamsg__cm_our_hs(ep, ep->reconn ? HS_RREQ : HS_REQ, pdata));
	rdmamsg__cm_qp_param(ep, &cp);
	rdmamsg__cm_qp_opts(ep);
	if (ep->ctx->ops->connect(ep->id, &cp)) {
		ret = rdmamsg__errno(ECONNREFUSED);
		LOG_ERR("rdma_connect failed: %d", ret);
		rdmamsg__ep_connect_failed(ep, -EHOSTUNREACH, 0, NULL, 0);
		return;
	}
	rdmamsg__ep_set_state(ep, EPS_CONNECTING);
}

/* active_established -- check the peer's accept and go up */
static void active_established(struct rdmamsg_ep *ep, const struct cm_ev *e)
{
	struct rdmamsg__hs hs;
	int bad;

	if (ep->passive) {
		rdmamsg__apm_up(ep);
		rdmamsg__ep_connected(ep, NULL, 0);
		return;
	}
	bad = rdmamsg__hs_decode(e->pdata, e->pdata_len, &hs);
	if (!bad && (hs.kind != (ep->reconn ? HS_RACC : HS_ACC) ||
		     hs.dc != (ep->ln && ep->ln->ops == &rdmamsg__lane_dc_ops)))
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
	ep->peer_ctl = hs.ctl;
	ep->peer_caps = hs.caps;
	rdmamsg__ep_negotiate(ep, hs.depth, hs.eager, hs.max_msg);
	bad = rdmamsg__ep_session_init(ep);
	if (!bad && ep->reconn)
		bad = rdmamsg__ep_replay_from(ep, hs.delivered);
	if (bad) {
		ep->ctx->ops->disconnect(ep->id);
		if (ep->reconn)
			rdmamsg__ep_reconn_failed(ep, bad);
		else
			rdmamsg__ep_connect_failed(ep, bad, 0, NULL, 0);
		return;
	}
	ep->apm.peer_alt_lid = hs.alt_lid;
	rdmamsg__apm_up(ep);
	rdmamsg__ep_connected(ep, hs.user, hs.user_len);
}

/* active_dc_response -- a DC connection's accept (CONNECT_RESPONSE: the
 * id has no QP): the peer's DCT, key and tag to the lane, the RTU
 * (rdma_establish), then up as an RC connection's ESTABLISHED */
static void active_dc_response(struct rdmamsg_ep *ep, const struct cm_ev *e)
{
	struct rdmamsg__hs hs;
	int ret;

	if (rdmamsg__hs_decode(e->pdata, e->pdata_len, &hs) ||
	    hs.kind != (ep->reconn ? HS_RACC : HS_ACC) || !hs.dc ||
	    !rdmamsg__cm_dc_hs_ok(&hs) || !ep->ln ||
	    ep->ln->ops != &rdmamsg__lane_dc_ops) {
		LOG_ERR("endpoint %p: the peer's DC accept is malformed",
			(void *)ep);
		ep->ctx->ops->disconnect(ep->id);
		rdmamsg__ep_connect_failed(ep, -EPROTO,
					   RDMAMSG_REJECT_HANDSHAKE, NULL, 0);
		return;
	}
	ret = rdmamsg__lane_dc_peer(ep->ln, ep->id, hs.dc_dctn, hs.dc_key,
				    hs.dc_tag);
	/* the acceptor named its DCIs: prove ours (the lane's hello) */
	if (!ret && hs.dc_ndci && (ep->caps & RDMAMSG_HS_CAP_DCSRC))
		ret = rdmamsg__lane_dc_src_peer(ep->ln, hs.dc_nonce, hs.dc_dci,
						hs.dc_ndci);
	if (!ret && ep->ctx->ops->establish(ep->id))
		ret = rdmamsg__errno(ECONNRESET);
	if (ret) {
		LOG_ERR("endpoint %p: DC connection not established: %d",
			(void *)ep, ret);
		ep->ctx->ops->disconnect(ep->id);
		rdmamsg__ep_connect_failed(
			ep, ret == -EPROTO ? -EPROTO : -ECONNRESET, 0, NULL, 0);
		return;
	}
	active_established(ep, e);
}

/* active_rc_response -- an RC connection's accept (CONNECT_RESPONSE: the
 * id has no QP): the lane's QP to RTS with what the CM negotiated and the
 * RTU (rdma_establish), as librdmacm's ucma_process_conn_resp does for a
 * QP of its own, then up as at ESTABLISHED */
static void active_rc_response(struct rdmamsg_ep *ep, const struct cm_ev *e)
{
	int ret = -EPROTO;

	if (ep->ln && ep->ln->ops->cm_rts)
		ret = ep->ln->ops->cm_rts(ep->ln, ep->id, RDMA_MAX_RESP_RES,
					  RDMA_MAX_INIT_DEPTH);
	if (!ret && ep->ctx->ops->establish(ep->id))
		ret = rdmamsg__errno(ECONNRESET);
	if (ret) {
		LOG_ERR("endpoint %p: connection not established: %d",
			(void *)ep, ret);
		if (ep->ln)
			ep->ln->ops->error(ep->ln, ep->sq_head, 0);
		ep->ctx->ops->disconnect(ep->id);
		rdmamsg__ep_connect_failed(ep, -ECONNRESET, 0, NULL, 0);
		return;
	}
	active_established(ep, e);
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
		if (ep->st != EPS_RESOLVING)
			break;
		if (ep->ctx->ops->resolve_route(ep->id, (int)ep->p.connect_ms))
			rdmamsg__ep_connect_failed(ep, -EHOSTUNREACH, 0, NULL,
						   0);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (ep->st == EPS_RESOLVING)
			active_route(ep);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (ep->st == EPS_CONNECTING)
			active_established(ep, e);
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE: /* the id has no QP */
		if (ep->st != EPS_CONNECTING || ep->passive)
			break;
		if (ep->ln && ep->ln->ops == &rdmamsg__lane_dc_ops)
			active_dc_response(ep, e);
		else
			active_rc_response(ep, e);
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (ep->st == EPS_CONNECTING && !ep->passive)
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

/* CM events a pass takes: a storm of connection requests (each an accept,
 * a QP made) must not hold one progress call, and the caller's loop, for
 * long; the rest wait for the next pass */
#define CM_BUDGET 64

/* rdmamsg__cm_process -- get CM events until EAGAIN, or the pass's
 * budget, and handle them */
void rdmamsg__cm_process(struct rdmamsg_ctx *ctx)
{
	struct rdma_cm_event *ev;
	struct cm_ev e;
	int budget = CM_BUDGET;

	while (budget-- > 0) {
		if (ctx->ops->get_cm_event(ctx->ech, &ev))
			return;
		if (ev->id && ev->id->context &&
		    ((struct rdmamsg__cmobj *)ev->id->context)->type ==
			    OBJ_GROUP) {
			rdmamsg__group_cm_event(ctx, ev); /* acks it */
			continue;
		}
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
			rdmamsg__cm_conn_request(ctx, &e);
		} else {
			struct rdmamsg_ep *ep = find_ep(e.id);

			if (ep)
				ep_event(ep, &e);
			/* events for pending requests need nothing: a late
			 * accept fails and reports */
		}
	}
	/* the budget ran out: rdmamsg_ctx_arm() says -EBUSY and the next
	 * pass looks at the channel again (an edge-triggered caller would
	 * get no new event for what is already queued) */
	ctx->pending = 1;
	ctx->force_epoll = 1;
}
