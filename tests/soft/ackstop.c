/* SPDX-License-Identifier: MIT */
/*
 * ackstop.c -- the responder's cumulative ACK is a plain store under its
 * rx lock (soft/data.c rx_ack), and the child responder here stops
 * itself between its look at the initiator's cancel and that store
 * (SOFTRDMA_TEST_ACK_STOP):
 *
 * - reset: the initiator's QP goes to RESET meanwhile.  The reset waits
 *   for the responder's rx lock (soft_qp_ack_reset): the late ACK lands
 *   before the reset clears the word, never in the next incarnation's,
 *   where it would complete messages that never arrived.
 * - flush: the initiator's QP goes to ERR meanwhile.  Its WQEs are
 *   flushed, none succeeds, and none succeeds later either: the ACK the
 *   responder stores after the flush is a lost one, the messages it
 *   covers delivered (in order, intact) and their sends flushed, as on
 *   an HCA whose ACK did not come back.
 */
#include "config.h"

#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../soft/softrdma.h" /* the ACK word: to_sqp()->seg->acked */
#include "../tap.h"
#include "common.h"

#define NMSG	3
#define WAIT_MS 10000

struct side {
	struct tctx t;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint64_t buf[NMSG];
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* setup -- context, NMSG 8-byte cells, a QP connected to the peer's */
static int setup(struct side *s, int rfd, int wfd)
{
	uint32_t me, peer;

	memset(s->buf, 0, sizeof(s->buf));
	if (t_open(&s->t, 64))
		return -1;
	s->mr = ibv_reg_mr(s->t.pd, s->buf, sizeof(s->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	s->qp = t_rc_qp(&s->t, 16, NULL);
	if (!s->mr || !s->qp)
		return -1;
	me = s->qp->qp_num;
	t_xsend(wfd, &me, sizeof(me));
	t_xrecv(rfd, &peer, sizeof(peer));
	return t_connect(s->qp, peer, 0, 12, 7, 14, 7);
}

static void teardown(struct side *s)
{
	ibv_destroy_qp(s->qp);
	ibv_dereg_mr(s->mr);
	t_close(&s->t);
}

/* readable -- the parent wrote (it asks for the count) */
static int readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

/*
 * responder -- the child: NMSG receives posted, then it polls (stopping
 * itself once, in its first ACK) until the parent asks; answers how many
 * arrived and whether each was the next number, intact
 */
static int responder(int rfd, int wfd)
{
	struct ibv_wc wc[NMSG];
	struct side s;
	uint64_t res[2] = {0, 0};
	int i, n;
	char c;

	setenv("SOFTRDMA_TEST_ACK_STOP", "1", 1);
	if (setup(&s, rfd, wfd))
		return 1;
	for (i = 0; i < NMSG; i++)
		if (t_post_recv(s.qp, &s.buf[i], 8, s.mr->lkey, (uint64_t)i))
			return 1;
	t_xsend(wfd, "r", 1);
	for (;;) {
		n = ibv_poll_cq(s.t.cq, NMSG, wc);
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS ||
			    wc[i].wr_id != res[0] || wc[i].byte_len != 8 ||
			    s.buf[res[0]] != 0x5eed0000 + res[0])
				res[1]++;
			res[0]++;
		}
		if (n == 0 && readable(rfd))
			break;
	}
	t_xrecv(rfd, &c, 1);
	t_xsend(wfd, res, sizeof(res));
	teardown(&s);
	return 0;
}

/* cont_later -- SIGCONT to pid after ms, from a process of its own */
static pid_t cont_later(pid_t pid, int ms)
{
	pid_t h = fork();

	if (h == 0) {
		usleep((useconds_t)ms * 1000);
		kill(pid, SIGCONT);
		_exit(0);
	}
	return h;
}

/* begin -- a responder child, NMSG numbered SENDs (signalled, inline)
 * posted to it, and the child stopped in its first ACK; its pid */
static pid_t begin(struct side *s, int *rfd, int *wfd, const char *what)
{
	pid_t pid = t_spawn(responder, rfd, wfd);
	int i, st;
	char r;

	if (pid < 0 || setup(s, *rfd, *wfd))
		bail_out("setup");
	t_xrecv(*rfd, &r, 1);
	for (i = 0; i < NMSG; i++) {
		s->buf[i] = 0x5eed0000 + (uint64_t)i;
		if (t_post(s->qp, IBV_WR_SEND, &s->buf[i], 8, s->mr->lkey,
			   (uint64_t)i, IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0,
			   0))
			bail_out("post");
	}
	ok(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st),
	   "%s: the responder stopped in its ACK", what);
	return pid;
}

/* end -- the child's count: the batch it acknowledged (after the reset
 * or the flush), delivered in order, intact; the child exits */
static void end(pid_t pid, struct side *s, int rfd, int wfd, const char *what)
{
	uint64_t res[2];

	t_xsend(wfd, "x", 1);
	t_xrecv(rfd, res, sizeof(res));
	ok(t_reap(pid) == 0, "%s: the responder exits 0", what);
	ok(res[0] >= 1 && res[0] <= NMSG && res[1] == 0,
	   "%s: the batch it acknowledged delivered, in order, intact "
	   "(%llu, %llu faults)",
	   what, (unsigned long long)res[0], (unsigned long long)res[1]);
	close(rfd);
	close(wfd);
	teardown(s);
}

static void reset_pass(void)
{
	struct ibv_qp_attr qa = {.qp_state = IBV_QPS_RESET};
	struct side s;
	long long t0, took;
	int rfd, wfd, st;
	pid_t pid = begin(&s, &rfd, &wfd, "reset"), h;

	is_int((int)atomic_load(&to_sqp(s.qp)->seg->acked), 0,
	       "reset: no ACK stored yet");
	h = cont_later(pid, 200);
	t0 = now_ms();
	ok(!ibv_modify_qp(s.qp, &qa, IBV_QP_STATE), "reset: to RESET");
	took = now_ms() - t0;
	waitpid(h, &st, 0);
	ok(took >= 100,
	   "reset: waited for the responder's rx lock (%lld ms, it went on "
	   "at 200)",
	   took);
	usleep(100000); /* anything late would land now */
	is_int((int)atomic_load(&to_sqp(s.qp)->seg->acked), 0,
	       "reset: the late ACK landed before the reset, not after it");
	end(pid, &s, rfd, wfd, "reset");
}

static void flush_pass(void)
{
	struct ibv_qp_attr qa = {.qp_state = IBV_QPS_ERR};
	struct ibv_wc wc[NMSG];
	struct side s;
	int rfd, wfd, n, got = 0, flushed = 0, i;
	long long until;
	pid_t pid = begin(&s, &rfd, &wfd, "flush");

	ok(!ibv_modify_qp(s.qp, &qa, IBV_QP_STATE), "flush: to ERR");
	until = now_ms() + WAIT_MS;
	while (got < NMSG && now_ms() < until) {
		n = ibv_poll_cq(s.t.cq, NMSG, wc);
		for (i = 0; i < n; i++, got++)
			flushed += wc[i].status == IBV_WC_WR_FLUSH_ERR &&
				   wc[i].wr_id == (uint64_t)got;
	}
	is_int(flushed, NMSG, "flush: every send flushed, in order");
	kill(pid, SIGCONT);
	until = now_ms() + 300;
	n = 0;
	while (now_ms() < until)
		n += ibv_poll_cq(s.t.cq, NMSG, wc) != 0;
	is_int(n, 0, "flush: no completion after the flushes");
	end(pid, &s, rfd, wfd, "flush");
}

int main(void)
{
	t_isolate("ackstop");
	reset_pass();
	flush_pass();
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
