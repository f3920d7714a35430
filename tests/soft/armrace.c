/* SPDX-License-Identifier: MIT */
/*
 * armrace.c -- arm/wake races between two processes: one-message round
 * trips where each side, having nothing, arms its receive CQ, polls once
 * more (ibv_req_notify_cq's poll, arm, poll) and sleeps in poll() on its
 * completion channel's fd.  A wake-up lost against a concurrent arm leaves
 * both sides asleep: the 60 s deadline of one wait fails the test (it is
 * no bound on speed: a round trip takes microseconds to milliseconds).
 * Every message carries its round number, checked on both sides.
 */
#include "config.h"

#include <poll.h>
#include <stdlib.h>
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

int main(void)
{
	struct side s;
	struct ibv_wc wc[16];
	int rfd, wfd, i, n = rounds(), child_n = -1, st = 0, got;
	pid_t pid;
	char go = 1;

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
	t_xsend(wfd, &go, 1);
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "echo side exits 0 (%d)", st);
	teardown(&s);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
