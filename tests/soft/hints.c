/* SPDX-License-Identifier: MIT */
/*
 * hints.c -- the single-thread hints of verbs: thread domains
 * (ibv_alloc_td), parent domains (ibv_alloc_parent_domain) used wherever a
 * PD is, and IBV_CREATE_CQ_ATTR_SINGLE_THREADED CQs, which softrdma honours
 * with a context lock biased towards the thread that uses them.
 *
 * - bad input: an unknown comp_mask (EINVAL), no PD, another context's TD
 *   (EINVAL), custom allocators (EOPNOTSUPP), CQ flags softrdma lacks
 *   (EOPNOTSUPP, as rdma-core's test_cqex expects),
 *   a CQ on a plain PD as its parent domain (EINVAL); a TD or PD that a
 *   parent domain holds, and a parent domain that a QP or CQ was made on,
 *   is EBUSY to deallocate, free after it goes;
 * - data: an RC pair on parent domains with TDs and single-threaded CQs
 *   (and an MR of the PD and one of the parent domain), 2,000 8-byte and
 *   200 4 KiB messages each way, every payload checked;
 * - three threads on the same two contexts, each its own QP pair: two with
 *   hints of their own (two owners contend for one bias), one without:
 *   every message of each stream arrives once, in order, intact; again in
 *   a child with SOFTRDMA_TEST_BIAS_KEEP=1, where the bias never goes off
 *   and every lock of another thread revokes it;
 * - two threads polling single-threaded CQs of one context in turn (two
 *   owners): the bias goes after SOFT_BIAS_AUTO revocations, not after
 *   SOFT_BIAS_REVOKES;
 * - a hinted pair across the two contexts, a thread on each side polling
 *   only its own CQ: a pass on one context serves the peer on the other
 *   (a trylock), which backs off from the other owner's section: every
 *   echo comes back;
 * - a hinted CQ on a completion channel while a peer process posts paced
 *   SENDs: the events come (direct wake-up, and SOFTRDMA_NO_DIRECT_WAKE=1,
 *   where the progress thread serves the channel and must get past the
 *   owner's bias), all messages arrive in order;
 * - no hints: the plain posts and polls of one thread bias its context
 *   too, with the short budget (SOFT_BIAS_AUTO); another thread's plain
 *   calls on it take it back that many times at most, the bias goes off,
 *   and every message of both threads arrives; a context whose first
 *   calls were hinted has the long budget (SOFT_BIAS_REVOKES).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../soft/softrdma.h" /* the context lock (test_auto) */
#include "../tap.h"
#include "common.h"

#define DEPTH	16
#define BUFSZ	4096
#define WAIT_MS 30000
#define NPACED	200
/* the thread streams' 8-byte messages: fewer under valgrind, which runs
 * one thread at a time (each ping-pong a switch of threads) */
#define NSTREAM (tap_small() ? 300u : 3000u)

/* one side of an RC pair: its QP on a parent domain (hinted) or the PD */
struct side {
	struct tctx *t;
	struct ibv_td *td;
	struct ibv_pd *qp_pd; /* the parent domain, or t->pd */
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf; /* [0, BUFSZ): sends; then DEPTH receive buffers */
};

/* single_cq -- a CQ of ctx with IBV_CREATE_CQ_ATTR_SINGLE_THREADED */
static struct ibv_cq *single_cq(struct ibv_context *ctx,
				struct ibv_comp_channel *ch)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 4 * DEPTH,
		.channel = ch,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
		.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
	};
	struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &ca);

	return cq ? ibv_cq_ex_to_cq(cq) : NULL;
}

/* side_open -- s on t: hinted (a TD, a parent domain, a single-threaded
 * CQ; the MR on the parent domain when MR_ON_PARENT) or plain */
static int side_open(struct side *s, struct tctx *t, int hinted,
		     int mr_on_parent, struct ibv_comp_channel *ch)
{
	struct ibv_td_init_attr ta = {0};
	struct ibv_parent_domain_init_attr pa = {0};
	struct ibv_qp_init_attr qa;

	memset(s, 0, sizeof(*s));
	s->t = t;
	s->qp_pd = t->pd;
	if (hinted) {
		s->td = ibv_alloc_td(t->ctx, &ta);
		pa.pd = t->pd;
		pa.td = s->td;
		s->qp_pd = s->td ? ibv_alloc_parent_domain(t->ctx, &pa) : NULL;
		s->cq = single_cq(t->ctx, ch);
	} else {
		s->cq = ibv_create_cq(t->ctx, 4 * DEPTH, NULL, ch, 0);
	}
	s->buf = calloc(DEPTH + 1, BUFSZ);
	if (!s->qp_pd || !s->cq || !s->buf)
		return -1;
	s->mr = ibv_reg_mr(mr_on_parent ? s->qp_pd : t->pd, s->buf,
			   (size_t)(DEPTH + 1) * BUFSZ, IBV_ACCESS_LOCAL_WRITE);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = s->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = DEPTH;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = 64;
	s->qp = s->mr ? ibv_create_qp(s->qp_pd, &qa) : NULL;
	return s->qp ? 0 : -1;
}

/* side_close -- in the order verbs wants: QP, MR, CQ, parent domain, TD;
 * 0 when every call succeeded */
static int side_close(struct side *s)
{
	int r = 0;

	r |= ibv_destroy_qp(s->qp);
	r |= ibv_dereg_mr(s->mr);
	r |= ibv_destroy_cq(s->cq);
	if (s->td) {
		r |= ibv_dealloc_pd(s->qp_pd);
		r |= ibv_dealloc_td(s->td);
	}
	free(s->buf);
	return r;
}

static int recv_one(struct side *s, uint64_t i)
{
	return t_post_recv(s->qp, s->buf + BUFSZ * (1 + i % DEPTH), BUFSZ,
			   s->mr->lkey, 1000000 + i);
}

/* take -- poll s's CQ until the receive numbered i completes (and count
 * send completions); its payload must be LEN bytes of the pattern of i */
static int take(struct side *s, uint64_t i, uint32_t len)
{
	struct ibv_wc wc[4];
	const unsigned char *p;
	uint32_t k;
	int n, j, got = 0, spins = 0;

	while (!got) {
		n = ibv_poll_cq(s->cq, 4, wc);
		if (n < 0)
			return -1;
		if (!n && ++spins > 50000000)
			return -2; /* stuck */
		for (j = 0; j < n; j++) {
			if (wc[j].status != IBV_WC_SUCCESS)
				return -3;
			if (wc[j].opcode != IBV_WC_RECV)
				continue;
			if (wc[j].wr_id != 1000000 + i || wc[j].byte_len != len)
				return -4; /* lost, repeated or out of order */
			got = 1;
		}
	}
	p = (const unsigned char *)s->buf + BUFSZ * (1 + i % DEPTH);
	for (k = 0; k < len; k++)
		if (p[k] != (unsigned char)(i * 7 + k))
			return -5;
	return recv_one(s, i + DEPTH);
}

static int send_one(struct side *s, uint64_t i, uint32_t len)
{
	uint32_t k;

	for (k = 0; k < len; k++)
		s->buf[k] = (char)(i * 7 + k);
	return t_post(s->qp, IBV_WR_SEND, s->buf, len, s->mr->lkey, i,
		      IBV_SEND_SIGNALED, 0, 0);
}

/* pingpong -- N messages of LEN bytes each way between a and b (both
 * connected, DEPTH receives posted from FIRST); 0 when all arrived */
static int pingpong(struct side *a, struct side *b, uint64_t first, uint64_t n,
		    uint32_t len)
{
	uint64_t i;
	int r;

	for (i = first; i < first + n; i++) {
		if (send_one(a, i, len))
			return -10;
		r = take(b, i, len);
		if (r)
			return r;
		if (send_one(b, i, len))
			return -11;
		r = take(a, i, len);
		if (r)
			return r;
	}
	return 0;
}

/* pair_up -- connect a and b and post their first DEPTH receives */
static int pair_up(struct side *a, struct side *b)
{
	uint64_t i;

	if (t_connect(a->qp, b->qp->qp_num, 0, 1, 7, 14, 7) ||
	    t_connect(b->qp, a->qp->qp_num, 0, 1, 7, 14, 7))
		return -1;
	for (i = 0; i < DEPTH; i++)
		if (recv_one(a, i) || recv_one(b, i))
			return -1;
	return 0;
}

static void test_bad_input(struct tctx *t, struct tctx *u)
{
	struct ibv_td_init_attr ta = {0};
	struct ibv_parent_domain_init_attr pa = {0};
	struct ibv_cq_init_attr_ex ca = {.cqe = 8};
	struct ibv_td *td, *tdu;
	struct ibv_pd *pdom, *pdom2;
	struct ibv_cq_ex *cq;

	ta.comp_mask = 1;
	errno = 0;
	ok(!ibv_alloc_td(t->ctx, &ta) && errno == EINVAL,
	   "alloc_td: unknown comp_mask is EINVAL");
	ta.comp_mask = 0;
	td = ibv_alloc_td(t->ctx, &ta);
	tdu = ibv_alloc_td(u->ctx, &ta);
	ok(td && tdu && td->context == t->ctx, "alloc_td");
	errno = 0;
	ok(!ibv_alloc_parent_domain(t->ctx, &pa) && errno == EINVAL,
	   "parent domain without a PD is EINVAL");
	pa.pd = t->pd;
	pa.td = tdu;
	errno = 0;
	ok(!ibv_alloc_parent_domain(t->ctx, &pa) && errno == EINVAL,
	   "parent domain with another context's TD is EINVAL");
	pa.td = td;
	pa.comp_mask = 1u << 7;
	errno = 0;
	ok(!ibv_alloc_parent_domain(t->ctx, &pa) && errno == EINVAL,
	   "parent domain: unknown comp_mask is EINVAL");
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
	errno = 0;
	ok(!ibv_alloc_parent_domain(t->ctx, &pa) && errno == EOPNOTSUPP,
	   "parent domain: custom allocators are EOPNOTSUPP");
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	pa.pd_context = (void *)0x1234;
	pdom = ibv_alloc_parent_domain(t->ctx, &pa);
	ok(pdom && pdom->context == t->ctx && pdom->handle == t->pd->handle,
	   "parent domain of the PD with the TD");
	pa.comp_mask = 0;
	pa.td = NULL;
	pa.pd = pdom; /* its protection domain is the PD's */
	pdom2 = ibv_alloc_parent_domain(t->ctx, &pa);
	ok(pdom2 && pdom2->handle == t->pd->handle,
	   "parent domain of a parent domain, no TD");
	is_int(ibv_dealloc_td(td), EBUSY,
	       "dealloc_td while a parent domain "
	       "has it: EBUSY");
	is_int(ibv_dealloc_pd(t->pd), EBUSY,
	       "dealloc_pd while parent domains have it: EBUSY");
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	ca.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	errno = 0;
	ok(!ibv_create_cq_ex(t->ctx, &ca) && errno == EOPNOTSUPP,
	   "create_cq_ex: a flag softrdma lacks is EOPNOTSUPP (rdma-core's "
	   "test_cqex)");
	ca.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED | (1u << 6);
	errno = 0;
	ok(!ibv_create_cq_ex(t->ctx, &ca) && errno == EOPNOTSUPP,
	   "create_cq_ex: an unknown flag beside SINGLE_THREADED too");
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
	ca.flags = 0;
	ca.parent_domain = t->pd;
	errno = 0;
	ok(!ibv_create_cq_ex(t->ctx, &ca) && errno == EINVAL,
	   "create_cq_ex: a plain PD as parent domain is EINVAL");
	ca.parent_domain = pdom;
	cq = ibv_create_cq_ex(u->ctx, &ca);
	ok(!cq && errno == EINVAL,
	   "create_cq_ex: another context's parent domain is EINVAL");
	cq = ibv_create_cq_ex(t->ctx, &ca);
	ok(cq != NULL, "create_cq_ex on the parent domain (its TD)");
	is_int(ibv_dealloc_pd(pdom), EBUSY,
	       "dealloc of the parent domain while a CQ has it: EBUSY");
	if (cq)
		is_int(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0, "destroy it");
	is_int(ibv_dealloc_pd(pdom2), 0, "dealloc the second parent domain");
	is_int(ibv_dealloc_pd(pdom), 0, "dealloc the parent domain");
	is_int(ibv_dealloc_td(td), 0, "then the TD");
	is_int(ibv_dealloc_td(tdu), 0, "and the other context's");
	is_int(ibv_dealloc_pd(t->pd), 0,
	       "the PD goes once its parent domains have gone");
	t->pd = ibv_alloc_pd(t->ctx); /* for what follows */
	ok(t->pd != NULL, "a new PD");
}

static void test_data(struct tctx *t, struct tctx *u)
{
	struct side a, b;
	struct ibv_pd *pd_a = t->pd;

	ok(!side_open(&a, t, 1, 0, NULL) && !side_open(&b, u, 1, 1, NULL),
	   "hinted sides (MR of the PD, MR of the parent domain)");
	ok(a.qp->pd == a.qp_pd && b.mr->pd == b.qp_pd,
	   "objects name the parent domain they were made on");
	is_int(pair_up(&a, &b), 0, "connected");
	is_int(pingpong(&a, &b, 0, 2000, 8), 0,
	       "2,000 8-byte messages each way");
	is_int(pingpong(&a, &b, 2000, 200, BUFSZ), 0,
	       "200 4 KiB messages each way");
	is_int(ibv_dealloc_pd(pd_a), EBUSY, "PD under a parent domain: EBUSY");
	is_int(ibv_dealloc_pd(a.qp_pd), EBUSY,
	       "parent domain while its QP lives: EBUSY");
	is_int(side_close(&a), 0, "closed in order");
	is_int(side_close(&b), 0, "closed in order (other side)");
}

struct stream {
	struct side a, b;
	int hinted;
	int ret;
	atomic_int posted; /* cross(): b's receives are there */
	uint64_t next;	   /* test_auto: the next message's number */
};

static void *stream_run(void *arg)
{
	struct stream *s = arg;

	s->ret = pingpong(&s->a, &s->b, 0, NSTREAM, 8);
	if (!s->ret)
		s->ret = pingpong(&s->a, &s->b, NSTREAM, 100, 1500);
	return NULL;
}

/* threads -- three streams at once on t and u, two hinted; 0 when each
 * delivered all its messages in order and closed */
static int threads(struct tctx *t, struct tctx *u)
{
	struct stream s[3];
	pthread_t th[3];
	int i, r = 0;

	for (i = 0; i < 3; i++) {
		s[i].hinted = i < 2;
		if (side_open(&s[i].a, t, s[i].hinted, 0, NULL) ||
		    side_open(&s[i].b, u, s[i].hinted, 0, NULL) ||
		    pair_up(&s[i].a, &s[i].b))
			return 1;
	}
	for (i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, stream_run, &s[i]);
	for (i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < 3; i++) {
		if (s[i].ret)
			r = 2 + i;
		if (side_close(&s[i].a) || side_close(&s[i].b))
			r = 5;
	}
	return r;
}

/*
 * two_owners -- two threads that each poll a single-threaded CQ of their
 * own on the same new context (as two rdmamsg contexts of one process
 * share one device context), in turn: this one first, whose poll biases
 * the context towards it, then the other, whose poll finds the word
 * biased and revokes (a membarrier), TURNS times.  A second thread's
 * hinted call is a second owner: the bias goes after SOFT_BIAS_AUTO
 * revocations, not after SOFT_BIAS_REVOKES.
 */
#define TURNS 64
static atomic_int turn; /* 0: this thread's; 1: the other's; 2: done */

static void *other_owner(void *arg)
{
	struct ibv_cq *cq = arg;
	struct ibv_wc wc;
	int k;

	for (k = 0; k < TURNS; k++) {
		while (atomic_load(&turn) != 1)
			sched_yield();
		if (ibv_poll_cq(cq, 1, &wc) < 0)
			atomic_store(&turn, 2);
		else
			atomic_store(&turn, 0);
	}
	return NULL;
}

static void two_owners(void)
{
	struct ibv_cq *mine, *theirs;
	struct ibv_wc wc;
	struct tctx t;
	soft_lock_t *l;
	pthread_t th;
	int k, bad = 0;

	if (t_open(&t, 4))
		bail_out("open");
	l = &to_sctx(t.ctx)->lock;
	mine = single_cq(t.ctx, NULL);
	theirs = single_cq(t.ctx, NULL);
	if (!mine || !theirs)
		bail_out("two owners: CQs");
	atomic_store(&turn, 0);
	pthread_create(&th, NULL, other_owner, theirs);
	for (k = 0; k < TURNS && !bad; k++) {
		while (atomic_load(&turn) == 1)
			sched_yield();
		if (atomic_load(&turn) == 2 || ibv_poll_cq(mine, 1, &wc) < 0)
			bad = 1;
		atomic_store(&turn, 1);
	}
	pthread_join(th, NULL);
	ok(!bad && atomic_load(&l->bias) == SOFT_BIAS_OFF &&
		   l->revokes == SOFT_BIAS_AUTO,
	   "two owners: the bias goes after %u revocations, not %u (bias "
	   "%#x, %u revocations in %d turns)",
	   SOFT_BIAS_AUTO, SOFT_BIAS_REVOKES, (unsigned)atomic_load(&l->bias),
	   l->revokes, TURNS);
	ok(!ibv_destroy_cq(mine) && !ibv_destroy_cq(theirs),
	   "two owners: closed");
	t_close(&t);
}

/* echo_run -- the echoing side of cross(): posts b's receives (its first
 * hinted calls on b's context: the bias is this thread's), then takes
 * message i and sends it back */
static void *echo_run(void *arg)
{
	struct stream *s = arg;
	uint64_t i;

	for (i = 0; i < DEPTH; i++)
		if (recv_one(&s->b, i))
			s->ret = -12;
	atomic_store(&s->posted, 1);
	for (i = 0; i < NSTREAM && !s->ret; i++) {
		s->ret = take(&s->b, i, 8);
		if (!s->ret && send_one(&s->b, i, 8))
			s->ret = -11;
	}
	return NULL;
}

/*
 * cross -- a hinted pair across t and u, each side driven by a thread of
 * its own that polls only its own CQ: each context's bias is its thread's,
 * and a pass on one context serves the peer QP on the other (serve_local,
 * a trylock), which must back off while that context's owner is in its
 * section (or the two wait for each other); 0 when every echo came back
 */
static int cross(struct tctx *t, struct tctx *u)
{
	struct stream s;
	pthread_t th;
	uint64_t i;
	int r = 0;

	if (side_open(&s.a, t, 1, 0, NULL) || side_open(&s.b, u, 1, 0, NULL) ||
	    t_connect(s.a.qp, s.b.qp->qp_num, 0, 1, 7, 14, 7) ||
	    t_connect(s.b.qp, s.a.qp->qp_num, 0, 1, 7, 14, 7))
		return 1;
	for (i = 0; i < DEPTH; i++)
		if (recv_one(&s.a, i))
			return 1;
	s.ret = 0;
	atomic_init(&s.posted, 0);
	pthread_create(&th, NULL, echo_run, &s);
	while (!atomic_load(&s.posted))
		sched_yield();
	for (i = 0; i < NSTREAM && !r; i++) {
		r = send_one(&s.a, i, 8) ? -10 : take(&s.a, i, 8);
	}
	pthread_join(th, NULL);
	if (r || s.ret) {
		diag("cross: message %llu: sender %d, echo %d",
		     (unsigned long long)i, r, s.ret);
		r = 2;
	}
	if (side_close(&s.a) || side_close(&s.b))
		r = 3;
	return r;
}

static uint64_t t_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * owners_kept -- cross() on two new contexts: each thread's sends are
 * signalled, so each poll wants the peer QP served (serve_local), but the
 * peer's context is owned by the other thread, which polls it: neither
 * takes the other's word on a poll.  Only a liveness check may (at most
 * once a SOFT_LIVENESS_NS for each QP, when the other thread did not run:
 * often under valgrind, which runs one thread at a time), and the closes
 * at the end, from this thread, one each.  Before, every poll did (a
 * membarrier each): 12,874 and 6,748 revocations.
 */
static void owners_kept(void)
{
	struct tctx t, u;
	soft_lock_t *lt, *lu;
	uint64_t t0, most;
	int r;

	if (t_open(&t, 4) || t_open(&u, 4))
		bail_out("owners kept: open");
	lt = &to_sctx(t.ctx)->lock;
	lu = &to_sctx(u.ctx)->lock;
	t0 = t_now_ns();
	r = cross(&t, &u);
	most = 2 + (t_now_ns() - t0) / SOFT_LIVENESS_NS;
	ok(!r && lt->revokes <= most && lu->revokes <= most,
	   "a pair across two contexts, a thread each: every echo back, a "
	   "bias revoked only by liveness checks and closes (%d; %u and %u "
	   "revocations, at most %llu)",
	   r, lt->revokes, lu->revokes, (unsigned long long)most);
	t_close(&t);
	t_close(&u);
}

/* sleeper -- sleeping_owner's responder thread: posts its receives (the
 * bias of its context is its own), then neither polls nor arms until
 * told, then takes message 0 */
static atomic_int wake_up;

static void *sleeper(void *arg)
{
	struct stream *s = arg;
	struct timespec ts = {0, 1000000};
	uint64_t i;

	for (i = 0; i < DEPTH; i++)
		if (recv_one(&s->b, i))
			s->ret = -12;
	atomic_store(&s->posted, 1);
	while (!atomic_load(&wake_up))
		nanosleep(&ts, NULL);
	if (!s->ret)
		s->ret = take(&s->b, 0, 8);
	return NULL;
}

/*
 * sleeping_owner -- the responder's context is owned by a thread that is
 * alive but does not poll (nor arm): as an HCA does while its process is
 * busy elsewhere, the message is still taken, and the sender's signalled
 * SEND completes, through the sender's liveness check (serve_local
 * without regard to the owner, tx_qp), within a few SOFT_LIVENESS_NS.
 */
static void sleeping_owner(void)
{
	struct tctx t, u;
	struct stream s;
	struct ibv_wc wc;
	pthread_t th;
	uint64_t t0;
	int n = 0;

	if (t_open(&t, 4) || t_open(&u, 4) || side_open(&s.a, &t, 1, 0, NULL) ||
	    side_open(&s.b, &u, 1, 0, NULL) ||
	    t_connect(s.a.qp, s.b.qp->qp_num, 0, 1, 7, 14, 7) ||
	    t_connect(s.b.qp, s.a.qp->qp_num, 0, 1, 7, 14, 7))
		bail_out("sleeping owner: open");
	s.ret = 0;
	atomic_init(&s.posted, 0);
	atomic_store(&wake_up, 0);
	pthread_create(&th, NULL, sleeper, &s);
	while (!atomic_load(&s.posted))
		sched_yield();
	t0 = t_now_ns();
	if (send_one(&s.a, 0, 8))
		n = -1;
	while (!n && t_now_ns() - t0 < 2000000000ull)
		n = ibv_poll_cq(s.a.cq, 1, &wc);
	ok(n == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND,
	   "a responder whose owner does not poll: the SEND completes (%d, "
	   "after %llu ms)",
	   n, (unsigned long long)((t_now_ns() - t0) / 1000000));
	atomic_store(&wake_up, 1);
	pthread_join(th, NULL);
	is_int(s.ret, 0, "... and its receive was placed, intact");
	ok(!side_close(&s.a) && !side_close(&s.b), "sleeping owner: closed");
	t_close(&t);
	t_close(&u);
}

/* test_threads -- threads(), as it is (the bias goes off after many
 * revocations) and, in a child, with SOFTRDMA_TEST_BIAS_KEEP=1 (every
 * lock of another thread revokes: the exclusion is tested throughout) */
static void test_threads(struct tctx *t, struct tctx *u)
{
	struct tctx t2, u2;
	int st = 0;
	pid_t pid;

	is_int(threads(t, u), 0,
	       "three streams on the same two contexts, two hinted: all "
	       "delivered in order");
	two_owners();
	is_int(cross(t, u), 0,
	       "a hinted pair across two contexts, a thread each: every echo "
	       "back, in order");
	owners_kept();
	sleeping_owner();
	pid = fork();
	if (pid == 0) {
		setenv("SOFTRDMA_TEST_BIAS_KEEP", "1", 1);
		if (t_open(&t2, 4) || t_open(&u2, 4))
			_exit(9);
		st = threads(&t2, &u2);
		if (!st)
			st = cross(&t2, &u2) ? 6 : 0;
		t_close(&t2);
		t_close(&u2);
		_exit(st);
	}
	waitpid(pid, &st, 0);
	is_int(WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st), 0,
	       "the same with the bias kept (every other lock revokes it)");
}

/* paced_sender -- the peer process: NPACED SENDs, 300 us apart */
static int paced_sender(int rfd, int wfd)
{
	struct tctx t;
	struct side s;
	uint32_t qpn;
	uint64_t i;
	struct ibv_wc wc;
	char c;

	if (t_open(&t, 4) || side_open(&s, &t, 0, 0, NULL))
		return 1;
	t_xsend(wfd, &s.qp->qp_num, 4);
	t_xrecv(rfd, &qpn, 4);
	if (t_connect(s.qp, qpn, 0, 1, 7, 14, 7))
		return 2;
	t_xrecv(rfd, &c, 1);
	for (i = 0; i < NPACED; i++) {
		if (send_one(&s, i, 8) || t_wait(s.cq, &wc, 1, WAIT_MS) != 1 ||
		    wc.status != IBV_WC_SUCCESS)
			return 3;
		usleep(300);
	}
	t_xrecv(rfd, &c, 1);
	if (side_close(&s))
		return 4;
	t_close(&t);
	return 0;
}

/* event_receiver -- a process whose hinted CQ waits on its channel while
 * paced_sender posts; NODIRECT: the progress thread serves it.  Exit 0
 * when every message came, in order, through events. */
static int event_receiver(int nodirect)
{
	struct ibv_comp_channel *ch;
	struct pollfd p;
	struct ibv_cq *ecq;
	struct ibv_wc wc[8];
	struct tctx t;
	struct side s;
	int rfd, wfd, st = 0, n, j, events = 0;
	uint64_t got = 0;
	uint32_t qpn;
	void *ectx;
	pid_t pid;

	if (nodirect)
		setenv("SOFTRDMA_NO_DIRECT_WAKE", "1", 1);
	pid = t_spawn(paced_sender, &rfd, &wfd);
	if (pid < 0 || t_open(&t, 4))
		return 10;
	ch = ibv_create_comp_channel(t.ctx);
	if (!ch || side_open(&s, &t, 1, 0, ch))
		return 11;
	t_xsend(wfd, &s.qp->qp_num, 4);
	t_xrecv(rfd, &qpn, 4);
	if (t_connect(s.qp, qpn, 0, 1, 7, 14, 7))
		return 12;
	for (j = 0; j < DEPTH; j++)
		recv_one(&s, (uint64_t)j);
	t_xsend(wfd, "g", 1);
	while (got < NPACED) {
		if (ibv_req_notify_cq(s.cq, 0))
			return 13;
		/* poll after arming: what came before raises no event */
		n = ibv_poll_cq(s.cq, 8, wc);
		if (!n) {
			p.fd = ch->fd;
			p.events = POLLIN;
			if (poll(&p, 1, 5000) != 1)
				return 14; /* no event within 5 s */
			if (ibv_get_cq_event(ch, &ecq, &ectx)) {
				if (errno == EAGAIN)
					continue; /* a hint for nothing */
				return 15;
			}
			if (ecq != s.cq)
				return 16;
			ibv_ack_cq_events(ecq, 1);
			events++;
			n = ibv_poll_cq(s.cq, 8, wc);
		}
		for (j = 0; j < n; j++) {
			if (wc[j].status != IBV_WC_SUCCESS ||
			    wc[j].wr_id != 1000000 + got ||
			    s.buf[BUFSZ * (1 + got % DEPTH)] != (char)(got * 7))
				return 17;
			if (recv_one(&s, got + DEPTH))
				return 18;
			got++;
		}
	}
	t_xsend(wfd, "e", 1);
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		return 19;
	if (!events)
		return 20;
	if (side_close(&s) || ibv_destroy_comp_channel(ch))
		return 21;
	t_close(&t);
	close(rfd);
	close(wfd);
	return 0;
}

static void test_events(int nodirect)
{
	int st = 0;
	pid_t pid = fork();

	if (pid == 0)
		_exit(event_receiver(nodirect));
	waitpid(pid, &st, 0);
	is_int(WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st), 0,
	       nodirect ? "hinted CQ on a channel, the progress thread serving "
			  "it: every message through events, in order"
			: "hinted CQ on a channel, direct wake-up: every "
			  "message through events, in order");
}

/* auto_run -- the second thread of test_auto: one round trip on its
 * own pair, each call of it taking the bias from the main thread */
static void *auto_run(void *arg)
{
	struct stream *s = arg;

	s->ret = pingpong(&s->a, &s->b, s->next++, 1, 8);
	return NULL;
}

/* test_auto -- the bias of calls without hints (fresh contexts) */
static void test_auto(void)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 4,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
	};
	struct ibv_poll_cq_attr pa = {0};
	struct ibv_cq_ex *cx;
	struct tctx t, u;
	struct stream m, o;
	soft_lock_t *l;
	pthread_t th;
	int i, r = 0;

	if (t_open(&t, 4) || t_open(&u, 4))
		bail_out("open");
	l = &to_sctx(t.ctx)->lock;
	m.next = o.next = 0;
	if (side_open(&m.a, &t, 0, 0, NULL) ||
	    side_open(&m.b, &u, 0, 0, NULL) ||
	    side_open(&o.a, &t, 0, 0, NULL) ||
	    side_open(&o.b, &u, 0, 0, NULL) || pair_up(&m.a, &m.b) ||
	    pair_up(&o.a, &o.b))
		bail_out("auto: pairs");
	is_int(pingpong(&m.a, &m.b, m.next, 100, 8), 0,
	       "auto: 100 round trips of one thread, no hints");
	m.next += 100;
	ok(atomic_load(&l->v) == SOFT_LOCK_BIASED &&
		   atomic_load(&l->bias) != 0 &&
		   atomic_load(&l->bias) != SOFT_BIAS_OFF &&
		   l->revoke_max == SOFT_BIAS_AUTO,
	   "auto: the context rests biased for that thread, budget %u "
	   "(word %#x, bias %u, budget %u)",
	   SOFT_BIAS_AUTO, (unsigned)atomic_load(&l->v),
	   (unsigned)atomic_load(&l->bias), l->revoke_max);
	/* the main thread's round trip biases it again, the other's takes
	 * it back: each round one revocation, until the bias goes off */
	for (i = 0; i < 2 * SOFT_BIAS_AUTO && !r; i++) {
		r = pingpong(&m.a, &m.b, m.next++, 1, 8);
		pthread_create(&th, NULL, auto_run, &o);
		pthread_join(th, NULL);
		r = r ? r : o.ret;
	}
	is_int(r, 0, "auto: two threads by turns, every message arrived");
	ok(atomic_load(&l->bias) == SOFT_BIAS_OFF &&
		   l->revokes == SOFT_BIAS_AUTO,
	   "auto: the bias went off after %u revocations (bias %u, %u)",
	   SOFT_BIAS_AUTO, (unsigned)atomic_load(&l->bias), l->revokes);
	is_int(pingpong(&m.a, &m.b, m.next, 100, 8), 0,
	       "auto: the lock as before, 100 more round trips");
	ok(!side_close(&m.a) && !side_close(&m.b) && !side_close(&o.a) &&
		   !side_close(&o.b),
	   "auto: closed");
	t_close(&t);
	t_close(&u);

	/* hinted calls first: the long budget */
	if (t_open(&t, 4) || t_open(&u, 4))
		bail_out("open");
	l = &to_sctx(t.ctx)->lock;
	if (side_open(&o.a, &t, 1, 0, NULL) ||
	    side_open(&o.b, &u, 1, 0, NULL) || pair_up(&o.a, &o.b))
		bail_out("auto: pairs");
	r = pingpong(&o.a, &o.b, 0, 10, 8);
	ok(!r && atomic_load(&l->v) == SOFT_LOCK_BIASED &&
		   l->revoke_max == SOFT_BIAS_REVOKES,
	   "auto: a context first used with hints: budget %u (%u, %d)",
	   SOFT_BIAS_REVOKES, l->revoke_max, r);
	ok(!side_close(&o.a) && !side_close(&o.b), "auto: closed");
	t_close(&t);
	t_close(&u);

	/* ibv_start_poll on a CQ without the hint: as ibv_poll_cq */
	if (t_open(&t, 4))
		bail_out("open");
	l = &to_sctx(t.ctx)->lock;
	cx = ibv_create_cq_ex(t.ctx, &ca);
	r = cx ? ibv_start_poll(cx, &pa) : -1;
	ok(r == ENOENT && atomic_load(&l->v) == SOFT_LOCK_BIASED &&
		   atomic_load(&l->bias) != 0 &&
		   atomic_load(&l->bias) != SOFT_BIAS_OFF &&
		   l->revoke_max == SOFT_BIAS_AUTO,
	   "auto: start_poll without hints biases, budget %u (%d, word "
	   "%#x, budget %u)",
	   SOFT_BIAS_AUTO, r, (unsigned)atomic_load(&l->v), l->revoke_max);
	ok(cx && !ibv_destroy_cq(ibv_cq_ex_to_cq(cx)), "auto: closed");
	t_close(&t);
}

int main(void)
{
	struct tctx t, u;

	t_isolate("hints");
	if (t_open(&t, 4) || t_open(&u, 4))
		bail_out("open");
	test_bad_input(&t, &u);
	test_data(&t, &u);
	test_threads(&t, &u);
	t_close(&t);
	t_close(&u);
	test_events(0);
	test_events(1);
	test_auto();
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
