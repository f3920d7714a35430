/* SPDX-License-Identifier: MIT */
/* dispatch.h -- one table for every control-path verbs/rdma_cm call */
#ifndef RDMAMSG_DISPATCH_H
#define RDMAMSG_DISPATCH_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

/*
 * The control path calls through this table so that one binary runs on
 * hardware (libibverbs/librdmacm, linked) and on softrdma (dlopen'ed with
 * RTLD_LOCAL).  The data path needs no table: ibv_post_send() and friends
 * are static inlines that jump through the provider's context->ops.
 *
 * RDMAMSG__OPS is the one list of the table's entries: X(field, symbol,
 * return type, parameters).  It makes the struct below and, in dispatch.c,
 * both the table bound to the linked libraries (which the compiler checks
 * against their prototypes) and the names looked up in softrdma.
 */
/* clang-format off */
#define RDMAMSG__OPS(X) \
	X(get_device_list, ibv_get_device_list, struct ibv_device **, (int *n)) \
	X(free_device_list, ibv_free_device_list, void, (struct ibv_device **list)) \
	X(get_device_name, ibv_get_device_name, const char *, (struct ibv_device *dev)) \
	X(open_device, ibv_open_device, struct ibv_context *, (struct ibv_device *dev)) \
	X(close_device, ibv_close_device, int, (struct ibv_context *ctx)) \
	X(query_device, ibv_query_device, int, (struct ibv_context *ctx, struct ibv_device_attr *attr)) \
	X(alloc_pd, ibv_alloc_pd, struct ibv_pd *, (struct ibv_context *ctx)) \
	X(dealloc_pd, ibv_dealloc_pd, int, (struct ibv_pd *pd)) \
	X(reg_mr, ibv_reg_mr, struct ibv_mr *, (struct ibv_pd *pd, void *addr, size_t len, int access)) \
	X(dereg_mr, ibv_dereg_mr, int, (struct ibv_mr *mr)) \
	X(create_comp_channel, ibv_create_comp_channel, struct ibv_comp_channel *, (struct ibv_context *c)) \
	X(destroy_comp_channel, ibv_destroy_comp_channel, int, (struct ibv_comp_channel *cc)) \
	X(create_cq, ibv_create_cq, struct ibv_cq *, (struct ibv_context *ctx, int cqe, void *cq_context, struct ibv_comp_channel *cc, int vec)) \
	X(destroy_cq, ibv_destroy_cq, int, (struct ibv_cq *cq)) \
	X(resize_cq, ibv_resize_cq, int, (struct ibv_cq *cq, int cqe)) \
	X(get_cq_event, ibv_get_cq_event, int, (struct ibv_comp_channel *cc, struct ibv_cq **cq, void **cq_context)) \
	X(ack_cq_events, ibv_ack_cq_events, void, (struct ibv_cq *cq, unsigned int n)) \
	X(create_qp, ibv_create_qp, struct ibv_qp *, (struct ibv_pd *pd, struct ibv_qp_init_attr *attr)) \
	X(destroy_qp, ibv_destroy_qp, int, (struct ibv_qp *qp)) \
	X(modify_qp, ibv_modify_qp, int, (struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)) \
	X(attach_mcast, ibv_attach_mcast, int, (struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)) \
	X(detach_mcast, ibv_detach_mcast, int, (struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)) \
	X(query_qp, ibv_query_qp, int, (struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init)) \
	X(create_srq, ibv_create_srq, struct ibv_srq *, (struct ibv_pd *pd, struct ibv_srq_init_attr *attr)) \
	X(modify_srq, ibv_modify_srq, int, (struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)) \
	X(destroy_srq, ibv_destroy_srq, int, (struct ibv_srq *srq)) \
	X(get_async_event, ibv_get_async_event, int, (struct ibv_context *ctx, struct ibv_async_event *ev)) \
	X(ack_async_event, ibv_ack_async_event, void, (struct ibv_async_event *ev)) \
	X(create_event_channel, rdma_create_event_channel, struct rdma_event_channel *, (void)) \
	X(destroy_event_channel, rdma_destroy_event_channel, void, (struct rdma_event_channel *ch)) \
	X(create_id, rdma_create_id, int, (struct rdma_event_channel *ch, struct rdma_cm_id **id, void *context, enum rdma_port_space ps)) \
	X(destroy_id, rdma_destroy_id, int, (struct rdma_cm_id *id)) \
	X(set_option, rdma_set_option, int, (struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen)) \
	X(bind_addr, rdma_bind_addr, int, (struct rdma_cm_id *id, struct sockaddr *addr)) \
	X(listen, rdma_listen, int, (struct rdma_cm_id *id, int backlog)) \
	X(resolve_addr, rdma_resolve_addr, int, (struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst, int timeout_ms)) \
	X(resolve_route, rdma_resolve_route, int, (struct rdma_cm_id *id, int timeout_ms)) \
	X(init_qp_attr, rdma_init_qp_attr, int, (struct rdma_cm_id *id, struct ibv_qp_attr *attr, int *mask)) \
	X(connect, rdma_connect, int, (struct rdma_cm_id *id, struct rdma_conn_param *p)) \
	X(accept, rdma_accept, int, (struct rdma_cm_id *id, struct rdma_conn_param *p)) \
	X(establish, rdma_establish, int, (struct rdma_cm_id *id)) \
	X(reject, rdma_reject, int, (struct rdma_cm_id *id, const void *pdata, uint8_t pdata_len)) \
	X(disconnect, rdma_disconnect, int, (struct rdma_cm_id *id)) \
	X(get_cm_event, rdma_get_cm_event, int, (struct rdma_event_channel *ch, struct rdma_cm_event **ev)) \
	X(ack_cm_event, rdma_ack_cm_event, int, (struct rdma_cm_event *ev)) \
	X(get_devices, rdma_get_devices, struct ibv_context **, (int *n)) \
	X(free_devices, rdma_free_devices, void, (struct ibv_context **list)) \
	X(create_ah, ibv_create_ah, struct ibv_ah *, (struct ibv_pd *pd, struct ibv_ah_attr *attr)) \
	X(destroy_ah, ibv_destroy_ah, int, (struct ibv_ah *ah)) \
	X(query_gid, ibv_query_gid, int, (struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)) \
	X(join_multicast, rdma_join_multicast, int, (struct rdma_cm_id *id, struct sockaddr *addr, void *context)) \
	X(join_multicast_ex, rdma_join_multicast_ex, int, (struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *attr, void *context)) \
	X(leave_multicast, rdma_leave_multicast, int, (struct rdma_cm_id *id, struct sockaddr *addr))
/* clang-format on */

#define RDMAMSG__OP_FIELD(field, sym, ret, args) ret(*field) args;

struct rdmamsg__ops {
	const char *name;
	RDMAMSG__OPS(RDMAMSG__OP_FIELD)
};

#endif /* RDMAMSG_DISPATCH_H */
