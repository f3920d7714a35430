/* SPDX-License-Identifier: MIT */
/*
 * lane.h -- the contract between sessions, lanes and the interface (the
 * design of issue 10's restructuring).  In use today: the endpoint state
 * machine below (rdmamsg_ep.st, moved only by rdmamsg__ep_set_state() in
 * lib/ep.c, tested by rdmamsg__ep_can_send() before every send, request,
 * rendezvous and one-sided operation; ep->phase stays as the lane's own
 * status, the QP's, which cm/ feeds in), and the wr_id layout with
 * rdmamsg__wrid_route() (lib/iface.c: one CQ per context, completions
 * routed by wr_id), and SRQ receives (lib/srq.c: the credit windows
 * below, the wr_id of an SRQ receive and the qp_num -> endpoint map of
 * lib/internal.h).  Still the plan: the lane ops table (today's RC code
 * is not yet behind it).  Private.
 *
 * Layers
 * ------
 *   public call -> session -> lane -> verbs (provider) -> wire
 *   fd readable -> loop -> interface (CQ drain, CM event) -> lane
 *               -> session -> user callback
 *
 * - The *session* is what struct rdmamsg_ep is to the user: callbacks,
 *   backlog, fragmentation and reassembly, requests, rendezvous, sequence
 *   numbers (for replay and multicast), the endpoint state below.  It
 *   knows lanes only through struct rdmamsg__lane_ops.
 * - A *lane* is one transport instance: a QP and everything about posting
 *   on it and about its completions, including its flow-control window
 *   (credits), which depends on where its receives come from (its own
 *   receive queue, or a shared SRQ).  Today's RC code becomes the first
 *   lane; RC over an SRQ, UD (multicast) and DC follow.  A lane never
 *   calls the session by name: it reports up only through the callbacks
 *   the session registered when it opened the lane (struct
 *   rdmamsg__lane_cbs), with the session's owner pointer.
 * - Credits with an SRQ: a lane's window is the number of receives its
 *   peer may consume, granted by the receiving side as the interface
 *   reposts SRQ buffers (as UCX's rc_iface grants each endpoint a flow-
 *   control window over a shared SRQ).  The SRQ holds at least the sum of
 *   granted windows, so a sender never meets an empty SRQ (no RNR), and
 *   receive memory is bounded by the SRQ, not by the number of endpoints.
 *   A lane that goes away gives its window back to the interface at
 *   once; a reconnect starts a fresh, small window (an SRQ that grows
 *   per reconnect is the trap rxm/DAOS fell into).
 * - The *interface* (one per context) owns the completion channel, the
 *   CQs and the SRQs, and the receive buffers of an SRQ.  It drains a CQ
 *   and routes each completion to its lane from the wr_id (layout below),
 *   so there is no CQ per endpoint and no pass over idle endpoints: a
 *   lane with deferred work (backlog, credit update) puts itself on the
 *   interface's ready list and is visited once.
 * - cm/ only feeds events in: it finds the session from the rdma_cm id in
 *   O(1) (id->context), and calls the session, which moves its state with
 *   ep_set_state() and tells its lane.
 *
 * Calls down (session -> lane)
 * ----------------------------
 * One-way and non-blocking.  A down call never calls an up callback
 * before it returns (no re-entry into the session from inside its own
 * call); what it causes is reported from the interface's progress.
 *
 * - send(lane, tx): 0 -- the lane owns tx and its buffer from now on,
 *   until tx_done(tx, status) hands both back, exactly once, in posting
 *   order (unsignalled work requests are reported when a later signalled
 *   one completes, or with the flush); -EAGAIN -- no room (send queue or
 *   the peer's credits): nothing was taken, the caller keeps tx, and the
 *   lane calls writable() once when room returns; -ENOTCONN -- the lane
 *   is down or closing: nothing taken.  -EMSGSIZE for a length above
 *   what query() reported.  Never -ENOMEM on the fast path: a lane
 *   preallocates what a posted tx needs.
 * - rma(lane, op): one-sided write/read/atomic, the same ownership: the
 *   local registration stays busy until rma_done(op, status, value).
 * - flush(lane): post nothing new; everything posted completes (success,
 *   or error/flush after the QP went to ERR), then drained() is called.
 * - close(lane): one-way; may be called from inside an up callback (the
 *   lane then finishes it from progress).  closed() is the lane's last up
 *   call; after it the session may destroy() the lane and free what the
 *   lane reported back.
 * - An up callback may call send()/rma() on its lane (an echo from rx()),
 *   never destroy().
 *
 * Calls up (lane -> session, through rdmamsg__lane_cbs)
 * -----------------------------------------------------
 * - rx(owner, buf, len, imm, flags): a whole message of the lane (the
 *   session reassembles fragments).  The buffer is lent for the call; the
 *   session returns RDMAMSG__RX_KEEP to keep it (it then belongs to the
 *   session, which gives it back to the context's pool) or 0 to leave it
 *   to the lane.  Either way the lane (or, with an SRQ, the interface)
 *   reposts a receive, in batches.
 * - tx_done, rma_done, writable: as above.
 * - down(owner, status): the lane failed (QP error, peer timeout, remote
 *   access error, DISCONNECTED); posted work still completes, with flush
 *   errors.  Reported once.
 * - drained(owner), closed(owner): as above.
 *
 * Completion routing (wr_id)
 * --------------------------
 *   bit 63      1: send queue, 0: receive
 *   bits 62..32 the lane's tag: bits 19..0 its index in the interface's
 *               table (an rdmamsg__idt, lib/idtab.h; index 0: the
 *               interface itself, i.e. an SRQ receive), bits 30..20 the
 *               low 11 bits of the slot's generation
 *   bits 31..0  the lane's own: send sequence (low 32 bits: the lane
 *               rebuilds the full one from its oldest in flight, and
 *               drops a value outside [tail, head)); receive buffer index
 * The interface (lib/iface.c) finds the lane from the tag in O(1); a tag
 * whose generation bits differ from the slot's is a completion of a lane
 * already freed (a receive flushed after its QP was destroyed) and is
 * dropped, and so is one whose wc.qp_num is not the lane's QP.  A freed
 * lane's CQ room stays reserved until the CQ has been seen empty.
 * An SRQ receive names its buffer, not its lane: the interface finds the
 * lane from wc.qp_num (a qpn -> lane table), credits it to that lane's
 * window, and hands the buffer up.  Its tag has index 0; the tag's
 * generation bits and own bits 31..24 name the SRQ, bits 23..0 the
 * buffer (internal.h).
 *
 * Endpoint states (the session's; one enum, one setter, one can_send)
 * ------------------------------------------------------------------
 *   IDLE --connect--> RESOLVING --route, QP--> CONNECTING --established--> UP
 *   IDLE --accept-----------------------------> CONNECTING
 *   RESOLVING, CONNECTING, UP --failure, rejected, peer gone--> DOWN
 *   any state but DRAINING, CLOSED --rdmamsg_ep_close()--> DRAINING
 *   DRAINING --the lane's closed(), close callback--> CLOSED
 *
 * - IDLE: made, nothing on the wire.  RESOLVING: active side, address and
 *   route.  CONNECTING: QP made, handshake in flight (passive: accepted,
 *   ESTABLISHED not yet seen).  UP: sends allowed (ep_can_send()).
 * - DOWN: the connection failed or ended and the user has not closed:
 *   posted work completes with errors; nothing can be sent.
 * - DRAINING: rdmamsg_ep_close() was called (from any state): no new
 *   sends; backlog flushed or cancelled; the lane flushes and closes.
 *   A failure while DRAINING stays DRAINING (the close goes on).
 * - CLOSED: the lane reported closed() and the close callback ran; the
 *   memory may go.  Terminal.
 * Public view (rdmamsg_ep_get_state): IDLE, RESOLVING, CONNECTING ->
 * RDMAMSG_EP_CONNECTING; UP -> CONNECTED; DOWN -> DISCONNECTED; DRAINING,
 * CLOSED -> CLOSING.  Reconnect-and-replay will add DOWN -> CONNECTING
 * for a session that gets a new lane; until then there is no way back to
 * UP from DOWN.
 */
#ifndef RDMAMSG_LANE_H
#define RDMAMSG_LANE_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "idtab.h"
#include "rdmamsg.h"

struct rdmamsg_buf;
struct rdmamsg_ctx;
struct rdmamsg_srq;
struct rdmamsg__icq;
struct rdmamsg__lane_ops;
struct rdma_cm_id;

/* intrusive doubly linked list node (internal.h has its functions) */
struct rdmamsg__list {
	struct rdmamsg__list *next, *prev;
};

/* ---- endpoint (session) states ------------------------------------- */

enum rdmamsg__ep_st {
	EPS_IDLE = 0,
	EPS_RESOLVING,
	EPS_CONNECTING,
	EPS_UP,
	EPS_DOWN,
	EPS_DRAINING,
	EPS_FLUSHING,
	EPS_CLOSED,
	EPS_COUNT
};

/* rdmamsg__ep_st_legal -- whether from -> to is a transition of the
 * state machine above (a state to itself is not a transition) */
static inline int rdmamsg__ep_st_legal(enum rdmamsg__ep_st from,
				       enum rdmamsg__ep_st to)
{
	/* bit t of next[f]: f -> t is legal */
	static const uint8_t next[EPS_COUNT] = {
		[EPS_IDLE] = 1u << EPS_RESOLVING | 1u << EPS_CONNECTING |
			     1u << EPS_FLUSHING,
		[EPS_RESOLVING] = 1u << EPS_CONNECTING | 1u << EPS_DOWN |
				  1u << EPS_FLUSHING,
		[EPS_CONNECTING] =
			1u << EPS_UP | 1u << EPS_DOWN | 1u << EPS_FLUSHING,
		[EPS_UP] = 1u << EPS_DOWN | 1u << EPS_DRAINING,
		[EPS_DOWN] = 1u << EPS_FLUSHING,
		[EPS_DRAINING] = 1u << EPS_FLUSHING,
		[EPS_FLUSHING] = 1u << EPS_CLOSED,
		[EPS_CLOSED] = 0,
	};

	if ((unsigned int)from >= EPS_COUNT || (unsigned int)to >= EPS_COUNT)
		return 0;
	return (next[from] >> to) & 1;
}

/* rdmamsg__ep_st_can_send -- sends (and one-sided operations) allowed */
static inline int rdmamsg__ep_st_can_send(enum rdmamsg__ep_st st)
{
	return st == EPS_UP;
}

/* rdmamsg__ep_st_lane_up -- the connection is up (UP, or DRAINING: closed
 * by the user, its goodbye still to go) */
static inline int rdmamsg__ep_st_lane_up(enum rdmamsg__ep_st st)
{
	return st == EPS_UP || st == EPS_DRAINING;
}

/* rdmamsg__ep_st_public -- what rdmamsg_ep_get_state() reports */
static inline enum rdmamsg_ep_state rdmamsg__ep_st_public(
	enum rdmamsg__ep_st st)
{
	switch (st) {
	case EPS_UP:
		return RDMAMSG_EP_CONNECTED;
	case EPS_DOWN:
		return RDMAMSG_EP_DISCONNECTED;
	case EPS_DRAINING:
	case EPS_FLUSHING:
	case EPS_CLOSED:
		return RDMAMSG_EP_CLOSING;
	default:
		return RDMAMSG_EP_CONNECTING;
	}
}

/* ---- the lane's ops table and its up calls ------------------------- */

#define RDMAMSG__WRID_SEND	    ((uint64_t)1 << 63)
#define RDMAMSG__WRID_LANE_SHIFT    32
#define RDMAMSG__WRID_LANE_MASK	    (((uint64_t)1 << 31) - 1)
#define RDMAMSG__WRID_OWN_MASK	    (((uint64_t)1 << 32) - 1)
#define RDMAMSG__WRID_TAG_SHIFT	    RDMAMSG__WRID_LANE_SHIFT
#define RDMAMSG__WRID_TAG_INDEX	    ((1u << 20) - 1) /* most lanes */
#define RDMAMSG__WRID_TAG_GEN_SHIFT 20
#define RDMAMSG__WRID_TAG_GEN	    ((1u << 11) - 1)

/* rdmamsg__wrid -- a wr_id for lane tag lane, lane-private value own */
static inline uint64_t rdmamsg__wrid(int send, uint32_t lane, uint64_t own)
{
	return (send ? RDMAMSG__WRID_SEND : 0) |
	       ((uint64_t)(lane & RDMAMSG__WRID_LANE_MASK)
		<< RDMAMSG__WRID_LANE_SHIFT) |
	       (own & RDMAMSG__WRID_OWN_MASK);
}

/* rdmamsg__wrid_tag -- the tag of an id table handle (idtab.h: generation
 * << 32 | index, index at most RDMAMSG__WRID_TAG_INDEX) */
static inline uint32_t rdmamsg__wrid_tag(uint64_t handle)
{
	return ((uint32_t)(handle >> 32) & RDMAMSG__WRID_TAG_GEN)
		       << RDMAMSG__WRID_TAG_GEN_SHIFT |
	       ((uint32_t)handle & RDMAMSG__WRID_TAG_INDEX);
}

/* rdmamsg__wrid_lane -- the lane tag a wr_id names (0: the interface) */
static inline uint32_t rdmamsg__wrid_lane(uint64_t wr_id)
{
	return (uint32_t)((wr_id >> RDMAMSG__WRID_LANE_SHIFT) &
			  RDMAMSG__WRID_LANE_MASK);
}

/* rdmamsg__wrid_route -- the object (lane, endpoint) of the table t that
 * wr_id's tag names, or NULL: index 0 or out of range, or a generation
 * whose low bits differ from the slot's (the owner was freed) */
static inline void *rdmamsg__wrid_route(const struct rdmamsg__idt *t,
					uint64_t wr_id)
{
	uint32_t tag = rdmamsg__wrid_lane(wr_id);
	uint32_t i = tag & RDMAMSG__WRID_TAG_INDEX;
	const struct rdmamsg__idt_entry *e;

	if (__builtin_expect(i == 0 || i >= t->cap, 0))
		return NULL;
	e = &t->e[i];
	if (__builtin_expect((e->gen & RDMAMSG__WRID_TAG_GEN) !=
				     tag >> RDMAMSG__WRID_TAG_GEN_SHIFT,
			     0))
		return NULL;
	return e->p;
}

/* rdmamsg__wrid_own -- the lane-private part of a wr_id */
static inline uint64_t rdmamsg__wrid_own(uint64_t wr_id)
{
	return wr_id & RDMAMSG__WRID_OWN_MASK;
}

/* One receive completion, as a lane reports it up.  The buffer sits in
 * the receive ring the session lent the lane at open (or the SRQ's):
 * *slot is lent for the call; the session may take it by putting a
 * replacement of the same size in *slot (rdmamsg_recv_keep). */
struct rdmamsg__lane_rx {
	struct rdmamsg_buf **slot;
	uint32_t len;	    /* bytes received, the session's header included */
	uint32_t imm;	    /* RDMAMSG__RX_WRITE_IMM: the immediate (host) */
	int status;	    /* 0, -ECANCELED (flushed) or the error */
	unsigned int flags; /* RDMAMSG__RX_* */
};

#define RDMAMSG__RX_WRITE_IMM 0x1 /* a one-sided write's immediate: no data */

/* what rx() returns: repost the buffer and, once it is posted again, give
 * its credit back (reposted()); 0: nothing to give back */
#define RDMAMSG__RX_DATA 1
#define RDMAMSG__RX_CTL	 2

/* Up calls: registered by the session at open(), called with its owner
 * pointer, never from inside a down call of the same lane. */
struct rdmamsg__lane_cbs {
	int (*rx)(void *owner, const struct rdmamsg__lane_rx *rx);
	/* receives whose rx() returned DATA/CTL are posted again */
	void (*reposted)(void *owner, uint32_t data, uint32_t ctl);
	/* every send up to seq (its low 32 bits: the session rebuilds it)
	 * is done; status is seq's own (earlier ones succeeded) */
	void (*tx_done)(void *owner, uint32_t seq, int status);
	/* the lane failed (a completion with an error other than a flush):
	 * posted work still completes, with flush errors */
	void (*down)(void *owner, int status);
	/* after a poll that touched the lane (its completions were
	 * reported): visited once per progress pass */
	void (*ready)(void *owner);
};

/* What the session gives a lane at open. */
struct rdmamsg__lane_attr {
	struct rdma_cm_id *id;	   /* RC: the connection's rdma_cm id */
	uint32_t send_depth;	   /* sends in flight, the drain WR excluded */
	uint32_t nrx;		   /* receives (with an SRQ: its window) */
	uint32_t rx_len;	   /* bytes each receive takes */
	uint32_t rx_off;	   /* ... from buf->data - rx_off (the
				    * session's header in the headroom) */
	struct rdmamsg_buf **rxb;  /* the receive ring, nrx long (or the
				    * SRQ's bufs) */
	struct rdmamsg_srq *srq;   /* receives through it; NULL: own */
	int post_rx;		   /* post the ring at open */
	int hold;		   /* hold completions (set_hold) */
};

/*
 * The lane every kind shares; a kind puts it first in its own struct.
 * The session reads the fields above the line (caps and identity), never
 * writes them; the interface owns the rest.
 */
struct rdmamsg__lane {
	const struct rdmamsg__lane_ops *ops;
	const struct rdmamsg__lane_cbs *cbs;
	void *owner;
	struct rdmamsg_ctx *ctx;
	struct ibv_qp *qp; /* NULL for a lane without one */
	uint32_t qpn;
	uint32_t max_inline; /* bytes a send may carry inline */
	uint32_t send_depth;
	int down;	     /* error() was called: nothing is reposted */
	/* ---- the interface's (iface.c) ---- */
	uint64_t wrid_tag; /* the tag's bits of every wr_id */
	uint64_t handle;   /* in ctx->ifc.eps */
	uint32_t cq_need;  /* CQ entries reserved */
	struct rdmamsg__icq *icq;
	int hold; /* completions wait in early[] (active connect) */
	struct ibv_wc *early;
	uint32_t nearly, early_cap;
	struct rdmamsg__list ready_link; /* on ctx->polls */
};

#define RDMAMSG__TX_INLINE 0x1 /* sge may be copied at post time */
#define RDMAMSG__TX_SIGNAL 0x2 /* report this send's completion */

/*
 * The ops table (down calls).  Every call is one-way and non-blocking
 * and never calls an up callback before it returns.  seq is the
 * session's send sequence: the lane puts its low 32 bits in the wr_id and
 * reports them in tx_done().
 */
struct rdmamsg__lane_ops {
	const char *name;
	/* a lane bound to cbs/owner; nothing up is called before it
	 * returns */
	int (*open)(struct rdmamsg_ctx *ctx, const struct rdmamsg__lane_attr *a,
		    const struct rdmamsg__lane_cbs *cbs, void *owner,
		    struct rdmamsg__lane **lane);
	/* one message: sge[0] the session's header (+ payload when copied),
	 * sge[1] a zero-copy payload (its lkey); the memory stays the
	 * lane's until tx_done() covers seq.  0, or a positive errno from
	 * the provider (nothing taken) */
	int (*send)(struct rdmamsg__lane *lane, struct ibv_sge *sge, int nsge,
		    uint64_t seq, unsigned int flags);
	/* one-sided: RDMA write (with immediate), read, atomics; wr's
	 * wr_id is set by the lane; signalled */
	int (*post)(struct rdmamsg__lane *lane, struct ibv_send_wr *wr,
		    uint64_t seq);
	/* post receives idx[0..n) of the ring (the SRQ variant: nothing,
	 * its receives are the interface's) */
	int (*post_recvs)(struct rdmamsg__lane *lane, const uint32_t *idx,
			  uint32_t n);
	/* the interface hands over a run of this lane's completions;
	 * returns how many it took (0: none is this lane's) */
	uint32_t (*wcs)(struct rdmamsg__lane *lane, const struct ibv_wc *wc,
			uint32_t n);
	/* stop: the QP goes to error; with drain, a signalled drain WR at
	 * seq whose flush completion follows every earlier send (1 when
	 * posted).  Receives are not reposted from now on. */
	int (*error)(struct rdmamsg__lane *lane, uint64_t seq, int drain);
	/* release everything; completions still queued find nothing */
	void (*destroy)(struct rdmamsg__lane *lane);
};

extern const struct rdmamsg__lane_ops rdmamsg__lane_rc_ops;

/* rdmamsg__lane_send -- the down call of the fast path */
static inline int rdmamsg__lane_send(struct rdmamsg__lane *lane,
				     struct ibv_sge *sge, int nsge,
				     uint64_t seq, unsigned int flags)
{
	return lane->ops->send(lane, sge, nsge, seq, flags);
}

#endif /* RDMAMSG_LANE_H */
