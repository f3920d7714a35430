/* SPDX-License-Identifier: MIT */
/* stall.c -- nothing waits on a stopped peer, late events, signals, exit */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <infiniband/sa.h>
#include <poll.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../soft/softrdma.h" /* segment layout: find a BUSY slot */
#include "../tap.h"
#include "common.h"

/* libibverbs' marshall helpers (no public header declares them) */
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst,
				struct ib_uverbs_ah_attr *src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst,
				struct ib_uverbs_qp_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
				 struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
			       struct ibv_sa_path_rec *src);

#define MSG   (16u << 20)
#define NRECV 6
#define DEPTH 8

struct info {
	uint32_t qpn;
};

/* shared between the stopped-responder test's parent and child */
struct shared {
	volatile int stop;
	volatile int received;
	volatile int corrupt;
	volatile int rx_status; /* the receiver's failed completion + 1 */
	volatile int ready;	/* the receiver's receives are posted */
};

static pid_t stalled_child, stopped_holder;
/* the next responder_start child's argument (it has a copy of it) */
static int child_arg;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* on_alarm -- a hang is a failure, not a stuck test run */
static void on_alarm(int sig)
{
	static const char m[] = "not ok - timed out: a verb blocked\n";
	ssize_t r;

	(void)sig;
	r = write(1, m, sizeof(m) - 1);
	(void)r;
	if (stalled_child > 0)
		kill(stalled_child, SIGKILL);
	if (stopped_holder > 0)
		kill(stopped_holder, SIGKILL);
	_exit(1);
}

static void fill(char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (char)(i * 7 + 3);
}

/* sampled -- the pattern at every 512th byte and at the end */
static int sampled(const char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i += 512)
		if (p[i] != (char)(i * 7 + 3))
			return 0;
	return p[n - 1] == (char)((n - 1) * 7 + 3);
}

/* open_side -- context, one MR over buf, an RC QP connected after the
 * QPN exchange over the pipes */
/* side_connect -- tell the other side qp's number, learn its, connect
 * (min_rnr_timer rnr_timer, rnr_retry rnr_retry): 0 or -1 */
static int side_connect(struct ibv_qp *qp, int rfd, int wfd, int rnr_timer,
			int rnr_retry)
{
	struct info me, peer;

	me.qpn = qp->qp_num;
	t_xsend(wfd, &me, sizeof(me));
	t_xrecv(rfd, &peer, sizeof(peer));
	return t_connect(qp, peer.qpn, 0, rnr_timer, rnr_retry, 14, 7);
}

static struct ibv_qp *open_side(struct tctx *t, char *buf, size_t len,
				struct ibv_mr **mr, int rfd, int wfd, int depth)
{
	struct ibv_qp *qp;

	if (t_open(t, 64))
		return NULL;
	*mr = ibv_reg_mr(t->pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
	qp = t_rc_qp(t, depth, NULL);
	if (!*mr || !qp)
		return NULL;
	if (side_connect(qp, rfd, wfd, 1, 7))
		return NULL;
	return qp;
}

/* stalled_responder -- receive big messages until told to stop; any
 * successful receive must carry the sender's pattern */
static int stalled_responder(struct shared *sh, int rfd, int wfd)
{
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	char *buf = malloc((size_t)NRECV * MSG);
	int i;

	if (!buf)
		return 1;
	qp = open_side(&t, buf, (size_t)NRECV * MSG, &mr, rfd, wfd, DEPTH);
	if (!qp)
		return 1;
	for (i = 0; i < NRECV; i++)
		t_post_recv(qp, buf + (size_t)i * MSG, MSG, mr->lkey,
			    (uint64_t)i);
	while (!sh->stop) {
		if (ibv_poll_cq(t.cq, 1, &wc) != 1)
			continue;
		if (wc.status != IBV_WC_SUCCESS) {
			sh->rx_status = (int)wc.status + 1;
			break;
		}
		sh->received++;
		if (wc.byte_len != MSG || !sampled(buf + wc.wr_id * MSG, MSG))
			sh->corrupt++;
		t_post_recv(qp, buf + wc.wr_id * MSG, MSG, mr->lkey, wc.wr_id);
	}
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(buf);
	return 0;
}

/* slot_kinds -- which slot states our QP's segment holds, one bit per
 * kind (1 << SOFT_SLOT_BUSY: the receiver copies from our buffer) */
static unsigned slot_kinds(struct ibv_qp *qp)
{
	const struct soft_qp *sq = to_sqp(qp);
	unsigned kinds = 0;
	uint32_t i;

	for (i = 0; i < sq->sq_size; i++)
		kinds |= 1u << (atomic_load(&sq->slots[i].state) & 0x1f);
	return kinds;
}

/*
 * test_stopped_responder -- SIGSTOP the receiver while it copies 16 MiB
 * sends; the sender moves its QP to ERR and poll_cq returns every flush
 * at once; the receiver, continued after the sender reused its buffer,
 * delivers no message read from the reused buffer
 */
static void test_stopped_responder(void)
{
	int p2c[2], c2p[2], st = 0, out = 0, n, i, done = 0, errs = 0;
	int err_status = 0, caught, hooked = 0;
	char stop_file[64];
	unsigned kinds = 0;
	struct shared *sh;
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_wc wc[DEPTH];
	char *buf = malloc(MSG);
	double t0, t1;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!buf || sh == MAP_FAILED || pipe(p2c) || pipe(c2p))
		bail_out("setup");
	memset(sh, 0, sizeof(*sh));
	fill(buf, MSG);
	snprintf(stop_file, sizeof(stop_file), "/tmp/rdmamsg-stall-%d",
		 (int)getpid());
	unlink(stop_file);
	stalled_child = fork();
	if (!stalled_child) {
		close(p2c[1]);
		close(c2p[0]);
		free(buf); /* the sender's; the child has its own */
		setenv("SOFTRDMA_TEST_STOP_BUSY", stop_file, 1);
		_exit(stalled_responder(sh, p2c[0], c2p[1]));
	}
	close(p2c[0]);
	close(c2p[1]);
	qp = open_side(&t, buf, MSG, &mr, c2p[0], p2c[1], DEPTH);
	ok(qp != NULL, "sender connected");
	if (!qp)
		bail_out("setup");
	/* traffic until the receiver took a few messages */
	t0 = now_ms();
	while (sh->received < 4 && now_ms() - t0 < 20000) {
		while (out < DEPTH &&
		       !t_post(qp, IBV_WR_SEND, buf, MSG, mr->lkey, 1,
			       IBV_SEND_SIGNALED, 0, 0))
			out++;
		n = ibv_poll_cq(t.cq, DEPTH, wc);
		for (i = 0; i < n; i++)
			if (wc[i].status == IBV_WC_SUCCESS)
				out--;
	}
	ok(sh->received >= 4, "messages flow (%d received)", sh->received);
	/* stop the receiver in the copy (retry until it is caught there: on a
	 * loaded machine it may take many tries, each a few ms).  No poll while
	 * a message of ours waits untouched (READY): a poll that finds one
	 * waiting a liveness period serves the receiver as its HCA would
	 * (process_vm_writev from here), and a receiver short of CPU would
	 * then never copy by itself.  Unless the receiver answered RNR (it
	 * has fewer receives than we have sends): only our poll retransmits,
	 * and the RNR message is the oldest, the one a poll would serve */
	t0 = now_ms();
	for (i = 0; now_ms() - t0 < 30000; i++) {
		/* after 5 s of random stops, the receiver stops itself
		 * once it has pulled a message, before committing it
		 * (SOFTRDMA_TEST_STOP_BUSY, set in the child): a loaded
		 * machine missed the moment for 30 s at times */
		if (!hooked && now_ms() - t0 > 5000) {
			FILE *f = fopen(stop_file, "w");

			hooked = f != NULL;
			if (f)
				fclose(f);
		}
		if (!hooked) {
			kill(stalled_child, SIGSTOP);
			waitpid(stalled_child, &st, WUNTRACED);
		} else if (waitpid(stalled_child, &st, WUNTRACED | WNOHANG) !=
				   stalled_child ||
			   !WIFSTOPPED(st)) {
			st = 0;
			goto more;
		}
		kinds = slot_kinds(qp);
		if (kinds & (1u << SOFT_SLOT_BUSY | 1u << SOFT_SLOT_XFER))
			break;
		kill(stalled_child, SIGCONT);
	more:
		kinds = slot_kinds(qp);
		n = (kinds & (1u << SOFT_SLOT_READY | 1u << SOFT_SLOT_RNR)) ==
				    1u << SOFT_SLOT_READY
			    ? 0
			    : ibv_poll_cq(t.cq, DEPTH, wc);
		for (st = 0; st < n; st++) {
			if (wc[st].status == IBV_WC_SUCCESS) {
				out--;
			} else {
				errs++;
				err_status = (int)wc[st].status;
			}
		}
		while (out < DEPTH &&
		       !t_post(qp, IBV_WR_SEND, buf, MSG, mr->lkey, 1,
			       IBV_SEND_SIGNALED, 0, 0))
			out++;
		usleep(1000 + (useconds_t)(rand() % 3000));
	}
	caught = !!(kinds & (1u << SOFT_SLOT_BUSY | 1u << SOFT_SLOT_XFER));
	ok(caught, "receiver stopped while copying from our buffer (try %d%s)",
	   i + 1, hooked ? ", stopped by itself once it had pulled one" : "");
	unlink(stop_file);
	if (!caught)
		diag("sender: %d failed completions (last %s), %d in flight; "
		     "receiver: %d received, failed completion %s; slot "
		     "kinds 0x%x",
		     errs, errs ? ibv_wc_status_str(err_status) : "-", out,
		     sh->received,
		     sh->rx_status ? ibv_wc_status_str(sh->rx_status - 1)
				   : "none",
		     kinds);
	ok(!t_qp_err(qp), "sender QP to ERR");
	alarm(20);
	t0 = now_ms();
	while (done < out && now_ms() - t0 < 5000) {
		n = ibv_poll_cq(t.cq, DEPTH, wc);
		for (i = 0; i < n; i++)
			done++;
	}
	t1 = now_ms() - t0;
	alarm(0);
	is_int(done, out, "every outstanding send completed");
	/* the receiver stays stopped until this check: waiting for it would
	 * last until the alarm */
	ok(t1 < 10000, "flush did not wait for the stopped receiver (%.1f ms)",
	   t1);
	/* the buffers are ours again: reuse them, then let the peer go on */
	memset(buf, 0xee, MSG);
	kill(stalled_child, SIGCONT);
	usleep(300000);
	sh->stop = 1;
	alarm(20);
	waitpid(stalled_child, &st, 0);
	alarm(0);
	stalled_child = 0;
	ok(WIFEXITED(st) && !WEXITSTATUS(st), "receiver exits cleanly");
	is_int(sh->corrupt, 0, "no message delivered from the reused buffer");
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	close(p2c[1]);
	close(c2p[0]);
	munmap(sh, sizeof(*sh));
	free(buf);
}

#define SRV_MSG	  512
#define SRV_RECV  32
#define SRV_WAVES 3

/* served_responder -- SRV_RECV receives, reposted as they complete; each
 * message must carry its number (in order) and the pattern after it */
static int served_responder(struct shared *sh, int rfd, int wfd)
{
	static char buf[SRV_RECV * SRV_MSG];
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	uint32_t no;
	char *m;
	int i;

	qp = open_side(&t, buf, sizeof(buf), &mr, rfd, wfd, SRV_RECV);
	if (!qp)
		return 1;
	for (i = 0; i < SRV_RECV; i++)
		t_post_recv(qp, buf + i * SRV_MSG, SRV_MSG, mr->lkey,
			    (uint64_t)i);
	sh->ready = 1;
	while (!sh->stop) {
		if (ibv_poll_cq(t.cq, 1, &wc) != 1)
			continue;
		if (wc.status != IBV_WC_SUCCESS) {
			sh->rx_status = (int)wc.status + 1;
			break;
		}
		m = buf + wc.wr_id * SRV_MSG;
		memcpy(&no, m, sizeof(no));
		if (wc.byte_len != SRV_MSG || no != (uint32_t)sh->received ||
		    !sampled(m + 64, SRV_MSG - 64))
			sh->corrupt++;
		sh->received++;
		t_post_recv(qp, m, SRV_MSG, mr->lkey, wc.wr_id);
	}
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	return 0;
}

/* responder_start -- a responder process running FN, connected to our
 * QP *QP of DEPTH on T over BUF (LEN bytes, its MR *MR): the page we
 * share with it, once it is ready (alarm(60) set) */
static struct shared *responder_start(int (*fn)(struct shared *, int, int),
				      struct tctx *t, char *buf, size_t len,
				      struct ibv_mr **mr, int depth,
				      struct ibv_qp **qp)
{
	struct shared *sh;
	int p2c[2], c2p[2];

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED || pipe(p2c) || pipe(c2p))
		bail_out("setup");
	memset(sh, 0, sizeof(*sh));
	stalled_child = fork();
	if (!stalled_child) {
		close(p2c[1]);
		close(c2p[0]);
		_exit(fn(sh, p2c[0], c2p[1]));
	}
	close(p2c[0]);
	close(c2p[1]);
	*qp = open_side(t, buf, len, mr, c2p[0], p2c[1], depth);
	if (!*qp)
		bail_out("setup");
	close(c2p[0]);
	close(p2c[1]);
	alarm(60);
	while (!sh->ready)
		usleep(1000);
	return sh;
}

/* wait_received -- until the responder counted n (10 s at most), without
 * polling: no completion of ours makes us serve it */
static int wait_received(struct shared *sh, int n)
{
	double t0 = now_ms();

	while (sh->received < n && now_ms() - t0 < 10000)
		usleep(1000);
	return sh->received;
}

/*
 * test_served_while_stopped -- the responder is stopped while we send
 * two send queues' worth: each message is served by us as its HCA would
 * (serve_remote), and our slots are reused for the second.  Continued, it
 * must take what we send next by itself, though the slots it had not
 * walked hold later messages (it used to wait for its first message's
 * number there forever, served again only by our polls, one a liveness
 * period)
 */
static void test_served_while_stopped(void)
{
	static char buf[DEPTH * SRV_MSG];
	struct shared *sh;
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_wc wc[DEPTH];
	int st = 0, i, w, n, good = 1;
	uint32_t no = 0;

	for (i = 0; i < DEPTH; i++)
		fill(buf + i * SRV_MSG + 64, SRV_MSG - 64);
	sh = responder_start(served_responder, &t, buf, sizeof(buf), &mr, DEPTH,
			     &qp);
	kill(stalled_child, SIGSTOP);
	waitpid(stalled_child, &st, WUNTRACED);
	for (w = 0; w < SRV_WAVES; w++) {
		if (w == SRV_WAVES - 1) {
			/* the last wave: the responder runs, we do not poll */
			kill(stalled_child, SIGCONT);
			n = wait_received(sh, w * DEPTH);
			ok(n == w * DEPTH,
			   "continued, the responder takes the %d completions "
			   "made for it (%d)",
			   w * DEPTH, n);
		}
		for (i = 0; i < DEPTH; i++, no++) {
			memcpy(buf + i * SRV_MSG, &no, sizeof(no));
			if (t_post(qp, IBV_WR_SEND, buf + i * SRV_MSG, SRV_MSG,
				   mr->lkey, no, IBV_SEND_SIGNALED, 0, 0))
				bail_out("post");
		}
		if (w == SRV_WAVES - 1) {
			n = wait_received(sh, (w + 1) * DEPTH);
			ok(n == (w + 1) * DEPTH,
			   "then it takes our next %d SENDs by itself, though "
			   "our slots were reused while it was stopped (%d)",
			   DEPTH, n);
		}
		n = t_wait(t.cq, wc, DEPTH, 10000);
		for (i = 0; i < n; i++)
			good &= wc[i].status == IBV_WC_SUCCESS;
		good &= n == DEPTH;
		if (w < SRV_WAVES - 1)
			good &= sh->received == 0; /* served, not taken */
	}
	ok(good,
	   "every SEND completed, the first %d served while the "
	   "responder was stopped",
	   (SRV_WAVES - 1) * DEPTH);
	is_int(sh->corrupt, 0, "each message intact and in order");
	is_int(sh->rx_status, 0, "no failed receive");
	sh->stop = 1;
	waitpid(stalled_child, &st, 0);
	alarm(0);
	stalled_child = 0;
	ok(WIFEXITED(st) && !WEXITSTATUS(st), "responder exits cleanly");
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	munmap(sh, sizeof(*sh));
}

/* the SRQ-limit test: receives posted, the limit armed, messages sent */
#define LIM_POSTED 8
#define LIM_LIMIT  4
#define LIM_SENT   5 /* leaves 3 posted: below the limit */

/* limit_responder -- an RC QP on an SRQ whose limit is armed; it neither
 * polls nor arms a CQ, it waits only in ibv_get_async_event (10 s at
 * most): sh->rx_status the event's type + 1; then its CQ's completions,
 * each checked, in sh->received and sh->corrupt */
static int limit_responder(struct shared *sh, int rfd, int wfd)
{
	static char buf[LIM_POSTED * SRV_MSG];
	struct ibv_srq_attr la;
	struct ibv_async_event ev;
	struct ibv_srq *srq;
	struct ibv_wc wc;
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	uint32_t no;

	if (t_open(&t, 64))
		return 1;
	mr = ibv_reg_mr(t.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	srq = mr ? t_srq_filled(&t, 16, buf, SRV_MSG, LIM_POSTED, mr->lkey,
				LIM_LIMIT)
		 : NULL;
	qp = srq ? t_rc_qp(&t, 8, srq) : NULL;
	if (!qp)
		return 1;
	if (side_connect(qp, rfd, wfd, 1, 7))
		return 1;
	sh->ready = 1;
	sh->rx_status = t_async(t.ctx, 10000, &ev) + 1;
	if (sh->rx_status && (ev.event_type != IBV_EVENT_SRQ_LIMIT_REACHED ||
			      ev.element.srq != srq))
		sh->corrupt++;
	while (ibv_poll_cq(t.cq, 1, &wc) == 1) {
		memcpy(&no, buf + wc.wr_id * SRV_MSG, sizeof(no));
		if (wc.status != IBV_WC_SUCCESS || wc.byte_len != SRV_MSG ||
		    no != (uint32_t)sh->received || wc.wr_id != no ||
		    !sampled(buf + wc.wr_id * SRV_MSG + 64, SRV_MSG - 64))
			sh->corrupt++;
		sh->received++;
	}
	if (ibv_query_srq(srq, &la) || la.srq_limit != 0)
		sh->corrupt++; /* the event disarms the limit */
	ibv_destroy_qp(qp);
	ibv_destroy_srq(srq);
	ibv_dereg_mr(mr);
	t_close(&t);
	return 0;
}

/*
 * test_srq_limit_asleep -- a process whose SRQ falls below its armed
 * limit gets IBV_EVENT_SRQ_LIMIT_REACHED though it only waits for async
 * events (no poll, no CQ armed): its HCA raises the event as it takes the
 * WQE, here the initiator that serves it (it used to come only with the
 * process's next poll, so never)
 */
static void test_srq_limit_asleep(void)
{
	static char buf[LIM_SENT * SRV_MSG];
	struct shared *sh;
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_wc wc[LIM_SENT];
	int st = 0, i, n, good = 1;
	uint32_t no;

	sh = responder_start(limit_responder, &t, buf, sizeof(buf), &mr,
			     LIM_SENT, &qp);
	for (i = 0; i < LIM_SENT; i++) {
		no = (uint32_t)i;
		fill(buf + i * SRV_MSG + 64, SRV_MSG - 64);
		memcpy(buf + i * SRV_MSG, &no, sizeof(no));
		if (t_post(qp, IBV_WR_SEND, buf + i * SRV_MSG, SRV_MSG,
			   mr->lkey, no, IBV_SEND_SIGNALED, 0, 0))
			bail_out("post");
	}
	n = t_wait(t.cq, wc, LIM_SENT, 10000);
	for (i = 0; i < n; i++)
		good &= wc[i].status == IBV_WC_SUCCESS;
	ok(good && n == LIM_SENT,
	   "%d SENDs to a process that does not poll complete (%d)", LIM_SENT,
	   n);
	waitpid(stalled_child, &st, 0);
	alarm(0);
	stalled_child = 0;
	ok(sh->rx_status - 1 == IBV_EVENT_SRQ_LIMIT_REACHED,
	   "%d of %d posted receives taken, limit %d: SRQ_LIMIT_REACHED "
	   "reaches a process waiting only for async events (event %d)",
	   LIM_SENT, LIM_POSTED, LIM_LIMIT, sh->rx_status - 1);
	ok(sh->received == LIM_SENT, "its CQ then holds the %d messages (%d)",
	   LIM_SENT, sh->received);
	is_int(sh->corrupt, 0,
	       "each intact and in order, the event names the SRQ, the "
	       "limit disarmed");
	ok(WIFEXITED(st) && !WEXITSTATUS(st), "responder exits cleanly");
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	munmap(sh, sizeof(*sh));
}

/* late_responder -- an RC QP, on an empty SRQ when child_arg,
 * min_rnr_timer 31 (491 ms); once the parent has sent (sh->stop) it posts
 * one receive, without a poll, and stops itself; continued, it takes the
 * message (10 s at most): sh->received 1 if whole */
static int late_responder(struct shared *sh, int rfd, int wfd)
{
	int use_srq = child_arg;
	static char buf[SRV_MSG];
	struct ibv_srq *srq = NULL;
	struct ibv_wc wc;
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp = NULL;
	int i;

	if (t_open(&t, 64))
		return 1;
	mr = ibv_reg_mr(t.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (mr && use_srq)
		srq = t_srq_filled(&t, 16, buf, SRV_MSG, 0, mr->lkey, 0);
	if (mr && (srq || !use_srq))
		qp = t_rc_qp(&t, 8, srq);
	if (!qp)
		return 1;
	if (side_connect(qp, rfd, wfd, 31, 7))
		return 1;
	sh->ready = 1;
	for (i = 0; !sh->stop && i < 10000; i++)
		usleep(1000);
	if (srq ? t_post_srq_recv(srq, buf, SRV_MSG, mr->lkey, 9)
		: t_post_recv(qp, buf, SRV_MSG, mr->lkey, 9))
		return 1;
	raise(SIGSTOP);
	if (t_wait(t.cq, &wc, 1, 10000) == 1 && wc.status == IBV_WC_SUCCESS &&
	    wc.wr_id == 9 && wc.byte_len == SRV_MSG && sampled(buf, SRV_MSG))
		sh->received = 1;
	ibv_destroy_qp(qp);
	if (srq)
		ibv_destroy_srq(srq);
	ibv_dereg_mr(mr);
	t_close(&t);
	return 0;
}

/*
 * test_late_stopped -- a SEND comes to a process with no receive posted
 * (on an SRQ, or its QP's own queue); it then posts one and stops.  Its
 * HCA NAKed the SEND (RNR) when it came: serving it, we must not give it
 * that receive before the responder's 491 ms RNR timer has passed (it
 * used to take it at once)
 */
static void test_late_stopped(int use_srq)
{
	static char buf[SRV_MSG];
	const char *what = use_srq ? "SRQ" : "receive queue";
	struct shared *sh;
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	int st = 0, n;
	double t0, dt;

	fill(buf, SRV_MSG);
	child_arg = use_srq;
	sh = responder_start(late_responder, &t, buf, sizeof(buf), &mr, 4, &qp);
	t0 = now_ms();
	if (t_post(qp, IBV_WR_SEND, buf, SRV_MSG, mr->lkey, 1,
		   IBV_SEND_SIGNALED, 0, 0))
		bail_out("post");
	sh->stop = 1;
	waitpid(stalled_child, &st, WUNTRACED);
	n = t_wait(t.cq, &wc, 1, 10000);
	dt = now_ms() - t0;
	ok(n == 1 && wc.status == IBV_WC_SUCCESS,
	   "a SEND to a stopped process's %s is served (%d)", what, n);
	ok(dt >= 491,
	   "%s: after the RNR timer, the receive was posted after it came "
	   "(%.1f ms)",
	   what, dt);
	kill(stalled_child, SIGCONT);
	waitpid(stalled_child, &st, 0);
	alarm(0);
	stalled_child = 0;
	ok(WIFEXITED(st) && !WEXITSTATUS(st) && sh->received == 1,
	   "%s: continued, the responder has it whole (%d, %d)", what, st,
	   sh->received);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	munmap(sh, sizeof(*sh));
}

/* stopped_sender -- an RC QP with rnr_retry child_arg: one SEND of SRV_MSG
 * bytes (the pattern), then it stops itself (sh->ready 2); continued,
 * sh->rx_status its completion's status + 1 */
static int stopped_sender(struct shared *sh, int rfd, int wfd)
{
	int retry = child_arg;
	static char buf[SRV_MSG];
	struct ibv_wc wc;
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;

	fill(buf, SRV_MSG);
	if (t_open(&t, 64))
		return 1;
	mr = ibv_reg_mr(t.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	qp = mr ? t_rc_qp(&t, 8, NULL) : NULL;
	if (!qp)
		return 1;
	if (side_connect(qp, rfd, wfd, 1, retry))
		return 1;
	sh->ready = 1;
	if (t_post(qp, IBV_WR_SEND, buf, SRV_MSG, mr->lkey, 1,
		   IBV_SEND_SIGNALED, 0, 0))
		return 1;
	sh->ready = 2;
	raise(SIGSTOP);
	if (t_wait(t.cq, &wc, 1, 10000) == 1)
		sh->rx_status = (int)wc.status + 1;
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	return 0;
}

/*
 * test_stopped_sender -- a SEND comes with no receive posted (RNR NAK,
 * our 0.01 ms timer) and its sender's process stops.  Its HCA would
 * send it again after the timer, while retries are left: with
 * rnr_retry 7 the receive we post then takes it (it used to wait for the
 * sender to run again); with rnr_retry 0 nothing comes, and the sender,
 * continued, has IBV_WC_RNR_RETRY_EXC_ERR
 */
static void test_stopped_sender(int retry)
{
	static char buf[SRV_MSG];
	struct shared *sh;
	struct tctx t;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	int st = 0, n;

	child_arg = retry;
	sh = responder_start(stopped_sender, &t, buf, sizeof(buf), &mr, 4, &qp);
	while (sh->ready != 2)
		usleep(1000);
	waitpid(stalled_child, &st, WUNTRACED);
	n = t_wait(t.cq, &wc, 1, 20);
	ok(n == 0, "rnr_retry %d: no receive posted, nothing comes (%d)", retry,
	   n);
	if (t_post_recv(qp, buf, SRV_MSG, mr->lkey, 3))
		bail_out("post_recv");
	n = t_wait(t.cq, &wc, 1, retry ? 5000 : 300);
	if (retry)
		ok(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 3 &&
			   wc.byte_len == SRV_MSG && sampled(buf, SRV_MSG),
		   "rnr_retry 7: with its sender stopped, the SEND comes "
		   "once a receive is posted, whole (%d)",
		   n);
	else
		is_int(n, 0,
		       "rnr_retry 0: with its sender stopped, nothing comes");
	kill(stalled_child, SIGCONT);
	waitpid(stalled_child, &st, 0);
	alarm(0);
	stalled_child = 0;
	ok(WIFEXITED(st) && !WEXITSTATUS(st) &&
		   sh->rx_status - 1 ==
			   (retry ? IBV_WC_SUCCESS : IBV_WC_RNR_RETRY_EXC_ERR),
	   "rnr_retry %d: continued, the sender's SEND completes with %s "
	   "(%d, %d)",
	   retry, retry ? "success" : "RNR_RETRY_EXC_ERR", st,
	   sh->rx_status - 1);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	t_close(&t);
	munmap(sh, sizeof(*sh));
}

/* test_thread_signals -- the progress thread takes none of our signals */
static void test_thread_signals(void)
{
	unsigned long long mask, all;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct tctx t;
	char path[300], line[128];
	struct dirent *d;
	DIR *dir;
	FILE *f;
	int found = 0, threads = 0;

	ok(t_open(&t, 16) == 0, "open");
	ch = ibv_create_comp_channel(t.ctx);
	cq = ch ? ibv_create_cq(t.ctx, 16, NULL, ch, 0) : NULL;
	ok(cq && !ibv_req_notify_cq(cq, 0), "armed CQ (starts the thread)");
	usleep(50000); /* a thread starts with all signals blocked */
	/* signals 1..31 but SIGKILL (9) and SIGSTOP (19) */
	all = 0x7fffffffULL & ~(1ULL << 8) & ~(1ULL << 18);
	dir = opendir("/proc/self/task");
	while (dir && (d = readdir(dir))) {
		if (d->d_name[0] == '.' || atoi(d->d_name) == getpid())
			continue;
		threads++;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status",
			 d->d_name);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "SigBlk: %llx", &mask) == 1) {
				diag("thread %s SigBlk %llx", d->d_name, mask);
				found += (mask & all) == all;
			}
		if (f)
			fclose(f);
	}
	if (dir)
		closedir(dir);
	ok(threads >= 1, "a progress thread runs");
	if (getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "vgpreload"))
		ok(1, "# SKIP valgrind shows its own signal masks");
	else
		is_int(found, threads,
		       "every library thread blocks all signals");
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(ch);
	t_close(&t);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* wait_event -- one channel event within ms; the CQ is re-armed */
static int wait_event(struct ibv_comp_channel *ch, int ms)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct ibv_cq *cq;
	void *cq_ctx;

	if (poll(&p, 1, ms) != 1 || ibv_get_cq_event(ch, &cq, &cq_ctx))
		return -1;
	ibv_ack_cq_events(cq, 1);
	return 0;
}

/*
 * event_loop -- qperf's blocking loop: arm, post one signalled op, wait
 * for the channel event, poll; returns the median ms per op (or -1)
 */
static double event_loop(struct ibv_qp *qp, struct ibv_cq *cq,
			 struct ibv_comp_channel *ch, enum ibv_wr_opcode op,
			 char *buf, struct ibv_mr *mr, int iters)
{
	double *lat = calloc((size_t)iters, sizeof(*lat)), t0, med, start;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge = {(uintptr_t)buf, 64, mr->lkey};
	struct ibv_wc wc;
	int i, n = 0;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		sge.length = 8;
		wr.wr.atomic.remote_addr = (uintptr_t)buf + 4096;
		wr.wr.atomic.rkey = mr->rkey;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = (uintptr_t)buf + 4096;
		wr.wr.rdma.rkey = mr->rkey;
	}
	start = now_ms();
	for (i = 0; i < iters && now_ms() - start < 3000; i++) {
		/* armed, and the progress thread's sweep is over */
		if (ibv_req_notify_cq(cq, 0))
			break;
		usleep(500);
		t0 = now_ms();
		if (ibv_post_send(qp, &wr, &bad) || wait_event(ch, 1000) ||
		    ibv_poll_cq(cq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
			break;
		lat[n++] = now_ms() - t0;
	}
	if (n < iters) {
		diag("%d of %d ops done in %.0f ms", n, iters,
		     now_ms() - start);
		free(lat);
		return -1;
	}
	qsort(lat, (size_t)n, sizeof(*lat), cmp_double);
	med = lat[n / 2];
	free(lat);
	return med;
}

/*
 * test_event_latency -- completions made at post time (one-sided ops,
 * flushes) signal an armed CQ's channel at once, as any completion does
 */
static void test_event_latency(void)
{
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq, *cq2;
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qa, *qb;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct tctx t;
	char *buf = calloc(1, 8192);
	double med, t0;
	int r;

	ok(t_open(&t, 16) == 0, "open");
	ch = ibv_create_comp_channel(t.ctx);
	cq = ch ? ibv_create_cq(t.ctx, 64, NULL, ch, 0) : NULL;
	cq2 = ibv_create_cq(t.ctx, 64, NULL, NULL, 0);
	mr = ibv_reg_mr(t.pd, buf, 8192,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	qa = ibv_create_qp(t.pd, &ia);
	ia.send_cq = cq2;
	ia.recv_cq = cq2;
	qb = ibv_create_qp(t.pd, &ia);
	ok(cq && cq2 && mr && qa && qb, "channel, CQs, MR, two QPs");
	if (!cq || !cq2 || !mr || !qa || !qb)
		bail_out("setup");
	t_connect(qa, qb->qp_num, 0, 1, 7, 14, 7);
	t_connect(qb, qa->qp_num,
		  IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			  IBV_ACCESS_REMOTE_ATOMIC,
		  1, 7, 14, 7);
	med = event_loop(qa, cq, ch, IBV_WR_RDMA_READ, buf, mr, 200);
	ok(med >= 0 && med < 5, "RDMA READ event, median %.3f ms", med);
	med = event_loop(qa, cq, ch, IBV_WR_RDMA_WRITE, buf, mr, 200);
	ok(med >= 0 && med < 5, "RDMA WRITE event, median %.3f ms", med);
	med = event_loop(qa, cq, ch, IBV_WR_ATOMIC_FETCH_AND_ADD, buf, mr, 50);
	ok(med >= 0 && med < 5, "FETCH_AND_ADD event, median %.3f ms", med);
	/* a local error found at post time */
	ibv_req_notify_cq(cq, 0);
	t0 = now_ms();
	t_post(qa, IBV_WR_RDMA_WRITE, buf, 64, mr->lkey + 1, 9,
	       IBV_SEND_SIGNALED, (uintptr_t)buf + 4096, mr->rkey);
	r = wait_event(ch, 50);
	ok(!r, "local protection error event (%.1f ms)", now_ms() - t0);
	ok(ibv_poll_cq(cq, 1, &wc) == 1 && wc.status == IBV_WC_LOC_PROT_ERR,
	   "LOC_PROT_ERR");
	/* flushes: a receive WQE when the QP goes to ERR, a send after */
	t_qp_err(qa);
	ibv_poll_cq(cq, 1, &wc);
	ibv_req_notify_cq(cq, 0);
	t0 = now_ms();
	t_post_recv(qa, buf, 64, mr->lkey, 10);
	r = wait_event(ch, 50);
	ok(!r, "flushed receive event (%.1f ms)", now_ms() - t0);
	ok(ibv_poll_cq(cq, 1, &wc) == 1 && wc.status == IBV_WC_WR_FLUSH_ERR &&
		   wc.wr_id == 10,
	   "receive flushed");
	ibv_req_notify_cq(cq, 0);
	t0 = now_ms();
	t_post(qa, IBV_WR_SEND, buf, 8, mr->lkey, 11, IBV_SEND_SIGNALED, 0, 0);
	r = wait_event(ch, 50);
	ok(!r, "flushed send event (%.1f ms)", now_ms() - t0);
	ok(ibv_poll_cq(cq, 1, &wc) == 1 && wc.status == IBV_WC_WR_FLUSH_ERR &&
		   wc.wr_id == 11,
	   "send flushed");
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_destroy_cq(cq2);
	ibv_destroy_comp_channel(ch);
	t_close(&t);
	free(buf);
}

/* test_kern_copy -- libibverbs' kernel-ABI struct converters */
static void test_kern_copy(void)
{
	struct ib_uverbs_qp_attr k;
	struct ibv_qp_attr q;
	struct ib_user_path_rec kp, kp2;
	struct ibv_sa_path_rec p;

	memset(&k, 0, sizeof(k));
	memset(&q, 0, sizeof(q));
	k.qp_state = IBV_QPS_RTS;
	k.cur_qp_state = IBV_QPS_RTR;
	k.path_mtu = IBV_MTU_1024;
	k.qkey = 0x11111111;
	k.rq_psn = 7;
	k.sq_psn = 8;
	k.dest_qp_num = 0x1234;
	k.qp_access_flags = IBV_ACCESS_REMOTE_READ;
	k.ah_attr.grh.dgid[15] = 9;
	k.ah_attr.grh.flow_label = 0x12345;
	k.ah_attr.grh.sgid_index = 3;
	k.ah_attr.grh.hop_limit = 64;
	k.ah_attr.dlid = 0x22;
	k.ah_attr.is_global = 1;
	k.ah_attr.port_num = 1;
	k.alt_ah_attr.sl = 5;
	k.max_send_wr = 100;
	k.max_inline_data = 64;
	k.pkey_index = 2;
	k.max_dest_rd_atomic = 4;
	k.min_rnr_timer = 12;
	k.timeout = 14;
	k.retry_cnt = 7;
	k.rnr_retry = 6;
	q.qp_state = IBV_QPS_INIT;
	ibv_copy_qp_attr_from_kern(&q, &k);
	ok(q.qp_state == IBV_QPS_INIT && q.cur_qp_state == IBV_QPS_RTR &&
		   q.path_mtu == IBV_MTU_1024 && q.qkey == 0x11111111 &&
		   q.rq_psn == 7 && q.sq_psn == 8 && q.dest_qp_num == 0x1234 &&
		   q.qp_access_flags == IBV_ACCESS_REMOTE_READ &&
		   q.cap.max_send_wr == 100 && q.cap.max_inline_data == 64 &&
		   q.pkey_index == 2 && q.max_dest_rd_atomic == 4 &&
		   q.min_rnr_timer == 12 && q.timeout == 14 &&
		   q.retry_cnt == 7 && q.rnr_retry == 6,
	   "qp_attr from kern (qp_state is the caller's)");
	ok(q.ah_attr.grh.dgid.raw[15] == 9 &&
		   q.ah_attr.grh.flow_label == 0x12345 &&
		   q.ah_attr.grh.sgid_index == 3 &&
		   q.ah_attr.grh.hop_limit == 64 && q.ah_attr.dlid == 0x22 &&
		   q.ah_attr.is_global == 1 && q.ah_attr.port_num == 1 &&
		   q.alt_ah_attr.sl == 5,
	   "ah_attr from kern");
	memset(&kp, 0, sizeof(kp));
	kp.dgid[0] = 0xfe;
	kp.sgid[15] = 1;
	kp.dlid = htobe16(3);
	kp.flow_label = htobe32(5);
	kp.reversible = 1;
	kp.mtu = IBV_MTU_4096;
	kp.pkey = 0xffff;
	kp.hop_limit = 2;
	kp.traffic_class = 3;
	kp.numb_path = 1;
	kp.sl = 4;
	kp.rate = 7;
	kp.packet_life_time = 18;
	kp.preference = 1;
	memset(&p, 0, sizeof(p));
	ibv_copy_path_rec_from_kern(&p, &kp);
	ok(p.dgid.raw[0] == 0xfe && p.sgid.raw[15] == 1 &&
		   p.dlid == htobe16(3) && p.flow_label == htobe32(5) &&
		   p.reversible == 1 && p.mtu == IBV_MTU_4096 &&
		   p.pkey == 0xffff && p.hop_limit == 2 &&
		   p.traffic_class == 3 && p.numb_path == 1 && p.sl == 4 &&
		   p.rate == 7 && p.packet_life_time == 18 && p.preference == 1,
	   "path_rec from kern");
	memset(&kp2, 0, sizeof(kp2));
	ibv_copy_path_rec_to_kern(&kp2, &p);
	ok(!memcmp(&kp, &kp2, sizeof(kp)), "path_rec round trip");
}

/*
 * test_exit_lock_held -- exit() does not block on the registry lock held
 * by a stopped process (or by the thread that calls exit from a signal
 * handler): the exit-time cleanup gives up instead
 */
static void test_exit_lock_held(void)
{
	int ready[2], go[2], held[2], st = 0;
	pid_t user, holder;
	char name[160], c = 0;
	struct soft_reg *r;
	double t0;
	int fd;

	if (pipe(ready) || pipe(go) || pipe(held))
		bail_out("pipe");
	user = fork();
	if (!user) {
		struct tctx t;

		c = t_open(&t, 4) ? 1 : 0;
		t_xsend(ready[1], &c, 1);
		t_xrecv(go[0], &c, 1);
		exit(0); /* context left open: the destructor cleans up */
	}
	t_xrecv(ready[0], &c, 1);
	ok(!c, "a process with an open context");
	holder = fork();
	if (!holder) {
		snprintf(name, sizeof(name), "/%s-registry",
			 getenv("SOFTRDMA_SHM_PREFIX"));
		fd = shm_open(name, O_RDWR, 0);
		r = fd < 0 ? MAP_FAILED
			   : mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
				  MAP_SHARED, fd, 0);
		c = r != MAP_FAILED && !pthread_mutex_lock(&r->lock) ? 0 : 1;
		t_xsend(held[1], &c, 1);
		raise(SIGSTOP);
		_exit(0);
	}
	stopped_holder = holder;
	t_xrecv(held[0], &c, 1);
	ok(!c, "another process holds the registry lock");
	waitpid(holder, &st, WUNTRACED);
	ok(WIFSTOPPED(st), "and is stopped");
	stalled_child = user;
	alarm(20);
	t0 = now_ms();
	t_xsend(go[1], &c, 1);
	waitpid(user, &st, 0);
	alarm(0);
	stalled_child = 0;
	ok(WIFEXITED(st) && !WEXITSTATUS(st) && now_ms() - t0 < 10000,
	   "exit() returned in %.0f ms", now_ms() - t0);
	kill(holder, SIGKILL);
	waitpid(holder, &st, 0);
	stopped_holder = 0;
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	close(held[0]);
	close(held[1]);
}

int main(void)
{
	t_isolate("stall");
	signal(SIGALRM, on_alarm);
	test_kern_copy();
	test_thread_signals();
	test_event_latency();
	test_stopped_responder();
	test_served_while_stopped();
	test_srq_limit_asleep();
	test_late_stopped(1);
	test_late_stopped(0);
	test_stopped_sender(7);
	test_stopped_sender(0);
	test_exit_lock_held();
	/* what the two dead processes left, the next user sweeps */
	{
		struct tctx t;

		ok(t_open(&t, 4) == 0, "open after them");
		t_close(&t);
	}
	is_int(t_shm_count(), 0, "no shm names left");
	done_testing();
}
