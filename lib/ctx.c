/* SPDX-License-Identifier: MIT */
/* ctx.c -- context: fabric, device, PD, channels, pool, loop adapter */
#include "config.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "dispatch.h"

#include <infiniband/mlx5dv.h>

#define DEFAULT_POOL_LIMIT     ((size_t)256 << 20)
#define DEFAULT_LISTEN_BACKLOG 1024
#define MAX_LISTEN_BACKLOG     65536
#define DEFAULT_MAX_PENDING    1024
#define MAX_PENDING	       65536
#define MIN_POOL_LIMIT	       ((size_t)1 << 20)

/* rdmamsg__errno -- errno after a failed verbs/cm call, never 0, and
 * always one that rdmamsg_strerror() documents (else the fallback) */
int rdmamsg__errno(int fallback)
{
	int e = errno;

	if (!e || !strcmp(rdmamsg_strerror(-e), "unknown error"))
		return -fallback;
	return -e;
}

/* rdmamsg_ctx_attr_new -- attributes with defaults */
RDMAMSG_EXPORT int rdmamsg_ctx_attr_new(struct rdmamsg_ctx_attr **attr)
{
	struct rdmamsg_ctx_attr *a;

	if (!attr)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->fabric = RDMAMSG_FABRIC_AUTO;
	a->pool_limit = DEFAULT_POOL_LIMIT;
	a->listen_backlog = DEFAULT_LISTEN_BACKLOG;
	a->max_pending = DEFAULT_MAX_PENDING;
	*attr = a;
	return 0;
}

/* rdmamsg_ctx_attr_delete -- free *attr */
RDMAMSG_EXPORT int rdmamsg_ctx_attr_delete(struct rdmamsg_ctx_attr **attr)
{
	if (!attr)
		return -EINVAL;
	if (*attr) {
		free((*attr)->device);
		free(*attr);
		*attr = NULL;
	}
	return 0;
}

/* rdmamsg_ctx_attr_set_loop -- the caller's libev loop (NULL: fd mode) */
RDMAMSG_EXPORT int rdmamsg_ctx_attr_set_loop(struct rdmamsg_ctx_attr *attr,
					     struct ev_loop *loop)
{
	if (!attr)
		return -EINVAL;
	attr->loop = loop;
	return 0;
}

/* rdmamsg_ctx_attr_set_fabric -- AUTO, VERBS or SOFT */
RDMAMSG_EXPORT int rdmamsg_ctx_attr_set_fabric(struct rdmamsg_ctx_attr *attr,
					       enum rdmamsg_fabric fabric)
{
	if (!attr ||
	    (fabric != RDMAMSG_FABRIC_AUTO && fabric != RDMAMSG_FABRIC_VERBS &&
	     fabric != RDMAMSG_FABRIC_SOFT))
		return -EINVAL;
	attr->fabric = fabric;
	return 0;
}

/* rdmamsg_ctx_attr_set_device -- device name or local address */
RDMAMSG_EXPORT int rdmamsg_ctx_attr_set_device(struct rdmamsg_ctx_attr *attr,
					       const char *device)
{
	char *d = NULL;

	if (!attr || (device && !*device))
		return -EINVAL;
	if (device) {
		d = strdup(device);
		if (!d)
			return -ENOMEM;
	}
	free(attr->device);
	attr->device = d;
	return 0;
}

/* rdmamsg_ctx_attr_set_pool_limit -- most bytes the pool registers */
RDMAMSG_EXPORT int rdmamsg_ctx_attr_set_pool_limit(
	struct rdmamsg_ctx_attr *attr, size_t bytes)
{
	if (!attr || bytes < MIN_POOL_LIMIT)
		return -EINVAL;
	attr->pool_limit = bytes;
	return 0;
}

/* rdmamsg_ctx_attr_set_listen_backlog -- connection requests the fabric
 * holds for a listener before the loop takes them */
RDMAMSG_EXPORT int rdmamsg_ctx_attr_set_listen_backlog(
	struct rdmamsg_ctx_attr *attr, unsigned int requests)
{
	if (!attr || requests == 0 || requests > MAX_LISTEN_BACKLOG)
		return -EINVAL;
	attr->listen_backlog = requests;
	return 0;
}

/* rdmamsg_ctx_attr_set_max_pending -- unfinished handshakes at once */
RDMAMSG_EXPORT int rdmamsg_ctx_attr_set_max_pending(
	struct rdmamsg_ctx_attr *attr, unsigned int handshakes)
{
	if (!attr || handshakes == 0 || handshakes > MAX_PENDING)
		return -EINVAL;
	attr->max_pending = handshakes;
	return 0;
}

/* rdmamsg_ctx_attr_set_huge_pages -- huge-page slabs when available */
RDMAMSG_EXPORT int rdmamsg_ctx_attr_set_huge_pages(
	struct rdmamsg_ctx_attr *attr, int enable)
{
	if (!attr)
		return -EINVAL;
	attr->huge = !!enable;
	return 0;
}

/* rdmamsg_ctx_attr_set_wakeup_cb -- what rdmamsg_ctx_wakeup() runs */
RDMAMSG_EXPORT int rdmamsg_ctx_attr_set_wakeup_cb(
	struct rdmamsg_ctx_attr *attr,
	void (*cb)(struct rdmamsg_ctx *ctx, void *arg), void *arg)
{
	if (!attr)
		return -EINVAL;
	attr->wakeup_cb = cb;
	attr->wakeup_arg = arg;
	return 0;
}

/* match_addr -- the device that owns local address addr, or NULL */
static struct ibv_context *match_addr(struct rdmamsg_ctx *ctx, const char *addr,
				      int n)
{
	struct sockaddr_storage ss;
	struct ibv_context *found = NULL;
	struct rdma_cm_id *id;
	int i;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr) ==
	    1) {
		ss.ss_family = AF_INET;
	} else if (inet_pton(AF_INET6, addr,
			     &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
		ss.ss_family = AF_INET6;
	} else {
		return NULL;
	}
	if (ctx->ops->create_id(ctx->ech, &id, NULL, RDMA_PS_TCP))
		return NULL;
	if (ctx->ops->bind_addr(id, (struct sockaddr *)&ss) == 0 && id->verbs)
		for (i = 0; i < n; i++)
			if (ctx->devs[i] == id->verbs ||
			    !strcmp(ctx->devs[i]->device->name,
				    id->verbs->device->name))
				found = ctx->devs[i];
	ctx->ops->destroy_id(id);
	return found;
}

/* pick_device -- the device attr names (name or address), or the first;
 * opened for this context alone */
static int pick_device(struct rdmamsg_ctx *ctx, const char *want)
{
	int n = 0, i;

	ctx->devs = ctx->ops->get_devices(&n);
	if (!ctx->devs || n <= 0) {
		LOG_ERR("no RDMA device on fabric %s", ctx->ops->name);
		if (ctx->devs)
			ctx->ops->free_devices(ctx->devs);
		ctx->devs = NULL;
		return -ENODEV;
	}
	if (!want) {
		ctx->cm_verbs = ctx->devs[0];
	} else {
		for (i = 0; i < n; i++)
			if (!strcmp(ctx->ops->get_device_name(
					    ctx->devs[i]->device),
				    want))
				ctx->cm_verbs = ctx->devs[i];
		if (!ctx->cm_verbs)
			ctx->cm_verbs = match_addr(ctx, want, n);
		if (!ctx->cm_verbs) {
			LOG_ERR("no device named %s or owning that address",
				want);
			return -ENODEV;
		}
	}
	strncpy(ctx->devname, ctx->ops->get_device_name(ctx->cm_verbs->device),
		sizeof(ctx->devname) - 1);
	ctx->verbs = ctx->ops->open_device(ctx->cm_verbs->device);
	if (!ctx->verbs) {
		LOG_ERR("ibv_open_device(%s) failed: %d", ctx->devname,
			rdmamsg__errno(ENODEV));
		return -ENODEV;
	}
	return 0;
}

/* qp_domain -- the PD the context's QPs are made on: a parent domain of
 * its PD with a thread domain (ibv_alloc_td(3): a context belongs to the
 * one thread that drives its loop, rdmamsg.h, so the provider need not
 * lock its QPs' send queues and doorbells), or the PD itself where the
 * device has no thread or parent domains (or RDMAMSG_TEST_NO_TD) */
static struct ibv_pd *qp_domain(struct rdmamsg_ctx *ctx)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_td_init_attr ta;
	const char *e = getenv("RDMAMSG_TEST_NO_TD");
	struct ibv_pd *pd;

	if (e && atoi(e))
		return ctx->pd;
	memset(&ta, 0, sizeof(ta));
	ctx->td = ibv_alloc_td(ctx->verbs, &ta);
	if (!ctx->td)
		return ctx->pd;
	memset(&pa, 0, sizeof(pa));
	pa.pd = ctx->pd;
	pa.td = ctx->td;
	pd = ibv_alloc_parent_domain(ctx->verbs, &pa);
	if (!pd) {
		ibv_dealloc_td(ctx->td);
		ctx->td = NULL;
		return ctx->pd;
	}
	return pd;
}

/* qp_domain_free -- the parent domain and thread domain go (every QP on
 * them is gone) */
static void qp_domain_free(struct rdmamsg_ctx *ctx)
{
	if (!ctx->td)
		return;
	ctx->ops->dealloc_pd(ctx->qp_pd);
	ibv_dealloc_td(ctx->td);
	ctx->td = NULL;
	ctx->qp_pd = ctx->pd;
}

/* probe_inline -- the largest inline size an RC QP accepts (0 if none):
 * largest first, so that a device that can carry a whole 4 or 8 KiB
 * message and its header inline is asked for it; a device asked for more
 * than it has fails create_qp without harm (mlx5) and the next step is
 * tried.  Once per context: at most eight QPs made and destroyed. */
static uint32_t probe_inline(struct rdmamsg_ctx *ctx)
{
	static const uint32_t tries[] = {8192 + RDMAMSG_HDR,
					 4096 + RDMAMSG_HDR,
					 1024,
					 512,
					 256,
					 128,
					 64,
					 32};
	struct ibv_qp_init_attr qa;
	const char *e;
	struct ibv_cq *cq;
	uint32_t best = 0;
	size_t i;

	cq = ctx->ops->create_cq(ctx->verbs, 4, NULL, NULL, 0);
	if (!cq)
		return 0;
	for (i = 0; i < sizeof(tries) / sizeof(tries[0]) && !best; i++) {
		struct ibv_qp *qp;

		memset(&qa, 0, sizeof(qa));
		qa.send_cq = qa.recv_cq = cq;
		qa.qp_type = IBV_QPT_RC;
		qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
		qa.cap.max_send_sge = 2;
		qa.cap.max_recv_sge = 1;
		qa.cap.max_inline_data = tries[i];
		qp = ctx->ops->create_qp(ctx->qp_pd, &qa);
		if (qp) {
			best = qa.cap.max_inline_data;
			ctx->ops->destroy_qp(qp);
		}
	}
	ctx->ops->destroy_cq(cq);
	/* test hook: a device with fewer inline bytes, whose FIN (64 bytes
	 * with its header) needs pool memory (xfer.c fin_heap) */
	e = getenv("RDMAMSG_TEST_MAX_INLINE");
	if (e && (uint32_t)atoi(e) < best)
		best = (uint32_t)atoi(e);
	return best;
}

/* test_device_limits -- test hook: a device whose QPs hold fewer work
 * requests (RDMAMSG_TEST_MAX_QP_WR) or scatter/gather entries
 * (RDMAMSG_TEST_MAX_SGE) than softrdma's, as ibv_query_device would
 * report it */
static void test_device_limits(struct rdmamsg_ctx *ctx)
{
	const char *e = getenv("RDMAMSG_TEST_MAX_QP_WR");

	if (e && atoi(e) >= 0 && atoi(e) < ctx->dattr.max_qp_wr)
		ctx->dattr.max_qp_wr = atoi(e);
	e = getenv("RDMAMSG_TEST_MAX_SGE");
	if (e && atoi(e) >= 0 && atoi(e) < ctx->dattr.max_sge)
		ctx->dattr.max_sge = atoi(e);
}

/* ctx_alloc -- a zeroed context in pages of its own: its clock (now) may
 * be registered for the peers' reads (ep.c), and where the provider
 * marks a registration's pages don't-fork (ibv_fork_init(3) on kernels
 * without copy-on-fork of pinned pages) that must take no one else's
 * data along */
static struct rdmamsg_ctx *ctx_alloc(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t a = pg > 0 ? (size_t)pg : 4096;
	size_t len = (sizeof(struct rdmamsg_ctx) + a - 1) / a * a;
	void *p;

	if (posix_memalign(&p, a, len))
		return NULL;
	memset(p, 0, len);
	return p;
}

/* rdmamsg_ctx_create -- open fabric and device, make PD and channels */
RDMAMSG_EXPORT int rdmamsg_ctx_create(const struct rdmamsg_ctx_attr *attr,
				      struct rdmamsg_ctx **ctxp)
{
	struct rdmamsg_ctx *ctx;
	int ret;

	if (!ctxp)
		return -EINVAL;
	ctx = ctx_alloc();
	if (!ctx)
		return -ENOMEM;
	rdmamsg__timers_init(&ctx->timers);
	list_init(&ctx->polls);
	list_init(&ctx->xwait);
	rdmamsg__iface_init(ctx);
	list_init(&ctx->deferred);
	list_init(&ctx->closes);
	list_init(&ctx->eps);
	list_init(&ctx->listeners);
	list_init(&ctx->mrs);
	list_init(&ctx->srqs);
	if (attr) {
		ctx->wakeup_cb = attr->wakeup_cb;
		ctx->wakeup_arg = attr->wakeup_arg;
	}

	ret = rdmamsg__dispatch_open(ctx,
				     attr ? attr->fabric : RDMAMSG_FABRIC_AUTO);
	if (ret)
		goto err_free_ctx;
	ctx->ech = ctx->ops->create_event_channel();
	if (!ctx->ech) {
		ret = rdmamsg__errno(ENODEV);
		LOG_ERR("rdma_create_event_channel failed: %d", ret);
		goto err_dispatch;
	}
	ret = pick_device(ctx, attr ? attr->device : NULL);
	if (ret)
		goto err_free_devices;
	if (ctx->ops->query_device(ctx->verbs, &ctx->dattr)) {
		ret = -ENODEV;
		LOG_ERR("ibv_query_device(%s) failed", ctx->devname);
		goto err_free_devices;
	}
	test_device_limits(ctx);
	ctx->pd = ctx->ops->alloc_pd(ctx->verbs);
	if (!ctx->pd) {
		ret = rdmamsg__errno(ENOMEM);
		LOG_ERR("ibv_alloc_pd(%s) failed: %d", ctx->devname, ret);
		goto err_free_devices;
	}
	ctx->cc = ctx->ops->create_comp_channel(ctx->verbs);
	if (!ctx->cc) {
		ret = rdmamsg__errno(ENOMEM);
		LOG_ERR("ibv_create_comp_channel failed: %d", ret);
		goto err_dealloc_pd;
	}
	ctx->qp_pd = qp_domain(ctx);
	ctx->max_inline = probe_inline(ctx);
	/* test hook: a FIN's control buffer cannot be registered (xfer.c
	 * fin_ctl): its FINs wait for pool memory */
	ctx->test_no_ctl = getenv("RDMAMSG_TEST_NO_CTL_BUF") != NULL;
	rdmamsg__bulk_init(&ctx->bulk);
	ctx->listen_backlog =
		(int)(attr ? attr->listen_backlog : DEFAULT_LISTEN_BACKLOG);
	ctx->max_pending = attr ? attr->max_pending : DEFAULT_MAX_PENDING;
	rdmamsg__pool_init(ctx, attr ? attr->pool_limit : DEFAULT_POOL_LIMIT,
			   attr ? attr->huge : 0);
	ret = rdmamsg__loop_init(ctx, attr ? attr->loop : NULL);
	if (ret)
		goto err_destroy_cc;
	LOG_INFO("context on %s (%s fabric), inline %u, QPs on %s",
		 ctx->devname, ctx->ops->name, ctx->max_inline,
		 ctx->td ? "a thread domain" : "the PD");
	*ctxp = ctx;
	return 0;

err_destroy_cc:
	qp_domain_free(ctx);
	ctx->ops->destroy_comp_channel(ctx->cc);
err_dealloc_pd:
	ctx->ops->dealloc_pd(ctx->pd);
err_free_devices:
	if (ctx->verbs)
		ctx->ops->close_device(ctx->verbs);
	if (ctx->devs)
		ctx->ops->free_devices(ctx->devs);
	ctx->ops->destroy_event_channel(ctx->ech);
err_dispatch:
	rdmamsg__dispatch_close(ctx);
err_free_ctx:
	free(ctx);
	return ret;
}

/* rdmamsg_ctx_destroy -- free an idle context */
RDMAMSG_EXPORT int rdmamsg_ctx_destroy(struct rdmamsg_ctx **ctxp)
{
	struct rdmamsg_ctx *ctx;

	if (!ctxp || !*ctxp)
		return -EINVAL;
	ctx = *ctxp;
	if (!list_empty(&ctx->eps) || !list_empty(&ctx->listeners) ||
	    !list_empty(&ctx->mrs) || !list_empty(&ctx->srqs) ||
	    ctx->pool.in_use || ctx->in_progress)
		return -EBUSY;
	rdmamsg__loop_fini(ctx);
	rdmamsg__dc_fini(ctx);
	rdmamsg__iface_fini(ctx);
	rdmamsg__umr_fini(ctx);
	rdmamsg__pool_fini(ctx);
	if (ctx->alive_mr)
		ctx->ops->dereg_mr(ctx->alive_mr);
	qp_domain_free(ctx);
	ctx->ops->destroy_comp_channel(ctx->cc);
	ctx->ops->dealloc_pd(ctx->pd);
	ctx->ops->close_device(ctx->verbs);
	ctx->ops->free_devices(ctx->devs);
	ctx->ops->destroy_event_channel(ctx->ech);
	rdmamsg__dispatch_close(ctx);
	free(ctx);
	*ctxp = NULL;
	return 0;
}

/* rdmamsg_ctx_get_fabric -- VERBS or SOFT */
RDMAMSG_EXPORT int rdmamsg_ctx_get_fabric(const struct rdmamsg_ctx *ctx,
					  enum rdmamsg_fabric *fabric)
{
	if (!ctx || !fabric)
		return -EINVAL;
	*fabric = ctx->fabric;
	return 0;
}

/* rdmamsg_ctx_get_device_name -- the device's name */
RDMAMSG_EXPORT int rdmamsg_ctx_get_device_name(const struct rdmamsg_ctx *ctx,
					       const char **name)
{
	if (!ctx || !name)
		return -EINVAL;
	*name = ctx->devname;
	return 0;
}

typedef struct ibv_qp *(*dc_create_fn)(struct ibv_context *c,
				       struct ibv_qp_init_attr_ex *a,
				       struct mlx5dv_qp_init_attr *m);

/* dc_qp -- one DCT (on srq) or DCI made and destroyed; 0 or -1 */
static int dc_qp(struct rdmamsg_ctx *ctx, dc_create_fn create,
		 struct ibv_cq *cq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr_ex qa;
	struct mlx5dv_qp_init_attr da;
	struct ibv_qp *qp;

	memset(&qa, 0, sizeof(qa));
	memset(&da, 0, sizeof(da));
	qa.qp_type = IBV_QPT_DRIVER;
	qa.send_cq = qa.recv_cq = cq;
	qa.pd = ctx->pd;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	qa.srq = srq;
	da.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
	da.dc_init_attr.dc_type = srq ? MLX5DV_DCTYPE_DCT : MLX5DV_DCTYPE_DCI;
	if (!srq) {
		qa.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		qa.send_ops_flags = IBV_QP_EX_WITH_SEND |
				    IBV_QP_EX_WITH_RDMA_WRITE |
				    IBV_QP_EX_WITH_RDMA_READ;
		qa.cap.max_send_wr = 1;
		qa.cap.max_send_sge = 1;
	}
	qp = create(ctx->verbs, &qa, &da);
	if (!qp)
		return -1;
	ctx->ops->destroy_qp(qp);
	return 0;
}

/*
 * dc_probe -- RDMAMSG_CAP_DC: the device offers the DC transport (mlx5
 * through libmlx5, softrdma through its emulation) when a DCT on an SRQ
 * and a DCI can be made; RDMAMSG_NO_DC=1 in the environment at the first
 * query turns it off.  1 or -1.
 */
static int dc_probe(struct rdmamsg_ctx *ctx)
{
	const char *e = getenv("RDMAMSG_NO_DC");
	struct ibv_srq_init_attr sa;
	dc_create_fn create = NULL;
	struct ibv_srq *srq = NULL;
	struct ibv_cq *cq = NULL;
	void *mlx5 = NULL;
	int ret = -1;

	if (e && e[0] == '1')
		return -1;
	if (ctx->fabric == RDMAMSG_FABRIC_SOFT) {
		if (ctx->dl)
			create = (dc_create_fn)dlsym(ctx->dl,
						     "mlx5dv_create_qp");
	} else {
		bool (*supported)(struct ibv_device * d);

		mlx5 = dlopen("libmlx5.so.1", RTLD_NOW | RTLD_LOCAL);
		supported = mlx5 ? (bool (*)(struct ibv_device *))dlsym(
					   mlx5, "mlx5dv_is_supported")
				 : NULL;
		if (supported && supported(ctx->verbs->device))
			create = (dc_create_fn)dlsym(mlx5, "mlx5dv_create_qp");
	}
	if (!create)
		goto out;
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 1;
	sa.attr.max_sge = 1;
	cq = ctx->ops->create_cq(ctx->verbs, 2, NULL, NULL, 0);
	srq = cq ? ctx->ops->create_srq(ctx->pd, &sa) : NULL;
	if (srq && !dc_qp(ctx, create, cq, srq) &&
	    !dc_qp(ctx, create, cq, NULL))
		ret = 1;
	if (srq)
		ctx->ops->destroy_srq(srq);
	if (cq)
		ctx->ops->destroy_cq(cq);
out:
	if (mlx5)
		dlclose(mlx5);
	return ret;
}

/* rdmamsg_ctx_query_caps -- one capability, -ENOTSUP when missing */
RDMAMSG_EXPORT int rdmamsg_ctx_query_caps(const struct rdmamsg_ctx *ctx,
					  enum rdmamsg_cap cap, uint64_t *value)
{
	uint64_t v;

	if (!ctx || !value)
		return -EINVAL;
	switch (cap) {
	case RDMAMSG_CAP_MAX_MSG_SIZE:
		v = (uint64_t)1 << RDMAMSG_MAX_CLASS_SHIFT;
		break;
	case RDMAMSG_CAP_MAX_INLINE:
		v = ctx->max_inline;
		break;
	case RDMAMSG_CAP_SRQ:
		v = ctx->dattr.max_srq > 0;
		break;
	case RDMAMSG_CAP_ATOMICS:
		v = ctx->dattr.atomic_cap != IBV_ATOMIC_NONE;
		break;
	case RDMAMSG_CAP_MULTICAST:
		v = ctx->dattr.max_mcast_grp > 0;
		break;
	case RDMAMSG_CAP_APM:
		v = !!(ctx->dattr.device_cap_flags & IBV_DEVICE_AUTO_PATH_MIG);
		break;
	case RDMAMSG_CAP_DC: /* the device's; no DC endpoints yet */
		if (!ctx->dc_state)
			((struct rdmamsg_ctx *)ctx)->dc_state =
				dc_probe((struct rdmamsg_ctx *)ctx);
		v = ctx->dc_state > 0;
		break;
	case RDMAMSG_CAP_UMR: /* probed once (mr_iov.c) */
		v = (uint64_t)rdmamsg__umr_cap((struct rdmamsg_ctx *)ctx);
		break;
	default:
		return -EINVAL;
	}
	if (!v && cap != RDMAMSG_CAP_MAX_INLINE)
		return -ENOTSUP;
	*value = v;
	return 0;
}

/* rdmamsg__ctx_defer -- run an object's step in the next progress pass */
void rdmamsg__ctx_defer(struct rdmamsg_ctx *ctx, struct rdmamsg__list *link)
{
	if (list_empty(link))
		list_add_tail(&ctx->deferred, link);
	rdmamsg__loop_kick(ctx);
}
