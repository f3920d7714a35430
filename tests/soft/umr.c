/* SPDX-License-Identifier: MIT */
/* umr.c -- mlx5dv indirect mkeys and UMR (mlx5dv_wr_mr_list,
 * mlx5dv_wr_mr_interleaved) on softrdma: a list of 64 non-adjacent pieces
 * and an interleaved pattern written and read by a peer process in one
 * operation each, byte for byte; a piece without the access refused;
 * bad inputs refused with libmlx5's errors and nothing half-made */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/mlx5dv.h>

#include "../tap.h"
#include "common.h"

#define NPIECE	 64
#define PIECE	 (40 + 7) /* odd sizes: nothing aligned by chance */
#define GAP	 13
#define AREA	 (NPIECE * (PIECE + GAP) * 2)
#define IL_COUNT 24  /* bytes_count */
#define IL_SKIP	 40  /* bytes_skip */
#define IL_REP	 100 /* repeat_count */
#define RW                                                  \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
	 IBV_ACCESS_REMOTE_READ)

static struct ibv_qp *umr_qp(struct tctx *t, uint64_t dv_ops, int ibv_mask)
{
	struct ibv_qp_init_attr_ex qa;
	struct mlx5dv_qp_init_attr da;

	memset(&qa, 0, sizeof(qa));
	memset(&da, 0, sizeof(da));
	qa.qp_type = IBV_QPT_RC;
	qa.send_cq = qa.recv_cq = t->cq;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 32;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 4;
	qa.pd = t->pd;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	if (ibv_mask) {
		qa.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		qa.send_ops_flags =
			IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
			IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_LOCAL_INV;
	}
	da.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS;
	da.send_ops_flags = dv_ops;
	return mlx5dv_create_qp(t->ctx, &qa, &da);
}

static struct mlx5dv_mkey *mkey(struct tctx *t, uint16_t n)
{
	struct mlx5dv_mkey_init_attr a;

	memset(&a, 0, sizeof(a));
	a.pd = t->pd;
	a.create_flags = MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT;
	a.max_entries = n;
	return mlx5dv_create_mkey(&a);
}

/* umr_list / umr_il -- one UMR WR; ibv_wr_complete's result */
static int umr_list(struct ibv_qp *qp, struct mlx5dv_mkey *k, uint32_t access,
		    uint16_t n, struct ibv_sge *sge, int flags)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);

	ibv_wr_start(x);
	x->wr_id = 77;
	x->wr_flags = (unsigned)flags;
	mlx5dv_wr_mr_list(mlx5dv_qp_ex_from_ibv_qp_ex(x), k, access, n, sge);
	return ibv_wr_complete(x);
}

static int umr_il(struct ibv_qp *qp, struct mlx5dv_mkey *k, uint32_t access,
		  uint32_t rep, uint16_t n, struct mlx5dv_mr_interleaved *d)
{
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);

	ibv_wr_start(x);
	x->wr_id = 78;
	x->wr_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
	mlx5dv_wr_mr_interleaved(mlx5dv_qp_ex_from_ibv_qp_ex(x), k, access, rep,
				 n, d);
	return ibv_wr_complete(x);
}

/* rdma -- one signaled WRITE or READ of len bytes; its completion status
 * (-1: none) */
static int rdma(struct tctx *t, struct ibv_qp *qp, enum ibv_wr_opcode op,
		void *buf, uint32_t len, uint32_t lkey, uint64_t raddr,
		uint32_t rkey)
{
	struct ibv_wc wc;

	if (t_post(qp, op, buf, len, lkey, 5, IBV_SEND_SIGNALED, raddr, rkey))
		return -2;
	if (t_wait(t->cq, &wc, 1, 10000) != 1)
		return -1;
	return (int)wc.status;
}

/* read100 -- a READ of 100 bytes at offset 5 of mkey k */
static int read100(struct tctx *t, struct ibv_qp *qp, struct ibv_mr *mr,
		   void *buf, struct mlx5dv_mkey *k)
{
	return rdma(t, qp, IBV_WR_RDMA_READ, buf, 100, mr->lkey, 5, k->rkey);
}

/* the list layout: piece i at offset i * (PIECE + GAP) * 2 + (i % 3) of
 * buf, in three MRs (pieces 0-20, 21-41, 42-63); the last MR may lack
 * remote write (bad) */
struct layout {
	uint8_t *buf;
	struct ibv_mr *mr[3];
	struct ibv_sge sge[NPIECE];
};

static size_t piece_off(int i)
{
	return (size_t)i * (PIECE + GAP) * 2 + (size_t)(i % 3);
}

static int layout_make(struct tctx *t, struct layout *l, int last_access)
{
	size_t cut[4] = {0, piece_off(21), piece_off(42), AREA};
	int i, m;

	l->buf = calloc(1, AREA);
	if (!l->buf)
		return -1;
	for (m = 0; m < 3; m++) {
		l->mr[m] =
			ibv_reg_mr(t->pd, l->buf + cut[m], cut[m + 1] - cut[m],
				   m == 2 ? last_access : RW);
		if (!l->mr[m])
			return -1;
	}
	for (i = 0; i < NPIECE; i++) {
		m = i < 21 ? 0 : i < 42 ? 1 : 2;
		l->sge[i].addr = (uintptr_t)l->buf + piece_off(i);
		l->sge[i].length = PIECE;
		l->sge[i].lkey = l->mr[m]->lkey;
	}
	return 0;
}

static void layout_free(struct layout *l)
{
	int m;

	for (m = 0; m < 3; m++)
		if (l->mr[m])
			ibv_dereg_mr(l->mr[m]);
	free(l->buf);
}

static uint8_t pat(size_t i, int seed)
{
	return (uint8_t)(i * 31 + (size_t)seed * 7 + 1);
}

/* owner: the child holds the memory and the mkeys; the parent initiates */
static int owner(int rfd, int wfd)
{
	struct tctx t;
	struct layout l, bad;
	struct mlx5dv_mkey *kl, *ki, *kb;
	struct mlx5dv_mr_interleaved il[2];
	struct ibv_qp *qp;
	struct ibv_wc wc;
	uint8_t *ibuf;
	struct ibv_mr *imr;
	uint32_t qpn, keys[3];
	size_t i;
	int j, ok_ = 1;
	char c;

	if (t_open(&t, 32) || layout_make(&t, &l, RW) ||
	    layout_make(&t, &bad,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ))
		return 1;
	qp = umr_qp(&t,
		    MLX5DV_QP_EX_WITH_MR_LIST |
			    MLX5DV_QP_EX_WITH_MR_INTERLEAVED,
		    1);
	kl = mkey(&t, NPIECE);
	kb = mkey(&t, NPIECE);
	ki = mkey(&t, 3);
	ibuf = calloc(1, (IL_COUNT + IL_SKIP) * IL_REP * 2);
	imr = ibv_reg_mr(t.pd, ibuf, (IL_COUNT + IL_SKIP) * IL_REP * 2, RW);
	if (!qp || !kl || !ki || !kb || !ibuf || !imr)
		return 2;
	t_xsend(wfd, &qp->qp_num, 4);
	t_xrecv(rfd, &qpn, 4);
	if (t_connect(qp, qpn, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
		      1, 7, 14, 7))
		return 3;
	/* two interleaved streams: 24 of every 64 bytes, at 0 and at 32 */
	il[0].addr = (uintptr_t)ibuf;
	il[0].bytes_count = IL_COUNT;
	il[0].bytes_skip = IL_SKIP;
	il[0].lkey = imr->lkey;
	il[1] = il[0];
	il[1].addr = (uintptr_t)ibuf + 32;
	il[1].bytes_count = 8;
	il[1].bytes_skip = IL_COUNT + IL_SKIP - 8;
	for (i = 0; i < (IL_COUNT + IL_SKIP) * IL_REP * 2; i++)
		ibuf[i] = pat(i, 3);
	if (umr_list(qp, kl, RW, NPIECE, l.sge,
		     IBV_SEND_INLINE | IBV_SEND_SIGNALED) ||
	    umr_list(qp, kb, RW, NPIECE, bad.sge,
		     IBV_SEND_INLINE | IBV_SEND_SIGNALED) ||
	    umr_il(qp, ki, RW, IL_REP, 2, il))
		return 4;
	for (j = 0; j < 3; j++)
		if (t_wait(t.cq, &wc, 1, 10000) != 1 ||
		    wc.status != IBV_WC_SUCCESS ||
		    wc.opcode != (enum ibv_wc_opcode)MLX5DV_WC_UMR)
			return 5;
	keys[0] = kl->rkey;
	keys[1] = ki->rkey;
	keys[2] = kb->rkey;
	t_xsend(wfd, keys, sizeof(keys));
	t_xrecv(rfd, &c, 1); /* the peer wrote the list */
	for (i = 0; i < AREA; i++) {
		int in = 0;

		for (j = 0; j < NPIECE; j++)
			if (i >= piece_off(j) && i < piece_off(j) + PIECE)
				in = j + 1;
		if (l.buf[i] !=
		    (in ? pat((size_t)(in - 1) * PIECE + i - piece_off(in - 1),
			      1)
			: 0))
			ok_ = 0;
	}
	t_xsend(wfd, &ok_, sizeof(ok_));
	t_xrecv(rfd, &c, 1); /* the peer wrote the bad list's good part */
	t_xsend(wfd, bad.buf, AREA);
	t_xrecv(rfd, &c, 1);
	mlx5dv_destroy_mkey(kl);
	mlx5dv_destroy_mkey(ki);
	mlx5dv_destroy_mkey(kb);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(imr);
	free(ibuf);
	layout_free(&l);
	layout_free(&bad);
	t_close(&t);
	return 0;
}

/* test_peer -- the owner is another process; novm: process_vm refused
 * (SOFTRDMA_TEST_NOVM), which softrdma does not serve for indirect keys */
static void test_peer(int novm)
{
	struct tctx t;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *src, *dst, *area;
	uint32_t qpn, keys[3];
	size_t i, total = NPIECE * PIECE, itotal = (IL_COUNT + 8) * IL_REP;
	int rfd, wfd, st, good = 0, allok;
	pid_t pid;
	char c = 'x';

	src = malloc(total);
	dst = calloc(1, itotal + total);
	area = malloc(AREA);
	if (!src || !dst || !area || t_open(&t, 32))
		bail_out("open");
	mr = ibv_reg_mr(t.pd, dst, itotal + total, RW);
	qp = t_rc_qp(&t, 32, NULL);
	pid = t_spawn(owner, &rfd, &wfd);
	if (!qp || !mr || pid < 0)
		bail_out("spawn");
	t_xrecv(rfd, &qpn, 4);
	t_xsend(wfd, &qp->qp_num, 4);
	t_connect(qp, qpn, 0, 1, 7, 14, 7);
	t_xrecv(rfd, keys, sizeof(keys));
	for (i = 0; i < total; i++)
		src[i] = pat(i, 1);
	memcpy(dst + itotal, src, total);
	if (novm) {
		is_int(rdma(&t, qp, IBV_WR_RDMA_WRITE, dst + itotal,
			    (uint32_t)total, mr->lkey, 0, keys[0]),
		       IBV_WC_REM_OP_ERR,
		       "process_vm refused: another process's indirect key "
		       "is not served (REM_OP_ERR)");
		t_xsend(wfd, &c, 1);
		t_xrecv(rfd, &allok, sizeof(allok));
		goto last;
	}
	is_int(rdma(&t, qp, IBV_WR_RDMA_WRITE, dst + itotal, (uint32_t)total,
		    mr->lkey, 0, keys[0]),
	       IBV_WC_SUCCESS,
	       "one RDMA WRITE of 3008 bytes into a 64-piece list mkey of "
	       "another process");
	memset(dst + itotal, 0, total);
	is_int(rdma(&t, qp, IBV_WR_RDMA_READ, dst + itotal, (uint32_t)total,
		    mr->lkey, 0, keys[0]),
	       IBV_WC_SUCCESS, "one RDMA READ of the whole list back");
	ok(!memcmp(dst + itotal, src, total),
	   "the list reads back byte for byte");
	is_int(rdma(&t, qp, IBV_WR_RDMA_READ, dst + 5, 100, mr->lkey,
		    PIECE * 10 + 3, keys[0]),
	       IBV_WC_SUCCESS, "a READ at an offset across three pieces");
	ok(!memcmp(dst + 5, src + PIECE * 10 + 3, 100), "its bytes are right");
	t_xsend(wfd, &c, 1);
	t_xrecv(rfd, &allok, sizeof(allok));
	ok(allok, "the owner's memory: every piece holds its bytes, every "
		  "gap is untouched");
	/* the pattern: 100 repetitions of 24 bytes at 64 * r and 8 at
	 * 64 * r + 32 */
	memset(dst, 0, itotal);
	is_int(rdma(&t, qp, IBV_WR_RDMA_READ, dst, (uint32_t)itotal, mr->lkey,
		    0, keys[1]),
	       IBV_WC_SUCCESS,
	       "one RDMA READ of an interleaved mkey (3200 "
	       "bytes, 200 strided blocks)");
	for (i = 0; i < IL_REP; i++) {
		size_t b = i * (IL_COUNT + IL_SKIP), k;

		for (k = 0; k < IL_COUNT; k++)
			good += dst[i * 32 + k] == pat(b + k, 3);
		for (k = 0; k < 8; k++)
			good += dst[i * 32 + IL_COUNT + k] ==
				pat(b + 32 + k, 3);
	}
	is_int(good, (int)itotal, "the pattern reads back byte for byte");
	memset(dst + itotal, 0x5a, total);
	is_int(rdma(&t, qp, IBV_WR_RDMA_WRITE, dst + itotal, (uint32_t)total,
		    mr->lkey, 0, keys[2]),
	       IBV_WC_REM_ACCESS_ERR,
	       "a WRITE over a list whose last 22 pieces lack remote write: "
	       "remote access error");
last:
	ibv_destroy_qp(qp);
	t_xsend(wfd, &c, 1);
	t_xrecv(rfd, area, AREA);
	for (i = 0, good = 1; i < AREA; i++)
		good &= area[i] == 0;
	ok(good, "nothing moved: the owner's memory is untouched");
	ok(1, "owner done");
	t_xsend(wfd, &c, 1);
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && !WEXITSTATUS(st), "owner exited 0 (%d)",
	   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	close(rfd);
	close(wfd);
	ibv_dereg_mr(mr);
	t_close(&t);
	free(src);
	free(dst);
	free(area);
}

/* test_local -- creation and UMR errors; in one process: a list whose
 * last MR lacks remote write (a WRITE that touches it is refused, one
 * that does not succeeds), the mkey as lkey, LOCAL_INV */
static void test_local(void)
{
	struct tctx t;
	struct layout l, bad;
	struct mlx5dv_mkey *k, *kb;
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct ibv_sge sg[NPIECE + 1];
	struct mlx5dv_mr_interleaved il;
	uint8_t *src = malloc(NPIECE * PIECE);
	struct mlx5dv_mkey_init_attr ka;
	struct mlx5dv_context dc;
	size_t i;
	int n, clean;

	if (!src || t_open(&t, 64) || layout_make(&t, &l, RW) ||
	    layout_make(&t, &bad,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ))
		bail_out("open");
	memset(&dc, 0, sizeof(dc));
	is_int(mlx5dv_query_device(t.ctx, &dc), 0, "mlx5dv_query_device");
	for (i = 0; i < NPIECE * PIECE; i++)
		src[i] = pat(i, 2);
	mr = ibv_reg_mr(t.pd, src, NPIECE * PIECE, RW);
	/* mkey creation */
	memset(&ka, 0, sizeof(ka));
	ka.pd = t.pd;
	ka.create_flags = MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT;
	ka.max_entries = 5;
	k = mlx5dv_create_mkey(&ka);
	ok(k && ka.max_entries == 8 && k->lkey == k->rkey,
	   "create_mkey: max_entries 5 granted as 8, lkey == rkey");
	mlx5dv_destroy_mkey(k);
	ka.max_entries = 0;
	errno = 0;
	ok(!mlx5dv_create_mkey(&ka) && errno == EINVAL,
	   "max_entries 0 -> EINVAL");
	ka.max_entries = 4096;
	errno = 0;
	ok(!mlx5dv_create_mkey(&ka) && errno == EINVAL,
	   "max_entries 4096 -> EINVAL");
	ka.max_entries = 4;
	ka.create_flags = MLX5DV_MKEY_INIT_ATTR_FLAGS_BLOCK_SIGNATURE;
	errno = 0;
	ok(!mlx5dv_create_mkey(&ka) && errno == EOPNOTSUPP,
	   "a signature mkey -> EOPNOTSUPP");
	/* QP creation */
	errno = 0;
	ok(!umr_qp(&t, MLX5DV_QP_EX_WITH_MR_LIST, 0) && errno == EINVAL,
	   "MR_LIST without IBV_QP_INIT_ATTR_SEND_OPS_FLAGS -> EINVAL");
	errno = 0;
	ok(!umr_qp(&t, MLX5DV_QP_EX_WITH_MEMCPY, 1) && errno == EOPNOTSUPP,
	   "an unemulated send op -> EOPNOTSUPP");
	a = umr_qp(&t, MLX5DV_QP_EX_WITH_MR_LIST, 1);
	b = t_rc_qp(&t, 32, NULL);
	k = mkey(&t, NPIECE);
	kb = mkey(&t, NPIECE);
	if (!a || !b || !k || !kb)
		bail_out("qp/mkey");
	{
		struct ibv_pd *pd2 = ibv_alloc_pd(t.ctx);
		struct mlx5dv_mkey *k2;

		ka.pd = pd2;
		ka.create_flags = MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT;
		k2 = mlx5dv_create_mkey(&ka);
		ok(k2 && ibv_dealloc_pd(pd2) == EBUSY,
		   "dealloc_pd while an mkey uses it -> EBUSY");
		mlx5dv_destroy_mkey(k2);
		is_int(ibv_dealloc_pd(pd2), 0, "and 0 once it is gone");
	}
	t_connect(a, b->qp_num, RW, 1, 7, 14, 7);
	t_connect(b, a->qp_num, RW, 1, 7, 14, 7);
	/* bad UMR inputs: ibv_wr_complete fails, nothing is posted */
	is_int(umr_list(a, k, RW, NPIECE, l.sge, IBV_SEND_SIGNALED), EOPNOTSUPP,
	       "UMR without IBV_SEND_INLINE -> EOPNOTSUPP");
	is_int(umr_list(a, k, RW | IBV_ACCESS_MW_BIND, NPIECE, l.sge,
			IBV_SEND_INLINE | IBV_SEND_SIGNALED),
	       EINVAL, "access flag outside the four -> EINVAL");
	memcpy(sg, l.sge, sizeof(l.sge));
	sg[NPIECE] = sg[0];
	is_int(umr_list(a, k, RW, NPIECE + 1, sg,
			IBV_SEND_INLINE | IBV_SEND_SIGNALED),
	       ENOMEM, "65 entries into a 64-entry mkey -> ENOMEM");
	sg[7].length = 0;
	is_int(umr_list(a, k, RW, NPIECE, sg,
			IBV_SEND_INLINE | IBV_SEND_SIGNALED),
	       EINVAL, "a zero-length piece -> EINVAL");
	sg[7] = l.sge[7];
	sg[63].length = PIECE + (uint32_t)AREA; /* past its MR */
	is_int(umr_list(a, k, RW, NPIECE, sg,
			IBV_SEND_INLINE | IBV_SEND_SIGNALED),
	       EINVAL, "a piece outside its MR -> EINVAL");
	sg[63] = l.sge[63];
	sg[9].lkey = 0x7fff1234;
	is_int(umr_list(a, k, RW, NPIECE, sg,
			IBV_SEND_INLINE | IBV_SEND_SIGNALED),
	       EINVAL, "an lkey that is no MR -> EINVAL");
	is_int(umr_list(a, k, RW, 0, l.sge,
			IBV_SEND_INLINE | IBV_SEND_SIGNALED),
	       EINVAL, "no entry -> EINVAL");
	il.addr = (uintptr_t)l.buf;
	il.bytes_count = 16;
	il.bytes_skip = 0xffffffffu;
	il.lkey = l.mr[0]->lkey;
	is_int(umr_il(a, k, RW, 0xffffffffu, 1, &il), EINVAL,
	       "a pattern whose stride * repeat overflows -> EINVAL");
	is_int(umr_il(a, k, RW, 1, 1, &il), EINVAL,
	       "interleaved on a QP created with MR_LIST only -> EINVAL");
	{
		/* on a QP that takes patterns: a stride * (repeat - 1) past
		 * 2^64 that wraps to a span inside the MR (65536 + 65537
		 * bytes) is refused, not taken as that span */
		struct ibv_qp *c =
			umr_qp(&t,
			       MLX5DV_QP_EX_WITH_MR_LIST |
				       MLX5DV_QP_EX_WITH_MR_INTERLEAVED,
			       1);
		size_t big = 3 * 65536;
		uint8_t *bb = calloc(1, big);
		struct ibv_mr *bm = bb ? ibv_reg_mr(t.pd, bb, big, RW) : NULL;
		struct mlx5dv_mr_interleaved w;

		struct ibv_qp *d = t_rc_qp(&t, 32, NULL);

		if (!c || !d || !bm)
			bail_out("interleaved QP");
		t_connect(c, d->qp_num, RW, 1, 7, 14, 7);
		t_connect(d, c->qp_num, RW, 1, 7, 14, 7);
		is_int(umr_il(c, k, RW, 0xffffffffu, 1, &il), EINVAL,
		       "a pattern whose stride * repeat overflows -> EINVAL");
		w.addr = (uintptr_t)bb;
		w.bytes_count = 65537;
		w.bytes_skip = 0xffffffffu;
		w.lkey = bm->lkey;
		is_int(umr_il(c, k, RW, 0xffffffffu - 65533, 1, &w), EINVAL,
		       "one whose stride * (repeat - 1) wraps into the MR -> "
		       "EINVAL");
		ibv_destroy_qp(d);
		ibv_destroy_qp(c);
		ibv_dereg_mr(bm);
		free(bb);
	}
	n = t_wait(t.cq, &wc, 1, 50);
	is_int(n, 0, "no completion from any refused UMR");
	is_int(rdma(&t, b, IBV_WR_RDMA_WRITE, src, 8, mr->lkey, 0, k->rkey),
	       IBV_WC_REM_ACCESS_ERR,
	       "the mkey has no layout: a WRITE to it is refused");
	ibv_destroy_qp(b);
	ibv_destroy_qp(a);
	a = umr_qp(&t, MLX5DV_QP_EX_WITH_MR_LIST, 1);
	b = t_rc_qp(&t, 32, NULL);
	t_connect(a, b->qp_num, RW, 1, 7, 14, 7);
	t_connect(b, a->qp_num, RW, 1, 7, 14, 7);
	is_int(umr_list(a, k, RW, NPIECE, l.sge,
			IBV_SEND_INLINE | IBV_SEND_SIGNALED),
	       0, "a good list after the bad ones posts");
	n = t_wait(t.cq, &wc, 1, 10000);
	ok(n == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.opcode == (enum ibv_wc_opcode)MLX5DV_WC_UMR &&
		   wc.wr_id == 77,
	   "it completes with MLX5DV_WC_UMR (IBV_WC_DRIVER1)");
	is_int(umr_list(a, kb, RW, NPIECE, bad.sge,
			IBV_SEND_INLINE | IBV_SEND_SIGNALED),
	       0, "a list with a read-only piece posts");
	n = t_wait(t.cq, &wc, 1, 10000);
	ok(n == 1 && wc.status == IBV_WC_SUCCESS, "and completes");
	/* same-process peer: WRITE, then READ with the mkey as lkey */
	is_int(rdma(&t, b, IBV_WR_RDMA_WRITE, src, NPIECE * PIECE, mr->lkey, 0,
		    k->rkey),
	       IBV_WC_SUCCESS, "WRITE through the list (same process)");
	clean = 1;
	for (i = 0; i < NPIECE; i++)
		clean &= !memcmp(l.buf + piece_off((int)i), src + i * PIECE,
				 PIECE);
	ok(clean, "every piece holds its bytes");
	{
		/* UC does not serve an indirect mkey: its registry entry
		 * describes the layout, not memory; the WRITE is dropped
		 * (an rkey violation on UC), the layout and pieces intact */
		struct ibv_qp_init_attr ua;
		struct ibv_qp *u1, *u2;
		uint8_t junk[64];

		memset(&ua, 0, sizeof(ua));
		ua.send_cq = ua.recv_cq = t.cq;
		ua.qp_type = IBV_QPT_UC;
		ua.cap.max_send_wr = ua.cap.max_recv_wr = 4;
		ua.cap.max_send_sge = ua.cap.max_recv_sge = 1;
		u1 = ibv_create_qp(t.pd, &ua);
		u2 = ibv_create_qp(t.pd, &ua);
		if (!u1 || !u2 || t_uc_up(u1, u2->qp_num, RW) ||
		    t_uc_up(u2, u1->qp_num, RW))
			bail_out("UC QPs");
		memset(junk, 0x99, sizeof(junk));
		memcpy(src + 64 * PIECE - 64, junk, sizeof(junk));
		is_int(rdma(&t, u1, IBV_WR_RDMA_WRITE, src + 64 * PIECE - 64,
			    64, mr->lkey, 0, k->rkey),
		       IBV_WC_SUCCESS,
		       "UC WRITE with an indirect mkey completes (UC: no NAK)");
		ok(!memcmp(l.buf + piece_off(0), src, PIECE),
		   "nothing of it landed in the first piece");
		ibv_destroy_qp(u1);
		ibv_destroy_qp(u2);
		is_int(rdma(&t, b, IBV_WR_RDMA_READ, src + 2000, 100, mr->lkey,
			    5, k->rkey),
		       IBV_WC_SUCCESS,
		       "the mkey's layout is intact: a READ through it");
		clean = 1;
		for (i = 0; i < 100; i++)
			clean &= src[2000 + i] == pat(5 + i, 2);
		ok(clean, "it reads the pieces' bytes");
		for (i = 0; i < NPIECE * PIECE; i++)
			src[i] = pat(i, 2);
	}
	memset(l.buf, 0, PIECE);
	is_int(rdma(&t, b, IBV_WR_RDMA_READ, (void *)(uintptr_t)3, PIECE - 3,
		    k->lkey, (uintptr_t)src + 100, mr->rkey),
	       IBV_WC_SUCCESS,
	       "the mkey as lkey of a READ (zero-based, inside one piece)");
	ok(!memcmp(l.buf + 3, src + 100, PIECE - 3) && !l.buf[2],
	   "its bytes landed at offset 3 of the first piece");
	is_int(rdma(&t, b, IBV_WR_RDMA_WRITE, src, 42 * PIECE, mr->lkey, 0,
		    kb->rkey),
	       IBV_WC_SUCCESS, "WRITE over the bad list's writable pieces");
	memset(bad.buf + piece_off(63), 0xee, PIECE);
	is_int(rdma(&t, b, IBV_WR_RDMA_WRITE, src, NPIECE * PIECE, mr->lkey, 0,
		    kb->rkey),
	       IBV_WC_REM_ACCESS_ERR,
	       "a WRITE that reaches a piece without remote write: remote "
	       "access error");
	clean = 1;
	for (i = 42; i < NPIECE; i++)
		clean &= bad.buf[piece_off((int)i)] == 0 ||
			 bad.buf[piece_off((int)i)] == 0xee;
	ok(clean, "nothing of it landed in the read-only pieces");
	ibv_destroy_qp(b);
	ibv_destroy_qp(a);
	/* LOCAL_INV takes the layout away */
	a = umr_qp(&t, MLX5DV_QP_EX_WITH_MR_LIST, 1);
	b = t_rc_qp(&t, 32, NULL);
	t_connect(a, b->qp_num, RW, 1, 7, 14, 7);
	t_connect(b, a->qp_num, RW, 1, 7, 14, 7);
	is_int(rdma(&t, b, IBV_WR_RDMA_READ, src, NPIECE * PIECE, mr->lkey, 1,
		    k->rkey),
	       IBV_WC_REM_ACCESS_ERR,
	       "a READ one byte past the list's end: remote access error");
	ibv_destroy_qp(b);
	ibv_destroy_qp(a);
	a = umr_qp(&t, MLX5DV_QP_EX_WITH_MR_LIST, 1);
	b = t_rc_qp(&t, 32, NULL);
	t_connect(a, b->qp_num, RW, 1, 7, 14, 7);
	t_connect(b, a->qp_num, RW, 1, 7, 14, 7);
	{
		struct ibv_qp_ex *x = ibv_qp_to_qp_ex(a);

		ibv_wr_start(x);
		x->wr_id = 10;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_local_inv(x, k->rkey);
		is_int(ibv_wr_complete(x), 0, "LOCAL_INV of the list mkey");
	}
	n = t_wait(t.cq, &wc, 1, 10000);
	ok(n == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.opcode == IBV_WC_LOCAL_INV,
	   "it completes");
	is_int(rdma(&t, b, IBV_WR_RDMA_READ, src, 8, mr->lkey, 0, k->rkey),
	       IBV_WC_REM_ACCESS_ERR, "the invalidated mkey is refused");
	ibv_destroy_qp(b);
	ibv_destroy_qp(a);
	/* two UMRs of one mkey in one batch, and batches of two QPs staged
	 * at once: each runs in its queue's order, the last one executed
	 * gives the layout (a later stage used to fail the earlier UMR with
	 * LOC_PROT_ERR) */
	a = umr_qp(&t, MLX5DV_QP_EX_WITH_MR_LIST, 1);
	b = umr_qp(&t, MLX5DV_QP_EX_WITH_MR_LIST, 1);
	t_connect(a, b->qp_num, RW, 1, 7, 14, 7);
	t_connect(b, a->qp_num, RW, 1, 7, 14, 7);
	{
		struct ibv_qp_ex *x = ibv_qp_to_qp_ex(a),
				 *y = ibv_qp_to_qp_ex(b);

		ibv_wr_start(x);
		x->wr_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
		x->wr_id = 81;
		mlx5dv_wr_mr_list(mlx5dv_qp_ex_from_ibv_qp_ex(x), k, RW,
				  NPIECE / 2, l.sge);
		x->wr_id = 82;
		mlx5dv_wr_mr_list(mlx5dv_qp_ex_from_ibv_qp_ex(x), k, RW, NPIECE,
				  l.sge);
		is_int(ibv_wr_complete(x), 0, "two UMRs of one mkey posted");
		n = t_wait(t.cq, &wc, 1, 10000);
		ok(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 81,
		   "the first completes (status %d)", wc.status);
		n = t_wait(t.cq, &wc, 1, 10000);
		ok(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 82,
		   "the second completes (status %d)", wc.status);
		is_int(rdma(&t, b, IBV_WR_RDMA_WRITE, src, NPIECE * PIECE,
			    mr->lkey, 0, k->rkey),
		       IBV_WC_SUCCESS, "the second's layout is in force");
		ibv_wr_start(x);
		x->wr_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
		x->wr_id = 83;
		mlx5dv_wr_mr_list(mlx5dv_qp_ex_from_ibv_qp_ex(x), k, RW,
				  NPIECE / 2, l.sge);
		ibv_wr_start(y);
		y->wr_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
		y->wr_id = 84;
		mlx5dv_wr_mr_list(mlx5dv_qp_ex_from_ibv_qp_ex(y), k, RW, NPIECE,
				  l.sge);
		is_int(ibv_wr_complete(y), 0, "a UMR of QP b staged second");
		is_int(ibv_wr_complete(x), 0, "a UMR of QP a staged first");
		n = t_wait(t.cq, &wc, 1, 10000);
		ok(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 84,
		   "b's completes (status %d)", wc.status);
		n = t_wait(t.cq, &wc, 1, 10000);
		ok(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 83,
		   "a's completes (status %d)", wc.status);
		is_int(rdma(&t, b, IBV_WR_RDMA_WRITE, src,
			    NPIECE / 2 * PIECE + 1, mr->lkey, 0, k->rkey),
		       IBV_WC_REM_ACCESS_ERR,
		       "a's layout (half the pieces), executed last, is in "
		       "force");
	}
	ibv_destroy_qp(b);
	ibv_destroy_qp(a);
	/* every access checks the pieces as they are now */
	a = umr_qp(&t, MLX5DV_QP_EX_WITH_MR_LIST, 1);
	b = t_rc_qp(&t, 32, NULL);
	t_connect(a, b->qp_num, RW, 1, 7, 14, 7);
	t_connect(b, a->qp_num, RW, 1, 7, 14, 7);
	is_int(read100(&t, b, mr, src, kb), IBV_WC_SUCCESS,
	       "READ of the first pieces through the second list");
	is_int(ibv_rereg_mr(bad.mr[0], IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
			    0, IBV_ACCESS_LOCAL_WRITE),
	       0, "rereg the first pieces' MR without remote read");
	is_int(read100(&t, b, mr, src, kb), IBV_WC_REM_ACCESS_ERR,
	       "the same READ through the mkey: remote access error");
	ibv_destroy_qp(b);
	ibv_destroy_qp(a);
	a = umr_qp(&t, MLX5DV_QP_EX_WITH_MR_LIST, 1);
	b = t_rc_qp(&t, 32, NULL);
	t_connect(a, b->qp_num, RW, 1, 7, 14, 7);
	t_connect(b, a->qp_num, RW, 1, 7, 14, 7);
	is_int(rdma(&t, b, IBV_WR_RDMA_READ, src, 100, mr->lkey, 21 * PIECE,
		    kb->rkey),
	       IBV_WC_SUCCESS, "READ of the middle pieces");
	is_int(ibv_dereg_mr(bad.mr[1]), 0, "dereg the middle pieces' MR");
	bad.mr[1] = NULL;
	is_int(rdma(&t, b, IBV_WR_RDMA_READ, src, 100, mr->lkey, 21 * PIECE,
		    kb->rkey),
	       IBV_WC_REM_ACCESS_ERR,
	       "the same READ once that MR is gone: remote access error");
	ibv_destroy_qp(b);
	ibv_destroy_qp(a);
	is_int(mlx5dv_destroy_mkey(k), 0, "destroy_mkey");
	is_int(mlx5dv_destroy_mkey(kb), 0, "destroy_mkey");
	ibv_dereg_mr(mr);
	layout_free(&l);
	layout_free(&bad);
	t_close(&t);
	free(src);
}

/* atomic -- one signaled 8-byte atomic at offset off of rkey; its
 * completion status (-1: none) */
static int atomic(struct tctx *t, struct ibv_qp *qp, enum ibv_wr_opcode op,
		  uint64_t *res, uint32_t lkey, uint64_t off, uint32_t rkey,
		  uint64_t cmp_add, uint64_t swap)
{
	struct ibv_sge sge = {(uintptr_t)res, 8, lkey};
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_wc wc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 9;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = off;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = cmp_add;
	wr.wr.atomic.swap = swap;
	if (ibv_post_send(qp, &wr, &bad))
		return -2;
	if (t_wait(t->cq, &wc, 1, 10000) != 1)
		return -1;
	return (int)wc.status;
}

/*
 * test_atomic -- atomics through an mkey made by UMR: mlx5dv_wr_mr_list
 * takes IBV_ACCESS_REMOTE_ATOMIC (libmlx5 sets the mkey's atomic bit), so
 * 8 bytes inside one piece take FETCH_AND_ADD and CMP_AND_SWP and return
 * the prior value; 8 bytes across two pieces are an invalid request (an
 * atomic does not cross a KLM entry); an mkey without the access refuses
 */
static void test_atomic(void)
{
	struct tctx t;
	struct mlx5dv_mkey *k, *kn;
	struct ibv_qp *a, *b;
	struct ibv_mr *m1, *m2, *rm;
	struct ibv_sge sge[2];
	struct ibv_wc wc;
	uint64_t *p1 = aligned_alloc(64, 64), *p2 = aligned_alloc(64, 64);
	uint64_t *res = aligned_alloc(64, 64);
	uint32_t acc = RW | IBV_ACCESS_REMOTE_ATOMIC;

	if (!p1 || !p2 || !res || t_open(&t, 32))
		bail_out("open");
	memset(p1, 0, 64);
	memset(p2, 0, 64);
	p1[0] = 100;
	p2[1] = 7;
	m1 = ibv_reg_mr(t.pd, p1, 64, (int)acc);
	m2 = ibv_reg_mr(t.pd, p2, 64, (int)acc);
	rm = ibv_reg_mr(t.pd, res, 64, RW);
	a = umr_qp(&t, MLX5DV_QP_EX_WITH_MR_LIST, 1);
	b = t_rc_qp(&t, 32, NULL);
	k = mkey(&t, 4);
	kn = mkey(&t, 4);
	if (!m1 || !m2 || !rm || !a || !b || !k || !kn ||
	    t_connect(a, b->qp_num, (int)acc, 1, 7, 14, 7) ||
	    t_connect(b, a->qp_num, (int)acc, 1, 7, 14, 7))
		bail_out("setup");
	/* mkey offsets 0-11: p1[0..12); 12-31: p2 + 4 .. p2 + 24, so that
	 * offset 16 is p2[1] and offset 8 straddles the two */
	sge[0].addr = (uintptr_t)p1;
	sge[0].length = 12;
	sge[0].lkey = m1->lkey;
	sge[1].addr = (uintptr_t)p2 + 4;
	sge[1].length = 20;
	sge[1].lkey = m2->lkey;
	ok(!umr_list(a, k, acc, 2, sge, IBV_SEND_INLINE | IBV_SEND_SIGNALED) &&
		   t_wait(t.cq, &wc, 1, 10000) == 1 &&
		   wc.status == IBV_WC_SUCCESS &&
		   !umr_list(a, kn, RW, 2, sge,
			     IBV_SEND_INLINE | IBV_SEND_SIGNALED) &&
		   t_wait(t.cq, &wc, 1, 10000) == 1 &&
		   wc.status == IBV_WC_SUCCESS,
	   "UMR of two pieces with IBV_ACCESS_REMOTE_ATOMIC, and without");
	res[0] = 0;
	is_int(atomic(&t, b, IBV_WR_ATOMIC_FETCH_AND_ADD, res, rm->lkey, 0,
		      k->rkey, 5, 0),
	       IBV_WC_SUCCESS, "FETCH_AND_ADD at offset 0 of the mkey");
	ok(res[0] == 100 && p1[0] == 105,
	   "the prior value (%llu) returned, the piece's 8 bytes added to "
	   "(%llu)",
	   (unsigned long long)res[0], (unsigned long long)p1[0]);
	res[0] = 0;
	is_int(atomic(&t, b, IBV_WR_ATOMIC_CMP_AND_SWP, res, rm->lkey, 16,
		      k->rkey, 7, 9),
	       IBV_WC_SUCCESS, "CMP_AND_SWP at offset 16 (the second piece)");
	ok(res[0] == 7 && p2[1] == 9,
	   "the prior value (%llu) returned, the swap done (%llu)",
	   (unsigned long long)res[0], (unsigned long long)p2[1]);
	is_int(atomic(&t, b, IBV_WR_ATOMIC_FETCH_AND_ADD, res, rm->lkey, 0,
		      kn->rkey, 5, 0),
	       IBV_WC_REM_ACCESS_ERR,
	       "FETCH_AND_ADD through the mkey without remote atomic: "
	       "remote access error");
	ibv_destroy_qp(b);
	ibv_destroy_qp(a);
	a = umr_qp(&t, MLX5DV_QP_EX_WITH_MR_LIST, 1);
	b = t_rc_qp(&t, 32, NULL);
	if (!a || !b || t_connect(a, b->qp_num, (int)acc, 1, 7, 14, 7) ||
	    t_connect(b, a->qp_num, (int)acc, 1, 7, 14, 7))
		bail_out("setup");
	is_int(atomic(&t, b, IBV_WR_ATOMIC_FETCH_AND_ADD, res, rm->lkey, 8,
		      k->rkey, 1, 0),
	       IBV_WC_REM_INV_REQ_ERR,
	       "FETCH_AND_ADD at offset 8, across two pieces: invalid "
	       "request");
	ok(p1[0] == 105 && p1[1] == 0 && p2[0] == 0 && p2[1] == 9,
	   "nothing changed");
	ibv_destroy_qp(b);
	ibv_destroy_qp(a);
	is_int(mlx5dv_destroy_mkey(k), 0, "destroy_mkey");
	is_int(mlx5dv_destroy_mkey(kn), 0, "destroy_mkey");
	ibv_dereg_mr(m1);
	ibv_dereg_mr(m2);
	ibv_dereg_mr(rm);
	t_close(&t);
	free(p1);
	free(p2);
	free(res);
}

int main(void)
{
	const char *novm = getenv("SOFTRDMA_TEST_NOVM");

	t_isolate("umr");
	test_local();
	test_atomic();
	test_peer(novm && !strcmp(novm, "1"));
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
