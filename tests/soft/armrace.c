/* SPDX-License-Identifier: MIT */
/*
 * armrace.c -- arm/wake races between two processes: one-message round
 * trips where each side, having nothing, arms its receive CQ, polls once
 * more (ibv_req_notify_cq's poll, arm, poll) and sleeps in poll() on its
 * completion channel's fd.  A wake-up lost against a concurrent arm leaves
 * both sides asleep: the 60 s deadline of one wait fails the test (it is
 * no bound on speed: a round trip takes microseconds to milliseconds).
 * SOFTRDMA_TEST_NOSWEEP=1 keeps the progress thread from serving CQs
 * waited on directly, so that a lost wake-up cannot pass for a slow one.
 * Every message carries its round number, checked on both sides.
 *
 * The second part has the two sides unlike: the parent has NQ QPs, each
 * with its own receive CQ, all on one channel whose fd is O_NONBLOCK and
 * waited on with epoll; the echo side has NQ QPs on one receive CQ and
 * sleeps in a blocking ibv_get_cq_event (no poll()).  Round i goes on QP
 * i % NQ.  Checked: every event is for a CQ armed and not yet reported
 * (one event per ibv_req_notify_cq), with its cq_context; an fd found
 * readable with no event left gives EAGAIN; acknowledged events let every
 * CQ be destroyed.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

#define DEADLINE_MS 60000
#define NRECV	    8

struct side {
	struct tctx t; /* t.cq: sends, polled */
	struct ibv_comp_channel *ch;
	struct ibv_cq *rcq; /* receives, armed */
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint32_t *buf; /* NRECV receive words, then the send word */
	int armed;
	long sleeps; /* waits that went to poll() */
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* setup -- channel, CQs, QP, exchange QPNs, connect; 0 on success */
static int setup(struct side *s, int rfd, int wfd)
{
	struct ibv_qp_init_attr a;
	uint32_t me, peer;
	int i;

	memset(s, 0, sizeof(*s));
	if (t_open(&s->t, 64))
		return -1;
	s->ch = ibv_create_comp_channel(s->t.ctx);
	s->rcq = s->ch ? ibv_create_cq(s->t.ctx, 64, NULL, s->ch, 0) : NULL;
	s->buf = calloc(NRECV + 1, sizeof(*s->buf));
	if (!s->rcq || !s->buf)
		return -1;
	s->mr = ibv_reg_mr(s->t.pd, s->buf, (NRECV + 1) * sizeof(*s->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	memset(&a, 0, sizeof(a));
	a.send_cq = s->t.cq;
	a.recv_cq = s->rcq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = 16;
	a.cap.max_recv_wr = NRECV;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	s->qp = s->mr ? ibv_create_qp(s->t.pd, &a) : NULL;
	if (!s->qp)
		return -1;
	me = s->qp->qp_num;
	t_xsend(wfd, &me, sizeof(me));
	t_xrecv(rfd, &peer, sizeof(peer));
	if (t_connect(s->qp, peer, 0, 1, 7, 14, 7))
		return -1;
	for (i = 0; i < NRECV; i++) /* a SEND before them is RNR-retried */
		if (t_post_recv(s->qp, &s->buf[i], 4, s->mr->lkey, (uint64_t)i))
			return -1;
	return 0;
}

static void teardown(struct side *s)
{
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->rcq)
		ibv_destroy_cq(s->rcq);
	if (s->ch)
		ibv_destroy_comp_channel(s->ch);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	t_close(&s->t);
	free(s->buf);
}

/* next_recv -- the next receive completion, sleeping on the channel when
 * there is none: 1, or 0 when the deadline passed or a verb failed */
static int next_recv(struct side *s, struct ibv_wc *wc)
{
	long long end = now_ms() + DEADLINE_MS;
	struct pollfd p;
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int n;

	for (;;) {
		n = ibv_poll_cq(s->rcq, 1, wc);
		if (n)
			return n == 1;
		if (!s->armed) {
			/* arm, then poll again: what came before the arm */
			if (ibv_req_notify_cq(s->rcq, 0))
				return 0;
			s->armed = 1;
			continue;
		}
		p.fd = s->ch->fd;
		p.events = POLLIN;
		p.revents = 0;
		s->sleeps++;
		n = poll(&p, 1, (int)(end - now_ms() > 0 ? end - now_ms() : 0));
		if (n <= 0)
			return 0; /* a lost wake-up (or poll failed) */
		if (ibv_get_cq_event(s->ch, &ev_cq, &ev_ctx) || ev_cq != s->rcq)
			return 0;
		ibv_ack_cq_events(ev_cq, 1);
		s->armed = 0;
	}
}

/* send_word -- SEND round number v (signalled, reaped without waiting) */
static int send_word(struct side *s, uint32_t v)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(s->t.cq, 16, wc)) > 0)
		while (n--)
			if (wc[n].status != IBV_WC_SUCCESS)
				return -1;
	s->buf[NRECV] = v;
	return t_post(s->qp, IBV_WR_SEND, &s->buf[NRECV], 4, s->mr->lkey, v,
		      IBV_SEND_SIGNALED, 0, 0);
}

/* take -- receive round v's word and post the buffer again; 1 if right */
static int take(struct side *s, uint32_t v)
{
	struct ibv_wc wc;
	uint32_t i;

	if (!next_recv(s, &wc) || wc.status != IBV_WC_SUCCESS ||
	    wc.byte_len != 4 || wc.wr_id >= NRECV)
		return 0;
	i = (uint32_t)wc.wr_id;
	if (s->buf[i] != v)
		return 0;
	return t_post_recv(s->qp, &s->buf[i], 4, s->mr->lkey, i) == 0;
}

static int rounds(void)
{
	return tap_small() ? 500 : 20000;
}

/* echo_main -- the child: receive round i, answer i; exit 0 if all came */
static int echo_main(int rfd, int wfd)
{
	struct side s;
	int i, n = rounds(), res = 1;
	char go;

	if (setup(&s, rfd, wfd))
		return 2;
	for (i = 0; i < n; i++)
		if (!take(&s, (uint32_t)i) || send_word(&s, (uint32_t)i))
			break;
	if (i == n)
		res = 0;
	t_xsend(wfd, &i, sizeof(i));
	t_xrecv(rfd, &go, 1); /* our last send was taken */
	teardown(&s);
	return res;
}

/* child_exits -- let the child of pid go on (one byte on wfd) and check
 * that it exits 0: WHAT it was to do */
static void child_exits(pid_t pid, int wfd, const char *what)
{
	char go = 1;
	int st = 0;

	t_xsend(wfd, &go, 1);
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s (%d)", what, st);
}

/* -- part 2: NQ QPs, unlike CQ counts on the two sides ------------------- */

#define NQ 3

struct mside {
	struct tctx t; /* t.cq: sends, polled */
	struct ibv_comp_channel *ch;
	struct ibv_cq *rcq[NQ]; /* the echo side uses rcq[0] for all */
	struct ibv_qp *qp[NQ];
	struct ibv_mr *mr;
	uint32_t *buf; /* NQ * NRECV receive words, then the send word */
	int armed[NQ];
	long events, arms, bad_events, acked[NQ];
};

/* msetup -- ncq receive CQs (1 or NQ) on one channel, NQ QPs; 0: ok */
static int msetup(struct mside *s, int ncq, int rfd, int wfd)
{
	struct ibv_qp_init_attr a;
	uint32_t me[NQ], peer[NQ];
	int i, q;

	memset(s, 0, sizeof(*s));
	if (t_open(&s->t, 64))
		return -1;
	s->ch = ibv_create_comp_channel(s->t.ctx);
	if (!s->ch)
		return -1;
	for (q = 0; q < ncq; q++) {
		s->rcq[q] = ibv_create_cq(s->t.ctx, 64, &s->acked[q], s->ch, 0);
		if (!s->rcq[q])
			return -1;
	}
	s->buf = calloc(NQ * NRECV + 1, sizeof(*s->buf));
	if (!s->buf)
		return -1;
	s->mr = ibv_reg_mr(s->t.pd, s->buf, (NQ * NRECV + 1) * sizeof(*s->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr)
		return -1;
	for (q = 0; q < NQ; q++) {
		memset(&a, 0, sizeof(a));
		a.send_cq = s->t.cq;
		a.recv_cq = s->rcq[ncq == 1 ? 0 : q];
		a.qp_type = IBV_QPT_RC;
		a.cap.max_send_wr = 16;
		a.cap.max_recv_wr = NRECV;
		a.cap.max_send_sge = 1;
		a.cap.max_recv_sge = 1;
		s->qp[q] = ibv_create_qp(s->t.pd, &a);
		if (!s->qp[q])
			return -1;
		me[q] = s->qp[q]->qp_num;
	}
	t_xsend(wfd, me, sizeof(me));
	t_xrecv(rfd, peer, sizeof(peer));
	for (q = 0; q < NQ; q++) {
		if (t_connect(s->qp[q], peer[q], 0, 1, 7, 14, 7))
			return -1;
		for (i = 0; i < NRECV; i++)
			if (t_post_recv(s->qp[q], &s->buf[q * NRECV + i], 4,
					s->mr->lkey, (uint64_t)(q * NRECV + i)))
				return -1;
	}
	return 0;
}

static void mteardown(struct mside *s)
{
	int q;

	for (q = 0; q < NQ; q++)
		if (s->qp[q])
			ibv_destroy_qp(s->qp[q]);
	for (q = 0; q < NQ; q++) {
		if (!s->rcq[q])
			continue;
		/* waits for every event reported to be acknowledged */
		ibv_ack_cq_events(s->rcq[q], (unsigned int)s->acked[q]);
		ibv_destroy_cq(s->rcq[q]);
	}
	if (s->ch)
		ibv_destroy_comp_channel(s->ch);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	t_close(&s->t);
	free(s->buf);
}

/* mevent -- account one event: for an armed CQ of ours, reported once */
static void mevent(struct mside *s, struct ibv_cq *cq, void *ctx)
{
	int q;

	for (q = 0; q < NQ; q++)
		if (s->rcq[q] && s->rcq[q] == cq)
			break;
	if (q == NQ || ctx != &s->acked[q] || !s->armed[q]) {
		s->bad_events++;
		return;
	}
	s->armed[q] = 0;
	s->acked[q]++;
	s->events++;
}

/* marm -- arm every CQ not armed; -1 on failure */
static int marm(struct mside *s)
{
	int q;

	for (q = 0; q < NQ; q++) {
		if (!s->rcq[q] || s->armed[q])
			continue;
		if (ibv_req_notify_cq(s->rcq[q], 0))
			return -1;
		s->armed[q] = 1;
		s->arms++;
	}
	return 0;
}

/* mtake -- the word of round v on QP q (polled from cq); 1 if right */
static int mtake(struct mside *s, struct ibv_cq *cq, int q, uint32_t v,
		 struct ibv_wc *wc)
{
	uint32_t i;

	if (wc->status != IBV_WC_SUCCESS || wc->byte_len != 4 ||
	    wc->qp_num != s->qp[q]->qp_num || wc->wr_id < (uint64_t)q * NRECV ||
	    wc->wr_id >= (uint64_t)(q + 1) * NRECV)
		return 0;
	(void)cq;
	i = (uint32_t)wc->wr_id;
	if (s->buf[i] != v)
		return 0;
	return t_post_recv(s->qp[q], &s->buf[i], 4, s->mr->lkey, i) == 0;
}

/* msend -- SEND word v on QP q (signalled, reaped without waiting) */
static int msend(struct mside *s, int q, uint32_t v)
{
	struct ibv_wc wc[16];
	int n;

	while ((n = ibv_poll_cq(s->t.cq, 16, wc)) > 0)
		while (n--)
			if (wc[n].status != IBV_WC_SUCCESS)
				return -1;
	s->buf[NQ * NRECV] = v;
	return t_post(s->qp[q], IBV_WR_SEND, &s->buf[NQ * NRECV], 4,
		      s->mr->lkey, v, IBV_SEND_SIGNALED, 0, 0);
}

/* mecho_main -- the child: NQ QPs on one receive CQ, blocking waits */
static int mecho_main(int rfd, int wfd)
{
	struct mside s;
	struct ibv_wc wc;
	struct ibv_cq *ev;
	void *ctx;
	int i, q, n = rounds(), res = 1;
	char go;

	if (msetup(&s, 1, rfd, wfd))
		return 2;
	for (i = 0; i < n; i++) {
		int k;

		while ((k = ibv_poll_cq(s.rcq[0], 1, &wc)) == 0) {
			if (!s.armed[0]) {
				if (marm(&s))
					goto out;
				continue; /* poll again: before the arm */
			}
			if (ibv_get_cq_event(s.ch, &ev, &ctx))
				goto out;
			mevent(&s, ev, ctx);
		}
		if (k < 0)
			break;
		for (q = 0; q < NQ; q++)
			if (wc.qp_num == s.qp[q]->qp_num)
				break;
		if (q != i % NQ || !mtake(&s, s.rcq[0], q, (uint32_t)i, &wc) ||
		    msend(&s, q, (uint32_t)i))
			break;
	}
out:
	if (i == n && !s.bad_events)
		res = 0;
	t_xsend(wfd, &i, sizeof(i));
	t_xrecv(rfd, &go, 1);
	mteardown(&s);
	return res;
}

/* mpart -- part 2 in the parent; the figures go to the TAP output */
static void mpart(void)
{
	struct mside s;
	struct epoll_event ee, got;
	struct ibv_wc wc;
	struct ibv_cq *ev;
	void *ctx;
	int rfd, wfd, i, q, n = rounds(), child_n = -1, ep, k;
	int eagain_ok = 1, fl;
	long waits = 0;
	pid_t pid;

	pid = t_spawn(mecho_main, &rfd, &wfd);
	if (pid < 0)
		bail_out("pipe or fork");
	if (msetup(&s, NQ, rfd, wfd))
		bail_out("set-up (part 2)");
	fl = fcntl(s.ch->fd, F_GETFL);
	ep = epoll_create1(EPOLL_CLOEXEC);
	ee.events = EPOLLIN;
	ee.data.u32 = 7;
	if (fl < 0 || fcntl(s.ch->fd, F_SETFL, fl | O_NONBLOCK) || ep < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, s.ch->fd, &ee))
		bail_out("epoll");
	for (i = 0; i < n; i++) {
		q = i % NQ;
		if (msend(&s, q, (uint32_t)i))
			break;
		while ((k = ibv_poll_cq(s.rcq[q], 1, &wc)) == 0) {
			if (!s.armed[q]) {
				if (marm(&s))
					goto out;
				continue; /* poll again: before the arm */
			}
			waits++;
			if (epoll_wait(ep, &got, 1, DEADLINE_MS) != 1)
				goto out; /* a lost wake-up */
			/* every event there is, then EAGAIN */
			while (!ibv_get_cq_event(s.ch, &ev, &ctx))
				mevent(&s, ev, ctx);
			if (errno != EAGAIN)
				eagain_ok = 0;
		}
		if (k < 0 || !mtake(&s, s.rcq[q], q, (uint32_t)i, &wc))
			break;
	}
out:
	ok(i == n,
	   "part 2: %d round trips over %d QPs, %d receive CQs against 1, "
	   "epoll on an O_NONBLOCK fd against a blocking ibv_get_cq_event (%d)",
	   n, NQ, NQ, i);
	ok(!s.bad_events && s.events <= s.arms,
	   "every event for an armed CQ, once per arm (%ld events, %ld arms, "
	   "%ld wrong)",
	   s.events, s.arms, s.bad_events);
	ok(eagain_ok, "no event left: ibv_get_cq_event fails with EAGAIN");
	diag("part 2: the parent waited in epoll %ld times", waits);
	t_xrecv(rfd, &child_n, sizeof(child_n));
	ok(child_n == n,
	   "part 2: the echo side saw every round, on its QP, in order, with "
	   "events only for its armed CQ (%d)",
	   child_n);
	child_exits(pid, wfd, "part 2: echo side exits 0");
	close(ep);
	mteardown(&s);
	close(rfd);
	close(wfd);
}

/* -- part 3: an RNR NAK while the sender sleeps ------------------------- */

/* rnr_main -- the child: NAK the parent's SEND (no receive posted; a poll
 * runs our responder), then post a receive and wait for the message
 * again; tell the parent whether it came whole, and exit 0 if it did */
static int rnr_main(int rfd, int wfd)
{
	struct tside b;
	struct ibv_qp_cap cap = {.max_send_wr = 4,
				 .max_recv_wr = 4,
				 .max_send_sge = 1,
				 .max_recv_sge = 1};
	struct ibv_wc wc;
	uint32_t me, peer;
	char c;
	int got;

	if (t_side_open(&b, NULL, 16, 64) || !(b.qp = t_side_qp(&b, &cap)))
		return 2;
	me = b.qp->qp_num;
	t_xsend(wfd, &me, sizeof(me));
	t_xrecv(rfd, &peer, sizeof(peer));
	/* min_rnr_timer 14: 1.28 ms */
	if (t_connect(b.qp, peer, 0, 14, 7, 14, 7))
		return 2;
	t_xsend(wfd, &me, 1);
	t_xrecv(rfd, &c, 1); /* it has sent, and sleeps */
	if (t_wait(b.cq, &wc, 1, 200) != 0)
		return 3; /* NAKed: nothing for us yet */
	usleep(20000);
	if (t_post_recv(b.qp, b.buf, 64, b.mr->lkey, 7))
		return 2;
	got = t_wait(b.cq, &wc, 1, 20000) == 1 && wc.status == IBV_WC_SUCCESS &&
	      wc.wr_id == 7 && !strcmp(b.buf, "again");
	t_xsend(wfd, &got, sizeof(got));
	t_xrecv(rfd, &c, 1);
	ibv_destroy_qp(b.qp);
	t_side_close(&b);
	return got ? 0 : 4;
}

/* rnr_send -- connect a's QP to rnr_main's, and once it is ready post
 * the SEND it is to NAK ("again", wr_id 5, signalled) */
static void rnr_send(struct tside *a, int rfd, int wfd, const char *part)
{
	uint32_t me = a->qp->qp_num, peer;
	char c;

	t_xsend(wfd, &me, sizeof(me));
	t_xrecv(rfd, &peer, sizeof(peer));
	if (t_connect(a->qp, peer, 0, 12, 7, 14, 7))
		bail_out("%s connect", part);
	t_xrecv(rfd, &c, 1);
	strcpy(a->buf, "again");
	if (t_post(a->qp, IBV_WR_SEND, a->buf, 6, a->mr->lkey, 5,
		   IBV_SEND_SIGNALED, 0, 0))
		bail_out("%s send", part);
}

/* rnr_part -- the parent sends to a QP with no receive and sleeps on its
 * send CQ's channel: an HCA retransmits the NAKed SEND after the RNR
 * timer on its own, so the completion comes without the program's help */
static void rnr_part(void)
{
	struct tside a;
	struct ibv_qp_cap cap = {.max_send_wr = 4,
				 .max_recv_wr = 4,
				 .max_send_sge = 1,
				 .max_recv_sge = 1};
	struct ibv_comp_channel *ch;
	struct ibv_cq *scq, *ev_cq;
	struct ibv_qp_init_attr ia;
	struct ibv_wc wc;
	struct pollfd p;
	void *ev_ctx;
	int rfd, wfd, done = 0, n;
	long long end;
	pid_t pid;
	char c = 1;

	pid = t_spawn(rnr_main, &rfd, &wfd);
	if (pid < 0 || t_side_open(&a, NULL, 16, 64))
		bail_out("part 3 set-up");
	ch = ibv_create_comp_channel(a.t.ctx);
	scq = ch ? ibv_create_cq(a.t.ctx, 16, NULL, ch, 0) : NULL;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = scq;
	ia.recv_cq = a.cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap = cap;
	a.qp = scq ? ibv_create_qp(a.t.pd, &ia) : NULL;
	if (!a.qp)
		bail_out("part 3 QP");
	rnr_send(&a, rfd, wfd, "part 3");
	if (ibv_req_notify_cq(scq, 0))
		bail_out("part 3 arm");
	t_xsend(wfd, &c, 1);
	end = now_ms() + 20000;
	while (!done && now_ms() < end) {
		n = ibv_poll_cq(scq, 1, &wc);
		if (n) {
			done = n == 1 ? 1 + (wc.status == IBV_WC_SUCCESS) : -1;
			break;
		}
		p.fd = ch->fd;
		p.events = POLLIN;
		p.revents = 0;
		if (poll(&p, 1, (int)(end - now_ms())) <= 0)
			break;
		if (!ibv_get_cq_event(ch, &ev_cq, &ev_ctx)) {
			ibv_ack_cq_events(ev_cq, 1);
			ibv_req_notify_cq(scq, 0);
		}
	}
	ok(done == 2,
	   "part 3: a SEND NAKed (RNR) while its sender sleeps on its channel "
	   "is sent again without it, and completes (%d)",
	   done);
	t_xrecv(rfd, &n, sizeof(n));
	child_exits(pid, wfd,
		    "part 3: the receiver got it once its receive was posted");
	ibv_destroy_qp(a.qp);
	a.qp = NULL;
	ibv_destroy_cq(scq);
	ibv_destroy_comp_channel(ch);
	t_side_close(&a);
	close(rfd);
	close(wfd);
}

/* rnr_idle_part -- as part 3, but the sender neither polls nor arms
 * anything after its post: it blocks in read() until the receiver says
 * whether the message came.  Only the sender's HCA (softrdma's progress
 * thread, woken by the NAK) can send it again meanwhile. */
static void rnr_idle_part(void)
{
	struct tside a;
	struct ibv_qp_cap cap = {.max_send_wr = 4,
				 .max_recv_wr = 4,
				 .max_send_sge = 1,
				 .max_recv_sge = 1};
	struct ibv_wc wc;
	int rfd, wfd, got = -1, n;
	pid_t pid;
	char c = 1;

	pid = t_spawn(rnr_main, &rfd, &wfd);
	if (pid < 0 || t_side_open(&a, NULL, 16, 64) ||
	    !(a.qp = t_side_qp(&a, &cap)))
		bail_out("part 4 set-up");
	rnr_send(&a, rfd, wfd, "part 4");
	t_xsend(wfd, &c, 1);
	t_xrecv(rfd, &got, sizeof(got)); /* no verbs call meanwhile */
	ok(got == 1,
	   "part 4: a SEND NAKed (RNR) while its sender's program makes no "
	   "verbs call is sent again and received whole (%d)",
	   got);
	n = t_wait(a.cq, &wc, 1, 5000);
	ok(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 5,
	   "part 4: and its send completes (%d, %s)", n,
	   n == 1 ? ibv_wc_status_str(wc.status) : "-");
	child_exits(pid, wfd, "part 4: the receiver exits 0");
	ibv_destroy_qp(a.qp);
	a.qp = NULL;
	t_side_close(&a);
	close(rfd);
	close(wfd);
}

int main(void)
{
	struct side s;
	struct ibv_wc wc[16];
	int rfd, wfd, i, n = rounds(), child_n = -1, got;
	pid_t pid;

	/* no safety net: the progress thread's timed passes would hide a
	 * lost direct wake-up as a delay */
	setenv("SOFTRDMA_TEST_NOSWEEP", "1", 1);
	t_isolate("armrace");
	pid = t_spawn(echo_main, &rfd, &wfd);
	if (pid < 0)
		bail_out("pipe or fork");
	if (setup(&s, rfd, wfd))
		bail_out("set-up");
	for (i = 0; i < n; i++)
		if (send_word(&s, (uint32_t)i) || !take(&s, (uint32_t)i))
			break;
	ok(i == n, "%d round trips, each side sleeping on its channel (%d)", n,
	   i);
	diag("parent slept in poll() %ld times", s.sleeps);
	t_xrecv(rfd, &child_n, sizeof(child_n));
	ok(child_n == n, "the echo side saw every round in order (%d)",
	   child_n);
	/* every send completed, nothing in error */
	for (got = 0; got < 16;) {
		int k = t_wait(s.t.cq, wc, 16, 100);

		if (k <= 0)
			break;
		got += k;
		while (k--)
			if (wc[k].status != IBV_WC_SUCCESS)
				got = 1000;
	}
	ok(got < 1000, "send completions all successful");
	child_exits(pid, wfd, "echo side exits 0");
	teardown(&s);
	close(rfd);
	close(wfd);
	mpart();
	rnr_part();
	rnr_idle_part();
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
