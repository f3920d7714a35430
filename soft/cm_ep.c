/* SPDX-License-Identifier: MIT */
/* cm_ep.c -- softrdma's librdmacm: QPs, SRQs and endpoints of ids */
#include "config.h"
#include "softrdma.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cm_internal.h"

SOFT_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id,
				  struct ibv_qp_init_attr_ex *qp_init_attr);
SOFT_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
			       struct ibv_qp_init_attr *qp_init_attr);
SOFT_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id);
SOFT_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id,
				   struct ibv_srq_init_attr_ex *attr);
SOFT_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
				struct ibv_srq_init_attr *attr);
SOFT_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id);
SOFT_EXPORT int rdma_create_ep(struct rdma_cm_id **id,
			       struct rdma_addrinfo *res, struct ibv_pd *pd,
			       struct ibv_qp_init_attr *qp_init_attr);
SOFT_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id);
SOFT_EXPORT int rdma_get_request(struct rdma_cm_id *listen,
				 struct rdma_cm_id **id);

/* scm_destroy_cqs -- free the CQs and channels rdma_create_qp made (an
 * XRC target's receive CQ is its XRC SRQ's: rdma_destroy_srq frees it,
 * as librdmacm's ucma_destroy_cqs) */
static void scm_destroy_cqs(struct rdma_cm_id *id)
{
	if (id->qp_type == IBV_QPT_XRC_RECV && id->srq)
		return;
	if (id->recv_cq) {
		ibv_destroy_cq(id->recv_cq);
		if (id->send_cq == id->recv_cq)
			id->send_cq = NULL;
		id->recv_cq = NULL;
	}
	if (id->recv_cq_channel) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		if (id->send_cq_channel == id->recv_cq_channel)
			id->send_cq_channel = NULL;
		id->recv_cq_channel = NULL;
	}
	if (id->send_cq) {
		ibv_destroy_cq(id->send_cq);
		id->send_cq = NULL;
	}
	if (id->send_cq_channel) {
		ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq_channel = NULL;
	}
}

/* scm_create_cqs -- CQs owned by the id; cq_context is the id itself */
static int scm_create_cqs(struct rdma_cm_id *id, uint32_t send_size,
			  uint32_t recv_size)
{
	if (recv_size) {
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->recv_cq_channel)
			goto err;
		id->recv_cq = ibv_create_cq(id->verbs, (int)recv_size, id,
					    id->recv_cq_channel, 0);
		if (!id->recv_cq)
			goto err;
	}
	if (send_size) {
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->send_cq_channel)
			goto err;
		id->send_cq = ibv_create_cq(id->verbs, (int)send_size, id,
					    id->send_cq_channel, 0);
		if (!id->send_cq)
			goto err;
	}
	return 0;
err:
	scm_destroy_cqs(id);
	return errno ? errno : ENOMEM;
}

/* scm_init_qp -- RESET to INIT (RC/UC) or to RTS (UD), as librdmacm */
static int scm_init_qp(struct rdma_cm_id *id, struct ibv_qp *qp)
{
	static const enum ibv_qp_state ud_seq[] = {IBV_QPS_INIT, IBV_QPS_RTR,
						   IBV_QPS_RTS};
	struct ibv_qp_attr a;
	int mask, i, n = id->qp_type == IBV_QPT_UD ? 3 : 1;

	for (i = 0; i < n; i++) {
		memset(&a, 0, sizeof(a));
		a.qp_state = ud_seq[i];
		if (rdma_init_qp_attr(id, &a, &mask))
			return errno;
		if (ibv_modify_qp(qp, &a, mask))
			return errno ? errno : EINVAL;
	}
	return 0;
}

/* rdma_create_qp_ex -- a QP for the id, with CQs made if none given */
int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp *qp;
	int err;

	if (!id || !attr || id->qp || !id->verbs)
		return scm_err(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		attr->pd = id->pd;
	} else if (id->verbs != attr->pd->context) {
		return scm_err(EINVAL);
	}
	if (!attr->pd)
		return scm_err(EINVAL);
	if (id->qp_type == IBV_QPT_XRC_RECV &&
	    (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
		attr->xrcd = scm__dev_xrcd(); /* librdmacm's ucma_get_xrcd */
		if (!attr->xrcd)
			return scm_err(errno);
		attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
	}
	if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
	    (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
		return scm_err(EINVAL);
	err = scm_create_cqs(
		id, attr->send_cq || id->send_cq ? 0 : attr->cap.max_send_wr,
		attr->recv_cq || id->recv_cq ? 0 : attr->cap.max_recv_wr);
	if (err)
		return scm_err(err);
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq;
	if (id->srq && !attr->srq)
		attr->srq = id->srq;
	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp) {
		err = errno ? errno : ENOMEM;
		goto destroy_cqs;
	}
	err = scm_init_qp(id, qp);
	if (err)
		goto destroy_qp;
	pthread_mutex_lock(&scm__lock);
	id->pd = qp->pd;
	id->qp = qp;
	pthread_mutex_unlock(&scm__lock);
	return 0;

destroy_qp:
	ibv_destroy_qp(qp);
destroy_cqs:
	scm_destroy_cqs(id);
	return scm_err(err);
}

/* rdma_create_qp -- rdma_create_qp_ex with the id's (or the given) PD */
int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ax;
	int ret;

	if (!id || !qp_init_attr)
		return scm_err(EINVAL);
	memset(&ax, 0, sizeof(ax));
	memcpy(&ax, qp_init_attr, sizeof(*qp_init_attr));
	ax.comp_mask = IBV_QP_INIT_ATTR_PD;
	ax.pd = pd ? pd : id->pd;
	ret = rdma_create_qp_ex(id, &ax);
	memcpy(qp_init_attr, &ax, sizeof(*qp_init_attr));
	return ret;
}

/* rdma_destroy_qp -- destroy the id's QP and the CQs made for it */
void rdma_destroy_qp(struct rdma_cm_id *id)
{
	struct ibv_qp *qp;

	if (!id)
		return;
	pthread_mutex_lock(&scm__lock);
	qp = id->qp;
	id->qp = NULL;
	pthread_mutex_unlock(&scm__lock);
	if (qp)
		ibv_destroy_qp(qp);
	scm_destroy_cqs(id);
}

/* rdma_create_srq_ex -- an SRQ for the id; an XRC one takes the device's
 * domain and the id's receive CQ (made if need be) unless given them */
int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq *srq;
	int err;

	if (!id || !attr || !id->verbs)
		return scm_err(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		return scm_err(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
		attr->pd = id->pd;
	}
	if (attr->srq_type == IBV_SRQT_XRC) {
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) ||
		    !attr->xrcd) {
			attr->xrcd = scm__dev_xrcd();
			if (!attr->xrcd)
				return scm_err(errno);
		}
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
			if (!id->recv_cq) {
				err = scm_create_cqs(id, 0, attr->attr.max_wr);
				if (err)
					return scm_err(err);
			}
			attr->cq = id->recv_cq;
		}
		attr->comp_mask |=
			IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	}
	srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq) {
		err = errno ? errno : ENOMEM;
		scm_destroy_cqs(id);
		return scm_err(err);
	}
	id->srq = srq;
	id->pd = attr->pd;
	return 0;
}

/* rdma_create_srq -- rdma_create_srq_ex for a basic SRQ */
int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
		    struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ax;
	int ret;

	if (!id || !attr)
		return scm_err(EINVAL);
	memset(&ax, 0, sizeof(ax));
	memcpy(&ax, attr, sizeof(*attr));
	ax.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	ax.srq_type =
		id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	ax.pd = pd;
	ret = rdma_create_srq_ex(id, &ax);
	memcpy(attr, &ax, sizeof(*attr));
	return ret;
}

/* rdma_destroy_srq -- destroy the id's SRQ and the CQs made for it */
void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->srq)
		ibv_destroy_srq(id->srq);
	id->srq = NULL;
	scm_destroy_cqs(id);
}

/* scm_passive_ep -- bind, and keep the QP attributes for rdma_get_request */
static int scm_passive_ep(struct rdma_cm_id *id, struct rdma_addrinfo *res,
			  struct ibv_pd *pd,
			  struct ibv_qp_init_attr *qp_init_attr)
{
	struct scm_id *s = scm_id_of(id);

	if (rdma_bind_addr(id, res->ai_src_addr))
		return -1;
	if (pd)
		id->pd = pd;
	if (qp_init_attr) {
		s->qp_init_attr = malloc(sizeof(*qp_init_attr));
		if (!s->qp_init_attr)
			return scm_err(ENOMEM);
		*s->qp_init_attr = *qp_init_attr;
		s->qp_init_attr->qp_type = (enum ibv_qp_type)res->ai_qp_type;
	}
	return 0;
}

/* rdma_create_ep -- a synchronous id, resolved (or bound) with its QP */
int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
		   struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cm_id;
	struct scm_id *s;
	int ret, err;

	if (!id || !res)
		return scm_err(EINVAL);
	ret = scm__create_id_qpt(&cm_id,
				 (enum rdma_port_space)res->ai_port_space,
				 (enum ibv_qp_type)res->ai_qp_type);
	if (ret)
		return ret;
	s = scm_id_of(cm_id);
	if (res->ai_flags & RAI_PASSIVE) {
		ret = scm_passive_ep(cm_id, res, pd, qp_init_attr);
		if (ret)
			goto err;
		goto out;
	}
	/* the address first in any case: a path given in ai_route (as
	 * ib_acm fills it) replaces only the route resolution */
	ret = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr,
				2000);
	if (ret)
		goto err;
	if (res->ai_route_len) {
		ret = rdma_set_option(cm_id, RDMA_OPTION_IB,
				      RDMA_OPTION_IB_PATH, res->ai_route,
				      res->ai_route_len);
		if (!ret)
			ret = scm__complete(s);
	} else {
		ret = rdma_resolve_route(cm_id, 2000);
	}
	if (ret)
		goto err;
	if (qp_init_attr) {
		qp_init_attr->qp_type = (enum ibv_qp_type)res->ai_qp_type;
		ret = rdma_create_qp(cm_id, pd, qp_init_attr);
		if (ret)
			goto err;
	}
	if (res->ai_connect_len) {
		s->connect = malloc(res->ai_connect_len);
		if (!s->connect) {
			errno = ENOMEM;
			ret = -1;
			goto err;
		}
		memcpy(s->connect, res->ai_connect, res->ai_connect_len);
		s->connect_len = res->ai_connect_len;
	}
out:
	*id = cm_id;
	return 0;
err:
	err = errno;
	rdma_destroy_ep(cm_id);
	errno = err;
	return ret;
}

/* rdma_destroy_ep -- QP, SRQ, then the id */
void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}

/* rdma_get_request -- next connection request of a synchronous listener */
int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct scm_id *l = scm_id_of(listen);
	struct rdma_cm_event *event;
	struct ibv_qp_init_attr attr;
	int ret;

	if (!listen || !id || !l->sync)
		return scm_err(EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	ret = rdma_get_cm_event(listen->channel, &event);
	if (ret)
		return ret;
	if (event->event == RDMA_CM_EVENT_REJECTED) {
		ret = scm_err(ECONNREFUSED);
		goto err;
	}
	if (event->status) {
		ret = scm_err(event->status < 0 ? -event->status
						: event->status);
		goto err;
	}
	if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		ret = scm_err(EINVAL);
		goto err;
	}
	if (l->qp_init_attr) {
		attr = *l->qp_init_attr;
		ret = rdma_create_qp(event->id, listen->pd, &attr);
		if (ret)
			goto err;
	}
	*id = event->id;
	(*id)->event = event;
	return 0;
err:
	listen->event = event;
	return ret;
}
