/* SPDX-License-Identifier: MIT */
/*
 * qpops.h -- per-QP-kind operations of softrdma's data path.
 *
 * Each QP carries qp->ops, one of the instances below, set when the QP is
 * created (by its type; mlx5dv_create_qp makes DC QPs) and switched where
 * the path is chosen (an RC QP aimed at another host's GID at INIT->RTR
 * runs over the network, and goes back to shared memory at RESET).  The
 * verbs entry points and the progress pass call qp->ops->x() and test no
 * QP type: a new kind (between hosts, an mlx5dv transport) is a new
 * instance in its own file, the RC path is untouched.
 */
#ifndef SOFT_QPOPS_H
#define SOFT_QPOPS_H

#include <infiniband/verbs.h>

struct soft_qp;

struct soft_qp_ops {
	const char *name;
	/* ibv_post_send, ibv_post_recv; the context lock is not held */
	int (*post_send)(struct soft_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad);
	int (*post_recv)(struct soft_qp *qp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad);
	/* how many more send WRs the queue takes now (ibv_wr_complete
	 * posts a batch whole or not at all); lock held.  NULL: the kind
	 * refuses every send anyway */
	uint32_t (*sq_room)(struct soft_qp *qp);
	/* the QP's share of a progress pass; lock held */
	void (*progress)(struct soft_qp *qp);
	/* completions due now (soft_qp_flush: post time, modify); lock held */
	void (*flush)(struct soft_qp *qp);
	/* the QP left SQD: the WRs held meanwhile run, in order; lock held */
	void (*sq_release)(struct soft_qp *qp);
	/* ibv_modify_qp, the whole state machine; lock not held.  The
	 * verbs types use the kernel's table (soft_qp_modify, qp.c) */
	int (*modify)(struct soft_qp *qp, struct ibv_qp_attr *attr, int mask);
	/* soft_qp_modify's INIT->RTR: the destination is known, the path is
	 * chosen here (it may switch qp->ops); lock held */
	void (*to_rtr)(struct soft_qp *qp);
	/* back to RESET (and at destroy): the kind's own queues; lock held */
	void (*reset)(struct soft_qp *qp);
	/* ibv_destroy_qp, once the QP is on no list; lock not held */
	void (*destroy)(struct soft_qp *qp);
	/* ibv_query_qp's attributes (cap and init_attr aside), 0 or an
	 * errno; lock held.  NULL: the attributes set so far and the state */
	int (*query)(struct soft_qp *qp, struct ibv_qp_attr *attr, int mask);
	/* its progress lives outside the doorbell (queues of its own, a
	 * network path, timers): every pass visits it */
	unsigned int always_pass : 1;
	/* a target of every initiator (DCT): an SRQ completion names its
	 * source QP, and an initiator's error does not move the QP to ERR */
	unsigned int any_src : 1;
};

/* RC over shared memory, and RC to another host (RoCE v2, net.c), which
 * shares RC's receive side and timers (data.c) */
extern const struct soft_qp_ops soft_rc_ops;
extern const struct soft_qp_ops soft_rc_net_ops;
/* UD and UC (ud.c) */
extern const struct soft_qp_ops soft_ud_ops;
extern const struct soft_qp_ops soft_uc_ops;
/* mlx5dv DC: initiator and target (dc.c) */
extern const struct soft_qp_ops soft_dci_ops;
extern const struct soft_qp_ops soft_dct_ops;

/* soft_qp_modify -- ibv_modify_qp by the kernel's qp_state_table (qp.c) */
int soft_qp_modify(struct soft_qp *qp, struct ibv_qp_attr *attr, int mask);
/* soft_qp_op_nop -- an operation the kind has nothing to do for */
void soft_qp_op_nop(struct soft_qp *qp);

#endif /* SOFT_QPOPS_H */
