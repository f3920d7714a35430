/* SPDX-License-Identifier: MIT */
/*
 * forkport.c -- a child forked by a process whose ports' watcher runs
 * (SOFTRDMA_NET=1, soft/port.c: a thread on an rtnetlink socket that
 * turns its interfaces' changes into IBV_EVENT_PORT_ERR and
 * IBV_EVENT_PORT_ACTIVE) keeps none of that watcher, gets port events
 * on the device it opens, and leaves its parent's watcher running
 * (soft/README.md, "fork()").
 *
 * In a user and network namespace of our own, with a tap interface
 * (TAP_IF: an address, up, its carrier on while we hold it) that port 1
 * follows, set down and up by the test.  The parent gets the port's
 * events, forks; the child has no netlink socket (its copy of the
 * watcher's is closed), opens a device and gets PORT_ERR and
 * PORT_ACTIVE when it sets the interface down and up, closes the
 * inherited context and its own, and exits; the parent still gets the
 * events, and its last close ends its watcher.
 *
 * Then fork() while another thread starts the process's first watcher
 * (parked in softrdma's pthread_create, port.c's lock held and the
 * watcher's socket and eventfd made) and while one ends its last (parked
 * as softrdma's pthread_join returns, the watcher taken off the
 * registry, its descriptors not yet closed).  Neither park leaves a
 * thread starting or ending across the fork (see pthread_create).  The child must have no netlink socket
 * either way, and its own device must get the port's events.  Before
 * soft/fork.c took port.c's lock and called soft_port_fork_child, the
 * child of either fork kept the watcher's netlink socket and eventfd
 * for good (port.c's own fork handler closed only those of the watcher
 * on its registry): in the first because fork() did not wait for the
 * lock, so the watcher was not on the registry yet, in the second
 * because it was on it no more.
 */
#define _GNU_SOURCE
#include "config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "../tap.h"
#include "../park.h"
#include "common.h"

#define TAP_IF "rp0"
#define TAP_IP "10.78.0.1"

static struct tctx pt;
static struct ibv_device *dev;
static atomic_int park_create, park_join; /* armed: the next one parks */

typedef int create_fn(pthread_t *, const pthread_attr_t *, void *(*)(void *),
		      void *);
typedef int join_fn(pthread_t, void **);

/* park_call -- the busy thread, once FLAG is armed, parks 300 ms in a
 * call of softrdma's (CALLER: the call's return address); 1 if it did */
static int park_call(atomic_int *flag, const void *caller)
{
	uintptr_t a = (uintptr_t)caller;

	if (!park_me || a < park_lo || a >= park_hi ||
	    !atomic_exchange(flag, 0))
		return 0;
	atomic_store(&park_parked, 1);
	usleep(300000);
	return 1;
}

/* the start of a thread created while parked: started once it runs */
struct park_start {
	void *(*fn)(void *);
	void *arg;
	atomic_int started;
};

static void *park_started(void *p)
{
	struct park_start *ps = p;
	void *(*fn)(void *) = ps->fn;
	void *arg = ps->arg;

	atomic_store(&ps->started, 1); /* ps is the creator's: gone next */
	return fn(arg);
}

/* pthread_create -- softrdma's come here first (port.c: watcher_new,
 * port.c's lock held): parks before the thread is made; then, before it
 * returns, waits until the thread runs its routine, so that no thread is
 * being set up when the main thread forks (GCC 12's ASan allocates
 * there and has no fork handler: park.h) */
__attribute__((visibility("default"))) int pthread_create(
	pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	static create_fn *real;
	struct park_start ps = {fn, arg, 0};
	int r;

	if (!real)
		real = (create_fn *)dlsym(RTLD_NEXT, "pthread_create");
	if (!park_call(&park_create, __builtin_return_address(0)))
		return real(t, a, fn, arg);
	r = real(t, a, park_started, &ps);
	while (!r && !atomic_load(&ps.started))
		usleep(1000);
	return r;
}

/* pthread_join -- softrdma's come here first (port.c: the last context
 * closed, the watcher off the registry): parks once the thread is gone,
 * its descriptors not yet closed (not while it ends: ASan frees there) */
__attribute__((visibility("default"))) int pthread_join(pthread_t t, void **ret)
{
	static join_fn *real;
	int r;

	if (!real)
		real = (join_fn *)dlsym(RTLD_NEXT, "pthread_join");
	r = real(t, ret);
	park_call(&park_join, __builtin_return_address(0));
	return r;
}

/* netlink_fds -- this process's netlink sockets (in softrdma, only the
 * watcher keeps one) */
static int netlink_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name), dom = 0;
		socklen_t l = sizeof(dom);

		if (e->d_name[0] != '.' && fd != dirfd(d) &&
		    !getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) &&
		    dom == AF_NETLINK)
			n++;
	}
	closedir(d);
	return n;
}

/* if_req -- an ioctl of TAP_IF's on an AF_INET socket; ioctl's result */
static int if_req(unsigned long req, struct ifreq *ifr)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r;

	if (fd < 0)
		return -1;
	strcpy(ifr->ifr_name, TAP_IF);
	r = ioctl(fd, req, ifr);
	close(fd);
	return r;
}

/* link_set -- TAP_IF up (UP) or down; 0 or -1 */
static int link_set(int up)
{
	struct ifreq ifr;

	memset(&ifr, 0, sizeof(ifr));
	if (if_req(SIOCGIFFLAGS, &ifr))
		return -1;
	if (up)
		ifr.ifr_flags |= IFF_UP;
	else
		ifr.ifr_flags &= ~IFF_UP;
	return if_req(SIOCSIFFLAGS, &ifr);
}

/* if_addr -- TAP_IP/24 on TAP_IF; 0 or -1 */
static int if_addr(void)
{
	struct ifreq ifr;
	struct sockaddr_in a;

	memset(&ifr, 0, sizeof(ifr));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	inet_pton(AF_INET, TAP_IP, &a.sin_addr);
	memcpy(&ifr.ifr_addr, &a, sizeof(a));
	if (if_req(SIOCSIFADDR, &ifr))
		return -1;
	a.sin_addr.s_addr = htonl(0xffffff00u);
	memcpy(&ifr.ifr_netmask, &a, sizeof(a));
	return if_req(SIOCSIFNETMASK, &ifr);
}

/* tap_up -- TAP_IF, a tap interface that lives while the descriptor
 * returned is open (its carrier on), with its address, up; -1 where
 * there is no tun device or no right to make one */
static int tap_up(void)
{
	struct ifreq ifr;
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, TAP_IF);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	if (ioctl(fd, TUNSETIFF, &ifr) || if_addr() || link_set(1)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* port_event -- the next async event of C within 20 s: its type if it
 * is port 1's, -2 if another port's, -1 if none came */
static int port_event(struct ibv_context *c)
{
	struct ibv_async_event ev;
	int r = t_async(c, 20000, &ev);

	return r >= 0 && ev.element.port_num != 1 ? -2 : r;
}

/* toggled -- TAP_IF set down, then up: C gets PORT_ERR, then
 * PORT_ACTIVE, of port 1 (each waited for before the next change); 0, or
 * the step that failed */
static int toggled(struct ibv_context *c)
{
	if (link_set(0))
		return 1;
	if (port_event(c) != IBV_EVENT_PORT_ERR)
		return 2;
	if (link_set(1))
		return 3;
	return port_event(c) != IBV_EVENT_PORT_ACTIVE ? 4 : 0;
}

/* drain -- C's events until none for a second (the parent's of the
 * child's changes); how many */
static int drain(struct ibv_context *c)
{
	int n = 0;

	while (t_async(c, 1000, NULL) >= 0)
		n++;
	return n;
}

/* child -- the parent's watcher left behind, a device of its own with
 * port events, the inherited context and its own closed; 0 or what
 * failed */
static int child(void)
{
	struct tctx t;
	int r;

	if (netlink_fds() != 0)
		return 1; /* the parent's watcher's socket */
	if (t_open(&t, 4))
		return 2;
	r = toggled(t.ctx);
	if (r)
		return 10 + r;
	t_close(&pt); /* the parent's, unusable here; still its there */
	if (netlink_fds() != 1)
		return 3; /* its own watcher's, and that one only */
	t_close(&t);
	return netlink_fds() != 0 ? 4 : 0;
}

/* settle -- once parked, nothing more until the main thread has forked:
 * the fork finds the watcher where the park left it, and no allocation
 * runs meanwhile (park.h) */
static void settle(void)
{
	while (atomic_load(&park_parked) && !atomic_load(&park_forked))
		usleep(1000);
}

/* busy -- open and close a device until stopped: each open starts the
 * process's watcher, each close ends it */
static void *busy(void *arg)
{
	(void)arg;
	park_me = 1;
	while (!atomic_load(&park_stop)) {
		struct ibv_context *c = ibv_open_device(dev);

		settle();
		if (c)
			ibv_close_device(c);
		settle();
	}
	return NULL;
}

/* park_child -- forked while the busy thread was parked: no netlink
 * socket, and a device of its own with port events; 0 or what failed */
static int park_child(void)
{
	struct ibv_context *c;
	int n = netlink_fds(), r;

	if (n != 0)
		return n < 0 ? 1 : 10 + n; /* the parent's watcher's */
	c = ibv_open_device(dev);
	if (!c)
		return 2;
	r = toggled(c);
	ibv_close_device(c);
	if (r)
		return 20 + r;
	return netlink_fds() != 0 ? 3 : 0;
}

/* park_round -- fork while the busy thread is parked at the call FLAG
 * arms; the child's value (park_fork) */
static int park_round(atomic_int *flag)
{
	park_reset();
	atomic_store(flag, 1);
	fflush(stdout);
	return park_run(busy, park_child);
}

/* parent_part -- the parent's watcher across a child's fork, events and
 * exit; leaves pt closed */
static void parent_part(void)
{
	int r;

	r = toggled(pt.ctx);
	ok(r == 0, "port 1 follows " TAP_IF ": PORT_ERR, then PORT_ACTIVE (%d)",
	   r);
	r = t_fork_reap(child); /* softrdma's destructors run in it */
	if (r == -3)
		bail_out("fork");
	ok(r == 0,
	   "the child keeps no netlink socket, gets its own device's port "
	   "events, closes the inherited context and its own, and exits "
	   "(%s %d)",
	   r == -1 ? "hung" : "returned", r);
	diag("the parent's events of the child's changes: %d", drain(pt.ctx));
	r = toggled(pt.ctx);
	ok(r == 0, "the parent's watcher still runs after the child (%d)", r);
	t_close(&pt);
	is_int(netlink_fds(), 0, "the parent's last close ends its watcher");
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	int tap, r;

	alarm(180); /* a hang fails here */
	if (t_own_netns())
		skip_all("no user and network namespace here");
	tap = tap_up();
	if (tap < 0)
		skip_all("cannot make a tap interface here");
	setenv("SOFTRDMA_NET", "1", 1);
	unsetenv("SOFTRDMA_NETDEV");
	t_isolate("forkport");
	if (t_open(&pt, 4))
		bail_out("open");
	if (ibv_query_port(pt.ctx, 1, &pa) || pa.state != IBV_PORT_ACTIVE ||
	    netlink_fds() != 1)
		bail_out("port 1 does not follow " TAP_IF " (state %d)",
			 (int)pa.state);
	if (!park_in("libsoftrdma"))
		bail_out("libsoftrdma not found among the loaded objects");
	list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		bail_out("no device");
	dev = list[0];
	parent_part();
	r = park_round(&park_create);
	ok(r == 0,
	   "forked while a thread started the watcher: the child keeps no "
	   "netlink socket, and its own device gets port events (%s %d)",
	   r < 0 ? "hung" : "returned", r);
	r = park_round(&park_join);
	ok(r == 0,
	   "forked while a thread ended the watcher: the child keeps no "
	   "netlink socket, and its own device gets port events (%s %d)",
	   r < 0 ? "hung" : "returned", r);
	ibv_free_device_list(list);
	close(tap);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
