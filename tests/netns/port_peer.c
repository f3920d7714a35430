/* SPDX-License-Identifier: MIT */
/*
 * port_peer.c -- a port that follows its interface, seen by an RC stream
 * between two hosts of the namespace fabric (SOFTRDMA_NET=1), run by
 * tests/netns/port-hosts.sh:
 *
 *   port_peer server PORT                 on one host: an RC responder
 *                                         until the client hangs up
 *   port_peer stream SERVER PORT MTU      on another: TAP on stdout
 *
 * The client's port must be ACTIVE with active MTU MTU (bytes); its QP
 * takes that MTU as path MTU.  It WRITEs 64 KiB blocks to the server and
 * READs each back, checked.  Then it streams WRITEs (8 outstanding) and
 * says "# streaming"; the caller pulls this host's cable.  Every
 * outstanding WRITE must complete once: the first in RETRY_EXC_ERR, the
 * rest flushed, the QP in ERR; IBV_EVENT_PORT_ERR must come on the
 * async fd and the port read DOWN.  The time from the port event to
 * RETRY_EXC_ERR is reported next to what timeout and retry_cnt allow
 * (only a loose upper bound is asserted).  Then "# down": the caller
 * plugs the cable back, and IBV_EVENT_PORT_ACTIVE must come, the port
 * ACTIVE again.
 */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tap.h"
#include "tcp_exch.h"

#define BLK	  65536u
#define NBLK	  16u
#define WINDOW	  8
#define ROUNDS	  32
#define DEADLINE  120000.0 /* ms: a wait that must end */
#define WR_STREAM 1000

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_comp_channel *ch;
static struct ibv_qp *qp;
static int gid_idx = -1;
/* 4.096 us * 2^15 = 134 ms, 8 tries: 1.07 s */
static int qp_timeout = 15, qp_retry = 7;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *port_state_str(enum ibv_port_state s)
{
	return ibv_port_state_str(s);
}

/* setup -- device, our GID on the fabric (::ffff:10.231.x.y), CQ, QP */
static void setup(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr ia;
	union ibv_gid g;
	int i;

	if (!l || !l[0] || !(ctx = ibv_open_device(l[0])))
		bail_out("no device");
	ibv_free_device_list(l);
	for (i = 0; i < 16 && gid_idx < 0; i++)
		if (!ibv_query_gid(ctx, 1, i, &g) && g.raw[10] == 0xff &&
		    g.raw[11] == 0xff && g.raw[12] == 10 && g.raw[13] == 231)
			gid_idx = i;
	if (gid_idx < 0)
		bail_out("no GID on 10.231.0.0/16");
	pd = ibv_alloc_pd(ctx);
	ch = ibv_create_comp_channel(ctx);
	cq = ch ? ibv_create_cq(ctx, 64, NULL, ch, 0) : NULL;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 32;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	if (!pd || !cq || !(qp = ibv_create_qp(pd, &ia)))
		bail_out("QP");
}

/* connect_qp -- INIT, RTR (path MTU MTU), RTS */
static void connect_qp(const struct info *me, const struct info *peer,
		       enum ibv_mtu mtu)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		bail_out("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.sgid_index = (uint8_t)gid_idx;
	a.ah_attr.grh.hop_limit = 64;
	memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		bail_out("RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = me->psn;
	a.timeout = (uint8_t)qp_timeout;
	a.retry_cnt = (uint8_t)qp_retry;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		bail_out("RTS");
}

static void my_info(struct info *me, struct ibv_mr *mr, enum ibv_mtu mtu)
{
	union ibv_gid g;

	memset(me, 0, sizeof(*me));
	ibv_query_gid(ctx, 1, gid_idx, &g);
	me->qpn = qp->qp_num;
	me->psn = (uint32_t)(getpid() * 7919) & 0xffffff;
	me->rkey = mr->rkey;
	me->addr = (uintptr_t)mr->addr;
	me->mtu = (uint32_t)mtu;
	memcpy(me->gid, g.raw, 16);
}

static void post(enum ibv_wr_opcode op, void *buf, uint32_t lkey, uint64_t id,
		 uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {(uintptr_t)buf, BLK, lkey};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(qp, &wr, &bad))
		bail_out("post_send");
}

/* events -- what waits on the CQ channel and the async fd */
static int port_err, port_active;
static double t_port_err;

/* async_take -- read the async events there are (non-blocking) */
static void async_take(void)
{
	struct ibv_async_event ev;

	while (!ibv_get_async_event(ctx, &ev)) {
		diag("async event %s, port %d",
		     ibv_event_type_str(ev.event_type), ev.element.port_num);
		if (ev.event_type == IBV_EVENT_PORT_ERR &&
		    ev.element.port_num == 1 && !port_err++)
			t_port_err = now_ms();
		if (ev.event_type == IBV_EVENT_PORT_ACTIVE &&
		    ev.element.port_num == 1)
			port_active++;
		ibv_ack_async_event(&ev);
	}
}

/* wait_any -- block (DEADLINE at most) until a completion or an async
 * event; the completions there are into W (at most N), their count */
static int wait_any(struct ibv_wc *w, int n)
{
	double end = now_ms() + DEADLINE;

	for (;;) {
		struct pollfd pf[2] = {{ch->fd, POLLIN, 0},
				       {ctx->async_fd, POLLIN, 0}};
		int k = ibv_poll_cq(cq, n, w);
		void *cc;
		struct ibv_cq *c;

		if (k)
			return k;
		if (ibv_req_notify_cq(cq, 0))
			bail_out("req_notify_cq");
		k = ibv_poll_cq(cq, n, w);
		if (k)
			return k;
		if (now_ms() > end)
			bail_out("nothing came in %.0f s", DEADLINE / 1e3);
		if (poll(pf, 2, 1000) < 0 && errno != EINTR)
			bail_out("poll");
		if (pf[0].revents && !ibv_get_cq_event(ch, &c, &cc))
			ibv_ack_cq_events(c, 1);
		if (pf[1].revents) {
			async_take();
			return 0;
		}
	}
}

static void fill(uint8_t *p, uint32_t seed)
{
	uint32_t i, x = seed * 2654435761u + 1;

	for (i = 0; i < BLK; i += 4) {
		x = x * 1103515245u + 12345u;
		memcpy(p + i, &x, 4);
	}
}

static int server(int port)
{
	uint8_t *buf = aligned_alloc(4096, (size_t)NBLK * BLK);
	struct ibv_port_attr pa;
	struct info me, peer;
	struct ibv_mr *mr;
	int fd, one = 1;
	char c;

	if (!buf)
		bail_out("memory");
	memset(buf, 0, (size_t)NBLK * BLK);
	setup();
	if (ibv_query_port(ctx, 1, &pa))
		bail_out("query_port");
	mr = ibv_reg_mr(pd, buf, (size_t)NBLK * BLK,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ);
	if (!mr)
		bail_out("reg_mr");
	my_info(&me, mr, pa.active_mtu);
	fd = tcp_accept(port);
	xfer(fd, &me, sizeof(me), 1);
	xfer(fd, &peer, sizeof(peer), 0);
	if (peer.mtu < IBV_MTU_256 || peer.mtu > IBV_MTU_4096)
		bail_out("peer MTU %u", peer.mtu);
	/* the path's MTU: the smaller of the two ports' */
	connect_qp(&me, &peer,
		   peer.mtu < (uint32_t)pa.active_mtu ? (enum ibv_mtu)peer.mtu
						      : pa.active_mtu);
	xfer(fd, &one, 1, 1); /* ready */
	/* the client reads and writes our memory; we wait for its goodbye */
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
	close(fd);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(ch);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(buf);
	return 0;
}

static int stream(const char *host, int port, int want_mtu)
{
	uint8_t *tx = aligned_alloc(4096, BLK), *rx = aligned_alloc(4096, BLK);
	struct ibv_port_attr pa;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct info me, peer;
	struct ibv_mr *mtx, *mrx;
	struct ibv_wc w[WINDOW];
	uint64_t next = WR_STREAM, expect = WR_STREAM;
	double t_exc = 0, end, tmo, allow, el;
	int fd, i, k, bad = 0, ok_n = 0, exc = 0, flushed = 0, other = 0;
	int outstanding = 0, said = 0, fl;
	char c = 0;

	if (!tx || !rx)
		bail_out("memory");
	setup();
	/* events are taken as they come, never blocking the stream */
	fl = ctx->async_fd;
	{
		int f = fcntl(fl, F_GETFL);

		if (f < 0 || fcntl(fl, F_SETFL, f | O_NONBLOCK) < 0)
			bail_out("async fd non-blocking");
	}
	memset(&pa, 0, sizeof(pa));
	if (ibv_query_port(ctx, 1, &pa))
		bail_out("query_port");
	ok(pa.state == IBV_PORT_ACTIVE && pa.phys_state == 5,
	   "port 1 %s, phys_state %d (LinkUp)", port_state_str(pa.state),
	   pa.phys_state);
	is_int(128 << pa.active_mtu, want_mtu,
	       "active MTU as rxe derives it from the interface's");
	is_int(pa.max_mtu, IBV_MTU_4096, "max MTU 4096");
	mtx = ibv_reg_mr(pd, tx, BLK, IBV_ACCESS_LOCAL_WRITE);
	mrx = ibv_reg_mr(pd, rx, BLK, IBV_ACCESS_LOCAL_WRITE);
	if (!mtx || !mrx)
		bail_out("reg_mr");
	my_info(&me, mtx, pa.active_mtu);
	fd = tcp_connect(host, port);
	xfer(fd, &peer, sizeof(peer), 0);
	xfer(fd, &me, sizeof(me), 1);
	connect_qp(&me, &peer, pa.active_mtu); /* the port's MTU */
	xfer(fd, &c, 1, 0);
	ibv_query_qp(qp, &qa, IBV_QP_PATH_MTU, &qi);
	is_int(128 << qa.path_mtu, want_mtu, "the QP's path MTU is the port's");

	/* WRITE each block, READ it back: every byte checked */
	for (i = 0; i < ROUNDS; i++) {
		uint64_t ra = peer.addr + (uint64_t)(i % NBLK) * BLK;
		int got = 0;

		fill(tx, (uint32_t)i);
		memset(rx, 0, BLK);
		post(IBV_WR_RDMA_WRITE, tx, mtx->lkey, 2 * (uint64_t)i, ra,
		     peer.rkey);
		post(IBV_WR_RDMA_READ, rx, mrx->lkey, 2 * (uint64_t)i + 1, ra,
		     peer.rkey);
		while (got < 2) {
			k = wait_any(w, 2 - got);
			for (int j = 0; j < k; j++)
				bad += w[j].status != IBV_WC_SUCCESS ||
				       w[j].wr_id != 2 * (uint64_t)i +
							     (uint64_t)got +
							     (uint64_t)j;
			got += k;
		}
		bad += memcmp(tx, rx, BLK) != 0;
	}
	is_int(bad, 0, "32 blocks of 64 KiB written and read back intact");

	/* the stream: WINDOW WRITEs outstanding, until the cable is pulled */
	fill(tx, 7);
	end = now_ms() + DEADLINE;
	while (outstanding < WINDOW) {
		post(IBV_WR_RDMA_WRITE, tx, mtx->lkey, next,
		     peer.addr + (next % NBLK) * BLK, peer.rkey);
		next++;
		outstanding++;
	}
	while (outstanding) {
		if (now_ms() > end)
			bail_out("the stream did not end in %.0f s",
				 DEADLINE / 1e3);
		k = wait_any(w, WINDOW);
		for (i = 0; i < k; i++, outstanding--) {
			if (w[i].wr_id != expect++) {
				other++;
				diag("wr %llu completed, %llu expected",
				     (unsigned long long)w[i].wr_id,
				     (unsigned long long)expect - 1);
			}
			if (w[i].status == IBV_WC_SUCCESS && !exc && !flushed)
				ok_n++;
			else if (w[i].status == IBV_WC_RETRY_EXC_ERR && !exc &&
				 !flushed) {
				exc++;
				t_exc = now_ms();
			} else if (w[i].status == IBV_WC_WR_FLUSH_ERR && exc)
				flushed++;
			else if (other++ < 3)
				diag("wr %llu: %s",
				     (unsigned long long)w[i].wr_id,
				     ibv_wc_status_str(w[i].status));
		}
		if (ok_n >= 4 * WINDOW && !said) {
			said = 1;
			printf("# streaming\n");
			fflush(stdout);
		}
		/* keep the window full until the first error */
		while (!exc && outstanding < WINDOW) {
			post(IBV_WR_RDMA_WRITE, tx, mtx->lkey, next,
			     peer.addr + (next % NBLK) * BLK, peer.rkey);
			next++;
			outstanding++;
		}
	}
	diag("%d WRITEs of 64 KiB completed before the cut", ok_n);
	ok(exc == 1, "the first outstanding WRITE ends in RETRY_EXC_ERR");
	is_int(flushed, (int)(next - WR_STREAM) - ok_n - 1,
	       "the other outstanding WRITEs are flushed");
	is_int(other, 0, "every WRITE completes once, in order");
	ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi);
	is_int(qa.qp_state, IBV_QPS_ERR, "the QP is in ERR");
	while (!port_err && now_ms() < end)
		wait_any(w, 1);
	ok(port_err == 1, "IBV_EVENT_PORT_ERR on the async fd, port 1, once");
	memset(&pa, 0, sizeof(pa));
	ibv_query_port(ctx, 1, &pa);
	ok(pa.state == IBV_PORT_DOWN && pa.phys_state == 2,
	   "port 1 %s, phys_state %d (Polling: up, no carrier)",
	   port_state_str(pa.state), pa.phys_state);
	tmo = 4.096e-3 * (double)(1ull << qp_timeout);
	allow = tmo * (qp_retry + 1);
	el = t_exc - t_port_err;
	diag("RETRY_EXC_ERR %.1f ms after PORT_ERR; timeout %d (%.1f ms) x "
	     "(retry_cnt %d + 1) = %.1f ms",
	     el, qp_timeout, tmo, qp_retry, allow);
	/* loose: how late it is depends on the machine's load */
	ok(el <= allow + 20000, "RETRY_EXC_ERR within 20 s of what "
				"timeout and retry_cnt allow");

	/* the cable back: PORT_ACTIVE, the port ACTIVE */
	printf("# down\n");
	fflush(stdout);
	end = now_ms() + DEADLINE;
	while (!port_active && now_ms() < end)
		wait_any(w, 1);
	ok(port_active == 1, "IBV_EVENT_PORT_ACTIVE on the async fd, once");
	memset(&pa, 0, sizeof(pa));
	ibv_query_port(ctx, 1, &pa);
	ok(pa.state == IBV_PORT_ACTIVE && pa.phys_state == 5,
	   "port 1 %s again, phys_state %d", port_state_str(pa.state),
	   pa.phys_state);

	xfer(fd, &c, 1, 1); /* goodbye */
	close(fd);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mtx);
	ibv_dereg_mr(mrx);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(ch);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(tx);
	free(rx);
	return done_testing();
}

int main(int argc, char **argv)
{
	const char *e;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((e = getenv("PORT_PEER_TIMEOUT")))
		qp_timeout = atoi(e);
	if ((e = getenv("PORT_PEER_RETRY")))
		qp_retry = atoi(e);
	if (qp_timeout < 1 || qp_timeout > 31 || qp_retry < 0 || qp_retry > 7)
		bail_out("PORT_PEER_TIMEOUT 1..31, PORT_PEER_RETRY 0..7");
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]));
	if (argc == 5 && !strcmp(argv[1], "stream"))
		return stream(argv[2], atoi(argv[3]), atoi(argv[4]));
	fprintf(stderr, "usage: port_peer server PORT | "
			"stream ADDR PORT MTU\n");
	return 2;
}
