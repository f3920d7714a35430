/* SPDX-License-Identifier: MIT */
/*
 * foreign.c -- addressing by (GID, QPN) (issue 11): a QP whose path names
 * a GID that is not this host's never reaches a local QP, even one with
 * that number (itself included); until softrdma speaks between hosts it
 * fails as an unreachable path does, RETRY_EXC_ERR after its transport
 * timeout.  The same QPs aimed at a local GID exchange data.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tap.h"
#include "common.h"

/* timeout 10, retry_cnt 1: 4.096 us * 2^10 * 2 = 8.4 ms */
#define TMO   10
#define RETRY 1

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* count -- completions of cq within ms: successes, and wr_id's status */
static int count(struct ibv_cq *cq, int ms, uint64_t wr_id, int *status)
{
	struct ibv_wc wc[8];
	double end = now_ms() + ms;
	int n, i, good = 0, seen = 0;

	/* until wr_id completes in error: a receive that came first was
	 * polled by then, and a later one can only be a flush (the QP is in
	 * error); a success waits out the time for receives after it */
	while (!seen && now_ms() < end) {
		n = ibv_poll_cq(cq, 8, wc);
		for (i = 0; i < n; i++) {
			if (wc[i].status == IBV_WC_SUCCESS &&
			    (wc[i].opcode & IBV_WC_RECV))
				good++;
			if (wc[i].wr_id == wr_id) {
				*status = wc[i].status;
				seen = wc[i].status != IBV_WC_SUCCESS;
			}
		}
	}
	return good;
}

int main(void)
{
	struct tctx t;
	struct ibv_qp *a, *b, *c, *d;
	struct ibv_cq *bcq;
	struct ibv_mr *mr;
	union ibv_gid foreign, local;
	char *buf = calloc(1, 65536);
	int st = -1, st2 = -1, got;
	double t0, el;

	t_isolate("foreign");
	if (!buf || t_open(&t, 64))
		bail_out("open");
	bcq = ibv_create_cq(t.ctx, 64, NULL, NULL, 0);
	mr = ibv_reg_mr(t.pd, buf, 65536,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	/* 2001:db8::1 (documentation prefix): never one of this host's */
	inet_pton(AF_INET6, "2001:db8::1", foreign.raw);
	if (!bcq || !mr || ibv_query_gid(t.ctx, 1, 1, &local))
		bail_out("setup");

	/* a -> (foreign GID, b's QPN); b -> (local GID, a's QPN) */
	a = t_rc_qp(&t, 16, NULL);
	{
		struct ibv_qp_init_attr ia;

		memset(&ia, 0, sizeof(ia));
		ia.send_cq = bcq;
		ia.recv_cq = bcq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = 16;
		ia.cap.max_recv_wr = 16;
		ia.cap.max_send_sge = 1;
		ia.cap.max_recv_sge = 1;
		b = ibv_create_qp(t.pd, &ia);
	}
	if (!a || !b)
		bail_out("QPs");
	ok(!t_connect_gid(a, b->qp_num, &foreign, 0, 1, 0, TMO, RETRY) &&
		   !t_connect_gid(b, a->qp_num, &local, IBV_ACCESS_REMOTE_WRITE,
				  1, 0, TMO, RETRY),
	   "a aimed at a foreign GID, b at a");
	t_post_recv(b, buf, 4096, mr->lkey, 1);
	memset(buf + 8192, 'x', 64);
	t0 = now_ms();
	t_post(a, IBV_WR_SEND, buf + 8192, 64, mr->lkey, 2, IBV_SEND_SIGNALED,
	       0, 0);
	t_post(a, IBV_WR_RDMA_WRITE, buf + 8192, 64, mr->lkey, 3,
	       IBV_SEND_SIGNALED, (uintptr_t)buf + 16384, mr->rkey);
	{
		struct ibv_wc wc[2];

		got = t_wait(t.cq, wc, 2, 30000);
		el = now_ms() - t0;
		ok(got == 2 && wc[0].wr_id == 2 &&
			   wc[0].status == IBV_WC_RETRY_EXC_ERR &&
			   wc[1].status == IBV_WC_WR_FLUSH_ERR,
		   "SEND to the foreign GID: RETRY_EXC_ERR, the WRITE flushed");
		ok(el >= 8.0, "after the transport timeout (%.1f ms >= 8.4)",
		   el);
	}
	ok(buf[16384] == 0, "the RDMA WRITE never reached b's memory");
	is_int(count(bcq, 100, 1, &st), 0, "b received nothing");
	/* b's own traffic: a does not answer b (it talks to someone else) */
	t_post(b, IBV_WR_SEND, buf + 8192, 64, mr->lkey, 4, IBV_SEND_SIGNALED,
	       0, 0);
	count(bcq, 10000, 4, &st);
	is_int(st, IBV_WC_RETRY_EXC_ERR, "b's SEND to a: RETRY_EXC_ERR");
	is_int(count(t.cq, 50, 0, &st2), 0, "a received nothing");
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);

	/* c -> itself through a foreign GID: no loopback */
	c = t_rc_qp(&t, 16, NULL);
	if (!c || t_connect_gid(c, c->qp_num, &foreign, 0, 1, 0, TMO, RETRY))
		bail_out("c");
	t_post_recv(c, buf, 4096, mr->lkey, 5);
	t_post(c, IBV_WR_SEND, buf + 8192, 64, mr->lkey, 6, IBV_SEND_SIGNALED,
	       0, 0);
	st = -1;
	got = count(t.cq, 10000, 6, &st);
	is_int(st, IBV_WC_RETRY_EXC_ERR,
	       "to itself via a foreign GID: "
	       "RETRY_EXC_ERR");
	is_int(got, 0, "and it did not receive its own message");
	ibv_destroy_qp(c);

	/* d -> itself through a local GID: loopback works (the control) */
	d = t_rc_qp(&t, 16, NULL);
	if (!d || t_connect_gid(d, d->qp_num, &local, 0, 1, 0, TMO, RETRY))
		bail_out("d");
	memset(buf, 0, 64);
	t_post_recv(d, buf, 4096, mr->lkey, 7);
	t_post(d, IBV_WR_SEND, buf + 8192, 64, mr->lkey, 8, IBV_SEND_SIGNALED,
	       0, 0);
	st = -1;
	got = count(t.cq, 300, 8, &st);
	ok(got == 1 && st == IBV_WC_SUCCESS && buf[0] == 'x' && buf[63] == 'x',
	   "to itself via a local GID: delivered");
	ibv_destroy_qp(d);

	/* e -> a UD QP's number at a local GID: an RC request that a UD QP
	 * never answers, as an HCA drops it; e's SEND and WRITE time out */
	{
		struct ibv_qp_init_attr ia;
		struct ibv_qp_attr qa;
		struct ibv_qp *ud, *e;
		struct ibv_wc wc[2];

		memset(&ia, 0, sizeof(ia));
		ia.send_cq = ia.recv_cq = bcq;
		ia.qp_type = IBV_QPT_UD;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		ud = ibv_create_qp(t.pd, &ia);
		memset(&qa, 0, sizeof(qa));
		qa.qp_state = IBV_QPS_INIT;
		qa.port_num = 1;
		qa.qkey = 0x11111111;
		if (!ud || ibv_modify_qp(ud, &qa,
					 IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						 IBV_QP_PORT | IBV_QP_QKEY))
			bail_out("ud");
		qa.qp_state = IBV_QPS_RTR;
		ibv_modify_qp(ud, &qa, IBV_QP_STATE);
		t_post_recv(ud, buf, 4096, mr->lkey, 9);
		e = t_rc_qp(&t, 16, NULL);
		if (!e ||
		    t_connect_gid(e, ud->qp_num, &local, 0, 1, 0, TMO, RETRY))
			bail_out("e");
		memset(buf + 16384, 0, 64);
		t_post(e, IBV_WR_SEND, buf + 8192, 64, mr->lkey, 10,
		       IBV_SEND_SIGNALED, 0, 0);
		t_post(e, IBV_WR_RDMA_WRITE, buf + 8192, 64, mr->lkey, 11,
		       IBV_SEND_SIGNALED, (uintptr_t)buf + 16384, mr->rkey);
		got = t_wait(t.cq, wc, 2, 10000);
		ok(got == 2 && wc[0].wr_id == 10 &&
			   wc[0].status == IBV_WC_RETRY_EXC_ERR &&
			   wc[1].wr_id == 11 &&
			   wc[1].status == IBV_WC_WR_FLUSH_ERR,
		   "RC aimed at a UD QP: RETRY_EXC_ERR, the next WR flushed");
		ok(buf[16384] == 0, "the flushed WRITE never reached memory");
		is_int(count(bcq, 100, 9, &st), 0,
		       "the UD QP received nothing");
		ibv_destroy_qp(e);
		ibv_destroy_qp(ud);
	}

	ibv_dereg_mr(mr);
	ibv_destroy_cq(bcq);
	t_close(&t);
	free(buf);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
