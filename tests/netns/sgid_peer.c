/* SPDX-License-Identifier: MIT */
/*
 * sgid_peer.c -- an address vector's sgid_index must be a GID of its
 * port, as the kernel resolves it (rdma_get_gid_attr(device, port,
 * index) in ib_create_ah and ib_modify_qp), on a host of the namespace
 * fabric on two rails (SOFTRDMA_NET=1: a port per rail), run by
 * tests/netns/sgid-hosts.sh:
 *
 *   sgid_peer check                on a host: TAP on stdout
 *   sgid_peer server PORT IBPORT   on one host: an RC responder on IBPORT
 *   sgid_peer client ADDR PORT IBPORT
 *                                  on another: TAP on stdout
 *
 * check: each port numbers its own GIDs from 0, as an HCA's tables are
 * (index 0 its own link-local GID, then its rail's addresses; no GID on
 * both ports), and ibv_query_gid_table lists each port's entries with
 * those indices; every index ibv_query_gid_ex lists on a port is taken
 * by ibv_create_ah and by an RC QP's INIT->RTR, every empty one is
 * refused with ENODATA, an index past the port's table (gid_tbl_len)
 * with EINVAL, and the refused QP is still in INIT; an AV on another
 * port than the QP's, or on none (port 0: the kernel's modify_qp wants a
 * valid port in the AV since Linux 3.14), is refused at INIT->RTR
 * (EINVAL).  client: an RC QP on IBPORT is first refused an empty index
 * of its port, then connects from its own fabric GID and WRITEs and
 * READs back 64 KiB blocks, every byte checked.
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "tcp_exch.h"

#define BLK    65536u
#define ROUNDS 16
#define NPORTS 2

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;

/* open_dev -- the device (two ports), a PD and a CQ */
static void open_dev(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_device_attr da;

	if (!l || !l[0] || !(ctx = ibv_open_device(l[0])))
		bail_out("no device");
	ibv_free_device_list(l);
	if (ibv_query_device(ctx, &da) || da.phys_port_cnt != NPORTS)
		bail_out("not a two-port device (SOFTRDMA_NET=1, two rails?)");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!pd || !cq)
		bail_out("PD, CQ");
}

static struct ibv_qp *rc_qp(void)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		bail_out("QP");
	return qp;
}

/* to_init -- qp from any state to INIT on port */
static void to_init(struct ibv_qp *qp, uint8_t port)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		bail_out("RESET");
	a.qp_state = IBV_QPS_INIT;
	a.port_num = port;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		bail_out("INIT");
}

/* to_rtr -- INIT->RTR towards (dgid, qpn) from sgid_index on av_port
 * (0: the QP's); ibv_modify_qp's return (0 or an errno) */
static int to_rtr(struct ibv_qp *qp, uint8_t av_port, int idx,
		  const uint8_t *dgid, uint32_t qpn, uint32_t psn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qpn;
	a.rq_psn = psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.sgid_index = (uint8_t)idx;
	a.ah_attr.grh.hop_limit = 64;
	memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
	a.ah_attr.port_num = av_port;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER);
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		bail_out("query_qp");
	return a.qp_state;
}

/* ah_errno -- ibv_create_ah on port from sgid_index: 0 or its errno */
static int ah_errno(uint8_t port, int idx)
{
	struct ibv_ah_attr a;
	struct ibv_ah *ah;

	memset(&a, 0, sizeof(a));
	a.is_global = 1;
	a.grh.sgid_index = (uint8_t)idx;
	a.grh.hop_limit = 64;
	a.grh.dgid.raw[10] = a.grh.dgid.raw[11] = 0xff;
	a.grh.dgid.raw[12] = 10;
	a.grh.dgid.raw[13] = 231;
	a.grh.dgid.raw[14] = 1;
	a.grh.dgid.raw[15] = 99;
	a.port_num = port;
	errno = 0;
	ah = ibv_create_ah(pd, &a);
	if (!ah)
		return errno ? errno : -1;
	ibv_destroy_ah(ah);
	return 0;
}

/* on_port -- ibv_query_gid_ex says entry idx is on port (0 or ENODATA) */
static int on_port(uint8_t port, int idx)
{
	struct ibv_gid_entry e;
	int r = ibv_query_gid_ex(ctx, port, (uint32_t)idx, &e, 0);

	if (r && r != ENODATA)
		bail_out("ibv_query_gid_ex(%u, %d): %s", port, idx,
			 strerror(r));
	return !r;
}

/* fabric_gid -- the index of port's ::ffff:10.231.x.y GID (-1: none) */
static int fabric_gid(uint8_t port, int len)
{
	union ibv_gid g;
	int i;

	for (i = 0; i < len; i++)
		if (on_port(port, i) && !ibv_query_gid(ctx, port, i, &g) &&
		    g.raw[10] == 0xff && g.raw[11] == 0xff && g.raw[12] == 10 &&
		    g.raw[13] == 231)
			return i;
	return -1;
}

/* own_gids -- how many indices of port, from 0, have a GID */
static int own_gids(uint8_t port)
{
	struct ibv_port_attr pa;
	int n = 0;

	if (ibv_query_port(ctx, port, &pa))
		bail_out("query_port %u", port);
	while (n < pa.gid_tbl_len && on_port(port, n))
		n++;
	return n;
}

/* has_gid -- GID g is among a port's first n indices */
static int has_gid(uint8_t port, int n, const union ibv_gid *g)
{
	union ibv_gid t;
	int i;

	for (i = 0; i < n; i++)
		if (!ibv_query_gid(ctx, port, i, &t) &&
		    !memcmp(&t, g, sizeof(t)))
			return 1;
	return 0;
}

/* table_check -- ibv_query_gid_table: n[1] + n[2] entries, each port's
 * under the index ibv_query_gid gives it there */
static void table_check(const int *n)
{
	struct ibv_gid_entry e[64];
	union ibv_gid g;
	ssize_t k, i;
	int bad = 0;

	k = ibv_query_gid_table(ctx, e, 64, 0);
	for (i = 0; i < k; i++)
		if (e[i].port_num < 1 || e[i].port_num > NPORTS ||
		    (int)e[i].gid_index >= n[e[i].port_num] ||
		    ibv_query_gid(ctx, (uint8_t)e[i].port_num,
				  (int)e[i].gid_index, &g) ||
		    memcmp(&g, &e[i].gid, sizeof(g)) || !e[i].ndev_ifindex)
			bad++;
	ok(k == n[1] + n[2] && !bad,
	   "ibv_query_gid_table: %zd entries (want %d), each its port's "
	   "index (%d wrong)",
	   k, n[1] + n[2], bad);
}

static int check(void)
{
	static const uint8_t dgid[16] = {[10] = 0xff, [11] = 0xff, [12] = 10,
					 [13] = 231,  [14] = 1,	   [15] = 99};
	union ibv_gid g0[NPORTS + 1], g;
	struct ibv_port_attr pa;
	struct ibv_qp *qp;
	int len[NPORTS + 1], n[NPORTS + 1], p, i, shared = 0;

	open_dev();
	qp = rc_qp();
	for (p = 1; p <= NPORTS; p++) {
		int dense = 1, bad_ah = 0, bad_qp = 0;

		if (ibv_query_port(ctx, (uint8_t)p, &pa))
			bail_out("query_port %d", p);
		len[p] = pa.gid_tbl_len;
		if (len[p] < 1 || len[p] > 256)
			bail_out("port %d: gid_tbl_len %d", p, len[p]);
		n[p] = own_gids((uint8_t)p);
		for (i = n[p]; i < len[p]; i++)
			dense &= !on_port((uint8_t)p, i);
		if (ibv_query_gid(ctx, (uint8_t)p, 0, &g0[p]))
			bail_out("query_gid");
		ok(n[p] >= 2 && n[p] < len[p] && dense &&
			   g0[p].raw[0] == 0xfe && g0[p].raw[1] == 0x80 &&
			   (p == 1 || memcmp(&g0[p], &g0[1], sizeof(g))),
		   "port %d: %d GIDs at indices 0 to %d, index 0 its own "
		   "link-local GID",
		   p, n[p], n[p] - 1);
		for (i = 0; i < len[p]; i++) {
			int want = on_port((uint8_t)p, i) ? 0 : ENODATA;
			int r0, r1, r2;

			r0 = ah_errno((uint8_t)p, i);
			to_init(qp, (uint8_t)p);
			r1 = to_rtr(qp, (uint8_t)p, i, dgid, 1, 0);
			if (r1 && qp_state(qp) != IBV_QPS_INIT)
				r1 = -1; /* refused, yet not left as it was */
			to_init(qp, (uint8_t)p);
			r2 = to_rtr(qp, 0, i, dgid, 1, 0);
			if (r2 && qp_state(qp) != IBV_QPS_INIT)
				r2 = -1;
			if (r0 != want && bad_ah++ < 3)
				diag("port %d index %d: create_ah %d, want %d",
				     p, i, r0, want);
			if ((r1 != want || r2 != EINVAL) && bad_qp++ < 3)
				diag("port %d index %d: modify %d/%d, want "
				     "%d/%d",
				     p, i, r1, r2, want, EINVAL);
		}
		is_int(bad_ah, 0,
		       "ibv_create_ah: each own index taken, an empty "
		       "one refused (ENODATA)");
		is_int(bad_qp, 0,
		       "INIT->RTR: each own index taken, an empty one "
		       "refused (ENODATA), an AV of port 0 refused "
		       "(EINVAL), the QP left in INIT");
		is_int(ah_errno((uint8_t)p, len[p]), EINVAL,
		       "ibv_create_ah past the port's table: EINVAL");
		to_init(qp, (uint8_t)p);
		is_int(to_rtr(qp, (uint8_t)p, len[p], dgid, 1, 0), EINVAL,
		       "INIT->RTR past the port's table: EINVAL");
		is_int(qp_state(qp), IBV_QPS_INIT, "the QP still in INIT");
		is_int(to_rtr(qp, (uint8_t)p, 255, dgid, 1, 0), EINVAL,
		       "INIT->RTR at index 255: EINVAL");
	}
	for (i = 0; i < n[2]; i++)
		if (!ibv_query_gid(ctx, 2, i, &g))
			shared += has_gid(1, n[1], &g);
	is_int(shared, 0, "no GID on both ports");
	table_check(n);
	/* INIT->RTR: an AV on a port the QP is not on is refused, as the
	 * kernel's modify_qp refuses it, whatever its index */
	to_init(qp, 1);
	is_int(to_rtr(qp, 2, fabric_gid(2, len[2]), dgid, 1, 0), EINVAL,
	       "QP on port 1, AV on port 2 with port 2's index: EINVAL");
	to_init(qp, 2);
	is_int(to_rtr(qp, 0, fabric_gid(2, len[2]), dgid, 1, 0), EINVAL,
	       "QP on port 2, AV without a port, its own index: EINVAL");
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return done_testing();
}

/* connect_qp -- qp on port to RTS towards peer from our fabric GID idx */
static void connect_qp(struct ibv_qp *qp, uint8_t port, int idx,
		       const struct info *me, const struct info *peer)
{
	struct ibv_qp_attr a;

	to_init(qp, port);
	if (to_rtr(qp, port, idx, peer->gid, peer->qpn, peer->psn))
		bail_out("RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = me->psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		bail_out("RTS");
}

static void my_info(struct info *me, struct ibv_qp *qp, struct ibv_mr *mr,
		    uint8_t port, int idx)
{
	union ibv_gid g;

	memset(me, 0, sizeof(*me));
	if (ibv_query_gid(ctx, port, idx, &g))
		bail_out("query_gid");
	me->qpn = qp->qp_num;
	me->psn = (uint32_t)(getpid() * 7919) & 0xffffff;
	me->rkey = mr->rkey;
	me->addr = (uintptr_t)mr->addr;
	memcpy(me->gid, g.raw, 16);
}

/* port_gid -- port's fabric GID index, after the port check */
static int port_gid(uint8_t port)
{
	struct ibv_port_attr pa;
	int idx;

	if (port < 1 || port > NPORTS || ibv_query_port(ctx, port, &pa))
		bail_out("port %u", port);
	idx = fabric_gid(port, pa.gid_tbl_len);
	if (idx < 0)
		bail_out("port %u has no GID on 10.231.0.0/16", port);
	return idx;
}

static int server(int tport, uint8_t port)
{
	uint8_t *buf = aligned_alloc(4096, BLK);
	struct info me, peer;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	int fd, one = 1, idx;
	char c;

	if (!buf)
		bail_out("memory");
	memset(buf, 0, BLK);
	open_dev();
	idx = port_gid(port);
	qp = rc_qp();
	mr = ibv_reg_mr(pd, buf, BLK,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ);
	if (!mr)
		bail_out("reg_mr");
	my_info(&me, qp, mr, port, idx);
	fd = tcp_accept(tport);
	xfer(fd, &me, sizeof(me), 1);
	xfer(fd, &peer, sizeof(peer), 0);
	connect_qp(qp, port, idx, &me, &peer);
	xfer(fd, &one, 1, 1); /* ready */
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		; /* the client's goodbye */
	close(fd);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(buf);
	return 0;
}

/* rw -- one signaled WRITE or READ of buf, waited for; its status */
static int rw(struct ibv_qp *qp, enum ibv_wr_opcode op, void *buf,
	      struct ibv_mr *mr, const struct info *peer)
{
	struct ibv_sge sge = {(uintptr_t)buf, BLK, mr->lkey};
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	int n, i;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = peer->addr;
	wr.wr.rdma.rkey = peer->rkey;
	if (ibv_post_send(qp, &wr, &bad))
		bail_out("post_send");
	for (i = 0; i < 6000000; i++) { /* 60 s */
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			bail_out("poll_cq");
		if (n)
			return wc.status;
		usleep(10);
	}
	bail_out("no completion");
}

static int client(const char *host, int tport, uint8_t port)
{
	uint8_t *tx = aligned_alloc(4096, BLK), *rx = aligned_alloc(4096, BLK);
	struct info me, peer;
	struct ibv_mr *mtx, *mrx;
	struct ibv_qp *qp;
	int fd, i, j, idx, bad = 0;
	char c = 0;

	if (!tx || !rx)
		bail_out("memory");
	open_dev();
	idx = port_gid(port);
	qp = rc_qp();
	mtx = ibv_reg_mr(pd, tx, BLK, IBV_ACCESS_LOCAL_WRITE);
	mrx = ibv_reg_mr(pd, rx, BLK, IBV_ACCESS_LOCAL_WRITE);
	if (!mtx || !mrx)
		bail_out("reg_mr");
	my_info(&me, qp, mtx, port, idx);
	fd = tcp_connect(host, tport);
	xfer(fd, &peer, sizeof(peer), 0);
	xfer(fd, &me, sizeof(me), 1);
	/* an empty index of this port: refused, nothing lost */
	to_init(qp, port);
	i = own_gids(port);
	ok(to_rtr(qp, port, i, peer.gid, peer.qpn, peer.psn) == ENODATA,
	   "RTR from the port's first empty index (%d): ENODATA", i);
	is_int(qp_state(qp), IBV_QPS_INIT, "the QP still in INIT");
	connect_qp(qp, port, idx, &me, &peer);
	ok(1, "RC QP on port %u connected from its own GID index %d", port,
	   idx);
	xfer(fd, &c, 1, 0);
	for (i = 0; i < ROUNDS; i++) {
		for (j = 0; j < (int)BLK; j++)
			tx[j] = (uint8_t)(i * 131 + j * 7 + (j >> 8));
		memset(rx, 0, BLK);
		bad += rw(qp, IBV_WR_RDMA_WRITE, tx, mtx, &peer) !=
		       IBV_WC_SUCCESS;
		bad += rw(qp, IBV_WR_RDMA_READ, rx, mrx, &peer) !=
		       IBV_WC_SUCCESS;
		bad += memcmp(tx, rx, BLK) != 0;
	}
	is_int(bad, 0,
	       "16 blocks of 64 KiB written over the port and read "
	       "back intact");
	xfer(fd, &c, 1, 1); /* goodbye */
	close(fd);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mtx);
	ibv_dereg_mr(mrx);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(tx);
	free(rx);
	return done_testing();
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && !strcmp(argv[1], "check"))
		return check();
	if (argc == 4 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]), (uint8_t)atoi(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), (uint8_t)atoi(argv[4]));
	fprintf(stderr, "usage: sgid_peer check | server PORT IBPORT | "
			"client ADDR PORT IBPORT\n");
	return 2;
}
