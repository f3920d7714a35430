/* SPDX-License-Identifier: MIT */
/*
 * sqd.c -- the send queue drain state and UC's full queue:
 *  - WRs posted to an RC or UD QP in SQD are accepted (and count against
 *    max_send_wr) but not executed until the QP returns to RTS, then run
 *    in order; inline data is taken at posting; to ERR they are flushed;
 *  - IBV_EVENT_SQ_DRAINED comes when nothing posted before SQD is in
 *    flight: at once, or when the last such send completes;
 *  - a UC SEND that finds the receiver's queue full is dropped and
 *    counted, and completes at once (no ACK, no waiting in the sender);
 *  - with max_rd_atomic 0 a READ is held, and what is posted behind it,
 *    until the QP is given a limit in SQD (rxe's rd_atomic count).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

/* softrdma's drop counters (why: 0 no receive, 1 qkey, 2 full, -1 all) */
uint64_t softrdma_qp_drops(struct ibv_qp *qp, int why);

#define QKEY 0x11111111u
#define BIG  (1536u << 10) /* 384 cells of the UC queue's 512 */

static struct ibv_qp *mk_qp(struct tctx *t, enum ibv_qp_type type, int depth)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = t->cq;
	a.qp_type = type;
	a.cap.max_send_wr = (uint32_t)depth;
	a.cap.max_recv_wr = (uint32_t)depth;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = 64;
	return ibv_create_qp(t->pd, &a);
}

static int to_state(struct ibv_qp *qp, enum ibv_qp_state s, int notify)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = s;
	a.en_sqd_async_notify = (uint8_t)notify;
	return ibv_modify_qp(
		qp, &a,
		IBV_QP_STATE |
			(s == IBV_QPS_SQD ? IBV_QP_EN_SQD_ASYNC_NOTIFY : 0));
}

/* quiet -- poll both CQs n times: completions seen (none expected) */
static int quiet(struct ibv_cq *a, struct ibv_cq *b, int n)
{
	struct ibv_wc wc;
	int seen = 0;

	while (n-- > 0)
		seen += ibv_poll_cq(a, 1, &wc) + ibv_poll_cq(b, 1, &wc);
	return seen;
}

static void test_rc(void)
{
	struct tctx a, b;
	struct ibv_qp *qa, *qb;
	struct ibv_async_event ev;
	struct ibv_mr *ma, *mb;
	struct ibv_wc wc[4];
	struct ibv_qp_attr at;
	struct ibv_qp_init_attr ia;
	uint64_t *bb = calloc(1, 8192);
	char *ab = calloc(1, 8192), inl[32] = "held inline bytes";
	int i, n, fl, extra = 0;

	if (t_open(&a, 64) || t_open(&b, 64))
		bail_out("open");
	fl = fcntl(a.ctx->async_fd, F_GETFL);
	fcntl(a.ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	qa = mk_qp(&a, IBV_QPT_RC, 4);
	qb = mk_qp(&b, IBV_QPT_RC, 4);
	ma = ibv_reg_mr(a.pd, ab, 8192, IBV_ACCESS_LOCAL_WRITE);
	mb = ibv_reg_mr(b.pd, bb, 8192,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_ATOMIC);
	if (!qa || !qb || !ma || !mb ||
	    t_connect(qa, qb->qp_num, 0, 1, 7, 14, 7) ||
	    t_connect(qb, qa->qp_num,
		      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC, 1, 7,
		      14, 7))
		bail_out("rc setup");

	/* nothing in flight: SQ_DRAINED at once */
	is_int(to_state(qa, IBV_QPS_SQD, 1), 0, "RTS -> SQD");
	n = t_async(a.ctx, 5000, &ev);
	ok(n == IBV_EVENT_SQ_DRAINED && ev.element.qp == qa,
	   "IBV_EVENT_SQ_DRAINED for the QP (%d)", n);
	is_int(t_qp_state(qa), IBV_QPS_SQD, "state SQD");

	/* posted in SQD: accepted, not executed */
	t_post_recv(qb, (char *)bb + 4096, 1024, mb->lkey, 50);
	is_int(t_post(qa, IBV_WR_SEND, inl, sizeof(inl), 0, 1,
		      IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0, 0),
	       0, "SEND inline posted in SQD");
	memset(inl, 0, sizeof(inl)); /* taken at posting, as any inline */
	memset(ab, 'w', 64);
	is_int(t_post(qa, IBV_WR_RDMA_WRITE, ab, 64, ma->lkey, 2,
		      IBV_SEND_SIGNALED, (uintptr_t)&bb[16], mb->rkey),
	       0, "RDMA WRITE posted in SQD");
	{
		struct ibv_send_wr wr, *bad;
		struct ibv_sge sge = {(uintptr_t)(ab + 512), 8, ma->lkey};

		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 3;
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.atomic.remote_addr = (uintptr_t)&bb[32];
		wr.wr.atomic.rkey = mb->rkey;
		wr.wr.atomic.compare_add = 5;
		is_int(ibv_post_send(qa, &wr, &bad), 0,
		       "fetch-add posted in SQD");
		/* more, up to the granted depth: then ENOMEM */
		ibv_query_qp(qa, &at, IBV_QP_CAP, &ia);
		wr.send_flags = 0;
		wr.wr.atomic.compare_add = 1;
		for (i = 3; i < (int)ia.cap.max_send_wr; i++)
			if (ibv_post_send(qa, &wr, &bad))
				break;
		ok(i == (int)ia.cap.max_send_wr &&
			   ibv_post_send(qa, &wr, &bad) == ENOMEM,
		   "the held WRs fill max_send_wr (%d): ENOMEM", i);
		extra = i - 3;
	}
	is_int(quiet(a.cq, b.cq, 2000), 0, "no completion while in SQD");
	ok(bb[16] == 0 && bb[32] == 0 && ((char *)bb)[4096] == 0,
	   "nothing reached the responder");
	memset(&at, 0, sizeof(at));
	ibv_query_qp(qa, &at, IBV_QP_STATE, &ia);
	ok(at.qp_state == IBV_QPS_SQD && !at.sq_draining,
	   "query: SQD, drained");

	/* back to RTS: they run, in order */
	is_int(to_state(qa, IBV_QPS_RTS, 0), 0, "SQD -> RTS");
	n = t_wait(a.cq, wc, 3, 30000);
	ok(n == 3 && wc[0].wr_id == 1 && wc[1].wr_id == 2 && wc[2].wr_id == 3 &&
		   !wc[0].status && !wc[1].status && !wc[2].status,
	   "three completions, in order, successful");
	n = t_wait(b.cq, wc, 1, 30000);
	ok(n == 1 && !wc[0].status && wc[0].byte_len == 32 &&
		   !strcmp((char *)bb + 4096, "held inline bytes"),
	   "the SEND carried the inline bytes given at posting");
	ok(((char *)bb)[128] == 'w' && ((char *)bb)[191] == 'w' &&
		   bb[32] == 5u + (uint64_t)extra,
	   "WRITE and fetch-add placed");

	/* held, then ERR: flushed in order */
	to_state(qa, IBV_QPS_SQD, 0);
	t_post(qa, IBV_WR_RDMA_WRITE, ab, 64, ma->lkey, 4, IBV_SEND_SIGNALED,
	       (uintptr_t)&bb[48], mb->rkey);
	t_post(qa, IBV_WR_RDMA_WRITE, ab, 64, ma->lkey, 5, 0,
	       (uintptr_t)&bb[56], mb->rkey);
	is_int(to_state(qa, IBV_QPS_ERR, 0), 0, "SQD -> ERR");
	n = t_wait(a.cq, wc, 2, 30000);
	ok(n == 2 && wc[0].wr_id == 4 && wc[0].status == IBV_WC_WR_FLUSH_ERR &&
		   wc[1].wr_id == 5 && wc[1].status == IBV_WC_WR_FLUSH_ERR,
	   "held WRs flushed in order");
	ok(bb[48] == 0 && bb[56] == 0, "and never executed");
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);

	/* a SEND in flight (RNR, retried forever): SQ_DRAINED waits for it */
	qa = mk_qp(&a, IBV_QPT_RC, 4);
	qb = mk_qp(&b, IBV_QPT_RC, 4);
	if (!qa || !qb || t_connect(qa, qb->qp_num, 0, 1, 7, 14, 7) ||
	    t_connect(qb, qa->qp_num, 0, 1, 7, 14, 7))
		bail_out("rc setup 2");
	t_post(qa, IBV_WR_SEND, ab, 16, ma->lkey, 6, IBV_SEND_SIGNALED, 0, 0);
	quiet(a.cq, b.cq, 100);
	is_int(to_state(qa, IBV_QPS_SQD, 1), 0, "RTS -> SQD, a SEND in flight");
	ibv_query_qp(qa, &at, IBV_QP_STATE, &ia);
	ok(at.sq_draining, "query: draining");
	quiet(a.cq, b.cq, 100);
	is_int(t_async(a.ctx, 0, NULL), -1, "no SQ_DRAINED yet");
	t_post_recv(qb, (char *)bb + 4096, 1024, mb->lkey, 51);
	n = t_wait(a.cq, wc, 1, 30000);
	ok(n == 1 && wc[0].wr_id == 6 && !wc[0].status,
	   "the SEND in flight completes in SQD");
	n = t_async(a.ctx, 5000, &ev);
	ok(n == IBV_EVENT_SQ_DRAINED && ev.element.qp == qa,
	   "then IBV_EVENT_SQ_DRAINED (%d)", n);
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	t_close(&a);
	t_close(&b);
	free(ab);
	free(bb);
}

static void test_ud(void)
{
	struct tctx a, b;
	struct ibv_qp *qa, *qb;
	struct ibv_mr *ma, *mb;
	struct ibv_ah *ah;
	struct ibv_ah_attr aa;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	char *ab = calloc(1, 4096), *bb = calloc(1, 8192);
	int n;

	if (t_open(&a, 16) || t_open(&b, 16))
		bail_out("open");
	qa = mk_qp(&a, IBV_QPT_UD, 4);
	qb = mk_qp(&b, IBV_QPT_UD, 4);
	ma = ibv_reg_mr(a.pd, ab, 4096, IBV_ACCESS_LOCAL_WRITE);
	mb = ibv_reg_mr(b.pd, bb, 8192, IBV_ACCESS_LOCAL_WRITE);
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.sgid_index = 1;
	aa.grh.hop_limit = 1;
	if (!qa || !qb || !ma || !mb || t_ud_up(qa, QKEY) ||
	    t_ud_up(qb, QKEY) || ibv_query_gid(a.ctx, 1, 1, &aa.grh.dgid))
		bail_out("ud setup");
	ah = ibv_create_ah(a.pd, &aa);
	t_post_recv(qb, bb, 4096 + 40, mb->lkey, 9);
	is_int(to_state(qa, IBV_QPS_SQD, 0), 0, "UD: RTS -> SQD");
	memset(ab, 'u', 100);
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)ab;
	sge.length = 100;
	sge.lkey = ma->lkey;
	wr.wr_id = 7;
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qb->qp_num;
	wr.wr.ud.remote_qkey = QKEY;
	is_int(ibv_post_send(qa, &wr, &bad), 0, "UD: SEND posted in SQD");
	is_int(quiet(a.cq, b.cq, 2000), 0, "UD: nothing sent or received");
	is_int(to_state(qa, IBV_QPS_RTS, 0), 0, "UD: SQD -> RTS");
	n = t_wait(a.cq, &wc, 1, 30000);
	ok(n == 1 && wc.wr_id == 7 && !wc.status, "UD: the send completes");
	n = t_wait(b.cq, &wc, 1, 30000);
	ok(n == 1 && !wc.status && wc.byte_len == 140 && bb[40] == 'u' &&
		   bb[139] == 'u',
	   "UD: the datagram arrives after RTS");
	ibv_destroy_ah(ah);
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	t_close(&a);
	t_close(&b);
	free(ab);
	free(bb);
}

static void test_uc_full(void)
{
	struct tctx a, b;
	struct ibv_qp *qa, *qb;
	struct ibv_mr *ma, *mb;
	struct ibv_wc wc[4];
	unsigned char *ab = malloc(BIG), *bb = calloc(3, BIG);
	size_t i;
	int n, good = 1;

	if (t_open(&a, 16) || t_open(&b, 16))
		bail_out("open");
	qa = mk_qp(&a, IBV_QPT_UC, 4);
	qb = mk_qp(&b, IBV_QPT_UC, 4);
	ma = ibv_reg_mr(a.pd, ab, BIG, IBV_ACCESS_LOCAL_WRITE);
	mb = ibv_reg_mr(b.pd, bb, 3 * BIG, IBV_ACCESS_LOCAL_WRITE);
	if (!qa || !qb || !ma || !mb || t_uc_up(qa, qb->qp_num, 0) ||
	    t_uc_up(qb, qa->qp_num, 0))
		bail_out("uc setup");
	for (i = 0; i < 3; i++)
		t_post_recv(qb, bb + i * BIG, BIG, mb->lkey, 20 + i);
	for (i = 0; i < BIG; i++)
		ab[i] = (unsigned char)(i * 7 + 1);
	/* the receiver's context never runs until the end: its queue of
	 * 512 cells holds the first 384-cell message, not the second */
	t_post(qa, IBV_WR_SEND, ab, BIG, ma->lkey, 11, IBV_SEND_SIGNALED, 0, 0);
	t_post(qa, IBV_WR_SEND, ab, BIG, ma->lkey, 12, IBV_SEND_SIGNALED, 0, 0);
	t_post(qa, IBV_WR_SEND, ab, 100, ma->lkey, 13, IBV_SEND_SIGNALED, 0, 0);
	n = ibv_poll_cq(a.cq, 4, wc);
	ok(n == 3 && wc[0].wr_id == 11 && wc[1].wr_id == 12 &&
		   wc[2].wr_id == 13 && !wc[0].status && !wc[1].status &&
		   !wc[2].status,
	   "UC: all three sends completed at posting, none waits (%d)", n);
	is_int((int)softrdma_qp_drops(qb, 2), 1,
	       "UC: the one that found the queue full is dropped, counted");
	n = t_wait(b.cq, wc, 2, 10000);
	for (i = 0; i < BIG; i++)
		if (bb[i] != (unsigned char)(i * 7 + 1))
			good = 0;
	ok(n == 2 && wc[0].wr_id == 20 && wc[0].byte_len == BIG && good,
	   "UC: the first message arrived whole");
	ok(n == 2 && wc[1].wr_id == 21 && wc[1].byte_len == 100 &&
		   bb[BIG] == 1 && bb[BIG + 99] == (unsigned char)(99 * 7 + 1),
	   "UC: the third arrived in the next receive (no credit lost)");
	is_int(ibv_poll_cq(b.cq, 1, wc), 0, "UC: nothing else");
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	t_close(&a);
	t_close(&b);
	free(ab);
	free(bb);
}

/* rd_atomic -- max_rd_atomic of qp set to rd in SQD, back to RTS */
static int rd_atomic(struct ibv_qp *qp, int rd)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_SQD;
	a.max_rd_atomic = (uint8_t)rd;
	if (to_state(qp, IBV_QPS_SQD, 0) ||
	    ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_MAX_QP_RD_ATOMIC))
		return -1;
	return to_state(qp, IBV_QPS_RTS, 0);
}

/*
 * test_rd_none -- max_rd_atomic 0 on one host, as rxe (its rd_atomic count
 * at 0 never lets a READ or atomic begin): a READ waits, and the SEND
 * posted behind it with it; given max_rd_atomic 1 (in SQD) and back in
 * RTS both run, in order; a READ held so when the QP goes to ERR is
 * flushed, not executed.
 */
static void test_rd_none(void)
{
	struct tctx a, b;
	struct ibv_qp *qa, *qb;
	struct ibv_mr *ma, *mb;
	struct ibv_wc wc[2];
	char *ab = calloc(1, 8192), *bb = calloc(1, 8192);
	int n;

	if (!ab || !bb || t_open(&a, 64) || t_open(&b, 64))
		bail_out("open");
	qa = mk_qp(&a, IBV_QPT_RC, 4);
	qb = mk_qp(&b, IBV_QPT_RC, 4);
	ma = ibv_reg_mr(a.pd, ab, 8192, IBV_ACCESS_LOCAL_WRITE);
	mb = ibv_reg_mr(b.pd, bb, 8192,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!qa || !qb || !ma || !mb ||
	    t_connect(qa, qb->qp_num, 0, 1, 7, 14, 7) ||
	    t_connect(qb, qa->qp_num, IBV_ACCESS_REMOTE_READ, 1, 7, 14, 7))
		bail_out("rc setup");
	t_fill(bb, 4096, 7);
	is_int(rd_atomic(qa, 0), 0, "max_rd_atomic 0 (SQD, RTS)");
	t_post_recv(qb, bb + 4096, 1024, mb->lkey, 60);
	is_int(t_post(qa, IBV_WR_RDMA_READ, ab, 4096, ma->lkey, 1,
		      IBV_SEND_SIGNALED, (uintptr_t)bb, mb->rkey),
	       0, "READ posted with max_rd_atomic 0");
	is_int(t_post(qa, IBV_WR_SEND, ab + 4096, 100, ma->lkey, 2,
		      IBV_SEND_SIGNALED, 0, 0),
	       0, "SEND posted behind it");
	usleep(100000);
	n = quiet(a.cq, b.cq, 1000);
	ok(n == 0 && !t_filled(ab, 4096, 7),
	   "the READ waits, the SEND with it (%d completions)", n);
	is_int(rd_atomic(qa, 1), 0, "given max_rd_atomic 1 (SQD, RTS)");
	n = t_wait(a.cq, wc, 2, 5000);
	ok(n == 2 && wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS &&
		   wc[1].wr_id == 2 && wc[1].status == IBV_WC_SUCCESS &&
		   t_filled(ab, 4096, 7),
	   "then the READ brings the bytes and the SEND follows, in order");
	n = t_wait(b.cq, wc, 1, 5000);
	ok(n == 1 && wc[0].wr_id == 60 && wc[0].byte_len == 100,
	   "the responder received the SEND");

	/* held when the QP goes to ERR: flushed */
	is_int(rd_atomic(qa, 0), 0, "max_rd_atomic 0 again");
	memset(ab, 0, 4096);
	is_int(t_post(qa, IBV_WR_RDMA_READ, ab, 4096, ma->lkey, 3,
		      IBV_SEND_SIGNALED, (uintptr_t)bb, mb->rkey),
	       0, "READ posted");
	is_int(to_state(qa, IBV_QPS_ERR, 0), 0, "QP to ERR");
	n = t_wait(a.cq, wc, 1, 5000);
	ok(n == 1 && wc[0].wr_id == 3 && wc[0].status == IBV_WC_WR_FLUSH_ERR &&
		   !ab[0] && quiet(a.cq, b.cq, 100) == 0,
	   "the held READ is flushed, never executed");
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	t_close(&a);
	t_close(&b);
	free(ab);
	free(bb);
}

int main(void)
{
	t_isolate("sqd");
	test_rc();
	test_ud();
	test_uc_full();
	test_rd_none();
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
