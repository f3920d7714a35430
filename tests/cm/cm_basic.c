/* SPDX-License-Identifier: MIT */
/* cm_basic.c -- softrdma CM: ids, events, handshake between two processes */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "../tap.h"
#include "cm_util.h"

#define CLIENT_QPN 0x1234
#define SERVER_QPN 0x5678

/* fill -- a recognisable pattern */
static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/* srv_accept_scenario -- S1: pdata both ways, limits, disconnect */
static void srv_accept_scenario(struct rdma_event_channel *ch,
				struct rdma_cm_id *l)
{
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *c;
	uint8_t want[56], rep[200];

	ev = cmt_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	SCHECK(ev, "S1 connect request");
	if (!ev)
		return;
	c = ev->id;
	fill(want, sizeof(want), 1);
	SCHECK(ev->listen_id == l, "S1 listen_id is the listener");
	SCHECK(c != l, "S1 id is a new id");
	SCHECK(c->context == l->context, "S1 child inherits context");
	SCHECK(ev->param.conn.private_data_len == 56,
	       "S1 REQ private data is 56 bytes on PS_TCP (got %d)",
	       ev->param.conn.private_data_len);
	SCHECK(ev->param.conn.private_data &&
		       !memcmp(ev->param.conn.private_data, want, 56),
	       "S1 REQ private data intact");
	SCHECK(ev->param.conn.qp_num == CLIENT_QPN, "S1 qp_num 0x%x",
	       ev->param.conn.qp_num);
	SCHECK(ev->param.conn.responder_resources == 2 &&
		       ev->param.conn.initiator_depth == 3,
	       "S1 rd atomic params swapped (%d %d)",
	       ev->param.conn.responder_resources,
	       ev->param.conn.initiator_depth);
	SCHECK(c->verbs && c->port_num == 1, "S1 child has the device");
	SCHECK(rdma_get_peer_addr(c)->sa_family == AF_INET,
	       "S1 child peer address");
	rdma_ack_cm_event(ev);

	memset(&cp, 0, sizeof(cp));
	fill(rep, sizeof(rep), 2);
	cp.private_data = rep;
	cp.private_data_len = 197;
	cp.qp_num = SERVER_QPN;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	/* an accept of 197 bytes would reject the request, as the kernel's
	 * rdma_accept does (tests/cm/cm_rare); a REJ of 149 leaves it */
	errno = 0;
	SCHECK(rdma_reject(c, rep, 149) == -1 && errno == EINVAL,
	       "S1 reject with 149 bytes: EINVAL");
	errno = 0;
	SCHECK(rdma_accept(l, &cp) == -1 && errno == EINVAL,
	       "S1 accept on the listener: EINVAL");
	cp.private_data_len = 196;
	SCHECK(!rdma_accept(c, &cp), "S1 accept");
	ev = cmt_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	SCHECK(ev && ev->id == c, "S1 established");
	if (ev)
		rdma_ack_cm_event(ev);
	ev = cmt_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 10000);
	SCHECK(ev && ev->id == c, "S1 disconnected");
	if (ev)
		rdma_ack_cm_event(ev);
	SCHECK(!rdma_disconnect(c), "S1 disconnect after peer's: 0");
	SCHECK(!rdma_destroy_id(c), "S1 destroy child");
}

/* srv_reject_scenario -- S2: reject with private data */
static void srv_reject_scenario(struct rdma_event_channel *ch)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *c;

	ev = cmt_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	SCHECK(ev, "S2 connect request");
	if (!ev)
		return;
	c = ev->id;
	rdma_ack_cm_event(ev);
	SCHECK(!rdma_reject(c, "nope-pdata", 10), "S2 reject");
	errno = 0;
	SCHECK(rdma_accept(c, NULL) == -1 && errno == EINVAL,
	       "S2 accept after reject: EINVAL");
	SCHECK(!rdma_destroy_id(c), "S2 destroy");
}

/* srv_ep_scenario -- S3: synchronous passive side via rdma_create_ep */
static void srv_ep_scenario(int pfd)
{
	struct rdma_addrinfo hints, *res;
	struct rdma_conn_param cp;
	struct rdma_cm_id *l, *c;

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_PASSIVE | RAI_NUMERICHOST;
	hints.ai_port_space = RDMA_PS_TCP;
	if (rdma_getaddrinfo("127.0.0.1", "0", &hints, &res)) {
		SCHECK(0, "S3 getaddrinfo");
		cmt_write_u16(pfd, 0);
		return;
	}
	SCHECK(!rdma_create_ep(&l, res, NULL, NULL), "S3 create_ep");
	rdma_freeaddrinfo(res);
	SCHECK(!rdma_listen(l, 1), "S3 listen");
	cmt_write_u16(pfd, ntohs(rdma_get_src_port(l)));
	SCHECK(!rdma_get_request(l, &c), "S3 get_request");
	SCHECK(c->event && c->event->event == RDMA_CM_EVENT_CONNECT_REQUEST,
	       "S3 request event kept on the id");
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = SERVER_QPN;
	cp.private_data = "sync-ok";
	cp.private_data_len = 7;
	SCHECK(!rdma_accept(c, &cp), "S3 synchronous accept");
	SCHECK(c->event && c->event->event == RDMA_CM_EVENT_ESTABLISHED,
	       "S3 accept returned on ESTABLISHED");
	SCHECK(!rdma_disconnect(c), "S3 synchronous disconnect");
	rdma_destroy_ep(c);
	rdma_destroy_ep(l);
}

/* server_main -- the passive process of S1..S3 */
static int server_main(int pfd)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_cm_id *l;
	int ctx;

	if (!ch || rdma_create_id(ch, &l, &ctx, RDMA_PS_TCP))
		return 1;
	if (rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 4))
		return 1;
	cmt_write_u16(pfd, ntohs(rdma_get_src_port(l)));
	srv_accept_scenario(ch, l);
	srv_reject_scenario(ch);
	SCHECK(!rdma_destroy_id(l), "destroy listener");
	rdma_destroy_event_channel(ch);
	srv_ep_scenario(pfd);
	return srv_fails ? 1 : 0;
}

/* victim_main -- S4: accepts one connection, then waits to be killed */
static int victim_main(int pfd)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *c;

	c = cmt_listen_one(ch, pfd);
	if (!c)
		return 1;
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = SERVER_QPN;
	if (rdma_accept(c, &cp))
		return 1;
	ev = cmt_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	if (!ev)
		return 1;
	rdma_ack_cm_event(ev);
	for (;;)
		pause();
}

/* test_api_errors -- argument and state checks without a peer */
static void test_api_errors(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = cmt_sin(0);
	struct sockaddr_un_like {
		sa_family_t f;
		char p[14];
	} un = {AF_UNIX, "x"};
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp;
	struct rdma_cm_id *id, *id2;
	uint8_t tos = 32, big[64];
	int one = 1, fl;

	ok(ch && ch->fd >= 0, "event channel has an fd");
	errno = 0;
	ok(rdma_create_id(ch, NULL, NULL, RDMA_PS_TCP) == -1 && errno == EINVAL,
	   "create_id(NULL id): EINVAL");
	errno = 0;
	ok(rdma_create_id(ch, &id, NULL, (enum rdma_port_space)7) == -1 &&
		   errno == EINVAL,
	   "create_id(bad port space): EINVAL");
	errno = 0;
	ok(rdma_get_cm_event(NULL, &ev) == -1 && errno == EINVAL,
	   "get_cm_event(NULL): EINVAL");
	errno = 0;
	ok(rdma_ack_cm_event(NULL) == -1 && errno == EINVAL,
	   "ack_cm_event(NULL): EINVAL");
	ok(!strcmp(rdma_event_str(RDMA_CM_EVENT_ESTABLISHED),
		   "RDMA_CM_EVENT_ESTABLISHED"),
	   "event_str");
	ok(!strcmp(rdma_event_str((enum rdma_cm_event_type)99),
		   "UNKNOWN EVENT"),
	   "event_str(unknown)");

	{
		struct ibv_qp_init_attr qia;
		struct ibv_qp_attr qa;
		int mask;

		memset(&qia, 0, sizeof(qia));
		errno = 0;
		ok(rdma_destroy_id(NULL) == -1 && errno == EINVAL &&
			   rdma_listen(NULL, 1) == -1 &&
			   rdma_connect(NULL, NULL) == -1 &&
			   rdma_accept(NULL, NULL) == -1 &&
			   rdma_reject(NULL, NULL, 0) == -1 &&
			   rdma_disconnect(NULL) == -1 &&
			   rdma_establish(NULL) == -1 &&
			   rdma_resolve_route(NULL, 1) == -1 &&
			   rdma_bind_addr(NULL, NULL) == -1 &&
			   rdma_migrate_id(NULL, ch) == -1 &&
			   rdma_set_option(NULL, 0, 0, &mask, 4) == -1 &&
			   rdma_init_qp_attr(NULL, &qa, &mask) == -1 &&
			   rdma_create_qp(NULL, NULL, &qia) == -1 &&
			   rdma_get_request(NULL, NULL) == -1 &&
			   rdma_create_ep(NULL, NULL, NULL, NULL) == -1 &&
			   rdma_notify(NULL, IBV_EVENT_COMM_EST) == -1 &&
			   errno == EINVAL,
		   "NULL ids: -1, EINVAL, no crash");
		ok(rdma_get_src_port(NULL) == 0 && rdma_get_dst_port(NULL) == 0,
		   "ports of NULL: 0");
		rdma_destroy_qp(NULL);
		rdma_destroy_ep(NULL);
		rdma_destroy_event_channel(NULL);
		rdma_freeaddrinfo(NULL);
	}

	fl = fcntl(ch->fd, F_GETFL);
	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
	errno = 0;
	ok(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN,
	   "non-blocking channel, nothing queued: EAGAIN");
	fcntl(ch->fd, F_SETFL, fl);

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		bail_out("create_id");
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = CLIENT_QPN;
	errno = 0;
	ok(rdma_connect(id, &cp) == -1 && errno == EINVAL,
	   "connect before resolve: EINVAL");
	errno = 0;
	ok(rdma_get_request(id, &id2) == -1 && errno == EINVAL,
	   "get_request on an asynchronous id: EINVAL");
	errno = 0;
	ok(rdma_establish(id) == -1 && errno == EINVAL,
	   "establish before connect: EINVAL");
	{
		struct ibv_qp_attr qa;
		int mask;

		memset(&qa, 0, sizeof(qa));
		qa.qp_state = IBV_QPS_RTR;
		errno = 0;
		ok(rdma_init_qp_attr(id, &qa, &mask) == -1 && errno == EINVAL,
		   "init_qp_attr without a device: EINVAL");
	}
	errno = 0;
	ok(rdma_accept(id, &cp) == -1 && errno == EINVAL,
	   "accept on a fresh id: EINVAL");
	errno = 0;
	ok(rdma_reject(id, NULL, 0) == -1 && errno == EINVAL,
	   "reject on a fresh id: EINVAL");
	errno = 0;
	ok(rdma_disconnect(id) == -1 && errno == EINVAL,
	   "disconnect on a fresh id: EINVAL");
	errno = 0;
	ok(rdma_resolve_route(id, 100) == -1 && errno == EINVAL,
	   "resolve_route before resolve_addr: EINVAL");
	errno = 0;
	ok(rdma_resolve_addr(id, NULL, NULL, 100) == -1 && errno == EINVAL,
	   "resolve_addr(NULL dst): EINVAL");
	errno = 0;
	ok(rdma_bind_addr(id, NULL) == -1 && errno == EINVAL,
	   "bind(NULL): EINVAL");
	errno = 0;
	ok(rdma_bind_addr(id, (struct sockaddr *)&un) == -1 &&
		   errno == EAFNOSUPPORT,
	   "bind(AF_UNIX): EAFNOSUPPORT");
	errno = 0;
	ok(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 4) ==
			   -1 &&
		   errno == EINVAL,
	   "set_option(TOS, wrong length): EINVAL");
	ok(!rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1),
	   "set_option(TOS)");
	ok(!rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one,
			    sizeof(one)),
	   "set_option(REUSEADDR)");
	ok(!rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
			    &tos, 1),
	   "set_option(ACK_TIMEOUT)");
	errno = 0;
	ok(rdma_set_option(id, RDMA_OPTION_ID, 77, &one, sizeof(one)) == -1 &&
		   errno == ENOSYS,
	   "set_option(unknown name): ENOSYS");
	errno = 0;
	ok(rdma_set_option(id, 42, 0, &one, sizeof(one)) == -1 &&
		   errno == ENOSYS,
	   "set_option(unknown level): ENOSYS");

	ok(!rdma_bind_addr(id, (struct sockaddr *)&sin), "bind 127.0.0.1:0");
	ok(rdma_get_src_port(id) != 0, "bind picked a port");
	ok(id->verbs != NULL && id->port_num == 1,
	   "bound to an address: id has the device, port 1");
	errno = 0;
	ok(rdma_bind_addr(id, (struct sockaddr *)&sin) == -1 && errno == EINVAL,
	   "bind twice: EINVAL");
	ok(!rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one,
			    sizeof(one)),
	   "set_option(AFONLY) after bind: taken, as rdma_set_afonly does "
	   "until the id listens");
	ok(!rdma_listen(id, 0), "listen");
	errno = 0;
	ok(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one,
			   sizeof(one)) == -1 &&
		   errno == EINVAL,
	   "set_option(AFONLY) on a listener: EINVAL");
	errno = 0;
	ok(rdma_listen(id, 0) == -1 && errno == EINVAL, "listen twice: EINVAL");
	errno = 0;
	ok(rdma_connect(id, &cp) == -1 && errno == EINVAL,
	   "connect on a listener: EINVAL");

	/* resolution on a second id */
	if (rdma_create_id(ch, &id2, NULL, RDMA_PS_TCP))
		bail_out("create_id");
	sin = cmt_sin(4791);
	ok(!rdma_resolve_addr(id2, NULL, (struct sockaddr *)&sin, 2000),
	   "resolve_addr 127.0.0.1");
	ev = cmt_wait(ch, 5000);
	ok(ev && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED && ev->id == id2 &&
		   ev->status == 0,
	   "ADDR_RESOLVED");
	if (ev)
		rdma_ack_cm_event(ev);
	ok(id2->verbs != NULL && id2->verbs == id->verbs,
	   "one device context shared by the ids");
	ok(id2->pd != NULL, "default PD");
	ok(rdma_get_local_addr(id2)->sa_family == AF_INET &&
		   ((struct sockaddr_in *)rdma_get_local_addr(id2))
				   ->sin_addr.s_addr == htonl(INADDR_LOOPBACK),
	   "local address 127.0.0.1");
	ok(ntohs(rdma_get_dst_port(id2)) == 4791 && rdma_get_src_port(id2),
	   "ports");
	ok(id2->route.addr.addr.ibaddr.sgid.raw[10] == 0xff &&
		   id2->route.addr.addr.ibaddr.sgid.raw[12] == 127 &&
		   id2->route.addr.addr.ibaddr.dgid.raw[15] == 1,
	   "IPv4-mapped sgid/dgid");
	errno = 0;
	ok(rdma_resolve_addr(id2, NULL, (struct sockaddr *)&sin, 2000) == -1 &&
		   errno == EINVAL,
	   "resolve_addr twice: EINVAL");
	{
		struct ibv_qp_attr qa;
		int mask = 0;

		memset(&qa, 0, sizeof(qa));
		qa.qp_state = IBV_QPS_INIT;
		ok(!rdma_init_qp_attr(id2, &qa, &mask) &&
			   mask == (IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) &&
			   qa.port_num == 1 && qa.qp_access_flags == 0,
		   "init_qp_attr(INIT) before connect: port 1, no access");
		qa.qp_state = IBV_QPS_RTR;
		errno = 0;
		ok(rdma_init_qp_attr(id2, &qa, &mask) == -1 && errno == EINVAL,
		   "init_qp_attr(RTR) before the peer is known: EINVAL");
	}
	ok(!rdma_resolve_route(id2, 2000), "resolve_route");
	ev = cmt_wait(ch, 5000);
	ok(ev && ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED, "ROUTE_RESOLVED");
	if (ev)
		rdma_ack_cm_event(ev);
	ok(id2->route.num_paths == 1 && id2->route.path_rec, "one path record");
	memset(big, 0, sizeof(big));
	cp.private_data = big;
	cp.private_data_len = 57;
	errno = 0;
	ok(rdma_connect(id2, &cp) == -1 && errno == EINVAL,
	   "connect with 57 bytes of private data on PS_TCP: EINVAL");
	ok(!rdma_destroy_id(id2), "destroy resolved id");

	/* PS_IB has no CMA header: 92 bytes */
	if (rdma_create_id(ch, &id2, NULL, RDMA_PS_IB))
		bail_out("create_id");
	if (cmt_resolve(id2, ch, 4791))
		bail_out("resolve");
	cp.private_data_len = 93;
	errno = 0;
	ok(rdma_connect(id2, &cp) == -1 && errno == EINVAL,
	   "connect with 93 bytes on PS_IB: EINVAL");
	ok(!rdma_destroy_id(id2), "destroy PS_IB id");
	ok(!rdma_destroy_id(id), "destroy listener");
	rdma_destroy_event_channel(ch);
}

/* bind_id -- a new id on ch bound to ip:port; -1 with errno on failure */
static int bind_id(struct rdma_event_channel *ch, struct rdma_cm_id **id,
		   uint32_t ip, uint16_t port, int reuse)
{
	struct sockaddr_in sin = cmt_sin(port);

	sin.sin_addr.s_addr = htonl(ip);
	if (rdma_create_id(ch, id, NULL, RDMA_PS_TCP))
		bail_out("create_id");
	if (reuse &&
	    rdma_set_option(*id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR,
			    &reuse, sizeof(reuse)))
		bail_out("REUSEADDR");
	errno = 0;
	return rdma_bind_addr(*id, (struct sockaddr *)&sin);
}

/*
 * test_bind_conflicts -- the kernel's cma_check_port: an id may not take
 * an address and port another id holds (EADDRINUSE), nor share a port
 * where either address is a wildcard (EADDRNOTAVAIL), listening or not,
 * unless both set REUSEADDR and the holder does not listen.  vport: a
 * wildcard listener of another process.
 */
static void test_bind_conflicts(uint16_t vport)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *a, *b, *w;
	uint16_t p, q;

	if (bind_id(ch, &a, INADDR_LOOPBACK, 0, 0))
		bail_out("bind");
	p = ntohs(rdma_get_src_port(a));
	ok(bind_id(ch, &b, INADDR_LOOPBACK, p, 0) == -1 && errno == EADDRINUSE,
	   "bind the address:port a bound id holds: EADDRINUSE");
	rdma_destroy_id(b);
	ok(bind_id(ch, &b, INADDR_ANY, p, 0) == -1 && errno == EADDRNOTAVAIL,
	   "bind the wildcard on its port: EADDRNOTAVAIL");
	rdma_destroy_id(b);
	if (rdma_listen(a, 1))
		bail_out("listen");
	ok(bind_id(ch, &b, INADDR_LOOPBACK, p, 0) == -1 && errno == EADDRINUSE,
	   "bind the address:port a listener holds: EADDRINUSE");
	rdma_destroy_id(b);
	ok(bind_id(ch, &b, INADDR_ANY, p, 0) == -1 && errno == EADDRNOTAVAIL,
	   "bind the wildcard on a listener's port: EADDRNOTAVAIL");
	rdma_destroy_id(b);
	rdma_destroy_id(a);
	ok(!bind_id(ch, &a, INADDR_LOOPBACK, p, 0),
	   "the port is free once its id is destroyed");
	rdma_destroy_id(a);

	if (bind_id(ch, &w, INADDR_ANY, 0, 0) || rdma_listen(w, 1))
		bail_out("wildcard listener");
	q = ntohs(rdma_get_src_port(w));
	ok(bind_id(ch, &b, INADDR_LOOPBACK, q, 0) == -1 &&
		   errno == EADDRNOTAVAIL,
	   "bind an address on a wildcard listener's port: EADDRNOTAVAIL");
	rdma_destroy_id(b);
	ok(bind_id(ch, &b, INADDR_ANY, q, 0) == -1 && errno == EADDRNOTAVAIL,
	   "a second wildcard listener: EADDRNOTAVAIL");
	rdma_destroy_id(b);
	rdma_destroy_id(w);

	if (bind_id(ch, &a, INADDR_LOOPBACK, 0, 1))
		bail_out("bind");
	p = ntohs(rdma_get_src_port(a));
	ok(!bind_id(ch, &b, INADDR_LOOPBACK, p, 1),
	   "both REUSEADDR: the same address:port");
	errno = 0;
	ok(rdma_listen(b, 1) == -1 && errno == EADDRINUSE,
	   "but listening on it: EADDRINUSE");
	rdma_destroy_id(b);
	ok(!rdma_listen(a, 1), "alone again: listen");
	ok(bind_id(ch, &b, INADDR_LOOPBACK, p, 1) == -1 && errno == EADDRINUSE,
	   "REUSEADDR on a listener's address:port: EADDRINUSE");
	rdma_destroy_id(b);
	rdma_destroy_id(a);

	/* the victim process listens on the wildcard of vport */
	ok(bind_id(ch, &b, INADDR_ANY, vport, 0) == -1 &&
		   errno == EADDRNOTAVAIL,
	   "another process's wildcard listener: EADDRNOTAVAIL");
	rdma_destroy_id(b);
	rdma_destroy_event_channel(ch);
}

/* test_getaddrinfo -- rdma_getaddrinfo flavours */
static void test_getaddrinfo(void)
{
	struct rdma_addrinfo hints, *res;
	struct ibv_context **devs;
	int n = -1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_NUMERICHOST;
	hints.ai_port_space = RDMA_PS_TCP;
	ok(!rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res),
	   "getaddrinfo numeric");
	ok(res->ai_dst_addr && res->ai_dst_addr->sa_family == AF_INET &&
		   ntohs(((struct sockaddr_in *)res->ai_dst_addr)->sin_port) ==
			   7471 &&
		   res->ai_qp_type == IBV_QPT_RC &&
		   res->ai_port_space == RDMA_PS_TCP && !res->ai_src_addr,
	   "active result: destination, RC, PS_TCP");
	rdma_freeaddrinfo(res);
	hints.ai_flags = RAI_PASSIVE;
	ok(!rdma_getaddrinfo(NULL, "7471", &hints, &res),
	   "getaddrinfo passive");
	ok(res->ai_src_addr && (res->ai_flags & RAI_PASSIVE) &&
		   !res->ai_dst_addr,
	   "passive result: source address");
	rdma_freeaddrinfo(res);
	ok(!rdma_getaddrinfo("localhost", "7471", NULL, &res),
	   "getaddrinfo by name, no hints");
	ok(res->ai_dst_addr != NULL, "name resolved");
	rdma_freeaddrinfo(res);
	hints.ai_flags = RAI_NUMERICHOST;
	n = rdma_getaddrinfo("not-an-address", "1", &hints, &res);
	ok(n == EAI_NONAME,
	   "numeric host that is a name: returns EAI_NONAME itself, for "
	   "gai_strerror, as librdmacm (got %d)",
	   n);
	n = -1;
	errno = 0;
	ok(rdma_getaddrinfo(NULL, NULL, NULL, &res) == -1 && errno == EINVAL,
	   "getaddrinfo(nothing): EINVAL");
	devs = rdma_get_devices(&n);
	ok(devs && n == 1 && devs[0] && !devs[1], "get_devices: one device");
	rdma_free_devices(devs);
}

/* client_accept_scenario -- C1 against S1 */
static void client_accept_scenario(uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	uint8_t pd[56], want[196];
	long long t0;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(id, ch, port))
		bail_out("C1 resolve");
	fill(pd, sizeof(pd), 1);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = pd;
	cp.private_data_len = 56;
	cp.qp_num = CLIENT_QPN;
	cp.responder_resources = 3;
	cp.initiator_depth = 2;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	ok(!rdma_connect(id, &cp), "connect with 56 bytes of private data");
	errno = 0;
	ok(rdma_accept(id, &cp) == -1 && errno == EINVAL,
	   "accept on an active id: EINVAL");
	errno = 0;
	ok(rdma_connect(id, &cp) == -1 && errno == EINVAL,
	   "connect twice: EINVAL");
	ev = cmt_expect(ch, RDMA_CM_EVENT_CONNECT_RESPONSE, 10000);
	ok(ev != NULL, "no QP: CONNECT_RESPONSE");
	if (ev) {
		fill(want, sizeof(want), 2);
		ok(ev->param.conn.private_data_len == 196 &&
			   !memcmp(ev->param.conn.private_data, want, 196),
		   "REP private data: 196 bytes, intact");
		is_int(ev->param.conn.qp_num, SERVER_QPN, "REP qp_num");
		ok(ev->param.conn.responder_resources == 1 &&
			   ev->param.conn.initiator_depth == 1,
		   "REP rd atomic params");
		rdma_ack_cm_event(ev);
	}
	ok(!rdma_establish(id), "establish");
	errno = 0;
	ok(rdma_establish(id) == -1 && errno == EINVAL,
	   "establish twice: EINVAL");
	t0 = cmt_now_ms();
	ok(!rdma_disconnect(id), "disconnect");
	ev = cmt_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000);
	ok(ev && ev->id == id, "DISCONNECTED on the side that disconnects");
	diag("DREQ/DREP round trip %lld ms", cmt_now_ms() - t0);
	if (ev)
		rdma_ack_cm_event(ev);
	ev = cmt_wait(ch, 200);
	ok(!ev, "no further event at once");
	if (ev)
		rdma_ack_cm_event(ev);
	t0 = cmt_now_ms();
	ev = cmt_wait(ch, 5000);
	ok(ev && ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT && ev->id == id,
	   "TIMEWAIT_EXIT later, as the IB CM leaves timewait");
	diag("TIMEWAIT_EXIT %lld ms after that", cmt_now_ms() - t0);
	if (ev)
		rdma_ack_cm_event(ev);
	ok(!rdma_destroy_id(id), "destroy");
	rdma_destroy_event_channel(ch);
}

/* client_reject_scenario -- C2 against S2, then C3: nobody listening */
static void client_reject_scenario(uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	int hold;
	uint8_t zero[148 - 10];

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(id, ch, port))
		bail_out("C2 resolve");
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = CLIENT_QPN;
	ok(!rdma_connect(id, &cp), "connect (to be rejected)");
	ev = cmt_expect(ch, RDMA_CM_EVENT_REJECTED, 10000);
	ok(ev != NULL, "REJECTED");
	if (ev) {
		memset(zero, 0, sizeof(zero));
		is_int(ev->status, 28, "status IB_CM_REJ_CONSUMER_DEFINED");
		ok(ev->param.conn.private_data_len == 148 &&
			   !memcmp(ev->param.conn.private_data, "nope-pdata",
				   10) &&
			   !memcmp((const uint8_t *)
						   ev->param.conn.private_data +
					   10,
				   zero, sizeof(zero)),
		   "rejecter's private data (148 bytes, zero padded)");
		rdma_ack_cm_event(ev);
	}
	ok(!rdma_destroy_id(id), "destroy rejected id");

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(id, ch, cmt_free_port(&hold)))
		bail_out("C3 resolve");
	ok(!rdma_connect(id, &cp), "connect to a port nobody listens on");
	ev = cmt_wait(ch, 10000);
	ok(ev && ev->event == RDMA_CM_EVENT_REJECTED && ev->status == 8,
	   "REJECTED, status 8 (IB_CM_REJ_INVALID_SERVICE_ID)");
	if (ev)
		rdma_ack_cm_event(ev);
	close(hold);
	ok(!rdma_destroy_id(id), "destroy");
	rdma_destroy_event_channel(ch);
}

/* client_sync_scenario -- C4 against S3, C5 synchronous refusal */
static void client_sync_scenario(uint16_t port)
{
	struct sockaddr_in dst = cmt_sin(port);
	struct rdma_conn_param cp;
	struct rdma_cm_id *id;
	int hold;

	ok(!rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP),
	   "synchronous id (NULL channel)");
	ok(id->channel != NULL, "synchronous id has its own channel");
	ok(!rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000),
	   "synchronous resolve_addr");
	ok(id->event && id->event->event == RDMA_CM_EVENT_ADDR_RESOLVED,
	   "its event is in id->event");
	ok(!rdma_resolve_route(id, 2000), "synchronous resolve_route");
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = CLIENT_QPN;
	ok(!rdma_connect(id, &cp), "synchronous connect");
	ok(id->event && id->event->event == RDMA_CM_EVENT_CONNECT_RESPONSE &&
		   !memcmp(id->event->param.conn.private_data, "sync-ok", 7),
	   "CONNECT_RESPONSE with the accept's private data");
	ok(!rdma_establish(id), "establish");
	ok(!rdma_disconnect(id), "synchronous disconnect");
	ok(id->event && id->event->event == RDMA_CM_EVENT_DISCONNECTED,
	   "returned on DISCONNECTED");
	ok(!rdma_destroy_id(id), "destroy synchronous id");

	dst = cmt_sin(cmt_free_port(&hold));
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) ||
	    rdma_resolve_route(id, 2000))
		bail_out("C5 resolve");
	errno = 0;
	ok(rdma_connect(id, &cp) == -1 && errno == ECONNREFUSED,
	   "synchronous connect to nobody: ECONNREFUSED");
	close(hold);
	ok(!rdma_destroy_id(id), "destroy");
}

/* client_kill_scenario -- C6: the peer dies: DISCONNECTED promptly */
static void client_kill_scenario(pid_t victim, uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	long long t0;
	int st;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(id, ch, port))
		bail_out("C6 resolve");
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = CLIENT_QPN;
	ok(!rdma_connect(id, &cp), "connect to the victim");
	ev = cmt_expect(ch, RDMA_CM_EVENT_CONNECT_RESPONSE, 10000);
	ok(ev != NULL, "CONNECT_RESPONSE");
	if (ev)
		rdma_ack_cm_event(ev);
	ok(!rdma_establish(id), "establish");
	usleep(100000);
	t0 = cmt_now_ms();
	kill(victim, SIGKILL);
	ev = cmt_wait(ch, 3000);
	ok(ev && ev->event == RDMA_CM_EVENT_DISCONNECTED,
	   "peer SIGKILLed: DISCONNECTED within 3 s");
	diag("DISCONNECTED %lld ms after SIGKILL", cmt_now_ms() - t0);
	if (ev)
		rdma_ack_cm_event(ev);
	waitpid(victim, &st, 0);
	ok(!rdma_destroy_id(id), "destroy");
	rdma_destroy_event_channel(ch);
}

struct acker {
	struct rdma_cm_event *ev;
	int delay_ms;
};

/* acker_main -- ack an event later, from another thread */
static void *acker_main(void *arg)
{
	struct acker *a = arg;

	usleep((useconds_t)a->delay_ms * 1000);
	rdma_ack_cm_event(a->ev);
	return NULL;
}

/*
 * test_backlog -- a request beyond the backlog is not answered (on
 * hardware the ucma drops it and the active CM resends its REQ): it comes
 * once the user takes a pending one.  Then notify.
 */
static void test_backlog(void)
{
	struct rdma_event_channel *lch = rdma_create_event_channel();
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *a, *b, *c;
	uint16_t port;

	if (rdma_create_id(lch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 1))
		bail_out("listener");
	port = ntohs(rdma_get_src_port(l));
	if (rdma_create_id(ch, &a, NULL, RDMA_PS_TCP) ||
	    rdma_create_id(ch, &b, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(a, ch, port) || cmt_resolve(b, ch, port))
		bail_out("clients");
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = CLIENT_QPN;
	ok(!rdma_connect(a, &cp), "backlog 1: first connect");
	usleep(200000);
	ok(!rdma_connect(b, &cp), "second connect while the first is pending");
	ev = cmt_wait(ch, 500);
	ok(!ev, "beyond the backlog: no answer (no REJECTED, no reason 8)");
	if (ev) {
		diag("got %s status %d", rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
	}
	ev = cmt_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
	ok(ev != NULL, "the first request is there");
	c = ev ? ev->id : NULL;
	if (ev)
		rdma_ack_cm_event(ev);
	ev = cmt_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
	ok(ev != NULL, "taking it lets the held request in");
	if (ev) {
		ok(!rdma_reject(ev->id, NULL, 0), "reject the second");
		rdma_destroy_id(ev->id);
		rdma_ack_cm_event(ev);
	}
	ev = cmt_wait(ch, 5000);
	ok(ev && ev->event == RDMA_CM_EVENT_REJECTED && ev->id == b &&
		   ev->status == 28,
	   "the second client: REJECTED (28) by the user, not by the CM");
	if (ev)
		rdma_ack_cm_event(ev);
	errno = 0;
	ok(rdma_notify(a, IBV_EVENT_COMM_EST) == -1 && errno == EINVAL,
	   "notify(COMM_EST) on an id waiting for its REP: EINVAL");
	if (c) {
		cp.qp_num = SERVER_QPN;
		ok(!rdma_accept(c, &cp), "accept");
		ev = cmt_expect(ch, RDMA_CM_EVENT_CONNECT_RESPONSE, 5000);
		if (ev)
			rdma_ack_cm_event(ev);
		/* COMM_EST before the RTU establishes the passive side */
		ok(!rdma_notify(c, IBV_EVENT_COMM_EST),
		   "notify(COMM_EST) on the passive side before the RTU");
		ev = cmt_wait(lch, 5000);
		ok(ev && ev->event == RDMA_CM_EVENT_ESTABLISHED && ev->id == c,
		   "ESTABLISHED from the notify");
		if (ev)
			rdma_ack_cm_event(ev);
		errno = 0;
		ok(rdma_notify(c, IBV_EVENT_COMM_EST) == -1 && errno == EISCONN,
		   "notify again: EISCONN");
		ok(!rdma_establish(a), "RTU");
		ev = cmt_wait(lch, 300);
		ok(!ev, "the late RTU adds no event");
		if (ev)
			rdma_ack_cm_event(ev);
		ok(!rdma_destroy_id(c), "destroy passive id (sends DREQ)");
		ev = cmt_wait(ch, 5000);
		ok(ev && ev->event == RDMA_CM_EVENT_DISCONNECTED && ev->id == a,
		   "peer destroyed its id: DISCONNECTED");
		if (ev)
			rdma_ack_cm_event(ev);
	}
	rdma_destroy_id(a);
	rdma_destroy_id(b);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	rdma_destroy_event_channel(lch);
}

/* dq_got -- the next event on ch within ms is type, for id, with status
 * (acked); a different one is shown */
static int dq_got(struct rdma_event_channel *ch, int ms,
		  enum rdma_cm_event_type type, struct rdma_cm_id *id,
		  int status)
{
	struct rdma_cm_event *ev = cmt_wait(ch, ms);
	int match;

	if (!ev)
		return 0;
	match = ev->event == type && ev->id == id && ev->status == status;
	if (!match)
		diag("got %s status %d", rdma_event_str(ev->event), ev->status);
	rdma_ack_cm_event(ev);
	return match;
}

/* dq_quiet -- no event on ch within ms (one that comes is shown) */
static int dq_quiet(struct rdma_event_channel *ch, int ms)
{
	struct rdma_cm_event *ev = cmt_wait(ch, ms);

	if (!ev)
		return 1;
	diag("got %s status %d", rdma_event_str(ev->event), ev->status);
	rdma_ack_cm_event(ev);
	return 0;
}

/* dq_pair -- *a (on ch) connects to the listener of lch at port, *c is
 * its accepted peer; with rtu, established on both sides, else both wait
 * for the RTU (REP_RCVD, REP_SENT) */
static int dq_pair(struct rdma_event_channel *lch,
		   struct rdma_event_channel *ch, uint16_t port,
		   struct rdma_cm_id **a, struct rdma_cm_id **c, int rtu)
{
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;

	memset(&cp, 0, sizeof(cp));
	cp.qp_num = CLIENT_QPN;
	if (rdma_create_id(ch, a, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(*a, ch, port) || rdma_connect(*a, &cp))
		return -1;
	ev = cmt_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
	if (!ev)
		return -1;
	*c = ev->id;
	rdma_ack_cm_event(ev);
	cp.qp_num = SERVER_QPN;
	if (rdma_accept(*c, &cp))
		return -1;
	ev = cmt_expect(ch, RDMA_CM_EVENT_CONNECT_RESPONSE, 5000);
	if (!ev)
		return -1;
	rdma_ack_cm_event(ev);
	if (!rtu)
		return 0;
	if (rdma_establish(*a))
		return -1;
	return dq_got(lch, 5000, RDMA_CM_EVENT_ESTABLISHED, *c, 0) ? 0 : -1;
}

/*
 * test_dreq_held -- the IB CM's disconnect: a DREQ moves the peer to
 * DREQ_RCVD and reports DISCONNECTED there; the DREP (the initiator's
 * DISCONNECTED) waits for the peer's rdma_disconnect or rdma_destroy_id,
 * or the DREQ times out (DISCONNECTED, -ETIMEDOUT).  Before the RTU
 * (REP_SENT, REP_RCVD) rdma_disconnect sends nothing and returns 0.
 */
static void test_dreq_held(void)
{
	struct rdma_event_channel *lch = rdma_create_event_channel();
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_cm_id *l, *a, *c;
	long long t0;
	uint16_t port;

	if (rdma_create_id(lch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 4))
		bail_out("listener");
	port = ntohs(rdma_get_src_port(l));

	/* the peer answers with rdma_disconnect */
	if (dq_pair(lch, ch, port, &a, &c, 1))
		bail_out("DREQ_RCVD pair");
	ok(!rdma_disconnect(a), "DREQ sent");
	ok(dq_got(lch, 5000, RDMA_CM_EVENT_DISCONNECTED, c, 0),
	   "the DREQ: DISCONNECTED on the peer");
	ok(dq_quiet(ch, 500),
	   "no DISCONNECTED for the initiator while the peer has not "
	   "disconnected (no DREP from the CM itself)");
	t0 = cmt_now_ms();
	ok(!rdma_disconnect(c), "the peer's rdma_disconnect sends the DREP");
	ok(dq_got(ch, 1000, RDMA_CM_EVENT_DISCONNECTED, a, 0),
	   "then the initiator's DISCONNECTED (status 0)");
	diag("DISCONNECTED %lld ms after the DREP", cmt_now_ms() - t0);
	ok(dq_got(lch, 5000, RDMA_CM_EVENT_TIMEWAIT_EXIT, c, 0),
	   "the peer leaves timewait after its DREP");
	rdma_destroy_id(c);
	rdma_destroy_id(a);

	/* the peer answers by destroying its id */
	if (dq_pair(lch, ch, port, &a, &c, 1))
		bail_out("destroy pair");
	ok(!rdma_disconnect(a), "DREQ sent (2)");
	ok(dq_got(lch, 5000, RDMA_CM_EVENT_DISCONNECTED, c, 0),
	   "DISCONNECTED on the peer (2)");
	ok(dq_quiet(ch, 300), "the initiator waits (2)");
	ok(!rdma_destroy_id(c), "rdma_destroy_id in DREQ_RCVD");
	ok(dq_got(ch, 1000, RDMA_CM_EVENT_DISCONNECTED, a, 0),
	   "its DREP: the initiator's DISCONNECTED (status 0)");
	rdma_destroy_id(a);

	/* the peer never answers: the DREQ times out */
	if (dq_pair(lch, ch, port, &a, &c, 1))
		bail_out("timeout pair");
	t0 = cmt_now_ms();
	ok(!rdma_disconnect(a), "DREQ sent (3)");
	ok(dq_got(lch, 5000, RDMA_CM_EVENT_DISCONNECTED, c, 0),
	   "DISCONNECTED on the peer (3)");
	ok(dq_got(ch, 6000, RDMA_CM_EVENT_DISCONNECTED, a, -ETIMEDOUT) &&
		   cmt_now_ms() - t0 >= 1500,
	   "no DREP: the initiator's DISCONNECTED when its DREQ times out "
	   "(-ETIMEDOUT)");
	diag("DISCONNECTED %lld ms after the DREQ", cmt_now_ms() - t0);
	ok(!rdma_disconnect(c), "a late rdma_disconnect of the peer: 0");
	rdma_destroy_id(c);
	rdma_destroy_id(a);

	/* the passive side disconnects before the RTU */
	if (dq_pair(lch, ch, port, &a, &c, 0))
		bail_out("REP_SENT pair");
	ok(!rdma_disconnect(c), "rdma_disconnect in REP_SENT: 0");
	ok(dq_quiet(ch, 300), "no DREQ before ESTABLISHED");
	ok(!rdma_establish(a), "the RTU still goes");
	ok(dq_got(lch, 2000, RDMA_CM_EVENT_ESTABLISHED, c, 0),
	   "and establishes the passive side");
	ok(!rdma_disconnect(c), "rdma_disconnect once ESTABLISHED");
	ok(dq_got(ch, 2000, RDMA_CM_EVENT_DISCONNECTED, a, 0),
	   "now the DREQ goes");
	ok(!rdma_disconnect(a), "the DREP");
	ok(dq_got(lch, 2000, RDMA_CM_EVENT_DISCONNECTED, c, 0),
	   "DISCONNECTED on the passive side");
	rdma_destroy_id(c);
	rdma_destroy_id(a);

	/* the active side disconnects before its RTU */
	if (dq_pair(lch, ch, port, &a, &c, 0))
		bail_out("REP_RCVD pair");
	ok(!rdma_disconnect(a), "rdma_disconnect in REP_RCVD: 0");
	ok(dq_quiet(lch, 300), "no DREQ from REP_RCVD");
	ok(!rdma_destroy_id(a), "destroy the active id");
	ok(dq_got(lch, 2000, RDMA_CM_EVENT_REJECTED, c, 28),
	   "cm_destroy_id in REP_RCVD: REJ (28) to the passive side");
	rdma_destroy_id(c);

	/* a DREQ reaches the active side before its RTU: the IB CM drops
	 * it there, a retransmission finds the id ESTABLISHED */
	if (dq_pair(lch, ch, port, &a, &c, 0))
		bail_out("early DREQ pair");
	ok(!rdma_notify(c, IBV_EVENT_COMM_EST) &&
		   dq_got(lch, 2000, RDMA_CM_EVENT_ESTABLISHED, c, 0),
	   "the passive side established by COMM_EST");
	ok(!rdma_disconnect(c), "its DREQ");
	ok(dq_quiet(ch, 300) && dq_quiet(lch, 1),
	   "the active side, before its RTU, neither reports nor answers it");
	ok(!rdma_establish(a), "the RTU");
	ok(dq_got(ch, 2000, RDMA_CM_EVENT_DISCONNECTED, a, 0),
	   "then the DREQ: DISCONNECTED on the active side");
	ok(dq_quiet(lch, 300), "the passive side still waits for the DREP");
	ok(!rdma_disconnect(a), "the DREP");
	ok(dq_got(lch, 2000, RDMA_CM_EVENT_DISCONNECTED, c, 0),
	   "DISCONNECTED on the passive side");
	rdma_destroy_id(c);
	rdma_destroy_id(a);

	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	rdma_destroy_event_channel(lch);
}

/* test_epollet -- each new event is an edge on the channel fd */
static void test_epollet(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in dst = cmt_sin(4791);
	struct epoll_event ee = {.events = EPOLLIN | EPOLLET};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *a, *b;
	int ep = epoll_create1(0);

	epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd, &ee);
	if (rdma_create_id(ch, &a, NULL, RDMA_PS_TCP) ||
	    rdma_create_id(ch, &b, NULL, RDMA_PS_TCP))
		bail_out("create_id");
	rdma_resolve_addr(a, NULL, (struct sockaddr *)&dst, 2000);
	ok(epoll_wait(ep, &ee, 1, 2000) == 1, "edge for the first event");
	rdma_get_cm_event(ch, &ev);
	rdma_ack_cm_event(ev);
	rdma_resolve_route(a, 2000);
	ok(epoll_wait(ep, &ee, 1, 2000) == 1, "edge for the second event");
	rdma_resolve_addr(b, NULL, (struct sockaddr *)&dst, 2000);
	ok(epoll_wait(ep, &ee, 1, 2000) == 1,
	   "edge for a third, queued behind an unread one");
	ok(!rdma_get_cm_event(ch, &ev) && ev->id == a, "in order: a's");
	rdma_ack_cm_event(ev);
	ok(!rdma_get_cm_event(ch, &ev) && ev->id == b, "then b's");
	rdma_ack_cm_event(ev);
	ok(epoll_wait(ep, &ee, 1, 0) == 0, "queue empty: no edge");
	close(ep);
	rdma_destroy_id(a);
	rdma_destroy_id(b);
	rdma_destroy_event_channel(ch);
}

/* test_fork_exit -- a child forked while ids live can use the CM and exit */
static void test_fork_exit(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	long long t0;
	pid_t pid;
	int st = -1, hold;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		bail_out("create_id");
	pid = fork();
	if (!pid) {
		struct rdma_event_channel *c2 = rdma_create_event_channel();
		struct rdma_cm_event *ev;
		struct rdma_cm_id *i2;

		struct rdma_conn_param cp;

		alarm(10);
		memset(&cp, 0, sizeof(cp));
		cp.qp_num = CLIENT_QPN;
		if (!c2 || rdma_create_id(c2, &i2, NULL, RDMA_PS_TCP) ||
		    cmt_resolve(i2, c2, cmt_free_port(&hold)) ||
		    rdma_connect(i2, &cp))
			exit(2);
		/* needs a progress thread of the child's own */
		ev = cmt_wait(c2, 3000);
		if (!ev || ev->event != RDMA_CM_EVENT_REJECTED)
			exit(3);
		rdma_ack_cm_event(ev);
		exit(0); /* destructors run; i2 and the parent's id live on */
	}
	t0 = cmt_now_ms();
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0 && cmt_now_ms() - t0 < 20000,
	   "forked child uses the CM and exit()s promptly (status %d)",
	   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	ok(!rdma_destroy_id(id), "parent's id still fine");
	rdma_destroy_event_channel(ch);
}

/* test_unreachable -- a peer that takes the REQ and never answers */
static void test_unreachable(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = cmt_sin(0);
	socklen_t len = sizeof(sin);
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	long long t0;
	int lfd = socket(AF_INET, SOCK_STREAM, 0);

	/* a plain TCP listener: the kernel completes the handshake */
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(lfd, 4) || getsockname(lfd, (struct sockaddr *)&sin, &len))
		bail_out("tcp listener");
	setenv("SOFTRDMA_CM_TIMEOUT_MS", "500", 1);
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(id, ch, ntohs(sin.sin_port)))
		bail_out("resolve");
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = CLIENT_QPN;
	t0 = cmt_now_ms();
	ok(!rdma_connect(id, &cp), "connect to a peer that never answers");
	ev = cmt_wait(ch, 5000);
	ok(ev && ev->event == RDMA_CM_EVENT_UNREACHABLE &&
		   ev->status == -ETIMEDOUT,
	   "UNREACHABLE, -ETIMEDOUT after SOFTRDMA_CM_TIMEOUT_MS (%lld ms)",
	   cmt_now_ms() - t0);
	if (ev)
		rdma_ack_cm_event(ev);
	unsetenv("SOFTRDMA_CM_TIMEOUT_MS");
	ok(!rdma_destroy_id(id), "destroy");
	rdma_destroy_event_channel(ch);
	close(lfd);
}

/* test_requester_gone -- the active id goes before the accept */
static void test_requester_gone(void)
{
	struct rdma_event_channel *lch = rdma_create_event_channel();
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = cmt_sin(0);
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *a, *c = NULL;

	if (rdma_create_id(lch, &l, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(l, (struct sockaddr *)&sin) || rdma_listen(l, 4) ||
	    rdma_create_id(ch, &a, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(a, ch, ntohs(rdma_get_src_port(l))))
		bail_out("setup");
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = CLIENT_QPN;
	ok(!rdma_connect(a, &cp), "connect");
	ev = cmt_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
	if (ev) {
		c = ev->id;
		rdma_ack_cm_event(ev);
	}
	ok(!rdma_destroy_id(a), "requester destroys its id before the REP");
	ev = cmt_wait(lch, 5000);
	ok(ev && ev->event == RDMA_CM_EVENT_REJECTED && ev->id == c &&
		   ev->status == 4,
	   "the passive id gets REJECTED, status 4 (IB_CM_REJ_TIMEOUT)");
	if (ev)
		rdma_ack_cm_event(ev);
	errno = 0;
	ok(c && rdma_accept(c, &cp) == -1 && errno == EINVAL,
	   "accept after that: EINVAL");
	if (c)
		rdma_destroy_id(c);

	/* the active side may reject the REP */
	if (rdma_create_id(ch, &a, NULL, RDMA_PS_TCP) ||
	    cmt_resolve(a, ch, ntohs(rdma_get_src_port(l))))
		bail_out("setup");
	ok(!rdma_connect(a, &cp), "connect again");
	ev = cmt_expect(lch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
	c = ev ? ev->id : NULL;
	if (ev)
		rdma_ack_cm_event(ev);
	ok(c && !rdma_accept(c, &cp), "accept");
	ev = cmt_expect(ch, RDMA_CM_EVENT_CONNECT_RESPONSE, 5000);
	if (ev)
		rdma_ack_cm_event(ev);
	ok(!rdma_reject(a, "bad-rep", 7), "the active side rejects the REP");
	ev = cmt_wait(lch, 5000);
	ok(ev && ev->event == RDMA_CM_EVENT_REJECTED && ev->id == c &&
		   ev->status == 28 &&
		   !memcmp(ev->param.conn.private_data, "bad-rep", 7),
	   "the passive side gets REJECTED (28) with that private data");
	if (ev)
		rdma_ack_cm_event(ev);
	errno = 0;
	ok(rdma_establish(a) == -1 && errno == EINVAL,
	   "establish after rejecting: EINVAL");
	rdma_destroy_id(a);
	if (c)
		rdma_destroy_id(c);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	rdma_destroy_event_channel(lch);
}

/* test_migrate_sync -- rdma_migrate_id to and from synchronous mode */
static void test_migrate_sync(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in dst = cmt_sin(4791);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		bail_out("create_id");
	ok(!rdma_migrate_id(id, NULL) && id->channel != ch,
	   "migrate to NULL: synchronous, own channel");
	errno = 0;
	ok(rdma_migrate_id(id, NULL) == -1 && errno == EINVAL,
	   "migrate a synchronous id to NULL again: EINVAL");
	ok(!rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) &&
		   id->event && id->event->event == RDMA_CM_EVENT_ADDR_RESOLVED,
	   "synchronous resolve_addr after the migration");
	ok(!rdma_migrate_id(id, ch) && id->channel == ch && !id->event,
	   "migrate back to a channel (acks id->event)");
	ok(!rdma_resolve_route(id, 2000), "asynchronous resolve_route");
	ev = cmt_wait(ch, 2000);
	ok(ev && ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED && ev->id == id,
	   "its event comes on the channel");
	if (ev)
		rdma_ack_cm_event(ev);
	ok(!rdma_destroy_id(id), "destroy");
	rdma_destroy_event_channel(ch);
}

/* test_thread_signals -- the CM thread takes none of the program's signals */
static void test_thread_signals(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	unsigned long long mask, all = 0;
	char path[300], line[128];
	struct dirent *d;
	DIR *dir;
	FILE *f;
	int found = 0;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		bail_out("create_id");
	/* signals 1..31 but SIGKILL (9) and SIGSTOP (19); glibc keeps its
	 * own 32 and 33 */
	all = 0x7fffffffULL & ~(1ULL << 8) & ~(1ULL << 18);
	dir = opendir("/proc/self/task");
	while (dir && (d = readdir(dir))) {
		if (d->d_name[0] == '.' || atoi(d->d_name) == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status",
			 d->d_name);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "SigBlk: %llx", &mask) == 1 &&
			    (mask & all) == all)
				found = 1;
		if (f)
			fclose(f);
	}
	if (dir)
		closedir(dir);
	if (getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "vgpreload"))
		ok(1, "# SKIP valgrind shows its own signal masks");
	else
		ok(found,
		   "a library thread with every signal blocked (the CM's)");
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* count_dir -- entries in a /proc directory (fds, threads) */
static int count_dir(const char *path)
{
	struct dirent *d;
	DIR *dir = opendir(path);
	int n = 0;

	if (!dir)
		return -1;
	while ((d = readdir(dir)))
		if (d->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/* test_destroy_waits -- destroy_id blocks until its events are acked */
static void test_destroy_waits(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in dst = cmt_sin(4791);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct acker a;
	pthread_t t;
	long long t0;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		bail_out("create_id");
	rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000);
	ev = cmt_wait(ch, 5000);
	ok(ev != NULL, "got an event, not acked yet");
	a.ev = ev;
	a.delay_ms = 300;
	pthread_create(&t, NULL, acker_main, &a);
	t0 = cmt_now_ms();
	ok(!rdma_destroy_id(id), "destroy with an unacked event");
	ok(cmt_now_ms() - t0 >= 250, "destroy waited for the ack (%lld ms)",
	   cmt_now_ms() - t0);
	pthread_join(t, NULL);

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		bail_out("create_id");
	rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000);
	t0 = cmt_now_ms();
	ok(!rdma_destroy_id(id), "destroy with a queued, unretrieved event");
	/* waiting for an ack that never comes would never end */
	ok(cmt_now_ms() - t0 < 10000, "did not wait");
	{
		struct pollfd p = {.fd = ch->fd, .events = POLLIN};

		ok(poll(&p, 1, 0) == 0, "the channel fd is quiet again");
	}
	rdma_destroy_event_channel(ch);
}

int main(void)
{
	uint16_t port1, port3, vport;
	pid_t srv, victim;
	int sfd, vfd, fds0, thr0, fds1, thr1;

	/* the peers are forked before this process uses the library */
	srv = cmt_spawn(server_main, &sfd);
	victim = cmt_spawn(victim_main, &vfd);
	port1 = cmt_read_u16(sfd);
	vport = cmt_read_u16(vfd);
	if (!port1 || !vport)
		bail_out("peers did not start");

	test_api_errors();
	/* the device stays open; ids, channels and the CM thread do not */
	fds0 = count_dir("/proc/self/fd");
	/* a detached thread on its way out (the main thread is the only
	 * one that must stay) is not a baseline: give it 10 s */
	thr0 = count_dir("/proc/self/task");
	for (int i = 0; i < 100 && thr0 > 1; i++) {
		usleep(100000);
		thr0 = count_dir("/proc/self/task");
	}
	test_getaddrinfo();
	test_bind_conflicts(vport);
	client_accept_scenario(port1);
	client_reject_scenario(port1);
	port3 = cmt_read_u16(sfd);
	ok(port3 != 0, "rdma_create_ep listener is up");
	if (port3)
		client_sync_scenario(port3);
	cmt_reap(srv, "server");
	client_kill_scenario(victim, vport);
	test_destroy_waits();
	test_backlog();
	test_dreq_held();
	test_epollet();
	test_fork_exit();
	test_unreachable();
	test_requester_gone();
	test_migrate_sync();
	test_thread_signals();
	fds1 = count_dir("/proc/self/fd");
	thr1 = count_dir("/proc/self/task");
	for (int i = 0; i < 100 && thr1 > thr0; i++) {
		usleep(100000);
		thr1 = count_dir("/proc/self/task");
	}
	ok(fds1 == fds0, "no fd left behind (%d, was %d)", fds1, fds0);
	ok(thr1 == thr0, "no thread left behind (%d, was %d)", thr1, thr0);
	close(sfd);
	close(vfd);
	return done_testing();
}
