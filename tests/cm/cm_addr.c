/* SPDX-License-Identifier: MIT */
/*
 * cm_addr.c -- softrdma CM: address resolution's errors, as librdmacm
 * over the kernel gives them.
 *
 * - rdma_resolve_addr towards a destination no route reaches fails at
 *   once: the kernel's rdma_resolve_ip returns the routing table's error
 *   (here ENETUNREACH: a network namespace of our own, with no route at
 *   all), rdma_resolve_addr returns -1 with it in errno and reports no
 *   event, and the id, still bound, may be resolved again.  The same from
 *   an id bound to an address (the route from it: the kernel's saddr),
 *   while an address it does reach resolves.
 * - rdma_create_ep given a path record (ai_route, as ib_acm fills it)
 *   resolves the address, then sets the path (RDMA_OPTION_IB_PATH needs
 *   a resolved address), as librdmacm's rdma_create_ep does.
 * - RDMA_OPTION_ID_AFONLY is taken on a bound id too (the kernel's
 *   rdma_set_afonly: IDLE or ADDR_BOUND): an IPv6 wildcard listener made
 *   AF-only after its bind takes IPv6 requests and no IPv4 one.
 * - RDMA_OPTION_IB_PATH takes a record flagged GMP | PRIMARY |
 *   BIDIRECTIONAL, else EINVAL (the kernel's ucma_set_ib_path).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <net/if.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#include "../tap.h"
#include "cm_util.h"

/* unrouted -- an address of the test range that no route reaches here */
static struct sockaddr_in unrouted(void)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(0x0ae70001); /* 10.231.0.1 */
	sin.sin_port = htons(7471);
	return sin;
}

/* lo_up -- bring the namespace's loopback up (127.0.0.1 and its route) */
static int lo_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM, 0), r = -1;

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if (!ioctl(fd, SIOCGIFFLAGS, &ifr)) {
		ifr.ifr_flags |= IFF_UP;
		r = ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	close(fd);
	return r;
}

/* bound_main -- an id bound to 127.0.0.1: no route from it to dst */
static void bound_main(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in dst = unrouted(), src = cmt_sin(0),
			   lo = cmt_sin(7471);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	int r, e;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(id, (struct sockaddr *)&src)) {
		SCHECK(0, "bound: id bound to 127.0.0.1");
		return;
	}
	errno = 0;
	r = rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000);
	e = errno;
	SCHECK(r == -1 && e == ENETUNREACH,
	       "bound to 127.0.0.1: resolve_addr -1, ENETUNREACH (got %d, "
	       "errno %d)",
	       r, e);
	r = rdma_resolve_addr(id, NULL, (struct sockaddr *)&lo, 2000);
	ev = r ? NULL : cmt_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000);
	SCHECK(ev != NULL, "bound to 127.0.0.1: 127.0.0.1 itself resolves");
	if (ev)
		rdma_ack_cm_event(ev);
	SCHECK(!rdma_destroy_id(id), "destroy the bound id");
	rdma_destroy_event_channel(ch);
}

/* no_route_main -- in a network namespace with no route: the checks */
static int no_route_main(int pfd)
{
	struct rdma_event_channel *ch;
	struct sockaddr_in dst = unrouted();
	struct rdma_cm_id *id, *sid;
	struct pollfd p;
	int r, e;

	(void)pfd;
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return 1;
	errno = 0;
	r = rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000);
	e = errno;
	SCHECK(r == -1 && e == ENETUNREACH,
	       "no route: resolve_addr -1, ENETUNREACH (got %d, errno %d)", r,
	       e);
	p.fd = ch->fd;
	p.events = POLLIN;
	SCHECK(poll(&p, 1, 300) == 0, "no route: no event is reported");
	errno = 0;
	r = rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000);
	e = errno;
	SCHECK(r == -1 && e == ENETUNREACH,
	       "no route: the id stays bound, a second resolve_addr gives "
	       "ENETUNREACH again (got %d, errno %d)",
	       r, e);
	SCHECK(!rdma_destroy_id(id), "destroy");
	rdma_destroy_event_channel(ch);

	/* a synchronous id: the same from the call */
	if (rdma_create_id(NULL, &sid, NULL, RDMA_PS_TCP))
		return 1;
	errno = 0;
	r = rdma_resolve_addr(sid, NULL, (struct sockaddr *)&dst, 2000);
	e = errno;
	SCHECK(r == -1 && e == ENETUNREACH,
	       "no route, synchronous id: -1, ENETUNREACH (got %d, errno %d)",
	       r, e);
	SCHECK(!rdma_destroy_id(sid), "destroy the synchronous id");
	SCHECK(!lo_up(), "loopback up");
	bound_main();
	return srv_fails ? 1 : 0;
}

/* in_new_netns -- the forked child: a network namespace of its own */
static int in_new_netns(int pfd)
{
	if (unshare(CLONE_NEWNET) && unshare(CLONE_NEWUSER | CLONE_NEWNET))
		return 77;
	return no_route_main(pfd);
}

/* test_no_route -- resolve_addr where no route reaches the destination */
static void test_no_route(void)
{
	int rfd, st = 0;
	pid_t pid = cmt_spawn(in_new_netns, &rfd);

	waitpid(pid, &st, 0);
	close(rfd);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		skip_one("no route: cannot make a network namespace");
		return;
	}
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "no route: rdma_resolve_addr fails at once, ENETUNREACH, no "
	   "event (a network namespace without routes)");
}

/* test_ep_route -- rdma_create_ep with a path record in ai_route */
static void test_ep_route(void)
{
	struct rdma_addrinfo hints, *res;
	struct ibv_path_data *path;
	struct rdma_cm_id *id = NULL;

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_NUMERICHOST;
	hints.ai_port_space = RDMA_PS_TCP;
	if (rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res))
		bail_out("getaddrinfo");
	path = calloc(1, sizeof(*path)); /* rdma_freeaddrinfo frees it */
	if (!path)
		bail_out("calloc");
	path->flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY |
		      IBV_PATH_FLAG_BIDIRECTIONAL;
	res->ai_route = path;
	res->ai_route_len = sizeof(*path);
	ok(!rdma_create_ep(&id, res, NULL, NULL),
	   "create_ep with ai_route: the address is resolved, the path set");
	ok(id && id->route.num_paths == 1 &&
		   rdma_get_dst_port(id) == htons(7471) && id->verbs,
	   "create_ep with ai_route: a route to 127.0.0.1:7471");
	if (id)
		rdma_destroy_ep(id);
	rdma_freeaddrinfo(res);
}

/* test_ib_path_flags -- RDMA_OPTION_IB_PATH wants a primary path */
static void test_ib_path_flags(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in dst = cmt_sin(7471);
	struct ibv_path_data path[2];
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	int r, e;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000))
		bail_out("resolve");
	ev = cmt_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000);
	if (!ev)
		bail_out("no ADDR_RESOLVED");
	rdma_ack_cm_event(ev);
	memset(path, 0, sizeof(path));
	path[0].flags = IBV_PATH_FLAG_PRIMARY; /* not a GMP path */
	errno = 0;
	r = rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, path,
			    sizeof(path[0]));
	e = errno;
	ok(r == -1 && e == EINVAL,
	   "IB_PATH without a GMP | PRIMARY | BIDIRECTIONAL record: EINVAL "
	   "(got %d, errno %d)",
	   r, e);
	path[1].flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY |
			IBV_PATH_FLAG_BIDIRECTIONAL;
	ok(!rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, path,
			    sizeof(path)),
	   "IB_PATH with one among two records: taken");
	ev = cmt_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000);
	ok(ev != NULL, "IB_PATH: ROUTE_RESOLVED");
	if (ev)
		rdma_ack_cm_event(ev);
	ok(!rdma_destroy_id(id), "destroy");
	rdma_destroy_event_channel(ch);
}

/* connect_to -- an id on ch connecting (no QP) to addr */
static struct rdma_cm_id *connect_to(struct rdma_event_channel *ch,
				     struct sockaddr *addr)
{
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, addr, 2000))
		bail_out("client");
	ev = cmt_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000);
	if (!ev)
		bail_out("no ADDR_RESOLVED");
	rdma_ack_cm_event(ev);
	if (rdma_resolve_route(id, 2000))
		bail_out("route");
	ev = cmt_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000);
	if (!ev)
		bail_out("no ROUTE_RESOLVED");
	rdma_ack_cm_event(ev);
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x123;
	if (rdma_connect(id, &cp))
		bail_out("connect");
	return id;
}

/* test_afonly_bound -- AF-only set on a bound IPv6 wildcard listener */
static void test_afonly_bound(void)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct rdma_event_channel *cch = rdma_create_event_channel();
	struct sockaddr_in6 any6, lo6;
	struct sockaddr_in lo4;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l, *c;
	int one = 1, r;
	uint16_t port;

	memset(&any6, 0, sizeof(any6));
	any6.sin6_family = AF_INET6;
	if (!sch || !cch || rdma_create_id(sch, &l, NULL, RDMA_PS_TCP))
		bail_out("listener");
	if (rdma_bind_addr(l, (struct sockaddr *)&any6)) {
		skip_one("AF-only: no IPv6 here");
		rdma_destroy_id(l);
		goto out;
	}
	r = rdma_set_option(l, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one,
			    sizeof(one));
	ok(!r, "AF-only set after bind: taken (errno %d)", r ? errno : 0);
	if (rdma_listen(l, 4))
		bail_out("listen");
	port = rdma_get_src_port(l);

	lo4 = cmt_sin(ntohs(port));
	c = connect_to(cch, (struct sockaddr *)&lo4);
	ev = cmt_wait(cch, 10000);
	ok(ev && ev->event == RDMA_CM_EVENT_REJECTED,
	   "AF-only: an IPv4 connect is rejected (%s)",
	   ev ? rdma_event_str(ev->event) : "nothing");
	if (ev)
		rdma_ack_cm_event(ev);
	ev = cmt_wait(sch, 200);
	ok(!ev, "AF-only: the listener got no IPv4 request (%s)",
	   ev ? rdma_event_str(ev->event) : "none");
	if (ev) {
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			rdma_reject(ev->id, NULL, 0);
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_id(c);

	memset(&lo6, 0, sizeof(lo6));
	lo6.sin6_family = AF_INET6;
	lo6.sin6_addr = in6addr_loopback;
	lo6.sin6_port = port;
	c = connect_to(cch, (struct sockaddr *)&lo6);
	ev = cmt_expect(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 10000);
	ok(ev != NULL, "AF-only: an IPv6 connect reaches the listener");
	if (ev) {
		rdma_reject(ev->id, NULL, 0);
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_id(c);
	ok(!rdma_destroy_id(l), "AF-only: destroy the listener");
out:
	rdma_destroy_event_channel(cch);
	rdma_destroy_event_channel(sch);
}

int main(void)
{
	setenv("SOFTRDMA_SHM_PREFIX", "cm-addr", 0);
	test_no_route();
	test_ep_route();
	test_ib_path_flags();
	test_afonly_bound();
	return done_testing();
}
