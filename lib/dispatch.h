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
 */
struct rdmamsg__ops {
	const char *name;
	struct ibv_device **(*get_device_list)(int *n);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	int (*query_device)(struct ibv_context *ctx,
			    struct ibv_device_attr *attr);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len,
				 int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *c);
	int (*destroy_comp_channel)(struct ibv_comp_channel *cc);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe,
				    void *cq_context,
				    struct ibv_comp_channel *cc, int vec);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*get_cq_event)(struct ibv_comp_channel *cc, struct ibv_cq **cq,
			    void **cq_context);
	void (*ack_cq_events)(struct ibv_cq *cq, unsigned int n);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*get_async_event)(struct ibv_context *ctx,
			       struct ibv_async_event *ev);
	void (*ack_async_event)(struct ibv_async_event *ev);

	struct rdma_event_channel *(*create_event_channel)(void);
	void (*destroy_event_channel)(struct rdma_event_channel *ch);
	int (*create_id)(struct rdma_event_channel *ch, struct rdma_cm_id **id,
			 void *context, enum rdma_port_space ps);
	int (*destroy_id)(struct rdma_cm_id *id);
	int (*bind_addr)(struct rdma_cm_id *id, struct sockaddr *addr);
	int (*listen)(struct rdma_cm_id *id, int backlog);
	int (*resolve_addr)(struct rdma_cm_id *id, struct sockaddr *src,
			    struct sockaddr *dst, int timeout_ms);
	int (*resolve_route)(struct rdma_cm_id *id, int timeout_ms);
	int (*create_cm_qp)(struct rdma_cm_id *id, struct ibv_pd *pd,
			    struct ibv_qp_init_attr *attr);
	void (*destroy_cm_qp)(struct rdma_cm_id *id);
	int (*connect)(struct rdma_cm_id *id, struct rdma_conn_param *p);
	int (*accept)(struct rdma_cm_id *id, struct rdma_conn_param *p);
	int (*reject)(struct rdma_cm_id *id, const void *pdata,
		      uint8_t pdata_len);
	int (*disconnect)(struct rdma_cm_id *id);
	int (*get_cm_event)(struct rdma_event_channel *ch,
			    struct rdma_cm_event **ev);
	int (*ack_cm_event)(struct rdma_cm_event *ev);
	struct ibv_context **(*get_devices)(int *n);
	void (*free_devices)(struct ibv_context **list);
};

#endif /* RDMAMSG_DISPATCH_H */
