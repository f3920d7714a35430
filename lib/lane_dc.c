/* SPDX-License-Identifier: MIT */
/*
 * lane_dc.c -- the DC lane (lane.h): an endpoint's messages over the
 * context's few shared DC initiators (DCIs) to the peer context's DC
 * target (DCT), instead of an RC QP of its own (issue 16).
 *
 * Per context (struct rdmamsg__dc, made with the first DC lane) and per
 * device port (struct dc_port, its QPs made with the first DC lane whose
 * connection rdma_cm bound to that port, as mlx5 binds a DCT or DCI to
 * the port of its INIT transition, and kept until the SRQ goes): one DCT on
 * the DC endpoints' SRQ (one SRQ per context for DC, every port's DCT on
 * it) with the context's random 64-bit access key, and RDMAMSG_DC_DCIS
 * (default 4, 1..16) DCIs, all on one CQ of the interface (the port's
 * anchor lane reserves its room: every DCI's depth plus the SRQ's
 * buffers).  A lane sends on its port's DCIs, to the DCT the peer named
 * for the port of its side of the connection.
 *
 * Sending: a lane holds one DCI while it has sends on it and gives it back
 * when they have all completed (UCX's "dcs" policy).  So a DCI's sends go
 * to one target at a time and the next target only after the earlier
 * sends completed (the seeds' usage model), a lane's sends stay in order
 * (all on one DCI while any is in flight), and a DCI error (a dead peer,
 * a wrong key) flushes the sends of that one lane only; the DCI is reset
 * (RESET -> INIT -> RTR -> RTS) before the next lane gets it.  A lane
 * without a DCI queues its sends (at most its send depth + the drain WR,
 * inline data copied) and waits in the context's FIFO; a lane holding a
 * DCI while others wait queues its new sends too, so that it gives the
 * DCI back (round robin).  Every DC send is signalled.
 *
 * Receiving: a send carries the receiving endpoint's tag (its lane's wr_id
 * tag, lane.h: slot index and generation bits, 31 bits) as its immediate;
 * the DCT's receive completions come through the SRQ path
 * (rdmamsg__lane_srq_wcs asks rdmamsg__dc_srq_lane for each one's lane), and
 * the tag names the lane in O(1).  A message without an immediate, with
 * bit 31 set, of no lane, of a freed lane (generation), or of a lane that
 * is not DC on this SRQ is dropped, its buffer reposted, and counted
 * (rdmamsg_dc_stats.tag_drops): never delivered to another endpoint.
 * The tag is no secret and the DCT's access key keeps only strangers
 * out: every peer of the context learns it.  So the sender is checked
 * too (RDMAMSG_HS_CAP_DCSRC, cm/handshake.h): a DCT's receive completion
 * names the DCI that sent it (wc.src_qp; mlx5 reports the CQE's
 * flags_rqpn there, softrdma the DCI's number), and a lane takes only
 * messages of its peer's DCIs.  The accepting side names its DCIs in its
 * accept, with a random nonce; the connecting side, whose request has no
 * room left, names its DCIs in its lane's first send, the hello (the
 * nonce, their count and numbers, inline; its completion is the lane's,
 * no session's), which the accepting lane waits for before it takes
 * anything.  A peer on the same device cannot use another's DCI.
 * Between hosts QP numbers may repeat, and on RoCE (the lanes address
 * their peer by GID) nothing in a verbs completion tells hosts apart
 * (mlx5 reports the source GID only in a 128-byte CQE read directly, as
 * UCX does; wc.slid is 0): a peer on another host that gets a DCI
 * numbered as one of the victim's could still pass.  The check is as
 * strong as QP numbers are unique.  A peer without the capability is
 * not checked (its messages are taken as before).
 * A port's DCT outlives its lanes (UCX keeps its DCT for the interface's
 * life too): destroying a DCT removes its unpolled receive completions
 * from the CQ and gives their WQEs back to the SRQ unreported (mlx5's
 * destroy_qp cleans the CQ so), and messages still arriving for a lane
 * that failed are exactly those; each lost WQE is a buffer the SRQ's
 * count still holds posted, until senders meet an empty SRQ and RNR
 * forever.  Kept, the DCT completes them, the tag finds no lane, the
 * buffer goes back.  So the ports' QPs go when the SRQ does
 * (rdmamsg__dc_srq_free), or with the context.
 *
 * Handshake (cm/handshake.h, HS_F_DC): each side sends its DCT number,
 * access key and its endpoint's tag; no QP is on the rdma_cm id (the REQ
 * and REP name the DCT as qp_num, with srq set), so the active side gets
 * CONNECT_RESPONSE and answers with rdma_establish(), as librdmacm wants
 * of an id without a QP.  error() moves the lane's DCI (if it holds one)
 * to ERR; queued sends and the drain WR complete as flushed once the
 * DCI's sends have (synthetic completions through the lane's early
 * list).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <infiniband/mlx5dv.h>

#include "dispatch.h"
#include "handshake.h"
#include "internal.h"

#define DC_MAX_DCIS  16
#define DC_DEF_DCIS  4
#define DC_DCI_DEPTH 4100 /* a lane's sends (<= 4096) + its drain WR */
#define DC_INLINE    64	  /* inline bytes of a queued send */
#define DC_SYNTH_QPN 0	  /* qp_num of a lane's synthetic completion */
#define DC_OP_HELLO  0xff /* dc_wr.op of the hello (rdmamsg__lane_dc_src) */

_Static_assert(DC_MAX_DCIS == RDMAMSG_HS_DCSRC_DCIS, "a port's DCIs");
_Static_assert(RDMAMSG_HS_DCSRC_MAX <= DC_INLINE, "the hello is inline");

/* whose DC messages a lane takes (RDMAMSG_HS_CAP_DCSRC) */
enum {
	SRC_OFF,   /* any (a peer without the capability) */
	SRC_HELLO, /* the peer's hello only: it names the peer's DCIs */
	SRC_ON	   /* those of the peer's DCIs (wc.src_qp) */
};

/* one send waiting for a DCI */
struct dc_wr {
	uint64_t seq;
	uint32_t op; /* enum ibv_wr_opcode */
	uint32_t flags;
	int nsge;
	struct ibv_sge sge[2];
	uint32_t rkey;
	uint64_t raddr, cmp, swap;
	uint32_t inl_len; /* inline: bytes copied to inl */
	uint8_t inl[DC_INLINE];
};

struct lane_dc;

struct dc_dci {
	struct ibv_qp *qp;
	struct ibv_qp_ex *x;
	struct mlx5dv_qp_ex *mx;
	struct lane_dc *owner; /* the lane holding it, or NULL */
	int err;	       /* failed or moved to ERR: reset before reuse */
};

/* a port's DC QPs, made with its first lane and destroyed with the SRQ:
 * a DCT and DCIs are bound to one port, as mlx5's are (the port of their
 * INIT transition), so the lanes of a connection on port N use port N's */
struct dc_port {
	struct rdmamsg__dc *dc;
	uint8_t num;		     /* the port number */
	struct rdmamsg__lane anchor; /* reserves the CQ room */
	struct ibv_qp *dct;
	uint8_t sgid_index;
	struct dc_dci dci[DC_MAX_DCIS];
	uint32_t ndci;
	struct rdmamsg__list waiters; /* lanes waiting for a DCI */
	uint32_t nlanes;
};

struct rdmamsg__dc {
	struct rdmamsg_ctx *ctx;
	void *mlx5;
	struct ibv_qp *(*create_qp)(struct ibv_context *c,
				    struct ibv_qp_init_attr_ex *a,
				    struct mlx5dv_qp_init_attr *m);
	struct mlx5dv_qp_ex *(*qp_ex_from)(struct ibv_qp_ex *q);
	struct ibv_qp_ex *(*to_qp_ex)(struct ibv_qp *qp);
	uint32_t (*key_viol)(struct ibv_qp *dct);
	struct rdmamsg_srq *srq;		/* every port's DCT's */
	uint64_t key;				/* every port's DCT's */
	struct dc_port port[RDMAMSG__DC_PORTS]; /* port[i]: port i + 1 */
	uint32_t want_dci;
	uint32_t nlanes; /* on every port */
	uint64_t tag_drops, dci_waits, dci_resets, key_viol_base;
};

struct lane_dc {
	struct rdmamsg__lane l;
	struct rdmamsg__dc *dc;
	struct dc_port *p;  /* its connection's port */
	struct dc_dci *dci; /* held, or NULL (one of p's) */
	uint32_t posted;    /* sends on dci not yet completed */
	struct dc_wr *q;    /* sends waiting for a DCI (ring) */
	uint32_t qcap, qhead, qn;
	struct rdmamsg__list wait_link;
	struct ibv_ah *ah;
	uint32_t peer_dctn, peer_tag;
	uint64_t peer_key;
	int has_peer;
	struct rdmamsg_srq *srq;
	uint32_t srq_win;
	int drain_posted, flush_due;
	uint64_t drain_seq;
	/* DC senders proved (cm/handshake.h): the peer's DCIs */
	int src;	  /* SRC_* */
	int hello_posted; /* our hello is on the DCI: its completion next */
	uint32_t nsrc;
	uint32_t src_dci[DC_MAX_DCIS];
	uint64_t nonce; /* accepting side: what the peer's hello carries */
};

#define DC(lane) ((struct lane_dc *)(void *)(lane))

static void dc_down_qps(struct dc_port *p);

/* dc_sym -- an mlx5dv entry point: softrdma's, or libmlx5's */
static void *dc_sym(struct rdmamsg__dc *dc, const char *name)
{
	if (dc->ctx->fabric == RDMAMSG_FABRIC_SOFT)
		return dc->ctx->dl ? dlsym(dc->ctx->dl, name) : NULL;
	return dc->mlx5 ? dlsym(dc->mlx5, name) : NULL;
}

/* dc_get -- the context's DC state (entry points only; QPs on first
 * lane), or NULL */
static struct rdmamsg__dc *dc_get(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__dc *dc = ctx->dc;
	const char *e;
	uint32_t i;

	if (dc)
		return dc;
	dc = calloc(1, sizeof(*dc));
	if (!dc)
		return NULL;
	dc->ctx = ctx;
	for (i = 0; i < RDMAMSG__DC_PORTS; i++) {
		dc->port[i].dc = dc;
		dc->port[i].num = (uint8_t)(i + 1);
		list_init(&dc->port[i].waiters);
	}
	if (getrandom(&dc->key, sizeof(dc->key), 0) != sizeof(dc->key))
		dc->key = rdmamsg__now_ns() * 0x9e3779b97f4a7c15ull;
	dc->want_dci = DC_DEF_DCIS;
	e = getenv("RDMAMSG_DC_DCIS");
	if (e && atoi(e) >= 1 && atoi(e) <= DC_MAX_DCIS)
		dc->want_dci = (uint32_t)atoi(e);
	if (ctx->fabric != RDMAMSG_FABRIC_SOFT) {
		dc->mlx5 = dlopen("libmlx5.so.1", RTLD_NOW | RTLD_LOCAL);
		dc->to_qp_ex = ibv_qp_to_qp_ex;
	} else {
		dc->to_qp_ex = (struct ibv_qp_ex * (*)(struct ibv_qp *))
			dc_sym(dc, "ibv_qp_to_qp_ex");
		dc->key_viol = (uint32_t(*)(struct ibv_qp *))dc_sym(
			dc, "softrdma_dc_key_violations");
	}
	dc->create_qp = (struct ibv_qp * (*)(struct ibv_context *,
					     struct ibv_qp_init_attr_ex *,
					     struct mlx5dv_qp_init_attr *))
		dc_sym(dc, "mlx5dv_create_qp");
	dc->qp_ex_from = (struct mlx5dv_qp_ex * (*)(struct ibv_qp_ex *))
		dc_sym(dc, "mlx5dv_qp_ex_from_ibv_qp_ex");
	if (!dc->create_qp || !dc->qp_ex_from || !dc->to_qp_ex) {
		if (dc->mlx5)
			dlclose(dc->mlx5);
		free(dc);
		return NULL;
	}
	ctx->dc = dc;
	return dc;
}

/* rdmamsg__dc_check -- whether an endpoint with parameters p may be DC:
 * 0 (or RC), -ENOTSUP without DC, -EINVAL without an SRQ, with another
 * SRQ than the context's DC endpoints use, too much private data, or an
 * ACK timeout of its own */
int rdmamsg__dc_check(struct rdmamsg_ctx *ctx,
		      const struct rdmamsg__ep_params *p)
{
	uint64_t v;

	if (p->transport != RDMAMSG_TRANSPORT_DC)
		return 0;
	if (rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_DC, &v))
		return -ENOTSUP;
	/* the context's DCIs are shared: no per-endpoint ACK timeout */
	if (!p->srq || p->pdata_len > RDMAMSG_DC_PRIVATE_DATA_MAX ||
	    p->ack_timeout ||
	    (p->failover == RDMAMSG_FAILOVER_REPLAY &&
	     p->pdata_len > RDMAMSG_DC_SESSION_USER))
		return -EINVAL;
	if (ctx->dc && ctx->dc->srq && ctx->dc->srq != p->srq)
		return -EINVAL;
	return 0;
}

/* gid_index -- the index of gid in port's table (0 if not found) */
static uint8_t gid_index(struct rdmamsg_ctx *ctx, uint8_t port,
			 const union ibv_gid *gid)
{
	union ibv_gid g;
	int i;

	for (i = 0; i < 256; i++) {
		if (ctx->ops->query_gid(ctx->verbs, port, i, &g))
			break;
		if (!memcmp(&g, gid, sizeof(g)))
			return (uint8_t)i;
	}
	return 0;
}

/* dci_ready -- a DCI from RESET to RTS on port (mlx5's
 * modify_dci_qp_is_ok) */
static int dci_ready(struct rdmamsg_ctx *ctx, struct ibv_qp *qp, uint8_t port)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = port;
	if (ctx->ops->modify_qp(qp, &a,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	if (ctx->ops->modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PATH_MTU))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = (uint8_t)(ctx->dattr.max_qp_init_rd_atom < 1 ? 1
				    : ctx->dattr.max_qp_init_rd_atom > 16
					    ? 16
					    : ctx->dattr.max_qp_init_rd_atom);
	return ctx->ops->modify_qp(qp, &a,
				   IBV_QP_STATE | IBV_QP_TIMEOUT |
					   IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					   IBV_QP_SQ_PSN |
					   IBV_QP_MAX_QP_RD_ATOMIC)
		       ? -1
		       : 0;
}

/* dci_reset -- a DCI of port p that failed (or was stopped) to RTS
 * again */
static int dci_reset(struct dc_port *p, struct dc_dci *c)
{
	struct rdmamsg__dc *dc = p->dc;
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	if (dc->ctx->ops->modify_qp(c->qp, &a, IBV_QP_STATE) ||
	    dci_ready(dc->ctx, c->qp, p->num)) {
		LOG_ERR("DCI %u: reset failed", c->qp->qp_num);
		return -1;
	}
	c->err = 0;
	dc->dci_resets++;
	return 0;
}

/* dct_ready -- port p's DCT from RESET to RTR */
static int dct_ready(struct dc_port *p)
{
	struct rdmamsg_ctx *ctx = p->dc->ctx;
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = p->num;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	if (ctx->ops->modify_qp(p->dct, &a,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.sgid_index = p->sgid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = p->num;
	ctx->ops->query_gid(ctx->verbs, p->num, p->sgid_index,
			    &a.ah_attr.grh.dgid);
	return ctx->ops->modify_qp(p->dct, &a,
				   IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER |
					   IBV_QP_AV | IBV_QP_PATH_MTU)
		       ? -1
		       : 0;
}

/* dc_up_qps -- port p's DCT on srq and its DCIs, on one CQ whose room
 * p's anchor lane holds; 0 or a negative errno, nothing left on failure */
static int dc_up_qps(struct dc_port *p, struct rdmamsg_srq *srq,
		     const union ibv_gid *sgid)
{
	struct rdmamsg__dc *dc = p->dc;
	struct rdmamsg_ctx *ctx = dc->ctx;
	struct ibv_qp_init_attr_ex qa;
	struct mlx5dv_qp_init_attr da;
	uint32_t i;
	int ret;

	memset(&p->anchor, 0, sizeof(p->anchor));
	p->anchor.ctx = ctx;
	list_init(&p->anchor.ready_link);
	ret = rdmamsg__iface_attach(&p->anchor, dc->want_dci * DC_DCI_DEPTH +
							srq->max_bufs);
	if (ret)
		return ret;
	p->sgid_index = gid_index(ctx, p->num, sgid);
	memset(&qa, 0, sizeof(qa));
	memset(&da, 0, sizeof(da));
	qa.qp_type = IBV_QPT_DRIVER;
	qa.send_cq = qa.recv_cq = p->anchor.icq->cq;
	qa.srq = srq->srq;
	qa.pd = ctx->qp_pd;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	da.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
	da.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
	da.dc_init_attr.dct_access_key = dc->key;
	p->dct = dc->create_qp(ctx->verbs, &qa, &da);
	if (!p->dct || dct_ready(p))
		goto fail;
	for (i = 0; i < dc->want_dci; i++) {
		struct dc_dci *c = &p->dci[i];

		memset(&qa, 0, sizeof(qa));
		memset(&da, 0, sizeof(da));
		qa.qp_type = IBV_QPT_DRIVER;
		qa.send_cq = qa.recv_cq = p->anchor.icq->cq;
		qa.pd = ctx->qp_pd;
		qa.comp_mask =
			IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		qa.send_ops_flags =
			IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
			IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
		qa.cap.max_send_wr = DC_DCI_DEPTH;
		qa.cap.max_send_sge = 2;
		qa.cap.max_inline_data = DC_INLINE;
		da.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
		da.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
		c->qp = dc->create_qp(ctx->verbs, &qa, &da);
		if (!c->qp)
			goto fail;
		p->ndci++;
		c->x = dc->to_qp_ex(c->qp);
		c->mx = c->x ? dc->qp_ex_from(c->x) : NULL;
		c->owner = NULL;
		c->err = 0;
		if (!c->mx || dci_ready(ctx, c->qp, p->num))
			goto fail;
	}
	ctx->dc_dctn[p->num - 1] = p->dct->qp_num;
	ctx->dc_ndct++;
	LOG_INFO("DC: port %u: DCT %u on SRQ %p, %u DCIs", p->num,
		 p->dct->qp_num, (void *)srq, p->ndci);
	return 0;
fail:
	ret = rdmamsg__errno(ENOMEM);
	LOG_ERR("DC: making port %u's DCT and DCIs failed: %d", p->num, ret);
	dc_down_qps(p);
	return ret;
}

/* dc_down_qps -- port p's DCT and DCIs go (no DC lane is left on it) */
static void dc_down_qps(struct dc_port *p)
{
	struct rdmamsg__dc *dc = p->dc;
	struct rdmamsg_ctx *ctx = dc->ctx;
	uint32_t i;

	for (i = 0; i < p->ndci; i++) {
		if (p->dci[i].qp)
			ctx->ops->destroy_qp(p->dci[i].qp);
		memset(&p->dci[i], 0, sizeof(p->dci[i]));
	}
	p->ndci = 0;
	if (p->dct) {
		if (dc->key_viol)
			dc->key_viol_base += dc->key_viol(p->dct);
		ctx->ops->destroy_qp(p->dct);
	}
	if (ctx->dc_dctn[p->num - 1]) {
		ctx->dc_dctn[p->num - 1] = 0;
		ctx->dc_ndct--;
	}
	p->dct = NULL;
	rdmamsg__iface_detach(&p->anchor);
}

/* rdmamsg__dc_srq_free -- srq goes (no endpoint is left on it): the
 * ports' DC QPs on it go first */
void rdmamsg__dc_srq_free(struct rdmamsg_ctx *ctx, struct rdmamsg_srq *srq)
{
	struct rdmamsg__dc *dc = ctx->dc;
	uint32_t i;

	if (!dc || dc->srq != srq)
		return;
	for (i = 0; i < RDMAMSG__DC_PORTS; i++)
		if (dc->port[i].dct || dc->port[i].ndci)
			dc_down_qps(&dc->port[i]);
	dc->srq = NULL;
}

/* rdmamsg__dc_fini -- at context destruction (every lane is gone) */
void rdmamsg__dc_fini(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__dc *dc = ctx->dc;
	uint32_t i;

	if (!dc)
		return;
	for (i = 0; i < RDMAMSG__DC_PORTS; i++)
		if (dc->port[i].dct || dc->port[i].ndci)
			dc_down_qps(&dc->port[i]);
	if (dc->mlx5)
		dlclose(dc->mlx5);
	free(dc);
	ctx->dc = NULL;
}

/* rdmamsg_ctx_dc_stats -- the context's DC counters (every port's) */
RDMAMSG_EXPORT int rdmamsg_ctx_dc_stats(const struct rdmamsg_ctx *ctx,
					struct rdmamsg_dc_stats *st)
{
	uint64_t v;
	const struct rdmamsg__dc *dc;
	uint32_t i;

	if (!ctx || !st)
		return -EINVAL;
	if (rdmamsg_ctx_query_caps(ctx, RDMAMSG_CAP_DC, &v))
		return -ENOTSUP;
	memset(st, 0, sizeof(*st));
	dc = ctx->dc;
	if (!dc)
		return 0;
	st->key_violations = dc->key_viol_base;
	for (i = 0; i < RDMAMSG__DC_PORTS; i++) {
		const struct dc_port *p = &dc->port[i];

		st->dcis += p->ndci;
		if (!p->dct)
			continue;
		st->dcts++;
		if (dc->key_viol)
			st->key_violations += dc->key_viol(p->dct);
	}
	st->endpoints = dc->nlanes;
	st->qps = st->dcis + st->dcts;
	st->tag_drops = dc->tag_drops;
	st->dci_waits = dc->dci_waits;
	st->dci_resets = dc->dci_resets;
	return 0;
}

/* ---- sending ------------------------------------------------------- */

/* dci_post -- one WR of lane d on its DCI; 0 or the provider's errno */
static int dci_post(struct lane_dc *d, const struct dc_wr *w)
{
	struct dc_dci *c = d->dci;
	struct ibv_qp_ex *x = c->x;
	struct ibv_data_buf db[2];
	int i;

	ibv_wr_start(x);
	x->wr_id = RDMAMSG__WRID_SEND | d->l.wrid_tag | (uint32_t)w->seq;
	x->wr_flags = (w->flags & IBV_SEND_INLINE) | IBV_SEND_SIGNALED;
	switch (w->op) {
	case IBV_WR_RDMA_WRITE:
		ibv_wr_rdma_write(x, w->rkey, w->raddr);
		break;
	case IBV_WR_RDMA_READ:
		ibv_wr_rdma_read(x, w->rkey, w->raddr);
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		ibv_wr_atomic_cmp_swp(x, w->rkey, w->raddr, w->cmp, w->swap);
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		ibv_wr_atomic_fetch_add(x, w->rkey, w->raddr, w->cmp);
		break;
	default:
		/* the peer's endpoint tag routes it at the DCT */
		ibv_wr_send_imm(x, htobe32(d->peer_tag));
		break;
	}
	mlx5dv_wr_set_dc_addr(c->mx, d->ah, d->peer_dctn, d->peer_key);
	if (w->inl_len) {
		ibv_wr_set_inline_data(x, (void *)w->inl, w->inl_len);
	} else if (w->flags & IBV_SEND_INLINE) {
		for (i = 0; i < w->nsge; i++) {
			db[i].addr = (void *)(uintptr_t)w->sge[i].addr;
			db[i].length = w->sge[i].length;
		}
		ibv_wr_set_inline_data_list(x, (size_t)w->nsge, db);
	} else {
		ibv_wr_set_sge_list(x, (size_t)w->nsge, w->sge);
	}
	i = ibv_wr_complete(x);
	if (!i) {
		d->posted++;
		if (RDMAMSG_UNLIKELY(w->op == DC_OP_HELLO))
			d->hello_posted = 1;
	}
	return i;
}

/* synth -- a completion of lane d that no DCI will give (a queued send
 * flushed, the drain WR): kept in the lane's early list and handed over
 * in the next progress pass (never an up call from inside a down call) */
static void synth(struct lane_dc *d, uint64_t seq, enum ibv_wc_status st)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = RDMAMSG__WRID_SEND | d->l.wrid_tag | (uint32_t)seq;
	wc.status = st;
	wc.opcode = IBV_WC_SEND;
	wc.qp_num = DC_SYNTH_QPN;
	rdmamsg__iface_hold(&d->l, &wc, 1);
	rdmamsg__iface_ready(&d->l);
}

/* flush_queued -- the send at the head of lane d's queue never goes out:
 * it completes as st, synthetic (in the next pass), or as -ECANCELED now
 * (direct, from wcs); the hello has no completion of the session's */
static void flush_queued(struct lane_dc *d, enum ibv_wc_status st, int direct)
{
	const struct dc_wr *w = &d->q[d->qhead];

	if (w->op != DC_OP_HELLO) {
		if (direct)
			d->l.cbs->tx_done(d->l.owner, (uint32_t)w->seq,
					  -ECANCELED);
		else
			synth(d, w->seq, st);
	}
	d->qhead = (d->qhead + 1) % d->qcap;
	d->qn--;
}

/* take_dci -- a free DCI of port p for lane d (reset first if it
 * failed), or NULL */
static struct dc_dci *take_dci(struct dc_port *p, struct lane_dc *d)
{
	uint32_t i;

	for (i = 0; i < p->ndci; i++) {
		struct dc_dci *c = &p->dci[i];

		if (c->owner)
			continue;
		if (c->err && dci_reset(p, c))
			continue;
		c->owner = d;
		d->dci = c;
		return c;
	}
	return NULL;
}

/* drain_queue -- post lane d's queued sends on its DCI; a post that
 * fails completes as failed (synthetic) and stops the lane */
static void drain_queue(struct lane_dc *d)
{
	while (d->qn) {
		struct dc_wr *w = &d->q[d->qhead];

		if (dci_post(d, w)) {
			LOG_ERR("DC lane %p: posting on DCI %u failed",
				(void *)d, d->dci->qp->qp_num);
			/* it fails, the rest flush behind it */
			flush_queued(d, IBV_WC_GENERAL_ERR, 0);
			while (d->qn)
				flush_queued(d, IBV_WC_WR_FLUSH_ERR, 0);
			d->dci->err = 1;
			return;
		}
		d->qhead = (d->qhead + 1) % d->qcap;
		d->qn--;
	}
}

/* hand_on -- give port p's free DCIs to its waiting lanes, first come
 * first served */
static void hand_on(struct dc_port *p)
{
	while (!list_empty(&p->waiters)) {
		struct lane_dc *w = container_of(p->waiters.next,
						 struct lane_dc, wait_link);

		if (!take_dci(p, w))
			return;
		list_del(&w->wait_link);
		drain_queue(w);
	}
}

/* release -- lane d's sends on its DCI are all done: the DCI goes to the
 * next waiting lane (d waits again at the tail if it queued more) */
static void release(struct lane_dc *d)
{
	struct dc_port *p = d->p;
	struct dc_dci *c = d->dci;

	if (!c || d->posted)
		return;
	c->owner = NULL;
	d->dci = NULL;
	if (d->qn && !d->l.down && list_empty(&d->wait_link))
		list_add_tail(&p->waiters, &d->wait_link);
	hand_on(p);
}

/* enqueue -- keep one send until lane d holds a DCI; inline data copied */
static int enqueue(struct lane_dc *d, const struct dc_wr *w)
{
	struct dc_wr *q;

	if (!d->q) {
		d->qcap = d->l.send_depth + 2;
		d->q = calloc(d->qcap, sizeof(*d->q));
		if (!d->q)
			return ENOMEM;
	}
	if (d->qn == d->qcap)
		return ENOMEM; /* the session keeps its depth: not possible */
	q = &d->q[(d->qhead + d->qn) % d->qcap];
	*q = *w;
	if ((w->flags & IBV_SEND_INLINE) && !w->inl_len) {
		uint32_t off = 0;
		int i;

		for (i = 0; i < w->nsge; i++) {
			if (w->sge[i].length > DC_INLINE - off)
				return EINVAL;
			memcpy(q->inl + off,
			       (const void *)(uintptr_t)w->sge[i].addr,
			       w->sge[i].length);
			off += w->sge[i].length;
		}
		q->inl_len = off;
		if (!off)
			q->flags &= ~(uint32_t)IBV_SEND_INLINE;
	}
	d->qn++;
	d->dc->dci_waits++;
	return 0;
}

/* submit -- post w now if lane d may, else queue it */
static int submit(struct lane_dc *d, const struct dc_wr *w)
{
	struct dc_port *p = d->p;
	int ret;

	if (d->l.down || !d->has_peer)
		return ENOTCONN;
	if (!d->dci && !d->qn && list_empty(&p->waiters))
		take_dci(p, d);
	/* in order behind its queue; give the DCI back when others wait */
	if (!d->dci || d->qn || !list_empty(&p->waiters)) {
		ret = enqueue(d, w);
		if (ret)
			return ret;
		if (!d->dci && list_empty(&d->wait_link))
			list_add_tail(&p->waiters, &d->wait_link);
		return 0;
	}
	return dci_post(d, w);
}

/* dc_send -- one message (lane.h): SEND with the peer's tag */
static int dc_send(struct rdmamsg__lane *lane, struct ibv_sge *sge, int nsge,
		   uint64_t seq, unsigned int flags)
{
	struct dc_wr w;

	if (nsge < 0 || nsge > 2)
		return EINVAL;
	w.seq = seq;
	w.op = IBV_WR_SEND;
	w.flags = flags;
	w.nsge = nsge;
	memcpy(w.sge, sge, (size_t)nsge * sizeof(*sge));
	w.inl_len = 0;
	return submit(DC(lane), &w);
}

/* dc_post -- a one-sided WR: RDMA write, read, atomics (not write with
 * immediate: the DCT's immediate is the endpoint tag) */
static int dc_post(struct rdmamsg__lane *lane, struct ibv_send_wr *wr,
		   uint64_t seq)
{
	struct dc_wr w;

	memset(&w, 0, sizeof(w));
	if (wr->num_sge < 0 || wr->num_sge > 2 || (wr->num_sge && !wr->sg_list))
		return EINVAL;
	w.seq = seq;
	w.op = wr->opcode;
	w.flags = wr->send_flags & IBV_SEND_INLINE;
	w.nsge = wr->num_sge;
	if (w.nsge)
		memcpy(w.sge, wr->sg_list, (size_t)w.nsge * sizeof(w.sge[0]));
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_READ:
		w.rkey = wr->wr.rdma.rkey;
		w.raddr = wr->wr.rdma.remote_addr;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		w.rkey = wr->wr.atomic.rkey;
		w.raddr = wr->wr.atomic.remote_addr;
		w.cmp = wr->wr.atomic.compare_add;
		w.swap = wr->wr.atomic.swap;
		break;
	default:
		return EOPNOTSUPP;
	}
	return submit(DC(lane), &w);
}

/* dc_post_recvs -- receives are the SRQ's (the interface reposts) */
static int dc_post_recvs(struct rdmamsg__lane *lane, const uint32_t *idx,
			 uint32_t n)
{
	(void)lane;
	(void)idx;
	(void)n;
	return 0;
}

/* flush_rest -- lane d stopped and its DCI sends are done: its queued
 * sends and the drain WR complete as flushed, directly (from wcs) */
static void flush_rest(struct lane_dc *d)
{
	const struct rdmamsg__lane_cbs *cbs = d->l.cbs;

	while (d->qn)
		flush_queued(d, IBV_WC_WR_FLUSH_ERR, 1);
	if (d->flush_due) {
		d->flush_due = 0;
		cbs->tx_done(d->l.owner, (uint32_t)d->drain_seq, -ECANCELED);
	}
}

/* dc_wcs -- the run of this lane's send completions at the head of wc
 * (its DCI's, or synthetic), in order */
static uint32_t dc_wcs(struct rdmamsg__lane *lane, const struct ibv_wc *wc,
		       uint32_t n)
{
	struct lane_dc *d = DC(lane);
	const struct rdmamsg__lane_cbs *cbs = lane->cbs;
	const uint64_t tag = lane->wrid_tag;
	uint32_t i;
	int st;

	if (wc[0].qp_num != DC_SYNTH_QPN &&
	    (!d->dci || wc[0].qp_num != d->dci->qp->qp_num))
		return 0; /* not of its DCI: stale */
	if (RDMAMSG_UNLIKELY(lane->hold)) {
		for (i = 1; i < n; i++)
			if ((wc[i].wr_id & RDMAMSG_WRID_TAG_BITS) != tag ||
			    wc[i].qp_num != wc[0].qp_num)
				break;
		rdmamsg__iface_hold(lane, wc, i);
		return i;
	}
	for (i = 0; i < n; i++) {
		int synthetic = wc[i].qp_num == DC_SYNTH_QPN;

		if ((wc[i].wr_id & RDMAMSG_WRID_TAG_BITS) != tag ||
		    !(wc[i].wr_id & RDMAMSG__WRID_SEND) ||
		    (!synthetic &&
		     (!d->dci || wc[i].qp_num != d->dci->qp->qp_num)))
			break;
		if (!synthetic && d->posted)
			d->posted--;
		st = rdmamsg__wc_errno(wc[i].status);
		/* the lane's first WR, the hello, is no send of the
		 * session's: its completion comes first of the DCI's */
		if (RDMAMSG_UNLIKELY(!synthetic && d->hello_posted))
			d->hello_posted = 0;
		else
			cbs->tx_done(lane->owner, (uint32_t)wc[i].wr_id, st);
		if (st && d->dci)
			d->dci->err = 1;
		if (st && st != -ECANCELED && !lane->down) {
			lane->down = 1;
			cbs->down(lane->owner, st);
		}
	}
	if (d->dci && !d->posted) {
		if (lane->down)
			flush_rest(d);
		release(d);
	}
	return i;
}

/* dc_error -- stop: the DCI the lane holds to ERR (its sends flush);
 * queued sends and the drain WR flush after them */
static int dc_error(struct rdmamsg__lane *lane, uint64_t seq, int drain)
{
	struct lane_dc *d = DC(lane);
	struct ibv_qp_attr qa;

	lane->down = 1;
	if (d->drain_posted)
		return 0;
	list_del(&d->wait_link);
	if (drain) {
		d->drain_posted = 1;
		d->drain_seq = seq;
		d->flush_due = 1;
	}
	if (d->dci && d->posted) {
		/* its sends flush; the queue and the drain after them
		 * (dc_wcs, flush_rest) */
		memset(&qa, 0, sizeof(qa));
		qa.qp_state = IBV_QPS_ERR;
		lane->ctx->ops->modify_qp(d->dci->qp, &qa, IBV_QP_STATE);
		d->dci->err = 1;
		return drain;
	}
	/* nothing on a DCI: flushed in the next pass */
	while (d->qn)
		flush_queued(d, IBV_WC_WR_FLUSH_ERR, 0);
	if (d->flush_due) {
		d->flush_due = 0;
		synth(d, seq, IBV_WC_WR_FLUSH_ERR);
	}
	if (d->dci)
		release(d);
	return drain;
}

/* dc_destroy -- the DCI it holds is reset for the next lane (its
 * completions still queued find no lane), the window goes back */
static void dc_destroy(struct rdmamsg__lane *lane)
{
	struct lane_dc *d = DC(lane);
	struct rdmamsg__dc *dc = d->dc;
	struct dc_port *p = d->p;
	struct rdmamsg_ctx *ctx = lane->ctx;

	list_del(&d->wait_link);
	if (d->dci) {
		if (d->posted)
			d->dci->err = 1;
		d->posted = 0;
		d->qn = 0;
		d->dci->owner = NULL;
		d->dci = NULL;
	}
	rdmamsg__srq_drop_early(lane);
	if (d->srq_win)
		rdmamsg__srq_release(d->srq, d->srq_win);
	if (d->ah)
		ctx->ops->destroy_ah(d->ah);
	rdmamsg__iface_detach(lane);
	free(lane->early);
	list_del(&lane->ready_link);
	free(d->q);
	free(d);
	if (!p)
		return;
	dc->nlanes--;
	p->nlanes--;
	hand_on(p); /* its QPs stay: see the top of the file */
}

/* dc_open -- a DC lane: the DC QPs of its connection's port (the one
 * rdma_cm bound the id to) made with the port's first, a tag, the window
 * on the SRQ; the peer comes with the handshake */
static int dc_open(struct rdmamsg_ctx *ctx, const struct rdmamsg__lane_attr *a,
		   const struct rdmamsg__lane_cbs *cbs, void *owner,
		   struct rdmamsg__lane **lanep)
{
	struct rdmamsg__dc *dc = dc_get(ctx);
	uint8_t port = a->id && a->id->port_num ? a->id->port_num : 1;
	struct lane_dc *d;
	struct rdmamsg__lane *lane;
	struct dc_port *p;
	uint32_t w;
	int ret;

	if (!dc)
		return -ENOTSUP;
	if (!a->srq || (dc->srq && dc->srq != a->srq))
		return -EINVAL;
	if (a->id && a->id->verbs && a->id->verbs != ctx->cm_verbs) {
		LOG_ERR("connection is on device %s, context on %s",
			a->id->verbs->device->name, ctx->devname);
		return -ENODEV;
	}
	if (port > RDMAMSG__DC_PORTS) {
		LOG_ERR("DC: connection on port %u: DC lanes use ports 1 to %u",
			port, RDMAMSG__DC_PORTS);
		return -ENOTSUP;
	}
	p = &dc->port[port - 1];
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	lane = &d->l;
	lane->ops = &rdmamsg__lane_dc_ops;
	lane->cbs = cbs;
	lane->owner = owner;
	lane->ctx = ctx;
	lane->send_depth = a->send_depth;
	lane->hold = a->hold;
	lane->max_inline = DC_INLINE;
	list_init(&lane->ready_link);
	list_init(&d->wait_link);
	d->srq = a->srq;
	if (getrandom(&d->nonce, sizeof(d->nonce), 0) != sizeof(d->nonce))
		d->nonce = rdmamsg__now_ns() * 0x9e3779b97f4a7c15ull ^
			   (uintptr_t)d;
	if (!p->dct) {
		ret = dc_up_qps(p, a->srq, &a->id->route.addr.addr.ibaddr.sgid);
		if (ret) {
			free(d);
			return ret;
		}
	}
	p->nlanes++;
	dc->nlanes++;
	dc->srq = a->srq;
	d->dc = dc;
	d->p = p;
	/* its tag only: the DCIs' and DCT's room is the anchor's */
	ret = rdmamsg__iface_attach(lane, 0);
	if (ret)
		goto err;
	lane->qp = NULL;
	lane->qpn = 0;
	w = a->srq_win ? a->srq_win : a->nrx;
	ret = rdmamsg__srq_reserve(a->srq, w);
	if (ret)
		goto err;
	d->srq_win = w;
	*lanep = lane;
	return 0;
err:
	dc_destroy(lane);
	return ret;
}

/* rdmamsg__lane_dc_local -- what the handshake tells the peer: the DCT,
 * its key, the lane's tag */
void rdmamsg__lane_dc_local(const struct rdmamsg__lane *lane, uint32_t *dctn,
			    uint64_t *key, uint32_t *tag)
{
	const struct lane_dc *d = (const struct lane_dc *)(const void *)lane;

	*dctn = d->p->dct ? d->p->dct->qp_num : 0;
	*key = d->dc->key;
	*tag = (uint32_t)(lane->wrid_tag >> RDMAMSG__WRID_TAG_SHIFT);
}

/* rdmamsg__lane_dc_peer -- the peer's DCT, key and tag (from its
 * handshake, untrusted: a DCT number of 24 bits and a tag with a slot
 * index, else -EPROTO), the address handle towards id's peer */
int rdmamsg__lane_dc_peer(struct rdmamsg__lane *lane, struct rdma_cm_id *id,
			  uint32_t dctn, uint64_t key, uint32_t tag)
{
	struct lane_dc *d = DC(lane);
	struct rdmamsg_ctx *ctx = lane->ctx;
	struct ibv_ah_attr ah;
	const char *bad = getenv("RDMAMSG_TEST_DC_BAD_KEY");

	if (!dctn || dctn > 0xffffff || !(tag & RDMAMSG__WRID_TAG_INDEX) ||
	    (tag & 0x80000000u))
		return -EPROTO;
	if (d->has_peer)
		return -EALREADY;
	memset(&ah, 0, sizeof(ah));
	ah.is_global = 1;
	ah.grh.dgid = id->route.addr.addr.ibaddr.dgid;
	ah.grh.sgid_index =
		gid_index(ctx, d->p->num, &id->route.addr.addr.ibaddr.sgid);
	ah.grh.hop_limit = 64;
	ah.port_num = d->p->num;
	d->ah = ctx->ops->create_ah(ctx->pd, &ah);
	if (!d->ah)
		return rdmamsg__errno(ENOMEM);
	d->peer_dctn = dctn;
	/* test hook: a wrong key, which the peer's DCT must refuse */
	d->peer_key = bad && bad[0] == '1' ? key ^ 1 : key;
	d->peer_tag = tag;
	/* test hook: a peer that tags its messages with another endpoint
	 * of the same context (slot index + delta), which the receiver must
	 * refuse (RDMAMSG_HS_CAP_DCSRC) */
	bad = getenv("RDMAMSG_TEST_DC_TAG_DELTA");
	if (bad)
		d->peer_tag =
			(tag & ~RDMAMSG__WRID_TAG_INDEX) |
			((tag + (uint32_t)atoi(bad)) & RDMAMSG__WRID_TAG_INDEX);
	d->has_peer = 1;
	return 0;
}

/* port_dcis -- the numbers of port p's DCIs into dci; how many */
static uint32_t port_dcis(const struct dc_port *p, uint32_t *dci)
{
	uint32_t i;

	for (i = 0; i < p->ndci; i++)
		dci[i] = p->dci[i].qp->qp_num & 0xffffff;
	return p->ndci;
}

/* rdmamsg__lane_dc_src_local -- the accepting side's DC sender block
 * (cm/handshake.h): the lane's nonce and its port's DCIs (how many they
 * are); hello: the peer offered RDMAMSG_HS_CAP_DCSRC, so the lane takes
 * its hello only, then messages of the DCIs the hello names */
uint32_t rdmamsg__lane_dc_src_local(struct rdmamsg__lane *lane, int hello,
				    uint64_t *nonce, uint32_t *dci)
{
	struct lane_dc *d = DC(lane);

	if (hello && d->src == SRC_OFF)
		d->src = SRC_HELLO;
	*nonce = d->nonce;
	return port_dcis(d->p, dci);
}

/* rdmamsg__lane_dc_src_peer -- the connecting side learnt the acceptor's
 * DCIs and nonce (its accept's sender block, after
 * rdmamsg__lane_dc_peer): messages from other DCIs are refused from now
 * on, and the lane's first send is the hello -- the nonce, the count
 * and the numbers of its port's DCIs, inline -- which proves to the
 * acceptor which DCIs are ours.  0 or a negative errno */
int rdmamsg__lane_dc_src_peer(struct rdmamsg__lane *lane, uint64_t nonce,
			      const uint32_t *dci, uint32_t n)
{
	struct lane_dc *d = DC(lane);
	uint32_t mine[DC_MAX_DCIS], k, i;
	struct dc_wr w;

	if (!n || n > DC_MAX_DCIS || !d->has_peer || d->src != SRC_OFF)
		return -EINVAL;
	memcpy(d->src_dci, dci, n * sizeof(*dci));
	d->nsrc = n;
	d->src = SRC_ON;
	memset(&w, 0, sizeof(w));
	w.op = DC_OP_HELLO;
	w.flags = IBV_SEND_INLINE;
	k = port_dcis(d->p, mine);
	for (i = 0; i < 8; i++)
		w.inl[i] = (uint8_t)(nonce >> (56 - 8 * i));
	w.inl[8] = (uint8_t)k;
	for (i = 0; i < k; i++) {
		w.inl[9 + 3 * i] = (uint8_t)(mine[i] >> 16);
		w.inl[10 + 3 * i] = (uint8_t)(mine[i] >> 8);
		w.inl[11 + 3 * i] = (uint8_t)mine[i];
	}
	w.inl_len = 9 + 3 * k;
	return -submit(d, &w);
}

const struct rdmamsg__lane_ops rdmamsg__lane_dc_ops = {
	.name = "dc",
	.open = dc_open,
	.send = dc_send,
	.post = dc_post,
	.post_recvs = dc_post_recvs,
	.wcs = dc_wcs,
	.error = dc_error,
	.destroy = dc_destroy,
};

/* ---- receiving ----------------------------------------------------- */

/* hello_recv -- the message wc brought to lane d (on srq), which waits
 * for its peer's hello: if it is that hello (our nonce, 1 to 16 DCIs,
 * the one it came from among them), the lane takes messages of those
 * DCIs from now on.  1 if it was, else 0 (a stranger's message) */
static __attribute__((noinline)) int hello_recv(struct lane_dc *d,
						const struct rdmamsg_srq *srq,
						const struct ibv_wc *wc)
{
	uint32_t idx = (uint32_t)wc->wr_id & RDMAMSG_RX_IDX_MASK, n, i;
	const uint8_t *m;
	uint64_t nonce = 0;
	int from = 0;

	if (idx >= srq->nbufs || wc->byte_len < 9)
		return 0;
	m = (const uint8_t *)srq->bufs[idx]->data - RDMAMSG_HDR;
	for (i = 0; i < 8; i++)
		nonce = nonce << 8 | m[i];
	n = m[8];
	if (nonce != d->nonce || !n || n > DC_MAX_DCIS ||
	    wc->byte_len != 9 + 3 * n)
		return 0;
	for (i = 0; i < n; i++) {
		d->src_dci[i] = (uint32_t)m[9 + 3 * i] << 16 |
				(uint32_t)m[10 + 3 * i] << 8 | m[11 + 3 * i];
		if (d->src_dci[i] == (wc->src_qp & 0xffffff))
			from = 1;
	}
	if (!from)
		return 0;
	d->nsrc = n;
	d->src = SRC_ON;
	return 1;
}

/* src_check -- whether lane d takes the message wc brought: 1 if one of
 * its peer's DCIs sent it (wc.src_qp, the sending DCI's number, as mlx5
 * reports it for a DCT's receive), 0 if not (another peer of this
 * context forged the tag), -1 if it was the peer's hello (taken here,
 * never delivered) */
static int src_check(struct lane_dc *d, const struct rdmamsg_srq *srq,
		     const struct ibv_wc *wc)
{
	uint32_t qpn = wc->src_qp & 0xffffff, i;

	if (RDMAMSG_UNLIKELY(d->src == SRC_HELLO))
		return hello_recv(d, srq, wc) ? -1 : 0;
	for (i = 0; i < d->nsrc; i++)
		if (d->src_dci[i] == qpn)
			return 1;
	return 0;
}

/* rdmamsg__dc_srq_lane -- the DC lane a receive of the DCT is for: the
 * one its immediate names, if that is a DC lane on this SRQ and, where
 * the lane knows its peer's DCIs, one of them sent it; else NULL,
 * counted (the caller reposts the buffer) */
struct rdmamsg__lane *rdmamsg__dc_srq_lane(struct rdmamsg_ctx *ctx,
					   const struct rdmamsg_srq *srq,
					   const struct ibv_wc *wc)
{
	struct rdmamsg__lane *lane = NULL;
	uint32_t tag = be32toh(wc->imm_data);

	if (wc->status == IBV_WC_SUCCESS && (wc->wc_flags & IBV_WC_WITH_IMM) &&
	    wc->opcode == IBV_WC_RECV && !(tag & 0x80000000u))
		lane = rdmamsg__wrid_route(&ctx->ifc.eps,
					   (uint64_t)tag
						   << RDMAMSG__WRID_TAG_SHIFT);
	if (lane &&
	    (lane->ops != &rdmamsg__lane_dc_ops || DC(lane)->srq != srq))
		lane = NULL;
	if (lane && DC(lane)->src != SRC_OFF) {
		int r = src_check(DC(lane), srq, wc);

		if (r < 0)
			return NULL; /* the hello: no message, no drop */
		if (!r)
			lane = NULL;
	}
	if (!lane && ctx->dc)
		ctx->dc->tag_drops++;
	return lane;
}
