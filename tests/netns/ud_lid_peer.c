/* SPDX-License-Identifier: MIT */
/*
 * ud_lid_peer.c -- UD between two hosts of the namespace fabric in
 * softrdma's InfiniBand mode (SOFTRDMA_LINK=ib, SOFTRDMA_NET=1), what the
 * receive completions say, run by tests/netns/ud-ib-hosts.sh:
 *
 *   ud_lid_peer server PORT PEERLID       TAP on stdout
 *   ud_lid_peer client ADDR PORT PEERLID  TAP on stdout
 *
 * PEERLID is the LID the other host's port 1 has (its rail address's).
 * The server posts receives (their GRH areas filled with 0xee) and tells
 * the client (TCP) its QPN, LID and rail 1 GID; the client sends one
 * datagram through a LID-routed AV (no GRH, SL 5) and one through a
 * global AV (SL 2).  The server finds the first without IBV_WC_GRH, its
 * GRH area untouched, the second with its GRH; both with the client's
 * LID as SLID and the AV's SL.  It answers the first through an AH made
 * from its completion (ibv_create_ah_from_wc: by LID), which the client
 * finds without a GRH, from the server's LID, with SL 5.
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

#define QKEY  0x11111111u
#define RBUF  (40 + 256)
#define LEN   64
#define SL    5
#define GSL   2
#define GAREA 0xee

struct peer {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	uint8_t *buf;
	uint16_t lid;
	int gid; /* index of the GID of our rail 1 address */
};

/* peer_open -- device, PD, CQ, MR and a UD QP in RTS on port 1; its LID */
static void peer_open(struct peer *p)
{
	static const uint8_t v4[14] = {0, 0, 0, 0,    0,    0,	0,
				       0, 0, 0, 0xff, 0xff, 10, 231};
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa;
	struct ibv_port_attr pa;

	if (!list || !list[0] || !(p->ctx = ibv_open_device(list[0])))
		bail_out("no device");
	ibv_free_device_list(list);
	if (ibv_query_port(p->ctx, 1, &pa) ||
	    pa.link_layer != IBV_LINK_LAYER_INFINIBAND || !pa.lid)
		bail_out("port 1 is no InfiniBand port with a LID");
	p->lid = pa.lid;
	p->buf = malloc(4 * RBUF);
	p->pd = ibv_alloc_pd(p->ctx);
	p->cq = ibv_create_cq(p->ctx, 16, NULL, NULL, 0);
	p->mr = p->buf && p->pd ? ibv_reg_mr(p->pd, p->buf, 4 * RBUF,
					     IBV_ACCESS_LOCAL_WRITE)
				: NULL;
	if (!p->cq || !p->mr)
		bail_out("PD, CQ, MR");
	memset(p->buf, GAREA, 4 * RBUF);
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
	p->gid = t_find_gid(p->ctx, v4, sizeof(v4));
	if (p->gid < 0)
		bail_out("no GID of a 10.231.x address");
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

/* post_recv -- a receive of RBUF bytes into slot i */
static void post_recv(struct peer *p, int i)
{
	struct ibv_sge sge = {(uintptr_t)(p->buf + i * RBUF), RBUF,
			      p->mr->lkey};
	struct ibv_recv_wr rwr, *rbad;

	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = (uint64_t)i;
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	if (ibv_post_recv(p->qp, &rwr, &rbad))
		bail_out("post_recv");
}

/* send_dg -- LEN bytes of value v from slot 3 through ah to qpn */
static void send_dg(struct peer *p, struct ibv_ah *ah, uint32_t qpn, uint8_t v)
{
	struct ibv_sge sge = {(uintptr_t)(p->buf + 3 * RBUF), LEN, p->mr->lkey};
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;

	memset(p->buf + 3 * RBUF, v, LEN);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = v;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = QKEY;
	if (ibv_post_send(p->qp, &wr, &bad) ||
	    t_wait(p->cq, &wc, 1, 10000) != 1 || wc.status != IBV_WC_SUCCESS)
		bail_out("send %u", v);
}

/* intact -- slot i holds LEN bytes of v after its GRH area; that area
 * untouched (grh 0) or not */
static int intact(const struct peer *p, int i, uint8_t v, int grh)
{
	const uint8_t *b = p->buf + i * RBUF;
	int k, area = 1;

	for (k = 0; k < 40; k++)
		area &= b[k] == GAREA;
	if (area == grh)
		return 0;
	for (k = 0; k < LEN; k++)
		if (b[40 + k] != v)
			return 0;
	return 1;
}

/* is_lid_wc -- a receive from a LID-routed AV of port LID, SL SL */
static int is_lid_wc(const struct ibv_wc *wc, unsigned int lid)
{
	if (wc->status == IBV_WC_SUCCESS && !(wc->wc_flags & IBV_WC_GRH) &&
	    wc->slid == lid && wc->sl == SL && wc->byte_len == 40 + LEN)
		return 1;
	diag("  status %s, wc_flags 0x%x, slid %u, sl %u, byte_len %u",
	     ibv_wc_status_str(wc->status), wc->wc_flags, wc->slid, wc->sl,
	     wc->byte_len);
	return 0;
}

/* server -- post receives, tell the client, check both datagrams, answer
 * the LID-routed one */
static void server(int port, unsigned int plid)
{
	struct ibv_ah_attr aa;
	struct ibv_wc wc[2];
	struct ibv_ah *ah;
	struct info me;
	struct peer p;
	uint32_t n = 0;
	int fd;

	peer_open(&p);
	post_recv(&p, 0);
	post_recv(&p, 1);
	memset(&me, 0, sizeof(me));
	me.qpn = p.qp->qp_num;
	me.psn = p.lid;
	ibv_query_gid(p.ctx, 1, p.gid, (union ibv_gid *)me.gid);
	fd = tcp_accept(port);
	xfer(fd, &me, sizeof(me), 1);
	xfer(fd, &n, sizeof(n), 0); /* the client has sent */
	if (t_wait(p.cq, wc, 2, 10000) != 2)
		bail_out("two datagrams do not arrive");
	ok(wc[0].wr_id == 0 && is_lid_wc(&wc[0], plid) && intact(&p, 0, 1, 0),
	   "by LID: no IBV_WC_GRH, GRH area untouched, SLID %u (the "
	   "client's), SL %u, data intact",
	   plid, SL);
	ok(wc[1].wr_id == 1 && wc[1].status == IBV_WC_SUCCESS &&
		   (wc[1].wc_flags & IBV_WC_GRH) && wc[1].slid == plid &&
		   wc[1].sl == GSL && intact(&p, 1, 2, 1) &&
		   p.buf[RBUF + 20] == 0x45,
	   "global AV: IBV_WC_GRH (the IPv4 header), SLID %u, SL %u", plid,
	   GSL);
	ok(!ibv_init_ah_from_wc(p.ctx, 1, &wc[0], (struct ibv_grh *)p.buf,
				&aa) &&
		   !aa.is_global && aa.dlid == plid && aa.sl == SL,
	   "ibv_init_ah_from_wc: LID-routed to %u, SL %u", plid, SL);
	ah = ibv_create_ah_from_wc(p.pd, &wc[0], (struct ibv_grh *)p.buf, 1);
	if (!ah)
		bail_out("ibv_create_ah_from_wc");
	send_dg(&p, ah, wc[0].src_qp, 3);
	xfer(fd, &n, sizeof(n), 0); /* the client has the answer */
	close(fd);
	ibv_destroy_ah(ah);
	peer_close(&p);
}

/* client -- a datagram by LID, one through a global AV; the answer */
static void client(const char *addr, int port, unsigned int plid)
{
	struct ibv_ah_attr aa;
	struct ibv_ah *lah, *gah;
	struct ibv_wc wc;
	struct info peer;
	struct peer p;
	uint32_t n = 2;
	int fd;

	peer_open(&p);
	post_recv(&p, 0);
	fd = tcp_connect(addr, port);
	xfer(fd, &peer, sizeof(peer), 0);
	ok(peer.psn == plid, "the server's LID is %u", plid);
	memset(&aa, 0, sizeof(aa));
	aa.dlid = (uint16_t)peer.psn;
	aa.sl = SL;
	aa.port_num = 1;
	lah = ibv_create_ah(p.pd, &aa);
	ok(lah != NULL, "LID-routed AH to LID %u, SL %u", peer.psn, SL);
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.sl = GSL;
	aa.port_num = 1;
	aa.grh.sgid_index = (uint8_t)p.gid;
	aa.grh.hop_limit = 64;
	memcpy(aa.grh.dgid.raw, peer.gid, 16);
	gah = ibv_create_ah(p.pd, &aa);
	if (!lah || !gah)
		bail_out("AHs");
	send_dg(&p, lah, peer.qpn, 1);
	send_dg(&p, gah, peer.qpn, 2);
	xfer(fd, &n, sizeof(n), 1);
	ok(t_wait(p.cq, &wc, 1, 10000) == 1 && wc.wr_id == 0 &&
		   is_lid_wc(&wc, plid) && wc.src_qp == peer.qpn &&
		   intact(&p, 0, 3, 0),
	   "the answer: by LID from %u (no IBV_WC_GRH), SL %u, data intact",
	   plid, SL);
	xfer(fd, &n, sizeof(n), 1);
	close(fd);
	ibv_destroy_ah(gah);
	ibv_destroy_ah(lah);
	peer_close(&p);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "server"))
		server(atoi(argv[2]), (unsigned int)atoi(argv[3]));
	else if (argc == 5 && !strcmp(argv[1], "client"))
		client(argv[2], atoi(argv[3]), (unsigned int)atoi(argv[4]));
	else
		bail_out("usage: ud_lid_peer server PORT PEERLID | "
			 "client ADDR PORT PEERLID");
	return done_testing();
}
