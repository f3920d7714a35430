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
 * enabled, and then qp's operations ops (its kind's on the network);
 * without one the QP keeps its own (its sends time out); ctx lock held */
void soft_net_connect(struct soft_qp *qp, const struct soft_qp_ops *ops);

/* soft_net_repath -- IB mode: the QP migrated (apm.c); its packets go to
 * the new primary path's addresses (iblink.c); ctx lock held */
void soft_net_repath(struct soft_qp *qp);

/* soft_net_release -- the QP leaves the network path (RESET, destroy);
 * ctx lock held */
void soft_net_release(struct soft_qp *qp);

/* soft_net_sq_room -- send WRs the network path's queue takes now; ctx
 * lock held */
uint32_t soft_net_sq_room(struct soft_qp *qp);

/* soft_net_post_send -- ibv_post_send on a QP of the network path; ctx
 * lock held */
int soft_net_post_send(struct soft_qp *qp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad);

/* soft_net_ops_post_send -- the post_send of every network path's
 * operations (an RC QP's, an XRC initiator's): soft_net_post_send under
 * the ctx lock; a QP whose operations changed meanwhile (a modify to RESET
 * on another thread) is posted to through its new ones */
int soft_net_ops_post_send(struct soft_qp *qp, struct ibv_send_wr *wr,
			   struct ibv_send_wr **bad);

/* soft_net_progress -- completions due now (ERR: flushes); ctx lock held */
void soft_net_progress(struct soft_qp *qp);

/* soft_net_sq_drained -- in SQD: nothing the QP began sending is still
 * waiting for its acknowledgement (SQ_DRAINED is due); ctx lock held */
int soft_net_sq_drained(struct soft_qp *qp);

/* soft_net_sq_release -- the QP left SQD: what was posted meanwhile is
 * sent now; ctx lock held */
void soft_net_sq_release(struct soft_qp *qp);

/* a UD datagram between hosts: what ud.c and net.c hand each other */
struct soft_net_ud {
	uint8_t sgid[16], dgid[16];
	uint32_t qpn;  /* destination QPN (send), source QPN (receive) */
	uint32_t qkey; /* already resolved (the high-bit rule applied) */
	uint32_t imm;  /* as in ibv_send_wr/ibv_wc: network order */
	int has_imm, solicited;
	uint8_t tclass, hop_limit;
	uint32_t flow_label; /* IPv6's */
	/* IB mode (the DETH's ROCE_DETH_IB_* byte): the sender's AV's SL,
	 * LID-routed (no GRH); receive: the LID of the source address */
	uint8_t sl;
	int no_grh;
	uint16_t slid;
	const void *data; /* receive: the payload */
	uint32_t len;
};

/* soft_net_ud_attach -- a UD QP in RTR also receives from other hosts
 * (SOFTRDMA_NET=1); ctx lock held */
void soft_net_ud_attach(struct soft_qp *qp);

/* soft_net_ud_send -- one datagram to another host as a RoCE v2 UD
 * SEND_ONLY(_WITH_IMM); 0 when it went out, -1 when it could not (the
 * datagram is then lost, as UD may lose it); to a multicast DGID (QPN
 * 0xFFFFFF) it goes to the group's IP address, from the interface of the
 * SGID; ctx lock held */
int soft_net_ud_send(struct soft_qp *qp, const struct soft_net_ud *d,
		     const struct iovec *iov, int niov);

/* soft_net_enabled -- SOFTRDMA_NET=1: other hosts are reached over RoCE v2 */
int soft_net_enabled(void);

/* soft_net_start -- the network path's sockets, agent and thread now (no
 * lock of ours held: starting the agent forks, and fork handlers take
 * the CM's lock); 0, or -1 when it cannot start or is not enabled */
int soft_net_start(void);

/* soft_net_mcast_attach -- a QP of this process is attached to the group
 * MGID: its host receives the group's packets from other hosts (agent:
 * IP_ADD_MEMBERSHIP with the host's first member), and the QP a copy of
 * each (SOFTRDMA_NET=1; else nothing) */
void soft_net_mcast_attach(struct soft_qp *qp, const uint8_t *mgid);

/* soft_net_mcast_detach -- QPN leaves MGID (NULL: every group) */
void soft_net_mcast_detach(uint32_t qpn, const uint8_t *mgid);

/* soft_net_sleeping -- an application thread armed a CQ to sleep on its
 * channel: the process polls only when woken, so our receive thread
 * watches the sockets (a poller's recent poll had left them to it), at
 * once and for the next 10 ms; no lock held */
void soft_net_sleeping(void);

/* soft_net_ctx_gone -- ibv_close_device, before CTX is freed: our
 * receive thread is not (or no longer) waiting for its lock; no lock held */
void soft_net_ctx_gone(struct soft_context *ctx);

/* soft_net_agent_main -- the host's agent (tests start it by hand) */
int soft_net_agent_main(void);

#endif /* SOFT_NET_H */
