/* SPDX-License-Identifier: MIT */
/*
 * apm.c -- softrdma's InfiniBand mode (SOFTRDMA_LINK=ib) and automatic
 * path migration, in the flow of the seeds' APM example:
 *  - two IB ports with their own LIDs and port GIDs, AUTO_PATH_MIG;
 *  - two RC QPs in two processes, connected on port 1 (LID-routed); each
 *    loads an alternate path through port 2 and asks REARM: ARMED;
 *  - a stream, then migration by hand (ibv_modify_qp MIGRATED): primary
 *    and alternate swap, IBV_EVENT_PATH_MIG on both sides (the peer
 *    follows the MigReq), another stream on the new path;
 *  - re-armed, a stream during which the link of the port in use goes
 *    down: both sides migrate on their own (PATH_MIG), PORT_ERR and
 *    query_port say the port is down, and every message arrives exactly
 *    once and in order;
 *  - both links down while armed: PATH_MIG_ERR, then RETRY_EXC_ERR; a
 *    link down with no armed alternate: RETRY_EXC_ERR, no migration;
 *  - bad input: ALT_PATH in a transition without it, a bad alternate
 *    port, pkey index or timeout, MIGRATED when not armed, a bad port;
 *  - the default (RoCE) mode: one Ethernet port, no AUTO_PATH_MIG, and
 *    IBV_QP_ALT_PATH refused with EINVAL (as the kernel does on RoCE).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

/* softrdma's test hook: a port's link down (0) or up (1), IB mode */
int softrdma_port_set_state(struct ibv_context *ctx, uint8_t port, int up);

#define MSG	64
#define DEPTH	128
#define TIMEOUT 14 /* 67 ms: the transport timer of the connected pair */
#define RETRY	7

/* commands from the parent to the receiver */
enum { C_RECV = 1, C_QUERY, C_REARM, C_EXIT };

struct report {
	uint64_t got, bad; /* messages received; out of order, wrong data */
	uint32_t mig_events, mig_err_events;
	int32_t port, alt_port, mig_state;
	uint16_t dlid, alt_dlid;
};

static uint16_t lid[3];

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* connect -- RESET..RTS on port 1 towards (lid of port 1, dqpn) */
static int connect_ib(struct ibv_qp *qp, uint32_t dqpn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.dlid = lid[1];
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		return -1;
	return t_qp_rts(qp, 7, TIMEOUT, RETRY);
}

/* load_alt -- the seeds' load_alt_path: the current path with the other
 * port and its DLID as the alternate, and REARM */
static int load_alt(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int alt;

	if (ibv_query_qp(qp, &a, 0, &ia))
		return -1;
	alt = a.port_num == 1 ? 2 : 1;
	memcpy(&a.alt_ah_attr, &a.ah_attr, sizeof(a.ah_attr));
	a.alt_pkey_index = a.pkey_index;
	a.alt_timeout = a.timeout;
	a.alt_port_num = (uint8_t)alt;
	a.alt_ah_attr.dlid = lid[alt];
	a.path_mig_state = IBV_MIG_REARM;
	return ibv_modify_qp(qp, &a, IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE);
}

static int rearm(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.path_mig_state = IBV_MIG_REARM;
	return ibv_modify_qp(qp, &a, IBV_QP_PATH_MIG_STATE);
}

static int migrate(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.path_mig_state = IBV_MIG_MIGRATED;
	return ibv_modify_qp(qp, &a, IBV_QP_PATH_MIG_STATE);
}

static void query(struct ibv_qp *qp, struct report *r)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	memset(&a, 0, sizeof(a));
	if (ibv_query_qp(qp, &a,
			 IBV_QP_PORT | IBV_QP_AV | IBV_QP_ALT_PATH |
				 IBV_QP_PATH_MIG_STATE,
			 &ia)) {
		r->port = -1;
		return;
	}
	r->port = a.port_num;
	r->alt_port = a.alt_port_num;
	r->mig_state = a.path_mig_state;
	r->dlid = a.ah_attr.dlid;
	r->alt_dlid = a.alt_ah_attr.dlid;
}

/* drain_events -- count the async events waiting (non-blocking fd) */
static void drain_events(struct ibv_context *ctx, uint32_t *mig,
			 uint32_t *mig_err, uint32_t *port_err,
			 uint32_t *port_active, int *last_port)
{
	struct ibv_async_event ev;

	while (!ibv_get_async_event(ctx, &ev)) {
		switch (ev.event_type) {
		case IBV_EVENT_PATH_MIG:
			if (mig)
				++*mig;
			break;
		case IBV_EVENT_PATH_MIG_ERR:
			if (mig_err)
				++*mig_err;
			break;
		case IBV_EVENT_PORT_ERR:
			if (port_err)
				++*port_err;
			if (last_port)
				*last_port = ev.element.port_num;
			break;
		case IBV_EVENT_PORT_ACTIVE:
			if (port_active)
				++*port_active;
			if (last_port)
				*last_port = ev.element.port_num;
			break;
		default:
			break;
		}
		ibv_ack_async_event(&ev);
	}
}

static int set_nonblock(struct ibv_context *ctx)
{
	int fl = fcntl(ctx->async_fd, F_GETFL);

	return fl < 0 ? -1 : fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
}

/* receiver -- the child: an RC QP that receives what it is told to,
 * checking every message's sequence number and data */
static int receiver(int rfd, int wfd)
{
	struct tctx t;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct report r;
	unsigned char *buf;
	uint64_t next = 0;
	uint32_t qpn, cmd, dqpn;
	int i;

	if (t_open(&t, 4 * DEPTH) || set_nonblock(t.ctx))
		return 2;
	qp = t_rc_qp(&t, DEPTH, NULL);
	buf = calloc(DEPTH, MSG);
	if (!qp || !buf)
		return 2;
	mr = ibv_reg_mr(t.pd, buf, (size_t)DEPTH * MSG, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return 2;
	qpn = qp->qp_num;
	t_xsend(wfd, &qpn, sizeof(qpn));
	t_xrecv(rfd, &dqpn, sizeof(dqpn));
	if (connect_ib(qp, dqpn) || load_alt(qp)) {
		diag("receiver: connect or alternate path failed (%d)", errno);
		return 2;
	}
	for (i = 0; i < DEPTH; i++)
		if (t_post_recv(qp, buf + (size_t)i * MSG, MSG, mr->lkey,
				(uint64_t)i))
			return 2;
	memset(&r, 0, sizeof(r));
	for (;;) {
		uint64_t n, end;

		t_xrecv(rfd, &cmd, sizeof(cmd));
		if (cmd == C_EXIT)
			break;
		if (cmd == C_REARM && rearm(qp))
			return 2;
		if (cmd == C_RECV) {
			t_xrecv(rfd, &n, sizeof(n));
			end = now_ms() + 60000;
			while (n && now_ms() < end) {
				struct ibv_wc wc[16];
				int k = ibv_poll_cq(t.cq, 16, wc), j;

				for (j = 0; j < k; j++) {
					unsigned char *p =
						buf + wc[j].wr_id * MSG;
					uint64_t seq;

					memcpy(&seq, p, 8);
					if (wc[j].status != IBV_WC_SUCCESS ||
					    wc[j].byte_len != MSG ||
					    seq != next ||
					    p[MSG - 1] != (unsigned char)seq)
						r.bad++;
					next = seq + 1;
					r.got++;
					n--;
					if (t_post_recv(qp, p, MSG, mr->lkey,
							wc[j].wr_id))
						r.bad++;
				}
				drain_events(t.ctx, &r.mig_events,
					     &r.mig_err_events, NULL, NULL,
					     NULL);
			}
		}
		/* a little more progress so events of a migration the
		 * parent made reach this side before it reports */
		for (i = 0; i < 20; i++) {
			struct ibv_wc wc;

			if (ibv_poll_cq(t.cq, 1, &wc)) {
				r.bad++;
				break;
			}
			drain_events(t.ctx, &r.mig_events, &r.mig_err_events,
				     NULL, NULL, NULL);
			if (cmd != C_QUERY)
				break;
			usleep(1000);
		}
		query(qp, &r);
		t_xsend(wfd, &r, sizeof(r));
	}
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	free(buf);
	t_close(&t);
	return 0;
}

/* stream -- send n messages numbered from *seq, at most DEPTH/2 in
 * flight; the link of port cut_port goes down after cut_at of them (0:
 * no cut); 0 when every send completed successfully */
static int stream(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr,
		  unsigned char *buf, uint64_t *seq, uint64_t n, int cut_port,
		  uint64_t cut_at, int *inflight_at_cut)
{
	uint64_t posted = 0, done = 0, end = now_ms() + 60000;
	struct ibv_wc wc[16];
	int k, j;

	while (done < n && now_ms() < end) {
		while (posted < n && posted - done < DEPTH / 2) {
			unsigned char *p = buf + (*seq % DEPTH) * MSG;

			memcpy(p, seq, 8);
			memset(p + 8, (unsigned char)*seq, MSG - 8);
			if (t_post(qp, IBV_WR_SEND, p, MSG, mr->lkey, *seq,
				   IBV_SEND_SIGNALED, 0, 0)) {
				diag("post %llu failed",
				     (unsigned long long)*seq);
				return -1;
			}
			(*seq)++;
			posted++;
			if (cut_port && posted == cut_at) {
				*inflight_at_cut = (int)(posted - done);
				if (softrdma_port_set_state(
					    qp->context, (uint8_t)cut_port, 0))
					return -1;
			}
		}
		k = ibv_poll_cq(cq, 16, wc);
		for (j = 0; j < k; j++)
			if (wc[j].status != IBV_WC_SUCCESS) {
				diag("send %llu: %s",
				     (unsigned long long)wc[j].wr_id,
				     ibv_wc_status_str(wc[j].status));
				return -1;
			}
		done += (uint64_t)(k > 0 ? k : 0);
	}
	return done == n ? 0 : -1;
}

static void send_cmd(int wfd, uint32_t c, uint64_t n)
{
	t_xsend(wfd, &c, sizeof(c));
	if (c == C_RECV)
		t_xsend(wfd, &n, sizeof(n));
}

/* wait_events -- progress ctx until n events of type came, 30 s at most;
 * port events are counted into *perr / *pact with their port in *lastp */
static uint32_t wait_events(struct tctx *t, enum ibv_event_type type,
			    uint32_t n, uint32_t *perr, uint32_t *pact,
			    int *lastp)
{
	uint32_t mig = 0, err = 0;
	uint64_t end = now_ms() + 30000;
	struct ibv_wc wc;

	while (now_ms() < end) {
		ibv_poll_cq(t->cq, 0, &wc);
		drain_events(t->ctx, &mig, &err, perr, pact, lastp);
		if ((type == IBV_EVENT_PATH_MIG ? mig : err) >= n)
			break;
		usleep(1000);
	}
	return type == IBV_EVENT_PATH_MIG ? mig : err;
}

/* the two-process flow: manual and automatic migration mid-stream */
static void flow(struct tctx *t)
{
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_port_attr pa;
	struct report r, me;
	unsigned char *buf;
	uint64_t seq = 0, n = tap_small() ? 300 : 3000;
	uint32_t qpn, dqpn, perr = 0, pact = 0;
	int rfd, wfd, st, inflight = 0, lastp = 0;
	pid_t pid;

	qp = t_rc_qp(t, DEPTH, NULL);
	buf = calloc(DEPTH, MSG);
	mr = buf ? ibv_reg_mr(t->pd, buf, (size_t)DEPTH * MSG, 0) : NULL;
	if (!ok(qp && mr, "sender QP and MR"))
		return;
	pid = t_spawn(receiver, &rfd, &wfd);
	if (!ok(pid > 0, "receiver process"))
		return;
	qpn = qp->qp_num;
	t_xrecv(rfd, &dqpn, sizeof(dqpn));
	t_xsend(wfd, &qpn, sizeof(qpn));
	ok(!connect_ib(qp, dqpn), "RC connected on port 1, LID-routed");
	ok(!load_alt(qp), "alternate path through port 2 loaded, REARM");
	query(qp, &me);
	ok(me.mig_state == IBV_MIG_ARMED && me.port == 1 && me.alt_port == 2 &&
		   me.dlid == lid[1] && me.alt_dlid == lid[2],
	   "query: ARMED, port 1 (dlid %u), alternate port 2 (dlid %u)",
	   me.dlid, me.alt_dlid);

	/* 1: a stream on the primary path */
	send_cmd(wfd, C_RECV, n);
	ok(!stream(qp, t->cq, mr, buf, &seq, n, 0, 0, NULL),
	   "%llu SENDs on port 1 completed", (unsigned long long)n);
	t_xrecv(rfd, &r, sizeof(r));
	ok(r.got == n && !r.bad, "receiver: %llu in order, %llu bad",
	   (unsigned long long)r.got, (unsigned long long)r.bad);
	ok(r.mig_state == IBV_MIG_ARMED && r.port == 1 && r.alt_port == 2,
	   "receiver: ARMED on port 1, alternate port 2");

	/* 2: migration by hand (the seeds' -m); the receiver follows */
	ok(!migrate(qp), "ibv_modify_qp(path_mig_state MIGRATED)");
	query(qp, &me);
	ok(me.mig_state == IBV_MIG_MIGRATED && me.port == 2 &&
		   me.alt_port == 1 && me.dlid == lid[2] &&
		   me.alt_dlid == lid[1],
	   "query: MIGRATED, primary and alternate swapped (port %d dlid "
	   "%u, alternate port %d dlid %u)",
	   me.port, me.dlid, me.alt_port, me.alt_dlid);
	is_int(wait_events(t, IBV_EVENT_PATH_MIG, 1, NULL, NULL, NULL), 1,
	       "IBV_EVENT_PATH_MIG on the sender");
	is_int(migrate(qp), EINVAL, "MIGRATED again when migrated: EINVAL");
	send_cmd(wfd, C_RECV, n);
	ok(!stream(qp, t->cq, mr, buf, &seq, n, 0, 0, NULL),
	   "%llu SENDs on the new path completed", (unsigned long long)n);
	t_xrecv(rfd, &r, sizeof(r));
	ok(r.got == 2 * n && !r.bad, "receiver: %llu in order, %llu bad",
	   (unsigned long long)r.got, (unsigned long long)r.bad);
	ok(r.mig_events == 1 && r.mig_state == IBV_MIG_MIGRATED &&
		   r.port == 2 && r.alt_port == 1 && r.dlid == lid[2],
	   "receiver followed: PATH_MIG %u, MIGRATED, port %d", r.mig_events,
	   r.port);

	/* 3: re-armed; the link in use goes down mid-stream */
	ok(!rearm(qp), "REARM after the migration");
	query(qp, &me);
	ok(me.mig_state == IBV_MIG_ARMED, "ARMED again (alternate port 1)");
	send_cmd(wfd, C_REARM, 0);
	t_xrecv(rfd, &r, sizeof(r));
	ok(r.mig_state == IBV_MIG_ARMED, "receiver ARMED again");
	send_cmd(wfd, C_RECV, n);
	ok(!stream(qp, t->cq, mr, buf, &seq, n, 2, n / 2, &inflight),
	   "%llu SENDs completed across the cut of port 2",
	   (unsigned long long)n);
	ok(inflight > 0, "%d sends in flight at the cut", inflight);
	t_xrecv(rfd, &r, sizeof(r));
	ok(r.got == 3 * n && !r.bad,
	   "receiver: %llu in order, none lost or twice, %llu bad",
	   (unsigned long long)r.got, (unsigned long long)r.bad);
	ok(r.mig_events == 2 && r.mig_state == IBV_MIG_MIGRATED &&
		   r.port == 1 && r.dlid == lid[1],
	   "receiver migrated on its own: PATH_MIG %u, port %d", r.mig_events,
	   r.port);
	is_int(wait_events(t, IBV_EVENT_PATH_MIG, 1, &perr, &pact, &lastp), 1,
	       "IBV_EVENT_PATH_MIG on the sender");
	query(qp, &me);
	ok(me.mig_state == IBV_MIG_MIGRATED && me.port == 1 &&
		   me.dlid == lid[1] && me.alt_port == 2,
	   "sender back on port 1, alternate port 2");
	ok(perr == 1 && lastp == 2, "IBV_EVENT_PORT_ERR for port 2");
	ok(!ibv_query_port(t->ctx, 2, &pa) && pa.state == IBV_PORT_DOWN,
	   "ibv_query_port: port 2 DOWN");
	ok(!rearm(qp), "REARM with the alternate's link down: accepted");
	query(qp, &me);
	ok(me.mig_state == IBV_MIG_REARM, "stays REARM while port 2 is down");
	ok(!softrdma_port_set_state(t->ctx, 2, 1), "port 2 back up");
	{
		uint64_t end = now_ms() + 30000;
		struct ibv_wc wc;

		do { /* the QP arms on a progress pass */
			ibv_poll_cq(t->cq, 0, &wc);
			drain_events(t->ctx, NULL, NULL, &perr, &pact, &lastp);
			query(qp, &me);
		} while (me.mig_state != IBV_MIG_ARMED && now_ms() < end &&
			 !usleep(1000));
	}
	ok(pact == 1 && lastp == 2, "IBV_EVENT_PORT_ACTIVE for port 2");
	ok(!ibv_query_port(t->ctx, 2, &pa) && pa.state == IBV_PORT_ACTIVE,
	   "ibv_query_port: port 2 ACTIVE");
	ok(me.mig_state == IBV_MIG_ARMED, "armed once port 2 is up");

	send_cmd(wfd, C_EXIT, 0);
	ok(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "receiver exits 0");
	close(rfd);
	close(wfd);
	ok(!ibv_destroy_qp(qp), "destroy");
	ibv_dereg_mr(mr);
	free(buf);
}

/* pair -- two RC QPs of one context connected to each other, ARMED */
static int pair(struct tctx *t, struct ibv_qp **a, struct ibv_qp **b,
		int timeout, int retry)
{
	struct ibv_qp_attr at;

	*a = t_rc_qp(t, 8, NULL);
	*b = t_rc_qp(t, 8, NULL);
	if (!*a || !*b || connect_ib(*a, (*b)->qp_num) ||
	    connect_ib(*b, (*a)->qp_num) || load_alt(*a) || load_alt(*b))
		return -1;
	memset(&at, 0, sizeof(at));
	at.timeout = (uint8_t)timeout;
	at.retry_cnt = (uint8_t)retry;
	/* a short transport timer for the failing cases (RTS -> RTS has no
	 * timeout: SQD is the way, as on an HCA) */
	at.qp_state = IBV_QPS_SQD;
	if (ibv_modify_qp(*a, &at, IBV_QP_STATE))
		return -1;
	if (ibv_modify_qp(*a, &at, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT))
		return -1;
	at.qp_state = IBV_QPS_RTS;
	return ibv_modify_qp(*a, &at, IBV_QP_STATE);
}

static int wait_wc(struct tctx *t, struct ibv_wc *wc)
{
	return t_wait(t->cq, wc, 1, 30000) == 1 ? 0 : -1;
}

/* failures: both links down, and a link down with nothing armed */
static void failures(struct tctx *t)
{
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct report me;
	char buf[64] = "x";
	uint32_t mig = 0, err;
	int w;

	mr = ibv_reg_mr(t->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!ok(mr && !pair(t, &a, &b, 8, 1), "a connected, armed pair"))
		return;
	query(a, &me);
	ok(me.mig_state == IBV_MIG_ARMED && me.port == 1, "ARMED on port 1");
	/* the alternate's link first: a primary that is up does not look at
	 * it, so the QPs see both down at once */
	ok(!softrdma_port_set_state(t->ctx, 2, 0) &&
		   !softrdma_port_set_state(t->ctx, 1, 0),
	   "both links down");
	err = wait_events(t, IBV_EVENT_PATH_MIG_ERR, 2, NULL, NULL, NULL);
	is_int(err, 2, "IBV_EVENT_PATH_MIG_ERR on both QPs");
	query(a, &me);
	ok(me.mig_state == IBV_MIG_REARM && me.port == 1,
	   "still on port 1, REARM (the alternate is down)");
	ok(!t_post(a, IBV_WR_SEND, buf, 8, mr->lkey, 7, IBV_SEND_SIGNALED, 0,
		   0),
	   "SEND posted with both links down");
	memset(&wc, 0, sizeof(wc));
	w = wait_wc(t, &wc);
	ok(!w && wc.wr_id == 7 && wc.status == IBV_WC_RETRY_EXC_ERR,
	   "it fails with RETRY_EXC_ERR (%s)", ibv_wc_status_str(wc.status));
	is_int(t_qp_state(a), IBV_QPS_ERR, "QP in ERR");
	ok(!softrdma_port_set_state(t->ctx, 1, 1) &&
		   !softrdma_port_set_state(t->ctx, 2, 1),
	   "both links up");
	ok(!ibv_destroy_qp(a) && !ibv_destroy_qp(b), "destroy the pair");

	/* a link down with no armed alternate: no migration, the timer */
	if (!ok(!pair(t, &a, &b, 8, 1), "another pair"))
		return;
	ok(!migrate(a), "migrated by hand (port 2)");
	is_int(wait_events(t, IBV_EVENT_PATH_MIG, 2, NULL, NULL, NULL), 2,
	       "PATH_MIG on both (the peer followed)");
	query(b, &me);
	ok(me.port == 2 && me.mig_state == IBV_MIG_MIGRATED,
	   "the peer is on port 2, MIGRATED");
	ok(!softrdma_port_set_state(t->ctx, 2, 0), "port 2 down");
	ok(!t_post(a, IBV_WR_SEND, buf, 8, mr->lkey, 8, IBV_SEND_SIGNALED, 0,
		   0),
	   "SEND posted");
	memset(&wc, 0, sizeof(wc));
	w = wait_wc(t, &wc);
	ok(!w && wc.wr_id == 8 && wc.status == IBV_WC_RETRY_EXC_ERR,
	   "not armed: RETRY_EXC_ERR (%s)", ibv_wc_status_str(wc.status));
	drain_events(t->ctx, &mig, NULL, NULL, NULL, NULL);
	is_int(mig, 0, "no PATH_MIG");
	ok(!softrdma_port_set_state(t->ctx, 2, 1), "port 2 up");
	ok(!ibv_destroy_qp(a) && !ibv_destroy_qp(b), "destroy the pair");
	/* the port events of this part */
	drain_events(t->ctx, NULL, NULL, NULL, NULL, NULL);
	ibv_dereg_mr(mr);
}

/* bad -- attributes the device refuses, nothing changed */
static void bad(struct tctx *t)
{
	struct ibv_qp *qp = t_rc_qp(t, 8, NULL), *peer = t_rc_qp(t, 8, NULL);
	struct ibv_qp_attr a;
	struct ibv_port_attr pa;
	struct report me;

	if (!ok(qp && peer, "QPs"))
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.alt_port_num = 2;
	a.alt_ah_attr.dlid = lid[2];
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH),
	       EINVAL, "ALT_PATH in RESET->INIT: EINVAL");
	is_int(t_qp_state(qp), IBV_QPS_RESET, "still RESET");
	a.port_num = 3;
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS),
	       EINVAL, "port 3: EINVAL");
	if (!ok(!connect_ib(qp, peer->qp_num) && !connect_ib(peer, qp->qp_num),
		"connected"))
		return;
	query(qp, &me);
	ok(me.mig_state == IBV_MIG_MIGRATED, "initial path_mig_state MIGRATED");
	is_int(migrate(qp), EINVAL, "MIGRATED with nothing armed: EINVAL");
	memset(&a, 0, sizeof(a));
	a.path_mig_state = IBV_MIG_ARMED;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_PATH_MIG_STATE), EINVAL,
	       "ARMED with no alternate path: EINVAL");
	a.path_mig_state = (enum ibv_mig_state)3;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_PATH_MIG_STATE), EINVAL,
	       "path_mig_state 3: EINVAL");
	memset(&a, 0, sizeof(a));
	a.alt_ah_attr.dlid = lid[2];
	a.alt_ah_attr.port_num = 1;
	a.alt_timeout = 14;
	a.alt_port_num = 0;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_ALT_PATH), EINVAL,
	       "alt_port_num 0: EINVAL");
	a.alt_port_num = 3;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_ALT_PATH), EINVAL,
	       "alt_port_num 3: EINVAL");
	a.alt_port_num = 2;
	a.alt_pkey_index = 1;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_ALT_PATH), EINVAL,
	       "alt_pkey_index 1: EINVAL");
	a.alt_pkey_index = 0;
	a.alt_timeout = 32;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_ALT_PATH), EINVAL,
	       "alt_timeout 32: EINVAL");
	a.alt_timeout = 14;
	a.alt_ah_attr.dlid = 0;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_ALT_PATH), EINVAL,
	       "LID-routed alternate AV with DLID 0: EINVAL");
	a.alt_ah_attr.dlid = lid[2];
	a.alt_ah_attr.port_num = 3;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_ALT_PATH), EINVAL,
	       "alternate AV on port 3: EINVAL");
	query(qp, &me);
	ok(me.alt_port == 0 && me.mig_state == IBV_MIG_MIGRATED,
	   "nothing of it stored");
	a.alt_ah_attr.port_num = 2;
	ok(!ibv_modify_qp(qp, &a, IBV_QP_ALT_PATH),
	   "a good alternate path in RTS->RTS");
	query(qp, &me);
	ok(me.alt_port == 2 && me.alt_dlid == lid[2] &&
		   me.mig_state == IBV_MIG_MIGRATED,
	   "loaded, not armed before REARM");
	a.path_mig_state = IBV_MIG_MIGRATED;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_PATH_MIG_STATE), EINVAL,
	       "MIGRATED with an alternate loaded, not armed: EINVAL");
	a.path_mig_state = IBV_MIG_REARM;
	ok(!ibv_modify_qp(qp, &a, IBV_QP_PATH_MIG_STATE), "REARM");
	query(qp, &me);
	ok(me.mig_state == IBV_MIG_ARMED && me.port == 1, "ARMED, port 1");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_SQD;
	a.alt_port_num = 2;
	a.alt_ah_attr.dlid = lid[2];
	is_int(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_ALT_PATH), EINVAL,
	       "ALT_PATH in RTS->SQD: EINVAL");
	is_int(t_qp_state(qp), IBV_QPS_RTS, "still RTS");
	ok(!ibv_modify_qp(qp, &a, IBV_QP_STATE), "RTS->SQD");
	ok(!ibv_modify_qp(qp, &a, IBV_QP_ALT_PATH), "ALT_PATH in SQD->SQD");
	is_int(ibv_query_port(t->ctx, 3, &pa), EINVAL, "query_port(3): EINVAL");
	is_int(softrdma_port_set_state(t->ctx, 3, 0), EINVAL,
	       "port 3's link: EINVAL");
	is_int(softrdma_port_set_state(t->ctx, 0, 0), EINVAL,
	       "port 0's link: EINVAL");
	ok(!ibv_destroy_qp(qp) && !ibv_destroy_qp(peer), "destroy");
}

/* roce -- the default mode, in a process of its own (the mode is read
 * once per process): bit i of the exit status is check i failing */
static int roce(void)
{
	struct tctx t;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_qp_attr a;
	struct ibv_qp *qp, *peer;
	int fail = 0;

	unsetenv("SOFTRDMA_LINK");
	if (t_open(&t, 16))
		return 0xff;
	if (ibv_query_device(t.ctx, &da) || da.phys_port_cnt != 1 ||
	    (da.device_cap_flags & IBV_DEVICE_AUTO_PATH_MIG))
		fail |= 1;
	if (ibv_query_port(t.ctx, 1, &pa) ||
	    pa.link_layer != IBV_LINK_LAYER_ETHERNET ||
	    !ibv_query_port(t.ctx, 2, &pa))
		fail |= 2;
	qp = t_rc_qp(&t, 8, NULL);
	peer = t_rc_qp(&t, 8, NULL);
	if (!qp || !peer || t_connect(qp, peer->qp_num, 0, 1, 7, 14, 7))
		return 0xff;
	memset(&a, 0, sizeof(a));
	if (ibv_query_qp(qp, &a, IBV_QP_AV, &(struct ibv_qp_init_attr){0}))
		return 0xff;
	a.alt_ah_attr = a.ah_attr;
	a.alt_port_num = 1;
	a.alt_timeout = 14;
	if (ibv_modify_qp(qp, &a, IBV_QP_ALT_PATH) != EINVAL)
		fail |= 4;
	a.path_mig_state = IBV_MIG_REARM;
	if (ibv_modify_qp(qp, &a, IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE) !=
	    EINVAL)
		fail |= 8;
	if (softrdma_port_set_state(t.ctx, 1, 0) != EINVAL)
		fail |= 16;
	ibv_destroy_qp(qp);
	ibv_destroy_qp(peer);
	t_close(&t);
	return fail;
}

int main(void)
{
	struct tctx t;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	union ibv_gid g1, g2;
	pid_t pid;
	int st, ran, shm0;

	t_isolate("apm");
	shm0 = t_shm_count();
	pid = fork();
	if (!pid)
		_exit(roce());
	ran = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st);
	ok(ran, "RoCE mode checks ran");
	/* a child that did not run or exit: every check below fails */
	st = ran ? WEXITSTATUS(st) : 0xff;
	ok(st != 0xff, "RoCE mode: objects");
	ok(!(st & 1), "RoCE mode: one port, no IBV_DEVICE_AUTO_PATH_MIG");
	ok(!(st & 2), "RoCE mode: port 1 Ethernet, no port 2");
	ok(!(st & 4), "RoCE mode: IBV_QP_ALT_PATH refused (EINVAL)");
	ok(!(st & 8), "RoCE mode: ALT_PATH with REARM refused (EINVAL)");
	ok(!(st & 16), "RoCE mode: no link hook (EINVAL)");

	setenv("SOFTRDMA_LINK", "ib", 1);
	if (t_open(&t, 4 * DEPTH) || set_nonblock(t.ctx))
		bail_out("cannot open the device");
	ok(!ibv_query_device(t.ctx, &da) && da.phys_port_cnt == 2 &&
		   (da.device_cap_flags & IBV_DEVICE_AUTO_PATH_MIG),
	   "IB mode: 2 ports, IBV_DEVICE_AUTO_PATH_MIG");
	memset(&pa, 0, sizeof(pa));
	ibv_query_port(t.ctx, 1, &pa);
	ok(!ibv_query_port(t.ctx, 1, &pa) &&
		   pa.link_layer == IBV_LINK_LAYER_INFINIBAND &&
		   pa.state == IBV_PORT_ACTIVE && pa.lid,
	   "port 1: InfiniBand, ACTIVE, LID %u", pa.lid);
	lid[1] = pa.lid;
	ibv_query_port(t.ctx, 2, &pa);
	ok(!ibv_query_port(t.ctx, 2, &pa) &&
		   pa.link_layer == IBV_LINK_LAYER_INFINIBAND &&
		   pa.state == IBV_PORT_ACTIVE && pa.lid && pa.lid != lid[1] &&
		   pa.lid < 0xc000,
	   "port 2: InfiniBand, ACTIVE, LID %u of its own", pa.lid);
	lid[2] = pa.lid;
	ok(!ibv_query_gid(t.ctx, 1, 0, &g1) &&
		   !ibv_query_gid(t.ctx, 2, 0, &g2) && g1.raw[0] == 0xfe &&
		   g1.raw[1] == 0x80 && g2.raw[0] == 0xfe &&
		   !memcmp(g1.raw, g2.raw, 8) && memcmp(g1.raw, g2.raw, 16),
	   "port GIDs: subnet prefix fe80::/64, a GUID per port");

	flow(&t);
	failures(&t);
	bad(&t);
	t_close(&t);
	is_int(t_shm_count(), shm0, "no shm objects left");
	return done_testing();
}
