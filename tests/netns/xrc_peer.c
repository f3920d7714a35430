/* SPDX-License-Identifier: MIT */
/*
 * xrc_peer.c -- XRC between two hosts of the namespace fabric (softrdma's
 * RoCE v2 path, SOFTRDMA_NET=1; by LID with SOFTRDMA_LINK=ib), run by
 * tests/netns/xrc-hosts.sh:
 *
 *   xrc_peer server PORT MODE       the target host; TAP on stdout
 *   xrc_peer client ADDR PORT MODE  the initiator host; TAP on stdout
 *
 * MODE: "full", or "fault" (the shell sets SOFTRDMA_TEST_NETFAULT: the
 * traffic checks only, each message once and in order: those of SRQs A
 * and D); "hold" and "apm" are their own rounds (other_hold,
 * server_apm).  The server has
 * two private domains: XRC SRQ A of the first (102 receives posted), B
 * of the first (none posted) and C of the second; targets 1 (to A), 2
 * (B) and 3 (C) of the first domain; an MR for RDMA and a counter for the
 * atomics.  The client's initiator 1 sends 100 messages of 1 B to 64 KiB
 * (multi-packet at MTU 1024) through target 1 to SRQ A, a SEND_WITH_IMM,
 * an RDMA WRITE, WRITE_WITH_IMM, READ and two atomics; the server finds
 * each message once, in order, intact, with its target's qp_num and the
 * initiator's src_qp.  Then ("full") initiator 3 sends to SRQ C through
 * target 3 (another domain's SRQ: IBV_WC_REM_INV_REQ_ERR), initiator 2,
 * rnr_retry 1, to the empty SRQ B through target 2
 * (IBV_WC_RNR_RETRY_EXC_ERR), initiator 1 to an SRQ number of 25 bits
 * (IBV_WC_REM_INV_REQ_ERR).  Then initiator 4 through target 4, of a domain
 * of a file, to SRQ D of that domain made by another process of the
 * server's host (XRC's use: one target per host, an SRQ per process):
 * SENDs of 1 B and 64 KiB (a WQE held across 64 packets), a
 * SEND_WITH_IMM, an RDMA WRITE, WRITE_WITH_IMM, a SEND_WITH_INV of a
 * window of D's PD (its receive IBV_WC_WITH_INV, naming the rkey), READ
 * and two atomics on that process's MR (D's PD), each completion on D's
 * CQ in order with
 * target 4's qp_num and initiator 4's src_qp, the bytes intact; then
 * ("full") a WRITE under the server's own rkey (another PD than D's):
 * IBV_WC_REM_ACCESS_ERR.
 * Last, a rogue initiator of the server sends an XRC request to the
 * client's spare initiator, which has no responder: dropped (the rogue's
 * IBV_WC_RETRY_EXC_ERR), the spare left in RTS.
 * MODE "ring": SRQ D's process corrupts its own SRQ's ring (the next
 * WQE's SGE count), then initiator 4 sends to D through target 4: the
 * initiator's IBV_WC_REM_OP_ERR (not RNR NAKs for ever), target 4 in ERR
 * with IBV_EVENT_QP_FATAL, nothing completed in D (other_ring,
 * server_ring, client_ring).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "../../soft/softrdma.h" /* an SRQ's mirror (other_ring) */
#include "../tap.h"
#include "../soft/common.h"
#include "tcp_exch.h"

#define NMSG  100
#define BIG   65536
#define NRECV (NMSG + 2) /* and a SEND_WITH_IMM's, a WRITE_WITH_IMM's */
#define WLEN  5000	 /* the RDMA WRITE and READ */
#define IMM   0x1234abcdu
#define WIMM  0x5678u

/* what the hosts tell each other: the server its targets, SRQ numbers,
 * MR; the client its initiators; both their GID and LID */
struct xinfo {
	uint32_t qpn[4];
	uint32_t srqn[4];
	uint32_t rkey;
	uint16_t lid;
	uint16_t lid2;	/* port 2's (IB mode): the alternate path's DLID */
	uint32_t rogue; /* the server's rogue initiator, the client's spare */
	uint64_t addr;
	uint8_t gid[16];
	uint64_t daddr; /* SRQ D's process's RDMA area, and its rkey */
	uint32_t drkey;
	uint32_t dmw; /* and a type 2 window of its PD, free */
};

struct peer {
	struct tctx t;
	struct ibv_mr *mr;
	char *buf;
	size_t len;
	int ib;	 /* SOFTRDMA_LINK=ib: AVs by LID */
	int gix; /* our GID's index (RoCE) */
	uint16_t lid, lid2;
	union ibv_gid gid;
};

/* pat -- byte i of pattern seed: common.c's t_fill repeats every 256
 * bytes, so a packet of a message placed at another packet's offset
 * would pass; this one differs at every multiple of 256 below 64 KiB */
static char pat(unsigned seed, size_t i)
{
	return (char)(seed * 31 + i * 7 + (i >> 8) * 13 + 1);
}

/* pfill -- n bytes of pattern seed at p */
static void pfill(char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = pat(seed, i);
}

/* pfilled -- 1 if p holds n bytes of pattern seed */
static int pfilled(const char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != pat(seed, i))
			return 0;
	return 1;
}

/* msg_len -- message i's size: 1 B to 64 KiB */
static uint32_t msg_len(int i)
{
	return 1 + (uint32_t)((uint64_t)i * (BIG - 1) / (NMSG - 1));
}

/* peer_open -- device, PD, CQ, one MR of len bytes; our GID and LID */
static void peer_open(struct peer *p, size_t len)
{
	static const uint8_t v4[14] = {0, 0, 0, 0,    0,    0,	0,
				       0, 0, 0, 0xff, 0xff, 10, 231};
	struct ibv_port_attr pa;
	const char *link = getenv("SOFTRDMA_LINK");

	p->ib = link && !strcmp(link, "ib");
	if (t_open(&p->t, 512))
		bail_out("no device");
	p->len = len;
	p->buf = calloc(1, len);
	if (!p->buf)
		bail_out("memory");
	p->mr = ibv_reg_mr(p->t.pd, p->buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
	if (!p->mr || ibv_query_port(p->t.ctx, 1, &pa))
		bail_out("mr, port");
	p->lid = pa.lid;
	if (p->ib && !ibv_query_port(p->t.ctx, 2, &pa))
		p->lid2 = pa.lid;
	p->gix = p->ib ? 0 : t_find_gid(p->t.ctx, v4, sizeof(v4));
	if (p->gix < 0 || ibv_query_gid(p->t.ctx, 1, p->gix, &p->gid))
		bail_out("no GID of 10.231.0.0/16");
}

/* peer_close -- what peer_open made */
static void peer_close(struct peer *p)
{
	ibv_dereg_mr(p->mr);
	free(p->buf);
	t_close(&p->t);
}

/* av -- the path to the other host: its GID, or in the IB mode its LID */
static void av(const struct peer *p, struct ibv_qp_attr *a,
	       const struct xinfo *o, uint32_t dqpn)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = dqpn;
	a->ah_attr.port_num = 1;
	if (p->ib) {
		a->ah_attr.dlid = o->lid;
		return;
	}
	a->ah_attr.is_global = 1;
	a->ah_attr.grh.sgid_index = (uint8_t)p->gix;
	a->ah_attr.grh.hop_limit = 64;
	memcpy(a->ah_attr.grh.dgid.raw, o->gid, 16);
}

static char dpath[64]; /* the domain file of target 4 and SRQ D */

#define DRECV 5	   /* SRQ D's receives: SEND 1 B, 64 KiB, IMM, WIMM, INV */
#define DCTR  8192 /* the counter's offset in D's process's RDMA area */

/* what SRQ D's process tells the server: its SRQ, RDMA area and window */
struct dinfo {
	uint32_t srqn, rkey;
	uint64_t addr;
	uint32_t mw, pad;
};

/* what it found: D's completions, and its RDMA area after the traffic */
struct dres {
	int got, bad, order, ids, rdma, extra;
	uint32_t qpn, src; /* the first completion's */
	uint64_t counter;
};

/* dmsg_ok -- D's completion i as initiator 4 sent it: a SEND of 1 B, of
 * 64 KiB, a SEND_WITH_IMM of 3000 B, a WRITE_WITH_IMM of 100 B, a
 * SEND_WITH_INV of 2000 B invalidating window MW (its receive says so),
 * the SENDs' bytes in receive i's buffer */
static int dmsg_ok(int i, const struct ibv_wc *wc, const char *rbuf,
		   uint32_t mw)
{
	static const uint32_t len[DRECV] = {1, BIG, 3000, 100, 2000};
	int imm = i == 2 || i == 3;

	if (wc->status != IBV_WC_SUCCESS || wc->byte_len != len[i] ||
	    wc->opcode != (i == 3 ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV) ||
	    !!(wc->wc_flags & IBV_WC_WITH_IMM) != imm ||
	    (imm && wc->imm_data != htobe32(i == 3 ? WIMM : IMM)) ||
	    !!(wc->wc_flags & IBV_WC_WITH_INV) != (i == 4) ||
	    (i == 4 && wc->invalidated_rkey != mw))
		return 0;
	return i == 3 ||
	       pfilled(rbuf + (size_t)i * BIG, len[i], (unsigned)i + 11);
}

/* slow -- what took a second or more since *ms, told; *ms now */
static void slow(long long *ms, const char *what)
{
	long long now = t_now_ms();

	if (now - *ms >= 1000)
		diag("SRQ D's process: %s took %lld ms", what, now - *ms);
	*ms = now;
}

/* other -- another process of the server's host: SRQ D of the file's
 * domain with DRECV receives, and an RDMA area, both on its PD; tells the
 * server of them, takes D's completions as they come, and at the
 * server's word (the traffic done) looks at its area and tells what it
 * found */
static int other(int rfd, int wfd)
{
	const size_t rlen = (size_t)DRECV * BIG, alen = DCTR + 64;
	struct ibv_mr *mr, *amr;
	struct ibv_xrcd *x;
	struct ibv_srq *srq;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	struct dinfo d;
	struct dres r;
	struct tctx t;
	char *buf = calloc(1, rlen), *area = calloc(1, alen), c;
	uint64_t *ctr = (uint64_t *)(void *)(area + DCTR);
	long long ms;
	int fd, i;

	fd = open(dpath, O_RDWR);
	if (!buf || !area || fd < 0 || t_open(&t, 16))
		return 2;
	*ctr = 200;
	memset(&d, 0, sizeof(d));
	memset(&r, 0, sizeof(r));
	x = t_xrcd(t.ctx, fd, O_CREAT);
	mr = ibv_reg_mr(t.pd, buf, rlen, IBV_ACCESS_LOCAL_WRITE);
	amr = ibv_reg_mr(t.pd, area, alen,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_READ |
				 IBV_ACCESS_REMOTE_ATOMIC);
	mw = ibv_alloc_mw(t.pd, IBV_MW_TYPE_2);
	srq = x && mr && amr && mw ? t_xsrq(&t, x, t.cq, T_XSRQ_MASK, 8) : NULL;
	if (srq && !ibv_get_srq_num(srq, &d.srqn)) {
		for (i = 0; i < DRECV; i++)
			if (t_post_srq_recv(srq, buf + (size_t)i * BIG, BIG,
					    mr->lkey, (uint64_t)i))
				d.srqn = 0;
		d.rkey = amr->rkey;
		d.addr = (uintptr_t)area;
		d.mw = mw->rkey;
	}
	t_xsend(wfd, &d, sizeof(d));
	for (i = 0; d.srqn && i < DRECV; i++) {
		if (t_wait(t.cq, &wc, 1, 120000) != 1)
			break;
		if (!i) {
			r.qpn = wc.qp_num;
			r.src = wc.src_qp;
		} else if (wc.qp_num != r.qpn || wc.src_qp != r.src) {
			r.ids++;
		}
		if (wc.wr_id != (uint64_t)i)
			r.order++;
		else if (!dmsg_ok(i, &wc, buf, d.mw))
			r.bad++;
	}
	r.got = i;
	t_xrecv(rfd, &c, 1);
	r.rdma = pfilled(area, WLEN, 14) && pfilled(area + WLEN, 100, 15);
	r.counter = *ctr;
	r.extra = ibv_poll_cq(t.cq, 1, &wc);
	t_xsend(wfd, &r, sizeof(r));
	/* a step that takes a second or more is told (CI once found this
	 * process still there a minute later under the sanitizers) */
	ms = t_now_ms();
	if (srq)
		ibv_destroy_srq(srq);
	slow(&ms, "ibv_destroy_srq");
	if (mw)
		ibv_dealloc_mw(mw);
	if (amr)
		ibv_dereg_mr(amr);
	if (mr)
		ibv_dereg_mr(mr);
	slow(&ms, "ibv_dereg_mr");
	if (x)
		ibv_close_xrcd(x);
	close(fd);
	slow(&ms, "ibv_close_xrcd");
	t_close(&t);
	slow(&ms, "t_close");
	free(buf);
	free(area);
	fflush(stdout); /* t_spawn's child ends in _exit */
	return 0;
}

/* tgt_rtr -- a target of x to RTR towards initiator dqpn on the client */
static struct ibv_qp *tgt_rtr(struct peer *p, struct ibv_xrcd *x,
			      const struct xinfo *o, uint32_t dqpn)
{
	struct ibv_qp_init_attr_ex ia;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_XRC_RECV;
	ia.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	ia.xrcd = x;
	qp = ibv_create_qp_ex(p->t.ctx, &ia);
	if (!qp ||
	    t_qp_init(qp, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				  IBV_ACCESS_REMOTE_ATOMIC))
		bail_out("target");
	av(p, &a, o, dqpn);
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1; /* 0.01 ms */
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		bail_out("target to RTR: %s", strerror(errno));
	return qp;
}

/* ini -- an initiator on our PD and CQ (not yet connected), with the
 * ibv_wr_* interface */
static struct ibv_qp *ini(struct peer *p)
{
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp *qp;

	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_XRC_SEND;
	a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	a.pd = p->t.pd;
	a.send_cq = p->t.cq;
	a.cap.max_send_wr = 32;
	a.cap.max_send_sge = 1;
	qp = ibv_create_qp_ex(p->t.ctx, &a);
	if (!qp || t_qp_init(qp, 0))
		bail_out("initiator");
	return qp;
}

/* ini_rts -- an initiator to RTS towards target dqpn on the server */
static int ini_rts(struct peer *p, struct ibv_qp *qp, const struct xinfo *o,
		   uint32_t dqpn, int rnr_retry)
{
	struct ibv_qp_attr a;

	av(p, &a, o, dqpn);
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
		return -1;
	return t_qp_rts(qp, rnr_retry, 14, 7);
}

/* xpost -- one signalled WR on qp to SRQ srqn: op over len bytes at our
 * buffer's off, remote raddr/rkey where it has them */
static int xpost(struct peer *p, struct ibv_qp *qp, enum ibv_wr_opcode op,
		 size_t off, uint32_t len, uint32_t srqn, uint64_t wr_id,
		 uint64_t raddr, uint32_t rkey, uint64_t add, uint64_t swap)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)p->buf + off;
	sge.length = len;
	sge.lkey = p->mr->lkey;
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.qp_type.xrc.remote_srqn = srqn;
	if (op == IBV_WR_SEND_WITH_IMM)
		wr.imm_data = htobe32(IMM);
	if (op == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htobe32(WIMM);
	if (op == IBV_WR_SEND_WITH_INV)
		wr.invalidate_rkey = rkey;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD ||
	    op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = add;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

/* meet -- a client's exchange with the server: me, with its initiators'
 * numbers, out with our LID and GID; the server's into *o; the
 * connection */
static int meet(const struct peer *p, const char *addr, int port,
		struct xinfo *me, struct xinfo *o)
{
	int fd;

	me->lid = p->lid;
	memcpy(me->gid, p->gid.raw, 16);
	fd = tcp_connect(addr, port);
	xfer(fd, me, sizeof(*me), 1);
	xfer(fd, o, sizeof(*o), 0);
	return fd;
}

/* one -- the completion of the one WR outstanding: its status, or -1 */
static int one(struct peer *p, uint64_t wr_id)
{
	struct ibv_wc wc;

	if (t_wait(p->t.cq, &wc, 1, 30000) != 1)
		return -1;
	if (wc.wr_id != wr_id)
		diag("completion of %llu, want %llu (status %d)",
		     (unsigned long long)wc.wr_id, (unsigned long long)wr_id,
		     wc.status);
	return wc.wr_id == wr_id ? (int)wc.status : -1;
}

/* mw_local -- a signalled BIND_MW of window mw (rkey, len bytes of mr)
 * on qp, or LOCAL_INV of rkey when mw is NULL: its completion's status,
 * or -2 when the post fails */
static int mw_local(struct peer *p, struct ibv_qp *qp, struct ibv_mw *mw,
		    struct ibv_mr *mr, uint32_t rkey, uint64_t wr_id)
{
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = mw ? IBV_WR_BIND_MW : IBV_WR_LOCAL_INV;
	wr.invalidate_rkey = rkey;
	if (mw) {
		wr.bind_mw.mw = mw;
		wr.bind_mw.rkey = rkey;
		wr.bind_mw.bind_info.mr = mr;
		wr.bind_mw.bind_info.addr = (uintptr_t)mr->addr;
		wr.bind_mw.bind_info.length = 256;
		wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	}
	return ibv_post_send(qp, &wr, &bad) ? -2 : one(p, wr_id);
}

/* d_spawn -- the file of the domain of target 4 and SRQ D (dpath), and
 * SRQ D's process running fn, forked before this one has threads (a
 * child of a threaded process that starts threads may hang in the
 * sanitizers' runtime): the file's descriptor; the child's pid in *pid */
static int d_spawn(int (*fn)(int rfd, int wfd), int *rfd, int *wfd, pid_t *pid)
{
	int dfd;

	snprintf(dpath, sizeof(dpath), "/tmp/xrc-peer-%d", (int)getpid());
	dfd = open(dpath, O_RDWR | O_CREAT | O_EXCL, 0600);
	*pid = dfd < 0 ? -1 : t_spawn(fn, rfd, wfd);
	if (*pid < 0)
		bail_out("the other process");
	return dfd;
}

/* d_join -- a round of SRQ D alone (hold, ring): our peer, the file's
 * domain, and what we tell the client: D's number, our LID and GID */
static struct ibv_xrcd *d_join(struct peer *p, int dfd, int rfd,
			       struct xinfo *me)
{
	struct ibv_xrcd *xf;
	struct dinfo d;

	peer_open(p, 4096);
	xf = t_xrcd(p->t.ctx, dfd, O_CREAT);
	if (!xf)
		bail_out("the file's domain");
	t_xrecv(rfd, &d, sizeof(d));
	if (!d.srqn)
		bail_out("SRQ D of the other process");
	memset(me, 0, sizeof(*me));
	me->srqn[3] = d.srqn;
	me->lid = p->lid;
	memcpy(me->gid, p->gid.raw, 16);
	return xf;
}

/* server -- the target host */
static void server(int port, int full)
{
	/* receives at NRECV x BIG, then the RDMA area, then the counter */
	const size_t rdma = (size_t)NRECV * BIG, ctr = rdma + BIG;
	struct ibv_xrcd *x, *x2, *xf;
	struct ibv_srq *sa, *sb, *sc;
	struct ibv_qp *t1, *t2, *t3, *t4, *rogue;
	int dfd, orfd = -1, owfd = -1;
	pid_t opid;
	struct dinfo d;
	struct dres r;
	struct xinfo me, o;
	struct peer p;
	struct ibv_wc wc;
	uint64_t *counter;
	int fd, i, bad = 0, order = 0, ids = 0, imm = 0, wimm = 0, extra, st;
	char c = 0;

	/* the file's domain, here and in another process */
	dfd = d_spawn(other, &orfd, &owfd, &opid);
	peer_open(&p, ctr + 64);
	counter = (uint64_t *)(void *)(p.buf + ctr);
	*counter = 100;
	x = t_xrcd(p.t.ctx, -1, O_CREAT);
	x2 = t_xrcd(p.t.ctx, -1, O_CREAT);
	xf = t_xrcd(p.t.ctx, dfd, O_CREAT);
	if (!x || !x2 || !xf)
		bail_out("domains");
	sa = t_xsrq(&p.t, x, p.t.cq, T_XSRQ_MASK, 128);
	sb = t_xsrq(&p.t, x, p.t.cq, T_XSRQ_MASK, 128);
	sc = t_xsrq(&p.t, x2, p.t.cq, T_XSRQ_MASK, 128);
	if (!sa || !sb || !sc)
		bail_out("SRQs");
	for (i = 0; i < NRECV; i++)
		if (t_post_srq_recv(sa, p.buf + (size_t)i * BIG, BIG,
				    p.mr->lkey, (uint64_t)i))
			bail_out("srq recv %d", i);
	memset(&me, 0, sizeof(me));
	if (ibv_get_srq_num(sa, &me.srqn[0]) ||
	    ibv_get_srq_num(sb, &me.srqn[1]) ||
	    ibv_get_srq_num(sc, &me.srqn[2]))
		bail_out("srq numbers");
	t_xrecv(orfd, &d, sizeof(d));
	if (!d.srqn)
		bail_out("SRQ D of the other process");
	me.srqn[3] = d.srqn;
	me.drkey = d.rkey;
	me.daddr = d.addr;
	me.dmw = d.mw;
	me.rkey = p.mr->rkey;
	me.addr = (uintptr_t)p.buf;
	me.lid = p.lid;
	memcpy(me.gid, p.gid.raw, 16);

	fd = tcp_accept(port);
	xfer(fd, &o, sizeof(o), 0); /* the client's initiators first */
	t1 = tgt_rtr(&p, x, &o, o.qpn[0]);
	t2 = tgt_rtr(&p, x, &o, o.qpn[1]);
	t3 = tgt_rtr(&p, x, &o, o.qpn[2]);
	t4 = tgt_rtr(&p, xf, &o, o.qpn[3]);
	me.qpn[0] = t1->qp_num;
	me.qpn[1] = t2->qp_num;
	me.qpn[2] = t3->qp_num;
	me.qpn[3] = t4->qp_num;
	rogue = ini(&p);
	me.rogue = rogue->qp_num;
	if (ini_rts(&p, rogue, &o, o.rogue, 0))
		bail_out("rogue initiator");
	xfer(fd, &me, sizeof(me), 1);

	/* 100 SENDs, a SEND_WITH_IMM, a WRITE_WITH_IMM: each once, in
	 * order, into SRQ A through target 1 */
	for (i = 0; i < NRECV; i++) {
		if (t_wait(p.t.cq, &wc, 1, 60000) != 1) {
			diag("receive %d: none", i);
			break;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			diag("receive %d: status %d", i, wc.status);
			bad++;
			continue;
		}
		if (wc.wr_id != (uint64_t)i)
			order++;
		if (wc.qp_num != t1->qp_num || wc.src_qp != o.qpn[0])
			ids++;
		if (i < NMSG &&
		    (wc.opcode != IBV_WC_RECV || wc.byte_len != msg_len(i) ||
		     (wc.wc_flags & IBV_WC_WITH_IMM) ||
		     !pfilled(p.buf + (size_t)wc.wr_id * BIG, msg_len(i),
			      (unsigned)i + 1)))
			bad++;
		if (i == NMSG)
			imm = wc.opcode == IBV_WC_RECV && wc.byte_len == 3000 &&
			      (wc.wc_flags & IBV_WC_WITH_IMM) &&
			      wc.imm_data == htobe32(IMM) &&
			      pfilled(p.buf + (size_t)NMSG * BIG, 3000, 5);
		if (i == NMSG + 1)
			wimm = wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
			       (wc.wc_flags & IBV_WC_WITH_IMM) &&
			       wc.imm_data == htobe32(WIMM) &&
			       wc.byte_len == 100;
	}
	ok(i == NRECV && !bad,
	   "%d messages of 1 B to 64 KiB through the target into SRQ A, "
	   "intact (%d bad)",
	   NMSG, bad);
	ok(i == NRECV && !order, "... each once, in order (%d out of order)",
	   order);
	ok(i == NRECV && !ids,
	   "... qp_num the target's (%u), src_qp the initiator's (%u): %d "
	   "not",
	   t1->qp_num, o.qpn[0], ids);
	ok(imm, "SEND_WITH_IMM: its immediate, 3000 bytes");
	ok(wimm, "RDMA WRITE_WITH_IMM: a WQE of SRQ A, its immediate");

	xfer(fd, &c, 1, 0); /* the client is done with traffic */
	ok(pfilled(p.buf + rdma, WLEN, 77) &&
		   pfilled(p.buf + rdma + WLEN, 100, 78),
	   "RDMA WRITE and WRITE_WITH_IMM placed through the target "
	   "(rkey of SRQ A's PD)");
	ok(*counter == 7, "FETCH_ADD then CMP_SWAP: the counter is 7 (%llu)",
	   (unsigned long long)*counter);
	extra = ibv_poll_cq(p.t.cq, 1, &wc);
	ok(extra == 0, "no completion more (%d)", extra);
	/* an XRC SEND to the client's spare initiator: not answered */
	st = xpost(&p, rogue, IBV_WR_SEND, 0, 8, me.srqn[0], 3000, 0, 0, 0, 0);
	is_int(st ? -2 : one(&p, 3000), IBV_WC_RETRY_EXC_ERR,
	       "an XRC request to the client's initiator: dropped there "
	       "(IBV_WC_RETRY_EXC_ERR here)");
	if (full) {
		ok(t_qp_state(t3) == IBV_QPS_ERR,
		   "target 3, which a request named another domain's SRQ "
		   "through, in ERR (its responder NAKed it)");
		ok(t_qp_state(t2) == IBV_QPS_RTR,
		   "target 2 (RNR NAKs only) still in RTR");
	}
	t_xsend(owfd, &c, 1);
	t_xrecv(orfd, &r, sizeof(r));
	ok(r.got == DRECV && !r.bad && !r.order,
	   "SRQ D, another process's: the SENDs of 1 B, 64 KiB and with "
	   "immediate, the WRITE_WITH_IMM and the SEND_WITH_INV completed "
	   "there, in order, intact (%d of %d; %d bad, %d out of order)",
	   r.got, DRECV, r.bad, r.order);
	ok(r.got && !r.ids && r.qpn == t4->qp_num && r.src == o.qpn[3],
	   "... qp_num target 4's (%u: %u), src_qp initiator 4's (%u: %u)",
	   t4->qp_num, r.qpn, o.qpn[3], r.src);
	ok(r.rdma, "... the RDMA WRITE and WRITE_WITH_IMM placed in its MR "
		   "(D's PD)");
	ok(r.counter == 9,
	   "... FETCH_ADD then CMP_SWAP on its counter: 9 (%llu)",
	   (unsigned long long)r.counter);
	ok(r.extra == 0, "... no completion more on D's CQ (%d)", r.extra);
	is_int(t_reap(opid), 0, "SRQ D's process exits 0");
	close(orfd);
	close(owfd);
	ibv_destroy_qp(t4);
	ok(!ibv_close_xrcd(xf), "the file's domain closed");
	close(dfd);
	unlink(dpath);
	c = 1;
	xfer(fd, &c, 1, 1);
	close(fd);
	ibv_destroy_qp(t1);
	ibv_destroy_qp(t2);
	ibv_destroy_qp(t3);
	ibv_destroy_qp(rogue);
	ibv_destroy_srq(sa);
	ibv_destroy_srq(sb);
	ibv_destroy_srq(sc);
	ok(!ibv_close_xrcd(x) && !ibv_close_xrcd(x2), "domains closed");
	peer_close(&p);
}

/* d_traffic -- initiator 4 through target 4 to SRQ D, another process's
 * of the server's host (other); with full, last a WRITE the target must
 * refuse (not under loss: its NAK lost, the target in ERR, the initiator
 * would see IBV_WC_RETRY_EXC_ERR, as on an HCA) */
static void d_traffic(struct peer *p, struct ibv_qp *i4, const struct xinfo *o,
		      int full)
{
	const size_t rd = (size_t)NMSG * BIG, atm = rd + BIG;
	uint64_t *res = (uint64_t *)(void *)(p->buf + atm);
	struct ibv_mw *mw;
	struct ibv_mr *wmr;
	uint32_t k;
	int st;

	ok(!ini_rts(p, i4, o, o->qpn[3], 7),
	   "initiator 4 to RTS towards target 4");
	pfill(p->buf, 1, 11);
	st = xpost(p, i4, IBV_WR_SEND, 0, 1, o->srqn[3], 2003, 0, 0, 0, 0);
	is_int(st ? -2 : one(p, 2003), IBV_WC_SUCCESS,
	       "a SEND of 1 B to SRQ D, another process's of the target's "
	       "host");
	pfill(p->buf, BIG, 12);
	st = xpost(p, i4, IBV_WR_SEND, 0, BIG, o->srqn[3], 2004, 0, 0, 0, 0);
	is_int(st ? -2 : one(p, 2004), IBV_WC_SUCCESS,
	       "a SEND of 64 KiB to SRQ D (64 packets)");
	pfill(p->buf, 3000, 13);
	st = xpost(p, i4, IBV_WR_SEND_WITH_IMM, 0, 3000, o->srqn[3], 2005, 0, 0,
		   0, 0);
	is_int(st ? -2 : one(p, 2005), IBV_WC_SUCCESS,
	       "a SEND_WITH_IMM of 3000 B to SRQ D");
	pfill(p->buf, WLEN, 14);
	st = xpost(p, i4, IBV_WR_RDMA_WRITE, 0, WLEN, o->srqn[3], 2006,
		   o->daddr, o->drkey, 0, 0);
	is_int(st ? -2 : one(p, 2006), IBV_WC_SUCCESS,
	       "RDMA WRITE, 5000 B, to SRQ D's process (its rkey)");
	pfill(p->buf + WLEN, 100, 15);
	st = xpost(p, i4, IBV_WR_RDMA_WRITE_WITH_IMM, WLEN, 100, o->srqn[3],
		   2007, o->daddr + WLEN, o->drkey, 0, 0);
	is_int(st ? -2 : one(p, 2007), IBV_WC_SUCCESS,
	       "RDMA WRITE_WITH_IMM, 100 B, a WQE of SRQ D");
	pfill(p->buf, 2000, 15);
	st = xpost(p, i4, IBV_WR_SEND_WITH_INV, 0, 2000, o->srqn[3], 2012, 0,
		   o->dmw, 0, 0);
	is_int(st ? -2 : one(p, 2012), IBV_WC_SUCCESS,
	       "a SEND_WITH_INV of 2000 B to SRQ D, of a window of D's PD");
	/* a window's local operations on initiator 4, its own PD's */
	mw = ibv_alloc_mw(p->t.pd, IBV_MW_TYPE_2);
	wmr = ibv_reg_mr(p->t.pd, p->buf, 4096,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	k = mw ? ibv_inc_rkey(mw->rkey) : 0;
	is_int(mw && wmr ? mw_local(p, i4, mw, wmr, k, 2013) : -3,
	       IBV_WC_SUCCESS, "BIND_MW of a type 2 window on initiator 4");
	is_int(mw_local(p, i4, NULL, NULL, k, 2014), IBV_WC_SUCCESS,
	       "LOCAL_INV of its rkey on initiator 4");
	ok((!mw || !ibv_dealloc_mw(mw)) && (!wmr || !ibv_dereg_mr(wmr)),
	   "the window and its MR freed");
	memset(p->buf + rd, 0, WLEN);
	st = xpost(p, i4, IBV_WR_RDMA_READ, rd, WLEN, o->srqn[3], 2008,
		   o->daddr, o->drkey, 0, 0);
	is_int(st ? -2 : one(p, 2008), IBV_WC_SUCCESS,
	       "RDMA READ, 5000 B, from SRQ D's process");
	ok(pfilled(p->buf + rd, WLEN, 14), "... what the WRITE wrote");
	*res = 0;
	st = xpost(p, i4, IBV_WR_ATOMIC_FETCH_AND_ADD, atm, 8, o->srqn[3], 2009,
		   o->daddr + DCTR, o->drkey, 5, 0);
	is_int(st ? -2 : one(p, 2009), IBV_WC_SUCCESS,
	       "FETCH_ADD 5 on SRQ D's process's counter");
	ok(*res == 200, "... the counter was 200 (%llu)",
	   (unsigned long long)*res);
	st = xpost(p, i4, IBV_WR_ATOMIC_CMP_AND_SWP, atm, 8, o->srqn[3], 2010,
		   o->daddr + DCTR, o->drkey, 205, 9);
	is_int(st ? -2 : one(p, 2010), IBV_WC_SUCCESS, "CMP_SWAP 205 -> 9");
	ok(*res == 205, "... the counter was 205 (%llu)",
	   (unsigned long long)*res);
	if (!full)
		return;
	/* the server's own rkey: its MR is not of D's PD */
	st = xpost(p, i4, IBV_WR_RDMA_WRITE, 0, 8, o->srqn[3], 2011,
		   o->addr + (size_t)NRECV * BIG, o->rkey, 0, 0);
	is_int(st ? -2 : one(p, 2011), IBV_WC_REM_ACCESS_ERR,
	       "an RDMA WRITE through target 4 under the server's rkey "
	       "(another PD than SRQ D's): IBV_WC_REM_ACCESS_ERR");
}

/* client -- the initiator host */
static void client(const char *addr, int port, int full)
{
	const size_t rd = (size_t)NMSG * BIG, atm = rd + BIG;
	struct ibv_qp *i1, *i2, *i3, *i4, *spare;
	struct ibv_qp_ex *qx;
	struct xinfo me, o;
	struct ibv_wc wc;
	struct peer p;
	uint64_t *res = NULL;
	int fd, i, n, out = 0, bad = 0, st;
	char c = 0;

	peer_open(&p, atm + 64);
	spare = ini(&p); /* our initiators' numbers unlike the targets' */
	i1 = ini(&p);
	i2 = ini(&p);
	i3 = ini(&p);
	i4 = ini(&p);
	memset(&me, 0, sizeof(me));
	me.qpn[0] = i1->qp_num;
	me.qpn[1] = i2->qp_num;
	me.qpn[2] = i3->qp_num;
	me.qpn[3] = i4->qp_num;
	me.rogue = spare->qp_num;
	fd = meet(&p, addr, port, &me, &o);
	if (ini_rts(&p, spare, &o, o.rogue, 7))
		bail_out("spare initiator");
	ok(!ini_rts(&p, i1, &o, o.qpn[0], 7) &&
		   !ini_rts(&p, i2, &o, o.qpn[1], 1) &&
		   !ini_rts(&p, i3, &o, o.qpn[2], 7),
	   "initiators to RTS towards the other host's targets (%s)",
	   p.ib ? "by LID" : "by GID");

	/* 100 messages, up to 16 in flight, each from its own buffer (a
	 * packet sent again is read again) */
	for (i = 0; i < NMSG || out;) {
		if (i < NMSG && out < 16) {
			size_t off = (size_t)i * BIG;

			pfill(p.buf + off, msg_len(i), (unsigned)i + 1);
			if (xpost(&p, i1, IBV_WR_SEND, off, msg_len(i),
				  o.srqn[0], (uint64_t)i, 0, 0, 0, 0))
				bail_out("post %d", i);
			out++;
			i++;
			continue;
		}
		n = t_wait(p.t.cq, &wc, 1, 60000);
		if (n != 1)
			bail_out("send completion: none");
		if (wc.status != IBV_WC_SUCCESS)
			bad++;
		out--;
	}
	ok(!bad, "%d SENDs of 1 B to 64 KiB completed (%d not)", NMSG, bad);
	/* the SEND_WITH_IMM through ibv_wr_*: ibv_wr_set_xrc_srqn */
	pfill(p.buf, 3000, 5);
	qx = ibv_qp_to_qp_ex(i1);
	ibv_wr_start(qx);
	qx->wr_id = 1000;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(qx, htobe32(IMM));
	ibv_wr_set_xrc_srqn(qx, o.srqn[0]);
	ibv_wr_set_sge(qx, p.mr->lkey, (uintptr_t)p.buf, 3000);
	st = ibv_wr_complete(qx);
	is_int(st ? -2 : one(&p, 1000), IBV_WC_SUCCESS,
	       "SEND_WITH_IMM (ibv_wr_send_imm, ibv_wr_set_xrc_srqn)");
	pfill(p.buf, WLEN, 77);
	st = xpost(&p, i1, IBV_WR_RDMA_WRITE, 0, WLEN, o.srqn[0], 1001,
		   o.addr + (size_t)NRECV * BIG, o.rkey, 0, 0);
	is_int(st ? -2 : one(&p, 1001), IBV_WC_SUCCESS, "RDMA WRITE, 5000 B");
	pfill(p.buf + WLEN, 100, 78);
	st = xpost(&p, i1, IBV_WR_RDMA_WRITE_WITH_IMM, WLEN, 100, o.srqn[0],
		   1002, o.addr + (size_t)NRECV * BIG + WLEN, o.rkey, 0, 0);
	is_int(st ? -2 : one(&p, 1002), IBV_WC_SUCCESS,
	       "RDMA WRITE_WITH_IMM, 100 B");
	memset(p.buf + rd, 0, WLEN);
	st = xpost(&p, i1, IBV_WR_RDMA_READ, rd, WLEN, o.srqn[0], 1003,
		   o.addr + (size_t)NRECV * BIG, o.rkey, 0, 0);
	is_int(st ? -2 : one(&p, 1003), IBV_WC_SUCCESS, "RDMA READ, 5000 B");
	ok(pfilled(p.buf + rd, WLEN, 77), "... what the WRITE wrote");
	res = (uint64_t *)(void *)(p.buf + atm);
	*res = 0;
	st = xpost(&p, i1, IBV_WR_ATOMIC_FETCH_AND_ADD, atm, 8, o.srqn[0], 1004,
		   o.addr + (size_t)NRECV * BIG + BIG, o.rkey, 5, 0);
	is_int(st ? -2 : one(&p, 1004), IBV_WC_SUCCESS, "FETCH_ADD 5");
	ok(*res == 100, "... the counter was 100 (%llu)",
	   (unsigned long long)*res);
	st = xpost(&p, i1, IBV_WR_ATOMIC_CMP_AND_SWP, atm, 8, o.srqn[0], 1005,
		   o.addr + (size_t)NRECV * BIG + BIG, o.rkey, 105, 7);
	is_int(st ? -2 : one(&p, 1005), IBV_WC_SUCCESS, "CMP_SWAP 105 -> 7");
	ok(*res == 105, "... the counter was 105 (%llu)",
	   (unsigned long long)*res);
	if (full) {
		/* another domain's SRQ (C), through target 3 */
		st = xpost(&p, i3, IBV_WR_SEND, 0, 8, o.srqn[2], 2000, 0, 0, 0,
			   0);
		is_int(st ? -2 : one(&p, 2000), IBV_WC_REM_INV_REQ_ERR,
		       "a SEND to another domain's XRC SRQ: "
		       "IBV_WC_REM_INV_REQ_ERR");
		ok(t_qp_state(i3) == IBV_QPS_ERR, "... the initiator in ERR");
		/* the empty SRQ B, through target 2, rnr_retry 1 */
		st = xpost(&p, i2, IBV_WR_SEND, 0, 8, o.srqn[1], 2001, 0, 0, 0,
			   0);
		is_int(st ? -2 : one(&p, 2001), IBV_WC_RNR_RETRY_EXC_ERR,
		       "a SEND to an empty XRC SRQ, rnr_retry 1: "
		       "IBV_WC_RNR_RETRY_EXC_ERR");
		/* an SRQ number over 24 bits, which none has */
		st = xpost(&p, i1, IBV_WR_SEND, 0, 8, 0x1000000u | o.srqn[0],
			   2002, 0, 0, 0, 0);
		is_int(st ? -2 : one(&p, 2002), IBV_WC_REM_INV_REQ_ERR,
		       "an SRQ number of 25 bits: IBV_WC_REM_INV_REQ_ERR");
	}
	d_traffic(&p, i4, &o, full);
	xfer(fd, &c, 1, 1);
	xfer(fd, &c, 1, 0); /* the server has checked */
	ok(t_qp_state(spare) == IBV_QPS_RTS,
	   "the spare initiator, sent an XRC request, still in RTS");
	close(fd);
	ibv_destroy_qp(i1);
	ibv_destroy_qp(i2);
	ibv_destroy_qp(i3);
	ibv_destroy_qp(i4);
	ibv_destroy_qp(spare);
	peer_close(&p);
}

/* other_hold -- "hold": SRQ D's process, D of max_wr 3 with three
 * receives of 64 KiB, and target 5 of its own to D from the client's
 * initiator 5; the server (its parent) stops once its target 4 holds D's
 * first WQE and is killed (xrc-hosts.sh): target 5's message completes
 * past the held WQE meanwhile, and so does one of our own initiator 6
 * through target 5 (a same-host initiator's, left in D's outbox behind
 * the HELD entry); all three WQEs taken, D takes three receives more,
 * not a fourth; nothing else completes while the server lives, then the
 * held WQE flushes.  Its TAP on our stdout; XRC_PEER_DONE made at the
 * end. */
static int other_hold(int rfd, int wfd)
{
	const char *done = getenv("XRC_PEER_DONE");
	pid_t server = getppid();
	struct ibv_xrcd *x;
	struct ibv_srq *srq;
	struct ibv_qp *t5, *i6;
	struct ibv_wc wc[2];
	struct xinfo o, self;
	struct dinfo d;
	struct peer q;
	int fd, n, alive, got6 = 0, recv6 = 0, more, err = 0;

	fd = open(dpath, O_RDWR);
	if (fd < 0)
		return 2;
	peer_open(&q, 3 * (size_t)BIG);
	memset(&d, 0, sizeof(d));
	x = t_xrcd(q.t.ctx, fd, O_CREAT);
	srq = x ? t_xsrq(&q.t, x, q.t.cq, T_XSRQ_MASK, 3) : NULL;
	if (srq && (ibv_get_srq_num(srq, &d.srqn) ||
		    t_post_srq_recv(srq, q.buf, BIG, q.mr->lkey, 0) ||
		    t_post_srq_recv(srq, q.buf + BIG, BIG, q.mr->lkey, 1) ||
		    t_post_srq_recv(srq, q.buf + 2 * BIG, BIG, q.mr->lkey, 2)))
		d.srqn = 0;
	t_xsend(wfd, &d, sizeof(d));
	t_xrecv(rfd, &o, sizeof(o)); /* the client's, through the server */
	t5 = tgt_rtr(&q, x, &o, o.qpn[1]);
	t_xsend(wfd, &t5->qp_num, sizeof(t5->qp_num));
	n = t_wait(q.t.cq, &wc[0], 1, 60000);
	alive = !t_pid_gone(server);
	ok(n == 1 && alive && wc[0].status == IBV_WC_SUCCESS &&
		   wc[0].wr_id == 1 && wc[0].qp_num == t5->qp_num &&
		   wc[0].byte_len == 1000 && pfilled(q.buf + BIG, 1000, 21),
	   "a message to SRQ D through its own process's target 5 completes "
	   "past the WQE another process's target holds (%d: status %d, "
	   "wr_id %llu, holder %s)",
	   n, n == 1 ? (int)wc[0].status : -1,
	   n == 1 ? (unsigned long long)wc[0].wr_id : 0ull,
	   alive ? "alive" : "gone");
	/* initiator 6, ours, through target 5: this host's path */
	memset(&self, 0, sizeof(self));
	self.lid = q.lid;
	memcpy(self.gid, q.gid.raw, 16);
	i6 = ini(&q);
	pfill(q.buf + 2 * BIG - 2000, 2000, 22);
	if (ini_rts(&q, i6, &self, t5->qp_num, 7) ||
	    xpost(&q, i6, IBV_WR_SEND, 2 * BIG - 2000, 2000, d.srqn, 6, 0, 0, 0,
		  0))
		n = 0;
	else
		n = t_wait(q.t.cq, wc, 2, 30000);
	while (n-- > 0) {
		if (wc[n].wr_id == 6)
			got6 = wc[n].status == IBV_WC_SUCCESS;
		else if (wc[n].wr_id == 2)
			recv6 = wc[n].status == IBV_WC_SUCCESS &&
				wc[n].qp_num == t5->qp_num &&
				wc[n].src_qp == i6->qp_num &&
				wc[n].byte_len == 2000 &&
				pfilled(q.buf + 2 * BIG, 2000, 22);
	}
	alive = !t_pid_gone(server);
	ok(got6 && recv6 && alive,
	   "... and one of this process's initiator 6 through target 5, "
	   "left in D's outbox behind the held entry (sent %d, received %d, "
	   "holder %s)",
	   got6, recv6, alive ? "alive" : "gone");
	ibv_destroy_qp(i6);
	/* an HCA counts the held WQE and those completed past it as taken,
	 * though its ring's entries wait for the held one */
	for (more = 0; more < 4; more++) {
		err = t_post_srq_recv(srq, q.buf, BIG, q.mr->lkey,
				      10 + (uint64_t)more);
		if (err)
			break;
	}
	alive = !t_pid_gone(server);
	ok(more == 3 && err == ENOMEM && alive,
	   "... all three taken, D takes max_wr (3) receives more while the "
	   "WQE is held, then ENOMEM (%d more, error %d, holder %s)",
	   more, err, alive ? "alive" : "gone");
	n = t_wait(q.t.cq, &wc[1], 1, 60000);
	alive = !t_pid_gone(server);
	ok(n == 1 && !alive,
	   "... the held WQE: nothing completed while its holder's process "
	   "lived (%d, %s)",
	   n, alive ? "alive" : "gone");
	ok(n == 1 && wc[1].status == IBV_WC_WR_FLUSH_ERR && wc[1].wr_id == 0,
	   "... flushed once it died (status %d, wr_id %llu)",
	   n == 1 ? (int)wc[1].status : -1,
	   n == 1 ? (unsigned long long)wc[1].wr_id : 0ull);
	usleep(300000);
	n = ibv_poll_cq(q.t.cq, 1, &wc[0]);
	ok(n == 0, "... no completion more (%d)", n);
	ibv_destroy_qp(t5);
	ibv_destroy_srq(srq);
	ibv_close_xrcd(x);
	close(fd);
	unlink(dpath);
	peer_close(&q);
	n = done_testing();
	fflush(stdout); /* t_spawn's child ends in _exit */
	if (done)
		close(open(done, O_WRONLY | O_CREAT, 0600));
	return n;
}

/* server_hold -- "hold": target 4 of a file's domain to SRQ D of
 * other_hold; this process stops at the hold (SOFTRDMA_TEST_HOLD_STOP)
 * and is killed there: no TAP of its own */
static void server_hold(int port)
{
	struct ibv_xrcd *xf;
	struct xinfo me, o;
	struct peer p;
	int fd, dfd, orfd, owfd;
	pid_t opid;
	char c;

	dfd = d_spawn(other_hold, &orfd, &owfd, &opid);
	xf = d_join(&p, dfd, orfd, &me);
	fd = tcp_accept(port);
	xfer(fd, &o, sizeof(o), 0);
	t_xsend(owfd, &o, sizeof(o));
	t_xrecv(orfd, &me.qpn[1], sizeof(me.qpn[1])); /* target 5 */
	me.qpn[3] = tgt_rtr(&p, xf, &o, o.qpn[3])->qp_num;
	xfer(fd, &me, sizeof(me), 1);
	xfer(fd, &c, 1, 0); /* never: stopped and killed before */
	exit(3);
}

/* client_hold -- "hold": a SEND of 64 KiB to SRQ D through target 4,
 * whose process stops at its first packet, then one of 1000 B through
 * target 5, of D's process */
static void client_hold(const char *addr, int port)
{
	struct ibv_qp *i4, *i5;
	struct xinfo me, o;
	struct ibv_wc wc;
	struct peer p;
	int fd, st, n, got4 = -1, got5 = -1;

	peer_open(&p, 2 * (size_t)BIG);
	i4 = ini(&p);
	i5 = ini(&p);
	memset(&me, 0, sizeof(me));
	me.qpn[3] = i4->qp_num;
	me.qpn[1] = i5->qp_num;
	fd = meet(&p, addr, port, &me, &o);
	ok(!ini_rts(&p, i4, &o, o.qpn[3], 7) &&
		   !ini_rts(&p, i5, &o, o.qpn[1], 7),
	   "initiators 4 and 5 to RTS towards targets 4 and 5");
	pfill(p.buf, BIG, 12);
	pfill(p.buf + BIG, 1000, 21);
	st = xpost(&p, i4, IBV_WR_SEND, 0, BIG, o.srqn[3], 4, 0, 0, 0, 0);
	usleep(300000); /* its first packet has taken D's first WQE */
	st = st ||
	     xpost(&p, i5, IBV_WR_SEND, BIG, 1000, o.srqn[3], 5, 0, 0, 0, 0);
	for (n = 0; !st && n < 2 && t_wait(p.t.cq, &wc, 1, 30000) == 1; n++) {
		if (wc.wr_id == 4)
			got4 = (int)wc.status;
		else if (wc.wr_id == 5)
			got5 = (int)wc.status;
	}
	is_int(got5, IBV_WC_SUCCESS,
	       "a SEND of 1000 B to SRQ D through target 5, of D's process, "
	       "while target 4 holds D's first WQE");
	is_int(got4, IBV_WC_RETRY_EXC_ERR,
	       "a SEND of 64 KiB to SRQ D through target 4, whose process "
	       "stops at its first packet: IBV_WC_RETRY_EXC_ERR");
	close(fd);
	ibv_destroy_qp(i4);
	ibv_destroy_qp(i5);
	peer_close(&p);
}

/* other_ring -- "ring": SRQ D's process, D with one receive posted
 * whose WQE in D's shared mirror (what targets of other processes take)
 * then claims more SGEs than D has: a corrupt ring.  Tells the server
 * D's number, and at its word (the SEND failed) how many completions D
 * has, after 300 ms: 0 is right (-1: none made) */
static int other_ring(int rfd, int wfd)
{
	struct soft_shm_rwqe *w;
	struct ibv_xrcd *x;
	struct ibv_srq *srq;
	struct ibv_wc wc;
	struct soft_srq *s;
	struct dinfo d;
	struct peer q;
	int fd, n = -1;
	char c;

	fd = open(dpath, O_RDWR);
	if (fd < 0)
		return 2;
	peer_open(&q, 4096);
	memset(&d, 0, sizeof(d));
	x = t_xrcd(q.t.ctx, fd, O_CREAT);
	srq = x ? t_xsrq(&q.t, x, q.t.cq, T_XSRQ_MASK, 4) : NULL;
	if (srq && !ibv_get_srq_num(srq, &d.srqn) &&
	    !t_post_srq_recv(srq, q.buf, 4096, q.mr->lkey, 0)) {
		s = to_ssrq(srq);
		w = (void *)(s->shm_rq +
			     (atomic_load(&s->shm->cons) & (s->shm_n - 1)) *
				     (8 + 16 * (size_t)s->shm->sge));
		w->num_sge = s->shm->sge + 1;
	} else {
		d.srqn = 0;
	}
	t_xsend(wfd, &d, sizeof(d));
	t_xrecv(rfd, &c, 1);
	if (srq) {
		usleep(300000);
		n = ibv_poll_cq(q.t.cq, 1, &wc);
		ibv_destroy_srq(srq);
	}
	t_xsend(wfd, &n, sizeof(n));
	if (x)
		ibv_close_xrcd(x);
	close(fd);
	peer_close(&q);
	fflush(stdout); /* t_spawn's child ends in _exit */
	return 0;
}

/* server_ring -- "ring": target 4 of a file's domain to SRQ D of
 * other_ring, whose ring is corrupt: in ERR once the client's SEND came,
 * with IBV_EVENT_QP_FATAL */
static void server_ring(int port)
{
	struct ibv_async_event ev;
	struct ibv_xrcd *xf;
	struct ibv_qp *t4;
	struct xinfo me, o;
	struct peer p;
	int fd, dfd, orfd, owfd, n = -1, fatal = 0;
	pid_t opid;
	char c = 0;

	dfd = d_spawn(other_ring, &orfd, &owfd, &opid);
	xf = d_join(&p, dfd, orfd, &me);
	fd = tcp_accept(port);
	xfer(fd, &o, sizeof(o), 0);
	t4 = tgt_rtr(&p, xf, &o, o.qpn[3]);
	me.qpn[3] = t4->qp_num;
	xfer(fd, &me, sizeof(me), 1);
	xfer(fd, &c, 1, 0); /* the client's SEND completed */
	while (!fatal && t_async(p.t.ctx, 5000, &ev) >= 0)
		fatal = ev.event_type == IBV_EVENT_QP_FATAL &&
			ev.element.qp == t4;
	ok(fatal, "target 4, SRQ D's ring corrupt: IBV_EVENT_QP_FATAL");
	ok(t_qp_state(t4) == IBV_QPS_ERR, "... target 4 in ERR");
	t_xsend(owfd, &c, 1);
	t_xrecv(orfd, &n, sizeof(n));
	is_int(n, 0, "... nothing completed in SRQ D");
	is_int(t_reap(opid), 0, "SRQ D's process exits 0");
	xfer(fd, &c, 1, 1);
	close(fd);
	ibv_destroy_qp(t4);
	ibv_close_xrcd(xf);
	close(dfd);
	unlink(dpath);
	peer_close(&p);
}

/* client_ring -- "ring": a SEND to SRQ D, whose ring is corrupt, through
 * target 4; rnr_retry 7 (RNR NAKs are retried for ever) */
static void client_ring(const char *addr, int port)
{
	struct ibv_qp *i4;
	struct xinfo me, o;
	struct peer p;
	int fd, st;
	char c = 0;

	peer_open(&p, 4096);
	i4 = ini(&p);
	memset(&me, 0, sizeof(me));
	me.qpn[3] = i4->qp_num;
	fd = meet(&p, addr, port, &me, &o);
	ok(!ini_rts(&p, i4, &o, o.qpn[3], 7),
	   "initiator 4 to RTS towards target 4, rnr_retry 7");
	pfill(p.buf, 8, 23);
	st = xpost(&p, i4, IBV_WR_SEND, 0, 8, o.srqn[3], 3000, 0, 0, 0, 0);
	is_int(st ? -2 : one(&p, 3000), IBV_WC_REM_OP_ERR,
	       "a SEND to SRQ D, whose ring its process corrupted: "
	       "IBV_WC_REM_OP_ERR");
	ok(t_qp_state(i4) == IBV_QPS_ERR, "... the initiator in ERR");
	xfer(fd, &c, 1, 1);
	xfer(fd, &c, 1, 0); /* the server has checked */
	close(fd);
	ibv_destroy_qp(i4);
	peer_close(&p);
}

#define APM_N 20 /* SENDs before the migration, and after */

/* alt_arm -- qp's alternate path to the other host's port 2 from ours,
 * armed (IBV_MIG_REARM); with rts, the target's RTR->RTS with it */
static int alt_arm(struct ibv_qp *qp, const struct xinfo *o, int rts)
{
	struct ibv_qp_attr a;
	int mask = IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE;

	memset(&a, 0, sizeof(a));
	a.alt_ah_attr.dlid = o->lid2;
	a.alt_ah_attr.port_num = 2;
	a.alt_port_num = 2;
	a.alt_timeout = 14;
	a.path_mig_state = IBV_MIG_REARM;
	if (rts) {
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 14;
		mask |= IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
	}
	return ibv_modify_qp(qp, &a, mask);
}

/* migs -- the IBV_EVENT_PATH_MIG events waiting on ctx (none: 0) */
static int migs(struct ibv_context *ctx)
{
	struct ibv_async_event ev;
	int n = 0, fl = fcntl(ctx->async_fd, F_GETFL);

	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	while (!ibv_get_async_event(ctx, &ev)) {
		n += ev.event_type == IBV_EVENT_PATH_MIG;
		ibv_ack_async_event(&ev);
	}
	return n;
}

/* mig_state -- qp's path migration state, or -1 */
static int mig_state(struct ibv_qp *qp, uint8_t *port)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_PATH_MIG_STATE | IBV_QP_PORT, &ia))
		return -1;
	*port = a.port_num;
	return (int)a.path_mig_state;
}

/* migrated -- WHO (qp, of ctx) had one IBV_EVENT_PATH_MIG and is
 * IBV_MIG_MIGRATED on port 2 */
static void migrated(const char *who, struct ibv_context *ctx,
		     struct ibv_qp *qp)
{
	int m = migs(ctx);
	uint8_t pn = 0;

	ok(m == 1, "%s: IBV_EVENT_PATH_MIG once (%d)", who, m);
	m = mig_state(qp, &pn);
	ok(m == IBV_MIG_MIGRATED && pn == 2,
	   "... IBV_MIG_MIGRATED, on port 2 (%d, port %u)", m, pn);
}

/* server_apm -- "apm" (IB mode, two rails): target 1 to SRQ A with an
 * alternate path to the client's port 2, armed; 2 x APM_N messages
 * before and after the client migrates by hand, each once, in order,
 * intact; the target migrates when they come on its alternate path */
static void server_apm(int port)
{
	struct ibv_xrcd *x;
	struct ibv_srq *sa;
	struct ibv_qp *t1;
	struct xinfo me, o;
	struct ibv_wc wc;
	struct peer p;
	int fd, i, bad = 0;
	char c;

	peer_open(&p, (size_t)2 * APM_N * 4096);
	x = t_xrcd(p.t.ctx, -1, O_CREAT);
	sa = x ? t_xsrq(&p.t, x, p.t.cq, T_XSRQ_MASK, 2 * APM_N) : NULL;
	if (!sa)
		bail_out("domain, SRQ");
	for (i = 0; i < 2 * APM_N; i++)
		if (t_post_srq_recv(sa, p.buf + (size_t)i * 4096, 4096,
				    p.mr->lkey, (uint64_t)i))
			bail_out("srq recv %d", i);
	memset(&me, 0, sizeof(me));
	if (ibv_get_srq_num(sa, &me.srqn[0]))
		bail_out("srq number");
	me.lid = p.lid;
	me.lid2 = p.lid2;
	fd = tcp_accept(port);
	xfer(fd, &o, sizeof(o), 0);
	t1 = tgt_rtr(&p, x, &o, o.qpn[0]);
	ok(!alt_arm(t1, &o, 1),
	   "target 1: alternate path to the client's port 2 (LID %u), armed, "
	   "to RTS",
	   o.lid2);
	me.qpn[0] = t1->qp_num;
	xfer(fd, &me, sizeof(me), 1);
	for (i = 0; i < 2 * APM_N; i++) {
		if (t_wait(p.t.cq, &wc, 1, 60000) != 1)
			break;
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)i ||
		    wc.byte_len != 3000 ||
		    !pfilled(p.buf + (size_t)i * 4096, 3000, (unsigned)i + 31))
			bad++;
	}
	ok(i == 2 * APM_N && !bad,
	   "%d SENDs of 3000 B through target 1, before and after the "
	   "migration: each once, in order, intact (%d bad)",
	   2 * APM_N, bad);
	xfer(fd, &c, 1, 0); /* the client is done */
	migrated("target 1", p.t.ctx, t1);
	xfer(fd, &c, 1, 1);
	close(fd);
	ibv_destroy_qp(t1);
	ibv_destroy_srq(sa);
	ok(!ibv_close_xrcd(x), "domain closed");
	peer_close(&p);
}

/* client_apm -- "apm": initiator 1 with an alternate path to the
 * server's port 2, armed; APM_N SENDs, a migration by hand
 * (IBV_MIG_MIGRATED), APM_N more */
static void client_apm(const char *addr, int port)
{
	struct xinfo me, o;
	struct ibv_qp_attr a;
	struct ibv_qp *i1;
	struct peer p;
	int fd, i, bad = 0;
	char c = 0;

	peer_open(&p, (size_t)2 * APM_N * 4096);
	i1 = ini(&p);
	memset(&me, 0, sizeof(me));
	me.qpn[0] = i1->qp_num;
	me.lid2 = p.lid2;
	fd = meet(&p, addr, port, &me, &o);
	ok(!ini_rts(&p, i1, &o, o.qpn[0], 7) && !alt_arm(i1, &o, 0),
	   "initiator 1 to RTS, alternate path to the server's port 2 (LID "
	   "%u), armed",
	   o.lid2);
	for (i = 0; i < 2 * APM_N; i++) {
		if (i == APM_N) {
			memset(&a, 0, sizeof(a));
			a.path_mig_state = IBV_MIG_MIGRATED;
			ok(!ibv_modify_qp(i1, &a, IBV_QP_PATH_MIG_STATE),
			   "initiator 1 migrated by hand (IBV_MIG_MIGRATED) "
			   "after %d SENDs",
			   APM_N);
		}
		pfill(p.buf + (size_t)i * 4096, 3000, (unsigned)i + 31);
		if (xpost(&p, i1, IBV_WR_SEND, (size_t)i * 4096, 3000,
			  o.srqn[0], (uint64_t)i, 0, 0, 0, 0) ||
		    one(&p, (uint64_t)i) != IBV_WC_SUCCESS)
			bad++;
	}
	ok(!bad, "%d SENDs of 3000 B to SRQ A, before and after (%d not)",
	   2 * APM_N, bad);
	migrated("initiator 1", p.t.ctx, i1);
	xfer(fd, &c, 1, 1);
	xfer(fd, &c, 1, 0);
	close(fd);
	ibv_destroy_qp(i1);
	peer_close(&p);
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "server") && !strcmp(argv[3], "apm"))
		server_apm(atoi(argv[2]));
	else if (argc == 5 && !strcmp(argv[1], "client") &&
		 !strcmp(argv[4], "apm"))
		client_apm(argv[2], atoi(argv[3]));
	else if (argc == 4 && !strcmp(argv[1], "server") &&
		 !strcmp(argv[3], "hold"))
		server_hold(atoi(argv[2]));
	else if (argc == 5 && !strcmp(argv[1], "client") &&
		 !strcmp(argv[4], "hold"))
		client_hold(argv[2], atoi(argv[3]));
	else if (argc == 4 && !strcmp(argv[1], "server") &&
		 !strcmp(argv[3], "ring"))
		server_ring(atoi(argv[2]));
	else if (argc == 5 && !strcmp(argv[1], "client") &&
		 !strcmp(argv[4], "ring"))
		client_ring(argv[2], atoi(argv[3]));
	else if (argc == 4 && !strcmp(argv[1], "server"))
		server(atoi(argv[2]), strcmp(argv[3], "fault") != 0);
	else if (argc == 5 && !strcmp(argv[1], "client"))
		client(argv[2], atoi(argv[3]), strcmp(argv[4], "fault") != 0);
	else
		bail_out("usage: xrc_peer server PORT MODE | "
			 "client ADDR PORT MODE");
	return done_testing();
}
