/* SPDX-License-Identifier: MIT */
/*
 * fastpath.c -- the small-SEND fast path (soft/data.c post_send_fast,
 * rx_fast) gives what the general path gives: several SGEs gathered,
 * inline and not, SEND_WITH_IMM, zero bytes, the slot's size and one byte
 * more, a receive WQE of two SGEs, and the errors the fast path leaves to
 * the general one (inline over max_inline_data, a bad lkey in a later SGE,
 * a receive too small, a receive lkey that is not valid), each with the
 * right status on both sides and nothing delivered that should not be;
 * and the receive fast paths (rc_post_recv_one; rc_post_recv_chain, a
 * chain of one-SGE WRs) leave a full queue (ENOMEM), an SGE with no list
 * (EINVAL) and a QP in ERR (flushed) to the general one, at the right WR
 * of a chain, with the WRs before it posted and none after; so does a
 * chain of SENDs (post_send_fast WR by WR: rc_post_chain), delivered in
 * order and intact, one past the slot in its middle too.
 * On two contexts (the cross-context ring) and on one.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "common.h"

#define BUFSZ	     8192
#define SLOT_PAYLOAD 960 /* SOFT_SLOT_PAYLOAD: bytes a slot carries */
#define WAIT_MS	     30000

static struct tside a, b;

/* side_open -- a side of BUFSZ bytes (on share's context, or its own) */
static void side_open(struct tside *s, const struct tctx *share)
{
	if (t_side_open(s, share, 64, BUFSZ))
		bail_out("setup");
}

static void pair(void)
{
	struct ibv_qp_cap cap = {.max_send_wr = 8,
				 .max_recv_wr = 8,
				 .max_send_sge = 4,
				 .max_recv_sge = 2,
				 .max_inline_data = 64};
	struct ibv_qp_cap cap_b = cap;

	a.qp = t_side_qp(&a, &cap);
	b.qp = t_side_qp(&b, &cap_b);
	if (!a.qp || !b.qp)
		bail_out("create_qp");
	if (t_side_connect(&a, &b))
		bail_out("connect");
}

static void unpair(void)
{
	struct ibv_wc wc[16];

	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	while (ibv_poll_cq(a.cq, 16, wc) > 0)
		;
	while (ibv_poll_cq(b.cq, 16, wc) > 0)
		;
}

/* send -- one SEND-type WR of n SGEs from a's buffer (sg[i] = {off, len}
 * pairs; lkey 0: a's MR); ibv_post_send's result */
static int send_sges(enum ibv_wr_opcode op, int flags, uint32_t imm,
		     const uint32_t (*sg)[2], int n, uint32_t bad_lkey_at)
{
	struct ibv_sge sge[4];
	struct ibv_send_wr wr, *bad = NULL;
	int i;

	for (i = 0; i < n; i++) {
		sge[i].addr = (uintptr_t)(a.buf + sg[i][0]);
		sge[i].length = sg[i][1];
		sge[i].lkey = (uint32_t)i + 1 == bad_lkey_at
				      ? a.mr->lkey + 0x100
				      : a.mr->lkey;
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 77;
	wr.sg_list = sge;
	wr.num_sge = n;
	wr.opcode = op;
	wr.send_flags = (unsigned)flags | IBV_SEND_SIGNALED;
	wr.imm_data = htobe32(imm);
	return ibv_post_send(a.qp, &wr, &bad);
}

/* recv_at -- a receive into b's buffer at off, len (and a second SGE of
 * len2 at off2 when len2) */
static void recv_at(uint32_t off, uint32_t len, uint32_t off2, uint32_t len2,
		    uint32_t lkey)
{
	struct ibv_sge sge[2] = {
		{(uintptr_t)(b.buf + off), len, lkey ? lkey : b.mr->lkey},
		{(uintptr_t)(b.buf + off2), len2, b.mr->lkey},
	};
	struct ibv_recv_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 99;
	wr.sg_list = sge;
	wr.num_sge = len2 ? 2 : 1;
	if (ibv_post_recv(b.qp, &wr, &bad))
		bail_out("post_recv");
}

/* recv_id -- one receive WR of b of nsge SGEs (1 or 0) at off, 8 bytes,
 * sg_list NULL when !list; ibv_post_recv's result, *was_bad: bad == &wr */
static int recv_id(uint64_t id, uint32_t off, int nsge, int list, int *was_bad)
{
	struct ibv_sge sge = {(uintptr_t)(b.buf + off), 8, b.mr->lkey};
	struct ibv_recv_wr wr, *bad = NULL;
	int ret;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = list ? &sge : NULL;
	wr.num_sge = nsge;
	ret = ibv_post_recv(b.qp, &wr, &bad);
	*was_bad = bad == &wr;
	return ret;
}

/* one -- wait for one completion on cq */
static int one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return t_wait(cq, wc, 1, WAIT_MS);
}

/*
 * recv_chain -- one ibv_post_recv of a chain of n receive WRs of b (n at
 * most 16): WR k has wr_id base + k and one SGE of 8 bytes at 8 * k of b's
 * buffer, except WR odd_at, which has odd_nsge SGEs (0: sg_list NULL; 2 or
 * 3: 8 bytes at 512 + 64 * k, 4 at 1024 + 64 * k, 4 at 1536 + 64 * k);
 * its result, *bad_at the index of *bad (-1: not set, -2: not in the chain)
 */
static int recv_chain(uint64_t base, int n, int odd_at, int odd_nsge,
		      int *bad_at)
{
	struct ibv_sge sge[16][3];
	struct ibv_recv_wr wr[16], *bad = NULL;
	int k, j, ret;

	memset(wr, 0, sizeof(wr));
	for (k = 0; k < n; k++) {
		sge[k][0] = (struct ibv_sge){(uintptr_t)(b.buf + 8 * k), 8,
					     b.mr->lkey};
		wr[k].wr_id = base + (uint64_t)k;
		wr[k].sg_list = sge[k];
		wr[k].num_sge = 1;
		wr[k].next = k + 1 < n ? &wr[k + 1] : NULL;
		if (k != odd_at)
			continue;
		wr[k].num_sge = odd_nsge;
		wr[k].sg_list = odd_nsge ? sge[k] : NULL;
		for (j = 0; j < odd_nsge; j++)
			sge[k][j] = (struct ibv_sge){
				(uintptr_t)(b.buf + 512 * (j + 1) + 64 * k),
				j ? 4 : 8, b.mr->lkey};
	}
	ret = ibv_post_recv(b.qp, wr, &bad);
	*bad_at = !bad ? -1 : bad >= wr && bad < wr + n ? (int)(bad - wr) : -2;
	return ret;
}

/* flushed -- b to ERR, then the wr_ids of its flushed receives in order
 * (at most max), each checked to be a flush; their count, -1 when one was
 * not a flush */
static int flushed(uint64_t *ids, int max)
{
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_ERR};
	struct ibv_wc wc;
	int n = 0;

	if (ibv_modify_qp(b.qp, &at, IBV_QP_STATE))
		return -1;
	while (n < max && t_wait(b.cq, &wc, 1, 200) == 1) {
		if (wc.status != IBV_WC_WR_FLUSH_ERR)
			return -1;
		ids[n++] = wc.wr_id;
	}
	return n;
}

/* ids_are -- ids[0..n) are base + 0 .. n - 1 */
static int ids_are(const uint64_t *ids, int n, uint64_t base)
{
	int k;

	for (k = 0; k < n; k++)
		if (ids[k] != base + (uint64_t)k)
			return 0;
	return 1;
}

/* deliver -- n 8-byte SENDs from a, each to be received by b's WR
 * base + k into 8 * k of its buffer; how many were, in order */
static int deliver(uint64_t base, int n)
{
	static const uint32_t eight[1][2] = {{0, 8}};
	struct ibv_wc wc;
	uint64_t k;

	for (k = 0; k < (uint64_t)n; k++) {
		memcpy(a.buf, &k, 8);
		if (send_sges(IBV_WR_SEND, 0, 0, eight, 1, 0) ||
		    one(b.cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS ||
		    wc.wr_id != base + k || wc.byte_len != 8 ||
		    memcmp(b.buf + 8 * k, &k, 8) || one(a.cq, &wc) != 1 ||
		    wc.status != IBV_WC_SUCCESS)
			break;
	}
	return (int)k;
}

/*
 * chains -- receive chains (rc_post_recv_chain takes a chain of one-SGE
 * WRs): one that fills the queue exactly and is delivered in order, one
 * WR too many (ENOMEM at it, the ones before posted), one that wraps the
 * ring, an odd WR in the middle (num_sge 0 and 2 posted, 3 refused at
 * it), RESET and ERR
 */
/*
 * split -- a poll that finds the CQ empty takes its pass's completions
 * straight into its array (soft/data.c cq_slot), the rest into the CQ:
 * 8 SENDs waiting, a poll of 3 gets the first 3, in order, and the next
 * poll the other 5; then the same with completions already in the CQ
 */
static void split(void)
{
	static const uint32_t eight[1][2] = {{0, 8}};
	struct ibv_wc wc[16];
	int bad_at, k, n, bad = 0;

	pair();
	ok(!recv_chain(100, 8, -1, 1, &bad_at), "8 receives");
	for (k = 0; k < 8; k++)
		bad |= send_sges(IBV_WR_SEND, 0, 0, eight, 1, 0);
	ok(!bad, "8 SENDs posted, none polled");
	n = ibv_poll_cq(b.cq, 3, wc);
	ok(n == 3 && wc[0].wr_id == 100 && wc[1].wr_id == 101 &&
		   wc[2].wr_id == 102,
	   "a poll of 3: the first 3 (%d)", n);
	for (k = 0; k < n; k++)
		bad |= wc[k].status != IBV_WC_SUCCESS || wc[k].byte_len != 8 ||
		       wc[k].opcode != IBV_WC_RECV ||
		       wc[k].qp_num != b.qp->qp_num;
	ok(!bad, "each a successful RECV of 8 bytes on b's QP");
	n = t_wait(b.cq, wc, 5, WAIT_MS);
	bad = n != 5;
	for (k = 0; k < n; k++)
		bad |= wc[k].wr_id != 103 + (uint64_t)k ||
		       wc[k].status != IBV_WC_SUCCESS;
	ok(!bad, "then the other 5, in order (%d)", n);
	is_int(t_wait(a.cq, wc, 8, WAIT_MS), 8, "the 8 send completions");
	ok(!ibv_poll_cq(b.cq, 16, wc) && !ibv_poll_cq(a.cq, 16, wc),
	   "nothing more");
	unpair();
}

static void chains(void)
{
	uint64_t ids[32];
	struct ibv_wc wc;
	int bad_at, n;

	pair();
	ok(!recv_chain(100, 8, -1, 1, &bad_at) && bad_at == -1,
	   "a chain of 8 fills max_recv_wr 8: posted, *bad untouched");
	ok(recv_id(200, 512, 1, 1, &n) == ENOMEM && n, "then one more: ENOMEM");
	is_int(deliver(100, 8), 8, "the chain's 8 receive 8 SENDs in order");
	ok(!recv_chain(210, 3, -1, 1, &bad_at), "a chain of 3");
	is_int(deliver(210, 3), 3, "its 3 receive 3 SENDs");
	ok(!recv_chain(220, 8, -1, 1, &bad_at),
	   "a chain of 8 that wraps the ring (16) in its middle");
	is_int(deliver(220, 8), 8, "its 8 receive 8 SENDs in order");
	ok(!recv_chain(300, 5, -1, 1, &bad_at),
	   "after they completed, a chain of 5");
	ok(recv_chain(400, 4, -1, 1, &bad_at) == ENOMEM && bad_at == 3,
	   "a chain of 4 with room for 3: ENOMEM, *bad the 4th WR");
	n = flushed(ids, 32);
	ok(n == 8 && ids_are(ids, 5, 300) && ids_are(ids + 5, 3, 400),
	   "the 5 and the 3 before the refused WR posted, in order (%d)", n);
	unpair();

	pair();
	ok(recv_chain(500, 12, -1, 1, &bad_at) == ENOMEM && bad_at == 8,
	   "a chain of 12 on an empty queue of 8: ENOMEM at the 9th");
	n = flushed(ids, 32);
	ok(n == 8 && ids_are(ids, n, 500),
	   "its first 8 posted, none after (%d)", n);
	unpair();

	pair();
	ok(!recv_chain(600, 4, 1, 0, &bad_at) && bad_at == -1,
	   "num_sge 0 (no list) second of 4: posted");
	ok(!recv_chain(700, 4, 2, 2, &bad_at) && bad_at == -1,
	   "num_sge 2 third of 4: posted");
	n = flushed(ids, 32);
	ok(n == 8 && ids_are(ids, 4, 600) && ids_are(ids + 4, 4, 700),
	   "all 8 posted, in order (%d)", n);
	unpair();

	pair();
	ok(recv_chain(800, 4, 2, 3, &bad_at) == EINVAL && bad_at == 2,
	   "num_sge 3 (max_recv_sge 2) third of 4: EINVAL at it");
	ok(recv_chain(900, 3, 1, 1, &bad_at) == 0, "then a chain of 3");
	{
		struct ibv_sge sge = {(uintptr_t)b.buf, 8, b.mr->lkey};
		struct ibv_recv_wr w[2] = {
			{.wr_id = 950,
			 .sg_list = &sge,
			 .num_sge = 1,
			 .next = &w[1]},
			{.wr_id = 951, .sg_list = NULL, .num_sge = 1}};
		struct ibv_recv_wr *badp = NULL;

		ok(ibv_post_recv(b.qp, w, &badp) == EINVAL && badp == &w[1],
		   "num_sge 1 with no list second of 2: EINVAL at it");
	}
	n = flushed(ids, 32);
	ok(n == 6 && ids_are(ids, 2, 800) && ids_are(ids + 2, 3, 900) &&
		   ids[5] == 950,
	   "the WRs before each refused one posted, none after (%d)", n);
	ok(!recv_chain(1000, 6, -1, 1, &bad_at) && bad_at == -1,
	   "a chain of 6 in ERR: accepted");
	n = flushed(ids, 32);
	ok(n == 6 && ids_are(ids, n, 1000), "and flushed, in order (%d)", n);
	{
		struct ibv_qp_attr at = {.qp_state = IBV_QPS_RESET};

		ok(!ibv_modify_qp(b.qp, &at, IBV_QP_STATE), "b to RESET");
	}
	ok(recv_chain(1100, 3, -1, 1, &bad_at) == EINVAL && bad_at == 0,
	   "a chain in RESET: EINVAL at its first WR");
	ok(t_wait(b.cq, &wc, 1, 100) == 0, "nothing of it completed");
	unpair();
}

/*
 * send_chain -- one ibv_post_send of a chain of n signalled SENDs from a
 * (n at most 16): WR k has wr_id base + k and 8 bytes at 8 * k of a's
 * buffer (the number base + k), except WR odd_at: SLOT_PAYLOAD + 40 bytes
 * at 4096 (past the slot: the copy ring) when odd_nsge is 1, otherwise
 * odd_nsge SGEs; its result, *bad_at as recv_chain's
 */
static int send_chain(uint64_t base, int n, int odd_at, int odd_nsge,
		      int *bad_at)
{
	struct ibv_sge sge[16][5];
	struct ibv_send_wr wr[16], *bad = NULL;
	uint64_t v;
	int k, j, ret;

	memset(wr, 0, sizeof(wr));
	for (k = 0; k < n; k++) {
		v = base + (uint64_t)k;
		memcpy(a.buf + 8 * k, &v, 8);
		for (j = 0; j < 5; j++)
			sge[k][j] = (struct ibv_sge){(uintptr_t)(a.buf + 8 * k),
						     8, a.mr->lkey};
		wr[k].wr_id = v;
		wr[k].sg_list = sge[k];
		wr[k].num_sge = 1;
		wr[k].opcode = IBV_WR_SEND;
		wr[k].send_flags = IBV_SEND_SIGNALED;
		wr[k].next = k + 1 < n ? &wr[k + 1] : NULL;
		if (k != odd_at)
			continue;
		if (odd_nsge == 1) {
			sge[k][0].addr = (uintptr_t)(a.buf + 4096);
			sge[k][0].length = SLOT_PAYLOAD + 40;
			t_fill(a.buf + 4096, SLOT_PAYLOAD + 40, 31);
		}
		wr[k].num_sge = odd_nsge;
	}
	ret = ibv_post_send(a.qp, wr, &bad);
	*bad_at = !bad ? -1 : bad >= wr && bad < wr + n ? (int)(bad - wr) : -2;
	return ret;
}

/* got_chain -- b's receives for send_chain's WRs base .. base + n - 1 (the
 * one at big past the slot, into 4096 of its buffer) came in order, each
 * intact, and so did a's n completions; then nothing more on either */
static int got_chain(uint64_t base, int n, int big)
{
	struct ibv_wc wc;
	uint64_t v;
	int k, good = 1;

	for (k = 0; k < n; k++) {
		v = base + (uint64_t)k;
		if (one(b.cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS ||
		    wc.wr_id != v)
			return 0;
		if (k == big)
			good &= wc.byte_len == SLOT_PAYLOAD + 40 &&
				t_filled(b.buf + 4096, SLOT_PAYLOAD + 40, 31);
		else
			good &= wc.byte_len == 8 &&
				!memcmp(b.buf + 8 * k, &v, 8);
		if (one(a.cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS ||
		    wc.wr_id != v)
			return 0;
	}
	return good && ibv_poll_cq(a.cq, 1, &wc) == 0 &&
	       ibv_poll_cq(b.cq, 1, &wc) == 0;
}

/* recv_ids -- n receives of b, wr_id base + k: 8 bytes at 8 * k, the one
 * at big 4 KiB at 4096 */
static void recv_ids(uint64_t base, int n, int big)
{
	int k;

	for (k = 0; k < n; k++) {
		struct ibv_sge sge = {(uintptr_t)(b.buf + 8 * k), 8,
				      b.mr->lkey};
		struct ibv_recv_wr wr, *bad = NULL;

		if (k == big) {
			sge.addr = (uintptr_t)(b.buf + 4096);
			sge.length = 4096;
		}
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = base + (uint64_t)k;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		if (ibv_post_recv(b.qp, &wr, &bad))
			bail_out("post_recv");
	}
}

/*
 * send_chains -- a chain of SENDs goes through post_send_fast WR by WR
 * (soft/data.c rc_post_chain): one of 4 small ones, one with a SEND past
 * the slot in its middle (the ring), each delivered in order and intact;
 * an odd WR in the middle (num_sge 5, max_send_sge 4) refused at it with
 * EINVAL, the WRs before it delivered, none after; 9 on a send queue of
 * 8: ENOMEM at the 9th, the 8 delivered
 */
static void send_chains(void)
{
	int bad_at;

	pair();
	recv_ids(100, 4, -1);
	ok(!send_chain(100, 4, -1, 1, &bad_at) && bad_at == -1,
	   "a chain of 4 SENDs: posted, *bad untouched");
	ok(got_chain(100, 4, -1), "received in order, intact, completed");
	recv_ids(200, 3, 1);
	ok(!send_chain(200, 3, 1, 1, &bad_at) && bad_at == -1,
	   "a chain of 3, its second past the slot: posted");
	ok(got_chain(200, 3, 1), "received in order, intact, completed");
	recv_ids(300, 4, -1);
	ok(send_chain(300, 4, 2, 5, &bad_at) == EINVAL && bad_at == 2,
	   "num_sge 5 (max_send_sge 4) third of 4: EINVAL at it");
	ok(got_chain(300, 2, -1), "the 2 before it delivered, none after");
	unpair();

	pair();
	recv_ids(400, 8, -1);
	ok(send_chain(400, 9, -1, 1, &bad_at) == ENOMEM && bad_at == 8,
	   "a chain of 9 on a send queue of 8: ENOMEM at the 9th");
	ok(got_chain(400, 8, -1), "its first 8 delivered, in order");
	unpair();
}

/* bad_last_lkey -- a SEND of the n SGEs sg whose last has a bad lkey: the
 * sender's IBV_WC_LOC_PROT_ERR, its QP in ERR, nothing delivered */
static void bad_last_lkey(const uint32_t (*sg)[2], int n)
{
	struct ibv_wc wc;

	pair();
	memset(b.buf, 0, BUFSZ);
	recv_at(0, 64, 0, 0, 0);
	ok(send_sges(IBV_WR_SEND, 0, 0, sg, n, (uint32_t)n) == 0,
	   "post %d SGEs, the last with a bad lkey", n);
	ok(one(a.cq, &wc) == 1 && wc.status == IBV_WC_LOC_PROT_ERR &&
		   wc.wr_id == 77,
	   "sender: IBV_WC_LOC_PROT_ERR");
	is_int(t_qp_state(a.qp), IBV_QPS_ERR, "the sender's QP in ERR");
	is_int(ibv_poll_cq(b.cq, 1, &wc), 0, "nothing delivered");
	unpair();
}

static void run(const char *where)
{
	static const uint32_t three[3][2] = {{0, 5}, {100, 0}, {200, 11}};
	static const uint32_t two[2][2] = {{300, 4}, {400, 20}};
	static const uint32_t slot[1][2] = {{0, SLOT_PAYLOAD}};
	static const uint32_t slot1[1][2] = {{0, SLOT_PAYLOAD + 1}};
	static const uint32_t zero[1][2] = {{0, 0}};
	static const uint32_t big_inl[1][2] = {{0, 65}};
	static const uint32_t sixteen[1][2] = {{0, 16}};
	char want[2048];
	struct ibv_wc wc;
	int i;

	diag("%s", where);
	pair();

	/* three SGEs, one empty, not inline */
	t_fill(a.buf, BUFSZ, 1);
	memset(b.buf, 0, BUFSZ);
	recv_at(0, 64, 0, 0, 0);
	is_int(send_sges(IBV_WR_SEND, 0, 0, three, 3, 0), 0, "post 3 SGEs");
	ok(one(a.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.opcode == IBV_WC_SEND && wc.wr_id == 77 &&
		   wc.byte_len == 16,
	   "3 SGEs: send completion, 16 bytes");
	memcpy(want, a.buf, 5);
	memcpy(want + 5, a.buf + 200, 11);
	ok(one(b.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.opcode == IBV_WC_RECV && wc.wr_id == 99 &&
		   wc.byte_len == 16 && !(wc.wc_flags & IBV_WC_WITH_IMM) &&
		   wc.qp_num == b.qp->qp_num && wc.src_qp == a.qp->qp_num,
	   "3 SGEs: receive completion");
	ok(!memcmp(b.buf, want, 16) && b.buf[16] == 0,
	   "3 SGEs: the bytes gathered in order, nothing past them");

	/* SEND_WITH_IMM, inline, two SGEs; the source changed after post */
	t_fill(a.buf, BUFSZ, 2);
	memset(b.buf, 0, BUFSZ);
	recv_at(8, 64, 0, 0, 0);
	memcpy(want, a.buf + 300, 4);
	memcpy(want + 4, a.buf + 400, 20);
	is_int(send_sges(IBV_WR_SEND_WITH_IMM, IBV_SEND_INLINE, 0xabcd1234, two,
			 2, 0),
	       0, "post inline SEND_WITH_IMM of 2 SGEs");
	memset(a.buf, 0x55, 512); /* inline: the data was taken at post */
	ok(one(a.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS,
	   "inline: send completion");
	ok(one(b.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.byte_len == 24 && (wc.wc_flags & IBV_WC_WITH_IMM) &&
		   be32toh(wc.imm_data) == 0xabcd1234,
	   "inline: receive with its immediate");
	ok(!memcmp(b.buf + 8, want, 24), "inline: the bytes as at post time");

	/* zero bytes */
	recv_at(0, 64, 0, 0, 0);
	is_int(send_sges(IBV_WR_SEND, 0, 0, zero, 1, 0), 0, "post 0 bytes");
	ok(one(a.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS,
	   "0 bytes: send completion");
	ok(one(b.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.byte_len == 0,
	   "0 bytes: receive of 0 bytes");

	/* a slot's worth, then one byte more (the general path) */
	for (i = 0; i < 2; i++) {
		t_fill(a.buf, BUFSZ, 3 + (unsigned)i);
		memset(b.buf, 0, BUFSZ);
		recv_at(0, 2048, 0, 0, 0);
		is_int(send_sges(IBV_WR_SEND, 0, 0, i ? slot1 : slot, 1, 0), 0,
		       i ? "post a slot + 1" : "post a slot's payload");
		ok(one(a.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS,
		   "slot: send completion");
		ok(one(b.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
			   wc.byte_len == SLOT_PAYLOAD + (uint32_t)i,
		   "slot: receive length");
		ok(!memcmp(b.buf, a.buf, SLOT_PAYLOAD + (size_t)i) &&
			   b.buf[SLOT_PAYLOAD + i] == 0,
		   "slot: the bytes");
	}

	/* two SGEs (a header and its data): a slot's worth, one byte more,
	 * and a second SGE past the slot alone (the general path) */
	for (i = 0; i < 3; i++) {
		uint32_t want_len = SLOT_PAYLOAD + (i == 1) + (i == 2) * 100;
		const uint32_t two_sl[2][2] = {{0, 16}, {16, want_len - 16}};

		t_fill(a.buf, BUFSZ, 7 + (unsigned)i);
		memset(b.buf, 0, BUFSZ);
		recv_at(0, 2048, 0, 0, 0);
		ok(!send_sges(IBV_WR_SEND, 0, 0, two_sl, 2, 0),
		   "post 16 + %u bytes in 2 SGEs", want_len - 16);
		ok(one(a.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS,
		   "2 SGEs: send completion");
		ok(one(b.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
			   wc.byte_len == want_len,
		   "2 SGEs: receive length");
		ok(!memcmp(b.buf, a.buf, want_len) && b.buf[want_len] == 0,
		   "2 SGEs: the bytes");
	}

	/* every length up to past 128 (soft/data.c copy_small: its branches
	 * meet at 8, 16, 32, 64 and 128 bytes), from and to odd addresses, in
	 * one SGE (inline up to max_inline_data) and in two (a gather, cut
	 * at a third): each arrives intact, and no byte past it is written */
	for (i = 0; i < 2; i++) {
		uint32_t len, bad = 0;

		for (len = 0; len <= 140; len++) {
			const uint32_t one_sg[1][2] = {{1, len}};
			const uint32_t two_sg[2][2] = {{1, len / 3},
						       {1001, len - len / 3}};
			int inl = !i && len <= 64 && len % 2;

			t_fill(a.buf, BUFSZ, 11 + len);
			memcpy(want, a.buf + 1, len / 3);
			memcpy(want + len / 3, a.buf + (i ? 1001 : 1 + len / 3),
			       len - len / 3);
			memset(b.buf, 0x77, 512);
			recv_at(3, 256, 0, 0, 0);
			if (send_sges(IBV_WR_SEND, inl ? IBV_SEND_INLINE : 0, 0,
				      i ? two_sg : one_sg, i ? 2 : 1, 0) ||
			    one(a.cq, &wc) != 1 ||
			    wc.status != IBV_WC_SUCCESS ||
			    one(b.cq, &wc) != 1 ||
			    wc.status != IBV_WC_SUCCESS || wc.byte_len != len ||
			    memcmp(b.buf + 3, want, len) || b.buf[2] != 0x77 ||
			    b.buf[3 + len] != 0x77) {
				diag("length %u (%s) not intact", len,
				     i ? "2 SGEs" : "1 SGE");
				bad++;
			}
		}
		ok(!bad, "0 to 140 bytes in %s: intact, nothing past",
		   i ? "2 SGEs" : "1 SGE (odd ones inline)");
	}

	/* a receive WQE of two SGEs (the general path) scatters */
	t_fill(a.buf, BUFSZ, 5);
	memset(b.buf, 0, BUFSZ);
	recv_at(0, 10, 1000, 64, 0);
	is_int(send_sges(IBV_WR_SEND, 0, 0, sixteen, 1, 0), 0, "post 16");
	ok(one(a.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS,
	   "scatter: send completion");
	ok(one(b.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.byte_len == 16,
	   "scatter: receive");
	ok(!memcmp(b.buf, a.buf, 10) && !memcmp(b.buf + 1000, a.buf + 10, 6),
	   "scatter: 10 bytes, then 6 in the second SGE");

	/* inline over max_inline_data: refused at post, nothing sent */
	t_fill(a.buf, BUFSZ, 6);
	memset(b.buf, 0, BUFSZ);
	recv_at(0, 128, 0, 0, 0);
	is_int(send_sges(IBV_WR_SEND, IBV_SEND_INLINE, 0, big_inl, 1, 0),
	       EINVAL, "inline of 65 bytes (max 64): EINVAL");
	is_int(ibv_poll_cq(a.cq, 1, &wc), 0, "no completion for it");
	is_int(send_sges(IBV_WR_SEND, 0, 0, sixteen, 1, 0), 0,
	       "post 16 after it");
	ok(one(b.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.byte_len == 16 && !memcmp(b.buf, a.buf, 16),
	   "the receive holds the next message, not the refused one");
	ok(one(a.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS,
	   "its send completion");

	/* a receive too small: the general path's errors */
	recv_at(0, 8, 0, 0, 0);
	is_int(send_sges(IBV_WR_SEND, 0, 0, sixteen, 1, 0), 0,
	       "post 16 to a receive of 8");
	ok(one(b.cq, &wc) == 1 && wc.status == IBV_WC_LOC_LEN_ERR,
	   "receiver: IBV_WC_LOC_LEN_ERR");
	ok(one(a.cq, &wc) == 1 && wc.status == IBV_WC_REM_INV_REQ_ERR,
	   "sender: IBV_WC_REM_INV_REQ_ERR");
	unpair();

	/* a receive whose lkey is not valid */
	pair();
	recv_at(0, 64, 0, 0, b.mr->lkey + 0x100);
	is_int(send_sges(IBV_WR_SEND, 0, 0, sixteen, 1, 0), 0,
	       "post 16 to a receive with a bad lkey");
	ok(one(b.cq, &wc) == 1 && wc.status == IBV_WC_LOC_PROT_ERR,
	   "receiver: IBV_WC_LOC_PROT_ERR");
	ok(one(a.cq, &wc) == 1 && wc.status == IBV_WC_REM_OP_ERR,
	   "sender: IBV_WC_REM_OP_ERR");
	unpair();

	/* a bad lkey in the last SGE: the third after two good ones, and
	 * the second of two (fast_gather's own case) */
	bad_last_lkey(three, 3);
	bad_last_lkey(two, 2);

	/* a ping-pong of sequence-numbered messages: none lost, none twice */
	pair();
	{
		int n = tap_small() ? 200 : 5000, bad = 0;
		uint32_t seq;
		static const uint32_t four[1][2] = {{0, 4}};

		for (i = 0; i < n && !bad; i++) {
			recv_at(0, 64, 0, 0, 0);
			seq = (uint32_t)i;
			memcpy(a.buf, &seq, 4);
			if (send_sges(IBV_WR_SEND, i & 1 ? IBV_SEND_INLINE : 0,
				      0, four, 1, 0) ||
			    one(b.cq, &wc) != 1 ||
			    wc.status != IBV_WC_SUCCESS || wc.byte_len != 4 ||
			    memcmp(b.buf, &seq, 4) || one(a.cq, &wc) != 1 ||
			    wc.status != IBV_WC_SUCCESS)
				bad = 1;
		}
		ok(!bad, "%d messages in order, each once (stopped at %d)", n,
		   i);
		is_int(ibv_poll_cq(b.cq, 1, &wc), 0, "nothing more delivered");
	}
	unpair();

	/* the one-WR receive fast path leaves its refusals to the general
	 * path: a full queue, an SGE with no list, a QP in ERR */
	pair();
	{
		static const uint32_t eight[1][2] = {{0, 8}};
		int was_bad = 0, bad = 0, n = 0;
		uint64_t k;

		for (k = 0; k < 8; k++)
			bad |= recv_id(1000 + k, 8 * (uint32_t)k, 1, 1,
				       &was_bad);
		ok(!bad, "8 receives posted (max_recv_wr 8)");
		ok(recv_id(2000, 512, 1, 1, &was_bad) == ENOMEM && was_bad,
		   "the 9th: ENOMEM, *bad the WR");
		ok(recv_id(2001, 512, 1, 0, &was_bad) == EINVAL && was_bad,
		   "num_sge 1, sg_list NULL: EINVAL, *bad the WR");
		for (k = 0; k < 8 && !bad; k++) {
			memcpy(a.buf, &k, 8);
			if (send_sges(IBV_WR_SEND, 0, 0, eight, 1, 0) ||
			    one(b.cq, &wc) != 1 ||
			    wc.status != IBV_WC_SUCCESS ||
			    wc.wr_id != 1000 + k || wc.byte_len != 8 ||
			    memcmp(b.buf + 8 * k, &k, 8) ||
			    one(a.cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
				bad = 1;
			n += !bad;
		}
		is_int(n, 8, "the 8 posted receive the 8 SENDs, in order");
		is_int(ibv_poll_cq(b.cq, 1, &wc), 0,
		       "nothing of the refused WRs delivered");
		{
			struct ibv_qp_attr at = {.qp_state = IBV_QPS_ERR};

			ok(!ibv_modify_qp(b.qp, &at, IBV_QP_STATE),
			   "receiver to ERR");
		}
		ok(!recv_id(3000, 0, 1, 1, &was_bad),
		   "a receive posted in ERR: accepted");
		ok(one(b.cq, &wc) == 1 && wc.wr_id == 3000 &&
			   wc.status == IBV_WC_WR_FLUSH_ERR,
		   "and flushed (IBV_WC_WR_FLUSH_ERR)");
	}
	unpair();
	chains();
	send_chains();
	split();
}

int main(void)
{
	t_isolate("fastpath");
	side_open(&a, NULL);
	side_open(&b, NULL);
	run("two contexts");
	t_side_close(&b);
	side_open(&b, &a.t);
	run("one context");
	t_side_close(&b);
	t_side_close(&a);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
