/* SPDX-License-Identifier: MIT */
/* cm_data.c -- softrdma CM: QPs made by rdma_create_qp carry data */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "../tap.h"
#include "cm_util.h"

#define MSG_MAX	  4096
#define DEPTH	  16
#define RBUF_SIZE 65536

/* what the server tells the client in its accept private data */
struct srv_info {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
} __attribute__((packed));

static int nmsg;

/* msg_len -- the size of message i: 1 byte to MSG_MAX */
static size_t msg_len(int i)
{
	return (size_t)(1 + (i * 997) % MSG_MAX);
}

/* fill -- pattern for message i */
static void fill(uint8_t *p, size_t n, int i)
{
	size_t k;

	for (k = 0; k < n; k++)
		p[k] = (uint8_t)(i * 31 + k * 7 + (k >> 8));
}

/* check -- is p message i? */
static int check(const uint8_t *p, size_t n, int i)
{
	size_t k;

	for (k = 0; k < n; k++)
		if (p[k] != (uint8_t)(i * 31 + k * 7 + (k >> 8)))
			return 0;
	return 1;
}

/* qp_state -- current state of a QP */
static int qp_state(struct ibv_qp *qp, struct ibv_qp_attr *a)
{
	struct ibv_qp_init_attr ia;

	memset(a, 0, sizeof(*a));
	if (ibv_query_qp(qp, a,
			 IBV_QP_STATE | IBV_QP_DEST_QPN | IBV_QP_PATH_MTU, &ia))
		return -1;
	return a->qp_state;
}

/* init_attr -- QP sizes used by both sides */
static void init_attr(struct ibv_qp_init_attr *ia)
{
	memset(ia, 0, sizeof(*ia));
	ia->qp_type = IBV_QPT_RC;
	ia->cap.max_send_wr = DEPTH;
	ia->cap.max_recv_wr = DEPTH + 1;
	ia->cap.max_send_sge = 1;
	ia->cap.max_recv_sge = 1;
	ia->sq_sig_all = 1;
}

/* qp_id -- an id resolved to 127.0.0.1:port, with a QP (init_attr) */
static struct rdma_cm_id *qp_id(struct rdma_event_channel *ch, uint16_t port)
{
	struct ibv_qp_init_attr ia;
	struct rdma_cm_id *id;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(id, ch, port))
		bail_out("resolve");
	init_attr(&ia);
	if (rdma_create_qp(id, NULL, &ia))
		bail_out("create_qp");
	return id;
}

/* server_main -- echo every message, expose a buffer for RDMA */
static int server_main(int pfd)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = cmt_sin(0);
	struct ibv_qp_init_attr ia;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c;
	struct ibv_qp_attr qa;
	struct srv_info info;
	struct ibv_mr *mr, *rmr;
	struct ibv_wc wc;
	uint32_t client_qpn;
	uint8_t *bufs, *rbuf;
	int i, n = 0;

	if (!ch || rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 1))
		return 1;
	cmt_write_u16(pfd, ntohs(rdma_get_src_port(l)));
	ev = cmt_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 20000);
	if (!ev)
		return 1;
	c = ev->id;
	client_qpn = ev->param.conn.qp_num;
	rdma_ack_cm_event(ev);

	init_attr(&ia);
	SCHECK(!rdma_create_qp(c, NULL, &ia), "create_qp on the child");
	if (!c->qp)
		return 1;
	SCHECK(c->recv_cq && c->recv_cq->cq_context == c &&
		       c->send_cq->cq_context == c,
	       "CQs made by rdma_create_qp have cq_context = id");
	SCHECK(qp_state(c->qp, &qa) == IBV_QPS_INIT, "QP is INIT after create");

	bufs = calloc(DEPTH + 1, MSG_MAX);
	rbuf = calloc(1, RBUF_SIZE);
	mr = rdma_reg_msgs(c, bufs, (size_t)(DEPTH + 1) * MSG_MAX);
	rmr = ibv_reg_mr(c->pd, rbuf, RBUF_SIZE,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_READ);
	if (!mr || !rmr)
		return 1;
	fill(rbuf, RBUF_SIZE, 12345);
	for (i = 0; i < DEPTH; i++)
		SCHECK(!rdma_post_recv(c, (void *)(uintptr_t)i,
				       bufs + (size_t)i * MSG_MAX, MSG_MAX, mr),
		       "post_recv");

	info.addr = (uint64_t)(uintptr_t)rbuf;
	info.rkey = rmr->rkey;
	info.len = RBUF_SIZE;
	memset(&cp, 0, sizeof(cp));
	cp.private_data = &info;
	cp.private_data_len = sizeof(info);
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.rnr_retry_count = 7;
	SCHECK(!rdma_accept(c, &cp), "accept");
	SCHECK(qp_state(c->qp, &qa) == IBV_QPS_RTS &&
		       qa.dest_qp_num == client_qpn,
	       "accept moved the QP to RTS, connected to the client's QPN");
	ev = cmt_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	SCHECK(ev, "established");
	if (ev)
		rdma_ack_cm_event(ev);

	/* echo nmsg messages */
	for (i = 0; i < nmsg; i++) {
		int slot;

		if (rdma_get_recv_comp(c, &wc) <= 0 || wc.status) {
			SCHECK(0, "recv completion %d (status %d)", i,
			       wc.status);
			break;
		}
		slot = (int)wc.wr_id;
		if (wc.byte_len != msg_len(i) ||
		    !check(bufs + (size_t)slot * MSG_MAX, wc.byte_len, i))
			n++;
		memcpy(bufs + (size_t)DEPTH * MSG_MAX,
		       bufs + (size_t)slot * MSG_MAX, wc.byte_len);
		SCHECK(!rdma_post_recv(c, (void *)(uintptr_t)slot,
				       bufs + (size_t)slot * MSG_MAX, MSG_MAX,
				       mr),
		       "repost");
		SCHECK(!rdma_post_send(c, NULL, bufs + (size_t)DEPTH * MSG_MAX,
				       wc.byte_len, mr, 0),
		       "echo");
		if (rdma_get_send_comp(c, &wc) <= 0 || wc.status)
			SCHECK(0, "send completion (status %d)", wc.status);
	}
	SCHECK(!n, "%d corrupt messages", n);
	/* RC ordering: the SEND that follows the WRITE sees it landed */
	if (rdma_get_recv_comp(c, &wc) <= 0 || wc.status)
		SCHECK(0, "final recv (status %d)", wc.status);
	SCHECK(check(rbuf, RBUF_SIZE / 2, 777), "client's RDMA write landed");

	ev = cmt_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 20000);
	SCHECK(ev, "disconnected by the client");
	if (ev)
		rdma_ack_cm_event(ev);
	SCHECK(!rdma_disconnect(c), "disconnect");
	SCHECK(qp_state(c->qp, &qa) == IBV_QPS_ERR, "QP in ERR");
	n = 0;
	while (n < DEPTH - 1 && rdma_get_recv_comp(c, &wc) > 0 &&
	       wc.status == IBV_WC_WR_FLUSH_ERR)
		n++;
	SCHECK(n == DEPTH - 1, "posted receives flushed (%d of %d)", n,
	       DEPTH - 1);
	rdma_dereg_mr(mr);
	rdma_dereg_mr(rmr);
	rdma_destroy_qp(c);
	SCHECK(!rdma_destroy_id(c), "destroy child");
	ev = cmt_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 20000);
	SCHECK(ev, "second request");
	if (ev) {
		c = ev->id;
		rdma_ack_cm_event(ev);
		SCHECK(!rdma_reject(c, NULL, 0), "reject it");
		SCHECK(!rdma_destroy_id(c), "destroy rejected child");
	}
	SCHECK(!rdma_destroy_id(l), "destroy listener");
	rdma_destroy_event_channel(ch);
	free(bufs);
	free(rbuf);
	return srv_fails ? 1 : 0;
}

/* run_srq -- rdma_create_srq: the id's QP then receives through it */
static void run_srq(uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibv_srq_init_attr sa;
	struct ibv_qp_init_attr ia;
	struct rdma_cm_id *id;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(id, ch, port))
		bail_out("resolve");
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 8;
	sa.attr.max_sge = 1;
	ok(!rdma_create_srq(id, NULL, &sa) && id->srq && id->pd,
	   "rdma_create_srq on the id (its PD)");
	init_attr(&ia);
	ok(!rdma_create_qp(id, NULL, &ia) && id->qp && id->qp->srq == id->srq,
	   "rdma_create_qp takes the id's SRQ");
	rdma_destroy_qp(id);
	rdma_destroy_srq(id);
	ok(!id->srq && !id->qp, "destroy_qp, destroy_srq");
	ok(!rdma_destroy_id(id), "destroy");
	rdma_destroy_event_channel(ch);
}

/* run_client -- connect, send, verify echoes, RDMA write and read */
static void run_client(uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibv_qp_init_attr ia;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct srv_info info;
	struct ibv_qp_attr qa;
	struct rdma_cm_id *id;
	struct ibv_mr *mr, *lmr;
	struct ibv_wc wc;
	uint8_t *sbuf, *rbufs, *lbuf;
	uint32_t server_qpn = 0;
	int i, bad = 0, fails = 0, st;

	memset(&info, 0, sizeof(info));
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(id, ch, port))
		bail_out("resolve");
	init_attr(&ia);
	ok(!rdma_create_qp(id, NULL, &ia), "rdma_create_qp (id's PD, own CQs)");
	if (!id->qp)
		bail_out("no QP");
	ok(id->send_cq && id->recv_cq && id->send_cq_channel &&
		   id->recv_cq_channel && id->recv_cq->cq_context == id,
	   "CQs and channels on the id, cq_context = id");
	is_int(qp_state(id->qp, &qa), IBV_QPS_INIT, "QP INIT after create");

	sbuf = calloc(1, MSG_MAX);
	rbufs = calloc(DEPTH + 1, MSG_MAX);
	lbuf = calloc(1, RBUF_SIZE);
	mr = rdma_reg_msgs(id, rbufs, (size_t)(DEPTH + 1) * MSG_MAX);
	lmr = ibv_reg_mr(id->pd, lbuf, RBUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (!mr || !lmr)
		bail_out("reg_mr");
	for (i = 0; i < DEPTH; i++)
		rdma_post_recv(id, (void *)(uintptr_t)i,
			       rbufs + (size_t)i * MSG_MAX, MSG_MAX, mr);

	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	{
		uint8_t t = 14;

		ok(!rdma_set_option(id, RDMA_OPTION_ID,
				    RDMA_OPTION_ID_ACK_TIMEOUT, &t, 1),
		   "ACK timeout option 14");
	}
	ok(!rdma_connect(id, &cp), "connect");
	ev = cmt_wait(ch, 10000);
	ok(ev && ev->event == RDMA_CM_EVENT_ESTABLISHED,
	   "with a QP: ESTABLISHED (the CM moved the QP)");
	if (ev) {
		server_qpn = ev->param.conn.qp_num;
		if (ev->param.conn.private_data)
			memcpy(&info, ev->param.conn.private_data,
			       sizeof(info));
		rdma_ack_cm_event(ev);
	}
	ok(qp_state(id->qp, &qa) == IBV_QPS_RTS && qa.dest_qp_num == server_qpn,
	   "QP in RTS, dest_qp_num = the server's QPN");
	is_int(qa.path_mtu, IBV_MTU_4096, "path MTU 4096");
	{
		struct ibv_qp_init_attr qia;
		struct ibv_qp_attr a;

		memset(&a, 0, sizeof(a));
		ibv_query_qp(id->qp, &a,
			     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY |
				     IBV_QP_MAX_QP_RD_ATOMIC |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_AV |
				     IBV_QP_ACCESS_FLAGS,
			     &qia);
		ok(a.timeout == 14 && a.retry_cnt == 7 && a.rnr_retry == 7,
		   "RTS attributes: timeout %d (option), retry %d, rnr %d",
		   a.timeout, a.retry_cnt, a.rnr_retry);
		ok(a.max_rd_atomic == 1 && a.max_dest_rd_atomic == 1,
		   "rd atomic depths from the REP (%d %d)", a.max_rd_atomic,
		   a.max_dest_rd_atomic);
		ok(a.ah_attr.is_global && a.ah_attr.grh.dgid.raw[10] == 0xff &&
			   a.ah_attr.grh.dgid.raw[12] == 127,
		   "AV: GRH to the peer's IPv4-mapped GID");
		{
			union ibv_gid g;

			memset(&g, 0, sizeof(g));
			ibv_query_gid(id->verbs, 1, a.ah_attr.grh.sgid_index,
				      &g);
			ok(!memcmp(&g, &id->route.addr.addr.ibaddr.sgid,
				   sizeof(g)) &&
				   g.raw[12] == 127,
			   "AV: sgid_index %d is ::ffff:127.0.0.1",
			   a.ah_attr.grh.sgid_index);
		}
		ok((a.qp_access_flags & IBV_ACCESS_REMOTE_WRITE) &&
			   (a.qp_access_flags & IBV_ACCESS_REMOTE_READ),
		   "remote write and read allowed (responder resources)");
	}

	for (i = 0; i < nmsg; i++) {
		size_t len = msg_len(i);
		int slot;

		fill(sbuf, len, i);
		memcpy(rbufs + (size_t)DEPTH * MSG_MAX, sbuf, len);
		if (rdma_post_send(id, NULL, rbufs + (size_t)DEPTH * MSG_MAX,
				   len, mr, 0) ||
		    rdma_get_send_comp(id, &wc) <= 0 || wc.status) {
			fails++;
			break;
		}
		if (rdma_get_recv_comp(id, &wc) <= 0 || wc.status) {
			fails++;
			break;
		}
		slot = (int)wc.wr_id;
		if (wc.byte_len != len ||
		    !check(rbufs + (size_t)slot * MSG_MAX, len, i))
			bad++;
		rdma_post_recv(id, (void *)(uintptr_t)slot,
			       rbufs + (size_t)slot * MSG_MAX, MSG_MAX, mr);
	}
	ok(!fails, "%d messages sent and echoed", nmsg);
	is_int(bad, 0, "echoes intact (sizes 1..4096, contents)");

	/* one-sided: read the server's buffer, then write half of it */
	ok(info.rkey && info.len == RBUF_SIZE, "server's buffer in the REP");
	ok(!rdma_post_read(id, NULL, lbuf, RBUF_SIZE, lmr, 0, info.addr,
			   info.rkey) &&
		   rdma_get_send_comp(id, &wc) > 0 && !wc.status,
	   "RDMA read");
	ok(check(lbuf, RBUF_SIZE, 12345), "read data intact");
	fill(lbuf, RBUF_SIZE / 2, 777);
	ok(!rdma_post_write(id, NULL, lbuf, RBUF_SIZE / 2, lmr, 0, info.addr,
			    info.rkey) &&
		   rdma_get_send_comp(id, &wc) > 0 && !wc.status,
	   "RDMA write");
	memset(lbuf, 0, RBUF_SIZE);
	ok(!rdma_post_read(id, NULL, lbuf, RBUF_SIZE / 2, lmr, 0, info.addr,
			   info.rkey) &&
		   rdma_get_send_comp(id, &wc) > 0 && !wc.status,
	   "RDMA read back");
	ok(check(lbuf, RBUF_SIZE / 2, 777), "the write landed");
	ok(!rdma_post_send(id, NULL, rbufs + (size_t)DEPTH * MSG_MAX, 1, mr,
			   0) &&
		   rdma_get_send_comp(id, &wc) > 0 && !wc.status,
	   "a SEND after the WRITE (the server checks its buffer then)");

	ok(!rdma_disconnect(id), "disconnect");
	is_int(qp_state(id->qp, &qa), IBV_QPS_ERR,
	       "disconnect moved QP to ERR");
	ev = cmt_wait(ch, 5000);
	ok(ev && ev->event == RDMA_CM_EVENT_DISCONNECTED, "DISCONNECTED");
	if (ev)
		rdma_ack_cm_event(ev);
	for (i = 0; i < DEPTH; i++)
		if (rdma_get_recv_comp(id, &wc) <= 0 ||
		    wc.status != IBV_WC_WR_FLUSH_ERR)
			break;
	is_int(i, DEPTH, "posted receives flushed");
	rdma_dereg_mr(mr);
	rdma_dereg_mr(lmr);
	rdma_destroy_qp(id);
	ok(id->qp == NULL && !id->send_cq && !id->recv_cq,
	   "destroy_qp took the CQs along");
	ok(!rdma_destroy_id(id), "destroy");

	/* a rejected connect flushes the QP (librdmacm does, on REJECTED) */
	id = qp_id(ch, port);
	ok(!rdma_connect(id, &cp), "connect (to be rejected)");
	ev = cmt_wait(ch, 10000);
	ok(ev && ev->event == RDMA_CM_EVENT_REJECTED, "REJECTED");
	if (ev)
		rdma_ack_cm_event(ev);
	is_int(qp_state(id->qp, &qa), IBV_QPS_ERR, "QP in ERR after REJECTED");
	rdma_destroy_qp(id);
	ok(!rdma_destroy_id(id), "destroy");
	rdma_destroy_event_channel(ch);
	free(sbuf);
	free(rbufs);
	free(lbuf);
	(void)st;
}

/* victim_main -- accepts with a QP, then waits to be killed */
static int victim_main(int pfd)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibv_qp_init_attr ia;
	struct rdma_cm_id *c;

	c = cmt_listen_one(ch, pfd);
	if (!c)
		return 1;
	init_attr(&ia);
	if (rdma_create_qp(c, NULL, &ia) || rdma_accept(c, NULL))
		return 1;
	for (;;)
		pause();
}

/* flushed -- how many receive completions with FLUSH_ERR come at once */
static int flushed(struct rdma_cm_id *id)
{
	struct ibv_wc wc;
	int n = 0;

	while (ibv_poll_cq(id->recv_cq, 1, &wc) == 1 &&
	       wc.status == IBV_WC_WR_FLUSH_ERR)
		n++;
	return n;
}

/*
 * run_kill -- the peer process dies: DISCONNECTED, as its kernel's DREQ,
 * and our QP stays as it was (librdmacm modifies none on DISCONNECTED):
 * the posted receives wait; a send fails with RETRY_EXC_ERR once the
 * transport timeout finds no peer QP, which moves the QP to ERR and
 * flushes them, as on an HCA.
 */
static void run_kill(pid_t victim, uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct ibv_qp_attr qa;
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	uint8_t *buf;
	long long t0;
	int i, st;

	id = qp_id(ch, port);
	buf = calloc(DEPTH, 64);
	mr = rdma_reg_msgs(id, buf, (size_t)DEPTH * 64);
	for (i = 0; i < DEPTH; i++)
		rdma_post_recv(id, NULL, buf + i * 64, 64, mr);
	memset(&cp, 0, sizeof(cp));
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	ok(!rdma_connect(id, &cp), "connect to the victim");
	ev = cmt_wait(ch, 10000);
	ok(ev && ev->event == RDMA_CM_EVENT_ESTABLISHED, "ESTABLISHED");
	if (ev)
		rdma_ack_cm_event(ev);
	t0 = cmt_now_ms();
	kill(victim, SIGKILL);
	ev = cmt_wait(ch, 3000);
	ok(ev && ev->event == RDMA_CM_EVENT_DISCONNECTED,
	   "peer SIGKILLed: DISCONNECTED (%lld ms)", cmt_now_ms() - t0);
	if (ev)
		rdma_ack_cm_event(ev);
	is_int(qp_state(id->qp, &qa), IBV_QPS_RTS,
	       "the QP is still in RTS once the event is taken");
	is_int(ibv_poll_cq(id->recv_cq, 1, &wc), 0,
	       "no receive completes: they stay posted");
	t0 = cmt_now_ms();
	st = -1;
	if (!rdma_post_send(id, NULL, buf, 8, mr, 0))
		while (cmt_now_ms() - t0 < 5000) {
			st = ibv_poll_cq(id->send_cq, 1, &wc);
			if (st)
				break;
			usleep(1000);
		}
	ok(st == 1 && wc.status == IBV_WC_RETRY_EXC_ERR,
	   "a send to the dead peer: RETRY_EXC_ERR (%lld ms, status %d)",
	   cmt_now_ms() - t0, st == 1 ? (int)wc.status : -1);
	is_int(qp_state(id->qp, &qa), IBV_QPS_ERR, "which moved the QP to ERR");
	is_int(flushed(id), DEPTH, "and flushed the posted receives");
	ok(!rdma_disconnect(id), "disconnect after that: 0");
	waitpid(victim, &st, 0);
	rdma_dereg_mr(mr);
	rdma_destroy_qp(id);
	ok(!rdma_destroy_id(id), "destroy");
	rdma_destroy_event_channel(ch);
	free(buf);
}

/* post_recvs -- DEPTH receives on the id's QP */
static void post_recvs(struct rdma_cm_id *id, uint8_t *buf, struct ibv_mr *mr)
{
	int i;

	for (i = 0; i < DEPTH; i++)
		rdma_post_recv(id, NULL, buf + i * 64, 64, mr);
}

/* take_request -- the next CONNECT_REQUEST on ch (5 s at most): its id
 * with a QP and DEPTH receives of 64 bytes posted from buf (*mr), or NULL
 * when none came */
static struct rdma_cm_id *take_request(struct rdma_event_channel *ch,
				       uint8_t *buf, struct ibv_mr **mr)
{
	struct rdma_cm_event *ev =
		cmt_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
	struct ibv_qp_init_attr ia;
	struct rdma_cm_id *c;

	if (!ev)
		return NULL;
	c = ev->id;
	rdma_ack_cm_event(ev);
	init_attr(&ia);
	if (rdma_create_qp(c, NULL, &ia))
		bail_out("create_qp");
	*mr = rdma_reg_msgs(c, buf, (size_t)DEPTH * 64);
	post_recvs(c, buf, *mr);
	return c;
}

/*
 * run_early_disconnect -- rdma_disconnect before the connection is up.
 * librdmacm's rdma_disconnect first moves the QP to ERR (ucma_shutdown)
 * whatever the state; the kernel's rdma_disconnect then fails with EINVAL
 * when the id has no IB CM id yet (no connect, not a request), else
 * modifies the QP to ERR again and tries a DREQ, then a DREP, ignoring
 * their failure: 0.  So the posted receives flush.
 */
static void run_early_disconnect(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *a, *c = NULL;
	struct ibv_mr *mr, *cmr = NULL;
	struct ibv_qp_attr qa;
	uint8_t *buf, *cbuf;
	int hold;

	buf = calloc(DEPTH, 64);
	cbuf = calloc(DEPTH, 64);
	a = qp_id(ch, cmt_free_port(&hold));
	close(hold);
	mr = rdma_reg_msgs(a, buf, (size_t)DEPTH * 64);
	post_recvs(a, buf, mr);
	errno = 0;
	ok(rdma_disconnect(a) == -1 && errno == EINVAL,
	   "disconnect before connect: EINVAL");
	is_int(qp_state(a->qp, &qa), IBV_QPS_ERR,
	       "... but librdmacm moved the QP to ERR first");
	is_int(flushed(a), DEPTH, "its receives flushed");
	rdma_dereg_mr(mr);
	rdma_destroy_qp(a);
	rdma_destroy_id(a);

	if (rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 1))
		bail_out("listener");
	ok(!rdma_disconnect(l),
	   "disconnect on a listener bound to a device: 0");
	a = qp_id(ch, ntohs(rdma_get_src_port(l)));
	mr = rdma_reg_msgs(a, buf, (size_t)DEPTH * 64);
	post_recvs(a, buf, mr);
	memset(&cp, 0, sizeof(cp));
	ok(!rdma_connect(a, &cp), "connect");
	ok(!rdma_disconnect(a), "disconnect while connecting: 0");
	is_int(qp_state(a->qp, &qa), IBV_QPS_ERR, "the active QP is in ERR");
	is_int(flushed(a), DEPTH, "its receives flushed");

	c = take_request(ch, cbuf, &cmr);
	ok(c != NULL, "the request still comes");
	if (c) {
		ok(!rdma_disconnect(c), "disconnect a request: 0");
		is_int(qp_state(c->qp, &qa), IBV_QPS_ERR,
		       "the passive QP is in ERR");
		is_int(flushed(c), DEPTH, "its receives flushed");
		ok(!rdma_reject(c, NULL, 0), "it can still be rejected");
	}
	ev = cmt_wait(ch, 5000);
	ok(ev && ev->event == RDMA_CM_EVENT_REJECTED && ev->id == a,
	   "the active side gets REJECTED");
	if (ev)
		rdma_ack_cm_event(ev);
	if (c) {
		rdma_dereg_mr(cmr);
		rdma_destroy_qp(c);
		rdma_destroy_id(c);
	}
	rdma_dereg_mr(mr);
	rdma_destroy_qp(a);
	ok(!rdma_destroy_id(a), "destroy");
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	free(buf);
	free(cbuf);
}

/*
 * run_rep_timeout -- an accepted request whose RTU never comes (lost:
 * SOFTRDMA_TEST_LOSE_RTU=1, this process is both sides): the passive id
 * gets UNREACHABLE (-ETIMEDOUT) at the REP's timeout, as the IB CM's
 * REP_ERROR, and its QP stays as rdma_accept left it: librdmacm moves a
 * QP to ERR on REJECTED only, so the posted receives stay until the
 * application flushes or destroys it.
 */
static void run_rep_timeout(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *a, *c = NULL;
	struct ibv_mr *cmr = NULL;
	struct ibv_qp_attr qa;
	uint8_t *cbuf = calloc(DEPTH, 64);
	long long end;
	int got = 0, st = 0;

	if (rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 1))
		bail_out("listener");
	a = qp_id(ch, ntohs(rdma_get_src_port(l)));
	memset(&cp, 0, sizeof(cp));
	setenv("SOFTRDMA_TEST_LOSE_RTU", "1", 1);
	setenv("SOFTRDMA_CM_TIMEOUT_MS", "300", 1);
	ok(!rdma_connect(a, &cp), "connect (its RTU will be lost)");
	c = take_request(ch, cbuf, &cmr);
	if (c)
		ok(!rdma_accept(c, NULL), "accept");
	/* the active side's ESTABLISHED, then the passive one's timeout */
	end = cmt_now_ms() + 5000;
	while (c && !got && cmt_now_ms() < end) {
		ev = cmt_wait(ch, 500);
		if (!ev)
			continue;
		if (ev->id == c) {
			got = ev->event;
			st = ev->status;
		}
		rdma_ack_cm_event(ev);
	}
	unsetenv("SOFTRDMA_TEST_LOSE_RTU");
	unsetenv("SOFTRDMA_CM_TIMEOUT_MS");
	ok(got == RDMA_CM_EVENT_UNREACHABLE && st == -ETIMEDOUT,
	   "no RTU: the passive side's UNREACHABLE, -ETIMEDOUT (%s, %d)",
	   got ? rdma_event_str((enum rdma_cm_event_type)got) : "none", st);
	if (c) {
		is_int(qp_state(c->qp, &qa), IBV_QPS_RTS,
		       "its QP still in RTS, as rdma_accept left it");
		is_int(flushed(c), 0, "its receives still posted");
		rdma_dereg_mr(cmr);
		rdma_destroy_qp(c);
		rdma_destroy_id(c);
	}
	rdma_destroy_qp(a);
	rdma_destroy_id(a);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	free(cbuf);
}

int main(void)
{
	uint16_t port, vport;
	pid_t pid, vpid;
	int sfd, vfd;

	nmsg = tap_small() ? 50 : 1000;
	alarm(120);
	/* fork before this process touches the library */
	pid = cmt_spawn(server_main, &sfd);
	vpid = cmt_spawn(victim_main, &vfd);
	port = cmt_read_u16(sfd);
	vport = cmt_read_u16(vfd);
	if (!port || !vport)
		bail_out("server did not start");
	run_srq(port);
	run_client(port);
	cmt_reap(pid, "server");
	run_kill(vpid, vport);
	run_early_disconnect();
	run_rep_timeout();
	return done_testing();
}
