/* SPDX-License-Identifier: MIT */
/* ud.c -- UD and UC between two processes: GRH, qkey, MTU, drops, errnos;
 * UD by LID in the IB mode */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>

#include "../tap.h"
#include "common.h"

/* softrdma's drop counters (why: 0 no receive, 1 qkey, 2 full, -1 all) */
uint64_t softrdma_qp_drops(struct ibv_qp *qp, int why);
/* datagrams placed straight into a UD QP's buffers */
uint64_t softrdma_qp_placed(struct ibv_qp *qp);

#define QKEY	 0x11111111u
#define MTU	 4096
#define RBUF	 (40 + MTU)
#define NRECV	 8
#define GID_V4	 1 /* ::ffff:127.0.0.1 */
#define GID_V6	 0 /* fe80::<guid> */
#define BUFSZ	 (8u << 20)
#define UC_SEND	 10000
#define UC_WRITE 65536

struct info {
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
};

struct side {
	struct tctx t;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	unsigned char *buf;
};

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 13 + seed);
}

static int check_fill(const unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != (unsigned char)(i * 13 + seed))
			return 0;
	return 1;
}

static struct ibv_qp *mk_qp(struct side *s, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = s->t.cq;
	a.recv_cq = s->t.cq;
	a.qp_type = type;
	a.cap.max_send_wr = 16;
	a.cap.max_recv_wr = 16;
	a.cap.max_send_sge = 2;
	a.cap.max_recv_sge = 2;
	a.cap.max_inline_data = 64;
	return ibv_create_qp(s->t.pd, &a);
}

static int side_open(struct side *s, enum ibv_qp_type type)
{
	memset(s, 0, sizeof(*s));
	if (t_open(&s->t, 256))
		return -1;
	s->buf = calloc(1, BUFSZ);
	if (!s->buf)
		return -1;
	s->mr = ibv_reg_mr(s->t.pd, s->buf, BUFSZ,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	s->qp = mk_qp(s, type);
	return s->mr && s->qp ? 0 : -1;
}

static void side_close(struct side *s)
{
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	t_close(&s->t);
	free(s->buf);
}

/* srq_qp -- a QP of TYPE on s's PD and CQ taking its receives from a new
 * SRQ of 4 one-SGE WQEs (*srq); NULL if either failed */
static struct ibv_qp *srq_qp(struct side *s, enum ibv_qp_type type,
			     struct ibv_srq **srq)
{
	struct ibv_srq_init_attr sa;
	struct ibv_qp_init_attr a;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	*srq = ibv_create_srq(s->t.pd, &sa);
	if (!*srq)
		return NULL;
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = s->t.cq;
	a.srq = *srq;
	a.qp_type = type;
	a.cap.max_send_wr = 4;
	a.cap.max_send_sge = 1;
	return ibv_create_qp(s->t.pd, &a);
}

static struct ibv_ah *mk_ah(struct side *s, int sgid, int dgid)
{
	struct ibv_ah_attr a;

	memset(&a, 0, sizeof(a));
	a.is_global = 1;
	a.port_num = 1;
	a.grh.sgid_index = (uint8_t)sgid;
	a.grh.hop_limit = 64;
	a.grh.traffic_class = 0x20;
	a.grh.flow_label = 0x12345;
	ibv_query_gid(s->t.ctx, 1, dgid, &a.grh.dgid);
	return ibv_create_ah(s->t.pd, &a);
}

/* ud_send -- one UD SEND from s->buf + off */
static int ud_send(struct side *s, struct ibv_qp *qp, struct ibv_ah *ah,
		   uint32_t dqpn, uint32_t qkey, size_t off, uint32_t len,
		   uint64_t id, int imm)
{
	struct ibv_sge sge = {(uintptr_t)(s->buf + off), len, s->mr->lkey};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	wr.imm_data = htonl(0xabcd0000u + (uint32_t)id);
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = dqpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(qp, &wr, &bad);
}

static uint16_t csum(const unsigned char *p)
{
	uint32_t s = 0;
	int i;

	for (i = 0; i < 20; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

/*
 * ud_child -- receiver: counts a datagram sent before any receive, then
 * checks GRH, qkey, data, the reply address, a short buffer
 */
static int ud_child(int rfd, int wfd)
{
	struct side s;
	struct ibv_wc wc[8];
	struct ibv_ah_attr ah;
	struct ibv_ah *reply;
	union ibv_gid g4, g6;
	uint32_t qpn, step = 0;
	unsigned char *grh;
	int fails = 0, n, i;

#define CHK(c)                                                         \
	do {                                                           \
		if (!(c)) {                                            \
			fails++;                                       \
			diag("child: check failed line %d", __LINE__); \
		}                                                      \
	} while (0)

	if (side_open(&s, IBV_QPT_UD) || t_ud_up(s.qp, QKEY))
		return 100;
	ibv_query_gid(s.t.ctx, 1, GID_V4, &g4);
	ibv_query_gid(s.t.ctx, 1, GID_V6, &g6);
	t_xsend(wfd, &s.qp->qp_num, 4);
	t_xrecv(rfd, &qpn, 4);
	t_xrecv(rfd, &step, 4); /* 1: a datagram went out, no receive posted */
	CHK(softrdma_qp_drops(s.qp, 0) == 1);
	CHK(t_wait(s.t.cq, wc, 1, 50) == 0); /* nothing arrives later */
	for (i = 0; i < NRECV; i++)
		CHK(!t_post_recv(s.qp, s.buf + (size_t)i * RBUF, RBUF,
				 s.mr->lkey, 100 + i));
	t_xsend(wfd, &step, 4);
	t_xrecv(rfd, &step, 4); /* 2: wrong qkey, MTU with imm, IPv6 */
	n = t_wait(s.t.cq, wc, 2, 10000);
	CHK(n == 2);
	CHK(t_wait(s.t.cq, wc + n, 1, 50) == 0); /* the third was dropped */
	CHK(softrdma_qp_drops(s.qp, 1) == 1);
	/* first: IPv4 GIDs, 4096 bytes with immediate, qkey by high bit */
	CHK(wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 100);
	CHK(wc[0].opcode == IBV_WC_RECV && wc[0].byte_len == 40 + MTU);
	CHK(wc[0].src_qp == qpn && wc[0].pkey_index == 0);
	CHK((wc[0].wc_flags & IBV_WC_GRH) &&
	    (wc[0].wc_flags & IBV_WC_WITH_IMM));
	CHK(wc[0].imm_data == htonl(0xabcd0002u));
	CHK(wc[0].qp_num == s.qp->qp_num);
	CHK(wc[0].sl == 0xa); /* RoCE v2 over IPv4, as mlx5 reports it */
	grh = s.buf;
	for (i = 0; i < 20; i++)
		CHK(grh[i] == 0);
	CHK(grh[20] == 0x45 && grh[21] == 0x20 && grh[29] == 17);
	CHK(grh[28] == 64); /* TTL = hop limit */
	CHK(((grh[22] << 8) | grh[23]) == 20 + 8 + 12 + 8 + 4 + MTU + 4);
	CHK(csum(grh + 20) == 0xffff);
	CHK(!memcmp(grh + 32, g4.raw + 12, 4) &&
	    !memcmp(grh + 36, g4.raw + 12, 4));
	CHK(check_fill(s.buf + 40, MTU, 2));
	CHK(!ibv_init_ah_from_wc(s.t.ctx, 1, &wc[0], (struct ibv_grh *)grh,
				 &ah));
	CHK(ah.is_global && ah.grh.sgid_index == GID_V4 &&
	    !memcmp(ah.grh.dgid.raw, g4.raw, 16) && ah.grh.hop_limit == 64 &&
	    ah.grh.traffic_class == 0x20 && ah.port_num == 1);
	/* second: IPv6 GIDs, 100 bytes */
	grh = s.buf + RBUF;
	CHK(wc[1].status == IBV_WC_SUCCESS && wc[1].wr_id == 101);
	CHK(wc[1].byte_len == 140 && !(wc[1].wc_flags & IBV_WC_WITH_IMM));
	CHK(wc[1].sl == 0x9); /* RoCE v2 over IPv6 */
	CHK((grh[0] >> 4) == 6 && grh[6] == 17 && grh[7] == 64);
	CHK((((uint32_t)grh[1] << 16 | (uint32_t)grh[2] << 8 | grh[3]) &
	     0xfffff) == 0x12345);
	CHK(((grh[4] << 8) | grh[5]) == 8 + 12 + 8 + 100 + 4);
	CHK(!memcmp(grh + 8, g6.raw, 16) && !memcmp(grh + 24, g6.raw, 16));
	CHK(check_fill(s.buf + RBUF + 40, 100, 3));
	CHK(!ibv_init_ah_from_wc(s.t.ctx, 1, &wc[1], (struct ibv_grh *)grh,
				 &ah));
	CHK(ah.grh.sgid_index == GID_V6 &&
	    !memcmp(ah.grh.dgid.raw, g6.raw, 16) &&
	    ah.grh.flow_label == 0x12345 && ah.grh.traffic_class == 0x20);
	/* answer through an AH made from the first completion */
	reply = ibv_create_ah_from_wc(s.t.pd, &wc[0], (struct ibv_grh *)s.buf,
				      1);
	CHK(reply != NULL);
	fill(s.buf + 200000, 77, 9);
	CHK(reply &&
	    !ud_send(&s, s.qp, reply, wc[0].src_qp, QKEY, 200000, 77, 900, 0));
	CHK(t_wait(s.t.cq, wc, 1, 10000) == 1 && wc[0].wr_id == 900 &&
	    wc[0].status == IBV_WC_SUCCESS);
	if (reply)
		ibv_destroy_ah(reply);
	t_xsend(wfd, &step, 4);
	t_xrecv(rfd, &step, 4); /* 3: sent into a receive buffer too short */
	/* receives 102..107 are left; a short one is posted after them */
	n = t_wait(s.t.cq, wc, 6, 10000);
	CHK(n == 6);
	for (i = 0; i < n; i++)
		CHK(wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len == 40 + 8);
	CHK(!t_post_recv(s.qp, s.buf + 300000, 40 + 10, s.mr->lkey, 555));
	CHK(!t_post_recv(s.qp, s.buf + 400000, RBUF, s.mr->lkey, 556));
	t_xsend(wfd, &step, 4);
	t_xrecv(rfd, &step, 4);
	n = t_wait(s.t.cq, wc, 2, 10000);
	CHK(n == 2 && wc[0].wr_id == 555 && wc[0].status == IBV_WC_LOC_LEN_ERR);
	CHK(n == 2 && wc[1].wr_id == 556 &&
	    wc[1].status == IBV_WC_WR_FLUSH_ERR);
	CHK(t_qp_state(s.qp) == IBV_QPS_ERR);
	side_close(&s);
	return fails;
}

static void test_ud(void)
{
	struct side s;
	struct ibv_qp *q2;
	struct ibv_ah *ah4, *ah6;
	struct ibv_wc wc[8];
	uint32_t cqpn, step = 1;
	int rfd, wfd, status = -1, i, n;
	pid_t pid;

	pid = t_spawn(ud_child, &rfd, &wfd);
	if (pid < 0)
		bail_out("fork");
	if (side_open(&s, IBV_QPT_UD) || t_ud_up(s.qp, QKEY))
		bail_out("UD QP setup");
	q2 = mk_qp(&s, IBV_QPT_UD);
	ok(q2 && !t_ud_up(q2, QKEY), "second UD QP up");
	ah4 = mk_ah(&s, GID_V4, GID_V4);
	ah6 = mk_ah(&s, GID_V6, GID_V6);
	ok(ah4 && ah6, "address handles for an IPv4 and an IPv6 GID");
	t_xrecv(rfd, &cqpn, 4);
	t_xsend(wfd, &s.qp->qp_num, 4);
	fill(s.buf, 100, 1);
	ok(!ud_send(&s, s.qp, ah4, cqpn, QKEY, 0, 100, 1, 0),
	   "send to a QP with no receive posted");
	ok(t_wait(s.t.cq, wc, 1, 10000) == 1 && wc[0].status == IBV_WC_SUCCESS,
	   "the send completes though the datagram is dropped");
	t_xsend(wfd, &step, 4);
	t_xrecv(rfd, &step, 4);
	fill(s.buf + 10000, 50, 7);
	fill(s.buf + 20000, MTU, 2);
	fill(s.buf + 30000, 100, 3);
	ok(!ud_send(&s, s.qp, ah4, cqpn, 0x22222222, 10000, 50, 1, 0) &&
		   !ud_send(&s, s.qp, ah4, cqpn, 0x80000000u, 20000, MTU, 2,
			    1) &&
		   !ud_send(&s, s.qp, ah6, cqpn, QKEY, 30000, 100, 3, 0),
	   "wrong qkey, MTU-sized with imm (qkey from the QP), IPv6 GIDs");
	n = t_wait(s.t.cq, wc, 3, 10000);
	ok(n == 3 && wc[0].status == IBV_WC_SUCCESS &&
		   wc[1].status == IBV_WC_SUCCESS &&
		   wc[2].status == IBV_WC_SUCCESS && wc[1].byte_len == MTU &&
		   wc[1].opcode == IBV_WC_SEND,
	   "three send completions");
	/* the child answers through ibv_create_ah_from_wc */
	memset(s.buf + 500000, 0, RBUF);
	ok(!t_post_recv(s.qp, s.buf + 500000, RBUF, s.mr->lkey, 77),
	   "post a receive for the reply");
	t_xsend(wfd, &step, 4);
	t_xrecv(rfd, &step, 4);
	n = t_wait(s.t.cq, wc, 1, 10000);
	ok(n == 1 && wc[0].wr_id == 77 && wc[0].status == IBV_WC_SUCCESS &&
		   wc[0].byte_len == 40 + 77 && wc[0].src_qp == cqpn &&
		   check_fill(s.buf + 500000 + 40, 77, 9),
	   "reply through the AH made from the completion arrives");
	/* fill receives 102..107 of the child */
	for (i = 0; i < 6; i++)
		ud_send(&s, s.qp, ah4, cqpn, QKEY, 0, 8, 10 + i, 0);
	ok(t_wait(s.t.cq, wc, 6, 10000) == 6, "six more sends complete");
	t_xsend(wfd, &step, 4);
	t_xrecv(rfd, &step, 4);
	ok(!ud_send(&s, s.qp, ah4, cqpn, QKEY, 0, 100, 20, 0) &&
		   !ud_send(&s, s.qp, ah4, cqpn, QKEY, 0, 100, 21, 0),
	   "send 100 bytes into a 50-byte receive, then one more");
	ok(t_wait(s.t.cq, wc, 2, 10000) == 2 && wc[0].status == IBV_WC_SUCCESS,
	   "both complete at the sender");
	t_xsend(wfd, &step, 4);
	/* MTU limit: a local length error, the QP errs, what follows flushes */
	ok(!ud_send(&s, q2, ah4, cqpn, QKEY, 0, MTU + 1, 30, 0) &&
		   !ud_send(&s, q2, ah4, cqpn, QKEY, 0, 8, 31, 0),
	   "post MTU + 1 bytes, then 8");
	n = t_wait(s.t.cq, wc, 2, 10000);
	ok(n == 2 && wc[0].wr_id == 30 && wc[0].status == IBV_WC_LOC_LEN_ERR &&
		   wc[1].wr_id == 31 && wc[1].status == IBV_WC_WR_FLUSH_ERR,
	   "MTU + 1: IBV_WC_LOC_LEN_ERR, next WR flushed");
	is_int(t_qp_state(q2), IBV_QPS_ERR, "the sending QP is in ERR");
	waitpid(pid, &status, 0);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "receiver process: GRH (IPv4 and IPv6) and packet type (sl), qkey, "
	   "data, drops, reply "
	   "address, short buffer (status %d)",
	   WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	close(rfd);
	close(wfd);
	ibv_destroy_ah(ah4);
	ibv_destroy_ah(ah6);
	ibv_destroy_qp(q2);
	side_close(&s);
}

/* uc_child -- UC responder: SEND, SEND_IMM, WRITE, WRITE_IMM, drops */
static int uc_child(int rfd, int wfd)
{
	struct side s;
	struct info me, peer;
	struct ibv_wc wc[8];
	uint32_t step = 0;
	int fails = 0, n, i, k, full;

	if (side_open(&s, IBV_QPT_UC))
		return 100;
	me.qpn = s.qp->qp_num;
	me.rkey = s.mr->rkey;
	me.addr = (uintptr_t)s.buf;
	t_xsend(wfd, &me, sizeof(me));
	t_xrecv(rfd, &peer, sizeof(peer));
	if (t_uc_up(s.qp, peer.qpn, IBV_ACCESS_REMOTE_WRITE))
		return 101;
	t_xsend(wfd, &step, 4);
	t_xrecv(rfd, &step, 4); /* a SEND went out with no receive posted */
	CHK(softrdma_qp_drops(s.qp, 0) == 1);
	CHK(!t_post_recv(s.qp, s.buf, UC_SEND, s.mr->lkey, 1));
	CHK(!t_post_recv(s.qp, s.buf + 20000, 100, s.mr->lkey, 2));
	CHK(!t_post_recv(s.qp, s.buf + 30000, 0, s.mr->lkey, 3));
	t_xsend(wfd, &step, 4);
	t_xrecv(rfd, &step, 4);
	n = t_wait(s.t.cq, wc, 3, 10000);
	CHK(n == 3);
	CHK(wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS &&
	    wc[0].opcode == IBV_WC_RECV && wc[0].byte_len == UC_SEND &&
	    !(wc[0].wc_flags & IBV_WC_GRH));
	CHK(check_fill(s.buf, UC_SEND, 4));
	CHK(wc[1].wr_id == 2 && wc[1].byte_len == 100 &&
	    (wc[1].wc_flags & IBV_WC_WITH_IMM) &&
	    wc[1].imm_data == htonl(0x5151));
	CHK(check_fill(s.buf + 20000, 100, 5));
	CHK(wc[2].wr_id == 3 && wc[2].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
	    wc[2].byte_len == 1000 && wc[2].imm_data == htonl(0x7777));
	CHK(check_fill(s.buf + 100000, UC_WRITE, 6));
	CHK(check_fill(s.buf + 300000, 1000, 8));
	/* the write with a bad rkey changed nothing */
	CHK(s.buf[400000] == 0 && s.buf[400099] == 0);
	CHK(t_wait(s.t.cq, wc, 1, 50) == 0);
	/* four 1 MiB SENDs, more than the queue holds at once: what finds
	 * it full is dropped and counted (UC: no waiting, no RNR); what
	 * arrives is whole, in order, in the receives in order */
	for (n = 0; n < 4; n++)
		CHK(!t_post_recv(s.qp, s.buf + ((size_t)n << 20), 1u << 20,
				 s.mr->lkey, 10 + n));
	t_xsend(wfd, &step, 4);
	t_xrecv(rfd, &step, 4); /* all four were sent (or dropped) */
	full = (int)softrdma_qp_drops(s.qp, 2);
	CHK(full >= 0 && full < 4); /* the first always fits */
	n = t_wait(s.t.cq, wc, 4 - full, 60000);
	CHK(n == 4 - full);
	for (i = 0, k = 0; i < n; i++, k++) {
		while (k < 4 && !check_fill(s.buf + ((size_t)i << 20), 1u << 20,
					    40 + (unsigned)k))
			k++;
		CHK(k < 4 && wc[i].status == IBV_WC_SUCCESS &&
		    wc[i].wr_id == 10u + (unsigned)i &&
		    wc[i].byte_len == 1u << 20);
	}
	CHK(t_wait(s.t.cq, wc, 1, 50) == 0);
	/* the two above, and the full queue's */
	CHK(softrdma_qp_drops(s.qp, -1) == 2u + (unsigned)full);
	side_close(&s);
	return fails;
}

static int post_wr(struct ibv_qp *qp, enum ibv_wr_opcode op, void *buf,
		   uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		   uint32_t imm)
{
	struct ibv_sge sge = {(uintptr_t)buf, len, lkey};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

static void test_uc(void)
{
	struct side s;
	struct info me, peer;
	struct ibv_wc wc[8];
	uint32_t step = 0;
	int rfd, wfd, status = -1, n;
	pid_t pid;

	pid = t_spawn(uc_child, &rfd, &wfd);
	if (pid < 0 || side_open(&s, IBV_QPT_UC))
		bail_out("UC setup");
	me.qpn = s.qp->qp_num;
	me.rkey = s.mr->rkey;
	me.addr = (uintptr_t)s.buf;
	t_xrecv(rfd, &peer, sizeof(peer));
	t_xsend(wfd, &me, sizeof(me));
	ok(!t_uc_up(s.qp, peer.qpn, IBV_ACCESS_REMOTE_WRITE),
	   "UC QP to RTS (no retry attributes)");
	t_xrecv(rfd, &step, 4);
	fill(s.buf, UC_SEND, 4);
	ok(!post_wr(s.qp, IBV_WR_SEND, s.buf, 64, s.mr->lkey, 0, 0, 0),
	   "UC SEND with no receive posted");
	ok(t_wait(s.t.cq, wc, 1, 10000) == 1 && wc[0].status == IBV_WC_SUCCESS,
	   "it completes: UC has no RNR");
	t_xsend(wfd, &step, 4);
	t_xrecv(rfd, &step, 4);
	fill(s.buf + 20000, 100, 5);
	fill(s.buf + 100000, UC_WRITE, 6);
	fill(s.buf + 300000, 1000, 8);
	ok(!post_wr(s.qp, IBV_WR_SEND, s.buf, UC_SEND, s.mr->lkey, 0, 0, 0) &&
		   !post_wr(s.qp, IBV_WR_SEND_WITH_IMM, s.buf + 20000, 100,
			    s.mr->lkey, 0, 0, 0x5151) &&
		   !post_wr(s.qp, IBV_WR_RDMA_WRITE, s.buf + 100000, UC_WRITE,
			    s.mr->lkey, peer.addr + 100000, peer.rkey, 0) &&
		   !post_wr(s.qp, IBV_WR_RDMA_WRITE, s.buf, 100, s.mr->lkey,
			    peer.addr + 400000, peer.rkey + 1, 0) &&
		   !post_wr(s.qp, IBV_WR_RDMA_WRITE_WITH_IMM, s.buf + 300000,
			    1000, s.mr->lkey, peer.addr + 300000, peer.rkey,
			    0x7777),
	   "UC SEND (3 cells), SEND_WITH_IMM, WRITE, WRITE bad rkey, "
	   "WRITE_WITH_IMM");
	n = t_wait(s.t.cq, wc, 5, 10000);
	ok(n == 5 && wc[0].status == IBV_WC_SUCCESS &&
		   wc[2].opcode == IBV_WC_RDMA_WRITE &&
		   wc[3].status == IBV_WC_SUCCESS &&
		   wc[4].status == IBV_WC_SUCCESS,
	   "all five complete (a bad rkey is silent on UC)");
	is_int(post_wr(s.qp, IBV_WR_RDMA_READ, s.buf, 8, s.mr->lkey, peer.addr,
		       peer.rkey, 0),
	       EINVAL, "UC RDMA READ: EINVAL");
	is_int(post_wr(s.qp, IBV_WR_ATOMIC_FETCH_AND_ADD, s.buf, 8, s.mr->lkey,
		       peer.addr, peer.rkey, 0),
	       EINVAL, "UC atomic: EINVAL");
	t_xsend(wfd, &step, 4);
	t_xrecv(rfd, &step, 4);
	for (n = 0; n < 4; n++) {
		fill(s.buf + ((size_t)(n + 4) << 20), 1u << 20, 40 + n);
		post_wr(s.qp, IBV_WR_SEND, s.buf + ((size_t)(n + 4) << 20),
			1u << 20, s.mr->lkey, 0, 0, 0);
	}
	ok(ibv_poll_cq(s.t.cq, 4, wc) == 4 && wc[3].status == IBV_WC_SUCCESS,
	   "four 1 MiB UC SENDs (twice the queue) completed at posting");
	t_xsend(wfd, &step, 4);
	waitpid(pid, &status, 0);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "UC responder got exactly the data (status %d)",
	   WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	close(rfd);
	close(wfd);
	side_close(&s);
}

/*
 * uc_norecv_child -- UC responder with no receive posted: a WRITE with
 * immediate is dropped as rxe drops it (its ONLY or LAST packet finds
 * no receive WQE): a one-packet one places nothing, a three-packet one
 * only what its FIRST and MIDDLE packets carried; nothing completes,
 * the QP stays in RTS; with a receive posted the next one lands
 */
static int uc_norecv_child(int rfd, int wfd)
{
	struct side s;
	struct info me, peer;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_wc wc[2];
	uint32_t step = 0;
	int fails = 0, i, z;

	if (side_open(&s, IBV_QPT_UC))
		return 100;
	me.qpn = s.qp->qp_num;
	me.rkey = s.mr->rkey;
	me.addr = (uintptr_t)s.buf;
	t_xsend(wfd, &me, sizeof(me));
	t_xrecv(rfd, &peer, sizeof(peer));
	if (t_uc_up(s.qp, peer.qpn, IBV_ACCESS_REMOTE_WRITE))
		return 101;
	t_xsend(wfd, &step, 4);
	t_xrecv(rfd, &step, 4); /* both WRITE_WITH_IMM went out */
	CHK(t_wait(s.t.cq, wc, 1, 50) == 0);
	for (i = 0, z = 0; i < 1000; i++)
		z |= s.buf[i];
	CHK(z == 0);
	/* path MTU 1024: FIRST and MIDDLE placed, LAST (952 B) not */
	CHK(check_fill(s.buf + 10000, 2048, 21));
	for (i = 10000 + 2048, z = 0; i < 13000; i++)
		z |= s.buf[i];
	CHK(z == 0);
	CHK(softrdma_qp_drops(s.qp, 0) == 2);
	CHK(!ibv_query_qp(s.qp, &qa, IBV_QP_STATE, &qi) &&
	    qa.qp_state == IBV_QPS_RTS);
	CHK(!t_post_recv(s.qp, s.buf + 50000, 0, s.mr->lkey, 7));
	t_xsend(wfd, &step, 4);
	t_xrecv(rfd, &step, 4); /* the third went out */
	CHK(t_wait(s.t.cq, wc, 1, 10000) == 1);
	CHK(wc[0].wr_id == 7 && wc[0].status == IBV_WC_SUCCESS &&
	    wc[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
	    wc[0].byte_len == 1000 && (wc[0].wc_flags & IBV_WC_WITH_IMM) &&
	    wc[0].imm_data == htonl(0x2222));
	CHK(check_fill(s.buf, 1000, 22));
	CHK(t_wait(s.t.cq, wc, 1, 50) == 0);
	side_close(&s);
	return fails;
}

static void test_uc_norecv(void)
{
	struct side s;
	struct info me, peer;
	struct ibv_wc wc[4];
	uint32_t step = 0;
	int rfd, wfd, status = -1;
	pid_t pid;

	pid = t_spawn(uc_norecv_child, &rfd, &wfd);
	if (pid < 0 || side_open(&s, IBV_QPT_UC))
		bail_out("UC setup");
	me.qpn = s.qp->qp_num;
	me.rkey = s.mr->rkey;
	me.addr = (uintptr_t)s.buf;
	t_xrecv(rfd, &peer, sizeof(peer));
	t_xsend(wfd, &me, sizeof(me));
	if (t_uc_up(s.qp, peer.qpn, IBV_ACCESS_REMOTE_WRITE))
		bail_out("UC up");
	t_xrecv(rfd, &step, 4);
	fill(s.buf, 1000, 20);
	fill(s.buf + 10000, 3000, 21);
	fill(s.buf + 20000, 1000, 22);
	ok(!post_wr(s.qp, IBV_WR_RDMA_WRITE_WITH_IMM, s.buf, 1000, s.mr->lkey,
		    peer.addr, peer.rkey, 0x1111) &&
		   !post_wr(s.qp, IBV_WR_RDMA_WRITE_WITH_IMM, s.buf + 10000,
			    3000, s.mr->lkey, peer.addr + 10000, peer.rkey,
			    0x1112) &&
		   t_wait(s.t.cq, wc, 2, 10000) == 2 &&
		   wc[0].status == IBV_WC_SUCCESS &&
		   wc[1].status == IBV_WC_SUCCESS,
	   "UC WRITE_WITH_IMM of 1 and 3 packets, no receive posted: "
	   "sent and completed");
	t_xsend(wfd, &step, 4);
	t_xrecv(rfd, &step, 4);
	ok(!post_wr(s.qp, IBV_WR_RDMA_WRITE_WITH_IMM, s.buf + 20000, 1000,
		    s.mr->lkey, peer.addr, peer.rkey, 0x2222) &&
		   t_wait(s.t.cq, wc, 1, 10000) == 1 &&
		   wc[0].status == IBV_WC_SUCCESS,
	   "then one with a receive posted");
	t_xsend(wfd, &step, 4);
	waitpid(pid, &status, 0);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "UC responder without a receive: the immediate's packet dropped "
	   "(nothing of a 1-packet write placed, no completion, RTS), the "
	   "next lands (status %d)",
	   WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	close(rfd);
	close(wfd);
	side_close(&s);
}

/*
 * test_uc_srq_norecv -- a UC QP on an SRQ, the SRQ empty: a SEND and a
 * WRITE_WITH_IMM are dropped as rxe drops them (check_resource wants
 * the SRQ's WQE for the ONLY or LAST packet, before that packet is
 * placed): a one-packet write places nothing, a three-packet one only
 * what its FIRST and MIDDLE packets carried, nothing completes, the QP
 * stays in RTS; with a receive posted the next ones land whole
 */
static void test_uc_srq_norecv(void)
{
	struct side s;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_srq *srq;
	struct ibv_qp *rx;
	struct ibv_wc wc[4];
	unsigned char *dst;
	int i, z, n, sends, recvs;

	if (side_open(&s, IBV_QPT_UC))
		bail_out("setup");
	rx = srq_qp(&s, IBV_QPT_UC, &srq);
	if (!rx || t_uc_up(rx, s.qp->qp_num, IBV_ACCESS_REMOTE_WRITE) ||
	    t_uc_up(s.qp, rx->qp_num, IBV_ACCESS_REMOTE_WRITE))
		bail_out("UC QP on an SRQ");
	dst = s.buf + 200000;
	fill(s.buf + 100000, 1000, 30);
	fill(s.buf + 110000, 3000, 31);
	fill(s.buf + 120000, 64, 32);
	fill(s.buf + 130000, 1000, 33);
	fill(s.buf + 140000, 3000, 34);
	ok(!post_wr(s.qp, IBV_WR_RDMA_WRITE_WITH_IMM, s.buf + 100000, 1000,
		    s.mr->lkey, (uintptr_t)dst, s.mr->rkey, 0x1111) &&
		   !post_wr(s.qp, IBV_WR_RDMA_WRITE_WITH_IMM, s.buf + 110000,
			    3000, s.mr->lkey, (uintptr_t)dst + 10000,
			    s.mr->rkey, 0x1112) &&
		   !post_wr(s.qp, IBV_WR_SEND, s.buf + 120000, 64, s.mr->lkey,
			    0, 0, 0) &&
		   t_wait(s.t.cq, wc, 3, 10000) == 3 &&
		   wc[0].status == IBV_WC_SUCCESS &&
		   wc[1].status == IBV_WC_SUCCESS &&
		   wc[2].status == IBV_WC_SUCCESS,
	   "UC WRITE_WITH_IMM of 1 and 3 packets and a SEND towards a QP on "
	   "an empty SRQ: sent and completed");
	is_int(t_wait(s.t.cq, wc, 1, 100), 0, "nothing received");
	for (i = 0, z = 0; i < 1000; i++)
		z |= dst[i];
	ok(z == 0, "the 1-packet write placed nothing");
	/* path MTU 1024: FIRST and MIDDLE placed, LAST (952 B) not */
	for (i = 10000 + 2048, z = 0; i < 13000; i++)
		z |= dst[i];
	ok(check_fill(dst + 10000, 2048, 31) && z == 0,
	   "the 3-packet write placed its FIRST and MIDDLE packets only");
	is_int(softrdma_qp_drops(rx, 0), 3, "three dropped for no receive");
	ok(!ibv_query_qp(rx, &qa, IBV_QP_STATE, &qi) &&
		   qa.qp_state == IBV_QPS_RTS,
	   "the QP stays in RTS");
	memset(&rwr, 0, sizeof(rwr));
	for (i = 0; i < 2; i++) {
		rwr.wr_id = 7 + (uint64_t)i;
		if (ibv_post_srq_recv(srq, &rwr, &rbad))
			bail_out("post_srq_recv");
	}
	ok(!post_wr(s.qp, IBV_WR_RDMA_WRITE_WITH_IMM, s.buf + 130000, 1000,
		    s.mr->lkey, (uintptr_t)dst, s.mr->rkey, 0x2222) &&
		   !post_wr(s.qp, IBV_WR_RDMA_WRITE_WITH_IMM, s.buf + 140000,
			    3000, s.mr->lkey, (uintptr_t)dst + 10000,
			    s.mr->rkey, 0x2223),
	   "two more with two SRQ receives posted");
	n = t_wait(s.t.cq, wc, 4, 10000);
	for (i = 0, sends = 0, recvs = 0; i < n; i++) {
		if (wc[i].qp_num == s.qp->qp_num) {
			sends += wc[i].status == IBV_WC_SUCCESS;
			continue;
		}
		recvs += wc[i].status == IBV_WC_SUCCESS &&
			 wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
			 wc[i].wr_id == 7 + (uint64_t)recvs &&
			 wc[i].byte_len == (recvs ? 3000u : 1000u) &&
			 (wc[i].wc_flags & IBV_WC_WITH_IMM) &&
			 wc[i].imm_data == htonl(0x2222u + (uint32_t)recvs);
	}
	ok(n == 4 && sends == 2 && recvs == 2,
	   "both complete, in order, with their immediates and lengths");
	ok(check_fill(dst, 1000, 33) && check_fill(dst + 10000, 3000, 34),
	   "both writes placed whole");
	ibv_destroy_qp(rx);
	ibv_destroy_srq(srq);
	side_close(&s);
}

/*
 * test_uc_remote -- a UC QP whose path names another host's GID (UC does
 * not go between hosts): what it sends reaches no QP here, not even one
 * with the destination QPN it was given
 */
static void test_uc_remote(void)
{
	struct side s;
	struct ibv_qp_attr a;
	struct ibv_qp *tx;
	struct ibv_wc wc[2];

	if (side_open(&s, IBV_QPT_UC))
		bail_out("setup");
	tx = mk_qp(&s, IBV_QPT_UC);
	if (!tx || t_uc_up(s.qp, tx->qp_num, IBV_ACCESS_REMOTE_WRITE))
		bail_out("UC QPs");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	ok(!ibv_modify_qp(tx, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS),
	   "UC QP to INIT");
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = s.qp->qp_num; /* a QPN of this host's... */
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.sgid_index = GID_V4;
	a.ah_attr.grh.hop_limit = 64;
	/* ...on another host: ::ffff:10.231.250.1 */
	a.ah_attr.grh.dgid.raw[10] = a.ah_attr.grh.dgid.raw[11] = 0xff;
	a.ah_attr.grh.dgid.raw[12] = 10;
	a.ah_attr.grh.dgid.raw[13] = 231;
	a.ah_attr.grh.dgid.raw[14] = 250;
	a.ah_attr.grh.dgid.raw[15] = 1;
	ok(!ibv_modify_qp(tx, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN),
	   "to RTR towards another host's GID");
	a.qp_state = IBV_QPS_RTS;
	ok(!ibv_modify_qp(tx, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), "to RTS");
	ok(!t_post_recv(s.qp, s.buf, 4096, s.mr->lkey, 1), "receive posted");
	fill(s.buf + 100000, 64, 3);
	ok(!post_wr(tx, IBV_WR_SEND, s.buf + 100000, 64, s.mr->lkey, 0, 0, 0),
	   "UC SEND");
	ok(t_wait(s.t.cq, wc, 2, 200) == 1 && wc[0].qp_num == tx->qp_num &&
		   wc[0].status == IBV_WC_SUCCESS,
	   "it completes at the sender, and nothing arrives here");
	is_int(softrdma_qp_drops(s.qp, -1), 0,
	       "the local QP of that number saw nothing");
	ibv_destroy_qp(tx);
	side_close(&s);
}

/*
 * test_uc_mw -- UC RDMA WRITE through memory windows (rxe_lookup_mw): a
 * type 1 window's rkey places the data at the window's address; a type 2
 * window bound to another QP (an RC QP here) is an rkey violation for the
 * UC QP: the WRITE is dropped, nothing written
 */
static void test_uc_mw(void)
{
	struct side s;
	struct ibv_qp *tx, *rc1, *rc2;
	struct ibv_mw *mw1, *mw2;
	struct ibv_mw_bind bind;
	struct ibv_mr *wmr;
	struct ibv_wc wc[2];
	uint64_t base;
	uint32_t r2;
	int n;

	if (side_open(&s, IBV_QPT_UC))
		bail_out("setup");
	base = (uintptr_t)s.buf + (1u << 20);
	wmr = ibv_reg_mr(s.t.pd, s.buf + (1u << 20), 1u << 20,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_MW_BIND);
	tx = mk_qp(&s, IBV_QPT_UC);
	rc1 = t_rc_qp(&s.t, 4, NULL);
	rc2 = t_rc_qp(&s.t, 4, NULL);
	if (!wmr || !tx || !rc1 || !rc2 ||
	    t_uc_up(s.qp, tx->qp_num, IBV_ACCESS_REMOTE_WRITE) ||
	    t_uc_up(tx, s.qp->qp_num, IBV_ACCESS_REMOTE_WRITE) ||
	    t_connect(rc1, rc2->qp_num, IBV_ACCESS_REMOTE_WRITE, 12, 7, 14,
		      7) ||
	    t_connect(rc2, rc1->qp_num, IBV_ACCESS_REMOTE_WRITE, 12, 7, 14, 7))
		bail_out("QPs");
	mw1 = ibv_alloc_mw(s.t.pd, IBV_MW_TYPE_1);
	mw2 = ibv_alloc_mw(s.t.pd, IBV_MW_TYPE_2);
	if (!mw1 || !mw2)
		bail_out("windows");
	memset(&bind, 0, sizeof(bind));
	bind.send_flags = IBV_SEND_SIGNALED;
	bind.bind_info.mr = wmr;
	bind.bind_info.addr = base;
	bind.bind_info.length = 4096;
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	r2 = ibv_inc_rkey(mw2->rkey);
	ok(!ibv_bind_mw(rc1, mw1, &bind) &&
		   !t_bind2(rc1, mw2, r2, wmr, base + 8192, 4096,
			    IBV_ACCESS_REMOTE_WRITE),
	   "a type 1 window and a type 2 window bound (through an RC QP)");
	n = t_wait(s.t.cq, wc, 2, 10000);
	ok(n == 2 && wc[0].status == IBV_WC_SUCCESS &&
		   wc[1].status == IBV_WC_SUCCESS,
	   "both binds complete");
	fill(s.buf, 64, 9);
	ok(!post_wr(tx, IBV_WR_RDMA_WRITE, s.buf, 64, s.mr->lkey, base + 100,
		    mw1->rkey, 0),
	   "UC RDMA WRITE through the type 1 window");
	ok(t_wait(s.t.cq, wc, 1, 10000) == 1 && wc[0].status == IBV_WC_SUCCESS,
	   "it completes");
	ok(check_fill(s.buf + (1u << 20) + 100, 64, 9) &&
		   !s.buf[(1u << 20) + 99] && !s.buf[(1u << 20) + 164],
	   "the data is at the window's address, nothing around it");
	ok(!post_wr(tx, IBV_WR_RDMA_WRITE, s.buf, 64, s.mr->lkey,
		    base + 8192 + 100, r2, 0),
	   "UC RDMA WRITE through the type 2 window bound to the RC QP");
	ok(t_wait(s.t.cq, wc, 1, 10000) == 1 && wc[0].status == IBV_WC_SUCCESS,
	   "it completes at the sender (UC: no NAK)");
	ok(!s.buf[(1u << 20) + 8192 + 100] && !s.buf[(1u << 20) + 8192 + 163],
	   "nothing written: the window is another QP's");
	is_int(softrdma_qp_drops(s.qp, -1), 1, "the target counted it dropped");
	/* a window bound through the UC QP itself (rxe: BIND_MW is valid on
	 * UC): a type 2 window bound to the target takes its WRITEs */
	{
		struct ibv_mw *mw3 = ibv_alloc_mw(s.t.pd, IBV_MW_TYPE_2);
		uint32_t r3 = mw3 ? ibv_inc_rkey(mw3->rkey) : 0;

		ok(mw3 && !t_bind2(s.qp, mw3, r3, wmr, base + 16384, 4096,
				   IBV_ACCESS_REMOTE_WRITE),
		   "BIND_MW of a type 2 window posted on the target UC QP");
		n = t_wait(s.t.cq, wc, 1, 10000);
		ok(n == 1 && wc[0].status == IBV_WC_SUCCESS &&
			   wc[0].opcode == IBV_WC_BIND_MW &&
			   wc[0].wr_id == 0xb2,
		   "it completes: IBV_WC_BIND_MW");
		ok(!post_wr(tx, IBV_WR_RDMA_WRITE, s.buf, 64, s.mr->lkey,
			    base + 16384 + 8, r3, 0) &&
			   t_wait(s.t.cq, wc, 1, 10000) == 1 &&
			   wc[0].status == IBV_WC_SUCCESS,
		   "UC RDMA WRITE through it");
		ok(check_fill(s.buf + (1u << 20) + 16384 + 8, 64, 9),
		   "the data landed: the window is the target QP's");
		ok(t_bind2(tx, mw3, ibv_inc_rkey(r3), wmr, base, 64,
			   IBV_ACCESS_REMOTE_WRITE) == 0 &&
			   t_wait(s.t.cq, wc, 1, 10000) == 1 &&
			   wc[0].status == IBV_WC_MW_BIND_ERR,
		   "binding it again while bound: IBV_WC_MW_BIND_ERR");
		is_int(t_qp_state(tx), IBV_QPS_ERR, "that QP is in ERR");
		if (mw3)
			ibv_dealloc_mw(mw3);
	}
	ibv_destroy_qp(rc1);
	ibv_destroy_qp(rc2);
	ibv_dealloc_mw(mw1);
	ibv_dealloc_mw(mw2);
	ibv_dereg_mr(wmr);
	ibv_destroy_qp(tx);
	side_close(&s);
}

/* net_raw -- CAP_NET_RAW into this thread's effective set (on: 0, -1 if
 * it cannot be) or out of it (1 if it is permitted, so may come back) */
static int net_raw(int on)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	uint32_t m = CAP_TO_MASK(CAP_NET_RAW);
	int i = CAP_TO_INDEX(CAP_NET_RAW), was;

	if (syscall(SYS_capget, &h, d))
		return -1;
	was = !!(d[i].permitted & m);
	if (on)
		d[i].effective |= m;
	else
		d[i].effective &= ~m;
	if (syscall(SYS_capset, &h, d))
		return -1;
	return on ? 0 : was;
}

/* test_errors -- bad input to the UD/UC entry points */
static void test_errors(void)
{
	struct side s;
	struct ibv_qp_init_attr_ex x;
	struct ibv_qp_attr qa;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	struct ibv_send_wr wr[20], *bad;
	struct ibv_recv_wr rwr[20], *rbad;
	struct ibv_sge sge = {0, 8, 0};
	struct ibv_wc wc;
	struct ibv_grh grh;
	struct ibv_qp *qp;
	int raw;
	int i;

	if (side_open(&s, IBV_QPT_UD))
		bail_out("setup");
	sge.addr = (uintptr_t)s.buf;
	sge.lkey = s.mr->lkey;
	ah = mk_ah(&s, GID_V4, GID_V4);
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 20; i++) {
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].wr.ud.ah = ah;
		wr[i].wr.ud.remote_qpn = s.qp->qp_num;
		wr[i].next = i < 19 ? &wr[i + 1] : NULL;
	}
	wr[0].next = NULL;
	wr[0].opcode = IBV_WR_RDMA_READ;
	bad = NULL;
	is_int(ibv_post_send(s.qp, &wr[0], &bad), EINVAL,
	       "post_send in RESET: EINVAL (state first)");
	ok(bad == &wr[0], "bad_wr is the first");
	ok(!t_ud_up(s.qp, QKEY), "UD QP up");
	/* a controlled Q_Key: uverbs' modify_qp, privileged_qkey off, needs
	 * CAP_NET_RAW (dropped from the effective set, then taken back) */
	raw = net_raw(0);
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTS;
	qa.qkey = 0x80010000u;
	is_int(ibv_modify_qp(s.qp, &qa, IBV_QP_STATE | IBV_QP_QKEY), EPERM,
	       "a Q_Key with the high bit set, no CAP_NET_RAW: EPERM");
	memset(&qa, 0, sizeof(qa));
	ok(!ibv_query_qp(s.qp, &qa, IBV_QP_QKEY,
			 &(struct ibv_qp_init_attr){0}) &&
		   qa.qkey == QKEY,
	   "the QP keeps its Q_Key");
	if (raw == 1 && !net_raw(1)) {
		qa.qp_state = IBV_QPS_RTS;
		qa.qkey = 0x80010000u;
		ok(!ibv_modify_qp(s.qp, &qa, IBV_QP_STATE | IBV_QP_QKEY),
		   "with CAP_NET_RAW it is taken");
		qa.qkey = QKEY;
		ok(!ibv_modify_qp(s.qp, &qa, IBV_QP_STATE | IBV_QP_QKEY),
		   "and the Q_Key set back");
	} else {
		skip_one("CAP_NET_RAW not permitted to this test");
		skip_one("CAP_NET_RAW not permitted to this test");
	}
	is_int(ibv_post_send(s.qp, &wr[0], &bad), EINVAL,
	       "UD RDMA READ: EINVAL");
	wr[0].opcode = IBV_WR_RDMA_WRITE;
	is_int(ibv_post_send(s.qp, &wr[0], &bad), EINVAL,
	       "UD RDMA WRITE: EINVAL");
	wr[0].opcode = IBV_WR_BIND_MW;
	wr[0].num_sge = 0;
	is_int(ibv_post_send(s.qp, &wr[0], &bad), EINVAL,
	       "UD BIND_MW: EINVAL (rxe: RC and UC only)");
	wr[0].num_sge = 1;
	wr[0].opcode = IBV_WR_SEND;
	/* one above what was granted (rxe grants inline / 16 SGEs) */
	{
		struct ibv_qp_init_attr qi;

		if (ibv_query_qp(s.qp, &qa, IBV_QP_CAP, &qi))
			bail_out("query_qp");
		wr[0].num_sge = (int)qa.cap.max_send_sge + 1;
	}
	is_int(ibv_post_send(s.qp, &wr[0], &bad), EINVAL,
	       "num_sge above max_send_sge: EINVAL");
	wr[0].num_sge = 1;
	wr[0].wr.ud.ah = NULL;
	is_int(ibv_post_send(s.qp, &wr[0], &bad), EINVAL, "no AH: EINVAL");
	wr[0].wr.ud.ah = ah;
	wr[0].send_flags = IBV_SEND_INLINE;
	sge.length = 65;
	is_int(ibv_post_send(s.qp, &wr[0], &bad), EINVAL,
	       "inline above max_inline_data: EINVAL");
	sge.length = 8;
	wr[0].send_flags = 0;
	wr[0].next = &wr[1];
	wr[16].opcode = IBV_WR_RDMA_READ; /* the 17th of a 16-deep SQ */
	bad = NULL;
	is_int(ibv_post_send(s.qp, &wr[0], &bad), ENOMEM,
	       "17 WRs on a 16-deep SQ: ENOMEM before the opcode check");
	ok(bad == &wr[16], "bad_wr is the 17th");
	/* posted receives: the datagrams above went to our own QP */
	memset(rwr, 0, sizeof(rwr));
	for (i = 0; i < 20; i++) {
		rwr[i].sg_list = &sge;
		rwr[i].num_sge = 1;
		rwr[i].next = i < 19 ? &rwr[i + 1] : NULL;
	}
	rwr[0].num_sge = 3;
	is_int(ibv_post_recv(s.qp, &rwr[0], &rbad), EINVAL,
	       "recv num_sge above max: EINVAL");
	rwr[0].num_sge = 1;
	rbad = NULL;
	is_int(ibv_post_recv(s.qp, &rwr[0], &rbad), ENOMEM,
	       "17 receives on a 16-deep RQ: ENOMEM");
	ok(rbad == &rwr[16], "bad_wr is the 17th");
	while (ibv_poll_cq(s.t.cq, 1, &wc) > 0)
		;
	/* address handles */
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 2;
	ok(!ibv_create_ah(s.t.pd, &aa) && errno == EINVAL,
	   "AH on port 2: EINVAL");
	aa.port_num = 1;
	aa.grh.sgid_index = 200;
	ok(!ibv_create_ah(s.t.pd, &aa) && errno == EINVAL,
	   "AH with a bad sgid index: EINVAL");
	aa.grh.sgid_index = 1;
	aa.is_global = 0;
	ok(!ibv_create_ah(s.t.pd, &aa) && errno == EINVAL,
	   "AH without GRH on RoCE: EINVAL");
	ok(!ibv_create_ah(NULL, &aa) && errno == EINVAL,
	   "AH without PD: EINVAL");
	memset(&wc, 0, sizeof(wc));
	wc.wc_flags = IBV_WC_GRH;
	ok(ibv_init_ah_from_wc(s.t.ctx, 1, &wc, NULL, &aa) == -1 &&
		   errno == EINVAL,
	   "init_ah_from_wc with GRH flag but no GRH: EINVAL");
	ok(ibv_init_ah_from_wc(s.t.ctx, 2, &wc, &grh, &aa) == -1 &&
		   errno == EINVAL,
	   "init_ah_from_wc on port 2: EINVAL");
	memset(&grh, 0, sizeof(grh));
	grh.version_tclass_flow = htonl(6u << 28);
	grh.next_hdr = 17;
	grh.dgid.raw[0] = 0xff;
	ok(ibv_init_ah_from_wc(s.t.ctx, 1, &wc, &grh, &aa) == -1 &&
		   errno == EINVAL,
	   "init_ah_from_wc of a multicast datagram: EINVAL");
	grh.dgid.raw[0] = 0x20;
	ok(ibv_init_ah_from_wc(s.t.ctx, 1, &wc, &grh, &aa) == -1,
	   "init_ah_from_wc for a GID that is not ours fails");
	ok(!ibv_create_ah_from_wc(NULL, &wc, &grh, 1) && errno == EINVAL,
	   "create_ah_from_wc without PD: EINVAL");
	/* create flags */
	memset(&x, 0, sizeof(x));
	x.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	x.pd = s.t.pd;
	x.send_cq = x.recv_cq = s.t.cq;
	x.qp_type = IBV_QPT_RC;
	x.cap.max_send_wr = x.cap.max_recv_wr = 1;
	x.cap.max_send_sge = x.cap.max_recv_sge = 1;
	qp = ibv_create_qp_ex(s.t.ctx, &x);
	ok(qp != NULL, "create flags 0 accepted");
	if (qp)
		ibv_destroy_qp(qp);
	x.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
	ok(!ibv_create_qp_ex(s.t.ctx, &x) && errno == EOPNOTSUPP,
	   "BLOCK_SELF_MCAST_LB on RC: EOPNOTSUPP");
	x.qp_type = IBV_QPT_UD;
	x.create_flags = IBV_QP_CREATE_SCATTER_FCS;
	ok(!ibv_create_qp_ex(s.t.ctx, &x) && errno == EOPNOTSUPP,
	   "an unsupported create flag: EOPNOTSUPP");
	/* UC needs no retry attributes, and refuses a qkey */
	qp = mk_qp(&s, IBV_QPT_UC);
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_INIT;
	qa.port_num = 1;
	qa.qkey = 1;
	ok(qp && ibv_modify_qp(qp, &qa,
			       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				       IBV_QP_QKEY) == EINVAL,
	   "UC INIT with a qkey: EINVAL");
	ok(qp && ibv_post_send(qp, &wr[0], &bad) == EINVAL,
	   "UC post_send in RESET: EINVAL");
	if (qp)
		ibv_destroy_qp(qp);
	ibv_destroy_ah(ah);
	side_close(&s);
}

/* test_srq -- a UD QP that takes its receives from an SRQ */
static void test_srq(void)
{
	struct side s;
	struct ibv_srq *srq;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge sge;
	struct ibv_qp *rq;
	struct ibv_ah *ah;
	struct ibv_wc wc[4];
	int i, n;

	if (side_open(&s, IBV_QPT_UD) || t_ud_up(s.qp, QKEY))
		bail_out("setup");
	rq = srq_qp(&s, IBV_QPT_UD, &srq);
	ok(rq && !t_ud_up(rq, QKEY), "UD QP on an SRQ");
	if (!rq)
		bail_out("SRQ QP");
	sge.addr = (uintptr_t)s.buf;
	sge.length = RBUF;
	sge.lkey = s.mr->lkey;
	memset(&rwr, 0, sizeof(rwr));
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	is_int(ibv_post_recv(rq, &rwr, &rbad), EINVAL,
	       "post_recv on a QP with an SRQ: EINVAL");
	for (i = 0; i < 2; i++) {
		sge.addr = (uintptr_t)(s.buf + (size_t)i * RBUF);
		rwr.wr_id = 40 + i;
		ibv_post_srq_recv(srq, &rwr, &rbad);
	}
	ah = mk_ah(&s, GID_V4, GID_V4);
	fill(s.buf + 100000, 300, 11);
	for (i = 0; i < 3; i++)
		ud_send(&s, s.qp, ah, rq->qp_num, QKEY, 100000, 300, 50 + i, 0);
	n = t_wait(s.t.cq, wc, 4, 10000);
	while (n < 6 && t_wait(s.t.cq, wc, 1, 50) == 1)
		n++;
	is_int(n, 5, "three send and two receive completions");
	ok(check_fill(s.buf + 40, 300, 11) &&
		   check_fill(s.buf + RBUF + 40, 300, 11),
	   "both SRQ receives hold the datagram");
	is_int(softrdma_qp_drops(rq, 0), 1,
	       "the third found the SRQ empty: dropped, counted");
	ibv_destroy_ah(ah);
	ibv_destroy_qp(rq);
	ibv_destroy_srq(srq);
	side_close(&s);
}

/*
 * test_srq_late -- an HCA takes an SRQ's WQE when a datagram arrives:
 * with the SRQ empty then, the datagram is dropped, even if receives are
 * posted before the receiver next polls.  The receiver is a context of
 * its own that does not poll meanwhile (its datagrams wait in its queue).
 */
static void test_srq_late(void)
{
	struct side s, r;
	struct ibv_srq *srq;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge sge;
	struct ibv_qp *rq;
	struct ibv_ah *ah;
	struct ibv_wc wc[4];
	int i, n, good;

	if (side_open(&s, IBV_QPT_UD) || t_ud_up(s.qp, QKEY) ||
	    side_open(&r, IBV_QPT_UD))
		bail_out("setup");
	rq = srq_qp(&r, IBV_QPT_UD, &srq);
	if (!rq || t_ud_up(rq, QKEY))
		bail_out("UD QP on an SRQ");
	ah = mk_ah(&s, GID_V4, GID_V4);
	if (!ah)
		bail_out("AH");
	fill(s.buf + 100000, 200, 21);
	fill(s.buf + 110000, 200, 22);
	for (i = 0; i < 3; i++)
		ud_send(&s, s.qp, ah, rq->qp_num, QKEY, 100000, 200, 60 + i, 0);
	n = t_wait(s.t.cq, wc, 3, 10000);
	ok(n == 3 && wc[0].status == IBV_WC_SUCCESS &&
		   wc[2].status == IBV_WC_SUCCESS,
	   "three datagrams sent towards a QP whose SRQ is empty");
	usleep(2000); /* the receives come strictly later */
	sge.length = RBUF;
	sge.lkey = r.mr->lkey;
	memset(&rwr, 0, sizeof(rwr));
	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	for (i = 0; i < 2; i++) {
		sge.addr = (uintptr_t)(r.buf + (size_t)i * RBUF);
		rwr.wr_id = 70 + (uint64_t)i;
		if (ibv_post_srq_recv(srq, &rwr, &rbad))
			bail_out("post_srq_recv");
	}
	is_int(t_wait(r.t.cq, wc, 1, 200), 0,
	       "receives posted after they came: none of them completes");
	is_int(softrdma_qp_drops(rq, 0), 3,
	       "all three dropped for no receive, counted");
	for (i = 0; i < 2; i++)
		ud_send(&s, s.qp, ah, rq->qp_num, QKEY, 110000, 200, 80 + i, 0);
	n = t_wait(r.t.cq, wc, 2, 10000);
	for (i = 0, good = 0; i < n; i++)
		good += wc[i].status == IBV_WC_SUCCESS &&
			wc[i].opcode == IBV_WC_RECV &&
			wc[i].wr_id == 70 + (uint64_t)i &&
			wc[i].byte_len == 240 &&
			check_fill(r.buf + (size_t)i * RBUF + 40, 200, 22);
	ok(n == 2 && good == 2,
	   "the next two take the two receives, in order, whole");
	is_int(t_wait(s.t.cq, wc, 2, 10000), 2, "their send completions");
	is_int(softrdma_qp_drops(rq, -1), 3, "no other drop");
	ibv_destroy_ah(ah);
	ibv_destroy_qp(rq);
	ibv_destroy_srq(srq);
	side_close(&r);
	side_close(&s);
}

/* sqd_to -- move a QP in RTS to SQD (1) or back to RTS (0) */
static int sqd_to(struct ibv_qp *qp, int sqd)
{
	struct ibv_qp_attr qa;

	memset(&qa, 0, sizeof(qa));
	qa.qp_state = sqd ? IBV_QPS_SQD : IBV_QPS_RTS;
	return ibv_modify_qp(qp, &qa, IBV_QP_STATE);
}

/*
 * test_ah -- the AH a UD WR names: one of another PD fails the WR with
 * IBV_WC_LOC_QP_OP_ERR (rxe_get_av, rxe_requester) and the QP goes to
 * ERR; a parent domain's is its PD's; one destroyed after the post of a
 * WR held in SQD leaves the WR its address (an HCA copies the AV into
 * the WQE: under valgrind, no read of the freed AH)
 */
static void test_ah(void)
{
	struct ibv_parent_domain_init_attr pa;
	struct side s;
	struct ibv_pd *pd2, *par;
	struct ibv_ah *ah, *ah2, *ahp;
	struct ibv_qp *tx;
	struct ibv_wc wc[4];
	int n;

	if (side_open(&s, IBV_QPT_UD) || t_ud_up(s.qp, QKEY))
		bail_out("setup");
	tx = mk_qp(&s, IBV_QPT_UD);
	if (!tx || t_ud_up(tx, QKEY))
		bail_out("sending QP");
	pd2 = ibv_alloc_pd(s.t.ctx);
	memset(&pa, 0, sizeof(pa));
	pa.pd = s.t.pd;
	par = ibv_alloc_parent_domain(s.t.ctx, &pa);
	ah = mk_ah(&s, GID_V4, GID_V4);
	if (!pd2 || !par || !ah)
		bail_out("PDs, AH");
	fill(s.buf + 100000, 64, 5);
	/* a parent domain's AH: the QP's PD */
	{
		struct ibv_pd *keep = s.t.pd;

		s.t.pd = par;
		ahp = mk_ah(&s, GID_V4, GID_V4);
		s.t.pd = pd2;
		ah2 = mk_ah(&s, GID_V4, GID_V4);
		s.t.pd = keep;
	}
	ok(ahp && ah2, "AHs on a parent domain and on another PD");
	ok(!t_post_recv(s.qp, s.buf, RBUF, s.mr->lkey, 1) &&
		   !t_post_recv(s.qp, s.buf + RBUF, RBUF, s.mr->lkey, 2),
	   "two receives posted");
	ok(!ud_send(&s, tx, ahp, s.qp->qp_num, QKEY, 100000, 64, 10, 0),
	   "send through the parent domain's AH");
	n = t_wait(s.t.cq, wc, 2, 10000);
	ok(n == 2 && wc[0].status == IBV_WC_SUCCESS &&
		   wc[1].status == IBV_WC_SUCCESS,
	   "it is the QP's PD: sent and received");
	/* held in SQD, its AH destroyed, then run */
	ok(!sqd_to(tx, 1), "sending QP to SQD");
	ok(!ud_send(&s, tx, ah, s.qp->qp_num, QKEY, 100000, 64, 11, 1),
	   "post a send in SQD");
	ok(!ibv_destroy_ah(ah), "destroy its AH before it runs");
	ok(!sqd_to(tx, 0), "back to RTS: the held send runs");
	n = t_wait(s.t.cq, wc, 2, 10000);
	ok(n == 2 && wc[0].status == IBV_WC_SUCCESS &&
		   wc[1].status == IBV_WC_SUCCESS &&
		   (wc[0].opcode == IBV_WC_RECV ? wc[0] : wc[1]).byte_len ==
			   40 + 64 &&
		   check_fill(s.buf + RBUF + 40, 64, 5),
	   "sent to the address the AH had at posting, received");
	/* another PD's AH */
	ok(!ud_send(&s, tx, ah2, s.qp->qp_num, QKEY, 100000, 64, 12, 0),
	   "post a send through an AH of another PD");
	n = t_wait(s.t.cq, wc, 1, 10000);
	ok(n == 1 && wc[0].wr_id == 12 && wc[0].status == IBV_WC_LOC_QP_OP_ERR,
	   "it completes with IBV_WC_LOC_QP_OP_ERR");
	is_int(t_qp_state(tx), IBV_QPS_ERR, "the sending QP is in ERR");
	is_int(softrdma_qp_drops(s.qp, -1), 0, "nothing reached the receiver");
	ibv_destroy_ah(ah2);
	ibv_destroy_ah(ahp);
	ibv_destroy_qp(tx);
	ibv_dealloc_pd(par);
	ibv_dealloc_pd(pd2);
	side_close(&s);
}

/* IB mode (SOFTRDMA_LINK=ib, this host): what ib_child and ib_mode find
 * wrong, a bit each (IB_OBJ: a setup step failed) */
enum {
	IB_AH = 1,	 /* LID-routed AHs made, bad ones refused */
	IB_COPY = 2,	 /* a LID-routed datagram through the queue */
	IB_PLACED = 4,	 /* one placed straight into the buffer */
	IB_GLOBAL = 8,	 /* a global AV's datagram: a GRH, SLID and SL */
	IB_REPLY = 16,	 /* ibv_init_ah_from_wc: by LID; the reply */
	IB_NOROUTE = 32, /* to a DLID no port has: lost */
	IB_OBJ = 64,
	IB_ALL = 127, /* nothing could be checked */
};

#define IB_SL	  5
#define IB_GSL	  3
#define IB_GAREA  0xee	 /* the GRH area's bytes before the receive */
#define IB_LOST	  4	 /* softrdma_qp_drops: sent towards nobody */
#define IB_DATA	  100000 /* the two-SGE receive's data part */
#define IB_REPLYO 200000

/* ib_lid_ok -- a receive from a LID-routed AV of port 1 (LID lid) */
static int ib_lid_ok(const struct ibv_wc *wc, uint32_t sqpn, uint16_t lid,
		     uint32_t len)
{
	return wc->status == IBV_WC_SUCCESS && wc->opcode == IBV_WC_RECV &&
	       !(wc->wc_flags & IBV_WC_GRH) && wc->src_qp == sqpn &&
	       wc->slid == lid && wc->sl == IB_SL && !wc->dlid_path_bits &&
	       wc->byte_len == 40 + len;
}

/* ib_area -- the GRH area left alone */
static int ib_area(const unsigned char *p)
{
	int i;

	for (i = 0; i < 40; i++)
		if (p[i] != IB_GAREA)
			return 0;
	return 1;
}

/*
 * ib_child -- the receiver: a two-SGE receive (GRH area, then data: the
 * queue's copy) and one-SGE ones in shareable memory (a sealed memfd:
 * placed by the sender where peers can map); checks the two LID-routed
 * datagrams and the global AV's, then answers the first through an AH
 * made from its completion
 */
static int ib_child(int rfd, int wfd)
{
	struct ibv_sge sge[2];
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_ah_attr ah;
	struct ibv_ah *reply;
	struct ibv_port_attr pa;
	struct ibv_wc wc[4];
	struct ibv_mr *smr;
	struct side s;
	unsigned char *sb;
	uint32_t qpn, fails = 0;
	int i, n, fd;

	if (side_open(&s, IBV_QPT_UD) || t_ud_up(s.qp, QKEY) ||
	    ibv_query_port(s.t.ctx, 1, &pa) || !pa.lid)
		return IB_ALL;
	fd = memfd_create("ib_child", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, 3 * RBUF) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK))
		return IB_ALL;
	sb = mmap(NULL, 3 * RBUF, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	smr = sb == MAP_FAILED ? NULL
			       : ibv_reg_mr(s.t.pd, sb, 3 * RBUF,
					    IBV_ACCESS_LOCAL_WRITE);
	close(fd);
	if (!smr)
		return IB_ALL;
	memset(s.buf, IB_GAREA, 40);
	memset(sb, IB_GAREA, 3 * RBUF);
	sge[0] = (struct ibv_sge){(uintptr_t)s.buf, 40, s.mr->lkey};
	sge[1] =
		(struct ibv_sge){(uintptr_t)(s.buf + IB_DATA), MTU, s.mr->lkey};
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 1;
	rwr.sg_list = sge;
	rwr.num_sge = 2;
	if (ibv_post_recv(s.qp, &rwr, &rbad))
		return IB_ALL;
	for (i = 1; i < 3; i++)
		if (t_post_recv(s.qp, sb + (size_t)i * RBUF, RBUF, smr->lkey,
				(uint64_t)i + 1))
			return IB_ALL;
	t_xsend(wfd, &s.qp->qp_num, 4);
	t_xrecv(rfd, &qpn, 4); /* the sender's QPN: it has sent */
	n = t_wait(s.t.cq, wc, 3, 10000);
	if (n != 3 || t_wait(s.t.cq, wc + n, 1, 50))
		fails |= IB_OBJ;
	if (n < 1 || wc[0].wr_id != 1 || !ib_lid_ok(&wc[0], qpn, pa.lid, 100) ||
	    !ib_area(s.buf) || !check_fill(s.buf + IB_DATA, 100, 1))
		fails |= IB_COPY;
	if (n < 2 || wc[1].wr_id != 2 || !ib_lid_ok(&wc[1], qpn, pa.lid, 200) ||
	    !ib_area(sb + RBUF) || !check_fill(sb + RBUF + 40, 200, 2) ||
	    softrdma_qp_placed(s.qp) != (t_can_map() ? 2 : 0))
		fails |= IB_PLACED;
	/* the GRH: an IPv6 header from our link-local GID to itself */
	if (n < 3 || wc[2].wr_id != 3 || wc[2].status != IBV_WC_SUCCESS ||
	    !(wc[2].wc_flags & IBV_WC_GRH) || wc[2].slid != pa.lid ||
	    wc[2].sl != IB_GSL || wc[2].byte_len != 40 + 300 ||
	    (sb[2 * RBUF] >> 4) != 6 || sb[2 * RBUF + 8] != 0xfe ||
	    !check_fill(sb + 2 * RBUF + 40, 300, 3))
		fails |= IB_GLOBAL;
	/* the answer: by LID, to the sender's port, with the SL it used */
	if (n < 1 ||
	    ibv_init_ah_from_wc(s.t.ctx, 1, &wc[0], (struct ibv_grh *)s.buf,
				&ah) ||
	    ah.is_global || ah.dlid != pa.lid || ah.sl != IB_SL ||
	    ah.src_path_bits || ah.port_num != 1)
		fails |= IB_REPLY;
	reply = n < 1 ? NULL
		      : ibv_create_ah_from_wc(s.t.pd, &wc[0],
					      (struct ibv_grh *)s.buf, 1);
	fill(s.buf + IB_REPLYO, 77, 9);
	if (!reply ||
	    ud_send(&s, s.qp, reply, qpn, QKEY, IB_REPLYO, 77, 900, 0) ||
	    t_wait(s.t.cq, wc, 1, 10000) != 1 || wc[0].wr_id != 900 ||
	    wc[0].status != IBV_WC_SUCCESS)
		fails |= IB_REPLY;
	if (reply)
		ibv_destroy_ah(reply);
	t_xsend(wfd, &fails, 4);
	t_xrecv(rfd, &qpn, 4); /* the sender has its answer */
	ibv_dereg_mr(smr);
	munmap(sb, 3 * RBUF);
	side_close(&s);
	return 0;
}

/* ib_ah -- a LID-routed AH on port 1 to dlid with SL IB_SL */
static struct ibv_ah *ib_ah(struct side *s, uint16_t dlid)
{
	struct ibv_ah_attr a;

	memset(&a, 0, sizeof(a));
	a.dlid = dlid;
	a.sl = IB_SL;
	a.port_num = 1;
	return ibv_create_ah(s->t.pd, &a);
}

/* ib_mode -- the sender, in a process of its own (the mode is read once
 * a process): LID-routed and global datagrams to ib_child, the answer,
 * bad AVs; the bits of what failed */
static int ib_mode(void)
{
	struct ibv_port_attr p1, p2;
	struct ibv_ah_attr a;
	struct ibv_ah *lah, *gah, *nah;
	struct ibv_wc wc[4];
	struct side s;
	uint32_t rqpn, fails = 0, cf = IB_OBJ;
	uint16_t none;
	int rfd, wfd, n;
	pid_t pid;

	setenv("SOFTRDMA_LINK", "ib", 1);
	pid = t_spawn(ib_child, &rfd, &wfd);
	if (pid < 0 || side_open(&s, IBV_QPT_UD) || t_ud_up(s.qp, QKEY) ||
	    ibv_query_port(s.t.ctx, 1, &p1) || ibv_query_port(s.t.ctx, 2, &p2))
		return IB_ALL;
	t_xrecv(rfd, &rqpn, 4);
	memset(s.buf, IB_GAREA, RBUF);
	if (t_post_recv(s.qp, s.buf, RBUF, s.mr->lkey, 50))
		return IB_ALL;
	/* a LID no port has (on this host, no other is reached) */
	none = (uint16_t)(p1.lid > 0x100 ? p1.lid - 0x100 : p1.lid + 0x100);
	if (none == p2.lid)
		none++;
	lah = ib_ah(&s, p1.lid);
	nah = ib_ah(&s, none);
	memset(&a, 0, sizeof(a));
	a.is_global = 1;
	a.sl = IB_GSL;
	a.port_num = 1;
	a.grh.hop_limit = 64;
	ibv_query_gid(s.t.ctx, 1, 0, &a.grh.dgid);
	gah = ibv_create_ah(s.t.pd, &a);
	if (!lah || !nah || !gah)
		fails |= IB_AH;
	a.is_global = 0;
	a.dlid = 0;
	if (ibv_create_ah(s.t.pd, &a) || errno != EINVAL)
		fails |= IB_AH;
	a.dlid = 0xc001;
	if (ibv_create_ah(s.t.pd, &a) || errno != EINVAL)
		fails |= IB_AH;
	a.dlid = p1.lid;
	a.port_num = 3;
	if (ibv_create_ah(s.t.pd, &a) || errno != EINVAL)
		fails |= IB_AH;
	fill(s.buf + 100000, 100, 1);
	fill(s.buf + 110000, 200, 2);
	fill(s.buf + 120000, 300, 3);
	if (!lah || !gah ||
	    ud_send(&s, s.qp, lah, rqpn, QKEY, 100000, 100, 1, 0) ||
	    ud_send(&s, s.qp, lah, rqpn, QKEY, 110000, 200, 2, 0) ||
	    ud_send(&s, s.qp, gah, rqpn, QKEY, 120000, 300, 3, 0) ||
	    t_wait(s.t.cq, wc, 3, 10000) != 3)
		fails |= IB_OBJ;
	if (!nah || ud_send(&s, s.qp, nah, rqpn, QKEY, 100000, 100, 4, 0) ||
	    t_wait(s.t.cq, wc, 1, 10000) != 1 || wc[0].wr_id != 4 ||
	    wc[0].status != IBV_WC_SUCCESS ||
	    softrdma_qp_drops(s.qp, IB_LOST) != 1)
		fails |= IB_NOROUTE;
	t_xsend(wfd, &s.qp->qp_num, 4);
	t_xrecv(rfd, &cf, 4);
	fails |= cf;
	/* the answer: by LID from the receiver's port 1, our SL */
	n = t_wait(s.t.cq, wc, 1, 10000);
	if (n != 1 || wc[0].wr_id != 50 ||
	    !ib_lid_ok(&wc[0], rqpn, p1.lid, 77) || !ib_area(s.buf) ||
	    !check_fill(s.buf + 40, 77, 9))
		fails |= IB_REPLY;
	t_xsend(wfd, &cf, 4);
	if (t_reap(pid))
		fails |= IB_OBJ;
	if (lah)
		ibv_destroy_ah(lah);
	if (nah)
		ibv_destroy_ah(nah);
	if (gah)
		ibv_destroy_ah(gah);
	side_close(&s);
	return (int)fails;
}

/* test_ib -- UD in the IB mode (ib_mode) */
static void test_ib(void)
{
	int st = t_fork_reap(ib_mode);

	if (!ok(st >= 0 && st < 256 && !(st & IB_OBJ), "IB mode: objects"))
		diag("  its exit status %d", st);
	if (st < 0 || st >= 256)
		st = IB_ALL;
	ok(!(st & IB_AH),
	   "IB mode: LID-routed AHs (a DLID no port has too); DLID 0, a "
	   "multicast DLID without GRH, port 3: EINVAL");
	ok(!(st & IB_COPY),
	   "IB mode: LID-routed datagram (queue): no IBV_WC_GRH, GRH area "
	   "untouched, SLID the sender's port's, SL the AV's, data intact");
	ok(!(st & IB_PLACED),
	   "IB mode: the same placed straight into the receive buffer");
	ok(!(st & IB_GLOBAL),
	   "IB mode: a global AV's datagram has IBV_WC_GRH, SLID and SL");
	ok(!(st & IB_REPLY),
	   "IB mode: ibv_init_ah_from_wc builds a LID-routed AV; the answer "
	   "through it arrives by LID");
	ok(!(st & IB_NOROUTE),
	   "IB mode: to a DLID no port has: sent, lost (counted)");
}

/* stopped_child -- posts receives, is stopped, then checks what came */
static int stopped_child(int rfd, int wfd)
{
	struct side s;
	struct ibv_wc wc[16];
	uint32_t step = 0;
	int fails = 0, i, n;

	if (side_open(&s, IBV_QPT_UD) || t_ud_up(s.qp, QKEY))
		return 100;
	for (i = 0; i < 16; i++)
		CHK(!t_post_recv(s.qp, s.buf + (size_t)i * RBUF, RBUF,
				 s.mr->lkey, i));
	t_xsend(wfd, &s.qp->qp_num, 4);
	t_xrecv(rfd, &step, 4); /* we were stopped meanwhile */
	n = t_wait(s.t.cq, wc, 16, 10000);
	CHK(n == 16);
	for (i = 0; i < n; i++)
		CHK(wc[i].status == IBV_WC_SUCCESS &&
		    wc[i].byte_len == 40 + 200 &&
		    check_fill(s.buf + wc[i].wr_id * RBUF + 40, 200, 20));
	side_close(&s);
	return fails;
}

/*
 * test_stopped -- a receiver that is SIGSTOPped takes datagrams into its
 * posted receives: the sender's completions never wait for it
 */
static void test_stopped(void)
{
	struct side s;
	struct ibv_ah *ah;
	struct ibv_wc wc[16];
	uint32_t cqpn, step = 0;
	int rfd, wfd, status = -1, i;
	pid_t pid;

	pid = t_spawn(stopped_child, &rfd, &wfd);
	if (pid < 0 || side_open(&s, IBV_QPT_UD) || t_ud_up(s.qp, QKEY))
		bail_out("setup");
	ah = mk_ah(&s, GID_V4, GID_V4);
	t_xrecv(rfd, &cqpn, 4);
	kill(pid, SIGSTOP);
	fill(s.buf, 200, 20);
	for (i = 0; i < 16; i++)
		ud_send(&s, s.qp, ah, cqpn, QKEY, 0, 200, (uint64_t)i, 0);
	ok(t_wait(s.t.cq, wc, 16, 10000) == 16,
	   "16 sends to a stopped receiver complete");
	kill(pid, SIGCONT);
	t_xsend(wfd, &step, 4);
	waitpid(pid, &status, 0);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "once continued, the receiver finds all 16 in its buffers");
	close(rfd);
	close(wfd);
	ibv_destroy_ah(ah);
	side_close(&s);
}

/* queue layout (soft/ud.c): a trailer at the end of the QP segment names
 * the queue header; tail/head are its words at 64 and 80; cells follow
 * the 4096-byte header, 128-byte cell header first */
#define Q_TAIL	 64
#define Q_HEAD	 80
#define Q_NSLOTS 12
#define CELL	 (128 + MTU)

/*
 * test_hostile -- peers write the queue: nonsense in its indexes and cell
 * headers is dropped and counted, and the QP keeps working
 */
static void test_hostile(void)
{
	struct side s;
	struct ibv_qp *tx2;
	struct ibv_ah *ah;
	struct ibv_wc wc[4];
	unsigned char *seg, *q, *c;
	uint64_t off, tail, head, before;
	size_t seglen;
	int n;

	if (side_open(&s, IBV_QPT_UD) || t_ud_up(s.qp, QKEY))
		bail_out("setup");
	ah = mk_ah(&s, GID_V4, GID_V4);
	seg = t_seg_map(s.qp->qp_num, &seglen);
	if (!seg)
		bail_out("segment of QP %u", s.qp->qp_num);
	memcpy(&off, seg + seglen - 64 + 8, 8);
	q = seg + off;
	fill(s.buf + 100000, 300, 30);
	t_post_recv(s.qp, s.buf, RBUF, s.mr->lkey, 1);
	t_post_recv(s.qp, s.buf + RBUF, RBUF, s.mr->lkey, 2);
	/* a tail far beyond the queue */
	memcpy(&tail, q + Q_TAIL, 8);
	before = softrdma_qp_drops(s.qp, -1);
	tail += 1ull << 40;
	memcpy(q + Q_TAIL, &tail, 8);
	ok(t_wait(s.t.cq, wc, 1, 50) == 0 &&
		   softrdma_qp_drops(s.qp, -1) == before + 1,
	   "a tail beyond the queue: dropped, counted, no completion");
	/* a cell whose header lies about its size */
	memcpy(&head, q + Q_HEAD, 8);
	c = q + 4096 + (size_t)(head & 63) * CELL;
	memset(c, 0, 128);
	n = 100;
	memcpy(c + 8, &n, 4); /* msg_len 100 ... */
	n = 5;
	memcpy(c + 12, &n, 4); /* ... in 5 cells */
	tail = head + 1;
	memcpy(q + Q_TAIL, &tail, 8);
	ok(t_wait(s.t.cq, wc, 1, 50) == 0 &&
		   softrdma_qp_drops(s.qp, -1) == before + 2,
	   "a cell header with a wrong cell count: dropped, counted");
	/* a UD datagram above the MTU */
	c = q + 4096 + (size_t)(tail & 63) * CELL;
	memset(c, 0, 128);
	n = 3 * MTU;
	memcpy(c + 8, &n, 4);
	n = 3;
	memcpy(c + 12, &n, 4);
	tail += 3;
	memcpy(q + Q_TAIL, &tail, 8);
	ok(t_wait(s.t.cq, wc, 1, 50) == 0 &&
		   softrdma_qp_drops(s.qp, -1) == before + 3,
	   "a 3-cell UD datagram: dropped, counted");
	ok(!ud_send(&s, s.qp, ah, s.qp->qp_num, QKEY, 100000, 300, 9, 0),
	   "send after all that");
	n = t_wait(s.t.cq, wc, 2, 10000);
	ok(n == 2 && (wc[0].wr_id == 1 || wc[1].wr_id == 1) &&
		   check_fill(s.buf + 40, 300, 30),
	   "the QP still works: the datagram lands in the first receive");
	/* a sender that stops or dies holding the queue lock */
	{
		int pfd[2];
		char x = 0;
		pid_t pid;

		if (pipe(pfd))
			bail_out("pipe");
		pid = fork();
		if (!pid) {
			pthread_mutex_lock((pthread_mutex_t *)(q + 24));
			if (write(pfd[1], &x, 1) != 1)
				_exit(1);
			pause();
			_exit(0);
		}
		ok(pid > 0 && read(pfd[0], &x, 1) == 1,
		   "another process holds the queue lock and stops");
		close(pfd[0]);
		close(pfd[1]);
		before = softrdma_qp_drops(s.qp, 2);
		ok(!ud_send(&s, s.qp, ah, s.qp->qp_num, QKEY, 100000, 300, 11,
			    0) &&
			   t_wait(s.t.cq, wc, 1, 10000) == 1 &&
			   wc[0].wr_id == 11 && wc[0].status == IBV_WC_SUCCESS,
		   "a send behind it completes (bounded wait)");
		is_int(softrdma_qp_drops(s.qp, 2), before + 1,
		       "and its datagram is dropped, counted");
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		memset(s.buf + RBUF, 0, RBUF);
		ok(!ud_send(&s, s.qp, ah, s.qp->qp_num, QKEY, 100000, 300, 12,
			    0) &&
			   t_wait(s.t.cq, wc, 2, 10000) == 2 &&
			   check_fill(s.buf + RBUF + 40, 300, 30),
		   "the holder killed, its lock is recovered and the next "
		   "datagram arrives");
	}
	/* a queue header with a bad cell count is refused by a new sender */
	n = 3;
	memcpy(q + Q_NSLOTS, &n, 4);
	tx2 = mk_qp(&s, IBV_QPT_UD);
	ok(tx2 && !t_ud_up(tx2, QKEY) &&
		   !ud_send(&s, tx2, ah, s.qp->qp_num, QKEY, 100000, 300, 10,
			    0) &&
		   t_wait(s.t.cq, wc, 1, 10000) == 1 && wc[0].wr_id == 10 &&
		   !t_wait(s.t.cq, wc + 1, 1, 50) &&
		   softrdma_qp_drops(tx2, 4) == 1,
	   "a queue with 3 cells is not written to (the send is lost)");
	munmap(seg, seglen);
	if (tx2)
		ibv_destroy_qp(tx2);
	ibv_destroy_ah(ah);
	side_close(&s);
}

int main(void)
{
	t_isolate("ud");
	test_ib(); /* first: its process must not inherit an open device */
	test_ud();
	test_uc();
	test_uc_norecv();
	test_uc_srq_norecv();
	test_uc_remote();
	test_uc_mw();
	test_errors();
	test_srq();
	test_srq_late();
	test_ah();
	test_stopped();
	test_hostile();
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
