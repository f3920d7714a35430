/* SPDX-License-Identifier: MIT */
/*
 * stream.c -- two processes streaming 8-byte SENDs as perftest's
 * ib_send_bw does (128 in flight, one in 100 signalled; the receiver
 * keeps 512 receives posted and posts each again as its completion is
 * polled, 16 at a time): every message arrives once, in order, and with
 * rnr_retry 0 the sender never meets an RNR NAK (softrdma's receiver
 * once took messages and WQEs a progress pass faster than it polled
 * their completions, and ran out of WQEs).  Then the sender's QP goes to
 * ERR in mid-stream, while the receiver takes the messages in batches
 * acknowledged at once (soft/data.c rx_ack): the messages the sender saw
 * succeed are delivered, in order, none twice, and at most one batch more
 * (the flush missed its ACK, as an HCA's may be lost).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>

#include "../tap.h"
#include "common.h"

#define NMSG	 200000 /* the stream */
#define NERR	 20000	/* the stream the QP's error cuts, at most */
#define WINDOW	 128
#define SIGNAL	 100
#define RXQ	 512
#define LOST_ACK 64 /* soft/data.c RX_BATCH */
#define BATCH	 16
#define WAIT_S	 60

struct side {
	struct tctx t;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint64_t *buf;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* setup -- context, one buffer of RXQ 8-byte cells, a QP connected to the
 * peer's (min_rnr_timer 12, 0.64 ms, as perftest; rnr_retry as given) */
static int setup(struct side *s, int rfd, int wfd, int rnr_retry)
{
	uint32_t me, peer;

	if (t_open(&s->t, 1024))
		return -1;
	s->buf = calloc(RXQ, sizeof(*s->buf));
	if (!s->buf)
		return -1;
	s->mr = ibv_reg_mr(s->t.pd, s->buf, RXQ * sizeof(*s->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	s->qp = t_rc_qp(&s->t, RXQ, NULL);
	if (!s->mr || !s->qp)
		return -1;
	me = s->qp->qp_num;
	t_xsend(wfd, &me, sizeof(me));
	t_xrecv(rfd, &peer, sizeof(peer));
	return t_connect(s->qp, peer, 0, 12, rnr_retry, 14, 7);
}

static void teardown(struct side *s)
{
	ibv_destroy_qp(s->qp);
	ibv_dereg_mr(s->mr);
	t_close(&s->t);
	free(s->buf);
}

/*
 * receiver -- the child: RXQ receives, each posted again once its
 * completion is polled; checks every message is the next number.  Runs
 * until the parent sends the count it should have (or the wait ends),
 * then polls a while longer for anything extra; answers what it got and
 * how many were out of order or failed.
 */
static int receiver(int rfd, int wfd)
{
	struct ibv_wc wc[BATCH];
	struct side s;
	uint64_t got = 0, want = UINT64_MAX, res[2] = {0, 0};
	double end = 0;
	int i, n;

	if (setup(&s, rfd, wfd, 7))
		return 1;
	for (i = 0; i < RXQ; i++)
		if (t_post_recv(s.qp, &s.buf[i], 8, s.mr->lkey, (uint64_t)i))
			return 1;
	t_xsend(wfd, "r", 1);
	/* the parent sends the count when its stream is over */
	while (!end || now_s() < end) {
		n = ibv_poll_cq(s.t.cq, BATCH, wc);
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS ||
			    wc[i].opcode != IBV_WC_RECV ||
			    wc[i].byte_len != 8 || s.buf[wc[i].wr_id] != got)
				res[1]++;
			got++;
			if (t_post_recv(s.qp, &s.buf[wc[i].wr_id], 8,
					s.mr->lkey, wc[i].wr_id))
				res[1]++;
		}
		if (want == UINT64_MAX && n <= 0) {
			struct timespec z = {0, 0};
			fd_set f;

			FD_ZERO(&f);
			FD_SET(rfd, &f);
			if (pselect(rfd + 1, &f, NULL, NULL, &z, NULL) > 0) {
				t_xrecv(rfd, &want, sizeof(want));
				end = now_s() + WAIT_S;
			}
		}
		if (end && got >= want && end > now_s() + 0.2)
			end = now_s() + 0.2; /* anything extra comes now */
	}
	res[0] = got;
	t_xsend(wfd, res, sizeof(res));
	t_xrecv(rfd, &i, 1);
	teardown(&s);
	return 0;
}

/* stream -- send n numbered messages (n <= NMSG), at most WINDOW in
 * flight, one in SIGNAL signalled, the last too; with cut, the QP goes
 * to ERR after cut messages are posted.  Returns the messages the sender
 * saw succeed (all signalled after the cut, so each is counted), or -1
 * on an unexpected completion. */
static long stream(struct side *s, long n, long cut, int *rnr)
{
	struct ibv_qp_attr qa = {.qp_state = IBV_QPS_ERR};
	struct ibv_wc wc[BATCH];
	long posted = 0, done = 0, ok_to = 0;
	double end = now_s() + WAIT_S;
	int i, k, sig;

	while (done < posted || posted < n) {
		while (posted < n && posted - done < WINDOW) {
			s->buf[posted % RXQ] = (uint64_t)posted;
			sig = cut || (posted + 1) % SIGNAL == 0 ||
			      posted + 1 == n;
			if (t_post(s->qp, IBV_WR_SEND, &s->buf[posted % RXQ], 8,
				   s->mr->lkey, (uint64_t)posted,
				   (sig ? IBV_SEND_SIGNALED : 0) |
					   IBV_SEND_INLINE,
				   0, 0))
				return -1;
			posted++;
			if (cut && posted == cut) {
				ibv_modify_qp(s->qp, &qa, IBV_QP_STATE);
				n = posted;
			}
		}
		k = ibv_poll_cq(s->t.cq, BATCH, wc);
		for (i = 0; i < k; i++) {
			if (wc[i].status == IBV_WC_RNR_RETRY_EXC_ERR)
				(*rnr)++;
			if (wc[i].status == IBV_WC_SUCCESS) {
				if ((long)wc[i].wr_id != ok_to && cut)
					return -1; /* a hole in the prefix */
				ok_to = (long)wc[i].wr_id + 1;
			} else if (!cut) {
				return -1;
			}
			done = cut ? done + 1 : (long)wc[i].wr_id + 1;
		}
		if (now_s() > end)
			return -1;
	}
	return ok_to;
}

static void run(long n, long cut, const char *what)
{
	struct side s;
	uint64_t want, res[2];
	long ok_to;
	int rfd, wfd, st, rnr = 0;
	char r;
	pid_t pid;

	pid = t_spawn(receiver, &rfd, &wfd);
	if (pid < 0)
		bail_out("pipe or fork");
	if (setup(&s, rfd, wfd, cut ? 7 : 0))
		bail_out("setup");
	t_xrecv(rfd, &r, 1);
	ok_to = stream(&s, n, cut, &rnr);
	ok(ok_to >= 0, "%s: every send completed as expected", what);
	ok(rnr == 0, "%s: no RNR NAK with rnr_retry 0 (%d)", what, rnr);
	want = ok_to < 0 ? 0 : (uint64_t)ok_to;
	t_xsend(wfd, &want, sizeof(want));
	t_xrecv(rfd, res, sizeof(res));
	/* cut: every success delivered; and at most the batch whose ACK
	 * the flush missed (an HCA's lost ACK, up to RX_BATCH in
	 * soft/data.c) besides */
	ok(res[0] == want ||
		   (cut && res[0] > want && res[0] - want <= LOST_ACK &&
		    res[0] <= (uint64_t)cut),
	   "%s: %llu delivered, as the sender saw succeed (%llu)%s", what,
	   (unsigned long long)res[0], (unsigned long long)want,
	   cut ? ", or a lost ACK's batch more" : "");
	ok(res[1] == 0, "%s: each the next number, once, intact (%llu not)",
	   what, (unsigned long long)res[1]);
	if (cut)
		ok((long)want <= cut, "%s: %llu of %ld posted succeeded", what,
		   (unsigned long long)want, cut);
	t_xsend(wfd, "x", 1);
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: receiver exited 0",
	   what);
	teardown(&s);
	close(wfd);
	close(rfd);
}

int main(void)
{
	const char *vg = getenv("RDMAMSG_TEST_VALGRIND");
	long n = vg && vg[0] == '1' ? NMSG / 20 : NMSG;

	t_isolate("stream");
	run(n, 0, "stream");
	/* the QP errs with a window in flight: at once, early, later */
	run(WINDOW, WINDOW, "cut at 128");
	run(NERR, 1000, "cut at 1000");
	run(NERR, NERR / 2 + 7, "cut at 10007");
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
