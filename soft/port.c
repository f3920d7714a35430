/* SPDX-License-Identifier: MIT */
/*
 * port.c -- the RoCE ports follow their interfaces (SOFTRDMA_NET=1), as
 * rxe's port follows its netdev (drivers/infiniband/sw/rxe: rxe_query_port,
 * rxe_notify, rxe_set_mtu) and each port of a dual-port RoCE HCA follows
 * its own.
 *
 * One port per interface that has an address, in the order of the GID
 * table (port 1 is the interface behind GID index 2, as before), at most
 * SOFT_ROCE_PORTS; SOFTRDMA_NETDEV=IF1[,IF2...] names them instead.  A
 * port's GIDs are the addresses of its interface (device.c); the
 * link-local and loopback GIDs, and the addresses of interfaces beyond
 * the last port, are port 1's.  Then:
 *  - ibv_query_port reads the port's interface at each call: ACTIVE when
 *    it is up and operationally up (IFF_UP and IFF_RUNNING: carrier),
 *    else DOWN; phys_state LINK_UP when ACTIVE, POLLING when the
 *    interface is up without carrier (a pulled cable), DISABLED when it
 *    is down (as rxe_query_port); active_mtu the largest IB MTU that fits
 *    the IP MTU less rxe's 80 bytes of headers (eth_mtu_int_to_enum, at
 *    least 256, at most 4096), max_mtu 4096;
 *  - each process with an open context runs one watcher thread on an
 *    rtnetlink socket (RTMGRP_LINK), blocked until an interface changes;
 *    a change of a port's state gives every context of the process
 *    IBV_EVENT_PORT_ERR or IBV_EVENT_PORT_ACTIVE with that port's number
 *    once.  The thread ends with the process's last context.  A forked
 *    child forgets its parent's watcher and contexts
 *    (soft_port_fork_child, from fork.c), and its first context starts
 *    a watcher of its own.
 * Without SOFTRDMA_NET (one host, no interface), or with no interface
 * address, or in the IB mode (apm.c), there is one port, as it always
 * was: ACTIVE, 4096, no events.
 */
#include "config.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "softrdma.h"

/* rxe_param.h's RXE_MAX_HDR_LENGTH: what eth_mtu_int_to_enum reserves */
#define PORT_HDR_ALLOWANCE 80

struct watcher {
	pthread_t thr;
	int nl;			     /* rtnetlink, RTMGRP_LINK */
	int stop;		     /* eventfd: the last context closed */
	int up[SOFT_ROCE_PORTS + 1]; /* the states last reported */
	struct watcher *next;	     /* on pt_ending */
};

static char port_if[SOFT_ROCE_PORTS + 1][IF_NAMESIZE];
static int port_ifindex[SOFT_ROCE_PORTS + 1]; /* 0: follows none */
static uint32_t nports;	 /* ports that follow an interface */
static int port_fd = -1; /* for SIOCGIF* */
static pthread_mutex_t pt_mtx = PTHREAD_MUTEX_INITIALIZER;
static struct soft_context **pt_ctx; /* this process's open contexts */
static size_t pt_n, pt_cap;
static struct watcher *pt_w;
static struct watcher *pt_ending; /* off pt_w, their descriptors open */

/* port_add -- the next port follows interface name; its number, or 0
 * when there is no room or no such interface */
static uint32_t port_add(const char *name)
{
	int idx;

	if (nports == SOFT_ROCE_PORTS || strlen(name) >= IF_NAMESIZE)
		return 0;
	idx = (int)if_nametoindex(name);
	if (!idx)
		return 0;
	nports++;
	strcpy(port_if[nports], name);
	port_ifindex[nports] = idx;
	return nports;
}

/* port_of -- the port that follows interface name (0: none) */
static uint32_t port_of(const char *name)
{
	uint32_t p;

	for (p = 1; p <= nports; p++)
		if (!strcmp(port_if[p], name))
			return p;
	return 0;
}

/* soft_port_bind -- dev_init: the ports of the RoCE mode between hosts
 * from the interfaces of the GID table's n entries (ifn[i], "" for none);
 * gid_port[i] gets the port each entry lives on.  Once per process. */
void soft_port_bind(char (*ifn)[IF_NAMESIZE], int n, uint8_t *gid_port)
{
	const char *e = getenv("SOFTRDMA_NETDEV");
	int i;

	for (i = 0; i < n; i++)
		gid_port[i] = 1;
	if (!soft_net_enabled() || soft_link_ib)
		return;
	if (e && *e) { /* the ports named, in order */
		char list[256], *save = NULL, *t;

		snprintf(list, sizeof(list), "%s", e);
		for (t = strtok_r(list, ",", &save); t;
		     t = strtok_r(NULL, ",", &save))
			if (!port_of(t) && !port_add(t))
				SOFT_WARN("softrdma: SOFTRDMA_NETDEV: %s: no "
					  "such interface, or more than %d; "
					  "no port follows it\n",
					  t, SOFT_ROCE_PORTS);
	}
	for (i = 0; i < n; i++) {
		uint32_t p;

		if (!ifn[i][0])
			continue;
		p = port_of(ifn[i]);
		if (!p && !(e && *e))
			p = port_add(ifn[i]);
		if (p)
			gid_port[i] = (uint8_t)p;
	}
	if (!nports)
		return;
	port_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (port_fd < 0)
		port_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

/* soft_port_count -- the RoCE mode's ports: one per interface followed,
 * one when none is */
uint32_t soft_port_count(void)
{
	return nports ? nports : 1;
}

/* soft_port_ifindex -- the interface a RoCE port follows (0: none, as
 * port 1 when no interface is followed) */
uint32_t soft_port_ifindex(uint32_t port)
{
	return port >= 1 && port <= nports ? (uint32_t)port_ifindex[port] : 0;
}

/* soft_port_mtu_of -- rxe's eth_mtu_int_to_enum: the largest IB MTU that
 * fits an IP MTU less the RoCE v2 headers, 256 at least, 4096 at most */
enum ibv_mtu soft_port_mtu_of(int ip_mtu)
{
	int m = ip_mtu - PORT_HDR_ALLOWANCE;

	return m >= 4096   ? IBV_MTU_4096
	       : m >= 2048 ? IBV_MTU_2048
	       : m >= 1024 ? IBV_MTU_1024
	       : m >= 512  ? IBV_MTU_512
			   : IBV_MTU_256;
}

/* flags_up -- rxe's ib_get_curr_port_state: running and carrier */
static int flags_up(unsigned int flags)
{
	return (flags & IFF_UP) && (flags & IFF_RUNNING);
}

/* soft_port_eth -- a port's state, physical state and active MTU from
 * its interface now; 0, or -1 when the port follows no interface (then
 * nothing is changed) */
int soft_port_eth(uint32_t port, struct ibv_port_attr *a)
{
	struct ifreq ifr;
	unsigned int flags = 0;

	if (port < 1 || port > nports)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, port_if[port], IF_NAMESIZE);
	if (port_fd >= 0 && !ioctl(port_fd, SIOCGIFFLAGS, &ifr))
		flags = (unsigned short)ifr.ifr_flags;
	/* an interface gone (unregistered) is a port down, disabled */
	a->state = flags_up(flags) ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	a->phys_state = a->state == IBV_PORT_ACTIVE ? 5 /* LinkUp */
			: flags & IFF_UP	    ? 2 /* Polling */
						    : 3 /* Disabled */;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, port_if[port], IF_NAMESIZE);
	if (port_fd >= 0 && !ioctl(port_fd, SIOCGIFMTU, &ifr))
		a->active_mtu = soft_port_mtu_of(ifr.ifr_mtu);
	a->max_mtu = IBV_MTU_4096;
	return 0;
}

/* port_up_now -- the port is ACTIVE now */
static int port_up_now(uint32_t port)
{
	struct ibv_port_attr a;

	memset(&a, 0, sizeof(a));
	return soft_port_eth(port, &a) || a.state == IBV_PORT_ACTIVE;
}

/* deliver -- the ports' states now: each port that changed gives every
 * context of this process an event, once; pt_mtx held */
static void deliver(struct watcher *w)
{
	uint32_t p;
	size_t i;

	for (p = 1; p <= nports; p++) {
		int up = port_up_now(p);

		if (up == w->up[p])
			continue;
		w->up[p] = up;
		for (i = 0; i < pt_n; i++)
			if (pt_ctx[i]->owner_pid == soft_self_pid)
				soft_port_event(pt_ctx[i],
						up ? IBV_EVENT_PORT_ACTIVE
						   : IBV_EVENT_PORT_ERR,
						p);
	}
}

/* ours -- an interface index one of the ports follows */
static int ours(int ifindex)
{
	uint32_t p;

	for (p = 1; p <= nports; p++)
		if (port_ifindex[p] == ifindex)
			return 1;
	return 0;
}

/* nl_read -- take what the socket holds; 1 when a link message was of a
 * port's interface, or some were lost (overrun): the ports are read */
static int nl_read(int fd)
{
	char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
	int seen = 0;

	for (;;) {
		struct sockaddr_nl from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT,
				     (struct sockaddr *)&from, &fl);
		struct nlmsghdr *h;
		int left; /* signed: NLMSG_NEXT past the end stops the loop */

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS) /* overrun: ask the interfaces */
				seen = 1;
			return seen;
		}
		if (n == 0)
			return seen;
		if (fl != sizeof(from) || from.nl_pid != 0)
			continue; /* only the kernel speaks for interfaces */
		left = (int)n;
		/* NLMSG_OK's test, its length compared unsigned only once
		 * left is known to be positive (the macro compares an int
		 * with the u32 length: -Wsign-compare under clang) */
		for (h = (struct nlmsghdr *)buf;
		     left >= (int)sizeof(*h) && h->nlmsg_len >= sizeof(*h) &&
		     h->nlmsg_len <= (unsigned int)left;
		     h = NLMSG_NEXT(h, left)) {
			const struct ifinfomsg *ifi;

			if (h->nlmsg_type != RTM_NEWLINK &&
			    h->nlmsg_type != RTM_DELLINK)
				continue;
			if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)))
				continue;
			ifi = NLMSG_DATA(h);
			seen |= ours(ifi->ifi_index);
		}
	}
}

/* watch -- the watcher thread: interface changes into port events */
static void *watch(void *arg)
{
	struct watcher *w = arg;

	soft_internal = 1;
	for (;;) {
		struct pollfd pf[2] = {{w->nl, POLLIN, 0},
				       {w->stop, POLLIN, 0}};
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[1].revents)
			break;
		if (!pf[0].revents)
			continue;
		if (!nl_read(w->nl))
			continue;
		pthread_mutex_lock(&pt_mtx);
		deliver(w);
		pthread_mutex_unlock(&pt_mtx);
	}
	return NULL;
}

/* watcher_new -- subscribe first, then read the state: no change is
 * missed in between; pt_mtx held */
static struct watcher *watcher_new(void)
{
	struct sockaddr_nl sa;
	struct watcher *w = calloc(1, sizeof(*w));
	sigset_t all, old;
	uint32_t p;
	int err;

	if (!w)
		return NULL;
	w->nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	w->stop = eventfd(0, EFD_CLOEXEC);
	memset(&sa, 0, sizeof(sa));
	sa.nl_family = AF_NETLINK;
	sa.nl_groups = RTMGRP_LINK;
	if (w->nl < 0 || w->stop < 0 ||
	    bind(w->nl, (struct sockaddr *)&sa, sizeof(sa)))
		goto fail;
	for (p = 1; p <= nports; p++)
		w->up[p] = port_up_now(p);
	/* no signal of the application's lands on our thread */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&w->thr, NULL, watch, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!err)
		return w;
fail:
	SOFT_WARN("softrdma: cannot watch interfaces (%s): no port events\n",
		  strerror(errno));
	if (w->nl >= 0)
		close(w->nl);
	if (w->stop >= 0)
		close(w->stop);
	free(w);
	return NULL;
}

/* soft_port_ctx_add -- ibv_open_device: the context gets port events */
void soft_port_ctx_add(struct soft_context *ctx)
{
	if (!nports)
		return;
	pthread_mutex_lock(&pt_mtx);
	if (pt_n == pt_cap) {
		size_t nc = pt_cap ? pt_cap * 2 : 4;
		struct soft_context **n = realloc(pt_ctx, nc * sizeof(*n));

		if (!n) {
			pthread_mutex_unlock(&pt_mtx);
			SOFT_WARN("softrdma: out of memory: a context without "
				  "port events\n");
			return;
		}
		pt_ctx = n;
		pt_cap = nc;
	}
	pt_ctx[pt_n++] = ctx;
	if (!pt_w)
		pt_w = watcher_new();
	pthread_mutex_unlock(&pt_mtx);
}

/* watcher_close -- w's descriptors closed (in a forked child: its
 * copies, the parent's left open), w freed; its thread ended, or not
 * ours (a forked child's) */
static void watcher_close(struct watcher *w)
{
	close(w->nl);
	close(w->stop);
	free(w);
}

/* ending_drop -- w, ended, off pt_ending; pt_mtx held */
static void ending_drop(struct watcher *w)
{
	struct watcher **p = &pt_ending;

	while (*p != w)
		p = &(*p)->next;
	*p = w->next;
}

/* soft_port_ctx_del -- ibv_close_device: no more events for it; the
 * process's last context ends the watcher.  Until its descriptors are
 * closed it is on pt_ending, where a child forked meanwhile finds them. */
void soft_port_ctx_del(struct soft_context *ctx)
{
	struct watcher *w = NULL;
	uint64_t one = 1;
	size_t i;

	if (!nports)
		return;
	pthread_mutex_lock(&pt_mtx);
	for (i = 0; i < pt_n; i++)
		if (pt_ctx[i] == ctx) {
			pt_ctx[i] = pt_ctx[--pt_n];
			break;
		}
	if (!pt_n) {
		w = pt_w;
		pt_w = NULL;
		free(pt_ctx);
		pt_ctx = NULL;
		pt_cap = 0;
		if (w) {
			w->next = pt_ending;
			pt_ending = w;
		}
	}
	pthread_mutex_unlock(&pt_mtx);
	if (!w)
		return;
	(void)!write(w->stop, &one, sizeof(one));
	pthread_join(w->thr, NULL);
	pthread_mutex_lock(&pt_mtx); /* no child gets them unrecorded */
	ending_drop(w);
	watcher_close(w);
	pthread_mutex_unlock(&pt_mtx);
}

/* soft_port_fork_prepare -- no registration, watcher start or end is
 * half done across fork() (fork.c: after the CM's locks, under which
 * the CM opens its device) */
void soft_port_fork_prepare(void)
{
	pthread_mutex_lock(&pt_mtx);
}

/* soft_port_fork_parent -- resume */
void soft_port_fork_parent(void)
{
	pthread_mutex_unlock(&pt_mtx);
}

/*
 * soft_port_fork_child -- in a forked child (fork.c), the parent's
 * watchers did not come along and its contexts are not the child's: the
 * child's copies of the watchers' descriptors are closed (the parent's
 * stay open; the stop eventfd, which the parent shares, is never
 * written here) and the registry emptied, so that the child's first
 * context starts a watcher of its own.  An inherited context is on the
 * registry no more: closing it in the child ends nothing.
 */
void soft_port_fork_child(void)
{
	pthread_mutex_unlock(&pt_mtx);
	if (pt_w)
		watcher_close(pt_w);
	pt_w = NULL;
	while (pt_ending) {
		struct watcher *w = pt_ending;

		pt_ending = w->next;
		watcher_close(w);
	}
	free(pt_ctx);
	pt_ctx = NULL;
	pt_n = pt_cap = 0;
}
