/* SPDX-License-Identifier: MIT */
/*
 * apm.c -- InfiniBand ports and automatic path migration (SOFTRDMA_LINK=ib)
 *
 * In the IB mode the device has two ports.  Their links are host-wide:
 * one word of the registry holds which are down, set by
 * softrdma_port_set_state() (the test hook that pulls a cable).  Every
 * context reports a change once, as IBV_EVENT_PORT_ERR / PORT_ACTIVE, on
 * its next progress pass; ibv_query_port() reads the word itself.
 *
 * A path is (local port, destination port): the QP's port_num and the
 * port its AV's DLID (or port GID) names.  It is down when either link
 * is.  An RC QP whose primary path is down moves nothing (softrdma's
 * transport is the shared ring: messages wait in it, and nothing is lost
 * or repeated while they wait).  Then, as an HCA does:
 *  - ARMED with the alternate path up: the QP migrates (primary and
 *    alternate swap, MIGRATED, IBV_EVENT_PATH_MIG) and traffic resumes
 *    on the new path where it stopped;
 *  - ARMED with the alternate down too: IBV_EVENT_PATH_MIG_ERR, back to
 *    REARM (it re-arms when the alternate's link returns);
 *  - no armed alternate: the transport timer runs, and the head WQE fails
 *    with IBV_WC_RETRY_EXC_ERR after 4.096 us * 2^timeout * (retry_cnt+1)
 *    unless the link comes back first.
 * IBV_MIG_REARM arms at once when an alternate path is loaded and up (an
 * HCA arms once the alternate answers), otherwise when it comes up.
 * ibv_modify_qp(path_mig_state = MIGRATED) in RTS migrates by hand.
 * Both ends of a connection see the same links, so both migrate.
 *
 * Between hosts (SOFTRDMA_NET=1, each port on a rail: iblink.c) the RC
 * transport is net.c's, and a cut rail shows as silence, as on a fabric:
 *  - the requester's retries run out on the primary path (4.096 us *
 *    2^timeout * (retry_cnt + 1)): ARMED, it migrates (IBV_EVENT_PATH_MIG)
 *    and sends again from the oldest unacknowledged PSN on the alternate
 *    path, retries counted afresh; nothing is lost or repeated, the PSNs
 *    carry over;
 *  - the responder migrates when a packet of its peer with MigReq set
 *    (the BTH's M bit: the sender is MIGRATED, or migrated and not yet
 *    heard on its new path) comes on its alternate path (from the peer's
 *    alternate address to ours) while it is ARMED (IBV_EVENT_PATH_MIG);
 *    any other packet on a path that is not the QP's is dropped (one
 *    sent on the old path before the peer migrated and delivered late,
 *    for instance);
 *  - when the retries run out again before anything of the peer came on
 *    the path it migrated to (both rails cut), or with the alternate's
 *    link down, an
 *    ARMED QP reports IBV_EVENT_PATH_MIG_ERR (back to REARM) and the WQE
 *    fails with IBV_WC_RETRY_EXC_ERR, as without an alternate.
 * A port's link is down when its interface is (no carrier) or the
 * registry's word says so (the test hook); the path's far port is the
 * far host's, which this host cannot see: silence tells.
 *
 * In the default (RoCE) mode IBV_QP_ALT_PATH is refused with EINVAL, as
 * the kernel does for RoCE ports ("Ban them in roce mode",
 * drivers/infiniband/core/verbs.c).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "net.h"
#include "softrdma.h"

SOFT_EXPORT int softrdma_port_set_state(struct ibv_context *context,
					uint8_t port_num, int up);

/* soft_port_up -- the link of a local port is up */
int soft_port_up(uint32_t port)
{
	if (!soft_link_ib || !soft_reg)
		return 1;
	return !((atomic_load_explicit(&soft_reg->port_down,
				       memory_order_acquire) |
		  soft_ib_if_down()) &
		 (1u << port));
}

/* softrdma_port_set_state -- test hook: take a port's link down (up 0)
 * or bring it back (IB mode only) */
int softrdma_port_set_state(struct ibv_context *context, uint8_t port_num,
			    int up)
{
	struct soft_context *ctx;

	if (!context || !soft_link_ib || !soft_port_ok(port_num))
		return EINVAL;
	ctx = to_sctx(context);
	if (up)
		atomic_fetch_and(&soft_reg->port_down, ~(1u << port_num));
	else
		atomic_fetch_or(&soft_reg->port_down, 1u << port_num);
	soft_lock(&ctx->lock);
	soft_port_poll(ctx);
	soft_unlock(&ctx->lock);
	return 0;
}

/* soft_port_poll -- report link changes since the last pass; lock held */
void soft_port_poll(struct soft_context *ctx)
{
	uint32_t m, diff, p;

	m = atomic_load_explicit(&soft_reg->port_down, memory_order_acquire) |
	    soft_ib_if_down(); /* between hosts: the rails (iblink.c) */
	diff = m ^ ctx->port_seen;
	if (!diff)
		return;
	ctx->port_seen = m;
	if (ctx->owner_pid != soft_self_pid)
		return; /* a forked child's inherited context: its parent's */
	for (p = 1; p <= SOFT_IB_PORTS; p++)
		if (diff & (1u << p))
			soft_port_event(ctx,
					m & (1u << p) ? IBV_EVENT_PORT_ERR
						      : IBV_EVENT_PORT_ACTIVE,
					p);
}

/* ah_port -- the destination port an AV names (0: not a port of ours) */
static int ah_port(const struct ibv_ah_attr *ah)
{
	int p = soft_lid_port(ah->dlid);

	if (!p && ah->is_global)
		p = soft_gid_port(&ah->grh.dgid);
	return p;
}

/* path_up -- local port and destination port both up */
static int path_up(uint32_t port, const struct ibv_ah_attr *ah)
{
	int d = ah_port(ah);

	return soft_port_up(port) && (!d || soft_port_up((uint32_t)d));
}

/* check_ah -- an AV this device accepts on an IB port */
static int check_ah(const struct ibv_ah_attr *ah)
{
	if (ah->port_num && !soft_port_ok(ah->port_num))
		return -1;
	if (ah->is_global && ah->grh.sgid_index >= (unsigned)soft_gid_count())
		return -1;
	if (!ah->is_global && (!ah->dlid || ah->dlid >= 0xc000))
		return -1; /* LID-routed: a unicast DLID */
	return 0;
}

/*
 * soft_apm_check_values -- the port, AV and APM attributes of a modify;
 * 0 or -1 (EINVAL).  The transition table has already allowed the mask.
 */
int soft_apm_check_values(struct soft_qp *qp, const struct ibv_qp_attr *a,
			  int mask, enum ibv_qp_state cur,
			  enum ibv_qp_state next)
{
	(void)next; /* the table (qp.c) allowed the mask for it */
	if (!soft_link_ib)
		return (mask & IBV_QP_ALT_PATH) ? -1 : 0;
	if ((mask & IBV_QP_PORT) && !soft_port_ok(a->port_num))
		return -1;
	/* the primary AV names its port (the kernel's modify_qp refuses
	 * port 0); the alternate AV's is not held to alt_port_num as there,
	 * since the seeds' load_alt_path keeps the primary's in it */
	if ((mask & IBV_QP_AV) &&
	    (!soft_port_ok(a->ah_attr.port_num) || check_ah(&a->ah_attr)))
		return -1;
	if (mask & IBV_QP_ALT_PATH) {
		if (!soft_port_ok(a->alt_port_num) || a->alt_pkey_index != 0 ||
		    a->alt_timeout > 31 || check_ah(&a->alt_ah_attr))
			return -1;
	}
	if (!(mask & IBV_QP_PATH_MIG_STATE))
		return 0;
	switch (a->path_mig_state) {
	case IBV_MIG_REARM:
		return 0;
	case IBV_MIG_ARMED: /* arming by hand needs an alternate path */
		return (mask & IBV_QP_ALT_PATH) || qp->alt_valid ? 0 : -1;
	case IBV_MIG_MIGRATED:
		/* RTR->RTS sets the initial state; later it is a migration
		 * request, which only an armed QP can take */
		if (cur == IBV_QPS_RTR)
			return 0;
		return qp->attr.path_mig_state == IBV_MIG_ARMED &&
				       !(mask & IBV_QP_ALT_PATH)
			       ? 0
			       : -1;
	default:
		return -1;
	}
}

/* migrate -- the alternate path becomes the primary; lock held */
static void migrate(struct soft_qp *qp)
{
	struct ibv_qp_attr *a = &qp->attr;
	struct ibv_ah_attr ah = a->ah_attr;
	uint8_t port = a->port_num, tmo = a->timeout;
	uint16_t pkey = a->pkey_index;

	a->ah_attr = a->alt_ah_attr;
	a->port_num = a->alt_port_num;
	a->pkey_index = a->alt_pkey_index;
	a->timeout = a->alt_timeout;
	a->alt_ah_attr = ah;
	a->alt_port_num = port;
	a->alt_pkey_index = pkey;
	a->alt_timeout = tmo;
	a->path_mig_state = IBV_MIG_MIGRATED;
	/* the old primary stays loaded as the alternate: REARM arms it once
	 * its link is up */
	qp->path_down = 0;
	qp->dead_since = 0;
	if (qp->net) { /* between hosts: the new addresses (net.c) */
		qp->mig_unacked = 1; /* until the peer is heard on it */
		soft_net_repath(qp);
	}
	soft_async_event(qp->ctx, IBV_EVENT_PATH_MIG, &qp->qpx.qp_base);
}

/* try_arm -- REARM -> ARMED when the alternate is loaded and up */
static void try_arm(struct soft_qp *qp)
{
	if (qp->attr.path_mig_state == IBV_MIG_REARM && qp->alt_valid &&
	    path_up(qp->attr.alt_port_num, &qp->attr.alt_ah_attr))
		qp->attr.path_mig_state = IBV_MIG_ARMED;
}

/* peer_follow -- the peer migrated by hand (a MigReq): an armed QP
 * migrates too, as a responder does on a packet with MigReq set coming
 * on its alternate path.  Both counts start at 0 at RESET. */
static void peer_follow(struct soft_qp *qp)
{
	uint32_t m;

	if (!qp->peer)
		return;
	m = atomic_load_explicit(&qp->peer->mig_req, memory_order_acquire);
	if (m == qp->mig_seen)
		return;
	qp->mig_seen = m;
	if (qp->attr.path_mig_state == IBV_MIG_ARMED &&
	    path_up(qp->attr.alt_port_num, &qp->attr.alt_ah_attr))
		migrate(qp);
}

/* soft_apm_mig -- IBV_QP_PATH_MIG_STATE of a modify that check_values
 * let through; after the alternate path was stored; lock held */
void soft_apm_mig(struct soft_qp *qp, enum ibv_mig_state want,
		  enum ibv_qp_state cur)
{
	if (want != IBV_MIG_MIGRATED) { /* REARM, ARMED: armed once it is up */
		qp->attr.path_mig_state = IBV_MIG_REARM;
		try_arm(qp);
	} else if (cur == IBV_QPS_RTR) { /* the initial state */
		qp->attr.path_mig_state = IBV_MIG_MIGRATED;
	} else if (qp->attr.path_mig_state == IBV_MIG_ARMED) {
		migrate(qp); /* by hand: the peer follows if it is armed */
		atomic_fetch_add_explicit(&qp->seg->mig_req, 1,
					  memory_order_release);
	}
}

/* soft_apm_check -- one RC QP's links on a progress pass; lock held */
int soft_apm_check(struct soft_qp *qp)
{
	if (qp->state < IBV_QPS_RTR || qp->state == IBV_QPS_ERR) {
		qp->path_down = 0;
		return 0;
	}
	try_arm(qp);
	peer_follow(qp);
	if (path_up(qp->attr.port_num, &qp->attr.ah_attr)) {
		qp->path_down = 0;
		return 0;
	}
	if (qp->attr.path_mig_state == IBV_MIG_ARMED) {
		if (path_up(qp->attr.alt_port_num, &qp->attr.alt_ah_attr)) {
			migrate(qp);
			return 0;
		}
		qp->attr.path_mig_state = IBV_MIG_REARM;
		soft_async_event(qp->ctx, IBV_EVENT_PATH_MIG_ERR,
				 &qp->qpx.qp_base);
	}
	qp->path_down = 1;
	return 1;
}

/* soft_apm_timeout -- between hosts: the requester's retries ran out on
 * its primary path; lock held */
int soft_apm_timeout(struct soft_qp *qp)
{
	if (qp->attr.path_mig_state != IBV_MIG_ARMED)
		return 0;
	if (!qp->mig_unacked &&
	    path_up(qp->attr.alt_port_num, &qp->attr.alt_ah_attr)) {
		migrate(qp);
		return 1;
	}
	/* the alternate failed too: no answer on it since we migrated to
	 * it, or its link is down */
	qp->attr.path_mig_state = IBV_MIG_REARM;
	soft_async_event(qp->ctx, IBV_EVENT_PATH_MIG_ERR, &qp->qpx.qp_base);
	return 0;
}

/* soft_apm_follow -- between hosts: a packet of the peer came on the
 * alternate path; an armed responder migrates; lock held */
int soft_apm_follow(struct soft_qp *qp)
{
	if (qp->state < IBV_QPS_RTR || qp->state == IBV_QPS_ERR ||
	    qp->attr.path_mig_state != IBV_MIG_ARMED ||
	    !soft_port_up(qp->attr.alt_port_num))
		return 0;
	migrate(qp);
	return 1;
}

/* soft_apm_migreq -- between hosts: the BTH's MigReq bit, set in the
 * MIGRATED state as an HCA sets it (rxe: path_mig_state MIGRATED), and
 * after a migration until the peer is heard on the new path (re-arming
 * at once must not hide the migration from the responder) */
int soft_apm_migreq(const struct soft_qp *qp)
{
	return qp->attr.path_mig_state == IBV_MIG_MIGRATED || qp->mig_unacked;
}
