/* SPDX-License-Identifier: MIT */
/*
 * rawpeer.h -- a raw librdmacm/libibverbs client that speaks rdmamsg's
 * handshake and wire headers itself (hostile.c attacks with it,
 * peerclosed.c closes with it): one RC QP on softrdma through the
 * ordinary API, RAWPEER_NRX receive buffers of RAWPEER_RXLEN bytes at the
 * start of its memory, then the caller's areas (RAWPEER_SEND_OFF first).
 * Include after tap.h, util.h, internal.h, proto.h and handshake.h.
 */
#ifndef RDMAMSG_TEST_RAWPEER_H
#define RDMAMSG_TEST_RAWPEER_H

#include <rdma/rdma_cma.h>

#define RAWPEER_EAGER	 8192
#define RAWPEER_DEPTH	 8
#define RAWPEER_NRX	 (RAWPEER_DEPTH + RDMAMSG_CTL_CREDITS)
#define RAWPEER_RXLEN	 (RDMAMSG_HDR + RAWPEER_EAGER)
#define RAWPEER_SEND	 (1ull << 63) /* wr_id of the peer's sends */
#define RAWPEER_SEND_OFF ((size_t)RAWPEER_NRX * RAWPEER_RXLEN)

struct rawpeer {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char *mem;	       /* receive buffers, then the caller's areas */
	uint32_t credits, ctl; /* the server's grant at connect */
	uint32_t reason;       /* a refused reconnect's (HS_RREQ) */
};

/* rawpeer_event -- the next CM event: 0 when it is type, else its type,
 * or -1 when none came within ms; a connect's private data to pdata */
static inline int rawpeer_event(struct rawpeer *p, enum rdma_cm_event_type type,
				int ms, uint8_t *pdata, size_t *plen)
{
	struct pollfd f = {.fd = p->ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;
	int got;

	if (poll(&f, 1, ms) != 1 || rdma_get_cm_event(p->ch, &ev))
		return -1;
	got = ev->event;
	if (pdata && plen && ev->param.conn.private_data) {
		*plen = ev->param.conn.private_data_len;
		memcpy(pdata, ev->param.conn.private_data, *plen);
	}
	rdma_ack_cm_event(ev);
	return got == (int)type ? 0 : got;
}

/* rawpeer_post_rx -- receive buffer i */
static inline int rawpeer_post_rx(struct rawpeer *p, uint32_t i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(p->mem + (size_t)i * RAWPEER_RXLEN),
		.length = RAWPEER_RXLEN,
		.lkey = p->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1},
			   *bad;

	return ibv_post_recv(p->id->qp, &wr, &bad);
}

/* rawpeer_poll -- the next completion within ms: its status, or -1 */
static inline int rawpeer_poll(struct rawpeer *p, int ms, struct ibv_wc *wc)
{
	long long end = test_now_ms() + ms;

	while (test_now_ms() < end) {
		int n = ibv_poll_cq(p->cq, 1, wc);

		if (n < 0)
			return -1;
		if (n == 1)
			return wc->status;
		usleep(200);
	}
	return -1;
}

/* rawpeer_send -- len bytes from RAWPEER_SEND_OFF as one signalled SEND */
static inline int rawpeer_send(struct rawpeer *p, size_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(p->mem + RAWPEER_SEND_OFF),
			      .length = (uint32_t)len,
			      .lkey = p->mr->lkey};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = RAWPEER_SEND;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	return ibv_post_send(p->id->qp, &wr, &bad);
}

/*
 * rawpeer_establish -- rawpeer_connect_user up to the server's accept:
 * 0 once ESTABLISHED came with an HS_ACC, before the credit grant (which
 * the server sends once its own side is established)
 */
static inline int rawpeer_establish(struct rawpeer *p, unsigned int port,
				    size_t mem, uint8_t kind, uint64_t sid,
				    uint64_t delivered, const char *user)
{
	struct sockaddr_in dst;
	struct ibv_qp_init_attr qa;
	struct rdma_conn_param cp;
	struct rdmamsg__hs hs;
	uint8_t pdata[RDMAMSG_HS_MAX], acc[256];
	size_t alen = 0;
	uint32_t i;

	memset(p, 0, sizeof(*p));
	p->ch = rdma_create_event_channel();
	if (!p->ch || rdma_create_id(p->ch, &p->id, NULL, RDMA_PS_TCP))
		return -1;
	memset(&dst, 0, sizeof(dst));
	dst.sin_family = AF_INET;
	dst.sin_port = htons((uint16_t)port);
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (rdma_resolve_addr(p->id, NULL, (struct sockaddr *)&dst, 2000) ||
	    rawpeer_event(p, RDMA_CM_EVENT_ADDR_RESOLVED, 5000, NULL, NULL) ||
	    rdma_resolve_route(p->id, 2000) ||
	    rawpeer_event(p, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000, NULL, NULL))
		return -2;
	if (mem < RAWPEER_SEND_OFF)
		return -3;
	p->pd = ibv_alloc_pd(p->id->verbs);
	p->cq = ibv_create_cq(p->id->verbs, 64, NULL, NULL, 0);
	p->mem = calloc(1, mem);
	if (!p->pd || !p->cq || !p->mem)
		return -3;
	p->mr = ibv_reg_mr(p->pd, p->mem, mem,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = p->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 16;
	qa.cap.max_recv_wr = RAWPEER_NRX;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = 64;
	if (!p->mr || rdma_create_qp(p->id, p->pd, &qa))
		return -4;
	for (i = 0; i < RAWPEER_NRX; i++)
		if (rawpeer_post_rx(p, i))
			return -5;
	memset(&hs, 0, sizeof(hs));
	hs.kind = kind;
	hs.sid = sid;
	hs.delivered = delivered;
	hs.depth = RAWPEER_DEPTH;
	hs.ctl = RDMAMSG_CTL_CREDITS;
	hs.eager = RAWPEER_EAGER;
	hs.max_msg = 1 << 20;
	hs.user = (const uint8_t *)user;
	hs.user_len = user ? (uint8_t)strlen(user) : 0;
	memset(&cp, 0, sizeof(cp));
	cp.private_data = pdata;
	cp.private_data_len = (uint8_t)rdmamsg__hs_encode(&hs, pdata);
	cp.responder_resources = cp.initiator_depth = 1;
	cp.retry_count = 7;
	if (kind == HS_RREQ) {
		if (rdma_connect(p->id, &cp) ||
		    rawpeer_event(p, RDMA_CM_EVENT_REJECTED, 10000, acc,
				  &alen) ||
		    rdmamsg__hs_decode(acc, alen, &hs) || hs.kind != HS_REJ)
			return -11;
		p->reason = hs.reason;
		return 1;
	}
	if (rdma_connect(p->id, &cp) ||
	    rawpeer_event(p, RDMA_CM_EVENT_ESTABLISHED, 5000, acc, &alen))
		return -6;
	if (rdmamsg__hs_decode(acc, alen, &hs) || hs.kind != HS_ACC)
		return -7;
	return 0;
}

/*
 * rawpeer_connect_user -- connect to 127.0.0.1:port with memory of mem bytes
 * (at least RAWPEER_SEND_OFF; local, remote read and write access) and
 * the handshake kind: HS_REQ, or HS_SREQ naming session sid; 0 once the
 * server's credit grant arrived (in p->credits, p->ctl) and its buffer is
 * posted again.  HS_RREQ reconnects session sid having delivered that
 * many, and expects a refusal: 1, its reason in p->reason.  Negative: the
 * step that failed.  Whatever was made is p's to rawpeer_free.  user (a
 * string, or NULL): the application bytes of the request.
 */
static inline int rawpeer_connect_user(struct rawpeer *p, unsigned int port,
				       size_t mem, uint8_t kind, uint64_t sid,
				       uint64_t delivered, const char *user)
{
	struct ibv_wc wc;
	int ret;

	ret = rawpeer_establish(p, port, mem, kind, sid, delivered, user);
	if (ret)
		return ret;
	/* the passive side grants its credits in-band once established */
	if (rawpeer_poll(p, 10000, &wc) != IBV_WC_SUCCESS ||
	    wc.byte_len != RDMAMSG_HDR)
		return -8;
	{
		const struct rdmamsg__wire *h =
			(const void *)(p->mem + wc.wr_id * RAWPEER_RXLEN);

		if (h->type != W_CREDIT)
			return -9;
		p->credits = le16toh(h->credits);
		p->ctl = h->ctl;
	}
	return rawpeer_post_rx(p, (uint32_t)wc.wr_id) ? -10 : 0;
}

/* rawpeer_connect -- rawpeer_connect_user without application bytes */
static inline int rawpeer_connect(struct rawpeer *p, unsigned int port,
				  size_t mem, uint8_t kind, uint64_t sid,
				  uint64_t delivered)
{
	return rawpeer_connect_user(p, port, mem, kind, sid, delivered, NULL);
}

/* rawpeer_free -- tear the client down (any part made) */
static inline void rawpeer_free(struct rawpeer *p)
{
	if (p->id && p->id->qp)
		rdma_destroy_qp(p->id);
	if (p->mr)
		ibv_dereg_mr(p->mr);
	if (p->cq)
		ibv_destroy_cq(p->cq);
	if (p->pd)
		ibv_dealloc_pd(p->pd);
	if (p->id)
		rdma_destroy_id(p->id);
	if (p->ch)
		rdma_destroy_event_channel(p->ch);
	free(p->mem);
	memset(p, 0, sizeof(*p));
}

#endif
