/* SPDX-License-Identifier: MIT */
/*
 * rc_ip_peer.c -- the IP header of RC packets between two hosts of the
 * namespace fabric (SOFTRDMA_NET=1) carries each QP's path, run by
 * tests/netns/iphdr-hosts.sh:
 *
 *   rc_ip_peer server PORT         TAP on stdout (needs CAP_NET_RAW)
 *   rc_ip_peer client ADDR PORT    TAP on stdout
 *
 * For IPv4 and, where both hosts have a GID of their fd00:e7 address,
 * IPv6, the two connect an RC QP each whose path (ah_attr.grh) has a hop
 * limit and traffic class other than the defaults, the client's other
 * than the server's, and over IPv6 the client's a flow label, the
 * server's flow label 0.  The client sends a SEND, an RDMA WRITE and an RDMA
 * READ of several packets each; the server captures its eth0 (a packet
 * socket, both directions) meanwhile and finds in every RoCE v2 packet
 * it received the client's TTL / hop limit and TOS / traffic class (and
 * flow label), and in every one it sent (ACKs, READ responses) its own
 * QP's: as rxe's prepare_ipv4_hdr / prepare_ipv6_hdr take TTL and TOS
 * from the QP's AV, and mlx5 all three from the QP's path.  The hosts share a bridge: no router
 * decrements the TTL.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../tap.h"
#include "../soft/common.h"
#include "tcp_exch.h"

/* each message 3 packets at the path MTU, 1024 (a GSO send may carry
 * them in one datagram: the capture counts datagrams) */
#define LEN   3000
#define BUF   (4 * LEN)
#define ROCE  4791
#define NSIDE 2

/* each side's path: [0] the client's, [1] the server's (the flow label
 * only over IPv6; the server's 0: 0 on the wire, not a kernel's hash) */
static const struct {
	uint8_t hop, tclass;
	uint32_t flow;
} path[NSIDE] = {{17, 0x28, 0x1e2d3}, {33, 0xb8, 0}};

struct peer {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	uint8_t *buf;
	int gid[2]; /* GID indexes of the fabric's IPv4 and IPv6 addresses */
};

/* what the capture saw of one family's RoCE v2 packets */
struct seen {
	int n[2];    /* packets in (from the client), out (the server's) */
	int bad[2];  /* of them with another TTL or TOS than their QP's */
	int rd_resp; /* READ responses sent */
	int acks;    /* ACKs sent */
	uint8_t bad_hop, bad_tclass;
	uint32_t bad_flow;
};

/* peer_open -- device, PD, CQ, MR; the GIDs of the fabric's addresses */
static void peer_open(struct peer *p)
{
	static const uint8_t v4[13] = {0, 0, 0, 0,    0,    0, 0,
				       0, 0, 0, 0xff, 0xff, 10};
	static const uint8_t v6[4] = {0xfd, 0x00, 0x00, 0xe7};
	struct ibv_device **list = ibv_get_device_list(NULL);

	memset(p, 0, sizeof(*p));
	if (!list || !list[0] || !(p->ctx = ibv_open_device(list[0])))
		bail_out("no device");
	ibv_free_device_list(list);
	p->buf = calloc(1, BUF);
	p->pd = ibv_alloc_pd(p->ctx);
	p->cq = ibv_create_cq(p->ctx, 16, NULL, NULL, 0);
	p->mr = p->buf && p->pd ? ibv_reg_mr(p->pd, p->buf, BUF,
					     IBV_ACCESS_LOCAL_WRITE |
						     IBV_ACCESS_REMOTE_WRITE |
						     IBV_ACCESS_REMOTE_READ)
				: NULL;
	if (!p->cq || !p->mr)
		bail_out("PD, CQ, MR");
	p->gid[0] = t_find_gid(p->ctx, v4, sizeof(v4));
	p->gid[1] = t_find_gid(p->ctx, v6, sizeof(v6));
	if (p->gid[0] < 0)
		bail_out("no GID of a 10.x address");
}

static void peer_close(struct peer *p)
{
	ibv_dereg_mr(p->mr);
	ibv_destroy_cq(p->cq);
	ibv_dealloc_pd(p->pd);
	ibv_close_device(p->ctx);
	free(p->buf);
}

/* qp_new -- an RC QP in INIT; what the other side needs of it in me */
static void qp_new(struct peer *p, int v6, struct info *me)
{
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr a;

	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = p->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 8;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	p->qp = ibv_create_qp(p->pd, &qa);
	if (!p->qp)
		bail_out("RC QP");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(p->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		bail_out("INIT");
	memset(me, 0, sizeof(*me));
	me->qpn = p->qp->qp_num;
	me->psn = 0x1234;
	me->rkey = p->mr->rkey;
	me->addr = (uintptr_t)p->buf;
	ibv_query_gid(p->ctx, 1, p->gid[v6], (union ibv_gid *)me->gid);
}

/* qp_connect -- RTR and RTS towards the peer, on side's path */
static void qp_connect(struct peer *p, int v6, int side,
		       const struct info *peer)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.sgid_index = (uint8_t)p->gid[v6];
	a.ah_attr.grh.hop_limit = path[side].hop;
	a.ah_attr.grh.traffic_class = path[side].tclass;
	a.ah_attr.grh.flow_label = path[side].flow;
	memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
	if (ibv_modify_qp(p->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		bail_out("RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x1234;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(p->qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		bail_out("RTS");
}

/* cap_open -- a packet socket on eth0, both directions, IP headers */
static int cap_open(void)
{
	struct sockaddr_ll sll;
	int fd, big = 16 << 20;

	fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK, htons(ETH_P_ALL));
	if (fd < 0)
		bail_out("packet socket: %s", strerror(errno));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = (int)if_nametoindex("eth0");
	if (!sll.sll_ifindex || bind(fd, (struct sockaddr *)&sll, sizeof(sll)))
		bail_out("packet socket on eth0: %s", strerror(errno));
	return fd;
}

/* cap_take -- one captured packet into what the capture saw (s[0] IPv4,
 * s[1] IPv6) */
static void cap_take(const uint8_t *b, size_t n, int out, struct seen *s)
{
	size_t ihl;
	uint8_t hop, tclass, op;
	uint32_t flow = 0;
	uint16_t dport;
	int v6 = b[0] >> 4 == 6;
	struct seen *f = &s[v6];

	if (n < 1)
		return;
	if (b[0] >> 4 == 4) {
		ihl = (size_t)(b[0] & 15) * 4;
		if (n < ihl + 8 + 12 || b[9] != 17)
			return;
		tclass = b[1];
		hop = b[8];
	} else if (v6) {
		uint32_t vtf;

		ihl = 40;
		if (n < ihl + 8 + 12 || b[6] != 17)
			return;
		memcpy(&vtf, b, 4);
		vtf = ntohl(vtf);
		tclass = (uint8_t)(vtf >> 20);
		flow = vtf & 0xfffff;
		hop = b[7];
	} else {
		return;
	}
	memcpy(&dport, b + ihl + 2, 2);
	if (ntohs(dport) != ROCE)
		return;
	op = b[ihl + 8];
	f->n[out]++;
	if (hop != path[out].hop || tclass != path[out].tclass ||
	    (v6 && flow != path[out].flow)) {
		f->bad[out]++;
		f->bad_hop = hop;
		f->bad_tclass = tclass;
		f->bad_flow = flow;
	}
	if (out && op >= 0x0d && op <= 0x10)
		f->rd_resp++;
	if (out && op == 0x11)
		f->acks++;
}

/* cap_drain -- every packet captured so far */
static void cap_drain(int fd, struct seen *s)
{
	static uint8_t b[65536];
	struct sockaddr_ll from;
	socklen_t fl;
	ssize_t r;

	for (;;) {
		fl = sizeof(from);
		r = recvfrom(fd, b, sizeof(b), 0, (struct sockaddr *)&from,
			     &fl);
		if (r < 0)
			break;
		cap_take(b, (size_t)r, from.sll_pkttype == PACKET_OUTGOING, s);
	}
}

/* server -- per family: a QP on the server's path, a receive for the
 * client's SEND, the capture checked once the client is done */
static void server(int port)
{
	static const char *fam[2] = {"IPv4", "IPv6"};
	struct info me, peer;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	struct seen s[2];
	struct peer p;
	uint32_t v6ok, done;
	int fd, cap, v6;

	peer_open(&p);
	cap = cap_open();
	fd = tcp_accept(port);
	v6ok = p.gid[1] >= 0;
	xfer(fd, &v6ok, sizeof(v6ok), 1);
	xfer(fd, &v6ok, sizeof(v6ok), 0); /* both have one */
	memset(s, 0, sizeof(s));
	for (v6 = 0; v6 <= (int)v6ok; v6++) {
		qp_new(&p, v6, &me);
		sge.addr = (uintptr_t)p.buf;
		sge.length = LEN;
		sge.lkey = p.mr->lkey;
		memset(&rwr, 0, sizeof(rwr));
		rwr.sg_list = &sge;
		rwr.num_sge = 1;
		if (ibv_post_recv(p.qp, &rwr, &rbad))
			bail_out("post_recv");
		xfer(fd, &me, sizeof(me), 1);
		xfer(fd, &peer, sizeof(peer), 0);
		qp_connect(&p, v6, 1, &peer);
		xfer(fd, &me, sizeof(me), 1); /* ready */
		ok(t_wait(p.cq, &wc, 1, 20000) == 1 &&
			   wc.status == IBV_WC_SUCCESS && wc.byte_len == LEN,
		   "%s: the client's SEND received", fam[v6]);
		xfer(fd, &done, sizeof(done), 0); /* its WRITE and READ */
		usleep(100000); /* the last ACKs out, captured */
		cap_drain(cap, s);
		ok(s[v6].n[0] >= 3 && !s[v6].bad[0],
		   "%s: the %d packets received carry the client QP's path: "
		   "TTL %u TOS 0x%02x flow label 0x%05x (%d other, last TTL "
		   "%u TOS 0x%02x flow label 0x%05x)",
		   fam[v6], s[v6].n[0], path[0].hop, path[0].tclass,
		   v6 ? path[0].flow : 0, s[v6].bad[0], s[v6].bad_hop,
		   s[v6].bad_tclass, s[v6].bad_flow);
		ok(s[v6].n[1] >= 2 && !s[v6].bad[1] && s[v6].rd_resp >= 1 &&
			   s[v6].acks >= 1,
		   "%s: the %d packets sent (%d READ responses, %d ACKs) "
		   "carry the server QP's: TTL %u TOS 0x%02x flow label "
		   "0x%05x (%d other, last TTL %u TOS 0x%02x flow label "
		   "0x%05x)",
		   fam[v6], s[v6].n[1], s[v6].rd_resp, s[v6].acks, path[1].hop,
		   path[1].tclass, v6 ? path[1].flow : 0, s[v6].bad[1],
		   s[v6].bad_hop, s[v6].bad_tclass, s[v6].bad_flow);
		xfer(fd, &done, sizeof(done), 1);
		ibv_destroy_qp(p.qp);
	}
	if (!v6ok)
		skip_one("IPv6: no fd00:e7 GID on both hosts");
	close(fd);
	close(cap);
	peer_close(&p);
}

/* post -- one signaled WR of op on LEN bytes at buf, remote at raddr */
static void post(struct peer *p, enum ibv_wr_opcode op, uint8_t *buf,
		 uint32_t len, const struct info *peer, uint64_t roff)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	sge.addr = (uintptr_t)buf;
	sge.length = len;
	sge.lkey = p->mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = peer->addr + roff;
	wr.wr.rdma.rkey = peer->rkey;
	if (ibv_post_send(p->qp, &wr, &bad))
		bail_out("post_send");
}

/* client -- per family: a SEND, a WRITE and a READ on the client's path */
static void client(const char *addr, int port)
{
	static const char *fam[2] = {"IPv4", "IPv6"};
	struct info me, peer;
	struct ibv_wc wc[3];
	struct peer p;
	uint32_t v6ok, theirs, done = 1;
	int fd, v6, n, i, good;

	peer_open(&p);
	fd = tcp_connect(addr, port);
	xfer(fd, &theirs, sizeof(theirs), 0);
	v6ok = theirs && p.gid[1] >= 0;
	xfer(fd, &v6ok, sizeof(v6ok), 1);
	for (v6 = 0; v6 <= (int)v6ok; v6++) {
		qp_new(&p, v6, &me);
		xfer(fd, &peer, sizeof(peer), 0);
		xfer(fd, &me, sizeof(me), 1);
		qp_connect(&p, v6, 0, &peer);
		xfer(fd, &peer, sizeof(peer), 0); /* its QP in RTS */
		memset(p.buf, 0x5a, LEN);
		post(&p, IBV_WR_SEND, p.buf, LEN, &peer, 0);
		post(&p, IBV_WR_RDMA_WRITE, p.buf, LEN, &peer, LEN);
		post(&p, IBV_WR_RDMA_READ, p.buf + 2 * LEN, LEN, &peer, LEN);
		n = t_wait(p.cq, wc, 3, 20000);
		for (i = 0, good = n == 3; i < n; i++)
			good = good && wc[i].status == IBV_WC_SUCCESS;
		ok(good && !memcmp(p.buf, p.buf + 2 * LEN, LEN),
		   "%s: SEND, WRITE and READ of %d B completed, the READ "
		   "brought back what was written",
		   fam[v6], LEN);
		xfer(fd, &done, sizeof(done), 1);
		xfer(fd, &done, sizeof(done), 0); /* the server checked */
		ibv_destroy_qp(p.qp);
	}
	close(fd);
	peer_close(&p);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		server(atoi(argv[2]));
	else if (argc == 4 && !strcmp(argv[1], "client"))
		client(argv[2], atoi(argv[3]));
	else
		bail_out("usage: rc_ip_peer server PORT | client ADDR PORT");
	return done_testing();
}
