/* SPDX-License-Identifier: MIT */
/*
 * hostile_mc.c -- a multicast subscriber against datagrams forged by a
 * raw UD QP (librdmacm/libibverbs on softrdma, speaking lib/proto.h by
 * hand).  A heartbeat's sequence number is untrusted: one that says a
 * publisher left (MCF_FIN) or can repair nothing before it (MCF_LOW) at a
 * sequence number 2^62 ahead reports those messages lost in one on_loss
 * and costs the subscriber no more than any heartbeat: its loop goes on
 * and the next datagram is taken at once.  (lib/group.c's skip() used to
 * walk every sequence number up to it, one at a time: the process hung.)
 * Publishers come and go, each join with an id of its own: once more
 * than the subscriber's table holds (1024) were heard of, one silent for
 * longer than a gone one (5 s) makes room for the next (it used to be
 * ignored for the rest of the group's life).  A reliable late joiner
 * whose first datagram of a publisher is an old repair (DATA sent again
 * for another subscriber) or a MCF_LOW heartbeat does not start there
 * but at the publisher's next heartbeat (late_repair).
 */
#include "config.h"

#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <rdma/rdma_cma.h>

#include "../tap.h"
#include "../core/util.h"
#include "proto.h"

#define GROUP	 "239.1.2.93"
#define PUB_A	 0xa11ce0000000000aull
#define PUB_B	 0xb0b000000000000bull
#define FAR	 ((uint64_t)1 << 62)
#define PUB_C	 0xc0c000000000000cull
#define PUB_FILL 0xf111000000000000ull
#define NFILL	 1100 /* publishers heard of: more than a table holds (1024) */
#define NLOSS	 3
#define GROUP2	 "239.1.2.98" /* late_repair's */
#define PUB_R	 0x4e9a140000000001ull
#define PUB_L	 0x10e0000000000001ull

/* ---- the subscriber (a child process) ------------------------------ */

static int sub_wfd;
static volatile int sub_joined, sub_losses, sub_closed;

/* sub_join -- the join ended: tell the parent */
static void sub_join(struct rdmamsg_group *g, int status, void *arg)
{
	int32_t st = status;

	(void)g;
	(void)arg;
	sub_joined = 1;
	if (write(sub_wfd, &st, sizeof(st)) != sizeof(st))
		_exit(91);
}

/* sub_loss -- a loss report: to the parent as it came */
static void sub_loss(struct rdmamsg_group *g, uint64_t publisher,
		     uint64_t first, uint64_t count, void *arg)
{
	uint64_t r[3] = {publisher, first, count};

	(void)g;
	(void)arg;
	sub_losses++;
	if (write(sub_wfd, r, sizeof(r)) != sizeof(r))
		_exit(92);
}

static void sub_close(struct rdmamsg_group *g, void *arg)
{
	(void)g;
	(void)arg;
	sub_closed = 1;
}

/* what a subscriber child joins: the group, reliable mode's window (0:
 * default mode), the loss reports it leaves after */
struct sub_cfg {
	const char *group;
	uint32_t window;
	int nloss;
};

/* subscriber -- join as cfg (arg) says, report the join and each loss,
 * leave after cfg->nloss of them */
static int subscriber(int wfd, void *arg)
{
	const struct sub_cfg *cfg = arg;
	struct rdmamsg_group_cbs cbs = {.on_join = sub_join,
					.on_loss = sub_loss};
	struct rdmamsg_group_attr *a = NULL;
	struct rdmamsg_group *g = NULL;
	struct rdmamsg_ctx *ctx = test_ctx();
	volatile int done = 0;
	long long end;
	int ret;

	sub_wfd = wfd;
	if (rdmamsg_group_attr_new(&a) ||
	    rdmamsg_group_attr_set_reliable(a, cfg->window))
		return 1;
	ret = rdmamsg_group_join(ctx, cfg->group, a, &cbs, NULL, &g);
	rdmamsg_group_attr_delete(&a);
	if (ret)
		return 1;
	test_run_until(ctx, &sub_joined, 10000);
	end = test_now_ms() + 60000;
	while (sub_losses < cfg->nloss && test_now_ms() < end)
		test_run_until(ctx, &done, 100);
	if (rdmamsg_group_close(g, sub_close))
		return 2;
	test_run_until(ctx, &sub_closed, 10000);
	return rdmamsg_ctx_destroy(&ctx) ? 3 : 0;
}

/* ---- the attacker (this process) ----------------------------------- */

struct raw {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	uint32_t qpn, qkey;
	char buf[256];
};

/* raw_event -- the next CM event if it is type (acked into *out), or -1 */
static int raw_event(struct raw *r, enum rdma_cm_event_type type,
		     struct rdma_cm_event *out)
{
	struct pollfd f = {.fd = r->ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;
	int ret;

	if (poll(&f, 1, 10000) != 1 || rdma_get_cm_event(r->ch, &ev))
		return -1;
	ret = ev->event == type && !ev->status ? 0 : -1;
	if (!ret && out)
		*out = *ev;
	rdma_ack_cm_event(ev);
	return ret;
}

/* raw_open -- a UD QP that may send to group (a send-only join) */
static int raw_open(struct raw *r, const char *group)
{
	struct sockaddr_in sin;
	struct rdma_cm_join_mc_attr_ex jx;
	struct ibv_qp_init_attr qa;
	struct rdma_cm_event ev;

	memset(r, 0, sizeof(*r));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	inet_pton(AF_INET, group, &sin.sin_addr);
	r->ch = rdma_create_event_channel();
	if (!r->ch || rdma_create_id(r->ch, &r->id, NULL, RDMA_PS_UDP) ||
	    rdma_resolve_addr(r->id, NULL, (struct sockaddr *)&sin, 2000) ||
	    raw_event(r, RDMA_CM_EVENT_ADDR_RESOLVED, NULL))
		return -1;
	r->pd = ibv_alloc_pd(r->id->verbs);
	r->cq = r->pd ? ibv_create_cq(r->id->verbs, 16, NULL, NULL, 0) : NULL;
	r->mr = r->cq ? ibv_reg_mr(r->pd, r->buf, sizeof(r->buf),
				   IBV_ACCESS_LOCAL_WRITE)
		      : NULL;
	if (!r->mr)
		return -1;
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_UD;
	qa.send_cq = qa.recv_cq = r->cq;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 8;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(r->id, r->pd, &qa))
		return -1;
	memset(&jx, 0, sizeof(jx));
	jx.comp_mask =
		RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	jx.addr = (struct sockaddr *)&sin;
	jx.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
	if (rdma_join_multicast_ex(r->id, &jx, NULL) ||
	    raw_event(r, RDMA_CM_EVENT_MULTICAST_JOIN, &ev))
		return -1;
	r->qpn = ev.param.ud.qp_num;
	r->qkey = ev.param.ud.qkey;
	r->ah = ibv_create_ah(r->pd, &ev.param.ud.ah_attr);
	return r->ah ? 0 : -1;
}

/* raw_send -- a datagram of type from publisher pub: seq, flags, and
 * (DATA) a whole message of len bytes of value v */
static int raw_send(struct raw *r, int type, uint64_t pub, uint64_t seq,
		    uint16_t flags, uint32_t len, uint8_t v)
{
	struct rdmamsg__mc_wire h;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	long long end = test_now_ms() + 5000;
	int n;

	if (len > sizeof(r->buf) - RDMAMSG_MC_HDR)
		return -1;
	memset(&h, 0, sizeof(h));
	h.type = (uint8_t)type;
	h.flags = flags;
	h.pub = pub;
	h.seq = seq;
	h.total = len;
	rdmamsg__mc_encode(&h, r->buf);
	memset(r->buf + RDMAMSG_MC_HDR, v, len);
	sge.addr = (uintptr_t)r->buf;
	sge.length = RDMAMSG_MC_HDR + len;
	sge.lkey = r->mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = r->ah;
	wr.wr.ud.remote_qpn = r->qpn;
	wr.wr.ud.remote_qkey = r->qkey;
	if (ibv_post_send(r->id->qp, &wr, &bad))
		return -1;
	while ((n = ibv_poll_cq(r->cq, 1, &wc)) == 0 && test_now_ms() < end)
		usleep(200);
	return n == 1 && wc.status == IBV_WC_SUCCESS ? 0 : -1;
}

/* raw_heartbeat -- a heartbeat of publisher pub saying seq, with flags */
static int raw_heartbeat(struct raw *r, uint64_t pub, uint64_t seq,
			 uint16_t flags)
{
	return raw_send(r, MC_HEARTBEAT, pub, seq, flags, 0, 0);
}

/* raw_close -- leave and tear down what raw_open made */
static void raw_close(struct raw *r)
{
	if (r->ah)
		ibv_destroy_ah(r->ah);
	if (r->id) {
		rdma_leave_multicast(r->id, rdma_get_peer_addr(r->id));
		if (r->id->qp)
			rdma_destroy_qp(r->id);
	}
	if (r->mr)
		ibv_dereg_mr(r->mr);
	if (r->cq)
		ibv_destroy_cq(r->cq);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	if (r->id)
		rdma_destroy_id(r->id);
	if (r->ch)
		rdma_destroy_event_channel(r->ch);
}

/* read_loss -- the subscriber's next loss report within 10 s: 0, or -1 */
static int read_loss(int rfd, uint64_t *r)
{
	struct pollfd p = {.fd = rfd, .events = POLLIN};

	if (poll(&p, 1, 10000) != 1 ||
	    read(rfd, r, 3 * sizeof(*r)) != (ssize_t)(3 * sizeof(*r)))
		return -1;
	return 0;
}

/* wait_sub -- the subscriber child pid exits cleanly (within 15 s,
 * reading rfd's end; else killed) */
static void wait_sub(pid_t pid, int rfd)
{
	struct pollfd p = {.fd = rfd, .events = POLLIN};
	int status;

	if (poll(&p, 1, 15000) != 1) {
		/* hung (or far behind): do not wait for it forever */
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		ok(0, "the subscriber exits (it hangs: killed)");
	} else {
		is_int(test_wait_child(pid), 0, "the subscriber exits cleanly");
	}
	close(rfd);
}

/*
 * late_repair -- a reliable subscriber (a late joiner) whose first
 * datagram of a publisher is DATA: a repair sent by multicast for
 * another subscriber may be one, of a message long before the join, so
 * the publisher starts at its next heartbeat, not there (it used to
 * start at the old message and report everything from it to the
 * heartbeat lost); nor at a heartbeat with MCF_LOW (the oldest message
 * the publisher keeps, not its next).
 */
static void late_repair(void)
{
	static const struct sub_cfg cfg = {GROUP2, 64, 2};
	struct pollfd p;
	struct raw r;
	uint64_t loss[3] = {0, 0, 0};
	int32_t st = 1;
	int rfd, ret;
	pid_t pid;

	pid = test_fork(subscriber, (void *)&cfg, &rfd);
	p.fd = rfd;
	p.events = POLLIN;
	if (poll(&p, 1, 15000) != 1 || read(rfd, &st, sizeof(st)) != sizeof(st))
		st = 1;
	is_int(st, 0, "a reliable subscriber joined");
	ok(raw_open(&r, GROUP2) == 0, "the attacker's QP sends to its group");
	ok(!raw_send(&r, MC_DATA, PUB_R, 3, 0, 8, 3) &&
		   !raw_heartbeat(&r, PUB_R, 10, 0) &&
		   !raw_send(&r, MC_DATA, PUB_R, 12, 0, 8, 12),
	   "a publisher's message 3 (a repair), its heartbeat at 10, then "
	   "message 12");
	/* (read before ok(): its arguments show what was read) */
	ret = read_loss(rfd, loss);
	ok(!ret && loss[0] == PUB_R && loss[1] == 10 && loss[2] == 2,
	   "it starts at the heartbeat: 10 and 11 reported lost, nothing "
	   "before (%llx %llu %llu)",
	   (unsigned long long)loss[0], (unsigned long long)loss[1],
	   (unsigned long long)loss[2]);
	ok(!raw_heartbeat(&r, PUB_L, 1, MCF_LOW) &&
		   !raw_heartbeat(&r, PUB_L, 20, 0) &&
		   !raw_heartbeat(&r, PUB_L, 25, MCF_FIN),
	   "another's heartbeats: oldest kept 1 (MCF_LOW), next 20, last 25");
	ret = read_loss(rfd, loss);
	ok(!ret && loss[0] == PUB_L && loss[1] == 20 && loss[2] == 5,
	   "it starts at 20: 20 .. 24 reported lost, nothing before (%llx "
	   "%llu %llu)",
	   (unsigned long long)loss[0], (unsigned long long)loss[1],
	   (unsigned long long)loss[2]);
	raw_close(&r);
	wait_sub(pid, rfd);
}

int main(void)
{
	static const struct sub_cfg cfg = {GROUP, 0, NLOSS};
	struct pollfd p;
	struct raw r;
	uint64_t loss[3];
	int32_t st = 1;
	int rfd, i, n;
	pid_t pid;

	test_setup("hostile_mc");
	signal(SIGPIPE, SIG_IGN);
	pid = test_fork(subscriber, (void *)&cfg, &rfd);
	p.fd = rfd;
	p.events = POLLIN;
	if (poll(&p, 1, 15000) != 1 || read(rfd, &st, sizeof(st)) != sizeof(st))
		st = 1;
	is_int(st, 0, "the subscriber joined");
	ok(raw_open(&r, GROUP) == 0,
	   "the attacker's UD QP may send to the group");

	/* a publisher heard of at 5, then gone at 2^62 */
	ok(!raw_heartbeat(&r, PUB_A, 5, 0) &&
		   !raw_heartbeat(&r, PUB_A, FAR, MCF_FIN),
	   "heartbeats of a publisher at 5, then its last at 2^62");
	ok(!read_loss(rfd, loss) && loss[0] == PUB_A && loss[1] == 5 &&
		   loss[2] == FAR - 5,
	   "one loss report: 2^62 - 5 messages from 5, at once");
	/* the loop is still turning: the next one is taken too */
	ok(!raw_heartbeat(&r, PUB_B, 0, 0) &&
		   !raw_heartbeat(&r, PUB_B, UINT64_MAX, MCF_LOW),
	   "heartbeats of another at 0, then one repairing nothing below "
	   "2^64 - 1");
	ok(!read_loss(rfd, loss) && loss[0] == PUB_B && loss[1] == 0 &&
		   loss[2] == UINT64_MAX,
	   "one loss report: 2^64 - 1 messages from 0, at once");
	/* publishers come and go: more of them than the subscriber's table
	 * holds, each heard of once (paced: no receive queue overflows) */
	for (i = 0, n = 0; i < NFILL; i++) {
		n += !raw_heartbeat(&r, PUB_FILL + i, 0, 0);
		if (i % 32 == 31)
			usleep(2000);
	}
	is_int(n, NFILL, "heartbeats of 1100 publishers, one each");
	/* silent for longer than one that is gone (5 s), they make room */
	usleep(5500 * 1000);
	ok(!raw_heartbeat(&r, PUB_C, 0, 0) &&
		   !raw_heartbeat(&r, PUB_C, 7, MCF_FIN),
	   "then another publisher: heard of at 0, its last at 7");
	ok(!read_loss(rfd, loss) && loss[0] == PUB_C && loss[1] == 0 &&
		   loss[2] == 7,
	   "it is heard: its 7 messages reported lost");
	raw_close(&r);
	wait_sub(pid, rfd);
	late_repair();
	return done_testing();
}
