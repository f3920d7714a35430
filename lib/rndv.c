/* SPDX-License-Identifier: MIT */
/*
 * rndv.c -- messages by rendezvous.
 *
 * Sender: the bytes sit in registered memory: the caller's registration
 * (rdmamsg_send_mr()), the caller's pool buffer (rdmamsg_send_buf()), or
 * a pool buffer they are copied into once (rdmamsg_send() and the rest).
 * A pool slab is registered for local access only, so the peer gets a
 * type 2 memory window bound over exactly the bytes of the transfer
 * (IBV_WR_BIND_MW, posted before the RTS) and invalidated when the
 * receiver's X_FIN says it is done: by the FIN itself where both peers
 * offered RDMAMSG_HS_CAP_INV (the RTS flagged XF_INV; the receiver sends
 * the FIN as IBV_WR_SEND_WITH_INV of the window's rkey, so the sender's
 * HCA invalidates it before the FIN's receive completes, which then
 * carries IBV_WC_WITH_INV and that rkey), else by IBV_WR_LOCAL_INV (the
 * buffer goes back to the pool only once that completed): no
 * registration per message, and the peer never reaches anything else.
 * Without type 2 windows (device cap, RDMAMSG_NO_MW=1, DC lanes, replay
 * sessions) the bytes get a registration of their own for the transfer,
 * as before.  An X_RTS control message announces address, length and
 * rkey.  A copy of RDMAMSG_RNDV_PIECE bytes or more goes in pieces
 * (pieces_take(), to a peer that offered RDMAMSG_HS_CAP_PIECE): the RTS
 * goes out once the first piece is copied, with a window over that piece
 * only, and each later piece, once copied, gets a window of its own and
 * an X_PIECE that announces it; the receiver reads a piece while the next
 * is copied, so the message costs about one copy instead of a copy and
 * then a read, and the peer never reaches bytes not yet this transfer's
 * (the pool buffer's earlier contents).  The FIN invalidates the first
 * window, LOCAL_INV the others.
 *
 * Receiver: the bytes land in a pool buffer (the allocation callback
 * chooses for large messages), pulled by RDMA READs of CHUNK bytes, at
 * most MAX_READS in flight per endpoint, taken in turn from every active
 * transfer so that none blocks another, and with SQ_RESERVE send slots
 * always left to messages.  When the last chunk is in, the message is
 * delivered, then X_FIN tells the sender (its on_send fires): what the
 * receive callback sends leaves ahead of the FIN (finish()).  Receive memory
 * is bounded: transfers start (take their destination) only while fewer
 * than MAX_READS are reading, and the bytes being pulled stay under the
 * large maximum (one always may start).  Where a READ is a copy by the
 * CPU (a peer on this host on the soft fabric), also only while the
 * lengths of those reading stay within READ_BYTES: a read there gains
 * nothing from another in flight, and one destination at a time stays in
 * the cache (process_vm_readv of 1 MiB, 2 MiB L2: 44 us into one buffer,
 * 58 into two or more in turn).  An HCA keeps them all, so that its link
 * never waits for the completion between two.
 *
 * Order: an RTS flagged XF_ORDER (rdmamsg_send() above the rendezvous
 * threshold, requests, responses) takes its place in xf->order; messages,
 * requests and responses that arrive behind it are held there (copied;
 * each keeps its data credit, so the peer can have at most its window
 * held) until everything in front of them is delivered.  The receiver
 * sees the stream in the order it was sent, whatever the protocol.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "dispatch.h"
#include "fastpath.h"
#include "handshake.h"
#include "xfer.h"

#define MIN_LARGE ((size_t)4096)
#define MAX_LARGE ((size_t)1 << 40)

#define CHUNK	   ((uint64_t)8 << 20)
#define MAX_READS  4
#define READ_BYTES ((uint64_t)1 << 20) /* read_bytes() */
/* the most pieces a copied message is announced in (pieces_take()) */
#define MAX_PIECES 8
/* freed transfer states an endpoint keeps for reuse, of each kind; none
 * under AddressSanitizer, which then still sees a state used after it
 * was freed */
#if defined(__SANITIZE_ADDRESS__)
#define STATE_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STATE_CACHE 0
#endif
#endif
#ifndef STATE_CACHE
#define STATE_CACHE 256
#endif

/* a memory window of the endpoint's, bound per transfer */
struct rdmamsg__mw {
	struct rdmamsg__mw *next; /* xf->mw_free */
	struct ibv_mw *mw;
	uint32_t rkey; /* its current key */
};

struct rndv_send {
	struct rdmamsg__list link; /* xf->invs while it waits for a slot */
	void *mem;		   /* our heap copy (no pool memory), or NULL */
	struct ibv_mr *tmr;	   /* its registration for this transfer */
	struct rdmamsg_buf *buf;   /* the pool buffer exposed, or NULL */
	struct rdmamsg__mw *mw;	   /* the window bound over it (the first
				    * piece's) */
	struct rdmamsg__mw *pw[MAX_PIECES - 1]; /* the later pieces' */
	uint8_t npw;				/* of them bound */
	uint8_t ninv;		/* invalidations of its windows in flight */
	struct rdmamsg_mr *umr; /* the caller's (rdmamsg_send_mr) */
	size_t copied;		/* bytes copy_in() took from the caller */
	void *op_ctx;
	int report;
	int late;     /* on_send waits for the window's invalidation */
	int inv;      /* the FIN invalidates the window (XF_INV) */
	int status;   /* the FIN's, for a late on_send */
	uint64_t req; /* the request it carries (X_REQ), else 0 */
};

/* an entry of xf->order: an ordered pull, or a message held behind one */
enum { ORD_PULL = 1, ORD_HELD = 2 };

struct ord_ent {
	struct rdmamsg__list olink; /* xf->order */
	int ord;		    /* ORD_* */
};

struct rdmamsg__held {
	struct ord_ent o; /* ORD_HELD */
	int kind;	  /* X_MSG, X_REQ or X_RESP */
	uint64_t req;
	struct rdmamsg_buf *buf;
	size_t len;
	uint32_t imm;
	unsigned int flags;
};

struct rdmamsg__pull {
	struct ord_ent o; /* ORD_PULL; on xf->order when ordered */
	struct rdmamsg__list link;
	struct rdmamsg__xhdr x; /* the sender's X_RTS */
	char *dest;
	struct rdmamsg_buf *buf; /* the library's destination, or NULL */
	struct ibv_mr *own_mr;	 /* its registration (a heap buffer) */
	struct rdmamsg_mr *umr;	 /* the allocation callback's region */
	uint64_t posted, done;
	uint64_t ready;		   /* bytes announced readable (XF_PIECE) */
	uint64_t pend[MAX_PIECES]; /* where each announced piece ends */
	uint32_t pkey[MAX_PIECES]; /* and the window it is read through */
	uint8_t np, pi;		   /* pieces announced; the one read next */
	uint32_t inflight;
	int active;
	int failed;
	int in_alloc; /* inside the allocation callback */
	int ordered, complete;
	int reading; /* counted in xf->reading */
};

/* large_max -- the most bytes a pull may have, and pulls together: the
 * large maximum, and never below the message maximum */
static uint64_t large_max(const struct rdmamsg_ep *ep)
{
	return ep->p.max_large > ep->max_msg ? ep->p.max_large : ep->max_msg;
}

/* state_get -- a zeroed transfer state of size bytes: a freed one from
 * c (no allocation per message), else a new one */
static void *state_get(struct rdmamsg__scache *c, size_t size)
{
	void *o = c->head;

	if (!o)
		return calloc(1, size);
	c->head = *(void **)o;
	c->n--;
	memset(o, 0, size);
	return o;
}

/* state_put -- a freed state into c, or to the heap when c is full */
static void state_put(struct rdmamsg__scache *c, void *o)
{
	if (c->n == STATE_CACHE) {
		free(o);
		return;
	}
	*(void **)o = c->head;
	c->head = o;
	c->n++;
}

/* state_drain -- the endpoint goes: c's states too */
static void state_drain(struct rdmamsg__scache *c)
{
	while (c->head) {
		void *o = c->head;

		c->head = *(void **)o;
		free(o);
	}
	c->n = 0;
}

/* read_bytes -- the most bytes of transfers reading at once (see above) */
static uint64_t read_bytes(const struct rdmamsg_ep *ep)
{
	if (rdmamsg__ep_shm_peer(ep))
		return READ_BYTES;
	return UINT64_MAX;
}

/* copy_full -- a copy of len more bytes of a caller's message would
 * wait for its read behind ep->copy_ahead bytes (RDMAMSG__COPY_MIN sends at
 * least) already waiting: the receiver reads a few at a time
 * (MAX_READS, read_bytes()), so copying further ahead gains nothing, and
 * the pool buffers it would take (a window of 128 at 1 MiB: 128 MiB) are
 * cold when reused; within a few MiB the buffers a FIN frees (last freed
 * first) stay in the cache.  The caller gets -EAGAIN and on_writable
 * after the next completion.  The default bound (msg.c's
 * COPY_AHEAD_DEFAULT) is 1 MiB: a burst beyond it meets -EAGAIN, which
 * callers take as for credits (doc/performance.md "A default of 1m") */
static int copy_full(const struct rdmamsg_ep *ep, size_t len)
{
	const struct rdmamsg__xfer *xf = ep->xf;

	return rdmamsg__copies_full(ep, xf->ncopied, xf->copied_bytes, len);
}

/* copy_in -- the first n of the caller's len bytes at data into s's
 * source dst (the rest follow in pieces), counted for copy_full() until
 * send_free() */
static void copy_in(struct rdmamsg_ep *ep, struct rndv_send *s, void *dst,
		    const void *data, size_t n, size_t len)
{
	struct rdmamsg__xfer *xf = ep->xf;

	rdmamsg__bulk_copy(&ep->ctx->bulk, dst, data, n);
	s->copied = len;
	xf->copied_bytes += len;
	xf->ncopied++;
}

/* sq_reserve -- send slots the pulls leave to messages */
static uint32_t sq_reserve(const struct rdmamsg_ep *ep)
{
	return ep->p.send_depth / 4 ? ep->p.send_depth / 4 : 1;
}

/* rdmamsg__rndv_ep_mw -- windows for ep's rendezvous sources: the device
 * has them, on an RC lane (a DCI's window would be bound to a shared
 * initiator), and not in a replay session, on either side (its QP
 * changes under a bound window) */
int rdmamsg__rndv_ep_mw(const struct rdmamsg_ep *ep)
{
	if (ep->xf && ep->xf->mw_state)
		return ep->xf->mw_state > 0;
	return rdmamsg__mw_cap(ep->ctx) &&
	       ep->p.transport != RDMAMSG_TRANSPORT_DC && !ep->sid;
}

/* use_mw -- rdmamsg__rndv_ep_mw, found once per endpoint */
static int use_mw(struct rdmamsg_ep *ep)
{
	struct rdmamsg__xfer *xf = ep->xf;

	if (!xf->mw_state)
		xf->mw_state = rdmamsg__rndv_ep_mw(ep) ? 1 : -1;
	return xf->mw_state > 0;
}

/* mw_get -- a free window of ep's (made on first need, then reused) */
static struct rdmamsg__mw *mw_get(struct rdmamsg_ep *ep)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct rdmamsg__mw *m = xf->mw_free;

	if (m) {
		xf->mw_free = m->next;
		return m;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->mw = ibv_alloc_mw(ep->ctx->pd, IBV_MW_TYPE_2);
	if (!m->mw) {
		LOG_INFO("no memory window (%d): registering instead", errno);
		free(m);
		return NULL;
	}
	m->rkey = m->mw->rkey;
	return m;
}

/* mw_drop -- free a window (deallocation invalidates it) */
static void mw_drop(struct rdmamsg__mw *m)
{
	ibv_dealloc_mw(m->mw);
	free(m);
}

/* mw_bind -- bind m over len bytes at addr of mr for remote reads: 0, or
 * -EAGAIN (no send slot) / -ENOTCONN */
static int mw_bind(struct rdmamsg_ep *ep, struct rdmamsg__mw *m,
		   struct ibv_mr *mr, const void *addr, size_t len)
{
	struct rdmamsg__xop op;
	struct ibv_send_wr wr;
	uint32_t rkey = ibv_inc_rkey(m->rkey);
	int ret;

	memset(&wr, 0, sizeof(wr));
	memset(&op, 0, sizeof(op));
	wr.opcode = IBV_WR_BIND_MW;
	wr.bind_mw.mw = m->mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)addr;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	op.kind = OP_MW;
	ret = rdmamsg__xop_post(ep, &wr, &op);
	if (ret)
		return ret;
	m->rkey = rkey;
	return 0;
}

/* send_unbind -- s's windows still bound go (deallocated: invalidated) */
static void send_unbind(struct rndv_send *s)
{
	if (s->mw)
		mw_drop(s->mw);
	s->mw = NULL;
	while (s->npw)
		mw_drop(s->pw[--s->npw]);
}

/* send_free -- release a sender's source (its window deallocated: the
 * connection is gone, or nothing was announced) */
static void send_free(struct rdmamsg_ep *ep, struct rndv_send *s)
{
	send_unbind(s);
	if (s->tmr)
		ep->ctx->ops->dereg_mr(s->tmr);
	if (s->buf)
		rdmamsg__buf_put(s->buf);
	free(s->mem);
	if (s->umr)
		s->umr->busy--;
	ep->xf->copied_bytes -= s->copied;
	ep->xf->ncopied -= !!s->copied;
	ep->xf->nsends--;
	state_put(&ep->xf->sfree, s);
}

/* send_report -- on_send for transfer s; the caller's region is the
 * caller's again first (it may deregister it in the callback) */
static void send_report(struct rdmamsg_ep *ep, struct rndv_send *s, int status)
{
	if (s->umr && !s->mw) {
		s->umr->busy--;
		s->umr = NULL;
	}
	s->late = 0;
	if (s->report && ep->cbs.on_send)
		ep->cbs.on_send(ep, status, s->op_ctx, ep->arg);
}

/* send_finish -- free s without an invalidation: a window over the
 * caller's memory is deallocated (so invalidated) first, then on_send
 * when report */
static void send_finish(struct rdmamsg_ep *ep, struct rndv_send *s, int report,
			int status)
{
	if (s->umr && s->mw) {
		mw_drop(s->mw);
		s->mw = NULL;
	}
	if (report)
		send_report(ep, s, status);
	send_free(ep, s);
}

/* send_end_bound -- s's windows not being invalidated are deallocated;
 * s ends now unless an invalidation is in flight (its completion ends it,
 * rdmamsg__rndv_inv_done) */
static void send_end_bound(struct rdmamsg_ep *ep, struct rndv_send *s)
{
	send_unbind(s);
	if (!s->ninv)
		send_finish(ep, s, s->late, s->status);
}

/* send_release -- the transfer is over: its windows still bound are
 * invalidated before the buffer can serve anything else (it is freed when
 * the last invalidation completes); -EAGAIN: no send slot yet for one */
static int send_release(struct rdmamsg_ep *ep, struct rndv_send *s)
{
	struct rdmamsg__xop op;
	struct ibv_send_wr wr;
	int ret;

	if (ep->xf->down || rdmamsg__ep_can_send(ep)) {
		send_end_bound(ep, s);
		return 0;
	}
	while (s->mw || s->npw) {
		memset(&wr, 0, sizeof(wr));
		memset(&op, 0, sizeof(op));
		op.kind = OP_INV;
		op.send = s;
		op.mw = s->npw ? s->pw[s->npw - 1] : s->mw;
		wr.opcode = IBV_WR_LOCAL_INV;
		wr.invalidate_rkey = op.mw->rkey;
		ret = rdmamsg__xop_post(ep, &wr, &op);
		if (ret == -EAGAIN)
			return ret;
		if (ret)
			break; /* the connection is going */
		if (s->npw)
			s->npw--;
		else
			s->mw = NULL;
		s->ninv++;
	}
	send_end_bound(ep, s);
	return 0;
}

/* rdmamsg__rndv_inv_done -- a window's invalidation completed: the window
 * is free again (after an error it is dropped); with the last of its
 * transfer's, the buffer is too, and where the window was over the
 * caller's memory its on_send follows now: the peer's reach into that
 * memory is over */
void rdmamsg__rndv_inv_done(struct rdmamsg_ep *ep, struct rdmamsg__xop *op,
			    int status)
{
	struct rndv_send *s = op->send;

	if (!status) {
		op->mw->next = ep->xf->mw_free;
		ep->xf->mw_free = op->mw;
	} else {
		mw_drop(op->mw);
	}
	if (--s->ninv || s->mw || s->npw)
		return; /* more to invalidate, some waiting for a slot */
	if (s->late)
		send_report(ep, s, s->status);
	send_free(ep, s);
}

/* rdmamsg__rndv_inv_retry -- invalidations that waited for a send slot */
void rdmamsg__rndv_inv_retry(struct rdmamsg_ep *ep)
{
	struct rdmamsg__list *pos, *tmp;

	list_for_each_safe (pos, tmp, &ep->xf->invs) {
		struct rndv_send *s = container_of(pos, struct rndv_send, link);

		list_del(pos);
		if (send_release(ep, s)) {
			list_add_tail(ep->xf->invs.next,
				      pos); /* at the front */
			return;
		}
	}
}

/* window -- bind a window of ep's over len bytes at addr of mr (which
 * allows binding) for this transfer: 0 (s->mw, *rkey), or -1 when none
 * can be bound now (no windows on this lane, no send slot, no memory) */
static int window(struct rdmamsg_ep *ep, struct rndv_send *s, struct ibv_mr *mr,
		  const void *addr, size_t len, uint32_t *rkey)
{
	struct rdmamsg__mw *m;

	if (!use_mw(ep) || fp_sq_free(ep) <= 0)
		return -1;
	m = mw_get(ep);
	if (!m)
		return -1;
	if (mw_bind(ep, m, mr, addr, len)) {
		m->next = ep->xf->mw_free;
		ep->xf->mw_free = m;
		return -1;
	}
	s->mw = m;
	*rkey = m->rkey;
	return 0;
}

/* expose -- make len bytes of pool buffer b readable by the peer for this
 * transfer: a window when the lane can bind one, else a registration */
static int expose(struct rdmamsg_ep *ep, struct rndv_send *s,
		  struct rdmamsg_buf *b, size_t len, uint32_t *rkey)
{
	if (b->slab && !window(ep, s, b->slab->mr, b->data, len, rkey))
		return 0;
	/* its own registration, remote read only, for this one transfer:
	 * the peer reaches these bytes and nothing else */
	errno = 0;
	s->tmr = ep->ctx->ops->reg_mr(ep->ctx->pd, b->data, len,
				      IBV_ACCESS_REMOTE_READ);
	if (!s->tmr)
		return rdmamsg__errno(ENOMEM);
	*rkey = s->tmr->rkey;
	return 0;
}

/* the later pieces of a copied message: the windows and announcement
 * buffers they take before the first is announced, so that announcing
 * them cannot fail for want of memory or send slots */
struct pieces {
	int n;		    /* pieces (1: the message whole) */
	size_t first, size; /* the first's length, and each other's but the
			     * last (which takes the rest) */
	struct rdmamsg__mw *mw[MAX_PIECES - 1];
	struct rdmamsg_buf *ann[MAX_PIECES - 1];
};

/* pieces_put -- what pc took and did not use goes back */
static void pieces_put(struct rdmamsg_ep *ep, struct pieces *pc)
{
	int i;

	for (i = 0; i < MAX_PIECES - 1; i++) {
		if (pc->mw[i]) {
			pc->mw[i]->next = ep->xf->mw_free;
			ep->xf->mw_free = pc->mw[i];
			pc->mw[i] = NULL;
		}
		if (pc->ann[i]) {
			rdmamsg__buf_put(pc->ann[i]);
			pc->ann[i] = NULL;
		}
	}
}

/* pieces_take -- how a copy of len bytes into pool buffer b goes: from
 * ep->rndv_piece bytes in pieces, two halves below twice that, else
 * pieces of at least ep->rndv_piece bytes (at most MAX_PIECES, sizes a
 * multiple of 64) where the peer reads pieces, windows bind, the send
 * queue has room for a bind and an announcement per piece besides
 * sq_reserve(), there is a credit for each announcement and no transfer
 * of this endpoint waits to be read; else whole (pc->n 1).  The receiver
 * reads each piece while the next is copied, so a message costs about
 * one copy, not a copy and then a read */
static void pieces_take(struct rdmamsg_ep *ep, struct rdmamsg_buf *b,
			size_t len, struct pieces *pc)
{
	size_t n;
	int i;

	if (!ep->rndv_piece || len < ep->rndv_piece || !b->slab ||
	    !(ep->peer_caps & RDMAMSG_HS_CAP_PIECE) || !use_mw(ep))
		return;
	/* a copy behind transfers still to be read (no FIN yet) goes
	 * whole: the receiver reads those while this one is copied, pieces
	 * would only add their cost */
	if (ep->xf->sends.used)
		return;
	n = len / ep->rndv_piece;
	if (n < 2)
		n = 2;
	if (n > MAX_PIECES)
		n = MAX_PIECES;
	/* every announcement goes at once, none into the backlog: a close
	 * that cancels the backlog would leave the receiver waiting for a
	 * piece (and the close for its FIN) */
	if (fp_sq_free(ep) < 2 * n + sq_reserve(ep) || ep->bl_head ||
	    ep->credits < (int)n)
		return;
	pc->size = ((len + n - 1) / n + 63) & ~(size_t)63;
	if (pc->size > INT32_MAX)
		return; /* the announcement's field (proto.h) */
	n = (len + pc->size - 1) / pc->size;
	for (i = 0; i < (int)n - 1; i++) {
		pc->mw[i] = mw_get(ep);
		if (!pc->mw[i] || rdmamsg__buf_get(ep->ctx, RDMAMSG_XHDR,
						   BUF_LIB, &pc->ann[i])) {
			pieces_put(ep, pc);
			return;
		}
	}
	pc->n = (int)n;
	pc->first = pc->size;
}

/* pieces_send -- copy and announce the pieces after the first of
 * transfer id (source s, len bytes at data): each gets its own window,
 * bound once its bytes are in, then an X_PIECE.  A failure (the
 * connection is going: nothing else can fail here) leaves the rest
 * unannounced, and the transfer ends with the connection */
static void pieces_send(struct rdmamsg_ep *ep, struct rndv_send *s, uint64_t id,
			const char *data, size_t len, struct pieces *pc)
{
	char *dst = s->buf->data;
	struct rdmamsg__xhdr x;
	size_t off = pc->first, n;
	int i, ret = 0;

	memset(&x, 0, sizeof(x));
	x.kind = X_PIECE;
	x.id = id;
	for (i = 0; i < pc->n - 1; i++, off += n) {
		n = len - off < pc->size ? len - off : pc->size;
		rdmamsg__bulk_copy(&ep->ctx->bulk, dst + off, data + off, n);
		ret = mw_bind(ep, pc->mw[i], s->buf->slab->mr, dst + off, n);
		if (ret)
			break;
		s->pw[s->npw++] = pc->mw[i];
		pc->mw[i] = NULL;
		x.addr = (uint64_t)(uintptr_t)(dst + off);
		x.len = n;
		x.rkey = s->pw[s->npw - 1]->rkey;
		rdmamsg__xhdr_encode(&x, pc->ann[i]->data);
		ret = rdmamsg__ep_send_x(ep, pc->ann[i], RDMAMSG_XHDR);
		if (ret)
			break;
		pc->ann[i] = NULL;
	}
	pieces_put(ep, pc);
	if (ret)
		LOG_ERR("announcing piece %d of transfer %llx failed: %d",
			i + 1, (unsigned long long)id, ret);
}

/* window_full -- another announcement would leave the peer's receive
 * window without a credit that no announcement holds.  The peer keeps
 * each announcement's credit until its FIN goes (rts_hold), and our own
 * FINs need a credit: were all of them held on both sides, each side's
 * FINs would wait for the other's.  With one at least not held, the
 * credits of everything else (messages, pieces, FINs) come back without
 * us sending anything, so our FINs always go */
static int window_full(const struct rdmamsg_ep *ep)
{
	return ep->xf->sends.used + 1 >= ep->peer_depth;
}

/* rdmamsg__rndv_send -- announce len bytes: in mr (the caller's
 * registration), in zb (the caller's pool buffer, now the library's), or
 * at data (copied once into pool memory); xflags: XF_IMM, XF_ORDER */
int rdmamsg__rndv_send(struct rdmamsg_ep *ep, int inner, uint64_t req,
		       const void *data, size_t len, struct rdmamsg_mr *mr,
		       struct rdmamsg_buf *zb, int xflags, uint32_t imm,
		       void *op_ctx, int report)
{
	struct pieces pc = {.n = 1, .first = len};
	const void *src = data;
	struct rdmamsg__xfer *xf;
	struct rndv_send *s;
	struct rdmamsg__xhdr x;
	uint64_t id;
	int ret;

	ret = rdmamsg__ep_can_send(ep);
	if (ret)
		return ret;
	ret = rdmamsg__xfer_get(ep, &xf);
	if (ret)
		return ret;
	if (RDMAMSG_UNLIKELY(window_full(ep))) {
		ep->want_writable = 1; /* a FIN to come: on_writable */
		return -EAGAIN;
	}
	s = state_get(&xf->sfree, sizeof(*s));
	if (!s)
		return -ENOMEM;
	xf->nsends++;
	memset(&x, 0, sizeof(x));
	if (!mr && !zb && inner == X_MSG && copy_full(ep, len)) {
		ep->want_writable = 1; /* a FIN to come: on_writable */
		ret = -EAGAIN;
		goto err_free_send;
	}
	/* to be read by a process of this host: the buffer it read longest
	 * ago (pool.c); by an HCA's DMA, the one we wrote last */
	ret = mr || zb ? 0
	      : rdmamsg__ep_shm_peer(ep)
		      ? rdmamsg__buf_get_for_peer(ep->ctx, len, &s->buf)
		      : rdmamsg__buf_get(ep->ctx, len, BUF_LIB, &s->buf);
	if (ret == -ENOMEM) {
		/* the pool is full: sender memory stays within its limit.
		 * -EAGAIN (then on_writable) while something of this
		 * endpoint is to come back, -ENOMEM when nothing is */
		if (xf->nsends > 1) {
			ep->want_writable = 1;
			ret = -EAGAIN;
		} else {
			ret = rdmamsg__ep_no_pool_memory(ep, -ENOMEM);
		}
		goto err_free_send;
	}
	if (mr) {
		/* the caller's registration: a window over just these bytes
		 * when it allows binding (the peer never learns the
		 * region's own key), else the region's key */
		s->umr = mr;
		if (!mr->bindable || window(ep, s, mr->mr, data, len, &x.rkey))
			x.rkey = mr->mr->rkey;
	} else if (zb || !ret) {
		/* pool memory, registered once: the peer gets a window
		 * over these bytes (or their own registration) */
		if (zb) {
			s->buf = zb;
		} else {
			pieces_take(ep, s->buf, len, &pc);
			copy_in(ep, s, s->buf->data, data, pc.first, len);
		}
		data = s->buf->data;
		ret = expose(ep, s, s->buf, pc.first, &x.rkey);
		if (ret) {
			LOG_ERR("exposing %zu bytes to send failed: %d", len,
				ret);
			goto err_free_send;
		}
	} else {
		/* larger than the pool's largest buffer: one copy on the
		 * heap (the caller may reuse data on return), registered
		 * for the transfer */
		if (posix_memalign(&s->mem, 4096, len)) {
			s->mem = NULL;
			ret = -ENOMEM;
			goto err_free_send;
		}
		copy_in(ep, s, s->mem, data, len, len);
		data = s->mem;
		errno = 0;
		s->tmr = ep->ctx->ops->reg_mr(ep->ctx->pd, s->mem, len,
					      IBV_ACCESS_REMOTE_READ);
		if (!s->tmr) {
			ret = rdmamsg__errno(ENOMEM);
			LOG_ERR("registering %zu bytes to send failed: %d", len,
				ret);
			goto err_free_send;
		}
		x.rkey = s->tmr->rkey;
	}
	s->op_ctx = op_ctx;
	s->report = report;
	s->req = inner == X_REQ ? req : 0;
	/* the FIN invalidates our window where the peer can send it so */
	s->inv = s->mw && (ep->caps & ep->peer_caps & RDMAMSG_HS_CAP_INV);
	ret = rdmamsg__idt_add(&xf->sends, s, &id);
	if (ret)
		goto err_free_send;
	x.kind = X_RTS;
	x.inner = (uint8_t)inner;
	x.flags = (uint8_t)(xflags | (s->inv ? XF_INV : 0));
	x.id = id;
	x.req = req;
	x.addr = (uint64_t)(uintptr_t)data;
	x.len = len;
	x.imm = imm;
	if (pc.n > 1) {
		x.flags |= XF_PIECE;
		x.status = (int32_t)pc.first;
	}
	ret = rdmamsg__xfer_send(ep, &x, NULL, 0);
	if (ret)
		goto err_del_id;
	if (mr)
		mr->busy++;
	s->umr = mr;
	if (pc.n > 1)
		pieces_send(ep, s, id, src, len, &pc);
	return 0;

err_del_id:
	rdmamsg__idt_del(&xf->sends, id);
err_free_send:
	pieces_put(ep, &pc);
	s->umr = NULL;
	if (zb)
		s->buf = NULL; /* still the caller's */
	send_free(ep, s);      /* a bound window goes with it */
	return ret;
}

/* a FIN that found no pool memory (or, as SEND_WITH_INV, no credit or
 * send slot): sent again after later completions */
struct fin_wait {
	struct rdmamsg__list link;
	struct rdmamsg__xhdr x;
};

/* send_fin -- tell the sender of rts its transfer is over (status 0 or
 * refusal), invalidating its window when it asked; a full pool delays it
 * (the sender waits), never ends the connection */
static void send_fin(struct rdmamsg_ep *ep, const struct rdmamsg__xhdr *rts,
		     int status)
{
	struct rdmamsg__xhdr x;
	int ret;

	memset(&x, 0, sizeof(x));
	x.kind = X_FIN;
	x.id = rts->id;
	/* the wire carries an errno: an allocation callback's odd value is
	 * still a refusal */
	x.status = status < 0 && status >= -4095 ? status
		   : status			 ? -EREMOTEIO
						 : 0;
	if (rts->flags & XF_INV) {
		x.flags = XF_INV;
		x.rkey = rts->rkey;
	}
	ret = list_empty(&ep->xf->fins) ? rdmamsg__xfer_send(ep, &x, NULL, 0)
					: -EAGAIN;
	if (ret == -EAGAIN || ret == -ENOMEM)
		rdmamsg__rndv_fin_later(ep, &x);
	/* a response not received ends its request here (last: the
	 * callback may take the endpoint down; a close cancels it) */
	if (status && rts->kind == X_RTS && rts->inner == X_RESP &&
	    !ep->closing && !ep->xf->down)
		rdmamsg__req_fail(ep, rts->req, x.status);
}

/* rdmamsg__rndv_fin_later -- FIN fin for the next flush (behind those
 * that wait already) */
void rdmamsg__rndv_fin_later(struct rdmamsg_ep *ep,
			     const struct rdmamsg__xhdr *fin)
{
	struct fin_wait *w;

	w = malloc(sizeof(*w));
	if (!w) {
		LOG_ERR("no memory for a rendezvous FIN");
		rdmamsg__ep_down(ep, -ENOBUFS);
		return;
	}
	w->x = *fin;
	/* the next completion's flush sends it (rdmamsg__xfer_flush) */
	list_add_tail(&ep->xf->fins, &w->link);
	rdmamsg__ep_xwait(ep);
}

/* rdmamsg__rndv_fin_retry -- send the FINs that waited, in order */
void rdmamsg__rndv_fin_retry(struct rdmamsg_ep *ep)
{
	struct rdmamsg__list *pos, *tmp;

	list_for_each_safe (pos, tmp, &ep->xf->fins) {
		struct fin_wait *w = container_of(pos, struct fin_wait, link);

		if (rdmamsg__xfer_send(ep, &w->x, NULL, 0))
			return;
		list_del(pos);
		free(w);
	}
}

/* fin_inv_bad -- a FIN whose invalidation is not one transfer s allows:
 * one where none was asked, one the FIN does not announce (or announced
 * and not made), another rkey.  A plain FIN to a transfer that asked is
 * the receiver's choice (it had no credit for a SEND_WITH_INV then): the
 * sender invalidates the window itself. */
static int fin_inv_bad(const struct rdmamsg__xfer *xf,
		       const struct rndv_send *s, const struct rdmamsg__xhdr *x)
{
	if (!s->inv || !(x->flags & XF_INV))
		return xf->rx_inv_set || (x->flags & XF_INV);
	return !xf->rx_inv_set || xf->rx_inv != s->mw->rkey ||
	       x->rkey != s->mw->rkey;
}

/* fin_recv -- our transfer is over */
static void fin_recv(struct rdmamsg_ep *ep, const struct rdmamsg__xhdr *x)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct rndv_send *s = rdmamsg__idt_find(&xf->sends, x->id);

	if (!s) {
		LOG_ERR("rendezvous FIN for unknown transfer %llx",
			(unsigned long long)x->id);
		rdmamsg__ep_down(ep, -EPROTO);
		return;
	}
	if (RDMAMSG_UNLIKELY(fin_inv_bad(xf, s, x))) {
		/* the transfer ends with the connection (on_send, its
		 * window deallocated): nothing is lost */
		LOG_ERR("rendezvous FIN for transfer %llx invalidated %#x "
			"(%s), its window is %#x: closing",
			(unsigned long long)x->id,
			xf->rx_inv_set ? xf->rx_inv : 0,
			xf->rx_inv_set ? "as SEND_WITH_INV" : "none",
			s->inv ? s->mw->rkey : 0);
		rdmamsg__ep_down(ep, -EPROTO);
		return;
	}
	rdmamsg__idt_del(&xf->sends, x->id);
	if (s->req && x->status) {
		/* the receiver refused the request, or its read failed with
		 * a connection a session outlived: no response will come
		 * (rdmamsg_request: response_cb exactly once); the status
		 * is an errno (rdmamsg__xhdr_decode checked it) */
		rdmamsg__req_fail(ep, s->req, x->status);
		if (xf->down) {
			send_finish(ep, s, 0, 0);
			return;
		}
	}
	if (x->flags & XF_INV) {
		/* the peer's FIN invalidated the (first) window before its
		 * receive completed: it is free again, and on_send follows
		 * at once; the later pieces' windows are ours to
		 * invalidate */
		xf->rx_inv_set = 0;
		s->mw->next = xf->mw_free;
		xf->mw_free = s->mw;
		s->mw = NULL;
	}
	if (s->umr && s->mw && !xf->down) {
		/* on_send once the window is invalidated: until then the
		 * peer could still read the caller's memory */
		s->late = 1;
		s->status = x->status;
	} else {
		send_report(ep, s, x->status);
	}
	if (xf->down) {
		send_free(ep, s); /* the callback took the connection down */
		return;
	}
	if (send_release(ep, s) == -EAGAIN) {
		/* no send slot for the invalidation: after completions */
		list_add_tail(&xf->invs, &s->link);
		rdmamsg__ep_xwait(ep);
	}
}

/* send_end -- transfer id (source s) ends unanswered: on_send, freed */
static void send_end(struct rdmamsg_ep *ep, uint64_t id, struct rndv_send *s,
		     int status)
{
	rdmamsg__idt_del(&ep->xf->sends, id);
	send_finish(ep, s, 1, status);
}

/* rdmamsg__rndv_unsent -- the announcement of transfer id left the
 * backlog unsent: the transfer ends (status) */
void rdmamsg__rndv_unsent(struct rdmamsg_ep *ep, uint64_t id, int status)
{
	struct rndv_send *s = rdmamsg__idt_find(&ep->xf->sends, id);

	if (s) /* else already ended (rdmamsg__rndv_down) */
		send_end(ep, id, s, status);
}

/* pull_start -- p has its destination and reads */
static void pull_start(struct rdmamsg__xfer *xf, struct rdmamsg__pull *p)
{
	p->active = 1;
	p->reading = 1;
	xf->active_pulls++;
	xf->active_bytes += p->x.len;
	xf->reading++;
	xf->reading_bytes += p->x.len;
	if (p->posted < p->x.len)
		xf->unposted++;
}

/* pull_read -- p reads no more (all in, or it ends) */
static void pull_read(struct rdmamsg__xfer *xf, struct rdmamsg__pull *p)
{
	if (!p->reading)
		return;
	p->reading = 0;
	xf->reading--;
	xf->reading_bytes -= p->x.len;
	xf->held_back = 0;
}

/* pull_free -- release a receive's destination (unless the caller's or
 * delivered) */
static void pull_free(struct rdmamsg_ep *ep, struct rdmamsg__pull *p)
{
	struct rdmamsg__xfer *xf = ep->xf;

	list_del(&p->link);
	if (p->ordered)
		list_del(&p->o.olink);
	pull_read(xf, p);
	xf->held_back = 0; /* fewer active bytes, or the held one gone */
	if (p->active) {
		xf->active_pulls--;
		xf->active_bytes -= p->x.len;
		if (p->posted < p->x.len)
			xf->unposted--;
	}
	if (p->own_mr)
		ep->ctx->ops->dereg_mr(p->own_mr);
	if (p->buf)
		rdmamsg__buf_put(p->buf);
	if (p->umr)
		p->umr->busy--;
	state_put(&xf->pfree, p);
}

/* held_free -- a held message goes undelivered */
static void held_free(struct rdmamsg__held *h)
{
	list_del(&h->o.olink);
	rdmamsg__buf_put(h->buf);
	free(h);
}

/* rdmamsg__rndv_hold -- a message, request or response (kind) arrived
 * behind an ordered rendezvous not yet delivered: copy it and keep its
 * data credit until it is delivered (rdmamsg__ep_rx_unhold); 1 when held,
 * 0 when nothing waits in front of it, -1 when the endpoint went down */
int rdmamsg__rndv_hold(struct rdmamsg_ep *ep, int kind, uint64_t req,
		       struct rdmamsg_buf *take, const void *data, size_t len,
		       uint32_t imm, unsigned int flags)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct rdmamsg__held *h;
	int ret;

	if (RDMAMSG_LIKELY(!xf || list_empty(&xf->order)))
		return 0;
	h = calloc(1, sizeof(*h));
	if (!h)
		goto err_nomem;
	if (take) {
		h->buf = take; /* a reassembled message: no copy */
	} else {
		ret = rdmamsg__buf_get(ep->ctx, len, BUF_LIB, &h->buf);
		if (ret)
			ret = rdmamsg__buf_heap(ep->ctx, len, &h->buf);
		if (ret) {
			free(h);
			goto err_nomem;
		}
		if (len)
			memcpy(h->buf->data, data, len);
	}
	h->o.ord = ORD_HELD;
	h->kind = kind;
	h->req = req;
	h->len = len;
	h->imm = imm;
	h->flags = flags;
	list_add_tail(&xf->order, &h->o.olink);
	ep->rx_hold_due++;
	return 1;

err_nomem:
	if (take)
		rdmamsg__buf_put(take);
	LOG_ERR("no memory to hold a %zu-byte message in order", len);
	rdmamsg__ep_down(ep, -ENOBUFS);
	return -1;
}

/* deliver_pull -- an ordered or unordered pull's bytes are in place */
static void deliver_pull(struct rdmamsg_ep *ep, struct rdmamsg__pull *p)
{
	unsigned int flags = 0;
	struct rdmamsg_buf *b = p->buf;

	if (p->x.flags & XF_IMM)
		flags |= RDMAMSG_RECV_IMM;
	/* a large message: above what an eager one could be, or from
	 * rdmamsg_send_mr(); smaller ones look exactly like eager ones */
	if (!p->ordered || p->x.len > ep->max_msg)
		flags |= RDMAMSG_RECV_LARGE;
	if (p->umr) {
		/* the caller's region is the caller's again */
		p->umr->busy--;
		p->umr = NULL;
	}
	if (p->own_mr) {
		ep->ctx->ops->dereg_mr(p->own_mr);
		p->own_mr = NULL;
	}
	switch (p->x.inner) {
	case X_MSG:
		if (ep->closing)
			break;
		if (b) {
			if (rdmamsg__ep_deliver(ep, b, (size_t)p->x.len,
						p->x.imm, flags))
				p->buf = NULL; /* kept (rdmamsg_recv_keep) */
		} else if (ep->cbs.on_recv) {
			ep->cbs.on_recv(ep, p->dest, (size_t)p->x.len, p->x.imm,
					flags, ep->arg);
		}
		break;
	case X_REQ:
	case X_RESP:
		rdmamsg__req_recv(ep, p->x.inner, p->x.req, p->dest,
				  (size_t)p->x.len);
		break;
	default:
		break;
	}
}

/* deliver_held -- a held message's turn (also in a session's outage: the
 * pull it waited for failed with the connection, and the peer does not
 * send it again) */
static void deliver_held(struct rdmamsg_ep *ep, struct rdmamsg__held *h)
{
	rdmamsg__ep_rx_unhold(ep);
	switch (h->kind) {
	case X_MSG:
		if (rdmamsg__ep_delivers(ep) &&
		    rdmamsg__ep_deliver(ep, h->buf, h->len, h->imm, h->flags))
			h->buf = NULL;
		break;
	default:
		rdmamsg__req_recv(ep, h->kind, h->req, h->buf->data, h->len);
		break;
	}
	if (h->buf)
		rdmamsg__buf_put(h->buf);
	free(h);
}

/* drain -- deliver the ordered entries whose turn it is */
static void drain(struct rdmamsg_ep *ep)
{
	struct rdmamsg__xfer *xf = ep->xf;

	if (xf->draining)
		return; /* a callback's progress: the outer loop goes on */
	xf->draining = 1;
	while (!list_empty(&xf->order) && !xf->down) {
		struct rdmamsg__list *l = xf->order.next;

		if (container_of(l, struct ord_ent, olink)->ord == ORD_PULL) {
			struct rdmamsg__pull *p =
				container_of(l, struct rdmamsg__pull, o.olink);

			if (!p->complete)
				break;
			/* unlinked first: a callback that takes the
			 * endpoint down must not free it under us */
			list_del(&p->o.olink);
			deliver_pull(ep, p);
			pull_free(ep, p);
		} else {
			struct rdmamsg__held *h =
				container_of(l, struct rdmamsg__held, o.olink);

			list_del(&h->o.olink);
			deliver_held(ep, h);
		}
	}
	xf->draining = 0;
}

/* piece_recv -- the next piece of the last transfer announced is
 * readable: where the one before ended, within the announced length, a
 * transfer announced in pieces, at most MAX_PIECES; anything else is a
 * broken peer and ends the connection (the message is not delivered).
 * A piece of no transfer here belongs to one refused already (the
 * sender sent its pieces before it could learn of that). */
static void piece_recv(struct rdmamsg_ep *ep, const struct rdmamsg__xhdr *x)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct rdmamsg__pull *p;

	/* a sender announces all pieces of a message before the next
	 * message: its transfer is the last one announced */
	if (list_empty(&xf->pulls))
		return;
	p = container_of(xf->pulls.prev, struct rdmamsg__pull, link);
	if (p->x.id != x->id)
		return;
	if (RDMAMSG_UNLIKELY(!(p->x.flags & XF_PIECE) || p->np == MAX_PIECES ||
			     x->addr != p->x.addr + p->ready ||
			     x->len > p->x.len - p->ready)) {
		LOG_ERR("rendezvous piece of transfer %llx: %llu bytes at "
			"%llu, after %llu of %llu in %u pieces: closing",
			(unsigned long long)x->id, (unsigned long long)x->len,
			(unsigned long long)(x->addr - p->x.addr),
			(unsigned long long)p->ready,
			(unsigned long long)p->x.len, p->np);
		rdmamsg__ep_down(ep, -EPROTO);
		return;
	}
	p->ready += x->len;
	p->pend[p->np] = p->ready;
	p->pkey[p->np++] = x->rkey;
	if (p->active) {
		rdmamsg__rndv_pump(ep);
		rdmamsg__ep_xwait(ep);
	}
}

/* rts_hold -- announcement x keeps the credit of the message that
 * carried it until its FIN is posted (rdmamsg__rndv_fin_posted): a peer
 * never has more announcements waiting here than the receive window it
 * was granted, and a receiver that reads slowly holds the peer back
 * instead of queueing without bound.  One beyond the window is a peer
 * that sent past its credits (the ring's buffers are posted again
 * before the credits go back): -EPROTO, 1 */
static int rts_hold(struct rdmamsg_ep *ep, const struct rdmamsg__xhdr *x)
{
	struct rdmamsg__xfer *xf = ep->xf;

	if (xf->rts_held >= ep->rx_win) {
		LOG_ERR("rendezvous announcement %llx beyond the peer's "
			"window of %u unanswered: closing",
			(unsigned long long)x->id, ep->rx_win);
		rdmamsg__ep_down(ep, -EPROTO);
		return 1;
	}
	xf->rts_held++;
	ep->rx_hold_due++; /* the credit of the buffer it came in */
	return 0;
}

/* rdmamsg__rndv_fin_posted -- a FIN is on the wire: the credit its
 * announcement held goes back to the peer */
void rdmamsg__rndv_fin_posted(struct rdmamsg_ep *ep)
{
	if (!ep->xf->rts_held)
		return;
	ep->xf->rts_held--;
	rdmamsg__ep_rx_unhold(ep);
}

/* rdmamsg__rndv_recv -- X_RTS, X_PIECE or X_FIN arrived */
void rdmamsg__rndv_recv(struct rdmamsg_ep *ep, const struct rdmamsg__xhdr *x)
{
	struct rdmamsg__pull *p;

	if (x->kind == X_FIN) {
		fin_recv(ep, x);
		return;
	}
	if (x->kind == X_PIECE) {
		piece_recv(ep, x);
		return;
	}
	if (RDMAMSG_UNLIKELY(rts_hold(ep, x)))
		return;
	if (RDMAMSG_UNLIKELY((x->flags & XF_INV) &&
			     !(ep->caps & RDMAMSG_HS_CAP_INV))) {
		LOG_ERR("rendezvous announcement %llx asks for a FIN as "
			"SEND_WITH_INV, which we did not offer: closing",
			(unsigned long long)x->id);
		rdmamsg__ep_down(ep, -EPROTO);
		return;
	}
	if (RDMAMSG_UNLIKELY(ep->st != EPS_UP)) {
		/* closed: refused at once, so the peer's close (which
		 * waits for it) need not wait for ours */
		send_fin(ep, x, -ECONNRESET);
		return;
	}
	/* what an eager message could be is never refused: the large
	 * maximum bounds only what is above the message maximum */
	if (x->len > large_max(ep) || !x->len) {
		send_fin(ep, x, -EMSGSIZE);
		return;
	}
	p = state_get(&ep->xf->pfree, sizeof(*p));
	if (!p) {
		send_fin(ep, x, -ENOMEM);
		return;
	}
	p->x = *x;
	p->ready = x->flags & XF_PIECE ? (uint64_t)x->status : x->len;
	p->pend[0] = p->ready;
	p->pkey[0] = x->rkey;
	p->np = 1;
	p->o.ord = ORD_PULL;
	list_init(&p->o.olink);
	list_add_tail(&ep->xf->pulls, &p->link);
	if (x->flags & XF_ORDER) {
		p->ordered = 1;
		list_add_tail(&ep->xf->order, &p->o.olink);
	}
	rdmamsg__rndv_pump(ep);
	rdmamsg__ep_xwait(ep);
}

/* activate -- choose the destination of a queued receive; 0 or refusal */
static int activate(struct rdmamsg_ep *ep, struct rdmamsg__pull *p)
{
	struct rdmamsg_mr *mr = NULL;
	void *data = NULL;
	size_t len = (size_t)p->x.len;
	int ret;

	/* the allocation callback places large messages only: a message
	 * that an eager one could have been lands where an eager one would */
	if (p->x.inner == X_MSG && ep->p.recv_alloc &&
	    (!p->ordered || p->x.len > ep->max_msg)) {
		ret = ep->p.recv_alloc(ep, len, &data, &mr, ep->arg);
		if (ret < 0)
			return ret;
		if (mr) {
			/* a region over pieces (mr_iov.c) has no one
			 * address to deliver: not a receive target; one of
			 * another context has a key of another PD, which
			 * the READ would fail on, taking the connection
			 * down */
			if (mr->ctx != ep->ctx) {
				LOG_ERR("allocation callback's region is of "
					"another context");
				return -EINVAL;
			}
			if (mr->iov || !data || (char *)data < mr->addr ||
			    (size_t)((char *)data - mr->addr) > mr->len ||
			    len > mr->len - (size_t)((char *)data - mr->addr)) {
				LOG_ERR("allocation callback's buffer is not "
					"inside its region");
				return -EINVAL;
			}
			p->dest = data;
			p->umr = mr;
			mr->busy++;
			return 0;
		}
	}
	/* pool memory, registered once; a heap buffer registered for the
	 * transfer when the pool has none (or no class this large) */
	if (rdmamsg__buf_get(ep->ctx, len, BUF_LIB, &p->buf)) {
		ret = rdmamsg__buf_heap(ep->ctx, len, &p->buf);
		if (ret)
			return ret;
		errno = 0;
		p->own_mr = ep->ctx->ops->reg_mr(ep->ctx->pd, p->buf->data, len,
						 IBV_ACCESS_LOCAL_WRITE);
		if (!p->own_mr) {
			ret = rdmamsg__errno(ENOMEM);
			rdmamsg__buf_put(p->buf);
			p->buf = NULL;
			return ret;
		}
	}
	p->buf->len = len;
	p->dest = p->buf->data;
	return 0;
}

/* post_chunk -- one RDMA READ of the next chunk of p */
static int post_chunk(struct rdmamsg_ep *ep, struct rdmamsg__pull *p)
{
	uint64_t n;
	struct rdmamsg__xop op;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	int ret;

	/* a read stays within one piece: each has its own window */
	while (p->posted >= p->pend[p->pi])
		p->pi++;
	n = p->pend[p->pi] - p->posted;
	if (n > CHUNK)
		n = CHUNK;
	memset(&wr, 0, sizeof(wr));
	memset(&op, 0, sizeof(op));
	sge.addr = (uintptr_t)(p->dest + p->posted);
	sge.length = (uint32_t)n;
	sge.lkey = p->own_mr ? p->own_mr->lkey
		   : p->umr  ? p->umr->mr->lkey
			     : p->buf->lkey;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = p->x.addr + p->posted;
	wr.wr.rdma.rkey = p->pkey[p->pi];
	op.kind = OP_PULL;
	op.pull = p;
	op.len = (uint32_t)n;
	ret = rdmamsg__xop_post(ep, &wr, &op);
	if (ret)
		return ret;
	p->posted += n;
	if (p->posted == p->x.len)
		ep->xf->unposted--;
	p->inflight++;
	ep->xf->reads_inflight++;
	return 0;
}

/* pump -- start receives and keep their reads flowing; *refused: an
 * ordered one was refused (what waited behind it may go now) */
static void pump(struct rdmamsg_ep *ep, int *refused)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct rdmamsg__list *pos, *tmp;
	int progress = 1, ret;

	if (xf->down || rdmamsg__ep_can_send(ep))
		return;
	list_for_each_safe (pos, tmp, &xf->pulls) {
		struct rdmamsg__pull *p =
			container_of(pos, struct rdmamsg__pull, link);

		/* the active receives lead the list: with MAX_READS of
		 * them reading, or the first waiting one held back by a
		 * bound that no receive has loosened since, none waiting
		 * can start, and they are not walked */
		if (xf->reading >= MAX_READS || xf->held_back)
			break;
		if (p->active)
			continue;
		/* a receive takes its destination when a read can fill
		 * it: the few buffers the pool then hands out (last freed
		 * first) stay in the cache, where a destination for every
		 * announcement (a window of 128 at 64 KiB: 8 MiB) did not;
		 * a large one reading leaves room to MAX_READS - 1 others,
		 * within read_bytes() */
		if ((xf->reading &&
		     xf->reading_bytes + p->x.len > read_bytes(ep)) ||
		    (xf->active_pulls &&
		     xf->active_bytes + p->x.len > large_max(ep))) {
			/* later, in order: bytes or memory bound */
			xf->held_back = 1;
			break;
		}
		p->in_alloc = 1;
		ret = activate(ep, p);
		p->in_alloc = 0;
		if (xf->down) {
			/* the callback closed the endpoint */
			if (!ret)
				pull_start(xf, p);
			pull_free(ep, p);
			return;
		}
		if (ret) {
			send_fin(ep, &p->x, ret);
			if (xf->down)
				return; /* rdmamsg__rndv_down freed p */
			*refused |= p->ordered;
			pull_free(ep, p);
			continue;
		}
		pull_start(xf, p);
	}
	/* round robin over the active receives, one chunk each per turn;
	 * they lead the list (taken in order, finished ones leave it), so
	 * the first waiting one ends a turn: the window's other waiting
	 * announcements (up to 128) are not walked per message, nor the
	 * active ones once every byte of theirs is asked for */
	while (progress && xf->unposted && xf->reads_inflight < MAX_READS &&
	       fp_sq_free(ep) > sq_reserve(ep)) {
		progress = 0;
		list_for_each_safe (pos, tmp, &xf->pulls) {
			struct rdmamsg__pull *p =
				container_of(pos, struct rdmamsg__pull, link);

			if (!p->active || !xf->unposted)
				break;
			if (p->posted == p->ready)
				continue; /* all of it, or all announced */
			if (xf->reads_inflight >= MAX_READS ||
			    fp_sq_free(ep) <= sq_reserve(ep))
				break;
			if (post_chunk(ep, p))
				return;
			progress = 1;
		}
	}
}

/* rdmamsg__rndv_pump -- start receives and keep their reads flowing */
void rdmamsg__rndv_pump(struct rdmamsg_ep *ep)
{
	int refused = 0;

	pump(ep, &refused);
	if (refused && !ep->xf->down)
		drain(ep);
}

/* rdmamsg__rndv_refuse_idle -- a closed endpoint starts no read: the
 * pulls with none in flight are refused (their senders' closes wait for
 * the answer) */
void rdmamsg__rndv_refuse_idle(struct rdmamsg_ep *ep)
{
	struct rdmamsg__list *pos, *tmp;

	list_for_each_safe (pos, tmp, &ep->xf->pulls) {
		struct rdmamsg__pull *p =
			container_of(pos, struct rdmamsg__pull, link);

		if (p->inflight || p->in_alloc)
			continue;
		send_fin(ep, &p->x, -ECONNRESET);
		if (ep->xf->down)
			return; /* it took the connection down: p is gone */
		pull_free(ep, p);
	}
}

/* finish -- the whole message is in place: delivered, then FIN, when it
 * is its turn (an ordered one that waits behind another gets its FIN now
 * and is delivered by drain()).  The FIN goes after the delivery so that
 * what the callback sends (the answer of a request or a ping) leaves
 * ahead of it: the peer then takes that first, and neither side handles
 * the FIN on the way (64 KiB one-way latency 7.78 -> 7.32 us).  A callback
 * that takes the connection down leaves the sender to learn the end from
 * that, as of any transfer in flight when a connection goes. */
static void finish(struct rdmamsg_ep *ep, struct rdmamsg__pull *p)
{
	struct rdmamsg__xfer *xf = ep->xf;
	int ordered = p->ordered;

	/* unlinked first: a callback (or a failed FIN) that takes the
	 * endpoint down must not free it under us */
	list_del(&p->link);
	pull_read(xf, p);
	if (ordered && (xf->draining || xf->order.next != &p->o.olink)) {
		send_fin(ep, &p->x, 0);
		if (xf->down) {
			pull_free(ep, p);
			return;
		}
		p->complete = 1;
		drain(ep);
		return;
	}
	if (!ordered) {
		deliver_pull(ep, p);
	} else {
		/* its turn: what a callback's progress completes meanwhile
		 * waits behind it (drain() below) */
		list_del(&p->o.olink);
		xf->draining = 1;
		deliver_pull(ep, p);
		xf->draining = 0;
	}
	if (!xf->down)
		send_fin(ep, &p->x, 0);
	pull_free(ep, p);
	if (ordered && !xf->down)
		drain(ep);
}

/* rdmamsg__rndv_pull_done -- one READ chunk completed */
void rdmamsg__rndv_pull_done(struct rdmamsg_ep *ep, struct rdmamsg__xop *op,
			     int status)
{
	struct rdmamsg__pull *p = op->pull;
	struct rdmamsg__xfer *xf = ep->xf;

	p->inflight--;
	xf->reads_inflight--;
	if (status && !p->failed)
		p->failed = status;
	if (!status)
		p->done += op->len;
	if (p->failed || xf->down) {
		if (!p->inflight) {
			if (!xf->down && ep->sid) {
				/* a session outlives the connection that
				 * failed the read: its sender learns of the
				 * end from the FIN, as of a refusal (rdmamsg.h:
				 * the error its receiver reports) */
				send_fin(ep, &p->x, p->failed);
				if (xf->down)
					return; /* rdmamsg__rndv_down freed p */
			}
			pull_free(ep, p);
			if (!xf->down)
				drain(ep); /* what waited behind it */
		}
		return;
	}
	if (p->done == p->x.len)
		finish(ep, p);
}

/* drop_waiting -- windows waiting for their invalidation, and messages
 * held behind an undelivered rendezvous, go */
static void drop_waiting(struct rdmamsg_ep *ep)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct rdmamsg__list *pos, *tmp;

	list_for_each_safe (pos, tmp, &xf->invs) {
		struct rndv_send *s = container_of(pos, struct rndv_send, link);

		list_del(pos);
		send_end_bound(ep, s);
	}
	list_for_each_safe (pos, tmp, &xf->order) {
		if (container_of(pos, struct ord_ent, olink)->ord == ORD_HELD)
			held_free(container_of(pos, struct rdmamsg__held,
					       o.olink));
	}
}

/* rdmamsg__rndv_down -- complete sends, drop receives not in flight and
 * what was held behind them (the stream ends where the connection did) */
void rdmamsg__rndv_down(struct rdmamsg_ep *ep, int status)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct rdmamsg__list *pos, *tmp;
	uint32_t i;

	for (i = 1; i < xf->sends.cap; i++) {
		struct rndv_send *s = xf->sends.e[i].p;
		uint64_t id = ((uint64_t)xf->sends.e[i].gen << 32) | i;

		if (s)
			send_end(ep, id, s, status);
	}
	drop_waiting(ep);
	list_for_each_safe (pos, tmp, &xf->pulls) {
		struct rdmamsg__pull *p =
			container_of(pos, struct rdmamsg__pull, link);

		if (!p->inflight && !p->in_alloc)
			pull_free(ep, p);
		else if (!p->failed)
			p->failed = status;
	}
	/* complete ordered pulls are off xf->pulls, waiting their turn */
	list_for_each_safe (pos, tmp, &xf->order) {
		struct rdmamsg__pull *p =
			container_of(pos, struct rdmamsg__pull, o.olink);

		if (p->complete)
			pull_free(ep, p);
	}
}

/* rdmamsg__rndv_free -- the endpoint goes: whatever is left */
void rdmamsg__rndv_free(struct rdmamsg_ep *ep)
{
	struct rdmamsg__xfer *xf = ep->xf;
	struct rdmamsg__list *pos, *tmp;
	uint32_t i;

	for (i = 1; i < xf->sends.cap; i++)
		if (xf->sends.e[i].p)
			send_free(ep, xf->sends.e[i].p);
	drop_waiting(ep);
	/* what is left in order is pulls */
	list_for_each_safe (pos, tmp, &xf->order)
		pull_free(ep, container_of(pos, struct rdmamsg__pull, o.olink));
	list_for_each_safe (pos, tmp, &xf->pulls)
		pull_free(ep, container_of(pos, struct rdmamsg__pull, link));
	list_for_each_safe (pos, tmp, &xf->fins) {
		list_del(pos);
		free(container_of(pos, struct fin_wait, link));
	}
	while (xf->mw_free) {
		struct rdmamsg__mw *m = xf->mw_free;

		xf->mw_free = m->next;
		mw_drop(m);
	}
	state_drain(&xf->sfree);
	state_drain(&xf->pfree);
}

/* rdmamsg_send_large -- rdmamsg_send(), which takes any size up to the
 * large maximum itself: kept for callers written before it did */
RDMAMSG_EXPORT int rdmamsg_send_large(struct rdmamsg_ep *ep, const void *data,
				      size_t len, void *op_ctx)
{
	return rdmamsg_send(ep, data, len, op_ctx);
}

/* rdmamsg_send_mr -- zero-copy rendezvous from the caller's registration */
RDMAMSG_EXPORT int rdmamsg_send_mr(struct rdmamsg_ep *ep, struct rdmamsg_mr *mr,
				   size_t off, size_t len, void *op_ctx)
{
	/* 0 bytes: nothing for the peer to read, and its read of them
	 * fails the connection (softrdma: -EREMOTEIO) */
	if (!ep || !mr || mr->ctx != ep->ctx || !len)
		return -EINVAL;
	if (rdmamsg__ep_can_send(ep))
		return -ENOTCONN;
	if (off > mr->len || len > mr->len - off)
		return -ERANGE;
	if (!(mr->access & RDMAMSG_ACCESS_REMOTE_READ))
		return -EACCES;
	if (rdmamsg__mr_iov_exportable(mr))
		return -ENOTSUP; /* pieces without UMR (mr_iov.c) */
	if (len > ep->p.max_large && len > ep->max_msg)
		return -EMSGSIZE;
	/* a UMR region (mr_iov.c) is zero-based: its offsets are its
	 * addresses */
	return rdmamsg__rndv_send(
		ep, X_MSG, 0, mr->iov ? (char *)(uintptr_t)off : mr->addr + off,
		len, mr, NULL, 0, 0, op_ctx, 1);
}

/* region_of -- a region of ctx's that holds the len bytes at data and
 * that peers may read, or NULL: the caller's registrations are the
 * registration cache of rdmamsg_send_nocopy() (nothing is registered per
 * message, and a region a transfer reads cannot go: rdmamsg_mr_dereg()
 * says -EBUSY, so no stale registration is ever used) */
static struct rdmamsg_mr *region_of(struct rdmamsg_ctx *ctx, const void *data,
				    size_t len)
{
	uintptr_t a = (uintptr_t)data, lo;
	struct rdmamsg__list *pos;

	for (pos = ctx->mrs.next; pos != &ctx->mrs; pos = pos->next) {
		struct rdmamsg_mr *mr =
			container_of(pos, struct rdmamsg_mr, link);

		if (mr->iov || !(mr->access & RDMAMSG_ACCESS_REMOTE_READ))
			continue;
		lo = (uintptr_t)mr->addr;
		if (a >= lo && a - lo <= mr->len && len <= mr->len - (a - lo))
			return mr;
	}
	return NULL;
}

/* send_nocopy -- rdmamsg_send() of bytes that stay put until on_send:
 * above the rendezvous threshold and inside a readable region of the
 * caller's, the receiver reads them where they are (in order, as
 * rdmamsg_send()'s own rendezvous: it cannot tell); else copied */
static int send_nocopy(struct rdmamsg_ep *ep, const void *data, size_t len,
		       int has_imm, uint32_t imm, void *op_ctx)
{
	struct rdmamsg_mr *mr;
	int ret;

	if (!ep || (len && !data))
		return -EINVAL;
	if (len > ep->rndv && len <= ep->p.max_large &&
	    !rdmamsg__ep_can_send(ep) && (mr = region_of(ep->ctx, data, len))) {
		ret = rdmamsg__rndv_send(ep, X_MSG, 0, data, len, mr, NULL,
					 XF_ORDER | (has_imm ? XF_IMM : 0), imm,
					 op_ctx, ep->cbs.on_send != NULL);
		return rdmamsg__ep_no_pool_memory(ep, ret);
	}
	return has_imm ? rdmamsg_send_imm(ep, data, len, imm, op_ctx)
		       : rdmamsg_send(ep, data, len, op_ctx);
}

/* rdmamsg_send_nocopy -- rdmamsg_send() without the copy where it can */
RDMAMSG_EXPORT int rdmamsg_send_nocopy(struct rdmamsg_ep *ep, const void *data,
				       size_t len, void *op_ctx)
{
	return send_nocopy(ep, data, len, 0, 0, op_ctx);
}

/* rdmamsg_send_nocopy_imm -- rdmamsg_send_nocopy() with an immediate */
RDMAMSG_EXPORT int rdmamsg_send_nocopy_imm(struct rdmamsg_ep *ep,
					   const void *data, size_t len,
					   uint32_t imm, void *op_ctx)
{
	return send_nocopy(ep, data, len, 1, imm, op_ctx);
}

/* rdmamsg_ep_attr_set_max_large_size -- the rendezvous maximum */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_max_large_size(
	struct rdmamsg_ep_attr *attr, size_t size)
{
	if (!attr || size < MIN_LARGE || size > MAX_LARGE)
		return -EINVAL;
	attr->p.max_large = size;
	return 0;
}

/* rdmamsg_ep_attr_set_recv_alloc -- where large messages land */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_recv_alloc(
	struct rdmamsg_ep_attr *attr,
	int (*alloc)(struct rdmamsg_ep *ep, size_t len, void **data,
		     struct rdmamsg_mr **mr, void *arg))
{
	if (!attr)
		return -EINVAL;
	attr->p.recv_alloc = alloc;
	return 0;
}
