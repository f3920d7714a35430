/* SPDX-License-Identifier: MIT */
/*
 * mcast_place.c -- UD multicast placed straight into posted receives:
 * receivers whose buffers are shareable (a sealed memfd) get each
 * datagram without the queue's copy, others through it, mixed within one
 * receive queue; every datagram intact, once, in order.  Also: no receive
 * posted (dropped, counted), a wrong Q_Key, a receive too small
 * (IBV_WC_LOC_LEN_ERR), a receiver killed mid-stream (the sender and the
 * others go on), a dropped datagram wakes no armed CQ's channel.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tap.h"
#include "common.h"

uint64_t softrdma_qp_drops(struct ibv_qp *qp, int why);
uint64_t softrdma_qp_placed(struct ibv_qp *qp);

#define QKEY   0x0badcafeu
#define MTU    4096
#define RBUF   (40 + MTU)
#define WIN    64 /* receives each receiver keeps posted (even) */
#define BATCH  48 /* datagrams per batch; every live receiver acks each */
#define MC_QPN 0xffffffu

enum { MAPPED, COPIED, MIXED, KILLED, NMODES };
static const char *const mode_name[] = {"mapped", "copied", "mixed", "killed"};
static const uint32_t sizes[] = {4, 100, 1024, MTU, 0, 4000};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* is_placed -- count is want where peers can map at all (valgrind 3.19
 * has no pidfd_open: softrdma copies through the queue, which the rest
 * checks) */
static void is_placed(uint64_t count, uint64_t want, const char *name)
{
	if (!t_can_map()) {
		ok(1, "%s # SKIP no pidfd_open here", name);
		return;
	}
	if (!ok(count == want, "%s", name))
		diag("  %llu placed, want %llu", (unsigned long long)count,
		     (unsigned long long)want);
}

static uint32_t size_of(uint32_t seq)
{
	return sizes[seq % NSIZES];
}

/* the MGID of 239.1.3.<last>, IPv4-mapped as librdmacm maps it on RoCE */
static void mgid_of(union ibv_gid *g, uint8_t last)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = g->raw[11] = 0xff;
	g->raw[12] = 239;
	g->raw[13] = 1;
	g->raw[14] = 3;
	g->raw[15] = last;
}

static void pattern(unsigned char *p, uint32_t len, uint32_t seq)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)(seq * 13 + i * 5 + len);
	if (len >= 4)
		memcpy(p, &seq, 4);
}

struct rx {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch; /* quiet() only */
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr[2]; /* shareable, private */
	unsigned char *buf[2];
	size_t len;
};

/* shared_buf -- len bytes of a memfd sealed against shrinking, mapped
 * shared (as rdmamsg's pool allocates); its fd open until registered */
static unsigned char *shared_buf(size_t len, int *fd)
{
	void *p;

	*fd = memfd_create("mcast_place", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (*fd < 0 || ftruncate(*fd, (off_t)len) ||
	    fcntl(*fd, F_ADD_SEALS, F_SEAL_SHRINK))
		return NULL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* rx_open -- device, UD QP (depth WIN) and both kinds of buffer, WIN
 * slots each; with chan, its CQ on a non-blocking completion channel */
static int rx_open(struct rx *r, int chan)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr a;
	int fd = -1, i;

	memset(r, 0, sizeof(*r));
	if (!l || !l[0])
		return -1;
	r->ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!r->ctx)
		return -1;
	r->pd = ibv_alloc_pd(r->ctx);
	if (chan) {
		r->ch = ibv_create_comp_channel(r->ctx);
		if (!r->ch || fcntl(r->ch->fd, F_SETFL, O_NONBLOCK))
			return -1;
	}
	r->cq = ibv_create_cq(r->ctx, 2 * WIN + 16, NULL, r->ch, 0);
	r->len = (size_t)WIN * RBUF;
	r->buf[0] = shared_buf(r->len, &fd);
	r->buf[1] = calloc(1, r->len);
	if (!r->pd || !r->cq || !r->buf[0] || !r->buf[1])
		return -1;
	for (i = 0; i < 2; i++)
		r->mr[i] = ibv_reg_mr(r->pd, r->buf[i], r->len,
				      IBV_ACCESS_LOCAL_WRITE);
	close(fd); /* softrdma found it at the registration */
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = r->cq;
	a.qp_type = IBV_QPT_UD;
	a.cap.max_send_wr = a.cap.max_recv_wr = WIN;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	r->qp = ibv_create_qp(r->pd, &a);
	if (!r->mr[0] || !r->mr[1] || !r->qp || t_ud_up(r->qp, QKEY))
		return -1;
	return 0;
}

/* kind_of -- which buffer slot s of a receiver in mode m uses */
static int kind_of(int m, uint32_t s)
{
	return m == COPIED || (m == MIXED && (s & 1));
}

/* post -- receive slot s (len bytes of it) */
static int post(struct rx *r, int m, uint32_t s, uint32_t len)
{
	int k = kind_of(m, s);

	return t_post_recv(r->qp, r->buf[k] + (size_t)s * RBUF, len,
			   r->mr[k]->lkey, s);
}

/* check -- a completion against datagram seq from src_qp to mgid:
 * 0 when status, length, source, GRH and data are right */
static int check(struct rx *r, int m, const struct ibv_wc *wc, uint32_t seq,
		 uint32_t src_qp, const union ibv_gid *mgid)
{
	unsigned char want[MTU];
	const unsigned char *p;
	uint32_t len = size_of(seq);

	if (wc->status != IBV_WC_SUCCESS || wc->opcode != IBV_WC_RECV ||
	    wc->wr_id >= WIN || wc->byte_len != 40 + len ||
	    wc->src_qp != src_qp || !(wc->wc_flags & IBV_WC_GRH))
		return -1;
	p = r->buf[kind_of(m, (uint32_t)wc->wr_id)] + wc->wr_id * RBUF;
	if (p[20] != 0x45 || memcmp(p + 36, mgid->raw + 12, 4))
		return -2;
	pattern(want, len, seq);
	return memcmp(p + 40, want, len) ? -3 : 0;
}

/*
 * receiver -- mode, count and source from the parent; WIN receives
 * posted, each datagram checked (in order: the next sequence number)
 * and its slot posted again; an ack per BATCH; at the end what was
 * placed, dropped and wrong
 */
static int receiver(int rfd, int wfd)
{
	uint64_t res[3] = {0, 0, 0};
	struct ibv_wc wc;
	union ibv_gid mgid;
	uint32_t m, n, src, seq, s;
	struct rx r;

	t_xrecv(rfd, &m, 4);
	t_xrecv(rfd, &n, 4);
	mgid_of(&mgid, 1);
	if (rx_open(&r, 0) || ibv_attach_mcast(r.qp, &mgid, 0))
		return 100;
	for (s = 0; s < WIN; s++)
		if (post(&r, (int)m, s, RBUF))
			return 101;
	t_xsend(wfd, &r.qp->qp_num, 4);
	t_xrecv(rfd, &src, 4);
	for (seq = 0; seq < n; seq++) {
		if (t_wait(r.cq, &wc, 1, 20000) != 1)
			return 102;
		if (check(&r, (int)m, &wc, seq, src, &mgid) && res[2]++ < 5)
			diag("%s receiver: datagram %u wrong", mode_name[m],
			     seq);
		if (post(&r, (int)m, (uint32_t)wc.wr_id, RBUF))
			return 103;
		if ((seq + 1) % BATCH == 0 || seq + 1 == n)
			t_xsend(wfd, &seq, 4);
	}
	if (t_wait(r.cq, &wc, 1, 50)) /* nothing more, no duplicate */
		res[2]++;
	res[0] = softrdma_qp_placed(r.qp);
	res[1] = softrdma_qp_drops(r.qp, -1);
	t_xsend(wfd, res, sizeof(res));
	/* the child leaves by _exit: no destructor leaves the group */
	return ibv_detach_mcast(r.qp, &mgid, 0) ? 104 : 0;
}

struct tx {
	struct tctx t;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	unsigned char buf[MTU];
};

static int tx_open(struct tx *x, uint8_t group)
{
	struct ibv_qp_init_attr a;
	struct ibv_ah_attr aa;

	if (t_open(&x->t, 64))
		return -1;
	x->mr = ibv_reg_mr(x->t.pd, x->buf, sizeof(x->buf), 0);
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = x->t.cq;
	a.qp_type = IBV_QPT_UD;
	a.cap.max_send_wr = a.cap.max_recv_wr = 16;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	x->qp = ibv_create_qp(x->t.pd, &a);
	if (!x->mr || !x->qp || t_ud_up(x->qp, QKEY))
		return -1;
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	aa.grh.sgid_index = 1; /* ::ffff:127.0.0.1 */
	aa.grh.hop_limit = 1;
	mgid_of(&aa.grh.dgid, group);
	x->ah = ibv_create_ah(x->t.pd, &aa);
	return x->ah ? 0 : -1;
}

static void tx_close(struct tx *x)
{
	ibv_destroy_ah(x->ah);
	ibv_destroy_qp(x->qp);
	ibv_dereg_mr(x->mr);
	t_close(&x->t);
}

/* send_seq -- datagram seq to the group (qkey), completed successfully */
static int send_seq(struct tx *x, uint32_t seq, uint32_t qkey)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;

	pattern(x->buf, size_of(seq), seq);
	sge.addr = (uintptr_t)x->buf;
	sge.length = size_of(seq);
	sge.lkey = x->mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = seq;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = x->ah;
	wr.wr.ud.remote_qpn = MC_QPN;
	wr.wr.ud.remote_qkey = qkey;
	if (ibv_post_send(x->qp, &wr, &bad))
		return -1;
	return t_wait(x->t.cq, &wc, 1, 20000) == 1 &&
			       wc.status == IBV_WC_SUCCESS && wc.wr_id == seq
		       ? 0
		       : -1;
}

/*
 * test_fanout -- one receiver of each mode; the KILLED one is killed
 * after two batches, the others get every datagram
 */
static void test_fanout(void)
{
	uint32_t n = tap_small() ? 6 * BATCH : 60 * BATCH, m, seq, ack;
	uint64_t res[NMODES][3];
	int rfd[NMODES], wfd[NMODES], st, fail = 0, alive[NMODES];
	pid_t pid[NMODES];
	uint32_t qpn;
	struct tx x;

	if (tx_open(&x, 1))
		bail_out("sender");
	for (m = 0; m < NMODES; m++) {
		pid[m] = t_spawn(receiver, &rfd[m], &wfd[m]);
		if (pid[m] < 0)
			bail_out("fork");
		t_xsend(wfd[m], &m, 4);
		t_xsend(wfd[m], &n, 4);
		t_xrecv(rfd[m], &qpn, 4);
		t_xsend(wfd[m], &x.qp->qp_num, 4);
		alive[m] = 1;
	}
	for (seq = 0; seq < n && !fail; seq++) {
		if (send_seq(&x, seq, QKEY))
			fail = 1;
		if ((seq + 1) % BATCH && seq + 1 != n)
			continue;
		for (m = 0; m < NMODES; m++)
			if (alive[m])
				t_xrecv(rfd[m], &ack, 4);
		if (seq + 1 == 2 * BATCH) {
			kill(pid[KILLED], SIGKILL);
			waitpid(pid[KILLED], &st, 0);
			alive[KILLED] = 0;
		}
	}
	ok(!fail,
	   "%u datagrams sent, each completed successfully, a "
	   "receiver killed after %u",
	   n, 2 * BATCH);
	for (m = 0; m < NMODES; m++) {
		if (!alive[m])
			continue;
		t_xrecv(rfd[m], res[m], sizeof(res[m]));
		waitpid(pid[m], &st, 0);
		ok(WIFEXITED(st) && !WEXITSTATUS(st) && !res[m][1] &&
			   !res[m][2],
		   "%s receiver: all %u intact, once, in order, none dropped "
		   "(status %d, %llu dropped, %llu wrong)",
		   mode_name[m], n, st, (unsigned long long)res[m][1],
		   (unsigned long long)res[m][2]);
	}
	is_placed(res[MAPPED][0], n,
		  "shareable buffers: every datagram placed, no queue copy");
	is_int(res[COPIED][0], 0, "private buffers: every one copied");
	is_placed(res[MIXED][0], (n + 1) / 2,
		  "mixed: the receives in shareable buffers placed, the "
		  "others copied, in one order");
	for (m = 0; m < NMODES; m++) {
		close(rfd[m]);
		close(wfd[m]);
	}
	tx_close(&x);
}

/*
 * edges -- 4 receives posted (shareable; its join also reclaims the
 * killed receiver's place); told how many datagrams came,
 * takes what it can; then the statuses of one too small receive between
 * two good ones
 */
static int edges(int rfd, int wfd)
{
	uint64_t res[8] = {0};
	struct ibv_wc wc[8];
	union ibv_gid mgid;
	uint32_t src, s, n;
	struct rx r;

	mgid_of(&mgid, 2);
	if (rx_open(&r, 0) || ibv_attach_mcast(r.qp, &mgid, 0))
		return 100;
	for (s = 0; s < 4; s++)
		if (post(&r, MAPPED, s, RBUF))
			return 101;
	t_xsend(wfd, &r.qp->qp_num, 4);
	t_xrecv(rfd, &src, 4);
	/* 10 sent (seq 0..9) to 4 receives */
	t_xrecv(rfd, &n, 4);
	n = (uint32_t)t_wait(r.cq, wc, 8, 200);
	res[0] = n;
	for (s = 0; s < n; s++)
		if (check(&r, MAPPED, &wc[s], s, src, &mgid))
			res[1]++;
	res[2] = softrdma_qp_drops(r.qp, 0); /* no receive */
	/* one receive again: seq 10 with a wrong Q_Key, then seq 11 */
	if (post(&r, MAPPED, 0, RBUF))
		return 102;
	t_xsend(wfd, &n, 4);
	t_xrecv(rfd, &n, 4);
	if (t_wait(r.cq, wc, 1, 2000) != 1 ||
	    check(&r, MAPPED, &wc[0], 11, src, &mgid))
		res[1]++;
	res[3] = softrdma_qp_drops(r.qp, 1); /* qkey */
	res[4] = softrdma_qp_placed(r.qp);
	/* 4 KiB + 40 into slot 1, 99 bytes into slot 2, again into 3 */
	if (post(&r, MAPPED, 1, RBUF) || post(&r, MAPPED, 2, 99) ||
	    post(&r, MAPPED, 3, RBUF))
		return 103;
	t_xsend(wfd, &n, 4);
	t_xrecv(rfd, &n, 4);
	n = (uint32_t)t_wait(r.cq, wc, 3, 2000);
	res[5] = n == 3 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 1 &&
		 !check(&r, MAPPED, &wc[0], 15, src, &mgid);
	res[6] = n == 3 ? (uint64_t)wc[1].status << 32 | wc[1].wr_id : 99;
	res[7] = n == 3 ? (uint64_t)wc[2].status << 32 | wc[2].wr_id : 99;
	t_xsend(wfd, res, sizeof(res));
	return ibv_detach_mcast(r.qp, &mgid, 0) ? 104 : 0;
}

/* tx_spawn -- a sender to group and a receiver process running fn,
 * their QP numbers exchanged */
static pid_t tx_spawn(struct tx *x, uint8_t group, int (*fn)(int, int),
		      int *rfd, int *wfd)
{
	uint32_t qpn;
	pid_t pid;

	if (tx_open(x, group))
		bail_out("sender");
	pid = t_spawn(fn, rfd, wfd);
	if (pid < 0)
		bail_out("fork");
	t_xrecv(*rfd, &qpn, 4);
	t_xsend(*wfd, &x->qp->qp_num, 4);
	return pid;
}

static void test_edges(void)
{
	uint64_t res[8];
	int rfd, wfd, st, fail = 0;
	uint32_t seq;
	struct tx x;
	pid_t pid = tx_spawn(&x, 2, edges, &rfd, &wfd);

	for (seq = 0; seq < 10; seq++)
		fail |= send_seq(&x, seq, QKEY);
	t_xsend(wfd, &seq, 4);
	t_xrecv(rfd, &seq, 4);
	fail |= send_seq(&x, 10, QKEY + 1);
	fail |= send_seq(&x, 11, QKEY);
	t_xsend(wfd, &seq, 4);
	t_xrecv(rfd, &seq, 4);
	/* sizes 4 KiB (seq 15), 100 (seq 13), 4 (seq 12) */
	fail |= send_seq(&x, 15, QKEY);
	fail |= send_seq(&x, 13, QKEY);
	fail |= send_seq(&x, 12, QKEY);
	t_xsend(wfd, &seq, 4);
	t_xrecv(rfd, res, sizeof(res));
	waitpid(pid, &st, 0);
	ok(!fail && WIFEXITED(st) && !WEXITSTATUS(st),
	   "edges: every send completed successfully (receiver status %d)", st);
	ok(res[0] == 4 && !res[1],
	   "4 receives posted, 10 sent: the first 4 intact, in order (%llu "
	   "taken, %llu wrong)",
	   (unsigned long long)res[0], (unsigned long long)res[1]);
	is_int(res[2], 6, "the 6 that found no receive: dropped, counted");
	is_int(res[3], 1,
	       "a wrong Q_Key: dropped, counted, its receive left for the "
	       "next (which is intact)");
	is_placed(res[4], 5, "those 5 were placed");
	ok(res[5], "a good datagram before a too small receive: intact");
	ok(res[6] == ((uint64_t)IBV_WC_LOC_LEN_ERR << 32 | 2),
	   "100 bytes + GRH into 99: IBV_WC_LOC_LEN_ERR on that receive "
	   "(%llx)",
	   (unsigned long long)res[6]);
	ok(res[7] == ((uint64_t)IBV_WC_WR_FLUSH_ERR << 32 | 3),
	   "then the QP is in error: the next receive flushed (%llx)",
	   (unsigned long long)res[7]);
	close(rfd);
	close(wfd);
	tx_close(&x);
}

/* readable -- the channel's fd said readable within ms */
static int readable(struct rx *r, int ms)
{
	struct pollfd p = {.fd = r->ch->fd, .events = POLLIN};

	return poll(&p, 1, ms) == 1;
}

/*
 * quiet -- a receiver asleep on its CQ's channel: a datagram with a
 * wrong Q_Key and one that finds no receive are dropped without an
 * event (an HCA completes nothing for them); the next one, taken, wakes
 * it and is intact
 */
static int quiet(int rfd, int wfd)
{
	uint64_t res[4] = {0};
	struct ibv_cq *ev_cq;
	union ibv_gid mgid;
	struct ibv_wc wc;
	uint32_t src, n;
	void *ev_ctx;
	struct rx r;

	mgid_of(&mgid, 3);
	if (rx_open(&r, 1) || ibv_attach_mcast(r.qp, &mgid, 0) ||
	    ibv_req_notify_cq(r.cq, 0))
		return 100;
	t_xsend(wfd, &r.qp->qp_num, 4);
	t_xrecv(rfd, &src, 4);
	t_xrecv(rfd, &n, 4); /* the two dropped ones were sent */
	res[0] = readable(&r, 300);
	res[1] = softrdma_qp_drops(r.qp, -1);
	if (post(&r, MAPPED, 0, RBUF))
		return 101;
	t_xsend(wfd, &n, 4);
	t_xrecv(rfd, &n, 4);
	res[2] = readable(&r, 5000);
	if (res[2] && !ibv_get_cq_event(r.ch, &ev_cq, &ev_ctx)) {
		ibv_ack_cq_events(ev_cq, 1);
		res[3] = t_wait(r.cq, &wc, 1, 2000) == 1 &&
			 !check(&r, MAPPED, &wc, 1, src, &mgid);
	}
	t_xsend(wfd, res, sizeof(res));
	return ibv_detach_mcast(r.qp, &mgid, 0) ? 102 : 0;
}

static void test_quiet(void)
{
	uint64_t res[4] = {0};
	int rfd, wfd, st, fail = 0;
	uint32_t seq = 0;
	struct tx x;
	pid_t pid = tx_spawn(&x, 3, quiet, &rfd, &wfd);

	fail |= send_seq(&x, 0, QKEY + 1);
	fail |= send_seq(&x, 0, QKEY);
	t_xsend(wfd, &seq, 4);
	t_xrecv(rfd, &seq, 4);
	fail |= send_seq(&x, 1, QKEY);
	t_xsend(wfd, &seq, 4);
	t_xrecv(rfd, res, sizeof(res));
	waitpid(pid, &st, 0);
	ok(!fail && WIFEXITED(st) && !WEXITSTATUS(st),
	   "quiet: every send completed successfully (receiver status %d)", st);
	ok(!res[0] && res[1] == 2,
	   "a wrong Q_Key and no receive posted: both dropped (%llu), the "
	   "armed channel not woken (%llu)",
	   (unsigned long long)res[1], (unsigned long long)res[0]);
	ok(res[2] && res[3],
	   "the next datagram, taken, wakes it and is intact (%llu, %llu)",
	   (unsigned long long)res[2], (unsigned long long)res[3]);
	close(rfd);
	close(wfd);
	tx_close(&x);
}

int main(void)
{
	t_isolate("mcast_place");
	signal(SIGPIPE, SIG_IGN);
	test_fanout();
	test_edges();
	test_quiet();
	is_int(t_shm_count(), 0, "no /dev/shm entries left");
	return done_testing();
}
