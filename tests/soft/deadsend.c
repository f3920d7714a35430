/* SPDX-License-Identifier: MIT */
/*
 * deadsend.c -- RC never skips (issue 9): a sender dies with two SENDs
 * published, the first one's data still in its (now gone) memory, the
 * second one copied into the ring.  The responder must not deliver the
 * second while the first is lost: nothing after a lost message arrives.
 */
#include "config.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

/* above SOFT_RING_MAX: its data stays in the sender's memory (a SEND up
 * to that size is captured into the sender's copy ring at post) */
#define BIG (128 << 10)

/* sender -- publish a large SEND then a small one, then wait to die */
static int sender(int rfd, int wfd)
{
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	uint32_t qpn, peer;
	char *buf = malloc(BIG + 64);

	if (!buf || t_open(&t, 16))
		return 1;
	memset(buf, 'A', BIG);
	memset(buf + BIG, 'B', 64);
	mr = ibv_reg_mr(t.pd, buf, BIG + 64, IBV_ACCESS_LOCAL_WRITE);
	qp = t_rc_qp(&t, 16, NULL);
	if (!mr || !qp)
		return 1;
	qpn = qp->qp_num;
	t_xsend(wfd, &qpn, sizeof(qpn));
	t_xrecv(rfd, &peer, sizeof(peer));
	if (t_connect(qp, peer, 0, 1, 7, 14, 7) ||
	    t_post(qp, IBV_WR_SEND, buf, BIG, mr->lkey, 1, IBV_SEND_SIGNALED, 0,
		   0) ||
	    t_post(qp, IBV_WR_SEND, buf + BIG, 64, mr->lkey, 2,
		   IBV_SEND_SIGNALED, 0, 0))
		return 1;
	t_xsend(wfd, &qpn, sizeof(qpn));
	for (;;)
		pause(); /* killed here, before the responder looked */
}

int main(void)
{
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_wc wc[4];
	uint32_t qpn, peer;
	char *buf = calloc(1, 2 * BIG);
	pid_t child;
	int rfd, wfd, st = 0, n, i, good = 0;

	t_isolate("deadsend");
	if (!buf || t_open(&t, 16))
		bail_out("open");
	mr = ibv_reg_mr(t.pd, buf, 2 * BIG, IBV_ACCESS_LOCAL_WRITE);
	qp = t_rc_qp(&t, 16, NULL);
	if (!mr || !qp)
		bail_out("setup");
	child = t_spawn(sender, &rfd, &wfd);
	if (child < 0)
		bail_out("fork");
	t_xrecv(rfd, &peer, sizeof(peer));
	qpn = qp->qp_num;
	t_xsend(wfd, &qpn, sizeof(qpn));
	ok(!t_connect(qp, peer, 0, 1, 7, 14, 7), "responder connected");
	t_xrecv(rfd, &peer, sizeof(peer)); /* both SENDs published */
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	ok(WIFSIGNALED(st), "sender killed with both SENDs in flight");
	/* only now is anything there to receive them */
	t_post_recv(qp, buf, BIG, mr->lkey, 1);
	t_post_recv(qp, buf + BIG, BIG, mr->lkey, 2);
	n = t_wait(t.cq, wc, 2, 500);
	for (i = 0; i < n; i++)
		if (wc[i].status == IBV_WC_SUCCESS)
			good++;
	ok(good == 0,
	   "the second message is not delivered after the lost "
	   "first (%d delivered)",
	   good);
	ok(buf[BIG] != 'B', "no byte of the second message placed");
	is_int(t_qp_state(qp), IBV_QPS_RTS, "responder QP still RTS");
	/* our own traffic to the dead peer fails as a dead path does */
	t_post(qp, IBV_WR_SEND, buf, 8, mr->lkey, 3, IBV_SEND_SIGNALED, 0, 0);
	n = t_wait(t.cq, wc, 1, 30000);
	ok(n == 1 && wc[0].wr_id == 3 && wc[0].status == IBV_WC_RETRY_EXC_ERR,
	   "send to the dead peer: RETRY_EXC_ERR");
	while (ibv_poll_cq(t.cq, 4, wc) > 0)
		;
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
	is_int(t_shm_count(), 0, "no /dev/shm entries left (dead peer's too)");
	return done_testing();
}
