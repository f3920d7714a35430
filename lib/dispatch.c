/* SPDX-License-Identifier: MIT */
/* dispatch.c -- bind the control path to libibverbs/librdmacm or softrdma */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "dispatch.h"

#ifndef RDMAMSG_SOFTRDMA_PATH
#define RDMAMSG_SOFTRDMA_PATH "libsoftrdma.so"
#endif

static const struct rdmamsg__ops verbs_ops = {
	.name = "verbs",
	.get_device_list = ibv_get_device_list,
	.free_device_list = ibv_free_device_list,
	.get_device_name = ibv_get_device_name,
	.query_device = ibv_query_device,
	.alloc_pd = ibv_alloc_pd,
	.dealloc_pd = ibv_dealloc_pd,
	.reg_mr = ibv_reg_mr,
	.dereg_mr = ibv_dereg_mr,
	.create_comp_channel = ibv_create_comp_channel,
	.destroy_comp_channel = ibv_destroy_comp_channel,
	.create_cq = ibv_create_cq,
	.destroy_cq = ibv_destroy_cq,
	.get_cq_event = ibv_get_cq_event,
	.ack_cq_events = ibv_ack_cq_events,
	.create_qp = ibv_create_qp,
	.destroy_qp = ibv_destroy_qp,
	.modify_qp = ibv_modify_qp,
	.get_async_event = ibv_get_async_event,
	.ack_async_event = ibv_ack_async_event,
	.create_event_channel = rdma_create_event_channel,
	.destroy_event_channel = rdma_destroy_event_channel,
	.create_id = rdma_create_id,
	.destroy_id = rdma_destroy_id,
	.bind_addr = rdma_bind_addr,
	.listen = rdma_listen,
	.resolve_addr = rdma_resolve_addr,
	.resolve_route = rdma_resolve_route,
	.create_cm_qp = rdma_create_qp,
	.destroy_cm_qp = rdma_destroy_qp,
	.connect = rdma_connect,
	.accept = rdma_accept,
	.reject = rdma_reject,
	.disconnect = rdma_disconnect,
	.get_cm_event = rdma_get_cm_event,
	.ack_cm_event = rdma_ack_cm_event,
	.get_devices = rdma_get_devices,
	.free_devices = rdma_free_devices,
};

#define SYM(field, sym)                                    \
	{                                                  \
		offsetof(struct rdmamsg__ops, field), #sym \
	}
static const struct {
	size_t off;
	const char *sym;
} soft_syms[] = {
	SYM(get_device_list, ibv_get_device_list),
	SYM(free_device_list, ibv_free_device_list),
	SYM(get_device_name, ibv_get_device_name),
	SYM(query_device, ibv_query_device),
	SYM(alloc_pd, ibv_alloc_pd),
	SYM(dealloc_pd, ibv_dealloc_pd),
	SYM(reg_mr, ibv_reg_mr),
	SYM(dereg_mr, ibv_dereg_mr),
	SYM(create_comp_channel, ibv_create_comp_channel),
	SYM(destroy_comp_channel, ibv_destroy_comp_channel),
	SYM(create_cq, ibv_create_cq),
	SYM(destroy_cq, ibv_destroy_cq),
	SYM(get_cq_event, ibv_get_cq_event),
	SYM(ack_cq_events, ibv_ack_cq_events),
	SYM(create_qp, ibv_create_qp),
	SYM(destroy_qp, ibv_destroy_qp),
	SYM(modify_qp, ibv_modify_qp),
	SYM(get_async_event, ibv_get_async_event),
	SYM(ack_async_event, ibv_ack_async_event),
	SYM(create_event_channel, rdma_create_event_channel),
	SYM(destroy_event_channel, rdma_destroy_event_channel),
	SYM(create_id, rdma_create_id),
	SYM(destroy_id, rdma_destroy_id),
	SYM(bind_addr, rdma_bind_addr),
	SYM(listen, rdma_listen),
	SYM(resolve_addr, rdma_resolve_addr),
	SYM(resolve_route, rdma_resolve_route),
	SYM(create_cm_qp, rdma_create_qp),
	SYM(destroy_cm_qp, rdma_destroy_qp),
	SYM(connect, rdma_connect),
	SYM(accept, rdma_accept),
	SYM(reject, rdma_reject),
	SYM(disconnect, rdma_disconnect),
	SYM(get_cm_event, rdma_get_cm_event),
	SYM(ack_cm_event, rdma_ack_cm_event),
	SYM(get_devices, rdma_get_devices),
	SYM(free_devices, rdma_free_devices),
};

/* softrdma is loaded once per process and never unloaded: its transport
 * threads may outlive a context. */
static pthread_mutex_t soft_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rdmamsg__ops soft_ops;
static void *soft_dl;

/* soft_load -- dlopen softrdma and fill soft_ops (under soft_lock) */
static int soft_load(void)
{
	const char *path = getenv("RDMAMSG_SOFTRDMA_PATH");
	struct rdmamsg__ops ops;
	void *dl;
	size_t i;

	if (soft_dl)
		return 0;
	if (!path || !*path)
		path = RDMAMSG_SOFTRDMA_PATH;
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		LOG_ERR("cannot load softrdma from %s: %s", path, dlerror());
		return -ENODEV;
	}
	memset(&ops, 0, sizeof(ops));
	ops.name = "soft";
	for (i = 0; i < sizeof(soft_syms) / sizeof(soft_syms[0]); i++) {
		void *f = dlsym(dl, soft_syms[i].sym);

		if (!f) {
			LOG_ERR("softrdma at %s lacks %s", path,
				soft_syms[i].sym);
			dlclose(dl);
			return -ENODEV;
		}
		memcpy((char *)&ops + soft_syms[i].off, &f, sizeof(f));
	}
	soft_ops = ops;
	soft_dl = dl;
	LOG_INFO("softrdma loaded from %s", path);
	return 0;
}

/* verbs_present -- true when libibverbs lists at least one device */
static int verbs_present(void)
{
	struct ibv_device **list;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (list)
		ibv_free_device_list(list);
	return list && n > 0;
}

/* fabric_from_env -- apply RDMAMSG_FABRIC to an AUTO request */
static int fabric_from_env(enum rdmamsg_fabric *f)
{
	const char *e = getenv("RDMAMSG_FABRIC");

	if (!e || !*e || !strcasecmp(e, "auto"))
		return 0;
	if (!strcasecmp(e, "verbs")) {
		*f = RDMAMSG_FABRIC_VERBS;
		return 0;
	}
	if (!strcasecmp(e, "soft")) {
		*f = RDMAMSG_FABRIC_SOFT;
		return 0;
	}
	LOG_ERR("RDMAMSG_FABRIC=%s: expected auto, verbs or soft", e);
	return -ENOTSUP;
}

/* rdmamsg__dispatch_open -- choose the fabric and bind ctx->ops */
int rdmamsg__dispatch_open(struct rdmamsg_ctx *ctx, enum rdmamsg_fabric want)
{
	int ret;

	if (want == RDMAMSG_FABRIC_AUTO) {
		ret = fabric_from_env(&want);
		if (ret)
			return ret;
	}
	if (want == RDMAMSG_FABRIC_AUTO)
		want = verbs_present() ? RDMAMSG_FABRIC_VERBS
				       : RDMAMSG_FABRIC_SOFT;
	if (want == RDMAMSG_FABRIC_VERBS) {
		ctx->ops = &verbs_ops;
		ctx->fabric = want;
		return 0;
	}
	pthread_mutex_lock(&soft_lock);
	ret = soft_load();
	pthread_mutex_unlock(&soft_lock);
	if (ret)
		return ret;
	ctx->ops = &soft_ops;
	ctx->dl = soft_dl;
	ctx->fabric = RDMAMSG_FABRIC_SOFT;
	return 0;
}

/* rdmamsg__dispatch_close -- forget the binding (softrdma stays loaded) */
void rdmamsg__dispatch_close(struct rdmamsg_ctx *ctx)
{
	ctx->ops = NULL;
	ctx->dl = NULL;
}
