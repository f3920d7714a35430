/* SPDX-License-Identifier: MIT */
/*
 * net.h -- softrdma between hosts: RC over RoCE v2 (UDP port 4791).
 *
 * The transport boundary: a QP whose destination GID is not one of this
 * host's is carried by the network path (net.c) when SOFTRDMA_NET=1;
 * otherwise it stays an unreachable path (RETRY_EXC after its timeout),
 * as before.  The hooks in the shared-memory path are these calls only.
 */
#ifndef SOFT_NET_H
#define SOFT_NET_H

#include "softrdma.h"

/* soft_net_connect -- RTR towards a foreign GID: the network path, if
 * enabled; ctx lock held */
void soft_net_connect(struct soft_qp *qp);

/* soft_net_release -- the QP leaves the network path (RESET, destroy);
 * ctx lock held */
void soft_net_release(struct soft_qp *qp);

/* soft_net_post_send -- ibv_post_send on a QP of the network path; ctx
 * lock held */
int soft_net_post_send(struct soft_qp *qp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad);

/* soft_net_progress -- completions due now (ERR: flushes); ctx lock held */
void soft_net_progress(struct soft_qp *qp);

/* soft_net_agent_main -- the host's agent (tests start it by hand) */
int soft_net_agent_main(void);

#endif /* SOFT_NET_H */
