/* SPDX-License-Identifier: MIT */
/*
 * inline.c -- large inline sends on an RC QP: created with
 * max_inline_data up to the device's limit (and the grant reported), one
 * byte above refused; SENDs of 1, 512, 513, 4096 and max_inline_data bytes
 * posted inline from a buffer scribbled over as soon as the post returns
 * arrive intact (the bytes are the WQE's at post time); max_inline_data + 1
 * is refused at post (EINVAL) and nothing arrives; a burst of inline sends
 * larger than the copy ring (256 KiB) posted while the receiver does not
 * poll arrives intact and in order (the ones past the ring are copied
 * aside, and freed: valgrind).  On two contexts and on one.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

#define MAX_INLINE 16384       /* SOFT_MAX_INLINE */
#define ASK	   (8192 + 64) /* rdmamsg's eager size and its header */
#define DEPTH	   64
#define BURST	   48 /* x ASK bytes: more than the copy ring's 256 KiB */
#define WAIT_MS	   30000

struct side {
	struct tctx t;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf; /* DEPTH receive buffers of ASK bytes */
};

static struct side a, b;
static uint32_t granted;

static void side_open(struct side *s, struct tctx *share)
{
	if (share) {
		s->t = *share;
	} else if (t_open(&s->t, 16)) {
		bail_out("open");
	}
	s->cq = ibv_create_cq(s->t.ctx, 4 * DEPTH, NULL, NULL, 0);
	s->buf = calloc(DEPTH, ASK);
	if (!s->cq || !s->buf)
		bail_out("setup");
	s->mr = ibv_reg_mr(s->t.pd, s->buf, (size_t)DEPTH * ASK,
			   IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr)
		bail_out("reg_mr");
}

static void side_close(struct side *s, int own)
{
	ibv_dereg_mr(s->mr);
	ibv_destroy_cq(s->cq);
	if (own)
		t_close(&s->t);
	free(s->buf);
}

static struct ibv_qp *mkqp(struct side *s, uint32_t inl, uint32_t *got)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = DEPTH;
	ia.cap.max_recv_wr = DEPTH;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = inl;
	ia.send_cq = ia.recv_cq = s->cq;
	errno = 0;
	qp = ibv_create_qp(s->t.pd, &ia);
	if (got)
		*got = ia.cap.max_inline_data;
	return qp;
}

static void fill(char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (char)(seed * 31 + i * 7 + 1);
}

static int check(const char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != (char)(seed * 31 + i * 7 + 1))
			return 0;
	return 1;
}

/* post_inline -- one signalled inline SEND of n bytes from a heap buffer
 * freed (after a scribble) as soon as the post returns */
static int post_inline(uint32_t n, unsigned seed, uint64_t wr_id)
{
	char *p = malloc(n ? n : 1);
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad = NULL;
	int ret;

	if (!p)
		bail_out("malloc");
	fill(p, n, seed);
	sge.addr = (uintptr_t)p;
	sge.length = n;
	sge.lkey = 0; /* inline: no key needed */
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
	ret = ibv_post_send(a.qp, &wr, &bad);
	memset(p, 0xee, n);
	free(p);
	return ret;
}

static void recv_slot(int i)
{
	if (t_post_recv(b.qp, b.buf + (size_t)i * ASK, ASK, b.mr->lkey,
			(uint64_t)i))
		bail_out("post_recv");
}

/* one_size -- an inline SEND of n bytes arrives intact */
static void one_size(uint32_t n, const char *what)
{
	struct ibv_wc wc;

	memset(b.buf, 0, ASK);
	recv_slot(0);
	ok(post_inline(n, n, 1000 + n) == 0, "%s: post %u inline", what, n);
	ok(t_wait(b.cq, &wc, 1, WAIT_MS) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.byte_len == n && wc.wr_id == 0 && check(b.buf, n, n),
	   "%s: %u bytes delivered intact", what, n);
	ok(t_wait(a.cq, &wc, 1, WAIT_MS) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.wr_id == 1000 + n,
	   "%s: %u bytes: send completion", what, n);
}

static void run(const char *what)
{
	struct ibv_wc wc[DEPTH], swc[DEPTH];
	int i, n, m, got, nsent, good;

	a.qp = mkqp(&a, ASK, &granted);
	b.qp = mkqp(&b, 16, NULL);
	if (!a.qp || !b.qp)
		bail_out("create_qp");
	ok(granted >= ASK, "%s: inline %u asked, %u granted", what, ASK,
	   granted);
	if (t_connect(a.qp, b.qp->qp_num, 0, 12, 7, 14, 7) ||
	    t_connect(b.qp, a.qp->qp_num, 0, 12, 7, 14, 7))
		bail_out("connect");
	one_size(1, what);
	one_size(512, what);
	one_size(513, what);
	one_size(4096, what);
	one_size(granted, what);

	/* one byte too many: refused at post, nothing sent */
	recv_slot(0);
	ok(post_inline(granted + 1, 3, 9) == EINVAL,
	   "%s: inline %u (max + 1): EINVAL", what, granted + 1);
	ok(t_wait(b.cq, wc, 1, 200) == 0 && t_wait(a.cq, wc, 1, 200) == 0,
	   "%s: nothing delivered, no completion", what);

	/* a burst past the copy ring, the receiver not polling: the first
	 * receive is still posted (wr_id 0), BURST - 1 more */
	for (i = 1; i < BURST; i++)
		recv_slot(i);
	for (i = 0; i < BURST; i++)
		if (post_inline(ASK, 100u + (unsigned)i, 2000u + (unsigned)i))
			break;
	ok(i == BURST, "%s: %d of %d inline sends of %u bytes posted", what, i,
	   BURST, ASK);
	/* both sides polled: where process_vm is refused (novm.sh) the
	 * sender's poll hands the bytes copied aside over in chunks */
	for (i = 0, got = 0, nsent = 0;
	     i < WAIT_MS && (got < BURST || nsent < BURST);) {
		n = ibv_poll_cq(b.cq, BURST - got, wc + got);
		got += n > 0 ? n : 0;
		m = ibv_poll_cq(a.cq, BURST - nsent, swc + nsent);
		nsent += m > 0 ? m : 0;
		if (n <= 0 && m <= 0 && usleep(1000) == 0)
			i++; /* a millisecond without news */
	}
	for (i = 0, good = 0; i < got; i++)
		good += wc[i].status == IBV_WC_SUCCESS &&
			wc[i].wr_id == (uint64_t)i && wc[i].byte_len == ASK &&
			check(b.buf + (size_t)i * ASK, ASK, 100u + (unsigned)i);
	ok(good == BURST, "%s: %d of %d delivered intact, in order", what, good,
	   BURST);
	for (i = 0, good = 0; i < nsent; i++)
		good += swc[i].status == IBV_WC_SUCCESS &&
			swc[i].wr_id == 2000u + (unsigned)i;
	ok(good == BURST, "%s: %d of %d send completions, in order", what, good,
	   BURST);

	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
}

static void caps(void)
{
	struct ibv_qp *qp;
	uint32_t got = 0;

	qp = mkqp(&a, MAX_INLINE, &got);
	ok(qp && got == MAX_INLINE, "inline %u: created, %u granted",
	   MAX_INLINE, got);
	if (qp)
		ibv_destroy_qp(qp);
	qp = mkqp(&a, MAX_INLINE + 1, NULL);
	ok(!qp && errno == EINVAL, "inline %u: EINVAL", MAX_INLINE + 1);
	if (qp)
		ibv_destroy_qp(qp);
}

int main(void)
{
	t_isolate("inline");
	side_open(&a, NULL);
	side_open(&b, NULL);
	caps();
	run("two contexts");
	side_close(&b, 1);
	side_open(&b, &a.t);
	run("one context");
	side_close(&b, 0);
	side_close(&a, 1);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
