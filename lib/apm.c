/* SPDX-License-Identifier: MIT */
/*
 * apm.c -- automatic path migration for RC endpoints (rdmamsg.h,
 * rdmamsg_ep_attr_set_apm).
 *
 * The seeds' APM flow, done by the library: with RDMAMSG_APM_AUTO an
 * endpoint whose device migrates paths (IBV_DEVICE_AUTO_PATH_MIG) and has
 * a second active InfiniBand port offers that port's LID in its handshake
 * (cm/handshake.h, RDMAMSG_HS_F_ALT); an accepting side answers with its
 * own offer only to an offer.  Once up, each side loads the alternate
 * path into its QP -- its other port to the peer's other LID, the primary
 * path's pkey index and timeout -- and arms it (IBV_MIG_REARM; the HCA
 * arms once the alternate is usable).  The HCA migrates by itself when
 * the primary fails: IBV_EVENT_PATH_MIG, upon which the paths swap here,
 * the old primary is loaded as the new alternate and re-armed, and the
 * application hears RDMAMSG_PATH_MIGRATED.  IBV_EVENT_PATH_MIG_ERR (the
 * alternate failed as well) is reported as RDMAMSG_PATH_MIG_FAILED; the
 * connection then lives or dies by its transport as without APM.
 *
 * The alternate is LID-routed (one subnet).  Nothing here touches the
 * data path: migration keeps the QP, its PSNs and everything in flight.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "internal.h"
#include "dispatch.h"
#include "lane.h"

/* qp_of -- an RC endpoint's QP, or NULL (DC, or none yet) */
static struct ibv_qp *qp_of(const struct rdmamsg_ep *ep)
{
	if (!ep->ln || ep->ln->ops != &rdmamsg__lane_rc_ops)
		return NULL;
	return ep->ln->qp;
}

/* other_port -- an active IB port of the device other than cur: its
 * number and LID; 0 if there is none or the device cannot migrate */
static int other_port(struct rdmamsg_ctx *ctx, uint8_t cur, uint8_t *port,
		      uint16_t *lid)
{
	struct ibv_port_attr pa;
	unsigned int p;

	if (!(ctx->dattr.device_cap_flags & IBV_DEVICE_AUTO_PATH_MIG))
		return 0;
	for (p = 1; p <= ctx->dattr.phys_port_cnt && p <= 255; p++) {
		if (p == cur || ibv_query_port(ctx->verbs, (uint8_t)p, &pa))
			continue;
		if (pa.state != IBV_PORT_ACTIVE ||
		    pa.link_layer != IBV_LINK_LAYER_INFINIBAND || !pa.lid ||
		    pa.lid >= 0xc000)
			continue;
		*port = (uint8_t)p;
		*lid = pa.lid;
		return 1;
	}
	return 0;
}

/* query -- the QP's primary path; 0 or -1 */
static int query(struct rdmamsg_ep *ep, struct ibv_qp *qp,
		 struct ibv_qp_attr *qa)
{
	struct ibv_qp_init_attr init;

	memset(qa, 0, sizeof(*qa));
	return ep->ctx->ops->query_qp(qp, qa,
				      IBV_QP_AV | IBV_QP_PORT |
					      IBV_QP_PKEY_INDEX |
					      IBV_QP_TIMEOUT,
				      &init)
		       ? -1
		       : 0;
}

/* rdmamsg__apm_offer -- the LID this endpoint offers as its alternate
 * (0: none) in a handshake that then has room for user_room application
 * bytes; on the accepting side only in answer to an offer */
uint16_t rdmamsg__apm_offer(struct rdmamsg_ep *ep, size_t user_room)
{
	struct ibv_qp_attr qa;
	struct ibv_qp *qp = qp_of(ep);

	ep->apm.my_alt_lid = 0;
	if (ep->p.apm != RDMAMSG_APM_AUTO || !qp ||
	    (ep->passive && !ep->apm.peer_alt_lid))
		return 0;
	if (ep->p.pdata_len > user_room) {
		LOG_NOTE("endpoint %p: no APM offer: %u bytes of private data "
			 "leave no room for it",
			 (void *)ep, ep->p.pdata_len);
		return 0;
	}
	if (query(ep, qp, &qa))
		return 0;
	if (!other_port(ep->ctx, qa.port_num, &ep->apm.alt_port,
			&ep->apm.my_alt_lid))
		LOG_INFO("endpoint %p: no APM here (no second IB port, or "
			 "the device cannot migrate)",
			 (void *)ep);
	return ep->apm.my_alt_lid;
}

/* load -- load (port, ah) as qp's alternate path, with the pkey index and
 * timeout of the primary in qa, and arm it; 0 or a negative errno */
static int load(struct rdmamsg_ep *ep, struct ibv_qp *qp,
		struct ibv_qp_attr *qa, uint8_t port,
		const struct ibv_ah_attr *ah)
{
	qa->alt_ah_attr = *ah;
	qa->alt_port_num = port;
	qa->alt_pkey_index = qa->pkey_index;
	qa->alt_timeout = qa->timeout;
	qa->path_mig_state = IBV_MIG_REARM;
	if (ep->ctx->ops->modify_qp(qp, qa,
				    IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE))
		return rdmamsg__errno(EINVAL);
	return 0;
}

/* rdmamsg__apm_up -- connected: load and arm the alternate path if both
 * sides offered one */
void rdmamsg__apm_up(struct rdmamsg_ep *ep)
{
	struct ibv_qp_attr qa;
	struct ibv_qp *qp = qp_of(ep);
	int ret;

	ep->pstats.apm = 0;
	ep->apm.port = 0; /* the id's port (rdmamsg__apm_port) until loaded */
	if (!qp || !ep->apm.my_alt_lid || !ep->apm.peer_alt_lid)
		return;
	if (query(ep, qp, &qa)) {
		LOG_WARN("endpoint %p: APM: ibv_query_qp failed", (void *)ep);
		return;
	}
	ep->apm.port = qa.port_num;
	ep->apm.ah = qa.ah_attr;
	/* the primary's, but LID-routed (one subnet) to the peer's offer */
	ep->apm.alt_ah = qa.ah_attr;
	ep->apm.alt_ah.is_global = 0;
	ep->apm.alt_ah.dlid = ep->apm.peer_alt_lid;
	ep->apm.alt_ah.port_num = ep->apm.alt_port;
	ret = load(ep, qp, &qa, ep->apm.alt_port, &ep->apm.alt_ah);
	if (ret) {
		LOG_WARN("endpoint %p: loading the alternate path (port %u "
			 "to LID %u) failed: %d",
			 (void *)ep, ep->apm.alt_port, ep->apm.peer_alt_lid,
			 ret);
		return;
	}
	ep->pstats.apm = 1;
	LOG_INFO("endpoint %p: alternate path loaded: port %u to LID %u "
		 "(primary: port %u)",
		 (void *)ep, ep->apm.alt_port, ep->apm.peer_alt_lid,
		 ep->apm.port);
}

/* migrated -- the HCA moved ep to its alternate path: swap, and load the
 * old primary as the new alternate */
static void migrated(struct rdmamsg_ep *ep, struct ibv_qp *qp)
{
	struct ibv_ah_attr ah = ep->apm.ah;
	struct ibv_qp_attr qa;
	uint8_t port = ep->apm.port;

	ep->apm.port = ep->apm.alt_port;
	ep->apm.ah = ep->apm.alt_ah;
	ep->apm.alt_port = port;
	ep->apm.alt_ah = ah;
	ep->pstats.migrations++;
	if (query(ep, qp, &qa) || load(ep, qp, &qa, port, &ah)) {
		LOG_WARN("endpoint %p: re-arming APM after a migration "
			 "failed: no alternate path now",
			 (void *)ep);
		ep->pstats.apm = 0;
	}
}

/* rdmamsg__apm_port -- the device port ep's connection uses now: its
 * primary path's once APM loaded an alternate (a migration moves it),
 * else the one rdma_cm bound its id to; 0 if none */
uint8_t rdmamsg__apm_port(const struct rdmamsg_ep *ep)
{
	if (ep->apm.port)
		return ep->apm.port;
	return ep->id ? ep->id->port_num : 0;
}

/* rdmamsg__apm_event -- IBV_EVENT_PATH_MIG or _PATH_MIG_ERR on qp (an
 * endpoint's of ctx, or nothing of ours) */
void rdmamsg__apm_event(struct rdmamsg_ctx *ctx, enum ibv_event_type type,
			struct ibv_qp *qp)
{
	struct rdmamsg__list *pos, *tmp;

	list_for_each_safe (pos, tmp, &ctx->eps) {
		struct rdmamsg_ep *ep =
			container_of(pos, struct rdmamsg_ep, link);
		enum rdmamsg_path_event ev = RDMAMSG_PATH_MIGRATED;
		int status = 0;

		if (!qp || qp_of(ep) != qp)
			continue;
		if (!ep->pstats.apm)
			return; /* no alternate loaded: not ours to re-arm */
		if (type == IBV_EVENT_PATH_MIG) {
			migrated(ep, qp);
		} else {
			ep->pstats.mig_fails++;
			ev = RDMAMSG_PATH_MIG_FAILED;
			status = -ENETDOWN;
		}
		LOG_NOTE("endpoint %p: %s (now port %u)", (void *)ep,
			 ev == RDMAMSG_PATH_MIGRATED ? "path migrated"
						     : "path migration failed",
			 ep->apm.port);
		/* last: the callback may close the endpoint */
		if (ep->p.path_cb)
			ep->p.path_cb(ep, ev, ep->apm.port, status, ep->arg);
		return;
	}
}
