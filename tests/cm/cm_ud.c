/* SPDX-License-Identifier: MIT */
/* cm_ud.c -- softrdma CM: UD ids (RDMA_PS_UDP) resolve through SIDR */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "../tap.h"
#include "cm_util.h"

#define SERVER_QPN 0x777

/* server_main -- answer one SIDR request, reject the next */
static int server_main(int pfd)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c;
	uint8_t rep[137];

	if (!ch || rdma_create_id(ch, &l, NULL, RDMA_PS_UDP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 4))
		return 1;
	SCHECK(l->qp_type == IBV_QPT_UD, "PS_UDP ids are UD");
	cmt_write_u16(pfd, ntohs(rdma_get_src_port(l)));

	ev = cmt_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	SCHECK(ev, "request");
	if (!ev)
		return 1;
	c = ev->id;
	SCHECK(ev->param.ud.private_data_len == 180 &&
		       !memcmp(ev->param.ud.private_data, "ud-hello", 8),
	       "SIDR REQ private data: 180 bytes on PS_UDP (got %d)",
	       ev->param.ud.private_data_len);
	rdma_ack_cm_event(ev);
	memset(&cp, 0, sizeof(cp));
	memset(rep, 'r', sizeof(rep));
	cp.private_data = rep;
	/* a SIDR REP of 137 bytes would reject the request, as the
	 * kernel's rdma_accept does (tests/cm/cm_rare) */
	cp.private_data_len = 136;
	cp.qp_num = SERVER_QPN;
	SCHECK(!rdma_accept(c, &cp), "accept (SIDR REP)");
	SCHECK(!rdma_destroy_id(c), "destroy");

	/* the next event is the next request: no ESTABLISHED for a SIDR */
	ev = cmt_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	SCHECK(ev, "second request, and no ESTABLISHED before it");
	if (!ev)
		return 1;
	c = ev->id;
	rdma_ack_cm_event(ev);
	SCHECK(!rdma_reject(c, "no-ud", 5), "reject");
	SCHECK(!rdma_destroy_id(c), "destroy");
	SCHECK(!rdma_destroy_id(l), "destroy listener");
	rdma_destroy_event_channel(ch);
	return srv_fails ? 1 : 0;
}

/* ud_id -- a resolved PS_UDP id on ch */
static struct rdma_cm_id *ud_id(struct rdma_event_channel *ch, uint16_t port)
{
	struct rdma_cm_id *id;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) ||
	    cmt_resolve(id, ch, port))
		bail_out("resolve");
	return id;
}

int main(void)
{
	struct rdma_event_channel *ch;
	struct ibv_qp_init_attr ia;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	int hold;
	struct ibv_qp_init_attr qia;
	struct ibv_qp_attr qa;
	struct rdma_cm_id *id;
	uint8_t big[181];
	uint16_t port;
	pid_t pid;
	int sfd;

	alarm(60);
	pid = cmt_spawn(server_main, &sfd);
	port = cmt_read_u16(sfd);
	if (!port)
		bail_out("server did not start");
	ch = rdma_create_event_channel();

	id = ud_id(ch, port);
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ok(!rdma_create_qp(id, NULL, &ia), "UD QP on a PS_UDP id");
	memset(&qa, 0, sizeof(qa));
	ok(id->qp &&
		   !ibv_query_qp(id->qp, &qa, IBV_QP_STATE | IBV_QP_QKEY,
				 &qia) &&
		   qa.qp_state == IBV_QPS_RTS && qa.qkey == RDMA_UDP_QKEY,
	   "rdma_create_qp moved it to RTS with RDMA_UDP_QKEY");
	memset(&cp, 0, sizeof(cp));
	memset(big, 0, sizeof(big));
	cp.private_data = big;
	cp.private_data_len = 181;
	errno = 0;
	ok(rdma_connect(id, &cp) == -1 && errno == EINVAL,
	   "SIDR REQ with 181 bytes on PS_UDP: EINVAL");
	cp.private_data = "ud-hello";
	cp.private_data_len = 8;
	ok(!rdma_connect(id, &cp), "connect (SIDR REQ)");
	ev = cmt_wait(ch, 10000);
	ok(ev && ev->event == RDMA_CM_EVENT_ESTABLISHED && !ev->status,
	   "ESTABLISHED");
	if (ev) {
		is_int(ev->param.ud.qp_num, SERVER_QPN, "remote QPN");
		is_int(ev->param.ud.qkey, RDMA_UDP_QKEY, "Q_Key");
		ok(ev->param.ud.ah_attr.is_global &&
			   ev->param.ud.ah_attr.grh.dgid.raw[10] == 0xff &&
			   ev->param.ud.ah_attr.grh.dgid.raw[12] == 127 &&
			   ev->param.ud.ah_attr.port_num == 1,
		   "AH attributes: GRH to ::ffff:127.0.0.1, port 1");
		ok(ev->param.ud.private_data_len == 136 &&
			   ((const uint8_t *)ev->param.ud.private_data)[135] ==
				   'r',
		   "SIDR REP private data: 136 bytes");
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_qp(id);
	ok(!rdma_destroy_id(id), "destroy");

	id = ud_id(ch, port);
	memset(&cp, 0, sizeof(cp));
	ok(!rdma_connect(id, &cp), "connect (to be rejected)");
	ev = cmt_wait(ch, 10000);
	ok(ev && ev->event == RDMA_CM_EVENT_UNREACHABLE && ev->status == 2 &&
		   !memcmp(ev->param.ud.private_data, "no-ud", 5),
	   "rejected SIDR: UNREACHABLE, status 2 (IB_SIDR_REJECT), data");
	if (ev)
		rdma_ack_cm_event(ev);
	ok(!rdma_destroy_id(id), "destroy");
	cmt_reap(pid, "server");

	id = ud_id(ch, cmt_free_port(&hold));
	ok(!rdma_connect(id, &cp), "connect to nobody");
	ev = cmt_wait(ch, 10000);
	ok(ev && ev->event == RDMA_CM_EVENT_UNREACHABLE && ev->status == 1,
	   "UNREACHABLE, status 1 (IB_SIDR_UNSUPPORTED)");
	if (ev)
		rdma_ack_cm_event(ev);
	close(hold);
	ok(!rdma_destroy_id(id), "destroy");
	rdma_destroy_event_channel(ch);
	return done_testing();
}
