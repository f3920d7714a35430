/* SPDX-License-Identifier: MIT */
/*
 * manyqp.c -- 1,024 connected RC QP pairs between two processes, only a
 * few of them carrying traffic (progress visits the QPs that have work,
 * not every QP): every message arrives, once, in order per QP, on the QP
 * it was sent on, and the idle QPs receive nothing.  Twice: each QP with
 * its own receive queue, the receiver sleeping on its completion channel
 * (its progress thread serves the rings); then all the receiver's QPs on
 * one SRQ, the receiver polling.  A last message on every QP shows that
 * the idle ones still work.  The once-a-second safety sweep is off, so a
 * ring lost would be a message that never comes (60 s without one: a
 * deadline on progress, not on the whole run, which a loaded machine may
 * stretch past a minute).
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

#define NQP	    1024
#define DEPTH	    4
#define DEADLINE_MS 60000

static const int active[] = {0, 3, 130, 511, 512, 777, 1000, 1023};
#define NACTIVE ((int)(sizeof(active) / sizeof(active[0])))

struct msg {
	uint32_t qp; /* index of the pair */
	uint32_t seq;
};

struct side {
	struct tctx t;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp[NQP];
	struct ibv_mr *mr;
	struct msg *buf; /* receiver: NQP * DEPTH slots; sender: NQP */
	int armed;
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int msgs_per_qp(void)
{
	return tap_small() ? 50 : 2000;
}

/* setup -- NQP QPs (on an SRQ if use_srq), exchange, connect */
static int setup(struct side *s, int rfd, int wfd, int use_srq, int use_channel)
{
	struct ibv_qp_init_attr a;
	struct ibv_srq_init_attr sa;
	static uint32_t mine[NQP], peer[NQP];
	size_t len = (size_t)NQP * DEPTH * sizeof(struct msg);
	int i;

	memset(s, 0, sizeof(*s));
	if (t_open(&s->t, 16))
		return -1;
	if (use_channel) {
		s->ch = ibv_create_comp_channel(s->t.ctx);
		if (!s->ch)
			return -1;
	}
	s->cq = ibv_create_cq(s->t.ctx, 2 * NQP * DEPTH, NULL, s->ch, 0);
	s->buf = calloc(1, len);
	if (!s->cq || !s->buf)
		return -1;
	s->mr = ibv_reg_mr(s->t.pd, s->buf, len, IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr)
		return -1;
	if (use_srq) {
		memset(&sa, 0, sizeof(sa));
		sa.attr.max_wr = 2 * NQP;
		sa.attr.max_sge = 1;
		s->srq = ibv_create_srq(s->t.pd, &sa);
		if (!s->srq)
			return -1;
	}
	for (i = 0; i < NQP; i++) {
		memset(&a, 0, sizeof(a));
		a.send_cq = s->cq;
		a.recv_cq = s->cq;
		a.srq = s->srq;
		a.qp_type = IBV_QPT_RC;
		a.cap.max_send_wr = DEPTH;
		a.cap.max_recv_wr = DEPTH;
		a.cap.max_send_sge = 1;
		a.cap.max_recv_sge = 1;
		a.cap.max_inline_data = sizeof(struct msg);
		s->qp[i] = ibv_create_qp(s->t.pd, &a);
		if (!s->qp[i])
			return -1;
		mine[i] = s->qp[i]->qp_num;
	}
	t_xsend(wfd, mine, sizeof(mine));
	t_xrecv(rfd, peer, sizeof(peer));
	for (i = 0; i < NQP; i++)
		if (t_connect(s->qp[i], peer[i], 0, 1, 7, 14, 7))
			return -1;
	return 0;
}

static void teardown(struct side *s)
{
	int i;

	for (i = 0; i < NQP; i++)
		if (s->qp[i])
			ibv_destroy_qp(s->qp[i]);
	if (s->srq)
		ibv_destroy_srq(s->srq);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->ch)
		ibv_destroy_comp_channel(s->ch);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	t_close(&s->t);
	free(s->buf);
}

/* post_slot -- receive buffer k again (on the SRQ, or QP k / DEPTH) */
static int post_slot(struct side *s, uint32_t k)
{
	struct ibv_sge sge = {(uintptr_t)&s->buf[k], sizeof(struct msg),
			      s->mr->lkey};
	struct ibv_recv_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = k;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	if (s->srq)
		return ibv_post_srq_recv(s->srq, &wr, &bad);
	return ibv_post_recv(s->qp[k / DEPTH], &wr, &bad);
}

/* next_wc -- one completion: polling, or sleeping on the channel */
static int next_wc(struct side *s, struct ibv_wc *wc, long long end)
{
	struct pollfd p;
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int n;

	for (;;) {
		n = ibv_poll_cq(s->cq, 1, wc);
		if (n)
			return n == 1;
		if (now_ms() > end)
			return 0;
		if (!s->ch)
			continue;
		if (!s->armed) {
			if (ibv_req_notify_cq(s->cq, 0))
				return 0;
			s->armed = 1;
			continue;
		}
		p.fd = s->ch->fd;
		p.events = POLLIN;
		p.revents = 0;
		if (poll(&p, 1,
			 (int)(end - now_ms() > 0 ? end - now_ms() : 0)) <= 0)
			return 0;
		if (ibv_get_cq_event(s->ch, &ev_cq, &ev_ctx))
			return 0;
		ibv_ack_cq_events(ev_cq, 1);
		s->armed = 0;
	}
}

static int is_active(int q)
{
	int i;

	for (i = 0; i < NACTIVE; i++)
		if (active[i] == q)
			return 1;
	return 0;
}

/*
 * receiver -- count and check: per QP the sequence numbers come in order,
 * each on the QP it names; the idle QPs get exactly their one last
 * message (seq UINT32_MAX).  0 if all is well, else a code.
 */
static int receiver(struct side *s)
{
	static uint32_t next[NQP];
	static int last[NQP];
	long long end = now_ms() + DEADLINE_MS;
	struct ibv_wc wc;
	struct msg m;
	int want, got = 0, i, q;
	uint32_t k;

	memset(next, 0, sizeof(next));
	memset(last, 0, sizeof(last));
	want = NACTIVE * msgs_per_qp() + NQP;
	if (s->srq) {
		for (k = 0; k < 2 * NQP; k++)
			if (post_slot(s, k))
				return 1;
	} else {
		for (k = 0; k < NQP * DEPTH; k++)
			if (post_slot(s, k))
				return 1;
	}
	while (got < want) {
		if (!next_wc(s, &wc, end))
			return 2; /* something never came */
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
		    wc.byte_len != sizeof(m))
			return 3;
		k = (uint32_t)wc.wr_id;
		memcpy(&m, &s->buf[k], sizeof(m));
		if (m.qp >= NQP || wc.qp_num != s->qp[m.qp]->qp_num)
			return 4; /* on another QP than it was sent on */
		q = (int)m.qp;
		if (m.seq == UINT32_MAX) {
			if (last[q]++)
				return 5; /* twice */
		} else if (!is_active(q) || last[q] || m.seq != next[q]++) {
			return 6; /* out of order, or on an idle QP */
		}
		got++;
		end = now_ms() + DEADLINE_MS; /* progress */
		if (post_slot(s, k))
			return 7;
	}
	for (i = 0; i < NQP; i++)
		if (!last[i] ||
		    (is_active(i) && next[i] != (uint32_t)msgs_per_qp()))
			return 8;
	/* nothing more arrives */
	return ibv_poll_cq(s->cq, 1, &wc) ? 9 : 0;
}

/* sender -- msgs_per_qp() on each active QP, interleaved, then one last
 * message on every QP; reaps its send completions; 0 if all succeeded */
static int sender(struct side *s)
{
	static uint32_t inflight[NQP];
	long long end = now_ms() + DEADLINE_MS;
	struct ibv_wc wc[32];
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	int n = msgs_per_qp(), sent = 0, done = 0, total, i, k, q, seq;

	memset(inflight, 0, sizeof(inflight));
	total = NACTIVE * n + NQP;
	for (seq = 0; seq <= n; seq++) {
		for (i = 0; i < (seq < n ? NACTIVE : NQP); i++) {
			q = seq < n ? active[i] : i;
			while (inflight[q] == DEPTH) { /* reap */
				if (now_ms() > end)
					return 1;
				k = ibv_poll_cq(s->cq, 32, wc);
				if (k > 0)
					end = now_ms() + DEADLINE_MS;
				while (k-- > 0) {
					if (wc[k].status != IBV_WC_SUCCESS)
						return 2;
					inflight[wc[k].wr_id]--;
					done++;
				}
			}
			s->buf[q].qp = (uint32_t)q;
			s->buf[q].seq = seq < n ? (uint32_t)seq : UINT32_MAX;
			sge = (struct ibv_sge){(uintptr_t)&s->buf[q],
					       sizeof(struct msg), s->mr->lkey};
			memset(&wr, 0, sizeof(wr));
			wr.wr_id = (uint64_t)q;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_SEND;
			wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
			if (ibv_post_send(s->qp[q], &wr, &bad))
				return 3;
			inflight[q]++;
			sent++;
		}
	}
	while (done < total) {
		if (now_ms() > end)
			return 4;
		k = ibv_poll_cq(s->cq, 32, wc);
		if (k > 0)
			end = now_ms() + DEADLINE_MS;
		while (k-- > 0) {
			if (wc[k].status != IBV_WC_SUCCESS)
				return 5;
			done++;
		}
	}
	return sent == total ? 0 : 6;
}

static int child_main(int rfd, int wfd)
{
	struct side s;
	int use_srq, r = 0, res;
	char go;

	for (use_srq = 0; use_srq < 2; use_srq++) {
		if (setup(&s, rfd, wfd, use_srq, !use_srq))
			return 10;
		res = receiver(&s);
		t_xsend(wfd, &res, sizeof(res));
		t_xrecv(rfd, &go, 1);
		teardown(&s);
		r |= res;
	}
	return r ? 1 : 0;
}

int main(void)
{
	static const char *how[2] = {
		"own receive queues, receiver asleep on its channel",
		"one SRQ, receiver polling"};
	struct side s;
	int rfd, wfd, use_srq, res, cres = -1, st = 0;
	pid_t pid;
	char go = 1;

	t_isolate("manyqp");
	/* no once-a-second sweep: a ring lost is a message lost */
	setenv("SOFTRDMA_TEST_NOSWEEP", "1", 1);
	pid = t_spawn(child_main, &rfd, &wfd);
	if (pid < 0)
		bail_out("pipe or fork");
	for (use_srq = 0; use_srq < 2; use_srq++) {
		ok(setup(&s, rfd, wfd, 0, 0) == 0, "%d QPs connected (%s)", NQP,
		   how[use_srq]);
		res = sender(&s);
		ok(res == 0,
		   "%d messages on each of %d QPs, one on every QP, "
		   "all completed (%d)",
		   msgs_per_qp(), NACTIVE, res);
		t_xrecv(rfd, &cres, sizeof(cres));
		ok(cres == 0,
		   "all delivered once, in order, on their QP; idle QPs got "
		   "only theirs (%d)",
		   cres);
		t_xsend(wfd, &go, 1);
		teardown(&s);
	}
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "receiver exits 0 (%d)", st);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
