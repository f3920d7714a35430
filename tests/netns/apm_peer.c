/* SPDX-License-Identifier: MIT */
/*
 * apm_peer.c -- the seeds' APM example (rdma_cm's synchronous endpoint
 * calls and verbs, no rdmamsg) between two hosts of the namespace fabric
 * in softrdma's InfiniBand mode (SOFTRDMA_LINK=ib, SOFTRDMA_NET=1), run
 * by tests/netns/apm-hosts.sh:
 *
 *   apm_peer server ADDR PORT     echoes numbered messages until "stop"
 *   apm_peer client ADDR PORT     TAP on stdout
 *
 * Each side finds its other ACTIVE port (the one its QP is not on) and
 * sends that port's LID in the connection's private data; once
 * connected, it loads the alternate path (its other port to the peer's
 * LID) and re-arms it (IBV_MIG_REARM).  Every IBV_EVENT_PATH_MIG makes it
 * load the old primary as the new alternate and re-arm, as the seeds'
 * async thread would be extended to.  The client exchanges numbered
 * messages (each echoed, checked: once, in order), migrates by hand
 * (ibv_modify_qp to IBV_MIG_MIGRATED: PATH_MIG on the client, and on the
 * server when the client's packets come on its alternate path), then
 * says "# cut" and goes on exchanging while the caller pulls the cables
 * of the rail now in use: both sides migrate back by themselves (the
 * port's link goes down).  The server reports its PATH_MIG count in the
 * echo of the stop message.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tap.h"

#define DEADLINE 120000.0 /* ms: a wait that must end */
#define STOP	 0xffffffffu
#define PHASE	 20 /* exchanges per phase */

struct peer {
	struct rdma_cm_id *id, *listen;
	struct ibv_mr *smr, *rmr;
	uint32_t sbuf[2], rbuf[2];
	uint8_t alt_port;
	uint16_t my_alt_lid, peer_alt_lid;
	int migs, mig_errs, server;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what)
{
	if (getenv("APM_PEER_SERVER")) {
		fprintf(stderr, "apm_peer: %s: %s\n", what, strerror(errno));
		exit(1);
	}
	bail_out("%s: %s", what, strerror(errno));
}

/* alt_port_details -- the seeds' get_alt_port_details: an ACTIVE port
 * other than the QP's, and its LID */
static int alt_port_details(struct peer *p)
{
	struct ibv_device_attr da;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	int i;

	if (ibv_query_device(p->id->verbs, &da) ||
	    !(da.device_cap_flags & IBV_DEVICE_AUTO_PATH_MIG) ||
	    ibv_query_qp(p->id->qp, &qa, IBV_QP_PORT, &qi))
		return -1;
	for (i = 1; i <= da.phys_port_cnt; i++) {
		struct ibv_port_attr pa;

		if (i == qa.port_num ||
		    ibv_query_port(p->id->verbs, (uint8_t)i, &pa) ||
		    pa.state != IBV_PORT_ACTIVE)
			continue;
		p->alt_port = (uint8_t)i;
		p->my_alt_lid = pa.lid;
		return 0;
	}
	return -1;
}

/* load_alt -- the seeds' load_alt_path: the primary's AV towards the
 * peer's alternate LID from our other port, REARM; port/dlid override */
static int load_alt(struct peer *p, uint8_t port, uint16_t dlid)
{
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;

	if (ibv_query_qp(p->id->qp, &qa,
			 IBV_QP_AV | IBV_QP_PORT | IBV_QP_PKEY_INDEX |
				 IBV_QP_TIMEOUT,
			 &qi))
		return -1;
	qa.alt_ah_attr = qa.ah_attr;
	qa.alt_ah_attr.is_global = 0;
	qa.alt_ah_attr.dlid = dlid;
	qa.alt_ah_attr.port_num = port;
	qa.alt_port_num = port;
	qa.alt_pkey_index = qa.pkey_index;
	qa.alt_timeout = qa.timeout;
	qa.path_mig_state = IBV_MIG_REARM;
	return ibv_modify_qp(p->id->qp, &qa,
			     IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE);
}

/* events -- the async events waiting: PATH_MIG re-arms the old primary */
static void events(struct peer *p)
{
	struct ibv_async_event ev;

	while (!ibv_get_async_event(p->id->verbs, &ev)) {
		if (ev.event_type == IBV_EVENT_PATH_MIG) {
			struct ibv_qp_attr qa;
			struct ibv_qp_init_attr qi;

			p->migs++;
			/* the old primary: its port is the other one, its
			 * DLID the one the alternate had before */
			if (!ibv_query_qp(p->id->qp, &qa,
					  IBV_QP_ALT_PATH |
						  IBV_QP_PATH_MIG_STATE,
					  &qi) &&
			    qa.path_mig_state == IBV_MIG_MIGRATED)
				(void)load_alt(p, qa.alt_port_num,
					       qa.alt_ah_attr.dlid);
		} else if (ev.event_type == IBV_EVENT_PATH_MIG_ERR) {
			p->mig_errs++;
		}
		ibv_ack_async_event(&ev);
	}
}

/* wait_wc -- one completion of cq, serving async events meanwhile */
static int wait_wc(struct peer *p, struct ibv_cq *cq, struct ibv_wc *wc)
{
	double end = now_ms() + DEADLINE;
	int n;

	while ((n = ibv_poll_cq(cq, 1, wc)) == 0 && now_ms() < end) {
		events(p);
		usleep(200);
	}
	events(p);
	return n == 1 && wc->status == IBV_WC_SUCCESS ? 0 : -1;
}

static int post_recv(struct peer *p)
{
	return rdma_post_recv(p->id, NULL, p->rbuf, sizeof(p->rbuf), p->rmr);
}

static int send_msg(struct peer *p, uint32_t a, uint32_t b)
{
	struct ibv_wc wc;

	p->sbuf[0] = a;
	p->sbuf[1] = b;
	if (rdma_post_send(p->id, NULL, p->sbuf, sizeof(p->sbuf), p->smr,
			   IBV_SEND_SIGNALED))
		return -1;
	return wait_wc(p, p->id->send_cq, &wc);
}

static int recv_msg(struct peer *p)
{
	struct ibv_wc wc;

	if (wait_wc(p, p->id->recv_cq, &wc) || wc.byte_len != sizeof(p->rbuf))
		return -1;
	return 0;
}

/* setup -- the seeds' getaddrinfo_and_create_ep (and, on the server,
 * get_connect_request), the alternate port, memory, connection */
static void setup(struct peer *p, const char *addr, const char *port)
{
	struct rdma_addrinfo hints, *rai;
	struct ibv_qp_init_attr qi;
	struct rdma_conn_param cp;
	uint16_t pd16;
	int fl;

	memset(&hints, 0, sizeof(hints));
	hints.ai_port_space = RDMA_PS_TCP;
	if (p->server)
		hints.ai_flags = RAI_PASSIVE;
	if (rdma_getaddrinfo(addr, port, &hints, &rai))
		die("rdma_getaddrinfo");
	memset(&qi, 0, sizeof(qi));
	qi.cap.max_send_wr = qi.cap.max_recv_wr = 4;
	qi.cap.max_send_sge = qi.cap.max_recv_sge = 1;
	qi.sq_sig_all = 1;
	if (rdma_create_ep(&p->id, rai, NULL, &qi))
		die("rdma_create_ep");
	rdma_freeaddrinfo(rai);
	if (p->server) {
		p->listen = p->id;
		if (rdma_listen(p->listen, 4))
			die("rdma_listen");
		printf("listening\n");
		fflush(stdout);
		if (rdma_get_request(p->listen, &p->id))
			die("rdma_get_request");
		if (p->id->event->param.conn.private_data_len < 2)
			die("no alternate LID in the request");
		memcpy(&pd16, p->id->event->param.conn.private_data, 2);
		p->peer_alt_lid = ntohs(pd16);
	}
	if (alt_port_details(p))
		die("no second ACTIVE port, or no APM");
	fl = fcntl(p->id->verbs->async_fd, F_GETFL);
	if (fcntl(p->id->verbs->async_fd, F_SETFL, fl | O_NONBLOCK))
		die("async fd");
	p->smr = rdma_reg_msgs(p->id, p->sbuf, sizeof(p->sbuf));
	p->rmr = rdma_reg_msgs(p->id, p->rbuf, sizeof(p->rbuf));
	if (!p->smr || !p->rmr || post_recv(p))
		die("memory");
	pd16 = htons(p->my_alt_lid);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = &pd16;
	cp.private_data_len = 2;
	cp.responder_resources = cp.initiator_depth = 2;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (p->server) {
		if (rdma_accept(p->id, &cp))
			die("rdma_accept");
	} else {
		if (rdma_connect(p->id, &cp))
			die("rdma_connect");
		if (p->id->event->param.conn.private_data_len < 2)
			die("no alternate LID in the reply");
		memcpy(&pd16, p->id->event->param.conn.private_data, 2);
		p->peer_alt_lid = ntohs(pd16);
	}
	if (load_alt(p, p->alt_port, p->peer_alt_lid))
		die("loading the alternate path");
}

static void teardown(struct peer *p)
{
	rdma_disconnect(p->id);
	rdma_dereg_mr(p->smr);
	rdma_dereg_mr(p->rmr);
	rdma_destroy_ep(p->id);
	if (p->listen)
		rdma_destroy_ep(p->listen);
}

static int server(const char *addr, const char *port)
{
	struct peer p;
	uint32_t next = 0, bad = 0;

	memset(&p, 0, sizeof(p));
	p.server = 1;
	setup(&p, addr, port);
	for (;;) {
		uint32_t k;

		if (recv_msg(&p))
			die("receive");
		k = p.rbuf[0];
		if (post_recv(&p))
			die("post_recv");
		if (k == STOP) {
			/* the stop echo carries what we saw */
			if (send_msg(&p, bad ? 0 : next, (uint32_t)p.migs))
				die("send");
			break;
		}
		if (k != next++)
			bad++;
		if (send_msg(&p, k, (uint32_t)p.migs))
			die("send");
	}
	printf("server: messages %u bad %u path_mig %d path_mig_err %d\n", next,
	       bad, p.migs, p.mig_errs);
	teardown(&p);
	return bad != 0;
}

/* exchange -- message k out, its echo back; the echo's second word is
 * the server's PATH_MIG count */
static int exchange(struct peer *p, uint32_t k, uint32_t *srv_migs)
{
	if (send_msg(p, k, 0) || recv_msg(p) || p->rbuf[0] != k)
		return -1;
	*srv_migs = p->rbuf[1];
	return post_recv(p);
}

static int client(const char *addr, const char *port)
{
	struct peer p;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	uint32_t k = 0, sm = 0, i, ok_all = 1;
	double end;
	int q;

	memset(&p, 0, sizeof(p));
	setup(&p, addr, port);
	q = ibv_query_qp(p.id->qp, &qa,
			 IBV_QP_PORT | IBV_QP_AV | IBV_QP_PATH_MIG_STATE, &qi);
	ok(q == 0 && qa.port_num == 1 && !qa.ah_attr.is_global &&
		   qa.path_mig_state == IBV_MIG_ARMED,
	   "connected on port 1, LID-routed (DLID %u), alternate port %u to "
	   "LID %u armed",
	   qa.ah_attr.dlid, p.alt_port, p.peer_alt_lid);
	for (i = 0; i < PHASE && ok_all; i++)
		ok_all = !exchange(&p, k++, &sm);
	ok(ok_all, "%u messages echoed once, in order, on port 1", k);
	memset(&qa, 0, sizeof(qa));
	qa.path_mig_state = IBV_MIG_MIGRATED;
	ok(ibv_modify_qp(p.id->qp, &qa, IBV_QP_PATH_MIG_STATE) == 0,
	   "manual migration (ibv_modify_qp IBV_MIG_MIGRATED)");
	for (i = 0; i < PHASE && ok_all; i++)
		ok_all = !exchange(&p, k++, &sm);
	q = ibv_query_qp(p.id->qp, &qa, IBV_QP_PORT, &qi);
	ok(ok_all && q == 0 && qa.port_num == 2,
	   "%u messages in all, once and in order, now on port %u", k,
	   qa.port_num);
	ok(p.migs == 1 && sm == 1,
	   "IBV_EVENT_PATH_MIG on both hosts (client %d, server %u)", p.migs,
	   sm);
	printf("# cut\n");
	fflush(stdout);
	end = now_ms() + DEADLINE;
	while (ok_all && p.migs < 2 && now_ms() < end) {
		ok_all = !exchange(&p, k++, &sm);
		usleep(2000);
	}
	for (i = 0; i < PHASE && ok_all; i++)
		ok_all = !exchange(&p, k++, &sm);
	ok(ok_all, "%u messages in all, once and in order, through the cut", k);
	q = ibv_query_qp(p.id->qp, &qa, IBV_QP_PORT, &qi);
	ok(q == 0 && qa.port_num == 1 && p.migs == 2 && p.mig_errs == 0,
	   "automatic migration back to port %u when rail 2's cables were "
	   "pulled (PATH_MIG %d, PATH_MIG_ERR %d)",
	   qa.port_num, p.migs, p.mig_errs);
	q = ok_all ? send_msg(&p, STOP, 0) || recv_msg(&p) : -1;
	ok(q == 0 && p.rbuf[0] == k,
	   "the server received all %u messages, in order (it says %u)", k,
	   q ? 0 : p.rbuf[0]);
	ok(p.rbuf[1] == 2, "the server migrated twice (%u)", p.rbuf[1]);
	teardown(&p);
	return done_testing();
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "server")) {
		setenv("APM_PEER_SERVER", "1", 1);
		return server(argv[2], argv[3]);
	}
	if (argc == 4 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3]);
	fprintf(stderr, "usage: apm_peer server|client ADDR PORT\n");
	return 2;
}
