/* SPDX-License-Identifier: MIT */
/* ud.c -- UD and UC data paths and address handles */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "net.h"
#include "roce.h"
#include "ud.h"

/*
 * Transport.  Every UD and UC QP owns an inbound queue at the end of its
 * shm segment: a header, then cells of SOFT_UD_MTU bytes.  Senders of any
 * process append whole messages under the queue's robust mutex (a UD
 * datagram is one cell, a UC SEND spans as many as it needs) and complete
 * their send at once, as a NIC does once the packets left; the owner
 * drains the queue from its own progress (poll_cq or the progress thread
 * of an armed CQ) into its posted receives.  The owner publishes how many
 * receives it posted; a message that needs a receive is accepted only
 * while accepted < posted, so "no receive posted" is decided when the
 * message arrives, as on hardware, and a queue never holds more than the
 * owner can take.  A message that is not accepted is dropped and counted
 * (softrdma_qp_drops).  A UD datagram whose receive is shareable memory
 * is placed by its sender straight into that receive's buffer and its
 * cell holds only the header (struct ud_rdesc): one copy, not two; the
 * Q_Key is checked by the sender, on arrival, so that every message in
 * a queue takes the next receive.  A UC SEND that holds a credit but
 * finds no room (it spans many cells) waits in the sender, in order, for
 * at most 1 s.
 * Everything the owner reads from its queue was written by peers and is
 * checked before use.
 *
 * UC RDMA WRITE goes straight to the target's memory (process_vm_writev
 * after the rkey check, as RC does); a UC request that fails any check at
 * the responder is dropped silently: UC has no ACK and no NAK.
 */

#define UD_QMAGIC	0x736f667475647132ull
#define UD_TMAGIC	0x736f667475647454ull
#define UD_CELL_HDR	128
#define UD_CELL		(UD_CELL_HDR + SOFT_UD_MTU)
#define UD_QHDR		4096
#define UD_TRAILER	64
#define UD_MAX_SLOTS	4096
#define UD_MIN_SLOTS	64
#define UC_MIN_SLOTS	512
#define UD_SRQ_SLOTS	1024
#define UD_NPEER	8
#define UD_GRH		40
#define UD_MCAST_QPN	0xffffffu
#define UD_DRAIN_BUDGET 256

enum {
	UDF_IMM = 1,
	UDF_SOLICITED = 2,
	UDF_WRITE_IMM = 4,   /* UC RDMA WRITE with immediate: no data placed */
	UDF_PLACED = 8,	     /* UD: GRH and data already in the receive's
			    * buffer, the one posted with credit "credit" */
	UDF_WRITE_TAIL = 16, /* UC WRITE_WITH_IMM to an SRQ-fed QP: the
			      * cells hold its LAST packet's bytes, for
			      * raddr + write_off, placed by the receiver
			      * once its SRQ gives a receive */
	UDF_NOGRH = 32,	     /* IB mode: sent through a LID-routed AV, no
			      * GRH (the receive's first 40 bytes are left
			      * alone, no IBV_WC_GRH) */
};

enum {
	UD_DROP_NORECV,
	UD_DROP_QKEY,
	UD_DROP_FULL,
	UD_DROP_OTHER,
	UD_NDROP,
};

/* one cell: what the GRH and the completion are made of, then data */
struct ud_cell {
	uint32_t src_qpn;
	uint32_t qkey;
	uint32_t msg_len; /* the whole message; its cells follow this one */
	uint32_t ncells;
	uint32_t imm;
	uint32_t flags;
	uint32_t flow_label;
	uint8_t tclass, hop_limit, pad[2];
	uint8_t sgid[16], dgid[16];
	uint32_t write_len; /* UC RDMA WRITE with immediate */
	uint32_t write_off; /* UDF_WRITE_TAIL: where the cells' bytes go */
	uint64_t credit;    /* UDF_PLACED */
	uint64_t raddr;	    /* UDF_WRITE_TAIL: the WRITE's RETH */
	uint32_t rkey;
	uint32_t arrived_us; /* soft_now_us() when it was queued */
	uint16_t slid;	     /* IB mode: the LRH's SLID (the sending port's
			      * LID) and SL (the sender's AV's) */
	uint8_t sl, pad3;
	uint8_t pad2[UD_CELL_HDR - 100];
};
_Static_assert(sizeof(struct ud_cell) == UD_CELL_HDR, "ud_cell");
_Static_assert(sizeof(((struct soft_ud_src *)0)->grh) == UD_GRH, "grh");

struct ud_qhdr {
	uint64_t magic;
	uint32_t qpn, nslots;
	uint32_t srq;  /* receives come from an SRQ: no credit check */
	uint32_t rd_n; /* receive descriptors after the cells (0: none) */
	pthread_mutex_t lock;	   /* producers */
	_Atomic uint64_t tail;	   /* cells published */
	_Atomic uint64_t accepted; /* messages holding a receive credit */
	_Atomic uint64_t head;	   /* cells consumed by the owner */
	_Atomic uint64_t posted;   /* receives posted + credits returned */
	_Atomic uint64_t drops[UD_NDROP];
	_Atomic uint32_t qkey; /* UD: checked by the sender, on arrival */
};

/*
 * A posted receive of a UD QP with one SGE, published for its senders:
 * the receive that credit c stands for is at c & (rd_n - 1), its tag
 * c + 1.  The sender holding credit c (queue lock) places GRH and data
 * straight into its buffer when the lkey's registry entry allows it and
 * the buffer is mapped here (peermap.c), as an HCA DMAs into the posted
 * WQE; the owner completes it without a copy.  Anything else takes the
 * queue.  The owner clears the tags (queue lock held) before a receive
 * they describe is flushed or forgotten, so no sender writes into a
 * buffer that went back to the application.
 */
struct ud_rdesc {
	_Atomic uint64_t tag;
	uint64_t addr;
	uint32_t length, lkey;
	uint64_t pad;
};

struct ud_trailer {
	uint64_t magic;
	uint64_t off; /* of the queue header in the segment */
};

struct ud_peer {
	uint32_t qpn;
	int32_t pid;
	uint64_t start;
	void *map;
	size_t len;
	struct ud_qhdr *q;
	uint8_t *cells;
	uint32_t nslots;
	uint32_t type, pd_id;
	uint32_t rd_n; /* checked against the mapping */
	struct ud_rdesc *rd;
};

/* a UC WR waiting for room in the peer's queue */
struct ud_pend {
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	int signaled;
	uint64_t len;
	struct ud_cell h;
	uint32_t rkey;
	uint32_t imm;
	uint64_t raddr;
	/* UD: the AH's address, copied at posting as an HCA copies the AV
	 * into the WQE (the AH may be destroyed before the WR runs) */
	struct ibv_ah_attr av;
	uint32_t remote_qpn, remote_qkey;
	struct ibv_mw *mw; /* UC BIND_MW: the window, its new rkey, where */
	uint32_t mw_rkey;
	struct ibv_mw_bind_info bind;
	int niov;
	struct iovec iov[SOFT_MAX_SGE];
	uint8_t *inl;	       /* copy of inline data */
	enum ibv_wc_status st; /* failed at post: completes with this */
};

struct soft_ud {
	struct ud_qhdr *q;
	uint8_t *cells;
	uint32_t nslots;
	struct soft_context *ctx; /* its mappings of peers' memory */
	struct ud_rdesc *rd;	  /* published receives (UD, no SRQ) */
	uint32_t rd_n;
	uint64_t *rq_credit; /* the credit each posted receive stands for */
	uint64_t head;	     /* private copy of q->head */
	uint64_t posted;     /* private copy of q->posted */
	struct soft_rwqe *rq;
	uint32_t rq_size;
	uint64_t rq_head, rq_tail;
	uint32_t create_flags;
	int srq;      /* receives come from an SRQ */
	uint32_t mtu; /* UD: the largest datagram, its port's active MTU */
	struct ud_peer peer[UD_NPEER];
	unsigned int victim;
	struct soft_mc_cache *mc;   /* the members of the group sent to last */
	uint64_t lost;		    /* sent towards no reachable QP */
	uint64_t placed;	    /* received without the queue's copy */
	uint64_t received;	    /* completed with success */
	uint64_t mc_sent, mc_local; /* datagrams to groups, copies given to
				     * members here (not to a blocked self) */
	struct ud_pend *pend;	    /* UC: WRs waiting for queue room */
	uint32_t pend_size;
	uint64_t pend_head, pend_tail;
};

struct soft_ah {
	struct ibv_ah ah;
	struct ibv_ah_attr attr;
	struct soft_pd *pd; /* held: EBUSY to ibv_dealloc_pd while we live */
};

SOFT_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd,
					 struct ibv_ah_attr *attr);
SOFT_EXPORT int ibv_destroy_ah(struct ibv_ah *ah);
SOFT_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context,
				    uint8_t port_num, struct ibv_wc *wc,
				    struct ibv_grh *grh,
				    struct ibv_ah_attr *ah_attr);
SOFT_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd,
						 struct ibv_wc *wc,
						 struct ibv_grh *grh,
						 uint8_t port_num);
SOFT_EXPORT uint64_t softrdma_qp_drops(struct ibv_qp *qp, int why);
SOFT_EXPORT uint64_t softrdma_qp_placed(struct ibv_qp *qp);

static uint32_t pow2_at_least(uint32_t v)
{
	uint32_t n = 1;

	while (n < v)
		n <<= 1;
	return n;
}

/* ud_nslots -- queue cells of a QP created with attr */
static uint32_t ud_nslots(const struct ibv_qp_init_attr_ex *attr)
{
	uint32_t min =
		attr->qp_type == IBV_QPT_UC ? UC_MIN_SLOTS : UD_MIN_SLOTS;
	uint32_t n;

	if (attr->srq)
		return UD_SRQ_SLOTS;
	n = pow2_at_least(attr->cap.max_recv_wr);
	if (n < min)
		n = min;
	return n > UD_MAX_SLOTS ? UD_MAX_SLOTS : n;
}

/* ud_rd_n -- receive descriptors a QP created with attr publishes: one
 * per receive it may hold (UD with its own RQ) */
static uint32_t ud_rd_n(const struct ibv_qp_init_attr_ex *attr)
{
	if (attr->qp_type != IBV_QPT_UD || attr->srq)
		return 0;
	return pow2_at_least(attr->cap.max_recv_wr + 1);
}

/* soft_ud_seg_extra -- bytes a UD/UC QP adds to its shm segment */
size_t soft_ud_seg_extra(const struct ibv_qp_init_attr_ex *attr)
{
	if (attr->qp_type != IBV_QPT_UD && attr->qp_type != IBV_QPT_UC)
		return 0;
	return UD_QHDR + (size_t)ud_nslots(attr) * UD_CELL +
	       (size_t)ud_rd_n(attr) * sizeof(struct ud_rdesc) + UD_TRAILER;
}

/* soft_robust_init -- a process-shared robust mutex */
int soft_robust_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	int r;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	r = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return r;
}

/* soft_ud_create -- set up qp->ud after the segment exists */
int soft_ud_create(struct soft_qp *qp, const struct ibv_qp_init_attr_ex *attr)
{
	size_t extra = soft_ud_seg_extra(attr);
	struct ud_trailer *t;
	struct soft_ud *u;
	size_t off;

	if (!extra)
		return 0;
	u = calloc(1, sizeof(*u));
	if (!u)
		goto nomem;
	if (!attr->srq) {
		u->rq_size = pow2_at_least(qp->cap.max_recv_wr + 1);
		u->rq = calloc(u->rq_size, sizeof(*u->rq));
		u->rq_credit = calloc(u->rq_size, sizeof(*u->rq_credit));
		if (!u->rq || !u->rq_credit)
			goto free_rq;
	}
	/* WRs posted in SQD wait here */
	u->pend_size = pow2_at_least(qp->cap.max_send_wr);
	u->pend = calloc(u->pend_size, sizeof(*u->pend));
	if (!u->pend)
		goto free_rq;
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS))
		u->create_flags = attr->create_flags;
	off = qp->seg_len - extra;
	u->nslots = ud_nslots(attr);
	u->mtu = SOFT_UD_MTU; /* until INIT->RTR reads the port's */
	u->q = (struct ud_qhdr *)((char *)qp->seg + off);
	u->cells = (uint8_t *)u->q + UD_QHDR;
	u->rd_n = ud_rd_n(attr);
	if (u->rd_n)
		u->rd = (struct ud_rdesc *)(u->cells +
					    (size_t)u->nslots * UD_CELL);
	u->ctx = qp->ctx;
	if (soft_robust_init(&u->q->lock))
		goto free_rq;
	u->q->qpn = qp->qpx.qp_base.qp_num;
	u->q->nslots = u->nslots;
	u->q->rd_n = u->rd_n;
	u->q->srq = !!attr->srq;
	u->srq = !!attr->srq;
	if (attr->srq)
		to_ssrq(attr->srq)->stamp++; /* deliver() compares */
	t = (struct ud_trailer *)((char *)qp->seg + qp->seg_len - UD_TRAILER);
	t->off = off;
	__atomic_store_n(&u->q->magic, UD_QMAGIC, __ATOMIC_RELEASE);
	__atomic_store_n(&t->magic, UD_TMAGIC, __ATOMIC_RELEASE);
	qp->ud = u;
	return 0;

free_rq:
	free(u->pend);
	free(u->rq_credit);
	free(u->rq);
	free(u);
nomem:
	errno = ENOMEM;
	return -1;
}

/* peer_unmap -- forget one cached target */
static void peer_unmap(struct ud_peer *p)
{
	if (p->map)
		munmap(p->map, p->len);
	memset(p, 0, sizeof(*p));
}

static int q_lock(struct ud_qhdr *q, long ms);
static void rd_withdraw(struct soft_ud *u);
static void pend_run(struct soft_qp *qp);
static void ud_send(struct soft_qp *qp, const struct ibv_ah_attr *av,
		    uint32_t rqpn, uint32_t rqkey, int niov, struct ud_cell *h,
		    const struct iovec *iov);
static void pend_drop(struct soft_qp *qp);

/* ud_stats -- SOFTRDMA_UD_STATS=1: a line on stderr of what the QP
 * received, dropped and sent, as it goes (tests show it when they fail) */
static void ud_stats(struct soft_qp *qp)
{
	static _Atomic int on = -1;
	struct soft_ud *u = qp->ud;
	_Atomic uint64_t *d = u->q->drops;

	if (!soft_env_flag(&on, "SOFTRDMA_UD_STATS"))
		return;
	fprintf(stderr,
		"softrdma: %s QP %u: received %llu (placed %llu); dropped: "
		"no receive %llu, Q_Key %llu, queue full %llu, other %llu; "
		"sent to groups %llu (copies to members on this host %llu), "
		"lost %llu\n",
		qp->qpx.qp_base.qp_type == IBV_QPT_UC ? "UC" : "UD",
		qp->qpx.qp_base.qp_num, (unsigned long long)u->received,
		(unsigned long long)u->placed,
		(unsigned long long)atomic_load(&d[UD_DROP_NORECV]),
		(unsigned long long)atomic_load(&d[UD_DROP_QKEY]),
		(unsigned long long)atomic_load(&d[UD_DROP_FULL]),
		(unsigned long long)atomic_load(&d[UD_DROP_OTHER]),
		(unsigned long long)u->mc_sent, (unsigned long long)u->mc_local,
		(unsigned long long)u->lost);
}

/* ud_destroy -- detach from every group, unmap, free */
static void ud_destroy(struct soft_qp *qp)
{
	struct soft_ud *u = qp->ud;
	int i;

	if (!u)
		return;
	ud_stats(qp);
	if (u->srq && qp->srq)
		qp->srq->stamp--; /* one QP fewer that compares */
	if (qp->type == IBV_QPT_UD)
		soft_mcast_forget_qp(qp->qpx.qp_base.qp_num);
	soft_net_release(qp); /* before the queue it feeds goes */
	/* the buffers go back to the application */
	rd_withdraw(u);
	for (i = 0; i < UD_NPEER; i++)
		peer_unmap(&u->peer[i]);
	soft_mcast_cache_free(&u->mc);
	pend_drop(qp);
	free(u->pend);
	free(u->rq_credit);
	free(u->rq);
	free(u);
	qp->ud = NULL;
}

/*
 * q_lock -- a queue's producer lock, waiting at most ms: a sender stopped
 * (SIGSTOP) while it holds the lock must not stall every other sender; a
 * dead one's lock is recovered (robust mutex).  0 when held.
 */
static int q_lock(struct ud_qhdr *q, long ms)
{
	struct timespec ts;
	int r = pthread_mutex_trylock(&q->lock);

	if (r == EBUSY) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += ms / 1000;
		ts.tv_nsec += (ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		r = pthread_mutex_timedlock(&q->lock, &ts);
	}
	if (r == EOWNERDEAD) {
		pthread_mutex_consistent(&q->lock);
		r = 0;
	}
	return r;
}

/* rd_clear -- no published receive is placed into any more; queue lock
 * held (a sender places under it) */
static void rd_clear(struct soft_ud *u)
{
	uint32_t i;

	for (i = 0; i < u->rd_n; i++)
		atomic_store_explicit(&u->rd[i].tag, 0, memory_order_relaxed);
}

/* rd_withdraw -- rd_clear once no sender is placing (a stopped one that
 * holds the lock past 1 s is not waited for) */
static void rd_withdraw(struct soft_ud *u)
{
	int locked;

	if (!u->rd_n)
		return;
	locked = !q_lock(u->q, 1000);
	rd_clear(u);
	if (locked)
		pthread_mutex_unlock(&u->q->lock);
}

/* ud_reset -- back to RESET: queues emptied without completions */
static void ud_reset(struct soft_qp *qp)
{
	struct soft_ud *u = qp->ud;
	struct ud_qhdr *q = u->q;

	/* without the lock (a stopped sender holds it) reset anyway: the
	 * QP is out of the receiving states, nothing new is accepted */
	int locked = !q_lock(q, 1000);

	u->head = atomic_load(&q->tail);
	atomic_store(&q->head, u->head);
	u->posted = atomic_load(&q->accepted);
	atomic_store(&q->posted, u->posted);
	rd_clear(u);
	if (locked)
		pthread_mutex_unlock(&q->lock);
	u->rq_head = u->rq_tail = 0;
	pend_drop(qp);
}

/* return_credit -- a message that held a credit took no receive */
static void return_credit(struct soft_ud *u)
{
	if (u->srq) /* our own copy: the shared flag is peer-writable */
		return;
	u->posted++;
	atomic_store_explicit(&u->q->posted, u->posted, memory_order_release);
}

static void count_drop(struct ud_qhdr *q, int why)
{
	atomic_fetch_add_explicit(&q->drops[why], 1, memory_order_relaxed);
}

/* flush_rq -- a QP in ERR completes its receive WQEs with FLUSH */
static void flush_rq(struct soft_qp *qp)
{
	struct soft_ud *u = qp->ud;
	struct ibv_wc wc;

	rd_withdraw(u); /* before the application has the buffers back */
	while (u->rq_tail != u->rq_head) {
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = u->rq[u->rq_tail & (u->rq_size - 1)].wr_id;
		wc.status = IBV_WC_WR_FLUSH_ERR;
		wc.opcode = IBV_WC_RECV;
		wc.qp_num = qp->qpx.qp_base.qp_num;
		u->rq_tail++;
		soft_cq_push(qp->rcq, &wc, 0);
	}
}

/* ud_flush -- completions due now; also the held WRs out of SQD; lock
 * held */
static void ud_flush(struct soft_qp *qp)
{
	if (qp->ud->pend_head != qp->ud->pend_tail)
		pend_run(qp);
	if (qp->state == IBV_QPS_ERR && qp->ud->rq_tail != qp->ud->rq_head)
		flush_rq(qp);
}

static int gid_v4mapped(const uint8_t *g)
{
	static const uint8_t pfx[12] = {0, 0, 0, 0, 0,	  0,
					0, 0, 0, 0, 0xff, 0xff};

	return !memcmp(g, pfx, 12);
}

/* soft_ud_gid_is_mcast -- IPv6 multicast or IPv4-mapped class D */
int soft_ud_gid_is_mcast(const uint8_t *g)
{
	if (gid_v4mapped(g))
		return (g[12] & 0xf0) == 0xe0;
	return g[0] == 0xff;
}

static uint16_t ip_csum(const uint8_t *p, int n)
{
	uint32_t s = 0;
	int i;

	for (i = 0; i < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* over_ipv4 -- the datagram in h travelled as RoCE v2 over IPv4 (both
 * GIDs IPv4-mapped), else over IPv6 */
static int over_ipv4(const struct ud_cell *h)
{
	return gid_v4mapped(h->sgid) && gid_v4mapped(h->dgid);
}

/*
 * roce_pkt_type -- what a UD receive completion's sl reports on RoCE, as
 * mlx5 reports it (its CQE's field for the SL holds the packet type
 * there; RoCE has no SL on the wire): bit 3 a UDP header (RoCE v2), bits
 * 2:0 the L3 header, 1 IPv6, 2 IPv4.  What the GRH area holds depends
 * on it (build_grh), and a receiver cannot tell from the area alone: its
 * first 20 bytes are undefined for IPv4 (Annex 17, A17.4.5.2), so UCX's
 * UD transport finds the destination GID by sl (Debian 12's 1.13, and
 * every release before UCX pull request 10209 of 2024: on rxe and irdma,
 * which report 0, it drops every datagram).
 */
static uint8_t roce_pkt_type(const struct ud_cell *h)
{
	return over_ipv4(h) ? 0x8 | 0x2 : 0x8 | 0x1;
}

/*
 * build_grh -- the 40 bytes a RoCE v2 HCA puts first in a UD receive
 * buffer: for IPv4 GIDs the IPv4 header in the last 20 bytes (the first
 * 20 zero, as rxe), else the IPv6 header.  Lengths count UDP (8), BTH
 * (12), DETH (8), ImmDt, the payload padded to 4 and the ICRC (4).
 */
static void build_grh(uint8_t *grh, const struct ud_cell *h)
{
	uint32_t len = h->msg_len, l4;
	uint16_t v;

	l4 = 8 + 12 + 8 + ((h->flags & UDF_IMM) ? 4 : 0) + ((len + 3) & ~3u) +
	     4;
	memset(grh, 0, UD_GRH);
	if (over_ipv4(h)) {
		uint8_t *ip = grh + 20;

		ip[0] = 0x45;
		ip[1] = h->tclass;
		v = htons((uint16_t)(20 + l4));
		memcpy(ip + 2, &v, 2);
		v = htons(0x4000); /* DF */
		memcpy(ip + 6, &v, 2);
		ip[8] = h->hop_limit;
		ip[9] = 17; /* UDP */
		memcpy(ip + 12, h->sgid + 12, 4);
		memcpy(ip + 16, h->dgid + 12, 4);
		v = htons(ip_csum(ip, 20));
		memcpy(ip + 10, &v, 2);
	} else {
		uint32_t vtf = htonl(6u << 28 | (uint32_t)h->tclass << 20 |
				     (h->flow_label & 0xfffff));

		memcpy(grh, &vtf, 4);
		v = htons((uint16_t)l4);
		memcpy(grh + 4, &v, 2);
		grh[6] = 17; /* next header: UDP */
		grh[7] = h->hop_limit;
		memcpy(grh + 8, h->sgid, 16);
		memcpy(grh + 24, h->dgid, 16);
	}
}

/* cell_at -- cell i of a queue of nslots cells */
static inline uint8_t *cell_at(uint8_t *cells, uint32_t nslots, uint64_t i)
{
	return cells + (size_t)(i & (nslots - 1)) * UD_CELL;
}

/* scatter -- copy the message into the receive WQE, after the GRH area
 * (UD: ga = 40; its bytes grh, or left alone when grh is NULL: no GRH) */
static enum ibv_wc_status scatter(struct soft_qp *qp, struct soft_rwqe *r,
				  uint32_t ga, const uint8_t *grh,
				  const struct ud_cell *h, uint64_t first)
{
	struct soft_ud *u = qp->ud;
	struct iovec iov[SOFT_MAX_SGE];
	uint64_t room = 0, need = ga + (uint64_t)h->msg_len;
	uint32_t i, k = 0, n = r->num_sge, done = 0, left, ci = 0;
	size_t io = 0;

	if (h->flags & UDF_WRITE_IMM)
		return IBV_WC_SUCCESS;
	for (i = 0; i < n; i++)
		room += r->sge[i].length;
	if (room < need)
		return IBV_WC_LOC_LEN_ERR;
	for (i = 0; i < n; i++)
		if (soft_local_sge(qp->pd, &r->sge[i], IBV_ACCESS_LOCAL_WRITE,
				   &iov[i]))
			return IBV_WC_LOC_PROT_ERR;
	/* source: the GRH area, then the data of cells first+1.. */
	left = ga;
	while (done < need) {
		const uint8_t *src;
		size_t chunk;

		if (left) {
			src = grh ? grh + (ga - left) : NULL;
			chunk = left;
		} else {
			uint32_t off = done - ga;

			ci = off / SOFT_UD_MTU;
			src = cell_at(u->cells, u->nslots, first + ci) +
			      UD_CELL_HDR + off % SOFT_UD_MTU;
			chunk = SOFT_UD_MTU - off % SOFT_UD_MTU;
			if (chunk > h->msg_len - off)
				chunk = h->msg_len - off;
		}
		while (k < n && io == iov[k].iov_len) {
			k++;
			io = 0;
		}
		if (k == n)
			break;
		if (chunk > iov[k].iov_len - io)
			chunk = iov[k].iov_len - io;
		if (src)
			memcpy((char *)iov[k].iov_base + io, src, chunk);
		io += chunk;
		done += (uint32_t)chunk;
		if (left)
			left -= (uint32_t)chunk;
	}
	return IBV_WC_SUCCESS;
}

/* take_rwqe -- the next receive WQE (own RQ, or SRQ: drain holds its
 * lock), NULL if none */
static struct soft_rwqe *take_rwqe(struct soft_qp *qp)
{
	struct soft_ud *u = qp->ud;

	if (qp->srq) {
		if (qp->srq->head == qp->srq->tail)
			return NULL;
		return &qp->srq->rq[qp->srq->tail & (qp->srq->size - 1)];
	}
	if (u->rq_head == u->rq_tail)
		return NULL;
	return &u->rq[u->rq_tail & (u->rq_size - 1)];
}

/* consume_rwqe -- take_rwqe's WQE consumed (an SRQ's: for the
 * initiators serving its other QPs too, soft_srq_consume) */
static void consume_rwqe(struct soft_qp *qp)
{
	if (qp->srq)
		soft_srq_consume(qp->srq);
	else
		qp->ud->rq_tail++;
}

static int qp_receives(enum ibv_qp_state s)
{
	return s >= IBV_QPS_RTR && s != IBV_QPS_ERR;
}

static int uc_tail(struct soft_qp *qp, const struct ud_cell *h, uint64_t first);

/* deliver -- one validated message of the inbound queue */
static void deliver(struct soft_qp *qp, const struct ud_cell *h, uint64_t first)
{
	struct soft_ud *u = qp->ud;
	struct soft_rwqe *r;
	struct ibv_wc wc;
	uint8_t grh[UD_GRH];
	int ud = qp->type == IBV_QPT_UD;
	/* no GRH: a LID-routed datagram, IB mode only (RoCE has one) */
	int nogrh = ud && soft_link_ib && (h->flags & UDF_NOGRH);

	if (!qp_receives(qp->state)) {
		count_drop(u->q, UD_DROP_OTHER);
		return_credit(u);
		return;
	}
	/* the Q_Key was checked on arrival (soft_ud_enqueue), as an HCA
	 * does: every message in the queue takes the next receive */
	r = take_rwqe(qp);
	/* an SRQ's receive posted after the message came was not there for
	 * it: an HCA takes an SRQ's WQE on arrival, and dropped it then */
	if (!r || (qp->srq && (int32_t)(r->posted_us - h->arrived_us) > 0)) {
		count_drop(u->q, UD_DROP_NORECV);
		return_credit(u);
		return;
	}
	/* placed: only into the very receive its credit stands for (the
	 * cell is peer-written; our own record decides) */
	if ((h->flags & UDF_PLACED) &&
	    (!ud || qp->srq ||
	     u->rq_credit[u->rq_tail & (u->rq_size - 1)] != h->credit)) {
		count_drop(u->q, UD_DROP_OTHER);
		return_credit(u);
		return;
	}
	/* a UC write's LAST packet, its receive found: placed now */
	if ((h->flags & UDF_WRITE_TAIL) &&
	    (ud || !(h->flags & UDF_WRITE_IMM) || uc_tail(qp, h, first))) {
		count_drop(u->q, UD_DROP_OTHER);
		return_credit(u);
		return;
	}
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = r->wr_id;
	wc.qp_num = qp->qpx.qp_base.qp_num;
	wc.opcode = (h->flags & UDF_WRITE_IMM) ? IBV_WC_RECV_RDMA_WITH_IMM
					       : IBV_WC_RECV;
	if (h->flags & UDF_IMM) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = h->imm;
	}
	if (ud) {
		if (!(h->flags & UDF_PLACED) && !nogrh) /* else in the buffer */
			build_grh(grh, h);
		wc.src_qp = h->src_qpn & 0xffffff;
		if (soft_link_ib) {
			/* the LRH's: the sender's port LID (one of this
			 * host's, or the one its address has: net.c), its
			 * AV's SL; LMC 0, so no path bits */
			wc.slid = h->slid;
			wc.sl = h->sl & 0xf;
			wc.dlid_path_bits = 0;
		} else {
			wc.sl = roce_pkt_type(h);
		}
		if (!nogrh)
			wc.wc_flags |= IBV_WC_GRH;
		wc.pkey_index = 0;
		/* the GRH area counts, with a GRH or without (IPoIB takes
		 * 40 bytes off every receive's byte_len) */
		wc.byte_len = UD_GRH + h->msg_len;
	} else {
		wc.byte_len =
			(h->flags & UDF_WRITE_IMM) ? h->write_len : h->msg_len;
	}
	if (h->flags & UDF_PLACED) {
		wc.status = IBV_WC_SUCCESS;
		u->placed++;
	} else {
		wc.status = scatter(qp, r, ud ? UD_GRH : 0,
				    ud && !nogrh ? grh : NULL, h, first);
	}
	consume_rwqe(qp);
	soft_cq_push(qp->rcq, &wc, !!(h->flags & UDF_SOLICITED));
	if (wc.status != IBV_WC_SUCCESS)
		soft_qp_to_error(qp);
	else
		u->received++;
}

/* drain_queue -- take what peers appended to our queue; lock held (and
 * the SRQ's, if any) */
static void drain_queue(struct soft_qp *qp)
{
	struct soft_ud *u = qp->ud;
	struct ud_qhdr *q = u->q;
	struct ud_cell h;
	uint64_t tail;
	int budget = UD_DRAIN_BUDGET;

	tail = atomic_load_explicit(&q->tail, memory_order_acquire);
	if (tail - u->head > u->nslots) {
		/* a peer wrote nonsense: throw the queue away */
		count_drop(q, UD_DROP_OTHER);
		u->head = tail;
		atomic_store_explicit(&q->head, u->head, memory_order_release);
		return;
	}
	while (u->head != tail && budget--) {
		uint32_t n;

		memcpy(&h, cell_at(u->cells, u->nslots, u->head), sizeof(h));
		n = h.msg_len ? (h.msg_len - 1) / SOFT_UD_MTU + 1 : 1;
		if (h.ncells != n || n > tail - u->head ||
		    (qp->type == IBV_QPT_UD && n != 1)) {
			count_drop(q, UD_DROP_OTHER);
			u->head = tail;
			atomic_store_explicit(&q->head, u->head,
					      memory_order_release);
			return;
		}
		deliver(qp, &h, u->head);
		u->head += n;
		atomic_store_explicit(&q->head, u->head, memory_order_release);
	}
}

/*
 * drain -- drain_queue; lock held.  On an SRQ, with the SRQ's lock, as
 * an RC QP's responder (rx_qp) and an initiator serving one take its
 * WQEs: each WQE goes to one message.  While an initiator holds it the
 * queue waits for the next pass (UD/UC QPs are visited at every pass).
 */
static void drain(struct soft_qp *qp)
{
	if (qp->srq && soft_srq_hold(qp->srq))
		return;
	drain_queue(qp);
	if (qp->srq)
		soft_srq_release(qp->srq);
}

/* ud_progress -- drain the inbound queue, flush in ERR; lock held */
static void ud_progress(struct soft_qp *qp)
{
	struct soft_ud *u = qp->ud;

	if (u->pend_head != u->pend_tail)
		pend_run(qp);
	if (atomic_load_explicit(&u->q->tail, memory_order_relaxed) != u->head)
		drain(qp);
	if (qp->state == IBV_QPS_ERR && u->rq_tail != u->rq_head)
		flush_rq(qp);
}

/* rd_publish -- the receive that credit c stands for, for its senders
 * (released before the credit is: q->posted) */
static void rd_publish(struct soft_ud *u, uint64_t c, const struct ibv_sge *sge)
{
	struct ud_rdesc *d = &u->rd[c & (u->rd_n - 1)];

	d->addr = sge->addr;
	d->length = sge->length;
	d->lkey = sge->lkey;
	atomic_store_explicit(&d->tag, c + 1, memory_order_release);
}

/* ud_post_recv -- ibv_post_recv for UD and UC QPs */
static int ud_post_recv(struct soft_qp *qp, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad)
{
	struct soft_ud *u = qp->ud;
	struct soft_rwqe *r;
	int ret = 0;

	soft_lock(&qp->ctx->lock);
	if (qp->srq || qp->state == IBV_QPS_RESET) {
		ret = EINVAL;
		*bad = wr;
		goto out;
	}
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 ||
		    (uint32_t)wr->num_sge > qp->cap.max_recv_sge ||
		    (wr->num_sge && !wr->sg_list)) {
			ret = EINVAL;
			*bad = wr;
			break;
		}
		if (u->rq_head - u->rq_tail >= qp->cap.max_recv_wr) {
			ret = ENOMEM;
			*bad = wr;
			break;
		}
		r = &u->rq[u->rq_head & (u->rq_size - 1)];
		r->wr_id = wr->wr_id;
		r->num_sge = (uint32_t)wr->num_sge;
		memcpy(r->sge, wr->sg_list,
		       (size_t)wr->num_sge * sizeof(*wr->sg_list));
		u->rq_credit[u->rq_head & (u->rq_size - 1)] = u->posted;
		if (u->rd_n && wr->num_sge == 1)
			rd_publish(u, u->posted, wr->sg_list);
		u->rq_head++;
		u->posted++;
	}
	atomic_store_explicit(&u->q->posted, u->posted, memory_order_release);
	if (qp->state == IBV_QPS_ERR)
		flush_rq(qp);
out:
	soft_unlock(&qp->ctx->lock);
	return ret;
}

/*
 * soft_ud_peer -- the queue of QP qpn of the given type, when it exists and
 * receives; mapped once and cached per sending QP.  Its registry entry is
 * read without the registry lock, as the RC path does.
 */
struct ud_peer *soft_ud_peer(struct soft_ud *u, uint32_t qpn, uint32_t type,
			     uint32_t *ctx_idx)
{
	struct soft_reg_qp *e = &soft_reg->qp[qpn & (SOFT_MAX_QP - 1)];
	const struct ud_trailer *t;
	struct ud_qhdr *q;
	struct ud_peer *p;
	void *map;
	size_t len;
	uint64_t off, room;
	uint32_t ns, rd_n;
	int i;

	if (!qpn || qpn > 0xffffff || e->qpn != qpn || e->qp_type != type ||
	    !qp_receives((enum ibv_qp_state)atomic_load(&e->state)))
		return NULL;
	*ctx_idx = e->ctx_idx;
	for (i = 0; i < UD_NPEER; i++) {
		p = &u->peer[i];
		if (p->map && p->qpn == qpn && p->pid == e->pid &&
		    p->start == e->start)
			return p;
	}
	map = soft_seg_map(qpn, &len);
	if (!map)
		return NULL;
	if (len < SOFT_SEG_HDR + UD_QHDR + UD_TRAILER)
		goto bad;
	t = (const struct ud_trailer *)((char *)map + len - UD_TRAILER);
	off = t->off;
	if (t->magic != UD_TMAGIC || off < SOFT_SEG_HDR ||
	    off > len - UD_TRAILER - UD_QHDR)
		goto bad;
	q = (struct ud_qhdr *)((char *)map + off);
	ns = q->nslots;
	rd_n = q->rd_n;
	room = len - UD_TRAILER - UD_QHDR - off;
	if (q->magic != UD_QMAGIC || q->qpn != qpn || !ns ||
	    ns > UD_MAX_SLOTS || (ns & (ns - 1)) ||
	    (uint64_t)ns * UD_CELL > room || (rd_n & (rd_n - 1)) ||
	    rd_n > 2 * SOFT_MAX_QP_WR ||
	    (uint64_t)rd_n * sizeof(struct ud_rdesc) >
		    room - (uint64_t)ns * UD_CELL)
		goto bad;
	p = &u->peer[u->victim++ % UD_NPEER];
	peer_unmap(p);
	p->qpn = qpn;
	p->pid = e->pid;
	p->start = e->start;
	p->map = map;
	p->len = len;
	p->q = q;
	p->cells = (uint8_t *)q + UD_QHDR;
	p->nslots = ns;
	p->type = type;
	p->pd_id = e->pd_id;
	p->rd_n = rd_n;
	p->rd = rd_n ? (struct ud_rdesc *)(p->cells + (size_t)ns * UD_CELL)
		     : NULL;
	return p;
bad:
	munmap(map, len);
	return NULL;
}

/* copy_in -- gather len bytes from iov (cursor *k / *ko) to dst */
static void copy_in(uint8_t *dst, size_t len, const struct iovec *iov, int niov,
		    int *k, size_t *ko)
{
	while (len && *k < niov) {
		size_t c = iov[*k].iov_len - *ko;

		if (c > len)
			c = len;
		memcpy(dst, (const char *)iov[*k].iov_base + *ko, c);
		dst += c;
		len -= c;
		*ko += c;
		if (*ko == iov[*k].iov_len) {
			(*k)++;
			*ko = 0;
		}
	}
}

/* wake -- poke the receiving context when one of its CQs is armed */
static void wake(uint32_t ctx_idx)
{
	if (ctx_idx >= SOFT_MAX_CTX)
		return;
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&soft_reg->ctx[ctx_idx].armed,
				 memory_order_relaxed))
		soft_wake_ctx(ctx_idx);
}

/*
 * place -- GRH and datagram straight into the buffer of the receive that
 * credit c of UD peer p stands for (its queue lock held): when its
 * descriptor is current, the lkey's registry entry (checked under its
 * stripe lock, held through the copy) is a plain MR of the QP's process
 * and PD with local write covering the buffer, which is large enough,
 * and its file is mapped here.  1 when placed; 0: the queue's copy (the
 * receiver then reports whatever is wrong, as it does today).
 */
static int place(struct soft_ud_src *src, struct ud_peer *p,
		 const struct ud_cell *h, const struct iovec *iov, int niov,
		 uint64_t c)
{
	const struct ud_rdesc *d = &p->rd[c & (p->rd_n - 1)];
	uint64_t need = UD_GRH + (uint64_t)h->msg_len, addr;
	uint32_t lkey, slot;
	pthread_mutex_t *lk;
	struct soft_reg_mr e;
	size_t ko = 0;
	uint8_t *dst;
	int k = 0;

	if (atomic_load_explicit(&d->tag, memory_order_acquire) != c + 1)
		return 0;
	addr = d->addr;
	lkey = d->lkey;
	if (d->length < need || !lkey)
		return 0;
	slot = soft_key_slot(lkey);
	lk = &soft_reg->key_lock[slot % SOFT_NSTRIPES];
	soft_stripe_lock(lk);
	e = soft_reg->mr[slot];
	if (e.key != lkey || e.kind != SOFT_KEY_MR || e.pid != p->pid ||
	    e.start != p->start || e.pd_id != p->pd_id ||
	    !(e.access & IBV_ACCESS_LOCAL_WRITE) || addr < e.addr ||
	    addr - e.addr > e.len || need > e.len - (addr - e.addr))
		goto no;
	dst = soft_map_get(src->ctx, &e);
	if (!dst)
		goto no;
	dst += addr - e.addr;
	/* LID-routed (IB mode): no GRH, its area is left alone */
	if (!(h->flags & UDF_NOGRH)) {
		if (!src->grh_built) { /* the same for every group member */
			build_grh(src->grh, h);
			src->grh_built = 1;
		}
		memcpy(dst, src->grh, UD_GRH);
	}
	copy_in(dst + UD_GRH, h->msg_len, iov, niov, &k, &ko);
	pthread_mutex_unlock(lk);
	return 1;
no:
	pthread_mutex_unlock(lk);
	return 0;
}

/*
 * soft_ud_enqueue -- append one message to a peer's queue; dropped (and
 * counted there) when its Q_Key is not the receiver's (UD), it needs a
 * receive and none is free, or does not fit.  With src (the sender's
 * context, its lock held), a datagram goes straight into the receive's
 * buffer where place() can, its cell carrying only the header.  With
 * may_wait, a message that holds a receive credit but finds the queue
 * full is not dropped: EAGAIN, the sender keeps it and tries again (the
 * receiver is draining; a NIC would be placing it).  Only a message
 * accepted wakes the receiver.
 */
int soft_ud_enqueue(struct ud_peer *p, struct ud_cell *h,
		    const struct iovec *iov, int niov, uint32_t ctx_idx,
		    int may_wait, struct soft_ud_src *src)
{
	struct ud_qhdr *q = p->q;
	uint32_t n = h->msg_len ? (h->msg_len - 1) / SOFT_UD_MTU + 1 : 1, i;
	uint64_t tail, head, acc;
	size_t ko = 0, left = h->msg_len;
	int k = 0, r, ret = 0;

	h->ncells = n;
	r = q_lock(q, 100);
	if (r) {
		if (may_wait)
			return EAGAIN;
		/* the port is jammed: the datagram is lost */
		count_drop(q, UD_DROP_FULL);
		return 0;
	}
	tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
	head = atomic_load_explicit(&q->head, memory_order_acquire);
	acc = atomic_load_explicit(&q->accepted, memory_order_relaxed);
	if (p->type == IBV_QPT_UD &&
	    h->qkey != atomic_load_explicit(&q->qkey, memory_order_relaxed)) {
		count_drop(q, UD_DROP_QKEY);
		goto out;
	}
	if (tail - head > p->nslots || n > p->nslots) {
		count_drop(q, UD_DROP_FULL);
		goto out;
	}
	if (!q->srq &&
	    (int64_t)(atomic_load_explicit(&q->posted, memory_order_acquire) -
		      acc) <= 0) {
		count_drop(q, UD_DROP_NORECV);
		goto out;
	}
	if (p->nslots - (tail - head) < n) {
		if (may_wait)
			ret = EAGAIN;
		else
			count_drop(q, UD_DROP_FULL);
		goto out;
	}
	if (q->srq) /* its receive is found later, by the receiver */
		h->arrived_us = soft_now_us();
	if (src && p->rd_n && !q->srq && place(src, p, h, iov, niov, acc)) {
		h->flags |= UDF_PLACED;
		h->credit = acc;
		memcpy(cell_at(p->cells, p->nslots, tail), h, sizeof(*h));
		h->flags &= ~(uint32_t)UDF_PLACED; /* the next member's own */
		goto publish;
	}
	for (i = 0; i < n; i++) {
		uint8_t *c = cell_at(p->cells, p->nslots, tail + i);
		size_t part = left > SOFT_UD_MTU ? SOFT_UD_MTU : left;

		if (!i)
			memcpy(c, h, sizeof(*h));
		copy_in(c + UD_CELL_HDR, part, iov, niov, &k, &ko);
		left -= part;
	}
publish:
	/* the lock makes us the only writer of accepted: no locked add,
	 * which would wait for the copy's stores */
	atomic_store_explicit(&q->accepted, acc + 1, memory_order_relaxed);
	atomic_store_explicit(&q->tail, tail + n, memory_order_release);
	pthread_mutex_unlock(&q->lock);
	wake(ctx_idx);
	return 0;
out:
	/* nothing for the receiver to complete: no event, as on an HCA */
	pthread_mutex_unlock(&q->lock);
	return ret;
}

void soft_ud_net_input(struct soft_qp *qp, const struct soft_net_ud *d)
{
	struct soft_ud *u = qp->ud;
	struct ud_peer self;
	struct ud_cell h;
	struct iovec iov;

	if (!u || d->len > SOFT_UD_MTU)
		return;
	memset(&h, 0, sizeof(h));
	h.src_qpn = d->qpn & 0xffffff;
	h.qkey = d->qkey;
	h.msg_len = d->len;
	if (d->has_imm) {
		h.flags |= UDF_IMM;
		h.imm = d->imm;
	}
	if (d->solicited)
		h.flags |= UDF_SOLICITED;
	h.tclass = d->tclass;
	h.hop_limit = d->hop_limit;
	h.flow_label = d->flow_label;
	memcpy(h.sgid, d->sgid, 16);
	memcpy(h.dgid, d->dgid, 16);
	h.slid = d->slid; /* IB mode: net.c read them (else 0) */
	h.sl = d->sl;
	if (d->no_grh)
		h.flags |= UDF_NOGRH;
	memset(&self, 0, sizeof(self));
	self.qpn = qp->qpx.qp_base.qp_num;
	self.q = u->q;
	self.cells = u->cells;
	self.nslots = u->nslots;
	self.type = IBV_QPT_UD;
	iov.iov_base = (void *)(uintptr_t)d->data;
	iov.iov_len = d->len;
	(void)soft_ud_enqueue(&self, &h, &iov, 1, (uint32_t)qp->ctx->reg_idx, 0,
			      NULL);
}

/*
 * uc_write -- UC RDMA WRITE into the memory of target QP dqpn (entry t);
 * 0 when done.  The rkey names an MR or a memory window (its slot is
 * soft_key_slot's: a window's key carries its tag in the low byte); a
 * type 2 window bound to another QP refuses it (rxe_lookup_mw), and an
 * indirect mkey is not served on UC (its entry describes a layout, not
 * memory): refused, the message dropped, as any rkey violation on UC.
 * The whole len is checked, as the FIRST packet's RETH is; only put
 * bytes at offset at are placed (a message whose LAST packet is dropped
 * places the bytes before it; its LAST packet, the bytes after them).
 */
static int uc_write(struct soft_reg_qp *t, uint32_t dqpn, uint32_t rkey,
		    uint64_t raddr, const struct iovec *liov, int niov,
		    uint64_t len, uint64_t at, uint64_t put)
{
	uint32_t slot = soft_key_slot(rkey);
	pthread_mutex_t *lk = &soft_reg->key_lock[slot % SOFT_NSTRIPES];
	struct soft_reg_mr *m = &soft_reg->mr[slot];
	struct iovec riov;
	int ret = -1;

	if (!(atomic_load(&t->access) & IBV_ACCESS_REMOTE_WRITE))
		return -1;
	if (!len) /* R_Key and VA of a zero-length WRITE: unchecked (C9-88) */
		return 0;
	soft_stripe_lock(lk);
	if (rkey && m->key == rkey && m->kind != SOFT_KEY_UMR &&
	    (!m->qpn || m->qpn == dqpn) && m->pid == t->pid &&
	    m->pd_id == t->pd_id && (m->access & IBV_ACCESS_REMOTE_WRITE) &&
	    raddr >= m->addr && raddr - m->addr <= m->len &&
	    len <= m->len - (raddr - m->addr)) {
		riov.iov_base =
			(void *)(uintptr_t)(m->va + (raddr - m->addr) + at);
		riov.iov_len = put;
		if (!put || process_vm_writev(t->pid, liov, (unsigned long)niov,
					      &riov, 1, 0) == (ssize_t)put)
			ret = 0;
	}
	pthread_mutex_unlock(lk);
	return ret;
}

/*
 * uc_tail -- the LAST packet's bytes of a UC WRITE_WITH_IMM to qp, which
 * is on an SRQ (uc_send_tail), placed now that its receive is found: at
 * raddr + write_off, the rkey checked over the whole write again, as
 * the sender checked it (the region may have gone since); 0, or -1 when
 * refused (the message is dropped, its receive not taken)
 */
static int uc_tail(struct soft_qp *qp, const struct ud_cell *h, uint64_t first)
{
	struct soft_ud *u = qp->ud;
	uint32_t qpn = qp->qpx.qp_base.qp_num;
	struct soft_reg_qp e;
	struct iovec src;

	if (h->msg_len > SOFT_UD_MTU || h->write_off > h->write_len ||
	    h->msg_len != h->write_len - h->write_off ||
	    soft_reg_qp_lookup(qpn, &e) < 0)
		return -1;
	src.iov_base = cell_at(u->cells, u->nslots, first) + UD_CELL_HDR;
	src.iov_len = h->msg_len;
	return uc_write(&e, qpn, h->rkey, h->raddr, &src, 1, h->write_len,
			h->write_off, h->msg_len);
}

/*
 * uc_no_recv -- a UC WRITE_WITH_IMM towards p finds no receive posted.
 * rxe's check_resource wants a receive WQE for the packet that carries
 * the immediate (RXE_RWR_MASK: the ONLY or LAST one); without one the
 * UC message is dropped (RESPST_ERR_RNR, class D): that packet's data
 * is not placed, nothing completes, the QP stays in RTS.  The FIRST and
 * MIDDLE packets before it need none and were placed.  Decided by the
 * receiver when an SRQ feeds it (uc_tail), before that packet is placed.
 */
static int uc_no_recv(const struct ud_peer *p)
{
	struct ud_qhdr *q = p->q;

	return !q->srq &&
	       (int64_t)(atomic_load_explicit(&q->posted,
					      memory_order_acquire) -
			 atomic_load_explicit(&q->accepted,
					      memory_order_relaxed)) <= 0;
}

/* uc_first_bytes -- what the packets before the LAST of a len-byte
 * WRITE carry at qp's path MTU (0: one packet) */
static uint64_t uc_first_bytes(const struct soft_qp *qp, uint64_t len)
{
	uint32_t mtu = roce_mtu_bytes(qp->attr.path_mtu);

	if (!mtu || len <= mtu)
		return 0;
	return (len - 1) / mtu * mtu;
}

/*
 * uc_send_tail -- a WRITE_WITH_IMM of len (h->write_len) bytes to a QP
 * on an SRQ, its first put bytes placed: the rest, its LAST packet's,
 * goes in the queue for the receiver to place when it takes the SRQ's
 * receive (uc_tail), so a message that finds none places nothing of that
 * packet, as rxe's check_resource looks for the receive before the
 * packet's data is written
 */
static void __attribute__((noinline))
uc_send_tail(struct ud_peer *p, struct ud_cell *h, struct ibv_send_wr *wr,
	     const struct iovec *iov, int niov, uint64_t put, uint32_t ctx_idx)
{
	struct iovec rest[SOFT_MAX_SGE];
	uint64_t skip = put;
	int i, n = 0;

	for (i = 0; i < niov && n < SOFT_MAX_SGE; i++) {
		if (skip >= iov[i].iov_len) {
			skip -= iov[i].iov_len;
			continue;
		}
		rest[n].iov_base = (char *)iov[i].iov_base + skip;
		rest[n++].iov_len = iov[i].iov_len - skip;
		skip = 0;
	}
	h->flags |= UDF_WRITE_TAIL;
	h->msg_len = h->write_len - (uint32_t)put;
	h->write_off = (uint32_t)put;
	h->raddr = wr->wr.rdma.remote_addr;
	h->rkey = wr->wr.rdma.rkey;
	soft_ud_enqueue(p, h, rest, n, ctx_idx, 0, NULL);
}

/*
 * uc_send -- a UC request towards the connected peer.  No ACK, no RNR,
 * no waiting: a message that finds no receive posted, or no room in the
 * peer's inbound queue, is dropped and counted; the send completes.
 */
static void uc_send(struct soft_qp *qp, struct ibv_send_wr *wr,
		    struct ud_cell *h, const struct iovec *iov, int niov,
		    uint64_t len)
{
	uint32_t dqpn = qp->attr.dest_qp_num, ctx_idx;
	struct soft_reg_qp e;
	struct ud_peer *p = NULL;

	/* no UC between hosts: a path to another host's GID reaches no QP
	 * of this one, whatever its number (its packets leave the host) */
	if (soft_ah_local(&qp->attr.ah_attr))
		p = soft_ud_peer(qp->ud, dqpn, IBV_QPT_UC, &ctx_idx);
	if (!p) {
		qp->ud->lost++;
		return;
	}
	if (wr->opcode == IBV_WR_RDMA_WRITE ||
	    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
		uint64_t put = len;
		int imm = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
		int norecv = imm && uc_no_recv(p);
		/* an SRQ's receive is the receiver's to find: the LAST
		 * packet's bytes go with the message (uc_tail) */
		int tail = imm && !norecv && p->q->srq;

		if (norecv || tail)
			put = uc_first_bytes(qp, len);
		if (tail && len - put > SOFT_UD_MTU)
			tail = 0, put = len; /* no path MTU: placed now */
		/* one packet: no receive is found before its rkey is read */
		if ((!(norecv || tail) || put) &&
		    (soft_reg_qp_lookup(dqpn, &e) < 0 ||
		     uc_write(&e, dqpn, wr->wr.rdma.rkey,
			      wr->wr.rdma.remote_addr, iov, niov, len, 0,
			      put))) {
			count_drop(p->q, UD_DROP_OTHER);
			return;
		}
		if (norecv) {
			count_drop(p->q, UD_DROP_NORECV);
			return;
		}
		if (wr->opcode == IBV_WR_RDMA_WRITE)
			return;
		h->flags |= UDF_WRITE_IMM;
		h->write_len = (uint32_t)len;
		h->msg_len = 0;
		if (tail)
			uc_send_tail(p, h, wr, iov, niov, put, ctx_idx);
		else
			soft_ud_enqueue(p, h, iov, 0, ctx_idx, 0, NULL);
		return;
	}
	soft_ud_enqueue(p, h, iov, niov, ctx_idx, 0, NULL);
}

/* pend_free -- release a pending WR's inline copy */
static void pend_free(struct ud_pend *e)
{
	free(e->inl);
	e->inl = NULL;
}

/*
 * pend_add -- keep a WR posted while the QP is in SQD (it runs, in
 * order, when the QP leaves SQD); inline data is copied now
 */
static void pend_add(struct soft_qp *qp, struct ibv_send_wr *wr,
		     const struct iovec *iov, uint64_t len,
		     const struct ud_cell *h)
{
	struct soft_ud *u = qp->ud;
	struct ud_pend *e = &u->pend[u->pend_tail & (u->pend_size - 1)];
	int i;

	memset(e, 0, sizeof(*e));
	e->wr_id = wr->wr_id;
	e->opcode = wr->opcode;
	e->signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	e->len = len;
	e->h = *h;
	e->rkey = wr->wr.rdma.rkey;
	e->raddr = wr->wr.rdma.remote_addr;
	if (qp->type == IBV_QPT_UD) {
		e->av = *soft_ah_attr(wr->wr.ud.ah);
		e->remote_qpn = wr->wr.ud.remote_qpn;
		e->remote_qkey = wr->wr.ud.remote_qkey;
	}
	if (wr->opcode == IBV_WR_BIND_MW) {
		e->mw = wr->bind_mw.mw;
		e->mw_rkey = wr->bind_mw.rkey;
		e->bind = wr->bind_mw.bind_info;
	}
	e->imm = wr->imm_data;
	e->niov = wr->num_sge;
	for (i = 0; i < wr->num_sge; i++)
		e->iov[i] = iov[i];
	if ((wr->send_flags & IBV_SEND_INLINE) && len) {
		size_t o = 0;

		e->inl = malloc(len);
		if (e->inl) {
			for (i = 0; i < wr->num_sge; i++) {
				memcpy(e->inl + o, iov[i].iov_base,
				       iov[i].iov_len);
				o += iov[i].iov_len;
			}
			e->niov = 1;
			e->iov[0].iov_base = e->inl;
			e->iov[0].iov_len = len;
		}
	}
	u->pend_tail++;
	qp->ctx->outstanding++; /* the progress thread polls while armed */
}

static void complete_send(struct soft_qp *qp, uint64_t wr_id,
			  enum ibv_wr_opcode op, uint64_t len, int signaled,
			  enum ibv_wc_status st);

/* pend_run -- retry the waiting UC WRs in order; lock held */
static void pend_run(struct soft_qp *qp)
{
	struct soft_ud *u = qp->ud;
	struct ibv_send_wr wr;
	struct ud_pend *e;
	int r;

	/* rxe: the requester takes no new WQE while draining or drained */
	if (qp->state == IBV_QPS_SQD)
		return;
	while (u->pend_head != u->pend_tail) {
		e = &u->pend[u->pend_head & (u->pend_size - 1)];
		if (e->st != IBV_WC_SUCCESS) {
			/* a WR that failed its local checks: flushed if
			 * the QP went to ERR before it ran */
			r = qp->state == IBV_QPS_ERR ? IBV_WC_WR_FLUSH_ERR
						     : e->st;
		} else if (qp->state == IBV_QPS_ERR ||
			   qp->state == IBV_QPS_SQE) {
			r = IBV_WC_WR_FLUSH_ERR;
		} else {
			memset(&wr, 0, sizeof(wr));
			wr.opcode = e->opcode;
			wr.imm_data = e->imm;
			wr.num_sge = e->niov;
			r = IBV_WC_SUCCESS;
			if (e->opcode == IBV_WR_BIND_MW) {
				wr.bind_mw.mw = e->mw;
				wr.bind_mw.rkey = e->mw_rkey;
				wr.bind_mw.bind_info = e->bind;
				r = soft_mw_local_op(qp, &wr);
			} else if (qp->type == IBV_QPT_UD) {
				ud_send(qp, &e->av, e->remote_qpn,
					e->remote_qkey, e->niov, &e->h, e->iov);
			} else {
				wr.wr.rdma.rkey = e->rkey;
				wr.wr.rdma.remote_addr = e->raddr;
				uc_send(qp, &wr, &e->h, e->iov, e->niov,
					e->len);
			}
		}
		pend_free(e);
		u->pend_head++;
		qp->ctx->outstanding--;
		complete_send(qp, e->wr_id, e->opcode, e->len,
			      e->signaled || r != IBV_WC_SUCCESS,
			      (enum ibv_wc_status)r);
	}
}

/* pend_drop -- RESET: forget the waiting WRs without completions */
static void pend_drop(struct soft_qp *qp)
{
	struct soft_ud *u = qp->ud;

	while (u->pend_head != u->pend_tail) {
		pend_free(&u->pend[u->pend_head & (u->pend_size - 1)]);
		u->pend_head++;
		qp->ctx->outstanding--;
	}
}

/* ud_sq_room -- send WRs the queue takes now; lock held */
static inline uint32_t ud_sq_room(struct soft_qp *qp)
{
	return soft_sq_room(qp, qp->ud->pend_tail - qp->ud->pend_head);
}

/* check_wr -- what makes ibv_post_send fail at once (n: WRs before) */
static int check_wr(struct soft_qp *qp, struct ibv_send_wr *wr, uint32_t n,
		    uint64_t *len)
{
	uint64_t total = 0;
	int i;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge ||
	    (wr->num_sge && !wr->sg_list))
		return EINVAL;
	if (ud_sq_room(qp) <= n)
		return ENOMEM;
	for (i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if ((wr->send_flags & IBV_SEND_INLINE) &&
	    total > qp->cap.max_inline_data)
		return EINVAL;
	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		break;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		if (qp->type == IBV_QPT_UC)
			break;
		return EINVAL;
	case IBV_WR_BIND_MW:
		/* rxe binds a window through an RC or a UC QP (its
		 * provider: no SGE on a bind) */
		if (qp->type == IBV_QPT_UC && !wr->num_sge &&
		    !soft_mw_check_wr(qp, wr))
			break;
		return EINVAL;
	default: /* READ and atomics need a reliable transport */
		return EINVAL;
	}
	if (qp->type == IBV_QPT_UD && !wr->wr.ud.ah)
		return EINVAL;
	*len = total;
	return 0;
}

/* fill_hdr -- the message header common to UD and UC */
static void fill_hdr(struct soft_qp *qp, struct ibv_send_wr *wr,
		     struct ud_cell *h, uint64_t len)
{
	memset(h, 0, sizeof(*h));
	h->src_qpn = qp->qpx.qp_base.qp_num;
	h->msg_len = (uint32_t)len;
	h->imm = wr->imm_data;
	if (wr->opcode == IBV_WR_SEND_WITH_IMM ||
	    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		h->flags |= UDF_IMM;
	if (wr->send_flags & IBV_SEND_SOLICITED)
		h->flags |= UDF_SOLICITED;
}

/* complete_send -- the send CQE (errors always); an error errs the QP */
static void complete_send(struct soft_qp *qp, uint64_t wr_id,
			  enum ibv_wr_opcode op, uint64_t len, int signaled,
			  enum ibv_wc_status st)
{
	struct ibv_wc wc;

	if (st != IBV_WC_SUCCESS || signaled) {
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = wr_id;
		wc.status = st;
		wc.opcode = op == IBV_WR_BIND_MW ? IBV_WC_BIND_MW
			    : (op == IBV_WR_RDMA_WRITE ||
			       op == IBV_WR_RDMA_WRITE_WITH_IMM)
				    ? IBV_WC_RDMA_WRITE
				    : IBV_WC_SEND;
		wc.byte_len = (uint32_t)len;
		wc.qp_num = qp->qpx.qp_base.qp_num;
		soft_cq_push(qp->scq, &wc, 0);
	}
	if (st != IBV_WC_SUCCESS && st != IBV_WC_WR_FLUSH_ERR)
		soft_qp_to_error(qp);
}

/* ud_net_send -- a datagram to another host (or group) through net.c;
 * 0 when it went out */
static int ud_net_send(struct soft_qp *qp, const struct ud_cell *h,
		       uint32_t dqpn, const struct iovec *iov, int niov)
{
	struct soft_net_ud d;

	memset(&d, 0, sizeof(d));
	memcpy(d.sgid, h->sgid, 16);
	memcpy(d.dgid, h->dgid, 16);
	d.qpn = dqpn;
	d.qkey = h->qkey;
	d.has_imm = !!(h->flags & UDF_IMM);
	d.imm = h->imm;
	d.solicited = !!(h->flags & UDF_SOLICITED);
	d.tclass = h->tclass;
	d.hop_limit = h->hop_limit;
	d.flow_label = h->flow_label;
	d.sl = h->sl;
	d.no_grh = !!(h->flags & UDF_NOGRH);
	d.len = h->msg_len;
	return soft_net_ud_send(qp, &d, iov, niov);
}

/*
 * lid_send -- IB mode: a datagram through a LID-routed AV (no GRH) to
 * the port its DLID names: one of this host's (its queue), else through
 * the QP's port's rail to the address the DLID has (iblink.c,
 * SOFTRDMA_NET=1); lost when neither, as on a subnet with no route to
 * the DLID.  A UD QP takes what comes to any port of its device, as a
 * datagram to a global AV.
 */
static void lid_send(struct soft_qp *qp, const struct ibv_ah_attr *av,
		     uint32_t rqpn, int niov, struct ud_cell *h,
		     const struct iovec *iov)
{
	static const uint8_t v4m[12] = {0, 0, 0, 0, 0,	  0,
					0, 0, 0, 0, 0xff, 0xff};
	struct soft_ud_src src = {.ctx = qp->ctx};
	struct ud_peer *p;
	uint32_t ctx_idx, a;

	h->flags |= UDF_NOGRH;
	h->flow_label = 0; /* no GRH: nothing of av->grh goes */
	h->tclass = 0;
	h->hop_limit = 0;
	memset(h->sgid, 0, 16);
	memset(h->dgid, 0, 16);
	if (soft_lid_port(av->dlid)) {
		p = soft_ud_peer(qp->ud, rqpn, IBV_QPT_UD, &ctx_idx);
		if (p) {
			soft_ud_enqueue(p, h, iov, niov, ctx_idx, 0, &src);
			return;
		}
	} else if (!soft_ib_lid_addr(qp->attr.port_num, av->dlid, &a)) {
		memcpy(h->dgid, v4m, 12);
		memcpy(h->dgid + 12, &a, 4);
		if (!ud_net_send(qp, h, rqpn, iov, niov))
			return;
	}
	qp->ud->lost++;
}

/* ud_send -- a UD datagram to the address av, QP rqpn with Q_Key rqkey:
 * unicast, multicast, or lost (another host) */
static void ud_send(struct soft_qp *qp, const struct ibv_ah_attr *av,
		    uint32_t rqpn, uint32_t rqkey, int niov, struct ud_cell *h,
		    const struct iovec *iov)
{
	struct soft_ud_src src = {.ctx = qp->ctx};
	union ibv_gid sgid;
	struct ud_peer *p;
	uint32_t ctx_idx, n;

	h->qkey = (rqkey & 0x80000000u) ? qp->attr.qkey : rqkey;
	if (soft_link_ib) { /* the LRH's SL and SLID (the QP's port's) */
		h->sl = av->sl & 0xf;
		h->slid = soft_port_lid(qp->attr.port_num);
		if (!av->is_global) {
			lid_send(qp, av, rqpn, niov, h, iov);
			return;
		}
	}
	h->flow_label = av->grh.flow_label;
	h->tclass = av->grh.traffic_class;
	h->hop_limit = av->grh.hop_limit;
	memcpy(h->dgid, av->grh.dgid.raw, 16);
	if (!soft_gid_get(av->port_num ? av->port_num : qp->attr.port_num,
			  av->grh.sgid_index, &sgid))
		memcpy(h->sgid, sgid.raw, 16);
	if (soft_ud_gid_is_mcast(h->dgid)) {
		if (rqpn != UD_MCAST_QPN) {
			qp->ud->lost++;
			return;
		}
		/* this host's members through shm, other hosts' as one
		 * RoCE v2 packet to the group (SOFTRDMA_NET=1) */
		n = soft_mcast_send(qp->ud, qp->ctx, &qp->ud->mc, h->dgid,
				    !!(qp->ud->create_flags &
				       IBV_QP_CREATE_BLOCK_SELF_MCAST_LB),
				    h, iov, niov);
		qp->ud->mc_sent++;
		qp->ud->mc_local += n;
		if (ud_net_send(qp, h, UD_MCAST_QPN, iov, niov) && !n)
			qp->ud->lost++;
	} else if (soft_ah_local(av)) { /* IB mode: a port's GID 0 too */
		p = soft_ud_peer(qp->ud, rqpn, IBV_QPT_UD, &ctx_idx);
		if (p)
			soft_ud_enqueue(p, h, iov, niov, ctx_idx, 0, &src);
		else
			qp->ud->lost++;
	} else {
		/* another host: RoCE v2 through net.c (SOFTRDMA_NET=1) */
		if (ud_net_send(qp, h, rqpn, iov, niov))
			qp->ud->lost++;
	}
}

/* send_one -- execute one WR and complete it (in SQD: later); locked */
static void send_one(struct soft_qp *qp, struct ibv_send_wr *wr, uint64_t len)
{
	struct soft_ud *u = qp->ud;
	struct iovec iov[SOFT_MAX_SGE];
	struct ud_cell h;
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	int i, signaled =
		       qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);

	if (u->pend_head != u->pend_tail)
		pend_run(qp);
	if (qp->state == IBV_QPS_ERR || qp->state == IBV_QPS_SQE) {
		st = IBV_WC_WR_FLUSH_ERR;
		goto complete;
	}
	if (wr->opcode == IBV_WR_BIND_MW) { /* UC: mw.c's bind, in order */
		if (qp->state == IBV_QPS_SQD || u->pend_head != u->pend_tail) {
			memset(&h, 0, sizeof(h));
			pend_add(qp, wr, iov, 0, &h);
			return;
		}
		complete_send(qp, wr->wr_id, wr->opcode, 0, signaled,
			      soft_mw_local_op(qp, wr));
		return;
	}
	/* an AH of another PD (a parent domain is its PD): rxe_get_av finds
	 * no AV for the QP, the WR completes with a local QP operation error */
	if (qp->type == IBV_QPT_UD &&
	    soft_container_of(wr->wr.ud.ah, struct soft_ah, ah)->pd->pd_id !=
		    qp->pd->pd_id) {
		st = IBV_WC_LOC_QP_OP_ERR;
		goto complete;
	}
	for (i = 0; i < wr->num_sge; i++) {
		if (wr->send_flags & IBV_SEND_INLINE) {
			iov[i].iov_base =
				(void *)(uintptr_t)wr->sg_list[i].addr;
			iov[i].iov_len = wr->sg_list[i].length;
		} else if (soft_local_sge(qp->pd, &wr->sg_list[i], 0,
					  &iov[i])) {
			st = IBV_WC_LOC_PROT_ERR;
			goto complete;
		}
	}
	if (len > (qp->type == IBV_QPT_UD ? u->mtu : SOFT_MAX_MSG_SZ)) {
		st = IBV_WC_LOC_LEN_ERR;
		goto complete;
	}
	fill_hdr(qp, wr, &h, len);
	if (qp->state == IBV_QPS_SQD || u->pend_head != u->pend_tail) {
		/* posted in SQD: it waits for the QP to leave SQD */
		pend_add(qp, wr, iov, len, &h);
		return;
	}
	if (qp->type == IBV_QPT_UD)
		ud_send(qp, soft_ah_attr(wr->wr.ud.ah), wr->wr.ud.remote_qpn,
			wr->wr.ud.remote_qkey, wr->num_sge, &h, iov);
	else
		uc_send(qp, wr, &h, iov, wr->num_sge, len);
complete:
	if (qp->state == IBV_QPS_SQD || u->pend_head != u->pend_tail) {
		/* keep completions in order behind the held WRs */
		memset(&h, 0, sizeof(h));
		pend_add(qp, wr, iov, 0, &h);
		u->pend[(u->pend_tail - 1) & (u->pend_size - 1)].st = st;
		u->pend[(u->pend_tail - 1) & (u->pend_size - 1)].len = len;
		return;
	}
	complete_send(qp, wr->wr_id, wr->opcode, len, signaled, st);
}

/* ud_post_send -- ibv_post_send for UD and UC QPs */
static int ud_post_send(struct soft_qp *qp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad)
{
	uint64_t len = 0;
	uint32_t n = 0;
	int ret = 0;

	soft_lock(&qp->ctx->lock);
	if (qp->state < IBV_QPS_RTS) {
		ret = EINVAL;
		*bad = wr;
		goto out;
	}
	/* a WR is done when posted, so the SQ holds one post's WRs at most */
	for (; wr; wr = wr->next, n++) {
		ret = check_wr(qp, wr, n, &len);
		if (ret) {
			*bad = wr;
			break;
		}
		send_one(qp, wr, len);
	}
out:
	soft_unlock(&qp->ctx->lock);
	return ret;
}

/* softrdma_qp_drops -- messages for this QP that it dropped (why < 0: all) */
uint64_t softrdma_qp_drops(struct ibv_qp *ibqp, int why)
{
	struct soft_qp *qp;
	uint64_t n = 0;
	int i;

	if (!ibqp)
		return 0;
	qp = to_sqp(ibqp);
	if (!qp->ud)
		return 0;
	if (why == UD_NDROP)
		return qp->ud->lost;
	for (i = 0; i < UD_NDROP; i++)
		if (why < 0 || why == i)
			n += atomic_load(&qp->ud->q->drops[i]);
	return n;
}

/* softrdma_qp_placed -- datagrams a UD QP received straight into its
 * buffers (their senders placed them: no copy out of its queue); SENDs an
 * RC QP placed straight into its responder's buffers (data.c fast_push) */
uint64_t softrdma_qp_placed(struct ibv_qp *ibqp)
{
	struct soft_qp *qp = ibqp ? to_sqp(ibqp) : NULL;

	if (!qp)
		return 0;
	return qp->ud ? qp->ud->placed : qp->pushed;
}

/*
 * ibv_create_ah -- an address handle: a GRH whose sgid_index is a GID of
 * the AH's port (else EINVAL, or ENODATA for an empty entry), or in the
 * IB mode a LID-routed AV (is_global 0) to a unicast DLID.  RoCE needs
 * the GRH (the kernel's rdma_check_ah_attr, mlx5_create_ah: EINVAL).  On
 * IB, mlx5 takes any DLID and checks nothing against the subnet: a DLID
 * no port has is accepted, its datagrams are lost.  DLID 0 (reserved)
 * and a multicast LID without a GRH, which mlx5 would take too, are
 * refused (EINVAL): a group is found by its MGID here, which only a GRH
 * carries; the kernel's multicast users (IPoIB) always give one.
 */
struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct soft_ah *ah;
	int err;

	if (!pd || !attr || !soft_port_ok(attr->port_num) ||
	    (!attr->is_global &&
	     (!soft_link_ib || !attr->dlid || attr->dlid >= 0xc000))) {
		errno = EINVAL;
		return NULL;
	}
	err = attr->is_global
		      ? soft_gid_check(attr->port_num, attr->grh.sgid_index)
		      : 0;
	if (err) {
		errno = -err;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	ah->attr = *attr;
	/* as the kernel's _rdma_create_ah, which takes pd->usecnt */
	ah->pd = to_spd(pd);
	__atomic_add_fetch(&ah->pd->refcnt, 1, __ATOMIC_RELAXED);
	return &ah->ah;
}

/* soft_ah_attr -- what ah was created with (dc.c) */
const struct ibv_ah_attr *soft_ah_attr(struct ibv_ah *ah)
{
	return &soft_container_of(ah, struct soft_ah, ah)->attr;
}

/* ibv_destroy_ah -- free an address handle */
int ibv_destroy_ah(struct ibv_ah *ah)
{
	struct soft_ah *a;

	if (!ah)
		return EINVAL;
	a = soft_container_of(ah, struct soft_ah, ah);
	__atomic_sub_fetch(&a->pd->refcnt, 1, __ATOMIC_RELAXED);
	free(a);
	return 0;
}

/*
 * ibv_init_ah_from_wc -- reply address from a received completion, as
 * rdma-core: the GRH is RoCE v2 IPv4 (IPv4 header in its last 20 bytes)
 * when it is no IPv6 header or the IPv4 checksum holds; a multicast
 * destination has no source GID to answer from (EINVAL).
 */
int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
			struct ibv_wc *wc, struct ibv_grh *grh,
			struct ibv_ah_attr *ah_attr)
{
	const uint8_t *g = (const uint8_t *)grh, *ip;
	union ibv_gid mapped;
	uint32_t vtf;
	int v4, idx;

	if (!context || !wc || !ah_attr || !soft_port_ok(port_num)) {
		errno = EINVAL;
		return -1;
	}
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (!(wc->wc_flags & IBV_WC_GRH))
		return 0;
	if (!grh) {
		errno = EINVAL;
		return -1;
	}
	ah_attr->is_global = 1;
	vtf = be32toh(grh->version_tclass_flow);
	ah_attr->grh.flow_label = vtf & 0xfffff;
	ip = g + 20;
	if ((vtf >> 28) != 6) {
		if ((ip[0] >> 4) != 4) {
			errno = EPROTONOSUPPORT;
			return -1;
		}
		v4 = 1;
	} else if ((ip[0] & 0xf) != 5) {
		v4 = 0;
	} else {
		uint8_t tmp[20];
		uint16_t c;

		memcpy(tmp, ip, 20);
		tmp[10] = tmp[11] = 0;
		c = htons(ip_csum(tmp, 20));
		v4 = !memcmp(&c, ip + 10, 2);
	}
	if (v4) {
		if ((ip[16] & 0xf0) == 0xe0) {
			errno = EINVAL;
			return -1;
		}
		memset(mapped.raw, 0, 10);
		mapped.raw[10] = mapped.raw[11] = 0xff;
		memcpy(mapped.raw + 12, ip + 16, 4);
		idx = soft_gid_index(port_num, &mapped);
		if (idx < 0) {
			errno = ENOENT;
			return -1;
		}
		memset(ah_attr->grh.dgid.raw, 0, 10);
		ah_attr->grh.dgid.raw[10] = ah_attr->grh.dgid.raw[11] = 0xff;
		memcpy(ah_attr->grh.dgid.raw + 12, ip + 12, 4);
		ah_attr->grh.sgid_index = (uint8_t)idx;
		ah_attr->grh.hop_limit = ip[8];
		ah_attr->grh.traffic_class = ip[1];
		return 0;
	}
	if (grh->dgid.raw[0] == 0xff) {
		errno = EINVAL;
		return -1;
	}
	if (grh->next_hdr != 17) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	idx = soft_gid_index(port_num, &grh->dgid);
	if (idx < 0) {
		errno = ENOENT;
		return -1;
	}
	ah_attr->grh.dgid = grh->sgid;
	ah_attr->grh.sgid_index = (uint8_t)idx;
	ah_attr->grh.hop_limit = grh->hop_limit;
	ah_attr->grh.traffic_class = (vtf >> 20) & 0xff;
	return 0;
}

/* ibv_create_ah_from_wc -- ibv_init_ah_from_wc + ibv_create_ah */
struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
				     struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr a;

	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a))
		return NULL;
	return ibv_create_ah(pd, &a);
}

/* ud_ops_flush -- soft_qp_flush of a UD or UC QP: what reached a UD QP
 * from other hosts (net.c), then its own completions; lock held */
static void ud_ops_flush(struct soft_qp *qp)
{
	if (qp->net)
		soft_net_progress(qp); /* issue 12: the network path */
	ud_flush(qp);
}

/* ud_qkey_publish -- the Q_Key senders check datagrams against */
static void ud_qkey_publish(struct soft_qp *qp)
{
	if (qp->ud)
		atomic_store(&qp->ud->q->qkey, qp->attr.qkey);
}

/*
 * ud_port_mtu -- the largest UD payload of the QP's port: its active MTU
 * (rxe's get_mtu for UD: the port's mtu_cap, which follows the netdev's
 * MTU; 4096 on one host and in the IB mode, port.c)
 */
static uint32_t ud_port_mtu(const struct soft_qp *qp)
{
	struct ibv_port_attr pa;

	memset(&pa, 0, sizeof(pa));
	pa.active_mtu = IBV_MTU_4096;
	if (!soft_link_ib)
		(void)soft_port_eth(qp->attr.port_num, &pa);
	if (pa.active_mtu < IBV_MTU_256 || pa.active_mtu > IBV_MTU_4096)
		return SOFT_UD_MTU;
	return 128u << pa.active_mtu;
}

/* ud_to_rtr -- INIT->RTR of a UD QP: it also receives from other hosts;
 * its Q_Key is known before it receives, its port's MTU bounds what it
 * sends */
static void ud_to_rtr(struct soft_qp *qp)
{
	qp->ud->mtu = ud_port_mtu(qp);
	ud_qkey_publish(qp);
	soft_net_ud_attach(qp); /* issue 12: from other hosts */
}

/* ud_modify -- soft_qp_modify, then the Q_Key it may have changed */
static int ud_modify(struct soft_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	int ret = soft_qp_modify(qp, attr, mask);

	if (!ret && (mask & IBV_QP_QKEY)) {
		soft_lock(&qp->ctx->lock);
		ud_qkey_publish(qp);
		soft_unlock(&qp->ctx->lock);
	}
	return ret;
}

/* uc_to_rtr -- INIT->RTR of a UC QP: addressed by (GID, QPN), a GID that
 * is not this host's reaches no local QP (no UC between hosts yet) */
static void uc_to_rtr(struct soft_qp *qp)
{
	qp->dest_qpn = qp->attr.dest_qp_num;
	if (soft_ah_local(&qp->attr.ah_attr))
		atomic_store(&qp->seg->dest_qpn, qp->dest_qpn);
	soft_qp_connect(qp);
	if (qp->ctx->serve_rings)
		soft_thread_start_locked(qp->ctx);
}

const struct soft_qp_ops soft_ud_ops = {
	.name = "ud",
	.post_send = ud_post_send,
	.post_recv = ud_post_recv,
	.sq_room = ud_sq_room,
	.progress = ud_progress,
	.flush = ud_ops_flush,
	.sq_release = ud_flush,
	.modify = ud_modify,
	.to_rtr = ud_to_rtr,
	.reset = ud_reset,
	.destroy = ud_destroy,
	.always_pass = 1,
};

const struct soft_qp_ops soft_uc_ops = {
	.name = "uc",
	.post_send = ud_post_send,
	.post_recv = ud_post_recv,
	.sq_room = ud_sq_room,
	.progress = ud_progress,
	.flush = ud_ops_flush,
	.sq_release = ud_flush,
	.modify = soft_qp_modify,
	.to_rtr = uc_to_rtr,
	.reset = ud_reset,
	.destroy = ud_destroy,
	.always_pass = 1,
};
