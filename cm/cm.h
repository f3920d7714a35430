/* SPDX-License-Identifier: MIT */
/* cm.h -- what conn.c (events, active side) and listen.c (listener,
 * connection requests) share.  Private. */
#ifndef RDMAMSG_CM_H
#define RDMAMSG_CM_H

#include "internal.h"

struct cm_ev {
	enum rdma_cm_event_type type;
	int status;
	struct rdma_cm_id *id;
	struct rdma_cm_id *listen_id;
	uint8_t pdata[256];
	size_t pdata_len;
};

void rdmamsg__cm_conn_param(struct rdma_conn_param *cp,
			    const struct rdmamsg_ctx *ctx, const uint8_t *pdata,
			    size_t len);
/* a session QP's local ACK timeout: 4.096 us x 2^17 = 537 ms (conn.c) */
#define RDMAMSG__SESSION_ACK_TIMEOUT 17
void rdmamsg__cm_qp_opts(const struct rdmamsg_ep *ep);
size_t rdmamsg__cm_our_hs(struct rdmamsg_ep *ep, int kind, uint8_t *out);
void rdmamsg__cm_qp_param(const struct rdmamsg_ep *ep,
			  struct rdma_conn_param *cp);
int rdmamsg__cm_accept(struct rdmamsg_ep *ep, int kind);
int rdmamsg__cm_dc_hs_ok(const struct rdmamsg__hs *hs);
void rdmamsg__cm_conn_request(struct rdmamsg_ctx *ctx, const struct cm_ev *e);

#endif /* RDMAMSG_CM_H */
