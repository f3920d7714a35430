/* SPDX-License-Identifier: MIT */
/* cm_mcast.c -- softrdma CM: multicast joins and leaves of UD ids */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <rdma/rdma_cma.h>

#include "../tap.h"
#include "cm_util.h"

/* group -- an IPv4 multicast address */
static struct sockaddr_in group(const char *ip)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	inet_pton(AF_INET, ip, &sin.sin_addr);
	return sin;
}

/*
 * test_ipv6 -- librdmacm's RoCE mapping of an IPv6 group: the MGID is the
 * IPv6 address itself (an IPv4 group maps to ::ffff:a.b.c.d on RoCE v2)
 */
static void test_ipv6(struct rdma_event_channel *ch)
{
	struct sockaddr_in6 lo, grp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	int ctx;

	memset(&lo, 0, sizeof(lo));
	lo.sin6_family = AF_INET6;
	lo.sin6_addr = in6addr_loopback;
	grp = lo;
	inet_pton(AF_INET6, "ff0e::db8:7", &grp.sin6_addr);
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_UDP))
		bail_out("create_id");
	if (rdma_bind_addr(id, (struct sockaddr *)&lo)) {
		ok(1, "# SKIP no IPv6 loopback");
		rdma_destroy_id(id);
		return;
	}
	ok(!rdma_join_multicast(id, (struct sockaddr *)&grp, &ctx),
	   "join an IPv6 group");
	ev = cmt_wait(ch, 5000);
	ok(ev && ev->event == RDMA_CM_EVENT_MULTICAST_JOIN &&
		   !memcmp(ev->param.ud.ah_attr.grh.dgid.raw, &grp.sin6_addr,
			   16) &&
		   ev->param.ud.qp_num == 0xffffff &&
		   ev->param.ud.qkey == RDMA_UDP_QKEY &&
		   ev->param.ud.ah_attr.port_num == 1,
	   "IPv6 group: MGID ff0e::db8:7, QPN 0xffffff, RDMA_UDP_QKEY");
	if (ev)
		rdma_ack_cm_event(ev);
	ok(!rdma_leave_multicast(id, (struct sockaddr *)&grp), "leave it");
	ok(!rdma_destroy_id(id), "destroy IPv6 id");
}

/*
 * test_attach_error -- a join whose attach fails (the host's 256 groups
 * taken) comes as MULTICAST_ERROR with status -1 and errno the attach's
 * error, as librdmacm's ucma_process_join (rdma_seterrno) reports it; run
 * on a registry and group table of its own (SOFTRDMA_SHM_PREFIX)
 */
static void test_attach_error(struct rdma_event_channel *ch)
{
	struct sockaddr_in any = cmt_sin(0), g = group("239.9.9.9");
	struct ibv_qp_init_attr ia;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct ibv_qp *fill;
	union ibv_gid mgid;
	int ctx, i, n = 0;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) ||
	    rdma_bind_addr(id, (struct sockaddr *)&any))
		bail_out("UD id");
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, NULL, &ia))
		bail_out("UD QP");
	ia.send_cq = id->send_cq;
	ia.recv_cq = id->recv_cq;
	fill = ibv_create_qp(id->qp->pd, &ia);
	if (!fill)
		bail_out("filler QP");
	memset(&mgid, 0, sizeof(mgid));
	mgid.raw[0] = 0xff;
	mgid.raw[1] = 0x0e;
	for (i = 0; i < 300; i++) {
		mgid.raw[14] = (uint8_t)(i >> 8);
		mgid.raw[15] = (uint8_t)i;
		if (ibv_attach_mcast(fill, &mgid, 0))
			break;
		n++;
	}
	ok(n > 0 && n < 300, "%d groups attached, then the table is full", n);
	ok(!rdma_join_multicast(id, (struct sockaddr *)&g, &ctx),
	   "join one more group");
	errno = 0;
	ev = cmt_wait(ch, 5000);
	ok(ev && ev->event == RDMA_CM_EVENT_MULTICAST_ERROR &&
		   ev->status == -1 && errno == ENOMEM &&
		   ev->param.ud.private_data == &ctx,
	   "MULTICAST_ERROR, status -1, errno ENOMEM (%s %d, errno %d)",
	   ev ? rdma_event_str(ev->event) : "none", ev ? ev->status : 0, errno);
	if (ev)
		rdma_ack_cm_event(ev);
	ok(!rdma_leave_multicast(id, (struct sockaddr *)&g), "leave it");
	for (i = 0; i < n; i++) {
		mgid.raw[14] = (uint8_t)(i >> 8);
		mgid.raw[15] = (uint8_t)i;
		ibv_detach_mcast(fill, &mgid, 0);
	}
	ok(!ibv_destroy_qp(fill), "the filler QP leaves every group");
	rdma_destroy_qp(id);
	ok(!rdma_destroy_id(id), "destroy");
}

int main(void)
{
	struct rdma_event_channel *ch;
	struct sockaddr_in any = cmt_sin(0), g1 = group("239.1.2.3"),
			   g2 = group("239.1.2.4"), uni = cmt_sin(0), g1x;
	struct rdma_cm_join_mc_attr_ex ax;
	struct ibv_qp_init_attr ia;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id, *tcp;
	int ctx1, ctx2;
	char prefix[32];

	/* a registry and group table of our own: test_attach_error fills
	 * the host's group table */
	snprintf(prefix, sizeof(prefix), "cmmc%d", (int)getpid());
	setenv("SOFTRDMA_SHM_PREFIX", prefix, 1);
	ch = rdma_create_event_channel();
	alarm(60);
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) ||
	    rdma_create_id(ch, &tcp, NULL, RDMA_PS_TCP))
		bail_out("create_id");
	errno = 0;
	ok(rdma_join_multicast(id, (struct sockaddr *)&g1, &ctx1) == -1 &&
		   errno == EINVAL,
	   "join before bind/resolve: EINVAL");
	ok(!rdma_bind_addr(id, (struct sockaddr *)&any), "bind UD id");
	ok(!rdma_bind_addr(tcp, (struct sockaddr *)&uni), "bind TCP id");
	errno = 0;
	ok(rdma_join_multicast(tcp, (struct sockaddr *)&g1, &ctx1) == -1 &&
		   errno == EINVAL,
	   "join on an RC id: EINVAL");
	errno = 0;
	ok(rdma_join_multicast(id, (struct sockaddr *)&uni, &ctx1) == -1 &&
		   errno == EINVAL,
	   "join a unicast address: EINVAL");

	ok(!rdma_join_multicast(id, (struct sockaddr *)&g1, &ctx1), "join");
	ev = cmt_wait(ch, 5000);
	ok(ev && ev->event == RDMA_CM_EVENT_MULTICAST_JOIN && ev->id == id &&
		   !ev->status,
	   "MULTICAST_JOIN");
	if (ev) {
		ok(ev->param.ud.private_data == &ctx1,
		   "the join's context comes back in private_data");
		ok(ev->param.ud.ah_attr.is_global &&
			   ev->param.ud.ah_attr.grh.dgid.raw[10] == 0xff &&
			   ev->param.ud.ah_attr.grh.dgid.raw[12] == 239 &&
			   ev->param.ud.ah_attr.grh.dgid.raw[15] == 3,
		   "MGID ::ffff:239.1.2.3");
		ok(ev->param.ud.qp_num == 0xffffff &&
			   ev->param.ud.qkey == RDMA_UDP_QKEY,
		   "multicast QPN and RDMA_UDP_QKEY");
		rdma_ack_cm_event(ev);
	}

	memset(&ax, 0, sizeof(ax));
	ax.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
	ax.addr = (struct sockaddr *)&g2;
	errno = 0;
	ok(rdma_join_multicast_ex(id, &ax, &ctx2) == -1 && errno == EINVAL,
	   "join_ex without flags: EINVAL");
	ax.comp_mask |= RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	ax.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
	errno = 0;
	ok(rdma_join_multicast_ex(id, &ax, &ctx2) == -1 && errno == EINVAL,
	   "join_ex with reserved flags: EINVAL");
	ax.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
	ok(!rdma_join_multicast_ex(id, &ax, &ctx2), "join_ex send-only");
	ev = cmt_wait(ch, 5000);
	ok(ev && ev->event == RDMA_CM_EVENT_MULTICAST_JOIN &&
		   ev->param.ud.private_data == &ctx2,
	   "MULTICAST_JOIN for the send-only join");
	if (ev)
		rdma_ack_cm_event(ev);

	errno = 0;
	ok(rdma_leave_multicast(id, (struct sockaddr *)&uni) == -1 &&
		   errno == EADDRNOTAVAIL,
	   "leave a group never joined: EADDRNOTAVAIL");
	/* librdmacm's rdma_leave_multicast compares the whole sockaddr
	 * (memcmp of its length): another port names no joined group */
	g1x = g1;
	g1x.sin_port = htons(4791);
	errno = 0;
	ok(rdma_leave_multicast(id, (struct sockaddr *)&g1x) == -1 &&
		   errno == EADDRNOTAVAIL,
	   "leave with the group's address but another port: EADDRNOTAVAIL");
	ok(!rdma_leave_multicast(id, (struct sockaddr *)&g1), "leave");
	errno = 0;
	ok(rdma_leave_multicast(id, (struct sockaddr *)&g1) == -1 &&
		   errno == EADDRNOTAVAIL,
	   "leave twice: EADDRNOTAVAIL");

	/* with a QP the join attaches it (or reports MULTICAST_ERROR) */
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ok(!rdma_create_qp(id, NULL, &ia), "UD QP");
	ok(!rdma_join_multicast(id, (struct sockaddr *)&g1, &ctx1),
	   "join with a QP");
	ev = cmt_wait(ch, 5000);
	ok(ev && (ev->event == RDMA_CM_EVENT_MULTICAST_JOIN ||
		  ev->event == RDMA_CM_EVENT_MULTICAST_ERROR),
	   "MULTICAST_JOIN (QP attached) or MULTICAST_ERROR (attach failed)");
	if (ev) {
		diag("%s status %d", rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
	}
	/* an unacked join event: destroy waits for it; here it is queued */
	ok(!rdma_join_multicast(id, (struct sockaddr *)&g1, &ctx2),
	   "join again, event left queued");
	/* as with the kernel's verbs, an attached QP cannot be destroyed
	 * (EBUSY: rdma_destroy_qp would leak it): leave first */
	ok(!rdma_leave_multicast(id, (struct sockaddr *)&g1),
	   "leave (detaches the QP)");
	/* the join left was the second, whose event was never taken: the
	 * QP is detached all the same, as librdmacm detaches at every leave */
	ok(!ibv_destroy_qp(id->qp),
	   "the QP is no group's member: ibv_destroy_qp succeeds");
	id->qp = NULL;
	rdma_leave_multicast(id, (struct sockaddr *)&g1);
	rdma_destroy_qp(id);
	ok(!rdma_destroy_id(id), "destroy leaves every group");
	ok(!rdma_destroy_id(tcp), "destroy");
	test_ipv6(ch);
	test_attach_error(ch);
	rdma_destroy_event_channel(ch);
	return done_testing();
}
