/* SPDX-License-Identifier: MIT */
/*
 * forknet.c -- a child forked by a process whose network path runs
 * (SOFTRDMA_NET=1, soft/net.c: its receive thread, its sockets on UDP
 * 4791, its connection to the host's agent) starts a path of its own on
 * the device it opens (soft/README.md, "fork()"), moves data on it, and
 * leaves its parent's path working.
 *
 * In a user and network namespace of our own.  One host, but an address
 * the device's GID table does not know (it is read once, at the first
 * open, before we add the address to lo): a QP addressed to it goes over
 * the network path, to this host's own agent and sockets, as to another
 * host.  The parent moves messages between two RC QPs of its own that
 * way, then forks; the child opens a device, moves messages between two
 * QPs of its own the same way (the first waited for on a completion
 * channel, not polled: the child's receive thread takes it in), destroys
 * the QPs it inherited (which are its parent's, unusable here) and
 * closes the inherited context; then the parent's QPs move messages
 * again.  Before soft_net_fork_child, the child kept its parent's
 * sockets and agent connection and had no receive thread: its QPs were
 * registered on the parent's connection, their packets went to the
 * parent's socket, where the parent's thread dropped those the child's
 * polls did not take first (a SEND of the child's could end in
 * IBV_WC_RETRY_EXC_ERR), and destroying the inherited QPs unregistered
 * the parent's QPNs at the agent: the parent's QPs got nothing more.
 */
#include "config.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

#define FAR_IP	"10.77.7.7"
#define MSG_MAX 65536 /* 64 packets at the path MTU of 1024 */

/* two RC QPs of one context, connected to each other through FAR_IP */
struct pair {
	struct tctx *t;
	struct ibv_qp *qp[2];
	struct ibv_mr *mr;
	char *buf; /* qp[k]'s half at buf + k * MSG_MAX */
};

static struct tctx pt;
static struct pair pp;

/* far_addr -- FAR_IP on lo (as "lo:1"), after the first open: this
 * host's, but none of the GID table's; 0 or -1 */
static int far_addr(void)
{
	struct ifreq ifr;
	struct sockaddr_in a;
	int fd = socket(AF_INET, SOCK_DGRAM, 0), r;

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	memset(&a, 0, sizeof(a));
	strcpy(ifr.ifr_name, "lo:1");
	a.sin_family = AF_INET;
	inet_pton(AF_INET, FAR_IP, &a.sin_addr);
	memcpy(&ifr.ifr_addr, &a, sizeof(a));
	r = ioctl(fd, SIOCSIFADDR, &ifr);
	a.sin_addr.s_addr = htonl(0xffffffffu);
	memcpy(&ifr.ifr_netmask, &a, sizeof(a));
	r = r || ioctl(fd, SIOCSIFNETMASK, &ifr);
	close(fd);
	return r ? -1 : 0;
}

/* udp_in -- the UDP datagrams this namespace has received */
static long long udp_in(void)
{
	FILE *f = fopen("/proc/net/snmp", "r");
	char line[512];
	long long v = -1;
	int hdr = 0;

	if (!f)
		return -1;
	while (v < 0 && fgets(line, sizeof(line), f))
		if (!strncmp(line, "Udp: ", 5) && hdr++ &&
		    sscanf(line + 5, "%lld", &v) != 1)
			v = -1;
	fclose(f);
	return v;
}

/* pair_up -- p's QPs on t, connected through FAR_IP; 0 or -1 */
static int pair_up(struct pair *p, struct tctx *t)
{
	union ibv_gid far;
	int k;

	memset(p, 0, sizeof(*p));
	memset(&far, 0, sizeof(far));
	far.raw[10] = far.raw[11] = 0xff;
	inet_pton(AF_INET, FAR_IP, &far.raw[12]);
	p->t = t;
	p->buf = calloc(2, MSG_MAX);
	if (!p->buf)
		return -1;
	p->mr = ibv_reg_mr(t->pd, p->buf, 2 * MSG_MAX, IBV_ACCESS_LOCAL_WRITE);
	for (k = 0; k < 2; k++)
		p->qp[k] = t_rc_qp(t, 16, NULL);
	if (!p->mr || !p->qp[0] || !p->qp[1])
		return -1;
	for (k = 0; k < 2; k++)
		if (t_connect_gid(p->qp[k], p->qp[!k]->qp_num, &far, 0, 1, 7,
				  14, 7))
			return -1;
	return 0;
}

/* pair_down -- p's QPs, MR and buffer gone */
static void pair_down(struct pair *p)
{
	int k;

	for (k = 0; k < 2; k++)
		if (p->qp[k])
			ibv_destroy_qp(p->qp[k]);
	if (p->mr)
		ibv_dereg_mr(p->mr);
	free(p->buf);
	memset(p, 0, sizeof(*p));
}

/* asleep -- wait on CH, not polling, until its CQ has an event; 0 or -1 */
static int asleep(struct ibv_comp_channel *ch)
{
	struct pollfd pfd = {ch->fd, POLLIN, 0};
	struct ibv_cq *cq;
	void *cq_ctx;

	if (poll(&pfd, 1, 20000) != 1 || ibv_get_cq_event(ch, &cq, &cq_ctx))
		return -1;
	ibv_ack_cq_events(cq, 1);
	return 0;
}

/* send_one -- LEN bytes of SEED's pattern from qp[FROM] to the other,
 * received whole (waiting on CH for the first completion, unless NULL:
 * by polling); 0, or which step failed */
static int send_one(struct pair *p, int from, uint32_t len, unsigned seed,
		    struct ibv_comp_channel *ch)
{
	char *src = p->buf + from * MSG_MAX, *dst = p->buf + !from * MSG_MAX;
	struct ibv_wc wc[2];
	int i;

	t_fill(src, len, seed);
	memset(dst, 0, len);
	if ((ch && ibv_req_notify_cq(p->t->cq, 0)) ||
	    t_post_recv(p->qp[!from], dst, len, p->mr->lkey, 1) ||
	    t_post(p->qp[from], IBV_WR_SEND, src, len, p->mr->lkey, 2,
		   IBV_SEND_SIGNALED, 0, 0))
		return 1;
	if (ch && asleep(ch))
		return 5; /* nobody took the packets in while we slept */
	if (t_wait(p->t->cq, wc, 2, 20000) != 2)
		return 2; /* nothing came: no path */
	for (i = 0; i < 2; i++)
		if (wc[i].status != IBV_WC_SUCCESS ||
		    wc[i].wr_id != (wc[i].opcode == IBV_WC_RECV ? 1u : 2u))
			return 3;
	return wc[0].opcode == wc[1].opcode || !t_filled(dst, len, seed) ? 4
									 : 0;
}

/* moved -- messages of a few sizes each way between p's QPs (the first
 * waited for on CH, unless NULL); 0, or 10 * the message + the step that
 * failed */
static int moved(struct pair *p, unsigned seed, struct ibv_comp_channel *ch)
{
	static const uint32_t len[] = {8, 4000, MSG_MAX};
	int i, r;

	for (i = 0; i < 6; i++) {
		r = send_one(p, i & 1, len[i / 2], seed + (unsigned)i,
			     i ? NULL : ch);
		if (r)
			return 10 * (i + 1) + r;
	}
	return 0;
}

/* child -- a device and a network path of its own (a message waited
 * for asleep: its receive thread takes it in), then the inherited
 * objects dropped; 0 or what failed */
static int child(void)
{
	struct ibv_comp_channel *ch;
	struct ibv_cq *ecq;
	struct tctx t;
	struct pair cp;
	long long before = udp_in();
	int r;

	if (t_open(&t, 64))
		return 1;
	ch = ibv_create_comp_channel(t.ctx);
	ecq = ch ? ibv_create_cq(t.ctx, 64, NULL, ch, 0) : NULL;
	if (!ecq)
		return 2;
	ibv_destroy_cq(t.cq);
	t.cq = ecq;
	if (pair_up(&cp, &t))
		return 3;
	r = moved(&cp, 100, ch);
	if (r)
		return 100 + r;
	if (udp_in() - before < 6)
		return 4; /* not over the network path */
	/* the parent's, unusable here: destroyed, they are still its there */
	pair_down(&pp);
	t_close(&pt);
	pair_down(&cp);
	t_close(&t);
	ibv_destroy_comp_channel(ch);
	return 0;
}

int main(void)
{
	long long before;
	int r;

	alarm(180); /* a hang fails here */
	if (t_own_netns())
		skip_all("no user and network namespace here");
	setenv("SOFTRDMA_NET", "1", 1);
	t_isolate("forknet");
	if (t_open(&pt, 64))
		bail_out("open");
	if (far_addr()) {
		t_close(&pt);
		skip_all("cannot add " FAR_IP " to lo here");
	}
	if (pair_up(&pp, &pt))
		bail_out("two RC QPs through " FAR_IP);
	before = udp_in();
	r = moved(&pp, 1, NULL);
	ok(r == 0, "the parent moves messages over its network path (%d)", r);
	before = udp_in() - before;
	ok(before >= 6, "they went as UDP datagrams (%lld received)", before);
	r = t_fork_reap(child); /* softrdma's destructors run in it */
	if (r == -3)
		bail_out("fork");
	ok(r == 0,
	   "the child moves messages on a network path of its own, drops "
	   "what it inherited, and exits (%s %d)",
	   r == -1 ? "hung" : "returned", r);
	r = moved(&pp, 50, NULL);
	ok(r == 0, "the parent's network path still works after the child (%d)",
	   r);
	pair_down(&pp);
	t_close(&pt);
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
