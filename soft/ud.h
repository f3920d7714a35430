/* SPDX-License-Identifier: MIT */
/* ud.h -- UD, UC and multicast data paths (soft/ud.c), hooks for qp.c */
#ifndef SOFT_UD_H
#define SOFT_UD_H

#include <sys/uio.h>

#include "softrdma.h"

/* port active MTU: the largest UD payload, the size of one queue cell */
#define SOFT_UD_MTU	     4096
#define SOFT_MCAST_GRP	     256
#define SOFT_MCAST_QP_ATT    64
#define SOFT_MCAST_TOTAL     4096
#define SOFT_UD_CREATE_FLAGS IBV_QP_CREATE_BLOCK_SELF_MCAST_LB

struct ud_cell; /* a message in a UD/UC queue (ud.c) */
struct ud_peer; /* a mapped peer queue (ud.c) */

/* soft_robust_init -- a process-shared robust mutex */
int soft_robust_init(pthread_mutex_t *m);
/* soft_ud_gid_is_mcast -- IPv6 multicast or IPv4-mapped class D */
int soft_ud_gid_is_mcast(const uint8_t *g);
/* soft_ud_peer -- the queue of a receiving QP of this type, or NULL */
struct ud_peer *soft_ud_peer(struct soft_ud *u, uint32_t qpn, uint32_t type,
			     uint32_t *ctx_idx);
/* a sender's UD datagram as placed into posted receives: the sender's
 * context (locked, its mappings of peers' memory) and the GRH, built at
 * the first receive it is placed into and copied into the others */
struct soft_ud_src {
	struct soft_context *ctx;
	int grh_built;
	uint8_t grh[40];
};

/* soft_ud_enqueue -- append a message to a peer queue (or drop it); with
 * src, a UD datagram goes straight into the posted receive's buffer where
 * it can */
int soft_ud_enqueue(struct ud_peer *p, struct ud_cell *h,
		    const struct iovec *iov, int niov, uint32_t ctx_idx,
		    int may_wait, struct soft_ud_src *src);

/* soft_ud_net_input -- a datagram from another host (net.c) into the QP's
 * own queue; the receive checks are those of a local datagram */
struct soft_net_ud;
void soft_ud_net_input(struct soft_qp *qp, const struct soft_net_ud *d);

/* mcast.c: send to a group (the members found), a QP's last leave */
struct soft_mc_cache; /* a sending QP's copy of a group's members */
uint32_t soft_mcast_send(struct soft_ud *u, struct soft_context *ctx,
			 struct soft_mc_cache **cache, const uint8_t *mgid,
			 int block, struct ud_cell *h, const struct iovec *iov,
			 int niov);
void soft_mcast_cache_free(struct soft_mc_cache **cache);
void soft_mcast_forget_qp(uint32_t qpn);

/* soft_ud_seg_extra -- bytes a UD/UC QP adds to its shm segment */
size_t soft_ud_seg_extra(const struct ibv_qp_init_attr_ex *attr);
/* soft_ud_create -- set up qp->ud after the segment exists; -1 + errno */
int soft_ud_create(struct soft_qp *qp, const struct ibv_qp_init_attr_ex *attr);
/* the data path itself: soft_ud_ops and soft_uc_ops (qpops.h) */

#endif /* SOFT_UD_H */
