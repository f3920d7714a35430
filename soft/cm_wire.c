/* SPDX-License-Identifier: MIT */
/* cm_wire.c -- softrdma's librdmacm: validation of CM messages from peers */
#include "config.h"

#include <errno.h>
#include <arpa/inet.h>

#include "cm_internal.h"

/*
 * Pure functions (no socket, no lock, no global state): the CM calls them
 * on every message it reads, and tests/fuzz/soft_cm.c calls them on
 * arbitrary bytes.
 */

/* scm__wire_pdata_max -- private data a message of this kind may carry */
size_t scm__wire_pdata_max(const struct scm_wire *w)
{
	int ud = w->qp_type == IBV_QPT_UD;
	size_t field;

	switch (w->type) {
	case SCM_MSG_REQ:
		field = ud ? SCM_SIDR_REQ_PDATA : SCM_REQ_PDATA;
		/* PS_IB carries no CMA header */
		return ntohs(w->ps) == RDMA_PS_IB ? field : field - SCM_CMA_HDR;
	case SCM_MSG_REP:
		return ud ? SCM_SIDR_REP_PDATA : SCM_REP_PDATA;
	case SCM_MSG_REJ:
		return SCM_REJ_PDATA;
	default:
		return 0; /* RTU, DREQ, DREP: rdma_cm sends none */
	}
}

/* scm_valid_conn -- the connection fields of a REQ or REP */
static int scm_valid_conn(const struct scm_wire *w)
{
	if (w->qp_type != IBV_QPT_RC && w->qp_type != IBV_QPT_UC &&
	    w->qp_type != IBV_QPT_UD && w->qp_type != IBV_QPT_XRC_SEND &&
	    w->qp_type != IBV_QPT_XRC_RECV)
		return 0;
	switch (ntohs(w->ps)) {
	case RDMA_PS_TCP:
	case RDMA_PS_UDP:
	case RDMA_PS_IB:
	case RDMA_PS_IPOIB:
		break;
	default:
		return 0;
	}
	/* QPNs and PSNs are 24-bit; 0xffffff is the multicast QPN */
	if (ntohl(w->qpn) >= 0xffffff || ntohl(w->psn) > 0xffffff)
		return 0;
	if (w->mtu > IBV_MTU_4096 || w->retry_count > 7 ||
	    w->rnr_retry_count > 7 || w->flow_control > 1 || w->srq > 1)
		return 0;
	return 1;
}

/* scm__wire_check -- 0 if every field of w may be used, else -errno */
int scm__wire_check(const struct scm_wire *w)
{
	if (w->magic != SCM_WIRE_MAGIC)
		return -EPROTO;
	switch (w->type) {
	case SCM_MSG_REQ:
	case SCM_MSG_REP:
		if (!scm_valid_conn(w))
			return -EPROTO;
		break;
	case SCM_MSG_REJ:
	case SCM_MSG_RTU:
	case SCM_MSG_DREQ:
	case SCM_MSG_DREP:
		break;
	default:
		return -EPROTO;
	}
	if (w->pdata_len > scm__wire_pdata_max(w))
		return -EMSGSIZE;
	return 0;
}
