/* SPDX-License-Identifier: MIT */
/*
 * cm_params.c -- softrdma CM: what the kernel's rdma_cm does with the
 * fields of struct rdma_conn_param, and the QP attributes it gives.
 *
 * - retry_count and rnr_retry_count are 3-bit fields of the REQ and REP:
 *   cma_connect_ib and cma_accept_ib take min(7, value), so 255 (a common
 *   "as many as possible") connects with 7; flow_control is a 1-bit field
 *   (IBA_SET keeps its low bit), srq a flag (id_priv->srq ? 1 : 0), and a
 *   qp_num given without a QP is 24 bits.  The peer sees the clamped
 *   values in its event, and the QPs are moved with them.
 * - A UC id (rdma_create_ep with ai_qp_type IBV_QPT_UC) gets UC's QP
 *   attributes from rdma_init_qp_attr (the kernel's cm_init_qp_rtr_attr
 *   and cm_init_qp_rts_attr give RC's read/atomic, retry and timeout
 *   attributes to RC only), so that rdma_accept and the ESTABLISHED of
 *   the active side can move the QPs; data then flows over UC.
 * - CONNECT_ERROR (the active side takes a REP it cannot complete: its QP
 *   will not move, or the peer rejected meanwhile) has status -1, as
 *   librdmacm's rdma_get_cm_event gives ucma_process_conn_resp's return,
 *   and the id's REJECTED that may follow is never reported (librdmacm's
 *   connect_error); the QP is left in ERR.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "../tap.h"
#include "cm_util.h"

/* rc_attr -- a small RC (or UC) QP with CQs made by rdma_create_qp */
static void rc_attr(struct ibv_qp_init_attr *ia, enum ibv_qp_type t)
{
	memset(ia, 0, sizeof(*ia));
	ia->qp_type = t;
	ia->cap.max_send_wr = 4;
	ia->cap.max_recv_wr = 4;
	ia->cap.max_send_sge = 1;
	ia->cap.max_recv_sge = 1;
	ia->sq_sig_all = 1;
}

/* qp_query -- the retry attributes of a QP */
static int qp_query(struct ibv_qp *qp, struct ibv_qp_attr *a)
{
	struct ibv_qp_init_attr ia;

	memset(a, 0, sizeof(*a));
	return ibv_query_qp(qp, a,
			    IBV_QP_STATE | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				    IBV_QP_DEST_QPN,
			    &ia);
}

/* listener -- an id listening on 127.0.0.1, a port of its own */
static struct rdma_cm_id *listener(struct rdma_event_channel *ch)
{
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_cm_id *l;

	if (rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 4))
		bail_out("listener");
	return l;
}

/*
 * test_clamp_no_qp -- an active id without a QP: its conn_param's fields
 * go into the REQ as the kernel puts them there, and the passive side's
 * REP fields come back the same way (CONNECT_RESPONSE, rdma_establish)
 */
static void test_clamp_no_qp(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_cm_id *l, *c, *a = NULL;
	struct ibv_qp_init_attr ia;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct ibv_qp_attr qa;
	int qq;

	if (!sch || !cch)
		bail_out("channels");
	l = listener(sch);
	if (rdma_create_id(cch, &c, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(c, cch, ntohs(rdma_get_src_port(l))))
		bail_out("client");
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x1abcdef; /* beyond 24 bits: the REQ keeps 24 */
	cp.srq = 2;
	cp.retry_count = 255;
	cp.rnr_retry_count = 200;
	cp.flow_control = 3;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	ok(!rdma_connect(c, &cp), "no QP: connect, retry_count 255, "
				  "rnr_retry_count 200, flow_control 3");
	ev = cmt_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	ok(ev != NULL, "no QP: the listener gets the request");
	if (ev) {
		a = ev->id;
		is_int(ev->param.conn.retry_count, 7,
		       "REQ retry_count min(7, 255)");
		is_int(ev->param.conn.rnr_retry_count, 7,
		       "REQ rnr_retry_count min(7, 200)");
		is_int(ev->param.conn.flow_control, 1,
		       "REQ flow_control: its bit of 3");
		is_int(ev->param.conn.srq, 1, "REQ srq: 2 is set");
		is_int(ev->param.conn.qp_num, 0xabcdef,
		       "REQ qp_num: 24 bits of 0x1abcdef");
		rdma_ack_cm_event(ev);
	}
	if (!a)
		goto out;
	rc_attr(&ia, IBV_QPT_RC);
	ok(!rdma_create_qp(a, NULL, &ia), "passive QP");
	memset(&cp, 0, sizeof(cp));
	cp.rnr_retry_count = 100;
	cp.flow_control = 2;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	ok(!rdma_accept(a, &cp), "accept, rnr_retry_count 100, "
				 "flow_control 2");
	qq = qp_query(a->qp, &qa);
	ok(!qq && qa.qp_state == IBV_QPS_RTS && qa.retry_cnt == 7 &&
		   qa.rnr_retry == 7 && qa.dest_qp_num == 0xabcdef,
	   "passive QP at RTS with the REQ's retry counts (7, 7) and QPN "
	   "(state %d, retry_cnt %u, rnr_retry %u, dest 0x%x)",
	   qa.qp_state, qa.retry_cnt, qa.rnr_retry, qa.dest_qp_num);
	ev = cmt_expect(cch, RDMA_CM_EVENT_CONNECT_RESPONSE, 10000);
	ok(ev != NULL, "no QP: CONNECT_RESPONSE");
	if (ev) {
		is_int(ev->param.conn.rnr_retry_count, 7,
		       "REP rnr_retry_count min(7, 100)");
		is_int(ev->param.conn.flow_control, 0,
		       "REP flow_control: its bit of 2");
		is_int(ev->param.conn.qp_num, a->qp->qp_num, "REP qp_num");
		rdma_ack_cm_event(ev);
		ok(!rdma_establish(c), "rdma_establish");
		ev = cmt_expect(sch, RDMA_CM_EVENT_ESTABLISHED, 10000);
		ok(ev != NULL, "passive side established");
		if (ev)
			rdma_ack_cm_event(ev);
	}
	rdma_disconnect(c);
	rdma_destroy_qp(a);
	rdma_destroy_id(a);
out:
	ok(!rdma_destroy_id(c), "destroy client");
	ok(!rdma_destroy_id(l), "destroy listener");
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}

/*
 * test_clamp_qp -- ids with QPs: rdma_connect with retry counts above 7
 * connects, and each QP is moved with the clamped values (the active
 * side's RNR retry count is the REP's, as cm_rep_handler takes it)
 */
static void test_clamp_qp(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_cm_id *l, *c, *a = NULL;
	struct ibv_qp_init_attr ia;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct ibv_qp_attr qa;
	int qq;

	if (!sch || !cch)
		bail_out("channels");
	l = listener(sch);
	rc_attr(&ia, IBV_QPT_RC);
	if (rdma_create_id(cch, &c, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(c, cch, ntohs(rdma_get_src_port(l))) ||
	    rdma_create_qp(c, NULL, &ia))
		bail_out("client");
	memset(&cp, 0, sizeof(cp));
	cp.retry_count = 9;
	cp.rnr_retry_count = 8;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	ok(!rdma_connect(c, &cp), "QP: connect, retry_count 9, "
				  "rnr_retry_count 8");
	ev = cmt_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	ok(ev != NULL, "QP: the listener gets the request");
	if (ev) {
		a = ev->id;
		rdma_ack_cm_event(ev);
	}
	if (!a)
		goto out;
	rc_attr(&ia, IBV_QPT_RC);
	ok(!rdma_create_qp(a, NULL, &ia), "passive QP");
	memset(&cp, 0, sizeof(cp));
	cp.rnr_retry_count = 255;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	ok(!rdma_accept(a, &cp), "accept, rnr_retry_count 255");
	ev = cmt_expect(cch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	ok(ev != NULL, "QP: established");
	if (ev)
		rdma_ack_cm_event(ev);
	qq = qp_query(c->qp, &qa);
	ok(!qq && qa.qp_state == IBV_QPS_RTS && qa.retry_cnt == 7 &&
		   qa.rnr_retry == 7,
	   "active QP at RTS, retry_cnt 7, rnr_retry 7 "
	   "(state %d, retry_cnt %u, rnr_retry %u)",
	   qa.qp_state, qa.retry_cnt, qa.rnr_retry);
	qq = qp_query(a->qp, &qa);
	ok(!qq && qa.retry_cnt == 7 && qa.rnr_retry == 7,
	   "passive QP retry_cnt 7, rnr_retry 7 (%u, %u)", qa.retry_cnt,
	   qa.rnr_retry);
	ev = cmt_expect(sch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	ok(ev != NULL, "passive side established");
	if (ev)
		rdma_ack_cm_event(ev);
	rdma_disconnect(c);
	rdma_destroy_qp(a);
	rdma_destroy_id(a);
out:
	rdma_destroy_qp(c);
	ok(!rdma_destroy_id(c), "destroy client");
	ok(!rdma_destroy_id(l), "destroy listener");
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}

/* ep -- rdma_create_ep from 127.0.0.1:port, UC, passive or active */
static struct rdma_cm_id *ep(int passive, uint16_t port,
			     struct ibv_qp_init_attr *ia)
{
	struct rdma_addrinfo hints, *res;
	struct rdma_cm_id *id = NULL;
	char svc[8];

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_NUMERICHOST | (passive ? RAI_PASSIVE : 0);
	hints.ai_port_space = RDMA_PS_TCP;
	hints.ai_qp_type = IBV_QPT_UC;
	snprintf(svc, sizeof(svc), "%u", port);
	if (rdma_getaddrinfo("127.0.0.1", svc, &hints, &res))
		bail_out("getaddrinfo");
	if (rdma_create_ep(&id, res, NULL, ia))
		id = NULL;
	rdma_freeaddrinfo(res);
	return id;
}

/*
 * test_uc -- UC ids: rdma_accept and the active side's ESTABLISHED move
 * the UC QPs (RTR without RC's read and RNR attributes, RTS with the SQ
 * PSN only), and a SEND arrives
 */
static void test_uc(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	static const char msg[] = "a SEND over UC through rdma_cm";
	struct rdma_cm_id *l, *c = NULL, *a = NULL;
	struct ibv_mr *smr = NULL, *rmr = NULL;
	char sbuf[64], rbuf[64];
	struct ibv_qp_init_attr ia;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct ibv_qp_attr qa;
	int qq;
	struct ibv_wc wc;

	if (!sch || !cch)
		bail_out("channels");
	l = ep(1, 0, NULL);
	if (!l || rdma_migrate_id(l, sch) || rdma_listen(l, 4))
		bail_out("UC listener");
	ok(l->qp_type == IBV_QPT_UC, "UC listener from rdma_create_ep");
	rc_attr(&ia, IBV_QPT_UC);
	c = ep(0, ntohs(rdma_get_src_port(l)), &ia);
	ok(c && c->qp && c->qp->qp_type == IBV_QPT_UC,
	   "UC active id with its QP");
	if (!c || !c->qp || rdma_migrate_id(c, cch))
		goto out;
	ok(!rdma_connect(c, NULL), "UC: connect (the defaults)");
	ev = cmt_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	ok(ev != NULL, "UC: the listener gets the request");
	if (ev) {
		a = ev->id;
		rdma_ack_cm_event(ev);
	}
	if (!a)
		goto out;
	rc_attr(&ia, IBV_QPT_UC);
	ok(!rdma_create_qp(a, NULL, &ia), "UC: passive QP");
	rmr = rdma_reg_msgs(a, rbuf, sizeof(rbuf));
	memset(rbuf, 0, sizeof(rbuf));
	ok(rmr && !rdma_post_recv(a, NULL, rbuf, sizeof(rbuf), rmr),
	   "UC: a receive posted");
	memset(&cp, 0, sizeof(cp));
	ok(!rdma_accept(a, &cp), "UC: accept moves the QP");
	qq = qp_query(a->qp, &qa);
	ok(!qq && qa.qp_state == IBV_QPS_RTS && qa.dest_qp_num == c->qp->qp_num,
	   "UC: passive QP at RTS, connected to the client's");
	ev = cmt_expect(cch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	ok(ev != NULL, "UC: active side established");
	if (ev)
		rdma_ack_cm_event(ev);
	qq = qp_query(c->qp, &qa);
	ok(!qq && qa.qp_state == IBV_QPS_RTS, "UC: active QP at RTS");
	ev = cmt_expect(sch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	ok(ev != NULL, "UC: passive side established");
	if (ev)
		rdma_ack_cm_event(ev);
	memcpy(sbuf, msg, sizeof(msg));
	smr = rdma_reg_msgs(c, sbuf, sizeof(sbuf));
	ok(smr && !rdma_post_send(c, NULL, sbuf, sizeof(msg), smr, 0) &&
		   rdma_get_send_comp(c, &wc) > 0 && !wc.status,
	   "UC: SEND completes");
	ok(rdma_get_recv_comp(a, &wc) > 0 && !wc.status &&
		   wc.byte_len == sizeof(msg) &&
		   !memcmp(rbuf, msg, sizeof(msg)),
	   "UC: the message arrived");
	rdma_disconnect(c);
out:
	if (smr)
		rdma_dereg_mr(smr);
	if (rmr)
		rdma_dereg_mr(rmr);
	if (a) {
		rdma_destroy_qp(a);
		rdma_destroy_id(a);
	}
	if (c)
		rdma_destroy_ep(c);
	ok(!rdma_destroy_id(l), "UC: destroy listener");
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}

/* connected_pair -- a listener, a client with a QP that sent its REQ,
 * and the accepted id (with a QP): the REP is on its way */
static void connected_pair(struct rdma_event_channel *sch,
			   struct rdma_event_channel *cch,
			   struct rdma_cm_id **l, struct rdma_cm_id **c,
			   struct rdma_cm_id **a)
{
	struct ibv_qp_init_attr ia;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;

	*l = listener(sch);
	rc_attr(&ia, IBV_QPT_RC);
	if (rdma_create_id(cch, c, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(*c, cch, ntohs(rdma_get_src_port(*l))) ||
	    rdma_create_qp(*c, NULL, &ia))
		bail_out("client");
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (rdma_connect(*c, &cp))
		bail_out("connect");
	ev = cmt_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	if (!ev)
		bail_out("no request");
	*a = ev->id;
	rdma_ack_cm_event(ev);
	rc_attr(&ia, IBV_QPT_RC);
	if (rdma_create_qp(*a, NULL, &ia) || rdma_accept(*a, &cp))
		bail_out("accept");
}

/* teardown_pair -- destroy what connected_pair made */
static void teardown_pair(struct rdma_cm_id *l, struct rdma_cm_id *c,
			  struct rdma_cm_id *a)
{
	rdma_destroy_qp(a);
	rdma_destroy_id(a);
	rdma_destroy_qp(c);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
}

/*
 * test_connect_error -- the REP cannot be completed: the client's QP was
 * moved to ERR before the CONNECT_RESPONSE was taken, or the server
 * rejected after its REP
 */
static void test_connect_error(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct epoll_event ee = {.events = EPOLLIN | EPOLLET};
	struct rdma_cm_id *l, *c, *a;
	struct rdma_cm_event *ev;
	struct ibv_qp_attr qa;
	int qq;
	int r, e, ep;

	if (!sch || !cch)
		bail_out("channels");

	/* 1: the client's QP cannot move (ERR cannot go to INIT) */
	connected_pair(sch, cch, &l, &c, &a);
	struct pollfd p = {.fd = cch->fd, .events = POLLIN};
	ok(poll(&p, 1, 10000) == 1, "bad QP: the REP came");
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_ERR;
	ok(!ibv_modify_qp(c->qp, &qa, IBV_QP_STATE), "client QP to ERR");
	errno = 0;
	r = rdma_get_cm_event(cch, &ev);
	e = errno;
	ok(!r && ev->event == RDMA_CM_EVENT_CONNECT_ERROR && ev->status == -1,
	   "bad QP: CONNECT_ERROR, status -1 as librdmacm (%s, %d)",
	   r ? "none" : rdma_event_str(ev->event), r ? 0 : ev->status);
	ok(e == EINVAL, "bad QP: errno tells why (EINVAL: got %d)", e);
	if (!r)
		rdma_ack_cm_event(ev);
	rdma_destroy_qp(c);
	rdma_destroy_id(c);
	ev = cmt_expect(sch, RDMA_CM_EVENT_REJECTED, 10000);
	ok(ev && ev->status == 28, "bad QP: the server is rejected (28)");
	if (ev)
		rdma_ack_cm_event(ev);
	rdma_destroy_qp(a);
	rdma_destroy_id(a);
	rdma_destroy_id(l);

	/* 2: the server rejects after its REP; the client takes the REP
	 * after the REJ came (each event is an edge of the channel's fd) */
	connected_pair(sch, cch, &l, &c, &a);
	ep = epoll_create1(0);
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, cch->fd, &ee))
		bail_out("epoll");
	ok(epoll_wait(ep, &ee, 1, 10000) == 1, "rejected: the REP came");
	ok(!rdma_reject(a, NULL, 0), "rejected: the server rejects");
	ok(epoll_wait(ep, &ee, 1, 10000) == 1,
	   "rejected: the REJ came behind it");
	close(ep);
	r = rdma_get_cm_event(cch, &ev);
	ok(!r && ev->event == RDMA_CM_EVENT_CONNECT_ERROR && ev->status == -1,
	   "rejected: CONNECT_ERROR, status -1 (%s, %d)",
	   r ? "none" : rdma_event_str(ev->event), r ? 0 : ev->status);
	if (!r)
		rdma_ack_cm_event(ev);
	/* swallowed inside rdma_get_cm_event: a blocking call would wait
	 * for the next event, as librdmacm's would in the kernel */
	fcntl(cch->fd, F_SETFL, fcntl(cch->fd, F_GETFL) | O_NONBLOCK);
	usleep(300000);
	errno = 0;
	r = rdma_get_cm_event(cch, &ev);
	e = errno;
	ok(r == -1 && e == EAGAIN,
	   "rejected: the REJECTED after CONNECT_ERROR is not reported "
	   "(%s)",
	   r ? "EAGAIN" : rdma_event_str(ev->event));
	if (!r)
		rdma_ack_cm_event(ev);
	qq = qp_query(c->qp, &qa);
	ok(!qq && qa.qp_state == IBV_QPS_ERR,
	   "rejected: the client's QP is in ERR (%d)", qa.qp_state);
	teardown_pair(l, c, a);
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}

int main(void)
{
	setenv("SOFTRDMA_SHM_PREFIX", "cm-params", 0);
	test_clamp_no_qp();
	test_clamp_qp();
	test_uc();
	test_connect_error();
	return done_testing();
}
