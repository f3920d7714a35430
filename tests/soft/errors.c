/* SPDX-License-Identifier: MIT */
/* errors.c -- every completion error status, flushes and post errors */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tap.h"
#include "common.h"

static struct tctx t;
static struct ibv_cq *acq, *bcq;
static char *abuf, *bbuf;
static struct ibv_mr *amr, *bmr;

#define BUFSZ 65536

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* cpu_ms -- this thread's CPU time: t_wait spins, so waiting for a timer
 * costs CPU time, while being held back by a loaded machine does not */
static double cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* pair -- a -> b connected QPs on their own CQs */
/* pair_on -- a and b connected, b on srq when it is not NULL */
static void pair_on(struct ibv_qp **a, struct ibv_qp **b, struct ibv_srq *srq,
		    int b_access, int b_rnr_timer, int a_rnr_retry, int sig_all)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = 4;
	ia.cap.max_recv_sge = 4;
	ia.cap.max_inline_data = 64;
	ia.sq_sig_all = sig_all;
	ia.send_cq = ia.recv_cq = acq;
	*a = ibv_create_qp(t.pd, &ia);
	ia.send_cq = ia.recv_cq = bcq;
	ia.srq = srq;
	*b = ibv_create_qp(t.pd, &ia);
	if (!*a || !*b)
		bail_out("create_qp");
	if (t_connect(*a, (*b)->qp_num,
		      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_REMOTE_ATOMIC,
		      12, a_rnr_retry, 14, 7) ||
	    t_connect(*b, (*a)->qp_num, b_access, b_rnr_timer, 7, 14, 7))
		bail_out("connect");
}

static void pair(struct ibv_qp **a, struct ibv_qp **b, int b_access,
		 int b_rnr_timer, int a_rnr_retry, int sig_all)
{
	pair_on(a, b, NULL, b_access, b_rnr_timer, a_rnr_retry, sig_all);
}

static void unpair(struct ibv_qp *a, struct ibv_qp *b)
{
	struct ibv_wc wc[16];

	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	while (ibv_poll_cq(acq, 16, wc) > 0)
		;
	while (ibv_poll_cq(bcq, 16, wc) > 0)
		;
}

static void test_len_err(void)
{
	struct ibv_qp *a, *b;
	struct ibv_wc wc;

	pair(&a, &b, 0, 12, 7, 1);
	t_post_recv(b, bbuf, 8, bmr->lkey, 1);
	t_post(a, IBV_WR_SEND, abuf, 64, amr->lkey, 2, 0, 0, 0);
	is_int(t_wait(bcq, &wc, 1, 30000), 1, "len: receiver completion");
	is_int(wc.status, IBV_WC_LOC_LEN_ERR, "receiver LOC_LEN_ERR");
	is_int(wc.wr_id, 1, "receiver wr_id");
	is_int(t_wait(acq, &wc, 1, 30000), 1, "len: sender completion");
	is_int(wc.status, IBV_WC_REM_INV_REQ_ERR, "sender REM_INV_REQ_ERR");
	is_int(t_qp_state(a), IBV_QPS_ERR, "sender QP in ERR");
	is_int(t_qp_state(b), IBV_QPS_ERR, "receiver QP in ERR");
	unpair(a, b);
}

static void test_recv_prot(void)
{
	struct ibv_qp *a, *b;
	struct ibv_wc wc;

	pair(&a, &b, 0, 12, 7, 1);
	t_post_recv(b, bbuf, 64, bmr->lkey + 1, 1);
	t_post(a, IBV_WR_SEND, abuf, 16, amr->lkey, 2, 0, 0, 0);
	is_int(t_wait(bcq, &wc, 1, 30000), 1, "recv prot: receiver completion");
	is_int(wc.status, IBV_WC_LOC_PROT_ERR, "receiver LOC_PROT_ERR");
	is_int(t_wait(acq, &wc, 1, 30000), 1, "recv prot: sender completion");
	is_int(wc.status, IBV_WC_REM_OP_ERR, "sender REM_OP_ERR");
	unpair(a, b);
}

static void test_send_prot(void)
{
	struct ibv_qp *a, *b;
	struct ibv_wc wc[2];

	pair(&a, &b, 0, 12, 7, 1);
	t_post_recv(b, bbuf, 64, bmr->lkey, 1);
	is_int(t_post(a, IBV_WR_SEND, abuf, 16, 0xdead, 2, 0, 0, 0), 0,
	       "bad lkey is accepted by post_send");
	is_int(t_post(a, IBV_WR_SEND, abuf, 16, amr->lkey, 3, 0, 0, 0), 0,
	       "next WR posted");
	is_int(t_wait(acq, wc, 2, 30000), 2, "two sender completions");
	is_int(wc[0].status, IBV_WC_LOC_PROT_ERR, "LOC_PROT_ERR");
	is_int(wc[0].wr_id, 2, "on the bad WR");
	is_int(wc[1].status, IBV_WC_WR_FLUSH_ERR, "next one flushed");
	is_int(t_qp_state(a), IBV_QPS_ERR, "QP in ERR");
	is_int(t_post(a, IBV_WR_SEND, abuf, 16, amr->lkey, 4, 0, 0, 0), 0,
	       "post in ERR accepted");
	is_int(t_wait(acq, wc, 1, 30000), 1, "completion of post in ERR");
	is_int(wc[0].status, IBV_WC_WR_FLUSH_ERR, "flushed");
	is_int(t_wait(bcq, wc, 1, 100), 0, "receiver got nothing");
	unpair(a, b);
}

static void test_rem_access(void)
{
	struct ibv_qp *a, *b;
	struct ibv_wc wc[3];
	struct ibv_mr *ro =
		ibv_reg_mr(t.pd, bbuf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_send_wr wr[2], *bad;
	struct ibv_sge sge[2];

	memset(bbuf, 0x11, 8192);
	memset(abuf, 0x22, 4096);
	pair(&a, &b, IBV_ACCESS_REMOTE_WRITE, 12, 7, 1);
	/* a failing write followed, in the same post, by a valid one */
	memset(wr, 0, sizeof(wr));
	sge[0] = (struct ibv_sge){(uintptr_t)abuf, 64, amr->lkey};
	sge[1] = sge[0];
	wr[0].wr_id = 1;
	wr[0].opcode = IBV_WR_RDMA_WRITE;
	wr[0].sg_list = &sge[0];
	wr[0].num_sge = 1;
	wr[0].wr.rdma.remote_addr = (uintptr_t)bbuf + 4096;
	wr[0].wr.rdma.rkey = ro->rkey;
	wr[0].next = &wr[1];
	wr[1] = wr[0];
	wr[1].next = NULL;
	wr[1].wr_id = 2;
	wr[1].sg_list = &sge[1];
	wr[1].wr.rdma.remote_addr = (uintptr_t)bbuf;
	wr[1].wr.rdma.rkey = bmr->rkey;
	is_int(ibv_post_send(a, wr, &bad), 0, "post two writes");
	is_int(t_wait(acq, wc, 2, 30000), 2, "two completions");
	is_int(wc[0].status, IBV_WC_REM_ACCESS_ERR,
	       "write without REMOTE_WRITE: REM_ACCESS_ERR");
	is_int(wc[1].status, IBV_WC_WR_FLUSH_ERR, "later WR flushed");
	is_int(t_qp_state(a), IBV_QPS_ERR, "initiator QP in ERR");
	ok(bbuf[4096] == 0x11 && bbuf[4096 + 63] == 0x11,
	   "target memory untouched");
	ok(bbuf[0] == 0x11, "flushed write not executed");
	unpair(a, b);

	/* out of bounds, and a QP without remote write access */
	pair(&a, &b, IBV_ACCESS_REMOTE_WRITE, 12, 7, 1);
	t_post(a, IBV_WR_RDMA_WRITE, abuf, 64, amr->lkey, 3, 0,
	       (uintptr_t)bbuf + BUFSZ - 32, bmr->rkey);
	is_int(t_wait(acq, wc, 1, 30000), 1, "oob completion");
	is_int(wc[0].status, IBV_WC_REM_ACCESS_ERR, "out of bounds");
	unpair(a, b);
	pair(&a, &b, IBV_ACCESS_REMOTE_READ, 12, 7, 1);
	t_post(a, IBV_WR_RDMA_WRITE, abuf, 64, amr->lkey, 4, 0, (uintptr_t)bbuf,
	       bmr->rkey);
	is_int(t_wait(acq, wc, 1, 30000), 1, "qp access completion");
	is_int(wc[0].status, IBV_WC_REM_ACCESS_ERR,
	       "target QP without REMOTE_WRITE");
	t_post(a, IBV_WR_RDMA_READ, abuf, 64, 0x1234, 5, 0, (uintptr_t)bbuf,
	       bmr->rkey);
	is_int(t_wait(acq, wc, 1, 30000), 1, "read after error");
	is_int(wc[0].status, IBV_WC_WR_FLUSH_ERR, "flushed");
	ok(bbuf[0] == 0x11, "target memory untouched");
	unpair(a, b);
	ibv_dereg_mr(ro);
}

/* qp_event -- the next async event of qp b, acking any other; -1 if none
 * in 2 s */
static int qp_event(struct ibv_qp *b)
{
	struct pollfd p = {.fd = t.ctx->async_fd, .events = POLLIN};
	struct ibv_async_event ev;
	int type;

	while (poll(&p, 1, 2000) == 1 && !ibv_get_async_event(t.ctx, &ev)) {
		type = (int)ev.event_type;
		ibv_ack_async_event(&ev);
		if (ev.element.qp == b)
			return type;
	}
	return -1;
}

/*
 * test_rem_access_responder -- the responder's side of a request that
 * breaks its access rules (rxe's do_class_ac_error, mlx5; between hosts
 * net.c): after what was sent before it is delivered, the responder's QP
 * goes to ERR with IBV_EVENT_QP_ACCESS_ERR (a misaligned atomic, an
 * invalid request: IBV_EVENT_QP_REQ_ERR), its receives flush
 */
static void test_rem_access_responder(void)
{
	static const struct {
		enum ibv_wr_opcode op;
		int misaligned, status, event;
		const char *name;
	} c[] = {
		{IBV_WR_RDMA_WRITE, 0, IBV_WC_REM_ACCESS_ERR,
		 IBV_EVENT_QP_ACCESS_ERR, "WRITE"},
		{IBV_WR_RDMA_WRITE_WITH_IMM, 0, IBV_WC_REM_ACCESS_ERR,
		 IBV_EVENT_QP_ACCESS_ERR, "WRITE_WITH_IMM"},
		{IBV_WR_RDMA_READ, 0, IBV_WC_REM_ACCESS_ERR,
		 IBV_EVENT_QP_ACCESS_ERR, "READ"},
		{IBV_WR_ATOMIC_FETCH_AND_ADD, 0, IBV_WC_REM_ACCESS_ERR,
		 IBV_EVENT_QP_ACCESS_ERR, "FETCH_ADD"},
		{IBV_WR_ATOMIC_CMP_AND_SWP, 1, IBV_WC_REM_INV_REQ_ERR,
		 IBV_EVENT_QP_REQ_ERR, "misaligned CMP_SWP"},
	};
	struct ibv_mr *ro =
		ibv_reg_mr(t.pd, bbuf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp *a, *b;
	struct ibv_wc wc[2];
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		pair(&a, &b,
		     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_ATOMIC,
		     12, 7, 1);
		memset(bbuf, 0x11, 64);
		t_post_recv(b, bbuf, 64, bmr->lkey, 1);
		t_post_recv(b, bbuf, 64, bmr->lkey, 2);
		strcpy(abuf, "before");
		t_post(a, IBV_WR_SEND, abuf, 7, amr->lkey, 10, 0, 0, 0);
		if (c[i].misaligned)
			t_post(a, c[i].op, abuf + 64, 8, amr->lkey, 11, 0,
			       (uintptr_t)bbuf + 1028, bmr->rkey);
		else
			t_post(a, c[i].op, abuf + 64, 8, amr->lkey, 11, 0,
			       (uintptr_t)bbuf + 4096, ro->rkey);
		ok(t_wait(acq, wc, 2, 30000) == 2 && wc[0].wr_id == 10 &&
			   !wc[0].status && wc[1].wr_id == 11 &&
			   (int)wc[1].status == c[i].status,
		   "%s: the SEND before succeeds, then the refusal", c[i].name);
		/* the responder refused it before its NAK came back */
		ok(t_qp_state(b) == IBV_QPS_ERR, "%s: responder QP in ERR",
		   c[i].name);
		ok(t_wait(bcq, wc, 2, 30000) == 2 && wc[0].wr_id == 1 &&
			   !wc[0].status && !strcmp(bbuf, "before") &&
			   wc[1].wr_id == 2 &&
			   wc[1].status == IBV_WC_WR_FLUSH_ERR,
		   "%s: responder received the SEND, then flushed", c[i].name);
		ok(qp_event(b) == c[i].event, "%s: responder's async event",
		   c[i].name);
		unpair(a, b);
	}
	ibv_dereg_mr(ro);
}

/* rd_connect -- qp in RTS towards dest on this host, with the given
 * max_dest_rd_atomic (responder) and max_rd_atomic (requester) */
static int rd_connect(struct ibv_qp *qp, uint32_t dest, int dest_rd, int rd)
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
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = (uint8_t)dest_rd;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_query_gid(qp->context, 1, 1, &a.ah_attr.grh.dgid) ||
	    ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = (uint8_t)rd;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

/* rd_pair -- a -> b with b's max_dest_rd_atomic dest_rd and a's
 * max_rd_atomic rd, room for 32 WRs each */
static void rd_pair(struct ibv_qp **a, struct ibv_qp **b, int dest_rd, int rd)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 32;
	ia.cap.max_recv_wr = 32;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.sq_sig_all = 1;
	ia.send_cq = ia.recv_cq = acq;
	*a = ibv_create_qp(t.pd, &ia);
	ia.send_cq = ia.recv_cq = bcq;
	*b = ibv_create_qp(t.pd, &ia);
	if (!*a || !*b || rd_connect(*a, (*b)->qp_num, 1, rd) ||
	    rd_connect(*b, (*a)->qp_num, dest_rd, 1))
		bail_out("rd pair");
}

/* rd_post -- one READ (len bytes at bbuf + off into abuf + off) or
 * atomic (op, 8 bytes at bbuf + off, the original into abuf + off) */
static int rd_post(struct ibv_qp *a, enum ibv_wr_opcode op, uint32_t off,
		   uint32_t len, uint64_t wr_id)
{
	struct ibv_sge sge = {(uintptr_t)abuf + off, len, amr->lkey};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	if (op == IBV_WR_RDMA_READ) {
		wr.wr.rdma.remote_addr = (uintptr_t)bbuf + off;
		wr.wr.rdma.rkey = bmr->rkey;
	} else {
		wr.wr.atomic.remote_addr = (uintptr_t)bbuf + off;
		wr.wr.atomic.rkey = bmr->rkey;
		wr.wr.atomic.compare_add = 1;
		wr.wr.atomic.swap = 2;
	}
	return ibv_post_send(a, &wr, &bad);
}

/*
 * test_dest_rd_atomic -- the responder's max_dest_rd_atomic, as rxe's
 * check_resource reads it (and softrdma between hosts, net.c): 0 leaves
 * it no resources, so every READ (zero-length too) and atomic is an
 * invalid request (IBV_WC_REM_INV_REQ_ERR, the responder to ERR with
 * IBV_EVENT_QP_REQ_ERR, nothing read or changed); 1 or more is not a
 * count it checks (rxe recycles its resources: "it is the requesters job
 * to not send too many read/atomic ops"), so a requester of
 * max_rd_atomic 16 has 16 READs and 4 atomics in flight against a
 * responder of 1 and all of them succeed
 */
static void test_dest_rd_atomic(void)
{
	static const struct {
		enum ibv_wr_opcode op;
		uint32_t len;
		const char *name;
	} c[] = {
		{IBV_WR_RDMA_READ, 64, "READ"},
		{IBV_WR_RDMA_READ, 0, "zero-length READ"},
		{IBV_WR_ATOMIC_FETCH_AND_ADD, 8, "FETCH_ADD"},
		{IBV_WR_ATOMIC_CMP_AND_SWP, 8, "CMP_SWP"},
	};
	struct ibv_qp *a, *b;
	struct ibv_wc wc[24];
	uint64_t v;
	size_t i;
	int n, good;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		rd_pair(&a, &b, 0, 4);
		memset(abuf, 0x22, 64);
		memset(bbuf, 0x33, 64);
		v = 0; /* CMP_SWP would swap it, FETCH_ADD add to it */
		memcpy(bbuf, &v, 8);
		ok(!rd_post(a, c[i].op, 0, c[i].len, 11) &&
			   t_wait(acq, wc, 1, 30000) == 1 &&
			   wc[0].wr_id == 11 &&
			   wc[0].status == IBV_WC_REM_INV_REQ_ERR,
		   "max_dest_rd_atomic 0: %s fails with REM_INV_REQ_ERR",
		   c[i].name);
		memcpy(&v, bbuf, 8);
		ok(v == 0 && abuf[8] == 0x22 && abuf[63] == 0x22,
		   "%s: nothing read or changed", c[i].name);
		ok(t_qp_state(b) == IBV_QPS_ERR, "%s: responder QP in ERR",
		   c[i].name);
		ok(qp_event(b) == IBV_EVENT_QP_REQ_ERR,
		   "%s: responder's IBV_EVENT_QP_REQ_ERR", c[i].name);
		unpair(a, b);
	}

	rd_pair(&a, &b, 1, 16);
	for (i = 0; i < 16; i++)
		t_fill(bbuf + 1024 + i * 64, 64, (unsigned)i);
	memset(abuf, 0, 4096);
	v = 100;
	memcpy(bbuf + 64, &v, 8);
	for (i = 0, n = 0; i < 16; i++)
		n += !rd_post(a, IBV_WR_RDMA_READ, 1024 + (uint32_t)i * 64, 64,
			      i);
	for (i = 0; i < 4; i++)
		n += !rd_post(a, IBV_WR_ATOMIC_FETCH_AND_ADD, 64, 8, 16 + i);
	is_int(n, 20,
	       "max_rd_atomic 16 against max_dest_rd_atomic 1: 16 "
	       "READs and 4 FETCH_ADDs posted at once");
	n = t_wait(acq, wc, 20, 30000);
	for (i = 0, good = 0; i < (size_t)n; i++)
		good += wc[i].wr_id == i && wc[i].status == IBV_WC_SUCCESS;
	for (i = 0; i < 16; i++)
		good += t_filled(abuf + 1024 + i * 64, 64, (unsigned)i);
	memcpy(&v, bbuf + 64, 8);
	ok(n == 20 && good == 36 && v == 104,
	   "all succeed in order, the READs bring their bytes, the counter "
	   "went 100 -> %llu (%d of 20)",
	   (unsigned long long)v, n);
	is_int(t_qp_state(b), IBV_QPS_RTS, "the responder stays in RTS");
	unpair(a, b);
}

/* test_zero_len -- a zero-length WRITE, WRITE_WITH_IMM or READ names no
 * memory: its R_Key and VA are not checked (IBA C9-88, rxe; rsocket's
 * credit updates rely on it); the immediate is delivered */
static void test_zero_len(void)
{
	struct ibv_qp *a, *b;
	struct ibv_wc wc[4];
	struct ibv_send_wr wr, *bad;
	int n;

	memset(bbuf, 0x11, 64);
	pair(&a, &b, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 12, 7,
	     1);
	t_post_recv(b, NULL, 0, 0, 70);
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htobe32(0xc0ffee);
	wr.wr.rdma.rkey = 0xdeadbeef;
	wr.wr.rdma.remote_addr = 0x8100000000ull;
	wr.wr_id = 71;
	is_int(ibv_post_send(a, &wr, &bad), 0, "zero-length WRITE_WITH_IMM");
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr_id = 72;
	is_int(ibv_post_send(a, &wr, &bad), 0, "zero-length WRITE");
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr_id = 73;
	wr.wr.rdma.rkey = 0;
	is_int(ibv_post_send(a, &wr, &bad), 0, "zero-length READ");
	n = t_wait(acq, wc, 3, 30000);
	ok(n == 3 && !wc[0].status && !wc[1].status && !wc[2].status &&
		   wc[0].wr_id == 71 && wc[2].wr_id == 73,
	   "all three succeed with a bogus rkey and address");
	n = t_wait(bcq, wc, 1, 30000);
	ok(n == 1 && !wc[0].status && wc[0].wr_id == 70 &&
		   wc[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
		   wc[0].byte_len == 0 && wc[0].imm_data == htobe32(0xc0ffee),
	   "the immediate arrives, 0 bytes");
	ok(bbuf[0] == 0x11 && bbuf[63] == 0x11, "no memory touched");
	is_int(t_qp_state(a), IBV_QPS_RTS, "initiator still RTS");
	unpair(a, b);
}

static void test_rnr(void)
{
	struct ibv_qp *a, *b;
	struct ibv_wc wc;
	double t0, dt, c0, dc;

	/* responder min_rnr_timer 14 = 1.28 ms, requester rnr_retry 2 */
	pair(&a, &b, 0, 14, 2, 1);
	t0 = now_ms();
	t_post(a, IBV_WR_SEND, abuf, 16, amr->lkey, 9, 0, 0, 0);
	is_int(t_wait(acq, &wc, 1, 30000), 1, "rnr: completion");
	dt = now_ms() - t0;
	is_int(wc.status, IBV_WC_RNR_RETRY_EXC_ERR, "RNR_RETRY_EXC_ERR");
	ok(dt >= 2 * 1.28 && dt < 10000, "after 2 retries x 1.28 ms (%.2f ms)",
	   dt);
	is_int(t_qp_state(a), IBV_QPS_ERR, "requester in ERR");
	is_int(t_qp_state(b), IBV_QPS_RTS, "responder unaffected");
	t_post_recv(b, bbuf, 64, bmr->lkey, 1);
	is_int(t_wait(bcq, &wc, 1, 50), 0, "withdrawn message not received");
	unpair(a, b);

	/* rnr_retry 0: the first RNR NAK fails the send */
	pair(&a, &b, 0, 31, 0, 1);
	t0 = now_ms();
	c0 = cpu_ms();
	t_post(a, IBV_WR_SEND, abuf, 16, amr->lkey, 11, 0, 0, 0);
	is_int(t_wait(acq, &wc, 1, 30000), 1, "rnr_retry 0: completion");
	dt = now_ms() - t0;
	dc = cpu_ms() - c0;
	is_int(wc.status, IBV_WC_RNR_RETRY_EXC_ERR, "RNR_RETRY_EXC_ERR");
	ok(dc < 491, "without waiting the 491 ms timer (%.2f ms CPU, %.2f ms)",
	   dc, dt);
	unpair(a, b);

	/* rnr_retry 7: the message waits for the receive */
	pair(&a, &b, 0, 1, 7, 1);
	strcpy(abuf, "late");
	t_post(a, IBV_WR_SEND, abuf, 5, amr->lkey, 10, 0, 0, 0);
	is_int(t_wait(acq, &wc, 1, 30), 0, "no completion while RNR");
	t_post_recv(b, bbuf, 64, bmr->lkey, 2);
	is_int(t_wait(bcq, &wc, 1, 30000), 1, "received once posted");
	ok(wc.status == IBV_WC_SUCCESS && !strcmp(bbuf, "late"), "data");
	is_int(t_wait(acq, &wc, 1, 30000), 1, "sender completion");
	is_int(wc.status, IBV_WC_SUCCESS, "success after RNR");
	unpair(a, b);

	/* a receive posted after the SEND came, before the responder's
	 * next poll: an HCA took (none) on arrival and NAKed it */
	pair(&a, &b, 0, 14, 0, 1);
	t_post(a, IBV_WR_SEND, abuf, 16, amr->lkey, 12, 0, 0, 0);
	t_post_recv(b, bbuf, 64, bmr->lkey, 3);
	is_int(t_wait(acq, &wc, 1, 30000), 1, "late receive: completion");
	is_int(wc.status, IBV_WC_RNR_RETRY_EXC_ERR,
	       "rnr_retry 0: RNR_RETRY_EXC_ERR, the receive came too late");
	is_int(t_wait(bcq, &wc, 1, 50), 0, "nothing received");
	unpair(a, b);

	/* with retries the retransmission, after the 1.28 ms timer, takes
	 * it; so do the messages behind it, posted before it came back */
	pair(&a, &b, 0, 14, 7, 1);
	strcpy(abuf, "one");
	strcpy(abuf + 64, "two");
	t0 = now_ms();
	t_post(a, IBV_WR_SEND, abuf, 4, amr->lkey, 13, 0, 0, 0);
	t_post(a, IBV_WR_SEND, abuf + 64, 4, amr->lkey, 14, 0, 0, 0);
	t_post_recv(b, bbuf, 64, bmr->lkey, 4);
	t_post_recv(b, bbuf + 64, 64, bmr->lkey, 5);
	is_int(t_wait(bcq, &wc, 1, 30000), 1,
	       "late receive, retries: received");
	dt = now_ms() - t0;
	ok(wc.status == IBV_WC_SUCCESS && wc.wr_id == 4 && !strcmp(bbuf, "one"),
	   "the first message, in the first receive");
	ok(dt >= 1.28, "after the RNR timer (%.2f ms)", dt);
	ok(t_wait(bcq, &wc, 1, 30000) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.wr_id == 5 && !strcmp(bbuf + 64, "two"),
	   "the second, in the second");
	ok(t_wait(acq, &wc, 1, 30000) == 1 && wc.status == IBV_WC_SUCCESS &&
		   t_wait(acq, &wc, 1, 30000) == 1 &&
		   wc.status == IBV_WC_SUCCESS,
	   "both sends succeed");
	unpair(a, b);
}

/* test_rnr_srq -- as test_rnr's late receives, on an SRQ: a SEND takes
 * only a WQE the SRQ had when it came, whichever QP's poll finds it */
static void test_rnr_srq(void)
{
	struct ibv_srq *srq = t_srq_filled(&t, 8, NULL, 0, 0, 0, 0);
	struct ibv_qp *a, *b, *a2, *b2;
	struct ibv_wc wc, w2[2], *e;
	double t0, dt;
	int n;

	if (!srq)
		bail_out("create_srq");
	/* rnr_retry 0: the receive came too late */
	pair_on(&a, &b, srq, 0, 14, 0, 1);
	t_post(a, IBV_WR_SEND, abuf, 16, amr->lkey, 12, 0, 0, 0);
	t_post_srq_recv(srq, bbuf, 64, bmr->lkey, 3);
	is_int(t_wait(acq, &wc, 1, 30000), 1, "srq late receive: completion");
	is_int(wc.status, IBV_WC_RNR_RETRY_EXC_ERR,
	       "srq, rnr_retry 0: RNR_RETRY_EXC_ERR, the receive came too "
	       "late");
	is_int(t_wait(bcq, &wc, 1, 50), 0, "srq: nothing received");
	unpair(a, b);

	/* with retries: the first takes the WQE posted above, still there;
	 * the second, come once it was taken, goes in after the timer */
	pair_on(&a, &b, srq, 0, 14, 7, 1);
	strcpy(abuf, "one");
	strcpy(abuf + 64, "two");
	t_post(a, IBV_WR_SEND, abuf, 4, amr->lkey, 13, 0, 0, 0);
	n = t_wait(bcq, &wc, 1, 30000);
	ok(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 3 &&
		   !strcmp(bbuf, "one"),
	   "srq, retries: the first message, in the WQE that was there");
	t0 = now_ms();
	t_post(a, IBV_WR_SEND, abuf + 64, 4, amr->lkey, 14, 0, 0, 0);
	t_post_srq_recv(srq, bbuf + 64, 64, bmr->lkey, 4);
	ok(t_wait(bcq, &wc, 1, 30000) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.wr_id == 4 && !strcmp(bbuf + 64, "two"),
	   "the second, come to an empty SRQ, in the WQE posted after it");
	dt = now_ms() - t0;
	ok(dt >= 1.28, "the second after the RNR timer (%.2f ms)", dt);
	ok(t_wait(acq, &wc, 1, 30000) == 1 && wc.status == IBV_WC_SUCCESS &&
		   t_wait(acq, &wc, 1, 30000) == 1 &&
		   wc.status == IBV_WC_SUCCESS,
	   "srq: both sends succeed");
	unpair(a, b);

	/* two QPs on the SRQ: the one whose SEND came before the WQE is
	 * NAKed, the one whose SEND came after takes it, in whatever order
	 * the responder finds them */
	pair_on(&a, &b, srq, 0, 14, 0, 1);
	pair_on(&a2, &b2, srq, 0, 14, 0, 1);
	strcpy(abuf, "early");
	strcpy(abuf + 64, "after");
	t_post(a, IBV_WR_SEND, abuf, 6, amr->lkey, 15, 0, 0, 0);
	t_post_srq_recv(srq, bbuf, 64, bmr->lkey, 5);
	t_post(a2, IBV_WR_SEND, abuf + 64, 6, amr->lkey, 16, 0, 0, 0);
	n = t_wait(bcq, &wc, 1, 30000);
	ok(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 5 &&
		   wc.qp_num == b2->qp_num && !strcmp(bbuf, "after"),
	   "the WQE goes to the SEND that came after it (%d, qp %u)", n,
	   n == 1 ? wc.qp_num : 0);
	n = t_wait(acq, w2, 2, 30000);
	e = &w2[w2[0].wr_id != 15]; /* the early one's completion */
	ok(n == 2 && e->wr_id == 15 && e->status == IBV_WC_RNR_RETRY_EXC_ERR &&
		   w2[e == w2].status == IBV_WC_SUCCESS,
	   "the early SEND fails with RNR_RETRY_EXC_ERR, the other succeeds "
	   "(%d)",
	   n);
	unpair(a2, b2);
	unpair(a, b);
	ibv_destroy_srq(srq);
}

static void test_flush(void)
{
	struct ibv_qp *a, *b;
	struct ibv_wc wc[4];

	pair(&a, &b, 0, 12, 7, 1);
	t_post_recv(b, bbuf, 64, bmr->lkey, 1);
	t_post_recv(b, bbuf, 64, bmr->lkey, 2);
	is_int(t_qp_err(b), 0, "modify to ERR");
	is_int(t_wait(bcq, wc, 2, 30000), 2, "two flushed receives");
	ok(wc[0].status == IBV_WC_WR_FLUSH_ERR && wc[0].wr_id == 1 &&
		   wc[1].status == IBV_WC_WR_FLUSH_ERR && wc[1].wr_id == 2 &&
		   wc[0].opcode == IBV_WC_RECV,
	   "RQ flushed in order, opcode RECV");
	t_post_recv(b, bbuf, 64, bmr->lkey, 3);
	is_int(t_wait(bcq, wc, 1, 30000), 1, "receive posted in ERR");
	is_int(wc[0].status, IBV_WC_WR_FLUSH_ERR, "flushed");
	unpair(a, b);
}

/* test_reset_cleans -- a QP moved to RESET takes its CQEs out of its CQ
 * (as mlx5's and rxe's): only the other QP's completion is left */
static void test_reset_cleans(void)
{
	struct ibv_qp *a, *b;
	struct ibv_wc wc[4];
	struct ibv_qp_attr qa;

	pair(&a, &b, 0, 12, 7, 1);
	t_post_recv(a, abuf, 64, amr->lkey, 7); /* a's RQ is on acq */
	t_post_recv(b, bbuf, 64, bmr->lkey, 1);
	t_post_recv(b, bbuf, 64, bmr->lkey, 2);
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_ERR;
	ibv_modify_qp(b, &qa, IBV_QP_STATE);
	ibv_modify_qp(a, &qa, IBV_QP_STATE);
	ibv_poll_cq(acq, 0, wc); /* progress: both flush into their CQs */
	ibv_poll_cq(bcq, 0, wc);
	qa.qp_state = IBV_QPS_RESET;
	is_int(ibv_modify_qp(b, &qa, IBV_QP_STATE), 0, "modify to RESET");
	is_int(t_wait(bcq, wc, 2, 200), 0,
	       "the reset QP's flushed receives left its CQ with it");
	ok(t_wait(acq, wc, 1, 30000) == 1 && wc[0].wr_id == 7 &&
		   wc[0].status == IBV_WC_WR_FLUSH_ERR &&
		   !ibv_poll_cq(acq, 2, wc + 1),
	   "another QP's completion stays (and no other)");
	unpair(a, b);
}

static void test_post_errors(void)
{
	struct ibv_qp *a, *b;
	struct ibv_send_wr wr[2], *bad;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge sge[5];
	struct ibv_wc wc[8];
	int i;

	pair(&a, &b, 0, 12, 7, 0);
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 5; i++)
		sge[i] = (struct ibv_sge){(uintptr_t)abuf, 8, amr->lkey};
	wr[0].opcode = IBV_WR_SEND;
	wr[0].sg_list = sge;
	wr[0].num_sge = 5;
	bad = NULL;
	is_int(ibv_post_send(a, wr, &bad), EINVAL, "num_sge > max_send_sge");
	ok(bad == &wr[0], "bad_wr");
	wr[0].num_sge = 1;
	sge[0].length = 65;
	wr[0].send_flags = IBV_SEND_INLINE;
	is_int(ibv_post_send(a, wr, &bad), EINVAL, "inline above max");
	sge[0].length = 8;
	wr[0].send_flags = 0;
	wr[0].next = &wr[1];
	wr[1] = wr[0];
	wr[1].next = NULL;
	wr[1].opcode = (enum ibv_wr_opcode)99;
	t_post_recv(b, bbuf, 64, bmr->lkey, 1);
	is_int(ibv_post_send(a, wr, &bad), EINVAL, "bad opcode");
	ok(bad == &wr[1], "bad_wr is the second WR");
	is_int(t_wait(bcq, wc, 1, 30000), 1, "first WR of the chain went out");
	is_int(t_wait(acq, wc, 1, 50), 0,
	       "unsignaled send makes no completion");
	for (i = 0; i < 8; i++)
		t_post_recv(b, bbuf, 64, bmr->lkey, 10 + (uint64_t)i);
	wr[0].next = NULL;
	for (i = 0; i < 8; i++)
		if (ibv_post_send(a, wr, &bad))
			break;
	is_int(ibv_post_send(a, wr, &bad), ENOMEM, "SQ full -> ENOMEM");
	wr[0].send_flags = IBV_SEND_SIGNALED;
	t_wait(acq, wc, 8, 200);
	memset(&rwr, 0, sizeof(rwr));
	rwr.sg_list = sge;
	rwr.num_sge = 5;
	is_int(ibv_post_recv(b, &rwr, &rbad), EINVAL, "recv num_sge > max");
	ok(rbad == &rwr, "recv bad_wr");
	unpair(a, b);
}

static void test_ops(void)
{
	struct ibv_qp *a, *b;
	struct ibv_wc wc[2];
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	uint64_t *ctr = (uint64_t *)(void *)(bbuf + 1024);
	uint64_t *res = (uint64_t *)(void *)(abuf + 2048);

	pair(&a, &b,
	     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_ATOMIC,
	     12, 7, 1);
	/* write with immediate */
	memset(abuf, 'w', 100);
	t_post_recv(b, NULL, 0, 0, 50);
	memset(&wr, 0, sizeof(wr));
	sge = (struct ibv_sge){(uintptr_t)abuf, 100, amr->lkey};
	wr.wr_id = 51;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.imm_data = htobe32(0xabcd);
	wr.wr.rdma.remote_addr = (uintptr_t)bbuf + 4096;
	wr.wr.rdma.rkey = bmr->rkey;
	is_int(ibv_post_send(a, &wr, &bad), 0, "post write_with_imm");
	is_int(t_wait(bcq, wc, 1, 30000), 1, "imm completion at target");
	is_int(wc[0].status, IBV_WC_SUCCESS, "ok");
	is_int(wc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM, "RECV_RDMA_WITH_IMM");
	is_int(wc[0].byte_len, 100, "byte_len = write length");
	ok(wc[0].wc_flags & IBV_WC_WITH_IMM, "WITH_IMM flag");
	is_int(wc[0].imm_data, htobe32(0xabcd), "imm in network order");
	ok(bbuf[4096] == 'w' && bbuf[4096 + 99] == 'w', "data written");
	is_int(t_wait(acq, wc, 1, 30000), 1, "initiator completion");
	is_int(wc[0].opcode, IBV_WC_RDMA_WRITE, "opcode RDMA_WRITE");
	/* read */
	memset(bbuf + 8192, 'r', 300);
	t_post(a, IBV_WR_RDMA_READ, abuf + 8192, 300, amr->lkey, 52, 0,
	       (uintptr_t)bbuf + 8192, bmr->rkey);
	is_int(t_wait(acq, wc, 1, 30000), 1, "read completion");
	ok(wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_RDMA_READ &&
		   wc[0].byte_len == 300,
	   "RDMA_READ ok, byte_len");
	ok(abuf[8192] == 'r' && abuf[8192 + 299] == 'r', "read data");
	/* atomics */
	*ctr = 40;
	memset(&wr, 0, sizeof(wr));
	sge = (struct ibv_sge){(uintptr_t)res, 8, amr->lkey};
	wr.wr_id = 53;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.wr.atomic.remote_addr = (uintptr_t)ctr;
	wr.wr.atomic.rkey = bmr->rkey;
	wr.wr.atomic.compare_add = 2;
	ibv_post_send(a, &wr, &bad);
	is_int(t_wait(acq, wc, 1, 30000), 1, "fetch_add completion");
	ok(wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_FETCH_ADD,
	   "FETCH_ADD ok");
	ok(*res == 40 && *ctr == 42, "fetched 40, now 42");
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 42;
	wr.wr.atomic.swap = 7;
	ibv_post_send(a, &wr, &bad);
	t_wait(acq, wc, 1, 30000);
	ok(wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_COMP_SWAP &&
		   *res == 42 && *ctr == 7,
	   "CMP_AND_SWP swapped");
	wr.wr.atomic.compare_add = 1;
	wr.wr.atomic.swap = 9;
	ibv_post_send(a, &wr, &bad);
	t_wait(acq, wc, 1, 30000);
	ok(*res == 7 && *ctr == 7, "CMP_AND_SWP mismatch leaves memory");
	wr.wr.atomic.remote_addr = (uintptr_t)ctr + 4;
	ibv_post_send(a, &wr, &bad);
	is_int(t_wait(acq, wc, 1, 30000), 1, "misaligned atomic completion");
	is_int(wc[0].status, IBV_WC_REM_INV_REQ_ERR, "misaligned: REM_INV_REQ");
	unpair(a, b);
}

int main(void)
{
	t_isolate("errors");
	if (t_open(&t, 16))
		bail_out("open");
	acq = ibv_create_cq(t.ctx, 64, NULL, NULL, 0);
	bcq = ibv_create_cq(t.ctx, 64, NULL, NULL, 0);
	abuf = calloc(1, BUFSZ);
	bbuf = calloc(1, BUFSZ);
	amr = ibv_reg_mr(t.pd, abuf, BUFSZ, IBV_ACCESS_LOCAL_WRITE);
	bmr = ibv_reg_mr(t.pd, bbuf, BUFSZ,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_READ |
				 IBV_ACCESS_REMOTE_ATOMIC);
	if (!acq || !bcq || !amr || !bmr)
		bail_out("setup");
	test_len_err();
	test_recv_prot();
	test_send_prot();
	test_rem_access();
	test_rem_access_responder();
	test_dest_rd_atomic();
	test_zero_len();
	test_rnr();
	test_rnr_srq();
	test_flush();
	test_reset_cleans();
	test_post_errors();
	test_ops();
	ibv_dereg_mr(amr);
	ibv_dereg_mr(bmr);
	ibv_destroy_cq(acq);
	ibv_destroy_cq(bcq);
	t_close(&t);
	free(abuf);
	free(bbuf);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
