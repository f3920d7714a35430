/* SPDX-License-Identifier: MIT */
/* limits.c -- the device limits that ibv_query_device reports are the ones
 * the verbs enforce: a create or modify past them fails with the kernel's
 * error and leaves nothing behind, a post past a queue's capacity fails at
 * the WR that does not fit */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../tap.h"
#include "common.h"

static struct tctx t;
static struct ibv_device_attr da;

/* qp_make -- an RC (or type) QP on t's CQ with cap, the grant written back
 * to *cap; NULL with errno */
static struct ibv_qp *qp_make(enum ibv_qp_type type, struct ibv_qp_cap *cap,
			      struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = type;
	ia.send_cq = ia.recv_cq = t.cq;
	ia.srq = srq;
	ia.cap = *cap;
	errno = 0;
	qp = ibv_create_qp(t.pd, &ia);
	if (qp)
		*cap = ia.cap;
	return qp;
}

/* qp_refused -- a QP of type with cap is refused with EINVAL */
static int qp_refused(enum ibv_qp_type type, struct ibv_qp_cap cap,
		      struct ibv_srq *srq)
{
	struct ibv_qp *qp = qp_make(type, &cap, srq);

	if (qp) {
		ibv_destroy_qp(qp);
		return 0;
	}
	return errno == EINVAL;
}

/* test_qp_create -- each capacity one past the device's: EINVAL, for every
 * QP type; at the limit: granted, never less than asked */
static void test_qp_create(void)
{
	static const enum ibv_qp_type types[] = {IBV_QPT_RC, IBV_QPT_UC,
						 IBV_QPT_UD};
	static const char *const tname[] = {"RC", "UC", "UD"};
	struct ibv_qp_cap base = {4, 4, 1, 1, 0}, c;
	struct ibv_qp *qp;
	size_t i;
	int shm = t_shm_count();

	for (i = 0; i < 3; i++) {
		c = base;
		c.max_send_wr = (uint32_t)da.max_qp_wr + 1;
		ok(qp_refused(types[i], c, NULL), "%s: max_send_wr %u: EINVAL",
		   tname[i], c.max_send_wr);
		c = base;
		c.max_recv_wr = (uint32_t)da.max_qp_wr + 1;
		ok(qp_refused(types[i], c, NULL), "%s: max_recv_wr %u: EINVAL",
		   tname[i], c.max_recv_wr);
		c = base;
		c.max_send_sge = (uint32_t)da.max_sge + 1;
		ok(qp_refused(types[i], c, NULL), "%s: max_send_sge %u: EINVAL",
		   tname[i], c.max_send_sge);
		c = base;
		c.max_recv_sge = (uint32_t)da.max_sge + 1;
		ok(qp_refused(types[i], c, NULL), "%s: max_recv_sge %u: EINVAL",
		   tname[i], c.max_recv_sge);
		c = base;
		c.max_inline_data = 1u << 30;
		ok(qp_refused(types[i], c, NULL),
		   "%s: max_inline_data 1 GiB: "
		   "EINVAL",
		   tname[i]);
		c = base;
		c.max_send_wr = UINT32_MAX;
		ok(qp_refused(types[i], c, NULL),
		   "%s: max_send_wr UINT32_MAX: EINVAL", tname[i]);
		c = base;
		c.max_recv_wr = (uint32_t)da.max_qp_wr;
		c.max_recv_sge = (uint32_t)da.max_sge;
		c.max_send_sge = (uint32_t)da.max_sge;
		qp = qp_make(types[i], &c, NULL);
		ok(qp && c.max_recv_wr >= (uint32_t)da.max_qp_wr &&
			   c.max_recv_sge >= (uint32_t)da.max_sge &&
			   c.max_send_sge >= (uint32_t)da.max_sge &&
			   c.max_send_wr >= 4,
		   "%s: at the limits: granted, no less than asked", tname[i]);
		if (qp)
			ibv_destroy_qp(qp);
	}
	is_int(t_shm_count(), shm, "refused QPs left no segment");
}

/* test_qp_srq -- with an SRQ, the receive capacities are not looked at
 * (rxe_qp_chk_cap), and none is granted */
static void test_qp_srq(void)
{
	static const enum ibv_qp_type types[] = {IBV_QPT_RC, IBV_QPT_UC,
						 IBV_QPT_UD};
	static const char *const tname[] = {"RC", "UC", "UD"};
	struct ibv_srq_init_attr sa;
	struct ibv_qp_cap c;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 8;
	sa.attr.max_sge = 1;
	srq = ibv_create_srq(t.pd, &sa);
	if (!srq)
		bail_out("create_srq");
	for (i = 0; i < 3; i++) {
		c = (struct ibv_qp_cap){4, UINT32_MAX, 1, UINT32_MAX, 0};
		qp = qp_make(types[i], &c, srq);
		ok(qp != NULL && c.max_recv_wr == 0 && c.max_recv_sge == 0,
		   "%s on an SRQ: max_recv_wr and max_recv_sge ignored",
		   tname[i]);
		if (qp)
			ibv_destroy_qp(qp);
	}
	ibv_destroy_srq(srq);
}

/* test_modify -- a QP's attributes past the device's: EINVAL */
static void test_modify(void)
{
	struct ibv_qp_cap c = {4, 4, 1, 1, 0};
	struct ibv_qp *qp = qp_make(IBV_QPT_RC, &c, NULL), *b;
	struct ibv_qp_attr a;
	int acc = 0;

	c.max_inline_data = 0;
	b = qp_make(IBV_QPT_RC, &c, NULL);
	if (!qp || !b)
		bail_out("create_qp");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = acc;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		bail_out("INIT");
	memset(&a, 0, sizeof(a));
	a.cap.max_send_wr = 8;
	is_int(ibv_modify_qp(qp, &a, IBV_QP_CAP), EINVAL,
	       "modify IBV_QP_CAP: EINVAL");
	/* max_dest_rd_atomic at INIT->RTR */
	if (t_connect(b, qp->qp_num, acc, 12, 7, 14, 7))
		bail_out("connect b");
	memset(&a, 0, sizeof(a));
	ibv_query_gid(t.ctx, 1, 1, &a.ah_attr.grh.dgid);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = b->qp_num;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	a.min_rnr_timer = 12;
	a.max_dest_rd_atomic = (uint8_t)(da.max_qp_rd_atom + 1);
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER),
	       EINVAL, "max_dest_rd_atomic past max_qp_rd_atom: EINVAL");
	is_int(t_qp_state(qp), IBV_QPS_INIT, "the QP stays in INIT");
	a.max_dest_rd_atomic = (uint8_t)da.max_qp_rd_atom;
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER),
	       0, "max_dest_rd_atomic at max_qp_rd_atom: RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = (uint8_t)(da.max_qp_init_rd_atom + 1);
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC),
	       EINVAL, "max_rd_atomic past max_qp_init_rd_atom: EINVAL");
	a.max_rd_atomic = (uint8_t)da.max_qp_init_rd_atom;
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC),
	       0, "max_rd_atomic at max_qp_init_rd_atom: RTS");
	ibv_destroy_qp(qp);
	ibv_destroy_qp(b);
}

/* test_post -- WRs past the QP's grant: EINVAL or ENOMEM at that WR, the
 * ones before it posted */
static void test_post(void)
{
	struct ibv_qp_cap c = {4, 4, 2, 2, 32};
	struct ibv_qp *a, *b;
	struct ibv_send_wr sw[64], *sbad;
	struct ibv_recv_wr rw[64], *rbad;
	struct ibv_sge sge[64];
	struct ibv_wc wc[64];
	struct ibv_mr *mr;
	char *buf = calloc(1, 4096);
	uint32_t i, n;

	a = qp_make(IBV_QPT_RC, &c, NULL);
	{
		struct ibv_qp_cap cb = {4, 4, 2, 2, 32};

		b = qp_make(IBV_QPT_RC, &cb, NULL);
	}
	if (!a || !b || !buf)
		bail_out("create_qp");
	mr = ibv_reg_mr(t.pd, buf, 4096,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr ||
	    t_connect(a, b->qp_num, IBV_ACCESS_REMOTE_WRITE, 12, 7, 14, 7) ||
	    t_connect(b, a->qp_num, IBV_ACCESS_REMOTE_WRITE, 12, 7, 14, 7))
		bail_out("connect");
	for (i = 0; i < 64; i++) {
		sge[i].addr = (uintptr_t)buf + 8 * (i % 8);
		sge[i].length = 8;
		sge[i].lkey = mr->lkey;
	}
	memset(sw, 0, sizeof(sw));
	for (i = 0; i < 64; i++) {
		sw[i].wr_id = i;
		sw[i].opcode = IBV_WR_RDMA_WRITE;
		sw[i].sg_list = sge;
		sw[i].num_sge = 1;
		sw[i].send_flags = IBV_SEND_SIGNALED;
		sw[i].wr.rdma.remote_addr = (uintptr_t)buf + 2048;
		sw[i].wr.rdma.rkey = mr->rkey;
		sw[i].next = &sw[i + 1];
	}
	/* SGEs past the grant, second WR of two */
	sw[1].num_sge = (int)c.max_send_sge + 1;
	sw[1].next = NULL;
	sbad = NULL;
	is_int(ibv_post_send(a, sw, &sbad), EINVAL,
	       "send: num_sge past max_send_sge: EINVAL");
	ok(sbad == &sw[1], "bad_wr is that WR");
	is_int(t_wait(t.cq, wc, 1, 2000), 1, "the WR before it was posted");
	sw[1].num_sge = 1;
	/* inline bytes past the grant */
	sw[0].send_flags |= IBV_SEND_INLINE;
	sw[0].num_sge = 2;
	sge[1].length = c.max_inline_data - 8 + 1;
	sw[0].next = NULL;
	sbad = NULL;
	is_int(ibv_post_send(a, sw, &sbad), EINVAL,
	       "send: inline past max_inline_data: EINVAL");
	ok(sbad == &sw[0], "bad_wr is that WR");
	sge[1].length = 8;
	sw[0].send_flags = IBV_SEND_SIGNALED;
	sw[0].num_sge = 1;
	/* one WR more than the send queue holds */
	n = c.max_send_wr;
	if (n >= 63)
		bail_out("grant %u", n);
	sw[n].next = NULL;
	sw[1].next = &sw[2];
	sw[0].next = &sw[1];
	sbad = NULL;
	is_int(ibv_post_send(a, sw, &sbad), ENOMEM,
	       "send: a WR past max_send_wr: ENOMEM");
	ok(sbad == &sw[n], "bad_wr is WR %u, the first that does not fit", n);
	ok(t_wait(t.cq, wc, (int)n, 2000) == (int)n,
	   "the %u before it completed", n);
	sw[n].next = &sw[n + 1];

	/* receives */
	memset(rw, 0, sizeof(rw));
	for (i = 0; i < 64; i++) {
		rw[i].wr_id = i;
		rw[i].sg_list = sge;
		rw[i].num_sge = 1;
		rw[i].next = &rw[i + 1];
	}
	rw[1].num_sge = (int)c.max_recv_sge + 1;
	rw[1].next = NULL;
	rbad = NULL;
	is_int(ibv_post_recv(a, rw, &rbad), EINVAL,
	       "recv: num_sge past max_recv_sge: EINVAL");
	ok(rbad == &rw[1], "bad_wr is that WR");
	rw[1].num_sge = 1;
	rw[1].next = &rw[2];
	n = c.max_recv_wr - 1; /* one is posted */
	rw[n].next = NULL;
	rbad = NULL;
	is_int(ibv_post_recv(a, rw, &rbad), ENOMEM,
	       "recv: a WR past max_recv_wr: ENOMEM");
	ok(rbad == &rw[n], "bad_wr is the first that does not fit");
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	while (ibv_poll_cq(t.cq, 64, wc) > 0)
		;
	ibv_dereg_mr(mr);
	free(buf);
}

/* srq_make -- an SRQ of max_wr, max_sge, srq_limit; NULL with errno */
static struct ibv_srq *srq_make(uint32_t max_wr, uint32_t max_sge,
				uint32_t limit)
{
	struct ibv_srq_init_attr sa;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = max_wr;
	sa.attr.max_sge = max_sge;
	sa.attr.srq_limit = limit;
	errno = 0;
	return ibv_create_srq(t.pd, &sa);
}

/* test_srq -- an SRQ's sizes and limit against the device's */
static void test_srq(void)
{
	struct ibv_srq_attr sa;
	struct ibv_srq *s;
	struct ibv_recv_wr rw[4], *bad;
	struct ibv_sge sge = {0, 0, 0};
	int i;

	ok(!srq_make(0, 1, 0) && errno == EINVAL, "SRQ max_wr 0: EINVAL");
	ok(!srq_make((uint32_t)da.max_srq_wr + 1, 1, 0) && errno == EINVAL,
	   "SRQ max_wr past max_srq_wr: EINVAL");
	ok(!srq_make(4, (uint32_t)da.max_srq_sge + 1, 0) && errno == EINVAL,
	   "SRQ max_sge past max_srq_sge: EINVAL");
	/* ibv_create_srq(3): srq_limit is irrelevant at create */
	s = srq_make(4, 1, 100);
	ok(s != NULL, "SRQ srq_limit above max_wr at create: ignored");
	if (!s)
		return;
	memset(&sa, 0, sizeof(sa));
	ibv_query_srq(s, &sa);
	is_int(sa.srq_limit, 0, "and not armed");
	sa.srq_limit = sa.max_wr + 1;
	is_int(ibv_modify_srq(s, &sa, IBV_SRQ_LIMIT), EINVAL,
	       "modify: srq_limit past max_wr: EINVAL");
	sa.max_wr = (uint32_t)da.max_srq_wr + 1;
	is_int(ibv_modify_srq(s, &sa, IBV_SRQ_MAX_WR), EINVAL,
	       "modify: max_wr past max_srq_wr: EINVAL");
	memset(rw, 0, sizeof(rw));
	for (i = 0; i < 4; i++) {
		rw[i].wr_id = (uint64_t)i;
		rw[i].sg_list = &sge;
		rw[i].num_sge = 1;
		rw[i].next = i < 3 ? &rw[i + 1] : NULL;
	}
	memset(&sa, 0, sizeof(sa));
	ibv_query_srq(s, &sa);
	rw[1].num_sge = (int)sa.max_sge + 1;
	bad = NULL;
	is_int(ibv_post_srq_recv(s, rw, &bad), EINVAL,
	       "SRQ post: num_sge past max_sge: EINVAL");
	ok(bad == &rw[1], "bad_wr is that WR");
	ibv_destroy_srq(s);
	s = srq_make(2, 1, 0);
	if (!s)
		bail_out("create_srq");
	memset(&sa, 0, sizeof(sa));
	ibv_query_srq(s, &sa);
	rw[1].num_sge = 1;
	bad = NULL;
	if (sa.max_wr < 4) {
		rw[sa.max_wr].next = NULL;
		is_int(ibv_post_srq_recv(s, rw, &bad), ENOMEM,
		       "SRQ post: a WR past max_wr: ENOMEM");
		ok(bad == &rw[sa.max_wr], "bad_wr is the first that does not "
					  "fit");
	} else {
		skip_one("SRQ granted %u", sa.max_wr);
		skip_one("SRQ granted %u", sa.max_wr);
	}
	ibv_destroy_srq(s);
}

/* test_srq_count -- max_srq SRQs, no more (ENOMEM, as the kernel's
 * pool); one destroyed, one can be made again */
static void test_srq_count(void)
{
	struct ibv_srq **v;
	int i, n = 0;

	if (da.max_srq <= 0 || da.max_srq > 65536) {
		skip_one("max_srq %d", da.max_srq);
		return;
	}
	v = calloc((size_t)da.max_srq + 1, sizeof(*v));
	if (!v)
		bail_out("calloc");
	for (i = 0; i < da.max_srq; i++) {
		v[i] = srq_make(1, 1, 0);
		if (!v[i])
			break;
		n++;
	}
	is_int(n, da.max_srq, "max_srq SRQs made");
	ok(!srq_make(1, 1, 0) && errno == ENOMEM, "one more: ENOMEM");
	if (n) {
		ibv_destroy_srq(v[n - 1]);
		v[n - 1] = srq_make(1, 1, 0);
		ok(v[n - 1] != NULL, "one destroyed, one made again");
	}
	for (i = 0; i < n; i++)
		if (v[i])
			ibv_destroy_srq(v[i]);
	free(v);
}

/* count_cq / count_pd -- one object for test_count, and its end */
static void *count_cq(void)
{
	return ibv_create_cq(t.ctx, 1, NULL, NULL, 0);
}
static void uncount_cq(void *o)
{
	ibv_destroy_cq(o);
}
static void *count_pd(void)
{
	return ibv_alloc_pd(t.ctx);
}
static void uncount_pd(void *o)
{
	ibv_dealloc_pd(o);
}

/* test_count -- max objects alive besides the `have` the test holds, no
 * more (ENOMEM, as the kernel's pools); one ended, one can be made again,
 * nothing lost: the same number again after all are ended */
static void test_count(const char *what, int max, int have, void *(*make)(void),
		       void (*end)(void *))
{
	void **v;
	int i, n = 0, round;

	if (max <= have || max > 70000) {
		skip_one("max %s %d", what, max);
		return;
	}
	v = calloc((size_t)max, sizeof(*v));
	if (!v)
		bail_out("calloc");
	for (round = 0; round < 2; round++) {
		for (n = 0, i = 0; i < max - have; i++) {
			v[i] = make();
			if (!v[i])
				break;
			n++;
		}
		ok(n == max - have, "max_%s %ss alive%s (%d of %d)", what, what,
		   round ? ", again after all were ended" : "", n, max - have);
		errno = 0;
		ok(!make() && errno == ENOMEM, "one more %s: ENOMEM", what);
		if (n && !round) {
			end(v[n - 1]);
			v[n - 1] = make();
			ok(v[n - 1] != NULL, "one %s ended, one made again",
			   what);
		}
		for (i = 0; i < n; i++)
			if (v[i])
				end(v[i]);
	}
	free(v);
}

/* test_mr_size -- a registration above max_mr_size is EINVAL (the
 * driver's check; an HCA cannot map it), one of max_mr_size is not
 * refused for its size */
static void test_mr_size(void)
{
	size_t len = (size_t)da.max_mr_size + 4096;
	void *p;
	struct ibv_mr *mr;

	if (!da.max_mr_size || da.max_mr_size > (1ull << 44)) {
		skip_one("max_mr_size %llu",
			 (unsigned long long)da.max_mr_size);
		return;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		skip_one("no %zu bytes of address space", len);
		return;
	}
	errno = 0;
	mr = ibv_reg_mr(t.pd, p, len, IBV_ACCESS_LOCAL_WRITE);
	ok(!mr && errno == EINVAL, "an MR of max_mr_size + 4 KiB: EINVAL");
	if (mr)
		ibv_dereg_mr(mr);
	mr = ibv_reg_mr(t.pd, p, 4096, IBV_ACCESS_LOCAL_WRITE);
	ok(mr &&
		   ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, p,
				len, 0) == IBV_REREG_MR_ERR_CMD &&
		   errno == EINVAL,
	   "rereg to max_mr_size + 4 KiB: EINVAL");
	if (mr)
		ibv_dereg_mr(mr);
	munmap(p, len);
}

int main(void)
{
	t_isolate("limits");
	if (t_open(&t, 256))
		bail_out("open");
	if (ibv_query_device(t.ctx, &da))
		bail_out("query_device");
	test_qp_create();
	test_qp_srq();
	test_modify();
	test_post();
	test_srq();
	test_srq_count();
	/* the context holds one CQ and one PD (t_open) */
	test_count("cq", da.max_cq, 1, count_cq, uncount_cq);
	test_count("pd", da.max_pd, 1, count_pd, uncount_pd);
	test_mr_size();
	t_close(&t);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
