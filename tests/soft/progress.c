/* SPDX-License-Identifier: MIT */
/*
 * progress.c -- progress like hardware (issue 11), the parts softrdma
 * gives today: one thread of one process, two QPs on two contexts, polls
 * only the sender's CQ and sees its SEND and WRITE_WITH_IMM complete (the
 * initiator serves the responder QP of its own process); and a SIGSTOPped
 * responder process: SENDs to its posted receives, WRITE_WITH_IMM, RDMA
 * WRITE, READ and atomics all complete at the initiator without it, and
 * the responder, continued, finds its completions and data; one SRQ
 * feeding a UD and an RC QP of a stopped process gives each receive to
 * one message; a poll while the progress thread holds the context waits
 * for its pass (thread_hold).
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

#define LEN  65536
#define QKEY 0x11111111u

/* softrdma's drop counters (why: 0 no receive, 1 qkey, 2 full, -1 all) */
uint64_t softrdma_qp_drops(struct ibv_qp *qp, int why);

/* one_thread -- the sender's thread polls only the sender's CQ */
static void one_thread(int same_ctx)
{
	struct tctx ta, tb;
	struct ibv_mr *ma, *mb;
	struct ibv_qp *a, *b;
	struct ibv_wc wc[2];
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	char *abuf = malloc(LEN), *bbuf = calloc(1, 2 * LEN);
	const char *what = same_ctx ? "one context" : "two contexts";
	int n;

	if (!abuf || !bbuf || t_open(&ta, 16) || (!same_ctx && t_open(&tb, 16)))
		bail_out("open");
	if (same_ctx) {
		tb = ta;
		tb.cq = ibv_create_cq(ta.ctx, 16, NULL, NULL, 0);
	}
	memset(abuf, 's', LEN);
	ma = ibv_reg_mr(ta.pd, abuf, LEN, IBV_ACCESS_LOCAL_WRITE);
	mb = ibv_reg_mr(tb.pd, bbuf, 2 * LEN,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	a = t_rc_qp(&ta, 16, NULL);
	b = t_rc_qp(&tb, 16, NULL);
	if (!tb.cq || !ma || !mb || !a || !b ||
	    t_connect(a, b->qp_num, 0, 1, 7, 14, 7) ||
	    t_connect(b, a->qp_num, IBV_ACCESS_REMOTE_WRITE, 1, 7, 14, 7))
		bail_out("setup");
	t_post_recv(b, bbuf, LEN, mb->lkey, 1);
	t_post_recv(b, bbuf, 8, mb->lkey, 2);
	t_post(a, IBV_WR_SEND, abuf, LEN, ma->lkey, 3, IBV_SEND_SIGNALED, 0, 0);
	n = t_wait(ta.cq, wc, 1, 30000);
	ok(n == 1 && wc[0].wr_id == 3 && wc[0].status == IBV_WC_SUCCESS,
	   "%s: SEND completes while only the sender's CQ is polled", what);
	memset(&wr, 0, sizeof(wr));
	sge = (struct ibv_sge){(uintptr_t)abuf, 100, ma->lkey};
	wr.wr_id = 4;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.imm_data = htobe32(7);
	wr.wr.rdma.remote_addr = (uintptr_t)bbuf + LEN;
	wr.wr.rdma.rkey = mb->rkey;
	ibv_post_send(a, &wr, &bad);
	n = t_wait(ta.cq, wc, 1, 30000);
	ok(n == 1 && wc[0].wr_id == 4 && wc[0].status == IBV_WC_SUCCESS,
	   "%s: WRITE_WITH_IMM completes the same way", what);
	n = t_wait(tb.cq, wc, 2, 30000);
	ok(n == 2 && wc[0].wr_id == 1 && wc[0].byte_len == LEN &&
		   wc[1].wr_id == 2 &&
		   wc[1].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
		   bbuf[0] == 's' && bbuf[LEN - 1] == 's' && bbuf[LEN] == 's' &&
		   bbuf[LEN + 99] == 's',
	   "%s: the responder's completions and data are there", what);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	if (same_ctx) {
		ibv_destroy_cq(tb.cq);
	} else {
		t_close(&tb);
	}
	t_close(&ta);
	free(abuf);
	free(bbuf);
}

/*
 * thread_hold -- the poll of a program's one thread waits for softrdma's
 * progress thread, which does an HCA's work, as it waits for nothing of
 * another thread of the program's (tests/soft/mthreads): a signalled SEND
 * posted between two QPs of one context, the progress thread made to hold
 * the context 200 ms before its pass (SOFTRDMA_TEST_THREAD_HOLD, HOLD:
 * the file), one poll of the sender's CQ meanwhile returns its
 * completion.  A poll that found the CQ empty and left failed
 * tests/soft/mproc's lazy ACK in CI (session 59).
 */
static void thread_hold(const char *hold)
{
	struct tctx ta, tb;
	struct ibv_mr *ma, *mb;
	struct ibv_qp *a, *b;
	struct ibv_cq *x;
	struct ibv_wc wc;
	char *abuf = calloc(1, 64), *bbuf = calloc(1, 64);
	long long end;
	FILE *f;
	int n;

	if (!abuf || !bbuf || t_open(&ta, 16))
		bail_out("open");
	tb = ta;
	tb.cq = ibv_create_cq(ta.ctx, 16, NULL, NULL, 0);
	x = ibv_create_cq(ta.ctx, 4, NULL, NULL, 0);
	memset(abuf, 'h', 64);
	ma = ibv_reg_mr(ta.pd, abuf, 64, IBV_ACCESS_LOCAL_WRITE);
	mb = ibv_reg_mr(tb.pd, bbuf, 64, IBV_ACCESS_LOCAL_WRITE);
	a = t_rc_qp(&ta, 16, NULL);
	b = t_rc_qp(&tb, 16, NULL);
	if (!tb.cq || !x || !ma || !mb || !a || !b ||
	    t_connect(a, b->qp_num, 0, 1, 7, 14, 7) ||
	    t_connect(b, a->qp_num, 0, 1, 7, 14, 7))
		bail_out("setup");
	t_post_recv(b, bbuf, 64, mb->lkey, 1);
	t_post(a, IBV_WR_SEND, abuf, 64, ma->lkey, 2, IBV_SEND_SIGNALED, 0, 0);
	/* the progress thread, started by the arm, holds the context */
	f = fopen(hold, "w");
	if (!f)
		bail_out("%s: %s", hold, strerror(errno));
	fclose(f);
	if (ibv_req_notify_cq(x, 0))
		bail_out("ibv_req_notify_cq");
	for (end = t_now_ms() + 30000; !access(hold, F_OK) && t_now_ms() < end;)
		usleep(1000);
	end = t_now_ms();
	n = ibv_poll_cq(ta.cq, 1, &wc);
	diag("poll took %lld ms", t_now_ms() - end);
	ok(n == 1 && wc.wr_id == 2 && wc.status == IBV_WC_SUCCESS,
	   "one thread's poll while the progress thread holds the context "
	   "waits for it: the SEND completes on it (%d)",
	   n);
	n = t_wait(tb.cq, &wc, 1, 30000);
	ok(n == 1 && wc.wr_id == 1 && wc.byte_len == 64 && bbuf[63] == 'h',
	   "... and its receive is there, intact");
	unlink(hold);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	ibv_destroy_cq(x);
	ibv_destroy_cq(tb.cq);
	t_close(&ta);
	free(abuf);
	free(bbuf);
}

struct info {
	uint32_t qpn, rkey;
	uint64_t addr;
};

/* stopped -- the responder: set up, fill, stop itself, then check */
static int stopped(int rfd, int wfd)
{
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct info me, peer;
	char *buf = calloc(1, 5 * LEN);
	struct ibv_wc wc[4];
	uint64_t ctr;
	int i;

	if (!buf || t_open(&t, 16))
		return 1;
	for (i = 0; i < LEN; i++)
		buf[LEN + i] = (char)(i * 13);
	ctr = 40;
	memcpy(buf + 2 * LEN, &ctr, 8);
	mr = ibv_reg_mr(t.pd, buf, 5 * LEN,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC);
	qp = t_rc_qp(&t, 16, NULL);
	if (!mr || !qp)
		return 1;
	me.qpn = qp->qp_num;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	t_xsend(wfd, &me, sizeof(me));
	t_xrecv(rfd, &peer, sizeof(peer));
	if (t_connect(qp, peer.qpn,
		      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_REMOTE_ATOMIC,
		      1, 7, 14, 7))
		return 1;
	t_post_recv(qp, buf + 3 * LEN, 128, mr->lkey, 11);
	t_post_recv(qp, buf + 4 * LEN, LEN, mr->lkey, 12);
	t_post_recv(qp, buf + 3 * LEN + 4096, 16, mr->lkey, 13);
	raise(SIGSTOP); /* no softrdma call from here until continued */
	memcpy(&ctr, buf + 2 * LEN, 8);
	for (i = 0; i < LEN; i++)
		if (buf[i] != 'w')
			return 2;
	if (ctr != 7)
		return 3;
	/* what the initiator did for us while we were stopped */
	if (t_wait(t.cq, wc, 3, 30000) != 3)
		return 4;
	if (wc[0].status || wc[0].wr_id != 11 || wc[0].byte_len != 100 ||
	    wc[0].opcode != IBV_WC_RECV || wc[0].src_qp != peer.qpn ||
	    buf[3 * LEN] != 'a' || buf[3 * LEN + 99] != 'a' ||
	    buf[3 * LEN + 100] != 0)
		return 5;
	if (wc[1].status || wc[1].wr_id != 12 || wc[1].byte_len != LEN ||
	    buf[4 * LEN] != 'b' || buf[5 * LEN - 1] != 'b')
		return 6;
	if (wc[2].status || wc[2].wr_id != 13 ||
	    wc[2].opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
	    !(wc[2].wc_flags & IBV_WC_WITH_IMM) ||
	    wc[2].imm_data != htobe32(0x77) || wc[2].byte_len != 8)
		return 7;
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
	return 0;
}

/* one_sided_stopped -- WRITE, READ, atomics against a stopped process */
static void one_sided_stopped(void)
{
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_wc wc[4];
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct info me, peer;
	char *buf = calloc(1, 2 * LEN + 16);
	uint64_t *res = (uint64_t *)(void *)(buf + 2 * LEN);
	int rfd, wfd, st = 0, i, good = 1, n;
	pid_t child;

	if (!buf || t_open(&t, 16))
		bail_out("open");
	mr = ibv_reg_mr(t.pd, buf, 2 * LEN + 16, IBV_ACCESS_LOCAL_WRITE);
	qp = t_rc_qp(&t, 16, NULL);
	child = t_spawn(stopped, &rfd, &wfd);
	if (!mr || !qp || child < 0)
		bail_out("setup");
	t_xrecv(rfd, &peer, sizeof(peer));
	memset(&me, 0, sizeof(me));
	me.qpn = qp->qp_num;
	t_xsend(wfd, &me, sizeof(me));
	if (t_connect(qp, peer.qpn, 0, 1, 7, 14, 7))
		bail_out("connect");
	waitpid(child, &st, WUNTRACED);
	ok(WIFSTOPPED(st), "responder stopped");
	memset(buf, 'w', LEN);
	t_post(qp, IBV_WR_RDMA_WRITE, buf, LEN, mr->lkey, 1, IBV_SEND_SIGNALED,
	       peer.addr, peer.rkey);
	t_post(qp, IBV_WR_RDMA_READ, buf + LEN, LEN, mr->lkey, 2,
	       IBV_SEND_SIGNALED, peer.addr + LEN, peer.rkey);
	memset(&wr, 0, sizeof(wr));
	sge = (struct ibv_sge){(uintptr_t)res, 8, mr->lkey};
	wr.wr_id = 3;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.wr.atomic.remote_addr = peer.addr + 2 * LEN;
	wr.wr.atomic.rkey = peer.rkey;
	wr.wr.atomic.compare_add = 2;
	ibv_post_send(qp, &wr, &bad);
	n = t_wait(t.cq, wc, 3, 30000);
	ok(n == 3 && wc[0].status == IBV_WC_SUCCESS &&
		   wc[1].status == IBV_WC_SUCCESS &&
		   wc[2].status == IBV_WC_SUCCESS,
	   "WRITE, READ and FETCH_ADD complete against a stopped responder");
	for (i = 0; i < LEN; i++)
		if (buf[LEN + i] != (char)(i * 13))
			good = 0;
	ok(good, "READ data intact");
	ok(*res == 40, "FETCH_ADD fetched 40");
	wr.wr_id = 4;
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 42;
	wr.wr.atomic.swap = 7;
	ibv_post_send(qp, &wr, &bad);
	n = t_wait(t.cq, wc, 1, 30000);
	ok(n == 1 && wc[0].status == IBV_WC_SUCCESS && *res == 42,
	   "CMP_AND_SWP completes, saw 42");
	/* two-sided: its receive WQEs and CQ are served by us */
	memset(buf, 'a', 100);
	memset(buf + LEN, 'b', LEN);
	t_post(qp, IBV_WR_SEND, buf, 100, mr->lkey, 5, IBV_SEND_SIGNALED, 0, 0);
	t_post(qp, IBV_WR_SEND, buf + LEN, LEN, mr->lkey, 6, IBV_SEND_SIGNALED,
	       0, 0);
	memset(&wr, 0, sizeof(wr));
	sge = (struct ibv_sge){(uintptr_t)buf, 8, mr->lkey};
	wr.wr_id = 7;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.imm_data = htobe32(0x77);
	wr.wr.rdma.remote_addr = peer.addr + 3 * LEN + 8192;
	wr.wr.rdma.rkey = peer.rkey;
	ibv_post_send(qp, &wr, &bad);
	n = t_wait(t.cq, wc, 3, 10000);
	ok(n == 3 && wc[0].wr_id == 5 && wc[0].status == IBV_WC_SUCCESS &&
		   wc[1].wr_id == 6 && wc[1].status == IBV_WC_SUCCESS &&
		   wc[2].wr_id == 7 && wc[2].status == IBV_WC_SUCCESS,
	   "SEND 100 B, SEND 64 KiB, WRITE_WITH_IMM complete against a "
	   "stopped responder");
	kill(child, SIGCONT);
	waitpid(child, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "the responder, continued, finds the data, 7 and its three "
	   "receive completions (%d)",
	   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
}

/*
 * bad_recv -- the responder for the error cases: QP 0 has a 16-byte
 * receive, QP 1 none, QP 2 a receive in memory registered without local
 * write; it stops, then checks what its HCA (the initiator) reported
 */
static int bad_recv(int rfd, int wfd)
{
	struct tctx t;
	struct ibv_mr *mr, *ro;
	struct ibv_qp *qp[3];
	struct info me[3], peer[3];
	char *buf = calloc(1, 8192);
	struct ibv_wc wc[4];
	int i, seen = 0;

	if (!buf || t_open(&t, 16))
		return 1;
	mr = ibv_reg_mr(t.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	ro = ibv_reg_mr(t.pd, buf + 4096, 4096, 0);
	if (!mr || !ro)
		return 1;
	memset(me, 0, sizeof(me));
	for (i = 0; i < 3; i++) {
		qp[i] = t_rc_qp(&t, 16, NULL);
		if (!qp[i])
			return 1;
		me[i].qpn = qp[i]->qp_num;
	}
	t_xsend(wfd, me, sizeof(me));
	t_xrecv(rfd, peer, sizeof(peer));
	for (i = 0; i < 3; i++)
		if (t_connect(qp[i], peer[i].qpn, 0, 1, 7, 14, 7))
			return 1;
	t_post_recv(qp[0], buf, 16, mr->lkey, 21);
	t_post_recv(qp[2], buf + 4096, 128, ro->lkey, 23);
	raise(SIGSTOP); /* no softrdma call from here until continued */
	if (t_wait(t.cq, wc, 2, 30000) != 2)
		return 4;
	for (i = 0; i < 2; i++) {
		if (wc[i].wr_id == 21 && wc[i].status == IBV_WC_LOC_LEN_ERR &&
		    wc[i].qp_num == qp[0]->qp_num)
			seen |= 1;
		if (wc[i].wr_id == 23 && wc[i].status == IBV_WC_LOC_PROT_ERR &&
		    wc[i].qp_num == qp[2]->qp_num)
			seen |= 2;
	}
	if (seen != 3)
		return 5;
	if (t_wait(t.cq, wc, 1, 100) != 0)
		return 6; /* nothing more: QP 1 had no receive */
	for (i = 0; i < 3; i++)
		ibv_destroy_qp(qp[i]);
	ibv_dereg_mr(mr);
	ibv_dereg_mr(ro);
	t_close(&t);
	free(buf);
	return 0;
}

/* errors_stopped -- what a stopped responder's HCA still reports */
static void errors_stopped(void)
{
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp[3];
	struct ibv_wc wc[2];
	struct info me[3], peer[3];
	char *buf = calloc(1, 4096);
	int rfd, wfd, st = 0, i, n;
	pid_t child;

	if (!buf || t_open(&t, 16))
		bail_out("open");
	mr = ibv_reg_mr(t.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	memset(me, 0, sizeof(me));
	for (i = 0; i < 3; i++) {
		qp[i] = t_rc_qp(&t, 16, NULL);
		if (!qp[i])
			bail_out("qp");
		me[i].qpn = qp[i]->qp_num;
	}
	child = t_spawn(bad_recv, &rfd, &wfd);
	if (!mr || child < 0)
		bail_out("setup");
	t_xrecv(rfd, peer, sizeof(peer));
	t_xsend(wfd, me, sizeof(me));
	/* rnr_retry 2 on QP 1: three RNR NAKs, then the error */
	for (i = 0; i < 3; i++)
		if (t_connect(qp[i], peer[i].qpn, 0, 1, i == 1 ? 2 : 7, 14, 7))
			bail_out("connect");
	waitpid(child, &st, WUNTRACED);
	ok(WIFSTOPPED(st), "responder stopped");
	memset(buf, 'e', 100);
	t_post(qp[0], IBV_WR_SEND, buf, 100, mr->lkey, 1, IBV_SEND_SIGNALED, 0,
	       0);
	n = t_wait(t.cq, wc, 1, 10000);
	ok(n == 1 && wc[0].wr_id == 1 && wc[0].status == IBV_WC_REM_INV_REQ_ERR,
	   "SEND to a too short receive: IBV_WC_REM_INV_REQ_ERR (%s)",
	   n == 1 ? ibv_wc_status_str(wc[0].status) : "none");
	t_post(qp[1], IBV_WR_SEND, buf, 8, mr->lkey, 2, IBV_SEND_SIGNALED, 0,
	       0);
	n = t_wait(t.cq, wc, 1, 10000);
	ok(n == 1 && wc[0].wr_id == 2 &&
		   wc[0].status == IBV_WC_RNR_RETRY_EXC_ERR,
	   "SEND with no receive posted: RNR NAKs, then "
	   "IBV_WC_RNR_RETRY_EXC_ERR (%s)",
	   n == 1 ? ibv_wc_status_str(wc[0].status) : "none");
	t_post(qp[2], IBV_WR_SEND, buf, 8, mr->lkey, 3, IBV_SEND_SIGNALED, 0,
	       0);
	n = t_wait(t.cq, wc, 1, 10000);
	ok(n == 1 && wc[0].wr_id == 3 && wc[0].status == IBV_WC_REM_OP_ERR,
	   "SEND to a receive without local write: IBV_WC_REM_OP_ERR (%s)",
	   n == 1 ? ibv_wc_status_str(wc[0].status) : "none");
	kill(child, SIGCONT);
	waitpid(child, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "the responder, continued, finds IBV_WC_LOC_LEN_ERR and "
	   "IBV_WC_LOC_PROT_ERR on its receives (%d)",
	   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	for (i = 0; i < 3; i++)
		ibv_destroy_qp(qp[i]);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
}

/* srq_resp -- two QPs on one SRQ with three receives; stops, then checks */
static int srq_resp(int rfd, int wfd)
{
	struct ibv_srq_init_attr sa;
	struct tctx t;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	struct ibv_qp *qp[2];
	struct info me[2], peer[2];
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge sge;
	char *buf = calloc(1, 3 * 4096);
	struct ibv_wc wc[4];
	int i;

	if (!buf || t_open(&t, 16))
		return 1;
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 8;
	sa.attr.max_sge = 1;
	srq = ibv_create_srq(t.pd, &sa);
	mr = ibv_reg_mr(t.pd, buf, 3 * 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!srq || !mr)
		return 1;
	memset(me, 0, sizeof(me));
	for (i = 0; i < 2; i++) {
		qp[i] = t_rc_qp(&t, 16, srq);
		if (!qp[i])
			return 1;
		me[i].qpn = qp[i]->qp_num;
	}
	t_xsend(wfd, me, sizeof(me));
	t_xrecv(rfd, peer, sizeof(peer));
	for (i = 0; i < 2; i++)
		if (t_connect(qp[i], peer[i].qpn, 0, 1, 7, 14, 7))
			return 1;
	for (i = 0; i < 3; i++) {
		sge = (struct ibv_sge){(uintptr_t)buf + (size_t)i * 4096, 4096,
				       mr->lkey};
		memset(&rwr, 0, sizeof(rwr));
		rwr.wr_id = 30 + (uint64_t)i;
		rwr.sg_list = &sge;
		rwr.num_sge = 1;
		if (ibv_post_srq_recv(srq, &rwr, &rbad))
			return 1;
	}
	raise(SIGSTOP); /* no softrdma call from here until continued */
	if (t_wait(t.cq, wc, 3, 30000) != 3)
		return 4;
	/* in the SRQ's order, each naming the QP its message came on */
	if (wc[0].status || wc[0].wr_id != 30 ||
	    wc[0].qp_num != qp[0]->qp_num || wc[0].src_qp != peer[0].qpn ||
	    wc[0].byte_len != 100 || buf[0] != 'x' || buf[99] != 'x' ||
	    buf[100])
		return 5;
	if (wc[1].status || wc[1].wr_id != 31 ||
	    wc[1].qp_num != qp[1]->qp_num || wc[1].byte_len != 200 ||
	    buf[4096] != 'y' || buf[4096 + 199] != 'y')
		return 6;
	if (wc[2].status || wc[2].wr_id != 32 ||
	    wc[2].qp_num != qp[0]->qp_num || wc[2].byte_len != 3000 ||
	    buf[8192] != 'z' || buf[8192 + 2999] != 'z')
		return 7;
	if (t_wait(t.cq, wc, 1, 100) != 0)
		return 8; /* the RNR-failed message is never delivered */
	for (i = 0; i < 2; i++)
		ibv_destroy_qp(qp[i]);
	ibv_destroy_srq(srq);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
	return 0;
}

/* srq_stopped -- SENDs to QPs on an SRQ of a stopped process */
static void srq_stopped(void)
{
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp[2];
	struct ibv_wc wc[3];
	struct info me[2], peer[2];
	char *buf = calloc(1, 4096);
	int rfd, wfd, st = 0, i, n;
	pid_t child;

	if (!buf || t_open(&t, 16))
		bail_out("open");
	mr = ibv_reg_mr(t.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	memset(me, 0, sizeof(me));
	for (i = 0; i < 2; i++) {
		qp[i] = t_rc_qp(&t, 16, NULL);
		if (!qp[i])
			bail_out("qp");
		me[i].qpn = qp[i]->qp_num;
	}
	child = t_spawn(srq_resp, &rfd, &wfd);
	if (!mr || child < 0)
		bail_out("setup");
	t_xrecv(rfd, peer, sizeof(peer));
	t_xsend(wfd, me, sizeof(me));
	for (i = 0; i < 2; i++)
		if (t_connect(qp[i], peer[i].qpn, 0, 1, 1, 14, 7))
			bail_out("connect");
	waitpid(child, &st, WUNTRACED);
	ok(WIFSTOPPED(st), "SRQ responder stopped");
	memset(buf, 'x', 100);
	t_post(qp[0], IBV_WR_SEND, buf, 100, mr->lkey, 1, IBV_SEND_SIGNALED, 0,
	       0);
	n = t_wait(t.cq, wc, 1, 10000);
	memset(buf, 'y', 200);
	t_post(qp[1], IBV_WR_SEND, buf, 200, mr->lkey, 2, IBV_SEND_SIGNALED, 0,
	       0);
	n += t_wait(t.cq, wc + 1, 1, 10000);
	memset(buf, 'z', 3000);
	t_post(qp[0], IBV_WR_SEND, buf, 3000, mr->lkey, 3, IBV_SEND_SIGNALED, 0,
	       0);
	n += t_wait(t.cq, wc + 2, 1, 10000);
	ok(n == 3 && wc[0].wr_id == 1 && !wc[0].status && wc[1].wr_id == 2 &&
		   !wc[1].status && wc[2].wr_id == 3 && !wc[2].status,
	   "three SENDs on two QPs complete against a stopped SRQ responder");
	t_post(qp[1], IBV_WR_SEND, buf, 8, mr->lkey, 4, IBV_SEND_SIGNALED, 0,
	       0);
	n = t_wait(t.cq, wc, 1, 10000);
	ok(n == 1 && wc[0].wr_id == 4 &&
		   wc[0].status == IBV_WC_RNR_RETRY_EXC_ERR,
	   "the SRQ empty: RNR NAKs, then IBV_WC_RNR_RETRY_EXC_ERR (%s)",
	   n == 1 ? ibv_wc_status_str(wc[0].status) : "none");
	kill(child, SIGCONT);
	waitpid(child, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "the SRQ responder, continued, finds its three receive completions "
	   "in order, each on its QP, and the data (%d)",
	   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	for (i = 0; i < 2; i++)
		ibv_destroy_qp(qp[i]);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
}

/* holds -- buf holds n bytes of c and nothing after them */
static int holds(const char *buf, size_t n, char c)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (buf[i] != c)
			return 0;
	return !buf[n];
}

/*
 * srq_mixed_resp -- a UD QP and an RC QP on one SRQ of four receives
 * (40..43): takes one datagram itself, stops while the RC initiator is
 * served, then checks each receive completed once, in order, with its
 * one message, the two late datagrams dropped, the RNR-waited SEND in
 * the receive it posts last
 */
static int srq_mixed_resp(int rfd, int wfd)
{
	struct ibv_srq_init_attr sa;
	struct ibv_qp_init_attr qa;
	struct tctx t;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	struct ibv_qp *rc, *ud;
	struct info me[2], peer;
	char *buf = calloc(1, 5 * 4096 + 1);
	struct ibv_wc wc[5];
	int i;

	if (!buf || t_open(&t, 16))
		return 1;
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 8;
	sa.attr.max_sge = 1;
	srq = ibv_create_srq(t.pd, &sa);
	mr = ibv_reg_mr(t.pd, buf, 5 * 4096 + 1, IBV_ACCESS_LOCAL_WRITE);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = t.cq;
	qa.srq = srq;
	qa.qp_type = IBV_QPT_UD;
	qa.cap.max_send_wr = 4;
	qa.cap.max_send_sge = 1;
	rc = srq ? t_rc_qp(&t, 16, srq) : NULL;
	ud = srq ? ibv_create_qp(t.pd, &qa) : NULL;
	if (!mr || !rc || !ud || t_ud_up(ud, QKEY))
		return 1;
	memset(me, 0, sizeof(me));
	me[0].qpn = rc->qp_num;
	me[1].qpn = ud->qp_num;
	t_xsend(wfd, me, sizeof(me));
	t_xrecv(rfd, &peer, sizeof(peer));
	if (t_connect(rc, peer.qpn, 0, 1, 7, 14, 7))
		return 1;
	for (i = 0; i < 4; i++)
		if (t_post_srq_recv(srq, buf + (size_t)i * 4096, 4096, mr->lkey,
				    40 + (uint64_t)i))
			return 1;
	t_xsend(wfd, me, 1);
	/* the first datagram: taken by the UD QP itself */
	if (t_wait(t.cq, wc, 1, 10000) != 1 || wc[0].status ||
	    wc[0].wr_id != 40 || wc[0].qp_num != ud->qp_num ||
	    wc[0].byte_len != 40 + 100)
		return 2;
	raise(SIGSTOP); /* no softrdma call from here until continued */
	/* the three SENDs served meanwhile, in order, on 41..43 */
	if (t_wait(t.cq, wc, 3, 10000) != 3)
		return 3;
	for (i = 0; i < 3; i++)
		if (wc[i].status || wc[i].wr_id != 41 + (uint64_t)i ||
		    wc[i].qp_num != rc->qp_num ||
		    wc[i].byte_len != 200 + 100 * (uint32_t)i)
			return 4;
	/* the two datagrams after them find the SRQ empty: dropped */
	for (i = 0; i < 500 && softrdma_qp_drops(ud, 0) < 2; i++)
		if (t_wait(t.cq, wc, 1, 10) != 0)
			return 5;
	if (softrdma_qp_drops(ud, 0) != 2)
		return 5;
	/* the fourth SEND waited on RNR NAKs: it takes this one */
	if (t_post_srq_recv(srq, buf + 4 * 4096, 4096, mr->lkey, 44) ||
	    t_wait(t.cq, wc, 1, 10000) != 1 || wc[0].status ||
	    wc[0].wr_id != 44 || wc[0].qp_num != rc->qp_num ||
	    wc[0].byte_len != 700)
		return 6;
	if (t_wait(t.cq, wc, 1, 200) != 0)
		return 7; /* no receive completes twice */
	/* each buffer holds its one message (a datagram after its GRH) */
	if (!holds(buf + 40, 100, 'a') || !holds(buf + 4096, 200, 'b') ||
	    !holds(buf + 2 * 4096, 300, 'c') ||
	    !holds(buf + 3 * 4096, 400, 'e') ||
	    !holds(buf + 4 * 4096, 700, 'g'))
		return 8;
	ibv_destroy_qp(rc);
	ibv_destroy_qp(ud);
	ibv_destroy_srq(srq);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
	return 0;
}

/* mixed_send -- len bytes of c: a SEND on rc, or a datagram on ud */
static void mixed_send(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t dqpn,
		       char *buf, uint32_t lkey, uint32_t len, char c)
{
	struct ibv_sge sge = {(uintptr_t)buf, len, lkey};
	struct ibv_send_wr wr, *bad;

	memset(buf, c, len);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)c;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (ah) {
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = dqpn;
		wr.wr.ud.remote_qkey = QKEY;
	}
	if (ibv_post_send(qp, &wr, &bad))
		bail_out("post_send");
}

/*
 * srq_mixed -- one SRQ of a process feeding its UD QP and its RC QP: the
 * datagram the UD QP took is not taken again by the initiator that
 * serves the RC QP while the process is stopped, each receive completes
 * once with its one message; more messages than receives: the late
 * datagrams are dropped (UD has no RNR), the RC SEND waits on RNR NAKs
 */
static void srq_mixed(void)
{
	struct tctx t;
	struct ibv_qp_init_attr qa;
	struct ibv_ah_attr aa;
	struct ibv_mr *mr;
	struct ibv_qp *rc, *ud;
	struct ibv_ah *ah;
	struct ibv_wc wc[4];
	struct info me, peer[2];
	char *buf = calloc(1, 4096), c;
	int rfd, wfd, st = 0, n;
	pid_t child;

	if (!buf || t_open(&t, 16))
		bail_out("open");
	mr = ibv_reg_mr(t.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = t.cq;
	qa.qp_type = IBV_QPT_UD;
	qa.cap.max_send_wr = 4;
	qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	rc = t_rc_qp(&t, 16, NULL);
	ud = ibv_create_qp(t.pd, &qa);
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.sgid_index = 1;
	aa.grh.hop_limit = 64;
	ibv_query_gid(t.ctx, 1, 1, &aa.grh.dgid);
	if (!mr || !rc || !ud || t_ud_up(ud, QKEY))
		bail_out("setup");
	memset(&me, 0, sizeof(me));
	me.qpn = rc->qp_num;
	child = t_spawn(srq_mixed_resp, &rfd, &wfd);
	if (child < 0)
		bail_out("spawn");
	/* after the fork: the child, which exits without it, would leak it */
	ah = ibv_create_ah(t.pd, &aa);
	if (!ah)
		bail_out("ah");
	t_xrecv(rfd, peer, sizeof(peer));
	t_xsend(wfd, &me, sizeof(me));
	if (t_connect(rc, peer[0].qpn, 0, 1, 7, 14, 7))
		bail_out("connect");
	t_xrecv(rfd, &c, 1); /* its four receives are posted */
	mixed_send(ud, ah, peer[1].qpn, buf, mr->lkey, 100, 'a');
	n = t_wait(t.cq, wc, 1, 10000);
	waitpid(child, &st, WUNTRACED);
	ok(n == 1 && !wc[0].status && WIFSTOPPED(st),
	   "mixed SRQ: the responder took a datagram, then stopped");
	mixed_send(rc, NULL, 0, buf, mr->lkey, 200, 'b');
	n = t_wait(t.cq, wc, 1, 10000);
	mixed_send(rc, NULL, 0, buf, mr->lkey, 300, 'c');
	n += t_wait(t.cq, wc + 1, 1, 10000);
	mixed_send(ud, ah, peer[1].qpn, buf, mr->lkey, 400, 'd');
	n += t_wait(t.cq, wc + 2, 1, 10000);
	mixed_send(rc, NULL, 0, buf, mr->lkey, 400, 'e');
	n += t_wait(t.cq, wc + 3, 1, 10000);
	ok(n == 4 && wc[0].wr_id == 'b' && !wc[0].status &&
		   wc[1].wr_id == 'c' && !wc[1].status && wc[3].wr_id == 'e' &&
		   !wc[3].status,
	   "mixed SRQ: three SENDs served against the stopped responder");
	mixed_send(ud, ah, peer[1].qpn, buf, mr->lkey, 600, 'f');
	n = t_wait(t.cq, wc, 1, 10000);
	mixed_send(rc, NULL, 0, buf, mr->lkey, 700, 'g');
	n += t_wait(t.cq, wc + 1, 1, 300);
	ok(n == 1 && wc[0].wr_id == 'f',
	   "mixed SRQ: its receives all taken, the next SEND waits on RNR "
	   "NAKs (%d completions)",
	   n);
	kill(child, SIGCONT);
	n = t_wait(t.cq, wc, 1, 20000);
	ok(n == 1 && wc[0].wr_id == 'g' && !wc[0].status,
	   "mixed SRQ: that SEND completes once the responder posts a "
	   "receive");
	waitpid(child, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "mixed SRQ: each receive completed once, in order, holding its "
	   "one message; the late datagrams dropped (%d)",
	   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	ibv_destroy_ah(ah);
	ibv_destroy_qp(rc);
	ibv_destroy_qp(ud);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
}

int main(void)
{
	char hold[64];

	/* read once, when a progress thread first passes: set before any */
	snprintf(hold, sizeof(hold), "/tmp/rdmamsg-hold-%d", (int)getpid());
	unlink(hold);
	setenv("SOFTRDMA_TEST_THREAD_HOLD", hold, 1);
	t_isolate("progress");
	one_thread(0);
	one_thread(1);
	one_sided_stopped();
	errors_stopped();
	srq_stopped();
	srq_mixed();
	thread_hold(hold);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
