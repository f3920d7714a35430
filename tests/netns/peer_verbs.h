/* SPDX-License-Identifier: MIT */
/* peer_verbs.h -- verbs steps the namespace peers (rc_ip_peer,
 * ud_grh_peer, ud_lid_peer, ud_mtu_peer) share */
#ifndef RDMAMSG_PEER_VERBS_H
#define RDMAMSG_PEER_VERBS_H

#include <infiniband/verbs.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* find_gid -- the index of port 1's first GID that starts with pfx (n
 * bytes), or -1 */
static inline int find_gid(struct ibv_context *ctx, const uint8_t *pfx,
			   size_t n)
{
	struct ibv_port_attr pa;
	union ibv_gid g;
	int i;

	if (ibv_query_port(ctx, 1, &pa))
		return -1;
	for (i = 0; i < pa.gid_tbl_len; i++)
		if (!ibv_query_gid(ctx, 1, i, &g) && !memcmp(g.raw, pfx, n))
			return i;
	return -1;
}

/* ud_qp_up -- a UD QP from RESET to RTS on port 1 with Q_Key qkey: 0,
 * or -1 when a step fails */
static inline int ud_qp_up(struct ibv_qp *qp, uint32_t qkey)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = qkey;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) ? -1 : 0;
}

/* wait_wc -- poll until n completions or ms elapse; the count (-1: the
 * poll failed) */
static inline int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, int n, int ms)
{
	struct timespec t0, t;
	int got = 0, r;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		r = ibv_poll_cq(cq, n - got, wc + got);
		if (r < 0)
			return -1;
		got += r;
		if (got == n)
			return got;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 +
			    (t.tv_nsec - t0.tv_nsec) / 1000000 >=
		    ms)
			return got;
	}
}

#endif
