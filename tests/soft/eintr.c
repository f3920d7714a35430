/* SPDX-License-Identifier: MIT */
/*
 * eintr.c -- signals during the blocking verbs, as rdma-core and the
 * kernel serve them.  ibv_get_cq_event and ibv_get_async_event are a read()
 * of the channel's or the async fd (ib_uverbs_event_read sleeps in
 * wait_event_interruptible): a signal whose handler lacks SA_RESTART
 * fails them with EINTR and consumes nothing (the next call returns the
 * event); with SA_RESTART the read restarts unseen; an O_NONBLOCK fd
 * answers EAGAIN at once (ibv_get_cq_event(3)).  The signal goes to the
 * process (kill): it must reach the program's thread, never softrdma's
 * own threads (their masks block everything).  ibv_destroy_cq waits for
 * its events' acks in a condition variable, as rdma-core's does: signals
 * do not end that wait.
 *
 * A poker thread (tests/sigpoke.h) signals the process every 20 ms; if
 * the waiter is still blocked at its deadline it makes the event, so a
 * waiter that swallows the signal fails instead of hanging.  alarm()
 * bounds the whole run.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tap.h"
#include "../sigpoke.h"
#include "common.h"

/* two RC QPs on one context, b's receives on an SRQ */
struct pair {
	struct tctx t;
	struct ibv_srq *srq;
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	char buf[4096];
};

/* send_one -- one signalled send a -> b: completions and an SRQ
 * receive */
static void send_one(void *arg)
{
	struct pair *p = arg;

	if (t_post(p->a, IBV_WR_SEND, p->buf, 8, p->mr->lkey, 1,
		   IBV_SEND_SIGNALED, 0, 0))
		diag("post_send failed");
}

/* srq_fill -- post n receives on the SRQ */
static void srq_fill(struct pair *p, int n)
{
	struct ibv_sge sge = {(uintptr_t)p->buf + 1024, 64, p->mr->lkey};
	struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;

	while (n--)
		if (ibv_post_srq_recv(p->srq, &wr, &bad))
			bail_out("post_srq_recv");
}

/* srq_limit -- arm the SRQ's limit */
static void srq_limit(struct pair *p, uint32_t limit)
{
	struct ibv_srq_attr qa;

	memset(&qa, 0, sizeof(qa));
	qa.srq_limit = limit;
	if (ibv_modify_srq(p->srq, &qa, IBV_SRQ_LIMIT))
		bail_out("modify_srq");
}

/* drain -- poll cq until n completions or 5 s */
static void drain(struct ibv_cq *cq, int n)
{
	struct ibv_wc wc[4];

	if (t_wait(cq, wc, n, 5000) != n)
		diag("drain: fewer than %d completions", n);
}

/* test_cq_event -- ibv_get_cq_event on a blocking channel */
static void test_cq_event(struct pair *p, struct ibv_comp_channel *ch,
			  struct ibv_cq *cq)
{
	struct poker k = {.event = send_one, .arg = p};
	struct ibv_cq *ecq = NULL;
	void *ectx;
	int r, e, fl;

	srq_fill(p, 3); /* one for each part */
	/* no SA_RESTART: -1/EINTR, nothing consumed */
	ibv_req_notify_cq(cq, 0);
	sigpoke_handler(0);
	poker_run(&k, 3000, 3000);
	r = ibv_get_cq_event(ch, &ecq, &ectx);
	e = errno;
	poker_stop(&k);
	ok(r == -1 && e == EINTR,
	   "no SA_RESTART: ibv_get_cq_event fails with EINTR (got %d, %s)", r,
	   r ? strerror(e) : "an event");
	ok(sigpoke_hits > 0, "the program's thread took the signal");
	if (r) {
		send_one(p);
		r = ibv_get_cq_event(ch, &ecq, &ectx);
		ok(!r && ecq == cq, "the next call gets the event");
	}
	if (!r)
		ibv_ack_cq_events(ecq, 1);
	drain(cq, 2);

	/* SA_RESTART: restarted, then the event */
	ibv_req_notify_cq(cq, 0);
	sigpoke_handler(1);
	poker_run(&k, 300, 400);
	r = ibv_get_cq_event(ch, &ecq, &ectx);
	e = errno;
	poker_stop(&k);
	ok(!r && ecq == cq && sigpoke_hits > 0,
	   "SA_RESTART: restarted, the event comes (%d, %s, %d signals)", r,
	   r ? strerror(e) : "an event", (int)sigpoke_hits);
	if (!r)
		ibv_ack_cq_events(ecq, 1);
	drain(cq, 2);

	/* O_NONBLOCK: EAGAIN at once */
	ibv_req_notify_cq(cq, 0);
	fl = fcntl(ch->fd, F_GETFL);
	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
	r = ibv_get_cq_event(ch, &ecq, &ectx);
	e = errno;
	ok(r == -1 && e == EAGAIN, "O_NONBLOCK: EAGAIN with nothing queued");
	fcntl(ch->fd, F_SETFL, fl);
	send_one(p);
	r = ibv_get_cq_event(ch, &ecq, &ectx);
	ok(!r && ecq == cq, "then the event");
	if (!r)
		ibv_ack_cq_events(ecq, 1);
	drain(cq, 2);
}

/* send_done -- send_one, and its completions polled: softrdma's
 * responder takes the receive (and raises the SRQ's limit event) in its
 * poll or progress pass (soft/README.md), and no CQ is armed here */
static void send_done(void *arg)
{
	struct pair *p = arg;

	send_one(p);
	drain(p->t.cq, 2);
}

/* test_async_event -- ibv_get_async_event on a blocking async fd */
static void test_async_event(struct pair *p)
{
	struct poker k = {.event = send_done, .arg = p};
	struct ibv_context *ctx = p->t.ctx;
	struct ibv_async_event ev;
	int r, e, fl;

	/* 3 receives, limit 2: the second send reaches it */
	srq_fill(p, 3);
	srq_limit(p, 2);
	send_done(p);
	sigpoke_handler(0);
	poker_run(&k, 3000, 3000);
	r = ibv_get_async_event(ctx, &ev);
	e = errno;
	poker_stop(&k);
	ok(r == -1 && e == EINTR,
	   "no SA_RESTART: ibv_get_async_event fails with EINTR (got %d, %s)",
	   r, r ? strerror(e) : "an event");
	if (r) {
		send_done(p);
		r = ibv_get_async_event(ctx, &ev);
		ok(!r && ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED,
		   "the next call gets the event");
	}
	if (!r)
		ibv_ack_async_event(&ev);

	/* SA_RESTART */
	srq_fill(p, 2);
	srq_limit(p, 2);
	send_done(p);
	sigpoke_handler(1);
	poker_run(&k, 300, 400);
	r = ibv_get_async_event(ctx, &ev);
	e = errno;
	poker_stop(&k);
	ok(!r && ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED &&
		   sigpoke_hits > 0,
	   "SA_RESTART: restarted, the event comes (%d, %s, %d signals)", r,
	   r ? strerror(e) : "an event", (int)sigpoke_hits);
	if (!r)
		ibv_ack_async_event(&ev);

	/* O_NONBLOCK */
	fl = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	r = ibv_get_async_event(ctx, &ev);
	e = errno;
	ok(r == -1 && e == EAGAIN, "async O_NONBLOCK: EAGAIN with nothing");
	fcntl(ctx->async_fd, F_SETFL, fl);
}

static struct ibv_cq *ack_cq;
static volatile int acked;

/* ack_one -- the late ack the destroy waits for */
static void ack_one(void *arg)
{
	(void)arg;
	acked = 1;
	ibv_ack_cq_events(ack_cq, 1);
}

/* test_destroy_wait -- ibv_destroy_cq waits for the ack of the event it
 * reported, in a condition variable as rdma-core's does: signals during
 * the wait do not end it, it returns 0 once the ack came */
static void test_destroy_wait(struct pair *p, struct ibv_comp_channel *ch,
			      struct ibv_cq *cq)
{
	struct poker k = {.event = ack_one};
	struct ibv_cq *ecq;
	void *ectx;
	int r;

	srq_fill(p, 1);
	ibv_req_notify_cq(cq, 0);
	send_one(p);
	if (ibv_get_cq_event(ch, &ecq, &ectx) || ecq != cq)
		bail_out("no event");
	drain(cq, 2);
	ibv_destroy_qp(p->a);
	ibv_destroy_qp(p->b);
	ack_cq = cq;
	acked = 0;
	sigpoke_handler(0);
	poker_run(&k, 300, 400);
	r = ibv_destroy_cq(cq);
	poker_stop(&k);
	ok(!r && acked && sigpoke_hits > 0,
	   "destroy_cq waits through signals for the ack (%d, acked %d, "
	   "%d signals)",
	   r, acked, (int)sigpoke_hits);
}

int main(void)
{
	struct ibv_srq_init_attr sa;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq, *plain;
	struct pair p;

	alarm(60);
	t_isolate("eintr");
	memset(&p, 0, sizeof(p));
	if (t_open(&p.t, 64))
		bail_out("open");
	ch = ibv_create_comp_channel(p.t.ctx);
	cq = ch ? ibv_create_cq(p.t.ctx, 64, NULL, ch, 0) : NULL;
	p.mr = ibv_reg_mr(p.t.pd, p.buf, sizeof(p.buf), IBV_ACCESS_LOCAL_WRITE);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 16;
	sa.attr.max_sge = 1;
	p.srq = ibv_create_srq(p.t.pd, &sa);
	plain = p.t.cq;
	p.t.cq = cq; /* the QPs complete on the channel's CQ */
	p.a = cq && p.mr && p.srq ? t_rc_qp(&p.t, 16, NULL) : NULL;
	p.b = p.a ? t_rc_qp(&p.t, 16, p.srq) : NULL;
	if (!p.a || !p.b || t_connect(p.a, p.b->qp_num, 0, 1, 7, 14, 7) ||
	    t_connect(p.b, p.a->qp_num, 0, 1, 7, 14, 7))
		bail_out("setup");
	test_cq_event(&p, ch, cq);
	test_async_event(&p);
	test_destroy_wait(&p, ch, cq);
	ok(!ibv_destroy_srq(p.srq), "destroy srq (events acked)");
	ibv_destroy_comp_channel(ch);
	ibv_dereg_mr(p.mr);
	p.t.cq = plain;
	t_close(&p.t);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
