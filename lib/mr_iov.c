/* SPDX-License-Identifier: MIT */
/*
 * mr_iov.c -- one region over non-contiguous memory of the caller: a list
 * of pieces (rdmamsg_mr_reg_iov) or a strided layout
 * (rdmamsg_mr_reg_strided).
 *
 * The region is a byte space of the pieces' total length, offsets 0 to
 * len.  With UMR (mlx5dv indirect mkeys, on mlx5 through libmlx5, on
 * softrdma through its emulation) the region has one key: an mkey laid
 * out by a UMR work request (mlx5dv_wr_mr_list for a list,
 * mlx5dv_wr_mr_interleaved for a strided layout), zero-based, so its
 * export is one (rkey, 0, len) a peer reads or writes in one operation
 * and the device gathers and scatters.  Without UMR (a device without it,
 * or RDMAMSG_NO_UMR=1) the region keeps only the pieces' own MRs: it
 * serves as the local side of rdmamsg_write / rdmamsg_read as an SGE list
 * (RDMAMSG__IOV_LOCAL_SGE pieces at most, the endpoints' max_send_sge),
 * and its export, rdmamsg_send_mr of it, or more pieces in one operation
 * give -ENOTSUP.  rdmamsg_mr_get_layout says which.
 *
 * The UMR work requests go through a private pair of RC QPs of the
 * context, connected to each other (a UMR is a local operation, but mlx5
 * posts it on a QP in RTS); rdmamsg_mr_reg_* waits for its completion
 * (MLX5DV_WC_UMR).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <infiniband/mlx5dv.h>

#include "internal.h"
#include "dispatch.h"
#include "xfer.h"

#define ACCESS_ALL                                                  \
	(RDMAMSG_ACCESS_REMOTE_READ | RDMAMSG_ACCESS_REMOTE_WRITE | \
	 RDMAMSG_ACCESS_REMOTE_ATOMIC)
#define IOV_MAX_PIECES	1024u  /* pieces of one region (UMR or not) */
#define IOV_MAX_STRIDED 65536u /* blocks of one strided region */
#define UMR_WAIT_POLLS	100000000u

struct rdmamsg__umr {
	int state; /* 0: not probed, 1: usable, -1: absent */
	void *mlx5;
	struct mlx5dv_mkey *(*create_mkey)(struct mlx5dv_mkey_init_attr *a);
	int (*destroy_mkey)(struct mlx5dv_mkey *k);
	struct ibv_qp *(*create_qp)(struct ibv_context *c,
				    struct ibv_qp_init_attr_ex *a,
				    struct mlx5dv_qp_init_attr *m);
	struct mlx5dv_qp_ex *(*qp_ex_from)(struct ibv_qp_ex *q);
	struct ibv_qp_ex *(*to_qp_ex)(struct ibv_qp *qp);
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
};

struct rdmamsg__mr_iov {
	int layout;	   /* RDMAMSG_MR_LAYOUT_* */
	struct ibv_mr key; /* lkey/rkey: the mkey's, or 0 (no UMR) */
	struct mlx5dv_mkey *mkey;
	uint32_t n;	      /* pieces */
	uint32_t nmr;	      /* MRs in mr[] */
	size_t block, stride; /* strided: every piece block bytes */
	struct ibv_mr **mr;
	struct ibv_sge *sge; /* piece i: addr, length, lkey of its MR */
};

/* umr_sym -- an mlx5dv entry point: softrdma's, or libmlx5's on hardware */
static void *umr_sym(struct rdmamsg_ctx *ctx, struct rdmamsg__umr *u,
		     const char *name)
{
	if (ctx->fabric == RDMAMSG_FABRIC_SOFT)
		return ctx->dl ? dlsym(ctx->dl, name) : NULL;
	return u->mlx5 ? dlsym(u->mlx5, name) : NULL;
}

static void umr_close_qps(struct rdmamsg_ctx *ctx, struct rdmamsg__umr *u)
{
	int i;

	for (i = 0; i < 2; i++)
		if (u->qp[i])
			ctx->ops->destroy_qp(u->qp[i]);
	if (u->cq)
		ctx->ops->destroy_cq(u->cq);
	u->qp[0] = u->qp[1] = NULL;
	u->cq = NULL;
}

/* umr_connect -- qp to RTS towards dest (the pair's other QP) */
static int umr_connect(struct rdmamsg_ctx *ctx, struct ibv_qp *qp,
		       uint32_t dest, int gid_index, const union ibv_gid *gid)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (ctx->ops->modify_qp(qp, &a,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.port_num = 1;
	if (ctx->ops->modify_qp(qp, &a,
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ctx->ops->modify_qp(qp, &a,
				   IBV_QP_STATE | IBV_QP_TIMEOUT |
					   IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					   IBV_QP_SQ_PSN |
					   IBV_QP_MAX_QP_RD_ATOMIC)
		       ? -1
		       : 0;
}

/* umr_open -- the entry points and the QP pair; 0 or -1 (absent) */
static int umr_open(struct rdmamsg_ctx *ctx, struct rdmamsg__umr *u)
{
	struct ibv_qp_init_attr_ex qa;
	struct mlx5dv_qp_init_attr da;
	union ibv_gid gid;
	const char *e = getenv("RDMAMSG_NO_UMR");
	int i, gi;

	if (e && e[0] == '1')
		return -1;
	if (ctx->fabric != RDMAMSG_FABRIC_SOFT) {
		bool (*supported)(struct ibv_device * d);

		u->mlx5 = dlopen("libmlx5.so.1", RTLD_NOW | RTLD_LOCAL);
		supported = u->mlx5 ? (bool (*)(struct ibv_device *))dlsym(
					      u->mlx5, "mlx5dv_is_supported")
				    : NULL;
		if (!supported || !supported(ctx->verbs->device))
			return -1;
		u->to_qp_ex = ibv_qp_to_qp_ex;
	} else {
		u->to_qp_ex = (struct ibv_qp_ex * (*)(struct ibv_qp *))
			umr_sym(ctx, u, "ibv_qp_to_qp_ex");
	}
	u->create_mkey =
		(struct mlx5dv_mkey * (*)(struct mlx5dv_mkey_init_attr *))
			umr_sym(ctx, u, "mlx5dv_create_mkey");
	u->destroy_mkey = (int (*)(struct mlx5dv_mkey *))umr_sym(
		ctx, u, "mlx5dv_destroy_mkey");
	u->create_qp = (struct ibv_qp * (*)(struct ibv_context *,
					    struct ibv_qp_init_attr_ex *,
					    struct mlx5dv_qp_init_attr *))
		umr_sym(ctx, u, "mlx5dv_create_qp");
	u->qp_ex_from = (struct mlx5dv_qp_ex * (*)(struct ibv_qp_ex *))
		umr_sym(ctx, u, "mlx5dv_qp_ex_from_ibv_qp_ex");
	if (!u->create_mkey || !u->destroy_mkey || !u->create_qp ||
	    !u->qp_ex_from || !u->to_qp_ex)
		return -1;
	u->cq = ctx->ops->create_cq(ctx->verbs, 8, NULL, NULL, 0);
	if (!u->cq)
		return -1;
	for (i = 0; i < 2; i++) {
		memset(&qa, 0, sizeof(qa));
		memset(&da, 0, sizeof(da));
		qa.qp_type = IBV_QPT_RC;
		qa.send_cq = qa.recv_cq = u->cq;
		qa.cap.max_send_wr = 4;
		qa.cap.max_recv_wr = 1;
		qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
		qa.pd = ctx->pd;
		qa.comp_mask =
			IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		qa.send_ops_flags = IBV_QP_EX_WITH_LOCAL_INV;
		da.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS;
		da.send_ops_flags = MLX5DV_QP_EX_WITH_MR_LIST |
				    MLX5DV_QP_EX_WITH_MR_INTERLEAVED;
		u->qp[i] = u->create_qp(ctx->verbs, &qa, &da);
		if (!u->qp[i])
			goto fail;
	}
	for (gi = 1; gi >= 0; gi--) {
		if (ctx->ops->query_gid(ctx->verbs, 1, gi, &gid))
			continue;
		if (!umr_connect(ctx, u->qp[0], u->qp[1]->qp_num, gi, &gid) &&
		    !umr_connect(ctx, u->qp[1], u->qp[0]->qp_num, gi, &gid))
			return 0;
		goto fail; /* QPs not in RESET any more */
	}
fail:
	umr_close_qps(ctx, u);
	return -1;
}

/* umr_get -- the context's UMR machinery, probed once; NULL: no UMR */
static struct rdmamsg__umr *umr_get(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__umr *u = ctx->umr;

	if (!u) {
		u = calloc(1, sizeof(*u));
		if (!u)
			return NULL;
		ctx->umr = u;
	}
	if (!u->state)
		u->state = umr_open(ctx, u) ? -1 : 1;
	return u->state > 0 ? u : NULL;
}

/* rdmamsg__umr_cap -- RDMAMSG_CAP_UMR: 1 when the device (or softrdma)
 * registers through UMR, 0 otherwise */
int rdmamsg__umr_cap(struct rdmamsg_ctx *ctx)
{
	return umr_get(ctx) != NULL;
}

/* rdmamsg__umr_fini -- at context destruction */
void rdmamsg__umr_fini(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__umr *u = ctx->umr;

	if (!u)
		return;
	umr_close_qps(ctx, u);
	if (u->mlx5)
		dlclose(u->mlx5);
	free(u);
	ctx->umr = NULL;
}

/* umr_post -- lay out mkey (list: sge; strided: il), wait for it */
static int umr_post(struct rdmamsg__umr *u, struct mlx5dv_mkey *mkey,
		    uint32_t access, uint16_t n, struct ibv_sge *sge,
		    uint32_t repeat, struct mlx5dv_mr_interleaved *il)
{
	struct ibv_qp_ex *x = u->to_qp_ex(u->qp[0]);
	struct mlx5dv_qp_ex *d = x ? u->qp_ex_from(x) : NULL;
	struct ibv_wc wc;
	unsigned int polls;
	int ret, got;

	if (!d)
		return -ENOTSUP;
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
	if (il)
		mlx5dv_wr_mr_interleaved(d, mkey, access, repeat, 1, il);
	else
		mlx5dv_wr_mr_list(d, mkey, access, n, sge);
	ret = ibv_wr_complete(x);
	if (ret)
		return -ret;
	for (polls = 0; polls < UMR_WAIT_POLLS; polls++) {
		got = ibv_poll_cq(u->cq, 1, &wc);
		if (got < 0)
			return -EIO;
		if (got)
			return wc.status == IBV_WC_SUCCESS &&
					       wc.opcode ==
						       (enum ibv_wc_opcode)
							       MLX5DV_WC_UMR
				       ? 0
				       : -EIO;
	}
	return -ETIMEDOUT;
}

static void iov_free(struct rdmamsg_ctx *ctx, struct rdmamsg__mr_iov *v)
{
	uint32_t i;

	if (!v)
		return;
	if (v->mkey && ctx->umr)
		((struct rdmamsg__umr *)ctx->umr)->destroy_mkey(v->mkey);
	for (i = 0; i < v->nmr; i++)
		ctx->ops->dereg_mr(v->mr[i]);
	free(v->mr);
	free(v->sge);
	free(v);
}

/* finish -- the UMR (when there is UMR) and the rdmamsg_mr around v */
static int finish(struct rdmamsg_ctx *ctx, struct rdmamsg__mr_iov *v,
		  size_t total, unsigned int access, struct rdmamsg_mr **mrp)
{
	struct rdmamsg__umr *u = umr_get(ctx);
	struct rdmamsg_mr *mr;
	int ret;

	v->layout = RDMAMSG_MR_LAYOUT_SGE;
	if (u && (v->stride || v->n <= IOV_MAX_PIECES)) {
		struct mlx5dv_mkey_init_attr ka;
		struct mlx5dv_mr_interleaved il;

		memset(&ka, 0, sizeof(ka));
		ka.pd = ctx->pd;
		ka.create_flags = MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT;
		ka.max_entries = (uint16_t)(v->stride ? 2 : v->n);
		errno = 0;
		v->mkey = u->create_mkey(&ka);
		if (!v->mkey) {
			ret = rdmamsg__errno(ENOMEM);
			goto err;
		}
		if (v->stride) {
			il.addr = v->sge[0].addr;
			il.bytes_count = (uint32_t)v->block;
			il.bytes_skip = (uint32_t)(v->stride - v->block);
			il.lkey = v->mr[0]->lkey;
			ret = umr_post(u, v->mkey,
				       (uint32_t)rdmamsg__verbs_access(access),
				       0, NULL, v->n, &il);
		} else {
			ret = umr_post(u, v->mkey,
				       (uint32_t)rdmamsg__verbs_access(access),
				       (uint16_t)v->n, v->sge, 1, NULL);
		}
		if (ret)
			goto err;
		v->key.lkey = v->mkey->lkey;
		v->key.rkey = v->mkey->rkey;
		v->layout = RDMAMSG_MR_LAYOUT_UMR;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		ret = -ENOMEM;
		goto err;
	}
	v->key.length = total;
	mr->ctx = ctx;
	mr->mr = &v->key;
	mr->addr = NULL; /* zero-based: offsets in the pieces' bytes */
	mr->len = total;
	mr->access = access;
	mr->iov = v;
	list_add_tail(&ctx->mrs, &mr->link);
	*mrp = mr;
	return 0;
err:
	iov_free(ctx, v);
	return ret;
}

/* iov_new -- a layout of n pieces with room for nmr MRs */
static struct rdmamsg__mr_iov *iov_new(uint32_t n, uint32_t nmr)
{
	struct rdmamsg__mr_iov *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->mr = calloc(nmr, sizeof(*v->mr));
	v->sge = calloc(n, sizeof(*v->sge));
	if (!v->mr || !v->sge) {
		free(v->mr);
		free(v->sge);
		free(v);
		return NULL;
	}
	v->n = n;
	return v;
}

/* rdmamsg_mr_reg_iov -- register iovcnt pieces as one region */
RDMAMSG_EXPORT int rdmamsg_mr_reg_iov(struct rdmamsg_ctx *ctx,
				      const struct iovec *iov, int iovcnt,
				      unsigned int access,
				      struct rdmamsg_mr **mrp)
{
	struct rdmamsg__mr_iov *v;
	size_t total = 0;
	int i, ret;

	if (!ctx || !iov || !mrp || iovcnt <= 0 ||
	    (unsigned int)iovcnt > IOV_MAX_PIECES || (access & ~ACCESS_ALL))
		return -EINVAL;
	for (i = 0; i < iovcnt; i++)
		if (!iov[i].iov_base || !iov[i].iov_len ||
		    iov[i].iov_len > UINT32_MAX ||
		    iov[i].iov_len > UINTPTR_MAX - (uintptr_t)iov[i].iov_base ||
		    iov[i].iov_len > SIZE_MAX / 2 - total)
			return -EINVAL;
		else
			total += iov[i].iov_len;
	v = iov_new((uint32_t)iovcnt, (uint32_t)iovcnt);
	if (!v)
		return -ENOMEM;
	for (i = 0; i < iovcnt; i++) {
		errno = 0;
		v->mr[i] = ctx->ops->reg_mr(ctx->pd, iov[i].iov_base,
					    iov[i].iov_len,
					    rdmamsg__verbs_access(access));
		if (!v->mr[i]) {
			ret = rdmamsg__errno(ENOMEM);
			iov_free(ctx, v);
			return ret;
		}
		v->nmr++;
		v->sge[i].addr = (uintptr_t)iov[i].iov_base;
		v->sge[i].length = (uint32_t)iov[i].iov_len;
		v->sge[i].lkey = v->mr[i]->lkey;
	}
	return finish(ctx, v, total, access, mrp);
}

/* rdmamsg_mr_reg_strided -- count blocks of block bytes, stride apart */
RDMAMSG_EXPORT int rdmamsg_mr_reg_strided(struct rdmamsg_ctx *ctx, void *addr,
					  size_t block, size_t stride,
					  size_t count, unsigned int access,
					  struct rdmamsg_mr **mrp)
{
	struct rdmamsg__mr_iov *v;
	size_t span, i;
	int ret;

	if (!ctx || !addr || !mrp || !block || !count || stride < block ||
	    block > UINT32_MAX || stride - block > UINT32_MAX ||
	    count > IOV_MAX_STRIDED || (access & ~ACCESS_ALL) ||
	    count - 1 > (SIZE_MAX / 2 - block) / stride)
		return -EINVAL;
	span = (count - 1) * stride + block;
	if (span > UINTPTR_MAX - (uintptr_t)addr)
		return -EINVAL;
	v = iov_new((uint32_t)count, 1);
	if (!v)
		return -ENOMEM;
	errno = 0;
	v->mr[0] = ctx->ops->reg_mr(ctx->pd, addr, span,
				    rdmamsg__verbs_access(access));
	if (!v->mr[0]) {
		ret = rdmamsg__errno(ENOMEM);
		iov_free(ctx, v);
		return ret;
	}
	v->nmr = 1;
	v->block = block;
	v->stride = stride;
	for (i = 0; i < count; i++) {
		v->sge[i].addr = (uintptr_t)addr + i * stride;
		v->sge[i].length = (uint32_t)block;
		v->sge[i].lkey = v->mr[0]->lkey;
	}
	return finish(ctx, v, block * count, access, mrp);
}

/* rdmamsg_mr_get_layout -- how the region is served */
RDMAMSG_EXPORT int rdmamsg_mr_get_layout(const struct rdmamsg_mr *mr,
					 enum rdmamsg_mr_layout *layout)
{
	if (!mr || !layout)
		return -EINVAL;
	*layout = mr->iov ? (enum rdmamsg_mr_layout)mr->iov->layout
			  : RDMAMSG_MR_LAYOUT_CONTIG;
	return 0;
}

/* rdmamsg__mr_iov_exportable -- 0, or -ENOTSUP for a region a peer cannot
 * address as one key (no UMR) */
int rdmamsg__mr_iov_exportable(const struct rdmamsg_mr *mr)
{
	return mr->iov && mr->iov->layout != RDMAMSG_MR_LAYOUT_UMR ? -ENOTSUP
								   : 0;
}

/* rdmamsg__mr_iov_sges -- the SGEs of [off, off + len) of an iov region
 * (at most max); their count, or -ENOTSUP when more are needed */
int rdmamsg__mr_iov_sges(const struct rdmamsg_mr *mr, size_t off, size_t len,
			 struct ibv_sge *sge, int max)
{
	const struct rdmamsg__mr_iov *v = mr->iov;
	uint32_t i;
	int n = 0;

	for (i = 0; i < v->n && len; i++) {
		size_t l = v->sge[i].length, c;

		if (off >= l) {
			off -= l;
			continue;
		}
		if (n == max)
			return -ENOTSUP;
		c = l - off < len ? l - off : len;
		sge[n].addr = v->sge[i].addr + off;
		sge[n].length = (uint32_t)c;
		sge[n].lkey = v->sge[i].lkey;
		n++;
		len -= c;
		off = 0;
	}
	return n;
}

/* rdmamsg__mr_iov_dereg -- the pieces' MRs and the mkey go */
void rdmamsg__mr_iov_dereg(struct rdmamsg_mr *mr)
{
	iov_free(mr->ctx, mr->iov);
	mr->iov = NULL;
}
