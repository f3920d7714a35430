/* SPDX-License-Identifier: MIT */
/*
 * msg.c -- messages: eager sends (inline, copied or zero-copy), fragmentation
 * and reassembly, credit-based flow control, the send backlog and
 * completion processing.
 *
 * Credits: the receiver posts recv_depth buffers for data plus
 * RDMAMSG_CTL_CREDITS for control messages (credit updates, keep-alives).
 * Each data message uses one data credit, each control message one control
 * credit; both come back piggybacked on any message.  An explicit credit
 * update goes out when the peer may be running low on data credits, or
 * when we owe it CTL_RETURN control credits: an update costs one, so one
 * that returns two or more cannot ping-pong (the peer then owes one, below
 * the threshold), and a peer down to its last control credit (or none:
 * an update may take the one kept for the goodbye) always gets them back
 * without sending anything.  Without that, a receiver that owes data
 * credits but holds only the goodbye's control credit waits for a peer
 * that, out of data credits, cannot carry the control credits back: the
 * classic credit deadlock (seen on DC with an SRQ, two control credits).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "fastpath.h"
#include "dispatch.h"
#include "handshake.h"
#include "xfer.h"

/* control credits owed that an update returns on its own: it costs the
 * peer one, so what it returns must be more (no ping-pong between idle
 * peers), and it is all a peer that spent its last one is owed (two with
 * an SRQ) */
#define CTL_RETURN 2u

/* the rendezvous threshold: default, and what an attribute or
 * RDMAMSG_RNDV_THRESH may set (a message above it goes by rendezvous) */
#define RNDV_DEFAULT ((size_t)RDMAMSG_RNDV_THRESH_DEFAULT)
#define RNDV_MIN     ((size_t)RDMAMSG_RNDV_THRESH_MIN)
#define RNDV_MAX     ((size_t)1 << 40)
/* rdmamsg_send()'s rendezvous copies of an endpoint not yet read, by
 * default (RDMAMSG_COPY_AHEAD, rndv.c's copy_full): a window of 128
 * 1 MiB copies held 128 MiB of cold pool memory, at half the rate; 1 MiB
 * stays within the L2 (16 copies of 64 KiB, the two copies RDMAMSG__COPY_MIN
 * grants at 1 MiB), and callers retry at on_writable
 * (doc/performance.md "copies ahead", "A default of 1m") */
#define COPY_AHEAD_DEFAULT ((size_t)1 << 20)
/* the least piece of a copied rendezvous message (RDMAMSG_RNDV_PIECE,
 * rndv.c's pieces_take(); from it up to twice it, two halves): a piece
 * costs a bind, an announcement, a READ and an invalidation, which
 * 16 KiB pieces do not earn back (one-way 64 KiB 7.34 us whole, 7.9-8.0
 * in 16 or 32 KiB pieces) and 64 KiB do from 256 KiB (21.3 us against
 * 22.1 with 32 KiB pieces, 22.5 with 128, 24.4 whole; 1 MiB 87-90 and
 * 4 MiB 358 with any, 107 and 561 whole).  Since softrdma's copy ring
 * moves on, two halves earn it back from 64 KiB (rdmamsg_perf -t lat
 * --busy, 2026-11-26: 64 KiB 7.8-8.2 -> 7.4-7.9 us, 96 KiB 10.7-11.1 ->
 * 9.5-9.9; 48 KiB 6.2-6.5 either way; 128 KiB in two 64 KiB pieces
 * 12.8-12.9, in four of 32 KiB 12.9-13.1) */
#define RNDV_PIECE_DEFAULT ((size_t)64 << 10)

/* the default to a peer on this host where the fabric carries its sends
 * through shared memory (softrdma: an 8 KiB fragment is two copies
 * through the QP's copy ring, a rendezvous READ one copy from the peer's
 * pool, which it maps): fragments win there up to about this size
 * (doc/performance.md "Rendezvous threshold per connection": 256 KiB
 * while the READ was a process_vm_readv, 32 KiB since the pool is
 * mapped, 16 KiB since the copy ring moves on: from 20 KiB a READ is as
 * fast one-way and 1.3-2x the bandwidth; 20 KiB since a long SEND goes
 * into the ring in pieces and the backlog's copies stay few: rdmamsg_perf
 * --busy, 16 KiB + 64 B 3.23-3.35 -> 2.84-2.97 us one-way and 10.5-11.1
 * -> 10.8-11.5 GB/s, 20 KiB 3.72-4.01 -> 3.45-3.61 us and 9.1-9.2 ->
 * 10.8-11.2 GB/s by fragments; at 24 KiB 4.2 -> 4.0-4.1 us but 12.3-13.3
 * -> 11.6-11.8 GB/s, at 32 KiB 4.9-5.3 -> 5.2-5.4 us); retune it when the
 * copy paths change.  Through
 * an HCA's loopback both protocols cross PCIe and rendezvous saves the
 * receiver's copy as it does between hosts: the default stays.  The
 * value is RDMAMSG__RNDV_LOCAL_SHM (internal.h, for the tests). */
#define RNDV_LOCAL_SHM ((size_t)RDMAMSG__RNDV_LOCAL_SHM)

/* copy_slot_at -- the copy buffer of send seq, taken from the pool on
 * first use: an endpoint that only sends inline or zero-copy never holds
 * one; NULL when the pool has no memory */
static inline struct rdmamsg_buf *copy_slot_at(struct rdmamsg_ep *ep,
					       uint64_t seq)
{
	struct rdmamsg_buf **sb = &ep->sbufs[seq % ep->nsbuf];

	if (RDMAMSG_UNLIKELY(!*sb) &&
	    rdmamsg__buf_get(ep->ctx, ep->p.eager, BUF_LIB, sb))
		return NULL;
	return *sb;
}

/* copy_slot -- the copy buffer at the send ring's head */
static inline struct rdmamsg_buf *copy_slot(struct rdmamsg_ep *ep)
{
	return copy_slot_at(ep, ep->sq_head);
}

/* copy_frag -- len bytes of a fragment to d (d may be s itself): 8 to 16
 * bytes, the common small message, as two overlapping words (the bytes
 * read are all within s) */
static inline __attribute__((always_inline)) void copy_frag(char *d,
							    const char *s,
							    uint32_t len)
{
	uint64_t a, b;

	if (len >= 8 && len <= 16) {
		memcpy(&a, s, 8);
		memcpy(&b, s + len - 8, 8);
		memcpy(d, &a, 8);
		memcpy(d + len - 8, &b, 8);
	} else if (len) {
		memmove(d, s, len);
	}
}

/* keep -- the session's slot for the data fragment about to be posted as
 * number tx_frags, its bytes copied in (posted again, data is the slot's
 * own: moved onto itself) and its length set, tx_frags counted (the
 * caller takes it back if the post fails): the header is the caller's
 * to fill; NULL when there is no memory.  A slot holds kept_frag bytes:
 * every data fragment and pack is at most ep->frag, which a reconnect
 * may not change (rdmamsg__ep_session_init) */
static inline __attribute__((always_inline)) struct rdmamsg__kept *keep(
	struct rdmamsg_ep *ep, const void *data, uint32_t len)
{
	struct rdmamsg__kept **kp = &ep->kept[ep->tx_frags & ep->kept_mask];
	struct rdmamsg__kept *k = *kp;

	if (RDMAMSG_UNLIKELY(!k) && !(k = rdmamsg__ep_kept_alloc(ep, kp)))
		return NULL;
	copy_frag(k->data, data, len);
	k->len = len;
	ep->tx_frags++;
	return k;
}

/* how post_frag_sig() signals a send (every sig_every-th is anyway):
 * SIG_NEED when it is reported or owns a buffer; SIG_ALWAYS (the
 * goodbye: the close waits for it); SIG_LATER not for those either, as a
 * later send of the same batch is signalled and RC completes in order
 * (pump) */
#define SIG_NEED   0
#define SIG_ALWAYS 1
#define SIG_LATER  2

/* an inline send's header, and its bytes when they are few: the provider
 * then gathers one piece, not two (softrdma: 41 instructions and a
 * memcpy call fewer an 8-byte message) */
struct inl_hdr {
	struct rdmamsg__wire h;
	char data[48];
};

/* a send of a chain, built but not yet posted (pump_chain) */
struct tx_wr {
	struct ibv_send_wr wr;
	struct ibv_sge sge[2];
	struct inl_hdr hs;
};

/* own_sges -- buf_sges without a copy buffer (the pool has none): a
 * registered buffer sent from its start (a pool buffer, queued or the
 * caller's; a control buffer, a FIN's: xfer.c) carries the header in
 * its own headroom, one piece, as pool.c lays its buffers out for; a
 * later fragment (the bytes before it are the message's) and an
 * unregistered buffer wait for pool memory (NULL) */
static __attribute__((noinline, cold)) struct rdmamsg__wire *own_sges(
	const void *data, uint32_t len, const struct rdmamsg_buf *src,
	struct ibv_sge *sge)
{
	char *h;

	if (!src || data != src->data ||
	    (!src->slab && src->cls != RDMAMSG__CLS_CTL))
		return NULL;
	h = src->data - RDMAMSG_HDR; /* the library's until completion */
	sge[0].addr = (uintptr_t)h;
	sge[0].length = RDMAMSG_HDR + len;
	sge[0].lkey = src->lkey;
	return (struct rdmamsg__wire *)(void *)h;
}

/* buf_sges -- the gather list of a send that does not go inline: the
 * header in the copy buffer at the send ring's head, the payload after
 * it (copied) or in src (zero copy); the header's place.  Without a copy
 * buffer (the pool has no memory for it) own_sges, else NULL */
static inline __attribute__((always_inline)) struct rdmamsg__wire *buf_sges(
	struct rdmamsg_ep *ep, const void *data, uint32_t len,
	const struct rdmamsg_buf *src, struct ibv_sge *sge, int *nsge)
{
	/* at most nsbuf sends are outstanding, so no copy buffer is reused
	 * before its send completed */
	struct rdmamsg_buf *sb = copy_slot(ep);

	if (RDMAMSG_UNLIKELY(!sb))
		return own_sges(data, len, src, sge);
	sge[0].addr = (uintptr_t)(sb->data - RDMAMSG_HDR);
	sge[0].lkey = sb->lkey;
	if (src) {
		sge[0].length = RDMAMSG_HDR;
		sge[1].addr = (uintptr_t)data;
		sge[1].length = len;
		sge[1].lkey = src->lkey;
		*nsge = 2;
	} else {
		memcpy(sb->data, data, len);
		sge[0].length = RDMAMSG_HDR + len;
	}
	return (struct rdmamsg__wire *)(sb->data - RDMAMSG_HDR);
}

/* frag_sges -- the gather list of a fragment's send, its header's place
 * (on the stack at hs when the send goes inline); NULL when the pool has
 * no memory for its copy buffer */
static inline __attribute__((always_inline)) struct rdmamsg__wire *frag_sges(
	struct rdmamsg_ep *ep, struct inl_hdr *hs, const void *data,
	uint32_t len, const struct rdmamsg_buf *src, struct ibv_sge *sge,
	int *nsge, int *inl)
{
	if (RDMAMSG_HDR + len > ep->max_inline)
		return buf_sges(ep, data, len, src, sge, nsge);
	/* the provider copies at post time: nothing to register */
	*inl = 1;
	sge[0].addr = (uintptr_t)hs;
	sge[0].lkey = 0;
	if (len <= sizeof(hs->data)) {
		copy_frag(hs->data, data, len);
		sge[0].length = RDMAMSG_HDR + len;
	} else {
		sge[0].length = RDMAMSG_HDR;
		sge[1].addr = (uintptr_t)data;
		sge[1].length = len;
		sge[1].lkey = 0;
		*nsge = 2;
	}
	return &hs->h;
}

/* kept_sges -- frag_sges for a data fragment of a session, kept in k
 * (filled, header and bytes): inline straight from k (the copy into it
 * is then the send's only one), otherwise as any fragment, its header
 * k's; NULL when the pool has no memory */
static inline __attribute__((always_inline)) struct rdmamsg__wire *kept_sges(
	struct rdmamsg_ep *ep, struct rdmamsg__kept *k,
	const struct rdmamsg_buf *src, const void *data, struct ibv_sge *sge,
	int *nsge, int *inl)
{
	struct rdmamsg__wire *h;

	if (RDMAMSG_HDR + k->len <= ep->max_inline) {
		*inl = 1;
		sge[0].addr = (uintptr_t)&k->h;
		sge[0].length = RDMAMSG_HDR + k->len;
		sge[0].lkey = 0;
		return &k->h;
	}
	h = buf_sges(ep, src ? data : k->data, k->len, src, sge, nsge);
	if (h)
		*h = k->h;
	return h;
}

/* post_frag -- one message or fragment; own is freed when it completes;
 * signalled as sig says (SIG_*).  With chain (a plain lane's), the send
 * is built there and counted as posted, for the caller to post (and to
 * take back if the provider refuses it: pump_chain) */
static inline __attribute__((always_inline)) int post_frag_sig(
	struct rdmamsg_ep *ep, uint8_t type, uint8_t flags, uint32_t imm,
	uint32_t total, const void *data, uint32_t len,
	const struct rdmamsg_buf *src, struct rdmamsg_buf *own, void *op_ctx,
	int report, int sig, struct tx_wr *chain)
{
	struct rdmamsg__slot *slot = &ep->slots[ep->sq_head & ep->sq_mask];
	struct rdmamsg__wire *h;
	struct rdmamsg__kept *k = NULL; /* the session's copy, counted */
	struct tx_wr t;
	struct inl_hdr *hs = chain ? &chain->hs : &t.hs;
	struct ibv_sge *sge = chain ? chain->sge : t.sge;
	int nsge = 1, inl = 0, ret, signal;

	/* a session keeps a copy of each data fragment (a packed send is
	 * one) until the peer has it (ep.c); type is a constant at every
	 * call */
	if (RDMAMSG_UNLIKELY(ep->kept != NULL) &&
	    (type == W_DATA || type == W_PACK)) {
		k = keep(ep, data, len);
		if (RDMAMSG_UNLIKELY(!k))
			return -ENOMEM;
		fp_fill_hdr(ep, &k->h, type, flags, imm, total);
		h = kept_sges(ep, k, src, data, sge, &nsge, &inl);
		if (RDMAMSG_UNLIKELY(!h)) {
			ep->tx_frags--; /* not posted */
			return -ENOMEM;
		}
	} else {
		h = frag_sges(ep, hs, data, len, src, sge, &nsge, &inl);
		if (RDMAMSG_UNLIKELY(!h))
			return -ENOMEM;
		fp_fill_hdr(ep, h, type, flags, imm, total);
	}
	/* own is pool memory: signal its send, so that the buffer comes back
	 * when the send completes, not at some later signalled send that may
	 * never be posted (a sender waiting for pool memory would starve);
	 * unless the caller posts that later one now (SIG_LATER) */
	signal = sig == SIG_ALWAYS || (sig == SIG_NEED && (report || own));
	if (chain) {
		rdmamsg__lane_plain_wr(ep->ln, &chain->wr, sge, nsge,
				       ep->sq_head,
				       fp_tx_flags(ep, inl, signal));
		ret = 0;
	} else {
		ret = fp_post_send(ep, sge, nsge, inl, signal);
	}
	if (RDMAMSG_UNLIKELY(ret)) {
		if (k)
			ep->tx_frags--; /* not posted */
		return -ret;
	}
	fp_commit_hdr(ep, h);
	slot->op_ctx = op_ctx;
	slot->buf = own;
	slot->report = (uint8_t)report;
	ep->sq_head++;
	ep->last_tx = ep->ctx->now;
	return 0;
}

/* post_frag -- post_frag_sig out of line (the busy path inlines its own) */
static inline int post_frag(struct rdmamsg_ep *ep, uint8_t type, uint8_t flags,
			    uint32_t imm, uint32_t total, const void *data,
			    uint32_t len, const struct rdmamsg_buf *src,
			    struct rdmamsg_buf *own, void *op_ctx, int report,
			    int sig)
{
	return post_frag_sig(ep, type, flags, imm, total, data, len, src, own,
			     op_ctx, report, sig, NULL);
}

/* backlog_limit -- messages the backlog may hold */
static inline uint32_t backlog_limit(const struct rdmamsg_ep *ep)
{
	return ep->p.backlog;
}

/*
 * bl_full -- a message of len more bytes would not fit the backlog: its
 * message limit, or, for a copy, ep->copy_ahead bytes of messages
 * (RDMAMSG_COPY_AHEAD, as for rendezvous copies; two at least).
 * Copies far ahead of the credits gain nothing and are cold when they
 * go: 1,024 queued 8 KiB copies are 8 MiB of pool memory, four times the
 * L2 (rdmamsg_perf -t bw --busy, no --window, on softrdma: 4 KiB
 * 6.7-7.6 -> 10.1-10.7 GB/s, 8 KiB 7.1-8.4 -> 11.4-12.3, 16 KiB 7.5-7.8
 * -> 11.9-12.5 with this bound)
 */
static inline int bl_full(const struct rdmamsg_ep *ep, size_t len, int copy)
{
	return ep->bl_count >= backlog_limit(ep) ||
	       (copy &&
		rdmamsg__copies_full(ep, ep->bl_count, ep->bl_bytes, len));
}

/* a backlog entry that is a pack (has_imm): the W_PACK payload in data,
 * len bytes of it, imm records; the records' op_ctx after the payload
 * room (pack_ops) */
#define BL_PACK	   0x80
#define PACK_BYTES 4096u /* the most payload a pack takes */

_Static_assert(RDMAMSG_PACK_MAX == RDMAMSG__PACK_MAX,
	       "rdmamsg.h and proto.h agree on the packing limit");

/* bl_append -- n, a library-owned pool buffer, at the backlog's tail:
 * a message of len bytes (has_imm: its F_* flags, or BL_PACK) */
static void bl_append(struct rdmamsg_ep *ep, struct rdmamsg_buf *n, size_t len,
		      uint8_t has_imm, uint32_t imm, void *op_ctx)
{
	n->state = BUF_LIB;
	n->len = len;
	n->off = 0;
	n->has_imm = has_imm;
	n->imm = imm;
	n->op_ctx = op_ctx;
	n->reported = 0;
	n->next = NULL;
	if (ep->bl_tail)
		ep->bl_tail->next = n;
	else
		ep->bl_head = n;
	ep->bl_tail = n;
}

/* pack_room -- the payload bytes of ep's packs */
static inline uint32_t pack_room(const struct rdmamsg_ep *ep)
{
	return ep->frag < PACK_BYTES ? ep->frag : PACK_BYTES;
}

/* pack_ops_off -- where the op_ctx array of a pack starts */
static inline uint32_t pack_ops_off(const struct rdmamsg_ep *ep)
{
	return (pack_room(ep) + 7u) & ~7u;
}

/* pack_ops -- the op_ctx of each record of pack n */
static inline void **pack_ops(const struct rdmamsg_ep *ep,
			      const struct rdmamsg_buf *n)
{
	return (void **)(void *)(n->data + pack_ops_off(ep));
}

/* post_pack -- the pack at the backlog's head as one W_PACK send; one
 * carried inline goes back to the pool at once unless on_send needs its
 * op_ctx array: nothing waits for its completion then (no signal).  0,
 * or 1 when posting failed (the pack stays queued) */
static int post_pack(struct rdmamsg_ep *ep, struct rdmamsg_buf *n, int report,
		     int sig)
{
	int now = !report && RDMAMSG_HDR + n->len <= ep->max_inline;

	if (post_frag(ep, W_PACK, 0, 0, n->imm, n->data, (uint32_t)n->len, n,
		      now ? NULL : n, NULL, report ? RDMAMSG_SLOT_PACK : 0,
		      sig))
		return 1;
	ep->credits--;
	ep->bl_head = n->next;
	if (!ep->bl_head)
		ep->bl_tail = NULL;
	n->next = NULL;
	ep->bl_count -= n->imm;
	if (now)
		rdmamsg__buf_put(n);
	return 0;
}

/* pack_append -- a small message joins the pack at the backlog's tail,
 * or a new one: one copy, no pool buffer of its own.  0, -EAGAIN (the
 * backlog is full) or no pool memory's error */
static int pack_append(struct rdmamsg_ep *ep, const void *data, uint32_t len,
		       int xflags, uint32_t imm, void *op_ctx)
{
	struct rdmamsg_buf *n = ep->bl_tail;
	uint32_t span = rdmamsg__prec_span(len);
	struct rdmamsg__prec r;
	char *d;
	int ret;

	if (!n || n->has_imm != BL_PACK || n->len + span > pack_room(ep) ||
	    n->imm == RDMAMSG_PACK_RECS) {
		ret = rdmamsg__buf_get(
			ep->ctx,
			pack_ops_off(ep) + RDMAMSG_PACK_RECS * sizeof(void *),
			BUF_LIB, &n);
		if (ret)
			return rdmamsg__ep_no_pool_memory(ep, ret);
		bl_append(ep, n, 0, BL_PACK, 0, NULL);
	}
	d = n->data + n->len;
	r.len = htole16((uint16_t)len);
	r.flags = (uint8_t)(xflags & F_IMM);
	r.pad = 0;
	r.imm = htole32(imm);
	memcpy(d, &r, RDMAMSG_PREC);
	/* the padding is zeros: no stale pool bytes go on the wire */
	if (len & 7)
		memset(d + RDMAMSG_PREC + (len & ~7u), 0, 8);
	if (len)
		memcpy(d + RDMAMSG_PREC, data, len);
	pack_ops(ep, n)[n->imm++] = op_ctx;
	n->len += span;
	ep->bl_count++;
	return 0;
}

/* batch_goes_on -- after this send of pump() (a fragment of n, the end
 * of its message when last) pump() posts another for certain: a credit
 * and a send slot left, more queued (not the replay's mark), nothing the
 * next post could lack (its header slot, taken now if it is not there
 * yet, unless it goes inline; a replay session's copy).  Then this send
 * need not be signalled for its buffer or report: the batch's last is. */
static inline int batch_goes_on(struct rdmamsg_ep *ep,
				const struct rdmamsg_buf *n, int last)
{
	const struct rdmamsg_buf *m = last ? n->next : n;

	if (ep->credits <= 1 || fp_sq_free(ep) <= 1 || !m ||
	    m == &ep->rp_mark || ep->kept)
		return 0;
	/* n itself goes on only with fragments, never inline */
	return (last && RDMAMSG_HDR + m->len <= ep->max_inline) ||
	       copy_slot_at(ep, ep->sq_head + 1);
}

/* pump_stuck -- pump() could not post: a QP in error (the CQ reports
 * it), or no pool memory for a header's copy buffer (own_sges cannot
 * serve a later fragment), which nothing of this endpoint's announces
 * when it comes back (a buffer the application frees): each pass visits
 * the endpoint (ctx->xwait, rdmamsg_ctx_arm()) until it posts */
static __attribute__((noinline, cold)) void pump_stuck(struct rdmamsg_ep *ep)
{
	ep->bl_stuck = 1;
	rdmamsg__ep_xwait(ep);
}

/* frag_next -- post n's next fragment (with chain: build it, post_frag_sig)
 * and count it: 1 when it was n's last, 0 when more follow, -1 when it
 * could not */
static inline __attribute__((always_inline)) int frag_next(
	struct rdmamsg_ep *ep, struct rdmamsg_buf *n, int report,
	struct tx_wr *chain)
{
	size_t rest = n->len - n->off;
	uint32_t flen = rest > ep->frag ? ep->frag : (uint32_t)rest;
	int last = n->off + flen == n->len;
	uint8_t flags = (uint8_t)((n->off == 0 ? F_FIRST : 0) |
				  (last ? F_LAST : 0) | n->has_imm);
	int sig = batch_goes_on(ep, n, last) ? SIG_LATER : SIG_NEED;

	if (post_frag_sig(ep, W_DATA, flags, n->imm, (uint32_t)n->len,
			  n->data + n->off, flen, n, last ? n : NULL, n->op_ctx,
			  last && report && !(n->has_imm & F_XFER), sig, chain))
		return -1;
	ep->credits--;
	n->off += flen;
	return last;
}

/* msg_posted -- n's last fragment is posted: out of the backlog */
static void msg_posted(struct rdmamsg_ep *ep, struct rdmamsg_buf *n)
{
	ep->bl_head = n->next;
	if (!ep->bl_head)
		ep->bl_tail = NULL;
	n->next = NULL;
	ep->bl_count--;
	ep->bl_bytes -= n->len;
	if (RDMAMSG_UNLIKELY(n->has_imm & F_XFER))
		rdmamsg__xfer_posted(ep, n);
}

/* the fragments pump_chain posts at once */
#define CHAIN_MAX 8

/* what building a fragment's send changes (post_frag_sig, frag_next), as
 * it was before: pump_chain puts it back for those the provider refused */
struct tx_undo {
	uint64_t sq_head, sig_next, returned_total;
	size_t off;
	int32_t credits;
	uint32_t to_return, ctl_to_return, unsignaled;
};

/*
 * pump_chain -- frag_next for as many of n's fragments as credits and
 * send slots allow (two at least, CHAIN_MAX at most), posted as one
 * chain: one provider call, one doorbell on an HCA (softrdma sends a
 * fragment through its copy ring when the next one goes there, and the
 * receiver copies one out while the sender copies the next in).  A
 * chain the provider refuses part-way (its bad_wr) is posted up to
 * there; the rest is taken back as if never built and waits as
 * pump_stuck says.  Only a plain lane's sends chain (the RC lane's), and
 * not a replay session's (its copies are counted as they are kept).  0,
 * or -1 when not all could go (pump_stuck).
 */
static __attribute__((noinline)) int pump_chain(struct rdmamsg_ep *ep,
						struct rdmamsg_buf *n,
						int report)
{
	struct tx_wr c[CHAIN_MAX];
	struct tx_undo u[CHAIN_MAX];
	struct ibv_send_wr *bad = NULL;
	int k = 0, last = 0, i;

	do {
		u[k] = (struct tx_undo){.sq_head = ep->sq_head,
					.sig_next = ep->sig_next,
					.returned_total = ep->returned_total,
					.off = n->off,
					.credits = ep->credits,
					.to_return = ep->to_return,
					.ctl_to_return = ep->ctl_to_return,
					.unsignaled = ep->unsignaled};
		last = frag_next(ep, n, report, &c[k]);
		if (last < 0)
			break;
		if (k)
			c[k - 1].wr.next = &c[k].wr;
		k++;
	} while (!last && k < CHAIN_MAX && ep->credits > 0 &&
		 fp_sq_free(ep) > 0);
	if (k && rdmamsg__lane_plain_chain(ep->ln, &c[0].wr, &bad)) {
		for (i = 0; i < k && &c[i].wr != bad; i++)
			;
		if (i == k)
			i = 0; /* no bad_wr of ours: all taken back */
		ep->sq_head = u[i].sq_head;
		ep->sig_next = u[i].sig_next;
		ep->returned_total = u[i].returned_total;
		n->off = u[i].off;
		ep->credits = u[i].credits;
		ep->to_return = u[i].to_return;
		ep->ctl_to_return = u[i].ctl_to_return;
		ep->unsignaled = u[i].unsignaled;
		return -1;
	}
	if (last > 0)
		msg_posted(ep, n);
	return last < 0 ? -1 : 0;
}

/* pump -- post queued messages (fragment by fragment, several of a
 * message as one chain: pump_chain) while credits last; only the batch's
 * last send is signalled for the buffers and reports of those before it
 * (selective signalling: RC completes in order, a failed send still
 * completes, with its error) */
static void pump(struct rdmamsg_ep *ep)
{
	int report = ep->cbs.on_send != NULL;

	while (ep->bl_head && ep->credits > 0 && fp_sq_free(ep) > 0) {
		struct rdmamsg_buf *n = ep->bl_head;
		int last, sig;

		if (RDMAMSG_UNLIKELY(n == &ep->rp_mark)) {
			/* a reconnected session: what the peer did not
			 * receive goes first */
			if (rdmamsg__ep_replay_pump(ep))
				break;
			continue;
		}
		if (n->has_imm == BL_PACK) {
			sig = batch_goes_on(ep, n, 1) ? SIG_LATER : SIG_NEED;
			if (post_pack(ep, n, report, sig)) {
				pump_stuck(ep);
				break;
			}
			continue;
		}
		if (n->len - n->off > ep->frag && ep->credits > 1 &&
		    fp_sq_free(ep) > 1 && ep->ln->plain_send && !ep->kept) {
			if (pump_chain(ep, n, report)) {
				pump_stuck(ep);
				break;
			}
			continue;
		}
		last = frag_next(ep, n, report, NULL);
		if (last < 0) {
			pump_stuck(ep);
			break;
		}
		if (last)
			msg_posted(ep, n);
	}
	if (ep->want_writable && ep->bl_count < backlog_limit(ep))
		ep->writable_due = 1;
}

/* can_pump -- pump() would post something: a credit and a send slot
 * (without them it would only find nothing to do, a message just queued
 * changing nothing it reports) */
static inline int can_pump(const struct rdmamsg_ep *ep)
{
	return ep->credits > 0 && fp_sq_free(ep) > 0;
}

/* rdmamsg__ep_no_pool_memory -- the error for a send that found no pool memory: -EAGAIN
 * (on_writable follows) only while this endpoint has a message queued or a
 * signalled send outstanding, since its completion is what runs
 * on_writable; otherwise nothing would ever call it: -ENOMEM */
int rdmamsg__ep_no_pool_memory(struct rdmamsg_ep *ep, int ret)
{
	if (ret != -ENOMEM)
		return ret;
	if (!ep->bl_head && ep->sig_next <= ep->sq_tail)
		return -ENOMEM;
	ep->want_writable = 1;
	return -EAGAIN;
}

/* queue_msg -- the message waits in the backlog (bounded): out of
 * credits, fragmented, or (outage) a session reconnecting; messages above
 * the eager maximum go by rendezvous instead, through
 * rdmamsg_send_large()/rdmamsg_send_mr() (rndv.c): their control
 * messages (RTS, FIN) are F_XFER data messages queued here like any
 * other, and the peer pulls the bytes with RDMA reads */
static __attribute__((noinline)) int queue_msg(struct rdmamsg_ep *ep,
					       const void *data, size_t len,
					       struct rdmamsg_buf *zb,
					       int xflags, uint32_t imm,
					       void *op_ctx, int outage)
{
	struct rdmamsg_buf *n;
	int ret;

	if (bl_full(ep, len, !zb && !outage) &&
	    !(len > ep->frag && !ep->bl_head && !outage) &&
	    !(xflags & F_XFER)) {
		ep->want_writable = 1;
		return -EAGAIN;
	}
	if (ep->pack_max && len <= ep->pack_max && !zb && !(xflags & F_XFER)) {
		ret = pack_append(ep, data, (uint32_t)len, xflags, imm, op_ctx);
		if (!ret && !outage && can_pump(ep))
			pump(ep);
		return ret;
	}
	if (zb) {
		n = zb;
	} else {
		ret = rdmamsg__buf_get(ep->ctx, len, BUF_LIB, &n);
		if (ret)
			return rdmamsg__ep_no_pool_memory(ep, ret);
		if (len) /* an empty message may come with data NULL */
			memcpy(n->data, data, len);
	}
	bl_append(ep, n, len, (uint8_t)xflags, imm, op_ctx);
	ep->bl_count++;
	ep->bl_bytes += len;
	if (!outage && can_pump(ep))
		pump(ep);
	return 0;
}

/* check_zb -- a zero-copy buffer the caller may send len bytes of */
static inline int check_zb(const struct rdmamsg_ep *ep,
			   const struct rdmamsg_buf *zb, size_t len)
{
	return zb->state != BUF_USER || zb->ctx != ep->ctx || len > zb->cap;
}

/* send_outage -- a send while the endpoint cannot send: during a
 * session's outage (ep.c) it queues, otherwise the reason (ret) */
static __attribute__((noinline)) int send_outage(struct rdmamsg_ep *ep,
						 const void *data, size_t len,
						 struct rdmamsg_buf *zb,
						 int xflags, uint32_t imm,
						 void *op_ctx, int ret)
{
	if (!ep->reconn || ep->closing)
		return ret;
	/* above the message maximum it would go by rendezvous, which needs
	 * the connection: not queued (as a request's), yet no -EMSGSIZE
	 * up to the large maximum (rdmamsg_send(3)) */
	if (len > ep->max_msg)
		return len > ep->p.max_large ? -EMSGSIZE : ret;
	if (zb) {
		if (check_zb(ep, zb, len))
			return -EINVAL;
		data = zb->data;
	}
	return queue_msg(ep, data, len, zb, xflags, imm, op_ctx, 1);
}

/* send_rndv -- a message above the rendezvous threshold (rndv.c): the
 * receiver pulls it, delivered in order with the messages around it */
static __attribute__((noinline)) int send_rndv(struct rdmamsg_ep *ep,
					       const void *data, size_t len,
					       struct rdmamsg_buf *zb,
					       int xflags, uint32_t imm,
					       void *op_ctx)
{
	int ret;

	if (len > ep->p.max_large) {
		if (len > ep->max_msg)
			return -EMSGSIZE;
		/* a large maximum below the message maximum: fragments */
		return queue_msg(ep, data, len, zb, xflags, imm, op_ctx, 0);
	}
	ret = rdmamsg__rndv_send(ep, X_MSG, 0, data, len, NULL, zb,
				 XF_ORDER | ((xflags & F_IMM) ? XF_IMM : 0),
				 imm, op_ctx, ep->cbs.on_send != NULL);
	if (ret)
		return rdmamsg__ep_no_pool_memory(ep, ret);
	if (zb)
		zb->state = BUF_LIB;
	return 0;
}

/* send_now -- a copied message that finds a credit and a send slot,
 * posted at once: out of line with the post inlined (few arguments, no
 * zero-copy branch), so that rdmamsg_send() stays small for the
 * messages that queue */
static __attribute__((noinline)) int send_now(struct rdmamsg_ep *ep,
					      const void *data, uint32_t len,
					      int xflags, uint32_t imm,
					      void *op_ctx)
{
	int ret;

	ret = post_frag_sig(ep, W_DATA, (uint8_t)(F_FIRST | F_LAST | xflags),
			    imm, len, data, len, NULL, NULL, op_ctx,
			    ep->cbs.on_send != NULL && !(xflags & F_XFER),
			    SIG_NEED, NULL);
	if (RDMAMSG_UNLIKELY(ret))
		return ret == -ENOMEM ? rdmamsg__ep_no_pool_memory(ep, ret)
				      : -ENOTCONN;
	ep->credits--;
	return 0;
}

/* send_msg -- the one send path behind the four public calls; xflags:
 * F_IMM, and F_XFER for the rendezvous/request layer's messages.  The
 * protocol goes by size: inline, copied or zero-copy up to the eager
 * size, fragments up to the rendezvous threshold, rendezvous above */
static inline __attribute__((always_inline)) int send_msg(
	struct rdmamsg_ep *ep, const void *data, size_t len,
	struct rdmamsg_buf *zb, int xflags, uint32_t imm, void *op_ctx)
{
	int ret;

	ret = rdmamsg__ep_can_send(ep);
	if (RDMAMSG_UNLIKELY(ret))
		return send_outage(ep, data, len, zb, xflags, imm, op_ctx, ret);
	if (RDMAMSG_UNLIKELY(len > ep->max_msg) && len > ep->p.max_large)
		return -EMSGSIZE;
	if (zb) {
		if (check_zb(ep, zb, len))
			return -EINVAL;
		data = zb->data;
	}
	if (RDMAMSG_LIKELY(!ep->bl_head && len <= ep->eager_max &&
			   ep->credits > 0 && fp_sq_free(ep) > 0)) {
		if (!zb) /* copied: its own function, see send_now */
			return send_now(ep, data, (uint32_t)len, xflags, imm,
					op_ctx);
		ret = post_frag(
			ep, W_DATA, (uint8_t)(F_FIRST | F_LAST | xflags), imm,
			(uint32_t)len, data, (uint32_t)len, zb, zb, op_ctx,
			ep->cbs.on_send != NULL && !(xflags & F_XFER),
			SIG_NEED);
		if (RDMAMSG_UNLIKELY(ret))
			return ret == -ENOMEM
				       ? rdmamsg__ep_no_pool_memory(ep, ret)
				       : -ENOTCONN;
		ep->credits--;
		zb->state = BUF_LIB;
		return 0;
	}
	if (len > ep->rndv && !(xflags & F_XFER))
		return send_rndv(ep, data, len, zb, xflags, imm, op_ctx);
	if (RDMAMSG_UNLIKELY(len > ep->max_msg))
		return -EMSGSIZE;
	return queue_msg(ep, data, len, zb, xflags, imm, op_ctx, 0);
}

/* rdmamsg_send -- copy len bytes and send them */
RDMAMSG_EXPORT int rdmamsg_send(struct rdmamsg_ep *ep, const void *data,
				size_t len, void *op_ctx)
{
	if (RDMAMSG_UNLIKELY(!ep || (len && !data)))
		return -EINVAL;
	return send_msg(ep, data, len, NULL, 0, 0, op_ctx);
}

/* rdmamsg_send_imm -- rdmamsg_send with an immediate value */
RDMAMSG_EXPORT int rdmamsg_send_imm(struct rdmamsg_ep *ep, const void *data,
				    size_t len, uint32_t imm, void *op_ctx)
{
	if (RDMAMSG_UNLIKELY(!ep || (len && !data)))
		return -EINVAL;
	return send_msg(ep, data, len, NULL, F_IMM, imm, op_ctx);
}

/* rdmamsg_sendv -- several pieces as one message: one piece as
 * rdmamsg_send(), several gathered into a pool buffer (rdmamsg.h) */
RDMAMSG_EXPORT int rdmamsg_sendv(struct rdmamsg_ep *ep, const struct iovec *iov,
				 int iovcnt, void *op_ctx)
{
	struct rdmamsg_buf *buf;
	size_t total = 0, off = 0;
	uint8_t *p;
	void *data;
	int i, ret;

	if (!ep || !iov || iovcnt < 1 || iovcnt > RDMAMSG_IOV_MAX)
		return -EINVAL;
	for (i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -EINVAL;
		if (iov[i].iov_len > SIZE_MAX - total)
			return -EMSGSIZE;
		total += iov[i].iov_len;
	}
	if (iovcnt == 1 || total == 0)
		return rdmamsg_send(ep, total ? iov[0].iov_base : NULL, total,
				    op_ctx);
	if (total > ep->p.max_msg && total > ep->p.max_large)
		return -EMSGSIZE; /* before taking pool memory for it */
	ret = rdmamsg_buf_alloc(ep->ctx, total, &buf);
	if (ret == -EMSGSIZE) {
		/* beyond the pool's largest class: gathered on the heap,
		 * sent (and copied once more) as rdmamsg_send() sends it */
		p = malloc(total);
		if (!p)
			return -ENOMEM;
		for (i = 0; i < iovcnt; i++) {
			if (iov[i].iov_len)
				memcpy(p + off, iov[i].iov_base,
				       iov[i].iov_len);
			off += iov[i].iov_len;
		}
		ret = rdmamsg_send(ep, p, total, op_ctx);
		free(p);
		return ret;
	}
	if (ret) {
		/* a short pool as rdmamsg_send() answers it: -EAGAIN and
		 * on_writable while this endpoint's sends will free some
		 * (its state's error first, as there) */
		int st = rdmamsg__ep_can_send(ep);

		if (st && !(ep->reconn && !ep->closing))
			return st;
		return rdmamsg__ep_no_pool_memory(ep, ret);
	}
	rdmamsg_buf_get_data(buf, &data);
	p = data;
	for (i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len)
			memcpy(p + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	ret = rdmamsg_send_buf(ep, buf, total, op_ctx);
	if (ret)
		rdmamsg_buf_free(buf);
	return ret;
}

/* rdmamsg_send_buf -- zero-copy send of a pool buffer */
RDMAMSG_EXPORT int rdmamsg_send_buf(struct rdmamsg_ep *ep,
				    struct rdmamsg_buf *buf, size_t len,
				    void *op_ctx)
{
	if (RDMAMSG_UNLIKELY(!ep || !buf))
		return -EINVAL;
	return send_msg(ep, NULL, len, buf, 0, 0, op_ctx);
}

/* rdmamsg_send_buf_imm -- zero-copy send with an immediate value */
RDMAMSG_EXPORT int rdmamsg_send_buf_imm(struct rdmamsg_ep *ep,
					struct rdmamsg_buf *buf, size_t len,
					uint32_t imm, void *op_ctx)
{
	if (RDMAMSG_UNLIKELY(!ep || !buf))
		return -EINVAL;
	return send_msg(ep, NULL, len, buf, F_IMM, imm, op_ctx);
}

/* post_x_inv -- a transfer-layer message as IBV_WR_SEND_WITH_INV of
 * rkey (the FIN of a window the peer bound: its HCA invalidates it before
 * the receive completes), signalled for its buffer */
static int post_x_inv(struct rdmamsg_ep *ep, struct rdmamsg_buf *buf,
		      uint32_t len, uint32_t rkey)
{
	struct rdmamsg__slot *slot = &ep->slots[ep->sq_head & ep->sq_mask];
	struct rdmamsg__wire *h;
	struct ibv_send_wr wr;
	struct inl_hdr hs;
	struct ibv_sge sge[2];
	int nsge = 1, inl = 0;

	h = frag_sges(ep, &hs, buf->data, len, buf, sge, &nsge, &inl);
	if (!h)
		return -ENOMEM;
	fp_fill_hdr(ep, h, W_DATA, F_FIRST | F_LAST | F_XFER, 0, len);
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = sge;
	wr.num_sge = nsge;
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.send_flags = inl ? IBV_SEND_INLINE : 0;
	wr.invalidate_rkey = rkey;
	if (ep->ln->ops->post(ep->ln, &wr, ep->sq_head))
		return -ENOTCONN;
	fp_commit_hdr(ep, h);
	slot->op_ctx = NULL;
	slot->buf = buf;
	slot->report = 0;
	ep->sq_head++;
	ep->sig_next = ep->sq_head;
	ep->unsignaled = 0;
	ep->last_tx = ep->ctx->now;
	return 0;
}

/* send_x_now -- a transfer-layer answer (a FIN) posted at once, past a
 * backlog (a FIN waits on nothing in it; a closing endpoint's is
 * cancelled or lingers), as SEND_WITH_INV of *inv when inv, or -EAGAIN
 * for want of a credit or a slot */
static int send_x_now(struct rdmamsg_ep *ep, struct rdmamsg_buf *buf,
		      size_t len, const uint32_t *inv)
{
	int ret;

	if (ep->credits <= 0 || fp_sq_free(ep) == 0)
		return -EAGAIN;
	if (inv)
		ret = post_x_inv(ep, buf, (uint32_t)len, *inv);
	else
		ret = post_frag(ep, W_DATA, F_FIRST | F_LAST | F_XFER, 0,
				(uint32_t)len, buf->data, (uint32_t)len, buf,
				buf, NULL, 0, SIG_NEED)
			      ? -ENOTCONN
			      : 0;
	if (ret)
		return ret;
	ep->credits--;
	buf->state = BUF_LIB;
	return 0;
}

/* rdmamsg__ep_send_x -- a library-owned pool buffer flagged F_XFER: never
 * refused for a full backlog, never reported through on_send */
int rdmamsg__ep_send_x(struct rdmamsg_ep *ep, struct rdmamsg_buf *buf,
		       size_t len)
{
	int ret;

	buf->state = BUF_USER;
	if (RDMAMSG_UNLIKELY(ep->st == EPS_DRAINING))
		ret = send_x_now(ep, buf, len, NULL);
	else
		ret = send_msg(ep, NULL, len, buf, F_XFER, 0, NULL);
	if (ret)
		buf->state = BUF_LIB;
	return ret;
}

/* rdmamsg__ep_send_x_inv -- rdmamsg__ep_send_x as SEND_WITH_INV of rkey:
 * never through the backlog (which knows no invalidation), -EAGAIN while
 * it cannot go at once (the caller tries again after completions) */
int rdmamsg__ep_send_x_inv(struct rdmamsg_ep *ep, struct rdmamsg_buf *buf,
			   size_t len, uint32_t rkey)
{
	if (ep->st != EPS_DRAINING && rdmamsg__ep_can_send(ep))
		return -ENOTCONN;
	return send_x_now(ep, buf, len, &rkey);
}

/* rdmamsg_recv_keep -- take the current message's buffer (in on_recv) */
RDMAMSG_EXPORT int rdmamsg_recv_keep(struct rdmamsg_ep *ep,
				     struct rdmamsg_buf **buf)
{
	struct rdmamsg_buf *repl;
	int ret;

	if (!ep || !buf || !ep->in_recv || !ep->rx_cur ||
	    ep->rx_cur->state != BUF_LIB || ep->rx_kept)
		return -EINVAL;
	if (RDMAMSG_UNLIKELY(ep->rx_cur_is_asm == 3 || !ep->rx_cur->slab)) {
		/* packed with others in a ring buffer, or reassembled on
		 * the heap (the pool was short): the caller gets a pool
		 * copy; the original goes when on_recv returns */
		const void *d = ep->rx_cur_is_asm == 3 ? ep->rx_pdata
						       : ep->rx_cur->data;
		size_t len =
			ep->rx_cur_is_asm == 3 ? ep->rx_plen : ep->rx_cur->len;

		ret = rdmamsg__buf_get(ep->ctx, len ? len : 1, BUF_USER, &repl);
		if (ret)
			return -ENOMEM;
		if (len)
			memcpy(repl->data, d, len);
		repl->len = len;
		/* kept once (a heap buffer is freed all the same) */
		if (ep->rx_cur_is_asm == 3)
			ep->rx_kept = 1;
		else
			ep->rx_cur->state = BUF_USER;
		*buf = repl;
		return 0;
	}
	if (!ep->rx_cur_is_asm) {
		/* the receive ring needs a buffer in its place */
		ret = rdmamsg__buf_get(ep->ctx, ep->p.eager, BUF_LIB, &repl);
		if (ret)
			return -ENOMEM;
		*ep->rx_cur_slot = repl;
	} else if (ep->rx_cur_is_asm == 1) {
		ep->rx_asm = NULL;
	} /* 2: pulled or held, nobody else's (rdmamsg__ep_deliver) */
	ep->rx_cur->state = BUF_USER;
	ep->rx_kept = 1;
	*buf = ep->rx_cur;
	return 0;
}

/* rdmamsg__ep_send_ctl -- a control message (credit update, keep-alive);
 * a keep-alive leaves the last control credit to the goodbye, a credit
 * update may take it: the peer returns control credits unasked once it
 * owes two (flush), so the goodbye's comes back, and a receiver that owes
 * credits never waits for a peer that waits for them */
int rdmamsg__ep_send_ctl(struct rdmamsg_ep *ep, int type)
{
	int ret;

	if (ep->ctl_credits <= (type == W_CREDIT ? 0u : 1u) ||
	    fp_sq_free(ep) == 0)
		return -EAGAIN;
	ret = post_frag(ep, (uint8_t)type, 0, 0, 0, NULL, 0, NULL, NULL, NULL,
			0, SIG_NEED);
	if (ret)
		return ret;
	ep->ctl_credits--;
	return 0;
}

/* rdmamsg__ep_send_alive -- a keep-alive naming our clock (w, len bytes:
 * struct rdmamsg__alive_wire), under a keep-alive's credit rule */
int rdmamsg__ep_send_alive(struct rdmamsg_ep *ep, const void *w, uint32_t len)
{
	int ret;

	if (ep->ctl_credits <= 1u || fp_sq_free(ep) == 0)
		return -EAGAIN;
	ret = post_frag(ep, W_KEEPALIVE, 0, 0, 0, w, len, NULL, NULL, NULL, 0,
			SIG_NEED);
	if (ret)
		return ret;
	ep->ctl_credits--;
	return 0;
}

/* rdmamsg__ep_send_bye -- the goodbye of a clean close, signalled so that
 * the close waits for it; it may take the control credit kept for it */
int rdmamsg__ep_send_bye(struct rdmamsg_ep *ep)
{
	int ret;

	if (ep->ctl_credits == 0 || fp_sq_free(ep) == 0)
		return -EAGAIN;
	ret = post_frag_sig(ep, W_BYE, 0, 0, 0, NULL, 0, NULL, NULL, NULL, 0,
			    SIG_ALWAYS, NULL);
	if (ret)
		return ret;
	ep->ctl_credits--;
	return 0;
}

/* rdmamsg__ep_send_grant -- the passive side's first credit update: the
 * receive buffers it just posted (to_return) are granted, not returned */
int rdmamsg__ep_send_grant(struct rdmamsg_ep *ep)
{
	uint64_t before = ep->returned_total;
	uint32_t grant = ep->to_return;
	int ret;

	if (ep->ctl_credits == 0 || fp_sq_free(ep) == 0)
		return -EAGAIN;
	ret = post_frag(ep, W_CREDIT, 0, 0, 0, NULL, 0, NULL, NULL, NULL, 0,
			SIG_NEED);
	if (ret)
		return ret;
	ep->ctl_credits--;
	/* a grant above 65535 is not possible: recv_depth <= 4096 */
	ep->returned_total =
		before + (grant - ep->to_return) - ep->p.recv_depth;
	return 0;
}

/* pack_report -- on_send for each message of pack n (status) */
static void pack_report(struct rdmamsg_ep *ep, const struct rdmamsg_buf *n,
			int status)
{
	void **ops = pack_ops(ep, n);
	uint32_t i;

	for (i = 0; i < n->imm; i++)
		if (ep->cbs.on_send)
			ep->cbs.on_send(ep, status, ops[i], ep->arg);
}

/* rdmamsg__ep_complete_slots -- sends up to seq are done (seq: status).
 * Most slots of a signalled batch hold nothing (inline, unreported):
 * those are stepped over in a tight loop (rdmamsg_pingpong, 32 a
 * completion: 24 instructions a message before, 12 now) */
void rdmamsg__ep_complete_slots(struct rdmamsg_ep *ep, uint64_t seq, int status)
{
	uint64_t end = seq < ep->sq_head ? seq + 1 : ep->sq_head;
	const struct rdmamsg__slot *slots = ep->slots;
	const uint64_t mask = ep->sq_mask;

	while (ep->sq_tail < end) {
		uint64_t t = ep->sq_tail;
		struct rdmamsg__slot *s;
		int st;

		/* the slots that hold nothing (inline, unreported), a run
		 * up to the ring's end at a time */
		while (t < end) {
			const struct rdmamsg__slot *p = &slots[t & mask],
						   *p0 = p;
			uint64_t run = mask + 1 - (t & mask);
			const struct rdmamsg__slot *q =
				p + (end - t < run ? end - t : run);

			while (p < q && !((uintptr_t)p->buf | p->report))
				p++;
			t += (uint64_t)(p - p0);
			if (p < q)
				break;
		}
		ep->sq_tail = t;
		if (t == end)
			break;
		s = &ep->slots[t & mask];
		st = t == seq ? status : 0;
		ep->sq_tail = t + 1;
		if (RDMAMSG_UNLIKELY(s->report == RDMAMSG_SLOT_PACK)) {
			/* each packed message is reported, then its pack
			 * goes */
			s->report = 0;
			pack_report(ep, s->buf, st);
		}
		if (s->buf) {
			rdmamsg__buf_put(s->buf);
			s->buf = NULL;
		}
		if (s->report) {
			int r = s->report;

			s->report = 0;
			if (RDMAMSG_UNLIKELY(r == RDMAMSG_SLOT_XFER))
				rdmamsg__xfer_slot_done(
					ep, (uint32_t)(s - ep->slots), st);
			else if (ep->cbs.on_send)
				ep->cbs.on_send(ep, st, s->op_ctx, ep->arg);
		}
		/* a callback may post (sq_head moves): end stands, seq
		 * names nothing beyond it */
	}
}

/* rdmamsg__ep_cancel_backlog -- report queued messages as cancelled; their
 * buffers stay until teardown since fragments may still be in flight */
void rdmamsg__ep_cancel_backlog(struct rdmamsg_ep *ep, int status)
{
	struct rdmamsg_buf *n;

	for (n = ep->bl_head; n; n = n->next) {
		if (n->reported)
			continue;
		n->reported = 1;
		if (n->has_imm == BL_PACK) {
			pack_report(ep, n, status);
			continue;
		}
		if (n->has_imm & F_XFER) {
			/* the layer's own message: an announcement that
			 * never goes ends its rendezvous, a FIN goes all
			 * the same (xfer.c) */
			rdmamsg__xfer_unsent(ep, n->data, n->len, status);
			continue;
		}
		if (ep->cbs.on_send)
			ep->cbs.on_send(ep, status, n->op_ctx, ep->arg);
	}
}

/* deliver -- hand one whole message to on_recv; true when it was kept */
static int deliver(struct rdmamsg_ep *ep, struct rdmamsg_buf *b, int is_asm,
		   struct rdmamsg_buf **slot, void *data, size_t len,
		   uint32_t imm, unsigned int flags)
{
	ep->rx_cur = b;
	ep->rx_cur_is_asm = is_asm;
	ep->rx_cur_slot = slot;
	ep->in_recv = 1;
	ep->rx_kept = 0;
	if (ep->cbs.on_recv)
		ep->cbs.on_recv(ep, data, len, imm, flags, ep->arg);
	ep->in_recv = 0;
	ep->rx_cur = NULL;
	/* not b->state: the callback may already have sent it on */
	return ep->rx_kept;
}

/* rdmamsg__ep_deliver -- a whole message in b, a buffer of no ring (a
 * pulled or held one): rdmamsg_recv_keep() may take it; 1 when taken */
int rdmamsg__ep_deliver(struct rdmamsg_ep *ep, struct rdmamsg_buf *b,
			size_t len, uint32_t imm, unsigned int flags)
{
	if (ep->in_recv) {
		/* an on_recv that drove progress: no nesting of the
		 * current message's state, and nothing to keep */
		if (ep->cbs.on_recv)
			ep->cbs.on_recv(ep, b->data, len, imm, flags, ep->arg);
		return 0;
	}
	return deliver(ep, b, 2, NULL, b->data, len, imm, flags);
}

/* rx_pack -- a W_PACK's count messages, each delivered as one of its own
 * (held behind an ordered rendezvous like any other), in order, until one
 * of them closes the endpoint or the connection goes down; a session's
 * outage (a callback's rdmamsg_ep_test_break, a send that met the failed
 * QP) stops nothing: the pack is one fragment the session counted
 * received, so the peer never sends it again and the rest of it is
 * delivered now or never (rdmamsg_connect(3)).  A malformed pack
 * delivers nothing and takes the connection down.  rx()'s answer */
static __attribute__((noinline)) int rx_pack(struct rdmamsg_ep *ep,
					     struct rdmamsg_buf *b,
					     uint32_t len, uint32_t count)
{
	char *p = b->data;
	struct rdmamsg__prec r;
	unsigned int flags;
	uint32_t i;

	if (rdmamsg__pack_check(p, len, count)) {
		LOG_ERR("endpoint %p: malformed pack (%u records, %u bytes): "
			"closing",
			(void *)ep, count, len);
		rdmamsg__ep_down(ep, -EPROTO);
		return 0;
	}
	rdmamsg__iface_packed(ep->ctx, count); /* the drain's budget */
	ep->rx_packed = 1; /* the window need not grow (return_credits) */
	for (i = 0; i < count && rdmamsg__ep_delivers(ep); i++) {
		rdmamsg__prec_get(p, &r);
		flags = (r.flags & F_IMM) ? RDMAMSG_RECV_IMM : 0;
		if (!(RDMAMSG_UNLIKELY(ep->xf != NULL) &&
		      rdmamsg__rndv_hold(ep, X_MSG, 0, NULL, p + RDMAMSG_PREC,
					 r.len, r.imm, flags))) {
			ep->rx_pdata = p + RDMAMSG_PREC;
			ep->rx_plen = r.len;
			deliver(ep, b, 3, NULL, p + RDMAMSG_PREC, r.len, r.imm,
				flags);
		}
		p += rdmamsg__prec_span(r.len);
	}
	return RDMAMSG__RX_DATA;
}

static int rx_inv(struct rdmamsg_ep *ep, struct rdmamsg_buf **slot,
		  uint32_t rlen, uint32_t rkey);

/* ep_rx -- the lane's up call for one receive: RDMAMSG__RX_DATA when a
 * data buffer is to be reposted (its credit returned once it is),
 * RDMAMSG__RX_CTL for a control buffer, 0 when nothing is */
static int ep_rx(void *owner, struct rdmamsg_buf **slot, uint32_t rlen,
		 int status, uint32_t wimm)
{
	struct rdmamsg_ep *ep = owner;
	struct rdmamsg_buf *b = *slot;
	const struct rdmamsg__wire *h =
		(const struct rdmamsg__wire *)(b->data - RDMAMSG_HDR);
	uint32_t len, imm;
	unsigned int flags;
	int ret;

	if (RDMAMSG_UNLIKELY(status)) {
		if (status == RDMAMSG__RX_INV)
			return rx_inv(ep, slot, rlen, wimm);
		if (status != RDMAMSG__RX_WRITE_IMM) {
			if (status != -ECANCELED)
				rdmamsg__ep_down(ep, status);
			return 0;
		}
		/* one-sided write with immediate: a data credit, no header;
		 * its writer had it done, so a session's outage (nothing
		 * sends it again) still reports it */
		ep->last_rx = ep->ctx->now;
		ep->received_total++;
		if (rdmamsg__ep_delivers(ep))
			rdmamsg__xfer_write_imm(ep, wimm, rlen);
		return RDMAMSG__RX_DATA;
	}
	if (RDMAMSG_UNLIKELY(rdmamsg__wire_check(h, rlen, ep->p.eager,
						 ep->pack_max != 0))) {
		LOG_ERR("endpoint %p: malformed header (type %u flags %#x, "
			"%u bytes): closing",
			(void *)ep, h->type, h->flags, rlen);
		rdmamsg__ep_down(ep, -EPROTO);
		return 0;
	}
	/* credits come back only for buffers we used: more than the peer
	 * ever granted is a broken (or hostile) peer */
	if (RDMAMSG_UNLIKELY(rdmamsg__credit_check((uint32_t)ep->credits,
						   le16toh(h->credits),
						   ep->peer_depth_max) ||
			     rdmamsg__credit_check(ep->ctl_credits, h->ctl,
						   ep->peer_ctl))) {
		LOG_ERR("endpoint %p: peer returned %u+%u credits, more than "
			"granted (%d of %u, %u of %u): closing",
			(void *)ep, le16toh(h->credits), h->ctl, ep->credits,
			ep->peer_depth_max, ep->ctl_credits, ep->peer_ctl);
		rdmamsg__ep_down(ep, -EPROTO);
		return 0;
	}
	if (RDMAMSG_UNLIKELY(ep->st == EPS_CONNECTING && ep->passive))
		rdmamsg__ep_connected(ep, NULL, 0); /* data beat ESTABLISHED */
	ep->last_rx = ep->ctx->now;
	ep->credits += le16toh(h->credits);
	ep->ctl_credits += h->ctl;
	if (h->type != W_DATA && h->type != W_PACK) {
		if (RDMAMSG_UNLIKELY(h->type == W_BYE))
			rdmamsg__ep_bye_recv(ep);
		else if (RDMAMSG_UNLIKELY(h->type == W_KEEPALIVE &&
					  rlen > RDMAMSG_HDR))
			rdmamsg__ep_alive_rx(ep, b->data, rlen - RDMAMSG_HDR);
		return RDMAMSG__RX_CTL;
	}
	ep->received_total++;
	if (RDMAMSG_UNLIKELY(ep->st != EPS_UP)) {
		/* closed: nothing is delivered, but the rendezvous the
		 * close waits for still end (xfer.c) */
		if (ep->st == EPS_DRAINING &&
		    (h->flags & (F_FIRST | F_LAST | F_XFER)) ==
			    (F_FIRST | F_LAST | F_XFER))
			rdmamsg__xfer_recv(ep, b->data, rlen - RDMAMSG_HDR);
		return RDMAMSG__RX_DATA;
	}
	/* the session's implicit sequence: RC delivers each fragment of a
	 * connection once and in order (ep.c) */
	ep->rx_frags++;
	len = rlen - RDMAMSG_HDR;
	imm = le32toh(h->imm);
	flags = (h->flags & F_IMM) ? RDMAMSG_RECV_IMM : 0;
	if (RDMAMSG_LIKELY((h->flags & (F_FIRST | F_LAST | F_XFER)) ==
			   (F_FIRST | F_LAST))) {
		/* behind an ordered rendezvous it waits its turn (rndv.c) */
		if (RDMAMSG_UNLIKELY(ep->xf != NULL) &&
		    rdmamsg__rndv_hold(ep, X_MSG, 0, NULL, b->data, len, imm,
				       flags))
			return RDMAMSG__RX_DATA;
		deliver(ep, b, 0, slot, b->data, len, imm, flags);
		return RDMAMSG__RX_DATA;
	}
	/* a pack's flags are 0: past the single message's test */
	if (h->type == W_PACK)
		return rx_pack(ep, b, len, le32toh(h->total));
	if ((h->flags & (F_FIRST | F_LAST | F_XFER)) ==
	    (F_FIRST | F_LAST | F_XFER)) {
		rdmamsg__xfer_recv(ep, b->data, len);
		return 1;
	}
	if (h->flags & F_FIRST) {
		uint32_t total = le32toh(h->total);

		if (ep->rx_asm ||
		    rdmamsg__frag_check(total, len, ep->p.max_msg)) {
			LOG_ERR("bad first fragment (total %u)", total);
			rdmamsg__ep_down(ep, -EPROTO);
			return 1;
		}
		ret = rdmamsg__buf_get(ep->ctx, total, BUF_LIB, &ep->rx_asm);
		if (ret == -ENOMEM) {
			/* reassembly needs no registration: a full pool
			 * costs a copy if the message is kept, not the
			 * connection */
			LOG_INFO("no pool memory to reassemble %u bytes: "
				 "heap",
				 total);
			ret = rdmamsg__buf_heap(ep->ctx, total, &ep->rx_asm);
		}
		if (ret) {
			LOG_ERR("no memory to reassemble %u bytes", total);
			rdmamsg__ep_down(ep, -ENOBUFS);
			return 1;
		}
		ep->rx_asm->len = total;
		ep->rx_asm_off = 0;
	} else if (!ep->rx_asm) {
		LOG_ERR("fragment without a first fragment");
		rdmamsg__ep_down(ep, -EPROTO);
		return 1;
	}
	if (len > ep->rx_asm->len - ep->rx_asm_off) {
		LOG_ERR("fragments overrun the message length");
		rdmamsg__ep_down(ep, -EPROTO);
		return 1;
	}
	memcpy(ep->rx_asm->data + ep->rx_asm_off, b->data, len);
	ep->rx_asm_off += len;
	if (h->flags & F_LAST) {
		struct rdmamsg_buf *a = ep->rx_asm;

		if (ep->rx_asm_off != a->len) {
			LOG_ERR("message shorter than announced");
			rdmamsg__ep_down(ep, -EPROTO);
			return 1;
		}
		ep->rx_asm = NULL;
		if (h->flags & F_XFER) {
			rdmamsg__xfer_recv(ep, a->data, a->len);
			rdmamsg__buf_put(a);
		} else if (ep->xf && rdmamsg__rndv_hold(ep, X_MSG, 0, a, NULL,
							a->len, imm, flags)) {
			/* held in order, a taken (or freed) */
		} else if (!deliver(ep, a, 1, slot, a->data, a->len, imm,
				    flags)) {
			rdmamsg__buf_put(a);
		}
	}
	return 1;
}

/* rx_inv -- a message whose receive invalidated rkey (IBV_WC_WITH_INV):
 * only the FIN of a transfer that asked for it may be one (rndv.c takes
 * the key); anything else is a broken peer */
static __attribute__((noinline)) int rx_inv(struct rdmamsg_ep *ep,
					    struct rdmamsg_buf **slot,
					    uint32_t rlen, uint32_t rkey)
{
	int r;

	if (!ep->xf) {
		LOG_ERR("endpoint %p: peer invalidated rkey %#x, no transfer "
			"asked it to: closing",
			(void *)ep, rkey);
		rdmamsg__ep_down(ep, -EPROTO);
		return 0;
	}
	ep->xf->rx_inv = rkey;
	ep->xf->rx_inv_set = 1;
	r = ep_rx(ep, slot, rlen, 0, 0);
	if (ep->xf && ep->xf->rx_inv_set) {
		ep->xf->rx_inv_set = 0;
		if (!ep->xf->down &&
		    (ep->st == EPS_UP || ep->st == EPS_DRAINING)) {
			LOG_ERR("endpoint %p: peer invalidated rkey %#x "
				"outside a FIN that asked for it: closing",
				(void *)ep, rkey);
			rdmamsg__ep_down(ep, -EPROTO);
		}
	}
	return r;
}

/* ep_rx_shared -- ep_rx() of an endpoint whose receives come from a
 * shared queue (an SRQ, a DC target: srq.c): a peer that sends past its
 * credits takes buffers other endpoints' windows reserved there (where
 * an own ring meets it with RNR), so a data receive or a control one
 * beyond what the peer holds ends the connection (-EPROTO) before
 * anything of it is used.  The peer holds recv_depth + returned_total -
 * received_total data credits and own_ctl - ctl_pending - ctl_to_return
 * control ones: both count a credit as returned once its header is
 * posted, before the peer can have it, so a peer that keeps to its
 * credits never meets this. */
static int ep_rx_shared(void *owner, struct rdmamsg_buf **slot, uint32_t rlen,
			int status, uint32_t wimm)
{
	struct rdmamsg_ep *ep = owner;
	const struct rdmamsg__wire *h =
		(const struct rdmamsg__wire *)((*slot)->data - RDMAMSG_HDR);
	int data = status == RDMAMSG__RX_WRITE_IMM, ctl = 0, r;

	if ((!status || status == RDMAMSG__RX_INV) && rlen >= RDMAMSG_HDR) {
		data = h->type == W_DATA || h->type == W_PACK;
		ctl = h->type == W_CREDIT || h->type == W_KEEPALIVE ||
		      h->type == W_BYE;
	}
	if ((data &&
	     ep->received_total - ep->returned_total >= ep->p.recv_depth) ||
	    (ctl && (uint64_t)ep->ctl_pending + ep->ctl_to_return >=
			    rdmamsg__ep_own_ctl(ep))) {
		LOG_ERR("endpoint %p: peer sent past its %s credits: closing",
			(void *)ep, data ? "data" : "control");
		rdmamsg__ep_down(ep, -EPROTO);
		return 0;
	}
	r = ep_rx(owner, slot, rlen, status, wimm);
	if (r == RDMAMSG__RX_CTL)
		ep->ctl_pending++;
	return r;
}

/* credit_due_set -- when a credit update goes (return_credits): half the
 * window, a quarter where the peer packs (a credit then carries up to
 * RDMAMSG_PACK_RECS of its queued messages: back early, its queue keeps
 * moving; rdmamsg_pingpong -w, 8 B: 343 instructions a message with half,
 * 304 with a quarter; without packing a quarter cost 2,207 against 1,459,
 * an update per 8 messages) */
static void credit_due_set(struct rdmamsg_ep *ep)
{
	ep->credit_due = ep->caps & ep->peer_caps & RDMAMSG_HS_CAP_PACK
				 ? ep->rx_win / 4
				 : ep->rx_win / 2;
}

/*
 * grow_window -- the peer has used every credit we granted: the window
 * held it back, so it doubles, up to rx_win_max.  The ring's buffers
 * past the window (left by a window that grew before a reconnect) are
 * granted first, then new ones come from the pool, their completions'
 * room from the CQ (rdmamsg__iface_grow), posted and granted; as many as
 * the pool and the CQ give now (none: the window stays, and the next
 * time the peer runs dry tries again).  A grant is credits the peer
 * never had: to_return carries them, returned_total not counting them
 * as returned (the view of the peer's credits stays a modular
 * difference).  A failed post takes the connection down, as grant()'s.
 * Windows never shrink: the buffers stay until the endpoint closes.
 */
static __attribute__((noinline, cold)) void grow_window(struct rdmamsg_ep *ep)
{
	uint32_t ctl = rdmamsg__ep_own_ctl(ep), want, have, got = 0, g, i, j;
	uint32_t idx[32], k;
	int ret;

	if (ep->st != EPS_UP || !ep->ln || !ep->ln->ops->grow_recvs)
		return;
	want = ep->rx_win_max - ep->rx_win;
	if (want > ep->rx_win)
		want = ep->rx_win;
	have = ep->nrx - ctl; /* data buffers in the ring */
	while (have + got < ep->rx_win + want &&
	       !rdmamsg__buf_get(ep->ctx, ep->p.eager, BUF_LIB,
				 &ep->rxb[ep->nrx + got]))
		got++;
	if (got && rdmamsg__iface_grow(ep->ln, got)) {
		while (got--) {
			rdmamsg__buf_put(ep->rxb[ep->nrx + got]);
			ep->rxb[ep->nrx + got] = NULL;
		}
		got = 0;
	}
	g = have + got - ep->rx_win;
	if (g > want)
		g = want;
	if (!g)
		return;
	ep->rx_win += g; /* the lane's batch follows it */
	i = 0;
	do { /* once at least: the batch */
		k = got - i > 32 ? 32 : got - i;
		for (j = 0; j < k; j++)
			idx[j] = ep->nrx + j;
		ep->nrx += k;
		ret = ep->ln->ops->grow_recvs(ep->ln, idx, k,
					      rdmamsg__ep_rx_batch(ep));
		if (ret) {
			LOG_ERR("endpoint %p: posting %u more receive buffers "
				"failed: %d",
				(void *)ep, k, ret);
			ep->nrx += got - i - k; /* freed with the ring */
			rdmamsg__ep_down(ep, -ENOBUFS);
			return;
		}
		i += k;
	} while (i < got);
	ep->to_return += g;
	ep->returned_total -= g;
	credit_due_set(ep);
	LOG_INFO("endpoint %p: receive window %u (%u buffers in the ring)",
		 (void *)ep, ep->rx_win, ep->nrx);
}

/* out_of_credits -- the peer holds none of our credits: the window grows
 * (grow_window), unless it packed messages since the last time it ran
 * out.  A packing peer's queue moves a pack a credit, and more credits
 * only spread its small messages over more buffers and sends:
 * rdmamsg_perf -t rate --size 8 --window 128, pinned, 46-49 M messages/s
 * at a window of 32, 34-35 grown to 128 */
static __attribute__((noinline)) void out_of_credits(struct rdmamsg_ep *ep)
{
	if (!ep->rx_packed)
		grow_window(ep);
	ep->rx_packed = 0;
}

/* return_credits -- a credit update once enough is due (credit_due_set),
 * or once the peer holds half the window or less; a peer left with none
 * may have the window grow first (out_of_credits) */
static inline __attribute__((always_inline)) void return_credits(
	struct rdmamsg_ep *ep)
{
	/* receive buffers the peer believes it still has */
	uint64_t view = ep->rx_win + ep->returned_total - ep->received_total;

	if (RDMAMSG_UNLIKELY(!view && ep->rx_win < ep->rx_win_max))
		out_of_credits(ep); /* the view stays: a grant is owed */
	if ((ep->to_return > 0 &&
	     (ep->to_return >= ep->credit_due || view <= ep->rx_win / 2)) ||
	    ep->ctl_to_return >= CTL_RETURN)
		rdmamsg__ep_send_ctl(ep, W_CREDIT);
}

/* rdmamsg__ep_rx_batch -- the lane's rx_batch (lane.h): data receives
 * reposted a quarter of the window less one at a time (at most
 * RDMAMSG_RX_BATCH_MAX; none below a depth of 12), one ibv_post_recv for
 * them.  The ones kept back are fewer than a quarter of the window, so
 * when the peer's view falls to half some reposted buffer is owed and
 * return_credits sends it: the peer never waits on buffers kept back.  A
 * batch is below credit_due (a quarter at least), so that in a ping-pong
 * the replies carry it and no credit update of its own goes.  An SRQ's go
 * back at once (srq.c). */
uint32_t rdmamsg__ep_rx_batch(const struct rdmamsg_ep *ep)
{
	uint32_t b = ep->rx_win / 4;

	/* b - 1 below: a depth under 12 (down to 2) batches nothing */
	if (ep->srq || b < 3)
		return 1;
	b--;
	return b > RDMAMSG_RX_BATCH_MAX ? RDMAMSG_RX_BATCH_MAX : b;
}

/* flush_closing -- flush() of a closing endpoint whose connection is up:
 * with linger the backlog; always the credits and the transfer layer's
 * answers, which the peer's FINs and ours need (the goodbye waits for the
 * rendezvous the peer knows of: close_up in ep.c) */
static __attribute__((noinline)) void flush_closing(struct rdmamsg_ep *ep)
{
	if (ep->lingering && ep->bl_head)
		pump(ep);
	if (ep->xf)
		rdmamsg__xfer_flush(ep);
	return_credits(ep);
}

/* flush -- after polling: backlog, credit update, writable */
static inline __attribute__((always_inline)) void flush(struct rdmamsg_ep *ep)
{
	if (RDMAMSG_UNLIKELY(ep->st != EPS_UP)) {
		if (ep->st == EPS_DRAINING)
			flush_closing(ep);
		return;
	}
	if (ep->bl_head)
		pump(ep);
	if (RDMAMSG_UNLIKELY(ep->xf != NULL))
		rdmamsg__xfer_flush(ep);
	return_credits(ep);
	if (ep->writable_due ||
	    (ep->want_writable && !ep->bl_head && ep->credits > 0)) {
		ep->writable_due = 0;
		ep->want_writable = 0;
		if (ep->cbs.on_writable)
			ep->cbs.on_writable(ep, ep->arg);
	}
}

/* session_tx_error -- a session's send seq failed (the transport gave
 * up, or it was flushed by a failure the session survives): a data
 * fragment was kept and goes again if the peer lacks it (0); a one-sided
 * operation or pull may or may not have executed (-ECONNRESET) */
static void session_tx_error(struct rdmamsg_ep *ep, uint64_t seq, int status)
{
	int survive = ep->reconn ? status == -ECANCELED || status == -ECONNRESET
				 : status == -ECONNRESET && !ep->closing;

	if (seq < ep->sq_tail || seq >= ep->sq_head)
		return; /* not in flight: completes nothing */
	if (seq > ep->sq_tail)
		rdmamsg__ep_complete_slots(ep, seq - 1, 0);
	if (survive)
		status =
			ep->slots[seq & ep->sq_mask].report == RDMAMSG_SLOT_XFER
				? -ECONNRESET
				: 0;
	rdmamsg__ep_complete_slots(ep, seq, status);
}

/* ep_tx_done -- the lane's up call: sends up to seq (its low 32 bits,
 * rebuilt here: at most sq_head; one not in flight, below sq_tail,
 * completes nothing) are done */
static void ep_tx_done(void *owner, uint32_t seq32, int status)
{
	struct rdmamsg_ep *ep = owner;
	uint64_t seq = ep->sq_head - (uint32_t)((uint32_t)ep->sq_head - seq32);

	if (RDMAMSG_UNLIKELY(status != 0) && ep->sid) {
		session_tx_error(ep, seq, status);
		return;
	}
	rdmamsg__ep_complete_slots(ep, seq, status);
}

/* reposted_held -- ep_reposted() where messages are held in order (their
 * credits are withheld, rndv.c) or the buffers are an SRQ's (out of
 * line: the busy path keeps its registers) */
static __attribute__((noinline)) void reposted_held(struct rdmamsg_ep *ep,
						    uint32_t data, uint32_t ctl)
{
	if (ep->rx_hold_due != 0) {
		uint32_t k = data < ep->rx_hold_due ? data : ep->rx_hold_due;

		ep->rx_hold_due -= k;
		ep->rx_withheld += k;
		data -= k;
	}
	if (ep->srq) {
		while (data--)
			ep->to_return += rdmamsg__srq_credit(ep);
		/* ep_rx_shared counted them taken */
		ep->ctl_pending -=
			ctl < ep->ctl_pending ? ctl : ep->ctl_pending;
	} else {
		ep->to_return += data;
	}
	ep->ctl_to_return += ctl;
}

/* ep_reposted -- the lane's up call: receives are posted again, their
 * credits go back to the peer with the next message */
static void ep_reposted(void *owner, uint32_t data, uint32_t ctl)
{
	struct rdmamsg_ep *ep = owner;

	if (RDMAMSG_UNLIKELY(ep->rx_hold_due != 0 || ep->srq)) {
		reposted_held(ep, data, ctl);
		return;
	}
	ep->to_return += data;
	ep->ctl_to_return += ctl;
}

/* rdmamsg__ep_rx_unhold -- a held message is delivered: its credit goes
 * back (or, not yet withheld, is no longer due to be) */
void rdmamsg__ep_rx_unhold(struct rdmamsg_ep *ep)
{
	if (ep->rx_withheld) {
		ep->rx_withheld--;
		ep->to_return += ep->srq ? rdmamsg__srq_credit(ep) : 1;
	} else if (ep->rx_hold_due) {
		ep->rx_hold_due--;
	}
}

/* ep_lane_down -- the lane's up call: it failed */
static void ep_lane_down(void *owner, int status)
{
	rdmamsg__ep_down(owner, status);
}

/* ep_ready -- the lane's up call after its completions: backlog, credit
 * update, writable, the transfer layer, a close that waits */
static void ep_ready(void *owner)
{
	struct rdmamsg_ep *ep = owner;

	flush(ep);
	if (RDMAMSG_UNLIKELY(ep->xf || !list_empty(&ep->xwait_link)))
		rdmamsg__ep_xwait(ep);
	if (RDMAMSG_UNLIKELY(ep->closing))
		rdmamsg__ep_defer(ep);
}

/* the session's up calls, registered with every lane it opens */
const struct rdmamsg__lane_cbs rdmamsg__ep_lane_cbs = {
	.rx = ep_rx,
	.reposted = ep_reposted,
	.tx_done = ep_tx_done,
	.down = ep_lane_down,
	.ready = ep_ready,
};

/* the same for a lane whose receives come from a shared queue */
const struct rdmamsg__lane_cbs rdmamsg__ep_lane_cbs_shared = {
	.rx = ep_rx_shared,
	.reposted = ep_reposted,
	.tx_done = ep_tx_done,
	.down = ep_lane_down,
	.ready = ep_ready,
};

/* rdmamsg__ep_poll -- drain the context's CQ (this endpoint's completions
 * among them), once per progress pass however many endpoints ask */
void rdmamsg__ep_poll(struct rdmamsg_ep *ep)
{
	rdmamsg__iface_poll_after(ep->ctx, ep->ctx->ifc.pass);
	if (ep->ln)
		rdmamsg__iface_replay(ep->ln);
}

/* rdmamsg__ep_xwait -- keep visiting ep each pass while its backlog
 * (pump_stuck) or its transfer layer waits for what no completion of its
 * own announces (pool memory for a header, a FIN or a pull) */
void rdmamsg__ep_xwait(struct rdmamsg_ep *ep)
{
	int wait = ep->st == EPS_UP &&
		   (ep->bl_stuck || (ep->xf && (!list_empty(&ep->xf->fins) ||
						!list_empty(&ep->xf->pulls) ||
						!list_empty(&ep->xf->invs))));

	if (wait && list_empty(&ep->xwait_link))
		list_add_tail(&ep->ctx->xwait, &ep->xwait_link);
	else if (!wait)
		list_del(&ep->xwait_link);
	/* what it waits for: memory returned from here on makes
	 * rdmamsg_ctx_arm() ask for another pass (nothing else announces
	 * it) */
	if (wait)
		ep->ctx->xwait_used = ep->ctx->pool.in_use;
}

/* rdmamsg__ep_xwait_all -- a progress pass visits each session whose
 * transfer layer waits for pool memory (ctx->xwait), once */
void rdmamsg__ep_xwait_all(struct rdmamsg_ctx *ctx)
{
	struct rdmamsg__list *pos, *tmp;

	list_for_each_safe (pos, tmp, &ctx->xwait) {
		struct rdmamsg_ep *ep =
			container_of(pos, struct rdmamsg_ep, xwait_link);

		ep->bl_stuck = 0; /* pump() says again if it still is */
		flush(ep);
		rdmamsg__ep_xwait(ep);
	}
}

/* rdmamsg__ep_flush -- after polling: backlog, credit update, writable */
void rdmamsg__ep_flush(struct rdmamsg_ep *ep)
{
	flush(ep);
}

/* rdmamsg__ep_replay_pump -- pump() met the replay's mark (ep.c): post
 * the next fragment the peer did not receive (a credit and a send slot
 * are free), or take the mark out once all went; 1 when posting failed */
int rdmamsg__ep_replay_pump(struct rdmamsg_ep *ep)
{
	const struct rdmamsg__kept *k;

	if (ep->rp_next < ep->rp_end) {
		k = ep->kept[ep->rp_next & ep->kept_mask];
		if (post_frag(ep, k->h.type, k->h.flags, le32toh(k->h.imm),
			      le32toh(k->h.total), k->data, k->len, NULL, NULL,
			      NULL, 0, SIG_NEED))
			return 1;
		ep->credits--;
		ep->rp_next++;
		return 0;
	}
	ep->bl_head = ep->rp_mark.next;
	if (!ep->bl_head)
		ep->bl_tail = NULL;
	ep->rp_mark.next = NULL;
	return 0;
}

/* rndv_parse -- RDMAMSG_RNDV_THRESH: bytes, with an optional k, m or g
 * (binary) suffix; -EINVAL for anything else or out of range */
static int rndv_parse(const char *e, size_t *out)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	if (*e < '0' || *e > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(e, &end, 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	default:
		break;
	}
	if (*end || v > (RNDV_MAX >> shift))
		return -EINVAL;
	v <<= shift;
	if (v < RNDV_MIN)
		return -EINVAL;
	*out = (size_t)v;
	return 0;
}

/* env_bytes -- *out from environment variable name: bytes as
 * rndv_parse() takes them, or 0 (which means what zero says), def where
 * it is unset; -EINVAL (logged) for a bad value */
static int env_bytes(const char *name, size_t def, const char *zero,
		     size_t *out)
{
	const char *e = getenv(name);

	*out = def;
	if (e && !strcmp(e, "0")) {
		*out = 0;
	} else if (e && *e && rndv_parse(e, out)) {
		LOG_ERR("%s=%s: expected 0 (%s) or %zu to %zu bytes (suffix k, "
			"m or g allowed)",
			name, e, zero, RNDV_MIN, RNDV_MAX);
		return -EINVAL;
	}
	return 0;
}

/* rndv_caps -- the handshake capabilities of the rendezvous (rndv.c) ep
 * offers: RDMAMSG_HS_CAP_PIECE (it reads announcements in pieces) always,
 * RDMAMSG_HS_CAP_INV (it announces its windows XF_INV and answers such an
 * announcement with a FIN as SEND_WITH_INV) where it binds windows and
 * the device posts SEND_WITH_INV (the memory management extensions),
 * unless RDMAMSG_NO_SEND_INV=1 */
static uint32_t rndv_caps(const struct rdmamsg_ep *ep)
{
	const char *e = getenv("RDMAMSG_NO_SEND_INV");

	if ((e && *e && strcmp(e, "0")) || !rdmamsg__rndv_ep_mw(ep) ||
	    !(ep->ctx->dattr.device_cap_flags & IBV_DEVICE_MEM_MGT_EXTENSIONS))
		return RDMAMSG_HS_CAP_PIECE;
	return RDMAMSG_HS_CAP_INV | RDMAMSG_HS_CAP_PIECE;
}

/* rdmamsg__ep_proto_params -- the rendezvous threshold: the attribute's,
 * else RDMAMSG_RNDV_THRESH's, else 0 (the connection's default, chosen
 * with the peer: rdmamsg__ep_proto_set); the bound on rdmamsg_send()'s
 * rendezvous copies not yet read, RDMAMSG_COPY_AHEAD (rndv.c's
 * copy_full; "0": none), else COPY_AHEAD_DEFAULT; -EINVAL for a bad
 * environment value (the endpoint is not made) */
int rdmamsg__ep_proto_params(struct rdmamsg_ep *ep)
{
	const char *e;

	ep->rndv = SIZE_MAX; /* set when the peer's sizes are known */
	ep->eager_max = 0;
	e = getenv("RDMAMSG_NO_PACK");
	ep->caps = e && *e && strcmp(e, "0") ? 0 : RDMAMSG_HS_CAP_PACK;
	ep->caps |= rndv_caps(ep);
	if (env_bytes("RDMAMSG_COPY_AHEAD", COPY_AHEAD_DEFAULT, "no bound",
		      &ep->copy_ahead) ||
	    env_bytes("RDMAMSG_RNDV_PIECE", RNDV_PIECE_DEFAULT, "whole copies",
		      &ep->rndv_piece))
		return -EINVAL;
	if (ep->p.rndv_thresh)
		return 0;
	e = getenv("RDMAMSG_RNDV_THRESH");
	if (e && *e && rndv_parse(e, &ep->p.rndv_thresh)) {
		LOG_ERR("RDMAMSG_RNDV_THRESH=%s: expected %zu to %zu bytes "
			"(suffix k, m or g allowed)",
			e, RNDV_MIN, RNDV_MAX);
		return -EINVAL;
	}
	return 0;
}

/* rndv_default -- the threshold of a connection nobody set one for: the
 * same-host one to a peer on this host where the fabric's same-host sends
 * are shared memory, else RDMAMSG_RNDV_THRESH_DEFAULT */
static size_t rndv_default(const struct rdmamsg_ep *ep)
{
	if (rdmamsg__ep_shm_peer(ep))
		return RNDV_LOCAL_SHM;
	return RNDV_DEFAULT;
}

/* rdmamsg__ep_proto_set -- the negotiated protocol limits: rendezvous
 * above the threshold (at most the message maximum, up to which
 * fragments can carry a message), eager sends up to the smaller of the
 * eager size and the threshold.  A replay session re-sends what the peer
 * lacks fragment by fragment, while a pull in flight is lost with the
 * connection: it takes fragments up to the message maximum, on both
 * sides (sid: the connector's, and the accepted endpoint's, which has no
 * failover policy of its own). */
void rdmamsg__ep_proto_set(struct rdmamsg_ep *ep)
{
	size_t r = ep->p.rndv_thresh ? ep->p.rndv_thresh : rndv_default(ep);

	if (r > ep->max_msg || ep->sid)
		r = ep->max_msg;
	ep->rndv = r;
	ep->eager_max = ep->frag < r ? ep->frag : (uint32_t)r;
	/* packing when both offered it: at least two records a pack */
	ep->pack_max = 0;
	credit_due_set(ep);
	if (ep->caps & ep->peer_caps & RDMAMSG_HS_CAP_PACK) {
		uint32_t half = (pack_room(ep) / 2) & ~7u;

		ep->pack_max = half > RDMAMSG_PREC ? half - RDMAMSG_PREC : 0;
		if (ep->pack_max > RDMAMSG__PACK_MAX)
			ep->pack_max = RDMAMSG__PACK_MAX;
	}
}

/* rdmamsg_ep_get_pack_limit -- the longest message this connection packs */
RDMAMSG_EXPORT int rdmamsg_ep_get_pack_limit(const struct rdmamsg_ep *ep,
					     size_t *max)
{
	if (!ep || !max)
		return -EINVAL;
	if (!ep->max_msg)
		return -ENOTCONN; /* nothing negotiated yet */
	*max = ep->pack_max;
	return 0;
}

/* rdmamsg_ep_attr_set_rndv_threshold -- rendezvous above size bytes */
RDMAMSG_EXPORT int rdmamsg_ep_attr_set_rndv_threshold(
	struct rdmamsg_ep_attr *attr, size_t size)
{
	if (!attr || size < RNDV_MIN || size > RNDV_MAX)
		return -EINVAL;
	attr->p.rndv_thresh = size;
	return 0;
}

/* rdmamsg_ep_get_protocols -- the sizes at which rdmamsg_send() changes
 * protocol on this connection */
RDMAMSG_EXPORT int rdmamsg_ep_get_protocols(const struct rdmamsg_ep *ep,
					    struct rdmamsg_protocols *pr)
{
	if (!ep || !pr)
		return -EINVAL;
	if (!ep->max_msg)
		return -ENOTCONN; /* nothing negotiated yet */
	memset(pr, 0, sizeof(*pr));
	/* what goes inline is a whole message: at most the eager size */
	pr->max_inline =
		ep->max_inline > RDMAMSG_HDR ? ep->max_inline - RDMAMSG_HDR : 0;
	if (pr->max_inline > ep->eager_max)
		pr->max_inline = ep->eager_max;
	pr->eager = ep->eager_max;
	pr->rndv_threshold = ep->rndv;
	pr->max_msg = ep->max_msg;
	pr->max_large =
		ep->p.max_large > ep->max_msg ? ep->p.max_large : ep->max_msg;
	pr->rndv_window = rdmamsg__rndv_ep_mw(ep);
	pr->peer_local = ep->peer_local;
	return 0;
}

/* rdmamsg_ep_get_window -- the receive window now and its most
 * (grow_window) */
RDMAMSG_EXPORT int rdmamsg_ep_get_window(const struct rdmamsg_ep *ep,
					 uint32_t *now, uint32_t *max)
{
	if (!ep)
		return -EINVAL;
	if (!ep->max_msg)
		return -ENOTCONN; /* nothing negotiated yet */
	if (now)
		*now = ep->rx_win;
	if (max)
		*max = ep->rx_win_max;
	return 0;
}
