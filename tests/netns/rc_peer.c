/* SPDX-License-Identifier: MIT */
/*
 * rc_peer.c -- RC between two hosts of the namespace fabric (softrdma's
 * RoCE v2 path), run by tests/netns/rc-hosts.sh:
 *
 *   rc_peer server PORT              on one host
 *   rc_peer client SERVER PORT [N]   on another: TAP on stdout
 *
 * The QP parameters go over TCP.  The client sends N rounds of messages
 * of every size class (0 B to 1 MiB, sequence number and pattern in the
 * data); the server checks each and echoes it back; the client checks
 * the echo, so every byte went both ways exactly once and in order.  Then
 * RDMA WRITE, READ back, WRITE_WITH_IMM, fetch-and-add and compare-and-
 * swap on the server's memory, each verified; the server reports what it
 * saw over TCP at the end.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../tap.h"
#include "roce.h"
#include "tcp_exch.h"

#define BIG	(1u << 20)
#define NRECV	4
#define BYE_IMM 0xb1eb1e00u
#define TMO_MS	60000
/* inline SENDs as rdmamsg's eager ones (8 KiB and a header): segmented
 * by the path MTU from the bytes taken at post (soft/net.c) */
#define INLINE_MAX (8192 + 64)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_comp_channel *ch;
static struct ibv_qp *qp;
static int gid_idx = -1;
/* the requester's timeout (4.096 us * 2^t) and retry count: RC_PEER_TIMEOUT
 * and RC_PEER_RETRY, by default 0.54 s x 7 retries, room for a loaded
 * machine where a process may not run for a tenth of a second */
static int qp_timeout = 17, qp_retry = 7;
/* the requester's max_rd_atomic: RC_PEER_RD_ATOMIC, by default 4 */
static int qp_rd_atomic = 4;
/* the responder's max_dest_rd_atomic (rdaserver sets 0 for its last
 * rounds) */
static int qp_dest_rd_atomic = 4;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void new_qp(void);

/* setup -- device, our GID on the fabric (::ffff:10.231.x.y), QP */
static void setup(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	union ibv_gid g;
	int i;

	if (!l || !l[0] || !(ctx = ibv_open_device(l[0])))
		bail_out("no device");
	ibv_free_device_list(l);
	for (i = 0; i < 16; i++) {
		if (ibv_query_gid(ctx, 1, i, &g))
			break;
		if (g.raw[10] == 0xff && g.raw[11] == 0xff && g.raw[12] == 10 &&
		    g.raw[13] == 231) {
			gid_idx = i;
			break;
		}
	}
	if (gid_idx < 0)
		bail_out("no GID on 10.231.0.0/16");
	pd = ibv_alloc_pd(ctx);
	/* completions by event, not by spinning: two busy pollers on this
	 * 2-core machine can keep softrdma's agents and threads (the "HCA")
	 * off the CPU for seconds, and the QP's retry timer runs out */
	ch = ibv_create_comp_channel(ctx);
	cq = ch ? ibv_create_cq(ctx, 256, NULL, ch, 0) : NULL;
	if (!pd || !cq)
		bail_out("PD, CQ");
	new_qp();
}

/* new_qp -- a fresh RC QP on pd and cq (the old one destroyed) */
static void new_qp(void)
{
	struct ibv_qp_init_attr ia;

	if (qp && ibv_destroy_qp(qp))
		bail_out("destroy_qp");
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 64;
	ia.cap.max_recv_wr = 64;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 2;
	ia.cap.max_inline_data = INLINE_MAX;
	if (!(qp = ibv_create_qp(pd, &ia)))
		bail_out("QP");
}

static void connect_qp(const struct info *me, const struct info *peer)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		bail_out("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = (uint8_t)qp_dest_rd_atomic;
	a.min_rnr_timer = 1; /* 0.01 ms */
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
	a.max_rd_atomic = (uint8_t)qp_rd_atomic;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		bail_out("RTS");
}

static void my_info(struct info *me, struct ibv_mr *mr)
{
	union ibv_gid g;

	memset(me, 0, sizeof(*me));
	ibv_query_gid(ctx, 1, gid_idx, &g);
	me->qpn = qp->qp_num;
	me->psn = (uint32_t)(getpid() * 7919) & 0xffffff;
	me->rkey = mr->rkey;
	me->addr = (uintptr_t)mr->addr;
	memcpy(me->gid, g.raw, 16);
}

/* post's send flags beside SIGNALED (the client's inline round) */
static unsigned int post_flags;

static int post(enum ibv_wr_opcode op, void *buf, uint32_t len, uint32_t lkey,
		uint64_t id, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct ibv_sge sge = {(uintptr_t)buf, len, lkey};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED | post_flags;
	wr.imm_data = htonl(imm);
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD ||
	    op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = imm; /* the addend, or compare */
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

static int post_recv(void *buf, uint32_t len, uint32_t lkey, uint64_t id)
{
	struct ibv_sge sge = {(uintptr_t)buf, len, lkey};
	struct ibv_recv_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return ibv_post_recv(qp, &wr, &bad);
}

/* wait1 -- one completion, or a zeroed one with status -1 after TMO_MS;
 * sleeps on the completion channel between polls */
static struct ibv_wc wait1(void)
{
	struct ibv_wc wc;
	double end = now_ms() + TMO_MS;
	struct pollfd pf;
	struct ibv_cq *ecq;
	void *ectx;
	int r;

	for (;;) {
		r = ibv_poll_cq(cq, 1, &wc);
		if (r == 1)
			return wc;
		if (r == 0 && !ibv_req_notify_cq(cq, 0)) {
			r = ibv_poll_cq(cq, 1, &wc);
			if (r == 1)
				return wc;
			pf.fd = ch->fd;
			pf.events = POLLIN;
			if (r == 0 && poll(&pf, 1, 100) == 1 &&
			    !ibv_get_cq_event(ch, &ecq, &ectx))
				ibv_ack_cq_events(ecq, 1);
		}
		if (r < 0 || now_ms() > end) {
			memset(&wc, 0, sizeof(wc));
			wc.status = (enum ibv_wc_status) - 1;
			return wc;
		}
	}
}

static uint8_t pat(uint32_t seq, uint32_t i)
{
	return (uint8_t)(seq * 131 + i * 7 + (i >> 8));
}

static void fill(uint8_t *b, uint32_t len, uint32_t seq)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		b[i] = pat(seq, i);
	if (len >= 4)
		memcpy(b, &seq, 4);
}

/* check -- b holds message seq of len; else the first bad offset */
static long check(const uint8_t *b, uint32_t len, uint32_t seq)
{
	uint32_t i, s;

	if (len >= 4) {
		memcpy(&s, b, 4);
		if (s != seq)
			return 0;
	}
	for (i = len >= 4 ? 4 : 0; i < len; i++)
		if (b[i] != pat(seq, i))
			return i;
	return -1;
}

/* peer_accept -- the client of PORT connected to our QP (ME, its info),
 * PEER the client's; the TCP connection */
static int peer_accept(int port, struct info *me, struct info *peer)
{
	int fd = tcp_accept(port);

	xfer(fd, me, sizeof(*me), 1);
	xfer(fd, peer, sizeof(*peer), 0);
	connect_qp(me, peer);
	return fd;
}

/* peer_connect -- our QP (its memory MR) connected to the server's at
 * HOST:PORT, whose info lands in PEER; the TCP connection, once the
 * server says it is ready */
static int peer_connect(const char *host, int port, struct ibv_mr *mr,
			struct info *peer)
{
	struct info me;
	uint8_t ready;
	int fd;

	my_info(&me, mr);
	fd = tcp_connect(host, port);
	xfer(fd, peer, sizeof(*peer), 0);
	xfer(fd, &me, sizeof(me), 1);
	connect_qp(&me, peer);
	xfer(fd, &ready, 1, 0);
	return fd;
}

static int server(int port)
{
	uint8_t *buf = aligned_alloc(4096, (size_t)(NRECV + 1) * BIG + 4096);
	uint8_t *win; /* the one-sided target: BIG bytes + an 8-byte counter */
	struct info me, peer;
	struct ibv_mr *mr;
	uint32_t seq = 0, bad = 0, writes = 0, report[4];
	struct ibv_wc pend[NRECV]; /* receives that completed before an echo */
	int fd, i, bye = 0, npend = 0;

	if (!buf)
		bail_out("memory");
	memset(buf, 0, (size_t)(NRECV + 1) * BIG + 4096);
	win = buf + (size_t)NRECV * BIG;
	setup();
	mr = ibv_reg_mr(pd, buf, (size_t)(NRECV + 1) * BIG + 4096,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr)
		bail_out("reg_mr");
	my_info(&me, mr);
	me.addr = (uintptr_t)win;
	fd = peer_accept(port, &me, &peer);
	for (i = 0; i < NRECV; i++)
		post_recv(buf + (size_t)i * BIG, BIG, mr->lkey, (uint64_t)i);
	xfer(fd, &me, 1, 1); /* ready */
	while (!bye) {
		struct ibv_wc wc;
		uint8_t *b;

		if (npend) { /* in the order they completed */
			wc = pend[0];
			npend--;
			memmove(pend, pend + 1,
				(size_t)npend * sizeof(pend[0]));
		} else {
			wc = wait1();
		}

		if ((int)wc.status == -1) {
			fprintf(stderr, "server: no completion\n");
			return 1;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "server: %s (wr %llu)\n",
				ibv_wc_status_str(wc.status),
				(unsigned long long)wc.wr_id);
			return 1;
		}
		if (wc.opcode == IBV_WC_SEND)
			continue;
		b = buf + (size_t)wc.wr_id * BIG;
		if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
			uint32_t v[2] = {ntohl(wc.imm_data), wc.byte_len};

			writes++;
			memcpy(b, v, 8);
			post(IBV_WR_SEND, b, 8, mr->lkey, 1000, 0, 0, 0);
		} else if ((wc.wc_flags & IBV_WC_WITH_IMM) &&
			   ntohl(wc.imm_data) == BYE_IMM) {
			bye = 1;
		} else {
			if (check(b, wc.byte_len, seq) != -1)
				bad++;
			seq++;
			post(IBV_WR_SEND, b, wc.byte_len, mr->lkey, 1000, 0, 0,
			     0);
		}
		/* the echo's completion before the buffer takes a message;
		 * a receive may complete first (the client had the echo, but
		 * its ACK was lost and our SEND waits for a retry): kept, and
		 * taken next, in order */
		while (!bye) {
			struct ibv_wc s = wait1();

			if (s.status == IBV_WC_SUCCESS &&
			    s.opcode == IBV_WC_SEND)
				break;
			if (s.status != IBV_WC_SUCCESS || npend == NRECV) {
				fprintf(stderr, "server: echo %d opcode %d\n",
					(int)s.status, (int)s.opcode);
				return 1;
			}
			pend[npend++] = s;
		}
		post_recv(b, BIG, mr->lkey, wc.wr_id);
	}
	report[0] = seq;
	report[1] = bad;
	report[2] = writes;
	report[3] = 0;
	xfer(fd, report, sizeof(report), 1);
	xfer(fd, report, 1, 0); /* the client is done with our memory */
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

static const uint32_t sizes[] = {0,    1,    7,	    1023,  1024,    1025,
				 2048, 4096, 65536, 99999, 1u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
static const uint32_t inl_sizes[] = {0,	   1,	 512,  513,
				     1024, 1025, 4096, INLINE_MAX};
#define NINL (sizeof(inl_sizes) / sizeof(inl_sizes[0]))

/*
 * echo -- one SEND of size bytes (pattern seq) from tx, its echo into rx,
 * checked; 1 when whole.  An inline SEND's source is scribbled over as
 * soon as the post returns: what arrives was taken at post.
 */
static int echo(uint8_t *tx, uint8_t *rx, struct ibv_mr *mtx,
		struct ibv_mr *mrx, uint32_t size, uint32_t seq, int *fails)
{
	struct ibv_wc a, b = {0};
	int got_recv = 0, got_send = 0, k;

	fill(tx, size, seq);
	memset(rx, 0xee, size + 1 > BIG ? BIG : size + 1);
	post_recv(rx, BIG, mrx->lkey, 2);
	if (post(IBV_WR_SEND, tx, size, mtx->lkey, 1, 0, 0, 0))
		return 0;
	if (post_flags & IBV_SEND_INLINE)
		memset(tx, 0x5a, size);
	for (k = 0; k < 2; k++) {
		a = wait1();
		if (a.status == IBV_WC_SUCCESS && a.opcode == IBV_WC_SEND &&
		    a.wr_id == 1)
			got_send++;
		else if (a.status == IBV_WC_SUCCESS &&
			 a.opcode == IBV_WC_RECV && a.wr_id == 2) {
			got_recv++;
			b = a;
		} else {
			diag("seq %u: status %d opcode %d", seq, (int)a.status,
			     (int)a.opcode);
		}
	}
	if (got_send != 1 || got_recv != 1 || b.byte_len != size ||
	    check(rx, size, seq) != -1) {
		if ((*fails)++ < 5)
			diag("seq %u size %u: send %d recv %d len %u bad at "
			     "%ld",
			     seq, size, got_send, got_recv,
			     got_recv ? b.byte_len : 0, check(rx, size, seq));
		return 0;
	}
	return 1;
}

/*
 * burst -- NBURST inline SENDs of INLINE_MAX bytes posted back to back
 * (patterns seq ..), more than the QP's 256 KiB inline ring holds: those
 * past it are copied aside (soft/net.c inl_take); their echoes land in
 * rx one after the other.  The echoes whole and in order, and the sends'
 * completions in order.
 */
#define NBURST 40
static int burst(uint8_t *tx, uint8_t *rx, struct ibv_mr *mtx,
		 struct ibv_mr *mrx, uint32_t seq, int *fails)
{
	int i, nrecv = 0, nsend = 0, good = 0;
	struct ibv_wc w;

	for (i = 0; i < NBURST; i++)
		post_recv(rx + (size_t)i * INLINE_MAX, INLINE_MAX, mrx->lkey,
			  100u + (unsigned)i);
	post_flags = IBV_SEND_INLINE;
	for (i = 0; i < NBURST; i++) {
		fill(tx, INLINE_MAX, seq + (uint32_t)i);
		if (post(IBV_WR_SEND, tx, INLINE_MAX, mtx->lkey,
			 200u + (unsigned)i, 0, 0, 0))
			break;
		memset(tx, 0x5a, INLINE_MAX);
	}
	post_flags = 0;
	if (i < NBURST) {
		diag("burst: post %d failed", i);
		(*fails)++;
		return 0;
	}
	while (nrecv < NBURST || nsend < NBURST) {
		w = wait1();
		if (w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_SEND &&
		    w.wr_id == 200u + (unsigned)nsend) {
			nsend++;
		} else if (w.status == IBV_WC_SUCCESS &&
			   w.opcode == IBV_WC_RECV &&
			   w.wr_id == 100u + (unsigned)nrecv) {
			good += w.byte_len == INLINE_MAX &&
				check(rx + (size_t)nrecv * INLINE_MAX,
				      INLINE_MAX, seq + (uint32_t)nrecv) == -1;
			nrecv++;
		} else {
			diag("burst: status %d opcode %d wr %llu",
			     (int)w.status, (int)w.opcode,
			     (unsigned long long)w.wr_id);
			(*fails)++;
			return 0;
		}
	}
	return nsend == NBURST ? good : 0;
}

/*
 * hold -- with RC_PEER_HOLD=PATH, once connected: PATH.ready made, then
 * wait (60 s at most) until PATH.go exists, so that the test can do
 * something to the hosts (stop their agents) before the traffic starts
 */
static void hold(void)
{
	const char *h = getenv("RC_PEER_HOLD");
	char path[512];
	double t0 = now_ms();
	FILE *f;

	if (!h)
		return;
	snprintf(path, sizeof(path), "%s.ready", h);
	f = fopen(path, "w");
	if (!f)
		bail_out("%s: %s", path, strerror(errno));
	fclose(f);
	snprintf(path, sizeof(path), "%s.go", h);
	while (access(path, F_OK)) {
		if (now_ms() - t0 > TMO_MS)
			bail_out("%s never came", path);
		usleep(10000);
	}
}

static int client(const char *host, int port, int rounds)
{
	uint8_t *tx = aligned_alloc(4096, BIG), *rx = aligned_alloc(4096, BIG);
	uint8_t *rd = aligned_alloc(4096, BIG);
	uint64_t *at = aligned_alloc(64, 64);
	struct ibv_mr *mtx, *mrx, *mrd, *mat;
	struct info peer;
	uint32_t seq = 0, report[4];
	int fd, r, n, fails = 0, echoed = 0;
	double t0;

	if (!tx || !rx || !rd || !at)
		bail_out("memory");
	setup();
	mtx = ibv_reg_mr(pd, tx, BIG, IBV_ACCESS_LOCAL_WRITE);
	mrx = ibv_reg_mr(pd, rx, BIG, IBV_ACCESS_LOCAL_WRITE);
	mrd = ibv_reg_mr(pd, rd, BIG, IBV_ACCESS_LOCAL_WRITE);
	mat = ibv_reg_mr(pd, at, 64, IBV_ACCESS_LOCAL_WRITE);
	if (!mtx || !mrx || !mrd || !mat)
		bail_out("reg_mr");
	fd = peer_connect(host, port, mtx, &peer);
	ok(1, "QP %u (GID index %d) connected to QP %u on %s", qp->qp_num,
	   gid_idx, peer.qpn, host);
	hold();

	/* SEND/RECV: every size, echoed back, checked both ways */
	t0 = now_ms();
	for (r = 0; r < rounds; r++)
		for (n = 0; n < (int)NSIZES; n++, seq++)
			echoed += echo(tx, rx, mtx, mrx, sizes[n], seq, &fails);
	is_int(echoed, rounds * (int)NSIZES,
	       "every SEND (0 B .. 1 MiB) echoed back whole and in order");
	diag("%d messages both ways in %.0f ms", echoed, now_ms() - t0);
	/* the same inline, the source scribbled over once posted */
	post_flags = IBV_SEND_INLINE;
	for (n = 0, echoed = 0; n < (int)NINL; n++, seq++)
		echoed += echo(tx, rx, mtx, mrx, inl_sizes[n], seq, &fails);
	post_flags = 0;
	is_int(echoed, (int)NINL,
	       "every inline SEND (0 B .. 8,256 B) echoed back whole");
	is_int(burst(tx, rx, mtx, mrx, seq, &fails), NBURST,
	       "a burst of inline SENDs past the inline ring echoed whole, "
	       "in order");
	seq += NBURST;

	/* RDMA WRITE, then READ it back */
	fill(tx, BIG, 77);
	if (!post(IBV_WR_RDMA_WRITE, tx, BIG, mtx->lkey, 3, peer.addr,
		  peer.rkey, 0)) {
		struct ibv_wc w = wait1();

		ok(w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_RDMA_WRITE,
		   "RDMA WRITE of 1 MiB completes (%s)",
		   ibv_wc_status_str(w.status));
	} else {
		ok(0, "post RDMA WRITE");
	}
	memset(rd, 0, BIG);
	if (!post(IBV_WR_RDMA_READ, rd, BIG, mrd->lkey, 4, peer.addr, peer.rkey,
		  0)) {
		struct ibv_wc w = wait1();

		ok(w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_RDMA_READ &&
			   check(rd, BIG, 77) == -1,
		   "RDMA READ of 1 MiB returns what was written (%s)",
		   ibv_wc_status_str(w.status));
	} else {
		ok(0, "post RDMA READ");
	}
	/* a small READ at an odd offset and length */
	memset(rd, 0, 4096);
	if (!post(IBV_WR_RDMA_READ, rd, 3001, mrd->lkey, 5, peer.addr + 999,
		  peer.rkey, 0)) {
		struct ibv_wc w = wait1();

		ok(w.status == IBV_WC_SUCCESS && !memcmp(rd, tx + 999, 3001) &&
			   rd[3001] == 0,
		   "RDMA READ of 3001 B at offset 999");
	} else {
		ok(0, "post small READ");
	}

	/* WRITE_WITH_IMM: the server sees the immediate and the length */
	post_recv(rx, BIG, mrx->lkey, 6);
	fill(tx, 5000, 5);
	if (!post(IBV_WR_RDMA_WRITE_WITH_IMM, tx, 5000, mtx->lkey, 7,
		  peer.addr + 8192, peer.rkey, 0x1234abcd)) {
		struct ibv_wc a = wait1(), b = wait1();
		uint32_t v[2] = {0, 0};
		struct ibv_wc *rv = a.wr_id == 6 ? &a : &b;

		memcpy(v, rx, 8);
		ok(a.status == IBV_WC_SUCCESS && b.status == IBV_WC_SUCCESS &&
			   rv->wr_id == 6 && v[0] == 0x1234abcd && v[1] == 5000,
		   "WRITE_WITH_IMM: the server got imm 0x%x, %u bytes", v[0],
		   v[1]);
	} else {
		ok(0, "post WRITE_WITH_IMM");
	}
	memset(rd, 0, 5000);
	post(IBV_WR_RDMA_READ, rd, 5000, mrd->lkey, 8, peer.addr + 8192,
	     peer.rkey, 0);
	{
		struct ibv_wc w = wait1();

		ok(w.status == IBV_WC_SUCCESS && check(rd, 5000, 5) == -1,
		   "and its data is there (READ back)");
	}

	/* atomics on the server's counter, just past the window */
	{
		uint64_t ca = peer.addr + BIG, expect = 0;
		int i, good = 1;
		struct ibv_wc w;

		for (i = 0; i < 10; i++) {
			struct ibv_sge sge = {(uintptr_t)at, 8, mat->lkey};
			struct ibv_send_wr wr, *bad;

			memset(&wr, 0, sizeof(wr));
			wr.wr_id = 9;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.wr.atomic.remote_addr = ca;
			wr.wr.atomic.rkey = peer.rkey;
			wr.wr.atomic.compare_add = 5;
			if (ibv_post_send(qp, &wr, &bad))
				good = 0;
			w = wait1();
			if (w.status != IBV_WC_SUCCESS || *at != expect)
				good = 0;
			expect += 5;
		}
		ok(good, "10 fetch-and-add return 0, 5, ..., 45");
		{
			struct ibv_sge sge = {(uintptr_t)at, 8, mat->lkey};
			struct ibv_send_wr wr, *bad;

			memset(&wr, 0, sizeof(wr));
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.wr.atomic.remote_addr = ca;
			wr.wr.atomic.rkey = peer.rkey;
			wr.wr.atomic.compare_add = 50;
			wr.wr.atomic.swap = 1000;
			ibv_post_send(qp, &wr, &bad);
			w = wait1();
			ok(w.status == IBV_WC_SUCCESS && *at == 50,
			   "compare-and-swap 50 -> 1000 returns 50");
		}
	}

	/* the end of the stream, then the server's own count, by TCP */
	post(IBV_WR_SEND_WITH_IMM, tx, 0, mtx->lkey, 11, 0, 0, BYE_IMM);
	{
		struct ibv_wc w = wait1();

		ok(w.status == IBV_WC_SUCCESS && w.wr_id == 11,
		   "the last SEND completes");
	}
	xfer(fd, report, sizeof(report), 0);
	is_int(report[0], seq, "the server received every message once");
	is_int(report[1], 0, "... each with the right data");
	is_int(report[2], 1, "... and one WRITE_WITH_IMM");

	/*
	 * A bad rkey: REM_ACCESS_ERR, the QP in ERR, what follows flushed.
	 * The responder sends its NAK once and goes to ERR (class C, as
	 * rxe's do_class_ac_error): if the network drops that NAK, the
	 * WRITE's retransmissions meet a QP in ERR and the requester ends
	 * in RETRY_EXC_ERR, on hardware too.  So under a lossy fault hook
	 * (or a corrupting one: a corrupted NAK is dropped for its ICRC),
	 * or a lossy path (RC_PEER_LOSSY=1: tc drops on a host's link),
	 * either status is right; without loss only REM_ACCESS_ERR is.
	 */
	post(IBV_WR_RDMA_WRITE, tx, 16, mtx->lkey, 10, peer.addr,
	     peer.rkey ^ 0x5a5a00, 0);
	{
		const char *fault = getenv("SOFTRDMA_TEST_NETFAULT");
		int lossy = (fault && (strstr(fault, "drop=") ||
				       strstr(fault, "corrupt="))) ||
			    getenv("RC_PEER_LOSSY");
		struct ibv_wc w = wait1();
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qi;

		ok(w.wr_id == 10 &&
			   (w.status == IBV_WC_REM_ACCESS_ERR ||
			    (lossy && w.status == IBV_WC_RETRY_EXC_ERR)),
		   "a WRITE with a bad rkey: %s%s", ibv_wc_status_str(w.status),
		   lossy ? " (or its NAK was lost: RETRY_EXC_ERR)" : "");
		ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi);
		is_int(qa.qp_state, IBV_QPS_ERR, "the QP is in ERR");
	}

	xfer(fd, report, 1, 1);
	close(fd);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mtx);
	ibv_dereg_mr(mrx);
	ibv_dereg_mr(mrd);
	ibv_dereg_mr(mat);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(ch);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(tx);
	free(rx);
	free(rd);
	free(at);
	return done_testing();
}

/*
 * cut -- the link is cut (or the server killed) under outstanding WRs:
 * one SEND echoed first (the path works), then "# cut" on stdout and a
 * line awaited on stdin while the caller cuts; then NCUT SENDs of 64 KiB
 * are posted.  The first must end in RETRY_EXC_ERR, not before the QP's
 * (retry_cnt + 1) timeouts, the rest flushed, the QP in ERR; the time
 * taken is reported next to what timeout and retry_cnt allow.
 */
#define NCUT 8
static int cut(const char *host, int port)
{
	uint8_t *tx = aligned_alloc(4096, BIG), *rx = aligned_alloc(4096, BIG);
	struct ibv_mr *mtx, *mrx;
	struct info peer;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_wc w;
	double t0, el = 0, allow, tmo;
	int fd, i, k, exc = 0, flushed = 0, other = 0;
	char line[16];

	if (!tx || !rx)
		bail_out("memory");
	setup();
	mtx = ibv_reg_mr(pd, tx, BIG, IBV_ACCESS_LOCAL_WRITE);
	mrx = ibv_reg_mr(pd, rx, BIG, IBV_ACCESS_LOCAL_WRITE);
	if (!mtx || !mrx)
		bail_out("reg_mr");
	fd = peer_connect(host, port, mtx, &peer);
	fill(tx, 4096, 0);
	post_recv(rx, BIG, mrx->lkey, 2);
	post(IBV_WR_SEND, tx, 4096, mtx->lkey, 1, 0, 0, 0);
	k = 0;
	for (i = 0; i < 2; i++) {
		w = wait1();
		k += w.status == IBV_WC_SUCCESS;
	}
	ok(k == 2 && check(rx, 4096, 0) == -1,
	   "a SEND of 4 KiB echoed before the cut");
	printf("# cut\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		bail_out("no go-ahead on stdin");
	t0 = now_ms();
	for (i = 0; i < NCUT; i++)
		post(IBV_WR_SEND, tx, 65536, mtx->lkey, 100 + (uint64_t)i, 0, 0,
		     0);
	for (i = 0; i < NCUT; i++) {
		w = wait1();
		if (i == 0)
			el = now_ms() - t0;
		if (w.status == IBV_WC_RETRY_EXC_ERR && w.wr_id == 100 && !i)
			exc++;
		else if (w.status == IBV_WC_WR_FLUSH_ERR &&
			 w.wr_id == 100 + (uint64_t)i)
			flushed++;
		else if (other++ < 3)
			diag("completion %d: wr %llu status %d", i,
			     (unsigned long long)w.wr_id, (int)w.status);
	}
	tmo = 4.096e-3 * (double)(1ull << qp_timeout); /* ms */
	allow = tmo * (qp_retry + 1);
	ok(exc == 1, "the first outstanding SEND ends in RETRY_EXC_ERR");
	is_int(flushed, NCUT - 1, "the other SENDs are flushed, in order");
	ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi);
	is_int(qa.qp_state, IBV_QPS_ERR, "the QP is in ERR");
	/* a lower bound only: the transport never gives up early; how late
	 * it is depends on the machine's load, so it is reported, not
	 * asserted */
	ok(el >= allow - 1, "not before (retry_cnt + 1) x timeout");
	diag("RETRY_EXC_ERR after %.1f ms; timeout %d (%.1f ms) x "
	     "(retry_cnt %d + 1) = %.1f ms",
	     el, qp_timeout, tmo, qp_retry, allow);
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

/*
 * The last word (rc_peer lastserver PORT HOW / lastclient SERVER PORT): the
 * server busy-polls one SEND in and exits at once, its QP left to exit;
 * the client's SEND completes with success all the same (an HCA
 * acknowledged it as it came; softrdma holds the ACK of what a poll took
 * for the application's next send, and sends it at exit).  With HOW
 * "destroy" the server destroys its QP first.
 */
/* polled_server -- a server of PORT whose 4 KiB at *BUF (*MR) take the
 * receives POST_N posts (each N bytes); once connected it polls for a
 * while before it tells the client it is ready, so that the packets are
 * then ours to take, not the receive thread's (it leaves the sockets to
 * a poller); the TCP connection, or -1 when a completion came early */
static int polled_server(int port, uint8_t **buf, struct ibv_mr **mr,
			 int post_n, uint32_t n)
{
	struct info me, peer;
	struct ibv_wc wc;
	double t0;
	int fd, r, i;

	*buf = aligned_alloc(4096, 4096);
	if (!*buf)
		bail_out("memory");
	setup();
	*mr = ibv_reg_mr(pd, *buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!*mr)
		bail_out("reg_mr");
	my_info(&me, *mr);
	fd = peer_accept(port, &me, &peer);
	for (i = 0; i < post_n; i++)
		post_recv(*buf + i * n, n, (*mr)->lkey, (uint64_t)i);
	t0 = now_ms();
	while ((r = ibv_poll_cq(cq, 1, &wc)) == 0 && now_ms() - t0 < 200)
		;
	if (r)
		return -1;
	xfer(fd, &me, 1, 1); /* ready */
	return fd;
}

static int last_server(int port, const char *how)
{
	uint8_t *buf;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	int r;

	if (polled_server(port, &buf, &mr, 1, 4096) < 0)
		return 1;
	while ((r = ibv_poll_cq(cq, 1, &wc)) == 0)
		;
	if (r != 1 || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV)
		return 1;
	if (!strcmp(how, "destroy") && ibv_destroy_qp(qp))
		return 1;
	exit(0);
}

/* polled_client -- a client of the polled_server at HOST:PORT, its 4 KiB
 * at *TX (*MR); the TCP connection, once the server is ready */
static int polled_client(const char *host, int port, uint8_t **tx,
			 struct ibv_mr **mr)
{
	struct info peer;

	*tx = aligned_alloc(4096, 4096);
	if (!*tx)
		bail_out("memory");
	setup();
	*mr = ibv_reg_mr(pd, *tx, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!*mr)
		bail_out("reg_mr");
	return peer_connect(host, port, *mr, &peer);
}

static int last_client(const char *host, int port)
{
	uint8_t *tx;
	struct ibv_mr *mr;
	struct ibv_wc w;
	int fd = polled_client(host, port, &tx, &mr);

	fill(tx, 64, 0);
	if (post(IBV_WR_SEND, tx, 64, mr->lkey, 1, 0, 0, 0))
		bail_out("post");
	w = wait1();
	ok(w.status == IBV_WC_SUCCESS && w.wr_id == 1,
	   "the SEND the server took before it exited completes (%s)",
	   ibv_wc_status_str(w.status));
	close(fd);
	return done_testing();
}

/*
 * A receiver that stops polling (rc-hosts.sh "stall"), STALL_ROUNDS
 * times: the server takes a SEND by polling (its ACK is then held for a
 * send of its own, soft/net.c ack_hold) and touches no verb until the
 * client says the round is done; meanwhile the client's SEND must
 * complete, and a second one, which comes to a process nobody polls in.
 * The client runs with retry_cnt 0: a requester's timer that fires (an
 * ACK held or owed and not sent, as an HCA sends it whatever the
 * application does) ends its QP in RETRY_EXC_ERR.
 */
#define STALL_ROUNDS 8

static int stall_server(int port)
{
	uint8_t *buf, verdict = 1, done = 1;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	double t0;
	int fd, r, i;

	fd = polled_server(port, &buf, &mr, 2 * STALL_ROUNDS, 64);
	if (fd < 0)
		return 1;
	for (i = 0; i < STALL_ROUNDS && verdict && done == 1; i++) {
		while ((r = ibv_poll_cq(cq, 1, &wc)) == 0)
			;
		verdict = r == 1 && wc.status == IBV_WC_SUCCESS &&
			  wc.wr_id == (uint64_t)(2 * i);
		xfer(fd, &done, 1, 0); /* 1: the client's SENDs completed */
		/* polling (no CQ armed: our receive thread would then read
		 * the socket for 10 ms, and take the next round's SEND) */
		t0 = now_ms();
		while ((r = ibv_poll_cq(cq, 1, &wc)) == 0 &&
		       now_ms() - t0 < TMO_MS)
			;
		verdict &= r == 1 && wc.status == IBV_WC_SUCCESS &&
			   wc.wr_id == (uint64_t)(2 * i + 1);
	}
	verdict &= done == 1;
	for (i = 0; i < 2 * STALL_ROUNDS && verdict; i++)
		verdict = check(buf + i * 64, 64, (uint32_t)i) < 0;
	xfer(fd, &verdict, 1, 1);
	close(fd);
	return !verdict;
}

static int stall_client(const char *host, int port)
{
	uint8_t *tx, verdict = 0;
	struct ibv_mr *mr;
	struct ibv_wc w[2];
	int fd = polled_client(host, port, &tx, &mr), i, k, good = 1;
	const char *e = getenv("STALL_WAIT_MS");
	int wait_ms = e ? atoi(e) : 60;

	if (wait_ms < 1 || wait_ms > 10000)
		bail_out("STALL_WAIT_MS 1..10000");
	for (i = 0; i < 2 * STALL_ROUNDS; i++)
		fill(tx + i * 64, 64, (uint32_t)i);
	for (i = 0; i < STALL_ROUNDS && good; i++) {
		/* for the server's receive thread to see it poll and leave
		 * the socket to it: longer than that thread's longest sleep
		 * (50 ms, or the server's SOFTRDMA_NET_IDLE_MS) */
		usleep((useconds_t)wait_ms * 1000);
		for (k = 0; k < 2; k++) {
			/* the second after the server took the first: it
			 * polls no more until this round is done */
			if (post(IBV_WR_SEND, tx + (2 * i + k) * 64, 64,
				 mr->lkey, (uint64_t)(2 * i + k), 0, 0, 0))
				bail_out("post");
			w[k] = wait1();
			good &= w[k].status == IBV_WC_SUCCESS &&
				w[k].wr_id == (uint64_t)(2 * i + k);
		}
		ok(good,
		   "round %d: the SEND a polling server took and one sent "
		   "after it stopped polling are acknowledged before a "
		   "timeout of %d (%s, %s)",
		   i, qp_timeout, ibv_wc_status_str(w[0].status),
		   ibv_wc_status_str(w[1].status));
		verdict = (uint8_t)good;
		xfer(fd, &verdict, 1, 1); /* the round is done */
	}
	xfer(fd, &verdict, 1, 0);
	ok(verdict == 1, "the server received the %d SENDs intact, in order",
	   2 * i);
	close(fd);
	return done_testing();
}

/*
 * Memory windows between hosts (tests/netns/mw-hosts.sh):
 *
 *   rc_peer mwserver PORT              the windows' owner
 *   rc_peer mwclient SERVER PORT MODE  TAP on stdout; MODE full or loss
 *
 * The server's memory is reached only through windows: a type 1 window
 * (ibv_bind_mw) and two type 2 windows (BIND_MW work requests on each
 * case's QP), one zero based with every remote access, one read only.
 * The client drives cases over TCP; each case is a fresh QP pair: "A"
 * WRITE and READ back through each window, atomics, a READ of the read
 * only one, SEND_WITH_INV of the type 2 window, then (full) a WRITE
 * through it: REM_ACCESS_ERR; "B" the window bound again (new rkey),
 * WRITE and READ, then a READ past the type 1 window's end; "C" a WRITE
 * through the read-only window; "L" the window invalidated locally by
 * the server before the client's READ; "G" SEND_WITH_INV of the type 1
 * window's rkey (REM_INV_REQ_ERR); "Q" the server frees everything and
 * says whether its PD went (nothing left bound to it).
 */
#define MW_MEM	 (256u * 1024)
#define MW_L1	 (65536u + 100)
#define MW_L2	 (65536u + 100)
#define MW_LR	 4096u
#define MW_O1	 4096u
#define MW_O2	 81920u
#define MW_OR	 163840u
#define MW_ORECV 204800u

struct mw_keys {
	uint32_t k1, k2, kr, pad;
	uint64_t a1, a2, ar; /* a2: 0, the window is zero based */
};

/* what the client asks the server to look at ('D'), and its answer */
struct mw_ask {
	uint8_t op, pad[7];
	uint64_t swap1, add2; /* the atomics' results at w1+16, w2+8 */
	uint32_t check;	      /* 1: w1 holds seq 1, w2 seq 2 (A); 2: w2
				 seq 4 (B) */
	uint32_t pad2;
};

struct mw_report {
	int32_t inv_seen, inv_rkey, bad1, bad2, qp_state, recv_err;
};

static int wait_status(enum ibv_wc_opcode opc, const char *what)
{
	struct ibv_wc wc = wait1();

	if (wc.status != IBV_WC_SUCCESS || wc.opcode != opc) {
		fprintf(stderr, "server: %s: %s (opcode %d)\n", what,
			(int)wc.status == -1 ? "no completion"
					     : ibv_wc_status_str(wc.status),
			(int)wc.opcode);
		return -1;
	}
	return 0;
}

/* mw_post_local -- BIND_MW of mw over [addr, addr+len) of mr, or (mr
 * NULL) LOCAL_INV of rkey; signaled, waited for */
static int mw_post_local(struct ibv_mw *mw, struct ibv_mr *mr, uint8_t *addr,
			 uint32_t len, unsigned int access, uint32_t rkey)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 77;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (mr) {
		wr.opcode = IBV_WR_BIND_MW;
		wr.bind_mw.mw = mw;
		wr.bind_mw.rkey = rkey;
		wr.bind_mw.bind_info.mr = mr;
		wr.bind_mw.bind_info.addr = (uintptr_t)addr;
		wr.bind_mw.bind_info.length = len;
		wr.bind_mw.bind_info.mw_access_flags = access;
	} else {
		wr.opcode = IBV_WR_LOCAL_INV;
		wr.invalidate_rkey = rkey;
	}
	if (ibv_post_send(qp, &wr, &bad))
		return -1;
	return wait_status(mr ? IBV_WC_BIND_MW : IBV_WC_LOCAL_INV,
			   mr ? "bind" : "local invalidate");
}

static long mw_region_bad(const uint8_t *b, uint32_t len, uint32_t seq,
			  uint32_t at, uint64_t v)
{
	uint8_t want[8];
	uint32_t i;

	memcpy(want, &v, 8);
	for (i = 0; i < len; i++) {
		uint8_t e = i >= at && i < at + 8 ? want[i - at] : pat(seq, i);

		if ((i >= 4 || i >= at) && b[i] != e)
			return i;
	}
	return -1;
}

static int mw_server(int port)
{
	uint8_t *mem = aligned_alloc(4096, MW_MEM);
	struct ibv_mw *w1, *w2, *wr;
	struct ibv_mw_bind b1;
	struct ibv_mr *mr;
	struct info me, peer;
	struct mw_keys k;
	uint32_t k2 = 0, kr = 0;
	int fd, first = 1, ret = 0;

	if (!mem)
		bail_out("memory");
	memset(mem, 0, MW_MEM);
	fill(mem + MW_OR, MW_LR, 3);
	setup();
	mr = ibv_reg_mr(pd, mem, MW_MEM,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND);
	w1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	w2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	wr = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	if (!mr || !w1 || !w2 || !wr)
		bail_out("reg_mr, alloc_mw: %s", strerror(errno));
	k2 = w2->rkey;
	kr = wr->rkey;
	fd = tcp_accept(port);
	for (;;) {
		struct mw_ask q;
		int i;

		xfer(fd, &q, sizeof(q), 0);
		if (q.op == 'Q')
			break;
		new_qp();
		my_info(&me, mr);
		xfer(fd, &me, sizeof(me), 1);
		xfer(fd, &peer, sizeof(peer), 0);
		connect_qp(&me, &peer);
		for (i = 0; i < 2; i++)
			post_recv(mem + MW_ORECV + (size_t)i * 4096, 4096,
				  mr->lkey, (uint64_t)i);
		if (first) { /* a type 1 window: the PD's, not a QP's */
			memset(&b1, 0, sizeof(b1));
			b1.wr_id = 76;
			b1.send_flags = IBV_SEND_SIGNALED;
			b1.bind_info.mr = mr;
			b1.bind_info.addr = (uintptr_t)(mem + MW_O1);
			b1.bind_info.length = MW_L1;
			b1.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE |
						       IBV_ACCESS_REMOTE_READ |
						       IBV_ACCESS_REMOTE_ATOMIC;
			if (ibv_bind_mw(qp, w1, &b1) ||
			    wait_status(IBV_WC_BIND_MW, "bind type 1"))
				bail_out("type 1 bind");
		} else if (mw_post_local(NULL, NULL, NULL, 0, 0, k2) ||
			   mw_post_local(NULL, NULL, NULL, 0, 0, kr)) {
			bail_out("local invalidate before a new bind");
		}
		first = 0;
		/* type 2: bound to this QP, a new rkey each time */
		k2 = ibv_inc_rkey(k2);
		kr = ibv_inc_rkey(kr);
		if (mw_post_local(w2, mr, mem + MW_O2, MW_L2,
				  IBV_ACCESS_REMOTE_WRITE |
					  IBV_ACCESS_REMOTE_READ |
					  IBV_ACCESS_REMOTE_ATOMIC |
					  IBV_ACCESS_ZERO_BASED,
				  k2) ||
		    mw_post_local(wr, mr, mem + MW_OR, MW_LR,
				  IBV_ACCESS_REMOTE_READ, kr))
			bail_out("type 2 bind");
		if (q.op == 'L' && mw_post_local(NULL, NULL, NULL, 0, 0, k2))
			bail_out("local invalidate");
		memset(&k, 0, sizeof(k));
		k.k1 = w1->rkey;
		k.k2 = k2;
		k.kr = kr;
		k.a1 = (uintptr_t)(mem + MW_O1);
		k.a2 = 0;
		k.ar = (uintptr_t)(mem + MW_OR);
		xfer(fd, &k, sizeof(k), 1);
		for (;;) { /* 'D': look and report; 'E': the case is over */
			struct mw_report r;
			struct ibv_qp_attr qa;
			struct ibv_qp_init_attr qia;
			struct ibv_wc wc;

			xfer(fd, &q, sizeof(q), 0);
			if (q.op != 'D')
				break;
			memset(&r, 0, sizeof(r));
			while (ibv_poll_cq(cq, 1, &wc) == 1) {
				if (wc.status == IBV_WC_SUCCESS &&
				    (wc.wc_flags & IBV_WC_WITH_INV)) {
					r.inv_seen++;
					r.inv_rkey =
						(int32_t)wc.invalidated_rkey;
				} else if (wc.status != IBV_WC_SUCCESS &&
					   wc.status != IBV_WC_WR_FLUSH_ERR) {
					r.recv_err = wc.status;
				}
			}
			r.bad1 = r.bad2 = -1;
			if (q.check == 1) {
				r.bad1 = (int32_t)mw_region_bad(
					mem + MW_O1, MW_L1, 1, 16, q.swap1);
				r.bad2 = (int32_t)mw_region_bad(
					mem + MW_O2, MW_L2, 2, 8, q.add2);
			} else if (q.check == 2) {
				r.bad2 = (int32_t)check(mem + MW_O2, MW_L2, 4);
			}
			r.qp_state = ibv_query_qp(qp, &qa, IBV_QP_STATE, &qia)
					     ? -1
					     : (int32_t)qa.qp_state;
			xfer(fd, &r, sizeof(r), 1);
		}
	}
	/* everything goes, the PD last: it refuses while a window, an MR
	 * or a QP is left on it */
	{
		int32_t leak = 0;

		leak |= ibv_destroy_qp(qp) ? 1 : 0;
		leak |= ibv_dealloc_mw(w1) ? 2 : 0;
		leak |= ibv_dealloc_mw(w2) ? 4 : 0;
		leak |= ibv_dealloc_mw(wr) ? 8 : 0;
		leak |= ibv_dereg_mr(mr) ? 16 : 0;
		leak |= ibv_destroy_cq(cq) ? 32 : 0;
		leak |= ibv_destroy_comp_channel(ch) ? 64 : 0;
		leak |= ibv_dealloc_pd(pd) ? 128 : 0;
		leak |= ibv_close_device(ctx) ? 256 : 0;
		xfer(fd, &leak, sizeof(leak), 1);
		ret = leak != 0;
	}
	close(fd);
	free(mem);
	return ret;
}

/* mw_post -- one signaled WR; the atomics' operands in cmp/swap */
static int mw_post(enum ibv_wr_opcode op, void *buf, uint32_t len,
		   uint32_t lkey, uint64_t id, uint64_t raddr, uint32_t rkey,
		   uint64_t cmp, uint64_t swap, uint32_t inv)
{
	struct ibv_sge sge = {(uintptr_t)buf, len, lkey};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD ||
	    op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = cmp;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	wr.invalidate_rkey = inv;
	return ibv_post_send(qp, &wr, &bad);
}

/* mw_do -- post one WR and wait for its completion: its status */
static int mw_do(enum ibv_wr_opcode op, void *buf, uint32_t len, uint32_t lkey,
		 uint64_t raddr, uint32_t rkey, uint64_t cmp, uint64_t swap,
		 uint32_t inv)
{
	struct ibv_wc wc;

	if (mw_post(op, buf, len, lkey, 9, raddr, rkey, cmp, swap, inv))
		return -2;
	wc = wait1();
	return (int)wc.status;
}

static struct mw_keys mw_case(int fd, char op, struct ibv_mr *mr)
{
	struct mw_ask q;
	struct info me, peer;
	struct mw_keys k;

	memset(&q, 0, sizeof(q));
	q.op = (uint8_t)op;
	xfer(fd, &q, sizeof(q), 1);
	new_qp();
	my_info(&me, mr);
	xfer(fd, &peer, sizeof(peer), 0);
	xfer(fd, &me, sizeof(me), 1);
	connect_qp(&me, &peer);
	xfer(fd, &k, sizeof(k), 0);
	return k;
}

static struct mw_report mw_look(int fd, uint32_t check, uint64_t swap1,
				uint64_t add2)
{
	struct mw_ask q;
	struct mw_report r;

	memset(&q, 0, sizeof(q));
	q.op = 'D';
	q.check = check;
	q.swap1 = swap1;
	q.add2 = add2;
	xfer(fd, &q, sizeof(q), 1);
	xfer(fd, &r, sizeof(r), 0);
	return r;
}

static void mw_end(int fd, char op)
{
	struct mw_ask q;

	memset(&q, 0, sizeof(q));
	q.op = (uint8_t)op;
	xfer(fd, &q, sizeof(q), 1);
}

/* mw_refused -- a WR that must end with REM_ACCESS_ERR (or, for
 * SEND_WITH_INV, REM_INV_REQ_ERR) and a READ posted behind it that is
 * flushed: the QP is in ERR, on both sides.  RETRY_EXC_ERR is right too:
 * the responder NAKs once and goes to ERR (rxe's class C errors), so a
 * NAK lost on the way (softrdma's wire loses what a full socket buffer
 * refuses, as a loaded host's does) leaves the requester retrying until
 * its retries run out, on hardware as well; the responder's side (ERR,
 * the receive's error) is checked either way */
static void mw_refused(int fd, const char *what, enum ibv_wr_opcode op,
		       uint8_t *buf, uint32_t len, uint32_t lkey,
		       uint64_t raddr, uint32_t rkey, uint32_t inv,
		       const struct mw_keys *k, int want)
{
	struct ibv_wc a, b;
	struct mw_report r;
	int ok1, ok2;

	ok1 = !mw_post(op, buf, len, lkey, 21, raddr, rkey, 0, 0, inv);
	ok2 = !mw_post(IBV_WR_RDMA_READ, buf + 4096, 64, lkey, 22, k->a1, k->k1,
		       0, 0, 0);
	a = wait1();
	b = wait1();
	if (a.status == IBV_WC_RETRY_EXC_ERR)
		diag("%s: its NAK was lost: RETRY_EXC_ERR", what);
	ok(ok1 && ok2 && a.wr_id == 21 &&
		   ((int)a.status == want ||
		    a.status == IBV_WC_RETRY_EXC_ERR) &&
		   b.wr_id == 22 && b.status == IBV_WC_WR_FLUSH_ERR,
	   "%s: %s, the READ behind it %s", what,
	   (int)a.status == -1 ? "no completion" : ibv_wc_status_str(a.status),
	   (int)b.status == -1 ? "no completion" : ibv_wc_status_str(b.status));
	r = mw_look(fd, 0, 0, 0);
	ok(r.qp_state == IBV_QPS_ERR, "%s: the server's QP is in ERR (%d)",
	   what, r.qp_state);
	if (want == IBV_WC_REM_INV_REQ_ERR)
		ok(r.recv_err == IBV_WC_REM_INV_REQ_ERR,
		   "%s: the server's receive completes with %s", what,
		   ibv_wc_status_str((enum ibv_wc_status)r.recv_err));
	mw_end(fd, 'E');
}

static int mw_client(const char *host, int port, int full)
{
	uint8_t *mem = aligned_alloc(4096, 4 * BIG);
	uint8_t *tx, *rd, *at;
	struct ibv_mr *mr;
	struct mw_keys k;
	struct mw_report r;
	uint64_t v, old1, old2, want1, want2;
	int fd, st;
	int32_t leak = -1;

	if (!mem)
		bail_out("memory");
	tx = mem;
	rd = mem + BIG;
	at = mem + 2 * BIG;
	setup();
	mr = ibv_reg_mr(pd, mem, 4 * BIG, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		bail_out("reg_mr");
	fd = tcp_connect(host, port);

	/* A: every operation through each window, byte by byte */
	k = mw_case(fd, 'A', mr);
	ok(k.k1 != k.k2 && k.k1 != k.kr,
	   "A: keys of a type 1 and two type 2 "
	   "windows: %#x %#x %#x",
	   k.k1, k.k2, k.kr);
	fill(tx, MW_L1, 1);
	memset(rd, 0, MW_L1);
	st = mw_do(IBV_WR_RDMA_WRITE, tx, MW_L1, mr->lkey, k.a1, k.k1, 0, 0, 0);
	ok(st == 0, "A: WRITE of %u B through the type 1 window: %d", MW_L1,
	   st);
	st = mw_do(IBV_WR_RDMA_READ, rd, MW_L1, mr->lkey, k.a1, k.k1, 0, 0, 0);
	ok(st == 0 && check(rd, MW_L1, 1) == -1,
	   "A: READ back through it: %d, bad at %ld", st, check(rd, MW_L1, 1));
	fill(tx, MW_L2, 2);
	memset(rd, 0, MW_L2);
	st = mw_do(IBV_WR_RDMA_WRITE, tx, MW_L2, mr->lkey, 0, k.k2, 0, 0, 0);
	ok(st == 0, "A: WRITE of %u B through the zero-based type 2 window: %d",
	   MW_L2, st);
	st = mw_do(IBV_WR_RDMA_READ, rd, MW_L2, mr->lkey, 0, k.k2, 0, 0, 0);
	ok(st == 0 && check(rd, MW_L2, 2) == -1,
	   "A: READ back through it: %d, bad at %ld", st, check(rd, MW_L2, 2));
	memcpy(&old2, tx + 8, 8);
	memset(at, 0, 8);
	st = mw_do(IBV_WR_ATOMIC_FETCH_AND_ADD, at, 8, mr->lkey, 8, k.k2, 5, 0,
		   0);
	memcpy(&v, at, 8);
	want2 = old2 + 5;
	ok(st == 0 && v == old2,
	   "A: fetch-and-add at the type 2 window's "
	   "offset 8: %d, old %#llx",
	   st, (unsigned long long)v);
	fill(tx, MW_L1, 1);
	memcpy(&old1, tx + 16, 8);
	want1 = 0x1122334455667788ull;
	memset(at, 0, 8);
	st = mw_do(IBV_WR_ATOMIC_CMP_AND_SWP, at, 8, mr->lkey, k.a1 + 16, k.k1,
		   old1, want1, 0);
	memcpy(&v, at, 8);
	ok(st == 0 && v == old1,
	   "A: compare-and-swap at the type 1 window's "
	   "offset 16: %d, old %#llx",
	   st, (unsigned long long)v);
	memset(rd, 0, 64);
	st = mw_do(IBV_WR_RDMA_READ, rd, 8, mr->lkey, 8, k.k2, 0, 0, 0);
	memcpy(&v, rd, 8);
	ok(st == 0 && v == want2, "A: the sum read back: %#llx",
	   (unsigned long long)v);
	st = mw_do(IBV_WR_RDMA_READ, rd, 8, mr->lkey, k.a1 + 16, k.k1, 0, 0, 0);
	memcpy(&v, rd, 8);
	ok(st == 0 && v == want1, "A: the swapped value read back: %#llx",
	   (unsigned long long)v);
	memset(rd, 0, MW_LR);
	st = mw_do(IBV_WR_RDMA_READ, rd, MW_LR, mr->lkey, k.ar, k.kr, 0, 0, 0);
	ok(st == 0 && check(rd, MW_LR, 3) == -1,
	   "A: READ of %u B through the read-only window: %d", MW_LR, st);
	memset(tx, 0x5a, 8);
	st = mw_do(IBV_WR_SEND_WITH_INV, tx, 8, mr->lkey, 0, 0, 0, 0, k.k2);
	ok(st == 0, "A: SEND_WITH_INV of the type 2 window: %d", st);
	r = mw_look(fd, 1, want1, want2);
	ok(r.inv_seen == 1 && (uint32_t)r.inv_rkey == k.k2,
	   "A: the server's receive says WITH_INV of %#x (%d seen)",
	   (uint32_t)r.inv_rkey, r.inv_seen);
	ok(r.bad1 == -1 && r.bad2 == -1 && r.qp_state == IBV_QPS_RTS,
	   "A: the server's memory holds every byte (bad at %d, %d), its QP "
	   "in RTS (%d)",
	   r.bad1, r.bad2, r.qp_state);
	if (!full) {
		mw_end(fd, 'E');
		goto quit;
	}
	mw_refused(fd, "A: a WRITE through the invalidated window",
		   IBV_WR_RDMA_WRITE, tx, 64, mr->lkey, 0, k.k2, 0, &k,
		   IBV_WC_REM_ACCESS_ERR);

	/* B: bound again (a new rkey): it works; then out of bounds */
	k = mw_case(fd, 'B', mr);
	fill(tx, MW_L2, 4);
	memset(rd, 0, MW_L2);
	st = mw_do(IBV_WR_RDMA_WRITE, tx, MW_L2, mr->lkey, 0, k.k2, 0, 0, 0);
	ok(st == 0, "B: WRITE through the window bound again (rkey %#x): %d",
	   k.k2, st);
	st = mw_do(IBV_WR_RDMA_READ, rd, MW_L2, mr->lkey, 0, k.k2, 0, 0, 0);
	ok(st == 0 && check(rd, MW_L2, 4) == -1,
	   "B: READ back through it: %d, bad at %ld", st, check(rd, MW_L2, 4));
	r = mw_look(fd, 2, 0, 0);
	ok(r.bad2 == -1, "B: the server's memory holds every byte (bad at %d)",
	   r.bad2);
	mw_refused(fd, "B: a READ 4 bytes past the type 1 window's end",
		   IBV_WR_RDMA_READ, rd, 8, mr->lkey, k.a1 + MW_L1 - 4, k.k1, 0,
		   &k, IBV_WC_REM_ACCESS_ERR);

	/* C: a WRITE through the read-only window */
	k = mw_case(fd, 'C', mr);
	mw_refused(fd, "C: a WRITE through the read-only window",
		   IBV_WR_RDMA_WRITE, tx, 16, mr->lkey, k.ar, k.kr, 0, &k,
		   IBV_WC_REM_ACCESS_ERR);

	/* C2: a fetch-and-add through it (no atomic access either) */
	k = mw_case(fd, 'C', mr);
	mw_refused(fd, "C: a fetch-and-add through the read-only window",
		   IBV_WR_ATOMIC_FETCH_AND_ADD, at, 8, mr->lkey, k.ar, k.kr, 0,
		   &k, IBV_WC_REM_ACCESS_ERR);

	/* L: invalidated by its owner (LOCAL_INV) before the READ */
	k = mw_case(fd, 'L', mr);
	mw_refused(fd, "L: a READ through the window its owner invalidated",
		   IBV_WR_RDMA_READ, rd, 64, mr->lkey, 0, k.k2, 0, &k,
		   IBV_WC_REM_ACCESS_ERR);

	/* G: SEND_WITH_INV of a type 1 window's rkey (o10-37.2.26) */
	k = mw_case(fd, 'G', mr);
	mw_refused(fd, "G: SEND_WITH_INV of the type 1 window",
		   IBV_WR_SEND_WITH_INV, tx, 8, mr->lkey, 0, 0, k.k1, &k,
		   IBV_WC_REM_INV_REQ_ERR);
quit:
	mw_end(fd, 'Q');
	xfer(fd, &leak, sizeof(leak), 0);
	ok(leak == 0, "the server freed its windows, MR, QP, CQ and PD (%#x)",
	   (unsigned int)leak);
	close(fd);
	ok(!ibv_destroy_qp(qp) && !ibv_dereg_mr(mr) && !ibv_destroy_cq(cq) &&
		   !ibv_destroy_comp_channel(ch) && !ibv_dealloc_pd(pd) &&
		   !ibv_close_device(ctx),
	   "the client freed everything");
	free(mem);
	return done_testing();
}

/*
 * Large READs (tests/netns/rc-hosts.sh, tools): the server exposes SIZE
 * bytes of a pattern; the client READs them COUNT times in one WR each,
 * checks every byte and prints how long each took (a figure, not a
 * check).  Under loss a lost response packet is asked for again from
 * the gap.
 *
 *   rc_peer rdserver PORT SIZE
 *   rc_peer rdclient SERVER PORT SIZE COUNT   TAP on stdout
 */
static int rd_server(int port, uint32_t size)
{
	uint8_t *mem = aligned_alloc(4096, size + 4096);
	struct info me, peer;
	struct ibv_mr *mr;
	int fd, ret;
	char c = 0;

	if (!mem || !size)
		bail_out("memory, size");
	fill(mem, size, 5);
	setup();
	mr = ibv_reg_mr(pd, mem, size,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		bail_out("reg_mr");
	my_info(&me, mr);
	fd = peer_accept(port, &me, &peer);
	xfer(fd, &me, 1, 1); /* ready */
	xfer(fd, &c, 1, 0);  /* the client is done with our memory */
	ret = ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq) ||
	      ibv_destroy_comp_channel(ch) || ibv_dealloc_pd(pd) ||
	      ibv_close_device(ctx);
	close(fd);
	free(mem);
	return ret;
}

static int rd_client(const char *host, int port, uint32_t size, int count)
{
	uint8_t *mem = aligned_alloc(4096, size + 4096);
	struct info me, peer;
	struct ibv_mr *mr;
	int fd, i, st;
	double t0, worst = 0, sum = 0;
	long bad;

	if (!mem || !size)
		bail_out("memory, size");
	setup();
	mr = ibv_reg_mr(pd, mem, size, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		bail_out("reg_mr");
	fd = peer_connect(host, port, mr, &peer);
	for (i = 0; i < count; i++) {
		struct ibv_wc wc;
		double t;

		memset(mem, 0, size);
		t0 = now_ms();
		if (post(IBV_WR_RDMA_READ, mem, size, mr->lkey, 5, peer.addr,
			 peer.rkey, 0))
			bail_out("post READ");
		wc = wait1();
		t = now_ms() - t0;
		sum += t;
		if (t > worst)
			worst = t;
		st = (int)wc.status;
		bad = st == 0 ? check(mem, size, 5) : 0;
		ok(st == 0 && wc.opcode == IBV_WC_RDMA_READ && bad == -1,
		   "READ %d of %u B: %s, bad at %ld", i + 1, size,
		   st == -1 ? "no completion" : ibv_wc_status_str(wc.status),
		   bad);
	}
	/* timing is a figure for the report, never a check */
	diag("READ of %u B: %.1f ms on average, %.1f ms the slowest, %d runs",
	     size, count ? sum / count : 0.0, worst, count);
	xfer(fd, &me, 1, 1);
	close(fd);
	ok(!ibv_destroy_qp(qp) && !ibv_dereg_mr(mr) && !ibv_destroy_cq(cq) &&
		   !ibv_destroy_comp_channel(ch) && !ibv_dealloc_pd(pd) &&
		   !ibv_close_device(ctx),
	   "the client freed everything");
	free(mem);
	return done_testing();
}

/*
 * The requester's and the responder's rules between hosts
 * (rc-edge-hosts.sh):
 *
 *   rc_peer edgeserver PORT
 *   rc_peer edgeclient SERVER PORT   TAP on stdout
 *
 * IBV_SEND_FENCE: a READ of the server's memory into a buffer, then a
 * SEND of that buffer with FENCE, posted at once: the SEND waits for the
 * READ's data, so the server receives what it read (the IB spec's fence;
 * a SEND built before the READ's response came would carry the old
 * bytes).  Atomics answered from saved results: two fetch-and-adds in
 * flight whose first atomic ACK is lost (SOFTRDMA_TEST_NETFAULT=atmack=N
 * on the server) are asked again and answered from the result saved for
 * each PSN, never executed twice, the older one too (max_dest_rd_atomic
 * 4): each returns its own original value and the counter moved by
 * exactly one per WR.  SQD (edge_sqd): what was begun completes before
 * IBV_EVENT_SQ_DRAINED, what is posted in SQD waits for RTS.
 */
#define EDGE_LEN    65536
#define EDGE_FENCES 4
#define EDGE_RECVS  (EDGE_FENCES + 3) /* and the three SQD SENDs */
#define EDGE_ATOMIC 6

static int edge_server(int port)
{
	uint8_t *mem = aligned_alloc(4096, EDGE_LEN + 4096);
	uint8_t *rx = aligned_alloc(4096, (size_t)EDGE_RECVS * EDGE_LEN);
	struct ibv_mr *mr, *rmr;
	struct info me, peer;
	uint32_t bad = 0;
	int fd, i, ret;
	char c = 0;

	if (!mem || !rx)
		bail_out("memory");
	fill(mem, EDGE_LEN, 9);
	memset(mem + EDGE_LEN, 0, 8); /* the atomics' counter */
	setup();
	mr = ibv_reg_mr(pd, mem, EDGE_LEN + 8,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC);
	rmr = ibv_reg_mr(pd, rx, (size_t)EDGE_RECVS * EDGE_LEN,
			 IBV_ACCESS_LOCAL_WRITE);
	if (!mr || !rmr)
		bail_out("reg_mr");
	my_info(&me, mr);
	fd = peer_accept(port, &me, &peer);
	for (i = 0; i < EDGE_RECVS; i++)
		if (post_recv(rx + (size_t)i * EDGE_LEN, EDGE_LEN, rmr->lkey,
			      (uint64_t)i))
			bail_out("post_recv");
	xfer(fd, &me, 1, 1); /* ready */
	for (i = 0; i < EDGE_FENCES; i++) {
		struct ibv_wc wc = wait1();

		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
		    wc.byte_len != EDGE_LEN || wc.wr_id >= EDGE_FENCES ||
		    check(rx + wc.wr_id * EDGE_LEN, EDGE_LEN, 9) != -1) {
			fprintf(stderr,
				"server: fenced SEND %d: %s, %u B, "
				"bad at %ld\n",
				i,
				(int)wc.status == -1
					? "no completion"
					: ibv_wc_status_str(wc.status),
				wc.byte_len,
				wc.status == IBV_WC_SUCCESS &&
						wc.wr_id < EDGE_FENCES
					? check(rx + wc.wr_id * EDGE_LEN,
						EDGE_LEN, 9)
					: 0);
			bad++;
		}
	}
	xfer(fd, &bad, sizeof(bad), 1);
	/* the SQD SENDs: 64 KiB, then 100 B twice, in order */
	bad = 0;
	for (i = EDGE_FENCES; i < EDGE_RECVS; i++) {
		struct ibv_wc wc = wait1();

		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)i ||
		    wc.byte_len != (i == EDGE_FENCES ? EDGE_LEN : 100u)) {
			fprintf(stderr,
				"server: SQD SEND %d: %s, %u B, wr %llu\n",
				i - EDGE_FENCES,
				(int)wc.status == -1
					? "no completion"
					: ibv_wc_status_str(wc.status),
				wc.byte_len, (unsigned long long)wc.wr_id);
			bad++;
		}
	}
	xfer(fd, &bad, sizeof(bad), 1);
	xfer(fd, &c, 1, 0); /* the client is done with our memory */
	ret = ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_dereg_mr(rmr) ||
	      ibv_destroy_cq(cq) || ibv_destroy_comp_channel(ch) ||
	      ibv_dealloc_pd(pd) || ibv_close_device(ctx);
	close(fd);
	free(mem);
	free(rx);
	return ret;
}

/* edge_poll -- the send completions that come within MS (one poll at
 * least), into WC (at most N); how many */
static int edge_poll(struct ibv_wc *wc, int n, double ms)
{
	double end = now_ms() + ms;
	int got = 0, r;

	do { /* once at least, however slow (valgrind) */
		r = ibv_poll_cq(cq, n - got, wc + got);
		if (r < 0)
			bail_out("poll_cq");
		got += r;
		if (!r && got < n)
			usleep(1000);
	} while (got < n && now_ms() < end);
	return got;
}

/*
 * edge_sqd -- SQD between hosts: a 64 KiB SEND in flight when the QP is
 * moved to SQD (en_sqd_async_notify) completes, and only then comes
 * IBV_EVENT_SQ_DRAINED; two SENDs posted in SQD are held (no completion
 * in 300 ms) and go once the QP is back in RTS; the server receives the
 * three, in order (its report on FD)
 */
static void edge_sqd(int fd, uint8_t *mem, struct ibv_mr *mr)
{
	struct ibv_async_event ev;
	struct ibv_qp_attr a;
	struct ibv_wc wc[4];
	uint32_t bad = ~0u;
	int n, fl, drained = 0, early = -1;
	double end;

	fl = fcntl(ctx->async_fd, F_GETFL);
	if (fl < 0 || fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK))
		bail_out("async fd");
	fill(mem, EDGE_LEN, 77);
	if (post(IBV_WR_SEND, mem, EDGE_LEN, mr->lkey, 31, 0, 0, 0))
		bail_out("post SEND");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_SQD;
	a.en_sqd_async_notify = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY))
		bail_out("modify to SQD");
	n = post(IBV_WR_SEND, mem, 100, mr->lkey, 32, 0, 0, 0) ||
	    post(IBV_WR_SEND, mem, 100, mr->lkey, 33, 0, 0, 0);
	ok(n == 0, "SQD: two SENDs posted while the QP drains");
	/* SQ_DRAINED, with the SEND in flight completed by then */
	end = now_ms() + 10000;
	while (!drained && now_ms() < end) {
		if (ibv_get_async_event(ctx, &ev)) {
			usleep(1000);
			continue;
		}
		if (ev.event_type == IBV_EVENT_SQ_DRAINED &&
		    ev.element.qp == qp) {
			drained = 1;
			early = edge_poll(wc, 4, 0.1);
		}
		ibv_ack_async_event(&ev);
	}
	ok(drained && early == 1 && wc[0].wr_id == 31 &&
		   wc[0].status == IBV_WC_SUCCESS,
	   "SQD: SQ_DRAINED once the SEND in flight completed (%s; %d "
	   "completion(s) by then)",
	   drained ? "raised" : "never raised", early);
	n = edge_poll(wc, 4, 300);
	ok(n == 0, "SQD: the SENDs posted in SQD are held (%d completed)", n);
	for (fl = 0; fl < n; fl++)
		diag("SQD: completed wr %llu: %s",
		     (unsigned long long)wc[fl].wr_id,
		     ibv_wc_status_str(wc[fl].status));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		bail_out("modify to RTS");
	n = edge_poll(wc, 2, 10000);
	ok(n == 2 && wc[0].wr_id == 32 && wc[1].wr_id == 33 &&
		   wc[0].status == IBV_WC_SUCCESS &&
		   wc[1].status == IBV_WC_SUCCESS,
	   "SQD: back in RTS, the held SENDs go, in order (%d completed)", n);
	xfer(fd, &bad, sizeof(bad), 0);
	ok(bad == 0,
	   "SQD: the server received the three SENDs in order "
	   "(%u bad)",
	   bad);
}

static int edge_client(const char *host, int port)
{
	uint8_t *mem = aligned_alloc(4096, EDGE_LEN + 4096);
	uint64_t *res;
	struct ibv_mr *mr;
	struct info peer;
	uint32_t bad = ~0u;
	int fd, i, j;

	if (!mem)
		bail_out("memory");
	res = (uint64_t *)(mem + EDGE_LEN);
	setup();
	mr = ibv_reg_mr(pd, mem, EDGE_LEN + 64, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		bail_out("reg_mr");
	fd = peer_connect(host, port, mr, &peer);
	for (i = 0; i < EDGE_FENCES; i++) {
		struct ibv_wc wc[2];
		int st;

		fill(mem, EDGE_LEN, 100 + (uint32_t)i); /* not the server's */
		post_flags = 0;
		st = post(IBV_WR_RDMA_READ, mem, EDGE_LEN, mr->lkey, 1,
			  peer.addr, peer.rkey, 0);
		post_flags = IBV_SEND_FENCE;
		st = st ||
		     post(IBV_WR_SEND, mem, EDGE_LEN, mr->lkey, 2, 0, 0, 0);
		post_flags = 0;
		if (st)
			bail_out("post READ, fenced SEND");
		wc[0] = wait1();
		wc[1] = wait1();
		ok(wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 1 &&
			   wc[1].status == IBV_WC_SUCCESS && wc[1].wr_id == 2,
		   "fence %d: READ of 64 KiB then the fenced SEND of its "
		   "buffer complete in order (%s, %s)",
		   i + 1, ibv_wc_status_str(wc[0].status),
		   ibv_wc_status_str(wc[1].status));
	}
	xfer(fd, &bad, sizeof(bad), 0);
	ok(bad == 0,
	   "the server received what each READ fetched, not the old buffer "
	   "(%u of %d bad)",
	   bad, EDGE_FENCES);
	for (i = 0; i < EDGE_ATOMIC; i++) {
		struct ibv_wc wc[2];
		int st;

		res[0] = res[1] = ~0ull;
		st = post(IBV_WR_ATOMIC_FETCH_AND_ADD, &res[0], 8, mr->lkey, 10,
			  peer.addr + EDGE_LEN, peer.rkey, 1);
		st = st ||
		     post(IBV_WR_ATOMIC_FETCH_AND_ADD, &res[1], 8, mr->lkey, 11,
			  peer.addr + EDGE_LEN, peer.rkey, 1);
		if (st)
			bail_out("post atomics");
		for (j = 0; j < 2; j++)
			wc[j] = wait1();
		ok(wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 10 &&
			   wc[1].status == IBV_WC_SUCCESS &&
			   wc[1].wr_id == 11 && res[0] == (uint64_t)i * 2 &&
			   res[1] == (uint64_t)i * 2 + 1,
		   "atomics %d: two fetch-and-adds in flight, %s and %s, "
		   "original values %llu and %llu (want %d, %d)",
		   i + 1,
		   (int)wc[0].status == -1 ? "no completion"
					   : ibv_wc_status_str(wc[0].status),
		   (int)wc[1].status == -1 ? "no completion"
					   : ibv_wc_status_str(wc[1].status),
		   (unsigned long long)res[0], (unsigned long long)res[1],
		   i * 2, i * 2 + 1);
		if (wc[0].status != IBV_WC_SUCCESS ||
		    wc[1].status != IBV_WC_SUCCESS)
			break;
	}
	if (i == EDGE_ATOMIC) {
		struct ibv_wc wc;

		res[0] = ~0ull;
		if (post(IBV_WR_RDMA_READ, &res[0], 8, mr->lkey, 20,
			 peer.addr + EDGE_LEN, peer.rkey, 0))
			bail_out("post READ");
		wc = wait1();
		ok(wc.status == IBV_WC_SUCCESS &&
			   res[0] == (uint64_t)EDGE_ATOMIC * 2,
		   "the counter moved once per fetch-and-add: %llu (want %d)",
		   (unsigned long long)res[0], EDGE_ATOMIC * 2);
	}
	edge_sqd(fd, mem, mr);
	xfer(fd, &bad, 1, 1);
	close(fd);
	ok(!ibv_destroy_qp(qp) && !ibv_dereg_mr(mr) && !ibv_destroy_cq(cq) &&
		   !ibv_destroy_comp_channel(ch) && !ibv_dealloc_pd(pd) &&
		   !ibv_close_device(ctx),
	   "the client freed everything");
	free(mem);
	return done_testing();
}

/*
 * Atomic write between hosts (rc-atomic-hosts.sh), IBV_WR_ATOMIC_WRITE on
 * the wire as rxe sends it (ATOMIC_WRITE, 0x1d: RETH and 8 bytes):
 *
 *   rc_peer awserver PORT
 *   rc_peer awclient SERVER PORT none|lost   TAP on stdout
 *
 * The server's memory: AW_LEN bytes registered with remote write (and
 * read), then AW_LEN more with remote read and atomic but no remote
 * write, both filled with a pattern.  The client places 8 bytes with an
 * SGE, waits until the server has seen them and overwritten them itself,
 * and finds the server's value there afterwards: with "lost" (the server
 * runs with SOFTRDMA_TEST_NETFAULT=rdlast=1000, its first READ response,
 * the atomic write's answer, lost) the atomic write is sent again after
 * the timer and completes once, and its repeat, answered from the PSN the
 * responder saved, did not place the 8 bytes a second time.  Then two
 * more back to back (one inline), read back with the words around them;
 * a misaligned address is an invalid request (IBV_WC_REM_INV_REQ_ERR,
 * rxe's RESPST_ERR_MISALIGNED_ATOMIC), an rkey without remote write a
 * remote access error (rxe checks IB_ACCESS_REMOTE_WRITE for it): each
 * ends the QPs, which are made again.  The server reports at the end that
 * only the three words written changed.
 */
#define AW_LEN 4096
#define AW_V1  0x0123456789abcdefull
#define AW_V1X 0xfedcba9876543210ull /* the server's, over AW_V1 */
#define AW_V2  0x1111222233334444ull
#define AW_V3  0x5555666677778888ull

/* aw_server_again -- a fresh QP to the client's fresh one (aw_again) */
static void aw_server_again(int fd, struct ibv_mr *mr)
{
	struct info me, peer;
	uint8_t c;

	xfer(fd, &c, 1, 0);
	new_qp();
	my_info(&me, mr);
	xfer(fd, &me, sizeof(me), 1);
	xfer(fd, &peer, sizeof(peer), 0);
	connect_qp(&me, &peer);
	xfer(fd, &c, 1, 1);
}

static int aw_server(int port)
{
	uint8_t *mem = aligned_alloc(4096, 2 * AW_LEN);
	uint8_t *want = malloc(2 * AW_LEN);
	uint64_t v = AW_V1X;
	struct ibv_mr *mr, *ro;
	struct info me, peer;
	uint32_t bad = 0;
	uint8_t seen = 0;
	double end;
	int fd, ret;
	char c = 0;

	if (!mem || !want)
		bail_out("memory");
	fill(mem, 2 * AW_LEN, 21);
	setup();
	mr = ibv_reg_mr(pd, mem, AW_LEN,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ);
	ro = ibv_reg_mr(pd, mem + AW_LEN, AW_LEN,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr || !ro)
		bail_out("reg_mr");
	my_info(&me, mr);
	fd = peer_accept(port, &me, &peer);
	xfer(fd, &me, 1, 1); /* ready */
	xfer(fd, &ro->rkey, sizeof(ro->rkey), 1);
	/* the first atomic write lands: overwritten here at once */
	end = now_ms() + TMO_MS;
	while (!seen && now_ms() < end) {
		if (__atomic_load_n((uint64_t *)(void *)(mem + 64),
				    __ATOMIC_ACQUIRE) == AW_V1) {
			__atomic_store_n((uint64_t *)(void *)(mem + 64), v,
					 __ATOMIC_RELEASE);
			seen = 1;
		} else {
			usleep(100);
		}
	}
	xfer(fd, &seen, 1, 1);
	aw_server_again(fd, mr); /* after the misaligned one */
	aw_server_again(fd, mr); /* after the one without remote write */
	xfer(fd, &c, 1, 0);	 /* the client is done with our memory */
	fill(want, 2 * AW_LEN, 21);
	memcpy(want + 64, &v, 8);
	v = AW_V2;
	memcpy(want + 72, &v, 8);
	v = AW_V3;
	memcpy(want + 80, &v, 8);
	for (ret = 0; ret < 2 * AW_LEN; ret++)
		if (mem[ret] != want[ret]) {
			if (!bad)
				fprintf(stderr, "server: byte %d changed\n",
					ret);
			bad++;
		}
	xfer(fd, &bad, sizeof(bad), 1);
	ret = ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_dereg_mr(ro) ||
	      ibv_destroy_cq(cq) || ibv_destroy_comp_channel(ch) ||
	      ibv_dealloc_pd(pd) || ibv_close_device(ctx);
	close(fd);
	free(mem);
	free(want);
	return ret;
}

/* aw_post -- an atomic write of V at RADDR under RKEY: from an SGE at SRC
 * (its 8 bytes; lkey LKEY), or inline */
static int aw_post(uint64_t id, uint64_t *src, uint32_t lkey, uint64_t v,
		   uint64_t raddr, uint32_t rkey, int inl)
{
	struct ibv_sge sge = {(uintptr_t)src, 8, lkey};
	struct ibv_send_wr wr, *bad;

	*src = v;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_ATOMIC_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* aw_again -- after an error: a fresh QP to the server's fresh one */
static void aw_again(int fd, struct ibv_mr *mr, struct info *peer)
{
	struct info me;
	uint8_t c = 1;

	xfer(fd, &c, 1, 1);
	new_qp();
	my_info(&me, mr);
	xfer(fd, peer, sizeof(*peer), 0);
	xfer(fd, &me, sizeof(me), 1);
	connect_qp(&me, peer);
	xfer(fd, &c, 1, 0);
}

static const char *aw_st(struct ibv_wc wc)
{
	return (int)wc.status == -1 ? "no completion"
				    : ibv_wc_status_str(wc.status);
}

static int aw_client(const char *host, int port, int lost)
{
	uint8_t *mem = aligned_alloc(4096, 4096);
	uint8_t *want = malloc(2 * AW_LEN);
	double tmo = 4.096e-3 * (double)(1u << qp_timeout), t0, dt;
	uint64_t *src, v;
	struct ibv_wc wc, w2[2];
	struct ibv_mr *mr;
	struct info peer;
	uint32_t ro_rkey, bad = ~0u;
	uint8_t seen = 0;
	int fd, n;

	if (!mem || !want)
		bail_out("memory");
	fill(want, 2 * AW_LEN, 21);
	src = (uint64_t *)(void *)(mem + 1024);
	setup();
	mr = ibv_reg_mr(pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		bail_out("reg_mr");
	fd = peer_connect(host, port, mr, &peer);
	xfer(fd, &ro_rkey, sizeof(ro_rkey), 0);

	{
		struct ibv_sge sge = {(uintptr_t)src, 4, mr->lkey};
		struct ibv_send_wr wr, *badwr;

		memset(&wr, 0, sizeof(wr));
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_ATOMIC_WRITE;
		wr.wr.rdma.remote_addr = peer.addr + 64;
		wr.wr.rdma.rkey = peer.rkey;
		is_int(ibv_post_send(qp, &wr, &badwr), EINVAL,
		       "atomic write of a 4-byte SGE: EINVAL at post");
	}

	t0 = now_ms();
	if (aw_post(1, src, mr->lkey, AW_V1, peer.addr + 64, peer.rkey, 0))
		bail_out("post ATOMIC_WRITE");
	wc = wait1();
	dt = now_ms() - t0;
	ok(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_ATOMIC_WRITE &&
		   wc.wr_id == 1,
	   "atomic write between hosts: %s, opcode %d (want %d)", aw_st(wc),
	   wc.opcode, IBV_WC_ATOMIC_WRITE);
	if (lost)
		ok(dt >= tmo * 0.9,
		   "its answer lost: completed after the timer, %.1f ms "
		   "(timeout %.1f ms)",
		   dt, tmo);
	else
		diag("completed in %.1f ms", dt);
	xfer(fd, &seen, 1, 0);
	ok(seen, "the server saw the 8 bytes and wrote over them");
	n = edge_poll(w2, 2, 3 * tmo);
	ok(n == 0, "it completed once (%d more completions)", n);

	if (aw_post(2, src, mr->lkey, AW_V2, peer.addr + 72, peer.rkey, 1) ||
	    aw_post(3, src + 1, mr->lkey, AW_V3, peer.addr + 80, peer.rkey, 0))
		bail_out("post ATOMIC_WRITEs");
	w2[0] = wait1();
	w2[1] = wait1();
	ok(w2[0].status == IBV_WC_SUCCESS && w2[0].wr_id == 2 &&
		   w2[1].status == IBV_WC_SUCCESS && w2[1].wr_id == 3 &&
		   w2[1].opcode == IBV_WC_ATOMIC_WRITE,
	   "two back to back, one inline: %s, %s, in order", aw_st(w2[0]),
	   aw_st(w2[1]));
	memset(mem, 0, 64);
	if (post(IBV_WR_RDMA_READ, mem, 40, mr->lkey, 4, peer.addr + 48,
		 peer.rkey, 0))
		bail_out("post READ");
	wc = wait1();
	v = AW_V1X;
	memcpy(want + 64, &v, 8);
	v = AW_V2;
	memcpy(want + 72, &v, 8);
	v = AW_V3;
	memcpy(want + 80, &v, 8);
	ok(wc.status == IBV_WC_SUCCESS && !memcmp(mem, want + 48, 40),
	   "read back: the server's word where the first was (never placed "
	   "again), the two others, the words around untouched");

	if (aw_post(5, src, mr->lkey, AW_V1, peer.addr + 92, peer.rkey, 0))
		bail_out("post ATOMIC_WRITE");
	wc = wait1();
	ok(wc.status == IBV_WC_REM_INV_REQ_ERR && wc.wr_id == 5,
	   "misaligned remote address: %s (want %s)", aw_st(wc),
	   ibv_wc_status_str(IBV_WC_REM_INV_REQ_ERR));
	aw_again(fd, mr, &peer);

	if (aw_post(6, src, mr->lkey, AW_V1, peer.addr + AW_LEN + 64, ro_rkey,
		    0))
		bail_out("post ATOMIC_WRITE");
	wc = wait1();
	ok(wc.status == IBV_WC_REM_ACCESS_ERR && wc.wr_id == 6,
	   "rkey with remote read and atomic, no remote write: %s (want %s)",
	   aw_st(wc), ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR));
	aw_again(fd, mr, &peer);

	xfer(fd, &seen, 1, 1);
	xfer(fd, &bad, sizeof(bad), 0);
	ok(bad == 0,
	   "server: only the three words written changed (%u bytes else)", bad);
	close(fd);
	ok(!ibv_destroy_qp(qp) && !ibv_dereg_mr(mr) && !ibv_destroy_cq(cq) &&
		   !ibv_destroy_comp_channel(ch) && !ibv_dealloc_pd(pd) &&
		   !ibv_close_device(ctx),
	   "the client freed everything");
	free(mem);
	free(want);
	return done_testing();
}

/*
 * max_rd_atomic between hosts (rc-atomic-hosts.sh):
 *
 *   rc_peer rdaserver PORT
 *   rc_peer rdaclient SERVER PORT   TAP on stdout (RC_PEER_RD_ATOMIC=1)
 *
 * Two READs of RDA_LEN and a fetch-and-add, posted back to back: each
 * completes in order with the server's bytes and the counter's value;
 * the client prints its first PSN ("# rda psn P"), and the script checks
 * on a capture of the server's interface that no request went out before
 * the response of the one before it had ended (max_rd_atomic 1: one READ
 * or atomic in flight).  Then, on a fresh QP with max_rd_atomic 0, a READ
 * waits (nothing completes in 300 ms) until the QP is given 1 in SQD,
 * and then completes with the server's bytes (rxe: none may go while the
 * limit is 0).  Last, on fresh QPs whose server side has
 * max_dest_rd_atomic 0, a READ and then a fetch-and-add (the client's
 * max_rd_atomic is 1): each fails with IBV_WC_REM_INV_REQ_ERR, as rxe's
 * check_resource NAKs them (invalid request), the counter is untouched,
 * and the server's QP is in ERR with IBV_EVENT_QP_REQ_ERR.
 */
#define RDA_LEN 16384

/* rda_server_zero -- a round on a fresh QP with max_dest_rd_atomic 0:
 * the client's READ or atomic is refused; 0 when our QP went to ERR with
 * IBV_EVENT_QP_REQ_ERR and the counter (at COUNTER) did not move */
static int rda_server_zero(int fd, struct ibv_mr *mr, const uint64_t *counter)
{
	struct ibv_async_event ev;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	uint64_t before = *counter;
	int fl, err = 0;
	uint8_t c;

	qp_dest_rd_atomic = 0;
	aw_server_again(fd, mr);
	xfer(fd, &c, 1, 0); /* the client saw its WR fail */
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) ||
	    a.qp_state != IBV_QPS_ERR) {
		diag("server: QP state %d, not ERR", (int)a.qp_state);
		err = 1;
	}
	fl = fcntl(ctx->async_fd, F_GETFL);
	if (fl < 0 || fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK))
		bail_out("async fd");
	c = 0;
	while (!ibv_get_async_event(ctx, &ev)) {
		if (ev.event_type == IBV_EVENT_QP_REQ_ERR &&
		    ev.element.qp == qp)
			c = 1;
		ibv_ack_async_event(&ev);
	}
	if (!c) {
		diag("server: no IBV_EVENT_QP_REQ_ERR");
		err = 1;
	}
	if (*counter != before) {
		diag("server: the counter moved");
		err = 1;
	}
	return err;
}

static int rda_server(int port)
{
	uint8_t *mem = aligned_alloc(4096, 2 * RDA_LEN + 4096);
	struct info me, peer;
	struct ibv_mr *mr;
	int fd, ret;
	char c = 0;

	if (!mem)
		bail_out("memory");
	fill(mem, 2 * RDA_LEN + 8, 5);
	setup();
	mr = ibv_reg_mr(pd, mem, 2 * RDA_LEN + 8,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr)
		bail_out("reg_mr");
	my_info(&me, mr);
	fd = peer_accept(port, &me, &peer);
	xfer(fd, &me, 1, 1); /* ready */
	aw_server_again(fd, mr);
	ret = rda_server_zero(fd, mr, (uint64_t *)(void *)(mem + 2 * RDA_LEN));
	ret |= rda_server_zero(fd, mr, (uint64_t *)(void *)(mem + 2 * RDA_LEN));
	xfer(fd, &c, 1, 0); /* the client is done with our memory */
	ret |= ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq) ||
	       ibv_destroy_comp_channel(ch) || ibv_dealloc_pd(pd) ||
	       ibv_close_device(ctx);
	close(fd);
	free(mem);
	return ret;
}

/* rda_modify -- the QP to STATE, with max_rd_atomic RD when RD >= 0 */
static int rda_modify(enum ibv_qp_state state, int rd)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = state;
	a.max_rd_atomic = (uint8_t)(rd < 0 ? 0 : rd);
	return ibv_modify_qp(
		qp, &a, IBV_QP_STATE | (rd >= 0 ? IBV_QP_MAX_QP_RD_ATOMIC : 0));
}

static int rda_client(const char *host, int port)
{
	uint8_t *mem = aligned_alloc(4096, 2 * RDA_LEN + 4096);
	uint8_t *want = malloc(2 * RDA_LEN + 8);
	uint64_t *res, orig;
	struct ibv_wc wc[3];
	struct ibv_mr *mr;
	struct info peer;
	int fd, i, n;

	if (!mem || !want)
		bail_out("memory");
	fill(want, 2 * RDA_LEN + 8, 5);
	memcpy(&orig, want + 2 * RDA_LEN, 8);
	res = (uint64_t *)(void *)(mem + 2 * RDA_LEN);
	setup();
	mr = ibv_reg_mr(pd, mem, 2 * RDA_LEN + 8, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		bail_out("reg_mr");
	fd = peer_connect(host, port, mr, &peer);
	diag("rda psn %u", (uint32_t)(getpid() * 7919) & 0xffffff);
	memset(mem, 0, 2 * RDA_LEN + 8);
	if (post(IBV_WR_RDMA_READ, mem, RDA_LEN, mr->lkey, 1, peer.addr,
		 peer.rkey, 0) ||
	    post(IBV_WR_RDMA_READ, mem + RDA_LEN, RDA_LEN, mr->lkey, 2,
		 peer.addr + RDA_LEN, peer.rkey, 0) ||
	    post(IBV_WR_ATOMIC_FETCH_AND_ADD, res, 8, mr->lkey, 3,
		 peer.addr + 2 * RDA_LEN, peer.rkey, 1))
		bail_out("post READs, fetch-and-add");
	for (i = 0; i < 3; i++)
		wc[i] = wait1();
	ok(wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 1 &&
		   wc[1].status == IBV_WC_SUCCESS && wc[1].wr_id == 2 &&
		   wc[2].status == IBV_WC_SUCCESS && wc[2].wr_id == 3,
	   "max_rd_atomic 1: two READs and a fetch-and-add posted back to "
	   "back complete in order (%s, %s, %s)",
	   aw_st(wc[0]), aw_st(wc[1]), aw_st(wc[2]));
	ok(!memcmp(mem, want, 2 * RDA_LEN) && *res == orig,
	   "the READs brought the server's bytes, the fetch-and-add its "
	   "counter");

	/* max_rd_atomic 0: a READ waits until the QP is given one */
	aw_again(fd, mr, &peer);
	memset(mem, 0, RDA_LEN);
	if (rda_modify(IBV_QPS_SQD, -1) || rda_modify(IBV_QPS_SQD, 0) ||
	    rda_modify(IBV_QPS_RTS, -1))
		bail_out("max_rd_atomic 0");
	if (post(IBV_WR_RDMA_READ, mem, RDA_LEN, mr->lkey, 4, peer.addr,
		 peer.rkey, 0))
		bail_out("post READ");
	n = edge_poll(wc, 1, 300);
	ok(n == 0, "max_rd_atomic 0: the READ waits (%d completed in 300 ms)",
	   n);
	if (rda_modify(IBV_QPS_SQD, -1) || rda_modify(IBV_QPS_SQD, 1) ||
	    rda_modify(IBV_QPS_RTS, -1))
		bail_out("max_rd_atomic 1");
	wc[0] = n ? wc[0] : wait1();
	ok(wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 4 &&
		   !memcmp(mem, want, RDA_LEN),
	   "given max_rd_atomic 1 (SQD, then RTS), it completes with the "
	   "server's bytes (%s)",
	   aw_st(wc[0]));

	/* the server's max_dest_rd_atomic 0: refused as an invalid request */
	for (i = 0; i < 2; i++) {
		aw_again(fd, mr, &peer);
		if (i ? post(IBV_WR_ATOMIC_FETCH_AND_ADD, res, 8, mr->lkey, 6,
			     peer.addr + 2 * RDA_LEN, peer.rkey, 1)
		      : post(IBV_WR_RDMA_READ, mem, RDA_LEN, mr->lkey, 5,
			     peer.addr, peer.rkey, 0))
			bail_out("post to max_dest_rd_atomic 0");
		wc[0] = wait1();
		ok(wc[0].wr_id == 5u + (unsigned)i &&
			   wc[0].status == IBV_WC_REM_INV_REQ_ERR,
		   "responder's max_dest_rd_atomic 0: the %s fails with "
		   "IBV_WC_REM_INV_REQ_ERR (%s)",
		   i ? "fetch-and-add" : "READ", aw_st(wc[0]));
		xfer(fd, &n, 1, 1);
	}
	xfer(fd, &n, 1, 1);
	close(fd);
	ok(!ibv_destroy_qp(qp) && !ibv_dereg_mr(mr) && !ibv_destroy_cq(cq) &&
		   !ibv_destroy_comp_channel(ch) && !ibv_dealloc_pd(pd) &&
		   !ibv_close_device(ctx),
	   "the client freed everything");
	free(mem);
	free(want);
	return done_testing();
}

/*
 * Malformed requests from the wire (rc-edge-hosts.sh): the client forges
 * RoCE v2 packets with a good ICRC to the server's QP, from its own
 * host's address and at the PSN the server expects, on a UDP socket of
 * its own (soft/roce.c makes them), and the server reports what its QP
 * made of them:
 *
 *   rc_peer forgeserver PORT
 *   rc_peer forgeclient SERVER PORT   TAP on stdout
 *
 * A well-formed SEND_ONLY first (the forging works: received), then
 * packets whose length their opcode cannot have at the path MTU of 1024
 * (a SEND_FIRST of 100 bytes; a SEND_ONLY of 1028) and a WRITE_ONLY in
 * the middle of a SEND: each is an invalid request, as rxe's
 * check_length and check_op_seq have it (NAK, the QP in ERR, its receives
 * flushed, IBV_EVENT_QP_REQ_ERR), never a message received; a SEND of
 * another partition's P_Key is dropped silently (rxe's check_keys), the
 * QP unchanged; a WRITE with a bad rkey is a remote access error, which
 * the responder reports as IBV_EVENT_QP_ACCESS_ERR (the IB spec's local
 * access violation work queue error, mlx5's WQ_ACCESS_ERROR).
 */
#define FORGE_CASES 6

static const char *const forge_what[FORGE_CASES] = {
	"a well-formed SEND_ONLY of 100 B: received",
	"SEND_FIRST of 100 B and SEND_LAST: an invalid request",
	"SEND_ONLY of 1028 B at MTU 1024: an invalid request",
	"WRITE_ONLY between SEND_FIRST and SEND_LAST: an invalid request",
	"a SEND_ONLY of 100 B with P_Key 0x1234: dropped (not our partition)",
	"WRITE_ONLY with a bad rkey: a remote access error",
};

/* what the server saw of a case */
struct forge_seen {
	int32_t status; /* its first receive's, -1: none in 2 s */
	uint32_t byte_len;
	int32_t state;	  /* its QP's after */
	uint32_t written; /* its memory's first word: 0 unless written */
	int32_t event;	  /* its QP's last async event, -1: none */
};

static int forge_server(int port)
{
	uint8_t *mem = aligned_alloc(4096, 3 * 4096);
	struct ibv_mr *mr;
	struct info me, peer;
	int fd, c, i;
	char go;

	if (!mem)
		bail_out("memory");
	setup();
	mr = ibv_reg_mr(pd, mem, 3 * 4096,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		bail_out("reg_mr");
	i = fcntl(ctx->async_fd, F_GETFL);
	if (i < 0 || fcntl(ctx->async_fd, F_SETFL, i | O_NONBLOCK))
		bail_out("async fd");
	fd = tcp_accept(port);
	for (c = 0; c < FORGE_CASES; c++) {
		struct forge_seen seen;
		struct ibv_async_event ev;
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;
		struct ibv_wc wc;
		double end;
		int r = 0;

		if (c)
			new_qp();
		memset(mem, 0, 3 * 4096);
		my_info(&me, mr);
		xfer(fd, &me, sizeof(me), 1);
		xfer(fd, &peer, sizeof(peer), 0);
		connect_qp(&me, &peer);
		for (i = 0; i < 2; i++)
			if (post_recv(mem + 4096 * (i + 1), 4096, mr->lkey,
				      (uint64_t)i))
				bail_out("post_recv");
		/* the host's agent steers the new QPN to this process's
		 * socket a moment after the QP is up (AG_REG, soft/agent.c);
		 * a packet before that is handed over by the agent and may
		 * come after those behind it, which a requester's go-back-N
		 * repairs but the forged, never repeated packets of a case
		 * cannot (seen: case 3's SEND_FIRST behind its WRITE_ONLY, a
		 * PSN sequence NAK, the QP in RTS): let it steer first (the
		 * agent runs SCHED_FIFO, so 100 ms is ample) */
		usleep(100000);
		xfer(fd, &me, 1, 1); /* ready */
		xfer(fd, &go, 1, 0); /* sent */
		end = now_ms() + 2000;
		while ((r = ibv_poll_cq(cq, 1, &wc)) == 0 && now_ms() < end)
			usleep(1000);
		memset(&seen, 0, sizeof(seen));
		seen.status = r == 1 ? (int32_t)wc.status : -1;
		seen.byte_len = r == 1 ? wc.byte_len : 0;
		while (ibv_poll_cq(cq, 1, &wc) == 1)
			; /* the other receive's flush */
		if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
			bail_out("query_qp");
		seen.state = (int32_t)a.qp_state;
		seen.event = -1;
		while (!ibv_get_async_event(ctx, &ev)) {
			if (ev.element.qp == qp)
				seen.event = (int32_t)ev.event_type;
			ibv_ack_async_event(&ev);
		}
		memcpy(&seen.written, mem, 4);
		xfer(fd, &seen, sizeof(seen), 1);
	}
	xfer(fd, &go, 1, 0); /* the client is done */
	close(fd);
	c = ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq) ||
	    ibv_destroy_comp_channel(ch) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx);
	free(mem);
	return c;
}

/* forge_send -- P (its PSN and opcode set) to the server's QP PEER from
 * FD, bound to SPORT on SRC: headers, ICRC, as the wire has them */
static void forge_send(int fd, uint16_t sport, const uint8_t *src,
		       const struct info *peer, struct roce_pkt *p)
{
	uint8_t buf[64 + 4096 + 64];
	struct sockaddr_in to;
	struct roce_ip ip;
	ssize_t n, hl;

	if (!p->bth.pkey)
		p->bth.pkey = ROCE_DEFAULT_PKEY;
	p->bth.dqpn = peer->qpn;
	p->bth.ackreq = 1;
	n = roce_encode(p, buf + 28, sizeof(buf) - 28);
	if (n < 0)
		bail_out("roce_encode: %zd", n);
	memset(&ip, 0, sizeof(ip));
	ip.family = AF_INET;
	memcpy(ip.src, src, 4);
	memcpy(ip.dst, peer->gid + 12, 4);
	ip.sport = sport;
	ip.dport = ROCE_UDP_PORT;
	ip.ttl = 64;
	hl = roce_ip_udp_hdr(&ip, buf, sizeof(buf), (size_t)n);
	if (hl != 28 || roce_icrc_set(buf, 28 + (size_t)n))
		bail_out("headers");
	memset(&to, 0, sizeof(to));
	to.sin_family = AF_INET;
	to.sin_port = htons(ROCE_UDP_PORT);
	memcpy(&to.sin_addr, peer->gid + 12, 4);
	if (sendto(fd, buf + 28, (size_t)n, 0, (struct sockaddr *)&to,
		   sizeof(to)) != n)
		bail_out("sendto: %s", strerror(errno));
}

static int forge_client(const char *host, int port)
{
	static uint8_t data[4096];
	uint8_t *mem = aligned_alloc(4096, 4096);
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	struct ibv_mr *mr;
	struct info me, peer;
	int fd, ufd, c, pmtud = IP_PMTUDISC_DO;
	uint16_t sport;
	char go = 0;

	if (!mem)
		bail_out("memory");
	memset(data, 0x5a, sizeof(data));
	setup();
	mr = ibv_reg_mr(pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		bail_out("reg_mr");
	/* DF from an unconnected socket: IPv4 identification 0, which the
	 * receiver's ICRC check takes */
	ufd = socket(AF_INET, SOCK_DGRAM, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	if (ufd < 0 ||
	    setsockopt(ufd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtud,
		       sizeof(pmtud)) ||
	    bind(ufd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(ufd, (struct sockaddr *)&sa, &sl))
		bail_out("udp socket");
	sport = ntohs(sa.sin_port);
	fd = tcp_connect(host, port);
	for (c = 0; c < FORGE_CASES; c++) {
		struct forge_seen seen;
		struct roce_pkt p;
		uint32_t psn;
		int good;

		if (c)
			new_qp();
		my_info(&me, mr);
		xfer(fd, &peer, sizeof(peer), 0);
		xfer(fd, &me, sizeof(me), 1);
		connect_qp(&me, &peer);
		xfer(fd, &go, 1, 0); /* ready */
		psn = me.psn;	     /* the server's rq_psn */
		memset(&p, 0, sizeof(p));
		p.bth.psn = psn;
		p.payload = data;
		switch (c) {
		case 0:
			p.bth.opcode = ROCE_RC | ROCE_SEND_ONLY;
			p.payload_len = 100;
			forge_send(ufd, sport, me.gid + 12, &peer, &p);
			break;
		case 1:
			p.bth.opcode = ROCE_RC | ROCE_SEND_FIRST;
			p.payload_len = 100;
			forge_send(ufd, sport, me.gid + 12, &peer, &p);
			p.bth.opcode = ROCE_RC | ROCE_SEND_LAST;
			p.bth.psn = (psn + 1) & ROCE_PSN_MASK;
			forge_send(ufd, sport, me.gid + 12, &peer, &p);
			break;
		case 2:
			p.bth.opcode = ROCE_RC | ROCE_SEND_ONLY;
			p.payload_len = 1028;
			forge_send(ufd, sport, me.gid + 12, &peer, &p);
			break;
		case 4:
			p.bth.opcode = ROCE_RC | ROCE_SEND_ONLY;
			p.bth.pkey = 0x1234;
			p.payload_len = 100;
			forge_send(ufd, sport, me.gid + 12, &peer, &p);
			break;
		case 5:
			p.bth.opcode = ROCE_RC | ROCE_WRITE_ONLY;
			p.payload_len = 8;
			p.reth.va = peer.addr;
			p.reth.rkey = peer.rkey ^ 0x100;
			p.reth.len = 8;
			forge_send(ufd, sport, me.gid + 12, &peer, &p);
			break;
		default:
			p.bth.opcode = ROCE_RC | ROCE_SEND_FIRST;
			p.payload_len = 1024;
			forge_send(ufd, sport, me.gid + 12, &peer, &p);
			p.bth.opcode = ROCE_RC | ROCE_WRITE_ONLY;
			p.bth.psn = (psn + 1) & ROCE_PSN_MASK;
			p.payload_len = 8;
			p.reth.va = peer.addr;
			p.reth.rkey = peer.rkey;
			p.reth.len = 8;
			forge_send(ufd, sport, me.gid + 12, &peer, &p);
			memset(&p.reth, 0, sizeof(p.reth));
			p.bth.opcode = ROCE_RC | ROCE_SEND_LAST;
			p.bth.psn = (psn + 2) & ROCE_PSN_MASK;
			p.payload_len = 100;
			forge_send(ufd, sport, me.gid + 12, &peer, &p);
			break;
		}
		xfer(fd, &go, 1, 1); /* sent */
		xfer(fd, &seen, sizeof(seen), 0);
		if (c == 0)
			good = seen.status == IBV_WC_SUCCESS &&
			       seen.byte_len == 100 &&
			       seen.state == IBV_QPS_RTS && seen.event == -1;
		else if (c == 4)
			good = seen.status == -1 && seen.state == IBV_QPS_RTS &&
			       seen.event == -1;
		else
			good = seen.status != IBV_WC_SUCCESS &&
			       seen.status != -1 && seen.state == IBV_QPS_ERR &&
			       seen.written == 0 &&
			       seen.event == (c == 5 ? IBV_EVENT_QP_ACCESS_ERR
						     : IBV_EVENT_QP_REQ_ERR);
		ok(good,
		   "%s (the server's receive: %s, %u B; its QP: %s%s; "
		   "event: %s)",
		   forge_what[c],
		   seen.status == -1
			   ? "none"
			   : ibv_wc_status_str((enum ibv_wc_status)seen.status),
		   seen.byte_len,
		   seen.state == IBV_QPS_ERR   ? "ERR"
		   : seen.state == IBV_QPS_RTS ? "RTS"
					       : "other",
		   seen.written ? "; its memory written" : "",
		   seen.event == -1 ? "none"
				    : ibv_event_type_str(
					      (enum ibv_event_type)seen.event));
	}
	xfer(fd, &go, 1, 1);
	close(fd);
	close(ufd);
	ok(!ibv_destroy_qp(qp) && !ibv_dereg_mr(mr) && !ibv_destroy_cq(cq) &&
		   !ibv_destroy_comp_channel(ch) && !ibv_dealloc_pd(pd) &&
		   !ibv_close_device(ctx),
	   "the client freed everything");
	free(mem);
	return done_testing();
}

/*
 * A CQ overrun between hosts (rc-edge-hosts.sh):
 *
 *   rc_peer overrunserver PORT
 *   rc_peer overrunclient SERVER PORT   TAP on stdout
 *
 * The server's QP takes its receive completions on a CQ of one entry, the
 * client's its send completions on one; the client sends three SENDs,
 * which overrun both.  On each side the CQ gets IBV_EVENT_CQ_ERR and the
 * QP goes to ERR with IBV_EVENT_QP_FATAL, as rxe's responder
 * (RESPST_ERR_CQ_OVERFLOW) and mlx5 do; the completion that fit is kept.
 * The server reports what it saw over TCP.
 */
#define OV_LEN 64

/* overrun_qp -- a fresh RC QP on pd whose send and receive CQs are these */
static void overrun_qp(struct ibv_cq *scq, struct ibv_cq *rcq)
{
	struct ibv_qp_init_attr ia;

	if (qp && ibv_destroy_qp(qp))
		bail_out("destroy_qp");
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	if (!(qp = ibv_create_qp(pd, &ia)))
		bail_out("QP");
}

/* overrun_seen -- the async events within MS: rep[0] the CQ errors of
 * tiny, rep[1] our QP's fatal errors (once both came, 300 ms more for
 * any repeat); rep[2] the QP's state then; rep[3] 1 when tiny holds the
 * completion of wr_id with status success (polled only now) */
static void overrun_seen(struct ibv_cq *tiny, uint64_t wr_id, double ms,
			 uint32_t rep[4])
{
	struct ibv_async_event ev;
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	struct ibv_wc wc;
	double end = now_ms() + ms;
	int fl;

	fl = fcntl(ctx->async_fd, F_GETFL);
	if (fl < 0 || fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK))
		bail_out("async fd");
	memset(rep, 0, 4 * sizeof(*rep));
	while (now_ms() < end) {
		/* the big CQ (empty) for the progress, never tiny */
		ibv_poll_cq(cq, 1, &wc);
		if (ibv_get_async_event(ctx, &ev)) {
			usleep(1000);
			continue;
		}
		if (ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == tiny)
			rep[0]++;
		else if (ev.event_type == IBV_EVENT_QP_FATAL &&
			 ev.element.qp == qp)
			rep[1]++;
		else
			diag("async event %s",
			     ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
		if (rep[0] && rep[1] && end > now_ms() + 300)
			end = now_ms() + 300;
	}
	rep[2] = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) ? ~0u : a.qp_state;
	rep[3] = ibv_poll_cq(tiny, 1, &wc) == 1 && wc.wr_id == wr_id &&
		 wc.status == IBV_WC_SUCCESS;
}

static int overrun_server(int port)
{
	uint8_t *rx = aligned_alloc(4096, 4096);
	struct ibv_cq *tiny;
	struct ibv_mr *mr;
	struct info me, peer;
	uint32_t rep[4];
	int fd, i, ret;
	char c = 0;

	if (!rx)
		bail_out("memory");
	memset(rx, 0, 4096);
	setup();
	tiny = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	if (!tiny)
		bail_out("CQ");
	overrun_qp(cq, tiny);
	mr = ibv_reg_mr(pd, rx, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		bail_out("reg_mr");
	my_info(&me, mr);
	fd = peer_accept(port, &me, &peer);
	for (i = 0; i < 4; i++)
		if (post_recv(rx + i * OV_LEN, OV_LEN, mr->lkey,
			      100 + (uint64_t)i))
			bail_out("post_recv");
	xfer(fd, &me, 1, 1); /* ready */
	overrun_seen(tiny, 100, 20000, rep);
	if (rep[3] && check(rx, OV_LEN, 0) != -1)
		rep[3] = 0; /* not the first message's data */
	xfer(fd, rep, sizeof(rep), 1);
	xfer(fd, &c, 1, 0); /* the client is done */
	ret = ibv_destroy_qp(qp) || ibv_dereg_mr(mr) || ibv_destroy_cq(tiny) ||
	      ibv_destroy_cq(cq) || ibv_destroy_comp_channel(ch) ||
	      ibv_dealloc_pd(pd) || ibv_close_device(ctx);
	close(fd);
	free(rx);
	return ret;
}

static int overrun_client(const char *host, int port)
{
	uint8_t *mem = aligned_alloc(4096, 4096);
	struct ibv_cq *tiny;
	struct ibv_mr *mr;
	struct info peer;
	uint32_t rep[4], srv[4];
	int fd, i;
	char c = 0;

	if (!mem)
		bail_out("memory");
	setup();
	tiny = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	if (!tiny)
		bail_out("CQ");
	overrun_qp(tiny, cq);
	mr = ibv_reg_mr(pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		bail_out("reg_mr");
	fd = peer_connect(host, port, mr, &peer);
	for (i = 0; i < 3; i++) {
		fill(mem + i * OV_LEN, OV_LEN, (uint32_t)i);
		if (post(IBV_WR_SEND, mem + i * OV_LEN, OV_LEN, mr->lkey,
			 (uint64_t)i, 0, 0, 0))
			bail_out("post SEND");
	}
	overrun_seen(tiny, 0, 20000, rep);
	ok(rep[0] == 1, "send CQ overrun: IBV_EVENT_CQ_ERR once (%u)", rep[0]);
	ok(rep[1] == 1, "the sender's QP: IBV_EVENT_QP_FATAL (%u)", rep[1]);
	ok(rep[2] == IBV_QPS_ERR, "the sender's QP in ERR (state %u)", rep[2]);
	ok(rep[3], "the send completion that fit is kept");
	xfer(fd, srv, sizeof(srv), 0);
	ok(srv[0] == 1, "receive CQ overrun: IBV_EVENT_CQ_ERR once (%u)",
	   srv[0]);
	ok(srv[1] == 1, "the receiver's QP: IBV_EVENT_QP_FATAL (%u)", srv[1]);
	ok(srv[2] == IBV_QPS_ERR, "the receiver's QP in ERR (state %u)",
	   srv[2]);
	ok(srv[3], "the receive that fit is kept, with its data");
	xfer(fd, &c, 1, 1);
	close(fd);
	ok(!ibv_destroy_qp(qp) && !ibv_dereg_mr(mr) && !ibv_destroy_cq(tiny) &&
		   !ibv_destroy_cq(cq) && !ibv_destroy_comp_channel(ch) &&
		   !ibv_dealloc_pd(pd) && !ibv_close_device(ctx),
	   "the client freed everything");
	free(mem);
	return done_testing();
}

int main(int argc, char **argv)
{
	const char *e;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((e = getenv("RC_PEER_TIMEOUT")))
		qp_timeout = atoi(e);
	if ((e = getenv("RC_PEER_RETRY")))
		qp_retry = atoi(e);
	if ((e = getenv("RC_PEER_RD_ATOMIC")))
		qp_rd_atomic = atoi(e);
	if (qp_timeout < 1 || qp_timeout > 31 || qp_retry < 0 || qp_retry > 7 ||
	    qp_rd_atomic < 0 || qp_rd_atomic > 16)
		bail_out("RC_PEER_TIMEOUT 1..31, RC_PEER_RETRY 0..7, "
			 "RC_PEER_RD_ATOMIC 0..16");
	if (argc >= 4 && !strcmp(argv[1], "cut"))
		return cut(argv[2], atoi(argv[3]));
	if (argc >= 3 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "rdserver"))
		return rd_server(atoi(argv[2]), (uint32_t)atoi(argv[3]));
	if (argc >= 6 && !strcmp(argv[1], "rdclient"))
		return rd_client(argv[2], atoi(argv[3]),
				 (uint32_t)atoi(argv[4]), atoi(argv[5]));
	if (argc >= 3 && !strcmp(argv[1], "mwserver"))
		return mw_server(atoi(argv[2]));
	if (argc >= 5 && !strcmp(argv[1], "mwclient"))
		return mw_client(argv[2], atoi(argv[3]),
				 !strcmp(argv[4], "full"));
	if (argc >= 4 && !strcmp(argv[1], "lastserver"))
		return last_server(atoi(argv[2]), argv[3]);
	if (argc >= 4 && !strcmp(argv[1], "lastclient"))
		return last_client(argv[2], atoi(argv[3]));
	if (argc >= 3 && !strcmp(argv[1], "stallserver"))
		return stall_server(atoi(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "stallclient"))
		return stall_client(argv[2], atoi(argv[3]));
	if (argc >= 3 && !strcmp(argv[1], "edgeserver"))
		return edge_server(atoi(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "edgeclient"))
		return edge_client(argv[2], atoi(argv[3]));
	if (argc >= 3 && !strcmp(argv[1], "rdaserver"))
		return rda_server(atoi(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "rdaclient"))
		return rda_client(argv[2], atoi(argv[3]));
	if (argc >= 3 && !strcmp(argv[1], "awserver"))
		return aw_server(atoi(argv[2]));
	if (argc >= 5 && !strcmp(argv[1], "awclient"))
		return aw_client(argv[2], atoi(argv[3]),
				 !strcmp(argv[4], "lost"));
	if (argc >= 3 && !strcmp(argv[1], "forgeserver"))
		return forge_server(atoi(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "forgeclient"))
		return forge_client(argv[2], atoi(argv[3]));
	if (argc >= 3 && !strcmp(argv[1], "overrunserver"))
		return overrun_server(atoi(argv[2]));
	if (argc >= 4 && !strcmp(argv[1], "overrunclient"))
		return overrun_client(argv[2], atoi(argv[3]));
	if (argc >= 4 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]),
			      argc > 4 ? atoi(argv[4]) : 3);
	fprintf(stderr, "usage: rc_peer server PORT | client ADDR PORT [N] | "
			"cut ADDR PORT | mwserver PORT | mwclient ADDR PORT "
			"full|loss | "
			"rdserver PORT SIZE | rdclient ADDR PORT SIZE COUNT | "
			"lastserver PORT exit|destroy | lastclient ADDR PORT | "
			"stallserver PORT | stallclient ADDR PORT | "
			"edgeserver PORT | edgeclient ADDR PORT | "
			"forgeserver PORT | forgeclient ADDR PORT | "
			"awserver PORT | awclient ADDR PORT none|lost | "
			"rdaserver PORT | rdaclient ADDR PORT | "
			"overrunserver PORT | overrunclient ADDR PORT\n");
	return 2;
}
