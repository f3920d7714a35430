/* SPDX-License-Identifier: MIT */
/*
 * verbs_api.c -- argument checks and error returns that follow rdma-core
 * over a kernel HCA (rxe, mlx5):
 *  - RESET->ERR is no transition of the kernel's qp_state_table
 *    (ib_modify_qp_is_ok): EINVAL, the QP stays in RESET;
 *  - an address handle holds its PD (_rdma_create_ah takes pd->usecnt):
 *    ibv_dealloc_pd is EBUSY while one lives;
 *  - an AV names a port of the device: the kernel's modify_qp refuses
 *    IBV_QP_AV with ah_attr.port_num 0 (rdma_is_port_valid), and at
 *    INIT->RTR one not the QP's;
 *  - a device without ODP (odp_caps 0) refuses IBV_ACCESS_ON_DEMAND with
 *    EOPNOTSUPP (ib_check_mr_access), at ibv_reg_mr and ibv_rereg_mr;
 *  - a PSN is 24 bits: rxe (rxe_qp_from_attr) and mlx5 (MLX5_SET) keep
 *    the low 24 bits of rq_psn and sq_psn, they do not refuse the rest;
 *  - ibv_modify_srq changes nothing when it fails (rxe_srq_chk_attr checks
 *    every attribute first), and does not resize below an armed limit.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "../tap.h"
#include "common.h"

/* mk_qp -- a QP of type on t's CQ */
static struct ibv_qp *mk_qp(struct tctx *t, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = t->cq;
	a.qp_type = type;
	a.cap.max_send_wr = a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	return ibv_create_qp(t->pd, &a);
}

/* to_init -- RESET->INIT with the attributes type requires */
static int to_init(struct ibv_qp *qp, enum ibv_qp_type type)
{
	struct ibv_qp_attr a;
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = 0x11111111;
	mask |= type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
	return ibv_modify_qp(qp, &a, mask);
}

/* test_reset_to_err -- RESET->ERR refused for each type, INIT->ERR not */
static void test_reset_to_err(void)
{
	static const enum ibv_qp_type types[] = {IBV_QPT_RC, IBV_QPT_UC,
						 IBV_QPT_UD};
	static const char *const names[] = {"RC", "UC", "UD"};
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	struct tctx t;
	size_t i;

	ok(t_open(&t, 16) == 0, "open");
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		qp = mk_qp(&t, types[i]);
		ok(qp != NULL, "%s: create_qp", names[i]);
		if (!qp)
			continue;
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_ERR;
		is_int(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL,
		       "RESET->ERR: EINVAL");
		is_int(t_qp_state(qp), IBV_QPS_RESET, "still RESET");
		is_int(qp->state, IBV_QPS_RESET, "ibv_qp's state RESET");
		is_int(to_init(qp, types[i]), 0, "RESET->INIT");
		is_int(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0, "INIT->ERR");
		is_int(t_qp_state(qp), IBV_QPS_ERR, "ERR");
		is_int(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0, "ERR->ERR");
		a.qp_state = IBV_QPS_RESET;
		is_int(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0, "ERR->RESET");
		is_int(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0, "RESET->RESET");
		is_int(ibv_destroy_qp(qp), 0, "destroy_qp");
	}
	t_close(&t);
}

/* test_pd_busy_ah -- an AH keeps its PD from being deallocated */
static void test_pd_busy_ah(void)
{
	struct ibv_ah_attr aa;
	struct ibv_pd *pd;
	struct ibv_ah *ah;
	struct tctx t;

	ok(t_open(&t, 16) == 0, "open");
	pd = ibv_alloc_pd(t.ctx);
	ok(pd != NULL, "alloc_pd");
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.sgid_index = 1;
	aa.grh.hop_limit = 1;
	ibv_query_gid(t.ctx, 1, 1, &aa.grh.dgid);
	ah = ibv_create_ah(pd, &aa);
	ok(ah != NULL, "create_ah");
	is_int(ibv_dealloc_pd(pd), EBUSY, "dealloc_pd with an AH: EBUSY");
	is_int(ibv_destroy_ah(ah), 0, "destroy_ah");
	is_int(ibv_dealloc_pd(pd), 0, "dealloc_pd once the AH is gone");
	t_close(&t);
}

/* rtr -- INIT->RTR towards qp itself with the AV on port, from rq_psn */
static int rtr(struct ibv_qp *qp, uint8_t port, uint32_t rq_psn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 1;
	ibv_query_gid(qp->context, 1, 1, &a.ah_attr.grh.dgid);
	a.ah_attr.port_num = port;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER);
}

/* test_av_port -- an AV without a port is refused */
static void test_av_port(void)
{
	struct ibv_qp *qp;
	struct tctx t;

	ok(t_open(&t, 16) == 0, "open");
	qp = mk_qp(&t, IBV_QPT_RC);
	ok(qp != NULL, "create_qp");
	is_int(to_init(qp, IBV_QPT_RC), 0, "RESET->INIT on port 1");
	is_int(rtr(qp, 0, 0), EINVAL, "INIT->RTR with AV port 0: EINVAL");
	is_int(t_qp_state(qp), IBV_QPS_INIT, "still INIT");
	is_int(rtr(qp, 2, 0), EINVAL, "INIT->RTR with AV port 2: EINVAL");
	is_int(rtr(qp, 1, 0), 0, "INIT->RTR with AV port 1");
	is_int(ibv_destroy_qp(qp), 0, "destroy_qp");
	t_close(&t);
}

/* test_odp -- ON_DEMAND on a device that does not offer ODP */
static void test_odp(void)
{
	struct ibv_device_attr_ex dax;
	static char buf[4096];
	struct ibv_mr *mr;
	struct tctx t;

	ok(t_open(&t, 16) == 0, "open");
	memset(&dax, 0, sizeof(dax));
	is_int(ibv_query_device_ex(t.ctx, NULL, &dax), 0, "query_device_ex");
	ok(!(dax.odp_caps.general_caps & IBV_ODP_SUPPORT), "no ODP offered");
	errno = 0;
	mr = ibv_reg_mr(t.pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	ok(!mr && errno == EOPNOTSUPP, "reg_mr ON_DEMAND: EOPNOTSUPP (%d)",
	   errno);
	if (mr)
		ibv_dereg_mr(mr);
	errno = 0;
	mr = ibv_reg_mr(t.pd, buf, sizeof(buf),
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ON_DEMAND);
	ok(!mr && errno == EINVAL,
	   "REMOTE_WRITE without LOCAL_WRITE comes first: EINVAL (%d)", errno);
	if (mr)
		ibv_dereg_mr(mr);
	mr = ibv_reg_mr(t.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ok(mr != NULL, "reg_mr");
	errno = 0;
	is_int(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND),
	       IBV_REREG_MR_ERR_CMD, "rereg_mr to ON_DEMAND: ERR_CMD");
	is_int(errno, EOPNOTSUPP, "errno EOPNOTSUPP");
	is_int(ibv_dereg_mr(mr), 0, "dereg_mr");
	t_close(&t);
}

/* test_psn_bits -- 32-bit PSNs (lrand48() unmasked) are cut to 24 bits */
static void test_psn_bits(void)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	struct tctx t;

	ok(t_open(&t, 16) == 0, "open");
	qp = mk_qp(&t, IBV_QPT_RC);
	ok(qp != NULL, "create_qp");
	is_int(to_init(qp, IBV_QPT_RC), 0, "RESET->INIT");
	is_int(rtr(qp, 1, 0x7b123456), 0, "INIT->RTR with a 32-bit rq_psn");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0xffabcdef;
	a.max_rd_atomic = 1;
	is_int(ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				     IBV_QP_MAX_QP_RD_ATOMIC),
	       0, "RTR->RTS with a 32-bit sq_psn");
	memset(&a, 0, sizeof(a));
	is_int(ibv_query_qp(qp, &a, IBV_QP_RQ_PSN | IBV_QP_SQ_PSN, &ia), 0,
	       "query_qp");
	is_int(a.rq_psn, 0x123456, "rq_psn kept to 24 bits");
	is_int(a.sq_psn, 0xabcdef, "sq_psn kept to 24 bits");
	is_int(ibv_destroy_qp(qp), 0, "destroy_qp");
	t_close(&t);
}

/* test_srq_modify -- a refused modify leaves the SRQ as it was */
static void test_srq_modify(void)
{
	struct ibv_srq_init_attr si;
	struct ibv_srq_attr sa;
	struct ibv_srq *srq;
	struct tctx t;

	ok(t_open(&t, 16) == 0, "open");
	memset(&si, 0, sizeof(si));
	si.attr.max_wr = 16;
	si.attr.max_sge = 1;
	srq = ibv_create_srq(t.pd, &si);
	ok(srq != NULL, "create_srq");
	if (!srq)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.max_wr = 32;
	sa.srq_limit = 64;
	is_int(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT), EINVAL,
	       "resize to 32 with limit 64: EINVAL");
	memset(&sa, 0, sizeof(sa));
	is_int(ibv_query_srq(srq, &sa), 0, "query_srq");
	ok(sa.max_wr == 16 && sa.srq_limit == 0,
	   "not resized, not armed (max_wr %u, limit %u)", sa.max_wr,
	   sa.srq_limit);
	sa.srq_limit = 10;
	is_int(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT), 0, "arm limit 10");
	sa.max_wr = 8;
	is_int(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR), EINVAL,
	       "resize to 8 under limit 10: EINVAL");
	memset(&sa, 0, sizeof(sa));
	is_int(ibv_query_srq(srq, &sa), 0, "query_srq");
	ok(sa.max_wr == 16 && sa.srq_limit == 10,
	   "still 16, limit 10 (max_wr %u, limit %u)", sa.max_wr, sa.srq_limit);
	sa.max_wr = 32;
	is_int(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR), 0, "resize to 32");
	is_int(ibv_destroy_srq(srq), 0, "destroy_srq");
	t_close(&t);
}

int main(void)
{
	int fds;

	t_isolate("verbs_api");
	fds = t_fd_count();
	test_reset_to_err();
	test_pd_busy_ah();
	test_av_port();
	test_odp();
	test_psn_bits();
	test_srq_modify();
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	is_int(t_fd_count(), fds, "no fd left open");
	return done_testing();
}
