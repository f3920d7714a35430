/* SPDX-License-Identifier: MIT */
/*
 * session.c -- unit test of the session/lane contract (lib/lane.h): the
 * session (lib/ep.c, lib/msg.c, with the real pool and timers) driven
 * against a FAKE lane through the ops table, no device and no rdma_cm.
 * The fake records every down call and plays the lane's up calls.
 * Checked: the open attributes (ring lent, completions held on the active
 * side until the handshake is read), credits from a grant, sends (inline
 * header copied at post time; copied and zero-copy buffers the lane's
 * until tx_done, which completes in order and exactly once, a zero-copy
 * buffer going back to the pool only then), a refused post that takes
 * nothing, receives (delivered, reposted credit returned only once the
 * lane reports it reposted, recv_keep swapping the ring slot), a failure
 * reported up (the lane stopped with a drain request, on_disconnect
 * once), close (the drain completes, the lane destroyed exactly once,
 * the close callback once, every pool buffer back), and a session bound
 * again to a fresh lane after unbind; a backlog posted in batches
 * signals each batch's last send only (test_batch).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "dispatch.h"
#include "fastpath.h"
#include "handshake.h"
#include "xfer.h"
#include "tap.h"

/* ---- what the session needs from the rest of the library ----------- */

int rdmamsg__log_level = -1; /* quiet */

void rdmamsg__log(int level, const char *func, const char *fmt, ...)
{
	(void)level;
	(void)func;
	(void)fmt;
}

int rdmamsg__errno(int fallback)
{
	return errno > 0 ? -errno : -fallback;
}

const char *rdmamsg_strerror(int err)
{
	(void)err;
	return "error";
}

static int n_release, n_defer, n_unref, n_poll;

int rdmamsg__iface_poll(struct rdmamsg_ctx *ctx)
{
	(void)ctx;
	n_poll++;
	return 0;
}

void rdmamsg__iface_replay(struct rdmamsg__lane *lane)
{
	(void)lane;
}

void rdmamsg__iface_release(struct rdmamsg__lane *lane)
{
	lane->hold = 0;
	n_release++;
}

/* CQ room for a growing window: counted, or refused once (grow_full) */
static uint32_t cq_grown;
static int grow_full;

int rdmamsg__iface_grow(struct rdmamsg__lane *lane, uint32_t need)
{
	(void)lane;
	if (grow_full) {
		grow_full = 0;
		return -ENOBUFS;
	}
	cq_grown += need;
	return 0;
}

void rdmamsg__ctx_defer(struct rdmamsg_ctx *ctx, struct rdmamsg__list *link)
{
	(void)ctx;
	(void)link;
	n_defer++;
}

void rdmamsg__loop_ref(struct rdmamsg_ctx *ctx)
{
	(void)ctx;
}

void rdmamsg__loop_unref(struct rdmamsg_ctx *ctx)
{
	(void)ctx;
	n_unref++;
}

int rdmamsg__loop_timerfd_set(struct rdmamsg_ctx *ctx, uint64_t due_ns)
{
	(void)ctx;
	(void)due_ns;
	return 0;
}

int rdmamsg__cm_start_connect(struct rdmamsg_ep *ep, const struct sockaddr *d)
{
	(void)ep;
	(void)d;
	return -ENOSYS;
}

int rdmamsg__addr_parse(const char *addr, struct sockaddr_storage *ss)
{
	(void)addr;
	(void)ss;
	return -EINVAL;
}

void rdmamsg__srq_put(struct rdmamsg_srq *srq)
{
	(void)srq;
}

/* the session under test has no SRQ: its credit sharing is never asked */
void rdmamsg__srq_want(struct rdmamsg_ep *ep, uint32_t x)
{
	(void)ep;
	(void)x;
	abort();
}

void rdmamsg__srq_unlend(struct rdmamsg_ep *ep)
{
	(void)ep;
	abort();
}

uint32_t rdmamsg__srq_grant(struct rdmamsg_ep *ep)
{
	(void)ep;
	abort();
}

uint32_t rdmamsg__srq_credit(struct rdmamsg_ep *ep)
{
	(void)ep;
	abort();
}

void rdmamsg__xfer_slot_done(struct rdmamsg_ep *ep, uint32_t idx, int status)
{
	(void)ep;
	(void)idx;
	(void)status;
}

/* rma.c: no peer clock is ever named here (no handshake caps) */
int rdmamsg__alive_read(struct rdmamsg_ep *ep, uint64_t raddr, uint32_t rkey,
			void (*cb)(struct rdmamsg_ep *ep, int status,
				   uint64_t value, void *op_ctx))
{
	(void)ep;
	(void)raddr;
	(void)rkey;
	(void)cb;
	abort();
}

void rdmamsg__xfer_recv(struct rdmamsg_ep *ep, const void *data, size_t len)
{
	(void)ep;
	(void)data;
	(void)len;
}

/* rndv.c: no transfer layer here (ep->xf stays NULL) */
int rdmamsg__rndv_hold(struct rdmamsg_ep *ep, int kind, uint64_t req,
		       struct rdmamsg_buf *take, const void *data, size_t len,
		       uint32_t imm, unsigned int flags)
{
	(void)ep;
	(void)kind;
	(void)req;
	(void)take;
	(void)data;
	(void)len;
	(void)imm;
	(void)flags;
	return 0;
}

int rdmamsg__rndv_send(struct rdmamsg_ep *ep, int inner, uint64_t req,
		       const void *data, size_t len, struct rdmamsg_mr *mr,
		       struct rdmamsg_buf *zb, int xflags, uint32_t imm,
		       void *op_ctx, int report)
{
	(void)ep;
	(void)inner;
	(void)req;
	(void)data;
	(void)len;
	(void)mr;
	(void)zb;
	(void)xflags;
	(void)imm;
	(void)op_ctx;
	(void)report;
	abort();
}

int rdmamsg__rndv_ep_mw(const struct rdmamsg_ep *ep)
{
	(void)ep;
	return 0;
}

void rdmamsg__xfer_write_imm(struct rdmamsg_ep *ep, uint32_t imm, size_t len)
{
	(void)ep;
	(void)imm;
	(void)len;
}

void rdmamsg__xfer_flush(struct rdmamsg_ep *ep)
{
	(void)ep;
}

void rdmamsg__xfer_reconn_reset(struct rdmamsg_ep *ep)
{
	(void)ep;
}

void rdmamsg__xfer_posted(struct rdmamsg_ep *ep, const struct rdmamsg_buf *n)
{
	(void)ep;
	(void)n;
}

void rdmamsg__xfer_unsent(struct rdmamsg_ep *ep, const void *data, size_t len,
			  int status)
{
	(void)ep;
	(void)data;
	(void)len;
	(void)status;
}

int rdmamsg__xfer_unsettled(const struct rdmamsg_ep *ep)
{
	(void)ep;
	return 0;
}

void rdmamsg__xfer_down(struct rdmamsg_ep *ep, int status)
{
	(void)ep;
	(void)status;
}

void rdmamsg__xfer_free(struct rdmamsg_ep *ep)
{
	(void)ep;
}

/* not used here: the session is bound to the fake lane below */
const struct rdmamsg__lane_ops rdmamsg__lane_rc_ops = {.name = "rc (stub)"};
const struct rdmamsg__lane_ops rdmamsg__lane_dc_ops = {.name = "dc (stub)"};

/* lane_dc.c: only RC endpoints here */
int rdmamsg__dc_check(struct rdmamsg_ctx *ctx,
		      const struct rdmamsg__ep_params *p)
{
	(void)ctx;
	return p->transport == RDMAMSG_TRANSPORT_RC ? 0 : -ENOTSUP;
}

/* ---- a fake device for the pool ------------------------------------- */

static uint32_t next_key = 100;

static struct ibv_mr *fake_reg_mr(struct ibv_pd *pd, void *addr, size_t len,
				  int access)
{
	struct ibv_mr *mr = calloc(1, sizeof(*mr));

	(void)pd;
	(void)access;
	if (!mr)
		return NULL;
	mr->addr = addr;
	mr->length = len;
	mr->lkey = mr->rkey = next_key++;
	return mr;
}

static int fake_dereg_mr(struct ibv_mr *mr)
{
	free(mr);
	return 0;
}

static int fake_disconnect(struct rdma_cm_id *id)
{
	(void)id;
	return 0;
}

static struct rdmamsg__ops fake_verbs = {
	.name = "fake",
	.reg_mr = fake_reg_mr,
	.dereg_mr = fake_dereg_mr,
	.disconnect = fake_disconnect,
};

/* ---- the fake lane --------------------------------------------------- */

#define MAXPOST 64

struct post {
	uint64_t seq;
	unsigned int flags;
	int nsge;
	struct ibv_sge sge[2];
	uint8_t copy[64]; /* an inline send's bytes, copied at post time */
	uint32_t copy_len;
};

struct fake {
	struct rdmamsg__lane l;
	struct rdmamsg__lane_attr attr;
	struct post posts[MAXPOST];
	int nposts;
	uint32_t recvs_posted;
	/* grow_recvs: the ring's new buffers (each index counted), calls,
	 * the last batch */
	uint8_t grown[256];
	uint32_t ngrown, grow_calls, rx_batch;
	int fail_next; /* the next send returns this errno */
	int errors, drain, destroyed;
	uint64_t drain_seq;
};

static struct fake *fk;
static int n_open, n_destroy;
static const struct rdmamsg__lane_ops fake_ops;

static int fake_open(struct rdmamsg_ctx *ctx,
		     const struct rdmamsg__lane_attr *a,
		     const struct rdmamsg__lane_cbs *cbs, void *owner,
		     struct rdmamsg__lane **lane)
{
	struct fake *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->l.ops = &fake_ops;
	f->l.cbs = cbs;
	f->l.owner = owner;
	f->l.ctx = ctx;
	f->l.max_inline = 64;
	f->l.send_depth = a->send_depth;
	f->l.hold = a->hold;
	f->attr = *a;
	if (a->post_rx)
		f->recvs_posted = a->nrx;
	f->rx_batch = a->rx_batch;
	fk = f;
	n_open++;
	*lane = &f->l;
	return 0;
}

static int fake_send(struct rdmamsg__lane *lane, struct ibv_sge *sge, int nsge,
		     uint64_t seq, unsigned int flags)
{
	struct fake *f = (struct fake *)(void *)lane;
	struct post *p;
	int i;

	if (f->fail_next) {
		int e = f->fail_next;

		f->fail_next = 0;
		return e;
	}
	if (f->nposts == MAXPOST)
		return ENOMEM;
	p = &f->posts[f->nposts++];
	p->seq = seq;
	p->flags = flags;
	p->nsge = nsge;
	p->copy_len = 0;
	for (i = 0; i < nsge && i < 2; i++) {
		p->sge[i] = sge[i];
		if ((flags & RDMAMSG__TX_INLINE) &&
		    p->copy_len + sge[i].length <= sizeof(p->copy)) {
			memcpy(p->copy + p->copy_len,
			       (const void *)(uintptr_t)sge[i].addr,
			       sge[i].length);
			p->copy_len += sge[i].length;
		}
	}
	return 0;
}

static int fake_post(struct rdmamsg__lane *lane, struct ibv_send_wr *wr,
		     uint64_t seq)
{
	(void)lane;
	(void)wr;
	(void)seq;
	return EINVAL;
}

static int fake_post_recvs(struct rdmamsg__lane *lane, const uint32_t *idx,
			   uint32_t n)
{
	(void)idx;
	((struct fake *)(void *)lane)->recvs_posted += n;
	return 0;
}

static int fake_grow_recvs(struct rdmamsg__lane *lane, const uint32_t *idx,
			   uint32_t n, uint32_t rx_batch)
{
	struct fake *f = (struct fake *)(void *)lane;
	uint32_t i;

	for (i = 0; i < n; i++) {
		if (idx[i] >= sizeof(f->grown))
			return EINVAL;
		f->grown[idx[i]]++;
	}
	f->ngrown += n;
	f->grow_calls++;
	f->rx_batch = rx_batch;
	return 0;
}

static uint32_t fake_wcs(struct rdmamsg__lane *lane, const struct ibv_wc *wc,
			 uint32_t n)
{
	(void)lane;
	(void)wc;
	(void)n;
	return 0;
}

static int fake_error(struct rdmamsg__lane *lane, uint64_t seq, int drain)
{
	struct fake *f = (struct fake *)(void *)lane;

	lane->down = 1;
	f->errors++;
	if (drain && !f->drain) {
		f->drain = 1;
		f->drain_seq = seq;
		return 1;
	}
	return 0;
}

static void fake_destroy(struct rdmamsg__lane *lane)
{
	struct fake *f = (struct fake *)(void *)lane;

	n_destroy++;
	if (fk == f)
		fk = NULL;
	free(f);
}

static const struct rdmamsg__lane_ops fake_ops = {
	.name = "fake",
	.open = fake_open,
	.send = fake_send,
	.post = fake_post,
	.post_recvs = fake_post_recvs,
	.grow_recvs = fake_grow_recvs,
	.wcs = fake_wcs,
	.error = fake_error,
	.destroy = fake_destroy,
};

/* ---- the user's callbacks -------------------------------------------- */

static int n_connect, n_recv, n_disc, n_closed, disc_status;
static int sent[16], nsent, send_status[16];
static char got[64];
static size_t got_len;
static int keep_next;
static struct rdmamsg_buf *kept;

static void on_connect(struct rdmamsg_ep *ep, int status, int reason,
		       const void *pdata, size_t len, void *arg)
{
	(void)ep;
	(void)reason;
	(void)pdata;
	(void)len;
	(void)arg;
	if (!status)
		n_connect++;
}

/* every message delivered, in order: length, immediate, flags, first
 * byte (the packing checks) */
#define MAXLOG 256
static struct {
	size_t len;
	uint32_t imm;
	unsigned int flags;
	int first;
} rlog[MAXLOG];
static int nlog, close_after; /* close_after: close in the nth on_recv */
static void on_closed(struct rdmamsg_ep *ep, void *arg);

static void on_recv(struct rdmamsg_ep *ep, void *data, size_t len, uint32_t imm,
		    unsigned int flags, void *arg)
{
	(void)arg;
	if (nlog < MAXLOG) {
		rlog[nlog].len = len;
		rlog[nlog].imm = imm;
		rlog[nlog].flags = flags;
		rlog[nlog].first = len ? ((unsigned char *)data)[0] : -1;
		nlog++;
	}
	if (close_after && nlog == close_after)
		rdmamsg_ep_close(ep, on_closed);
	n_recv++;
	got_len = len < sizeof(got) ? len : sizeof(got);
	memcpy(got, data, got_len);
	if (keep_next) {
		keep_next = 0;
		if (rdmamsg_recv_keep(ep, &kept))
			kept = NULL;
	}
}

static int pack_sent[MAXLOG], pack_status[MAXLOG], npack_sent;

static void on_send(struct rdmamsg_ep *ep, int status, void *op_ctx, void *arg)
{
	(void)ep;
	(void)arg;
	if (npack_sent < MAXLOG) {
		pack_status[npack_sent] = status;
		pack_sent[npack_sent++] = (int)(intptr_t)op_ctx;
	}
	if (nsent < 16) {
		send_status[nsent] = status;
		sent[nsent++] = (int)(intptr_t)op_ctx;
	}
}

static void on_disconnect(struct rdmamsg_ep *ep, int status, void *arg)
{
	(void)ep;
	(void)arg;
	n_disc++;
	disc_status = status;
}

static void on_closed(struct rdmamsg_ep *ep, void *arg)
{
	(void)ep;
	(void)arg;
	n_closed++;
}

static const struct rdmamsg_ep_cbs cbs = {
	.on_connect = on_connect,
	.on_recv = on_recv,
	.on_send = on_send,
	.on_disconnect = on_disconnect,
};

/* ---- helpers ---------------------------------------------------------- */

static struct rdmamsg_ctx ctx;

/* incoming -- the fake lane reports one receive in ring slot idx: a
 * header (type, flags, credits) and payload; returns rx()'s answer */
static int incoming(struct rdmamsg_ep *ep, uint32_t idx, uint8_t type,
		    uint8_t flags, uint16_t credits, uint8_t ctl,
		    const void *data, uint32_t len)
{
	struct rdmamsg_buf *b = ep->rxb[idx];
	struct rdmamsg__wire *h =
		(struct rdmamsg__wire *)(b->data - RDMAMSG_HDR);
	memset(h, 0, sizeof(*h));
	h->type = type;
	h->flags = flags;
	h->credits = htole16(credits);
	h->total = htole32(len);
	h->ctl = ctl;
	if (len)
		memcpy(b->data, data, len);
	return fk->l.cbs->rx(fk->l.owner, &ep->rxb[idx], RDMAMSG_HDR + len, 0,
			     0);
}

/* up_session -- an active session bound to a fresh fake lane, up, its
 * peer offering caps, granted 8 data and 3 control credits */
static struct rdmamsg_ep *up_session(uint32_t caps)
{
	struct rdmamsg_ep *ep;

	if (rdmamsg__ep_new(&ctx, NULL, &cbs, NULL, &ep) ||
	    rdmamsg__ep_rx_fill(ep))
		bail_out("ep_new");
	rdmamsg__ep_set_state(ep, EPS_RESOLVING);
	if (rdmamsg__ep_bind(ep, &fake_ops) || !fk)
		bail_out("bind");
	rdmamsg__ep_set_state(ep, EPS_CONNECTING);
	ep->peer_caps = caps;
	rdmamsg__ep_negotiate(ep, 8, 8192, 1 << 20);
	rdmamsg__ep_connected(ep, NULL, 0);
	if (incoming(ep, 0, W_CREDIT, 0, 8, 3, NULL, 0) != RDMAMSG__RX_CTL)
		bail_out("grant");
	fk->l.cbs->reposted(fk->l.owner, 0, 1);
	return ep;
}

/* wire_of -- the bytes (header and payload) the fake lane was handed in
 * post p, into out (at most cap); their length */
static uint32_t wire_of(const struct post *p, uint8_t *out, uint32_t cap)
{
	uint32_t n = 0;
	int i;

	if (p->flags & RDMAMSG__TX_INLINE) {
		memcpy(out, p->copy, p->copy_len);
		return p->copy_len;
	}
	for (i = 0; i < p->nsge; i++) {
		if (n + p->sge[i].length > cap)
			bail_out("wire_of");
		memcpy(out + n, (const void *)(uintptr_t)p->sge[i].addr,
		       p->sge[i].length);
		n += p->sge[i].length;
	}
	return n;
}

/* arrive -- the bytes w (a header and its payload, len in all) land in
 * ring slot idx of ep, the credits in the header taken out (they are the
 * sender's peer's, not ep's); rx()'s answer */
static int arrive(struct rdmamsg_ep *ep, struct fake *lane, uint32_t idx,
		  const uint8_t *w, uint32_t len)
{
	struct rdmamsg_buf *b = ep->rxb[idx];
	struct rdmamsg__wire *h =
		(struct rdmamsg__wire *)(b->data - RDMAMSG_HDR);

	memcpy(h, w, len);
	h->credits = 0;
	h->ctl = 0;
	return lane->l.cbs->rx(lane->l.owner, &ep->rxb[idx], len, 0, 0);
}

/* pack_of -- a W_PACK of the n messages lens[] (byte i of message k is
 * k + i), immediates imms[] (0: none), into w; its length */
static uint32_t pack_of(uint8_t *w, const uint32_t *lens, const uint32_t *imms,
			uint32_t n)
{
	struct rdmamsg__wire *h = (struct rdmamsg__wire *)(void *)w;
	uint32_t off = RDMAMSG_HDR, k, i;

	memset(h, 0, sizeof(*h));
	h->type = W_PACK;
	h->total = htole32(n);
	for (k = 0; k < n; k++) {
		struct rdmamsg__prec r = {
			.len = htole16((uint16_t)lens[k]),
			.flags = imms[k] ? F_IMM : 0,
			.imm = htole32(imms[k]),
		};

		memcpy(w + off, &r, RDMAMSG_PREC);
		memset(w + off + RDMAMSG_PREC, 0,
		       rdmamsg__prec_span(lens[k]) - RDMAMSG_PREC);
		for (i = 0; i < lens[k]; i++)
			w[off + RDMAMSG_PREC + i] = (uint8_t)(k + i);
		off += rdmamsg__prec_span(lens[k]);
	}
	return off;
}

/*
 * test_pack -- packing (proto.h W_PACK): small messages that queue for
 * want of credits go packed, mixed sizes and immediates, the packing
 * limit +-1 byte, a zero-copy one and one above the limit each alone and
 * in order; a second session takes the very bytes posted and delivers
 * every message once, in order, with its length, immediate and bytes;
 * rdmamsg_recv_keep() of a packed one gives a copy; on_send reports each
 * once, in order; a peer without packing gets none; a close with packs
 * queued cancels each message once; malformed or unnegotiated packs are
 * refused whole; a close inside a pack delivers no more of it.
 */
static void test_pack(void)
{
	static uint8_t w[8192 + 64], big[1100];
	struct rdmamsg_ep *a, *b;
	struct fake *fa, *fb;
	struct rdmamsg_buf *zb;
	size_t lim = 0;
	uint32_t i, n, idx = 1, lens[8], imms[8];
	int r, bad = 0, ops = 0, expect;
	const struct rdmamsg__wire *h;

	a = up_session(RDMAMSG_HS_CAP_PACK);
	fa = fk;
	ok(rdmamsg_ep_get_pack_limit(a, &lim) == 0 && lim == 1024,
	   "pack: both offered it, messages up to 1024 bytes pack");
	/* use the 8 credits: these go at once, one send each */
	nsent = npack_sent = 0;
	for (i = 0; i < 8; i++)
		rdmamsg_send(a, "s", 1, (void *)(intptr_t)++ops);
	ok(fa->nposts == 8 && a->credits == 0, "8 sends use the 8 credits");
	/* queued: 0, 1 (imm), 7, 8 (imm), 1024 bytes pack; 1025 bytes and a
	 * zero-copy send go alone; then 129 of 9 bytes: 128 fill a pack */
	for (i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7);
	r = rdmamsg_send(a, big, 0, (void *)(intptr_t)++ops);
	r |= rdmamsg_send_imm(a, big, 1, 0xabc, (void *)(intptr_t)++ops);
	r |= rdmamsg_send(a, big, 7, (void *)(intptr_t)++ops);
	r |= rdmamsg_send_imm(a, big, 8, 0xdef, (void *)(intptr_t)++ops);
	r |= rdmamsg_send(a, big, 1024, (void *)(intptr_t)++ops);
	r |= rdmamsg_send(a, big, 1025, (void *)(intptr_t)++ops);
	if (rdmamsg_buf_alloc(&ctx, 16, &zb))
		bail_out("buf_alloc");
	memcpy(zb->data, "zero-copy", 9);
	r |= rdmamsg_send_buf(a, zb, 9, (void *)(intptr_t)++ops);
	for (i = 0; i < 129; i++) {
		big[0] = (uint8_t)i;
		r |= rdmamsg_send(a, big, 9, (void *)(intptr_t)++ops);
	}
	ok(r == 0 && fa->nposts == 8 && a->bl_count == 136,
	   "136 messages queued without credits, nothing posted");
	/* the peer returns 8 credits: 5 sends carry the 136 */
	r = incoming(a, 1, W_CREDIT, 0, 8, 0, NULL, 0);
	fa->l.cbs->reposted(fa->l.owner, 0, 1);
	fa->l.cbs->ready(fa->l.owner);
	ok(r == RDMAMSG__RX_CTL && fa->nposts == 13 && a->bl_count == 0 &&
		   a->credits == 3,
	   "8 credits back: 5 sends (3 packs, 2 alone) carry the 136, "
	   "one credit each");
	h = (const struct rdmamsg__wire *)(uintptr_t)fa->posts[8].sge[0].addr;
	ok(h->type == W_PACK && le32toh(h->total) == 5 && !h->flags &&
		   !(fa->posts[8].flags & RDMAMSG__TX_SIGNAL) &&
		   (fa->posts[12].flags & RDMAMSG__TX_SIGNAL),
	   "the first: a W_PACK of 5, the lane's until the batch's last "
	   "send, the one signalled, is done");

	/* a second session takes the very bytes, in order */
	b = up_session(RDMAMSG_HS_CAP_PACK);
	fb = fk;
	nlog = 0;
	for (i = 0; i < 13; i++) {
		n = wire_of(&fa->posts[i], w, sizeof(w));
		if (i == 11)
			keep_next = 1; /* the first streamed one, packed */
		r = arrive(b, fb, idx, w, n);
		if (r != RDMAMSG__RX_DATA)
			bad++;
		if (i == 11) {
			uint8_t e[9] = {0, 7, 14, 21, 28, 35, 42, 49, 56};

			ok(kept && b->rxb[idx] && kept != b->rxb[idx] &&
				   rlog[15].len == 9 &&
				   !memcmp(kept->data, e, 9),
			   "recv_keep of a packed message: a pool copy of "
			   "its bytes, the ring buffer stays");
			if (kept)
				rdmamsg_buf_free(kept);
			kept = NULL;
		}
		idx = idx % 8 + 1;
		fb->l.cbs->reposted(fb->l.owner, 1, 0);
	}
	is_int(nlog, 144, "144 messages delivered, each once");
	expect = 0;
	for (i = 0; i < 8; i++)
		if (rlog[i].len != 1 || rlog[i].first != 's' || rlog[i].flags)
			expect++;
	ok(!expect && rlog[8].len == 0 && !rlog[8].flags && rlog[9].len == 1 &&
		   rlog[9].imm == 0xabc && rlog[9].flags == RDMAMSG_RECV_IMM &&
		   rlog[10].len == 7 && !rlog[10].flags && rlog[11].len == 8 &&
		   rlog[11].imm == 0xdef && rlog[12].len == 1024 &&
		   rlog[12].first == 0 && rlog[13].len == 1025 &&
		   rlog[14].len == 9 && rlog[14].first == 'z',
	   "in order, each with its own length, immediate and flags");
	for (i = 0; i < 129; i++)
		if (rlog[15 + i].len != 9 || rlog[15 + i].first != (int)i)
			expect++;
	ok(!expect && b->st == EPS_UP, "the 129 streamed ones in order");
	/* every send done: on_send for each message once, in order */
	fa->l.cbs->tx_done(fa->l.owner, 12, 0);
	for (i = 0; i < (uint32_t)npack_sent; i++)
		if (pack_sent[i] != (int)i + 1 || pack_status[i])
			expect++;
	ok(npack_sent == ops && !expect,
	   "on_send: each of the %d messages once, in order", ops);

	/* malformed packs are refused whole: nothing delivered */
	lens[0] = 3;
	lens[1] = 5;
	imms[0] = imms[1] = 0;
	n = pack_of(w, lens, imms, 2);
	nlog = 0;
	((struct rdmamsg__wire *)(void *)w)->total = htole32(3);
	r = arrive(b, fb, 1, w, n);
	ok(r == 0 && nlog == 0 && b->st == EPS_DOWN,
	   "a pack that announces more records than it has: closed, "
	   "nothing delivered");
	rdmamsg__ep_free(b);
	b = up_session(RDMAMSG_HS_CAP_PACK);
	fb = fk;
	n = pack_of(w, lens, imms, 2);
	w[RDMAMSG_HDR] = 0xff; /* the first record's length past the end */
	w[RDMAMSG_HDR + 1] = 0x03;
	r = arrive(b, fb, 1, w, n);
	ok(r == 0 && nlog == 0 && b->st == EPS_DOWN,
	   "a record longer than the pack: closed, nothing delivered");
	rdmamsg__ep_free(b);
	b = up_session(0);
	fb = fk;
	n = pack_of(w, lens, imms, 2);
	r = arrive(b, fb, 1, w, n);
	ok(r == 0 && nlog == 0 && b->st == EPS_DOWN,
	   "a pack where packing was not negotiated: closed");
	rdmamsg__ep_free(b);

	/* a close inside a pack delivers no more of it */
	b = up_session(RDMAMSG_HS_CAP_PACK);
	fb = fk;
	for (i = 0; i < 5; i++) {
		lens[i] = i + 1;
		imms[i] = i;
	}
	n = pack_of(w, lens, imms, 5);
	close_after = 2;
	r = arrive(b, fb, 1, w, n);
	close_after = 0;
	ok(r == RDMAMSG__RX_DATA && nlog == 2 && rlog[1].len == 2 &&
		   rlog[1].imm == 1 && b->st != EPS_UP,
	   "closed in the second of 5 packed messages: 3 not delivered");
	rdmamsg__ep_free(b);
	rdmamsg__ep_free(a);

	/* a peer without packing: the queued ones go one by one */
	a = up_session(0);
	fa = fk;
	ok(rdmamsg_ep_get_pack_limit(a, &lim) == 0 && lim == 0,
	   "no packing: the peer did not offer it");
	for (i = 0; i < 11; i++) /* 0 bytes too: not packed either */
		rdmamsg_send(a, "q", i % 2, NULL);
	r = incoming(a, 1, W_CREDIT, 0, 3, 0, NULL, 0);
	fa->l.cbs->ready(fa->l.owner);
	for (i = 8, expect = 0; i < (uint32_t)fa->nposts; i++)
		if (((const struct rdmamsg__wire *)fa->posts[i].copy)->type !=
		    W_DATA)
			expect++;
	ok(fa->nposts == 11 && !expect, "3 credits: 3 plain W_DATA sends");
	rdmamsg__ep_free(a);

	/* closed with packs queued: each message cancelled once */
	a = up_session(RDMAMSG_HS_CAP_PACK);
	fa = fk;
	for (i = 0; i < 8; i++)
		rdmamsg_send(a, "s", 1, NULL);
	npack_sent = 0;
	for (i = 0; i < 200; i++)
		rdmamsg_send(a, "p", 1, (void *)(intptr_t)(i + 1));
	rdmamsg__ep_cancel_backlog(a, -ECANCELED);
	rdmamsg__ep_cancel_backlog(a, -ECANCELED);
	for (i = 0, expect = 0; i < (uint32_t)npack_sent; i++)
		if (pack_sent[i] != (int)i + 1 || pack_status[i] != -ECANCELED)
			expect++;
	ok(npack_sent == 200 && !expect,
	   "a backlog of 2 packs cancelled: each of 200 once, in order");
	rdmamsg__ep_free(a);
}

/* test_batch -- queued messages that pump() posts in one call: only the
 * batch's last send is signalled (the others' buffers and reports come
 * with it: RC completes in order), whether the batch ends with the
 * backlog or with the credits; tx_done of the last reports every message
 * once, in order, and gives every buffer back */
static void test_batch(void)
{
	struct rdmamsg_ep *a = up_session(0);
	struct fake *fa = fk;
	char big[200];
	size_t in_use, per;
	uint32_t i, bad = 0;
	int r;

	memset(big, 'b', sizeof(big));
	for (i = 0; i < 8; i++) /* the 8 credits, at once */
		rdmamsg_send(a, "s", 1, NULL);
	fa->l.cbs->tx_done(fa->l.owner, 7, 0);
	in_use = ctx.pool.in_use;
	npack_sent = 0;
	for (i = 0; i < 5; i++) /* above the inline size: pool copies */
		bad += rdmamsg_send(a, big, sizeof(big),
				    (void *)(intptr_t)(i + 1)) != 0;
	per = (ctx.pool.in_use - in_use) / 5; /* bytes of one buffer */
	ok(!bad && fa->nposts == 8 && per > 0 &&
		   ctx.pool.in_use == in_use + 5 * per,
	   "batch: 5 messages of 200 B queued for credits, each a buffer");
	r = incoming(a, 1, W_CREDIT, 0, 3, 0, NULL, 0);
	fa->l.cbs->ready(fa->l.owner);
	ok(r == RDMAMSG__RX_CTL && fa->nposts == 11 &&
		   !(fa->posts[8].flags & RDMAMSG__TX_SIGNAL) &&
		   !(fa->posts[9].flags & RDMAMSG__TX_SIGNAL) &&
		   (fa->posts[10].flags & RDMAMSG__TX_SIGNAL),
	   "3 credits: 3 sends, only the last signalled (credits end the "
	   "batch)");
	r = incoming(a, 2, W_CREDIT, 0, 5, 0, NULL, 0);
	fa->l.cbs->ready(fa->l.owner);
	in_use = ctx.pool.in_use; /* the batches' header slots taken too */
	ok(r == RDMAMSG__RX_CTL && fa->nposts == 13 &&
		   !(fa->posts[11].flags & RDMAMSG__TX_SIGNAL) &&
		   (fa->posts[12].flags & RDMAMSG__TX_SIGNAL),
	   "5 more credits: the 2 left, the last signalled (the backlog "
	   "ends the batch)");
	ok(npack_sent == 0, "nothing reported before a completion");
	fa->l.cbs->tx_done(fa->l.owner, (uint32_t)fa->posts[10].seq, 0);
	ok(npack_sent == 3 && pack_sent[0] == 1 && pack_sent[2] == 3 &&
		   ctx.pool.in_use == in_use - 3 * per,
	   "the first batch's signalled send done: its 3 reported in order, "
	   "their buffers back");
	fa->l.cbs->tx_done(fa->l.owner, (uint32_t)fa->posts[12].seq, 0);
	for (i = 0; i < 5 && i < (uint32_t)npack_sent; i++)
		if (pack_sent[i] != (int)i + 1 || pack_status[i])
			bad++;
	ok(npack_sent == 5 && !bad && ctx.pool.in_use == in_use - 5 * per,
	   "and the second's: each of the 5 once, in order, every buffer "
	   "back");
	rdmamsg__ep_free(a);
}

/* arrive_data -- n one-byte data messages land in ep's ring, nothing
 * reposted yet; then the progress pass.  How many rx() delivered */
static uint32_t arrive_data(struct rdmamsg_ep *ep, struct fake *f, uint32_t n)
{
	uint32_t i, k = 0;

	for (i = 0; i < n; i++)
		k += incoming(ep, 1 + i % 30, W_DATA, F_FIRST | F_LAST, 0, 0,
			      "d", 1) == RDMAMSG__RX_DATA;
	f->l.cbs->ready(f->l.owner);
	return k;
}

/* last_credits -- the data credits in the last post, if it is a credit
 * update; -1 if not */
static int last_credits(const struct fake *f)
{
	const struct rdmamsg__wire *h;

	if (!f->nposts)
		return -1;
	h = (const struct rdmamsg__wire *)f->posts[f->nposts - 1].copy;
	return h->type == W_CREDIT ? le16toh(h->credits) : -1;
}

/*
 * test_grow -- the receive window (msg.c grow_window): toward a peer that
 * offered RDMAMSG_HS_CAP_GROW, each time it has used every credit the
 * window doubles up to the maximum, the ring's new buffers posted once
 * each (their CQ room reserved) and granted in the next credit update;
 * not past the maximum, not without CQ room (its buffers back to the
 * pool, tried again the next time), not toward a peer that did not offer
 * it; after a reconnect the ring's buffers are granted again before new
 * ones; and credits from a peer are taken up to the maximum it named,
 * not past it.
 */
static void test_grow(void)
{
	const uint32_t grow = RDMAMSG_HS_CAP_GROW;
	struct rdmamsg_ep *a = up_session(grow | 128u << RDMAMSG_HS_GROW_SHIFT);
	struct fake *fa = fk;
	uint32_t now = 0, max = 0, i, bad = 0, cq_before;
	size_t in_use;
	int ret;

	ret = rdmamsg_ep_get_window(a, &now, &max);
	ok(ret == 0 && now == 32 && max == 128,
	   "grow: the window starts at the depth, 32, and may grow to 128");
	cq_grown = 0;
	ok(arrive_data(a, fa, 31) == 31 && fa->grow_calls == 0,
	   "31 messages of 32 credits: the window stays");
	ok(arrive_data(a, fa, 1) == 1 && fa->grow_calls == 1 &&
		   fa->ngrown == 32 && cq_grown == 32,
	   "the 32nd: 32 more buffers posted, their CQ room reserved");
	for (i = 0; i < sizeof(fa->grown); i++)
		bad += fa->grown[i] != (i >= 35 && i < 67);
	rdmamsg_ep_get_window(a, &now, NULL);
	ok(!bad && now == 64 && a->nrx == 67,
	   "each new ring index (35 to 66) posted once; the window 64");
	ok(fa->rx_batch == 15, "reposts batched for the window: 64 / 4 - 1");
	is_int(last_credits(fa), 32, "the 32 granted in a credit update");
	fa->l.cbs->reposted(fa->l.owner, 32, 0);
	fa->l.cbs->ready(fa->l.owner);
	is_int(last_credits(fa), 32, "the 32 reposted come back");
	ok(arrive_data(a, fa, 64) == 64 && fa->grow_calls == 3 &&
		   fa->ngrown == 96 && cq_grown == 96,
	   "64 more, the window used whole: 64 buffers more, in two posts");
	rdmamsg_ep_get_window(a, &now, NULL);
	ok(now == 128 && a->nrx == 131 && fa->rx_batch == 16,
	   "the window 128, the most (the batch at RDMAMSG_RX_BATCH_MAX)");
	is_int(last_credits(fa), 64, "the 64 granted");
	fa->l.cbs->reposted(fa->l.owner, 64, 0);
	fa->l.cbs->ready(fa->l.owner);
	ok(arrive_data(a, fa, 128) == 128 && fa->grow_calls == 3 &&
		   fa->ngrown == 96,
	   "128 more: at the most, no growth");
	/* a reconnect: the window starts again at the depth, and the ring's
	 * buffers past it are granted again before new ones are taken */
	rdmamsg__ep_reconn_reset(a);
	rdmamsg_ep_get_window(a, &now, NULL);
	is_int(now, 32, "reconnect: the window at the depth again");
	cq_before = cq_grown;
	in_use = ctx.pool.in_use;
	ok(arrive_data(a, fa, 32) == 32 && fa->grow_calls == 4 &&
		   fa->ngrown == 96 && cq_grown == cq_before &&
		   ctx.pool.in_use == in_use && fa->rx_batch == 15,
	   "used whole again: the ring's buffers granted, none new "
	   "(the batch follows)");
	rdmamsg_ep_get_window(a, &now, NULL);
	is_int(now, 64, "...the window 64");
	rdmamsg__ep_free(a);

	/* no CQ room: nothing taken, the next pass tries again */
	a = up_session(grow | 128u << RDMAMSG_HS_GROW_SHIFT);
	fa = fk;
	in_use = ctx.pool.in_use;
	grow_full = 1;
	arrive_data(a, fa, 32);
	rdmamsg_ep_get_window(a, &now, NULL);
	ok(now == 32 && fa->ngrown == 0 && a->nrx == 35 && !a->rxb[35] &&
		   ctx.pool.in_use == in_use,
	   "no CQ room: the window stays, its buffers back in the pool");
	fa->l.cbs->ready(fa->l.owner);
	rdmamsg_ep_get_window(a, &now, NULL);
	ok(now == 64 && fa->ngrown == 32,
	   "the next pass, the peer still dry: the window grows");
	rdmamsg__ep_free(a);

	/* a peer that packs: its queue moves a pack a credit, the window
	 * stays; once it sends unpacked again, it grows */
	a = up_session(grow | RDMAMSG_HS_CAP_PACK |
		       128u << RDMAMSG_HS_GROW_SHIFT);
	fa = fk;
	{
		static const uint32_t lens[3] = {8, 8, 8}, imms[3];
		uint8_t w[256];
		uint32_t n = pack_of(w, lens, imms, 3);

		for (i = 0; i < 31; i++)
			incoming(a, 1 + i % 30, W_DATA, F_FIRST | F_LAST, 0, 0,
				 "d", 1);
		ok(arrive(a, fa, 31, w, n) == RDMAMSG__RX_DATA,
		   "a packing peer: 31 messages and a pack take the 32 "
		   "credits");
	}
	fa->l.cbs->ready(fa->l.owner);
	rdmamsg_ep_get_window(a, &now, NULL);
	ok(now == 32 && fa->grow_calls == 0,
	   "...the window stays at 32 (a pack came)");
	fa->l.cbs->reposted(fa->l.owner, 32, 0);
	fa->l.cbs->ready(fa->l.owner);
	arrive_data(a, fa, 32);
	rdmamsg_ep_get_window(a, &now, NULL);
	ok(now == 64 && fa->grow_calls == 1,
	   "32 unpacked messages next: the window grows to 64");
	rdmamsg__ep_free(a);

	/* a peer that did not offer it: the window stays */
	a = up_session(0);
	fa = fk;
	arrive_data(a, fa, 32);
	rdmamsg_ep_get_window(a, &now, &max);
	ok(now == 32 && max == 32 && fa->grow_calls == 0,
	   "a peer without RDMAMSG_HS_CAP_GROW: the window stays at 32");
	rdmamsg__ep_free(a);

	/* the attributes: a depth set alone is a fixed window */
	{
		struct rdmamsg_ep_attr *at = NULL;
		struct rdmamsg_ep *e;

		if (rdmamsg_ep_attr_new(&at))
			bail_out("attr_new");
		ok(rdmamsg_ep_attr_set_recv_depth_max(at, 1) == -EINVAL &&
			   rdmamsg_ep_attr_set_recv_depth_max(at, 4097) ==
				   -EINVAL &&
			   rdmamsg_ep_attr_set_recv_depth_max(NULL, 64) ==
				   -EINVAL,
		   "recv_depth_max: 1, 4097 and NULL are -EINVAL");
		rdmamsg_ep_attr_set_recv_depth(at, 16);
		if (rdmamsg__ep_new(&ctx, at, &cbs, NULL, &e))
			bail_out("ep_new");
		ok(e->nrx_max == e->nrx && e->nrx == 19,
		   "a depth of 16 set alone: a ring of 19 that never grows");
		rdmamsg__ep_free(e);
		rdmamsg_ep_attr_set_recv_depth_max(at, 64);
		rdmamsg_ep_attr_set_recv_depth(at, 8); /* the maximum stays */
		if (rdmamsg__ep_new(&ctx, at, &cbs, NULL, &e))
			bail_out("ep_new");
		ok(e->nrx == 11 && e->nrx_max == 67 &&
			   (e->caps >> RDMAMSG_HS_GROW_SHIFT &
			    RDMAMSG_HS_GROW_MASK) == 64 &&
			   (e->caps & RDMAMSG_HS_CAP_GROW),
		   "depth 8, maximum 64: a ring of 11 that may grow to 67, "
		   "64 offered in the handshake");
		rdmamsg__ep_free(e);
		rdmamsg_ep_attr_delete(&at);
	}

	/* credits a peer may grant: up to the maximum it named */
	a = up_session(grow | 16u << RDMAMSG_HS_GROW_SHIFT);
	disc_status = 0;
	incoming(a, 1, W_CREDIT, 0, 8, 0, NULL, 0);
	ok(a->st == EPS_UP && a->credits == 16,
	   "a peer of depth 8 that may grow to 16: 16 credits taken");
	incoming(a, 2, W_CREDIT, 0, 1, 0, NULL, 0);
	ok(a->st != EPS_UP && disc_status == -EPROTO,
	   "one more: the connection ends with -EPROTO");
	rdmamsg__ep_free(a);
	a = up_session(0);
	incoming(a, 1, W_CREDIT, 0, 1, 0, NULL, 0);
	ok(a->st != EPS_UP && disc_status == -EPROTO,
	   "a peer without it: one past its depth of 8 ends it");
	rdmamsg__ep_free(a);
}

int main(void)
{
	struct rdmamsg_ep *ep;
	struct rdmamsg_buf *zb, *slot_before;
	const struct rdmamsg__wire *h;
	struct post *p;
	int r, ret;
	uint32_t credits_before;
	uint64_t head_before;

	memset(&ctx, 0, sizeof(ctx));
	ctx.ops = &fake_verbs;
	ctx.pd = (struct ibv_pd *)&ctx; /* the fake ignores it */
	if (rdmamsg__pool_init(&ctx, (size_t)64 << 20, 0))
		bail_out("pool_init");
	rdmamsg__timers_init(&ctx.timers);

	/* an active session, its receive ring from the pool */
	if (rdmamsg__ep_new(&ctx, NULL, &cbs, NULL, &ep) ||
	    rdmamsg__ep_rx_fill(ep))
		bail_out("ep_new");
	ok(ep->ln == NULL && ep->st == EPS_IDLE, "a new session has no lane");
	rdmamsg__ep_set_state(ep, EPS_RESOLVING);

	/* bind: the fake lane gets the ring and holds completions */
	ret = rdmamsg__ep_bind(ep, &fake_ops);
	if (ret || !fk)
		bail_out("bind");
	ok(fk->attr.rxb == ep->rxb && fk->attr.nrx == ep->nrx &&
		   fk->attr.send_depth == ep->p.send_depth &&
		   fk->attr.post_rx && fk->recvs_posted == ep->nrx &&
		   fk->attr.srq == NULL,
	   "open: the ring is lent to the lane and posted (active side)");
	ok(fk->l.hold == 1 && fk->l.owner == ep,
	   "open: an active lane holds completions; up calls carry the "
	   "session");
	ok(ep->max_inline == 64, "the session caches the lane's inline size");
	is_int(rdmamsg__ep_bind(ep, &fake_ops), -EBUSY,
	       "a second bind while bound: -EBUSY");
	is_int(rdmamsg_send(ep, "x", 1, NULL), -ENOTCONN,
	       "no send before UP, nothing posted");
	is_int(fk->nposts, 0, "...the lane saw nothing");

	/* connecting -> up: the hold is released */
	rdmamsg__ep_set_state(ep, EPS_CONNECTING);
	ok(fk->l.hold == 1 && n_release == 0, "still held while CONNECTING");
	rdmamsg__ep_negotiate(ep, 8, 8192, 1 << 20);
	rdmamsg__ep_connected(ep, NULL, 0);
	ok(ep->st == EPS_UP && n_connect == 1, "up, on_connect once");
	ok(fk->l.hold == 0 && n_release == 1,
	   "the lane's held completions released once, at UP");

	/* the passive side's grant arrives: a control receive */
	r = incoming(ep, 0, W_CREDIT, 0, 8, 3, NULL, 0);
	ok(r == RDMAMSG__RX_CTL && ep->credits == 8 && ep->ctl_credits == 3,
	   "a grant: 8 data and 3 control credits; rx() asks a control "
	   "repost");
	ok(ep->ctl_to_return == 0,
	   "its credit is not returned before the lane reposts it");
	fk->l.cbs->reposted(fk->l.owner, 0, 1);
	ok(ep->ctl_to_return == 1, "reposted(): the control credit is owed");

	/* an inline send: the header copied at post time */
	ret = rdmamsg_send(ep, "hello", 5, (void *)(intptr_t)1);
	p = &fk->posts[0];
	h = (const struct rdmamsg__wire *)p->copy;
	ok(ret == 0 && fk->nposts == 1 && p->seq == 0 &&
		   (p->flags & RDMAMSG__TX_INLINE) && p->nsge == 1 &&
		   p->copy_len == RDMAMSG_HDR + 5 && h->type == W_DATA &&
		   h->flags == (F_FIRST | F_LAST) && h->ctl == 1 &&
		   !memcmp(p->copy + RDMAMSG_HDR, "hello", 5),
	   "inline send: seq 0, header (the owed credit in it) and payload, "
	   "one piece");
	ok(ep->credits == 7 && ep->ctl_to_return == 0 && nsent == 0,
	   "one credit used; not reported before tx_done");

	/* a copied send above the inline size: the copy buffer is the
	 * lane's until tx_done */
	{
		char big[200];

		memset(big, 'c', sizeof(big));
		ret = rdmamsg_send(ep, big, sizeof(big), (void *)(intptr_t)2);
	}
	p = &fk->posts[1];
	ok(ret == 0 && p->seq == 1 && !(p->flags & RDMAMSG__TX_INLINE) &&
		   p->nsge == 1 && p->sge[0].length == RDMAMSG_HDR + 200 &&
		   p->sge[0].lkey != 0,
	   "copied send: one registered sge, header and payload");

	/* zero copy: the user's pool buffer, its lkey, owned until done */
	if (rdmamsg_buf_alloc(&ctx, 1000, &zb))
		bail_out("buf_alloc");
	memset(zb->data, 'z', 1000);
	ret = rdmamsg_send_buf(ep, zb, 1000, (void *)(intptr_t)3);
	p = &fk->posts[2];
	ok(ret == 0 && p->seq == 2 && p->nsge == 2 &&
		   p->sge[1].addr == (uintptr_t)zb->data &&
		   p->sge[1].length == 1000 && p->sge[1].lkey == zb->lkey &&
		   (p->flags & RDMAMSG__TX_SIGNAL),
	   "zero-copy send: payload sge is the buffer with its lkey, "
	   "signalled");
	ok(zb->state == BUF_LIB, "...the buffer is the library's now");

	/* a post the lane refuses takes nothing */
	credits_before = (uint32_t)ep->credits;
	head_before = ep->sq_head;
	fk->fail_next = EINVAL;
	ret = rdmamsg_send(ep, "no", 2, (void *)(intptr_t)9);
	ok(ret == -ENOTCONN && (uint32_t)ep->credits == credits_before &&
		   ep->sq_head == head_before && fk->nposts == 3,
	   "a refused post: -ENOTCONN, no credit, no sequence used");

	/* tx_done up to seq 1: two sends reported, in order, once */
	fk->l.cbs->tx_done(fk->l.owner, 1, 0);
	ok(nsent == 2 && sent[0] == 1 && sent[1] == 2 && !send_status[0] &&
		   !send_status[1] && ep->sq_tail == 2,
	   "tx_done(1): sends 0 and 1 reported in order");
	fk->l.cbs->tx_done(fk->l.owner, 1, 0);
	ok(nsent == 2, "a repeated tx_done reports nothing twice");
	{
		size_t in_use = ctx.pool.in_use;

		fk->l.cbs->tx_done(fk->l.owner, 2, 0);
		ok(nsent == 3 && sent[2] == 3 && ctx.pool.in_use < in_use,
		   "tx_done(2): the zero-copy send reported, its buffer "
		   "back in the pool");
	}

	/* a data receive, delivered; reposted credit only once reposted */
	r = incoming(ep, 1, W_DATA, F_FIRST | F_LAST, 0, 0, "world", 5);
	ok(r == RDMAMSG__RX_DATA && n_recv == 1 && got_len == 5 &&
		   !memcmp(got, "world", 5) && ep->to_return == 0,
	   "a data receive delivered; no credit owed before the repost");
	fk->l.cbs->reposted(fk->l.owner, 1, 0);
	ok(ep->to_return == 1, "reposted(): one data credit owed");

	/* recv_keep swaps the ring slot: the lane reposts a fresh buffer */
	slot_before = ep->rxb[2];
	keep_next = 1;
	r = incoming(ep, 2, W_DATA, F_FIRST | F_LAST, 0, 0, "keep", 4);
	ok(r == RDMAMSG__RX_DATA && kept == slot_before &&
		   ep->rxb[2] != slot_before && ep->rxb[2] &&
		   !memcmp(kept->data, "keep", 4),
	   "recv_keep: the user has the buffer, the ring slot a new one");
	rdmamsg_buf_free(kept);

	/* a flushed receive gives nothing back and changes nothing */
	ok(fk->l.cbs->rx(fk->l.owner, &ep->rxb[3], 0, -ECANCELED, 0) == 0 &&
		   ep->st == EPS_UP,
	   "a flushed receive: not reposted, still up");

	/* a write with immediate uses a data credit, no buffer */
	{
		uint64_t before = ep->received_total;

		ok(fk->l.cbs->rx(fk->l.owner, &ep->rxb[4], 4096,
				 RDMAMSG__RX_WRITE_IMM,
				 77) == RDMAMSG__RX_DATA &&
			   ep->received_total == before + 1 && n_recv == 2,
		   "a write with immediate: a data repost, not delivered as a "
		   "message");
	}

	/* one more send in flight, then the lane fails */
	rdmamsg_send(ep, "last", 4, (void *)(intptr_t)4);
	fk->l.cbs->down(fk->l.owner, -ECONNRESET);
	ok(ep->st == EPS_DOWN && n_disc == 1 && disc_status == -ECONNRESET,
	   "down(): DOWN, on_disconnect(-ECONNRESET) once");
	ok(fk->errors == 1 && fk->drain && fk->drain_seq == 4 &&
		   ep->sq_head == 5 && fk->l.down,
	   "the lane is stopped with a drain request after the last send");
	is_int(rdmamsg_send(ep, "x", 1, NULL), -ENOTCONN, "no send once DOWN");
	fk->l.cbs->down(fk->l.owner, -EREMOTEIO);
	ok(n_disc == 1 && fk->errors == 1, "a second failure: nothing new");

	/* close: waits for the drain's completion and the CM */
	ep->close_cb = NULL;
	is_int(rdmamsg_ep_close(ep, on_closed), 0, "close");
	ok(ep->st == EPS_FLUSHING, "FLUSHING: the connection is already down");
	rdmamsg__ep_step(ep);
	ok(n_closed == 0 && n_destroy == 0,
	   "not closed while the drain is outstanding");
	fk->l.cbs->tx_done(fk->l.owner, 3, -ECANCELED);
	fk->l.cbs->tx_done(fk->l.owner, 4, -ECANCELED);
	ok(nsent == 4 && sent[3] == 4 && send_status[3] == -ECANCELED,
	   "the flushed send is reported cancelled, once");
	ep->disc_seen = 1;
	n_unref = 0;
	rdmamsg__ep_step(ep);
	ok(n_closed == 1 && n_destroy == 1 && n_unref == 1 && fk == NULL,
	   "closed: the close callback once, the lane destroyed once");
	ok(nsent == 4, "nothing reported twice");

	/* a session bound again to a fresh lane (what replay will do) */
	if (rdmamsg__ep_new(&ctx, NULL, &cbs, NULL, &ep) ||
	    rdmamsg__ep_rx_fill(ep))
		bail_out("ep_new");
	ep->passive = 1;
	n_open = n_destroy = 0;
	ok(rdmamsg__ep_bind(ep, &fake_ops) == 0 && fk && fk->l.hold == 0 &&
		   fk->recvs_posted == 0,
	   "passive: not held, the ring not posted before the grant");
	rdmamsg__ep_unbind(ep);
	ok(ep->ln == NULL && n_destroy == 1, "unbind destroys the lane");
	ok(rdmamsg__ep_bind(ep, &fake_ops) == 0 && fk && ep->ln == &fk->l &&
		   n_open == 2,
	   "bound again to a fresh lane");
	rdmamsg__ep_free(ep);
	ok(n_destroy == 2, "freeing the session destroys its lane");

	/* credits: an update may take the goodbye's control credit, and
	 * control credits owed come back on their own once two are owed
	 * (msg.c): else a receiver owing data credits with only the
	 * goodbye's control credit waits for a peer out of data credits */
	ep = up_session(0);
	ok(ep->st == EPS_UP && ep->ctl_credits == 3 && ep->ctl_to_return == 1,
	   "credits: a second session up, granted 3 control credits");
	/* the peer holds our control credit: one is owed, not returned */
	fk->l.cbs->ready(fk->l.owner);
	is_int(fk->nposts, 0, "one control credit owed: nothing sent for it");
	/* down to the goodbye's control credit, all data credits owed */
	ep->ctl_credits = 1;
	ep->peer_ctl = 3;
	for (uint32_t i = 1; i <= ep->p.recv_depth; i++) {
		r = incoming(ep, i, W_DATA, F_FIRST | F_LAST, 0, 0, "d", 1);
		if (r != RDMAMSG__RX_DATA)
			break;
	}
	fk->l.cbs->reposted(fk->l.owner, ep->p.recv_depth, 0);
	fk->l.cbs->ready(fk->l.owner);
	p = &fk->posts[0];
	h = (const struct rdmamsg__wire *)p->copy;
	ok(fk->nposts == 1 && h->type == W_CREDIT &&
		   le16toh(h->credits) == ep->p.recv_depth && h->ctl == 1 &&
		   ep->ctl_credits == 0 && ep->to_return == 0,
	   "owing %u data credits with only the goodbye's control credit: "
	   "the update goes out on it",
	   ep->p.recv_depth);
	/* the peer's two control messages: both credits owed come back
	 * unasked (one returns ours) */
	r = incoming(ep, 1, W_CREDIT, 0, 0, 1, NULL, 0);
	r += incoming(ep, 2, W_KEEPALIVE, 0, 0, 0, NULL, 0);
	fk->l.cbs->reposted(fk->l.owner, 0, 2);
	fk->l.cbs->ready(fk->l.owner);
	p = &fk->posts[1];
	h = (const struct rdmamsg__wire *)p->copy;
	ok(r == 2 * RDMAMSG__RX_CTL && fk->nposts == 2 && h->type == W_CREDIT &&
		   le16toh(h->credits) == 0 && h->ctl == 2 &&
		   ep->ctl_credits == 0 && ep->ctl_to_return == 0,
	   "two control credits owed: returned on their own (on the last "
	   "control credit)");
	/* the peer's answer owes us one: no ping-pong */
	r = incoming(ep, 3, W_CREDIT, 0, 0, 1, NULL, 0);
	fk->l.cbs->reposted(fk->l.owner, 0, 1);
	fk->l.cbs->ready(fk->l.owner);
	ok(r == RDMAMSG__RX_CTL && fk->nposts == 2 && ep->ctl_credits == 1 &&
		   ep->ctl_to_return == 1,
	   "one control credit owed again: nothing sent (no ping-pong)");
	r = incoming(ep, 4, W_KEEPALIVE, 0, 0, 0, NULL, 0);
	fk->l.cbs->reposted(fk->l.owner, 0, 1);
	fk->l.cbs->ready(fk->l.owner);
	ok(r == RDMAMSG__RX_CTL && fk->nposts == 3 &&
		   ((const struct rdmamsg__wire *)fk->posts[2].copy)->ctl == 2,
	   "two owed again: returned");
	rdmamsg__ep_free(ep);

	test_pack();
	test_batch();
	test_grow();
	is_int(ctx.pool.in_use, 0, "every pool buffer came back");
	rdmamsg__pool_fini(&ctx);
	return done_testing();
}
