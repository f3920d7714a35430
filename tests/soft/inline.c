/* SPDX-License-Identifier: MIT */
/*
 * inline.c -- large inline sends on an RC QP: created with
 * max_inline_data up to the device's limit (and the grant reported), one
 * byte above refused; SENDs of 1, 512, 513, 4096 and max_inline_data bytes
 * posted inline from a buffer scribbled over as soon as the post returns
 * arrive intact (the bytes are the WQE's at post time); max_inline_data + 1
 * is refused at post (EINVAL) and nothing arrives; a burst of inline sends
 * posted while the receiver does not poll arrives intact and in order
 * (the QP's copy ring holds its send queue of them; copyring.c fills the
 * ring, and the inline ones past it are copied aside and freed).  On two
 * contexts and on one.
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
#define BURST	   48 /* x ASK bytes, posted at once */
#define WAIT_MS	   30000

/* each side's buf: DEPTH receive buffers of ASK bytes */
static struct tside a, b;
static uint32_t granted;

/* side_open -- a side (on share's context, or its own) */
static void side_open(struct tside *s, const struct tctx *share)
{
	if (t_side_open(s, share, 4 * DEPTH, (size_t)DEPTH * ASK))
		bail_out("setup");
}

/* mkqp -- an RC QP of s asking for inl bytes inline; *got: the grant */
static struct ibv_qp *mkqp(struct tside *s, uint32_t inl, uint32_t *got)
{
	struct ibv_qp_cap cap = {.max_send_wr = DEPTH,
				 .max_recv_wr = DEPTH,
				 .max_send_sge = 2,
				 .max_recv_sge = 1,
				 .max_inline_data = inl};
	struct ibv_qp *qp = t_side_qp(s, &cap);

	if (got)
		*got = cap.max_inline_data;
	return qp;
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
	t_fill(p, n, seed);
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
		   wc.byte_len == n && wc.wr_id == 0 && t_filled(b.buf, n, n),
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
	if (t_side_connect(&a, &b))
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

	/* a burst, the receiver not polling: the first
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
			t_filled(b.buf + (size_t)i * ASK, ASK,
				 100u + (unsigned)i);
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
	t_side_close(&b);
	side_open(&b, &a.t);
	run("one context");
	t_side_close(&b);
	t_side_close(&a);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
