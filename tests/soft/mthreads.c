/* SPDX-License-Identifier: MIT */
/*
 * mthreads.c -- verbs from several threads at once, as rdma-core allows
 * them without a thread domain or a single-threaded CQ: on an RC pair, one
 * thread posts SEND_WITH_IMMs on QP a, a second polls a's send CQ (the
 * poster's window opens as it reaps), a third waits for b's receives on a
 * completion channel (arm, poll again, ibv_get_cq_event, ack), checks
 * them and posts each receive again, while the progress threads of the
 * contexts run their passes.  Once with a and b on two contexts, once on
 * one.  Checked: every message arrives once, in order (its immediate),
 * with its payload intact; every send completes with success, in order;
 * every event is for the armed receive CQ.  Then a poll of an empty CQ
 * while another thread holds the context (busy_poll): it comes back at
 * once, where a poll of a CQ holding a completion waits and takes it, and
 * so does an empty CQ's after a bounded number of such polls.
 * Built with ThreadSanitizer, this is the test of softrdma's locking
 * between those threads.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

#define MSG	64 /* bytes per message */
#define SQ	32 /* sends in flight at most (the window) */
#define RQ	64 /* receives posted */
#define WAIT_MS 30000

struct run {
	struct tside a, b;
	struct ibv_comp_channel *ch;
	struct ibv_cq *rcq; /* b's receives, on ch */
	struct ibv_qp *bqp;
	struct ibv_mr *rmr;
	char *rbuf;		 /* RQ receive slots of MSG bytes */
	uint32_t n;		 /* messages */
	_Atomic uint32_t reaped; /* send completions polled */
	_Atomic int failed;	 /* a thread gave up: the others stop */
	const char *why;	 /* what failed first */
	uint32_t bad_wc, bad_order, bad_data, bad_event;
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* fail -- stop every thread; the first reason is kept */
static void fail(struct run *r, const char *why)
{
	int z = 0;

	if (atomic_compare_exchange_strong(&r->failed, &z, 1))
		r->why = why;
}

/* reaper -- poll a's send CQ until every send has completed */
static void *reaper(void *arg)
{
	struct run *r = arg;
	struct ibv_wc wc[8];
	uint32_t got = 0;
	long long end = now_ms() + WAIT_MS;
	int k, i;

	while (got < r->n && !atomic_load(&r->failed)) {
		k = ibv_poll_cq(r->a.cq, 8, wc);
		if (k < 0) {
			fail(r, "ibv_poll_cq on the send CQ failed");
			break;
		}
		for (i = 0; i < k; i++, got++)
			if (wc[i].status != IBV_WC_SUCCESS ||
			    wc[i].opcode != IBV_WC_SEND || wc[i].wr_id != got)
				r->bad_wc++;
		if (k)
			atomic_store(&r->reaped, got);
		else if (now_ms() > end)
			fail(r, "send completions stopped coming");
	}
	return NULL;
}

/* repost -- receive slot i posted again */
static int repost(struct run *r, uint32_t i)
{
	return t_post_recv(r->bqp, r->rbuf + (size_t)i * MSG, MSG, r->rmr->lkey,
			   i);
}

/* receiver -- b's receives through completion events, each checked and
 * posted again */
static void *receiver(void *arg)
{
	struct run *r = arg;
	struct pollfd p = {.fd = r->ch->fd, .events = POLLIN};
	struct ibv_wc wc[8];
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	uint32_t got = 0, seq, slot;
	int armed = 0, k, i;

	while (got < r->n && !atomic_load(&r->failed)) {
		k = ibv_poll_cq(r->rcq, 8, wc);
		if (k < 0) {
			fail(r, "ibv_poll_cq on the receive CQ failed");
			break;
		}
		if (!k) {
			if (!armed) {
				if (ibv_req_notify_cq(r->rcq, 0)) {
					fail(r, "ibv_req_notify_cq failed");
					break;
				}
				armed = 1;
				continue; /* poll again: before the arm */
			}
			if (poll(&p, 1, WAIT_MS) <= 0) {
				fail(r, "no receive event (a lost wake-up)");
				break;
			}
			if (ibv_get_cq_event(r->ch, &ev_cq, &ev_ctx)) {
				if (errno == EAGAIN)
					continue;
				fail(r, "ibv_get_cq_event failed");
				break;
			}
			if (ev_cq != r->rcq || ev_ctx != r)
				r->bad_event++;
			ibv_ack_cq_events(ev_cq, 1);
			armed = 0;
			continue;
		}
		for (i = 0; i < k; i++, got++) {
			slot = (uint32_t)wc[i].wr_id;
			seq = ntohl(wc[i].imm_data);
			if (wc[i].status != IBV_WC_SUCCESS ||
			    wc[i].opcode != IBV_WC_RECV ||
			    !(wc[i].wc_flags & IBV_WC_WITH_IMM) ||
			    wc[i].byte_len != MSG || slot >= RQ) {
				r->bad_wc++;
				continue;
			}
			if (seq != got)
				r->bad_order++;
			if (!t_filled(r->rbuf + (size_t)slot * MSG, MSG, seq))
				r->bad_data++;
			memset(r->rbuf + (size_t)slot * MSG, 0, MSG);
			if (repost(r, slot)) {
				fail(r, "ibv_post_recv failed");
				break;
			}
		}
	}
	return NULL;
}

/* post_one -- SEND_WITH_IMM of message seq from its window slot */
static int post_one(struct run *r, uint32_t seq)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad = NULL;
	char *p = r->a.buf + (size_t)(seq % SQ) * MSG;

	t_fill(p, MSG, seq);
	sge.addr = (uintptr_t)p;
	sge.length = MSG;
	sge.lkey = r->a.mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = seq;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htonl(seq);
	wr.send_flags = IBV_SEND_SIGNALED;
	return ibv_post_send(r->a.qp, &wr, &bad);
}

/* setup -- a (its own context), b (its own or a's), b's receive CQ on a
 * channel, the pair connected and RQ receives posted; 0 or -1 */
static int setup(struct run *r, int share)
{
	struct ibv_qp_cap cap = {.max_send_wr = SQ,
				 .max_recv_wr = 1,
				 .max_send_sge = 1,
				 .max_recv_sge = 1};
	struct ibv_qp_init_attr ia;
	uint32_t i;

	if (t_side_open(&r->a, NULL, SQ, (size_t)SQ * MSG) ||
	    t_side_open(&r->b, share ? &r->a.t : NULL, 4, MSG))
		return -1;
	r->a.qp = t_side_qp(&r->a, &cap);
	r->ch = ibv_create_comp_channel(r->b.t.ctx);
	r->rcq = r->ch ? ibv_create_cq(r->b.t.ctx, RQ, r, r->ch, 0) : NULL;
	r->rbuf = calloc(RQ, MSG);
	if (!r->a.qp || !r->rcq || !r->rbuf)
		return -1;
	r->rmr = ibv_reg_mr(r->b.t.pd, r->rbuf, (size_t)RQ * MSG,
			    IBV_ACCESS_LOCAL_WRITE);
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = r->b.cq;
	ia.recv_cq = r->rcq;
	ia.cap.max_send_wr = 1;
	ia.cap.max_recv_wr = RQ;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	r->bqp = r->rmr ? ibv_create_qp(r->b.t.pd, &ia) : NULL;
	if (!r->bqp)
		return -1;
	r->b.qp = r->bqp;
	if (t_side_connect(&r->a, &r->b))
		return -1;
	for (i = 0; i < RQ; i++)
		if (repost(r, i))
			return -1;
	return 0;
}

/* teardown -- everything setup made */
static void teardown(struct run *r)
{
	if (r->bqp)
		ibv_destroy_qp(r->bqp);
	r->b.qp = NULL;
	if (r->a.qp)
		ibv_destroy_qp(r->a.qp);
	if (r->rmr)
		ibv_dereg_mr(r->rmr);
	if (r->rcq)
		ibv_destroy_cq(r->rcq);
	if (r->ch)
		ibv_destroy_comp_channel(r->ch);
	free(r->rbuf);
	t_side_close(&r->b);
	t_side_close(&r->a);
}

/*
 * The poll of an empty CQ while another thread is in the context: the
 * main thread holds the context from ibv_start_poll on CQ x until its
 * ibv_end_poll (as mlx5 holds its CQ's lock), the helper polls CQ y,
 * empty, and CQ z, holding a receive: y's poll says 0 (ibv_start_poll
 * ENOENT) while the main thread still holds it, z's waits for the
 * ibv_end_poll and takes the receive.  Twice: the first time the main
 * thread owns the context's bias and is in a biased section; the second
 * time, the helper having taken the lock from it, it holds the word.
 * Then the helper polls y again and again while the main thread holds
 * the context: after SOFT_POLL_BACKOFFS of them (16,384) one waits for
 * the ibv_end_poll, so that threads that keep the context never keep a
 * poller's pass out for good.
 */
struct busy {
	struct ibv_cq *y, *z;
	struct ibv_cq_ex *yx;
	_Atomic int released; /* the main thread's ibv_end_poll came */
	_Atomic int step;     /* 2: the helper's early polls are done */
	int y_ret, yx_ret, y_early, z_ret, z_late;
	long early; /* busy_streak's polls before the release */
	struct ibv_wc zwc;
};

/* busy_streak -- the helper of the last round: polls of the empty y
 * until one comes back after the main thread's ibv_end_poll, at most
 * BUSY_POLLS; those that came back before it counted */
#define BUSY_POLLS 1000000
static void *busy_streak(void *arg)
{
	struct busy *b = arg;
	struct ibv_wc wc;
	long i;

	for (i = 0; i < BUSY_POLLS; i++) {
		ibv_poll_cq(b->y, 1, &wc);
		if (atomic_load(&b->released))
			break;
		b->early++;
	}
	atomic_store(&b->step, 2);
	return NULL;
}

static void *busy_helper(void *arg)
{
	struct busy *b = arg;
	int n;

	b->y_ret = ibv_poll_cq(b->y, 1, &b->zwc);
	b->yx_ret = ibv_start_poll(b->yx, &(struct ibv_poll_cq_attr){0});
	if (!b->yx_ret)
		ibv_end_poll(b->yx);
	b->y_early = !atomic_load(&b->released);
	atomic_store(&b->step, 2);
	n = ibv_poll_cq(b->z, 1, &b->zwc);
	b->z_late = atomic_load(&b->released);
	b->z_ret = n;
	return NULL;
}

/* busy_qp -- an RC QP of t's on send CQ s and receive CQ r */
static struct ibv_qp *busy_qp(struct tctx *t, struct ibv_cq *s,
			      struct ibv_cq *r)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = s;
	ia.recv_cq = r;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	return ibv_create_qp(t->pd, &ia);
}

/* busy_hold -- a SEND from q1 (its wr_id SEND_ID) into a receive of q2's
 * (RECV_ID, at buf + MSG), then the context held from x's ibv_start_poll
 * on its completion: z holds the receive (the SEND was acknowledged after
 * its placement) */
static void busy_hold(struct ibv_cq_ex *x, struct ibv_qp *q1, struct ibv_qp *q2,
		      struct ibv_mr *mr, char *buf, uint64_t send_id,
		      uint64_t recv_id)
{
	long long end = now_ms() + WAIT_MS;
	int ret;

	if (t_post_recv(q2, buf + MSG, MSG, mr->lkey, recv_id) ||
	    t_post(q1, IBV_WR_SEND, buf, MSG, mr->lkey, send_id,
		   IBV_SEND_SIGNALED, 0, 0))
		bail_out("busy: post: %s", strerror(errno));
	while ((ret = ibv_start_poll(x, &(struct ibv_poll_cq_attr){0})) ==
		       ENOENT &&
	       now_ms() < end)
		;
	if (ret)
		bail_out("busy: no send completion (%d)", ret);
}

/* busy_run -- FN on the helper thread while the context is held (from
 * busy_hold); the ibv_end_poll once the helper's early polls are done or
 * WAIT ms passed, LINGER us later */
static void busy_run(struct busy *b, struct ibv_cq_ex *x, void *(*fn)(void *),
		     int wait, useconds_t linger)
{
	long long end = now_ms() + wait;
	pthread_t th;

	atomic_store(&b->released, 0);
	atomic_store(&b->step, 0);
	if (pthread_create(&th, NULL, fn, b))
		bail_out("pthread_create");
	while (atomic_load(&b->step) < 2 && now_ms() < end)
		usleep(1000);
	usleep(linger);
	atomic_store(&b->released, 1);
	ibv_end_poll(x);
	pthread_join(th, NULL);
}

static void busy_poll(void)
{
	struct ibv_cq_init_attr_ex ca = {.cqe = 8,
					 .wc_flags = IBV_WC_EX_WITH_BYTE_LEN};
	struct busy b = {0};
	struct ibv_wc wc;
	struct tctx t;
	struct ibv_cq_ex *x, *yx;
	struct ibv_qp *q1, *q2;
	struct ibv_mr *mr;
	char buf[2 * MSG];
	int round;

	if (t_open(&t, 8))
		bail_out("busy: t_open");
	x = ibv_create_cq_ex(t.ctx, &ca);
	yx = ibv_create_cq_ex(t.ctx, &ca);
	b.y = ibv_create_cq(t.ctx, 8, NULL, NULL, 0);
	b.z = ibv_create_cq(t.ctx, 8, NULL, NULL, 0);
	mr = ibv_reg_mr(t.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	/* q1's sends complete on x, q2's receives on z; y and yx take
	 * nothing */
	q1 = x && b.y && mr ? busy_qp(&t, ibv_cq_ex_to_cq(x), b.y) : NULL;
	q2 = q1 && b.z && yx ? busy_qp(&t, ibv_cq_ex_to_cq(yx), b.z) : NULL;
	if (!q2 || t_connect(q1, q2->qp_num, 0, 1, 7, 14, 7) ||
	    t_connect(q2, q1->qp_num, 0, 1, 7, 14, 7))
		bail_out("busy: setup: %s", strerror(errno));
	b.yx = yx;
	for (round = 0; round < 2; round++) {
		const char *how = round ? "word held" : "biased section";

		memset(buf, 'a' + round, MSG);
		busy_hold(x, q1, q2, mr, buf, 5, 7);
		ok(x->status == IBV_WC_SUCCESS && x->wr_id == 5,
		   "busy, %s: the SEND completed", how);
		/* a moment after the helper polled y and yx, for its z poll
		 * to start, which must wait for us */
		busy_run(&b, x, busy_helper, WAIT_MS, 20000);
		ok(b.y_ret == 0 && b.yx_ret == ENOENT && b.y_early,
		   "busy, %s: polls of empty CQs came back while the other "
		   "thread held the context (%d, %d, %s)",
		   how, b.y_ret, b.yx_ret, b.y_early ? "early" : "late");
		ok(b.z_ret == 1 && b.z_late && b.zwc.status == IBV_WC_SUCCESS &&
			   b.zwc.wr_id == 7 && b.zwc.byte_len == MSG &&
			   buf[MSG] == 'a' + round,
		   "busy, %s: the poll of a CQ holding a receive waited for "
		   "the other thread, then took it (%d, %s)",
		   how, b.z_ret, b.z_late ? "after" : "before");
	}
	/* polls of an empty CQ while nothing passes (the context held all
	 * along): a few come back at once, then one waits for its turn (the
	 * helper stuck in it: released after 500 ms) */
	busy_hold(x, q1, q2, mr, buf, 6, 8);
	busy_run(&b, x, busy_streak, 500, 0);
	ok(b.early > 0 && b.early <= 100000,
	   "busy: polls of an empty CQ leave a context that nothing passes "
	   "only so often, then one waits (%ld came back first)",
	   b.early);
	if (t_wait(b.z, &wc, 1, WAIT_MS) != 1 || wc.status != IBV_WC_SUCCESS)
		bail_out("busy: the last receive");
	ibv_destroy_qp(q2);
	ibv_destroy_qp(q1);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(b.z);
	ibv_destroy_cq(b.y);
	ibv_destroy_cq(ibv_cq_ex_to_cq(yx));
	ibv_destroy_cq(ibv_cq_ex_to_cq(x));
	t_close(&t);
}

/* one_run -- the three threads on a fresh pair (share: one context) */
static void one_run(int share, uint32_t n)
{
	const char *name = share ? "one context" : "two contexts";
	struct run *r = calloc(1, sizeof(*r));
	pthread_t th[2];
	long long end;
	uint32_t seq;

	if (!r)
		bail_out("calloc");
	r->n = n;
	atomic_init(&r->reaped, 0);
	atomic_init(&r->failed, 0);
	if (setup(r, share))
		bail_out("%s: setup: %s", name, strerror(errno));
	if (pthread_create(&th[0], NULL, reaper, r) ||
	    pthread_create(&th[1], NULL, receiver, r))
		bail_out("pthread_create");
	end = now_ms() + WAIT_MS;
	for (seq = 0; seq < n && !atomic_load(&r->failed);) {
		if (seq - atomic_load(&r->reaped) >= SQ) {
			if (now_ms() > end) /* the reaper fails too */
				break;
			continue; /* the window is full */
		}
		if (post_one(r, seq)) {
			fail(r, "ibv_post_send failed");
			break;
		}
		seq++;
		end = now_ms() + WAIT_MS;
	}
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	ok(!atomic_load(&r->failed), "%s: %u messages through%s%s", name, n,
	   r->why ? ": " : "", r->why ? r->why : "");
	ok(!r->bad_wc, "%s: every completion as posted (%u not)", name,
	   r->bad_wc);
	ok(!r->bad_order, "%s: every message once, in order (%u not)", name,
	   r->bad_order);
	ok(!r->bad_data, "%s: every payload intact (%u not)", name,
	   r->bad_data);
	ok(!r->bad_event, "%s: every event for the armed CQ (%u not)", name,
	   r->bad_event);
	teardown(r);
	free(r);
}

int main(void)
{
	uint32_t n = tap_small() ? 2000 : 20000;

	t_isolate("mthreads");
	one_run(0, n);
	one_run(1, n);
	busy_poll();
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
