/* SPDX-License-Identifier: MIT */
/* mproc.c -- two processes: send/recv, write, read, atomics, peer death */
#include "config.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../soft/softrdma.h" /* SOFT_LIVENESS_NS */
#include "../tap.h"
#include "common.h"

#define BIG   (1u << 20)
#define BUFSZ (6u * BIG)

struct info {
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
};

struct side {
	struct tctx t;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
	struct info peer;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* setup -- open, register, create, exchange, connect */
static int setup(struct side *s, int rfd, int wfd, int timeout, int retry)
{
	struct info me;

	if (t_open(&s->t, 256))
		return -1;
	s->buf = calloc(1, BUFSZ);
	s->mr = ibv_reg_mr(s->t.pd, s->buf, BUFSZ,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
	s->qp = t_rc_qp(&s->t, 64, NULL);
	if (!s->buf || !s->mr || !s->qp)
		return -1;
	me.qpn = s->qp->qp_num;
	me.rkey = s->mr->rkey;
	me.addr = (uintptr_t)s->buf;
	t_xsend(wfd, &me, sizeof(me));
	t_xrecv(rfd, &s->peer, sizeof(s->peer));
	return t_connect(s->qp, s->peer.qpn,
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				 IBV_ACCESS_REMOTE_ATOMIC,
			 1, 7, timeout, retry);
}

static void teardown(struct side *s)
{
	ibv_destroy_qp(s->qp);
	ibv_dereg_mr(s->mr);
	t_close(&s->t);
	free(s->buf);
}

/* peer_start -- fork the child CHILD and set our side up with it
 * (setup's TIMEOUT and RETRY), checked as NAME; the child's pid */
static pid_t peer_start(int (*child)(int, int), struct side *s, int *rfd,
			int *wfd, int timeout, int retry, const char *name)
{
	pid_t pid = t_spawn(child, rfd, wfd);

	if (pid < 0)
		bail_out("pipe or fork");
	ok(setup(s, *rfd, *wfd, timeout, retry) == 0, "%s", name);
	return pid;
}

/* peer_end -- wait for the child (its clean exit checked as NAME; NULL:
 * one that was killed), then take our side down */
static void peer_end(pid_t pid, struct side *s, int rfd, int wfd,
		     const char *name)
{
	int st = 0;

	waitpid(pid, &st, 0);
	if (name)
		ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s (%d)", name,
		   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	teardown(s);
	close(wfd);
	close(rfd);
}

static void fill(char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (char)(i * 7 + seed);
}

static int check(const char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != (char)(i * 7 + seed))
			return 0;
	return 1;
}

/* responder -- the child of the traffic test; returns a result mask */
static int responder(int rfd, int wfd)
{
	struct side s;
	struct ibv_wc wc;
	int res = 0, i;
	uint32_t sizes[3] = {8, 4096, BIG};
	char go;

	if (setup(&s, rfd, wfd, 14, 7))
		return 0x1000;
	fill(s.buf + 4 * BIG, BIG, 5); /* for the peer's RDMA READ */
	for (i = 0; i < 3; i++)
		t_post_recv(s.qp, s.buf + (size_t)i * BIG, BIG, s.mr->lkey,
			    (uint64_t)i);
	for (i = 0; i < 3; i++) {
		if (t_wait(s.t.cq, &wc, 1, 10000) != 1 ||
		    wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)i ||
		    wc.byte_len != sizes[i] ||
		    !check(s.buf + (size_t)i * BIG, sizes[i], (unsigned)i))
			return res | 0x2000;
		res |= 1 << i;
	}
	/* the peer RDMA-writes 1 MiB at 3 MiB, then SEND_WITH_IMM */
	t_post_recv(s.qp, s.buf, 16, s.mr->lkey, 10);
	i = t_wait(s.t.cq, &wc, 1, 10000);
	if (i == 1 && wc.status == 0 && wc.wr_id == 10 &&
	    (wc.wc_flags & IBV_WC_WITH_IMM) && be32toh(wc.imm_data) == 0x5eed &&
	    check(s.buf + 3 * BIG, BIG, 9))
		res |= 8;
	t_xsend(wfd, &res, sizeof(res));
	t_xrecv(rfd, &go, 1); /* parent is done with us */
	teardown(&s);
	return res;
}

/* responder_main -- the child's exit status: 0 if every check passed */
static int responder_main(int rfd, int wfd)
{
	return responder(rfd, wfd) == 0xf ? 0 : 1;
}

static void test_traffic(void)
{
	int rfd, wfd, res = 0, i, n;
	struct side s;
	struct ibv_wc wc;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	uint64_t *ctr, *old;
	pid_t pid;

	pid = peer_start(responder_main, &s, &rfd, &wfd, 14, 7, "parent setup");
	for (i = 0; i < 3; i++) {
		uint32_t len = i == 0 ? 8 : i == 1 ? 4096 : BIG;

		fill(s.buf + (size_t)i * BIG, len, (unsigned)i);
		t_post(s.qp, IBV_WR_SEND, s.buf + (size_t)i * BIG, len,
		       s.mr->lkey, (uint64_t)i, IBV_SEND_SIGNALED, 0, 0);
	}
	for (i = 0; i < 3; i++) {
		ok(t_wait(s.t.cq, &wc, 1, 10000) == 1 &&
			   wc.status == IBV_WC_SUCCESS &&
			   wc.wr_id == (uint64_t)i && wc.opcode == IBV_WC_SEND,
		   "send %d completed", i);
	}
	/* write 1 MiB then notify */
	fill(s.buf + 2 * BIG, BIG, 9);
	t_post(s.qp, IBV_WR_RDMA_WRITE, s.buf + 2 * BIG, BIG, s.mr->lkey, 20,
	       IBV_SEND_SIGNALED, s.peer.addr + 3 * BIG, s.peer.rkey);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 21;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htobe32(0x5eed);
	wr.send_flags = IBV_SEND_SIGNALED;
	ibv_post_send(s.qp, &wr, &bad);
	ok(t_wait(s.t.cq, &wc, 1, 10000) == 1 && wc.status == 0 &&
		   wc.wr_id == 20 && wc.opcode == IBV_WC_RDMA_WRITE,
	   "1 MiB RDMA write completed");
	n = t_wait(s.t.cq, &wc, 1, 10000);
	ok(n == 1 && wc.status == 0 && wc.wr_id == 21,
	   "send with imm completed");
	/* read 1 MiB back from the peer */
	t_post(s.qp, IBV_WR_RDMA_READ, s.buf + 3 * BIG, BIG, s.mr->lkey, 22,
	       IBV_SEND_SIGNALED, s.peer.addr + 4 * BIG, s.peer.rkey);
	ok(t_wait(s.t.cq, &wc, 1, 10000) == 1 && wc.status == 0 &&
		   wc.opcode == IBV_WC_RDMA_READ && wc.byte_len == BIG,
	   "1 MiB RDMA read completed");
	ok(check(s.buf + 3 * BIG, BIG, 5), "read data intact");
	/* atomics on the peer's memory */
	ctr = (uint64_t *)(void *)(s.buf + 8);
	old = (uint64_t *)(void *)(s.buf + 16);
	memset(&wr, 0, sizeof(wr));
	sge = (struct ibv_sge){(uintptr_t)old, 8, s.mr->lkey};
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.remote_addr = s.peer.addr + 6 * BIG - 8;
	wr.wr.atomic.rkey = s.peer.rkey;
	wr.wr.atomic.compare_add = 1;
	for (i = 0; i < 100; i++) {
		ibv_post_send(s.qp, &wr, &bad);
		if (t_wait(s.t.cq, &wc, 1, 10000) != 1 || wc.status)
			break;
	}
	is_int(i, 100, "100 fetch_and_add");
	is_int(*old, 99, "last fetched value");
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 100;
	wr.wr.atomic.swap = 12345;
	ibv_post_send(s.qp, &wr, &bad);
	ok(t_wait(s.t.cq, &wc, 1, 10000) == 1 && wc.status == 0 && *old == 100,
	   "cmp_and_swp saw 100");
	(void)ctr;
	t_xrecv(rfd, &res, sizeof(res));
	is_int(res, 0xf, "responder checks (sizes 8/4K/1M, write+imm)");
	t_xsend(wfd, "x", 1);
	peer_end(pid, &s, rfd, wfd, "responder exited cleanly");
}

static int victim(int rfd, int wfd)
{
	struct side s;

	if (setup(&s, rfd, wfd, 10, 3))
		return 1;
	t_xsend(wfd, "r", 1);
	for (;;)
		pause(); /* no receive posted: the peer's sends RNR forever */
}

static void test_peer_death(void)
{
	int rfd, wfd, i, n;
	struct side s;
	struct ibv_wc wc[4];
	double t0, dt;
	char r;
	pid_t pid;

	/* timeout 10 (4.2 ms) x (retry_cnt 3 + 1) = 16.8 ms */
	pid = peer_start(victim, &s, &rfd, &wfd, 10, 3,
			 "setup with the victim");
	t_xrecv(rfd, &r, 1);
	for (i = 0; i < 4; i++)
		t_post(s.qp, IBV_WR_SEND, s.buf, 64, s.mr->lkey, (uint64_t)i,
		       IBV_SEND_SIGNALED, 0, 0);
	is_int(t_wait(s.t.cq, wc, 4, 100), 0, "sends wait (RNR, retry 7)");
	kill(pid, SIGKILL);
	t0 = now_ms();
	n = t_wait(s.t.cq, wc, 4, 30000);
	dt = now_ms() - t0;
	is_int(n, 4, "all sends completed after the peer died");
	is_int(wc[0].status, IBV_WC_RETRY_EXC_ERR, "head: RETRY_EXC_ERR");
	ok(wc[1].status == IBV_WC_WR_FLUSH_ERR &&
		   wc[3].status == IBV_WC_WR_FLUSH_ERR,
	   "the rest flushed");
	/* 16.8 + 10 + 200 ms on an idle machine; a loaded one may hold the
	 * poller back for seconds: the bound only tells the transport timer
	 * from something far slower */
	ok(dt < 10000, "by the transport timer (%.1f ms; 226.8 idle)", dt);
	is_int(t_qp_state(s.qp), IBV_QPS_ERR, "QP in ERR");
	t_post(s.qp, IBV_WR_RDMA_WRITE, s.buf, 64, s.mr->lkey, 9,
	       IBV_SEND_SIGNALED, s.peer.addr, s.peer.rkey);
	ok(t_wait(s.t.cq, wc, 1, 30000) == 1 &&
		   wc[0].status == IBV_WC_WR_FLUSH_ERR,
	   "later write flushed");
	peer_end(pid, &s, rfd, wfd, NULL);
}

/*
 * The responder's cumulative ACK, which a busy sender reads only when
 * something waits on it (data.c ack_needed): with more than half its SQ
 * in flight, one poll after the responder took them gives the room back;
 * a signalled SEND's completion comes on the first poll after the
 * responder took it, with the unsignalled ones before it retired.
 */
#define LAZY_TOTAL 512 /* messages the child takes, numbered from 0 */

/* echo_side -- a child's side of 8-byte messages: set up, 64 receives
 * posted (buffer i at buf + i * 8, wr_id i), then the ready byte; 0 or
 * setup's failure */
static int echo_side(struct side *s, int rfd, int wfd)
{
	int i;

	if (setup(s, rfd, wfd, 14, 7))
		return -1;
	for (i = 0; i < 64; i++)
		t_post_recv(s->qp, s->buf + (size_t)i * 8, 8, s->mr->lkey,
			    (uint64_t)i);
	t_xsend(wfd, "r", 1);
	return 0;
}

/* lazy_responder -- the child of test_lazy_ack: takes LAZY_TOTAL 8-byte
 * messages, each its number, with 64 receives posted, reposted as they
 * complete; after the count the parent sends (an int) it writes a byte */
static int lazy_responder(int rfd, int wfd)
{
	struct side s;
	struct ibv_wc wc;
	uint64_t v;
	int i, upto, bad = 0;

	if (echo_side(&s, rfd, wfd))
		return 1;
	t_xrecv(rfd, &upto, sizeof(upto));
	for (i = 0; i < LAZY_TOTAL; i++) {
		if (t_wait(s.t.cq, &wc, 1, 10000) != 1 ||
		    wc.status != IBV_WC_SUCCESS || wc.byte_len != 8)
			return 2;
		memcpy(&v, s.buf + wc.wr_id * 8, 8);
		bad |= v != (uint64_t)i;
		t_post_recv(s.qp, s.buf + wc.wr_id * 8, 8, s.mr->lkey,
			    wc.wr_id);
		if (i + 1 == upto) {
			t_xsend(wfd, "a", 1); /* took them all: the ACK too */
			t_xrecv(rfd, &upto, sizeof(upto));
		}
	}
	t_xsend(wfd, &bad, sizeof(bad));
	t_xrecv(rfd, &upto, sizeof(upto)); /* parent is done with us */
	teardown(&s);
	return 0;
}

/* lazy_send -- post message number n (8 bytes, its number, from its own
 * place in buf), signalled or not; 0 or the post's error */
static int lazy_send(struct side *s, uint64_t n, int flags)
{
	memcpy(s->buf + BIG + n * 8, &n, 8);
	return t_post(s->qp, IBV_WR_SEND, s->buf + BIG + n * 8, 8, s->mr->lkey,
		      1000 + n, flags, 0, 0);
}

static void test_lazy_ack(void)
{
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_wc wc[4];
	struct side s;
	uint64_t n = 0;
	int rfd, wfd, bad = -1, upto, half, i, err = 0;
	char c;
	pid_t pid;

	pid = peer_start(lazy_responder, &s, &rfd, &wfd, 14, 7,
			 "lazy ACK: setup");
	ibv_query_qp(s.qp, &qa, IBV_QP_CAP, &qi);
	half = (int)qa.cap.max_send_wr / 2 + 1;
	t_xrecv(rfd, &c, 1);
	/* more than half the SQ, unsignalled: the child takes them all */
	upto = half;
	t_xsend(wfd, &upto, sizeof(upto));
	for (i = 0; i < half; i++)
		err |= lazy_send(&s, n++, 0);
	t_xrecv(rfd, &c, 1);
	is_int(ibv_poll_cq(s.t.cq, 4, wc), 0,
	       "lazy ACK: a poll, no completion (unsignalled)");
	/* that poll retired them: a whole SQ's worth fits now */
	upto = half + (int)qa.cap.max_send_wr;
	t_xsend(wfd, &upto, sizeof(upto));
	for (i = 0; i < (int)qa.cap.max_send_wr; i++)
		err |= lazy_send(&s, n++, 0);
	ok(err == 0, "lazy ACK: %u unsignalled SENDs posted, no ENOMEM",
	   qa.cap.max_send_wr);
	t_xrecv(rfd, &c, 1);
	/* a full SQ: the next poll makes room again (and completes nothing);
	 * then a signalled one, whose completion comes on the first poll
	 * after the child took it */
	is_int(ibv_poll_cq(s.t.cq, 4, wc), 0, "lazy ACK: a poll, room again");
	upto = (int)n + 1;
	t_xsend(wfd, &upto, sizeof(upto));
	err = lazy_send(&s, n, IBV_SEND_SIGNALED);
	t_xrecv(rfd, &c, 1);
	i = ibv_poll_cq(s.t.cq, 4, wc);
	ok(err == 0 && i == 1 && wc[0].status == IBV_WC_SUCCESS &&
		   wc[0].wr_id == 1000 + n && wc[0].opcode == IBV_WC_SEND,
	   "lazy ACK: the signalled SEND's completion on the first poll "
	   "(%d)",
	   i);
	n++;
	/* the rest, unsignalled, streamed with a poll whenever the SQ is
	 * full */
	upto = LAZY_TOTAL + 1; /* no more stops */
	t_xsend(wfd, &upto, sizeof(upto));
	for (i = 0; n < LAZY_TOTAL && i < 10000000; i++) {
		err = lazy_send(&s, n, 0);
		if (!err)
			n++;
		else if (err != ENOMEM || ibv_poll_cq(s.t.cq, 4, wc))
			break;
	}
	ok(n == LAZY_TOTAL, "lazy ACK: all %d posted (%d)", LAZY_TOTAL, (int)n);
	t_xrecv(rfd, &bad, sizeof(bad));
	is_int(bad, 0, "lazy ACK: the child took each, in order");
	/* the child took them: a drain to SQD ends on the next poll */
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_SQD;
	qa.en_sqd_async_notify = 1;
	err = ibv_modify_qp(s.qp, &qa,
			    IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY);
	i = ibv_poll_cq(s.t.cq, 4, wc);
	ok(err == 0 && i == 0 &&
		   t_async(s.t.ctx, 0, NULL) == IBV_EVENT_SQ_DRAINED,
	   "lazy ACK: SQ_DRAINED on the first poll after SQD, no "
	   "completion (%d, %d)",
	   err, i);
	t_xsend(wfd, &upto, sizeof(upto));
	peer_end(pid, &s, rfd, wfd, "lazy ACK: child exited");
}

/*
 * A sender whose peer keeps answering asks the kernel nothing about it:
 * the liveness look (every SOFT_LIVENESS_NS while a send is in flight,
 * data.c tx_qp) takes an ACK that moved since the last one as the
 * peer's word (peer_answered), as an HCA's transport timer restarts at
 * every ACK; only a peer that went quiet costs the look its system
 * calls (a read of /proc/PID/stat among them, counted here in this
 * process's read calls, /proc/self/io syscr).  A round trip longer than
 * the period (the child kept off its CPU: a loaded machine) may leave a
 * look without a new ACK, so each one allows the reads of the looks it
 * spans.
 */
#define ANSWER_MS 200

/* answering_responder -- the child of test_answered: echoes each 8-byte
 * message back (a signalled SEND) until one holds ~0 */
static int answering_responder(int rfd, int wfd)
{
	struct side s;
	struct ibv_wc wc;
	uint64_t v = 0;

	if (echo_side(&s, rfd, wfd))
		return 1;
	while (v != ~(uint64_t)0) {
		if (t_wait(s.t.cq, &wc, 1, 10000) != 1 ||
		    wc.status != IBV_WC_SUCCESS)
			return 2;
		if (wc.opcode != IBV_WC_RECV)
			continue; /* an echo's completion */
		memcpy(&v, s.buf + wc.wr_id * 8, 8);
		memcpy(s.buf + BIG, &v, 8);
		t_post_recv(s.qp, s.buf + wc.wr_id * 8, 8, s.mr->lkey,
			    wc.wr_id);
		if (t_post(s.qp, IBV_WR_SEND, s.buf + BIG, 8, s.mr->lkey, 100,
			   IBV_SEND_SIGNALED, 0, 0))
			return 3;
	}
	t_xrecv(rfd, &v, 1); /* parent is done with us */
	teardown(&s);
	return 0;
}

/* reads_done -- this process's read system calls so far, -1 unknown */
static long long reads_done(void)
{
	char buf[512];
	const char *p;
	long long v = -1;
	ssize_t n;
	int fd = open("/proc/self/io", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strstr(buf, "syscr: ");
	if (p)
		v = atoll(p + 7);
	return v;
}

static void test_answered(void)
{
	struct ibv_wc wc[2];
	struct side s;
	uint64_t i, v, back;
	long long r0, r1, allow = 0;
	double t0, t1, rt, period = SOFT_LIVENESS_NS / 1e6;
	int rfd, wfd, got, err = 0;
	char c;
	pid_t pid;

	pid = peer_start(answering_responder, &s, &rfd, &wfd, 14, 7,
			 "answered: setup");
	t_xrecv(rfd, &c, 1);
	r0 = reads_done();
	t0 = now_ms();
	for (i = 0; !err; i++) {
		v = now_ms() - t0 < ANSWER_MS ? i : ~(uint64_t)0;
		memcpy(s.buf + BIG, &v, 8);
		t_post_recv(s.qp, s.buf, 8, s.mr->lkey, 1);
		if (t_post(s.qp, IBV_WR_SEND, s.buf + BIG, 8, s.mr->lkey, 2,
			   IBV_SEND_SIGNALED, 0, 0))
			break;
		/* our SEND's completion and the echo, either first */
		t1 = now_ms();
		got = t_wait(s.t.cq, wc, 2, 10000);
		rt = now_ms() - t1;
		if (rt >= period)
			allow += (long long)(rt / period) + 1;
		memcpy(&back, s.buf, 8);
		err = got != 2 || wc[0].status != IBV_WC_SUCCESS ||
		      wc[1].status != IBV_WC_SUCCESS || back != v;
		if (v == ~(uint64_t)0)
			break;
	}
	r1 = reads_done();
	ok(!err && i > 0, "answered: %llu round trips in %.0f ms, each echoed",
	   (unsigned long long)i, now_ms() - t0);
	if (r0 < 0 || r1 < 0)
		skip_one("no /proc/self/io");
	else
		/* one read each look otherwise: some ANSWER_MS / 10 */
		ok(r1 - r0 <= 3 + allow,
		   "answered: no liveness look asked the kernel (%lld reads, "
		   "%lld allowed for slow round trips)",
		   r1 - r0, allow);
	t_xsend(wfd, "d", 1);
	peer_end(pid, &s, rfd, wfd, "answered: child exited");
}

int main(void)
{
	t_isolate("mproc");
	test_traffic();
	test_peer_death();
	test_lazy_ack();
	test_answered();
	is_int(t_shm_count(), 0, "no /dev/shm entries left (dead peer's too)");
	return done_testing();
}
