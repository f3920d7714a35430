/* SPDX-License-Identifier: MIT */
/*
 * cm_rare.c -- softrdma CM: the less travelled corners of librdmacm, each
 * as rdma-core's librdmacm and the kernel's rdma_cm/ucma answer it.
 *
 * - rdma_set_option: a NULL optval of a length is EFAULT (ucma_set_option
 *   copies it in with memdup_user), an unknown level or option ENOSYS
 *   (ucma_set_option_level, _id, _ib), a wrong length EINVAL; ACK_TIMEOUT
 *   only for ids the kernel makes RC (rdma_set_ack_timeout): every PS_TCP
 *   id, a UC one of rdma_create_ep too (ucma_get_qp_type).
 * - rdma_event_str, rdma_get_src_port/dst_port and the addresses in each
 *   state, rdma_get_devices.
 * - rdma_join_multicast_ex: a comp_mask with bits librdmacm does not know
 *   is ENOTSUP, a missing address or flags or an unknown flag EINVAL;
 *   rdma_leave_multicast of an address not joined is EADDRNOTAVAIL.  A
 *   send-only member's QP is not attached: its datagram to the group
 *   reaches a full member and not itself (rdma_verbs.h's helpers).
 * - rdma_notify: IBV_EVENT_COMM_EST establishes a passive id waiting for
 *   its RTU, EISCONN once established; IBV_EVENT_PATH_MIG needs an
 *   established connection (the IB CM's cm_migrate: EINVAL before);
 *   other events are EINVAL (ib_cm_notify).
 * - RDMA_OPTION_ID_TOS takes effect at route resolution: the kernel's
 *   cma_resolve_iboe_route puts it in the path record, from which the IB
 *   CM builds the QP's address vector; a TOS set later changes nothing.
 *   The passive side's QP takes the REQ's traffic class (the active
 *   side's path), whatever its listener's TOS.  ACK_TIMEOUT reaches the
 *   QP's timeout (rdma_init_qp_attr).
 * - rdma_migrate_id of a listener: a request reported after the move
 *   comes with an id on the listener's new channel (librdmacm makes the
 *   child on the listener's channel when its CONNECT_REQUEST is taken),
 *   and destroying the old channel does not touch it.  An id moved to no
 *   channel is synchronous, its queued events with it.
 * - rdma_accept of a UD request taken with rdma_get_request acks it, as
 *   librdmacm's does, so the listener may be destroyed first.
 * - Private data at the limits: 56 bytes for a PS_TCP REQ, 196 for a REP,
 *   148 for a REJ (RDMA_PS_UDP: 180 for a SIDR REQ, 136 for its REP); one
 *   byte more is EINVAL.  An rdma_accept that the kernel's IB CM refuses
 *   (ib_send_cm_rep) rejects the request (rdma_accept's reject label), so
 *   the active side gets REJECTED and the id cannot be accepted again.
 * - rdma_establish before the REP (or of a request) is EINVAL and rejects
 *   the connection: the kernel's rdma_accept without parameters, whose
 *   RTU the IB CM refuses, takes its reject label.
 * - rdma_verbs.h's calls (rdma_reg_msgs/_read/_write, rdma_post_send,
 *   _recv, _write, _read, rdma_get_send_comp/_recv_comp) over an id whose
 *   QP sends and receives on one CQ of the id's.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "../tap.h"
#include "cm_util.h"

/* rc_attr -- a small RC QP with CQs made by rdma_create_qp */
static void rc_attr(struct ibv_qp_init_attr *ia)
{
	memset(ia, 0, sizeof(*ia));
	ia->qp_type = IBV_QPT_RC;
	ia->cap.max_send_wr = 4;
	ia->cap.max_recv_wr = 4;
	ia->cap.max_send_sge = 1;
	ia->cap.max_recv_sge = 1;
	ia->sq_sig_all = 1;
}

/* listener -- an id listening on 127.0.0.1, a port of its own */
static struct rdma_cm_id *listener(struct rdma_event_channel *ch,
				   enum rdma_port_space ps)
{
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_cm_id *l;

	if (rdma_create_id(ch, &l, NULL, ps) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 4))
		bail_out("listener");
	return l;
}

/* set_fails -- rdma_set_option fails with errno e */
static int set_fails(struct rdma_cm_id *id, int level, int name, void *val,
		     size_t len, int e)
{
	errno = 0;
	return rdma_set_option(id, level, name, val, len) == -1 && errno == e;
}

/* test_options -- rdma_set_option's errors */
static void test_options(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id, *ud, *uc;
	struct rdma_addrinfo hints, *res;
	uint8_t u8v = 1;
	int iv = 1;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_create_id(ch, &ud, NULL, RDMA_PS_UDP))
		bail_out("ids");
	ok(set_fails(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, NULL, 1, EFAULT),
	   "TOS from NULL: EFAULT (memdup_user)");
	ok(set_fails(id, RDMA_OPTION_ID, 99, NULL, 0, ENOSYS),
	   "unknown option, no value: ENOSYS");
	ok(set_fails(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, NULL, 0, EINVAL),
	   "TOS of no bytes: EINVAL");
	ok(set_fails(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &iv, sizeof(iv),
		     EINVAL),
	   "TOS of 4 bytes: EINVAL");
	ok(set_fails(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &u8v, 1,
		     EINVAL),
	   "REUSEADDR of 1 byte: EINVAL");
	ok(set_fails(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &u8v, 1,
		     EINVAL),
	   "AFONLY of 1 byte: EINVAL");
	ok(set_fails(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &iv,
		     sizeof(iv), EINVAL),
	   "ACK_TIMEOUT of 4 bytes: EINVAL");
	ok(set_fails(id, RDMA_OPTION_ID, 4, &u8v, 1, ENOSYS),
	   "option 4 of level ID: ENOSYS");
	ok(set_fails(id, 7, 0, &u8v, 1, ENOSYS), "level 7: ENOSYS");
	ok(set_fails(id, RDMA_OPTION_IB, 99, &u8v, 1, ENOSYS),
	   "IB option 99: ENOSYS");
	ok(set_fails(ud, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &u8v, 1,
		     EINVAL),
	   "ACK_TIMEOUT of a UD id: EINVAL");
	ok(!rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &u8v, 1),
	   "TOS of 1 byte");
	/* the kernel's id of a PS_TCP id is RC, whatever the user's type */
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_NUMERICHOST | RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_TCP;
	hints.ai_qp_type = IBV_QPT_UC;
	uc = NULL;
	if (!rdma_getaddrinfo("127.0.0.1", "0", &hints, &res)) {
		if (rdma_create_ep(&uc, res, NULL, NULL))
			uc = NULL;
		rdma_freeaddrinfo(res);
	}
	ok(uc && uc->qp_type == IBV_QPT_UC &&
		   !rdma_set_option(uc, RDMA_OPTION_ID,
				    RDMA_OPTION_ID_ACK_TIMEOUT, &u8v, 1),
	   "ACK_TIMEOUT of a PS_TCP id of UC QPs (rdma_create_ep)");
	if (uc)
		rdma_destroy_ep(uc);
	ok(!rdma_set_option(ud, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &u8v, 1),
	   "TOS of a UD id");
	rdma_destroy_id(ud);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* qp_av -- a QP's traffic class and timeout */
static int qp_av(struct ibv_qp *qp, int *tclass, int *timeout)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	if (ibv_query_qp(qp, &a, IBV_QP_AV | IBV_QP_TIMEOUT, &ia))
		return -1;
	*tclass = a.ah_attr.grh.traffic_class;
	*timeout = a.timeout;
	return 0;
}

/*
 * connect_pair -- c (resolved, with a QP) connects to l; the passive id
 * with its QP in *ap once both sides are established
 */
static int connect_pair(struct rdma_event_channel *sch,
			struct rdma_event_channel *cch, struct rdma_cm_id *c,
			struct rdma_cm_id **ap)
{
	struct ibv_qp_init_attr ia;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *a;

	*ap = NULL;
	if (rdma_connect(c, NULL))
		return -1;
	ev = cmt_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	if (!ev)
		return -1;
	a = ev->id;
	rdma_ack_cm_event(ev);
	*ap = a;
	rc_attr(&ia);
	if (rdma_create_qp(a, NULL, &ia) || rdma_accept(a, NULL))
		return -1;
	ev = cmt_expect(cch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	if (!ev)
		return -1;
	rdma_ack_cm_event(ev);
	ev = cmt_expect(sch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	if (!ev)
		return -1;
	rdma_ack_cm_event(ev);
	return 0;
}

/* close_pair -- disconnect and destroy both ids of a connection */
static void close_pair(struct rdma_cm_id *c, struct rdma_cm_id *a)
{
	if (a) {
		rdma_disconnect(a);
		rdma_destroy_qp(a);
		rdma_destroy_id(a);
	}
	rdma_destroy_qp(c);
	rdma_destroy_id(c);
}

/*
 * test_tos -- the TOS of the route reaches both QPs; a TOS set after the
 * route, or the listener's own, does not
 */
static void test_tos(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_cm_id *l, *c, *a;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	uint8_t tos = 0x28, late = 0x48, lt = 0xb8, to = 10;
	int tc = -1, tmo = -1, mask = 0;

	if (!sch || !cch)
		bail_out("channels");
	l = listener(sch, RDMA_PS_TCP);
	rdma_set_option(l, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &lt, 1);
	rc_attr(&ia);
	if (rdma_create_id(cch, &c, NULL, RDMA_PS_TCP) ||
	    rdma_set_option(c, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1) ||
	    rdma_set_option(c, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &to,
			    1) ||
	    cmt_resolve(c, cch, ntohs(rdma_get_src_port(l))) ||
	    rdma_create_qp(c, NULL, &ia))
		bail_out("client");
	ok(c->route.path_rec && c->route.path_rec->traffic_class == 0x28,
	   "the route's path has the TOS");
	ok(!connect_pair(sch, cch, c, &a), "connected with TOS 0x28");
	if (qp_av(c->qp, &tc, &tmo))
		tc = tmo = -1;
	ok(tc == 0x28 && tmo == 10,
	   "active QP: traffic class 0x28, timeout 10 (got 0x%x, %d)", tc, tmo);
	if (!a || !a->qp || qp_av(a->qp, &tc, &tmo))
		tc = -1;
	ok(tc == 0x28,
	   "passive QP: the REQ's traffic class 0x28, not its listener's "
	   "0xb8 (got 0x%x)",
	   tc);
	ok(a && a->route.path_rec && a->route.path_rec->traffic_class == 0x28,
	   "passive path: traffic class 0x28 (got 0x%x)",
	   a && a->route.path_rec ? a->route.path_rec->traffic_class : -1);
	ok(a && rdma_get_src_port(a) == rdma_get_src_port(l) &&
		   rdma_get_dst_port(a) == rdma_get_src_port(c) &&
		   rdma_get_dst_port(c) == rdma_get_src_port(l) &&
		   rdma_get_src_port(c) != 0,
	   "ports: the passive id's are the listener's and the client's");
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTR;
	ok(a && !rdma_init_qp_attr(a, &qa, &mask) &&
		   qa.ah_attr.grh.traffic_class == 0x28,
	   "passive rdma_init_qp_attr(RTR): traffic class 0x28");
	close_pair(c, a);

	/* a TOS set once the route is resolved changes nothing */
	rc_attr(&ia);
	if (rdma_create_id(cch, &c, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(c, cch, ntohs(rdma_get_src_port(l))) ||
	    rdma_set_option(c, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &late, 1) ||
	    rdma_create_qp(c, NULL, &ia))
		bail_out("client 2");
	ok(!connect_pair(sch, cch, c, &a), "connected, TOS set late");
	if (qp_av(c->qp, &tc, &tmo))
		tc = -1;
	ok(tc == 0, "active QP: traffic class of the route, 0 (got 0x%x)", tc);
	if (!a || !a->qp || qp_av(a->qp, &tc, &tmo))
		tc = -1;
	ok(tc == 0, "passive QP: traffic class 0 (got 0x%x)", tc);
	close_pair(c, a);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}

/* notify_is -- rdma_notify's answer: 0, or -1 with errno e */
static int notify_is(struct rdma_cm_id *id, enum ibv_event_type t, int e)
{
	int r;

	errno = 0;
	r = rdma_notify(id, t);
	return e ? r == -1 && errno == e : r == 0;
}

/* test_notify -- rdma_notify in each state, with each kind of event */
static void test_notify(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_cm_id *l, *c, *a = NULL;
	struct ibv_qp_init_attr ia;
	struct rdma_cm_event *ev;

	if (!sch || !cch)
		bail_out("channels");
	l = listener(sch, RDMA_PS_TCP);
	rc_attr(&ia);
	if (rdma_create_id(cch, &c, NULL, RDMA_PS_TCP))
		bail_out("client");
	ok(notify_is(c, IBV_EVENT_COMM_EST, EINVAL),
	   "COMM_EST on an idle id: EINVAL");
	if (cmt_resolve(c, cch, ntohs(rdma_get_src_port(l))) ||
	    rdma_create_qp(c, NULL, &ia) || rdma_connect(c, NULL))
		bail_out("connect");
	ev = cmt_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	if (!ev)
		bail_out("request");
	a = ev->id;
	rdma_ack_cm_event(ev);
	ok(notify_is(a, IBV_EVENT_PATH_MIG, EINVAL),
	   "PATH_MIG before the connection: EINVAL (cm_migrate)");
	ok(notify_is(a, IBV_EVENT_COMM_EST, EINVAL),
	   "COMM_EST before the REP: EINVAL (cm_establish)");
	ok(notify_is(a, IBV_EVENT_QP_FATAL, EINVAL), "QP_FATAL: EINVAL");
	rc_attr(&ia);
	if (rdma_create_qp(a, NULL, &ia) || rdma_accept(a, NULL))
		bail_out("accept");
	ev = cmt_expect(cch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	ok(ev != NULL, "active side established");
	if (ev)
		rdma_ack_cm_event(ev);
	ev = cmt_expect(sch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	ok(ev != NULL, "passive side established");
	if (ev)
		rdma_ack_cm_event(ev);
	ok(notify_is(a, IBV_EVENT_COMM_EST, EISCONN),
	   "COMM_EST once established: EISCONN");
	ok(notify_is(c, IBV_EVENT_PATH_MIG, 0), "PATH_MIG once established");
	ok(notify_is(c, IBV_EVENT_SQ_DRAINED, EINVAL), "SQ_DRAINED: EINVAL");
	ok(notify_is(l, IBV_EVENT_PATH_MIG, EINVAL),
	   "PATH_MIG on a listener: EINVAL");
	close_pair(c, a);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}

/* join_fails -- rdma_join_multicast_ex fails with errno e */
static int join_fails(struct rdma_cm_id *id, struct sockaddr *sa, uint32_t mask,
		      uint32_t flags, int e)
{
	struct rdma_cm_join_mc_attr_ex mc;

	memset(&mc, 0, sizeof(mc));
	mc.comp_mask = mask;
	mc.join_flags = flags;
	mc.addr = sa;
	errno = 0;
	return rdma_join_multicast_ex(id, &mc, NULL) == -1 && errno == e;
}

/* test_join_ex -- rdma_join_multicast_ex's checks */
static void test_join_ex(void)
{
	const uint32_t both =
		RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in src = cmt_sin(0), grp = cmt_sin(0);
	struct rdma_cm_join_mc_attr_ex mc;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	grp.sin_addr.s_addr = htonl(0xe0014d01); /* 224.1.77.1 */
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) ||
	    rdma_bind_addr(id, (struct sockaddr *)&src))
		bail_out("UD id");
	ok(join_fails(id, (struct sockaddr *)&grp,
		      both | RDMA_CM_JOIN_MC_ATTR_RESERVED,
		      RDMA_MC_JOIN_FLAG_FULLMEMBER, ENOTSUP),
	   "comp_mask with an unknown bit: ENOTSUP");
	ok(join_fails(id, (struct sockaddr *)&grp, 0x80000000u | both,
		      RDMA_MC_JOIN_FLAG_FULLMEMBER, ENOTSUP),
	   "comp_mask with bit 31: ENOTSUP");
	ok(join_fails(id, (struct sockaddr *)&grp,
		      RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
		      RDMA_MC_JOIN_FLAG_FULLMEMBER, EINVAL),
	   "no address: EINVAL");
	ok(join_fails(id, (struct sockaddr *)&grp, RDMA_CM_JOIN_MC_ATTR_ADDRESS,
		      RDMA_MC_JOIN_FLAG_FULLMEMBER, EINVAL),
	   "no join flags: EINVAL");
	ok(join_fails(id, (struct sockaddr *)&grp, both,
		      RDMA_MC_JOIN_FLAG_RESERVED, EINVAL),
	   "join flag 2: EINVAL");
	errno = 0;
	ok(rdma_leave_multicast(id, (struct sockaddr *)&grp) == -1 &&
		   errno == EADDRNOTAVAIL,
	   "leave a group not joined: EADDRNOTAVAIL");
	memset(&mc, 0, sizeof(mc));
	mc.comp_mask = both;
	mc.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
	mc.addr = (struct sockaddr *)&grp;
	ok(!rdma_join_multicast_ex(id, &mc, &mc), "send-only join");
	ev = cmt_expect(ch, RDMA_CM_EVENT_MULTICAST_JOIN, 5000);
	ok(ev && ev->param.ud.private_data == &mc &&
		   ev->param.ud.qp_num == 0xffffff,
	   "MULTICAST_JOIN with the context and QPN 0xffffff");
	if (ev)
		rdma_ack_cm_event(ev);
	ok(!rdma_leave_multicast(id, (struct sockaddr *)&grp), "leave it");
	errno = 0;
	ok(rdma_leave_multicast(id, (struct sockaddr *)&grp) == -1 &&
		   errno == EADDRNOTAVAIL,
	   "leave it again: EADDRNOTAVAIL");
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/*
 * test_migrate_listener -- a request of a listener moved to another
 * channel comes with an id on that channel; the old one can go
 */
static void test_migrate_listener(void)
{
	struct rdma_event_channel *ch1 = rdma_create_event_channel();
	struct rdma_event_channel *ch2 = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_cm_id *l, *c, *a = NULL;
	struct ibv_qp_init_attr ia;
	struct rdma_cm_event *ev;
	struct pollfd p;

	if (!ch1 || !ch2 || !cch)
		bail_out("channels");
	l = listener(ch1, RDMA_PS_TCP);
	rc_attr(&ia);
	if (rdma_create_id(cch, &c, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(c, cch, ntohs(rdma_get_src_port(l))) ||
	    rdma_create_qp(c, NULL, &ia) || rdma_connect(c, NULL))
		bail_out("client");
	p.fd = ch1->fd;
	p.events = POLLIN;
	ok(poll(&p, 1, 10000) == 1, "the request is queued on channel 1");
	ok(!rdma_migrate_id(l, ch2), "listener moved to channel 2");
	rdma_destroy_event_channel(ch1);
	ev = cmt_expect(ch2, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	ok(ev != NULL, "the request is taken from channel 2");
	if (ev) {
		a = ev->id;
		ok(a->channel == ch2, "its id is on channel 2");
		ok(ev->listen_id == l, "listen_id is the listener");
		rdma_ack_cm_event(ev);
	}
	if (!a)
		goto out;
	rc_attr(&ia);
	ok(!rdma_create_qp(a, NULL, &ia) && !rdma_accept(a, NULL), "accepted");
	ev = cmt_expect(cch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	ok(ev != NULL, "active side established");
	if (ev)
		rdma_ack_cm_event(ev);
	ev = cmt_expect(ch2, RDMA_CM_EVENT_ESTABLISHED, 10000);
	ok(ev && ev->id == a, "passive side established on channel 2");
	if (ev)
		rdma_ack_cm_event(ev);
out:
	close_pair(c, a);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch2);
	rdma_destroy_event_channel(cch);
}

/* ud_id -- a UD id bound to 127.0.0.1 with a QP (CQs of its own) */
static struct rdma_cm_id *ud_id(struct rdma_event_channel *ch)
{
	struct sockaddr_in src = cmt_sin(0);
	struct ibv_qp_init_attr ia;
	struct rdma_cm_id *id;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.sq_sig_all = 1;
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) ||
	    rdma_bind_addr(id, (struct sockaddr *)&src) ||
	    rdma_create_qp(id, NULL, &ia))
		bail_out("UD id");
	return id;
}

/* poll_one -- a completion of cq within ms, or 0 */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	long long end = cmt_now_ms() + ms;
	int n;

	do {
		n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n;
		usleep(1000);
	} while (cmt_now_ms() < end);
	return 0;
}

/*
 * test_sendonly -- a send-only member's QP is not attached: its datagram
 * to the group reaches a full member, not itself
 */
static void test_sendonly(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in grp = cmt_sin(0);
	struct rdma_cm_join_mc_attr_ex mc;
	struct rdma_cm_id *snd, *rcv;
	struct ibv_ah_attr ah_attr;
	struct ibv_mr *smr, *rmr;
	struct rdma_cm_event *ev;
	struct ibv_ah *ah = NULL;
	struct ibv_wc wc;
	char sbuf[64] = "to the group", sown[64 + 40], rbuf[64 + 40];

	grp.sin_addr.s_addr = htonl(0xe0014d02); /* 224.1.77.2 */
	if (!ch)
		bail_out("channel");
	snd = ud_id(ch);
	rcv = ud_id(ch);
	memset(&mc, 0, sizeof(mc));
	mc.comp_mask =
		RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	mc.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
	mc.addr = (struct sockaddr *)&grp;
	ok(!rdma_join_multicast_ex(snd, &mc, NULL), "send-only join");
	ev = cmt_expect(ch, RDMA_CM_EVENT_MULTICAST_JOIN, 5000);
	ok(ev != NULL, "its MULTICAST_JOIN");
	if (ev) {
		ah_attr = ev->param.ud.ah_attr;
		rdma_ack_cm_event(ev);
		ah = ibv_create_ah(snd->pd, &ah_attr);
	}
	ok(!rdma_join_multicast(rcv, (struct sockaddr *)&grp, NULL),
	   "full member join");
	ev = cmt_expect(ch, RDMA_CM_EVENT_MULTICAST_JOIN, 5000);
	ok(ev != NULL, "its MULTICAST_JOIN");
	if (ev)
		rdma_ack_cm_event(ev);
	smr = rdma_reg_msgs(snd, sown, sizeof(sown));
	rmr = rdma_reg_msgs(rcv, rbuf, sizeof(rbuf));
	if (!ah || !smr || !rmr)
		bail_out("AH or MRs");
	memset(rbuf, 0, sizeof(rbuf));
	memset(sown, 0, sizeof(sown));
	ok(!rdma_post_recv(snd, NULL, sown, sizeof(sown), smr) &&
		   !rdma_post_recv(rcv, NULL, rbuf, sizeof(rbuf), rmr),
	   "receives posted on both");
	memcpy(sown + 40, sbuf, sizeof(sbuf)); /* sent from after the GRH */
	ok(!rdma_post_ud_send(snd, NULL, sown + 40, sizeof(sbuf), smr, 0, ah,
			      0xffffff),
	   "send to the group");
	ok(rdma_get_send_comp(snd, &wc) == 1 && wc.status == IBV_WC_SUCCESS,
	   "the send completes");
	ok(rdma_get_recv_comp(rcv, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.byte_len == 40 + sizeof(sbuf) &&
		   !memcmp(rbuf + 40, sbuf, sizeof(sbuf)),
	   "the full member gets the datagram");
	ok(poll_one(snd->recv_cq, &wc, 200) == 0,
	   "the send-only member gets nothing");
	rdma_leave_multicast(snd, (struct sockaddr *)&grp);
	rdma_leave_multicast(rcv, (struct sockaddr *)&grp);
	ibv_destroy_ah(ah);
	rdma_dereg_mr(smr);
	rdma_dereg_mr(rmr);
	rdma_destroy_qp(snd);
	rdma_destroy_qp(rcv);
	rdma_destroy_id(snd);
	rdma_destroy_id(rcv);
	rdma_destroy_event_channel(ch);
}

/* request_to -- a client on cch connects to l's port: its id */
static struct rdma_cm_id *request_to(struct rdma_event_channel *cch,
				     struct rdma_cm_id *l)
{
	struct rdma_cm_id *c;

	if (rdma_create_id(cch, &c, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(c, cch, ntohs(rdma_get_src_port(l))) ||
	    rdma_connect(c, &(struct rdma_conn_param){.responder_resources = 1,
						      .initiator_depth = 1}))
		bail_out("client");
	return c;
}

/*
 * test_migrate_listener_sync -- a listener's pending request follows it
 * to no channel (the request's id synchronous, rdma_get_request), and
 * from there back to a channel (the id's own channel given up)
 */
static void test_migrate_listener_sync(void)
{
	struct rdma_event_channel *ch1 = rdma_create_event_channel();
	struct rdma_event_channel *ch2 = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_cm_id *l, *c1, *c2, *a = NULL;
	struct rdma_cm_event *ev;
	struct pollfd p;

	if (!ch1 || !ch2 || !cch)
		bail_out("channels");
	l = listener(ch1, RDMA_PS_TCP);
	c1 = request_to(cch, l);
	p.fd = ch1->fd;
	p.events = POLLIN;
	ok(poll(&p, 1, 10000) == 1, "a request queued on channel 1");
	ok(!rdma_migrate_id(l, NULL), "listener moved to no channel");
	rdma_destroy_event_channel(ch1);
	ok(!rdma_get_request(l, &a) && a && a->event &&
		   a->event->event == RDMA_CM_EVENT_CONNECT_REQUEST,
	   "rdma_get_request takes it");
	ok(a && a->channel && a->channel != l->channel && a->channel != cch &&
		   a->channel != ch2,
	   "its id has a channel of its own");
	ok(a && !rdma_reject(a, NULL, 0), "rejected");
	ev = cmt_expect(cch, RDMA_CM_EVENT_REJECTED, 10000);
	ok(ev != NULL, "the client is rejected");
	if (ev)
		rdma_ack_cm_event(ev);
	if (a)
		rdma_destroy_id(a);
	a = NULL;

	/* a request waiting on the synchronous listener, moved to ch2 */
	c2 = request_to(cch, l);
	p.fd = l->channel->fd;
	ok(poll(&p, 1, 10000) == 1, "a request queued on its own channel");
	ok(!rdma_migrate_id(l, ch2), "listener moved to channel 2");
	ev = cmt_expect(ch2, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	ok(ev && ev->id->channel == ch2 && ev->listen_id == l,
	   "the request comes on channel 2, its id on it");
	if (ev) {
		a = ev->id;
		rdma_ack_cm_event(ev);
	}
	ok(a && !rdma_reject(a, NULL, 0), "rejected");
	ev = cmt_expect(cch, RDMA_CM_EVENT_REJECTED, 10000);
	ok(ev != NULL, "the client is rejected");
	if (ev)
		rdma_ack_cm_event(ev);
	if (a)
		rdma_destroy_id(a);
	rdma_destroy_id(c1);
	rdma_destroy_id(c2);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch2);
	rdma_destroy_event_channel(cch);
}

/*
 * test_migrate_sync -- an id moved to no channel is synchronous: its
 * queued event comes on its own channel, and its calls wait for theirs
 */
static void test_migrate_sync(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in dst = cmt_sin(1);
	struct rdma_event_channel *own;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct pollfd p;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000))
		bail_out("id");
	p.fd = ch->fd;
	p.events = POLLIN;
	ok(poll(&p, 1, 5000) == 1, "ADDR_RESOLVED queued");
	ok(!rdma_migrate_id(id, NULL), "moved to no channel");
	own = id->channel;
	ok(own && own != ch, "the id has a channel of its own");
	ok(poll(&p, 1, 0) == 0, "nothing left on the old channel");
	ev = NULL;
	ok(own && !rdma_get_cm_event(own, &ev) && ev &&
		   ev->event == RDMA_CM_EVENT_ADDR_RESOLVED && ev->id == id,
	   "ADDR_RESOLVED came along");
	if (ev)
		rdma_ack_cm_event(ev);
	errno = 0;
	ok(rdma_migrate_id(id, NULL) == -1 && errno == EINVAL,
	   "a synchronous id to no channel: EINVAL");
	ok(!rdma_resolve_route(id, 2000), "synchronous route resolution");
	ok(id->event && id->event->event == RDMA_CM_EVENT_ROUTE_RESOLVED,
	   "its event is id->event");
	ok(!rdma_migrate_id(id, ch), "back to the channel");
	ok(id->channel == ch && !id->event, "on it, id->event acked");
	ok(!rdma_destroy_id(id), "destroy");
	rdma_destroy_event_channel(ch);
}

/*
 * test_sync_ud_accept -- rdma_accept of a UD request taken with
 * rdma_get_request acks that request (librdmacm's rdma_accept, as a SIDR
 * REP completes nothing to wait for): the listener can go first
 */
static void test_sync_ud_accept(void)
{
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_cm_id *l, *c, *a = NULL;
	struct rdma_cm_event *ev;

	if (!cch || rdma_create_id(NULL, &l, NULL, RDMA_PS_UDP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 4))
		bail_out("synchronous UD listener");
	if (rdma_create_id(cch, &c, NULL, RDMA_PS_UDP) ||
	    cmt_resolve(c, cch, ntohs(rdma_get_src_port(l))) ||
	    rdma_connect(c, NULL))
		bail_out("UD client");
	ok(!rdma_get_request(l, &a) && a && a->event &&
		   a->event->event == RDMA_CM_EVENT_CONNECT_REQUEST,
	   "rdma_get_request: the request is the new id's event");
	if (!a)
		bail_out("no request");
	ok(!rdma_accept(a, NULL), "accepted");
	ok(!a->event, "the accept acked it (id->event NULL)");
	ev = cmt_expect(cch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	ok(ev != NULL, "the client's SIDR REP");
	if (ev)
		rdma_ack_cm_event(ev);
	ok(!rdma_destroy_id(l), "the listener goes first, without waiting");
	ok(!rdma_destroy_id(a), "then the accepted id");
	rdma_destroy_id(c);
	rdma_destroy_event_channel(cch);
}

/*
 * test_shared_cq -- rdma_verbs.h's calls over an id whose send and receive
 * CQ are one (given on the id before rdma_create_qp): SEND, RDMA WRITE
 * and READ complete on it, and rdma_destroy_qp frees it once
 */
static void test_shared_cq(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct ibv_mr *cmr = NULL, *amr = NULL, *wmr = NULL, *rmr = NULL;
	char cbuf[64], abuf[64], wbuf[64], rbuf[64] = "to be read";
	struct rdma_cm_id *l, *c, *a = NULL;
	struct ibv_qp_init_attr ia;
	struct ibv_wc wc;

	if (!sch || !cch)
		bail_out("channels");
	l = listener(sch, RDMA_PS_TCP);
	rc_attr(&ia);
	if (rdma_create_id(cch, &c, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(c, cch, ntohs(rdma_get_src_port(l))))
		bail_out("client");
	c->send_cq_channel = c->recv_cq_channel =
		ibv_create_comp_channel(c->verbs);
	c->send_cq = c->recv_cq =
		c->send_cq_channel
			? ibv_create_cq(c->verbs, 16, c, c->send_cq_channel, 0)
			: NULL;
	if (!c->send_cq || rdma_create_qp(c, NULL, &ia))
		bail_out("QP on one CQ");
	ok(c->qp->send_cq == c->qp->recv_cq && c->qp->send_cq == c->send_cq,
	   "the QP sends and receives on the id's one CQ");
	ok(!connect_pair(sch, cch, c, &a), "connected");
	if (a) {
		cmr = rdma_reg_msgs(c, cbuf, sizeof(cbuf));
		amr = rdma_reg_msgs(a, abuf, sizeof(abuf));
		wmr = rdma_reg_write(a, wbuf, sizeof(wbuf));
		rmr = rdma_reg_read(a, rbuf, sizeof(rbuf));
	}
	if (!cmr || !amr || !wmr || !rmr)
		bail_out("MRs");
	memset(abuf, 0, sizeof(abuf));
	memset(wbuf, 0, sizeof(wbuf));
	strcpy(cbuf, "one CQ");
	ok(!rdma_post_recv(a, NULL, abuf, sizeof(abuf), amr) &&
		   !rdma_post_send(c, cbuf, cbuf, 7, cmr, IBV_SEND_SIGNALED),
	   "SEND posted");
	ok(rdma_get_send_comp(c, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.opcode == IBV_WC_SEND && wc.wr_id == (uintptr_t)cbuf,
	   "rdma_get_send_comp: the SEND");
	ok(rdma_get_recv_comp(a, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
		   wc.byte_len == 7 && !strcmp(abuf, "one CQ"),
	   "the peer received it");
	strcpy(cbuf, "written");
	ok(!rdma_post_write(c, NULL, cbuf, 8, cmr, IBV_SEND_SIGNALED,
			    (uintptr_t)wbuf, wmr->rkey) &&
		   rdma_get_send_comp(c, &wc) == 1 &&
		   wc.status == IBV_WC_SUCCESS &&
		   wc.opcode == IBV_WC_RDMA_WRITE && !strcmp(wbuf, "written"),
	   "RDMA WRITE into rdma_reg_write memory");
	memset(cbuf, 0, sizeof(cbuf));
	ok(!rdma_post_read(c, NULL, cbuf, 11, cmr, IBV_SEND_SIGNALED,
			   (uintptr_t)rbuf, rmr->rkey) &&
		   rdma_get_send_comp(c, &wc) == 1 &&
		   wc.status == IBV_WC_SUCCESS &&
		   wc.opcode == IBV_WC_RDMA_READ && !strcmp(cbuf, "to be read"),
	   "RDMA READ of rdma_reg_read memory");
	ok(!rdma_post_recv(c, NULL, cbuf, sizeof(cbuf), cmr) &&
		   !rdma_post_send(a, NULL, "back", 5, NULL, IBV_SEND_INLINE) &&
		   rdma_get_recv_comp(c, &wc) == 1 &&
		   wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
		   !strcmp(cbuf, "back"),
	   "rdma_get_recv_comp on the one CQ");
	rdma_dereg_mr(cmr);
	rdma_dereg_mr(amr);
	rdma_dereg_mr(wmr);
	rdma_dereg_mr(rmr);
	close_pair(c, a);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}

/* fails_with -- a call's result is -1 with errno e */
#define fails_with(call, e) (errno = 0, (call) == -1 && errno == (e))

/*
 * test_pdata -- private data at each message's limit and one byte over;
 * an accept the IB CM refuses rejects the request
 */
static void test_pdata(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_cm_id *l, *c, *a = NULL;
	struct ibv_qp_init_attr ia;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct ibv_qp_attr qa;
	uint8_t buf[256];
	int i, qs = -1;

	for (i = 0; i < (int)sizeof(buf); i++)
		buf[i] = (uint8_t)(i + 1);
	if (!sch || !cch)
		bail_out("channels");
	l = listener(sch, RDMA_PS_TCP);
	rc_attr(&ia);
	if (rdma_create_id(cch, &c, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(c, cch, ntohs(rdma_get_src_port(l))) ||
	    rdma_create_qp(c, NULL, &ia))
		bail_out("client");
	memset(&cp, 0, sizeof(cp));
	cp.private_data = buf;
	cp.private_data_len = 57;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	ok(fails_with(rdma_connect(c, &cp), EINVAL), "REQ of 57 bytes: EINVAL");
	cp.private_data_len = 56;
	ok(!rdma_connect(c, &cp), "REQ of 56 bytes");
	ev = cmt_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	ok(ev && ev->param.conn.private_data_len == 56 &&
		   !memcmp(ev->param.conn.private_data, buf, 56),
	   "the request carries the 56 bytes");
	if (ev) {
		a = ev->id;
		rdma_ack_cm_event(ev);
	}
	if (!a)
		goto out;
	rc_attr(&ia);
	ok(!rdma_create_qp(a, NULL, &ia), "passive QP");
	ok(fails_with(rdma_reject(a, buf, 149), EINVAL),
	   "REJ of 149 bytes: EINVAL");
	cp.private_data_len = 197;
	ok(fails_with(rdma_accept(a, &cp), EINVAL), "REP of 197 bytes: EINVAL");
	memset(&qa, 0, sizeof(qa));
	if (!ibv_query_qp(a->qp, &qa, IBV_QP_STATE, &ia))
		qs = qa.qp_state;
	ok(qs == IBV_QPS_ERR, "the passive QP is in ERR (%d)", qs);
	ev = cmt_expect(cch, RDMA_CM_EVENT_REJECTED, 10000);
	ok(ev && ev->status == 28,
	   "the refused accept rejected the request (status 28)");
	if (ev)
		rdma_ack_cm_event(ev);
	cp.private_data_len = 196;
	ok(fails_with(rdma_accept(a, &cp), EINVAL),
	   "accept again after that: EINVAL");
	rdma_destroy_qp(a);
	rdma_destroy_id(a);
	a = NULL;
	rdma_destroy_qp(c);
	rdma_destroy_id(c);

	/* at the limits: REP 196, and REJ 148 */
	rc_attr(&ia);
	if (rdma_create_id(cch, &c, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(c, cch, ntohs(rdma_get_src_port(l))) ||
	    rdma_create_qp(c, NULL, &ia) || rdma_connect(c, NULL))
		bail_out("client 2");
	ev = cmt_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	if (!ev)
		bail_out("request 2");
	a = ev->id;
	rdma_ack_cm_event(ev);
	rc_attr(&ia);
	cp.private_data_len = 196;
	ok(!rdma_create_qp(a, NULL, &ia) && !rdma_accept(a, &cp),
	   "REP of 196 bytes");
	ev = cmt_expect(cch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	ok(ev && ev->param.conn.private_data_len == 196 &&
		   !memcmp(ev->param.conn.private_data, buf, 196),
	   "ESTABLISHED carries the 196 bytes");
	if (ev)
		rdma_ack_cm_event(ev);
	ev = cmt_expect(sch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	if (ev)
		rdma_ack_cm_event(ev);
	close_pair(c, a);
	a = NULL;
	rc_attr(&ia);
	if (rdma_create_id(cch, &c, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(c, cch, ntohs(rdma_get_src_port(l))) ||
	    rdma_create_qp(c, NULL, &ia) || rdma_connect(c, NULL))
		bail_out("client 3");
	ev = cmt_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	if (!ev)
		bail_out("request 3");
	a = ev->id;
	rdma_ack_cm_event(ev);
	ok(!rdma_reject(a, buf, 148), "REJ of 148 bytes");
	ev = cmt_expect(cch, RDMA_CM_EVENT_REJECTED, 10000);
	ok(ev && ev->status == 28 && ev->param.conn.private_data_len == 148 &&
		   !memcmp(ev->param.conn.private_data, buf, 148),
	   "REJECTED carries the 148 bytes");
	if (ev)
		rdma_ack_cm_event(ev);
	rdma_destroy_id(a);
	a = NULL;
out:
	if (a)
		rdma_destroy_id(a);
	rdma_destroy_qp(c);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}

/* connect_no_qp -- a client without a QP connects to l: its id; the
 * request's id in *ap */
static struct rdma_cm_id *connect_no_qp(struct rdma_event_channel *sch,
					struct rdma_event_channel *cch,
					struct rdma_cm_id *l,
					struct rdma_cm_id **ap)
{
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *c;

	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x123;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	if (rdma_create_id(cch, &c, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(c, cch, ntohs(rdma_get_src_port(l))) ||
	    rdma_connect(c, &cp))
		bail_out("client without a QP");
	ev = cmt_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	if (!ev)
		bail_out("its request");
	*ap = ev->id;
	rdma_ack_cm_event(ev);
	return c;
}

/*
 * test_establish_early -- rdma_establish before the REP, or on the
 * passive side, is EINVAL and rejects the connection, as the kernel's
 * rdma_accept without parameters does when the IB CM refuses its RTU
 */
static void test_establish_early(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_cm_id *l, *c, *a;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;

	if (!sch || !cch)
		bail_out("channels");
	l = listener(sch, RDMA_PS_TCP);
	c = connect_no_qp(sch, cch, l, &a);
	ok(fails_with(rdma_establish(c), EINVAL),
	   "rdma_establish before the REP: EINVAL");
	ev = cmt_expect(sch, RDMA_CM_EVENT_REJECTED, 10000);
	ok(ev && ev->id == a && ev->status == 28,
	   "the passive side is REJECTED (28)");
	if (ev)
		rdma_ack_cm_event(ev);
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x456;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	ok(fails_with(rdma_accept(a, &cp), EINVAL), "its accept: EINVAL");
	ok(!cmt_wait(cch, 300), "the active side hears nothing more");
	rdma_destroy_id(a);
	rdma_destroy_id(c);

	c = connect_no_qp(sch, cch, l, &a);
	ok(fails_with(rdma_establish(a), EINVAL),
	   "rdma_establish of a request: EINVAL");
	ev = cmt_expect(cch, RDMA_CM_EVENT_REJECTED, 10000);
	ok(ev && ev->status == 28, "the requester is REJECTED (28)");
	if (ev)
		rdma_ack_cm_event(ev);
	rdma_destroy_id(a);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}

/* test_pdata_udp -- SIDR REQ 180 bytes, SIDR REP 136 */
static void test_pdata_udp(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct rdma_cm_id *l, *c, *a = NULL;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	uint8_t buf[256];

	memset(buf, 0x5a, sizeof(buf));
	if (!sch || !cch)
		bail_out("channels");
	l = listener(sch, RDMA_PS_UDP);
	if (rdma_create_id(cch, &c, NULL, RDMA_PS_UDP) ||
	    cmt_resolve(c, cch, ntohs(rdma_get_src_port(l))))
		bail_out("UD client");
	memset(&cp, 0, sizeof(cp));
	cp.private_data = buf;
	cp.private_data_len = 181;
	ok(fails_with(rdma_connect(c, &cp), EINVAL),
	   "SIDR REQ of 181 bytes: EINVAL");
	cp.private_data_len = 180;
	ok(!rdma_connect(c, &cp), "SIDR REQ of 180 bytes");
	ev = cmt_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	ok(ev && ev->param.ud.private_data_len == 180,
	   "the request carries 180 bytes");
	if (ev) {
		a = ev->id;
		rdma_ack_cm_event(ev);
	}
	if (a) {
		cp.private_data_len = 136;
		ok(!rdma_accept(a, &cp), "SIDR REP of 136 bytes");
		ev = cmt_expect(cch, RDMA_CM_EVENT_ESTABLISHED, 10000);
		ok(ev && ev->param.ud.private_data_len == 136,
		   "ESTABLISHED carries 136 bytes");
		if (ev)
			rdma_ack_cm_event(ev);
		rdma_destroy_id(a);
	}
	rdma_destroy_id(c);

	/* one byte over the SIDR REP's limit: the request is rejected */
	a = NULL;
	if (rdma_create_id(cch, &c, NULL, RDMA_PS_UDP) ||
	    cmt_resolve(c, cch, ntohs(rdma_get_src_port(l))) ||
	    rdma_connect(c, NULL))
		bail_out("UD client 2");
	ev = cmt_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	if (ev) {
		a = ev->id;
		rdma_ack_cm_event(ev);
	}
	cp.private_data_len = 137;
	ok(a && fails_with(rdma_accept(a, &cp), EINVAL),
	   "SIDR REP of 137 bytes: EINVAL");
	ev = cmt_expect(cch, RDMA_CM_EVENT_UNREACHABLE, 10000);
	ok(ev && ev->status == 2,
	   "the client: UNREACHABLE, status 2 (IB_SIDR_REJECT)");
	if (ev)
		rdma_ack_cm_event(ev);
	if (a)
		rdma_destroy_id(a);
	rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}

/* test_misc -- rdma_event_str, ports in each state, rdma_get_devices */
static void test_misc(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibv_context **devs;
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_cm_id *id;
	int i, n = -1, good = 1;

	for (i = RDMA_CM_EVENT_ADDR_RESOLVED; i <= RDMA_CM_EVENT_TIMEWAIT_EXIT;
	     i++) {
		const char *s = rdma_event_str((enum rdma_cm_event_type)i);

		if (!s || strncmp(s, "RDMA_CM_EVENT_", 14))
			good = 0;
	}
	ok(good, "rdma_event_str names every event");
	ok(!strcmp(rdma_event_str((enum rdma_cm_event_type)99),
		   "UNKNOWN EVENT"),
	   "rdma_event_str(99): UNKNOWN EVENT");
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		bail_out("id");
	ok(rdma_get_src_port(id) == 0 && rdma_get_dst_port(id) == 0,
	   "idle: ports 0");
	ok(rdma_get_local_addr(id)->sa_family == 0, "idle: no local address");
	ok(!rdma_bind_addr(id, (struct sockaddr *)&sin), "bound");
	ok(rdma_get_src_port(id) != 0 && rdma_get_dst_port(id) == 0,
	   "bound: a source port, no destination port");
	ok(rdma_get_local_addr(id)->sa_family == AF_INET &&
		   rdma_get_peer_addr(id)->sa_family == 0,
	   "bound: local address AF_INET, no peer");
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	devs = rdma_get_devices(&n);
	ok(devs && n >= 1 && devs[0] && !devs[n], "rdma_get_devices: %d", n);
	rdma_free_devices(devs);
	rdma_free_devices(NULL);
}

int main(void)
{
	setenv("SOFTRDMA_SHM_PREFIX", "cm-rare", 0);
	alarm(120); /* a wait that never ends fails the test */
	test_options();
	test_tos();
	test_notify();
	test_join_ex();
	test_migrate_listener();
	test_migrate_listener_sync();
	test_migrate_sync();
	test_sync_ud_accept();
	test_sendonly();
	test_shared_cq();
	test_pdata();
	test_pdata_udp();
	test_establish_early();
	test_misc();
	return done_testing();
}
