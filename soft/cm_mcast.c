/* SPDX-License-Identifier: MIT */
/* cm_mcast.c -- softrdma's librdmacm: multicast groups of UD ids */
#include "config.h"
#include "softrdma.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include "cm_internal.h"

/*
 * On RoCE the CM has no SA to ask: a join maps the group's IP address to
 * its GID (IPv4-mapped for IPv4) and reports MULTICAST_JOIN at once;
 * librdmacm then attaches the id's QP when the event is taken.  Moving the
 * datagrams is the verbs side's business (ibv_attach_mcast).
 */

SOFT_EXPORT int rdma_join_multicast(struct rdma_cm_id *id,
				    struct sockaddr *addr, void *context);
SOFT_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id,
				       struct rdma_cm_join_mc_attr_ex *attr,
				       void *context);
SOFT_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id,
				     struct sockaddr *addr);

/* scm_is_mcast -- an IPv4 or IPv6 multicast address? */
static int scm_is_mcast(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return IN_MULTICAST(ntohl(
			((const struct sockaddr_in *)sa)->sin_addr.s_addr));
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_MULTICAST(
			&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return 0;
}

/* scm_mc_find -- the group of s joined at addr (the latest join first):
 * the whole socket address, port and padding too, as librdmacm's
 * rdma_leave_multicast compares it (memcmp of its length) */
static struct scm_mc **scm_mc_find(struct scm_id *s, const struct sockaddr *a)
{
	struct scm_mc **pp;
	socklen_t len = scm__addr_len(a);

	for (pp = &s->mcs; *pp; pp = &(*pp)->next)
		if (!memcmp(&(*pp)->addr, a, len))
			return pp;
	return pp;
}

/* scm_join -- record the group and report the join */
static int scm_join(struct rdma_cm_id *id, struct sockaddr *addr,
		    uint32_t flags, void *context)
{
	struct scm_id *s = scm_id_of(id);
	struct scm_event *e;
	struct scm_mc *mc;
	socklen_t len = scm__addr_len(addr);
	int err = 0, sync;

	if (!len || !scm_is_mcast(addr))
		return scm_err(EINVAL);
	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return scm_err(ENOMEM);
	memcpy(&mc->addr, addr, len);
	scm__addr_gid(addr, &mc->mgid);
	mc->context = context;
	mc->join_flags = flags;
	pthread_mutex_lock(&scm__lock);
	if (id->qp_type != IBV_QPT_UD || !id->verbs ||
	    (s->state != SCM_ADDR_BOUND && s->state != SCM_ADDR_RESOLVED)) {
		err = EINVAL;
		goto unlock;
	}
	e = scm__post(s, s, RDMA_CM_EVENT_MULTICAST_JOIN, 0, NULL, 0, 0);
	if (!e) {
		err = ENOMEM;
		goto unlock;
	}
	e->mc = mc;
	e->ev.param.ud.private_data = context;
	e->ev.param.ud.private_data_len = 0;
	e->ev.param.ud.ah_attr.is_global = 1;
	e->ev.param.ud.ah_attr.grh.dgid = mc->mgid;
	e->ev.param.ud.ah_attr.grh.sgid_index = (uint8_t)s->sgid_index;
	e->ev.param.ud.ah_attr.grh.hop_limit = 64;
	e->ev.param.ud.ah_attr.grh.traffic_class = s->tos;
	e->ev.param.ud.ah_attr.port_num = id->port_num ? id->port_num : 1;
	e->ev.param.ud.qp_num = 0xffffff;
	e->ev.param.ud.qkey = RDMA_UDP_QKEY;
	mc->next = s->mcs;
	s->mcs = mc;
	mc = NULL;
unlock:
	sync = s->sync; /* s may be gone once unlocked (async ids) */
	pthread_mutex_unlock(&scm__lock);
	free(mc);
	if (err)
		return scm_err(err);
	return sync ? scm__complete(s) : 0;
}

/* rdma_join_multicast -- join a group as a full member */
int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
			void *context)
{
	if (!id || !addr)
		return scm_err(EINVAL);
	return scm_join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

/* rdma_join_multicast_ex -- join with flags (full or send-only member) */
int rdma_join_multicast_ex(struct rdma_cm_id *id,
			   struct rdma_cm_join_mc_attr_ex *attr, void *context)
{
	if (!id || !attr)
		return scm_err(EINVAL);
	/* librdmacm: a comp_mask bit it does not know is ENOTSUP */
	if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return scm_err(ENOTSUP);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) || !attr->addr)
		return scm_err(EINVAL);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return scm_err(EINVAL);
	return scm_join(id, attr->addr, attr->join_flags, context);
}

/*
 * scm__mc_process_locked -- the user takes a MULTICAST_JOIN: attach the
 * id's QP, or turn the event into MULTICAST_ERROR (librdmacm's
 * ucma_process_join).
 */
void scm__mc_process_locked(struct scm_event *e)
{
	struct rdma_cm_id *id = e->ev.id;
	int err;

	if (e->ev.event != RDMA_CM_EVENT_MULTICAST_JOIN || !id->qp ||
	    e->mc->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return;
	err = ibv_attach_mcast(id->qp, &e->mc->mgid, 0);
	if (err) {
		/* ucma_process_join's rdma_seterrno: status -1, errno the
		 * attach's error */
		e->ev.event = RDMA_CM_EVENT_MULTICAST_ERROR;
		e->ev.status = -1;
		errno = err;
	}
}

/* scm_mc_drop_locked -- detach, forget queued events, wait for acks */
static void scm_mc_drop_locked(struct scm_id *s, struct scm_mc *mc, int detach)
{
	struct scm_channel *ch = scm_ch_of(s->id.channel);
	struct scm_event **pp = &ch->head, *e;

	ch->tail = NULL;
	while ((e = *pp)) {
		if (e->mc == mc) {
			*pp = e->next;
			free(e);
			continue;
		}
		ch->tail = e;
		pp = &e->next;
	}
	/* as librdmacm's rdma_leave_multicast: the QP leaves the group
	 * whichever of its joins to it is left (an attach is one per QP and
	 * group, and another join's event may have made it) */
	if (detach && s->id.qp &&
	    mc->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		ibv_detach_mcast(s->id.qp, &mc->mgid, 0);
	while (mc->completed < mc->reported)
		pthread_cond_wait(&s->cond, &scm__lock);
	free(mc);
}

/* rdma_leave_multicast -- leave a group joined at addr */
int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct scm_id *s = scm_id_of(id);
	struct scm_mc **pp, *mc;

	if (!id || !addr || !scm__addr_len(addr))
		return scm_err(EINVAL);
	pthread_mutex_lock(&scm__lock);
	pp = scm_mc_find(s, addr);
	mc = *pp;
	if (mc)
		*pp = mc->next;
	if (mc)
		scm_mc_drop_locked(s, mc, 1);
	pthread_mutex_unlock(&scm__lock);
	return mc ? 0 : scm_err(EADDRNOTAVAIL);
}

/*
 * scm__mc_free_all_locked -- rdma_destroy_id leaves every group; like
 * librdmacm it leaves the QP alone (the user may have destroyed it).
 */
void scm__mc_free_all_locked(struct scm_id *s)
{
	struct scm_mc *mc;

	while ((mc = s->mcs)) {
		s->mcs = mc->next;
		scm_mc_drop_locked(s, mc, 0);
	}
}
