/* SPDX-License-Identifier: MIT */
/*
 * soft_pingpong -- one process, one thread, two RC QPs (on two contexts
 * by default) exchanging 8-byte SENDs in ping-pong: the loop callgrind
 * counts softrdma's instructions per message on.
 *
 *   valgrind --tool=callgrind tools/soft_pingpong [-n ITERS] [-s SIZE] [-1]
 *	[-I INLINE] [-T] [-w WINDOW | -t [-c CPU0,CPU1]]
 *
 * -1 puts both QPs on one context.  -w streams 2 x ITERS messages one
 * way instead, as ib_send_bw does: up to WINDOW SENDs in flight (at most
 * 16, the queue depth), the receiver taking what a poll of up to 16
 * completions gives and posting a receive again for each (the last
 * message of each poll is checked: its first byte is its number).  -T
 * uses the single-thread hints: each QP on a parent domain with a thread
 * domain, each CQ created IBV_CREATE_CQ_ATTR_SINGLE_THREADED.  -I sends
 * messages of up to INLINE bytes inline (default 64; the QPs are created
 * with that much).  -t runs each side on a thread of its own, each
 * polling its own CQ (b's answers every message at once), pinned to CPU0
 * and CPU1 with -c, and prints the one-way latency and the run's context
 * switches too: with -1, two threads on one context, as a multithreaded
 * program that opens its device once has them.  Prints the message count;
 * a message is one SEND (a round trip is two).  Exits 1 on any verbs
 * error.
 */
#include "config.h"

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_td *td;    /* -T: the QP's thread domain */
	struct ibv_pd *qp_pd; /* -T: a parent domain of pd with td, or pd */
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char buf[2][4096];
};

#define DEPTH 16 /* each queue's depth; -w at most this */

static uint32_t inl = 64; /* -I: SENDs up to this long go inline */
static int hints;	  /* -T: the single-thread hints */
static int cpu_b = -1;	  /* -t -c: the responder thread's CPU */

/* make_cq -- s's CQ: -T single-threaded (ibv_create_cq_ex) */
static struct ibv_cq *make_cq(struct side *s)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 4 * DEPTH,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
		.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
	};
	struct ibv_cq_ex *cq;

	if (!hints)
		return ibv_create_cq(s->ctx, 4 * DEPTH, NULL, NULL, 0);
	cq = ibv_create_cq_ex(s->ctx, &ca);
	return cq ? ibv_cq_ex_to_cq(cq) : NULL;
}

/* make_qp_pd -- -T: a parent domain of s->pd with a thread domain */
static struct ibv_pd *make_qp_pd(struct side *s)
{
	struct ibv_td_init_attr ta = {0};
	struct ibv_parent_domain_init_attr pa = {0};

	if (!hints)
		return s->pd;
	s->td = ibv_alloc_td(s->ctx, &ta);
	if (!s->td)
		return NULL;
	pa.pd = s->pd;
	pa.td = s->td;
	return ibv_alloc_parent_domain(s->ctx, &pa);
}

static int die(const char *what)
{
	fprintf(stderr, "soft_pingpong: %s failed\n", what);
	exit(1);
}

static void setup(struct side *s, struct ibv_context *ctx)
{
	struct ibv_qp_init_attr qa;

	s->ctx = ctx;
	s->pd = ibv_alloc_pd(ctx);
	s->cq = s->pd ? make_cq(s) : NULL;
	s->mr = s->cq ? ibv_reg_mr(s->pd, s->buf, sizeof(s->buf),
				   IBV_ACCESS_LOCAL_WRITE)
		      : NULL;
	s->qp_pd = s->mr ? make_qp_pd(s) : NULL;
	if (!s->qp_pd)
		die("setup");
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = s->cq;
	qa.recv_cq = s->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = DEPTH;
	qa.cap.max_recv_wr = DEPTH;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = inl;
	s->qp = ibv_create_qp(s->qp_pd, &qa);
	if (!s->qp)
		die("ibv_create_qp");
}

static void connect_qp(struct side *s, uint32_t dest)
{
	struct ibv_qp_attr a;
	union ibv_gid gid;

	if (ibv_query_gid(s->ctx, 1, 0, &gid))
		die("ibv_query_gid");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = 0;
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		die("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

static void post_recv(struct side *s)
{
	struct ibv_sge sge = {(uintptr_t)s->buf[1], sizeof(s->buf[1]),
			      s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 2, .sg_list = &sge, .num_sge = 1};
	struct ibv_recv_wr *bad;

	if (ibv_post_recv(s->qp, &wr, &bad))
		die("ibv_post_recv");
}

static void post_send(struct side *s, uint32_t len)
{
	struct ibv_sge sge = {(uintptr_t)s->buf[0], len, s->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags =
					 IBV_SEND_SIGNALED |
					 (len <= inl ? IBV_SEND_INLINE : 0)};
	struct ibv_send_wr *bad;

	if (ibv_post_send(s->qp, &wr, &bad))
		die("ibv_post_send");
}

/* wait_recv -- poll s's CQ until its receive completes (and its send) */
static void wait_recv(struct side *s, int *sends)
{
	struct ibv_wc wc[4];
	int n, i, got = 0;

	while (!got) {
		n = ibv_poll_cq(s->cq, 4, wc);
		if (n < 0)
			die("ibv_poll_cq");
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS)
				die("completion");
			if (wc[i].wr_id == 2)
				got = 1;
			else
				(*sends)--;
		}
	}
}

/* drain_sends -- poll s's CQ until its *sends send completions came */
static void drain_sends(struct side *s, int *sends)
{
	struct ibv_wc wc[4];
	int n, i;

	while (*sends > 0) {
		n = ibv_poll_cq(s->cq, 4, wc);
		if (n < 0)
			die("ibv_poll_cq");
		for (i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != 1)
				die("send completion");
		*sends -= n;
	}
}

struct answer {
	struct side *b;
	long iters;
	uint32_t size;
};

/* responder -- -t: b's side on a thread of its own, each message
 * answered as it comes */
static void *responder(void *arg)
{
	struct answer *r = arg;
	int sends = 0;
	long i;

	if (cpu_b >= 0 && pin_cpu(cpu_b))
		die("pinning the responder");
	for (i = 0; i < r->iters; i++) {
		wait_recv(r->b, &sends);
		post_recv(r->b);
		post_send(r->b, r->size);
		sends++;
	}
	drain_sends(r->b, &sends);
	return NULL;
}

/* threaded -- -t: a's side here, b's on the responder thread; the
 * one-way latency */
static void threaded(struct side *a, struct side *b, long iters, uint32_t size,
		     int cpu_a)
{
	struct answer r = {b, iters, size};
	struct rusage u0, u1;
	pthread_t th;
	uint64_t t0, t1;
	int sends = 0;
	long i;

	if (cpu_a >= 0 && pin_cpu(cpu_a))
		die("pinning");
	if (pthread_create(&th, NULL, responder, &r))
		die("pthread_create");
	getrusage(RUSAGE_SELF, &u0);
	t0 = now_ns();
	for (i = 0; i < iters; i++) {
		post_send(a, size);
		sends++;
		wait_recv(a, &sends);
		post_recv(a);
	}
	t1 = now_ns();
	getrusage(RUSAGE_SELF, &u1);
	pthread_join(th, NULL);
	drain_sends(a, &sends);
	printf("one-way %.3f us\n", (double)(t1 - t0) / 2e3 / (double)iters);
	/* a side waiting for the other in the kernel (a lock) shows here */
	printf("context switches %ld voluntary, %ld involuntary\n",
	       u1.ru_nvcsw - u0.ru_nvcsw, u1.ru_nivcsw - u0.ru_nivcsw);
}

/*
 * stream -- -w: a sends 2 x ITERS messages to b with up to WINDOW in
 * flight; b checks each receive (in order: its byte 0 is the message's
 * number) and posts it again.  Polls alternate, one thread.
 */
static void stream(struct side *a, struct side *b, long msgs, uint32_t size,
		   int window)
{
	struct ibv_wc wc[DEPTH];
	long sent = 0, got = 0;
	int inflight = 0, n, i;

	for (i = 1; i < DEPTH; i++)
		post_recv(b); /* main posted the first */
	while (got < msgs) {
		while (sent < msgs && inflight < window) {
			a->buf[0][0] = (char)sent;
			post_send(a, size);
			sent++;
			inflight++;
		}
		n = ibv_poll_cq(b->cq, DEPTH, wc);
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS ||
			    wc[i].wr_id != 2 || wc[i].byte_len != size)
				die("stream receive");
			got++;
			post_recv(b);
		}
		/* one buffer: the batch's last message is what it holds */
		if (n > 0 && b->buf[1][0] != (char)(got - 1))
			die("stream order");
		if (n < 0)
			die("ibv_poll_cq");
		n = ibv_poll_cq(a->cq, DEPTH, wc);
		if (n < 0)
			die("ibv_poll_cq");
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != 1)
				die("stream send");
			inflight--;
		}
	}
	drain_sends(a, &inflight);
}

int main(int argc, char **argv)
{
	static struct side a, b;
	struct ibv_device **list;
	struct ibv_context *c1, *c2;
	long iters = 100000, i;
	uint32_t size = 8;
	int one = 0, opt, sa = 0, sb = 0, window = 0, thr = 0, cpu_a = -1;

	while ((opt = getopt(argc, argv, "n:s:1I:Tw:tc:")) != -1) {
		switch (opt) {
		case 'n':
			iters = atol(optarg);
			break;
		case 's':
			size = (uint32_t)atoi(optarg);
			break;
		case '1':
			one = 1;
			break;
		case 'I':
			inl = (uint32_t)atoi(optarg);
			break;
		case 'T':
			hints = 1;
			break;
		case 'w':
			window = atoi(optarg);
			break;
		case 't':
			thr = 1;
			break;
		case 'c':
			if (cpu_pair(optarg, &cpu_a, &cpu_b))
				return 2;
			break;
		default:
			fprintf(stderr,
				"usage: soft_pingpong [-n ITERS] [-s SIZE] "
				"[-1] [-I INLINE] [-T] [-w WINDOW | -t [-c "
				"CPU0,CPU1]]\n");
			return 2;
		}
	}
	if (size > 4096 || iters < 1 || window < 0 || window > DEPTH ||
	    (window && size < 1) || (window && thr))
		return 2;
	list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		die("ibv_get_device_list");
	c1 = ibv_open_device(list[0]);
	c2 = one ? c1 : ibv_open_device(list[0]);
	if (!c1 || !c2)
		die("ibv_open_device");
	setup(&a, c1);
	setup(&b, c2);
	connect_qp(&a, b.qp->qp_num);
	connect_qp(&b, a.qp->qp_num);
	post_recv(&a);
	post_recv(&b);
	if (window)
		stream(&a, &b, 2 * iters, size, window);
	else if (thr)
		threaded(&a, &b, iters, size, cpu_a);
	for (i = 0; i < iters && !window && !thr; i++) {
		post_send(&a, size);
		sa++;
		wait_recv(&b, &sb);
		post_recv(&b);
		post_send(&b, size);
		sb++;
		wait_recv(&a, &sa);
		post_recv(&a);
	}
	printf("%ld messages of %u bytes\n", 2 * iters, size);
	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	ibv_dereg_mr(a.mr);
	ibv_dereg_mr(b.mr);
	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
	if (hints) { /* the parent domains first: they hold pd and td */
		ibv_dealloc_pd(a.qp_pd);
		ibv_dealloc_pd(b.qp_pd);
		ibv_dealloc_td(a.td);
		ibv_dealloc_td(b.td);
	}
	ibv_dealloc_pd(a.pd);
	ibv_dealloc_pd(b.pd);
	ibv_close_device(c1);
	if (!one)
		ibv_close_device(c2);
	ibv_free_device_list(list);
	return 0;
}
