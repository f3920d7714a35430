/* SPDX-License-Identifier: MIT */
/* ep.c -- endpoints: attributes, resources, states, asynchronous close */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "internal.h"
#include "dispatch.h"
#include "fastpath.h"
#include "lane.h"
#include "handshake.h"
#include "proto.h"

#define MAX_EAGER   ((size_t)1 << 20)
#define MAX_MSG_MAX ((size_t)1 << RDMAMSG_MAX_CLASS_SHIFT)

/* rdmamsg__ep_params_default -- the documented defaults */
void rdmamsg__ep_params_default(struct rdmamsg__ep_params *p)
{
	memset(p, 0, sizeof(*p));
	p->connect_ms = 5000;
	p->close_ms = 2000;
	p->peer_ms = 10000;
	p->eager = 8192;
	p->max_msg = (size_t)1 << 20;
	p->recv_depth = 32;
	p->recv_depth_max = RDMAMSG_RECV_DEPTH_GROW;
	p->send_depth = 128;
	p->backlog = 1024;
	p->max_large = (size_t)1 << 30;
	p->reconnect_ms = 10000;
	p->reconnect_tries = 16;
	p->linger_ms = 15000;
}

/* rdmamsg_ep_attr_new -- attributes with defaults */
RDMAMSG_EXPORT int rdmamsg_ep_attr_new(struct rdmamsg_ep_attr **attr)
{
	struct rdmamsg_ep_attr *a;

	if (!attr)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	rdmamsg__ep_params_default(&a->p);
	*attr = a;
	return 0;
}

/* rdmamsg_ep_attr_delete -- free *attr */
RDMAMSG_EXPORT int rdmamsg_ep_attr_delete(struct rdmamsg_ep_attr **attr)
{
	if (!attr)
		return -EINVAL;
	free(*attr);
	*attr = NULL;
	return 0;
}

/* rdmamsg_ep_attr_set_connect_timeout -- ms for a connect attempt */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_connect_timeout(
	struct rdmamsg_ep_attr *attr, unsigned int ms)
{
	if (!attr || ms == 0)
		return -EINVAL;
	attr->p.connect_ms = ms;
	return 0;
}

/* rdmamsg_ep_attr_set_ack_timeout -- the QP's local ACK timeout exponent
 * (0: the default) */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_ack_timeout(struct rdmamsg_ep_attr *attr,
						   unsigned int exp)
{
	if (!attr || exp > 31)
		return -EINVAL;
	attr->p.ack_timeout = (uint8_t)exp;
	return 0;
}

/* rdmamsg_ep_attr_set_close_timeout -- ms a close waits at most */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_close_timeout(
	struct rdmamsg_ep_attr *attr, unsigned int ms)
{
	if (!attr)
		return -EINVAL;
	attr->p.close_ms = ms;
	return 0;
}

/* rdmamsg_ep_attr_set_peer_timeout -- ms of silence that means dead */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_peer_timeout(
	struct rdmamsg_ep_attr *attr, unsigned int ms)
{
	if (!attr || (ms && ms < 30))
		return -EINVAL;
	attr->p.peer_ms = ms;
	return 0;
}

/* rdmamsg_ep_attr_set_eager_size -- bytes per receive buffer */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_eager_size(struct rdmamsg_ep_attr *attr,
						  size_t size)
{
	if (!attr || size < 64 || size > MAX_EAGER)
		return -EINVAL;
	attr->p.eager = (uint32_t)size;
	if (attr->p.max_msg < size)
		attr->p.max_msg = size;
	return 0;
}

/* rdmamsg_ep_attr_set_max_msg_size -- the largest message */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_max_msg_size(
	struct rdmamsg_ep_attr *attr, size_t size)
{
	if (!attr || size < attr->p.eager || size > MAX_MSG_MAX)
		return -EINVAL;
	attr->p.max_msg = size;
	return 0;
}

/* rdmamsg_ep_attr_set_recv_depth -- receive buffers (peer's credits);
 * the window stays there unless a maximum was set too */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_recv_depth(struct rdmamsg_ep_attr *attr,
						  unsigned int depth)
{
	if (!attr || depth < 2 || depth > 4096)
		return -EINVAL;
	attr->p.recv_depth = depth;
	if (!attr->p.recv_depth_max_set)
		attr->p.recv_depth_max = depth;
	return 0;
}

/* rdmamsg_ep_attr_set_recv_depth_max -- the most the receive window may
 * grow to while the peer keeps using it whole */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_recv_depth_max(
	struct rdmamsg_ep_attr *attr, unsigned int depth)
{
	if (!attr || depth < 2 || depth > 4096)
		return -EINVAL;
	attr->p.recv_depth_max = depth;
	attr->p.recv_depth_max_set = 1;
	return 0;
}

/* rdmamsg_ep_attr_set_send_depth -- send work requests in flight */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_send_depth(struct rdmamsg_ep_attr *attr,
						  unsigned int depth)
{
	if (!attr || depth < 4 || depth > 4096)
		return -EINVAL;
	attr->p.send_depth = depth;
	return 0;
}

/* rdmamsg_ep_attr_set_send_backlog -- messages queued without credits */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_send_backlog(
	struct rdmamsg_ep_attr *attr, unsigned int msgs)
{
	if (!attr || msgs > 1048576)
		return -EINVAL;
	attr->p.backlog = msgs;
	return 0;
}

/* rdmamsg_ep_attr_set_private_data -- application bytes for the peer */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_private_data(
	struct rdmamsg_ep_attr *attr, const void *data, size_t len)
{
	if (!attr || len > RDMAMSG_PRIVATE_DATA_MAX || (len && !data))
		return -EINVAL;
	if (len)
		memcpy(attr->p.pdata, data, len);
	attr->p.pdata_len = (uint8_t)len;
	return 0;
}

static void conn_timer_fire(struct rdmamsg__timer *t);
static void ka_timer_fire(struct rdmamsg__timer *t);
static void alive_name(struct rdmamsg_ep *ep);
static unsigned int ka_interval(const struct rdmamsg_ep *ep);
static void close_timer_fire(struct rdmamsg__timer *t);
static void ring_timer_fire(struct rdmamsg__timer *t);
static void path_event(struct rdmamsg_ep *ep, enum rdmamsg_path_event ev,
		       int status);
static void reconn_attempt_failed(struct rdmamsg_ep *ep, int status,
				  int reason);
static int replayable(int status);
static void outage(struct rdmamsg_ep *ep, int status);
static void reconn_step(struct rdmamsg_ep *ep);
static void reconn_attempt(struct rdmamsg_ep *ep, int status);
static uint64_t new_sid(void);
static void linger_wait(struct rdmamsg_ep *ep);

/* rdmamsg_ep_attr_set_linger -- whether rdmamsg_ep_close() first sends
 * what is queued (bounded by the close timeout) */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_linger(struct rdmamsg_ep_attr *attr,
					      int enable)
{
	if (!attr)
		return -EINVAL;
	attr->p.linger = !!enable;
	return 0;
}

/* rdmamsg_ep_attr_set_failover -- the path failover policy (rdmamsg.h) */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_failover(struct rdmamsg_ep_attr *attr,
						enum rdmamsg_failover policy)
{
	if (!attr || (policy != RDMAMSG_FAILOVER_OFF &&
		      policy != RDMAMSG_FAILOVER_RECONNECT &&
		      policy != RDMAMSG_FAILOVER_REPLAY))
		return -EINVAL;
	attr->p.failover = policy;
	return 0;
}

/* rdmamsg_ep_attr_set_apm -- automatic path migration (rdmamsg.h, apm.c) */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_apm(struct rdmamsg_ep_attr *attr,
					   enum rdmamsg_apm mode)
{
	if (!attr || (mode != RDMAMSG_APM_OFF && mode != RDMAMSG_APM_AUTO))
		return -EINVAL;
	attr->p.apm = mode;
	return 0;
}

/* rdmamsg_ep_attr_set_reconnect -- the bounds of a session's reconnect */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_reconnect(struct rdmamsg_ep_attr *attr,
						 unsigned int timeout_ms,
						 unsigned int tries)
{
	if (!attr || timeout_ms == 0 || timeout_ms > 3600000 || tries == 0 ||
	    tries > 1000)
		return -EINVAL;
	attr->p.reconnect_ms = timeout_ms;
	attr->p.reconnect_tries = tries;
	return 0;
}

/* rdmamsg_ep_attr_set_session_linger -- how long an accepted session
 * waits for its connector's reconnect */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_session_linger(
	struct rdmamsg_ep_attr *attr, unsigned int ms)
{
	if (!attr || ms == 0 || ms > 3600000)
		return -EINVAL;
	attr->p.linger_ms = ms;
	return 0;
}

/* rdmamsg_ep_attr_set_path_cb -- the path event callback (NULL: none) */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_path_cb(
	struct rdmamsg_ep_attr *attr,
	void (*cb)(struct rdmamsg_ep *ep, enum rdmamsg_path_event event,
		   unsigned int path, int status, void *arg))
{
	if (!attr)
		return -EINVAL;
	attr->p.path_cb = cb;
	return 0;
}

/* rdmamsg_ep_attr_set_transport -- RC, or DC over the context's shared
 * DCIs (lane_dc.c); checked against the context at connect/accept */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_transport(
	struct rdmamsg_ep_attr *attr, enum rdmamsg_transport transport)
{
	if (!attr || (transport != RDMAMSG_TRANSPORT_RC &&
		      transport != RDMAMSG_TRANSPORT_DC))
		return -EINVAL;
	attr->p.transport = transport;
	return 0;
}

/* rdmamsg_ep_get_path_stats -- the endpoint's path counters */
RDMAMSG_EXPORT int rdmamsg_ep_get_path_stats(const struct rdmamsg_ep *ep,
					     struct rdmamsg_path_stats *stats)
{
	if (!ep || !stats)
		return -EINVAL;
	*stats = ep->pstats;
	return 0;
}

/* free_bufs -- give every pool buffer the endpoint holds back */
static void free_bufs(struct rdmamsg_ep *ep)
{
	struct rdmamsg_buf *n, *next;
	uint32_t i;

	if (ep->sbufs)
		for (i = 0; i < ep->nsbuf; i++)
			if (ep->sbufs[i])
				rdmamsg__buf_put(ep->sbufs[i]);
	if (ep->srq)
		ep->rxb = NULL; /* the SRQ's */
	if (ep->rxb)
		for (i = 0; i < ep->nrx; i++)
			if (ep->rxb[i])
				rdmamsg__buf_put(ep->rxb[i]);
	if (ep->slots)
		for (i = 0; i <= ep->sq_mask; i++)
			if (ep->slots[i].buf) {
				rdmamsg__buf_put(ep->slots[i].buf);
				ep->slots[i].buf = NULL;
			}
	for (n = ep->bl_head; n; n = next) {
		next = n->next;
		if (n != &ep->rp_mark)
			rdmamsg__buf_put(n);
	}
	if (ep->kept) {
		for (i = 0; i <= ep->kept_mask; i++)
			free(ep->kept[i]);
		free(ep->kept);
		ep->kept = NULL;
	}
	ep->bl_head = ep->bl_tail = NULL;
	if (ep->rx_asm)
		rdmamsg__buf_put(ep->rx_asm);
	ep->rx_asm = NULL;
	free(ep->sbufs);
	free(ep->rxb);
	free(ep->slots);
	ep->sbufs = ep->rxb = NULL;
	ep->slots = NULL;
}

/* rx_grow -- the receive buffers ep's window may grow by: up to the
 * maximum asked for (its own ring only: an SRQ's and a DC target's
 * buffers are shared) and what one queue pair of the device takes
 * (max_qp_wr) */
static uint32_t rx_grow(const struct rdmamsg_ep *ep)
{
	uint32_t max = ep->p.recv_depth_max, wr;

	if (ep->p.srq || ep->p.transport == RDMAMSG_TRANSPORT_DC ||
	    max <= ep->p.recv_depth)
		return 0;
	if (ep->ctx->dattr.max_qp_wr > 0) {
		wr = (uint32_t)ep->ctx->dattr.max_qp_wr;
		if (wr < ep->nrx)
			return 0;
		if (max - ep->p.recv_depth > wr - ep->nrx)
			max = ep->p.recv_depth + (wr - ep->nrx);
	}
	return max - ep->p.recv_depth;
}

/* rdmamsg__ep_new -- an endpoint with its rings, not yet connected */
int rdmamsg__ep_new(struct rdmamsg_ctx *ctx, const struct rdmamsg_ep_attr *attr,
		    const struct rdmamsg_ep_cbs *cbs, void *arg,
		    struct rdmamsg_ep **epp)
{
	struct rdmamsg_ep *ep;
	uint32_t ring = 1;
	int ret;

	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -ENOMEM;
	ep->obj.type = OBJ_EP;
	ep->ctx = ctx;
	ep->cbs = *cbs;
	ep->arg = arg;
	if (attr)
		ep->p = attr->p;
	else
		rdmamsg__ep_params_default(&ep->p);
	ret = rdmamsg__ep_proto_params(ep); /* a bad RDMAMSG_RNDV_THRESH */
	ep->caps |= RDMAMSG_HS_CAP_ALIVE | RDMAMSG_HS_CAP_DCSRC;
	if (ret) {
		free(ep);
		return ret;
	}
	ep->st = EPS_IDLE;
	/* the replay's place in the backlog: never reported, never freed */
	ep->rp_mark.reported = 1;
	ep->rp_mark.has_imm = F_XFER;
	list_init(&ep->xwait_link);
	list_init(&ep->defer_link);
	list_init(&ep->link);
	rdmamsg__timer_init(&ep->conn_timer, conn_timer_fire);
	rdmamsg__timer_init(&ep->ka_timer, ka_timer_fire);
	rdmamsg__timer_init(&ep->close_timer, close_timer_fire);
	rdmamsg__timer_init(&ep->ring_timer, ring_timer_fire);

	while (ring < ep->p.send_depth + 1) /* + the drain WR */
		ring <<= 1;
	ep->sq_mask = ring - 1;
	ep->sig_every = ep->p.send_depth / 4 ? ep->p.send_depth / 4 : 1;
	ep->slots = calloc(ring, sizeof(*ep->slots));
	ep->nsbuf = ep->p.send_depth + 1;
	ep->sbufs = calloc(ep->nsbuf, sizeof(*ep->sbufs));
	ep->nrx = ep->p.recv_depth + rdmamsg__ep_own_ctl(ep);
	ep->nrx_max = ep->nrx + rx_grow(ep);
	ep->rx_win = ep->rx_win_max = ep->p.recv_depth;
	ep->caps |=
		RDMAMSG_HS_CAP_GROW | (ep->nrx_max - rdmamsg__ep_own_ctl(ep))
					      << RDMAMSG_HS_GROW_SHIFT;
	ep->peer_ctl = RDMAMSG_CTL_CREDITS; /* the handshake says */
	if (ep->p.srq) {
		struct rdmamsg_srq *srq = ep->p.srq;
		/* looked up before it is read: an SRQ closed and freed since
		 * the attribute named it is no longer in the table */
		int gone = rdmamsg__idt_find(&ctx->ifc.srqs,
					     ep->p.srq_handle) != srq;

		if (gone || srq->closing || ep->p.eager > srq->buf_size) {
			LOG_ERR("SRQ %p: %s", (void *)srq,
				gone ? "closed, or of another context"
				: srq->closing
					? "closing"
					: "buffers below the eager size");
			free(ep->slots);
			free(ep->sbufs);
			free(ep);
			return -EINVAL;
		}
		ep->srq = srq;
		srq->refs++;
		ep->rxb = srq->bufs; /* the SRQ's, indexed by wr_id */
	} else {
		ep->rxb = calloc(ep->nrx_max, sizeof(*ep->rxb));
	}
	if (!ep->slots || !ep->sbufs || !ep->rxb) {
		ret = -ENOMEM;
		goto err_free_bufs;
	}
	/* copy slots for the send ring (at the same index as their WRs) come
	 * from the pool on first use (msg.c); receive buffers when the
	 * connection needs them (rdmamsg__ep_rx_fill) */
	*epp = ep;
	return 0;

err_free_bufs:
	free_bufs(ep);
	if (ep->srq)
		ep->srq->refs--;
	free(ep);
	return ret;
}

/* rdmamsg__ep_rx_fill -- the receive buffers from the pool: -ENOMEM when
 * it has too little; what was taken stays for the next try */
int rdmamsg__ep_rx_fill(struct rdmamsg_ep *ep)
{
	uint32_t i;

	if (ep->srq)
		return 0; /* its window was reserved with its QP */
	for (i = 0; i < ep->nrx; i++)
		if (!ep->rxb[i] && rdmamsg__buf_get(ep->ctx, ep->p.eager,
						    BUF_LIB, &ep->rxb[i]))
			return -ENOMEM;
	return 0;
}

/* rdmamsg__ep_setup_qp -- bind the session to a fresh RC lane on its
 * rdma_cm id (an RC-over-SRQ one with an SRQ): the QP, room on the
 * context's CQ, the receives.  The active side posts its ring now; the
 * passive side once the connection is established (grant), so that a
 * handshake that never completes costs no pool memory. */
int rdmamsg__ep_setup_qp(struct rdmamsg_ep *ep)
{
	return rdmamsg__ep_bind(ep, ep->p.transport == RDMAMSG_TRANSPORT_DC
					    ? &rdmamsg__lane_dc_ops
					    : &rdmamsg__lane_rc_ops);
}

/* rdmamsg__ep_bind -- the session opens a lane of kind ops and registers
 * its up calls with it (none bound yet: rdmamsg__ep_unbind first) */
int rdmamsg__ep_bind(struct rdmamsg_ep *ep, const struct rdmamsg__lane_ops *ops)
{
	struct rdmamsg__lane_attr la;
	int ret;

	if (ep->ln)
		return -EBUSY;
	memset(&la, 0, sizeof(la));
	la.id = ep->id;
	la.send_depth = ep->p.send_depth;
	la.nrx = ep->nrx;
	la.nrx_max = ep->nrx_max;
	la.rx_len = RDMAMSG_HDR + ep->p.eager;
	la.rx_off = RDMAMSG_HDR;
	la.rxb = ep->rxb;
	la.rx_batch = rdmamsg__ep_rx_batch(ep);
	la.srq = ep->srq;
	/* on an SRQ the passive side reserves one data credit and its
	 * control ones; the rest of recv_depth is lent (srq.c) */
	if (ep->srq && ep->passive)
		la.srq_win = 1 + rdmamsg__ep_own_ctl(ep);
	la.post_rx = !ep->passive;
	/* the active side reads its completions only after the handshake
	 * (ESTABLISHED): the lane holds them until then */
	la.hold = !ep->passive;
	ret = ops->open(ep->ctx, &la,
			ep->srq ? &rdmamsg__ep_lane_cbs_shared
				: &rdmamsg__ep_lane_cbs,
			ep, &ep->ln);
	if (ret)
		return ret;
	ep->max_inline = ep->ln->max_inline;
	if (la.srq_win)
		rdmamsg__srq_want(ep, ep->nrx - la.srq_win);
	return 0;
}

/* rdmamsg__ep_unbind -- the session lets its lane go (its QP is
 * destroyed, completions still queued find nothing); it may be bound to a
 * fresh one */
void rdmamsg__ep_unbind(struct rdmamsg_ep *ep)
{
	if (!ep->ln)
		return;
	if (ep->srq)
		rdmamsg__srq_unlend(ep);
	ep->ln->ops->destroy(ep->ln);
	ep->ln = NULL;
}

/* peer_local -- the peer is on this host: the destination GID of the
 * connection's route is one of this device's (its own source GID, as
 * when connecting to one's own address, or another of the port's), so an
 * HCA, like softrdma, loops its traffic back without a wire.  The table
 * is read only when the two GIDs differ. */
static int peer_local(struct rdmamsg_ep *ep)
{
	const struct rdma_cm_id *id = ep->id;
	const union ibv_gid *dgid;
	union ibv_gid g;
	int i;

	if (!id || !id->verbs)
		return 0;
	dgid = &id->route.addr.addr.ibaddr.dgid;
	if (!memcmp(dgid, &id->route.addr.addr.ibaddr.sgid, sizeof(*dgid)))
		return 1;
	for (i = 0; i < 256; i++) {
		if (ep->ctx->ops->query_gid(
			    id->verbs, id->port_num ? id->port_num : 1, i, &g))
			break;
		if (!memcmp(&g, dgid, sizeof(g)))
			return 1;
	}
	return 0;
}

/* rdmamsg__ep_negotiate -- apply the peer's handshake parameters */
void rdmamsg__ep_negotiate(struct rdmamsg_ep *ep, uint32_t peer_depth,
			   uint32_t peer_eager, uint64_t peer_max_msg)
{
	ep->frag = peer_eager < ep->p.eager ? peer_eager : ep->p.eager;
	ep->max_msg = peer_max_msg < ep->p.max_msg ? (size_t)peer_max_msg
						   : ep->p.max_msg;
	ep->peer_local = peer_local(ep);
	rdmamsg__ep_proto_set(ep);
	ep->peer_depth = peer_depth;
	ep->peer_depth_max = peer_depth;
	ep->rx_win_max = ep->rx_win;
	if (ep->peer_caps & RDMAMSG_HS_CAP_GROW) {
		/* it takes credits up to our maximum and names its own,
		 * which bounds what it may grant us (handshake.h) */
		uint32_t m = ep->peer_caps >> RDMAMSG_HS_GROW_SHIFT &
			     RDMAMSG_HS_GROW_MASK;

		if (m > peer_depth)
			ep->peer_depth_max = m > RDMAMSG_HS_MAX_DEPTH
						     ? RDMAMSG_HS_MAX_DEPTH
						     : m;
		ep->rx_win_max = ep->nrx_max - rdmamsg__ep_own_ctl(ep);
	}
	if (ep->passive) {
		/* the active side posted its buffers before connecting */
		ep->credits = (int32_t)peer_depth;
		ep->ctl_credits = ep->peer_ctl;
	} else {
		/* the passive side grants them in-band once established */
		ep->credits = 0;
		ep->ctl_credits = 0;
	}
}

/* post_ring -- post the whole receive ring through the lane */
static int post_ring(struct rdmamsg_ep *ep)
{
	uint32_t idx[32], i, done = 0;
	int ret;

	while (done < ep->nrx) {
		uint32_t k = ep->nrx - done > 32 ? 32 : ep->nrx - done;

		for (i = 0; i < k; i++)
			idx[i] = done + i;
		ret = ep->ln->ops->post_recvs(ep->ln, idx, k);
		if (ret)
			return ret;
		done += k;
	}
	return 0;
}

/* grant -- passive side, connection established: receive buffers from the
 * pool, posted, and granted to the peer in one credit update; without pool
 * memory the peer waits (no credits) and we try again shortly */
static void grant(struct rdmamsg_ep *ep)
{
	int ret;

	if (ep->granted || ep->st != EPS_UP)
		return;
	if (rdmamsg__ep_rx_fill(ep)) {
		LOG_NOTE("endpoint %p: no pool memory for its receive buffers "
			 "yet: the peer waits",
			 (void *)ep);
		rdmamsg__timer_start(ep->ctx, &ep->ring_timer, 10);
		return;
	}
	ret = post_ring(ep);
	if (ret) {
		LOG_ERR("posting %u receive buffers failed: %d", ep->nrx, ret);
		rdmamsg__ep_down(ep, -ENOBUFS);
		return;
	}
	ep->granted = 1;
	ep->to_return += ep->srq ? rdmamsg__srq_grant(ep) : ep->p.recv_depth;
	ep->ctl_to_return += rdmamsg__ep_own_ctl(ep);
	if (rdmamsg__ep_send_grant(ep)) {
		LOG_ERR("endpoint %p: cannot send the credit grant",
			(void *)ep);
		rdmamsg__ep_down(ep, -ENOBUFS);
	}
}

/* ring_timer_fire -- retry the passive side's receive buffers */
static void ring_timer_fire(struct rdmamsg__timer *t)
{
	grant(container_of(t, struct rdmamsg_ep, ring_timer));
}

/* hs_done -- the handshake is over (up, failed or closed): it no longer
 * counts against the context's limit of unfinished handshakes */
static void hs_done(struct rdmamsg_ep *ep)
{
	if (ep->hs_pending) {
		ep->hs_pending = 0;
		ep->ctx->pending_hs--;
	}
}

/* cm_wait -- an endpoint starts (ON) or stops waiting for CM events: a
 * busy pass looks at the channels within RDMAMSG__LOOK_HS_NS while any
 * does (loop.c) */
static void cm_wait(struct rdmamsg_ctx *ctx, int on)
{
	if (!on) {
		ctx->cm_waits--;
		return;
	}
	ctx->cm_waits++;
	if (ctx->next_epoll > ctx->now + RDMAMSG__LOOK_HS_NS)
		ctx->next_epoll = ctx->now + RDMAMSG__LOOK_HS_NS;
}

/* rdmamsg__ep_set_state -- the one place the endpoint's state moves: the
 * transitions of lane.h, anything else refused (-EINVAL) and logged */
int rdmamsg__ep_set_state(struct rdmamsg_ep *ep, enum rdmamsg__ep_st to)
{
	if (ep->st == to)
		return 0;
	if (!rdmamsg__ep_st_legal(ep->st, to)) {
		LOG_ERR("endpoint %p: no transition from state %d to %d",
			(void *)ep, (int)ep->st, (int)to);
		return -EINVAL;
	}
	/* an active connection's lane holds its completions until the
	 * handshake is read: past CONNECTING (up, failed or closed) they
	 * are read from the next progress pass on */
	if (to > EPS_CONNECTING && ep->ln && ep->ln->hold)
		rdmamsg__iface_release(ep->ln);
	if (rdmamsg__ep_st_cm_wait(to) != rdmamsg__ep_st_cm_wait(ep->st))
		cm_wait(ep->ctx, rdmamsg__ep_st_cm_wait(to));
	ep->st = to;
	return 0;
}

/* rdmamsg__ep_defer -- step this endpoint in the next progress pass */
void rdmamsg__ep_defer(struct rdmamsg_ep *ep)
{
	rdmamsg__ctx_defer(ep->ctx, &ep->defer_link);
}

/* qp_error -- the lane stops: its QP to error and a signalled drain WR
 * whose flush completion tells that every earlier send has completed */
static void qp_error(struct rdmamsg_ep *ep)
{
	if (!ep->ln)
		return;
	if (ep->ln->ops->error(ep->ln, ep->sq_head, 1)) {
		ep->slots[ep->sq_head & ep->sq_mask].report = 0;
		ep->slots[ep->sq_head & ep->sq_mask].buf = NULL;
		ep->sq_head++;
	}
}

/* rdmamsg__ep_connected -- the connection is up */
void rdmamsg__ep_connected(struct rdmamsg_ep *ep, const void *pdata, size_t len)
{
	/* not after a failure, nor after a close (which leaves CONNECTING
	 * at once) */
	int reconn = ep->reconn;

	if (ep->st != EPS_CONNECTING)
		return;
	ep->reconn = 0;
	ep->reconn_due = 0;
	rdmamsg__timer_stop(ep->ctx, &ep->conn_timer);
	hs_done(ep);
	/* the active lane's held completions (the peer's grant among them)
	 * are read in this pass (rdmamsg__ep_set_state releases them) */
	rdmamsg__ep_set_state(ep, EPS_UP);
	ep->last_rx = ep->last_tx = rdmamsg__now_ns();
	if (ep->passive) {
		grant(ep);
		if (ep->st != EPS_UP)
			return;
	}
	alive_name(ep);
	if (ep->st != EPS_UP)
		return;
	if (ka_interval(ep))
		rdmamsg__timer_start(ep->ctx, &ep->ka_timer, ka_interval(ep));
	LOG_INFO("endpoint %p connected (frag %u, max %zu, credits %d)",
		 (void *)ep, ep->frag, ep->max_msg, ep->credits);
	if (ep->path_down_ns) {
		path_event(ep, RDMAMSG_FAILOVER_DONE, 0);
		if (ep->st != EPS_UP)
			return; /* closed from the path callback */
	}
	if (reconn) {
		/* a session resumed: what waits goes in this pass */
		rdmamsg__ep_defer(ep);
		return;
	}
	ep->connect_reported = 1;
	if (ep->cbs.on_connect)
		ep->cbs.on_connect(ep, 0, 0, pdata, len, ep->arg);
}

/* path_event -- tell the application (and the counters) about a path */
static void path_event(struct rdmamsg_ep *ep, enum rdmamsg_path_event ev,
		       int status)
{
	switch (ev) {
	case RDMAMSG_PATH_DOWN:
		ep->pstats.path_downs++;
		if (!ep->path_down_ns)
			ep->path_down_ns = rdmamsg__now_ns();
		break;
	case RDMAMSG_FAILOVER_DONE:
		ep->pstats.failovers++;
		ep->pstats.last_failover_ns =
			rdmamsg__now_ns() - ep->path_down_ns;
		ep->path_down_ns = 0;
		break;
	case RDMAMSG_FAILOVER_FAILED:
		ep->pstats.failover_fails++;
		break;
	case RDMAMSG_FAILOVER_START:
		ep->pstats.attempts++;
		break;
	default:
		break;
	}
	LOG_INFO("endpoint %p: path %u: event %d (%s)", (void *)ep,
		 ep->pstats.path, (int)ev, rdmamsg_strerror(status));
	if (ep->p.path_cb)
		ep->p.path_cb(ep, ev, ep->pstats.path, status, ep->arg);
}

/* path_fault -- whether a failed connect attempt is the path's fault
 * (rdmamsg.h: another path may work), not the peer's answer */
static int path_fault(int status, int reason)
{
	return status == -EHOSTUNREACH || status == -ETIMEDOUT ||
	       status == -ECONNRESET || status == -ENETDOWN ||
	       (status == -ECONNREFUSED &&
		reason == RDMAMSG_REJECT_NO_LISTENER);
}

/* next_path -- a connect attempt failed with status: with the reconnect
 * policy, start one on the next path (a fresh rdma_cm id and lane; the
 * session's rings stay).  True when an attempt is under way again, or
 * the application closed the endpoint from a path callback. */
static int next_path(struct rdmamsg_ep *ep, int status, int reason)
{
	struct rdmamsg_ctx *ctx = ep->ctx;
	int ret;

	if (ep->p.failover == RDMAMSG_FAILOVER_OFF || ep->closing ||
	    !path_fault(status, reason))
		return 0;
	path_event(ep, RDMAMSG_PATH_DOWN, status);
	if (ep->closing)
		return 1;
	while (ep->pstats.path + 1 < ep->pstats.npaths) {
		/* the old attempt goes: its completions find no lane, its
		 * id no endpoint (the CM event was copied and acked) */
		rdmamsg__ep_unbind(ep);
		if (ep->id) {
			ctx->ops->destroy_id(ep->id);
			ep->id = NULL;
		}
		ep->pstats.path++;
		path_event(ep, RDMAMSG_FAILOVER_START, 0);
		if (ep->closing)
			return 1;
		ret = rdmamsg__cm_start_connect(
			ep, (struct sockaddr *)&ep->paths[ep->pstats.path]);
		if (!ret) {
			rdmamsg__timer_stop(ctx, &ep->conn_timer);
			rdmamsg__timer_start(ctx, &ep->conn_timer,
					     ep->p.connect_ms);
			return 1;
		}
		status = ret;
		path_event(ep, RDMAMSG_PATH_DOWN, status);
		if (ep->closing)
			return 1;
	}
	path_event(ep, RDMAMSG_FAILOVER_FAILED, status);
	return ep->closing;
}

/* rdmamsg__ep_connect_failed -- report a failed connect attempt once
 * (with the reconnect policy: after the last path) */
void rdmamsg__ep_connect_failed(struct rdmamsg_ep *ep, int status, int reason,
				const void *pdata, size_t len)
{
	if (rdmamsg__ep_st_lane_up(ep->st)) {
		rdmamsg__ep_down(ep, status);
		return;
	}
	if (RDMAMSG_UNLIKELY(ep->reconn)) {
		reconn_attempt_failed(ep, status, reason);
		return;
	}
	/* down, or closed (a close before UP takes the connection down) */
	if (ep->st > EPS_CONNECTING)
		return;
	if (next_path(ep, status, reason))
		return;
	rdmamsg__timer_stop(ep->ctx, &ep->conn_timer);
	hs_done(ep);
	rdmamsg__ep_set_state(ep, EPS_DOWN);
	ep->disc_seen = 1;
	qp_error(ep);
	LOG_INFO("endpoint %p: connect failed: %s (reason %d)", (void *)ep,
		 rdmamsg_strerror(status), reason);
	ep->connect_reported = 1;
	if (ep->cbs.on_connect)
		ep->cbs.on_connect(ep, status, reason, pdata, len, ep->arg);
}

/* tell_down -- the user's side of going down (rdmamsg__ep_down, or the
 * peer's goodbye): what is queued is cancelled, on_disconnect once */
static void tell_down(struct rdmamsg_ep *ep, int status)
{
	rdmamsg__ep_cancel_backlog(ep, -ECANCELED);
	/* closed from a callback before (an on_send above, a request's
	 * completion): nothing but on_send and close_cb after a close */
	if (!ep->down_reported && !ep->closing) {
		ep->down_reported = 1;
		if (ep->cbs.on_disconnect)
			ep->cbs.on_disconnect(ep, status, ep->arg);
	}
}

/* rdmamsg__ep_down -- an established connection is gone: flush, report */
void rdmamsg__ep_down(struct rdmamsg_ep *ep, int status)
{
	if (RDMAMSG_UNLIKELY(ep->sid) && ep->st == EPS_UP && !ep->closing &&
	    replayable(status)) {
		outage(ep, status);
		return;
	}
	if (!rdmamsg__ep_st_lane_up(ep->st)) {
		if (ep->st <= EPS_CONNECTING)
			rdmamsg__ep_connect_failed(ep, status, 0, NULL, 0);
		return;
	}
	rdmamsg__ep_set_state(ep, ep->closing ? EPS_FLUSHING : EPS_DOWN);
	rdmamsg__timer_stop(ep->ctx, &ep->ka_timer);
	rdmamsg__timer_stop(ep->ctx, &ep->ring_timer);
	if (!ep->closing) /* PEER_CLOSED's bound: no longer waited for */
		rdmamsg__timer_stop(ep->ctx, &ep->close_timer);
	/* the QP to error (it flushes its WRs), then the DREQ to the peer:
	 * rdma_disconnect's order for a QP of the id's own */
	qp_error(ep);
	ep->ctx->ops->disconnect(ep->id);
	if (ep->xf)
		rdmamsg__xfer_down(ep, status);
	if (ep->closing) {
		rdmamsg__ep_defer(ep);
		return;
	}
	LOG_INFO("endpoint %p down: %s", (void *)ep, rdmamsg_strerror(status));
	tell_down(ep, status);
}

/* conn_timer_fire -- the connect attempt took too long */
static void conn_timer_fire(struct rdmamsg__timer *t)
{
	struct rdmamsg_ep *ep = container_of(t, struct rdmamsg_ep, conn_timer);

	if (ep->st == EPS_RECONNECTING) {
		/* the session's linger: over, or wait on */
		linger_wait(ep);
		return;
	}
	if (ep->backoff) {
		/* the wait between two reconnect attempts is over */
		ep->backoff = 0;
		reconn_attempt(ep, ep->fail_status);
		return;
	}
	if (ep->reconn && rdmamsg__now_ns() >= ep->reconn_due_ns &&
	    ep->p.reconnect_tries - ep->tries_left >= 2) {
		/* a reconnect attempt the deadline cut short learned
		 * nothing of the peer: the session ends with what the
		 * attempt before it found (a refusal, say: fail_status),
		 * not with this one's timeout */
		rdmamsg__ep_connect_failed(ep, ep->fail_status, 0, NULL, 0);
		return;
	}
	rdmamsg__ep_connect_failed(ep, -ETIMEDOUT, 0, NULL, 0);
}

/*
 * The peer's clock (RDMAMSG_HS_CAP_ALIVE).  The target of one-sided work
 * hears nothing from it, and the initiator's keep-alives and credit
 * returns wait on its send queue behind its own work requests: on a slow
 * or lossy link longer than any peer timeout, though the initiator is
 * alive (and the target's keep-alives stop too once the initiator owes it
 * its control credits).  So each side names, in one keep-alive, where its
 * context's clock is (ctx->now, rewritten on every pass of its event
 * loop, registered for remote read) and how often it will read the
 * peer's; each then ticks (a loop pass) at least that often.  A side
 * that has heard nothing for a third of its peer timeout reads the
 * peer's clock (RDMA READ: the peer's HCA answers it, outside the peer's
 * send queue), one read at a time, at each tick.  Signs of life:
 *   - anything received from the peer, as before;
 *   - the clock changed between two reads: the peer's process ran after
 *     the earlier read sampled it, and that read's completion counts;
 *   - a one-sided work request of ours completing (the peer's HCA took
 *     it) while our read waits behind our own work, unless the last read
 *     found the clock standing still.
 * A hung process's clock stands still, a dead host's or a cut link's
 * read never completes (the QP's retries end in an error): either is
 * still declared dead, within the timeout, a tick and one read's round
 * trip after its last sign (the read in flight behind our own work: after
 * that work drains).
 */

/* ka_interval -- ms between keep-alive ticks: a third of our timeout, or
 * less where the peer reads our clock more often (each tick is a pass of
 * our loop, which rewrites the clock); 0: no ticks */
static unsigned int ka_interval(const struct rdmamsg_ep *ep)
{
	unsigned int t = ep->p.peer_ms / 3;

	if (ep->alive_tick && (!t || ep->alive_tick < t))
		t = ep->alive_tick;
	return t;
}

/* alive_name -- tell the peer where our clock is, once per connection */
static void alive_name(struct rdmamsg_ep *ep)
{
	struct rdmamsg_ctx *ctx = ep->ctx;
	struct rdmamsg__alive_wire w;
	uint32_t tick;

	if (ep->alive_named ||
	    !(ep->caps & ep->peer_caps & RDMAMSG_HS_CAP_ALIVE))
		return;
	if (!ctx->alive_mr) {
		errno = 0;
		ctx->alive_mr =
			ctx->ops->reg_mr(ctx->pd, &ctx->now, sizeof(ctx->now),
					 IBV_ACCESS_REMOTE_READ);
		if (!ctx->alive_mr) {
			/* the peer then goes by what it hears, as before */
			LOG_NOTE("endpoint %p: registering the clock failed "
				 "(%d): the peer hears keep-alives only",
				 (void *)ep, errno);
			ep->alive_named = 1;
			return;
		}
	}
	w.addr = htole64((uint64_t)(uintptr_t)&ctx->now);
	w.rkey = htole32(ctx->alive_mr->rkey);
	/* twice per read: a clock that moves once per read may be missed by
	 * a late tick */
	tick = ep->p.peer_ms / 6;
	if (ep->p.peer_ms && tick < RDMAMSG_ALIVE_TICK_MIN)
		tick = RDMAMSG_ALIVE_TICK_MIN;
	w.tick_ms = htole32(tick);
	if (rdmamsg__ep_send_alive(ep, &w, sizeof(w)) == 0)
		ep->alive_named = 1;
}

/* rdmamsg__ep_alive_rx -- the peer named its clock (a keep-alive's
 * payload of len bytes): read it from now on; name ours in turn */
void rdmamsg__ep_alive_rx(struct rdmamsg_ep *ep, const void *payload,
			  uint32_t len)
{
	uint64_t addr;
	uint32_t rkey, tick;

	if (!(ep->caps & RDMAMSG_HS_CAP_ALIVE) ||
	    rdmamsg__alive_check(payload, len, &addr, &rkey, &tick)) {
		LOG_ERR("endpoint %p: malformed clock in a keep-alive "
			"(%u bytes): closing",
			(void *)ep, len);
		rdmamsg__ep_down(ep, -EPROTO);
		return;
	}
	ep->alive_raddr = addr;
	ep->alive_rkey = rkey;
	ep->alive_peer = 1;
	ep->alive_have = 0;
	ep->alive_tick = tick;
	if (ep->st != EPS_UP)
		return; /* rdmamsg__ep_connected names ours, starts the ticks */
	alive_name(ep);
	if (ep->st == EPS_UP && ka_interval(ep))
		rdmamsg__timer_start(ep->ctx, &ep->ka_timer, ka_interval(ep));
}

/* rdmamsg__ep_alive_ack -- a one-sided work request of ours completed
 * while a read of the peer's clock waits behind our work: the peer's HCA
 * took it, and the read will tell whether its process runs.  A sign of
 * life unless the last read found the clock standing still (a hung peer:
 * then only the clock moving again, or a message, counts) */
void rdmamsg__ep_alive_ack(struct rdmamsg_ep *ep)
{
	if ((!ep->alive_have || ep->alive_moved) && ep->ctx->now > ep->last_rx)
		ep->last_rx = ep->ctx->now;
}

/* alive_read_done -- a read of the peer's clock completed */
static void alive_read_done(struct rdmamsg_ep *ep, int status, uint64_t value,
			    void *op_ctx)
{
	(void)op_ctx;
	ep->alive_rd = 0;
	if (status || ep->st != EPS_UP)
		return; /* the connection's own error, if any, says more */
	ep->alive_moved = ep->alive_have && value != ep->alive_val;
	if (ep->alive_moved && ep->alive_val_ns > ep->last_rx)
		ep->last_rx = ep->alive_val_ns;
	ep->alive_have = 1;
	ep->alive_val = value;
	ep->alive_val_ns = ep->ctx->now;
}

/* ka_timer_fire -- keep-alive tick: detect a silent peer, stay audible */
static void ka_timer_fire(struct rdmamsg__timer *t)
{
	struct rdmamsg_ep *ep = container_of(t, struct rdmamsg_ep, ka_timer);
	uint64_t now = rdmamsg__now_ns();
	uint64_t limit = (uint64_t)ep->p.peer_ms * 1000000ull;

	if (ep->st != EPS_UP)
		return;
	if (!limit) {
		/* no timeout of ours: a tick for the peer's reads */
		alive_name(ep);
		if (ep->st == EPS_UP)
			rdmamsg__timer_start(ep->ctx, &ep->ka_timer,
					     ka_interval(ep));
		return;
	}
	/* completions not yet polled count as signs of life */
	rdmamsg__ep_poll(ep);
	if (ep->st != EPS_UP)
		return;
	if (now - ep->last_rx > limit) {
		LOG_NOTE("endpoint %p: peer silent for %u ms", (void *)ep,
			 ep->p.peer_ms);
		rdmamsg__ep_down(ep, -ETIMEDOUT);
		return;
	}
	alive_name(ep);
	if (ep->alive_peer && !ep->alive_rd && now - ep->last_rx >= limit / 3 &&
	    rdmamsg__alive_read(ep, ep->alive_raddr, ep->alive_rkey,
				alive_read_done) == 0)
		ep->alive_rd = 1;
	if (now - ep->last_tx >= limit / 3)
		rdmamsg__ep_send_ctl(ep, W_KEEPALIVE);
	rdmamsg__timer_start(ep->ctx, &ep->ka_timer, ka_interval(ep));
}

/* close_timer_fire -- stop waiting for the peer and the flush; in
 * PEER_CLOSED, for the disconnect of a peer that said goodbye */
static void close_timer_fire(struct rdmamsg__timer *t)
{
	struct rdmamsg_ep *ep = container_of(t, struct rdmamsg_ep, close_timer);

	if (ep->st == EPS_PEER_CLOSED) {
		LOG_NOTE("endpoint %p: the peer said goodbye but did not "
			 "disconnect in %u ms: disconnecting",
			 (void *)ep, ep->p.close_ms);
		rdmamsg__ep_down(ep, 0);
		return;
	}
	ep->close_timed_out = 1;
	rdmamsg__ep_defer(ep);
}

/* rdmamsg__ep_free -- release everything; the endpoint is gone */
void rdmamsg__ep_free(struct rdmamsg_ep *ep)
{
	struct rdmamsg_ctx *ctx = ep->ctx;

	rdmamsg__timer_stop(ctx, &ep->conn_timer);
	rdmamsg__timer_stop(ctx, &ep->ka_timer);
	rdmamsg__timer_stop(ctx, &ep->close_timer);
	rdmamsg__timer_stop(ctx, &ep->ring_timer);
	hs_done(ep);
	if (rdmamsg__ep_st_cm_wait(ep->st))
		cm_wait(ctx, 0);
	rdmamsg__ep_unbind(ep);
	if (ep->id)
		ctx->ops->destroy_id(ep->id);
	if (ep->xf)
		rdmamsg__xfer_free(ep);
	free_bufs(ep);
	if (ep->srq)
		rdmamsg__srq_put(ep->srq);
	list_del(&ep->xwait_link);
	list_del(&ep->defer_link);
	list_del(&ep->link);
	free(ep->paths);
	free(ep);
	/* idle slabs beyond the pool's idle size go back to the system */
	rdmamsg__pool_shrink(ctx);
}

/* rdmamsg__ep_bye_recv -- the peer said goodbye: a clean close.  The
 * application hears of it now, but the connection stays up (PEER_CLOSED,
 * lane.h) until the peer disconnects, which it does once its goodbye has
 * completed: disconnecting here could overtake the acknowledgement of
 * its last operations (a lossy link) and flush them at the peer, with
 * their data here.  The close timeout bounds the wait. */
void rdmamsg__ep_bye_recv(struct rdmamsg_ep *ep)
{
	ep->bye_seen = 1;
	if (ep->st != EPS_UP)
		return; /* closing too: close_up() sees bye_seen */
	LOG_INFO("endpoint %p: the peer closed", (void *)ep);
	rdmamsg__ep_set_state(ep, EPS_PEER_CLOSED);
	rdmamsg__timer_stop(ep->ctx, &ep->ka_timer);
	rdmamsg__timer_stop(ep->ctx, &ep->ring_timer);
	rdmamsg__timer_start(ep->ctx, &ep->close_timer, ep->p.close_ms);
	if (ep->xf)
		rdmamsg__xfer_down(ep, 0);
	tell_down(ep, 0);
}

/* rdmamsg__ep_peer_disconnected -- the fabric says the connection is gone:
 * read what the peer sent before (its goodbye among it), then it is a
 * clean close only if the goodbye came.  The peer's CM waits for our
 * DREP, which only our disconnect (or destroying the id) sends; an
 * endpoint that never came up sends it here, as rdmamsg__ep_down does
 * for one that did. */
void rdmamsg__ep_peer_disconnected(struct rdmamsg_ep *ep)
{
	int i;

	ep->disc_seen = 1;
	/* nothing follows the goodbye: once seen, no drain (one per event
	 * cost O(endpoints) each on softrdma) */
	for (i = 0; i < 1024 && rdmamsg__ep_st_lane_up(ep->st) && ep->ln &&
		    !ep->bye_seen;
	     i++)
		if (!rdmamsg__iface_poll(ep->ctx))
			break;
	if (rdmamsg__ep_st_lane_up(ep->st)) {
		rdmamsg__ep_down(ep, ep->closing    ? -ECANCELED
				     : ep->bye_seen ? 0
						    : -ECONNRESET);
		return;
	}
	/*
	 * Not up: a DREQ before our side was established (an accepted
	 * endpoint whose RTU was lost: the IB CM takes a DREQ in REP_SENT,
	 * cm_dreq_handler), or after the connect failed (its timeout) with
	 * the id left as it was.  The IB CM sends the DREP only from
	 * DREQ_RCVD (ib_send_cm_drep), which rdma_disconnect tries where
	 * it cannot send a DREQ; elsewhere it sends nothing.  Without it
	 * the peer waits for its DREQ's timeout, or our close.
	 */
	if (ep->id)
		ep->ctx->ops->disconnect(ep->id);
	if (ep->st <= EPS_CONNECTING)
		rdmamsg__ep_connect_failed(ep, -ECONNRESET, 0, NULL, 0);
}

/* close_up -- a closing endpoint that is still connected: linger (send
 * what is queued), say goodbye, and once the goodbye has completed take
 * the connection down; the close timer bounds it all.  True while it
 * waits. */
static int close_up(struct rdmamsg_ep *ep)
{
	if (ep->close_timed_out)
		goto down;
	if (ep->lingering) {
		if (ep->bl_head)
			return 1; /* completions come back here */
		ep->lingering = 0;
	}
	rdmamsg__ep_cancel_backlog(ep, -ECANCELED);
	/* the peer said goodbye first (or both closed at once and ours is
	 * not out yet): it disconnects once its goodbye has completed, and
	 * a disconnect of ours could overtake the acknowledgement of its
	 * last operations (PEER_CLOSED, lane.h): wait for it, or the timer */
	if (ep->bye_seen && !ep->bye_posted)
		return 1; /* rdmamsg__ep_peer_disconnected() comes back */
	/* the rendezvous the peer knows of end first */
	if (!ep->bye_posted && rdmamsg__xfer_unsettled(ep))
		return 1; /* its FIN, or our reads, come back here */
	if (!ep->bye_posted) {
		if (rdmamsg__ep_send_bye(ep)) {
			LOG_INFO("endpoint %p: goodbye waits (ctl %u, sq %u)",
				 (void *)ep, ep->ctl_credits,
				 (unsigned int)(ep->sq_head - ep->sq_tail));
			return 1; /* no send slot yet: a completion frees one */
		}
		LOG_DBG("endpoint %p: goodbye posted", (void *)ep);
		ep->bye_posted = 1;
		ep->bye_seq = ep->sq_head - 1;
	}
	if (ep->sq_tail <= ep->bye_seq)
		return 1;
down:
	rdmamsg__ep_down(ep, -ECANCELED);
	return 0;
}

/* cancel_slots -- posted sends the flush did not report: -ECANCELED */
static void cancel_slots(struct rdmamsg_ep *ep)
{
	while (ep->sq_tail < ep->sq_head)
		rdmamsg__ep_complete_slots(ep, ep->sq_tail, -ECANCELED);
}

/* rdmamsg__ep_step -- advance a closing endpoint; free it when done */
void rdmamsg__ep_step(struct rdmamsg_ep *ep)
{
	struct rdmamsg_ctx *ctx = ep->ctx;
	void (*cb)(struct rdmamsg_ep *, void *);
	void *arg;

	if (RDMAMSG_UNLIKELY(ep->reconn_due) && !ep->closing) {
		reconn_step(ep);
		return;
	}
	if (!ep->closing) {
		/* a session resumed (rdmamsg__ep_connected): what queued
		 * during the outage goes now, not with the next credit */
		if (ep->st == EPS_UP && ep->ln)
			rdmamsg__ep_flush(ep);
		return;
	}
	if (ep->st == EPS_DRAINING) {
		if (ep->ln) {
			rdmamsg__ep_poll(ep);
			/* lingering: the backlog; nothing once the peer said
			 * goodbye (it delivers nothing more) */
			if (ep->st == EPS_DRAINING &&
			    !(ep->bye_seen && !ep->bye_posted))
				rdmamsg__ep_flush(ep);
		}
		if (ep->st == EPS_DRAINING && close_up(ep))
			return;
	}
	rdmamsg__ep_cancel_backlog(ep, -ECANCELED);
	if (ep->ln)
		rdmamsg__ep_poll(ep); /* flush completions */
	if (!ep->close_timed_out &&
	    (ep->sq_tail != ep->sq_head || !ep->disc_seen))
		return; /* a CQ or CM event, or the timer, comes back */
	/* a close that no rdmamsg__ep_down ended (a session's outage, whose
	 * connection went without one): requests and transfers waiting for
	 * the peer complete now, before the close callback */
	if (ep->xf)
		rdmamsg__xfer_down(ep, -ECANCELED);
	cancel_slots(ep);
	cb = ep->close_cb;
	arg = ep->arg;
	/* every operation has completed; memory goes only after the cb */
	rdmamsg__ep_set_state(ep, EPS_CLOSED);
	if (cb)
		cb(ep, arg);
	rdmamsg__ep_free(ep);
	rdmamsg__loop_unref(ctx);
}

/* rdmamsg_ep_close -- asynchronous close (see rdmamsg.h) */
RDMAMSG_EXPORT int rdmamsg_ep_close(struct rdmamsg_ep *ep,
				    void (*close_cb)(struct rdmamsg_ep *ep,
						     void *arg))
{
	if (!ep)
		return -EINVAL;
	if (ep->closing)
		return -EALREADY;
	ep->closing = 1;
	ep->close_cb = close_cb;
	rdmamsg__timer_stop(ep->ctx, &ep->conn_timer);
	rdmamsg__timer_stop(ep->ctx, &ep->ka_timer);
	rdmamsg__timer_stop(ep->ctx, &ep->ring_timer);
	if (ep->st == EPS_PEER_CLOSED) {
		/* the peer said goodbye: no goodbye of ours; the close waits
		 * for its disconnect, bounded by the timer started at its
		 * goodbye (close_up) */
		rdmamsg__ep_set_state(ep, EPS_DRAINING);
		ep->lingering = 0;
		rdmamsg__ep_defer(ep);
		return 0;
	}
	if (ep->st == EPS_UP) {
		/* goodbye first (rdmamsg__ep_step); with linger, after what
		 * is queued */
		rdmamsg__ep_set_state(ep, EPS_DRAINING);
		ep->lingering = ep->p.linger;
	} else {
		if (ep->st != EPS_DOWN) {
			/* not yet connected: the connection goes down now */
			ep->disc_seen = 1;
			if (ep->ln)
				ep->ln->ops->error(ep->ln, ep->sq_head, 0);
		}
		rdmamsg__ep_set_state(ep, EPS_FLUSHING);
	}
	rdmamsg__timer_start(ep->ctx, &ep->close_timer, ep->p.close_ms);
	rdmamsg__ep_defer(ep);
	return 0;
}

/* rdmamsg_ep_get_state -- the endpoint's state */
RDMAMSG_EXPORT int rdmamsg_ep_get_state(const struct rdmamsg_ep *ep,
					enum rdmamsg_ep_state *state)
{
	if (!ep || !state)
		return -EINVAL;
	*state = rdmamsg__ep_st_public(ep->st);
	return 0;
}

/* rdmamsg_ep_get_max_msg_size -- the negotiated maximum */
RDMAMSG_EXPORT int rdmamsg_ep_get_max_msg_size(const struct rdmamsg_ep *ep,
					       size_t *size)
{
	if (!ep || !size)
		return -EINVAL;
	if (!ep->max_msg)
		return -ENOTCONN;
	*size = ep->max_msg;
	return 0;
}

/* parse_paths -- addr as a comma-separated list of "host:port" entries
 * (rdmamsg.h): *n of them into a fresh array *out; -EINVAL for an empty,
 * malformed or portless entry, more than RDMAMSG_MAX_PATHS, or a list
 * without the reconnect policy; nothing is allocated on error */
static int parse_paths(const char *addr, enum rdmamsg_failover policy,
		       struct sockaddr_storage **out, unsigned int *n)
{
	struct sockaddr_storage ss[RDMAMSG_MAX_PATHS];
	char one[300];
	const char *p = addr, *comma;
	unsigned int k = 0;
	size_t len;
	int ret;

	for (;;) {
		comma = strchr(p, ',');
		len = comma ? (size_t)(comma - p) : strlen(p);
		if (k == RDMAMSG_MAX_PATHS || len == 0 || len >= sizeof(one))
			return -EINVAL;
		memcpy(one, p, len);
		one[len] = '\0';
		ret = rdmamsg__addr_parse(one, &ss[k]);
		if (ret)
			return ret;
		if (ss[k].ss_family == AF_INET
			    ? ((struct sockaddr_in *)&ss[k])->sin_port == 0
			    : ((struct sockaddr_in6 *)&ss[k])->sin6_port == 0)
			return -EINVAL;
		k++;
		if (!comma)
			break;
		p = comma + 1;
	}
	if (k > 1 && policy == RDMAMSG_FAILOVER_OFF)
		return -EINVAL;
	*out = malloc(k * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	memcpy(*out, ss, k * sizeof(**out));
	*n = k;
	return 0;
}

/* rdmamsg_connect -- start an active connection (on the first path) */
RDMAMSG_EXPORT int rdmamsg_connect(struct rdmamsg_ctx *ctx, const char *addr,
				   const struct rdmamsg_ep_attr *attr,
				   const struct rdmamsg_ep_cbs *cbs, void *arg,
				   struct rdmamsg_ep **epp)
{
	struct sockaddr_storage *paths;
	struct rdmamsg_ep *ep;
	unsigned int npaths;
	int ret;

	if (!ctx || !addr || !cbs || !epp)
		return -EINVAL;
	/* a session names itself in the request's private data
	 * (rdmamsg.h) */
	if (attr && attr->p.failover == RDMAMSG_FAILOVER_REPLAY &&
	    attr->p.pdata_len > RDMAMSG_HS_SESSION_USER)
		return -EINVAL;
	/* DC lanes have no QP of their own to migrate (rdmamsg.h) */
	if (attr && attr->p.apm != RDMAMSG_APM_OFF &&
	    attr->p.transport == RDMAMSG_TRANSPORT_DC)
		return -EINVAL;
	ret = attr ? rdmamsg__dc_check(ctx, &attr->p) : 0;
	if (ret)
		return ret;
	ret = parse_paths(addr, attr ? attr->p.failover : RDMAMSG_FAILOVER_OFF,
			  &paths, &npaths);
	if (ret)
		return ret;
	ret = rdmamsg__ep_new(ctx, attr, cbs, arg, &ep);
	if (ret) {
		free(paths);
		return ret;
	}
	ep->paths = paths;
	ep->pstats.npaths = npaths;
	if (ep->p.failover == RDMAMSG_FAILOVER_REPLAY)
		ep->sid = new_sid();
	/* the active side posts its receive buffers before connecting */
	ret = rdmamsg__ep_rx_fill(ep);
	if (ret) {
		rdmamsg__ep_free(ep);
		return ret;
	}
	/* a path whose address cannot be resolved even now is skipped:
	 * counted, not reported (no callback runs inside this call) */
	while ((ret = rdmamsg__cm_start_connect(
			ep, (struct sockaddr *)&paths[ep->pstats.path])) &&
	       ret != -ENOMEM && ep->pstats.path + 1 < npaths) {
		ep->pstats.path_downs++;
		if (!ep->path_down_ns)
			ep->path_down_ns = rdmamsg__now_ns();
		ep->pstats.path++;
	}
	if (ret) {
		rdmamsg__ep_free(ep);
		return ret;
	}
	rdmamsg__timer_start(ctx, &ep->conn_timer, ep->p.connect_ms);
	list_add_tail(&ctx->eps, &ep->link);
	rdmamsg__loop_ref(ctx);
	*epp = ep;
	return 0;
}

/* ---- sessions: reconnect-and-replay (rdmamsg.h; lane.h) -------------- */

/* the backoff between failed reconnect attempts (rdmamsg.h) */
#define RECONN_BACKOFF_MIN_MS 10u
#define RECONN_BACKOFF_MAX_MS 1000u

/* new_sid -- a random session id, never 0 */
static uint64_t new_sid(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v) || !v)
		v = rdmamsg__now_ns() ^ ((uint64_t)getpid() << 40) ^
		    (uint64_t)(uintptr_t)&v;
	return v ? v : 1;
}

/* rdmamsg__ep_session_init -- after negotiating: the ring of kept
 * fragments, one per credit the peer may grant (its window's maximum: a
 * credit comes back only once its fragment was delivered, so no slot is
 * reused before); on a reconnect the peer must be what it was: 0,
 * -ENOMEM or -EPROTO */
int rdmamsg__ep_session_init(struct rdmamsg_ep *ep)
{
	uint32_t n = 1;

	if (!ep->sid)
		return 0;
	if (ep->kept)
		return ep->peer_depth_max == ep->kept_depth &&
				       ep->frag == ep->kept_frag
			       ? 0
			       : -EPROTO;
	while (n < ep->peer_depth_max)
		n <<= 1;
	ep->kept = calloc(n, sizeof(*ep->kept));
	if (!ep->kept)
		return -ENOMEM;
	ep->kept_mask = n - 1;
	ep->kept_depth = ep->peer_depth_max;
	ep->kept_frag = ep->frag;
	return 0;
}

/* rdmamsg__ep_kept_alloc -- a slot of the ring of kept fragments, on its
 * first use (msg.c keep()); NULL: no memory */
struct rdmamsg__kept *rdmamsg__ep_kept_alloc(struct rdmamsg_ep *ep,
					     struct rdmamsg__kept **kp)
{
	*kp = malloc(sizeof(**kp) + ep->kept_frag);
	return *kp;
}

/* rdmamsg__ep_replay_from -- the peer received delivered fragments of the
 * session: the rest of what was posted goes again, first (the backlog's
 * mark); -EPROTO when delivered is not a count we can serve */
int rdmamsg__ep_replay_from(struct rdmamsg_ep *ep, uint64_t delivered)
{
	/* a replay cut short by another failure: its end is still due */
	uint64_t end = ep->rp_next < ep->rp_end ? ep->rp_end : ep->tx_frags;

	if (delivered > end || end - delivered > (uint64_t)ep->kept_mask + 1) {
		LOG_ERR("endpoint %p: the peer has %llu fragments of %llu "
			"sent: not a replay",
			(void *)ep, (unsigned long long)delivered,
			(unsigned long long)end);
		return -EPROTO;
	}
	ep->tx_frags = ep->rp_next = delivered;
	ep->rp_end = end;
	if (delivered < end && ep->bl_head != &ep->rp_mark) {
		ep->rp_mark.next = ep->bl_head;
		ep->bl_head = &ep->rp_mark;
		if (!ep->bl_tail)
			ep->bl_tail = &ep->rp_mark;
	}
	LOG_INFO("endpoint %p: the peer has %llu fragments, %llu go again",
		 (void *)ep, (unsigned long long)delivered,
		 (unsigned long long)(end - delivered));
	return 0;
}

/* rdmamsg__ep_reconn_reset -- flow control of a fresh connection: the
 * receive ring is posted whole again, nothing owed, no credits yet */
void rdmamsg__ep_reconn_reset(struct rdmamsg_ep *ep)
{
	ep->to_return = ep->ctl_to_return = ep->ctl_pending = 0;
	ep->rx_hold_due = ep->rx_withheld = 0; /* the ring is granted whole */
	/* the window starts again at the depth; a ring that grew is posted
	 * whole, its buffers past the depth granted as it grows again */
	ep->rx_win = ep->p.recv_depth;
	if (ep->xf)
		rdmamsg__xfer_reconn_reset(ep);
	ep->returned_total = ep->received_total;
	ep->credits = 0;
	ep->ctl_credits = 0;
	ep->granted = 0;
	ep->unsignaled = 0;
	ep->disc_seen = 0;
	ep->last_rx = ep->last_tx = rdmamsg__now_ns();
	/* a new connection: the peer names its clock again */
	ep->alive_named = ep->alive_peer = ep->alive_have = ep->alive_rd = 0;
	ep->alive_tick = 0;
}

/* rdmamsg__ep_detach -- the failed connection's lane and id go (never
 * from an up call of that lane); its completions go with it, so what was
 * in flight is done here: data fragments were kept (sent again if the
 * peer lacks them: on_send 0), one-sided operations and rendezvous pulls
 * -ECONNRESET (they may or may not have executed) */
void rdmamsg__ep_detach(struct rdmamsg_ep *ep)
{
	rdmamsg__ep_unbind(ep);
	if (ep->id) {
		ep->ctx->ops->destroy_id(ep->id);
		ep->id = NULL;
	}
	while (ep->sq_tail < ep->sq_head) {
		uint64_t s = ep->sq_tail;
		int xop =
			ep->slots[s & ep->sq_mask].report == RDMAMSG_SLOT_XFER;

		rdmamsg__ep_complete_slots(ep, s, xop ? -ECONNRESET : 0);
	}
	ep->sig_next = ep->sq_head;
}

/* replayable -- a failure of an established connection that a session
 * survives: the transport gave up (retry exhaustion), the peer went
 * silent or reset the connection, the path went away */
static int replayable(int status)
{
	return status == -ECONNRESET || status == -ETIMEDOUT ||
	       status == -EHOSTUNREACH || status == -ENETDOWN ||
	       status == -ENETUNREACH;
}

/* outage -- an UP session's connection failed: nothing is sent until it
 * is back (sends queue), the old connection is told and stopped, and
 * the next progress pass lets it go and reconnects (the connecting
 * side) or waits for the reconnect (the accepting side) */
static void outage(struct rdmamsg_ep *ep, int status)
{
	struct rdmamsg_ctx *ctx = ep->ctx;

	rdmamsg__ep_set_state(ep,
			      ep->passive ? EPS_RECONNECTING : EPS_RESOLVING);
	ep->reconn = 1;
	ep->reconn_due = 1;
	ep->fail_status = status;
	ep->credits = 0;
	ep->ctl_credits = 0;
	rdmamsg__timer_stop(ctx, &ep->ka_timer);
	rdmamsg__timer_stop(ctx, &ep->ring_timer);
	rdmamsg__timer_stop(ctx, &ep->conn_timer);
	if (ep->ln)
		ep->ln->ops->error(ep->ln, ep->sq_head, 0);
	if (ep->id)
		ctx->ops->disconnect(ep->id);
	LOG_NOTE("endpoint %p: connection failed (%s): %s", (void *)ep,
		 rdmamsg_strerror(status),
		 ep->passive ? "waiting for the reconnect" : "reconnecting");
	rdmamsg__ep_defer(ep);
	path_event(ep, RDMAMSG_PATH_DOWN, status);
	ep->tries_left = ep->p.reconnect_tries;
	ep->backoff_ms = 0;
	ep->backoff = 0;
	ep->reconn_due_ns =
		ep->path_down_ns +
		(uint64_t)(ep->passive ? ep->p.linger_ms : ep->p.reconnect_ms) *
			1000000ull;
}

/* rdmamsg__ep_reconn_failed -- the session is over: reported as a
 * disconnect with status (rdmamsg.h) */
void rdmamsg__ep_reconn_failed(struct rdmamsg_ep *ep, int status)
{
	if (!ep->reconn || ep->closing)
		return;
	ep->reconn = 0;
	ep->reconn_due = 0;
	ep->backoff = 0;
	rdmamsg__timer_stop(ep->ctx, &ep->conn_timer);
	rdmamsg__ep_set_state(ep, EPS_DOWN);
	ep->disc_seen = 1;
	qp_error(ep);
	if (ep->id)
		ep->ctx->ops->disconnect(ep->id);
	LOG_NOTE("endpoint %p: session lost: %s", (void *)ep,
		 rdmamsg_strerror(status));
	path_event(ep, RDMAMSG_FAILOVER_FAILED, status);
	if (ep->closing)
		return;
	if (ep->xf)
		rdmamsg__xfer_down(ep, status);
	rdmamsg__ep_cancel_backlog(ep, -ECANCELED);
	/* as in tell_down: not once a callback above closed it */
	if (!ep->down_reported && !ep->closing) {
		ep->down_reported = 1;
		if (ep->cbs.on_disconnect)
			ep->cbs.on_disconnect(ep, status, ep->arg);
	}
}

/* linger_wait -- the accepting side waits for the reconnect until its
 * linger is over */
static void linger_wait(struct rdmamsg_ep *ep)
{
	uint64_t now = rdmamsg__now_ns();

	if (now >= ep->reconn_due_ns) {
		rdmamsg__ep_reconn_failed(ep, -ETIMEDOUT);
		return;
	}
	rdmamsg__timer_stop(ep->ctx, &ep->conn_timer);
	rdmamsg__timer_start(
		ep->ctx, &ep->conn_timer,
		(unsigned int)((ep->reconn_due_ns - now + 999999) / 1000000));
}

/* reconn_attempt -- the connecting side's next attempt, on the next path
 * (wrapping around), within the reconnect's tries and time */
static void reconn_attempt(struct rdmamsg_ep *ep, int status)
{
	struct rdmamsg_ctx *ctx = ep->ctx;
	int ret;

	for (;;) {
		uint64_t now = rdmamsg__now_ns(), left;

		if (ep->tries_left == 0 || now >= ep->reconn_due_ns) {
			rdmamsg__ep_reconn_failed(ep, status);
			return;
		}
		ep->tries_left--;
		if (ep->pstats.npaths > 1)
			ep->pstats.path =
				(ep->pstats.path + 1) % ep->pstats.npaths;
		path_event(ep, RDMAMSG_FAILOVER_START, 0);
		if (ep->closing)
			return;
		rdmamsg__ep_reconn_reset(ep);
		ret = rdmamsg__cm_start_connect(
			ep, (struct sockaddr *)&ep->paths[ep->pstats.path]);
		if (!ret) {
			left = (ep->reconn_due_ns - now + 999999) / 1000000;
			rdmamsg__timer_stop(ctx, &ep->conn_timer);
			rdmamsg__timer_start(ctx, &ep->conn_timer,
					     left < ep->p.connect_ms
						     ? (unsigned int)left
						     : ep->p.connect_ms);
			return;
		}
		status = ret;
		path_event(ep, RDMAMSG_PATH_DOWN, status);
		if (ep->closing)
			return;
	}
}

/* backoff_wait -- the wait before the connecting side's next attempt
 * (rdmamsg.h): none while a path of the list is untried in this outage
 * (one round at once), then RECONN_BACKOFF_MIN_MS, doubling after each
 * failed attempt up to RECONN_BACKOFF_MAX_MS; never past the deadline
 * (the attempt then finds it over and the session fails) */
static unsigned int backoff_wait(struct rdmamsg_ep *ep)
{
	unsigned int used = ep->p.reconnect_tries - ep->tries_left, w;
	uint64_t now = rdmamsg__now_ns(), left;

	if (used < ep->pstats.npaths || used == 0)
		return 0;
	w = ep->backoff_ms ? ep->backoff_ms : RECONN_BACKOFF_MIN_MS;
	ep->backoff_ms =
		w >= RECONN_BACKOFF_MAX_MS / 2 ? RECONN_BACKOFF_MAX_MS : w * 2;
	if (now >= ep->reconn_due_ns)
		return 0;
	left = (ep->reconn_due_ns - now + 999999) / 1000000;
	return left < w ? (unsigned int)left : w;
}

/* reconn_step -- from the progress pass after a failure: the old
 * connection goes, then the next attempt (connecting side: at once, or
 * after the backoff) or the wait */
static void reconn_step(struct rdmamsg_ep *ep)
{
	unsigned int w;

	ep->reconn_due = 0;
	if (!ep->reconn)
		return;
	rdmamsg__ep_detach(ep);
	if (ep->closing || !ep->reconn)
		return;
	if (ep->passive) {
		if (ep->st == EPS_CONNECTING)
			rdmamsg__ep_set_state(ep, EPS_RECONNECTING);
		linger_wait(ep);
		return;
	}
	w = backoff_wait(ep);
	if (w) {
		LOG_INFO("endpoint %p: next reconnect attempt in %u ms",
			 (void *)ep, w);
		ep->backoff = 1;
		rdmamsg__timer_stop(ep->ctx, &ep->conn_timer);
		rdmamsg__timer_start(ep->ctx, &ep->conn_timer, w);
		return;
	}
	reconn_attempt(ep, ep->fail_status);
}

/* reconn_refusal -- a refusal of a reconnect that the next attempt may
 * not meet (rdmamsg.h): no application decides on a session's reconnect,
 * so any reason but a protocol mismatch (and RDMAMSG_REJECT_SESSION,
 * handled before) is the peer's CM or library short of something, or a
 * listener not yet up: tried again, with the backoff, within the
 * reconnect's bounds */
static int reconn_refusal(int status, int reason)
{
	if (status != -ECONNREFUSED || reason == RDMAMSG_REJECT_HANDSHAKE ||
	    reason == RDMAMSG_REJECT_VERSION)
		return 0;
	LOG_NOTE("a reconnect refused (reason %d): tried again", reason);
	return 1;
}

/* reconn_attempt_failed -- an attempt of a reconnect failed: the next
 * one (from the next progress pass: this may run inside an up call of
 * the attempt's lane), or the end of the session */
static void reconn_attempt_failed(struct rdmamsg_ep *ep, int status, int reason)
{
	if (ep->st > EPS_CONNECTING || ep->reconn_due)
		return; /* closed, waiting already, or the failed
			 * connection's own completions before it goes */
	rdmamsg__timer_stop(ep->ctx, &ep->conn_timer);
	if (reason == RDMAMSG_REJECT_SESSION) {
		/* the peer does not know the session: it restarted */
		rdmamsg__ep_reconn_failed(ep, -ECONNRESET);
		return;
	}
	if (!ep->passive && !path_fault(status, reason) &&
	    !reconn_refusal(status, reason)) {
		LOG_NOTE("endpoint %p: reconnect failed: %s (reason %d): the "
			 "session ends",
			 (void *)ep, rdmamsg_strerror(status), reason);
		rdmamsg__ep_reconn_failed(ep, status);
		return;
	}
	if (ep->ln)
		ep->ln->ops->error(ep->ln, ep->sq_head, 0);
	ep->fail_status = status;
	ep->reconn_due = 1;
	rdmamsg__ep_defer(ep);
	if (!ep->passive)
		path_event(ep, RDMAMSG_PATH_DOWN, status);
}

/* rdmamsg_ep_test_break -- fault injection (rdmamsg.h): the connection
 * fails as after a transport retry exhaustion */
RDMAMSG_EXPORT int rdmamsg_ep_test_break(struct rdmamsg_ep *ep)
{
	if (!ep)
		return -EINVAL;
	if (ep->st != EPS_UP || !ep->ln)
		return -ENOTCONN;
	ep->ln->ops->error(ep->ln, ep->sq_head, 0);
	rdmamsg__ep_down(ep, -ECONNRESET);
	return 0;
}
