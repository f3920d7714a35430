/* SPDX-License-Identifier: MIT */
/* events.c -- completion channels across processes, solicited events,
 * async events (SRQ limit, CQ overrun of each QP type), SRQ receive, a
 * destroy racing the hand-out of its object's event */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

#define N 20

/* wait_event -- poll the channel fd, get and ack one event */
static int wait_event(struct ibv_comp_channel *ch, struct ibv_cq *cq, int ms)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct ibv_cq *ecq;
	void *ectx;

	if (poll(&p, 1, ms) != 1)
		return -1;
	if (ibv_get_cq_event(ch, &ecq, &ectx) || ecq != cq)
		return -1;
	ibv_ack_cq_events(ecq, 1);
	return 0;
}

static int sender(int rfd, int wfd)
{
	struct tctx t;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	char *buf = calloc(1, 4096);
	uint32_t qpn;
	int i;
	char c;

	if (t_open(&t, 64))
		return 1;
	qp = t_rc_qp(&t, 32, NULL);
	mr = ibv_reg_mr(t.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	t_xsend(wfd, &qp->qp_num, 4);
	t_xrecv(rfd, &qpn, 4);
	if (t_connect(qp, qpn, 0, 1, 7, 14, 7))
		return 2;
	/* part A: N messages, paced */
	for (i = 0; i < N; i++) {
		t_post(qp, IBV_WR_SEND, buf, 32, mr->lkey, (uint64_t)i,
		       IBV_SEND_SIGNALED, 0, 0);
		if (t_wait(t.cq, &wc, 1, 30000) != 1 || wc.status)
			return 3;
		usleep(1000);
	}
	/* part B: unsolicited, then solicited on the parent's word */
	t_xrecv(rfd, &c, 1);
	t_post(qp, IBV_WR_SEND, buf, 8, mr->lkey, 100, IBV_SEND_SIGNALED, 0, 0);
	t_wait(t.cq, &wc, 1, 30000);
	t_xsend(wfd, "u", 1);
	t_xrecv(rfd, &c, 1);
	t_post(qp, IBV_WR_SEND, buf, 8, mr->lkey, 101,
	       IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, 0, 0);
	t_wait(t.cq, &wc, 1, 30000);
	/* part C: receive one message by busy polling */
	t_post_recv(qp, buf, 64, mr->lkey, 200);
	t_xsend(wfd, "r", 1);
	if (t_wait(t.cq, &wc, 1, 30000) != 1 || wc.status || wc.wr_id != 200)
		return 4;
	t_xrecv(rfd, &c, 1);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
	return 0;
}

static void test_channel(void)
{
	int rfd, wfd, i, got = 0, st = 0, n;
	struct tctx t;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_wc wc[8];
	struct pollfd p;
	char *buf;
	uint32_t qpn;
	pid_t pid;
	char c;

	pid = t_spawn(sender, &rfd, &wfd);
	if (pid < 0)
		bail_out("pipe or fork");
	buf = calloc(1, 65536);
	if (t_open(&t, 4))
		bail_out("open");
	ch = ibv_create_comp_channel(t.ctx);
	cq = ibv_create_cq(t.ctx, 64, (void *)0x77, ch, 0);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 32;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = ibv_create_qp(t.pd, &ia);
	mr = ibv_reg_mr(t.pd, buf, 65536, IBV_ACCESS_LOCAL_WRITE);
	ok(ch && cq && qp && mr, "parent objects");
	t_xsend(wfd, &qp->qp_num, 4);
	t_xrecv(rfd, &qpn, 4);
	is_int(t_connect(qp, qpn, 0, 1, 7, 14, 7), 0, "connected");
	for (i = 0; i < N + 2; i++)
		t_post_recv(qp, buf + i * 64, 64, mr->lkey, (uint64_t)i);
	/* part A: sleep on the channel; a progress thread delivers */
	ibv_req_notify_cq(cq, 0);
	while (got < N) {
		if (wait_event(ch, cq, 5000))
			break;
		do {
			while ((n = ibv_poll_cq(cq, 8, wc)) > 0)
				for (i = 0; i < n; i++)
					got += wc[i].status == IBV_WC_SUCCESS &&
					       wc[i].opcode == IBV_WC_RECV;
			/* re-arm, then poll again: no lost wake-up */
		} while (got < N && !ibv_req_notify_cq(cq, 0) &&
			 (n = ibv_poll_cq(cq, 8, wc)) > 0 && (got += n) < N);
	}
	is_int(got, N, "all messages received in event mode");
	while (ibv_poll_cq(cq, 8, wc) > 0)
		;
	/* part B: solicited only */
	ibv_req_notify_cq(cq, 1);
	t_xsend(wfd, "b", 1);
	t_xrecv(rfd, &c, 1);
	p.fd = ch->fd;
	p.events = POLLIN;
	is_int(poll(&p, 1, 200), 0, "unsolicited message raises no event");
	t_xsend(wfd, "s", 1);
	is_int(wait_event(ch, cq, 5000), 0, "solicited message raises one");
	is_int(t_wait(cq, wc, 2, 30000), 2, "both messages there");
	ok(wc[0].wr_id == N && wc[1].wr_id == N + 1, "in order");
	/* part C: wait for our own send completion in event mode */
	t_xrecv(rfd, &c, 1);
	ibv_req_notify_cq(cq, 0);
	t_post(qp, IBV_WR_SEND, buf, 16, mr->lkey, 300, IBV_SEND_SIGNALED, 0,
	       0);
	is_int(wait_event(ch, cq, 5000), 0, "send completion event");
	ok(t_wait(cq, wc, 1, 100) == 1 && wc[0].wr_id == 300 &&
		   wc[0].status == IBV_WC_SUCCESS &&
		   wc[0].opcode == IBV_WC_SEND,
	   "send completion");
	t_xsend(wfd, "e", 1);
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sender exit %d",
	   WEXITSTATUS(st));
	is_int(ibv_destroy_qp(qp), 0, "destroy qp");
	is_int(ibv_destroy_cq(cq), 0, "destroy cq (events acked)");
	is_int(ibv_destroy_comp_channel(ch), 0, "destroy channel");
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
	close(wfd);
	close(rfd);
}

static int get_async(struct ibv_context *ctx, struct ibv_async_event *ev)
{
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};

	if (poll(&p, 1, 2000) != 1)
		return -1;
	return ibv_get_async_event(ctx, ev);
}

static void test_srq_and_async(void)
{
	struct tctx t;
	struct ibv_srq_init_attr sa;
	struct ibv_srq_attr qa;
	struct ibv_srq *srq;
	struct ibv_qp *a, *b, *c;
	struct ibv_mr *mr;
	struct ibv_wc wc[16];
	struct ibv_async_event ev;
	char *buf = calloc(1, 65536);
	int i, n;

	if (t_open(&t, 64))
		bail_out("open");
	mr = ibv_reg_mr(t.pd, buf, 65536, IBV_ACCESS_LOCAL_WRITE);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 16;
	sa.attr.max_sge = 1;
	srq = ibv_create_srq(t.pd, &sa);
	ok(srq != NULL, "create_srq");
	for (i = 0; i < 10; i++) {
		struct ibv_sge sge = {(uintptr_t)buf + (size_t)i * 256, 256,
				      mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = (uint64_t)i,
					 .sg_list = &sge,
					 .num_sge = 1},
				   *bad;

		ibv_post_srq_recv(srq, &wr, &bad);
	}
	memset(&qa, 0, sizeof(qa));
	qa.srq_limit = 17;
	is_int(ibv_modify_srq(srq, &qa, IBV_SRQ_LIMIT), EINVAL,
	       "limit above max_wr");
	qa.srq_limit = 5;
	is_int(ibv_modify_srq(srq, &qa, IBV_SRQ_LIMIT), 0, "arm limit 5");
	a = t_rc_qp(&t, 16, NULL);
	b = t_rc_qp(&t, 16, srq);
	c = t_rc_qp(&t, 16, srq);
	ok(a && b && c, "QPs, two on the SRQ");
	t_connect(a, b->qp_num, 0, 1, 7, 14, 7);
	t_connect(b, a->qp_num, 0, 1, 7, 14, 7);
	is_int(t_post_recv(b, buf, 16, mr->lkey, 99), EINVAL,
	       "post_recv on an SRQ QP");
	for (i = 0; i < 6; i++)
		t_post(a, IBV_WR_SEND, buf + 8192, 100, mr->lkey,
		       (uint64_t)(100 + i), IBV_SEND_SIGNALED, 0, 0);
	n = t_wait(t.cq, wc, 12, 30000);
	is_int(n, 12, "6 sends, 6 SRQ receives");
	is_int(get_async(t.ctx, &ev), 0, "async event");
	is_int(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED, "SRQ_LIMIT_REACHED");
	ok(ev.element.srq == srq, "for our SRQ");
	ibv_ack_async_event(&ev);
	ibv_query_srq(srq, &qa);
	is_int(qa.srq_limit, 0, "limit disarmed");
	is_int(qa.max_wr, 16, "max_wr");
	is_int(ibv_destroy_srq(srq), EBUSY, "SRQ busy");
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_destroy_qp(c);
	is_int(ibv_destroy_srq(srq), 0, "destroy_srq");
	while (ibv_poll_cq(t.cq, 16, wc) > 0)
		;

	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
}

/* what overrun saw on the async fd, acked */
struct seen {
	int cq_err;   /* IBV_EVENT_CQ_ERR of the small CQ */
	int qp_fatal; /* IBV_EVENT_QP_FATAL of the QP that lost a completion */
	int last_wqe; /* its IBV_EVENT_QP_LAST_WQE_REACHED (an SRQ's QP) */
	int other;
};

/* async_seen -- the async events that come within 300 ms of each other */
static void async_seen(struct ibv_context *ctx, struct ibv_cq *cq,
		       struct ibv_qp *qp, struct seen *s)
{
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
	struct ibv_async_event ev;

	memset(s, 0, sizeof(*s));
	while (poll(&p, 1, 300) == 1 && !ibv_get_async_event(ctx, &ev)) {
		if (ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == cq)
			s->cq_err++;
		else if (ev.event_type == IBV_EVENT_QP_FATAL &&
			 ev.element.qp == qp)
			s->qp_fatal++;
		else if (ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED &&
			 ev.element.qp == qp)
			s->last_wqe++;
		else
			s->other++;
		ibv_ack_async_event(&ev);
	}
}

/* ov_qp -- a QP of type on scq/rcq (and srq), up towards dqpn (UD: qkey) */
static struct ibv_qp *ov_qp(struct tctx *t, enum ibv_qp_type type,
			    struct ibv_cq *scq, struct ibv_cq *rcq,
			    struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.srq = srq;
	ia.qp_type = type;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	return ibv_create_qp(t->pd, &ia);
}

static int ov_up(struct ibv_qp *qp, uint32_t dqpn)
{
	switch (qp->qp_type) {
	case IBV_QPT_UD:
		return t_ud_up(qp, 0x1111);
	case IBV_QPT_UC:
		return t_uc_up(qp, dqpn, 0);
	default:
		return t_connect(qp, dqpn, 0, 1, 7, 14, 7);
	}
}

/* ov_send -- one signalled SEND of 8 bytes from qp to dqpn (UD: by ah) */
static int ov_send(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t dqpn,
		   char *buf, uint32_t lkey, uint64_t wr_id)
{
	struct ibv_sge sge = {(uintptr_t)buf, 8, lkey};
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = dqpn;
	wr.wr.ud.remote_qkey = 0x1111;
	return ibv_post_send(qp, &wr, &bad);
}

/*
 * test_overrun -- a CQ of one entry gets 3 completions of one QP (its
 * sends': send; else its receives', on an SRQ with srq): the CQ's error
 * event, and the QP whose completion was lost goes to ERR with
 * IBV_EVENT_QP_FATAL, as rxe's responder (RESPST_ERR_CQ_OVERFLOW) and
 * mlx5 do; what did fit stays, what it posts then is flushed
 */
static void test_overrun(enum ibv_qp_type type, int send, int use_srq)
{
	const char *what = type == IBV_QPT_UD	? "UD"
			   : type == IBV_QPT_UC ? "UC"
						: "RC";
	struct tctx t;
	struct ibv_srq_init_attr sa;
	struct ibv_srq *srq = NULL;
	struct ibv_cq *tiny;
	struct ibv_qp *x, *y, *v;
	struct ibv_ah *ah = NULL;
	struct ibv_ah_attr aa;
	struct ibv_mr *mr;
	struct ibv_wc wc[16];
	struct seen s;
	char *buf = calloc(1, 65536);
	int i, n, bad;

	if (!buf || t_open(&t, 64))
		bail_out("open");
	mr = ibv_reg_mr(t.pd, buf, 65536, IBV_ACCESS_LOCAL_WRITE);
	tiny = ibv_create_cq(t.ctx, 1, NULL, NULL, 0);
	if (use_srq) {
		memset(&sa, 0, sizeof(sa));
		sa.attr.max_wr = 8;
		sa.attr.max_sge = 1;
		srq = ibv_create_srq(t.pd, &sa);
	}
	/* x sends to y; v is the one whose completions go to tiny */
	x = ov_qp(&t, type, send ? tiny : t.cq, t.cq, NULL);
	y = ov_qp(&t, type, t.cq, send ? t.cq : tiny, srq);
	if (!mr || !tiny || (use_srq && !srq) || !x || !y ||
	    ov_up(x, y->qp_num) || ov_up(y, x->qp_num))
		bail_out("%s overrun setup", what);
	v = send ? x : y;
	if (type == IBV_QPT_UD) {
		memset(&aa, 0, sizeof(aa));
		aa.is_global = 1;
		aa.port_num = 1;
		aa.grh.sgid_index = 1;
		aa.grh.hop_limit = 64;
		ibv_query_gid(t.ctx, 1, 1, &aa.grh.dgid);
		ah = ibv_create_ah(t.pd, &aa);
		if (!ah)
			bail_out("create_ah");
	}
	for (i = 0; i < 4; i++) {
		struct ibv_sge sge = {(uintptr_t)buf + 4096 + (size_t)i * 256,
				      256, mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = 100 + (uint64_t)i,
					 .sg_list = &sge,
					 .num_sge = 1},
				   *rbad;

		if (srq ? ibv_post_srq_recv(srq, &wr, &rbad)
			: ibv_post_recv(y, &wr, &rbad))
			bail_out("post_recv");
	}
	for (i = 0; i < 3; i++)
		ov_send(x, ah, y->qp_num, buf, mr->lkey, (uint64_t)i);
	/* the big CQ's polls make the progress that completes */
	t_wait(t.cq, wc, 16, 300);
	while (ibv_poll_cq(t.cq, 16, wc) > 0)
		;
	async_seen(t.ctx, tiny, v, &s);
	ok(s.cq_err == 1, "%s %s CQ overrun: IBV_EVENT_CQ_ERR once (%d)", what,
	   send	     ? "send"
	   : use_srq ? "SRQ receive"
		     : "receive",
	   s.cq_err);
	ok(s.qp_fatal == 1, "%s: IBV_EVENT_QP_FATAL for the QP (%d)", what,
	   s.qp_fatal);
	ok(s.last_wqe == use_srq, "%s: LAST_WQE_REACHED %s (%d)", what,
	   use_srq ? "once (SRQ)" : "none", s.last_wqe);
	ok(s.other == 0, "%s: no other event (%d)", what, s.other);
	i = t_qp_state(v);
	ok(i == IBV_QPS_ERR, "%s: the QP is in ERR (state %d)", what, i);
	/* what fit stays: the first completion; all after it are flushes */
	n = t_wait(tiny, wc, 1, 1000);
	ok(n == 1 && wc[0].status == IBV_WC_SUCCESS &&
		   wc[0].wr_id == (send ? 0u : 100u),
	   "%s: the completion that fit (%d, %s, wr_id %llu)", what, n,
	   n == 1 ? ibv_wc_status_str(wc[0].status) : "-",
	   n == 1 ? (unsigned long long)wc[0].wr_id : 0ull);
	bad = 0;
	while (t_wait(tiny, wc, 1, 100) == 1)
		if (wc[0].status != IBV_WC_WR_FLUSH_ERR)
			bad++;
	ok(!bad, "%s: after it only flushes (%d others)", what, bad);
	/* the QP no longer executes: a SEND posted now is flushed */
	ov_send(v, ah, send ? y->qp_num : x->qp_num, buf, mr->lkey, 9);
	do /* the big CQ has x's completions too */
		n = t_wait(send ? tiny : t.cq, wc, 1, 1000);
	while (n == 1 && wc[0].qp_num != v->qp_num);
	ok(n == 1 && wc[0].wr_id == 9 && wc[0].status == IBV_WC_WR_FLUSH_ERR,
	   "%s: a SEND posted in ERR is flushed (%s)", what,
	   n == 1 ? ibv_wc_status_str(wc[0].status) : "none");
	ibv_destroy_qp(x);
	ibv_destroy_qp(y);
	while (ibv_poll_cq(t.cq, 16, wc) > 0)
		;
	while (ibv_poll_cq(tiny, 16, wc) > 0)
		;
	async_seen(t.ctx, tiny, v, &s); /* nothing left unacked */
	if (ah)
		ibv_destroy_ah(ah);
	if (srq)
		ok(!ibv_destroy_srq(srq), "%s: destroy SRQ", what);
	ok(!ibv_destroy_cq(tiny), "%s: destroy overrun CQ", what);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
}

/* chan_fds -- this process's fds on a channel FIFO (/dev/shm/...-ch-N) */
static int chan_fds(void)
{
	char link[64], path[256];
	int fd, n = 0;
	ssize_t r;

	for (fd = 0; fd < 1024; fd++) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		r = readlink(link, path, sizeof(path) - 1);
		if (r <= 0)
			continue;
		path[r] = 0;
		if (strstr(path, "-ch-"))
			n++;
	}
	return n;
}

/*
 * test_chan_fd -- a SEND from another context of this process wakes a
 * CQ armed on a channel through the channel's FIFO, which the sender's
 * side keeps open for the next kick; once the channel is destroyed no fd
 * of the process is left on it (before: the deleted FIFO stayed open
 * until another channel's key took its cache slot)
 */
static void test_chan_fd(void)
{
	struct tctx a, b;
	struct ibv_comp_channel *ch;
	struct ibv_cq *rcq;
	struct ibv_qp *qa, *qb;
	struct ibv_mr *ma, *mb;
	struct ibv_wc wc;
	char *buf = calloc(1, 8192);
	int before;

	if (!buf || t_open(&a, 16) || t_open(&b, 16))
		bail_out("open");
	before = chan_fds();
	ch = ibv_create_comp_channel(b.ctx);
	rcq = ch ? ibv_create_cq(b.ctx, 16, NULL, ch, 0) : NULL;
	ma = ibv_reg_mr(a.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	mb = ibv_reg_mr(b.pd, buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	qb = rcq ? ov_qp(&b, IBV_QPT_RC, b.cq, rcq, NULL) : NULL;
	qa = t_rc_qp(&a, 4, NULL);
	if (!rcq || !ma || !mb || !qa || !qb ||
	    t_connect(qa, qb->qp_num, 0, 1, 7, 14, 7) ||
	    t_connect(qb, qa->qp_num, 0, 1, 7, 14, 7) ||
	    t_post_recv(qb, buf + 4096, 64, mb->lkey, 1) ||
	    ibv_req_notify_cq(rcq, 0))
		bail_out("channel test setup");
	is_int(t_post(qa, IBV_WR_SEND, buf, 8, ma->lkey, 2, IBV_SEND_SIGNALED,
		      0, 0),
	       0, "chan fd: SEND to a QP of another context, its CQ armed");
	is_int(wait_event(ch, rcq, 5000), 0,
	       "chan fd: the channel's event came");
	is_int(t_wait(rcq, &wc, 1, 2000), 1, "chan fd: the receive completed");
	ok(chan_fds() > before, "chan fd: the wake-up opened the FIFO (%d)",
	   chan_fds() - before);
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_destroy_cq(rcq);
	is_int(ibv_destroy_comp_channel(ch), 0, "chan fd: channel destroyed");
	is_int(chan_fds(), before, "chan fd: no fd left on its FIFO");
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	t_close(&a);
	t_close(&b);
	free(buf);
}

/*
 * test_chan_other_cq -- a message to a QP whose CQs are not armed does not
 * wake a channel armed for another CQ of that context: the channel's fd
 * stays unreadable (an HCA raises an event only for the CQ it completes
 * on; softrdma kicked every armed channel of the context, so a program
 * that polls some CQs and waits on another, as UCX's UD transport does
 * beside its RC QPs, paid system calls and a woken thread per message).
 * The message is delivered all the same; one to the armed CQ's QP then
 * makes the fd readable and raises its event.
 */
static void test_chan_other_cq(void)
{
	struct tctx a, b;
	struct ibv_comp_channel *ch;
	struct ibv_cq *rcq;
	struct ibv_qp *qa1, *qa2, *qb1, *qb2;
	struct ibv_mr *ma, *mb;
	struct ibv_wc wc;
	struct pollfd p;
	char *buf = calloc(1, 8192);
	int i;

	if (!buf || t_open(&a, 16) || t_open(&b, 16))
		bail_out("open");
	ch = ibv_create_comp_channel(b.ctx);
	rcq = ch ? ibv_create_cq(b.ctx, 16, NULL, ch, 0) : NULL;
	ma = ibv_reg_mr(a.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	mb = ibv_reg_mr(b.pd, buf + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	qb1 = rcq ? ov_qp(&b, IBV_QPT_RC, rcq, rcq, NULL) : NULL;
	qb2 = t_rc_qp(&b, 4, NULL); /* b.cq, never armed */
	qa1 = t_rc_qp(&a, 4, NULL);
	qa2 = t_rc_qp(&a, 4, NULL);
	if (!rcq || !ma || !mb || !qa1 || !qa2 || !qb1 || !qb2 ||
	    t_connect(qa1, qb1->qp_num, 0, 1, 7, 14, 7) ||
	    t_connect(qb1, qa1->qp_num, 0, 1, 7, 14, 7) ||
	    t_connect(qa2, qb2->qp_num, 0, 1, 7, 14, 7) ||
	    t_connect(qb2, qa2->qp_num, 0, 1, 7, 14, 7) ||
	    t_post_recv(qb1, buf + 4096, 64, mb->lkey, 1) ||
	    ibv_req_notify_cq(rcq, 0))
		bail_out("other CQ test setup");
	for (i = 0; i < 3; i++)
		if (t_post_recv(qb2, buf + 4096 + 64 * (i + 1), 64, mb->lkey,
				2 + i))
			bail_out("receives of the unarmed QP");
	for (i = 0; i < 3; i++)
		if (t_post(qa2, IBV_WR_SEND, buf, 8, ma->lkey, 10 + i, 0, 0, 0))
			bail_out("send to the unarmed QP");
	p = (struct pollfd){.fd = ch->fd, .events = POLLIN};
	is_int(poll(&p, 1, 200), 0,
	       "other CQ: 3 SENDs to a QP of unarmed CQs leave the channel "
	       "of another CQ unreadable");
	for (i = 0; i < 3; i++)
		if (t_wait(b.cq, &wc, 1, 2000) != 1 ||
		    wc.status != IBV_WC_SUCCESS || wc.wr_id != 2u + i ||
		    wc.qp_num != qb2->qp_num)
			break;
	is_int(i, 3, "other CQ: the 3 are delivered, in order, on their QP");
	is_int(t_post(qa1, IBV_WR_SEND, buf, 8, ma->lkey, 20, 0, 0, 0), 0,
	       "other CQ: SEND to the armed CQ's QP");
	is_int(wait_event(ch, rcq, 5000), 0,
	       "other CQ: its channel's event came");
	is_int(t_wait(rcq, &wc, 1, 2000), 1, "other CQ: its receive completed");
	ok(wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 &&
		   wc.qp_num == qb1->qp_num,
	   "other CQ: on the armed CQ's QP");
	ibv_destroy_qp(qa1);
	ibv_destroy_qp(qa2);
	ibv_destroy_qp(qb1);
	ibv_destroy_qp(qb2);
	ibv_destroy_cq(rcq);
	ibv_destroy_comp_channel(ch);
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	t_close(&a);
	t_close(&b);
	free(buf);
}

/*
 * A destroy racing the event it must wait for: ibv_destroy_qp and
 * ibv_destroy_cq return only after the ack of every event already handed
 * out for their object (ibv_get_async_event(3), ibv_get_cq_event(3)),
 * however close the hand-out comes to the destroy's purge of the queue.
 * A thread takes the events and holds each 100 us before its ack, then
 * checks that the object's destroy had not returned; the main thread
 * destroys after a random spin of up to some microseconds, or every 4th
 * round once the thread has the event.  Before, the count that destroy
 * waits on was taken after the event left the queue: a destroy in
 * between returned at once, and the taker wrote to the freed QP (UCX's
 * async thread, under load: ASan's heap-use-after-free).
 */
struct race {
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch; /* NULL: the async fd */
	atomic_int live, dead, got, stop;
	int seen, early, wrong;
};

static void *race_taker(void *arg)
{
	struct race *r = arg;
	struct pollfd p = {.events = POLLIN};
	struct ibv_async_event ev;
	struct ibv_cq *cq;
	void *cctx;
	int g;

	p.fd = r->ch ? r->ch->fd : r->ctx->async_fd;
	while (!atomic_load(&r->stop)) {
		if (poll(&p, 1, 10) != 1)
			continue;
		if (r->ch ? ibv_get_cq_event(r->ch, &cq, &cctx)
			  : ibv_get_async_event(r->ctx, &ev))
			continue;
		g = atomic_load(&r->live);
		atomic_store(&r->got, g);
		usleep(100);
		if (atomic_load(&r->dead) >= g)
			r->early++;
		r->seen++;
		if (r->ch) {
			ibv_ack_cq_events(cq, 1);
		} else {
			r->wrong +=
				ev.event_type != IBV_EVENT_QP_LAST_WQE_REACHED;
			ibv_ack_async_event(&ev);
		}
	}
	return NULL;
}

/* race_pause -- before round i's destroy: spin, or wait for the taker */
static void race_pause(struct race *r, int i)
{
	volatile int spin;
	int n;

	if (i % 4 == 0) {
		for (n = 0; n < 10000 && atomic_load(&r->got) != i; n++)
			usleep(100);
		return;
	}
	for (spin = 0, n = rand() % 4000; spin < n; spin++)
		;
}

static void test_destroy_race(int cq_events)
{
	const char *what = cq_events ? "ibv_destroy_cq" : "ibv_destroy_qp";
	int rounds = tap_small() ? 300 : 2000, i, bad = 0;
	struct ibv_srq_init_attr sa;
	struct ibv_srq *srq = NULL;
	struct ibv_qp_init_attr ia;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct race r;
	struct tctx t;
	pthread_t th;
	char buf[64];
	int fd;

	if (t_open(&t, 4))
		bail_out("open");
	memset(&r, 0, sizeof(r));
	r.ctx = t.ctx;
	mr = ibv_reg_mr(t.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (cq_events) {
		r.ch = ibv_create_comp_channel(t.ctx);
		fd = r.ch ? r.ch->fd : -1;
	} else {
		memset(&sa, 0, sizeof(sa));
		sa.attr.max_wr = 4;
		sa.attr.max_sge = 1;
		srq = ibv_create_srq(t.pd, &sa);
		fd = srq ? t.ctx->async_fd : -1;
	}
	/* a purged event leaves its token: the taker must not block on it */
	if (!mr || fd < 0 || fcntl(fd, F_SETFL, O_NONBLOCK) ||
	    pthread_create(&th, NULL, race_taker, &r))
		bail_out("race: objects");
	for (i = 1; i <= rounds && !bad; i++) {
		cq = t.cq;
		if (cq_events)
			cq = ibv_create_cq(t.ctx, 4, NULL, r.ch, 0);
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = ia.recv_cq = cq;
		ia.srq = srq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		qp = cq ? ibv_create_qp(t.pd, &ia) : NULL;
		bad = !qp || t_qp_init(qp, 0) ||
		      (cq_events && (t_post_recv(qp, buf, 8, mr->lkey, 1) ||
				     ibv_req_notify_cq(cq, 0)));
		atomic_store(&r.live, i);
		/* ERR: LAST_WQE_REACHED for an SRQ's QP; for the receive, a
		 * flush completion on the armed CQ */
		bad = bad || t_qp_err(qp);
		race_pause(&r, i);
		/* whatever failed, nothing of the round is left behind */
		if (qp && ibv_destroy_qp(qp))
			bad = 1;
		if (cq_events && cq && ibv_destroy_cq(cq))
			bad = 1;
		atomic_store(&r.dead, i);
	}
	atomic_store(&r.stop, 1);
	pthread_join(th, NULL);
	ok(!bad, "%s race: %d rounds of create, event, destroy", what, i - 1);
	ok(r.early == 0,
	   "%s race: never returns before the ack of an event handed out "
	   "(%d early, %d events taken)",
	   what, r.early, r.seen);
	ok(r.seen >= rounds / 4 && !r.wrong,
	   "%s race: the taker had every 4th round's event (%d of %d, "
	   "%d of another type)",
	   what, r.seen, rounds, r.wrong);
	if (srq)
		ibv_destroy_srq(srq);
	if (r.ch)
		ibv_destroy_comp_channel(r.ch);
	ibv_dereg_mr(mr);
	t_close(&t);
}

int main(void)
{
	t_isolate("events");
	test_channel();
	test_chan_fd();
	test_chan_other_cq();
	test_srq_and_async();
	test_overrun(IBV_QPT_RC, 1, 0);
	test_overrun(IBV_QPT_RC, 0, 0);
	test_overrun(IBV_QPT_RC, 0, 1);
	test_overrun(IBV_QPT_UC, 1, 0);
	test_overrun(IBV_QPT_UC, 0, 0);
	test_overrun(IBV_QPT_UD, 1, 0);
	test_overrun(IBV_QPT_UD, 0, 0);
	test_overrun(IBV_QPT_UD, 0, 1);
	test_destroy_race(0);
	test_destroy_race(1);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
