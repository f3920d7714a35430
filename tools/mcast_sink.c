/* SPDX-License-Identifier: MIT */
/*
 * mcast_sink -- a raw UD multicast receiver on softrdma for
 * tools/bench-mcast.sh: the receivers that "raw N rcv" adds to
 * perftest's group.  It takes every datagram with perftest's Q_Key
 * (rdmamsg subscribers, with rdma_cm's, drop them at the Q_Key check and
 * cost the raw sender nothing), posts its receives again, and blocks on
 * its CQ's channel when there is nothing to take.
 *
 *   mcast_sink -M MGID [-q QKEY] [-r DEPTH]
 *
 * MGID: an IPv6 group ("ff0e::1:77"); QKEY: default 0x11111111
 * (perftest's); DEPTH: receives posted (default 512, perftest's).  The
 * buffers are shared memory (a memfd), as rdmamsg's pool, so softrdma
 * places into them.  Prints "# subscribed" once attached; on SIGTERM or
 * SIGINT "# received N" and exits 0; 1 on any verbs error.
 */
#define _GNU_SOURCE
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SLOT (40 + 4096)

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int die(const char *what)
{
	fprintf(stderr, "mcast_sink: %s failed\n", what);
	exit(1);
}

/* post -- receive slot i */
static void post(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *buf, uint64_t i)
{
	struct ibv_sge sge = {.addr = (uintptr_t)(buf + i * SLOT),
			      .length = SLOT,
			      .lkey = mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1};
	struct ibv_recv_wr *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		die("ibv_post_recv");
}

/* take -- the completions there are, each receive posted again: how
 * many */
static int take(struct ibv_cq *cq, struct ibv_qp *qp, struct ibv_mr *mr,
		uint8_t *buf, uint64_t *received)
{
	struct ibv_wc wc[32];
	int i, n = ibv_poll_cq(cq, 32, wc);

	if (n < 0)
		die("ibv_poll_cq");
	for (i = 0; i < n; i++) {
		*received += wc[i].status == IBV_WC_SUCCESS;
		post(qp, mr, buf, wc[i].wr_id);
	}
	return n;
}

int main(int argc, char **argv)
{
	struct sigaction sa = {.sa_handler = on_signal};
	unsigned long qkey = 0x11111111, depth = 512, i;
	struct ibv_qp_init_attr qa = {.qp_type = IBV_QPT_UD};
	struct ibv_qp_attr a = {.port_num = 1};
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq, *ev_cq;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct pollfd pfd;
	union ibv_gid mgid;
	const char *group = NULL;
	uint64_t received = 0;
	uint8_t *buf;
	void *ev_ctx;
	int opt, fd;

	while ((opt = getopt(argc, argv, "M:q:r:")) != -1) {
		switch (opt) {
		case 'M':
			group = optarg;
			break;
		case 'q':
			qkey = strtoul(optarg, NULL, 0);
			break;
		case 'r':
			depth = strtoul(optarg, NULL, 0);
			break;
		default:
			group = NULL;
			optind = argc + 1;
		}
	}
	if (!group || optind != argc ||
	    inet_pton(AF_INET6, group, &mgid) != 1 || !depth || depth > 4096 ||
	    qkey > UINT32_MAX) {
		fprintf(stderr, "usage: mcast_sink -M MGID [-q QKEY] [-r DEPTH "
				"(1..4096)]\n");
		return 2;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	list = ibv_get_device_list(NULL);
	if (!list || !list[0])
		die("ibv_get_device_list");
	ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!ctx)
		die("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	ch = ibv_create_comp_channel(ctx);
	if (!pd || !ch || fcntl(ch->fd, F_SETFL, O_NONBLOCK))
		die("ibv_create_comp_channel");
	cq = ibv_create_cq(ctx, (int)depth, NULL, ch, 0);
	fd = memfd_create("mcast_sink", MFD_CLOEXEC);
	if (!cq || fd < 0 || ftruncate(fd, (off_t)(depth * SLOT)))
		die("setup");
	buf = mmap(NULL, depth * SLOT, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   0);
	if (buf == MAP_FAILED)
		die("mmap");
	mr = ibv_reg_mr(pd, buf, depth * SLOT, IBV_ACCESS_LOCAL_WRITE);
	close(fd); /* softrdma found it at the registration */
	qa.send_cq = qa.recv_cq = cq;
	qa.cap.max_send_wr = 1;
	qa.cap.max_recv_wr = (uint32_t)depth;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qp = mr ? ibv_create_qp(pd, &qa) : NULL;
	if (!qp)
		die("ibv_create_qp");
	a.qp_state = IBV_QPS_INIT;
	a.qkey = (uint32_t)qkey;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_QKEY))
		die("ibv_modify_qp INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("ibv_modify_qp RTR");
	for (i = 0; i < depth; i++)
		post(qp, mr, buf, i);
	if (ibv_attach_mcast(qp, &mgid, 0))
		die("ibv_attach_mcast");
	printf("# subscribed\n");
	fflush(stdout);
	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	while (!stop) {
		if (take(cq, qp, mr, buf, &received))
			continue;
		/* nothing: arm, look once more, then sleep */
		if (ibv_req_notify_cq(cq, 0))
			die("ibv_req_notify_cq");
		if (take(cq, qp, mr, buf, &received))
			continue;
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			die("poll");
		if (!ibv_get_cq_event(ch, &ev_cq, &ev_ctx))
			ibv_ack_cq_events(ev_cq, 1);
	}
	printf("# received %llu\n", (unsigned long long)received);
	ibv_detach_mcast(qp, &mgid, 0);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(ch);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
