/* SPDX-License-Identifier: MIT */
/*
 * lane.h -- the contract between sessions, lanes and the interface
 * (issue 10's restructuring), and what implements it: the ops table and
 * up calls below, today's RC code as the first lane (lib/lane_rc.c, RC
 * over a shared SRQ as its variant), the session's side in lib/ep.c and
 * lib/msg.c (rdmamsg__ep_bind/unbind, rdmamsg__ep_lane_cbs), the
 * interface in lib/iface.c, the endpoint state machine
 * (rdmamsg__ep_set_state() in lib/ep.c, rdmamsg__ep_can_send() before
 * every send, request, rendezvous and one-sided operation), the wr_id
 * layout with rdmamsg__wrid_route().  tests/unit/session drives a session
 * against a fake lane through this table alone.  Private.
 *
 * Layers
 * ------
 *   public call -> session -> lane ops -> verbs (provider) -> wire
 *   fd readable -> loop -> interface (CQ drain, CM event) -> lane
 *               -> session (up calls) -> user callback
 *
 * - The *session* is what struct rdmamsg_ep is to the user: callbacks,
 *   backlog, fragmentation and reassembly, credits (the message header's
 *   piggybacked flow control), requests, rendezvous, the send sequence
 *   and its slot ring (what each posted send owns and reports), the
 *   endpoint state below, the receive ring's buffers (lent to the lane).
 *   It knows its lane only through struct rdmamsg__lane_ops and the
 *   read-only part of struct rdmamsg__lane (caps: max_inline, QP).
 * - A *lane* is one transport instance: a QP and everything about posting
 *   on it and about its completions.  A lane never calls the session by
 *   name: it reports up only through the callbacks the session registered
 *   at open() (struct rdmamsg__lane_cbs), with the session's owner
 *   pointer.  RC is the first (RC over an SRQ its variant); UD multicast
 *   and DC follow as new ops tables.
 * - Re-binding: the session holds one lane pointer (rdmamsg_ep.ln).
 *   rdmamsg__ep_unbind() destroys it (its queued completions then find
 *   nothing: wr_id generation, qp_num), rdmamsg__ep_bind() opens a fresh
 *   one of any kind with the same up calls; the session's sequence,
 *   backlog and slot ring stay.  Reconnect-and-replay (issue 15) will
 *   bind a DOWN session to a new lane and post its unacknowledged sends
 *   again.
 * - Credits with an SRQ: a lane's window is the number of receives its
 *   peer may consume, reserved on the SRQ at open (rdmamsg__srq_reserve:
 *   the SRQ holds at least the sum of reserved windows, so a sender never
 *   meets an empty SRQ, no RNR), and receive memory is bounded by the
 *   SRQ, not by the number of endpoints.  A consumed SRQ buffer is
 *   reposted before reposted() gives its credit back.  A lane that goes
 *   away gives its window back at once (its buffers stay posted); a
 *   reconnect starts a fresh window (an SRQ that grows per reconnect is
 *   the trap rxm/DAOS fell into).
 * - Control credits (msg.c): a receiver that owes credits can always
 *   return them.  A credit update may spend the last control credit (the
 *   goodbye's), and a session that owes its peer two control credits
 *   returns them in an update of its own (it costs one, so no ping-pong):
 *   without that, a receiver owing data credits with only the goodbye's
 *   control credit left waited forever for a peer out of data credits
 *   (DC, two control credits on an SRQ, receive depth 4).
 * - The *interface* (one per context) owns the completion channel, the
 *   CQs and the SRQs and their buffers.  It drains a CQ and routes each
 *   run of completions to its lane's wcs() from the wr_id (layout below)
 *   -- an SRQ receive to the RC lane of its qp_num -- so there is no CQ
 *   per endpoint and no pass over idle endpoints: a lane that had
 *   completions goes on the interface's ready list, and its session's
 *   ready() up call runs once per progress pass.  While a lane holds its
 *   completions (an active connection before its ESTABLISHED event was
 *   read: the peer's grant must not be read before the handshake) the
 *   interface keeps them and hands them over when the session leaves
 *   CONNECTING.
 * - cm/ only feeds events in: it finds the session from the rdma_cm id in
 *   O(1) (id->context) and calls the session, which moves its state with
 *   rdmamsg__ep_set_state() and tells its lane.
 *
 * Calls down (session -> lane, struct rdmamsg__lane_ops)
 * ------------------------------------------------------
 * One-way and non-blocking.  A down call never calls an up callback
 * before it returns (no re-entry into the session from inside its own
 * call); what it causes is reported from the interface's progress.
 *
 * - open(ctx, attr, cbs, owner): the lane, with the session's receive
 *   ring (or SRQ), depths and whether it holds completions.
 * - send(lane, sge, nsge, seq, flags): 0 -- the lane owns the memory sge
 *   names (the session's header slot, a zero-copy buffer with its lkey)
 *   until tx_done() covers seq; an INLINE send is copied before send()
 *   returns.  A positive errno: nothing was taken, seq is not used.
 *   The session keeps the send queue's room (send_depth in flight) and
 *   the peer's credits, so the lane never refuses for room.
 * - post(lane, wr, seq): one-sided (RDMA write, write with immediate,
 *   read, atomics), signalled, the same ownership.
 * - post_recvs(lane, idx, n): ring buffers idx[] are the lane's again
 *   (the SRQ variant: nothing to do, the interface reposts).
 * - grow_recvs(lane, idx, n, rx_batch): the ring grows (its own, RC):
 *   buffers idx[], past nrx and below nrx_max, each once, are the lane's
 *   for the first time (their CQ room the session reserved:
 *   rdmamsg__iface_grow), and data receives are reposted rx_batch at a
 *   time from now on.  NULL for a kind whose ring never grows.
 * - error(lane, seq, drain): the lane stops (QP to error); with drain, a
 *   signalled drain WR at seq whose flush completion comes after every
 *   earlier send's (1 when posted).  Nothing is reposted from then on.
 * - destroy(lane): everything goes; a lane's last call.  Never from an up
 *   callback of the same lane.
 * - wcs(lane, wc, n): called by the interface, not the session.
 *
 * Calls up (lane -> session, struct rdmamsg__lane_cbs)
 * ----------------------------------------------------
 * - rx(owner, slot, len, status, imm): one receive (status 0, a write
 *   with immediate, -ECANCELED for a flush, or an error), its buffer lent
 *   for the call in *slot; the session takes it by putting a replacement
 *   in *slot.  Returns RDMAMSG__RX_DATA/CTL to
 *   have it reposted, 0 not to (a flush, a protocol error).
 * - reposted(owner, data, ctl): those receives are posted again; only now
 *   are their credits owed to the peer.
 * - tx_done(owner, seq, status): every send up to seq (low 32 bits) is
 *   done, in posting order, each exactly once (unsignalled sends complete
 *   with the next signalled one or the flush); status is seq's own.
 * - down(owner, status): a completion with an error other than a flush;
 *   posted work still completes, with flush errors.
 * - ready(owner): after the lane's completions of this pass.
 * An up callback may call send()/post() on its lane (an echo from rx()),
 * never destroy().
 *
 * Completion routing (wr_id)
 * --------------------------
 *   bit 63      1: send queue, 0: receive
 *   bits 62..32 the lane's tag: bits 19..0 its index in the interface's
 *               table (an rdmamsg__idt, lib/idtab.h; index 0: the
 *               interface itself, i.e. an SRQ receive), bits 30..20 the
 *               low 11 bits of the slot's generation
 *   bits 31..0  the lane's own: send sequence (low 32 bits: the session
 *               rebuilds the full one from its newest posted, and one
 *               below its oldest in flight completes nothing); receive
 *               buffer index
 * The interface (lib/iface.c) finds the lane from the tag in O(1); a tag
 * whose generation bits differ from the slot's is a completion of a lane
 * already freed (a receive flushed after its QP was destroyed) and is
 * dropped, and so is one whose wc.qp_num is not the lane's QP.  A freed
 * lane's CQ room stays reserved until the CQ has been seen empty.
 * An SRQ receive names its buffer, not its lane: the interface finds the
 * lane from wc.qp_num (a qpn -> lane table), and hands the buffer up.
 * Its tag has index 0; the tag's generation bits and own bits 31..24
 * name the SRQ, bits 23..0 the buffer (internal.h).
 *
 * The DC lane (lib/lane_dc.c, issue 16)
 * --------------------------------------
 * A DC lane has no QP of its own (lane.qp NULL, qpn 0): it sends on one
 * of the context's shared DCIs, held while it has sends in flight there
 * (one target at a time per DCI, in order per lane; a DCI error touches
 * one lane; the DCI is reset before the next lane), queueing sends while
 * it waits for one; every DC send is signalled.  Its receives come from
 * the context's DCT on the DC SRQ; the DCT's receive completions are
 * routed by rdmamsg__lane_srq_wcs; rdmamsg__dc_srq_lane finds the lane
 * from the message's immediate: the receiving lane's wr_id tag (bits
 * 30..0 as above, bit 31 clear), sent to the peer in the handshake
 * (HS_F_DC: DCT number, access key, tag).  An immediate of no DC lane on
 * that SRQ, or of a freed one (generation bits), or a message that none
 * of the lane's peer's DCIs sent (HS_CAP_DCSRC, lane_dc.c), is dropped
 * and counted (rdmamsg_dc_stats.tag_drops), its buffer reposted: never
 * delivered to another endpoint.  Write with immediate is refused (EOPNOTSUPP): the
 * immediate routes.  error() moves a held DCI to ERR; queued sends and
 * the drain WR complete as flushed after the DCI's, as synthetic
 * completions (qp_num 0) through the lane's early list.
 *
 * Endpoint states (the session's; one enum, one setter, one can_send)
 * ------------------------------------------------------------------
 *   IDLE --connect--> RESOLVING --route, lane--> CONNECTING
 *   IDLE --accept (lane)-------------------------> CONNECTING
 *   CONNECTING --established--> UP
 *   CONNECTING --path failed, reconnect policy: next path--> RESOLVING
 *   RESOLVING, CONNECTING, UP --failure, rejected, peer gone--> DOWN
 *   UP --the peer's goodbye--> PEER_CLOSED
 *   PEER_CLOSED --the peer's disconnect, failure, close timeout--> DOWN
 *   UP, PEER_CLOSED --rdmamsg_ep_close()--> DRAINING
 *   IDLE, RESOLVING, CONNECTING, DOWN --rdmamsg_ep_close()--> FLUSHING
 *   DRAINING --goodbye done (or, after the peer's goodbye, its
 *             disconnect), failure, close timeout--> FLUSHING
 *   FLUSHING --posted work flushed, DISCONNECTED or timeout--> CLOSED
 *
 * - IDLE: made, nothing on the wire.  RESOLVING: active side, address and
 *   route.  CONNECTING: lane bound, handshake in flight (passive:
 *   accepted, ESTABLISHED not yet seen).  UP: sends allowed
 *   (ep_can_send()).
 * - PEER_CLOSED: the peer's goodbye was read (on_disconnect(0) reported
 *   at once) and the user has not closed: nothing can be sent, what is
 *   queued is cancelled, but the connection stays up -- the QP is not
 *   moved to error and its receives are polled -- until the peer's own
 *   disconnect, which it sends once its goodbye has completed: were the
 *   receiver to disconnect on the goodbye, its DREQ could overtake the
 *   acknowledgement of the closer's last operations on a lossy link, and
 *   the closer's QP would flush them (-ECANCELED for data the receiver
 *   has).  The close timeout (close_ms, from the goodbye) bounds the
 *   wait for a peer that never disconnects; then it disconnects itself.
 *   A close in this state (DRAINING) sends no goodbye of its own and
 *   waits for the same disconnect or bound.
 * - DOWN: the connection failed or ended and the user has not closed:
 *   posted work completes with errors; nothing can be sent.
 * - DRAINING: closed by the user while the connection is up: no new
 *   sends, nothing delivered; with linger the backlog goes out; the
 *   rendezvous the peer was told of end (credits and FINs still flow,
 *   the peer's announcements are refused), then the goodbye; the
 *   connection still counts as up (rdmamsg__ep_st_lane_up()).  Once the
 *   peer's goodbye has been read (bye_seen: it closed first, or both
 *   closed at once and ours is not posted yet) nothing more is sent: the
 *   close waits for the peer's disconnect, which follows the completion
 *   of its goodbye, as above (or the close timeout).
 * - FLUSHING: closed and the connection down: posted work flushes, the
 *   backlog is cancelled, the close waits for the drain WR and the CM.
 * - CLOSED: the close callback ran; the memory goes.  Terminal.
 * Leaving CONNECTING (up, failed or closed) releases the completions an
 * active lane held.  Public view (rdmamsg_ep_get_state): IDLE, RESOLVING,
 * CONNECTING -> RDMAMSG_EP_CONNECTING; UP -> CONNECTED; PEER_CLOSED,
 * DOWN -> DISCONNECTED; DRAINING, FLUSHING, CLOSED -> CLOSING.
 * Path failover at connect (RDMAMSG_FAILOVER_RECONNECT, ep.c next_path):
 * a connect attempt that fails for its path unbinds its lane, destroys
 * its rdma_cm id and starts again on the next address (CONNECTING ->
 * RESOLVING, or RESOLVING again); the session's rings, its receive
 * buffers among them, stay and are posted on the new lane.
 * Reconnect-and-replay of an established session (issue 15,
 * RDMAMSG_FAILOVER_REPLAY, rdmamsg.h; ep.c "sessions", msg.c, cm/):
 *   UP --failure a session survives--> RESOLVING (active: reconnects)
 *   UP --failure a session survives--> RECONNECTING (passive: waits)
 *   RECONNECTING --the connector's reconnect request--> CONNECTING
 *   RECONNECTING --linger over--> DOWN;  CONNECTING --failed--> RECONNECTING
 *   (passive) or RESOLVING (active, next path) within tries and time
 * - Design choice: an implicit sequence, not a per-fragment one in the
 *   wire header.  RC delivers every fragment of one connection once and
 *   in order, so both sides count the data fragments of the session
 *   (tx_frags posted, rx_frags received while UP); the reconnect request
 *   (HS_RREQ: session id + the connector's rx_frags) and its accept
 *   (HS_RACC: the acceptor's rx_frags) exchange the counts, and each side
 *   posts again its fragments from the peer's count on.  The message
 *   header stays as it is (16 bytes, version 3); only the handshake has
 *   new kinds (cm/handshake.h).  A replayed fragment is the same bytes
 *   with the same flags, so a message cut between fragments is
 *   reassembled across the reconnect (rx_asm stays).
 * - Retention: the sender keeps a copy of each data fragment in a ring of
 *   ep->kept, one slot per credit the peer grants (a power of two >= its
 *   receive depth).  A credit comes back only after its fragment was
 *   delivered, so at most peer_depth fragments are unacknowledged and a
 *   slot is never reused before the peer had its fragment: no explicit
 *   acknowledgement and no free per message.  Over an SRQ (srq.c) the
 *   receiver may lend credits beyond its guaranteed one and withhold
 *   them again, but never has more than its receive depth out (the
 *   guaranteed credit plus at most depth - 1 lent), and each comes back
 *   only once its fragment was delivered: the bound holds.  A reconnect
 *   opens a lane that reserves the window again (the old one's went back
 *   with it, its receives stay posted on the SRQ, and the old QP's late
 *   completions find no lane and are reposted); the replay waits for the
 *   new connection's credits, never the old count.  Cost when the
 *   policy is off: one predicted branch per send (ep->kept) and one
 *   increment per send and per receive.
 * - The old lane and rdma_cm id go from the progress pass after the
 *   failure (never inside the lane's up call); its completions go with
 *   it: sends in flight are done then (data: 0, kept; one-sided and
 *   pulls: -ECONNRESET), and so are flushes read before (msg.c
 *   session_tx_error).  The replay holds the backlog's head (ep->rp_mark,
 *   a sentinel buffer) so that no new send overtakes it; sends during the
 *   outage queue behind it.  Requests are eager messages: kept and
 *   replayed, answered once.
 * - A reconnect names the session by the connector's random 64-bit id; a
 *   passive process that does not know it (restarted) refuses with
 *   RDMAMSG_REJECT_SESSION: never a replay into a new session.
 */
#ifndef RDMAMSG_LANE_H
#define RDMAMSG_LANE_H

#include <errno.h>
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
	EPS_RECONNECTING, /* passive side of a session: waits for the
			   * connector's reconnect (after CLOSED so that the
			   * connect/down paths leave it alone) */
	EPS_PEER_CLOSED,  /* the peer said goodbye, its disconnect has not
			   * come yet (after CONNECTING, as the connect
			   * paths need) */
	EPS_COUNT
};

/* rdmamsg__ep_st_legal -- whether from -> to is a transition of the
 * state machine above (a state to itself is not a transition) */
static inline int rdmamsg__ep_st_legal(enum rdmamsg__ep_st from,
				       enum rdmamsg__ep_st to)
{
	/* bit t of next[f]: f -> t is legal */
	static const uint16_t next[EPS_COUNT] = {
		[EPS_IDLE] = 1u << EPS_RESOLVING | 1u << EPS_CONNECTING |
			     1u << EPS_FLUSHING,
		[EPS_RESOLVING] = 1u << EPS_CONNECTING | 1u << EPS_DOWN |
				  1u << EPS_FLUSHING,
		[EPS_CONNECTING] = 1u << EPS_RESOLVING | 1u << EPS_UP |
				   1u << EPS_DOWN | 1u << EPS_FLUSHING |
				   1u << EPS_RECONNECTING,
		[EPS_UP] = 1u << EPS_DOWN | 1u << EPS_DRAINING |
			   1u << EPS_RESOLVING | 1u << EPS_RECONNECTING |
			   1u << EPS_PEER_CLOSED,
		[EPS_DOWN] = 1u << EPS_FLUSHING,
		[EPS_DRAINING] = 1u << EPS_FLUSHING,
		[EPS_FLUSHING] = 1u << EPS_CLOSED,
		[EPS_CLOSED] = 0,
		[EPS_RECONNECTING] = 1u << EPS_CONNECTING | 1u << EPS_DOWN |
				     1u << EPS_FLUSHING,
		[EPS_PEER_CLOSED] = 1u << EPS_DOWN | 1u << EPS_DRAINING,
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

/* rdmamsg__ep_st_cm_wait -- the state waits for the CM's events
 * (address, route, the peer's answer): ctx->cm_waits counts it */
static inline int rdmamsg__ep_st_cm_wait(enum rdmamsg__ep_st st)
{
	return st == EPS_RESOLVING || st == EPS_CONNECTING;
}

/* rdmamsg__ep_st_lane_up -- the connection is up (UP; DRAINING: closed
 * by the user, its goodbye still to go; PEER_CLOSED: the peer's goodbye
 * read, its disconnect still to come) */
static inline int rdmamsg__ep_st_lane_up(enum rdmamsg__ep_st st)
{
	return st == EPS_UP || st == EPS_DRAINING || st == EPS_PEER_CLOSED;
}

/* rdmamsg__ep_st_public -- what rdmamsg_ep_get_state() reports */
static inline enum rdmamsg_ep_state rdmamsg__ep_st_public(
	enum rdmamsg__ep_st st)
{
	switch (st) {
	case EPS_UP:
		return RDMAMSG_EP_CONNECTED;
	case EPS_DOWN:
	case EPS_PEER_CLOSED:
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

/* rdmamsg__wc_errno -- the errno a lane reports for a work completion's
 * status (every lane the same) */
static inline int rdmamsg__wc_errno(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_WR_FLUSH_ERR:
		return -ECANCELED;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return -ECONNRESET;
	case IBV_WC_REM_ACCESS_ERR:
		return -EACCES;
	default:
		return -EREMOTEIO;
	}
}

/* rx()'s status for a one-sided write with immediate: no buffer was
 * used, imm is the immediate (host order), len the bytes written */
#define RDMAMSG__RX_WRITE_IMM 1
/* rx()'s status for a message whose receive invalidated an rkey of ours
 * (IBV_WC_WITH_INV): imm is the invalidated rkey */
#define RDMAMSG__RX_INV 2

/* what rx() returns: repost the buffer and, once it is posted again, give
 * its credit back (reposted()); 0: nothing to give back */
#define RDMAMSG__RX_DATA 1
#define RDMAMSG__RX_CTL	 2

/* Up calls: registered by the session at open(), called with its owner
 * pointer, never from inside a down call of the same lane. */
struct rdmamsg__lane_cbs {
	/* one receive in ring slot *slot (lent for the call: the session
	 * takes the buffer by putting a replacement in *slot); status 0, a
	 * message of len bytes (the session's header included),
	 * RDMAMSG__RX_WRITE_IMM, or -ECANCELED (flushed) / the error */
	int (*rx)(void *owner, struct rdmamsg_buf **slot, uint32_t len,
		  int status, uint32_t imm);
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
	struct rdma_cm_id *id;	  /* RC: the connection's rdma_cm id */
	uint32_t send_depth;	  /* sends in flight, the drain WR excluded */
	uint32_t nrx;		  /* receives (with an SRQ: its window) */
	uint32_t nrx_max;	  /* ... as the session may grow them
				    * (grow_recvs), the QP made for that
				    * many; 0: nrx */
	uint32_t rx_len;	  /* bytes each receive takes */
	uint32_t rx_off;	  /* ... from buf->data - rx_off (the
				    * session's header in the headroom) */
	struct rdmamsg_buf **rxb; /* the receive ring, nrx long (or the
				    * SRQ's bufs) */
	struct rdmamsg_srq *srq;  /* receives through it; NULL: own */
	uint32_t srq_win;	  /* of nrx, reserved on srq (0: all); the
				    * session lends the rest (srq.c) */
	uint32_t rx_batch;	  /* data receives reposted together: up to
				    * rx_batch - 1 wait for more (0, 1: each
				    * at once; the session keeps it below
				    * half its credit window, msg.c) */
	int post_rx;		  /* post the ring at open */
	int hold;		  /* hold completions (set_hold) */
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
	int down;	/* error() was called: nothing is reposted */
	int plain_send; /* send() is one IBV_WR_SEND on qp (RC) */
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

/* send flags: the verbs' values, so that a verbs lane passes them on */
#define RDMAMSG__TX_INLINE IBV_SEND_INLINE   /* sge copied at post time */
#define RDMAMSG__TX_SIGNAL IBV_SEND_SIGNALED /* report this completion */

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
	/* the ring grows: idx[0..n) posted for the first time, reposts
	 * batched by rx_batch from now on (NULL: the kind's never grows) */
	int (*grow_recvs)(struct rdmamsg__lane *lane, const uint32_t *idx,
			  uint32_t n, uint32_t rx_batch);
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
	/* the connection's id knows the peer (the accepting side before
	 * rdma_accept, the connecting side at CONNECT_RESPONSE): the lane's
	 * QP through INIT, RTR and RTS with rdma_init_qp_attr's attributes,
	 * as librdmacm moves a QP of its own; resp_res and init_depth
	 * replace the CM's RDMA READ limits unless RDMA_MAX_RESP_RES /
	 * RDMA_MAX_INIT_DEPTH.  0 or a negative errno.  NULL: rdma_cm
	 * connects no QP of this kind (DC) */
	int (*cm_rts)(struct rdmamsg__lane *lane, struct rdma_cm_id *id,
		      uint8_t resp_res, uint8_t init_depth);
};

extern const struct rdmamsg__lane_ops rdmamsg__lane_rc_ops;
extern const struct rdmamsg__lane_ops rdmamsg__lane_dc_ops;

/* rdmamsg__lane_plain_wr -- the work request of a send of a lane whose
 * sends are plain IBV_WR_SEND work requests on its QP (plain_send: the RC
 * lane's) */
static inline void rdmamsg__lane_plain_wr(const struct rdmamsg__lane *lane,
					  struct ibv_send_wr *wr,
					  struct ibv_sge *sge, int nsge,
					  uint64_t seq, unsigned int flags)
{
	wr->wr_id = RDMAMSG__WRID_SEND | lane->wrid_tag | (uint32_t)seq;
	wr->next = NULL;
	wr->sg_list = sge;
	wr->num_sge = nsge;
	wr->opcode = IBV_WR_SEND;
	/* RDMAMSG__TX_INLINE/SIGNAL are IBV_SEND_INLINE/SIGNALED */
	wr->send_flags = flags;
	wr->imm_data = 0;
}

/* rdmamsg__lane_plain_send -- send() of such a lane */
static inline int rdmamsg__lane_plain_send(struct rdmamsg__lane *lane,
					   struct ibv_sge *sge, int nsge,
					   uint64_t seq, unsigned int flags)
{
	struct ibv_send_wr wr, *bad;

	rdmamsg__lane_plain_wr(lane, &wr, sge, nsge, seq, flags);
	return ibv_post_send(lane->qp, &wr, &bad);
}

/* rdmamsg__lane_plain_chain -- a chain of rdmamsg__lane_plain_wr()'s
 * sends (consecutive seqs) in one post, one doorbell: 0, or the
 * provider's positive errno with *bad at the first it did not take (those
 * before it are posted) */
static inline int rdmamsg__lane_plain_chain(struct rdmamsg__lane *lane,
					    struct ibv_send_wr *wr,
					    struct ibv_send_wr **bad)
{
	return ibv_post_send(lane->qp, wr, bad);
}

/* rdmamsg__lane_send -- the down call of the fast path: a plain lane's
 * send inline, without the ops table's indirect call */
static inline int rdmamsg__lane_send(struct rdmamsg__lane *lane,
				     struct ibv_sge *sge, int nsge,
				     uint64_t seq, unsigned int flags)
{
	if (__builtin_expect(lane->plain_send, 1))
		return rdmamsg__lane_plain_send(lane, sge, nsge, seq, flags);
	return lane->ops->send(lane, sge, nsge, seq, flags);
}

#endif /* RDMAMSG_LANE_H */
