/* SPDX-License-Identifier: MIT */
/* dc.c -- the mlx5dv DC transport on softrdma: one DCI reaching DCTs in
 * several processes (SEND, SEND_WITH_IMM, inline, RDMA WRITE / READ, data
 * and order verified, src_qp the DCI), RNR while an SRQ is empty, a
 * stopped target process, a wrong access key (RETRY_EXC_ERR, the later
 * WRs flushed, a key violation counted), SRQ_LIMIT_REACHED for a target
 * that only waits for async events, RNR retries exhausted, bad
 * arguments refused with libmlx5's errno, nothing leaked */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/mlx5dv.h>

#include "../tap.h"
#include "common.h"

#define NDCT   3
#define KEY    0x5a5a0000deadbe00ull
#define MSGMAX 3000
#define REGION 8192
#define SRQ_WR 256
#define RW                                                  \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ)

uint32_t softrdma_dc_key_violations(struct ibv_qp *dct);

static int nmsg = 100;
static int child_idx;

struct info {
	uint32_t dctn;
	uint32_t rkey;
	uint64_t raddr;
	uint64_t key;
};

struct result {
	int recv_ok;   /* completions that matched, in order */
	int extra;     /* completions past the expected ones */
	int write_ok;  /* the RDMA WRITE block landed */
	uint32_t viol; /* key violations counted */
	uint32_t src_qp;
};

/* maps_count -- shared memory mappings of this process (segments) */
static int maps_count(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int c = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		c += strstr(line, "/dev/shm/") != NULL;
	fclose(f);
	return c;
}

static uint8_t pat(int c, int m, uint32_t i)
{
	return (uint8_t)(c * 77 + m * 13 + i * 7 + (i >> 8));
}

static uint32_t msg_len(int c, int m)
{
	return (uint32_t)((c * 997 + m * 331) % MSGMAX) + 1;
}

static struct ibv_qp *dc_qp(struct tctx *t, int type, struct ibv_srq *srq,
			    uint64_t key, uint32_t ibv_mask, uint64_t ops,
			    enum ibv_qp_type qpt, uint64_t dv_mask)
{
	struct ibv_qp_init_attr_ex qa;
	struct mlx5dv_qp_init_attr da;

	memset(&qa, 0, sizeof(qa));
	memset(&da, 0, sizeof(da));
	qa.qp_type = qpt;
	qa.send_cq = qa.recv_cq = t->cq;
	qa.srq = srq;
	qa.pd = t->pd;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | ibv_mask;
	qa.send_ops_flags = ops;
	if (type == MLX5DV_DCTYPE_DCI) {
		qa.cap.max_send_wr = 64;
		qa.cap.max_send_sge = 2;
		qa.cap.max_inline_data = 64;
	}
	da.comp_mask = dv_mask;
	da.dc_init_attr.dc_type = type;
	if (type == MLX5DV_DCTYPE_DCT)
		da.dc_init_attr.dct_access_key = key;
	return mlx5dv_create_qp(t->ctx, &qa, &da);
}

static struct ibv_qp *dct_qp(struct tctx *t, struct ibv_srq *srq, uint64_t key)
{
	return dc_qp(t, MLX5DV_DCTYPE_DCT, srq, key, 0, 0, IBV_QPT_DRIVER,
		     MLX5DV_QP_INIT_ATTR_MASK_DC);
}

static struct ibv_qp *dci_qp(struct tctx *t)
{
	return dc_qp(t, MLX5DV_DCTYPE_DCI, NULL, 0,
		     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		     IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			     IBV_QP_EX_WITH_RDMA_WRITE |
			     IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			     IBV_QP_EX_WITH_RDMA_READ |
			     IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
		     IBV_QPT_DRIVER, MLX5DV_QP_INIT_ATTR_MASK_DC);
}

static void gid(struct ibv_context *c, union ibv_gid *g)
{
	/* GID index 1 is ::ffff:127.0.0.1, one of this host's */
	if (ibv_query_gid(c, 1, 1, g))
		memset(g, 0, sizeof(*g));
}

static int dct_up(struct ibv_qp *qp, int access, int rnr_timer)
{
	struct ibv_qp_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = (unsigned)access;
	ret = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				    IBV_QP_ACCESS_FLAGS);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.min_rnr_timer = (uint8_t)rnr_timer;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.port_num = 1;
	gid(qp->context, &a.ah_attr.grh.dgid);
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV |
				     IBV_QP_PATH_MTU);
}

static int dci_up(struct ibv_qp *qp, int rnr_retry, int timeout, int retry)
{
	struct ibv_qp_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	ret = ibv_modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT);
	if (ret)
		return ret;
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PATH_MTU);
	if (ret)
		return ret;
	return t_qp_rts(qp, rnr_retry, timeout, retry);
}

/* post -- one WR on the DCI towards (ah, dctn, key); wr_complete's result */
static int post(struct ibv_qp *dci, struct ibv_ah *ah, uint32_t dctn,
		uint64_t key, enum ibv_wr_opcode op, void *buf, uint32_t len,
		uint32_t lkey, uint64_t wr_id, unsigned flags, uint32_t rkey,
		uint64_t raddr, int set_addr)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(dci);
	struct mlx5dv_qp_ex *mx = mlx5dv_qp_ex_from_ibv_qp_ex(x);

	ibv_wr_start(x);
	x->wr_id = wr_id;
	x->wr_flags = flags;
	switch (op) {
	case IBV_WR_SEND_WITH_IMM:
		ibv_wr_send_imm(x, htobe32((uint32_t)wr_id));
		break;
	case IBV_WR_RDMA_WRITE:
		ibv_wr_rdma_write(x, rkey, raddr);
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		ibv_wr_rdma_write_imm(x, rkey, raddr, htobe32((uint32_t)wr_id));
		break;
	case IBV_WR_RDMA_READ:
		ibv_wr_rdma_read(x, rkey, raddr);
		break;
	default:
		ibv_wr_send(x);
		break;
	}
	if (set_addr)
		mlx5dv_wr_set_dc_addr(mx, ah, dctn, key);
	if (flags & IBV_SEND_INLINE)
		ibv_wr_set_inline_data(x, buf, len);
	else
		ibv_wr_set_sge(x, lkey, (uintptr_t)buf, len);
	return ibv_wr_complete(x);
}

/* atomic -- one CMP_AND_SWP (cas) or FETCH_AND_ADD on the DCI */
static int atomic(struct ibv_qp *dci, struct ibv_ah *ah, uint32_t dctn,
		  uint64_t key, uint64_t *res, uint32_t len, uint32_t lkey,
		  uint64_t wr_id, uint32_t rkey, uint64_t raddr, uint64_t cmp,
		  uint64_t swap, int cas)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(dci);

	ibv_wr_start(x);
	x->wr_id = wr_id;
	x->wr_flags = IBV_SEND_SIGNALED;
	if (cas)
		ibv_wr_atomic_cmp_swp(x, rkey, raddr, cmp, swap);
	else
		ibv_wr_atomic_fetch_add(x, rkey, raddr, cmp);
	mlx5dv_wr_set_dc_addr(mlx5dv_qp_ex_from_ibv_qp_ex(x), ah, dctn, key);
	ibv_wr_set_sge(x, lkey, (uintptr_t)res, len);
	return ibv_wr_complete(x);
}

/* batch_writes -- n signalled zero-length RDMA WRITEs to one DCT in one
 * ibv_wr batch (a zero-length WRITE names no memory: IBA C9-88);
 * wr_complete's result */
static int batch_writes(struct ibv_qp *dci, struct ibv_ah *ah,
			const struct info *in, int n, uint32_t lkey, void *buf)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(dci);
	struct mlx5dv_qp_ex *mx = mlx5dv_qp_ex_from_ibv_qp_ex(x);
	int i;

	ibv_wr_start(x);
	for (i = 0; i < n; i++) {
		x->wr_id = 100 + (uint64_t)i;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(x, in->rkey, in->raddr);
		mlx5dv_wr_set_dc_addr(mx, ah, in->dctn, in->key);
		ibv_wr_set_sge(x, lkey, (uintptr_t)buf, 0);
	}
	return ibv_wr_complete(x);
}

/* target -- a DCT process: child_idx picks its data */
static int target(int rfd, int wfd)
{
	struct tctx t;
	struct ibv_srq_init_attr sa;
	struct ibv_srq *srq;
	struct ibv_qp *dct;
	struct ibv_mr *mr, *rmr;
	struct ibv_wc wc;
	struct info in;
	struct result res;
	uint8_t *buf, *region;
	int c = child_idx, m, got, i, bad;
	char go;

	memset(&res, 0, sizeof(res));
	buf = calloc((size_t)nmsg + 1, MSGMAX);
	region = malloc(REGION);
	if (!buf || !region || t_open(&t, 2 * SRQ_WR))
		return 10;
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = SRQ_WR;
	sa.attr.max_sge = 1;
	srq = ibv_create_srq(t.pd, &sa);
	mr = ibv_reg_mr(t.pd, buf, (size_t)(nmsg + 1) * MSGMAX,
			IBV_ACCESS_LOCAL_WRITE);
	rmr = ibv_reg_mr(t.pd, region, REGION, RW | IBV_ACCESS_REMOTE_ATOMIC);
	dct = srq ? dct_qp(&t, srq, KEY + (uint64_t)c) : NULL;
	if (!srq || !mr || !rmr || !dct ||
	    dct_up(dct, RW | IBV_ACCESS_REMOTE_ATOMIC, 1))
		return 11;
	for (i = 0; i < REGION; i++)
		region[i] = pat(c, 999, (uint32_t)i);
	in.dctn = dct->qp_num;
	in.rkey = rmr->rkey;
	in.raddr = (uintptr_t)region;
	in.key = KEY + (uint64_t)c;
	t_xsend(wfd, &in, sizeof(in));
	t_xrecv(rfd, &go, 1); /* post the receives now */
	for (m = 0; m <= nmsg; m++) {
		struct ibv_sge s = {(uintptr_t)(buf + (size_t)m * MSGMAX),
				    MSGMAX, mr->lkey};
		struct ibv_recv_wr w = {.wr_id = (uint64_t)m,
					.sg_list = &s,
					.num_sge = 1},
				   *b;

		if (ibv_post_srq_recv(srq, &w, &b))
			return 12;
	}
	t_xsend(wfd, &go, 1); /* they are posted */
	t_xrecv(rfd, &go, 1); /* everything was sent */
	for (m = 0; m < nmsg; m++) {
		if (t_wait(t.cq, &wc, 1, 20000) != 1)
			break;
		got = wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)m &&
		      wc.qp_num == dct->qp_num &&
		      wc.byte_len == msg_len(c, m) &&
		      wc.opcode == IBV_WC_RECV &&
		      (m % 2 ? (wc.wc_flags & IBV_WC_WITH_IMM) &&
				       be32toh(wc.imm_data) ==
					       (uint32_t)(c << 16 | m)
			     : !(wc.wc_flags & IBV_WC_WITH_IMM));
		for (bad = 0, i = 0; got && i < (int)wc.byte_len; i++)
			bad |= buf[(size_t)m * MSGMAX + (size_t)i] !=
			       pat(c, m, (uint32_t)i);
		if (!got || bad)
			break;
		if (!m)
			res.src_qp = wc.src_qp;
		else if (wc.src_qp != res.src_qp)
			break;
		res.recv_ok++;
	}
	res.extra = t_wait(t.cq, &wc, 1, 50);
	res.write_ok = 1;
	for (i = 0; i < REGION / 2; i++)
		res.write_ok &= region[i] == pat(c, 500, (uint32_t)i);
	for (; i < REGION; i++)
		res.write_ok &= region[i] == pat(c, 999, (uint32_t)i);
	t_xrecv(rfd, &go, 1); /* the wrong key was tried */
	res.viol = softrdma_dc_key_violations(dct);
	res.extra += t_wait(t.cq, &wc, 1, 50);
	t_xsend(wfd, &res, sizeof(res));
	t_xrecv(rfd, &go, 1);
	if (ibv_destroy_qp(dct) || ibv_destroy_srq(srq) || ibv_dereg_mr(mr) ||
	    ibv_dereg_mr(rmr))
		return 13;
	t_close(&t);
	free(buf);
	free(region);
	return 0;
}

/* drain -- n send completions of the DCI, each successful */
static int drain(struct ibv_cq *cq, int n)
{
	struct ibv_wc wc;
	int good = 0;

	while (n-- > 0) {
		if (t_wait(cq, &wc, 1, 20000) != 1)
			return good;
		if (wc.status == IBV_WC_SUCCESS)
			good++;
		else
			diag("completion %llu status %s",
			     (unsigned long long)wc.wr_id,
			     ibv_wc_status_str(wc.status));
	}
	return good;
}

/* the SRQ-limit target: receives posted, the limit armed, SENDs made */
#define LIM_POSTED 8
#define LIM_LIMIT  4
#define LIM_SENT   5 /* leaves 3 posted: below the limit */

/* limit_target -- a DCT on an SRQ whose limit is armed, in a process that
 * neither polls nor arms a CQ: it waits only in ibv_get_async_event (10 s
 * at most), then tells the event's type + 1 (-1: another element) and
 * the successful receive completions its CQ holds */
static int limit_target(int rfd, int wfd)
{
	static char buf[LIM_POSTED * 64];
	struct ibv_async_event ev;
	struct ibv_srq *srq;
	struct ibv_qp *dct;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct info in = {0};
	struct tctx t;
	int r[2] = {0, 0};
	char go;

	if (t_open(&t, 64))
		return 10;
	mr = ibv_reg_mr(t.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	srq = mr ? t_srq_filled(&t, 16, buf, 64, LIM_POSTED, mr->lkey,
				LIM_LIMIT)
		 : NULL;
	dct = srq ? dct_qp(&t, srq, KEY + 99) : NULL;
	if (!dct || dct_up(dct, RW, 1))
		return 11;
	in.dctn = dct->qp_num;
	in.key = KEY + 99;
	t_xsend(wfd, &in, sizeof(in));
	r[0] = t_async(t.ctx, 10000, &ev) + 1;
	if (r[0] && ev.element.srq != srq)
		r[0] = -1;
	while (ibv_poll_cq(t.cq, 1, &wc) == 1)
		r[1] += wc.status == IBV_WC_SUCCESS &&
			wc.wr_id == (uint64_t)r[1] &&
			!memcmp(buf + r[1] * 64, "dc-limit", 8);
	t_xsend(wfd, r, sizeof(r));
	t_xrecv(rfd, &go, 1);
	if (ibv_destroy_qp(dct) || ibv_destroy_srq(srq) || ibv_dereg_mr(mr))
		return 14;
	t_close(&t);
	return 0;
}

/*
 * test_dct_limit -- a DCT's SRQ falls below its armed limit while the
 * target only waits for async events: IBV_EVENT_SRQ_LIMIT_REACHED reaches
 * it all the same, as its HCA raises it when it takes the WQE (here: our
 * DCI, which serves the DCT); a DCI of our own on T's CQ, AH towards
 * this host
 */
static void test_dct_limit(struct tctx *t, struct ibv_ah *ah)
{
	struct ibv_qp *dci = dci_qp(t);
	struct info in;
	int r[2], rfd, wfd, m, good = 0, st = 0;
	pid_t pid;
	char go = 'g';

	if (!dci || dci_up(dci, 7, 10, 1))
		bail_out("limit dci");
	pid = t_spawn(limit_target, &rfd, &wfd);
	if (pid < 0)
		bail_out("spawn");
	t_xrecv(rfd, &in, sizeof(in));
	for (m = 0; m < LIM_SENT; m++)
		if (!post(dci, ah, in.dctn, in.key, IBV_WR_SEND, "dc-limit", 8,
			  0, (uint64_t)m, IBV_SEND_SIGNALED | IBV_SEND_INLINE,
			  0, 0, 1))
			good += drain(t->cq, 1);
	ok(good == LIM_SENT, "%d SENDs to a DCT whose process does not poll",
	   good);
	t_xrecv(rfd, r, sizeof(r));
	ok(r[0] - 1 == IBV_EVENT_SRQ_LIMIT_REACHED,
	   "%d of %d receives taken, limit %d: SRQ_LIMIT_REACHED, naming its "
	   "SRQ, reaches it waiting only for async events (%d)",
	   LIM_SENT, LIM_POSTED, LIM_LIMIT, r[0] - 1);
	is_int(r[1], LIM_SENT, "its CQ then holds the messages, in order");
	t_xsend(wfd, &go, 1);
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && !WEXITSTATUS(st), "the target exits cleanly (%d)",
	   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	close(rfd);
	close(wfd);
	ibv_destroy_qp(dci);
}

static void bad_args(struct tctx *t, struct ibv_srq *srq, struct ibv_ah *ah)
{
	struct ibv_qp_attr a;
	struct ibv_qp *q, *dci;
	struct mlx5dv_context dv;
	char buf[8];

	memset(&dv, 0, sizeof(dv));
	dv.comp_mask = MLX5DV_CONTEXT_MASK_DC_ODP_CAPS |
		       MLX5DV_CONTEXT_MASK_DCI_STREAMS;
	ok(!mlx5dv_query_device(t->ctx, &dv) &&
		   dv.comp_mask == (MLX5DV_CONTEXT_MASK_DC_ODP_CAPS |
				    MLX5DV_CONTEXT_MASK_DCI_STREAMS) &&
		   !dv.dc_odp_caps &&
		   !dv.dci_streams_caps.max_log_num_concurent,
	   "mlx5dv_query_device answers the DC fields (no ODP, no streams)");
	errno = 0;
	ok(!dc_qp(t, 0, srq, 1, 0, 0, IBV_QPT_DRIVER,
		  MLX5DV_QP_INIT_ATTR_MASK_DC) &&
		   errno == EINVAL,
	   "an unknown dc_type -> EINVAL");
	errno = 0;
	ok(!dct_qp(t, NULL, 1) && errno == EINVAL,
	   "a DCT without SRQ -> EINVAL");
	errno = 0;
	ok(!dc_qp(t, MLX5DV_DCTYPE_DCT, srq, 1, 0, 0, IBV_QPT_RC,
		  MLX5DV_QP_INIT_ATTR_MASK_DC) &&
		   errno == EINVAL,
	   "a DCT of type RC -> EINVAL");
	errno = 0;
	ok(!dc_qp(t, MLX5DV_DCTYPE_DCI, NULL, 0, 0, 0, IBV_QPT_DRIVER,
		  MLX5DV_QP_INIT_ATTR_MASK_DC) &&
		   errno == EINVAL,
	   "a DCI without IBV_QP_INIT_ATTR_SEND_OPS_FLAGS -> EINVAL");
	errno = 0;
	ok(!dc_qp(t, MLX5DV_DCTYPE_DCI, NULL, 0,
		  IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		  IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW, IBV_QPT_DRIVER,
		  MLX5DV_QP_INIT_ATTR_MASK_DC) &&
		   errno == EOPNOTSUPP,
	   "a DCI with memory window binds (not emulated) -> EOPNOTSUPP");
	errno = 0;
	ok(!dc_qp(t, MLX5DV_DCTYPE_DCI, NULL, 0,
		  IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, IBV_QP_EX_WITH_SEND,
		  IBV_QPT_DRIVER,
		  MLX5DV_QP_INIT_ATTR_MASK_DC |
			  MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS) &&
		   errno == EOPNOTSUPP,
	   "DCI streams (not emulated) -> EOPNOTSUPP");
	{
		struct ibv_qp_init_attr_ex qa;
		struct mlx5dv_qp_init_attr da;

		memset(&qa, 0, sizeof(qa));
		memset(&da, 0, sizeof(da));
		qa.qp_type = IBV_QPT_DRIVER;
		qa.send_cq = qa.recv_cq = t->cq;
		qa.pd = t->pd;
		qa.comp_mask =
			IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		qa.send_ops_flags = IBV_QP_EX_WITH_SEND;
		qa.cap.max_send_wr = 1;
		da.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC |
			       MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS;
		da.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
		da.create_flags = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE |
				  MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE;
		errno = 0;
		ok(!mlx5dv_create_qp(t->ctx, &qa, &da) && errno == EINVAL,
		   "DISABLE and ALLOW_SCATTER_TO_CQE together -> EINVAL");
		da.create_flags = MLX5DV_QP_CREATE_TUNNEL_OFFLOADS;
		errno = 0;
		ok(!mlx5dv_create_qp(t->ctx, &qa, &da) && errno == EOPNOTSUPP,
		   "an unemulated create flag -> EOPNOTSUPP");
		da.create_flags = MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE;
		q = mlx5dv_create_qp(t->ctx, &qa, &da);
		ok(q && q->qp_type == IBV_QPT_DRIVER,
		   "a DCI with DISABLE_SCATTER_TO_CQE (perftest, UCX)");
		if (q)
			ibv_destroy_qp(q);
	}
	errno = 0;
	ok(!dc_qp(t, 0, NULL, 0, 0, 0, IBV_QPT_DRIVER, 0) && errno == EINVAL,
	   "IBV_QPT_DRIVER without MLX5DV_QP_INIT_ATTR_MASK_DC -> EINVAL");

	/* a DCT: RESET -> INIT -> RTR only */
	q = dct_qp(t, srq, 9);
	if (!q)
		bail_out("dct");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.qp_access_flags = RW;
	/* one port without SOFTRDMA_NET: 2 is none of the device's (a port
	 * of the device is taken, tests/netns/dc-rails.sh) */
	a.port_num = 2;
	is_int(ibv_modify_qp(q, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS),
	       EINVAL, "DCT to INIT on a port the device lacks -> EINVAL");
	a.port_num = 0;
	is_int(ibv_modify_qp(q, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS),
	       EINVAL, "DCT to INIT on port 0 -> EINVAL");
	/* mlx5_ib_dct_query_qp answers a DCT in RTR only; the modify to
	 * INIT below finds it still in RESET */
	is_int(t_qp_state(q), -1, "query of a DCT in RESET -> EINVAL");
	a.qp_access_flags = 0;
	a.port_num = 1;
	is_int(ibv_modify_qp(q, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT),
	       EINVAL, "DCT to INIT without IBV_QP_ACCESS_FLAGS -> EINVAL");
	a.qp_access_flags = RW;
	ok(!ibv_modify_qp(q, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS),
	   "DCT to INIT");
	/* the AV's source GID: an index past the port's table, as the
	 * kernel's rdma_get_gid_attr refuses it */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.sgid_index = 16;
	a.ah_attr.port_num = 1;
	gid(q->context, &a.ah_attr.grh.dgid);
	is_int(ibv_modify_qp(q, &a,
			     IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV |
				     IBV_QP_PATH_MTU),
	       EINVAL,
	       "DCT to RTR with sgid_index 16 (past the table) -> "
	       "EINVAL");
	is_int(t_qp_state(q), -1, "query of a DCT in INIT -> EINVAL");
	a.ah_attr.grh.sgid_index = 1;
	ok(!ibv_modify_qp(q, &a,
			  IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV |
				  IBV_QP_PATH_MTU),
	   "DCT to RTR from its port's GID 1");
	a.qp_state = IBV_QPS_RTS;
	is_int(ibv_modify_qp(q, &a, IBV_QP_STATE), EINVAL,
	       "DCT to RTS -> EINVAL");
	is_int(t_qp_state(q), IBV_QPS_RTR, "it stays in RTR");
	{
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qia;

		/* as mlx5_ib_dct_query_qp: a DCT's attributes only */
		memset(&qa, 0xff, sizeof(qa));
		ok(!ibv_query_qp(q, &qa,
				 IBV_QP_STATE | IBV_QP_ACCESS_FLAGS |
					 IBV_QP_PORT | IBV_QP_PATH_MTU |
					 IBV_QP_MIN_RNR_TIMER,
				 &qia) &&
			   qa.qp_state == IBV_QPS_RTR &&
			   qa.qp_access_flags == RW && qa.port_num == 1 &&
			   qa.path_mtu == IBV_MTU_4096 &&
			   qa.min_rnr_timer == 1 && qa.timeout == 0,
		   "query of the DCT in RTR: its attributes, the rest 0");
		is_int(ibv_query_qp(q, &qa, IBV_QP_STATE | IBV_QP_TIMEOUT,
				    &qia),
		       EINVAL, "query of a DCT for IBV_QP_TIMEOUT -> EINVAL");
	}
	is_int(ibv_destroy_qp(q), 0, "destroy the DCT");

	/* a DCI: its attribute masks, posting */
	dci = dci_qp(t);
	if (!dci)
		bail_out("dci");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = RW;
	is_int(ibv_modify_qp(dci, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				     IBV_QP_ACCESS_FLAGS),
	       EINVAL, "DCI to INIT with IBV_QP_ACCESS_FLAGS -> EINVAL");
	is_int(post(dci, ah, 1, 1, IBV_WR_SEND, buf, 8, 0, 1, IBV_SEND_INLINE,
		    0, 0, 1),
	       EINVAL, "posting on a DCI in RESET -> EINVAL");
	ok(!ibv_modify_qp(dci, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT),
	   "DCI to INIT");
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	ok(!ibv_modify_qp(dci, &a, IBV_QP_STATE | IBV_QP_PATH_MTU),
	   "DCI to RTR");
	a.qp_state = IBV_QPS_RTS;
	is_int(ibv_modify_qp(dci, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
	       EINVAL, "DCI to RTS without IBV_QP_RNR_RETRY -> EINVAL");
	is_int(t_qp_state(dci), IBV_QPS_RTR, "it stays in RTR");
	ok(!ibv_modify_qp(dci, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC),
	   "DCI to RTS");
	is_int(post(dci, ah, 1, 1, IBV_WR_SEND, buf, 8, 0, 1, IBV_SEND_INLINE,
		    0, 0, 0),
	       EINVAL, "a WR without mlx5dv_wr_set_dc_addr -> EINVAL");
	is_int(post(dci, NULL, 1, 1, IBV_WR_SEND, buf, 8, 0, 1, IBV_SEND_INLINE,
		    0, 0, 1),
	       EINVAL, "a NULL address handle -> EINVAL");
	{
		struct ibv_send_wr w, *b;
		struct ibv_sge s = {(uintptr_t)buf, 8, 0};

		memset(&w, 0, sizeof(w));
		w.opcode = IBV_WR_SEND;
		w.sg_list = &s;
		w.num_sge = 1;
		w.send_flags = IBV_SEND_INLINE;
		is_int(ibv_post_send(dci, &w, &b), EINVAL,
		       "ibv_post_send on a DCI (no target) -> EINVAL");
	}
	ok(!t_wait(t->cq, (struct ibv_wc[1]){0}, 1, 20),
	   "nothing was posted by the refused calls");
	is_int(ibv_destroy_qp(dci), 0, "destroy the DCI");
}

/* ib_lid -- in the IB mode (a process of its own: the mode is read once a
 * process), a DCI's SEND through a LID-routed AH (no GRH) to this host's
 * port 1 reaches the DCT, intact: 0, or bits of what failed */
static int ib_lid(void)
{
	struct ibv_srq_init_attr sa;
	struct ibv_port_attr pa;
	struct ibv_ah_attr aa;
	struct ibv_qp_attr a;
	struct ibv_qp *dct, *dci;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	struct ibv_wc wc[2];
	struct tctx t;
	char buf[128];
	int n, fails = 0;

	setenv("SOFTRDMA_LINK", "ib", 1);
	if (t_open(&t, 16) || ibv_query_port(t.ctx, 1, &pa) || !pa.lid)
		return 0xff;
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	srq = ibv_create_srq(t.pd, &sa);
	mr = ibv_reg_mr(t.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	dct = srq ? dct_qp(&t, srq, KEY) : NULL;
	dci = dci_qp(&t);
	if (!mr || !dct || !dci || dci_up(dci, 7, 10, 1) ||
	    t_post_srq_recv(srq, buf + 64, 64, mr->lkey, 1))
		return 0xff;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(dct, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return 0xff;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.min_rnr_timer = 1;
	a.ah_attr.dlid = pa.lid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(dct, &a,
			  IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV |
				  IBV_QP_PATH_MTU))
		return 0xff;
	memset(&aa, 0, sizeof(aa));
	aa.dlid = pa.lid;
	aa.sl = 1;
	aa.port_num = 1;
	ah = ibv_create_ah(t.pd, &aa);
	if (!ah)
		return 0xff;
	memset(buf, 0x5c, 64);
	if (post(dci, ah, dct->qp_num, KEY, IBV_WR_SEND, buf, 64, mr->lkey, 7,
		 IBV_SEND_SIGNALED, 0, 0, 1))
		fails |= 1;
	/* the SEND's completion and the receive's, in either order */
	n = t_wait(t.cq, wc, 2, 20000);
	if (n != 2 || wc[0].status != IBV_WC_SUCCESS ||
	    wc[1].status != IBV_WC_SUCCESS)
		fails |= 2;
	if (memcmp(buf, buf + 64, 64))
		fails |= 4;
	ibv_destroy_ah(ah);
	ibv_destroy_qp(dci);
	ibv_destroy_qp(dct);
	ibv_destroy_srq(srq);
	ibv_dereg_mr(mr);
	t_close(&t);
	return fails;
}

int main(void)
{
	struct tctx t;
	struct info in[NDCT];
	struct result res[NDCT];
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	struct ibv_qp *dci;
	struct ibv_mr *mr;
	struct ibv_srq_init_attr sa;
	struct ibv_srq *srq;
	struct ibv_wc wc;
	pid_t pid[NDCT];
	int rfd[NDCT], wfd[NDCT], c, m, i, st, maps0, fd0, posted, good;
	uint8_t *src, *rd;
	char go = 'g';

	t_isolate("dc");
	/* first: a child that has not opened the device yet reads the mode */
	st = t_fork_reap(ib_lid);
	if (!ok(st == 0, "IB mode: a DCI's SEND through a LID-routed AH "
			 "reaches the DCT on this host, intact"))
		diag("  its exit status %d", st);
	if (tap_small())
		nmsg = 20;
	src = malloc((size_t)NDCT * MSGMAX);
	rd = malloc(REGION);
	for (c = 0; c < NDCT; c++) {
		child_idx = c;
		pid[c] = t_spawn(target, &rfd[c], &wfd[c]);
		if (pid[c] < 0)
			bail_out("spawn");
	}
	if (!src || !rd || t_open(&t, 256))
		bail_out("open");
	fd0 = t_fd_count();
	maps0 = maps_count();
	for (c = 0; c < NDCT; c++)
		t_xrecv(rfd[c], &in[c], sizeof(in[c]));
	mr = ibv_reg_mr(t.pd, src, (size_t)NDCT * MSGMAX,
			IBV_ACCESS_LOCAL_WRITE);
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.grh.sgid_index = 1;
	aa.grh.hop_limit = 1;
	aa.port_num = 1;
	gid(t.ctx, &aa.grh.dgid);
	ah = ibv_create_ah(t.pd, &aa);
	dci = dci_qp(&t);
	if (!mr || !ah || !dci || dci_up(dci, 7, 10, 1))
		bail_out("dci");

	/* RNR: the first SEND waits while its target's SRQ is empty */
	for (i = 0; i < (int)msg_len(0, 0); i++)
		src[i] = pat(0, 0, (uint32_t)i);
	is_int(post(dci, ah, in[0].dctn, in[0].key, IBV_WR_SEND, src,
		    msg_len(0, 0), mr->lkey, 0, IBV_SEND_SIGNALED, 0, 0, 1),
	       0, "SEND to a DCT whose SRQ is empty is posted");
	is_int(t_wait(t.cq, &wc, 1, 100), 0,
	       "no completion while the SRQ is empty (RNR, rnr_retry 7)");
	for (c = 0; c < NDCT; c++)
		t_xsend(wfd[c], &go, 1);
	is_int(drain(t.cq, 1), 1, "it completes once receives are posted");
	for (c = 0; c < NDCT; c++)
		t_xrecv(rfd[c], &go, 1); /* every target posted its receives */

	/* one target stopped: its HCA's work is done without it */
	kill(pid[1], SIGSTOP);
	good = 0;
	posted = 0;
	for (m = 0; m < nmsg; m++) {
		for (c = 0; c < NDCT; c++) {
			uint32_t len = msg_len(c, m);
			uint8_t *p = src + (size_t)c * MSGMAX;

			if (!m && !c)
				continue;
			for (i = 0; i < (int)len; i++)
				p[i] = pat(c, m, (uint32_t)i);
			/* WR ids carry (c, m): imm of the odd ones */
			if (post(dci, ah, in[c].dctn, in[c].key,
				 m % 2 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, p,
				 len, mr->lkey, (uint64_t)(c << 16 | m),
				 IBV_SEND_SIGNALED |
					 (len <= 64 ? IBV_SEND_INLINE : 0),
				 0, 0, 1))
				break;
			posted++;
			/* one at a time: the buffer is reused */
			good += drain(t.cq, 1);
		}
	}
	ok(good == posted && posted == NDCT * nmsg - 1,
	   "%d SENDs to %d DCTs (one process stopped) complete", good, NDCT);
	/* RDMA WRITE the first half of each region, then READ it all back */
	for (c = 0; c < NDCT; c++) {
		uint8_t *wb = malloc(REGION / 2);
		struct ibv_mr *wmr, *rmr;

		for (i = 0; wb && i < REGION / 2; i++)
			wb[i] = pat(c, 500, (uint32_t)i);
		wmr = wb ? ibv_reg_mr(t.pd, wb, REGION / 2, 0) : NULL;
		memset(rd, 0, REGION);
		rmr = ibv_reg_mr(t.pd, rd, REGION, IBV_ACCESS_LOCAL_WRITE);
		if (!wmr || !rmr)
			bail_out("mr");
		ok(!post(dci, ah, in[c].dctn, in[c].key, IBV_WR_RDMA_WRITE, wb,
			 REGION / 2, wmr->lkey, 1, 0, in[c].rkey, in[c].raddr,
			 1) &&
			   !post(dci, ah, in[c].dctn, in[c].key,
				 IBV_WR_RDMA_READ, rd, REGION, rmr->lkey, 2,
				 IBV_SEND_SIGNALED, in[c].rkey, in[c].raddr,
				 1) &&
			   drain(t.cq, 1) == 1,
		   "DCT %d: unsignaled RDMA WRITE then RDMA READ complete", c);
		for (good = 1, i = 0; i < REGION; i++)
			good &= rd[i] ==
				pat(c, i < REGION / 2 ? 500 : 999, (uint32_t)i);
		ok(good, "DCT %d: the READ saw the WRITE and the region", c);
		{
			/* FETCH_AND_ADD +1 then -1 on the region's last 8
			 * bytes, in the target's memory: it ends as it was */
			uint64_t want, got[2] = {0, 0};
			struct ibv_mr *gm = ibv_reg_mr(t.pd, got, sizeof(got),
						       IBV_ACCESS_LOCAL_WRITE);

			memcpy(&want, rd + REGION - 8, 8);
			ok(gm &&
				   !atomic(dci, ah, in[c].dctn, in[c].key,
					   &got[0], 8, gm->lkey, 4, in[c].rkey,
					   in[c].raddr + REGION - 8, 1, 0, 0) &&
				   !atomic(dci, ah, in[c].dctn, in[c].key,
					   &got[1], 8, gm->lkey, 5, in[c].rkey,
					   in[c].raddr + REGION - 8, UINT64_MAX,
					   0, 0) &&
				   drain(t.cq, 2) == 2 && got[0] == want &&
				   got[1] == want + 1,
			   "DCT %d: FETCH_AND_ADD +1, -1 in its process", c);
			if (gm)
				ibv_dereg_mr(gm);
		}
		ibv_dereg_mr(wmr);
		ibv_dereg_mr(rmr);
		free(wb);
	}
	/* ibv_wr_complete posts a batch whole or not at all */
	is_int(batch_writes(dci, ah, &in[0], 65, mr->lkey, src), ENOMEM,
	       "a batch of 65 on a DCI of 64: ENOMEM");
	is_int(t_wait(t.cq, &wc, 1, 200), 0, "none of it completes");
	is_int(batch_writes(dci, ah, &in[0], 64, mr->lkey, src), 0,
	       "a batch of 64: posted");
	is_int(drain(t.cq, 64), 64, "all 64 complete");
	is_int(post(dci, ah, in[0].dctn, in[0].key, IBV_WR_RDMA_WRITE, src, 8,
		    mr->lkey, 3, IBV_SEND_SIGNALED, in[0].rkey,
		    in[0].raddr + REGION - 4, 1),
	       0, "an RDMA WRITE past the region is posted");
	ok(t_wait(t.cq, &wc, 1, 20000) == 1 &&
		   wc.status == IBV_WC_REM_ACCESS_ERR && wc.wr_id == 3,
	   "and completes with IBV_WC_REM_ACCESS_ERR");
	is_int(t_qp_state(dci), IBV_QPS_ERR, "the DCI is in ERR");
	kill(pid[1], SIGCONT);
	{
		struct ibv_qp_attr a;

		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RESET;
		ok(!ibv_modify_qp(dci, &a, IBV_QP_STATE) &&
			   !dci_up(dci, 7, 10, 1),
		   "the DCI back to RTS through RESET");
	}
	for (c = 0; c < NDCT; c++)
		t_xsend(wfd[c], &go, 1);

	/* a wrong access key: unanswered, RETRY_EXC_ERR; the next flushes */
	{
		struct ibv_qp_ex *x = ibv_qp_to_qp_ex(dci);
		struct mlx5dv_qp_ex *mx = mlx5dv_qp_ex_from_ibv_qp_ex(x);

		ibv_wr_start(x);
		x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
		x->wr_id = 41;
		ibv_wr_send(x);
		mlx5dv_wr_set_dc_addr(mx, ah, in[2].dctn, in[2].key + 1);
		ibv_wr_set_inline_data(x, src, 8);
		x->wr_id = 42;
		ibv_wr_send(x);
		mlx5dv_wr_set_dc_addr(mx, ah, in[2].dctn, in[2].key);
		ibv_wr_set_inline_data(x, src, 8);
		is_int(ibv_wr_complete(x), 0, "two SENDs: a wrong key, a good");
	}
	ok(t_wait(t.cq, &wc, 1, 20000) == 1 && wc.wr_id == 41 &&
		   wc.status == IBV_WC_RETRY_EXC_ERR,
	   "the wrong key: IBV_WC_RETRY_EXC_ERR (the DCT drops it)");
	ok(t_wait(t.cq, &wc, 1, 20000) == 1 && wc.wr_id == 42 &&
		   wc.status == IBV_WC_WR_FLUSH_ERR,
	   "the next one flushed");
	for (c = 0; c < NDCT; c++) {
		t_xsend(wfd[c], &go, 1);
		t_xrecv(rfd[c], &res[c], sizeof(res[c]));
		ok(res[c].recv_ok == nmsg,
		   "DCT %d: %d messages received in order, data, imm, length "
		   "verified",
		   c, res[c].recv_ok);
		ok(res[c].src_qp == dci->qp_num, "DCT %d: src_qp is the DCI",
		   c);
		ok(!res[c].extra, "DCT %d: nothing else delivered", c);
		ok(res[c].write_ok, "DCT %d: its region holds the WRITE", c);
		ok(res[c].viol == (c == 2 ? 1u : 0u),
		   "DCT %d: %u key violations counted", c, res[c].viol);
	}

	test_dct_limit(&t, ah);

	/* a DCT of this very process; rnr_retry 0 against an empty SRQ */
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	srq = ibv_create_srq(t.pd, &sa);
	if (!srq)
		bail_out("srq");
	{
		struct ibv_qp *dct = dct_qp(&t, srq, 7), *d2 = dci_qp(&t);
		uint8_t rb[64];
		struct ibv_mr *rbm = ibv_reg_mr(t.pd, rb, sizeof(rb),
						IBV_ACCESS_LOCAL_WRITE);
		struct ibv_sge s = {(uintptr_t)rb, sizeof(rb), 0};
		struct ibv_recv_wr w = {.wr_id = 5,
					.sg_list = &s,
					.num_sge = 1},
				   *b;

		if (!dct || !d2 || !rbm || dct_up(dct, RW, 1) ||
		    dci_up(d2, 0, 10, 1))
			bail_out("local dc");
		s.lkey = rbm->lkey;
		is_int(post(d2, ah, dct->qp_num, 7, IBV_WR_SEND, src, 8, 0, 6,
			    IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0, 0, 1),
		       0, "SEND to an empty SRQ with rnr_retry 0");
		ok(t_wait(t.cq, &wc, 1, 20000) == 1 && wc.wr_id == 6 &&
			   wc.status == IBV_WC_RNR_RETRY_EXC_ERR,
		   "IBV_WC_RNR_RETRY_EXC_ERR");
		{
			struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};

			ok(!ibv_post_srq_recv(srq, &w, &b) &&
				   !ibv_modify_qp(dci, &a, IBV_QP_STATE) &&
				   !dci_up(dci, 7, 10, 1),
			   "post a receive; the DCI back to RTS");
		}
		memcpy(src, "dc-local", 8);
		is_int(post(dci, ah, dct->qp_num, 7, IBV_WR_SEND_WITH_IMM, src,
			    8, 0, 7, IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0, 0,
			    1),
		       0, "SEND_WITH_IMM to a DCT of this process");
		for (good = 0, i = 0; i < 2 && t_wait(t.cq, &wc, 1, 20000); i++)
			good += (wc.wr_id == 7 && wc.status == IBV_WC_SUCCESS &&
				 wc.opcode == IBV_WC_SEND) ||
				(wc.wr_id == 5 && wc.status == IBV_WC_SUCCESS &&
				 wc.opcode == IBV_WC_RECV &&
				 wc.src_qp == dci->qp_num &&
				 wc.qp_num == dct->qp_num && wc.byte_len == 8 &&
				 (wc.wc_flags & IBV_WC_WITH_IMM) &&
				 be32toh(wc.imm_data) == 7 &&
				 !memcmp(rb, "dc-local", 8));
		is_int(good, 2, "send and receive completions, data verified");
		/* WRITE_WITH_IMM: the data at the rkey, a receive consumed */
		{
			uint8_t wb[16];
			struct ibv_mr *wbm =
				ibv_reg_mr(t.pd, wb, sizeof(wb), RW);

			memset(wb, 0, sizeof(wb));
			w.wr_id = 8;
			memcpy(src, "imm-wrt!", 8);
			ok(wbm && !ibv_post_srq_recv(srq, &w, &b) &&
				   !post(dci, ah, dct->qp_num, 7,
					 IBV_WR_RDMA_WRITE_WITH_IMM, src, 8, 0,
					 9, IBV_SEND_SIGNALED | IBV_SEND_INLINE,
					 wbm->rkey, (uintptr_t)wb + 4, 1),
			   "RDMA WRITE_WITH_IMM to the local DCT");
			for (good = 0, i = 0;
			     i < 2 && t_wait(t.cq, &wc, 1, 20000); i++)
				good += (wc.wr_id == 9 &&
					 wc.status == IBV_WC_SUCCESS &&
					 wc.opcode == IBV_WC_RDMA_WRITE) ||
					(wc.wr_id == 8 &&
					 wc.status == IBV_WC_SUCCESS &&
					 wc.opcode ==
						 IBV_WC_RECV_RDMA_WITH_IMM &&
					 wc.src_qp == dci->qp_num &&
					 wc.byte_len == 8 &&
					 be32toh(wc.imm_data) == 9);
			ok(good == 2 && !memcmp(wb + 4, "imm-wrt!", 8) &&
				   !wb[3] && !wb[12],
			   "write and receive-with-imm completions, data at "
			   "the rkey");
			if (wbm)
				ibv_dereg_mr(wbm);
		}
		/* a receive too short: the DCI's REM_INV_REQ_ERR, the DCT's
		 * LOC_LEN_ERR; the DCT serves on */
		{
			struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};

			s.length = 4;
			w.wr_id = 11;
			ok(!ibv_post_srq_recv(srq, &w, &b) &&
				   !post(dci, ah, dct->qp_num, 7, IBV_WR_SEND,
					 src, 8, 0, 12,
					 IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0,
					 0, 1),
			   "an 8-byte SEND into a 4-byte receive");
			for (good = 0, i = 0;
			     i < 2 && t_wait(t.cq, &wc, 1, 20000); i++)
				good += (wc.wr_id == 12 &&
					 wc.status == IBV_WC_REM_INV_REQ_ERR) ||
					(wc.wr_id == 11 &&
					 wc.status == IBV_WC_LOC_LEN_ERR);
			is_int(good, 2,
			       "REM_INV_REQ_ERR at the DCI, LOC_LEN_ERR at the "
			       "DCT");
			is_int(t_qp_state(dct), IBV_QPS_RTR,
			       "the DCT stays in RTR");
			s.length = sizeof(rb);
			w.wr_id = 13;
			ok(!ibv_modify_qp(dci, &a, IBV_QP_STATE) &&
				   !dci_up(dci, 7, 10, 1) &&
				   !ibv_post_srq_recv(srq, &w, &b) &&
				   !post(dci, ah, dct->qp_num, 7, IBV_WR_SEND,
					 src, 8, 0, 14,
					 IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0,
					 0, 1),
			   "the next SEND to it");
			for (good = 0, i = 0;
			     i < 2 && t_wait(t.cq, &wc, 1, 20000); i++)
				good += wc.status == IBV_WC_SUCCESS &&
					(wc.wr_id == 13 || wc.wr_id == 14);
			is_int(good, 2, "is served");
		}
		/* atomics, to a DCT with remote atomic access */
		{
			uint64_t av[2] = {100, 0}, ares[2] = {0, 0};
			struct ibv_mr *am =
				ibv_reg_mr(t.pd, av, sizeof(av),
					   RW | IBV_ACCESS_REMOTE_ATOMIC);
			struct ibv_mr *rm = ibv_reg_mr(t.pd, ares, sizeof(ares),
						       IBV_ACCESS_LOCAL_WRITE);
			struct ibv_qp *adct = dct_qp(&t, srq, 8);
			struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};

			if (!am || !rm || !adct ||
			    dct_up(adct, RW | IBV_ACCESS_REMOTE_ATOMIC, 1))
				bail_out("atomic dct");
			is_int(atomic(dci, ah, adct->qp_num, 8, ares, 4,
				      rm->lkey, 20, am->rkey, (uintptr_t)av, 5,
				      0, 0),
			       EINVAL, "an atomic into 4 bytes -> EINVAL");
			ok(!atomic(dci, ah, adct->qp_num, 8, ares, 8, rm->lkey,
				   21, am->rkey, (uintptr_t)av, 5, 0, 0) &&
				   t_wait(t.cq, &wc, 1, 20000) == 1 &&
				   wc.status == IBV_WC_SUCCESS &&
				   wc.opcode == IBV_WC_FETCH_ADD &&
				   ares[0] == 100 && av[0] == 105,
			   "FETCH_AND_ADD: old 100, now 105");
			ok(!atomic(dci, ah, adct->qp_num, 8, ares, 8, rm->lkey,
				   22, am->rkey, (uintptr_t)av, 105, 7, 1) &&
				   t_wait(t.cq, &wc, 1, 20000) == 1 &&
				   wc.status == IBV_WC_SUCCESS &&
				   wc.opcode == IBV_WC_COMP_SWAP &&
				   ares[0] == 105 && av[0] == 7,
			   "CMP_AND_SWP that matches: old 105, now 7");
			ok(!atomic(dci, ah, adct->qp_num, 8, ares, 8, rm->lkey,
				   23, am->rkey, (uintptr_t)av, 1, 9, 1) &&
				   t_wait(t.cq, &wc, 1, 20000) == 1 &&
				   wc.status == IBV_WC_SUCCESS &&
				   ares[0] == 7 && av[0] == 7,
			   "CMP_AND_SWP that does not match: old 7, unchanged");
			ares[1] = 0xabc;
			ok(!atomic(dci, ah, adct->qp_num, 8, ares, 16, rm->lkey,
				   26, am->rkey, (uintptr_t)av, 0, 0, 0) &&
				   t_wait(t.cq, &wc, 1, 20000) == 1 &&
				   wc.status == IBV_WC_SUCCESS &&
				   ares[0] == 7 && ares[1] == 0xabc &&
				   av[0] == 7,
			   "an atomic into a 16-byte SGE (as on RC): the old "
			   "value in its first 8 bytes, the rest untouched");
			ok(!atomic(dci, ah, dct->qp_num, 7, ares, 8, rm->lkey,
				   24, am->rkey, (uintptr_t)av, 1, 0, 0) &&
				   t_wait(t.cq, &wc, 1, 20000) == 1 &&
				   wc.status == IBV_WC_REM_ACCESS_ERR &&
				   av[0] == 7,
			   "to a DCT without remote atomic access: "
			   "REM_ACCESS_ERR");
			ok(!ibv_modify_qp(dci, &a, IBV_QP_STATE) &&
				   !dci_up(dci, 7, 10, 1) &&
				   !atomic(dci, ah, adct->qp_num, 8, ares, 8,
					   rm->lkey, 25, am->rkey,
					   (uintptr_t)av + 4, 1, 0, 0) &&
				   t_wait(t.cq, &wc, 1, 20000) == 1 &&
				   wc.status == IBV_WC_REM_INV_REQ_ERR &&
				   av[0] == 7 && !av[1],
			   "a remote address not 8-byte aligned: "
			   "REM_INV_REQ_ERR");
			ok(!ibv_modify_qp(dci, &a, IBV_QP_STATE) &&
				   !dci_up(dci, 7, 10, 1),
			   "the DCI back to RTS");
			is_int(ibv_destroy_qp(adct), 0,
			       "destroy the atomic DCT");
			ibv_dereg_mr(am);
			ibv_dereg_mr(rm);
		}
		/* a CQ overrun: a DCI whose send CQ has one entry posts three
		 * signalled zero-length WRITEs; the CQ's error, and the DCI
		 * goes to ERR with IBV_EVENT_QP_FATAL, as an RC requester */
		{
			struct tctx t1 = t;
			struct pollfd pf = {.fd = t.ctx->async_fd,
					    .events = POLLIN};
			struct ibv_async_event ev;
			struct ibv_qp *d3;
			int cqerr = 0, fatal = 0;

			t1.cq = ibv_create_cq(t.ctx, 1, NULL, NULL, 0);
			d3 = t1.cq ? dci_qp(&t1) : NULL;
			if (!d3 || dci_up(d3, 7, 10, 1))
				bail_out("overrun DCI");
			for (i = 0; i < 3; i++)
				post(d3, ah, dct->qp_num, 7, IBV_WR_RDMA_WRITE,
				     src, 0, mr->lkey, 30 + (uint64_t)i,
				     IBV_SEND_SIGNALED, 0, 0, 1);
			t_wait(t.cq, &wc, 1, 300); /* the progress */
			while (poll(&pf, 1, 300) == 1 &&
			       !ibv_get_async_event(t.ctx, &ev)) {
				cqerr += ev.event_type == IBV_EVENT_CQ_ERR &&
					 ev.element.cq == t1.cq;
				fatal += ev.event_type == IBV_EVENT_QP_FATAL &&
					 ev.element.qp == d3;
				ibv_ack_async_event(&ev);
			}
			ok(cqerr == 1 && fatal == 1,
			   "DCI send CQ overrun: IBV_EVENT_CQ_ERR (%d), "
			   "IBV_EVENT_QP_FATAL (%d)",
			   cqerr, fatal);
			is_int(t_qp_state(d3), IBV_QPS_ERR,
			       "the overrun DCI is in ERR");
			ok(t_wait(t1.cq, &wc, 1, 1000) == 1 && wc.wr_id == 30 &&
				   wc.status == IBV_WC_SUCCESS,
			   "the completion that fit is kept");
			ok(!ibv_destroy_qp(d3) && !ibv_destroy_cq(t1.cq),
			   "destroy the overrun DCI and its CQ");
		}
		/* a DCT's receive overrun, as mlx5's DCT responder: more
		 * messages than its SRQ holds receives wait (RNR NAKs to the
		 * DCI, rnr_retry 7) until one is posted, the DCT unharmed;
		 * more than its CQ holds overrun the CQ: IBV_EVENT_CQ_ERR
		 * and nothing else (the DCT's catastrophic error is not an
		 * event mlx5_core hands a DCT: is_event_type_allowed), its
		 * later requests unanswered */
		{
			struct tctx t2 = t;
			struct pollfd pf = {.fd = t.ctx->async_fd,
					    .events = POLLIN};
			struct ibv_srq_init_attr sa2;
			struct ibv_async_event ev;
			struct ibv_srq *srq2;
			struct ibv_qp *odct, *d4;
			struct ibv_wc ow[8];
			uint8_t ob[4 * 64];
			struct ibv_mr *obm = ibv_reg_mr(t.pd, ob, sizeof(ob),
							IBV_ACCESS_LOCAL_WRITE);
			struct ibv_sge os = {0, 64, 0};
			struct ibv_recv_wr orw = {.sg_list = &os, .num_sge = 1},
					   *ob_bad;
			int cqerr = 0, fatal = 0, other = 0, n, k, cqe;

			memset(&sa2, 0, sizeof(sa2));
			sa2.attr.max_wr = 8;
			sa2.attr.max_sge = 1;
			srq2 = ibv_create_srq(t.pd, &sa2);
			t2.cq = ibv_create_cq(t.ctx, 2, NULL, NULL, 0);
			odct = srq2 && t2.cq ? dct_qp(&t2, srq2, 9) : NULL;
			d4 = dci_qp(&t);
			if (!obm || !odct || !d4 || dct_up(odct, RW, 1) ||
			    dci_up(d4, 7, 10, 1))
				bail_out("overrun DCT");
			os.lkey = obm->lkey;
			for (k = 0; k < 2; k++) {
				orw.wr_id = 40 + (uint64_t)k;
				os.addr = (uintptr_t)(ob + k * 64);
				if (ibv_post_srq_recv(srq2, &orw, &ob_bad))
					bail_out("post_srq_recv");
			}
			for (k = 0; k < 3; k++)
				post(d4, ah, odct->qp_num, 9,
				     IBV_WR_SEND_WITH_IMM, src, 8, 0,
				     50 + (uint64_t)k,
				     IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0, 0,
				     1);
			n = t_wait(t.cq, ow, 3, 300);
			ok(n == 2 && ow[0].wr_id == 50 && ow[1].wr_id == 51 &&
				   ow[0].status == IBV_WC_SUCCESS &&
				   ow[1].status == IBV_WC_SUCCESS,
			   "SRQ overrun: two SENDs of three complete, the "
			   "third "
			   "waits for a receive (%d)",
			   n);
			n = t_wait(t2.cq, ow, 2, 1000);
			ok(n == 2 && ow[0].wr_id == 40 && ow[1].wr_id == 41 &&
				   ow[0].status == IBV_WC_SUCCESS &&
				   ow[0].src_qp == d4->qp_num &&
				   ow[1].status == IBV_WC_SUCCESS,
			   "the DCT received two (%d)", n);
			is_int(t_qp_state(odct), IBV_QPS_RTR,
			       "the DCT stays in RTR");
			orw.wr_id = 42;
			os.addr = (uintptr_t)(ob + 2 * 64);
			ok(!ibv_post_srq_recv(srq2, &orw, &ob_bad) &&
				   t_wait(t.cq, ow, 1, 20000) == 1 &&
				   ow[0].wr_id == 52 &&
				   ow[0].status == IBV_WC_SUCCESS &&
				   t_wait(t2.cq, ow, 1, 1000) == 1 &&
				   ow[0].wr_id == 42 &&
				   ow[0].status == IBV_WC_SUCCESS,
			   "a receive posted: the third arrives");
			/* the DCT's CQ (2 asked for, 3 given, as mlx5 rounds
			 * up): one receive completion more overruns it */
			cqe = t2.cq->cqe;
			if (cqe < 2 || cqe > 7)
				bail_out("CQ of %d", cqe);
			for (k = 0; k <= cqe; k++) {
				orw.wr_id = 43 + (uint64_t)k;
				os.addr = (uintptr_t)(ob + (k % 4) * 64);
				if (ibv_post_srq_recv(srq2, &orw, &ob_bad))
					bail_out("post_srq_recv");
			}
			for (k = 0; k <= cqe; k++)
				post(d4, ah, odct->qp_num, 9,
				     IBV_WR_SEND_WITH_IMM, src, 8, 0,
				     60 + (uint64_t)k,
				     IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0, 0,
				     1);
			n = t_wait(t.cq, ow, cqe + 1, 20000);
			ok(n == cqe + 1 &&
				   ow[cqe].wr_id == 60 + (uint64_t)cqe &&
				   ow[cqe].status == IBV_WC_SUCCESS,
			   "CQ overrun: the DCI's %d SENDs are acknowledged "
			   "(%d)",
			   cqe + 1, n);
			/* the DCT's process polls: those that fit, the last
			 * overruns its CQ */
			n = t_wait(t2.cq, ow, 8, 1000);
			for (k = 0, good = n == cqe; k < n; k++)
				good = good &&
				       ow[k].wr_id == 43 + (uint64_t)k &&
				       ow[k].status == IBV_WC_SUCCESS;
			ok(good, "the %d completions that fit are kept (%d)",
			   cqe, n);
			while (poll(&pf, 1, 300) == 1 &&
			       !ibv_get_async_event(t.ctx, &ev)) {
				cqerr += ev.event_type == IBV_EVENT_CQ_ERR &&
					 ev.element.cq == t2.cq;
				fatal += ev.event_type == IBV_EVENT_QP_FATAL &&
					 ev.element.qp == odct;
				other += ev.event_type != IBV_EVENT_CQ_ERR &&
					 ev.event_type != IBV_EVENT_QP_FATAL;
				ibv_ack_async_event(&ev);
			}
			ok(cqerr == 1 && !fatal && !other,
			   "DCT receive CQ overrun: IBV_EVENT_CQ_ERR (%d), "
			   "no IBV_EVENT_QP_FATAL (%d) nor other (%d)",
			   cqerr, fatal, other);
			post(d4, ah, odct->qp_num, 9, IBV_WR_SEND, src, 8, 0,
			     70, IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0, 0, 1);
			ok(t_wait(t.cq, ow, 1, 20000) == 1 &&
				   ow[0].wr_id == 70 &&
				   ow[0].status == IBV_WC_RETRY_EXC_ERR,
			   "the overrun DCT answers nothing: RETRY_EXC_ERR");
			/* mlx5_ib_dct_query_qp says RTR whatever the DCT's
			 * hardware state */
			is_int(t_qp_state(odct), IBV_QPS_RTR,
			       "ibv_query_qp of the overrun DCT says RTR");
			ok(!ibv_destroy_qp(d4) && !ibv_destroy_qp(odct) &&
				   !ibv_destroy_cq(t2.cq) &&
				   !ibv_destroy_srq(srq2) && !ibv_dereg_mr(obm),
			   "destroy the overrun DCT, its CQ and SRQ");
		}
		is_int(ibv_destroy_qp(dct), 0, "destroy the local DCT");
		is_int(ibv_destroy_qp(d2), 0, "destroy the second DCI");
		ibv_dereg_mr(rbm);
	}
	bad_args(&t, srq, ah);

	for (c = 0; c < NDCT; c++) {
		t_xsend(wfd[c], &go, 1);
		waitpid(pid[c], &st, 0);
		ok(WIFEXITED(st) && !WEXITSTATUS(st), "DCT %d exited 0 (%d)", c,
		   st);
		close(rfd[c]);
		close(wfd[c]);
	}
	is_int(ibv_destroy_qp(dci), 0, "destroy the DCI");
	is_int(ibv_destroy_srq(srq), 0, "destroy the SRQ");
	is_int(ibv_destroy_ah(ah), 0, "destroy the AH");
	is_int(ibv_dereg_mr(mr), 0, "deregister");
	is_int(t_fd_count(), fd0 - 2 * NDCT, "no fd leaked");
	is_int(maps_count(), maps0,
	       "no segment left mapped (the DCTs it reached)");
	t_close(&t);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	free(src);
	free(rd);
	return done_testing();
}
