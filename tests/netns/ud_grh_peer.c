/* SPDX-License-Identifier: MIT */
/*
 * ud_grh_peer.c -- the GRH of a UD datagram between two hosts of the
 * namespace fabric (SOFTRDMA_NET=1) says what the wire carried, run by
 * tests/netns/ud-hosts.sh:
 *
 *   ud_grh_peer server PORT         TAP on stdout
 *   ud_grh_peer client ADDR PORT    TAP on stdout
 *
 * The server posts receives and tells the client (TCP) its QPN and GIDs;
 * the client sends through AHs whose hop limit and traffic class differ
 * from the defaults: IPv4 17 and 0x28, then 200 and 0xb8, and, where
 * both hosts have a GID of their fd00:e7 address, IPv6 17 and 0x28 with
 * flow label 0x2b2b2.  The server finds them in the GRHs as an HCA
 * writes them from the received IP header (IPv4: TOS and TTL of the
 * header in the GRH's last 20 bytes; IPv6: traffic class, flow label and
 * hop limit): the hosts share a bridge, so no router decremented the
 * TTL.
 */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tap.h"
#include "../soft/common.h"
#include "tcp_exch.h"

#define QKEY 0x11111111u
#define RBUF (40 + 256)
#define NDG  3

static const struct {
	uint8_t hop, tclass;
	int v6;
	uint32_t flow;
} dg[NDG] = {{17, 0x28, 0, 0}, {200, 0xb8, 0, 0}, {17, 0x28, 1, 0x2b2b2}};

struct peer {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	uint8_t *buf;
	int gid4, gid6; /* GID indexes of the fabric addresses, -1: none */
};

/* peer_open -- device, PD, CQ, MR and a UD QP in RTS */
static void peer_open(struct peer *p)
{
	static const uint8_t v4[13] = {0, 0, 0, 0,    0,    0, 0,
				       0, 0, 0, 0xff, 0xff, 10};
	static const uint8_t v6[4] = {0xfd, 0x00, 0x00, 0xe7};
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa;

	if (!list || !list[0] || !(p->ctx = ibv_open_device(list[0])))
		bail_out("no device");
	ibv_free_device_list(list);
	p->buf = calloc(1, NDG * RBUF + 256);
	p->pd = ibv_alloc_pd(p->ctx);
	p->cq = ibv_create_cq(p->ctx, 16, NULL, NULL, 0);
	p->mr = p->buf && p->pd ? ibv_reg_mr(p->pd, p->buf, NDG * RBUF + 256,
					     IBV_ACCESS_LOCAL_WRITE)
				: NULL;
	if (!p->cq || !p->mr)
		bail_out("PD, CQ, MR");
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = p->cq;
	qa.qp_type = IBV_QPT_UD;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 8;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	p->qp = ibv_create_qp(p->pd, &qa);
	if (!p->qp)
		bail_out("UD QP");
	if (t_ud_up(p->qp, QKEY))
		bail_out("UD QP to RTS");
	p->gid4 = t_find_gid(p->ctx, v4, sizeof(v4));
	p->gid6 = t_find_gid(p->ctx, v6, sizeof(v6));
	if (p->gid4 < 0)
		bail_out("no GID of a 10.x address");
}

static void peer_close(struct peer *p)
{
	ibv_destroy_qp(p->qp);
	ibv_dereg_mr(p->mr);
	ibv_destroy_cq(p->cq);
	ibv_dealloc_pd(p->pd);
	ibv_close_device(p->ctx);
	free(p->buf);
}

/* server -- post receives, tell the client, check each datagram's GRH */
static void server(int port)
{
	struct info me[2];
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge sge;
	struct ibv_wc wc[NDG];
	struct peer p;
	uint32_t want = 0;
	int fd, n, i, k;

	peer_open(&p);
	for (i = 0; i < NDG; i++) {
		sge.addr = (uintptr_t)(p.buf + i * RBUF);
		sge.length = RBUF;
		sge.lkey = p.mr->lkey;
		memset(&rwr, 0, sizeof(rwr));
		rwr.wr_id = (uint64_t)i;
		rwr.sg_list = &sge;
		rwr.num_sge = 1;
		if (ibv_post_recv(p.qp, &rwr, &rbad))
			bail_out("post_recv");
	}
	memset(me, 0, sizeof(me));
	me[0].qpn = p.qp->qp_num;
	ibv_query_gid(p.ctx, 1, p.gid4, (union ibv_gid *)me[0].gid);
	me[1].qpn = p.gid6 >= 0;
	if (p.gid6 >= 0)
		ibv_query_gid(p.ctx, 1, p.gid6, (union ibv_gid *)me[1].gid);
	fd = tcp_accept(port);
	xfer(fd, me, sizeof(me), 1);
	xfer(fd, &want, sizeof(want), 0); /* datagrams the client sent */
	n = t_wait(p.cq, wc, (int)want, 10000);
	ok(n == (int)want, "%d of %u datagrams received", n, want);
	for (k = 0; k < n; k++) {
		const uint8_t *grh = p.buf + wc[k].wr_id * RBUF;

		i = (int)(ntohl(wc[k].imm_data) & 0xff);
		if (wc[k].status != IBV_WC_SUCCESS || i >= NDG ||
		    !(wc[k].wc_flags & IBV_WC_GRH)) {
			ok(0, "datagram %d: %s", i,
			   ibv_wc_status_str(wc[k].status));
			continue;
		}
		if (!dg[i].v6) {
			/* IPv4: the header in the GRH's last 20 bytes */
			ok(grh[20] == 0x45 && grh[21] == dg[i].tclass &&
				   grh[28] == dg[i].hop,
			   "IPv4 datagram %d: GRH TOS 0x%02x TTL %u (sent "
			   "0x%02x, %u)",
			   i, grh[21], grh[28], dg[i].tclass, dg[i].hop);
		} else {
			uint32_t vtf;

			memcpy(&vtf, grh, 4);
			vtf = ntohl(vtf);
			ok(vtf >> 28 == 6 &&
				   ((vtf >> 20) & 0xff) == dg[i].tclass &&
				   (vtf & 0xfffff) == dg[i].flow &&
				   grh[7] == dg[i].hop,
			   "IPv6 datagram %d: GRH traffic class 0x%02x flow "
			   "label 0x%05x hop limit %u (sent 0x%02x, 0x%05x, "
			   "%u)",
			   i, (vtf >> 20) & 0xff, vtf & 0xfffff, grh[7],
			   dg[i].tclass, dg[i].flow, dg[i].hop);
		}
	}
	xfer(fd, &want, sizeof(want), 1); /* the client may go */
	close(fd);
	peer_close(&p);
}

/* client -- one datagram through an AH of each hop limit and class */
static void client(const char *addr, int port)
{
	struct info peer[2];
	struct ibv_ah_attr aa;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc[NDG];
	struct ibv_ah *ah[NDG];
	struct peer p;
	uint32_t sent = 0;
	int fd, i, n;

	peer_open(&p);
	fd = tcp_connect(addr, port);
	xfer(fd, peer, sizeof(peer), 0);
	for (i = 0; i < NDG; i++) {
		ah[i] = NULL;
		if (dg[i].v6 && (!peer[1].qpn || p.gid6 < 0)) {
			skip_one("IPv6 datagram %d: no fd00:e7 GID", i);
			continue;
		}
		memset(&aa, 0, sizeof(aa));
		aa.is_global = 1;
		aa.port_num = 1;
		aa.grh.sgid_index = (uint8_t)(dg[i].v6 ? p.gid6 : p.gid4);
		aa.grh.hop_limit = dg[i].hop;
		aa.grh.traffic_class = dg[i].tclass;
		aa.grh.flow_label = dg[i].flow;
		memcpy(aa.grh.dgid.raw, peer[dg[i].v6].gid, 16);
		ah[i] = ibv_create_ah(p.pd, &aa);
		if (!ah[i])
			bail_out("AH %d", i);
		sge.addr = (uintptr_t)(p.buf + NDG * RBUF);
		sge.length = 64;
		sge.lkey = p.mr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uint64_t)i;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.imm_data = htonl((uint32_t)i);
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.ud.ah = ah[i];
		wr.wr.ud.remote_qpn = peer[0].qpn;
		wr.wr.ud.remote_qkey = QKEY;
		if (ibv_post_send(p.qp, &wr, &bad))
			bail_out("post_send %d", i);
		sent++;
	}
	n = t_wait(p.cq, wc, (int)sent, 10000);
	ok(n == (int)sent && (!n || wc[n - 1].status == IBV_WC_SUCCESS),
	   "%u datagrams sent with hop limits 17 and 200, traffic classes "
	   "0x28 and 0xb8",
	   sent);
	xfer(fd, &sent, sizeof(sent), 1);
	xfer(fd, &sent, sizeof(sent), 0);
	close(fd);
	for (i = 0; i < NDG; i++)
		if (ah[i])
			ibv_destroy_ah(ah[i]);
	peer_close(&p);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		server(atoi(argv[2]));
	else if (argc == 4 && !strcmp(argv[1], "client"))
		client(argv[2], atoi(argv[3]));
	else
		bail_out("usage: ud_grh_peer server PORT | client ADDR PORT");
	return done_testing();
}
