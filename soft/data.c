/* SPDX-License-Identifier: MIT */
/* data.c -- RC data path: post, shm rings, one-sided ops, progress, poll */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "softrdma.h"
#include "net.h"
#include "ud.h"

/*
 * Protocol.  Each QP owns an outbound segment whose slot i belongs to SQ
 * entry i.  SEND / SEND_WITH_IMM / RDMA_WRITE_WITH_IMM publish a slot
 * (state READY, data copied when it fits in the slot, else into the copy
 * ring when it fits there, else the sender's SGE list for
 * process_vm_readv).  The peer (dest_qp_num) maps the segment at RTR and
 * consumes slots in order from any poll_cq of its context: it takes a
 * receive WQE, marks the slot BUSY, places the data, writes its verdict
 * and commits with BUSY -> DONE; the sender's poll turns DONE into the
 * send completion.  A sender that flushes or times out takes the slot
 * back in any state but DONE (READY/RNR/BUSY -> CANCEL) without waiting;
 * a responder whose commit finds CANCEL drops the message (see
 * cancel_slot).  With no
 * receive posted the responder marks the slot RNR (a NAK carrying its
 * min_rnr_timer); the sender retransmits (back to READY) after that
 * timer, rnr_retry times (7: forever).  RDMA WRITE / READ / atomics run
 * at post time with process_vm_writev/readv after checking the rkey in
 * the host registry.
 *
 * Transport timeout: while sends wait on a peer, the sender checks every
 * SOFT_LIVENESS_NS (10 ms) that the peer QP still exists in a receiving
 * state and that its process lives.  Once it does not, the head WQE fails
 * with IBV_WC_RETRY_EXC_ERR after T = 4.096 us * 2^timeout * (retry_cnt
 * + 1), capped at 1 s (timeout 0, "infinite" in IB, uses the cap), so a
 * dead peer surfaces within T + 10 ms of its death, T + 20 ms when it
 * acknowledged something in the 10 ms before (peer_answered).
 *
 * Where process_vm_* is refused (Yama; SOFTRDMA_TEST_NOVM=1 in tests), a
 * SEND's data, and RDMA WRITE / READ / atomics, go through the slot: the
 * responder turns it BUSY -> XFER and the side holding the data fills the
 * payload one chunk at a time (chunk_seq even: the producer's turn, odd:
 * the consumer's); atomics run in the target process.  See soft/README.md
 * for what is checked in peer-written memory and why.
 */
_Static_assert(SOFT_MAX_SGE == SOFT_SLOT_MAX_SGE, "one SGE limit");
_Static_assert(SOFT_MAX_MSG_SZ == SOFT_SLOT_MAX_MSG, "one message limit");
_Static_assert(sizeof(struct soft_seg_hdr) <= SOFT_SEG_HDR, "segment header");

#ifdef SOFT_TSAN
char soft_tsan_pairs[4096]; /* softrdma.h soft_tsan_pair */
#endif

/*
 * cp_probe -- the latency probe (SOFT_CP_PROBE: soft/libsoftrdma-cp.la,
 * built on demand by tools/rdmamsg_pingpong-insns.sh -c).  Callgrind
 * collects from a poll's first look at a new message (on) to the
 * publication of the next SEND on the fast path (off): the receiver's way
 * from a message to its reply.  A poll that comes first ends it (no
 * reply).  Nothing in any other build.
 */
#ifdef SOFT_CP_PROBE
#include <valgrind/callgrind.h>
static int cp_on;
static inline void cp_probe(int on)
{
	if (cp_on != on) {
		cp_on = on;
		CALLGRIND_TOGGLE_COLLECT;
	}
}
#else
static inline void cp_probe(int on)
{
	(void)on;
}
#endif

/* IB min_rnr_timer encoding, in microseconds x 100 */
static const uint32_t rnr_table[32] = {
	65536, 1,    2,	   3,	 4,    6,     8,     12,    16,	   24,	  32,
	48,    64,   96,   128,	 192,  256,   384,   512,   768,   1024,  1536,
	2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
};

static inline struct soft_slot *slot_at(struct soft_slot *base, uint64_t i,
					uint32_t mask)
{
	return (struct soft_slot *)((char *)base +
				    (size_t)(i & mask) * SOFT_SLOT_SIZE);
}

/*
 * slot_prefetch -- a responder's look at a message in slot s: the lines
 * past its first that LEN bytes of payload take (messages of 41 to 960
 * bytes; an rdmamsg message of 25 bytes on), asked for all at once.  Its
 * initiator has just written them, and their misses then overlap instead
 * of coming one after another in the copy.  LEN is the initiator's, not
 * checked yet: one past the slot asks for nothing.
 */
static inline __attribute__((always_inline)) void slot_prefetch(
	const struct soft_slot *s, uint32_t len)
{
	size_t o = 64, end = offsetof(struct soft_slot, payload) + (size_t)len;

	if (__builtin_expect(end - 65 < SOFT_SLOT_SIZE - 64, 0))
		do
			__builtin_prefetch((const char *)s + o);
		while ((o += 64) < end);
}

/* v16 -- 16 bytes in a vector register (SSE2, in every x86-64), for
 * copy_mid */
typedef uint8_t v16 __attribute__((vector_size(16)));

/*
 * copy_mid -- copy_small's 33 to 128 bytes (a 64-byte message and its
 * header): two or four 16-byte moves from each end, overlapping in the
 * middle, all loads before the stores.  Out of line, but a plain call,
 * not libc's (through the PLT and its dispatch).
 */
static __attribute__((noinline)) void copy_mid(char *d, const char *s, size_t n)
{
	v16 a0, a1, a2, a3, b0, b1, b2, b3;

	if (n <= 64) {
		memcpy(&a0, s, 16);
		memcpy(&a1, s + 16, 16);
		memcpy(&b0, s + n - 32, 16);
		memcpy(&b1, s + n - 16, 16);
		memcpy(d, &a0, 16);
		memcpy(d + 16, &a1, 16);
		memcpy(d + n - 32, &b0, 16);
		memcpy(d + n - 16, &b1, 16);
		return;
	}
	memcpy(&a0, s, 16);
	memcpy(&a1, s + 16, 16);
	memcpy(&a2, s + 32, 16);
	memcpy(&a3, s + 48, 16);
	memcpy(&b0, s + n - 64, 16);
	memcpy(&b1, s + n - 48, 16);
	memcpy(&b2, s + n - 32, 16);
	memcpy(&b3, s + n - 16, 16);
	memcpy(d, &a0, 16);
	memcpy(d + 16, &a1, 16);
	memcpy(d + 32, &a2, 16);
	memcpy(d + 48, &a3, 16);
	memcpy(d + n - 64, &b0, 16);
	memcpy(d + n - 48, &b1, 16);
	memcpy(d + n - 32, &b2, 16);
	memcpy(d + n - 16, &b3, 16);
}

/*
 * copy_small -- memcpy of a message's bytes, the small ones that the
 * slot fast paths carry (8 to 32 bytes: a header and a word) as two
 * overlapping loads and stores each way, no call (a call into libc's
 * memcpy costs about 20 instructions for 8 bytes, twice a message); with
 * MID (a constant) 33 to 128 bytes too, through copy_mid: the receiver's
 * copy and the gather of a header and a message (a sender's single-SGE
 * post goes without, as the call there costs the 8-byte path registers).
 * Every byte read is within src[0, n); src and dst do not overlap.
 */
static inline __attribute__((always_inline)) void copy_small(void *dst,
							     const void *src,
							     size_t n, int mid)
{
	const char *s = src;
	char *d = dst;
	uint64_t a[2], b[2];

	if (n >= 16 && n <= 32) {
		memcpy(a, s, 16);
		memcpy(b, s + n - 16, 16);
		memcpy(d, a, 16);
		memcpy(d + n - 16, b, 16);
	} else if (n >= 8 && n < 16) {
		memcpy(a, s, 8);
		memcpy(b, s + n - 8, 8);
		memcpy(d, a, 8);
		memcpy(d + n - 8, b, 8);
	} else if (mid && n > 32 && n <= 128) {
		copy_mid(d, s, n);
	} else if (n) {
		memcpy(d, s, n);
	}
}

/* peer_srq_map -- the responder QP is on an SRQ: map the SRQ's segment
 * when it is that process's and fits its mapping; else not served, and
 * our messages are not stamped (srq_stamp) */
static inline void peer_wake(struct soft_qp *qp);

static void peer_srq_map(struct soft_qp *qp, uint32_t id,
			 const struct soft_reg_qp *e)
{
	struct soft_srq_hdr *sh;
	size_t len;
	uint32_t n, sge;
	uint64_t stride;

	sh = soft_srq_seg_map(e->ctx_idx, id, &len);
	if (!sh)
		return;
	n = sh->entries;
	sge = sh->sge;
	stride = 8 + 16 * (uint64_t)sge;
	if (sh->pid != e->pid || sh->start != e->start || !n || (n & (n - 1)) ||
	    n > 2 * SOFT_MAX_SRQ_WR + 2 || sge > SOFT_MAX_SGE ||
	    sh->rq_off < sizeof(*sh) || sh->rq_off > len || sh->cq_off > len ||
	    (len - sh->rq_off) / stride < n ||
	    (len - sh->cq_off) / sizeof(struct soft_shm_srq_cqe) < n) {
		munmap(sh, len);
		return;
	}
	qp->peer_srq = sh;
	qp->peer_srq_len = len;
	qp->peer_srq_n = n;
	qp->peer_srq_sge = sge;
	qp->peer_srq_rq_off = sh->rq_off;
	qp->peer_srq_cq_off = sh->cq_off;
}

/*
 * soft_qp_connect -- find and map the peer QP's segment; lock held.
 * The registry entry and the segment header are peer-writable: the peer
 * is accepted only when they agree, name a live context slot and a ring
 * that fits the mapping, and, when they claim to be this very process,
 * name a QP this process really owns.  The pid recorded here is the only
 * one the data path ever copies from or to.
 */
void soft_qp_connect(struct soft_qp *qp)
{
	struct soft_reg_qp e;
	struct soft_seg_hdr *h;
	size_t len, queues;
	uint32_t nslots;
	int slot;

	if (qp->peer || !qp->dest_qpn || !soft_ah_local(&qp->attr.ah_attr))
		return; /* unreachable path: sends time out (RETRY_EXC_ERR) */
	slot = soft_reg_qp_lookup(qp->dest_qpn, &e);
	if (slot < 0 || e.pid <= 0 || e.ctx_idx >= SOFT_MAX_CTX ||
	    e.qp_type != (uint32_t)qp->type)
		return;
	if (e.pid == soft_self_pid && !soft_qp_is_local(qp->dest_qpn))
		return; /* a forged entry naming us: never copy from ourselves */
	h = soft_seg_map(qp->dest_qpn, &len);
	if (!h)
		return;
	nslots = h->nslots;
	if (!nslots || (nslots & (nslots - 1)) || nslots > SOFT_MAX_QP_WR ||
	    len < SOFT_SEG_HDR + (size_t)nslots * SOFT_SLOT_SIZE ||
	    h->pid != e.pid || h->start != e.start) {
		munmap(h, len);
		return;
	}
	/* the slots we read and its queue mirror now, not its copy ring
	 * (its offset read once: the peer may write it) */
	queues = h->ring_off;
	soft_populate(h, queues >= SOFT_SEG_HDR && queues <= len ? queues : len,
		      0);
	qp->peer = h;
	qp->peer_epoch = atomic_load_explicit(&h->epoch, memory_order_acquire);
	qp->peer_len = len;
	qp->peer_slots = (struct soft_slot *)((char *)h + SOFT_SEG_HDR);
	qp->peer_mask = nslots - 1;
	qp->peer_cons = 0;
	qp->served_seen = SOFT_SERVED_NONE;
	qp->ring_stall = 0;
	qp->peer_pid = e.pid;
	qp->peer_start = e.start;
	qp->peer_ctx_idx = e.ctx_idx;
	qp->peer_cq_wbits = h->cq_wbits; /* peer-written: its own loss */
	qp->peer_rc = &soft_reg->ctx[e.ctx_idx];
	qp->peer_pd_id = e.pd_id;
	qp->peer_reg_slot = slot;
	qp->peer_bell = h->bell; /* a wrong one only rings the wrong QP */
	qp->peer_bw = NULL;
	if (qp->peer_bell < SOFT_BELLS) {
		qp->peer_bw = &soft_reg->bells[e.ctx_idx].w[qp->peer_bell / 64];
		qp->peer_bm = 1ull << (qp->peer_bell % 64);
	}
	/* a QP of ours on this very context is progressed by every poll */
	qp->peer_same_ctx = e.pid == soft_self_pid &&
			    e.ctx_idx == (uint32_t)qp->ctx->reg_idx;
	/* its copy ring, if it fits the mapping */
	qp->peer_ring = NULL;
	qp->peer_ring_size = 0;
	if (h->ring_size && h->ring_size <= SOFT_RING_SIZE &&
	    h->ring_off >= SOFT_SEG_HDR && h->ring_off <= len &&
	    h->ring_size <= len - h->ring_off) {
		qp->peer_ring = (const uint8_t *)h + h->ring_off;
		qp->peer_ring_size = h->ring_size;
	}
	/* its receive queue mirror, if it fits the mapping */
	qp->peer_rq_n = h->rq_entries;
	qp->peer_rq_sge = h->rq_sge;
	qp->peer_rq_off = h->rq_off;
	qp->peer_cq_off = h->cq_off;
	if (!qp->peer_rq_n || (qp->peer_rq_n & (qp->peer_rq_n - 1)) ||
	    qp->peer_rq_n > 2 * SOFT_MAX_QP_WR ||
	    qp->peer_rq_sge > SOFT_MAX_SGE || qp->peer_rq_off > len ||
	    qp->peer_cq_off > len ||
	    (len - qp->peer_rq_off) / (8 + 16 * (uint64_t)qp->peer_rq_sge) <
		    qp->peer_rq_n ||
	    (len - qp->peer_cq_off) / sizeof(struct soft_shm_cqe) <
		    qp->peer_rq_n)
		qp->peer_rq_n = 0; /* not served by us */
	if (h->srq_id) /* ours too: its prod stamps our slots (srq_stamp) */
		peer_srq_map(qp, h->srq_id, &e);
	peer_wake(qp); /* slots we published before we found it */
}

/*
 * soft_rx_lock_wait -- take the rx lock H of a QP segment as V (1: its
 * owner, 2: an initiator) for a reset: a holder in the middle of a batch
 * or a serve finishes first.  One that keeps it (stopped) is waited for
 * up to SOFT_RX_LOCK_WAIT_NS, one whose process (PID, START; pid 0: not
 * known) is gone not at all.  1: taken (store 0 to give it back), 0: not.
 */
int soft_rx_lock_wait(struct soft_seg_hdr *h, uint32_t v, int32_t pid,
		      uint64_t start)
{
	uint64_t end = 0;
	uint32_t i, z;

	for (i = 1;; i++) {
		z = 0;
		if (atomic_compare_exchange_strong(&h->rx_lock, &z, v))
			return 1;
		if (!(i & 1023)) {
			if (!end)
				end = soft_now_ns() + SOFT_RX_LOCK_WAIT_NS;
			else if (soft_now_ns() > end ||
				 (pid && !soft_pid_alive(pid, start)))
				return 0;
		}
		sched_yield();
	}
}

/*
 * soft_qp_ack_reset -- the ACK back to 0 for the QP's next incarnation
 * (qp_reset, before the peer is unmapped), with dest_qpn cleared: under
 * the responder's rx lock, which covers its look at cancel and its plain
 * store of the ACK (rx_ack) and before which it looks at dest_qpn
 * (rx_slots), so that no ACK of this incarnation lands after it, nor any
 * copy out of slots the reset rewrites.  Lock held.
 */
void soft_qp_ack_reset(struct soft_qp *qp)
{
	struct soft_seg_hdr *h = qp->peer;
	int held = h && soft_rx_lock_wait(h, 2, qp->peer_pid, qp->peer_start);

	atomic_store(&qp->seg->dest_qpn, 0);
	atomic_store(&qp->seg->acked, 0);
	atomic_store(&qp->seg->cancel, 0);
	qp->ack_frozen = 0;
	qp->ack_freeze = 0;
	qp->alive_acked = qp->map_acked = 0; /* no answer seen yet */
	if (held)
		atomic_store_explicit(&h->rx_lock, 0, memory_order_release);
}

/* soft_qp_disconnect -- unmap the peer segment; lock held */
void soft_qp_disconnect(struct soft_qp *qp)
{
	soft_net_release(qp); /* issue 12: the network path (net.c) */
	if (qp->ops == &soft_rc_net_ops)
		qp->ops = &soft_rc_ops; /* back on shared memory */
	if (qp->peer)
		munmap(qp->peer, qp->peer_len);
	if (qp->peer_srq)
		munmap(qp->peer_srq, qp->peer_srq_len);
	qp->peer_srq = NULL;
	qp->peer = NULL;
	qp->peer_slots = NULL;
	qp->peer_ring = NULL;
	qp->peer_ring_size = 0;
	qp->peer_reg_slot = -1;
	qp->peer_bell = SOFT_BELL_NONE;
	qp->peer_bw = NULL;
	qp->dest_qpn = 0;
}

/* soft_qp_to_error -- QP to ERR; queues flush from the next progress.  A
 * QP on an SRQ gets IBV_EVENT_QP_LAST_WQE_REACHED, but a DCT (any_src)
 * none: mlx5_core hands a DCT only DCT_DRAINED (is_event_type_allowed) */
void soft_qp_to_error(struct soft_qp *qp)
{
	if (qp->state == IBV_QPS_ERR)
		return;
	soft_qp_set_state(qp, IBV_QPS_ERR);
	if (qp->srq && !qp->ops->any_src)
		soft_async_event(qp->ctx, IBV_EVENT_QP_LAST_WQE_REACHED,
				 &qp->qpx.qp_base);
}

/*
 * peer_wake -- the peer QP has work: ring its bell, and poke its context
 * if a CQ there is armed (event mode).  The work must be seen before our
 * look at the peer's bits, as the peer arms (a seq_cst RMW on its bits)
 * before it looks at the work: a fence (none for a peer on this context:
 * its lock orders both).  A peer context that never waited on events,
 * rang bells or served rings (no fence_wake) polls every QP of its own:
 * nothing to ring or wake, and no fence where our process takes global
 * membarriers (soft_gmb): its first wait issues one instead
 * (soft_ctx_fence_wake).  The flag is looked at after the work is
 * stored, in program order (the compiler's too).
 */
static inline __attribute__((always_inline)) void peer_wake(struct soft_qp *qp)
{
	struct soft_context *ctx = qp->ctx;
	struct soft_reg_ctx *rc = qp->peer_rc;

	if (qp->peer_same_ctx) {
		/* ours, on this context (whose lock we hold, as its arms do):
		 * no fence, no atomics; a sweeping context visits it anyway */
		if (ctx->bells_on && qp->peer_bell < ctx->bell_hi &&
		    ctx->bell_qp[qp->peer_bell])
			soft_qp_hot(ctx->bell_qp[qp->peer_bell]);
	} else {
		atomic_signal_fence(memory_order_seq_cst);
		if (soft_gmb && !atomic_load_explicit(&rc->fence_wake,
						      memory_order_relaxed))
			return;
		atomic_thread_fence(memory_order_seq_cst);
		/* a bit seen set is one the consumer has not taken yet,
		 * and its exchange comes after the work */
		if (qp->peer_bw && !(atomic_load(qp->peer_bw) & qp->peer_bm))
			atomic_fetch_or(qp->peer_bw, qp->peer_bm);
	}
	/* its waiters only for an armed CQ of the peer QP's (its send CQ for
	 * our ACKs, its receive CQ for our messages); a thread serving the
	 * rings, always */
	if (atomic_load(&rc->armed) &&
	    (atomic_load(&rc->armed_cqs) & qp->peer_cq_wbits))
		soft_wake_ctx(qp->peer_ctx_idx);
	else if (atomic_load(&rc->always_wake))
		soft_wake_thread(qp->peer_ctx_idx);
}

/* soft_local_sge -- check an SGE against the local MR table: an MR (or
 * an indirect mkey) of pd, the QP's, or for an XRC target the SRQ's
 * (every QP type's post path, the receivers' placement) */
int soft_local_sge(const struct soft_pd *pd, const struct ibv_sge *sge,
		   unsigned int need, struct iovec *iov)
{
	struct soft_mr *mr;

	iov->iov_len = sge->length;
	if (!sge->length) {
		iov->iov_base = NULL;
		return 0;
	}
	mr = soft_mr_lookup(sge->lkey);
	if (!mr && (sge->lkey & SOFT_KEY_MW_BIT)) /* an indirect mkey */
		return soft_umr_local_sge(pd, sge, need, iov);
	if (!mr || mr->pd != pd || (need && !(mr->access & need)) ||
	    sge->addr < mr->iova || sge->addr - mr->iova > mr->mr.length ||
	    sge->length > mr->mr.length - (sge->addr - mr->iova))
		return -1;
	iov->iov_base = (char *)mr->mr.addr + (sge->addr - mr->iova);
	return 0;
}

/* peer_listed -- the target QP is registered and in a receiving state */
static int peer_listed(struct soft_qp *qp)
{
	struct soft_reg_qp *e;
	uint32_t st;

	if (!qp->peer)
		soft_qp_connect(qp);
	if (!qp->peer || qp->peer_reg_slot < 0)
		return 0;
	e = &soft_reg->qp[qp->peer_reg_slot];
	if (e->qpn != qp->dest_qpn ||
	    atomic_load_explicit(&qp->peer->dest_qpn, memory_order_relaxed) !=
		    qp->qpx.qp_base.qp_num)
		return 0; /* gone, or it does not talk to us */
	st = atomic_load(&e->state);
	return st >= IBV_QPS_RTR && st != IBV_QPS_ERR;
}

/*
 * peer_answered -- the peer's cumulative ACK moved since *SEEN (which
 * takes its new value): only the peer's responder writes it (rx_ack), run
 * by its process or, for a peer of ours, by us (serve_local), so its
 * process lived at that ACK, and the kernel need not be asked (four
 * system calls: soft_pid_alive) as long as the ACKs move, as an HCA's
 * transport timer restarts at every ACK.  A peer that dies just after an
 * ACK is asked for at the next look, one SOFT_LIVENESS_NS later.
 */
static inline int peer_answered(const struct soft_qp *qp, uint64_t *seen)
{
	uint64_t a =
		atomic_load_explicit(&qp->seg->acked, memory_order_relaxed);

	if (a == *seen)
		return 0;
	*seen = a;
	return 1;
}

/* peer_reachable -- peer_listed and its process lives (peer_answered, or
 * system calls) */
static int peer_reachable(struct soft_qp *qp)
{
	if (qp->path_down) /* IB mode: its link is down (apm.c) */
		return 0;
	return peer_listed(qp) &&
	       (peer_answered(qp, &qp->alive_acked) ||
		soft_pid_alive(qp->peer_pid, qp->peer_start));
}

/* soft_sweep_max -- SOFTRDMA_SWEEP_MAX: up to how many QPs a context
 * sweeps them all at every progress pass rather than keep its doorbell
 * (default 8; 0: always the doorbell) */
uint32_t soft_sweep_max(void)
{
	const char *e = getenv("SOFTRDMA_SWEEP_MAX");
	char *end;
	unsigned long v;

	if (!e || !*e)
		return SOFT_SWEEP_MAX;
	errno = 0;
	v = strtoul(e, &end, 10);
	if (*end || errno || v > SOFT_BELLS || e[0] == '-') {
		SOFT_WARN("SOFTRDMA_SWEEP_MAX=%s is not a count from 0 to %u: "
			  "%u used",
			  e, SOFT_BELLS, SOFT_SWEEP_MAX);
		return SOFT_SWEEP_MAX;
	}
	return (uint32_t)v;
}

/* soft_novm_env -- tests set SOFTRDMA_TEST_NOVM=1 to make every
 * process_vm_* call fail as Yama's ptrace_scope 1 makes it fail between
 * processes that are not ancestor and descendant: the chunked fallback */
int soft_novm_env(void)
{
	static _Atomic int forced = -1;

	return soft_env_flag(&forced, "SOFTRDMA_TEST_NOVM");
}

/*
 * test_stop_busy -- tests only (tests/soft/stall): while the file that
 * SOFTRDMA_TEST_STOP_BUSY names exists, a responder that has just pulled
 * a SEND of 1 MiB or more removes it and stops itself (SIGSTOP) before it
 * commits the message, the sender's slot still BUSY: "stopped while
 * copying" on demand, where a loaded machine may take minutes of random
 * stops to catch the moment
 */
static void test_stop_busy(uint64_t len)
{
	static _Atomic(const char *) name = (const char *)-1;
	const char *path = soft_env_str(&name, "SOFTRDMA_TEST_STOP_BUSY");

	if (path && len >= (1u << 20) && !unlink(path))
		raise(SIGSTOP);
}

/* vm_copy -- process_vm_readv / writev (-1, EPERM when forced off) */
static ssize_t vm_copy(int write, int32_t pid, const struct iovec *l,
		       unsigned long nl, const struct iovec *r,
		       unsigned long nr)
{
	if (soft_novm_env()) {
		errno = EPERM;
		return -1;
	}
	return write ? process_vm_writev(pid, l, nl, r, nr, 0)
		     : process_vm_readv(pid, l, nl, r, nr, 0);
}

/* iov_overlap -- some of the iovec list lies in [p, p+len) */
static int iov_overlap(const struct iovec *iov, int niov, const uint8_t *p,
		       uint64_t len)
{
	int i;

	for (i = 0; i < niov; i++)
		if ((uintptr_t)iov[i].iov_base < (uintptr_t)p + len &&
		    (uintptr_t)p < (uintptr_t)iov[i].iov_base + iov[i].iov_len)
			return 1;
	return 0;
}

/*
 * peer_mr -- rkey's registry entry when it is the peer's and grants need
 * on [raddr, raddr+len): 0, *va and the entry as checked in *m; 1: rkey
 * is an indirect mkey (umr.c's); -1: refused, nothing held.  Another
 * process's key is read with no lock (soft_key_read: one consistent copy,
 * all of it checked; *lk NULL); a key being changed too long is refused,
 * as an HCA refuses one (remote access error).  A peer in this very
 * process is checked under the key's stripe lock (*lk, held on success)
 * and against the local table (the registry is peer-writable).
 */
static int peer_mr(struct soft_qp *qp, uint32_t rkey, uint64_t raddr,
		   uint64_t len, uint32_t need, uint64_t *va,
		   struct soft_reg_mr *m, pthread_mutex_t **lk)
{
	uint32_t slot = soft_key_slot(rkey);
	struct soft_mr *mr;

	*lk = NULL;
	if (!rkey)
		return -1;
	if (qp->peer_pid == soft_self_pid) {
		*lk = &soft_reg->key_lock[slot % SOFT_NSTRIPES];
		soft_stripe_lock(*lk);
		*m = soft_reg->mr[slot];
	} else if (soft_key_read(slot, m)) {
		return -1;
	}
	if (m->key != rkey)
		goto refused;
	if (m->kind == SOFT_KEY_UMR) {
		/* told here rather than by a lookup of its own per WR */
		if (*lk)
			pthread_mutex_unlock(*lk);
		*lk = NULL;
		return rkey & SOFT_KEY_MW_BIT ? 1 : -1;
	}
	if (m->pid != qp->peer_pid || m->pd_id != qp->peer_pd_id ||
	    !(m->access & need) || (m->qpn && m->qpn != qp->dest_qpn) ||
	    raddr < m->addr || raddr - m->addr > m->len ||
	    len > m->len - (raddr - m->addr))
		goto refused;
	*va = m->va + (raddr - m->addr);
	if (qp->peer_pid == soft_self_pid) {
		/* our own memory: trust our MR table, not the registry's
		 * word (a window is checked against the MR it is bound to) */
		mr = soft_mr_lookup(m->kind == SOFT_KEY_MR ? rkey : m->mr_key);
		if (!mr || (m->kind == SOFT_KEY_MR && !(mr->access & need)) ||
		    *va < (uintptr_t)mr->mr.addr ||
		    *va - (uintptr_t)mr->mr.addr > mr->mr.length ||
		    len > mr->mr.length - (*va - (uintptr_t)mr->mr.addr))
			goto refused;
	}
	return 0;
refused:
	if (*lk)
		pthread_mutex_unlock(*lk);
	*lk = NULL;
	return -1;
}

/*
 * peer_map -- where [va, va+len) of the peer's memory, just checked by
 * peer_mr as entry w, is mapped here: the MR behind the key (a window's:
 * the MR it is bound to, read as one consistent copy too) is a sealed
 * memfd of the peer's (peermap.c); NULL: process_vm_*.  Everything is
 * decided on one copy of the MR's entry, which the mapping must match.
 */
static uint8_t *peer_map(struct soft_qp *qp, const struct soft_reg_mr *w,
			 uint64_t va, uint64_t len)
{
	struct soft_reg_mr e;
	uint64_t now;
	uint8_t *base;

	if (qp->novm || soft_map_off())
		return NULL;
	if (qp->peer_pid == soft_self_pid) /* peer_mr checked our MR table */
		return (uint8_t *)(uintptr_t)va;
	if (w->kind == SOFT_KEY_MR)
		e = *w;
	else if (soft_key_read(soft_key_slot(w->mr_key), &e) ||
		 e.key != w->mr_key)
		return NULL;
	/* memory no file backs (a malloc'ed region): process_vm_* */
	if (!e.map_fd || e.kind != SOFT_KEY_MR || e.pid != qp->peer_pid ||
	    e.start != qp->peer_start || va < e.va || va - e.va > e.len ||
	    len > e.len - (va - e.va))
		return NULL;
	/* a dead peer's memory outlives it in the file: the peer is looked
	 * for every SOFT_LIVENESS_NS, as process_vm_* would find it gone
	 * (then so does the copy that replaces this one) */
	now = soft_now_ns();
	if (now - qp->map_alive > SOFT_LIVENESS_NS) {
		if (!peer_answered(qp, &qp->map_acked) &&
		    !soft_pid_alive(qp->peer_pid, qp->peer_start))
			return NULL;
		qp->map_alive = now;
	}
	base = soft_map_get(qp->ctx, &e);
	return base ? base + (va - e.va) : NULL;
}

/*
 * soft_atomic_exec -- compare-and-swap (CAS: compare add, swap swap) or
 * fetch-and-add (add add) on the 8 bytes at va of pid, mapped here at p
 * (NULL: reached with process_vm_*), under the stripe lock every atomic
 * on them takes, so that peers copying with process_vm_* and the owner's
 * own responder see it whole (a CPU atomic besides where p is aligned: a
 * window or an IOVA may name them at any address); the value found goes
 * to res.  0, SOFT_ATOMIC_NOREAD (nothing read or changed) or
 * SOFT_ATOMIC_NOWRITE (read, the write refused), errno EPERM where
 * process_vm_* is refused.  Every responder's atomic (one host, DC, UMR,
 * between hosts) comes here; each caller maps these to its own status.
 */
int soft_atomic_exec(int32_t pid, uint64_t va, uint8_t *p, int cas,
		     uint64_t add, uint64_t swap, void *res)
{
	pthread_mutex_t *al = soft_atomic_lock(pid, va);
	uint64_t old, nv;
	struct iovec o = {&old, 8}, w = {&nv, 8},
		     r = {(void *)(uintptr_t)va, 8};
	int ret = 0;

	soft_stripe_lock(al);
	if (p && !((uintptr_t)p & 7)) {
		old = add;
		if (cas)
			__atomic_compare_exchange_n((uint64_t *)(void *)p, &old,
						    swap, 0, __ATOMIC_SEQ_CST,
						    __ATOMIC_SEQ_CST);
		else
			old = __atomic_fetch_add((uint64_t *)(void *)p, add,
						 __ATOMIC_SEQ_CST);
		goto done;
	}
	if (p) {
		memcpy(&old, p, 8);
	} else if (vm_copy(0, pid, &o, 1, &r, 1) != 8) {
		ret = SOFT_ATOMIC_NOREAD;
		goto done;
	}
	if (cas && old != add)
		goto done;
	nv = cas ? swap : old + add;
	if (p)
		memcpy(p, &nv, 8);
	else if (vm_copy(1, pid, &w, 1, &r, 1) != 8)
		ret = SOFT_ATOMIC_NOWRITE;
done:
	pthread_mutex_unlock(al);
	if (!ret)
		memcpy(res, &old, 8);
	return ret;
}

/* soft_aw_place -- store 8 bytes at va of pid (mapped here at p, or NULL) as
 * one aligned 8-byte copy, under the stripe lock the device's other
 * atomics take; wc status */
enum ibv_wc_status soft_aw_place(int32_t pid, uint64_t va, uint8_t *p,
				 uint64_t v)
{
	struct iovec l = {&v, 8}, r = {(void *)(uintptr_t)va, 8};
	pthread_mutex_t *al = soft_atomic_lock(pid, va);
	enum ibv_wc_status ret = IBV_WC_SUCCESS;

	soft_stripe_lock(al);
	if (p)
		__atomic_store_n((uint64_t *)(void *)p, v, __ATOMIC_RELEASE);
	else if (pid == soft_self_pid && !(va & 7))
		__atomic_store_n((uint64_t *)(uintptr_t)va, v,
				 __ATOMIC_RELEASE);
	else if (pid == soft_self_pid)
		memcpy((void *)(uintptr_t)va, &v, 8);
	else if (vm_copy(1, pid, &l, 1, &r, 1) != 8)
		ret = IBV_WC_RETRY_EXC_ERR;
	pthread_mutex_unlock(al);
	return ret;
}

/*
 * atomic_write -- IBV_WR_ATOMIC_WRITE: the WR's 8 bytes placed at the
 * peer's aligned address in one store, after everything posted before it
 * (the send queue executes in order).  Access as rxe checks it: remote
 * write on the responder QP and on the MR or window; a misaligned address
 * is an invalid request.
 */
static enum ibv_wc_status atomic_write(struct soft_qp *qp,
				       struct ibv_send_wr *wr,
				       const struct iovec *liov, int *chunked)
{
	uint64_t raddr = wr->wr.rdma.remote_addr, va = 0, v;
	struct soft_reg_qp *t;
	struct soft_reg_mr m;
	pthread_mutex_t *lk;
	enum ibv_wc_status ret;

	*chunked = 0;
	if (!peer_listed(qp)) {
		*chunked = 1;
		return IBV_WC_SUCCESS;
	}
	t = &soft_reg->qp[qp->peer_reg_slot];
	if (!(atomic_load(&t->access) & IBV_ACCESS_REMOTE_WRITE))
		return IBV_WC_REM_ACCESS_ERR;
	if (!atomic_load(&t->dest_rd_atom) || (raddr & 7))
		return IBV_WC_REM_INV_REQ_ERR; /* as remote_op */
	if (peer_mr(qp, wr->wr.rdma.rkey, raddr, 8, IBV_ACCESS_REMOTE_WRITE,
		    &va, &m, &lk))
		return IBV_WC_REM_ACCESS_ERR;
	if (qp->novm) {
		*chunked = 1;
		if (lk)
			pthread_mutex_unlock(lk);
		return IBV_WC_SUCCESS;
	}
	memcpy(&v, liov[0].iov_base, 8);
	ret = soft_aw_place(qp->peer_pid, va, peer_map(qp, &m, va, 8), v);
	if (ret != IBV_WC_SUCCESS && errno == EPERM) {
		qp->novm = 1;
		*chunked = 1;
		ret = IBV_WC_SUCCESS;
	}
	if (lk)
		pthread_mutex_unlock(lk);
	return ret;
}

/*
 * remote_op -- RDMA WRITE / READ / atomic against the peer's memory.
 * Returns a wc status.  Where process_vm_* is refused (*chunked set), the
 * operation goes through the ring instead and the target process carries
 * it out itself.
 *
 * Another process's rkey is checked without its stripe lock (peer_mr,
 * soft_key_read), so a dereg, unbind or invalidation no longer waits for
 * a copy in flight.  That is an HCA's behaviour: its responder checks the
 * rkey when the request arrives, then moves the data, and an invalidation
 * completing meanwhile does not stop a request already past its check
 * (rxe's responder keeps the MR it checked for the whole request).  What
 * must hold is that no request checked after the invalidation completed
 * passes, and it does: the writer's even seq is stored (release) before
 * it reports the completion, whoever then issues a request learnt of that
 * completion first (acquire, through the CQ and whatever message told it),
 * so the check reads the new entry.  The copy needs no lock to be safe:
 * process_vm_* fails on memory unmapped meanwhile, and a mapping of the
 * peer's memfd (peer_map) is ours.  Our own memory is copied with memcpy,
 * which an unmap after ibv_dereg_mr would fault: its stripe lock is held
 * across the copy (*lk), so that the dereg waits for it, as before.
 */
static enum ibv_wc_status remote_op(struct soft_qp *qp, struct ibv_send_wr *wr,
				    const struct iovec *liov, int niov,
				    uint64_t len, int *chunked)
{
	uint32_t rkey, need;
	uint64_t raddr, va = 0;
	struct soft_reg_qp *t;
	struct soft_reg_mr m;
	pthread_mutex_t *lk;
	struct iovec riov;
	enum ibv_wc_status ret = IBV_WC_SUCCESS;
	uint8_t *p;
	ssize_t n;

	*chunked = 0;
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		need = IBV_ACCESS_REMOTE_WRITE;
		rkey = wr->wr.rdma.rkey;
		raddr = wr->wr.rdma.remote_addr;
		break;
	case IBV_WR_RDMA_READ:
		need = IBV_ACCESS_REMOTE_READ;
		rkey = wr->wr.rdma.rkey;
		raddr = wr->wr.rdma.remote_addr;
		break;
	case IBV_WR_ATOMIC_WRITE:
		/* rxe: remote write access on the QP and the MR; 8 bytes at
		 * an aligned address, or an invalid request */
		return atomic_write(qp, wr, liov, chunked);
	default:
		need = IBV_ACCESS_REMOTE_ATOMIC;
		rkey = wr->wr.atomic.rkey;
		raddr = wr->wr.atomic.remote_addr;
		len = 8;
		break;
	}
	/* no responder (yet): the request waits in the ring, and fails
	 * after the transport timeout as on an unreachable path */
	if (!peer_listed(qp)) {
		*chunked = 1;
		return IBV_WC_SUCCESS;
	}
	t = &soft_reg->qp[qp->peer_reg_slot];
	if (!(atomic_load(&t->access) & need))
		return IBV_WC_REM_ACCESS_ERR;
	/* a responder of max_dest_rd_atomic 0 has no resources for a READ
	 * or atomic, zero-length too: an invalid request, the responder to
	 * ERR (rxe's check_resource, RESPST_ERR_TOO_MANY_RDMA_ATM_REQ; net.c
	 * between hosts); 1 or more is no count it checks (rxe recycles) */
	if (need != IBV_ACCESS_REMOTE_WRITE &&
	    !atomic_load_explicit(&t->dest_rd_atom, memory_order_relaxed))
		return IBV_WC_REM_INV_REQ_ERR;
	/* a zero-length WRITE or READ names no memory: its R_Key and VA are
	 * not checked (IBA C9-88, as rxe; rsocket's credit updates are
	 * zero-length WRITE_WITH_IMMs with whatever rkey the stack held) */
	if (!len)
		return IBV_WC_SUCCESS;
	if (need == IBV_ACCESS_REMOTE_ATOMIC && (raddr & 7))
		return IBV_WC_REM_INV_REQ_ERR;
	switch (peer_mr(qp, rkey, raddr, len, need, &va, &m, &lk)) {
	case 0:
		break;
	case 1: /* an indirect mkey (umr.c) */
		return soft_umr_remote(qp, need, rkey, raddr, liov, niov, len,
				       wr);
	default:
		return IBV_WC_REM_ACCESS_ERR;
	}
	if (qp->novm) {
		*chunked = 1;
		goto out;
	}
	riov.iov_base = (void *)(uintptr_t)va;
	riov.iov_len = len;
	/* the peer's memfd mapped here: one memcpy, no system call (our
	 * own memory is reached where it is, but not onto itself) */
	p = peer_map(qp, &m, va, len);
	if (p && qp->peer_pid == soft_self_pid &&
	    iov_overlap(liov, niov, p, len))
		p = NULL;
	if (p && need == IBV_ACCESS_REMOTE_WRITE) {
		soft_iov_gather(liov, (uint32_t)niov, 0, p, len);
	} else if (p && need == IBV_ACCESS_REMOTE_READ) {
		soft_iov_scatter(liov, (uint32_t)niov, 0, p, len);
	} else if (need == IBV_ACCESS_REMOTE_WRITE) {
		n = len ? vm_copy(1, qp->peer_pid, liov, (unsigned long)niov,
				  &riov, 1)
			: 0;
		if (n != (ssize_t)len)
			ret = IBV_WC_RETRY_EXC_ERR;
	} else if (need == IBV_ACCESS_REMOTE_READ) {
		n = len ? vm_copy(0, qp->peer_pid, liov, (unsigned long)niov,
				  &riov, 1)
			: 0;
		if (n != (ssize_t)len)
			ret = IBV_WC_RETRY_EXC_ERR;
	} else if (soft_atomic_exec(qp->peer_pid, va, p,
				    wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP,
				    wr->wr.atomic.compare_add,
				    wr->wr.atomic.swap, liov[0].iov_base)) {
		ret = IBV_WC_RETRY_EXC_ERR;
	}
	if (ret != IBV_WC_SUCCESS && errno == EPERM) {
		/* refused (Yama): nothing was copied; the target does it */
		qp->novm = 1;
		*chunked = 1;
		ret = IBV_WC_SUCCESS;
	}
out:
	if (lk)
		pthread_mutex_unlock(lk);
	return ret;
}

/* rc_sq_room -- send WRs the queue takes now, those held in SQD
 * counted; lock held */
static inline uint32_t rc_sq_room(struct soft_qp *qp)
{
	return soft_sq_room(qp, qp->sq_head - qp->sq_tail + qp->nheld);
}

/* check_wr -- what makes ibv_post_send fail immediately (inlined into
 * the post path though the SQD path calls it too: one call per message
 * less, as post_one; tools/soft_pingpong-insns.sh counts it) */
static inline __attribute__((always_inline)) int check_wr(
	struct soft_qp *qp, struct ibv_send_wr *wr, uint64_t *len)
{
	uint64_t total = 0;
	int i;

	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
	case IBV_WR_SEND_WITH_INV:
		break;
	case IBV_WR_BIND_MW:
	case IBV_WR_LOCAL_INV:
		if (soft_mw_check_wr(qp, wr))
			return EINVAL;
		break;
	case IBV_WR_DRIVER1: /* a UMR staged by mlx5dv_wr_mr_* (umr.c) */
		if (!soft_umr_wr_ok(qp, wr))
			return EINVAL;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
	case IBV_WR_ATOMIC_WRITE:
		if (soft_atomic_sge_bad(wr))
			return EINVAL;
		break;
	default:
		return EINVAL;
	}
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge ||
	    (wr->num_sge && !wr->sg_list))
		return EINVAL;
	for (i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if ((wr->send_flags & IBV_SEND_INLINE) &&
	    wr->opcode != IBV_WR_ATOMIC_WRITE) {
		if (wr->opcode == IBV_WR_RDMA_READ ||
		    total > qp->cap.max_inline_data)
			return EINVAL;
	}
	if (!rc_sq_room(qp))
		return ENOMEM;
	*len = total;
	return 0;
}

/* a WR posted in SQD: a copy of it, its SGEs, and its inline bytes */
struct soft_held {
	struct soft_held *next;
	uint64_t len;
	struct ibv_send_wr wr;
	struct ibv_sge sge[];
};

/*
 * sq_hold -- ibv_post_send in SQD: the WR is queued (it counts against
 * max_send_wr) but not executed until the QP leaves SQD, as rxe's
 * requester takes no new WQE while draining or drained.  Inline data is
 * copied now, as at any post.  0 or ENOMEM.
 */
static int sq_hold(struct soft_qp *qp, struct ibv_send_wr *wr, uint64_t len)
{
	size_t n = (size_t)wr->num_sge,
	       inl = (wr->send_flags & IBV_SEND_INLINE) ? (size_t)len : 0;
	struct soft_held *h = malloc(sizeof(*h) + n * sizeof(h->sge[0]) + inl);
	uint8_t *d;
	size_t i;

	if (!h)
		return ENOMEM;
	h->next = NULL;
	h->len = len;
	h->wr = *wr;
	h->wr.next = NULL;
	h->wr.sg_list = h->sge;
	memcpy(h->sge, wr->sg_list, n * sizeof(h->sge[0]));
	d = (uint8_t *)&h->sge[n];
	for (i = 0; inl && i < n; i++) {
		memcpy(d, (void *)(uintptr_t)wr->sg_list[i].addr,
		       wr->sg_list[i].length);
		h->sge[i].addr = (uintptr_t)d;
		d += wr->sg_list[i].length;
	}
	if (!qp->held)
		qp->held_tail = &qp->held;
	*qp->held_tail = h;
	qp->held_tail = &h->next;
	qp->nheld++;
	return 0;
}

/* sq_hold_all -- rc_post_send in SQD: check and hold each WR */
static int sq_hold_all(struct soft_qp *qp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad)
{
	uint64_t len;
	int ret = 0;

	for (; wr; wr = wr->next) {
		ret = check_wr(qp, wr, &len);
		if (!ret)
			ret = sq_hold(qp, wr, len);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	return ret;
}

/* soft_sq_drop_held -- RESET or destroy: the held WRs go, no completion */
void soft_sq_drop_held(struct soft_qp *qp)
{
	struct soft_held *h;

	while ((h = qp->held)) {
		qp->held = h->next;
		free(h);
	}
	qp->nheld = 0;
	qp->sqd_notify = 0;
}

/* soft_sq_drop -- RESET or destroy: the posted send WQEs go without
 * completions, their inline copies with them */
void soft_sq_drop(struct soft_qp *qp)
{
	struct soft_swqe *e;

	for (; qp->sq_tail != qp->sq_head; qp->sq_tail++) {
		e = &qp->sq[qp->sq_tail & qp->sq_mask];
		free(e->spill);
		e->spill = NULL;
	}
}

/* soft_sqd_check -- SQ_DRAINED when the last send in flight finished */
void soft_sqd_check(struct soft_qp *qp)
{
	if (qp->sqd_notify && qp->state == IBV_QPS_SQD &&
	    qp->sq_head == qp->sq_tail && soft_net_sq_drained(qp)) {
		qp->sqd_notify = 0;
		soft_async_event(qp->ctx, IBV_EVENT_SQ_DRAINED,
				 &qp->qpx.qp_base);
	}
}

/* gather -- local iovecs of a WR (inline data needs no key) */
static enum ibv_wc_status gather(struct soft_qp *qp, struct ibv_send_wr *wr,
				 unsigned int need, struct iovec *iov)
{
	int i;

	for (i = 0; i < wr->num_sge; i++) {
		if (wr->send_flags & IBV_SEND_INLINE) {
			iov[i].iov_base =
				(void *)(uintptr_t)wr->sg_list[i].addr;
			iov[i].iov_len = wr->sg_list[i].length;
		} else if (soft_local_sge(qp->pd, &wr->sg_list[i], need,
					  &iov[i])) {
			return IBV_WC_LOC_PROT_ERR;
		}
	}
	return IBV_WC_SUCCESS;
}

/* slot_op -- the ring opcode of a WR */
static uint32_t slot_op(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return SOFT_OP_WRITE_IMM;
	case IBV_WR_RDMA_WRITE:
		return SOFT_OP_WRITE;
	case IBV_WR_RDMA_READ:
		return SOFT_OP_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return SOFT_OP_CMP_SWP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return SOFT_OP_FETCH_ADD;
	case IBV_WR_ATOMIC_WRITE:
		return SOFT_OP_ATOMIC_WRITE;
	default:
		return SOFT_OP_SEND;
	}
}

/*
 * ring_take -- room for len bytes in our copy ring, in one piece (the
 * tail of the ring is skipped when it is too short); the byte offset,
 * or -1: no ring, too long, or full (the SGE list goes instead).  The
 * room comes back when the WQE completes, in order (tx_qp).  An empty
 * ring starts again at its beginning once its head has passed
 * SOFT_RING_MIN: one message at a time moves through that much of it
 * and touches no more.  Not sooner: rewriting the lines the responder
 * has just read out costs more than lines it read a few messages ago
 * (ib_send_lat -s 65536 on a VM whose cores pass a line in 0.06 us:
 * 10.7 us starting at offset 0 each time, 7.8 moving on).  A ring that
 * never empties (a stream) starts again at its beginning once its head
 * has passed SOFT_RING_WRAP and what is in flight lies behind the
 * beginning's room (the rest skipped, as a short tail is): it moves
 * through 2 MiB, not all 8, and both processes fault in that much of
 * it.  rdmamsg_perf -t bw --size 4096 --window 128, pinned, 5 pairs
 * each: 20,000 messages 9.3-16.1 -> 14.9-17.0 GB/s (the ring's page
 * faults, about 2,000 a side, were most of a run that short), 200,000
 * 23.0-25.5 -> 22.6-34.5; 16 and 64 KiB the same.
 */
static int64_t ring_take(struct soft_qp *qp, uint64_t len)
{
	uint64_t size = qp->ring_size, pos, skip = 0;

	if (!qp->ring || len > SOFT_RING_MAX)
		return -1;
	if (qp->ring_head == qp->ring_tail && qp->ring_head >= SOFT_RING_MIN)
		qp->ring_head = qp->ring_tail = 0; /* empty, and far enough */
	pos = qp->ring_head & (size - 1);
	if (pos + len > size || (pos >= SOFT_RING_WRAP &&
				 pos - len >= qp->ring_head - qp->ring_tail))
		skip = size - pos;
	if (qp->ring_head + skip + len - qp->ring_tail > size)
		return -1;
	qp->ring_head += skip + len;
	return (int64_t)((pos + skip) & (size - 1));
}

/* a ring SEND's fill count (SOFT_SLOT_RING_FILL): the sender stores it
 * after the bytes it counts, the responder loads it before them */
typedef uint64_t __attribute__((may_alias)) ring_word;

static inline void ring_fill_set(struct soft_slot *s, uint64_t n)
{
	__atomic_store_n((ring_word *)(s->payload + SOFT_SLOT_RING_FILL), n,
			 __ATOMIC_RELEASE);
}

static inline uint64_t ring_fill(const struct soft_slot *s)
{
	return __atomic_load_n(
		(const ring_word *)(s->payload + SOFT_SLOT_RING_FILL),
		__ATOMIC_ACQUIRE);
}

/*
 * ring_capture -- a SEND's len bytes (its niov SGEs at iov) into our copy
 * ring, captured now as an HCA may, and the offset into its slot s's
 * first line (SOFT_SLOT_RING_OFF): the peer copies them out with no
 * system call.  Only the first `first` bytes go in here (the fill count);
 * fast_ring puts the rest in after it published the slot.  iov[0] then
 * names the captured bytes: whatever serves the WQE from here on
 * (serve_remote, for a responder that does not run) takes them, and an
 * inline SEND's own buffers are the caller's again.  The ring's offset,
 * or -1 (ring_take), nothing taken.
 */
static int64_t ring_capture(struct soft_qp *qp, struct soft_slot *s,
			    struct iovec *iov, uint32_t niov, uint64_t len,
			    uint64_t first)
{
	int64_t ring = ring_take(qp, len);
	uint64_t off;

	if (ring < 0)
		return -1;
	off = (uint64_t)ring;
	soft_iov_gather(iov, niov, 0, qp->ring + ring, first);
	memcpy(s->payload + SOFT_SLOT_RING_OFF, &off, 8);
	ring_fill_set(s, first);
	iov[0].iov_base = qp->ring + ring;
	iov[0].iov_len = len;
	return ring;
}

/* srq_stamp -- our message in s is for a QP on an SRQ: how many of its
 * WQEs were free (posted, not consumed) as it came; with none, its HCA
 * NAKed it (rx_late).  Consumption lags arrival here, so a count above 0
 * may be one an earlier message already took on an HCA: only 0 is sure,
 * and only 0 is NAKed, never more than an HCA would.  SOFT_SF_STAMP, or
 * 0 when that SRQ is not mapped (nothing to stamp) */
static inline uint32_t srq_stamp(struct soft_qp *qp, struct soft_slot *s)
{
	struct soft_srq_hdr *h = qp->peer_srq;

	if (__builtin_expect(!h, 1))
		return 0;
	s->srq_prod = (uint32_t)(atomic_load_explicit(&h->prod,
						      memory_order_acquire) -
				 atomic_load_explicit(&h->cons,
						      memory_order_acquire));
	return SOFT_SF_STAMP;
}

/* srq_came_empty -- the message in s came to its SRQ with no WQE free
 * (srq_stamp): its HCA sent an RNR NAK (rx_late, serve_remote) */
static inline int srq_came_empty(const struct soft_slot *s)
{
	return (s->flags & SOFT_SF_STAMP) && !s->srq_prod;
}

/* wr_signaled -- whether WR, which takes SQ index idx, completes with a
 * work completion; one that does is noted for ack_needed.  Lock held. */
static inline __attribute__((always_inline)) int wr_signaled(
	struct soft_qp *qp, const struct ibv_send_wr *wr, uint64_t idx)
{
	if (!qp->sq_sig_all && !(wr->send_flags & IBV_SEND_SIGNALED))
		return 0;
	qp->sig_head = idx + 1;
	return 1;
}

/* post_one -- execute or publish one send WR; lock held */
static void post_denied(struct soft_qp *qp, struct soft_swqe *e,
			enum ibv_wc_status st);

static inline __attribute__((always_inline)) void post_one(
	struct soft_qp *qp, struct ibv_send_wr *wr, uint64_t len)
{
	uint64_t idx = qp->sq_head;
	struct soft_swqe *e = &qp->sq[idx & qp->sq_mask];
	struct iovec *iov = qp->sq_iov + (idx & qp->sq_mask) * qp->sq_iov_n;
	struct soft_slot *s;
	enum ibv_wc_status st;
	uint32_t flags = 0;
	int i, chunked = 0;

	e->wr_id = wr->wr_id;
	e->wc_opcode = soft_wc_opcode(wr->opcode);
	e->byte_len = (uint32_t)len;
	e->signaled = wr_signaled(qp, wr, idx);
	e->kind = SOFT_WQE_DONE;
	e->op = slot_op(wr->opcode);
	e->niov = (uint32_t)wr->num_sge;
	e->ring_end = 0;
	e->spill = NULL;
	qp->sq_head++;
	soft_qp_hot(qp); /* progress follows it until it completes */
	if (qp->state == IBV_QPS_ERR || qp->sq_err_pending) {
		e->status = IBV_WC_WR_FLUSH_ERR;
		return;
	}
	if (wr->opcode == IBV_WR_BIND_MW || wr->opcode == IBV_WR_LOCAL_INV ||
	    wr->opcode == IBV_WR_DRIVER1) {
		e->byte_len = 0;
		e->status = wr->opcode == IBV_WR_DRIVER1
				    ? soft_umr_exec(qp, wr)
				    : soft_mw_local_op(qp, wr);
		if (e->status != IBV_WC_SUCCESS)
			goto failed;
		return;
	}
	if (len > SOFT_MAX_MSG_SZ) {
		e->status = IBV_WC_LOC_LEN_ERR;
		goto failed;
	}
	st = gather(qp, wr,
		    wr->opcode == IBV_WR_RDMA_READ ||
				    wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
				    wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD
			    ? IBV_ACCESS_LOCAL_WRITE
			    : 0,
		    iov);
	if (st != IBV_WC_SUCCESS) {
		e->status = st;
		goto failed;
	}
	if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM &&
	    wr->opcode != IBV_WR_SEND_WITH_INV) {
		st = remote_op(qp, wr, iov, wr->num_sge, len, &chunked);
		if (st != IBV_WC_SUCCESS) {
			if (qp->peer && (st == IBV_WC_REM_ACCESS_ERR ||
					 st == IBV_WC_REM_INV_REQ_ERR)) {
				post_denied(qp, e, st);
				return;
			}
			e->status = st;
			goto failed;
		}
		if (chunked && (wr->send_flags & IBV_SEND_INLINE) && len) {
			/* the target pulls the data later, chunk by chunk:
			 * inline bytes are the WQE's from the post on */
			e->spill = malloc(len);
			if (!e->spill) {
				e->status = IBV_WC_LOC_QP_OP_ERR;
				goto failed;
			}
			soft_iov_gather(iov, (uint32_t)wr->num_sge, 0, e->spill,
					len);
			iov[0].iov_base = e->spill;
			iov[0].iov_len = len;
			e->niov = 1;
		}
		if (!chunked && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) {
			e->status = IBV_WC_SUCCESS;
			return;
		}
	}
	/* two-sided (or a one-sided op the target carries out): a slot */
	idx = qp->tx_msgno++;
	e->msgno = idx;
	s = slot_at(qp->slots, idx, qp->sq_mask);
	s->opcode = e->op;
	s->len = (uint32_t)len;
	s->status = SOFT_ACK;
	s->imm = wr->imm_data;
	s->nsge = 0;
	s->pid = soft_self_pid;
	s->rkey = 0;
	s->raddr = 0;
	atomic_store_explicit(&s->chunk_seq, 0, memory_order_relaxed);
	s->chunk_len = 0;
	if (wr->opcode == IBV_WR_SEND_WITH_IMM ||
	    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		flags |= SOFT_SF_IMM;
	if (wr->opcode == IBV_WR_SEND_WITH_INV)
		flags |= SOFT_SF_INV; /* s->imm: invalidate_rkey */
	if ((wr->send_flags & IBV_SEND_SOLICITED) &&
	    (e->op == SOFT_OP_SEND || e->op == SOFT_OP_WRITE_IMM))
		flags |= SOFT_SF_SOLICITED;
	if (e->op != SOFT_OP_SEND) {
		int at = e->op == SOFT_OP_CMP_SWP || e->op == SOFT_OP_FETCH_ADD;

		s->rkey = at ? wr->wr.atomic.rkey : wr->wr.rdma.rkey;
		s->raddr = at ? wr->wr.atomic.remote_addr
			      : wr->wr.rdma.remote_addr;
	}
	if (e->op == SOFT_OP_CMP_SWP || e->op == SOFT_OP_FETCH_ADD) {
		s->len = 8;
		memcpy(s->payload, &wr->wr.atomic.compare_add, 8);
		memcpy(s->payload + 8, &wr->wr.atomic.swap, 8);
	} else if (e->op == SOFT_OP_ATOMIC_WRITE) {
		s->len = 8;
		memcpy(s->payload, iov[0].iov_base, 8);
	} else if (e->op == SOFT_OP_READ) {
		flags |= SOFT_SF_CHUNKED;
	} else if (e->op != SOFT_OP_SEND && !chunked) {
		/* WRITE_WITH_IMM whose data is already there */
	} else if (len <= SOFT_SLOT_PAYLOAD) {
		flags |= SOFT_SF_COPIED;
		soft_iov_gather(iov, (uint32_t)wr->num_sge, 0, s->payload, len);
	} else if (e->op != SOFT_OP_SEND) {
		flags |= SOFT_SF_CHUNKED;
	} else if (ring_capture(qp, s, iov, (uint32_t)wr->num_sge, len, len) >=
		   0) {
		flags |= SOFT_SF_RING;
		e->ring_end = qp->ring_head;
		e->niov = 1;
	} else if ((wr->send_flags & IBV_SEND_INLINE) &&
		   !(e->spill = malloc(len))) {
		/* inline bytes belong to the WQE from the post on: with no
		 * room to copy them, the WR fails as an HCA's would that
		 * could not fetch them */
		e->status = IBV_WC_LOC_QP_OP_ERR;
		goto failed;
	} else {
		/* the SGE list, and the lkeys by which the responder may
		 * find the memory mapped (peermap.c) */
		struct soft_remote_sge *r = (void *)s->payload;
		uint32_t *k = (uint32_t *)(void *)(s->payload + SOFT_SLOT_KEYS);
		int n = 0;

		if (e->spill) {
			/* the ring full: an inline SEND's bytes, captured now
			 * all the same; no lkey names them (the responder
			 * copies them with process_vm_readv or in chunks) */
			soft_iov_gather(iov, (uint32_t)wr->num_sge, 0, e->spill,
					len);
			iov[0].iov_base = e->spill;
			iov[0].iov_len = len;
			e->niov = 1;
			r[0].addr = (uintptr_t)e->spill;
			r[0].len = len;
			k[0] = 0;
			n = 1;
		}
		for (i = 0; !e->spill && i < wr->num_sge; i++) {
			if (!iov[i].iov_len)
				continue;
			r[n].addr = (uintptr_t)iov[i].iov_base;
			r[n].len = iov[i].iov_len;
			k[n] = wr->sg_list[i].lkey;
			n++;
		}
		s->nsge = (uint32_t)n;
		flags |= SOFT_SF_KEYS;
	}
	s->flags = flags | srq_stamp(qp, s);
	soft_tsan_release(qp);
	atomic_store_explicit(&s->state, SOFT_SLOT_STATE(idx, SOFT_SLOT_READY),
			      memory_order_release);
	e->kind = SOFT_WQE_RING;
	qp->ctx->outstanding++;
	if (qp->peer)
		peer_wake(qp);
	return;

failed:
	/* later WRs are not executed: the QP errs when this one completes */
	qp->sq_err_pending = 1;
}

/*
 * cq_take -- the place of the next completion of cq, taken (counted) for
 * the caller to write in place before it lets the lock go, in the usual
 * case: room, and the CQ not armed (no event to raise); NULL otherwise:
 * soft_cq_push.  While the pass of a poll that found the CQ empty runs,
 * and the ring is still empty, that is the poll's own array
 * (soft_poll_cq): nothing is ahead of it, and what the ring takes later
 * comes after it.  The ring's count may be counted before its entry is
 * written: a look without the lock only decides whether to wait for it
 * (soft_ctx_enter_poll); entries are read under it.  Lock held.
 */
static inline __attribute__((always_inline)) struct ibv_wc *cq_take(
	struct soft_cq *cq)
{
	uint32_t c = cq->count, i;

	if (__builtin_expect(c >= cq->size || cq->armed, 0))
		return NULL;
	if (cq->direct_left && !c) {
		cq->direct_left--;
		return cq->direct++;
	}
	i = cq->head + c;
	if (i >= cq->size)
		i -= cq->size;
	soft_cq_count_set(cq, c + 1);
	return &cq->q[i].wc;
}

/* cq_put -- soft_cq_push, inlined in the usual case; lock held */
static inline __attribute__((always_inline)) void cq_put(
	struct soft_cq *cq, const struct ibv_wc *wc, int solicited)
{
	struct ibv_wc *w = cq_take(cq);

	if (!w) {
		soft_cq_push(cq, wc, solicited);
		return;
	}
	*w = *wc;
}

/* fast_sge -- gather's check of one SGE of post_send_fast (need 0);
 * -1: an indirect mkey or LOC_PROT_ERR, for the general path */
static inline __attribute__((always_inline)) int fast_sge(
	struct soft_qp *qp, const struct ibv_sge *sg, int inl,
	struct iovec *iov)
{
	struct soft_mr *mr;

	iov->iov_len = sg->length;
	if (inl) {
		iov->iov_base = (void *)(uintptr_t)sg->addr;
		return 0;
	}
	iov->iov_base = NULL;
	if (!sg->length)
		return 0;
	mr = soft_mr_lookup(sg->lkey);
	if (!mr || mr->pd != qp->pd || sg->addr < mr->iova ||
	    sg->addr - mr->iova > mr->mr.length ||
	    sg->length > mr->mr.length - (sg->addr - mr->iova))
		return -1;
	iov->iov_base = (char *)mr->mr.addr + (sg->addr - mr->iova);
	return 0;
}

/*
 * fast_gather -- post_send_fast's SGEs (more than one) into the slot's
 * payload P, out of line (the copies' calls would cost the one-SGE path
 * registers); their length, UINT32_MAX when they are not for the fast
 * path.  Two (rdmamsg's header and data) straight.
 */
static __attribute__((noinline)) uint32_t fast_gather(struct soft_qp *qp,
						      const struct ibv_sge *sg,
						      int n, int inl,
						      uint8_t *p)
{
	uint32_t len = 0, l;
	struct iovec v, v1;
	int i;

	if (sg[n - 1].length > SOFT_SLOT_PAYLOAD)
		return UINT32_MAX; /* past the slot alone: a header and data */
	if (n == 2) {
		len = sg[0].length;
		l = sg[1].length;
		if (len > SOFT_SLOT_PAYLOAD - l || fast_sge(qp, sg, inl, &v) ||
		    fast_sge(qp, sg + 1, inl, &v1))
			return UINT32_MAX;
		copy_small(p, v.iov_base, len, 1);
		copy_small(p + len, v1.iov_base, l, 1);
		return len + l;
	}
	for (i = 0; i < n; i++) {
		l = sg[i].length;
		if (l > SOFT_SLOT_PAYLOAD - len ||
		    fast_sge(qp, &sg[i], inl, &v))
			return UINT32_MAX;
		if (l)
			memcpy(p + len, v.iov_base, l);
		len += l;
	}
	return len;
}

/*
 * fast_publish -- post_send_fast's WQE for len bytes already in its slot
 * s (FLAGS SOFT_SF_COPIED) or in the copy ring up to RING_END (SOFT_SF_RING,
 * the offset in the slot), and the slot published.  Only the slot's first
 * line is written (slot.h): nothing of its tail is read for such a SEND
 * (no SGE list, key, address or chunk; status and rnr_timer are written by
 * whoever sets DONE or RNR).  Lock held.
 */
static inline __attribute__((always_inline)) void fast_publish(
	struct soft_qp *qp, struct ibv_send_wr *wr, struct soft_slot *s,
	uint32_t len, uint32_t flags, uint64_t ring_end)
{
	uint64_t idx = qp->sq_head, msgno = qp->tx_msgno;
	struct soft_swqe *e = &qp->sq[idx & qp->sq_mask];

	e->wr_id = wr->wr_id;
	e->wc_opcode = IBV_WC_SEND;
	e->byte_len = len;
	e->signaled = wr_signaled(qp, wr, idx);
	e->kind = SOFT_WQE_RING;
	e->op = SOFT_OP_SEND;
	/* a copied SEND's bytes are in the slot: whatever reads iovecs
	 * (serve_remote takes the payload; tx_chunk, asked by a peer that
	 * lies, copies nothing) has none to read; a ring SEND has one,
	 * the captured bytes (fast_ring) */
	e->niov = ring_end != 0;
	e->msgno = msgno;
	e->ring_end = ring_end;
	e->spill = NULL;
	qp->sq_head = idx + 1;
	qp->tx_msgno = msgno + 1;
	soft_qp_hot(qp); /* progress follows it until it completes */
	s->opcode = SOFT_OP_SEND;
	s->len = len;
	s->imm = wr->imm_data;
	if (wr->opcode == IBV_WR_SEND_WITH_IMM)
		flags |= SOFT_SF_IMM;
	else if (wr->opcode == IBV_WR_SEND_WITH_INV)
		flags |= SOFT_SF_INV; /* s->imm: invalidate_rkey */
	if (wr->send_flags & IBV_SEND_SOLICITED)
		flags |= SOFT_SF_SOLICITED;
	s->flags = flags | srq_stamp(qp, s);
	soft_tsan_release(qp);
	atomic_store_explicit(&s->state,
			      SOFT_SLOT_STATE(msgno, SOFT_SLOT_READY),
			      memory_order_release);
	cp_probe(0);
	qp->ctx->outstanding++;
	peer_wake(qp);
}

/* mirror_wqe -- receive WQE number n in a mirror at rq (nent entries of
 * nsge SGEs, sizes checked at connect) */
static inline struct soft_shm_rwqe *mirror_wqe(const char *rq, uint64_t n,
					       uint32_t nent, uint32_t nsge)
{
	return (void *)(uintptr_t)(rq + (n & (nent - 1)) *
						(8 + 16 * (uint64_t)nsge));
}

/* mirror_late -- message msgno came before mirrored WQE cons was posted
 * (its arrived: rx_arrived)?  Then it is NAKed (RNR), and the WQEs posted
 * by now, up to prod, are marked as there for its retransmission */
static int mirror_late(const char *rq, uint64_t cons, uint64_t prod,
		       uint32_t nent, uint32_t nsge, uint64_t msgno)
{
	struct soft_shm_rwqe *w;
	uint64_t i;

	if ((int32_t)(mirror_wqe(rq, cons, nent, nsge)->arrived -
		      (uint32_t)msgno) <= 0)
		return 0;
	for (i = cons; i != prod; i++) {
		w = mirror_wqe(rq, i, nent, nsge);
		if ((int32_t)(w->arrived - (uint32_t)msgno) > 0)
			w->arrived = (uint32_t)msgno;
	}
	return 1;
}

/*
 * mirror_sges -- the SGEs of receive WQE number cons in a responder's
 * mirror at rq (nent entries of nsge SGEs), into sge: their count, or -1
 * when the peer-written count is past nsge
 */
static int mirror_sges(const char *rq, uint64_t cons, uint32_t nent,
		       uint32_t nsge, struct ibv_sge *sge)
{
	const struct soft_shm_rwqe *w = mirror_wqe(rq, cons, nent, nsge);
	uint32_t num = w->num_sge;

	if (num > nsge)
		return -1;
	memcpy(sge, w->sge, (size_t)num * sizeof(*sge));
	return (int)num;
}

/* outbox_cqe -- the completion of receive WQE cons in the responder's
 * outbox (segment h, no SRQ), as its drain reads it (rx_drain) */
static void outbox_cqe(const struct soft_qp *qp, struct soft_seg_hdr *h,
		       uint64_t cons, uint32_t len, uint32_t imm,
		       uint32_t flags, uint32_t op)
{
	struct soft_shm_cqe *c =
		(void *)((char *)h + qp->peer_cq_off +
			 (cons & (qp->peer_rq_n - 1)) * sizeof(*c));

	c->byte_len = len;
	c->imm = imm;
	c->flags = flags;
	c->opcode = op;
}

/* served_done -- our message msgno, served for the responder (segment h,
 * its rx lock held): counted in its served word under our epoch, so that
 * it skips the slot, and the slot s DONE with status for our tx_qp */
static void served_done(struct soft_qp *qp, struct soft_seg_hdr *h,
			struct soft_slot *s, uint64_t msgno, uint32_t status)
{
	atomic_store_explicit(
		&h->served,
		SOFT_SERVED(atomic_load_explicit(&qp->seg->epoch,
						 memory_order_relaxed),
			    msgno + 1),
		memory_order_relaxed);
	s->status = status;
	soft_tsan_release(qp);
	atomic_store_explicit(&s->state, SOFT_SLOT_STATE(msgno, SOFT_SLOT_DONE),
			      memory_order_release);
}

/*
 * push_sge -- n bytes of the SEND at off into the responder's receive SGE
 * sge, where its HCA would place them: its MR is checked as an rkey is
 * (peer_mr: this very key, the responder's PD, local write, within the
 * MR) and must be mapped here (peer_map: a memfd of its, or our own
 * memory, not overlapping the source).  1: placed; 0: nothing to do here
 * (the copy ring takes the SEND, and the responder gives any error).
 */
static int push_sge(struct soft_qp *qp, const struct ibv_sge *sge, uint64_t n,
		    const struct iovec *src, uint32_t nsrc, uint64_t off)
{
	struct soft_reg_mr m;
	pthread_mutex_t *lk;
	uint64_t va = 0;
	uint8_t *p = NULL;

	if (peer_mr(qp, sge->lkey, sge->addr, n, IBV_ACCESS_LOCAL_WRITE, &va,
		    &m, &lk))
		return 0;
	if (m.kind == SOFT_KEY_MR)
		p = peer_map(qp, &m, va, n);
	if (p && qp->peer_pid == soft_self_pid &&
	    iov_overlap(src, (int)nsrc, p, n))
		p = NULL;
	if (p)
		soft_iov_gather(src, nsrc, off, p, n);
	if (lk)
		pthread_mutex_unlock(lk);
	return p != NULL;
}

/* tx_acked -- the responder's cumulative ACK (rx_ack) as we count it: no
 * further than a flush froze it (tx_freeze), so that no WQE succeeds
 * after one that was flushed */
static inline uint64_t tx_acked(const struct soft_qp *qp)
{
	uint64_t a =
		atomic_load_explicit(&qp->seg->acked, memory_order_acquire);

	soft_tsan_acquire(qp);
	return qp->ack_frozen && a > qp->ack_freeze ? qp->ack_freeze : a;
}

/* tx_freeze -- the ACK a flush goes by, taken once (until the reset): our
 * cancel first, which the responder looks at before every ACK it stores
 * (rx_ack); one it stored after our look (it looked before our store) is
 * an HCA's lost ACK: the message delivered, its WQE flushed */
static uint64_t tx_freeze(struct soft_qp *qp)
{
	if (!qp->ack_frozen) {
		atomic_store(&qp->seg->cancel, 1);
		qp->ack_freeze = atomic_load(&qp->seg->acked);
		qp->ack_frozen = 1;
	}
	return qp->ack_freeze;
}

/* rings_next -- the WR after a SEND in its chain is one that fast_push
 * leaves to the copy ring (a SEND out of its window, or anything else):
 * then this SEND goes there too, and the responder copies it out while we
 * copy the next one in */
static int rings_next(const struct soft_qp *qp, const struct ibv_send_wr *wr)
{
	uint64_t len = 0;
	int i;

	if (!wr)
		return 0;
	if ((wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM) ||
	    !wr->sg_list || wr->num_sge < 1 ||
	    (uint32_t)wr->num_sge > qp->cap.max_send_sge)
		return 1;
	for (i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	return len < SOFT_PUSH_MIN || len > SOFT_PUSH_MAX;
}

/*
 * fast_push -- fast_ring's SEND placed at once into the responder's next
 * posted receive, as its HCA places one: under the responder's rx lock
 * (as serve_remote, which does this for a responder that does not run)
 * the WQE at the head of its receive queue mirror, the bytes copied into
 * its buffers (push_sge: mapped memory only), the completion left in its
 * outbox, the message counted as served for it and our slot DONE.  One
 * copy instead of two (into the ring, out of it), made by the sender into
 * the buffer the receiver reads: rdmamsg_perf -t lat --busy (the server
 * echoes each message) 4 KiB 1.01-1.03 -> 0.92-0.99 us, 6,000 B 1.27 ->
 * 1.07-1.11, 8,100 B 1.53-1.55 -> 1.20-1.25.
 *
 * Only SOFT_PUSH_MIN to SOFT_PUSH_MAX bytes: smaller ones cost more in the
 * outbox's lines than the copy saves (1 KiB 0.66 -> 0.76); larger ones
 * pipeline through the ring, the responder copying one piece out while we
 * copy the next in.  The window's top takes rdmamsg's largest eager
 * message, 8 KiB and its header: 0.72-0.76 -> 0.56-0.58 us.  rdmamsg's
 * fragments of a larger message are as long, and the first of two placed
 * makes the pair slower than two through the ring, which overlap (10,000
 * B 1.14-1.18 -> 1.24-1.30 us, 12,000 B 1.31-1.34 -> 1.36-1.40; 16,000 B,
 * both placed, 1.71-1.75 either way).  Only in
 * order: every message before this one taken by the responder (its
 * cumulative ACK reached our number, or all of ours completed), or the
 * one before placed by us and drained from its outbox.  Anything unusual
 * (no receive posted, one too short, memory not mapped here, the lock
 * taken, SOFTRDMA_NO_PUSH=1) leaves the SEND to the ring, where the
 * responder finds and reports it as before; so does a SEND followed in
 * its chain by a WR that the ring takes (rings_next: rdmamsg posts a
 * message's fragments as one chain, and a pair of 8 KiB and less than 4
 * KiB overlaps there, 10,000 B 1.23-1.30 -> 1.16-1.19 us, 12,000 B
 * 1.34-1.43 -> 1.32-1.35).
 * 1: posted; 0: nothing taken.  Lock held.
 */
static int fast_push(struct soft_qp *qp, struct ibv_send_wr *wr,
		     struct soft_slot *s, const struct iovec *src,
		     uint32_t nsrc, uint64_t len)
{
	struct soft_seg_hdr *h = qp->peer;
	uint64_t msgno = qp->tx_msgno, idx = qp->sq_head, prod, cons, off = 0;
	uint64_t n, acked;
	struct ibv_sge sge[SOFT_MAX_SGE];
	struct soft_swqe *e;
	uint32_t z = 0, flags = 0;
	int i, num, ok = 0;

	if (len < SOFT_PUSH_MIN || len > SOFT_PUSH_MAX || qp->push_skip) {
		qp->push_skip -= !!qp->push_skip;
		return 0;
	}
	acked = tx_acked(qp);
	if (rings_next(qp, wr->next) || !qp->peer_rq_n || qp->peer_srq ||
	    qp->path_down || soft_push_off() ||
	    wr->opcode == IBV_WR_SEND_WITH_INV || qp->ack_frozen ||
	    (acked != msgno && qp->sq_tail != qp->sq_head &&
	     (qp->push_next != msgno ||
	      atomic_load_explicit(&h->rq_drained, memory_order_relaxed) !=
		      atomic_load_explicit(&h->rq_cons, memory_order_relaxed))))
		return 0;
	if (!atomic_compare_exchange_strong_explicit(&h->rx_lock, &z, 2,
						     memory_order_acquire,
						     memory_order_relaxed))
		return 0;
	if (!peer_listed(qp))
		goto unlock;
	prod = atomic_load_explicit(&h->rq_prod, memory_order_acquire);
	cons = atomic_load_explicit(&h->rq_cons, memory_order_relaxed);
	if (cons >= prod || prod - cons > qp->peer_rq_n)
		goto unlock; /* none posted (an RNR NAK), or a lie */
	num = mirror_sges((const char *)h + qp->peer_rq_off, cons,
			  qp->peer_rq_n, qp->peer_rq_sge, sge);
	if (num < 0)
		goto unlock; /* a count past its SGEs: the responder's to find */
	for (i = 0; i < num && off < len; i++) {
		n = len - off < sge[i].length ? len - off : sge[i].length;
		if (n && !push_sge(qp, &sge[i], n, src, nsrc, off)) {
			/* private memory, most likely the next time too */
			qp->push_skip = SOFT_PUSH_BACKOFF;
			goto unlock;
		}
		off += n;
	}
	if (off < len)
		goto unlock; /* too short: the responder's LOC_LEN_ERR */
	if (wr->opcode == IBV_WR_SEND_WITH_IMM)
		flags |= SOFT_SF_IMM;
	if (wr->send_flags & IBV_SEND_SOLICITED)
		flags |= SOFT_SF_SOLICITED;
	outbox_cqe(qp, h, cons, (uint32_t)len, wr->imm_data, flags,
		   SOFT_OP_SEND);
	soft_tsan_release(qp);
	atomic_store_explicit(&h->rq_cons, cons + 1, memory_order_release);
	served_done(qp, h, s, msgno, SOFT_ACK);
	e = &qp->sq[idx & qp->sq_mask];
	e->wr_id = wr->wr_id;
	e->wc_opcode = IBV_WC_SEND;
	e->byte_len = (uint32_t)len;
	e->signaled = wr_signaled(qp, wr, idx);
	e->kind = SOFT_WQE_RING;
	e->op = SOFT_OP_SEND;
	e->niov = 0;
	e->msgno = msgno;
	e->ring_end = 0;
	e->spill = NULL;
	qp->sq_head = idx + 1;
	qp->tx_msgno = msgno + 1;
	qp->push_next = msgno + 1;
	qp->pushed++;
	qp->ctx->outstanding++;
	soft_qp_hot(qp); /* its completion: the next pass */
	ok = 1;
unlock:
	atomic_store_explicit(&h->rx_lock, 0, memory_order_release);
	if (ok)
		peer_wake(qp);
	return ok;
}

/*
 * fast_ring -- post_send_fast's SEND past the slot (post_one's ring case,
 * ring_capture), out of line; the captured bytes are the WQE's one iovec.
 * From SOFT_RING_PIPE bytes, into an empty ring (a responder with nothing
 * else of ours to read), the slot is published with the first piece in
 * the ring (a quarter, at least 8 KiB) and the rest follows piece by
 * piece, each counted in the slot (ring_fill_set) once it is in: the
 * responder copies one out while we copy the next in.  All of it is in
 * before the post returns, as an HCA may have read it all by then.
 * ib_send_lat t_typical: 16 KiB 2.52-2.79 -> 2.20-2.50 us, 32 KiB
 * 4.44-4.73 -> 3.71-3.99, 64 KiB 7.38-7.62 -> 5.84-6.22.  Behind other
 * SENDs it goes whole, and pieces are never smaller than 8 KiB: the
 * responder has the others to copy meanwhile, and waiting for small
 * pieces it only lost (ib_send_bw -s 16384 with 4 KiB pieces: 15.3 ->
 * 11-13 GB/s).  1: posted; 0: not for the fast path (an SGE it cannot
 * check, inline bytes past max_inline_data, no room in the ring),
 * nothing taken.  Lock held.
 */
static __attribute__((noinline)) int fast_ring(struct soft_qp *qp,
					       struct ibv_send_wr *wr,
					       struct soft_slot *s, int inl)
{
	struct iovec *iov =
		qp->sq_iov + (qp->sq_head & qp->sq_mask) * qp->sq_iov_n;
	struct iovec src[SOFT_MAX_SGE];
	uint32_t niov = (uint32_t)wr->num_sge;
	uint64_t len = 0, piece, done, n;
	int64_t ring;
	int i;

	for (i = 0; i < wr->num_sge; i++) {
		if (fast_sge(qp, &wr->sg_list[i], inl, &iov[i]))
			return 0;
		len += wr->sg_list[i].length;
	}
	if (inl && len > qp->cap.max_inline_data)
		return 0;
	if (fast_push(qp, wr, s, iov, niov, len))
		return 1;
	piece = len;
	if (len >= SOFT_RING_PIPE && qp->ring_head == qp->ring_tail) {
		piece = len / 4 < SOFT_RING_PIECE_MIN
				? SOFT_RING_PIECE_MIN
				: (len / 4 + 63) & ~(uint64_t)63;
		memcpy(src, iov, niov * sizeof(*iov)); /* iov[0] changes */
	}
	ring = ring_capture(qp, s, iov, niov, len, piece);
	if (ring < 0)
		return 0;
	fast_publish(qp, wr, s, (uint32_t)len, SOFT_SF_RING, qp->ring_head);
	for (done = piece; done < len; done += n) {
		n = len - done < piece ? len - done : piece;
		soft_iov_gather(src, niov, done, qp->ring + ring + done, n);
		ring_fill_set(s, done + n);
	}
	return 1;
}

/*
 * post_send_fast -- the usual ibv_post_send on a connected local RC QP:
 * one SEND, SEND_WITH_IMM or SEND_WITH_INV (a rendezvous FIN), or with
 * chain one of a chain of them (rc_post_slow), whose SGEs (at least one)
 * add up to what fits a slot or the copy ring (fast_ring), in RTS, with
 * nothing held or failed before it.  The checks of check_wr
 * and gather and the slot of post_one, without their general cases
 * (tools/soft_pingpong-insns.sh counts it).  0: not such a WR, or one
 * that fails a check: nothing done but bytes copied into the free slot
 * that the general path then fills again (and gives the error).  Lock
 * held.
 */
static inline __attribute__((always_inline)) int post_send_fast(
	struct soft_qp *qp, struct ibv_send_wr *wr, int chain)
{
	const struct ibv_sge *sg = wr->sg_list;
	struct iovec v; /* an SGE's bytes: the WQE keeps no iovecs (niov 0) */
	struct soft_slot *s;
	uint32_t len;
	int n = wr->num_sge, inl = !!(wr->send_flags & IBV_SEND_INLINE);

	/* the opcode first: a READ, WRITE or bind is told in one test */
	if ((wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM &&
	     wr->opcode != IBV_WR_SEND_WITH_INV) ||
	    (wr->next && !chain) || n < 1 ||
	    (uint32_t)n > qp->cap.max_send_sge || !sg ||
	    qp->state != IBV_QPS_RTS || qp->sq_err_pending || !qp->peer ||
	    qp->nheld || qp->sq_head - qp->sq_tail >= qp->cap.max_send_wr)
		return 0;
	s = slot_at(qp->slots, qp->tx_msgno, qp->sq_mask);
	if (n == 1 && sg->length <= SOFT_SLOT_PAYLOAD) { /* straight */
		len = sg->length;
		if (fast_sge(qp, sg, inl, &v))
			return 0;
		copy_small(s->payload, v.iov_base, len, 0);
	} else {
		len = fast_gather(qp, sg, n, inl, s->payload);
		if (__builtin_expect(len == UINT32_MAX, 0))
			return fast_ring(qp, wr, s, inl); /* past the slot */
	}
	if (inl && len > qp->cap.max_inline_data)
		return 0;
	fast_publish(qp, wr, s, len, SOFT_SF_COPIED, 0);
	return 1;
}

/* rnr_wait -- a send of ctx waits for its RNR timer: the progress
 * thread, if the context has one, passes until it goes again (and now,
 * when the program found it: the program may sleep until it is done) */
static void rnr_wait(struct soft_context *ctx)
{
	if (ctx->rnr_wait)
		return;
	soft_hint_set(&ctx->rnr_wait, 1);
	if (ctx->thread_started && !ctx->in_thread)
		soft_wake_thread((uint32_t)ctx->reg_idx);
}

static void tx_qp(struct soft_qp *qp);
static void flush_rq(struct soft_qp *qp);

/*
 * soft_qp_flush -- push the completions that are due now (finished send
 * WQEs in order, a QP in ERR flushes its receives), so that an armed CQ
 * signals its channel at once; lock held
 */
void soft_qp_flush(struct soft_qp *qp)
{
	soft_qp_hot(qp); /* whatever a trylock leaves: the next pass */
	qp->ops->flush(qp);
}

static void rc_sq_release(struct soft_qp *qp);

/* rc_flush -- soft_qp_flush of an RC QP; lock held */
static void rc_flush(struct soft_qp *qp)
{
	if (qp->sq_tail != qp->sq_head)
		tx_qp(qp);
	if (qp->state == IBV_QPS_ERR && qp->nheld)
		rc_sq_release(qp); /* held behind max_rd_atomic 0: flushed */
	if (qp->state == IBV_QPS_ERR && qp->rq_tail != qp->rq_head)
		flush_rq(qp);
}

/* rc_net_flush -- soft_qp_flush of an RC QP to another host; lock held */
static void rc_net_flush(struct soft_qp *qp)
{
	soft_net_progress(qp); /* the network path (net.c) */
	rc_flush(qp);
}

/* soft_sq_release -- out of SQD: the held WRs run now, in order (in ERR
 * each completes flushed); lock held */
void soft_sq_release(struct soft_qp *qp)
{
	qp->sqd_notify = 0;
	qp->ops->sq_release(qp);
}

/*
 * rd_none -- WR is a READ or an atomic (an atomic write too) and the QP's
 * max_rd_atomic is 0: it may not begin, as in rxe (rxe_qp.c sets the
 * requester's rd_atomic count to 0, which rxe_req.c's check_init_depth
 * never passes), and the send queue stops at it.  On one host these are
 * carried out at post, one at a time, so any larger limit is met; 0 holds
 * the WR, and all posted behind it, as in SQD (sq_hold) until the QP is
 * given a limit (SQD, then RTS: rc_sq_release) or goes to ERR (flushed).
 */
static int __attribute__((noinline))
rd_none(const struct soft_qp *qp, const struct ibv_send_wr *wr)
{
	return !qp->attr.max_rd_atomic && soft_op_rd_atomic(wr->opcode);
}

/* rc_sq_release -- soft_sq_release of an RC QP: the held WRs in order, up
 * to one that max_rd_atomic 0 still holds (rd_none; in ERR all go,
 * flushed); lock held */
static void rc_sq_release(struct soft_qp *qp)
{
	struct soft_held *h;

	while ((h = qp->held)) {
		if (qp->state != IBV_QPS_ERR && rd_none(qp, &h->wr))
			break;
		qp->held = h->next;
		qp->nheld--;
		post_one(qp, &h->wr, h->len);
		free(h);
	}
	if (qp->sq_tail != qp->sq_head)
		tx_qp(qp);
}

/* rc_net_sq_release -- soft_sq_release of an RC QP to another host: what
 * its network path held in SQD is sent now; lock held */
static void rc_net_sq_release(struct soft_qp *qp)
{
	rc_sq_release(qp);
	soft_net_sq_release(qp);
}

/* rc_post_send -- ibv_post_send on an RC QP; lock held */
static int rc_post_send(struct soft_qp *qp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad)
{
	uint64_t len;
	int ret = 0;

	if (qp->state < IBV_QPS_RTS) {
		*bad = wr;
		return EINVAL;
	}
	if (qp->state == IBV_QPS_SQD)
		return sq_hold_all(qp, wr, bad);
	for (; wr; wr = wr->next) {
		ret = check_wr(qp, wr, &len);
		if (!ret && (qp->nheld || rd_none(qp, wr)))
			ret = sq_hold(qp, wr, len); /* behind max_rd_atomic 0 */
		else if (!ret)
			post_one(qp, wr, len);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	/*
	 * One-sided ops, local errors and flushes are finished at post
	 * time: their completions (and the event of an armed CQ) are due
	 * now, not at the next poll or progress-thread sweep.  (A SEND
	 * in flight at the tail holds back what follows it.)  So is a
	 * request refused for the responder (its slot DONE at post).
	 */
	if (qp->sq_tail != qp->sq_head &&
	    (qp->sq[qp->sq_tail & qp->sq_mask].kind == SOFT_WQE_DONE ||
	     qp->sq_err_pending))
		tx_qp(qp);
	return ret;
}

/* rc_post_slow -- what post_send_fast did not take alone: a chain goes
 * the same way WR by WR, until one is not for it (that one and those
 * after it: rc_post_send, as is anything else).  Lock held. */
static __attribute__((noinline)) int rc_post_slow(struct soft_qp *qp,
						  struct ibv_send_wr *wr,
						  struct ibv_send_wr **bad)
{
	if (wr->next)
		for (; wr; wr = wr->next)
			if (!post_send_fast(qp, wr, 1))
				break;
	return wr ? rc_post_send(qp, wr, bad) : 0;
}

/*
 * rc_ops_post_send -- ibv_post_send on an RC QP.  qp->ops was read
 * without the lock: a QP whose path changed meanwhile (a modify to RTR or
 * RESET on another thread) is posted to through its new operations.
 */
static int rc_ops_post_send(struct soft_qp *qp, struct ibv_send_wr *wr,
			    struct ibv_send_wr **bad)
{
	int ret, biased = soft_ctx_enter(qp->ctx, qp->single);

	if (__builtin_expect(qp->ops != &soft_rc_ops, 0)) {
		soft_ctx_exit(qp->ctx, biased);
		return qp->ops->post_send(qp, wr, bad);
	}
	if (post_send_fast(qp, wr, 0)) {
		soft_ctx_exit(qp->ctx, biased);
		return 0;
	}
	ret = rc_post_slow(qp, wr, bad);
	soft_ctx_exit(qp->ctx, biased);
	return ret;
}

/* soft_post_send -- ibv_post_send: the QP's kind (qpops.h) */
int soft_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		   struct ibv_send_wr **bad)
{
	struct soft_qp *qp = to_sqp(ibqp);

	return qp->ops->post_send(qp, wr, bad);
}

/* rq_mirror -- publish a receive WQE where the initiator can take it */
static inline __attribute__((always_inline)) void rq_mirror(
	struct soft_qp *qp, const struct soft_rwqe *r)
{
	struct soft_shm_rwqe *w = mirror_wqe(qp->rq_shm, qp->rq_head,
					     qp->rq_size, qp->cap.max_recv_sge);

	w->num_sge = r->num_sge;
	w->arrived = (uint32_t)r->arrived;
	if (r->num_sge == 1) /* the usual case: no call */
		w->sge[0] = r->sge[0];
	else
		memcpy(w->sge, r->sge, (size_t)r->num_sge * sizeof(r->sge[0]));
}

/* rx_came -- has the peer's message K come (its slot published, not
 * NAKed for a retransmission nor withdrawn)? */
static inline int rx_came(const struct soft_qp *qp, uint64_t k)
{
	uint64_t st = atomic_load_explicit(
		&slot_at(qp->peer_slots, k, qp->peer_mask)->state,
		memory_order_acquire);

	return (st >> 8) == k + 1 && (st & 0xff) != SOFT_SLOT_RNR &&
	       (st & 0xff) != SOFT_SLOT_CANCEL;
}

/* rx_arrived_count -- rx_arrived's count: the peer's messages that have
 * come, from ours on */
static __attribute__((noinline)) uint64_t rx_arrived_count(
	const struct soft_qp *qp)
{
	uint64_t k = qp->peer_cons;
	uint32_t n;

	for (n = 0; n <= qp->peer_mask && rx_came(qp, k); n++)
		k++;
	return k;
}

/*
 * rx_arrived -- for a receive WQE posted now: how many of the peer's
 * messages have come, in order from ours (up to the first not there or
 * NAKed: RNR, whose retransmission and all after it come later).  The
 * WQE was not there when they came: an HCA, which takes the WQE on
 * arrival, NAKed the one of them that takes it (rx_late).  The first
 * message that can take it is one past each WQE ahead of it: while that
 * one has not come (or cannot have: more WQEs ahead than the peer has
 * slots), it is the answer, without counting.  0 (no check) without a
 * peer on this host.  Lock held.
 */
static inline __attribute__((always_inline)) uint64_t rx_arrived(
	const struct soft_qp *qp)
{
	uint64_t ahead = qp->rq_head - qp->rq_tail;

	if (!qp->peer_slots)
		return 0;
	if (ahead > qp->peer_mask || !rx_came(qp, qp->peer_cons + ahead))
		return qp->peer_cons + ahead;
	return rx_arrived_count(qp);
}

/* rc_post_recv -- ibv_post_recv on an RC QP, ARRIVED rx_arrived's; lock
 * held */
static inline __attribute__((always_inline)) int rc_post_recv(
	struct soft_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad,
	uint64_t arrived)
{
	struct soft_rwqe *r;
	int ret = 0;

	if (qp->srq || qp->state == IBV_QPS_RESET) {
		*bad = wr;
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 ||
		    (uint32_t)wr->num_sge > qp->cap.max_recv_sge ||
		    (wr->num_sge && !wr->sg_list)) {
			ret = EINVAL;
			*bad = wr;
			break;
		}
		if (qp->rq_head - qp->rq_tail >= qp->cap.max_recv_wr) {
			ret = ENOMEM;
			*bad = wr;
			break;
		}
		r = &qp->rq[qp->rq_head & (qp->rq_size - 1)];
		r->wr_id = wr->wr_id;
		r->num_sge = (uint32_t)wr->num_sge;
		r->arrived = arrived;
		if (wr->num_sge == 1) /* the usual case: no call */
			r->sge[0] = wr->sg_list[0];
		else if (wr->num_sge) /* sg_list may be NULL then (rsocket) */
			memcpy(r->sge, wr->sg_list,
			       (size_t)wr->num_sge * sizeof(*wr->sg_list));
		if (qp->rq_shm)
			rq_mirror(qp, r);
		qp->rq_head++;
	}
	if (qp->rq_shm)
		atomic_store_explicit(&qp->seg->rq_prod, qp->rq_head,
				      memory_order_release);
	if (qp->state == IBV_QPS_ERR)
		soft_qp_flush(qp);
	return ret;
}

/* rc_post_recv_slow -- rc_post_recv out of line: the general case; lock
 * held */
static __attribute__((noinline)) int rc_post_recv_slow(struct soft_qp *qp,
						       struct ibv_recv_wr *wr,
						       struct ibv_recv_wr **bad,
						       uint64_t arrived)
{
	return rc_post_recv(qp, wr, bad, arrived);
}

/*
 * rc_post_recv_one -- the usual ibv_post_recv: one WR of one SGE on a QP
 * without SRQ, in INIT to RTS, with room: what rc_post_recv does for it,
 * without its loop and general cases.  0: not such a WR (nothing done).
 * Lock held.
 */
static inline __attribute__((always_inline)) int rc_post_recv_one(
	struct soft_qp *qp, struct ibv_recv_wr *wr, uint64_t arrived)
{
	struct soft_rwqe *r;

	if (wr->num_sge != 1 || !wr->sg_list || qp->srq ||
	    qp->state == IBV_QPS_RESET || qp->state == IBV_QPS_ERR ||
	    !qp->cap.max_recv_sge ||
	    qp->rq_head - qp->rq_tail >= qp->cap.max_recv_wr)
		return 0;
	r = &qp->rq[qp->rq_head & (qp->rq_size - 1)];
	r->wr_id = wr->wr_id;
	r->num_sge = 1;
	r->arrived = arrived;
	r->sge[0] = wr->sg_list[0];
	if (qp->rq_shm) {
		rq_mirror(qp, r);
		qp->rq_head++;
		atomic_store_explicit(&qp->seg->rq_prod, qp->rq_head,
				      memory_order_release);
	} else {
		qp->rq_head++;
	}
	return 1;
}

/*
 * rc_post_recv_chain -- ibv_post_recv of a chain of WRs of one SGE each
 * (librdmamsg's batches) on a QP without SRQ, in INIT to RTS, with room:
 * what rc_post_recv does for them, with the queue's fields in registers
 * and the producer index published once a chain.  Returns the first WR
 * it did not post (NULL: all), from which rc_post_recv goes on with its
 * checks (its error and bad_wr then name that WR; the ones before are
 * posted, as rc_post_recv would have posted them).  Lock held.
 */
static inline __attribute__((always_inline)) struct ibv_recv_wr *
rc_post_recv_chain(struct soft_qp *qp, struct ibv_recv_wr *wr, uint64_t arrived)
{
	uint64_t head = qp->rq_head, end;
	uint32_t i = (uint32_t)head & (qp->rq_size - 1);
	struct soft_rwqe *r = &qp->rq[i];
	struct soft_seg_hdr *h = qp->seg;
	struct soft_shm_rwqe *w = NULL;
	struct ibv_recv_wr *next;
	size_t stride = 0;
	struct ibv_sge sge;

	if (qp->srq || qp->state == IBV_QPS_RESET || qp->state == IBV_QPS_ERR ||
	    !qp->cap.max_recv_sge)
		return wr;
	end = qp->rq_tail + qp->cap.max_recv_wr; /* head past it: full */
	if (qp->rq_shm) {
		stride = 8 + 16 * (size_t)qp->cap.max_recv_sge;
		w = mirror_wqe(qp->rq_shm, i, qp->rq_size,
			       qp->cap.max_recv_sge);
	}
	while (head < end && wr->num_sge == 1 && wr->sg_list) {
		next = wr->next;
		sge = wr->sg_list[0];
		r->wr_id = wr->wr_id;
		r->num_sge = 1;
		r->arrived = arrived;
		r->sge[0] = sge;
		if (w) {
			w->num_sge = 1;
			w->arrived = (uint32_t)arrived;
			w->sge[0] = sge;
			w = (void *)((char *)w + stride);
		}
		head++;
		r++;
		if (++i == qp->rq_size) { /* the ring wraps */
			i = 0;
			r = qp->rq;
			if (w)
				w = (void *)qp->rq_shm;
		}
		wr = next;
		if (!wr)
			break;
	}
	if (head != qp->rq_head) {
		qp->rq_head = head;
		if (w)
			atomic_store_explicit(&h->rq_prod, head,
					      memory_order_release);
	}
	return wr;
}

/* rc_ops_post_recv -- ibv_post_recv on an RC QP (either path) */
static int rc_ops_post_recv(struct soft_qp *qp, struct ibv_recv_wr *wr,
			    struct ibv_recv_wr **bad)
{
	int ret = 0, biased = soft_ctx_enter(qp->ctx, qp->single);
	uint64_t arrived = rx_arrived(qp);

	if (!wr->next) {
		if (!rc_post_recv_one(qp, wr, arrived))
			ret = rc_post_recv_slow(qp, wr, bad, arrived);
	} else {
		wr = rc_post_recv_chain(qp, wr, arrived);
		if (__builtin_expect(wr != NULL, 0))
			ret = rc_post_recv_slow(qp, wr, bad, arrived);
	}
	soft_ctx_exit(qp->ctx, biased);
	return ret;
}

/* soft_post_recv -- ibv_post_recv: the QP's kind (qpops.h) */
int soft_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		   struct ibv_recv_wr **bad)
{
	struct soft_qp *qp = to_sqp(ibqp);

	return qp->ops->post_recv(qp, wr, bad);
}

/* srq_mirror -- publish an SRQ receive WQE (at srq->head) for initiators */
static void srq_mirror(struct soft_srq *srq, const struct soft_rwqe *r)
{
	struct soft_srq_hdr *h = srq->shm;
	struct soft_shm_rwqe *w;

	if (!h)
		return;
	w = mirror_wqe(srq->shm_rq, srq->head, srq->shm_n, srq->max_sge);
	w->num_sge = r->num_sge;
	memcpy(w->sge, r->sge, (size_t)r->num_sge * sizeof(r->sge[0]));
}

/* soft_post_srq_recv -- ibv_post_srq_recv */
int soft_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad)
{
	struct soft_srq *srq = to_ssrq(ibsrq);
	struct soft_rwqe *r;
	uint32_t now;
	int ret = 0;

	soft_lock(&srq->ctx->lock);
	now = srq->stamp ? soft_now_us() : 0;
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > srq->max_sge ||
		    (wr->num_sge && !wr->sg_list)) {
			ret = EINVAL;
			*bad = wr;
			break;
		}
		ret = soft_srq_room(srq);
		if (ret) {
			*bad = wr;
			break;
		}
		r = &srq->rq[srq->head & (srq->size - 1)];
		r->wr_id = wr->wr_id;
		r->num_sge = (uint32_t)wr->num_sge;
		r->posted_us = now;
		if (wr->num_sge) /* sg_list may be NULL then (rsocket) */
			memcpy(r->sge, wr->sg_list,
			       (size_t)wr->num_sge * sizeof(*wr->sg_list));
		srq_mirror(srq, r);
		srq->head++;
	}
	if (srq->shm)
		atomic_store_explicit(&srq->shm->prod, srq->head,
				      memory_order_release);
	soft_unlock(&srq->ctx->lock);
	return ret;
}

/*
 * The responder.  Everything in a peer slot is untrusted: the header is
 * decoded once (soft_slot_decode) and only that snapshot is used; data is
 * copied only from the pid recorded at connect, or from the payload within
 * the checked length.  A malformed slot is an invalid request: it is
 * NAKed, the responder QP goes to ERR (IBV_EVENT_QP_REQ_ERR), and its
 * receives flush.  A message that cannot be had (its sender died, or
 * flushed it) stops the stream there: later messages of that sender are
 * never delivered (RC does not skip).
 */

/* rx_wqe -- the receive WQE the next message takes, or NULL */
static struct soft_rwqe *rx_wqe(struct soft_qp *qp)
{
	if (qp->srq)
		return qp->srq->head == qp->srq->tail
			       ? NULL
			       : &qp->srq->rq[qp->srq->tail &
					      (qp->srq->size - 1)];
	return qp->rq_head == qp->rq_tail
		       ? NULL
		       : &qp->rq[qp->rq_tail & (qp->rq_size - 1)];
}

/*
 * rx_late -- did message peer_cons, in s, come before r, its receive WQE,
 * was posted?  Then an HCA NAKed it (RNR).  On our own receive queue,
 * rx_arrived's count says; its retransmission, and those of the messages
 * after it, will find every WQE posted by now: they are marked so, in
 * the mirror too (for an initiator that serves the retransmission).  On
 * an SRQ, whose WQEs several QPs' messages take, the sender stamped the
 * SRQ's count of free WQEs (srq_stamp), anew for the retransmission.
 */
static int rx_late(struct soft_qp *qp, const struct soft_rwqe *r,
		   const struct soft_slot *s)
{
	uint64_t i;

	if (qp->srq)
		return srq_came_empty(s);
	if (r->arrived <= qp->peer_cons)
		return 0;
	/* the mirror's copy lower: an initiator serving us NAKed this
	 * message already (mirror_late); its retransmission takes the WQE */
	if (qp->rq_shm &&
	    !mirror_late(qp->rq_shm, qp->rq_tail, qp->rq_head, qp->rq_size,
			 qp->cap.max_recv_sge, qp->peer_cons))
		return 0;
	for (i = qp->rq_tail; i != qp->rq_head; i++) {
		struct soft_rwqe *w = &qp->rq[i & (qp->rq_size - 1)];

		if (w->arrived > qp->peer_cons)
			w->arrived = qp->peer_cons;
	}
	return 1;
}

/* rx_rnr -- NAK the message in s (state ST) with RNR: its sender's
 * progress thread, if it has one, is woken, armed CQ or not, to send it
 * again after our min_rnr_timer even while its program does not call
 * it, as its HCA would; without one, we take it for the sender once the
 * timer has passed (rx_retry_due) */
static void rx_rnr(struct soft_qp *qp, struct soft_slot *s, uint64_t st)
{
	qp->rnr_nak_msg = qp->peer_cons + 1;
	qp->rnr_nak_ns = soft_now_ns();
	s->rnr_timer = qp->attr.min_rnr_timer;
	atomic_compare_exchange_strong(
		&s->state, &st, SOFT_SLOT_STATE(qp->peer_cons, SOFT_SLOT_RNR));
	peer_wake(qp);
	if (!qp->peer_same_ctx)
		soft_wake_thread(qp->peer_ctx_idx);
}

/*
 * rx_retry_due -- message peer_cons, in s, was RNR NAKed by us; its
 * sender has not sent it again though its HCA would have by now (the
 * timer passed, retries left, a WQE posted now): its process does not
 * run.  Then we take it as that retransmission, as its HCA would have
 * sent it (the sender's progress thread does it while the process only
 * sleeps: stopped, it cannot).  A chunked message needs its sender.
 */
static int rx_retry_due(struct soft_qp *qp, const struct soft_slot *s)
{
	const struct soft_seg_hdr *h = qp->peer;
	uint64_t tries, m = qp->peer_cons;
	uint32_t used;

	if (qp->rnr_nak_msg != m + 1 || (s->flags & SOFT_SF_CHUNKED) ||
	    (s->opcode != SOFT_OP_SEND && s->opcode != SOFT_OP_WRITE_IMM) ||
	    !rx_wqe(qp))
		return 0;
	tries = atomic_load_explicit(&h->rnr_tries, memory_order_relaxed);
	used = tries >> 8 == m + 1 ? (uint32_t)(tries & 0xff) : 0;
	if (h->rnr_retry != 7 && used >= h->rnr_retry)
		return 0; /* its HCA gives up: RNR_RETRY_EXC_ERR */
	if (soft_now_ns() - qp->rnr_nak_ns <
	    (uint64_t)rnr_table[s->rnr_timer & 31] * 10000ull) {
		rnr_wait(qp->ctx); /* a pass again soon */
		return 0;
	}
	return 1;
}

/* rx_take_wqe -- consume the WQE rx_wqe returned */
static inline void rx_take_wqe(struct soft_qp *qp)
{
	if (qp->srq) {
		qp->srq->tail++;
		if (qp->srq->shm) /* its lock is ours (rx_qp) */
			atomic_store_explicit(&qp->srq->shm->cons,
					      qp->srq->tail,
					      memory_order_release);
		soft_srq_check_limit(qp->srq);
	} else {
		qp->rq_tail++;
		if (qp->rq_shm)
			atomic_store_explicit(&qp->seg->rq_cons, qp->rq_tail,
					      memory_order_release);
	}
}

/* rx_trylock -- the right to consume this QP's incoming slots and WQEs
 * (the initiator may hold it while it serves us) */
static int rx_trylock(struct soft_qp *qp)
{
	uint32_t z = 0;

	return atomic_compare_exchange_strong_explicit(&qp->seg->rx_lock, &z, 1,
						       memory_order_acquire,
						       memory_order_relaxed);
}

static void rx_unlock(struct soft_qp *qp)
{
	atomic_store_explicit(&qp->seg->rx_lock, 0, memory_order_release);
}

/*
 * rx_drain -- the receive completions the initiator produced for us, in
 * order: each names the WQE at our tail (its wr_id and buffers are taken
 * from our private copy; the peer-written entry gives only length, imm
 * and flags, checked against that WQE); rx lock held
 */
static void rx_drain(struct soft_qp *qp)
{
	struct soft_seg_hdr *h = qp->seg;
	const struct soft_shm_cqe *c;
	struct soft_shm_cqe e;
	struct soft_rwqe *r;
	struct ibv_wc wc;
	uint64_t cons, room;
	uint32_t i;

	if (qp->srq || !qp->rq_shm || qp->drain_bad)
		return;
	cons = atomic_load_explicit(&h->rq_cons, memory_order_acquire);
	if (qp->rq_tail < cons)
		soft_tsan_acquire(qp);
	while (qp->rq_tail < cons && qp->rq_tail < qp->rq_head) {
		c = &qp->rq_outbox[qp->rq_tail & (qp->rq_size - 1)];
		memcpy(&e, c, sizeof(e));
		r = &qp->rq[qp->rq_tail & (qp->rq_size - 1)];
		for (room = 0, i = 0; i < r->num_sge; i++)
			room += r->sge[i].length;
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = r->wr_id;
		wc.qp_num = qp->qpx.qp_base.qp_num;
		wc.src_qp = qp->dest_qpn;
		wc.byte_len = e.byte_len;
		wc.opcode = e.opcode == SOFT_OP_WRITE_IMM
				    ? IBV_WC_RECV_RDMA_WITH_IMM
				    : IBV_WC_RECV;
		if (e.flags & SOFT_SF_IMM) {
			wc.imm_data = e.imm;
			wc.wc_flags = IBV_WC_WITH_IMM;
		}
		if (wc.opcode == IBV_WC_RECV && e.byte_len > room)
			wc.status = IBV_WC_LOC_LEN_ERR; /* too short */
		else if (e.flags & SOFT_CQE_PROT)
			wc.status = IBV_WC_LOC_PROT_ERR;
		qp->rq_tail++;
		soft_cq_push(qp->rcq, &wc, !!(e.flags & SOFT_SF_SOLICITED));
		if (wc.status != IBV_WC_SUCCESS) {
			qp->drain_bad = 1; /* nothing after it: flush */
			soft_qp_to_error(qp);
			break;
		}
	}
	atomic_store_explicit(&h->rq_drained, qp->rq_tail,
			      memory_order_relaxed);
}

/* holder_alive -- the target that holds completion c (xrc.c
 * soft_xsrq_hold) is still there, in a live process */
static __attribute__((noinline)) int holder_alive(
	const struct soft_shm_srq_cqe *c)
{
	struct soft_reg_qp e;

	return soft_reg_qp_lookup(__atomic_load_n(&c->qpn, __ATOMIC_RELAXED),
				  &e) >= 0 &&
	       e.qp_type == IBV_QPT_XRC_RECV && soft_pid_alive(e.pid, e.start);
}

/* srq_complete -- the completion e of WQE r: on the QP of this context
 * it names (none: it was destroyed, nothing), or an XRC SRQ's own CQ */
static void srq_complete(struct soft_context *ctx, struct soft_srq *srq,
			 const struct soft_rwqe *r,
			 const struct soft_shm_srq_cqe *e)
{
	struct soft_qp *qp;
	struct ibv_wc wc;
	uint64_t room;
	uint32_t i;

	/* an XRC SRQ's completions go to its own CQ, naming the target QP
	 * (of any process) and the initiator */
	qp = srq->xcq ? NULL : soft_qp_local_in(ctx, e->qpn);
	if (!srq->xcq && (!qp || qp->srq != srq))
		return;
	for (room = 0, i = 0; i < r->num_sge; i++)
		room += r->sge[i].length;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = r->wr_id;
	wc.qp_num = e->qpn & 0xffffff;
	wc.src_qp =
		!qp || qp->ops->any_src ? e->src_qp & 0xffffff : qp->dest_qpn;
	wc.byte_len = e->byte_len;
	wc.opcode = e->opcode == SOFT_OP_WRITE_IMM ? IBV_WC_RECV_RDMA_WITH_IMM
						   : IBV_WC_RECV;
	if (e->flags & SOFT_SF_IMM) {
		wc.imm_data = e->imm;
		wc.wc_flags = IBV_WC_WITH_IMM;
	} else if (e->flags & SOFT_SF_INV) {
		wc.invalidated_rkey = e->imm;
		wc.wc_flags = IBV_WC_WITH_INV;
	}
	if (SOFT_CQE_STATUS_OF(e->flags))
		wc.status = (enum ibv_wc_status)SOFT_CQE_STATUS_OF(e->flags);
	else if (wc.opcode == IBV_WC_RECV && e->byte_len > room)
		wc.status = IBV_WC_LOC_LEN_ERR;
	else if (e->flags & SOFT_CQE_PROT)
		wc.status = IBV_WC_LOC_PROT_ERR;
	soft_cq_push(qp ? qp->rcq : srq->xcq, &wc,
		     !!(e->flags & SOFT_SF_SOLICITED));
	/* a DCT serves every initiator: one's error is not its own; nor is
	 * an XRC target's */
	if (qp && wc.status != IBV_WC_SUCCESS && !qp->ops->any_src)
		soft_qp_to_error(qp);
}

/*
 * srq_drain -- the completions initiators produced on the SRQ: each
 * takes its WQE (wr_id and buffers from our private copy, by number)
 * and names the QP of this context it came on (srq_complete).  One HELD
 * for a message still arriving (xrc.c soft_xsrq_hold) is left for a
 * later drain and those after it are reported now, marked TAKEN so that
 * the tail passes them later, as an HCA completes an SRQ's messages out
 * of order; once its holder is gone (looked at every 100 ms while holds
 * wait, holder_alive) it is flushed.  The SRQ's lock is held.
 */
static void srq_drain(struct soft_context *ctx, struct soft_srq *srq)
{
	struct soft_srq_hdr *h = srq->shm;
	struct soft_shm_srq_cqe *c, e;
	uint32_t was = srq->nheld, fl;
	uint64_t cons, k, now;
	int look = 0;

	if (__builtin_expect(was != 0, 0)) {
		now = soft_now_ns();
		look = now >= srq->held_check;
		if (look)
			srq->held_check = now + 100000000ull;
	}
	srq->nheld = 0;
	cons = atomic_load_explicit(&h->cons, memory_order_acquire);
	for (k = srq->tail; k < cons && k < srq->head; k++) {
		c = &srq->shm_cq[k & (srq->shm_n - 1)];
		fl = __atomic_load_n(&c->flags, __ATOMIC_ACQUIRE);
		if (!(fl & SOFT_CQE_TAKEN)) {
			if (__builtin_expect(fl & SOFT_CQE_HELD, 0) &&
			    (!look || holder_alive(c))) {
				srq->nheld++; /* its message still arrives */
				continue;
			}
			memcpy(&e, c, sizeof(e));
			if (e.flags & SOFT_CQE_HELD) { /* its holder is gone */
				e.flags = SOFT_CQE_STATUS(IBV_WC_WR_FLUSH_ERR);
				e.byte_len = 0;
				e.opcode = SOFT_OP_SEND;
			}
			srq_complete(ctx, srq, &srq->rq[k & (srq->size - 1)],
				     &e);
			if (k != srq->tail) { /* past a HELD one */
				__atomic_store_n(&c->flags, SOFT_CQE_TAKEN,
						 __ATOMIC_RELAXED);
				continue;
			}
		}
		if (k == srq->tail) {
			srq->tail++;
			soft_srq_check_limit(srq);
		}
	}
	if (srq->nheld && !was)
		srq->held_check = soft_now_ns() + 100000000ull;
}

/* soft_srq_drain -- srq_drain for a DC target, which has no ring (dc.c) */
void soft_srq_drain(struct soft_srq *srq)
{
	uint32_t z = 0;

	if (!srq->shm || !atomic_compare_exchange_strong_explicit(
				 &srq->shm->lock, &z, 1, memory_order_acquire,
				 memory_order_relaxed))
		return;
	srq_drain(srq->ctx, srq);
	atomic_store_explicit(&srq->shm->lock, 0, memory_order_release);
}

/*
 * soft_srq_hold -- the right to take the SRQ's WQEs, for a QP that takes
 * them outside rx_qp (UD, UC: ud.c): its lock, as rx_qp holds it, and
 * what initiators consumed drained first, so the WQE at our tail is
 * the next one nobody took; -1 while an initiator holds the lock (the
 * caller takes nothing now and tries again at its next pass); ctx lock
 * held
 */
int soft_srq_hold(struct soft_srq *srq)
{
	uint32_t z = 0;

	if (!srq->shm)
		return 0;
	if (!atomic_compare_exchange_strong_explicit(&srq->shm->lock, &z, 1,
						     memory_order_acquire,
						     memory_order_relaxed))
		return -1;
	srq_drain(srq->ctx, srq);
	return 0;
}

/* soft_srq_release -- give back what soft_srq_hold took */
void soft_srq_release(struct soft_srq *srq)
{
	if (srq->shm)
		atomic_store_explicit(&srq->shm->lock, 0, memory_order_release);
}

/* soft_srq_consume -- the WQE at the tail taken, for the initiators too
 * (the segment's consumed count, as rx_take_wqe); soft_srq_hold held */
void soft_srq_consume(struct soft_srq *srq)
{
	srq->tail++;
	if (srq->shm)
		atomic_store_explicit(&srq->shm->cons, srq->tail,
				      memory_order_release);
	soft_srq_check_limit(srq);
}

/* rx_commit -- write the verdict, BUSY/XFER -> DONE; 0: the sender had
 * cancelled the message (then it is not delivered) */
static int rx_commit(struct soft_qp *qp, struct soft_slot *s, uint32_t from,
		     uint32_t nak)
{
	uint64_t st = SOFT_SLOT_STATE(qp->peer_cons, from);
	int ok;

	s->status = nak;
	soft_tsan_release(qp);
	ok = atomic_compare_exchange_strong_explicit(
		&s->state, &st, SOFT_SLOT_STATE(qp->peer_cons, SOFT_SLOT_DONE),
		memory_order_acq_rel, memory_order_acquire);
	qp->peer_cons++;
	peer_wake(qp);
	return ok;
}

/* rx_bad -- an invalid request: NAK, responder QP to ERR */
static void rx_bad(struct soft_qp *qp, struct soft_slot *s, uint32_t from,
		   uint32_t nak)
{
	rx_commit(qp, s, from, nak);
	qp->rx.active = 0;
	soft_async_event(qp->ctx, IBV_EVENT_QP_REQ_ERR, &qp->qpx.qp_base);
	soft_qp_to_error(qp);
}

/*
 * rx_denied -- a request that broke the access rules was NAKed (by us, or
 * by its initiator in our place: SOFT_SF_DENIED): the responder's QP goes
 * to ERR, as rxe's do_class_ac_error and mlx5's; a remote access error
 * raises the local access violation work queue error, an invalid request
 * (a misaligned atomic) the invalid request one (IB 11.6.3; net.c's
 * resp_err between hosts)
 */
static void rx_denied(struct soft_qp *qp, uint32_t nak)
{
	qp->rx.active = 0;
	soft_async_event(qp->ctx,
			 nak == SOFT_NAK_REM_ACCESS ? IBV_EVENT_QP_ACCESS_ERR
						    : IBV_EVENT_QP_REQ_ERR,
			 &qp->qpx.qp_base);
	soft_qp_to_error(qp);
}

/* rx_refused -- rx_denied for a request its initiator refused in our
 * place (SOFT_SF_DENIED; out of line: rx_slots' loop stays as it was) */
static __attribute__((noinline, cold)) void rx_refused(
	struct soft_qp *qp, const struct soft_slot *s)
{
	rx_denied(qp, s->status);
}

/* rx_stop -- the sender's stream broke here: deliver nothing after it */
static void rx_stop(struct soft_qp *qp)
{
	struct soft_srq *srq = qp->srq;

	if (qp->rx.active && qp->rx.has_wqe && srq && !soft_srq_room(srq)) {
		/* give the SRQ back the WQE this message had taken */
		srq->rq[srq->head & (srq->size - 1)] = qp->rx.wqe;
		srq_mirror(srq, &qp->rx.wqe);
		srq->head++;
		if (srq->shm)
			atomic_store_explicit(&srq->shm->prod, srq->head,
					      memory_order_release);
	}
	qp->rx.active = 0;
	qp->rx_stopped = 1;
}

/* rx_deliver -- the message arrived whole: its receive completion */
static void rx_deliver(struct soft_qp *qp, struct ibv_wc *wc, int solicited,
		       int taken)
{
	if (!taken)
		rx_take_wqe(qp);
	cq_put(qp->rcq, wc, solicited);
	if (wc->status != IBV_WC_SUCCESS)
		soft_qp_to_error(qp);
}

/* target_mr -- an rkey of this process for this QP (mw.c's check, shared
 * with the network responder); stripe lock held on success so that
 * ibv_dereg_mr waits for the copy */
static inline int target_mr(struct soft_qp *qp, uint32_t rkey, uint64_t raddr,
			    uint64_t len, uint32_t need, uint8_t **va,
			    pthread_mutex_t **lk)
{
	return soft_rkey_target(qp, qp->pd, rkey, raddr, len, need, va, lk);
}

/* wqe_iov -- the buffers of a receive WQE for len bytes; wc status */
static enum ibv_wc_status wqe_iov(struct soft_qp *qp, const struct soft_rwqe *r,
				  uint64_t len, struct iovec *iov, uint32_t *n,
				  uint32_t *nak)
{
	uint64_t room = 0, left = len;
	uint32_t i;

	*n = 0;
	for (i = 0; i < r->num_sge; i++)
		room += r->sge[i].length;
	if (room < len) {
		*nak = SOFT_NAK_INV_REQ;
		return IBV_WC_LOC_LEN_ERR;
	}
	for (i = 0; i < r->num_sge && left; i++) {
		if (soft_local_sge(qp->pd, &r->sge[i], IBV_ACCESS_LOCAL_WRITE,
				   &iov[*n])) {
			*nak = SOFT_NAK_REM_OP;
			return IBV_WC_LOC_PROT_ERR;
		}
		if (iov[*n].iov_len > left)
			iov[*n].iov_len = left;
		left -= iov[*n].iov_len;
		(*n)++;
	}
	*nak = SOFT_ACK;
	return IBV_WC_SUCCESS;
}

/* rx_chunk -- move one chunk of the message in rx; 1: it is complete */
static int rx_chunk(struct soft_qp *qp, struct soft_slot *s)
{
	struct soft_rx_xfer *x = &qp->rx;
	struct iovec iov[SOFT_MAX_SGE];
	uint64_t k = (x->off + SOFT_SLOT_PAYLOAD - 1) / SOFT_SLOT_PAYLOAD;
	uint64_t n = x->len - x->off < SOFT_SLOT_PAYLOAD ? x->len - x->off
							 : SOFT_SLOT_PAYLOAD;
	uint32_t seq =
		atomic_load_explicit(&s->chunk_seq, memory_order_acquire);
	uint32_t niov, nak;
	pthread_mutex_t *lk;
	uint8_t *va;

	if (x->op == SOFT_OP_READ) {
		/* we produce; the initiator consumes (seq odd) */
		if (seq & 1)
			return 0;
		if (seq != 2 * k) {
			rx_bad(qp, s, SOFT_SLOT_XFER, SOFT_NAK_INV_REQ);
			return 0;
		}
		if (x->off == x->len)
			return 1;
		if (target_mr(qp, x->rkey, x->raddr + x->off, n,
			      IBV_ACCESS_REMOTE_READ, &va, &lk)) {
			rx_commit(qp, s, SOFT_SLOT_XFER, SOFT_NAK_REM_ACCESS);
			qp->rx.active = 0;
			return 0;
		}
		memcpy(s->payload, va, n);
		pthread_mutex_unlock(lk);
		s->chunk_len = (uint32_t)n;
		x->off += n;
		atomic_store_explicit(&s->chunk_seq, seq + 1,
				      memory_order_release);
		peer_wake(qp);
		return 0;
	}
	/* the initiator produces (seq even), we consume */
	if (!(seq & 1))
		return x->off == x->len;
	if (seq != 2 * k + 1 || s->chunk_len != n) {
		rx_bad(qp, s, SOFT_SLOT_XFER, SOFT_NAK_INV_REQ);
		return 0;
	}
	if (x->op == SOFT_OP_SEND) {
		if (wqe_iov(qp, &x->wqe, x->len, iov, &niov, &nak) !=
		    IBV_WC_SUCCESS) {
			rx_bad(qp, s, SOFT_SLOT_XFER, SOFT_NAK_REM_OP);
			return 0;
		}
		soft_iov_scatter(iov, niov, x->off, s->payload, n);
	} else {
		if (target_mr(qp, x->rkey, x->raddr + x->off, n,
			      IBV_ACCESS_REMOTE_WRITE, &va, &lk)) {
			rx_commit(qp, s, SOFT_SLOT_XFER, SOFT_NAK_REM_ACCESS);
			qp->rx.active = 0;
			return 0;
		}
		memcpy(va, s->payload, n);
		pthread_mutex_unlock(lk);
	}
	x->off += n;
	if (x->off == x->len)
		return 1;
	atomic_store_explicit(&s->chunk_seq, seq + 1, memory_order_release);
	peer_wake(qp);
	return 0;
}

/* rx_xfer -- advance the chunked message; 1: finished, go on */
static int rx_xfer(struct soft_qp *qp)
{
	struct soft_rx_xfer *x = &qp->rx;
	struct soft_slot *s = slot_at(qp->peer_slots, x->msgno, qp->peer_mask);
	uint64_t st = atomic_load_explicit(&s->state, memory_order_acquire);

	if (st != SOFT_SLOT_STATE(x->msgno, SOFT_SLOT_XFER)) {
		rx_stop(qp); /* the sender cancelled it */
		return 0;
	}
	while (x->active) {
		if (!rx_chunk(qp, s))
			return 0;
		if (!x->active)
			return 0;
		x->active = 0;
		if (!rx_commit(qp, s, SOFT_SLOT_XFER, SOFT_ACK)) {
			x->active = 1;
			rx_stop(qp);
			return 0;
		}
		if (x->has_wqe)
			rx_deliver(qp, &x->wc, x->solicited, qp->srq != NULL);
		return qp->state != IBV_QPS_ERR;
	}
	return 0;
}

/* rx_start_xfer -- BUSY -> XFER: the message moves in chunks */
static int rx_start_xfer(struct soft_qp *qp, struct soft_slot *s,
			 const struct soft_msg *m, const struct soft_rwqe *r,
			 const struct ibv_wc *wc)
{
	struct soft_rx_xfer *x = &qp->rx;
	uint64_t st = SOFT_SLOT_STATE(qp->peer_cons, SOFT_SLOT_BUSY);

	memset(x, 0, sizeof(*x));
	x->op = m->opcode;
	x->len = m->len;
	x->rkey = m->rkey;
	x->raddr = m->raddr;
	x->msgno = qp->peer_cons;
	x->solicited = !!(m->flags & SOFT_SF_SOLICITED);
	if (r) {
		x->has_wqe = 1;
		x->wqe = *r;
		x->wc = *wc;
		if (qp->srq)
			rx_take_wqe(qp); /* other QPs share the SRQ */
	}
	atomic_store_explicit(&s->chunk_seq, 0, memory_order_relaxed);
	x->active = 1;
	if (!atomic_compare_exchange_strong_explicit(
		    &s->state, &st,
		    SOFT_SLOT_STATE(qp->peer_cons, SOFT_SLOT_XFER),
		    memory_order_acq_rel, memory_order_acquire)) {
		rx_stop(qp);
		return 0;
	}
	peer_wake(qp);
	return rx_xfer(qp);
}

/* rx_atomic -- carry out an atomic for an initiator refused process_vm */
static uint32_t rx_atomic(struct soft_qp *qp, struct soft_slot *s,
			  const struct soft_msg *m)
{
	pthread_mutex_t *lk;
	uint8_t *va;

	if (m->opcode == SOFT_OP_ATOMIC_WRITE) {
		if (target_mr(qp, m->rkey, m->raddr, 8, IBV_ACCESS_REMOTE_WRITE,
			      &va, &lk))
			return SOFT_NAK_REM_ACCESS;
		soft_aw_place(soft_self_pid, (uintptr_t)va, NULL, m->cmp);
		pthread_mutex_unlock(lk);
		return SOFT_ACK;
	}
	if (target_mr(qp, m->rkey, m->raddr, 8, IBV_ACCESS_REMOTE_ATOMIC, &va,
		      &lk))
		return SOFT_NAK_REM_ACCESS;
	soft_atomic_exec(soft_self_pid, (uintptr_t)va, va,
			 m->opcode == SOFT_OP_CMP_SWP, m->cmp, m->swap,
			 s->payload);
	pthread_mutex_unlock(lk);
	return SOFT_ACK;
}

/* rx_copied_write -- an RDMA WRITE carried in the slot; NAK code */
static uint32_t rx_copied_write(struct soft_qp *qp, struct soft_slot *s,
				const struct soft_msg *m)
{
	pthread_mutex_t *lk;
	uint8_t *va;

	if (!m->len)
		return SOFT_ACK;
	if (target_mr(qp, m->rkey, m->raddr, m->len, IBV_ACCESS_REMOTE_WRITE,
		      &va, &lk))
		return SOFT_NAK_REM_ACCESS;
	memcpy(va, s->payload, m->len);
	pthread_mutex_unlock(lk);
	return SOFT_ACK;
}

/*
 * pull_mapped -- a SEND's data from the sender's memory as mapped here:
 * every SGE in an MR of the sender (its lkey, as the slot names it) that
 * is a sealed memfd (peermap.c); 0: not all of it, copy with
 * process_vm_readv (what was copied is copied again).  Each SGE is
 * checked against a snapshot of its MR's registry entry, under the key's
 * stripe lock, which is held across the copy as for RDMA READ.
 */
static int pull_mapped(struct soft_qp *qp, const struct soft_msg *m,
		       const struct iovec *iov, uint32_t niov)
{
	struct soft_reg_mr e;
	pthread_mutex_t *lk;
	uint64_t off = 0, a, l;
	uint8_t *base;
	uint32_t i, slot;

	if (!(m->flags & SOFT_SF_KEYS) || qp->novm || soft_map_off())
		return 0;
	for (i = 0; i < m->nsge; i++) {
		a = m->sge[i].addr;
		l = m->sge[i].len;
		if (qp->peer_pid == soft_self_pid) {
			/* our own memory, where our MR table says it is */
			struct soft_mr *mr = soft_mr_lookup(m->key[i]);
			uintptr_t s0 = mr ? (uintptr_t)mr->mr.addr : 0;

			if (!mr || a < s0 || a - s0 > mr->mr.length ||
			    l > mr->mr.length - (a - s0) ||
			    iov_overlap(iov, (int)niov, (uint8_t *)(uintptr_t)a,
					l))
				return 0;
			soft_iov_scatter(iov, niov, off, (void *)(uintptr_t)a,
					 l);
			off += l;
			continue;
		}
		slot = soft_key_slot(m->key[i]);
		lk = &soft_reg->key_lock[slot % SOFT_NSTRIPES];
		soft_stripe_lock(lk);
		e = soft_reg->mr[slot];
		base = NULL;
		if (e.key == m->key[i] && e.kind == SOFT_KEY_MR &&
		    e.pid == qp->peer_pid && e.start == qp->peer_start &&
		    e.map_fd && a >= e.va && a - e.va <= e.len &&
		    l <= e.len - (a - e.va))
			base = soft_map_get(qp->ctx, &e);
		if (base)
			soft_iov_scatter(iov, niov, off, base + (a - e.va), l);
		pthread_mutex_unlock(lk);
		if (!base)
			return 0;
		off += l;
	}
	return 1;
}

/* peer_ring_at -- the len bytes at offset off of the sender's copy ring,
 * both from its slot (peer-writable): NULL unless they lie within it */
static inline const uint8_t *peer_ring_at(const struct soft_qp *qp,
					  uint64_t off, uint64_t len)
{
	if (!qp->peer_ring || off > qp->peer_ring_size ||
	    len > qp->peer_ring_size - off)
		return NULL;
	return qp->peer_ring + off;
}

/* rx_verdict -- commit the verdict nak on a one-sided request: 1 when it
 * was taken (ACK); 0 when the stream broke (rx_stop) or it was refused,
 * which takes the responder to ERR (rx_denied) */
static int rx_verdict(struct soft_qp *qp, struct soft_slot *s, uint32_t nak)
{
	if (!rx_commit(qp, s, SOFT_SLOT_BUSY, nak)) {
		rx_stop(qp);
		return 0;
	}
	if (nak != SOFT_ACK) {
		rx_denied(qp, nak);
		return 0;
	}
	return 1;
}

/* rx_no_rd_res -- a READ or atomic, carried through the ring, to a
 * responder of max_dest_rd_atomic 0: refused as remote_op refuses it (out
 * of line: rx_msg's SEND path stays as it was) */
static __attribute__((noinline, cold)) int rx_no_rd_res(struct soft_qp *qp,
							struct soft_slot *s)
{
	return rx_verdict(qp, s, SOFT_NAK_INV_REQ);
}

/*
 * rx_msg -- carry out one decoded message whose slot we hold (BUSY);
 * 1: finished, take the next one; 0: stop for now
 */
static int rx_msg(struct soft_qp *qp, struct soft_slot *s,
		  const struct soft_msg *m, struct soft_rwqe *r)
{
	struct iovec iov[SOFT_MAX_SGE], riov[SOFT_MAX_SGE];
	struct ibv_wc wc;
	uint32_t nak = SOFT_ACK, n, k;
	int solicited = !!(m->flags & SOFT_SF_SOLICITED);
	ssize_t got;

	memset(&wc, 0, sizeof(wc));
	if (r) {
		wc.wr_id = r->wr_id;
		wc.qp_num = qp->qpx.qp_base.qp_num;
		wc.src_qp = qp->dest_qpn;
		wc.byte_len = m->len;
		if (m->flags & SOFT_SF_IMM) {
			wc.imm_data = m->imm;
			wc.wc_flags = IBV_WC_WITH_IMM;
		}
		wc.opcode = m->opcode == SOFT_OP_SEND
				    ? IBV_WC_RECV
				    : IBV_WC_RECV_RDMA_WITH_IMM;
	}
	switch (m->opcode) {
	case SOFT_OP_CMP_SWP:
	case SOFT_OP_FETCH_ADD:
	case SOFT_OP_ATOMIC_WRITE:
		if (__builtin_expect(!qp->attr.max_dest_rd_atomic, 0))
			return rx_no_rd_res(qp, s);
		return rx_verdict(qp, s, rx_atomic(qp, s, m));
	case SOFT_OP_READ:
		if (__builtin_expect(!qp->attr.max_dest_rd_atomic, 0))
			return rx_no_rd_res(qp, s);
		if (!m->len) { /* C9-88: nothing to check or move */
			if (!rx_commit(qp, s, SOFT_SLOT_BUSY, SOFT_ACK))
				rx_stop(qp);
			return qp->state != IBV_QPS_ERR;
		}
		if (!target_mr(qp, m->rkey, m->raddr, m->len,
			       IBV_ACCESS_REMOTE_READ, (uint8_t **)&iov[0],
			       (pthread_mutex_t **)&riov[0])) {
			pthread_mutex_unlock(riov[0].iov_base);
			return rx_start_xfer(qp, s, m, NULL, NULL);
		}
		return rx_verdict(qp, s, SOFT_NAK_REM_ACCESS);
	case SOFT_OP_WRITE:
	case SOFT_OP_WRITE_IMM:
		if (m->flags & SOFT_SF_CHUNKED) {
			if (!target_mr(qp, m->rkey, m->raddr, m->len,
				       IBV_ACCESS_REMOTE_WRITE,
				       (uint8_t **)&iov[0],
				       (pthread_mutex_t **)&riov[0])) {
				pthread_mutex_unlock(riov[0].iov_base);
				return rx_start_xfer(qp, s, m, r, &wc);
			}
			nak = SOFT_NAK_REM_ACCESS;
		} else if (m->flags & SOFT_SF_COPIED) {
			nak = rx_copied_write(qp, s, m);
		}
		if (!rx_verdict(qp, s, nak))
			return 0;
		if (r)
			rx_deliver(qp, &wc, solicited, 0);
		return qp->state != IBV_QPS_ERR;
	default: /* SEND */
		break;
	}
	wc.status = wqe_iov(qp, r, m->len, iov, &n, &nak);
	if (wc.status != IBV_WC_SUCCESS) {
		if (rx_commit(qp, s, SOFT_SLOT_BUSY, nak))
			rx_deliver(qp, &wc, solicited, 0);
		else
			rx_stop(qp);
		return 0;
	}
	/* only a message its receive takes invalidates (rxe's do_complete):
	 * a receive too short or with a bad lkey leaves the window bound */
	if (m->flags & SOFT_SF_INV) {
		wc.status = soft_mw_remote_inv(m->imm, soft_self_pid,
					       qp->pd->pd_id, wc.qp_num);
		if (wc.status != IBV_WC_SUCCESS) {
			if (rx_commit(qp, s, SOFT_SLOT_BUSY, SOFT_NAK_INV_REQ))
				rx_deliver(qp, &wc, solicited, 0);
			else
				rx_stop(qp);
			return 0;
		}
		wc.invalidated_rkey = m->imm;
		wc.wc_flags = IBV_WC_WITH_INV;
	}
	if (m->flags & SOFT_SF_COPIED) {
		soft_iov_scatter(iov, n, 0, s->payload, m->len);
	} else if (m->flags & SOFT_SF_RING) {
		/* from its copy ring: within it, or a malformed request */
		const uint8_t *src = peer_ring_at(qp, m->raddr, m->len);

		if (!src) {
			rx_bad(qp, s, SOFT_SLOT_BUSY, SOFT_NAK_INV_REQ);
			return 0;
		}
		soft_iov_scatter(iov, n, 0, src, m->len);
	} else if (m->flags & SOFT_SF_CHUNKED) {
		return rx_start_xfer(qp, s, m, r, &wc);
	} else if (m->len) {
		for (k = 0; k < m->nsge; k++) {
			riov[k].iov_base = (void *)(uintptr_t)m->sge[k].addr;
			riov[k].iov_len = m->sge[k].len;
		}
		/* only ever from the pid recorded at connect */
		if (pull_mapped(qp, m, iov, n))
			got = m->len;
		else
			got = qp->novm ? -1
				       : vm_copy(0, qp->peer_pid, iov, n, riov,
						 k);
		if (got != (ssize_t)m->len) {
			if (qp->novm || errno == EPERM) {
				qp->novm = 1;
				return rx_start_xfer(qp, s, m, r, &wc);
			}
			if ((atomic_load(&s->state) & 0xff) != SOFT_SLOT_BUSY ||
			    !soft_pid_alive(qp->peer_pid, qp->peer_start)) {
				rx_stop(qp); /* sender gone or flushed */
				return 0;
			}
			/* the sender named memory it does not have */
			rx_bad(qp, s, SOFT_SLOT_BUSY, SOFT_NAK_REM_OP);
			return 0;
		}
		test_stop_busy(m->len);
	}
	if (!rx_commit(qp, s, SOFT_SLOT_BUSY, SOFT_ACK)) {
		rx_stop(qp); /* flushed while we copied: torn, never delivered */
		return 0;
	}
	rx_deliver(qp, &wc, solicited, 0);
	return 1;
}

/*
 * Fast messages (rx_fast): each copied into its WQE's buffer, then
 * acknowledged by the cumulative ACK (rx_fast_done), then completed.  The
 * initiator reads only that word, once a poll, instead of a verdict
 * written into each slot: its slot lines stay in its cache, ours are only
 * read.  The receive queue's published count and the initiator's wake-up
 * follow once a run of them (rx_fast_end).  Per-slot verdicts remain for
 * everything else (rx_msg: NAKs, RNR, data pulled or chunked).
 */
#define RX_BUDGET 64 /* messages a visit takes (rx_slots) */

/*
 * rx_fast -- the usual message: a SEND (or SEND_WITH_IMM) whose bytes are
 * in the slot or the sender's copy ring, into a receive WQE of one SGE on
 * a QP without SRQ.  The checks of soft_slot_decode and wqe_iov and the
 * outcome of rx_msg, without their general cases
 * (tools/soft_pingpong-insns.sh counts it).  The data goes into the WQE
 * at the tail, then rx_fast_done acknowledges and completes it.  -1: not
 * such a message, nothing done (the general path takes it, and gives any
 * error); 1: delivered, take the next; 0: not delivered, the stream
 * stopped (the initiator's flush).  The header is read once, as the
 * decoder does.  rx lock held.
 */
_Static_assert(offsetof(struct soft_slot, imm) ==
			       offsetof(struct soft_slot, opcode) + 4 &&
		       offsetof(struct soft_slot, len) ==
			       offsetof(struct soft_slot, opcode) + 8 &&
		       offsetof(struct soft_slot, flags) ==
			       offsetof(struct soft_slot, opcode) + 12,
	       "rx_fast reads opcode, imm, len and flags in one copy");

/*
 * rx_ring_take -- rx_fast's SEND in the sender's copy ring, into dst: its
 * bytes within the ring (peer_ring_at), each piece once the slot's fill
 * count covers it (fast_ring may still be putting the next ones in).  0:
 * not taken: none such (rx_msg takes it, and NAKs an offset out of
 * range), or the pieces stopped coming for SOFT_RING_SPINS pauses (the
 * sender preempted, or gone): a later pass takes it once it is all in
 * (ring_filling), and it is not waited for again.  A fill count past len
 * (a peer that lies) counts as len.
 */
static int rx_ring_take(struct soft_qp *qp, const struct soft_slot *s,
			uint32_t flags, uint32_t len, uint8_t *dst)
{
	int spins = SOFT_RING_SPINS;
	const uint8_t *src;
	uint64_t off, done = 0, f;

	if ((flags & ~(uint32_t)(SOFT_SF_IMM | SOFT_SF_SOLICITED |
				 SOFT_SF_STAMP)) != SOFT_SF_RING)
		return 0;
	memcpy(&off, s->payload + SOFT_SLOT_RING_OFF, 8);
	src = peer_ring_at(qp, off, len);
	if (!src)
		return 0;
	if (qp->ring_stall == qp->peer_cons + 1) {
		if (ring_fill(s) < len)
			return 0; /* stopped once: taken whole or not at all */
		spins = 0;
	}
	while (done < len) {
		f = ring_fill(s);
		if (f > len)
			f = len;
		if (f > done) {
			memcpy(dst + done, src + done, f - done);
			done = f;
			continue;
		}
		if (spins-- <= 0) {
			qp->ring_stall = qp->peer_cons + 1;
			return 0;
		}
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
	return 1;
}

/* ring_filling -- a ring SEND (decoded: m, within the ring) whose bytes
 * are not all in yet; one out of the ring is NAKed at once (rx_msg) */
static inline int ring_filling(const struct soft_qp *qp,
			       const struct soft_slot *s,
			       const struct soft_msg *m)
{
	return (m->flags & SOFT_SF_RING) &&
	       peer_ring_at(qp, m->raddr, m->len) && ring_fill(s) < m->len;
}

/* rx_fast_wqe -- the receive WQE at the tail, if the fast path may take
 * len bytes into it: one SGE, long enough, in an MR of ours that allows
 * local writes; its bytes at *dst.  0, or -1 (the general path takes the
 * message, and gives any error) */
static inline __attribute__((always_inline)) int rx_fast_wqe(
	struct soft_qp *qp, uint32_t len, const struct soft_rwqe **rp,
	uint8_t **dst)
{
	const struct soft_rwqe *r = &qp->rq[qp->rq_tail & (qp->rq_size - 1)];
	const struct ibv_sge *sg = &r->sge[0];
	struct soft_mr *mr;

	if (r->num_sge != 1 || sg->length < len || r->arrived > qp->peer_cons)
		return -1; /* rx_late: rx_slots NAKs it */
	*rp = r;
	if (!len)
		return 0;
	mr = soft_mr_lookup(sg->lkey);
	if (!mr || mr->pd != qp->pd || !(mr->access & IBV_ACCESS_LOCAL_WRITE) ||
	    sg->addr < mr->iova || sg->addr - mr->iova > mr->mr.length ||
	    sg->length > mr->mr.length - (sg->addr - mr->iova))
		return -1; /* an indirect mkey, or LOC_PROT_ERR */
	*dst = (uint8_t *)mr->mr.addr + (sg->addr - mr->iova);
	return 0;
}

/* ack_stop -- tests/soft/ackstop: the responder stops once, between its
 * look at cancel and its ACK (SOFTRDMA_TEST_ACK_STOP) */
static __attribute__((noinline, cold)) void ack_stop(void)
{
	soft_test_ack_stop = 0;
	raise(SIGSTOP);
}

/*
 * rx_fast_done -- the message is in WQE r (at the tail): the initiator's
 * cumulative ACK moves past it (a plain store: no locked instruction, and
 * the initiator's line is not waited for), then its receive completion.
 * An initiator that flushes sets cancel before it withdraws any slot
 * (tx_freeze): seen, the message is not delivered (its data sits in the
 * posted buffer, as an HCA may leave it) and nothing after it.  Not seen
 * yet, it is delivered and the flush may still report it, as an HCA whose
 * ACK was lost does.  Only a reset of the initiator reuses what we copied,
 * and it waits for our rx lock (soft_qp_ack_reset).  1, or 0: stopped.
 * rx lock held.
 */
static inline __attribute__((always_inline)) int rx_fast_done(
	struct soft_qp *qp, const struct soft_rwqe *r, uint32_t len,
	uint32_t imm, uint32_t flags)
{
	struct ibv_wc wc, *w;

	if (atomic_load_explicit(&qp->peer->cancel, memory_order_relaxed)) {
		rx_stop(qp); /* flushed while we copied: never delivered */
		return 0;
	}
	if (__builtin_expect(soft_test_ack_stop, 0))
		ack_stop();
	soft_tsan_release(qp);
	atomic_store_explicit(&qp->peer->acked, ++qp->peer_cons,
			      memory_order_release);
	w = cq_take(qp->rcq);
	if (!w)
		w = &wc;
	*w = (struct ibv_wc){
		.wr_id = r->wr_id,
		.status = IBV_WC_SUCCESS,
		.opcode = IBV_WC_RECV,
		.byte_len = len,
		.qp_num = qp->qpx.qp_base.qp_num,
		.src_qp = qp->dest_qpn,
	};
	if (flags & SOFT_SF_IMM) {
		w->imm_data = imm;
		w->wc_flags = IBV_WC_WITH_IMM;
	}
	qp->rq_tail++; /* rx_take_wqe without SRQ (rx_fast) */
	if (w == &wc)
		soft_cq_push(qp->rcq, &wc, !!(flags & SOFT_SF_SOLICITED));
	return 1;
}

/* rx_fast_end -- after a run of fast messages: rx_take_wqe's published
 * count, once for the run (only an initiator holding our rx lock, not now,
 * or our own rx_idle read it), and the initiator's wake-up.  rx lock
 * held. */
static inline __attribute__((always_inline)) void rx_fast_end(
	struct soft_qp *qp)
{
	if (qp->rq_shm)
		atomic_store_explicit(&qp->seg->rq_cons, qp->rq_tail,
				      memory_order_release);
	peer_wake(qp);
}

/* rx_fast_ring -- rx_fast's SEND through the copy ring (rx_ring_take),
 * out of line: a copied SEND pays nothing for it */
static __attribute__((noinline)) int rx_fast_ring(struct soft_qp *qp,
						  const struct soft_slot *s,
						  uint32_t len, uint32_t imm,
						  uint32_t flags)
{
	const struct soft_rwqe *r;
	uint8_t *dst = NULL;

	if (!len || rx_fast_wqe(qp, len, &r, &dst) ||
	    !rx_ring_take(qp, s, flags, len, dst))
		return -1;
	return rx_fast_done(qp, r, len, imm, flags);
}

static inline __attribute__((always_inline)) int rx_fast(struct soft_qp *qp,
							 struct soft_slot *s)
{
	struct {
		uint32_t opcode, imm, len, flags; /* as in the slot */
	} h;
	const struct soft_rwqe *r;
	uint8_t *dst = NULL;

	memcpy(&h, &s->opcode, sizeof(h));
	if (h.opcode != SOFT_OP_SEND || qp->srq || qp->rq_head == qp->rq_tail)
		return -1;
	if ((h.flags & ~(uint32_t)(SOFT_SF_IMM | SOFT_SF_SOLICITED)) !=
		    SOFT_SF_COPIED ||
	    h.len > SOFT_SLOT_PAYLOAD)
		return rx_fast_ring(qp, s, h.len, h.imm, h.flags);
	if (rx_fast_wqe(qp, h.len, &r, &dst))
		return -1;
	if (h.len)
		copy_small(dst, s->payload, h.len, 1);
	return rx_fast_done(qp, r, h.len, h.imm, h.flags);
}

/* served_ahead -- how many messages past ours the initiator served for
 * us while we did not run (serve_remote), 0 if none or another
 * incarnation's; at once 0 when the word is the one rx_slots last took
 * (served_seen: our count has only grown since, every poll saw it) */
static inline uint64_t served_ahead_of(const struct soft_qp *qp, uint64_t sv)
{
	uint64_t d;

	if (sv == qp->served_seen)
		return 0;
	d = (sv - qp->peer_cons) & SOFT_SERVED_MASK;
	if (sv >> SOFT_SERVED_BITS != ((uint64_t)qp->peer_epoch & 0xffffff))
		return 0;
	return d < SOFT_SERVED_MASK / 2 ? d : 0;
}

static inline uint64_t served_ahead(const struct soft_qp *qp)
{
	return served_ahead_of(qp, atomic_load_explicit(&qp->seg->served,
							memory_order_relaxed));
}

/* rx_slots -- consume the peer's slots in order; rx lock held */
static void rx_slots(struct soft_qp *qp)
{
	struct soft_slot *s;
	struct soft_rwqe *r = NULL;
	struct soft_msg m;
	uint64_t st, sv;
	int budget = RX_BUDGET, err, fast = 0, f;

	if (qp->state < IBV_QPS_RTR || qp->state == IBV_QPS_ERR ||
	    qp->rx_stopped ||
	    atomic_load_explicit(&qp->peer->dest_qpn, memory_order_relaxed) !=
		    qp->qpx.qp_base.qp_num)
		return;
	/* the slots it served are DONE, or already reused for later
	 * messages: skip them, as an HCA that acknowledged them would */
	if (!qp->rx.active) {
		/* unchanged while we hold the rx lock (serve_remote) */
		sv = atomic_load_explicit(&qp->seg->served,
					  memory_order_relaxed);
		if (sv != qp->served_seen) {
			qp->peer_cons += served_ahead_of(qp, sv);
			qp->served_seen = sv;
		}
	}
	if (qp->rx.active && !rx_xfer(qp))
		return;
	/* the QP's state and rx_stopped change only in rx_msg (checked
	 * after it) and where this returns: the fast path tests neither */
	while (budget--) {
		s = slot_at(qp->peer_slots, qp->peer_cons, qp->peer_mask);
		st = atomic_load_explicit(&s->state, memory_order_acquire);
		if ((st >> 8) != qp->peer_cons + 1)
			break;
		soft_tsan_acquire(qp);
		cp_probe(1);
		if ((st & 0xff) == SOFT_SLOT_READY) {
			slot_prefetch(s, s->len);
			f = rx_fast(qp, s);
			if (f > 0) {
				fast = 1;
				continue;
			}
			if (!f)
				break; /* stopped */
		}
		/* in order: the fast run's count and wake-up come first */
		if (fast) {
			rx_fast_end(qp);
			fast = 0;
		}
		switch (st & 0xff) {
		case SOFT_SLOT_READY:
			break;
		case SOFT_SLOT_DONE:
			qp->peer_cons++;
			if (__builtin_expect(s->flags & SOFT_SF_DENIED, 0)) {
				rx_refused(qp,
					   s); /* by its initiator, for us */
				return;
			}
			continue;
		case SOFT_SLOT_CANCEL:
			/* flushed by its sender: so is all that follows */
			rx_stop(qp);
			return;
		case SOFT_SLOT_RNR:
			if (rx_retry_due(qp, s))
				break; /* sent again, for its sender */
			return;	       /* wait for the retransmission */
		default:
			return;
		}
		err = soft_slot_decode(s, SOFT_SLOT_SIZE, &m);
		if (!err && ring_filling(qp, s, &m)) {
			soft_qp_hot(qp); /* its sender is putting it in */
			return;
		}
		if (!err && (m.opcode == SOFT_OP_SEND ||
			     m.opcode == SOFT_OP_WRITE_IMM)) {
			r = rx_wqe(qp);
			/* a retransmission (RNR) comes now: any WQE posted
			 * is there for it */
			if (!r || ((st & 0xff) != SOFT_SLOT_RNR &&
				   rx_late(qp, r, s))) {
				rx_rnr(qp, s, st);
				return;
			}
		} else {
			r = NULL;
		}
		if (!atomic_compare_exchange_strong(
			    &s->state, &st,
			    SOFT_SLOT_STATE(qp->peer_cons, SOFT_SLOT_BUSY)))
			continue; /* cancelled meanwhile */
		if (err) {
			rx_bad(qp, s, SOFT_SLOT_BUSY, (uint32_t)err);
			return;
		}
		if (!rx_msg(qp, s, &m, r))
			return;
		if (qp->state == IBV_QPS_ERR || qp->rx_stopped)
			break;
	}
	if (fast)
		rx_fast_end(qp);
	if (budget < 0)
		soft_qp_hot(qp); /* more may wait: the next pass goes on */
}

/* rx_idle -- the idle poll of qp's receive side: nothing published,
 * nothing served for us, no reset of the peer (EPOCH, as read); inlined
 * into the visit, so an idle QP costs no call.  The next slot's second
 * line is prefetched as its first is read: a SEND with more than the first
 * line's 40 bytes of payload (an rdmamsg message of 25 to 104 bytes) is
 * then fetched in one wait, not in a second one behind the state's */
static inline __attribute__((always_inline)) int rx_idle(struct soft_qp *qp,
							 uint32_t epoch)
{
	struct soft_slot *s =
		slot_at(qp->peer_slots, qp->peer_cons, qp->peer_mask);
	struct soft_srq *srq = qp->srq;

	__builtin_prefetch((const char *)s + 64);
	return !qp->rx.active && epoch == qp->peer_epoch &&
	       (atomic_load_explicit(&s->state, memory_order_relaxed) >> 8) !=
		       qp->peer_cons + 1 &&
	       !served_ahead(qp) &&
	       (srq ? !srq->shm || atomic_load_explicit(&srq->shm->cons,
							memory_order_relaxed) ==
					   srq->tail
		    : !qp->rq_shm ||
				atomic_load_explicit(&qp->seg->rq_cons,
						     memory_order_relaxed) ==
					qp->rq_tail);
}

/* rx_qp -- what arrived for qp (not idle: rx_idle, with the peer's EPOCH
 * it read): the initiator's completions, then the slots; context lock
 * held */
static inline __attribute__((always_inline)) void rx_qp(struct soft_qp *qp,
							uint32_t epoch)
{
	struct soft_srq *srq = qp->srq;
	uint32_t z = 0;

	if (!rx_trylock(qp)) {
		soft_qp_hot(qp); /* the initiator is serving us right now */
		return;
	}
	if (srq && srq->shm) {
		/* the SRQ's WQEs: ours while we hold its lock */
		if (!atomic_compare_exchange_strong_explicit(
			    &srq->shm->lock, &z, 1, memory_order_acquire,
			    memory_order_relaxed)) {
			rx_unlock(qp);
			soft_qp_hot(qp);
			return;
		}
		srq_drain(qp->ctx, srq);
	}
	if (epoch != qp->peer_epoch) {
		/* the peer was reset since we connected: what we counted
		 * (and any stop) belonged to its previous incarnation */
		if (qp->rx.active)
			rx_stop(qp);
		qp->rx.active = 0;
		qp->rx_stopped = 0;
		qp->peer_cons = 0;
		qp->served_seen = SOFT_SERVED_NONE;
		qp->peer_epoch = epoch;
	}
	if (!srq && qp->rq_tail != atomic_load_explicit(&qp->seg->rq_cons,
							memory_order_relaxed))
		rx_drain(qp);
	rx_slots(qp);
	if (srq && srq->shm)
		atomic_store_explicit(&srq->shm->lock, 0, memory_order_release);
	rx_unlock(qp);
}

static enum ibv_wc_status nak_status(uint32_t nak)
{
	switch (nak) {
	case SOFT_ACK:
		return IBV_WC_SUCCESS;
	case SOFT_NAK_INV_REQ:
		return IBV_WC_REM_INV_REQ_ERR;
	case SOFT_NAK_REM_ACCESS:
		return IBV_WC_REM_ACCESS_ERR;
	default:
		return IBV_WC_REM_OP_ERR;
	}
}

/*
 * cancel_slot -- withdraw a published slot; returns its final verdict.
 * Never waits for the responder (a flush does not wait for the remote
 * side): a BUSY slot (the responder is placing the data) is cancelled
 * too.  The responder commits a message only by turning BUSY into DONE,
 * or, for a copied SEND, by moving the cumulative ACK past it (rx_ack),
 * which we freeze first (tx_freeze); so once the slot reads CANCEL
 * whatever it still reads from our buffer (process_vm_readv, read-only)
 * is dropped, never delivered: the buffer is the caller's again as soon
 * as the WQE completes.
 */
static enum ibv_wc_status cancel_slot(struct soft_qp *qp, struct soft_slot *s,
				      uint64_t idx, enum ibv_wc_status why)
{
	uint64_t st;

	/* first the cumulative ACK (rx_ack): frozen, so that what it does
	 * not cover yet never counts */
	if (idx < tx_freeze(qp))
		return IBV_WC_SUCCESS;
	st = atomic_load_explicit(&s->state, memory_order_acquire);
	for (;;) {
		switch (st & 0xff) {
		case SOFT_SLOT_DONE:
			return nak_status(s->status);
		case SOFT_SLOT_CANCEL:
			return why;
		default: /* READY, RNR, BUSY, XFER */
			if (atomic_compare_exchange_strong_explicit(
				    &s->state, &st,
				    SOFT_SLOT_STATE(idx, SOFT_SLOT_CANCEL),
				    memory_order_acq_rel, memory_order_acquire))
				return why;
			break; /* st reloaded: the responder moved it */
		}
	}
}

/* transport_timeout_ns -- (retry_cnt + 1) * 4.096 us * 2^timeout, capped */
static uint64_t transport_timeout_ns(struct soft_qp *qp)
{
	uint64_t t;

	if (!qp->attr.timeout || qp->attr.timeout > 28)
		return SOFT_TIMEOUT_CAP_NS;
	t = (4096ull << qp->attr.timeout) * (qp->attr.retry_cnt + 1u);
	return t < SOFT_TIMEOUT_CAP_NS ? t : SOFT_TIMEOUT_CAP_NS;
}

/*
 * tx_chunk -- the initiator's side of a chunked message: produce the next
 * chunk of a SEND / WRITE, or consume the next chunk of a READ.  The
 * responder's sequence number and chunk length are checked (it is the
 * peer's word); a violation fails the WQE with IBV_WC_REM_OP_ERR.
 */
static enum ibv_wc_status tx_chunk(struct soft_qp *qp, struct soft_swqe *e,
				   struct soft_slot *s, const struct iovec *iov)
{
	uint32_t seq =
		atomic_load_explicit(&s->chunk_seq, memory_order_acquire);
	uint64_t off = (uint64_t)(seq / 2) * SOFT_SLOT_PAYLOAD, n;

	if (e->op == SOFT_OP_READ) {
		if (!(seq & 1))
			return IBV_WC_SUCCESS;
		if (off >= e->byte_len)
			return IBV_WC_REM_OP_ERR;
		n = e->byte_len - off < SOFT_SLOT_PAYLOAD ? e->byte_len - off
							  : SOFT_SLOT_PAYLOAD;
		if (s->chunk_len != n)
			return IBV_WC_REM_OP_ERR;
		soft_iov_scatter(iov, e->niov, off, s->payload, n);
	} else {
		if ((seq & 1) || off >= e->byte_len)
			return IBV_WC_SUCCESS;
		n = e->byte_len - off < SOFT_SLOT_PAYLOAD ? e->byte_len - off
							  : SOFT_SLOT_PAYLOAD;
		soft_iov_gather(iov, e->niov, off, s->payload, n);
		s->chunk_len = (uint32_t)n;
	}
	atomic_store_explicit(&s->chunk_seq, seq + 1, memory_order_release);
	if (qp->peer)
		peer_wake(qp);
	return IBV_WC_SUCCESS;
}

/*
 * serve_local -- the responder is a QP of this process on another
 * context: consume our message on its behalf, as its HCA would, so that
 * a thread that polls only our CQ sees its send complete.  DEFER: not
 * while another thread owns the responder's context (its bias): that
 * thread polls it, and taking the word from it costs a membarrier each
 * time; the liveness check serves it if it stops (tx_qp).  1 if served.
 */
static inline __attribute__((always_inline)) int serve_local(struct soft_qp *qp,
							     int defer)
{
	struct soft_qp *peer;

	if (!qp->peer || qp->peer_pid != soft_self_pid || qp->peer_same_ctx)
		return 0;
	peer = soft_qp_lock_local(qp->dest_qpn, defer);
	if (!peer)
		return 0;
	if (peer->ctx != qp->ctx && peer->peer &&
	    peer->dest_qpn == qp->qpx.qp_base.qp_num) {
		uint32_t epoch = atomic_load_explicit(&peer->peer->epoch,
						      memory_order_acquire);

		if (!rx_idle(peer, epoch))
			rx_qp(peer, epoch);
	}
	/* the bias owner (one thread on both contexts) leaves it biased */
	soft_bias_exit(&peer->ctx->lock, 0);
	return 1;
}

/*
 * deny_deliver -- a request just refused for the responder (post_one): a
 * responder of this process takes the NAK now, so that it is in ERR
 * before our completion can be seen, as an HCA's responder refuses a
 * request before its NAK reaches the requester; one of another process
 * takes it at its next progress
 */
static __attribute__((noinline, cold)) void deny_deliver(struct soft_qp *qp)
{
	struct soft_qp *peer;
	uint32_t epoch;

	if (!qp->peer_same_ctx) {
		serve_local(qp, 0);
		return;
	}
	peer = soft_qp_local_in(qp->ctx, qp->dest_qpn);
	if (!peer || !peer->peer || peer->dest_qpn != qp->qpx.qp_base.qp_num)
		return;
	epoch = atomic_load_explicit(&peer->peer->epoch, memory_order_acquire);
	if (!rx_idle(peer, epoch))
		rx_qp(peer, epoch);
}

/*
 * post_denied -- e, a WRITE, READ or atomic that the responder's access
 * rules refuse (remote_op's REM_ACCESS_ERR, REM_INV_REQ_ERR for a
 * misaligned atomic): its slot goes out DONE at once with the responder's
 * verdict (SOFT_SF_DENIED), so that our WQE completes in order (tx_qp)
 * and the responder, coming to it after what was sent before, goes to
 * ERR (rx_slots); later WRs are not executed.  Out of line: post_one's
 * usual path stays as it was.
 */
static __attribute__((noinline, cold)) void post_denied(struct soft_qp *qp,
							struct soft_swqe *e,
							enum ibv_wc_status st)
{
	uint64_t idx = qp->tx_msgno++;
	struct soft_slot *s = slot_at(qp->slots, idx, qp->sq_mask);

	e->msgno = idx;
	s->opcode = e->op;
	s->len = 0;
	s->imm = 0;
	s->nsge = 0;
	s->pid = soft_self_pid;
	s->rkey = 0;
	s->raddr = 0;
	atomic_store_explicit(&s->chunk_seq, 0, memory_order_relaxed);
	s->chunk_len = 0;
	s->status = st == IBV_WC_REM_ACCESS_ERR ? SOFT_NAK_REM_ACCESS
						: SOFT_NAK_INV_REQ;
	s->flags = SOFT_SF_DENIED;
	soft_tsan_release(qp);
	atomic_store_explicit(&s->state, SOFT_SLOT_STATE(idx, SOFT_SLOT_DONE),
			      memory_order_release);
	e->kind = SOFT_WQE_RING;
	qp->ctx->outstanding++;
	qp->sq_err_pending = 1;
	peer_wake(qp);
	deny_deliver(qp);
}

/* serve_write -- n bytes of our message at off into the responder's
 * buffer named by sge (checked against its registered MR); 0 on success,
 * 1 when the MR check refuses the SGE, -1 when the copy failed */
static int serve_write(struct soft_qp *qp, const struct ibv_sge *sge,
		       uint64_t n, const struct iovec *src, uint32_t nsrc,
		       uint64_t off)
{
	uint32_t slot = sge->lkey & (SOFT_MAX_MR - 1);
	pthread_mutex_t *lk = &soft_reg->key_lock[slot % SOFT_NSTRIPES];
	struct soft_reg_mr *m = &soft_reg->mr[slot];
	struct iovec l[SOFT_MAX_SGE + 1], r;
	uint32_t i, k = 0;
	uint64_t skip = off, left = n;
	int ret = -1;

	for (i = 0; i < nsrc && left && k < SOFT_MAX_SGE + 1; i++) {
		uint64_t len = src[i].iov_len;

		if (skip >= len) {
			skip -= len;
			continue;
		}
		l[k].iov_base = (char *)src[i].iov_base + skip;
		l[k].iov_len = len - skip < left ? len - skip : left;
		left -= l[k].iov_len;
		skip = 0;
		k++;
	}
	if (left)
		return -1;
	soft_stripe_lock(lk);
	if (sge->lkey && m->key == sge->lkey && m->kind == SOFT_KEY_MR &&
	    m->pid == qp->peer_pid && m->pd_id == qp->peer_pd_id &&
	    (m->access & IBV_ACCESS_LOCAL_WRITE) && sge->addr >= m->addr &&
	    sge->addr - m->addr <= m->len &&
	    n <= m->len - (sge->addr - m->addr)) {
		r.iov_base = (void *)(uintptr_t)(m->va + (sge->addr - m->addr));
		r.iov_len = n;
		if (vm_copy(1, qp->peer_pid, l, k, &r, 1) == (ssize_t)n)
			ret = 0;
	} else {
		ret = 1;
	}
	pthread_mutex_unlock(lk);
	return ret;
}

/*
 * serve_remote -- as the responder's HCA would: our oldest message is
 * still untouched and the responder (another process, maybe stopped)
 * has not run; take its next receive WQE from its mirror, place the data
 * in its buffers (process_vm_writev, checked against the registry), leave
 * the completion in its outbox, ACK our slot.  The errors its HCA finds
 * are found here too: no receive posted is an RNR NAK with its
 * min_rnr_timer (we retry as rnr_retry says); a buffer too short fails
 * our WQE with IBV_WC_REM_INV_REQ_ERR and its receive with
 * IBV_WC_LOC_LEN_ERR; a buffer it has not registered for local write,
 * IBV_WC_REM_OP_ERR here and IBV_WC_LOC_PROT_ERR there.  A copy the
 * kernel refuses waits for the responder itself.  1 if served.
 */
static int serve_remote(struct soft_qp *qp, struct soft_swqe *e,
			struct soft_slot *s, const struct iovec *iov)
{
	struct soft_seg_hdr *h = qp->peer;
	struct soft_srq_hdr *sh = qp->peer_srq;
	struct ibv_sge sge[SOFT_MAX_SGE];
	struct iovec pay;
	_Atomic uint64_t *prodp, *consp;
	const char *rq;
	uint64_t prod, cons, room = 0, off = 0, n;
	uint32_t flags = s->flags, z = 0, nak = SOFT_ACK, nent, nsge;
	int i, num;
	uint64_t st = SOFT_SLOT_STATE(e->msgno, SOFT_SLOT_READY);
	int ok = 0, r;

	/* never process_vm_writev into ourselves on the registry's word */
	if (!h || (!qp->peer_rq_n && !sh) || qp->no_serve ||
	    qp->peer_pid == soft_self_pid ||
	    (e->op != SOFT_OP_SEND && e->op != SOFT_OP_WRITE_IMM) ||
	    (e->op == SOFT_OP_WRITE_IMM &&
	     (flags & (SOFT_SF_COPIED | SOFT_SF_CHUNKED))) ||
	    (flags & (SOFT_SF_CHUNKED | SOFT_SF_INV)))
		return 0;
	if (!atomic_compare_exchange_strong_explicit(&h->rx_lock, &z, 2,
						     memory_order_acquire,
						     memory_order_relaxed))
		return 0;
	if (sh) { /* its SRQ's receives: their lock too, after the QP's */
		z = 0;
		if (!atomic_compare_exchange_strong_explicit(
			    &sh->lock, &z, 2, memory_order_acquire,
			    memory_order_relaxed)) {
			atomic_store_explicit(&h->rx_lock, 0,
					      memory_order_release);
			return 0;
		}
		prodp = &sh->prod;
		consp = &sh->cons;
		rq = (const char *)sh + qp->peer_srq_rq_off;
		nent = qp->peer_srq_n;
		nsge = qp->peer_srq_sge;
	} else {
		prodp = &h->rq_prod;
		consp = &h->rq_cons;
		rq = (const char *)h + qp->peer_rq_off;
		nent = qp->peer_rq_n;
		nsge = qp->peer_rq_sge;
	}
	/* under its rx lock the responder acknowledges nothing more: a
	 * message its cumulative ACK covers is not served twice */
	if (!peer_listed(qp) ||
	    atomic_load_explicit(&s->state, memory_order_acquire) !=
		    SOFT_SLOT_STATE(e->msgno, SOFT_SLOT_READY) ||
	    e->msgno < tx_acked(qp))
		goto unlock;
	prod = atomic_load_explicit(prodp, memory_order_acquire);
	cons = atomic_load_explicit(consp, memory_order_relaxed);
	if (cons > prod || prod - cons > nent)
		goto unlock;
	if (cons == prod ||
	    (sh ? srq_came_empty(s)
		: mirror_late(rq, cons, prod, nent, nsge, e->msgno))) {
		/* no receive posted when it came: its HCA sent an RNR NAK */
		s->rnr_timer = h->rnr_timer & 31;
		ok = atomic_compare_exchange_strong_explicit(
			&s->state, &st,
			SOFT_SLOT_STATE(e->msgno, SOFT_SLOT_RNR),
			memory_order_acq_rel, memory_order_relaxed);
		goto unlock;
	}
	num = mirror_sges(rq, cons, nent, nsge, sge);
	if (num < 0)
		goto unlock;
	if (e->op == SOFT_OP_SEND) {
		for (i = 0; i < num; i++)
			room += sge[i].length;
		if (room < e->byte_len)
			nak = SOFT_NAK_INV_REQ; /* its LOC_LEN_ERR */
		pay.iov_base = s->payload;
		pay.iov_len = e->byte_len;
		for (i = 0; i < num && off < e->byte_len && !nak; i++) {
			n = e->byte_len - off < sge[i].length
				    ? e->byte_len - off
				    : sge[i].length;
			if (!n)
				continue;
			r = (flags & SOFT_SF_COPIED)
				    ? serve_write(qp, &sge[i], n, &pay, 1, off)
				    : serve_write(qp, &sge[i], n, iov, e->niov,
						  off);
			if (r > 0) {
				nak = SOFT_NAK_REM_OP; /* its LOC_PROT_ERR */
			} else if (r) {
				if (errno == EPERM)
					qp->no_serve = 1;
				goto unlock;
			}
			off += n;
		}
	}
	flags = (flags & (SOFT_SF_IMM | SOFT_SF_SOLICITED)) |
		(nak == SOFT_NAK_REM_OP ? SOFT_CQE_PROT : 0);
	if (sh) {
		struct soft_shm_srq_cqe *c =
			(void *)((char *)sh + qp->peer_srq_cq_off +
				 (cons & (nent - 1)) * sizeof(*c));

		c->byte_len = e->byte_len;
		c->imm = s->imm;
		c->flags = flags;
		c->opcode = e->op;
		c->qpn = qp->dest_qpn;
	} else {
		outbox_cqe(qp, h, cons, e->byte_len, s->imm, flags, e->op);
	}
	atomic_store_explicit(consp, cons + 1, memory_order_release);
	served_done(qp, h, s, e->msgno, nak);
	ok = 2; /* a WQE taken */
unlock:
	if (sh)
		atomic_store_explicit(&sh->lock, 0, memory_order_release);
	atomic_store_explicit(&h->rx_lock, 0, memory_order_release);
	if (ok) {
		peer_wake(qp); /* its bell first: the kick's pass visits it */
		if (sh && ok == 2)
			soft_srq_kick(sh, prod, cons + 1, qp->peer_ctx_idx);
	}
	return ok != 0;
}

/* waited -- our head message has sat untouched (READY) for a whole
 * liveness period: the responder is not running; serve it */
static int waited(struct soft_qp *qp, struct soft_swqe *e, uint64_t st,
		  uint64_t now)
{
	if (st != SOFT_SLOT_STATE(e->msgno, SOFT_SLOT_READY) ||
	    qp->wait_msgno != e->msgno + 1) {
		qp->wait_msgno = e->msgno + 1;
		qp->wait_since = now;
		return 0;
	}
	return now - qp->wait_since >= SOFT_LIVENESS_NS;
}

/* tx_qp -- turn finished send WQEs into completions, in order */
static void tx_qp(struct soft_qp *qp)
{
	int served = 0;

	struct soft_swqe *e;
	struct soft_slot *s;
	struct ibv_wc wc;
	enum ibv_wc_status status;
	const struct iovec *iov;
	uint64_t st, now;
	/* the responder's cumulative ACK (rx_ack), read once a pass: the
	 * slots it covers were not written back */
	uint64_t acked = tx_acked(qp);

	while (qp->sq_tail != qp->sq_head) {
		e = &qp->sq[qp->sq_tail & qp->sq_mask];
		if (e->kind == SOFT_WQE_RING) {
			/* its local iovecs: only the rare cases below read
			 * them (not worth a multiply on every pass) */
			iov = qp->sq_iov +
			      (qp->sq_tail & qp->sq_mask) * qp->sq_iov_n;
			s = slot_at(qp->slots, e->msgno, qp->sq_mask);
			st = atomic_load_explicit(&s->state,
						  memory_order_acquire);
			if ((st & 0xff) == SOFT_SLOT_DONE) {
				soft_tsan_acquire(qp);
				status = nak_status(s->status);
				if (status == IBV_WC_SUCCESS &&
				    (e->op == SOFT_OP_CMP_SWP ||
				     e->op == SOFT_OP_FETCH_ADD))
					soft_iov_scatter(iov, 1, 0, s->payload,
							 8);
			} else if (e->msgno < acked) {
				status = IBV_WC_SUCCESS;
			} else if (qp->state == IBV_QPS_ERR) {
				/* one the responder committed before we could
				 * withdraw it succeeded, as the ones before it:
				 * a flush here and a success after it (DONE,
				 * above) would leave a hole */
				status = cancel_slot(qp, s, e->msgno,
						     IBV_WC_WR_FLUSH_ERR);
			} else if ((st & 0xff) == SOFT_SLOT_RNR) {
				uint32_t code = s->rnr_timer & 31;

				/* an RNR NAK with no retry left fails at once */
				if (qp->attr.rnr_retry != 7 &&
				    qp->rnr_count >= qp->attr.rnr_retry) {
					status = cancel_slot(
						qp, s, e->msgno,
						IBV_WC_RNR_RETRY_EXC_ERR);
				} else {
					now = soft_now_ns();
					if (!qp->rnr_since)
						qp->rnr_since = now;
					if (now - qp->rnr_since <
					    (uint64_t)rnr_table[code] *
						    10000ull) {
						rnr_wait(qp->ctx);
						return;
					}
					qp->rnr_count++;
					qp->rnr_since = 0;
					atomic_store_explicit(
						&qp->seg->rnr_tries,
						SOFT_TRIES(e->msgno,
							   qp->rnr_count),
						memory_order_relaxed);
					if (s->flags & SOFT_SF_STAMP)
						srq_stamp(qp, s); /* anew */
					atomic_compare_exchange_strong(
						&s->state, &st,
						SOFT_SLOT_STATE(
							e->msgno,
							SOFT_SLOT_READY));
					if (qp->peer)
						peer_wake(qp);
					return;
				}
			} else {
				if (st ==
				    SOFT_SLOT_STATE(e->msgno, SOFT_SLOT_XFER)) {
					status = tx_chunk(qp, e, s, iov);
					if (status != IBV_WC_SUCCESS) {
						status = cancel_slot(qp, s,
								     e->msgno,
								     status);
						goto finished;
					}
				}
				if (!served && !qp->path_down &&
				    serve_local(qp, 1)) {
					served = 1;
					continue;
				}
				/* in flight: is the responder still there?  A
				 * busy poller reads the clock every
				 * SOFT_CHECK_POLLS polls, the progress thread
				 * (a sweep a millisecond at most) every time */
				if (++qp->unchecked < SOFT_CHECK_POLLS &&
				    !qp->ctx->in_thread)
					return;
				qp->unchecked = 0;
				now = soft_now_ns();
				if (now < qp->next_check)
					return;
				qp->next_check = now + SOFT_LIVENESS_NS;
				if (peer_reachable(qp)) {
					qp->dead_since = 0;
					/* the responder has not run for a while:
					 * do its part, as its HCA would (one of
					 * this process: whoever owns it) */
					if (waited(qp, e, st, now) && !served &&
					    (serve_local(qp, 0) ||
					     serve_remote(qp, e, s, iov))) {
						served = 1;
						continue;
					}
					return;
				}
				if (!qp->dead_since)
					qp->dead_since = now;
				if (now - qp->dead_since <
				    transport_timeout_ns(qp)) {
					qp->next_check = now + 1000000;
					return;
				}
				status = cancel_slot(qp, s, e->msgno,
						     IBV_WC_RETRY_EXC_ERR);
			}
		finished:
			served = 0;
			qp->ctx->outstanding--;
			qp->rnr_count = 0;
			qp->rnr_since = 0;
			qp->dead_since = 0;
			qp->unchecked = 0;
		} else {
			status = (enum ibv_wc_status)e->status;
		}
		if (e->ring_end)
			qp->ring_tail = e->ring_end; /* its room is free */
		if (e->spill) {
			free(e->spill);
			e->spill = NULL;
		}
		qp->sq_tail++;
		if (status != IBV_WC_SUCCESS || e->signaled) {
			struct ibv_wc *w = cq_take(qp->scq);

			*(w ? w : &wc) = (struct ibv_wc){
				.wr_id = e->wr_id,
				.status = status,
				.opcode = (enum ibv_wc_opcode)e->wc_opcode,
				.byte_len = e->byte_len,
				.qp_num = qp->qpx.qp_base.qp_num,
			};
			if (!w)
				soft_cq_push(qp->scq, &wc, 0);
		}
		if (status != IBV_WC_SUCCESS)
			soft_qp_to_error(qp);
	}
	if (qp->sq_err_pending && qp->state == IBV_QPS_ERR)
		qp->sq_err_pending = 0;
	if (qp->sqd_notify)
		soft_sqd_check(qp);
}

/* flush_rq -- a QP in ERR completes its receive WQEs with FLUSH */
static void flush_rq(struct soft_qp *qp)
{
	struct ibv_wc wc;

	/* what the initiator completed before the error comes first; an
	 * initiator that died while serving us leaves the lock behind */
	if (!rx_trylock(qp)) {
		if (!qp->peer || soft_pid_alive(qp->peer_pid, qp->peer_start))
			return; /* next progress */
		atomic_store(&qp->seg->rx_lock, 1);
	}
	rx_drain(qp);
	rx_unlock(qp);
	while (qp->rq_tail != qp->rq_head) {
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = qp->rq[qp->rq_tail & (qp->rq_size - 1)].wr_id;
		wc.status = IBV_WC_WR_FLUSH_ERR;
		wc.opcode = IBV_WC_RECV;
		wc.qp_num = qp->qpx.qp_base.qp_num;
		qp->rq_tail++;
		soft_cq_push(qp->rcq, &wc, 0);
	}
}

/*
 * ack_needed -- must this pass look at the responder's cumulative ACK?
 * Only what waits on it does: a signalled WQE's completion, room in the
 * SQ (half of it taken) or in the copy ring, an armed CQ (whose event
 * the completion may raise), the progress thread (its naps and timers),
 * a drain to SQD (its event once the SQ is empty).
 * An unsignalled SEND's ACK shows the program nothing (on an HCA its SQ
 * entry even stays taken until a later completion is polled), so a busy
 * sender leaves the ACK's line in the responder's cache, where the next
 * ACK is written, instead of taking it back on every poll: one line
 * crossing the cores less a message.  tx_qp reads it anyway, every
 * SOFT_CHECK_POLLS passes at the latest.  A peer on this context writes
 * its ACKs under our lock, in our cache: those are read at once (the
 * WQEs retired leave nothing for the next passes to visit).  Lock held.
 */
static inline __attribute__((always_inline)) int ack_needed(
	const struct soft_qp *qp)
{
	return qp->peer_same_ctx || qp->sig_head > qp->sq_tail ||
	       qp->sq_head - qp->sq_tail > qp->cap.max_send_wr / 2 ||
	       qp->ring_head != qp->ring_tail || qp->ctx->in_thread ||
	       qp->ctx->narmed || qp->sqd_notify;
}

/*
 * tx_fast -- tx_qp's usual cases, inlined into the visit: the WQEs the
 * responder's cumulative ACK covers (slots it never wrote back, no
 * inline copy to give back; copy ring room goes back) complete in order;
 * then, the head still in flight untouched (READY, nobody to serve for
 * it), only tx_qp's count towards the next liveness check.  The ACK is
 * read only when ack_needed: otherwise the head counts as in flight.  A
 * responder of this process on another context is served (tx_qp's
 * serve_local) only then too: a completion someone waits for, or SQ or
 * ring room, needs it; an unsignalled SEND's delivery does not, and its
 * own poll, the progress thread or the next liveness check takes it, as
 * for a responder of another process.  1: done, 0: tx_qp must look at
 * what is left (anything else, the same way as before).  Lock held.
 */
static inline __attribute__((always_inline)) int tx_fast(struct soft_qp *qp)
{
	int need = ack_needed(qp);
	uint64_t acked = need ? tx_acked(qp) : 0;
	struct soft_swqe *e;
	struct ibv_wc *w;
	uint64_t st;

	do {
		e = &qp->sq[qp->sq_tail & qp->sq_mask];
		if (e->kind != SOFT_WQE_RING || e->spill)
			return 0;
		st = atomic_load_explicit(
			&slot_at(qp->slots, e->msgno, qp->sq_mask)->state,
			memory_order_acquire);
		if (e->msgno >= acked) {
			/* in flight (tx_qp: not DONE, RNR, XFER or ERR; no
			 * serve_local; the clock not due) */
			if (st != SOFT_SLOT_STATE(e->msgno, SOFT_SLOT_READY) ||
			    qp->state == IBV_QPS_ERR || qp->ctx->in_thread ||
			    qp->unchecked + 1 >= SOFT_CHECK_POLLS ||
			    (need && !qp->path_down && qp->peer &&
			     qp->peer_pid == soft_self_pid &&
			     !qp->peer_same_ctx))
				return 0;
			qp->unchecked++;
			return 1;
		}
		if ((st & 0xff) == SOFT_SLOT_DONE)
			return 0; /* a verdict of its own */
		if (e->signaled) {
			w = cq_take(qp->scq);
			if (!w)
				return 0;
			*w = (struct ibv_wc){
				.wr_id = e->wr_id,
				.status = IBV_WC_SUCCESS,
				.opcode = (enum ibv_wc_opcode)e->wc_opcode,
				.byte_len = e->byte_len,
				.qp_num = qp->qpx.qp_base.qp_num,
			};
		}
		qp->ctx->outstanding--;
		qp->rnr_count = 0;
		qp->rnr_since = 0;
		qp->dead_since = 0;
		qp->unchecked = 0; /* it answered: no clock needed */
		if (e->ring_end)
			qp->ring_tail = e->ring_end; /* its room is free */
		qp->sq_tail++;
	} while (qp->sq_tail != qp->sq_head);
	/* tx_qp's ending: nothing of it due in the usual case */
	return !qp->sq_err_pending && !qp->sqd_notify;
}

/* rc_visit -- one RC QP's share of a progress sweep, NET: the QP's sends
 * go to another host (net.c); lock held */
static inline __attribute__((always_inline)) void rc_visit(struct soft_qp *qp,
							   int net)
{
	/* IB mode: a QP whose path is down moves nothing (apm.c) */
	int down = soft_link_ib && soft_apm_check(qp);

	if (net) {
		soft_net_progress(qp); /* the network path */
		if (qp->sqd_notify)
			soft_sqd_check(qp);
	}
	/* the send side first: a message found below is delivered, and
	 * answered, with nothing of ours left to do before it */
	if (qp->sq_tail != qp->sq_head && !tx_fast(qp))
		tx_qp(qp);
	if (qp->peer) {
		uint32_t epoch = atomic_load_explicit(&qp->peer->epoch,
						      memory_order_acquire);

		if (!down && !rx_idle(qp, epoch))
			rx_qp(qp, epoch);
	} else if (qp->dest_qpn && qp->state >= IBV_QPS_RTR &&
		   qp->state != IBV_QPS_ERR) {
		uint64_t now = soft_now_ns();

		if (now >= qp->next_check) {
			qp->next_check = now + SOFT_LIVENESS_NS;
			soft_qp_connect(qp);
		}
	}
	if (qp->state == IBV_QPS_ERR && qp->rq_tail != qp->rq_head)
		flush_rq(qp);
}

/* rc_progress -- an RC QP's share of a progress pass; lock held */
static void rc_progress(struct soft_qp *qp)
{
	rc_visit(qp, 0);
}

/* rc_net_progress -- the same for an RC QP to another host; lock held */
static void rc_net_progress(struct soft_qp *qp)
{
	rc_visit(qp, 1);
}

/* qp_visit -- one QP's share of a progress pass; lock held */
static inline void qp_visit(struct soft_qp *qp)
{
	qp->ops->progress(qp);
}

/*
 * qp_needs_pass -- must the next pass visit qp though nobody rings it?
 * Work in flight (the liveness, RNR and transport timers run from tx_qp),
 * a chunked transfer, a connect to retry, receives to flush, and the QPs
 * whose progress lives elsewhere (always_pass: UD/UC, DC, the network
 * path) or that have no bell.
 */
static int qp_needs_pass(struct soft_qp *qp)
{
	return qp->sq_tail != qp->sq_head || qp->bell == SOFT_BELL_NONE ||
	       qp->ops->always_pass || qp->rx.active ||
	       (qp->state == IBV_QPS_ERR && qp->rq_tail != qp->rq_head) ||
	       (!qp->peer && qp->dest_qpn && qp->state >= IBV_QPS_RTR &&
		qp->state != IBV_QPS_ERR);
}

/* soft_bell_alloc -- give a new QP its bell (or none: then it is visited
 * every pass); lock held */
void soft_bell_alloc(struct soft_qp *qp)
{
	struct soft_context *ctx = qp->ctx;
	uint32_t b = SOFT_BELL_NONE, n;
	void *p;

	qp->peer_bell = SOFT_BELL_NONE;
	if (ctx->nbell_free) {
		b = ctx->bell_free[--ctx->nbell_free];
	} else if (ctx->bell_hi < SOFT_BELLS) {
		if (ctx->bell_hi == ctx->bell_cap) {
			n = ctx->bell_cap ? 2 * ctx->bell_cap : 64;
			p = realloc(ctx->bell_qp, n * sizeof(*ctx->bell_qp));
			if (!p)
				goto out; /* no bell: visited every pass */
			ctx->bell_qp = p;
			p = realloc(ctx->bell_free,
				    n * sizeof(*ctx->bell_free));
			if (!p)
				goto out;
			ctx->bell_free = p;
			ctx->bell_cap = n;
		}
		b = ctx->bell_hi++;
	}
out:
	qp->bell = b;
	if (b != SOFT_BELL_NONE)
		ctx->bell_qp[b] = qp;
	qp->seg->bell = b;
	ctx->nqp++;
	if (ctx->bells_on) {
		soft_qp_hot(qp);
		return;
	}
	qp->hot = 1; /* a sweeping context visits it anyway */
	if (ctx->nqp > ctx->sweep_max) {
		/* enough QPs that a sweep costs more than the list: every
		 * QP on it once, then only those with work (for good) */
		struct soft_list *l;

		soft_ctx_fence_wake(ctx); /* peers ring from now on */
		ctx->bells_on = 1;
		for (l = ctx->qps.next; l != &ctx->qps; l = l->next)
			soft_list_add(
				&ctx->hot,
				&soft_container_of(l, struct soft_qp, link)
					 ->hot_link);
	}
}

/* soft_bell_free -- the QP goes: its bell is free (a late ring of it only
 * makes its next owner visited once for nothing); lock held */
void soft_bell_free(struct soft_qp *qp)
{
	struct soft_context *ctx = qp->ctx;

	if (qp->hot && ctx->bells_on)
		soft_list_del(&qp->hot_link);
	qp->hot = 0;
	ctx->nqp--;
	if (qp->bell == SOFT_BELL_NONE)
		return;
	ctx->bell_qp[qp->bell] = NULL;
	ctx->bell_free[ctx->nbell_free++] = qp->bell;
	qp->bell = SOFT_BELL_NONE;
}

/* bells_take -- the QPs rung since the last look join the pass */
static void bells_take(struct soft_context *ctx)
{
	_Atomic uint64_t *w = soft_reg->bells[ctx->reg_idx].w;
	uint32_t i, nw = (ctx->bell_hi + 63) / 64;
	uint64_t v;
	struct soft_qp *qp;

	for (i = 0; i < nw; i++) {
		if (!atomic_load_explicit(&w[i], memory_order_relaxed))
			continue;
		v = atomic_exchange_explicit(&w[i], 0, memory_order_seq_cst);
		while (v) {
			qp = ctx->bell_qp[i * 64 +
					  (uint32_t)__builtin_ctzll(v)];
			v &= v - 1;
			if (qp)
				soft_qp_hot(qp);
		}
	}
}

/* safety_sweep -- once a second, every QP joins the pass: what a
 * producer that died between its data and its ring left behind is found
 * (SOFTRDMA_TEST_NOSWEEP=1: never, so that tests see a lost ring) */
static void safety_sweep(struct soft_context *ctx)
{
	static _Atomic int off = -1;
	struct soft_list *l;
	uint64_t now;

	now = soft_now_ns();
	if (soft_env_flag(&off, "SOFTRDMA_TEST_NOSWEEP") ||
	    now - ctx->last_sweep < 1000000000ull)
		return;
	ctx->last_sweep = now;
	for (l = ctx->qps.next; l != &ctx->qps; l = l->next)
		soft_qp_hot(soft_container_of(l, struct soft_qp, link));
}

/* sweep -- every QP of the context (IB mode: links and paths change under
 * every QP, apm.c) */
static void sweep(struct soft_context *ctx)
{
	struct soft_list *l;

	for (l = ctx->qps.next; l != &ctx->qps; l = l->next)
		qp_visit(soft_container_of(l, struct soft_qp, link));
}

/*
 * progress -- one pass (soft_progress; inlined into ibv_poll_cq); lock
 * held.  It visits the QPs rung in the context's doorbell and those on
 * the hot list (work in flight and its timers, see qp_needs_pass), each
 * once, not every QP: an idle QP costs nothing.  A QP that this pass gives
 * work to (a peer on this context) joins the list's tail and is visited in
 * the same pass, as a sweep would.
 */
static inline __attribute__((always_inline)) void progress(
	struct soft_context *ctx)
{
	struct soft_list *l, *next;
	struct soft_qp *qp;
	uint32_t pass;

	if (ctx->maps) /* peers' MRs mapped: those that went go */
		soft_map_sweep(ctx);
	if (soft_link_ib) { /* link changes: PORT_ERR / PORT_ACTIVE (apm.c) */
		soft_port_poll(ctx);
		sweep(ctx);
		return;
	}
	if (!ctx->bells_on || ctx->owner_pid != soft_self_pid) {
		sweep(ctx); /* a few QPs, or a forked child's copy */
		return;
	}
	bells_take(ctx);
	pass = ++ctx->bell_pass;
	if (!(pass & 1023) || ctx->in_thread)
		safety_sweep(ctx);
	for (l = ctx->hot.next; l != &ctx->hot; l = next) {
		qp = soft_container_of(l, struct soft_qp, hot_link);
		if (qp->visited == pass) { /* back on the list after its turn */
			next = l->next;
			continue;
		}
		qp->visited = pass;
		qp->again = 0;
		qp_visit(qp);
		next = l->next; /* what the visit added is behind us */
		/* a retry its visit asked for (soft_qp_hot) stays: its bell
		 * was taken, nothing else would bring it back */
		if (!qp->again && !qp_needs_pass(qp)) {
			soft_list_del(l);
			qp->hot = 0;
		}
	}
}

/* soft_progress -- progress out of line: every caller but the poll */
void soft_progress(struct soft_context *ctx)
{
	progress(ctx);
}

/*
 * soft_poll_cq -- ibv_poll_cq: progress the context, then drain (an
 * empty CQ while another application thread is in the context: nothing,
 * at once, soft_ctx_enter_poll).  A CQ
 * that already holds the n completions asked for is drained without a
 * pass, as an HCA's poll only reads its CQ: a pass takes up to 64
 * messages and their receive WQEs, and a receiver that took them faster
 * than it polls their completions (and posts its receives again) ran out
 * of WQEs, RNR NAKs that cost the sender min_rnr_timer each (ib_send_bw
 * -s 8: about 1,000 per million messages).
 */
int soft_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct soft_cq *cq = to_scq(ibcq);
	int biased;
	const struct soft_cqe *q;
	uint32_t h, size, i, d = 0, m;

	cp_probe(0);
	biased = soft_ctx_enter_poll(cq->ctx, cq->single, &cq->count,
				     &cq->backoffs);
	if (biased < 0)
		return 0; /* empty, and another application thread's turn */
	m = cq->count;

	if (n > 0 && !m) {
		/* empty: the pass's completions go straight into wc[]
		 * (cq_take), then what the ring took after them */
		cq->direct = wc;
		cq->direct_left = (uint32_t)n;
		progress(cq->ctx); /* soft_progress, inlined */
		d = (uint32_t)n - cq->direct_left;
		cq->direct_left = 0;
		wc += d;
		m = cq->count < (uint32_t)n - d ? cq->count : (uint32_t)n - d;
	} else if (n <= 0 || m < (uint32_t)n) {
		progress(cq->ctx);
		m = n <= 0		      ? 0
		    : cq->count < (uint32_t)n ? cq->count
					      : (uint32_t)n;
	} else {
		m = (uint32_t)n;
	}
	/* the copy with the CQ's fields in registers (a store to wc[] may
	 * alias them) */
	if (m) {
		q = cq->q;
		h = cq->head;
		size = cq->size;
		i = 0;
		do {
			wc[i] = q[h].wc;
			if (++h == size)
				h = 0;
		} while (++i < m);
		cq->head = h;
		soft_cq_count_set(cq, cq->count - m);
	}
	soft_ctx_exit_poll(cq->ctx, biased);
	return (int)(d + m);
}

/*
 * test_thread_hold -- tests only (tests/soft/progress): while the file
 * that SOFTRDMA_TEST_THREAD_HOLD names exists, the progress thread, about
 * to pass with the context held, removes it and keeps the context 200 ms
 * first: a poll of the program's that comes meanwhile must wait for that
 * pass, not find its CQ empty and leave (soft_ctx_others)
 */
static void test_thread_hold(void)
{
	static _Atomic(const char *) name = (const char *)-1;
	const char *path = soft_env_str(&name, "SOFTRDMA_TEST_THREAD_HOLD");

	if (path && !unlink(path))
		usleep(200000);
}

/* thread_main -- progress for contexts that wait on events */
static void *thread_main(void *arg)
{
	struct soft_context *ctx = arg;
	struct soft_reg_ctx *slot = &soft_reg->ctx[ctx->reg_idx];
	_Atomic uint32_t *w = &slot->wake;
	const char *e = getenv("SOFTRDMA_TEST_NOSWEEP");
	int net = !(e && e[0] == '1'); /* "1": no safety net for CQs
					* waited on directly (tests) */
	int nap = 1, armed;
	/* seen one behind: a first pass, for a kick that came before this
	 * thread first ran */
	uint32_t v, seen = atomic_load(w) - 1;

	soft_internal = 1;
	while (!atomic_load(&ctx->thread_stop)) {
		v = atomic_load(w);
		armed = soft_hint_get(net ? &ctx->narmed : &ctx->narmed_thread);
		/* woken (v moved) though nothing is armed: an initiator took
		 * an SRQ's WQE below its armed limit (soft_srq_kick) */
		if (!armed && !ctx->serve_rings && v == seen &&
		    !soft_hint_get(&ctx->rnr_wait)) {
			nap = 1; /* no pass of ours: no timer to run */
		} else if (!soft_trylock(&ctx->lock)) {
			ctx->in_thread = 1;
			test_thread_hold();
			soft_hint_set(&ctx->rnr_wait, 0); /* again if still */
			soft_progress(ctx);
			ctx->in_thread = 0;
			/* the short nap while sends wait (their timers):
			 * counted under the lock, as posts change it */
			nap = !(ctx->outstanding &&
				(ctx->narmed || ctx->serve_rings)) &&
			      !ctx->rnr_wait;
			soft_unlock(&ctx->lock);
		} /* else busy: the nap of our last pass */
		seen = v;
		/* sleeping before the last look at w, both seq_cst: a waker
		 * that saw it 0 (no FUTEX_WAKE) bumped w before that look */
		atomic_store(&slot->sleeping, 1);
		atomic_store(&ctx->thread_nap, nap); /* soft_req_notify_cq */
		if (atomic_load(w) == v)
			soft_futex_wait(w, v, nap ? 100000000 : 1000000);
		atomic_store(&slot->sleeping, 0);
	}
	return NULL;
}

/* soft_thread_start_locked -- start the progress thread once; lock held */
void soft_thread_start_locked(struct soft_context *ctx)
{
	sigset_t all, old;

	if (!ctx->thread_started) {
		/*
		 * The thread inherits our mask: with every signal blocked the
		 * program's signals (qperf's SIGALRM) go to its own threads.
		 */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		if (!pthread_create(&ctx->thread, NULL, thread_main, ctx))
			ctx->thread_started = 1;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
}

/* soft_thread_start -- start the progress thread once */
void soft_thread_start(struct soft_context *ctx)
{
	soft_lock(&ctx->lock);
	soft_thread_start_locked(ctx);
	soft_unlock(&ctx->lock);
}

/* soft_thread_stop -- stop and join the progress thread */
void soft_thread_stop(struct soft_context *ctx)
{
	if (!ctx->thread_started)
		return;
	atomic_store(&ctx->thread_stop, 1);
	soft_wake_thread((uint32_t)ctx->reg_idx);
	pthread_join(ctx->thread, NULL);
	ctx->thread_started = 0;
}

/*
 * rc_to_rtr -- INIT->RTR of an RC QP: addressed by (GID, QPN), a GID of
 * this host names a local QP (shared memory), another host's is reached
 * over the network (net.c: the QP takes soft_rc_net_ops) or, without it,
 * is an unreachable path; lock held
 */
static void rc_to_rtr(struct soft_qp *qp)
{
	qp->dest_qpn = qp->attr.dest_qp_num;
	if (soft_ah_local(&qp->attr.ah_attr))
		atomic_store(&qp->seg->dest_qpn, qp->dest_qpn);
	else
		soft_net_connect(qp, &soft_rc_net_ops); /* issue 12 */
	soft_qp_connect(qp);
	if (qp->ctx->serve_rings)
		soft_thread_start_locked(qp->ctx);
}

/* RC over shared memory */
const struct soft_qp_ops soft_rc_ops = {
	.name = "rc",
	.post_send = rc_ops_post_send,
	.post_recv = rc_ops_post_recv,
	.sq_room = rc_sq_room,
	.progress = rc_progress,
	.flush = rc_flush,
	.sq_release = rc_sq_release,
	.modify = soft_qp_modify,
	.to_rtr = rc_to_rtr,
	.reset = soft_qp_op_nop,
	.destroy = soft_qp_op_nop,
};

/* RC to another host: sends over RoCE v2 (net.c), RC's receive queue and
 * timers; back to soft_rc_ops at RESET (soft_qp_disconnect) */
const struct soft_qp_ops soft_rc_net_ops = {
	.name = "rc-net",
	.post_send = soft_net_ops_post_send,
	.post_recv = rc_ops_post_recv,
	.sq_room = soft_net_sq_room,
	.progress = rc_net_progress,
	.flush = rc_net_flush,
	.sq_release = rc_net_sq_release,
	.modify = soft_qp_modify,
	.to_rtr = rc_to_rtr,
	.reset = soft_qp_op_nop,
	.destroy = soft_qp_op_nop,
	.always_pass = 1,
};
