/* SPDX-License-Identifier: MIT */
/* cm_conn.c -- softrdma's librdmacm: the IB CM handshake over TCP */
#include "config.h"
#include "softrdma.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "cm_internal.h"
#include "net.h"

/*
 * Wire: each CM message (REQ, REP, REJ, RTU, DREQ, DREP) is one struct
 * scm_wire on the TCP connection between the two ids.  The active side's
 * socket is bound to its id's address and port, so the port spaces of
 * RDMA ids and TCP sockets are one, as on iWARP.
 */

/* How long the active side waits for the passive CM's reply (ms); the
 * environment's SOFTRDMA_CM_TIMEOUT_MS overrides it. */
#define SCM_CONNECT_TIMEOUT_MS 10000
/* How long rdma_disconnect waits for the DREP (ms). */
#define SCM_DREQ_TIMEOUT_MS 2000
/* local ACK timeout librdmacm gets from the IB CM for RoCE paths */
#define SCM_DEFAULT_ACK_TIMEOUT 18

SOFT_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id,
				  struct ibv_qp_attr *qp_attr,
				  int *qp_attr_mask);
SOFT_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog);
SOFT_EXPORT int rdma_connect(struct rdma_cm_id *id,
			     struct rdma_conn_param *conn_param);
SOFT_EXPORT int rdma_accept(struct rdma_cm_id *id,
			    struct rdma_conn_param *conn_param);
SOFT_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
			    uint8_t private_data_len);
SOFT_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
				uint8_t private_data_len);
SOFT_EXPORT int rdma_disconnect(struct rdma_cm_id *id);
SOFT_EXPORT int rdma_establish(struct rdma_cm_id *id);
SOFT_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event);

/* scm_random_psn -- a 24-bit starting PSN */
static uint32_t scm_random_psn(void)
{
	uint32_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)random();
	return v & 0xffffff;
}

/*
 * scm_tune_socket -- prompt sends.  No keepalive and no user timeout: the
 * IB CM has no connection that could time out (its MADs are datagrams,
 * sent when there is something to say), so a cut path or a silent host
 * must not end an established connection here either.  The QP's retries
 * (RETRY_EXC_ERR, or a migration with APM) and the application's
 * keep-alives tell, as on hardware; the CM connection, idle meanwhile,
 * outlives the cut (a message sent during it is retransmitted by TCP
 * until the path returns or its CM timeout fires).
 */
static void scm_tune_socket(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* scm__send -- write one CM message (never raises SIGPIPE) */
int scm__send(struct scm_id *s, struct scm_wire *w)
{
	const uint8_t *p = (const uint8_t *)w;
	size_t left = sizeof(*w);
	struct pollfd pfd;
	ssize_t n;
	int r;

	if (s->fd < 0)
		return ENOTCONN;
	w->magic = SCM_WIRE_MAGIC;
	soft_reg_id(w->reg_id);
	while (left) {
		n = send(s->fd, p, left, MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			left -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			/* a few hundred bytes: the buffer drains at once (a
			 * signal of the program's, qperf's SIGALRM, is no
			 * reason to drop the message) */
			pfd.fd = s->fd;
			pfd.events = POLLOUT;
			r = poll(&pfd, 1, 1000);
			if (r == 1 || (r < 0 && errno == EINTR))
				continue;
			return ETIMEDOUT;
		}
		return n < 0 ? errno : EPIPE;
	}
	return 0;
}

/* scm_send_simple -- a message without parameters (RTU, DREQ, DREP) */
static int scm_send_simple(struct scm_id *s, enum scm_msg type)
{
	struct scm_wire w;

	memset(&w, 0, sizeof(w));
	w.type = (uint8_t)type;
	return scm__send(s, &w);
}

/* scm_send_rej -- a REJ with reason and private data */
static int scm_send_rej(struct scm_id *s, uint16_t reason, const void *pdata,
			uint8_t len)
{
	struct scm_wire w;

	memset(&w, 0, sizeof(w));
	w.type = SCM_MSG_REJ;
	w.reason = htons(reason);
	w.pdata_len = len;
	if (pdata && len)
		memcpy(w.pdata, pdata, len);
	return scm__send(s, &w);
}

/* scm_has_cm -- has the id an IB CM side (connection attempt)? */
static int scm_has_cm(const struct scm_id *s)
{
	return s->state >= SCM_CONNECTING;
}

/* scm_init_qp_attr_locked -- the kernel's rdma_init_qp_attr for RoCE */
static int scm_init_qp_attr_locked(struct scm_id *s, struct ibv_qp_attr *a,
				   int *mask)
{
	int ud = s->id.qp_type == IBV_QPT_UD;

	switch (a->qp_state) {
	case IBV_QPS_INIT:
		a->pkey_index = 0;
		a->port_num = s->id.port_num ? s->id.port_num : 1;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (ud) {
			a->qkey = RDMA_UDP_QKEY;
			*mask |= IBV_QP_QKEY;
		} else {
			a->qp_access_flags = 0;
			if (scm_has_cm(s)) {
				a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
				if (s->resp_res)
					a->qp_access_flags |=
						IBV_ACCESS_REMOTE_READ |
						IBV_ACCESS_REMOTE_ATOMIC;
			}
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	case IBV_QPS_RTR:
		if (ud) {
			*mask = IBV_QP_STATE;
			return 0;
		}
		if (!s->has_remote)
			return EINVAL;
		memset(&a->ah_attr, 0, sizeof(a->ah_attr));
		a->ah_attr.is_global = 1;
		a->ah_attr.grh.dgid = s->remote_gid;
		a->ah_attr.grh.sgid_index = (uint8_t)s->sgid_index;
		a->ah_attr.grh.hop_limit = 64;
		/* the path's, as the IB CM builds its AV from the path
		 * record (cm_init_av_by_path): a TOS set after the route
		 * changes nothing */
		a->ah_attr.grh.traffic_class = s->path.traffic_class;
		a->ah_attr.port_num = s->id.port_num ? s->id.port_num : 1;
		soft_ib_cm_av(&a->ah_attr); /* IB mode: by LID (iblink.c) */
		a->path_mtu = (enum ibv_mtu)s->mtu;
		a->dest_qp_num = s->remote_qpn;
		a->rq_psn = s->remote_psn;
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		/* UC has no responder resources nor RNR NAKs: the kernel's
		 * cm_init_qp_rtr_attr gives these to RC and XRC targets
		 * only (UC's and an XRC initiator's RTR refuse them) */
		if (s->id.qp_type == IBV_QPT_RC ||
		    s->id.qp_type == IBV_QPT_XRC_RECV) {
			a->max_dest_rd_atomic = s->resp_res;
			a->min_rnr_timer = 0;
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC |
				 IBV_QP_MIN_RNR_TIMER;
		}
		return 0;
	case IBV_QPS_RTS:
		a->sq_psn = ud ? 0 : s->psn;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		if (ud)
			return 0;
		if (!s->has_remote)
			return EINVAL;
		/* UC: no ACKs, so no timeout, retries nor reads; an XRC
		 * target: the timeout only (cm_init_qp_rts_attr) */
		if (s->id.qp_type != IBV_QPT_RC &&
		    s->id.qp_type != IBV_QPT_XRC_SEND &&
		    s->id.qp_type != IBV_QPT_XRC_RECV)
			return 0;
		a->timeout = s->ack_timeout_set ? s->ack_timeout
						: SCM_DEFAULT_ACK_TIMEOUT;
		*mask |= IBV_QP_TIMEOUT;
		if (s->id.qp_type == IBV_QPT_XRC_RECV)
			return 0;
		a->retry_cnt = s->retry_count;
		a->rnr_retry = s->rnr_retry_count;
		a->max_rd_atomic = s->init_depth;
		*mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			 IBV_QP_MAX_QP_RD_ATOMIC;
		return 0;
	default:
		return EINVAL;
	}
}

/* rdma_init_qp_attr -- attributes to move a QP of this id to a state */
int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
		      int *qp_attr_mask)
{
	int err;

	if (!id || !qp_attr || !qp_attr_mask)
		return scm_err(EINVAL);
	if (!id->verbs)
		return scm_err(EINVAL);
	pthread_mutex_lock(&scm__lock);
	err = scm_init_qp_attr_locked(scm_id_of(id), qp_attr, qp_attr_mask);
	pthread_mutex_unlock(&scm__lock);
	return err ? scm_err(err) : 0;
}

/* scm_modify -- one transition of the id's QP through init_qp_attr */
static int scm_modify(struct scm_id *s, enum ibv_qp_state st)
{
	struct ibv_qp_attr a;
	int mask, err;

	memset(&a, 0, sizeof(a));
	a.qp_state = st;
	err = scm_init_qp_attr_locked(s, &a, &mask);
	if (err)
		return err;
	return ibv_modify_qp(s->id.qp, &a, mask);
}

/* scm_modify_qp_rtr_rts -- librdmacm's INIT (again), RTR, RTS sequence */
static int scm_modify_qp_rtr_rts(struct scm_id *s)
{
	int err;

	if (!s->id.qp)
		return 0;
	err = scm_modify(s, IBV_QPS_INIT);
	if (!err)
		err = scm_modify(s, IBV_QPS_RTR);
	if (!err)
		err = scm_modify(s, IBV_QPS_RTS);
	return err;
}

/* scm__modify_qp_err -- flush the id's QP */
int scm__modify_qp_err(struct scm_id *s)
{
	struct ibv_qp_attr a;

	if (!s->id.qp)
		return 0;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	return ibv_modify_qp(s->id.qp, &a, IBV_QP_STATE);
}

/* scm_valid_param -- librdmacm's ucma_valid_param */
static int scm_valid_param(struct scm_id *s, struct rdma_conn_param *p)
{
	uint8_t mi, mr;

	if (s->id.ps != RDMA_PS_TCP)
		return 0;
	if (!s->id.qp && !p)
		return EINVAL;
	if (!p || scm__dev_max(&mi, &mr))
		return 0;
	if (p->responder_resources != RDMA_MAX_RESP_RES &&
	    p->responder_resources > mr)
		return EINVAL;
	if (p->initiator_depth != RDMA_MAX_INIT_DEPTH &&
	    p->initiator_depth > mi)
		return EINVAL;
	return 0;
}

/* scm_finish -- terminal state: no more CM traffic on this id */
static void scm_finish(struct scm_id *s)
{
	s->state = SCM_DISCONNECTED;
	scm__deadline(s, 0);
	scm__close_fd(s);
}

/* scm_timewait_ms -- SOFTRDMA_CM_TIMEWAIT_MS or the RoCE default */
static uint64_t scm_timewait_ms(void)
{
	const char *e = getenv("SOFTRDMA_CM_TIMEWAIT_MS");

	return e ? strtoull(e, NULL, 10) : 1000;
}

/*
 * scm_timewait -- the connection is over: the IB CM holds it in timewait
 * and, if the id is still there, reports TIMEWAIT_EXIT when it leaves it
 * (about 1 s on RoCE: 4.096 us * 2^18).
 */
static void scm_timewait(struct scm_id *s)
{
	scm_finish(s);
	s->timewait = 1;
	scm__deadline(s, scm__now_ms() + scm_timewait_ms());
	scm__wake();
}

/* scm_disconnected -- the DREP (or the DREQ's timeout): DISCONNECTED,
 * then timewait */
static void scm_disconnected(struct scm_id *s, int status)
{
	scm_timewait(s);
	scm__post(s, s, RDMA_CM_EVENT_DISCONNECTED, status, NULL, 0, 0);
}

/*
 * scm_dreq_rcvd -- the peer's DREQ (or its death): DISCONNECTED, and the
 * DREP waits for the user, as in the IB CM's DREQ_RCVD (cm_dreq_handler):
 * ib_send_cm_drep sends it from rdma_disconnect, cm_destroy_id from
 * rdma_destroy_id; until then the peer's rdma_disconnect waits, up to its
 * DREQ's timeout.
 */
static void scm_dreq_rcvd(struct scm_id *s)
{
	s->state = SCM_DREQ_RCVD;
	s->dreq_held = 0;
	scm__deadline(s, 0); /* our DREQ's timeout, or the REP's */
	scm__post(s, s, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0, 0);
}

/* scm_conn_event -- fill param.conn of an event from a REQ or REP */
static void scm_conn_event(struct scm_event *e, const struct scm_wire *w)
{
	if (!e)
		return;
	e->ev.param.conn.responder_resources = w->init_depth;
	e->ev.param.conn.initiator_depth = w->resp_res;
	e->ev.param.conn.flow_control = w->flow_control;
	e->ev.param.conn.retry_count = w->retry_count;
	e->ev.param.conn.rnr_retry_count = w->rnr_retry_count;
	e->ev.param.conn.srq = w->srq;
	e->ev.param.conn.qp_num = ntohl(w->qpn);
}

/* scm_rej_event -- a REJECTED event (RoCE reports all 148 bytes) */
static void scm_rej_event(struct scm_id *s, int reason, const void *pdata,
			  size_t len)
{
	scm__post(s, s, RDMA_CM_EVENT_REJECTED, reason, pdata, len,
		  SCM_REJ_PDATA);
}

/* rdma_listen -- listen on the bound address (0.0.0.0 when unbound) */
int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct scm_id *s = scm_id_of(id);
	struct sockaddr_in any;
	int err = 0;

	if (!id)
		return scm_err(EINVAL);
	pthread_mutex_lock(&scm__lock);
	if (s->state == SCM_IDLE) {
		memset(&any, 0, sizeof(any));
		any.sin_family = AF_INET;
		err = scm__bind_socket(s, (struct sockaddr *)&any);
		if (err)
			goto unlock;
		s->state = SCM_ADDR_BOUND;
	}
	if (s->state != SCM_ADDR_BOUND) {
		err = EINVAL;
		goto unlock;
	}
	/*
	 * A listener shares its port with nobody: the kernel's rdma_listen
	 * checks a REUSEADDR id's port again without it, then clears it
	 * (listen(2) lets SO_REUSEADDR sockets share the port).
	 */
	if (s->reuseaddr) {
		err = scm__port_check(s, &s->id.route.addr.src_addr, 0);
		if (err)
			goto unlock;
	}
	/* the backlog counts requests (scm_backlog), not TCP connections */
	if (listen(s->fd, SOMAXCONN)) {
		err = errno;
		goto unlock;
	}
	err = scm__epoll_add(s, EPOLLIN);
	if (err)
		goto unlock;
	s->backlog = backlog;
	s->listened = 1;
	s->reuseaddr = 0;
	s->state = SCM_LISTEN;
unlock:
	pthread_mutex_unlock(&scm__lock);
	return err ? scm_err(err) : 0;
}

/*
 * scm_refused_grace_ms -- how long a refused connect is retried.
 *
 * An IB CM answers a REQ for a port nobody listens on with a REJ at once.
 * softrdma resolves addresses and routes in no time, so programs whose
 * client races its server's rdma_listen (perftest -R: both leave a
 * handshake, then one listens while the other connects) lose a race they
 * win on hardware; a short retry window gives the listener time to come.
 * SOFTRDMA_CM_REFUSED_MS sets it (default 100 ms, 0: report at once).
 */
static uint64_t scm_refused_grace_ms(void)
{
	const char *e = getenv("SOFTRDMA_CM_REFUSED_MS");

	return e ? strtoull(e, NULL, 10) : 100;
}

/* scm_connect_failed -- the TCP connect did not reach a CM */
static void scm_connect_failed(struct scm_id *s, int err)
{
	uint64_t now = scm__now_ms();

	if (err == ECONNREFUSED && now < s->refused_until_ms) {
		/* retried from scm__timeouts with a fresh socket */
		scm__close_fd(s);
		s->state = SCM_CONNECTING;
		scm__deadline(s, now + 5);
		scm__wake();
		return;
	}
	scm_finish(s);
	if (err == ECONNREFUSED && s->id.qp_type == IBV_QPT_UD)
		scm__post(s, s, RDMA_CM_EVENT_UNREACHABLE, SCM_SIDR_UNSUPPORTED,
			  NULL, 0, SCM_SIDR_REP_PDATA);
	else if (err == ECONNREFUSED) /* nobody listens: as an IB CM says */
		scm_rej_event(s, SCM_REJ_INVALID_SERVICE_ID, NULL, 0);
	else
		scm__post(s, s, RDMA_CM_EVENT_UNREACHABLE,
			  err == EHOSTUNREACH || err == ENETUNREACH
				  ? -err
				  : -ETIMEDOUT,
			  NULL, 0, 0);
}

/*
 * scm_self_connected -- did a TCP connect reach its own socket?  A connect
 * to a port of this host that nobody listens on, from a source port the
 * kernel picks, is now and then given that same port, and TCP's
 * simultaneous open then connects the socket to itself: no CM would ever
 * answer the REQ.  Nobody listens there, so it counts as refused.
 */
static int scm_self_connected(int fd)
{
	struct sockaddr_storage a, b;
	socklen_t la = sizeof(a), lb = sizeof(b);

	if (getsockname(fd, (struct sockaddr *)&a, &la) ||
	    getpeername(fd, (struct sockaddr *)&b, &lb))
		return 0;
	return la == lb && !memcmp(&a, &b, la);
}

/* scm_start_connect -- TCP connect from the id's address to the peer's */
static void scm_start_connect(struct scm_id *s)
{
	struct sockaddr_storage src;
	int err;

	if (s->fd < 0) {
		memcpy(&src, &s->id.route.addr.src_storage, sizeof(src));
		err = scm__bind_socket(s, (struct sockaddr *)&src);
		if (err) {
			scm_connect_failed(s, err);
			return;
		}
	}
	scm_tune_socket(s->fd);
	scm__deadline(s, s->connect_deadline_ms);
	if (!connect(s->fd, &s->id.route.addr.dst_addr,
		     scm__addr_len(&s->id.route.addr.dst_addr))) {
		if (scm_self_connected(s->fd)) {
			scm_connect_failed(s, ECONNREFUSED);
			return;
		}
		s->state = SCM_REQ_SENT;
		err = scm__send(s, &s->req);
		if (!err)
			err = scm__epoll_add(s, EPOLLIN);
		if (err)
			scm_connect_failed(s, err);
		return;
	}
	if (errno != EINPROGRESS) {
		scm_connect_failed(s, errno);
		return;
	}
	s->state = SCM_CONNECTING;
	err = scm__epoll_add(s, EPOLLOUT);
	if (err)
		scm_connect_failed(s, err);
}

/* scm_req_limit -- REQ private data available to the user */
static size_t scm_req_limit(const struct scm_id *s)
{
	size_t field = s->id.qp_type == IBV_QPT_UD ? SCM_SIDR_REQ_PDATA
						   : SCM_REQ_PDATA;

	/* PS_IB carries no CMA header */
	return s->id.ps == RDMA_PS_IB ? field : field - SCM_CMA_HDR;
}

/*
 * scm_retry3 -- a retry count as the REQ and REP carry it: 3 bits; the
 * kernel's cma_connect_ib and cma_accept_ib send min_t(u8, 7, value), so
 * a program asking for 255 connects with 7 (and its QP is moved with 7)
 */
static uint8_t scm_retry3(uint8_t v)
{
	return v > 7 ? 7 : v;
}

/* scm_qpn24 -- a qp_num given without a QP: the 24 bits a QPN has */
static uint32_t scm_qpn24(uint32_t qpn)
{
	return qpn & 0xffffff;
}

/* scm_connect_timeout_ms -- REQ to REP, then UNREACHABLE (-ETIMEDOUT) */
static uint64_t scm_connect_timeout_ms(void)
{
	const char *e = getenv("SOFTRDMA_CM_TIMEOUT_MS");

	return e ? strtoull(e, NULL, 10) : SCM_CONNECT_TIMEOUT_MS;
}

/* scm_connect_locked -- the body of rdma_connect */
static int scm_connect_locked(struct scm_id *s, struct rdma_conn_param *p)
{
	struct scm_wire *w = &s->req;
	size_t ulen = p && p->private_data ? p->private_data_len : 0;
	uint8_t mi = RDMA_MAX_INIT_DEPTH, mr = RDMA_MAX_RESP_RES;
	int err;

	err = scm_valid_param(s, p);
	if (err)
		return err;
	if (s->state != SCM_ROUTE_RESOLVED)
		return EINVAL;
	if (s->connect_len + ulen > scm_req_limit(s))
		return EINVAL;
	scm__dev_max(&mi, &mr);
	s->init_depth = p && p->initiator_depth != RDMA_MAX_INIT_DEPTH
				? p->initiator_depth
				: mi;
	s->resp_res = p && p->responder_resources != RDMA_MAX_RESP_RES
			      ? p->responder_resources
			      : mr;
	s->retry_count = p ? scm_retry3(p->retry_count) : SCM_DEFAULT_RETRY;
	s->rnr_retry_count =
		p ? scm_retry3(p->rnr_retry_count) : SCM_DEFAULT_RETRY;
	/* a 1-bit field (the kernel's IBA_SET keeps the low bit) */
	s->flow_control = p ? p->flow_control & 1 : 0;
	s->psn = scm_random_psn();

	memset(w, 0, sizeof(*w));
	w->type = SCM_MSG_REQ;
	w->ps = htons((uint16_t)s->id.ps);
	w->qp_type = (uint8_t)s->id.qp_type;
	if (s->id.qp) {
		w->qpn = htonl(s->id.qp->qp_num);
		w->srq = !!s->id.qp->srq;
	} else {
		w->qpn = htonl(scm_qpn24(p ? p->qp_num : 0));
		w->srq = p && p->srq; /* id_priv->srq ? 1 : 0 */
	}
	w->psn = htonl(s->psn);
	w->resp_res = s->resp_res;
	w->init_depth = s->init_depth;
	w->flow_control = s->flow_control;
	w->retry_count = s->retry_count;
	w->rnr_retry_count = s->rnr_retry_count;
	w->mtu = s->mtu;
	w->tclass = s->path.traffic_class;
	memcpy(w->gid, s->id.route.addr.addr.ibaddr.sgid.raw, 16);
	if (s->connect_len)
		memcpy(w->pdata, s->connect, s->connect_len);
	if (ulen)
		memcpy(w->pdata + s->connect_len, p->private_data, ulen);
	w->pdata_len = (uint8_t)(s->connect_len + ulen);
	free(s->connect);
	s->connect = NULL;
	s->connect_len = 0;

	s->connect_deadline_ms = scm__now_ms() + scm_connect_timeout_ms();
	s->refused_until_ms = scm__now_ms() + scm_refused_grace_ms();
	scm_start_connect(s);
	return 0;
}

/*
 * scm_net_prestart -- a peer of another host: start the network path now,
 * before the CM's lock is taken (its agent is started with fork, whose
 * handlers take that lock; the QP's RTR under the lock then finds it up).
 * ENETUNREACH when it cannot start: the caller fails rather than let the
 * RTR try again under the lock.
 */
static int scm_net_prestart(const union ibv_gid *peer)
{
	static const union ibv_gid zero;

	if (!memcmp(peer, &zero, sizeof(zero)) || soft_gid_local(peer) ||
	    !soft_net_enabled() || !soft_net_start())
		return 0;
	SOFT_WARN("rdma_cm: the network path (SOFTRDMA_NET=1) cannot start: "
		  "no connection to another host");
	return ENETUNREACH;
}

/* rdma_connect -- send a REQ to the resolved destination */
int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct scm_id *s = scm_id_of(id);
	int err, sync;

	if (!id)
		return scm_err(EINVAL);
	err = scm_net_prestart(&id->route.addr.addr.ibaddr.dgid);
	if (err)
		return scm_err(err);
	pthread_mutex_lock(&scm__lock);
	err = scm_connect_locked(s, conn_param);
	sync = s->sync; /* s may be gone once unlocked (async ids) */
	pthread_mutex_unlock(&scm__lock);
	if (err)
		return scm_err(err);
	return sync ? scm__complete(s) : 0;
}

/*
 * scm_accept_refused -- the IB CM refused the REP (ib_send_cm_rep's or
 * ib_send_cm_sidr_rep's private data limit): the kernel's rdma_accept
 * then flushes the QP and rejects the request (its reject label), so the
 * peer gets REJECTED (UNREACHABLE for SIDR) and the id cannot be accepted
 * again; librdmacm's rdma_accept leaves the QP in ERR too.  EINVAL.
 */
static int scm_accept_refused(struct scm_id *s, uint16_t reason)
{
	scm__modify_qp_err(s);
	scm_send_rej(s, reason, NULL, 0);
	scm_finish(s);
	return EINVAL;
}

/* scm_sidr_accept -- UD: a SIDR REP with our QPN and Q_Key, no RTU */
static int scm_sidr_accept(struct scm_id *s, struct rdma_conn_param *p)
{
	size_t ulen = p && p->private_data ? p->private_data_len : 0;
	struct scm_wire w;
	int err;

	if (ulen > SCM_SIDR_REP_PDATA)
		return scm_accept_refused(s, SCM_SIDR_REJECT);
	memset(&w, 0, sizeof(w));
	w.type = SCM_MSG_REP;
	w.ps = htons((uint16_t)s->id.ps);
	w.qp_type = (uint8_t)s->id.qp_type;
	w.qpn = htonl(s->id.qp ? s->id.qp->qp_num
			       : scm_qpn24(p ? p->qp_num : 0));
	w.qkey = htonl(RDMA_UDP_QKEY);
	memcpy(w.gid, s->id.route.addr.addr.ibaddr.sgid.raw, 16);
	if (ulen)
		memcpy(w.pdata, p->private_data, ulen);
	w.pdata_len = (uint8_t)ulen;
	err = s->peer_gone ? 0 : scm__send(s, &w);
	scm_finish(s);
	return err;
}

/* scm_accept_locked -- the body of rdma_accept */
static int scm_accept_locked(struct scm_id *s, struct rdma_conn_param *p)
{
	size_t ulen = p && p->private_data ? p->private_data_len : 0;
	uint8_t mi = RDMA_MAX_INIT_DEPTH, mr = RDMA_MAX_RESP_RES;
	struct scm_wire w;
	int err;

	if (s->state != SCM_REQ_RCVD)
		return EINVAL;
	if (s->id.qp_type == IBV_QPT_UD)
		return scm_sidr_accept(s, p);
	err = scm_valid_param(s, p);
	if (err)
		return err;
	if (ulen > SCM_REP_PDATA)
		return scm_accept_refused(s, SCM_REJ_CONSUMER_DEFINED);
	scm__dev_max(&mi, &mr);
	if (!p || p->initiator_depth == RDMA_MAX_INIT_DEPTH)
		s->init_depth = s->init_depth < mi ? s->init_depth : mi;
	else
		s->init_depth = p->initiator_depth;
	if (!p || p->responder_resources == RDMA_MAX_RESP_RES)
		s->resp_res = s->resp_res < mr ? s->resp_res : mr;
	else
		s->resp_res = p->responder_resources;
	err = scm_modify_qp_rtr_rts(s);
	if (err)
		return err;
	if (s->peer_gone) {
		/* the REP would time out: what the IB CM reports then */
		scm__modify_qp_err(s);
		scm_finish(s);
		scm__post(s, s, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0,
			  0);
		return 0;
	}
	memset(&w, 0, sizeof(w));
	w.type = SCM_MSG_REP;
	w.ps = htons((uint16_t)s->id.ps);
	w.qp_type = (uint8_t)s->id.qp_type;
	if (s->id.qp) {
		w.qpn = htonl(s->id.qp->qp_num);
		w.srq = !!s->id.qp->srq;
	} else {
		w.qpn = htonl(scm_qpn24(p ? p->qp_num : 0));
		w.srq = p && p->srq;
	}
	w.psn = htonl(s->psn);
	w.resp_res = s->resp_res;
	w.init_depth = s->init_depth;
	w.flow_control = p ? p->flow_control & 1 : 0;
	w.rnr_retry_count =
		p ? scm_retry3(p->rnr_retry_count) : SCM_DEFAULT_RETRY;
	w.mtu = s->mtu;
	memcpy(w.gid, s->id.route.addr.addr.ibaddr.sgid.raw, 16);
	if (ulen)
		memcpy(w.pdata, p->private_data, ulen);
	w.pdata_len = (uint8_t)ulen;
	err = scm__send(s, &w);
	if (err) {
		scm__modify_qp_err(s);
		return err;
	}
	s->state = SCM_REP_SENT;
	/* no RTU by then: the IB CM's REP timeout (UNREACHABLE) */
	scm__deadline(s, scm__now_ms() + scm_connect_timeout_ms());
	scm__wake();
	return 0;
}

/* rdma_accept -- answer a connection request with a REP */
int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct scm_id *s = scm_id_of(id);
	int err, wait, sync;

	if (!id)
		return scm_err(EINVAL);
	err = scm_net_prestart(&s->remote_gid);
	if (err)
		return scm_err(err);
	pthread_mutex_lock(&scm__lock);
	err = scm_accept_locked(s, conn_param);
	/* decided under the lock: once it is dropped, an id on a channel
	 * may be ESTABLISHED, DISCONNECTED and destroyed by another thread
	 * before we return.  A SIDR REP completes nothing (UD). */
	sync = !err && s->sync;
	wait = sync && id->qp_type != IBV_QPT_UD;
	pthread_mutex_unlock(&scm__lock);
	if (err)
		return scm_err(err);
	if (sync && !wait && id->event) {
		/* librdmacm's rdma_accept acks the request of a synchronous
		 * UD id (rdma_get_request's id->event), which its listener's
		 * rdma_destroy_id would wait for */
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	return wait ? scm__complete(s) : 0;
}

/* scm_reject -- send a REJ with a reason and the user's private data */
static int scm_reject(struct rdma_cm_id *id, const void *pdata, uint8_t len,
		      uint16_t reason)
{
	struct scm_id *s = scm_id_of(id);
	int err = 0;

	if (!id)
		return scm_err(EINVAL);
	if (!pdata)
		len = 0;
	pthread_mutex_lock(&scm__lock);
	/* the IB CM may reject from either side until the RTU */
	if (s->state != SCM_REQ_RCVD && s->state != SCM_REP_SENT &&
	    s->state != SCM_REQ_SENT && s->state != SCM_REP_RCVD &&
	    s->state != SCM_CONNECTING)
		err = EINVAL;
	else if (len > (s->id.qp_type == IBV_QPT_UD ? SCM_SIDR_REP_PDATA
						    : SCM_REJ_PDATA))
		err = EINVAL;
	if (!err) {
		scm_send_rej(s,
			     s->id.qp_type == IBV_QPT_UD ? SCM_SIDR_REJECT
							 : reason,
			     pdata, len);
		scm_finish(s);
	}
	pthread_mutex_unlock(&scm__lock);
	return err ? scm_err(err) : 0;
}

/* rdma_reject -- refuse a connection request (consumer defined reason) */
int rdma_reject(struct rdma_cm_id *id, const void *private_data,
		uint8_t private_data_len)
{
	return scm_reject(id, private_data, private_data_len,
			  SCM_REJ_CONSUMER_DEFINED);
}

/* rdma_reject_ece -- refuse because of the ECE options */
int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
		    uint8_t private_data_len)
{
	return scm_reject(id, private_data, private_data_len,
			  SCM_REJ_VENDOR_OPTION);
}

/* scm_queued_for -- has the id's channel an event for it? */
static int scm_queued_for(struct scm_id *s)
{
	struct scm_event *e;

	for (e = scm_ch_of(s->id.channel)->head; e; e = e->next)
		if (e->ev.id == &s->id)
			return 1;
	return 0;
}

/*
 * rdma_disconnect -- flush the QP, then a DREQ or the DREP.  librdmacm's
 * ucma_shutdown moves the QP to ERR before it asks the kernel, in any
 * state of an id with a device; the kernel's rdma_disconnect fails with
 * EINVAL only where the id has no IB CM id (not connecting, not a request,
 * not a listener).  For IB it tries ib_send_cm_dreq, which sends only
 * from ESTABLISHED, then ib_send_cm_drep, which sends only from DREQ_RCVD;
 * elsewhere (REP_SENT, REP_RCVD: before the RTU) nothing is sent, the id
 * stays where it is, and it returns 0.
 */
int rdma_disconnect(struct rdma_cm_id *id)
{
	struct scm_id *s = scm_id_of(id);
	int err = 0, wait = 0;

	if (!id || !id->verbs)
		return scm_err(EINVAL);
	pthread_mutex_lock(&scm__lock);
	err = scm__modify_qp_err(s);
	if (err) {
		pthread_mutex_unlock(&scm__lock);
		return scm_err(err);
	}
	switch (s->state) {
	case SCM_CONNECTED:
		if (s->peer_gone || scm_send_simple(s, SCM_MSG_DREQ)) {
			scm_disconnected(s, 0);
		} else {
			s->state = SCM_DISCONNECTING;
			scm__deadline(s, scm__now_ms() + SCM_DREQ_TIMEOUT_MS);
			scm__wake();
		}
		wait = 1;
		break;
	case SCM_DREQ_RCVD:
		if (!s->peer_gone)
			scm_send_simple(s, SCM_MSG_DREP);
		scm_timewait(s);
		wait = scm_queued_for(s);
		break;
	case SCM_REP_SENT:
		/* the RTU (ESTABLISHED) or the REP's timeout comes */
		wait = 1;
		break;
	case SCM_DISCONNECTING:
		wait = 1;
		break;
	case SCM_REP_RCVD:
	case SCM_DISCONNECTED:
		wait = scm_queued_for(s);
		break;
	case SCM_LISTEN:
	case SCM_CONNECTING:
	case SCM_REQ_SENT:
	case SCM_REQ_RCVD:
		break;
	default:
		err = EINVAL;
		break;
	}
	pthread_mutex_unlock(&scm__lock);
	if (err)
		return scm_err(err);
	return wait ? scm__complete(s) : 0;
}

/*
 * scm_rtu_lost -- SOFTRDMA_TEST_LOSE_RTU=1 (tests only): every RTU this
 * process sends is lost, its retransmissions too (an IB CM sends it again
 * for each duplicate REP): the id is ESTABLISHED, the peer's stays in
 * REP_SENT until its QP sees traffic (rdma_notify), the REP's timeout or
 * a DREQ (cm_dreq_handler takes it there).
 */
static int scm_rtu_lost(void)
{
	const char *e = getenv("SOFTRDMA_TEST_LOSE_RTU");

	return e && *e == '1';
}

/* scm_send_rtu -- the active side is ready: RTU, ESTABLISHED */
static void scm_send_rtu(struct scm_id *s)
{
	if (!scm_rtu_lost())
		scm_send_simple(s, SCM_MSG_RTU);
	s->state = SCM_CONNECTED;
	if (s->peer_gone) {
		scm__modify_qp_err(s);
		scm_dreq_rcvd(s);
	} else if (s->dreq_held) {
		/* the peer's DREQ, retransmitted, now finds ESTABLISHED */
		scm_dreq_rcvd(s);
	}
}

/*
 * scm_establish_rejects -- does an rdma_establish out of turn reject?  The
 * kernel serves it as an rdma_accept without parameters (cma_rep_recv),
 * whose RTU the IB CM refuses before the REP (ib_send_cm_rtu: EINVAL);
 * its reject label then sends the REJ the IB CM still may: from
 * REQ_SENT, REQ_RCVD and REP_SENT (ib_send_cm_rej).
 */
static int scm_establish_rejects(const struct scm_id *s)
{
	if (s->id.qp_type == IBV_QPT_UD)
		return 0;
	return s->state == SCM_REQ_SENT || s->state == SCM_REQ_RCVD ||
	       s->state == SCM_REP_SENT;
}

/* rdma_establish -- RTU for ids whose QP the user moves himself */
int rdma_establish(struct rdma_cm_id *id)
{
	struct scm_id *s = scm_id_of(id);
	int err = 0;

	if (!id || id->qp)
		return scm_err(EINVAL);
	pthread_mutex_lock(&scm__lock);
	if (s->state == SCM_REP_RCVD) {
		scm_send_rtu(s);
	} else {
		err = EINVAL;
		if (scm_establish_rejects(s)) {
			scm_send_rej(s, SCM_REJ_CONSUMER_DEFINED, NULL, 0);
			scm_finish(s);
		}
	}
	pthread_mutex_unlock(&scm__lock);
	return err ? scm_err(err) : 0;
}

/*
 * scm_connect_error -- the user took a REP it cannot complete.  As
 * librdmacm: the status is ucma_process_conn_resp's return, -1, with the
 * cause in errno (a synchronous rdma_connect then fails with EPERM, as
 * there), the QP is flushed, and the id's later REJECTED or DISCONNECTED
 * is never reported (its connect_error).
 */
static void scm_connect_error(struct scm_id *s, struct scm_event *evt, int err)
{
	scm__modify_qp_err(s);
	s->connect_error = 1;
	evt->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
	evt->ev.status = -1;
	errno = err;
}

/*
 * scm__process_conn_resp -- librdmacm's work when the user takes a
 * CONNECT_RESPONSE: with a QP on the id, move it to RTS, send the RTU and
 * report ESTABLISHED (or CONNECT_ERROR) instead.
 */
int scm__process_conn_resp(struct scm_id *s, struct scm_event *evt)
{
	int err;

	if (!s->id.qp)
		return 0;
	if (s->state != SCM_REP_RCVD) {
		/* rejected meanwhile: the kernel refuses the RTU (EINVAL) */
		scm_connect_error(s, evt, EINVAL);
		return 0;
	}
	err = scm_modify_qp_rtr_rts(s);
	if (err) {
		scm_send_rej(s, SCM_REJ_CONSUMER_DEFINED, NULL, 0);
		scm_finish(s);
		scm_connect_error(s, evt, err);
		return 0;
	}
	evt->ev.event = RDMA_CM_EVENT_ESTABLISHED;
	scm_send_rtu(s);
	return 0;
}

/* rdma_notify -- a QP saw traffic before the RTU: establish now */
int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	struct scm_id *s = scm_id_of(id);
	int err = 0;

	if (!id)
		return scm_err(EINVAL);
	pthread_mutex_lock(&scm__lock);
	if (!scm_has_cm(s)) {
		err = EINVAL;
	} else if (event == IBV_EVENT_COMM_EST) {
		if (s->state == SCM_REP_SENT) {
			s->state = SCM_CONNECTED;
			scm__deadline(s, 0); /* the REP's timeout */
			scm__post(s, s, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0,
				  0);
		} else if (s->state == SCM_CONNECTED) {
			err = EISCONN;
		} else {
			err = EINVAL;
		}
	} else if (event != IBV_EVENT_PATH_MIG || s->state != SCM_CONNECTED) {
		/* ib_cm_notify knows COMM_EST and PATH_MIG; cm_migrate
		 * wants an established connection */
		err = EINVAL;
	}
	pthread_mutex_unlock(&scm__lock);
	return err ? scm_err(err) : 0;
}

/* scm__teardown_locked -- an id goes away: tell the peer as the CM would */
void scm__teardown_locked(struct scm_id *s)
{
	switch (s->state) {
	case SCM_REQ_RCVD:
	case SCM_REP_SENT:
	case SCM_REP_RCVD:
		scm_send_rej(s, SCM_REJ_CONSUMER_DEFINED, NULL, 0);
		break;
	case SCM_REQ_SENT:
		/* the IB CM gives up a REQ it sent with REJ(TIMEOUT) */
		if (s->id.qp_type != IBV_QPT_UD)
			scm_send_rej(s, SCM_REJ_TIMEOUT, NULL, 0);
		break;
	case SCM_CONNECTED:
		scm_send_simple(s, SCM_MSG_DREQ);
		break;
	case SCM_DREQ_RCVD:
		/* cm_destroy_id answers the peer's DREQ */
		scm_send_simple(s, SCM_MSG_DREP);
		break;
	default:
		break;
	}
	scm_finish(s);
}

/* scm_unmap_v4 -- an IPv4 peer of a dual-stack listener is AF_INET */
static void scm_unmap_v4(struct sockaddr_storage *ss)
{
	struct sockaddr_in6 s6;
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

	if (ss->ss_family != AF_INET6)
		return;
	memcpy(&s6, ss, sizeof(s6));
	if (!IN6_IS_ADDR_V4MAPPED(&s6.sin6_addr))
		return;
	memset(ss, 0, sizeof(*ss));
	s4->sin_family = AF_INET;
	s4->sin_port = s6.sin6_port;
	memcpy(&s4->sin_addr, &s6.sin6_addr.s6_addr[12], 4);
}

/* scm_handshake_ms -- time an accepted socket has to deliver its REQ */
static uint64_t scm_handshake_ms(void)
{
	const char *e = getenv("SOFTRDMA_CM_HANDSHAKE_MS");

	return e ? strtoull(e, NULL, 10) : SCM_HANDSHAKE_MS;
}

/*
 * scm_waiting_next -- the child after pos (NULL: the first) in l's
 * waiting list, oldest first, that still has not reported a REQ; children
 * that have are dropped from the list on the way, so that it holds about
 * the half-open ones, not every connection the listener ever accepted.
 */
static struct scm_id *scm_waiting_next(struct scm_id *l, struct scm_id *pos)
{
	struct soft_list *it = pos ? pos->wlink.next : l->waiting.next, *nx;

	for (; it != &l->waiting; it = nx) {
		struct scm_id *c = soft_container_of(it, struct scm_id, wlink);

		nx = it->next;
		if (c->listen == l && c->state == SCM_REQ_WAIT)
			return c;
		soft_list_del(it);
	}
	return NULL;
}

/* scm_half_open -- children of l that have not reported a REQ yet */
static int scm_half_open(struct scm_id *l, int *deferred)
{
	struct scm_id *c;
	int n = 0;

	*deferred = 0;
	for (c = scm_waiting_next(l, NULL); c; c = scm_waiting_next(l, c)) {
		n++;
		*deferred += c->deferred;
	}
	return n;
}

/* scm__child_gone -- drop a hidden child (REQ_WAIT): nothing to tell */
void scm__child_gone(struct scm_id *c)
{
	scm_finish(c);
	scm__id_free_locked(c);
}

/*
 * scm_evict_idle -- make room: the oldest child of l that has not sent a
 * REQ is read once more (its REQ may be waiting in the socket) and, if it
 * still has none, closed.  Returns whether a child went.
 */
static int scm_evict_idle(struct scm_id *l)
{
	struct scm_id *old;
	uint64_t h;

	for (;;) {
		for (old = scm_waiting_next(l, NULL); old && old->deferred;
		     old = scm_waiting_next(l, old))
			;
		if (!old)
			return 0;
		h = old->handle;
		scm__progress(EPOLLIN, old);
		if (!scm__id_alive(h))
			return 1; /* it went by itself */
		if (old->state == SCM_REQ_WAIT && !old->deferred) {
			scm__child_gone(old);
			return 1;
		}
		/* it had a REQ: it is no longer idle, try the next */
	}
}

/* scm_accept_pause -- stop accepting for a while (out of fds, or full) */
static void scm_accept_pause(struct scm_id *l)
{
	if (!l->accept_paused && !scm__epoll_mod(l, 0))
		l->accept_paused = 1;
	scm__deadline(l, scm__now_ms() + SCM_ACCEPT_PAUSE_MS);
}

/* scm_accept_resume -- accept again (the pause is over) */
static void scm_accept_resume(struct scm_id *l)
{
	if (l->accept_paused && !scm__epoll_mod(l, EPOLLIN))
		l->accept_paused = 0;
	else if (l->accept_paused)
		scm__deadline(l, scm__now_ms() + SCM_ACCEPT_PAUSE_MS);
}

/* scm_new_child -- a hidden child id for an accepted socket */
static void scm_new_child(struct scm_id *l, int fd,
			  struct sockaddr_storage *peer)
{
	struct scm_channel *ch;
	struct scm_id *c;
	socklen_t len;

	ch = l->sync ? scm__channel_new(1) : scm_ch_of(l->id.channel);
	c = ch ? scm__id_new(ch, l->id.context, l->id.ps, l->id.qp_type) : NULL;
	if (!c) {
		if (ch && l->sync)
			scm__channel_free(ch);
		close(fd);
		return;
	}
	c->fd = fd;
	c->listen = l;
	c->state = SCM_REQ_WAIT;
	c->born_ms = scm__now_ms();
	scm__deadline(c, c->born_ms + scm_handshake_ms());
	soft_list_add(&l->waiting, &c->wlink);
	scm_unmap_v4(peer);
	memcpy(&c->id.route.addr.dst_storage, peer, sizeof(*peer));
	len = sizeof(c->id.route.addr.src_storage);
	getsockname(fd, &c->id.route.addr.src_addr, &len);
	scm_unmap_v4(&c->id.route.addr.src_storage);
	scm_tune_socket(fd);
	if (scm__epoll_add(c, EPOLLIN))
		scm__id_free_locked(c);
}

/*
 * scm_accept_sockets -- new TCP connections become hidden child ids.  A
 * pass accepts a bounded number (other ids get their turn); out of fds or
 * at the half-open limit it closes the oldest idle child, and with none
 * to close it pauses accept() instead of spinning on EMFILE: the kernel's
 * queue holds the rest.
 */
static void scm_accept_sockets(struct scm_id *l)
{
	struct sockaddr_storage peer;
	socklen_t len;
	int fd, i, n, deferred;

	for (i = 0; i < 64; i++) {
		n = scm_half_open(l, &deferred);
		if (n >= SCM_HALF_OPEN_MAX && !scm_evict_idle(l)) {
			scm_accept_pause(l);
			return;
		}
		len = sizeof(peer);
		fd = accept4(l->fd, (struct sockaddr *)&peer, &len,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			scm_new_child(l, fd, &peer);
			continue;
		}
		switch (errno) {
		case EINTR:
		case ECONNABORTED:
		case EPROTO:
		case EPERM:
			continue; /* that connection is gone: the next one */
		case EMFILE:
		case ENFILE:
		case ENOBUFS:
		case ENOMEM:
			if (scm_evict_idle(l))
				continue;
			SOFT_WARN("rdma_cm listener: out of file descriptors, "
				  "accepting again in %d ms",
				  SCM_ACCEPT_PAUSE_MS);
			scm_accept_pause(l);
			return;
		default: /* EAGAIN: all taken */
			return;
		}
	}
}

/* scm_ud_ah -- the address handle attributes that reach the peer */
static void scm_ud_ah(struct scm_id *s, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->grh.dgid = s->remote_gid;
	ah->grh.sgid_index = (uint8_t)s->sgid_index;
	ah->grh.hop_limit = 64;
	ah->grh.traffic_class = s->path.traffic_class;
	ah->port_num = s->id.port_num ? s->id.port_num : 1;
}

/* scm_pending_requests -- CONNECT_REQUESTs of l not taken yet (backlog) */
static int scm_pending_requests(struct scm_id *l)
{
	struct scm_event *e;
	int n = 0;

	for (e = scm_ch_of(l->id.channel)->head; e; e = e->next)
		if (e->owner == l &&
		    e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST)
			n++;
	return n;
}

/* scm_backlog -- how many CONNECT_REQUESTs l may have pending */
static int scm_backlog(const struct scm_id *l)
{
	return l->backlog > 0 ? l->backlog : SOMAXCONN;
}

/*
 * scm_reachable -- can this process's QPs reach the peer's?  A peer of
 * this host's shared-memory registry, yes; a peer of another host (its
 * GID is none of ours) over RoCE v2 when the network path is on
 * (SOFTRDMA_NET=1, soft/net.c); otherwise no path joins them: another
 * /dev/shm on this host, or another host without SOFTRDMA_NET=1.
 */
static int scm_reachable(const struct scm_wire *w)
{
	uint8_t mine[SCM_REG_ID_LEN];
	union ibv_gid g;

	soft_reg_id(mine);
	if (!memcmp(mine, w->reg_id, sizeof(mine)))
		return 1;
	memcpy(g.raw, w->gid, sizeof(g.raw));
	if (soft_gid_local(&g)) {
		SOFT_WARN("rdma_cm: peer on this host uses another "
			  "shared-memory registry (another /dev/shm): "
			  "connection refused as unreachable");
		return 0;
	}
	if (soft_net_enabled())
		return 1; /* another host: RoCE v2 */
	SOFT_WARN("rdma_cm: peer on another host, and SOFTRDMA_NET=1 is "
		  "not set: connection refused as unreachable");
	return 0;
}

static void scm_on_req(struct scm_id *c, const struct scm_wire *w);

/*
 * scm__backlog_drain -- the user took a CONNECT_REQUEST of l: requests
 * held beyond the backlog are reported, oldest first, while room lasts.
 */
void scm__backlog_drain(struct scm_id *l)
{
	struct scm_id *old;

	while (l->state == SCM_LISTEN &&
	       scm_pending_requests(l) < scm_backlog(l)) {
		for (old = scm_waiting_next(l, NULL); old && !old->deferred;
		     old = scm_waiting_next(l, old))
			;
		if (!old)
			return;
		if (scm__epoll_mod(old, EPOLLIN)) {
			scm__child_gone(old);
			continue;
		}
		scm_on_req(old, &old->req);
	}
}

/* scm_same_transport -- a REQ's QP type and a listener's agree: the
 * same, or an XRC initiator's to an XRC target's (the REQ's transport
 * service type is XRC for both) */
static int scm_same_transport(uint8_t req, enum ibv_qp_type l)
{
	if (req == IBV_QPT_XRC_SEND || req == IBV_QPT_XRC_RECV)
		return l == IBV_QPT_XRC_SEND || l == IBV_QPT_XRC_RECV;
	return req == (uint8_t)l;
}

/* scm_on_req -- a hidden child got its REQ: report CONNECT_REQUEST */
static void scm_on_req(struct scm_id *c, const struct scm_wire *w)
{
	struct scm_id *l = c->listen;
	struct scm_event *e;
	size_t field;

	if (!l || ntohs(w->ps) != (uint16_t)l->id.ps ||
	    !scm_same_transport(w->qp_type, l->id.qp_type) ||
	    scm__dev_attach(c)) {
		scm_send_rej(c, SCM_REJ_INVALID_SERVICE_ID, NULL, 0);
		scm_finish(c);
		scm__id_free_locked(c);
		return;
	}
	if (!scm_reachable(w)) {
		/* a peer no path of ours reaches */
		scm_send_rej(c, SCM_REJ_NO_PATH, NULL, 0);
		scm__child_gone(c);
		return;
	}
	if (scm_pending_requests(l) >= scm_backlog(l)) {
		/*
		 * Beyond the backlog the kernel's ucma drops the request and
		 * the active IB CM sends its REQ again: the REQ waits here,
		 * unanswered and unread, until the user takes a request.
		 */
		if (&c->req != w)
			memcpy(&c->req, w, sizeof(*w));
		c->deferred = 1;
		scm__deadline(c, scm__now_ms() + scm_connect_timeout_ms());
		if (scm__epoll_mod(c, 0))
			scm__child_gone(c);
		return;
	}
	c->deferred = 0;
	scm__deadline(c, 0);
	c->remote_qpn = ntohl(w->qpn);
	c->remote_psn = ntohl(w->psn);
	memcpy(c->remote_gid.raw, w->gid, 16);
	c->id.route.addr.addr.ibaddr.dgid = c->remote_gid;
	c->has_remote = 1;
	c->mtu = (uint8_t)scm__path_mtu(&c->id.route.addr.dst_addr,
					(enum ibv_mtu)c->mtu);
	if (w->mtu && w->mtu < c->mtu)
		c->mtu = w->mtu;
	c->retry_count = w->retry_count;
	c->rnr_retry_count = w->rnr_retry_count;
	c->flow_control = w->flow_control;
	c->srq = w->srq;
	c->resp_res = w->init_depth;
	c->init_depth = w->resp_res;
	c->psn = scm_random_psn();
	/* the passive path is the REQ's (cma_ib_new_conn_id), its traffic
	 * class the requester's whatever the listener's TOS */
	c->tos = w->tclass;
	scm__fill_path(c);
	c->state = SCM_REQ_RCVD;
	field = scm_req_limit(c);
	e = scm__post(c, l, RDMA_CM_EVENT_CONNECT_REQUEST, 0, w->pdata,
		      w->pdata_len, field);
	if (!e) {
		scm__teardown_locked(c);
		scm__id_free_locked(c);
		return;
	}
	e->ev.listen_id = &l->id;
	if (c->id.qp_type == IBV_QPT_UD) {
		e->ev.param.ud.qp_num = c->remote_qpn;
		scm_ud_ah(c, &e->ev.param.ud.ah_attr);
	} else {
		scm_conn_event(e, w);
	}
}

/*
 * scm_unreachable -- the peer is beyond this host's shared memory: fail as
 * an IB CM does when its REQ finds no path (UNREACHABLE, -ETIMEDOUT).
 */
static void scm_unreachable(struct scm_id *s)
{
	scm_finish(s);
	scm__post(s, s, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0, 0);
}

/* scm_on_sidr_rep -- UD: the SIDR REP gives the peer's QPN and Q_Key */
static void scm_on_sidr_rep(struct scm_id *s, const struct scm_wire *w)
{
	struct scm_event *e;

	s->remote_qpn = ntohl(w->qpn);
	memcpy(s->remote_gid.raw, w->gid, 16);
	s->id.route.addr.addr.ibaddr.dgid = s->remote_gid;
	s->has_remote = 1;
	scm_finish(s);
	e = scm__post(s, s, RDMA_CM_EVENT_ESTABLISHED, 0, w->pdata,
		      w->pdata_len, SCM_SIDR_REP_PDATA);
	if (!e)
		return;
	e->ev.param.ud.qp_num = s->remote_qpn;
	e->ev.param.ud.qkey = ntohl(w->qkey);
	scm_ud_ah(s, &e->ev.param.ud.ah_attr);
}

/* scm_on_rep -- the active side got its REP */
static void scm_on_rep(struct scm_id *s, const struct scm_wire *w)
{
	struct scm_event *e;

	if (s->state != SCM_REQ_SENT)
		return;
	if (!scm_reachable(w)) {
		scm_send_rej(s, SCM_REJ_NO_PATH, NULL, 0);
		scm_unreachable(s);
		return;
	}
	if (s->id.qp_type == IBV_QPT_UD) {
		scm_on_sidr_rep(s, w);
		return;
	}
	s->remote_qpn = ntohl(w->qpn);
	s->remote_psn = ntohl(w->psn);
	memcpy(s->remote_gid.raw, w->gid, 16);
	s->id.route.addr.addr.ibaddr.dgid = s->remote_gid;
	s->has_remote = 1;
	s->init_depth = w->resp_res;
	s->resp_res = w->init_depth;
	s->rnr_retry_count = w->rnr_retry_count;
	scm__deadline(s, 0);
	s->state = SCM_REP_RCVD;
	e = scm__post(s, s, SCM_EVENT_CONN_RESP, 0, w->pdata, w->pdata_len,
		      SCM_REP_PDATA);
	scm_conn_event(e, w);
}

/* scm_handle -- one CM message for an id */
static void scm_handle(struct scm_id *s, const struct scm_wire *w)
{
	switch (w->type) {
	case SCM_MSG_REQ:
		if (s->state == SCM_REQ_WAIT)
			scm_on_req(s, w);
		break;
	case SCM_MSG_REP:
		scm_on_rep(s, w);
		break;
	case SCM_MSG_REJ:
		if ((s->state == SCM_REQ_SENT || s->state == SCM_REP_SENT) &&
		    ntohs(w->reason) == SCM_REJ_NO_PATH) {
			/* no path: a lost REQ, or a REP that times out */
			scm_finish(s);
			scm__post(s, s, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT,
				  NULL, 0, 0);
		} else if (s->state == SCM_REQ_SENT &&
			   s->id.qp_type == IBV_QPT_UD) {
			scm_finish(s);
			scm__post(s, s, RDMA_CM_EVENT_UNREACHABLE,
				  ntohs(w->reason), w->pdata, w->pdata_len,
				  SCM_SIDR_REP_PDATA);
		} else if (s->state == SCM_REQ_SENT ||
			   s->state == SCM_REQ_RCVD ||
			   s->state == SCM_REP_SENT ||
			   s->state == SCM_REP_RCVD) {
			scm_finish(s);
			scm_rej_event(s, ntohs(w->reason), w->pdata,
				      w->pdata_len);
		}
		break;
	case SCM_MSG_RTU:
		if (s->state == SCM_REP_SENT) {
			s->state = SCM_CONNECTED;
			scm__deadline(s, 0); /* the REP's timeout */
			scm__post(s, s, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0,
				  0);
		}
		break;
	case SCM_MSG_DREQ:
		/* cm_dreq_handler: no DREP here, the user sends it */
		if (s->state == SCM_REP_RCVD)
			s->dreq_held = 1; /* dropped by the IB CM, retried */
		else if (s->state == SCM_CONNECTED ||
			 s->state == SCM_REP_SENT ||
			 s->state == SCM_DISCONNECTING)
			scm_dreq_rcvd(s);
		break;
	case SCM_MSG_DREP:
		if (s->state == SCM_DISCONNECTING)
			scm_disconnected(s, 0);
		else if (s->state == SCM_DREQ_RCVD)
			scm_timewait(s); /* both sent a DREQ: reported */
		break;
	default:
		break;
	}
}

/* scm_peer_gone -- EOF or error on the CM connection: the peer died */
static void scm_peer_gone(struct scm_id *s)
{
	switch (s->state) {
	case SCM_REQ_WAIT:
		scm_finish(s);
		scm__id_free_locked(s);
		return;
	case SCM_REQ_RCVD:
		if (s->id.qp_type == IBV_QPT_UD) { /* SIDR: nothing to say */
			s->peer_gone = 1;
			scm__close_fd(s);
			return;
		}
		/* the requester died: its IB CM would have sent REJ(TIMEOUT) */
		scm_finish(s);
		scm_rej_event(s, SCM_REJ_TIMEOUT, NULL, 0);
		return;
	case SCM_REP_RCVD:
		s->peer_gone = 1;
		scm__close_fd(s);
		return;
	case SCM_REQ_SENT:
	case SCM_REP_SENT:
		/* taking the REJECTED flushes the QP (rdma_get_cm_event) */
		scm_finish(s);
		scm_rej_event(s, SCM_REJ_CONSUMER_DEFINED, NULL, 0);
		return;
	case SCM_CONNECTED:
		/*
		 * The peer died: its kernel would have sent the DREQ.  Our
		 * QP stays as it is, as with any DREQ (librdmacm modifies
		 * none on DISCONNECTED): posted receives wait for
		 * rdma_disconnect, a send fails with RETRY_EXC_ERR once the
		 * transport timeout finds the peer QP gone (soft/data.c).
		 */
		s->peer_gone = 1;
		scm__close_fd(s);
		scm_dreq_rcvd(s);
		return;
	case SCM_DISCONNECTING: /* the DREP we wait for, from its kernel */
		scm_disconnected(s, 0);
		return;
	case SCM_DREQ_RCVD:
		s->peer_gone = 1; /* the DREP has nowhere to go */
		scm__close_fd(s);
		return;
	default:
		scm__close_fd(s);
		return;
	}
}

/* scm__progress -- socket activity on an id (progress thread, locked) */
void scm__progress(uint32_t events, struct scm_id *s)
{
	struct scm_wire w;
	socklen_t len;
	uint64_t h;
	ssize_t n;
	int err = 0;

	if (s->fd < 0)
		return;
	if (s->state == SCM_LISTEN) {
		scm_accept_sockets(s);
		return;
	}
	if (s->deferred) {
		/* not read while held: only a reset or hang-up matters */
		if (events & (EPOLLERR | EPOLLHUP))
			scm__child_gone(s);
		return;
	}
	if (s->state == SCM_CONNECTING) {
		len = sizeof(err);
		if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len))
			err = errno;
		if (!err && !(events & EPOLLOUT))
			return;
		if (!err && scm_self_connected(s->fd))
			err = ECONNREFUSED;
		if (!err) {
			s->state = SCM_REQ_SENT;
			err = scm__send(s, &s->req);
		}
		if (!err)
			err = scm__epoll_mod(s, EPOLLIN);
		if (err)
			scm_connect_failed(s, err);
		return;
	}
	for (;;) {
		n = recv(s->fd, s->rbuf + s->rlen, sizeof(s->rbuf) - s->rlen,
			 0);
		if (n > 0) {
			s->rlen += (size_t)n;
			if (s->rlen < sizeof(s->rbuf))
				continue;
			s->rlen = 0;
			memcpy(&w, s->rbuf, sizeof(w));
			if (scm__wire_check(&w)) {
				/* a malformed message: the peer is not a CM */
				scm_peer_gone(s);
				return;
			}
			h = s->handle;
			scm_handle(s, &w);
			/* the handler may have closed or freed the id */
			if (!scm__id_alive(h))
				return;
			/* a REQ beyond the backlog: the socket is not read */
			if (s->deferred)
				return;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		scm_peer_gone(s);
		return;
	}
}

/* scm__timeouts -- expire connect and disconnect attempts */
void scm__timeouts(uint64_t now)
{
	struct scm_id *s;

	while ((s = scm__next_due(now))) {
		scm__deadline(s, 0);
		if (s->state == SCM_LISTEN) {
			scm_accept_resume(s);
		} else if (s->state == SCM_REQ_WAIT) {
			/* no (or no room for its) REQ in time: close it */
			scm__child_gone(s);
		} else if (s->state == SCM_REP_SENT) {
			/* no RTU: the IB CM's REP timed out */
			scm_finish(s);
			scm__post(s, s, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT,
				  NULL, 0, 0);
		} else if (s->state == SCM_CONNECTING && s->fd < 0 &&
			   now < s->connect_deadline_ms) {
			scm_start_connect(s);
		} else if (s->state == SCM_CONNECTING ||
			   s->state == SCM_REQ_SENT) {
			scm_finish(s);
			scm__post(s, s, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT,
				  NULL, 0, 0);
		} else if (s->state == SCM_DISCONNECTED && s->timewait) {
			s->timewait = 0;
			scm__post(s, s, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0, NULL, 0,
				  0);
		} else if (s->state == SCM_DISCONNECTING) {
			scm_disconnected(s, -ETIMEDOUT);
		}
	}
}
