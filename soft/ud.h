/* SPDX-License-Identifier: MIT */
/* ud.h -- UD, UC and multicast data paths (soft/ud.c), hooks for qp.c/data.c */
#ifndef SOFT_UD_H
#define SOFT_UD_H

#include "softrdma.h"

/* port active MTU: the largest UD payload, the size of one queue cell */
#define SOFT_UD_MTU	     4096
#define SOFT_MCAST_GRP	     256
#define SOFT_MCAST_QP_ATT    64
#define SOFT_MCAST_TOTAL     4096
#define SOFT_UD_CREATE_FLAGS IBV_QP_CREATE_BLOCK_SELF_MCAST_LB

/* soft_ud_seg_extra -- bytes a UD/UC QP adds to its shm segment */
size_t soft_ud_seg_extra(const struct ibv_qp_init_attr_ex *attr);
/* soft_ud_create -- set up qp->ud after the segment exists; -1 + errno */
int soft_ud_create(struct soft_qp *qp, const struct ibv_qp_init_attr_ex *attr);
/* soft_ud_destroy -- detach from every group, unmap, free */
void soft_ud_destroy(struct soft_qp *qp);
/* soft_ud_reset -- QP back to RESET: queues emptied; ctx lock held */
void soft_ud_reset(struct soft_qp *qp);
/* soft_ud_flush -- completions due now (ERR flushes receives); lock held */
void soft_ud_flush(struct soft_qp *qp);
/* soft_ud_progress -- drain the inbound queue; ctx lock held */
void soft_ud_progress(struct soft_qp *qp);
int soft_ud_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad);
int soft_ud_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad);

#endif /* SOFT_UD_H */
